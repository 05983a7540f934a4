//! Handshake, compression negotiation and the administrative commands, through the `mongodb`
//! driver against an in-process server.

mod common;

use bson::spec::BinarySubtype;
use bson::{Binary, Bson, Document, doc};
use common::{TestResult, TestServer, number};
use mongodb::Client;
use mongodb::error::{CommandError, ErrorKind};
use mongodb::options::Compressor;

/// Runs `command` on `db` and returns the reply.
async fn run(client: &Client, db: &str, command: Document) -> TestResult<Document> {
    Ok(client.database(db).run_command(command).await?)
}

/// Runs `command` on `db`, which must fail with a command error, and returns that error.
async fn run_err(client: &Client, db: &str, command: Document) -> TestResult<CommandError> {
    match client.database(db).run_command(command.clone()).await {
        Ok(reply) => Err(format!("{command} succeeded: {reply}").into()),
        Err(e) => match *e.kind {
            ErrorKind::Command(ce) => Ok(ce),
            other => Err(format!("{command} failed without a command error: {other:?}").into()),
        },
    }
}

fn assert_code(err: &CommandError, code: i32, code_name: &str) {
    assert_eq!(err.code, code, "{err:?}");
    assert_eq!(err.code_name, code_name, "{err:?}");
    assert!(!err.message.is_empty(), "{err:?}");
}

fn strings(doc: &Document, key: &str) -> Vec<String> {
    doc.get_array(key)
        .unwrap_or_else(|_| panic!("{key} is not an array in {doc}"))
        .iter()
        .map(|v| match v {
            Bson::String(s) => s.clone(),
            other => panic!("{key} holds a non-string {other}"),
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Connecting and compression
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn ping_without_compression() -> TestResult {
    let server = TestServer::start().await?;
    let client = server.client().await?;
    let reply = run(&client, "admin", doc! { "ping": 1 }).await?;
    assert_eq!(number(reply.get("ok")), Some(1.0), "{reply}");
    let hello = run(&client, "admin", doc! { "hello": 1 }).await?;
    assert!(
        hello.get("compression").is_none(),
        "nothing negotiated: {hello}"
    );
    Ok(())
}

/// Pings through a client offering `compressors` and returns the `compression` list the server
/// reports for that connection.
async fn negotiated(compressors: Vec<Compressor>) -> TestResult<Vec<String>> {
    let server = TestServer::start().await?;
    let client = server.client_with(Some(compressors)).await?;
    // Several round trips, so that compressed requests and replies are both exercised.
    for _ in 0..3 {
        let reply = run(&client, "admin", doc! { "ping": 1 }).await?;
        assert_eq!(number(reply.get("ok")), Some(1.0), "{reply}");
    }
    let status = run(&client, "admin", doc! { "serverStatus": 1 }).await?;
    assert_eq!(number(status.get("ok")), Some(1.0));
    let hello = run(&client, "admin", doc! { "hello": 1 }).await?;
    Ok(strings(&hello, "compression"))
}

#[tokio::test]
async fn ping_with_snappy() -> TestResult {
    assert_eq!(negotiated(vec![Compressor::Snappy]).await?, ["snappy"]);
    Ok(())
}

#[tokio::test]
async fn ping_with_zlib() -> TestResult {
    let zlib = Compressor::Zlib { level: Some(6) };
    assert_eq!(negotiated(vec![zlib]).await?, ["zlib"]);
    Ok(())
}

#[tokio::test]
async fn ping_with_zstd() -> TestResult {
    let zstd = Compressor::Zstd { level: None };
    assert_eq!(negotiated(vec![zstd]).await?, ["zstd"]);
    Ok(())
}

#[tokio::test]
async fn several_compressors_are_negotiated_in_the_clients_order() -> TestResult {
    let offered = vec![
        Compressor::Zlib { level: None },
        Compressor::Snappy,
        Compressor::Zstd { level: None },
    ];
    assert_eq!(negotiated(offered).await?, ["zlib", "snappy", "zstd"]);
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// hello / isMaster
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn hello_fields() -> TestResult {
    let server = TestServer::start().await?;
    let client = server.client().await?;
    let hello = run(&client, "admin", doc! { "hello": 1 }).await?;
    assert!(hello.get_bool("isWritablePrimary")?, "{hello}");
    assert_eq!(hello.get_i32("maxBsonObjectSize")?, 16_777_216);
    assert_eq!(hello.get_i32("maxMessageSizeBytes")?, 48_000_000);
    assert_eq!(hello.get_i32("maxWriteBatchSize")?, 100_000);
    assert_eq!(hello.get_i32("maxWireVersion")?, 21);
    assert_eq!(hello.get_i32("minWireVersion")?, 0);
    assert_eq!(hello.get_i32("logicalSessionTimeoutMinutes")?, 30);
    assert!(hello.get_i32("connectionId")? > 0, "{hello}");
    let local_time = hello.get_datetime("localTime")?;
    let skew = (bson::DateTime::now().timestamp_millis() - local_time.timestamp_millis()).abs();
    assert!(skew < 24 * 3600 * 1000, "localTime {local_time} is not now");
    assert!(hello.get("setName").is_none(), "a standalone: {hello}");
    assert!(hello.get("hosts").is_none(), "a standalone: {hello}");
    assert!(
        hello.get("ismaster").is_none(),
        "hello answers isWritablePrimary: {hello}"
    );
    assert_eq!(number(hello.get("ok")), Some(1.0));

    // Another client has connections of its own.
    let other = server.client().await?;
    let other_hello = run(&other, "admin", doc! { "hello": 1 }).await?;
    assert_ne!(
        other_hello.get_i32("connectionId")?,
        hello.get_i32("connectionId")?
    );
    Ok(())
}

#[tokio::test]
async fn hello_ok_is_echoed() -> TestResult {
    let server = TestServer::start().await?;
    let client = server.client().await?;
    let hello = run(&client, "admin", doc! { "hello": 1, "helloOk": true }).await?;
    assert!(hello.get_bool("helloOk")?, "{hello}");
    Ok(())
}

#[tokio::test]
async fn client_metadata_sent_twice_is_refused() -> TestResult {
    // The driver sent its metadata in the connection's first hello; a second copy is refused
    // and the connection carries on.
    let server = TestServer::start().await?;
    let client = server.client().await?;
    let again = doc! { "hello": 1, "client": { "application": { "name": "again" } } };
    let err = run_err(&client, "admin", again).await?;
    assert_eq!(err.code, 186, "{err:?}");
    run(&client, "admin", doc! { "ping": 1 }).await?;
    Ok(())
}

#[tokio::test]
async fn client_metadata_sent_twice_is_client_metadata_cannot_be_mutated() -> TestResult {
    let server = TestServer::start().await?;
    let client = server.client().await?;
    let again = doc! { "hello": 1, "client": { "application": { "name": "again" } } };
    let err = run_err(&client, "admin", again).await?;
    assert_code(&err, 186, "ClientMetadataCannotBeMutated");
    Ok(())
}

#[tokio::test]
async fn is_master_answers_ismaster() -> TestResult {
    let server = TestServer::start().await?;
    let client = server.client().await?;
    for name in ["isMaster", "ismaster"] {
        let reply = run(&client, "admin", doc! { name: 1 }).await?;
        assert!(reply.get_bool("ismaster")?, "{name}: {reply}");
        assert!(
            reply.get("isWritablePrimary").is_none(),
            "{name}: legacy spelling, legacy field: {reply}"
        );
        assert_eq!(reply.get_i32("maxWireVersion")?, 21);
        assert_eq!(number(reply.get("ok")), Some(1.0));
    }
    // Also on a database other than admin.
    let reply = run(&client, "test", doc! { "isMaster": 1 }).await?;
    assert!(reply.get_bool("ismaster")?, "{reply}");
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// buildInfo, getParameter, getCmdLineOpts
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn build_info_version_is_semver_and_matches_version_array() -> TestResult {
    let server = TestServer::start().await?;
    let client = server.client().await?;
    for (db, name) in [("admin", "buildInfo"), ("test", "buildinfo")] {
        let info = run(&client, db, doc! { name: 1 }).await?;
        let version = info.get_str("version")?;
        let parts: Vec<i32> = version
            .split('.')
            .map(str::parse::<i32>)
            .collect::<Result<_, _>>()
            .map_err(|e| format!("version {version:?} is not semver: {e}"))?;
        assert_eq!(parts.len(), 3, "version {version:?}");
        let array: Vec<i32> = info
            .get_array("versionArray")?
            .iter()
            .map(|v| v.as_i32().ok_or("versionArray holds a non-int32"))
            .collect::<Result<_, _>>()?;
        assert_eq!(array.len(), 4, "{array:?}");
        assert_eq!(
            array[..3],
            parts[..],
            "versionArray {array:?} for {version}"
        );
        assert_eq!(info.get_i32("maxBsonObjectSize")?, 16_777_216);
        assert_eq!(info.get_i32("bits")?, 64);
        assert!(info.get_str("gitVersion").is_ok_and(|g| !g.is_empty()));
        assert_eq!(number(info.get("ok")), Some(1.0));
    }
    Ok(())
}

#[tokio::test]
async fn get_parameter() -> TestResult {
    let server = TestServer::start().await?;
    let client = server.client().await?;
    let fcv = run(
        &client,
        "admin",
        doc! { "getParameter": 1, "featureCompatibilityVersion": 1 },
    )
    .await?;
    let fcv_version = fcv
        .get_document("featureCompatibilityVersion")?
        .get_str("version")?
        .to_owned();
    // The FCV is the release's major.minor.
    let build = run(&client, "admin", doc! { "buildInfo": 1 }).await?;
    let version = build.get_str("version")?;
    assert!(
        version.starts_with(&format!("{fcv_version}.")),
        "FCV {fcv_version} for version {version}"
    );
    // Only what was asked for.
    let keys: Vec<&str> = fcv.keys().map(String::as_str).collect();
    assert_eq!(keys, ["featureCompatibilityVersion", "ok"], "{fcv}");

    let all = run(&client, "admin", doc! { "getParameter": "*" }).await?;
    assert!(
        all.get_document("featureCompatibilityVersion").is_ok(),
        "{all}"
    );
    assert!(all.len() > 2, "{all}");

    let detailed = run(
        &client,
        "admin",
        doc! { "getParameter": { "showDetails": true }, "featureCompatibilityVersion": 1 },
    )
    .await?;
    let details = detailed.get_document("featureCompatibilityVersion")?;
    assert_eq!(
        details.get_document("value")?.get_str("version")?,
        fcv_version
    );
    assert!(details.get_bool("settableAtRuntime").is_ok(), "{details}");
    assert!(details.get_bool("settableAtStartup").is_ok(), "{details}");

    let both = run(
        &client,
        "admin",
        doc! { "getParameter": { "allParameters": true, "showDetails": true } },
    )
    .await?;
    assert!(both.len() > 2, "{both}");
    for (name, value) in &both {
        if name != "ok" {
            assert!(
                value.as_document().is_some_and(|d| d.contains_key("value")),
                "{name}: {value}"
            );
        }
    }

    let err = run_err(
        &client,
        "admin",
        doc! { "getParameter": 1, "frobnicateParameter": 1 },
    )
    .await?;
    assert_code(&err, 72, "InvalidOptions");

    let err = run_err(
        &client,
        "test",
        doc! { "getParameter": 1, "featureCompatibilityVersion": 1 },
    )
    .await?;
    assert_code(&err, 13, "Unauthorized");
    Ok(())
}

#[tokio::test]
async fn get_cmd_line_opts() -> TestResult {
    let server = TestServer::start().await?;
    let client = server.client().await?;
    let opts = run(&client, "admin", doc! { "getCmdLineOpts": 1 }).await?;
    let argv = strings(&opts, "argv");
    assert_eq!(argv, server.config().argv, "{opts}");
    let parsed = opts.get_document("parsed")?;
    let net = parsed.get_document("net")?;
    assert_eq!(net.get_str("bindIp")?, "127.0.0.1");
    assert_eq!(
        number(net.get("port")),
        Some(f64::from(server.addr().port())),
        "{net}"
    );
    assert_eq!(
        parsed.get_document("storage")?.get_str("dbPath")?,
        server.config().data_dir.display().to_string()
    );
    assert_eq!(number(opts.get("ok")), Some(1.0));

    let err = run_err(&client, "test", doc! { "getCmdLineOpts": 1 }).await?;
    assert_code(&err, 13, "Unauthorized");
    assert_eq!(
        err.message,
        "getCmdLineOpts may only be run against the admin database."
    );
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// hostInfo, whatsmyuri, connectionStatus, getLog
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn host_info() -> TestResult {
    let server = TestServer::start().await?;
    let client = server.client().await?;
    let info = run(&client, "admin", doc! { "hostInfo": 1 }).await?;
    let system = info.get_document("system")?;
    assert!(
        system.get_str("hostname").is_ok_and(|h| !h.is_empty()),
        "{system}"
    );
    assert!(system.get_i32("numCores")? >= 1, "{system}");
    assert!(system.get_datetime("currentTime").is_ok(), "{system}");
    assert!(number(system.get("memSizeMB")).is_some(), "{system}");
    let os = info.get_document("os")?;
    assert!(os.get_str("type").is_ok_and(|t| !t.is_empty()), "{os}");
    assert!(info.get_document("extra").is_ok(), "{info}");
    assert_eq!(number(info.get("ok")), Some(1.0));
    Ok(())
}

#[tokio::test]
async fn whatsmyuri() -> TestResult {
    let server = TestServer::start().await?;
    let client = server.client().await?;
    let reply = run(&client, "test", doc! { "whatsmyuri": 1 }).await?;
    let you: std::net::SocketAddr = reply.get_str("you")?.parse()?;
    assert_eq!(you.ip(), server.addr().ip(), "{reply}");
    assert_ne!(
        you.port(),
        server.addr().port(),
        "the client's port, not ours"
    );
    Ok(())
}

#[tokio::test]
async fn connection_status() -> TestResult {
    let server = TestServer::start().await?;
    let client = server.client().await?;
    let reply = run(&client, "admin", doc! { "connectionStatus": 1 }).await?;
    let auth = reply.get_document("authInfo")?;
    assert!(auth.get_array("authenticatedUsers")?.is_empty(), "{auth}");
    assert!(
        auth.get_array("authenticatedUserRoles")?.is_empty(),
        "{auth}"
    );
    assert!(auth.get("authenticatedUserPrivileges").is_none(), "{auth}");

    let reply = run(
        &client,
        "test",
        doc! { "connectionStatus": 1, "showPrivileges": true },
    )
    .await?;
    let auth = reply.get_document("authInfo")?;
    assert!(
        auth.get_array("authenticatedUserPrivileges")?.is_empty(),
        "{auth}"
    );
    Ok(())
}

#[tokio::test]
async fn get_log() -> TestResult {
    let server = TestServer::start().await?;
    let client = server.client().await?;
    let names = run(&client, "admin", doc! { "getLog": "*" }).await?;
    assert!(
        strings(&names, "names").contains(&"startupWarnings".to_owned()),
        "{names}"
    );

    let warnings = run(&client, "admin", doc! { "getLog": "startupWarnings" }).await?;
    let lines = strings(&warnings, "log");
    assert_eq!(
        number(warnings.get("totalLinesWritten")),
        Some(f64::from(u32::try_from(lines.len())?)),
        "{warnings}"
    );
    assert!(!lines.is_empty(), "no access control is a startup warning");
    for line in &lines {
        assert!(line.starts_with('{') && line.ends_with('}'), "{line}");
        assert!(line.contains(r#""tags":["startupWarnings"]"#), "{line}");
    }
    assert!(
        lines
            .iter()
            .any(|l| l.contains("Access control is not enabled")),
        "{lines:?}"
    );

    let err = run_err(&client, "admin", doc! { "getLog": "frobnicate" }).await?;
    assert_code(&err, 96, "OperationFailed");
    let err = run_err(&client, "test", doc! { "getLog": "*" }).await?;
    assert_code(&err, 13, "Unauthorized");
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// listCommands, serverStatus
// ---------------------------------------------------------------------------------------------

/// Every command implemented today, with whether it is admin-only.
const IMPLEMENTED: &[(&str, bool)] = &[
    ("buildInfo", false),
    ("buildinfo", false),
    ("connectionStatus", false),
    ("endSessions", false),
    ("getCmdLineOpts", true),
    ("getLog", true),
    ("getParameter", true),
    ("hello", false),
    ("hostInfo", false),
    ("isMaster", false),
    ("ismaster", false),
    ("killCursors", false),
    ("listCommands", false),
    ("listDatabases", true),
    ("ping", false),
    ("serverStatus", false),
    ("whatsmyuri", false),
];

#[tokio::test]
async fn list_commands_includes_every_implemented_command() -> TestResult {
    let server = TestServer::start().await?;
    let client = server.client().await?;
    let reply = run(&client, "test", doc! { "listCommands": 1 }).await?;
    let commands = reply.get_document("commands")?;
    for (name, admin_only) in IMPLEMENTED {
        let entry = commands
            .get_document(name)
            .map_err(|_| format!("{name} missing from listCommands: {commands}"))?;
        assert!(entry.get_str("help").is_ok(), "{name}: {entry}");
        assert_eq!(entry.get_bool("adminOnly")?, *admin_only, "{name}: {entry}");
    }
    // And each listed command is routed: none answers CommandNotFound when named (whatever
    // else it thinks of the argument `1`). `shutdown` would end the test early.
    for name in commands.keys().filter(|n| *n != "shutdown") {
        if let Err(e) = client.database("admin").run_command(doc! { name: 1 }).await
            && let ErrorKind::Command(ce) = *e.kind
        {
            assert_ne!(ce.code, 59, "{name} is listed but not routed: {ce:?}");
        }
    }
    Ok(())
}

fn counter(status: &Document, section: &str, field: &str) -> f64 {
    let section = status
        .get_document(section)
        .unwrap_or_else(|_| panic!("no {section} in {status}"));
    number(section.get(field)).unwrap_or_else(|| panic!("{field} is not a number in {section}"))
}

#[tokio::test]
async fn server_status() -> TestResult {
    let server = TestServer::start().await?;
    let client = server.client().await?;
    let first = run(&client, "admin", doc! { "serverStatus": 1 }).await?;
    let second = run(&client, "admin", doc! { "serverStatus": 1 }).await?;
    for status in [&first, &second] {
        assert_eq!(number(status.get("ok")), Some(1.0));
        assert!(
            number(status.get("uptime")).is_some_and(|u| u >= 0.0),
            "{status}"
        );
        assert!(
            number(status.get("uptimeMillis")).is_some_and(|u| u >= 0.0),
            "{status}"
        );
        assert!(counter(status, "connections", "current") >= 1.0, "{status}");
        assert!(
            counter(status, "connections", "totalCreated") >= 1.0,
            "{status}"
        );
        assert!(status.get_datetime("localTime").is_ok(), "{status}");
        assert!(
            status
                .get_str("host")
                .is_ok_and(|h| h.ends_with(&format!(":{}", server.addr().port()))),
            "{status}"
        );
        let mem = status.get_document("mem")?;
        assert_eq!(number(mem.get("bits")), Some(64.0), "{mem}");
        assert!(number(mem.get("resident")).is_some(), "{mem}");
        assert!(number(mem.get("virtual")).is_some(), "{mem}");
    }
    assert!(
        counter(&second, "opcounters", "command") > counter(&first, "opcounters", "command"),
        "opcounters.command: {} then {}",
        counter(&first, "opcounters", "command"),
        counter(&second, "opcounters", "command")
    );
    assert!(counter(&second, "network", "numRequests") > counter(&first, "network", "numRequests"));
    assert!(counter(&second, "network", "bytesIn") > counter(&first, "network", "bytesIn"));
    assert!(counter(&second, "network", "bytesOut") > counter(&first, "network", "bytesOut"));
    assert!(
        number(second.get("uptimeMillis")) >= number(first.get("uptimeMillis")),
        "uptime went backwards"
    );
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// endSessions, killCursors, listDatabases
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn end_sessions() -> TestResult {
    let server = TestServer::start().await?;
    let client = server.client().await?;
    let id = Binary {
        subtype: BinarySubtype::Uuid,
        bytes: vec![7; 16],
    };
    let reply = run(
        &client,
        "admin",
        doc! { "endSessions": [ { "id": id.clone() }, { "id": id } ] },
    )
    .await?;
    assert_eq!(number(reply.get("ok")), Some(1.0), "{reply}");
    let reply = run(&client, "admin", doc! { "endSessions": [] }).await?;
    assert_eq!(number(reply.get("ok")), Some(1.0), "{reply}");

    let err = run_err(&client, "admin", doc! { "endSessions": "all" }).await?;
    assert_code(&err, 14, "TypeMismatch");
    let err = run_err(&client, "admin", doc! { "endSessions": [1] }).await?;
    assert_code(&err, 14, "TypeMismatch");
    Ok(())
}

#[tokio::test]
async fn kill_cursors_reports_unknown_ids_as_not_found() -> TestResult {
    let server = TestServer::start().await?;
    let client = server.client().await?;
    let reply = run(
        &client,
        "test",
        doc! { "killCursors": "c", "cursors": [12_345_i64, 67_890_i64] },
    )
    .await?;
    assert_eq!(number(reply.get("ok")), Some(1.0), "{reply}");
    assert_eq!(
        reply.get_array("cursorsNotFound")?,
        &vec![Bson::Int64(12_345), Bson::Int64(67_890)]
    );
    for field in ["cursorsKilled", "cursorsAlive", "cursorsUnknown"] {
        assert!(reply.get_array(field)?.is_empty(), "{field}: {reply}");
    }

    let err = run_err(&client, "test", doc! { "killCursors": "c" }).await?;
    assert_eq!(err.code, 40414, "{err:?}");
    let err = run_err(
        &client,
        "test",
        doc! { "killCursors": "c", "cursors": ["x"] },
    )
    .await?;
    assert_code(&err, 14, "TypeMismatch");
    Ok(())
}

#[tokio::test]
async fn kill_cursors_without_cursors_is_idl_failed_to_parse() -> TestResult {
    let server = TestServer::start().await?;
    let client = server.client().await?;
    let err = run_err(&client, "test", doc! { "killCursors": "c" }).await?;
    assert_code(&err, 40414, "IDLFailedToParse");
    assert_eq!(
        err.message,
        "BSON field 'killCursors.cursors' is missing but a required field"
    );
    Ok(())
}

#[tokio::test]
async fn list_databases_of_an_empty_server() -> TestResult {
    let server = TestServer::start().await?;
    let client = server.client().await?;
    let reply = run(&client, "admin", doc! { "listDatabases": 1 }).await?;
    assert!(reply.get_array("databases")?.is_empty(), "{reply}");
    assert_eq!(number(reply.get("totalSize")), Some(0.0), "{reply}");
    assert_eq!(number(reply.get("ok")), Some(1.0));

    let reply = run(
        &client,
        "admin",
        doc! { "listDatabases": 1, "nameOnly": true },
    )
    .await?;
    assert!(reply.get_array("databases")?.is_empty(), "{reply}");
    assert!(reply.get("totalSize").is_none(), "nameOnly: {reply}");

    assert!(client.list_database_names().await?.is_empty());
    assert!(client.list_databases().await?.is_empty());

    let err = run_err(&client, "test", doc! { "listDatabases": 1 }).await?;
    assert_code(&err, 13, "Unauthorized");
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Unknown commands
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn unknown_command_is_command_not_found_and_the_client_carries_on() -> TestResult {
    let server = TestServer::start().await?;
    let client = server.client().await?;
    run(&client, "admin", doc! { "ping": 1 }).await?;
    for db in ["admin", "test"] {
        let err = run_err(&client, db, doc! { "frobnicate": 1 }).await?;
        assert_code(&err, 59, "CommandNotFound");
        assert_eq!(err.message, "no such command: 'frobnicate'");
    }
    // Command names are case-sensitive.
    let err = run_err(&client, "admin", doc! { "PING": 1 }).await?;
    assert_code(&err, 59, "CommandNotFound");
    let reply = run(&client, "admin", doc! { "ping": 1 }).await?;
    assert_eq!(number(reply.get("ok")), Some(1.0), "{reply}");
    Ok(())
}
