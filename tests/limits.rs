//! mongod's limits through the `mongodb` driver: the blocking-sort memory limit
//! (`internalQueryMaxBlockingSortMemoryUsageBytes`, lowered here so that small collections pass
//! it) for `find` and aggregate `$sort`, with and without `allowDiskUse`, and the regex pattern
//! length.

mod common;

use common::{
    TestResult, TestServer, assert_command_error, drain, integer, run_command, run_command_err,
};
use mongodb::Client;
use mongodb::bson::{Document, doc};

/// The sort limit the servers here run with: about 60 of the documents below.
const LIMIT: usize = 20_000;
const DOCS: i32 = 2_000;

/// Documents with many ties on `k` (`_id` breaks them in insertion order).
fn documents() -> Vec<Document> {
    (0..DOCS)
        .map(|i| doc! { "_id": i, "k": (i * 7919) % 37, "pad": "x".repeat(200) })
        .collect()
}

/// The `_id`s in the order `{k: 1, _id: 1}` gives.
fn expected() -> Vec<i32> {
    let mut ids: Vec<(i32, i32)> = (0..DOCS).map(|i| ((i * 7919) % 37, i)).collect();
    ids.sort_unstable();
    ids.into_iter().map(|(_, i)| i).collect()
}

fn ids(docs: &[Document]) -> TestResult<Vec<i32>> {
    Ok(docs
        .iter()
        .map(|d| d.get_i32("_id"))
        .collect::<Result<_, _>>()?)
}

async fn start_with_data(server: TestServer) -> TestResult<(TestServer, Client)> {
    let client = server.client().await?;
    let coll = client.database("db").collection::<Document>("c");
    coll.insert_many(documents()).await?;
    Ok((server, client))
}

async fn start() -> TestResult<(TestServer, Client)> {
    start_with_data(TestServer::start_with(|c| c.max_blocking_sort_bytes = LIMIT).await?).await
}

#[tokio::test]
async fn find_sort_over_the_limit_without_disk_use_is_292() -> TestResult {
    let (_server, client) = start().await?;
    let err = run_command_err(
        &client,
        "db",
        doc! { "find": "c", "sort": { "k": 1 }, "allowDiskUse": false },
    )
    .await?;
    assert_command_error(&err, 292, "QueryExceededMemoryLimitNoDiskUseAllowed");
    assert_eq!(
        err.message,
        format!(
            "Executor error during find command :: caused by :: Sort exceeded memory limit of \
             {LIMIT} bytes, but did not opt in to external sorting."
        )
    );
    // A sort with a limit holds only that many documents.
    let reply = run_command(
        &client,
        "db",
        doc! { "find": "c", "sort": { "k": 1 }, "limit": 10, "allowDiskUse": false },
    )
    .await?;
    let batch = reply.get_document("cursor")?.get_array("firstBatch")?;
    let got: Vec<i32> = batch
        .iter()
        .filter_map(|d| d.as_document().and_then(|d| d.get_i32("_id").ok()))
        .collect();
    assert_eq!(got, expected()[..10]);
    Ok(())
}

#[tokio::test]
async fn find_sort_over_the_limit_spills_and_keeps_the_order() -> TestResult {
    let (_server, client) = start().await?;
    let coll = client.database("db").collection::<Document>("c");
    // By default (allowDiskUse true), read back in small batches through getMore.
    let all = drain(
        coll.find(doc! {})
            .sort(doc! { "k": 1 })
            .batch_size(150)
            .await?,
    )
    .await?;
    assert_eq!(ids(&all)?, expected());
    let explicit = drain(
        coll.find(doc! {})
            .sort(doc! { "k": 1 })
            .allow_disk_use(true)
            .await?,
    )
    .await?;
    assert_eq!(ids(&explicit)?, expected());
    // Descending, with a filter, skip, limit and projection.
    let want: Vec<i32> = {
        let mut v: Vec<(i32, i32)> = (0..DOCS)
            .filter(|i| i % 2 == 0)
            .map(|i| ((i * 7919) % 37, i))
            .collect();
        // Descending on k; ties keep the scan (`_id`) order.
        v.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        v.into_iter().map(|(_, i)| i).skip(100).take(700).collect()
    };
    let some = drain(
        coll.find(doc! { "_id": { "$mod": [2, 0] } })
            .sort(doc! { "k": -1 })
            .skip(100)
            .limit(700)
            .projection(doc! { "pad": 0 })
            .batch_size(64)
            .await?,
    )
    .await?;
    assert_eq!(ids(&some)?, want);
    assert!(some.iter().all(|d| !d.contains_key("pad")));
    Ok(())
}

#[tokio::test]
async fn aggregate_sort_follows_the_limit() -> TestResult {
    let (_server, client) = start().await?;
    let err = run_command_err(
        &client,
        "db",
        doc! {
            "aggregate": "c",
            "pipeline": [{ "$sort": { "k": 1 } }],
            "cursor": {},
            "allowDiskUse": false,
        },
    )
    .await?;
    assert_command_error(&err, 292, "QueryExceededMemoryLimitNoDiskUseAllowed");
    assert_eq!(
        err.message,
        format!(
            "PlanExecutor error during aggregation :: caused by :: Sort exceeded memory limit \
             of {LIMIT} bytes, but did not opt in to external sorting."
        )
    );
    let coll = client.database("db").collection::<Document>("c");
    let all = drain(
        coll.aggregate([doc! { "$sort": { "k": 1 } }])
            .batch_size(500)
            .await?,
    )
    .await?;
    assert_eq!(ids(&all)?, expected());
    // $sort then $limit is a top-k sort, within the limit.
    let top = drain(
        coll.aggregate([doc! { "$sort": { "k": 1 } }, doc! { "$limit": 5 }])
            .allow_disk_use(false)
            .await?,
    )
    .await?;
    assert_eq!(ids(&top)?, expected()[..5]);
    // Stages after the sort see the merged order.
    let projected = drain(
        coll.aggregate([
            doc! { "$match": { "_id": { "$gte": 0 } } },
            doc! { "$sort": { "k": 1 } },
            doc! { "$project": { "pad": 0 } },
        ])
        .await?,
    )
    .await?;
    assert_eq!(ids(&projected)?, expected());
    assert!(projected.iter().all(|d| !d.contains_key("pad")));
    Ok(())
}

/// The first value of `key` anywhere in `doc`.
fn find_key<'a>(doc: &'a Document, key: &str) -> Option<&'a mongodb::bson::Bson> {
    use mongodb::bson::Bson;
    fn walk<'a>(v: &'a Bson, key: &str) -> Option<&'a Bson> {
        match v {
            Bson::Document(d) => find_key(d, key),
            Bson::Array(a) => a.iter().find_map(|v| walk(v, key)),
            _ => None,
        }
    }
    doc.get(key)
        .or_else(|| doc.values().find_map(|v| walk(v, key)))
}

#[tokio::test]
async fn the_limit_is_reported_by_get_parameter_and_explain() -> TestResult {
    let (_server, client) = start().await?;
    let explained = run_command(
        &client,
        "db",
        doc! { "explain": { "find": "c", "sort": { "k": 1 } }, "verbosity": "queryPlanner" },
    )
    .await?;
    assert_eq!(
        integer(find_key(&explained, "memLimit")),
        Some(i64::try_from(LIMIT)?),
        "{explained}"
    );
    let reply = run_command(
        &client,
        "admin",
        doc! { "getParameter": 1, "internalQueryMaxBlockingSortMemoryUsageBytes": 1 },
    )
    .await?;
    assert_eq!(
        reply.get_i32("internalQueryMaxBlockingSortMemoryUsageBytes")?,
        i32::try_from(LIMIT)?
    );
    let server = TestServer::start().await?;
    let reply = run_command(
        &server.client().await?,
        "admin",
        doc! { "getParameter": 1, "internalQueryMaxBlockingSortMemoryUsageBytes": 1 },
    )
    .await?;
    assert_eq!(
        integer(reply.get("internalQueryMaxBlockingSortMemoryUsageBytes")),
        Some(104_857_600)
    );
    Ok(())
}

/// A durable server spills into `<data dir>/_tmp`, and leaves nothing there: not while a
/// cursor reads the runs, nor once it is killed.
#[tokio::test]
async fn spill_files_leave_nothing_behind() -> TestResult {
    let dir = tempfile::tempdir()?;
    let server =
        TestServer::start_durable(dir.path(), |c| c.max_blocking_sort_bytes = LIMIT).await?;
    let (_server, client) = start_with_data(server).await?;
    let coll = client.database("db").collection::<Document>("c");
    let mut cursor = coll
        .find(doc! {})
        .sort(doc! { "k": 1 })
        .batch_size(10)
        .await?;
    assert!(cursor.advance().await?);
    let tmp = dir.path().join("_tmp");
    assert!(tmp.is_dir(), "the sort spilled into {}", tmp.display());
    assert_eq!(std::fs::read_dir(&tmp)?.count(), 0);
    drop(cursor);
    assert_eq!(std::fs::read_dir(&tmp)?.count(), 0);
    // An aggregate $sort spills there too.
    std::fs::remove_dir(&tmp)?;
    let mut cursor = coll
        .aggregate([doc! { "$sort": { "k": -1 } }])
        .batch_size(10)
        .await?;
    assert!(cursor.advance().await?);
    assert!(tmp.is_dir(), "the $sort spilled into {}", tmp.display());
    assert_eq!(std::fs::read_dir(&tmp)?.count(), 0);
    Ok(())
}

#[tokio::test]
async fn regex_patterns_over_16384_bytes_are_refused() -> TestResult {
    let (_server, client) = start().await?;
    for filter in [
        doc! { "pad": { "$regex": "x".repeat(16_385) } },
        doc! { "pad": { "$in": [mongodb::bson::Regex {
            pattern: "x".repeat(20_000).try_into()?,
            options: "".try_into()?,
        }] } },
    ] {
        let err = run_command_err(&client, "db", doc! { "find": "c", "filter": filter }).await?;
        assert_command_error(&err, 51091, "Location51091");
        assert_eq!(
            err.message,
            "Regular expression is invalid: pattern string is longer than the limit set by the \
             application"
        );
    }
    let ok = run_command(
        &client,
        "db",
        doc! { "count": "c", "query": { "pad": { "$regex": "x".repeat(16_384) } } },
    )
    .await?;
    assert_eq!(integer(ok.get("n")), Some(0));
    Ok(())
}
