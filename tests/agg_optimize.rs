//! The pipeline rewrites mongod applies, seen from a client: `explain` of an aggregate lists
//! the stages after them (each with `nReturned` and `executionTimeMillisEstimate` when it
//! ran), a `$match` moved to the front is planned with an index, and the rewritten pipeline
//! gives the results the given one means.

mod common;

use bson::{Bson, Document, doc};
use common::{TestResult, TestServer};
use mongodb::Database;

async fn explain(db: &Database, pipeline: Vec<Document>, verbosity: &str) -> TestResult<Document> {
    Ok(db
        .run_command(doc! {
            "explain": { "aggregate": "c", "pipeline": pipeline, "cursor": {} },
            "verbosity": verbosity,
        })
        .await?)
}

/// `{_id: i, a: i % 7, b: i % 3}` for i in 0..60.
async fn filled(db: &Database) -> TestResult {
    let docs: Vec<Document> = (0..60_i32)
        .map(|i| doc! { "_id": i, "a": i % 7, "b": i % 3 })
        .collect();
    db.collection::<Document>("c").insert_many(docs).await?;
    Ok(())
}

async fn results(db: &Database, pipeline: Vec<Document>) -> TestResult<Vec<Document>> {
    let mut cursor = db.collection::<Document>("c").aggregate(pipeline).await?;
    let mut out = Vec::new();
    while cursor.advance().await? {
        out.push(cursor.deserialize_current()?);
    }
    Ok(out)
}

fn stages(e: &Document) -> TestResult<Vec<Document>> {
    e.get_array("stages")?
        .iter()
        .map(|s| s.as_document().cloned().ok_or_else(|| "stage".into()))
        .collect()
}

/// The stage document without what running it measured.
fn spec(stage: &Document) -> Document {
    let mut d = stage.clone();
    d.remove("nReturned");
    d.remove("executionTimeMillisEstimate");
    d
}

#[tokio::test]
async fn explain_lists_the_rewritten_stages() -> TestResult {
    let server = TestServer::start().await?;
    let client = server.client().await?;
    let db = client.database("agg_opt_explain");
    filled(&db).await?;
    let pipeline = vec![
        doc! { "$group": { "_id": "$a", "n": { "$sum": 1 } } },
        doc! { "$addFields": { "big": { "$gt": ["$n", 8] } } },
        doc! { "$match": { "big": true, "_id": { "$gte": 1 } } },
        doc! { "$sort": { "_id": -1 } },
        doc! { "$skip": 1 },
        doc! { "$limit": 2 },
    ];
    let e = explain(&db, pipeline.clone(), "queryPlanner").await?;
    let s = stages(&e)?;
    assert!(
        s[0].get_document("$cursor")?
            .get_document("queryPlanner")?
            .get_document("winningPlan")
            .is_ok(),
        "{e}"
    );
    // The condition on `_id` moves ahead of $addFields (which does not set it); the $limit
    // goes into the $sort, raised by the $skip.
    assert_eq!(
        &s[1..],
        [
            doc! { "$group": { "_id": "$a", "n": { "$sum": 1 } } },
            doc! { "$match": { "_id": { "$gte": 1 } } },
            doc! { "$addFields": { "big": { "$gt": ["$n", 8] } } },
            doc! { "$match": { "big": { "$eq": true } } },
            doc! { "$sort": { "sortKey": { "_id": -1 }, "limit": 3_i64 } },
            doc! { "$skip": 1_i64 },
        ],
        "{e}"
    );
    // No stage reports what it did without running.
    assert!(s.iter().all(|d| d.get("nReturned").is_none()), "{e}");

    // a = 0..=6 has 9 documents for a < 4, 8 after: groups 1, 2, 3 are big; the two below the
    // highest.
    let want = vec![
        doc! { "_id": 2, "n": 9, "big": true },
        doc! { "_id": 1, "n": 9, "big": true },
    ];
    assert_eq!(results(&db, pipeline.clone()).await?, want);

    for verbosity in ["executionStats", "allPlansExecution"] {
        let e = explain(&db, pipeline.clone(), verbosity).await?;
        let s = stages(&e)?;
        let cursor = s[0].get_document("$cursor")?;
        let exec = cursor.get_document("executionStats")?;
        assert_eq!(
            exec.get("allPlansExecution").is_some(),
            verbosity == "allPlansExecution",
            "{e}"
        );
        // Every stage, $cursor included, ends with what it returned and its time, as longs.
        let returned: Vec<i64> = s
            .iter()
            .map(|d| d.get_i64("nReturned"))
            .collect::<Result<_, _>>()?;
        assert_eq!(returned, [60, 7, 6, 6, 3, 3, 2], "{e}");
        for d in &s {
            assert!(d.get_i64("executionTimeMillisEstimate")? >= 0, "{e}");
            let keys: Vec<&String> = d.keys().collect();
            assert_eq!(
                keys[keys.len() - 2..],
                ["nReturned", "executionTimeMillisEstimate"],
                "{e}"
            );
        }
        assert_eq!(
            spec(&s[5]),
            doc! { "$sort": { "sortKey": { "_id": -1 }, "limit": 3_i64 } }
        );
        assert_eq!(
            cursor.get_document("queryPlanner")?.get_str("namespace")?,
            "agg_opt_explain.c"
        );
    }
    Ok(())
}

#[tokio::test]
async fn a_match_moved_to_the_front_uses_an_index() -> TestResult {
    let server = TestServer::start().await?;
    let client = server.client().await?;
    let db = client.database("agg_opt_index");
    filled(&db).await?;
    db.collection::<Document>("c")
        .create_index(mongodb::IndexModel::builder().keys(doc! { "b": 1 }).build())
        .await?;
    let pipeline = vec![
        doc! { "$addFields": { "twice": { "$multiply": ["$a", 2] } } },
        doc! { "$sort": { "twice": -1, "_id": 1 } },
        doc! { "$match": { "b": 2, "twice": { "$lt": 12 } } },
        doc! { "$project": { "twice": 1 } },
    ];
    let e = explain(&db, pipeline.clone(), "executionStats").await?;
    let s = stages(&e)?;
    let cursor = s[0].get_document("$cursor")?;
    let plan = cursor.get_document("queryPlanner")?;
    assert_eq!(
        plan.get_document("parsedQuery")?,
        &doc! { "b": { "$eq": 2 } },
        "{e}"
    );
    let text = plan.get_document("winningPlan")?.to_string();
    assert!(text.contains("IXSCAN") && text.contains("b_1"), "{e}");
    // Only the documents with b == 2 were read, through the index.
    let exec = cursor.get_document("executionStats")?;
    assert_eq!(
        exec.get_i64("totalKeysExamined")
            .or_else(|_| exec.get_i32("totalKeysExamined").map(i64::from))?,
        20,
        "{e}"
    );
    assert_eq!(
        s[1..].iter().map(spec).collect::<Vec<_>>(),
        [
            doc! { "$addFields": { "twice": { "$multiply": ["$a", 2] } } },
            doc! { "$match": { "twice": { "$lt": 12 } } },
            doc! { "$sort": { "sortKey": { "twice": -1, "_id": 1 } } },
            doc! { "$project": { "twice": 1 } },
        ],
        "{e}"
    );

    // The same results as the order a reader would write by hand, and as computed here.
    let by_hand = vec![
        doc! { "$match": { "b": 2 } },
        doc! { "$addFields": { "twice": { "$multiply": ["$a", 2] } } },
        doc! { "$match": { "twice": { "$lt": 12 } } },
        doc! { "$sort": { "twice": -1, "_id": 1 } },
        doc! { "$project": { "twice": 1 } },
    ];
    let got = results(&db, pipeline).await?;
    assert_eq!(got, results(&db, by_hand).await?);
    let mut want: Vec<(i32, i32)> = (0..60)
        .filter(|i| i % 3 == 2 && (i % 7) * 2 < 12)
        .map(|i| ((i % 7) * 2, i))
        .collect();
    want.sort_by(|x, y| y.0.cmp(&x.0).then(x.1.cmp(&y.1)));
    let want: Vec<Document> = want
        .into_iter()
        .map(|(t, i)| doc! { "_id": i, "twice": t })
        .collect();
    assert_eq!(got, want);
    assert!(!got.is_empty());
    Ok(())
}

#[tokio::test]
async fn rewrites_keep_the_results() -> TestResult {
    let server = TestServer::start().await?;
    let client = server.client().await?;
    let db = client.database("agg_opt_results");
    filled(&db).await?;
    // Each pipeline against one its rewrites cannot touch (a $group with one member per
    // document stops every $match and $limit from moving), which runs as given.
    let fence =
        doc! { "$group": { "_id": "$_id", "a": { "$first": "$a" }, "b": { "$first": "$b" } } };
    let pipelines = vec![
        vec![
            doc! { "$sort": { "a": 1, "_id": -1 } },
            doc! { "$match": { "b": { "$ne": 0 } } },
            doc! { "$skip": 2 },
            doc! { "$skip": 3 },
            doc! { "$limit": 10 },
            doc! { "$limit": 7 },
        ],
        vec![
            doc! { "$unset": "a" },
            doc! { "$match": { "$and": [{ "b": 1 }, { "a": { "$exists": false } }] } },
            doc! { "$sort": { "_id": 1 } },
        ],
        vec![
            doc! { "$project": { "a": 1 } },
            doc! { "$match": { "a": { "$gt": 3 }, "b": null } },
            doc! { "$sort": { "_id": -1 } },
            doc! { "$project": { "_id": 1 } },
            doc! { "$limit": 4 },
        ],
        vec![
            doc! { "$sort": { "a": -1, "_id": 1 } },
            doc! { "$set": { "c": { "$add": ["$a", "$b"] } } },
            doc! { "$skip": 4 },
            doc! { "$limit": 5 },
            doc! { "$match": { "c": { "$gte": 5 } } },
        ],
    ];
    for p in pipelines {
        let mut fenced = vec![
            doc! { "$sort": { "_id": 1 } },
            fence.clone(),
            doc! { "$sort": { "_id": 1 } },
        ];
        fenced.extend(p.iter().cloned());
        let got = results(&db, p.clone()).await?;
        let want = results(&db, fenced).await?;
        assert_eq!(got, want, "{p:?}");
        assert!(!got.is_empty(), "{p:?}");
    }
    // Spot check of the first by hand: b != 0 sorted by a, then _id descending; skip 5, 7.
    let mut want: Vec<(i32, i32)> = (0..60).filter(|i| i % 3 != 0).map(|i| (i % 7, i)).collect();
    want.sort_by(|x, y| x.0.cmp(&y.0).then(y.1.cmp(&x.1)));
    let want: Vec<Bson> = want
        .into_iter()
        .skip(5)
        .take(7)
        .map(|(_, i)| Bson::Int32(i))
        .collect();
    let got: Vec<Bson> = results(
        &db,
        vec![
            doc! { "$sort": { "a": 1, "_id": -1 } },
            doc! { "$match": { "b": { "$ne": 0 } } },
            doc! { "$skip": 2 },
            doc! { "$skip": 3 },
            doc! { "$limit": 10 },
            doc! { "$limit": 7 },
        ],
    )
    .await?
    .iter()
    .map(|d| d.get("_id").cloned().unwrap_or(Bson::Null))
    .collect();
    assert_eq!(got, want);
    Ok(())
}
