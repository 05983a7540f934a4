//! The logical session commands: `startSession`, `refreshSessions`, `endSessions`,
//! `killSessions`, `killAllSessions`, `killAllSessionsByPattern`
//! (`src/mongo/db/session/logical_session_id.idl`, `kill_sessions.idl`).
//!
//! Without authentication every session belongs to the same nobody (`uid` the SHA-256 of no
//! user names), so a pattern naming users or roles matches none, and an empty list, or one
//! naming that `uid`, matches all. Killing a session closes the cursors opened in it (a later
//! `getMore` answers `CursorNotFound`); the session itself goes on, as in mongod ("future
//! operations may use the killed session"); its open transaction, if no command holds the
//! session right now, is aborted. Ebb runs no operation long enough to be killed half-way
//! other than by `maxTimeMS` or shutdown.

use bson::{RawBsonRef, RawDocument, rawdoc};

use super::args::wrong_type;
use crate::dispatch::Request;
use crate::error::{CommandError, CommandResult, ErrorCode};
use crate::sessions::{SessionId, session_id};
use crate::state::ServerState;

/// The SHA-256 of no user names: every session's `uid` when authentication is off.
const NO_USER_UID: [u8; 32] = [
    0xe3, 0xb0, 0xc4, 0x42, 0x98, 0xfc, 0x1c, 0x14, 0x9a, 0xfb, 0xf4, 0xc8, 0x99, 0x6f, 0xb9, 0x24,
    0x27, 0xae, 0x41, 0xe4, 0x64, 0x9b, 0x93, 0x4c, 0xa4, 0x95, 0x99, 0x1b, 0x78, 0x52, 0xb8, 0x55,
];

fn invalid_bson(e: &bson::error::Error) -> CommandError {
    CommandError::new(ErrorCode::InvalidBSON, e.to_string())
}

/// The documents of the command's array argument (its first field), each checked to be a
/// document.
fn documents<'a>(req: &Request<'a>) -> CommandResult<Vec<&'a RawDocument>> {
    let name = req.name;
    let list = match req.body.get(name).map_err(|e| invalid_bson(&e))? {
        Some(RawBsonRef::Array(list)) => list,
        Some(other) => return Err(wrong_type(name, other, " 'array'")),
        None => return Err(CommandError::missing_field(name)),
    };
    let mut out = Vec::new();
    for (i, item) in list.into_iter().enumerate() {
        match item.map_err(|e| invalid_bson(&e))? {
            RawBsonRef::Document(d) => out.push(d),
            other => return Err(wrong_type(&format!("{name}.{i}"), other, " 'object'")),
        }
    }
    Ok(out)
}

/// A `LogicalSessionFromClient` (`{id: UUID, uid?: BinData}`): its id. mongod's errors for a
/// missing or mistyped `id` and for unknown fields.
fn session_from_client(d: &RawDocument) -> CommandResult<SessionId> {
    const STRUCT: &str = "LogicalSessionFromClient";
    let mut id = None;
    for elem in d {
        let (key, value) = elem.map_err(|e| invalid_bson(&e))?;
        match key.as_str() {
            "id" => id = Some(value),
            "uid" => match value {
                RawBsonRef::Binary(_) => {}
                other => return Err(wrong_type(&format!("{STRUCT}.uid"), other, " 'binData'")),
            },
            other => return Err(CommandError::unknown_field(&format!("{STRUCT}.{other}"))),
        }
    }
    let id = id.ok_or_else(|| CommandError::missing_field(&format!("{STRUCT}.id")))?;
    match id {
        RawBsonRef::Binary(b) if b.subtype == bson::spec::BinarySubtype::Uuid => {
            SessionId::try_from(b.bytes).map_err(|_| {
                CommandError::bad_value(format!(
                    "uuid must be a 16-byte binary field with UUID (4) subtype in {STRUCT}.id"
                ))
            })
        }
        RawBsonRef::Binary(_) => Err(CommandError::bad_value(format!(
            "uuid must be a 16-byte binary field with UUID (4) subtype in {STRUCT}.id"
        ))),
        other => Err(wrong_type(&format!("{STRUCT}.id"), other, " 'binData'")),
    }
}

/// `startSession`: a new session, `{id: {id: UUID}, timeoutMinutes}`.
pub(super) fn start_session(state: &ServerState) -> bson::RawDocumentBuf {
    let uuid = bson::Uuid::new();
    let id: SessionId = uuid.bytes();
    state.sessions.touch(id, state.now_ms());
    rawdoc! {
        "id": { "id": bson::Binary { subtype: bson::spec::BinarySubtype::Uuid, bytes: id.to_vec() } },
        "timeoutMinutes": super::handshake::LOGICAL_SESSION_TIMEOUT_MINUTES,
        "ok": 1.0,
    }
}

/// `refreshSessions`: the sessions named are in use now.
pub(super) fn refresh_sessions(req: &Request<'_>, state: &ServerState) -> CommandResult {
    let ids = documents(req)?
        .into_iter()
        .map(session_from_client)
        .collect::<CommandResult<Vec<_>>>()?;
    let now = state.now_ms();
    for id in ids {
        state.sessions.touch(id, now);
    }
    Ok(rawdoc! { "ok": 1.0 })
}

/// `endSessions`: the sessions named are forgotten (mongod marks them expired, for its
/// reaper), with what their retryable writes recorded. Elements without a session id are
/// passed over, as before.
pub(super) fn end_sessions(req: &Request<'_>, state: &ServerState) -> CommandResult {
    let snapshot = state.catalog.snapshot();
    let mut batch = crate::storage::Batch::new();
    for d in documents(req)? {
        if let Some(id) = session_id(RawBsonRef::Document(d)) {
            state.sessions.end(&id);
            state.retryable.end(&*snapshot, &id, &mut batch)?;
        }
    }
    if !batch.is_empty() {
        state.catalog.store().commit(batch)?;
    }
    Ok(rawdoc! { "ok": 1.0 })
}

/// Which sessions a kill command names.
enum Kill {
    All,
    These(Vec<SessionId>),
}

fn kill(state: &ServerState, which: &Kill) {
    match which {
        Kill::All => {
            state.retryable.abort_sessions(|_| true);
            state.cursors.kill_sessions(|_| true)
        }
        Kill::These(ids) => {
            state.retryable.abort_sessions(|id| ids.contains(id));
            state.cursors.kill_sessions(|id| ids.contains(id))
        }
    };
}

/// `killSessions`: the sessions named, or every session for an empty list.
pub(super) fn kill_sessions(req: &Request<'_>, state: &ServerState) -> CommandResult {
    let ids = documents(req)?
        .into_iter()
        .map(session_from_client)
        .collect::<CommandResult<Vec<_>>>()?;
    kill(
        state,
        &if ids.is_empty() {
            Kill::All
        } else {
            Kill::These(ids)
        },
    );
    Ok(rawdoc! { "ok": 1.0 })
}

/// A strict `{user: string, db: string}` (`KillAllSessionsUser`) or `{role, db}`
/// (`KillAllSessionsRole`).
fn check_principal(d: &RawDocument, structure: &str, first: &str) -> CommandResult<()> {
    let (mut has_first, mut has_db) = (false, false);
    for elem in d {
        let (key, value) = elem.map_err(|e| invalid_bson(&e))?;
        let slot = match key.as_str() {
            k if k == first => &mut has_first,
            "db" => &mut has_db,
            other => return Err(CommandError::unknown_field(&format!("{structure}.{other}"))),
        };
        match value {
            RawBsonRef::String(_) => *slot = true,
            other => {
                return Err(wrong_type(
                    &format!("{structure}.{}", key.as_str()),
                    other,
                    " 'string'",
                ));
            }
        }
    }
    if !has_first {
        return Err(CommandError::missing_field(&format!("{structure}.{first}")));
    }
    if !has_db {
        return Err(CommandError::missing_field(&format!("{structure}.db")));
    }
    Ok(())
}

/// `killAllSessions`: every session for an empty list; otherwise those of the users named,
/// which without authentication are none.
pub(super) fn kill_all_sessions(req: &Request<'_>, state: &ServerState) -> CommandResult {
    let users = documents(req)?;
    for u in &users {
        check_principal(u, "KillAllSessionsUser", "user")?;
    }
    if users.is_empty() {
        kill(state, &Kill::All);
    }
    Ok(rawdoc! { "ok": 1.0 })
}

/// `killAllSessionsByPattern`: the sessions any pattern matches (every session for an empty
/// list or an empty pattern). A pattern is `{lsid?, uid?, users?, roles?}`; `users` and `roles`
/// name principals no session has without authentication.
pub(super) fn kill_all_sessions_by_pattern(
    req: &Request<'_>,
    state: &ServerState,
) -> CommandResult {
    const STRUCT: &str = "KillAllSessionsByPattern";
    let patterns = documents(req)?;
    let mut all = patterns.is_empty();
    let mut ids = Vec::new();
    for p in patterns {
        let (mut lsid, mut uid, mut principals) = (None, None, false);
        for elem in p {
            let (key, value) = elem.map_err(|e| invalid_bson(&e))?;
            match (key.as_str(), value) {
                ("lsid", RawBsonRef::Document(d)) => lsid = Some(session_from_client(d)?),
                ("lsid", other) => {
                    return Err(wrong_type(&format!("{STRUCT}.lsid"), other, " 'object'"));
                }
                ("uid", RawBsonRef::Binary(b)) => uid = Some(b.bytes == NO_USER_UID),
                ("uid", other) => {
                    return Err(wrong_type(&format!("{STRUCT}.uid"), other, " 'binData'"));
                }
                (field @ ("users" | "roles"), RawBsonRef::Array(list)) => {
                    let (structure, first) = if field == "users" {
                        ("KillAllSessionsUser", "user")
                    } else {
                        ("KillAllSessionsRole", "role")
                    };
                    for (i, item) in list.into_iter().enumerate() {
                        match item.map_err(|e| invalid_bson(&e))? {
                            RawBsonRef::Document(d) => check_principal(d, structure, first)?,
                            other => {
                                return Err(wrong_type(
                                    &format!("{STRUCT}.{field}.{i}"),
                                    other,
                                    " 'object'",
                                ));
                            }
                        }
                    }
                    principals = true;
                }
                (field @ ("users" | "roles"), other) => {
                    return Err(wrong_type(&format!("{STRUCT}.{field}"), other, " 'array'"));
                }
                (other, _) => {
                    return Err(CommandError::unknown_field(&format!("{STRUCT}.{other}")));
                }
            }
        }
        // Every named part must match: principals match no session here.
        if principals || uid == Some(false) {
            continue;
        }
        match lsid {
            Some(id) => ids.push(id),
            None => all = true,
        }
    }
    kill(state, &if all { Kill::All } else { Kill::These(ids) });
    Ok(rawdoc! { "ok": 1.0 })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bytes here and the base64 text messages show (`sessions::display`) are one value.
    #[test]
    fn the_no_user_uid_is_the_one_messages_show() {
        const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        let mut text = String::new();
        for chunk in NO_USER_UID.chunks(3) {
            let n = chunk
                .iter()
                .enumerate()
                .fold(0_u32, |n, (i, b)| n | u32::from(*b) << (16 - 8 * i));
            for i in 0..=chunk.len() {
                text.push(char::from(ALPHABET[(n >> (18 - 6 * i) & 63) as usize]));
            }
        }
        while !text.len().is_multiple_of(4) {
            text.push('=');
        }
        assert!(crate::sessions::display(&[0; 16]).contains(&text), "{text}");
    }
}
