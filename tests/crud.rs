//! CRUD commands through the `mongodb` driver against an in-process server: `insert`, `find`,
//! `getMore`, `killCursors`, `update`, `delete`, `findAndModify`, `count`, `distinct`,
//! `aggregate` and write concerns, checked against MongoDB 7.0's documented behaviour (reply
//! shapes, error codes and messages).
//!
//! Where the driver would hide what the server does (it generates `_id`s, checks sizes and
//! rejects some options itself), the command is sent with `run_command`, or as raw `OP_MSG`
//! bytes for document sequences. Tests of known divergences from MongoDB are `#[ignore]`d with
//! the reason, so that they document the expected behaviour and run with `--ignored`.

mod common;

use common::{
    RawConn, TestResult, TestServer, assert_command_error, bson_bytes, command_error, drain,
    integer, is_ok, kind0, kind1, op_msg_sections, raw_keys, run_command, run_command_err,
    write_error, write_errors,
};
use mongodb::bson::oid::ObjectId;
use mongodb::bson::spec::ElementType;
use mongodb::bson::{Bson, Document, RawDocumentBuf, doc};
use mongodb::error::ErrorKind;
use mongodb::options::{ReturnDocument, WriteConcern};
use mongodb::{Client, Collection};

const DB: &str = "crud";
/// MongoDB's `maxBsonObjectSize`.
const MAX_DOC: usize = 16 * 1024 * 1024;

async fn start() -> TestResult<(TestServer, Client)> {
    let server = TestServer::start().await?;
    let client = server.client().await?;
    Ok((server, client))
}

fn coll(client: &Client, name: &str) -> Collection<Document> {
    client.database(DB).collection(name)
}

fn raw_coll(client: &Client, name: &str) -> Collection<RawDocumentBuf> {
    client.database(DB).collection(name)
}

/// Every document of `name` matching `filter`, in `_id` order.
async fn all(client: &Client, name: &str, filter: Document) -> TestResult<Vec<Document>> {
    drain(
        coll(client, name)
            .find(filter)
            .sort(doc! { "_id": 1 })
            .await?,
    )
    .await
}

/// The `_id`s of `docs`, in order.
fn ids(docs: &[Document]) -> Vec<Bson> {
    docs.iter()
        .map(|d| d.get("_id").cloned().unwrap_or(Bson::Null))
        .collect()
}

/// Inserts `{_id: i, n: i}` for `i` in `range`.
async fn seed(client: &Client, name: &str, range: std::ops::Range<i32>) -> TestResult {
    let docs: Vec<Document> = range.map(|i| doc! { "_id": i, "n": i }).collect();
    coll(client, name).insert_many(docs).await?;
    Ok(())
}

/// `cursor.firstBatch` or `cursor.nextBatch` of a `find`/`getMore`/`aggregate` reply, and the
/// cursor id.
fn batch(reply: &Document) -> TestResult<(Vec<Document>, i64)> {
    let cursor = reply.get_document("cursor")?;
    let docs = cursor
        .get_array("firstBatch")
        .or_else(|_| cursor.get_array("nextBatch"))?
        .iter()
        .map(|d| {
            d.as_document()
                .cloned()
                .ok_or("batch entry is not a document")
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok((docs, cursor.get_i64("id")?))
}

fn int32s(values: &[i32]) -> Vec<Bson> {
    values.iter().map(|&i| Bson::Int32(i)).collect()
}

// ---------------------------------------------------------------------------------------------
// insert
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn insert_one_without_id_gets_an_object_id_placed_first() -> TestResult {
    let (_server, client) = start().await?;

    // The driver generates the ObjectId; the server must store it first and return it.
    let result = coll(&client, "c")
        .insert_one(doc! { "a": 1, "b": "x" })
        .await?;
    let Bson::ObjectId(oid) = result.inserted_id else {
        panic!("inserted_id {:?} is not an ObjectId", result.inserted_id);
    };
    let stored = raw_coll(&client, "c")
        .find_one(doc! { "a": 1 })
        .await?
        .ok_or("inserted document not found")?;
    assert_eq!(raw_keys(&stored), ["_id", "a", "b"]);
    assert_eq!(stored.get_object_id("_id")?, oid);

    // Without a driver in the way, the server generates the ObjectId itself, first.
    let reply = run_command(
        &client,
        DB,
        doc! { "insert": "c", "documents": [{ "a": 2, "b": "y" }, { "a": 3 }] },
    )
    .await?;
    assert_eq!(reply.get_i32("n")?, 2, "{reply}");
    assert!(is_ok(&reply), "{reply}");
    let mut generated = Vec::new();
    for a in [2, 3] {
        let stored = raw_coll(&client, "c")
            .find_one(doc! { "a": a })
            .await?
            .ok_or("server-side insert not found")?;
        let first = stored.iter_elements().next().ok_or("empty document")??;
        assert_eq!(first.key().as_str(), "_id", "{stored:?}");
        assert_eq!(first.element_type(), ElementType::ObjectId, "{stored:?}");
        generated.push(stored.get_object_id("_id")?);
    }
    assert_ne!(generated[0], generated[1], "generated ids must differ");
    assert_ne!(generated[0], oid);
    assert_eq!(coll(&client, "c").count_documents(doc! {}).await?, 3);
    Ok(())
}

#[tokio::test]
async fn insert_moves_a_given_id_to_the_front() -> TestResult {
    let (_server, client) = start().await?;
    let result = coll(&client, "c")
        .insert_one(doc! { "a": 1, "_id": 7, "b": 2 })
        .await?;
    assert_eq!(result.inserted_id, Bson::Int32(7));
    run_command(
        &client,
        DB,
        doc! { "insert": "c", "documents": [{ "x": true, "y": null, "_id": "s" }] },
    )
    .await?;
    let stored = raw_coll(&client, "c")
        .find_one(doc! { "_id": 7 })
        .await?
        .ok_or("missing _id 7")?;
    assert_eq!(raw_keys(&stored), ["_id", "a", "b"]);
    let stored = raw_coll(&client, "c")
        .find_one(doc! { "_id": "s" })
        .await?
        .ok_or("missing _id s")?;
    assert_eq!(raw_keys(&stored), ["_id", "x", "y"]);
    Ok(())
}

#[tokio::test]
async fn insert_one_with_id_round_trips_every_id_type() -> TestResult {
    let (_server, client) = start().await?;
    let c = coll(&client, "c");
    let oid = ObjectId::new();
    let cases = [
        doc! { "_id": "string", "v": 1 },
        doc! { "_id": 42_i64, "v": 2 },
        doc! { "_id": 2.5, "v": 3 },
        doc! { "_id": { "k": 1, "j": [1, 2] }, "v": 4 },
        doc! { "_id": oid, "v": 5 },
        doc! { "_id": null, "v": 6 },
        doc! { "_id": true, "v": 7 },
    ];
    for d in &cases {
        let result = c.insert_one(d.clone()).await?;
        assert_eq!(Some(&result.inserted_id), d.get("_id"));
    }
    for d in &cases {
        let found = c
            .find_one(doc! { "v": d.get_i32("v")? })
            .await?
            .ok_or("not found")?;
        assert_eq!(&found, d);
    }
    Ok(())
}

#[tokio::test]
async fn insert_many_ordered_stops_at_the_first_duplicate() -> TestResult {
    let (_server, client) = start().await?;
    let docs = vec![
        doc! { "_id": 1 },
        doc! { "_id": 2 },
        doc! { "_id": 1, "dup": true },
        doc! { "_id": 3 },
    ];
    let err = coll(&client, "c")
        .insert_many(docs)
        .await
        .expect_err("a duplicate _id fails the batch");
    let ErrorKind::InsertMany(failure) = &*err.kind else {
        panic!("not an InsertMany error: {err}");
    };
    let failures = failure.write_errors.as_ref().ok_or("no write errors")?;
    assert_eq!(failures.len(), 1, "{failures:?}");
    assert_eq!(failures[0].index, 2);
    assert_eq!(failures[0].code, 11000);
    assert_eq!(ids(&all(&client, "c", doc! {}).await?), int32s(&[1, 2]));

    // The raw reply: n counts what went in, writeErrors reports the index.
    let reply = run_command(
        &client,
        DB,
        doc! { "insert": "r", "documents": [{ "_id": 1 }, { "_id": 1 }, { "_id": 2 }] },
    )
    .await?;
    assert_eq!(reply.get_i32("n")?, 1, "{reply}");
    let errors = write_errors(&reply);
    assert_eq!(errors.len(), 1, "{reply}");
    assert_eq!(errors[0].get_i32("index")?, 1);
    assert_eq!(errors[0].get_i32("code")?, 11000);
    assert!(is_ok(&reply), "write errors leave ok: 1: {reply}");
    Ok(())
}

#[tokio::test]
async fn insert_many_unordered_continues_past_duplicates() -> TestResult {
    let (_server, client) = start().await?;
    let docs = vec![
        doc! { "_id": 1 },
        doc! { "_id": 1 },
        doc! { "_id": 2 },
        doc! { "_id": 2 },
        doc! { "_id": 3 },
    ];
    let err = coll(&client, "c")
        .insert_many(docs)
        .ordered(false)
        .await
        .expect_err("duplicates are reported");
    let ErrorKind::InsertMany(failure) = &*err.kind else {
        panic!("not an InsertMany error: {err}");
    };
    let failures = failure.write_errors.as_ref().ok_or("no write errors")?;
    let indexes: Vec<usize> = failures.iter().map(|e| e.index).collect();
    assert_eq!(indexes, [1, 3]);
    assert!(failures.iter().all(|e| e.code == 11000));
    assert_eq!(ids(&all(&client, "c", doc! {}).await?), int32s(&[1, 2, 3]));

    let reply = run_command(
        &client,
        DB,
        doc! {
            "insert": "r",
            "ordered": false,
            "documents": [{ "_id": 1 }, { "_id": [1] }, { "_id": 1 }, { "_id": 2 }],
        },
    )
    .await?;
    assert_eq!(reply.get_i32("n")?, 2, "{reply}");
    let codes: Vec<(i32, i32)> = write_errors(&reply)
        .iter()
        .map(|e| Ok((e.get_i32("index")?, e.get_i32("code")?)))
        .collect::<TestResult<_>>()?;
    assert_eq!(codes, [(1, 53), (2, 11000)], "{reply}");
    Ok(())
}

/// The `_id`s of a large batch are checked against the collection in one range read, unless
/// the range between them holds many other documents; either way every duplicate is found.
#[tokio::test]
async fn large_batches_find_every_duplicate() -> TestResult {
    let (_server, client) = start().await?;
    let c = coll(&client, "big");
    c.insert_many((0..1000).map(|i| doc! { "_id": i * 2 }))
        .await?;
    let codes = |reply: &Document| -> TestResult<Vec<(i32, i32)>> {
        write_errors(reply)
            .iter()
            .map(|e| Ok((e.get_i32("index")?, e.get_i32("code")?)))
            .collect()
    };
    // Dense: new odd ids between stored even ones, a stored one (10), and a duplicate within
    // the batch (13 twice).
    let mut dense: Vec<Document> = (0..20).map(|i| doc! { "_id": 1 + i * 2 }).collect();
    dense.insert(5, doc! { "_id": 10 });
    dense.push(doc! { "_id": 13 });
    let reply = run_command(
        &client,
        DB,
        doc! { "insert": "big", "documents": dense, "ordered": false },
    )
    .await?;
    assert_eq!(reply.get_i32("n")?, 20, "{reply}");
    assert_eq!(codes(&reply)?, [(5, 11000), (21, 11000)], "{reply}");
    // Sparse: ten ids spread over all 1,000 stored documents, two of them stored (the range
    // read gives up and each is looked up alone), across numeric types.
    let mut sparse: Vec<Document> = (0..8).map(|i| doc! { "_id": 101 + i * 250 }).collect();
    sparse.insert(2, doc! { "_id": 0.0 });
    sparse.push(doc! { "_id": 1998_i64 });
    let reply = run_command(
        &client,
        DB,
        doc! { "insert": "big", "documents": sparse, "ordered": false },
    )
    .await?;
    assert_eq!(reply.get_i32("n")?, 8, "{reply}");
    assert_eq!(codes(&reply)?, [(2, 11000), (9, 11000)], "{reply}");
    // Ordered: stops at the first duplicate, having inserted what came before it.
    let ordered: Vec<Document> = [3001, 3003, 3005, 3007, 3009, 3011, 3013, 1996, 3015]
        .into_iter()
        .map(|i| doc! { "_id": i })
        .collect();
    let reply = run_command(&client, DB, doc! { "insert": "big", "documents": ordered }).await?;
    assert_eq!(reply.get_i32("n")?, 7, "{reply}");
    assert_eq!(codes(&reply)?, [(7, 11000)], "{reply}");
    assert_eq!(c.count_documents(doc! {}).await?, 1000 + 20 + 8 + 7);
    Ok(())
}

#[tokio::test]
async fn duplicate_id_is_detected_across_numeric_types() -> TestResult {
    let (_server, client) = start().await?;
    let c = coll(&client, "c");
    c.insert_one(doc! { "_id": 1, "first": true }).await?;

    for dup in [Bson::Double(1.0), Bson::Int64(1), Bson::Int32(1)] {
        let reply = run_command(
            &client,
            DB,
            doc! { "insert": "c", "documents": [{ "_id": dup.clone() }] },
        )
        .await?;
        assert_eq!(reply.get_i32("n")?, 0, "{reply}");
        let errors = write_errors(&reply);
        assert_eq!(errors.len(), 1, "{reply}");
        let e = &errors[0];
        assert_eq!(e.get_i32("index")?, 0);
        assert_eq!(e.get_i32("code")?, 11000);
        assert_eq!(e.get_document("keyPattern")?, &doc! { "_id": 1 });
        // keyValue is the value that was refused, with its own type.
        assert_eq!(e.get_document("keyValue")?, &doc! { "_id": dup.clone() });
        let msg = e.get_str("errmsg")?;
        assert!(
            msg.starts_with("E11000 duplicate key error collection: crud.c index: _id_ dup key:"),
            "{msg}"
        );
    }

    // Through the driver: a WriteError with code 11000.
    let err = c
        .insert_one(doc! { "_id": 1.0 })
        .await
        .expect_err("1.0 duplicates 1");
    let we = write_error(&err).ok_or_else(|| format!("not a write error: {err}"))?;
    assert_eq!(we.code, 11000);

    // Other types never collide with a number.
    c.insert_one(doc! { "_id": "1" }).await?;
    c.insert_one(doc! { "_id": true }).await?;
    assert_eq!(c.count_documents(doc! {}).await?, 3);
    let first = c.find_one(doc! { "_id": 1 }).await?.ok_or("lost")?;
    assert_eq!(first, doc! { "_id": 1, "first": true });
    Ok(())
}

#[tokio::test]
async fn duplicate_key_message_matches_mongod() -> TestResult {
    let (_server, client) = start().await?;
    coll(&client, "c").insert_one(doc! { "_id": 1 }).await?;
    let reply = run_command(
        &client,
        DB,
        doc! { "insert": "c", "documents": [{ "_id": 1.0 }] },
    )
    .await?;
    let errors = write_errors(&reply);
    assert_eq!(
        errors[0].get_str("errmsg")?,
        "E11000 duplicate key error collection: crud.c index: _id_ dup key: { _id: 1.0 }"
    );
    Ok(())
}

#[tokio::test]
async fn id_of_type_array_is_invalid_id_field() -> TestResult {
    let (_server, client) = start().await?;
    let err = coll(&client, "c")
        .insert_one(doc! { "_id": [1, 2], "a": 1 })
        .await
        .expect_err("an array _id is refused");
    let we = write_error(&err).ok_or_else(|| format!("not a write error: {err}"))?;
    assert_eq!(we.code, 53, "{we:?}");
    assert_eq!(we.code_name, None, "write errors carry no codeName: {we:?}");
    assert!(we.message.contains("array"), "{we:?}");
    assert_eq!(coll(&client, "c").count_documents(doc! {}).await?, 0);
    Ok(())
}

#[tokio::test]
async fn id_document_with_dollar_field_is_refused() -> TestResult {
    let (_server, client) = start().await?;
    let reply = run_command(
        &client,
        DB,
        doc! { "insert": "c", "documents": [{ "_id": { "$b": 1 } }, { "_id": { "a": 1, "$b": 1 } }] },
    )
    .await?;
    let codes: Vec<i32> = write_errors(&reply)
        .iter()
        .map(|e| e.get_i32("code"))
        .collect::<Result<_, _>>()?;
    assert_eq!(codes, [52], "ordered: stops at the first: {reply}");
    assert_eq!(coll(&client, "c").count_documents(doc! {}).await?, 0);
    Ok(())
}

#[tokio::test]
async fn dollar_prefixed_top_level_field_is_stored() -> TestResult {
    let (_server, client) = start().await?;
    let reply = run_command(
        &client,
        DB,
        doc! { "insert": "c", "documents": [{ "_id": 1, "$price": 50.0, "quantity": 30 }] },
    )
    .await?;
    assert_eq!(reply.get_i32("n")?, 1, "{reply}");
    assert!(write_errors(&reply).is_empty(), "{reply}");
    let stored = coll(&client, "c").find_one(doc! { "_id": 1 }).await?;
    assert_eq!(
        stored,
        Some(doc! { "_id": 1, "$price": 50.0, "quantity": 30 })
    );
    Ok(())
}

/// `{_id: 1, s: "xxx…"}` of exactly `size` bytes.
fn doc_of_size(size: usize) -> Document {
    // 4 (length) + 1 + "_id\0" + 4 (int32) + 1 + "s\0" + 4 (string length) + 1 (NUL) + 1 (end).
    let overhead = 4 + 1 + 4 + 4 + 1 + 2 + 4 + 1 + 1;
    let d = doc! { "_id": 1, "s": "x".repeat(size - overhead) };
    assert_eq!(bson_bytes(&d).len(), size);
    d
}

#[tokio::test]
async fn document_over_16_mib_is_refused_with_bad_value() -> TestResult {
    let (_server, client) = start().await?;

    // The driver refuses it before sending; the server must too.
    let err = coll(&client, "c")
        .insert_one(doc_of_size(MAX_DOC + 1))
        .await
        .expect_err("the driver checks maxBsonObjectSize");
    assert!(
        matches!(&*err.kind, ErrorKind::InvalidArgument { .. }),
        "{err}"
    );

    let reply = run_command(
        &client,
        DB,
        doc! { "insert": "c", "documents": [doc_of_size(MAX_DOC + 1)] },
    )
    .await?;
    assert_eq!(reply.get_i32("n")?, 0, "{:?}", reply.get("writeErrors"));
    let errors = write_errors(&reply);
    assert_eq!(errors.len(), 1);
    assert_eq!(errors[0].get_i32("code")?, 2, "{:?}", errors[0]);
    assert_eq!(
        errors[0].get_str("errmsg")?,
        format!(
            "object to insert too large. size in bytes: {}, max size: {MAX_DOC}",
            MAX_DOC + 1
        )
    );
    assert_eq!(coll(&client, "c").count_documents(doc! {}).await?, 0);

    // Exactly 16 MiB is allowed.
    let reply = run_command(
        &client,
        DB,
        doc! { "insert": "c", "documents": [doc_of_size(MAX_DOC)] },
    )
    .await?;
    assert_eq!(reply.get_i32("n")?, 1, "{:?}", reply.get("writeErrors"));
    let stored = raw_coll(&client, "c")
        .find_one(doc! { "_id": 1 })
        .await?
        .ok_or("the 16 MiB document is missing")?;
    assert_eq!(stored.as_bytes().len(), MAX_DOC);
    Ok(())
}

#[tokio::test]
async fn update_growing_a_document_past_16_mib_is_refused() -> TestResult {
    let (_server, client) = start().await?;
    let half = "y".repeat(MAX_DOC / 2);
    coll(&client, "c")
        .insert_one(doc! { "_id": 1, "a": half.clone() })
        .await?;
    let err = coll(&client, "c")
        .update_one(doc! { "_id": 1 }, doc! { "$set": { "b": half.clone() } })
        .await
        .expect_err("the result is too large");
    let we = write_error(&err).ok_or_else(|| format!("not a write error: {err}"))?;
    assert_eq!(we.code, 10334, "BSONObjectTooLarge: {we:?}");
    assert_eq!(
        we.message,
        format!("Resulting document after update is larger than {MAX_DOC}")
    );
    let stored = coll(&client, "c")
        .find_one(doc! { "_id": 1 })
        .await?
        .ok_or("lost")?;
    assert!(!stored.contains_key("b"), "the update was not applied");
    Ok(())
}

#[tokio::test]
async fn empty_documents_list_is_refused() -> TestResult {
    let (_server, client) = start().await?;
    let err = coll(&client, "c")
        .insert_many(Vec::<Document>::new())
        .await
        .expect_err("the driver refuses an empty batch");
    assert!(
        matches!(&*err.kind, ErrorKind::InvalidArgument { .. }),
        "{err}"
    );

    let err = run_command_err(&client, DB, doc! { "insert": "c", "documents": [] }).await?;
    assert_command_error(&err, 16, "InvalidLength");
    assert_eq!(
        err.message,
        "Write batch sizes must be between 1 and 100000. Got 0 operations."
    );
    for (name, list) in [("update", "updates"), ("delete", "deletes")] {
        let err = run_command_err(&client, DB, doc! { name: "c", list: [] }).await?;
        assert_command_error(&err, 16, "InvalidLength");
    }
    let names = client.database(DB).list_collection_names().await?;
    assert!(names.is_empty(), "nothing was created: {names:?}");
    Ok(())
}

#[tokio::test]
async fn insert_many_sends_document_sequences() -> TestResult {
    let (_server, client) = start().await?;
    // 52 MB: more than one 48 MB message, so the driver sends two OP_MSGs, each with a kind-1
    // `documents` sequence.
    let filler = "z".repeat(4000);
    let docs: Vec<Document> = (0..13_000)
        .map(|i| doc! { "_id": i, "f": filler.clone() })
        .collect();
    let result = coll(&client, "c").insert_many(docs).await?;
    assert_eq!(result.inserted_ids.len(), 13_000);
    assert_eq!(coll(&client, "c").count_documents(doc! {}).await?, 13_000);
    let last = coll(&client, "c")
        .find_one(doc! { "_id": 12_999 })
        .await?
        .ok_or("last document missing")?;
    assert_eq!(last.get_str("f")?.len(), 4000);
    Ok(())
}

/// Sends `body` (to which `$db` is added) with one kind-1 `sequence` of `docs`; the reply body.
async fn with_sequence(
    conn: &mut RawConn,
    body: Document,
    sequence: &str,
    docs: &[Document],
) -> TestResult<Document> {
    let mut body = body;
    body.insert("$db", DB);
    let id = conn.next_request_id();
    let bytes = op_msg_sections(id, 0, &[kind0(&bson_bytes(&body)), kind1(sequence, docs)]);
    Ok(conn.round_trip(id, &bytes).await?.body)
}

#[tokio::test]
async fn raw_document_sequences_for_insert_update_delete() -> TestResult {
    let (server, client) = start().await?;
    let mut conn = server.raw().await?;

    let docs: Vec<Document> = (0..5).map(|i| doc! { "_id": i, "v": i }).collect();
    let reply = with_sequence(&mut conn, doc! { "insert": "seq" }, "documents", &docs).await?;
    assert!(is_ok(&reply), "{reply}");
    assert_eq!(reply.get_i32("n")?, 5, "{reply}");

    let updates = [
        doc! { "q": { "_id": 0 }, "u": { "$set": { "v": 100 } } },
        doc! { "q": { "v": { "$gte": 3 } }, "u": { "$inc": { "v": 10 } }, "multi": true },
    ];
    let reply = with_sequence(&mut conn, doc! { "update": "seq" }, "updates", &updates).await?;
    // The second statement sees the first one's write (_id 0 now has v: 100), as in mongod.
    assert_eq!(reply.get_i32("n")?, 4, "{reply}");
    assert_eq!(reply.get_i32("nModified")?, 4, "{reply}");

    let deletes = [
        doc! { "q": { "_id": 1 }, "limit": 1 },
        doc! { "q": { "v": { "$gte": 13, "$lt": 100 } }, "limit": 0 },
    ];
    let reply = with_sequence(&mut conn, doc! { "delete": "seq" }, "deletes", &deletes).await?;
    assert_eq!(reply.get_i32("n")?, 3, "{reply}");

    let left = all(&client, "seq", doc! {}).await?;
    assert_eq!(
        left,
        [doc! { "_id": 0, "v": 110 }, doc! { "_id": 2, "v": 2 }]
    );
    Ok(())
}

#[tokio::test]
async fn sequence_duplicating_a_body_field_is_40433() -> TestResult {
    let (server, client) = start().await?;
    let mut conn = server.raw().await?;
    let reply = with_sequence(
        &mut conn,
        doc! { "insert": "seq", "documents": [{ "_id": 1 }] },
        "documents",
        &[doc! { "_id": 2 }],
    )
    .await?;
    common::assert_error(&reply, 40433, "Location40433");
    assert!(all(&client, "seq", doc! {}).await?.is_empty());
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// find, getMore, killCursors
// ---------------------------------------------------------------------------------------------

async fn seed_people(client: &Client) -> TestResult {
    let docs = vec![
        doc! { "_id": 1, "name": "ann", "age": 31, "city": "oslo", "tags": ["a", "b"] },
        doc! { "_id": 2, "name": "bob", "age": 25, "city": "rome" },
        doc! { "_id": 3, "name": "cid", "age": 42, "city": "oslo", "tags": ["b"] },
        doc! { "_id": 4, "name": "dee", "age": 25, "city": "lima" },
        doc! { "_id": 5, "name": "eve", "age": 37, "city": "oslo" },
    ];
    coll(client, "people").insert_many(docs).await?;
    Ok(())
}

#[tokio::test]
async fn find_filters_sorts_skips_and_limits() -> TestResult {
    let (_server, client) = start().await?;
    seed_people(&client).await?;
    let people = coll(&client, "people");

    let oslo = drain(people.find(doc! { "city": "oslo" }).await?).await?;
    assert_eq!(
        ids(&oslo),
        int32s(&[1, 3, 5]),
        "unsorted finds are in _id order"
    );

    let by_age = drain(
        people
            .find(doc! {})
            .sort(doc! { "age": -1, "_id": 1 })
            .await?,
    )
    .await?;
    assert_eq!(ids(&by_age), int32s(&[3, 5, 1, 2, 4]));

    let ties = drain(
        people
            .find(doc! {})
            .sort(doc! { "age": 1, "_id": -1 })
            .await?,
    )
    .await?;
    assert_eq!(ids(&ties), int32s(&[4, 2, 1, 5, 3]));

    let page = drain(
        people
            .find(doc! { "age": { "$gte": 25 } })
            .sort(doc! { "age": 1, "_id": 1 })
            .skip(1)
            .limit(3)
            .await?,
    )
    .await?;
    assert_eq!(ids(&page), int32s(&[4, 1, 5]));

    // skip and limit without a sort follow _id order.
    let page = drain(people.find(doc! {}).skip(3).limit(10).await?).await?;
    assert_eq!(ids(&page), int32s(&[4, 5]));
    let none = drain(people.find(doc! {}).skip(10).await?).await?;
    assert!(none.is_empty());

    // An array field matches on any element.
    let tagged = drain(people.find(doc! { "tags": "b" }).await?).await?;
    assert_eq!(ids(&tagged), int32s(&[1, 3]));
    Ok(())
}

#[tokio::test]
async fn find_projections() -> TestResult {
    let (_server, client) = start().await?;
    seed_people(&client).await?;
    let people = coll(&client, "people");
    let find = |projection: Document| {
        let people = people.clone();
        async move {
            drain(
                people
                    .find(doc! { "_id": { "$in": [1, 2] } })
                    .projection(projection)
                    .await?,
            )
            .await
        }
    };

    assert_eq!(
        find(doc! { "name": 1 }).await?,
        [
            doc! { "_id": 1, "name": "ann" },
            doc! { "_id": 2, "name": "bob" }
        ],
        "inclusion keeps _id"
    );
    assert_eq!(
        find(doc! { "name": 1, "_id": 0 }).await?,
        [doc! { "name": "ann" }, doc! { "name": "bob" }]
    );
    assert_eq!(
        find(doc! { "age": 0, "tags": 0, "city": 0 }).await?,
        [
            doc! { "_id": 1, "name": "ann" },
            doc! { "_id": 2, "name": "bob" }
        ]
    );
    assert_eq!(
        find(doc! { "_id": 0 }).await?,
        [
            doc! { "name": "ann", "age": 31, "city": "oslo", "tags": ["a", "b"] },
            doc! { "name": "bob", "age": 25, "city": "rome" }
        ]
    );
    // Inclusion keeps the document's field order, not the projection's.
    assert_eq!(
        find(doc! { "city": 1, "name": 1 }).await?[0],
        doc! { "_id": 1, "name": "ann", "city": "oslo" }
    );
    Ok(())
}

#[tokio::test]
async fn mixing_inclusion_and_exclusion_is_refused() -> TestResult {
    let (_server, client) = start().await?;
    seed_people(&client).await?;
    let err = coll(&client, "people")
        .find(doc! {})
        .projection(doc! { "name": 1, "age": 0 })
        .await
        .expect_err("inclusion then exclusion");
    let ce = command_error(&err).ok_or_else(|| format!("not a command error: {err}"))?;
    assert_command_error(ce, 31254, "Location31254");
    assert_eq!(
        ce.message,
        "Cannot do exclusion on field age in inclusion projection"
    );

    let err = run_command_err(
        &client,
        DB,
        doc! { "find": "people", "projection": { "age": 0, "name": 1 } },
    )
    .await?;
    assert_command_error(&err, 31253, "Location31253");
    assert_eq!(
        err.message,
        "Cannot do inclusion on field name in exclusion projection"
    );
    Ok(())
}

#[tokio::test]
async fn batch_size_forces_get_mores() -> TestResult {
    let (_server, client) = start().await?;
    seed(&client, "c", 0..10).await?;

    let docs = drain(coll(&client, "c").find(doc! {}).batch_size(3).await?).await?;
    assert_eq!(ids(&docs), int32s(&(0..10).collect::<Vec<_>>()));
    let sorted = drain(
        coll(&client, "c")
            .find(doc! {})
            .sort(doc! { "n": -1 })
            .batch_size(4)
            .await?,
    )
    .await?;
    assert_eq!(ids(&sorted), int32s(&(0..10).rev().collect::<Vec<_>>()));

    // The same by hand: a first batch of 3, then getMores of 3 until the cursor id is 0.
    let reply = run_command(&client, DB, doc! { "find": "c", "batchSize": 3 }).await?;
    assert_eq!(reply.get_document("cursor")?.get_str("ns")?, "crud.c");
    let (first, id) = batch(&reply)?;
    assert_eq!(ids(&first), int32s(&[0, 1, 2]));
    assert_ne!(id, 0, "documents are left");
    let mut seen = first;
    let mut get_mores = 0;
    loop {
        let reply = run_command(
            &client,
            DB,
            doc! { "getMore": id, "collection": "c", "batchSize": 3 },
        )
        .await?;
        get_mores += 1;
        let cursor = reply.get_document("cursor")?;
        assert!(cursor.contains_key("nextBatch"), "{reply}");
        let (docs, next) = batch(&reply)?;
        assert!(docs.len() <= 3, "{reply}");
        seen.extend(docs);
        if next == 0 {
            break;
        }
        assert_eq!(next, id, "the cursor keeps its id");
        assert!(get_mores < 10, "the cursor never ends");
    }
    assert!(get_mores >= 3, "{get_mores} getMores");
    assert_eq!(ids(&seen), int32s(&(0..10).collect::<Vec<_>>()));

    // batchSize 0: an empty first batch and an open cursor.
    let reply = run_command(&client, DB, doc! { "find": "c", "batchSize": 0 }).await?;
    let (first, id) = batch(&reply)?;
    assert!(first.is_empty(), "{reply}");
    assert_ne!(id, 0, "{reply}");
    let reply = run_command(&client, DB, doc! { "getMore": id, "collection": "c" }).await?;
    let (rest, next) = batch(&reply)?;
    assert_eq!(rest.len(), 10, "{reply}");
    assert_eq!(next, 0);

    // A limit caps the total across batches.
    let limited = drain(
        coll(&client, "c")
            .find(doc! {})
            .batch_size(2)
            .limit(5)
            .await?,
    )
    .await?;
    assert_eq!(ids(&limited), int32s(&[0, 1, 2, 3, 4]));
    Ok(())
}

#[tokio::test]
async fn find_refuses_negative_skip_limit_and_batch_size() -> TestResult {
    let (_server, client) = start().await?;
    seed(&client, "c", 0..3).await?;
    for field in ["skip", "limit", "batchSize"] {
        let err = run_command_err(&client, DB, doc! { "find": "c", field: -1 }).await?;
        assert!(
            err.message.contains("-1"),
            "{field}: the message names the value: {err:?}"
        );
    }
    let err = run_command_err(
        &client,
        DB,
        doc! { "getMore": 12345_i64, "collection": "c", "batchSize": -1 },
    )
    .await?;
    assert!(err.message.contains("-1"), "{err:?}");
    Ok(())
}

#[tokio::test]
async fn negative_skip_limit_batch_size_use_mongod_7_errors() -> TestResult {
    let (_server, client) = start().await?;
    seed(&client, "c", 0..3).await?;
    for field in ["skip", "limit", "batchSize"] {
        let err = run_command_err(&client, DB, doc! { "find": "c", field: -1 }).await?;
        assert_command_error(&err, 51024, "Location51024");
        assert_eq!(
            err.message,
            format!("BSON field '{field}' value must be >= 0, actual value '-1'")
        );
    }
    let err = run_command_err(
        &client,
        DB,
        doc! { "getMore": 12345_i64, "collection": "c", "batchSize": -1 },
    )
    .await?;
    assert_command_error(&err, 51024, "Location51024");
    Ok(())
}

#[tokio::test]
async fn single_batch_closes_the_cursor() -> TestResult {
    let (_server, client) = start().await?;
    seed(&client, "c", 0..10).await?;
    let reply = run_command(
        &client,
        DB,
        doc! { "find": "c", "batchSize": 4, "singleBatch": true },
    )
    .await?;
    let (docs, id) = batch(&reply)?;
    assert_eq!(ids(&docs), int32s(&[0, 1, 2, 3]));
    assert_eq!(id, 0, "no cursor is left open");

    // Without singleBatch the same find leaves a cursor.
    let reply = run_command(&client, DB, doc! { "find": "c", "batchSize": 4 }).await?;
    let (_, id) = batch(&reply)?;
    assert_ne!(id, 0);
    Ok(())
}

/// Options that would change what `find` returns and that Ebb does not implement are refused
/// with `NotImplemented`, never silently ignored; set to false they change nothing.
#[tokio::test]
async fn find_refuses_the_options_it_does_not_implement() -> TestResult {
    let (_server, client) = start().await?;
    seed(&client, "c", 0..3).await?;
    for option in ["returnKey", "showRecordId", "tailable", "min", "max"] {
        let value = if matches!(option, "min" | "max") {
            Bson::Document(doc! { "_id": 1 })
        } else {
            Bson::Boolean(true)
        };
        let err = run_command_err(&client, DB, doc! { "find": "c", option: value.clone() }).await?;
        assert_command_error(&err, 238, "NotImplemented");
        // Also on the `_id` shortcut.
        let err = run_command_err(
            &client,
            DB,
            doc! { "find": "c", "filter": { "_id": 1 }, option: value.clone() },
        )
        .await?;
        assert_command_error(&err, 238, "NotImplemented");
        // A value of the wrong type is the IDL's error first, as in mongod.
        let wrong = if matches!(option, "min" | "max") {
            Bson::Boolean(true)
        } else {
            Bson::Int32(1)
        };
        let err = run_command_err(&client, DB, doc! { "find": "c", option: wrong }).await?;
        assert_command_error(&err, 14, "TypeMismatch");
    }
    let reply = run_command(&client, DB, doc! { "find": "c", "returnKey": false }).await?;
    assert_eq!(batch(&reply)?.0.len(), 3);
    Ok(())
}

#[tokio::test]
async fn find_on_a_missing_collection_is_empty() -> TestResult {
    let (_server, client) = start().await?;
    let found = drain(coll(&client, "nothing").find(doc! { "a": 1 }).await?).await?;
    assert!(found.is_empty());
    let reply = run_command(&client, DB, doc! { "find": "nothing" }).await?;
    let (docs, id) = batch(&reply)?;
    assert!(docs.is_empty());
    assert_eq!(id, 0);
    assert_eq!(reply.get_document("cursor")?.get_str("ns")?, "crud.nothing");
    let names = client.database(DB).list_collection_names().await?;
    assert!(names.is_empty(), "find creates nothing: {names:?}");
    Ok(())
}

#[tokio::test]
async fn find_by_id_answers_like_the_general_filter() -> TestResult {
    // `{_id: v}` alone takes a point-read shortcut; every answer must be the one the general
    // filter gives (`{_id: v, _id: {$exists: true}}` cannot take it).
    let (_server, client) = start().await?;
    let c = coll(&client, "ids");
    c.insert_many([
        doc! { "_id": 1.0, "k": "double one" },
        doc! { "_id": i64::from(i32::MAX) + 1, "k": "long" },
        doc! { "_id": "s", "k": "string" },
        doc! { "_id": true, "k": "bool" },
        doc! { "_id": Bson::Null, "k": "null" },
        doc! { "_id": { "a": 1 }, "k": "doc" },
    ])
    .await?;
    let probes = [
        Bson::Int32(1),
        Bson::Int64(1),
        Bson::Double(1.0),
        Bson::Double(2_147_483_648.0),
        Bson::Int64(2_147_483_648),
        Bson::String("s".into()),
        Bson::String("S".into()),
        Bson::Boolean(true),
        Bson::Boolean(false),
        Bson::Null,
        Bson::Double(f64::NAN),
        Bson::Int32(7),
    ];
    for probe in probes {
        let short = drain(c.find(doc! { "_id": probe.clone() }).await?).await?;
        let general = drain(
            c.find(doc! { "_id": probe.clone(), "k": { "$exists": true } })
                .await?,
        )
        .await?;
        assert_eq!(short, general, "find {{_id: {probe:?}}}");
        let one = c.find_one(doc! { "_id": probe.clone() }).await?;
        assert_eq!(one.as_ref(), general.first(), "find_one {{_id: {probe:?}}}");
    }
    // batchSize 0 still opens a cursor, as for any find; the document comes by getMore.
    let reply = run_command(
        &client,
        DB,
        doc! { "find": "ids", "filter": { "_id": "s" }, "batchSize": 0 },
    )
    .await?;
    let (docs, id) = batch(&reply)?;
    assert!(docs.is_empty());
    assert_ne!(id, 0);
    let more = run_command(&client, DB, doc! { "getMore": id, "collection": "ids" }).await?;
    let next = more.get_document("cursor")?.get_array("nextBatch")?;
    assert_eq!(next.len(), 1);
    Ok(())
}

#[tokio::test]
async fn cursor_reads_the_snapshot_it_started_on() -> TestResult {
    let (_server, client) = start().await?;
    seed(&client, "c", 0..6).await?;
    let c = coll(&client, "c");

    for sort in [None, Some(doc! { "n": 1 })] {
        let mut find = c.find(doc! {}).batch_size(2);
        if let Some(sort) = sort.clone() {
            find = find.sort(sort);
        }
        let mut cursor = find.await?;
        // The first document is in hand; the rest is still on the server.
        assert!(cursor.advance().await?);
        let first = cursor.deserialize_current()?;

        // Change what the cursor has not returned yet.
        c.insert_one(doc! { "_id": 100, "n": 100 }).await?;
        c.insert_one(doc! { "_id": 3_i64 * 1000, "n": 3 }).await?;
        c.delete_one(doc! { "_id": 4 }).await?;
        c.update_one(doc! { "_id": 5 }, doc! { "$set": { "n": -5 } })
            .await?;

        let mut seen = vec![first];
        while cursor.advance().await? {
            seen.push(cursor.deserialize_current()?);
        }
        assert_eq!(
            seen,
            (0..6)
                .map(|i| doc! { "_id": i, "n": i })
                .collect::<Vec<_>>(),
            "sort {sort:?}"
        );

        // Undo, for the next round.
        c.delete_one(doc! { "_id": 100 }).await?;
        c.delete_one(doc! { "_id": 3000_i64 }).await?;
        c.insert_one(doc! { "_id": 4, "n": 4 }).await?;
        c.update_one(doc! { "_id": 5 }, doc! { "$set": { "n": 5 } })
            .await?;
    }

    // A new find sees the changes.
    c.delete_one(doc! { "_id": 0 }).await?;
    assert_eq!(
        ids(&all(&client, "c", doc! {}).await?),
        int32s(&[1, 2, 3, 4, 5])
    );
    Ok(())
}

/// A cursor left idle for 10 minutes (MongoDB's `cursorTimeoutMillis`) is closed: its next
/// `getMore` is `CursorNotFound`. Each use restarts the 10 minutes; `noCursorTimeout` exempts
/// it. Driven by the server's test clock, which cursors read like everything else.
#[tokio::test]
async fn idle_cursors_time_out_after_ten_minutes() -> TestResult {
    const TEN_MINUTES: i64 = 10 * 60 * 1000;
    let server = TestServer::start_with_test_clock().await?;
    let client = server.client().await?;
    seed(&client, "c", 0..10).await?;
    common::advance_clock(&client, 0).await?; // freeze it: every step below is exact
    let open = |no_timeout: bool| {
        let client = client.clone();
        async move {
            let reply = run_command(
                &client,
                DB,
                doc! { "find": "c", "batchSize": 2, "noCursorTimeout": no_timeout },
            )
            .await?;
            batch(&reply).map(|(_, id)| id)
        }
    };
    let get_more = |id: i64| {
        let client = client.clone();
        async move {
            client
                .database(DB)
                .run_command(doc! { "getMore": id, "collection": "c", "batchSize": 2 })
                .await
        }
    };
    let (plain, exempt) = (open(false).await?, open(true).await?);
    common::advance_clock(&client, TEN_MINUTES - 1).await?;
    get_more(plain).await?; // 1 ms short: still open, and the 10 minutes start again
    common::advance_clock(&client, TEN_MINUTES - 1).await?;
    get_more(plain).await?;
    common::advance_clock(&client, TEN_MINUTES).await?;
    let err = get_more(plain).await.expect_err("idle for 10 minutes");
    let ErrorKind::Command(e) = &*err.kind else {
        panic!("not a command error: {err}");
    };
    assert_eq!(
        (e.code, e.code_name.as_str()),
        (43, "CursorNotFound"),
        "{err}"
    );
    get_more(exempt).await?; // noCursorTimeout: 30 minutes idle, still open
    Ok(())
}

#[tokio::test]
async fn killed_cursor_is_cursor_not_found() -> TestResult {
    let (_server, client) = start().await?;
    seed(&client, "c", 0..10).await?;
    let reply = run_command(&client, DB, doc! { "find": "c", "batchSize": 2 }).await?;
    let (_, id) = batch(&reply)?;
    assert_ne!(id, 0);

    let killed = run_command(
        &client,
        DB,
        doc! { "killCursors": "c", "cursors": [id, 424_242_i64] },
    )
    .await?;
    assert_eq!(killed.get_array("cursorsKilled")?, &vec![Bson::Int64(id)]);
    assert_eq!(
        killed.get_array("cursorsNotFound")?,
        &vec![Bson::Int64(424_242)]
    );
    assert!(killed.get_array("cursorsAlive")?.is_empty());
    assert!(killed.get_array("cursorsUnknown")?.is_empty());

    let err = run_command_err(&client, DB, doc! { "getMore": id, "collection": "c" }).await?;
    assert_command_error(&err, 43, "CursorNotFound");
    assert_eq!(err.message, format!("cursor id {id} not found"));

    // An exhausted cursor is gone too.
    let reply = run_command(&client, DB, doc! { "find": "c", "batchSize": 8 }).await?;
    let (_, id) = batch(&reply)?;
    let reply = run_command(&client, DB, doc! { "getMore": id, "collection": "c" }).await?;
    let (rest, next) = batch(&reply)?;
    assert_eq!(ids(&rest), int32s(&[8, 9]));
    assert_eq!(next, 0);
    let err = run_command_err(&client, DB, doc! { "getMore": id, "collection": "c" }).await?;
    assert_command_error(&err, 43, "CursorNotFound");
    Ok(())
}

#[tokio::test]
async fn get_more_on_another_namespace_is_unauthorized() -> TestResult {
    let (_server, client) = start().await?;
    seed(&client, "c", 0..10).await?;
    let reply = run_command(&client, DB, doc! { "find": "c", "batchSize": 2 }).await?;
    let (_, id) = batch(&reply)?;

    let err = run_command_err(&client, DB, doc! { "getMore": id, "collection": "other" }).await?;
    assert_command_error(&err, 13, "Unauthorized");
    assert_eq!(
        err.message,
        "Requested getMore on namespace 'crud.other', but cursor belongs to a different \
         namespace crud.c"
    );
    // Another database is another namespace as well.
    let err = run_command_err(
        &client,
        "elsewhere",
        doc! { "getMore": id, "collection": "c" },
    )
    .await?;
    assert_command_error(&err, 13, "Unauthorized");
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// update
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn update_one_and_many_report_matched_and_modified() -> TestResult {
    let (_server, client) = start().await?;
    seed(&client, "c", 0..5).await?;
    let c = coll(&client, "c");

    let r = c
        .update_one(doc! { "n": { "$gte": 2 } }, doc! { "$set": { "tag": "x" } })
        .await?;
    assert_eq!((r.matched_count, r.modified_count), (1, 1));
    assert_eq!(r.upserted_id, None);
    assert_eq!(c.count_documents(doc! { "tag": "x" }).await?, 1);

    let r = c
        .update_many(doc! { "n": { "$gte": 2 } }, doc! { "$inc": { "n": 10 } })
        .await?;
    assert_eq!((r.matched_count, r.modified_count), (3, 3));
    assert_eq!(
        all(&client, "c", doc! {}).await?,
        [
            doc! { "_id": 0, "n": 0 },
            doc! { "_id": 1, "n": 1 },
            doc! { "_id": 2, "n": 12, "tag": "x" },
            doc! { "_id": 3, "n": 13 },
            doc! { "_id": 4, "n": 14 },
        ]
    );

    let r = c
        .update_many(doc! { "n": { "$gt": 100 } }, doc! { "$set": { "a": 1 } })
        .await?;
    assert_eq!((r.matched_count, r.modified_count), (0, 0));

    // On a collection that does not exist: nothing matched, nothing created.
    let r = coll(&client, "missing")
        .update_many(doc! {}, doc! { "$set": { "a": 1 } })
        .await?;
    assert_eq!((r.matched_count, r.modified_count), (0, 0));
    let names = client.database(DB).list_collection_names().await?;
    assert_eq!(names, ["c"]);
    Ok(())
}

#[tokio::test]
async fn setting_the_same_value_modifies_nothing() -> TestResult {
    let (_server, client) = start().await?;
    let c = coll(&client, "c");
    c.insert_many([doc! { "_id": 1, "a": 5 }, doc! { "_id": 2, "a": 6 }])
        .await?;
    let r = c
        .update_one(doc! { "_id": 1 }, doc! { "$set": { "a": 5 } })
        .await?;
    assert_eq!((r.matched_count, r.modified_count), (1, 0));
    let r = c.update_many(doc! {}, doc! { "$set": { "a": 6 } }).await?;
    assert_eq!((r.matched_count, r.modified_count), (2, 1));

    let reply = run_command(
        &client,
        DB,
        doc! { "update": "c", "updates": [{ "q": {}, "u": { "$set": { "a": 6 } }, "multi": true }] },
    )
    .await?;
    assert_eq!(reply.get_i32("n")?, 2, "{reply}");
    assert_eq!(reply.get_i32("nModified")?, 0, "{reply}");
    assert!(!reply.contains_key("upserted"), "{reply}");
    Ok(())
}

#[tokio::test]
async fn upsert_seeds_the_new_document_from_filter_equalities() -> TestResult {
    let (_server, client) = start().await?;
    let c = coll(&client, "c");
    let r = c
        .update_one(
            doc! { "a": 1, "b.c": "x", "d": { "$gt": 5 }, "e": { "$eq": 2 } },
            doc! { "$set": { "f": true }, "$inc": { "n": 3 } },
        )
        .upsert(true)
        .await?;
    assert_eq!((r.matched_count, r.modified_count), (0, 0));
    let Some(Bson::ObjectId(id)) = r.upserted_id else {
        panic!(
            "upserted_id {:?} is not a generated ObjectId",
            r.upserted_id
        );
    };
    let raw = raw_coll(&client, "c")
        .find_one(doc! { "_id": id })
        .await?
        .ok_or("upserted document missing")?;
    assert_eq!(raw_keys(&raw)[0], "_id", "the generated _id comes first");
    let created = c.find_one(doc! { "_id": id }).await?.ok_or("missing")?;
    assert_eq!(created.get_i32("a")?, 1);
    assert_eq!(created.get_document("b")?, &doc! { "c": "x" });
    assert_eq!(created.get_i32("e")?, 2);
    assert!(
        !created.contains_key("d"),
        "a range is not an equality: {created}"
    );
    assert!(created.get_bool("f")?);
    assert_eq!(created.get_i32("n")?, 3);

    // With _id in the filter, that is the new document's _id.
    let r = c
        .update_one(doc! { "_id": "k" }, doc! { "$set": { "v": 1 } })
        .upsert(true)
        .await?;
    assert_eq!(r.upserted_id, Some(Bson::String("k".into())));
    assert_eq!(
        c.find_one(doc! { "_id": "k" }).await?,
        Some(doc! { "_id": "k", "v": 1 })
    );

    // A second upsert with the same filter matches instead.
    let r = c
        .update_one(doc! { "_id": "k" }, doc! { "$set": { "v": 2 } })
        .upsert(true)
        .await?;
    assert_eq!((r.matched_count, r.modified_count), (1, 1));
    assert_eq!(r.upserted_id, None);

    // The raw reply lists upserts with their statement index.
    let reply = run_command(
        &client,
        DB,
        doc! {
            "update": "c",
            "updates": [
                { "q": { "_id": "k" }, "u": { "$set": { "v": 3 } }, "upsert": true },
                { "q": { "_id": "new" }, "u": { "$set": { "v": 4 } }, "upsert": true },
            ],
        },
    )
    .await?;
    assert_eq!(reply.get_i32("n")?, 2, "{reply}");
    assert_eq!(reply.get_i32("nModified")?, 1, "{reply}");
    assert_eq!(
        reply.get_array("upserted")?,
        &vec![Bson::Document(doc! { "index": 1, "_id": "new" })]
    );
    Ok(())
}

#[tokio::test]
async fn replace_one_keeps_the_id_and_refuses_to_change_it() -> TestResult {
    let (_server, client) = start().await?;
    let c = coll(&client, "c");
    c.insert_one(doc! { "_id": 1, "a": 1, "b": 2 }).await?;

    let r = c.replace_one(doc! { "a": 1 }, doc! { "z": "new" }).await?;
    assert_eq!((r.matched_count, r.modified_count), (1, 1));
    let raw = raw_coll(&client, "c")
        .find_one(doc! { "_id": 1 })
        .await?
        .ok_or("replaced document missing")?;
    assert_eq!(raw_keys(&raw), ["_id", "z"]);

    // The same _id, spelled out (anywhere in the replacement), is fine.
    let r = c
        .replace_one(doc! { "_id": 1 }, doc! { "z": "again", "_id": 1 })
        .await?;
    assert_eq!(r.modified_count, 1);
    let raw = raw_coll(&client, "c")
        .find_one(doc! { "_id": 1 })
        .await?
        .ok_or("replaced document missing")?;
    assert_eq!(raw_keys(&raw), ["_id", "z"], "_id stays first");

    let err = c
        .replace_one(doc! { "_id": 1 }, doc! { "_id": 2, "z": "moved" })
        .await
        .expect_err("_id is immutable");
    let we = write_error(&err).ok_or_else(|| format!("not a write error: {err}"))?;
    assert_eq!(we.code, 66, "{we:?}");
    assert_eq!(
        we.message,
        "After applying the update, the (immutable) field '_id' was found to have been altered \
         to _id: 2"
    );
    assert_eq!(c.count_documents(doc! { "_id": 2 }).await?, 0);

    // A replacement upsert takes _id from the filter and nothing else.
    let r = c
        .replace_one(doc! { "_id": 9, "x": 1 }, doc! { "y": 2 })
        .upsert(true)
        .await?;
    assert_eq!(r.upserted_id, Some(Bson::Int32(9)));
    assert_eq!(
        c.find_one(doc! { "_id": 9 }).await?,
        Some(doc! { "_id": 9, "y": 2 })
    );
    Ok(())
}

#[tokio::test]
async fn update_errors_and_their_codes() -> TestResult {
    let (_server, client) = start().await?;
    let c = coll(&client, "c");
    c.insert_many([doc! { "_id": 1, "a": "text" }, doc! { "_id": 2, "a": 2 }])
        .await?;

    // multi with a replacement document (the driver refuses it itself, so send it raw).
    let reply = run_command(
        &client,
        DB,
        doc! { "update": "c", "updates": [{ "q": {}, "u": { "b": 1 }, "multi": true }] },
    )
    .await?;
    let errors = write_errors(&reply);
    assert_eq!(errors.len(), 1, "{reply}");
    assert_eq!(errors[0].get_i32("code")?, 9, "{reply}");
    assert_eq!(
        errors[0].get_str("errmsg")?,
        "multi update is not supported for replacement-style update"
    );
    assert_eq!(reply.get_i32("n")?, 0);

    let cases = [
        (
            doc! { "$inc": { "a": 1 } },
            14,
            "Cannot apply $inc to a value of non-numeric type. {_id: 1} has the field 'a' of \
             non-numeric type string",
        ),
        (
            doc! { "$frobnicate": { "a": 1 } },
            9,
            "Unknown modifier: $frobnicate. Expected a valid update modifier or pipeline-style \
             update specified as an array",
        ),
        (
            doc! { "$set": { "a": 1 }, "$inc": { "a": 1 } },
            40,
            "Updating the path 'a' would create a conflict at 'a'",
        ),
    ];
    for (update, code, message) in cases {
        let err = c
            .update_one(doc! { "_id": 1 }, update.clone())
            .await
            .expect_err("the update fails");
        let we = write_error(&err).ok_or_else(|| format!("{update}: not a write error: {err}"))?;
        assert_eq!((we.code, we.message.as_str()), (code, message), "{update}");
    }
    // Nothing changed.
    assert_eq!(
        all(&client, "c", doc! {}).await?,
        [doc! { "_id": 1, "a": "text" }, doc! { "_id": 2, "a": 2 }]
    );
    Ok(())
}

#[tokio::test]
async fn update_statements_see_earlier_statements_of_the_command() -> TestResult {
    let (_server, client) = start().await?;
    let reply = run_command(
        &client,
        DB,
        doc! {
            "update": "c",
            "updates": [
                { "q": { "_id": 1 }, "u": { "$inc": { "n": 1 } }, "upsert": true },
                { "q": { "_id": 1 }, "u": { "$inc": { "n": 1 } }, "upsert": true },
            ],
        },
    )
    .await?;
    assert!(write_errors(&reply).is_empty(), "{reply}");
    assert_eq!(reply.get_i32("n")?, 2, "{reply}");
    assert_eq!(reply.get_i32("nModified")?, 1, "{reply}");
    assert_eq!(
        all(&client, "c", doc! {}).await?,
        [doc! { "_id": 1, "n": 2 }]
    );

    let reply = run_command(
        &client,
        DB,
        doc! {
            "update": "c",
            "updates": [
                { "q": { "n": 2 }, "u": { "$set": { "n": 3 } } },
                { "q": { "n": 3 }, "u": { "$set": { "n": 4 } } },
            ],
        },
    )
    .await?;
    assert_eq!(reply.get_i32("nModified")?, 2, "{reply}");
    assert_eq!(
        all(&client, "c", doc! {}).await?,
        [doc! { "_id": 1, "n": 4 }]
    );
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// delete
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn delete_one_and_many_report_counts() -> TestResult {
    let (_server, client) = start().await?;
    seed(&client, "c", 0..6).await?;
    let c = coll(&client, "c");
    assert_eq!(
        c.delete_one(doc! { "n": { "$gte": 3 } })
            .await?
            .deleted_count,
        1
    );
    assert_eq!(
        ids(&all(&client, "c", doc! {}).await?),
        int32s(&[0, 1, 2, 4, 5])
    );
    assert_eq!(
        c.delete_many(doc! { "n": { "$gte": 1 } })
            .await?
            .deleted_count,
        4
    );
    assert_eq!(c.delete_one(doc! { "n": 99 }).await?.deleted_count, 0);
    assert_eq!(c.delete_many(doc! {}).await?.deleted_count, 1);
    assert_eq!(c.count_documents(doc! {}).await?, 0);
    assert_eq!(
        coll(&client, "missing")
            .delete_many(doc! {})
            .await?
            .deleted_count,
        0
    );
    Ok(())
}

#[tokio::test]
async fn delete_limit_other_than_zero_or_one_is_refused() -> TestResult {
    let (_server, client) = start().await?;
    seed(&client, "c", 0..3).await?;
    for limit in [Bson::Int32(2), Bson::Int32(-1), Bson::Double(0.5)] {
        let command = doc! { "delete": "c", "deletes": [{ "q": {}, "limit": limit.clone() }] };
        // mongod fails the whole command; accept a write error too, but never a deletion.
        let code = match client.database(DB).run_command(command).await {
            Err(e) => command_error(&e).ok_or("not a command error")?.code,
            Ok(reply) => write_errors(&reply)
                .first()
                .ok_or_else(|| format!("limit {limit} accepted: {reply}"))?
                .get_i32("code")?,
        };
        assert_eq!(code, 9, "limit {limit}");
    }
    assert_eq!(coll(&client, "c").count_documents(doc! {}).await?, 3);
    Ok(())
}

#[tokio::test]
async fn malformed_statements_fail_the_whole_command() -> TestResult {
    let (_server, client) = start().await?;
    seed(&client, "c", 0..3).await?;
    let err = run_command_err(
        &client,
        DB,
        doc! { "delete": "c", "deletes": [{ "q": {}, "limit": 2 }] },
    )
    .await?;
    assert_command_error(&err, 9, "FailedToParse");
    assert_eq!(
        err.message,
        "The limit field in delete objects must be 0 or 1. Got 2"
    );
    let err = run_command_err(
        &client,
        DB,
        doc! { "update": "c", "updates": [{ "q": {}, "u": { "$set": { "a": 1 } }, "frob": 1 }] },
    )
    .await?;
    assert_eq!(err.code, 40415, "{err:?}");
    assert_eq!(
        err.message,
        "BSON field 'update.updates.frob' is an unknown field."
    );
    let err = run_command_err(
        &client,
        DB,
        doc! { "update": "c", "updates": [{ "u": { "$set": { "a": 1 } } }] },
    )
    .await?;
    assert_eq!(err.code, 40414, "{err:?}");
    assert_eq!(
        coll(&client, "c").count_documents(doc! { "a": 1 }).await?,
        0
    );
    Ok(())
}

#[tokio::test]
async fn delete_statements_see_earlier_statements_of_the_command() -> TestResult {
    let (_server, client) = start().await?;
    seed(&client, "c", 0..2).await?;
    let reply = run_command(
        &client,
        DB,
        doc! {
            "delete": "c",
            "deletes": [{ "q": {}, "limit": 1 }, { "q": {}, "limit": 1 }],
        },
    )
    .await?;
    assert_eq!(reply.get_i32("n")?, 2, "{reply}");
    assert_eq!(coll(&client, "c").count_documents(doc! {}).await?, 0);
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// findAndModify
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn find_one_and_update_returns_before_or_after() -> TestResult {
    let (_server, client) = start().await?;
    seed(&client, "c", 0..4).await?;
    let c = coll(&client, "c");

    let before = c
        .find_one_and_update(doc! { "_id": 1 }, doc! { "$inc": { "n": 10 } })
        .await?;
    assert_eq!(before, Some(doc! { "_id": 1, "n": 1 }));
    let after = c
        .find_one_and_update(doc! { "_id": 1 }, doc! { "$inc": { "n": 10 } })
        .return_document(ReturnDocument::After)
        .await?;
    assert_eq!(after, Some(doc! { "_id": 1, "n": 21 }));

    // sort picks which match is modified; the projection shapes what comes back.
    let top = c
        .find_one_and_update(
            doc! { "n": { "$lt": 10 } },
            doc! { "$set": { "top": true } },
        )
        .sort(doc! { "n": -1 })
        .projection(doc! { "top": 1, "_id": 0 })
        .return_document(ReturnDocument::After)
        .await?;
    assert_eq!(top, Some(doc! { "top": true }));
    assert_eq!(
        c.find_one(doc! { "top": true }).await?,
        Some(doc! { "_id": 3, "n": 3, "top": true })
    );

    // No match, no upsert: nothing.
    let none = c
        .find_one_and_update(doc! { "_id": 99 }, doc! { "$set": { "a": 1 } })
        .await?;
    assert_eq!(none, None);
    assert_eq!(c.count_documents(doc! {}).await?, 4);

    // Upsert: before is nothing, after is the new document.
    let before = c
        .find_one_and_update(doc! { "_id": 50 }, doc! { "$set": { "a": 1 } })
        .upsert(true)
        .await?;
    assert_eq!(before, None);
    let after = c
        .find_one_and_update(doc! { "_id": 51, "k": "v" }, doc! { "$set": { "a": 1 } })
        .upsert(true)
        .return_document(ReturnDocument::After)
        .await?;
    assert_eq!(after, Some(doc! { "_id": 51, "k": "v", "a": 1 }));
    assert_eq!(c.count_documents(doc! {}).await?, 6);
    Ok(())
}

#[tokio::test]
async fn find_one_and_replace_and_delete() -> TestResult {
    let (_server, client) = start().await?;
    seed(&client, "c", 0..5).await?;
    let c = coll(&client, "c");

    let old = c
        .find_one_and_replace(doc! { "_id": 2 }, doc! { "r": "x" })
        .await?;
    assert_eq!(old, Some(doc! { "_id": 2, "n": 2 }));
    let new = c
        .find_one_and_replace(doc! { "_id": 2 }, doc! { "r": "y" })
        .return_document(ReturnDocument::After)
        .await?;
    assert_eq!(new, Some(doc! { "_id": 2, "r": "y" }));

    let err = c
        .find_one_and_replace(doc! { "_id": 2 }, doc! { "_id": 3, "r": "z" })
        .await
        .expect_err("_id is immutable");
    let ce = command_error(&err).ok_or_else(|| format!("not a command error: {err}"))?;
    assert_eq!(ce.code, 66, "{ce:?}");

    let deleted = c
        .find_one_and_delete(doc! { "n": { "$exists": true } })
        .sort(doc! { "n": -1 })
        .await?;
    assert_eq!(deleted, Some(doc! { "_id": 4, "n": 4 }));
    let deleted = c
        .find_one_and_delete(doc! {})
        .sort(doc! { "_id": 1 })
        .projection(doc! { "_id": 1 })
        .await?;
    assert_eq!(deleted, Some(doc! { "_id": 0 }));
    assert_eq!(c.find_one_and_delete(doc! { "_id": 99 }).await?, None);
    assert_eq!(ids(&all(&client, "c", doc! {}).await?), int32s(&[1, 2, 3]));
    Ok(())
}

#[tokio::test]
async fn find_and_modify_reply_shape_and_errors() -> TestResult {
    let (_server, client) = start().await?;
    seed(&client, "c", 0..3).await?;

    let reply = run_command(
        &client,
        DB,
        doc! { "findAndModify": "c", "query": { "_id": 1 }, "update": { "$set": { "a": 1 } } },
    )
    .await?;
    assert_eq!(
        reply.get_document("lastErrorObject")?,
        &doc! { "n": 1, "updatedExisting": true }
    );
    assert_eq!(reply.get_document("value")?, &doc! { "_id": 1, "n": 1 });
    assert!(is_ok(&reply), "{reply}");

    let reply = run_command(
        &client,
        DB,
        doc! {
            "findAndModify": "c",
            "query": { "_id": 7 },
            "update": { "$set": { "a": 1 } },
            "upsert": true,
            "new": true,
        },
    )
    .await?;
    assert_eq!(
        reply.get_document("lastErrorObject")?,
        &doc! { "n": 1, "updatedExisting": false, "upserted": 7 }
    );
    assert_eq!(reply.get_document("value")?, &doc! { "_id": 7, "a": 1 });

    let reply = run_command(
        &client,
        DB,
        doc! { "findAndModify": "c", "query": { "_id": 99 }, "update": { "$set": { "a": 1 } } },
    )
    .await?;
    assert_eq!(
        reply.get_document("lastErrorObject")?,
        &doc! { "n": 0, "updatedExisting": false }
    );
    assert_eq!(reply.get("value"), Some(&Bson::Null));

    let reply = run_command(
        &client,
        DB,
        doc! { "findAndModify": "c", "query": { "_id": 0 }, "remove": true },
    )
    .await?;
    assert_eq!(reply.get_document("lastErrorObject")?, &doc! { "n": 1 });
    assert_eq!(reply.get_document("value")?, &doc! { "_id": 0, "n": 0 });

    let err = run_command_err(
        &client,
        DB,
        doc! {
            "findAndModify": "c",
            "query": { "_id": 1 },
            "remove": true,
            "update": { "$set": { "a": 2 } },
        },
    )
    .await?;
    assert_command_error(&err, 9, "FailedToParse");
    assert_eq!(err.message, "Cannot specify both an update and remove=true");

    let err = run_command_err(&client, DB, doc! { "findAndModify": "c", "query": {} }).await?;
    assert_command_error(&err, 9, "FailedToParse");
    assert_eq!(
        err.message,
        "Either an update or remove=true must be specified"
    );

    let err = run_command_err(
        &client,
        DB,
        doc! {
            "findAndModify": "c",
            "query": { "_id": 1 },
            "update": { "$set": { "a": 1 }, "$inc": { "a": 1 } },
        },
    )
    .await?;
    assert_command_error(&err, 40, "ConflictingUpdateOperators");
    assert_eq!(
        coll(&client, "c").find_one(doc! { "_id": 1 }).await?,
        Some(doc! { "_id": 1, "n": 1, "a": 1 }),
        "failed commands change nothing"
    );
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// count, distinct, aggregate
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn count_documents_and_estimated_count() -> TestResult {
    let (_server, client) = start().await?;
    seed_people(&client).await?;
    let people = coll(&client, "people");
    assert_eq!(people.count_documents(doc! {}).await?, 5);
    assert_eq!(people.count_documents(doc! { "city": "oslo" }).await?, 3);
    assert_eq!(
        people
            .count_documents(doc! { "age": { "$gt": 30 } })
            .skip(1)
            .limit(1)
            .await?,
        1
    );
    assert_eq!(people.count_documents(doc! { "city": "nowhere" }).await?, 0);
    assert_eq!(people.estimated_document_count().await?, 5);
    assert_eq!(
        coll(&client, "missing").estimated_document_count().await?,
        0
    );
    assert_eq!(coll(&client, "missing").count_documents(doc! {}).await?, 0);

    let reply = run_command(
        &client,
        DB,
        doc! { "count": "people", "query": { "city": "oslo" }, "skip": 1 },
    )
    .await?;
    assert_eq!(integer(reply.get("n")), Some(2), "{reply}");
    Ok(())
}

#[tokio::test]
async fn distinct_expands_arrays_and_collapses_numeric_duplicates() -> TestResult {
    let (_server, client) = start().await?;
    let c = coll(&client, "c");
    c.insert_many([
        doc! { "_id": 1, "v": 1, "k": "a" },
        doc! { "_id": 2, "v": 1.0, "k": "a" },
        doc! { "_id": 3, "v": 1_i64, "k": "b" },
        doc! { "_id": 4, "v": [2, 3, [4]], "k": "b" },
        doc! { "_id": 5, "v": "s", "k": "a" },
        doc! { "_id": 6, "k": "a" },
        doc! { "_id": 7, "v": null, "k": "c" },
        doc! { "_id": 8, "v": 3, "k": "c" },
    ])
    .await?;
    let values = c.distinct("v", doc! {}).await?;
    // 1 (int, double and long are one value), 2, 3, [4], "s" and null; arrays expand one level.
    assert_eq!(values.len(), 6, "{values:?}");
    let numbers: Vec<f64> = values
        .iter()
        .filter_map(|v| common::number(Some(v)))
        .collect();
    assert_eq!(numbers, [1.0, 2.0, 3.0], "{values:?}");
    assert!(values.contains(&Bson::String("s".into())));
    assert!(values.contains(&Bson::Null));
    assert!(values.contains(&Bson::Array(vec![Bson::Int32(4)])));

    let filtered = c.distinct("k", doc! { "_id": { "$gte": 4 } }).await?;
    assert_eq!(filtered.len(), 3, "{filtered:?}");
    for k in ["a", "b", "c"] {
        assert!(filtered.contains(&Bson::String(k.into())), "{filtered:?}");
    }
    assert!(
        coll(&client, "missing")
            .distinct("v", doc! {})
            .await?
            .is_empty()
    );

    // Dotted paths reach into arrays of documents.
    coll(&client, "d")
        .insert_many([
            doc! { "a": [{ "b": 1 }, { "b": 2 }, { "c": 9 }] },
            doc! { "a": { "b": 2.0 } },
            doc! { "a": [{ "b": [3, 1] }] },
        ])
        .await?;
    let nested = coll(&client, "d").distinct("a.b", doc! {}).await?;
    let numbers: Vec<f64> = nested
        .iter()
        .filter_map(|v| common::number(Some(v)))
        .collect();
    assert_eq!(numbers, [1.0, 2.0, 3.0], "{nested:?}");
    assert_eq!(nested.len(), 3, "{nested:?}");
    Ok(())
}

#[tokio::test]
async fn aggregate_stages() -> TestResult {
    let (_server, client) = start().await?;
    seed_people(&client).await?;
    let people = coll(&client, "people");

    let docs = drain(
        people
            .aggregate([
                doc! { "$match": { "age": { "$gte": 25 } } },
                doc! { "$sort": { "age": -1, "_id": 1 } },
                doc! { "$skip": 1 },
                doc! { "$limit": 3 },
                doc! { "$project": { "name": 1, "_id": 0 } },
            ])
            .await?,
    )
    .await?;
    assert_eq!(
        docs,
        [
            doc! { "name": "eve" },
            doc! { "name": "ann" },
            doc! { "name": "bob" }
        ]
    );

    let counted = drain(
        people
            .aggregate([
                doc! { "$match": { "city": "oslo" } },
                doc! { "$count": "total" },
            ])
            .await?,
    )
    .await?;
    assert_eq!(counted, [doc! { "total": 3 }]);
    let none = drain(
        people
            .aggregate([
                doc! { "$match": { "city": "x" } },
                doc! { "$count": "total" },
            ])
            .await?,
    )
    .await?;
    assert!(
        none.is_empty(),
        "$count of nothing is no document: {none:?}"
    );

    let groups = drain(
        people
            .aggregate([
                doc! { "$group": {
                    "_id": "$city",
                    "n": { "$sum": 1 },
                    "ages": { "$sum": "$age" },
                    "avg": { "$avg": "$age" },
                    "min": { "$min": "$age" },
                    "max": { "$max": "$age" },
                    "names": { "$push": "$name" },
                } },
                doc! { "$sort": { "_id": 1 } },
            ])
            .await?,
    )
    .await?;
    assert_eq!(
        groups,
        [
            doc! { "_id": "lima", "n": 1, "ages": 25, "avg": 25.0, "min": 25, "max": 25, "names": ["dee"] },
            doc! { "_id": "oslo", "n": 3, "ages": 110, "avg": 110.0 / 3.0, "min": 31, "max": 42, "names": ["ann", "cid", "eve"] },
            doc! { "_id": "rome", "n": 1, "ages": 25, "avg": 25.0, "min": 25, "max": 25, "names": ["bob"] },
        ]
    );

    let whole = drain(
        people
            .aggregate([doc! { "$group": { "_id": null, "n": { "$sum": 1 } } }])
            .await?,
    )
    .await?;
    assert_eq!(whole, [doc! { "_id": null, "n": 5 }]);

    // A small batch size makes the driver getMore through the result.
    let batched = drain(
        people
            .aggregate([doc! { "$sort": { "_id": -1 } }])
            .batch_size(2)
            .await?,
    )
    .await?;
    assert_eq!(ids(&batched), int32s(&[5, 4, 3, 2, 1]));

    // On a missing collection: an empty result.
    let reply = run_command(
        &client,
        DB,
        doc! { "aggregate": "missing", "pipeline": [], "cursor": {} },
    )
    .await?;
    let (docs, id) = batch(&reply)?;
    assert!(docs.is_empty());
    assert_eq!(id, 0);
    Ok(())
}

#[tokio::test]
async fn aggregate_refuses_unknown_stages_and_a_missing_cursor() -> TestResult {
    let (_server, client) = start().await?;
    seed_people(&client).await?;
    let err = run_command_err(
        &client,
        DB,
        doc! { "aggregate": "people", "pipeline": [{ "$frobnicate": {} }], "cursor": {} },
    )
    .await?;
    assert_eq!(
        err.message,
        "Unrecognized pipeline stage name: '$frobnicate'"
    );

    let err = run_command_err(&client, DB, doc! { "aggregate": "people", "pipeline": [] }).await?;
    assert_command_error(&err, 9, "FailedToParse");
    assert_eq!(
        err.message,
        "The 'cursor' option is required, except for aggregate with the explain argument"
    );
    Ok(())
}

#[tokio::test]
async fn unknown_stage_is_40324() -> TestResult {
    let (_server, client) = start().await?;
    let err = run_command_err(
        &client,
        DB,
        doc! { "aggregate": "people", "pipeline": [{ "$frobnicate": {} }], "cursor": {} },
    )
    .await?;
    assert_command_error(&err, 40324, "Location40324");
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// let variables, $getField / $setField / $unsetField
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn let_variables_reach_find_aggregate_update_and_delete() -> TestResult {
    let (_server, client) = start().await?;
    seed_people(&client).await?;
    let people = coll(&client, "people");

    // find: the filter's `$expr` and computed projection fields see the variables.
    let found = drain(
        people
            .find(doc! { "$expr": { "$eq": ["$city", "$$town"] } })
            .projection(doc! { "greeting": { "$concat": ["$$hello", " ", "$name"] } })
            .sort(doc! { "_id": 1 })
            .let_vars(doc! { "town": "oslo", "hello": "hi" })
            .await?,
    )
    .await?;
    assert_eq!(
        found,
        [
            doc! { "_id": 1, "greeting": "hi ann" },
            doc! { "_id": 3, "greeting": "hi cid" },
            doc! { "_id": 5, "greeting": "hi eve" },
        ]
    );

    // aggregate: `$match`, `$group` and `$project`; a variable may use the ones before it.
    let grouped = drain(
        people
            .aggregate([
                doc! { "$match": { "$expr": { "$gte": ["$age", "$$min"] } } },
                doc! { "$group": { "_id": "$$label", "n": { "$sum": "$$weight" } } },
                doc! { "$project": { "_id": 0, "label": "$_id", "n": 1, "lit": "$$lit" } },
            ])
            .let_vars(doc! {
                "min": 30, "label": "older", "weight": 2, "lit": { "$literal": "$x" },
            })
            .await?,
    )
    .await?;
    assert_eq!(grouped, [doc! { "n": 6, "label": "older", "lit": "$x" }]);

    // update: the filter and the pipeline see `let`; `$$NOW` is one instant for the command.
    let result = people
        .update_many(
            doc! { "$expr": { "$eq": ["$age", "$$age"] } },
            vec![doc! { "$set": { "group": "$$group", "seen": "$$NOW", "seenToo": "$$NOW" } }],
        )
        .let_vars(doc! { "age": 25, "group": "young" })
        .await?;
    assert_eq!((result.matched_count, result.modified_count), (2, 2));
    let young = all(&client, "people", doc! { "group": "young" }).await?;
    assert_eq!(ids(&young), int32s(&[2, 4]));
    let stamps: Vec<&Bson> = young
        .iter()
        .flat_map(|d| [d.get("seen"), d.get("seenToo")])
        .collect::<Option<_>>()
        .ok_or("no $$NOW stored")?;
    assert!(matches!(stamps[0], Bson::DateTime(_)), "{stamps:?}");
    assert!(stamps.iter().all(|s| *s == stamps[0]), "{stamps:?}");

    // findAndModify.
    let after = people
        .find_one_and_update(
            doc! { "$expr": { "$eq": ["$_id", "$$id"] } },
            vec![doc! { "$set": { "name": { "$toUpper": "$name" } } }],
        )
        .projection(doc! { "name": 1, "_id": 0 })
        .let_vars(doc! { "id": 3 })
        .return_document(ReturnDocument::After)
        .await?;
    assert_eq!(after, Some(doc! { "name": "CID" }));

    // delete.
    let deleted = people
        .delete_many(doc! { "$expr": { "$in": ["$city", "$$cities"] } })
        .let_vars(doc! { "cities": ["rome", "lima"] })
        .await?;
    assert_eq!(deleted.deleted_count, 2);
    assert_eq!(
        ids(&all(&client, "people", doc! {}).await?),
        int32s(&[1, 3, 5])
    );

    // A statement's constants (`c`) come after the command's `let` and win over it.
    let reply = run_command(
        &client,
        DB,
        doc! {
            "update": "people",
            "let": { "v": "from let", "w": "from let" },
            "updates": [{ "q": { "_id": 1 }, "u": [{ "$set": { "v": "$$v", "w": "$$w" } }], "c": { "v": "from c" } }],
        },
    )
    .await?;
    assert_eq!(reply.get_i32("nModified")?, 1, "{reply}");
    let one = all(&client, "people", doc! { "_id": 1 }).await?;
    assert_eq!(one[0].get_str("v")?, "from c");
    assert_eq!(one[0].get_str("w")?, "from let");
    Ok(())
}

#[tokio::test]
async fn bad_let_fails_the_whole_command() -> TestResult {
    let (_server, client) = start().await?;
    seed_people(&client).await?;

    let err = run_command_err(&client, DB, doc! { "find": "people", "let": 1 }).await?;
    assert_command_error(&err, 14, "TypeMismatch");
    assert_eq!(
        err.message,
        "BSON field 'FindCommandRequest.let' is the wrong type 'int', expected type 'object'"
    );

    let err = run_command_err(
        &client,
        DB,
        doc! { "delete": "people", "deletes": [{ "q": {}, "limit": 0 }], "let": { "Upper": 1 } },
    )
    .await?;
    assert_command_error(&err, 16867, "Location16867");
    assert_eq!(
        err.message,
        "Invalid 'let' parameter :: caused by :: 'Upper' starts with an invalid character for a \
         user variable name"
    );

    let err = run_command_err(
        &client,
        DB,
        doc! {
            "update": "people",
            "updates": [{ "q": {}, "u": [{ "$set": { "a": 1 } }], "multi": true }],
            "let": { "x": "$age" },
        },
    )
    .await?;
    assert_command_error(&err, 4_890_500, "Location4890500");

    let err = run_command_err(
        &client,
        DB,
        doc! { "aggregate": "people", "pipeline": [], "cursor": {}, "let": { "NOW": 1 } },
    )
    .await?;
    assert_command_error(&err, 4_738_901, "Location4738901");
    assert_eq!(err.message, "Attempt to set internal constant: NOW");

    // Nothing ran.
    assert_eq!(coll(&client, "people").count_documents(doc! {}).await?, 5);

    // Without `let`, a user variable is undefined: the query fails at parse time.
    let err = run_command_err(
        &client,
        DB,
        doc! { "find": "people", "filter": { "$expr": { "$eq": ["$_id", "$$id"] } } },
    )
    .await?;
    assert_command_error(&err, 17276, "Location17276");
    assert_eq!(err.message, "Use of undefined variable: id");
    Ok(())
}

#[tokio::test]
async fn pipeline_updates_store_dotted_and_dollar_prefixed_names() -> TestResult {
    let (_server, client) = start().await?;
    let c = coll(&client, "dots");
    c.insert_one(doc! { "_id": 1, "foo": {} }).await?;

    c.update_one(
        doc! { "_id": 1 },
        vec![doc! { "$replaceWith": {
            "$setField": { "field": { "$literal": "$a" }, "value": 1, "input": "$$ROOT" },
        } }],
    )
    .await?;
    c.update_one(
        doc! { "_id": 1 },
        vec![doc! { "$set": {
            "foo": { "$setField": { "field": "a.b", "value": 2, "input": "$foo" } },
        } }],
    )
    .await?;
    let stored = raw_coll(&client, "dots")
        .find_one(doc! {})
        .await?
        .ok_or("no document")?;
    assert_eq!(raw_keys(&stored), ["_id", "foo", "$a"]);
    let stored: Document = stored.try_into()?;
    assert_eq!(stored, doc! { "_id": 1, "foo": { "a.b": 2 }, "$a": 1 });

    // `$getField` reads them back.
    let found = drain(
        c.find(doc! { "$expr": { "$eq": [{ "$getField": { "$literal": "$a" } }, 1] } })
            .projection(
                doc! { "_id": 0, "x": { "$getField": { "field": "a.b", "input": "$foo" } } },
            )
            .await?,
    )
    .await?;
    assert_eq!(found, [doc! { "x": 2 }]);

    // `$unsetField` removes one.
    c.update_one(
        doc! { "_id": 1 },
        vec![doc! { "$replaceWith": {
            "$unsetField": { "field": { "$literal": "$a" }, "input": "$$ROOT" },
        } }],
    )
    .await?;
    assert_eq!(
        all(&client, "dots", doc! {}).await?,
        [doc! { "_id": 1, "foo": { "a.b": 2 } }]
    );

    // The field name must be a constant string.
    let err = c
        .update_one(
            doc! { "_id": 1 },
            vec![doc! { "$replaceWith": {
                "$setField": { "field": "$name", "value": 1, "input": "$$ROOT" },
            } }],
        )
        .await
        .unwrap_err();
    let we = write_error(&err).ok_or("not a write error")?;
    assert_eq!(we.code, 4_161_108);
    assert_eq!(
        we.message,
        "'$CURRENT.name' is a field path reference which is not allowed in this context. Did \
         you mean {$literal: '$CURRENT.name'}?"
    );

    // An operator update still may not create a `$`-prefixed top-level field.
    let err = c
        .update_one(doc! { "_id": 1 }, doc! { "$set": { "$b": 1 } })
        .await
        .unwrap_err();
    assert_eq!(write_error(&err).ok_or("not a write error")?.code, 52);
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// write concerns
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn relaxed_write_concerns_are_accepted_and_applied() -> TestResult {
    let (_server, client) = start().await?;
    let c = coll(&client, "c");
    let relaxed = WriteConcern::builder().journal(false).build();
    c.insert_one(doc! { "_id": 1 })
        .write_concern(relaxed.clone())
        .await?;
    c.update_one(doc! { "_id": 1 }, doc! { "$set": { "a": 1 } })
        .write_concern(relaxed.clone())
        .await?;
    c.insert_one(doc! { "_id": 2 })
        .write_concern(WriteConcern::builder().journal(true).build())
        .await?;
    c.delete_one(doc! { "_id": 2 })
        .write_concern(relaxed)
        .await?;
    assert_eq!(
        all(&client, "c", doc! {}).await?,
        [doc! { "_id": 1, "a": 1 }]
    );

    // The driver refuses w: 0 itself; sent raw, the server applies it and answers.
    for wc in [
        doc! { "w": 0 },
        doc! { "w": 0, "j": false },
        doc! { "w": 1, "j": false },
        doc! { "w": "majority" },
        doc! { "w": 1, "wtimeout": 100 },
    ] {
        let reply = run_command(
            &client,
            DB,
            doc! { "insert": "w", "documents": [{ "wc": wc.clone() }], "writeConcern": wc.clone() },
        )
        .await?;
        assert!(is_ok(&reply), "{wc}: {reply}");
    }
    assert_eq!(coll(&client, "w").count_documents(doc! {}).await?, 5);
    Ok(())
}

#[tokio::test]
async fn invalid_write_concern_is_refused() -> TestResult {
    let (_server, client) = start().await?;
    for wc in [
        doc! { "frobnicate": 1 },
        doc! { "w": [1] },
        doc! { "j": "yes" },
    ] {
        let err = run_command_err(
            &client,
            DB,
            doc! { "insert": "c", "documents": [{ "_id": 1 }], "writeConcern": wc.clone() },
        )
        .await?;
        assert!(!err.message.is_empty(), "{wc}: {err:?}");
    }
    let err = run_command_err(
        &client,
        DB,
        doc! { "insert": "c", "documents": [{ "_id": 1 }], "writeConcern": 1 },
    )
    .await?;
    assert_eq!(err.code, 14, "TypeMismatch: {err:?}");
    assert_eq!(
        coll(&client, "c").count_documents(doc! {}).await?,
        0,
        "a refused write concern writes nothing"
    );
    Ok(())
}

/// Every aggregation takes a write concern, one that only reads too (mongod's
/// `aggregation_accepts_write_concern`), so `count_documents` through a collection handle that
/// has one works; with `explain` it is refused, as mongod's request parser refuses it.
#[tokio::test]
async fn aggregate_takes_a_write_concern_but_not_with_explain() -> TestResult {
    let (_server, client) = start().await?;
    coll(&client, "c")
        .insert_many([doc! { "_id": 1 }, doc! { "_id": 2 }])
        .await?;
    let relaxed = mongodb::options::CollectionOptions::builder()
        .write_concern(WriteConcern::builder().journal(false).build())
        .build();
    let handle = client
        .database(DB)
        .collection_with_options::<Document>("c", relaxed);
    assert_eq!(handle.count_documents(doc! { "_id": 2 }).await?, 1);
    let reply = run_command(
        &client,
        DB,
        doc! {
            "aggregate": "c", "pipeline": [{ "$match": { "_id": 1 } }], "cursor": {},
            "writeConcern": { "w": 1 },
        },
    )
    .await?;
    assert!(is_ok(&reply), "{reply}");
    let err = run_command_err(
        &client,
        DB,
        doc! {
            "aggregate": "c", "pipeline": [{ "$out": "o" }], "explain": true,
            "writeConcern": { "w": 1 },
        },
    )
    .await?;
    assert_command_error(&err, 9, "FailedToParse");
    assert_eq!(
        err.message,
        "Aggregation explain does not support the'writeConcern' option"
    );
    // Other read commands still refuse one, as mongod does.
    let err = run_command_err(
        &client,
        DB,
        doc! { "find": "c", "writeConcern": { "w": 1 } },
    )
    .await?;
    assert_eq!(err.code, 72, "{err:?}");
    Ok(())
}

#[tokio::test]
async fn unknown_write_concern_field_is_40415() -> TestResult {
    let (_server, client) = start().await?;
    let err = run_command_err(
        &client,
        DB,
        doc! {
            "insert": "c",
            "documents": [{ "_id": 1 }],
            "writeConcern": { "w": 1, "frobnicate": 1 },
        },
    )
    .await?;
    assert_command_error(&err, 40415, "IDLUnknownField");
    assert_eq!(
        err.message,
        "BSON field 'WriteConcernOptions.frobnicate' is an unknown field."
    );
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Collation

fn en(strength: mongodb::options::CollationStrength) -> mongodb::options::Collation {
    mongodb::options::Collation::builder()
        .locale("en")
        .strength(strength)
        .build()
}

/// `_id`s 1–6 with names that differ in case and accents.
async fn seed_names(client: &Client, name: &str) -> TestResult {
    coll(client, name)
        .insert_many([
            doc! { "_id": 1, "name": "alpha" },
            doc! { "_id": 2, "name": "Alpha" },
            doc! { "_id": 3, "name": "ALPHA" },
            doc! { "_id": 4, "name": "älpha" },
            doc! { "_id": 5, "name": "beta" },
            doc! { "_id": 6, "name": "Beta" },
        ])
        .await?;
    Ok(())
}

#[tokio::test]
async fn find_with_collation_matches_and_sorts_case_insensitively() -> TestResult {
    use mongodb::options::CollationStrength::{Primary, Secondary};
    let (_server, client) = start().await?;
    seed_names(&client, "coll_find").await?;
    let c = coll(&client, "coll_find");
    let found = drain(
        c.find(doc! { "name": "alpha" })
            .collation(en(Secondary))
            .sort(doc! { "_id": 1 })
            .await?,
    )
    .await?;
    assert_eq!(
        ids(&found),
        vec![Bson::Int32(1), Bson::Int32(2), Bson::Int32(3)]
    );
    // Strength 1 ignores accents as well.
    let found = drain(
        c.find(doc! { "name": "ALPHA" })
            .collation(en(Primary))
            .sort(doc! { "_id": 1 })
            .await?,
    )
    .await?;
    assert_eq!(found.len(), 4);
    // Without a collation only the exact string matches.
    assert_eq!(
        all(&client, "coll_find", doc! { "name": "alpha" })
            .await?
            .len(),
        1
    );
    // Sort: case ties at strength 2 (then `_id` decides); binary puts upper case first.
    let sorted = drain(
        c.find(doc! { "name": { "$gte": "a" } })
            .collation(en(Secondary))
            .sort(doc! { "name": -1, "_id": 1 })
            .await?,
    )
    .await?;
    assert_eq!(
        ids(&sorted),
        [5, 6, 4, 1, 2, 3].map(Bson::Int32).to_vec(),
        "{sorted:?}"
    );
    // `{_id: <string>}` under a collation is not an exact point read.
    let ids_coll = coll(&client, "coll_find_ids");
    ids_coll
        .insert_many([doc! { "_id": "Key" }, doc! { "_id": "other" }])
        .await?;
    let found = drain(
        ids_coll
            .find(doc! { "_id": "key" })
            .collation(en(Secondary))
            .await?,
    )
    .await?;
    assert_eq!(ids(&found), vec![Bson::String("Key".into())]);
    Ok(())
}

#[tokio::test]
async fn update_and_delete_statements_use_their_collation() -> TestResult {
    use mongodb::options::CollationStrength::Secondary;
    let (_server, client) = start().await?;
    seed_names(&client, "coll_write").await?;
    let c = coll(&client, "coll_write");
    let r = c
        .update_many(doc! { "name": "ALPHA" }, doc! { "$set": { "hit": true } })
        .collation(en(Secondary))
        .await?;
    assert_eq!((r.matched_count, r.modified_count), (3, 3));
    let r = c
        .update_one(doc! { "name": "BETA" }, doc! { "$set": { "one": true } })
        .collation(en(Secondary))
        .await?;
    assert_eq!(r.matched_count, 1);
    let r = c
        .delete_many(doc! { "name": { "$in": ["BETA", "x"] } })
        .collation(en(Secondary))
        .await?;
    assert_eq!(r.deleted_count, 2);
    let r = c
        .delete_one(doc! { "name": "alpha" })
        .collation(en(Secondary))
        .await?;
    assert_eq!(r.deleted_count, 1);
    assert_eq!(
        ids(&all(&client, "coll_write", doc! {}).await?),
        [2, 3, 4].map(Bson::Int32).to_vec()
    );
    // Each statement has its own collation; a bad one fails that statement alone.
    let reply = run_command(
        &client,
        DB,
        doc! {
            "update": "coll_write",
            "updates": [
                { "q": { "name": "alpha" }, "u": { "$set": { "s": 1 } }, "multi": true,
                  "collation": { "locale": "en", "strength": 2 } },
                { "q": { "name": "alpha" }, "u": { "$set": { "s": 2 } },
                  "collation": { "locale": "xx" } },
                { "q": { "name": "alpha" }, "u": { "$set": { "s": 3 } } },
            ],
            "ordered": false,
        },
    )
    .await?;
    assert_eq!(integer(reply.get("n")), Some(2), "{reply}");
    let errors = write_errors(&reply);
    assert_eq!(errors.len(), 1, "{reply}");
    assert_eq!(errors[0].get_i32("index")?, 1);
    assert_eq!(errors[0].get_i32("code")?, 2);
    assert_eq!(
        errors[0].get_str("errmsg")?,
        "Field 'locale' is invalid in: { locale: \"xx\" }"
    );
    // The option's type is checked for the whole command.
    let err = run_command_err(
        &client,
        DB,
        doc! { "delete": "coll_write", "deletes": [{ "q": {}, "limit": 0, "collation": "en" }] },
    )
    .await?;
    assert_command_error(&err, 14, "TypeMismatch");
    assert_eq!(
        err.message,
        "BSON field 'delete.deletes.collation' is the wrong type 'string', expected type 'object'"
    );
    Ok(())
}

#[tokio::test]
async fn find_and_modify_with_collation() -> TestResult {
    use mongodb::options::CollationStrength::Secondary;
    let (_server, client) = start().await?;
    seed_names(&client, "coll_fam").await?;
    let c = coll(&client, "coll_fam");
    let before = c
        .find_one_and_update(doc! { "name": "ALPHA" }, doc! { "$set": { "n": 1 } })
        .collation(en(Secondary))
        .sort(doc! { "_id": -1 })
        .await?;
    assert_eq!(
        before.and_then(|d| d.get("_id").cloned()),
        Some(Bson::Int32(3))
    );
    let replaced = c
        .find_one_and_replace(doc! { "name": "BETA" }, doc! { "name": "gamma" })
        .collation(en(Secondary))
        .return_document(ReturnDocument::After)
        .await?;
    assert_eq!(replaced, Some(doc! { "_id": 5, "name": "gamma" }));
    let deleted = c
        .find_one_and_delete(doc! { "name": "Beta" })
        .collation(en(Secondary))
        .await?;
    assert_eq!(deleted, Some(doc! { "_id": 6, "name": "Beta" }));
    let err = c
        .find_one_and_delete(doc! {})
        .collation(
            mongodb::options::Collation::builder()
                .locale("en")
                .strength(mongodb::options::CollationStrength::Primary)
                .backwards(true)
                .build(),
        )
        .await
        .err()
        .ok_or("findAndModify with an invalid collation succeeded")?;
    let err = command_error(&err).ok_or("not a command error")?;
    assert_command_error(err, 2, "BadValue");
    Ok(())
}

#[tokio::test]
async fn count_distinct_and_aggregate_with_collation() -> TestResult {
    use mongodb::options::CollationStrength::{Primary, Secondary};
    let (_server, client) = start().await?;
    seed_names(&client, "coll_read").await?;
    let c = coll(&client, "coll_read");
    let reply = run_command(
        &client,
        DB,
        doc! {
            "count": "coll_read",
            "query": { "name": "alpha" },
            "collation": { "locale": "en", "strength": 2 },
        },
    )
    .await?;
    assert_eq!(integer(reply.get("n")), Some(3), "{reply}");
    // distinct keeps one of the values equal under the collation: the first one met.
    let values = c.distinct("name", doc! {}).collation(en(Primary)).await?;
    assert_eq!(values, vec![Bson::from("alpha"), Bson::from("beta")]);
    let values = c.distinct("name", doc! {}).await?;
    assert_eq!(values.len(), 6);
    let grouped = drain(
        c.aggregate([
            doc! { "$match": { "name": { "$in": ["ALPHA", "BETA"] } } },
            doc! { "$group": { "_id": "$name", "n": { "$sum": 1 } } },
            doc! { "$sort": { "_id": -1 } },
        ])
        .collation(en(Secondary))
        .await?,
    )
    .await?;
    assert_eq!(
        grouped,
        vec![
            doc! { "_id": "beta", "n": 2 },
            doc! { "_id": "alpha", "n": 3 }
        ]
    );
    // Errors: MongoDB's codes and messages.
    let cases = [
        (
            doc! { "locale": "en", "strength": 6 },
            51024,
            "Location51024",
            "BSON field 'collation.strength' value must be <= 5, actual value '6'",
        ),
        (
            doc! { "strength": 2 },
            40414,
            "IDLFailedToParse",
            "BSON field 'collation.locale' is missing but a required field",
        ),
        (
            doc! { "locale": "en", "colour": "blue" },
            40415,
            "IDLUnknownField",
            "BSON field 'collation.colour' is an unknown field.",
        ),
        (
            doc! { "locale": "en_XX" },
            2,
            "BadValue",
            "Field 'locale' is invalid in: { locale: \"en_XX\" }. Did you mean 'en'?",
        ),
    ];
    for (collation, code, name, message) in cases {
        let err = run_command_err(
            &client,
            DB,
            doc! { "find": "coll_read", "filter": {}, "collation": collation },
        )
        .await?;
        assert_command_error(&err, code, name);
        assert_eq!(err.message, message);
    }
    Ok(())
}

#[tokio::test]
async fn collection_and_index_default_collations_are_refused() -> TestResult {
    let (_server, client) = start().await?;
    let err = run_command_err(
        &client,
        DB,
        doc! { "create": "coll_default", "collation": { "locale": "en", "strength": 2 } },
    )
    .await?;
    assert_command_error(&err, 238, "NotImplemented");
    let err = run_command_err(
        &client,
        DB,
        doc! {
            "createIndexes": "coll_default",
            "indexes": [{ "key": { "a": 1 }, "name": "a_1", "collation": { "locale": "en" } }],
        },
    )
    .await?;
    assert_command_error(&err, 238, "NotImplemented");
    Ok(())
}

#[tokio::test]
async fn max_time_ms_bounds_reads_and_is_checked() -> TestResult {
    let (_server, client) = start().await?;
    seed(&client, "big", 0..100_000).await?;
    // A scan of 100,000 documents takes longer than a millisecond.
    let none = doc! { "n": { "$lt": -1 } };
    for command in [
        doc! { "find": "big", "filter": none.clone(), "maxTimeMS": 1 },
        doc! { "count": "big", "query": none.clone(), "maxTimeMS": 1 },
        doc! { "distinct": "big", "key": "n", "maxTimeMS": 1 },
        doc! { "aggregate": "big", "pipeline": [{ "$match": none.clone() }], "cursor": {}, "maxTimeMS": 1_i64 },
    ] {
        let err = run_command_err(&client, DB, command).await?;
        assert_command_error(&err, 50, "MaxTimeMSExpired");
    }
    // Within its time, or with 0 (no limit), the same command answers.
    let reply = run_command(&client, DB, doc! { "count": "big", "maxTimeMS": 0 }).await?;
    assert_eq!(reply.get_i32("n")?, 100_000);
    let reply = run_command(
        &client,
        DB,
        doc! { "find": "big", "filter": { "_id": 7 }, "maxTimeMS": 60_000.0 },
    )
    .await?;
    assert_eq!(batch(&reply)?.0.len(), 1);
    // mongod's parseMaxTimeMS errors.
    for bad in [Bson::Int32(-1), Bson::Double(1.5), Bson::String("1".into())] {
        let err = run_command_err(&client, DB, doc! { "find": "big", "maxTimeMS": bad }).await?;
        assert_command_error(&err, 2, "BadValue");
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Batches that scan from the front (the writers' live front, src/commands/write.rs)
// ---------------------------------------------------------------------------------------------

/// Deleting from the front moves where writers' scans start; statements without a sort take
/// documents in natural order, which is insertion order as in mongod: a document inserted
/// later, by an insert or an upsert, between statements or inside one batch, comes after
/// the ones before it whatever its `_id`, and is still found.
#[tokio::test]
async fn scans_from_the_front_see_documents_written_below_it() -> TestResult {
    let (_server, client) = start().await?;
    let db = client.database(DB);
    seed(&client, "front", 10..20).await?;
    let deletes: Vec<Bson> = (0..3)
        .map(|_| Bson::Document(doc! { "q": {}, "limit": 1 }))
        .collect();
    let reply = db
        .run_command(doc! { "delete": "front", "deletes": deletes })
        .await?;
    assert_eq!(reply.get_i32("n")?, 3, "{reply}");
    assert_eq!(
        ids(&all(&client, "front", doc! {}).await?)[0],
        Bson::Int32(13)
    );

    // A smaller `_id` inserted now comes last in natural order.
    coll(&client, "front")
        .insert_one(doc! { "_id": 5, "n": 5 })
        .await?;
    let reply = db
        .run_command(doc! {
            "update": "front",
            "updates": [
                { "q": {}, "u": { "$set": { "first": true } } },
                // An upsert of the smallest `_id` of all: it comes last as well.
                { "q": { "_id": 1 }, "u": { "$set": { "n": 1 } }, "upsert": true },
            ],
        })
        .await?;
    assert_eq!(reply.get_i32("n")?, 2, "{reply}");
    let first = all(&client, "front", doc! { "first": true }).await?;
    assert_eq!(ids(&first), vec![Bson::Int32(13)]);
    let natural = drain(coll(&client, "front").find(doc! {}).await?).await?;
    assert_eq!(
        ids(&natural),
        int32s(&[13, 14, 15, 16, 17, 18, 19, 5, 1]),
        "an unsorted find returns insertion order"
    );
    let deletes: Vec<Bson> = (0..2)
        .map(|_| Bson::Document(doc! { "q": {}, "limit": 1 }))
        .collect();
    db.run_command(doc! { "delete": "front", "deletes": deletes })
        .await?;
    let left = ids(&all(&client, "front", doc! {}).await?);
    assert_eq!(left, int32s(&[1, 5, 15, 16, 17, 18, 19]));

    // Everything deleted, then one insert far above the old front.
    db.run_command(doc! { "delete": "front", "deletes": [{ "q": {}, "limit": 0 }] })
        .await?;
    coll(&client, "front")
        .insert_one(doc! { "_id": 100, "n": 100 })
        .await?;
    coll(&client, "front")
        .insert_one(doc! { "_id": 0, "n": 0 })
        .await?;
    let reply = db
        .run_command(doc! { "delete": "front", "deletes": [{ "q": {}, "limit": 1 }] })
        .await?;
    assert_eq!(reply.get_i32("n")?, 1, "{reply}");
    assert_eq!(ids(&all(&client, "front", doc! {}).await?), int32s(&[0]));
    Ok(())
}

#[tokio::test]
async fn max_time_ms_stops_a_write_batch_between_statements() -> TestResult {
    let (_server, client) = start().await?;
    seed(&client, "w", 0..1).await?;
    // 20,000 statements take far longer than 5 ms: the batch stops at a safe point, the command
    // fails as a whole, and what ran before stays applied, as in mongod.
    let updates: Vec<Bson> = (0..20_000)
        .map(|_| Bson::Document(doc! { "q": { "_id": 0 }, "u": { "$inc": { "n": 1 } } }))
        .collect();
    let err = run_command_err(
        &client,
        DB,
        doc! { "update": "w", "updates": updates.clone(), "maxTimeMS": 5 },
    )
    .await?;
    assert_command_error(&err, 50, "MaxTimeMSExpired");
    let done = all(&client, "w", doc! {}).await?[0].get_i32("n")?;
    assert!(done < 20_000, "the batch ran to its end: {done}");
    // Without a limit the same batch runs to its end.
    let reply = run_command(&client, DB, doc! { "update": "w", "updates": updates }).await?;
    assert_eq!(reply.get_i32("nModified")?, 20_000);
    let inserts: Vec<Bson> = (1..50_001)
        .map(|i| Bson::Document(doc! { "_id": i }))
        .collect();
    let err = run_command_err(
        &client,
        DB,
        doc! { "insert": "w", "documents": inserts, "maxTimeMS": 1 },
    )
    .await?;
    assert_command_error(&err, 50, "MaxTimeMSExpired");
    Ok(())
}

/// A cursor reads the snapshot it opened on for five minutes (mongod's default
/// `minSnapshotHistoryWindowInSeconds`), then goes on from where it was in a newer one, so
/// that an idle cursor does not keep deleted data from compaction for its whole life: a
/// collection scan's later batches show a document inserted after it opened only once the
/// window has passed, and never return a document twice.
#[tokio::test]
async fn cursors_move_to_a_new_snapshot_after_the_history_window() -> TestResult {
    let server = TestServer::start_with_test_clock().await?;
    let client = server.client().await?;
    let admin = client.database("admin");
    admin
        .run_command(doc! { "ebbAdvanceClock": 0, "freeze": true })
        .await?;
    seed(&client, "window", 0..10).await?;
    let db = client.database(DB);
    let reply = db
        .run_command(doc! { "find": "window", "batchSize": 2 })
        .await?;
    let (first, id) = batch(&reply)?;
    assert_eq!(first.len(), 2);
    coll(&client, "window")
        .insert_many([doc! { "_id": 100, "n": 100 }, doc! { "_id": 101, "n": 101 }])
        .await?;
    coll(&client, "window")
        .delete_one(doc! { "_id": 5 })
        .await?;
    let get_more = |n: i32| doc! { "getMore": id, "collection": "window", "batchSize": n };
    // Within the window: the snapshot of the find.
    let (next, _) = batch(&db.run_command(get_more(2)).await?)?;
    let ids: Vec<i32> = next.iter().filter_map(|d| d.get_i32("_id").ok()).collect();
    assert_eq!(ids, [2, 3]);
    admin
        .run_command(doc! { "ebbAdvanceClock": 299_000, "freeze": true })
        .await?;
    let (next, _) = batch(&db.run_command(get_more(1)).await?)?;
    let ids: Vec<i32> = next.iter().filter_map(|d| d.get_i32("_id").ok()).collect();
    assert_eq!(ids, [4]);
    // Past it: the rest, as the collection is now (5 deleted, 100 and 101 inserted).
    admin
        .run_command(doc! { "ebbAdvanceClock": 1_000, "freeze": true })
        .await?;
    let (rest, id) = batch(&db.run_command(get_more(100)).await?)?;
    let ids: Vec<i32> = rest.iter().filter_map(|d| d.get_i32("_id").ok()).collect();
    assert_eq!(ids, [6, 7, 8, 9, 100, 101]);
    assert_eq!(id, 0);
    Ok(())
}
