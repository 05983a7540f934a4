//! `--profile cosmos` at connection time: a client sees an Azure Cosmos DB for MongoDB (RU)
//! account (the `globaldb` replica set, TLS with the profile's certificate, the account user
//! and its key, the version fields of the API version served, the 2 MB document limit,
//! retryable writes refused), and nothing changes without the profile.

mod common;

use std::path::{Path, PathBuf};

use bson::{Bson, Document, doc};
use common::{TestResult, TestServer};
use ebb::config::{CosmosVersion, Profile};
use ebb::cosmos::profile::{CERT_DIR, DEFAULT_KEY};
use mongodb::Client;
use mongodb::options::{FindOneAndUpdateOptions, UpdateOptions};

/// How long a client waits for a server that should answer.
const WAIT_MS: u64 = 10_000;
/// How long a client waits for a server that should refuse it.
const REFUSED_MS: u64 = 1_500;
/// 2 MB: the largest document an account stores.
const LIMIT: usize = 2 * 1024 * 1024;

/// A key shaped like a Cosmos DB account key, other than the development one.
const OTHER_KEY: &str =
    "b3RoZXIta2V5LWZvci10ZXN0cy1vbmx5LW5vdC1hLXNlY3JldC0wMTIzNDU2Nzg5YWJjZGVmZ2hpamtsbW5vcA==";

/// A profile server in memory (its certificate in the shared temporary directory), resolved
/// here so that the test knows the CA file, and again (without change) by `ebb::run`.
async fn start_in_memory(configure: impl FnOnce(&mut ebb::Config)) -> TestResult<TestServer> {
    Ok(TestServer::start_with(|c| {
        c.profile = Profile::Cosmos;
        // Functional tests: large documents would spend a 400 RU/s budget for seconds.
        c.cosmos_throttle = ebb::config::Switch::Off;
        configure(c);
        c.resolve_profile().expect("the profile resolves");
    })
    .await?)
}

/// The CA file a server was resolved with.
fn ca_of(server: &TestServer) -> PathBuf {
    server
        .config()
        .tls_ca_file
        .clone()
        .expect("resolved with a CA file")
}

/// `key` percent-encoded for a URI.
fn encode(key: &str) -> String {
    key.replace('+', "%2B")
        .replace('/', "%2F")
        .replace('=', "%3D")
}

/// A client through Cosmos DB's connection string (the host and port changed, as the issue
/// says), plus `extra` options (`tlsCAFile=…` or `tlsAllowInvalidCertificates=true`).
async fn cosmos_client(
    server: &TestServer,
    account: &str,
    key: &str,
    extra: &str,
    wait_ms: u64,
) -> TestResult<Client> {
    let uri = format!(
        "mongodb://{account}:{}@{}/?ssl=true&replicaSet=globaldb&retrywrites=false&\
         maxIdleTimeMS=120000&appName=@{account}@&serverSelectionTimeoutMS={wait_ms}&\
         connectTimeoutMS={wait_ms}&{extra}",
        encode(key),
        server.addr(),
    );
    Ok(Client::with_uri_str(uri).await?)
}

/// A client of the default account, trusting `ca` (made by the server as it starts: the
/// driver reads it when the client is made).
async fn trusting(server: &TestServer, ca: &Path) -> TestResult<Client> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_millis(WAIT_MS);
    while !ca.exists() && std::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    cosmos_client(
        server,
        "localhost",
        DEFAULT_KEY,
        &format!("tlsCAFile={}", ca.display()),
        WAIT_MS,
    )
    .await
}

async fn ping(client: &Client) -> mongodb::error::Result<Document> {
    client
        .database("admin")
        .run_command(doc! { "ping": 1 })
        .await
}

/// The server's error code of a failed operation, if it was a command or write error.
fn server_code(e: &mongodb::error::Error) -> Option<i32> {
    use mongodb::error::{ErrorKind, WriteFailure};
    match &*e.kind {
        ErrorKind::Command(c) => Some(c.code),
        ErrorKind::Write(WriteFailure::WriteError(w)) => Some(w.code),
        ErrorKind::InsertMany(m) => m
            .write_errors
            .as_ref()
            .and_then(|w| w.first())
            .map(|w| w.code),
        _ => None,
    }
}

fn message(e: &mongodb::error::Error) -> String {
    e.to_string()
}

#[tokio::test]
async fn connection_string_with_the_ca_file() -> TestResult {
    // A durable server resolves the profile itself: the certificate is in its data directory.
    let dir = tempfile::tempdir()?;
    let server = TestServer::start_durable(dir.path(), |c| c.profile = Profile::Cosmos).await?;
    let ca = dir.path().join(CERT_DIR).join("ca.pem");
    let client = trusting(&server, &ca).await?;
    ping(&client).await?;
    let coll = client.database("shop").collection::<Document>("orders");
    coll.insert_one(doc! { "_id": 1, "item": "tea" }).await?;
    let found = coll.find_one(doc! { "_id": 1 }).await?;
    assert_eq!(found, Some(doc! { "_id": 1, "item": "tea" }));
    // The account is a replica set named `globaldb`, of one member.
    let hello = client
        .database("admin")
        .run_command(doc! { "hello": 1 })
        .await?;
    assert_eq!(hello.get_str("setName")?, "globaldb");
    assert!(hello.get_bool("isWritablePrimary")?);
    let hosts = hello.get_array("hosts")?;
    assert_eq!(hosts, &vec![Bson::String(server.addr().to_string())]);
    // The account user holds every right (the account key is the read-write key). The
    // profile refuses connectionStatus, as Cosmos DB does; usersInfo shows the user's roles.
    let info = client
        .database("admin")
        .run_command(doc! { "usersInfo": { "user": "localhost", "db": "admin" } })
        .await?;
    let users = info.get_array("users")?;
    assert_eq!(users.len(), 1, "{info}");
    let roles = users[0].as_document().expect("a user").get_array("roles")?;
    assert_eq!(
        roles,
        &vec![Bson::Document(doc! { "role": "root", "db": "admin" })]
    );
    client
        .database("admin")
        .run_command(doc! { "listDatabases": 1 })
        .await?;
    server.stop().await?;
    Ok(())
}

#[tokio::test]
async fn connection_string_allowing_invalid_certificates() -> TestResult {
    let server = start_in_memory(|c| c.cosmos_account = "dev-account".into()).await?;
    let client = cosmos_client(
        &server,
        "dev-account",
        DEFAULT_KEY,
        "tlsAllowInvalidCertificates=true",
        WAIT_MS,
    )
    .await?;
    ping(&client).await?;
    server.stop().await?;
    Ok(())
}

#[tokio::test]
async fn a_wrong_key_or_account_is_refused() -> TestResult {
    let server = start_in_memory(|c| c.cosmos_key = Some(OTHER_KEY.into())).await?;
    let ca = ca_of(&server);
    let extra = format!("tlsCAFile={}", ca.display());
    // The development key is not this account's.
    let client = cosmos_client(&server, "localhost", DEFAULT_KEY, &extra, WAIT_MS).await?;
    let refused = ping(&client).await.unwrap_err();
    assert!(
        message(&refused).contains("Authentication failed"),
        "{refused}"
    );
    let client = cosmos_client(&server, "someone", OTHER_KEY, &extra, WAIT_MS).await?;
    assert!(ping(&client).await.is_err());
    // The key given is.
    let client = cosmos_client(&server, "localhost", OTHER_KEY, &extra, WAIT_MS).await?;
    ping(&client).await?;
    // Without credentials, nothing but the handshake commands.
    let uri = format!(
        "mongodb://{}/?tls=true&{extra}&directConnection=true&serverSelectionTimeoutMS={WAIT_MS}",
        server.addr()
    );
    let anonymous = Client::with_uri_str(uri).await?;
    let e = anonymous
        .database("shop")
        .run_command(doc! { "find": "orders" })
        .await
        .unwrap_err();
    assert_eq!(server_code(&e), Some(13), "{e}");
    // Access control comes before what the account does not support.
    let e = anonymous
        .database("shop")
        .run_command(doc! { "collMod": "orders" })
        .await
        .unwrap_err();
    assert_eq!(server_code(&e), Some(13), "{e}");
    let e = client
        .database("shop")
        .run_command(doc! { "collMod": "orders" })
        .await
        .unwrap_err();
    assert_eq!(server_code(&e), Some(115), "{e}");
    server.stop().await?;
    Ok(())
}

#[tokio::test]
async fn a_plain_text_connection_is_refused() -> TestResult {
    let server = start_in_memory(|_| {}).await?;
    let uri = format!(
        "mongodb://localhost:{}@{}/?replicaSet=globaldb&retrywrites=false&\
         serverSelectionTimeoutMS={REFUSED_MS}&connectTimeoutMS={REFUSED_MS}",
        encode(DEFAULT_KEY),
        server.addr()
    );
    let client = Client::with_uri_str(uri).await?;
    assert!(ping(&client).await.is_err());
    // At the byte level: a hello in plain text gets no reply, the connection is closed.
    let mut raw = server.raw().await?;
    let id = raw.next_request_id();
    raw.send_raw(&common::op_msg(id, 0, &doc! { "hello": 1, "$db": "admin" }))
        .await?;
    raw.expect_closed().await?;
    server.stop().await?;
    Ok(())
}

#[tokio::test]
async fn each_api_version_reports_its_version_fields() -> TestResult {
    // API 4.2 reports wire version 8 (MongoDB 4.2), older than this driver takes (4.4, 9): it
    // says so, as it would of a real 4.2 account.
    let server = start_in_memory(|c| c.cosmos_server_version = CosmosVersion::V4_2).await?;
    let client = cosmos_client(
        &server,
        "localhost",
        DEFAULT_KEY,
        "tlsAllowInvalidCertificates=true",
        REFUSED_MS,
    )
    .await?;
    let e = ping(&client).await.unwrap_err();
    assert!(message(&e).contains("wire version 8"), "{e}");
    server.stop().await?;

    for (version, name, array, wire) in [
        (CosmosVersion::V6_0, "6.0.0", [6, 0, 0, 0], 17),
        (CosmosVersion::V7_0, "7.0.0", [7, 0, 0, 0], 21),
    ] {
        let server = start_in_memory(|c| c.cosmos_server_version = version).await?;
        let client = trusting(&server, &ca_of(&server)).await?;
        let admin = client.database("admin");
        let info = admin.run_command(doc! { "buildInfo": 1 }).await?;
        assert_eq!(info.get_str("version")?, name);
        let expected: Vec<Bson> = array.iter().map(|n| Bson::Int32(*n)).collect();
        assert_eq!(info.get_array("versionArray")?, &expected, "{name}");
        for command in ["hello", "isMaster"] {
            let hello = admin.run_command(doc! { command: 1 }).await?;
            assert_eq!(hello.get_i32("maxWireVersion")?, wire, "{name} {command}");
            assert_eq!(hello.get_i32("minWireVersion")?, 0);
            assert_eq!(hello.get_str("setName")?, "globaldb");
            assert_eq!(hello.get_i32("setVersion")?, 1);
            assert_eq!(hello.get_i32("maxBsonObjectSize")?, 16 * 1024 * 1024);
            assert_eq!(hello.get_i32("maxWriteBatchSize")?, 1000);
            assert_eq!(hello.get_i32("logicalSessionTimeoutMinutes")?, 30);
            assert_eq!(
                hello.get_str("primary")?,
                server.addr().to_string(),
                "{command}"
            );
        }
        if version == CosmosVersion::V7_0 {
            // The driver works with what it was told: a batch over 1,000 documents is split.
            let docs: Vec<Document> = (0..1500).map(|i| doc! { "_id": i }).collect();
            let coll = client.database("shop").collection::<Document>("items");
            coll.insert_many(docs).await?;
            assert_eq!(coll.count_documents(doc! {}).await?, 1500);
        }
        server.stop().await?;
    }
    Ok(())
}

/// `{_id, s}` of exactly `size` bytes of BSON.
fn doc_of_size(id: i32, size: usize) -> Document {
    let base = common::bson_bytes(&doc! { "_id": id, "s": "" }).len();
    assert!(size >= base);
    let doc = doc! { "_id": id, "s": "x".repeat(size - base) };
    assert_eq!(common::bson_bytes(&doc).len(), size);
    doc
}

/// Asserts that `e` is the account's error for a document over 2 MB.
fn too_large(e: &mongodb::error::Error) {
    assert_eq!(server_code(e), Some(16), "{e}");
    assert!(message(e).contains("Request size is too large"), "{e}");
}

#[tokio::test]
async fn documents_over_two_megabytes_are_refused() -> TestResult {
    let server = start_in_memory(|_| {}).await?;
    let client = trusting(&server, &ca_of(&server)).await?;
    let coll = client.database("shop").collection::<Document>("big");
    // Insert: 2 MB is taken, one byte more is not.
    coll.insert_one(doc_of_size(1, LIMIT)).await?;
    too_large(
        &coll
            .insert_one(doc_of_size(2, LIMIT + 1))
            .await
            .unwrap_err(),
    );
    assert_eq!(coll.count_documents(doc! {}).await?, 1);
    // In a batch, the other documents go in.
    let e = coll
        .insert_many(vec![
            doc! { "_id": 3 },
            doc_of_size(4, LIMIT + 1),
            doc! { "_id": 5 },
        ])
        .ordered(false)
        .await
        .unwrap_err();
    too_large(&e);
    assert_eq!(coll.count_documents(doc! {}).await?, 3);

    // Update: a document grown past 2 MB is refused and left as it was.
    let grow = doc! { "$set": { "t": "y".repeat(100) } };
    too_large(
        &coll
            .update_one(doc! { "_id": 1 }, grow.clone())
            .await
            .unwrap_err(),
    );
    let kept = coll.find_one(doc! { "_id": 1 }).await?.unwrap();
    assert!(!kept.contains_key("t"));
    coll.update_one(doc! { "_id": 3 }, doc! { "$set": { "t": 1 } })
        .await?;
    // Replace.
    too_large(
        &coll
            .replace_one(doc! { "_id": 3 }, doc_of_size(3, LIMIT + 1))
            .await
            .unwrap_err(),
    );
    coll.replace_one(doc! { "_id": 3 }, doc_of_size(3, LIMIT))
        .await?;
    // Upsert.
    let big = "z".repeat(LIMIT);
    too_large(
        &coll
            .update_one(doc! { "_id": 9 }, doc! { "$set": { "s": big.as_str() } })
            .with_options(UpdateOptions::builder().upsert(true).build())
            .await
            .unwrap_err(),
    );
    assert_eq!(coll.count_documents(doc! { "_id": 9 }).await?, 0);
    // findAndModify, updating and upserting.
    too_large(
        &coll
            .find_one_and_update(doc! { "_id": 5 }, doc! { "$set": { "s": big.as_str() } })
            .await
            .unwrap_err(),
    );
    too_large(
        &coll
            .find_one_and_update(doc! { "_id": 10 }, doc! { "$set": { "s": big.as_str() } })
            .with_options(FindOneAndUpdateOptions::builder().upsert(true).build())
            .await
            .unwrap_err(),
    );
    too_large(
        &coll
            .find_one_and_replace(doc! { "_id": 5 }, doc_of_size(5, LIMIT + 1))
            .await
            .unwrap_err(),
    );
    assert_eq!(coll.count_documents(doc! {}).await?, 3);
    server.stop().await?;
    Ok(())
}

#[tokio::test]
async fn retryable_writes_are_refused() -> TestResult {
    let server = start_in_memory(|_| {}).await?;
    let uri = format!(
        "mongodb://localhost:{}@{}/?ssl=true&replicaSet=globaldb&tlsCAFile={}&\
         serverSelectionTimeoutMS={WAIT_MS}",
        encode(DEFAULT_KEY),
        server.addr(),
        ca_of(&server).display()
    );
    // Without `retrywrites=false`, the driver makes every write retryable.
    let client = Client::with_uri_str(uri).await?;
    let coll = client.database("shop").collection::<Document>("orders");
    let e = coll.insert_one(doc! { "_id": 1 }).await.unwrap_err();
    assert_eq!(server_code(&e), Some(2), "{e}");
    assert!(
        message(&e).contains("Please disable retryable writes by specifying \"retrywrites=false\""),
        "{e}"
    );
    let e = coll
        .update_one(doc! { "_id": 1 }, doc! { "$set": { "a": 1 } })
        .await
        .unwrap_err();
    assert_eq!(server_code(&e), Some(2), "{e}");
    let e = coll.delete_one(doc! { "_id": 1 }).await.unwrap_err();
    assert_eq!(server_code(&e), Some(2), "{e}");
    assert_eq!(coll.count_documents(doc! {}).await?, 0);
    // Reads, and writes in a transaction, are not retryable writes.
    let mut session = client.start_session().await?;
    session.start_transaction().await?;
    coll.insert_one(doc! { "_id": 2 })
        .session(&mut session)
        .await?;
    session.commit_transaction().await?;
    assert_eq!(coll.count_documents(doc! {}).await?, 1);
    server.stop().await?;
    Ok(())
}

#[tokio::test]
async fn the_certificate_and_the_account_survive_a_restart() -> TestResult {
    let dir = tempfile::tempdir()?;
    let ca = dir.path().join(CERT_DIR).join("ca.pem");
    let server = TestServer::start_durable(dir.path(), |c| c.profile = Profile::Cosmos).await?;
    let client = trusting(&server, &ca).await?;
    client
        .database("shop")
        .collection::<Document>("orders")
        .insert_one(doc! { "_id": 1 })
        .await?;
    let first_ca = std::fs::read(&ca)?;
    let first_server = std::fs::read(dir.path().join(CERT_DIR).join("server.pem"))?;
    drop(client);
    server.stop().await?;

    let server = TestServer::start_durable(dir.path(), |c| c.profile = Profile::Cosmos).await?;
    let client = trusting(&server, &ca).await?;
    ping(&client).await?;
    assert_eq!(std::fs::read(&ca)?, first_ca);
    assert_eq!(
        std::fs::read(dir.path().join(CERT_DIR).join("server.pem"))?,
        first_server
    );
    let found = client
        .database("shop")
        .collection::<Document>("orders")
        .find_one(doc! {})
        .await?;
    assert_eq!(found, Some(doc! { "_id": 1 }));
    drop(client);
    server.stop().await?;

    // Started with another key, the account takes it, and the old one no longer works.
    let server = TestServer::start_durable(dir.path(), |c| {
        c.profile = Profile::Cosmos;
        c.cosmos_key = Some(OTHER_KEY.into());
    })
    .await?;
    let extra = format!("tlsCAFile={}", ca.display());
    let old = cosmos_client(&server, "localhost", DEFAULT_KEY, &extra, WAIT_MS).await?;
    assert!(ping(&old).await.is_err());
    let new = cosmos_client(&server, "localhost", OTHER_KEY, &extra, WAIT_MS).await?;
    ping(&new).await?;
    server.stop().await?;
    Ok(())
}

#[tokio::test]
async fn without_the_profile_nothing_changes() -> TestResult {
    use clap::Parser;
    // The command line's port stays mongod's (only `main` moves a profile server to 10255).
    let parsed = ebb::Config::try_parse_from(["ebb"])?;
    assert_eq!(parsed.port, 27017);
    let mut config = parsed.clone();
    assert!(config.resolve_profile()?.is_none());
    assert_eq!(format!("{config:?}"), format!("{parsed:?}"));

    let server = TestServer::start().await?;
    let client = server.client().await?;
    let admin = client.database("admin");
    let info = admin.run_command(doc! { "buildInfo": 1 }).await?;
    assert_eq!(info.get_str("version")?, ebb::MONGODB_VERSION);
    let hello = admin.run_command(doc! { "hello": 1 }).await?;
    assert_eq!(hello.get_i32("maxWireVersion")?, ebb::MAX_WIRE_VERSION);
    assert_eq!(hello.get_i32("maxWriteBatchSize")?, 100_000);
    assert_eq!(hello.get_i32("maxMessageSizeBytes")?, 48_000_000);
    assert!(hello.get("setName").is_none());
    // Documents up to 16 MiB.
    let coll = client.database("shop").collection::<Document>("big");
    coll.insert_one(doc_of_size(1, 3 * LIMIT)).await?;
    coll.update_one(doc! { "_id": 1 }, doc! { "$set": { "t": "y".repeat(100) } })
        .await?;
    server.stop().await?;
    Ok(())
}
