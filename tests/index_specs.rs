//! `createIndexes` specs validated as mongod 7.0 validates them, through the `mongodb` crate:
//! key patterns, index kinds Ebb does not implement, `v`, partial filters, the option table and
//! the limit of 64 indexes per collection.

mod common;

use bson::{Bson, Document, doc};
use common::{TestResult, TestServer, run_command, run_command_err};
use mongodb::Client;

const DB: &str = "specs";

async fn create(client: &Client, coll: &str, index: Document) -> TestResult<Document> {
    run_command(
        client,
        DB,
        doc! { "createIndexes": coll, "indexes": [index] },
    )
    .await
}

/// `createIndexes` of `index` must fail with `code`; returns the message.
async fn refused(client: &Client, index: Document, code: i32) -> TestResult<String> {
    let e = run_command_err(
        client,
        DB,
        doc! { "createIndexes": "c", "indexes": [index.clone()] },
    )
    .await?;
    assert_eq!(e.code, code, "{index}: {} ({})", e.message, e.code_name);
    Ok(e.message)
}

async fn list(client: &Client, coll: &str) -> TestResult<Vec<Document>> {
    let reply = run_command(client, DB, doc! { "listIndexes": coll }).await?;
    Ok(reply
        .get_document("cursor")?
        .get_array("firstBatch")?
        .iter()
        .filter_map(|b| b.as_document().cloned())
        .collect())
}

#[tokio::test]
async fn key_patterns_are_validated_as_mongod_does() -> TestResult {
    let server = TestServer::start().await?;
    let client = server.client().await?;
    for (key, message) in [
        (
            doc! { "$a": 1 },
            "Index key contains an illegal field name: field name starts with '$'.",
        ),
        (
            doc! { "a..b": 1 },
            "Index keys cannot contain an empty field.",
        ),
        (
            doc! { "a": 0 },
            "Values in the index key pattern cannot be 0.",
        ),
        (doc! { "a": "nope" }, "Unknown index plugin 'nope'"),
        (
            doc! { "a": "geoHaystack" },
            "GeoHaystack indexes cannot be created in version 5.0 and above",
        ),
    ] {
        let got = refused(&client, doc! { "key": key.clone(), "name": "x" }, 67).await?;
        assert!(
            got.starts_with("Error in specification { key: ") && got.ends_with(message),
            "{key}: {got}"
        );
    }
    // Nothing was created along the way.
    assert!(
        run_command_err(&client, DB, doc! { "listIndexes": "c" })
            .await
            .is_ok()
    );
    Ok(())
}

#[tokio::test]
async fn unimplemented_index_kinds_are_refused_not_built() -> TestResult {
    let server = TestServer::start().await?;
    let client = server.client().await?;
    for key in [
        doc! { "attrs.$**": 1 },
        doc! { "attrs.$**": -1 },
        doc! { "$**": 1 },
        doc! { "a": "text" },
        doc! { "loc": "2dsphere" },
        doc! { "a": "hashed" },
    ] {
        refused(&client, doc! { "key": key, "name": "x" }, 238).await?;
    }
    // An invalid wildcard spec gets mongod's error for it.
    let got = refused(
        &client,
        doc! { "key": { "a.$**": 1 }, "name": "x", "sparse": true },
        67,
    )
    .await?;
    assert_eq!(
        got,
        "Index type 'wildcard' does not support the 'sparse' option"
    );
    Ok(())
}

#[tokio::test]
async fn versions_one_and_two_are_listed_as_given() -> TestResult {
    let server = TestServer::start().await?;
    let client = server.client().await?;
    create(
        &client,
        "c",
        doc! { "key": { "a": 1 }, "name": "a_1", "v": 1 },
    )
    .await?;
    create(
        &client,
        "c",
        doc! { "key": { "b": 1 }, "name": "b_1", "v": 2.0 },
    )
    .await?;
    let specs = list(&client, "c").await?;
    assert_eq!(specs[1], doc! { "v": 1, "key": { "a": 1 }, "name": "a_1" });
    assert_eq!(specs[2], doc! { "v": 2, "key": { "b": 1 }, "name": "b_1" });
    let got = refused(
        &client,
        doc! { "key": { "c": 1 }, "name": "c_1", "v": 0 },
        67,
    )
    .await?;
    assert!(got.ends_with("cannot create an index with v=0"), "{got}");
    Ok(())
}

#[tokio::test]
async fn partial_filters_take_only_mongods_operators() -> TestResult {
    let server = TestServer::start().await?;
    let client = server.client().await?;
    for filter in [
        doc! { "b": { "$ne": 1 } },
        doc! { "b": { "$exists": false } },
        doc! { "b": { "$regex": "^x" } },
        doc! { "b": { "$nin": [1, 2] } },
    ] {
        let got = refused(
            &client,
            doc! { "key": { "a": 1 }, "name": "x", "partialFilterExpression": filter.clone() },
            67,
        )
        .await?;
        assert!(
            got.starts_with("Expression not supported in partial index: "),
            "{filter}: {got}"
        );
    }
    refused(
        &client,
        doc! { "key": { "a": 1 }, "name": "x",
        "partialFilterExpression": { "$expr": { "$eq": ["$a", 1] } } },
        224,
    )
    .await?;
    create(
        &client,
        "c",
        doc! { "key": { "a": 1 }, "name": "x", "partialFilterExpression": {
            "$or": [{ "a": { "$gt": 1 } }, { "b": { "$in": [1, 2] } }],
            "c": { "$exists": true, "$type": "string" },
        } },
    )
    .await?;
    Ok(())
}

#[tokio::test]
async fn options_are_checked_against_one_table() -> TestResult {
    let server = TestServer::start().await?;
    let client = server.client().await?;
    let got = refused(
        &client,
        doc! { "key": { "a": 1 }, "name": "x", "bogus": 1 },
        197,
    )
    .await?;
    assert!(
        got.ends_with(
            "The field 'bogus' is not valid for an index specification. Specification: { key: \
             { a: 1 }, name: \"x\", bogus: 1 }"
        ),
        "{got}"
    );
    refused(
        &client,
        doc! { "key": { "a": 1 }, "name": "x", "unique": "yes" },
        14,
    )
    .await?;
    refused(
        &client,
        doc! { "key": { "a": 1 }, "name": "x", "weights": { "a": 1 } },
        67,
    )
    .await?;
    refused(&client, doc! { "key": { "a": 1 }, "name": "*" }, 2).await?;
    // Options kept as mongod keeps them: unique and hidden first, the rest as given.
    create(
        &client,
        "c",
        doc! { "key": { "a": 1 }, "name": "a_1", "background": true, "unique": 1, "hidden": true },
    )
    .await?;
    let specs = list(&client, "c").await?;
    assert_eq!(
        specs[1],
        doc! { "v": 2, "unique": true, "hidden": true, "key": { "a": 1 }, "name": "a_1",
        "background": true }
    );
    Ok(())
}

#[tokio::test]
async fn at_most_64_indexes_per_collection() -> TestResult {
    let server = TestServer::start().await?;
    let client = server.client().await?;
    let specs: Vec<Bson> = (0..63)
        .map(|i| Bson::Document(doc! { "key": { format!("f{i}"): 1 }, "name": format!("f{i}_1") }))
        .collect();
    let reply = run_command(&client, DB, doc! { "createIndexes": "c", "indexes": specs }).await?;
    assert_eq!(reply.get_i32("numIndexesAfter")?, 64, "{reply}");
    let e = run_command_err(
        &client,
        DB,
        doc! { "createIndexes": "c", "indexes": [{ "key": { "g": 1 }, "name": "g_1" }] },
    )
    .await?;
    assert_eq!(e.code, 67);
    assert_eq!(
        e.message,
        "add index fails, too many indexes for specs.c key:{ g: 1 }"
    );
    // An index that already exists is still reported as such.
    let again = create(&client, "c", doc! { "key": { "f0": 1 }, "name": "f0_1" }).await?;
    assert_eq!(again.get_str("note")?, "all indexes already exist");
    Ok(())
}
