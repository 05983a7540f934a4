//! Tests of the SCRAM engine: the RFCs' vectors, a driver-side client, and bad input.

use super::*;

type TestResult = Result<(), Box<dyn std::error::Error>>;

#[expect(clippy::struct_field_names, reason = "RFC 5802's names")]
/// The driver's side of a conversation, written from RFC 5802 and the drivers' auth
/// specification with the primitives directly (not with the server's helpers).
struct Client {
    mechanism: Mechanism,
    user: String,
    password: String,
    nonce: String,
    client_first_bare: String,
    auth_message: String,
    server_key: Vec<u8>,
}

impl Client {
    fn new(mechanism: Mechanism, user: &str, password: &str, nonce: &str) -> Self {
        let escaped = user.replace('=', "=3D").replace(',', "=2C");
        Client {
            mechanism,
            user: user.to_owned(),
            password: password.to_owned(),
            nonce: nonce.to_owned(),
            client_first_bare: format!("n={escaped},r={nonce}"),
            auth_message: String::new(),
            server_key: Vec::new(),
        }
    }

    fn first(&self) -> Vec<u8> {
        format!("n,,{}", self.client_first_bare).into_bytes()
    }

    fn hmac(&self, key: &[u8], data: &[u8]) -> Vec<u8> {
        match self.mechanism {
            Mechanism::ScramSha1 => {
                let mut m = <Hmac<sha1::Sha1> as KeyInit>::new_from_slice(key).unwrap();
                Mac::update(&mut m, data);
                m.finalize().into_bytes().to_vec()
            }
            Mechanism::ScramSha256 => {
                let mut m = <Hmac<sha2::Sha256> as KeyInit>::new_from_slice(key).unwrap();
                Mac::update(&mut m, data);
                m.finalize().into_bytes().to_vec()
            }
        }
    }

    /// The client-final message for the server-first message.
    fn final_message(&mut self, server_first: &[u8]) -> Vec<u8> {
        let server_first = std::str::from_utf8(server_first).unwrap();
        let mut nonce = "";
        let mut salt = Vec::new();
        let mut iterations = 0;
        for field in server_first.split(',') {
            let (k, v) = field.split_at(2);
            match k {
                "r=" => nonce = v,
                "s=" => salt = BASE64.decode(v).unwrap(),
                "i=" => iterations = v.parse().unwrap(),
                _ => panic!("unexpected field {field}"),
            }
        }
        assert!(
            nonce.starts_with(&self.nonce),
            "{nonce} extends {}",
            self.nonce
        );
        let password = match self.mechanism {
            Mechanism::ScramSha1 => {
                let digest =
                    md5::Md5::digest(format!("{}:mongo:{}", self.user, self.password).as_bytes());
                digest.iter().fold(String::new(), |mut hex, b| {
                    use std::fmt::Write as _;
                    write!(hex, "{b:02x}").unwrap();
                    hex
                })
            }
            Mechanism::ScramSha256 => stringprep::saslprep(&self.password).unwrap().into(),
        };
        let mut salted = vec![0; self.mechanism.hash_len()];
        match self.mechanism {
            Mechanism::ScramSha1 => pbkdf2::pbkdf2_hmac::<sha1::Sha1>(
                password.as_bytes(),
                &salt,
                iterations,
                &mut salted,
            ),
            Mechanism::ScramSha256 => pbkdf2::pbkdf2_hmac::<sha2::Sha256>(
                password.as_bytes(),
                &salt,
                iterations,
                &mut salted,
            ),
        }
        let client_key = self.hmac(&salted, b"Client Key");
        let stored_key = match self.mechanism {
            Mechanism::ScramSha1 => sha1::Sha1::digest(&client_key).to_vec(),
            Mechanism::ScramSha256 => sha2::Sha256::digest(&client_key).to_vec(),
        };
        self.server_key = self.hmac(&salted, b"Server Key");
        let without_proof = format!("c=biws,r={nonce}");
        self.auth_message = format!("{},{server_first},{without_proof}", self.client_first_bare);
        let signature = self.hmac(&stored_key, self.auth_message.as_bytes());
        let proof: Vec<u8> = client_key
            .iter()
            .zip(&signature)
            .map(|(k, s)| k ^ s)
            .collect();
        format!("{without_proof},p={}", BASE64.encode(proof)).into_bytes()
    }

    /// The server-final message proves the server knows the password.
    fn verify(&self, server_final: &[u8]) -> bool {
        let expected = self.hmac(&self.server_key, self.auth_message.as_bytes());
        server_final == format!("v={}", BASE64.encode(expected)).as_bytes()
    }
}

fn sha1_rfc_credential() -> ScramCredential {
    let salt = BASE64.decode("QSXCR+Q6sek8bf92").unwrap();
    ScramCredential::derive(Mechanism::ScramSha1, b"pencil", &salt, 4096).unwrap()
}

fn sha256_rfc_credential() -> ScramCredential {
    let salt = BASE64.decode("W22ZaJ0SNY7soEsUEjb6gQ==").unwrap();
    ScramCredential::derive(Mechanism::ScramSha256, b"pencil", &salt, 4096).unwrap()
}

/// Runs a conversation whose messages are given, with a fixed server nonce.
fn fixed_conversation(
    mechanism: Mechanism,
    credential: &ScramCredential,
    messages: [&str; 5],
    server_nonce: &str,
) -> TestResult {
    let [client_first, server_first, client_final, server_final, user] = messages;
    let mut server = ScramServer::new(mechanism);
    let first = server.start(client_first.as_bytes())?;
    assert_eq!(first.user, user);
    let reply = server.challenge_with_nonce(UserCredential::Found(credential), server_nonce)?;
    assert_eq!(String::from_utf8(reply)?, server_first);
    let reply = server.step(client_final.as_bytes())?;
    assert_eq!(String::from_utf8(reply.payload)?, server_final);
    assert!(!reply.done && !server.is_success());
    let reply = server.step(b"")?;
    assert_eq!(
        reply,
        StepReply {
            payload: Vec::new(),
            done: true
        }
    );
    assert!(server.is_success());
    Ok(())
}

#[test]
fn rfc_5802_sha1_vector() -> TestResult {
    fixed_conversation(
        Mechanism::ScramSha1,
        &sha1_rfc_credential(),
        [
            "n,,n=user,r=fyko+d2lbbFgONRv9qkxdawL",
            "r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,s=QSXCR+Q6sek8bf92,i=4096",
            "c=biws,r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,p=v0X8v3Bz2T0CJGbJQyF0X+HI4Ts=",
            "v=rmF9pqV8S7suAoZWja4dJRkFsKQ=",
            "user",
        ],
        "3rfcNHYJY1ZVvWVs7j",
    )
}

#[test]
fn rfc_7677_sha256_vector() -> TestResult {
    fixed_conversation(
        Mechanism::ScramSha256,
        &sha256_rfc_credential(),
        [
            "n,,n=user,r=rOprNGfwEbeRWgbNEkqO",
            "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,\
             i=4096",
            "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,\
             p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
            "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=",
            "user",
        ],
        "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0",
    )
}

/// The drivers' auth specification's SCRAM-SHA-1 example, which salts mongod's digest of
/// the password (`md5("user:mongo:pencil")`), with mongod's 16-byte salt and 10000 rounds.
#[test]
fn mongodb_spec_sha1_vector_with_password_digest() -> TestResult {
    let credential = make_credential(
        Mechanism::ScramSha1,
        "user",
        "pencil",
        10_000,
        SaltSource::Fixed(BASE64.decode("rQ9ZY3MntBeuP3E1TDVC4w==")?),
    )?;
    fixed_conversation(
        Mechanism::ScramSha1,
        &credential,
        [
            "n,,n=user,r=fyko+d2lbbFgONRv9qkxdawL",
            "r=fyko+d2lbbFgONRv9qkxdawLHo+Vgk7qvUOKUwuWLIWg4l/9SraGMHEE,\
             s=rQ9ZY3MntBeuP3E1TDVC4w==,i=10000",
            "c=biws,r=fyko+d2lbbFgONRv9qkxdawLHo+Vgk7qvUOKUwuWLIWg4l/9SraGMHEE,\
             p=MC2T8BvbmWRckDw8oWl5IVghwCY=",
            "v=UMWeI25JD1yNYZRMpZ4VHvhZ9e0=",
            "user",
        ],
        "Ho+Vgk7qvUOKUwuWLIWg4l/9SraGMHEE",
    )
}

#[test]
fn password_digest_and_preparation() -> TestResult {
    // md5("user:mongo:pencil"), as in the drivers' specification's example.
    assert_eq!(
        mongo_password_digest("user", "pencil"),
        "1c33006ec1ffd90f9cadcbcc0e118200"
    );
    let sha256 = Mechanism::ScramSha256;
    assert_eq!(sha256.prepare_password("u", "\u{2168}")?, "IX");
    assert_eq!(sha256.prepare_password("u", "I\u{00AD}X")?, "IX");
    assert_eq!(sha256.prepare_password("u", "a\u{00A0}b")?, "a b");
    let err = sha256.prepare_password("u", "\u{0007}").unwrap_err();
    assert_eq!(err.code, ErrorCode::BadValue);
    assert_eq!(err.message, "Unable to normalize input string");
    // SCRAM-SHA-1 does not prepare: the digest is of the password as given.
    assert_ne!(
        Mechanism::ScramSha1.prepare_password("u", "\u{2168}")?,
        Mechanism::ScramSha1.prepare_password("u", "IX")?
    );
    Ok(())
}

#[test]
fn credentials_as_mongod_stores_them() -> TestResult {
    for mechanism in Mechanism::ALL {
        let iterations = mechanism.default_iteration_count();
        let credential =
            make_credential(mechanism, "alice", "secret", iterations, SaltSource::Random)?;
        assert_eq!(BASE64.decode(&credential.salt)?.len(), mechanism.salt_len());
        assert_eq!(
            BASE64.decode(&credential.stored_key)?.len(),
            mechanism.hash_len()
        );
        assert_eq!(
            BASE64.decode(&credential.server_key)?.len(),
            mechanism.hash_len()
        );
        let doc = credential.to_document();
        let keys: Vec<&str> = doc.keys().map(String::as_str).collect();
        assert_eq!(keys, ["iterationCount", "salt", "storedKey", "serverKey"]);
        assert_eq!(doc.get("iterationCount"), Some(&Bson::Int32(iterations)));
        assert_eq!(ScramCredential::from_document(&doc)?, credential);
        // Two credentials of one password differ by their salt.
        let other = make_credential(mechanism, "alice", "secret", iterations, SaltSource::Random)?;
        assert_ne!(other.salt, credential.salt);
        assert_ne!(other.stored_key, credential.stored_key);
        // The keys stay out of Debug.
        let debug = format!("{credential:?}");
        assert!(!debug.contains(&credential.stored_key), "{debug}");
        assert!(!debug.contains(&credential.server_key), "{debug}");
    }
    assert_eq!(Mechanism::ScramSha1.default_iteration_count(), 10_000);
    assert_eq!(Mechanism::ScramSha256.default_iteration_count(), 15_000);
    assert_eq!(Mechanism::ScramSha1.salt_len(), 16);
    assert_eq!(Mechanism::ScramSha256.salt_len(), 28);
    Ok(())
}

#[test]
fn credential_documents_are_checked() -> TestResult {
    let good = sha256_rfc_credential().to_document();
    let mut as_long = good.clone();
    as_long.insert("iterationCount", 4096_i64);
    assert_eq!(
        ScramCredential::from_document(&as_long)?.iteration_count,
        4096
    );
    let mut as_double = good.clone();
    as_double.insert("iterationCount", 4096.0);
    assert_eq!(
        ScramCredential::from_document(&as_double)?.iteration_count,
        4096
    );
    for (field, value) in [
        ("iterationCount", Bson::String("4096".into())),
        ("iterationCount", Bson::Double(4096.5)),
        ("iterationCount", Bson::Int64(i64::MAX)),
        ("salt", Bson::Int32(1)),
        ("storedKey", Bson::Null),
        ("serverKey", Bson::Boolean(true)),
    ] {
        let mut bad = good.clone();
        bad.insert(field, value);
        let err = ScramCredential::from_document(&bad).unwrap_err();
        assert_eq!(err.code, ErrorCode::BadValue, "{field}");
    }
    let mut missing = good.clone();
    missing.remove("salt");
    assert!(ScramCredential::from_document(&missing).is_err());
    Ok(())
}

#[test]
fn make_credential_refuses_what_mongod_refuses() {
    let err =
        make_credential(Mechanism::ScramSha256, "u", "p", 4095, SaltSource::Random).unwrap_err();
    assert_eq!(err.code, ErrorCode::Location(50662));
    let err = make_credential(Mechanism::ScramSha1, "u", "p", -1, SaltSource::Random).unwrap_err();
    assert_eq!(err.code, ErrorCode::Location(50662));
    let err = make_credential(
        Mechanism::ScramSha256,
        "u",
        "p",
        4096,
        SaltSource::Fixed(vec![0; 16]),
    )
    .unwrap_err();
    assert_eq!(err.code, ErrorCode::Location(17450));
    let err = make_credential(
        Mechanism::ScramSha256,
        "u",
        "\u{0}",
        4096,
        SaltSource::Random,
    )
    .unwrap_err();
    assert_eq!(err.code, ErrorCode::BadValue);
}

/// Logs `user`/`password` in against `credential` the way drivers do; returns the
/// server's error, if any.
fn login(
    mechanism: Mechanism,
    credential: UserCredential<'_>,
    user: &str,
    password: &str,
    skip_empty_exchange: bool,
) -> Result<ScramServer, ScramError> {
    let mut client = Client::new(mechanism, user, password, "clientNonce0123456789");
    let mut server = ScramServer::new(mechanism);
    server.set_skip_empty_exchange(skip_empty_exchange);
    let first = server.start(&client.first())?;
    assert_eq!(first.user, user);
    assert_eq!(server.user(), Some(user));
    let server_first = server.challenge(credential)?;
    let client_final = client.final_message(&server_first);
    let reply = server.step(&client_final)?;
    assert!(
        client.verify(&reply.payload),
        "the server proves the password"
    );
    assert_eq!(reply.done, skip_empty_exchange);
    if !reply.done {
        assert!(!server.is_success());
        let last = server.step(b"")?;
        assert!(last.done && last.payload.is_empty());
    }
    assert!(server.is_success() && server.is_finished());
    Ok(server)
}

#[test]
fn round_trips_for_both_mechanisms() -> TestResult {
    for mechanism in Mechanism::ALL {
        for (user, password) in [
            ("user", "pencil"),
            ("a,b=c", "p,=w"),
            ("émile", "mot de passe"),
            ("u", ""),
        ] {
            let credential = make_credential(
                mechanism,
                user,
                password,
                MIN_ITERATION_COUNT,
                SaltSource::Random,
            )?;
            for skip in [false, true] {
                login(
                    mechanism,
                    UserCredential::Found(&credential),
                    user,
                    password,
                    skip,
                )?;
            }
        }
    }
    Ok(())
}

/// SCRAM-SHA-256 prepares the password with `SASLprep` on both sides: "\u{2168}" (ROMAN
/// NUMERAL NINE) and "IX" are one password; SCRAM-SHA-1 does not, so they are two.
#[test]
fn saslprep_passwords() -> TestResult {
    let sha256 = Mechanism::ScramSha256;
    for (stored, given) in [
        ("\u{2168}", "IX"),
        ("IX", "\u{2168}"),
        ("\u{2168}", "\u{2168}"),
    ] {
        let credential = make_credential(sha256, "u", stored, 4096, SaltSource::Random)?;
        login(
            sha256,
            UserCredential::Found(&credential),
            "u",
            given,
            false,
        )?;
    }
    let sha1 = Mechanism::ScramSha1;
    let credential = make_credential(sha1, "u", "\u{2168}", 4096, SaltSource::Random)?;
    login(
        sha1,
        UserCredential::Found(&credential),
        "u",
        "\u{2168}",
        false,
    )?;
    let err = login(sha1, UserCredential::Found(&credential), "u", "IX", false).unwrap_err();
    assert_eq!(err.code, ErrorCode::AuthenticationFailed);
    Ok(())
}

/// Runs the first step and returns the server, the client and the client-final message.
fn to_proof(
    mechanism: Mechanism,
    credential: UserCredential<'_>,
    password: &str,
) -> Result<(ScramServer, Vec<u8>), ScramError> {
    let mut client = Client::new(mechanism, "user", password, "abcdefghijkl");
    let mut server = ScramServer::new(mechanism);
    server.start(&client.first())?;
    let server_first = server.challenge(credential)?;
    let client_final = client.final_message(&server_first);
    Ok((server, client_final))
}

fn assert_auth_failed(err: &ScramError) {
    assert_eq!(
        err.reply(),
        CommandError::new(ErrorCode::AuthenticationFailed, "Authentication failed.")
    );
}

fn assert_closed(server: &mut ScramServer) {
    assert!(server.is_finished() && !server.is_success());
    let err = server.step(b"").unwrap_err();
    assert_eq!(
        err.reply(),
        CommandError::new(ErrorCode::ProtocolError, "No SASL session state found")
    );
}

#[test]
fn wrong_password_fails_at_the_proof() -> TestResult {
    for mechanism in Mechanism::ALL {
        let credential = make_credential(mechanism, "user", "right", 4096, SaltSource::Random)?;
        let (mut server, client_final) =
            to_proof(mechanism, UserCredential::Found(&credential), "wrong")?;
        let err = server.step(&client_final).unwrap_err();
        assert_eq!(err.code, ErrorCode::AuthenticationFailed);
        assert_eq!(
            err.message,
            "SCRAM authentication failed, storedKey mismatch"
        );
        assert_auth_failed(&err);
        assert_closed(&mut server);
    }
    Ok(())
}

#[test]
fn unknown_user_takes_the_same_steps_and_fails_at_the_proof() -> TestResult {
    for mechanism in Mechanism::ALL {
        let salt_of = |reply: &[u8]| {
            let text = String::from_utf8(reply.to_vec()).unwrap();
            let salt = text.split(',').find_map(|f| f.strip_prefix("s=")).unwrap();
            let iterations = text.split(',').find_map(|f| f.strip_prefix("i=")).unwrap();
            (salt.to_owned(), iterations.to_owned())
        };
        let mut first_salts = Vec::new();
        for _ in 0..2 {
            let mut server = ScramServer::new(mechanism);
            let client = Client::new(mechanism, "ghost", "x", "abcdefghijkl");
            server.start(&client.first())?;
            let reply = server.challenge(UserCredential::Unknown)?;
            let (salt, iterations) = salt_of(&reply);
            assert_eq!(BASE64.decode(&salt)?.len(), mechanism.salt_len());
            assert_eq!(iterations, mechanism.default_iteration_count().to_string());
            first_salts.push(salt);
        }
        assert_eq!(
            first_salts[0], first_salts[1],
            "an unknown user's salt is stable"
        );
        let (mut server, client_final) = to_proof(mechanism, UserCredential::Unknown, "x")?;
        let err = server.step(&client_final).unwrap_err();
        assert_eq!(err.code, ErrorCode::AuthenticationFailed);
        assert_auth_failed(&err);
        assert_closed(&mut server);
    }
    Ok(())
}

#[test]
fn user_without_credentials_for_the_mechanism() {
    let mut server = ScramServer::new(Mechanism::ScramSha256);
    server.start(b"n,,n=user,r=abcdefgh").unwrap();
    let err = server.challenge(UserCredential::NoCredential).unwrap_err();
    assert_eq!(err.code, ErrorCode::MechanismUnavailable);
    assert_eq!(
        err.message,
        "Unable to use SCRAM-SHA-256 based authentication for user without any \
         SCRAM-SHA-256 credentials registered"
    );
    assert_auth_failed(&err);
    assert_closed(&mut server);
}

#[test]
fn corrupted_stored_credentials() {
    let good = sha256_rfc_credential();
    let corrupt = [
        ScramCredential {
            stored_key: "!!".into(),
            ..good.clone()
        },
        ScramCredential {
            server_key: BASE64.encode([0; 20]),
            ..good.clone()
        },
        ScramCredential {
            salt: String::new(),
            ..good.clone()
        },
        ScramCredential {
            iteration_count: 0,
            ..good.clone()
        },
    ];
    for credential in &corrupt {
        let mut server = ScramServer::new(Mechanism::ScramSha256);
        server.start(b"n,,n=user,r=abcdefgh").unwrap();
        let err = server
            .challenge(UserCredential::Found(credential))
            .unwrap_err();
        assert_eq!(err.code, ErrorCode::AuthenticationFailed);
        assert_eq!(
            err.message,
            "Unable to validate SCRAM-SHA-256 authentication due to corrupted stored \
             credentials"
        );
        assert_closed(&mut server);
    }
    // A SCRAM-SHA-256 credential does not serve SCRAM-SHA-1 (key lengths differ).
    let mut server = ScramServer::new(Mechanism::ScramSha1);
    server.start(b"n,,n=user,r=abcdefgh").unwrap();
    assert!(server.challenge(UserCredential::Found(&good)).is_err());
}

/// Client-first messages mongod refuses, with its messages.
#[test]
fn malformed_client_first() {
    let long = format!("n,,n=user,r={}", "x".repeat(MAX_PAYLOAD_LEN));
    let too_long = format!(
        "SCRAM message of {} bytes is longer than the limit of {MAX_PAYLOAD_LEN}",
        long.len()
    );
    let cases: Vec<(&[u8], &str)> = vec![
        (
            b"",
            "Incorrect number of arguments for first SCRAM client message, got 1 expected at least 3",
        ),
        (
            b"n",
            "Incorrect number of arguments for first SCRAM client message, got 1 expected at least 3",
        ),
        (
            b"n,",
            "Incorrect number of arguments for first SCRAM client message, got 2 expected at least 3",
        ),
        (
            b"n,,",
            "Incorrect number of arguments for first SCRAM client message, got 2 expected at least 3",
        ),
        (
            b"n,,n=user",
            "Incorrect number of arguments for first SCRAM client message, got 3 expected at least 3",
        ),
        (
            b"n,,n=user,,,",
            "Incorrect number of arguments for first SCRAM client message, got 3 expected at least 3",
        ),
        (
            b"p=tls-unique,,n=user,r=abcdefgh",
            "Server does not support channel binding",
        ),
        (
            b"x,,n=user,r=abcdefgh",
            "Incorrect SCRAM client message prefix: x",
        ),
        (
            b",,n=user,r=abcdefgh",
            "Incorrect SCRAM client message prefix: ",
        ),
        (
            b"n,b=other,n=user,r=abcdefgh",
            "Incorrect SCRAM authzid: b=other",
        ),
        (
            b"n,,m=ext,n=user,r=abcdefgh",
            "SCRAM mandatory extensions are not supported",
        ),
        (b"n,,n=,r=abcdefgh", "Invalid SCRAM user name: n="),
        (b"n,,u=user,r=abcdefgh", "Invalid SCRAM user name: u=user"),
        (
            b"n,a=other,n=user,r=abcdefgh",
            "SCRAM user name user does not match authzid other",
        ),
        (b"n,,n=user,r=abc", "Invalid SCRAM client nonce: r=abc"),
        (
            b"n,,n=user,x=abcdefgh",
            "Invalid SCRAM client nonce: x=abcdefgh",
        ),
        (b"n,,n=user,r=ab\xffcdefgh", "SCRAM message is not UTF-8"),
        (long.as_bytes(), &too_long),
    ];
    for (payload, message) in cases {
        let shown = String::from_utf8_lossy(&payload[..payload.len().min(40)]);
        let mut server = ScramServer::new(Mechanism::ScramSha256);
        let err = server.start(payload).unwrap_err();
        assert_eq!(err.code, ErrorCode::BadValue, "{shown}");
        assert_eq!(err.message, message, "{shown}");
        assert_auth_failed(&err);
        assert_closed(&mut server);
        let mut server = ScramServer::new(Mechanism::ScramSha256);
        assert!(server.start(payload).is_err());
        assert!(server.challenge(UserCredential::Unknown).is_err());
    }
}

/// What mongod accepts in a client-first message beyond `n,,n=user,r=nonce`.
#[test]
fn client_first_variants() -> TestResult {
    let cases: [(&[u8], &str, Option<&str>); 6] = [
        (b"y,,n=user,r=abcdefgh", "user", None),
        (b"n,a=user,n=user,r=abcdefgh", "user", Some("user")),
        (b"n,a=,n=user,r=abcdefgh", "user", None),
        (b"n,,n=a=2Cb=3Dc,r=abcdefgh", "a,b=c", None),
        (b"n,a=a,b,n=a=2Cb,r=abcdefgh", "a,b", None),
        (b"n,,n=user,,r=abcdefgh,ext=1", "user", None),
    ];
    for (payload, user, authzid) in cases {
        let mut server = ScramServer::new(Mechanism::ScramSha1);
        match server.start(payload) {
            Ok(first) => {
                assert_eq!(first.user, user, "{payload:?}");
                assert_eq!(first.authzid.as_deref(), authzid, "{payload:?}");
            }
            // "a=a,b" splits at the first commas: authzid "a", bare "b,n=…".
            Err(e) => assert_eq!(e.message, "Invalid SCRAM user name: b", "{payload:?}"),
        }
    }
    // The authzid is compared with the unescaped user name.
    let mut server = ScramServer::new(Mechanism::ScramSha1);
    let first = server.start(b"n,a=a=b,n=a=3Db,r=abcdefgh")?;
    assert_eq!(first.user, "a=b");
    assert_eq!(first.authzid.as_deref(), Some("a=b"));
    Ok(())
}

fn server_awaiting_proof() -> (ScramServer, String) {
    let credential = sha256_rfc_credential();
    let mut server = ScramServer::new(Mechanism::ScramSha256);
    server.start(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO").unwrap();
    server
        .challenge_with_nonce(
            UserCredential::Found(&credential),
            "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0",
        )
        .unwrap();
    (
        server,
        "rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0".to_owned(),
    )
}

/// Client-final messages mongod refuses, with its messages.
#[test]
fn malformed_client_final() {
    const PROOF: &str = "p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=";
    let (_, nonce) = server_awaiting_proof();
    let bad_count = |n: usize| {
        format!(
            "Incorrect number of arguments for second SCRAM client message, got {n} \
             expected at least 3"
        )
    };
    let long = format!("c=biws,r={nonce},{}", "x".repeat(MAX_PAYLOAD_LEN));
    let too_long = format!(
        "SCRAM message of {} bytes is longer than the limit of {MAX_PAYLOAD_LEN}",
        long.len()
    );
    let cases: Vec<(String, ErrorCode, String)> = vec![
        (String::new(), ErrorCode::BadValue, bad_count(1)),
        ("c=biws".into(), ErrorCode::BadValue, bad_count(1)),
        (
            format!("c=biws,r={nonce}"),
            ErrorCode::BadValue,
            format!("Incorrect SCRAM ClientProof: r={nonce}"),
        ),
        (
            format!("c=biws,r={nonce},p="),
            ErrorCode::BadValue,
            "Incorrect SCRAM ClientProof: p=".into(),
        ),
        (
            format!("c=biws,r={nonce},"),
            ErrorCode::BadValue,
            "Incorrect SCRAM ClientProof: ".into(),
        ),
        (format!(",{PROOF}"), ErrorCode::BadValue, bad_count(1)),
        (
            format!("r={nonce},{PROOF}"),
            ErrorCode::BadValue,
            bad_count(2),
        ),
        (
            format!("x=biws,r={nonce},{PROOF}"),
            ErrorCode::BadValue,
            "Incorrect SCRAM channel binding: x=biws".into(),
        ),
        (
            format!("c=,r={nonce},{PROOF}"),
            ErrorCode::BadValue,
            "Incorrect SCRAM channel binding: c=".into(),
        ),
        (
            format!("c=biws,n={nonce},{PROOF}"),
            ErrorCode::BadValue,
            format!("Incorrect SCRAM client|server nonce: n={nonce}"),
        ),
        (
            format!("c=biws,r=rOprNGfwEbeRWgbNEkqO,{PROOF}"),
            ErrorCode::BadValue,
            format!(
                "Unmatched SCRAM nonce received from client in second step, expected {nonce} but received rOprNGfwEbeRWgbNEkqO"
            ),
        ),
        (
            format!("c=biws,r={nonce},p=%%%%"),
            ErrorCode::BadValue,
            "Invalid SCRAM ClientProof: not base64".into(),
        ),
        (
            format!("c=biws,r={nonce},p=AAAA"),
            ErrorCode::BadValue,
            "Invalid SCRAM ClientProof: 3 bytes, expected 32".into(),
        ),
        (
            format!("c=biws,r={nonce},p={}", BASE64.encode([0; 32])),
            ErrorCode::AuthenticationFailed,
            "SCRAM authentication failed, storedKey mismatch".into(),
        ),
        // The proof is bound to the channel-binding field the client signed.
        (
            format!("c=eSws,r={nonce},{PROOF}"),
            ErrorCode::AuthenticationFailed,
            "SCRAM authentication failed, storedKey mismatch".into(),
        ),
        (long.clone(), ErrorCode::BadValue, too_long),
    ];
    for (payload, code, message) in cases {
        let shown = &payload[..payload.len().min(80)];
        let (mut server, _) = server_awaiting_proof();
        let err = server.step(payload.as_bytes()).unwrap_err();
        assert_eq!(
            (err.code, err.message.as_str()),
            (code, message.as_str()),
            "{shown}"
        );
        assert_auth_failed(&err);
        assert_closed(&mut server);
    }
    // The valid message, once the conversation failed, is refused too.
    let (mut server, _) = server_awaiting_proof();
    assert!(server.step(b"garbage").is_err());
    let valid = format!("c=biws,r={nonce},{PROOF}");
    assert_eq!(
        server.step(valid.as_bytes()).unwrap_err().code,
        ErrorCode::ProtocolError
    );
    // Extensions after the nonce are signed, and accepted (mongod skips them).
    let (mut server, _) = server_awaiting_proof();
    assert!(server.step(valid.as_bytes()).is_ok());
}

/// A client-final message recorded from one conversation fails in another (its nonce is
/// the other conversation's), and a conversation that succeeded takes no more steps.
#[test]
fn replayed_client_final() -> TestResult {
    let mechanism = Mechanism::ScramSha256;
    let credential = make_credential(mechanism, "user", "pw", 4096, SaltSource::Random)?;
    let (mut first, recorded) = to_proof(mechanism, UserCredential::Found(&credential), "pw")?;
    first.set_skip_empty_exchange(true);
    assert!(first.step(&recorded)?.done);
    assert!(first.is_success());
    assert_eq!(
        first.step(&recorded).unwrap_err().code,
        ErrorCode::ProtocolError
    );

    let client = Client::new(mechanism, "user", "pw", "abcdefghijkl");
    let mut second = ScramServer::new(mechanism);
    second.start(&client.first())?;
    second.challenge(UserCredential::Found(&credential))?;
    let err = second.step(&recorded).unwrap_err();
    assert_eq!(err.code, ErrorCode::BadValue);
    assert!(
        err.message.starts_with("Unmatched SCRAM nonce"),
        "{}",
        err.message
    );
    assert_auth_failed(&err);
    assert_closed(&mut second);
    Ok(())
}

/// Each conversation draws its own server nonce, of 24 random bytes in base64.
#[test]
fn server_nonces_are_fresh() -> TestResult {
    let credential = sha256_rfc_credential();
    let mut nonces = Vec::new();
    for _ in 0..2 {
        let mut server = ScramServer::new(Mechanism::ScramSha256);
        server.start(b"n,,n=user,r=abcd")?;
        let reply = String::from_utf8(server.challenge(UserCredential::Found(&credential))?)?;
        let nonce = reply
            .split(',')
            .find_map(|f| f.strip_prefix("r=abcd"))
            .unwrap_or("");
        assert_eq!(BASE64.decode(nonce)?.len(), SERVER_NONCE_BYTES);
        nonces.push(nonce.to_owned());
    }
    assert_ne!(nonces[0], nonces[1]);
    Ok(())
}

#[test]
fn steps_out_of_order() {
    let mut server = ScramServer::new(Mechanism::ScramSha1);
    let err = server.step(b"c=biws,r=abcdefgh,p=AAAA").unwrap_err();
    assert_eq!(
        err.reply(),
        CommandError::new(
            ErrorCode::ProtocolError,
            "saslContinue must follow saslStart"
        )
    );
    assert_closed(&mut server);

    let mut server = ScramServer::new(Mechanism::ScramSha1);
    assert!(server.challenge(UserCredential::Unknown).is_err());
    assert_closed(&mut server);

    let mut server = ScramServer::new(Mechanism::ScramSha1);
    server.start(b"n,,n=user,r=abcdefgh").unwrap();
    assert!(server.start(b"n,,n=user,r=abcdefgh").is_err());
    assert_closed(&mut server);

    // Between start and challenge, a step is refused.
    let mut server = ScramServer::new(Mechanism::ScramSha1);
    server.start(b"n,,n=user,r=abcdefgh").unwrap();
    assert_eq!(server.step(b"").unwrap_err().code, ErrorCode::ProtocolError);
}

/// After the server signature, mongod does not read the client's last message: any
/// payload ends the conversation (drivers send an empty one).
#[test]
fn the_empty_exchange() -> TestResult {
    let mechanism = Mechanism::ScramSha1;
    let credential = make_credential(mechanism, "user", "pencil", 4096, SaltSource::Random)?;
    let (mut server, client_final) =
        to_proof(mechanism, UserCredential::Found(&credential), "pencil")?;
    let reply = server.step(&client_final)?;
    assert!(!reply.done);
    assert!(!server.is_success());
    let last = server.step(b"anything")?;
    assert!(last.done && last.payload.is_empty() && server.is_success());
    assert_eq!(server.step(b"").unwrap_err().code, ErrorCode::ProtocolError);
    Ok(())
}

#[test]
fn options() {
    let mut server = ScramServer::new(Mechanism::ScramSha256);
    server.set_options(&bson::rawdoc! {}).unwrap();
    server.set_options(&bson::rawdoc! {"other": 1}).unwrap();
    server
        .set_options(&bson::rawdoc! {"skipEmptyExchange": true})
        .unwrap();
    assert!(server.skip_empty_exchange);
    for bad in [
        bson::rawdoc! {"skipEmptyExchange": 1},
        bson::rawdoc! {"skipEmptyExchange": "true"},
    ] {
        let err = server.set_options(&bad).unwrap_err();
        assert_eq!(
            err,
            CommandError::new(ErrorCode::BadValue, "skipEmptyExchange must be boolean")
        );
    }
}

#[test]
fn mechanism_names() {
    assert_eq!(
        Mechanism::from_name("SCRAM-SHA-1"),
        Some(Mechanism::ScramSha1)
    );
    assert_eq!(
        Mechanism::from_name("SCRAM-SHA-256"),
        Some(Mechanism::ScramSha256)
    );
    assert_eq!(Mechanism::from_name("scram-sha-256"), None);
    assert_eq!(Mechanism::from_name("PLAIN"), None);
    assert_eq!(Mechanism::ScramSha256.to_string(), "SCRAM-SHA-256");
}

proptest::proptest! {
    /// Any bytes, at any step, after a valid start or not, give an error or a reply and
    /// never a panic; a conversation given garbage at the proof never succeeds.
    #[test]
    fn any_bytes_at_any_step(
        first in proptest::collection::vec(proptest::num::u8::ANY, 0..200),
        second in proptest::collection::vec(proptest::num::u8::ANY, 0..200),
        third in proptest::collection::vec(proptest::num::u8::ANY, 0..50),
        valid_start in proptest::bool::ANY,
    ) {
        let credential = sha256_rfc_credential();
        let mut server = ScramServer::new(Mechanism::ScramSha256);
        let started = if valid_start {
            server.start(b"n,,n=user,r=abcdefgh").is_ok()
        } else {
            server.start(&first).is_ok()
        };
        if started {
            let _ = server.challenge(UserCredential::Found(&credential));
        }
        let _ = server.step(&second);
        let _ = server.step(&third);
        proptest::prop_assert!(!server.is_success());
    }
}

#[test]
fn sasl_payloads() {
    let generic = bson::Binary {
        subtype: bson::spec::BinarySubtype::Generic,
        bytes: b"n,,n=user".to_vec(),
    };
    let payload = SaslPayload::parse(RawBsonRef::Binary(bson::RawBinaryRef {
        subtype: generic.subtype,
        bytes: &generic.bytes,
    }))
    .unwrap();
    assert_eq!(
        payload,
        SaslPayload {
            bytes: generic.bytes.clone(),
            base64: false
        }
    );
    assert_eq!(
        payload.reply(b"r=x".to_vec()),
        Bson::Binary(bson::Binary {
            subtype: bson::spec::BinarySubtype::Generic,
            bytes: b"r=x".to_vec(),
        })
    );
    let payload = SaslPayload::parse(RawBsonRef::String("biwsbj11c2Vy")).unwrap();
    assert_eq!(
        payload,
        SaslPayload {
            bytes: b"n,,n=user".to_vec(),
            base64: true
        }
    );
    assert_eq!(payload.reply(b"r=x".to_vec()), Bson::String("cj14".into()));
    assert_eq!(
        SaslPayload::parse(RawBsonRef::String("")).unwrap().bytes,
        b""
    );
    // mongod ignores the bits after the last whole byte.
    assert_eq!(
        SaslPayload::parse(RawBsonRef::String("QR=="))
            .unwrap()
            .bytes,
        b"A"
    );

    let err = |value| SaslPayload::parse(value).unwrap_err();
    assert_eq!(
        err(RawBsonRef::String("abc")),
        CommandError::new(
            ErrorCode::Location(10270),
            "Failed decoding SASL payload: invalid base64"
        )
    );
    assert_eq!(
        err(RawBsonRef::String("ab!d")).code,
        ErrorCode::Location(40537)
    );
    assert_eq!(
        err(RawBsonRef::String("=AAA")).code,
        ErrorCode::Location(40537)
    );
    assert_eq!(
        err(RawBsonRef::String("QQ==QUFB")).errmsg,
        "Failed decoding SASL payload: Invalid Base64 stream. Additional data following \
         terminating sequence."
    );
    assert_eq!(
        err(RawBsonRef::Int32(1)),
        CommandError::bad_value("Invalid SASLPayload type. Expected Base64 or BinData, got: int")
    );
    assert_eq!(
        err(RawBsonRef::Binary(bson::RawBinaryRef {
            subtype: bson::spec::BinarySubtype::Uuid,
            bytes: &[0; 16],
        })),
        CommandError::bad_value("Invalid SASLPayload subtype. Expected BinDataGeneral, got: UUID")
    );
}

/// Arbitrary bytes at any step give an error or a reply, never a panic.
#[test]
fn garbage_never_panics() {
    let samples: [&[u8]; 10] = [
        b"\0\0\0",
        b",,,,,,",
        b"n,,n=\xe2\x82,r=abcdefgh",
        b"==,==,==",
        b"n,,n==2,r=abcdefgh",
        b"p=,p=,p=",
        b"r=,s=,i=",
        "n,,n=\u{10FFFF},r=\u{2168}\u{2168}\u{2168}\u{2168}".as_bytes(),
        b"biwsbj11c2VyLHI9ZnlrbytkMmxiYkZnT05Sdjlxa3hkYXdM",
        b"c=biws,r=,p=,p=",
    ];
    for first in samples {
        for second in samples {
            let mut server = ScramServer::new(Mechanism::ScramSha256);
            if server.start(first).is_ok() {
                let _ = server.challenge(UserCredential::Unknown);
            }
            assert!(server.step(second).is_err());
            assert!(!server.is_success());
        }
    }
}
