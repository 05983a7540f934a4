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
    use super::{ErrorCode, Failure};

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
