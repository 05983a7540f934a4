//! Replica-set mode (`--replSet`): a set of one, its `hello`, the replica set commands, the
//! cluster time on every reply, read and write concerns on one member, and awaitable `hello`
//! (standalone too), through the `mongodb` crate, raw bytes and mongosh.

mod common;

use std::time::{Duration, Instant};

use bson::{Bson, Document, Timestamp, doc};
use common::{
    TestResult, TestServer, assert_command_error, assert_error, is_ok, run_command, run_command_err,
};
use mongodb::options::{ReadConcern, WriteConcern};

const SET: &str = "rs0";

/// Retryable writes (`txnNumber`) are the other half of issue 13; until they land, a client of
/// a replica set turns them off.
const NO_RETRY: &str = "retryWrites=false";

/// A direct client of `server` without retryable writes.
async fn direct(server: &TestServer) -> mongodb::error::Result<mongodb::Client> {
    server
        .client_discovering(&format!("directConnection=true&{NO_RETRY}"))
        .await
}

fn timestamp(doc: &Document, key: &str) -> Timestamp {
    doc.get_timestamp(key)
        .unwrap_or_else(|_| panic!("{key} is not a timestamp in {doc}"))
}

fn later(a: Timestamp, b: Timestamp) -> bool {
    (a.time, a.increment) > (b.time, b.increment)
}

// ---------------------------------------------------------------------------------------------
// hello
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn hello_reports_a_set_of_one_in_mongods_order() -> TestResult {
    let server = TestServer::start_replset(SET).await?;
    let host = server.addr().to_string();
    let mut conn = server.raw().await?;
    let hello = conn
        .command("admin", doc! { "hello": 1, "helloOk": true })
        .await?;
    assert!(is_ok(&hello), "{hello}");
    let keys: Vec<&str> = hello.keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        [
            "helloOk",
            "topologyVersion",
            "hosts",
            "setName",
            "setVersion",
            "isWritablePrimary",
            "secondary",
            "primary",
            "me",
            "electionId",
            "lastWrite",
            "maxBsonObjectSize",
            "maxMessageSizeBytes",
            "maxWriteBatchSize",
            "localTime",
            "logicalSessionTimeoutMinutes",
            "connectionId",
            "minWireVersion",
            "maxWireVersion",
            "readOnly",
            "ok",
            "$clusterTime",
            "operationTime",
        ],
        "{hello}"
    );
    assert_eq!(hello.get_array("hosts")?, &vec![Bson::String(host.clone())]);
    assert_eq!(hello.get_str("setName")?, SET);
    assert_eq!(hello.get_i32("setVersion")?, 1);
    assert!(!hello.get_bool("secondary")?);
    assert_eq!(hello.get_str("primary")?, host);
    assert_eq!(hello.get_str("me")?, host);
    assert_eq!(
        hello.get_object_id("electionId")?.to_hex(),
        "7fffffff0000000000000001"
    );
    let last_write = hello.get_document("lastWrite")?;
    let last_keys: Vec<&str> = last_write.keys().map(String::as_str).collect();
    assert_eq!(
        last_keys,
        [
            "opTime",
            "lastWriteDate",
            "majorityOpTime",
            "majorityWriteDate"
        ]
    );
    let op_time = last_write.get_document("opTime")?;
    assert_eq!(op_time.get_i64("t")?, 1);
    let tv = hello.get_document("topologyVersion")?;
    tv.get_object_id("processId")?;
    assert_eq!(tv.get_i64("counter")?, 0);

    // The legacy spelling answers `ismaster`.
    let legacy = conn.command("admin", doc! { "isMaster": 1 }).await?;
    assert!(legacy.get_bool("ismaster")?);
    assert!(legacy.get("isWritablePrimary").is_none());
    assert_eq!(legacy.get_str("setName")?, SET);
    Ok(())
}

#[tokio::test]
async fn standalone_hello_has_a_topology_version_and_no_set() -> TestResult {
    let server = TestServer::start().await?;
    let mut conn = server.raw().await?;
    let hello = conn.command("admin", doc! { "hello": 1 }).await?;
    let keys: Vec<&str> = hello.keys().take(2).map(String::as_str).collect();
    assert_eq!(keys, ["isWritablePrimary", "topologyVersion"], "{hello}");
    assert!(hello.get("setName").is_none());
    assert!(hello.get("$clusterTime").is_none());
    assert!(hello.get("operationTime").is_none());
    assert_eq!(
        hello.get_document("topologyVersion")?.get_i64("counter")?,
        0
    );
    Ok(())
}

#[tokio::test]
async fn advertised_host_is_what_hello_reports() -> TestResult {
    let server = TestServer::start_with(|c| {
        c.repl_set = Some(SET.into());
        c.advertise_host = Some("db.example:27017".into());
    })
    .await?;
    let mut conn = server.raw().await?;
    let hello = conn.command("admin", doc! { "hello": 1 }).await?;
    assert_eq!(hello.get_str("me")?, "db.example:27017");
    assert_eq!(hello.get_str("primary")?, "db.example:27017");
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Drivers
// ---------------------------------------------------------------------------------------------

async fn crud(client: &mongodb::Client) -> TestResult {
    let coll = client.database("rs").collection::<Document>("c");
    coll.insert_one(doc! { "_id": 1, "a": 1 }).await?;
    coll.update_one(doc! { "_id": 1 }, doc! { "$set": { "a": 2 } })
        .await?;
    let found = coll.find_one(doc! { "_id": 1 }).await?;
    assert_eq!(found, Some(doc! { "_id": 1, "a": 2 }));
    coll.delete_one(doc! { "_id": 1 }).await?;
    assert_eq!(coll.count_documents(doc! {}).await?, 0);
    Ok(())
}

#[tokio::test]
async fn a_replica_set_uri_connects_and_does_crud() -> TestResult {
    let server = TestServer::start_replset(SET).await?;
    let client = server
        .client_discovering(&format!("replicaSet={SET}&{NO_RETRY}"))
        .await?;
    crud(&client).await
}

#[tokio::test]
async fn a_client_without_direct_connection_discovers_the_primary() -> TestResult {
    let server = TestServer::start_replset(SET).await?;
    let client = server
        .client_discovering(&format!("directConnection=false&{NO_RETRY}"))
        .await?;
    crud(&client).await
}

#[tokio::test]
async fn a_wrong_set_name_finds_no_server() -> TestResult {
    let server = TestServer::start_replset(SET).await?;
    let uri = format!(
        "mongodb://{}/?replicaSet=other&serverSelectionTimeoutMS=500",
        server.addr()
    );
    let client = mongodb::Client::with_uri_str(uri).await?;
    let err = client
        .database("admin")
        .run_command(doc! { "ping": 1 })
        .await
        .expect_err("no member of set 'other'");
    assert!(
        matches!(*err.kind, mongodb::error::ErrorKind::ServerSelection { .. }),
        "{err}"
    );
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Replica set commands
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn repl_set_commands_in_replica_set_mode() -> TestResult {
    let server = TestServer::start_replset(SET).await?;
    let client = server.client().await?;
    let host = server.addr().to_string();

    let err = run_command_err(&client, "admin", doc! { "replSetInitiate": {} }).await?;
    assert_command_error(&err, 23, "AlreadyInitialized");
    assert_eq!(err.message, "already initialized");

    let status = run_command(&client, "admin", doc! { "replSetGetStatus": 1 }).await?;
    assert_eq!(status.get_str("set")?, SET);
    assert_eq!(status.get_i32("myState")?, 1);
    assert_eq!(status.get_i64("term")?, 1);
    let members = status.get_array("members")?;
    assert_eq!(members.len(), 1);
    let member = members[0].as_document().expect("a member document");
    assert_eq!(member.get_i32("_id")?, 0);
    assert_eq!(member.get_str("name")?, host);
    assert_eq!(member.get_f64("health")?, 1.0);
    assert_eq!(member.get_str("stateStr")?, "PRIMARY");
    assert!(member.get_bool("self")?);
    member.get_document("optime")?.get_timestamp("ts")?;

    let config = run_command(&client, "admin", doc! { "replSetGetConfig": 1 }).await?;
    let config = config.get_document("config")?;
    assert_eq!(config.get_str("_id")?, SET);
    assert_eq!(config.get_i32("version")?, 1);
    let members = config.get_array("members")?;
    let member = members[0].as_document().expect("a member document");
    assert_eq!(member.get_str("host")?, host);
    assert_eq!(config.get_i64("protocolVersion")?, 1);
    config
        .get_document("settings")?
        .get_object_id("replicaSetId")?;

    let status = run_command(&client, "admin", doc! { "serverStatus": 1 }).await?;
    let repl = status.get_document("repl")?;
    assert_eq!(repl.get_str("setName")?, SET);
    assert_eq!(repl.get_str("me")?, host);
    assert!(repl.get_bool("isWritablePrimary")?);

    let opts = run_command(&client, "admin", doc! { "getCmdLineOpts": 1 }).await?;
    let parsed = opts.get_document("parsed")?;
    assert_eq!(
        parsed.get_document("replication")?,
        &doc! { "replSet": SET }
    );
    let sections: Vec<&str> = parsed.keys().map(String::as_str).collect();
    assert_eq!(sections, ["net", "replication", "storage"]);

    // Only on admin.
    let err = run_command_err(&client, "test", doc! { "replSetGetStatus": 1 }).await?;
    assert_command_error(&err, 13, "Unauthorized");
    Ok(())
}

#[tokio::test]
async fn repl_set_commands_on_a_standalone() -> TestResult {
    let server = TestServer::start().await?;
    let client = server.client().await?;
    let err = run_command_err(&client, "admin", doc! { "replSetInitiate": {} }).await?;
    assert_command_error(&err, 76, "NoReplicationEnabled");
    assert_eq!(
        err.message,
        "This node was not started with replication enabled."
    );
    let status = run_command(&client, "admin", doc! { "serverStatus": 1 }).await?;
    assert!(status.get("repl").is_none());
    for command in ["replSetGetStatus", "replSetGetConfig"] {
        let err = run_command_err(&client, "admin", doc! { command: 1 }).await?;
        assert_command_error(&err, 76, "NoReplicationEnabled");
        assert_eq!(err.message, "not running with --replSet");
    }
    Ok(())
}

#[tokio::test]
async fn the_replica_set_id_survives_a_restart_and_the_term_moves_on() -> TestResult {
    let dir = std::env::temp_dir().join(format!("ebb-replset-id-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    let read = |server: &TestServer| {
        let addr = server.addr();
        async move {
            let mut conn = common::RawConn::connect(addr).await?;
            let config = conn
                .command("admin", doc! { "replSetGetConfig": 1 })
                .await?;
            let hello = conn.command("admin", doc! { "hello": 1 }).await?;
            let id = config
                .get_document("config")?
                .get_document("settings")?
                .get_object_id("replicaSetId")?;
            TestResult::Ok((id, hello.get_object_id("electionId")?))
        }
    };
    let first = TestServer::start_durable(&dir, |c| c.repl_set = Some(SET.into())).await?;
    let (id1, election1) = read(&first).await?;
    first.stop().await?;
    let second = TestServer::start_durable(&dir, |c| c.repl_set = Some(SET.into())).await?;
    let (id2, election2) = read(&second).await?;
    second.stop().await?;
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(id1, id2);
    assert_eq!(election1.to_hex(), "7fffffff0000000000000001");
    assert_eq!(election2.to_hex(), "7fffffff0000000000000002");
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Cluster time
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn every_reply_carries_the_cluster_time_and_writes_tick_it() -> TestResult {
    let server = TestServer::start_replset(SET).await?;
    let mut conn = server.raw().await?;
    let ping = conn.command("admin", doc! { "ping": 1 }).await?;
    let cluster = ping.get_document("$clusterTime")?;
    let start = timestamp(cluster, "clusterTime");
    let signature = cluster.get_document("signature")?;
    match signature.get("hash") {
        Some(Bson::Binary(b)) => assert_eq!(b.bytes, vec![0_u8; 20]),
        other => panic!("hash {other:?}"),
    }
    assert_eq!(signature.get_i64("keyId")?, 0);
    let read_time = timestamp(&ping, "operationTime");

    let insert = conn
        .command("rs", doc! { "insert": "c", "documents": [{ "_id": 1 }] })
        .await?;
    let write_time = timestamp(&insert, "operationTime");
    assert!(later(write_time, read_time), "{insert}");
    assert!(!later(start, write_time));
    let find = conn.command("rs", doc! { "find": "c" }).await?;
    assert_eq!(timestamp(&find, "operationTime"), write_time);

    // An error carries it too.
    let err = conn.command("rs", doc! { "nope": 1 }).await?;
    assert_error(&err, 59, "CommandNotFound");
    timestamp(&err, "operationTime");
    err.get_document("$clusterTime")?;
    Ok(())
}

#[tokio::test]
async fn gossip_and_after_cluster_time() -> TestResult {
    let server = TestServer::start_replset(SET).await?;
    let mut conn = server.raw().await?;
    let ping = conn.command("admin", doc! { "ping": 1 }).await?;
    let now = timestamp(ping.get_document("$clusterTime")?, "clusterTime");
    let ahead = Timestamp {
        time: now.time + 60,
        increment: 1,
    };
    // A time the server has not reached is refused.
    let reply = conn
        .command(
            "rs",
            doc! { "find": "c", "readConcern": { "afterClusterTime": ahead } },
        )
        .await?;
    assert_error(&reply, 72, "InvalidOptions");
    assert!(
        reply
            .get_str("errmsg")?
            .starts_with("readConcern afterClusterTime value must not be greater than the current clusterTime. Requested clusterTime: Timestamp("),
        "{reply}"
    );
    // Once gossiped, it is served, and the read's operationTime reaches it.
    let reply = conn
        .command(
            "rs",
            doc! {
                "find": "c",
                "readConcern": { "afterClusterTime": ahead, "level": "majority" },
                "$clusterTime": {
                    "clusterTime": ahead,
                    "signature": { "hash": bson::Binary { subtype: bson::spec::BinarySubtype::Generic, bytes: vec![0; 20] }, "keyId": 0_i64 },
                },
            },
        )
        .await?;
    assert!(is_ok(&reply), "{reply}");
    assert!(!later(ahead, timestamp(&reply, "operationTime")), "{reply}");
    assert!(!later(
        ahead,
        timestamp(reply.get_document("$clusterTime")?, "clusterTime")
    ));
    Ok(())
}

#[tokio::test]
async fn causal_consistency_through_the_driver() -> TestResult {
    let server = TestServer::start_replset(SET).await?;
    let client = server
        .client_discovering(&format!("replicaSet={SET}&{NO_RETRY}"))
        .await?;
    let coll = client.database("rs").collection::<Document>("causal");
    let mut session = client.start_session().causal_consistency(true).await?;
    coll.insert_one(doc! { "_id": 1 })
        .session(&mut session)
        .await?;
    let op_time = session
        .operation_time()
        .expect("an operationTime after a write");
    let found = coll
        .find_one(doc! { "_id": 1 })
        .session(&mut session)
        .await?;
    assert_eq!(found, Some(doc! { "_id": 1 }));
    assert!(session.cluster_time().is_some());
    assert!(!later(
        op_time,
        session.operation_time().expect("still set")
    ));
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Read and write concerns
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn read_concern_levels_on_one_member() -> TestResult {
    let server = TestServer::start_replset(SET).await?;
    let client = direct(&server).await?;
    let coll = client.database("rs").collection::<Document>("rc");
    coll.insert_one(doc! { "_id": 1 }).await?;
    for level in [
        ReadConcern::local(),
        ReadConcern::majority(),
        ReadConcern::linearizable(),
        ReadConcern::available(),
        ReadConcern::snapshot(),
    ] {
        let found = coll.find_one(doc! {}).read_concern(level.clone()).await?;
        assert_eq!(found, Some(doc! { "_id": 1 }), "{level:?}");
    }
    // Snapshot outside a transaction: find, aggregate and distinct only.
    let err = run_command_err(
        &client,
        "rs",
        doc! { "count": "rc", "readConcern": { "level": "snapshot" } },
    )
    .await?;
    assert_command_error(&err, 72, "InvalidOptions");
    assert_eq!(
        err.message,
        "Command count does not support { readConcern: { level: \"snapshot\" } } :: caused by :: read concern snapshot not supported"
    );
    let err = run_command_err(
        &client,
        "rs",
        doc! { "find": "rc", "readConcern": { "level": "linearizable", "afterOpTime": { "ts": Timestamp { time: 1, increment: 1 }, "t": 1_i64 } } },
    )
    .await?;
    assert_command_error(&err, 9, "FailedToParse");
    // Reading at a time before the last write needs history Ebb does not keep.
    let err = run_command_err(
        &client,
        "rs",
        doc! { "find": "rc", "readConcern": { "level": "snapshot", "atClusterTime": Timestamp { time: 1, increment: 1 } } },
    )
    .await?;
    assert_command_error(&err, 239, "SnapshotTooOld");
    Ok(())
}

#[tokio::test]
async fn write_concerns_on_one_member() -> TestResult {
    let server = TestServer::start_replset(SET).await?;
    let client = direct(&server).await?;
    let coll = client.database("rs").collection::<Document>("wc");
    coll.insert_one(doc! { "_id": 1 })
        .write_concern(WriteConcern::majority())
        .await?;
    coll.insert_one(doc! { "_id": 2 })
        .write_concern(
            WriteConcern::builder()
                .w(mongodb::options::Acknowledgment::Nodes(1))
                .w_timeout(Duration::from_secs(1))
                .build(),
        )
        .await?;

    // w: 2 is applied, then answered with mongod's writeConcernError.
    let mut conn = server.raw().await?;
    let reply = conn
        .command(
            "rs",
            doc! { "insert": "wc", "documents": [{ "_id": 3 }], "writeConcern": { "w": 2, "wtimeout": 100 } },
        )
        .await?;
    assert!(is_ok(&reply), "{reply}");
    assert_eq!(reply.get_i32("n")?, 1);
    let keys: Vec<&str> = reply.keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        [
            "n",
            "writeConcernError",
            "ok",
            "$clusterTime",
            "operationTime"
        ]
    );
    let wce = reply.get_document("writeConcernError")?;
    assert_eq!(
        wce,
        &doc! {
            "code": 100,
            "codeName": "UnsatisfiableWriteConcern",
            "errmsg": "Not enough data-bearing nodes",
            "errInfo": { "writeConcern": { "w": 2, "wtimeout": 100, "provenance": "clientSupplied" } },
        }
    );
    assert_eq!(coll.count_documents(doc! {}).await?, 3);

    let reply = conn
        .command(
            "rs",
            doc! { "delete": "wc", "deletes": [{ "q": { "_id": 3 }, "limit": 1 }], "writeConcern": { "w": "dc1" } },
        )
        .await?;
    let wce = reply.get_document("writeConcernError")?;
    assert_eq!(wce.get_i32("code")?, 79);
    assert_eq!(wce.get_str("codeName")?, "UnknownReplWriteConcern");
    assert_eq!(
        wce.get_str("errmsg")?,
        "No write concern mode named 'dc1' found in replica set configuration"
    );
    assert_eq!(coll.count_documents(doc! {}).await?, 2);
    Ok(())
}

#[tokio::test]
async fn a_standalone_still_refuses_what_needs_a_replica_set() -> TestResult {
    let server = TestServer::start().await?;
    let client = server.client().await?;
    let err = run_command_err(
        &client,
        "rs",
        doc! { "find": "c", "readConcern": { "level": "snapshot" } },
    )
    .await?;
    assert_command_error(&err, 123, "NotAReplicaSet");
    let err = run_command_err(
        &client,
        "rs",
        doc! { "insert": "c", "documents": [{}], "writeConcern": { "w": 2 } },
    )
    .await?;
    assert_command_error(&err, 2, "BadValue");
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Awaitable hello
// ---------------------------------------------------------------------------------------------

async fn topology_version(conn: &mut common::RawConn) -> TestResult<Document> {
    let hello = conn.command("admin", doc! { "hello": 1 }).await?;
    Ok(hello.get_document("topologyVersion")?.clone())
}

async fn awaitable_hello_waits(replset: bool) -> TestResult {
    let server = if replset {
        TestServer::start_replset(SET).await?
    } else {
        TestServer::start().await?
    };
    let mut conn = server.raw().await?;
    let tv = topology_version(&mut conn).await?;

    let started = Instant::now();
    let hello = conn
        .command(
            "admin",
            doc! { "hello": 1, "topologyVersion": tv.clone(), "maxAwaitTimeMS": 300 },
        )
        .await?;
    assert!(is_ok(&hello), "{hello}");
    assert!(
        started.elapsed() >= Duration::from_millis(300),
        "answered early"
    );

    // Another process's version: at once.
    let other = doc! { "processId": bson::oid::ObjectId::new(), "counter": 0_i64 };
    let started = Instant::now();
    let hello = conn
        .command(
            "admin",
            doc! { "hello": 1, "topologyVersion": other, "maxAwaitTimeMS": 10_000 },
        )
        .await?;
    assert!(is_ok(&hello), "{hello}");
    assert!(started.elapsed() < Duration::from_secs(5));

    // A counter ahead of the server's.
    let mut ahead = tv.clone();
    ahead.insert("counter", 5_i64);
    let reply = conn
        .command(
            "admin",
            doc! { "hello": 1, "topologyVersion": ahead, "maxAwaitTimeMS": 10 },
        )
        .await?;
    if replset {
        assert_error(&reply, 31382, "Location31382");
    } else {
        assert_error(&reply, 51764, "Location51764");
    }
    assert_eq!(
        reply.get_str("errmsg")?,
        "Received a topology version with counter: 5 which is greater than the server topology version counter: 0"
    );
    Ok(())
}

#[tokio::test]
async fn awaitable_hello_waits_on_a_replica_set() -> TestResult {
    awaitable_hello_waits(true).await
}

#[tokio::test]
async fn awaitable_hello_waits_on_a_standalone() -> TestResult {
    awaitable_hello_waits(false).await
}

#[tokio::test]
async fn awaitable_hello_argument_errors() -> TestResult {
    let server = TestServer::start().await?;
    let mut conn = server.raw().await?;
    let tv = topology_version(&mut conn).await?;
    let cases = [
        (
            doc! { "hello": 1, "topologyVersion": tv.clone() },
            31368,
            "Location31368",
            "A request with a 'topologyVersion' must include 'maxAwaitTimeMS'",
        ),
        (
            doc! { "hello": 1, "maxAwaitTimeMS": 5 },
            31368,
            "Location31368",
            "A request with 'maxAwaitTimeMS' must include a 'topologyVersion'",
        ),
        (
            doc! { "hello": 1, "topologyVersion": tv.clone(), "maxAwaitTimeMS": -1 },
            2,
            "BadValue",
            "BSON field 'maxAwaitTimeMS' value must be >= 0, actual value '-1'",
        ),
        (
            doc! { "hello": 1, "topologyVersion": { "processId": tv.get_object_id("processId")?, "counter": -1_i64 }, "maxAwaitTimeMS": 5 },
            31372,
            "Location31372",
            "topologyVersion must have a non-negative counter",
        ),
        (
            doc! { "hello": 1, "topologyVersion": { "processId": tv.get_object_id("processId")? }, "maxAwaitTimeMS": 5 },
            40414,
            "IDLFailedToParse",
            "BSON field 'hello.topologyVersion.counter' is missing but a required field",
        ),
        (
            doc! { "hello": 1, "topologyVersion": { "processId": tv.get_object_id("processId")?, "counter": 0 }, "maxAwaitTimeMS": 5 },
            14,
            "TypeMismatch",
            "BSON field 'hello.topologyVersion.counter' is the wrong type 'int', expected type 'long'",
        ),
    ];
    for (command, code, name, message) in cases {
        let reply = conn.command("admin", command.clone()).await?;
        assert_error(&reply, code, name);
        assert_eq!(reply.get_str("errmsg")?, message, "{command}");
    }
    Ok(())
}

#[tokio::test]
async fn shutdown_answers_a_waiting_hello_at_once() -> TestResult {
    for replset in [true, false] {
        let mut server = if replset {
            TestServer::start_replset(SET).await?
        } else {
            TestServer::start().await?
        };
        let mut conn = server.raw().await?;
        let tv = topology_version(&mut conn).await?;
        let body = doc! {
            "hello": 1, "topologyVersion": tv, "maxAwaitTimeMS": 60_000, "$db": "admin",
        };
        let id = conn.next_request_id();
        conn.send_raw(&common::op_msg(id, 0, &body)).await?;
        tokio::time::sleep(Duration::from_millis(100)).await;
        let started = Instant::now();
        server.trigger_shutdown();
        let reply = conn.read_reply().await?;
        if replset {
            assert_error(&reply.body, 91, "ShutdownInProgress");
            assert_eq!(
                reply.body.get_str("errmsg")?,
                "The server is in quiesce mode and will shut down"
            );
        } else {
            assert_error(&reply.body, 11600, "InterruptedAtShutdown");
        }
        common::within("server stop", async {
            server.join().await.unwrap_or(Ok(()))
        })
        .await?;
        assert!(started.elapsed() < Duration::from_secs(5));
    }
    Ok(())
}

/// OP_MSG `exhaustAllowed`.
const EXHAUST_ALLOWED: u32 = 1 << 16;

#[tokio::test]
async fn awaitable_hello_streams_with_more_to_come() -> TestResult {
    let mut server = TestServer::start_replset(SET).await?;
    let mut conn = server.raw().await?;
    let tv = topology_version(&mut conn).await?;
    let body = doc! {
        "hello": 1, "topologyVersion": tv.clone(), "maxAwaitTimeMS": 200, "$db": "admin",
    };
    let id = conn.next_request_id();
    let started = Instant::now();
    let first = conn
        .round_trip(id, &common::op_msg(id, EXHAUST_ALLOWED, &body))
        .await?;
    assert!(is_ok(&first.body), "{}", first.body);
    assert_ne!(first.flags & common::MORE_TO_COME, 0, "first reply streams");
    assert_ne!(first.header.request_id, 0);
    // The next replies come without a request, each answering to the one before.
    let mut previous = first;
    for _ in 0..2 {
        let next = conn.read_reply().await?;
        assert!(is_ok(&next.body), "{}", next.body);
        assert_ne!(next.flags & common::MORE_TO_COME, 0);
        assert_eq!(next.header.response_to, previous.header.request_id);
        assert_eq!(next.body.get_document("topologyVersion")?, &tv);
        previous = next;
    }
    assert!(
        started.elapsed() >= Duration::from_millis(600),
        "each waited"
    );
    // Shutdown ends the stream with a reply without moreToCome.
    server.trigger_shutdown();
    let last = conn.read_reply().await?;
    assert_eq!(last.flags & common::MORE_TO_COME, 0);
    assert_error(&last.body, 91, "ShutdownInProgress");
    assert_eq!(last.header.response_to, previous.header.request_id);
    common::within("server stop", async {
        server.join().await.unwrap_or(Ok(()))
    })
    .await?;
    Ok(())
}

/// The driver's monitor uses awaitable `hello` (exhaust, on this server) without a failed
/// heartbeat, and the client keeps working.
#[tokio::test]
async fn the_driver_monitors_by_streaming() -> TestResult {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use mongodb::event::EventHandler;
    use mongodb::event::sdam::SdamEvent;

    let server = TestServer::start_replset(SET).await?;
    let uri = format!(
        "mongodb://{}/?replicaSet={SET}&{NO_RETRY}&heartbeatFrequencyMS=500",
        server.addr()
    );
    let mut options = mongodb::options::ClientOptions::parse(uri).await?;
    let awaited = Arc::new(AtomicUsize::new(0));
    let failed = Arc::new(AtomicUsize::new(0));
    let (a, f) = (Arc::clone(&awaited), Arc::clone(&failed));
    options.sdam_event_handler = Some(EventHandler::callback(
        move |event: SdamEvent| match event {
            SdamEvent::ServerHeartbeatSucceeded(e) if e.awaited => {
                a.fetch_add(1, Ordering::SeqCst);
            }
            SdamEvent::ServerHeartbeatFailed(_) => {
                f.fetch_add(1, Ordering::SeqCst);
            }
            _ => {}
        },
    ));
    let client = mongodb::Client::with_options(options)?;
    crud(&client).await?;
    tokio::time::sleep(Duration::from_millis(1800)).await;
    crud(&client).await?;
    assert!(awaited.load(Ordering::SeqCst) >= 2, "awaited heartbeats");
    assert_eq!(failed.load(Ordering::SeqCst), 0, "failed heartbeats");
    Ok(())
}

#[tokio::test]
async fn exhaust_needs_an_awaitable_hello() -> TestResult {
    let server = TestServer::start().await?;
    let mut conn = server.raw().await?;
    // A hello that is not awaitable cannot stream.
    let body = doc! { "hello": 1, "$db": "admin" };
    let id = conn.next_request_id();
    let reply = conn
        .round_trip(id, &common::op_msg(id, EXHAUST_ALLOWED, &body))
        .await?;
    assert_error(&reply.body, 51756, "Location51756");
    assert_eq!(
        reply.body.get_str("errmsg")?,
        "An isMaster or hello request with exhaust must specify 'maxAwaitTimeMS'"
    );
    assert_eq!(reply.flags & common::MORE_TO_COME, 0);
    // Other commands answer once.
    let body = doc! { "ping": 1, "$db": "admin" };
    let id = conn.next_request_id();
    let reply = conn
        .round_trip(id, &common::op_msg(id, EXHAUST_ALLOWED, &body))
        .await?;
    assert!(is_ok(&reply.body));
    assert_eq!(reply.flags & common::MORE_TO_COME, 0);
    conn.ping().await?;
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// mongosh
// ---------------------------------------------------------------------------------------------

/// `rs.status()` and `rs.conf()` through mongosh (found through `EBB_MONGOSH`, which
/// `scripts/test` sets; without it the test says so and passes).
#[tokio::test]
async fn mongosh_rs_status_and_conf() -> TestResult {
    let Ok(mongosh) = std::env::var("EBB_MONGOSH") else {
        eprintln!("MISSING mongosh: set EBB_MONGOSH (scripts/test does) to run this test");
        return Ok(());
    };
    let server = TestServer::start_replset(SET).await?;
    let uri = format!("mongodb://{}/?replicaSet={SET}", server.addr());
    let script = "const s = rs.status(); const c = rs.conf(); \
                  print(JSON.stringify({set: s.set, state: s.members[0].stateStr, \
                  ok: s.ok, id: c._id, host: c.members[0].host, primary: db.hello().primary}))";
    let output = tokio::task::spawn_blocking(move || {
        std::process::Command::new(mongosh)
            .args(["--quiet", &uri, "--eval", script])
            .output()
    })
    .await??;
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "mongosh failed: {stdout} {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let host = server.addr().to_string();
    let expected = format!(
        "{{\"set\":\"{SET}\",\"state\":\"PRIMARY\",\"ok\":1,\"id\":\"{SET}\",\"host\":\"{host}\",\"primary\":\"{host}\"}}"
    );
    assert_eq!(stdout.trim(), expected);
    Ok(())
}
