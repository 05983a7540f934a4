//! Idle sessions expire (`logicalSessionTimeoutMinutes`, 30): once the server's clock has moved
//! past the timeout, the session reaper forgets a session with what it holds. Its retryable
//! write records go (the same `txnNumber` runs again), its open transaction is aborted (its
//! next statement answers `NoSuchTransaction`), its cursors are killed, and
//! `$listLocalSessions` no longer lists it; records found on disk at a restart expire too
//! (their last use, written at shutdown, is checked by `retryable`'s unit tests: a restart
//! cannot move the clock back to tell it from the startup instant).

mod common;

use std::time::Duration;

use bson::{Bson, Document, doc};
use common::{TestResult, TestServer, advance_clock, assert_command_error, command_error};
use mongodb::{Client, ClientSession};

const DB: &str = "expiry_test";
const SET: &str = "rs0";
const MINUTE_MS: i64 = 60 * 1000;

async fn start() -> TestResult<(TestServer, Client)> {
    let server = TestServer::start_with(|c| {
        c.repl_set = Some(SET.to_owned());
        c.enable_test_commands = true;
    })
    .await?;
    let client = server
        .client_discovering(&format!("replicaSet={SET}"))
        .await?;
    Ok((server, client))
}

/// `$inc` of `n` in document 1, in `session` at transaction number 1, statement 0: a
/// retryable write a driver would retry with the same number.
async fn increment(client: &Client, session: &mut ClientSession) -> TestResult<Document> {
    Ok(client
        .database(DB)
        .run_command(doc! {
            "update": "c",
            "updates": [{ "q": { "_id": 1 }, "u": { "$inc": { "n": 1 } } }],
            "txnNumber": 1_i64,
        })
        .session(session)
        .await?)
}

async fn n(client: &Client) -> TestResult<i32> {
    let found = client
        .database(DB)
        .collection::<Document>("c")
        .find_one(doc! { "_id": 1 })
        .await?
        .ok_or("document 1 is gone")?;
    Ok(found.get_i32("n")?)
}

/// Whether `$listLocalSessions` lists `session`.
async fn listed(client: &Client, session: &ClientSession) -> TestResult<bool> {
    let Some(Bson::Binary(id)) = session.id().get("id") else {
        return Err("the session has no id".into());
    };
    let reply = client
        .database("admin")
        .run_command(doc! {
            "aggregate": 1,
            "pipeline": [
                { "$listLocalSessions": {} },
                { "$match": { "_id.id": id.clone() } },
            ],
            "cursor": {},
        })
        .await?;
    Ok(!reply
        .get_document("cursor")?
        .get_array("firstBatch")?
        .is_empty())
}

/// Waits (a few seconds at most) until `$listLocalSessions` no longer lists `session`: the
/// reaper, woken by the clock's move, has expired it.
async fn wait_expired(client: &Client, session: &ClientSession) -> TestResult {
    for _ in 0..200 {
        if !listed(client, session).await? {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    Err("the session was not expired".into())
}

#[tokio::test]
async fn an_idle_session_forgets_its_retryable_writes() -> TestResult {
    let (_server, client) = start().await?;
    client
        .database(DB)
        .collection::<Document>("c")
        .insert_one(doc! { "_id": 1, "n": 0 })
        .await?;
    let mut session = client.start_session().await?;
    increment(&client, &mut session).await?;
    // Within the timeout the retry is answered from the record.
    advance_clock(&client, 29 * MINUTE_MS).await?;
    let retried = increment(&client, &mut session).await?;
    assert_eq!(retried.get_i32("nModified")?, 1, "{retried}");
    assert_eq!(n(&client).await?, 1);
    assert!(listed(&client, &session).await?);
    // 31 minutes after its last use, the session is gone, and number 1 runs again.
    advance_clock(&client, 31 * MINUTE_MS).await?;
    wait_expired(&client, &session).await?;
    increment(&client, &mut session).await?;
    assert_eq!(n(&client).await?, 2);
    assert!(listed(&client, &session).await?, "used again, it is back");
    Ok(())
}

#[tokio::test]
async fn an_idle_sessions_transaction_is_aborted() -> TestResult {
    let (_server, client) = start().await?;
    let c = client.database(DB).collection::<Document>("c");
    c.insert_one(doc! { "_id": 0 }).await?;
    let mut session = client.start_session().await?;
    session.start_transaction().await?;
    c.insert_one(doc! { "_id": 1 })
        .session(&mut session)
        .await?;
    advance_clock(&client, 31 * MINUTE_MS).await?;
    wait_expired(&client, &session).await?;
    let err = c
        .insert_one(doc! { "_id": 2 })
        .session(&mut session)
        .await
        .expect_err("the transaction was aborted");
    assert_command_error(
        command_error(&err).ok_or("not a command error")?,
        251,
        "NoSuchTransaction",
    );
    // Its write was never committed.
    assert_eq!(c.count_documents(doc! {}).await?, 1);
    Ok(())
}

#[tokio::test]
async fn an_idle_sessions_cursors_are_killed() -> TestResult {
    let (_server, client) = start().await?;
    let c = client.database(DB).collection::<Document>("c");
    c.insert_many((0..3).map(|i| doc! { "_id": i })).await?;
    let mut session = client.start_session().await?;
    // Exempt from the cursor timeout: only the session's expiry closes it.
    let reply = client
        .database(DB)
        .run_command(doc! { "find": "c", "batchSize": 1, "noCursorTimeout": true })
        .session(&mut session)
        .await?;
    let id = reply.get_document("cursor")?.get_i64("id")?;
    advance_clock(&client, 31 * MINUTE_MS).await?;
    wait_expired(&client, &session).await?;
    let err = client
        .database(DB)
        .run_command(doc! { "getMore": id, "collection": "c" })
        .session(&mut session)
        .await
        .expect_err("the cursor was killed");
    assert_command_error(
        command_error(&err).ok_or("not a command error")?,
        43,
        "CursorNotFound",
    );
    Ok(())
}

#[tokio::test]
async fn records_found_on_disk_at_a_restart_expire_too() -> TestResult {
    let dir = std::env::temp_dir().join(format!("ebb-session-expiry-{}", std::process::id()));
    if dir.exists() {
        std::fs::remove_dir_all(&dir)?;
    }
    std::fs::create_dir_all(&dir)?;
    let configure = |c: &mut ebb::Config| {
        c.repl_set = Some(SET.to_owned());
        c.enable_test_commands = true;
    };
    let uri = format!("replicaSet={SET}");
    let server = TestServer::start_durable(&dir, configure).await?;
    let client = server.client_discovering(&uri).await?;
    client
        .database(DB)
        .collection::<Document>("c")
        .insert_one(doc! { "_id": 1, "n": 0 })
        .await?;
    let mut session = client.start_session().await?;
    increment(&client, &mut session).await?;
    let lsid = session.id().clone();
    drop(session);
    drop(client);
    server.stop().await?;

    let server = TestServer::start_durable(&dir, configure).await?;
    let client = server.client_discovering(&uri).await?;
    // A session used after the restart, expired by the same pass as the dormant one.
    let mut marker = client.start_session().await?;
    client
        .database(DB)
        .run_command(doc! { "ping": 1 })
        .session(&mut marker)
        .await?;
    advance_clock(&client, 31 * MINUTE_MS).await?;
    wait_expired(&client, &marker).await?;
    // The session's record is gone: number 1 runs again.
    let reply = server
        .raw()
        .await?
        .command(
            DB,
            doc! {
                "update": "c",
                "updates": [{ "q": { "_id": 1 }, "u": { "$inc": { "n": 1 } } }],
                "txnNumber": 1_i64,
                "lsid": lsid,
            },
        )
        .await?;
    assert_eq!(reply.get_i32("nModified")?, 1, "{reply}");
    assert_eq!(n(&client).await?, 2);
    drop(client);
    server.stop().await?;
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}
