//! Graceful shutdown, the `shutdown` command, interrupting running commands, and the
//! connection limit.
//!
//! The in-process tests run on tokio's current-thread runtime (the `#[tokio::test]` default), where the
//! server's tasks and the test share one thread. That makes "the server closed my socket" a
//! sufficient signal that the connection task has finished, permit released and counters
//! updated: all of that happens in the same poll as the close, before the test can run again.

mod common;

use std::time::{Duration, Instant};

use bson::{Document, doc};
use common::process::EbbProcess;
use common::{IO_TIMEOUT, RawConn, TestResult, TestServer, integer, number, op_msg};
use tokio::net::TcpStream;

/// Long enough that a shutdown finishing within [`IO_TIMEOUT`] cannot be the drain timeout
/// expiring: idle connections must not hold shutdown up.
const LONG_DRAIN_SECS: u64 = 600;

async fn start_with_long_drain() -> TestResult<TestServer> {
    Ok(TestServer::start_with(|c| c.shutdown_timeout_secs = LONG_DRAIN_SECS).await?)
}

/// Asserts that nothing listens on the server's address any more.
///
/// A connection that is made, or reset, is tried again: a process this test binary forks (the
/// SIGTERM test starts the real `ebb`) holds copies of every open socket, the closed
/// listener's too, until it execs; a connection made in that window is queued on that copy
/// (the connect succeeds) and reset when it closes. Only a refusal passes: a server still
/// listening never gives one.
async fn assert_refused(server: &TestServer) {
    for _ in 0..50 {
        match tokio::time::timeout(IO_TIMEOUT, TcpStream::connect(server.addr())).await {
            Ok(Err(e)) if e.kind() == std::io::ErrorKind::ConnectionReset => {
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
            Ok(Ok(queued)) => {
                drop(queued);
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
            Ok(Err(e)) => {
                assert_eq!(
                    e.kind(),
                    std::io::ErrorKind::ConnectionRefused,
                    "unexpected connect error {e}"
                );
                return;
            }
            Err(elapsed) => panic!("connect neither failed nor succeeded: {elapsed}"),
        }
    }
    panic!("connections were still made or reset a second after shutdown");
}

#[tokio::test]
async fn shutdown_with_clients_connected_completes_and_refuses_new_connections() -> TestResult {
    let mut server = start_with_long_drain().await?;
    let client = server.client().await?;
    client
        .database("admin")
        .run_command(doc! { "ping": 1 })
        .await?;
    let mut raw = server.raw().await?;
    raw.ping().await?;

    server.trigger_shutdown();
    let outcome = tokio::time::timeout(IO_TIMEOUT, server.join())
        .await
        .map_err(|_| format!("ebb::run still running {IO_TIMEOUT:?} after shutdown"))?;
    outcome.ok_or("joined twice")??;

    // The idle connection was closed, and nothing listens any more.
    raw.expect_closed().await?;
    assert_refused(&server).await;
    Ok(())
}

#[tokio::test]
async fn shutdown_with_no_connections() -> TestResult {
    let server = TestServer::start().await?;
    let addr = server.addr();
    server.stop().await?;
    assert!(TcpStream::connect(addr).await.is_err());
    Ok(())
}

#[tokio::test]
async fn a_half_sent_message_does_not_hold_up_shutdown() -> TestResult {
    let mut server = start_with_long_drain().await?;
    let mut raw = server.raw().await?;
    raw.ping().await?;
    let request = op_msg(5, 0, &doc! { "ping": 1, "$db": "admin" });
    raw.send_raw(&request[..20]).await?;
    // Whether or not the server has read those bytes yet, it must not wait for the rest.
    let mut other = server.raw().await?;
    other.ping().await?;

    server.trigger_shutdown();
    let outcome = tokio::time::timeout(IO_TIMEOUT, server.join())
        .await
        .map_err(|_| format!("ebb::run still running {IO_TIMEOUT:?} after shutdown"))?;
    outcome.ok_or("joined twice")??;
    raw.expect_closed().await?;
    other.expect_closed().await?;
    assert_refused(&server).await;
    Ok(())
}

#[tokio::test]
async fn shutdown_requested_twice_is_harmless() -> TestResult {
    let mut server = TestServer::start().await?;
    server.trigger_shutdown();
    server.trigger_shutdown();
    let first = server.join().await;
    assert!(matches!(first, Some(Ok(()))), "{first:?}");
    assert!(server.join().await.is_none());
    Ok(())
}

async fn server_status(conn: &mut RawConn) -> TestResult<Document> {
    let status = conn.command("admin", doc! { "serverStatus": 1 }).await?;
    assert_eq!(number(status.get("ok")), Some(1.0), "{status}");
    Ok(status)
}

fn connections(status: &Document, field: &str) -> i64 {
    let section = status
        .get_document("connections")
        .unwrap_or_else(|_| panic!("no connections in {status}"));
    integer(section.get(field)).unwrap_or_else(|| panic!("no connections.{field} in {section}"))
}

#[tokio::test]
async fn connections_past_the_limit_are_closed_at_once() -> TestResult {
    let server = TestServer::start_with(|c| c.max_connections = 2).await?;
    let mut first = server.raw().await?;
    first.ping().await?;
    let mut second = server.raw().await?;
    second.ping().await?;

    // The kernel completes the TCP handshake; the server accepts and closes at once.
    let mut third = server.raw().await?;
    third.expect_closed().await?;

    let status = server_status(&mut first).await?;
    assert!(connections(&status, "rejected") >= 1, "{status}");
    assert_eq!(connections(&status, "current"), 2, "{status}");
    assert_eq!(connections(&status, "available"), 0, "{status}");

    // A request written before noticing the close is not answered either.
    let mut fourth = server.raw().await?;
    let ping = op_msg(1, 0, &doc! { "ping": 1, "$db": "admin" });
    // The write itself may fail if the close is already seen; either way no reply comes.
    let _ = fourth.send_raw(&ping).await;
    fourth.expect_closed().await?;
    let status = server_status(&mut first).await?;
    assert!(connections(&status, "rejected") >= 2, "{status}");

    // Closing one of the two frees its slot. The server closing its side in answer to ours
    // means its connection task has finished (see the module comment).
    second.shutdown_write().await?;
    second.expect_closed().await?;
    let mut replacement = server.raw().await?;
    replacement.ping().await?;
    let status = server_status(&mut replacement).await?;
    assert_eq!(connections(&status, "current"), 2, "{status}");
    first.ping().await?;

    // And the limit still holds with the replacement counted.
    let mut over = server.raw().await?;
    over.expect_closed().await?;
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Interrupting running commands: the `shutdown` command and SIGTERM on the real binary
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn the_shutdown_command_closes_the_connection_and_stops_the_server() -> TestResult {
    let mut server = start_with_long_drain().await?;
    let mut raw = server.raw().await?;
    raw.ping().await?;
    // Not on another database (the table's admin-only check), nor with a wrong argument.
    let reply = raw.command("test", doc! { "shutdown": 1 }).await?;
    common::assert_error(&reply, 13, "Unauthorized");
    let reply = raw
        .command("admin", doc! { "shutdown": 1, "force": 1 })
        .await?;
    common::assert_error(&reply, 14, "TypeMismatch");
    let reply = raw
        .command("admin", doc! { "shutdown": 1, "timeoutSecs": "5" })
        .await?;
    common::assert_error(&reply, 14, "TypeMismatch");
    let reply = raw
        .command("admin", doc! { "shutdown": 1, "bogus": 1 })
        .await?;
    common::assert_error(&reply, 40415, "IDLUnknownField");
    raw.ping().await?;

    let mut other = server.raw().await?;
    other.ping().await?;
    // Accepted: no reply, the connection closes, and so does every other one.
    let request = op_msg(
        7,
        0,
        &doc! { "shutdown": 1, "force": true, "timeoutSecs": 3, "comment": "bye", "$db": "admin" },
    );
    raw.send_raw(&request).await?;
    raw.expect_closed().await?;
    other.expect_closed().await?;
    // `ebb::run` returns by itself: the test never completed its shutdown future.
    let outcome = tokio::time::timeout(IO_TIMEOUT, server.join())
        .await
        .map_err(|_| format!("ebb::run still running {IO_TIMEOUT:?} after `shutdown`"))?;
    outcome.ok_or("joined twice")??;
    assert_refused(&server).await;
    Ok(())
}

mod binary {
    //! For the test that stops the real `ebb` binary ([`super::common::process`]) by SIGTERM
    //! in the middle of a long write batch.

    use std::time::Duration;

    use bson::{Bson, Document, doc};

    /// What the brief promises: a SIGTERM stops a busy server within this.
    pub const EXIT_DEADLINE: Duration = Duration::from_secs(5);

    pub fn counter(doc: Option<&Document>) -> i64 {
        match doc.and_then(|d| d.get("a")) {
            Some(Bson::Int32(a)) => i64::from(*a),
            Some(Bson::Int64(a)) => *a,
            other => panic!("no counter in {doc:?} ({other:?})"),
        }
    }

    /// One update command of `n` statements `{q: {}, u: {$inc: {a: 1}}}`.
    pub fn hot_batch(n: usize) -> Document {
        let stmt = doc! { "q": {}, "u": { "$inc": { "a": 1 } } };
        let updates: Vec<Bson> = (0..n).map(|_| Bson::Document(stmt.clone())).collect();
        doc! { "update": "hot", "updates": updates }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_interrupts_a_long_batch_and_keeps_acknowledged_writes() -> TestResult {
    const STATEMENTS: usize = 100_000;
    let dir = tempfile::tempdir()?;
    // The drain timeout is left at its default (10 s), longer than [`binary::EXIT_DEADLINE`]:
    // the batch must stop because it is interrupted, not because the drain gave up.
    let mut ebb = EbbProcess::start(dir.path(), &[]).await?;
    let client = ebb.client().await?;
    let db = client.database("stop");
    // Acknowledged (journaled) before the batch: these must survive.
    let early = db.collection::<Document>("early");
    early
        .insert_many((0..1_000).map(|i| doc! { "_id": i, "v": "acknowledged" }))
        .await?;
    let hot = db.collection::<Document>("hot");
    hot.insert_one(doc! { "_id": 0, "a": 0_i64 }).await?;

    let batch = tokio::spawn({
        let db = db.clone();
        async move { db.run_command(binary::hot_batch(STATEMENTS)).await }
    });
    // Wait until the batch is visibly running: each statement commits before the next.
    let started = Instant::now();
    let seen = loop {
        let a = binary::counter(hot.find_one(doc! { "_id": 0 }).await?.as_ref());
        if a >= 100 {
            break a;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the batch made no progress (a = {a})"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    let (status, took) = ebb.terminate_within(binary::EXIT_DEADLINE).await?;
    assert!(
        status.success(),
        "ebb exited with {status}; log:\n{}",
        ebb.log_text()
    );
    eprintln!("SIGTERM after a = {seen}: exited in {took:?}");

    // The batch failed as a whole, as mongod fails a write batch that is interrupted.
    let reply = tokio::time::timeout(Duration::from_secs(10), batch).await??;
    match reply {
        Err(e) => match e.kind.as_ref() {
            mongodb::error::ErrorKind::Command(c) => {
                assert_eq!(
                    (c.code, c.code_name.as_str()),
                    (11600, "InterruptedAtShutdown")
                );
                assert_eq!(c.message, "interrupted at shutdown");
            }
            other => panic!("expected InterruptedAtShutdown, got {other:?}"),
        },
        Ok(reply) => panic!("the batch finished before SIGTERM stopped it: {reply}"),
    }
    drop(client);

    // Restarted on the same directory: every acknowledged write is there, and the batch left a
    // prefix of its statements (each one atomic), at least what was seen before the signal.
    let ebb = EbbProcess::start(dir.path(), &[]).await?;
    let client = ebb.client().await?;
    let db = client.database("stop");
    let early = db.collection::<Document>("early");
    assert_eq!(
        early.count_documents(doc! { "v": "acknowledged" }).await?,
        1_000
    );
    let a = binary::counter(
        db.collection::<Document>("hot")
            .find_one(doc! { "_id": 0 })
            .await?
            .as_ref(),
    );
    assert!(
        (seen..i64::try_from(STATEMENTS)?).contains(&a),
        "after restart a = {a}, seen {seen} before SIGTERM, batch of {STATEMENTS}"
    );
    Ok(())
}
