//! The stages that start a collection-less aggregation (`{aggregate: 1}`): `$documents` and
//! `$listLocalSessions`. Each must be the first stage, and only such a stage may start one.

use bson::raw::cstr;
use bson::spec::BinarySubtype;
use bson::{Binary, RawBson, RawBsonRef, RawDocumentBuf, rawdoc};

use super::super::args::wrong_type;
use crate::error::{CommandError, CommandResult, ErrorCode};
use crate::query::display::{self, type_name};
use crate::query::expr::Expression;
use crate::sessions::Sessions;

/// The digest (SHA-256) of the empty user name: the `uid` of every session on a server without
/// access control, where every client is the same unauthenticated user.
const NO_AUTH_UID: [u8; 32] = [
    0xe3, 0xb0, 0xc4, 0x42, 0x98, 0xfc, 0x1c, 0x14, 0x9a, 0xfb, 0xf4, 0xc8, 0x99, 0x6f, 0xb9, 0x24,
    0x27, 0xae, 0x41, 0xe4, 0x64, 0x9b, 0x93, 0x4c, 0xa4, 0x95, 0x99, 0x1b, 0x78, 0x52, 0xb8, 0x55,
];

fn invalid_bson(e: &bson::error::Error) -> CommandError {
    CommandError::new(ErrorCode::InvalidBSON, e.to_string())
}

/// `$documents: <expression>`: the expression (evaluated once, with no input document) must
/// give an array of documents, which become the pipeline's input.
pub(super) fn documents(arg: RawBsonRef<'_>) -> CommandResult<Vec<RawDocumentBuf>> {
    let value = Expression::parse(arg)?.evaluate(&RawDocumentBuf::new())?;
    let Some(RawBson::Array(items)) = value else {
        return Err(CommandError::new(
            ErrorCode::Location(5_858_203),
            "an array is expected",
        ));
    };
    let mut out = Vec::new();
    for item in &items {
        match item.map_err(|e| invalid_bson(&e))? {
            RawBsonRef::Document(d) => out.push(d.to_owned()),
            other => {
                return Err(CommandError::new(
                    ErrorCode::Location(40228),
                    format!(
                        "'newRoot' expression must evaluate to an object, but resulting value \
                         was: {}. Type of resulting value: '{}'.",
                        display::value(other),
                        type_name(other.element_type())
                    ),
                ));
            }
        }
    }
    Ok(out)
}

/// Whose sessions `$listLocalSessions` lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum SessionOwners {
    /// Every session (`{}`, `{allUsers: true}`, or the unauthenticated user named in `users`):
    /// without access control every session belongs to the one unauthenticated user.
    All,
    /// Only named users, who own no session on a server without users.
    Named,
}

/// Parses `$listLocalSessions: {allUsers?, users?}`.
pub(super) fn list_local_sessions(arg: RawBsonRef<'_>) -> CommandResult<SessionOwners> {
    list_sessions("$listLocalSessions", arg)
}

/// Parses the spec `$listLocalSessions` and `$listSessions` (named `STAGE`) share (mongod's
/// `ListSessionsSpec`).
pub(super) fn list_sessions(stage: &str, arg: RawBsonRef<'_>) -> CommandResult<SessionOwners> {
    let RawBsonRef::Document(spec) = arg else {
        return Err(CommandError::type_mismatch(format!(
            "{stage} options must be specified in an object, but found: {}",
            type_name(arg.element_type())
        )));
    };
    let mut all_users = false;
    let mut users = Vec::new();
    for elem in spec {
        let (k, v) = elem.map_err(|e| invalid_bson(&e))?;
        match (k.as_str(), v) {
            ("allUsers", RawBsonRef::Boolean(b)) => all_users = b,
            ("allUsers", other) => {
                return Err(wrong_type(&format!("{stage}.allUsers"), other, " 'bool'"));
            }
            ("users", RawBsonRef::Array(list)) => {
                for (i, user) in list.into_iter().enumerate() {
                    let user = match user.map_err(|e| invalid_bson(&e))? {
                        RawBsonRef::Document(d) => d,
                        other => {
                            return Err(wrong_type(
                                &format!("{stage}.users.{i}"),
                                other,
                                " 'object'",
                            ));
                        }
                    };
                    let mut name = None;
                    let mut db = None;
                    for elem in user {
                        let (k, v) = elem.map_err(|e| invalid_bson(&e))?;
                        let slot = match k.as_str() {
                            "user" => &mut name,
                            "db" => &mut db,
                            other => {
                                return Err(CommandError::unknown_field(&format!(
                                    "{stage}.users.{other}"
                                )));
                            }
                        };
                        match v {
                            RawBsonRef::String(s) => *slot = Some(s.to_owned()),
                            other => {
                                return Err(wrong_type(
                                    &format!("{stage}.users.{}", k.as_str()),
                                    other,
                                    " 'string'",
                                ));
                            }
                        }
                    }
                    let name = name.ok_or_else(|| {
                        CommandError::missing_field(&format!("{stage}.users.user"))
                    })?;
                    let db = db
                        .ok_or_else(|| CommandError::missing_field(&format!("{stage}.users.db")))?;
                    users.push((name, db));
                }
            }
            ("users", other) => {
                return Err(wrong_type(&format!("{stage}.users"), other, " 'array'"));
            }
            (other, _) => {
                return Err(CommandError::unknown_field(&format!("{stage}.{other}")));
            }
        }
    }
    if all_users && !users.is_empty() {
        return Err(CommandError::new(
            ErrorCode::UnsupportedFormat,
            format!(
                "{stage} may not specify {{allUsers:true}} and {{users:[...]}} at the same time"
            ),
        ));
    }
    // No users listed means the caller's own sessions: the unauthenticated user's, which are
    // all of them.
    let unauthenticated =
        users.is_empty() || users.iter().any(|(u, d)| u.is_empty() && d.is_empty());
    Ok(if all_users || unauthenticated {
        SessionOwners::All
    } else {
        SessionOwners::Named
    })
}

/// The session records `$listLocalSessions` shows at `now_ms`, as mongod's session cache
/// shows them: `{_id: {id, uid}, lastUse}`.
pub(super) fn session_records(
    sessions: &Sessions,
    owners: SessionOwners,
    now_ms: i64,
) -> Vec<RawDocumentBuf> {
    if owners == SessionOwners::Named {
        return Vec::new();
    }
    sessions
        .list(now_ms)
        .into_iter()
        .map(|(id, last_use)| {
            let mut key = RawDocumentBuf::new();
            key.append(
                cstr!("id"),
                Binary {
                    subtype: BinarySubtype::Uuid,
                    bytes: id.to_vec(),
                },
            );
            key.append(
                cstr!("uid"),
                Binary {
                    subtype: BinarySubtype::Generic,
                    bytes: NO_AUTH_UID.to_vec(),
                },
            );
            let mut record = rawdoc! { "_id": key };
            record.append(cstr!("lastUse"), bson::DateTime::from_millis(last_use));
            record
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use bson::{rawbson, rawdoc};

    use super::*;

    #[test]
    fn documents_evaluates_an_array_of_documents() {
        let arg = rawbson!([{ "a": 1 }, { "b": { "$literal": "$x" } }]);
        let docs = documents(arg.as_raw_bson_ref()).unwrap();
        assert_eq!(docs, vec![rawdoc! { "a": 1 }, rawdoc! { "b": "$x" }]);
        let err = documents(rawbson!({ "a": 1 }).as_raw_bson_ref()).unwrap_err();
        assert_eq!(err.code, ErrorCode::Location(5_858_203));
        let err = documents(rawbson!([1]).as_raw_bson_ref()).unwrap_err();
        assert_eq!(err.code, ErrorCode::Location(40228));
    }

    #[test]
    fn list_local_sessions_spec() {
        let parse = |d: RawDocumentBuf| list_local_sessions(RawBsonRef::Document(&d));
        assert_eq!(parse(rawdoc! {}).unwrap(), SessionOwners::All);
        assert_eq!(
            parse(rawdoc! { "allUsers": true }).unwrap(),
            SessionOwners::All
        );
        assert_eq!(
            parse(rawdoc! { "users": [{ "user": "a", "db": "b" }] }).unwrap(),
            SessionOwners::Named
        );
        assert_eq!(
            parse(rawdoc! { "users": [{ "user": "", "db": "" }] }).unwrap(),
            SessionOwners::All
        );
        let err =
            parse(rawdoc! { "allUsers": true, "users": [{ "user": "a", "db": "b" }] }).unwrap_err();
        assert_eq!(err.code, ErrorCode::UnsupportedFormat);
        assert_eq!(
            parse(rawdoc! { "x": 1 }).unwrap_err().code,
            ErrorCode::IDLUnknownField
        );
        assert_eq!(
            list_local_sessions(RawBsonRef::Int32(1)).unwrap_err().code,
            ErrorCode::TypeMismatch
        );
    }

    #[test]
    fn records_carry_the_no_auth_uid() {
        let sessions = Sessions::default();
        sessions.touch([9; 16], 5);
        let records = session_records(&sessions, SessionOwners::All, 10);
        assert_eq!(records.len(), 1);
        let key = records[0].get_document("_id").unwrap();
        assert_eq!(key.get_binary("uid").unwrap().bytes, NO_AUTH_UID);
        assert!(session_records(&sessions, SessionOwners::Named, 10).is_empty());
    }
}
