//! Views through the `mongodb` crate: `create` with `viewOn`/`pipeline` (views on views),
//! `collMod`, `drop`, `listCollections`, reads through the view's pipeline (`find`, `getMore`,
//! `count`, `distinct`, `aggregate`), the refusals of commands that need a collection, restart
//! survival, and a view over a TTL collection on the server's test clock.

mod common;

use common::{
    TestResult, TestServer, advance_clock, assert_command_error, drain, integer, run_command,
    run_command_err,
};
use mongodb::bson::{Bson, DateTime, Document, doc};
use mongodb::{Client, Database};

const DB: &str = "views";

fn ids(docs: &[Document]) -> Vec<i64> {
    docs.iter()
        .map(|d| integer(d.get("_id")).unwrap_or(-1))
        .collect()
}

/// `src` holds `{_id: i, g: i % 3, v: 10 * i}` for i in 0..10; `v1` is `g == 1` over it, `v2`
/// projects `v1` to `{v}`.
async fn seed(db: &Database) -> TestResult {
    let docs: Vec<Document> = (0..10_i32)
        .map(|i| doc! { "_id": i, "g": i % 3, "v": 10 * i })
        .collect();
    db.collection::<Document>("src").insert_many(docs).await?;
    db.run_command(
        doc! { "create": "v1", "viewOn": "src", "pipeline": [{ "$match": { "g": 1 } }] },
    )
    .await?;
    db.run_command(
        doc! { "create": "v2", "viewOn": "v1", "pipeline": [{ "$project": { "v": 1 } }] },
    )
    .await?;
    Ok(())
}

async fn find_ids(db: &Database, name: &str, filter: Document) -> TestResult<Vec<i64>> {
    let docs = drain(
        db.collection::<Document>(name)
            .find(filter)
            .sort(doc! { "_id": 1 })
            .await?,
    )
    .await?;
    Ok(ids(&docs))
}

async fn start() -> TestResult<(TestServer, Client)> {
    let server = TestServer::start().await?;
    let client = server.client().await?;
    Ok((server, client))
}

#[tokio::test]
async fn reads_go_through_the_views_pipeline() -> TestResult {
    let (_server, client) = start().await?;
    let db = client.database(DB);
    seed(&db).await?;

    assert_eq!(find_ids(&db, "v1", doc! {}).await?, [1, 4, 7]);
    assert_eq!(
        find_ids(&db, "v1", doc! { "v": { "$gt": 10 } }).await?,
        [4, 7]
    );
    // A view on a view: both pipelines, the lower first.
    let docs = drain(
        db.collection::<Document>("v2")
            .find(doc! {})
            .sort(doc! { "_id": -1 })
            .await?,
    )
    .await?;
    assert_eq!(
        docs,
        [
            doc! { "_id": 7, "v": 70 },
            doc! { "_id": 4, "v": 40 },
            doc! { "_id": 1, "v": 10 }
        ]
    );
    // find's options become stages: skip, limit, projection.
    let reply = run_command(
        &client,
        DB,
        doc! { "find": "v1", "sort": { "_id": 1 }, "skip": 1, "limit": 1, "projection": { "g": 0 } },
    )
    .await?;
    let cursor = reply.get_document("cursor")?;
    assert_eq!(cursor.get_str("ns")?, "views.v1");
    assert_eq!(
        cursor.get_array("firstBatch")?,
        &vec![Bson::Document(doc! { "_id": 4, "v": 40 })]
    );

    // count and distinct.
    assert_eq!(
        db.collection::<Document>("v1")
            .count_documents(doc! {})
            .await?,
        3
    );
    let reply = run_command(
        &client,
        DB,
        doc! { "count": "v1", "query": { "v": { "$lt": 50 } } },
    )
    .await?;
    assert_eq!(integer(reply.get("n")), Some(2), "{reply}");
    let reply = run_command(&client, DB, doc! { "count": "v2", "skip": 1, "limit": 1 }).await?;
    assert_eq!(integer(reply.get("n")), Some(1), "{reply}");
    let values = db
        .collection::<Document>("src")
        .distinct("g", doc! {})
        .await?;
    assert_eq!(values.len(), 3);
    let values = db
        .collection::<Document>("v1")
        .distinct("g", doc! {})
        .await?;
    assert_eq!(values, [Bson::Int32(1)]);
    let values = db
        .collection::<Document>("v2")
        .distinct("v", doc! { "_id": { "$gt": 1 } })
        .await?;
    assert_eq!(values, [Bson::Int32(40), Bson::Int32(70)]);

    // aggregate: the view's pipeline, then the request's.
    let docs = drain(
        db.collection::<Document>("v2")
            .aggregate([doc! { "$group": { "_id": null, "total": { "$sum": "$v" } } }])
            .await?,
    )
    .await?;
    assert_eq!(docs, [doc! { "_id": Bson::Null, "total": 120 }]);
    let reply = run_command(
        &client,
        DB,
        doc! { "aggregate": "v2", "pipeline": [], "cursor": {} },
    )
    .await?;
    assert_eq!(reply.get_document("cursor")?.get_str("ns")?, "views.v2");
    Ok(())
}

#[tokio::test]
async fn get_more_continues_a_views_cursor_under_the_views_name() -> TestResult {
    let (_server, client) = start().await?;
    let db = client.database(DB);
    seed(&db).await?;
    for first in [
        doc! { "find": "v1", "sort": { "_id": 1 }, "batchSize": 2 },
        doc! { "aggregate": "v1", "pipeline": [{ "$sort": { "_id": 1 } }], "cursor": { "batchSize": 2 } },
    ] {
        let reply = run_command(&client, DB, first.clone()).await?;
        let cursor = reply.get_document("cursor")?;
        assert_eq!(cursor.get_str("ns")?, "views.v1", "{first}");
        assert_eq!(cursor.get_array("firstBatch")?.len(), 2, "{first}");
        let id = cursor.get_i64("id")?;
        assert_ne!(id, 0, "{first}");
        let more = run_command(&client, DB, doc! { "getMore": id, "collection": "v1" }).await?;
        let cursor = more.get_document("cursor")?;
        assert_eq!(cursor.get_str("ns")?, "views.v1");
        assert_eq!(
            cursor.get_array("nextBatch")?,
            &vec![Bson::Document(doc! { "_id": 7, "g": 1, "v": 70 })]
        );
    }
    // killCursors by the view's name.
    let reply = run_command(
        &client,
        DB,
        doc! { "find": "v1", "sort": { "_id": 1 }, "batchSize": 1 },
    )
    .await?;
    let id = reply.get_document("cursor")?.get_i64("id")?;
    let killed = run_command(&client, DB, doc! { "killCursors": "v1", "cursors": [id] }).await?;
    assert_eq!(killed.get_array("cursorsKilled")?, &vec![Bson::Int64(id)]);
    // explain of a find on a view explains the aggregation over its collection.
    let explained = run_command(
        &client,
        DB,
        doc! { "explain": { "find": "v1", "filter": { "v": 40 } }, "verbosity": "executionStats" },
    )
    .await?;
    let text = explained.to_string();
    assert!(text.contains("views.src"), "{explained}");
    // The view's stage is planned over the collection, merged with the find's filter (mongod
    // joins adjacent `$match`es).
    assert!(text.contains(r#""namespace": "views.src""#), "{explained}");
    assert!(
        text.contains(
            r#""parsedQuery": { "$and": [{ "g": { "$eq": 1 } }, { "v": { "$eq": 40 } }] }"#
        ),
        "{explained}"
    );
    // The driver's cursor over many batches.
    let docs = drain(
        db.collection::<Document>("v1")
            .find(doc! {})
            .batch_size(1)
            .await?,
    )
    .await?;
    assert_eq!(docs.len(), 3);
    Ok(())
}

#[tokio::test]
async fn list_collections_shows_views() -> TestResult {
    let (_server, client) = start().await?;
    let db = client.database(DB);
    seed(&db).await?;
    let reply = run_command(
        &client,
        DB,
        doc! { "listCollections": 1, "filter": { "type": "view" } },
    )
    .await?;
    let batch = reply.get_document("cursor")?.get_array("firstBatch")?;
    assert_eq!(
        batch,
        &vec![
            Bson::Document(doc! {
                "name": "v1", "type": "view",
                "options": { "viewOn": "src", "pipeline": [{ "$match": { "g": 1 } }] },
                "info": { "readOnly": true },
            }),
            Bson::Document(doc! {
                "name": "v2", "type": "view",
                "options": { "viewOn": "v1", "pipeline": [{ "$project": { "v": 1 } }] },
                "info": { "readOnly": true },
            }),
        ]
    );
    let reply = run_command(
        &client,
        DB,
        doc! { "listCollections": 1, "nameOnly": true, "filter": { "name": "v2" } },
    )
    .await?;
    assert_eq!(
        reply.get_document("cursor")?.get_array("firstBatch")?,
        &vec![Bson::Document(doc! { "name": "v2", "type": "view" })]
    );
    let mut names = db.list_collection_names().await?;
    names.sort();
    assert_eq!(names, ["src", "v1", "v2"]);
    Ok(())
}

#[tokio::test]
async fn a_view_refuses_writes_and_collection_commands() -> TestResult {
    let (_server, client) = start().await?;
    let db = client.database(DB);
    seed(&db).await?;
    let refused = "Namespace views.v1 is a view, not a collection";
    // Writes fail per statement: the first alone when ordered, each when not.
    for (cmd, reported) in [
        (
            doc! { "insert": "v1", "documents": [{ "_id": 100 }, { "_id": 101 }] },
            1,
        ),
        (
            doc! { "insert": "v1", "documents": [{ "_id": 100 }, { "_id": 101 }], "ordered": false },
            2,
        ),
        (
            doc! { "update": "v1", "updates": [{ "q": {}, "u": { "$set": { "a": 1 } } }] },
            1,
        ),
        (
            doc! { "delete": "v1", "ordered": false,
            "deletes": [{ "q": {}, "limit": 1 }, { "q": {}, "limit": 0 }] },
            2,
        ),
    ] {
        let reply = run_command(&client, DB, cmd.clone()).await?;
        assert_eq!(integer(reply.get("n")), Some(0), "{cmd}: {reply}");
        let errors = reply.get_array("writeErrors")?;
        assert_eq!(errors.len(), reported, "{cmd}: {reply}");
        for (i, e) in errors.iter().enumerate() {
            let e = e.as_document().ok_or("a write error is a document")?;
            assert_eq!(integer(e.get("index")), Some(i64::try_from(i)?));
            assert_eq!(integer(e.get("code")), Some(166));
            assert_eq!(e.get_str("errmsg")?, refused);
        }
    }
    // Through the driver's helpers too (a sequence of documents).
    let err = db
        .collection::<Document>("v1")
        .insert_one(doc! { "_id": 100 })
        .await
        .err()
        .ok_or("an insert into a view succeeded")?;
    assert_eq!(
        common::write_error(&err).map(|w| w.code),
        Some(166),
        "{err}"
    );
    for cmd in [
        doc! { "findAndModify": "v1", "query": {}, "remove": true },
        doc! { "createIndexes": "v1", "indexes": [{ "key": { "v": 1 }, "name": "v_1" }] },
        doc! { "listIndexes": "v1" },
        doc! { "dropIndexes": "v1", "index": "*" },
        doc! { "collStats": "v1" },
        doc! { "compact": "v1" },
    ] {
        let e = run_command_err(&client, DB, cmd.clone()).await?;
        assert_command_error(&e, 166, "CommandNotSupportedOnView");
        assert_eq!(e.message, refused, "{cmd}");
    }
    let e = run_command_err(&client, DB, doc! { "validate": "v1" }).await?;
    assert_command_error(&e, 166, "CommandNotSupportedOnView");
    assert_eq!(e.message, "Cannot validate a view");
    let e = run_command_err(
        &client,
        "admin",
        doc! { "renameCollection": "views.v1", "to": "views.v9" },
    )
    .await?;
    assert_command_error(&e, 166, "CommandNotSupportedOnView");
    assert_eq!(e.message, "cannot rename view: views.v1");
    let e = run_command_err(
        &client,
        "admin",
        doc! { "renameCollection": "views.src", "to": "views.v1", "dropTarget": true },
    )
    .await?;
    assert_command_error(&e, 48, "NamespaceExists");
    assert_eq!(e.message, "a view already exists with that name: views.v1");
    // find options an aggregation lacks.
    let e = run_command_err(&client, DB, doc! { "find": "v1", "noCursorTimeout": true }).await?;
    assert_command_error(&e, 168, "InvalidPipelineOperator");
    assert_eq!(
        e.message,
        "Option noCursorTimeout not supported in aggregation."
    );
    let e = run_command_err(
        &client,
        DB,
        doc! { "find": "v1", "collation": { "locale": "fr" } },
    )
    .await?;
    assert_command_error(&e, 167, "OptionNotSupportedOnView");
    // $out and $merge never write to a view (nor make a collection of its name).
    for stage in [doc! { "$out": "v1" }, doc! { "$merge": { "into": "v1" } }] {
        let e = run_command_err(
            &client,
            DB,
            doc! { "aggregate": "src", "pipeline": [stage.clone()], "cursor": {} },
        )
        .await?;
        assert_eq!(e.code, 166, "{stage}: {e:?}");
        assert!(e.message.ends_with(refused), "{stage}: {e:?}");
    }
    // Explained writes too.
    let e = run_command_err(
        &client,
        DB,
        doc! { "explain": { "delete": "v1", "deletes": [{ "q": {}, "limit": 0 }] } },
    )
    .await?;
    assert_command_error(&e, 166, "CommandNotSupportedOnView");
    // dbStats counts the views.
    let stats = run_command(&client, DB, doc! { "dbStats": 1 }).await?;
    assert_eq!(integer(stats.get("views")), Some(2), "{stats}");
    // Nothing was written anywhere; the view still reads its source.
    assert_eq!(find_ids(&db, "v1", doc! {}).await?, [1, 4, 7]);
    assert_eq!(
        db.collection::<Document>("src")
            .count_documents(doc! {})
            .await?,
        10
    );
    Ok(())
}

#[tokio::test]
async fn create_and_coll_mod_check_a_definition() -> TestResult {
    let (_server, client) = start().await?;
    let db = client.database(DB);
    seed(&db).await?;
    for (cmd, code, name, msg) in [
        (
            doc! { "create": "bad", "pipeline": [] },
            72,
            "InvalidOptions",
            "'pipeline' requires 'viewOn' to also be specified",
        ),
        (
            doc! { "create": "bad", "viewOn": "src", "pipeline": [{ "$nope": 1 }] },
            40324,
            "Location40324",
            "Unrecognized pipeline stage name: '$nope'",
        ),
        (
            doc! { "create": "bad", "viewOn": "src", "pipeline": [{ "$out": "x" }] },
            167,
            "OptionNotSupportedOnView",
            "Invalid pipeline for view views.bad :: caused by :: The aggregation stage $out in \
             location 0 of the pipeline cannot be used in the view definition of views.bad \
             because it writes to disk",
        ),
        (
            doc! { "create": "bad", "viewOn": "src", "pipeline": { "$match": {} } },
            14,
            "TypeMismatch",
            "BSON field 'create.pipeline' is the wrong type 'object', expected type 'array'",
        ),
        (
            doc! { "create": "bad", "viewOn": "", "pipeline": [] },
            2,
            "BadValue",
            "'viewOn' cannot be empty",
        ),
        (
            doc! { "create": "bad", "viewOn": "a$b" },
            73,
            "InvalidNamespace",
            "invalid name for 'viewOn': a$b",
        ),
        (
            doc! { "create": "bad", "viewOn": "bad" },
            5,
            "GraphContainsCycle",
            "View cycle detected: views.bad => views.bad => views.bad",
        ),
        (
            doc! { "create": "src", "viewOn": "v1" },
            48,
            "NamespaceExists",
            "Collection views.src already exists.",
        ),
        (
            doc! { "create": "v1", "viewOn": "other" },
            48,
            "NamespaceExists",
            "namespace views.v1 already exists, but is a view on views.src rather than \
             views.other",
        ),
        (
            doc! { "create": "v1" },
            48,
            "NamespaceExists",
            "Collection views.v1 already exists.",
        ),
        (
            doc! { "collMod": "v1", "viewOn": "v2", "pipeline": [] },
            5,
            "GraphContainsCycle",
            "View cycle detected: views.v1 => views.v1 => views.v2 => views.v1",
        ),
        (
            doc! { "collMod": "v1", "index": { "name": "x", "hidden": true } },
            72,
            "InvalidOptions",
            "option not supported on a view: index",
        ),
        (
            doc! { "collMod": "src", "viewOn": "v1", "pipeline": [] },
            72,
            "InvalidOptions",
            "option only supported on a view: pipeline",
        ),
        (
            doc! { "collMod": "v1", "pipeline": [{ "$merge": { "into": "x" } }] },
            167,
            "OptionNotSupportedOnView",
            "Invalid pipeline for view views.v1 :: caused by :: The aggregation stage $merge in \
             location 0 of the pipeline cannot be used in the view definition of views.v1 \
             because it writes to disk",
        ),
    ] {
        let e = run_command_err(&client, DB, cmd.clone()).await?;
        assert_command_error(&e, code, name);
        assert_eq!(e.message, msg, "{cmd}");
    }
    // Creating a view again with the same definition succeeds.
    db.run_command(
        doc! { "create": "v1", "viewOn": "src", "pipeline": [{ "$match": { "g": 1 } }] },
    )
    .await?;
    // A view over a collection that does not exist reads as empty.
    db.run_command(doc! { "create": "later", "viewOn": "nosuch" })
        .await?;
    assert!(find_ids(&db, "later", doc! {}).await?.is_empty());
    assert_eq!(
        db.collection::<Document>("later")
            .count_documents(doc! {})
            .await?,
        0
    );

    // collMod replaces each half it names.
    db.run_command(doc! { "collMod": "v1", "pipeline": [{ "$match": { "g": 2 } }] })
        .await?;
    assert_eq!(find_ids(&db, "v1", doc! {}).await?, [2, 5, 8]);
    db.run_command(doc! { "collMod": "v2", "viewOn": "src" })
        .await?;
    assert_eq!(
        find_ids(&db, "v2", doc! {}).await?,
        (0..10).collect::<Vec<_>>()
    );
    Ok(())
}

#[tokio::test]
async fn chains_stop_at_twenty_views() -> TestResult {
    let (_server, client) = start().await?;
    let db = client.database(DB);
    db.collection::<Document>("c")
        .insert_one(doc! { "_id": 1 })
        .await?;
    let mut below = "c".to_owned();
    for i in 1..=20 {
        let name = format!("d{i}");
        db.run_command(doc! { "create": &name, "viewOn": &below, "pipeline": [] })
            .await?;
        below = name;
    }
    assert_eq!(find_ids(&db, "d20", doc! {}).await?, [1]);
    let e = run_command_err(&client, DB, doc! { "create": "d21", "viewOn": "d20" }).await?;
    assert_command_error(&e, 165, "ViewDepthLimitExceeded");
    assert_eq!(e.message, "View depth limit exceeded; maximum depth is 20");
    Ok(())
}

#[tokio::test]
async fn drop_and_drop_database_remove_views() -> TestResult {
    let (_server, client) = start().await?;
    let db = client.database(DB);
    seed(&db).await?;
    let reply = run_command(&client, DB, doc! { "drop": "v2" }).await?;
    assert_eq!(reply, doc! { "ns": "views.v2", "ok": 1.0 });
    assert!(find_ids(&db, "v2", doc! {}).await?.is_empty());
    // The name is free for a collection now.
    db.collection::<Document>("v2")
        .insert_one(doc! { "_id": 1 })
        .await?;
    assert_eq!(find_ids(&db, "v2", doc! {}).await?, [1]);
    db.drop().await?;
    assert!(db.list_collection_names().await?.is_empty());
    // A view of the same name can be made again, over anything.
    db.run_command(doc! { "create": "v1", "viewOn": "elsewhere" })
        .await?;
    assert_eq!(db.list_collection_names().await?, ["v1"]);
    Ok(())
}

#[tokio::test]
async fn views_survive_a_restart() -> TestResult {
    let dir = tempfile::tempdir()?;
    {
        let mut server = TestServer::start_durable(dir.path(), |_| {}).await?;
        let client = server.client().await?;
        seed(&client.database(DB)).await?;
        client
            .database(DB)
            .run_command(doc! { "collMod": "v1", "pipeline": [{ "$match": { "g": 2 } }] })
            .await?;
        client.shutdown().await;
        server.trigger_shutdown();
        server.join().await.transpose()?;
    }
    let server = TestServer::start_durable(dir.path(), |_| {}).await?;
    let client = server.client().await?;
    let db = client.database(DB);
    assert_eq!(find_ids(&db, "v1", doc! {}).await?, [2, 5, 8]);
    assert_eq!(find_ids(&db, "v2", doc! {}).await?, [2, 5, 8]);
    let e = run_command_err(&client, DB, doc! { "create": "v1", "viewOn": "v2" }).await?;
    assert_command_error(&e, 48, "NamespaceExists");
    Ok(())
}

#[tokio::test]
async fn a_view_over_a_ttl_collection_never_shows_an_expired_document() -> TestResult {
    let server = TestServer::start_with_test_clock().await?;
    let client = server.client().await?;
    let db = client.database(DB);
    let t0 = advance_clock(&client, 0).await?.timestamp_millis();
    let events = db.collection::<Document>("events");
    events
        .insert_many([
            doc! { "_id": 1, "at": DateTime::from_millis(t0), "k": "a" },
            doc! { "_id": 2, "at": DateTime::from_millis(t0 + 3_600_000), "k": "b" },
        ])
        .await?;
    run_command(
        &client,
        DB,
        doc! { "createIndexes": "events", "indexes": [{ "key": { "at": 1 }, "name": "at_1",
        "expireAfterSeconds": 60 }] },
    )
    .await?;
    db.run_command(
        doc! { "create": "recent", "viewOn": "events", "pipeline": [{ "$project": { "k": 1 } }] },
    )
    .await?;
    db.run_command(doc! { "create": "recent2", "viewOn": "recent" })
        .await?;
    assert_eq!(find_ids(&db, "recent2", doc! {}).await?, [1, 2]);
    // One millisecond past document 1's instant: every read through the views misses it at
    // once, whether or not the purge has run.
    advance_clock(&client, 60_001).await?;
    assert_eq!(find_ids(&db, "recent", doc! {}).await?, [2]);
    assert_eq!(find_ids(&db, "recent2", doc! {}).await?, [2]);
    assert_eq!(
        db.collection::<Document>("recent2")
            .count_documents(doc! {})
            .await?,
        1
    );
    let values = db
        .collection::<Document>("recent")
        .distinct("k", doc! {})
        .await?;
    assert_eq!(values, [Bson::String("b".into())]);
    let docs = drain(
        db.collection::<Document>("recent2")
            .aggregate([doc! { "$match": {} }])
            .await?,
    )
    .await?;
    assert_eq!(ids(&docs), [2]);
    Ok(())
}

#[tokio::test]
async fn a_view_reads_under_its_collation() -> TestResult {
    let (_server, client) = start().await?;
    let db = client.database(DB);
    db.collection::<Document>("names")
        .insert_many([
            doc! { "_id": 1, "n": "a" },
            doc! { "_id": 2, "n": "A" },
            doc! { "_id": 3, "n": "b" },
        ])
        .await?;
    let en2 = doc! { "locale": "en", "strength": 2 };
    db.run_command(doc! { "create": "ci", "viewOn": "names", "collation": en2.clone() })
        .await?;
    assert_eq!(find_ids(&db, "ci", doc! { "n": "a" }).await?, [1, 2]);
    assert_eq!(
        db.collection::<Document>("ci")
            .count_documents(doc! { "n": "A" })
            .await?,
        2
    );
    let values = db
        .collection::<Document>("ci")
        .distinct("n", doc! {})
        .await?;
    assert_eq!(values.len(), 2, "{values:?}");
    // The same collation may be named; another may not.
    let reply = run_command(
        &client,
        DB,
        doc! { "find": "ci", "filter": { "n": "b" }, "collation": en2.clone() },
    )
    .await?;
    assert_eq!(
        reply.get_document("cursor")?.get_array("firstBatch")?.len(),
        1
    );
    let e = run_command_err(
        &client,
        DB,
        doc! { "aggregate": "ci", "pipeline": [], "cursor": {}, "collation": { "locale": "fr" } },
    )
    .await?;
    assert_command_error(&e, 167, "OptionNotSupportedOnView");
    assert_eq!(e.message, "Cannot override a view's default collation");
    // listCollections shows the whole collation, as mongod fills it in.
    let reply = run_command(
        &client,
        DB,
        doc! { "listCollections": 1, "filter": { "name": "ci" } },
    )
    .await?;
    let options = reply.get_document("cursor")?.get_array("firstBatch")?[0]
        .as_document()
        .ok_or("an entry is a document")?
        .get_document("options")?
        .clone();
    let collation = options.get_document("collation")?;
    assert_eq!(collation.get_str("locale")?, "en");
    assert_eq!(integer(collation.get("strength")), Some(2));
    assert!(collation.contains_key("caseLevel"), "{collation}");
    // Views next to each other share a collation.
    let e = run_command_err(&client, DB, doc! { "create": "ci2", "viewOn": "ci" }).await?;
    assert_command_error(&e, 167, "OptionNotSupportedOnView");
    assert_eq!(
        e.message,
        "View views.ci2 has a collation that does not match the collation of view views.ci"
    );
    db.run_command(doc! { "create": "ci3", "viewOn": "ci", "collation": en2.clone() })
        .await?;
    assert_eq!(find_ids(&db, "ci3", doc! { "n": "A" }).await?, [1, 2]);
    // Collections take no collation yet.
    let e = run_command_err(&client, DB, doc! { "create": "c", "collation": en2 }).await?;
    assert_command_error(&e, 238, "NotImplemented");
    Ok(())
}
