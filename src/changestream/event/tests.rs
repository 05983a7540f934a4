//! Events asserted field for field, in order, against the documents mongod's
//! `document_source_change_stream_test.cpp` expects and the manual's change event pages show.

use std::cell::RefCell;

use bson::{Binary, DateTime, RawDocument, RawDocumentBuf, Timestamp, Uuid, rawdoc};

use super::*;
use crate::changestream::spec::{FullDocument, FullDocumentBeforeChange, Scope, Spec};

const TS: Timestamp = Timestamp {
    time: 1_700_000_000,
    increment: 3,
};

fn uuid() -> Uuid {
    Uuid::from_bytes([0x69; 16])
}

fn ui() -> Binary {
    Binary {
        subtype: bson::spec::BinarySubtype::Uuid,
        bytes: uuid().bytes().to_vec(),
    }
}

fn wall() -> DateTime {
    DateTime::from_millis(1_700_000_000_123)
}

fn coll_scope() -> Scope {
    Scope::Collection {
        db: "test".into(),
        coll: "c".into(),
    }
}

fn db_scope() -> Scope {
    Scope::Database { db: "test".into() }
}

fn expanded() -> Spec {
    Spec {
        show_expanded_events: true,
        ..Spec::default()
    }
}

fn entry(op: &str, ns: &str, o: RawDocumentBuf) -> RawDocumentBuf {
    rawdoc! { "op": op, "ns": ns, "ui": ui(), "o": o, "ts": TS, "t": 1_i64, "v": 2, "wall": wall() }
}

fn with(mut doc: RawDocumentBuf, key: &str, value: impl Into<bson::RawBson>) -> RawDocumentBuf {
    let key = <&bson::raw::CStr>::try_from(key).unwrap();
    doc.append(key, value.into());
    doc
}

/// Images that answer from fixed documents and record what was asked.
#[derive(Default)]
struct Fixed {
    current: Option<RawDocumentBuf>,
    pre: Option<RawDocumentBuf>,
    asked: RefCell<Vec<String>>,
}

impl Images for Fixed {
    fn current(
        &self,
        ns: &str,
        uuid: &Uuid,
        document_key: &RawDocument,
    ) -> Result<Option<RawDocumentBuf>, CommandError> {
        self.asked.borrow_mut().push(format!(
            "current {ns} {uuid} {}",
            crate::changestream::token::document_to_string(document_key)
        ));
        Ok(self.current.clone())
    }

    fn pre_image(
        &self,
        uuid: &Uuid,
        ts: Timestamp,
        apply_ops_index: u32,
    ) -> Result<Option<RawDocumentBuf>, CommandError> {
        self.asked
            .borrow_mut()
            .push(format!("pre {uuid} {ts} {apply_ops_index}"));
        Ok(self.pre.clone())
    }
}

fn docs(entry: &RawDocument, scope: &Scope, spec: &Spec) -> Vec<RawDocumentBuf> {
    events(entry, scope, spec)
        .unwrap()
        .iter()
        .map(|e| e.document(spec, &Fixed::default()).unwrap())
        .collect()
}

fn token(op: &str, key_name: &str, key: RawDocumentBuf) -> ResumeTokenData {
    let mut ident = rawdoc! { "operationType": op };
    ident.append(<&bson::raw::CStr>::try_from(key_name).unwrap(), key);
    ResumeTokenData::event(TS, 0, Some(uuid()), ident)
}

fn assert_doc(actual: &RawDocumentBuf, expected: &RawDocumentBuf) {
    assert_eq!(
        bson::Document::try_from(actual.as_ref()).unwrap(),
        bson::Document::try_from(expected.as_ref()).unwrap()
    );
    // Same bytes: same fields in the same order.
    assert_eq!(actual.as_bytes(), expected.as_bytes());
}

#[test]
fn insert() {
    let e = with(
        entry("i", "test.c", rawdoc! { "_id": 1, "x": 2 }),
        "o2",
        rawdoc! { "_id": 1 },
    );
    let evs = events(&e, &coll_scope(), &Spec::default()).unwrap();
    assert_eq!(evs.len(), 1);
    let t = token("insert", "documentKey", rawdoc! { "_id": 1 });
    assert_eq!(evs[0].token, t);
    assert!(!evs[0].invalidate && !evs[0].needs_images());
    let doc = evs[0]
        .document(&Spec::default(), &Fixed::default())
        .unwrap();
    assert_doc(
        &doc,
        &rawdoc! {
            "_id": t.to_document(),
            "operationType": "insert",
            "clusterTime": TS,
            "wallTime": wall(),
            "fullDocument": { "_id": 1, "x": 2 },
            "ns": { "db": "test", "coll": "c" },
            "documentKey": { "_id": 1 },
        },
    );
    // Without o2 (entries before 5.3), the documentKey is the _id.
    let e = entry("i", "test.c", rawdoc! { "_id": 7, "x": 2 });
    let doc = &docs(&e, &coll_scope(), &Spec::default())[0];
    assert_eq!(
        doc.get_document("documentKey").unwrap(),
        &*rawdoc! { "_id": 7 }
    );
    // Expanded: collectionUUID after clusterTime.
    let doc = &docs(&e, &coll_scope(), &expanded())[0];
    let keys: Vec<&str> = doc.iter().map(|r| r.unwrap().0.as_str()).collect();
    assert_eq!(
        keys,
        [
            "_id",
            "operationType",
            "clusterTime",
            "collectionUUID",
            "wallTime",
            "fullDocument",
            "ns",
            "documentKey"
        ]
    );
    assert_eq!(doc.get_binary("collectionUUID").unwrap().bytes, [0x69; 16]);
}

#[test]
fn scope_filters() {
    let ins = |ns: &str| entry("i", ns, rawdoc! { "_id": 1 });
    let seen = |ns: &str, scope: &Scope, spec: &Spec| !docs(&ins(ns), scope, spec).is_empty();
    let plain = Spec::default();
    assert!(seen("test.c", &coll_scope(), &plain));
    assert!(!seen("test.d", &coll_scope(), &plain));
    assert!(!seen("other.c", &coll_scope(), &plain));
    assert!(seen("test.d", &db_scope(), &plain));
    assert!(!seen("other.d", &db_scope(), &plain));
    assert!(!seen("test.system.views", &db_scope(), &plain));
    assert!(!seen("test.system.js", &db_scope(), &plain));
    let system = Spec {
        show_system_events: true,
        ..Spec::default()
    };
    assert!(seen("test.system.js", &db_scope(), &system));
    assert!(seen("test.system.buckets.x", &Scope::Cluster, &system));
    assert!(!seen("test.system.users", &db_scope(), &system));
    assert!(seen("other.d", &Scope::Cluster, &plain));
    for internal in ["admin.x", "config.x", "local.x", "test.system.profile"] {
        assert!(!seen(internal, &Scope::Cluster, &plain), "{internal}");
    }
    // No-ops and entries of chunk migrations are never events.
    assert!(
        docs(
            &entry("n", "test.c", rawdoc! { "msg": "x" }),
            &coll_scope(),
            &plain
        )
        .is_empty()
    );
    let migrated = with(ins("test.c"), "fromMigrate", true);
    assert!(docs(&migrated, &coll_scope(), &plain).is_empty());
}

#[test]
fn update_replace_delete() {
    let up = with(
        entry(
            "u",
            "test.c",
            rawdoc! { "$v": 2, "diff": { "d": { "b": false }, "u": { "a": 5 } } },
        ),
        "o2",
        rawdoc! { "_id": 1 },
    );
    let t = token("update", "documentKey", rawdoc! { "_id": 1 });
    assert_doc(
        &docs(&up, &coll_scope(), &Spec::default())[0],
        &rawdoc! {
            "_id": t.to_document(),
            "operationType": "update",
            "clusterTime": TS,
            "wallTime": wall(),
            "ns": { "db": "test", "coll": "c" },
            "documentKey": { "_id": 1 },
            "updateDescription": {
                "updatedFields": { "a": 5 },
                "removedFields": ["b"],
                "truncatedArrays": [],
            },
        },
    );
    // Expanded events add disambiguatedPaths.
    let doc = &docs(&up, &coll_scope(), &expanded())[0];
    assert!(
        doc.get_document("updateDescription")
            .unwrap()
            .get("disambiguatedPaths")
            .unwrap()
            .is_some()
    );
    // showRawUpdateDescription: the oplog's o.
    let raw = Spec {
        show_raw_update_description: true,
        ..Spec::default()
    };
    let doc = &docs(&up, &coll_scope(), &raw)[0];
    assert_eq!(
        doc.get_document("rawUpdateDescription").unwrap(),
        &*rawdoc! { "$v": 2, "diff": { "d": { "b": false }, "u": { "a": 5 } } }
    );

    let replace = with(
        entry("u", "test.c", rawdoc! { "_id": 1, "z": 1 }),
        "o2",
        rawdoc! { "_id": 1 },
    );
    let t = token("replace", "documentKey", rawdoc! { "_id": 1 });
    assert_doc(
        &docs(&replace, &coll_scope(), &Spec::default())[0],
        &rawdoc! {
            "_id": t.to_document(),
            "operationType": "replace",
            "clusterTime": TS,
            "wallTime": wall(),
            "fullDocument": { "_id": 1, "z": 1 },
            "ns": { "db": "test", "coll": "c" },
            "documentKey": { "_id": 1 },
        },
    );

    let del = entry("d", "test.c", rawdoc! { "_id": 1 });
    let t = token("delete", "documentKey", rawdoc! { "_id": 1 });
    assert_doc(
        &docs(&del, &coll_scope(), &Spec::default())[0],
        &rawdoc! {
            "_id": t.to_document(),
            "operationType": "delete",
            "clusterTime": TS,
            "wallTime": wall(),
            "ns": { "db": "test", "coll": "c" },
            "documentKey": { "_id": 1 },
        },
    );

    // An update that is neither $v: 2 nor a replacement.
    let bad = with(
        entry("u", "test.c", rawdoc! { "$v": 1, "$set": { "a": 1 } }),
        "o2",
        rawdoc! { "_id": 1 },
    );
    let e = events(&bad, &coll_scope(), &Spec::default()).unwrap_err();
    assert_eq!(e.code.code(), 6_741_200);
    assert_eq!(e.errmsg, "Unsupported or missing oplog version, $v: 1");
    // A malformed entry.
    let bad_wall =
        rawdoc! { "op": "i", "ns": "test.c", "ui": ui(), "o": { "_id": 1 }, "ts": TS, "wall": 1 };
    let e = events(&bad_wall, &coll_scope(), &Spec::default()).unwrap_err();
    assert_eq!(e.code.code(), 40532);
    assert_eq!(e.errmsg, "Entry field \"wall\" should be date, found: int");
}

#[test]
fn post_images() {
    let up = with(
        entry(
            "u",
            "test.c",
            rawdoc! { "$v": 2, "diff": { "u": { "a": 5 } } },
        ),
        "o2",
        rawdoc! { "_id": 1 },
    );
    let lookup = Spec {
        full_document: FullDocument::UpdateLookup,
        ..Spec::default()
    };
    let ev = &events(&up, &coll_scope(), &lookup).unwrap()[0];
    assert!(ev.needs_images());
    let images = Fixed {
        current: Some(rawdoc! { "_id": 1, "a": 6 }),
        ..Fixed::default()
    };
    let doc = ev.document(&lookup, &images).unwrap();
    let keys: Vec<&str> = doc.iter().map(|r| r.unwrap().0.as_str()).collect();
    assert_eq!(
        keys,
        [
            "_id",
            "operationType",
            "clusterTime",
            "wallTime",
            "fullDocument",
            "ns",
            "documentKey",
            "updateDescription"
        ]
    );
    assert_eq!(
        doc.get_document("fullDocument").unwrap(),
        &*rawdoc! { "_id": 1, "a": 6 }
    );
    assert_eq!(
        images.asked.borrow().as_slice(),
        [format!("current test.c {} {{_id: 1}}", uuid())]
    );
    // Gone: null.
    let doc = ev.document(&lookup, &Fixed::default()).unwrap();
    assert_eq!(
        doc.get("fullDocument").unwrap(),
        Some(bson::RawBsonRef::Null)
    );

    // whenAvailable: the pre-image with the diff applied.
    let when = Spec {
        full_document: FullDocument::WhenAvailable,
        ..Spec::default()
    };
    let ev = &events(&up, &coll_scope(), &when).unwrap()[0];
    let images = Fixed {
        pre: Some(rawdoc! { "_id": 1, "a": 1, "b": 2 }),
        ..Fixed::default()
    };
    let doc = ev.document(&when, &images).unwrap();
    assert_eq!(
        doc.get_document("fullDocument").unwrap(),
        &*rawdoc! { "_id": 1, "a": 5, "b": 2 }
    );
    assert_eq!(doc.get("fullDocumentBeforeChange").unwrap(), None);
    assert_eq!(
        images.asked.borrow().as_slice(),
        [format!("pre {} {TS} 0", uuid())]
    );
    let doc = ev.document(&when, &Fixed::default()).unwrap();
    assert_eq!(
        doc.get("fullDocument").unwrap(),
        Some(bson::RawBsonRef::Null)
    );
    // Inserts and deletes are not looked up.
    let del = entry("d", "test.c", rawdoc! { "_id": 1 });
    assert!(!events(&del, &coll_scope(), &when).unwrap()[0].needs_images());

    // required: mongod's error when there is none.
    let required = Spec {
        full_document: FullDocument::Required,
        ..Spec::default()
    };
    let ev = &events(&up, &coll_scope(), &required).unwrap()[0];
    let e = ev.document(&required, &Fixed::default()).unwrap_err();
    assert_eq!(e.code, ErrorCode::NoMatchingDocument);
    assert_eq!(
        e.errmsg,
        "Change stream was configured to require a post-image for all update events, but the \
         post-image was not found for event: {operationType: \"update\", ns: {db: \"test\", \
         coll: \"c\"}, clusterTime: Timestamp(1700000000, 3)}"
    );
}

#[test]
fn pre_images() {
    let when = Spec {
        full_document_before_change: FullDocumentBeforeChange::WhenAvailable,
        ..Spec::default()
    };
    let del = entry("d", "test.c", rawdoc! { "_id": 1 });
    let ev = &events(&del, &coll_scope(), &when).unwrap()[0];
    let images = Fixed {
        pre: Some(rawdoc! { "_id": 1, "a": 1 }),
        ..Fixed::default()
    };
    let t = token("delete", "documentKey", rawdoc! { "_id": 1 });
    assert_doc(
        &ev.document(&when, &images).unwrap(),
        &rawdoc! {
            "_id": t.to_document(),
            "operationType": "delete",
            "clusterTime": TS,
            "wallTime": wall(),
            "ns": { "db": "test", "coll": "c" },
            "documentKey": { "_id": 1 },
            "fullDocumentBeforeChange": { "_id": 1, "a": 1 },
        },
    );
    let doc = ev.document(&when, &Fixed::default()).unwrap();
    assert_eq!(
        doc.get("fullDocumentBeforeChange").unwrap(),
        Some(bson::RawBsonRef::Null)
    );
    // Inserts have none.
    let ins = entry("i", "test.c", rawdoc! { "_id": 1 });
    assert!(!events(&ins, &coll_scope(), &when).unwrap()[0].needs_images());
    // Required, with a transaction's txnNumber in the message.
    let required = Spec {
        full_document_before_change: FullDocumentBeforeChange::Required,
        ..Spec::default()
    };
    let txn = rawdoc! {
        "op": "c", "ns": "admin.$cmd",
        "o": { "applyOps": [ { "op": "d", "ns": "test.c", "ui": ui(), "o": { "_id": 1 } } ] },
        "ts": TS, "t": 1_i64, "v": 2, "wall": wall(),
        "lsid": { "id": ui() }, "txnNumber": 4_i64,
    };
    let ev = &events(&txn, &coll_scope(), &required).unwrap()[0];
    let e = ev.document(&required, &Fixed::default()).unwrap_err();
    assert_eq!(e.code.code(), 47);
    assert_eq!(
        e.errmsg,
        "Change stream was configured to require a pre-image for all update, delete and replace \
         events, but the pre-image was not found for event: {operationType: \"delete\", ns: {db: \
         \"test\", coll: \"c\"}, clusterTime: Timestamp(1700000000, 3), txnNumber: 4}"
    );
}

#[test]
fn drop_and_rename_invalidate_a_collection_stream() {
    let drop = with(
        entry("c", "test.$cmd", rawdoc! { "drop": "c" }),
        "o2",
        rawdoc! { "numRecords": 3 },
    );
    let evs = events(&drop, &coll_scope(), &Spec::default()).unwrap();
    assert_eq!(evs.len(), 2);
    let t = ResumeTokenData::event(TS, 0, Some(uuid()), rawdoc! { "operationType": "drop" });
    assert_eq!(evs[0].token, t);
    let mut inv = t.clone();
    inv.from_invalidate = true;
    assert_eq!(evs[1].token, inv);
    assert!(evs[1].invalidate && !evs[0].invalidate);
    assert!(evs[0].token < evs[1].token);
    let f = Fixed::default();
    let spec = Spec::default();
    assert_doc(
        &evs[0].document(&spec, &f).unwrap(),
        &rawdoc! {
            "_id": t.to_document(),
            "operationType": "drop",
            "clusterTime": TS,
            "wallTime": wall(),
            "ns": { "db": "test", "coll": "c" },
        },
    );
    assert_doc(
        &evs[1].document(&spec, &f).unwrap(),
        &rawdoc! {
            "_id": inv.to_document(),
            "operationType": "invalidate",
            "clusterTime": TS,
            "wallTime": wall(),
        },
    );
    // Another collection's drop: nothing for this stream; a database stream sees the drop only.
    let other = entry("c", "test.$cmd", rawdoc! { "drop": "d" });
    assert!(events(&other, &coll_scope(), &spec).unwrap().is_empty());
    let evs = events(&other, &db_scope(), &spec).unwrap();
    assert_eq!(evs.len(), 1);
    assert!(!evs[0].invalidate);

    // Rename: `to` first, as mongod's TransformRename expects.
    let rename = entry(
        "c",
        "test.$cmd",
        rawdoc! { "renameCollection": "test.c", "to": "test.d", "stayTemp": false },
    );
    let evs = events(&rename, &coll_scope(), &spec).unwrap();
    assert_eq!(evs.len(), 2);
    let t = ResumeTokenData::event(
        TS,
        0,
        Some(uuid()),
        rawdoc! { "operationType": "rename", "operationDescription": { "to": { "db": "test", "coll": "d" } } },
    );
    assert_doc(
        &evs[0].document(&spec, &f).unwrap(),
        &rawdoc! {
            "to": { "db": "test", "coll": "d" },
            "_id": t.to_document(),
            "operationType": "rename",
            "clusterTime": TS,
            "wallTime": wall(),
            "ns": { "db": "test", "coll": "c" },
        },
    );
    assert!(evs[1].invalidate);
    // Expanded: operationDescription, with dropTarget kept.
    let onto = entry(
        "c",
        "test.$cmd",
        rawdoc! { "renameCollection": "test.x", "to": "test.c", "stayTemp": false, "dropTarget": ui() },
    );
    let evs = events(&onto, &coll_scope(), &expanded()).unwrap();
    assert_eq!(
        evs.len(),
        2,
        "a rename onto the watched collection invalidates it"
    );
    let doc = evs[0].document(&expanded(), &f).unwrap();
    assert_eq!(
        doc.get_document("ns").unwrap(),
        &*rawdoc! { "db": "test", "coll": "x" }
    );
    assert_eq!(
        doc.get_document("operationDescription").unwrap(),
        &*rawdoc! { "to": { "db": "test", "coll": "c" }, "dropTarget": ui() }
    );
}

#[test]
fn drop_database() {
    let e = rawdoc! { "op": "c", "ns": "test.$cmd", "o": { "dropDatabase": 1 }, "ts": TS, "t": 1_i64, "v": 2, "wall": wall() };
    let spec = Spec::default();
    assert!(events(&e, &coll_scope(), &spec).unwrap().is_empty());
    let evs = events(&e, &db_scope(), &spec).unwrap();
    assert_eq!(evs.len(), 2);
    let t = ResumeTokenData::event(TS, 0, None, rawdoc! { "operationType": "dropDatabase" });
    assert_doc(
        &evs[0].document(&spec, &Fixed::default()).unwrap(),
        &rawdoc! {
            "_id": t.to_document(),
            "operationType": "dropDatabase",
            "clusterTime": TS,
            "wallTime": wall(),
            "ns": { "db": "test" },
        },
    );
    assert!(evs[1].invalidate);
    let evs = events(&e, &Scope::Cluster, &spec).unwrap();
    assert_eq!(evs.len(), 1, "a cluster stream is never invalidated");
    let other = rawdoc! { "op": "c", "ns": "other.$cmd", "o": { "dropDatabase": 1 }, "ts": TS, "t": 1_i64, "v": 2, "wall": wall() };
    assert!(events(&other, &db_scope(), &spec).unwrap().is_empty());
}

#[test]
fn expanded_events() {
    let create = entry(
        "c",
        "test.$cmd",
        rawdoc! { "create": "c", "idIndex": { "v": 2, "key": { "_id": 1 }, "name": "_id_" } },
    );
    assert!(docs(&create, &coll_scope(), &Spec::default()).is_empty());
    let desc = rawdoc! { "idIndex": { "v": 2, "key": { "_id": 1 }, "name": "_id_" } };
    let t = ResumeTokenData::event(
        TS,
        0,
        Some(uuid()),
        rawdoc! { "operationType": "create", "operationDescription": desc.clone() },
    );
    assert_doc(
        &docs(&create, &coll_scope(), &expanded())[0],
        &rawdoc! {
            "_id": t.to_document(),
            "operationType": "create",
            "clusterTime": TS,
            "collectionUUID": ui(),
            "wallTime": wall(),
            "ns": { "db": "test", "coll": "c" },
            "operationDescription": desc,
        },
    );
    let ci = entry(
        "c",
        "test.$cmd",
        rawdoc! { "createIndexes": "c", "v": 2, "key": { "a": 1 }, "name": "a_1" },
    );
    let doc = &docs(&ci, &db_scope(), &expanded())[0];
    assert_eq!(doc.get_str("operationType").unwrap(), "createIndexes");
    assert_eq!(
        doc.get_document("operationDescription").unwrap(),
        &*rawdoc! { "indexes": [ { "v": 2, "key": { "a": 1 }, "name": "a_1" } ] }
    );
    let di = with(
        entry(
            "c",
            "test.$cmd",
            rawdoc! { "dropIndexes": "c", "index": "a_1" },
        ),
        "o2",
        rawdoc! { "v": 2, "key": { "a": 1 }, "name": "a_1" },
    );
    let doc = &docs(&di, &coll_scope(), &expanded())[0];
    assert_eq!(doc.get_str("operationType").unwrap(), "dropIndexes");
    assert_eq!(
        doc.get_document("operationDescription").unwrap(),
        &*rawdoc! { "indexes": [ { "v": 2, "key": { "a": 1 }, "name": "a_1" } ] }
    );
    let cm = with(
        entry(
            "c",
            "test.$cmd",
            rawdoc! { "collMod": "c", "validationLevel": "off" },
        ),
        "o2",
        rawdoc! { "collectionOptions_old": { "uuid": ui(), "validationLevel": "strict" } },
    );
    let doc = &docs(&cm, &coll_scope(), &expanded())[0];
    let keys: Vec<&str> = doc.iter().map(|r| r.unwrap().0.as_str()).collect();
    assert_eq!(
        keys,
        [
            "_id",
            "operationType",
            "clusterTime",
            "collectionUUID",
            "wallTime",
            "ns",
            "operationDescription",
            "stateBeforeChange"
        ]
    );
    assert_eq!(doc.get_str("operationType").unwrap(), "modify");
    assert_eq!(
        doc.get_document("stateBeforeChange").unwrap(),
        &*rawdoc! { "collectionOptions": { "uuid": ui(), "validationLevel": "strict" } }
    );
    assert!(docs(&cm, &coll_scope(), &Spec::default()).is_empty());
    // Commands on other collections or databases, and unknown commands, are not events.
    let other = entry("c", "test.$cmd", rawdoc! { "create": "d" });
    assert!(docs(&other, &coll_scope(), &expanded()).is_empty());
    let elsewhere = entry("c", "other.$cmd", rawdoc! { "create": "c" });
    assert!(docs(&elsewhere, &coll_scope(), &expanded()).is_empty());
    let unknown = entry("c", "test.$cmd", rawdoc! { "emptycapped": "c" });
    assert!(docs(&unknown, &coll_scope(), &expanded()).is_empty());
}

#[test]
fn transactions_unwind_in_order() {
    let lsid = rawdoc! { "id": ui(), "uid": Binary { subtype: bson::spec::BinarySubtype::Generic, bytes: vec![1; 32] } };
    let txn = rawdoc! {
        "op": "c", "ns": "admin.$cmd",
        "o": { "applyOps": [
            { "op": "i", "ns": "test.c", "ui": ui(), "o": { "_id": 1 }, "o2": { "_id": 1 } },
            { "op": "i", "ns": "test.other", "ui": ui(), "o": { "_id": 2 }, "o2": { "_id": 2 } },
            { "op": "d", "ns": "test.c", "ui": ui(), "o": { "_id": 3 } },
        ] },
        "lsid": lsid.clone(), "txnNumber": 9_i64, "prevOpTime": { "ts": Timestamp { time: 0, increment: 0 }, "t": -1_i64 },
        "ts": TS, "t": 1_i64, "v": 2, "wall": wall(),
    };
    let spec = Spec::default();
    let evs = events(&txn, &coll_scope(), &spec).unwrap();
    assert_eq!(evs.len(), 2);
    assert_eq!(evs[0].token.txn_op_index, 0);
    assert_eq!(
        evs[1].token.txn_op_index, 2,
        "the index counts every operation"
    );
    assert!(evs[0].token < evs[1].token);
    let t = ResumeTokenData::event(
        TS,
        0,
        Some(uuid()),
        rawdoc! { "operationType": "insert", "documentKey": { "_id": 1 } },
    );
    assert_doc(
        &evs[0].document(&spec, &Fixed::default()).unwrap(),
        &rawdoc! {
            "txnNumber": 9_i64,
            "lsid": lsid,
            "_id": t.to_document(),
            "operationType": "insert",
            "clusterTime": TS,
            "wallTime": wall(),
            "fullDocument": { "_id": 1 },
            "ns": { "db": "test", "coll": "c" },
            "documentKey": { "_id": 1 },
        },
    );
    assert_eq!(events(&txn, &db_scope(), &spec).unwrap().len(), 3);
    // The pre-image of an operation of a transaction is keyed by its applyOps index.
    let pre = Spec {
        full_document_before_change: FullDocumentBeforeChange::WhenAvailable,
        ..Spec::default()
    };
    let evs = events(&txn, &coll_scope(), &pre).unwrap();
    let images = Fixed::default();
    evs[1].document(&pre, &images).unwrap();
    assert_eq!(
        images.asked.borrow().as_slice(),
        [format!("pre {} {TS} 2", uuid())]
    );

    // A batch of deletes (TTL): no lsid or txnNumber.
    let batch = rawdoc! {
        "op": "c", "ns": "admin.$cmd",
        "o": { "applyOps": [
            { "op": "d", "ns": "test.c", "ui": ui(), "o": { "_id": 1 } },
            { "op": "d", "ns": "test.c", "ui": ui(), "o": { "_id": 2 } },
        ] },
        "ts": TS, "t": 1_i64, "v": 2, "wall": wall(),
    };
    let evs = events(&batch, &coll_scope(), &spec).unwrap();
    assert_eq!(evs.len(), 2);
    let t = ResumeTokenData::event(
        TS,
        1,
        Some(uuid()),
        rawdoc! { "operationType": "delete", "documentKey": { "_id": 2 } },
    );
    assert_doc(
        &evs[1].document(&spec, &Fixed::default()).unwrap(),
        &rawdoc! {
            "_id": t.to_document(),
            "operationType": "delete",
            "clusterTime": TS,
            "wallTime": wall(),
            "ns": { "db": "test", "coll": "c" },
            "documentKey": { "_id": 2 },
        },
    );
    // Entries of a transaction not committed by themselves are not events.
    let partial = rawdoc! {
        "op": "c", "ns": "admin.$cmd",
        "o": { "applyOps": [ { "op": "d", "ns": "test.c", "ui": ui(), "o": { "_id": 1 } } ], "partialTxn": true },
        "ts": TS, "t": 1_i64, "v": 2, "wall": wall(),
    };
    assert!(events(&partial, &coll_scope(), &spec).unwrap().is_empty());
}

#[test]
fn view_definitions() {
    let spec = expanded();
    let create = entry(
        "i",
        "test.system.views",
        rawdoc! { "_id": "test.v", "viewOn": "c", "pipeline": [ { "$match": { "a": 1 } } ] },
    );
    let desc = rawdoc! { "viewOn": "c", "pipeline": [ { "$match": { "a": 1 } } ] };
    let t = ResumeTokenData::event(
        TS,
        0,
        Some(uuid()),
        rawdoc! { "operationType": "create", "operationDescription": desc.clone() },
    );
    assert_doc(
        &docs(&create, &db_scope(), &spec)[0],
        &rawdoc! {
            "_id": t.to_document(),
            "operationType": "create",
            "clusterTime": TS,
            "wallTime": wall(),
            "ns": { "db": "test", "coll": "v" },
            "operationDescription": desc,
        },
    );
    let modify = with(
        entry(
            "u",
            "test.system.views",
            rawdoc! { "_id": "test.v", "viewOn": "d", "pipeline": [] },
        ),
        "o2",
        rawdoc! { "_id": "test.v" },
    );
    let doc = &docs(&modify, &Scope::Cluster, &spec)[0];
    assert_eq!(doc.get_str("operationType").unwrap(), "modify");
    assert_eq!(
        doc.get_document("operationDescription").unwrap(),
        &*rawdoc! { "viewOn": "d", "pipeline": [] }
    );
    let drop = entry("d", "test.system.views", rawdoc! { "_id": "test.v" });
    let doc = &docs(&drop, &db_scope(), &spec)[0];
    assert_eq!(doc.get_str("operationType").unwrap(), "drop");
    assert_eq!(
        doc.get_document("ns").unwrap(),
        &*rawdoc! { "db": "test", "coll": "v" }
    );
    assert!(doc.get("operationDescription").unwrap().is_none());
    // Not for a collection stream, nor without showExpandedEvents, nor another database.
    assert!(docs(&create, &coll_scope(), &spec).is_empty());
    assert!(docs(&create, &db_scope(), &Spec::default()).is_empty());
    let other = entry(
        "i",
        "other.system.views",
        rawdoc! { "_id": "other.v", "viewOn": "c", "pipeline": [] },
    );
    assert!(docs(&other, &db_scope(), &spec).is_empty());
}

mod robustness {
    use bson::{RawBson, RawDocumentBuf};
    use proptest::prelude::*;

    use super::*;

    fn value() -> impl Strategy<Value = RawBson> {
        prop_oneof![
            Just(RawBson::Int32(2)),
            Just(RawBson::String("test.c".into())),
            Just(RawBson::String("c".into())),
            Just(RawBson::String("test.$cmd".into())),
            Just(RawBson::Boolean(true)),
            Just(RawBson::Binary(ui())),
            Just(RawBson::Timestamp(TS)),
            Just(RawBson::DateTime(wall())),
            Just(RawBson::Document(rawdoc! { "_id": 1 })),
            Just(RawBson::Document(
                rawdoc! { "$v": 2, "diff": { "u": { "a": 1 } } }
            )),
            Just(RawBson::Document(rawdoc! { "drop": "c" })),
            Just(RawBson::Document(
                rawdoc! { "renameCollection": "test.c", "to": 5 }
            )),
            Just(RawBson::Document(rawdoc! { "dropIndexes": "c" })),
            Just(RawBson::Document(
                rawdoc! { "applyOps": [ { "op": "i", "ns": "test.c", "ui": ui(), "o": { "_id": 1 } }, 3 ] }
            )),
            Just(RawBson::Document(
                rawdoc! { "applyOps": [ { "op": "u", "ns": "test.c", "ui": 1, "o": { "_id": 1 } } ] }
            )),
        ]
    }

    fn field() -> impl Strategy<Value = (&'static str, RawBson)> {
        (
            prop_oneof![
                Just("op"),
                Just("ns"),
                Just("ui"),
                Just("o"),
                Just("o2"),
                Just("ts"),
                Just("wall"),
                Just("lsid"),
                Just("txnNumber"),
            ],
            value(),
        )
    }

    fn op() -> impl Strategy<Value = RawBson> {
        prop_oneof![
            Just(RawBson::String("i".into())),
            Just(RawBson::String("u".into())),
            Just(RawBson::String("d".into())),
            Just(RawBson::String("c".into())),
            Just(RawBson::String("n".into())),
        ]
    }

    proptest! {
        #[test]
        fn malformed_entries_are_errors_not_panics(
            kind in op(),
            fields in proptest::collection::vec(field(), 0..8),
        ) {
            let mut doc = RawDocumentBuf::new();
            doc.append(bson::raw::cstr!("op"), kind);
            for (k, v) in fields {
                doc.append(<&bson::raw::CStr>::try_from(k).unwrap(), v);
            }
            let images = Fixed {
                current: Some(rawdoc! { "_id": 1 }),
                pre: Some(rawdoc! { "_id": 1 }),
                ..Fixed::default()
            };
            let all = Spec {
                show_expanded_events: true,
                full_document: FullDocument::Required,
                full_document_before_change: FullDocumentBeforeChange::Required,
                ..Spec::default()
            };
            for scope in [coll_scope(), db_scope(), Scope::Cluster] {
                for spec in [Spec::default(), all.clone()] {
                    if let Ok(evs) = events(&doc, &scope, &spec) {
                        for e in evs {
                            let _ = e.document(&spec, &images);
                        }
                    }
                }
            }
        }
    }
}
