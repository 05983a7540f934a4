//! Role management, as mongod 7.0's `user_management_commands.cpp` and
//! `authz_manager_external_state_local.cpp` do it: `createRole`, `updateRole`, `dropRole`,
//! `dropAllRolesFromDatabase`, `rolesInfo`, `grantPrivilegesToRole`,
//! `revokePrivilegesFromRole`, `grantRolesToRole`, `revokeRolesFromRole`. Each change is one
//! [`crate::auth::store::AuthStore`] commit; a user holding a changed role sees the change at
//! its next command.

use bson::{Bson, Document, RawBsonRef, doc, rawdoc};

use super::users::{
    InfoArg, bson_true, flag, name_arg, parse_info_arg, parse_role_list, parse_role_name,
    privilege_array, resolve_for_display, role_set_array, to_raw,
};
use crate::auth::privileges::{Privilege, PrivilegeSet, Resource, parse_privilege};
use crate::auth::roles::{RoleDef, RoleGraph, RoleName, builtin_names, is_builtin};
use crate::auth::store::{privilege_documents, role_document};
use crate::dispatch::Request;
use crate::error::{CommandError, CommandResult, ErrorCode};
use crate::state::ServerState;

fn invalid_bson(e: &bson::error::Error) -> CommandError {
    CommandError::new(ErrorCode::InvalidBSON, e.to_string())
}

/// The field `name` of the command, if given.
fn field<'a>(req: &Request<'a>, name: &str) -> CommandResult<Option<RawBsonRef<'a>>> {
    req.body.get(name).map_err(|e| invalid_bson(&e))
}

/// A required array field (the fields table already checked that it is there).
fn required<'a>(req: &Request<'a>, name: &str) -> CommandResult<RawBsonRef<'a>> {
    field(req, name)?.ok_or_else(|| CommandError::missing_field(&format!("{}.{name}", req.name)))
}

/// A `privileges` field (`array<ParsedPrivilege>`).
fn parse_privileges(req: &Request<'_>, value: RawBsonRef<'_>) -> CommandResult<Vec<Privilege>> {
    let RawBsonRef::Array(list) = value else {
        return Err(super::args::wrong_type(
            &format!("{}.privileges", req.name),
            value,
            " 'array'",
        ));
    };
    let mut out = Vec::new();
    for (i, item) in list.into_iter().enumerate() {
        match item.map_err(|e| invalid_bson(&e))? {
            RawBsonRef::Document(d) => out.push(parse_privilege(d)?),
            other => {
                return Err(super::args::wrong_type(
                    &format!("{}.privileges.{i}", req.name),
                    other,
                    " 'object'",
                ));
            }
        }
    }
    Ok(out)
}

/// `authenticationRestrictions` on a role: Ebb enforces none, so only an empty list is taken.
/// Whether it was given.
fn authentication_restrictions(req: &Request<'_>) -> CommandResult<bool> {
    match field(req, "authenticationRestrictions")? {
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

/// `"r@db is a built-in role and cannot be modified"`.
fn builtin_refused(role: &RoleName) -> CommandError {
    CommandError::bad_value(format!("{role} is a built-in role and cannot be modified"))
}

/// `updateRoleDocument`'s answer for a role that has no document.
fn role_not_found(role: &RoleName) -> CommandError {
    CommandError::new(ErrorCode::RoleNotFound, format!("Role {role} not found"))
}

/// mongod's `checkOkayToGrantRolesToRole`.
fn check_grant_roles(
    state: &ServerState,
    graph: &RoleGraph,
    role: &RoleName,
    to_add: &[RoleName],
) -> CommandResult<()> {
    for r in to_add {
        if r == role {
            return Err(CommandError::new(
                ErrorCode::InvalidRoleModification,
                format!("Cannot grant role {role} to itself."),
            ));
        }
        if role.db != "admin" && r.db != role.db {
            return Err(CommandError::new(
                ErrorCode::InvalidRoleModification,
                format!(
                    "Roles on the '{}' database cannot be granted roles from other databases",
                    role.db
                ),
            ));
        }
    }
    if let Err(e) = state.auth.roles_exist(to_add) {
        return Err(CommandError::new(
            e.code,
            format!("Cannot grant roles to '{role}': {}", e.errmsg),
        ));
    }
    let (reached, _) = resolve_for_display(graph, to_add);
    if reached.contains(role) {
        return Err(CommandError::new(
            ErrorCode::InvalidRoleModification,
            format!("Granting roles to {role} would introduce a cycle in the role graph"),
        ));
    }
    Ok(())
}

/// mongod's `checkOkayToGrantPrivilegesToRole`: outside `admin`, a role's privileges name its
/// own database or one of its collections.
fn check_grant_privileges(role: &RoleName, privileges: &[Privilege]) -> CommandResult<()> {
    if role.db == "admin" {
        return Ok(());
    }
    for p in privileges {
        let own = match &p.resource {
            Resource::Database(db) | Resource::Namespace { db, .. } => *db == role.db,
            _ => false,
        };
        if !own {
            return Err(CommandError::new(
                ErrorCode::InvalidRoleModification,
                format!(
                    "Roles on the '{}' database cannot be granted privileges that target other \
                     databases or the cluster",
                    role.db
                ),
            ));
        }
    }
    Ok(())
}

/// mongod's `addPrivilegeToPrivilegeVector`: merged into the entry on the same resource, or
/// added.
fn add_privilege(list: &mut Vec<Privilege>, p: &Privilege) {
    if let Some(existing) = list.iter_mut().find(|e| e.resource == p.resource) {
        existing.actions.add_all(p.actions);
    } else {
        list.push(p.clone());
    }
}

/// `createRole`.
pub(super) fn create_role(req: &Request<'_>, state: &ServerState) -> CommandResult {
    let name = name_arg(req)?;
    let privileges = parse_privileges(req, required(req, "privileges")?)?;
    let roles = parse_role_list(req.name, req.db, required(req, "roles")?)?;
    if name.is_empty() {
        return Err(CommandError::bad_value("Role name must be non-empty"));
    }
    let role = RoleName::new(name, req.db);
    if req.db == "local" {
        return Err(CommandError::bad_value(
            "Cannot create roles in the local database",
        ));
    }
    if req.db == "$external" {
        return Err(CommandError::bad_value(
            "Cannot create roles in the $external database",
        ));
    }
    if is_builtin(&role) {
        return Err(CommandError::bad_value(
            "Cannot create roles with the same name as a built-in role",
        ));
    }
    authentication_restrictions(req)?;
    let graph = state.auth.roles();
    check_grant_roles(state, &graph, &role, &roles)?;
    check_grant_privileges(&role, &privileges)?;
    let mut merged = Vec::new();
    for p in &privileges {
        add_privilege(&mut merged, p);
    }
    state.auth.create_role(&RoleDef {
        name: role,
        roles: dedup(roles),
        privileges: merged,
    })?;
    Ok(rawdoc! { "ok": 1.0 })
}

fn dedup(roles: Vec<RoleName>) -> Vec<RoleName> {
    let mut out: Vec<RoleName> = Vec::with_capacity(roles.len());
    for r in roles {
        if !out.contains(&r) {
            out.push(r);
        }
    }
    out
}

/// `updateRole`.
pub(super) fn update_role(req: &Request<'_>, state: &ServerState) -> CommandResult {
    let role = RoleName::new(name_arg(req)?, req.db);
    let privileges = field(req, "privileges")?
        .map(|v| parse_privileges(req, v))
        .transpose()?;
    let roles = field(req, "roles")?
        .map(|v| parse_role_list(req.name, req.db, v))
        .transpose()?;
    let restrictions = authentication_restrictions(req)?;
    if privileges.is_none() && roles.is_none() && !restrictions {
        return Err(CommandError::bad_value(
            "Must specify at least one field to update in updateRole",
        ));
    }
    state.auth.roles_exist(std::slice::from_ref(&role))?;
    let graph = state.auth.roles();
    if let Some(roles) = &roles {
        check_grant_roles(state, &graph, &role, roles)?;
    }
    if let Some(privileges) = &privileges {
        check_grant_privileges(&role, privileges)?;
    }
    // A built-in role has no document to update.
    if graph.get(&role).is_none() {
        return Err(role_not_found(&role));
    }
    state.auth.update_role(&role, |def| {
        if let Some(privileges) = privileges {
            def.privileges.clear();
            for p in &privileges {
                add_privilege(&mut def.privileges, p);
            }
        }
        if let Some(roles) = roles {
            def.roles = dedup(roles);
        }
        Ok(())
    })?;
    Ok(rawdoc! { "ok": 1.0 })
}

/// `grantPrivilegesToRole` and `revokePrivilegesFromRole`.
pub(super) fn change_role_privileges(
    req: &Request<'_>,
    state: &ServerState,
    grant: bool,
) -> CommandResult {
    let role = RoleName::new(name_arg(req)?, req.db);
    let privileges = parse_privileges(req, required(req, "privileges")?)?;
    if privileges.is_empty() {
        return Err(CommandError::bad_value(format!(
            "{} command requires a non-empty \"privileges\" array",
            req.name
        )));
    }
    if is_builtin(&role) {
        return Err(builtin_refused(&role));
    }
    if grant {
        check_grant_privileges(&role, &privileges)?;
    }
    if state.auth.roles().get(&role).is_none() {
        return Err(role_not_found(&role));
    }
    state.auth.update_role(&role, |def| {
        for p in &privileges {
            if grant {
                add_privilege(&mut def.privileges, p);
            } else if let Some(at) = def.privileges.iter().position(|e| e.resource == p.resource)
                && let Some(existing) = def.privileges.get_mut(at)
            {
                existing.actions.remove_all(p.actions);
                if existing.actions.is_empty() {
                    def.privileges.remove(at);
                }
            }
        }
        Ok(())
    })?;
    Ok(rawdoc! { "ok": 1.0 })
}

/// `grantRolesToRole` and `revokeRolesFromRole`.
pub(super) fn change_role_roles(
    req: &Request<'_>,
    state: &ServerState,
    grant: bool,
) -> CommandResult {
    let role = RoleName::new(name_arg(req)?, req.db);
    let roles = parse_role_list(req.name, req.db, required(req, "roles")?)?;
    if roles.is_empty() {
        return Err(CommandError::bad_value(format!(
            "{} command requires a non-empty \"roles\" array",
            req.name
        )));
    }
    if is_builtin(&role) {
        return Err(builtin_refused(&role));
    }
    let graph = state.auth.roles();
    if grant {
        check_grant_roles(state, &graph, &role, &roles)?;
    }
    if graph.get(&role).is_none() {
        return Err(role_not_found(&role));
    }
    state.auth.update_role(&role, |def| {
        if grant {
            for r in roles {
                if !def.roles.contains(&r) {
                    def.roles.push(r);
                }
            }
        } else {
            def.roles.retain(|r| !roles.contains(r));
        }
        Ok(())
    })?;
    Ok(rawdoc! { "ok": 1.0 })
}

/// `dropRole`: the role, and every grant of it to users and roles, in one commit.
pub(super) fn drop_role(req: &Request<'_>, state: &ServerState) -> CommandResult {
    let role = RoleName::new(name_arg(req)?, req.db);
    if is_builtin(&role) {
        return Err(builtin_refused(&role));
    }
    state.auth.roles_exist(std::slice::from_ref(&role))?;
    state.auth.drop_roles(std::slice::from_ref(&role))?;
    Ok(rawdoc! { "ok": 1.0 })
}

/// `dropAllRolesFromDatabase`: `{n}`, how many were dropped.
pub(super) fn drop_all_roles_from_database(
    req: &Request<'_>,
    state: &ServerState,
) -> CommandResult {
    let names: Vec<RoleName> = state
        .auth
        .roles()
        .defs()
        .filter(|d| d.name.db == req.db)
        .map(|d| d.name.clone())
        .collect();
    let n = state.auth.drop_roles(&names)?;
    Ok(rawdoc! { "n": super::limit_i32(n), "ok": 1.0 })
}

/// `rolesInfo`'s `showPrivileges` (`ParsedPrivilegeFormat`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    Omit,
    Separate,
    UserFragment,
}

fn privilege_format(req: &Request<'_>) -> CommandResult<Format> {
    match field(req, "showPrivileges")? {
        None => Ok(Format::Omit),
        Some(
            v @ (RawBsonRef::Boolean(_)
            | RawBsonRef::Int32(_)
            | RawBsonRef::Int64(_)
            | RawBsonRef::Double(_)
            | RawBsonRef::Decimal128(_)),
        ) => Ok(if bson_true(v) {
            Format::Separate
        } else {
            Format::Omit
        }),
        Some(RawBsonRef::String("asUserFragment")) => Ok(Format::UserFragment),
        Some(other) => Err(CommandError::new(
            ErrorCode::FailedToParse,
            format!(
                "Failed to parse 'showPrivileges'. 'showPrivileges' should either be a boolean \
                 or the string 'asUserFragment', given: showPrivileges: {}",
                super::args::display(other)
            ),
        )),
    }
}

/// `rolesInfo`.
pub(super) fn roles_info(req: &Request<'_>, state: &ServerState) -> CommandResult {
    let value = field(req, req.name)?.unwrap_or(RawBsonRef::Null);
    let arg = parse_info_arg(value, false, |v| parse_role_name(req.db, v))?;
    let format = privilege_format(req)?;
    let builtins = flag(req, "showBuiltinRoles", false)?;
    let restrictions = flag(req, "showAuthenticationRestrictions", false)?;
    let graph = state.auth.roles();
    let names = match arg {
        InfoArg::AllOnDb | InfoArg::AllDbs => {
            if format == Format::UserFragment {
                return Err(CommandError::new(
                    ErrorCode::IllegalOperation,
                    "Cannot get user fragment for all roles in a database",
                ));
            }
            let roles = roles_of_db(&graph, req.db, builtins, format, restrictions);
            return to_raw(&doc! { "roles": roles, "ok": 1.0 });
        }
        InfoArg::Exact(names) => names,
    };
    if format == Format::UserFragment {
        let (mut inherited, privileges) = resolve_for_display(&graph, &names);
        inherited.extend(names.iter().cloned());
        let mut fragment = doc! {
            "roles": role_set_array(&names),
            "inheritedRoles": role_set_array(&inherited),
            "inheritedPrivileges": privilege_array(&privileges),
        };
        if restrictions {
            fragment.insert(
                "inheritedAuthenticationRestrictions",
                Bson::Array(Vec::new()),
            );
        }
        return to_raw(&doc! { "userFragment": fragment, "ok": 1.0 });
    }
    let mut roles = Vec::new();
    for name in &names {
        if let Some(d) = describe_role(&graph, name, format, restrictions) {
            roles.push(Bson::Document(d));
        }
    }
    to_raw(&doc! { "roles": roles, "ok": 1.0 })
}

/// Every privilege a built-in role holds (those of the roles it grants included), as mongod's
/// `addPrivilegesForBuiltinRole` lists them.
fn builtin_privileges(graph: &RoleGraph, role: &RoleName) -> PrivilegeSet {
    graph
        .resolve(std::slice::from_ref(role))
        .map(|r| r.privileges)
        .unwrap_or_default()
}

/// One role, as `rolesInfo` names it (`getRolesDescription`): `None` for a role that does not
/// exist.
fn describe_role(
    graph: &RoleGraph,
    role: &RoleName,
    format: Format,
    restrictions: bool,
) -> Option<Document> {
    let show = format == Format::Separate;
    if is_builtin(role) {
        let privileges = builtin_privileges(graph, role);
        // mongod synthesizes it as `{db, role, roles: [], privileges}`.
        let mut out = doc! {
            "db": role.db.as_str(),
            "role": role.role.as_str(),
            "roles": Bson::Array(Vec::new()),
        };
        if show {
            out.insert("privileges", privilege_array(&privileges));
        }
        if restrictions {
            out.insert("authenticationRestrictions", Bson::Array(Vec::new()));
        }
        out.insert("inheritedRoles", Bson::Array(Vec::new()));
        if show {
            out.insert("inheritedPrivileges", privilege_array(&privileges));
        }
        if restrictions {
            out.insert(
                "inheritedAuthenticationRestrictions",
                Bson::Array(Vec::new()),
            );
        }
        out.insert("isBuiltin", true);
        return Some(out);
    }
    let def = graph.get(role)?;
    let mut out = stored_fields(def, show, restrictions);
    append_inherited(&mut out, graph, def, show, restrictions);
    out.insert("isBuiltin", false);
    Some(out)
}

/// A user-defined role's stored document, less its privileges unless they are shown.
fn stored_fields(def: &RoleDef, show: bool, restrictions: bool) -> Document {
    let mut out = Document::new();
    for (key, value) in role_document(def) {
        if key == "privileges" && !show {
            continue;
        }
        out.insert(key, value);
    }
    if restrictions {
        out.insert("authenticationRestrictions", Bson::Array(Vec::new()));
    }
    out
}

/// `serializeResolvedRoles` for a role: the roles it reaches, and its own privileges then
/// those it inherits.
fn append_inherited(
    out: &mut Document,
    graph: &RoleGraph,
    def: &RoleDef,
    show: bool,
    restrictions: bool,
) {
    let (mut inherited, privileges) = resolve_for_display(graph, &def.roles);
    inherited.extend(def.roles.iter().cloned());
    out.insert("inheritedRoles", role_set_array(&inherited));
    if show {
        let mut list = match privilege_documents(&def.privileges) {
            Bson::Array(list) => list,
            _ => Vec::new(),
        };
        if let Bson::Array(more) = privilege_array(&privileges) {
            list.extend(more);
        }
        out.insert("inheritedPrivileges", Bson::Array(list));
    }
    if restrictions {
        out.insert(
            "inheritedAuthenticationRestrictions",
            Bson::Array(Vec::new()),
        );
    }
}

/// `rolesInfo: 1` (`getRoleDescriptionsForDB`): the built-in roles of `db` first when asked
/// for, then its user-defined ones.
fn roles_of_db(
    graph: &RoleGraph,
    db: &str,
    builtins: bool,
    format: Format,
    restrictions: bool,
) -> Vec<Bson> {
    let show = format == Format::Separate;
    let mut out = Vec::new();
    if builtins {
        for name in builtin_names(db) {
            let role = RoleName::new(name, db);
            let mut d = doc! {
                "role": name,
                "db": db,
                "isBuiltin": true,
                "roles": Bson::Array(Vec::new()),
                "inheritedRoles": Bson::Array(Vec::new()),
            };
            if show {
                let privileges = builtin_privileges(graph, &role);
                d.insert("privileges", privilege_array(&privileges));
                d.insert("inheritedPrivileges", privilege_array(&privileges));
            }
            if restrictions {
                d.insert("authenticationRestrictions", Bson::Array(Vec::new()));
                d.insert(
                    "inheritedAuthenticationRestrictions",
                    Bson::Array(Vec::new()),
                );
            }
            out.push(Bson::Document(d));
        }
    }
    for def in graph.defs().filter(|d| d.name.db == db) {
        let mut d = stored_fields(def, show, restrictions);
        d.insert("isBuiltin", false);
        append_inherited(&mut d, graph, def, show, restrictions);
        out.push(Bson::Document(d));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::privileges::ActionType;

    fn def(name: &str, db: &str, roles: &[(&str, &str)], privileges: Vec<Privilege>) -> RoleDef {
        RoleDef {
            name: RoleName::new(name, db),
            roles: roles.iter().map(|(r, d)| RoleName::new(r, d)).collect(),
            privileges,
        }
    }

    #[test]
    fn privileges_outside_admin_stay_in_their_database() {
        let role = RoleName::new("r", "app");
        let own = [
            Privilege::new(Resource::database("app"), &[ActionType::Find]),
            Privilege::new(Resource::namespace("app", "c"), &[ActionType::Insert]),
        ];
        assert!(check_grant_privileges(&role, &own).is_ok());
        for other in [
            Resource::database("other"),
            Resource::Cluster,
            Resource::AnyNormal,
            Resource::Collection("c".into()),
        ] {
            let e = check_grant_privileges(&role, &[Privilege::new(other, &[ActionType::Find])])
                .unwrap_err();
            assert_eq!(e.code, ErrorCode::InvalidRoleModification);
        }
        let admin = RoleName::new("r", "admin");
        assert!(check_grant_privileges(&admin, &[Privilege::new(Resource::Cluster, &[])]).is_ok());
    }

    #[test]
    fn described_roles_have_mongods_shape() {
        let graph = RoleGraph::from_defs([
            def("base", "app", &[("read", "app")], vec![]),
            def(
                "top",
                "app",
                &[("base", "app")],
                vec![Privilege::new(
                    Resource::namespace("app", "c"),
                    &[ActionType::Insert],
                )],
            ),
        ])
        .unwrap();
        let top = describe_role(
            &graph,
            &RoleName::new("top", "app"),
            Format::Separate,
            false,
        )
        .unwrap();
        let keys: Vec<&str> = top.keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            [
                "_id",
                "role",
                "db",
                "privileges",
                "roles",
                "inheritedRoles",
                "inheritedPrivileges",
                "isBuiltin"
            ]
        );
        let inherited = top.get_array("inheritedRoles").unwrap();
        assert_eq!(inherited.len(), 2, "{inherited:?}");
        // Own privilege first, then those of `read` through `base`.
        assert!(top.get_array("inheritedPrivileges").unwrap().len() > 1);
        let read =
            describe_role(&graph, &RoleName::new("read", "app"), Format::Omit, false).unwrap();
        let keys: Vec<&str> = read.keys().map(String::as_str).collect();
        assert_eq!(keys, ["db", "role", "roles", "inheritedRoles", "isBuiltin"]);
        assert!(
            describe_role(&graph, &RoleName::new("nope", "app"), Format::Omit, false).is_none()
        );
        let all = roles_of_db(&graph, "app", false, Format::Omit, false);
        assert_eq!(all.len(), 2);
    }
}
