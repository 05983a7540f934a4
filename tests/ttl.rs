//! Time to live through the `mongodb` driver against an in-process server, checked against the
//! specification (`docs/ttl.md`): Cosmos DB's `_ts`/`ttl` model and MongoDB's TTL indexes on
//! date fields, the boundaries of both, the rule that an expired document is gone for every
//! command from its expiry millisecond on, policy changes that never resurrect anything, the
//! background purge and its `serverStatus` counters, restarts, and one real-time test.
//!
//! Every test but `realtime_one_second_ttl` runs on the server's test clock
//! (`{ebbAdvanceClock: ms, freeze: true}`): frozen, time stands still between commands, so "one
//! millisecond before the instant" is exact however slow the machine is, and nothing sleeps for
//! a TTL. The only waits are bounded polls for the background purge.
//!
//! Tests of known server bugs are `#[ignore]`d with the reason, so that they document the
//! expected behaviour and run with `--ignored`.

mod common;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use common::{
    TestResult, TestServer, advance_clock, assert_command_error, drain, integer, is_ok,
    run_command, run_command_err, write_error, write_errors,
};
use mongodb::bson::{Bson, DateTime, Decimal128, Document, RawDocumentBuf, Timestamp, doc};
use mongodb::options::ReturnDocument;
use mongodb::{Client, Collection};

const DB: &str = "ttl";
/// The largest TTL there is: `i32::MAX` seconds.
const MAX_TTL: i64 = 2_147_483_647;
/// Milliseconds in a (365-day) year.
const YEAR_MS: i64 = 365 * 24 * 3600 * 1000;
/// How long a poll for the background purge may take before the test fails. The purge runs at
/// least every second and at once when the clock moves; this only guards against a hang.
const PURGE_DEADLINE: Duration = Duration::from_secs(10);

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

/// A server with the test clock enabled, frozen, and a client; returns the frozen instant too.
async fn start() -> TestResult<(TestServer, Client, i64)> {
    let server = TestServer::start_with_test_clock().await?;
    let client = server.client().await?;
    let t0 = now(&client).await?;
    Ok((server, client, t0))
}

fn coll(client: &Client, name: &str) -> Collection<Document> {
    client.database(DB).collection(name)
}

fn raw_coll(client: &Client, name: &str) -> Collection<RawDocumentBuf> {
    client.database(DB).collection(name)
}

/// Freezes the server's clock if it runs and returns its instant (ms since the epoch).
async fn now(client: &Client) -> TestResult<i64> {
    Ok(advance_clock(client, 0).await?.timestamp_millis())
}

/// Moves the frozen clock forward to `instant` (ms since the epoch).
async fn move_to(client: &Client, instant: i64) -> TestResult {
    let current = now(client).await?;
    assert!(
        instant >= current,
        "the clock is at {current}, already past {instant}"
    );
    let reached = advance_clock(client, instant - current)
        .await?
        .timestamp_millis();
    assert_eq!(reached, instant, "the clock did not land on the instant");
    Ok(())
}

fn date(ms: i64) -> DateTime {
    DateTime::from_millis(ms)
}

/// `createIndexes` of one index `{key, name?, …options}`; the reply of a success.
async fn create_index(client: &Client, name: &str, spec: Document) -> TestResult<Document> {
    run_command(
        client,
        DB,
        doc! { "createIndexes": name, "indexes": [spec] },
    )
    .await
}

/// `createIndex(key, {expireAfterSeconds})`.
async fn create_ttl_index(
    client: &Client,
    name: &str,
    key: Document,
    expire_after_seconds: impl Into<Bson>,
) -> TestResult<Document> {
    create_index(
        client,
        name,
        doc! { "key": key, "expireAfterSeconds": expire_after_seconds.into() },
    )
    .await
}

/// `createIndexes` of one index that must fail with a command error, which is returned.
async fn create_index_err(
    client: &Client,
    name: &str,
    spec: Document,
) -> TestResult<mongodb::error::CommandError> {
    run_command_err(
        client,
        DB,
        doc! { "createIndexes": name, "indexes": [spec] },
    )
    .await
}

/// `collMod` of one index; the reply of a success.
async fn coll_mod(client: &Client, name: &str, index: Document) -> TestResult<Document> {
    run_command(client, DB, doc! { "collMod": name, "index": index }).await
}

/// The `listIndexes` entries of `name`, in the server's order.
async fn list_indexes(client: &Client, name: &str) -> TestResult<Vec<Document>> {
    let reply = run_command(client, DB, doc! { "listIndexes": name }).await?;
    let cursor = reply.get_document("cursor")?;
    assert_eq!(cursor.get_i64("id")?, 0, "listIndexes left a cursor open");
    Ok(cursor
        .get_array("firstBatch")?
        .iter()
        .map(|d| d.as_document().cloned().expect("index specs are documents"))
        .collect())
}

/// The collection names of `DB`.
async fn collection_names(client: &Client) -> TestResult<BTreeSet<String>> {
    common::collection_names(client, DB).await
}

/// The `_id`s of every document of `name` a `find` returns, in `_id` order.
async fn ids(client: &Client, name: &str) -> TestResult<Vec<Bson>> {
    let docs = drain(
        coll(client, name)
            .find(doc! {})
            .sort(doc! { "_id": 1 })
            .await?,
    )
    .await?;
    Ok(docs
        .iter()
        .map(|d| d.get("_id").cloned().unwrap_or(Bson::Null))
        .collect())
}

/// The `_id`s of `name`, as strings (for collections keyed by case names).
async fn string_ids(client: &Client, name: &str) -> TestResult<BTreeSet<String>> {
    Ok(ids(client, name)
        .await?
        .into_iter()
        .map(|id| match id {
            Bson::String(s) => s,
            other => panic!("expected string _ids, got {other}"),
        })
        .collect())
}

/// Whether a `find` by `_id` returns the document.
async fn present(client: &Client, name: &str, id: impl Into<Bson>) -> TestResult<bool> {
    Ok(coll(client, name)
        .find_one(doc! { "_id": id.into() })
        .await?
        .is_some())
}

/// Checks that `_id` `id` of `name` is visible one millisecond before `expires` and gone from
/// `expires` on (moving the clock there), and returns with the clock at `expires`.
async fn expires_exactly_at(
    client: &Client,
    name: &str,
    id: impl Into<Bson> + Clone,
    expires: i64,
) -> TestResult {
    move_to(client, expires - 1).await?;
    assert!(
        present(client, name, id.clone()).await?,
        "{name}: {} should still be there 1 ms before its expiry",
        id.clone().into()
    );
    move_to(client, expires).await?;
    assert!(
        !present(client, name, id.clone()).await?,
        "{name}: {} should be gone at its expiry instant",
        id.into()
    );
    Ok(())
}

/// `serverStatus.metrics.ttl`: `(deletedDocuments, passes)`.
async fn ttl_metrics(client: &Client) -> TestResult<(i64, i64)> {
    let status = run_command(client, "admin", doc! { "serverStatus": 1 }).await?;
    let ttl = status.get_document("metrics")?.get_document("ttl")?;
    let deleted = integer(ttl.get("deletedDocuments")).ok_or("deletedDocuments is not a number")?;
    let passes = integer(ttl.get("passes")).ok_or("passes is not a number")?;
    Ok((deleted, passes))
}

/// Polls `serverStatus` until `deletedDocuments` reaches `at_least` and then until two more
/// purge passes have run (so that nothing more is on its way), within [`PURGE_DEADLINE`].
/// Returns the metrics then.
async fn settle_purge(client: &Client, at_least: i64) -> TestResult<(i64, i64)> {
    let deadline = Instant::now() + PURGE_DEADLINE;
    let mut last = ttl_metrics(client).await?;
    while last.0 < at_least {
        if Instant::now() > deadline {
            return Err(format!(
                "deletedDocuments still {} (want {at_least}) after {PURGE_DEADLINE:?}",
                last.0
            )
            .into());
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
        last = ttl_metrics(client).await?;
    }
    let passes = last.1;
    while last.1 < passes + 2 {
        if Instant::now() > deadline {
            return Err(format!("no two more purge passes after {PURGE_DEADLINE:?}").into());
        }
        // Moving the clock (by nothing) wakes the purge.
        now(client).await?;
        tokio::time::sleep(Duration::from_millis(10)).await;
        last = ttl_metrics(client).await?;
    }
    Ok(last)
}

/// `cursor.firstBatch` or `cursor.nextBatch` `_id`s of a `find`/`getMore`/`aggregate` reply,
/// and the cursor id.
fn batch_ids(reply: &Document) -> TestResult<(Vec<Bson>, i64)> {
    let cursor = reply.get_document("cursor")?;
    let docs = cursor
        .get_array("firstBatch")
        .or_else(|_| cursor.get_array("nextBatch"))?;
    let ids = docs
        .iter()
        .map(|d| {
            d.as_document()
                .and_then(|d| d.get("_id"))
                .cloned()
                .unwrap_or(Bson::Null)
        })
        .collect();
    Ok((ids, cursor.get_i64("id")?))
}

async fn get_more(client: &Client, name: &str, id: i64) -> TestResult<(Vec<Bson>, i64)> {
    let reply = run_command(
        client,
        DB,
        doc! { "getMore": id, "collection": name, "batchSize": 2 },
    )
    .await?;
    batch_ids(&reply)
}

fn int_ids(ids: &[i32]) -> Vec<Bson> {
    ids.iter().map(|&i| Bson::Int32(i)).collect()
}

/// The collection the visibility tests start from: `{_ts: 1}` with a 10 s default, and, written
/// at the frozen `t0`:
///
/// | `_id` | `k` | `ttl` | expires |
/// |---|---|---|---|
/// | 1 | a | – | t0 + 10 s |
/// | 2 | b | -1 | never |
/// | 3 | a | 20 | t0 + 20 s |
/// | 4 | c | 5 | t0 + 5 s |
async fn fixture(client: &Client, name: &str) -> TestResult<i64> {
    create_ttl_index(client, name, doc! { "_ts": 1 }, 10).await?;
    let t0 = now(client).await?;
    coll(client, name)
        .insert_many([
            doc! { "_id": 1, "k": "a", "n": 1 },
            doc! { "_id": 2, "k": "b", "n": 2, "ttl": -1 },
            doc! { "_id": 3, "k": "a", "n": 3, "ttl": 20 },
            doc! { "_id": 4, "k": "c", "n": 4, "ttl": 5 },
        ])
        .await?;
    Ok(t0)
}

// ---------------------------------------------------------------------------------------------
// 1. A document's `ttl`: which values are TTLs, at their boundaries
// ---------------------------------------------------------------------------------------------

/// When a document written at t0 expires.
#[derive(Clone, Copy, Debug)]
enum Life {
    /// This many seconds after its write.
    Seconds(i64),
    /// Never.
    Never,
}

impl Life {
    fn expires(self, t0: i64) -> Option<i64> {
        match self {
            Life::Seconds(s) => Some(t0 + s * 1000),
            Life::Never => None,
        }
    }
}

/// Every `ttl` value at the edges of validity, with a 10 s collection default: valid int32
/// values (int32, in-range int64, integral double) `-1` and `1..=2147483647` are TTLs; anything
/// else is stored untouched and is not a TTL, so the default applies.
#[tokio::test]
async fn document_ttl_boundaries() -> TestResult {
    let (_server, client, _) = start().await?;
    let name = "doc_ttl";
    create_ttl_index(&client, name, doc! { "_ts": 1 }, 10).await?;
    let default = Life::Seconds(10);
    let cases: Vec<(&str, Document, Life)> = vec![
        (
            "int32_max",
            doc! { "ttl": 2_147_483_647_i32 },
            Life::Seconds(MAX_TTL),
        ),
        (
            "int64_max",
            doc! { "ttl": 2_147_483_647_i64 },
            Life::Seconds(MAX_TTL),
        ),
        (
            "double_max",
            doc! { "ttl": 2_147_483_647.0 },
            Life::Seconds(MAX_TTL),
        ),
        (
            "int64_max_plus_1",
            doc! { "ttl": 2_147_483_648_i64 },
            default,
        ),
        (
            "double_max_plus_1",
            doc! { "ttl": 2_147_483_648.0 },
            default,
        ),
        (
            "int64_2147483649",
            doc! { "ttl": 2_147_483_649_i64 },
            default,
        ),
        ("int32_minus_1", doc! { "ttl": -1 }, Life::Never),
        ("int64_minus_1", doc! { "ttl": -1_i64 }, Life::Never),
        ("double_minus_1", doc! { "ttl": -1.0 }, Life::Never),
        ("int32_0", doc! { "ttl": 0 }, default),
        ("int64_0", doc! { "ttl": 0_i64 }, default),
        ("double_0", doc! { "ttl": 0.0 }, default),
        ("negative_zero", doc! { "ttl": -0.0 }, default),
        ("int32_minus_2", doc! { "ttl": -2 }, default),
        ("double_minus_2", doc! { "ttl": -2.0 }, default),
        ("int32_min", doc! { "ttl": i32::MIN }, default),
        (
            "int64_below_int32_min",
            doc! { "ttl": -2_147_483_649_i64 },
            default,
        ),
        ("nan", doc! { "ttl": f64::NAN }, default),
        ("plus_infinity", doc! { "ttl": f64::INFINITY }, default),
        ("minus_infinity", doc! { "ttl": f64::NEG_INFINITY }, default),
        ("1e10", doc! { "ttl": 1e10 }, default),
        ("20.5", doc! { "ttl": 20.5 }, default),
        ("tiny_fraction", doc! { "ttl": 1.000_000_1 }, default),
        (
            "decimal_20",
            doc! { "ttl": "20".parse::<Decimal128>()? },
            default,
        ),
        ("string_20", doc! { "ttl": "20" }, default),
        ("null", doc! { "ttl": Bson::Null }, default),
        ("true", doc! { "ttl": true }, default),
        ("array_20", doc! { "ttl": [20] }, default),
        ("document", doc! { "ttl": { "seconds": 20 } }, default),
        ("int32_1", doc! { "ttl": 1 }, Life::Seconds(1)),
        ("int32_20", doc! { "ttl": 20 }, Life::Seconds(20)),
        ("int64_20", doc! { "ttl": 20_i64 }, Life::Seconds(20)),
        ("double_20", doc! { "ttl": 20.0 }, Life::Seconds(20)),
        ("upper_case_TTL", doc! { "TTL": 20 }, default),
        ("nested_ttl", doc! { "a": { "ttl": -1 } }, default),
        ("no_ttl", doc! {}, default),
        // A client `_ts` is an ordinary field: it has no effect on expiry.
        ("client_ts_date", doc! { "_ts": date(0) }, default),
        (
            "client_ts_number",
            doc! { "_ts": 1, "ttl": -1 },
            Life::Never,
        ),
    ];
    let t0 = now(&client).await?;
    let mut sent = Vec::new();
    for (id, body, life) in &cases {
        let mut d = doc! { "_id": *id };
        d.extend(body.clone());
        let raw = RawDocumentBuf::try_from(&d)?;
        raw_coll(&client, name).insert_one(raw.clone()).await?;
        sent.push((*id, raw, *life));
    }
    // Stored and returned untouched: the same bytes, so the same types and values (NaN, -0.0).
    for (id, raw, _) in &sent {
        let got = raw_coll(&client, name)
            .find_one(doc! { "_id": *id })
            .await?
            .ok_or_else(|| format!("{id} not found right after its insert"))?;
        assert_eq!(
            got.as_bytes(),
            raw.as_bytes(),
            "{id} not returned untouched"
        );
    }
    let checkpoints = [
        0,
        999,
        1000,
        9999,
        10_000,
        19_999,
        20_000,
        YEAR_MS,
        MAX_TTL * 1000 - 1,
        MAX_TTL * 1000,
        MAX_TTL * 1000 + YEAR_MS,
    ];
    for offset in checkpoints {
        move_to(&client, t0 + offset).await?;
        let expected: BTreeSet<String> = sent
            .iter()
            .filter(|(_, _, life)| life.expires(t0).is_none_or(|at| at > t0 + offset))
            .map(|(id, _, _)| (*id).to_owned())
            .collect();
        assert_eq!(
            string_ids(&client, name).await?,
            expected,
            "documents alive at t0 + {offset} ms"
        );
        let count = coll(&client, name).count_documents(doc! {}).await?;
        assert_eq!(count, expected.len() as u64, "count at t0 + {offset} ms");
    }
    Ok(())
}

/// The documented examples (spec 1.5): 20.0, `NumberInt(20)` and `NumberLong(20)` expire 20 s
/// after the insert; 20.5 and `NumberLong(2147483649)` after the collection's 10 s.
#[tokio::test]
async fn documented_cosmos_examples() -> TestResult {
    let (_server, client, _) = start().await?;
    let name = "examples";
    create_ttl_index(&client, name, doc! { "_ts": 1 }, 10).await?;
    let t0 = now(&client).await?;
    let c = coll(&client, name);
    c.insert_many([
        doc! { "_id": 1, "id": 1, "location": "Paris", "ttl": 20.0 },
        doc! { "_id": 2, "id": 1, "location": "Paris", "ttl": 20 },
        doc! { "_id": 3, "id": 1, "location": "Paris", "ttl": 20_i64 },
        doc! { "_id": 4, "id": 1, "location": "Paris", "ttl": 20.5 },
        doc! { "_id": 5, "id": 1, "location": "Paris", "ttl": 2_147_483_649_i64 },
    ])
    .await?;
    move_to(&client, t0 + 9999).await?;
    assert_eq!(ids(&client, name).await?, int_ids(&[1, 2, 3, 4, 5]));
    move_to(&client, t0 + 10_000).await?;
    assert_eq!(ids(&client, name).await?, int_ids(&[1, 2, 3]));
    move_to(&client, t0 + 19_999).await?;
    assert_eq!(ids(&client, name).await?, int_ids(&[1, 2, 3]));
    move_to(&client, t0 + 20_000).await?;
    assert_eq!(ids(&client, name).await?, int_ids(&[]));
    Ok(())
}

/// The matrix of spec 1.4: no `_ts` TTL index (ttl ignored), default -1, default n.
#[tokio::test]
async fn default_and_document_ttl_matrix() -> TestResult {
    let (_server, client, _) = start().await?;
    create_ttl_index(&client, "minus_one", doc! { "_ts": 1 }, -1).await?;
    create_ttl_index(&client, "ten", doc! { "_ts": 1 }, 10).await?;
    let t0 = now(&client).await?;
    for name in ["no_index", "minus_one", "ten"] {
        coll(&client, name)
            .insert_many([
                doc! { "_id": "none" },
                doc! { "_id": "never", "ttl": -1 },
                doc! { "_id": "five", "ttl": 5 },
                doc! { "_id": "thirty", "ttl": 30 },
            ])
            .await?;
    }
    let all = ["five", "never", "none", "thirty"];
    let set = |ids: &[&str]| ids.iter().map(|s| (*s).to_owned()).collect::<BTreeSet<_>>();
    let expected = [
        (4999, set(&all), set(&all), set(&all)),
        (
            5000,
            set(&all),
            set(&["never", "none", "thirty"]),
            set(&["never", "none", "thirty"]),
        ),
        (
            10_000,
            set(&all),
            set(&["never", "none", "thirty"]),
            set(&["never", "thirty"]),
        ),
        (30_000, set(&all), set(&["never", "none"]), set(&["never"])),
        (
            100 * YEAR_MS,
            set(&all),
            set(&["never", "none"]),
            set(&["never"]),
        ),
    ];
    for (offset, no_index, minus_one, ten) in expected {
        move_to(&client, t0 + offset).await?;
        assert_eq!(string_ids(&client, "no_index").await?, no_index, "{offset}");
        assert_eq!(
            string_ids(&client, "minus_one").await?,
            minus_one,
            "{offset}"
        );
        assert_eq!(string_ids(&client, "ten").await?, ten, "{offset}");
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// 2. `expireAfterSeconds` on createIndexes, listIndexes, collMod, dropIndexes
// ---------------------------------------------------------------------------------------------

/// Values of `expireAfterSeconds` the `_ts` index refuses (67), and with each refusal nothing
/// changes: not the index list, not the documents' expiry, and no collection is created.
#[tokio::test]
async fn ts_expire_after_seconds_refused() -> TestResult {
    let (_server, client, _) = start().await?;
    let guarded = "guarded";
    let t0 = fixture(&client, guarded).await?;
    coll(&client, "plain")
        .insert_one(doc! { "_id": 1, "ttl": 5 })
        .await?;
    let indexes_before = list_indexes(&client, guarded).await?;
    let collections_before = collection_names(&client).await?;
    let refused: Vec<Bson> = vec![
        Bson::Int32(0),
        Bson::Int64(0),
        Bson::Double(0.0),
        Bson::Double(-0.0),
        Bson::Int32(-2),
        Bson::Int32(i32::MIN),
        Bson::Int64(2_147_483_648),
        Bson::Double(2_147_483_648.0),
        Bson::Double(1.5),
        Bson::Double(-1.5),
        Bson::Double(f64::NAN),
        Bson::Double(f64::INFINITY),
        Bson::Double(f64::NEG_INFINITY),
        Bson::String("10".into()),
        Bson::Null,
        Bson::Boolean(true),
        Bson::Decimal128("10".parse()?),
    ];
    for value in &refused {
        for (target, key) in [
            (guarded, doc! { "_ts": 1 }),
            (guarded, doc! { "_ts": -1 }),
            ("plain", doc! { "_ts": 1 }),
            ("ghost", doc! { "_ts": 1 }),
        ] {
            let err = create_index_err(
                &client,
                target,
                doc! { "key": key.clone(), "name": "ts", "expireAfterSeconds": value.clone() },
            )
            .await?;
            assert_command_error(&err, 67, "CannotCreateIndex");
            assert!(
                err.message.contains("expireAfterSeconds"),
                "the message should name the rule: {err:?}"
            );
        }
    }
    assert_eq!(list_indexes(&client, guarded).await?, indexes_before);
    assert_eq!(list_indexes(&client, "plain").await?.len(), 1);
    assert_eq!(collection_names(&client).await?, collections_before);
    // The documents' expiry is what it was.
    move_to(&client, t0 + 4999).await?;
    assert_eq!(ids(&client, guarded).await?, int_ids(&[1, 2, 3, 4]));
    move_to(&client, t0 + 5000).await?;
    assert_eq!(ids(&client, guarded).await?, int_ids(&[1, 2, 3]));
    expires_exactly_at(&client, guarded, 1, t0 + 10_000).await?;
    assert_eq!(ids(&client, guarded).await?, int_ids(&[2, 3]));
    move_to(&client, t0 + 100 * YEAR_MS).await?;
    assert_eq!(ids(&client, "plain").await?, int_ids(&[1]));
    Ok(())
}

/// Values the `_ts` index accepts: -1 and 1..=2147483647, as int32, int64 or integral double.
#[tokio::test]
async fn ts_expire_after_seconds_accepted() -> TestResult {
    let (_server, client, t0) = start().await?;
    let accepted: Vec<(Bson, Option<i64>)> = vec![
        (Bson::Int32(-1), None),
        (Bson::Int64(-1), None),
        (Bson::Double(-1.0), None),
        (Bson::Int32(1), Some(1)),
        (Bson::Int64(10), Some(10)),
        (Bson::Double(10.0), Some(10)),
        (Bson::Int32(2_147_483_647), Some(MAX_TTL)),
        (Bson::Int64(2_147_483_647), Some(MAX_TTL)),
        (Bson::Double(2_147_483_647.0), Some(MAX_TTL)),
    ];
    for (i, (value, _)) in accepted.iter().enumerate() {
        let name = format!("accepted_{i}");
        let reply = create_ttl_index(&client, &name, doc! { "_ts": 1 }, value.clone()).await?;
        assert!(is_ok(&reply), "{value}: {reply}");
        let spec = &list_indexes(&client, &name).await?[1];
        assert_eq!(spec.get("expireAfterSeconds"), Some(value), "{spec}");
        coll(&client, &name).insert_one(doc! { "_id": 1 }).await?;
    }
    // In order of expiry, the clock only moving forward.
    let mut finite: Vec<(usize, i64)> = accepted
        .iter()
        .enumerate()
        .filter_map(|(i, (_, seconds))| seconds.map(|s| (i, s)))
        .collect();
    finite.sort_by_key(|&(_, s)| s);
    for &(_, seconds) in &finite {
        let expires = t0 + seconds * 1000;
        if now(&client).await? >= expires {
            continue; // Checked with an earlier collection of the same seconds.
        }
        for (offset, alive) in [(1, true), (0, false)] {
            move_to(&client, expires - offset).await?;
            for &(i, _) in finite.iter().filter(|&&(_, s)| s == seconds) {
                let name = format!("accepted_{i}");
                assert_eq!(
                    present(&client, &name, 1).await?,
                    alive,
                    "{name} at {offset} ms before"
                );
            }
        }
    }
    move_to(&client, t0 + MAX_TTL * 1000 + YEAR_MS).await?;
    for (i, (value, seconds)) in accepted.iter().enumerate() {
        if seconds.is_none() {
            assert!(
                present(&client, &format!("accepted_{i}"), 1).await?,
                "{value}"
            );
        }
    }
    Ok(())
}

/// The date-field model takes MongoDB's values: 0..=2147483647 (a fraction is accepted), and
/// refuses negative, too large, non-numeric and NaN values with 67, changing nothing.
#[tokio::test]
async fn date_expire_after_seconds_boundaries() -> TestResult {
    let (_server, client, t0) = start().await?;
    let accepted: Vec<Bson> = vec![
        Bson::Int32(0),
        Bson::Double(1.5),
        Bson::Int64(60),
        Bson::Double(60.0),
        Bson::Int32(2_147_483_647),
    ];
    for (i, value) in accepted.iter().enumerate() {
        let name = format!("date_ok_{i}");
        let reply = create_ttl_index(&client, &name, doc! { "at": 1 }, value.clone()).await?;
        assert!(is_ok(&reply), "{value}: {reply}");
        let spec = &list_indexes(&client, &name).await?[1];
        assert_eq!(spec.get("expireAfterSeconds"), Some(value), "{spec}");
    }
    // 1.5: at least one second, at most one and a half (MongoDB truncates to 1).
    let c = coll(&client, "date_ok_1");
    c.insert_one(doc! { "_id": 1, "at": date(t0) }).await?;
    move_to(&client, t0 + 999).await?;
    assert!(present(&client, "date_ok_1", 1).await?);
    move_to(&client, t0 + 1500).await?;
    assert!(!present(&client, "date_ok_1", 1).await?);

    let guarded = "date_guarded";
    create_ttl_index(&client, guarded, doc! { "at": 1 }, 60).await?;
    let t1 = now(&client).await?;
    coll(&client, guarded)
        .insert_one(doc! { "_id": 1, "at": date(t1) })
        .await?;
    let indexes_before = list_indexes(&client, guarded).await?;
    let collections_before = collection_names(&client).await?;
    let refused: Vec<Bson> = vec![
        Bson::Int32(-1),
        Bson::Int64(-1),
        Bson::Int32(i32::MIN),
        Bson::Int64(2_147_483_648),
        Bson::Double(2_147_483_648.0),
        Bson::Double(f64::NAN),
        Bson::Double(f64::INFINITY),
        Bson::String("10".into()),
        Bson::Null,
        Bson::Boolean(true),
    ];
    for value in &refused {
        for (target, key) in [
            (guarded, doc! { "at": 1 }),
            (guarded, doc! { "other": 1 }),
            ("date_ghost", doc! { "at": 1 }),
        ] {
            let err = create_index_err(
                &client,
                target,
                doc! { "key": key, "name": "x", "expireAfterSeconds": value.clone() },
            )
            .await?;
            assert_command_error(&err, 67, "CannotCreateIndex");
            assert!(err.message.contains("expireAfterSeconds"), "{err:?}");
        }
    }
    assert_eq!(list_indexes(&client, guarded).await?, indexes_before);
    assert_eq!(collection_names(&client).await?, collections_before);
    expires_exactly_at(&client, guarded, 1, t1 + 60_000).await?;
    Ok(())
}

/// `expireAfterSeconds` on the `_id` index is 197; on a compound key (with `_ts` or not) 67;
/// nothing is created. (The `codeName` of 197 is checked by
/// `id_ttl_index_error_has_mongods_code_name`.)
#[tokio::test]
async fn id_and_compound_ttl_indexes_refused() -> TestResult {
    let (_server, client, _) = start().await?;
    coll(&client, "c").insert_one(doc! { "_id": 1 }).await?;
    for name in ["_id_", "id_ttl"] {
        let err = create_index_err(
            &client,
            "c",
            doc! { "key": { "_id": 1 }, "name": name, "expireAfterSeconds": 10 },
        )
        .await?;
        assert_eq!(err.code, 197, "{err:?}");
        assert!(err.message.contains("expireAfterSeconds"), "{err:?}");
    }
    for key in [
        doc! { "_ts": 1, "a": 1 },
        doc! { "a": 1, "_ts": 1 },
        doc! { "_ts": -1, "_id": 1 },
        doc! { "at": 1, "a": 1 },
    ] {
        for target in ["c", "compound_ghost"] {
            let err = create_index_err(
                &client,
                target,
                doc! { "key": key.clone(), "name": "compound", "expireAfterSeconds": 10 },
            )
            .await?;
            assert_command_error(&err, 67, "CannotCreateIndex");
            assert!(
                err.message.contains(
                    "TTL indexes are single-field indexes, compound indexes do not support TTL"
                ),
                "{err:?}"
            );
        }
    }
    assert_eq!(list_indexes(&client, "c").await?.len(), 1);
    assert_eq!(
        collection_names(&client).await?,
        BTreeSet::from(["c".to_owned()])
    );
    Ok(())
}

/// Error 197 carries mongod's `codeName`, `InvalidIndexSpecificationOption` (spec 2).
#[tokio::test]
async fn id_ttl_index_error_has_mongods_code_name() -> TestResult {
    let (_server, client, _) = start().await?;
    let err = create_index_err(
        &client,
        "c",
        doc! { "key": { "_id": 1 }, "name": "_id_", "expireAfterSeconds": 10 },
    )
    .await?;
    assert_command_error(&err, 197, "InvalidIndexSpecificationOption");
    Ok(())
}

/// `createIndexes` reply shape; the same index again is a no-op; with another
/// `expireAfterSeconds` it is 85 `IndexOptionsConflict` (collMod is for that); `listIndexes`
/// shows the TTL index as MongoDB does.
#[tokio::test]
async fn create_indexes_reply_and_list_indexes_shape() -> TestResult {
    let (_server, client, _) = start().await?;
    let reply = create_ttl_index(&client, "new", doc! { "_ts": 1 }, 10).await?;
    assert_eq!(reply.get_i32("numIndexesBefore")?, 1, "{reply}");
    assert_eq!(reply.get_i32("numIndexesAfter")?, 2, "{reply}");
    assert!(reply.get_bool("createdCollectionAutomatically")?, "{reply}");
    assert!(is_ok(&reply), "{reply}");
    assert!(reply.get("note").is_none(), "{reply}");
    assert_eq!(
        list_indexes(&client, "new").await?,
        vec![
            doc! { "v": 2, "key": { "_id": 1 }, "name": "_id_" },
            doc! { "v": 2, "key": { "_ts": 1 }, "name": "_ts_1", "expireAfterSeconds": 10 },
        ]
    );

    // Again, same options: nothing to do.
    let again = create_ttl_index(&client, "new", doc! { "_ts": 1 }, 10).await?;
    assert_eq!(again.get_i32("numIndexesBefore")?, 2, "{again}");
    assert_eq!(again.get_i32("numIndexesAfter")?, 2, "{again}");
    assert_eq!(again.get_str("note")?, "all indexes already exist");
    assert!(is_ok(&again), "{again}");
    // (mongod 7.0 leaves `createdCollectionAutomatically` out of this reply.)
    assert_ne!(
        again.get_bool("createdCollectionAutomatically").ok(),
        Some(true)
    );

    // Another expireAfterSeconds: refused, unchanged.
    for other in [Bson::Int32(20), Bson::Int32(-1)] {
        let err = create_index_err(
            &client,
            "new",
            doc! { "key": { "_ts": 1 }, "expireAfterSeconds": other },
        )
        .await?;
        assert_command_error(&err, 85, "IndexOptionsConflict");
    }
    // Without expireAfterSeconds it is another index with the same name: also a conflict.
    let err = create_index_err(
        &client,
        "new",
        doc! { "key": { "_ts": 1 }, "name": "_ts_1" },
    )
    .await?;
    assert_command_error(&err, 85, "IndexOptionsConflict");
    assert_eq!(
        list_indexes(&client, "new").await?[1].get_i32("expireAfterSeconds")?,
        10
    );

    // On an existing collection.
    coll(&client, "existing")
        .insert_one(doc! { "_id": 1 })
        .await?;
    let reply = create_ttl_index(&client, "existing", doc! { "at": 1 }, 3600).await?;
    assert_eq!(reply.get_i32("numIndexesBefore")?, 1, "{reply}");
    assert_eq!(reply.get_i32("numIndexesAfter")?, 2, "{reply}");
    assert!(
        !reply.get_bool("createdCollectionAutomatically")?,
        "{reply}"
    );
    // `{_ts: -1}` is the Cosmos switch too.
    let reply = create_ttl_index(&client, "descending", doc! { "_ts": -1 }, 10).await?;
    assert!(is_ok(&reply), "{reply}");
    assert_eq!(
        list_indexes(&client, "descending").await?[1],
        doc! { "v": 2, "key": { "_ts": -1 }, "name": "_ts_-1", "expireAfterSeconds": 10 }
    );
    Ok(())
}

/// `{_ts: -1}` with `expireAfterSeconds` works like `{_ts: 1}`.
#[tokio::test]
async fn descending_ts_index_is_the_default_too() -> TestResult {
    let (_server, client, t0) = start().await?;
    create_ttl_index(&client, "desc", doc! { "_ts": -1 }, 10).await?;
    coll(&client, "desc")
        .insert_many([
            doc! { "_id": 1 },
            doc! { "_id": 2, "ttl": 20 },
            doc! { "_id": 3, "ttl": -1 },
        ])
        .await?;
    expires_exactly_at(&client, "desc", 1, t0 + 10_000).await?;
    expires_exactly_at(&client, "desc", 2, t0 + 20_000).await?;
    move_to(&client, t0 + 100 * YEAR_MS).await?;
    assert_eq!(ids(&client, "desc").await?, int_ids(&[3]));
    Ok(())
}

/// `collMod` by key pattern and by name: `expireAfterSeconds_old`/`_new`, the new value listed
/// and applied from each document's last write.
#[tokio::test]
async fn coll_mod_changes_the_default() -> TestResult {
    let (_server, client, t0) = start().await?;
    create_ttl_index(&client, "by_key", doc! { "_ts": 1 }, 10).await?;
    create_ttl_index(&client, "by_name", doc! { "_ts": 1 }, 10).await?;
    for name in ["by_key", "by_name"] {
        coll(&client, name).insert_one(doc! { "_id": 1 }).await?;
    }
    let reply = coll_mod(
        &client,
        "by_key",
        doc! { "keyPattern": { "_ts": 1 }, "expireAfterSeconds": 100 },
    )
    .await?;
    assert_eq!(
        reply,
        doc! { "expireAfterSeconds_old": 10, "expireAfterSeconds_new": 100, "ok": 1.0 }
    );
    let reply = coll_mod(
        &client,
        "by_name",
        doc! { "name": "_ts_1", "expireAfterSeconds": 200 },
    )
    .await?;
    assert_eq!(
        reply,
        doc! { "expireAfterSeconds_old": 10, "expireAfterSeconds_new": 200, "ok": 1.0 }
    );
    assert_eq!(
        list_indexes(&client, "by_key").await?[1],
        doc! { "v": 2, "key": { "_ts": 1 }, "name": "_ts_1", "expireAfterSeconds": 100 }
    );
    assert_eq!(
        list_indexes(&client, "by_name").await?[1],
        doc! { "v": 2, "key": { "_ts": 1 }, "name": "_ts_1", "expireAfterSeconds": 200 }
    );
    expires_exactly_at(&client, "by_key", 1, t0 + 100_000).await?;
    expires_exactly_at(&client, "by_name", 1, t0 + 200_000).await?;

    // Errors: unknown index, and a value the `_ts` index refuses (nothing changes).
    let err = run_command_err(
        &client,
        DB,
        doc! { "collMod": "by_key", "index": { "name": "nope", "expireAfterSeconds": 5 } },
    )
    .await?;
    assert_command_error(&err, 27, "IndexNotFound");
    for bad in [Bson::Int32(0), Bson::Int32(-2), Bson::Double(2.5)] {
        let err = run_command_err(
            &client,
            DB,
            doc! { "collMod": "by_key", "index": { "name": "_ts_1", "expireAfterSeconds": bad } },
        )
        .await?;
        assert!(err.code == 67 || err.code == 72, "{err:?}");
    }
    assert_eq!(
        list_indexes(&client, "by_key").await?[1].get_i32("expireAfterSeconds")?,
        100
    );
    Ok(())
}

/// `collMod` of a date TTL index with an out-of-range value answers as mongod 7.0 does:
/// 72 `InvalidOptions` (mongod's `coll_mod.cpp` wraps the validation error in it).
#[tokio::test]
async fn coll_mod_date_index_refuses_like_mongod() -> TestResult {
    let (_server, client, _) = start().await?;
    create_ttl_index(&client, "d", doc! { "at": 1 }, 60).await?;
    let err = run_command_err(
        &client,
        DB,
        doc! { "collMod": "d", "index": { "keyPattern": { "at": 1 }, "expireAfterSeconds": -1 } },
    )
    .await?;
    assert_command_error(&err, 72, "InvalidOptions");
    assert_eq!(
        list_indexes(&client, "d").await?[1].get_i32("expireAfterSeconds")?,
        60
    );
    Ok(())
}

/// `dropIndexes` of the `_ts` TTL index (by name, by key, or `*`) turns TTL off: no document
/// expires any more, not even one with its own `ttl`.
#[tokio::test]
async fn drop_indexes_turns_ttl_off() -> TestResult {
    let (_server, client, t0) = start().await?;
    let targets = [
        ("by_name", Bson::String("_ts_1".into())),
        ("by_key", Bson::Document(doc! { "_ts": 1 })),
        ("star", Bson::String("*".into())),
        ("list", Bson::Array(vec![Bson::String("_ts_1".into())])),
    ];
    for (name, _) in &targets {
        create_ttl_index(&client, name, doc! { "_ts": 1 }, 10).await?;
        coll(&client, name)
            .insert_many([
                doc! { "_id": 1 },
                doc! { "_id": 2, "ttl": 5 },
                doc! { "_id": 3, "ttl": -1 },
            ])
            .await?;
    }
    move_to(&client, t0 + 4000).await?;
    for (name, index) in &targets {
        let reply = run_command(
            &client,
            DB,
            doc! { "dropIndexes": *name, "index": index.clone() },
        )
        .await?;
        assert_eq!(reply.get_i32("nIndexesWas")?, 2, "{reply}");
        assert_eq!(list_indexes(&client, name).await?.len(), 1);
    }
    move_to(&client, t0 + MAX_TTL * 1000 + YEAR_MS).await?;
    for (name, _) in &targets {
        assert_eq!(ids(&client, name).await?, int_ids(&[1, 2, 3]), "{name}");
    }
    // And new writes do not expire either.
    coll(&client, "by_name")
        .insert_one(doc! { "_id": 4, "ttl": 1 })
        .await?;
    move_to(&client, t0 + MAX_TTL * 1000 + 2 * YEAR_MS).await?;
    assert_eq!(ids(&client, "by_name").await?, int_ids(&[1, 2, 3, 4]));
    Ok(())
}

/// A `{_ts: 1}` index without `expireAfterSeconds` is an ordinary index on the client field:
/// nothing expires and `ttl` is not interpreted; `collMod` can then make it the TTL switch.
#[tokio::test]
async fn plain_ts_index_is_not_a_ttl_switch() -> TestResult {
    let (_server, client, t0) = start().await?;
    create_index(
        &client,
        "plain",
        doc! { "key": { "_ts": 1 }, "name": "_ts_1" },
    )
    .await?;
    coll(&client, "plain")
        .insert_many([
            doc! { "_id": 1, "_ts": date(0) },
            doc! { "_id": 2, "ttl": 5 },
        ])
        .await?;
    move_to(&client, t0 + 100 * YEAR_MS).await?;
    assert_eq!(ids(&client, "plain").await?, int_ids(&[1, 2]));
    // Made a TTL index: documents written long ago are past both rules at once.
    let reply = coll_mod(
        &client,
        "plain",
        doc! { "name": "_ts_1", "expireAfterSeconds": 10 },
    )
    .await?;
    assert!(is_ok(&reply), "{reply}");
    assert_eq!(reply.get_i32("expireAfterSeconds_new")?, 10, "{reply}");
    assert_eq!(ids(&client, "plain").await?, int_ids(&[]));
    Ok(())
}

/// A `_ts` key other than `{_ts: 1}`/`{_ts: -1}` must not turn the client `_ts` field into a
/// date TTL: the client `_ts` "has no effect on expiry" (spec 1.1), and MongoDB's date model is
/// for "any field but `_id` and `_ts`" (spec 2).
#[tokio::test]
async fn other_ts_key_patterns_do_not_expire_by_client_ts() -> TestResult {
    let (_server, client, _) = start().await?;
    // Refusing the index is fine too; accepted, it must leave the client `_ts` alone.
    run_command(
        &client,
        DB,
        doc! { "createIndexes": "c", "indexes": [
            { "key": { "_ts": 2 }, "name": "ts2", "expireAfterSeconds": 10 },
        ] },
    )
    .await
    .ok();
    coll(&client, "c")
        .insert_one(doc! { "_id": 1, "_ts": date(0) })
        .await?;
    assert!(
        present(&client, "c", 1).await?,
        "a client _ts date expired the document"
    );
    Ok(())
}

/// Two TTL indexes on `_ts` (`{_ts: 1}` and `{_ts: -1}`) are either refused or both count: a
/// document's expiry is the earliest instant any rule gives it (spec 3), whatever the order
/// the indexes were created in.
#[tokio::test]
async fn two_ts_ttl_indexes_take_the_earliest_default() -> TestResult {
    let (_server, client, t0) = start().await?;
    create_ttl_index(&client, "two", doc! { "_ts": 1 }, 10).await?;
    let second = run_command(
        &client,
        DB,
        doc! { "createIndexes": "two", "indexes": [
            { "key": { "_ts": -1 }, "name": "_ts_-1", "expireAfterSeconds": 100 },
        ] },
    )
    .await;
    if second.is_err() {
        return Ok(()); // Refusing the second is fine.
    }
    coll(&client, "two").insert_one(doc! { "_id": 1 }).await?;
    move_to(&client, t0 + 10_000).await?;
    assert!(
        !present(&client, "two", 1).await?,
        "the 10 s rule should have expired it"
    );
    Ok(())
}

/// A `_ts` TTL index with a `partialFilterExpression` is either refused or honoured (MongoDB
/// honours partial TTL indexes): a document the filter does not match is not expired by it.
#[tokio::test]
async fn partial_ts_index_is_honoured_or_refused() -> TestResult {
    let (_server, client, t0) = start().await?;
    let created = run_command(
        &client,
        DB,
        doc! { "createIndexes": "partial_ts", "indexes": [{
            "key": { "_ts": 1 },
            "name": "_ts_1",
            "expireAfterSeconds": 10,
            "partialFilterExpression": { "kind": "temp" },
        }] },
    )
    .await;
    if created.is_err() {
        return Ok(()); // Refusing it is fine.
    }
    coll(&client, "partial_ts")
        .insert_many([
            doc! { "_id": "temp", "kind": "temp" },
            doc! { "_id": "keep", "kind": "keep" },
        ])
        .await?;
    move_to(&client, t0 + 10_000).await?;
    assert_eq!(string_ids(&client, "partial_ts").await?, names(&["keep"]));
    Ok(())
}

/// A hidden TTL index still expires documents (as in MongoDB).
#[tokio::test]
async fn hidden_ttl_index_still_expires() -> TestResult {
    let (_server, client, t0) = start().await?;
    create_index(
        &client,
        "hidden",
        doc! { "key": { "_ts": 1 }, "expireAfterSeconds": 10, "hidden": true },
    )
    .await?;
    create_index(
        &client,
        "hidden",
        doc! { "key": { "at": 1 }, "expireAfterSeconds": 0, "hidden": true },
    )
    .await?;
    coll(&client, "hidden")
        .insert_many([doc! { "_id": 1 }, doc! { "_id": 2, "at": date(t0 + 3000) }])
        .await?;
    expires_exactly_at(&client, "hidden", 2, t0 + 3000).await?;
    expires_exactly_at(&client, "hidden", 1, t0 + 10_000).await?;
    Ok(())
}

/// A renamed collection keeps its TTL indexes and every document's expiry.
#[tokio::test]
async fn rename_keeps_expiry() -> TestResult {
    let (_server, client, _) = start().await?;
    let t0 = fixture(&client, "before").await?;
    move_to(&client, t0 + 5000).await?;
    run_command(
        &client,
        "admin",
        doc! { "renameCollection": format!("{DB}.before"), "to": format!("{DB}.after") },
    )
    .await?;
    assert_eq!(ids(&client, "after").await?, int_ids(&[1, 2, 3]));
    assert_eq!(
        list_indexes(&client, "after").await?[1].get_i32("expireAfterSeconds")?,
        10
    );
    expires_exactly_at(&client, "after", 1, t0 + 10_000).await?;
    expires_exactly_at(&client, "after", 3, t0 + 20_000).await?;
    coll(&client, "after").insert_one(doc! { "_id": 5 }).await?;
    expires_exactly_at(&client, "after", 5, t0 + 30_000).await?;
    assert_eq!(ids(&client, "after").await?, int_ids(&[2]));
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// 3. Visibility at the instant, on every read and write path
// ---------------------------------------------------------------------------------------------

/// Every read path sees a document 1 ms before its expiry and none sees it at the instant.
#[tokio::test]
async fn reads_at_the_expiry_instant() -> TestResult {
    let (_server, client, _) = start().await?;
    let name = "reads";
    let t0 = fixture(&client, name).await?;
    let c = coll(&client, name);
    // Document 1 (k: a) expires at t0 + 10 s; 4 has gone at t0 + 5 s.
    for (offset, live) in [(9999, vec![1, 2, 3]), (10_000, vec![2, 3])] {
        move_to(&client, t0 + offset).await?;
        let n = live.len() as u64;
        let at = format!("t0 + {offset} ms");
        assert_eq!(ids(&client, name).await?, int_ids(&live), "find, {at}");
        assert_eq!(present(&client, name, 1).await?, offset < 10_000, "{at}");
        let a_ids: Vec<Bson> = drain(c.find(doc! { "k": "a" }).sort(doc! { "_id": 1 }).await?)
            .await?
            .iter()
            .map(|d| d.get("_id").cloned().unwrap_or(Bson::Null))
            .collect();
        let expected_a: Vec<i32> = live.iter().copied().filter(|&i| i != 2).collect();
        assert_eq!(a_ids, int_ids(&expected_a), "find k: a, {at}");
        // skip counts only live documents.
        let skipped = drain(c.find(doc! {}).sort(doc! { "_id": 1 }).skip(1).await?).await?;
        assert_eq!(skipped.len(), live.len() - 1, "skip, {at}");
        let unsorted = drain(c.find(doc! {}).skip(1).await?).await?;
        assert_eq!(unsorted.len(), live.len() - 1, "unsorted skip, {at}");
        assert_eq!(c.count_documents(doc! {}).await?, n, "countDocuments, {at}");
        assert_eq!(
            c.count_documents(doc! { "k": "a" }).await?,
            expected_a.len() as u64,
            "countDocuments k: a, {at}"
        );
        assert_eq!(c.estimated_document_count().await?, n, "estimated, {at}");
        let count = run_command(&client, DB, doc! { "count": name }).await?;
        assert_eq!(
            integer(count.get("n")),
            Some(n.cast_signed()),
            "count, {at}"
        );
        let count = run_command(&client, DB, doc! { "count": name, "query": { "_id": 1 } }).await?;
        assert_eq!(
            integer(count.get("n")),
            Some(i64::from(offset < 10_000)),
            "count by _id, {at}"
        );
        let mut distinct = c.distinct("n", doc! {}).await?;
        distinct.sort_by_key(Bson::as_i32);
        assert_eq!(distinct, int_ids(&live), "distinct, {at}");
        let groups = drain(
            c.aggregate([
                doc! { "$match": { "k": "a" } },
                doc! { "$group": { "_id": "$k", "count": { "$sum": 1 }, "total": { "$sum": "$n" } } },
            ])
            .await?,
        )
        .await?;
        let total: i32 = expected_a.iter().sum();
        assert_eq!(
            groups,
            vec![doc! { "_id": "a", "count": i32::try_from(expected_a.len())?, "total": total }],
            "aggregate $match/$group, {at}"
        );
        let counted = drain(c.aggregate([doc! { "$count": "n" }]).await?).await?;
        assert_eq!(
            counted,
            vec![doc! { "n": i32::try_from(live.len())? }],
            "aggregate $count, {at}"
        );
        let matched = drain(c.aggregate([doc! { "$match": { "_id": 1 } }]).await?).await?;
        assert_eq!(
            matched.len(),
            usize::from(offset < 10_000),
            "$match _id, {at}"
        );
    }
    Ok(())
}

/// Each `getMore` batch of a `find` is judged at the instant of that `getMore`: documents that
/// expired since the `find` are not returned.
#[tokio::test]
async fn get_more_batches_omit_documents_expired_since_the_find() -> TestResult {
    let (_server, client, _) = start().await?;
    let name = "batches";
    create_ttl_index(&client, name, doc! { "_ts": 1 }, 100).await?;
    let t0 = now(&client).await?;
    // 3 expires at t0 + 20 s, 6 and 7 at t0 + 30 s, the others at t0 + 100 s.
    let ttls = [100, 100, 20, 100, 100, 30, 30, 100];
    let docs: Vec<Document> = (1..=8)
        .zip(ttls)
        .map(|(i, ttl)| doc! { "_id": i, "ttl": ttl })
        .collect();
    coll(&client, name).insert_many(docs).await?;
    let reply = run_command(
        &client,
        DB,
        doc! { "find": name, "filter": {}, "batchSize": 2 },
    )
    .await?;
    let (first, id) = batch_ids(&reply)?;
    assert_eq!(first, int_ids(&[1, 2]));
    assert_ne!(id, 0);
    move_to(&client, t0 + 20_000).await?;
    let (second, id) = get_more(&client, name, id).await?;
    assert_eq!(second, int_ids(&[4, 5]), "3 expired before this getMore");
    move_to(&client, t0 + 30_000).await?;
    let (third, id) = get_more(&client, name, id).await?;
    assert_eq!(third, int_ids(&[8]), "6 and 7 expired before this getMore");
    if id != 0 {
        let (rest, id) = get_more(&client, name, id).await?;
        assert!(rest.is_empty() && id == 0, "{rest:?} {id}");
    }

    // The same through the driver's cursor: it fetches the next batch when the first is used.
    let mut cursor = coll(&client, name).find(doc! {}).batch_size(2).await?;
    let mut seen = Vec::new();
    for _ in 0..2 {
        assert!(cursor.advance().await?);
        seen.push(cursor.deserialize_current()?.get_i32("_id")?);
    }
    assert_eq!(seen, [1, 2]);
    move_to(&client, t0 + 100_000).await?;
    assert!(
        !cursor.advance().await?,
        "everything left expired at t0 + 100 s"
    );
    Ok(())
}

/// The same for a sorted `find`, whose results the server computes up front.
#[tokio::test]
async fn sorted_get_more_batches_omit_documents_expired_since_the_find() -> TestResult {
    let (_server, client, _) = start().await?;
    let name = "sorted_batches";
    create_ttl_index(&client, name, doc! { "_ts": 1 }, 100).await?;
    let t0 = now(&client).await?;
    let ttls = [100, 30, 20, 100, 100, 100];
    let docs: Vec<Document> = (1..=6)
        .zip(ttls)
        .map(|(i, ttl)| doc! { "_id": i, "ttl": ttl })
        .collect();
    coll(&client, name).insert_many(docs).await?;
    let reply = run_command(
        &client,
        DB,
        doc! { "find": name, "filter": {}, "sort": { "_id": -1 }, "batchSize": 2 },
    )
    .await?;
    let (first, id) = batch_ids(&reply)?;
    assert_eq!(first, int_ids(&[6, 5]));
    move_to(&client, t0 + 20_000).await?;
    let (second, id) = get_more(&client, name, id).await?;
    assert_eq!(second, int_ids(&[4, 2]), "3 expired before this getMore");
    move_to(&client, t0 + 100_000).await?;
    if id != 0 {
        let (third, _) = get_more(&client, name, id).await?;
        assert!(third.is_empty(), "1 expired before this getMore: {third:?}");
    }
    Ok(())
}

/// The same for an aggregation that returns the documents themselves (`$match`).
#[tokio::test]
async fn aggregate_get_more_batches_omit_documents_expired_since() -> TestResult {
    let (_server, client, _) = start().await?;
    let name = "agg_batches";
    create_ttl_index(&client, name, doc! { "_ts": 1 }, 100).await?;
    let t0 = now(&client).await?;
    let ttls = [100, 100, 20, 100];
    let docs: Vec<Document> = (1..=4)
        .zip(ttls)
        .map(|(i, ttl)| doc! { "_id": i, "ttl": ttl })
        .collect();
    coll(&client, name).insert_many(docs).await?;
    let reply = run_command(
        &client,
        DB,
        doc! {
            "aggregate": name,
            "pipeline": [{ "$match": {} }],
            "cursor": { "batchSize": 2 },
        },
    )
    .await?;
    let (first, id) = batch_ids(&reply)?;
    assert_eq!(first, int_ids(&[1, 2]));
    move_to(&client, t0 + 20_000).await?;
    let (second, _) = get_more(&client, name, id).await?;
    assert_eq!(second, int_ids(&[4]), "3 expired before this getMore");
    Ok(())
}

/// `collStats.count` and `dbStats.objects` count only live documents, whether or not the purge
/// has removed the expired ones yet ("no read, write, count or index sees it … whether or not
/// the background purge has removed its bytes yet"). Many documents expire at once so that
/// the purge is still at work when the statistics are read.
#[tokio::test]
async fn stats_do_not_count_expired_documents() -> TestResult {
    let (_server, client, t0) = start().await?;
    let name = "stats";
    create_ttl_index(&client, name, doc! { "_ts": 1 }, 10).await?;
    let docs: Vec<Document> = (0..10_000).map(|i| doc! { "_id": i }).collect();
    coll(&client, name).insert_many(docs).await?;
    coll(&client, name)
        .insert_one(doc! { "_id": "kept", "ttl": -1 })
        .await?;
    move_to(&client, t0 + 10_000).await?;
    let stats = run_command(&client, DB, doc! { "collStats": name }).await?;
    assert_eq!(integer(stats.get("count")), Some(1), "collStats: {stats}");
    let stats = run_command(&client, DB, doc! { "dbStats": 1 }).await?;
    assert_eq!(integer(stats.get("objects")), Some(1), "dbStats: {stats}");
    Ok(())
}

/// Updates do not match an expired document, and do not bring it back.
#[tokio::test]
async fn updates_do_not_match_expired_documents() -> TestResult {
    let (_server, client, _) = start().await?;
    let name = "updates";
    let t0 = fixture(&client, name).await?;
    let c = coll(&client, name);
    move_to(&client, t0 + 10_000).await?;
    let r = c
        .update_one(doc! { "_id": 1 }, doc! { "$set": { "x": 1 } })
        .await?;
    assert_eq!((r.matched_count, r.modified_count), (0, 0));
    assert!(r.upserted_id.is_none());
    let r = c
        .update_one(doc! { "k": "a" }, doc! { "$set": { "x": 1 } })
        .await?;
    assert_eq!(
        (r.matched_count, r.modified_count),
        (1, 1),
        "only 3 is live"
    );
    let r = c
        .replace_one(doc! { "_id": 4 }, doc! { "k": "replaced" })
        .await?;
    assert_eq!(r.matched_count, 0);
    let r = c.update_many(doc! {}, doc! { "$set": { "y": 1 } }).await?;
    assert_eq!((r.matched_count, r.modified_count), (2, 2));
    assert_eq!(ids(&client, name).await?, int_ids(&[2, 3]));
    // Nothing came back: 1 and 4 stay gone.
    let r = c
        .update_many(
            doc! { "_id": { "$in": [1, 4] } },
            doc! { "$set": { "z": 1 } },
        )
        .await?;
    assert_eq!(r.matched_count, 0);
    assert!(!present(&client, name, 1).await? && !present(&client, name, 4).await?);
    Ok(())
}

/// An upsert whose only match has expired inserts a fresh document (not the expired one
/// updated), which lives by its own write time.
#[tokio::test]
async fn upsert_over_an_expired_match_inserts_a_fresh_document() -> TestResult {
    let (_server, client, _) = start().await?;
    let name = "upserts";
    let t0 = fixture(&client, name).await?;
    let c = coll(&client, name);
    move_to(&client, t0 + 10_000).await?;
    let r = c
        .update_one(doc! { "_id": 1 }, doc! { "$set": { "x": 1 } })
        .upsert(true)
        .await?;
    assert_eq!(r.matched_count, 0);
    assert_eq!(r.upserted_id, Some(Bson::Int32(1)));
    assert_eq!(
        c.find_one(doc! { "_id": 1 }).await?,
        Some(doc! { "_id": 1, "x": 1 }),
        "a fresh document, not the expired one updated"
    );
    let r = c
        .replace_one(doc! { "_id": 4 }, doc! { "k": "new" })
        .upsert(true)
        .await?;
    assert_eq!(r.matched_count, 0);
    assert_eq!(r.upserted_id, Some(Bson::Int32(4)));
    assert_eq!(
        c.find_one(doc! { "_id": 4 }).await?,
        Some(doc! { "_id": 4, "k": "new" })
    );
    // Written at t0 + 10 s with the 10 s default.
    expires_exactly_at(&client, name, 1, t0 + 20_000).await?;
    assert!(!present(&client, name, 4).await?);

    // findAndModify's upsert too.
    let t1 = now(&client).await?;
    move_to(&client, t1 + 10_000).await?; // 2 (never) left; 3 expired at t0 + 20 s
    let got = c
        .find_one_and_update(doc! { "_id": 3 }, doc! { "$set": { "y": 2 } })
        .upsert(true)
        .return_document(ReturnDocument::After)
        .await?;
    assert_eq!(got, Some(doc! { "_id": 3, "y": 2 }));
    expires_exactly_at(&client, name, 3, t1 + 20_000).await?;
    Ok(())
}

/// Deletes do not match expired documents: `n` counts only live ones.
#[tokio::test]
async fn deletes_count_only_live_documents() -> TestResult {
    let (_server, client, _) = start().await?;
    let name = "deletes";
    let t0 = fixture(&client, name).await?;
    let c = coll(&client, name);
    move_to(&client, t0 + 10_000).await?;
    assert_eq!(c.delete_one(doc! { "_id": 1 }).await?.deleted_count, 0);
    assert_eq!(c.delete_many(doc! { "k": "c" }).await?.deleted_count, 0);
    assert_eq!(c.delete_many(doc! { "k": "a" }).await?.deleted_count, 1);
    assert_eq!(c.delete_many(doc! {}).await?.deleted_count, 1);
    assert_eq!(ids(&client, name).await?, int_ids(&[]));
    Ok(())
}

/// `findAndModify` does not see expired documents: by `_id` it finds nothing; by a filter with
/// a sort it picks among live documents only.
#[tokio::test]
async fn find_and_modify_skips_expired_documents() -> TestResult {
    let (_server, client, _) = start().await?;
    let name = "fam";
    let t0 = fixture(&client, name).await?;
    let c = coll(&client, name);
    move_to(&client, t0 + 10_000).await?;
    assert_eq!(
        c.find_one_and_update(doc! { "_id": 1 }, doc! { "$set": { "x": 1 } })
            .await?,
        None
    );
    assert_eq!(c.find_one_and_delete(doc! { "_id": 1 }).await?, None);
    assert_eq!(
        c.find_one_and_replace(doc! { "_id": 4 }, doc! { "k": "x" })
            .await?,
        None
    );
    // Sorted by _id ascending, 1 would come first; it has expired, so 3 is picked.
    let got = c
        .find_one_and_update(doc! { "k": "a" }, doc! { "$set": { "x": 1 } })
        .sort(doc! { "_id": 1 })
        .await?;
    assert_eq!(got.and_then(|d| d.get_i32("_id").ok()), Some(3));
    let got = c.find_one_and_delete(doc! {}).sort(doc! { "n": 1 }).await?;
    assert_eq!(got.and_then(|d| d.get_i32("_id").ok()), Some(2));
    assert_eq!(ids(&client, name).await?, int_ids(&[3]));
    Ok(())
}

/// An expired document holds no `_id`: inserting it again succeeds (no `DuplicateKey`), and the
/// new document lives by its own write time. A live one still holds its `_id`.
#[tokio::test]
async fn insert_reuses_the_id_of_an_expired_document() -> TestResult {
    let (_server, client, _) = start().await?;
    let name = "reinsert";
    let t0 = fixture(&client, name).await?;
    let c = coll(&client, name);
    move_to(&client, t0 + 9999).await?;
    let err = c
        .insert_one(doc! { "_id": 1, "again": true })
        .await
        .expect_err("1 is still live");
    assert_eq!(write_error(&err).map(|e| e.code), Some(11000), "{err}");
    move_to(&client, t0 + 10_000).await?;
    c.insert_one(doc! { "_id": 1, "again": true }).await?;
    assert_eq!(
        c.find_one(doc! { "_id": 1 }).await?,
        Some(doc! { "_id": 1, "again": true })
    );
    // In one command: the expired 4 is taken by the first statement, so the second is a dup.
    let reply = run_command(
        &client,
        DB,
        doc! { "insert": name, "documents": [{ "_id": 4 }, { "_id": 4 }, { "_id": 5 }], "ordered": false },
    )
    .await?;
    assert_eq!(reply.get_i32("n")?, 2, "{reply}");
    let errors = write_errors(&reply);
    assert_eq!(errors.len(), 1, "{reply}");
    assert_eq!(errors[0].get_i32("index")?, 1);
    assert_eq!(errors[0].get_i32("code")?, 11000);
    // The new 1 was written at t0 + 10 s: it expires at t0 + 20 s, as does 3 (ttl: 20).
    move_to(&client, t0 + 19_999).await?;
    assert_eq!(ids(&client, name).await?, int_ids(&[1, 2, 3, 4, 5]));
    move_to(&client, t0 + 20_000).await?;
    assert_eq!(ids(&client, name).await?, int_ids(&[2]));
    // A batch large enough to have its `_id`s checked by one range read: the expired 1, 3, 4
    // and 5 are free again, the live 2 is not.
    let reply = run_command(
        &client,
        DB,
        doc! {
            "insert": name,
            "documents": (1..=10).map(|i| doc! { "_id": i, "batch": true }).collect::<Vec<_>>(),
            "ordered": false,
        },
    )
    .await?;
    assert_eq!(reply.get_i32("n")?, 9, "{reply}");
    let errors = write_errors(&reply);
    assert_eq!(errors.len(), 1, "{reply}");
    assert_eq!(errors[0].get_i32("index")?, 1);
    assert_eq!(errors[0].get_i32("code")?, 11000);
    assert_eq!(
        ids(&client, name).await?,
        int_ids(&[1, 2, 3, 4, 5, 6, 7, 8, 9, 10])
    );
    Ok(())
}

/// Every write that changes or replaces a document resets its modification time (and so its
/// expiry); reads do not.
#[tokio::test]
async fn writes_reset_the_modification_time_and_reads_do_not() -> TestResult {
    let (_server, client, t0) = start().await?;
    let name = "rewrites";
    create_ttl_index(&client, name, doc! { "_ts": 1 }, 10).await?;
    let c = coll(&client, name);
    let docs: Vec<Document> = (1..=6).map(|i| doc! { "_id": i, "v": 0 }).collect();
    c.insert_many(docs).await?;
    move_to(&client, t0 + 9000).await?;
    c.replace_one(doc! { "_id": 1 }, doc! { "v": 1 }).await?;
    c.update_one(doc! { "_id": 2 }, doc! { "$set": { "v": 1 } })
        .await?;
    c.find_one_and_update(doc! { "_id": 3 }, doc! { "$inc": { "v": 1 } })
        .await?;
    c.find_one_and_replace(doc! { "_id": 4 }, doc! { "v": 1 })
        .await?;
    c.update_many(doc! { "_id": 5 }, doc! { "$set": { "w": 1 } })
        .await?;
    // 6 is only read, many times.
    for _ in 0..3 {
        assert!(present(&client, name, 6).await?);
        c.count_documents(doc! { "_id": 6 }).await?;
    }
    move_to(&client, t0 + 10_000).await?;
    assert_eq!(ids(&client, name).await?, int_ids(&[1, 2, 3, 4, 5]));
    move_to(&client, t0 + 18_999).await?;
    assert_eq!(ids(&client, name).await?, int_ids(&[1, 2, 3, 4, 5]));
    move_to(&client, t0 + 19_000).await?;
    assert_eq!(ids(&client, name).await?, int_ids(&[]));
    Ok(())
}

/// A replacement is a write that replaces the document even when the new content equals the
/// old: it resets the modification time ("set on insert and on every write that changes or
/// replaces the document", spec 1.1), as a Cosmos DB replace does.
#[tokio::test]
async fn identical_replacement_resets_the_modification_time() -> TestResult {
    let (_server, client, t0) = start().await?;
    let name = "same_replacement";
    create_ttl_index(&client, name, doc! { "_ts": 1 }, 10).await?;
    let c = coll(&client, name);
    c.insert_many([doc! { "_id": 1, "v": 0 }, doc! { "_id": 2, "v": 0 }])
        .await?;
    move_to(&client, t0 + 9000).await?;
    let r = c.replace_one(doc! { "_id": 1 }, doc! { "v": 0 }).await?;
    assert_eq!(r.matched_count, 1);
    c.find_one_and_replace(doc! { "_id": 2 }, doc! { "v": 0 })
        .await?;
    move_to(&client, t0 + 10_000).await?;
    assert_eq!(ids(&client, name).await?, int_ids(&[1, 2]));
    Ok(())
}

/// Changing or removing `ttl` with an update recomputes the expiry from the update's time.
#[tokio::test]
async fn changing_ttl_with_an_update_recomputes_the_expiry() -> TestResult {
    let (_server, client, t0) = start().await?;
    let name = "ttl_updates";
    create_ttl_index(&client, name, doc! { "_ts": 1 }, 10).await?;
    let c = coll(&client, name);
    c.insert_many([
        doc! { "_id": "unset", "ttl": 100 },
        doc! { "_id": "never", "ttl": 100 },
        doc! { "_id": "shorter", "ttl": 100 },
        doc! { "_id": "invalid", "ttl": 100 },
        doc! { "_id": "from_never", "ttl": -1 },
        doc! { "_id": "longer" },
    ])
    .await?;
    let t1 = t0 + 5000;
    move_to(&client, t1).await?;
    c.update_one(doc! { "_id": "unset" }, doc! { "$unset": { "ttl": "" } })
        .await?;
    c.update_one(doc! { "_id": "never" }, doc! { "$set": { "ttl": -1 } })
        .await?;
    c.update_one(doc! { "_id": "shorter" }, doc! { "$set": { "ttl": 2 } })
        .await?;
    c.update_one(
        doc! { "_id": "invalid" },
        doc! { "$set": { "ttl": "soon" } },
    )
    .await?;
    c.update_one(doc! { "_id": "from_never" }, doc! { "$set": { "ttl": 3 } })
        .await?;
    c.update_one(doc! { "_id": "longer" }, doc! { "$set": { "ttl": 60 } })
        .await?;
    // The new values are stored as written.
    assert_eq!(
        c.find_one(doc! { "_id": "invalid" }).await?,
        Some(doc! { "_id": "invalid", "ttl": "soon" })
    );
    expires_exactly_at(&client, name, "shorter", t1 + 2000).await?;
    expires_exactly_at(&client, name, "from_never", t1 + 3000).await?;
    expires_exactly_at(&client, name, "unset", t1 + 10_000).await?;
    assert!(!present(&client, name, "invalid").await?);
    expires_exactly_at(&client, name, "longer", t1 + 60_000).await?;
    move_to(&client, t0 + 100 * YEAR_MS).await?;
    assert_eq!(
        string_ids(&client, name).await?,
        BTreeSet::from(["never".to_owned()])
    );
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// 4. Policy changes never resurrect
// ---------------------------------------------------------------------------------------------

/// The documents of every policy-change test, `{_ts: 1}` with a 10 s default:
/// - `gone` (no ttl), written at t0: expired at t0 + 10 s, before the change;
/// - `hundred` (ttl 100), written at t0;
/// - `never` (ttl -1), written at t0;
/// - `late` (no ttl), written at t0 + 5 s: not expired at the change.
///
/// Returns t0, with the clock at t0 + 10 s.
async fn policy_fixture(client: &Client, name: &str) -> TestResult<i64> {
    create_ttl_index(client, name, doc! { "_ts": 1 }, 10).await?;
    let t0 = now(client).await?;
    let c = coll(client, name);
    c.insert_many([
        doc! { "_id": "gone" },
        doc! { "_id": "hundred", "ttl": 100 },
        doc! { "_id": "never", "ttl": -1 },
    ])
    .await?;
    move_to(client, t0 + 5000).await?;
    c.insert_one(doc! { "_id": "late" }).await?;
    move_to(client, t0 + 10_000).await?;
    assert!(!present(client, name, "gone").await?);
    Ok(t0)
}

fn names(ids: &[&str]) -> BTreeSet<String> {
    ids.iter().map(|s| (*s).to_owned()).collect()
}

#[tokio::test]
async fn coll_mod_longer_never_resurrects() -> TestResult {
    let (_server, client, _) = start().await?;
    let name = "longer";
    let t0 = policy_fixture(&client, name).await?;
    coll_mod(
        &client,
        name,
        doc! { "keyPattern": { "_ts": 1 }, "expireAfterSeconds": 1000 },
    )
    .await?;
    assert_eq!(
        string_ids(&client, name).await?,
        names(&["hundred", "late", "never"])
    );
    assert_eq!(coll(&client, name).count_documents(doc! {}).await?, 3);
    // The document's own ttl still wins; the rest follow the new default from their write.
    expires_exactly_at(&client, name, "hundred", t0 + 100_000).await?;
    expires_exactly_at(&client, name, "late", t0 + 5000 + 1_000_000).await?;
    move_to(&client, t0 + 100 * YEAR_MS).await?;
    assert_eq!(string_ids(&client, name).await?, names(&["never"]));
    Ok(())
}

#[tokio::test]
async fn coll_mod_to_minus_one_never_resurrects() -> TestResult {
    let (_server, client, _) = start().await?;
    let name = "minus_one";
    let t0 = policy_fixture(&client, name).await?;
    coll_mod(
        &client,
        name,
        doc! { "name": "_ts_1", "expireAfterSeconds": -1 },
    )
    .await?;
    assert_eq!(
        string_ids(&client, name).await?,
        names(&["hundred", "late", "never"])
    );
    expires_exactly_at(&client, name, "hundred", t0 + 100_000).await?;
    move_to(&client, t0 + 100 * YEAR_MS).await?;
    assert_eq!(string_ids(&client, name).await?, names(&["late", "never"]));
    Ok(())
}

#[tokio::test]
async fn coll_mod_shorter_expires_from_the_last_write() -> TestResult {
    let (_server, client, _) = start().await?;
    let name = "shorter";
    let t0 = policy_fixture(&client, name).await?;
    // At t0 + 10 s, a 6 s default puts `late` (written at t0 + 5 s) at t0 + 11 s.
    coll_mod(
        &client,
        name,
        doc! { "name": "_ts_1", "expireAfterSeconds": 6 },
    )
    .await?;
    expires_exactly_at(&client, name, "late", t0 + 11_000).await?;
    // Then 1000 s: `late` stays gone.
    coll_mod(
        &client,
        name,
        doc! { "name": "_ts_1", "expireAfterSeconds": 1000 },
    )
    .await?;
    assert_eq!(
        string_ids(&client, name).await?,
        names(&["hundred", "never"])
    );
    Ok(())
}

#[tokio::test]
async fn drop_index_never_resurrects() -> TestResult {
    let (_server, client, _) = start().await?;
    let name = "dropped";
    let t0 = policy_fixture(&client, name).await?;
    coll(&client, name).drop_index("_ts_1").await?;
    assert_eq!(
        string_ids(&client, name).await?,
        names(&["hundred", "late", "never"])
    );
    // Nothing expires any more, `ttl` or not.
    move_to(&client, t0 + 100 * YEAR_MS).await?;
    assert_eq!(
        string_ids(&client, name).await?,
        names(&["hundred", "late", "never"])
    );
    Ok(())
}

#[tokio::test]
async fn drop_and_recreate_index_never_resurrects() -> TestResult {
    let (_server, client, _) = start().await?;
    let name = "recreated";
    let t0 = policy_fixture(&client, name).await?;
    coll(&client, name).drop_index("_ts_1").await?;
    move_to(&client, t0 + 12_000).await?;
    coll(&client, name)
        .insert_one(doc! { "_id": "between" })
        .await?;
    // Re-created with 1000 s: `gone` stays gone; the others expire from their last write.
    move_to(&client, t0 + 14_000).await?;
    create_ttl_index(&client, name, doc! { "_ts": 1 }, 1000).await?;
    assert_eq!(
        string_ids(&client, name).await?,
        names(&["between", "hundred", "late", "never"])
    );
    // Dropped and re-created again with 10 s: `late` (written at t0 + 5 s) is then past its
    // instant and goes at once; `between` (t0 + 12 s) expires at t0 + 22 s.
    coll(&client, name).drop_index("_ts_1").await?;
    move_to(&client, t0 + 16_000).await?;
    create_ttl_index(&client, name, doc! { "_ts": 1 }, 10).await?;
    assert_eq!(
        string_ids(&client, name).await?,
        names(&["between", "hundred", "never"])
    );
    expires_exactly_at(&client, name, "between", t0 + 22_000).await?;
    expires_exactly_at(&client, name, "hundred", t0 + 100_000).await?;
    // And `gone` never came back along the way.
    assert_eq!(string_ids(&client, name).await?, names(&["never"]));
    Ok(())
}

/// Dropping the collection and creating it again starts from nothing.
#[tokio::test]
async fn drop_collection_and_recreate_never_resurrects() -> TestResult {
    let (_server, client, _) = start().await?;
    let name = "dropped_coll";
    let t0 = policy_fixture(&client, name).await?;
    coll(&client, name).drop().await?;
    create_ttl_index(&client, name, doc! { "_ts": 1 }, -1).await?;
    assert!(string_ids(&client, name).await?.is_empty());
    move_to(&client, t0 + 20_000).await?;
    assert!(string_ids(&client, name).await?.is_empty());
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// 5. MongoDB's TTL index on a date field
// ---------------------------------------------------------------------------------------------

/// The field's date plus `expireAfterSeconds`; for an array of dates the earliest; a missing or
/// non-date value never expires; a document already past its instant is invisible from its
/// insert on.
#[tokio::test]
async fn date_ttl_field_values() -> TestResult {
    let (_server, client, t0) = start().await?;
    let name = "dates";
    create_ttl_index(&client, name, doc! { "at": 1 }, 60).await?;
    let c = coll(&client, name);
    let reply = run_command(
        &client,
        DB,
        doc! { "insert": name, "documents": [
            { "_id": "past", "at": date(t0 - 30_000) },
            { "_id": "future", "at": date(t0 + 100_000) },
            { "_id": "array", "at": [date(t0 + 100_000), date(t0 - 50_000), "x", 5] },
            { "_id": "array_one", "at": [date(t0 - 40_000)] },
            { "_id": "array_nested", "at": [[date(t0 - 55_000)], date(t0 + 500_000)] },
            { "_id": "missing" },
            { "_id": "null", "at": Bson::Null },
            { "_id": "string", "at": "2020-01-01T00:00:00Z" },
            { "_id": "number", "at": t0 },
            { "_id": "timestamp", "at": Timestamp { time: 1, increment: 1 } },
            { "_id": "array_no_date", "at": [1, "x"] },
            { "_id": "empty_array", "at": [] },
            { "_id": "subdocument", "at": { "d": date(t0 - 60_000) } },
            { "_id": "expired_at_insert", "at": date(0) },
            { "_id": "pre_epoch", "at": date(-1_000_000) },
        ] },
    )
    .await?;
    assert_eq!(reply.get_i32("n")?, 15, "every insert succeeds: {reply}");
    assert!(write_errors(&reply).is_empty(), "{reply}");
    let never = [
        "missing",
        "null",
        "string",
        "number",
        "timestamp",
        "array_no_date",
        "empty_array",
        "subdocument",
    ];
    let mut live: BTreeSet<String> = names(&never);
    live.extend(names(&[
        "past",
        "future",
        "array",
        "array_one",
        "array_nested",
    ]));
    assert_eq!(string_ids(&client, name).await?, live, "at t0");
    assert!(!present(&client, name, "expired_at_insert").await?);
    let instants = [
        ("array", t0 + 10_000),
        ("array_one", t0 + 20_000),
        ("past", t0 + 30_000),
        ("future", t0 + 160_000),
    ];
    for (id, at) in instants {
        expires_exactly_at(&client, name, id, at).await?;
    }
    // The date inside a nested array is not the field's value (MongoDB does not look into
    // nested arrays): only the top-level date counts.
    expires_exactly_at(&client, name, "array_nested", t0 + 560_000).await?;
    move_to(&client, t0 + 100 * YEAR_MS).await?;
    assert_eq!(string_ids(&client, name).await?, names(&never));
    assert_eq!(c.count_documents(doc! {}).await?, never.len() as u64);
    Ok(())
}

/// `expireAfterSeconds: 0` expires at the date itself; a dotted path works too.
#[tokio::test]
async fn date_ttl_zero_seconds_and_dotted_path() -> TestResult {
    let (_server, client, t0) = start().await?;
    create_ttl_index(&client, "zero", doc! { "at": 1 }, 0).await?;
    create_ttl_index(&client, "dotted", doc! { "meta.at": 1 }, 5).await?;
    coll(&client, "zero")
        .insert_one(doc! { "_id": 1, "at": date(t0 + 5000) })
        .await?;
    coll(&client, "dotted")
        .insert_many([
            doc! { "_id": 1, "meta": { "at": date(t0) } },
            doc! { "_id": 2, "meta": [{ "at": date(t0 + 1000) }, { "at": date(t0 + 9000) }] },
            doc! { "_id": 3, "at": date(t0) },
        ])
        .await?;
    expires_exactly_at(&client, "zero", 1, t0 + 5000).await?;
    // Document 1 of `dotted` expires at t0 + 5 s too.
    assert!(!present(&client, "dotted", 1).await?);
    expires_exactly_at(&client, "dotted", 2, t0 + 6000).await?;
    move_to(&client, t0 + 100 * YEAR_MS).await?;
    assert_eq!(ids(&client, "dotted").await?, int_ids(&[3]));
    Ok(())
}

/// A partial TTL index only expires documents its filter matches, judged at each write.
#[tokio::test]
async fn partial_ttl_index_applies_to_matching_documents_only() -> TestResult {
    let (_server, client, t0) = start().await?;
    let name = "partial";
    create_index(
        &client,
        name,
        doc! {
            "key": { "at": 1 },
            "expireAfterSeconds": 0,
            "partialFilterExpression": { "kind": "temp" },
        },
    )
    .await?;
    let c = coll(&client, name);
    c.insert_many([
        doc! { "_id": "temp", "kind": "temp", "at": date(t0 + 1000) },
        doc! { "_id": "keep", "kind": "keep", "at": date(t0 + 1000) },
        doc! { "_id": "temp_no_date", "kind": "temp" },
        doc! { "_id": "becomes_temp", "kind": "keep", "at": date(t0 + 1000) },
        doc! { "_id": "stops_being_temp", "kind": "temp", "at": date(t0 + 1000) },
    ])
    .await?;
    move_to(&client, t0 + 500).await?;
    c.update_one(
        doc! { "_id": "stops_being_temp" },
        doc! { "$set": { "kind": "keep" } },
    )
    .await?;
    expires_exactly_at(&client, name, "temp", t0 + 1000).await?;
    // Made to match after its date: it is gone as soon as the update lands.
    move_to(&client, t0 + 2000).await?;
    let r = c
        .update_one(
            doc! { "_id": "becomes_temp" },
            doc! { "$set": { "kind": "temp" } },
        )
        .await?;
    assert_eq!(r.modified_count, 1);
    assert!(!present(&client, name, "becomes_temp").await?);
    move_to(&client, t0 + 100 * YEAR_MS).await?;
    assert_eq!(
        string_ids(&client, name).await?,
        names(&["keep", "stops_being_temp", "temp_no_date"])
    );
    Ok(())
}

/// With both models on one collection, a document expires at the earliest instant any rule
/// gives it: a `ttl: -1` does not stop a date rule.
#[tokio::test]
async fn cosmos_and_date_rules_take_the_earliest_instant() -> TestResult {
    let (_server, client, t0) = start().await?;
    let name = "both";
    create_ttl_index(&client, name, doc! { "_ts": 1 }, 1000).await?;
    create_ttl_index(&client, name, doc! { "at": 1 }, 0).await?;
    coll(&client, name)
        .insert_many([
            doc! { "_id": "date_first", "at": date(t0 + 5000) },
            doc! { "_id": "never_but_dated", "ttl": -1, "at": date(t0 + 6000) },
            doc! { "_id": "ttl_first", "ttl": 20, "at": date(t0 + 60_000) },
            doc! { "_id": "default_first", "at": date(t0 + 2_000_000) },
            doc! { "_id": "never", "ttl": -1 },
        ])
        .await?;
    expires_exactly_at(&client, name, "date_first", t0 + 5000).await?;
    expires_exactly_at(&client, name, "never_but_dated", t0 + 6000).await?;
    expires_exactly_at(&client, name, "ttl_first", t0 + 20_000).await?;
    expires_exactly_at(&client, name, "default_first", t0 + 1_000_000).await?;
    move_to(&client, t0 + 100 * YEAR_MS).await?;
    assert_eq!(string_ids(&client, name).await?, names(&["never"]));
    Ok(())
}

/// `collMod` changes a date index's seconds (what expired stays gone when it grows again);
/// updating the date moves the expiry; `dropIndexes` stops it.
#[tokio::test]
async fn date_ttl_coll_mod_update_and_drop() -> TestResult {
    let (_server, client, t0) = start().await?;
    let name = "date_policy";
    create_ttl_index(&client, name, doc! { "at": 1 }, 3600).await?;
    let c = coll(&client, name);
    c.insert_many([
        doc! { "_id": "now", "at": date(t0) },
        doc! { "_id": "old", "at": date(t0 - 20_000) },
        doc! { "_id": "moved", "at": date(t0) },
        doc! { "_id": "unset", "at": date(t0) },
    ])
    .await?;
    move_to(&client, t0 + 5000).await?;
    let reply = coll_mod(
        &client,
        name,
        doc! { "keyPattern": { "at": 1 }, "expireAfterSeconds": 10 },
    )
    .await?;
    assert_eq!(
        reply,
        doc! { "expireAfterSeconds_old": 3600, "expireAfterSeconds_new": 10, "ok": 1.0 }
    );
    // `old` is past t0 - 20 s + 10 s: gone at once.
    assert!(!present(&client, name, "old").await?);
    c.update_one(
        doc! { "_id": "moved" },
        doc! { "$set": { "at": date(t0 + 50_000) } },
    )
    .await?;
    c.update_one(doc! { "_id": "unset" }, doc! { "$unset": { "at": "" } })
        .await?;
    expires_exactly_at(&client, name, "now", t0 + 10_000).await?;
    coll_mod(
        &client,
        name,
        doc! { "name": "at_1", "expireAfterSeconds": 3600 },
    )
    .await?;
    assert!(!present(&client, name, "old").await?, "old came back");
    assert!(!present(&client, name, "now").await?, "now came back");
    expires_exactly_at(&client, name, "moved", t0 + 50_000 + 3_600_000).await?;
    coll(&client, name).drop_index("at_1").await?;
    c.insert_one(doc! { "_id": "after_drop", "at": date(0) })
        .await?;
    move_to(&client, t0 + 100 * YEAR_MS).await?;
    assert_eq!(
        string_ids(&client, name).await?,
        names(&["after_drop", "unset"])
    );
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// 6. The background purge, its counters, and restarts
// ---------------------------------------------------------------------------------------------

/// The purge removes what expired, in bounded batches, counting `metrics.ttl.deletedDocuments`
/// (exactly the expired documents: not those rewritten in time) and `metrics.ttl.passes`.
#[tokio::test]
async fn purge_counts_expired_documents_in_server_status() -> TestResult {
    let (_server, client, t0) = start().await?;
    let (deleted0, passes0) = ttl_metrics(&client).await?;
    create_ttl_index(&client, "bulk", doc! { "_ts": 1 }, 10).await?;
    create_ttl_index(&client, "few", doc! { "_ts": 1 }, 10).await?;
    create_ttl_index(&client, "dated", doc! { "at": 1 }, 0).await?;
    // More than one purge batch (1000) in one collection.
    let bulk: Vec<Document> = (0..2500).map(|i| doc! { "_id": i }).collect();
    coll(&client, "bulk").insert_many(bulk).await?;
    coll(&client, "few")
        .insert_many([
            doc! { "_id": 1 },
            doc! { "_id": 2 },
            doc! { "_id": 3, "ttl": -1 },
            doc! { "_id": 4, "ttl": 30 },
            doc! { "_id": 5 },
        ])
        .await?;
    coll(&client, "dated")
        .insert_many([
            doc! { "_id": 1, "at": date(t0 + 10_000) },
            doc! { "_id": 2, "at": date(t0 + 50_000) },
        ])
        .await?;
    // 5 is rewritten at t0 + 5 s: it now expires at t0 + 15 s, and its old instant is stale.
    move_to(&client, t0 + 5000).await?;
    coll(&client, "few")
        .update_one(doc! { "_id": 5 }, doc! { "$set": { "x": 1 } })
        .await?;
    move_to(&client, t0 + 10_000).await?;
    // 2500 + 2 (few: 1, 2) + 1 (dated: 1)
    let (deleted, passes) = settle_purge(&client, deleted0 + 2503).await?;
    assert_eq!(deleted, deleted0 + 2503, "exactly the expired documents");
    assert!(passes > passes0, "passes {passes0} → {passes}");
    assert_eq!(coll(&client, "bulk").count_documents(doc! {}).await?, 0);
    assert_eq!(ids(&client, "few").await?, int_ids(&[3, 4, 5]));
    // Moving on: 5 at t0 + 15 s, 4 at t0 + 30 s, dated 2 at t0 + 50 s.
    move_to(&client, t0 + 15_000).await?;
    let (deleted, _) = settle_purge(&client, deleted0 + 2504).await?;
    assert_eq!(deleted, deleted0 + 2504);
    move_to(&client, t0 + 50_000).await?;
    let (deleted, passes_after) = settle_purge(&client, deleted0 + 2506).await?;
    assert_eq!(deleted, deleted0 + 2506);
    assert!(passes_after > passes);
    assert_eq!(ids(&client, "few").await?, int_ids(&[3]));
    assert_eq!(ids(&client, "dated").await?, int_ids(&[]));
    // The purged _ids are free again, like any expired one.
    coll(&client, "bulk").insert_one(doc! { "_id": 0 }).await?;
    Ok(())
}

/// A durable server keeps expiry across a graceful restart: what the purge removed stays gone,
/// what had not expired expires on time after the restart (the test clock itself does not
/// survive a restart: after it, the clock is frozen again from real time and moved to the
/// instants that matter).
#[tokio::test]
async fn restart_keeps_expiry() -> TestResult {
    let dir = tempfile::tempdir()?;
    let server = TestServer::start_durable(dir.path(), |c| c.enable_test_commands = true).await?;
    let client = server.client().await?;
    create_ttl_index(&client, "kept", doc! { "_ts": 1 }, 3600).await?;
    create_ttl_index(&client, "dated", doc! { "at": 1 }, 60).await?;
    let t0 = now(&client).await?;
    coll(&client, "kept")
        .insert_many([
            doc! { "_id": "soon", "ttl": 10 },
            doc! { "_id": "soon_too", "ttl": 10 },
            doc! { "_id": "hour" },
            doc! { "_id": "two_hours", "ttl": 7200 },
            doc! { "_id": "never", "ttl": -1 },
        ])
        .await?;
    coll(&client, "dated")
        .insert_many([
            doc! { "_id": "early", "at": date(t0 - 30_000) },
            doc! { "_id": "late", "at": date(t0 + 3_600_000) },
        ])
        .await?;
    move_to(&client, t0 + 30_000).await?;
    // Purged before the stop (an unpurged document expired only on the test clock would be
    // live again on the real clock after the restart).
    let (deleted, _) = settle_purge(&client, 3).await?;
    assert_eq!(deleted, 3);
    drop(client);
    server.stop().await?;

    let server = TestServer::start_durable(dir.path(), |c| c.enable_test_commands = true).await?;
    let client = server.client().await?;
    assert_eq!(
        string_ids(&client, "kept").await?,
        names(&["hour", "never", "two_hours"])
    );
    assert_eq!(string_ids(&client, "dated").await?, names(&["late"]));
    assert_eq!(
        list_indexes(&client, "kept").await?[1],
        doc! { "v": 2, "key": { "_ts": 1 }, "name": "_ts_1", "expireAfterSeconds": 3600 }
    );
    let t1 = now(&client).await?;
    assert!(t1 < t0 + 3_599_999, "the restart took an hour?");
    // A write after the restart follows the policy from its own write.
    coll(&client, "kept")
        .insert_one(doc! { "_id": "after_restart", "ttl": 5 })
        .await?;
    expires_exactly_at(&client, "kept", "after_restart", t1 + 5000).await?;
    expires_exactly_at(&client, "kept", "hour", t0 + 3_600_000).await?;
    expires_exactly_at(&client, "dated", "late", t0 + 3_660_000).await?;
    expires_exactly_at(&client, "kept", "two_hours", t0 + 7_200_000).await?;
    move_to(&client, t0 + 100 * YEAR_MS).await?;
    assert_eq!(string_ids(&client, "kept").await?, names(&["never"]));
    // The new server's purge removes them and counts them.
    let (deleted, _) = settle_purge(&client, 4).await?;
    assert_eq!(deleted, 4);
    drop(client);
    server.stop().await?;

    // And once more: the purged ones are still gone.
    let server = TestServer::start_durable(dir.path(), |c| c.enable_test_commands = true).await?;
    let client = server.client().await?;
    assert_eq!(string_ids(&client, "kept").await?, names(&["never"]));
    assert!(string_ids(&client, "dated").await?.is_empty());
    drop(client);
    server.stop().await?;
    Ok(())
}

/// `ebbAdvanceClock` is refused (as an unknown command) unless test commands are enabled.
#[tokio::test]
async fn test_clock_needs_test_commands() -> TestResult {
    let server = TestServer::start().await?;
    let client = server.client().await?;
    let err = run_command_err(
        &client,
        "admin",
        doc! { "ebbAdvanceClock": 1000, "freeze": true },
    )
    .await?;
    assert_command_error(&err, 59, "CommandNotFound");
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// 7. Real time
// ---------------------------------------------------------------------------------------------

/// The wall-clock path, without the test clock: a document with a 1 s TTL is returned until
/// shortly before its instant and is gone within 50 ms after it. Reads that completed before
/// `insert start + 1000 ms - 20 ms` must see it; reads that started after
/// `insert acknowledged + 1000 ms + 50 ms` must not. A slow machine only delays reads, which
/// cannot break either rule; the test takes about 1.3 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn realtime_one_second_ttl() -> TestResult {
    let server = TestServer::start().await?;
    let client = server.client().await?;
    let name = "realtime";
    create_ttl_index(&client, name, doc! { "_ts": 1 }, 1).await?;
    let c = coll(&client, name);
    // A first round trip, so that the connection exists before the clock starts.
    c.find_one(doc! {}).await?;
    let insert_start = Instant::now();
    c.insert_one(doc! { "_id": 1 }).await?;
    let insert_end = Instant::now();
    let must_be_present_until = insert_start + Duration::from_millis(1000 - 20);
    let must_be_gone_from = insert_end + Duration::from_millis(1000 + 50);
    let stop_after = must_be_gone_from + Duration::from_millis(200);
    let give_up = insert_start + Duration::from_secs(3);
    let mut reads: Vec<(Duration, Duration, bool)> = Vec::new();
    loop {
        let start = Instant::now();
        let present = c.find_one(doc! { "_id": 1 }).await?.is_some();
        let end = Instant::now();
        reads.push((start - insert_start, end - insert_start, present));
        if start > stop_after || end > give_up {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let shown = |(s, e, p): &(Duration, Duration, bool)| {
        format!("[{}..{} ms: {p}]", s.as_millis(), e.as_millis())
    };
    for read in &reads {
        let (start, end, present) = *read;
        if insert_start + end < must_be_present_until {
            assert!(present, "gone too early: {}", shown(read));
        }
        if insert_start + start > must_be_gone_from {
            assert!(!present, "still there after the instant: {}", shown(read));
        }
    }
    assert!(
        reads
            .iter()
            .any(|(start, _, _)| insert_start + *start > must_be_gone_from),
        "no read after the instant within {:?} (insert took {:?})",
        give_up - insert_start,
        insert_end - insert_start
    );
    Ok(())
}

/// A document given the same past date again, after the purge took the first one (on the
/// durable store the purge leaves the record for a compaction to drop), gets an expiry entry
/// of its own: the purge takes and counts it once more, and nothing is left to validate.
#[tokio::test]
async fn a_past_date_written_again_is_purged_again() -> TestResult {
    let dir = tempfile::tempdir()?;
    let server = TestServer::start_durable(dir.path(), |c| c.enable_test_commands = true).await?;
    let client = server.client().await?;
    create_ttl_index(&client, "again", doc! { "at": 1 }, 60).await?;
    let t0 = now(&client).await?;
    let past = doc! { "_id": 1, "at": date(t0 - 120_000) };
    coll(&client, "again").insert_one(past.clone()).await?;
    let (deleted, _) = settle_purge(&client, 1).await?;
    assert_eq!(deleted, 1);
    coll(&client, "again").insert_one(past).await?;
    // An entry below the last one the purge removed is found by its periodic full pass
    // (`FULL_PASS_EVERY` passes): wake it until then.
    let deadline = Instant::now() + Duration::from_secs(30);
    while ttl_metrics(&client).await?.0 < 2 {
        assert!(
            Instant::now() < deadline,
            "the second write was never purged"
        );
        now(&client).await?;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (deleted, _) = settle_purge(&client, 2).await?;
    assert_eq!(
        deleted, 2,
        "the second write's expiry was purged and counted once"
    );
    assert_eq!(coll(&client, "again").count_documents(doc! {}).await?, 0);
    let reply = run_command(&client, DB, doc! { "validate": "again" }).await?;
    assert!(reply.get_bool("valid")?, "{reply}");
    assert!(reply.get_array("warnings")?.is_empty(), "{reply}");
    drop(client);
    server.stop().await?;
    Ok(())
}
