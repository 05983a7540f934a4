//! Command handlers, one module per family, and the table that routes to them.
//!
//! The table is the single list of what Ebb implements: routing, `listCommands` and the admin-only
//! check all read it. A name not in it answers `CommandNotFound`.

mod admin;
mod aggregate;
mod args;
mod collection;
mod explain;
mod handshake;
mod index;
mod read;
mod validate;
mod write;

use crate::dispatch::{ConnCtx, Request};
use crate::error::{CommandError, CommandResult, ErrorCode};
use crate::state::ServerState;

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
    KillCursors,
    ListDatabases,
    Create,
    Drop,
    DropDatabase,
    ListCollections,
    RenameCollection,
    CollStats,
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
    CreateIndexes,
    ListIndexes,
    DropIndexes,
    CollMod,
    Validate,
}

/// One implemented command name.
#[derive(Debug)]
pub struct CommandSpec {
    /// The name as clients send it (aliases have entries of their own).
    pub name: &'static str,
    cmd: Cmd,
    /// Whether it may only run against the `admin` database.
    pub admin_only: bool,
    /// `listCommands` help text.
    pub help: &'static str,
}

impl CommandSpec {
    /// Whether this server answers the command (test-only commands need
    /// `--enable-test-commands`).
    pub fn available(&self, state: &ServerState) -> bool {
        self.cmd != Cmd::AdvanceClock || state.config.enable_test_commands
    }
}

const fn spec(name: &'static str, cmd: Cmd, admin_only: bool, help: &'static str) -> CommandSpec {
    CommandSpec {
        name,
        cmd,
        admin_only,
        help,
    }
}

/// Every command Ebb answers.
pub static COMMANDS: &[CommandSpec] = &[
    spec(
        "aggregate",
        Cmd::Aggregate,
        false,
        "Runs the aggregation command. See http://dochub.mongodb.org/core/aggregation for more details.",
    ),
    spec("buildInfo", Cmd::BuildInfo, false, "get version #, etc."),
    spec(
        "buildinfo",
        Cmd::BuildInfo,
        false,
        "get version #, etc. (alias of buildInfo)",
    ),
    spec(
        "collMod",
        Cmd::CollMod,
        false,
        "Sets collection options, such as an index's expireAfterSeconds",
    ),
    spec(
        "collStats",
        Cmd::CollStats,
        false,
        "{ collStats:\"blog.posts\" , scale : 1 } scale divides sizes e.g. for KB use 1024",
    ),
    spec(
        "connectionStatus",
        Cmd::ConnectionStatus,
        false,
        "Returns connection-specific information such as logged-in users and their roles",
    ),
    spec("count", Cmd::Count, false, "count objects in collection"),
    spec(
        "create",
        Cmd::Create,
        false,
        "explicitly creates a collection",
    ),
    spec(
        "createIndexes",
        Cmd::CreateIndexes,
        false,
        "Create indexes on a collection",
    ),
    spec("dbStats", Cmd::DbStats, false, "Get stats on a database."),
    spec("delete", Cmd::Delete, false, "delete documents"),
    spec(
        "distinct",
        Cmd::Distinct,
        false,
        "{ distinct : 'collection name' , key : 'a.b' , query : {} }",
    ),
    spec(
        "explain",
        Cmd::Explain,
        false,
        "explain database reads and writes",
    ),
    spec(
        "dropIndexes",
        Cmd::DropIndexes,
        false,
        "drop indexes for a collection",
    ),
    spec("drop", Cmd::Drop, false, "drop a collection"),
    spec(
        "dropDatabase",
        Cmd::DropDatabase,
        false,
        "drop (delete) this database",
    ),
    spec(
        "ebbAdvanceClock",
        Cmd::AdvanceClock,
        true,
        "test only: move the server's clock forward by the given milliseconds",
    ),
    spec(
        "endSessions",
        Cmd::EndSessions,
        false,
        "end a set of logical sessions",
    ),
    spec("find", Cmd::Find, false, "query for documents"),
    spec(
        "findAndModify",
        Cmd::FindAndModify,
        false,
        "{ findAndModify: \"collection\", query: {processed:false}, update: {$set: {processed:true}}, new: true}",
    ),
    spec(
        "findandmodify",
        Cmd::FindAndModify,
        false,
        "alias of findAndModify",
    ),
    spec("getCmdLineOpts", Cmd::GetCmdLineOpts, true, "get argv"),
    spec(
        "getLog",
        Cmd::GetLog,
        true,
        "{ getLog : '*' }  OR { getLog : 'startupWarnings' }",
    ),
    spec(
        "getMore",
        Cmd::GetMore,
        false,
        "retrieve more results from an existing cursor",
    ),
    spec(
        "getParameter",
        Cmd::GetParameter,
        true,
        "get administrative option(s)",
    ),
    spec(
        "hello",
        Cmd::Hello,
        false,
        "Check if this server is primary for a replica set",
    ),
    spec(
        "hostInfo",
        Cmd::HostInfo,
        false,
        "returns information about the daemon's host",
    ),
    spec("insert", Cmd::Insert, false, "insert documents"),
    spec(
        "isMaster",
        Cmd::IsMaster,
        false,
        "Check if this server is primary for a replica set (deprecated alias of hello)",
    ),
    spec(
        "ismaster",
        Cmd::IsMaster,
        false,
        "Check if this server is primary for a replica set (deprecated alias of hello)",
    ),
    spec(
        "killCursors",
        Cmd::KillCursors,
        false,
        "Kill a list of cursor ids",
    ),
    spec(
        "listCollections",
        Cmd::ListCollections,
        false,
        "list collections for this db",
    ),
    spec(
        "listCommands",
        Cmd::ListCommands,
        false,
        "get a list of all db commands",
    ),
    spec(
        "listIndexes",
        Cmd::ListIndexes,
        false,
        "list indexes for a collection",
    ),
    spec(
        "listDatabases",
        Cmd::ListDatabases,
        true,
        "{ listDatabases:1, [filter: <filterObject>] [, nameOnly: true ] }",
    ),
    spec(
        "ping",
        Cmd::Ping,
        false,
        "a way to check that the server is alive. responds immediately even if server is in a db lock.",
    ),
    spec(
        "renameCollection",
        Cmd::RenameCollection,
        true,
        " example: { renameCollection: foo.a, to: bar.b }",
    ),
    spec(
        "serverStatus",
        Cmd::ServerStatus,
        false,
        "returns lots of administrative server statistics",
    ),
    spec(
        "shutdown",
        Cmd::Shutdown,
        true,
        "shutdown the database.  must be ran against admin db and either (1) ran from localhost or (2) authenticated.",
    ),
    spec("update", Cmd::Update, false, "update documents"),
    spec(
        "validate",
        Cmd::Validate,
        false,
        "Validate contents of a namespace by scanning its data structures for correctness.",
    ),
    spec("whatsmyuri", Cmd::WhatsMyUri, false, "{whatsmyuri:1}"),
];

/// A size limit as the `int32` that replies carry.
pub(crate) fn limit_i32(n: usize) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

/// Runs `req`.
pub async fn run(req: &Request<'_>, ctx: &mut ConnCtx, state: &ServerState) -> CommandResult {
    let Some(spec) = COMMANDS
        .iter()
        .find(|c| c.name == req.name)
        .filter(|c| c.available(state))
    else {
        return Err(CommandError::command_not_found(req.name));
    };
    if spec.admin_only && req.db != "admin" {
        return Err(CommandError::new(
            ErrorCode::Unauthorized,
            format!("{} may only be run against the admin database.", req.name),
        ));
    }
    match spec.cmd {
        Cmd::Hello => handshake::hello(req, ctx, state, handshake::Flavor::Hello),
        Cmd::IsMaster => handshake::hello(req, ctx, state, handshake::Flavor::IsMaster),
        Cmd::Ping => Ok(bson::rawdoc! { "ok": 1.0 }),
        Cmd::BuildInfo => Ok(admin::build_info()),
        Cmd::GetParameter => admin::get_parameter(req, state),
        Cmd::GetCmdLineOpts => Ok(admin::get_cmd_line_opts(state)),
        Cmd::HostInfo => Ok(admin::host_info()),
        Cmd::WhatsMyUri => Ok(bson::rawdoc! { "you": ctx.peer.to_string(), "ok": 1.0 }),
        Cmd::ConnectionStatus => admin::connection_status(req),
        Cmd::GetLog => admin::get_log(req, state),
        Cmd::ListCommands => Ok(admin::list_commands(state)),
        Cmd::ServerStatus => Ok(admin::server_status(state)),
        Cmd::Shutdown => admin::shutdown(req, ctx, state),
        Cmd::EndSessions => admin::end_sessions(req, state),
        Cmd::KillCursors => read::kill_cursors(req, state),
        Cmd::ListDatabases => collection::list_databases(req, state).await,
        Cmd::Create => collection::create(req, state).await,
        Cmd::Drop => collection::drop(req, state).await,
        Cmd::DropDatabase => collection::drop_database(req, state).await,
        Cmd::ListCollections => collection::list_collections(req, state),
        Cmd::RenameCollection => collection::rename_collection(req, state).await,
        Cmd::CollStats => collection::coll_stats(req, state).await,
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
        Cmd::CreateIndexes => index::create_indexes(req, state).await,
        Cmd::ListIndexes => index::list_indexes(req, state),
        Cmd::DropIndexes => index::drop_indexes(req, state).await,
        Cmd::CollMod => index::coll_mod(req, state).await,
        Cmd::Validate => validate::validate(req, state).await,
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
