//! Multi-document transactions on a replica set of one (`--replSet`), through the driver's
//! sessions API: snapshot isolation (a transaction never sees a later commit, nobody sees an
//! uncommitted write, a transaction sees its own), atomicity across two collections after
//! `kill -9` in a stream of commits, a commit retried after a restart answered without applying
//! anything twice, concurrent money transfers keeping their total, write conflicts, writes
//! outside transactions waiting for the one holding their document, and aborts.

mod common;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use bson::{Bson, Document, doc};
use common::process::{EbbProcess, QUICK_DRAIN, data_dir, is_error};
use common::rng::Rng;
use common::{TestResult, TestServer, assert_command_error, command_error, drain, integer};
use mongodb::{Client, ClientSession, Collection};

const DB: &str = "txn_test";
const SET: &str = "rs0";
const TRANSIENT: &str = "TransientTransactionError";

/// An in-memory primary of `rs0` and a client that discovers it.
async fn replset() -> TestResult<(TestServer, Client)> {
    let server = TestServer::start_replset(SET).await?;
    let client = server
        .client_discovering(&format!("replicaSet={SET}&maxPoolSize=32"))
        .await?;
    Ok((server, client))
}

fn coll(client: &Client, name: &str) -> Collection<Document> {
    client.database(DB).collection(name)
}

/// The `_id`s of `c`, read outside any transaction.
async fn ids(c: &Collection<Document>) -> TestResult<BTreeSet<i64>> {
    let docs = drain(c.find(doc! {}).await?).await?;
    docs.iter()
        .map(|d| integer(d.get("_id")).ok_or_else(|| format!("_id of {d}").into()))
        .collect()
}

/// A short random pause before retrying a transaction that lost a conflict, so that the
/// writers do not meet again at once.
async fn backoff(rng: &mut Rng) {
    tokio::time::sleep(Duration::from_micros(200 + rng.below_u64(3000))).await;
}

// ---------------------------------------------------------------------------------------------
// 1. Isolation
// ---------------------------------------------------------------------------------------------

/// `{_id: {$eq: id}}`: the filter the tests below read one document with in a transaction
/// (through the planner; `{_id: id}` alone takes the server's fast path, which
/// [`find_by_id_reads_the_transaction`] covers).
fn id_eq(id: impl Into<Bson>) -> Document {
    doc! { "_id": { "$eq": id.into() } }
}

/// A transaction reads the snapshot taken at its first command: a document updated or inserted
/// by a commit made after that is seen as it was (or not at all), by `find`, `aggregate` and
/// `countDocuments` alike, until the transaction ends; after it, the later commit is there.
#[tokio::test]
async fn a_transaction_never_sees_a_later_commit() -> TestResult {
    let (_server, client) = replset().await?;
    let c = coll(&client, "c");
    let before = vec![doc! { "_id": 1, "v": 0 }, doc! { "_id": 2, "v": 0 }];
    c.insert_many(before.clone()).await?;
    let mut s = client.start_session().await?;
    s.start_transaction().await?;
    let first = c.find_one(id_eq(1)).session(&mut s).await?;
    assert_eq!(first, Some(doc! { "_id": 1, "v": 0 }));

    // Committed outside, after the transaction's snapshot.
    c.update_one(doc! { "_id": 1 }, doc! { "$set": { "v": 1 } })
        .await?;
    c.insert_one(doc! { "_id": 3, "v": 0 }).await?;
    c.delete_one(doc! { "_id": 2 }).await?;
    let after = vec![doc! { "_id": 1, "v": 1 }, doc! { "_id": 3, "v": 0 }];
    assert_eq!(all_in(&c, &mut client.start_session().await?).await?, after);

    assert_eq!(all_in(&c, &mut s).await?, before, "the snapshot");
    let late = c.find_one(id_eq(3)).session(&mut s).await?;
    assert_eq!(late, None, "inserted after the snapshot");
    assert_eq!(c.count_documents(doc! { "v": 0 }).session(&mut s).await?, 2);
    s.commit_transaction().await?;
    assert_eq!(all_in(&c, &mut s).await?, after);
    Ok(())
}

/// Every document of `c` in `_id` order, read in `s` (in its transaction if one is open).
async fn all_in(c: &Collection<Document>, s: &mut ClientSession) -> TestResult<Vec<Document>> {
    let find = c.find(doc! {}).sort(doc! { "_id": 1 }).batch_size(2);
    let mut cursor = find.session(&mut *s).await?;
    let mut out = Vec::new();
    while let Some(d) = cursor.next(s).await {
        out.push(d?);
    }
    Ok(out)
}

/// Nobody outside sees what a transaction writes before it commits (an insert, an update and a
/// delete, in two collections); everyone does after. The transaction sees its own writes in
/// `find`, `aggregate` and `countDocuments`.
#[tokio::test]
async fn uncommitted_writes_are_seen_only_by_their_transaction() -> TestResult {
    let (_server, client) = replset().await?;
    let (a, b) = (coll(&client, "a"), coll(&client, "b"));
    let before = vec![doc! { "_id": 1, "v": 0 }, doc! { "_id": 2, "v": 0 }];
    a.insert_many(before.clone()).await?;
    b.insert_one(doc! { "_id": 1 }).await?;
    let mut s = client.start_session().await?;
    s.start_transaction().await?;
    a.insert_one(doc! { "_id": 10, "v": 5 })
        .session(&mut s)
        .await?;
    a.update_one(doc! { "_id": 1 }, doc! { "$set": { "v": 7 } })
        .session(&mut s)
        .await?;
    a.delete_one(doc! { "_id": 2 }).session(&mut s).await?;
    b.insert_one(doc! { "_id": 2 }).session(&mut s).await?;

    // Inside: its own writes.
    let after = vec![doc! { "_id": 1, "v": 7 }, doc! { "_id": 10, "v": 5 }];
    assert_eq!(all_in(&a, &mut s).await?, after, "in the transaction");
    assert_eq!(a.find_one(id_eq(2)).session(&mut s).await?, None);
    assert_eq!(b.count_documents(doc! {}).session(&mut s).await?, 2);
    let mut agg = a
        .aggregate([
            doc! { "$match": { "v": { "$gt": 0 } } },
            doc! { "$count": "n" },
        ])
        .session(&mut s)
        .await?;
    let counted = agg.next(&mut s).await.transpose()?;
    assert_eq!(counted, Some(doc! { "n": 2 }), "$count in the transaction");

    // Outside: nothing of it until the commit, everything after.
    let mut other = client.start_session().await?;
    assert_eq!(all_in(&a, &mut other).await?, before, "before the commit");
    assert_eq!(ids(&b).await?, BTreeSet::from([1]), "before the commit");
    assert_eq!(a.count_documents(doc! { "v": 7 }).await?, 0);
    s.commit_transaction().await?;
    assert_eq!(all_in(&a, &mut other).await?, after, "after the commit");
    assert_eq!(ids(&b).await?, BTreeSet::from([1, 2]), "after the commit");
    Ok(())
}

/// Every read of a transaction uses its snapshot with its own writes over it: `distinct`, a
/// `find` continued by `getMore`, `$lookup` into another collection, `findAndModify`.
#[tokio::test]
async fn every_read_path_uses_the_snapshot() -> TestResult {
    let (_server, client) = replset().await?;
    let (a, b) = (coll(&client, "a"), coll(&client, "b"));
    a.insert_many((1..=3).map(|i| doc! { "_id": i, "g": "x" }))
        .await?;
    b.insert_one(doc! { "_id": 1, "k": 1 }).await?;
    let mut s = client.start_session().await?;
    s.start_transaction().await?;
    assert_eq!(a.count_documents(doc! {}).session(&mut s).await?, 3);
    // Later commits, then a write of its own.
    a.insert_one(doc! { "_id": 4, "g": "y" }).await?;
    a.update_one(doc! { "_id": 1 }, doc! { "$set": { "g": "z" } })
        .await?;
    b.insert_one(doc! { "_id": 2, "k": 1 }).await?;
    a.insert_one(doc! { "_id": 5, "g": "w" })
        .session(&mut s)
        .await?;

    let groups = a.distinct("g", doc! {}).session(&mut s).await?;
    assert_eq!(groups, vec![Bson::from("w"), Bson::from("x")], "distinct");
    let mut cursor = a
        .find(doc! {})
        .sort(doc! { "_id": 1 })
        .batch_size(1)
        .session(&mut s)
        .await?;
    let mut seen = Vec::new();
    while let Some(d) = cursor.next(&mut s).await {
        seen.push(integer(d?.get("_id")).ok_or("_id")?);
    }
    drop(cursor);
    assert_eq!(seen, vec![1, 2, 3, 5], "find and getMore");
    let mut joined = a
        .aggregate([
            doc! { "$match": { "_id": { "$in": [1, 5] } } },
            doc! { "$lookup": { "from": "b", "pipeline": [], "as": "bs" } },
            doc! { "$project": { "n": { "$size": "$bs" } } },
        ])
        .session(&mut s)
        .await?;
    let first = joined.next(&mut s).await.transpose()?;
    assert_eq!(first, Some(doc! { "_id": 1, "n": 1 }), "$lookup");
    drop(joined);
    let changed = a
        .find_one_and_update(doc! { "g": "w" }, doc! { "$set": { "g": "v" } })
        .return_document(mongodb::options::ReturnDocument::After)
        .session(&mut s)
        .await?;
    assert_eq!(changed, Some(doc! { "_id": 5, "g": "v" }), "findAndModify");
    s.commit_transaction().await?;
    let stored = drain(a.find(doc! {}).sort(doc! { "_id": 1 }).await?).await?;
    let groups: Vec<_> = stored.iter().filter_map(|d| d.get_str("g").ok()).collect();
    assert_eq!(groups, vec!["z", "x", "x", "y", "v"]);
    Ok(())
}

/// `find` with the plainest filter, `{_id: <value>}` (the driver's `find_one` by `_id`), reads
/// the transaction's snapshot and its own writes like any other filter.
#[tokio::test]
async fn find_by_id_reads_the_transaction() -> TestResult {
    let (_server, client) = replset().await?;
    let c = coll(&client, "c");
    c.insert_one(doc! { "_id": 1, "v": 0 }).await?;
    let mut s = client.start_session().await?;
    s.start_transaction().await?;
    c.insert_one(doc! { "_id": 2, "v": 0 })
        .session(&mut s)
        .await?;
    c.update_one(doc! { "_id": 1 }, doc! { "$set": { "w": 1 } })
        .session(&mut s)
        .await?;
    c.insert_one(doc! { "_id": 3, "v": 0 }).await?;
    let read = |id: i32| doc! { "_id": id };
    assert_eq!(
        c.find_one(read(2)).session(&mut s).await?,
        Some(doc! { "_id": 2, "v": 0 }),
        "its own insert"
    );
    assert_eq!(
        c.find_one(read(1)).session(&mut s).await?,
        Some(doc! { "_id": 1, "v": 0, "w": 1 }),
        "its own update"
    );
    assert_eq!(
        c.find_one(read(3)).session(&mut s).await?,
        None,
        "a later commit"
    );
    s.abort_transaction().await?;
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// 2. Atomicity after kill -9
// ---------------------------------------------------------------------------------------------

/// Concurrent writers of [`all_or_nothing_after_kill_9`].
const WRITERS: i64 = 4;
/// Rounds of load and SIGKILL.
const KILL_ROUNDS: i64 = 3;

/// What a writer learned of its transactions.
#[derive(Default)]
struct Ledger {
    /// Committed (the commit was acknowledged).
    acked: Vec<i64>,
    /// The commit was sent, and the kill cut off its answer.
    unknown: Vec<i64>,
    /// Transactions that lost a write conflict and ran again.
    retries: u64,
}

/// Transaction `k` inserts `{_id: k}` into `a` and into `b` and adds one to the counter: each
/// writer runs its own `k`s (`first`, `first + WRITERS`, …) until `stop`.
async fn txn_writer(client: Client, first: i64, stop: Arc<AtomicBool>) -> TestResult<Ledger> {
    let (a, b, n) = (coll(&client, "a"), coll(&client, "b"), coll(&client, "n"));
    let mut ledger = Ledger::default();
    let mut rng = Rng(u64::try_from(first)?);
    let mut s = client.start_session().await?;
    let mut k = first;
    while !stop.load(Ordering::SeqCst) {
        let attempt = async {
            s.start_transaction().await?;
            n.update_one(doc! { "_id": "n" }, doc! { "$inc": { "n": 1 } })
                .session(&mut s)
                .await?;
            a.insert_one(doc! { "_id": k }).session(&mut s).await?;
            b.insert_one(doc! { "_id": k }).session(&mut s).await?;
            Ok::<_, mongodb::error::Error>(())
        }
        .await;
        if let Err(e) = attempt {
            if stop.load(Ordering::SeqCst) {
                break; // Never committed: the commit was not sent.
            }
            if e.contains_label(TRANSIENT) {
                ledger.retries += 1;
                let _ = s.abort_transaction().await;
                backoff(&mut rng).await;
                continue;
            }
            return Err(format!("transaction {k} failed while the server was up: {e}").into());
        }
        match s.commit_transaction().await {
            Ok(()) => {
                ledger.acked.push(k);
                k += WRITERS;
            }
            Err(_) if stop.load(Ordering::SeqCst) => {
                ledger.unknown.push(k);
                break;
            }
            Err(e) if e.contains_label(TRANSIENT) => {
                ledger.retries += 1;
                backoff(&mut rng).await;
            }
            Err(e) => return Err(format!("commit {k} failed while the server was up: {e}").into()),
        }
    }
    Ok(ledger)
}

/// Checks what a restarted server holds against what the writers learned: every transaction
/// whole or absent, every acknowledged one there, nothing never committed there, and the counter
/// equal to the number of transactions present. Returns the transactions present.
async fn check_all_or_nothing(
    client: &Client,
    acked: &BTreeSet<i64>,
    unknown: &BTreeSet<i64>,
) -> TestResult<BTreeSet<i64>> {
    let in_a = ids(&coll(client, "a")).await?;
    let in_b = ids(&coll(client, "b")).await?;
    let torn: Vec<_> = in_a.symmetric_difference(&in_b).collect();
    assert!(
        torn.is_empty(),
        "transactions in one collection only: {torn:?}"
    );
    let lost: Vec<_> = acked.difference(&in_a).collect();
    assert!(lost.is_empty(), "acknowledged commits lost: {lost:?}");
    let stray: Vec<_> = in_a
        .iter()
        .filter(|k| !acked.contains(k) && !unknown.contains(k))
        .collect();
    assert!(stray.is_empty(), "never committed, yet there: {stray:?}");
    let counter = coll(client, "n")
        .find_one(doc! { "_id": "n" })
        .await?
        .ok_or("no counter")?;
    assert_eq!(
        integer(counter.get("n")),
        Some(i64::try_from(in_a.len())?),
        "the counter counts the transactions present"
    );
    Ok(in_a)
}

/// A durable server under a stream of transactions, each writing two collections and a shared
/// counter (so that they conflict, and retry), is killed with SIGKILL at a random moment, and
/// restarted on the same directory: each transaction is there whole or not at all.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn all_or_nothing_after_kill_9() -> TestResult {
    let dir = data_dir("ebb-txn-kill-")?;
    let args = ["--replSet", SET, QUICK_DRAIN[0], QUICK_DRAIN[1]];
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .subsec_nanos();
    println!("all_or_nothing_after_kill_9: seed {seed}");
    let mut rng = Rng(u64::from(seed));
    let mut acked = BTreeSet::new();
    let mut alarms = Vec::new();
    for round in 0..=KILL_ROUNDS {
        let mut server = EbbProcess::start(dir.path(), &args).await?;
        let client = server.client().await?;
        if round == 0 {
            coll(&client, "n")
                .insert_one(doc! { "_id": "n", "n": 0 })
                .await?;
        }
        let present = check_all_or_nothing(&client, &acked, &BTreeSet::new()).await?;
        assert_eq!(
            present, acked,
            "round {round}: every unknown one was resolved"
        );
        if round == KILL_ROUNDS {
            server.terminate().await?;
            alarms.extend(server.alarming_lines());
            break;
        }
        let stop = Arc::new(AtomicBool::new(false));
        let base = round * 1_000_000;
        let mut writers = Vec::new();
        for w in 0..WRITERS {
            let client = server.client().await?;
            writers.push(tokio::spawn(txn_writer(
                client,
                base + w,
                Arc::clone(&stop),
            )));
        }
        // Let the stream get going, then kill it at a random moment.
        let began = Instant::now();
        while ids(&coll(&client, "a")).await?.len() < acked.len() + 20 {
            assert!(
                began.elapsed() < Duration::from_secs(30),
                "round {round}: the writers commit nothing"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        tokio::time::sleep(Duration::from_millis(rng.below_u64(300))).await;
        stop.store(true, Ordering::SeqCst);
        server.kill_9().await?;
        alarms.extend(server.alarming_lines());
        drop(client);
        let mut unknown = BTreeSet::new();
        let (mut committed, mut retries) = (0, 0);
        for writer in writers {
            let ledger = tokio::time::timeout(Duration::from_secs(30), writer)
                .await
                .map_err(|_| "a writer still running after the kill")???;
            committed += ledger.acked.len();
            retries += ledger.retries;
            acked.extend(ledger.acked);
            unknown.extend(ledger.unknown);
        }
        let server = EbbProcess::start(dir.path(), &args).await?;
        let client = server.client().await?;
        let present = check_all_or_nothing(&client, &acked, &unknown).await?;
        let applied = unknown.intersection(&present).count();
        println!(
            "round {round}: {committed} commits acknowledged, {retries} retried after a \
             conflict; {} cut off by the kill ({applied} committed)",
            unknown.len()
        );
        acked.extend(unknown.intersection(&present));
        drop(client);
        drop(server);
    }
    let bad: Vec<_> = alarms.iter().filter(|a| is_error(a)).collect();
    assert!(bad.is_empty(), "the server logged: {bad:#?}");
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// 3. A commit retried after a restart
// ---------------------------------------------------------------------------------------------

/// The session's record of a committed transaction is written with it: after a restart,
/// `commitTransaction` for it again (same `lsid` and `txnNumber`) answers `ok: 1` without
/// applying anything twice, and `abortTransaction` for it is `TransactionCommitted` (256).
#[tokio::test]
async fn a_commit_retried_after_a_restart_is_not_applied_again() -> TestResult {
    let dir = data_dir("ebb-txn-retry-")?;
    let set = |c: &mut ebb::Config| c.repl_set = Some(SET.to_owned());
    let server = TestServer::start_durable(dir.path(), set).await?;
    let client = server
        .client_discovering(&format!("replicaSet={SET}&retryWrites=false"))
        .await?;
    coll(&client, "n")
        .insert_one(doc! { "_id": "n", "n": 0 })
        .await?;
    let mut s = client.start_session().await?;
    let lsid = s.id().clone();
    s.start_transaction().await?;
    coll(&client, "a")
        .insert_one(doc! { "_id": 1 })
        .session(&mut s)
        .await?;
    coll(&client, "n")
        .update_one(doc! { "_id": "n" }, doc! { "$inc": { "n": 1 } })
        .session(&mut s)
        .await?;
    s.commit_transaction().await?;
    drop(s);
    drop(client);
    server.stop().await?;

    let server = TestServer::start_durable(dir.path(), set).await?;
    let client = server
        .client_discovering(&format!("replicaSet={SET}&retryWrites=false"))
        .await?;
    // The driver's first transaction on a session is number 1.
    let end = |command: &str| {
        doc! { command: 1, "lsid": lsid.clone(), "txnNumber": 1_i64, "autocommit": false }
    };
    let admin = client.database("admin");
    for _ in 0..2 {
        let reply = admin.run_command(end("commitTransaction")).await?;
        assert_eq!(reply.get_f64("ok").ok(), Some(1.0), "{reply}");
    }
    assert_eq!(ids(&coll(&client, "a")).await?, BTreeSet::from([1]));
    let counter = coll(&client, "n").find_one(doc! { "_id": "n" }).await?;
    assert_eq!(
        counter,
        Some(doc! { "_id": "n", "n": 1 }),
        "incremented once"
    );
    let err = admin
        .run_command(end("abortTransaction"))
        .await
        .expect_err("abort after the commit");
    assert_command_error(
        command_error(&err).ok_or_else(|| format!("{err}"))?,
        256,
        "TransactionCommitted",
    );
    server.stop().await?;
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// 4. Concurrent money transfers
// ---------------------------------------------------------------------------------------------

const ACCOUNTS: i64 = 10;
const INITIAL: i64 = 1_000;
const TASKS: u64 = 16;
const TRANSFERS: usize = 25;

/// One transfer of up to `amount` from `from` to `to`, in `s`'s open transaction: reads both
/// balances, moves what `from` can give. Returns the amount moved.
async fn transfer(
    accounts: &Collection<Document>,
    s: &mut ClientSession,
    (from, to, amount): (i64, i64, i64),
) -> mongodb::error::Result<i64> {
    let balance = |d: Option<Document>| d.and_then(|d| integer(d.get("balance")));
    let have = balance(
        accounts
            .find_one(doc! { "_id": from })
            .session(&mut *s)
            .await?,
    );
    let other = balance(
        accounts
            .find_one(doc! { "_id": to })
            .session(&mut *s)
            .await?,
    );
    let (Some(have), Some(_)) = (have, other) else {
        return Err(mongodb::error::Error::custom("an account is missing"));
    };
    let x = amount.min(have);
    accounts
        .update_one(doc! { "_id": from }, doc! { "$inc": { "balance": -x } })
        .session(&mut *s)
        .await?;
    accounts
        .update_one(doc! { "_id": to }, doc! { "$inc": { "balance": x } })
        .session(&mut *s)
        .await?;
    Ok(x)
}

/// One task's transfers, each retried until it commits; returns the net change to each
/// account of the committed ones, and how many times it retried.
async fn transfers(client: Client, task: u64) -> TestResult<(Vec<i64>, u64)> {
    let accounts = coll(&client, "accounts");
    let mut rng = Rng(task.wrapping_mul(0x2545_F491_4F6C_DD1D));
    let mut s = client.start_session().await?;
    let mut net = vec![0_i64; usize::try_from(ACCOUNTS)?];
    let mut retries = 0;
    let n = u64::try_from(ACCOUNTS)?;
    for _ in 0..TRANSFERS {
        let from = rng.below_u64(n);
        let to = (from + 1 + rng.below_u64(n - 1)) % n;
        let amount = i64::try_from(1 + rng.below_u64(300))?;
        let wanted = (i64::try_from(from)?, i64::try_from(to)?, amount);
        let moved = loop {
            s.start_transaction().await?;
            let outcome = match transfer(&accounts, &mut s, wanted).await {
                Ok(x) => s.commit_transaction().await.map(|()| x),
                Err(e) => {
                    let _ = s.abort_transaction().await;
                    Err(e)
                }
            };
            match outcome {
                Ok(x) => break x,
                Err(e) if e.contains_label(TRANSIENT) => {
                    retries += 1;
                    backoff(&mut rng).await;
                }
                Err(e) => return Err(format!("task {task}: {e}").into()),
            }
        };
        net[usize::try_from(from)?] -= moved;
        net[usize::try_from(to)?] += moved;
    }
    Ok((net, retries))
}

/// 16 tasks, each with its own session, move money between 10 accounts in transactions
/// (reading both balances, then `$inc` on each), retrying those that lose a conflict: the total
/// is unchanged, no balance is negative, and each equals its initial one plus the net of the
/// committed transfers.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sixteen_concurrent_transfers_keep_the_total() -> TestResult {
    let (_server, client) = replset().await?;
    let accounts = coll(&client, "accounts");
    accounts
        .insert_many((0..ACCOUNTS).map(|i| doc! { "_id": i, "balance": INITIAL }))
        .await?;
    let tasks: Vec<_> = (0..TASKS)
        .map(|t| tokio::spawn(transfers(client.clone(), t)))
        .collect();
    let mut expected = vec![INITIAL; usize::try_from(ACCOUNTS)?];
    let mut retries = 0;
    for task in tasks {
        let (net, r) = tokio::time::timeout(Duration::from_secs(120), task)
            .await
            .map_err(|_| "the transfers did not end within 120 s")???;
        retries += r;
        for (e, n) in expected.iter_mut().zip(net) {
            *e += n;
        }
    }
    println!(
        "{} transfers, {retries} retried",
        TASKS * u64::try_from(TRANSFERS)?
    );
    let stored = drain(accounts.find(doc! {}).sort(doc! { "_id": 1 }).await?).await?;
    let balances: Vec<i64> = stored
        .iter()
        .map(|d| integer(d.get("balance")).ok_or_else(|| format!("balance of {d}")))
        .collect::<Result<_, _>>()?;
    assert_eq!(
        balances.iter().sum::<i64>(),
        ACCOUNTS * INITIAL,
        "the total"
    );
    assert!(balances.iter().all(|b| *b >= 0), "{balances:?}");
    assert_eq!(
        balances, expected,
        "each balance is its committed transfers'"
    );
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// 5. Conflicts, waits, aborts
// ---------------------------------------------------------------------------------------------

/// A second transaction writing a document the first holds gets `WriteConflict` (112) at once,
/// labelled `TransientTransactionError`, and is aborted: once the first commits, the second's
/// commit is `NoSuchTransaction` (251). The first one's write is what is stored.
#[tokio::test]
async fn the_second_writer_of_a_document_gets_write_conflict() -> TestResult {
    let (_server, client) = replset().await?;
    let c = coll(&client, "c");
    c.insert_one(doc! { "_id": 1, "v": 0 }).await?;
    let (mut s1, mut s2) = (client.start_session().await?, client.start_session().await?);
    s1.start_transaction().await?;
    s2.start_transaction().await?;
    c.update_one(doc! { "_id": 1 }, doc! { "$set": { "v": 1 } })
        .session(&mut s1)
        .await?;
    let began = Instant::now();
    let err = c
        .update_one(doc! { "_id": 1 }, doc! { "$set": { "v": 2 } })
        .session(&mut s2)
        .await
        .expect_err("the second writer");
    assert!(began.elapsed() < Duration::from_secs(2), "not at once");
    assert_command_error(
        command_error(&err).ok_or_else(|| format!("{err}"))?,
        112,
        "WriteConflict",
    );
    assert!(err.contains_label(TRANSIENT), "{err:?}");
    s1.commit_transaction().await?;
    let err = s2
        .commit_transaction()
        .await
        .expect_err("the second's commit");
    assert_command_error(
        command_error(&err).ok_or_else(|| format!("{err}"))?,
        251,
        "NoSuchTransaction",
    );
    assert!(err.contains_label(TRANSIENT), "{err:?}");
    assert_eq!(
        c.find_one(doc! { "_id": 1 }).await?,
        Some(doc! { "_id": 1, "v": 1 })
    );

    // A document changed by a commit made after the snapshot: writing it is a conflict too
    // (the transaction would overwrite what it never saw).
    s2.start_transaction().await?;
    assert_eq!(c.count_documents(doc! {}).session(&mut s2).await?, 1);
    c.update_one(doc! { "_id": 1 }, doc! { "$set": { "v": 3 } })
        .await?;
    let err = c
        .update_one(doc! { "_id": 1 }, doc! { "$inc": { "v": 10 } })
        .session(&mut s2)
        .await
        .expect_err("a write over a later commit");
    assert_eq!(command_error(&err).map(|ce| ce.code), Some(112), "{err:?}");
    assert!(err.contains_label(TRANSIENT), "{err:?}");
    let _ = s2.abort_transaction().await;
    assert_eq!(
        c.find_one(doc! { "_id": 1 }).await?,
        Some(doc! { "_id": 1, "v": 3 })
    );
    Ok(())
}

/// A write outside transactions to a document a transaction holds waits until the transaction
/// ends, then applies over what it committed; with `maxTimeMS` the wait ends with
/// `MaxTimeMSExpired` (50) and the write is not applied.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_outside_waits_for_the_transaction_holding_its_document() -> TestResult {
    let (_server, client) = replset().await?;
    let c = coll(&client, "c");
    c.insert_one(doc! { "_id": 1, "v": 0, "w": 0 }).await?;
    let mut s = client.start_session().await?;
    s.start_transaction().await?;
    c.update_one(doc! { "_id": 1 }, doc! { "$set": { "v": 1 } })
        .session(&mut s)
        .await?;
    let outside = tokio::spawn({
        let c = c.clone();
        async move {
            c.update_one(doc! { "_id": 1 }, doc! { "$inc": { "w": 1 } })
                .await
                .map(|r| (r.modified_count, Instant::now()))
        }
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!outside.is_finished(), "the write did not wait");
    // Reads do not wait: they see the last commit.
    assert_eq!(
        c.find_one(doc! { "_id": 1 }).await?,
        Some(doc! { "_id": 1, "v": 0, "w": 0 })
    );
    let before_commit = Instant::now();
    s.commit_transaction().await?;
    let (modified, done) = tokio::time::timeout(Duration::from_secs(10), outside)
        .await
        .map_err(|_| "the write still waits after the commit")???;
    assert_eq!(modified, 1);
    assert!(
        done >= before_commit,
        "the write returned before the commit"
    );
    assert_eq!(
        c.find_one(doc! { "_id": 1 }).await?,
        Some(doc! { "_id": 1, "v": 1, "w": 1 })
    );

    // Bounded by maxTimeMS.
    s.start_transaction().await?;
    c.update_one(doc! { "_id": 1 }, doc! { "$set": { "v": 2 } })
        .session(&mut s)
        .await?;
    let began = Instant::now();
    let err = client
        .database(DB)
        .run_command(doc! {
            "update": "c",
            "updates": [{ "q": { "_id": 1 }, "u": { "$inc": { "w": 1 } } }],
            "maxTimeMS": 300,
        })
        .await
        .expect_err("the wait outlasts maxTimeMS");
    let waited = began.elapsed();
    assert_command_error(
        command_error(&err).ok_or_else(|| format!("{err}"))?,
        50,
        "MaxTimeMSExpired",
    );
    assert!(
        waited >= Duration::from_millis(250) && waited < Duration::from_secs(5),
        "waited {waited:?}"
    );
    s.abort_transaction().await?;
    assert_eq!(
        c.find_one(doc! { "_id": 1 }).await?,
        Some(doc! { "_id": 1, "v": 1, "w": 1 }),
        "neither the aborted transaction nor the timed-out write"
    );
    Ok(())
}

/// An insert outside transactions of an `_id` an open transaction inserted waits for it: after
/// its commit the insert is a duplicate key (11000); after its abort the insert succeeds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_insert_outside_waits_for_a_transaction_inserting_the_same_id() -> TestResult {
    let (_server, client) = replset().await?;
    let c = coll(&client, "c");
    c.insert_one(doc! { "_id": 0 }).await?;
    let mut s = client.start_session().await?;
    for commit in [true, false] {
        let id = if commit { 1 } else { 2 };
        s.start_transaction().await?;
        c.insert_one(doc! { "_id": id, "by": "txn" })
            .session(&mut s)
            .await?;
        let outside = tokio::spawn({
            let c = c.clone();
            async move { c.insert_one(doc! { "_id": id, "by": "outside" }).await }
        });
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(!outside.is_finished(), "the insert did not wait");
        if commit {
            s.commit_transaction().await?;
        } else {
            s.abort_transaction().await?;
        }
        let result = tokio::time::timeout(Duration::from_secs(10), outside)
            .await
            .map_err(|_| "the insert still waits after the transaction ended")??;
        let by = if commit {
            let err = result.expect_err("a duplicate of the committed one");
            let code = common::write_error(&err).map(|we| we.code);
            assert_eq!(code, Some(11000), "{err:?}");
            "txn"
        } else {
            result?;
            "outside"
        };
        assert_eq!(
            c.find_one(doc! { "_id": id }).await?,
            Some(doc! { "_id": id, "by": by })
        );
    }
    Ok(())
}

/// `abortTransaction` leaves nothing of the transaction behind (inserts, updates, deletes in
/// two collections), and lets go of its documents: another transaction writes them at once.
/// `count` is refused in a transaction (mongod's `OperationNotSupportedInTransaction`, 263).
#[tokio::test]
async fn abort_leaves_nothing_behind() -> TestResult {
    let (_server, client) = replset().await?;
    let (a, b) = (coll(&client, "a"), coll(&client, "b"));
    a.insert_many([doc! { "_id": 1, "v": 0 }, doc! { "_id": 2, "v": 0 }])
        .await?;
    b.insert_one(doc! { "_id": 1, "v": 0 }).await?;
    let mut s = client.start_session().await?;
    s.start_transaction().await?;
    a.insert_one(doc! { "_id": 3 }).session(&mut s).await?;
    a.update_many(doc! {}, doc! { "$set": { "v": 9 } })
        .session(&mut s)
        .await?;
    b.delete_one(doc! { "_id": 1 }).session(&mut s).await?;
    b.insert_one(doc! { "_id": 2 }).session(&mut s).await?;
    assert_eq!(a.count_documents(doc! { "v": 9 }).session(&mut s).await?, 3);
    // `count` is refused in a transaction (`countDocuments`, an aggregation, is not).
    let err = client
        .database(DB)
        .run_command(doc! { "count": "a" })
        .session(&mut s)
        .await
        .expect_err("count in a transaction");
    assert_command_error(
        command_error(&err).ok_or_else(|| format!("{err}"))?,
        263,
        "OperationNotSupportedInTransaction",
    );
    s.abort_transaction().await?;

    let stored_a = drain(a.find(doc! {}).sort(doc! { "_id": 1 }).await?).await?;
    assert_eq!(
        stored_a,
        vec![doc! { "_id": 1, "v": 0 }, doc! { "_id": 2, "v": 0 }]
    );
    let stored_b = drain(b.find(doc! {}).await?).await?;
    assert_eq!(stored_b, vec![doc! { "_id": 1, "v": 0 }]);

    // Its documents are free: a new transaction writes them without a conflict.
    s.start_transaction().await?;
    a.update_one(doc! { "_id": 1 }, doc! { "$set": { "v": 1 } })
        .session(&mut s)
        .await?;
    a.insert_one(doc! { "_id": 3, "v": 1 })
        .session(&mut s)
        .await?;
    s.commit_transaction().await?;
    assert_eq!(ids(&a).await?, BTreeSet::from([1, 2, 3]));
    Ok(())
}

/// Collections a transaction created (by an insert, by `createIndexes`) are part of it: nobody
/// else sees them before it ends, and after `abortTransaction` they do not exist.
#[tokio::test]
async fn abort_drops_the_collections_the_transaction_created() -> TestResult {
    let (_server, client) = replset().await?;
    let db = client.database(DB);
    db.create_collection("existing").await?;
    let mut s = client.start_session().await?;
    s.start_transaction().await?;
    coll(&client, "fresh")
        .insert_one(doc! { "_id": 1 })
        .session(&mut s)
        .await?;
    let indexes =
        doc! { "createIndexes": "indexed", "indexes": [{ "key": { "a": 1 }, "name": "a_1" }] };
    db.run_command(indexes).session(&mut s).await?;
    let only_existing = vec!["existing".to_owned()];
    assert_eq!(db.list_collection_names().await?, only_existing, "before");
    s.abort_transaction().await?;
    assert_eq!(db.list_collection_names().await?, only_existing, "after");
    db.create_collection("fresh").await?;
    db.create_collection("indexed").await?;
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// TTL inside transactions
// ---------------------------------------------------------------------------------------------

/// TTL is exact inside a transaction too: a document, stored before the transaction started or
/// written by it, is invisible to it from its expiry instant on (the server's clock, moved by
/// the test-only `ebbAdvanceClock`), and what the transaction wrote expires as any write does.
#[tokio::test]
async fn a_document_expires_inside_a_transaction_at_its_instant() -> TestResult {
    let server = TestServer::start_with(|c| {
        c.repl_set = Some(SET.to_owned());
        c.enable_test_commands = true;
    })
    .await?;
    let client = server
        .client_discovering(&format!("replicaSet={SET}"))
        .await?;
    let now = common::advance_clock(&client, 0).await?;
    let c = coll(&client, "ttl");
    client
        .database(DB)
        .run_command(doc! {
            "createIndexes": "ttl",
            "indexes": [{ "key": { "at": 1 }, "name": "at_1", "expireAfterSeconds": 0 }],
        })
        .await?;
    let at = bson::DateTime::from_millis(now.timestamp_millis() + 10_000);
    c.insert_one(doc! { "_id": 1, "at": at }).await?;
    let mut s = client.start_session().await?;
    s.start_transaction().await?;
    c.insert_one(doc! { "_id": 2, "at": at })
        .session(&mut s)
        .await?;
    let seen = drain_session(&c, &mut s, doc! {}).await?;
    assert_eq!(seen.len(), 2, "both live before the instant: {seen:?}");
    common::advance_clock(&client, 10_000).await?;
    let seen = drain_session(&c, &mut s, doc! {}).await?;
    assert!(
        seen.is_empty(),
        "both expired at the instant, inside the transaction: {seen:?}"
    );
    let by_id = c.find_one(doc! { "_id": 2 }).session(&mut s).await?;
    assert!(by_id.is_none(), "by _id too: {by_id:?}");
    s.commit_transaction().await?;
    assert!(ids(&c).await?.is_empty(), "and outside after the commit");
    Ok(())
}

/// The documents `filter` matches in `c`, read in `session`'s transaction.
async fn drain_session(
    c: &Collection<Document>,
    session: &mut ClientSession,
    filter: Document,
) -> TestResult<Vec<Document>> {
    let mut cursor = c.find(filter).session(&mut *session).await?;
    let mut out = Vec::new();
    while let Some(d) = cursor.next(&mut *session).await {
        out.push(d?);
    }
    Ok(out)
}

/// Dropping a collection an open transaction wrote to waits for the transaction to end (as
/// mongod's drop waits for the collection's exclusive lock), so the commit lands; a `maxTimeMS`
/// on the drop ends the wait with `MaxTimeMSExpired` and drops nothing.
#[tokio::test]
async fn a_drop_waits_for_the_transaction_that_wrote_to_the_collection() -> TestResult {
    let (_server, client) = replset().await?;
    let c = coll(&client, "ddl");
    c.insert_one(doc! { "_id": 0 }).await?;
    let mut s = client.start_session().await?;
    s.start_transaction().await?;
    c.insert_one(doc! { "_id": 1 }).session(&mut s).await?;
    let db = client.database(DB);
    let err = db
        .run_command(doc! { "drop": "ddl", "maxTimeMS": 200 })
        .await
        .err()
        .ok_or("the drop did not wait")?;
    assert_command_error(
        command_error(&err).ok_or("not a command error")?,
        50,
        "MaxTimeMSExpired",
    );
    let dropper = {
        let db = db.clone();
        tokio::spawn(async move { db.run_command(doc! { "drop": "ddl" }).await })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !dropper.is_finished(),
        "the drop waits while the transaction is open"
    );
    s.commit_transaction().await?;
    dropper.await??;
    assert!(ids(&c).await?.is_empty(), "dropped after the commit");
    Ok(())
}
