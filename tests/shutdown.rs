//! Graceful shutdown and the connection limit.
//!
//! These tests run on tokio's current-thread runtime (the `#[tokio::test]` default), where the
//! server's tasks and the test share one thread. That makes "the server closed my socket" a
//! sufficient signal that the connection task has finished, permit released and counters
//! updated: all of that happens in the same poll as the close, before the test can run again.

mod common;

use bson::{Document, doc};
use common::{IO_TIMEOUT, RawConn, TestResult, TestServer, integer, number, op_msg};
use tokio::net::TcpStream;

/// Long enough that a shutdown finishing within [`IO_TIMEOUT`] cannot be the drain timeout
/// expiring: idle connections must not hold shutdown up.
const LONG_DRAIN_SECS: u64 = 600;

async fn start_with_long_drain() -> TestResult<TestServer> {
    Ok(TestServer::start_with(|c| c.shutdown_timeout_secs = LONG_DRAIN_SECS).await?)
}

/// Asserts that nothing listens on the server's address any more.
async fn assert_refused(server: &TestServer) {
    match tokio::time::timeout(IO_TIMEOUT, TcpStream::connect(server.addr())).await {
        Ok(Err(e)) => assert_eq!(
            e.kind(),
            std::io::ErrorKind::ConnectionRefused,
            "unexpected connect error {e}"
        ),
        Ok(Ok(_)) => panic!("a connection was accepted after shutdown"),
        Err(elapsed) => panic!("connect neither failed nor succeeded: {elapsed}"),
    }
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
