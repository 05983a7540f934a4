//! Authorization, command by command (issue 14): every command `listCommands` reports is sent
//! to a server with access control on (`--auth`), as three callers:
//!
//! - an unauthenticated connection once a user exists (no localhost exception): only the open
//!   commands run, every other one answers `Unauthorized` (13) "command X requires
//!   authentication";
//! - a user granted only `read` on database `app`: what `read` allows runs, the rest answers
//!   `Unauthorized` "not authorized on <db> to execute command { ... }" (the request as mongod
//!   prints it, passwords shown as "xxx");
//! - a loopback connection before any user exists (the localhost exception): the open commands,
//!   those any logged-in user may run, and the cluster actions mongod grants there
//!   (`replSetGetStatus`, `replSetConfigure`) run, plus `createUser` on `admin`; once the first
//!   user exists, the exception is gone.
//!
//! Each command's expectation is stated here, by hand, from mongod's rules ([`access`]); it is
//! checked twice: against the server's answer, and against Ebb's privilege table
//! (`ebb::auth::privileges::required`, evaluated for the same caller). A command the server
//! lists without a row in [`access`] fails the test, so no command slips through.
//!
//! Requests are sent over raw `OP_MSG` connections ([`common::RawConn`]) so that the body is
//! exactly the one the test evaluates and prints; the `read` user logs in with SCRAM-SHA-256,
//! computed here ([`scram`]).

mod common;

use std::collections::BTreeSet;

use bson::{Bson, Document, RawDocumentBuf, doc};
use common::scram::{self, bin};
use common::{RawConn, TestResult, TestServer, is_ok};
use ebb::auth::privileges::{
    Caller, PrivilegeSet, Required, UserName, localhost_exception, required, unauthorized,
};
use ebb::auth::roles::{RoleGraph, RoleName};

/// The database the `read` user may read.
const APP: &str = "app";
/// The collection the requests name.
const COLL: &str = "c";

/// What a command needs, as mongod states it (each command's `requiresAuth` and
/// `checkAuthForOperation` / `doCheckAuthorization`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Access {
    /// `requiresAuth() == false`: anyone, logged in or not.
    Open,
    /// Any logged-in user ("no explicit privileges required": sessions, transactions,
    /// `whatsmyuri`, `listDatabases` of the databases one can act on, a `getMore` or
    /// `killCursors` of one's own cursors).
    AnyUser,
    /// A logged-in user, which the command checks itself: `getMore`, whose
    /// `checkAuthForGetMore` refuses a caller that is not authenticated even under the
    /// localhost exception.
    LoggedIn,
    /// An action the built-in `read` role grants on its database (`find`, `listCollections`,
    /// `listIndexes`, `collStats`, `dbStats`, `killCursors`…).
    Read,
    /// A cluster action the localhost exception grants (`replSetGetStatus`,
    /// `replSetConfigure`), which `read` does not.
    LocalhostGrant,
    /// Anything else: writes, administration, users and roles.
    Other,
}

/// The row of `name`, or `None` for a command this test does not know (which fails it).
fn access(name: &str) -> Option<Access> {
    use Access::{AnyUser, LocalhostGrant, LoggedIn, Open, Other, Read};
    Some(match name {
        "authenticate" | "buildInfo" | "buildinfo" | "configureFailPoint" | "connectionStatus"
        | "hello" | "isMaster" | "ismaster" | "listCommands" | "logout" | "ping"
        | "saslContinue" | "saslStart" => Open,

        "getMore" => LoggedIn,

        "abortTransaction" | "commitTransaction" | "endSessions" | "killCursors"
        | "killSessions" | "listDatabases" | "refreshSessions" | "startSession" | "whatsmyuri"
        | "ebbAdvanceClock" => AnyUser,

        "aggregate" | "collStats" | "count" | "dbStats" | "dbstats" | "distinct" | "explain"
        | "find" | "listCollections" | "listIndexes" => Read,

        "replSetGetStatus" | "replSetInitiate" | "replSetReconfig" => LocalhostGrant,

        "collMod"
        | "compact"
        | "create"
        | "createIndexes"
        | "currentOp"
        | "delete"
        | "deleteIndexes"
        | "drop"
        | "dropDatabase"
        | "dropIndexes"
        | "findAndModify"
        | "findandmodify"
        | "getCmdLineOpts"
        | "getLog"
        | "getParameter"
        | "hostInfo"
        | "insert"
        | "killAllSessions"
        | "killAllSessionsByPattern"
        | "killOp"
        | "renameCollection"
        | "replSetGetConfig"
        | "replSetResizeOplog"
        | "rotateCertificates"
        | "serverStatus"
        | "setParameter"
        | "shutdown"
        | "top"
        | "update"
        | "validate" => Other,

        "createUser"
        | "updateUser"
        | "dropUser"
        | "dropAllUsersFromDatabase"
        | "usersInfo"
        | "grantRolesToUser"
        | "revokeRolesFromUser"
        | "createRole"
        | "updateRole"
        | "dropRole"
        | "dropAllRolesFromDatabase"
        | "grantRolesToRole"
        | "revokeRolesFromRole"
        | "grantPrivilegesToRole"
        | "revokePrivilegesFromRole"
        | "rolesInfo" => Other,

        _ => return None,
    })
}

/// A minimal request for `name` (without `$db`): valid enough that the command would run, so
/// that an authorized caller gets past the check and an unauthorized one is stopped by it.
fn request(name: &str) -> Document {
    let missing_cursor = Bson::Int64(424_242);
    match name {
        "aggregate" => doc! { name: COLL, "pipeline": [], "cursor": {} },
        "collMod" | "collStats" | "compact" | "count" | "drop" | "listIndexes" | "validate" => {
            doc! { name: COLL }
        }
        "create" => doc! { name: "created" },
        "createIndexes" => doc! {
            name: COLL, "indexes": [{ "key": { "a": 1 }, "name": "a_1" }],
        },
        "delete" => doc! { name: COLL, "deletes": [{ "q": {}, "limit": 0 }] },
        "deleteIndexes" | "dropIndexes" => doc! { name: COLL, "index": "a_1" },
        "distinct" => doc! { name: COLL, "key": "a" },
        "explain" => doc! { name: { "find": COLL } },
        "find" => doc! { name: COLL, "filter": {} },
        "findAndModify" | "findandmodify" => doc! {
            name: COLL, "query": {}, "update": { "$set": { "b": 1 } },
        },
        "getMore" => doc! { name: missing_cursor, "collection": COLL },
        "insert" => doc! { name: COLL, "documents": [{ "a": 1 }] },
        "killCursors" => doc! { name: COLL, "cursors": [missing_cursor] },
        "endSessions"
        | "refreshSessions"
        | "killSessions"
        | "killAllSessions"
        | "killAllSessionsByPattern" => doc! { name: [] },
        "renameCollection" => doc! { name: format!("{APP}.{COLL}"), "to": format!("{APP}.d") },
        "update" => doc! { name: COLL, "updates": [{ "q": {}, "u": { "$set": { "b": 1 } } }] },
        "getLog" => doc! { name: "startupWarnings" },
        "getParameter" => doc! { name: "*" },
        "configureFailPoint" => doc! { name: "noSuchFailPoint", "mode": "off" },
        "saslStart" => doc! { name: 1, "mechanism": "SCRAM-SHA-256", "payload": bin(b"") },
        "saslContinue" => doc! { name: 1, "conversationId": 1, "payload": bin(b"") },
        "createUser" => doc! { name: "someone", "pwd": "secret", "roles": [] },
        "updateUser" => doc! { name: "someone", "pwd": "secret" },
        "dropUser" => doc! { name: "someone" },
        "grantRolesToUser" | "revokeRolesFromUser" => {
            doc! { name: "someone", "roles": [{ "role": "readWrite", "db": APP }] }
        }
        "createRole" => doc! { name: "role1", "privileges": [], "roles": [] },
        "updateRole" => doc! { name: "role1", "roles": [] },
        "dropRole" => doc! { name: "role1" },
        "grantRolesToRole" | "revokeRolesFromRole" => {
            doc! { name: "role1", "roles": [{ "role": "read", "db": APP }] }
        }
        "grantPrivilegesToRole" | "revokePrivilegesFromRole" => doc! {
            name: "role1",
            "privileges": [{ "resource": { "db": APP, "collection": "" }, "actions": ["find"] }],
        },
        _ => doc! { name: 1 },
    }
}

/// How a command is answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    /// Past the authorization check (whatever it answers then, never 13).
    Runs,
    /// 13, "command X requires authentication".
    RequiresAuth,
    /// 13, "not authorized on db to execute command { ... }".
    NotAuthorized,
}

/// One of the walk's callers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Who {
    /// Not logged in, a user exists.
    Anonymous,
    /// Logged in with `read` on [`APP`].
    Reader,
    /// Not logged in, no user yet, on the loopback interface.
    Localhost,
}

/// What `who` should get for a command of `access`, by mongod's rules.
fn expected(access: Access, who: Who) -> Outcome {
    use Outcome::{NotAuthorized, RequiresAuth, Runs};
    match (who, access) {
        (_, Access::Open) => Runs,
        (Who::Anonymous, _) => RequiresAuth,
        (Who::Reader, Access::AnyUser | Access::LoggedIn | Access::Read) => Runs,
        (Who::Reader, Access::LocalhostGrant | Access::Other) => NotAuthorized,
        // The localhost exception skips the authentication check; the privileges it grants
        // decide (mongod's `isUsingLocalhostBypass` in `checkAuthorizationImplPreParse`).
        (Who::Localhost, Access::AnyUser | Access::LocalhostGrant) => Runs,
        (Who::Localhost, Access::LoggedIn | Access::Read | Access::Other) => NotAuthorized,
    }
}

/// Server answers known to differ from mongod's, as `(caller, command, what the server
/// answers today)`: the test insists on today's answer, so that the fix has to update this
/// list (and a regression elsewhere still fails). None today.
const KNOWN_DIVERGENCES: &[(Who, &str, Outcome)] = &[];

/// Commands whose `requiresAuth` in `listCommands` differs from mongod's, listed with the
/// wrong value the server reports today (the test insists on it, so that the fix updates
/// this list). None today.
const LISTED_REQUIRES_AUTH_WRONG: &[&str] = &[];

/// The caller as the privilege table sees it.
struct TableCaller {
    privileges: PrivilegeSet,
    user: Option<UserName>,
    roles: Vec<RoleName>,
    localhost: bool,
}

impl TableCaller {
    fn new(who: Who) -> TestResult<TableCaller> {
        Ok(match who {
            Who::Anonymous => TableCaller {
                privileges: PrivilegeSet::new(),
                user: None,
                roles: Vec::new(),
                localhost: false,
            },
            Who::Reader => {
                let roles = vec![RoleName::new("read", APP)];
                TableCaller {
                    privileges: RoleGraph::new()
                        .resolve(&roles)
                        .map_err(|e| e.errmsg)?
                        .privileges,
                    user: Some(UserName {
                        user: "reader".into(),
                        db: APP.into(),
                    }),
                    roles,
                    localhost: false,
                }
            }
            Who::Localhost => TableCaller {
                privileges: localhost_exception(),
                user: None,
                roles: Vec::new(),
                localhost: true,
            },
        })
    }

    /// The outcome the table gives, as `auth::session::authorize` applies it.
    fn outcome(&self, req: &Required) -> Outcome {
        let allowed = if self.localhost && self.user.is_none() {
            req.allows_bypass(self)
        } else if req.requires_auth && self.user.is_none() {
            return Outcome::RequiresAuth;
        } else {
            req.allows(self)
        };
        if allowed {
            Outcome::Runs
        } else {
            Outcome::NotAuthorized
        }
    }
}

impl Caller for TableCaller {
    fn privileges(&self) -> &PrivilegeSet {
        &self.privileges
    }
    fn is_authenticated(&self) -> bool {
        self.user.is_some()
    }
    fn is_user(&self, user: &UserName) -> bool {
        self.user.as_ref() == Some(user)
    }
    // The walk names no cursor that exists.
    fn owns_cursors(&self) -> bool {
        true
    }
    fn holds_cursor_privileges(&self) -> bool {
        true
    }
    fn has_role(&self, role: &RoleName) -> bool {
        self.roles.contains(role)
    }
    fn localhost_exception(&self) -> bool {
        self.localhost
    }
}

/// The commands the server lists, with `adminOnly` and `requiresAuth`.
async fn listed(conn: &mut RawConn) -> TestResult<Vec<(String, bool, bool)>> {
    let reply = conn.command("admin", doc! { "listCommands": 1 }).await?;
    assert!(is_ok(&reply), "listCommands: {reply}");
    let mut out = Vec::new();
    for (name, row) in reply.get_document("commands")? {
        let Bson::Document(row) = row else {
            return Err(format!("listCommands row {name}: {row}").into());
        };
        out.push((
            name.clone(),
            row.get_bool("adminOnly")?,
            row.get_bool("requiresAuth")?,
        ));
    }
    Ok(out)
}

/// The database a command is sent to: `admin` for the admin-only ones (elsewhere they answer
/// 13 "may only be run against the admin database" before any authorization check).
fn db_for(admin_only: bool) -> &'static str {
    if admin_only { "admin" } else { APP }
}

/// Sends every listed command as `who` on `conn` and returns the failures, one line each.
async fn walk(
    conn: &mut RawConn,
    who: Who,
    commands: &[(String, bool, bool)],
    relogin: Option<(&str, &str, &str)>,
) -> TestResult<Vec<String>> {
    let caller = TableCaller::new(who)?;
    let mut failures = Vec::new();
    for (name, admin_only, requires_auth) in commands {
        let Some(access) = access(name) else {
            failures.push(format!(
                "{name}: listed, but this test has no expectation for it"
            ));
            continue;
        };
        let mut listed_requires_auth = access != Access::Open;
        if LISTED_REQUIRES_AUTH_WRONG.contains(&name.as_str()) {
            listed_requires_auth = !listed_requires_auth;
        }
        if *requires_auth != listed_requires_auth {
            failures.push(format!(
                "{name}: listCommands says requiresAuth {requires_auth}, expected \
                 {listed_requires_auth}"
            ));
        }
        let db = db_for(*admin_only);
        let body = request(name);
        let mut sent = body.clone();
        sent.insert("$db", db);
        let raw = RawDocumentBuf::try_from(&sent)?;

        let mut want = expected(access, who);
        match required(name, db, &raw) {
            Ok(req) => {
                let table = caller.outcome(&req);
                if table != want {
                    failures.push(format!(
                        "{name} as {who:?}: the privilege table gives {table:?}, mongod's rule \
                         {want:?} ({req:?})"
                    ));
                }
            }
            Err(e) => failures.push(format!(
                "{name}: no row in the privilege table ({:?} {})",
                e.code, e.errmsg
            )),
        }
        if let Some((_, _, today)) = KNOWN_DIVERGENCES
            .iter()
            .find(|(w, n, _)| *w == who && n == name)
        {
            want = *today;
        }

        let reply = conn.command(db, body).await?;
        let code = reply.get_i32("code").ok();
        let errmsg = reply.get_str("errmsg").unwrap_or_default();
        match want {
            Outcome::Runs => {
                if code == Some(13) || code == Some(59) {
                    failures.push(format!("{name} as {who:?}: should run, got {reply}"));
                }
            }
            Outcome::RequiresAuth => {
                let message = format!("command {name} requires authentication");
                if code != Some(13)
                    || errmsg != message
                    || reply.get_str("codeName").ok() != Some("Unauthorized")
                {
                    failures.push(format!(
                        "{name} as {who:?}: expected '{message}', got {reply}"
                    ));
                }
            }
            Outcome::NotAuthorized => {
                let prefix = format!("not authorized on {db} to execute command {{ {name}: ");
                let message = unauthorized(name, db, &raw).errmsg;
                if code != Some(13)
                    || !errmsg.starts_with(&prefix)
                    || errmsg != message
                    || reply.get_str("codeName").ok() != Some("Unauthorized")
                {
                    failures.push(format!(
                        "{name} as {who:?}: expected '{message}', got {reply}"
                    ));
                }
            }
        }
        // `logout` logged the reader out: log in again for the rest of the walk.
        if name == "logout"
            && let Some((user_db, user, pwd)) = relogin
        {
            scram::login(conn, user_db, scram::Mech::Sha256, user, pwd).await?;
        }
    }
    Ok(failures)
}

fn check(failures: &[String]) {
    assert!(
        failures.is_empty(),
        "{} failure(s):\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// Every listed command has a row here, a request, and a row in the privilege table; the
/// three lists agree on which commands are open.
#[tokio::test]
async fn every_listed_command_has_an_expectation() -> TestResult {
    let server = TestServer::start_with(|c| {
        c.auth = true;
        c.enable_test_commands = true;
    })
    .await?;
    let mut conn = server.raw().await?;
    let commands = listed(&mut conn).await?;
    assert!(
        commands.len() > 50,
        "only {} commands listed",
        commands.len()
    );
    let names: BTreeSet<&str> = commands.iter().map(|(n, _, _)| n.as_str()).collect();
    for must in [
        "find",
        "insert",
        "saslStart",
        "createUser",
        "shutdown",
        "getMore",
    ] {
        assert!(names.contains(must), "{must} not listed");
    }
    let mut failures = Vec::new();
    for (name, _, _) in &commands {
        if access(name).is_none() {
            failures.push(format!("{name}: no expectation"));
        }
    }
    check(&failures);
    Ok(())
}

/// (a) An unauthenticated connection once a user exists: the open commands run, the others
/// answer "command X requires authentication".
#[tokio::test]
async fn unauthenticated_caller_runs_only_open_commands() -> TestResult {
    let server = TestServer::start_with(|c| {
        c.auth = true;
        c.enable_test_commands = true;
    })
    .await?;
    let mut admin = server.raw().await?;
    create_root(&mut admin).await?;
    let mut conn = server.raw().await?;
    let commands = listed(&mut conn).await?;
    let failures = walk(&mut conn, Who::Anonymous, &commands, None).await?;
    check(&failures);
    // The server is still up and still refuses.
    let reply = conn.command(APP, doc! { "find": COLL }).await?;
    assert_eq!(
        reply.get_str("errmsg")?,
        "command find requires authentication"
    );
    Ok(())
}

/// (b) A user with only `read` on `app`: reads run, everything else answers "not authorized
/// on <db> to execute command { ... }".
#[tokio::test]
async fn read_only_user_runs_only_what_read_grants() -> TestResult {
    let server = TestServer::start_with(|c| {
        c.auth = true;
        c.enable_test_commands = true;
    })
    .await?;
    let mut admin = server.raw().await?;
    create_root(&mut admin).await?;
    scram::login(&mut admin, "admin", scram::Mech::Sha256, "root", "rootpwd").await?;
    let reply = admin
        .command(
            APP,
            doc! {
                "createUser": "reader", "pwd": "readerpwd",
                "roles": [{ "role": "read", "db": APP }],
            },
        )
        .await?;
    assert!(is_ok(&reply), "createUser reader: {reply}");
    let reply = admin
        .command(APP, doc! { "insert": COLL, "documents": [{ "a": 1 }] })
        .await?;
    assert!(is_ok(&reply), "insert as root: {reply}");

    let mut conn = server.raw().await?;
    scram::login(&mut conn, APP, scram::Mech::Sha256, "reader", "readerpwd").await?;
    let commands = listed(&mut conn).await?;
    let failures = walk(
        &mut conn,
        Who::Reader,
        &commands,
        Some((APP, "reader", "readerpwd")),
    )
    .await?;
    check(&failures);

    // The reads did read, and nothing the reader was refused happened.
    let reply = conn
        .command(APP, doc! { "find": COLL, "filter": {} })
        .await?;
    let batch = reply.get_document("cursor")?.get_array("firstBatch")?;
    assert_eq!(batch.len(), 1, "{reply}");
    // The message mongod prints for an insert, written out once by hand.
    let reply = conn
        .command(APP, doc! { "insert": COLL, "documents": [{ "a": 2 }] })
        .await?;
    assert_eq!(
        reply.get_str("errmsg")?,
        r#"not authorized on app to execute command { insert: "c", documents: [ { a: 2 } ], $db: "app" }"#
    );
    // A password never shows in the message.
    let reply = conn
        .command(
            APP,
            doc! { "createUser": "x", "pwd": "topsecret", "roles": [] },
        )
        .await?;
    assert_eq!(
        reply.get_str("errmsg")?,
        r#"not authorized on app to execute command { createUser: "x", pwd: "xxx", roles: [], $db: "app" }"#
    );
    let reply = admin.command(APP, doc! { "count": COLL }).await?;
    assert_eq!(reply.get_i32("n").ok(), Some(1), "{reply}");
    Ok(())
}

/// (c) The localhost exception: before any user exists, a loopback connection runs the open
/// commands, those of any logged-in user, the cluster actions the exception grants and
/// `createUser` on `admin`, and nothing else; the first user ends it, on that connection and
/// on new ones.
#[tokio::test]
async fn localhost_exception_until_the_first_user() -> TestResult {
    let server = TestServer::start_with(|c| {
        c.auth = true;
        c.enable_test_commands = true;
    })
    .await?;
    let mut conn = server.raw().await?;
    let commands = listed(&mut conn).await?;
    let failures = walk(&mut conn, Who::Localhost, &commands, None).await?;
    check(&failures);

    // createUser passes the check on admin only (a request it then refuses creates nobody).
    let reply = conn
        .command("admin", doc! { "createUser": "incomplete" })
        .await?;
    assert_ne!(reply.get_i32("code").ok(), Some(13), "{reply}");
    assert!(!is_ok(&reply), "{reply}");
    let reply = conn
        .command(APP, doc! { "createUser": "u", "pwd": "p", "roles": [] })
        .await?;
    assert_eq!(reply.get_i32("code").ok(), Some(13), "{reply}");
    assert!(
        reply.get_str("errmsg")?.starts_with(
            "not authorized on app to execute command { createUser: \"u\", pwd: \"xxx\""
        ),
        "{reply}"
    );
    // connectionStatus shows what the exception grants.
    let reply = conn
        .command(
            "admin",
            doc! { "connectionStatus": 1, "showPrivileges": true },
        )
        .await?;
    let info = reply.get_document("authInfo")?;
    assert!(info.get_array("authenticatedUsers")?.is_empty(), "{reply}");
    assert!(
        !info.get_array("authenticatedUserPrivileges")?.is_empty(),
        "{reply}"
    );

    create_root(&mut conn).await?;
    // Gone on this connection, not logged in...
    let reply = conn
        .command(
            "admin",
            doc! { "createUser": "second", "pwd": "p", "roles": ["root"] },
        )
        .await?;
    assert_eq!(
        reply.get_str("errmsg").ok(),
        Some("command createUser requires authentication"),
        "{reply}"
    );
    let reply = conn
        .command("admin", doc! { "replSetGetStatus": 1 })
        .await?;
    assert_eq!(
        reply.get_str("errmsg").ok(),
        Some("command replSetGetStatus requires authentication"),
        "{reply}"
    );
    let reply = conn
        .command(
            "admin",
            doc! { "connectionStatus": 1, "showPrivileges": true },
        )
        .await?;
    let info = reply.get_document("authInfo")?;
    assert!(
        info.get_array("authenticatedUserPrivileges")?.is_empty(),
        "{reply}"
    );
    // ...and on a new one: the walk now gives the unauthenticated answers.
    let mut fresh = server.raw().await?;
    let failures = walk(&mut fresh, Who::Anonymous, &commands, None).await?;
    check(&failures);
    Ok(())
}

/// Creates `root` (role `root` on `admin`, password `rootpwd`) through the localhost exception.
async fn create_root(conn: &mut RawConn) -> TestResult {
    let reply = conn
        .command(
            "admin",
            doc! {
                "createUser": "root", "pwd": "rootpwd",
                "roles": [{ "role": "root", "db": "admin" }],
            },
        )
        .await?;
    assert!(is_ok(&reply), "createUser root: {reply}");
    Ok(())
}
