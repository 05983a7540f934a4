//! Logging in, and abusing the login (issue 14): SCRAM-SHA-1 and SCRAM-SHA-256 over raw
//! `OP_MSG` bytes and through the `mongodb` driver, against a server with access control on.
//!
//! mongod's rules, from `sasl_commands.cpp`, `authentication_session.{h,cpp}` and
//! `authorization_session_impl.cpp`:
//!
//! - every failed step answers `AuthenticationFailed` (18) "Authentication failed." and nothing
//!   more (`doSaslStep`: "All the client needs to know is that authentication has failed"): a
//!   wrong password, an unknown user (7.0 fails `saslStart` with `UserNotFound`), a mechanism
//!   the user has no credential for, a malformed or truncated message;
//! - a failed step ends the conversation (`AuthenticationSession::doStep` marks the session
//!   failed), and so does success; `saslContinue` with no conversation answers
//!   `ProtocolError` (17) "No SASL session state found";
//! - the `conversationId` is always 1; another one answers `ProtocolError` "sasl: Mismatched
//!   conversation id" (and fails the conversation);
//! - the payload is `BinData` or a base64 string, answered in the same form;
//! - logging in as the same user again is allowed; as another user of the same database it is
//!   5626701 "Each client connection may only be authenticated once. Previously authenticated
//!   as: u@db", of another database 5626702 "Client has attempted to authenticate on multiple
//!   databases.Already authenticated as: u@db" (`addAndAuthorizeUser`).
//!
//! The server must never panic: after each abuse, the connection (or a new one) still works.

mod common;

use bson::{Binary, Bson, Document, doc, spec::BinarySubtype};
use common::scram::{self, Mech, bin};
use common::{RawConn, TestResult, TestServer, is_ok};
use ebb::auth::scram::MAX_PAYLOAD_LEN;
use mongodb::Client;
use mongodb::options::ClientOptions;

/// The one answer to every failed step.
fn auth_failed() -> Document {
    doc! {
        "ok": 0.0,
        "errmsg": "Authentication failed.",
        "code": 18,
        "codeName": "AuthenticationFailed",
    }
}

fn assert_auth_failed(reply: &Document, what: &str) {
    assert_eq!(reply, &auth_failed(), "{what}");
}

fn assert_protocol_error(reply: &Document, message: &str) {
    assert_eq!(
        reply,
        &doc! { "ok": 0.0, "errmsg": message, "code": 17, "codeName": "ProtocolError" },
    );
}

/// A server with `--auth` and these users: `root` (admin, root), `alice` and `bob` (app,
/// read), `carol` (other, read), `sha1only` (app, read, SCRAM-SHA-1 credentials only).
async fn server_with_users() -> TestResult<TestServer> {
    let server = TestServer::start_with(|c| c.auth = true).await?;
    let mut conn = server.raw().await?;
    let reply = conn
        .command(
            "admin",
            doc! {
                "createUser": "root", "pwd": "rootpwd",
                "roles": [{ "role": "root", "db": "admin" }],
            },
        )
        .await?;
    assert!(is_ok(&reply), "createUser root: {reply}");
    scram::login(&mut conn, "admin", Mech::Sha256, "root", "rootpwd").await?;
    for (user, db, pwd, mechanisms) in [
        ("alice", "app", "alicepwd", None),
        ("bob", "app", "bobpwd", None),
        ("carol", "other", "carolpwd", None),
        ("sha1only", "app", "sha1pwd", Some(vec!["SCRAM-SHA-1"])),
    ] {
        let mut command = doc! {
            "createUser": user, "pwd": pwd, "roles": [{ "role": "read", "db": db }],
        };
        if let Some(m) = mechanisms {
            command.insert("mechanisms", m);
        }
        let reply = conn.command(db, command).await?;
        assert!(is_ok(&reply), "createUser {user}: {reply}");
    }
    let reply = conn
        .command("app", doc! { "insert": "c", "documents": [{ "a": 1 }] })
        .await?;
    assert!(is_ok(&reply), "{reply}");
    Ok(server)
}

/// `saslStart` with `payload`.
async fn sasl_start(
    conn: &mut RawConn,
    db: &str,
    mech: Mech,
    payload: Bson,
) -> TestResult<Document> {
    Ok(conn
        .command(
            db,
            doc! {
                "saslStart": 1, "mechanism": mech.name(), "payload": payload,
                "options": { "skipEmptyExchange": true },
            },
        )
        .await?)
}

/// `saslContinue` with `payload`.
async fn sasl_continue(
    conn: &mut RawConn,
    db: &str,
    id: i32,
    payload: Bson,
) -> TestResult<Document> {
    Ok(conn
        .command(
            db,
            doc! { "saslContinue": 1, "conversationId": id, "payload": payload },
        )
        .await?)
}

/// The users `connectionStatus` reports for `conn`, as `user@db`.
async fn logged_in(conn: &mut RawConn) -> TestResult<Vec<String>> {
    let reply = conn
        .command("admin", doc! { "connectionStatus": 1 })
        .await?;
    assert!(is_ok(&reply), "{reply}");
    let mut out = Vec::new();
    for user in reply
        .get_document("authInfo")?
        .get_array("authenticatedUsers")?
    {
        let Bson::Document(user) = user else {
            return Err(format!("{reply}").into());
        };
        out.push(format!("{}@{}", user.get_str("user")?, user.get_str("db")?));
    }
    Ok(out)
}

/// Checks that `conn` still answers and reads `app.c` only when logged in.
async fn still_serves(conn: &mut RawConn, logged_in: bool) -> TestResult {
    conn.ping().await?;
    let reply = conn.command("app", doc! { "find": "c" }).await?;
    assert_eq!(is_ok(&reply), logged_in, "{reply}");
    Ok(())
}

/// A conversation started for `user`, with its client and conversation id.
async fn started(
    conn: &mut RawConn,
    db: &str,
    mech: Mech,
    user: &str,
    password: &str,
) -> TestResult<(scram::Client, i32, Vec<u8>)> {
    let client = scram::Client::new(mech, user, password);
    let reply = sasl_start(conn, db, mech, bin(&client.first())).await?;
    assert!(is_ok(&reply), "saslStart {user}: {reply}");
    assert_eq!(reply.get_i32("conversationId").ok(), Some(1), "{reply}");
    assert_eq!(reply.get_bool("done").ok(), Some(false), "{reply}");
    Ok((client, 1, scram::payload(&reply)))
}

fn driver_uri(server: &TestServer, credentials: &str, options: &str) -> String {
    format!(
        "mongodb://{credentials}@{}/?directConnection=true&serverSelectionTimeoutMS=10000\
         &connectTimeoutMS=10000{options}",
        server.addr()
    )
}

async fn driver(uri: &str) -> TestResult<Client> {
    let options = ClientOptions::parse(uri).await?;
    Ok(Client::with_options(options)?)
}

#[tokio::test]
async fn wrong_password_and_unknown_user_answer_alike() -> TestResult {
    let server = server_with_users().await?;
    let mut conn = server.raw().await?;
    for mech in [Mech::Sha1, Mech::Sha256] {
        // Wrong password: the proof fails.
        let (mut client, id, first) = started(&mut conn, "app", mech, "alice", "wrong").await?;
        let last = client.final_message(&first)?;
        let reply = sasl_continue(&mut conn, "app", id, bin(&last)).await?;
        assert_auth_failed(&reply, "wrong password");
        // The conversation is over.
        let reply = sasl_continue(&mut conn, "app", id, bin(&last)).await?;
        assert_protocol_error(&reply, "No SASL session state found");

        // Unknown user: saslStart fails already, with the same answer.
        let client = scram::Client::new(mech, "nobody", "whatever");
        let reply = sasl_start(&mut conn, "app", mech, bin(&client.first())).await?;
        assert_auth_failed(&reply, "unknown user");
        // A user of another database is unknown here.
        let client = scram::Client::new(mech, "carol", "carolpwd");
        let reply = sasl_start(&mut conn, "app", mech, bin(&client.first())).await?;
        assert_auth_failed(&reply, "user of another database");
        still_serves(&mut conn, false).await?;
    }
    // A mechanism the user has no credential for.
    let client = scram::Client::new(Mech::Sha256, "sha1only", "sha1pwd");
    let reply = sasl_start(&mut conn, "app", Mech::Sha256, bin(&client.first())).await?;
    assert_auth_failed(&reply, "SCRAM-SHA-256 for a SCRAM-SHA-1 user");
    // An unknown mechanism is named, as mongod names it.
    let reply = conn
        .command(
            "app",
            doc! { "saslStart": 1, "mechanism": "PLAIN-ISH", "payload": bin(b"x") },
        )
        .await?;
    assert_eq!(reply.get_i32("code").ok(), Some(334), "{reply}");
    assert_eq!(
        reply.get_str("errmsg").ok(),
        Some("Received authentication for mechanism PLAIN-ISH which is unknown or not enabled"),
        "{reply}"
    );
    assert!(logged_in(&mut conn).await?.is_empty());
    // After all that, the right password works on the same connection.
    scram::login(&mut conn, "app", Mech::Sha256, "alice", "alicepwd").await?;
    assert_eq!(logged_in(&mut conn).await?, ["alice@app"]);
    still_serves(&mut conn, true).await?;

    // Through the driver: both fail the same way, and the right password works.
    for credentials in ["alice:wrong", "nobody:whatever"] {
        for mechanism in ["SCRAM-SHA-1", "SCRAM-SHA-256"] {
            let client = driver(&driver_uri(
                &server,
                credentials,
                &format!("&authSource=app&authMechanism={mechanism}"),
            ))
            .await?;
            let err = client
                .database("app")
                .run_command(doc! { "ping": 1 })
                .await
                .expect_err("login must fail");
            let text = err.to_string();
            assert!(
                text.contains("Authentication failed."),
                "{credentials} {mechanism}: {text}"
            );
        }
    }
    Ok(())
}

#[tokio::test]
async fn truncated_and_malformed_client_first() -> TestResult {
    let server = server_with_users().await?;
    let mut conn = server.raw().await?;
    let good = "n,,n=alice,r=fyko+d2lbbFgONRv9qkxdawL";
    let mut payloads: Vec<Vec<u8>> = (0..good.len())
        .map(|n| good.as_bytes()[..n].to_vec())
        .collect();
    for bad in [
        "x,,n=alice,r=fyko+d2lbbFgONRv9qkxdawL",
        "p=tls-unique,,n=alice,r=fyko+d2lbbFgONRv9qkxdawL",
        "y,a=bob,n=alice,r=fyko+d2lbbFgONRv9qkxdawL",
        "n,,m=ext,n=alice,r=fyko+d2lbbFgONRv9qkxdawL",
        "n,,n=,r=fyko+d2lbbFgONRv9qkxdawL",
        "n,,r=fyko+d2lbbFgONRv9qkxdawL,n=alice",
        "n,,n=alice,r=abc",
        "n,,n=alice",
        ",,,,,,,,",
    ] {
        payloads.push(bad.as_bytes().to_vec());
    }
    payloads.push(vec![0xff, 0xfe, b',', b',', b'n']);
    payloads.push(b"n,,n=al\0ice,r=fyko+d2lbbFgONRv9qkxdawL".to_vec());
    for mech in [Mech::Sha1, Mech::Sha256] {
        for payload in &payloads {
            let reply = sasl_start(&mut conn, "app", mech, bin(payload)).await?;
            // A prefix that is a whole message (a shorter nonce of at least 4 characters) is
            // a valid start; every other one fails.
            let text = String::from_utf8_lossy(payload);
            if is_ok(&reply) {
                assert!(
                    text.starts_with("n,,n=alice,r=") && text.len() >= 17,
                    "{text}: {reply}"
                );
            } else {
                assert_auth_failed(&reply, &text);
            }
        }
    }
    still_serves(&mut conn, false).await?;
    scram::login(&mut conn, "app", Mech::Sha1, "alice", "alicepwd").await?;
    still_serves(&mut conn, true).await?;
    Ok(())
}

/// Broken versions of the client-final message `good` (`c=biws,r=<nonce>,p=<proof>`): cut
/// short at several places, with parts missing, altered or added.
fn broken_finals(good: &str) -> Vec<Vec<u8>> {
    let proof_at = good.find(",p=").unwrap_or(good.len());
    let without_proof = &good[..proof_at];
    let proof = good.get(proof_at + 3..).unwrap_or_default();
    let mut out: Vec<Vec<u8>> = [0, 1, 2, 7, proof_at, proof_at + 3, good.len() - 1]
        .iter()
        .map(|&n| good.as_bytes()[..n.min(good.len())].to_vec())
        .collect();
    for bad in [
        format!("{good},x=extra"),
        format!("{good}AAAA"),
        format!("{without_proof},p=!!!!"),
        format!("{without_proof},p=AAAA"),
        format!("{without_proof},p={}", &proof[4..]),
        good.replacen("c=biws", "c=", 1),
        good.replacen("c=biws", "c=eSws", 1),
        good.replacen(",r=", ",r=x", 1),
        format!("r=abcd,c=biws,p={proof}"),
        without_proof.to_owned(),
    ] {
        out.push(bad.into_bytes());
    }
    out.push(vec![0xc3, 0x28, b',', b'p', b'=']);
    out
}

#[tokio::test]
async fn truncated_and_malformed_client_final() -> TestResult {
    let server = server_with_users().await?;
    let mut conn = server.raw().await?;
    for mech in [Mech::Sha1, Mech::Sha256] {
        let count = broken_finals("c=biws,r=abcd,p=AAAAAAAA").len();
        // Each variant gets a conversation of its own (a failed step ends it), and is made
        // from that conversation's own good message, so that only the damage fails it.
        for i in 0..count {
            let (mut client, id, first) =
                started(&mut conn, "app", mech, "alice", "alicepwd").await?;
            let good = String::from_utf8(client.final_message(&first)?)?;
            let variant = broken_finals(&good).swap_remove(i);
            let reply = sasl_continue(&mut conn, "app", id, bin(&variant)).await?;
            assert_auth_failed(&reply, &String::from_utf8_lossy(&variant));
            let reply = sasl_continue(&mut conn, "app", id, bin(good.as_bytes())).await?;
            assert_protocol_error(&reply, "No SASL session state found");
        }
        still_serves(&mut conn, false).await?;
    }
    assert!(logged_in(&mut conn).await?.is_empty());
    Ok(())
}

#[tokio::test]
async fn replayed_client_final() -> TestResult {
    let server = server_with_users().await?;
    for mech in [Mech::Sha1, Mech::Sha256] {
        // A successful login, whose client-final message an eavesdropper keeps.
        let mut first_conn = server.raw().await?;
        let (mut client, id, first) =
            started(&mut first_conn, "app", mech, "alice", "alicepwd").await?;
        let captured = client.final_message(&first)?;
        let reply = sasl_continue(&mut first_conn, "app", id, bin(&captured)).await?;
        assert!(is_ok(&reply), "{reply}");
        assert_eq!(reply.get_bool("done").ok(), Some(true), "{reply}");
        assert!(client.verifies(&scram::payload(&reply)));

        // Replayed on the same connection after success: no conversation any more.
        let reply = sasl_continue(&mut first_conn, "app", id, bin(&captured)).await?;
        assert_protocol_error(&reply, "No SASL session state found");
        // Replayed in a new conversation on the same connection: the nonce differs. The
        // failed attempt does not log alice out.
        let (_, id, _) = started(&mut first_conn, "app", mech, "alice", "whatever").await?;
        let reply = sasl_continue(&mut first_conn, "app", id, bin(&captured)).await?;
        assert_auth_failed(&reply, "replay, same connection");
        assert_eq!(logged_in(&mut first_conn).await?, ["alice@app"]);

        // Replayed on another connection, in a new conversation.
        let mut other = server.raw().await?;
        let (_, id, _) = started(&mut other, "app", mech, "alice", "whatever").await?;
        let reply = sasl_continue(&mut other, "app", id, bin(&captured)).await?;
        assert_auth_failed(&reply, "replay, new connection");
        assert!(logged_in(&mut other).await?.is_empty());
        still_serves(&mut other, false).await?;
        // Without any conversation.
        let mut fresh = server.raw().await?;
        let reply = sasl_continue(&mut fresh, "app", 1, bin(&captured)).await?;
        assert_protocol_error(&reply, "No SASL session state found");
        assert!(logged_in(&mut fresh).await?.is_empty());
    }
    Ok(())
}

#[tokio::test]
async fn conversation_ids() -> TestResult {
    let server = server_with_users().await?;
    let mut conn = server.raw().await?;
    // saslContinue without saslStart.
    let reply = sasl_continue(&mut conn, "app", 1, bin(b"c=biws,r=abcd,p=AAAA")).await?;
    assert_protocol_error(&reply, "No SASL session state found");

    // Another id: refused, and the conversation is over.
    for wrong in [0, 2, -1, i32::MAX] {
        let (mut client, _, first) =
            started(&mut conn, "app", Mech::Sha256, "alice", "alicepwd").await?;
        let last = client.final_message(&first)?;
        let reply = sasl_continue(&mut conn, "app", wrong, bin(&last)).await?;
        assert_protocol_error(&reply, "sasl: Mismatched conversation id");
        let reply = sasl_continue(&mut conn, "app", 1, bin(&last)).await?;
        assert_protocol_error(&reply, "No SASL session state found");
    }
    assert!(logged_in(&mut conn).await?.is_empty());

    // Every conversation is number 1, the first and the later ones.
    for _ in 0..3 {
        let (_, id, _) = started(&mut conn, "app", Mech::Sha1, "alice", "alicepwd").await?;
        assert_eq!(id, 1);
    }
    // A new saslStart replaces the conversation in progress.
    let (mut client, _, first) =
        started(&mut conn, "app", Mech::Sha256, "alice", "alicepwd").await?;
    let stale = client.final_message(&first)?;
    let (mut client, _, first) =
        started(&mut conn, "app", Mech::Sha256, "alice", "alicepwd").await?;
    let fresh = client.final_message(&first)?;
    let reply = sasl_continue(&mut conn, "app", 1, bin(&stale)).await?;
    assert_auth_failed(&reply, "the replaced conversation's proof");
    let reply = sasl_continue(&mut conn, "app", 1, bin(&fresh)).await?;
    assert_protocol_error(&reply, "No SASL session state found");
    let (mut client, _, first) =
        started(&mut conn, "app", Mech::Sha256, "alice", "alicepwd").await?;
    let last = client.final_message(&first)?;
    let reply = sasl_continue(&mut conn, "app", 1, bin(&last)).await?;
    assert!(is_ok(&reply), "{reply}");
    assert_eq!(logged_in(&mut conn).await?, ["alice@app"]);
    Ok(())
}

#[tokio::test]
async fn oversized_payloads() -> TestResult {
    let server = server_with_users().await?;
    let mut conn = server.raw().await?;
    let prefix = "n,,n=alice,r=";
    let first_of = |len: usize| -> Vec<u8> {
        let mut p = prefix.as_bytes().to_vec();
        p.resize(len, b'a');
        p
    };
    // At the limit, a (long-nonced) client-first message is read; past it, refused.
    let reply = sasl_start(
        &mut conn,
        "app",
        Mech::Sha256,
        bin(&first_of(MAX_PAYLOAD_LEN)),
    )
    .await?;
    assert!(is_ok(&reply), "at the limit: {:?}", reply.get("errmsg"));
    let reply = sasl_start(
        &mut conn,
        "app",
        Mech::Sha256,
        bin(&first_of(MAX_PAYLOAD_LEN + 1)),
    )
    .await?;
    assert_auth_failed(&reply, "one byte past the limit");
    // Near the 16 MiB BSON limit, as BinData and as a base64 string.
    let huge = first_of(16 * 1024 * 1024 - 4096);
    let reply = sasl_start(&mut conn, "app", Mech::Sha1, bin(&huge)).await?;
    assert_auth_failed(&reply, "16 MiB");
    let encoded = {
        use base64::Engine as _;
        base64::engine::general_purpose::STANDARD.encode(&huge[..11 * 1024 * 1024])
    };
    let reply = sasl_start(&mut conn, "app", Mech::Sha1, Bson::String(encoded)).await?;
    assert_auth_failed(&reply, "11 MiB in base64");
    // In saslContinue.
    let (_, id, _) = started(&mut conn, "app", Mech::Sha256, "alice", "alicepwd").await?;
    let reply = sasl_continue(&mut conn, "app", id, bin(&huge)).await?;
    assert_auth_failed(&reply, "16 MiB client-final");
    // Speculative authentication with a huge payload: hello answers, without the field.
    let reply = conn
        .command(
            "admin",
            doc! {
                "hello": 1,
                "speculativeAuthenticate": {
                    "saslStart": 1, "mechanism": "SCRAM-SHA-256", "payload": bin(&huge), "db": "app",
                },
            },
        )
        .await?;
    assert!(is_ok(&reply), "hello");
    assert!(!reply.contains_key("speculativeAuthenticate"));
    still_serves(&mut conn, false).await?;
    scram::login(&mut conn, "app", Mech::Sha256, "alice", "alicepwd").await?;
    still_serves(&mut conn, true).await?;
    Ok(())
}

#[tokio::test]
async fn base64_string_payloads() -> TestResult {
    use base64::Engine as _;
    let b64 = |bytes: &[u8]| Bson::String(base64::engine::general_purpose::STANDARD.encode(bytes));
    let server = server_with_users().await?;
    let mut conn = server.raw().await?;
    for mech in [Mech::Sha1, Mech::Sha256] {
        let mut client = scram::Client::new(mech, "alice", "alicepwd");
        let reply = sasl_start(&mut conn, "app", mech, b64(&client.first())).await?;
        assert!(is_ok(&reply), "{reply}");
        assert!(
            matches!(reply.get("payload"), Some(Bson::String(_))),
            "{reply}"
        );
        let last = client.final_message(&scram::payload(&reply))?;
        let reply = sasl_continue(&mut conn, "app", 1, b64(&last)).await?;
        assert!(is_ok(&reply), "{reply}");
        assert!(
            matches!(reply.get("payload"), Some(Bson::String(_))),
            "{reply}"
        );
        assert_eq!(reply.get_bool("done").ok(), Some(true));
        assert!(client.verifies(&scram::payload(&reply)));
        assert_eq!(logged_in(&mut conn).await?, ["alice@app"]);
    }
    // Strings that are not base64, and payloads of other types: refused before any step
    // (the conversation in progress, if any, is not touched).
    let (mut client, _, first) =
        started(&mut conn, "app", Mech::Sha256, "alice", "alicepwd").await?;
    let last = client.final_message(&first)?;
    for (payload, code) in [
        (Bson::String("abc".into()), 10270),
        (Bson::String("ab=c".into()), 40537),
        (Bson::String("ab==abcd".into()), 40538),
        (Bson::String("a*b=".into()), 40537),
        (Bson::Int32(1), 2),
        (
            Bson::Binary(Binary {
                subtype: BinarySubtype::Uuid,
                bytes: vec![0; 16],
            }),
            2,
        ),
    ] {
        let reply = sasl_continue(&mut conn, "app", 1, payload.clone()).await?;
        assert_eq!(reply.get_i32("code").ok(), Some(code), "{payload}: {reply}");
        let reply = sasl_start(&mut conn, "app", Mech::Sha256, payload.clone()).await?;
        assert_eq!(reply.get_i32("code").ok(), Some(code), "{payload}: {reply}");
    }
    // The sasl_start calls above failed before replacing the conversation: it completes.
    let reply = sasl_continue(&mut conn, "app", 1, bin(&last)).await?;
    assert!(is_ok(&reply), "{reply}");
    Ok(())
}

#[tokio::test]
async fn both_mechanisms_raw_and_through_the_driver() -> TestResult {
    let server = server_with_users().await?;
    for mech in [Mech::Sha1, Mech::Sha256] {
        let mut conn = server.raw().await?;
        scram::login(&mut conn, "app", mech, "alice", "alicepwd").await?;
        assert_eq!(logged_in(&mut conn).await?, ["alice@app"]);
        still_serves(&mut conn, true).await?;
    }
    let mut conn = server.raw().await?;
    scram::login(&mut conn, "app", Mech::Sha1, "sha1only", "sha1pwd").await?;
    // saslSupportedMechs in hello names each user's mechanisms (and nothing for an unknown one).
    for (name, mechs) in [
        ("app.alice", Some(vec!["SCRAM-SHA-1", "SCRAM-SHA-256"])),
        ("app.sha1only", Some(vec!["SCRAM-SHA-1"])),
        ("app.nobody", None),
        ("other.alice", None),
    ] {
        let reply = conn
            .command("admin", doc! { "hello": 1, "saslSupportedMechs": name })
            .await?;
        assert!(is_ok(&reply), "{reply}");
        let got = reply.get_array("saslSupportedMechs").ok().map(|a| {
            a.iter()
                .filter_map(|m| m.as_str().map(str::to_owned))
                .collect::<Vec<_>>()
        });
        assert_eq!(
            got,
            mechs.map(|m| m.into_iter().map(str::to_owned).collect::<Vec<_>>()),
            "{name}"
        );
    }
    // The driver: each mechanism named, and negotiated (SCRAM-SHA-1 for sha1only).
    for (credentials, options) in [
        (
            "alice:alicepwd",
            "&authSource=app&authMechanism=SCRAM-SHA-1",
        ),
        (
            "alice:alicepwd",
            "&authSource=app&authMechanism=SCRAM-SHA-256",
        ),
        ("alice:alicepwd", "&authSource=app"),
        ("sha1only:sha1pwd", "&authSource=app"),
    ] {
        let client = driver(&driver_uri(&server, credentials, options)).await?;
        let n = client
            .database("app")
            .collection::<Document>("c")
            .count_documents(doc! {})
            .await?;
        assert_eq!(n, 1, "{credentials} {options}");
        let err = client
            .database("app")
            .collection::<Document>("c")
            .insert_one(doc! { "a": 2 })
            .await
            .expect_err("read only");
        assert!(err.to_string().contains("not authorized on app"), "{err}");
    }
    Ok(())
}

#[tokio::test]
async fn speculative_authentication() -> TestResult {
    let server = server_with_users().await?;
    // Raw: hello carries the first step, saslContinue finishes.
    for mech in [Mech::Sha1, Mech::Sha256] {
        let mut conn = server.raw().await?;
        let mut client = scram::Client::new(mech, "alice", "alicepwd");
        let reply = conn
            .command(
                "admin",
                doc! {
                    "hello": 1,
                    "speculativeAuthenticate": {
                        "saslStart": 1, "mechanism": mech.name(),
                        "payload": bin(&client.first()), "db": "app",
                        "options": { "skipEmptyExchange": true },
                    },
                },
            )
            .await?;
        assert!(is_ok(&reply), "{reply}");
        let spec = reply.get_document("speculativeAuthenticate")?;
        assert_eq!(spec.get_i32("conversationId").ok(), Some(1), "{spec}");
        assert_eq!(spec.get_bool("done").ok(), Some(false), "{spec}");
        let last = client.final_message(&scram::payload(spec))?;
        let reply = sasl_continue(&mut conn, "app", 1, bin(&last)).await?;
        assert!(is_ok(&reply), "{reply}");
        assert!(client.verifies(&scram::payload(&reply)));
        assert_eq!(logged_in(&mut conn).await?, ["alice@app"]);
    }
    // A speculative start that fails (unknown user, wrong mechanism, bad payload, no db)
    // leaves the field out; hello still answers and the client can log in the long way.
    let mut conn = server.raw().await?;
    for spec in [
        doc! { "saslStart": 1, "mechanism": "SCRAM-SHA-256", "payload": bin(b"n,,n=nobody,r=abcdefgh"), "db": "app" },
        doc! { "saslStart": 1, "mechanism": "SCRAM-SHA-256", "payload": bin(b"n,,n=sha1only,r=abcdefgh"), "db": "app" },
        doc! { "saslStart": 1, "mechanism": "SCRAM-SHA-256", "payload": bin(b"garbage"), "db": "app" },
        doc! { "saslStart": 1, "mechanism": "SCRAM-SHA-256", "payload": bin(b"n,,n=alice,r=abcdefgh") },
        doc! { "saslStart": 1, "mechanism": "NOPE", "payload": bin(b"n,,n=alice,r=abcdefgh"), "db": "app" },
        doc! { "saslStart": 1, "mechanism": "SCRAM-SHA-256", "payload": 12, "db": "app" },
    ] {
        let reply = conn
            .command(
                "admin",
                doc! { "hello": 1, "speculativeAuthenticate": spec.clone() },
            )
            .await?;
        assert!(is_ok(&reply), "{spec}: {reply}");
        assert!(
            !reply.contains_key("speculativeAuthenticate"),
            "{spec}: {reply}"
        );
    }
    scram::login(&mut conn, "app", Mech::Sha256, "alice", "alicepwd").await?;
    assert_eq!(logged_in(&mut conn).await?, ["alice@app"]);

    // The driver logs in speculatively by default (SCRAM-SHA-256 in its hello).
    for options in [
        "&authSource=app",
        "&authSource=app&authMechanism=SCRAM-SHA-1",
    ] {
        let client = driver(&driver_uri(&server, "alice:alicepwd", options)).await?;
        let reply = client
            .database("admin")
            .run_command(doc! { "connectionStatus": 1 })
            .await?;
        let users = reply
            .get_document("authInfo")?
            .get_array("authenticatedUsers")?;
        assert_eq!(
            users,
            &vec![Bson::Document(doc! { "user": "alice", "db": "app" })],
            "{reply}"
        );
    }
    Ok(())
}

#[tokio::test]
async fn reauthentication_as_another_user() -> TestResult {
    let server = server_with_users().await?;
    let mut conn = server.raw().await?;
    scram::login(&mut conn, "app", Mech::Sha256, "alice", "alicepwd").await?;
    // The same user again: allowed.
    scram::login(&mut conn, "app", Mech::Sha1, "alice", "alicepwd").await?;
    assert_eq!(logged_in(&mut conn).await?, ["alice@app"]);
    // Another user of the same database: 5626701, at the step that would log in.
    let (mut client, id, first) = started(&mut conn, "app", Mech::Sha256, "bob", "bobpwd").await?;
    let last = client.final_message(&first)?;
    let reply = sasl_continue(&mut conn, "app", id, bin(&last)).await?;
    assert_eq!(
        reply,
        doc! {
            "ok": 0.0,
            "errmsg": "Each client connection may only be authenticated once. Previously \
                       authenticated as: alice@app",
            "code": 5_626_701,
            "codeName": "Location5626701",
        }
    );
    // A user of another database: 5626702.
    let (mut client, id, first) =
        started(&mut conn, "other", Mech::Sha256, "carol", "carolpwd").await?;
    let last = client.final_message(&first)?;
    let reply = sasl_continue(&mut conn, "other", id, bin(&last)).await?;
    assert_eq!(
        reply,
        doc! {
            "ok": 0.0,
            "errmsg": "Client has attempted to authenticate on multiple databases.Already \
                       authenticated as: alice@app",
            "code": 5_626_702,
            "codeName": "Location5626702",
        }
    );
    // Neither changed who is logged in, nor left a conversation behind.
    assert_eq!(logged_in(&mut conn).await?, ["alice@app"]);
    let reply = sasl_continue(&mut conn, "other", 1, bin(&last)).await?;
    assert_protocol_error(&reply, "No SASL session state found");
    // After logout, another user may log in.
    let reply = conn.command("admin", doc! { "logout": 1 }).await?;
    assert!(is_ok(&reply), "{reply}");
    scram::login(&mut conn, "other", Mech::Sha256, "carol", "carolpwd").await?;
    assert_eq!(logged_in(&mut conn).await?, ["carol@other"]);
    Ok(())
}

#[tokio::test]
async fn logout() -> TestResult {
    let server = server_with_users().await?;
    let mut conn = server.raw().await?;
    scram::login(&mut conn, "app", Mech::Sha256, "alice", "alicepwd").await?;
    still_serves(&mut conn, true).await?;
    // logout on any database logs the user out.
    let reply = conn.command("test", doc! { "logout": 1 }).await?;
    assert_eq!(reply, doc! { "ok": 1.0 });
    assert!(logged_in(&mut conn).await?.is_empty());
    let reply = conn.command("app", doc! { "find": "c" }).await?;
    assert_eq!(
        reply,
        doc! {
            "ok": 0.0,
            "errmsg": "command find requires authentication",
            "code": 13,
            "codeName": "Unauthorized",
        }
    );
    // Logging out again is harmless; logging in again works.
    let reply = conn.command("app", doc! { "logout": 1 }).await?;
    assert_eq!(reply, doc! { "ok": 1.0 });
    scram::login(&mut conn, "app", Mech::Sha1, "alice", "alicepwd").await?;
    still_serves(&mut conn, true).await?;
    // A conversation in progress ends with logout too.
    let (mut client, id, first) =
        started(&mut conn, "app", Mech::Sha256, "alice", "alicepwd").await?;
    let last = client.final_message(&first)?;
    let reply = conn.command("app", doc! { "logout": 1 }).await?;
    assert!(is_ok(&reply));
    let reply = sasl_continue(&mut conn, "app", id, bin(&last)).await?;
    assert_protocol_error(&reply, "No SASL session state found");
    still_serves(&mut conn, false).await?;
    Ok(())
}
