use std::ops::Bound::Unbounded;

use bson::rawdoc;

use super::*;
use crate::storage::MemoryStorage;

/// A store with nothing in it: no format marker either.
fn bare() -> Arc<GroupCommit> {
    Arc::new(GroupCommit::new(Arc::new(MemoryStorage::new())))
}

/// A store marked with the current key format, as `Catalog::open` leaves a new one: tests
/// may write documents in it before opening a catalog.
fn store() -> Arc<GroupCommit> {
    let store = bare();
    let mut batch = Batch::new();
    batch.put(
        Keyspace::Catalog,
        FORMAT_KEY.to_vec(),
        KEY_FORMAT.to_be_bytes().to_vec(),
    );
    store.commit(batch).unwrap();
    store
}

fn count(store: &GroupCommit, ks: Keyspace) -> usize {
    store
        .storage()
        .snapshot()
        .range(ks, Unbounded, Unbounded, false)
        .count()
}

fn put_docs(store: &GroupCommit, collection_id: u64, docs: &[RawDocumentBuf]) {
    let mut batch = Batch::new();
    for (rid, d) in (1..).zip(docs) {
        batch.put(
            Keyspace::Docs,
            record::doc_key(collection_id, rid).to_vec(),
            record::encode(0, record::NEVER, d),
        );
    }
    store.commit(batch).unwrap();
}

fn format_of(store: &GroupCommit) -> Option<Vec<u8>> {
    store
        .storage()
        .get(Keyspace::Catalog, &FORMAT_KEY)
        .unwrap()
        .map(|v| v.to_vec())
}

/// A new store is marked with the key format; a store of format 1 (documents and no
/// marker) is moved to the current one (`migrate.rs`); a later format is refused.
#[test]
fn stores_of_other_key_formats() {
    let fresh = bare();
    drop(Catalog::open(Arc::clone(&fresh)).unwrap());
    assert_eq!(format_of(&fresh), Some(vec![0, 0, 0, 4]));
    Catalog::open(Arc::clone(&fresh)).unwrap();

    let old = bare();
    put_docs(&old, 7, &[rawdoc! { "_id": 1, "a": [{ "b": 2.5 }] }]);
    Catalog::open(Arc::clone(&old)).unwrap();
    assert_eq!(format_of(&old), Some(vec![0, 0, 0, 4]));

    // Format 3 differs only by oplog runs: its marker is rewritten, nothing else moves.
    let three = bare();
    put_docs(&three, 7, &[rawdoc! { "_id": 1 }]);
    let mut batch = Batch::new();
    batch.put(Keyspace::Catalog, FORMAT_KEY.to_vec(), vec![0, 0, 0, 3]);
    three.commit(batch).unwrap();
    Catalog::open(Arc::clone(&three)).unwrap();
    assert_eq!(format_of(&three), Some(vec![0, 0, 0, 4]));

    let newer = bare();
    let mut batch = Batch::new();
    batch.put(Keyspace::Catalog, FORMAT_KEY.to_vec(), vec![0, 0, 0, 5]);
    newer.commit(batch).unwrap();
    let Err(e) = Catalog::open(Arc::clone(&newer)) else {
        panic!("a format 5 store was opened");
    };
    assert!(matches!(e, StorageError::UnsupportedFormat(_)), "{e}");
    assert!(e.to_string().contains("key format 5"), "{e}");
}

fn purge_all(catalog: &Catalog) {
    let mut cursor = super::PurgeCursor::default();
    while catalog.purge_dropped(&mut cursor).unwrap() > 0 {}
}

/// mongod's messages for bad database names (checked against MongoDB's `create` replies).
#[test]
fn database_name_messages() {
    let long = "a".repeat(64);
    let cases = [
        ("a.b", "'.' is an invalid character in a db name: a.b"),
        (
            long.as_str(),
            "db name must be at most 63 characters, found: 64",
        ),
        (
            "a\0b",
            "database names cannot have embedded null characters",
        ),
        ("/", "Invalid namespace specified '/.c'"),
        ("\\", "Invalid namespace specified '\\.c'"),
        ("data base", "Invalid namespace specified 'data base.c'"),
        ("name_with_a-$", "Invalid namespace: name_with_a-$.c"),
        ("", "Invalid namespace specified '.c'"),
    ];
    for (db, msg) in cases {
        let err = validate_writable(db, "c").unwrap_err();
        assert_eq!(err.code, ErrorCode::InvalidNamespace, "{db}");
        assert_eq!(err.errmsg, msg, "{db}");
    }
    assert!(validate_writable(&"a".repeat(63), "c").is_ok());
    assert!(validate_writable("データベース", "c").is_ok());
    assert_eq!(
        validate_db_name("a/b").unwrap_err().errmsg,
        "Invalid database name: 'a/b'"
    );
    assert_eq!(
        validate_db_name("a.b").unwrap_err().errmsg,
        "'.' is an invalid character in a db name: a.b"
    );
}

/// Database names that differ only in case never coexist, on every path that creates a
/// collection; the same name, or a name once its database is empty, is fine.
#[test]
fn database_names_differing_in_case_are_refused() {
    let catalog = Catalog::open(store()).unwrap();
    catalog.create("test", "c", RawDocumentBuf::new()).unwrap();
    let err = catalog
        .create("Test", "c", RawDocumentBuf::new())
        .unwrap_err();
    assert_eq!(err.code, ErrorCode::DatabaseDifferCase);
    assert_eq!(err.code.code(), 13297);
    assert_eq!(
        err.errmsg,
        "db already exists with different case already have: [test] trying to create [Test]"
    );
    assert_eq!(
        catalog.get_or_create("TEST", "d").unwrap_err().code,
        ErrorCode::DatabaseDifferCase
    );
    let replaced = catalog.replace_collection("tEst", "out", |_| Ok(((), Batch::new())));
    assert_eq!(replaced.unwrap_err().code, ErrorCode::DatabaseDifferCase);
    let renamed = catalog.rename(("test", "c"), ("Test", "c"), false);
    assert_eq!(renamed.unwrap_err().code, ErrorCode::DatabaseDifferCase);
    assert_eq!(catalog.databases(), vec!["test".to_owned()]);
    // The same database, and names that differ otherwise, are fine.
    catalog.create("test", "d", RawDocumentBuf::new()).unwrap();
    catalog.create("test2", "c", RawDocumentBuf::new()).unwrap();
    catalog
        .rename(("test", "d"), ("test2", "d"), false)
        .unwrap();
    // Dropping the last collection leaves the database open, as in mongod; closing it
    // (`dropDatabase`) frees the name, and so does a restart.
    catalog.drop_collection("test", "c").unwrap();
    assert_eq!(
        catalog
            .create("Test", "c", RawDocumentBuf::new())
            .unwrap_err()
            .code,
        ErrorCode::DatabaseDifferCase
    );
    catalog.close_database("test");
    catalog.create("Test", "c", RawDocumentBuf::new()).unwrap();
    catalog.drop_collection("Test", "c").unwrap();
    let store = Arc::clone(catalog.store());
    drop(catalog);
    let catalog = Catalog::open(store).unwrap();
    catalog.create("TEST", "c", RawDocumentBuf::new()).unwrap();
}

/// A build that never finished (the server was killed during it) leaves a building marker
/// and some entries: the next start turns it into a dropped marker, whose purge removes them.
#[test]
fn interrupted_builds_are_removed_at_startup() {
    let store = store();
    let catalog = Catalog::open(Arc::clone(&store)).unwrap();
    let (c, _) = catalog.create("db", "c", RawDocumentBuf::new()).unwrap();
    put_docs(&store, c.id, &[rawdoc! { "_id": 1, "a": 1 }]);
    let mut batch = Batch::new();
    let orphan = 999;
    batch.put(Keyspace::Catalog, building_key(orphan), Vec::new());
    for i in 0..3_u8 {
        batch.put(
            Keyspace::Index,
            crate::index::entry_key(orphan, &[i], 1).unwrap(),
            Vec::new(),
        );
    }
    store.commit(batch).unwrap();
    drop(catalog);
    let catalog = Catalog::open(Arc::clone(&store)).unwrap();
    assert!(
        store
            .storage()
            .get(Keyspace::Catalog, &building_key(orphan))
            .unwrap()
            .is_none()
    );
    purge_all(&catalog);
    assert_eq!(count(&store, Keyspace::Index), 0);
    assert_eq!(count(&store, Keyspace::Docs), 1);
}

/// A record written before index entries existed (no ids) gets its indexes built at open;
/// a dropped index's entries are then removed by the purge.
#[test]
fn indexes_of_old_records_are_built_and_dropped_entries_purged() {
    let store = store();
    let old = rawdoc! {
        "db": "db", "name": "c", "id": 5_i64, "options": {},
        "indexes": [
            { "v": 2, "key": { "a": 1 }, "name": "a_1" },
            { "v": 2, "key": { "_ts": 1 }, "name": "_ts_1", "expireAfterSeconds": 60 },
        ],
    };
    let mut batch = Batch::new();
    batch.put(Keyspace::Catalog, record_key("db", "c"), old.into_bytes());
    batch.put(
        Keyspace::Catalog,
        NEXT_ID_KEY.to_vec(),
        6_u64.to_be_bytes().to_vec(),
    );
    store.commit(batch).unwrap();
    put_docs(
        &store,
        5,
        &[
            rawdoc! { "_id": 1, "a": 1 },
            rawdoc! { "_id": 2, "a": [2, 3] },
            rawdoc! { "_id": 3 },
        ],
    );
    let catalog = Catalog::open(Arc::clone(&store)).unwrap();
    let c = catalog.get("db", "c").unwrap();
    assert_eq!(c.indexes[0].id, 6);
    assert!(c.indexes[0].is_multikey());
    // The `_ts` TTL index is a policy without entries.
    assert_eq!(c.indexes[1].id, 0);
    assert_eq!(count(&store, Keyspace::Index), 4);
    // Ids and flags are in the record now: a second open builds nothing.
    drop(catalog);
    let catalog = Catalog::open(Arc::clone(&store)).unwrap();
    let c = catalog.get("db", "c").unwrap();
    assert_eq!((c.indexes[0].id, c.indexes[0].is_multikey()), (6, true));
    assert_eq!(count(&store, Keyspace::Index), 4);

    catalog
        .change_indexes("db", "c", false, 0, |_, indexes| {
            indexes.retain(|i| i.name != "a_1");
            Ok(())
        })
        .unwrap();
    purge_all(&catalog);
    assert_eq!(count(&store, Keyspace::Index), 0);
    assert_eq!(count(&store, Keyspace::Docs), 3);
}

/// A dropped collection's documents and expiry entries go in batches that each go on from
/// the last key removed (not from the first key, through the tombstones before it); a
/// fresh cursor (a restart) and a second dropped collection are handled too, and keys of
/// live collections stay.
#[test]
fn dropped_data_is_purged_in_batches_that_go_on() {
    let store = store();
    let catalog = Catalog::open(Arc::clone(&store)).unwrap();
    let mut ids = Vec::new();
    for name in ["a", "b", "keep"] {
        let (c, _) = catalog.create("db", name, RawDocumentBuf::new()).unwrap();
        let docs: Vec<RawDocumentBuf> = (0..2_500).map(|i| rawdoc! { "_id": i }).collect();
        put_docs(&store, c.id, &docs);
        let mut batch = Batch::new();
        for rid in 1..=2_500 {
            batch.put(
                Keyspace::Expiry,
                crate::ttl::expiry_key(c.id, 5, rid).to_vec(),
                Vec::new(),
            );
        }
        store.commit(batch).unwrap();
        ids.push(c.id);
    }
    catalog.drop_collection("db", "a").unwrap();
    catalog.drop_collection("db", "b").unwrap();
    let mut cursor = super::PurgeCursor::default();
    assert_eq!(catalog.purge_dropped(&mut cursor).unwrap(), 2 * PURGE_BATCH);
    assert_eq!(count(&store, Keyspace::Docs), 3 * 2_500 - PURGE_BATCH);
    assert_eq!(cursor.id, Some(ids[0]));
    // A restart forgets where the removal was: it starts again at the first key left.
    let mut cursor = super::PurgeCursor::default();
    assert_eq!(catalog.purge_dropped(&mut cursor).unwrap(), 2 * PURGE_BATCH);
    purge_all_with(&catalog, &mut cursor);
    assert_eq!(count(&store, Keyspace::Docs), 2_500);
    assert_eq!(count(&store, Keyspace::Expiry), 2_500);
    let left = record::collection_prefix(ids[2]);
    let snapshot = store.storage().snapshot();
    assert_eq!(snapshot.prefix(Keyspace::Docs, &left).count(), 2_500);
    assert!(catalog.get("db", "keep").is_some());
}

fn purge_all_with(catalog: &Catalog, cursor: &mut super::PurgeCursor) {
    while catalog.purge_dropped(cursor).unwrap() > 0 {}
}
