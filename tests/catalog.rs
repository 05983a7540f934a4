//! Databases and collections through the `mongodb` driver against an in-process server:
//! `create`, `drop`, `dropDatabase`, `listCollections`, `listDatabases`, `renameCollection`,
//! `collStats`, `dbStats` and namespace validation, checked against MongoDB 7.0's documented
//! behaviour. Tests of known divergences are `#[ignore]`d with the reason.

mod common;

use std::collections::BTreeSet;

use common::{
    RawConn, TestResult, TestServer, assert_command_error, assert_error, collection_names, integer,
    is_ok, number, run_command, run_command_err,
};
use mongodb::bson::spec::BinarySubtype;
use mongodb::bson::{Binary, Bson, Document, doc};
use mongodb::results::{CollectionSpecification, CollectionType};
use mongodb::{Client, Collection};

async fn start() -> TestResult<(TestServer, Client)> {
    let server = TestServer::start().await?;
    let client = server.client().await?;
    Ok((server, client))
}

fn coll(client: &Client, db: &str, name: &str) -> Collection<Document> {
    client.database(db).collection(name)
}

async fn insert_n(client: &Client, db: &str, name: &str, n: i32) -> TestResult {
    let docs: Vec<Document> = (0..n).map(|i| doc! { "_id": i, "v": i }).collect();
    coll(client, db, name).insert_many(docs).await?;
    Ok(())
}

/// The `listCollections` entries of `db` (raw), in the server's order.
async fn list_collections(
    client: &Client,
    db: &str,
    command: Document,
) -> TestResult<Vec<Document>> {
    let mut full = doc! { "listCollections": 1, "cursor": {} };
    full.extend(command);
    let reply = run_command(client, db, full).await?;
    let cursor = reply.get_document("cursor")?;
    assert_eq!(cursor.get_i64("id")?, 0, "{reply}");
    assert_eq!(cursor.get_str("ns")?, format!("{db}.$cmd.listCollections"));
    Ok(cursor
        .get_array("firstBatch")?
        .iter()
        .map(|e| e.as_document().cloned().ok_or("entry is not a document"))
        .collect::<Result<_, _>>()?)
}

/// The driver's view of `db`'s collections.
async fn specifications(client: &Client, db: &str) -> TestResult<Vec<CollectionSpecification>> {
    let mut cursor = client.database(db).list_collections().await?;
    let mut out = Vec::new();
    while cursor.advance().await? {
        out.push(cursor.deserialize_current()?);
    }
    Ok(out)
}

fn names(entries: &[Document]) -> Vec<&str> {
    entries
        .iter()
        .map(|e| e.get_str("name").unwrap_or("?"))
        .collect()
}

async fn database_names(client: &Client) -> TestResult<BTreeSet<String>> {
    Ok(client.list_database_names().await?.into_iter().collect())
}

fn set(items: &[&str]) -> BTreeSet<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}

/// `info.uuid` of a `listCollections` entry.
fn uuid(entry: &Document) -> TestResult<Binary> {
    match entry.get_document("info")?.get("uuid") {
        Some(Bson::Binary(b)) => Ok(b.clone()),
        other => Err(format!("info.uuid is {other:?} in {entry}").into()),
    }
}

/// Renames `from` to `to` (both `db.collection`) on `admin`.
async fn rename(client: &Client, from: &str, to: &str, drop_target: bool) -> TestResult<Document> {
    run_command(
        client,
        "admin",
        doc! { "renameCollection": from, "to": to, "dropTarget": drop_target },
    )
    .await
}

// ---------------------------------------------------------------------------------------------
// create and listCollections
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn create_is_idempotent_with_the_same_options_only() -> TestResult {
    let (_server, client) = start().await?;
    let db = client.database("cat");

    db.create_collection("plain").await?;
    db.create_collection("plain").await?;
    let reply = run_command(&client, "cat", doc! { "create": "plain" }).await?;
    assert!(is_ok(&reply), "{reply}");

    // A collection created implicitly has no options; creating it explicitly is the same.
    insert_n(&client, "cat", "implicit", 1).await?;
    run_command(&client, "cat", doc! { "create": "implicit" }).await?;

    let with_options = doc! { "create": "opts", "storageEngine": { "wiredTiger": {} } };
    run_command(&client, "cat", with_options.clone()).await?;
    run_command(&client, "cat", with_options).await?;

    // Different options: NamespaceExists.
    let err = run_command_err(&client, "cat", doc! { "create": "opts" }).await?;
    assert_command_error(&err, 48, "NamespaceExists");
    let err = run_command_err(
        &client,
        "cat",
        doc! { "create": "plain", "storageEngine": { "wiredTiger": {} } },
    )
    .await?;
    assert_command_error(&err, 48, "NamespaceExists");

    assert_eq!(
        collection_names(&client, "cat").await?,
        set(&["implicit", "opts", "plain"])
    );
    // Re-creating kept the data.
    assert_eq!(
        coll(&client, "cat", "implicit")
            .count_documents(doc! {})
            .await?,
        1
    );
    Ok(())
}

#[tokio::test]
async fn list_collections_reply_shape() -> TestResult {
    let (_server, client) = start().await?;
    insert_n(&client, "cat", "b", 2).await?;
    run_command(
        &client,
        "cat",
        doc! { "create": "a", "storageEngine": { "wiredTiger": {} } },
    )
    .await?;

    let entries = list_collections(&client, "cat", doc! {}).await?;
    let mut listed = names(&entries);
    listed.sort_unstable();
    assert_eq!(listed, ["a", "b"]);
    for entry in &entries {
        let name = entry.get_str("name")?;
        assert_eq!(entry.get_str("type")?, "collection", "{entry}");
        let expected_options = if name == "a" {
            doc! { "storageEngine": { "wiredTiger": {} } }
        } else {
            doc! {}
        };
        assert_eq!(entry.get_document("options")?, &expected_options, "{entry}");
        let info = entry.get_document("info")?;
        assert!(!info.get_bool("readOnly")?, "{entry}");
        let id = uuid(entry)?;
        assert_eq!(id.subtype, BinarySubtype::Uuid, "{entry}");
        assert_eq!(id.bytes.len(), 16, "{entry}");
        assert_eq!(
            entry.get_document("idIndex")?,
            &doc! { "v": 2, "key": { "_id": 1 }, "name": "_id_" },
            "{entry}"
        );
    }
    assert_ne!(
        uuid(&entries[0])?,
        uuid(&entries[1])?,
        "UUIDs are per collection"
    );

    // nameOnly: name and type only.
    let entries = list_collections(&client, "cat", doc! { "nameOnly": true }).await?;
    assert_eq!(entries.len(), 2);
    for entry in &entries {
        assert_eq!(
            entry.keys().collect::<Vec<_>>(),
            ["name", "type"],
            "{entry}"
        );
    }

    // Filters, on the name and on the full entry.
    let entries = list_collections(&client, "cat", doc! { "filter": { "name": "b" } }).await?;
    assert_eq!(names(&entries), ["b"]);
    let entries = list_collections(
        &client,
        "cat",
        doc! { "filter": { "options.storageEngine": { "$exists": true } } },
    )
    .await?;
    assert_eq!(names(&entries), ["a"]);
    let entries = list_collections(
        &client,
        "cat",
        doc! { "filter": { "type": "view" }, "nameOnly": true },
    )
    .await?;
    assert!(entries.is_empty());

    // The driver's helpers agree.
    let names = client
        .database("cat")
        .list_collection_names()
        .filter(doc! { "name": { "$in": ["a", "zzz"] } })
        .await?;
    assert_eq!(names, ["a"]);
    let specs = specifications(&client, "cat").await?;
    assert_eq!(specs.len(), 2);
    for spec in &specs {
        assert_eq!(spec.collection_type, CollectionType::Collection);
        assert!(!spec.info.read_only);
        assert!(spec.info.uuid.is_some());
        assert!(spec.id_index.is_some());
    }

    // A database without collections lists nothing.
    assert!(
        list_collections(&client, "empty", doc! {})
            .await?
            .is_empty()
    );
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// drop and dropDatabase
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn drop_removes_a_collection_and_a_missing_one_is_ok() -> TestResult {
    let (_server, client) = start().await?;
    insert_n(&client, "cat", "gone", 3).await?;
    insert_n(&client, "cat", "kept", 2).await?;

    let reply = run_command(&client, "cat", doc! { "drop": "gone" }).await?;
    assert!(is_ok(&reply), "{reply}");
    assert_eq!(reply.get_str("ns")?, "cat.gone", "{reply}");
    assert_eq!(integer(reply.get("nIndexesWas")), Some(1), "{reply}");
    assert_eq!(collection_names(&client, "cat").await?, set(&["kept"]));
    assert_eq!(
        coll(&client, "cat", "gone")
            .count_documents(doc! {})
            .await?,
        0
    );
    assert_eq!(
        coll(&client, "cat", "kept")
            .count_documents(doc! {})
            .await?,
        2
    );

    // MongoDB 7.0: dropping what does not exist succeeds (SERVER-43894).
    let reply = run_command(&client, "cat", doc! { "drop": "gone" }).await?;
    assert!(is_ok(&reply), "{reply}");
    let reply = run_command(&client, "nodb", doc! { "drop": "x" }).await?;
    assert!(is_ok(&reply), "{reply}");

    coll(&client, "cat", "kept").drop().await?;
    assert!(collection_names(&client, "cat").await?.is_empty());
    assert!(!database_names(&client).await?.contains("cat"));
    Ok(())
}

#[tokio::test]
async fn drop_database_removes_every_collection() -> TestResult {
    let (_server, client) = start().await?;
    insert_n(&client, "doomed", "a", 3).await?;
    insert_n(&client, "doomed", "b", 2).await?;
    insert_n(&client, "other", "a", 1).await?;

    let reply = run_command(&client, "doomed", doc! { "dropDatabase": 1 }).await?;
    assert!(is_ok(&reply), "{reply}");
    assert!(collection_names(&client, "doomed").await?.is_empty());
    let dbs = database_names(&client).await?;
    assert!(!dbs.contains("doomed"), "{dbs:?}");
    assert!(dbs.contains("other"), "{dbs:?}");
    assert_eq!(
        coll(&client, "other", "a").count_documents(doc! {}).await?,
        1
    );

    // Again, and on a database that never existed: still ok.
    let reply = run_command(&client, "doomed", doc! { "dropDatabase": 1 }).await?;
    assert!(is_ok(&reply), "{reply}");
    client.database("never").drop().await?;
    Ok(())
}

#[tokio::test]
async fn dropped_documents_do_not_reappear() -> TestResult {
    let (_server, client) = start().await?;
    insert_n(&client, "cat", "c", 5).await?;
    let before = list_collections(&client, "cat", doc! {}).await?;
    let old_uuid = uuid(&before[0])?;

    // Implicit re-creation by an insert.
    coll(&client, "cat", "c").drop().await?;
    coll(&client, "cat", "c")
        .insert_one(doc! { "_id": 100 })
        .await?;
    let docs = coll(&client, "cat", "c").find(doc! {}).await?;
    let docs = common::drain(docs).await?;
    assert_eq!(docs, [doc! { "_id": 100 }]);
    let after = list_collections(&client, "cat", doc! {}).await?;
    assert_ne!(
        uuid(&after[0])?,
        old_uuid,
        "a new collection has a new UUID"
    );

    // Explicit re-creation.
    coll(&client, "cat", "c").drop().await?;
    client.database("cat").create_collection("c").await?;
    assert_eq!(coll(&client, "cat", "c").count_documents(doc! {}).await?, 0);
    assert_eq!(
        coll(&client, "cat", "c").estimated_document_count().await?,
        0
    );
    // An _id from before the drop can be used again.
    coll(&client, "cat", "c")
        .insert_one(doc! { "_id": 0 })
        .await?;

    // After dropDatabase.
    insert_n(&client, "db2", "c", 4).await?;
    client.database("db2").drop().await?;
    coll(&client, "db2", "c")
        .insert_one(doc! { "_id": "new" })
        .await?;
    assert_eq!(
        common::drain(coll(&client, "db2", "c").find(doc! {}).await?).await?,
        [doc! { "_id": "new" }]
    );
    let stats = run_command(&client, "db2", doc! { "dbStats": 1 }).await?;
    assert_eq!(integer(stats.get("objects")), Some(1), "{stats}");
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// listDatabases
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn list_databases_names_sizes_and_filters() -> TestResult {
    let (_server, client) = start().await?;
    insert_n(&client, "alpha", "c", 10).await?;
    insert_n(&client, "beta", "c", 1).await?;
    insert_n(&client, "beta", "d", 1).await?;

    let dbs = database_names(&client).await?;
    assert!(dbs.is_superset(&set(&["alpha", "beta"])), "{dbs:?}");

    let reply = run_command(&client, "admin", doc! { "listDatabases": 1 }).await?;
    let entries = reply.get_array("databases")?;
    let mut total = 0.0;
    let mut sizes = std::collections::BTreeMap::new();
    for entry in entries {
        let entry = entry.as_document().ok_or("entry is not a document")?;
        let size = number(entry.get("sizeOnDisk")).ok_or("sizeOnDisk is not a number")?;
        assert!(entry.get_bool("empty").is_ok(), "{entry}");
        total += size;
        sizes.insert(entry.get_str("name")?.to_owned(), size);
    }
    assert!(sizes["alpha"] > 0.0, "{sizes:?}");
    assert!(sizes["beta"] > 0.0, "{sizes:?}");
    assert!(
        sizes["alpha"] > sizes["beta"],
        "ten documents take more room: {sizes:?}"
    );
    assert_eq!(number(reply.get("totalSize")), Some(total), "{reply}");
    assert!(number(reply.get("totalSizeMb")).is_some(), "{reply}");

    let reply = run_command(
        &client,
        "admin",
        doc! { "listDatabases": 1, "nameOnly": true },
    )
    .await?;
    for entry in reply.get_array("databases")? {
        let entry = entry.as_document().ok_or("entry is not a document")?;
        assert_eq!(entry.keys().collect::<Vec<_>>(), ["name"], "{entry}");
    }
    assert!(!reply.contains_key("totalSize"), "{reply}");

    let reply = run_command(
        &client,
        "admin",
        doc! { "listDatabases": 1, "filter": { "name": "beta" } },
    )
    .await?;
    let entries = reply.get_array("databases")?;
    assert_eq!(entries.len(), 1, "{reply}");
    assert_eq!(
        entries[0]
            .as_document()
            .ok_or("not a document")?
            .get_str("name")?,
        "beta"
    );
    assert_eq!(
        number(reply.get("totalSize")),
        Some(sizes["beta"]),
        "{reply}"
    );

    let names = client
        .list_database_names()
        .filter(doc! { "name": { "$in": ["alpha", "zzz"] } })
        .await?;
    assert_eq!(names, ["alpha"]);

    let specs = client.list_databases().await?;
    let alpha = specs
        .iter()
        .find(|s| s.name == "alpha")
        .ok_or("alpha is not listed")?;
    assert!(alpha.size_on_disk > 0);
    assert!(!alpha.empty);

    // listDatabases belongs to admin.
    let err = run_command_err(&client, "alpha", doc! { "listDatabases": 1 }).await?;
    assert_command_error(&err, 13, "Unauthorized");
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// renameCollection
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn rename_keeps_documents_and_identity() -> TestResult {
    let (_server, client) = start().await?;
    insert_n(&client, "cat", "src", 4).await?;
    let before = list_collections(&client, "cat", doc! { "filter": { "name": "src" } }).await?;

    let reply = rename(&client, "cat.src", "cat.dst", false).await?;
    assert!(is_ok(&reply), "{reply}");
    assert_eq!(collection_names(&client, "cat").await?, set(&["dst"]));
    let docs = common::drain(
        coll(&client, "cat", "dst")
            .find(doc! {})
            .sort(doc! { "_id": 1 })
            .await?,
    )
    .await?;
    assert_eq!(
        docs,
        (0..4)
            .map(|i| doc! { "_id": i, "v": i })
            .collect::<Vec<_>>()
    );
    assert_eq!(
        coll(&client, "cat", "src").count_documents(doc! {}).await?,
        0
    );
    // A rename within a database keeps the collection's UUID.
    let after = list_collections(&client, "cat", doc! { "filter": { "name": "dst" } }).await?;
    assert_eq!(uuid(&after[0])?, uuid(&before[0])?);

    // The old name is free again, and independent.
    coll(&client, "cat", "src")
        .insert_one(doc! { "_id": "fresh" })
        .await?;
    assert_eq!(
        coll(&client, "cat", "src").count_documents(doc! {}).await?,
        1
    );
    assert_eq!(
        coll(&client, "cat", "dst").count_documents(doc! {}).await?,
        4
    );

    // Across databases.
    rename(&client, "cat.dst", "elsewhere.moved", false).await?;
    assert_eq!(
        coll(&client, "elsewhere", "moved")
            .count_documents(doc! {})
            .await?,
        4
    );
    assert_eq!(collection_names(&client, "cat").await?, set(&["src"]));
    Ok(())
}

#[tokio::test]
async fn rename_with_drop_target_replaces_the_target() -> TestResult {
    let (_server, client) = start().await?;
    insert_n(&client, "cat", "src", 3).await?;
    coll(&client, "cat", "dst")
        .insert_many([doc! { "_id": "old1" }, doc! { "_id": "old2" }])
        .await?;

    let err = run_command_err(
        &client,
        "admin",
        doc! { "renameCollection": "cat.src", "to": "cat.dst" },
    )
    .await?;
    assert_command_error(&err, 48, "NamespaceExists");
    assert_eq!(err.message, "target namespace exists");
    assert_eq!(
        coll(&client, "cat", "dst").count_documents(doc! {}).await?,
        2
    );

    rename(&client, "cat.src", "cat.dst", true).await?;
    assert_eq!(collection_names(&client, "cat").await?, set(&["dst"]));
    let ids: Vec<Bson> = common::drain(
        coll(&client, "cat", "dst")
            .find(doc! {})
            .sort(doc! { "_id": 1 })
            .await?,
    )
    .await?
    .iter()
    .map(|d| d.get("_id").cloned().unwrap_or(Bson::Null))
    .collect();
    assert_eq!(ids, [Bson::Int32(0), Bson::Int32(1), Bson::Int32(2)]);

    // dropTarget with no target is a plain rename.
    rename(&client, "cat.dst", "cat.third", true).await?;
    assert_eq!(collection_names(&client, "cat").await?, set(&["third"]));
    Ok(())
}

#[tokio::test]
async fn rename_errors() -> TestResult {
    let (_server, client) = start().await?;
    insert_n(&client, "cat", "src", 1).await?;

    let err = run_command_err(
        &client,
        "admin",
        doc! { "renameCollection": "cat.missing", "to": "cat.x" },
    )
    .await?;
    assert_command_error(&err, 26, "NamespaceNotFound");
    assert_eq!(err.message, "Source collection cat.missing does not exist");

    let err = run_command_err(
        &client,
        "cat",
        doc! { "renameCollection": "cat.src", "to": "cat.x" },
    )
    .await?;
    assert_command_error(&err, 13, "Unauthorized");
    assert_eq!(
        err.message,
        "renameCollection may only be run against the admin database."
    );

    let err = run_command_err(
        &client,
        "admin",
        doc! { "renameCollection": "cat.src", "to": "cat.src" },
    )
    .await?;
    assert_command_error(&err, 20, "IllegalOperation");

    for bad_target in ["cat.system.x", "cat.a$b", "c$t.x"] {
        let err = run_command_err(
            &client,
            "admin",
            doc! { "renameCollection": "cat.src", "to": bad_target },
        )
        .await?;
        assert_command_error(&err, 73, "InvalidNamespace");
    }
    assert_eq!(collection_names(&client, "cat").await?, set(&["src"]));
    assert_eq!(
        coll(&client, "cat", "src").count_documents(doc! {}).await?,
        1
    );
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// collStats and dbStats
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn coll_stats_and_db_stats_count_documents() -> TestResult {
    let (_server, client) = start().await?;
    insert_n(&client, "stats", "a", 7).await?;
    insert_n(&client, "stats", "b", 3).await?;
    client.database("stats").create_collection("empty").await?;

    let stats = run_command(&client, "stats", doc! { "collStats": "a" }).await?;
    assert_eq!(stats.get_str("ns")?, "stats.a");
    assert_eq!(integer(stats.get("count")), Some(7), "{stats}");
    let size = integer(stats.get("size")).ok_or("size is not an integer")?;
    assert!(size > 0, "{stats}");
    assert_eq!(integer(stats.get("avgObjSize")), Some(size / 7), "{stats}");
    assert_eq!(integer(stats.get("nindexes")), Some(1), "{stats}");
    assert!(
        stats.get_document("indexSizes")?.contains_key("_id_"),
        "{stats}"
    );
    assert!(!stats.get_bool("capped")?, "{stats}");

    let stats = run_command(&client, "stats", doc! { "collStats": "empty" }).await?;
    assert_eq!(integer(stats.get("count")), Some(0), "{stats}");
    assert_eq!(integer(stats.get("size")), Some(0), "{stats}");

    coll(&client, "stats", "a")
        .delete_many(doc! { "v": { "$lt": 2 } })
        .await?;
    let stats = run_command(&client, "stats", doc! { "collStats": "a" }).await?;
    assert_eq!(integer(stats.get("count")), Some(5), "{stats}");
    assert!(integer(stats.get("size")).ok_or("size")? < size, "{stats}");

    let db = run_command(&client, "stats", doc! { "dbStats": 1 }).await?;
    assert_eq!(db.get_str("db")?, "stats");
    assert_eq!(integer(db.get("collections")), Some(3), "{db}");
    assert_eq!(integer(db.get("objects")), Some(8), "{db}");
    assert_eq!(integer(db.get("indexes")), Some(3), "{db}");
    assert!(number(db.get("dataSize")).is_some_and(|s| s > 0.0), "{db}");
    assert!(is_ok(&db));

    let db = run_command(&client, "nothing", doc! { "dbStats": 1 }).await?;
    assert_eq!(integer(db.get("collections")), Some(0), "{db}");
    assert_eq!(integer(db.get("objects")), Some(0), "{db}");
    Ok(())
}

#[tokio::test]
async fn coll_stats_of_a_missing_collection_is_empty() -> TestResult {
    let (_server, client) = start().await?;
    let stats = run_command(&client, "stats", doc! { "collStats": "missing" }).await?;
    assert_eq!(stats.get_str("ns")?, "stats.missing");
    assert_eq!(integer(stats.get("count")), Some(0), "{stats}");
    assert_eq!(integer(stats.get("size")), Some(0), "{stats}");
    assert_eq!(integer(stats.get("nindexes")), Some(0), "{stats}");
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Namespace validation
// ---------------------------------------------------------------------------------------------

/// Runs `command` on `db` over a raw connection (the driver may refuse odd database names).
async fn raw_command(conn: &mut RawConn, db: &str, command: Document) -> TestResult<Document> {
    Ok(conn.command(db, command).await?)
}

#[tokio::test]
async fn invalid_names_are_invalid_namespace() -> TestResult {
    let (server, client) = start().await?;
    let mut conn = server.raw().await?;

    let long_db = "d".repeat(64);
    for db in [
        "",
        "a$b",
        "a.b",
        "a b",
        "a/b",
        "a\\b",
        "a\"b",
        long_db.as_str(),
    ] {
        for command in [
            doc! { "insert": "c", "documents": [{ "_id": 1 }] },
            doc! { "create": "c" },
            doc! { "find": "c" },
        ] {
            let reply = raw_command(&mut conn, db, command.clone()).await?;
            assert_error(&reply, 73, "InvalidNamespace");
            assert!(
                !reply.contains_key("cursor"),
                "db {db:?}, {command}: {reply}"
            );
        }
    }
    // 63 characters is the longest database name.
    let longest_db = "d".repeat(63);
    let reply = raw_command(
        &mut conn,
        &longest_db,
        doc! { "insert": "c", "documents": [{ "_id": 1 }] },
    )
    .await?;
    assert!(is_ok(&reply), "{reply}");
    assert_eq!(reply.get_i32("n")?, 1, "{reply}");

    // "db.collection" may have up to 255 bytes.
    let longest = "c".repeat(255 - "cat.".len());
    let too_long = "c".repeat(256 - "cat.".len());
    for name in [
        "",
        "a$b",
        "$cmd",
        "system.foo",
        "system.indexes",
        ".a",
        too_long.as_str(),
    ] {
        let err = run_command_err(
            &client,
            "cat",
            doc! { "insert": name, "documents": [{ "_id": 1 }] },
        )
        .await?;
        assert_command_error(&err, 73, "InvalidNamespace");
        let err = run_command_err(&client, "cat", doc! { "create": name }).await?;
        assert_command_error(&err, 73, "InvalidNamespace");
    }
    coll(&client, "cat", &longest)
        .insert_one(doc! { "_id": 1 })
        .await?;
    let err = coll(&client, "cat", "a$b")
        .insert_one(doc! { "_id": 1 })
        .await
        .expect_err("the driver passes the name through");
    assert_command_error(
        common::command_error(&err).ok_or("not a command error")?,
        73,
        "InvalidNamespace",
    );

    // Nothing invalid was created.
    assert_eq!(
        collection_names(&client, "cat").await?,
        set(&[longest.as_str()])
    );
    let dbs = database_names(&client).await?;
    assert_eq!(dbs, set(&["cat", longest_db.as_str()]));
    Ok(())
}

#[tokio::test]
async fn system_namespaces_can_be_read_and_system_js_written() -> TestResult {
    let (_server, client) = start().await?;
    let found = common::drain(coll(&client, "cat", "system.foo").find(doc! {}).await?).await?;
    assert!(found.is_empty());
    coll(&client, "cat", "system.js")
        .insert_one(doc! { "_id": "f", "value": "function() { return 1; }" })
        .await?;
    assert_eq!(
        coll(&client, "cat", "system.js")
            .count_documents(doc! {})
            .await?,
        1
    );
    Ok(())
}

/// mongod's `DatabaseDifferCase` (13297): while `dbcase` holds a collection, no command may
/// create one in a database whose name differs from it only in case. Inserts and upserts
/// report it per statement (each statement that needs the collection, the first only when
/// ordered); the other commands fail with it.
#[tokio::test]
async fn database_names_differing_only_in_case_are_refused() -> TestResult {
    let (_server, client) = start().await?;
    insert_n(&client, "dbcase", "c", 1).await?;
    let message = "db already exists with different case already have: [dbcase] trying to \
                   create [DBcase]";
    let check = |e: &Document, index: i32| {
        assert_eq!(e.get_i32("index").ok(), Some(index), "{e}");
        assert_eq!(e.get_i32("code").ok(), Some(13297), "{e}");
        assert_eq!(e.get_str("errmsg").ok(), Some(message), "{e}");
    };

    let reply = run_command(
        &client,
        "DBcase",
        doc! { "insert": "c", "documents": [{ "_id": 1 }, { "_id": 2 }] },
    )
    .await?;
    assert_eq!(integer(reply.get("n")), Some(0), "{reply}");
    let errors = common::write_errors(&reply);
    assert_eq!(errors.len(), 1, "{reply}");
    check(&errors[0], 0);
    // Unordered: each document, and one with its own error keeps that error.
    let reply = run_command(
        &client,
        "DBcase",
        doc! {
            "insert": "c",
            "documents": [{ "_id": 1 }, { "_id": [2] }, { "_id": 3 }],
            "ordered": false,
        },
    )
    .await?;
    let errors = common::write_errors(&reply);
    assert_eq!(errors.len(), 3, "{reply}");
    check(&errors[0], 0);
    assert_ne!(errors[1].get_i32("code").ok(), Some(13297), "{reply}");
    check(&errors[2], 2);
    // An update creates the collection only for an upsert.
    let reply = run_command(
        &client,
        "DBcase",
        doc! { "update": "c", "updates": [
            { "q": { "_id": 1 }, "u": { "$set": { "a": 1 } } },
            { "q": { "_id": 1 }, "u": { "$set": { "a": 1 } }, "upsert": true },
        ] },
    )
    .await?;
    assert_eq!(integer(reply.get("n")), Some(0), "{reply}");
    let errors = common::write_errors(&reply);
    assert_eq!(errors.len(), 1, "{reply}");
    check(&errors[0], 1);

    for (db, command) in [
        ("DBcase", doc! { "create": "c" }),
        (
            "DBCASE",
            doc! { "createIndexes": "c", "indexes": [{ "key": { "a": 1 }, "name": "a_1" }] },
        ),
        (
            "dbCase",
            doc! { "findAndModify": "c", "query": {}, "update": { "a": 1 }, "upsert": true },
        ),
        (
            "admin",
            doc! { "renameCollection": "dbcase.c", "to": "DBcase.c" },
        ),
        (
            "dbcase",
            doc! { "aggregate": "c", "pipeline": [{ "$out": { "db": "DbCase", "coll": "o" } }], "cursor": {} },
        ),
    ] {
        let err = run_command_err(&client, db, command.clone()).await?;
        assert_command_error(&err, 13297, "DatabaseDifferCase");
        assert!(
            err.message
                .starts_with("db already exists with different case already have: [dbcase]"),
            "{command}: {err:?}"
        );
    }
    assert_eq!(database_names(&client).await?, set(&["dbcase"]));

    // Dropping its last collection leaves `dbcase` open, as in mongod; `dropDatabase` closes
    // it, and the other spelling is free.
    coll(&client, "dbcase", "c").drop().await?;
    let err = run_command_err(&client, "DBcase", doc! { "create": "c" }).await?;
    assert_command_error(&err, 13297, "DatabaseDifferCase");
    client.database("dbcase").drop().await?;
    insert_n(&client, "DBcase", "c", 1).await?;
    assert_eq!(database_names(&client).await?, set(&["DBcase"]));
    Ok(())
}
