//! Fail points through the `mongodb` driver, as the drivers' own test suites use them:
//! `configureFailPoint` with `failCommand` (only with `--enable-test-commands`).

mod common;

use std::time::{Duration, Instant};

use bson::{Document, doc};
use common::{TestResult, TestServer, assert_command_error, command_error, run_command_err};
use mongodb::Client;
use mongodb::error::{ErrorKind, WriteFailure};
use mongodb::options::ClientOptions;

const MESSAGE: &str = "Failing command via 'failCommand' failpoint";

async fn server() -> TestResult<TestServer> {
    Ok(TestServer::start_with(|c| c.enable_test_commands = true).await?)
}

/// A client that neither retries reads nor writes (so each failure is seen once), naming
/// itself `app`.
async fn client(server: &TestServer, app: &str) -> TestResult<Client> {
    let uri = format!(
        "mongodb://{}/?directConnection=true&retryReads=false&retryWrites=false",
        server.addr()
    );
    let mut options = ClientOptions::parse(uri).await?;
    options.app_name = Some(app.to_owned());
    Ok(Client::with_options(options)?)
}

/// Runs `configureFailPoint: "failCommand"` with `mode` and `data`; returns its `count`.
async fn fail_command(client: &Client, mode: bson::Bson, data: Document) -> TestResult<i64> {
    let reply = client
        .database("admin")
        .run_command(doc! { "configureFailPoint": "failCommand", "mode": mode, "data": data })
        .await?;
    assert_eq!(reply.get_f64("ok")?, 1.0, "{reply}");
    Ok(common::integer(reply.get("count")).ok_or("no count")?)
}

async fn off(client: &Client) -> TestResult<i64> {
    fail_command(client, "off".into(), doc! {}).await
}

/// Without `--enable-test-commands`, `configureFailPoint` does not exist, as on a mongod
/// without `enableTestCommands`.
#[tokio::test]
async fn needs_test_commands() -> TestResult {
    let server = TestServer::start().await?;
    let client = server.client().await?;
    let err = run_command_err(
        &client,
        "admin",
        doc! { "configureFailPoint": "failCommand", "mode": "alwaysOn" },
    )
    .await?;
    assert_command_error(&err, 59, "CommandNotFound");
    assert_eq!(err.message, "no such command: 'configureFailPoint'");
    Ok(())
}

/// mongod's answers to a fail point it does not have, to the wrong database, to a bad mode.
#[tokio::test]
async fn configure_errors() -> TestResult {
    let server = server().await?;
    let client = server.client().await?;
    let err = run_command_err(
        &client,
        "admin",
        doc! { "configureFailPoint": "hangAfterStartingIndexBuild", "mode": "alwaysOn" },
    )
    .await?;
    assert_command_error(&err, 266, "FailPointSetFailed");
    assert_eq!(err.message, "hangAfterStartingIndexBuild not found");
    let err = run_command_err(
        &client,
        "test",
        doc! { "configureFailPoint": "failCommand", "mode": "off" },
    )
    .await?;
    assert_command_error(&err, 13, "Unauthorized");
    assert_eq!(
        err.message,
        "configureFailPoint may only be run against the admin database."
    );
    let err = run_command_err(
        &client,
        "admin",
        doc! { "configureFailPoint": "failCommand", "mode": {"times": -1} },
    )
    .await?;
    assert_command_error(&err, 2, "BadValue");
    assert_eq!(err.message, "'times' option to 'mode' must be positive");
    Ok(())
}

/// `errorCode` answers that code with mongod's codeName and message, and `errorLabels`
/// replace the labels; `off` ends it and reports how many times it fired.
#[tokio::test]
async fn error_code_with_labels() -> TestResult {
    let server = server().await?;
    let client = client(&server, "labels").await?;
    let db = client.database("test");
    db.collection::<Document>("c")
        .insert_one(doc! { "a": 1 })
        .await?;
    let count = fail_command(
        &client,
        "alwaysOn".into(),
        doc! {
            "failCommands": ["find"], "errorCode": 91,
            "errorLabels": ["RetryableWriteError", "SomeLabel"],
        },
    )
    .await?;
    assert_eq!(count, 0);
    for _ in 0..2 {
        let err = db
            .run_command(doc! { "find": "c" })
            .await
            .expect_err("find must fail");
        let ce = command_error(&err).ok_or("not a command error")?;
        assert_command_error(ce, 91, "ShutdownInProgress");
        assert_eq!(ce.message, MESSAGE);
        assert!(err.contains_label("RetryableWriteError"), "{err:?}");
        assert!(err.contains_label("SomeLabel"), "{err:?}");
    }
    // Other commands run.
    db.run_command(doc! { "count": "c" }).await?;
    // configureFailPoint is never failed, even when named.
    fail_command(
        &client,
        "alwaysOn".into(),
        doc! { "failCommands": ["configureFailPoint", "find"], "errorCode": 8 },
    )
    .await?;
    assert_eq!(off(&client).await?, 2);
    let found = db.run_command(doc! { "find": "c" }).await?;
    assert_eq!(found.get_f64("ok")?, 1.0);
    Ok(())
}

/// `{times: 2}` fails exactly the next two matching commands; `{skip: 1}` lets one through.
#[tokio::test]
async fn times_and_skip() -> TestResult {
    let server = server().await?;
    let client = client(&server, "times").await?;
    let coll = client.database("test").collection::<Document>("c");
    fail_command(
        &client,
        doc! { "times": 2 }.into(),
        doc! { "failCommands": ["insert"], "errorCode": 2 },
    )
    .await?;
    for i in 0..2 {
        let err = coll
            .insert_one(doc! { "i": i })
            .await
            .expect_err("insert must fail");
        assert_command_error(
            command_error(&err).ok_or("not a command error")?,
            2,
            "BadValue",
        );
    }
    coll.insert_one(doc! { "i": 2 }).await?;
    coll.insert_one(doc! { "i": 3 }).await?;
    assert_eq!(coll.count_documents(doc! {}).await?, 2);

    fail_command(
        &client,
        doc! { "skip": 1 }.into(),
        doc! { "failCommands": ["insert"], "errorCode": 2 },
    )
    .await?;
    coll.insert_one(doc! { "i": 4 }).await?;
    assert!(coll.insert_one(doc! { "i": 5 }).await.is_err());
    assert!(coll.insert_one(doc! { "i": 6 }).await.is_err());
    assert_eq!(off(&client).await?, 4);
    Ok(())
}

/// `closeConnection` closes the connection without a reply: the driver sees a network error
/// and the next command works on a new connection.
#[tokio::test]
async fn close_connection() -> TestResult {
    let server = server().await?;
    let client = client(&server, "close").await?;
    let coll = client.database("test").collection::<Document>("c");
    coll.insert_one(doc! { "a": 1 }).await?;
    fail_command(
        &client,
        doc! { "times": 1 }.into(),
        doc! { "failCommands": ["insert"], "closeConnection": true },
    )
    .await?;
    let err = coll
        .insert_one(doc! { "a": 2 })
        .await
        .expect_err("insert must fail");
    assert!(
        matches!(*err.kind, ErrorKind::Io(_)),
        "expected a network error, got {err:?}"
    );
    coll.insert_one(doc! { "a": 3 }).await?;
    // The insert never ran.
    assert_eq!(coll.count_documents(doc! {}).await?, 2);

    // On the wire: no reply, the connection ends.
    fail_command(
        &client,
        doc! { "times": 1 }.into(),
        doc! { "failCommands": ["ping"], "closeConnection": true },
    )
    .await?;
    let mut raw = server.raw().await?;
    let id = raw.next_request_id();
    raw.send_raw(&common::op_msg(id, 0, &doc! { "ping": 1, "$db": "admin" }))
        .await?;
    raw.expect_closed().await?;
    server.raw().await?.ping().await?;
    Ok(())
}

/// `blockConnection` delays the command by `blockTimeMS`, then runs it (or fails it with
/// `errorCode`); the delay counts against `maxTimeMS`.
#[tokio::test]
async fn block_connection() -> TestResult {
    let server = server().await?;
    let client = client(&server, "block").await?;
    let db = client.database("test");
    db.collection::<Document>("c")
        .insert_one(doc! { "a": 1 })
        .await?;
    let block = doc! { "failCommands": ["find"], "blockConnection": true, "blockTimeMS": 300 };
    fail_command(&client, doc! { "times": 1 }.into(), block.clone()).await?;
    let started = Instant::now();
    let reply = db.run_command(doc! { "find": "c" }).await?;
    assert!(
        started.elapsed() >= Duration::from_millis(300),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(
        reply.get_document("cursor")?.get_array("firstBatch")?.len(),
        1
    );
    // Not blocked any more.
    let started = Instant::now();
    db.run_command(doc! { "find": "c" }).await?;
    assert!(started.elapsed() < Duration::from_millis(300));

    let mut failing = block.clone();
    failing.insert("errorCode", 112);
    fail_command(&client, doc! { "times": 1 }.into(), failing).await?;
    let started = Instant::now();
    let err = run_command_err(&client, "test", doc! { "find": "c" }).await?;
    assert!(started.elapsed() >= Duration::from_millis(300));
    assert_command_error(&err, 112, "WriteConflict");

    fail_command(&client, doc! { "times": 1 }.into(), block).await?;
    let err = run_command_err(&client, "test", doc! { "find": "c", "maxTimeMS": 50 }).await?;
    assert_command_error(&err, 50, "MaxTimeMSExpired");

    // blockConnection without blockTimeMS: mongod's error when it fires.
    fail_command(
        &client,
        doc! { "times": 1 }.into(),
        doc! { "failCommands": ["find"], "blockConnection": true },
    )
    .await?;
    let err = run_command_err(&client, "test", doc! { "find": "c" }).await?;
    assert_command_error(&err, 72, "InvalidOptions");
    assert_eq!(
        err.message,
        "must specify 'blockTimeMS' when 'blockConnection' is true"
    );
    Ok(())
}

/// `appName` applies the fail point only to connections whose handshake named that
/// application.
#[tokio::test]
async fn app_name_filters() -> TestResult {
    let server = server().await?;
    let target = client(&server, "target-app").await?;
    let other = client(&server, "other-app").await?;
    fail_command(
        &other,
        "alwaysOn".into(),
        doc! { "failCommands": ["ping"], "errorCode": 2, "appName": "target-app" },
    )
    .await?;
    other
        .database("admin")
        .run_command(doc! { "ping": 1 })
        .await?;
    let err = run_command_err(&target, "admin", doc! { "ping": 1 }).await?;
    assert_command_error(&err, 2, "BadValue");
    other
        .database("admin")
        .run_command(doc! { "ping": 1 })
        .await?;
    assert_eq!(off(&other).await?, 1);
    target
        .database("admin")
        .run_command(doc! { "ping": 1 })
        .await?;

    // The handshake's own hello already carries the name, as in mongod (which reads the
    // client metadata before it evaluates fail points): drivers block or fail it this way.
    fail_command(
        &other,
        "alwaysOn".into(),
        doc! { "failCommands": ["isMaster"], "errorCode": 91, "appName": "handshake-app" },
    )
    .await?;
    let client_doc = doc! {
        "application": { "name": "handshake-app" },
        "driver": { "name": "raw", "version": "0" },
        "os": { "type": "linux" },
    };
    let mut raw = server.raw().await?;
    let reply = raw
        .command("admin", doc! { "hello": 1, "client": client_doc.clone() })
        .await?;
    assert_eq!(reply.get_i32("code")?, 91, "{reply}");
    assert_eq!(reply.get_str("codeName")?, "ShutdownInProgress");
    // A handshake naming another application is answered.
    let mut raw = server.raw().await?;
    let mut named_other = client_doc;
    named_other.insert("application", doc! { "name": "another" });
    let reply = raw
        .command("admin", doc! { "hello": 1, "client": named_other })
        .await?;
    assert_eq!(reply.get_f64("ok")?, 1.0, "{reply}");
    assert_eq!(off(&other).await?, 2);
    Ok(())
}

/// `writeConcernError`: the insert runs and its reply carries the given document.
#[tokio::test]
async fn write_concern_error() -> TestResult {
    let server = server().await?;
    let client = client(&server, "wce").await?;
    let db = client.database("test");
    let wce = doc! { "code": 100, "codeName": "UnsatisfiableWriteConcern", "errmsg": "Not enough data-bearing nodes" };
    fail_command(
        &client,
        doc! { "times": 1 }.into(),
        doc! { "failCommands": ["insert"], "writeConcernError": wce.clone() },
    )
    .await?;
    let reply = db
        .run_command(doc! { "insert": "c", "documents": [{ "_id": 1 }] })
        .await?;
    assert_eq!(reply.get_i32("n")?, 1, "{reply}");
    assert_eq!(reply.get_document("writeConcernError")?, &wce);
    assert_eq!(reply.get_f64("ok")?, 1.0);

    // Through the driver's insert, the write concern error is the outcome; the write happened.
    fail_command(
        &client,
        doc! { "times": 1 }.into(),
        doc! { "failCommands": ["insert"], "writeConcernError": wce },
    )
    .await?;
    let coll = db.collection::<Document>("c");
    let err = coll
        .insert_one(doc! { "_id": 2 })
        .await
        .expect_err("the write concern error is reported");
    match &*err.kind {
        ErrorKind::Write(WriteFailure::WriteConcernError(e)) => {
            assert_eq!(e.code, 100);
            assert_eq!(e.code_name, "UnsatisfiableWriteConcern");
        }
        other => return Err(format!("expected a write concern error, got {other:?}").into()),
    }
    assert_eq!(coll.count_documents(doc! {}).await?, 2);
    // A command without a write concern is never given one.
    fail_command(
        &client,
        "alwaysOn".into(),
        doc! { "failCommands": ["find"], "writeConcernError": { "code": 100 } },
    )
    .await?;
    let reply = db.run_command(doc! { "find": "c" }).await?;
    assert!(reply.get("writeConcernError").is_none(), "{reply}");
    assert_eq!(off(&client).await?, 2);
    Ok(())
}
