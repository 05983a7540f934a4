//! Plans that read an index without reading every document: counts from keys alone
//! (`COUNT_SCAN`), `distinct` one document per value (`DISTINCT_SCAN`), through the `mongodb`
//! crate.
//!
//! Each answer is compared with the same command hinted `{$natural: 1}` (a collection scan,
//! which reads every document): an index-only plan may change how much is read, never the
//! answer. Explain then shows which plan ran and that it read no document (counts).

mod common;

use bson::{Bson, DateTime, Document, doc};
use common::{TestResult, TestServer};
use mongodb::Database;

/// An integer in a reply, int32 or int64.
fn num(d: &Document, key: &str) -> TestResult<i64> {
    match d.get(key) {
        Some(Bson::Int32(n)) => Ok(i64::from(*n)),
        Some(Bson::Int64(n)) => Ok(*n),
        other => Err(format!("{key} is not an integer: {other:?}").into()),
    }
}

fn natural() -> Document {
    doc! { "$natural": 1 }
}

/// 400 documents whose `a` takes values of many types (never an array, so no index on it is
/// multikey): ints, equal doubles and longs, strings, `null`, missing, documents, booleans,
/// dates. `b` is `i % 7`, `s` a string, `d.x` a nested field.
async fn load(db: &Database) -> TestResult {
    let coll = db.collection::<Document>("c");
    let mut docs = Vec::new();
    for i in 0..400_i32 {
        let mut d = doc! {
            "_id": i,
            "a": i % 23,
            "b": i % 7,
            "s": format!("k{:03}", i % 50),
            "d": { "x": i % 4 },
        };
        match i % 11 {
            0 => {
                d.remove("a");
            }
            1 => {
                d.insert("a", Bson::Null);
            }
            2 => {
                d.insert("a", f64::from(i % 23));
            }
            3 => {
                d.insert("a", i64::from(i % 23));
            }
            4 => {
                d.insert("a", format!("str{}", i % 5));
            }
            5 => {
                d.insert("a", doc! { "y": i % 3 });
            }
            6 => {
                d.insert("a", i % 2 == 0);
            }
            7 => {
                d.insert("a", DateTime::from_millis(i64::from(i % 9) * 1000));
            }
            8 => {
                d.remove("d");
            }
            _ => {}
        }
        docs.push(d);
    }
    coll.insert_many(docs).await?;
    db.run_command(doc! {
        "createIndexes": "c",
        "indexes": [
            { "key": { "a": 1 }, "name": "a_1" },
            { "key": { "b": 1, "a": -1 }, "name": "b_1_a_-1" },
            { "key": { "s": -1 }, "name": "s_-1" },
            { "key": { "d.x": 1 }, "name": "d.x_1" },
        ],
    })
    .await?;
    Ok(())
}

fn count_queries() -> Vec<Document> {
    vec![
        doc! { "a": 5 },
        doc! { "a": 5.0 },
        doc! { "a": { "$gt": 10 } },
        doc! { "a": { "$gte": 3, "$lt": 8 } },
        doc! { "a": { "$lte": 2.5 } },
        doc! { "a": { "$in": [1, 3, "str2", 101] } },
        doc! { "a": null },
        doc! { "a": { "$exists": false } },
        doc! { "a": { "$exists": true } },
        doc! { "a": { "y": 1 } },
        doc! { "a": { "$gt": "str1" } },
        doc! { "a": true },
        doc! { "a": { "$gte": DateTime::from_millis(3000) } },
        doc! { "a": { "$ne": 4 } },
        doc! { "a": { "$type": "string" } },
        doc! { "b": 2 },
        doc! { "b": 2, "a": { "$lt": 9 } },
        doc! { "b": { "$in": [1, 4] }, "a": 7 },
        doc! { "b": { "$gt": 2 } },
        doc! { "b": { "$gt": 2 }, "a": { "$gt": 20 } },
        doc! { "s": { "$regex": "^k01" } },
        doc! { "s": { "$lt": "k010" } },
        doc! { "s": "k007", "b": 2 },
        doc! { "d.x": 2 },
        doc! { "d.x": { "$lt": 2 } },
        doc! { "d": { "x": 2 } },
        doc! { "_id": { "$gte": 250 } },
        doc! { "_id": { "$in": [3, 77, 1000] } },
        // Clauses no bound expresses: the documents must be read.
        doc! { "a": 5, "$or": [{ "b": 1 }, { "b": 2 }] },
        doc! { "b": 3, "$expr": { "$gt": ["$a", 10] } },
        doc! { "a": { "$gt": 3 }, "$nor": [{ "b": 4 }] },
    ]
}

/// Counts, with skip and limit, by `count` and by the driver's `countDocuments`, equal those of
/// a collection scan; those the keys decide read no document.
#[tokio::test]
async fn counts_from_keys_equal_counts_from_documents() -> TestResult {
    let server = TestServer::start().await?;
    let client = server.client().await?;
    let db = client.database("index_only_count");
    load(&db).await?;
    let coll = db.collection::<Document>("c");
    for q in count_queries() {
        for (skip, limit) in [(0, 0), (3, 0), (0, 5), (2, 4)] {
            let mut cmd = doc! { "count": "c", "query": q.clone() };
            if skip > 0 {
                cmd.insert("skip", skip);
            }
            if limit > 0 {
                cmd.insert("limit", limit);
            }
            let got = num(&db.run_command(cmd.clone()).await?, "n")?;
            let mut hinted = cmd.clone();
            hinted.insert("hint", natural());
            let want = num(&db.run_command(hinted).await?, "n")?;
            assert_eq!(got, want, "count {cmd}");
        }
        let got = coll.count_documents(q.clone()).await?;
        let want = coll
            .count_documents(q.clone())
            .hint(mongodb::options::Hint::Keys(natural()))
            .await?;
        assert_eq!(got, want, "countDocuments {q}");
    }

    let explain = |query: Document| {
        let db = db.clone();
        async move {
            db.run_command(doc! {
                "explain": { "count": "c", "query": query },
                "verbosity": "executionStats",
            })
            .await
        }
    };
    // One range of keys: `COUNT_SCAN`.
    let e = explain(doc! { "b": 2, "a": { "$lt": 9 } }).await?;
    let stats = e.get_document("executionStats")?;
    assert_eq!(num(stats, "totalDocsExamined")?, 0);
    let count = stats.get_document("executionStages")?;
    assert_eq!(count.get_str("stage")?, "COUNT");
    assert_eq!(num(count, "nReturned")?, 0);
    let scan = count.get_document("inputStage")?;
    assert_eq!(scan.get_str("stage")?, "COUNT_SCAN");
    assert_eq!(scan.get_str("indexName")?, "b_1_a_-1");
    assert_eq!(num(count, "nCounted")?, num(scan, "nReturned")?);
    assert_eq!(
        scan.get_document("indexBounds")?,
        &doc! {
            "startKey": { "b": 2, "a": 9 },
            "startKeyInclusive": false,
            "endKey": { "b": 2, "a": f64::NEG_INFINITY },
            "endKeyInclusive": true,
        }
    );
    let n = num(
        &db.run_command(doc! { "count": "c", "query": { "b": 2, "a": { "$lt": 9 } } })
            .await?,
        "n",
    )?;
    assert_eq!(num(count, "nCounted")?, n);
    assert!(n > 0);

    // A predicate outside the bounds: the documents are fetched and filtered.
    for q in [
        doc! { "a": 5, "$or": [{ "b": 1 }, { "b": 2 }] },
        doc! { "s": { "$regex": "^k01" } },
        doc! { "a": null },
    ] {
        let e = explain(q.clone()).await?;
        let stats = e.get_document("executionStats")?;
        assert!(num(stats, "totalDocsExamined")? > 0, "{q}");
        let fetch = stats
            .get_document("executionStages")?
            .get_document("inputStage")?;
        assert_eq!(fetch.get_str("stage")?, "FETCH", "{q}");
        assert!(fetch.get_document("filter").is_ok(), "{q}");
    }
    Ok(())
}

/// Where documents may expire, a key does not tell whether its document has: counts read
/// documents, and leave expired ones out. Once no TTL index remains, nothing expired comes
/// back and the keys answer again.
#[tokio::test]
async fn counts_skip_expired_documents_that_keys_still_hold() -> TestResult {
    let server = TestServer::start_with_test_clock().await?;
    let client = server.client().await?;
    let admin = client.database("admin");
    admin
        .run_command(doc! { "ebbAdvanceClock": 0, "freeze": true })
        .await?;
    let db = client.database("index_only_ttl");
    db.run_command(doc! {
        "createIndexes": "c",
        "indexes": [
            { "key": { "_ts": 1 }, "name": "_ts_1", "expireAfterSeconds": 10 },
            { "key": { "a": 1 }, "name": "a_1" },
        ],
    })
    .await?;
    let coll = db.collection::<Document>("c");
    coll.insert_many((0..60).map(|i| doc! { "_id": i, "a": i % 6 }))
        .await?;
    admin
        .run_command(doc! { "ebbAdvanceClock": 6000, "freeze": true })
        .await?;
    coll.insert_many((60..100).map(|i| doc! { "_id": i, "a": i % 6 }))
        .await?;
    admin
        .run_command(doc! { "ebbAdvanceClock": 5000, "freeze": true })
        .await?;
    let q = doc! { "a": { "$gte": 2, "$lte": 3 } };
    // 40 documents live (ids 60..100), 2 values of 6.
    let want = 40 / 6 * 2
        + [96, 97, 98, 99]
            .iter()
            .filter(|i| (2..=3).contains(&(*i % 6)))
            .count();
    let n = num(
        &db.run_command(doc! { "count": "c", "query": q.clone() })
            .await?,
        "n",
    )?;
    assert_eq!(n, i64::try_from(want)?);
    assert_eq!(coll.count_documents(q.clone()).await?, u64::try_from(want)?);
    let e = db
        .run_command(doc! {
            "explain": { "count": "c", "query": q.clone() },
            "verbosity": "executionStats",
        })
        .await?;
    assert!(num(e.get_document("executionStats")?, "totalDocsExamined")? > 0);

    db.run_command(doc! { "dropIndexes": "c", "index": "_ts_1" })
        .await?;
    let n = num(
        &db.run_command(doc! { "count": "c", "query": q.clone() })
            .await?,
        "n",
    )?;
    assert_eq!(n, i64::try_from(want)?);
    let e = db
        .run_command(doc! {
            "explain": { "count": "c", "query": q },
            "verbosity": "executionStats",
        })
        .await?;
    assert_eq!(
        num(e.get_document("executionStats")?, "totalDocsExamined")?,
        0
    );
    Ok(())
}

/// A multikey index holds several keys per document: counts through it read documents.
#[tokio::test]
async fn multikey_counts_read_documents() -> TestResult {
    let server = TestServer::start().await?;
    let client = server.client().await?;
    let db = client.database("index_only_multikey");
    let coll = db.collection::<Document>("c");
    coll.insert_many((0..50).map(|i| doc! { "_id": i, "t": [i % 5, i % 3 + 10] }))
        .await?;
    coll.create_index(mongodb::IndexModel::builder().keys(doc! { "t": 1 }).build())
        .await?;
    for q in [doc! { "t": 2 }, doc! { "t": { "$gte": 2, "$lte": 11 } }] {
        let got = coll.count_documents(q.clone()).await?;
        let want = coll
            .count_documents(q.clone())
            .hint(mongodb::options::Hint::Keys(natural()))
            .await?;
        assert_eq!(got, want, "{q}");
        let e = db
            .run_command(doc! {
                "explain": { "count": "c", "query": q.clone() },
                "verbosity": "executionStats",
            })
            .await?;
        assert!(
            num(e.get_document("executionStats")?, "totalDocsExamined")? > 0,
            "{q}"
        );
    }
    Ok(())
}

async fn distinct(db: &Database, key: &str, query: &Document, hint: bool) -> TestResult<Vec<Bson>> {
    let mut cmd = doc! { "distinct": "c", "key": key, "query": query.clone() };
    if hint {
        cmd.insert("hint", natural());
    }
    Ok(db.run_command(cmd).await?.get_array("values")?.clone())
}

/// `distinct` on an indexed field answers what a collection scan answers, value for value and
/// type for type (of values that compare equal, the first document's), reading one document
/// per value.
#[tokio::test]
async fn distinct_scans_equal_collection_scans() -> TestResult {
    let server = TestServer::start().await?;
    let client = server.client().await?;
    let db = client.database("index_only_distinct");
    load(&db).await?;
    let queries = [
        doc! {},
        doc! { "b": 3 },
        doc! { "a": { "$gt": 10 } },
        doc! { "a": { "$type": "number" } },
        doc! { "b": { "$in": [1, 5] }, "s": { "$gt": "k020" } },
        doc! { "$or": [{ "b": 1 }, { "d.x": 3 }] },
        doc! { "_id": { "$lt": 0 } },
    ];
    for key in ["a", "b", "s", "d.x", "d"] {
        for q in &queries {
            let got = distinct(&db, key, q, false).await?;
            let want = distinct(&db, key, q, true).await?;
            assert_eq!(got, want, "distinct {key} {q}");
        }
    }
    // Values of several types that compare equal: one, that of the first document (`_id` 2
    // holds 2.0, 25 holds 2L, 140 holds 2).
    for (after, want) in [
        (-1, Bson::Double(2.0)),
        (2, Bson::Int64(2)),
        (25, Bson::Int32(2)),
    ] {
        let got = distinct(&db, "a", &doc! { "a": 2, "_id": { "$gt": after } }, false).await?;
        assert_eq!(got, vec![want]);
    }

    let e = db
        .run_command(doc! {
            "explain": { "distinct": "c", "key": "b", "query": { "s": { "$gte": "k040" } } },
            "verbosity": "executionStats",
        })
        .await?;
    let fetch = e
        .get_document("queryPlanner")?
        .get_document("winningPlan")?;
    assert_eq!(fetch.get_str("stage")?, "FETCH");
    let scan = fetch.get_document("inputStage")?;
    assert_eq!(scan.get_str("stage")?, "DISTINCT_SCAN");
    assert_eq!(scan.get_str("indexName")?, "b_1_a_-1");
    // Seven values of `b`, each needing documents until one matches: far fewer than 400.
    let stats = e.get_document("executionStats")?;
    assert_eq!(num(stats, "nReturned")?, 7);
    assert!(num(stats, "totalDocsExamined")? < 400);

    // Bounds that decide the query: the values come from the entries, no document is read.
    let e = db
        .run_command(doc! {
            "explain": { "distinct": "c", "key": "a", "query": { "a": { "$gte": 3 } } },
            "verbosity": "executionStats",
        })
        .await?;
    let top = e
        .get_document("queryPlanner")?
        .get_document("winningPlan")?;
    assert_eq!(top.get_str("stage")?, "PROJECTION_COVERED");
    assert_eq!(
        top.get_document("inputStage")?.get_str("stage")?,
        "DISTINCT_SCAN"
    );
    let stats = e.get_document("executionStats")?;
    assert_eq!(num(stats, "totalDocsExamined")?, 0);
    assert_eq!(num(stats, "nReturned")?, 20);

    // A multikey index is not used for it (its keys are elements): the answer still holds.
    let coll = db.collection::<Document>("c");
    coll.insert_one(doc! { "_id": 1000, "b": [1, 70], "a": 1 })
        .await?;
    let got = distinct(&db, "b", &doc! {}, false).await?;
    assert_eq!(got, distinct(&db, "b", &doc! {}, true).await?);
    assert!(got.contains(&Bson::Int32(70)));
    Ok(())
}

/// A query that is an `$or` whose every branch an index bounds reads the union of those
/// scans (each document once), in any order the command's sort then fixes, and answers what a
/// collection scan answers.
#[tokio::test]
async fn or_reads_the_union_of_index_scans() -> TestResult {
    let server = TestServer::start().await?;
    let client = server.client().await?;
    let db = client.database("index_only_or");
    load(&db).await?;
    let coll = db.collection::<Document>("c");
    let q = doc! { "$or": [{ "b": 2, "a": { "$lt": 5 } }, { "s": "k003" }, { "a": { "$gte": 3, "$lte": 4 } }] };
    let e = db
        .run_command(doc! {
            "explain": { "find": "c", "filter": q.clone() },
            "verbosity": "executionStats",
        })
        .await?;
    let plan = e
        .get_document("queryPlanner")?
        .get_document("winningPlan")?;
    assert_eq!(plan.get_str("stage")?, "SUBPLAN");
    let fetch = plan.get_document("inputStage")?;
    assert_eq!(fetch.get_str("stage")?, "FETCH");
    let or = fetch.get_document("inputStage")?;
    assert_eq!(or.get_str("stage")?, "OR");
    let names: Vec<&str> = or
        .get_array("inputStages")?
        .iter()
        .filter_map(|s| s.as_document()?.get_str("indexName").ok())
        .collect();
    assert_eq!(names, ["b_1_a_-1", "s_-1", "a_1"]);
    let stats = e.get_document("executionStats")?;
    let returned = num(stats, "nReturned")?;
    assert!(returned > 0);
    assert!(num(stats, "totalDocsExamined")? < 200);

    let mut got: Vec<Document> = Vec::new();
    let mut cursor = coll.find(q.clone()).batch_size(7).await?;
    while cursor.advance().await? {
        got.push(cursor.deserialize_current()?);
    }
    assert_eq!(i64::try_from(got.len())?, returned);
    let mut ids: Vec<i32> = got
        .iter()
        .map(|d| d.get_i32("_id"))
        .collect::<Result<_, _>>()?;
    ids.sort_unstable();
    let before = ids.len();
    ids.dedup();
    assert_eq!(ids.len(), before, "a document returned twice");
    let mut want: Vec<i32> = Vec::new();
    let mut cursor = coll
        .find(q.clone())
        .hint(mongodb::options::Hint::Keys(natural()))
        .await?;
    while cursor.advance().await? {
        want.push(cursor.deserialize_current()?.get_i32("_id")?);
    }
    want.sort_unstable();
    assert_eq!(ids, want);

    // Sorted, skipped and limited: a blocking sort over the union.
    let sorted: Vec<i32> = {
        let mut out = Vec::new();
        let mut cursor = coll
            .find(q.clone())
            .sort(doc! { "_id": -1 })
            .skip(2)
            .limit(5)
            .await?;
        while cursor.advance().await? {
            out.push(cursor.deserialize_current()?.get_i32("_id")?);
        }
        out
    };
    let expect: Vec<i32> = want.iter().rev().skip(2).take(5).copied().collect();
    assert_eq!(sorted, expect);
    assert_eq!(
        coll.count_documents(q.clone()).await?,
        u64::try_from(want.len())?
    );

    // Updates and deletes find their documents the same way.
    let updated = coll
        .update_many(q.clone(), doc! { "$set": { "hit": true } })
        .await?;
    assert_eq!(updated.matched_count, u64::try_from(want.len())?);
    assert_eq!(
        coll.count_documents(doc! { "hit": true }).await?,
        u64::try_from(want.len())?
    );
    let deleted = coll.delete_many(q).await?;
    assert_eq!(deleted.deleted_count, u64::try_from(want.len())?);
    Ok(())
}

/// The fields of a document sorted by name, for comparing projections whose field order
/// differs (a covered projection's follows the key pattern, a fetched one's the document).
fn by_name(d: &Document) -> Vec<(String, Bson)> {
    let mut v: Vec<(String, Bson)> = d.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    v.sort_by(|a, b| a.0.cmp(&b.0));
    v
}

async fn find_all(
    db: &Database,
    filter: &Document,
    projection: &Document,
    hint: Option<Document>,
) -> TestResult<(Vec<Vec<(String, Bson)>>, Document)> {
    let mut cmd = doc! { "find": "c", "filter": filter.clone(), "projection": projection.clone(), "batchSize": 5 };
    if let Some(h) = hint {
        cmd.insert("hint", h);
    }
    let mut cursor = db.run_cursor_command(cmd.clone()).await?;
    let mut out = Vec::new();
    while cursor.advance().await? {
        out.push(by_name(&cursor.deserialize_current()?));
    }
    out.sort_by_key(|d| format!("{d:?}"));
    let explain = db
        .run_command(doc! { "explain": cmd, "verbosity": "executionStats" })
        .await?;
    Ok((out, explain))
}

fn stages(mut stage: &Document) -> Vec<String> {
    let mut out = Vec::new();
    loop {
        out.push(stage.get_str("stage").unwrap_or("?").to_owned());
        match stage.get_document("inputStage") {
            Ok(s) => stage = s,
            Err(_) => return out,
        }
    }
}

/// A projection of fields the index holds is made from its entries, with each value's own
/// type (`1`, `1L`, `1.0`), `null` apart from a missing field, and reads no document; it
/// answers what reading the documents answers.
#[tokio::test]
async fn covered_projections_equal_fetched_ones() -> TestResult {
    let server = TestServer::start().await?;
    let client = server.client().await?;
    let db = client.database("index_only_covered");
    load(&db).await?;
    let cases = [
        (
            doc! { "a": { "$gte": 2, "$lte": 4 } },
            doc! { "a": 1, "_id": 0 },
        ),
        (doc! { "a": { "$gt": "" } }, doc! { "_id": 0, "a": true }),
        (doc! { "a": { "$lt": 3 } }, doc! { "a": 1.0, "_id": false }),
        (doc! { "b": 2 }, doc! { "a": 1, "b": 1, "_id": 0 }),
        (
            doc! { "b": { "$in": [1, 3] }, "a": { "$gte": 5 } },
            doc! { "b": 1, "_id": 0 },
        ),
        (doc! { "b": { "$gt": 4 } }, doc! { "a": 1, "_id": 0 }),
        (doc! { "s": { "$lte": "k005" } }, doc! { "s": 1, "_id": 0 }),
    ];
    for (filter, projection) in &cases {
        let (got, e) = find_all(&db, filter, projection, None).await?;
        let (want, _) = find_all(&db, filter, projection, Some(natural())).await?;
        assert!(!got.is_empty(), "{filter}");
        assert_eq!(got, want, "{filter} {projection}");
        let plan = e
            .get_document("queryPlanner")?
            .get_document("winningPlan")?;
        assert_eq!(
            stages(plan),
            ["PROJECTION_COVERED", "IXSCAN"],
            "{filter} {projection}"
        );
        assert_eq!(
            num(e.get_document("executionStats")?, "totalDocsExamined")?,
            0
        );
    }
    // Field order follows the key pattern; types are kept.
    let coll = db.collection::<Document>("c");
    let got = coll
        .find_one(doc! { "b": 3, "a": { "$gte": 0 } })
        .projection(doc! { "a": 1, "b": 1, "_id": 0 })
        .await?;
    let keys: Vec<&str> = got
        .as_ref()
        .map(|d| d.keys().map(String::as_str).collect())
        .unwrap_or_default();
    assert_eq!(keys, ["b", "a"]);
    let types: Vec<Bson> = {
        let (docs, _) = find_all(&db, &doc! { "a": 2 }, &doc! { "a": 1, "_id": 0 }, None).await?;
        docs.into_iter()
            .filter_map(|d| d.into_iter().next().map(|(_, v)| v))
            .collect()
    };
    assert!(types.contains(&Bson::Int32(2)));
    assert!(types.contains(&Bson::Int64(2)));
    assert!(types.contains(&Bson::Double(2.0)));

    // A value changing type but not key (`2` to `2.0`) is shown with its new type.
    coll.update_one(doc! { "_id": 140 }, doc! { "$set": { "a": 2.0, "b": 0 } })
        .await?;
    let got = coll
        .find_one(doc! { "b": 0, "a": 2.0 })
        .projection(doc! { "a": 1, "_id": 0 })
        .await?;
    assert_eq!(got, Some(doc! { "a": 2.0 }));

    // What a covered projection cannot show reads the documents: `_id` not in the index, a
    // dotted field, a field the index lacks, a filter the bounds do not decide.
    for (filter, projection) in [
        (doc! { "a": 3 }, doc! { "a": 1 }),
        (doc! { "d.x": 1 }, doc! { "d.x": 1, "_id": 0 }),
        (doc! { "a": 3 }, doc! { "a": 1, "s": 1, "_id": 0 }),
        (
            doc! { "a": 3, "$or": [{ "b": 1 }, { "b": 2 }] },
            doc! { "a": 1, "_id": 0 },
        ),
        (doc! { "a": null }, doc! { "a": 1, "_id": 0 }),
    ] {
        let (got, e) = find_all(&db, &filter, &projection, None).await?;
        let (want, _) = find_all(&db, &filter, &projection, Some(natural())).await?;
        assert_eq!(got, want, "{filter} {projection}");
        let plan = e
            .get_document("queryPlanner")?
            .get_document("winningPlan")?;
        assert!(
            !stages(plan).contains(&"PROJECTION_COVERED".to_owned()),
            "{filter} {projection}"
        );
    }
    Ok(())
}
