//! `$graphLookup`, `$densify` and `$fill` through the `mongodb` driver against an in-process
//! server: the manual's examples and mongod's errors.

mod common;

use common::{TestResult, TestServer, assert_command_error, drain, run_command_err};
use mongodb::bson::{Document, doc};
use mongodb::{Client, Collection, IndexModel};

const DB: &str = "densify";

fn coll(client: &Client, name: &str) -> Collection<Document> {
    client.database(DB).collection(name)
}

async fn run(c: &Collection<Document>, pipeline: Vec<Document>) -> TestResult<Vec<Document>> {
    drain(c.aggregate(pipeline).await?).await
}

#[tokio::test]
async fn graph_lookup_reporting_hierarchy() -> TestResult {
    let server = TestServer::start().await?;
    let client = server.client().await?;
    let employees = coll(&client, "employees");
    employees
        .insert_many(vec![
            doc! {"_id": 1, "name": "Dev"},
            doc! {"_id": 2, "name": "Eliot", "reportsTo": "Dev"},
            doc! {"_id": 3, "name": "Ron", "reportsTo": "Eliot"},
            doc! {"_id": 4, "name": "Andrew", "reportsTo": "Eliot"},
            doc! {"_id": 5, "name": "Asya", "reportsTo": "Ron"},
            doc! {"_id": 6, "name": "Dan", "reportsTo": "Andrew"},
        ])
        .await?;
    employees
        .create_index(IndexModel::builder().keys(doc! {"name": 1}).build())
        .await?;
    let out = run(
        &employees,
        vec![
            doc! {"$match": {"_id": {"$in": [1, 5]}}},
            doc! {"$graphLookup": {"from": "employees", "startWith": "$reportsTo",
            "connectFromField": "reportsTo", "connectToField": "name", "as": "chain",
            "depthField": "level"}},
            doc! {"$set": {"chain": {"$sortArray": {"input": "$chain", "sortBy": {"_id": 1}}}}},
            doc! {"$project": {"ids": "$chain._id", "levels": "$chain.level"}},
        ],
    )
    .await?;
    assert_eq!(
        out,
        vec![
            doc! {"_id": 1, "ids": [], "levels": []},
            doc! {"_id": 5, "ids": [1, 2, 3], "levels": [2_i64, 1_i64, 0_i64]},
        ]
    );
    // maxDepth 0 stops at the direct manager.
    let out = run(
        &employees,
        vec![
            doc! {"$match": {"_id": 5}},
            doc! {"$graphLookup": {"from": "employees", "startWith": "$reportsTo",
            "connectFromField": "reportsTo", "connectToField": "name", "as": "chain",
            "maxDepth": 0}},
            doc! {"$project": {"ids": "$chain._id"}},
        ],
    )
    .await?;
    assert_eq!(out, vec![doc! {"_id": 5, "ids": [3]}]);
    let err = run_command_err(
        &client,
        DB,
        doc! {"aggregate": "employees", "cursor": {}, "pipeline": [
        {"$graphLookup": {"from": "x", "as": "y"}}]},
    )
    .await?;
    assert_command_error(&err, 40105, "Location40105");
    let err = run_command_err(
        &client,
        DB,
        doc! {"aggregate": "employees", "cursor": {}, "pipeline": [
        {"$graphLookup": {"from": "employees", "startWith": 1, "connectFromField": "a",
            "connectToField": "b", "as": "c", "maxDepth": -1}}]},
    )
    .await?;
    assert_command_error(&err, 40101, "Location40101");
    Ok(())
}
