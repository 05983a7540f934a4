//! Roles: mongod's built-in ones with their privileges, and user-defined roles given as data,
//! resolved through their inheritance (a role granting roles) with cycles refused.
//!
//! The built-in roles' privileges are mongod's `src/mongo/db/auth/builtin_roles.yml`; the role
//! graph's errors are those of `role_graph.cpp` (`RoleNotFound` "Role: r@db does not exist",
//! `GraphContainsCycle` "Cycle in dependency graph: a@db -> b@db -> a@db").

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use bson::{RawBsonRef, RawDocument};

use super::privileges::{ActionSet, ActionType as A, Privilege, PrivilegeSet, Resource};
use crate::error::{CommandError, ErrorCode};

/// A role's name and the database it belongs to.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RoleName {
    /// `role`.
    pub role: String,
    /// `db`.
    pub db: String,
}

impl RoleName {
    /// Role `role` of database `db`.
    pub fn new(role: &str, db: &str) -> Self {
        RoleName {
            role: role.to_owned(),
            db: db.to_owned(),
        }
    }
}

impl fmt::Display for RoleName {
    /// mongod's `getFullName()`: `role@db`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}@{}", self.role, self.db)
    }
}

/// mongod's `AuthName::parseFromBSONObj`: `{<field>: "name", db: "db"}`, where `kind` is
/// `UserName` (strict: no other field) or `RoleName` (other fields ignored).
pub fn parse_auth_name(
    kind: &str,
    field: &str,
    strict: bool,
    doc: &RawDocument,
) -> Result<(String, String), CommandError> {
    let mut name: Option<&str> = None;
    let mut db: Option<&str> = None;
    for elem in doc {
        let (key, value) =
            elem.map_err(|e| CommandError::new(ErrorCode::InvalidBSON, e.to_string()))?;
        let slot = if key.as_str() == field {
            &mut name
        } else if key.as_str() == "db" {
            &mut db
        } else {
            if strict {
                return Err(CommandError::bad_value(format!(
                    "{kind} contains an unknown field named: '{key}"
                )));
            }
            continue;
        };
        let RawBsonRef::String(s) = value else {
            return Err(CommandError::bad_value(format!(
                "{kind} must contain a string field named: {key}. But, has type {}",
                crate::commands::type_name(value.element_type())
            )));
        };
        if slot.is_some() {
            return Err(CommandError::bad_value(format!(
                "{kind} has more than one field named: {key}"
            )));
        }
        *slot = Some(s);
    }
    let Some(name) = name else {
        return Err(CommandError::bad_value(format!(
            "{kind} must contain a field named: {field}"
        )));
    };
    let Some(db) = db else {
        return Err(CommandError::bad_value(format!(
            "{kind} must contain a field named: db"
        )));
    };
    Ok((name.to_owned(), db.to_owned()))
}

/// One element of a `roles` array (`RoleNameOrString`): a role of `db`, or `{role, db}`.
pub fn parse_role_name(db: &str, value: RawBsonRef<'_>) -> Result<RoleName, CommandError> {
    match value {
        RawBsonRef::String(role) => Ok(RoleName::new(role, db)),
        RawBsonRef::Document(d) => {
            let (role, role_db) = parse_auth_name("RoleName", "role", false, d)?;
            Ok(RoleName { role, db: role_db })
        }
        _ => Err(CommandError::bad_value(
            "RoleName must be either a string or an object",
        )),
    }
}

/// Where a built-in role's privilege applies, relative to the database the role is in.
#[derive(Debug, Clone, Copy)]
enum Pat {
    /// The role's own database (`matchType: database`).
    Db,
    /// A named database.
    DbNamed(&'static str),
    /// `any_normal`.
    AnyNormal,
    /// `cluster`.
    Cluster,
    /// `any`.
    Any,
    /// `any_system_buckets`.
    AnySystemBuckets,
    /// `collection`: a collection name in every database.
    Coll(&'static str),
    /// `exact_namespace` in the role's database.
    Exact(&'static str),
    /// `exact_namespace` in a named database.
    ExactIn(&'static str, &'static str),
}

/// One privilege of a built-in role: a pattern and the union of action lists.
type Grant = (Pat, &'static [&'static [A]]);

/// A built-in role.
struct Builtin {
    name: &'static str,
    /// Exists only in `admin` (otherwise in every database).
    admin_only: bool,
    /// Roles it grants, as `(role, db)`; `None` for the role's own database.
    roles: &'static [(&'static str, Option<&'static str>)],
    grants: &'static [Grant],
    /// `__system`: every action on every resource.
    all: bool,
}

const READ: &[A] = &[
    A::ChangeStream,
    A::CollStats,
    A::DbHash,
    A::DbStats,
    A::Find,
    A::KillCursors,
    A::ListCollections,
    A::ListIndexes,
    A::ListSearchIndexes,
    A::PlanCacheRead,
];
const WRITE: &[A] = &[
    A::CleanupStructuredEncryptionData,
    A::CompactStructuredEncryptionData,
    A::ConvertToCapped,
    A::CreateCollection,
    A::CreateIndex,
    A::CreateSearchIndexes,
    A::DropCollection,
    A::DropIndex,
    A::DropSearchIndex,
    A::Insert,
    A::Remove,
    A::RenameCollectionSameDb,
    A::Update,
    A::UpdateSearchIndex,
];
const USER_ADMIN: &[A] = &[
    A::ChangeCustomData,
    A::ChangePassword,
    A::CreateUser,
    A::CreateRole,
    A::DropUser,
    A::DropRole,
    A::GrantRole,
    A::RevokeRole,
    A::SetAuthenticationRestriction,
    A::ViewUser,
    A::ViewRole,
];
const DB_ADMIN: &[A] = &[
    A::Analyze,
    A::BypassDocumentValidation,
    A::CollMod,
    A::CollStats,
    A::Compact,
    A::ConvertToCapped,
    A::CreateCollection,
    A::DbStats,
    A::DropCollection,
    A::DropDatabase,
    A::DropIndex,
    A::DropSearchIndex,
    A::CreateIndex,
    A::CreateSearchIndexes,
    A::EnableProfiler,
    A::ListCollections,
    A::ListIndexes,
    A::ListSearchIndexes,
    A::UpdateSearchIndex,
    A::PlanCacheIndexFilter,
    A::PlanCacheRead,
    A::PlanCacheWrite,
    A::ReIndex,
    A::RenameCollectionSameDb,
    A::StorageDetails,
    A::Validate,
];
const DB_ADMIN_SINGLE_TENANT: &[A] = &[A::ConfigureQueryAnalyzer];
const PROFILE_EXTRA: &[A] = &[A::ConvertToCapped, A::CreateCollection, A::DropCollection];
const INDEX_EXTRA: &[A] = &[
    A::CreateIndex,
    A::CreateSearchIndexes,
    A::DropIndex,
    A::DropSearchIndex,
];
const CLUSTER_MONITOR_CLUSTER: &[A] = &[
    A::ConnPoolStats,
    A::GetCmdLineOpts,
    A::GetDefaultRwConcern,
    A::GetLog,
    A::GetParameter,
    A::GetShardMap,
    A::HostInfo,
    A::ListDatabases,
    A::ListSampledQueries,
    A::ListSessions,
    A::ListShards,
    A::Netstat,
    A::OperationMetrics,
    A::ReplSetGetConfig,
    A::ReplSetGetStatus,
    A::ServerStatus,
    A::Top,
    A::UseUuid,
    A::Inprog,
    A::ShardingState,
    A::AllCollectionStats,
    A::ShardedDataDistribution,
];
const CLUSTER_MONITOR_DB: &[A] = &[
    A::CollStats,
    A::DbStats,
    A::GetDatabaseVersion,
    A::GetShardVersion,
    A::IndexStats,
];
const HOST_MANAGER_CLUSTER: &[A] = &[
    A::ApplicationMessage,
    A::AuditConfigure,
    A::ConnPoolSync,
    A::DropConnections,
    A::LogRotate,
    A::OidReset,
    A::SetParameter,
    A::Shutdown,
    A::Touch,
    A::Unlock,
    A::FlushRouterConfig,
    A::Fsync,
    A::InvalidateUserCache,
    A::KillAnyCursor,
    A::KillAnySession,
    A::Killop,
    A::ReplSetResizeOplog,
    A::Resync,
    A::TrafficRecord,
    A::RotateCertificates,
    A::OidcListKeys,
    A::OidcRefreshKeys,
];
const CLUSTER_MANAGER_CLUSTER: &[A] = &[
    A::AppendOplogNote,
    A::ApplicationMessage,
    A::ReplSetConfigure,
    A::ReplSetGetConfig,
    A::ReplSetGetStatus,
    A::ReplSetStateChange,
    A::Resync,
    A::AddShard,
    A::RemoveShard,
    A::ListSessions,
    A::ListShards,
    A::FlushRouterConfig,
    A::CleanupOrphaned,
    A::GetDefaultRwConcern,
    A::RunTenantMigration,
    A::SetDefaultRwConcern,
    A::SetFeatureCompatibilityVersion,
    A::SetClusterParameter,
    A::GetClusterParameter,
    A::SetChangeStreamState,
    A::GetChangeStreamState,
    A::QuerySettings,
    A::QueryStatsRead,
    A::QueryStatsReadTransformed,
    A::CheckMetadataConsistency,
    A::TransitionFromDedicatedConfigServer,
    A::TransitionToDedicatedConfigServer,
];
const CLUSTER_MANAGER_DB: &[A] = &[
    A::AnalyzeShardKey,
    A::ConfigureQueryAnalyzer,
    A::ClearJumboFlag,
    A::SplitChunk,
    A::MoveChunk,
    A::MoveCollection,
    A::EnableSharding,
    A::SplitVector,
    A::RefineCollectionShardKey,
    A::ReshardCollection,
];
const CLUSTER_MANAGER_WRITE: &[A] = &[A::Insert, A::Update, A::Remove];
const RESTORE_WRITE: &[A] = &[
    A::BypassDocumentValidation,
    A::CollMod,
    A::ConvertToCapped,
    A::CreateCollection,
    A::CreateIndex,
    A::CreateSearchIndexes,
    A::DropCollection,
    A::Insert,
    A::UpdateSearchIndex,
];
const FIND: &[A] = &[A::Find];

static BUILTINS: &[Builtin] = &[
    Builtin {
        name: "read",
        admin_only: false,
        roles: &[],
        grants: &[(Pat::Db, &[READ]), (Pat::Exact("system.js"), &[READ])],
        all: false,
    },
    Builtin {
        name: "readWrite",
        admin_only: false,
        roles: &[],
        grants: &[
            (Pat::Db, &[READ, WRITE]),
            (Pat::Exact("system.js"), &[READ, WRITE]),
        ],
        all: false,
    },
    Builtin {
        name: "userAdmin",
        admin_only: false,
        roles: &[],
        grants: &[(Pat::Db, &[USER_ADMIN])],
        all: false,
    },
    Builtin {
        name: "dbAdmin",
        admin_only: false,
        roles: &[],
        grants: &[
            (Pat::Db, &[DB_ADMIN, DB_ADMIN_SINGLE_TENANT]),
            (Pat::Exact("system.profile"), &[READ, PROFILE_EXTRA]),
        ],
        all: false,
    },
    Builtin {
        name: "dbOwner",
        admin_only: false,
        roles: &[("readWrite", None), ("dbAdmin", None), ("userAdmin", None)],
        grants: &[],
        all: false,
    },
    Builtin {
        name: "enableSharding",
        admin_only: false,
        roles: &[],
        grants: &[(
            Pat::AnyNormal,
            &[&[
                A::AnalyzeShardKey,
                A::EnableSharding,
                A::MoveCollection,
                A::RefineCollectionShardKey,
                A::ReshardCollection,
            ]],
        )],
        all: false,
    },
    Builtin {
        name: "readAnyDatabase",
        admin_only: true,
        roles: &[],
        grants: &[
            (Pat::AnyNormal, &[READ]),
            (Pat::Cluster, &[&[A::ListDatabases]]),
            (Pat::Coll("system.js"), &[READ]),
            (Pat::AnySystemBuckets, &[READ]),
        ],
        all: false,
    },
    Builtin {
        name: "readWriteAnyDatabase",
        admin_only: true,
        roles: &[("readAnyDatabase", None)],
        grants: &[
            (Pat::AnyNormal, &[READ, WRITE]),
            (Pat::Coll("system.js"), &[READ, WRITE]),
            (Pat::AnySystemBuckets, &[READ, WRITE]),
        ],
        all: false,
    },
    Builtin {
        name: "userAdminAnyDatabase",
        admin_only: true,
        roles: &[],
        grants: &[
            (
                Pat::AnyNormal,
                &[USER_ADMIN, &[A::ListCachedAndActiveUsers]],
            ),
            (Pat::DbNamed("local"), &[USER_ADMIN]),
            (Pat::DbNamed("config"), &[USER_ADMIN]),
            (
                Pat::Cluster,
                &[&[
                    A::ListDatabases,
                    A::AuthSchemaUpgrade,
                    A::InvalidateUserCache,
                    A::ViewUser,
                ]],
            ),
            (Pat::ExactIn("admin", "system.users"), &[READ, INDEX_EXTRA]),
            (Pat::ExactIn("admin", "system.roles"), &[READ, INDEX_EXTRA]),
            (Pat::Coll("system.users"), &[READ]),
            (Pat::ExactIn("admin", "system.version"), &[READ]),
            (Pat::ExactIn("admin", "system.backup_users"), &[READ]),
        ],
        all: false,
    },
    Builtin {
        name: "dbAdminAnyDatabase",
        admin_only: true,
        roles: &[],
        grants: &[
            (Pat::Cluster, &[&[A::ListDatabases, A::ApplyOps]]),
            (Pat::AnyNormal, &[DB_ADMIN, DB_ADMIN_SINGLE_TENANT]),
            (Pat::Coll("system.profile"), &[READ, PROFILE_EXTRA]),
            (Pat::AnySystemBuckets, &[DB_ADMIN]),
        ],
        all: false,
    },
    Builtin {
        name: "clusterMonitor",
        admin_only: true,
        roles: &[("read", Some("config")), ("read", Some("local"))],
        grants: &[
            (Pat::Cluster, &[CLUSTER_MONITOR_CLUSTER]),
            (Pat::AnyNormal, &[CLUSTER_MONITOR_DB]),
            (Pat::DbNamed("config"), &[CLUSTER_MONITOR_DB]),
            (
                Pat::ExactIn("config", "system.sessions"),
                &[CLUSTER_MONITOR_DB],
            ),
            (Pat::DbNamed("local"), &[CLUSTER_MONITOR_DB]),
            (Pat::ExactIn("local", "system.replset"), &[FIND]),
            (Pat::ExactIn("local", "replset.election"), &[FIND]),
            (Pat::ExactIn("local", "replset.minvalid"), &[FIND]),
            (Pat::Coll("system.profile"), &[FIND]),
        ],
        all: false,
    },
    Builtin {
        name: "hostManager",
        admin_only: true,
        roles: &[],
        grants: &[
            (Pat::Cluster, &[HOST_MANAGER_CLUSTER]),
            (Pat::AnyNormal, &[&[A::KillCursors]]),
        ],
        all: false,
    },
    Builtin {
        name: "clusterManager",
        admin_only: true,
        roles: &[("read", Some("config"))],
        grants: &[
            (Pat::Cluster, &[CLUSTER_MANAGER_CLUSTER]),
            (Pat::AnyNormal, &[CLUSTER_MANAGER_DB]),
            (Pat::AnySystemBuckets, &[CLUSTER_MANAGER_DB]),
            (
                Pat::DbNamed("config"),
                &[CLUSTER_MANAGER_DB, CLUSTER_MANAGER_WRITE],
            ),
            (
                Pat::DbNamed("local"),
                &[CLUSTER_MANAGER_DB, CLUSTER_MANAGER_WRITE],
            ),
            (Pat::ExactIn("local", "system.replset"), &[READ]),
            (Pat::Any, &[&[A::DbCheck]]),
            (Pat::ExactIn("local", "system.healthlog"), &[READ]),
            (
                Pat::ExactIn("local", "replset.election"),
                &[CLUSTER_MANAGER_WRITE],
            ),
            (
                Pat::ExactIn("local", "replset.minvalid"),
                &[CLUSTER_MANAGER_WRITE],
            ),
        ],
        all: false,
    },
    Builtin {
        name: "clusterAdmin",
        admin_only: true,
        roles: &[
            ("clusterMonitor", None),
            ("hostManager", None),
            ("clusterManager", None),
        ],
        grants: &[
            (Pat::AnyNormal, &[&[A::DropDatabase]]),
            (Pat::Any, &[&[A::ImportCollection, A::ExportCollection]]),
        ],
        all: false,
    },
    Builtin {
        name: "__queryableBackup",
        admin_only: true,
        roles: &[],
        grants: &[
            (
                Pat::Any,
                &[&[
                    A::CollStats,
                    A::ListCollections,
                    A::ListIndexes,
                    A::ListSearchIndexes,
                ]],
            ),
            (Pat::AnyNormal, &[FIND]),
            (Pat::AnySystemBuckets, &[FIND]),
            (
                Pat::Cluster,
                &[&[A::GetParameter, A::ListDatabases, A::UseUuid]],
            ),
            (Pat::DbNamed("config"), &[FIND]),
            (Pat::DbNamed("local"), &[FIND]),
            (Pat::ExactIn("local", "replset.election"), &[FIND]),
            (Pat::ExactIn("local", "replset.minvalid"), &[FIND]),
            (Pat::Coll("system.js"), &[FIND]),
            (Pat::Coll("system.users"), &[FIND]),
            (Pat::Coll("system.profile"), &[FIND]),
            (Pat::ExactIn("admin", "system.backup_users"), &[FIND]),
            (Pat::ExactIn("admin", "system.roles"), &[FIND]),
            (Pat::ExactIn("admin", "system.version"), &[FIND]),
            (Pat::ExactIn("config", "settings"), &[FIND]),
        ],
        all: false,
    },
    Builtin {
        name: "backup",
        admin_only: true,
        roles: &[("__queryableBackup", None)],
        grants: &[
            (
                Pat::Cluster,
                &[&[
                    A::AppendOplogNote,
                    A::ServerStatus,
                    A::SetUserWriteBlockMode,
                ]],
            ),
            (
                Pat::ExactIn("config", "settings"),
                &[&[A::Insert, A::Update]],
            ),
        ],
        all: false,
    },
    Builtin {
        name: "restore",
        admin_only: true,
        roles: &[],
        grants: &[
            (
                Pat::Cluster,
                &[&[
                    A::GetParameter,
                    A::ForceUuid,
                    A::UseUuid,
                    A::BypassWriteBlockingMode,
                    A::SetUserWriteBlockMode,
                    A::ApplyOps,
                ]],
            ),
            (Pat::DbNamed("local"), &[RESTORE_WRITE]),
            (Pat::DbNamed("config"), &[RESTORE_WRITE]),
            (Pat::AnySystemBuckets, &[RESTORE_WRITE]),
            (Pat::ExactIn("local", "system.replset"), &[RESTORE_WRITE]),
            (Pat::ExactIn("local", "replset.election"), &[RESTORE_WRITE]),
            (Pat::ExactIn("local", "replset.minvalid"), &[RESTORE_WRITE]),
            (Pat::Any, &[&[A::ListCollections]]),
            (Pat::AnyNormal, &[RESTORE_WRITE, USER_ADMIN]),
            (Pat::Coll("system.js"), &[RESTORE_WRITE]),
            (Pat::ExactIn("admin", "tempusers"), &[FIND]),
            (Pat::ExactIn("admin", "temproles"), &[FIND]),
            (
                Pat::ExactIn("admin", "system.backup_users"),
                &[RESTORE_WRITE],
            ),
            (
                Pat::ExactIn("admin", "system.version"),
                &[RESTORE_WRITE, FIND],
            ),
            (
                Pat::Coll("system.users"),
                &[RESTORE_WRITE, &[A::Find, A::Update, A::Remove]],
            ),
            (Pat::ExactIn("admin", "system.roles"), &[&[A::CreateIndex]]),
        ],
        all: false,
    },
    Builtin {
        name: "root",
        admin_only: true,
        roles: &[
            ("clusterAdmin", None),
            ("userAdminAnyDatabase", None),
            ("dbAdminAnyDatabase", None),
            ("readWriteAnyDatabase", None),
            ("backup", None),
            ("restore", None),
            ("directShardOperations", None),
        ],
        grants: &[
            (Pat::Any, &[&[A::Validate]]),
            (Pat::Cluster, &[&[A::UseTenant]]),
            (
                Pat::ExactIn("config", "system.preimages"),
                &[&[A::Find, A::Remove]],
            ),
            (
                Pat::ExactIn("config", "system.change_collection"),
                &[&[A::Find, A::Insert, A::Remove, A::Update]],
            ),
        ],
        all: false,
    },
    Builtin {
        name: "directShardOperations",
        admin_only: true,
        roles: &[],
        grants: &[(Pat::Cluster, &[&[A::IssueDirectShardOperations]])],
        all: false,
    },
    Builtin {
        name: "__system",
        admin_only: true,
        roles: &[],
        grants: &[],
        all: true,
    },
];

fn builtin(role: &RoleName) -> Option<&'static Builtin> {
    BUILTINS
        .iter()
        .find(|b| b.name == role.role && (!b.admin_only || role.db == "admin"))
}

/// Whether `role` is one of mongod's built-in roles (those of every database, or the admin-only
/// ones in `admin`).
pub fn is_builtin(role: &RoleName) -> bool {
    builtin(role).is_some()
}

/// The names of the built-in roles that exist in database `db` (as `rolesInfo` with
/// `showBuiltinRoles` lists them).
pub fn builtin_names(db: &str) -> Vec<&'static str> {
    BUILTINS
        .iter()
        .filter(|b| !b.admin_only || db == "admin")
        .map(|b| b.name)
        .collect()
}

fn resolve_pat(pat: Pat, db: &str) -> Resource {
    match pat {
        Pat::Db => Resource::database(db),
        Pat::DbNamed(d) => Resource::database(d),
        Pat::AnyNormal => Resource::AnyNormal,
        Pat::Cluster => Resource::Cluster,
        Pat::Any => Resource::AnyResource,
        Pat::AnySystemBuckets => Resource::AnySystemBuckets,
        Pat::Coll(c) => Resource::Collection(c.to_owned()),
        Pat::Exact(c) => Resource::namespace(db, c),
        Pat::ExactIn(d, c) => Resource::namespace(d, c),
    }
}

/// A built-in role's own privileges (not those of the roles it grants), or `None` for a role
/// that is not built in.
pub fn builtin_privileges(role: &RoleName) -> Option<PrivilegeSet> {
    let b = builtin(role)?;
    if b.all {
        return Some(
            [Privilege {
                resource: Resource::AnyResource,
                actions: ActionSet::all(),
            }]
            .into_iter()
            .collect(),
        );
    }
    Some(
        b.grants
            .iter()
            .map(|(pat, lists)| {
                let mut actions = ActionSet::EMPTY;
                for list in *lists {
                    actions.add_all(ActionSet::of(list));
                }
                Privilege {
                    resource: resolve_pat(*pat, &role.db),
                    actions,
                }
            })
            .collect(),
    )
}

/// The roles a built-in role grants directly.
pub fn builtin_roles(role: &RoleName) -> Option<Vec<RoleName>> {
    let b = builtin(role)?;
    Some(
        b.roles
            .iter()
            .map(|(name, db)| RoleName::new(name, db.unwrap_or(&role.db)))
            .collect(),
    )
}

/// A user-defined role, as stored: the roles it grants and its own privileges.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoleDef {
    /// Its name.
    pub name: RoleName,
    /// The roles it grants (built-in or user-defined).
    pub roles: Vec<RoleName>,
    /// Its own privileges.
    pub privileges: Vec<Privilege>,
}

/// What a set of roles amounts to: every role reached through inheritance, and the union of
/// their privileges.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Resolved {
    /// The roles given and every role they grant, directly or not.
    pub roles: BTreeSet<RoleName>,
    /// Their privileges.
    pub privileges: PrivilegeSet,
}

/// The user-defined roles, with the built-in ones implied: a graph whose edges go from a role
/// to the roles it grants.
#[derive(Debug, Clone, Default)]
pub struct RoleGraph {
    defs: BTreeMap<RoleName, RoleDef>,
}

fn role_not_found(role: &RoleName) -> CommandError {
    CommandError::new(
        ErrorCode::RoleNotFound,
        format!("Role: {role} does not exist"),
    )
}

impl RoleGraph {
    /// A graph with only the built-in roles.
    pub fn new() -> Self {
        Self::default()
    }

    /// A graph of `defs`: every role they grant must exist, and no role may grant itself
    /// through any chain.
    pub fn from_defs(defs: impl IntoIterator<Item = RoleDef>) -> Result<Self, CommandError> {
        let mut graph = RoleGraph::new();
        for def in defs {
            if is_builtin(&def.name) || graph.defs.contains_key(&def.name) {
                return Err(already_exists(&def.name));
            }
            graph.defs.insert(def.name.clone(), def);
        }
        graph.check()?;
        Ok(graph)
    }

    /// Adds or replaces the user-defined role `def` (what `createRole`, `updateRole`,
    /// `grantRolesToRole` store). The graph is unchanged when this fails: a built-in role
    /// cannot be redefined, the roles it grants must exist, and it may not create a cycle.
    pub fn upsert(&mut self, def: RoleDef) -> Result<(), CommandError> {
        if is_builtin(&def.name) {
            return Err(CommandError::new(
                ErrorCode::InvalidRoleModification,
                format!("Cannot modify built-in role: {}", def.name),
            ));
        }
        let previous = self.defs.insert(def.name.clone(), def.clone());
        if let Err(e) = self.check() {
            match previous {
                Some(p) => self.defs.insert(def.name, p),
                None => self.defs.remove(&def.name),
            };
            return Err(e);
        }
        Ok(())
    }

    /// Removes a user-defined role (`dropRole`), and the grants of it by other roles.
    pub fn remove(&mut self, role: &RoleName) -> Result<(), CommandError> {
        if self.defs.remove(role).is_none() {
            return Err(role_not_found(role));
        }
        for def in self.defs.values_mut() {
            def.roles.retain(|r| r != role);
        }
        Ok(())
    }

    /// Whether `role` exists, built in or defined.
    pub fn exists(&self, role: &RoleName) -> bool {
        is_builtin(role) || self.defs.contains_key(role)
    }

    /// Whether no role is defined (only the built-in ones exist).
    pub fn is_empty(&self) -> bool {
        self.defs.is_empty()
    }

    /// Every user-defined role, in `(role, db)` order.
    pub fn defs(&self) -> impl Iterator<Item = &RoleDef> {
        self.defs.values()
    }

    /// The definition of a user-defined role.
    pub fn get(&self, role: &RoleName) -> Option<&RoleDef> {
        self.defs.get(role)
    }

    /// The roles `role` grants directly.
    pub fn direct_roles(&self, role: &RoleName) -> Result<Vec<RoleName>, CommandError> {
        if let Some(roles) = builtin_roles(role) {
            return Ok(roles);
        }
        self.defs
            .get(role)
            .map(|d| d.roles.clone())
            .ok_or_else(|| role_not_found(role))
    }

    /// The privileges `role` holds itself (not through the roles it grants).
    pub fn direct_privileges(&self, role: &RoleName) -> Result<PrivilegeSet, CommandError> {
        if let Some(p) = builtin_privileges(role) {
            return Ok(p);
        }
        self.defs
            .get(role)
            .map(|d| d.privileges.iter().cloned().collect())
            .ok_or_else(|| role_not_found(role))
    }

    /// `roles` and every role they grant, with all their privileges. An unknown role answers
    /// `RoleNotFound`.
    pub fn resolve(&self, roles: &[RoleName]) -> Result<Resolved, CommandError> {
        let mut out = Resolved::default();
        let mut stack: Vec<RoleName> = roles.to_vec();
        while let Some(role) = stack.pop() {
            if out.roles.contains(&role) {
                continue;
            }
            out.privileges.extend(&self.direct_privileges(&role)?);
            stack.extend(self.direct_roles(&role)?);
            out.roles.insert(role);
        }
        Ok(out)
    }

    /// mongod's `recomputePrivilegeData` check: every granted role exists and no role reaches
    /// itself. The first cycle found is reported as mongod reports it.
    fn check(&self) -> Result<(), CommandError> {
        let mut done: BTreeSet<&RoleName> = BTreeSet::new();
        for start in self.defs.keys() {
            if done.contains(start) {
                continue;
            }
            // Iterative depth-first search; `path` is the chain of roles in progress.
            let mut path: Vec<&RoleName> = Vec::new();
            let mut frames: Vec<(&RoleName, usize)> = vec![(start, 0)];
            while let Some(&(role, next)) = frames.last() {
                if next == 0 {
                    if let Some(at) = path.iter().position(|r| *r == role) {
                        let chain: Vec<String> = path
                            .iter()
                            .skip(at)
                            .chain(std::iter::once(&role))
                            .map(ToString::to_string)
                            .collect();
                        return Err(CommandError::new(
                            ErrorCode::GraphContainsCycle,
                            format!("Cycle in dependency graph: {}", chain.join(" -> ")),
                        ));
                    }
                    path.push(role);
                }
                let children: &[RoleName] = match self.defs.get(role) {
                    Some(def) => &def.roles,
                    None if is_builtin(role) => &[],
                    None => return Err(role_not_found(role)),
                };
                if let Some(child) = children.get(next) {
                    if let Some(top) = frames.last_mut() {
                        top.1 += 1;
                    }
                    if !done.contains(child) {
                        frames.push((child, 0));
                    }
                } else {
                    path.pop();
                    done.insert(role);
                    frames.pop();
                }
            }
        }
        Ok(())
    }
}

fn already_exists(role: &RoleName) -> CommandError {
    CommandError::new(
        ErrorCode::DuplicateKey,
        format!("Role: {role} already exists"),
    )
}

#[cfg(test)]
mod tests;
