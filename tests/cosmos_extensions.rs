//! Cosmos DB's extension commands under `--profile cosmos`: `customAction` (create, update and
//! get databases and collections with their provisioned throughput) and
//! `getLastRequestStatistics`, through the `mongodb` crate. The documented examples are data
//! (`compat/cosmos/extensions_*.json`), replayed here as the compatibility suite replays them.

mod common;

use std::path::{Path, PathBuf};

use common::{TestResult, TestServer, assert_error, number, run_command_err};
use ebb::config::{Config, Profile};
use mongodb::Client;
use mongodb::bson::{Bson, Document, doc};
use mongodb::options::ClientOptions;

/// The one place test servers get the profile (with its TLS and account user: `TestServer`'s
/// clients log in): an in-memory server, or a durable one in `durable`.
async fn cosmos_server(
    durable: Option<&Path>,
    configure: impl FnOnce(&mut Config),
) -> std::io::Result<TestServer> {
    let profile = |c: &mut Config| {
        c.profile = Profile::Cosmos;
        configure(c);
    };
    match durable {
        Some(dir) => TestServer::start_durable(dir, profile).await,
        None => TestServer::start_with(profile).await,
    }
}

/// A client of `server` with one connection, so that `getLastRequestStatistics` reports the
/// command before it.
async fn single_connection_client(server: &TestServer) -> TestResult<Client> {
    let uri = format!(
        "mongodb://{}{}/?directConnection=true{}",
        server.cosmos_credentials(),
        server.addr(),
        server.cosmos_options()
    );
    let mut options = ClientOptions::parse(uri).await?;
    options.max_pool_size = Some(1);
    options.app_name = Some("ebb-cosmos-extensions".into());
    Ok(Client::with_options(options)?)
}

/// `common::run_command` without the replica set's gossip (`$clusterTime`, `operationTime`)
/// that ends every reply of the profile's `globaldb` set, so replies compare with the pages'.
async fn run_command(client: &Client, db: &str, command: Document) -> TestResult<Document> {
    let mut reply = common::run_command(client, db, command).await?;
    reply.remove("$clusterTime");
    reply.remove("operationTime");
    Ok(reply)
}

fn action(name: &str, rest: Document) -> Document {
    let mut command = doc! { "customAction": name };
    command.extend(rest);
    command
}

// -------------------------------------------------------------------------------------------
// The documented examples, as data
// -------------------------------------------------------------------------------------------

/// Whether `actual` matches `expected` as the compatibility suite reads a case: a document
/// holds at least the expected fields, numbers compare by value, arrays element by element.
fn matches(expected: &Bson, actual: Option<&Bson>, path: &str) -> Result<(), String> {
    let Some(actual) = actual else {
        return Err(format!("{path}: expected {expected}, got nothing"));
    };
    match (expected, actual) {
        (Bson::Document(want), Bson::Document(got)) => {
            for (k, v) in want {
                matches(v, got.get(k), &format!("{path}.{k}"))?;
            }
            Ok(())
        }
        (Bson::Array(want), Bson::Array(got)) => {
            if want.len() != got.len() {
                return Err(format!("{path}: expected {expected}, got {actual}"));
            }
            for (i, (w, g)) in want.iter().zip(got).enumerate() {
                matches(w, Some(g), &format!("{path}[{i}]"))?;
            }
            Ok(())
        }
        _ => match (number(Some(expected)), number(Some(actual))) {
            (Some(a), Some(b)) if (a - b).abs() < f64::EPSILON => Ok(()),
            (Some(_), _) | (_, Some(_)) => {
                Err(format!("{path}: expected {expected}, got {actual}"))
            }
            _ if expected == actual => Ok(()),
            _ => Err(format!("{path}: expected {expected}, got {actual}")),
        },
    }
}

/// The reply to `command`, or `{ok: 0, code, codeName, errmsg}` for a command error.
async fn reply_of(client: &Client, db: &str, command: Document) -> TestResult<Document> {
    match client.database(db).run_command(command).await {
        Ok(reply) => Ok(reply),
        Err(e) => match common::command_error(&e) {
            Some(ce) => Ok(doc! {
                "ok": 0.0,
                "code": ce.code,
                "codeName": ce.code_name.clone(),
                "errmsg": ce.message.clone(),
            }),
            None => Err(e.into()),
        },
    }
}

/// A case's JSON value as BSON: integers are `int32` when they fit (as the shell sends them).
fn bson_of(value: &serde_json::Value) -> Bson {
    use serde_json::Value;
    match value {
        Value::Null => Bson::Null,
        Value::Bool(b) => Bson::Boolean(*b),
        Value::Number(n) => match n.as_i64() {
            Some(i) => i32::try_from(i).map_or(Bson::Int64(i), Bson::Int32),
            None => Bson::Double(n.as_f64().unwrap_or(f64::NAN)),
        },
        Value::String(s) => Bson::String(s.clone()),
        Value::Array(a) => Bson::Array(a.iter().map(bson_of).collect()),
        Value::Object(o) => {
            Bson::Document(o.iter().map(|(k, v)| (k.clone(), bson_of(v))).collect())
        }
    }
}

fn case_files() -> TestResult<Vec<PathBuf>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("compat/cosmos");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| {
            p.extension().is_some_and(|e| e == "json")
                && p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with("extensions_"))
        })
        .collect();
    files.sort();
    Ok(files)
}

#[tokio::test]
async fn documented_examples_replay() -> TestResult {
    let server = cosmos_server(None, |c| c.enable_test_commands = true).await?;
    let client = single_connection_client(&server).await?;
    let files = case_files()?;
    assert!(files.len() >= 13, "the cases: {files:?}");
    for file in files {
        let text = std::fs::read_to_string(&file)?;
        let case: serde_json::Value = serde_json::from_str(&text)?;
        let name = file.display();
        let source = case["source"].as_str().unwrap_or_default();
        assert!(source.starts_with("https://learn.microsoft.com/"), "{name}");
        assert!(case["description"].as_str().is_some_and(|d| !d.is_empty()));
        let db = case["db"].as_str().ok_or("db")?;
        let steps = case["steps"].as_array().ok_or("steps")?;
        for (i, step) in steps.iter().enumerate() {
            let Bson::Document(command) = bson_of(&step["command"]) else {
                panic!("{name} step {}: a command is a document", i + 1);
            };
            let expect = bson_of(&step["expect"]);
            let step_db = step["db"].as_str().unwrap_or(db);
            let reply = reply_of(&client, step_db, command.clone()).await?;
            if let Err(e) = matches(&expect, Some(&Bson::Document(reply.clone())), "") {
                panic!("{name} step {}: {command}: {e} (reply {reply})", i + 1);
            }
        }
    }
    Ok(())
}

// -------------------------------------------------------------------------------------------
// Requests and replies
// -------------------------------------------------------------------------------------------

#[tokio::test]
async fn create_collection_creates_a_logged_listed_collection() -> TestResult {
    let server = cosmos_server(None, |c| c.repl_set = Some("globaldb".into())).await?;
    let client = server.client().await?;
    let reply = run_command(
        &client,
        "test",
        action(
            "CreateCollection",
            doc! { "collection": "testCollection", "offerThroughput": 1000 },
        ),
    )
    .await?;
    assert_eq!(reply.get_i32("ok")?, 1, "{reply}");
    let names = common::collection_names(&client, "test").await?;
    assert!(names.contains("testCollection"), "{names:?}");
    let entry = client
        .database("local")
        .collection::<Document>("oplog.rs")
        .find_one(doc! { "op": "c", "ns": "test.$cmd", "o.create": "testCollection" })
        .await?;
    assert!(entry.is_some(), "no create entry in the oplog");
    // The collection works as any other.
    let coll = client
        .database("test")
        .collection::<Document>("testCollection");
    coll.insert_one(doc! { "_id": 1 }).await?;
    assert_eq!(coll.count_documents(doc! {}).await?, 1);
    Ok(())
}

#[tokio::test]
async fn get_replies_have_the_documented_shapes() -> TestResult {
    let server = cosmos_server(None, |_| {}).await?;
    let client = server.client().await?;
    run_command(
        &client,
        "test",
        action(
            "CreateDatabase",
            doc! { "autoScaleSettings": { "maxThroughput": 20000 } },
        ),
    )
    .await?;
    let reply = run_command(&client, "test", action("GetDatabase", doc! {})).await?;
    // (The replica set's gossip, `$clusterTime` and `operationTime`, ends every reply.)
    let keys: Vec<&str> = reply
        .keys()
        .map(String::as_str)
        .filter(|k| !matches!(*k, "$clusterTime" | "operationTime"))
        .collect();
    assert_eq!(
        keys,
        [
            "database",
            "provisionedThroughput",
            "autoScaleSettings",
            "ok"
        ],
        "{reply}"
    );
    assert_eq!(reply.get_i32("provisionedThroughput")?, 2000);
    assert_eq!(
        reply.get_document("autoScaleSettings")?,
        &doc! { "maxThroughput": 20000 }
    );
    run_command(
        &client,
        "test",
        action(
            "CreateCollection",
            doc! { "collection": "own", "offerThroughput": 11000, "shardKey": "a.b" },
        ),
    )
    .await?;
    let reply = run_command(
        &client,
        "test",
        action("GetCollection", doc! { "collection": "own" }),
    )
    .await?;
    assert_eq!(
        reply,
        doc! {
            "database": "test",
            "collection": "own",
            "shardKeyDefinition": { "a.b": "hashed" },
            "provisionedThroughput": 11000,
            "ok": 1,
        }
    );
    // Sharing the database's throughput: no throughput fields.
    run_command(
        &client,
        "test",
        action("CreateCollection", doc! { "collection": "shared" }),
    )
    .await?;
    let reply = run_command(
        &client,
        "test",
        action("GetCollection", doc! { "collection": "shared" }),
    )
    .await?;
    assert_eq!(
        reply,
        doc! { "database": "test", "collection": "shared", "ok": 1 }
    );
    Ok(())
}

#[tokio::test]
async fn errors() -> TestResult {
    let server = cosmos_server(None, |_| {}).await?;
    let client = server.client().await?;
    let err = run_command_err(
        &client,
        "test",
        action(
            "CreateCollection",
            doc! { "collection": "c", "offerThroughput": 450 },
        ),
    )
    .await?;
    assert_eq!(err.code, 2);
    assert_eq!(
        err.message,
        "The offer should have valid throughput values between 400 and 1000000 inclusive in \
         increments of 100."
    );
    let err = run_command_err(
        &client,
        "test",
        action("CreateCollection", doc! { "offerThroughput": 400 }),
    )
    .await?;
    assert_eq!(err.code, 2, "no collection name");
    let err = run_command_err(
        &client,
        "test",
        action(
            "CreateCollection",
            doc! { "collection": "c", "offerThroughput": "400" },
        ),
    )
    .await?;
    assert_eq!(err.code, 14, "a string throughput");
    let err = run_command_err(&client, "test", action("NoSuchAction", doc! {})).await?;
    assert_eq!(err.code, 59);
    let err = run_command_err(&client, "test", doc! { "customAction": 1 }).await?;
    assert_eq!(err.code, 14);
    let err = run_command_err(
        &client,
        "test",
        action(
            "CreateCollection",
            doc! { "collection": "c", "indexes": [] },
        ),
    )
    .await?;
    assert_eq!(err.code, 238, "indexes are not implemented");
    // Nothing of the refused requests was created.
    assert!(common::collection_names(&client, "test").await?.is_empty());
    let err = run_command_err(&client, "nothing", action("GetDatabase", doc! {})).await?;
    assert_eq!(err.code, 26);
    let err = run_command_err(
        &client,
        "nothing",
        action("UpdateDatabase", doc! { "offerThroughput": 500 }),
    )
    .await?;
    assert_eq!(err.code, 26);
    // A database without shared throughput has none to update.
    run_command(&client, "plain", action("CreateDatabase", doc! {})).await?;
    let err = run_command_err(
        &client,
        "plain",
        action("UpdateDatabase", doc! { "offerThroughput": 500 }),
    )
    .await?;
    assert_eq!(err.code, 2);
    // A collection sharing its database's throughput has none of its own to update.
    run_command(
        &client,
        "shared",
        action("CreateDatabase", doc! { "offerThroughput": 1000 }),
    )
    .await?;
    run_command(
        &client,
        "shared",
        action("CreateCollection", doc! { "collection": "c" }),
    )
    .await?;
    let err = run_command_err(
        &client,
        "shared",
        action(
            "UpdateCollection",
            doc! { "collection": "c", "offerThroughput": 500 },
        ),
    )
    .await?;
    assert_eq!(err.code, 2);
    // A decrease stays above 1% of the highest value ever provisioned.
    run_command(
        &client,
        "test",
        action(
            "CreateCollection",
            doc! { "collection": "big", "offerThroughput": 100_000, "shardKey": "k" },
        ),
    )
    .await?;
    let err = run_command_err(
        &client,
        "test",
        action(
            "UpdateCollection",
            doc! { "collection": "big", "offerThroughput": 400 },
        ),
    )
    .await?;
    assert!(
        err.message.contains("between 1000 and 1000000"),
        "{}",
        err.message
    );
    run_command(
        &client,
        "test",
        action(
            "UpdateCollection",
            doc! { "collection": "big", "offerThroughput": 1000 },
        ),
    )
    .await?;
    Ok(())
}

// -------------------------------------------------------------------------------------------
// Lifetime: restarts, drops, renames
// -------------------------------------------------------------------------------------------

async fn get(client: &Client, db: &str, command: Document) -> TestResult<Document> {
    let mut reply = run_command(client, db, command).await?;
    for generic in ["$clusterTime", "operationTime"] {
        reply.remove(generic);
    }
    Ok(reply)
}

#[tokio::test]
async fn offers_survive_a_restart() -> TestResult {
    let dir = tempfile::tempdir()?;
    let server = cosmos_server(Some(dir.path()), |_| {}).await?;
    let client = server.client().await?;
    run_command(
        &client,
        "shared",
        action("CreateDatabase", doc! { "offerThroughput": 1000 }),
    )
    .await?;
    run_command(
        &client,
        "test",
        action(
            "CreateCollection",
            doc! { "collection": "auto", "autoScaleSettings": { "maxThroughput": 20000 }, "shardKey": "a.b" },
        ),
    )
    .await?;
    run_command(
        &client,
        "test",
        action(
            "UpdateCollection",
            doc! { "collection": "auto", "autoScaleSettings": { "maxThroughput": 5000 } },
        ),
    )
    .await?;
    let database = get(&client, "shared", action("GetDatabase", doc! {})).await?;
    let collection = get(
        &client,
        "test",
        action("GetCollection", doc! { "collection": "auto" }),
    )
    .await?;
    assert_eq!(collection.get_i32("provisionedThroughput")?, 500);
    client.shutdown().await;
    server.stop().await?;

    let server = cosmos_server(Some(dir.path()), |_| {}).await?;
    let client = server.client().await?;
    assert_eq!(
        get(&client, "shared", action("GetDatabase", doc! {})).await?,
        database
    );
    assert_eq!(
        get(
            &client,
            "test",
            action("GetCollection", doc! { "collection": "auto" })
        )
        .await?,
        collection
    );
    // The floor remembered its history: 10% of the highest maximum ever (20,000).
    let err = run_command_err(
        &client,
        "test",
        action(
            "UpdateCollection",
            doc! { "collection": "auto", "autoScaleSettings": { "maxThroughput": 1000 } },
        ),
    )
    .await?;
    assert!(err.message.contains("between 2000 and"), "{}", err.message);
    client.shutdown().await;
    server.stop().await?;
    Ok(())
}

#[tokio::test]
async fn drops_remove_offers_and_renames_are_refused() -> TestResult {
    let server = cosmos_server(None, |_| {}).await?;
    let client = server.client().await?;
    let get_collection = |name: &str| action("GetCollection", doc! { "collection": name });
    run_command(
        &client,
        "test",
        action(
            "CreateCollection",
            doc! { "collection": "c", "offerThroughput": 1000 },
        ),
    )
    .await?;
    client
        .database("test")
        .collection::<Document>("c")
        .drop()
        .await?;
    // Created again by an insert: the default, not the dropped collection's offer.
    client
        .database("test")
        .collection::<Document>("c")
        .insert_one(doc! {})
        .await?;
    let reply = run_command(&client, "test", get_collection("c")).await?;
    assert_eq!(reply.get_i32("provisionedThroughput")?, 400, "{reply}");

    // The profile refuses renameCollection (Cosmos DB has none): the offer stays.
    run_command(
        &client,
        "test",
        action(
            "CreateCollection",
            doc! { "collection": "from", "offerThroughput": 2000 },
        ),
    )
    .await?;
    let err = run_command_err(
        &client,
        "admin",
        doc! { "renameCollection": "test.from", "to": "test.to" },
    )
    .await?;
    assert_eq!(err.code, 115);
    let reply = run_command(&client, "test", get_collection("from")).await?;
    assert_eq!(reply.get_i32("provisionedThroughput")?, 2000, "{reply}");

    // dropDatabase removes the database's shared throughput and its collections' offers.
    run_command(
        &client,
        "shared",
        action("CreateDatabase", doc! { "offerThroughput": 1000 }),
    )
    .await?;
    run_command(
        &client,
        "shared",
        action(
            "CreateCollection",
            doc! { "collection": "own", "offerThroughput": 3000 },
        ),
    )
    .await?;
    client.database("shared").drop().await?;
    let err = run_command_err(&client, "shared", action("GetDatabase", doc! {})).await?;
    assert_eq!(err.code, 26);
    run_command(&client, "shared", action("CreateDatabase", doc! {})).await?;
    let reply = run_command(&client, "shared", action("GetDatabase", doc! {})).await?;
    assert!(!reply.contains_key("provisionedThroughput"), "{reply}");
    run_command(
        &client,
        "shared",
        action("CreateCollection", doc! { "collection": "own" }),
    )
    .await?;
    let reply = run_command(&client, "shared", get_collection("own")).await?;
    assert_eq!(reply.get_i32("provisionedThroughput")?, 400, "{reply}");
    Ok(())
}

// -------------------------------------------------------------------------------------------
// getLastRequestStatistics
// -------------------------------------------------------------------------------------------

#[tokio::test]
async fn last_request_statistics_report_the_previous_command() -> TestResult {
    let server = cosmos_server(None, |_| {}).await?;
    let client = single_connection_client(&server).await?;
    let coll = client.database("test").collection::<Document>("sample");
    coll.insert_one(doc! { "_id": 1 }).await?;
    coll.find_one(doc! {}).await?;
    let reply = run_command(&client, "test", doc! { "getLastRequestStatistics": 1 }).await?;
    assert_eq!(reply.get_str("_t")?, "GetRequestStatisticsResponse");
    assert_eq!(reply.get_i32("ok")?, 1);
    assert_eq!(reply.get_str("CommandName")?, "find");
    assert!(reply.get_f64("RequestCharge")? >= 0.0, "{reply}");
    assert!(reply.get_f64("RequestDurationInMilliSeconds")? >= 0.0);
    // Asked twice, it still reports the find (it does not report itself).
    let again = run_command(&client, "test", doc! { "getLastRequestStatistics": 1 }).await?;
    assert_eq!(again.get_str("CommandName")?, "find");
    // A failed command is a request too.
    let _ = run_command_err(&client, "test", doc! { "find": 1 }).await?;
    let reply = run_command(&client, "test", doc! { "getLastRequestStatistics": 1 }).await?;
    assert_eq!(reply.get_str("CommandName")?, "find");
    coll.insert_one(doc! { "_id": 2 }).await?;
    let reply = run_command(&client, "test", doc! { "getLastRequestStatistics": 1 }).await?;
    assert_eq!(reply.get_str("CommandName")?, "insert");
    Ok(())
}

#[tokio::test]
async fn last_request_statistics_without_a_request() -> TestResult {
    // Raw bytes, on the profile without TLS and the account user (with them, a connection's
    // first commands are its login).
    let server = cosmos_server(None, |c| c.cosmos_plain = true).await?;
    let mut raw = server.raw().await?;
    let reply = raw
        .command("admin", doc! { "getLastRequestStatistics": 1 })
        .await?;
    assert_error(&reply, 2, "BadValue");
    raw.ping().await?;
    let reply = raw
        .command("admin", doc! { "getLastRequestStatistics": 1 })
        .await?;
    assert_eq!(reply.get_str("CommandName")?, "ping", "{reply}");
    Ok(())
}

// -------------------------------------------------------------------------------------------
// Outside the profile
// -------------------------------------------------------------------------------------------

#[tokio::test]
async fn unknown_outside_the_profile() -> TestResult {
    let server = TestServer::start().await?;
    let mut raw = server.raw().await?;
    for command in [
        doc! { "customAction": "CreateDatabase" },
        doc! { "customAction": "GetCollection", "collection": "c" },
        doc! { "getLastRequestStatistics": 1 },
    ] {
        let reply = raw.command("test", command).await?;
        assert_error(&reply, 59, "CommandNotFound");
    }
    let commands = raw.command("admin", doc! { "listCommands": 1 }).await?;
    let names = commands.get_document("commands")?;
    assert!(!names.contains_key("customAction"));
    assert!(!names.contains_key("getLastRequestStatistics"));
    // (The profile refuses listCommands, as Cosmos DB does: the commands themselves answer
    // there, as the other tests show.)
    Ok(())
}
