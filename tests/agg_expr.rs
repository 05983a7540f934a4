//! The expression operators of the arithmetic, conditional, type-conversion and string families
//! through the `mongodb` driver against an in-process server: in `aggregate` `$project` and
//! `$addFields`, and in `find` with `$expr`, with MongoDB 7.0's results and error codes.

mod common;

use common::{TestResult, TestServer, assert_command_error, drain, run_command_err};
use mongodb::bson::{Bson, Document, doc};
use mongodb::{Client, Collection};

const DB: &str = "aggexpr";

async fn seeded() -> TestResult<(TestServer, Client, Collection<Document>)> {
    let server = TestServer::start().await?;
    let client = server.client().await?;
    let coll: Collection<Document> = client.database(DB).collection("items");
    coll.insert_many(vec![
        doc! { "_id": 1, "name": "  Blue Paint ", "price": "12.50", "qty": 7, "v": 19.25, "code": "AB-12" },
        doc! { "_id": 2, "name": "red chair", "price": "80", "qty": 0, "v": -45.39, "code": "CD-7" },
        doc! { "_id": 3, "name": "Green Lamp", "price": "n/a", "qty": 3, "v": 2.5, "code": "x" },
    ])
    .await?;
    Ok((server, client, coll))
}

#[tokio::test]
async fn project_uses_the_new_operators() -> TestResult {
    let (_server, _client, coll) = seeded().await?;
    let pipeline = vec![
        doc! { "$project": {
            "name": { "$trim": { "input": "$name" } },
            "upper": { "$toUpper": { "$trim": { "input": "$name" } } },
            "price": { "$convert": { "input": "$price", "to": "double", "onError": -1 } },
            "round": { "$round": ["$v", 1] },
            "tens": { "$round": ["$v", -1] },
            "sqrt": { "$sqrt": "$qty" },
            "pow": { "$pow": ["$qty", 2] },
            "parts": { "$split": ["$code", "-"] },
            "qtyText": { "$toString": "$qty" },
        } },
        doc! { "$sort": { "_id": 1 } },
    ];
    let got = drain(coll.aggregate(pipeline).await?).await?;
    assert_eq!(
        got,
        vec![
            doc! {
                "_id": 1, "name": "Blue Paint", "upper": "BLUE PAINT", "price": 12.5,
                "round": 19.2, "tens": 20.0, "sqrt": 7f64.sqrt(), "pow": 49,
                "parts": ["AB", "12"], "qtyText": "7",
            },
            doc! {
                "_id": 2, "name": "red chair", "upper": "RED CHAIR", "price": 80.0,
                "round": -45.4, "tens": -50.0, "sqrt": 0.0, "pow": 0,
                "parts": ["CD", "7"], "qtyText": "0",
            },
            doc! {
                "_id": 3, "name": "Green Lamp", "upper": "GREEN LAMP", "price": -1,
                "round": 2.5, "tens": 0.0, "sqrt": 3f64.sqrt(), "pow": 9,
                "parts": ["x"], "qtyText": "3",
            },
        ]
    );
    Ok(())
}

#[tokio::test]
async fn add_fields_with_switch_and_regex() -> TestResult {
    let (_server, _client, coll) = seeded().await?;
    let pipeline = vec![
        doc! { "$addFields": {
            "stock": { "$switch": {
                "branches": [
                    { "case": { "$eq": ["$qty", 0] }, "then": "out" },
                    { "case": { "$lt": ["$qty", 5] }, "then": "low" },
                ],
                "default": "ok",
            } },
            "digits": { "$regexFind": { "input": "$code", "regex": "([A-Z]+)-(\\d+)" } },
            "vowels": { "$size": { "$regexFindAll": { "input": "$name", "regex": "[aeiou]", "options": "i" } } },
            "pos": { "$indexOfCP": ["$name", "a"] },
        } },
        doc! { "$project": { "stock": 1, "digits": 1, "vowels": 1, "pos": 1 } },
        doc! { "$sort": { "_id": 1 } },
    ];
    let got = drain(coll.aggregate(pipeline).await?).await?;
    assert_eq!(
        got,
        vec![
            doc! {
                "_id": 1, "stock": "ok",
                "digits": { "match": "AB-12", "idx": 0, "captures": ["AB", "12"] },
                "vowels": 4, "pos": 8,
            },
            doc! {
                "_id": 2, "stock": "out",
                "digits": { "match": "CD-7", "idx": 0, "captures": ["CD", "7"] },
                "vowels": 3, "pos": 6,
            },
            doc! { "_id": 3, "stock": "low", "digits": Bson::Null, "vowels": 3, "pos": 7 },
        ]
    );
    Ok(())
}

#[tokio::test]
async fn find_with_expr_uses_the_new_operators() -> TestResult {
    let (_server, _client, coll) = seeded().await?;
    let ids = |docs: Vec<Document>| -> Vec<i32> {
        docs.iter().filter_map(|d| d.get_i32("_id").ok()).collect()
    };
    let filter = doc! { "$expr": { "$regexMatch": { "input": "$name", "regex": "^\\s*[bg]", "options": "i" } } };
    let got = drain(coll.find(filter).sort(doc! { "_id": 1 }).await?).await?;
    assert_eq!(ids(got), vec![1, 3]);
    let filter = doc! { "$expr": { "$gt": [
        { "$convert": { "input": "$price", "to": "double", "onError": 0 } },
        { "$multiply": ["$qty", 1.5] },
    ] } };
    let got = drain(coll.find(filter).sort(doc! { "_id": 1 }).await?).await?;
    assert_eq!(ids(got), vec![1, 2]);
    let filter = doc! { "$expr": { "$eq": [{ "$strLenBytes": { "$replaceAll": {
    "input": "$code", "find": "-", "replacement": "" } } }, 3] } };
    let got = drain(coll.find(filter).await?).await?;
    assert_eq!(ids(got), vec![2]);
    Ok(())
}

#[tokio::test]
async fn conversion_and_switch_errors_reach_the_client() -> TestResult {
    let (_server, client, _coll) = seeded().await?;
    let err = run_command_err(
        &client,
        DB,
        doc! { "aggregate": "items", "pipeline": [
            { "$project": { "p": { "$toDouble": "$price" } } },
        ], "cursor": {} },
    )
    .await?;
    assert_command_error(&err, 241, "ConversionFailure");
    assert!(
        err.message
            .contains("Failed to parse number 'n/a' in $convert with no onError value"),
        "{}",
        err.message
    );
    let err = run_command_err(
        &client,
        DB,
        doc! { "aggregate": "items", "pipeline": [
            { "$project": { "s": { "$switch": { "branches": [
                { "case": { "$gt": ["$qty", 100] }, "then": 1 },
            ] } } } },
        ], "cursor": {} },
    )
    .await?;
    assert_command_error(&err, 40066, "Location40066");
    let err = run_command_err(
        &client,
        DB,
        doc! { "find": "items", "filter": { "$expr": { "$sqrt": -1 } } },
    )
    .await?;
    assert_command_error(&err, 28714, "Location28714");
    Ok(())
}
