//! SCRAM-SHA-1 and SCRAM-SHA-256 (RFC 5802, RFC 7677), server side, as mongod runs them.
//!
//! Pure and IO-free: the caller (the `saslStart`/`saslContinue` commands, and speculative
//! authentication in `hello`) owns one [`ScramServer`] per connection and conversation, looks
//! the user up between [`ScramServer::start`] and [`ScramServer::challenge`], and answers each
//! error with [`ScramError::reply`].
//!
//! Credentials are those mongod keeps in `admin.system.users` under `credentials`
//! ([`ScramCredential`]): `{iterationCount, salt, storedKey, serverKey}`, base64 strings, where
//! SCRAM-SHA-1 salts `hex(md5(user + ":mongo:" + password))` (mongod's legacy password digest)
//! and SCRAM-SHA-256 salts the password prepared with `SASLprep` (RFC 4013). Salts are
//! `hash length - 4` bytes (16 and 28), as mongod makes them.
//!
//! The conversation follows mongod's `SaslSCRAMServerMechanism`: the same parsing (empty fields
//! skipped, channel binding refused, `a=` authzid equal to the user name, `=2C`/`=3D`
//! unescaped), a server nonce of 24 random bytes in base64 after the client's, a third, empty
//! exchange unless the client asked for `skipEmptyExchange`. Every failure closes the
//! conversation: later steps answer mongod's "No SASL session state found".

use std::fmt;
use std::sync::OnceLock;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use bson::raw::RawBsonRef;
use bson::{Bson, Document, RawDocument, doc};
use hmac::digest::Digest;
use hmac::{EagerHash, Hmac, KeyInit, Mac};
use subtle::ConstantTimeEq as _;

use crate::error::{CommandError, ErrorCode};

/// mongod's smallest iteration count (`scram::kIterationCountMinimum`).
pub const MIN_ITERATION_COUNT: i32 = 4096;

/// The longest SASL payload a conversation reads. mongod has no limit of its own below the
/// 16 MB BSON limit; real SCRAM messages are a few hundred bytes, and this bound keeps the
/// memory a conversation holds small.
pub const MAX_PAYLOAD_LEN: usize = 64 * 1024;

/// Random bytes in the server's part of the nonce (mongod: three 64-bit words), base64-encoded.
const SERVER_NONCE_BYTES: usize = 24;

/// The field of `saslStart`'s `options` that ends the conversation at the server's signature.
pub const SKIP_EMPTY_EXCHANGE: &str = "skipEmptyExchange";

/// A SCRAM mechanism.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mechanism {
    /// `SCRAM-SHA-1`: the password is first digested as `hex(md5(user:mongo:password))`.
    ScramSha1,
    /// `SCRAM-SHA-256`: the password is prepared (`SASLprep`).
    ScramSha256,
}

impl Mechanism {
    /// Both mechanisms, in the order mongod lists them.
    pub const ALL: [Mechanism; 2] = [Mechanism::ScramSha1, Mechanism::ScramSha256];

    /// The mechanism's name, as in `saslStart.mechanism` and the `credentials` field names.
    pub fn name(self) -> &'static str {
        match self {
            Mechanism::ScramSha1 => "SCRAM-SHA-1",
            Mechanism::ScramSha256 => "SCRAM-SHA-256",
        }
    }

    /// The mechanism named `name` (exact, as mongod's registry matches it).
    pub fn from_name(name: &str) -> Option<Self> {
        Mechanism::ALL.into_iter().find(|m| m.name() == name)
    }

    /// mongod's default iteration count (`scramIterationCount`, `scramSHA256IterationCount`).
    pub fn default_iteration_count(self) -> i32 {
        match self {
            Mechanism::ScramSha1 => 10_000,
            Mechanism::ScramSha256 => 15_000,
        }
    }

    /// The digest length in bytes.
    pub fn hash_len(self) -> usize {
        match self {
            Mechanism::ScramSha1 => 20,
            Mechanism::ScramSha256 => 32,
        }
    }

    /// The salt length mongod generates: the digest length less the 4 bytes of RFC 5802's
    /// `INT(1)` suffix (16 for SHA-1, 28 for SHA-256).
    pub fn salt_len(self) -> usize {
        self.hash_len() - 4
    }

    /// The password as the mechanism salts it: SCRAM-SHA-1 takes mongod's digest
    /// `hex(md5(user + ":mongo:" + password))`, SCRAM-SHA-256 the password prepared with
    /// `SASLprep` (one it refuses is `BadValue`, as mongod's ICU preparation answers).
    pub fn prepare_password(self, user: &str, password: &str) -> Result<String, ScramError> {
        match self {
            Mechanism::ScramSha1 => Ok(mongo_password_digest(user, password)),
            Mechanism::ScramSha256 => stringprep::saslprep(password)
                .map(std::borrow::Cow::into_owned)
                .map_err(|_| {
                    ScramError::new(ErrorCode::BadValue, "Unable to normalize input string")
                }),
        }
    }

    fn hmac(self, key: &[u8], data: &[u8]) -> Vec<u8> {
        match self {
            Mechanism::ScramSha1 => hmac_with::<sha1::Sha1>(key, data),
            Mechanism::ScramSha256 => hmac_with::<sha2::Sha256>(key, data),
        }
    }

    fn hash(self, data: &[u8]) -> Vec<u8> {
        match self {
            Mechanism::ScramSha1 => sha1::Sha1::digest(data).to_vec(),
            Mechanism::ScramSha256 => sha2::Sha256::digest(data).to_vec(),
        }
    }

    /// RFC 5802's `Hi(password, salt, i)`: PBKDF2 with this mechanism's HMAC.
    fn salted_password(self, password: &[u8], salt: &[u8], iterations: u32) -> Vec<u8> {
        let mut out = vec![0; self.hash_len()];
        match self {
            Mechanism::ScramSha1 => {
                pbkdf2::pbkdf2_hmac::<sha1::Sha1>(password, salt, iterations, &mut out);
            }
            Mechanism::ScramSha256 => {
                pbkdf2::pbkdf2_hmac::<sha2::Sha256>(password, salt, iterations, &mut out);
            }
        }
        out
    }
}

impl fmt::Display for Mechanism {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

fn hmac_with<D>(key: &[u8], data: &[u8]) -> Vec<u8>
where
    D: EagerHash,
    Hmac<D>: KeyInit + Mac,
{
    let mut mac = <Hmac<D> as KeyInit>::new_from_slice(key).expect("HMAC takes keys of any length");
    Mac::update(&mut mac, data);
    mac.finalize().into_bytes().to_vec()
}

const HEX_DIGITS: &[u8; 16] = b"0123456789abcdef";

/// mongod's legacy password digest, which SCRAM-SHA-1 salts instead of the password:
/// lowercase `hex(md5(user + ":mongo:" + password))`.
pub fn mongo_password_digest(user: &str, password: &str) -> String {
    let mut md5 = md5::Md5::new();
    md5.update(user.as_bytes());
    md5.update(b":mongo:");
    md5.update(password.as_bytes());
    md5.finalize()
        .iter()
        .fold(String::with_capacity(32), |mut hex, b| {
            hex.push(char::from(HEX_DIGITS[usize::from(b >> 4)]));
            hex.push(char::from(HEX_DIGITS[usize::from(b & 0xf)]));
            hex
        })
}

/// Fills `buf` from the operating system's random source.
fn fill_random(buf: &mut [u8]) -> Result<(), ScramError> {
    getrandom::fill(buf)
        .map_err(|e| ScramError::new(ErrorCode::InternalError, format!("no random bytes: {e}")))
}

/// Where [`make_credential`] takes its salt from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SaltSource {
    /// Fresh random bytes of [`Mechanism::salt_len`], as mongod makes them.
    Random,
    /// These bytes (tests, and recomputing a known credential); they must be
    /// [`Mechanism::salt_len`] long.
    Fixed(Vec<u8>),
}

/// One mechanism's stored credential, as in `admin.system.users`:
/// `credentials.<mechanism>: {iterationCount, salt, storedKey, serverKey}` (salt and keys in
/// base64). It holds no password and nothing a client could log in with.
#[derive(Clone, PartialEq, Eq)]
pub struct ScramCredential {
    /// `iterationCount`.
    pub iteration_count: i32,
    /// `salt`, base64.
    pub salt: String,
    /// `storedKey`: base64 of `H(HMAC(SaltedPassword, "Client Key"))`.
    pub stored_key: String,
    /// `serverKey`: base64 of `HMAC(SaltedPassword, "Server Key")`.
    pub server_key: String,
}

impl fmt::Debug for ScramCredential {
    /// The keys are left out, so that a credential in a log line gives nothing away.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ScramCredential")
            .field("iteration_count", &self.iteration_count)
            .field("salt", &self.salt)
            .finish_non_exhaustive()
    }
}

impl ScramCredential {
    /// The credential of an already prepared password (see [`Mechanism::prepare_password`]),
    /// from any salt (RFC test vectors use shorter salts than mongod makes). Fewer than
    /// [`MIN_ITERATION_COUNT`] iterations is mongod's 50662 "invalid iteration count".
    pub fn derive(
        mechanism: Mechanism,
        prepared: &[u8],
        salt: &[u8],
        iterations: i32,
    ) -> Result<Self, ScramError> {
        let rounds = u32::try_from(iterations)
            .ok()
            .filter(|_| iterations >= MIN_ITERATION_COUNT)
            .ok_or_else(|| {
                ScramError::new(ErrorCode::Location(50662), "invalid iteration count")
            })?;
        let salted = mechanism.salted_password(prepared, salt, rounds);
        let client_key = mechanism.hmac(&salted, b"Client Key");
        let stored_key = mechanism.hash(&client_key);
        let server_key = mechanism.hmac(&salted, b"Server Key");
        Ok(ScramCredential {
            iteration_count: iterations,
            salt: BASE64.encode(salt),
            stored_key: BASE64.encode(stored_key),
            server_key: BASE64.encode(server_key),
        })
    }

    /// The stored document: `{iterationCount: <int>, salt, storedKey, serverKey}`.
    pub fn to_document(&self) -> Document {
        doc! {
            "iterationCount": self.iteration_count,
            "salt": self.salt.as_str(),
            "storedKey": self.stored_key.as_str(),
            "serverKey": self.server_key.as_str(),
        }
    }

    /// Reads a stored document. A missing or mistyped field, or a count that is not a whole
    /// number in `int` range, is `BadValue`; the contents are checked when a conversation uses
    /// them ([`ScramServer::challenge`]), where mongod checks them.
    pub fn from_document(doc: &Document) -> Result<Self, ScramError> {
        let string = |name: &str| match doc.get(name) {
            Some(Bson::String(s)) => Ok(s.clone()),
            _ => Err(ScramError::new(
                ErrorCode::BadValue,
                format!("SCRAM credential field {name} must be a string"),
            )),
        };
        let iteration_count = match doc.get("iterationCount") {
            Some(Bson::Int32(n)) => Some(*n),
            Some(Bson::Int64(n)) => i32::try_from(*n).ok(),
            Some(Bson::Double(d)) if d.fract() == 0.0 && d.abs() <= f64::from(i32::MAX) =>
            {
                #[expect(clippy::cast_possible_truncation, reason = "whole and in range")]
                Some(*d as i32)
            }
            _ => None,
        }
        .ok_or_else(|| {
            ScramError::new(
                ErrorCode::BadValue,
                "SCRAM credential field iterationCount must be an integer",
            )
        })?;
        Ok(ScramCredential {
            iteration_count,
            salt: string("salt")?,
            stored_key: string("storedKey")?,
            server_key: string("serverKey")?,
        })
    }

    /// The decoded salt, stored key and server key, or `None` when the credential cannot be
    /// used (mongod: "corrupted stored credentials").
    fn secrets(&self, mechanism: Mechanism) -> Option<Secrets> {
        let salt = BASE64.decode(&self.salt).ok()?;
        let stored_key = BASE64.decode(&self.stored_key).ok()?;
        let server_key = BASE64.decode(&self.server_key).ok()?;
        let ok = self.iteration_count > 0
            && !salt.is_empty()
            && stored_key.len() == mechanism.hash_len()
            && server_key.len() == mechanism.hash_len();
        ok.then_some(Secrets {
            stored_key,
            server_key,
        })
    }
}

/// Makes `user`'s credential for `mechanism` from the password, as `createUser` and
/// `updateUser` store it. Fewer than [`MIN_ITERATION_COUNT`] iterations, or a fixed salt of
/// the wrong length, is refused with mongod's assertion codes (50662, 17450).
pub fn make_credential(
    mechanism: Mechanism,
    user: &str,
    password: &str,
    iterations: i32,
    salt: SaltSource,
) -> Result<ScramCredential, ScramError> {
    if iterations < MIN_ITERATION_COUNT {
        return Err(ScramError::new(
            ErrorCode::Location(50662),
            "invalid iteration count",
        ));
    }
    let salt = match salt {
        SaltSource::Random => {
            let mut bytes = vec![0; mechanism.salt_len()];
            fill_random(&mut bytes)?;
            bytes
        }
        SaltSource::Fixed(bytes) => bytes,
    };
    if salt.len() != mechanism.salt_len() {
        return Err(ScramError::new(
            ErrorCode::Location(17450),
            "invalid salt length provided",
        ));
    }
    let prepared = mechanism.prepare_password(user, password)?;
    ScramCredential::derive(mechanism, prepared.as_bytes(), &salt, iterations)
}

/// A failed step, with the status mongod logs (`code`, `message`). The client is answered
/// [`ScramError::reply`]: mongod tells it only "Authentication failed.".
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message} ({code:?})")]
pub struct ScramError {
    /// The code of mongod's internal status (`BadValue`, `AuthenticationFailed`,
    /// `MechanismUnavailable`, …), or `ProtocolError` for a step the conversation cannot take.
    pub code: ErrorCode,
    /// mongod's message for that status: for the log, not for the client.
    pub message: String,
}

impl ScramError {
    fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        ScramError {
            code,
            message: message.into(),
        }
    }

    fn bad_value(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::BadValue, message)
    }

    /// A step after the conversation ended (failed, or done): mongod has dropped its session.
    fn no_session() -> Self {
        Self::new(ErrorCode::ProtocolError, "No SASL session state found")
    }

    /// The reply to the client. Every failure of a step is `AuthenticationFailed` (18)
    /// "Authentication failed." (mongod's `authenticationFailedStatus`: no hint whether the
    /// user exists or what was wrong); a step with no conversation to take it is answered as
    /// is (`ProtocolError`, "No SASL session state found" / "saslContinue must follow
    /// saslStart").
    pub fn reply(&self) -> CommandError {
        match self.code {
            ErrorCode::ProtocolError => CommandError::new(self.code, self.message.clone()),
            _ => authentication_failed(),
        }
    }
}

/// `AuthenticationFailed` (18), "Authentication failed.": the only failure a client is told.
pub fn authentication_failed() -> CommandError {
    CommandError::new(ErrorCode::AuthenticationFailed, "Authentication failed.")
}

/// What the caller found for the user named in the client-first message.
#[derive(Debug, Clone, Copy)]
pub enum UserCredential<'a> {
    /// The user's stored credential for the conversation's mechanism.
    Found(&'a ScramCredential),
    /// The user exists but has no credential for this mechanism (mongod:
    /// `MechanismUnavailable`, answered as "Authentication failed.").
    NoCredential,
    /// No such user. The conversation goes on with a made-up credential (a salt stable per
    /// user name for this process, keys that match no password), so that the client sees the
    /// same steps as for a real user and fails only at the proof. (mongod 7.0 itself fails the
    /// first step, `saslStart`, with `UserNotFound`, answered "Authentication failed."; a
    /// caller that wants that answers [`authentication_failed`] instead of calling
    /// [`ScramServer::challenge`].)
    Unknown,
}

/// The parsed client-first message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientFirst {
    /// The user name, `=2C`/`=3D` unescaped, not prepared with `SASLprep` (drivers and mongod
    /// send and compare it as is).
    pub user: String,
    /// The `a=` authorization identity when one was sent (it equals `user`).
    pub authzid: Option<String>,
}

/// The answer of a step after the first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepReply {
    /// The server's message (`v=…`, or empty for the last exchange).
    pub payload: Vec<u8>,
    /// The conversation is over and the user is authenticated (`done: true`).
    pub done: bool,
}

struct Secrets {
    stored_key: Vec<u8>,
    server_key: Vec<u8>,
}

enum State {
    /// Waiting for the client-first message.
    Start,
    /// Client-first read; waiting for the caller's user lookup.
    AwaitingCredential {
        client_first_bare: String,
        client_nonce: String,
    },
    /// Server-first sent; waiting for the client-final message.
    AwaitingProof {
        auth_message: String,
        nonce: String,
        secrets: Secrets,
    },
    /// Server-final sent; waiting for the client's empty message.
    AwaitingEmpty,
    /// Authenticated; the conversation is over.
    Succeeded,
    /// A step failed; the conversation is over.
    Failed,
}

/// One SCRAM conversation, server side.
pub struct ScramServer {
    mechanism: Mechanism,
    skip_empty_exchange: bool,
    user: Option<String>,
    state: State,
}

impl fmt::Debug for ScramServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = match self.state {
            State::Start => "start",
            State::AwaitingCredential { .. } => "awaiting credential",
            State::AwaitingProof { .. } => "awaiting proof",
            State::AwaitingEmpty => "awaiting empty exchange",
            State::Succeeded => "succeeded",
            State::Failed => "failed",
        };
        f.debug_struct("ScramServer")
            .field("mechanism", &self.mechanism)
            .field("skip_empty_exchange", &self.skip_empty_exchange)
            .field("user", &self.user)
            .field("state", &state)
            .finish()
    }
}

impl ScramServer {
    /// A new conversation for `mechanism`.
    pub fn new(mechanism: Mechanism) -> Self {
        ScramServer {
            mechanism,
            skip_empty_exchange: false,
            user: None,
            state: State::Start,
        }
    }

    /// Applies `saslStart`'s `options`: `skipEmptyExchange` must be a boolean (mongod's
    /// `BadValue` "skipEmptyExchange must be boolean", answered as is); other fields are
    /// ignored, as mongod ignores them.
    pub fn set_options(&mut self, options: &RawDocument) -> Result<(), CommandError> {
        match options.get(SKIP_EMPTY_EXCHANGE) {
            Ok(None) => Ok(()),
            Ok(Some(RawBsonRef::Boolean(skip))) => {
                self.skip_empty_exchange = skip;
                Ok(())
            }
            Ok(Some(_)) | Err(_) => Err(CommandError::bad_value(format!(
                "{SKIP_EMPTY_EXCHANGE} must be boolean"
            ))),
        }
    }

    /// Sets `skipEmptyExchange`: the conversation is done at the server's signature.
    pub fn set_skip_empty_exchange(&mut self, skip: bool) {
        self.skip_empty_exchange = skip;
    }

    /// The conversation's mechanism.
    pub fn mechanism(&self) -> Mechanism {
        self.mechanism
    }

    /// The user named by the client-first message, once read.
    pub fn user(&self) -> Option<&str> {
        self.user.as_deref()
    }

    /// The client proved the password and the conversation is done.
    pub fn is_success(&self) -> bool {
        matches!(self.state, State::Succeeded)
    }

    /// The conversation is over (succeeded or failed): it takes no more steps.
    pub fn is_finished(&self) -> bool {
        matches!(self.state, State::Succeeded | State::Failed)
    }

    /// Step 1, first half: reads the client-first message
    /// (`gs2-header client-first-message-bare`, e.g. `n,,n=user,r=nonce`). The caller then
    /// looks the user up and calls [`ScramServer::challenge`].
    pub fn start(&mut self, payload: &[u8]) -> Result<ClientFirst, ScramError> {
        if !matches!(self.state, State::Start) {
            return Err(self.fail(ScramError::new(
                ErrorCode::AuthenticationFailed,
                "Invalid SCRAM authentication step: 2",
            )));
        }
        match parse_client_first(payload) {
            Ok((first, bare, nonce)) => {
                self.user = Some(first.user.clone());
                self.state = State::AwaitingCredential {
                    client_first_bare: bare,
                    client_nonce: nonce,
                };
                Ok(first)
            }
            Err(e) => Err(self.fail(e)),
        }
    }

    /// Step 1, second half: the server-first message
    /// (`r=client-nonce+server-nonce,s=salt,i=iteration-count`) for the user's credential.
    pub fn challenge(&mut self, credential: UserCredential<'_>) -> Result<Vec<u8>, ScramError> {
        let mut nonce = [0; SERVER_NONCE_BYTES];
        if let Err(e) = fill_random(&mut nonce) {
            return Err(self.fail(e));
        }
        self.challenge_with_nonce(credential, &BASE64.encode(nonce))
    }

    fn challenge_with_nonce(
        &mut self,
        credential: UserCredential<'_>,
        server_nonce: &str,
    ) -> Result<Vec<u8>, ScramError> {
        let State::AwaitingCredential {
            client_first_bare,
            client_nonce,
        } = std::mem::replace(&mut self.state, State::Failed)
        else {
            return Err(ScramError::new(
                ErrorCode::ProtocolError,
                "saslContinue must follow saslStart",
            ));
        };
        let mechanism = self.mechanism;
        let fake;
        let credential = match credential {
            UserCredential::Found(credential) => credential,
            UserCredential::NoCredential => {
                return Err(ScramError::new(
                    ErrorCode::MechanismUnavailable,
                    format!(
                        "Unable to use {mechanism} based authentication for user without any \
                         {mechanism} credentials registered"
                    ),
                ));
            }
            UserCredential::Unknown => {
                fake = fake_credential(mechanism, self.user.as_deref().unwrap_or_default())?;
                &fake
            }
        };
        let Some(secrets) = credential.secrets(mechanism) else {
            return Err(ScramError::new(
                ErrorCode::AuthenticationFailed,
                format!(
                    "Unable to validate {mechanism} authentication due to corrupted stored \
                     credentials"
                ),
            ));
        };
        let nonce = format!("{client_nonce}{server_nonce}");
        let server_first = format!(
            "r={nonce},s={},i={}",
            credential.salt, credential.iteration_count
        );
        self.state = State::AwaitingProof {
            auth_message: format!("{client_first_bare},{server_first}"),
            nonce,
            secrets,
        };
        Ok(server_first.into_bytes())
    }

    /// The steps after the first: the client-final message
    /// (`c=channel-binding,r=nonce,p=proof`) is answered with the server signature
    /// (`v=…`, done only with `skipEmptyExchange`); then any message (drivers send an empty
    /// one; mongod does not read it) ends the conversation with an empty payload and done.
    pub fn step(&mut self, payload: &[u8]) -> Result<StepReply, ScramError> {
        match std::mem::replace(&mut self.state, State::Failed) {
            State::AwaitingProof {
                auth_message,
                nonce,
                secrets,
            } => match verify_client_final(self.mechanism, payload, auth_message, &nonce, &secrets)
            {
                Ok(signature) => {
                    self.state = if self.skip_empty_exchange {
                        State::Succeeded
                    } else {
                        State::AwaitingEmpty
                    };
                    Ok(StepReply {
                        payload: signature.into_bytes(),
                        done: self.skip_empty_exchange,
                    })
                }
                Err(e) => Err(e),
            },
            State::AwaitingEmpty => {
                self.state = State::Succeeded;
                Ok(StepReply {
                    payload: Vec::new(),
                    done: true,
                })
            }
            State::Start | State::AwaitingCredential { .. } => Err(ScramError::new(
                ErrorCode::ProtocolError,
                "saslContinue must follow saslStart",
            )),
            State::Succeeded | State::Failed => Err(ScramError::no_session()),
        }
    }

    fn fail(&mut self, error: ScramError) -> ScramError {
        self.state = State::Failed;
        error
    }
}

/// The `payload` of `saslStart`/`saslContinue` (and of `speculativeAuthenticate`), as mongod
/// reads it (`SaslPayload`): `BinData` of the general subtype, or a base64 string, in which
/// case the reply's payload is a base64 string too.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SaslPayload {
    /// The message.
    pub bytes: Vec<u8>,
    /// It came as a base64 string (the reply is sent the same way).
    pub base64: bool,
}

impl SaslPayload {
    /// Reads a `payload` value, with mongod's errors: another type or `BinData` subtype is
    /// `BadValue`; a string that is not base64 fails with mongod's base64 codes (10270 for a
    /// length that is not a multiple of 4, 40538 for data after the padding, 40537 for a
    /// character out of the alphabet), the message prefixed "Failed decoding SASL payload: ".
    pub fn parse(value: RawBsonRef<'_>) -> Result<Self, CommandError> {
        match value {
            RawBsonRef::String(text) => decode_base64(text)
                .map(|bytes| SaslPayload {
                    bytes,
                    base64: true,
                })
                .map_err(|(code, reason)| {
                    CommandError::new(code, format!("Failed decoding SASL payload: {reason}"))
                }),
            RawBsonRef::Binary(binary) => {
                if binary.subtype == bson::spec::BinarySubtype::Generic {
                    Ok(SaslPayload {
                        bytes: binary.bytes.to_vec(),
                        base64: false,
                    })
                } else {
                    Err(CommandError::bad_value(format!(
                        "Invalid SASLPayload subtype. Expected BinDataGeneral, got: {}",
                        binary_subtype_name(binary.subtype)
                    )))
                }
            }
            other => Err(CommandError::bad_value(format!(
                "Invalid SASLPayload type. Expected Base64 or BinData, got: {}",
                crate::query::display::type_name(other.element_type())
            ))),
        }
    }

    /// The reply's `payload` for `bytes`, in the form the request's payload came in.
    pub fn reply(&self, bytes: Vec<u8>) -> Bson {
        if self.base64 {
            Bson::String(BASE64.encode(bytes))
        } else {
            Bson::Binary(bson::Binary {
                subtype: bson::spec::BinarySubtype::Generic,
                bytes,
            })
        }
    }
}

/// mongod's name for a `BinData` subtype (`typeName(BinDataType)`).
fn binary_subtype_name(subtype: bson::spec::BinarySubtype) -> &'static str {
    match u8::from(subtype) {
        0 => "general",
        1 => "function",
        2 => "byte(deprecated)",
        3 => "UUID(deprecated)",
        4 => "UUID",
        5 => "MD5",
        6 => "encrypt",
        7 => "column",
        8 => "sensitive",
        9 => "vector",
        128 => "Custom",
        _ => "invalid",
    }
}

/// Base64 as mongod decodes it (`base64::decode`): a length multiple of 4, nothing after the
/// padding, the standard alphabet; errors as `(code, reason)`.
fn decode_base64(text: &str) -> Result<Vec<u8>, (ErrorCode, &'static str)> {
    if !text.len().is_multiple_of(4) {
        return Err((ErrorCode::Location(10270), "invalid base64"));
    }
    let bytes = text.as_bytes();
    if let Some(padded) = bytes.chunks(4).position(|chunk| chunk.contains(&b'='))
        && padded + 1 < bytes.len() / 4
    {
        return Err((
            ErrorCode::Location(40538),
            "Invalid Base64 stream. Additional data following terminating sequence.",
        ));
    }
    let lenient = base64::engine::GeneralPurpose::new(
        &base64::alphabet::STANDARD,
        base64::engine::GeneralPurposeConfig::new()
            .with_decode_allow_trailing_bits(true)
            .with_decode_padding_mode(base64::engine::DecodePaddingMode::Indifferent),
    );
    lenient
        .decode(bytes)
        .map_err(|_| (ErrorCode::Location(40537), "Invalid base64 character"))
}

/// A made-up credential for an unknown user: a salt stable for this user name and mechanism
/// while the process runs (a second attempt sees the same salt, as for a real user), and
/// random keys that no proof matches.
fn fake_credential(mechanism: Mechanism, user: &str) -> Result<ScramCredential, ScramError> {
    static KEY: OnceLock<[u8; 32]> = OnceLock::new();
    let key = if let Some(key) = KEY.get() {
        key
    } else {
        let mut key = [0; 32];
        fill_random(&mut key)?;
        KEY.get_or_init(|| key)
    };
    let mut input = Vec::with_capacity(mechanism.name().len() + 1 + user.len());
    input.extend_from_slice(mechanism.name().as_bytes());
    input.push(0);
    input.extend_from_slice(user.as_bytes());
    let mut salt = hmac_with::<sha2::Sha256>(key, &input);
    salt.truncate(mechanism.salt_len());
    let mut stored_key = vec![0; mechanism.hash_len()];
    let mut server_key = vec![0; mechanism.hash_len()];
    fill_random(&mut stored_key)?;
    fill_random(&mut server_key)?;
    Ok(ScramCredential {
        iteration_count: mechanism.default_iteration_count(),
        salt: BASE64.encode(salt),
        stored_key: BASE64.encode(stored_key),
        server_key: BASE64.encode(server_key),
    })
}

/// A payload as text, within [`MAX_PAYLOAD_LEN`].
fn payload_text(payload: &[u8]) -> Result<&str, ScramError> {
    if payload.len() > MAX_PAYLOAD_LEN {
        return Err(ScramError::bad_value(format!(
            "SCRAM message of {} bytes is longer than the limit of {MAX_PAYLOAD_LEN}",
            payload.len()
        )));
    }
    std::str::from_utf8(payload).map_err(|_| ScramError::bad_value("SCRAM message is not UTF-8"))
}

/// The comma-separated fields of `text`, empty ones skipped (mongod splits with
/// `absl::SkipEmpty()`).
fn fields(text: &str) -> Vec<&str> {
    text.split(',').filter(|f| !f.is_empty()).collect()
}

/// RFC 5802's user name escaping, undone as mongod undoes it: `=2C` then `=3D`.
fn decode_user_name(name: &str) -> String {
    name.replace("=2C", ",").replace("=3D", "=")
}

/// Parses `gs2-cbind-flag ',' [authzid] ',' client-first-message-bare`, with mongod's checks
/// and messages; returns the client-first message, its bare part and the client nonce.
fn parse_client_first(payload: &[u8]) -> Result<(ClientFirst, String, String), ScramError> {
    let bad_count = |got: usize| {
        ScramError::bad_value(format!(
            "Incorrect number of arguments for first SCRAM client message, got {got} expected \
             at least 3"
        ))
    };
    let input = payload_text(payload)?;
    let (cbind_flag, rest) = input.split_once(',').ok_or_else(|| bad_count(1))?;
    if cbind_flag.starts_with("p=") {
        return Err(ScramError::bad_value(
            "Server does not support channel binding",
        ));
    }
    if cbind_flag != "y" && cbind_flag != "n" {
        return Err(ScramError::bad_value(format!(
            "Incorrect SCRAM client message prefix: {cbind_flag}"
        )));
    }
    let (authzid, bare) = rest.split_once(',').ok_or_else(|| bad_count(2))?;
    let authzid = if authzid.is_empty() {
        None
    } else if let Some(id) = authzid.strip_prefix("a=") {
        Some(id)
    } else {
        return Err(ScramError::bad_value(format!(
            "Incorrect SCRAM authzid: {authzid}"
        )));
    };
    if bare.starts_with("m=") {
        return Err(ScramError::bad_value(
            "SCRAM mandatory extensions are not supported",
        ));
    }
    let parts = fields(bare);
    let [name, nonce, ..] = parts.as_slice() else {
        return Err(bad_count(parts.len() + 2));
    };
    let user = match name.strip_prefix("n=") {
        Some(user) if !user.is_empty() => decode_user_name(user),
        _ => {
            return Err(ScramError::bad_value(format!(
                "Invalid SCRAM user name: {name}"
            )));
        }
    };
    if let Some(id) = authzid.filter(|id| !id.is_empty())
        && id != user
    {
        return Err(ScramError::bad_value(format!(
            "SCRAM user name {user} does not match authzid {id}"
        )));
    }
    let client_nonce = match nonce.strip_prefix("r=") {
        Some(n) if n.len() >= 4 => n,
        _ => {
            return Err(ScramError::bad_value(format!(
                "Invalid SCRAM client nonce: {nonce}"
            )));
        }
    };
    Ok((
        ClientFirst {
            user,
            authzid: authzid.filter(|id| !id.is_empty()).map(str::to_owned),
        },
        bare.to_owned(),
        client_nonce.to_owned(),
    ))
}

/// Checks the client-final message against the conversation and returns the server-final
/// message (`v=ServerSignature`).
fn verify_client_final(
    mechanism: Mechanism,
    payload: &[u8],
    mut auth_message: String,
    expected_nonce: &str,
    secrets: &Secrets,
) -> Result<String, ScramError> {
    let bad_count = |got: usize| {
        ScramError::bad_value(format!(
            "Incorrect number of arguments for second SCRAM client message, got {got} expected \
             at least 3"
        ))
    };
    let input = payload_text(payload)?;
    let (without_proof, last) = input.rsplit_once(',').ok_or_else(|| bad_count(1))?;
    let proof = match last.strip_prefix("p=") {
        Some(p) if !p.is_empty() => p,
        _ => {
            return Err(ScramError::bad_value(format!(
                "Incorrect SCRAM ClientProof: {last}"
            )));
        }
    };
    let parts = fields(without_proof);
    let [cbind, nonce, ..] = parts.as_slice() else {
        return Err(bad_count(parts.len() + 1));
    };
    if !cbind.starts_with("c=") || cbind.len() < 3 {
        return Err(ScramError::bad_value(format!(
            "Incorrect SCRAM channel binding: {cbind}"
        )));
    }
    let nonce = match nonce.strip_prefix("r=") {
        Some(n) if n.len() >= 4 => n,
        _ => {
            return Err(ScramError::bad_value(format!(
                "Incorrect SCRAM client|server nonce: {nonce}"
            )));
        }
    };
    if nonce != expected_nonce {
        return Err(ScramError::bad_value(format!(
            "Unmatched SCRAM nonce received from client in second step, expected \
             {expected_nonce} but received {nonce}"
        )));
    }
    let proof = BASE64
        .decode(proof)
        .map_err(|_| ScramError::bad_value("Invalid SCRAM ClientProof: not base64"))?;
    if proof.len() != mechanism.hash_len() {
        return Err(ScramError::bad_value(format!(
            "Invalid SCRAM ClientProof: {} bytes, expected {}",
            proof.len(),
            mechanism.hash_len()
        )));
    }
    auth_message.push(',');
    auth_message.push_str(without_proof);
    // ClientKey := HMAC(StoredKey, AuthMessage) XOR ClientProof; H(ClientKey) must be StoredKey.
    let signature = mechanism.hmac(&secrets.stored_key, auth_message.as_bytes());
    let client_key: Vec<u8> = signature.iter().zip(&proof).map(|(s, p)| s ^ p).collect();
    let computed = mechanism.hash(&client_key);
    if !bool::from(computed.ct_eq(&secrets.stored_key)) {
        return Err(ScramError::new(
            ErrorCode::AuthenticationFailed,
            "SCRAM authentication failed, storedKey mismatch",
        ));
    }
    let server_signature = mechanism.hmac(&secrets.server_key, auth_message.as_bytes());
    Ok(format!("v={}", BASE64.encode(server_signature)))
}

#[cfg(test)]
mod tests;
