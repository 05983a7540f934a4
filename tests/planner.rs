//! The query planner and `explain`, through the `mongodb` crate.
//!
//! Result tests compare each query with the same query hinted `{$natural: 1}` (a collection
//! scan): an index may change how documents are found, never which. Other tests check that
//! indexes are actually used (IXSCAN, keys examined, no SORT stage) and explain's shapes.

mod common;

use bson::{Bson, Document, doc};
use common::{TestResult, TestServer};
use mongodb::{Client, Collection, Database};

/// A count in a reply, int32 or int64 (mongod appends counts as int32 when they fit).
trait GetNum {
    fn get_num(&self, key: &str) -> TestResult<i64>;
}

impl GetNum for Document {
    fn get_num(&self, key: &str) -> TestResult<i64> {
        match self.get(key) {
            Some(Bson::Int32(n)) => Ok(i64::from(*n)),
            Some(Bson::Int64(n)) => Ok(*n),
            other => Err(format!("{key} is not an integer: {other:?}").into()),
        }
    }
}

/// What the tests need of a cursor (without a futures dependency).
trait CursorExt {
    async fn try_next(&mut self) -> mongodb::error::Result<Option<Document>>;
    async fn try_collect(self) -> mongodb::error::Result<Vec<Document>>;
}

impl CursorExt for mongodb::Cursor<Document> {
    async fn try_next(&mut self) -> mongodb::error::Result<Option<Document>> {
        if self.advance().await? {
            Ok(Some(self.deserialize_current()?))
        } else {
            Ok(None)
        }
    }

    async fn try_collect(mut self) -> mongodb::error::Result<Vec<Document>> {
        let mut out = Vec::new();
        while let Some(d) = self.try_next().await? {
            out.push(d);
        }
        Ok(out)
    }
}

async fn setup(client: &Client, db: &str) -> TestResult<(Database, Collection<Document>)> {
    let db = client.database(db);
    let coll = db.collection::<Document>("c");
    let mut docs = Vec::new();
    for i in 0..300_i32 {
        let mut d = doc! { "_id": i, "a": i % 17, "b": i % 5, "s": format!("k{:03}", i % 40) };
        match i % 13 {
            0 => {
                d.remove("a");
            }
            1 => {
                d.insert("a", Bson::Null);
            }
            2 => {
                d.insert("a", vec![Bson::Int32(i % 17), Bson::Int32(100 + i % 3)]);
            }
            3 => {
                d.insert("a", format!("str{}", i % 4));
            }
            4 => {
                d.insert("a", f64::from(i % 17) + 0.5);
            }
            5 => {
                d.insert("a", Bson::Array(Vec::new()));
            }
            6 => {
                d.insert("a", doc! { "x": i % 2 });
            }
            _ => {}
        }
        docs.push(d);
    }
    coll.insert_many(docs).await?;
    Ok((db, coll))
}

async fn create_indexes(db: &Database) -> TestResult {
    db.run_command(doc! {
        "createIndexes": "c",
        "indexes": [
            { "key": { "a": 1 }, "name": "a_1" },
            { "key": { "b": 1, "a": -1 }, "name": "b_1_a_-1" },
            { "key": { "s": 1 }, "name": "s_1" },
        ],
    })
    .await?;
    Ok(())
}

async fn find(
    db: &Database,
    filter: &Document,
    sort: Option<&Document>,
    hint: Option<Bson>,
    skip: i64,
    limit: i64,
    batch: i32,
) -> TestResult<Vec<Document>> {
    let mut cmd = doc! { "find": "c", "filter": filter.clone(), "batchSize": batch };
    if let Some(s) = sort {
        cmd.insert("sort", s.clone());
    }
    if let Some(h) = hint {
        cmd.insert("hint", h);
    }
    if skip > 0 {
        cmd.insert("skip", skip);
    }
    if limit > 0 {
        cmd.insert("limit", limit);
    }
    let mut cursor = db.run_cursor_command(cmd).await?;
    let mut out = Vec::new();
    while let Some(d) = cursor.try_next().await? {
        out.push(d);
    }
    Ok(out)
}

fn queries() -> Vec<Document> {
    vec![
        doc! {},
        doc! { "a": 5 },
        doc! { "a": 100 },
        doc! { "a": { "$gt": 10 } },
        doc! { "a": { "$gte": 3, "$lt": 8 } },
        doc! { "a": { "$lte": 2.5 } },
        doc! { "a": { "$in": [1, 3, "str2", 101] } },
        doc! { "a": null },
        doc! { "a": { "$exists": false } },
        doc! { "a": [] },
        doc! { "a": { "x": 1 } },
        doc! { "a": { "$gt": "str1" } },
        doc! { "a": { "$ne": 4 } },
        doc! { "a": { "$elemMatch": { "$gt": 100 } } },
        doc! { "b": 2 },
        doc! { "b": 2, "a": { "$lt": 9 } },
        doc! { "b": { "$in": [1, 4] }, "a": 7 },
        doc! { "b": { "$gt": 2 } },
        doc! { "s": { "$regex": "^k01" } },
        doc! { "s": { "$regex": "3$" } },
        doc! { "s": "k007", "b": 2 },
        doc! { "$or": [{ "a": 1 }, { "b": 3 }] },
        // Unions of index scans: overlapping branches, one beside other conjuncts, on `_id`,
        // multikey values, nested, and a branch no index serves (a collection scan).
        doc! { "$or": [{ "a": { "$gte": 5, "$lte": 9 } }, { "a": { "$gte": 7, "$lt": 12 } }, { "b": 3, "a": 7 }] },
        doc! { "s": { "$gt": "k010" }, "$or": [{ "a": 100 }, { "b": { "$in": [1, 2] } }] },
        doc! { "$or": [{ "_id": { "$lt": 20 } }, { "a": 101 }, { "a": null }] },
        doc! { "$or": [{ "a": 2 }, { "$or": [{ "b": 4 }, { "s": "k003" }] }] },
        doc! { "$or": [{ "a": 2 }, { "c": 1 }] },
        doc! { "$or": [{ "s": { "$regex": "^k00" } }, { "a": { "$type": "string" } }] },
        doc! { "$or": [{ "a": 3, "b": { "$ne": 3 } }, { "b": 0, "s": { "$in": ["k005", "k010"] } }] },
        doc! { "_id": { "$gte": 250 } },
        doc! { "_id": { "$in": [3, 77, 1000] }, "a": { "$exists": true } },
        // Arrays as values: equality with a whole array, `$in` holding one, `$all`, ranges
        // whose bound is an array or a document, and operators the bounds cannot express.
        doc! { "a": [2, 102] },
        doc! { "a": { "$eq": [15, 101] } },
        doc! { "a": { "$in": [[2, 102], 9] } },
        doc! { "a": { "$all": [2, 102] } },
        doc! { "a": { "$gte": [0] } },
        doc! { "a": { "$lt": { "x": 1 } } },
        doc! { "a": { "$gt": null } },
        doc! { "a": { "$gte": null } },
        doc! { "a": { "$in": [null, 4] } },
        doc! { "a": { "$not": { "$gt": 5 } } },
        doc! { "a": { "$type": "string" } },
        doc! { "a": { "$size": 2 } },
        doc! { "a.x": 1 },
        doc! { "a": { "$gt": 3, "$lt": 101 } },
        doc! { "a": { "$in": [] } },
        doc! { "a": { "$nin": [1, 2, 3] } },
        doc! { "a": { "$regex": "^str" } },
        doc! { "a": { "$gte": 4.5, "$lte": 4.5 } },
        doc! { "b": 2, "a": [15, 101] },
        doc! { "a": { "$exists": true, "$gt": 14 } },
        doc! { "s": { "$gt": "k038" }, "b": { "$lt": 3 } },
    ]
}

/// Every query, sorted or not, skipped, limited, in small batches, returns with indexes what
/// a collection scan returns (in the same order when sorted).
#[tokio::test]
async fn indexed_results_equal_collection_scans() -> TestResult {
    let server = TestServer::start().await?;
    let client = server.client().await?;
    let (db, _) = setup(&client, "planner_eq").await?;
    create_indexes(&db).await?;
    let natural = Bson::Document(doc! { "$natural": 1 });
    let sorts = [
        None,
        Some(doc! { "a": 1, "_id": 1 }),
        Some(doc! { "a": -1, "_id": -1 }),
        Some(doc! { "b": 1, "a": -1, "_id": 1 }),
        Some(doc! { "s": -1, "_id": 1 }),
        Some(doc! { "_id": -1 }),
    ];
    for q in queries() {
        for sort in &sorts {
            for (skip, limit, batch) in [(0, 0, 7), (3, 10, 4), (0, 5, 101)] {
                let got = find(&db, &q, sort.as_ref(), None, skip, limit, batch).await?;
                let want = find(
                    &db,
                    &q,
                    sort.as_ref(),
                    Some(natural.clone()),
                    skip,
                    limit,
                    batch,
                )
                .await?;
                if sort.is_some() {
                    assert_eq!(got, want, "{q} sorted {sort:?} skip {skip} limit {limit}");
                } else if skip == 0 && limit == 0 {
                    let ids = |v: &[Document]| {
                        let mut ids: Vec<i32> =
                            v.iter().map(|d| d.get_i32("_id").unwrap_or(-1)).collect();
                        ids.sort_unstable();
                        ids
                    };
                    assert_eq!(ids(&got), ids(&want), "{q}");
                } else {
                    assert_eq!(got.len(), want.len(), "{q} skip {skip} limit {limit}");
                }
            }
        }
        let coll = db.collection::<Document>("c");
        let n = coll.count_documents(q.clone()).await?;
        let n_nat = db
            .run_command(doc! { "count": "c", "query": q.clone(), "hint": { "$natural": 1 } })
            .await?;
        assert_eq!(
            i64::try_from(n)?,
            i64::from(n_nat.get_i32("n")?),
            "count {q}"
        );
        let mut d = coll.distinct("b", q.clone()).await?;
        let mut d_nat = db
            .run_command(
                doc! { "distinct": "c", "key": "b", "query": q.clone(), "hint": { "$natural": 1 } },
            )
            .await?
            .get_array("values")?
            .clone();
        d.sort_by_key(ToString::to_string);
        d_nat.sort_by_key(ToString::to_string);
        assert_eq!(d, d_nat, "distinct {q}");
        let pipe = vec![
            doc! { "$match": q.clone() },
            doc! { "$sort": { "a": 1, "_id": 1 } },
        ];
        let agg: Vec<Document> = coll.aggregate(pipe.clone()).await?.try_collect().await?;
        let agg_nat: Vec<Document> = coll
            .aggregate(pipe)
            .hint(mongodb::options::Hint::Keys(doc! { "$natural": 1 }))
            .await?
            .try_collect()
            .await?;
        assert_eq!(agg, agg_nat, "aggregate {q}");
    }
    Ok(())
}

/// Updates and deletes through an index touch exactly the documents a scan would.
#[tokio::test]
async fn indexed_writes_match_what_scans_match() -> TestResult {
    let server = TestServer::start().await?;
    let client = server.client().await?;
    let (db1, c1) = setup(&client, "planner_w1").await?;
    let (_, c2) = setup(&client, "planner_w2").await?;
    create_indexes(&db1).await?;
    for q in [
        doc! { "a": 5 },
        doc! { "a": { "$gt": 12 } },
        doc! { "b": 3, "a": { "$lt": 4 } },
    ] {
        let r1 = c1
            .update_many(q.clone(), doc! { "$inc": { "n": 1 } })
            .await?;
        let r2 = c2
            .update_many(q.clone(), doc! { "$inc": { "n": 1 } })
            .await?;
        assert_eq!(r1.matched_count, r2.matched_count, "{q}");
    }
    let r1 = c1
        .delete_many(doc! { "a": { "$in": [2, 3, "str1"] } })
        .await?;
    let r2 = c2
        .delete_many(doc! { "a": { "$in": [2, 3, "str1"] } })
        .await?;
    assert_eq!(r1.deleted_count, r2.deleted_count);
    let f1 = c1
        .find_one_and_update(doc! { "a": { "$gte": 7 } }, doc! { "$set": { "z": 1 } })
        .sort(doc! { "a": -1, "_id": 1 })
        .await?;
    let f2 = c2
        .find_one_and_update(doc! { "a": { "$gte": 7 } }, doc! { "$set": { "z": 1 } })
        .sort(doc! { "a": -1, "_id": 1 })
        .await?;
    assert_eq!(f1, f2);
    let all1: Vec<Document> = c1.find(doc! {}).await?.try_collect().await?;
    let all2: Vec<Document> = c2.find(doc! {}).await?.try_collect().await?;
    assert_eq!(all1, all2);
    Ok(())
}

/// Expired documents are never returned through an index either.
#[tokio::test]
async fn expired_documents_stay_hidden_behind_indexes() -> TestResult {
    let server = TestServer::start_with_test_clock().await?;
    let client = server.client().await?;
    let admin = client.database("admin");
    admin
        .run_command(doc! { "ebbAdvanceClock": 0, "freeze": true })
        .await?;
    let db = client.database("planner_ttl");
    db.run_command(doc! {
        "createIndexes": "c",
        "indexes": [
            { "key": { "_ts": 1 }, "name": "_ts_1", "expireAfterSeconds": 10 },
            { "key": { "a": 1 }, "name": "a_1" },
        ],
    })
    .await?;
    let coll = db.collection::<Document>("c");
    coll.insert_many((0..50).map(|i| doc! { "_id": i, "a": i % 5 }))
        .await?;
    admin
        .run_command(doc! { "ebbAdvanceClock": 6000, "freeze": true })
        .await?;
    coll.insert_many((50..100).map(|i| doc! { "_id": i, "a": i % 5 }))
        .await?;
    admin
        .run_command(doc! { "ebbAdvanceClock": 5000, "freeze": true })
        .await?;
    for q in [doc! { "a": 3 }, doc! { "a": { "$gte": 1 } }, doc! {}] {
        let got = find(&db, &q, Some(&doc! { "a": 1, "_id": 1 }), None, 0, 0, 3).await?;
        assert!(
            got.iter().all(|d| d.get_i32("_id").unwrap_or(0) >= 50),
            "{q}"
        );
        let want = find(
            &db,
            &q,
            Some(&doc! { "a": 1, "_id": 1 }),
            Some(Bson::Document(doc! { "$natural": 1 })),
            0,
            0,
            3,
        )
        .await?;
        assert_eq!(got, want, "{q}");
    }
    Ok(())
}

async fn explain(db: &Database, cmd: Document, verbosity: &str) -> TestResult<Document> {
    Ok(db
        .run_command(doc! { "explain": cmd, "verbosity": verbosity })
        .await?)
}

/// The innermost stage of a plan tree.
fn leaf(mut stage: &Document) -> &Document {
    while let Ok(inner) = stage.get_document("inputStage") {
        stage = inner;
    }
    stage
}

fn stage_names(mut stage: &Document) -> Vec<String> {
    let mut out = vec![stage.get_str("stage").unwrap_or("?").to_owned()];
    while let Ok(inner) = stage.get_document("inputStage") {
        out.push(inner.get_str("stage").unwrap_or("?").to_owned());
        stage = inner;
    }
    out
}

/// Explain shapes that need no index entries: COLLSCAN, IDHACK, `_id` ranges, SORT, the
/// reply's sections, verbosity errors, and that explaining a write does not write.
#[tokio::test]
async fn explain_shapes() -> TestResult {
    let server = TestServer::start().await?;
    let client = server.client().await?;
    let (db, coll) = setup(&client, "planner_explain").await?;

    let e = explain(
        &db,
        doc! { "find": "c", "filter": { "b": 2 }, "sort": { "a": 1 }, "limit": 3 },
        "executionStats",
    )
    .await?;
    assert_eq!(e.get_str("explainVersion")?, "1");
    let qp = e.get_document("queryPlanner")?;
    assert_eq!(qp.get_str("namespace")?, "planner_explain.c");
    assert!(!qp.get_bool("indexFilterSet")?);
    assert_eq!(qp.get_document("parsedQuery")?, &doc! { "b": { "$eq": 2 } });
    assert!(qp.get_array("rejectedPlans")?.is_empty());
    let wp = qp.get_document("winningPlan")?;
    assert_eq!(stage_names(wp), ["SORT", "COLLSCAN"]);
    assert_eq!(wp.get_document("sortPattern")?, &doc! { "a": 1 });
    assert_eq!(leaf(wp).get_str("direction")?, "forward");
    let es = e.get_document("executionStats")?;
    assert!(es.get_bool("executionSuccess")?);
    assert_eq!(es.get_num("nReturned")?, 3);
    assert_eq!(es.get_num("totalDocsExamined")?, 300);
    assert_eq!(es.get_num("totalKeysExamined")?, 0);
    assert!(es.get_document("executionStages").is_ok());
    let info = e.get_document("serverInfo")?;
    assert!(info.get_str("host").is_ok() && info.get_i32("port").is_ok());
    assert_eq!(e.get_document("command")?.get_str("find")?, "c");
    assert_eq!(e.get_f64("ok")?, 1.0);

    // queryPlanner runs nothing.
    let e = explain(
        &db,
        doc! { "find": "c", "filter": { "_id": 5 } },
        "queryPlanner",
    )
    .await?;
    assert!(e.get_document("executionStats").is_err());
    assert_eq!(
        stage_names(
            e.get_document("queryPlanner")?
                .get_document("winningPlan")?
        ),
        ["IDHACK"]
    );

    // An `_id` range reads the `_id` index, backwards for a descending sort: no SORT.
    let e = explain(
        &db,
        doc! { "find": "c", "filter": { "_id": { "$gte": 290 } }, "sort": { "_id": -1 }, "limit": 2 },
        "executionStats",
    )
    .await?;
    let wp = e
        .get_document("queryPlanner")?
        .get_document("winningPlan")?;
    assert_eq!(stage_names(wp), ["LIMIT", "FETCH", "IXSCAN"]);
    let ix = leaf(wp);
    assert_eq!(ix.get_str("indexName")?, "_id_");
    assert_eq!(ix.get_str("direction")?, "backward");
    assert_eq!(
        ix.get_document("indexBounds")?,
        &doc! { "_id": ["[inf.0, 290]"] }
    );
    assert_eq!(
        e.get_document("executionStats")?
            .get_num("totalDocsExamined")?,
        2
    );

    // Default verbosity is allPlansExecution.
    let e = db
        .run_command(doc! { "explain": { "count": "c", "query": { "a": 3 } } })
        .await?;
    let es = e.get_document("executionStats")?;
    assert!(es.get_array("allPlansExecution").is_ok());
    assert_eq!(
        stage_names(
            e.get_document("queryPlanner")?
                .get_document("winningPlan")?
        )[0],
        "COUNT"
    );

    let e = explain(
        &db,
        doc! { "distinct": "c", "key": "a", "query": { "b": 1 } },
        "executionStats",
    )
    .await?;
    assert!(e.get_document("queryPlanner").is_ok());

    // Writes are explained without writing.
    let before: Vec<Document> = coll.find(doc! {}).await?.try_collect().await?;
    for cmd in [
        doc! { "update": "c", "updates": [{ "q": { "b": 1 }, "u": { "$set": { "x": 1 } }, "multi": true }] },
        doc! { "delete": "c", "deletes": [{ "q": { "b": 1 }, "limit": 0 }] },
        doc! { "findAndModify": "c", "query": { "b": 1 }, "remove": true },
        doc! { "findAndModify": "c", "query": { "b": 1 }, "update": { "$set": { "y": 1 } } },
    ] {
        let e = explain(&db, cmd.clone(), "executionStats").await?;
        let top = stage_names(
            e.get_document("queryPlanner")?
                .get_document("winningPlan")?,
        );
        assert!(top[0] == "UPDATE" || top[0] == "DELETE", "{cmd}: {top:?}");
    }
    let after: Vec<Document> = coll.find(doc! {}).await?.try_collect().await?;
    assert_eq!(before, after);

    // aggregate: explain: true and the explain command.
    let e = db
        .run_command(
            doc! { "aggregate": "c", "pipeline": [{ "$match": { "b": 1 } }], "explain": true },
        )
        .await?;
    assert!(e.get_document("queryPlanner").is_ok());
    let e = explain(
        &db,
        doc! { "aggregate": "c", "pipeline": [{ "$match": { "b": 1 } }, { "$group": { "_id": "$a" } }], "cursor": {} },
        "executionStats",
    )
    .await?;
    let stages = e.get_array("stages")?;
    let first = stages[0].as_document().ok_or("stage")?;
    assert!(
        first
            .get_document("$cursor")?
            .get_document("queryPlanner")
            .is_ok()
    );
    assert!(
        stages[1]
            .as_document()
            .ok_or("stage")?
            .get_document("$group")
            .is_ok()
    );

    // Errors.
    let err = db
        .run_command(doc! { "explain": { "find": "c" }, "verbosity": "loud" })
        .await
        .expect_err("bad verbosity");
    assert!(matches!(*err.kind, mongodb::error::ErrorKind::Command(ref c) if c.code == 2));
    Ok(())
}

/// Hints: `$natural`, an unknown index, a hidden index.
#[tokio::test]
async fn hint_errors() -> TestResult {
    let server = TestServer::start().await?;
    let client = server.client().await?;
    let (db, coll) = setup(&client, "planner_hint").await?;
    create_indexes(&db).await?;
    db.run_command(doc! { "collMod": "c", "index": { "name": "s_1", "hidden": true } })
        .await?;
    for hint in [
        Bson::String("nope".into()),
        Bson::Document(doc! { "zz": 1 }),
        Bson::String("s_1".into()),
    ] {
        for cmd in [
            doc! { "find": "c", "filter": {}, "hint": hint.clone() },
            doc! { "count": "c", "query": {}, "hint": hint.clone() },
            doc! { "aggregate": "c", "pipeline": [], "cursor": {}, "hint": hint.clone() },
        ] {
            let err = db.run_command(cmd.clone()).await.expect_err("bad hint");
            match *err.kind {
                mongodb::error::ErrorKind::Command(ref c) => {
                    assert_eq!(c.code, 2, "{cmd}");
                    assert!(
                        c.message.contains("hint provided does not correspond"),
                        "{cmd}"
                    );
                }
                ref other => panic!("{cmd}: {other:?}"),
            }
        }
        let r = db
            .run_command(doc! {
                "update": "c",
                "updates": [{ "q": {}, "u": { "$set": { "h": 1 } }, "hint": hint.clone() }],
            })
            .await?;
        assert!(r.get_array("writeErrors").is_ok(), "update with {hint}");
    }
    let n = coll
        .count_documents(doc! {})
        .hint(mongodb::options::Hint::Keys(doc! { "$natural": -1 }))
        .await?;
    assert_eq!(n, 300);
    let err = db
        .run_command(doc! { "find": "c", "hint": 5 })
        .await
        .expect_err("hint type");
    assert!(matches!(*err.kind, mongodb::error::ErrorKind::Command(ref c) if c.code == 14));
    Ok(())
}

/// With entries: selective queries read few keys and documents, and sorts come from the index.
#[tokio::test]
async fn indexes_are_used() -> TestResult {
    let server = TestServer::start().await?;
    let client = server.client().await?;
    let db = client.database("planner_used");
    let coll = db.collection::<Document>("c");
    coll.insert_many(
        (0..10_000).map(|i| doc! { "_id": i, "k": i, "g": i % 1000, "t": [i % 7, 7 + i % 3] }),
    )
    .await?;
    db.run_command(doc! {
        "createIndexes": "c",
        "indexes": [
            { "key": { "k": 1 }, "name": "k_1" },
            { "key": { "g": 1, "k": -1 }, "name": "g_1_k_-1" },
            { "key": { "t": 1 }, "name": "t_1" },
        ],
    })
    .await?;

    let e = explain(
        &db,
        doc! { "find": "c", "filter": { "g": 42 } },
        "executionStats",
    )
    .await?;
    let es = e.get_document("executionStats")?;
    assert_eq!(es.get_num("nReturned")?, 10);
    assert!(es.get_num("totalKeysExamined")? <= 11);
    assert_eq!(es.get_num("totalDocsExamined")?, 10);
    let wp = e
        .get_document("queryPlanner")?
        .get_document("winningPlan")?;
    assert_eq!(stage_names(wp), ["FETCH", "IXSCAN"]);
    let ix = leaf(wp);
    assert_eq!(ix.get_str("indexName")?, "g_1_k_-1");
    assert_eq!(
        ix.get_document("indexBounds")?,
        &doc! { "g": ["[42, 42]"], "k": ["[MaxKey, MinKey]"] }
    );
    assert!(!ix.get_bool("isMultiKey")?);

    // Sort + limit from the index: ~10 keys, no SORT stage.
    let e = explain(
        &db,
        doc! { "find": "c", "filter": {}, "sort": { "k": -1 }, "limit": 10 },
        "executionStats",
    )
    .await?;
    let wp = e
        .get_document("queryPlanner")?
        .get_document("winningPlan")?;
    assert_eq!(stage_names(wp), ["LIMIT", "FETCH", "IXSCAN"]);
    assert_eq!(leaf(wp).get_str("direction")?, "backward");
    assert!(
        e.get_document("executionStats")?
            .get_num("totalKeysExamined")?
            <= 11
    );

    // Equality prefix then sort on the next field.
    let e = explain(
        &db,
        doc! { "find": "c", "filter": { "g": 7 }, "sort": { "k": 1 } },
        "queryPlanner",
    )
    .await?;
    let wp = e
        .get_document("queryPlanner")?
        .get_document("winningPlan")?;
    assert_eq!(stage_names(wp), ["FETCH", "IXSCAN"]);
    assert_eq!(leaf(wp).get_str("direction")?, "backward");

    // Ranges and $in.
    let e = explain(
        &db,
        doc! { "find": "c", "filter": { "k": { "$gt": 5, "$lte": 9 } } },
        "executionStats",
    )
    .await?;
    assert_eq!(
        leaf(
            e.get_document("queryPlanner")?
                .get_document("winningPlan")?
        )
        .get_document("indexBounds")?,
        &doc! { "k": ["(5, 9]"] }
    );
    assert_eq!(e.get_document("executionStats")?.get_num("nReturned")?, 4);
    let e = explain(
        &db,
        doc! { "count": "c", "query": { "k": { "$in": [3, 1, 99999] } } },
        "executionStats",
    )
    .await?;
    // The keys decide the count: no document is read, and with three ranges the scan is an
    // `IXSCAN` (a `COUNT_SCAN` takes one).
    let stats = e.get_document("executionStats")?;
    assert_eq!(stats.get_num("totalDocsExamined")?, 0);
    assert_eq!(
        stats.get_document("executionStages")?.get_num("nCounted")?,
        2
    );
    assert_eq!(
        stage_names(
            e.get_document("queryPlanner")?
                .get_document("winningPlan")?
        ),
        ["COUNT", "IXSCAN"]
    );

    // Multikey: reported, deduplicated, never a sort source.
    let e = explain(
        &db,
        doc! { "find": "c", "filter": { "t": { "$in": [1, 8] } } },
        "executionStats",
    )
    .await?;
    let ix = leaf(
        e.get_document("queryPlanner")?
            .get_document("winningPlan")?,
    );
    assert!(ix.get_bool("isMultiKey")?);
    let n = coll
        .count_documents(doc! { "t": { "$in": [1, 8] } })
        .await?;
    let n_nat = coll
        .count_documents(doc! { "t": { "$in": [1, 8] } })
        .hint(mongodb::options::Hint::Keys(doc! { "$natural": 1 }))
        .await?;
    assert_eq!(n, n_nat);
    let e = explain(
        &db,
        doc! { "find": "c", "filter": { "t": 1 }, "sort": { "t": 1 } },
        "queryPlanner",
    )
    .await?;
    assert_eq!(
        stage_names(
            e.get_document("queryPlanner")?
                .get_document("winningPlan")?
        )[0],
        "SORT"
    );

    // Hints by name and pattern; writes and aggregate use indexes too.
    let e = explain(
        &db,
        doc! { "find": "c", "filter": { "g": 3 }, "hint": "k_1" },
        "queryPlanner",
    )
    .await?;
    assert_eq!(
        leaf(
            e.get_document("queryPlanner")?
                .get_document("winningPlan")?
        )
        .get_str("indexName")?,
        "k_1"
    );
    let e = explain(
        &db,
        doc! { "find": "c", "filter": { "g": 3 }, "hint": { "$natural": 1 } },
        "queryPlanner",
    )
    .await?;
    assert_eq!(
        leaf(
            e.get_document("queryPlanner")?
                .get_document("winningPlan")?
        )
        .get_str("stage")?,
        "COLLSCAN"
    );
    let e = explain(
        &db,
        doc! { "update": "c", "updates": [{ "q": { "k": 5 }, "u": { "$set": { "x": 1 } } }] },
        "executionStats",
    )
    .await?;
    assert_eq!(
        e.get_document("executionStats")?
            .get_num("totalDocsExamined")?,
        1
    );
    let e = explain(
        &db,
        doc! { "aggregate": "c", "pipeline": [{ "$match": { "g": 5 } }, { "$sort": { "k": -1 } }], "cursor": {} },
        "executionStats",
    )
    .await?;
    let qp = e.get_document("queryPlanner")?;
    assert_eq!(
        stage_names(qp.get_document("winningPlan")?),
        ["FETCH", "IXSCAN"]
    );
    let r = coll
        .update_many(doc! { "g": 5 }, doc! { "$set": { "u": 1 } })
        .await?;
    assert_eq!(r.matched_count, 10);
    let r = coll.delete_many(doc! { "k": { "$lt": 10 } }).await?;
    assert_eq!(r.deleted_count, 10);

    // getMore across batches in index order.
    let mut cursor = db
        .run_cursor_command(doc! { "find": "c", "filter": { "k": { "$gte": 100, "$lt": 400 } }, "sort": { "k": 1 }, "batchSize": 7 })
        .await?;
    let mut expect = 100;
    while let Some(d) = cursor.try_next().await? {
        assert_eq!(d.get_i32("k")?, expect);
        expect += 1;
    }
    assert_eq!(expect, 400);
    Ok(())
}

/// With entries: sparse and partial indexes are used only when they hold every match.
#[tokio::test]
async fn sparse_and_partial_indexes() -> TestResult {
    let server = TestServer::start().await?;
    let client = server.client().await?;
    let db = client.database("planner_sparse");
    let coll = db.collection::<Document>("c");
    coll.insert_many((0..100).map(|i| {
        if i % 2 == 0 {
            doc! { "_id": i, "a": i }
        } else {
            doc! { "_id": i }
        }
    }))
    .await?;
    db.run_command(doc! {
        "createIndexes": "c",
        "indexes": [
            { "key": { "a": 1 }, "name": "a_sparse", "sparse": true },
            { "key": { "_id": 1, "a": 1 }, "name": "partial", "partialFilterExpression": { "a": { "$gt": 50 } } },
        ],
    })
    .await?;
    let winning = |e: &Document| -> TestResult<String> {
        Ok(leaf(
            e.get_document("queryPlanner")?
                .get_document("winningPlan")?,
        )
        .get_str("indexName")
        .unwrap_or("COLLSCAN")
        .to_owned())
    };
    let e = explain(
        &db,
        doc! { "find": "c", "filter": { "a": 4 } },
        "queryPlanner",
    )
    .await?;
    assert_eq!(winning(&e)?, "a_sparse");
    let e = explain(
        &db,
        doc! { "find": "c", "filter": { "a": null } },
        "queryPlanner",
    )
    .await?;
    assert_eq!(winning(&e)?, "COLLSCAN");
    let e = explain(
        &db,
        doc! { "find": "c", "filter": {}, "sort": { "a": 1 } },
        "queryPlanner",
    )
    .await?;
    assert_eq!(winning(&e)?, "COLLSCAN");
    // Hinted, the sparse index is used even though it misses documents.
    let n = coll
        .count_documents(doc! {})
        .hint(mongodb::options::Hint::Name("a_sparse".into()))
        .await?;
    assert_eq!(n, 50);
    let e = explain(
        &db,
        doc! { "find": "c", "filter": { "a": { "$gt": 60 }, "_id": { "$gt": 70 } } },
        "queryPlanner",
    )
    .await?;
    assert!(["partial", "a_sparse", "_id_"].contains(&winning(&e)?.as_str()));
    let got: Vec<Document> = coll
        .find(doc! { "a": { "$gt": 60 }, "_id": { "$gt": 70 } })
        .hint(mongodb::options::Hint::Name("partial".into()))
        .await?
        .try_collect()
        .await?;
    // Even `_id`s 72 to 98.
    assert_eq!(got.len(), 14);
    Ok(())
}

/// A hidden index is not planned on but is still maintained: written to while hidden, then
/// unhidden, it is used again and answers what a collection scan answers. Conflicting specs get
/// mongod's 85 and 86.
#[tokio::test]
async fn hidden_indexes_are_maintained_and_specs_conflict() -> TestResult {
    let server = TestServer::start().await?;
    let client = server.client().await?;
    let (db, coll) = setup(&client, "planner_hidden").await?;
    create_indexes(&db).await?;
    let winning = |e: &Document| -> TestResult<String> {
        Ok(leaf(
            e.get_document("queryPlanner")?
                .get_document("winningPlan")?,
        )
        .get_str("stage")?
        .to_owned())
    };
    let query = doc! { "find": "c", "filter": { "s": "k007" } };
    assert_eq!(
        winning(&explain(&db, query.clone(), "queryPlanner").await?)?,
        "IXSCAN"
    );
    db.run_command(doc! { "collMod": "c", "index": { "name": "s_1", "hidden": true } })
        .await?;
    assert_eq!(
        winning(&explain(&db, query.clone(), "queryPlanner").await?)?,
        "COLLSCAN"
    );
    coll.insert_many((1_000..1_050).map(|i| doc! { "_id": i, "s": "k007", "b": i % 5 }))
        .await?;
    coll.update_many(
        doc! { "_id": { "$lt": 40 } },
        doc! { "$set": { "s": "k007" } },
    )
    .await?;
    coll.delete_many(doc! { "_id": { "$gte": 1_040 } }).await?;
    db.run_command(doc! { "collMod": "c", "index": { "name": "s_1", "hidden": false } })
        .await?;
    assert_eq!(
        winning(&explain(&db, query.clone(), "queryPlanner").await?)?,
        "IXSCAN"
    );
    let got = find(
        &db,
        &doc! { "s": "k007" },
        Some(&doc! { "_id": 1 }),
        None,
        0,
        0,
        10,
    )
    .await?;
    let want = find(
        &db,
        &doc! { "s": "k007" },
        Some(&doc! { "_id": 1 }),
        Some(Bson::Document(doc! { "$natural": 1 })),
        0,
        0,
        10,
    )
    .await?;
    assert_eq!(got, want);
    assert!(got.len() > 50, "{} documents", got.len());
    let v = db.run_command(doc! { "validate": "c" }).await?;
    assert!(v.get_bool("valid")?, "{v}");

    let code_of = |e: mongodb::error::Error| match *e.kind {
        mongodb::error::ErrorKind::Command(ref c) => (c.code, c.code_name.clone()),
        ref other => panic!("{other:?}"),
    };
    // Wrong types: mongod's IDL names the field and the type it wanted.
    let err = db
        .run_command(doc! { "collMod": "c", "index": { "name": "s_1", "hidden": "yes" } })
        .await
        .expect_err("hidden must be a bool");
    assert_eq!(code_of(err.clone()), (14, "TypeMismatch".to_owned()));
    assert!(err.to_string().contains("expected type 'bool'"), "{err}");
    let err = db
        .run_command(doc! { "validate": "c", "full": "yes" })
        .await
        .expect_err("full must be a bool");
    assert_eq!(code_of(err), (14, "TypeMismatch".to_owned()));
    // The same name for another key pattern: 86.
    let err = db
        .run_command(
            doc! { "createIndexes": "c", "indexes": [{ "key": { "b": 1 }, "name": "s_1" }] },
        )
        .await
        .expect_err("same name, other key");
    assert_eq!(code_of(err), (86, "IndexKeySpecsConflict".to_owned()));
    // The same key pattern under another name: 85.
    let err = db
        .run_command(
            doc! { "createIndexes": "c", "indexes": [{ "key": { "s": 1 }, "name": "other" }] },
        )
        .await
        .expect_err("same key, other name");
    assert_eq!(code_of(err), (85, "IndexOptionsConflict".to_owned()));
    // The same name and key with other options: 85.
    let err = db
        .run_command(doc! {
            "createIndexes": "c",
            "indexes": [{ "key": { "s": 1 }, "name": "s_1", "sparse": true }],
        })
        .await
        .expect_err("same index, other options");
    assert_eq!(code_of(err), (85, "IndexOptionsConflict".to_owned()));
    Ok(())
}
