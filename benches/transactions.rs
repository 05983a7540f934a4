//! What do sessions, retryable writes and multi-document transactions cost, next to the same
//! writes without them, measured in the same run? Issue #13, "A replica set of one".
//!
//! One process: Ebb on a durable store in a temporary directory, started as the primary of the
//! one-member replica set `rs0` (`--replSet rs0`, [`ebb::Config::repl_set`]) with
//! [`ebb::run`] in its own 2-worker tokio runtime on its own thread, as on the 2-core target;
//! the `mongodb` driver in a second 2-worker runtime plays the clients (`directConnection`, so
//! the driver sees an `RSPrimary`: it sends transactions and retryable writes). Every write
//! uses the default write concern, which Ebb acknowledges once the write is on disk. Each line
//! makes its sides take turns, in blocks whose order rotates every round, so that machine
//! noise hits every side alike; goals use the median of the per-round ratios (robust to a disk
//! stall hitting one round), the ratio of the totals is printed beside it.
//!
//! 1. **A two-update transaction against one durable update.** Sequential on one connection,
//!    over [`LATENCY_DOCS`] documents `{_id, n}`: `update_one({_id: k}, {$inc: {n: 1}})`
//!    (a retryable write, as the driver sends it by default) against a transaction: start,
//!    the same update of two different documents, commit. Latency of the whole transaction
//!    (from `start_transaction` to the commit's reply) and of its `commitTransaction` alone;
//!    p50 of each over the p50 of the single update. Goal: ≤ 2×. Every update must modify one
//!    document, and every document must end with the count of updates it was sent.
//! 2. **A retryable insert against a plain one.** Two clients, `retryWrites=true` and
//!    `retryWrites=false` (checked first through command monitoring: the first sends a
//!    `txnNumber` with its inserts, the other does not), `insert_one` of the same small
//!    documents into one collection: p50 latency sequential on one connection, and documents/s
//!    of [`WRITERS`] concurrent writers (time-bounded slices, the sides taking turns). Goal: the
//!    retryable insert costs ≤ 1.1× the plain one, in latency (p50 over p50) and in throughput
//!    (plain rate over retryable rate). The collection must end with every document inserted,
//!    once.
//! 3. **Conflicting transfers.** [`TRANSFER_TASKS`] tasks, one connection and one session
//!    each, transfer 1 between random pairs of [`ACCOUNTS`] accounts `{_id, balance}`, so that
//!    they collide: a transaction of two `$inc` updates and a commit, started again from the top
//!    on a `TransientTransactionError` (the `WriteConflict` of the second writer of an account;
//!    the commit is retried alone on `UnknownTransactionCommitResult`), against the same two
//!    updates without a transaction (retryable writes, on the same sessions). The transactions
//!    run twice: through the driver's `withTransaction` (`start_transaction().and_run`), which
//!    waits the convenient-API specification's backoff before starting again (what an
//!    application gets), and through a hand loop that starts again at once (the manual's retry
//!    example). Completed transfers/s of each, in time-bounded slices, the sides taking turns.
//!    Goal: transactions through `withTransaction` reach ≥ 50% of the updates' throughput; the
//!    hand loop's ratio is printed beside it, with the conflict rate of both (attempts ended by
//!    a transient error, over attempts). Every account must end with the balance its transfers
//!    sum to.
//!
//! For the throughput sides, the CPU time the process used per operation is printed too, split
//! between the client runtime's threads and the rest (the server): on a machine whose cores are
//! busy, throughput follows it.
//!
//! The goals are printed as PASS or MISS and never change the exit status: this is a
//! measurement, not a test. The run fails (non-zero) only if the server cannot be started or
//! answers wrongly.
//!
//! `EBB_BENCH_SCALE` (a float, default 1.0) scales every count and every block's duration.
//! `EBB_BENCH_ONLY=commit`, `retryable` or `transfers` runs one line alone (for profiling).
//! `EBB_BENCH_ACCOUNTS` (an integer, at least 2) sets line 3's number of accounts, for
//! measuring its ratio at other degrees of contention.

#[path = "common/mod.rs"]
mod common;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bson::{Bson, Document, doc};
use common::{
    BenchResult, Cpu, Samples, Server, XorShift, integer, median, per_second, run_bench, scale,
    scaled, scaled_duration, to_f64, verdict,
};
use mongodb::error::{TRANSIENT_TRANSACTION_ERROR, UNKNOWN_TRANSACTION_COMMIT_RESULT};
use mongodb::event::EventHandler;
use mongodb::event::command::CommandEvent;
use mongodb::options::ClientOptions;
use mongodb::{Client, ClientSession, Collection};

/// The replica set's name.
const SET_NAME: &str = "rs0";
const DB: &str = "txnbench";
/// Interleaved rounds of every line.
const ROUNDS: usize = 6;

/// Line 1: documents updated, in turn.
const LATENCY_DOCS: usize = 1_000;
/// Line 1: single updates and transactions per round (scaled), each.
const LATENCY_PER_ROUND: f64 = 200.0;
/// Line 1 and the sequential half of line 2: operations of one kind before the other's turn.
const LATENCY_BLOCK: usize = 20;
/// Most time one round of a sequential line may take (scaled): a slow disk makes a round stop
/// early (after a whole block) instead of blowing the time budget.
const ROUND_CAP: Duration = Duration::from_secs(4);
/// Goal of line 1: p50(transaction) over p50(update), at most.
const COMMIT_GOAL: f64 = 2.0;

/// Line 2: sequential inserts per round (scaled), each kind.
const INSERTS_PER_ROUND: f64 = 200.0;
/// Line 2: concurrent writers of each kind.
const WRITERS: usize = 8;
/// Line 2 (concurrent half) and line 3: how long one side runs in one round (scaled), in
/// [`SLICES`] slices taking turns with the other sides'.
const BLOCK_TIME: Duration = Duration::from_secs(1);
/// Line 2 (concurrent half) and line 3: slices of a round.
const SLICES: u32 = 4;
/// The least a time-bounded slice runs, whatever the scale.
const MIN_BLOCK_TIME: Duration = Duration::from_millis(100);
/// Goal of line 2: retryable cost over plain cost, at most.
const RETRYABLE_GOAL: f64 = 1.1;

/// Line 3: concurrent transferring tasks (connections, sessions).
const TRANSFER_TASKS: usize = 16;
/// Line 3: accounts the transfers move between, unless `EBB_BENCH_ACCOUNTS` says otherwise
/// (fewer accounts, more conflicts).
const ACCOUNTS: usize = 8;
/// Line 3: every account's starting balance.
const OPENING_BALANCE: i64 = 1_000_000;
/// Goal of line 3: transaction throughput over plain throughput, at least.
const TRANSFER_GOAL: f64 = 0.5;
/// Line 3: attempts of one transfer before the run gives up (a livelock would be a bug).
const MAX_ATTEMPTS: usize = 10_000;

/// Per-round ratios further apart than this (largest / smallest) mean the machine was noisy.
const NOISY_SPREAD: f64 = 1.25;

fn main() {
    run_bench("transactions", bench());
}

/// One goal's line for the summary.
struct Goal {
    text: String,
    pass: bool,
}

async fn bench() -> BenchResult {
    let scale = scale();
    header(scale);
    let server = Server::start_with(|c| c.repl_set = Some(SET_NAME.into()))?;
    println!("Ebb store: {}", server.data_dir().display());
    let client = client(server.addr, "ebb-txn-bench", TRANSFER_TASKS, None).await?;
    check_replica_set(&client).await?;

    let only = std::env::var("EBB_BENCH_ONLY").unwrap_or_default();
    let wanted = |line: &str| only.is_empty() || only == line;
    let mut goals = Vec::new();
    if wanted("commit") {
        goals.extend(commit_line(&client, scale).await?);
    }
    if wanted("retryable") {
        goals.extend(retryable_line(server.addr, scale).await?);
    }
    if wanted("transfers") {
        goals.extend(transfer_line(&client, scale).await?);
    }

    println!();
    println!("goals (informational, never fail the run):");
    for goal in goals {
        println!("  {}  {}", goal.text, verdict(goal.pass));
    }
    println!();
    drop(client);
    server.stop()
}

fn header(scale: f64) {
    println!();
    println!(
        "Ebb transactions and retryable writes vs the same writes without them ({} build, {} \
         CPUs, {} server / {} client runtime workers, replica set {SET_NAME}, durable store, \
         EBB_BENCH_SCALE={scale})",
        if cfg!(debug_assertions) {
            "DEBUG"
        } else {
            "release"
        },
        std::thread::available_parallelism().map_or(0, std::num::NonZero::get),
        common::SERVER_WORKERS,
        common::CLIENT_WORKERS,
    );
    common::print_load_average();
}

/// A driver client for `addr` (`directConnection`), at most `pool` connections, `retryWrites`
/// as given (the driver's default, true, when `None`).
async fn client(
    addr: SocketAddr,
    app: &str,
    pool: usize,
    retry_writes: Option<bool>,
) -> BenchResult<Client> {
    let options = client_options(addr, app, pool, retry_writes).await?;
    Ok(Client::with_options(options)?)
}

async fn client_options(
    addr: SocketAddr,
    app: &str,
    pool: usize,
    retry_writes: Option<bool>,
) -> BenchResult<ClientOptions> {
    let mut options = ClientOptions::parse(format!(
        "mongodb://{addr}/?directConnection=true&serverSelectionTimeoutMS=10000"
    ))
    .await?;
    options.app_name = Some(app.into());
    options.max_pool_size = Some(u32::try_from(pool)?);
    options.retry_writes = retry_writes;
    Ok(options)
}

/// The server must say it is the writable primary of [`SET_NAME`], or nothing here measures
/// what it claims to.
async fn check_replica_set(client: &Client) -> BenchResult {
    let hello = client
        .database("admin")
        .run_command(doc! { "hello": 1 })
        .await?;
    let set = hello.get_str("setName").ok();
    let primary = hello.get_bool("isWritablePrimary").ok();
    if set != Some(SET_NAME) || primary != Some(true) {
        return Err(format!("the server is not the primary of {SET_NAME}: hello = {hello}").into());
    }
    Ok(())
}

/// `p50(a) / p50(b)`, 0 when `b` has no samples.
fn p50_ratio(a: &Samples, b: &Samples) -> f64 {
    let base = b.quantile_us(0.5);
    if base > 0.0 {
        a.quantile_us(0.5) / base
    } else {
        0.0
    }
}

fn spread_warning(what: &str, ratios: &[f64]) {
    let lo = ratios.iter().copied().fold(f64::MAX, f64::min);
    let hi = ratios.iter().copied().fold(f64::MIN, f64::max);
    if lo > 0.0 && hi / lo > NOISY_SPREAD {
        println!(
            "  warning: {what} rounds disagree (ratios {lo:.3}..{hi:.3}): the machine was noisy; \
             rerun it quiet"
        );
    }
}

fn sample_row(name: &str, s: &Samples) {
    println!(
        "  {name:<34} {:>9.1} {:>9.1} {:>9}",
        s.quantile_us(0.5),
        s.quantile_us(0.99),
        s.len()
    );
}

/// Which side runs `k`-th in slice `slice` of round `round`, among `sides`: the order rotates
/// every round and runs backwards every other slice (A B C, C B A, ...), so that no side always
/// follows the same one.
fn slice_side(round: usize, slice: usize, k: usize, sides: usize) -> usize {
    let k = if slice.is_multiple_of(2) {
        k
    } else {
        sides - 1 - k
    };
    (round + k) % sides
}

/// Whether `result`'s error is the transient one a transaction is retried on.
fn transient<T>(result: &mongodb::error::Result<T>) -> bool {
    matches!(result, Err(e) if e.contains_label(TRANSIENT_TRANSACTION_ERROR))
}

// ---------------------------------------------------------------------------------------------
// Line 1: a two-update transaction against one durable update
// ---------------------------------------------------------------------------------------------

/// What line 1 measures.
#[derive(Default)]
struct CommitSamples {
    update: Samples,
    txn: Samples,
    commit: Samples,
    first: Samples,
    second: Samples,
}

/// Line 1's state between blocks: the next document, and how many updates each one was sent.
struct Latency {
    coll: Collection<Document>,
    session: ClientSession,
    next: usize,
    sent: Vec<i64>,
}

impl Latency {
    fn take_doc(&mut self) -> BenchResult<i64> {
        let k = self.next;
        self.next = (self.next + 1) % LATENCY_DOCS;
        if let Some(count) = self.sent.get_mut(k) {
            *count += 1;
        }
        Ok(i64::try_from(k)?)
    }

    async fn inc(&mut self, k: i64, in_session: bool) -> BenchResult {
        let update = self
            .coll
            .update_one(doc! { "_id": k }, doc! { "$inc": { "n": 1_i64 } });
        let result = if in_session {
            update.session(&mut self.session).await?
        } else {
            update.await?
        };
        if result.matched_count != 1 || result.modified_count != 1 {
            return Err(format!("update of _id {k} answered {result:?}").into());
        }
        Ok(())
    }

    /// `n` single updates.
    async fn updates(&mut self, n: usize, out: &mut CommitSamples) -> BenchResult {
        for _ in 0..n {
            let k = self.take_doc()?;
            let start = Instant::now();
            self.inc(k, false).await?;
            out.update.push(start.elapsed());
        }
        Ok(())
    }

    /// `n` transactions of two updates.
    async fn transactions(&mut self, n: usize, out: &mut CommitSamples) -> BenchResult {
        for _ in 0..n {
            let (a, b) = (self.take_doc()?, self.take_doc()?);
            let start = Instant::now();
            self.session.start_transaction().await?;
            self.inc(a, true).await?;
            let first = Instant::now();
            self.inc(b, true).await?;
            let second = Instant::now();
            self.session.commit_transaction().await?;
            let end = Instant::now();
            out.txn.push(end - start);
            out.commit.push(end - second);
            out.first.push(first - start);
            out.second.push(second - first);
        }
        Ok(())
    }

    /// Every document must hold the count of updates it was sent.
    async fn check(&self) -> BenchResult {
        let mut cursor = self.coll.find(doc! {}).await?;
        let mut seen = 0;
        while cursor.advance().await? {
            let d = cursor.deserialize_current()?;
            let k = usize::try_from(d.get_i64("_id")?)?;
            let want = self
                .sent
                .get(k)
                .copied()
                .ok_or("a document nobody inserted")?;
            if d.get_i64("n")? != want {
                return Err(format!("document {k} counts {d} after {want} updates").into());
            }
            seen += 1;
        }
        if seen != LATENCY_DOCS {
            return Err(format!("{seen} documents of {LATENCY_DOCS} left").into());
        }
        Ok(())
    }
}

async fn commit_line(client: &Client, scale: f64) -> BenchResult<Vec<Goal>> {
    let coll = client.database(DB).collection::<Document>("latency");
    let docs: Vec<Document> = (0..LATENCY_DOCS)
        .map(|k| Ok(doc! { "_id": i64::try_from(k)?, "n": 0_i64 }))
        .collect::<BenchResult<_>>()?;
    coll.insert_many(docs).await?;
    let mut state = Latency {
        coll,
        session: client.start_session().await?,
        next: 0,
        sent: vec![0; LATENCY_DOCS],
    };
    let per_round = scaled(LATENCY_PER_ROUND, scale);
    let cap = scaled_duration(ROUND_CAP, scale, MIN_BLOCK_TIME);
    let warmup = (per_round / 4).clamp(10, 50);
    let mut ignored = CommitSamples::default();
    state.updates(warmup, &mut ignored).await?;
    state.transactions(warmup, &mut ignored).await?;

    println!();
    println!(
        "1. a transaction of two updates (start, update_one x2 on different documents, commit) \
         vs one update_one, default (durable) write concern, sequential on one connection; \
         {ROUNDS} rounds x {per_round} of each, taking turns in blocks of {LATENCY_BLOCK} \
         (order rotating; warm-up {warmup})"
    );
    println!(
        "  {:<6} {:>11} {:>11} {:>11} {:>9} {:>9}",
        "round", "update p50", "txn p50", "commit p50", "txn/upd", "cmt/upd"
    );
    let mut all = CommitSamples::default();
    let (mut txn_ratios, mut commit_ratios) = (Vec::new(), Vec::new());
    for round in 0..ROUNDS {
        let mut this = CommitSamples::default();
        let start = Instant::now();
        let (mut done, mut block) = (0, 0);
        while done < per_round && start.elapsed() < cap {
            let n = LATENCY_BLOCK.min(per_round - done);
            for i in 0..2 {
                if (round + block + i) % 2 == 0 {
                    state.updates(n, &mut this).await?;
                } else {
                    state.transactions(n, &mut this).await?;
                }
            }
            done += n;
            block += 1;
        }
        let txn = p50_ratio(&this.txn, &this.update);
        let commit = p50_ratio(&this.commit, &this.update);
        txn_ratios.push(txn);
        commit_ratios.push(commit);
        println!(
            "  {:<6} {:>11.1} {:>11.1} {:>11.1} {:>8.3}x {:>8.3}x",
            round + 1,
            this.update.quantile_us(0.5),
            this.txn.quantile_us(0.5),
            this.commit.quantile_us(0.5),
            txn,
            commit
        );
        for (total, part) in [
            (&mut all.update, this.update),
            (&mut all.txn, this.txn),
            (&mut all.commit, this.commit),
            (&mut all.first, this.first),
            (&mut all.second, this.second),
        ] {
            total.0.extend(part.0);
        }
    }
    state.check().await?;
    println!(
        "  {:<34} {:>9} {:>9} {:>9}",
        "all rounds, us", "p50", "p99", "count"
    );
    sample_row("update_one (durable)", &all.update);
    sample_row("transaction, whole", &all.txn);
    sample_row("  its first update_one (starts it)", &all.first);
    sample_row("  its second update_one", &all.second);
    sample_row("  its commitTransaction", &all.commit);
    spread_warning("transaction/update", &txn_ratios);
    let (txn, commit) = (median(&txn_ratios), median(&commit_ratios));
    Ok(vec![
        Goal {
            text: format!(
                "1. two-update transaction p50 <= {COMMIT_GOAL}x one durable update_one p50: \
                 {txn:.3}x (median of rounds; {:.3}x over all samples)",
                p50_ratio(&all.txn, &all.update)
            ),
            pass: txn <= COMMIT_GOAL,
        },
        Goal {
            text: format!(
                "   its commitTransaction alone p50 <= {COMMIT_GOAL}x: {commit:.3}x (median of \
                 rounds; {:.3}x over all samples)",
                p50_ratio(&all.commit, &all.update)
            ),
            pass: commit <= COMMIT_GOAL,
        },
    ])
}

// ---------------------------------------------------------------------------------------------
// Line 2: a retryable insert against a plain one
// ---------------------------------------------------------------------------------------------

/// Inserts one document through a client with `retryWrites` as given and command monitoring
/// on; returns whether the `insert` the driver sent carried a `txnNumber`.
async fn sends_txn_number(addr: SocketAddr, retry_writes: bool, id: i64) -> BenchResult<bool> {
    let seen: Arc<Mutex<Vec<bool>>> = Arc::default();
    let mut options = client_options(addr, "ebb-txn-bench-probe", 1, Some(retry_writes)).await?;
    let sink = Arc::clone(&seen);
    options.command_event_handler = Some(EventHandler::callback(move |event: CommandEvent| {
        if let CommandEvent::Started(started) = event
            && started.command_name == "insert"
        {
            sink.lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .push(started.command.contains_key("txnNumber"));
        }
    }));
    let client = Client::with_options(options)?;
    client
        .database(DB)
        .collection::<Document>("probe")
        .insert_one(doc! { "_id": id })
        .await?;
    drop(client);
    let seen = seen
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone();
    match seen.as_slice() {
        [one] => Ok(*one),
        other => Err(format!("expected one insert command, saw {}", other.len()).into()),
    }
}

/// The two sides of line 2.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Insert {
    Retryable,
    Plain,
}

/// The next `_id` of line 2, shared by both sides and every writer.
static NEXT_ID: std::sync::atomic::AtomicI64 = std::sync::atomic::AtomicI64::new(0);

fn next_id() -> i64 {
    NEXT_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

fn insert_doc(id: i64) -> Document {
    doc! { "_id": id, "kind": "bench", "at": bson::DateTime::from_millis(1_700_000_000_000 + id), "pad": "x".repeat(100) }
}

async fn insert_one(coll: &Collection<Document>) -> BenchResult {
    let id = next_id();
    let reply = coll.insert_one(insert_doc(id)).await?;
    if reply.inserted_id != Bson::Int64(id) {
        return Err(format!("insert of _id {id} answered {reply:?}").into());
    }
    Ok(())
}

/// `n` sequential inserts on `coll`.
async fn sequential_inserts(
    coll: &Collection<Document>,
    n: usize,
    out: &mut Samples,
) -> BenchResult {
    for _ in 0..n {
        let start = Instant::now();
        insert_one(coll).await?;
        out.push(start.elapsed());
    }
    Ok(())
}

/// What a side did over some time-bounded slices.
#[derive(Debug, Default, Clone, Copy)]
struct Tally {
    ops: usize,
    elapsed: Duration,
    cpu: Cpu,
    /// Requests the server received (`serverStatus.network.numRequests`).
    requests: i64,
}

impl Tally {
    fn add(&mut self, other: Tally) {
        self.ops += other.ops;
        self.elapsed += other.elapsed;
        self.cpu.add(other.cpu);
        self.requests += other.requests;
    }

    /// Requests the server received per operation.
    fn requests_per_op(&self) -> f64 {
        #[expect(clippy::cast_precision_loss, reason = "counts far below 2^52")]
        let requests = self.requests as f64;
        requests / to_f64(self.ops.max(1))
    }

    fn rate(&self) -> f64 {
        per_second(self.ops, self.elapsed)
    }
}

/// `serverStatus.network.numRequests`: how many requests the server has received (this one
/// included).
async fn server_requests(client: &Client) -> BenchResult<i64> {
    let status = client
        .database("admin")
        .run_command(doc! { "serverStatus": 1 })
        .await?;
    integer(status.get_document("network")?, "numRequests")
}

/// What a time-bounded slice of work did: ops done, its time, CPU and server requests (less
/// the closing `serverStatus`).
async fn tally<F>(client: &Client, work: F) -> BenchResult<Tally>
where
    F: std::future::Future<Output = BenchResult<usize>>,
{
    let requests = server_requests(client).await?;
    let cpu = Cpu::now();
    let start = Instant::now();
    let ops = work.await?;
    let elapsed = start.elapsed();
    let cpu = Cpu::now().since(cpu);
    let requests = server_requests(client).await? - requests - 1;
    Ok(Tally {
        ops,
        elapsed,
        cpu,
        requests,
    })
}

/// `a / b`, 0 when `b` is not positive.
fn ratio_of(a: f64, b: f64) -> f64 {
    if b > 0.0 { a / b } else { 0.0 }
}

/// [`WRITERS`] concurrent writers inserting on `coll` for `time`; returns how many documents.
async fn concurrent_inserts(coll: &Collection<Document>, time: Duration) -> BenchResult<usize> {
    let start = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..WRITERS {
        let coll = coll.clone();
        tasks.spawn(async move {
            let mut n = 0_usize;
            while start.elapsed() < time {
                insert_one(&coll).await?;
                n += 1;
            }
            BenchResult::Ok(n)
        });
    }
    let mut ops = 0;
    while let Some(done) = tasks.join_next().await {
        ops += done??;
    }
    Ok(ops)
}

async fn retryable_line(addr: SocketAddr, scale: f64) -> BenchResult<Vec<Goal>> {
    // The probe inserts take negative ids: the measured ones count from 0.
    if !sends_txn_number(addr, true, -1).await? {
        return Err(
            "the retryWrites=true client sent no txnNumber: its inserts are not \
                    retryable writes (is the server a replica set?)"
                .into(),
        );
    }
    if sends_txn_number(addr, false, -2).await? {
        return Err("the retryWrites=false client sent a txnNumber".into());
    }
    let retryable = client(addr, "ebb-txn-bench-retryable", WRITERS, Some(true)).await?;
    let plain = client(addr, "ebb-txn-bench-plain", WRITERS, Some(false)).await?;
    let coll_of = |c: &Client| c.database(DB).collection::<Document>("inserts");
    let colls = [
        (Insert::Retryable, coll_of(&retryable)),
        (Insert::Plain, coll_of(&plain)),
    ];
    let per_round = scaled(INSERTS_PER_ROUND, scale);
    let cap = scaled_duration(ROUND_CAP, scale, MIN_BLOCK_TIME);
    let slice_time = scaled_duration(BLOCK_TIME / 2 / SLICES, scale, MIN_BLOCK_TIME);
    let warmup = (per_round / 4).clamp(10, 50);
    let mut ignored = Samples::default();
    for (_, coll) in &colls {
        sequential_inserts(coll, warmup, &mut ignored).await?;
        concurrent_inserts(coll, MIN_BLOCK_TIME).await?;
    }

    println!();
    println!(
        "2. insert_one, retryWrites=true vs retryWrites=false (the first sends txnNumber, the \
         other not: checked), small documents, default (durable) write concern; {ROUNDS} \
         rounds of: {per_round} sequential inserts of each on one connection, in blocks of \
         {LATENCY_BLOCK}, then {WRITERS} concurrent writers of each for {SLICES} slices of {} ms, \
         taking turns (order rotating)",
        slice_time.as_millis()
    );
    println!(
        "  {:<6} {:>11} {:>11} {:>9}   {:>12} {:>12} {:>9}",
        "round", "retry p50", "plain p50", "ratio", "retry doc/s", "plain doc/s", "ratio"
    );
    let mut all = [Samples::default(), Samples::default()];
    let (mut latency_ratios, mut rate_ratios) = (Vec::new(), Vec::new());
    let (mut retry_rates, mut plain_rates) = (Vec::new(), Vec::new());
    let mut all_tallies = [Tally::default(); 2];
    for round in 0..ROUNDS {
        let mut this = [Samples::default(), Samples::default()];
        let start = Instant::now();
        let (mut done, mut block) = (0, 0);
        while done < per_round && start.elapsed() < cap {
            let n = LATENCY_BLOCK.min(per_round - done);
            for i in 0..2 {
                let slot = (round + block + i) % 2;
                if let (Some((_, coll)), Some(out)) = (colls.get(slot), this.get_mut(slot)) {
                    sequential_inserts(coll, n, out).await?;
                }
            }
            done += n;
            block += 1;
        }
        let mut tallies = [Tally::default(); 2];
        for slice in 0..SLICES {
            for k in 0..2 {
                let slot = slice_side(round, usize::try_from(slice)?, k, 2);
                if let (Some((_, coll)), Some(t)) = (colls.get(slot), tallies.get_mut(slot)) {
                    t.add(tally(&retryable, concurrent_inserts(coll, slice_time)).await?);
                }
            }
        }
        for (total, tally) in all_tallies.iter_mut().zip(tallies) {
            total.add(tally);
        }
        let [retry_rate, plain_rate] = tallies.map(|t| t.rate());
        let [retry, plain] = this;
        let latency = p50_ratio(&retry, &plain);
        let rate = ratio_of(plain_rate, retry_rate);
        println!(
            "  {:<6} {:>11.1} {:>11.1} {:>8.3}x   {:>12.0} {:>12.0} {:>8.3}x",
            round + 1,
            retry.quantile_us(0.5),
            plain.quantile_us(0.5),
            latency,
            retry_rate,
            plain_rate,
            rate
        );
        latency_ratios.push(latency);
        rate_ratios.push(rate);
        retry_rates.push(retry_rate);
        plain_rates.push(plain_rate);
        let [all_retry, all_plain] = &mut all;
        all_retry.0.extend(retry.0);
        all_plain.0.extend(plain.0);
    }
    let inserted = u64::try_from(NEXT_ID.load(std::sync::atomic::Ordering::Relaxed))?;
    let count = colls[0].1.count_documents(doc! {}).await?;
    if count != inserted {
        return Err(format!("{inserted} documents inserted, {count} in the collection").into());
    }
    let [all_retry, all_plain] = &all;
    println!(
        "  {:<34} {:>9} {:>9} {:>9}",
        "all rounds, us", "p50", "p99", "count"
    );
    sample_row("insert_one, retryWrites=true", all_retry);
    sample_row("insert_one, retryWrites=false", all_plain);
    let [retry_total, plain_total] = all_tallies;
    let (retry_server, retry_client) = retry_total.cpu.per_op_us(retry_total.ops);
    let (plain_server, plain_client) = plain_total.cpu.per_op_us(plain_total.ops);
    println!(
        "  {WRITERS} writers, median of rounds: retryable {:.0} docs/s, plain {:.0} docs/s; CPU \
         per insert: retryable {retry_server:.1} us server + {retry_client:.1} us client, plain \
         {plain_server:.1} us server + {plain_client:.1} us client; server requests per insert: \
         {:.2} and {:.2}",
        median(&retry_rates),
        median(&plain_rates),
        retry_total.requests_per_op(),
        plain_total.requests_per_op(),
    );
    spread_warning("retryable/plain latency", &latency_ratios);
    spread_warning("plain/retryable rate", &rate_ratios);
    let (latency, rate) = (median(&latency_ratios), median(&rate_ratios));
    Ok(vec![
        Goal {
            text: format!(
                "2. retryable insert_one p50 <= {RETRYABLE_GOAL}x a plain one: {latency:.3}x \
                 (median of rounds; {:.3}x over all samples)",
                p50_ratio(all_retry, all_plain)
            ),
            pass: latency <= RETRYABLE_GOAL,
        },
        Goal {
            text: format!(
                "   {WRITERS} writers, plain docs/s over retryable docs/s <= {RETRYABLE_GOAL}x: \
                 {rate:.3}x (median of rounds; {:.3}x from the totals)",
                ratio_of(plain_total.rate(), retry_total.rate())
            ),
            pass: rate <= RETRYABLE_GOAL,
        },
    ])
}

// ---------------------------------------------------------------------------------------------
// Line 3: conflicting transfers
// ---------------------------------------------------------------------------------------------

/// The sides of line 3.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// The driver's `withTransaction` (`start_transaction().and_run2`): on a transient error it
    /// aborts and starts again after the specification's backoff (a random share of
    /// 5 ms × 1.5^attempt, at most 500 ms).
    Driver,
    /// A hand-written loop that starts again at once (the manual's retry example).
    Immediate,
    /// The same two updates without a transaction.
    Plain,
}

impl Mode {
    const ALL: [Mode; 3] = [Mode::Driver, Mode::Immediate, Mode::Plain];

    fn slot(self) -> usize {
        match self {
            Mode::Driver => 0,
            Mode::Immediate => 1,
            Mode::Plain => 2,
        }
    }
}

/// What transferring tasks did in one block.
#[derive(Default)]
struct Transfers {
    done: usize,
    attempts: usize,
    transient: usize,
    /// What its transfers moved, per account.
    moved: Vec<i64>,
}

impl Transfers {
    fn add(&mut self, other: &Transfers) {
        self.done += other.done;
        self.attempts += other.attempts;
        self.transient += other.transient;
    }

    /// Attempts ended by a transient error, in % of attempts.
    fn conflict_percent(&self) -> f64 {
        percent(self.transient, self.attempts)
    }

    /// Attempts beyond the first, per completed transfer.
    fn retries_per_transfer(&self) -> f64 {
        to_f64(self.attempts.saturating_sub(self.done)) / to_f64(self.done.max(1))
    }
}

async fn inc_account(
    coll: &Collection<Document>,
    session: &mut ClientSession,
    account: i64,
    by: i64,
) -> mongodb::error::Result<()> {
    let result = coll
        .update_one(doc! { "_id": account }, doc! { "$inc": { "balance": by } })
        .session(session)
        .await?;
    if result.matched_count != 1 || result.modified_count != 1 {
        return Err(mongodb::error::Error::custom(format!(
            "update of account {account} answered {result:?}"
        )));
    }
    Ok(())
}

/// Both updates of a transfer of 1 from `from` to `to`.
async fn both_updates(
    coll: &Collection<Document>,
    session: &mut ClientSession,
    from: i64,
    to: i64,
) -> mongodb::error::Result<()> {
    inc_account(coll, session, from, -1).await?;
    inc_account(coll, session, to, 1).await
}

/// One transfer through the driver's `withTransaction`; returns its attempts and how many a
/// transient error ended (every attempt but the last: any other error ends the run).
async fn transfer_with_driver(
    coll: &Collection<Document>,
    session: &mut ClientSession,
    from: i64,
    to: i64,
) -> BenchResult<(usize, usize)> {
    // The context the callback gets each time: owned, as the driver's documentation advises
    // for a future that must be `Send` (a spawned task).
    let attempts = Arc::new(AtomicUsize::new(0));
    session
        .start_transaction()
        .and_run(
            (coll.clone(), Arc::clone(&attempts)),
            move |session, (coll, attempts)| {
                Box::pin(async move {
                    attempts.fetch_add(1, Ordering::Relaxed);
                    both_updates(coll, session, from, to).await
                })
            },
        )
        .await?;
    let attempts = attempts.load(Ordering::Relaxed);
    Ok((attempts, attempts.saturating_sub(1)))
}

/// One transfer in a transaction started again at once on a transient error; returns the
/// attempts it took and how many a transient error ended.
async fn transfer_immediate(
    coll: &Collection<Document>,
    session: &mut ClientSession,
    from: i64,
    to: i64,
) -> BenchResult<(usize, usize)> {
    let mut transient_errors = 0;
    for attempt in 1..=MAX_ATTEMPTS {
        session.start_transaction().await?;
        let result = both_updates(coll, session, from, to).await;
        if transient(&result) {
            transient_errors += 1;
            // The server ended it already; the driver's abort ends the session's side (and
            // ignores the server's answer).
            session.abort_transaction().await?;
            continue;
        }
        result?;
        loop {
            match session.commit_transaction().await {
                Ok(()) => return Ok((attempt, transient_errors)),
                Err(e) if e.contains_label(UNKNOWN_TRANSACTION_COMMIT_RESULT) => {}
                Err(e) if e.contains_label(TRANSIENT_TRANSACTION_ERROR) => {
                    transient_errors += 1;
                    break;
                }
                Err(e) => return Err(e.into()),
            }
        }
    }
    Err(format!("a transfer {from} -> {to} conflicted {MAX_ATTEMPTS} times in a row").into())
}

/// One task's transfers for `time` from `start`.
async fn transfer_task(
    client: Client,
    seed: u64,
    mode: Mode,
    start: Instant,
    time: Duration,
) -> BenchResult<Transfers> {
    let coll = client.database(DB).collection::<Document>("accounts");
    let mut session = client.start_session().await?;
    let mut rng = XorShift(seed | 1);
    let accounts = u64::try_from(account_count())?;
    let mut out = Transfers {
        moved: vec![0; account_count()],
        ..Transfers::default()
    };
    while start.elapsed() < time {
        let from = rng.below(accounts);
        let to = (from + 1 + rng.below(accounts - 1)) % accounts;
        let (from, to) = (i64::try_from(from)?, i64::try_from(to)?);
        let (attempts, transient_errors) = match mode {
            Mode::Driver => transfer_with_driver(&coll, &mut session, from, to).await?,
            Mode::Immediate => transfer_immediate(&coll, &mut session, from, to).await?,
            Mode::Plain => {
                both_updates(&coll, &mut session, from, to).await?;
                (1, 0)
            }
        };
        out.attempts += attempts;
        out.transient += transient_errors;
        out.done += 1;
        for (account, by) in [(from, -1), (to, 1)] {
            if let Some(m) = usize::try_from(account)
                .ok()
                .and_then(|a| out.moved.get_mut(a))
            {
                *m += by;
            }
        }
    }
    Ok(out)
}

/// [`TRANSFER_TASKS`] tasks transferring for `time`; returns their sums (what they moved is
/// added to `moved`).
async fn transfer_block(
    client: &Client,
    mode: Mode,
    time: Duration,
    seed: u64,
    moved: &mut [i64],
) -> BenchResult<Transfers> {
    let start = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for task in 0..TRANSFER_TASKS {
        let task_seed = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ u64::try_from(task)?;
        tasks.spawn(transfer_task(client.clone(), task_seed, mode, start, time));
    }
    let mut sum = Transfers::default();
    while let Some(done) = tasks.join_next().await {
        let t = done??;
        sum.add(&t);
        for (total, m) in moved.iter_mut().zip(t.moved) {
            *total += m;
        }
    }
    Ok(sum)
}

/// Line 3's number of accounts: `EBB_BENCH_ACCOUNTS`, or [`ACCOUNTS`].
fn account_count() -> usize {
    std::env::var("EBB_BENCH_ACCOUNTS")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .filter(|&n| n >= 2)
        .unwrap_or(ACCOUNTS)
}

/// Every account must hold its opening balance plus what the transfers moved.
async fn check_accounts(coll: &Collection<Document>, moved: &[i64]) -> BenchResult {
    let mut cursor = coll.find(doc! {}).await?;
    let mut seen = 0;
    while cursor.advance().await? {
        let d = cursor.deserialize_current()?;
        let account = usize::try_from(d.get_i64("_id")?)?;
        let want = OPENING_BALANCE + moved.get(account).copied().ok_or("an unknown account")?;
        if d.get_i64("balance")? != want {
            return Err(format!("account {account} holds {d}, not {want}").into());
        }
        seen += 1;
    }
    if seen != account_count() {
        return Err(format!("{seen} accounts of {} left", account_count()).into());
    }
    Ok(())
}

async fn transfer_line(client: &Client, scale: f64) -> BenchResult<Vec<Goal>> {
    let coll = client.database(DB).collection::<Document>("accounts");
    let accounts: Vec<Document> = (0..account_count())
        .map(|a| Ok(doc! { "_id": i64::try_from(a)?, "balance": OPENING_BALANCE }))
        .collect::<BenchResult<_>>()?;
    coll.insert_many(accounts).await?;
    let slice_time = scaled_duration(BLOCK_TIME / SLICES, scale, MIN_BLOCK_TIME);
    let mut moved = vec![0_i64; account_count()];
    for mode in Mode::ALL {
        transfer_block(client, mode, MIN_BLOCK_TIME, 7, &mut moved).await?;
    }

    println!();
    println!(
        "3. {TRANSFER_TASKS} tasks (one connection and session each) transferring 1 between \
         random pairs of {} accounts: a transaction (two $inc updates, commit) started \
         again on TransientTransactionError by the driver's withTransaction (with the spec's \
         backoff) or at once by a hand loop, vs the same two updates without one; {ROUNDS} \
         rounds of {SLICES} slices of {} ms of each, taking turns (order rotating). Conflicts: \
         attempts ended by a transient error",
        account_count(),
        slice_time.as_millis()
    );
    println!(
        "  {:<6} {:>10} {:>9} {:>8}   {:>10} {:>9} {:>8}   {:>10}   {:>8} {:>8}",
        "", "withTxn", "", "", "immediate", "", "", "no txn", "", ""
    );
    println!(
        "  {:<6} {:>10} {:>9} {:>8}   {:>10} {:>9} {:>8}   {:>10}   {:>8} {:>8}",
        "round",
        "xfer/s",
        "conflict",
        "retry/x",
        "xfer/s",
        "conflict",
        "retry/x",
        "xfer/s",
        "withTxn",
        "immed."
    );
    let mut ratios: [Vec<f64>; 2] = Default::default();
    let mut rates: [Vec<f64>; 3] = Default::default();
    let mut totals: [(Tally, Transfers); 3] = Default::default();
    for round in 0..ROUNDS {
        let mut this: [(Tally, Transfers); 3] = Default::default();
        for slice in 0..SLICES {
            for k in 0..Mode::ALL.len() {
                let slice = usize::try_from(slice)?;
                let Some(&mode) = Mode::ALL.get(slice_side(round, slice, k, Mode::ALL.len()))
                else {
                    continue;
                };
                let seed = u64::try_from((round * 16 + slice) * Mode::ALL.len() + k)? + 11;
                let mut sum = Transfers::default();
                let tally = tally(client, async {
                    sum = transfer_block(client, mode, slice_time, seed, &mut moved).await?;
                    Ok(sum.done)
                })
                .await?;
                for side in [this.get_mut(mode.slot()), totals.get_mut(mode.slot())]
                    .into_iter()
                    .flatten()
                {
                    side.0.add(tally);
                    side.1.add(&sum);
                }
            }
        }
        let [(driver, driver_sum), (immediate, immediate_sum), (plain, _)] = &this;
        for (r, tally) in rates.iter_mut().zip([driver, immediate, plain]) {
            r.push(tally.rate());
        }
        let [driver_ratios, immediate_ratios] = &mut ratios;
        driver_ratios.push(ratio_of(driver.rate(), plain.rate()));
        immediate_ratios.push(ratio_of(immediate.rate(), plain.rate()));
        println!(
            "  {:<6} {:>10.0} {:>8.1}% {:>8.2}   {:>10.0} {:>8.1}% {:>8.2}   {:>10.0}   {:>7.3}x \
             {:>7.3}x",
            round + 1,
            driver.rate(),
            driver_sum.conflict_percent(),
            driver_sum.retries_per_transfer(),
            immediate.rate(),
            immediate_sum.conflict_percent(),
            immediate_sum.retries_per_transfer(),
            plain.rate(),
            ratio_of(driver.rate(), plain.rate()),
            ratio_of(immediate.rate(), plain.rate()),
        );
    }
    check_accounts(&coll, &moved).await?;
    let [
        (driver, driver_sum),
        (immediate, immediate_sum),
        (plain, plain_sum),
    ] = &totals;
    println!(
        "  all rounds: {} transfers with withTransaction ({} attempts, {:.1}% conflicted), {} \
         retried at once ({} attempts, {:.1}% conflicted), {} without a transaction; medians \
         of rounds {:.0}, {:.0} and {:.0} transfers/s; every account's balance checked",
        driver_sum.done,
        driver_sum.attempts,
        driver_sum.conflict_percent(),
        immediate_sum.done,
        immediate_sum.attempts,
        immediate_sum.conflict_percent(),
        plain_sum.done,
        median(rates.first().map_or(&[], Vec::as_slice)),
        median(rates.get(1).map_or(&[], Vec::as_slice)),
        median(rates.get(2).map_or(&[], Vec::as_slice)),
    );
    println!(
        "  per completed transfer: CPU (server = all but the client runtime's threads) and \
         requests the server received"
    );
    for (name, t) in [
        ("withTransaction", driver),
        ("retried at once", immediate),
        ("no transaction", plain),
    ] {
        let (server, client) = t.cpu.per_op_us(t.ops);
        println!(
            "    {name:<16} {server:>8.1} us server {client:>8.1} us client {:>7.2} requests",
            t.requests_per_op()
        );
    }
    let [driver_ratios, immediate_ratios] = &ratios;
    spread_warning("withTransaction transfer", driver_ratios);
    spread_warning("immediate-retry transfer", immediate_ratios);
    let (driver_ratio, immediate_ratio) = (median(driver_ratios), median(immediate_ratios));
    Ok(vec![
        Goal {
            text: format!(
                "3. {TRANSFER_TASKS} connections of conflicting transfers in transactions \
                 (driver's withTransaction) >= {:.0}% of the same updates' throughput without: \
                 {:.1}% (median of rounds; {:.1}% from the totals; {:.1}% of attempts \
                 conflicted)",
                TRANSFER_GOAL * 100.0,
                driver_ratio * 100.0,
                ratio_of(driver.rate(), plain.rate()) * 100.0,
                driver_sum.conflict_percent(),
            ),
            pass: driver_ratio >= TRANSFER_GOAL,
        },
        Goal {
            text: format!(
                "   the same retried at once (no backoff): {:.1}% (median of rounds; {:.1}% from \
                 the totals; {:.1}% of attempts conflicted)",
                immediate_ratio * 100.0,
                ratio_of(immediate.rate(), plain.rate()) * 100.0,
                immediate_sum.conflict_percent(),
            ),
            pass: immediate_ratio >= TRANSFER_GOAL,
        },
    ])
}

fn percent(part: usize, whole: usize) -> f64 {
    if whole == 0 {
        0.0
    } else {
        to_f64(part) * 100.0 / to_f64(whole)
    }
}
