//! `$setWindowFields` through the `mongodb` driver against an in-process server: the manual's
//! examples, mongod's parse and run-time errors, and the memory limit without `allowDiskUse`.

mod common;

use common::{TestResult, TestServer, assert_command_error, drain, run_command_err};
use mongodb::bson::{Bson, DateTime, Document, doc};
use mongodb::{Client, Collection};

const DB: &str = "window";

async fn start() -> TestResult<(TestServer, Client)> {
    let server = TestServer::start().await?;
    let client = server.client().await?;
    Ok((server, client))
}

async fn run(c: &Collection<Document>, pipeline: Vec<Document>) -> TestResult<Vec<Document>> {
    drain(c.aggregate(pipeline).await?).await
}

fn date(s: &str) -> Bson {
    Bson::DateTime(DateTime::parse_rfc3339_str(s).expect("a test date"))
}

/// The manual's `cakeSales` collection.
async fn cakes(client: &Client) -> TestResult<Collection<Document>> {
    let c = client.database(DB).collection("cakeSales");
    c.insert_many(vec![
        doc! {"_id": 0, "type": "chocolate", "orderDate": date("2020-05-18T14:10:30Z"), "state": "CA", "price": 13, "quantity": 120},
        doc! {"_id": 1, "type": "chocolate", "orderDate": date("2021-03-20T11:30:05Z"), "state": "WA", "price": 14, "quantity": 140},
        doc! {"_id": 2, "type": "vanilla", "orderDate": date("2021-01-11T06:31:15Z"), "state": "CA", "price": 12, "quantity": 145},
        doc! {"_id": 3, "type": "vanilla", "orderDate": date("2020-02-08T13:13:23Z"), "state": "WA", "price": 13, "quantity": 104},
        doc! {"_id": 4, "type": "strawberry", "orderDate": date("2019-05-18T16:09:01Z"), "state": "CA", "price": 41, "quantity": 162},
        doc! {"_id": 5, "type": "strawberry", "orderDate": date("2019-01-08T06:12:03Z"), "state": "WA", "price": 43, "quantity": 134},
    ])
    .await?;
    Ok(c)
}

fn pairs(out: &[Document], field: &str) -> Vec<(i32, Bson)> {
    out.iter()
        .map(|d| {
            (
                d.get_i32("_id").expect("an int _id"),
                d.get(field).cloned().expect("the output field"),
            )
        })
        .collect()
}

#[tokio::test]
async fn cumulative_quantity_after_a_match_and_ranks() -> TestResult {
    let (_server, client) = start().await?;
    let c = cakes(&client).await?;
    let out = run(
        &c,
        vec![
            doc! {"$match": {"quantity": {"$gt": 100}}},
            doc! {"$setWindowFields": {
            "partitionBy": "$state", "sortBy": {"orderDate": 1},
            "output": {
                "cumulative": {"$sum": "$quantity",
                    "window": {"documents": ["unbounded", "current"]}},
                "n": {"$documentNumber": {}},
            }}},
        ],
    )
    .await?;
    assert_eq!(
        pairs(&out, "cumulative"),
        vec![
            (4, Bson::Int32(162)),
            (0, Bson::Int32(282)),
            (2, Bson::Int32(427)),
            (5, Bson::Int32(134)),
            (3, Bson::Int32(238)),
            (1, Bson::Int32(378)),
        ]
    );
    assert_eq!(
        pairs(&out, "n")
            .into_iter()
            .map(|(_, v)| v)
            .collect::<Vec<_>>(),
        vec![
            Bson::Int32(1),
            2.into(),
            3.into(),
            1.into(),
            2.into(),
            3.into()
        ]
    );
    // The whole document is kept, the output appended.
    assert_eq!(
        out[0],
        doc! {"_id": 4, "type": "strawberry", "orderDate": date("2019-05-18T16:09:01Z"),
        "state": "CA", "price": 41, "quantity": 162, "cumulative": 162, "n": 1}
    );
    Ok(())
}

#[tokio::test]
async fn parse_errors_answer_mongods_codes() -> TestResult {
    let (_server, client) = start().await?;
    cakes(&client).await?;
    let cases = [
        (doc! {"output": {"a": {"$summ": 1}}}, 9, "FailedToParse"),
        (doc! {"output": {}, "bogus": 1}, 40415, "IDLUnknownField"),
        (doc! {"sortBy": {"x": 1}}, 40414, "IDLFailedToParse"),
        (
            doc! {"output": {"a": {"$sum": 1, "window": {"documents": [-1, 0]}}}},
            5_339_901,
            "Location5339901",
        ),
        (
            doc! {"output": {"r": {"$rank": {}}}},
            5_371_602,
            "Location5371602",
        ),
    ];
    for (spec, code, name) in cases {
        let err = run_command_err(
            &client,
            DB,
            doc! {"aggregate": "cakeSales", "pipeline": [{"$setWindowFields": spec}], "cursor": {}},
        )
        .await?;
        assert_command_error(&err, code, name);
    }
    Ok(())
}

#[tokio::test]
async fn run_time_errors_carry_the_aggregation_prefix() -> TestResult {
    let (_server, client) = start().await?;
    cakes(&client).await?;
    let err = run_command_err(
        &client,
        DB,
        doc! {"aggregate": "cakeSales", "pipeline": [{"$setWindowFields": {
        "sortBy": {"type": 1},
        "output": {"s": {"$sum": 1, "window": {"range": [-1, 1]}}}}}], "cursor": {}},
    )
    .await?;
    assert_command_error(&err, 5_429_414, "Location5429414");
    assert!(
        err.message.starts_with(
            "PlanExecutor error during aggregation :: caused by :: Invalid range: Expected the \
             sortBy field to be a number, but it was string"
        ),
        "{}",
        err.message
    );
    Ok(())
}

#[tokio::test]
async fn past_the_memory_limit_needs_disk_use() -> TestResult {
    let server = TestServer::start_with(|c| c.max_blocking_sort_bytes = 20_000).await?;
    let client = server.client().await?;
    let c: Collection<Document> = client.database(DB).collection("big");
    c.insert_many(
        (0..500)
            .map(|i| doc! {"_id": i, "pad": "x".repeat(100)})
            .collect::<Vec<_>>(),
    )
    .await?;
    let pipeline = vec![doc! {"$setWindowFields": {"sortBy": {"_id": 1},
    "output": {"n": {"$documentNumber": {}}}}}];
    let err = run_command_err(
        &client,
        DB,
        doc! {"aggregate": "big", "pipeline": pipeline.clone(), "cursor": {}, "allowDiskUse": false},
    )
    .await?;
    assert_command_error(&err, 292, "QueryExceededMemoryLimitNoDiskUseAllowed");
    let out = run(&c, pipeline).await?;
    assert_eq!(out.len(), 500);
    assert_eq!(out[499].get_i32("n")?, 500);
    Ok(())
}
