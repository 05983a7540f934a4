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

#[tokio::test]
async fn fill_locf_linear_and_value() -> TestResult {
    let server = TestServer::start().await?;
    let client = server.client().await?;
    let stock = coll(&client, "stock");
    let hour = |h: i64| mongodb::bson::DateTime::from_millis(1_615_194_000_000 + h * 3_600_000);
    stock
        .insert_many(vec![
            doc! {"_id": 1, "time": hour(0), "price": 500, "r": "a"},
            doc! {"_id": 2, "time": hour(1)},
            doc! {"_id": 3, "time": hour(2), "price": 515},
            doc! {"_id": 4, "time": hour(3)},
            doc! {"_id": 5, "time": hour(4)},
            doc! {"_id": 6, "time": hour(5), "price": 485},
        ])
        .await?;
    let out = run(
        &stock,
        vec![
            doc! {"$fill": {"sortBy": {"time": 1},
            "output": {"price": {"method": "linear"}, "r": {"value": "z"}}}},
            doc! {"$project": {"price": 1, "r": 1}},
        ],
    )
    .await?;
    assert_eq!(
        out,
        vec![
            doc! {"_id": 1, "price": 500, "r": "a"},
            doc! {"_id": 2, "price": 507.5, "r": "z"},
            doc! {"_id": 3, "price": 515, "r": "z"},
            doc! {"_id": 4, "price": 505.0, "r": "z"},
            doc! {"_id": 5, "price": 495.0, "r": "z"},
            doc! {"_id": 6, "price": 485, "r": "z"},
        ]
    );
    let out = run(
        &stock,
        vec![
            doc! {"$fill": {"sortBy": {"time": -1}, "output": {"price": {"method": "locf"}}}},
            doc! {"$project": {"price": 1}},
        ],
    )
    .await?;
    let prices: Vec<i32> = out
        .iter()
        .map(|d| d.get_i32("price"))
        .collect::<Result<_, _>>()?;
    assert_eq!(prices, vec![485, 485, 485, 515, 515, 500]);
    let err = run_command_err(
        &client,
        DB,
        doc! {"aggregate": "stock", "cursor": {}, "pipeline": [
        {"$fill": {"output": {"price": {"method": "linear"}}}}]},
    )
    .await?;
    assert_command_error(&err, 605_001, "Location605001");
    Ok(())
}

#[tokio::test]
async fn densify_numbers_dates_and_partitions() -> TestResult {
    let server = TestServer::start().await?;
    let client = server.client().await?;
    let coffee = coll(&client, "coffee");
    coffee
        .insert_many(vec![
            doc! {"_id": 1, "altitude": 600, "variety": "Arabica Typica"},
            doc! {"_id": 2, "altitude": 750, "variety": "Arabica Typica"},
            doc! {"_id": 3, "altitude": 950, "variety": "Arabica Typica"},
            doc! {"_id": 4, "altitude": 1250, "variety": "Gesha"},
            doc! {"_id": 5, "altitude": 1700, "variety": "Gesha"},
        ])
        .await?;
    let out = run(
        &coffee,
        vec![
            doc! {"$densify": {"field": "altitude", "partitionByFields": ["variety"],
            "range": {"bounds": "partition", "step": 200}}},
            doc! {"$project": {"_id": 0, "altitude": 1, "variety": 1}},
        ],
    )
    .await?;
    let a = "Arabica Typica";
    assert_eq!(
        out,
        vec![
            doc! {"altitude": 600, "variety": a},
            doc! {"altitude": 750, "variety": a},
            doc! {"variety": a, "altitude": 800},
            doc! {"altitude": 950, "variety": a},
            doc! {"altitude": 1250, "variety": "Gesha"},
            doc! {"variety": "Gesha", "altitude": 1450},
            doc! {"variety": "Gesha", "altitude": 1650},
            doc! {"altitude": 1700, "variety": "Gesha"},
        ]
    );
    let weather = coll(&client, "weather");
    let h = |n: i64| mongodb::bson::DateTime::from_millis(1_621_296_000_000 + n * 3_600_000);
    weather
        .insert_many(vec![doc! {"_id": 1, "t": h(0)}, doc! {"_id": 2, "t": h(4)}])
        .await?;
    let out = run(
        &weather,
        vec![
            doc! {"$densify": {"field": "t",
            "range": {"step": 1, "unit": "hour", "bounds": [h(0), h(6)]}}},
            doc! {"$project": {"_id": 1, "t": 1}},
        ],
    )
    .await?;
    assert_eq!(
        out,
        vec![
            doc! {"_id": 1, "t": h(0)},
            doc! {"t": h(1)},
            doc! {"t": h(2)},
            doc! {"t": h(3)},
            doc! {"_id": 2, "t": h(4)},
            doc! {"t": h(5)},
        ]
    );
    let err = run_command_err(
        &client,
        DB,
        doc! {"aggregate": "coffee", "cursor": {}, "pipeline": [
        {"$densify": {"field": "altitude", "range": {"bounds": "partition", "step": 1}}}]},
    )
    .await?;
    assert_command_error(&err, 5_733_408, "Location5733408");
    let err = run_command_err(
        &client,
        DB,
        doc! {"aggregate": "coffee", "cursor": {}, "pipeline": [
        {"$densify": {"field": "variety", "range": {"bounds": "full", "step": 1}}}]},
    )
    .await?;
    assert_command_error(&err, 5_733_201, "Location5733201");
    assert_eq!(
        err.message,
        "PlanExecutor error during aggregation :: caused by :: Densify field type must be \
         numeric or a date"
    );
    Ok(())
}
