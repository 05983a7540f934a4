//! Command handlers, one module per family, and the table that routes to them.
//!
//! The table is the single list of what Ebb implements: routing, `listCommands` and the admin-only
//! check all read it. A name not in it answers `CommandNotFound`.

mod admin;
mod aggregate;
mod args;
mod auth;
mod change_stream;
pub mod cluster_time;
mod collection;
mod explain;
mod fields;
mod generic;
mod handshake;
mod index;
mod oplog_collection;
mod read;
mod repl;
mod roles;
mod sessions;
mod spec;
mod transactions;
mod users;
mod validate;
mod views;
mod write;
pub use write::every_statement_refused;
mod x509;

use crate::dispatch::{ConnCtx, Request};
use crate::error::{CommandError, CommandResult, ErrorCode};
use crate::state::ServerState;
use generic::ReadConcerns;
use views::OnView;

pub use args::type_name;

/// What a table entry runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cmd {
    Hello,
    IsMaster,
    Ping,
    BuildInfo,
    GetParameter,
    GetCmdLineOpts,
    HostInfo,
    WhatsMyUri,
    ConnectionStatus,
    GetLog,
    ListCommands,
    ServerStatus,
    Shutdown,
    EndSessions,
    StartSession,
    RefreshSessions,
    KillSessions,
    KillAllSessions,
    KillAllSessionsByPattern,
    KillCursors,
    ListDatabases,
    Create,
    Drop,
    DropDatabase,
    ListCollections,
    RenameCollection,
    CollStats,
    Compact,
    DbStats,
    Insert,
    Update,
    Delete,
    FindAndModify,
    Find,
    GetMore,
    Count,
    Distinct,
    Aggregate,
    Explain,
    AdvanceClock,
    ConfigureFailPoint,
    CreateIndexes,
    ListIndexes,
    DropIndexes,
    CollMod,
    Validate,
    ReplSetInitiate,
    ReplSetGetStatus,
    ReplSetGetConfig,
    ReplSetResizeOplog,
    RotateCertificates,
    CommitTransaction,
    AbortTransaction,
    SaslStart,
    SaslContinue,
    Logout,
    CreateUser,
    UpdateUser,
    DropUser,
    DropAllUsersFromDatabase,
    UsersInfo,
    GrantRolesToUser,
    RevokeRolesFromUser,
    CreateRole,
    UpdateRole,
    DropRole,
    DropAllRolesFromDatabase,
    RolesInfo,
    GrantPrivilegesToRole,
    RevokePrivilegesFromRole,
    GrantRolesToRole,
    RevokeRolesFromRole,
    Authenticate,
    CustomAction,
    GetLastRequestStatistics,
}

/// One implemented command name, and everything the server declares about it: routing, the
/// fields it accepts ([`spec::Args`]), which generic arguments apply, and what `listCommands`
/// reports.
#[derive(Debug)]
#[expect(
    clippy::struct_excessive_bools,
    reason = "one flag per listCommands field, as mongod's Command declares them"
)]
pub struct CommandSpec {
    /// The name as clients send it (aliases have entries of their own).
    pub name: &'static str,
    cmd: Cmd,
    /// Whether it may only run against the `admin` database.
    pub admin_only: bool,
    /// `listCommands` help text.
    pub help: &'static str,
    /// Whether it runs on a secondary without the client opting in (mongod's `kAlways`).
    pub secondary_ok: bool,
    /// Whether it needs an authenticated user once authentication exists.
    pub requires_auth: bool,
    /// Whether it belongs to Stable API version 1.
    pub api_v1: bool,
    /// Which read concerns it takes.
    pub read_concerns: ReadConcerns,
    /// Whether it takes a write concern.
    pub write_concern: bool,
    /// Its own fields.
    pub args: &'static spec::Args,
    /// What it does when the namespace it names is a view.
    on_view: OnView,
}

impl CommandSpec {
    /// Whether this server answers the command (test-only commands need
    /// `--enable-test-commands`).
    pub fn available(&self, state: &ServerState) -> bool {
        match self.cmd {
            Cmd::AdvanceClock | Cmd::ConfigureFailPoint => state.config.enable_test_commands,
            // Cosmos DB's extension commands: outside the profile, unknown as on mongod.
            Cmd::CustomAction | Cmd::GetLastRequestStatistics => state.cosmos.is_some(),
            _ => true,
        }
    }

    /// Whether `other` is this command under another name (mongod's aliases: `hello` and
    /// `isMaster`, `findAndModify` and `findandmodify`…), as `failCommand` matches names.
    fn same_command(&self, other: &CommandSpec) -> bool {
        let group = |c: Cmd| if c == Cmd::IsMaster { Cmd::Hello } else { c };
        group(self.cmd) == group(other.cmd)
    }

    /// The generic arguments it accepts, as [`generic::check`] reads them.
    fn accepts(&self) -> generic::Accepts {
        generic::Accepts {
            name: self.name,
            api_v1: self.api_v1,
            read_concerns: self.read_concerns,
            write_concern: self.write_concern,
            replset: false,
        }
    }

    /// An administrative or diagnostic command: any member, only the default read concern,
    /// no write concern, not in the Stable API.
    const fn other(
        name: &'static str,
        cmd: Cmd,
        args: &'static spec::Args,
        help: &'static str,
    ) -> Self {
        CommandSpec {
            name,
            cmd,
            admin_only: false,
            help,
            secondary_ok: true,
            requires_auth: true,
            api_v1: false,
            read_concerns: ReadConcerns::LocalOnly,
            write_concern: false,
            args,
            on_view: OnView::Own,
        }
    }

    /// A read of user data: every read concern, no write concern, secondaries only when the
    /// client allows it.
    const fn read(
        name: &'static str,
        cmd: Cmd,
        args: &'static spec::Args,
        help: &'static str,
    ) -> Self {
        CommandSpec {
            secondary_ok: false,
            read_concerns: ReadConcerns::All,
            ..Self::other(name, cmd, args, help)
        }
    }

    /// A change to data or metadata: primaries only, a write concern, only the default read
    /// concern outside transactions.
    const fn write(
        name: &'static str,
        cmd: Cmd,
        args: &'static spec::Args,
        help: &'static str,
    ) -> Self {
        CommandSpec {
            secondary_ok: false,
            write_concern: true,
            ..Self::other(name, cmd, args, help)
        }
    }

    /// Only on the `admin` database.
    const fn admin(self) -> Self {
        CommandSpec {
            admin_only: true,
            ..self
        }
    }

    /// In Stable API version 1.
    const fn v1(self) -> Self {
        CommandSpec {
            api_v1: true,
            ..self
        }
    }

    /// Allowed before authentication.
    const fn no_auth(self) -> Self {
        CommandSpec {
            requires_auth: false,
            ..self
        }
    }

    /// What it does on a view (the default: its handler deals with views).
    const fn on_view(self, on_view: OnView) -> Self {
        CommandSpec { on_view, ..self }
    }
}

use CommandSpec as C;

/// Every command Ebb answers.
pub static COMMANDS: &[CommandSpec] = &[
    C::read(
        "aggregate",
        Cmd::Aggregate,
        &fields::AGGREGATE,
        "Runs the aggregation command. See http://dochub.mongodb.org/core/aggregation for more details.",
    )
    .v1(),
    C::write(
        "abortTransaction",
        Cmd::AbortTransaction,
        &fields::ABORT_TRANSACTION,
        "Aborts a transaction",
    )
    .admin()
    .v1(),
    C::other(
        "authenticate",
        Cmd::Authenticate,
        &fields::AUTHENTICATE,
        "Begin a X509 based authentication session",
    )
    .v1()
    .no_auth(),
    C::other("buildInfo", Cmd::BuildInfo, &spec::Args::LOOSE, "get version #, etc.").no_auth(),
    C::other(
        "buildinfo",
        Cmd::BuildInfo,
        &spec::Args::LOOSE,
        "get version #, etc. (alias of buildInfo)",
    )
    .no_auth(),
    C::write(
        "commitTransaction",
        Cmd::CommitTransaction,
        &fields::COMMIT_TRANSACTION,
        "Commits a transaction",
    )
    .admin()
    .v1(),
    C::write(
        "collMod",
        Cmd::CollMod,
        &fields::COLL_MOD,
        "Sets collection options, such as an index's expireAfterSeconds",
    )
    .v1(),
    C::read(
        "collStats",
        Cmd::CollStats,
        &spec::Args::LOOSE,
        "{ collStats:\"blog.posts\" , scale : 1 } scale divides sizes e.g. for KB use 1024",
    )
    .on_view(OnView::Refuse),
    C::other(
        "compact",
        Cmd::Compact,
        &fields::COMPACT,
        "compact collection: rewrites the storage holding it, dropping deleted and expired data",
    )
    .on_view(OnView::Refuse),
    C::other(
        "configureFailPoint",
        Cmd::ConfigureFailPoint,
        &spec::Args::LOOSE,
        "modifies the settings of a fail point",
    )
    .admin()
    .no_auth(),
    C::other(
        "connectionStatus",
        Cmd::ConnectionStatus,
        &fields::CONNECTION_STATUS,
        "Returns connection-specific information such as logged-in users and their roles",
    )
    .no_auth(),
    C::read("count", Cmd::Count, &fields::COUNT, "count objects in collection")
        .v1()
        .on_view(OnView::Aggregate),
    C::write("create", Cmd::Create, &fields::CREATE, "explicitly creates a collection").v1(),
    C::write(
        "createRole",
        Cmd::CreateRole,
        &fields::CREATE_ROLE,
        "no help defined",
    ),
    C::write(
        "createUser",
        Cmd::CreateUser,
        &fields::CREATE_USER,
        "no help defined",
    ),
    C::write(
        "createIndexes",
        Cmd::CreateIndexes,
        &fields::CREATE_INDEXES,
        "Create indexes on a collection",
    )
    .v1()
    .on_view(OnView::Refuse),
    // Cosmos DB's extension commands (`--profile cosmos` only; see `CommandSpec::available`).
    C::write(
        "customAction",
        Cmd::CustomAction,
        &spec::Args::LOOSE,
        "Azure Cosmos DB extension commands: create, update and get databases and collections \
         with their provisioned throughput",
    ),
    C::read("dbStats", Cmd::DbStats, &spec::Args::LOOSE, "Get stats on a database."),
    C::read("dbstats", Cmd::DbStats, &spec::Args::LOOSE, "Get stats on a database."),
    C::write("delete", Cmd::Delete, &fields::DELETE, "delete documents")
        .v1()
        .on_view(OnView::RefuseStatements("deletes")),
    C::read(
        "distinct",
        Cmd::Distinct,
        &fields::DISTINCT,
        "{ distinct : 'collection name' , key : 'a.b' , query : {} }",
    )
    .on_view(OnView::Aggregate),
    C::other("explain", Cmd::Explain, &fields::EXPLAIN, "explain database reads and writes").v1(),
    C::write(
        "dropIndexes",
        Cmd::DropIndexes,
        &fields::DROP_INDEXES,
        "drop indexes for a collection",
    )
    .v1()
    .on_view(OnView::Refuse),
    C::write("drop", Cmd::Drop, &fields::DROP, "drop a collection").v1(),
    C::write(
        "dropDatabase",
        Cmd::DropDatabase,
        &fields::NONE,
        "drop (delete) this database",
    )
    .v1(),
    C::write(
        "dropAllRolesFromDatabase",
        Cmd::DropAllRolesFromDatabase,
        &fields::DROP_ALL_ROLES_FROM_DATABASE,
        "no help defined",
    ),
    C::write(
        "dropAllUsersFromDatabase",
        Cmd::DropAllUsersFromDatabase,
        &fields::DROP_ALL_USERS_FROM_DATABASE,
        "no help defined",
    ),
    C::write(
        "dropRole",
        Cmd::DropRole,
        &fields::DROP_ROLE,
        "no help defined",
    ),
    C::write(
        "dropUser",
        Cmd::DropUser,
        &fields::DROP_USER,
        "no help defined",
    ),
    C::other(
        "ebbAdvanceClock",
        Cmd::AdvanceClock,
        &spec::Args::LOOSE,
        "test only: move the server's clock forward by the given milliseconds",
    )
    .admin(),
    C::other(
        "endSessions",
        Cmd::EndSessions,
        &fields::NONE,
        "end a set of logical sessions",
    )
    .v1(),
    C::read("find", Cmd::Find, &fields::FIND, "query for documents")
        .v1()
        .on_view(OnView::Aggregate),
    C::write(
        "findAndModify",
        Cmd::FindAndModify,
        &fields::FIND_AND_MODIFY,
        "{ findAndModify: \"collection\", query: {processed:false}, update: {$set: {processed:true}}, new: true}",
    )
    .v1()
    .on_view(OnView::Refuse),
    C::write(
        "findandmodify",
        Cmd::FindAndModify,
        &fields::FIND_AND_MODIFY,
        "alias of findAndModify",
    )
    .v1()
    .on_view(OnView::Refuse),
    C::other("getCmdLineOpts", Cmd::GetCmdLineOpts, &fields::NONE, "get argv").admin(),
    C::other(
        "getLastRequestStatistics",
        Cmd::GetLastRequestStatistics,
        &spec::Args::LOOSE,
        "Azure Cosmos DB: the request charge and duration of the connection's last command",
    ),
    C::other(
        "getLog",
        Cmd::GetLog,
        &fields::NONE,
        "{ getLog : '*' }  OR { getLog : 'startupWarnings' }",
    )
    .admin(),
    C::other(
        "getMore",
        Cmd::GetMore,
        &fields::GET_MORE,
        "retrieve more results from an existing cursor",
    )
    .v1(),
    C::other(
        "getParameter",
        Cmd::GetParameter,
        &spec::Args::LOOSE,
        "get administrative option(s)",
    )
    .admin(),
    C::write(
        "grantPrivilegesToRole",
        Cmd::GrantPrivilegesToRole,
        &fields::GRANT_PRIVILEGES_TO_ROLE,
        "no help defined",
    ),
    C::write(
        "grantRolesToRole",
        Cmd::GrantRolesToRole,
        &fields::GRANT_ROLES_TO_ROLE,
        "no help defined",
    ),
    C::write(
        "grantRolesToUser",
        Cmd::GrantRolesToUser,
        &fields::GRANT_ROLES_TO_USER,
        "no help defined",
    ),
    C::other(
        "hello",
        Cmd::Hello,
        &fields::HELLO,
        "Check if this server is primary for a replica set",
    )
    .v1()
    .no_auth(),
    C::other(
        "hostInfo",
        Cmd::HostInfo,
        &fields::NONE,
        "returns information about the daemon's host",
    ),
    C::write("insert", Cmd::Insert, &fields::INSERT, "insert documents")
        .v1()
        .on_view(OnView::RefuseStatements("documents")),
    C::other(
        "isMaster",
        Cmd::IsMaster,
        &fields::HELLO,
        "Check if this server is primary for a replica set (deprecated alias of hello)",
    )
    .no_auth(),
    C::other(
        "ismaster",
        Cmd::IsMaster,
        &fields::HELLO,
        "Check if this server is primary for a replica set (deprecated alias of hello)",
    )
    .no_auth(),
    C::other(
        "killAllSessions",
        Cmd::KillAllSessions,
        &spec::Args::LOOSE,
        "kill all logical sessions, for either all users or a specific set of users",
    ),
    C::other(
        "killAllSessionsByPattern",
        Cmd::KillAllSessionsByPattern,
        &spec::Args::LOOSE,
        "kill logical sessions by pattern",
    ),
    C::other(
        "killCursors",
        Cmd::KillCursors,
        &fields::KILL_CURSORS,
        "Kill a list of cursor ids",
    )
    .v1(),
    C::other(
        "killSessions",
        Cmd::KillSessions,
        &spec::Args::LOOSE,
        "kill a logical session and its operations",
    ),
    C::read(
        "listCollections",
        Cmd::ListCollections,
        &fields::LIST_COLLECTIONS,
        "list collections for this db",
    )
    .v1(),
    C::other(
        "listCommands",
        Cmd::ListCommands,
        &spec::Args::LOOSE,
        "get a list of all db commands",
    )
    .no_auth(),
    C::read(
        "listIndexes",
        Cmd::ListIndexes,
        &fields::LIST_INDEXES,
        "list indexes for a collection",
    )
    .v1()
    .on_view(OnView::Refuse),
    C::read(
        "listDatabases",
        Cmd::ListDatabases,
        &fields::LIST_DATABASES,
        "{ listDatabases:1, [filter: <filterObject>] [, nameOnly: true ] }",
    )
    .admin()
    .v1(),
    C::other(
        "logout",
        Cmd::Logout,
        &spec::Args::LOOSE,
        "de-authenticate",
    )
    .no_auth(),
    C::other(
        "ping",
        Cmd::Ping,
        &fields::NONE,
        "a way to check that the server is alive. responds immediately even if server is in a db lock.",
    )
    .v1()
    .no_auth(),
    C::other(
        "refreshSessions",
        Cmd::RefreshSessions,
        &spec::Args::LOOSE,
        "renew a set of logical sessions",
    )
    .v1(),
    C::write(
        "renameCollection",
        Cmd::RenameCollection,
        &fields::RENAME_COLLECTION,
        " example: { renameCollection: foo.a, to: bar.b }",
    )
    .admin(),
    C::other(
        "replSetGetConfig",
        Cmd::ReplSetGetConfig,
        &spec::Args::LOOSE,
        "Returns the current replica set configuration{ replSetGetConfig : 1 }\nhttp://dochub.mongodb.org/core/replicasetcommands",
    )
    .admin(),
    C::other(
        "replSetGetStatus",
        Cmd::ReplSetGetStatus,
        &spec::Args::LOOSE,
        "Report status of a replica set from the POV of this server\n{ replSetGetStatus : 1 }\nhttp://dochub.mongodb.org/core/replicasetcommands",
    )
    .admin(),
    C::other(
        "replSetResizeOplog",
        Cmd::ReplSetResizeOplog,
        &spec::Args::LOOSE,
        "resize oplog size in MB",
    )
    .admin(),
    C::other(
        "replSetInitiate",
        Cmd::ReplSetInitiate,
        &spec::Args::LOOSE,
        "Initiate/christen a replica set.\nhttp://dochub.mongodb.org/core/replicasetcommands",
    )
    .admin(),
    C::write(
        "revokePrivilegesFromRole",
        Cmd::RevokePrivilegesFromRole,
        &fields::REVOKE_PRIVILEGES_FROM_ROLE,
        "no help defined",
    ),
    C::write(
        "revokeRolesFromRole",
        Cmd::RevokeRolesFromRole,
        &fields::REVOKE_ROLES_FROM_ROLE,
        "no help defined",
    ),
    C::write(
        "revokeRolesFromUser",
        Cmd::RevokeRolesFromUser,
        &fields::REVOKE_ROLES_FROM_USER,
        "no help defined",
    ),
    // Secondaries answer it when the client allows (mongod's `kOptIn`).
    CommandSpec {
        secondary_ok: false,
        ..C::other("rolesInfo", Cmd::RolesInfo, &fields::ROLES_INFO, "no help defined")
    },
    C::other(
        "rotateCertificates",
        Cmd::RotateCertificates,
        &fields::ROTATE_CERTIFICATES,
        "Rotate certificates for new SSL connections",
    )
    .admin(),
    C::other(
        "saslContinue",
        Cmd::SaslContinue,
        &fields::SASL_CONTINUE,
        "Subsequent steps in a SASL authentication conversation.",
    )
    .no_auth(),
    C::other(
        "saslStart",
        Cmd::SaslStart,
        &fields::SASL_START,
        "First step in a SASL authentication conversation.",
    )
    .no_auth(),
    C::other(
        "serverStatus",
        Cmd::ServerStatus,
        &spec::Args::LOOSE,
        "returns lots of administrative server statistics",
    ),
    C::other(
        "shutdown",
        Cmd::Shutdown,
        &fields::SHUTDOWN,
        "shutdown the database.  must be ran against admin db and either (1) ran from localhost or (2) authenticated.",
    )
    .admin(),
    C::other(
        "startSession",
        Cmd::StartSession,
        &spec::Args::LOOSE,
        "start a logical session",
    ),
    C::write("update", Cmd::Update, &fields::UPDATE, "update documents")
        .v1()
        .on_view(OnView::RefuseStatements("updates")),
    C::write(
        "updateRole",
        Cmd::UpdateRole,
        &fields::UPDATE_ROLE,
        "no help defined",
    ),
    C::write(
        "updateUser",
        Cmd::UpdateUser,
        &fields::UPDATE_USER,
        "no help defined",
    ),
    // Secondaries answer it when the client allows (mongod's `kOptIn`).
    CommandSpec {
        secondary_ok: false,
        ..C::other("usersInfo", Cmd::UsersInfo, &fields::USERS_INFO, "no help defined")
    },
    C::other(
        "validate",
        Cmd::Validate,
        &spec::Args::LOOSE,
        "Validate contents of a namespace by scanning its data structures for correctness.",
    )
    .on_view(OnView::Refuse),
    C::other("whatsmyuri", Cmd::WhatsMyUri, &spec::Args::LOOSE, "{whatsmyuri:1}"),
];

/// The table row of `name`, if Ebb implements it.
pub fn lookup(name: &str) -> Option<&'static CommandSpec> {
    COMMANDS.iter().find(|c| c.name == name)
}

/// A command document as its handler reads it, once [`check_request`] passed it.
#[derive(Debug)]
pub struct Checked {
    /// The body the handler should read: `None` when it is the request's own, or a copy
    /// without the typed fields given as null (which read as absent).
    pub body: Option<bson::RawDocumentBuf>,
    /// What the generic arguments ask of the run.
    pub limits: generic::Limits,
}

/// Checks a command document against its row: its own fields ([`spec::check`]), then the
/// generic arguments ([`generic::check`]), as a replica set member reads them when `replset`.
pub fn check_request(
    spec: &CommandSpec,
    body: &bson::RawDocument,
    sequences: &[&str],
    replset: bool,
) -> CommandResult<Checked> {
    let nulls = spec::check(spec.args, spec.name, body, sequences)?;
    // Every aggregation takes a write concern, one that only reads without waiting for it, but
    // not with `explain` (mongod's aggregation request parser); one that writes ($out, $merge)
    // refuses the `linearizable` read concern (the stages' `supportsReadConcern`).
    let aggregate = spec.cmd == Cmd::Aggregate;
    let writing_stage = aggregate.then(|| writing_stage(body)).flatten();
    if aggregate
        && body.get("writeConcern").ok().flatten().is_some()
        && body
            .get("explain")
            .ok()
            .flatten()
            .is_some_and(|e| e.as_bool() == Some(true))
    {
        return Err(CommandError::new(
            ErrorCode::FailedToParse,
            "Aggregation explain does not support the'writeConcern' option",
        ));
    }
    let accepts = generic::Accepts {
        replset,
        write_concern: spec.write_concern || aggregate,
        ..spec.accepts()
    };
    if let Some(stage) = writing_stage
        && let Ok(Some(bson::RawBsonRef::Document(rc))) = body.get("readConcern")
        && let Ok(Some(bson::RawBsonRef::String("linearizable"))) = rc.get("level")
    {
        return Err(CommandError::new(
            ErrorCode::InvalidOptions,
            format!("{stage} cannot be used with a 'linearizable' read concern level"),
        ));
    }
    let mut limits = generic::check(&accepts, body)?;
    if aggregate && writing_stage.is_none() {
        // An aggregation that only reads never waits for its write concern.
        limits.write_concern_error = None;
    }
    let body = if nulls {
        Some(spec::without_nulls(spec.args, body)?)
    } else {
        None
    };
    Ok(Checked { body, limits })
}

/// Whether a command that runs out of `maxTimeMS` may be answered at once, its work abandoned
/// wherever it is: reads, which write nothing and have no cursor until they reply. Other
/// commands stop at their safe points ([`crate::interrupt`]).
fn abandonable(spec: &CommandSpec, body: &bson::RawDocument) -> bool {
    match spec.cmd {
        Cmd::Find | Cmd::Count | Cmd::Distinct | Cmd::ListCollections | Cmd::ListIndexes => true,
        Cmd::Aggregate => !pipeline_writes(body),
        _ => false,
    }
}

/// A size limit as the `int32` that replies carry.
pub(crate) fn limit_i32(n: usize) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

/// Runs `req`.
pub async fn run(req: &Request<'_>, ctx: &mut ConnCtx, state: &ServerState) -> CommandResult {
    let Some(spec) = lookup(req.name).filter(|c| c.available(state)) else {
        return Err(CommandError::command_not_found(req.name));
    };
    if spec.admin_only && req.db != "admin" {
        return Err(CommandError::new(
            ErrorCode::Unauthorized,
            format!("{} may only be run against the admin database.", req.name),
        ));
    }
    if state.config.auth {
        let rule = authorize(req, ctx, state)?;
        let stamp = crate::auth::session::Stamp::new(&ctx.auth, &state.auth, rule);
        return Box::pin(crate::auth::session::with_stamp(
            stamp,
            run_authorized(spec, req, ctx, state),
        ))
        .await;
    }
    run_authorized(spec, req, ctx, state).await
}

/// With access control on, whether the connection may run the request (mongod's
/// `checkAuthorization`, after the command is found and before its arguments are read):
/// the rule it was checked against, which cursors it opens keep.
fn authorize(
    req: &Request<'_>,
    ctx: &mut ConnCtx,
    state: &ServerState,
) -> Result<crate::auth::privileges::Rule, CommandError> {
    ctx.auth.refresh(&state.auth);
    let ids: Vec<i64> = match req.name {
        "getMore" => match req.body.get("getMore") {
            Ok(Some(bson::RawBsonRef::Int64(id))) => vec![id],
            _ => Vec::new(),
        },
        "killCursors" => match req.body.get_array("cursors") {
            Ok(list) => list
                .into_iter()
                .filter_map(|v| match v {
                    Ok(bson::RawBsonRef::Int64(id)) => Some(id),
                    _ => None,
                })
                .collect(),
            Err(_) => Vec::new(),
        },
        _ => Vec::new(),
    };
    let cursors = if ids.is_empty() {
        Vec::new()
    } else {
        state.cursors.auth_of(&ids)
    };
    crate::auth::session::authorize(&ctx.auth, &state.auth, req.name, req.db, req.body, &cursors)
}

/// The reply of a command that changed users or roles, once the change is durable (as its
/// write concern asks: by default, before the reply, so that a user created survives a
/// `kill -9` right after).
async fn durable_auth_change(
    req: &Request<'_>,
    state: &ServerState,
    result: CommandResult,
) -> CommandResult {
    let reply = result?;
    args::WriteConcern::parse(req)?
        .wait(state, state.auth.last_ticket())
        .await?;
    Ok(reply)
}

/// [`run`] once the caller is authorized.
async fn run_authorized(
    spec: &'static CommandSpec,
    req: &Request<'_>,
    ctx: &mut ConnCtx,
    state: &ServerState,
) -> CommandResult {
    let mut names = [""; 4];
    for (slot, seq) in names.iter_mut().zip(req.sequences) {
        *slot = seq.identifier.as_str();
    }
    let checked = check_request(
        spec,
        req.body,
        &names[..req.sequences.len().min(4)],
        state.replset.is_some(),
    )?;
    let last_write = state.replset.as_ref().map(|rs| rs.clock.last_write().0);
    if let Some(rs) = &state.replset {
        cluster_time::check_read_times(rs, &checked.limits)?;
    }
    let write_concern_error = checked.limits.write_concern_error.clone();
    let result = match last_write {
        // A read at the snapshot level (outside transactions) reads at a cluster time: the
        // one it names, or the last write's, which its reply gives.
        Some(last_write) if checked.limits.snapshot && !checked.limits.transaction => {
            let take = || state.catalog.snapshot();
            let (at, snapshot) = match checked.limits.at_cluster_time {
                Some(at) => (at, state.history.at(at, last_write, take)?),
                None => (last_write, state.history.now(last_write, take)),
            };
            Box::pin(crate::txn::read_at(
                snapshot,
                run_checked(spec, req, &checked, ctx, state),
            ))
            .await
            .map(|reply| cluster_time::with_at_cluster_time(&reply, at))
        }
        _ => run_checked(spec, req, &checked, ctx, state).await,
    };
    match (result, write_concern_error) {
        (Ok(reply), Some(wce)) => Ok(cluster_time::with_write_concern_error(&reply, wce)),
        (result, _) => result,
    }
}

/// Runs a request whose arguments [`check_request`] passed, within its `maxTimeMS`.
async fn run_checked(
    spec: &'static CommandSpec,
    req: &Request<'_>,
    checked: &Checked,
    ctx: &mut ConnCtx,
    state: &ServerState,
) -> CommandResult {
    let stripped_req;
    let req = match &checked.body {
        None => req,
        Some(body) => {
            stripped_req = Request { body, ..*req };
            &stripped_req
        }
    };
    // Where mongod evaluates `failCommand`: once the command parsed, before anything else. The
    // time it blocks counts against `maxTimeMS`, whose deadline runs from here.
    let started = std::time::Instant::now();
    if state.failpoints.active() {
        let app = app_name(ctx, req);
        let is_alias = |name: &str| lookup(name).is_some_and(|other| spec.same_command(other));
        let target = failpoint_target(
            spec,
            req,
            ctx.id,
            app.as_deref(),
            &is_alias,
            is_change_stream_request(req),
        );
        match state
            .failpoints
            .before_command(&target, &state.shutdown)
            .await
        {
            crate::failpoint::Before::Run => {}
            crate::failpoint::Before::Reply(reply) => return Ok(reply),
            crate::failpoint::Before::Close => {
                // No reply; the connection closes (see `server::connection`).
                ctx.closing = true;
                return Ok(bson::RawDocumentBuf::new());
            }
        }
    }
    let result = if state.failpoints.active() {
        // A fail point that fires inside the command may ask to close the connection rather
        // than reply (`onPrimaryTransactionalWrite`).
        let (result, close) = crate::failpoint::CLOSE_AFTER
            .scope(std::cell::Cell::new(false), async {
                let result = run_in_session(spec, req, ctx, state, checked, started).await;
                (
                    result,
                    crate::failpoint::CLOSE_AFTER.with(std::cell::Cell::get),
                )
            })
            .await;
        if close {
            ctx.closing = true;
            return Ok(bson::RawDocumentBuf::new());
        }
        result
    } else {
        run_in_session(spec, req, ctx, state, checked, started).await
    };
    // Where mongod waits for the write concern, `failCommand` may answer a
    // `writeConcernError` instead.
    if spec.write_concern && state.failpoints.active() {
        let app = app_name(ctx, req);
        let is_alias = |name: &str| lookup(name).is_some_and(|other| spec.same_command(other));
        let target = failpoint_target(
            spec,
            req,
            ctx.id,
            app.as_deref(),
            &is_alias,
            is_change_stream_request(req),
        );
        return state.failpoints.after_command(&target, result);
    }
    result
}

/// The connection's `client.application.name`, from its handshake. The handshake's own
/// `hello` already counts as named, as mongod reads the metadata before evaluating fail points.
fn app_name(ctx: &ConnCtx, req: &Request<'_>) -> Option<String> {
    let meta = match &ctx.client_metadata {
        Some(meta) => meta.as_ref(),
        None if matches!(req.name, "hello" | "isMaster" | "ismaster") => {
            req.body.get_document("client").ok()?
        }
        None => return None,
    };
    let app = meta.get_document("application").ok()?;
    app.get_str("name").ok().map(str::to_owned)
}

/// Whether `req` is a change stream's `aggregate` (whose errors may get the
/// `ResumableChangeStreamError` label). A `getMore`'s errors get it only once its cursor is
/// checked out (mongod's label builder looks at the cursor): `read::get_more` adds it.
pub fn is_change_stream_request(req: &Request<'_>) -> bool {
    req.name == "aggregate" && change_stream::has_change_stream(req, false)
}

/// The command as `failCommand` sees it.
fn failpoint_target<'a>(
    spec: &'a CommandSpec,
    req: &'a Request<'a>,
    connection_id: i64,
    app_name: Option<&'a str>,
    is_alias: &'a (dyn Fn(&str) -> bool + Sync),
    change_stream: bool,
) -> crate::failpoint::Target<'a> {
    let collection = crate::top::classify(req.name, req.body)
        .map(|(_, coll)| coll)
        .or_else(|| match (spec.cmd, req.body.iter().next()) {
            (
                Cmd::Create | Cmd::Drop | Cmd::CollStats,
                Some(Ok((_, bson::RawBsonRef::String(coll)))),
            ) => Some(coll),
            _ => None,
        });
    crate::failpoint::Target {
        command: spec.name,
        is_alias,
        db: req.db,
        collection,
        app_name,
        connection_id,
        body: req.body,
        change_stream,
    }
}

/// Runs a checked request under its `maxTimeMS`, counted from `started`.
/// [`run_timed`], in the command's transaction when it runs in one (after `failCommand`:
/// a command it fails never started or went on with its transaction, as in mongod).
async fn run_in_session(
    spec: &CommandSpec,
    req: &Request<'_>,
    ctx: &mut ConnCtx,
    state: &ServerState,
    checked: &Checked,
    started: std::time::Instant,
) -> CommandResult {
    let max_time_ms = checked.limits.max_time_ms;
    if checked.limits.transaction {
        // (Boxed: a transaction's commands are the rarer path, and the future is large.)
        return Box::pin(transactions::run_in(
            req,
            state,
            Box::pin(run_timed(spec, req, ctx, state, max_time_ms, started)),
        ))
        .await;
    }
    run_timed(spec, req, ctx, state, max_time_ms, started).await
}

async fn run_timed(
    spec: &CommandSpec,
    req: &Request<'_>,
    ctx: &mut ConnCtx,
    state: &ServerState,
    max_time_ms: Option<u64>,
    started: std::time::Instant,
) -> CommandResult {
    let Some(ms) = max_time_ms else {
        return run_handler(spec, req, ctx, state).await;
    };
    let limit = std::time::Duration::from_millis(ms);
    // Time spent blocked by a fail point counts: past the deadline already, the command does
    // not start (mongod's interrupt check before running).
    if started.elapsed() >= limit {
        return Err(crate::interrupt::max_time_expired());
    }
    let deadline = started.checked_add(limit);
    let run = crate::interrupt::with_deadline(deadline, run_handler(spec, req, ctx, state));
    if abandonable(spec, req.body) {
        // A read also answers at its deadline when it is between safe points.
        tokio::time::timeout(limit.saturating_sub(started.elapsed()), run)
            .await
            .unwrap_or_else(|_| Err(crate::interrupt::max_time_expired()))
    } else {
        // Writes stop at their next safe point (between statements), never half-way.
        run.await
    }
}

/// Whether `req` is a command that may write (its table row takes a write concern, or an
/// `aggregate` ends in `$out`/`$merge`): its reply's `operationTime` is a new tick of the
/// cluster clock.
pub fn writes(name: &str, body: &bson::RawDocument) -> bool {
    lookup(name)
        .is_some_and(|s| s.write_concern || (s.cmd == Cmd::Aggregate && pipeline_writes(body)))
}

/// The stage of an `aggregate` pipeline that writes: `$out` or `$merge`, if it has one.
fn writing_stage(body: &bson::RawDocument) -> Option<&'static str> {
    let Ok(Some(bson::RawBsonRef::Array(stages))) = body.get("pipeline") else {
        return None;
    };
    stages.into_iter().find_map(|stage| match stage {
        Ok(bson::RawBsonRef::Document(d)) => match d.iter().next() {
            Some(Ok((k, _))) if k.as_str() == "$out" => Some("$out"),
            Some(Ok((k, _))) if k.as_str() == "$merge" => Some("$merge"),
            _ => None,
        },
        _ => None,
    })
}

/// Whether an `aggregate` pipeline ends in `$out` or `$merge`.
fn pipeline_writes(body: &bson::RawDocument) -> bool {
    writing_stage(body).is_some()
}

/// What a change to collections themselves (drop, rename, index changes, `collMod`) waits
/// for: the open transactions that wrote to them, which mongod's DDL waits for too (it needs
/// the collection's exclusive lock, which their writes hold until they end), within the
/// command's `maxTimeMS` (a transaction lives at most `transactionLifetimeLimitSeconds`).
async fn wait_for_transactions(
    spec: &CommandSpec,
    req: &Request<'_>,
    state: &ServerState,
) -> CommandResult<()> {
    // (In a transaction, DDL is its own: `createIndexes` and `create` on what it created.)
    if crate::txn::active().is_some() {
        return Ok(());
    }
    let named = |field: &str| match req.body.get(field) {
        Ok(Some(bson::RawBsonRef::String(name))) => Some(name),
        _ => None,
    };
    let targets: Vec<std::sync::Arc<crate::catalog::Collection>> = match spec.cmd {
        Cmd::Drop | Cmd::CreateIndexes | Cmd::DropIndexes | Cmd::CollMod => named(req.name)
            .and_then(|name| state.catalog.get(req.db, name))
            .into_iter()
            .collect(),
        Cmd::RenameCollection => named(req.name)
            .and_then(|ns| ns.split_once('.'))
            .and_then(|(db, name)| state.catalog.get(db, name))
            .into_iter()
            .collect(),
        Cmd::DropDatabase => state.catalog.collections(req.db),
        _ => return Ok(()),
    };
    while targets.iter().any(|c| {
        c.open_transactions
            .load(std::sync::atomic::Ordering::Acquire)
            > 0
    }) {
        state.check_interrupt()?;
        tokio::time::sleep(std::time::Duration::from_millis(2)).await;
    }
    Ok(())
}

/// Runs the handler of `spec` on a checked request.
async fn run_handler(
    spec: &CommandSpec,
    req: &Request<'_>,
    ctx: &mut ConnCtx,
    state: &ServerState,
) -> CommandResult {
    wait_for_transactions(spec, req, state).await?;
    // The one place where a command naming a view is refused or turned into an aggregation.
    if spec.on_view != OnView::Own
        && let Some(view) = views::named_view(req, state)
    {
        match spec.on_view {
            OnView::Own => {}
            OnView::Refuse if spec.cmd == Cmd::Validate => {
                return Err(CommandError::new(
                    ErrorCode::CommandNotSupportedOnView,
                    "Cannot validate a view",
                ));
            }
            OnView::Refuse => return Err(views::not_a_collection(req.db, view)),
            OnView::RefuseStatements(array) => {
                if let Some(reply) = views::refused_statements(req, array, view)? {
                    return Ok(reply);
                }
            }
            OnView::Aggregate => return views::run_as_aggregate(req, state, None).await,
        }
    }
    match spec.cmd {
        Cmd::Hello => handshake::hello(req, ctx, state, handshake::Flavor::Hello).await,
        Cmd::IsMaster => handshake::hello(req, ctx, state, handshake::Flavor::IsMaster).await,
        Cmd::Ping => Ok(bson::rawdoc! { "ok": 1.0 }),
        Cmd::BuildInfo => Ok(admin::build_info(state)),
        Cmd::GetParameter => admin::get_parameter(req, state),
        Cmd::GetCmdLineOpts => Ok(admin::get_cmd_line_opts(state)),
        Cmd::HostInfo => Ok(admin::host_info()),
        Cmd::WhatsMyUri => Ok(bson::rawdoc! { "you": ctx.peer.to_string(), "ok": 1.0 }),
        Cmd::ConnectionStatus => auth::connection_status(req, ctx, state),
        Cmd::SaslStart => auth::sasl_start(req, ctx, state),
        Cmd::SaslContinue => auth::sasl_continue(req, ctx, state),
        Cmd::Logout => Ok(auth::logout(ctx)),
        Cmd::CreateUser => durable_auth_change(req, state, users::create_user(req, state)).await,
        Cmd::UpdateUser => durable_auth_change(req, state, users::update_user(req, state)).await,
        Cmd::DropUser => durable_auth_change(req, state, users::drop_user(req, state)).await,
        Cmd::DropAllUsersFromDatabase => {
            durable_auth_change(req, state, users::drop_all_users_from_database(req, state)).await
        }
        Cmd::UsersInfo => users::users_info(req, state),
        Cmd::GrantRolesToUser => {
            durable_auth_change(req, state, users::change_user_roles(req, state, true)).await
        }
        Cmd::RevokeRolesFromUser => {
            durable_auth_change(req, state, users::change_user_roles(req, state, false)).await
        }
        Cmd::CreateRole => durable_auth_change(req, state, roles::create_role(req, state)).await,
        Cmd::UpdateRole => durable_auth_change(req, state, roles::update_role(req, state)).await,
        Cmd::DropRole => durable_auth_change(req, state, roles::drop_role(req, state)).await,
        Cmd::DropAllRolesFromDatabase => {
            durable_auth_change(req, state, roles::drop_all_roles_from_database(req, state)).await
        }
        Cmd::RolesInfo => roles::roles_info(req, state),
        Cmd::GrantPrivilegesToRole => {
            durable_auth_change(req, state, roles::change_role_privileges(req, state, true)).await
        }
        Cmd::RevokePrivilegesFromRole => {
            durable_auth_change(req, state, roles::change_role_privileges(req, state, false)).await
        }
        Cmd::GrantRolesToRole => {
            durable_auth_change(req, state, roles::change_role_roles(req, state, true)).await
        }
        Cmd::RevokeRolesFromRole => {
            durable_auth_change(req, state, roles::change_role_roles(req, state, false)).await
        }
        Cmd::Authenticate => x509::authenticate(req, ctx, state),
        Cmd::GetLog => admin::get_log(req, state),
        Cmd::ListCommands => Ok(admin::list_commands(state)),
        Cmd::ServerStatus => Ok(admin::server_status(state)),
        Cmd::Shutdown => admin::shutdown(req, ctx, state),
        Cmd::RotateCertificates => admin::rotate_certificates(req, state),
        Cmd::EndSessions => sessions::end_sessions(req, state),
        Cmd::CommitTransaction => transactions::commit(req, state).await,
        Cmd::AbortTransaction => transactions::abort(),
        Cmd::StartSession => Ok(sessions::start_session(state)),
        Cmd::RefreshSessions => sessions::refresh_sessions(req, state),
        Cmd::KillSessions => sessions::kill_sessions(req, state),
        Cmd::KillAllSessions => sessions::kill_all_sessions(req, state),
        Cmd::KillAllSessionsByPattern => sessions::kill_all_sessions_by_pattern(req, state),
        Cmd::KillCursors => read::kill_cursors(req, state),
        Cmd::ListDatabases => collection::list_databases(req, state).await,
        Cmd::Create => collection::create(req, state).await,
        Cmd::Drop => collection::drop(req, state).await,
        Cmd::DropDatabase => collection::drop_database(req, state).await,
        Cmd::ListCollections => collection::list_collections(req, state),
        Cmd::RenameCollection => collection::rename_collection(req, state).await,
        Cmd::CollStats => collection::coll_stats(req, state).await,
        Cmd::Compact => collection::compact(req, state).await,
        Cmd::DbStats => collection::db_stats(req, state).await,
        Cmd::Insert => write::insert(req, state).await,
        Cmd::Update => write::update(req, state).await,
        Cmd::Delete => write::delete(req, state).await,
        Cmd::FindAndModify => write::find_and_modify(req, state).await,
        Cmd::Find => read::find(req, state).await,
        Cmd::GetMore => read::get_more(req, state).await,
        Cmd::Count => read::count(req, state).await,
        Cmd::Distinct => read::distinct(req, state).await,
        Cmd::Aggregate => aggregate::aggregate(req, state).await,
        Cmd::Explain => explain::explain(req, state).await,
        Cmd::AdvanceClock => admin::advance_clock(req, state),
        Cmd::ConfigureFailPoint => crate::failpoint::configure(&state.failpoints, req.body),
        Cmd::CreateIndexes => index::create_indexes(req, state).await,
        Cmd::ListIndexes => index::list_indexes(req, state),
        Cmd::DropIndexes => index::drop_indexes(req, state).await,
        Cmd::CollMod => index::coll_mod(req, state).await,
        Cmd::Validate => validate::validate(req, state).await,
        Cmd::ReplSetInitiate => repl::repl_set_initiate(state),
        Cmd::ReplSetGetStatus => repl::repl_set_get_status(state),
        Cmd::ReplSetGetConfig => repl::repl_set_get_config(req, state),
        Cmd::ReplSetResizeOplog => oplog_collection::repl_set_resize_oplog(req, state),
        Cmd::CustomAction => {
            let (reply, ticket) = crate::cosmos::custom_action::run(req, state)?;
            args::WriteConcern::parse(req)?.wait(state, ticket).await?;
            Ok(reply)
        }
        Cmd::GetLastRequestStatistics => crate::cosmos::stats::get_last_request_statistics(ctx),
    }
}

#[cfg(test)]
mod tests {
    use super::COMMANDS;

    #[test]
    fn table_names_are_unique() {
        let mut names: Vec<&str> = COMMANDS.iter().map(|c| c.name).collect();
        names.sort_unstable();
        let before = names.len();
        names.dedup();
        assert_eq!(before, names.len(), "a command name appears twice");
    }
}
