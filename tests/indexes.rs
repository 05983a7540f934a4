//! Secondary index storage and maintenance, through the `mongodb` crate: entries built over
//! existing documents, kept exact by every write, expiry and drop (checked with `validate`),
//! unique, sparse, partial and multikey indexes, and restarts.

mod common;

use std::time::{Duration, Instant};

use bson::{Bson, Document, doc};
use common::{
    TestResult, TestServer, advance_clock, integer, run_command, run_command_err, write_errors,
};
use mongodb::Client;

const DB: &str = "idx";

/// How long the background purges (TTL and dropped data) may take in a test.
const PURGE_DEADLINE: Duration = Duration::from_secs(30);

async fn create_index(client: &Client, coll: &str, index: Document) -> TestResult<Document> {
    run_command(
        client,
        DB,
        doc! { "createIndexes": coll, "indexes": [index] },
    )
    .await
}

async fn validate(client: &Client, coll: &str) -> TestResult<Document> {
    run_command(client, DB, doc! { "validate": coll, "full": true }).await
}

/// Runs `validate` and checks that it found nothing wrong; returns its reply.
async fn assert_valid(client: &Client, coll: &str) -> TestResult<Document> {
    let v = validate(client, coll).await?;
    assert_eq!(v.get_bool("valid").ok(), Some(true), "validate: {v}");
    assert!(v.get_array("extraIndexEntries")?.is_empty(), "{v}");
    assert!(v.get_array("missingIndexEntries")?.is_empty(), "{v}");
    assert!(v.get_array("errors")?.is_empty(), "{v}");
    Ok(v)
}

fn keys_of(v: &Document, index: &str) -> i64 {
    integer(
        v.get_document("keysPerIndex")
            .ok()
            .and_then(|k| k.get(index)),
    )
    .unwrap_or_else(|| panic!("no keysPerIndex.{index} in {v}"))
}

/// Polls `validate` until no expired document is left stored (the purge is done).
async fn settle_purge(client: &Client, coll: &str) -> TestResult<Document> {
    let deadline = Instant::now() + PURGE_DEADLINE;
    loop {
        let v = assert_valid(client, coll).await?;
        if v.get_array("warnings")?.is_empty() {
            return Ok(v);
        }
        if Instant::now() > deadline {
            return Err(format!("expired documents still stored: {v}").into());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn insert(
    client: &Client,
    coll: &str,
    docs: Vec<Document>,
    ordered: bool,
) -> TestResult<Document> {
    run_command(
        client,
        DB,
        doc! { "insert": coll, "documents": docs, "ordered": ordered },
    )
    .await
}

fn n(reply: &Document) -> i64 {
    integer(reply.get("n")).unwrap_or(-1)
}

/// Checks a duplicate key write error against mongod's shape.
fn assert_dup(error: &Document, index: &str, pattern: &Document, value: &Document, shown: &str) {
    assert_eq!(error.get_i32("code").ok(), Some(11000), "{error}");
    assert_eq!(
        error.get_document("keyPattern").ok(),
        Some(pattern),
        "{error}"
    );
    assert_eq!(error.get_document("keyValue").ok(), Some(value), "{error}");
    assert_eq!(
        error.get_str("errmsg").ok(),
        Some(
            format!(
                "E11000 duplicate key error collection: {DB}.c index: {index} dup key: {shown}"
            )
            .as_str()
        ),
        "{error}"
    );
}

async fn ids(client: &Client, coll: &str) -> TestResult<Vec<Bson>> {
    let reply = run_command(
        client,
        DB,
        doc! { "find": coll, "sort": { "_id": 1 }, "batchSize": 100_000 },
    )
    .await?;
    Ok(reply
        .get_document("cursor")?
        .get_array("firstBatch")?
        .iter()
        .filter_map(|d| d.as_document().and_then(|d| d.get("_id")).cloned())
        .collect())
}

#[tokio::test]
async fn unique_inserts_ordered_and_unordered() -> TestResult {
    let server = TestServer::start().await?;
    let client = server.client().await?;
    create_index(
        &client,
        "c",
        doc! { "key": { "a": 1 }, "name": "a_1", "unique": true },
    )
    .await?;
    let listed = run_command(&client, DB, doc! { "listIndexes": "c" }).await?;
    let specs = listed.get_document("cursor")?.get_array("firstBatch")?;
    assert_eq!(
        specs[1].as_document(),
        Some(&doc! { "v": 2, "key": { "a": 1 }, "name": "a_1", "unique": true })
    );

    let r = insert(
        &client,
        "c",
        vec![
            doc! { "_id": 1, "a": 1 },
            doc! { "_id": 2, "a": 1.0 },
            doc! { "_id": 3, "a": 2 },
        ],
        true,
    )
    .await?;
    assert_eq!(n(&r), 1, "{r}");
    let errors = write_errors(&r);
    assert_eq!(errors.len(), 1);
    assert_eq!(errors[0].get_i32("index").ok(), Some(1));
    assert_dup(
        &errors[0],
        "a_1",
        &doc! { "a": 1 },
        &doc! { "a": 1.0 },
        "{ a: 1.0 }",
    );

    let r = insert(
        &client,
        "c",
        vec![
            doc! { "_id": 2, "a": 1 },
            doc! { "_id": 3, "a": 2 },
            doc! { "_id": 4, "a": 2 },
            doc! { "_id": 5, "a": 3 },
        ],
        false,
    )
    .await?;
    assert_eq!(n(&r), 2, "{r}");
    let errors = write_errors(&r);
    assert_eq!(
        errors
            .iter()
            .map(|e| e.get_i32("index").unwrap())
            .collect::<Vec<_>>(),
        vec![0, 2]
    );
    // The second conflict is with a document of the same batch.
    assert_dup(
        &errors[1],
        "a_1",
        &doc! { "a": 1 },
        &doc! { "a": 2 },
        "{ a: 2 }",
    );

    // Missing is null: two documents without `a` collide.
    let r = insert(
        &client,
        "c",
        vec![doc! { "_id": 6 }, doc! { "_id": 7 }],
        true,
    )
    .await?;
    assert_eq!(n(&r), 1);
    assert_dup(
        &write_errors(&r)[0],
        "a_1",
        &doc! { "a": 1 },
        &doc! { "a": null },
        "{ a: null }",
    );

    // One document may repeat a key in an array; another may not hold any of them.
    let r = insert(
        &client,
        "c",
        vec![doc! { "_id": 8, "a": [10, 10, 11] }],
        true,
    )
    .await?;
    assert!(write_errors(&r).is_empty(), "{r}");
    let r = insert(&client, "c", vec![doc! { "_id": 9, "a": [12, 11] }], true).await?;
    assert_dup(
        &write_errors(&r)[0],
        "a_1",
        &doc! { "a": 1 },
        &doc! { "a": 11 },
        "{ a: 11 }",
    );

    assert_eq!(
        ids(&client, "c").await?,
        vec![
            Bson::Int32(1),
            Bson::Int32(3),
            Bson::Int32(5),
            Bson::Int32(6),
            Bson::Int32(8)
        ]
    );
    let v = assert_valid(&client, "c").await?;
    assert_eq!(keys_of(&v, "a_1"), 6);
    // A delete frees the key.
    run_command(
        &client,
        DB,
        doc! { "delete": "c", "deletes": [{ "q": { "_id": 1 }, "limit": 1 }] },
    )
    .await?;
    let r = insert(&client, "c", vec![doc! { "_id": 10, "a": 1 }], true).await?;
    assert!(write_errors(&r).is_empty(), "{r}");
    assert_valid(&client, "c").await?;
    Ok(())
}

#[tokio::test]
async fn unique_updates_upserts_and_find_and_modify() -> TestResult {
    let server = TestServer::start().await?;
    let client = server.client().await?;
    create_index(
        &client,
        "c",
        doc! { "key": { "a": 1, "b": -1 }, "name": "ab", "unique": true },
    )
    .await?;
    insert(
        &client,
        "c",
        vec![
            doc! { "_id": 1, "a": 1, "b": 1 },
            doc! { "_id": 2, "a": 2, "b": 1 },
            doc! { "_id": 3, "a": 3, "b": 1 },
        ],
        true,
    )
    .await?;
    let update = |q: Document, u: Document, multi: bool, upsert: bool| {
        doc! { "update": "c", "updates": [{ "q": q, "u": u, "multi": multi, "upsert": upsert }] }
    };
    let r = run_command(
        &client,
        DB,
        update(doc! { "_id": 2 }, doc! { "$set": { "a": 1 } }, false, false),
    )
    .await?;
    assert_dup(
        &write_errors(&r)[0],
        "ab",
        &doc! { "a": 1, "b": -1 },
        &doc! { "a": 1, "b": 1 },
        "{ a: 1, b: 1 }",
    );
    // A replacement too, and an upsert.
    let r = run_command(
        &client,
        DB,
        update(doc! { "_id": 3 }, doc! { "a": 1, "b": 1 }, false, false),
    )
    .await?;
    assert_eq!(write_errors(&r)[0].get_i32("code").ok(), Some(11000));
    let r = run_command(
        &client,
        DB,
        update(
            doc! { "_id": 9 },
            doc! { "$set": { "a": 1, "b": 1 } },
            false,
            true,
        ),
    )
    .await?;
    assert_eq!(write_errors(&r)[0].get_i32("code").ok(), Some(11000), "{r}");
    // Moving a key away and taking it in one multi-update: each document sees the ones before.
    let r = run_command(
        &client,
        DB,
        update(doc! {}, doc! { "$inc": { "a": 10 } }, true, false),
    )
    .await?;
    assert!(write_errors(&r).is_empty(), "{r}");
    // Now 11, 12, 13: {$inc: -1} on all in _id order: 11 → 10 ok, 12 → 11 (freed) ok, …
    let r = run_command(
        &client,
        DB,
        update(doc! {}, doc! { "$inc": { "a": -1 } }, true, false),
    )
    .await?;
    assert!(write_errors(&r).is_empty(), "{r}");
    // … but {$inc: 1} in _id order: 10 → 11 collides with _id 2's 11.
    let r = run_command(
        &client,
        DB,
        update(doc! {}, doc! { "$inc": { "a": 1 } }, true, false),
    )
    .await?;
    assert_eq!(write_errors(&r)[0].get_i32("code").ok(), Some(11000), "{r}");
    assert_eq!(integer(r.get("nModified")), Some(0));
    // Changing another field of the document keeps its own key.
    let r = run_command(
        &client,
        DB,
        update(doc! { "_id": 1 }, doc! { "$set": { "c": 1 } }, false, false),
    )
    .await?;
    assert!(write_errors(&r).is_empty(), "{r}");

    let e = run_command_err(
        &client,
        DB,
        doc! { "findAndModify": "c", "query": { "_id": 1 }, "update": { "$set": { "a": 11 } } },
    )
    .await?;
    assert_eq!(e.code, 11000, "{e:?}");
    assert!(
        e.message
            .starts_with("E11000 duplicate key error collection: idx.c index: ab"),
        "{e:?}"
    );

    // The driver's own calls.
    let coll = client.database(DB).collection::<Document>("c");
    let err = coll
        .update_one(doc! { "_id": 3 }, doc! { "$set": { "a": 10 } })
        .await
        .expect_err("duplicate");
    assert_eq!(
        common::write_error(&err).map(|w| w.code),
        Some(11000),
        "{err}"
    );
    assert_valid(&client, "c").await?;
    Ok(())
}

#[tokio::test]
async fn sparse_partial_and_multikey_keys() -> TestResult {
    let server = TestServer::start().await?;
    let client = server.client().await?;
    create_index(
        &client,
        "c",
        doc! { "key": { "s": 1 }, "name": "s_1", "unique": true, "sparse": true },
    )
    .await?;
    create_index(
        &client,
        "c",
        doc! {
            "key": { "p": 1 }, "name": "p_1", "unique": true,
            "partialFilterExpression": { "p": { "$gt": 5 } },
        },
    )
    .await?;
    create_index(
        &client,
        "c",
        doc! { "key": { "tags": 1, "n": -1 }, "name": "tags_n" },
    )
    .await?;
    let r = insert(
        &client,
        "c",
        vec![
            doc! { "_id": 1 },
            doc! { "_id": 2 },
            doc! { "_id": 3, "s": null, "p": 1 },
            doc! { "_id": 4, "p": 1 },
            doc! { "_id": 5, "p": 7, "tags": ["x", "y", "x"] },
            doc! { "_id": 6, "tags": [] },
        ],
        true,
    )
    .await?;
    assert!(write_errors(&r).is_empty(), "{r}");
    // An explicit null is indexed by the sparse index; a key inside the partial filter is unique.
    let r = insert(&client, "c", vec![doc! { "_id": 7, "s": null }], true).await?;
    assert_eq!(write_errors(&r)[0].get_i32("code").ok(), Some(11000));
    let r = insert(&client, "c", vec![doc! { "_id": 8, "p": 7 }], true).await?;
    assert_eq!(write_errors(&r)[0].get_i32("code").ok(), Some(11000));
    let v = assert_valid(&client, "c").await?;
    assert_eq!(keys_of(&v, "s_1"), 1);
    assert_eq!(keys_of(&v, "p_1"), 1);
    // x, y, undefined ([]), and null for each of the 4 documents without tags.
    assert_eq!(keys_of(&v, "tags_n"), 7);
    assert_eq!(integer(v.get("nrecords")), Some(6));
    assert_eq!(integer(v.get("nIndexes")), Some(4));

    // Updates move documents in and out of the sparse and partial indexes.
    run_command(
        &client,
        DB,
        doc! { "update": "c", "updates": [
            { "q": { "_id": 4 }, "u": { "$set": { "p": 9, "s": 1 } } },
            { "q": { "_id": 5 }, "u": { "$set": { "p": 2, "tags": ["z"] } } },
            { "q": { "_id": 3 }, "u": { "$unset": { "s": 1 } } },
        ] },
    )
    .await?;
    let v = assert_valid(&client, "c").await?;
    assert_eq!(keys_of(&v, "s_1"), 1);
    assert_eq!(keys_of(&v, "p_1"), 1);
    assert_eq!(keys_of(&v, "tags_n"), 6);

    // Two arrays in one compound key: refused, on writes and on builds.
    let r = insert(
        &client,
        "c",
        vec![doc! { "_id": 10, "tags": [1, 2], "n": [3] }],
        true,
    )
    .await?;
    let errors = write_errors(&r);
    assert_eq!(errors[0].get_i32("code").ok(), Some(171), "{r}");
    assert_eq!(
        errors[0].get_str("errmsg").ok(),
        Some("cannot index parallel arrays [n] [tags]")
    );
    insert(
        &client,
        "d",
        vec![doc! { "_id": 1, "a": [1, 2], "b": [3, 4] }],
        true,
    )
    .await?;
    let e = run_command_err(
        &client,
        DB,
        doc! { "createIndexes": "d", "indexes": [{ "key": { "a": 1, "b": 1 }, "name": "ab" }] },
    )
    .await?;
    assert_eq!(e.code, 171, "{e:?}");
    let listed = run_command(&client, DB, doc! { "listIndexes": "d" }).await?;
    assert_eq!(
        listed
            .get_document("cursor")?
            .get_array("firstBatch")?
            .len(),
        1
    );
    // Mixing sparse and a partial filter is refused, as mongod does.
    let e = run_command_err(
        &client,
        DB,
        doc! { "createIndexes": "d", "indexes": [{ "key": { "x": 1 }, "name": "x", "sparse": true, "partialFilterExpression": { "x": 1 } }] },
    )
    .await?;
    assert_eq!(e.code, 67, "{e:?}");
    Ok(())
}

/// A build over 100,000 documents, then a unique build over duplicates that fails and leaves
/// nothing.
#[tokio::test]
async fn builds_over_existing_documents() -> TestResult {
    const N: i32 = 100_000;
    let server = TestServer::start().await?;
    let client = server.client().await?;
    for chunk in 0..10 {
        let docs: Vec<Document> = (chunk * N / 10..(chunk + 1) * N / 10)
            .map(|i| doc! { "_id": i, "k": i % 1000, "u": format!("u{i}"), "d": i % 7 == 0 && i > 0 })
            .collect();
        insert(&client, "c", docs, false).await?;
    }
    let r = run_command(
        &client,
        DB,
        doc! { "createIndexes": "c", "indexes": [
            { "key": { "k": 1 }, "name": "k_1" },
            { "key": { "u": -1 }, "name": "u_-1", "unique": true },
        ] },
    )
    .await?;
    assert_eq!(integer(r.get("numIndexesAfter")), Some(3), "{r}");
    let v = assert_valid(&client, "c").await?;
    assert_eq!(keys_of(&v, "k_1"), i64::from(N));
    assert_eq!(keys_of(&v, "u_-1"), i64::from(N));

    let e = run_command_err(
        &client,
        DB,
        doc! { "createIndexes": "c", "indexes": [
            { "key": { "x": 1 }, "name": "x_1" },
            { "key": { "d": 1 }, "name": "d_1", "unique": true },
        ] },
    )
    .await?;
    assert_eq!(e.code, 11000, "{e:?}");
    assert!(
        e.message
            .starts_with("E11000 duplicate key error collection: idx.c index: d_1 dup key: { d: "),
        "{e:?}"
    );
    let listed = run_command(&client, DB, doc! { "listIndexes": "c" }).await?;
    let names: Vec<&str> = listed
        .get_document("cursor")?
        .get_array("firstBatch")?
        .iter()
        .filter_map(|d| d.as_document()?.get_str("name").ok())
        .collect();
    assert_eq!(names, vec!["_id_", "k_1", "u_-1"]);
    assert_valid(&client, "c").await?;
    // Writes after the build keep the index exact.
    run_command(
        &client,
        DB,
        doc! { "update": "c", "updates": [{ "q": { "k": 5 }, "u": { "$set": { "k": 1005 } }, "multi": true }] },
    )
    .await?;
    run_command(
        &client,
        DB,
        doc! { "delete": "c", "deletes": [{ "q": { "k": 7 }, "limit": 0 }] },
    )
    .await?;
    let v = assert_valid(&client, "c").await?;
    assert_eq!(keys_of(&v, "k_1"), i64::from(N - 100));
    Ok(())
}

/// An expired document holds no unique key, and the purge removes its entries.
#[tokio::test]
async fn expiry_frees_unique_keys_and_purge_removes_entries() -> TestResult {
    let server = TestServer::start_with_test_clock().await?;
    let client = server.client().await?;
    advance_clock(&client, 0).await?;
    create_index(
        &client,
        "c",
        doc! { "key": { "_ts": 1 }, "name": "_ts_1", "expireAfterSeconds": 10 },
    )
    .await?;
    create_index(
        &client,
        "c",
        doc! { "key": { "a": 1 }, "name": "a_1", "unique": true },
    )
    .await?;
    create_index(
        &client,
        "c",
        doc! { "key": { "tags": 1 }, "name": "tags_1" },
    )
    .await?;
    let docs: Vec<Document> = (0..300)
        .map(|i| doc! { "_id": i, "a": i, "tags": [i, i + 1000] })
        .collect();
    insert(&client, "c", docs, true).await?;
    let forever: Vec<Document> = (300..310)
        .map(|i| doc! { "_id": i, "a": i, "ttl": -1, "tags": "t" })
        .collect();
    insert(&client, "c", forever, true).await?;
    let v = assert_valid(&client, "c").await?;
    assert_eq!(keys_of(&v, "tags_1"), 610);
    // Still live: a duplicate.
    let r = insert(&client, "c", vec![doc! { "_id": 1000, "a": 1 }], true).await?;
    assert_eq!(write_errors(&r)[0].get_i32("code").ok(), Some(11000));
    advance_clock(&client, 10_000).await?;
    // Expired (purged or not): the key is free, for inserts and updates, and so is the `_id`.
    let r = insert(
        &client,
        "c",
        vec![doc! { "_id": 1000, "a": 1 }, doc! { "_id": 2, "a": 1002 }],
        true,
    )
    .await?;
    assert!(write_errors(&r).is_empty(), "{r}");
    let r = run_command(
        &client,
        DB,
        doc! { "update": "c", "updates": [{ "q": { "_id": 300 }, "u": { "$set": { "a": 3 } } }] },
    )
    .await?;
    assert!(write_errors(&r).is_empty(), "{r}");
    let v = settle_purge(&client, "c").await?;
    assert_eq!(integer(v.get("nrecords")), Some(12));
    assert_eq!(keys_of(&v, "a_1"), 12);
    // "t" for the 10 that never expire, null for the 2 new ones without tags.
    assert_eq!(keys_of(&v, "tags_1"), 10 + 2);
    Ok(())
}

/// Dropped indexes and collections lose their entries; the same index built again is exact.
#[tokio::test]
async fn drops_remove_entries() -> TestResult {
    let server = TestServer::start().await?;
    let client = server.client().await?;
    for coll in ["c", "other"] {
        create_index(&client, coll, doc! { "key": { "a": 1 }, "name": "a_1" }).await?;
        create_index(
            &client,
            coll,
            doc! { "key": { "b": 1 }, "name": "b_1", "unique": true },
        )
        .await?;
        let docs: Vec<Document> = (0..500)
            .map(|i| doc! { "_id": i, "a": i % 3, "b": i })
            .collect();
        insert(&client, coll, docs, true).await?;
    }
    run_command(&client, DB, doc! { "dropIndexes": "c", "index": "b_1" }).await?;
    // The unique key is free at once.
    let r = insert(&client, "c", vec![doc! { "_id": 1000, "b": 1 }], true).await?;
    assert!(write_errors(&r).is_empty(), "{r}");
    run_command(
        &client,
        DB,
        doc! { "dropIndexes": "c", "index": { "a": 1 } },
    )
    .await?;
    create_index(&client, "c", doc! { "key": { "a": 1 }, "name": "a_1" }).await?;
    let v = assert_valid(&client, "c").await?;
    assert_eq!(keys_of(&v, "a_1"), 501);
    run_command(&client, DB, doc! { "dropIndexes": "c", "index": "*" }).await?;
    run_command(&client, DB, doc! { "drop": "other" }).await?;
    // Recreated under the same name: nothing of the old one shows.
    create_index(
        &client,
        "other",
        doc! { "key": { "b": 1 }, "name": "b_1", "unique": true },
    )
    .await?;
    let r = insert(&client, "other", vec![doc! { "_id": 1, "b": 1 }], true).await?;
    assert!(write_errors(&r).is_empty(), "{r}");
    let v = assert_valid(&client, "other").await?;
    assert_eq!(keys_of(&v, "b_1"), 1);
    // `renameCollection` keeps the indexes; `$out` replaces the contents and rebuilds them.
    run_command(
        &client,
        "admin",
        doc! { "renameCollection": "idx.other", "to": "idx.renamed" },
    )
    .await?;
    let v = assert_valid(&client, "renamed").await?;
    assert_eq!(keys_of(&v, "b_1"), 1);
    run_command(
        &client,
        DB,
        doc! { "aggregate": "c", "pipeline": [{ "$match": { "_id": { "$lt": 10 } } }, { "$out": "renamed" }], "cursor": {} },
    )
    .await?;
    let v = assert_valid(&client, "renamed").await?;
    assert_eq!(keys_of(&v, "b_1"), 10);
    let e = run_command_err(&client, DB, doc! { "validate": "missing" }).await?;
    assert_eq!(e.code, 26);
    Ok(())
}

/// Indexes, their entries and multikey flags survive restarts.
#[tokio::test]
async fn restart_keeps_indexes_and_multikey() -> TestResult {
    let dir = tempfile::tempdir()?;
    let server = TestServer::start_durable(dir.path(), |_| {}).await?;
    let client = server.client().await?;
    create_index(
        &client,
        "c",
        doc! { "key": { "a": 1 }, "name": "a_1", "unique": true },
    )
    .await?;
    create_index(&client, "c", doc! { "key": { "t": -1 }, "name": "t_-1" }).await?;
    insert(
        &client,
        "c",
        vec![
            doc! { "_id": 1, "a": 1, "t": [1, 2, 3] },
            doc! { "_id": 2, "a": 2 },
        ],
        true,
    )
    .await?;
    drop(client);
    server.stop().await?;

    let server = TestServer::start_durable(dir.path(), |_| {}).await?;
    let client = server.client().await?;
    // `validate` fails an index holding a multikey document without the flag.
    let v = assert_valid(&client, "c").await?;
    assert_eq!(keys_of(&v, "t_-1"), 4);
    let r = insert(&client, "c", vec![doc! { "_id": 3, "a": 1 }], true).await?;
    assert_eq!(write_errors(&r)[0].get_i32("code").ok(), Some(11000));
    drop(client);
    server.stop().await?;
    Ok(())
}

/// A small deterministic generator (`SplitMix64`), so that a failure replays from its seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> i64 {
        i64::try_from(self.next() % n).unwrap_or(0)
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
}

/// A number below `n` as an int32, an int64 or a double: one key, three stored values.
fn typed(rng: &mut Rng, n: u64) -> Bson {
    let v = rng.below(n);
    match rng.below(3) {
        0 => Bson::Int32(i32::try_from(v).unwrap_or(0)),
        1 => Bson::Int64(v),
        #[expect(clippy::cast_precision_loss, reason = "small integers")]
        _ => Bson::Double(v as f64),
    }
}

/// A random document for the randomized test's collection.
fn random_doc(rng: &mut Rng, id: i64) -> Document {
    let mut d = doc! { "_id": id };
    if rng.chance(80) {
        d.insert("u", rng.below(400));
    }
    match rng.below(4) {
        0 => {}
        1 => {
            d.insert("tags", rng.below(20));
        }
        2 => {
            let tags: Vec<Bson> = (0..rng.below(4))
                .map(|_| Bson::Int64(rng.below(20)))
                .collect();
            d.insert("tags", tags);
        }
        _ => {
            let items: Vec<Bson> = (0..rng.below(3))
                .map(|_| Bson::Document(doc! { "k": rng.below(10), "v": rng.below(5) }))
                .collect();
            d.insert("items", items);
        }
    }
    if rng.chance(50) {
        d.insert("s", typed(rng, 50));
    }
    if rng.chance(60) {
        d.insert("p", rng.below(100));
    }
    if rng.chance(20) {
        // Cosmos ttl: some expire soon, some never.
        d.insert(
            "ttl",
            if rng.chance(50) {
                -1
            } else {
                1 + rng.below(30)
            },
        );
    }
    d.insert("g", rng.below(5));
    d
}

/// Checks the unique invariants directly on the documents: no two live documents share a
/// value of `u` (missing counts as null), or a `p` above 50 (the partial unique index).
async fn assert_unique_invariants(client: &Client) -> TestResult {
    let reply = run_command(client, DB, doc! { "find": "r", "batchSize": 100_000 }).await?;
    let docs = reply.get_document("cursor")?.get_array("firstBatch")?;
    let mut u = std::collections::HashSet::new();
    let mut p = std::collections::HashSet::new();
    for d in docs {
        let d = d.as_document().ok_or("not a document")?;
        // (`u` may be stored as a double of an integer value: see `typed`.)
        #[expect(clippy::cast_possible_truncation, reason = "small integers")]
        let uv = match d.get("u") {
            Some(Bson::Double(f)) => Some(*f as i64),
            other => integer(other),
        };
        assert!(u.insert(uv), "two live documents with u = {uv:?}");
        if let Some(pv) = integer(d.get("p")).filter(|&v| v > 50) {
            assert!(p.insert(pv), "two live documents with p = {pv}");
        }
    }
    Ok(())
}

/// Thousands of random writes over several kinds of indexes, with expiries, purges and
/// restarts: `validate` then finds every index exactly matching the documents.
#[tokio::test]
async fn randomized_writes_keep_indexes_exact() -> TestResult {
    const ROUNDS: usize = 6;
    const OPS: usize = 600;
    let seed = std::env::var("EBB_INDEX_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5EED_0006_u64);
    eprintln!("seed {seed} (EBB_INDEX_SEED replays it)");
    let mut rng = Rng(seed);
    let dir = tempfile::tempdir()?;
    let mut server =
        Some(TestServer::start_durable(dir.path(), |c| c.enable_test_commands = true).await?);
    let mut client = server.as_ref().ok_or("no server")?.client().await?;
    advance_clock(&client, 0).await?;
    create_index(
        &client,
        "r",
        doc! { "key": { "_ts": 1 }, "name": "_ts_1", "expireAfterSeconds": -1 },
    )
    .await?;
    run_command(
        &client,
        DB,
        doc! { "createIndexes": "r", "indexes": [
            { "key": { "u": 1 }, "name": "u_1", "unique": true },
            { "key": { "tags": 1, "g": -1 }, "name": "tags_g" },
            { "key": { "items.k": 1, "items.v": -1 }, "name": "items" },
            { "key": { "s": -1 }, "name": "s_sparse", "sparse": true },
            { "key": { "p": 1 }, "name": "p_partial", "unique": true, "partialFilterExpression": { "p": { "$gt": 50 } } },
        ] },
    )
    .await?;
    let (mut ok, mut dups) = (0, 0);
    for round in 0..ROUNDS {
        for _ in 0..OPS {
            let id = rng.below(300);
            let reply = match rng.below(10) {
                0..=2 => {
                    let docs: Vec<Document> =
                        (0..=rng.below(5)).map(|k| random_doc(&mut rng, id + k)).collect();
                    let ordered = rng.chance(50);
                    insert(&client, "r", docs, ordered).await?
                }
                3 => {
                    let replacement = random_doc(&mut rng, id);
                    run_command(&client, DB, doc! { "update": "r", "updates": [{ "q": { "_id": id }, "u": replacement, "upsert": rng.chance(50) }] }).await?
                }
                4 | 5 => {
                    let set = match rng.below(6) {
                        // The same number in another type (1 as int64 or double).
                        5 => doc! { "$mul": { "u": if rng.chance(50) { Bson::Int64(1) } else { Bson::Double(1.0) } } },
                        // One number in any of three types: a key kept, its stored value
                        // changed (validate compares entries' values with documents').
                        0 => doc! { "$set": { "u": typed(&mut rng, 400) } },
                        1 => doc! { "$push": { "tags": rng.below(20) } },
                        2 => doc! { "$set": { "items": [{ "k": rng.below(10), "v": rng.below(5) }, { "k": rng.below(10) }] } },
                        3 => doc! { "$unset": { "s": 1, "u": 1 } },
                        _ => doc! { "$set": { "p": rng.below(100), "ttl": 1 + rng.below(20) } },
                    };
                    let multi = rng.chance(20);
                    let q = if multi { doc! { "g": rng.below(5) } } else { doc! { "_id": id } };
                    run_command(&client, DB, doc! { "update": "r", "updates": [{ "q": q, "u": set, "multi": multi, "upsert": !multi && rng.chance(30) }] }).await?
                }
                6 => {
                    run_command(&client, DB, doc! { "findAndModify": "r", "query": { "_id": id }, "update": { "$inc": { "u": 1 } }, "upsert": true }).await.unwrap_or_default()
                }
                7 | 8 => {
                    let limit = i32::from(rng.chance(50));
                    let q = if limit == 0 { doc! { "_id": { "$gte": id, "$lt": id + 3 } } } else { doc! { "_id": id } };
                    run_command(&client, DB, doc! { "delete": "r", "deletes": [{ "q": q, "limit": limit }] }).await?
                }
                _ => {
                    // Time passes: documents with a `ttl` expire.
                    advance_clock(&client, 1000 * (1 + rng.below(5))).await?;
                    doc! {}
                }
            };
            let errors = write_errors(&reply);
            for e in &errors {
                let code = e.get_i32("code")?;
                // (2: `$push` to a field that is not an array.)
                assert!(
                    matches!(code, 11000 | 171 | 2),
                    "unexpected write error {e}"
                );
                if code == 11000 {
                    dups += 1;
                }
            }
            if errors.is_empty() {
                ok += 1;
            }
        }
        assert_valid(&client, "r").await?;
        assert_unique_invariants(&client).await?;
        if round % 2 == 1 {
            // Restart on the same data. The test clock starts again from real time: move it
            // back to where it was, so that nothing expired comes back.
            let before = advance_clock(&client, 0).await?.timestamp_millis();
            drop(client);
            server.take().ok_or("no server")?.stop().await?;
            server = Some(
                TestServer::start_durable(dir.path(), |c| c.enable_test_commands = true).await?,
            );
            client = server.as_ref().ok_or("no server")?.client().await?;
            let after = advance_clock(&client, 0).await?.timestamp_millis();
            advance_clock(&client, (before - after).max(0)).await?;
            assert_valid(&client, "r").await?;
        }
    }
    eprintln!("{ok} writes without error, {dups} refused");
    assert!(
        ok > 1000 && dups > 10,
        "the mix is too one-sided: {ok} ok, {dups} refused"
    );
    // Everything expires (a day later), the purge removes it all, and nothing is left behind.
    advance_clock(&client, 86_400_000).await?;
    let v = settle_purge(&client, "r").await?;
    assert_unique_invariants(&client).await?;
    eprintln!("after the purge: {v}");
    Ok(())
}
