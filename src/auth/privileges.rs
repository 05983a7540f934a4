//! mongod's authorization model, IO-free: action types, resources, privileges, and the one table
//! that says what each command needs ([`required`]).
//!
//! Facts are mongod's: action names from `src/mongo/db/auth/action_type.idl`, resource matching
//! from `buildResourceSearchList` (`authorization_session_impl.cpp`), and each command's needs
//! from its `checkAuthForOperation` / `doCheckAuthorization` (`auth/authorization_checks.cpp`,
//! the stages' `LiteParsed::requiredPrivileges`, `rename_collection_common.cpp`, …).

use std::collections::BTreeMap;
use std::fmt;

use bson::{RawBsonRef, RawDocument};

use super::roles::RoleName;
use crate::error::{CommandError, ErrorCode};

macro_rules! action_types {
    ($($variant:ident = $name:literal,)*) => {
        /// A mongod action type (`ActionType`), named on the wire as mongod names it.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum ActionType {
            $(
                #[doc = concat!("`", $name, "`")]
                $variant,
            )*
        }

        impl ActionType {
            /// Every action type, in declaration order.
            pub const ALL: &'static [ActionType] = &[$(ActionType::$variant,)*];

            /// The name mongod gives the action (`find`, `createCollection`…).
            pub fn name(self) -> &'static str {
                match self {
                    $(ActionType::$variant => $name,)*
                }
            }

            /// The action called `name`, if mongod has one by that name.
            pub fn from_name(name: &str) -> Option<Self> {
                match name {
                    $($name => Some(ActionType::$variant),)*
                    _ => None,
                }
            }
        }
    };
}

action_types! {
    AddShard = "addShard",
    AllCollectionStats = "allCollectionStats",
    Analyze = "analyze",
    AnalyzeShardKey = "analyzeShardKey",
    AnyAction = "anyAction",
    AppendOplogNote = "appendOplogNote",
    ApplicationMessage = "applicationMessage",
    ApplyOps = "applyOps",
    AuditConfigure = "auditConfigure",
    AuthSchemaUpgrade = "authSchemaUpgrade",
    BypassDocumentValidation = "bypassDocumentValidation",
    BypassWriteBlockingMode = "bypassWriteBlockingMode",
    ChangeCustomData = "changeCustomData",
    ChangeOwnCustomData = "changeOwnCustomData",
    ChangeOwnPassword = "changeOwnPassword",
    ChangePassword = "changePassword",
    ChangeStream = "changeStream",
    CheckMetadataConsistency = "checkMetadataConsistency",
    CleanupOrphaned = "cleanupOrphaned",
    CleanupStructuredEncryptionData = "cleanupStructuredEncryptionData",
    ClearJumboFlag = "clearJumboFlag",
    CollMod = "collMod",
    CollStats = "collStats",
    Compact = "compact",
    CompactStructuredEncryptionData = "compactStructuredEncryptionData",
    ConfigureQueryAnalyzer = "configureQueryAnalyzer",
    ConnPoolStats = "connPoolStats",
    ConnPoolSync = "connPoolSync",
    ConvertToCapped = "convertToCapped",
    CreateCollection = "createCollection",
    CreateIndex = "createIndex",
    CreateRole = "createRole",
    CreateSearchIndexes = "createSearchIndexes",
    CreateUser = "createUser",
    DbCheck = "dbCheck",
    DbHash = "dbHash",
    DbStats = "dbStats",
    DropCollection = "dropCollection",
    DropConnections = "dropConnections",
    DropDatabase = "dropDatabase",
    DropIndex = "dropIndex",
    DropRole = "dropRole",
    DropSearchIndex = "dropSearchIndex",
    DropUser = "dropUser",
    EnableProfiler = "enableProfiler",
    EnableSharding = "enableSharding",
    ExportCollection = "exportCollection",
    Find = "find",
    FlushRouterConfig = "flushRouterConfig",
    ForceUuid = "forceUUID",
    Fsync = "fsync",
    GetChangeStreamState = "getChangeStreamState",
    GetClusterParameter = "getClusterParameter",
    GetCmdLineOpts = "getCmdLineOpts",
    GetDatabaseVersion = "getDatabaseVersion",
    GetDefaultRwConcern = "getDefaultRWConcern",
    GetLog = "getLog",
    GetParameter = "getParameter",
    GetShardMap = "getShardMap",
    GetShardVersion = "getShardVersion",
    GrantRole = "grantRole",
    HostInfo = "hostInfo",
    Impersonate = "impersonate",
    ImportCollection = "importCollection",
    IndexStats = "indexStats",
    Inprog = "inprog",
    Insert = "insert",
    Internal = "internal",
    InvalidateUserCache = "invalidateUserCache",
    IssueDirectShardOperations = "issueDirectShardOperations",
    KillAnyCursor = "killAnyCursor",
    KillAnySession = "killAnySession",
    KillCursors = "killCursors",
    Killop = "killop",
    ListCachedAndActiveUsers = "listCachedAndActiveUsers",
    ListCollections = "listCollections",
    ListDatabases = "listDatabases",
    ListIndexes = "listIndexes",
    ListSampledQueries = "listSampledQueries",
    ListSearchIndexes = "listSearchIndexes",
    ListSessions = "listSessions",
    ListShards = "listShards",
    LogRotate = "logRotate",
    MoveChunk = "moveChunk",
    MoveCollection = "moveCollection",
    Netstat = "netstat",
    OidReset = "oidReset",
    OidcListKeys = "oidcListKeys",
    OidcRefreshKeys = "oidcRefreshKeys",
    OperationMetrics = "operationMetrics",
    PlanCacheIndexFilter = "planCacheIndexFilter",
    PlanCacheRead = "planCacheRead",
    PlanCacheWrite = "planCacheWrite",
    QuerySettings = "querySettings",
    QueryStatsRead = "queryStatsRead",
    QueryStatsReadTransformed = "queryStatsReadTransformed",
    ReIndex = "reIndex",
    RefineCollectionShardKey = "refineCollectionShardKey",
    Remove = "remove",
    RemoveShard = "removeShard",
    RenameCollectionSameDb = "renameCollectionSameDB",
    ReplSetConfigure = "replSetConfigure",
    ReplSetGetConfig = "replSetGetConfig",
    ReplSetGetStatus = "replSetGetStatus",
    ReplSetResizeOplog = "replSetResizeOplog",
    ReplSetStateChange = "replSetStateChange",
    ReshardCollection = "reshardCollection",
    Resync = "resync",
    RevokeRole = "revokeRole",
    RotateCertificates = "rotateCertificates",
    RunTenantMigration = "runTenantMigration",
    ServerStatus = "serverStatus",
    SetAuthenticationRestriction = "setAuthenticationRestriction",
    SetChangeStreamState = "setChangeStreamState",
    SetClusterParameter = "setClusterParameter",
    SetDefaultRwConcern = "setDefaultRWConcern",
    SetFeatureCompatibilityVersion = "setFeatureCompatibilityVersion",
    SetParameter = "setParameter",
    SetUserWriteBlockMode = "setUserWriteBlockMode",
    ShardedDataDistribution = "shardedDataDistribution",
    ShardingState = "shardingState",
    Shutdown = "shutdown",
    SplitChunk = "splitChunk",
    SplitVector = "splitVector",
    StorageDetails = "storageDetails",
    Top = "top",
    Touch = "touch",
    TrafficRecord = "trafficRecord",
    TransitionFromDedicatedConfigServer = "transitionFromDedicatedConfigServer",
    TransitionToDedicatedConfigServer = "transitionToDedicatedConfigServer",
    Unlock = "unlock",
    Update = "update",
    UpdateSearchIndex = "updateSearchIndex",
    UseTenant = "useTenant",
    UseUuid = "useUUID",
    Validate = "validate",
    ViewRole = "viewRole",
    ViewUser = "viewUser",
}

impl fmt::Display for ActionType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Words of an [`ActionSet`]'s bit set.
const WORDS: usize = 3;
const _: () = assert!(ActionType::ALL.len() <= WORDS * 64);

/// A set of action types (mongod's `ActionSet`). `anyAction` contains every action.
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct ActionSet([u64; WORDS]);

impl ActionSet {
    /// No action.
    pub const EMPTY: ActionSet = ActionSet([0; WORDS]);

    /// The set of `actions`.
    pub fn of(actions: &[ActionType]) -> Self {
        let mut set = Self::EMPTY;
        for &a in actions {
            set.add(a);
        }
        set
    }

    /// Every action (what `anyAction` grants).
    pub fn all() -> Self {
        Self::of(ActionType::ALL)
    }

    fn bit(action: ActionType) -> (usize, u64) {
        let i = action as usize;
        (i / 64, 1u64 << (i % 64))
    }

    /// Adds `action`.
    pub fn add(&mut self, action: ActionType) {
        let (w, b) = Self::bit(action);
        if let Some(word) = self.0.get_mut(w) {
            *word |= b;
        }
    }

    /// Adds every action of `other`.
    pub fn add_all(&mut self, other: ActionSet) {
        for (a, b) in self.0.iter_mut().zip(other.0) {
            *a |= b;
        }
    }

    /// Removes every action of `other`.
    pub fn remove_all(&mut self, other: ActionSet) {
        for (a, b) in self.0.iter_mut().zip(other.0) {
            *a &= !b;
        }
    }

    /// Whether `action` is in the set (always, when the set holds `anyAction`).
    pub fn contains(self, action: ActionType) -> bool {
        let has = |a: ActionType| {
            let (w, b) = Self::bit(a);
            self.0.get(w).is_some_and(|word| word & b != 0)
        };
        has(action) || has(ActionType::AnyAction)
    }

    /// Whether every action of `other` is in the set.
    pub fn contains_all(self, other: ActionSet) -> bool {
        other.iter().all(|a| self.contains(a))
    }

    /// Whether the set is empty.
    pub fn is_empty(self) -> bool {
        self.0.iter().all(|w| *w == 0)
    }

    /// The actions, in declaration order.
    pub fn iter(self) -> impl Iterator<Item = ActionType> {
        ActionType::ALL.iter().copied().filter(move |&a| {
            let (w, b) = Self::bit(a);
            self.0.get(w).is_some_and(|word| word & b != 0)
        })
    }

    /// The actions' names, sorted (as `rolesInfo` and `connectionStatus` list them).
    pub fn names(self) -> Vec<&'static str> {
        let mut names: Vec<&'static str> = self.iter().map(ActionType::name).collect();
        names.sort_unstable();
        names
    }
}

impl fmt::Debug for ActionSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set()
            .entries(self.iter().map(ActionType::name))
            .finish()
    }
}

/// A resource pattern (mongod's `ResourcePattern`): a concrete thing a command touches, or a
/// pattern a privilege grants actions on.
///
/// As documents: `{db: "d", collection: "c"}` is one namespace, `{db: "d", collection: ""}`
/// every collection of `d`, `{db: "", collection: "c"}` collection `c` in every database,
/// `{db: "", collection: ""}` every normal collection of every database, `{cluster: true}` the
/// cluster and `{anyResource: true}` everything. Patterns with a `db` or `""` wildcards match
/// normal collections only: not `system.*` ones, and (for [`Resource::AnyNormal`]) nothing in
/// `local` or `config`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Resource {
    /// `{anyResource: true}`: every resource, the cluster and system collections included.
    AnyResource,
    /// `{cluster: true}`.
    Cluster,
    /// `{db: "", collection: ""}`: every normal collection outside `local` and `config`, and
    /// those databases themselves.
    AnyNormal,
    /// `{db: "d", collection: ""}`: database `d` and its normal collections.
    Database(String),
    /// `{db: "", collection: "c"}`: collection `c` (system or not) in every database.
    Collection(String),
    /// `{db: "d", collection: "c"}`: one namespace.
    Namespace {
        /// The database.
        db: String,
        /// The collection.
        collection: String,
    },
    /// `{db: "", system_buckets: ""}`: every time-series buckets collection.
    AnySystemBuckets,
    /// `{db: "d", system_buckets: ""}`: the buckets collections of database `d`.
    SystemBucketsInDatabase(String),
    /// `{db: "", system_buckets: "c"}`: `system.buckets.c` in every database.
    SystemBucketsInAnyDatabase(String),
    /// `{db: "d", system_buckets: "c"}`: `d.system.buckets.c`.
    SystemBuckets {
        /// The database.
        db: String,
        /// The time-series collection (without `system.buckets.`).
        collection: String,
    },
}

const SYSTEM_BUCKETS_PREFIX: &str = "system.buckets.";

impl Resource {
    /// The namespace `db.collection`.
    pub fn namespace(db: &str, collection: &str) -> Self {
        Resource::Namespace {
            db: db.to_owned(),
            collection: collection.to_owned(),
        }
    }

    /// The database `db`.
    pub fn database(db: &str) -> Self {
        Resource::Database(db.to_owned())
    }

    /// The pattern a `{db, collection}` document names, with mongod's `""` wildcards.
    pub fn from_db_collection(db: &str, collection: &str) -> Self {
        match (db.is_empty(), collection.is_empty()) {
            (true, true) => Resource::AnyNormal,
            (true, false) => Resource::Collection(collection.to_owned()),
            (false, true) => Resource::database(db),
            (false, false) => Resource::namespace(db, collection),
        }
    }

    /// The pattern as mongod writes it in privilege documents (`rolesInfo`,
    /// `connectionStatus`).
    pub fn to_document(&self) -> bson::Document {
        use bson::doc;
        match self {
            Resource::AnyResource => doc! { "anyResource": true },
            Resource::Cluster => doc! { "cluster": true },
            Resource::AnyNormal => doc! { "db": "", "collection": "" },
            Resource::Database(db) => doc! { "db": db, "collection": "" },
            Resource::Collection(c) => doc! { "db": "", "collection": c },
            Resource::Namespace { db, collection } => doc! { "db": db, "collection": collection },
            Resource::AnySystemBuckets => doc! { "db": "", "system_buckets": "" },
            Resource::SystemBucketsInDatabase(db) => doc! { "db": db, "system_buckets": "" },
            Resource::SystemBucketsInAnyDatabase(c) => doc! { "db": "", "system_buckets": c },
            Resource::SystemBuckets { db, collection } => {
                doc! { "db": db, "system_buckets": collection }
            }
        }
    }

    /// The patterns that match this (concrete) resource, mongod's `buildResourceSearchList`:
    /// a privilege on any of them covers it. System collections (`system.*`, and `replset.*`
    /// in `local`) are matched neither by their database's pattern nor by
    /// [`Resource::AnyNormal`]; nothing in `local` or `config` is matched by `AnyNormal`.
    pub fn search_list(&self) -> Vec<Resource> {
        let mut list = vec![Resource::AnyResource];
        match self {
            Resource::Namespace { db, collection } => {
                if is_normal_collection(db, collection) {
                    if !is_special_db(db) {
                        list.push(Resource::AnyNormal);
                    }
                    list.push(Resource::database(db));
                } else if let Some(bucket) = collection.strip_prefix(SYSTEM_BUCKETS_PREFIX)
                    && !bucket.is_empty()
                {
                    list.push(Resource::SystemBuckets {
                        db: db.clone(),
                        collection: bucket.to_owned(),
                    });
                    list.push(Resource::AnySystemBuckets);
                    list.push(Resource::SystemBucketsInDatabase(db.clone()));
                    list.push(Resource::SystemBucketsInAnyDatabase(bucket.to_owned()));
                }
                list.push(Resource::Collection(collection.clone()));
            }
            Resource::Database(db) if !is_special_db(db) => list.push(Resource::AnyNormal),
            _ => {}
        }
        if !list.contains(self) {
            list.push(self.clone());
        }
        list
    }
}

impl fmt::Display for Resource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Resource::AnyResource => f.write_str("<all resources>"),
            Resource::Cluster => f.write_str("<system resource>"),
            Resource::AnyNormal => f.write_str("<all normal resources>"),
            Resource::Database(db) => write!(f, "<database {db}>"),
            Resource::Collection(c) => write!(f, "<collection {c} in any database>"),
            Resource::Namespace { db, collection } => write!(f, "{db}.{collection}"),
            Resource::AnySystemBuckets => f.write_str("<any system.buckets collection>"),
            Resource::SystemBucketsInDatabase(db) => {
                write!(f, "<{db}.system.buckets.* collections>")
            }
            Resource::SystemBucketsInAnyDatabase(c) => {
                write!(f, "<system.buckets.{c} in any database>")
            }
            Resource::SystemBuckets { db, collection } => {
                write!(f, "{db}.system.buckets.{collection}")
            }
        }
    }
}

/// `local` and `config`: their normal collections are not covered by [`Resource::AnyNormal`].
fn is_special_db(db: &str) -> bool {
    db == "local" || db == "config"
}

/// mongod's `NamespaceString::isNormalCollection`: not `system.*`, and not `local.replset.*`.
pub fn is_normal_collection(db: &str, collection: &str) -> bool {
    !(collection.starts_with("system.") || (db == "local" && collection.starts_with("replset.")))
}

/// Actions granted on a resource (mongod's `Privilege`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Privilege {
    /// Where.
    pub resource: Resource,
    /// What.
    pub actions: ActionSet,
}

impl Privilege {
    /// `actions` on `resource`.
    pub fn new(resource: Resource, actions: &[ActionType]) -> Self {
        Privilege {
            resource,
            actions: ActionSet::of(actions),
        }
    }

    /// The privilege as mongod writes it: `{resource: {...}, actions: [...]}`.
    pub fn to_document(&self) -> bson::Document {
        bson::doc! {
            "resource": self.resource.to_document(),
            "actions": self.actions.names(),
        }
    }
}

/// The privileges a user holds, merged per resource pattern.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PrivilegeSet(BTreeMap<Resource, ActionSet>);

impl PrivilegeSet {
    /// No privilege.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds `privilege`, merging its actions with those already held on the same pattern.
    pub fn add(&mut self, privilege: &Privilege) {
        if privilege.actions.is_empty() {
            return;
        }
        self.0
            .entry(privilege.resource.clone())
            .or_default()
            .add_all(privilege.actions);
    }

    /// Adds every privilege of `other`.
    pub fn extend(&mut self, other: &PrivilegeSet) {
        for (resource, actions) in &other.0 {
            self.0
                .entry(resource.clone())
                .or_default()
                .add_all(*actions);
        }
    }

    /// The actions held on exactly the pattern `resource`.
    pub fn actions_on(&self, resource: &Resource) -> ActionSet {
        self.0.get(resource).copied().unwrap_or_default()
    }

    /// Whether the set grants every action of `privilege` on its (concrete) resource, through
    /// any pattern that matches it (mongod's `isAuthorizedForPrivilege`).
    pub fn allows(&self, privilege: &Privilege) -> bool {
        let mut held = ActionSet::EMPTY;
        for pattern in privilege.resource.search_list() {
            held.add_all(self.actions_on(&pattern));
        }
        held.contains_all(privilege.actions)
    }

    /// Whether the set grants `action` on `resource`.
    pub fn allows_action(&self, action: ActionType, resource: &Resource) -> bool {
        self.allows(&Privilege::new(resource.clone(), &[action]))
    }

    /// Whether the set grants some action on some resource in database `db` (mongod's
    /// `isAuthorizedForAnyActionOnAnyResourceInDB`, which `listDatabases` and
    /// `listCollections` with `authorizedCollections` use).
    pub fn any_action_in_db(&self, db: &str) -> bool {
        let held = |r: &Resource| !self.actions_on(r).is_empty();
        if held(&Resource::database(db))
            || held(&Resource::AnyResource)
            || held(&Resource::AnySystemBuckets)
            || held(&Resource::SystemBucketsInDatabase(db.to_owned()))
            || (!is_special_db(db) && held(&Resource::AnyNormal))
        {
            return true;
        }
        self.0.iter().any(|(resource, actions)| {
            !actions.is_empty()
                && match resource {
                    Resource::Collection(_) | Resource::SystemBucketsInAnyDatabase(_) => true,
                    Resource::Namespace { db: d, .. } | Resource::SystemBuckets { db: d, .. } => {
                        d == db
                    }
                    _ => false,
                }
        })
    }

    /// Whether the set grants some action on the (concrete) `resource`, through any pattern
    /// that matches it (mongod's `isAuthorizedForAnyActionOnResource`).
    pub fn any_action_on(&self, resource: &Resource) -> bool {
        resource
            .search_list()
            .iter()
            .any(|pattern| !self.actions_on(pattern).is_empty())
    }

    /// The privileges, one per pattern.
    pub fn iter(&self) -> impl Iterator<Item = Privilege> + '_ {
        self.0.iter().map(|(resource, actions)| Privilege {
            resource: resource.clone(),
            actions: *actions,
        })
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl FromIterator<Privilege> for PrivilegeSet {
    fn from_iter<T: IntoIterator<Item = Privilege>>(iter: T) -> Self {
        let mut set = PrivilegeSet::new();
        for p in iter {
            set.add(&p);
        }
        set
    }
}

/// What mongod grants without login, on a loopback connection while no user (and no role)
/// exists: the localhost exception (`AuthorizationSessionImpl::_getDefaultPrivileges`):
/// `createUser` and `grantRole` on `admin`, `createUser` on `$external`, and
/// `addShard`, `replSetConfigure`, `replSetGetStatus` on the cluster.
pub fn localhost_exception() -> PrivilegeSet {
    [
        Privilege::new(
            Resource::database("admin"),
            &[ActionType::CreateUser, ActionType::GrantRole],
        ),
        Privilege::new(Resource::database("$external"), &[ActionType::CreateUser]),
        Privilege::new(
            Resource::Cluster,
            &[
                ActionType::AddShard,
                ActionType::ReplSetConfigure,
                ActionType::ReplSetGetStatus,
            ],
        ),
    ]
    .into_iter()
    .collect()
}

/// A user's name and the database it was created in.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct UserName {
    /// `user`.
    pub user: String,
    /// `db`.
    pub db: String,
}

/// The connection a command runs on, as a [`Rule`] asks about it.
pub trait Caller {
    /// The privileges of the logged-in user (its roles resolved), or those of the localhost
    /// exception.
    fn privileges(&self) -> &PrivilegeSet;
    /// Whether a user is logged in.
    fn is_authenticated(&self) -> bool;
    /// Whether the logged-in user is `user`.
    fn is_user(&self, user: &UserName) -> bool;
    /// Whether every cursor the request names that exists was opened by this connection's
    /// user (mongod's `isCoauthorizedWith` on the cursor's owner).
    fn owns_cursors(&self) -> bool;
    /// Whether the caller still holds the privileges the command that opened the cursor
    /// needed (mongod checks them again on every `getMore`). Keeping that command's [`Rule`]
    /// with the cursor and evaluating it again answers this: its alternatives (a
    /// `listCollections` allowed through `authorizedCollections`) are kept too.
    fn holds_cursor_privileges(&self) -> bool;
    /// Whether the logged-in user was granted `role` directly (mongod's
    /// `isAuthenticatedAsUserWithRole`: a user may always look at its own roles).
    fn has_role(&self, role: &RoleName) -> bool;
    /// Whether the localhost exception is in force for this connection (a loopback client
    /// while no user and no role exists).
    fn localhost_exception(&self) -> bool;
}

/// A condition on the caller. Each command's row is one rule over its request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rule {
    /// Nothing beyond what [`Required::requires_auth`] asks.
    Allow,
    /// The caller holds this privilege.
    Has(Privilege),
    /// The caller lacks this privilege (mongod allows a same-database rename when the caller
    /// can read the source or cannot read the target).
    Lacks(Privilege),
    /// The caller holds some action on some resource in this database.
    AnyActionInDb(String),
    /// A user is logged in.
    Authenticated,
    /// The caller is each of these users (a user may list or end its own sessions).
    IsUsers(Vec<UserName>),
    /// See [`Caller::owns_cursors`].
    OwnsCursors,
    /// See [`Caller::holds_cursor_privileges`].
    HoldsCursorPrivileges,
    /// See [`Caller::has_role`].
    HasRole(RoleName),
    /// See [`Caller::localhost_exception`].
    LocalhostException,
    /// Every rule holds.
    All(Vec<Rule>),
    /// Some rule holds.
    Any(Vec<Rule>),
}

impl Rule {
    /// `actions` on `resource`.
    pub fn has(resource: Resource, actions: &[ActionType]) -> Self {
        Rule::Has(Privilege::new(resource, actions))
    }

    /// Whether `caller` satisfies the rule.
    pub fn allows(&self, caller: &dyn Caller) -> bool {
        match self {
            Rule::Allow => true,
            Rule::Has(p) => caller.privileges().allows(p),
            Rule::Lacks(p) => !caller.privileges().allows(p),
            Rule::AnyActionInDb(db) => caller.privileges().any_action_in_db(db),
            Rule::Authenticated => caller.is_authenticated(),
            Rule::IsUsers(users) => users.iter().all(|u| caller.is_user(u)),
            Rule::OwnsCursors => caller.owns_cursors(),
            Rule::HoldsCursorPrivileges => caller.holds_cursor_privileges(),
            Rule::HasRole(role) => caller.has_role(role),
            Rule::LocalhostException => caller.localhost_exception(),
            Rule::All(rules) => rules.iter().all(|r| r.allows(caller)),
            Rule::Any(rules) => rules.iter().any(|r| r.allows(caller)),
        }
    }

    /// Every privilege the rule names, alternatives included (what tests and diagnostics
    /// read; to check a caller, use [`Rule::allows`]).
    pub fn privileges(&self) -> Vec<Privilege> {
        let mut out = Vec::new();
        self.collect(&mut out);
        out
    }

    fn collect(&self, out: &mut Vec<Privilege>) {
        match self {
            Rule::Has(p) => out.push(p.clone()),
            Rule::All(rules) | Rule::Any(rules) => rules.iter().for_each(|r| r.collect(out)),
            _ => {}
        }
    }

    /// `self` and `other`, flattened.
    #[must_use]
    pub fn and(self, other: Rule) -> Rule {
        match (self, other) {
            (Rule::Allow, r) | (r, Rule::Allow) => r,
            (Rule::All(mut a), Rule::All(b)) => {
                a.extend(b);
                Rule::All(a)
            }
            (Rule::All(mut a), r) => {
                a.push(r);
                Rule::All(a)
            }
            (r, Rule::All(mut b)) => {
                b.insert(0, r);
                Rule::All(b)
            }
            (a, b) => Rule::All(vec![a, b]),
        }
    }
}

/// What a command needs of its caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Required {
    /// Whether it needs a logged-in user at all (mongod's `requiresAuth()`); when it does and
    /// none is, mongod answers `Unauthorized` "command <name> requires authentication".
    pub requires_auth: bool,
    /// What the caller must satisfy; when it does not, mongod answers `Unauthorized`
    /// "not authorized on <db> to execute command <command>" ([`not_authorized`]).
    pub rule: Rule,
}

impl Required {
    /// A command anyone may run, logged in or not.
    fn open() -> Self {
        Required {
            requires_auth: false,
            rule: Rule::Allow,
        }
    }

    /// A command any logged-in user may run.
    fn authenticated() -> Self {
        Required {
            requires_auth: true,
            rule: Rule::Allow,
        }
    }

    fn rule(rule: Rule) -> Self {
        Required {
            requires_auth: true,
            rule,
        }
    }

    /// Whether `caller` may run the command. An unauthenticated caller fails a command that
    /// [`requires_auth`](Required::requires_auth) even with privileges (the localhost
    /// exception's privileges count only for commands that do not, or once mongod's
    /// `isUsingLocalhostBypass` skips that check: see [`Required::allows_bypass`]).
    pub fn allows(&self, caller: &dyn Caller) -> bool {
        (!self.requires_auth || caller.is_authenticated()) && self.rule.allows(caller)
    }

    /// Whether `caller` may run the command under the localhost exception, where mongod skips
    /// the authentication check and only the privileges count.
    pub fn allows_bypass(&self, caller: &dyn Caller) -> bool {
        self.rule.allows(caller)
    }
}

/// mongod's `Unauthorized` for an unauthenticated caller of a command that needs a user.
pub fn requires_authentication(command: &str) -> CommandError {
    CommandError::new(
        ErrorCode::Unauthorized,
        format!("command {command} requires authentication"),
    )
}

/// mongod's `Unauthorized` for a caller without the privileges: `command` is the command
/// document as the error shows it (mongod prints it with sensitive fields replaced by "xxx").
pub fn not_authorized(db: &str, command: &str) -> CommandError {
    CommandError::new(
        ErrorCode::Unauthorized,
        format!("not authorized on {db} to execute command {command}"),
    )
}

/// The fields mongod prints as "xxx" when it shows a command (its `sensitiveFieldNames`).
fn sensitive_fields(command: &str) -> &'static [&'static str] {
    match command {
        "createUser" | "updateUser" => &["pwd"],
        "saslStart" | "saslContinue" => &["payload"],
        _ => &[],
    }
}

/// The request `body` of `command` with its sensitive fields (`pwd`, SASL payloads) replaced
/// by "xxx": what an error or a log line may show of it.
pub fn redacted(command: &str, body: &RawDocument) -> bson::RawDocumentBuf {
    let sensitive = sensitive_fields(command);
    let mut shown = bson::RawDocumentBuf::new();
    for (key, value) in body.iter().map_while(Result::ok) {
        if sensitive.contains(&key.as_str()) {
            shown.append(key, "xxx");
        } else {
            shown.append(key, value);
        }
    }
    shown
}

/// [`not_authorized`] for the request `body` of `command`, printed as mongod prints it
/// (`{ find: "c", $db: "test" }`, the OP_MSG body mongod received) with its sensitive fields
/// (`pwd`) replaced by "xxx".
pub fn unauthorized(command: &str, db: &str, body: &RawDocument) -> CommandError {
    let shown = redacted(command, body);
    not_authorized(
        db,
        &crate::query::display::value(RawBsonRef::Document(&shown)),
    )
}

/// Whether `listDatabases` lists only the databases the caller may act on (mongod's
/// `authorizedDatabases`): by default, when it lacks `listDatabases` on the cluster; asked for
/// all of them (`authorizedDatabases: false`) without that privilege, it answers
/// `Unauthorized` "Insufficient permissions to list all databases". A database is then listed
/// when [`PrivilegeSet::any_action_in_db`] holds for it.
pub fn list_databases_filtered(
    body: &RawDocument,
    privileges: &PrivilegeSet,
) -> Result<bool, CommandError> {
    let may_list_all = privileges.allows_action(ActionType::ListDatabases, &Resource::Cluster);
    match body.get("authorizedDatabases") {
        Ok(Some(v)) if !matches!(v, RawBsonRef::Null | RawBsonRef::Undefined) => {
            let asked = crate::query::true_value(v);
            if !asked && !may_list_all {
                return Err(CommandError::new(
                    ErrorCode::Unauthorized,
                    "Insufficient permissions to list all databases",
                ));
            }
            Ok(asked)
        }
        _ => Ok(!may_list_all),
    }
}

/// mongod's `Unauthorized` for a `getMore` on a cursor another user opened.
pub fn cursor_not_owned(cursor_id: i64) -> CommandError {
    CommandError::new(
        ErrorCode::Unauthorized,
        format!("cursor id {cursor_id} was not created by the authenticated user"),
    )
}

/// mongod's `Unauthorized` for a `getMore` whose caller lost the privileges the cursor needs.
pub fn get_more_not_authorized(cursor_id: i64) -> CommandError {
    CommandError::new(
        ErrorCode::Unauthorized,
        format!("not authorized for getMore with cursor id {cursor_id}"),
    )
}

mod commands;
pub use commands::{OPEN_COMMANDS, required};

/// The resource a privilege document's `resource` names: `{cluster: true}`,
/// `{anyResource: true}`, `{db, collection}` or `{db, system_buckets}`.
pub fn parse_resource(doc: &RawDocument) -> Result<Resource, CommandError> {
    let bad = |msg: &str| CommandError::new(ErrorCode::BadValue, msg.to_owned());
    if doc.get("cluster").ok().flatten().is_some() {
        return if matches!(doc.get("cluster"), Ok(Some(RawBsonRef::Boolean(true))))
            && doc.iter().count() == 1
        {
            Ok(Resource::Cluster)
        } else {
            Err(bad("resource: {cluster: true} must be alone"))
        };
    }
    if doc.get("anyResource").ok().flatten().is_some() {
        return if matches!(doc.get("anyResource"), Ok(Some(RawBsonRef::Boolean(true))))
            && doc.iter().count() == 1
        {
            Ok(Resource::AnyResource)
        } else {
            Err(bad("resource: {anyResource: true} must be alone"))
        };
    }
    let Ok(Some(RawBsonRef::String(db))) = doc.get("db") else {
        return Err(bad("resource must name a db"));
    };
    if let Ok(Some(RawBsonRef::String(buckets))) = doc.get("system_buckets") {
        return Ok(match (db.is_empty(), buckets.is_empty()) {
            (true, true) => Resource::AnySystemBuckets,
            (true, false) => Resource::SystemBucketsInAnyDatabase(buckets.to_owned()),
            (false, true) => Resource::SystemBucketsInDatabase(db.to_owned()),
            (false, false) => Resource::SystemBuckets {
                db: db.to_owned(),
                collection: buckets.to_owned(),
            },
        });
    }
    match doc.get("collection") {
        Ok(Some(RawBsonRef::String(c))) => Ok(Resource::from_db_collection(db, c)),
        _ => Err(bad("resource must name a collection")),
    }
}

/// A privilege document `{resource, actions}` (as `createRole` takes them). An action name
/// mongod does not know is refused, as mongod refuses it.
pub fn parse_privilege(doc: &RawDocument) -> Result<Privilege, CommandError> {
    let resource = match doc.get_document("resource") {
        Ok(r) => parse_resource(r)?,
        Err(_) => {
            return Err(CommandError::new(
                ErrorCode::Location(40414),
                "BSON field 'resource' is missing but a required field",
            ));
        }
    };
    let Ok(actions) = doc.get_array("actions") else {
        return Err(CommandError::new(
            ErrorCode::Location(40414),
            "BSON field 'actions' is missing but a required field",
        ));
    };
    let mut set = ActionSet::EMPTY;
    for action in actions {
        match action {
            Ok(RawBsonRef::String(name)) => match ActionType::from_name(name) {
                Some(a) => set.add(a),
                None => {
                    return Err(CommandError::new(
                        ErrorCode::FailedToParse,
                        format!("Unrecognized action privilege string: {name}"),
                    ));
                }
            },
            _ => {
                return Err(CommandError::type_mismatch(
                    "privilege actions must be strings",
                ));
            }
        }
    }
    Ok(Privilege {
        resource,
        actions: set,
    })
}

#[cfg(test)]
mod tests;
