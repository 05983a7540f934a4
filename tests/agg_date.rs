//! The date expression family through the `mongodb` driver against an in-process server:
//! date parts with time zones, `$dateToString`, `$dateToParts`, `$dateFromParts`, `$dateAdd`,
//! `$dateDiff`, `$dateTrunc` in pipeline stages and `$expr`, and mongod's errors for a bad zone.

mod common;

use common::{TestResult, TestServer, drain, run_command_err};
use mongodb::bson::{DateTime, Document, doc};
use mongodb::{Client, Collection};

const DB: &str = "aggdate";

async fn start() -> TestResult<(TestServer, Client)> {
    let server = TestServer::start().await?;
    let client = server.client().await?;
    Ok((server, client))
}

fn date(s: &str) -> TestResult<DateTime> {
    Ok(DateTime::parse_rfc3339_str(s)?)
}

async fn orders(client: &Client) -> TestResult<Collection<Document>> {
    let c: Collection<Document> = client.database(DB).collection("orders");
    c.insert_many(vec![
        doc! { "_id": 1, "at": date("2014-01-01T08:15:39.736Z")? },
        doc! { "_id": 2, "at": date("2020-05-18T14:10:30Z")? },
    ])
    .await?;
    Ok(c)
}

async fn aggregate(c: &Collection<Document>, pipeline: Vec<Document>) -> TestResult<Vec<Document>> {
    drain(c.aggregate(pipeline).await?).await
}

#[tokio::test]
async fn parts_and_strings_in_a_projection() -> TestResult {
    let (_server, client) = start().await?;
    let c = orders(&client).await?;
    let got = aggregate(
        &c,
        vec![
            doc! { "$match": { "_id": 1 } },
            doc! { "$project": {
                "year": { "$year": "$at" },
                "hourChicago": { "$hour": { "date": "$at", "timezone": "America/Chicago" } },
                "isoWeekYear": { "$isoWeekYear": "$at" },
                "text": { "$dateToString": {
                    "format": "%Y-%m-%d %H:%M:%S.%L %z %j %U %V %u %w",
                    "date": "$at",
                    "timezone": "America/New_York",
                } },
                "default": { "$dateToString": { "date": "$at" } },
                "parts": { "$dateToParts": { "date": "$at", "timezone": "+05:30" } },
            } },
        ],
    )
    .await?;
    assert_eq!(
        got,
        vec![doc! {
            "_id": 1,
            "year": 2014,
            "hourChicago": 2,
            "isoWeekYear": 2014_i64,
            "text": "2014-01-01 03:15:39.736 -0500 001 00 01 3 4",
            "default": "2014-01-01T08:15:39.736Z",
            "parts": {
                "year": 2014, "month": 1, "day": 1, "hour": 13, "minute": 45, "second": 39,
                "millisecond": 736,
            },
        }]
    );
    Ok(())
}

#[tokio::test]
async fn arithmetic_truncation_and_expr() -> TestResult {
    let (_server, client) = start().await?;
    let c = orders(&client).await?;
    let got = aggregate(
        &c,
        vec![
            doc! { "$match": { "$expr": { "$eq": [{ "$dayOfWeek": "$at" }, 2] } } },
            doc! { "$addFields": {
                "nextMonth": { "$dateAdd": { "startDate": "$at", "unit": "month", "amount": 1 } },
                "days": { "$dateDiff": {
                    "startDate": { "$dateFromParts": { "year": 2020, "month": 5, "day": 1 } },
                    "endDate": "$at",
                    "unit": "day",
                } },
                "week": { "$dateTrunc": {
                    "date": "$at", "unit": "week", "binSize": 2,
                    "timezone": "America/Los_Angeles", "startOfWeek": "Monday",
                } },
            } },
        ],
    )
    .await?;
    assert_eq!(
        got,
        vec![doc! {
            "_id": 2,
            "at": date("2020-05-18T14:10:30Z")?,
            "nextMonth": date("2020-06-18T14:10:30Z")?,
            "days": 17_i64,
            "week": date("2020-05-11T07:00:00Z")?,
        }]
    );
    Ok(())
}

#[tokio::test]
async fn an_unknown_zone_is_mongods_error() -> TestResult {
    let (_server, client) = start().await?;
    orders(&client).await?;
    let err = run_command_err(
        &client,
        DB,
        doc! {
            "aggregate": "orders",
            "pipeline": [{ "$project": { "h": { "$hour": { "date": "$at", "timezone": "Mars/Base" } } } }],
            "cursor": {},
        },
    )
    .await?;
    assert_eq!(err.code, 40485);
    assert_eq!(err.code_name, "Location40485");
    assert!(
        err.message
            .contains("unrecognized time zone identifier: \"Mars/Base\""),
        "{}",
        err.message
    );
    let err = run_command_err(
        &client,
        DB,
        doc! {
            "aggregate": "orders",
            "pipeline": [{ "$project": { "s": { "$dateToString": { "date": "$at", "format": "%Q" } } } }],
            "cursor": {},
        },
    )
    .await?;
    assert_eq!(err.code, 18536);
    Ok(())
}

#[tokio::test]
async fn strings_to_dates_with_on_error() -> TestResult {
    let (_server, client) = start().await?;
    let c: Collection<Document> = client.database(DB).collection("logs");
    c.insert_many(vec![
        doc! { "_id": 1, "s": "2017-02-08T12:10:40.787", "tz": "America/New_York" },
        doc! { "_id": 2, "s": 42, "tz": "UTC" },
        doc! { "_id": 3, "tz": "UTC" },
    ])
    .await?;
    let got = aggregate(
        &c,
        vec![
            doc! { "$sort": { "_id": 1 } },
            doc! { "$project": { "d": { "$dateFromString": {
                "dateString": "$s", "timezone": "$tz", "onError": "bad", "onNull": "none",
            } } } },
        ],
    )
    .await?;
    assert_eq!(
        got,
        vec![
            doc! { "_id": 1, "d": date("2017-02-08T17:10:40.787Z")? },
            doc! { "_id": 2, "d": "bad" },
            doc! { "_id": 3, "d": "none" },
        ]
    );
    Ok(())
}
