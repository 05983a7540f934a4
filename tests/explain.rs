//! `explain` as mongod 7.0 shapes it, through the `mongodb` crate: `queryHash` and
//! `planCacheKey`, the `_id` fast path (`IDHACK`), `EOF` on a missing collection, pipelines
//! pushed into the query layer, `$match` shown parsed; and `serverStatus.storageEngine`.

mod common;

use bson::{Bson, Document, doc};
use common::{TestResult, TestServer};
use mongodb::Database;

async fn explain(db: &Database, cmd: Document, verbosity: &str) -> TestResult<Document> {
    Ok(db
        .run_command(doc! { "explain": cmd, "verbosity": verbosity })
        .await?)
}

fn stage_names(mut stage: &Document) -> Vec<String> {
    let mut out = vec![stage.get_str("stage").unwrap_or("?").to_owned()];
    while let Ok(inner) = stage.get_document("inputStage") {
        out.push(inner.get_str("stage").unwrap_or("?").to_owned());
        stage = inner;
    }
    out
}

fn winning(e: &Document) -> TestResult<&Document> {
    Ok(e.get_document("queryPlanner")?
        .get_document("winningPlan")?)
}

fn hashes(e: &Document) -> TestResult<(String, String)> {
    let qp = e.get_document("queryPlanner")?;
    Ok((
        qp.get_str("queryHash")?.to_owned(),
        qp.get_str("planCacheKey")?.to_owned(),
    ))
}

async fn filled(db: &Database) -> TestResult {
    let docs: Vec<Document> = (0..50_i32)
        .map(|i| doc! { "_id": i, "a": i % 7, "b": i % 3, "s": format!("k{i:02}") })
        .collect();
    db.collection::<Document>("c").insert_many(docs).await?;
    Ok(())
}

#[tokio::test]
async fn query_hashes_follow_the_shape() -> TestResult {
    let server = TestServer::start().await?;
    let client = server.client().await?;
    let db = client.database("explain_hashes");
    filled(&db).await?;
    let find = |filter: Document, sort: Option<Document>| {
        let mut cmd = doc! { "find": "c", "filter": filter };
        if let Some(s) = sort {
            cmd.insert("sort", s);
        }
        cmd
    };
    let (q1, k1) = hashes(
        &explain(
            &db,
            find(doc! { "a": 1, "b": { "$gt": 2 } }, None),
            "queryPlanner",
        )
        .await?,
    )?;
    for h in [&q1, &k1] {
        assert_eq!(h.len(), 8, "{h}");
        assert!(
            h.chars()
                .all(|c| c.is_ascii_digit() || ('A'..='F').contains(&c)),
            "{h}"
        );
    }
    // Other constants (and another order of the same predicates): the same shape.
    let (q2, k2) = hashes(
        &explain(
            &db,
            find(doc! { "b": { "$gt": "x" }, "a": 40 }, None),
            "queryPlanner",
        )
        .await?,
    )?;
    assert_eq!((&q1, &k1), (&q2, &k2));
    // Another operator, field or sort: another shape.
    for other in [
        find(doc! { "a": 1, "b": { "$lt": 2 } }, None),
        find(doc! { "a": 1, "c": { "$gt": 2 } }, None),
        find(doc! { "a": 1, "b": { "$gt": 2 } }, Some(doc! { "a": 1 })),
    ] {
        let (q, _) = hashes(&explain(&db, other.clone(), "queryPlanner").await?)?;
        assert_ne!(q, q1, "{other}");
    }
    // The same for count and aggregate, and for executing verbosities.
    let e = explain(
        &db,
        doc! { "count": "c", "query": { "a": 1 } },
        "executionStats",
    )
    .await?;
    hashes(&e)?;
    // An index changes the plan cache key, not the query's hash.
    db.collection::<Document>("c")
        .create_index(mongodb::IndexModel::builder().keys(doc! { "a": 1 }).build())
        .await?;
    let (q3, k3) = hashes(
        &explain(
            &db,
            find(doc! { "a": 1, "b": { "$gt": 2 } }, None),
            "queryPlanner",
        )
        .await?,
    )?;
    assert_eq!(q3, q1);
    assert_ne!(k3, k1);
    // No collection, no hashes.
    let e = explain(
        &db,
        doc! { "find": "missing", "filter": { "a": 1 } },
        "queryPlanner",
    )
    .await?;
    let qp = e.get_document("queryPlanner")?;
    assert!(qp.get("queryHash").is_none() && qp.get("planCacheKey").is_none());
    assert_eq!(qp.get_document("parsedQuery")?, &doc! { "a": { "$eq": 1 } });
    assert_eq!(stage_names(winning(&e)?), ["EOF"]);
    Ok(())
}

#[tokio::test]
async fn id_equality_is_the_id_fast_path() -> TestResult {
    let server = TestServer::start().await?;
    let client = server.client().await?;
    let db = client.database("explain_idhack");
    filled(&db).await?;

    // find: a projection sits over IDHACK; a sort or limit adds no stage.
    let e = explain(
        &db,
        doc! { "find": "c", "filter": { "_id": 7 }, "projection": { "a": 1 }, "sort": { "b": 1 }, "limit": 3 },
        "executionStats",
    )
    .await?;
    assert_eq!(stage_names(winning(&e)?), ["PROJECTION_SIMPLE", "IDHACK"]);
    let es = e.get_document("executionStats")?;
    assert_eq!(es.get_i32("nReturned")?, 1);
    let idhack = es
        .get_document("executionStages")?
        .get_document("inputStage")?;
    assert_eq!(idhack.get_i32("keysExamined")?, 1);
    assert_eq!(idhack.get_i32("docsExamined")?, 1);
    hashes(&e)?;
    // Other exact-bounds types take it too; a skip or hint does not.
    for filter in [
        doc! { "_id": 1.5 },
        doc! { "_id": "x" },
        doc! { "_id": { "k": 1 } },
    ] {
        let e = explain(
            &db,
            doc! { "find": "c", "filter": filter.clone() },
            "queryPlanner",
        )
        .await?;
        assert_eq!(stage_names(winning(&e)?), ["IDHACK"], "{filter}");
    }
    for cmd in [
        doc! { "find": "c", "filter": { "_id": 7 }, "skip": 1 },
        doc! { "find": "c", "filter": { "_id": 7 }, "hint": { "_id": 1 } },
        doc! { "find": "c", "filter": { "_id": { "$in": [7] } } },
        doc! { "find": "c", "filter": { "_id": null } },
    ] {
        let e = explain(&db, cmd.clone(), "queryPlanner").await?;
        assert!(
            !stage_names(winning(&e)?).contains(&"IDHACK".to_owned()),
            "{cmd}"
        );
    }

    // count: COUNT over IDHACK, with the parsed query and hashes.
    let e = explain(
        &db,
        doc! { "count": "c", "query": { "_id": 7 } },
        "executionStats",
    )
    .await?;
    assert_eq!(stage_names(winning(&e)?), ["COUNT", "IDHACK"]);
    assert_eq!(e.get_document("executionStats")?.get_i32("nReturned")?, 1);
    hashes(&e)?;

    // Writes by `_id`: no query parsing, so no parsedQuery and no hashes.
    for (cmd, top) in [
        (
            doc! { "update": "c", "updates": [{ "q": { "_id": 7 }, "u": { "$set": { "x": 1 } } }] },
            "UPDATE",
        ),
        (
            doc! { "delete": "c", "deletes": [{ "q": { "_id": 7 }, "limit": 1 }] },
            "DELETE",
        ),
        (
            doc! { "findAndModify": "c", "query": { "_id": 7 }, "remove": true },
            "DELETE",
        ),
    ] {
        let e = explain(&db, cmd.clone(), "executionStats").await?;
        assert_eq!(stage_names(winning(&e)?), [top, "IDHACK"], "{cmd}");
        let qp = e.get_document("queryPlanner")?;
        for absent in ["parsedQuery", "queryHash", "planCacheKey"] {
            assert!(qp.get(absent).is_none(), "{cmd}: {absent}");
        }
    }
    // A positional update needs the query parsed: no IDHACK shortcut past the parser.
    let e = explain(
        &db,
        doc! { "update": "c", "updates": [{ "q": { "_id": 7, "a": 0 }, "u": { "$set": { "x.$": 1 } } }] },
        "queryPlanner",
    )
    .await?;
    assert!(e.get_document("queryPlanner")?.get("parsedQuery").is_some());
    // Nothing was written.
    let doc = db
        .collection::<Document>("c")
        .find_one(doc! { "_id": 7 })
        .await?;
    assert_eq!(doc.and_then(|d| d.get("x").cloned()), None);
    Ok(())
}

#[tokio::test]
async fn missing_collections_plan_eof() -> TestResult {
    let server = TestServer::start().await?;
    let client = server.client().await?;
    let db = client.database("explain_eof");
    for cmd in [
        doc! { "update": "none", "updates": [{ "q": { "a": 1 }, "u": { "$set": { "x": 1 } } }] },
        doc! { "delete": "none", "deletes": [{ "q": { "a": 1 }, "limit": 0 }] },
        doc! { "findAndModify": "none", "query": { "a": 1 }, "remove": true },
        doc! { "findAndModify": "none", "query": { "_id": 1 }, "update": { "$set": { "x": 1 } } },
    ] {
        let e = explain(&db, cmd.clone(), "executionStats").await?;
        let qp = e.get_document("queryPlanner")?;
        assert_eq!(
            qp.get_document("winningPlan")?,
            &doc! { "stage": "EOF" },
            "{cmd}"
        );
        assert!(qp.get("parsedQuery").is_none(), "{cmd}");
        assert!(qp.get("queryHash").is_none(), "{cmd}");
    }
    let e = explain(
        &db,
        doc! { "count": "none", "query": { "a": 1 } },
        "queryPlanner",
    )
    .await?;
    assert_eq!(stage_names(winning(&e)?), ["COUNT", "EOF"]);
    for cmd in [
        doc! { "find": "none", "filter": { "a": 1 } },
        doc! { "distinct": "none", "key": "a", "query": { "a": 1 } },
        doc! { "aggregate": "none", "pipeline": [{ "$match": { "a": 1 } }], "cursor": {} },
    ] {
        let e = explain(&db, cmd.clone(), "queryPlanner").await?;
        assert_eq!(stage_names(winning(&e)?), ["EOF"], "{cmd}");
        assert_eq!(
            e.get_document("queryPlanner")?
                .get_document("parsedQuery")?,
            &doc! { "a": { "$eq": 1 } },
            "{cmd}"
        );
    }
    Ok(())
}

#[tokio::test]
async fn pipelines_run_in_the_query_layer() -> TestResult {
    let server = TestServer::start().await?;
    let client = server.client().await?;
    let db = client.database("explain_pushdown");
    filled(&db).await?;
    let agg =
        |pipeline: Vec<Document>| doc! { "aggregate": "c", "pipeline": pipeline, "cursor": {} };

    // [$match, $sort, $limit]: one find, SORT taking the limit; no `stages`.
    let e = explain(
        &db,
        agg(vec![
            doc! { "$match": { "b": 1 } },
            doc! { "$sort": { "a": -1, "_id": 1 } },
            doc! { "$limit": 4 },
        ]),
        "executionStats",
    )
    .await?;
    assert!(e.get("stages").is_none());
    let qp = e.get_document("queryPlanner")?;
    assert!(qp.get_bool("optimizedPipeline")?);
    assert_eq!(qp.get_document("parsedQuery")?, &doc! { "b": { "$eq": 1 } });
    hashes(&e)?;
    let wp = winning(&e)?;
    assert_eq!(stage_names(wp), ["SORT", "COLLSCAN"]);
    assert_eq!(wp.get_i64("limitAmount")?, 4);
    assert_eq!(e.get_document("executionStats")?.get_i32("nReturned")?, 4);

    // A $match after a leading $sort goes before it: both pushed.
    let e = explain(
        &db,
        agg(vec![
            doc! { "$sort": { "s": 1 } },
            doc! { "$match": { "b": 2 } },
        ]),
        "executionStats",
    )
    .await?;
    assert!(e.get("stages").is_none());
    let qp = e.get_document("queryPlanner")?;
    assert_eq!(qp.get_document("parsedQuery")?, &doc! { "b": { "$eq": 2 } });
    assert_eq!(stage_names(winning(&e)?), ["SORT", "COLLSCAN"]);
    assert_eq!(e.get_document("executionStats")?.get_i32("nReturned")?, 16);

    // $skip then $limit: one window of the scan (skip 2, then 3).
    let e = explain(
        &db,
        agg(vec![
            doc! { "$match": { "b": 1 } },
            doc! { "$skip": 2 },
            doc! { "$limit": 3 },
        ]),
        "executionStats",
    )
    .await?;
    assert_eq!(stage_names(winning(&e)?), ["LIMIT", "SKIP", "COLLSCAN"]);
    assert_eq!(e.get_document("executionStats")?.get_i32("nReturned")?, 3);

    // A final inclusion $project is the plan's projection.
    let e = explain(
        &db,
        agg(vec![
            doc! { "$match": { "a": 2 } },
            doc! { "$project": { "s": 1 } },
        ]),
        "queryPlanner",
    )
    .await?;
    assert_eq!(stage_names(winning(&e)?), ["PROJECTION_SIMPLE", "COLLSCAN"]);

    // An index gives the order: IXSCAN, no SORT.
    db.collection::<Document>("c")
        .create_index(mongodb::IndexModel::builder().keys(doc! { "a": 1 }).build())
        .await?;
    let e = explain(
        &db,
        agg(vec![doc! { "$sort": { "a": 1 } }, doc! { "$limit": 5 }]),
        "queryPlanner",
    )
    .await?;
    assert_eq!(stage_names(winning(&e)?), ["LIMIT", "FETCH", "IXSCAN"]);

    // What is not pushed follows `$cursor`, a `$match` as mongod parses it (given order).
    let e = explain(
        &db,
        agg(vec![
            doc! { "$match": { "b": { "$in": [2, 1, 2] } } },
            doc! { "$group": { "_id": "$a", "n": { "$sum": 1 }, "m": { "$max": "$b" } } },
            doc! { "$match": { "n": 2, "m": { "$ne": 1 } } },
        ]),
        "queryPlanner",
    )
    .await?;
    let stages = e.get_array("stages")?;
    let cursor = stages[0]
        .as_document()
        .ok_or("stage")?
        .get_document("$cursor")?
        .get_document("queryPlanner")?;
    assert_eq!(
        cursor.get_document("parsedQuery")?,
        &doc! { "b": { "$in": [1, 2] } }
    );
    assert!(cursor.get("optimizedPipeline").is_none());
    assert_eq!(
        stages[2].as_document().ok_or("stage")?,
        &doc! { "$match": { "$and": [{ "n": { "$eq": 2 } }, { "m": { "$not": { "$eq": 1 } } }] } }
    );

    // `$sort` takes the `$limit`s after it; counts are longs.
    let e = explain(
        &db,
        agg(vec![
            doc! { "$group": { "_id": "$a", "n": { "$sum": 1 } } },
            doc! { "$sort": { "n": -1.0, "_id": 1 } },
            doc! { "$limit": 5 },
            doc! { "$limit": 3 },
            doc! { "$skip": 1 },
        ]),
        "queryPlanner",
    )
    .await?;
    let stages = e.get_array("stages")?;
    assert_eq!(
        stages[2].as_document().ok_or("stage")?,
        &doc! { "$sort": { "sortKey": { "n": -1, "_id": 1 }, "limit": 3_i64 } }
    );
    assert_eq!(
        stages[3].as_document().ok_or("stage")?,
        &doc! { "$skip": 1_i64 }
    );
    assert_eq!(stages.len(), 4);

    // A $match after a $sort filters the sorted documents, in order.
    let mut cursor = db
        .collection::<Document>("c")
        .aggregate(vec![
            doc! { "$sort": { "s": -1 } },
            doc! { "$match": { "b": 2 } },
            doc! { "$limit": 2 },
        ])
        .await?;
    let mut ids = Vec::new();
    while cursor.advance().await? {
        ids.push(cursor.deserialize_current()?.get_i32("_id")?);
    }
    assert_eq!(ids, [47, 44]);

    // Results: the pushed window, in the pushed order.
    let mut cursor = db
        .collection::<Document>("c")
        .aggregate(vec![
            doc! { "$match": { "b": 1 } },
            doc! { "$sort": { "a": -1, "_id": 1 } },
            doc! { "$skip": 1 },
            doc! { "$limit": 3 },
            doc! { "$project": { "a": 1 } },
        ])
        .await?;
    let mut got = Vec::new();
    while cursor.advance().await? {
        got.push(cursor.deserialize_current()?);
    }
    // b == 1: _id 1, 4, 7, …, 49; a = _id % 7, highest a first, then _id.
    let mut want: Vec<(i32, i32)> = (0..50).filter(|i| i % 3 == 1).map(|i| (i % 7, i)).collect();
    want.sort_by(|x, y| y.0.cmp(&x.0).then(x.1.cmp(&y.1)));
    let want: Vec<Document> = want
        .into_iter()
        .skip(1)
        .take(3)
        .map(|(a, id)| doc! { "_id": id, "a": a })
        .collect();
    assert_eq!(got, want);
    Ok(())
}

#[tokio::test]
async fn server_status_reports_the_storage_engine() -> TestResult {
    for in_memory in [true, false] {
        let dir = tempfile::tempdir()?;
        let server = if in_memory {
            TestServer::start().await?
        } else {
            TestServer::start_durable(dir.path(), |_| {}).await?
        };
        let client = server.client().await?;
        let status = client
            .database("admin")
            .run_command(doc! { "serverStatus": 1 })
            .await?;
        let se = status.get_document("storageEngine")?;
        let keys: Vec<&str> = se.keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            [
                "name",
                "supportsCommittedReads",
                "oldestRequiredTimestampForCrashRecovery",
                "supportsPendingDrops",
                "dropPendingIdents",
                "supportsSnapshotReadConcern",
                "readOnly",
                "persistent",
                "backupCursorOpen",
            ]
        );
        assert_eq!(
            se.get_str("name")?,
            if in_memory { "inMemory" } else { "fjall" }
        );
        assert_eq!(se.get_bool("persistent")?, !in_memory);
        assert!(!se.get_bool("readOnly")?);
        assert_eq!(se.get("dropPendingIdents"), Some(&Bson::Int64(0)));
        assert!(matches!(
            se.get("oldestRequiredTimestampForCrashRecovery"),
            Some(Bson::Timestamp(_))
        ));
        server.stop().await?;
    }
    Ok(())
}
