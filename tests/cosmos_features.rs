//! `--profile cosmos` refuses what Microsoft's feature pages mark unsupported for the API
//! version served (`crate::cosmos::features`), with Cosmos DB's error shape, and accepts the
//! rest; without the profile nothing is refused.

mod common;

use bson::{Bson, Document, doc};
use common::{RawConn, TestResult, TestServer, is_ok};
use ebb::config::{CosmosVersion, Profile};

const DB: &str = "cosfeat";

const VERSIONS: [CosmosVersion; 4] = [
    CosmosVersion::V4_2,
    CosmosVersion::V5_0,
    CosmosVersion::V6_0,
    CosmosVersion::V7_0,
];

/// A profile server serving `version`, and a connection to it. (The one place that says how
/// these tests reach a profile server.)
async fn profile_server(version: CosmosVersion) -> TestResult<(TestServer, RawConn)> {
    let server = TestServer::start_with(|c| {
        c.profile = Profile::Cosmos;
        c.cosmos_server_version = version;
        // Raw bytes: the profile without its TLS and account user (tested in
        // `tests/cosmos_connection.rs`); what it refuses is the same.
        c.cosmos_plain = true;
    })
    .await?;
    let conn = server.raw().await?;
    Ok((server, conn))
}

/// Checks that `reply` is exactly Cosmos DB's refusal: `{ok: 0.0, errmsg, code: 115,
/// codeName: "CommandNotSupported"}`.
fn assert_refused(reply: &Document, errmsg: &str) {
    assert_eq!(reply.get("ok"), Some(&Bson::Double(0.0)), "{reply}");
    assert_eq!(reply.get("code"), Some(&Bson::Int32(115)), "{reply}");
    assert_eq!(
        reply.get_str("codeName").ok(),
        Some("CommandNotSupported"),
        "{reply}"
    );
    assert_eq!(reply.get_str("errmsg").ok(), Some(errmsg), "{reply}");
}

fn assert_ok(reply: &Document) {
    assert!(is_ok(reply), "{reply}");
}

/// A `collMod` Ebb runs without the profile: the `_ts` TTL index's default, 10 s to 30 s.
fn collmod() -> Document {
    doc! {"collMod": "c", "index": {"keyPattern": {"_ts": 1}, "expireAfterSeconds": 30}}
}

fn graph_lookup() -> Document {
    doc! {"$graphLookup": {"from": "c", "startWith": "$b", "connectFromField": "b",
    "connectToField": "a", "as": "chain"}}
}

#[tokio::test]
async fn every_version_refuses_its_unsupported_features_and_runs_the_rest() -> TestResult {
    for version in VERSIONS {
        let (server, mut conn) = profile_server(version).await?;
        let reply = conn
            .command(
                DB,
                doc! {"insert": "c", "documents": [{"_id": 1, "a": 1, "b": 5}]},
            )
            .await?;
        assert_ok(&reply);

        // A command.
        let reply = conn.command(DB, collmod()).await?;
        assert_refused(&reply, "Command collMod not supported.");
        // A stage, and the same pipeline without it.
        let reply = conn
            .command(
                DB,
                doc! {"aggregate": "c", "pipeline": [graph_lookup()], "cursor": {}},
            )
            .await?;
        assert_refused(&reply, "'graphLookup' is not supported");
        let reply = conn
            .command(
                DB,
                doc! {"aggregate": "c", "pipeline": [{"$group": {"_id": "$a"}}], "cursor": {}},
            )
            .await?;
        assert_ok(&reply);
        // A query operator, and a supported one.
        let reply = conn
            .command(DB, doc! {"find": "c", "filter": {"b": {"$bitsAllSet": 4}}})
            .await?;
        assert_refused(&reply, "'bitsAllSet' is not supported");
        let reply = conn
            .command(DB, doc! {"find": "c", "filter": {"b": {"$mod": [5, 0]}}})
            .await?;
        assert_ok(&reply);
        let batch = reply.get_document("cursor")?.get_array("firstBatch")?;
        assert_eq!(batch.len(), 1, "{reply}");
        // An index option, and a unique partial index, which is supported.
        let reply = conn
            .command(
                DB,
                doc! {"createIndexes": "c", "indexes": [{"key": {"a": 1}, "name": "a_1", "sparse": true}]},
            )
            .await?;
        assert_refused(&reply, "'sparse' is not supported");
        let reply = conn
            .command(
                DB,
                doc! {"createIndexes": "c", "indexes": [{"key": {"a": 1}, "name": "a_1",
                "unique": true, "partialFilterExpression": {"a": {"$gt": 0}}}]},
            )
            .await?;
        assert_ok(&reply);
        assert_eq!(
            reply.get("numIndexesAfter"),
            Some(&Bson::Int32(2)),
            "{reply}"
        );
        // The connection stays usable after a refusal.
        assert_ok(&conn.command("admin", doc! {"ping": 1}).await?);
        drop(conn);
        server.stop().await?;
    }
    Ok(())
}

#[tokio::test]
async fn a_refused_request_does_nothing() -> TestResult {
    let (server, mut conn) = profile_server(CosmosVersion::V7_0).await?;
    assert_ok(
        &conn
            .command(DB, doc! {"insert": "c", "documents": [{"_id": 1, "b": 1}]})
            .await?,
    );
    let reply = conn
        .command(
            DB,
            doc! {"delete": "c", "deletes": [{"q": {"b": {"$bitsAnySet": 1}}, "limit": 0}]},
        )
        .await?;
    assert_refused(&reply, "'bitsAnySet' is not supported");
    let reply = conn
        .command(
            "admin",
            doc! {"renameCollection": format!("{DB}.c"), "to": format!("{DB}.d")},
        )
        .await?;
    assert_refused(&reply, "Command renameCollection not supported.");
    let reply = conn.command(DB, doc! {"count": "c"}).await?;
    assert_eq!(common::number(reply.get("n")), Some(1.0), "{reply}");
    drop(conn);
    Ok(server.stop().await?)
}

#[tokio::test]
async fn features_ebb_lacks_keep_their_answers_in_the_profile() -> TestResult {
    let (server, mut conn) = profile_server(CosmosVersion::V7_0).await?;
    // mapReduce has no handler: CommandNotFound, as without the profile.
    let reply = conn.command(DB, doc! {"mapReduce": "c"}).await?;
    assert_eq!(reply.get_i32("code").ok(), Some(59), "{reply}");
    // $text is not implemented: NotImplemented, as without the profile.
    let reply = conn
        .command(
            DB,
            doc! {"find": "c", "filter": {"$text": {"$search": "x"}}},
        )
        .await?;
    assert_eq!(reply.get_i32("code").ok(), Some(238), "{reply}");
    drop(conn);
    Ok(server.stop().await?)
}

#[tokio::test]
async fn without_the_profile_nothing_is_refused() -> TestResult {
    let server = TestServer::start().await?;
    let mut conn = server.raw().await?;
    assert_ok(
        &conn
            .command(
                DB,
                doc! {"insert": "c", "documents": [{"_id": 1, "a": 1, "b": 5}]},
            )
            .await?,
    );
    assert_ok(
        &conn
            .command(
                DB,
                doc! {"createIndexes": "c", "indexes": [{"key": {"_ts": 1}, "name": "_ts_1",
                "expireAfterSeconds": 10}]},
            )
            .await?,
    );
    let reply = conn.command(DB, collmod()).await?;
    assert_ok(&reply);
    assert_eq!(
        common::number(reply.get("expireAfterSeconds_new")),
        Some(30.0),
        "{reply}"
    );
    assert_ok(
        &conn
            .command(
                DB,
                doc! {"aggregate": "c", "pipeline": [graph_lookup()], "cursor": {}},
            )
            .await?,
    );
    let reply = conn
        .command(DB, doc! {"find": "c", "filter": {"b": {"$bitsAllSet": 4}}})
        .await?;
    assert_ok(&reply);
    assert_eq!(
        reply.get_document("cursor")?.get_array("firstBatch")?.len(),
        1,
        "{reply}"
    );
    assert_ok(
        &conn
            .command(
                DB,
                doc! {"createIndexes": "c", "indexes": [{"key": {"a": 1}, "name": "a_1", "sparse": true}]},
            )
            .await?,
    );
    assert_ok(&conn.command("admin", doc! {"serverStatus": 1}).await?);
    drop(conn);
    Ok(server.stop().await?)
}
