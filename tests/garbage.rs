//! Storage that forgets (issue #21), on a running server: an expiry moved later (and earlier)
//! is kept through compactions and the purge, and the `compact` command answers as it should.
//!
//! Like `garbage_crash.rs`, the tests run the real `ebb` binary ([`common::process`]) on a data
//! directory of their own, and restart it on that directory:
//!
//! 1. `moved_expiry_is_kept_through_compactions`: expiry instants moved later (and earlier) by
//!    updates and `collMod`, on the server's test clock (`--enable-test-commands`); the crash
//!    tests about expiry use short real TTLs instead, since the test clock does not survive a
//!    restart;
//! 2. `compact_command_answers`: the command's replies (`bytesFreed`, `dryRun`'s
//!    `estimatedBytesFreed`), what it removes as `collStats` and `serverStatus` count it, and
//!    its errors;
//! 3. `scans_over_deleted_documents_make_a_compaction_due`: garbage too small for the
//!    compactor's share rule is compacted once scans have paid for it.

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use common::garbage::{
    DB, SETTLE_DEADLINE, Server, THIN, assert_no_errors, big_doc, check_same, command, compact,
    count, create_flush_collection, create_index, docs_of, expired_pending, flush, insert, raw,
    storage_counter, storage_status, ttl_metrics, validate,
};
use common::{TestResult, assert_command_error, integer};
use mongodb::Client;
use mongodb::bson::{Bson, DateTime, Document, RawDocumentBuf, doc};

// ---------------------------------------------------------------------------------------------
// 1. An expiry moved later before it came is kept through compactions
// ---------------------------------------------------------------------------------------------

/// The database of the moved-expiry test.
const MOVED_DB: &str = "garbage_moved";

/// Collections of the moved-expiry test, each with its TTL index: `(name, key,
/// expireAfterSeconds)`.
const MOVED_COLLECTIONS: [(&str, &str, i32); 8] = [
    // Cosmos default 10 s; `x` is updated at +5 s (expires at +15 s), `y` is not (+10 s).
    ("updated", "_ts", 10),
    // Cosmos default 10 s raised to 100 s at +5 s: `p` expires at +100 s; `q` has its own
    // `ttl: 3` and expired before the change.
    ("raised", "_ts", 10),
    // Cosmos default -1; `t` and `u` have `ttl: 10`, `t`'s is set to 30 at +5 s (+35 s).
    ("own_ttl", "_ts", -1),
    // MongoDB's date index, 10 s: `m`'s `lastSeen` moves from t0 to t0 + 5 s (+15 s); `n`'s
    // stays (+10 s).
    ("dated", "lastSeen", 10),
    // Cosmos default 10 s raised to 100 s at +12 s, after `r` expired: it stays gone.
    ("raised_late", "_ts", 10),
    // The same with MongoDB's date index: `w` expired at +10 s and stays gone.
    ("dated_raised_late", "lastSeen", 10),
    // Moved earlier: `z`'s `ttl: 100` is set to 2 at +5 s (+7 s). Its first version, with the
    // later instant, lies in an older table: it must not come back when the newer one goes.
    ("shortened", "_ts", -1),
    // Cosmos default 100 s lowered to 6 s at +5 s: `l` goes at +6 s, its first version (with
    // +100 s) in an older table.
    ("lowered", "_ts", 100),
];

/// How far ahead of the real clock the test's instants begin (`t0`): the kill puts the server
/// back on the real clock, which must then still be before `t0 + 12 s`, also on a loaded
/// machine that took far longer than 12 s to get there.
const HEADROOM_MS: i64 = 60_000;

/// The test clock: freezes it and moves it forward by `ms`; returns its instant.
async fn advance(client: &Client, ms: i64) -> TestResult<i64> {
    Ok(common::advance_clock(client, ms).await?.timestamp_millis())
}

/// Moves the frozen clock to `instant`, which must not have passed.
async fn move_to(client: &Client, instant: i64) -> TestResult {
    let now = advance(client, 0).await?;
    assert!(
        now <= instant,
        "the clock is at {now}, past {instant}: the machine stalled for seconds?"
    );
    assert_eq!(advance(client, instant - now).await?, instant);
    Ok(())
}

/// `collMod` of the TTL index on `key` of `MOVED_DB.name` to `seconds`.
async fn coll_mod(client: &Client, name: &str, key: &str, seconds: i32) -> TestResult<Document> {
    let index = doc! { "keyPattern": { key: 1 }, "expireAfterSeconds": seconds };
    command(client, MOVED_DB, doc! { "collMod": name, "index": index }).await
}

/// `compact` of every collection of `db`.
async fn compact_all(client: &Client, db: &str, names: &[&str]) -> TestResult {
    for name in names {
        compact(client, db, name).await?;
    }
    Ok(())
}

/// Waits for two more purge passes after waking the purge (moving the frozen clock by
/// nothing), so that everything due by now has been removed.
async fn settle_purge(client: &Client) -> TestResult {
    let began = Instant::now();
    let (_, passes) = ttl_metrics(client).await?;
    loop {
        advance(client, 0).await?;
        tokio::time::sleep(Duration::from_millis(10)).await;
        if ttl_metrics(client).await?.1 >= passes + 2 {
            return Ok(());
        }
        if began.elapsed() > SETTLE_DEADLINE {
            return Err(format!("no two purge passes within {SETTLE_DEADLINE:?}").into());
        }
    }
}

/// Every collection of `MOVED_DB` holds exactly `expected[name]` (absent: nothing), in `_id`
/// order, by a full scan and by `count`; and with `purged`, `validate` finds nothing expired
/// left in storage.
async fn check_moved(
    client: &Client,
    expected: &BTreeMap<&str, Vec<Document>>,
    purged: bool,
    when: &str,
) -> TestResult {
    for (name, _, _) in MOVED_COLLECTIONS {
        let want = expected.get(name).cloned().unwrap_or_default();
        let mut cursor = client
            .database(MOVED_DB)
            .collection::<Document>(name)
            .find(doc! {})
            .sort(doc! { "_id": 1 })
            .await?;
        let mut got = Vec::new();
        while cursor.advance().await? {
            got.push(cursor.deserialize_current()?);
        }
        assert_eq!(got, want, "{when}: {name}");
        assert_eq!(
            count(client, MOVED_DB, name).await?,
            i64::try_from(want.len())?,
            "{when}: count of {name}"
        );
        let reply = validate(client, MOVED_DB, name, i64::try_from(want.len())?, &[]).await?;
        if purged {
            assert!(
                !expired_pending(&reply),
                "{when}: {name}: expired documents left in storage: {reply}"
            );
        }
    }
    Ok(())
}

/// Documents whose expiry was moved later before it came — by an update (Cosmos: the write
/// resets the modification time; MongoDB: a later `lastSeen`), by raising the collection's
/// default with `collMod`, by an update of the document's own `ttl` — are kept once their first
/// instant has passed, through compactions, the purge and a kill, and go at their new instant;
/// documents that had expired stay gone when `collMod` raises the TTL afterwards
/// (`ttl.md` §3); documents whose expiry was moved earlier go at their new instant, and their
/// older versions (with later instants, in older tables) never come back. Runs on the test
/// clock; a kill and the final restart put the server back on the real clock, which is then
/// before every instant: had any purged document's bytes (any version of them) come back, it
/// would show.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn moved_expiry_is_kept_through_compactions() -> TestResult {
    const TEST: &str = "moved_expiry_is_kept_through_compactions";
    let began = Instant::now();
    let names: Vec<&str> = MOVED_COLLECTIONS.iter().map(|c| c.0).collect();
    let mut server = Server::start(true).await?;
    let client = server.client();
    create_flush_collection(&client).await?;
    for (name, key, seconds) in MOVED_COLLECTIONS {
        create_index(
            &client,
            MOVED_DB,
            name,
            doc! { key: 1 },
            Some(doc! { "expireAfterSeconds": seconds }),
        )
        .await?;
    }
    let coll = |name: &str| client.database(MOVED_DB).collection::<Document>(name);
    let t0 = advance(&client, HEADROOM_MS).await?;
    let at = |ms: i64| DateTime::from_millis(t0 + ms);
    coll("updated")
        .insert_many([doc! { "_id": "x", "v": 1 }, doc! { "_id": "y", "v": 1 }])
        .await?;
    coll("raised")
        .insert_many([doc! { "_id": "p" }, doc! { "_id": "q", "ttl": 3 }])
        .await?;
    coll("own_ttl")
        .insert_many([
            doc! { "_id": "t", "ttl": 10 },
            doc! { "_id": "u", "ttl": 10 },
        ])
        .await?;
    coll("dated")
        .insert_many([
            doc! { "_id": "m", "lastSeen": at(0) },
            doc! { "_id": "n", "lastSeen": at(0) },
        ])
        .await?;
    coll("raised_late").insert_one(doc! { "_id": "r" }).await?;
    coll("dated_raised_late")
        .insert_one(doc! { "_id": "w", "lastSeen": at(0) })
        .await?;
    coll("shortened")
        .insert_one(doc! { "_id": "z", "ttl": 100 })
        .await?;
    coll("lowered").insert_one(doc! { "_id": "l" }).await?;
    flush(&client).await?;

    // +5 s: the moves.
    move_to(&client, t0 + 5000).await?;
    coll("updated")
        .update_one(doc! { "_id": "x" }, doc! { "$set": { "v": 2 } })
        .await?;
    let reply = coll_mod(&client, "raised", "_ts", 100).await?;
    assert_eq!(
        integer(reply.get("expireAfterSeconds_new")),
        Some(100),
        "{reply}"
    );
    coll("own_ttl")
        .update_one(doc! { "_id": "t" }, doc! { "$set": { "ttl": 30 } })
        .await?;
    coll("dated")
        .update_one(
            doc! { "_id": "m" },
            doc! { "$set": { "lastSeen": at(5000) } },
        )
        .await?;
    coll("shortened")
        .update_one(doc! { "_id": "z" }, doc! { "$set": { "ttl": 2 } })
        .await?;
    coll_mod(&client, "lowered", "_ts", 6).await?;
    let before = BTreeMap::from([
        (
            "updated",
            vec![doc! { "_id": "x", "v": 2 }, doc! { "_id": "y", "v": 1 }],
        ),
        ("raised", vec![doc! { "_id": "p" }]),
        (
            "own_ttl",
            vec![
                doc! { "_id": "t", "ttl": 30 },
                doc! { "_id": "u", "ttl": 10 },
            ],
        ),
        (
            "dated",
            vec![
                doc! { "_id": "m", "lastSeen": at(5000) },
                doc! { "_id": "n", "lastSeen": at(0) },
            ],
        ),
        ("raised_late", vec![doc! { "_id": "r" }]),
        (
            "dated_raised_late",
            vec![doc! { "_id": "w", "lastSeen": at(0) }],
        ),
        ("shortened", vec![doc! { "_id": "z", "ttl": 2 }]),
        ("lowered", vec![doc! { "_id": "l" }]),
    ]);
    check_moved(&client, &before, false, "+5 s").await?;

    // +12 s: every first instant has passed.
    move_to(&client, t0 + 12_000).await?;
    let kept = BTreeMap::from([
        ("updated", vec![doc! { "_id": "x", "v": 2 }]),
        ("raised", vec![doc! { "_id": "p" }]),
        ("own_ttl", vec![doc! { "_id": "t", "ttl": 30 }]),
        ("dated", vec![doc! { "_id": "m", "lastSeen": at(5000) }]),
    ]);
    check_moved(&client, &kept, false, "+12 s").await?;
    // Raising the TTL after the instant brings nothing back.
    for (name, key) in [("raised_late", "_ts"), ("dated_raised_late", "lastSeen")] {
        coll_mod(&client, name, key, 100).await?;
    }
    check_moved(&client, &kept, false, "+12 s, raised late").await?;
    compact_all(&client, MOVED_DB, &names).await?;
    settle_purge(&client).await?;
    flush(&client).await?;
    compact_all(&client, MOVED_DB, &names).await?;
    settle_purge(&client).await?;
    check_moved(&client, &kept, true, "+12 s, compacted and purged").await?;

    // A kill: the restarted server is on the real clock (before +12 s); moved to +12 s again.
    let client = server.kill_and_restart().await?;
    let real = advance(&client, 0).await?;
    println!(
        "{TEST}: restarted at t0 - {} ms on the real clock",
        t0 - real
    );
    check_moved(&client, &kept, true, "after the kill, on the real clock").await?;
    move_to(&client, t0 + 12_000).await?;
    check_moved(&client, &kept, true, "after the kill, +12 s").await?;

    // +16 s: `x` and `m` have reached their moved instants.
    move_to(&client, t0 + 16_000).await?;
    let mut kept = kept;
    kept.remove("updated");
    kept.remove("dated");
    check_moved(&client, &kept, false, "+16 s").await?;
    compact_all(&client, MOVED_DB, &names).await?;
    settle_purge(&client).await?;
    check_moved(&client, &kept, true, "+16 s, compacted and purged").await?;

    // +36 s: `t`; +101 s: `p`.
    move_to(&client, t0 + 36_000).await?;
    kept.remove("own_ttl");
    check_moved(&client, &kept, false, "+36 s").await?;
    move_to(&client, t0 + 101_000).await?;
    kept.clear();
    check_moved(&client, &kept, false, "+101 s").await?;
    flush(&client).await?;
    compact_all(&client, MOVED_DB, &names).await?;
    settle_purge(&client).await?;
    check_moved(&client, &kept, true, "+101 s, compacted and purged").await?;

    // On the real clock again, every document is before its first instant: only bytes that
    // are really gone keep it from showing.
    let client = server.terminate_and_restart().await?;
    check_moved(&client, &kept, true, "restarted on the real clock").await?;
    let errors = server.finish().await?;
    println!("{TEST}: done in {:?}", began.elapsed());
    assert_no_errors(TEST, &errors);
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// 2. The `compact` command
// ---------------------------------------------------------------------------------------------

/// Bytes of the files under `path`.
fn dir_size(path: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(path) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| match e.metadata() {
            Ok(m) if m.is_dir() => dir_size(&e.path()),
            Ok(m) => m.len(),
            Err(_) => 0,
        })
        .sum()
}

/// Documents of [`compact_command_answers`]'s collection: with 90% of them deleted, the
/// tombstones stay below the 20,000 a keyspace needs before the server's own compactor takes
/// it on (`MIN_DEBT`), so that only the test's commands compact.
const COMPACTED_DOCS: i64 = 10_000;

/// `collStats`' `ebb.garbage.tombstones` of `DB.name`: the deletes of its documents and index
/// entries since its keyspaces were last compacted.
async fn tombstones(client: &Client, name: &str) -> TestResult<i64> {
    let reply = command(client, DB, doc! { "collStats": name }).await?;
    match reply
        .get_document("ebb")?
        .get_document("garbage")?
        .get("tombstones")
    {
        Some(Bson::Int64(n)) => Ok(*n),
        other => Err(format!("collStats: ebb.garbage.tombstones {other:?} in {reply}").into()),
    }
}

/// `serverStatus().ebb.storage.compactions`: the compactions the server has run.
async fn compactions(client: &Client) -> TestResult<i64> {
    storage_counter(&storage_status(client).await?, "compactions")
}

/// `{compact: name, dryRun: true}`'s `estimatedBytesFreed`, checked to be an int64 ≥ 0 in a
/// reply of it and `ok: 1` only.
async fn compact_dry_run(client: &Client, name: &str) -> TestResult<i64> {
    let reply = command(client, DB, doc! { "compact": name, "dryRun": true }).await?;
    assert_eq!(
        common::number(reply.get("ok")),
        Some(1.0),
        "dryRun: {reply}"
    );
    assert_eq!(reply.len(), 2, "dryRun: {reply}");
    match reply.get("estimatedBytesFreed") {
        Some(Bson::Int64(n)) if *n >= 0 => Ok(*n),
        other => Err(format!("dryRun: estimatedBytesFreed {other:?} in {reply}").into()),
    }
}

/// `compact`'s replies: `{bytesFreed: <int64 ≥ 0>, ok: 1}` on a collection, more than nothing
/// freed (or a smaller data directory) after a mass delete, the documents intact, and
/// `collStats`' `ebb.garbage.tombstones` from above 0 down to 0; with `dryRun: true`,
/// `{estimatedBytesFreed: <int64 ≥ 0>, ok: 1}` (above 0 with garbage to remove) and nothing
/// compacted (`serverStatus().ebb.storage.compactions` and the tombstones unchanged); errors as
/// mongod gives them: `NamespaceNotFound` (26) for a missing collection or database,
/// `InvalidNamespace` (73) for a `system.*` collection and for a name that is not a string (as
/// `count` and every command naming a collection), `IDLUnknownField` (40415) for an unknown
/// field.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compact_command_answers() -> TestResult {
    const TEST: &str = "compact_command_answers";
    let server = Server::start(false).await?;
    let client = server.client();
    create_flush_collection(&client).await?;
    create_index(&client, DB, THIN, doc! { "k": 1 }, None).await?;
    // On an empty collection: nothing to free, but successes of the same shape.
    compact_dry_run(&client, THIN).await?;
    compact(&client, DB, THIN).await?;
    let all: Vec<RawDocumentBuf> = (0..COMPACTED_DOCS).map(|i| big_doc(i, None)).collect();
    insert(&client, DB, THIN, &all).await?;
    compact(&client, DB, THIN).await?;
    flush(&client).await?;
    let deleted = raw(&client, DB, THIN)
        .delete_many(doc! { "g": { "$ne": 0 } })
        .await?
        .deleted_count;
    flush(&client).await?;
    let deleted = i64::try_from(deleted)?;
    let garbage = tombstones(&client, THIN).await?;
    assert!(
        garbage >= deleted,
        "collStats counts {garbage} tombstones after {deleted} documents were deleted"
    );

    // A dry run: an estimate, and nothing compacted.
    let compacted = compactions(&client).await?;
    let estimated = compact_dry_run(&client, THIN).await?;
    assert!(
        estimated > 0,
        "dryRun estimates nothing to free after the deletes"
    );
    assert_eq!(compactions(&client).await?, compacted, "dryRun compacted");
    assert_eq!(
        tombstones(&client, THIN).await?,
        garbage,
        "dryRun removed tombstones"
    );

    let before = dir_size(server.dir());
    let freed = compact(&client, DB, THIN).await?;
    let after = dir_size(server.dir());
    println!(
        "{TEST}: {garbage} tombstones; estimatedBytesFreed {estimated}, bytesFreed {freed}; \
         data directory {before} → {after} bytes"
    );
    assert!(
        freed > 0 || after < before,
        "compact after deleting 90% freed nothing: bytesFreed {freed}, directory {before} → \
         {after} bytes"
    );
    assert!(
        compactions(&client).await? > compacted,
        "compact counted no compaction"
    );
    assert_eq!(
        tombstones(&client, THIN).await?,
        0,
        "tombstones right after compact"
    );
    let live: Vec<RawDocumentBuf> = (0..COMPACTED_DOCS)
        .filter(|i| i % 10 == 0)
        .map(|i| big_doc(i, None))
        .collect();
    check_same("after compact", &live, &docs_of(&client, DB, THIN).await?);
    validate(&client, DB, THIN, i64::try_from(live.len())?, &["k_1"]).await?;

    for body in [
        doc! { "compact": "missing" },
        doc! { "compact": "missing", "dryRun": true },
    ] {
        let err = common::run_command_err(&client, DB, body).await?;
        assert_command_error(&err, 26, "NamespaceNotFound");
    }
    let err = common::run_command_err(&client, "garbage_missing", doc! { "compact": THIN }).await?;
    assert_command_error(&err, 26, "NamespaceNotFound");
    let err = common::run_command_err(&client, DB, doc! { "compact": "system.views" }).await?;
    assert_command_error(&err, 73, "InvalidNamespace");
    // As `{count: 1}`: "collection name has invalid type int".
    let err = common::run_command_err(&client, DB, doc! { "compact": 1 }).await?;
    assert_command_error(&err, 73, "InvalidNamespace");
    let err = common::run_command_err(&client, DB, doc! { "count": 1 }).await?;
    assert_command_error(&err, 73, "InvalidNamespace");
    let err = common::run_command_err(&client, DB, doc! { "compact": THIN, "bogus": 1 }).await?;
    assert_command_error(&err, 40415, "IDLUnknownField");
    assert_no_errors(TEST, &server.finish().await?);
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// 3. Scans that step over garbage make a compaction due
// ---------------------------------------------------------------------------------------------

/// `serverStatus().ebb.storage.garbage.docs.scannedOver`: the hidden entries scans of the
/// documents keyspace stepped over since its last compaction.
async fn scanned_over(client: &Client) -> TestResult<i64> {
    let storage = storage_status(client).await?;
    let docs = storage.get_document("garbage")?.get_document("docs")?;
    storage_counter(docs, "scannedOver")
}

/// 4,800 of 6,000 documents deleted: far below the 20,000 tombstones (`MIN_DEBT`) that make a
/// keyspace due by its debt alone, so the server leaves them (no compaction within 2 s). Then
/// each full scan returns 1,200 documents over 4,800 tombstones, which `serverStatus` counts as
/// `scannedOver`; once scans have stepped over about twice the keyspace's entries (what a
/// compaction costs), the compactor runs by itself, and the documents are intact.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scans_over_deleted_documents_make_a_compaction_due() -> TestResult {
    const TEST: &str = "scans_over_deleted_documents_make_a_compaction_due";
    const NAME: &str = "scanned";
    let server = Server::start(false).await?;
    let client = server.client();
    let all: Vec<RawDocumentBuf> = (0..6_000).map(|i| big_doc(i, None)).collect();
    insert(&client, DB, NAME, &all).await?;
    let deleted = raw(&client, DB, NAME)
        .delete_many(doc! { "g": { "$gte": 2 } })
        .await?
        .deleted_count;
    assert_eq!(deleted, 4_800);
    let compacted = compactions(&client).await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        compactions(&client).await?,
        compacted,
        "a compaction ran with 4,800 tombstones and no scan"
    );
    let live: Vec<RawDocumentBuf> = all
        .iter()
        .filter(|d| d.get_i64("g").is_ok_and(|g| g < 2))
        .cloned()
        .collect();
    check_same("before scanning", &live, &docs_of(&client, DB, NAME).await?);
    assert!(
        scanned_over(&client).await? >= 4_800,
        "a scan returning 1,200 documents over 4,800 tombstones is not counted"
    );
    let mut scans = 1;
    let deadline = Instant::now() + Duration::from_secs(30);
    while compactions(&client).await? == compacted {
        assert!(
            Instant::now() < deadline,
            "no compaction after {scans} scans over 4,800 tombstones ({} stepped over)",
            scanned_over(&client).await?
        );
        check_same("scanning", &live, &docs_of(&client, DB, NAME).await?);
        scans += 1;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    println!("{TEST}: compacted after {scans} scans");
    assert!(scans <= 20, "{scans} scans before a compaction");
    check_same(
        "after the compaction",
        &live,
        &docs_of(&client, DB, NAME).await?,
    );
    validate(&client, DB, NAME, i64::try_from(live.len())?, &[]).await?;
    assert_no_errors(TEST, &server.finish().await?);
    Ok(())
}
