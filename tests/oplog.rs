//! `local.oplog.rs` on a replica set member: its entries in mongod's shape, read with `find`
//! (both natural orders, a `ts` range, `getMore`), `count`, `aggregate`, listed and measured as
//! a capped collection, refused to writers; its retention (`--oplogSizeMB`) and
//! `replSetResizeOplog`; and its absence on a standalone.

mod common;

use std::time::{Duration, Instant};

use bson::{Bson, Document, Timestamp, doc};
use common::{
    TestResult, TestServer, advance_clock, assert_command_error, is_ok, run_command,
    run_command_err,
};

const SET: &str = "rs0";

/// Every document of `cursor`.
async fn drain(mut cursor: mongodb::Cursor<Document>) -> TestResult<Vec<Document>> {
    let mut out = Vec::new();
    while cursor.advance().await? {
        out.push(cursor.deserialize_current()?);
    }
    Ok(out)
}

async fn direct(server: &TestServer) -> mongodb::error::Result<mongodb::Client> {
    server
        .client_discovering("directConnection=true&retryWrites=false")
        .await
}

/// The oplog's entries matching `filter`, in `order` (`$natural`), through `find` with small
/// batches (so `getMore` runs).
async fn entries(
    client: &mongodb::Client,
    filter: Document,
    order: i32,
) -> TestResult<Vec<Document>> {
    let cursor = client
        .database("local")
        .collection::<Document>("oplog.rs")
        .find(filter)
        .sort(doc! { "$natural": order })
        .batch_size(2)
        .await?;
    drain(cursor).await
}

fn ts(doc: &Document) -> Timestamp {
    doc.get_timestamp("ts")
        .unwrap_or_else(|_| panic!("no ts in {doc}"))
}

fn key(t: Timestamp) -> (u32, u32) {
    (t.time, t.increment)
}

#[tokio::test]
async fn entries_appear_in_mongods_shape() -> TestResult {
    let server = TestServer::start_replset(SET).await?;
    let client = direct(&server).await?;
    let coll = client.database("shape").collection::<Document>("c");
    // Big enough that the update's diff is smaller than the document (else mongod, and Ebb,
    // log the whole new document).
    let pad = "p".repeat(100);
    coll.insert_one(doc! { "_id": 1, "a": 1, "pad": pad.as_str() })
        .await?;
    coll.update_one(doc! { "_id": 1 }, doc! { "$set": { "a": 2 } })
        .await?;
    coll.delete_one(doc! { "_id": 1 }).await?;
    coll.drop().await?;

    let crud = entries(&client, doc! { "ns": "shape.c" }, 1).await?;
    let ops: Vec<&str> = crud.iter().map(|e| e.get_str("op").unwrap()).collect();
    assert_eq!(ops, ["i", "u", "d"], "{crud:?}");
    let insert = &crud[0];
    let keys: Vec<&str> = insert.keys().map(String::as_str).collect();
    assert_eq!(keys, ["op", "ns", "ui", "o", "o2", "ts", "t", "v", "wall"]);
    assert_eq!(
        insert.get_document("o")?,
        &doc! { "_id": 1, "a": 1, "pad": pad.as_str() }
    );
    assert_eq!(insert.get_document("o2")?, &doc! { "_id": 1 });
    assert_eq!(insert.get_i64("v")?, 2);
    assert!(matches!(insert.get("ui"), Some(Bson::Binary(b)) if b.bytes.len() == 16));
    assert_eq!(
        crud[1].get_document("o")?,
        &doc! { "$v": 2, "diff": { "u": { "a": 2 } } }
    );
    assert_eq!(crud[2].get_document("o")?, &doc! { "_id": 1 });

    let commands = entries(&client, doc! { "ns": "shape.$cmd" }, 1).await?;
    let names: Vec<&str> = commands
        .iter()
        .map(|e| e.get_document("o").unwrap().keys().next().unwrap().as_str())
        .collect();
    assert_eq!(names, ["create", "drop"], "{commands:?}");
    // Times rise with the commit order.
    let create_ts = ts(&commands[0]);
    let drop_ts = ts(&commands[1]);
    assert!(key(create_ts) < key(ts(&crud[0])));
    assert!(key(ts(&crud[2])) < key(drop_ts));
    Ok(())
}

#[tokio::test]
async fn natural_order_ts_ranges_count_and_aggregate() -> TestResult {
    let server = TestServer::start_replset(SET).await?;
    let client = direct(&server).await?;
    let coll = client.database("order").collection::<Document>("c");
    for i in 0..10 {
        coll.insert_one(doc! { "_id": i }).await?;
    }
    let forward = entries(&client, doc! { "ns": "order.c" }, 1).await?;
    let ids: Vec<i32> = forward
        .iter()
        .map(|e| e.get_document("o").unwrap().get_i32("_id").unwrap())
        .collect();
    assert_eq!(ids, (0..10).collect::<Vec<_>>());
    let mut backward = entries(&client, doc! { "ns": "order.c" }, -1).await?;
    backward.reverse();
    assert_eq!(backward, forward);

    // A `ts` range: the entries after the 4th, up to the 7th.
    let (from, to) = (ts(&forward[3]), ts(&forward[6]));
    let range = entries(&client, doc! { "ts": { "$gt": from, "$lte": to } }, 1).await?;
    assert_eq!(range, forward[4..=6].to_vec());
    let exact = entries(&client, doc! { "ts": from }, -1).await?;
    assert_eq!(exact, forward[3..=3].to_vec());
    // `sort: {ts: -1}` and a limit, skip and projection.
    let oplog = client.database("local").collection::<Document>("oplog.rs");
    let newest: Vec<Document> = drain(
        oplog
            .find(doc! { "ns": "order.c" })
            .sort(doc! { "ts": -1 })
            .skip(1)
            .limit(2)
            .projection(doc! { "o": 1, "_id": 0 })
            .await?,
    )
    .await?;
    assert_eq!(
        newest,
        [doc! { "o": { "_id": 8 } }, doc! { "o": { "_id": 7 } }]
    );
    // A sort in memory.
    let by_id: Vec<Document> = drain(
        oplog
            .find(doc! { "ns": "order.c" })
            .sort(doc! { "o._id": -1 })
            .limit(3)
            .await?,
    )
    .await?;
    let ids: Vec<i32> = by_id
        .iter()
        .map(|e| e.get_document("o").unwrap().get_i32("_id").unwrap())
        .collect();
    assert_eq!(ids, [9, 8, 7]);

    let n = run_command(
        &client,
        "local",
        doc! { "count": "oplog.rs", "query": { "ns": "order.c", "ts": { "$gte": from } } },
    )
    .await?;
    assert_eq!(n.get_i32("n")?, 7, "{n}");
    assert_eq!(
        oplog
            .count_documents(doc! { "ns": "order.c", "op": "i" })
            .await?,
        10
    );
    let all = run_command(&client, "local", doc! { "count": "oplog.rs" }).await?;
    assert!(all.get_i32("n")? >= 11, "{all}");

    let pipeline = vec![
        doc! { "$match": { "ts": { "$gt": from }, "ns": "order.c" } },
        doc! { "$sort": { "ts": -1 } },
        doc! { "$limit": 2 },
        doc! { "$project": { "_id": 0, "id": "$o._id" } },
    ];
    let out: Vec<Document> = drain(oplog.aggregate(pipeline).await?).await?;
    assert_eq!(out, [doc! { "id": 9 }, doc! { "id": 8 }]);
    Ok(())
}

/// `$out` is logged as mongod logs it: the temporary collection's create, its inserts (under
/// its own name, in one commit with the rest), then its rename over the target.
#[tokio::test]
async fn out_is_logged_as_a_temporary_collection_renamed() -> TestResult {
    let server = TestServer::start_replset(SET).await?;
    let client = direct(&server).await?;
    let db = client.database("outdb");
    let source = db.collection::<Document>("src");
    source
        .insert_many((0..3).map(|i| doc! { "_id": i, "x": i }))
        .await?;
    let _ = drain(source.aggregate(vec![doc! { "$out": "target" }]).await?).await?;
    let logged = entries(
        &client,
        doc! { "ns": { "$regex": "^outdb\\.(tmp|\\$cmd)" } },
        1,
    )
    .await?;
    let shape: Vec<(String, String)> = logged
        .iter()
        .map(|e| {
            let op = e.get_str("op").unwrap().to_owned();
            let what = match op.as_str() {
                "c" => e.get_document("o").unwrap().keys().next().unwrap().clone(),
                _ => e
                    .get_str("ns")
                    .unwrap()
                    .split('.')
                    .take(2)
                    .collect::<Vec<_>>()
                    .join("."),
            };
            (op, what)
        })
        .collect();
    let expected: Vec<(String, String)> = [
        ("c", "create"),
        ("c", "create"),
        ("i", "outdb.tmp"),
        ("i", "outdb.tmp"),
        ("i", "outdb.tmp"),
        ("c", "renameCollection"),
    ]
    .iter()
    .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
    .collect();
    assert_eq!(shape, expected, "{logged:?}");
    // The inserts name the temporary collection the rename moves.
    let tmp = logged[2].get_str("ns")?;
    let rename = logged[5].get_document("o")?;
    assert_eq!(rename.get_str("renameCollection")?, tmp);
    assert_eq!(rename.get_str("to")?, "outdb.target");
    let ids: Vec<i32> = logged[2..5]
        .iter()
        .map(|e| e.get_document("o").unwrap().get_i32("_id").unwrap())
        .collect();
    assert_eq!(ids, [0, 1, 2]);
    Ok(())
}

type Events = mongodb::change_stream::ChangeStream<
    mongodb::change_stream::event::ChangeStreamEvent<Document>,
>;

/// The next event of `stream`, failing after 10 s.
async fn next_event(
    stream: &mut Events,
) -> TestResult<mongodb::change_stream::event::ChangeStreamEvent<Document>> {
    let began = Instant::now();
    loop {
        if let Some(event) = stream.next_if_any().await? {
            return Ok(event);
        }
        if !stream.is_alive() || began.elapsed() > Duration::from_secs(10) {
            return Err("no event came".into());
        }
    }
}

/// A batch's entries are kept together (one run, `storage::runs`) and read as they would be one
/// by one: both natural orders with `getMore` inside the batch, `ts` ranges and an exact `ts`
/// that fall inside it, and a change stream resumed after one of its events.
#[tokio::test]
async fn a_batch_of_inserts_reads_entry_by_entry() -> TestResult {
    let server = TestServer::start_replset(SET).await?;
    let client = direct(&server).await?;
    let coll = client.database("order").collection::<Document>("batch");
    let mut stream = coll.watch().await?;
    coll.insert_many((0..10).map(|i| doc! { "_id": i })).await?;
    coll.insert_one(doc! { "_id": 10 }).await?;
    let forward = entries(&client, doc! { "ns": "order.batch" }, 1).await?;
    let ids: Vec<i32> = forward
        .iter()
        .map(|e| e.get_document("o").unwrap().get_i32("_id").unwrap())
        .collect();
    assert_eq!(ids, (0..11).collect::<Vec<_>>());
    let times: Vec<(u32, u32)> = forward.iter().map(|e| key(ts(e))).collect();
    assert!(times.windows(2).all(|w| w[0] < w[1]), "{times:?}");
    let mut backward = entries(&client, doc! { "ns": "order.batch" }, -1).await?;
    backward.reverse();
    assert_eq!(backward, forward);
    let (from, to) = (ts(&forward[3]), ts(&forward[6]));
    let range = entries(&client, doc! { "ts": { "$gt": from, "$lte": to } }, 1).await?;
    assert_eq!(range, forward[4..=6].to_vec());
    let range = entries(&client, doc! { "ts": { "$gte": from } }, -1).await?;
    assert_eq!(range.len(), 8);
    assert_eq!(range.last(), Some(&forward[3]));
    let exact = entries(&client, doc! { "ts": to }, 1).await?;
    assert_eq!(exact, forward[6..=6].to_vec());

    let mut tokens = Vec::new();
    for i in 0..11 {
        let event = next_event(&mut stream).await?;
        assert_eq!(
            event
                .document_key
                .as_ref()
                .and_then(|k| k.get_i32("_id").ok()),
            Some(i)
        );
        tokens.push(event.id);
    }
    let mut resumed = coll.watch().resume_after(tokens[3].clone()).await?;
    for i in 4..11 {
        let event = next_event(&mut resumed).await?;
        assert_eq!(
            event
                .document_key
                .as_ref()
                .and_then(|k| k.get_i32("_id").ok()),
            Some(i)
        );
    }
    Ok(())
}

#[tokio::test]
async fn listed_and_measured_as_a_capped_collection() -> TestResult {
    let server = TestServer::start_with(|c| {
        c.repl_set = Some(SET.into());
        c.oplog_size_mb = Some(64);
    })
    .await?;
    let client = direct(&server).await?;
    client
        .database("m")
        .collection::<Document>("c")
        .insert_one(doc! { "x": 1 })
        .await?;
    let listed = run_command(
        &client,
        "local",
        doc! { "listCollections": 1, "filter": { "name": "oplog.rs" } },
    )
    .await?;
    let batch = listed.get_document("cursor")?.get_array("firstBatch")?;
    assert_eq!(batch.len(), 1, "{listed}");
    let entry = batch[0].as_document().unwrap();
    assert_eq!(
        entry.get_document("options")?,
        &doc! { "capped": true, "size": 64_i64 * 1024 * 1024, "autoIndexId": false }
    );
    let names = client.database("local").list_collection_names().await?;
    assert!(names.contains(&"oplog.rs".to_owned()), "{names:?}");

    let stats = run_command(&client, "local", doc! { "collStats": "oplog.rs" }).await?;
    assert!(stats.get_bool("capped")?, "{stats}");
    assert_eq!(stats.get_i64("maxSize")?, 64 * 1024 * 1024);
    assert!(
        stats.get_i64("size")? > 0 && stats.get_i64("count")? >= 2,
        "{stats}"
    );

    let stage: Vec<Document> = drain(
        client
            .database("local")
            .collection::<Document>("oplog.rs")
            .aggregate(vec![
                doc! { "$collStats": { "storageStats": {}, "count": {} } },
            ])
            .await?,
    )
    .await?;
    let storage = stage[0].get_document("storageStats")?;
    assert!(storage.get_bool("capped")?);
    assert_eq!(storage.get_i64("maxSize")?, 64 * 1024 * 1024);
    assert_eq!(storage.get_i64("size")?, stats.get_i64("size")?);

    let dbs = run_command(&client, "admin", doc! { "listDatabases": 1 }).await?;
    let local = dbs
        .get_array("databases")?
        .iter()
        .filter_map(Bson::as_document)
        .find(|d| d.get_str("name").ok() == Some("local"))
        .cloned();
    assert!(
        local.is_some_and(|l| l.get_i64("sizeOnDisk").unwrap_or(0) > 0),
        "{dbs}"
    );
    Ok(())
}

#[tokio::test]
async fn writes_to_the_oplog_are_refused() -> TestResult {
    let server = TestServer::start_replset(SET).await?;
    let client = direct(&server).await?;
    let insert = run_command_err(
        &client,
        "local",
        doc! { "insert": "oplog.rs", "documents": [ { "op": "n" } ] },
    )
    .await?;
    assert_command_error(&insert, 73, "InvalidNamespace");
    let update = run_command_err(
        &client,
        "local",
        doc! { "update": "oplog.rs", "updates": [ { "q": {}, "u": { "$set": { "x": 1 } } } ] },
    )
    .await?;
    assert_command_error(&update, 73, "InvalidNamespace");
    let delete = run_command_err(
        &client,
        "local",
        doc! { "delete": "oplog.rs", "deletes": [ { "q": {}, "limit": 0 } ] },
    )
    .await?;
    assert_command_error(&delete, 73, "InvalidNamespace");
    let drop = run_command_err(&client, "local", doc! { "drop": "oplog.rs" }).await?;
    assert_command_error(&drop, 20, "IllegalOperation");
    assert_eq!(drop.message, "can't drop live oplog while replicating");
    let drop_db = run_command_err(&client, "local", doc! { "dropDatabase": 1 }).await?;
    assert_command_error(&drop_db, 20, "IllegalOperation");
    let index = run_command_err(
        &client,
        "local",
        doc! { "createIndexes": "oplog.rs", "indexes": [ { "key": { "ns": 1 }, "name": "ns_1" } ] },
    )
    .await?;
    assert_command_error(&index, 67, "CannotCreateIndex");
    Ok(())
}

#[tokio::test]
async fn a_standalone_has_no_oplog() -> TestResult {
    let server = TestServer::start().await?;
    let client = server.client().await?;
    client
        .database("s")
        .collection::<Document>("c")
        .insert_one(doc! { "x": 1 })
        .await?;
    let found: Vec<Document> = drain(
        client
            .database("local")
            .collection::<Document>("oplog.rs")
            .find(doc! {})
            .await?,
    )
    .await?;
    assert!(found.is_empty(), "{found:?}");
    let names = client.database("local").list_collection_names().await?;
    assert!(!names.contains(&"oplog.rs".to_owned()));
    let resize = run_command_err(
        &client,
        "admin",
        doc! { "replSetResizeOplog": 1, "size": 1000.0 },
    )
    .await?;
    assert_command_error(&resize, 26, "NamespaceNotFound");
    Ok(())
}

#[tokio::test]
async fn repl_set_resize_oplog_checks_and_applies() -> TestResult {
    let server = TestServer::start_replset(SET).await?;
    let client = direct(&server).await?;
    let small = run_command_err(
        &client,
        "admin",
        doc! { "replSetResizeOplog": 1, "size": 10.0 },
    )
    .await?;
    assert_command_error(&small, 51024, "Location51024");
    assert_eq!(
        small.message,
        "BSON field 'replSetResizeOplog.size' value must be >= 990, actual value '10'"
    );
    let wrong = run_command_err(
        &client,
        "admin",
        doc! { "replSetResizeOplog": 1, "size": "big" },
    )
    .await?;
    assert_command_error(&wrong, 14, "TypeMismatch");
    // A double, as mongod's IDL field: an int is refused.
    let int = run_command_err(
        &client,
        "admin",
        doc! { "replSetResizeOplog": 1, "size": 2000 },
    )
    .await?;
    assert_command_error(&int, 14, "TypeMismatch");
    assert_eq!(
        int.message,
        "BSON field 'replSetResizeOplog.size' is the wrong type 'int', expected type 'double'"
    );
    let negative = run_command_err(
        &client,
        "admin",
        doc! { "replSetResizeOplog": 1, "minRetentionHours": -1.0 },
    )
    .await?;
    assert_command_error(&negative, 51024, "Location51024");
    let ok = run_command(
        &client,
        "admin",
        doc! { "replSetResizeOplog": 1, "size": 2000.0, "minRetentionHours": 1.5 },
    )
    .await?;
    assert!(is_ok(&ok), "{ok}");
    let stats = run_command(&client, "local", doc! { "collStats": "oplog.rs" }).await?;
    assert_eq!(stats.get_i64("maxSize")?, 2000 * 1024 * 1024);
    let server_status = run_command(&client, "admin", doc! { "serverStatus": 1 }).await?;
    let truncation = server_status.get_document("oplogTruncation")?;
    let keys: Vec<&str> = truncation.keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        [
            "totalTimeProcessingMicros",
            "processingMethod",
            "oplogMinRetentionHours",
            "totalTimeTruncatingMicros",
            "truncateCount"
        ]
    );
    assert_eq!(truncation.get_f64("oplogMinRetentionHours")?, 1.5);
    Ok(())
}

/// Writes 20 MB to a server whose oplog keeps 1 MB: the oplog comes back within 1 MB, keeping
/// the newest entries.
async fn stays_within_its_size(server: &TestServer) -> TestResult {
    let client = direct(server).await?;
    let coll = client.database("big").collection::<Document>("c");
    let pad = "x".repeat(100_000);
    for batch in 0..20 {
        let docs: Vec<Document> = (0..10)
            .map(|i| doc! { "_id": batch * 10 + i, "pad": pad.as_str() })
            .collect();
        coll.insert_many(docs).await?;
    }
    let limit = 1024 * 1024;
    let deadline = Instant::now() + Duration::from_secs(20);
    let stats = loop {
        let stats = run_command(&client, "local", doc! { "collStats": "oplog.rs" }).await?;
        if stats.get_i64("size")? <= limit || Instant::now() > deadline {
            break stats;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(stats.get_i64("size")? <= limit, "{stats}");
    let server_status = run_command(&client, "admin", doc! { "serverStatus": 1 }).await?;
    assert!(
        server_status
            .get_document("oplogTruncation")?
            .get_i64("truncateCount")?
            > 0,
        "{server_status}"
    );
    let kept = entries(&client, doc! {}, 1).await?;
    assert_eq!(i64::try_from(kept.len())?, stats.get_i64("count")?);
    let bytes: usize = kept.iter().map(|d| common::bson_bytes(d).len()).sum();
    assert!(bytes <= 1024 * 1024, "{bytes}");
    // The newest entries, in one run up to the last insert.
    let ids = kept
        .iter()
        .map(|e| e.get_document("o").and_then(|o| o.get_i32("_id")))
        .collect::<Result<Vec<i32>, _>>()?;
    assert!(ids.len() >= 5, "{ids:?}");
    assert_eq!(ids.last(), Some(&199));
    assert_eq!(
        ids,
        (200 - i32::try_from(ids.len())?..200).collect::<Vec<_>>()
    );
    Ok(())
}

#[tokio::test]
async fn the_oplog_stays_within_oplog_size_mb_in_memory() -> TestResult {
    let server = TestServer::start_with(|c| {
        c.repl_set = Some(SET.into());
        c.oplog_size_mb = Some(1);
    })
    .await?;
    stays_within_its_size(&server).await
}

#[tokio::test]
async fn the_oplog_stays_within_oplog_size_mb_on_disk() -> TestResult {
    let dir = tempfile::tempdir()?;
    let server = TestServer::start_durable(dir.path(), |c| {
        c.repl_set = Some(SET.into());
        c.oplog_size_mb = Some(1);
    })
    .await?;
    stays_within_its_size(&server).await?;
    server.stop().await?;
    // After a restart the figures are rebuilt from what is kept.
    let server = TestServer::start_durable(dir.path(), |c| {
        c.repl_set = Some(SET.into());
        c.oplog_size_mb = Some(1);
    })
    .await?;
    let client = direct(&server).await?;
    let stats = run_command(&client, "local", doc! { "collStats": "oplog.rs" }).await?;
    let size = stats.get_i64("size")?;
    assert!(size > 0 && size <= 1024 * 1024, "{stats}");
    let kept = entries(&client, doc! {}, 1).await?;
    assert_eq!(i64::try_from(kept.len())?, stats.get_i64("count")?);
    server.stop().await?;
    Ok(())
}

#[tokio::test]
async fn a_cursor_whose_position_was_truncated_has_lost_it() -> TestResult {
    let server = TestServer::start_with(|c| {
        c.repl_set = Some(SET.into());
        c.oplog_size_mb = Some(1);
        c.enable_test_commands = true;
    })
    .await?;
    let client = direct(&server).await?;
    let coll = client.database("lost").collection::<Document>("c");
    for i in 0..3 {
        coll.insert_one(doc! { "_id": i }).await?;
    }
    let first = run_command(
        &client,
        "local",
        doc! { "find": "oplog.rs", "filter": { "ns": "lost.c" }, "batchSize": 1 },
    )
    .await?;
    let id = first.get_document("cursor")?.get_i64("id")?;
    assert_ne!(id, 0);
    // 3 MB more: the first entries are truncated.
    let pad = "x".repeat(100_000);
    for i in 3..33 {
        coll.insert_one(doc! { "_id": i, "pad": pad.as_str() })
            .await?;
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    while !entries(&client, doc! { "ns": "lost.c", "o._id": 0 }, 1)
        .await?
        .is_empty()
        && Instant::now() < deadline
    {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Within the snapshot window the cursor reads what it started on.
    let more = run_command(
        &client,
        "local",
        doc! { "getMore": id, "collection": "oplog.rs", "batchSize": 1 },
    )
    .await?;
    let next = more.get_document("cursor")?.get_array("nextBatch")?;
    assert_eq!(next.len(), 1, "{more}");
    // Past it, the cursor renews its snapshot and finds its place gone.
    advance_clock(&client, 301_000).await?;
    let lost = run_command_err(
        &client,
        "local",
        doc! { "getMore": id, "collection": "oplog.rs", "batchSize": 1 },
    )
    .await?;
    assert_command_error(&lost, 136, "CappedPositionLost");
    assert!(
        lost.message
            .starts_with("CollectionScan died due to position in capped collection being deleted."),
        "{}",
        lost.message
    );
    Ok(())
}
