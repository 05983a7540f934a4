use super::*;
use crate::auth::privileges::{Privilege, Resource};

fn role(name: &str, db: &str) -> RoleName {
    RoleName::new(name, db)
}

/// The privileges of built-in role `name` of `db`, inherited ones included.
fn privileges(name: &str, db: &str) -> PrivilegeSet {
    RoleGraph::new()
        .resolve(&[role(name, db)])
        .unwrap()
        .privileges
}

fn ns(db: &str, coll: &str) -> Resource {
    Resource::namespace(db, coll)
}

/// `(action, resource, allowed)` checks of one role.
fn check(name: &str, db: &str, cases: &[(A, Resource, bool)]) {
    let p = privileges(name, db);
    for (action, resource, expected) in cases {
        assert_eq!(
            p.allows_action(*action, resource),
            *expected,
            "{name}@{db}: {action} on {resource}"
        );
    }
}

#[test]
fn read() {
    check(
        "read",
        "test",
        &[
            (A::Find, ns("test", "c"), true),
            (A::ListCollections, Resource::database("test"), true),
            (A::ListIndexes, ns("test", "c"), true),
            (A::KillCursors, ns("test", "c"), true),
            (A::Find, ns("test", "system.js"), true),
            (A::Find, ns("test", "system.users"), false),
            (A::Insert, ns("test", "c"), false),
            (A::Find, ns("other", "c"), false),
            (A::ListDatabases, Resource::Cluster, false),
        ],
    );
}

#[test]
fn read_write() {
    check(
        "readWrite",
        "test",
        &[
            (A::Find, ns("test", "c"), true),
            (A::Insert, ns("test", "c"), true),
            (A::Update, ns("test", "c"), true),
            (A::Remove, ns("test", "c"), true),
            (A::CreateIndex, ns("test", "c"), true),
            (A::DropCollection, ns("test", "c"), true),
            (A::RenameCollectionSameDb, Resource::database("test"), true),
            (A::DropDatabase, Resource::database("test"), false),
            (A::CollMod, ns("test", "c"), false),
            (A::BypassDocumentValidation, ns("test", "c"), false),
            (A::Insert, ns("test", "system.users"), false),
            (A::Insert, ns("other", "c"), false),
        ],
    );
}

#[test]
fn db_admin() {
    check(
        "dbAdmin",
        "test",
        &[
            (A::CollMod, ns("test", "c"), true),
            (A::DropDatabase, Resource::database("test"), true),
            (A::Validate, ns("test", "c"), true),
            (A::Compact, ns("test", "c"), true),
            (A::CollStats, ns("test", "c"), true),
            (A::Find, ns("test", "system.profile"), true),
            // dbAdmin reads no user data.
            (A::Find, ns("test", "c"), false),
            (A::Insert, ns("test", "c"), false),
            (A::CreateUser, Resource::database("test"), false),
        ],
    );
}

#[test]
fn user_admin_and_db_owner() {
    check(
        "userAdmin",
        "test",
        &[
            (A::CreateUser, Resource::database("test"), true),
            (A::GrantRole, Resource::database("test"), true),
            (A::ViewRole, Resource::database("test"), true),
            (A::Find, ns("test", "c"), false),
            (A::CreateUser, Resource::database("admin"), false),
        ],
    );
    check(
        "dbOwner",
        "test",
        &[
            (A::Find, ns("test", "c"), true),
            (A::Insert, ns("test", "c"), true),
            (A::DropDatabase, Resource::database("test"), true),
            (A::CreateUser, Resource::database("test"), true),
            (A::Find, ns("other", "c"), false),
        ],
    );
    let resolved = RoleGraph::new()
        .resolve(&[role("dbOwner", "test")])
        .unwrap();
    let names: Vec<String> = resolved.roles.iter().map(ToString::to_string).collect();
    assert_eq!(
        names,
        [
            "dbAdmin@test",
            "dbOwner@test",
            "readWrite@test",
            "userAdmin@test"
        ]
    );
}

#[test]
fn any_database_roles() {
    check(
        "readAnyDatabase",
        "admin",
        &[
            (A::Find, ns("a", "c"), true),
            (A::Find, ns("b", "system.js"), true),
            (A::ListDatabases, Resource::Cluster, true),
            (A::Find, ns("admin", "system.users"), false),
            (A::Find, ns("local", "oplog.rs"), false),
            (A::Find, ns("config", "c"), false),
            (A::Insert, ns("a", "c"), false),
        ],
    );
    check(
        "readWriteAnyDatabase",
        "admin",
        &[
            (A::Insert, ns("a", "c"), true),
            (A::Find, ns("a", "c"), true),
            (A::ListDatabases, Resource::Cluster, true),
            // The normal-collection wildcard does not reach the users collection.
            (A::Find, ns("admin", "system.users"), false),
            (A::Insert, ns("admin", "system.users"), false),
            (A::Insert, ns("local", "c"), false),
            (A::DropDatabase, Resource::database("a"), false),
        ],
    );
    check(
        "userAdminAnyDatabase",
        "admin",
        &[
            (A::CreateUser, Resource::database("a"), true),
            (A::CreateUser, Resource::database("local"), true),
            (A::Find, ns("admin", "system.users"), true),
            (A::Find, ns("a", "system.users"), true),
            (A::Insert, ns("admin", "system.users"), false),
            (A::Find, ns("a", "c"), false),
            (A::ViewUser, Resource::Cluster, true),
        ],
    );
    check(
        "dbAdminAnyDatabase",
        "admin",
        &[
            (A::CollMod, ns("a", "c"), true),
            (A::DropDatabase, Resource::database("a"), true),
            (A::ListDatabases, Resource::Cluster, true),
            (A::Find, ns("a", "system.profile"), true),
            (A::Find, ns("a", "c"), false),
        ],
    );
}

#[test]
fn cluster_roles() {
    check(
        "clusterMonitor",
        "admin",
        &[
            (A::ServerStatus, Resource::Cluster, true),
            (A::GetLog, Resource::Cluster, true),
            (A::ReplSetGetStatus, Resource::Cluster, true),
            (A::ListDatabases, Resource::Cluster, true),
            (A::CollStats, ns("a", "c"), true),
            (A::IndexStats, ns("a", "c"), true),
            (A::Find, ns("config", "c"), true),
            (A::Find, ns("local", "oplog.rs"), true),
            (A::Find, ns("a", "c"), false),
            (A::Shutdown, Resource::Cluster, false),
            (A::SetParameter, Resource::Cluster, false),
        ],
    );
    check(
        "hostManager",
        "admin",
        &[
            (A::Shutdown, Resource::Cluster, true),
            (A::SetParameter, Resource::Cluster, true),
            (A::KillAnyCursor, Resource::Cluster, true),
            (A::Killop, Resource::Cluster, true),
            (A::KillCursors, ns("a", "c"), true),
            (A::ServerStatus, Resource::Cluster, false),
            (A::Find, ns("a", "c"), false),
        ],
    );
    check(
        "clusterManager",
        "admin",
        &[
            (A::ReplSetConfigure, Resource::Cluster, true),
            (A::ReplSetGetConfig, Resource::Cluster, true),
            (A::Find, ns("config", "c"), true),
            (A::Insert, ns("config", "c"), true),
            (A::Find, ns("local", "system.replset"), true),
            (A::Shutdown, Resource::Cluster, false),
            (A::Find, ns("a", "c"), false),
        ],
    );
    check(
        "clusterAdmin",
        "admin",
        &[
            (A::ServerStatus, Resource::Cluster, true),
            (A::Shutdown, Resource::Cluster, true),
            (A::ReplSetConfigure, Resource::Cluster, true),
            (A::DropDatabase, Resource::database("a"), true),
            (A::Find, ns("a", "c"), false),
            (A::Insert, ns("a", "c"), false),
        ],
    );
}

#[test]
fn backup_restore_and_root() {
    check(
        "backup",
        "admin",
        &[
            (A::Find, ns("a", "c"), true),
            (A::Find, ns("admin", "system.users"), true),
            (A::Find, ns("config", "settings"), true),
            (A::ListCollections, Resource::database("a"), true),
            (A::ServerStatus, Resource::Cluster, true),
            (A::Insert, ns("a", "c"), false),
        ],
    );
    check(
        "restore",
        "admin",
        &[
            (A::Insert, ns("a", "c"), true),
            (A::CreateIndex, ns("a", "c"), true),
            (A::Insert, ns("admin", "system.users"), true),
            (A::CreateUser, Resource::database("a"), true),
            (A::Find, ns("a", "c"), false),
            (A::Update, ns("a", "c"), false),
        ],
    );
    check(
        "root",
        "admin",
        &[
            (A::Find, ns("a", "c"), true),
            (A::Insert, ns("a", "c"), true),
            (A::Find, ns("admin", "system.users"), true),
            (A::Shutdown, Resource::Cluster, true),
            (A::Validate, ns("local", "replset.election"), true),
            (A::CreateUser, Resource::database("a"), true),
            (A::DropDatabase, Resource::database("a"), true),
            // Not even root writes the roles collection directly.
            (A::Insert, ns("admin", "system.roles"), false),
            (A::Internal, Resource::Cluster, false),
        ],
    );
    let root = RoleGraph::new().resolve(&[role("root", "admin")]).unwrap();
    for inherited in [
        "readWriteAnyDatabase",
        "readAnyDatabase",
        "clusterMonitor",
        "backup",
    ] {
        assert!(
            root.roles.contains(&role(inherited, "admin")),
            "{inherited}"
        );
    }
    check(
        "__system",
        "admin",
        &[
            (A::Internal, Resource::Cluster, true),
            (A::Remove, ns("local", "replset.election"), true),
        ],
    );
}

#[test]
fn admin_only_roles_exist_only_in_admin() {
    assert!(is_builtin(&role("read", "anydb")));
    assert!(is_builtin(&role("root", "admin")));
    assert!(!is_builtin(&role("root", "test")));
    assert!(!is_builtin(&role("readAnyDatabase", "test")));
    let e = RoleGraph::new()
        .resolve(&[role("root", "test")])
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::RoleNotFound);
    assert_eq!(e.errmsg, "Role: root@test does not exist");
    let test = builtin_names("test");
    assert!(test.contains(&"dbOwner") && !test.contains(&"root"));
    assert!(builtin_names("admin").contains(&"root"));
}

fn def(name: &str, roles: &[RoleName], privileges: Vec<Privilege>) -> RoleDef {
    RoleDef {
        name: role(name, "test"),
        roles: roles.to_vec(),
        privileges,
    }
}

#[test]
fn user_defined_roles_inherit() {
    let graph = RoleGraph::from_defs([
        def(
            "reporter",
            &[role("read", "test")],
            vec![Privilege::new(Resource::Cluster, &[A::ServerStatus])],
        ),
        def(
            "lead",
            &[role("reporter", "test")],
            vec![Privilege::new(ns("test", "tasks"), &[A::Insert])],
        ),
    ])
    .unwrap();
    let lead = graph.resolve(&[role("lead", "test")]).unwrap();
    let names: Vec<String> = lead.roles.iter().map(ToString::to_string).collect();
    assert_eq!(names, ["lead@test", "read@test", "reporter@test"]);
    let p = &lead.privileges;
    assert!(p.allows_action(A::Find, &ns("test", "c")));
    assert!(p.allows_action(A::ServerStatus, &Resource::Cluster));
    assert!(p.allows_action(A::Insert, &ns("test", "tasks")));
    assert!(!p.allows_action(A::Insert, &ns("test", "c")));
    let reporter = graph.resolve(&[role("reporter", "test")]).unwrap();
    assert!(
        !reporter
            .privileges
            .allows_action(A::Insert, &ns("test", "tasks"))
    );
}

#[test]
fn cycles_are_refused() {
    let e = RoleGraph::from_defs([
        def("a", &[role("b", "test")], vec![]),
        def("b", &[role("a", "test")], vec![]),
    ])
    .unwrap_err();
    assert_eq!(e.code, ErrorCode::GraphContainsCycle);
    assert_eq!(
        e.errmsg,
        "Cycle in dependency graph: a@test -> b@test -> a@test"
    );
    // A role granting itself.
    let e = RoleGraph::from_defs([def("a", &[role("a", "test")], vec![])]).unwrap_err();
    assert_eq!(e.errmsg, "Cycle in dependency graph: a@test -> a@test");
    // Adding the closing edge later is refused and changes nothing.
    let mut graph = RoleGraph::from_defs([
        def("a", &[role("b", "test")], vec![]),
        def("b", &[role("c", "test")], vec![]),
        def("c", &[], vec![]),
    ])
    .unwrap();
    let e = graph
        .upsert(def("c", &[role("a", "test")], vec![]))
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::GraphContainsCycle);
    assert_eq!(graph.direct_roles(&role("c", "test")).unwrap(), vec![]);
    // A diamond is not a cycle.
    graph
        .upsert(def("d", &[role("a", "test"), role("b", "test")], vec![]))
        .unwrap();
    assert_eq!(graph.resolve(&[role("d", "test")]).unwrap().roles.len(), 4);
}

#[test]
fn unknown_and_builtin_roles_in_definitions() {
    let e = RoleGraph::from_defs([def("a", &[role("nope", "test")], vec![])]).unwrap_err();
    assert_eq!(e.code, ErrorCode::RoleNotFound);
    assert_eq!(e.errmsg, "Role: nope@test does not exist");
    let mut graph = RoleGraph::new();
    let e = graph
        .upsert(RoleDef {
            name: role("read", "test"),
            roles: vec![],
            privileges: vec![],
        })
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::InvalidRoleModification);
    let e = RoleGraph::from_defs([RoleDef {
        name: role("root", "admin"),
        roles: vec![],
        privileges: vec![],
    }])
    .unwrap_err();
    assert_eq!(e.code, ErrorCode::DuplicateKey);
    // Dropping a role removes the grants of it.
    let mut graph = RoleGraph::from_defs([
        def("a", &[role("b", "test")], vec![]),
        def("b", &[], vec![]),
    ])
    .unwrap();
    graph.remove(&role("b", "test")).unwrap();
    assert_eq!(graph.direct_roles(&role("a", "test")).unwrap(), vec![]);
    assert_eq!(
        graph.remove(&role("b", "test")).unwrap_err().code,
        ErrorCode::RoleNotFound
    );
}

/// A long chain resolves without recursion.
#[test]
fn deep_chains() {
    let n = 10_000;
    let defs = (0..n).map(|i| {
        let roles = if i + 1 < n {
            vec![role(&format!("r{}", i + 1), "test")]
        } else {
            vec![role("read", "test")]
        };
        def(&format!("r{i}"), &roles, vec![])
    });
    let graph = RoleGraph::from_defs(defs).unwrap();
    let all = graph.resolve(&[role("r0", "test")]).unwrap();
    assert_eq!(all.roles.len(), n + 1);
    assert!(all.privileges.allows_action(A::Find, &ns("test", "c")));
}
