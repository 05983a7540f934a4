//! Blocking aggregation stages past the memory limit, through the `mongodb` driver: `$group`,
//! `$bucket`, `$bucketAuto` and `$setWindowFields` spill to disk under `allowDiskUse` (the
//! default) and give what the same pipeline gives in memory, and answer
//! `QueryExceededMemoryLimitNoDiskUseAllowed` (292) with `allowDiskUse: false`. The spilling
//! server runs with the blocking-sort limit (`internalQueryMaxBlockingSortMemoryUsageBytes`)
//! lowered so that a few thousand small documents pass it; the other keeps mongod's 100 MiB.

mod common;

use common::{TestResult, TestServer, assert_command_error, command_error, run_command_err};
use mongodb::Client;
use mongodb::bson::{Bson, Document, doc};

/// The lowered limit: a small fraction of the data below.
const LIMIT: usize = 20_000;
const DOCS: i32 = 3_000;

/// Seeded documents: `k` a number in 0..300 or a string among case variants, `v` a number
/// (halves: sums are exact) or missing or a string, `s` a string, `o` a small document.
fn documents() -> Vec<Document> {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move |m: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        i32::try_from(x % m).expect("below m")
    };
    let words = ["a", "A", "b", "B", "é", "E", "e"];
    (0..DOCS)
        .map(|i| {
            let mut d = doc! { "_id": i };
            let r = next(320);
            if r < 300 {
                d.insert("k", r);
            } else {
                d.insert(
                    "k",
                    words[usize::try_from(r - 300).expect("positive") % words.len()],
                );
            }
            match next(8) {
                0 => {}
                1 => {
                    d.insert("v", "text");
                }
                2..=4 => {
                    d.insert("v", next(50));
                }
                _ => {
                    d.insert("v", f64::from(next(80)) / 2.0);
                }
            }
            d.insert("s", words[usize::try_from(next(7)).expect("positive")]);
            d.insert("o", doc! { format!("f{}", next(4)): next(9) });
            d.insert("pad", "x".repeat(40));
            d
        })
        .collect()
}

struct Servers {
    _lowered: TestServer,
    _default: TestServer,
    lowered: Client,
    default: Client,
}

async fn start() -> TestResult<Servers> {
    let lowered = TestServer::start_with(|c| c.max_blocking_sort_bytes = LIMIT).await?;
    let default = TestServer::start().await?;
    let (lc, dc) = (lowered.client().await?, default.client().await?);
    for client in [&lc, &dc] {
        client
            .database("db")
            .collection::<Document>("c")
            .insert_many(documents())
            .await?;
    }
    Ok(Servers {
        _lowered: lowered,
        _default: default,
        lowered: lc,
        default: dc,
    })
}

/// Runs `pipeline` (with `options` merged into the command) and reads the cursor to the end.
async fn aggregate(
    client: &Client,
    pipeline: &[Document],
    options: Document,
) -> mongodb::error::Result<Vec<Document>> {
    let mut command =
        doc! { "aggregate": "c", "pipeline": pipeline.to_vec(), "cursor": {"batchSize": 50} };
    command.extend(options);
    let db = client.database("db");
    let reply = db.run_command(command).await?;
    let cursor = reply.get_document("cursor").expect("cursor");
    let mut out: Vec<Document> = cursor
        .get_array("firstBatch")
        .expect("firstBatch")
        .iter()
        .filter_map(|d| d.as_document().cloned())
        .collect();
    let mut id = cursor.get_i64("id").expect("id");
    while id != 0 {
        let more = db
            .run_command(doc! { "getMore": id, "collection": "c", "batchSize": 50 })
            .await?;
        let cursor = more.get_document("cursor").expect("cursor");
        out.extend(
            cursor
                .get_array("nextBatch")
                .expect("nextBatch")
                .iter()
                .filter_map(|d| d.as_document().cloned()),
        );
        id = cursor.get_i64("id").expect("id");
    }
    Ok(out)
}

/// Every `$group` accumulator but the standard deviations (their moments are combined after a
/// spill: equal to ~1e-15, checked apart).
fn accumulators() -> Document {
    doc! {
        "sum": {"$sum": "$v"}, "avg": {"$avg": "$v"}, "count": {"$count": {}},
        "min": {"$min": "$v"}, "max": {"$max": "$s"}, "first": {"$first": "$v"},
        "last": {"$last": "$_id"}, "push": {"$push": "$_id"}, "set": {"$addToSet": "$s"},
        "merged": {"$mergeObjects": "$o"},
        "firstN": {"$firstN": {"input": "$_id", "n": 3}},
        "lastN": {"$lastN": {"input": "$v", "n": 2}},
        "minN": {"$minN": {"input": "$s", "n": 2}}, "maxN": {"$maxN": {"input": "$v", "n": 3}},
        "top": {"$top": {"sortBy": {"v": 1}, "output": "$_id"}},
        "topN": {"$topN": {"n": 2, "sortBy": {"s": -1}, "output": "$_id"}},
        "bottom": {"$bottom": {"sortBy": {"s": 1}, "output": "$_id"}},
        "bottomN": {"$bottomN": {"n": 3, "sortBy": {"v": 1}, "output": ["$_id", "$v"]}},
        "median": {"$median": {"input": "$v", "method": "approximate"}},
        "pct": {"$percentile": {"input": "$v", "p": [0.25, 0.75], "method": "approximate"}},
    }
}

#[tokio::test]
async fn group_spills_and_gives_the_in_memory_values() -> TestResult {
    let s = start().await?;
    let mut spec = accumulators();
    spec.insert("_id", "$k");
    let pipeline = [doc! {"$group": spec}, doc! {"$sort": {"_id": 1}}];
    for collation in [None, Some(doc! {"locale": "en", "strength": 1})] {
        let options = collation
            .clone()
            .map(|c| doc! {"collation": c})
            .unwrap_or_default();
        let memory = aggregate(&s.default, &pipeline, options.clone()).await?;
        let spilled = aggregate(&s.lowered, &pipeline, options.clone()).await?;
        assert!(memory.len() > 300, "{} groups", memory.len());
        assert_eq!(memory, spilled, "collation {collation:?}");
        // The lowered server is past its limit: without disk use it is mongod's error.
        let mut no_disk = options.clone();
        no_disk.insert("allowDiskUse", false);
        let err = aggregate(&s.lowered, &pipeline, no_disk.clone())
            .await
            .unwrap_err();
        let err = command_error(&err).expect("a command error").clone();
        assert_command_error(&err, 292, "QueryExceededMemoryLimitNoDiskUseAllowed");
        assert_eq!(
            err.message,
            "PlanExecutor error during aggregation :: caused by :: Exceeded memory limit for \
             $group, but didn't allow external sort. Pass allowDiskUse:true to opt in."
        );
        // In memory, the same pipeline passes with allowDiskUse: false.
        assert_eq!(aggregate(&s.default, &pipeline, no_disk).await?, memory);
    }
    // The standard deviations, to 1e-9.
    let pipeline = [
        doc! {"$group": {"_id": "$k", "pop": {"$stdDevPop": "$v"}, "samp": {"$stdDevSamp": "$v"}}},
        doc! {"$sort": {"_id": 1}},
    ];
    let memory = aggregate(&s.default, &pipeline, doc! {}).await?;
    let spilled = aggregate(&s.lowered, &pipeline, doc! {}).await?;
    assert_eq!(memory.len(), spilled.len());
    for (m, l) in memory.iter().zip(&spilled) {
        assert_eq!(m.get("_id"), l.get("_id"));
        for f in ["pop", "samp"] {
            match (m.get(f), l.get(f)) {
                (Some(Bson::Double(a)), Some(Bson::Double(b))) => {
                    assert!((a - b).abs() < 1e-9, "{f}: {a} vs {b}");
                }
                (a, b) => assert_eq!(a, b),
            }
        }
    }
    Ok(())
}

/// After a spill the groups come out in key order (mongod's order is unspecified); without
/// one, in the order their keys first appear.
#[tokio::test]
async fn spilled_groups_come_in_key_order() -> TestResult {
    let s = start().await?;
    let pipeline = [
        doc! {"$match": {"k": {"$type": "number"}}},
        doc! {"$group": {"_id": "$k", "ids": {"$push": "$_id"}}},
    ];
    let spilled = aggregate(&s.lowered, &pipeline, doc! {}).await?;
    let keys: Vec<i32> = spilled
        .iter()
        .map(|d| d.get_i32("_id"))
        .collect::<Result<_, _>>()?;
    let mut sorted = keys.clone();
    sorted.sort_unstable();
    assert_eq!(keys, sorted);
    let memory = aggregate(&s.default, &pipeline, doc! {}).await?;
    let first_seen: Vec<i32> = memory
        .iter()
        .map(|d| d.get_i32("_id"))
        .collect::<Result<_, _>>()?;
    assert_ne!(
        first_seen, sorted,
        "the data should not arrive in key order"
    );
    Ok(())
}

#[tokio::test]
async fn bucket_bucket_auto_and_windows_spill() -> TestResult {
    let s = start().await?;
    let pipelines = [
        vec![
            doc! {"$match": {"k": {"$type": "number"}}},
            doc! {"$bucket": {"groupBy": "$k", "boundaries": [0, 5, 50, 299, 300],
            "output": {"ids": {"$push": "$_id"}, "f": {"$first": "$_id"}}}},
        ],
        vec![doc! {"$bucketAuto": {"groupBy": "$v", "buckets": 7,
        "output": {"ids": {"$push": "$_id"}, "n": {"$sum": 1}}}}],
        vec![
            doc! {"$setWindowFields": {"partitionBy": "$k", "sortBy": {"v": 1},
            "output": {"prev": {"$shift": {"output": "$_id", "by": -1}},
                "sum": {"$sum": "$v", "window": {"documents": [-3, 0]}}}}},
        ],
        // Strings equal under the collation never split between buckets.
        vec![doc! {"$bucketAuto": {"groupBy": "$s", "buckets": 3,
        "output": {"ids": {"$push": "$_id"}, "set": {"$addToSet": "$s"}}}}],
    ];
    let collation = doc! {"collation": {"locale": "en", "strength": 1}};
    for (i, pipeline) in pipelines.into_iter().enumerate() {
        let options = if i == 3 {
            collation.clone()
        } else {
            doc! {}
        };
        let memory = aggregate(&s.default, &pipeline, options.clone()).await?;
        let spilled = aggregate(&s.lowered, &pipeline, options.clone()).await?;
        assert!(!memory.is_empty());
        assert_eq!(memory, spilled, "{pipeline:?}");
        if i == 3 {
            // a/A, b/B and é/E/e are one value each under the collation: `$addToSet` keeps
            // one of each, and no value is split between buckets.
            let folded: Vec<std::collections::BTreeSet<String>> = memory
                .iter()
                .map(|b| {
                    b.get_array("set")
                        .map(|set| {
                            set.iter()
                                .filter_map(Bson::as_str)
                                .map(|w| w.to_lowercase().replace('é', "e"))
                                .collect()
                        })
                        .unwrap_or_default()
                })
                .collect();
            let all: Vec<&String> = folded.iter().flatten().collect();
            assert_eq!(all, ["a", "b", "e"], "{folded:?}");
        }
        let mut no_disk = options;
        no_disk.insert("allowDiskUse", false);
        let err = aggregate(&s.lowered, &pipeline, no_disk).await.unwrap_err();
        let err = command_error(&err).expect("a command error").clone();
        assert_command_error(&err, 292, "QueryExceededMemoryLimitNoDiskUseAllowed");
    }
    // The same limit answered through a plain command too.
    let err = run_command_err(
        &s.lowered,
        "db",
        doc! {"aggregate": "c", "pipeline": [{"$bucketAuto": {"groupBy": "$k", "buckets": 3}}],
        "cursor": {}, "allowDiskUse": false},
    )
    .await?;
    assert_command_error(&err, 292, "QueryExceededMemoryLimitNoDiskUseAllowed");
    Ok(())
}

/// A durable server spills into `<dbpath>/_tmp`, and its run files are unnamed: nothing is
/// left there after a spilled `$group`.
#[tokio::test]
async fn group_spill_files_leave_nothing_behind() -> TestResult {
    let dir = tempfile::tempdir()?;
    let server =
        TestServer::start_durable(dir.path(), |c| c.max_blocking_sort_bytes = LIMIT).await?;
    let client = server.client().await?;
    let coll = client.database("db").collection::<Document>("c");
    coll.insert_many(documents()).await?;
    let out = aggregate(
        &client,
        &[doc! {"$group": {"_id": "$k", "ids": {"$push": "$_id"}}}],
        doc! {},
    )
    .await?;
    assert!(out.len() > 300);
    let tmp = dir.path().join("_tmp");
    assert!(tmp.is_dir(), "the $group spilled into {}", tmp.display());
    assert_eq!(std::fs::read_dir(&tmp)?.count(), 0);
    Ok(())
}
