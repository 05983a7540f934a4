//! The aggregation stages that write (`$out`, `$merge`) and collection-less aggregation
//! (`{aggregate: 1}` with `$documents` and `$listLocalSessions`), through the `mongodb` driver
//! against an in-process server, checked against MongoDB 7.0's documented behaviour: results,
//! reply shapes, error codes and messages. Reply fields the driver does not expose (a duplicate
//! key's `keyPattern`/`keyValue`) are read through a raw connection.

mod common;

use common::{
    TestResult, TestServer, advance_clock, assert_command_error, assert_error, drain, is_ok,
    run_command, run_command_err,
};
use mongodb::bson::spec::BinarySubtype;
use mongodb::bson::{Binary, Bson, Document, doc};
use mongodb::{Client, Collection};

const DB: &str = "agg";

async fn start() -> TestResult<(TestServer, Client)> {
    let server = TestServer::start().await?;
    let client = server.client().await?;
    Ok((server, client))
}

fn coll(client: &Client, name: &str) -> Collection<Document> {
    client.database(DB).collection(name)
}

/// Every document of `name`, in `_id` order.
async fn all(client: &Client, db: &str, name: &str) -> TestResult<Vec<Document>> {
    let c: Collection<Document> = client.database(db).collection(name);
    drain(c.find(doc! {}).sort(doc! { "_id": 1 }).await?).await
}

/// Inserts `docs` into `name`.
async fn put(client: &Client, name: &str, docs: Vec<Document>) -> TestResult {
    coll(client, name).insert_many(docs).await?;
    Ok(())
}

/// `src`: `{_id: 1, x: 11}`, `{_id: 2, x: 22}`, `{_id: 3, x: 33}`.
async fn seed_src(client: &Client) -> TestResult {
    put(
        client,
        "src",
        vec![
            doc! { "_id": 1, "x": 11 },
            doc! { "_id": 2, "x": 22 },
            doc! { "_id": 3, "x": 33 },
        ],
    )
    .await
}

/// Runs `{aggregate: target, pipeline, cursor}` on `DB` and returns the reply.
async fn aggregate(client: &Client, target: Bson, pipeline: Vec<Document>) -> TestResult<Document> {
    run_command(
        client,
        DB,
        doc! { "aggregate": target, "pipeline": pipeline, "cursor": {} },
    )
    .await
}

/// The `cursor` of an aggregate reply: its first batch, id and namespace.
fn first_batch(reply: &Document) -> TestResult<(Vec<Document>, i64, String)> {
    let cursor = reply.get_document("cursor")?;
    let docs = cursor
        .get_array("firstBatch")?
        .iter()
        .map(|d| {
            d.as_document()
                .cloned()
                .ok_or("batch entry is not a document")
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok((
        docs,
        cursor.get_i64("id")?,
        cursor.get_str("ns")?.to_owned(),
    ))
}

/// A `$merge` of `docs` (through `$documents`) into `target` with `options` (`into` added).
async fn merge_documents(
    client: &Client,
    docs: Vec<Document>,
    target: &str,
    options: Document,
) -> mongodb::error::Result<Document> {
    let mut spec = doc! { "into": target };
    spec.extend(options);
    client
        .database(DB)
        .run_command(doc! {
            "aggregate": 1,
            "pipeline": [{ "$documents": docs }, { "$merge": spec }],
            "cursor": {},
        })
        .await
}

// ---------------------------------------------------------------------------------------------
// $out
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn out_writes_the_results_and_answers_an_empty_cursor() -> TestResult {
    let (_server, client) = start().await?;
    seed_src(&client).await?;
    let reply = aggregate(
        &client,
        "src".into(),
        vec![
            doc! { "$sort": { "x": 1 } },
            doc! { "$match": { "_id": { "$gt": 1 } } },
            doc! { "$out": "dst" },
        ],
    )
    .await?;
    let (docs, id, ns) = first_batch(&reply)?;
    assert!(docs.is_empty(), "$out returns no documents: {reply}");
    assert_eq!(id, 0);
    assert_eq!(ns, "agg.src");
    assert_eq!(
        all(&client, DB, "dst").await?,
        [doc! { "_id": 2, "x": 22 }, doc! { "_id": 3, "x": 33 }]
    );

    // Through the driver, and with `batchSize: 0`: the write happens in the aggregate itself.
    let cursor = coll(&client, "src")
        .aggregate([doc! { "$match": { "_id": 1 } }, doc! { "$out": "dst2" }])
        .await?;
    assert!(drain(cursor).await?.is_empty());
    assert_eq!(
        all(&client, DB, "dst2").await?,
        [doc! { "_id": 1, "x": 11 }]
    );
    let reply = run_command(
        &client,
        DB,
        doc! {
            "aggregate": "src",
            "pipeline": [{ "$out": "dst3" }],
            "cursor": { "batchSize": 0 },
        },
    )
    .await?;
    assert_eq!(first_batch(&reply)?.1, 0);
    assert_eq!(all(&client, DB, "dst3").await?.len(), 3);
    Ok(())
}

#[tokio::test]
async fn out_replaces_the_target_and_keeps_its_indexes() -> TestResult {
    let (_server, client) = start().await?;
    seed_src(&client).await?;
    put(
        &client,
        "dst",
        vec![
            doc! { "_id": 1, "old": true },
            doc! { "_id": 9, "old": true },
        ],
    )
    .await?;
    run_command(
        &client,
        DB,
        doc! { "createIndexes": "dst", "indexes": [{ "key": { "x": 1 }, "name": "x_1" }] },
    )
    .await?;
    aggregate(
        &client,
        "src".into(),
        vec![
            doc! { "$match": { "_id": { "$lte": 2 } } },
            doc! { "$out": "dst" },
        ],
    )
    .await?;
    assert_eq!(
        all(&client, DB, "dst").await?,
        [doc! { "_id": 1, "x": 11 }, doc! { "_id": 2, "x": 22 }]
    );
    let names: Vec<String> = drain(
        client
            .database(DB)
            .collection::<Document>("dst")
            .list_indexes()
            .await?
            .with_type::<Document>(),
    )
    .await?
    .iter()
    .filter_map(|i| i.get_str("name").ok().map(str::to_owned))
    .collect();
    assert_eq!(names, ["_id_", "x_1"]);

    // No results: the target is emptied, not left as it was.
    aggregate(
        &client,
        "src".into(),
        vec![doc! { "$match": { "_id": 99 } }, doc! { "$out": "dst" }],
    )
    .await?;
    assert!(all(&client, DB, "dst").await?.is_empty());
    // And created when missing, even from a missing source.
    aggregate(&client, "nothing".into(), vec![doc! { "$out": "made" }]).await?;
    let names = client.database(DB).list_collection_names().await?;
    assert!(names.contains(&"made".to_owned()), "{names:?}");
    Ok(())
}

#[tokio::test]
async fn out_to_another_database_and_onto_its_own_source() -> TestResult {
    let (_server, client) = start().await?;
    seed_src(&client).await?;
    aggregate(
        &client,
        "src".into(),
        vec![doc! { "$out": { "db": "elsewhere", "coll": "copy" } }],
    )
    .await?;
    assert_eq!(all(&client, "elsewhere", "copy").await?.len(), 3);

    // The source is read before it is replaced.
    aggregate(
        &client,
        "src".into(),
        vec![
            doc! { "$match": { "x": { "$gt": 15 } } },
            doc! { "$project": { "x": 1, "y": "$x" } },
            doc! { "$out": "src" },
        ],
    )
    .await?;
    assert_eq!(
        all(&client, DB, "src").await?,
        [
            doc! { "_id": 2, "x": 22, "y": 22 },
            doc! { "_id": 3, "x": 33, "y": 33 }
        ]
    );
    Ok(())
}

#[tokio::test]
async fn out_with_a_duplicate_id_fails_and_changes_nothing() -> TestResult {
    let (_server, client) = start().await?;
    seed_src(&client).await?;
    put(&client, "dst", vec![doc! { "_id": "kept" }]).await?;
    let err = run_command_err(
        &client,
        DB,
        doc! {
            "aggregate": "src",
            "pipeline": [{ "$project": { "_id": 1 } }, { "$set": { "_id": 7 } }, { "$out": "dst" }],
            "cursor": {},
        },
    )
    .await?;
    assert_command_error(&err, 11000, "DuplicateKey");
    assert_eq!(all(&client, DB, "dst").await?, [doc! { "_id": "kept" }]);
    Ok(())
}

#[tokio::test]
async fn out_errors() -> TestResult {
    let (_server, client) = start().await?;
    seed_src(&client).await?;
    let cases: Vec<(Vec<Document>, i32, &str, &str)> = vec![
        (
            vec![doc! { "$out": "dst" }, doc! { "$match": {} }],
            40601,
            "Location40601",
            "$out can only be the final stage in the pipeline",
        ),
        (
            vec![doc! { "$out": 1 }],
            16990,
            "Location16990",
            "$out only supports a string or object argument, but found int",
        ),
        (
            vec![doc! { "$out": "system.views" }],
            17385,
            "Location17385",
            "Can't $out to special collection: system.views",
        ),
        (
            vec![doc! { "$out": { "db": "admin", "coll": "x" } }],
            31321,
            "Location31321",
            "Can't $out to internal database: admin",
        ),
        (
            vec![doc! { "$out": "" }],
            73,
            "InvalidNamespace",
            "Invalid $out target namespace, agg.",
        ),
        (
            vec![doc! { "$out": { "coll": "x" } }],
            40414,
            "IDLFailedToParse",
            "BSON field '$out.db' is missing but a required field",
        ),
        (
            vec![doc! { "$out": { "db": "agg", "coll": "x", "other": 1 } }],
            40415,
            "IDLUnknownField",
            "BSON field '$out.other' is an unknown field.",
        ),
    ];
    for (pipeline, code, name, message) in cases {
        let err = run_command_err(
            &client,
            DB,
            doc! { "aggregate": "src", "pipeline": pipeline.clone(), "cursor": {} },
        )
        .await?;
        assert_command_error(&err, code, name);
        assert_eq!(err.message, message, "for {pipeline:?}");
    }
    Ok(())
}

#[tokio::test]
async fn out_into_a_ttl_collection_expires_its_documents() -> TestResult {
    let server = TestServer::start_with_test_clock().await?;
    let client = server.client().await?;
    let t0 = advance_clock(&client, 0).await?.timestamp_millis();
    seed_src(&client).await?;
    put(&client, "src", vec![doc! { "_id": 4, "x": 44, "ttl": -1 }]).await?;
    // The target's TTL policy: documents live 10 s after their last write, unless their own
    // `ttl` says otherwise.
    run_command(
        &client,
        DB,
        doc! {
            "createIndexes": "dst",
            "indexes": [{ "key": { "_ts": 1 }, "name": "_ts_1", "expireAfterSeconds": 10 }],
        },
    )
    .await?;
    advance_clock(&client, 1_000).await?;
    aggregate(&client, "src".into(), vec![doc! { "$out": "dst" }]).await?;
    assert_eq!(all(&client, DB, "dst").await?.len(), 4);

    // Written at t0 + 1 s: gone from t0 + 11 s on, except the one that never expires.
    let left = advance_clock(&client, 9_999).await?.timestamp_millis();
    assert_eq!(left, t0 + 10_999);
    assert_eq!(all(&client, DB, "dst").await?.len(), 4);
    advance_clock(&client, 1).await?;
    assert_eq!(
        all(&client, DB, "dst").await?,
        [doc! { "_id": 4, "x": 44, "ttl": -1 }]
    );
    // The source, without a TTL policy, keeps everything.
    assert_eq!(all(&client, DB, "src").await?.len(), 4);

    // $merge writes too: an inserted document and a replaced one live 10 s from the merge.
    merge_documents(
        &client,
        vec![doc! { "_id": 4, "x": 0 }, doc! { "_id": 5 }],
        "dst",
        doc! { "whenMatched": "replace" },
    )
    .await?;
    advance_clock(&client, 9_999).await?;
    assert_eq!(
        all(&client, DB, "dst").await?,
        [doc! { "_id": 4, "x": 0 }, doc! { "_id": 5 }]
    );
    advance_clock(&client, 1).await?;
    assert!(all(&client, DB, "dst").await?.is_empty());
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// $merge
// ---------------------------------------------------------------------------------------------

/// `dst` holds `{_id: 1, a: "old", b: "old"}`; the merged documents are `{_id: 1, a: "new"}`
/// (matched) and `{_id: 2, a: "new"}` (not matched).
async fn merge_case(client: &Client, options: Document) -> TestResult<Vec<Document>> {
    coll(client, "dst").drop().await?;
    put(
        client,
        "dst",
        vec![doc! { "_id": 1, "a": "old", "b": "old" }],
    )
    .await?;
    merge_documents(
        client,
        vec![doc! { "_id": 1, "a": "new" }, doc! { "_id": 2, "a": "new" }],
        "dst",
        options,
    )
    .await?;
    all(client, DB, "dst").await
}

#[tokio::test]
async fn merge_modes() -> TestResult {
    let (_server, client) = start().await?;
    let inserted = doc! { "_id": 2, "a": "new" };
    // Defaults: whenMatched merge, whenNotMatched insert.
    assert_eq!(
        merge_case(&client, doc! {}).await?,
        [doc! { "_id": 1, "a": "new", "b": "old" }, inserted.clone()]
    );
    assert_eq!(
        merge_case(&client, doc! { "whenMatched": "replace" }).await?,
        [doc! { "_id": 1, "a": "new" }, inserted.clone()]
    );
    assert_eq!(
        merge_case(&client, doc! { "whenMatched": "keepExisting" }).await?,
        [doc! { "_id": 1, "a": "old", "b": "old" }, inserted.clone()]
    );
    assert_eq!(
        merge_case(
            &client,
            doc! { "whenMatched": "replace", "whenNotMatched": "discard" }
        )
        .await?,
        [doc! { "_id": 1, "a": "new" }]
    );
    assert_eq!(
        merge_case(
            &client,
            doc! { "whenMatched": "merge", "whenNotMatched": "discard", "on": "_id" }
        )
        .await?,
        [doc! { "_id": 1, "a": "new", "b": "old" }]
    );
    // A pipeline sees the existing document, `$$new` and `let` variables; a document that
    // matches nothing is inserted as it is.
    assert_eq!(
        merge_case(
            &client,
            doc! {
                "let": { "tag": "$a" },
                "whenMatched": [{ "$set": { "b": "$$new.a", "c": "$$tag", "was": "$a" } }],
            }
        )
        .await?,
        [
            doc! { "_id": 1, "a": "old", "b": "new", "c": "new", "was": "old" },
            inserted.clone()
        ]
    );
    Ok(())
}

#[tokio::test]
async fn merge_from_a_collection_generates_missing_ids_and_creates_the_target() -> TestResult {
    let (_server, client) = start().await?;
    seed_src(&client).await?;
    let cursor = coll(&client, "src")
        .aggregate([
            doc! { "$sort": { "x": 1 } },
            doc! { "$match": { "_id": { "$gt": 1 } } },
            doc! { "$project": { "_id": 0, "x": 1 } },
            doc! { "$merge": { "into": "fresh" } },
        ])
        .await?;
    assert!(drain(cursor).await?.is_empty());
    let docs = all(&client, DB, "fresh").await?;
    assert_eq!(docs.len(), 2);
    assert!(
        docs.iter()
            .all(|d| matches!(d.get("_id"), Some(Bson::ObjectId(_)))),
        "{docs:?}"
    );

    // Into the collection being aggregated.
    let cursor = coll(&client, "src")
        .aggregate([doc! { "$project": { "y": "$x" } }, doc! { "$merge": "src" }])
        .await?;
    assert!(drain(cursor).await?.is_empty());
    assert_eq!(
        all(&client, DB, "src").await?[0],
        doc! { "_id": 1, "x": 11, "y": 11 }
    );

    // Nothing to insert: no collection is created.
    merge_documents(
        &client,
        vec![doc! { "_id": 1 }],
        "never",
        doc! { "whenNotMatched": "discard" },
    )
    .await?;
    let names = client.database(DB).list_collection_names().await?;
    assert!(!names.contains(&"never".to_owned()), "{names:?}");
    Ok(())
}

#[tokio::test]
async fn merge_when_matched_fail_is_a_duplicate_key_with_its_key() -> TestResult {
    let server = TestServer::start().await?;
    let client = server.client().await?;
    put(
        &client,
        "test",
        vec![doc! { "_id": 1, "x": 1 }, doc! { "_id": 2, "x": 1 }],
    )
    .await?;
    let mut raw = server.raw().await?;
    let reply = raw
        .command(
            DB,
            doc! {
                "aggregate": 1,
                "pipeline": [
                    { "$documents": [{ "_id": 3, "x": 1 }, { "_id": 2, "x": 1 }] },
                    { "$merge": { "into": "test", "whenMatched": "fail" } },
                ],
                "cursor": {},
            },
        )
        .await?;
    assert_error(&reply, 11000, "DuplicateKey");
    assert_eq!(
        reply.get_str("errmsg")?,
        "E11000 duplicate key error collection: agg.test index: _id_ dup key: { _id: 2 }"
    );
    assert_eq!(reply.get_document("keyPattern")?, &doc! { "_id": 1 });
    assert_eq!(reply.get_document("keyValue")?, &doc! { "_id": 2 });
    // What came before the failure stays written, as in mongod.
    assert_eq!(all(&client, DB, "test").await?.len(), 3);
    Ok(())
}

#[tokio::test]
async fn merge_errors() -> TestResult {
    let (_server, client) = start().await?;
    put(&client, "dst", vec![doc! { "_id": 1 }]).await?;

    let not_matched = merge_documents(
        &client,
        vec![doc! { "_id": 5 }],
        "dst",
        doc! { "whenMatched": "replace", "whenNotMatched": "fail" },
    )
    .await
    .expect_err("no match with whenNotMatched: fail");
    let ce = common::command_error(&not_matched).ok_or("not a command error")?;
    assert_command_error(ce, 13113, "MergeStageNoMatchingDocument");
    assert_eq!(
        ce.message,
        "$merge could not find a matching document in the target collection for at least one \
         document in the source collection"
    );

    let cases: Vec<(Document, i32, &str, &str)> = vec![
        (
            doc! { "into": "dst", "on": "x" },
            51183,
            "Location51183",
            "Cannot find index to verify that join fields will be unique",
        ),
        (
            doc! { "into": "dst", "whenMatched": "fail", "whenNotMatched": "discard" },
            51181,
            "Location51181",
            "Combination of $merge modes 'whenMatched: fail' and 'whenNotMatched: discard' is not supported",
        ),
        (
            doc! { "into": "dst", "whenMatched": "keepExisting", "whenNotMatched": "fail" },
            51181,
            "Location51181",
            "Combination of $merge modes 'whenMatched: keepExisting' and 'whenNotMatched: fail' is not supported",
        ),
        (
            doc! { "into": "dst", "whenMatched": "upsert" },
            2,
            "BadValue",
            "Enumeration value 'upsert' for field 'whenMatched' is not a valid value.",
        ),
        (
            doc! { "into": "dst", "let": { "a": 1 } },
            51199,
            "Location51199",
            "Cannot use 'let' variables with 'whenMatched: merge' mode",
        ),
        (
            doc! { "into": "dst", "on": [] },
            51187,
            "Location51187",
            "If explicitly specifying $merge 'on', must include at least one field",
        ),
        (
            doc! { "into": 5 },
            51178,
            "Location51178",
            "$merge 'into' field  must be either a string or an object, but found int",
        ),
        (
            doc! { "into": "system.js" },
            31319,
            "Location31319",
            "Cannot $merge to special collection: system.js",
        ),
        (
            doc! { "into": { "db": "local", "coll": "x" } },
            31320,
            "Location31320",
            "Cannot $merge to internal database: local",
        ),
        (
            doc! { "whenMatched": "merge" },
            40414,
            "IDLFailedToParse",
            "BSON field '$merge.into' is missing but a required field",
        ),
    ];
    for (spec, code, name, message) in cases {
        let err = run_command_err(
            &client,
            DB,
            doc! {
                "aggregate": 1,
                "pipeline": [{ "$documents": [{ "_id": 1 }] }, { "$merge": spec.clone() }],
                "cursor": {},
            },
        )
        .await?;
        assert_command_error(&err, code, name);
        assert_eq!(err.message, message, "for {spec}");
    }

    let err = run_command_err(
        &client,
        DB,
        doc! {
            "aggregate": 1,
            "pipeline": [{ "$documents": [{ "_id": [1] }] }, { "$merge": "dst" }],
            "cursor": {},
        },
    )
    .await?;
    assert_command_error(&err, 51185, "Location51185");
    let err = run_command_err(
        &client,
        DB,
        doc! {
            "aggregate": 1,
            "pipeline": [{ "$documents": [{ "_id": null }] }, { "$merge": "dst" }],
            "cursor": {},
        },
    )
    .await?;
    assert_command_error(&err, 51132, "Location51132");
    let err = run_command_err(
        &client,
        DB,
        doc! {
            "aggregate": "dst",
            "pipeline": [{ "$merge": "other" }, { "$match": {} }],
            "cursor": {},
        },
    )
    .await?;
    assert_command_error(&err, 40601, "Location40601");
    assert_eq!(
        err.message,
        "$merge can only be the final stage in the pipeline"
    );
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// {aggregate: 1}
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn collectionless_aggregate_with_documents() -> TestResult {
    let (_server, client) = start().await?;
    let reply = aggregate(
        &client,
        1.into(),
        vec![
            doc! { "$documents": [{ "a": 3 }, { "a": 1 }, { "a": 2, "b": { "$literal": "$b" } }] },
            doc! { "$sort": { "a": 1 } },
            doc! { "$set": { "twice": ["$a", "$a"] } },
        ],
    )
    .await?;
    let (docs, id, ns) = first_batch(&reply)?;
    assert_eq!(
        docs,
        [
            doc! { "a": 1, "twice": [1, 1] },
            doc! { "a": 2, "b": "$b", "twice": [2, 2] },
            doc! { "a": 3, "twice": [3, 3] },
        ]
    );
    assert_eq!(id, 0);
    assert_eq!(ns, "agg.$cmd.aggregate");

    // Through the driver's database-level aggregate, in batches (getMore on
    // `$cmd.aggregate`).
    let docs = drain(
        client
            .database(DB)
            .aggregate([
                doc! { "$documents": [{ "_id": 1 }, { "_id": 2 }, { "_id": 3 }] },
                doc! { "$project": { "n": "$_id", "_id": 0 } },
            ])
            .batch_size(1)
            .await?,
    )
    .await?;
    assert_eq!(docs, [doc! { "n": 1 }, doc! { "n": 2 }, doc! { "n": 3 }]);
    Ok(())
}

#[tokio::test]
async fn collectionless_aggregate_errors() -> TestResult {
    let (_server, client) = start().await?;
    let cases: Vec<(Bson, Vec<Document>, i32, &str, &str)> = vec![
        (
            1.into(),
            vec![],
            73,
            "InvalidNamespace",
            "{aggregate: 1} is not valid for an empty pipeline.",
        ),
        (
            1.into(),
            vec![doc! { "$match": {} }],
            73,
            "InvalidNamespace",
            "{aggregate: 1} is not valid for '$match'; a collection is required.",
        ),
        (
            "c".into(),
            vec![doc! { "$documents": [] }],
            73,
            "InvalidNamespace",
            "'$documents' can only be run with {aggregate: 1}",
        ),
        (
            "c".into(),
            vec![doc! { "$listLocalSessions": {} }],
            73,
            "InvalidNamespace",
            "$listLocalSessions must be run against the database with {aggregate: 1}, not a \
             collection",
        ),
        (
            1.into(),
            vec![doc! { "$documents": [] }, doc! { "$documents": [] }],
            40602,
            "Location40602",
            "$documents is only valid as the first stage in a pipeline",
        ),
        (
            1.into(),
            vec![doc! { "$documents": 5 }],
            5_858_203,
            "Location5858203",
            "an array is expected",
        ),
        (
            2.into(),
            vec![doc! { "$documents": [] }],
            9,
            "FailedToParse",
            "Invalid command format: the 'aggregate' field must specify a collection name or 1",
        ),
    ];
    for (target, pipeline, code, name, message) in cases {
        let err = run_command_err(
            &client,
            DB,
            doc! { "aggregate": target, "pipeline": pipeline.clone(), "cursor": {} },
        )
        .await?;
        assert_command_error(&err, code, name);
        assert_eq!(err.message, message, "for {pipeline:?}");
    }
    Ok(())
}

#[tokio::test]
async fn change_streams_are_refused_as_on_a_standalone() -> TestResult {
    let (_server, client) = start().await?;
    let cases: Vec<(Bson, Vec<Document>, i32, &str, &str)> = vec![
        // collection.watch(), db.watch(), and a $changeStream that is not first.
        (
            "c".into(),
            vec![doc! { "$changeStream": {} }, doc! { "$match": {} }],
            40573,
            "Location40573",
            "The $changeStream stage is only supported on replica sets",
        ),
        (
            1.into(),
            vec![doc! { "$changeStream": { "fullDocument": "updateLookup" } }],
            40573,
            "Location40573",
            "The $changeStream stage is only supported on replica sets",
        ),
        (
            "c".into(),
            vec![doc! { "$match": {} }, doc! { "$changeStream": {} }],
            40573,
            "Location40573",
            "The $changeStream stage is only supported on replica sets",
        ),
        (
            "c".into(),
            vec![doc! { "$changeStream": 5 }],
            6_188_500,
            "Location6188500",
            "$changeStream must take a nested object but found: $changeStream: 5",
        ),
    ];
    for (target, pipeline, code, name, message) in cases {
        let err = run_command_err(
            &client,
            DB,
            doc! { "aggregate": target, "pipeline": pipeline.clone(), "cursor": {} },
        )
        .await?;
        assert_command_error(&err, code, name);
        assert_eq!(err.message, message, "for {pipeline:?}");
    }
    // The driver's own watch() gets the same answer.
    let err = coll(&client, "c")
        .watch()
        .await
        .err()
        .ok_or("watch() succeeded on a standalone")?;
    let err = common::command_error(&err).ok_or("watch() failed without a command error")?;
    assert_command_error(err, 40573, "Location40573");
    Ok(())
}

fn lsid(byte: u8) -> Document {
    doc! { "id": Binary { subtype: BinarySubtype::Uuid, bytes: vec![byte; 16] } }
}

/// The session ids `$listLocalSessions` (with `spec`) lists on `raw`.
async fn listed(raw: &mut common::RawConn, spec: Document) -> TestResult<Vec<Vec<u8>>> {
    let reply = raw
        .command(
            "admin",
            doc! {
                "aggregate": 1,
                "pipeline": [{ "$listLocalSessions": spec }],
                "cursor": {},
            },
        )
        .await?;
    assert!(is_ok(&reply), "{reply}");
    let (docs, _, _) = first_batch(&reply)?;
    let mut ids = Vec::new();
    for d in docs {
        let key = d.get_document("_id")?;
        assert!(d.get_datetime("lastUse").is_ok(), "{d}");
        // Without access control, every session belongs to the unauthenticated user.
        assert_eq!(
            key.get_binary_generic("uid")?.len(),
            32,
            "uid is a SHA-256 digest: {d}"
        );
        match key.get("id") {
            Some(Bson::Binary(b)) if b.subtype == BinarySubtype::Uuid => ids.push(b.bytes.clone()),
            other => return Err(format!("session id {other:?}").into()),
        }
    }
    Ok(ids)
}

#[tokio::test]
async fn list_local_sessions_shows_the_sessions_commands_used() -> TestResult {
    let server = TestServer::start().await?;
    let mut raw = server.raw().await?;
    assert!(listed(&mut raw, doc! {}).await?.is_empty());

    for byte in [7, 8] {
        let reply = raw
            .command(DB, doc! { "ping": 1, "lsid": lsid(byte) })
            .await?;
        assert!(is_ok(&reply), "{reply}");
    }
    assert_eq!(listed(&mut raw, doc! {}).await?, [vec![7; 16], vec![8; 16]]);
    assert_eq!(listed(&mut raw, doc! { "allUsers": true }).await?.len(), 2);
    // Sessions of named users: there are none on a server without users.
    assert!(
        listed(
            &mut raw,
            doc! { "users": [{ "user": "app", "db": "admin" }] }
        )
        .await?
        .is_empty()
    );

    let reply = raw
        .command("admin", doc! { "endSessions": [lsid(7)] })
        .await?;
    assert!(is_ok(&reply), "{reply}");
    assert_eq!(listed(&mut raw, doc! {}).await?, [vec![8; 16]]);

    // The spec test's pipeline, through the driver (whose implicit session is listed).
    let client = server.client().await?;
    let docs = drain(
        client
            .database("admin")
            .aggregate([
                doc! { "$listLocalSessions": {} },
                doc! { "$limit": 1 },
                doc! { "$addFields": { "dummy": "dummy field" } },
                doc! { "$project": { "_id": 0, "dummy": 1 } },
            ])
            .await?,
    )
    .await?;
    assert_eq!(docs, [doc! { "dummy": "dummy field" }]);

    let reply = raw
        .command(
            "admin",
            doc! {
                "aggregate": 1,
                "pipeline": [{ "$listLocalSessions": { "allUsers": true, "users": [{ "user": "a", "db": "b" }] } }],
                "cursor": {},
            },
        )
        .await?;
    assert_error(&reply, 12, "UnsupportedFormat");
    Ok(())
}
