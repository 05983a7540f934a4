//! `MONGODB-X509` (mongod's `authentication_commands.cpp`): the `authenticate` command, and its
//! speculative form in `hello`, log a connection in as the `$external` user named by the
//! subject of the certificate its client presented over TLS (captured at the handshake,
//! `AuthSession::certificate_subject`). No password and no conversation: rustls verified the
//! certificate against `--tlsCAFile`, and the user must exist (`createUser` on `$external`).

use bson::{RawBsonRef, RawDocument, RawDocumentBuf, rawdoc};
use tracing::{info, warn};

use crate::auth::privileges::UserName;
use crate::auth::scram::authentication_failed;
use crate::dispatch::{ConnCtx, Request};
use crate::error::{CommandError, CommandResult, ErrorCode};
use crate::state::ServerState;

/// The mechanism's name.
const MECHANISM: &str = "MONGODB-X509";

/// The database of users whose credentials live outside the server.
const EXTERNAL: &str = "$external";

/// Why a login failed. The log says it all; the client is told less ([`Failure::reply`]).
#[derive(Debug)]
struct Failure {
    code: ErrorCode,
    message: String,
}

impl Failure {
    fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Failure {
            code,
            message: message.into(),
        }
    }

    /// What the client is told: mongod's `CmdAuthenticate` lets `UserNotFound` and
    /// `ProtocolError` through, and answers every other failure with `AuthenticationFailed`
    /// ("Authentication failed.").
    fn reply(self) -> CommandError {
        match self.code {
            ErrorCode::UserNotFound | ErrorCode::ProtocolError => {
                CommandError::new(self.code, self.message)
            }
            _ => authentication_failed(),
        }
    }
}

/// One login attempt: `authenticate`'s arguments (`db` is the command's `$db`, or the
/// speculative document's `db`).
struct Attempt<'a> {
    db: &'a str,
    mechanism: &'a str,
    user: Option<&'a str>,
    speculative: bool,
}

/// mongod's `authCommand` and `_authenticateX509`, in their order: the mechanism, the
/// certificate, the user named against the certificate's subject, the database, then the user
/// itself. Logs the outcome with the client's address.
fn login(
    ctx: &mut ConnCtx,
    state: &ServerState,
    attempt: &Attempt<'_>,
) -> Result<UserName, Failure> {
    // A new authentication abandons a SASL conversation in progress.
    ctx.auth.conversation = None;
    let result = check_and_login(ctx, state, attempt);
    let user = match &result {
        Ok(name) => name.user.as_str(),
        Err(_) => attempt
            .user
            .or(ctx.auth.certificate_subject.as_deref())
            .unwrap_or(""),
    };
    match &result {
        Ok(_) => info!(
            remote = %ctx.peer,
            mechanism = attempt.mechanism,
            speculative = attempt.speculative,
            user,
            db = attempt.db,
            "successfully authenticated"
        ),
        Err(e) => warn!(
            remote = %ctx.peer,
            mechanism = attempt.mechanism,
            speculative = attempt.speculative,
            user,
            db = attempt.db,
            code = e.code.code(),
            reason = %e.message,
            "authentication failed"
        ),
    }
    result
}

fn check_and_login(
    ctx: &mut ConnCtx,
    state: &ServerState,
    attempt: &Attempt<'_>,
) -> Result<UserName, Failure> {
    if attempt.mechanism.is_empty() {
        return Err(Failure::new(
            ErrorCode::BadValue,
            "Auth mechanism not specified",
        ));
    }
    if attempt.mechanism != MECHANISM {
        return Err(Failure::new(
            ErrorCode::BadValue,
            format!("Unsupported mechanism: {}", attempt.mechanism),
        ));
    }
    let subject = match ctx.auth.certificate_subject.as_deref() {
        Some(subject) if !subject.is_empty() => subject,
        _ => {
            return Err(Failure::new(
                ErrorCode::AuthenticationFailed,
                "No verified subject name available from client",
            ));
        }
    };
    let user = match attempt.user {
        Some(user) if !user.is_empty() => {
            if user != subject {
                return Err(Failure::new(
                    ErrorCode::AuthenticationFailed,
                    "There is no x.509 client certificate matching the user.",
                ));
            }
            user
        }
        _ => subject,
    };
    if attempt.db != EXTERNAL {
        return Err(Failure::new(
            ErrorCode::ProtocolError,
            "X.509 authentication must always use the $external database.",
        ));
    }
    // A certificate of the cluster's own (mongod's `isClusterMember`): Ebb has no x.509
    // cluster authentication (mongod's default `--clusterAuthMode keyFile`), and mongod's
    // `enforceUserClusterSeparation` (on by default) refuses it as a user's.
    if let Some(server) = state.tls.as_ref().and_then(|tls| tls.server_subject())
        && cluster_member(subject, &server)
    {
        return Err(Failure::new(
            ErrorCode::AuthenticationFailed,
            "The provided certificate can only be used for cluster authentication, not client \
             authentication. The current configuration does not allow x.509 cluster \
             authentication, check the --clusterAuthMode flag",
        ));
    }
    let name = UserName {
        user: user.to_owned(),
        db: EXTERNAL.to_owned(),
    };
    if state.auth.user(&name).is_none() {
        return Err(Failure::new(
            ErrorCode::UserNotFound,
            format!(
                "Could not find user \"{}\" for db \"{}\"",
                name.user, name.db
            ),
        ));
    }
    ctx.auth
        .login(&state.auth, &name)
        .map_err(|e| Failure::new(e.code, e.errmsg))?;
    Ok(name)
}

/// Whether a client's certificate subject names a member of the cluster whose server
/// certificate has `server` for subject: mongod's `isClusterMember`, which compares the `DC`,
/// `O` and `OU` attributes of both (sorted, as `canonicalizeClusterDN` does), and needs at least
/// one.
fn cluster_member(subject: &str, server: &str) -> bool {
    let client = cluster_dn(subject);
    !client.is_empty() && client == cluster_dn(server)
}

/// The `DC`, `O` and `OU` attributes of a subject rendered as `server::tls::subject_name`
/// renders it, unescaped and sorted.
fn cluster_dn(subject: &str) -> Vec<(String, Vec<u8>)> {
    let mut kept: Vec<(String, Vec<u8>)> = attributes(subject)
        .into_iter()
        .filter(|(ty, _)| matches!(ty.as_str(), "DC" | "O" | "OU"))
        .collect();
    kept.sort();
    kept
}

/// The attributes of a rendered subject, in order: its type and its value unescaped (RFC 4514:
/// `\` before a special character, `\` and two hex digits for a byte).
fn attributes(subject: &str) -> Vec<(String, Vec<u8>)> {
    fn hex(digit: u8) -> Option<u8> {
        char::from(digit)
            .to_digit(16)
            .and_then(|d| u8::try_from(d).ok())
    }
    let bytes = subject.as_bytes();
    let mut out = Vec::new();
    let mut ty = String::new();
    let mut value = Vec::new();
    let mut in_value = false;
    let mut i = 0;
    while let Some(&byte) = bytes.get(i) {
        i += 1;
        match byte {
            b'\\' => {
                let escaped = bytes.get(i).copied();
                let pair = escaped
                    .and_then(hex)
                    .zip(bytes.get(i + 1).copied().and_then(hex));
                if let Some((hi, lo)) = pair {
                    value.push(hi << 4 | lo);
                    i += 2;
                } else if let Some(c) = escaped {
                    value.push(c);
                    i += 1;
                }
            }
            b'=' if !in_value => in_value = true,
            b',' | b'+' => {
                out.push((std::mem::take(&mut ty), std::mem::take(&mut value)));
                in_value = false;
            }
            _ if in_value => value.push(byte),
            _ => ty.push(char::from(byte)),
        }
    }
    if in_value {
        out.push((ty, value));
    }
    out
}

/// `authenticate`'s reply (`AuthenticateReply`): the database and the user logged in.
fn reply(name: &UserName) -> RawDocumentBuf {
    rawdoc! { "dbname": name.db.as_str(), "user": name.user.as_str() }
}

/// `authenticate` (`{authenticate: 1, mechanism: "MONGODB-X509", user?: <subject>}` on
/// `$external`); its fields were checked against [`super::fields::AUTHENTICATE`].
pub(super) fn authenticate(
    req: &Request<'_>,
    ctx: &mut ConnCtx,
    state: &ServerState,
) -> CommandResult {
    let mechanism = req.body.get_str("mechanism").unwrap_or_default();
    let user = req.body.get_str("user").ok();
    let attempt = Attempt {
        db: req.db,
        mechanism,
        user,
        speculative: false,
    };
    let name = login(ctx, state, &attempt).map_err(Failure::reply)?;
    let mut reply = reply(&name);
    reply.append(bson::raw::cstr!("ok"), 1.0);
    Ok(reply)
}

/// `hello`'s `speculativeAuthenticate` holding an `authenticate` command (mongod's
/// `doSpeculativeAuthenticate`): its `db` (`$external` when absent) stands for `$db`, it is read
/// as `authenticate` reads its fields, and it logs in the same way. The answer is
/// `{dbname, user}`; a document that does not parse, or a failed login, leaves the answer out
/// (the client then logs in the long way, and is told why).
pub(super) fn speculative(
    ctx: &mut ConnCtx,
    state: &ServerState,
    spec: &RawDocument,
) -> Option<RawDocumentBuf> {
    let mut mechanism = None;
    let mut user = None;
    let mut db = EXTERNAL;
    for (i, field) in spec.iter().enumerate() {
        let (key, value) = field.ok()?;
        match (key.as_str(), value) {
            // The command's name, whatever its value.
            _ if i == 0 => {}
            ("mechanism", RawBsonRef::String(m)) => mechanism = Some(m),
            ("user", RawBsonRef::String(u)) => user = Some(u),
            ("db", RawBsonRef::String(d)) => db = d,
            // A missing field, a wrong type or an unknown field: the command does not parse.
            _ => return None,
        }
    }
    let attempt = Attempt {
        db,
        mechanism: mechanism?,
        user,
        speculative: true,
    };
    let name = login(ctx, state, &attempt).ok()?;
    Some(reply(&name))
}

#[cfg(test)]
mod tests {
    use super::{ErrorCode, Failure, attributes, cluster_member};

    #[test]
    fn rendered_subjects_read_back() {
        let attr = |ty: &str, value: &[u8]| (ty.to_owned(), value.to_vec());
        assert_eq!(
            attributes("CN=a\\,b\\+c,O=x+OU=\\ y\\C3\\A9\\ ,DC=\\#1\\\\AB"),
            vec![
                attr("CN", b"a,b+c"),
                attr("O", b"x"),
                attr("OU", " y\u{e9} ".as_bytes()),
                attr("DC", b"#1\\AB"),
            ]
        );
        assert_eq!(attributes(""), vec![]);
        assert_eq!(attributes("C=,O=b"), vec![attr("C", b""), attr("O", b"b")]);
    }

    #[test]
    fn cluster_members_share_dc_o_and_ou() {
        let server = "CN=server.example,OU=Kernel,O=MongoDB,DC=example,C=US";
        // The same DC, O and OU, in any order, whatever the rest.
        assert!(cluster_member(
            "CN=other,DC=example,O=MongoDB,OU=Kernel",
            server
        ));
        assert!(cluster_member(server, server));
        assert!(!cluster_member(
            "CN=client,OU=KernelUser,O=MongoDB,DC=example",
            server
        ));
        assert!(!cluster_member("CN=client,OU=Kernel,O=MongoDB", server));
        assert!(!cluster_member(
            "CN=client,OU=Kernel,OU=More,O=MongoDB,DC=example",
            server
        ));
        // Neither has any: not a member.
        assert!(!cluster_member("CN=client", "CN=localhost"));
    }

    #[test]
    fn only_user_not_found_and_protocol_errors_reach_the_client() {
        let told = |code| Failure::new(code, "why").reply();
        assert_eq!(told(ErrorCode::UserNotFound).code, ErrorCode::UserNotFound);
        assert_eq!(told(ErrorCode::UserNotFound).errmsg, "why");
        assert_eq!(
            told(ErrorCode::ProtocolError).code,
            ErrorCode::ProtocolError
        );
        for code in [ErrorCode::BadValue, ErrorCode::AuthenticationFailed] {
            let e = told(code);
            assert_eq!(e.code, ErrorCode::AuthenticationFailed);
            assert_eq!(e.errmsg, "Authentication failed.");
        }
    }
}
