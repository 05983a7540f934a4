//! Storage that forgets (issue #21), across `kill -9`: what deletes, drops and expiry remove is
//! gone for good, also when the server is killed while it is removing it.
//!
//! Each test runs the real `ebb` binary as a child process on a data directory of its own
//! ([`common::process`]), gives it the background work to do (the removal of a dropped
//! collection's or index's keys, a compaction after mass deletes or expiry, the TTL purge),
//! SIGKILLs it while that work runs, starts it again on the same directory and compares what it
//! serves with what must be there:
//!
//! - nothing live is lost: other collections (in the same and in another database) are
//!   byte-identical, with the same indexes, and `validate` finds their indexes whole;
//! - nothing deleted, dropped or expired comes back: counts, full scans, finds by `_id` (a
//!   range read and point reads) and index scans return only what is live, right after the
//!   restart, once the background work is done, and after a further crash.
//!
//! Each test also checks that one of its kills landed while the work was under way, as the
//! server reports it: `serverStatus().ebb.storage.dropsPending` above 0, a compaction begun
//! (its keyspace's `garbage.*.sinceCompaction` taken) and not answered, the purge's
//! `metrics.ttl.deletedDocuments` short of all there is to purge.
//!
//! The tests:
//! 1. `drop_collection_survives_kill_9_during_cleanup` and
//!    `drop_index_survives_kill_9_during_cleanup`: kills at several delays after `drop` and
//!    `dropIndexes`;
//! 2. `compaction_after_deletes_survives_kill_9`, `compaction_after_expiry_survives_kill_9`:
//!    kills during `compact` after 90% of a collection was deleted, or expired;
//! 3. `ttl_purge_survives_kill_9`: kills while `metrics.ttl.deletedDocuments` grows.
//!
//! Expiry moved later through compactions, and `compact`'s answers, are in `garbage.rs`.

mod common;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use common::garbage::{
    BIG, DB, SETTLE_DEADLINE, Server, THIN, assert_no_errors, big_doc, check_same, command,
    compact, count, create_flush_collection, create_index, docs_by_index, docs_of, expired_pending,
    flush, insert, raw, storage_counter, storage_status, ttl_metrics, validate,
};
use common::{TestResult, collection_names};
use mongodb::Client;
use mongodb::bson::{Document, RawDocumentBuf, doc, rawdoc};

/// Another database, whose collection must be untouched.
const OTHER_DB: &str = "garbage_other";

/// The `listIndexes` entries of `db.name`, in the server's order.
async fn list_indexes(client: &Client, db: &str, name: &str) -> TestResult<Vec<Document>> {
    let reply = command(client, db, doc! { "listIndexes": name }).await?;
    Ok(reply
        .get_document("cursor")?
        .get_array("firstBatch")?
        .iter()
        .filter_map(|d| d.as_document().cloned())
        .collect())
}

/// `serverStatus.ebb.storage.dropsPending`: dropped collections and indexes whose keys are
/// still being removed.
async fn drops_pending(client: &Client) -> TestResult<i64> {
    storage_counter(&storage_status(client).await?, "dropsPending")
}

/// Waits until `dropsPending` is 0; returns how long that took.
async fn wait_for_drops(client: &Client) -> TestResult<Duration> {
    let began = Instant::now();
    loop {
        match drops_pending(client).await? {
            0 => return Ok(began.elapsed()),
            n if began.elapsed() > SETTLE_DEADLINE => {
                return Err(format!("dropsPending still {n} after {SETTLE_DEADLINE:?}").into());
            }
            _ => tokio::time::sleep(Duration::from_millis(20)).await,
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Neighbours: the data that must survive every removal
// ---------------------------------------------------------------------------------------------

/// The neighbours whose data must survive every removal: `garbage.b` (some documents with a
/// `ttl` under a `{_ts: 1}` -1 policy, so that they have expiry entries; an index on `v`) and
/// `garbage_other.c` (string `_id`s, a unique index and a multikey one).
struct Neighbours {
    b: Vec<RawDocumentBuf>,
    b_indexes: Vec<Document>,
    c: Vec<RawDocumentBuf>,
    c_indexes: Vec<Document>,
}

const B_DOCS: i64 = 2000;
const C_DOCS: i32 = 1000;

impl Neighbours {
    /// Creates `garbage.b` (empty, with its indexes: its ids come before those of collections
    /// created later).
    async fn create_b(client: &Client) -> TestResult {
        create_index(client, DB, "b", doc! { "v": 1 }, None).await?;
        create_index(
            client,
            DB,
            "b",
            doc! { "_ts": 1 },
            Some(doc! { "expireAfterSeconds": -1 }),
        )
        .await
    }

    /// Creates `garbage_other.c` with its indexes.
    async fn create_c(client: &Client) -> TestResult {
        create_index(
            client,
            OTHER_DB,
            "c",
            doc! { "u": 1 },
            Some(doc! { "unique": true }),
        )
        .await?;
        create_index(client, OTHER_DB, "c", doc! { "tags": 1 }, None).await
    }

    /// Fills both (created before) and records what they hold.
    async fn fill(client: &Client) -> TestResult<Neighbours> {
        let b: Vec<RawDocumentBuf> = (0..B_DOCS)
            .map(|i| {
                let mut d = rawdoc! { "_id": i, "v": i % 50, "name": format!("b{i}") };
                if i % 2 == 0 {
                    d.append(mongodb::bson::raw::cstr!("ttl"), 86_400);
                }
                d
            })
            .collect();
        let c: Vec<RawDocumentBuf> = (0..C_DOCS)
            .map(|i| rawdoc! { "_id": format!("c{i:05}"), "u": i, "tags": [i % 3, i % 5] })
            .collect();
        insert(client, DB, "b", &b).await?;
        insert(client, OTHER_DB, "c", &c).await?;
        Ok(Neighbours {
            b,
            b_indexes: list_indexes(client, DB, "b").await?,
            c,
            c_indexes: list_indexes(client, OTHER_DB, "c").await?,
        })
    }

    /// Both are exactly as filled, indexes included, and `validate` finds them whole.
    async fn check(&self, client: &Client, when: &str) -> TestResult {
        check_same(
            &format!("{when}: {DB}.b"),
            &self.b,
            &docs_of(client, DB, "b").await?,
        );
        check_same(
            &format!("{when}: {OTHER_DB}.c"),
            &self.c,
            &docs_of(client, OTHER_DB, "c").await?,
        );
        assert_eq!(
            list_indexes(client, DB, "b").await?,
            self.b_indexes,
            "{when}: indexes of b"
        );
        assert_eq!(
            list_indexes(client, OTHER_DB, "c").await?,
            self.c_indexes,
            "{when}: indexes of c"
        );
        validate(client, DB, "b", B_DOCS, &["v_1"]).await?;
        validate(client, OTHER_DB, "c", i64::from(C_DOCS), &["u_1"]).await?;
        // Through the indexes too.
        let by_v: Vec<RawDocumentBuf> = self
            .b
            .iter()
            .filter(|d| d.get_i64("v").ok() == Some(7))
            .cloned()
            .collect();
        check_same(
            &format!("{when}: b by v_1"),
            &by_v,
            &docs_by_index(client, DB, "b", doc! { "v": 7 }, "v_1").await?,
        );
        assert_eq!(
            count(client, OTHER_DB, "c").await?,
            i64::from(C_DOCS),
            "{when}"
        );
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------
// 1. kill -9 while a dropped collection's or index's keys are removed
// ---------------------------------------------------------------------------------------------

/// Delays between the acknowledgement of a `drop` and the kill, which follows a look at
/// `dropsPending`: the removal of a dropped [`BIG`] collection (documents, entries of two
/// indexes, expiry entries) takes some 700 ms in a debug build, so the first kill (a look, then
/// the kill, a few milliseconds after the drop) lands during it; the later ones may not.
const DROP_KILL_DELAYS: [u64; 3] = [0, 50, 300];
/// The same for `dropIndexes` of one index, whose entries take some 200 ms to remove.
const DROP_INDEX_KILL_DELAYS: [u64; 3] = [0, 30, 120];

/// The dropped collection `garbage.a` is gone and stays gone: absent from `listCollections`,
/// counted 0, found nowhere by `_id`.
async fn check_a_absent(client: &Client, when: &str) -> TestResult {
    assert!(
        !collection_names(client, DB).await?.contains("a"),
        "{when}: the dropped collection is listed"
    );
    assert_eq!(count(client, DB, "a").await?, 0, "{when}: count of a");
    let found = docs_of(client, DB, "a").await?;
    assert!(
        found.is_empty(),
        "{when}: the dropped collection returns {} documents, first {:?}",
        found.len(),
        found.first()
    );
    let ids: Vec<i64> = (0..BIG).step_by(97).collect();
    let by_id = raw(client, DB, "a")
        .find_one(doc! { "_id": { "$in": ids } })
        .await?;
    assert!(by_id.is_none(), "{when}: found by _id: {by_id:?}");
    Ok(())
}

/// The documents `garbage.a` is created again with after a drop: `_id`s the dropped ones had,
/// other contents.
fn reborn_docs() -> Vec<RawDocumentBuf> {
    (0..100_i64)
        .map(|i| rawdoc! { "_id": i, "k": i % 977, "reborn": true })
        .collect()
}

/// `garbage.a` holds exactly the reborn documents, through its `k` index too.
async fn check_a_reborn(client: &Client, when: &str) -> TestResult {
    let reborn = reborn_docs();
    check_same(
        &format!("{when}: a created again"),
        &reborn,
        &docs_of(client, DB, "a").await?,
    );
    let with_k5: Vec<RawDocumentBuf> = reborn
        .iter()
        .filter(|d| d.get_i64("k").ok() == Some(5))
        .cloned()
        .collect();
    check_same(
        &format!("{when}: a created again, by k_1"),
        &with_k5,
        &docs_by_index(client, DB, "a", doc! { "k": 5 }, "k_1").await?,
    );
    assert_eq!(count(client, DB, "a").await?, 100, "{when}");
    validate(client, DB, "a", 100, &["k_1"]).await?;
    Ok(())
}

/// `drop` of a big collection (documents, index entries of two indexes, expiry entries), then
/// SIGKILL at several moments of the removal of its keys; after each restart the neighbours
/// (same database, other database) are intact and the dropped collection is gone; the name can
/// be used again at once, and the dropped data never shows in the new collection, neither
/// after the removal ends nor after a further kill.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drop_collection_survives_kill_9_during_cleanup() -> TestResult {
    const TEST: &str = "drop_collection_survives_kill_9_during_cleanup";
    let began = Instant::now();
    let mut errors = Vec::new();
    let mut pending_at_kill = Vec::new();
    for delay in DROP_KILL_DELAYS {
        let mut server = Server::start(false).await?;
        let client = server.client();
        // Ids in creation order: the flush collection, b, a (and its indexes), c; so that a's
        // keys lie between its neighbours' in every keyspace.
        create_flush_collection(&client).await?;
        Neighbours::create_b(&client).await?;
        create_index(&client, DB, "a", doc! { "k": 1 }, None).await?;
        create_index(&client, DB, "a", doc! { "s": 1 }, None).await?;
        create_index(
            &client,
            DB,
            "a",
            doc! { "_ts": 1 },
            Some(doc! { "expireAfterSeconds": -1 }),
        )
        .await?;
        Neighbours::create_c(&client).await?;
        // Half of a shares tables with its neighbours, the other half has tables of its own.
        let a: Vec<RawDocumentBuf> = (0..BIG).map(|i| big_doc(i, Some(86_400))).collect();
        let (first, second) = a.split_at(a.len() / 2);
        insert(&client, DB, "a", first).await?;
        let neighbours = Neighbours::fill(&client).await?;
        flush(&client).await?;
        insert(&client, DB, "a", second).await?;
        flush(&client).await?;
        assert_eq!(count(&client, DB, "a").await?, BIG);

        command(&client, DB, doc! { "drop": "a" }).await?;
        tokio::time::sleep(Duration::from_millis(delay)).await;
        let pending = drops_pending(&client).await?;
        let client = server.kill_and_restart().await?;
        println!("{TEST}: killed {delay} ms after the drop; dropsPending then: {pending}");
        pending_at_kill.push(pending);
        let when = format!("{delay} ms: after the restart");
        neighbours.check(&client, &when).await?;
        check_a_absent(&client, &when).await?;
        // The name is free: created again, empty, and writable.
        command(&client, DB, doc! { "create": "a" }).await?;
        assert_eq!(count(&client, DB, "a").await?, 0, "{when}: a created again");
        assert!(docs_of(&client, DB, "a").await?.is_empty(), "{when}");
        insert(&client, DB, "a", &reborn_docs()).await?;
        create_index(&client, DB, "a", doc! { "k": 1 }, None).await?;
        check_a_reborn(&client, &when).await?;

        let waited = wait_for_drops(&client).await?;
        println!("{TEST}: {delay} ms: removal of the dropped data ended after {waited:?}");
        let when = format!("{delay} ms: once the removal ended");
        neighbours.check(&client, &when).await?;
        check_a_reborn(&client, &when).await?;
        flush(&client).await?;
        let client = server.kill_and_restart().await?;
        let when = format!("{delay} ms: after a second kill");
        neighbours.check(&client, &when).await?;
        check_a_reborn(&client, &when).await?;
        assert_eq!(
            collection_names(&client, DB).await?,
            BTreeSet::from(["a".to_owned(), "b".to_owned()]),
            "{when}"
        );
        errors.extend(server.finish().await?);
    }
    assert!(
        pending_at_kill.iter().any(|&n| n > 0),
        "no kill landed while the drop's removal was pending: {pending_at_kill:?}"
    );
    println!("{TEST}: done in {:?}", began.elapsed());
    assert_no_errors(TEST, &errors);
    Ok(())
}

/// `garbage.d`'s `k_1` index is whole and finds exactly the documents of `d` it should.
async fn check_k_index(client: &Client, d: &[RawDocumentBuf], when: &str) -> TestResult {
    validate(client, DB, "d", BIG, &["k_1", "s_1"]).await?;
    let k5: Vec<RawDocumentBuf> = d
        .iter()
        .filter(|x| x.get_i64("k").ok() == Some(5))
        .cloned()
        .collect();
    check_same(
        &format!("{when}: by k_1"),
        &k5,
        &docs_by_index(client, DB, "d", doc! { "k": 5 }, "k_1").await?,
    );
    Ok(())
}

/// `dropIndexes` of one index of a big collection, then SIGKILL at several moments of the
/// removal of its entries; after each restart the documents are intact, the index is gone and
/// the others whole, and the same spec builds again into a valid index, before and after the
/// removal ends and across a further kill.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drop_index_survives_kill_9_during_cleanup() -> TestResult {
    const TEST: &str = "drop_index_survives_kill_9_during_cleanup";
    let began = Instant::now();
    let mut errors = Vec::new();
    let mut pending_at_kill = Vec::new();
    for delay in DROP_INDEX_KILL_DELAYS {
        let mut server = Server::start(false).await?;
        let client = server.client();
        create_flush_collection(&client).await?;
        Neighbours::create_b(&client).await?;
        create_index(&client, DB, "d", doc! { "k": 1 }, None).await?;
        create_index(&client, DB, "d", doc! { "s": 1 }, None).await?;
        Neighbours::create_c(&client).await?;
        let d: Vec<RawDocumentBuf> = (0..BIG).map(|i| big_doc(i, None)).collect();
        let (first, second) = d.split_at(d.len() / 2);
        insert(&client, DB, "d", first).await?;
        let neighbours = Neighbours::fill(&client).await?;
        flush(&client).await?;
        insert(&client, DB, "d", second).await?;
        flush(&client).await?;
        let indexes = list_indexes(&client, DB, "d").await?;
        let k_spec = indexes
            .iter()
            .find(|i| i.get_str("name").ok() == Some("k_1"))
            .cloned()
            .ok_or("no k_1")?;
        let without_k: Vec<Document> = indexes
            .iter()
            .filter(|i| i.get_str("name").ok() != Some("k_1"))
            .cloned()
            .collect();
        validate(&client, DB, "d", BIG, &["k_1", "s_1"]).await?;

        command(&client, DB, doc! { "dropIndexes": "d", "index": "k_1" }).await?;
        tokio::time::sleep(Duration::from_millis(delay)).await;
        let pending = drops_pending(&client).await?;
        let client = server.kill_and_restart().await?;
        println!("{TEST}: killed {delay} ms after dropIndexes; dropsPending then: {pending}");
        pending_at_kill.push(pending);
        let when = format!("{delay} ms: after the restart");
        neighbours.check(&client, &when).await?;
        check_same(&when, &d, &docs_of(&client, DB, "d").await?);
        assert_eq!(list_indexes(&client, DB, "d").await?, without_k, "{when}");
        validate(&client, DB, "d", BIG, &["s_1"]).await?;
        // The same spec builds again, whole.
        let mut spec = k_spec.clone();
        spec.remove("v");
        command(
            &client,
            DB,
            doc! { "createIndexes": "d", "indexes": [spec] },
        )
        .await?;
        let rebuilt = list_indexes(&client, DB, "d").await?;
        assert!(rebuilt.contains(&k_spec), "{when}: {rebuilt:?}");
        assert_eq!(rebuilt.len(), indexes.len(), "{when}: {rebuilt:?}");
        check_k_index(&client, &d, &when).await?;

        let waited = wait_for_drops(&client).await?;
        println!("{TEST}: {delay} ms: removal of the dropped entries ended after {waited:?}");
        let when = format!("{delay} ms: once the removal ended");
        check_k_index(&client, &d, &when).await?;
        flush(&client).await?;
        let client = server.kill_and_restart().await?;
        let when = format!("{delay} ms: after a second kill");
        neighbours.check(&client, &when).await?;
        check_same(&when, &d, &docs_of(&client, DB, "d").await?);
        assert_eq!(list_indexes(&client, DB, "d").await?, rebuilt, "{when}");
        check_k_index(&client, &d, &when).await?;
        errors.extend(server.finish().await?);
    }
    assert!(
        pending_at_kill.iter().any(|&n| n > 0),
        "no kill landed while the index's removal was pending: {pending_at_kill:?}"
    );
    println!("{TEST}: done in {:?}", began.elapsed());
    assert_no_errors(TEST, &errors);
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// 2. kill -9 during a compaction after mass deletes, or mass expiry
// ---------------------------------------------------------------------------------------------

/// At most this many removed `_id`s are looked up one by one after a restart.
const GONE_SAMPLE: usize = 500;

/// A sample of the `_id`s of `0..BIG` that `keep` rejects, spread over the whole range.
fn gone_sample(keep: impl Fn(i64) -> bool) -> Vec<i64> {
    let gone: Vec<i64> = (0..BIG).filter(|&i| !keep(i)).collect();
    let step = (gone.len() / GONE_SAMPLE).max(1);
    gone.into_iter().step_by(step).collect()
}

/// `garbage.thin` holds exactly `live`, and none of `gone` shows: the full scan, `count`, a
/// range read of the removed `_id`s, point reads of some, the `k_1` index and `validate` (which
/// also counts the live documents and their index entries) agree. Returns `validate`'s reply.
async fn check_thin(
    client: &Client,
    live: &[RawDocumentBuf],
    gone: &[i64],
    when: &str,
) -> TestResult<Document> {
    check_same(when, live, &docs_of(client, DB, THIN).await?);
    let n = i64::try_from(live.len())?;
    assert_eq!(count(client, DB, THIN).await?, n, "{when}: count");
    let mut back = Vec::new();
    let mut cursor = raw(client, DB, THIN)
        .find(doc! { "_id": { "$in": gone.to_vec() } })
        .await?;
    while cursor.advance().await? {
        back.push(cursor.current().to_owned());
    }
    assert!(
        back.is_empty(),
        "{when}: {} removed documents came back, first: {:?}",
        back.len(),
        back.first()
    );
    for id in gone.iter().step_by(25) {
        let one = raw(client, DB, THIN).find_one(doc! { "_id": id }).await?;
        assert!(one.is_none(), "{when}: removed _id {id} came back: {one:?}");
    }
    let k5: Vec<RawDocumentBuf> = live
        .iter()
        .filter(|d| d.get_i64("k").ok() == Some(5))
        .cloned()
        .collect();
    check_same(
        &format!("{when}: by k_1"),
        &k5,
        &docs_by_index(client, DB, THIN, doc! { "k": 5 }, "k_1").await?,
    );
    validate(client, DB, THIN, n, &["k_1"]).await
}

/// How a compaction round ends.
#[derive(Debug, Clone, Copy)]
enum CompactKill {
    /// `compact` is sent, and the server killed as soon as a compaction is seen under way.
    Begun,
    /// `compact` is sent, and the server killed this many milliseconds later.
    During(u64),
    /// No `compact`: the server is killed this many milliseconds after the removal was
    /// acknowledged, while whatever compaction the removal set off may run.
    After(u64),
}

/// Rounds of the compaction tests. The first kill lands during the compaction (unless it takes
/// less than a look at `serverStatus`: after the removals here, one takes half a second or more
/// in a debug build); the others, at set times, may land during it or after it.
const COMPACT_KILLS: [CompactKill; 3] = [
    CompactKill::Begun,
    CompactKill::During(50),
    CompactKill::After(100),
];

/// `serverStatus.ebb.storage`'s garbage in the documents' keyspace since its last compaction
/// (a compaction takes it as it begins), and the compactions finished.
async fn compaction_state(client: &Client) -> TestResult<(i64, i64)> {
    let storage = storage_status(client).await?;
    let docs = storage.get_document("garbage")?.get_document("docs")?;
    Ok((
        storage_counter(docs, "sinceCompaction")?,
        storage_counter(&storage, "compactions")?,
    ))
}

/// One more superseded version in the documents' keyspace (an update of [`flush`]'s document),
/// so that the garbage there is above 0 and a compaction beginning shows.
async fn add_garbage(client: &Client) -> TestResult {
    let reply = command(
        client,
        common::garbage::AUX_DB,
        doc! { "update": "flush", "updates": [{ "q": { "_id": 0 }, "u": { "$inc": { "n": 1 } } }] },
    )
    .await?;
    assert_eq!(common::integer(reply.get("nModified")), Some(1), "{reply}");
    Ok(())
}

/// Kills the server as `kill` says. Returns what `compact` answered before the kill (its
/// `bytesFreed`), `Ok(None)` when none was sent, or `Err` with the driver's error when the
/// kill came while it ran.
async fn kill_round(
    server: &mut Server,
    kill: CompactKill,
) -> TestResult<Result<Option<i64>, String>> {
    let client = &server.client();
    if let CompactKill::After(ms) = kill {
        tokio::time::sleep(Duration::from_millis(ms)).await;
        server.kill_9().await?;
        return Ok(Ok(None));
    }
    add_garbage(client).await?;
    let (mut garbage, mut compactions) = compaction_state(client).await?;
    let task = tokio::spawn({
        let client = client.clone();
        async move { compact(&client, DB, THIN).await.map_err(|e| e.to_string()) }
    });
    match kill {
        CompactKill::Begun => {
            // Polls until a compaction has begun since the last look (the garbage fell: nothing
            // else lowers it) and none has ended (the count of compactions stands), or until
            // `compact` answered: the kill then lands after the work, and shows it.
            let began = Instant::now();
            while !task.is_finished() {
                let (now, ended) = compaction_state(client).await?;
                if now < garbage && ended == compactions {
                    println!(
                        "  a compaction under way {:?} after compact was sent (garbage in docs \
                         {garbage} → {now})",
                        began.elapsed()
                    );
                    break;
                }
                (garbage, compactions) = (now, ended);
                if began.elapsed() > SETTLE_DEADLINE {
                    return Err(format!("no compaction seen within {SETTLE_DEADLINE:?}").into());
                }
            }
        }
        CompactKill::During(ms) | CompactKill::After(ms) => {
            tokio::time::sleep(Duration::from_millis(ms)).await;
        }
    }
    let answered = task.is_finished();
    server.kill_9().await?;
    let outcome = tokio::time::timeout(Duration::from_secs(30), task)
        .await
        .map_err(|_| "compact did not end after the kill")??;
    if answered && let Err(e) = &outcome {
        return Err(format!("compact failed before the kill: {e}").into());
    }
    Ok(outcome.map(Some))
}

/// After a crash round: the thinned collection is checked after the restart, compacted to the
/// end, checked, killed again and checked once more.
async fn after_compact_kill(
    server: &mut Server,
    live: &[RawDocumentBuf],
    gone: &[i64],
    label: &str,
) -> TestResult {
    let client = server.restart().await?;
    check_thin(&client, live, gone, &format!("{label}: after the restart")).await?;
    // Whatever the killed compaction left undone, done now to the end.
    let began = Instant::now();
    let freed = compact(&client, DB, THIN).await?;
    println!(
        "  {label}: compact after the restart: {freed} bytes freed in {:?}",
        began.elapsed()
    );
    check_thin(&client, live, gone, &format!("{label}: compacted")).await?;
    flush(&client).await?;
    let client = server.kill_and_restart().await?;
    let when = format!("{label}: after a second kill");
    check_thin(&client, live, gone, &when).await?;
    Ok(())
}

/// A big collection with an index loses 90% of its documents to one `delete`; the server is
/// killed while `compact` runs on it (and, in one round, shortly after the delete): after
/// the restart every live document is there, byte for byte, and no deleted one is back, also
/// once a compaction ran to its end and after a further kill.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compaction_after_deletes_survives_kill_9() -> TestResult {
    const TEST: &str = "compaction_after_deletes_survives_kill_9";
    let began = Instant::now();
    let mut errors = Vec::new();
    let mut interrupted = 0;
    let keep = |i: i64| i % 10 == 0;
    let all: Vec<RawDocumentBuf> = (0..BIG).map(|i| big_doc(i, None)).collect();
    let live: Vec<RawDocumentBuf> = (0..BIG)
        .filter(|&i| keep(i))
        .map(|i| big_doc(i, None))
        .collect();
    let gone = gone_sample(keep);
    for kill in COMPACT_KILLS {
        let mut server = Server::start(false).await?;
        let client = server.client();
        create_flush_collection(&client).await?;
        create_index(&client, DB, THIN, doc! { "k": 1 }, None).await?;
        insert(&client, DB, THIN, &all).await?;
        flush(&client).await?;
        let deleted = raw(&client, DB, THIN)
            .delete_many(doc! { "g": { "$ne": 0 } })
            .await?
            .deleted_count;
        assert_eq!(deleted, u64::try_from(BIG - BIG / 10)?);
        flush(&client).await?;
        let outcome = kill_round(&mut server, kill).await?;
        println!("{TEST}: {kill:?}: compact before the kill: {outcome:?}");
        if outcome.is_err() {
            interrupted += 1;
        }
        after_compact_kill(&mut server, &live, &gone, &format!("{kill:?}")).await?;
        errors.extend(server.finish().await?);
    }
    assert!(
        interrupted > 0,
        "compact always answered before the kill: no kill landed during a compaction"
    );
    println!("{TEST}: done in {:?}", began.elapsed());
    assert_no_errors(TEST, &errors);
    Ok(())
}

/// Waits until `validate` of `garbage.thin` reports no expired document left to purge.
async fn wait_for_purge(client: &Client, live: i64) -> TestResult<Duration> {
    let began = Instant::now();
    loop {
        let reply = validate(client, DB, THIN, live, &[]).await?;
        if !expired_pending(&reply) {
            return Ok(began.elapsed());
        }
        if began.elapsed() > SETTLE_DEADLINE {
            return Err(
                format!("expired documents left after {SETTLE_DEADLINE:?}: {reply}").into(),
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The documents of the expiry tests, under `{_ts: 1}` with `expireAfterSeconds: -1`: `g == 0`
/// lives forever (no `ttl`), `g == 1` is written with `ttl: ttl + 1` and at once updated to
/// `ttl: 86400` (its expiry moved later before it came: it must be kept), every other one has
/// `ttl: ttl` (seconds). Inserts them (the `g == 1` ones last, so that their update comes well
/// within their time), updates, and returns the live documents, when the first write began,
/// and the instant when every other document has expired and the `g == 1` ones' first instant
/// has passed.
async fn insert_expiring(
    client: &Client,
    ttl: i32,
) -> TestResult<(Vec<RawDocumentBuf>, Instant, Instant)> {
    create_index(
        client,
        DB,
        THIN,
        doc! { "_ts": 1 },
        Some(doc! { "expireAfterSeconds": -1 }),
    )
    .await?;
    create_index(client, DB, THIN, doc! { "k": 1 }, None).await?;
    let expiring: Vec<RawDocumentBuf> = (0..BIG)
        .filter(|i| i % 10 != 1)
        .map(|i| big_doc(i, (i % 10 != 0).then_some(ttl)))
        .collect();
    let moved: Vec<RawDocumentBuf> = (0..BIG)
        .filter(|i| i % 10 == 1)
        .map(|i| big_doc(i, Some(ttl + 1)))
        .collect();
    let first_write = Instant::now();
    insert(client, DB, THIN, &expiring).await?;
    let seconds = |s: i32| Duration::from_millis(u64::try_from(s).unwrap_or(0) * 1000 + 200);
    let expired_from = Instant::now() + seconds(ttl);
    let moved_at = Instant::now();
    insert(client, DB, THIN, &moved).await?;
    let updated = raw(client, DB, THIN)
        .update_many(doc! { "g": 1 }, doc! { "$set": { "ttl": 86_400 } })
        .await?;
    // Their first instant is (ttl + 1) s after their write at the earliest.
    assert!(
        moved_at.elapsed() < Duration::from_secs(u64::try_from(ttl + 1)?),
        "inserting and updating the moved documents took {:?}, longer than their ttl allows",
        moved_at.elapsed()
    );
    assert_eq!(updated.modified_count, u64::try_from(moved.len())?);
    let live: Vec<RawDocumentBuf> = (0..BIG)
        .filter(|i| i % 10 <= 1)
        .map(|i| big_doc(i, (i % 10 == 1).then_some(86_400)))
        .collect();
    Ok((
        live,
        first_write,
        expired_from.max(moved_at + seconds(ttl + 1)),
    ))
}

/// When the documents of [`compaction_after_expiry_survives_kill_9`] expire.
#[derive(Debug, Clone, Copy)]
enum Expiry {
    /// While the server runs: its purge removes them from their instant on, and `compact` is
    /// sent once they have all expired.
    WhileUp,
    /// While the server is down (killed before their instant): `compact` is sent as soon as it
    /// is up again, while its purge removes them.
    WhileDown,
}

/// Like [`compaction_after_deletes_survives_kill_9`], with documents that expired (a real
/// `ttl` of a few seconds) instead of deleted ones: the kill lands during `compact` (once
/// while the purge removes the documents); after the restart the live documents are all there,
/// nothing expired is back, and the documents whose expiry was moved later before it came are
/// kept, through a compaction run to its end, a further kill, and the end of the purge.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compaction_after_expiry_survives_kill_9() -> TestResult {
    const TEST: &str = "compaction_after_expiry_survives_kill_9";
    let began = Instant::now();
    let mut errors = Vec::new();
    let mut interrupted = 0;
    let gone = gone_sample(|i| i % 10 <= 1);
    for (expiry, kill) in [
        (Expiry::WhileUp, COMPACT_KILLS[0]),
        (Expiry::WhileDown, COMPACT_KILLS[1]),
    ] {
        let label = format!("{expiry:?}, {kill:?}");
        let mut server = Server::start(false).await?;
        let client = server.client();
        create_flush_collection(&client).await?;
        // While down: long enough for the writes to end first ([`BIG`] documents take about
        // 1 s to write in a debug build, 3.5 s in a release build).
        let ttl = match expiry {
            Expiry::WhileUp => 1,
            Expiry::WhileDown if cfg!(debug_assertions) => 3,
            Expiry::WhileDown => 6,
        };
        let (live, first_write, expired_at) = insert_expiring(&client, ttl).await?;
        flush(&client).await?;
        let client = match expiry {
            Expiry::WhileUp => client,
            Expiry::WhileDown => {
                let before = first_write.elapsed();
                server.kill_9().await?;
                println!(
                    "{TEST}: {label}: killed {before:?} after the first write (the first \
                     instant is {ttl} s after it)"
                );
                tokio::time::sleep_until(expired_at.into()).await;
                server.restart().await?
            }
        };
        tokio::time::sleep_until(expired_at.into()).await;
        let (purged, _) = ttl_metrics(&client).await?;
        let outcome = kill_round(&mut server, kill).await?;
        println!(
            "{TEST}: {label}: purged when compact was sent: {purged}; compact before the \
             kill: {outcome:?}"
        );
        if outcome.is_err() {
            interrupted += 1;
        }
        after_compact_kill(&mut server, &live, &gone, &label).await?;
        // And once the purge is over, nothing expired is left in storage either.
        let client = server.terminate_and_restart().await?;
        let waited = wait_for_purge(&client, i64::try_from(live.len())?).await?;
        println!("{TEST}: {label}: purge over {waited:?} after the last restart");
        check_thin(&client, &live, &gone, &format!("{label}: purged")).await?;
        errors.extend(server.finish().await?);
    }
    assert!(
        interrupted > 0,
        "compact always answered before the kill: no kill landed during a compaction"
    );
    println!("{TEST}: done in {:?}", began.elapsed());
    assert_no_errors(TEST, &errors);
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// 3. kill -9 during the TTL purge
// ---------------------------------------------------------------------------------------------

/// Polls `metrics.ttl.deletedDocuments` (counted since the server started) until it is above
/// 0; returns it. The kill follows at once.
async fn wait_for_purging(client: &Client) -> TestResult<i64> {
    let began = Instant::now();
    loop {
        let (deleted, _) = ttl_metrics(client).await?;
        if deleted > 0 {
            return Ok(deleted);
        }
        if began.elapsed() > SETTLE_DEADLINE {
            return Err(format!("the purge did not start within {SETTLE_DEADLINE:?}").into());
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// Many documents expiring within a second or so of each other (a real `ttl` of one second,
/// written in one go), with live ones among them (and some whose expiry was moved later): the
/// server is killed while the purge removes them (`metrics.ttl.deletedDocuments` growing),
/// twice; after each restart, at once and once the purge has ended, only the live documents
/// show, whole, and after a last kill nothing comes back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ttl_purge_survives_kill_9() -> TestResult {
    const TEST: &str = "ttl_purge_survives_kill_9";
    let began = Instant::now();
    let gone = gone_sample(|i| i % 10 <= 1);
    let expired_total = BIG - (BIG / 10) * 2;
    let mut server = Server::start(false).await?;
    let client = server.client();
    create_flush_collection(&client).await?;
    let (live, _, _) = insert_expiring(&client, 1).await?;
    flush(&client).await?;

    // First kill: just after the purge started.
    let deleted = wait_for_purging(&client).await?;
    let client = server.kill_and_restart().await?;
    println!("{TEST}: first kill with {deleted} of {expired_total} expired documents purged");
    assert!(
        deleted > 0 && deleted < expired_total,
        "the kill did not land during the purge: {deleted} of {expired_total} purged"
    );

    // Second kill: as soon as the restarted server's purge is seen at work, after a quick look
    // (the full checks take longer than the rest of the purge in a debug build).
    let n = i64::try_from(live.len())?;
    assert_eq!(count(&client, DB, THIN).await?, n, "after the first kill");
    let back = raw(&client, DB, THIN)
        .find_one(doc! { "_id": { "$in": gone.clone() } })
        .await?;
    assert!(back.is_none(), "after the first kill: came back: {back:?}");
    let again = wait_for_purging(&client).await?;
    let client = server.kill_and_restart().await?;
    println!(
        "{TEST}: second kill with {again} purged by the restarted server (of {} or more left \
         after the first kill)",
        expired_total - deleted
    );
    check_thin(&client, &live, &gone, "after the second kill").await?;
    let waited = wait_for_purge(&client, i64::try_from(live.len())?).await?;
    println!("{TEST}: the purge ended {waited:?} after the second restart");
    check_thin(&client, &live, &gone, "once purged").await?;
    flush(&client).await?;
    let client = server.kill_and_restart().await?;
    let reply = check_thin(&client, &live, &gone, "after a kill once purged").await?;
    assert!(
        !expired_pending(&reply),
        "expired documents are back in storage: {reply}"
    );
    let errors = server.finish().await?;
    println!("{TEST}: done in {:?}", began.elapsed());
    assert_no_errors(TEST, &errors);
    Ok(())
}
