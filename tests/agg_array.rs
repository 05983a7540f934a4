//! The array, set and object expression operators through the `mongodb` driver against an
//! in-process server: in `aggregate`'s `$project` and in `find` with `$expr`, with mongod's
//! results and error codes.

mod common;

use common::{TestResult, TestServer, assert_command_error, drain};
use mongodb::bson::{Document, doc};
use mongodb::error::ErrorKind;
use mongodb::{Client, Collection};

async fn start() -> TestResult<(TestServer, Client, Collection<Document>)> {
    let server = TestServer::start().await?;
    let client = server.client().await?;
    let coll = client.database("agg_array").collection("c");
    coll.insert_many([
        doc! { "_id": 1, "a": [1, 2, 3], "tags": ["x", "y"], "o": {"k": 1} },
        doc! { "_id": 2, "a": [5, 1], "tags": ["y", "z", "y"], "o": {"k": 2, "m": 3} },
        doc! { "_id": 3, "a": [], "tags": [] },
    ])
    .await?;
    Ok((server, client, coll))
}

async fn project(coll: &Collection<Document>, spec: Document) -> TestResult<Vec<Document>> {
    let pipeline = [doc! { "$sort": { "_id": 1 } }, doc! { "$project": spec }];
    drain(coll.aggregate(pipeline).await?).await
}

#[tokio::test]
async fn array_operators_in_project() -> TestResult {
    let (_server, _client, coll) = start().await?;
    let got = project(
        &coll,
        doc! {
            "_id": 0,
            "doubled": { "$map": { "input": "$a", "as": "x", "in": { "$multiply": ["$$x", 2] } } },
            "big": { "$filter": { "input": "$a", "cond": { "$gt": ["$$this", 1] }, "limit": 1 } },
            "sum": { "$reduce": { "input": "$a", "initialValue": 0, "in": { "$add": ["$$value", "$$this"] } } },
            "pairs": { "$zip": { "inputs": ["$a", "$tags"], "useLongestLength": true } },
            "sorted": { "$sortArray": { "input": "$a", "sortBy": -1 } },
            "tagSet": { "$setUnion": ["$tags", []] },
            "last": { "$last": "$a" },
            "fields": { "$objectToArray": "$o" },
        },
    )
    .await?;
    assert_eq!(
        got,
        vec![
            doc! {
                "doubled": [2, 4, 6], "big": [2], "sum": 6,
                "pairs": [[1, "x"], [2, "y"], [3, null]], "sorted": [3, 2, 1],
                "tagSet": ["x", "y"], "last": 3, "fields": [{"k": "k", "v": 1}],
            },
            doc! {
                "doubled": [10, 2], "big": [5], "sum": 6,
                "pairs": [[5, "y"], [1, "z"], [null, "y"]], "sorted": [5, 1],
                "tagSet": ["y", "z"], "last": 1,
                "fields": [{"k": "k", "v": 2}, {"k": "m", "v": 3}],
            },
            // `$last` of an empty array is missing; `$objectToArray` of a missing field is null.
            doc! {
                "doubled": [], "big": [], "sum": 0, "pairs": [], "sorted": [],
                "tagSet": [], "fields": null,
            },
        ]
    );
    Ok(())
}

#[tokio::test]
async fn array_operators_in_find_expr() -> TestResult {
    let (_server, _client, coll) = start().await?;
    let ids = |docs: Vec<Document>| -> Vec<i32> {
        docs.iter().filter_map(|d| d.get_i32("_id").ok()).collect()
    };
    let found = drain(
        coll.find(
            doc! { "$expr": { "$in": ["y", { "$setIntersection": ["$tags", ["y", "q"]] }] } },
        )
        .sort(doc! { "_id": 1 })
        .await?,
    )
    .await?;
    assert_eq!(ids(found), vec![1, 2]);
    let found = drain(
        coll.find(doc! { "$expr": { "$anyElementTrue": [{ "$map": { "input": "$a", "in": { "$gte": ["$$this", 5] } } }] } })
            .await?,
    )
    .await?;
    assert_eq!(ids(found), vec![2]);
    // `$size` of a document is an error, whatever the document.
    let filter =
        doc! { "$expr": { "$eq": [{ "$size": { "$mergeObjects": ["$o", { "n": 0 }] } }, 0] } };
    let result: TestResult<Vec<Document>> = async { drain(coll.find(filter).await?).await }.await;
    match result {
        Err(e) => match e.downcast_ref::<mongodb::error::Error>().map(|e| &*e.kind) {
            Some(ErrorKind::Command(c)) => assert_command_error(c, 17124, "Location17124"),
            other => panic!("unexpected error {other:?}"),
        },
        Ok(docs) => panic!("expected an error, got {docs:?}"),
    }
    Ok(())
}

#[tokio::test]
async fn errors_carry_mongod_codes() -> TestResult {
    let (_server, _client, coll) = start().await?;
    for (spec, code) in [
        (
            doc! { "x": { "$map": { "input": "$a", "as": "X", "in": 1 } } },
            16867,
        ),
        (
            doc! { "x": { "$map": { "input": "$a", "in": "$$nope" } } },
            17276,
        ),
        (
            doc! { "x": { "$filter": { "input": "$a", "cond": true, "limit": 0 } } },
            327_392,
        ),
        (doc! { "x": { "$setDifference": ["$a", 1] } }, 17049),
        (
            doc! { "x": { "$sortArray": { "input": "$a", "sortBy": 2 } } },
            2_942_506,
        ),
        (doc! { "x": { "$arrayToObject": "$o" } }, 40386),
    ] {
        let err = project(&coll, spec.clone())
            .await
            .expect_err(&format!("{spec} should fail"));
        match err
            .downcast_ref::<mongodb::error::Error>()
            .map(|e| &*e.kind)
        {
            Some(ErrorKind::Command(c)) => {
                assert_command_error(c, code, &format!("Location{code}"));
            }
            other => panic!("{spec}: unexpected error {other:?}"),
        }
    }
    Ok(())
}
