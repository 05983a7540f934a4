//! User management, as mongod 7.0's `user_management_commands.cpp` does it: `createUser`,
//! `updateUser`, `dropUser`, `dropAllUsersFromDatabase`, `usersInfo`, `grantRolesToUser`,
//! `revokeRolesFromUser`. Field types and unknown fields are checked beforehand from
//! [`super::fields`]; each change is one [`crate::auth::store::AuthStore`] commit, which bumps
//! its generation, so an open connection of a changed user sees the change at its next command
//! (and a dropped user's connection is logged out).
//!
//! The helpers that parse user and role names (`AuthName::parseFromBSON`) serve
//! [`super::roles`] as well.

use bson::{Bson, Document, RawBsonRef, RawDocumentBuf, doc, rawdoc};

use super::args::{truthy, wrong_type};
use crate::auth::privileges::{PrivilegeSet, UserName};
use crate::auth::roles::{RoleGraph, RoleName, is_builtin};
use crate::auth::scram::{Mechanism, ScramCredential, mongo_password_digest};
use crate::auth::store::{User, roles_array, user_not_found};
use crate::dispatch::Request;
use crate::error::{CommandError, CommandResult, ErrorCode};
use crate::query::filter::{Filter, FilterContext};
use crate::state::ServerState;

fn invalid_bson(e: &bson::error::Error) -> CommandError {
    CommandError::new(ErrorCode::InvalidBSON, e.to_string())
}

/// A reply document as raw BSON.
pub(super) fn to_raw(doc: &Document) -> CommandResult {
    RawDocumentBuf::try_from(doc)
        .map_err(|e| CommandError::new(ErrorCode::InternalError, e.to_string()))
}

/// The command's own value (the user or role it names), a string: the IDL's `TypeMismatch`
/// otherwise.
pub(super) fn name_arg<'a>(req: &Request<'a>) -> CommandResult<&'a str> {
    match req.body.get(req.name).map_err(|e| invalid_bson(&e))? {
        Some(RawBsonRef::String(name)) => Ok(name),
        Some(other) => Err(wrong_type(req.name, other, " 'string'")),
        None => Err(CommandError::missing_field(req.name)),
    }
}

/// A `safeBool` option of the command, `default` when absent.
pub(super) fn flag(req: &Request<'_>, name: &str, default: bool) -> CommandResult<bool> {
    match req.body.get(name).map_err(|e| invalid_bson(&e))? {
        None => Ok(default),
        Some(v) => truthy(&format!("{}.{name}", req.name), v),
    }
}

pub(super) use crate::auth::roles::{parse_auth_name, parse_role_name};

/// A `roles` field (`array<RoleNameOrString>`), in the order given.
pub(super) fn parse_role_list(
    command: &str,
    db: &str,
    value: RawBsonRef<'_>,
) -> CommandResult<Vec<RoleName>> {
    let RawBsonRef::Array(list) = value else {
        return Err(wrong_type(&format!("{command}.roles"), value, " 'array'"));
    };
    let mut roles = Vec::new();
    for item in list {
        roles.push(parse_role_name(db, item.map_err(|e| invalid_bson(&e))?)?);
    }
    Ok(roles)
}

/// A `roles` array as user commands take it (kept for callers of the first version).
pub(super) fn parse_roles(
    command: &str,
    db: &str,
    value: Option<RawBsonRef<'_>>,
) -> Result<Vec<RoleName>, CommandError> {
    match value {
        None => Err(CommandError::missing_field(&format!("{command}.roles"))),
        // mongod's answer to `roles: null` in `createUser`.
        Some(RawBsonRef::Null) => Err(CommandError::new(
            ErrorCode::Location(10065),
            "invalid parameter: expected an object (roles)",
        )),
        Some(v) => parse_role_list(command, db, v),
    }
}

/// The `mechanisms` field (`array<string>`), if given.
fn parse_mechanism_names(req: &Request<'_>) -> CommandResult<Option<Vec<String>>> {
    let Some(value) = req.body.get("mechanisms").map_err(|e| invalid_bson(&e))? else {
        return Ok(None);
    };
    let RawBsonRef::Array(list) = value else {
        return Err(wrong_type(
            &format!("{}.mechanisms", req.name),
            value,
            " 'array'",
        ));
    };
    let mut out = Vec::new();
    for (i, item) in list.into_iter().enumerate() {
        match item.map_err(|e| invalid_bson(&e))? {
            RawBsonRef::String(name) => out.push(name.to_owned()),
            other => {
                return Err(wrong_type(
                    &format!("{}.mechanisms.{i}", req.name),
                    other,
                    " 'string'",
                ));
            }
        }
    }
    Ok(Some(out))
}

/// Random salt bytes for a new credential.
fn random_salt(mechanism: Mechanism) -> CommandResult<Vec<u8>> {
    let mut salt = vec![0u8; mechanism.salt_len()];
    getrandom::fill(&mut salt).map_err(|e| {
        CommandError::new(ErrorCode::InternalError, format!("no random bytes: {e}"))
    })?;
    Ok(salt)
}

/// mongod's `buildCredentials`: the `credentials` document for `user` with password `pwd`, for
/// the mechanisms asked for (both when none are). `digest: false` (`digestPassword: false`)
/// takes `pwd` as the SCRAM-SHA-1 digest already made, which SCRAM-SHA-256 cannot use.
fn build_credentials(
    user: &str,
    pwd: &str,
    mechanisms: Option<&[String]>,
    digest: bool,
) -> CommandResult<Document> {
    let (mut sha1, mut sha256) = (false, false);
    match mechanisms {
        Some(list) if !list.is_empty() => {
            for name in list {
                match Mechanism::from_name(name) {
                    Some(Mechanism::ScramSha1) => sha1 = true,
                    Some(Mechanism::ScramSha256) => sha256 = true,
                    None => {
                        return Err(CommandError::bad_value(format!(
                            "Unknown auth mechanism '{name}'"
                        )));
                    }
                }
            }
        }
        _ => (sha1, sha256) = (true, true),
    }
    let mut credentials = doc! {};
    if sha1 {
        let m = Mechanism::ScramSha1;
        let hashed = if digest {
            mongo_password_digest(user, pwd)
        } else {
            pwd.to_owned()
        };
        let credential = ScramCredential::derive(
            m,
            hashed.as_bytes(),
            &random_salt(m)?,
            m.default_iteration_count(),
        )
        .map_err(|e| CommandError::new(e.code, e.message))?;
        credentials.insert(m.name(), credential.to_document());
    }
    if sha256 {
        let m = Mechanism::ScramSha256;
        if !digest {
            return Err(CommandError::bad_value(
                "Use of SCRAM-SHA-256 requires undigested passwords",
            ));
        }
        // mongod prepares the password with ICU, whose answers these are.
        if pwd.is_empty() {
            return Err(CommandError::new(
                ErrorCode::Location(50687),
                "Error preflighting UTF-8 conversion: U_STRING_NOT_TERMINATED_WARNING",
            ));
        }
        let Ok(prepared) = m.prepare_password(user, pwd) else {
            return Err(CommandError::new(
                ErrorCode::Location(50692),
                "Error preflighting normalization: U_STRINGPREP_PROHIBITED_ERROR",
            ));
        };
        let credential = ScramCredential::derive(
            m,
            prepared.as_bytes(),
            &random_salt(m)?,
            m.default_iteration_count(),
        )
        .map_err(|e| CommandError::new(e.code, e.message))?;
        credentials.insert(m.name(), credential.to_document());
    }
    Ok(credentials)
}

/// `authenticationRestrictions`: Ebb enforces none, so only an empty list is taken. Whether it
/// was given.
fn authentication_restrictions(req: &Request<'_>) -> CommandResult<bool> {
    match req
        .body
        .get("authenticationRestrictions")
        .map_err(|e| invalid_bson(&e))?
    {
        None => Ok(false),
        Some(RawBsonRef::Array(list)) if list.into_iter().next().is_none() => Ok(true),
        Some(_) => Err(CommandError::new(
            ErrorCode::NotImplemented,
            format!(
                "{} option 'authenticationRestrictions' is not supported by Ebb yet",
                req.name
            ),
        )),
    }
}

/// The `customData` document, if given.
fn custom_data(req: &Request<'_>) -> CommandResult<Option<Document>> {
    match req.body.get("customData").map_err(|e| invalid_bson(&e))? {
        Some(RawBsonRef::Document(d)) => {
            Ok(Some(Document::try_from(d).map_err(|e| invalid_bson(&e))?))
        }
        Some(other) => Err(wrong_type(
            &format!("{}.customData", req.name),
            other,
            " 'object'",
        )),
        None => Ok(None),
    }
}

fn user_name(user: &str, db: &str) -> UserName {
    UserName {
        user: user.to_owned(),
        db: db.to_owned(),
    }
}

/// `createUser`.
pub(super) fn create_user(req: &Request<'_>, state: &ServerState) -> CommandResult {
    let user = name_arg(req)?;
    let roles = parse_roles("createUser", req.db, req.body.get("roles").ok().flatten())?;
    let mechanisms = parse_mechanism_names(req)?;
    if req.db == "local" {
        return Err(CommandError::bad_value(
            "Cannot create users in the local database",
        ));
    }
    if user.contains('\0') {
        return Err(CommandError::bad_value(
            "Username cannot contain NULL characters",
        ));
    }
    let pwd = match req.body.get("pwd").map_err(|e| invalid_bson(&e))? {
        Some(RawBsonRef::String(p)) => Some(p),
        _ => None,
    };
    let external = req.db == "$external";
    if pwd.is_none() && !external {
        return Err(CommandError::bad_value(
            "Must provide a 'pwd' field for all user documents, except those with '$external' \
             as the user's source db",
        ));
    }
    if pwd.is_some() && external {
        return Err(CommandError::bad_value(
            "Cannot set the password for users defined on the '$external' database",
        ));
    }
    if mechanisms.as_ref().is_some_and(Vec::is_empty) {
        return Err(CommandError::bad_value(
            "mechanisms field must not be empty",
        ));
    }
    authentication_restrictions(req)?;
    let custom_data = custom_data(req)?;
    let credentials = if let Some(pwd) = pwd {
        build_credentials(
            user,
            pwd,
            mechanisms.as_deref(),
            flag(req, "digestPassword", true)?,
        )?
    } else {
        doc! { "external": true }
    };
    // `V2UserDocumentParser::checkValidUserDocument`, after the credentials are built.
    if user.is_empty() {
        return Err(CommandError::bad_value(
            "User document needs 'user' field to be non-empty",
        ));
    }
    state.auth.roles_exist(&roles)?;
    state.auth.create_user(User::new(
        user_name(user, req.db),
        credentials,
        &roles,
        custom_data,
    )?)?;
    Ok(rawdoc! { "ok": 1.0 })
}

/// What `updateUser` changes.
#[derive(Default)]
struct UserUpdate {
    credentials: Option<Document>,
    /// Mechanisms to keep (`mechanisms` without `pwd`: mongod's `trimCredentials`).
    keep: Option<Vec<String>>,
    custom_data: Option<Document>,
    roles: Option<Vec<RoleName>>,
    restrictions: bool,
}

/// `updateUser`.
pub(super) fn update_user(req: &Request<'_>, state: &ServerState) -> CommandResult {
    let user = name_arg(req)?;
    let name = user_name(user, req.db);
    let mechanisms = parse_mechanism_names(req)?;
    let roles = match req.body.get("roles").map_err(|e| invalid_bson(&e))? {
        Some(v) => Some(parse_role_list("updateUser", req.db, v)?),
        None => None,
    };
    if mechanisms.as_ref().is_some_and(Vec::is_empty) {
        return Err(CommandError::bad_value(
            "mechanisms field must not be empty",
        ));
    }
    let mut update = UserUpdate::default();
    if let Some(RawBsonRef::String(pwd)) = req.body.get("pwd").map_err(|e| invalid_bson(&e))? {
        if req.db == "$external" {
            return Err(CommandError::bad_value(
                "Cannot set the password for users defined on the '$external' database",
            ));
        }
        update.credentials = Some(build_credentials(
            user,
            pwd,
            mechanisms.as_deref(),
            flag(req, "digestPassword", true)?,
        )?);
    } else if let Some(keep) = mechanisms {
        let Some(current) = state.auth.user(&name) else {
            return Err(user_not_found(&name));
        };
        trim_credentials(&current, &keep)?;
        update.keep = Some(keep);
    }
    update.custom_data = custom_data(req)?;
    update.restrictions = authentication_restrictions(req)?;
    update.roles = roles;
    if update.credentials.is_none()
        && update.keep.is_none()
        && update.custom_data.is_none()
        && update.roles.is_none()
        && !update.restrictions
    {
        return Err(CommandError::bad_value(
            "Must specify at least one field to update in updateUser",
        ));
    }
    if let Some(roles) = &update.roles {
        state.auth.roles_exist(roles)?;
    }
    if state.auth.user(&name).is_none() {
        return Err(not_found(&name));
    }
    state.auth.update_user(&name, |u| {
        if let Some(credentials) = update.credentials {
            u.set_credentials(credentials);
        }
        if let Some(keep) = &update.keep {
            let trimmed = trim_credentials(u, keep)?;
            u.set_credentials(trimmed);
        }
        if let Some(data) = update.custom_data {
            u.set_custom_data(data);
        }
        if let Some(roles) = &update.roles {
            u.set_roles(roles);
        }
        Ok(())
    })?;
    Ok(rawdoc! { "ok": 1.0 })
}

/// `updatePrivilegeDocument`'s answer for a user that is not there.
fn not_found(name: &UserName) -> CommandError {
    CommandError::new(
        ErrorCode::UserNotFound,
        format!("User {}@{} not found", name.user, name.db),
    )
}

/// mongod's `trimCredentials`: the user's credentials for `keep` only, each of which it must
/// already have.
fn trim_credentials(user: &User, keep: &[String]) -> CommandResult<Document> {
    let Ok(credentials) = user.doc.get_document("credentials") else {
        return Err(CommandError::new(
            ErrorCode::UnsupportedFormat,
            "Unable to trim credentials from a user document with no credentials",
        ));
    };
    let mut known = false;
    for name in keep {
        if !credentials.contains_key(name) {
            return Err(CommandError::bad_value(
                "mechanisms field must be a subset of previously set mechanisms",
            ));
        }
        known |= Mechanism::from_name(name).is_some();
    }
    if !known {
        return Err(CommandError::bad_value(
            "mechanisms field must contain at least one previously set known mechanism",
        ));
    }
    let mut out = credentials.clone();
    for m in Mechanism::ALL {
        if !keep.iter().any(|k| k == m.name()) {
            out.remove(m.name());
        }
    }
    Ok(out)
}

/// `dropUser`.
pub(super) fn drop_user(req: &Request<'_>, state: &ServerState) -> CommandResult {
    let name = user_name(name_arg(req)?, req.db);
    if state.auth.user(&name).is_none() {
        return Err(CommandError::new(
            ErrorCode::UserNotFound,
            format!("User '{}@{}' not found", name.user, name.db),
        ));
    }
    state.auth.drop_user(&name)?;
    Ok(rawdoc! { "ok": 1.0 })
}

/// `dropAllUsersFromDatabase`: `{n}`, how many were dropped.
pub(super) fn drop_all_users_from_database(
    req: &Request<'_>,
    state: &ServerState,
) -> CommandResult {
    let n = state.auth.drop_users_in(req.db)?;
    Ok(rawdoc! { "n": super::limit_i32(n), "ok": 1.0 })
}

/// `grantRolesToUser` and `revokeRolesFromUser`.
pub(super) fn change_user_roles(
    req: &Request<'_>,
    state: &ServerState,
    grant: bool,
) -> CommandResult {
    let name = user_name(name_arg(req)?, req.db);
    let value = req
        .body
        .get("roles")
        .map_err(|e| invalid_bson(&e))?
        .ok_or_else(|| CommandError::missing_field(&format!("{}.roles", req.name)))?;
    let roles = parse_role_list(req.name, req.db, value)?;
    if roles.is_empty() {
        return Err(CommandError::bad_value(format!(
            "{} command requires a non-empty \"roles\" array",
            req.name
        )));
    }
    if state.auth.user(&name).is_none() {
        return Err(user_not_found(&name));
    }
    state.auth.roles_exist(&roles)?;
    state.auth.update_user(&name, |u| {
        let mut current = u.roles()?;
        if grant {
            for role in roles {
                if !current.contains(&role) {
                    current.push(role);
                }
            }
        } else {
            current.retain(|r| !roles.contains(r));
        }
        u.set_roles(&current);
        Ok(())
    })?;
    Ok(rawdoc! { "ok": 1.0 })
}

/// What a `usersInfo` or `rolesInfo` names: everything in the database (`1`), everything
/// everywhere (`{forAllDBs: true}`, `usersInfo` only), or a list of names.
pub(super) enum InfoArg<T> {
    AllOnDb,
    AllDbs,
    Exact(Vec<T>),
}

/// mongod's `UMCInfoCommandArg::parseFromBSON`.
pub(super) fn parse_info_arg<T>(
    value: RawBsonRef<'_>,
    for_all_dbs: bool,
    one: impl Fn(RawBsonRef<'_>) -> CommandResult<T>,
) -> CommandResult<InfoArg<T>> {
    let is_one = match value {
        RawBsonRef::Int32(n) => n == 1,
        RawBsonRef::Int64(n) => n == 1,
        // `safeNumberLong`: the whole part.
        RawBsonRef::Double(d) => d.trunc() == 1.0,
        RawBsonRef::Decimal128(d) => d.to_string().parse::<f64>().is_ok_and(|f| f.trunc() == 1.0),
        _ => false,
    };
    if is_one {
        return Ok(InfoArg::AllOnDb);
    }
    if for_all_dbs
        && let RawBsonRef::Document(d) = value
        && let Ok(Some(v)) = d.get("forAllDBs")
        && bson_true(v)
    {
        return Ok(InfoArg::AllDbs);
    }
    if let RawBsonRef::Array(list) = value {
        let mut out = Vec::new();
        for item in list {
            out.push(one(item.map_err(|e| invalid_bson(&e))?)?);
        }
        return Ok(InfoArg::Exact(out));
    }
    Ok(InfoArg::Exact(vec![one(value)?]))
}

/// BSON's `trueValue`.
pub(super) fn bson_true(value: RawBsonRef<'_>) -> bool {
    match value {
        RawBsonRef::Boolean(b) => b,
        RawBsonRef::Int32(n) => n != 0,
        RawBsonRef::Int64(n) => n != 0,
        RawBsonRef::Double(d) => d != 0.0,
        RawBsonRef::Decimal128(d) => d.to_string().parse::<f64>().is_ok_and(|f| f != 0.0),
        RawBsonRef::Null | RawBsonRef::Undefined => false,
        _ => true,
    }
}

fn parse_user_name(db: &str, value: RawBsonRef<'_>) -> CommandResult<UserName> {
    match value {
        RawBsonRef::String(user) => Ok(user_name(user, db)),
        RawBsonRef::Document(d) => {
            let (user, user_db) = parse_auth_name("UserName", "user", true, d)?;
            Ok(UserName { user, db: user_db })
        }
        _ => Err(CommandError::bad_value(
            "UserName must be either a string or an object",
        )),
    }
}

/// mongod's `resolveRoles` as `usersInfo` and `rolesInfo` report it: the roles reached from
/// `start` through user-defined roles (a built-in role's own grants are not listed, as mongod
/// does not list them), and every privilege held, built-in roles' flattened.
pub(super) fn resolve_for_display(
    graph: &RoleGraph,
    start: &[RoleName],
) -> (std::collections::BTreeSet<RoleName>, PrivilegeSet) {
    use std::collections::BTreeSet;
    let mut inherited = BTreeSet::new();
    let mut privileges = PrivilegeSet::new();
    let mut visited: BTreeSet<RoleName> = BTreeSet::new();
    let mut frontier: BTreeSet<RoleName> = start.iter().cloned().collect();
    while !frontier.is_empty() {
        let mut next = BTreeSet::new();
        for role in frontier {
            visited.insert(role.clone());
            if is_builtin(&role) {
                if let Ok(r) = graph.resolve(std::slice::from_ref(&role)) {
                    privileges.extend(&r.privileges);
                }
                continue;
            }
            // A role that no longer exists is skipped (mongod logs "Role does not exist").
            let Some(def) = graph.get(&role) else {
                continue;
            };
            for sub in &def.roles {
                if visited.contains(sub) || next.contains(sub) {
                    continue;
                }
                next.insert(sub.clone());
                inherited.insert(sub.clone());
            }
            for p in &def.privileges {
                privileges.add(p);
            }
        }
        frontier = next;
    }
    (inherited, privileges)
}

pub(super) fn privilege_array(privileges: &PrivilegeSet) -> Bson {
    Bson::Array(
        privileges
            .iter()
            .map(|p| Bson::Document(p.to_document()))
            .collect(),
    )
}

pub(super) fn role_set_array<'a>(roles: impl IntoIterator<Item = &'a RoleName>) -> Bson {
    let list: Vec<RoleName> = roles.into_iter().cloned().collect();
    roles_array(&list)
}

/// The options of a `usersInfo`.
#[expect(
    clippy::struct_excessive_bools,
    reason = "one flag per show* option, as mongod's UsersInfoCommand declares them"
)]
struct UsersInfo {
    privileges: bool,
    credentials: bool,
    restrictions: bool,
    custom_data: bool,
}

/// `usersInfo`.
pub(super) fn users_info(req: &Request<'_>, state: &ServerState) -> CommandResult {
    let value = req
        .body
        .get(req.name)
        .map_err(|e| invalid_bson(&e))?
        .unwrap_or(RawBsonRef::Null);
    let arg = parse_info_arg(value, true, |v| parse_user_name(req.db, v))?;
    let opts = UsersInfo {
        privileges: flag(req, "showPrivileges", false)?,
        credentials: flag(req, "showCredentials", false)?,
        restrictions: flag(req, "showAuthenticationRestrictions", false)?,
        custom_data: flag(req, "showCustomData", true)?,
    };
    if let Some(RawBsonRef::String(m)) = req
        .body
        .get("authenticatedMechanism")
        .map_err(|e| invalid_bson(&e))?
        && !matches!(
            m,
            "MONGODB-X509"
                | "PLAIN"
                | "GSSAPI"
                | "SCRAM-SHA-1"
                | "SCRAM-SHA-256"
                | "MONGODB-AWS"
                | "MONGODB-OIDC"
        )
    {
        // mongod's `validateAuthMechanism`.
        return Err(CommandError::bad_value(if m == "MONGODB-CR" {
            "MONGODB-CR is deprecated and no longer supported. Use SCRAM for password-based \
             authentication instead."
                .to_owned()
        } else {
            format!(
                "Unknown authentication mechanism '{m}'. Supported mechanisms: MONGODB-X509, \
                 PLAIN, GSSAPI, SCRAM-SHA-1, SCRAM-SHA-256, MONGODB-AWS, MONGODB-OIDC"
            )
        }));
    }
    let filter = match req.body.get("filter").map_err(|e| invalid_bson(&e))? {
        Some(RawBsonRef::Document(d)) => Some(d),
        _ => None,
    };
    let mut users = Vec::new();
    if opts.privileges || opts.restrictions {
        let InfoArg::Exact(names) = arg else {
            return Err(illegal_detail());
        };
        if filter.is_some() {
            return Err(illegal_detail());
        }
        let graph = state.auth.roles();
        for name in names {
            if let Some(user) = state.auth.user(&name) {
                users.push(Bson::Document(describe_user(&user, &graph, &opts)?));
            }
        }
    } else {
        let mut found = match arg {
            InfoArg::AllDbs => state.auth.users(None),
            InfoArg::AllOnDb => state.auth.users(Some(req.db)),
            InfoArg::Exact(names) => {
                let mut found = Vec::new();
                for name in &names {
                    if let Some(user) = state.auth.user(name)
                        && !found.iter().any(|u: &std::sync::Arc<User>| u.name == *name)
                    {
                        found.push(user);
                    }
                }
                found
            }
        };
        // `$sort: {user: 1, db: 1}`.
        found.sort_by(|a, b| (&a.name.user, &a.name.db).cmp(&(&b.name.user, &b.name.db)));
        let filter = filter
            .map(|f| Filter::compile_with(f, FilterContext::Pipeline))
            .transpose()?;
        for user in found {
            let doc = summarize_user(&user, &opts);
            if let Some(filter) = &filter {
                let raw = to_raw(&doc)?;
                if !filter.matches(&raw) {
                    continue;
                }
            }
            users.push(Bson::Document(doc));
        }
    }
    to_raw(&doc! { "users": users, "ok": 1.0 })
}

fn illegal_detail() -> CommandError {
    CommandError::new(
        ErrorCode::IllegalOperation,
        "Privilege or restriction details require exact-match usersInfo queries",
    )
}

/// The names of a user's credentials (`$objectToArray` of `credentials`, keys only).
fn mechanism_names(doc: &Document) -> Bson {
    Bson::Array(
        doc.get_document("credentials")
            .map(|c| c.keys().map(|k| Bson::String(k.clone())).collect())
            .unwrap_or_default(),
    )
}

/// A user as `usersInfo` lists it without privileges: the stored document less
/// `credentials` (unless asked for) and `customData` (when not wanted), then `mechanisms`.
fn summarize_user(user: &User, opts: &UsersInfo) -> Document {
    let mut out = Document::new();
    for (key, value) in &user.doc {
        match key.as_str() {
            "authenticationRestrictions" => continue,
            "credentials" if !opts.credentials => continue,
            "customData" if !opts.custom_data => continue,
            _ => {}
        }
        out.insert(key.clone(), value.clone());
    }
    out.insert("mechanisms", mechanism_names(&user.doc));
    out
}

/// A user as `usersInfo` describes it with `showPrivileges` or
/// `showAuthenticationRestrictions` (mongod's `getUserDescription`, stripped).
fn describe_user(user: &User, graph: &RoleGraph, opts: &UsersInfo) -> CommandResult<Document> {
    let mut out = Document::new();
    for (key, value) in &user.doc {
        match key.as_str() {
            "credentials" => {
                out.insert("mechanisms", mechanism_names(&user.doc));
                if !opts.credentials {
                    continue;
                }
            }
            "customData" if !opts.custom_data => continue,
            "authenticationRestrictions" if !opts.restrictions => continue,
            _ => {}
        }
        out.insert(key.clone(), value.clone());
    }
    if opts.restrictions && !out.contains_key("authenticationRestrictions") {
        out.insert("authenticationRestrictions", Bson::Array(Vec::new()));
    }
    let direct = user.roles()?;
    let (mut inherited, privileges) = resolve_for_display(graph, &direct);
    inherited.extend(direct);
    out.insert("inheritedRoles", role_set_array(&inherited));
    out.insert("inheritedPrivileges", privilege_array(&privileges));
    out.insert(
        "inheritedAuthenticationRestrictions",
        Bson::Array(Vec::new()),
    );
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc_of(d: &Document) -> RawDocumentBuf {
        RawDocumentBuf::try_from(d).unwrap()
    }

    #[test]
    fn user_names_parse_as_mongod_parses_them() {
        let parse = |d: Document| {
            let raw = doc_of(&d);
            parse_auth_name("UserName", "user", true, &raw)
        };
        assert_eq!(
            parse(doc! { "user": "a", "db": "b" }).unwrap(),
            ("a".to_owned(), "b".to_owned())
        );
        let e = parse(doc! { "foo": "bar" }).unwrap_err();
        assert_eq!(e.errmsg, "UserName contains an unknown field named: 'foo");
        let e = parse(doc! { "user": 123, "db": "x" }).unwrap_err();
        assert_eq!(
            e.errmsg,
            "UserName must contain a string field named: user. But, has type int"
        );
        let e = parse(doc! { "user": "x" }).unwrap_err();
        assert_eq!(e.errmsg, "UserName must contain a field named: db");
        let e = parse(doc! { "db": "x" }).unwrap_err();
        assert_eq!(e.errmsg, "UserName must contain a field named: user");
        // RoleName ignores other fields.
        let raw = doc_of(&doc! { "role": "r", "db": "d", "x": 1 });
        assert!(parse_auth_name("RoleName", "role", false, &raw).is_ok());
    }

    #[test]
    fn info_arguments() {
        let one = |v: RawBsonRef<'_>| parse_user_name("db", v);
        assert!(matches!(
            parse_info_arg(RawBsonRef::Int32(1), true, one).unwrap(),
            InfoArg::AllOnDb
        ));
        assert!(matches!(
            parse_info_arg(RawBsonRef::Double(1.0), true, one).unwrap(),
            InfoArg::AllOnDb
        ));
        let all = doc_of(&doc! { "forAllDBs": true });
        assert!(matches!(
            parse_info_arg(RawBsonRef::Document(&all), true, one).unwrap(),
            InfoArg::AllDbs
        ));
        let e = parse_info_arg(RawBsonRef::Int32(2), true, one)
            .err()
            .unwrap();
        assert_eq!(e.errmsg, "UserName must be either a string or an object");
        let e = parse_info_arg(RawBsonRef::Null, true, one).err().unwrap();
        assert_eq!(e.errmsg, "UserName must be either a string or an object");
        let InfoArg::Exact(names) = parse_info_arg(RawBsonRef::String("ann"), true, one).unwrap()
        else {
            panic!("not exact");
        };
        assert_eq!(names, vec![user_name("ann", "db")]);
    }

    #[test]
    fn credentials_follow_the_mechanisms_asked_for() {
        let both = build_credentials("u", "pw", None, true).unwrap();
        assert!(both.contains_key("SCRAM-SHA-1") && both.contains_key("SCRAM-SHA-256"));
        let one =
            build_credentials("u", "pw", Some(&["SCRAM-SHA-256".to_owned()][..]), true).unwrap();
        assert_eq!(one.keys().collect::<Vec<_>>(), vec!["SCRAM-SHA-256"]);
        let e = build_credentials("u", "pw", Some(&["BAD".to_owned()][..]), true).unwrap_err();
        assert_eq!(e.errmsg, "Unknown auth mechanism 'BAD'");
        let e = build_credentials("u", "pw", None, false).unwrap_err();
        assert_eq!(
            e.errmsg,
            "Use of SCRAM-SHA-256 requires undigested passwords"
        );
        let e = build_credentials("u", "", None, true).unwrap_err();
        assert_eq!(e.code.code(), 50687);
        let e = build_credentials("u", "pass\0word", None, true).unwrap_err();
        assert_eq!(e.code.code(), 50692);
        // A pre-digested SCRAM-SHA-1 password is salted as given.
        let digested = mongo_password_digest("u", "pw");
        let c = build_credentials("u", &digested, Some(&["SCRAM-SHA-1".to_owned()][..]), false);
        assert!(c.unwrap().contains_key("SCRAM-SHA-1"));
    }
}
