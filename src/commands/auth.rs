//! Logging in and out: `saslStart`, `saslContinue`, speculative authentication and
//! `saslSupportedMechs` in `hello`, `logout`, `connectionStatus`.

use bson::raw::cstr;
use bson::{RawArrayBuf, RawBson, RawBsonRef, RawDocument, RawDocumentBuf, rawdoc};
use tracing::{info, warn};

use super::args::truthy;
use crate::auth::privileges::UserName;
use crate::auth::scram::{
    Mechanism, SaslPayload, ScramError, ScramServer, UserCredential, authentication_failed,
};
use crate::auth::session::{AuthSession, Conversation};
use crate::dispatch::{ConnCtx, Request};
use crate::error::{CommandError, CommandResult, ErrorCode};
use crate::state::ServerState;

/// The `conversationId` of every conversation: mongod answers 1 and takes no other
/// (`sasl_commands.cpp`: `reply.setConversationId(1)`, and saslContinue's "sasl: Mismatched
/// conversation id" unless it is 1).
const CONVERSATION_ID: i32 = 1;

/// What a conversation's step answers.
struct Step {
    conversation_id: i32,
    payload: Vec<u8>,
    done: bool,
}

fn missing(command: &str, field: &str) -> CommandError {
    CommandError::new(
        ErrorCode::IDLFailedToParse,
        format!("BSON field '{command}.{field}' is missing but a required field"),
    )
}

fn payload_of(command: &str, body: &RawDocument) -> Result<SaslPayload, CommandError> {
    match body.get("payload") {
        Ok(Some(value)) => SaslPayload::parse(value),
        _ => Err(missing(command, "payload")),
    }
}

/// Logs a failed login as mongod does (its 20249 "Authentication failed"), with the client's
/// address and the reason, which the client is not told.
fn log_failure(ctx: &ConnCtx, mechanism: &str, user: Option<&str>, db: &str, error: &ScramError) {
    warn!(
        remote = %ctx.peer,
        mechanism,
        user = user.unwrap_or(""),
        db,
        code = error.code.code(),
        reason = %error.message,
        "authentication failed"
    );
}

/// `saslStart`'s work, shared with speculative authentication: reads the client's first
/// message, looks the user up and answers the challenge.
fn start(
    ctx: &mut ConnCtx,
    state: &ServerState,
    db: &str,
    mechanism_name: &str,
    payload: &[u8],
    options: Option<&RawDocument>,
) -> Result<Step, CommandError> {
    ctx.auth.conversation = None;
    let Some(mechanism) = Mechanism::from_name(mechanism_name) else {
        return Err(CommandError::new(
            ErrorCode::MechanismUnavailable,
            format!(
                "Received authentication for mechanism {mechanism_name} which is unknown or not \
                 enabled"
            ),
        ));
    };
    let mut server = ScramServer::new(mechanism);
    if let Some(options) = options {
        server.set_options(options)?;
    }
    let first = match server.start(payload) {
        Ok(first) => first,
        Err(e) => {
            log_failure(ctx, mechanism.name(), None, db, &e);
            return Err(e.reply());
        }
    };
    let name = UserName {
        user: first.user,
        db: db.to_owned(),
    };
    // mongod 7.0 fails the first step for an unknown user (`UserNotFound`), answered as every
    // failure is.
    let Some(user) = state.auth.user(&name) else {
        let e = ScramError {
            code: ErrorCode::UserNotFound,
            message: format!(
                "Could not find user \"{}\" for db \"{}\"",
                name.user, name.db
            ),
        };
        log_failure(ctx, mechanism.name(), Some(&name.user), db, &e);
        return Err(authentication_failed());
    };
    let credential = user.credential(mechanism);
    let found = match &credential {
        Some(c) => UserCredential::Found(c),
        None => UserCredential::NoCredential,
    };
    let challenge = match server.challenge(found) {
        Ok(bytes) => bytes,
        Err(e) => {
            log_failure(ctx, mechanism.name(), Some(&name.user), db, &e);
            return Err(e.reply());
        }
    };
    let id = CONVERSATION_ID;
    ctx.auth.conversation = Some(Conversation {
        id,
        db: db.to_owned(),
        server,
    });
    Ok(Step {
        conversation_id: id,
        payload: challenge,
        done: false,
    })
}

/// `saslContinue`'s work: the next step of the conversation in progress, and the login when it
/// is done.
fn step(
    ctx: &mut ConnCtx,
    state: &ServerState,
    conversation_id: i32,
    payload: &[u8],
) -> Result<Step, CommandError> {
    let Some(conversation) = ctx.auth.conversation.as_mut() else {
        return Err(CommandError::new(
            ErrorCode::ProtocolError,
            "No SASL session state found",
        ));
    };
    if conversation.id != conversation_id {
        // Like any failed step, it ends the conversation (mongod's `AuthenticationSession::doStep`
        // marks the session failed on every error a step raises).
        ctx.auth.conversation = None;
        return Err(CommandError::new(
            ErrorCode::ProtocolError,
            "sasl: Mismatched conversation id",
        ));
    }
    let mechanism = conversation.server.mechanism();
    let result = conversation.server.step(payload);
    let user = conversation.server.user().unwrap_or_default().to_owned();
    let db = conversation.db.clone();
    let reply = match result {
        Ok(reply) => reply,
        Err(e) => {
            ctx.auth.conversation = None;
            log_failure(ctx, mechanism.name(), Some(&user), &db, &e);
            return Err(e.reply());
        }
    };
    if reply.done {
        ctx.auth.conversation = None;
        let name = UserName { user, db };
        ctx.auth.login(&state.auth, &name)?;
        info!(
            remote = %ctx.peer,
            mechanism = mechanism.name(),
            user = %name.user,
            db = %name.db,
            "successfully authenticated"
        );
    }
    Ok(Step {
        conversation_id,
        payload: reply.payload,
        done: reply.done,
    })
}

fn step_reply(step: Step, payload: &SaslPayload) -> Result<RawDocumentBuf, CommandError> {
    let payload = RawBson::try_from(payload.reply(step.payload))
        .map_err(|e| CommandError::new(ErrorCode::InternalError, e.to_string()))?;
    Ok(rawdoc! {
        "conversationId": step.conversation_id,
        "done": step.done,
        "payload": payload,
    })
}

/// `saslStart`.
pub(super) fn sasl_start(
    req: &Request<'_>,
    ctx: &mut ConnCtx,
    state: &ServerState,
) -> CommandResult {
    let Ok(mechanism) = req.body.get_str("mechanism") else {
        return Err(missing("saslStart", "mechanism"));
    };
    let payload = payload_of("saslStart", req.body)?;
    let options = req.body.get_document("options").ok();
    let step = start(ctx, state, req.db, mechanism, &payload.bytes, options)?;
    let mut reply = step_reply(step, &payload)?;
    reply.append(cstr!("ok"), 1.0);
    Ok(reply)
}

/// `saslContinue`.
pub(super) fn sasl_continue(
    req: &Request<'_>,
    ctx: &mut ConnCtx,
    state: &ServerState,
) -> CommandResult {
    let conversation_id = match req.body.get("conversationId") {
        Ok(Some(RawBsonRef::Int32(n))) => n,
        Ok(Some(RawBsonRef::Int64(n))) => i32::try_from(n).unwrap_or(-1),
        Ok(Some(RawBsonRef::Double(d))) if d.fract() == 0.0 => {
            #[expect(clippy::cast_possible_truncation, reason = "compared, never used")]
            let n = d as i32;
            n
        }
        Ok(Some(_)) => {
            return Err(CommandError::type_mismatch(
                "BSON field 'saslContinue.conversationId' is the wrong type, expected type 'int'",
            ));
        }
        _ => return Err(missing("saslContinue", "conversationId")),
    };
    let payload = payload_of("saslContinue", req.body)?;
    let step = step(ctx, state, conversation_id, &payload.bytes)?;
    let mut reply = step_reply(step, &payload)?;
    reply.append(cstr!("ok"), 1.0);
    Ok(reply)
}

/// What `hello` adds for the drivers' login: `saslSupportedMechs` (the mechanisms of the user
/// it names, when that user exists) and `speculativeAuthenticate` (the first step of a
/// `saslStart` carried by the `hello`, whose answer saves a round trip; a failure leaves the
/// field out and the client logs in the long way).
pub(super) fn hello_fields(
    req: &Request<'_>,
    ctx: &mut ConnCtx,
    state: &ServerState,
    reply: &mut RawDocumentBuf,
) -> Result<(), CommandError> {
    if let Ok(Some(value)) = req.body.get("saslSupportedMechs") {
        let RawBsonRef::String(full) = value else {
            return Err(CommandError::type_mismatch(
                "saslSupportedMechs must be a string",
            ));
        };
        let Some((db, user)) = full.split_once('.') else {
            return Err(CommandError::bad_value(
                "UserName must contain a '.' separated database.user pair",
            ));
        };
        let name = UserName {
            user: user.to_owned(),
            db: db.to_owned(),
        };
        if let Some(user) = state.auth.user(&name) {
            let mut mechs = RawArrayBuf::new();
            for m in user.mechanisms() {
                mechs.push(m.name());
            }
            reply.append(cstr!("saslSupportedMechs"), mechs);
        }
    }
    if let Ok(Some(RawBsonRef::Document(spec))) = req.body.get("speculativeAuthenticate") {
        // mongod's `handleIsMasterSpeculativeAuth`: the first field names the command.
        let first = match spec.iter().next() {
            Some(Ok((name, _))) => name.as_str(),
            _ => {
                return Err(CommandError::bad_value(
                    "hello.speculativeAuthenticate must be a non-empty Object",
                ));
            }
        };
        if first != "saslStart" && first != "authenticate" {
            return Err(CommandError::new(
                ErrorCode::Location(51769),
                format!("hello.speculativeAuthenticate unknown command: {first}"),
            ));
        }
        if let Some(answer) = speculative(ctx, state, spec) {
            reply.append(cstr!("speculativeAuthenticate"), answer);
        }
    }
    Ok(())
}

fn speculative(
    ctx: &mut ConnCtx,
    state: &ServerState,
    spec: &RawDocument,
) -> Option<RawDocumentBuf> {
    // mongod picks the command by the document's first field: `saslStart` or `authenticate`
    // (`MONGODB-X509`).
    if matches!(spec.iter().next(), Some(Ok((name, _))) if name.as_str() == "authenticate") {
        return super::x509::speculative(ctx, state, spec);
    }
    let db = spec.get_str("db").ok()?;
    {
        let mechanism = spec.get_str("mechanism").ok()?;
        let payload = spec.get("payload").ok().flatten().map(SaslPayload::parse)?;
        let payload = payload.ok()?;
        let options = spec.get_document("options").ok();
        match start(ctx, state, db, mechanism, &payload.bytes, options) {
            Ok(step) => step_reply(step, &payload).ok(),
            Err(e) => {
                info!(code = e.code.code(), error = %e.errmsg, "speculative authentication failed");
                None
            }
        }
    }
}

/// `logout`: the connection's user is logged out (mongod 5.0 and later log out of every
/// database).
pub(super) fn logout(ctx: &mut ConnCtx) -> RawDocumentBuf {
    if let Some(name) = ctx.auth.user_name() {
        info!(remote = %ctx.peer, user = %name.user, db = %name.db, "logged out");
    }
    ctx.auth.logout();
    rawdoc! { "ok": 1.0 }
}

fn user_document(name: &UserName) -> RawDocumentBuf {
    rawdoc! { "user": name.user.as_str(), "db": name.db.as_str() }
}

/// `connectionStatus`: the logged-in user, its roles, and (`showPrivileges`) its privileges.
pub(super) fn connection_status(
    req: &Request<'_>,
    ctx: &mut ConnCtx,
    state: &ServerState,
) -> CommandResult {
    let show_privileges = match req.body.get("showPrivileges").ok().flatten() {
        Some(v) => truthy("showPrivileges", v)?,
        None => false,
    };
    ctx.auth.refresh(&state.auth);
    let session: &AuthSession = &ctx.auth;
    let mut users = RawArrayBuf::new();
    let mut roles = RawArrayBuf::new();
    if let Some(user) = &session.user {
        users.push(user_document(user.name()));
        for role in user.user.roles().unwrap_or_default() {
            roles.push(rawdoc! { "role": role.role.as_str(), "db": role.db.as_str() });
        }
    }
    let mut auth = rawdoc! {
        "authenticatedUsers": users,
        "authenticatedUserRoles": roles,
    };
    if show_privileges {
        let mut list = RawArrayBuf::new();
        for privilege in
            crate::auth::session::privileges(session, &state.auth, state.config.auth).iter()
        {
            let doc = RawDocumentBuf::try_from(&privilege.to_document())
                .map_err(|e| CommandError::new(ErrorCode::InternalError, e.to_string()))?;
            list.push(doc);
        }
        auth.append(cstr!("authenticatedUserPrivileges"), list);
    }
    Ok(rawdoc! { "authInfo": auth, "ok": 1.0 })
}
