//! Exact comparison of numbers across int32, int64, double and decimal128, through the `mongodb`
//! crate: find, sort, `$in`/`$nin`, the same queries over an index, update `$min`/`$max`,
//! aggregation and `distinct`. mongod compares a decimal with a double by exact value
//! (`compare_numbers.h`): the double 0.1 is 0.1000000000000000055…, above `NumberDecimal("0.1")`.

mod common;

use bson::{Bson, Document, doc};
use common::{TestResult, TestServer, drain};
use mongodb::Collection;

fn dec(s: &str) -> Bson {
    Bson::Decimal128(s.parse().expect("a decimal literal"))
}

/// 2^53 + 1, the first integer that is not a double.
const TWO53_PLUS_1: i64 = (1 << 53) + 1;

/// `_id` and `x` of every document.
fn values() -> Vec<(i32, Bson)> {
    vec![
        (1, Bson::Double(0.1)),
        (2, dec("0.1")),
        (3, dec("0.10")),
        (4, Bson::Int32(1)),
        (5, dec("1.0")),
        (6, Bson::Double(1.0)),
        (7, Bson::Int64(TWO53_PLUS_1)),
        (8, dec("9007199254740993")),
        (9, Bson::Double(9_007_199_254_740_992.0)),
        (10, dec("9007199254740992.5")),
        (11, dec("1E-6176")),
        (12, Bson::Double(0.0)),
        (13, dec("-0")),
        (14, dec("NaN")),
        (15, Bson::Double(f64::NAN)),
        (16, dec("Infinity")),
        (17, Bson::Double(f64::INFINITY)),
        (18, dec("1E+6144")),
        (19, Bson::Double(-0.1)),
        (20, dec("-0.1")),
    ]
}

async fn setup(server: &TestServer) -> TestResult<Collection<Document>> {
    let client = server.client().await?;
    let coll = client.database("numbers").collection::<Document>("c");
    let docs: Vec<Document> = values()
        .into_iter()
        .map(|(id, x)| doc! { "_id": id, "x": x })
        .collect();
    coll.insert_many(docs).await?;
    Ok(coll)
}

async fn ids(
    coll: &Collection<Document>,
    filter: Document,
    hint: Option<&str>,
) -> TestResult<Vec<i32>> {
    let mut find = coll.find(filter).sort(doc! { "_id": 1 });
    if let Some(h) = hint {
        find = find.hint(mongodb::options::Hint::Name(h.to_owned()));
    }
    let docs = drain(find.await?).await?;
    Ok(docs
        .iter()
        .map(|d| d.get_i32("_id"))
        .collect::<Result<_, _>>()?)
}

/// Each filter with the `_id`s it must match, in `_id` order.
fn queries() -> Vec<(Document, Vec<i32>)> {
    let not_in = vec![1, 4, 5, 6, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20];
    vec![
        (doc! { "x": dec("0.1") }, vec![2, 3]),
        (doc! { "x": 0.1 }, vec![1]),
        (doc! { "x": { "$eq": dec("0.100") } }, vec![2, 3]),
        (
            doc! { "x": { "$gt": dec("0.1") } },
            vec![1, 4, 5, 6, 7, 8, 9, 10, 16, 17, 18],
        ),
        (
            doc! { "x": { "$gte": 0.1, "$lte": dec("0.1000000000000000055511151231257828") } },
            vec![1],
        ),
        (doc! { "x": { "$lt": 0.1 } }, vec![2, 3, 11, 12, 13, 19, 20]),
        (
            doc! { "x": { "$lte": dec("0.1") } },
            vec![2, 3, 11, 12, 13, 19, 20],
        ),
        (doc! { "x": { "$lt": -0.1 } }, Vec::new()),
        (doc! { "x": { "$gt": -0.1, "$lt": 0 } }, vec![20]),
        (
            doc! { "x": { "$in": [dec("0.1"), TWO53_PLUS_1] } },
            vec![2, 3, 7, 8],
        ),
        (doc! { "x": { "$nin": [dec("0.1"), TWO53_PLUS_1] } }, not_in),
        (doc! { "x": dec("9007199254740993") }, vec![7, 8]),
        (doc! { "x": 9_007_199_254_740_992.0 }, vec![9]),
        (
            doc! { "x": { "$gt": 9_007_199_254_740_992.0, "$lt": TWO53_PLUS_1 } },
            vec![10],
        ),
        (doc! { "x": dec("1.00") }, vec![4, 5, 6]),
        (doc! { "x": { "$gt": 0, "$lt": 5e-324 } }, vec![11]),
        (doc! { "x": 0 }, vec![12, 13]),
        (doc! { "x": dec("NaN") }, vec![14, 15]),
        (doc! { "x": f64::NAN }, vec![14, 15]),
        (doc! { "x": f64::INFINITY }, vec![16, 17]),
        (doc! { "x": { "$gt": f64::MAX } }, vec![16, 17, 18]),
        (
            doc! { "x": { "$lt": dec("Infinity"), "$gt": 1e308 } },
            vec![18],
        ),
    ]
}

/// `x` ascending (NaN first), ties by `_id`.
const SORTED: [i32; 20] = [
    14, 15, 19, 20, 12, 13, 11, 2, 3, 1, 4, 5, 6, 9, 10, 7, 8, 18, 16, 17,
];

async fn sorted(coll: &Collection<Document>, dir: i32, hint: Option<&str>) -> TestResult<Vec<i32>> {
    let mut find = coll.find(doc! {}).sort(doc! { "x": dir, "_id": dir });
    if let Some(h) = hint {
        find = find.hint(mongodb::options::Hint::Name(h.to_owned()));
    }
    let docs = drain(find.await?).await?;
    Ok(docs
        .iter()
        .map(|d| d.get_i32("_id"))
        .collect::<Result<_, _>>()?)
}

#[tokio::test]
async fn find_and_sort_compare_exactly() -> TestResult {
    let server = TestServer::start().await?;
    let coll = setup(&server).await?;
    for (filter, want) in queries() {
        assert_eq!(ids(&coll, filter.clone(), None).await?, want, "{filter}");
    }
    assert_eq!(sorted(&coll, 1, None).await?, SORTED);
    let mut desc = SORTED;
    desc.reverse();
    assert_eq!(sorted(&coll, -1, None).await?, desc);
    Ok(())
}

/// An index changes how documents are found, never which: the same queries and sorts through
/// an index on `x` (and `{x: 1, _id: 1}` for the sort) answer the same.
#[tokio::test]
async fn indexed_queries_answer_as_collection_scans() -> TestResult {
    let server = TestServer::start().await?;
    let coll = setup(&server).await?;
    coll.create_index(mongodb::IndexModel::builder().keys(doc! { "x": 1 }).build())
        .await?;
    coll.create_index(
        mongodb::IndexModel::builder()
            .keys(doc! { "x": -1, "_id": -1 })
            .build(),
    )
    .await?;
    for (filter, want) in queries() {
        assert_eq!(
            ids(&coll, filter.clone(), Some("x_1")).await?,
            want,
            "{filter}"
        );
        assert_eq!(
            ids(&coll, filter.clone(), None).await?,
            want,
            "{filter} planned"
        );
    }
    assert_eq!(sorted(&coll, 1, Some("x_-1__id_-1")).await?, SORTED);
    let mut desc = SORTED;
    desc.reverse();
    assert_eq!(sorted(&coll, -1, Some("x_-1__id_-1")).await?, desc);
    Ok(())
}

/// `_id` keys: a decimal `_id` equal to an int is a duplicate, one that is not is a new key.
#[tokio::test]
async fn decimal_ids_are_exact_keys() -> TestResult {
    let server = TestServer::start().await?;
    let client = server.client().await?;
    let coll = client.database("numbers").collection::<Document>("ids");
    coll.insert_one(doc! { "_id": 0.1 }).await?;
    coll.insert_one(doc! { "_id": dec("0.1") }).await?;
    coll.insert_one(doc! { "_id": 1 }).await?;
    let dup = coll.insert_one(doc! { "_id": dec("1.000") }).await;
    let err = dup.expect_err("1.000 is the _id 1");
    assert_eq!(
        common::write_error(&err).map(|e| e.code),
        Some(11000),
        "{err}"
    );
    let found = coll.find_one(doc! { "_id": dec("0.10") }).await?;
    assert_eq!(found, Some(doc! { "_id": dec("0.1") }));
    let found = coll.find_one(doc! { "_id": 0.1 }).await?;
    assert_eq!(found, Some(doc! { "_id": 0.1 }));
    assert_eq!(coll.count_documents(doc! {}).await?, 3);
    Ok(())
}

#[tokio::test]
async fn update_min_and_max_compare_exactly() -> TestResult {
    let server = TestServer::start().await?;
    let client = server.client().await?;
    let coll = client.database("numbers").collection::<Document>("u");
    coll.insert_one(doc! { "_id": 1, "v": 0.1 }).await?;
    let get = async || -> TestResult<Bson> {
        let d = coll
            .find_one(doc! { "_id": 1 })
            .await?
            .ok_or("no document")?;
        Ok(d.get("v").cloned().ok_or("no v")?)
    };
    // The decimal 0.1 is below the double 0.1.
    let r = coll
        .update_one(doc! { "_id": 1 }, doc! { "$min": { "v": dec("0.1") } })
        .await?;
    assert_eq!(r.modified_count, 1);
    assert_eq!(get().await?, dec("0.1"));
    // Equal values leave the field as it is.
    let r = coll
        .update_one(doc! { "_id": 1 }, doc! { "$min": { "v": dec("0.10") } })
        .await?;
    assert_eq!(r.modified_count, 0);
    assert_eq!(get().await?, dec("0.1"));
    let r = coll
        .update_one(doc! { "_id": 1 }, doc! { "$max": { "v": 0.1 } })
        .await?;
    assert_eq!(r.modified_count, 1);
    assert_eq!(get().await?, Bson::Double(0.1));
    let r = coll
        .update_one(
            doc! { "_id": 1 },
            doc! { "$max": { "v": dec("0.1000000000000000055511151231257827") } },
        )
        .await?;
    assert_eq!(r.modified_count, 0);
    let r = coll
        .update_one(
            doc! { "_id": 1 },
            doc! { "$max": { "v": dec("0.1000000000000000055511151231257828") } },
        )
        .await?;
    assert_eq!(r.modified_count, 1);
    assert_eq!(get().await?, dec("0.1000000000000000055511151231257828"));
    Ok(())
}

#[tokio::test]
async fn aggregation_compares_exactly() -> TestResult {
    let server = TestServer::start().await?;
    let coll = setup(&server).await?;
    let run = async |pipeline: Vec<Document>| -> TestResult<Vec<Document>> {
        drain(coll.aggregate(pipeline).await?).await
    };

    let matched = run(vec![
        doc! { "$match": { "x": dec("0.1") } },
        doc! { "$sort": { "_id": 1 } },
        doc! { "$project": { "_id": 1 } },
    ])
    .await?;
    assert_eq!(matched, vec![doc! { "_id": 2 }, doc! { "_id": 3 }]);

    // One group per value: 20 documents, 13 values.
    let groups = run(vec![
        doc! { "$sort": { "_id": 1 } },
        doc! { "$group": { "_id": "$x", "n": { "$sum": 1 }, "first": { "$first": "$_id" } } },
        doc! { "$sort": { "first": 1 } },
        doc! { "$project": { "_id": 0, "first": 1, "n": 1 } },
    ])
    .await?;
    let counts: Vec<(i32, i32)> = groups
        .iter()
        .map(|g| Ok((g.get_i32("first")?, g.get_i32("n")?)))
        .collect::<Result<_, bson::error::Error>>()?;
    assert_eq!(
        counts,
        vec![
            (1, 1),
            (2, 2),
            (4, 3),
            (7, 2),
            (9, 1),
            (10, 1),
            (11, 1),
            (12, 2),
            (14, 2),
            (16, 2),
            (18, 1),
            (19, 1),
            (20, 1),
        ]
    );

    let extremes = run(vec![
        doc! { "$match": { "_id": { "$in": [1, 2, 19, 20] } } },
        doc! { "$group": {
            "_id": { "$gt": ["$x", 0] },
            "min": { "$min": "$x" },
            "max": { "$max": "$x" },
        } },
        doc! { "$sort": { "_id": 1 } },
    ])
    .await?;
    assert_eq!(
        extremes,
        vec![
            doc! { "_id": false, "min": -0.1, "max": dec("-0.1") },
            doc! { "_id": true, "min": dec("0.1"), "max": 0.1 },
        ]
    );

    let exprs = run(vec![
        doc! { "$match": { "_id": { "$in": [1, 2, 7] } } },
        doc! { "$sort": { "_id": 1 } },
        doc! { "$project": {
            "cmp": { "$cmp": ["$x", dec("0.1")] },
            "eq": { "$eq": ["$x", dec("0.1")] },
            "gt": { "$gt": ["$x", 9_007_199_254_740_992.0] },
            "lt": { "$lt": ["$x", dec("0.1000000000000000055511151231257827")] },
        } },
    ])
    .await?;
    assert_eq!(
        exprs,
        vec![
            doc! { "_id": 1, "cmp": 1, "eq": false, "gt": false, "lt": false },
            doc! { "_id": 2, "cmp": 0, "eq": true, "gt": false, "lt": true },
            doc! { "_id": 7, "cmp": 1, "eq": false, "gt": true, "lt": false },
        ]
    );
    Ok(())
}

#[tokio::test]
async fn distinct_keeps_unequal_numbers_apart() -> TestResult {
    let server = TestServer::start().await?;
    let coll = setup(&server).await?;
    let values = coll
        .distinct("x", doc! { "_id": { "$in": [1, 2, 3, 4, 5, 6, 12, 13] } })
        .await?;
    // The first of each equal set in sort order: 0, the decimal 0.1, the double 0.1, 1.
    assert_eq!(values.len(), 4, "{values:?}");
    assert_eq!(values[2], Bson::Double(0.1));
    assert_eq!(values[1], dec("0.1"));
    Ok(())
}

/// On the durable store, decimal keys (`_id` and index entries) read back after a restart: the
/// store is marked with its key format and opened again.
#[tokio::test]
async fn decimal_keys_survive_a_restart() -> TestResult {
    let dir = tempfile::Builder::new()
        .prefix("ebb-numbers-")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))?;
    let server = TestServer::start_durable(dir.path(), |_| {}).await?;
    let coll = setup(&server).await?;
    coll.create_index(mongodb::IndexModel::builder().keys(doc! { "x": 1 }).build())
        .await?;
    let client = server.client().await?;
    let keyed = client.database("numbers").collection::<Document>("ids");
    keyed
        .insert_many(vec![
            doc! { "_id": dec("0.1"), "x": dec("0.1") },
            doc! { "_id": 0.1, "x": 0.1 },
        ])
        .await?;
    server.stop().await?;

    let server = TestServer::start_durable(dir.path(), |_| {}).await?;
    let client = server.client().await?;
    let coll = client.database("numbers").collection::<Document>("c");
    for (filter, want) in queries() {
        assert_eq!(
            ids(&coll, filter.clone(), Some("x_1")).await?,
            want,
            "{filter}"
        );
    }
    let keyed = client.database("numbers").collection::<Document>("ids");
    let by_id = drain(keyed.find(doc! { "_id": dec("0.10") }).await?).await?;
    assert_eq!(by_id, vec![doc! { "_id": dec("0.1"), "x": dec("0.1") }]);
    let by_id = drain(keyed.find(doc! { "_id": 0.1 }).await?).await?;
    assert_eq!(by_id, vec![doc! { "_id": 0.1, "x": 0.1 }]);
    server.stop().await?;
    Ok(())
}

/// A data directory of key format 2 (an earlier build: documents stored under their `_id`,
/// natural order `_id` order), decimals among its `_id`s, is moved to record ids at startup:
/// every document is there and found by `_id`, in `_id` order, inserts go after them, and
/// `validate` finds the indexes whole.
#[tokio::test]
async fn a_format_2_directory_is_moved_to_record_ids() -> TestResult {
    use ebb::storage::{Batch, DiskStorage, Keyspace, Storage, record};
    let dir = tempfile::Builder::new()
        .prefix("ebb-numbers-")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))?;
    let server = TestServer::start_durable(dir.path(), |_| {}).await?;
    let client = server.client().await?;
    let coll = client.database("numbers").collection::<Document>("c");
    coll.insert_many([
        doc! { "_id": 3, "x": 3 },
        doc! { "_id": dec("0.5"), "x": 0 },
        doc! { "_id": 1, "x": 1 },
    ])
    .await?;
    server.stop().await?;
    {
        // What an earlier build leaves: documents under `collection id · keystring(_id)`, no
        // `_id` index entries, and the marker of format 2.
        let disk = DiskStorage::open(dir.path())?;
        let snapshot = disk.snapshot();
        let mut batch = Batch::new();
        for entry in snapshot.range(
            Keyspace::Docs,
            std::ops::Bound::Unbounded,
            std::ops::Bound::Unbounded,
            false,
        ) {
            let (key, value) = entry?;
            let doc = record::decode(&value)?.doc;
            let id = ebb::query::keystring::encode_id(doc).expect("an _id");
            let mut old_key = key[..8].to_vec();
            old_key.extend_from_slice(&id);
            batch.delete(Keyspace::Docs, key.clone());
            batch.put(Keyspace::Docs, old_key, value.clone());
        }
        for entry in snapshot.range(
            Keyspace::Index,
            std::ops::Bound::Unbounded,
            std::ops::Bound::Unbounded,
            false,
        ) {
            batch.delete(Keyspace::Index, entry?.0);
        }
        batch.put(Keyspace::Catalog, vec![0x05_u8], vec![0, 0, 0, 2]);
        disk.commit(batch)?;
        disk.sync()?;
    }
    let server = TestServer::start_durable(dir.path(), |_| {}).await?;
    let client = server.client().await?;
    let coll = client.database("numbers").collection::<Document>("c");
    let natural = drain(coll.find(doc! {}).await?).await?;
    let xs: Vec<i32> = natural
        .iter()
        .map(|d| d.get_i32("x"))
        .collect::<Result<_, _>>()?;
    assert_eq!(xs, vec![0, 1, 3], "moved in _id order");
    let by_id = drain(coll.find(doc! { "_id": dec("0.5") }).await?).await?;
    assert_eq!(by_id, vec![doc! { "_id": dec("0.5"), "x": 0 }]);
    coll.insert_one(doc! { "_id": 2, "x": 2 }).await?;
    let dup = coll.insert_one(doc! { "_id": 1, "x": 9 }).await;
    assert!(dup.is_err(), "a moved _id still holds its key");
    let natural = drain(coll.find(doc! {}).await?).await?;
    let xs: Vec<i32> = natural
        .iter()
        .map(|d| d.get_i32("x"))
        .collect::<Result<_, _>>()?;
    assert_eq!(
        xs,
        vec![0, 1, 3, 2],
        "a new document comes after the moved ones"
    );
    let report = client
        .database("numbers")
        .run_command(doc! { "validate": "c" })
        .await?;
    assert!(report.get_bool("valid")?, "{report}");
    server.stop().await?;
    Ok(())
}
