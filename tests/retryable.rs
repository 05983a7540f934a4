//! Retryable writes on a replica set of one (`--replSet`): a statement retried with the same
//! `lsid`, `txnNumber` and `stmtId` is not executed again and answers as the first time did,
//! also after a restart; older transaction numbers are refused; the driver's default
//! (`retryWrites=true`) works.

mod common;

use bson::{Bson, Document, doc};
use common::{TestResult, TestServer, assert_command_error, command_error};
use mongodb::{Client, ClientSession};

const DB: &str = "retry_test";
const SET: &str = "rs0";

/// A command `body` run in `session` with `txnNumber` set, as a driver retrying it sends it.
async fn run_in(
    client: &Client,
    session: &mut ClientSession,
    mut body: Document,
    txn: i64,
) -> mongodb::error::Result<Document> {
    body.insert("txnNumber", txn);
    client.database(DB).run_command(body).session(session).await
}

async fn count(client: &Client, filter: Document) -> TestResult<u64> {
    Ok(client
        .database(DB)
        .collection::<Document>("c")
        .count_documents(filter)
        .await?)
}

#[tokio::test]
async fn the_drivers_default_retryable_writes_work() -> TestResult {
    let server = TestServer::start_replset(SET).await?;
    let client = server
        .client_discovering(&format!("replicaSet={SET}"))
        .await?;
    let c = client.database(DB).collection::<Document>("c");
    c.insert_one(doc! { "_id": 1, "n": 0 }).await?;
    c.insert_many([doc! { "_id": 2 }, doc! { "_id": 3 }])
        .await?;
    c.update_one(doc! { "_id": 1 }, doc! { "$inc": { "n": 1 } })
        .await?;
    let found = c
        .find_one_and_update(doc! { "_id": 1 }, doc! { "$inc": { "n": 1 } })
        .await?;
    assert_eq!(found, Some(doc! { "_id": 1, "n": 1 }));
    c.delete_one(doc! { "_id": 3 }).await?;
    // Multi-document writes are not retryable: drivers send them without a txnNumber.
    c.update_many(doc! {}, doc! { "$set": { "m": true } })
        .await?;
    c.delete_many(doc! { "_id": 2 }).await?;
    assert_eq!(count(&client, doc! {}).await?, 1);
    Ok(())
}

/// Each write command, sent twice with the same transaction number, runs once; the second
/// answers the first's counts and names the statements it retried.
#[tokio::test]
async fn a_retried_statement_runs_once_and_answers_the_same() -> TestResult {
    let server = TestServer::start_replset(SET).await?;
    let client = server
        .client_discovering(&format!("replicaSet={SET}&retryWrites=false"))
        .await?;
    let mut s = client.start_session().await?;
    let insert = doc! { "insert": "c", "documents": [{ "_id": 1, "n": 0 }, { "_id": 2, "n": 0 }] };
    for _ in 0..2 {
        let reply = run_in(&client, &mut s, insert.clone(), 1).await?;
        assert_eq!(reply.get_i32("n")?, 2, "{reply}");
        assert!(
            !reply.contains_key("writeErrors"),
            "no duplicate key: {reply}"
        );
    }
    let reply = run_in(&client, &mut s, insert.clone(), 1).await?;
    assert_eq!(
        reply.get_array("retriedStmtIds")?,
        &vec![Bson::Int32(0), Bson::Int32(1)]
    );
    let update = doc! { "update": "c", "updates": [
        { "q": { "_id": 1 }, "u": { "$inc": { "n": 1 } } },
        { "q": { "_id": 9 }, "u": { "$inc": { "n": 1 } }, "upsert": true },
    ] };
    let first = run_in(&client, &mut s, update.clone(), 2).await?;
    let again = run_in(&client, &mut s, update.clone(), 2).await?;
    for key in ["n", "nModified"] {
        assert_eq!(first.get_i32(key)?, again.get_i32(key)?, "{key}");
    }
    assert_eq!(first.get_array("upserted")?, again.get_array("upserted")?);
    assert_eq!(
        count(&client, doc! { "_id": 1, "n": 1 }).await?,
        1,
        "incremented once"
    );
    assert_eq!(count(&client, doc! { "_id": 9 }).await?, 1, "upserted once");
    let fam = doc! { "findAndModify": "c", "query": { "_id": 1 }, "update": { "$inc": { "n": 10 } }, "new": true };
    let first = run_in(&client, &mut s, fam.clone(), 3).await?;
    let again = run_in(&client, &mut s, fam.clone(), 3).await?;
    assert_eq!(first.get_document("value")?, &doc! { "_id": 1, "n": 11 });
    assert_eq!(again.get_document("value")?, &doc! { "_id": 1, "n": 11 });
    assert_eq!(again.get_i32("retriedStmtId")?, 0);
    assert_eq!(count(&client, doc! { "_id": 1, "n": 11 }).await?, 1);
    let delete = doc! { "delete": "c", "deletes": [{ "q": { "_id": 2 }, "limit": 1 }] };
    let first = run_in(&client, &mut s, delete.clone(), 4).await?;
    let again = run_in(&client, &mut s, delete.clone(), 4).await?;
    assert_eq!((first.get_i32("n")?, again.get_i32("n")?), (1, 1));
    // An older number is refused; a newer one runs its statements afresh.
    let err = run_in(&client, &mut s, insert.clone(), 3)
        .await
        .expect_err("too old");
    assert_command_error(
        command_error(&err).ok_or("not a command error")?,
        225,
        "TransactionTooOld",
    );
    let update =
        doc! { "update": "c", "updates": [{ "q": { "_id": 1 }, "u": { "$inc": { "n": 1 } } }] };
    run_in(&client, &mut s, update, 5).await?;
    assert_eq!(count(&client, doc! { "_id": 1, "n": 12 }).await?, 1);
    Ok(())
}

/// Statements that change many documents are not retryable (mongod's 72 for the statement),
/// and `txnNumber` is for the retryable write commands only (50768).
#[tokio::test]
async fn what_retryable_writes_refuse() -> TestResult {
    let server = TestServer::start_replset(SET).await?;
    let client = server
        .client_discovering(&format!("replicaSet={SET}&retryWrites=false"))
        .await?;
    let mut s = client.start_session().await?;
    let reply = run_in(
        &client,
        &mut s,
        doc! { "update": "c", "updates": [{ "q": {}, "u": { "$set": { "a": 1 } }, "multi": true }] },
        1,
    )
    .await?;
    let errors = reply.get_array("writeErrors")?;
    let first = errors
        .first()
        .and_then(Bson::as_document)
        .ok_or("no write error")?;
    assert_eq!(first.get_i32("code")?, 72, "{reply}");
    let reply = run_in(
        &client,
        &mut s,
        doc! { "delete": "c", "deletes": [{ "q": {}, "limit": 0 }] },
        2,
    )
    .await?;
    assert!(reply.contains_key("writeErrors"), "{reply}");
    let err = run_in(&client, &mut s, doc! { "find": "c" }, 3)
        .await
        .expect_err("find is not a retryable write");
    assert_command_error(
        command_error(&err).ok_or("not a command error")?,
        50768,
        "Location50768",
    );
    Ok(())
}

/// The record of a statement is committed with its write: after a restart, the retry is still
/// answered from it, and the write is not applied twice.
#[tokio::test]
async fn a_retry_after_a_restart_is_not_applied_again() -> TestResult {
    let dir = tempfile::Builder::new()
        .prefix("ebb-retry-")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))?;
    let set = |c: &mut ebb::Config| c.repl_set = Some(SET.to_owned());
    let server = TestServer::start_durable(dir.path(), set).await?;
    let client = server
        .client_discovering(&format!("replicaSet={SET}&retryWrites=false"))
        .await?;
    let mut s = client.start_session().await?;
    let lsid = s.id().clone();
    let update = doc! { "update": "c", "updates": [{ "q": { "_id": 1 }, "u": { "$inc": { "n": 1 } }, "upsert": true }] };
    run_in(&client, &mut s, update.clone(), 7).await?;
    drop(s);
    drop(client);
    server.stop().await?;
    let server = TestServer::start_durable(dir.path(), set).await?;
    let client = server
        .client_discovering(&format!("replicaSet={SET}&retryWrites=false"))
        .await?;
    let mut body = update.clone();
    body.insert("txnNumber", 7_i64);
    body.insert("lsid", lsid);
    let reply = client.database(DB).run_command(body).await?;
    assert_eq!(
        reply.get_array("retriedStmtIds")?,
        &vec![Bson::Int32(0)],
        "{reply}"
    );
    assert_eq!(
        count(&client, doc! { "_id": 1, "n": 1 }).await?,
        1,
        "applied once"
    );
    server.stop().await?;
    Ok(())
}

/// `endSessions` drops what a session's retryable writes recorded: the same number then runs
/// its statements again (a driver never reuses an ended session).
#[tokio::test]
async fn ending_a_session_drops_its_records() -> TestResult {
    let server = TestServer::start_replset(SET).await?;
    let client = server
        .client_discovering(&format!("replicaSet={SET}&retryWrites=false"))
        .await?;
    let mut s = client.start_session().await?;
    let update = doc! { "update": "c", "updates": [{ "q": { "_id": 1 }, "u": { "$inc": { "n": 1 } }, "upsert": true }] };
    run_in(&client, &mut s, update.clone(), 1).await?;
    let again = run_in(&client, &mut s, update.clone(), 1).await?;
    assert!(again.contains_key("retriedStmtIds"), "{again}");
    client
        .database("admin")
        .run_command(doc! { "endSessions": [s.id().clone()] })
        .await?;
    let after = run_in(&client, &mut s, update, 1).await?;
    assert!(!after.contains_key("retriedStmtIds"), "{after}");
    assert_eq!(count(&client, doc! { "_id": 1, "n": 2 }).await?, 1);
    Ok(())
}
