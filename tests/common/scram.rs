//! A SCRAM client, written from RFC 5802 / 7677 and mongod's SCRAM-SHA-1 password digest, to
//! log raw connections in.

use std::collections::HashMap;
use std::sync::{LazyLock, Mutex};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use bson::{Bson, doc};
use hmac::digest::Digest as _;
use hmac::{EagerHash, Hmac, KeyInit, Mac};

use super::{RawConn, TestResult, is_ok};

/// A SCRAM mechanism.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mech {
    Sha1,
    Sha256,
}

impl Mech {
    pub fn name(self) -> &'static str {
        match self {
            Mech::Sha1 => "SCRAM-SHA-1",
            Mech::Sha256 => "SCRAM-SHA-256",
        }
    }

    fn hmac(self, key: &[u8], data: &[u8]) -> Vec<u8> {
        fn with<D>(key: &[u8], data: &[u8]) -> Vec<u8>
        where
            D: EagerHash,
            Hmac<D>: KeyInit + Mac,
        {
            let mut mac = <Hmac<D> as KeyInit>::new_from_slice(key).expect("HMAC takes any key");
            Mac::update(&mut mac, data);
            mac.finalize().into_bytes().to_vec()
        }
        match self {
            Mech::Sha1 => with::<sha1::Sha1>(key, data),
            Mech::Sha256 => with::<sha2::Sha256>(key, data),
        }
    }

    fn hash(self, data: &[u8]) -> Vec<u8> {
        match self {
            Mech::Sha1 => sha1::Sha1::digest(data).to_vec(),
            Mech::Sha256 => sha2::Sha256::digest(data).to_vec(),
        }
    }

    /// `Hi(password, salt, i)`, remembered per input as drivers do (PBKDF2 is slow in
    /// a debug build).
    fn salted(self, password: &[u8], salt: &[u8], iterations: u32) -> Vec<u8> {
        type Key = (bool, Vec<u8>, Vec<u8>, u32);
        static CACHE: LazyLock<Mutex<HashMap<Key, Vec<u8>>>> = LazyLock::new(Mutex::default);
        let key = (
            self == Mech::Sha1,
            password.to_vec(),
            salt.to_vec(),
            iterations,
        );
        if let Some(hit) = CACHE.lock().expect("cache").get(&key) {
            return hit.clone();
        }
        let out = self.hi(password, salt, iterations);
        CACHE.lock().expect("cache").insert(key, out.clone());
        out
    }

    fn hi(self, password: &[u8], salt: &[u8], iterations: u32) -> Vec<u8> {
        match self {
            Mech::Sha1 => {
                let mut out = vec![0; 20];
                pbkdf2::pbkdf2_hmac::<sha1::Sha1>(password, salt, iterations, &mut out);
                out
            }
            Mech::Sha256 => {
                let mut out = vec![0; 32];
                pbkdf2::pbkdf2_hmac::<sha2::Sha256>(password, salt, iterations, &mut out);
                out
            }
        }
    }
}

/// The client side of one conversation.
pub struct Client {
    mech: Mech,
    user: String,
    password: String,
    nonce: String,
    server_signature: Vec<u8>,
}

impl Client {
    pub fn new(mech: Mech, user: &str, password: &str) -> Client {
        let mut nonce = [0_u8; 18];
        getrandom::fill(&mut nonce).expect("random bytes");
        Client {
            mech,
            user: user.to_owned(),
            password: password.to_owned(),
            nonce: BASE64.encode(nonce),
            server_signature: Vec::new(),
        }
    }

    fn bare(&self) -> String {
        let user = self.user.replace('=', "=3D").replace(',', "=2C");
        format!("n={user},r={}", self.nonce)
    }

    /// The client-first message.
    pub fn first(&self) -> Vec<u8> {
        format!("n,,{}", self.bare()).into_bytes()
    }

    /// The client-final message answering `server_first`.
    pub fn final_message(&mut self, server_first: &[u8]) -> Result<Vec<u8>, String> {
        let text = std::str::from_utf8(server_first).map_err(|e| e.to_string())?;
        let field = |key: &str| {
            text.split(',')
                .find_map(|f| f.strip_prefix(key))
                .ok_or_else(|| format!("no {key} in {text}"))
        };
        let nonce = field("r=")?;
        if !nonce.starts_with(&self.nonce) {
            return Err(format!("server nonce {nonce} does not extend ours"));
        }
        let salt = BASE64.decode(field("s=")?).map_err(|e| e.to_string())?;
        let iterations: u32 = field("i=")?.parse().map_err(|_| "bad i=".to_owned())?;
        let password = match self.mech {
            Mech::Sha1 => ebb::auth::scram::mongo_password_digest(&self.user, &self.password),
            Mech::Sha256 => self.password.clone(),
        };
        let salted = self.mech.salted(password.as_bytes(), &salt, iterations);
        let client_key = self.mech.hmac(&salted, b"Client Key");
        let stored_key = self.mech.hash(&client_key);
        let without_proof = format!("c=biws,r={nonce}");
        let auth_message = format!("{},{text},{without_proof}", self.bare());
        let signature = self.mech.hmac(&stored_key, auth_message.as_bytes());
        let proof: Vec<u8> = client_key
            .iter()
            .zip(&signature)
            .map(|(k, s)| k ^ s)
            .collect();
        let server_key = self.mech.hmac(&salted, b"Server Key");
        self.server_signature = self.mech.hmac(&server_key, auth_message.as_bytes());
        Ok(format!("{without_proof},p={}", BASE64.encode(proof)).into_bytes())
    }

    /// Whether `server_final` carries the server's signature.
    pub fn verifies(&self, server_final: &[u8]) -> bool {
        server_final == format!("v={}", BASE64.encode(&self.server_signature)).as_bytes()
    }
}

/// The bytes of a reply's `payload`.
pub fn payload(reply: &bson::Document) -> Vec<u8> {
    match reply.get("payload") {
        Some(Bson::Binary(b)) => b.bytes.clone(),
        Some(Bson::String(s)) => BASE64.decode(s).unwrap_or_default(),
        _ => Vec::new(),
    }
}

/// Logs `conn` in as `user` of `db` (saslStart, saslContinue with `skipEmptyExchange`).
pub async fn login(
    conn: &mut RawConn,
    db: &str,
    mech: Mech,
    user: &str,
    password: &str,
) -> TestResult {
    let mut client = Client::new(mech, user, password);
    let reply = conn
        .command(
            db,
            doc! {
                "saslStart": 1, "mechanism": mech.name(),
                "payload": bin(&client.first()),
                "options": { "skipEmptyExchange": true },
            },
        )
        .await?;
    assert!(is_ok(&reply), "saslStart {user}: {reply}");
    let id = reply.get_i32("conversationId")?;
    let last = client.final_message(&payload(&reply))?;
    let reply = conn
        .command(
            db,
            doc! { "saslContinue": 1, "conversationId": id, "payload": bin(&last) },
        )
        .await?;
    assert!(is_ok(&reply), "saslContinue {user}: {reply}");
    assert_eq!(reply.get_bool("done").ok(), Some(true), "{reply}");
    assert!(
        client.verifies(&payload(&reply)),
        "server signature: {reply}"
    );
    Ok(())
}

/// A SASL payload as `BinData` of the general subtype.
pub fn bin(bytes: &[u8]) -> Bson {
    Bson::Binary(bson::Binary {
        subtype: bson::spec::BinarySubtype::Generic,
        bytes: bytes.to_vec(),
    })
}
