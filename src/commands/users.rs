//! User management: `createUser` (more to come: `updateUser`, `dropUser`,
//! `dropAllUsersFromDatabase`, `usersInfo`, `grantRolesToUser`, `revokeRolesFromUser`).

use bson::{Document, RawBsonRef, RawDocument, doc, rawdoc};

use crate::auth::privileges::UserName;
use crate::auth::roles::RoleName;
use crate::auth::scram::{Mechanism, SaltSource, make_credential};
use crate::auth::store::User;
use crate::dispatch::Request;
use crate::error::{CommandError, CommandResult, ErrorCode};
use crate::state::ServerState;

/// A `roles` array as user commands take it: each a role name in the command's database, or
/// `{role, db}`.
pub(super) fn parse_roles(
    command: &str,
    db: &str,
    value: Option<RawBsonRef<'_>>,
) -> Result<Vec<RoleName>, CommandError> {
    let Some(value) = value else {
        return Err(CommandError::new(
            ErrorCode::IDLFailedToParse,
            format!("BSON field '{command}.roles' is missing but a required field"),
        ));
    };
    let RawBsonRef::Array(list) = value else {
        return Err(CommandError::type_mismatch(format!(
            "BSON field '{command}.roles' is the wrong type '{}', expected type 'array'",
            super::type_name(value.element_type())
        )));
    };
    let mut roles = Vec::new();
    for item in list {
        let item = item.map_err(|e| CommandError::new(ErrorCode::InvalidBSON, e.to_string()))?;
        match item {
            RawBsonRef::String(role) => roles.push(RoleName::new(role, db)),
            RawBsonRef::Document(d) => match (d.get_str("role"), d.get_str("db")) {
                (Ok(role), Ok(role_db)) => roles.push(RoleName::new(role, role_db)),
                _ => {
                    return Err(CommandError::bad_value(
                        "Role names must be either strings or objects with 'role' and 'db' fields",
                    ));
                }
            },
            _ => {
                return Err(CommandError::bad_value(
                    "Role names must be either strings or objects",
                ));
            }
        }
    }
    Ok(roles)
}

/// The mechanisms a user gets: those asked for (`mechanisms`), or both.
pub(super) fn parse_mechanisms(body: &RawDocument) -> Result<Vec<Mechanism>, CommandError> {
    let Ok(Some(value)) = body.get("mechanisms") else {
        return Ok(Mechanism::ALL.to_vec());
    };
    let RawBsonRef::Array(list) = value else {
        return Err(CommandError::type_mismatch(
            "mechanisms field must be an array",
        ));
    };
    let mut out = Vec::new();
    for item in list {
        let Ok(RawBsonRef::String(name)) = item else {
            return Err(CommandError::bad_value("mechanisms field must be strings"));
        };
        let Some(m) = Mechanism::from_name(name) else {
            return Err(CommandError::bad_value(format!(
                "Unknown auth mechanism '{name}'"
            )));
        };
        if !out.contains(&m) {
            out.push(m);
        }
    }
    if out.is_empty() {
        return Err(CommandError::bad_value(
            "mechanisms field must not be empty",
        ));
    }
    Ok(out)
}

/// The `credentials` document for `user` with password `pwd`.
pub(super) fn credentials(
    user: &str,
    pwd: &str,
    mechanisms: &[Mechanism],
) -> Result<Document, CommandError> {
    let mut credentials = doc! {};
    for m in mechanisms {
        let credential = make_credential(
            *m,
            user,
            pwd,
            m.default_iteration_count(),
            SaltSource::Random,
        )
        .map_err(|e| CommandError::new(e.code, e.message))?;
        credentials.insert(m.name(), credential.to_document());
    }
    Ok(credentials)
}

/// `createUser`.
pub(super) fn create_user(req: &Request<'_>, state: &ServerState) -> CommandResult {
    let Ok(user) = req.body.get_str("createUser") else {
        return Err(CommandError::type_mismatch(
            "BSON field 'createUser' is the wrong type, expected type 'string'",
        ));
    };
    if user.is_empty() {
        return Err(CommandError::bad_value("User name must be non-empty"));
    }
    if req.db == "local" {
        return Err(CommandError::bad_value(
            "Cannot create users in the local database",
        ));
    }
    let roles = parse_roles("createUser", req.db, req.body.get("roles").ok().flatten())?;
    let custom_data = match req.body.get("customData") {
        Ok(Some(RawBsonRef::Document(d))) => Some(
            Document::try_from(d)
                .map_err(|e| CommandError::new(ErrorCode::InvalidBSON, e.to_string()))?,
        ),
        Ok(Some(_)) => {
            return Err(CommandError::type_mismatch(
                "BSON field 'createUser.customData' is the wrong type, expected type 'object'",
            ));
        }
        _ => None,
    };
    let pwd = req.body.get_str("pwd").ok();
    let credentials = if req.db == "$external" {
        if pwd.is_some() {
            return Err(CommandError::bad_value(
                "Cannot set the password for users defined on the '$external' database",
            ));
        }
        doc! { "external": true }
    } else {
        let Some(pwd) = pwd else {
            return Err(CommandError::bad_value(
                "Must provide a 'pwd' field for all user documents, except those with \
                 '$external' as the user's source db",
            ));
        };
        if pwd.is_empty() {
            return Err(CommandError::bad_value("Password cannot be empty"));
        }
        credentials(user, pwd, &parse_mechanisms(req.body)?)?
    };
    let name = UserName {
        user: user.to_owned(),
        db: req.db.to_owned(),
    };
    state
        .auth
        .create_user(User::new(name, credentials, &roles, custom_data)?)?;
    Ok(rawdoc! { "ok": 1.0 })
}
