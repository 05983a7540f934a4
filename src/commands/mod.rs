//! Command handlers, one module per family, and the table that routes to them.
//!
//! The table is the single list of what Ebb implements: routing, `listCommands` and the admin-only
//! check all read it. A name not in it answers `CommandNotFound`.

mod admin;
mod args;
mod handshake;

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
    EndSessions,
    KillCursors,
    ListDatabases,
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

const fn spec(name: &'static str, cmd: Cmd, admin_only: bool, help: &'static str) -> CommandSpec {
    CommandSpec {
        name,
        cmd,
        admin_only,
        help,
    }
}

/// Every command Ebb answers, sorted by name.
pub static COMMANDS: &[CommandSpec] = &[
    spec("buildInfo", Cmd::BuildInfo, false, "get version #, etc."),
    spec(
        "buildinfo",
        Cmd::BuildInfo,
        false,
        "get version #, etc. (alias of buildInfo)",
    ),
    spec(
        "connectionStatus",
        Cmd::ConnectionStatus,
        false,
        "Returns connection-specific information such as logged-in users and their roles",
    ),
    spec(
        "endSessions",
        Cmd::EndSessions,
        false,
        "end a set of logical sessions",
    ),
    spec("getCmdLineOpts", Cmd::GetCmdLineOpts, true, "get argv"),
    spec(
        "getLog",
        Cmd::GetLog,
        true,
        "{ getLog : '*' }  OR { getLog : 'startupWarnings' }",
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
        "listCommands",
        Cmd::ListCommands,
        false,
        "get a list of all db commands",
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
        "serverStatus",
        Cmd::ServerStatus,
        false,
        "returns lots of administrative server statistics",
    ),
    spec("whatsmyuri", Cmd::WhatsMyUri, false, "{whatsmyuri:1}"),
];

/// A size limit as the `int32` that replies carry.
pub(crate) fn limit_i32(n: usize) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

/// Runs `req`.
#[expect(clippy::unused_async, reason = "storage-backed handlers will await group commits")]
pub async fn run(req: &Request<'_>, ctx: &mut ConnCtx, state: &ServerState) -> CommandResult {
    let Some(spec) = COMMANDS.iter().find(|c| c.name == req.name) else {
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
        Cmd::GetParameter => admin::get_parameter(req),
        Cmd::GetCmdLineOpts => Ok(admin::get_cmd_line_opts(state)),
        Cmd::HostInfo => Ok(admin::host_info()),
        Cmd::WhatsMyUri => Ok(bson::rawdoc! { "you": ctx.peer.to_string(), "ok": 1.0 }),
        Cmd::ConnectionStatus => admin::connection_status(req),
        Cmd::GetLog => admin::get_log(req, state),
        Cmd::ListCommands => Ok(admin::list_commands()),
        Cmd::ServerStatus => Ok(admin::server_status(state)),
        Cmd::EndSessions => admin::end_sessions(req),
        Cmd::KillCursors => admin::kill_cursors(req),
        Cmd::ListDatabases => admin::list_databases(req),
    }
}

#[cfg(test)]
mod tests {
    use super::COMMANDS;

    #[test]
    fn table_is_sorted_and_unique() {
        for pair in COMMANDS.windows(2) {
            assert!(
                pair[0].name.to_lowercase() <= pair[1].name.to_lowercase(),
                "{} > {}",
                pair[0].name,
                pair[1].name
            );
            assert_ne!(pair[0].name, pair[1].name);
        }
    }
}
