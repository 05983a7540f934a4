//! What do Ebb's CRUD paths cost over the wire, next to baselines measured in the same run?
//!
//! 1. **Inserts.** The same ~1 KB documents are written several ways, taking turns in small
//!    blocks (the order rotating every block) so that machine noise hits every side alike:
//!    * the engine itself: [`DiskStorage`] in a temporary directory behind [`GroupCommit`],
//!      keys and values built exactly as Ebb builds them (`collection id · keystring(_id)`,
//!      record header + BSON), each commit followed by `durable(ticket)`;
//!    * Ebb through the `mongodb` driver, against an in-process Ebb on a durable store in
//!      another temporary directory, default write concern (acknowledged once synced);
//!    * for diagnosis, Ebb without the driver: the same `insert`s as hand-built `OP_MSG`s on a
//!      blocking socket ("raw"), and both sides without the durability wait ("relaxed": Ebb
//!      `writeConcern {j: false}`, the engine not awaiting its ticket).
//!
//!    Two shapes: batches of 1,000 documents from one writer (`insert_many` / one 1,000-put
//!    commit), and single documents from 8 concurrent writers (`insert_one` / one-put commits),
//!    which is where group commit shows. Ratios are Ebb's docs/s over the engine's; the goal
//!    uses the median of the per-block ratios (robust to a disk stall hitting one block), the
//!    totals' ratio is printed beside it. The insert goal is the server's cost over the wire, so
//!    it is judged on the raw client, whose own work is a memcpy; the driver's ratio is printed
//!    beside it: on two shared cores its serialization (about 2.4 us a document) is time the
//!    server cannot use, which no server change can win back.
//! 2. **Lookup by `_id` vs `ping`.** After loading documents, sequential `find_one({_id: k})`
//!    (random existing `k`) and `ping` through the driver on one connection, and the same two
//!    as raw `OP_MSG`s on a blocking socket, taking turns in blocks; p50/p99 of each and
//!    p50(find)/p50(ping). The goal is the driver's ratio; the raw one shows the server's share.
//!
//! Ebb runs in its own multi-threaded tokio runtime (2 workers, what `#[tokio::main]` gives on
//! the 2-core target), on its own thread; the clients and the engine baseline run in a second
//! one (2 workers), as a separate client process would. No tracing subscriber is installed.
//!
//! The goals are printed as PASS or MISS and never change the exit status: this is a
//! measurement, not a test. The run fails (non-zero) only if a server or store cannot be
//! started, or answers wrongly.
//!
//! `EBB_BENCH_SCALE` (a float, default 1.0) scales every count and every time cap.
//! `EBB_BENCH_ONLY=inserts` or `EBB_BENCH_ONLY=lookups` runs one phase alone (for profiling).

use std::io;
use std::net::SocketAddr;
use std::ops::Range;
use std::path::Path;
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use bson::{RawDocumentBuf, doc, rawdoc};
use ebb::query::keystring;
use ebb::storage::{Batch, DiskStorage, GroupCommit, Keyspace, record};
use mongodb::options::{ClientOptions, CollectionOptions, WriteConcern};
use mongodb::{Client, Collection};
use tokio::sync::oneshot;

type BenchResult<T = ()> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// Server runtime workers: what `#[tokio::main]` gives on the 2-core machine this targets.
const SERVER_WORKERS: usize = 2;
/// Client (and engine baseline) runtime workers.
const CLIENT_WORKERS: usize = 2;
/// Size of every document, in BSON bytes.
const DOC_SIZE: usize = 1_024;
/// Documents per `insert_many` / per engine commit in the batched shape.
const BATCH: usize = 1_000;
/// Concurrent writers in the single-document shape.
const WRITERS: usize = 8;
/// Interleaved rounds of each insert shape.
const INSERT_ROUNDS: usize = 6;
/// Batches per side per round (scaled).
const BATCHES_PER_ROUND: f64 = 16.0;
/// Batches sent to one side before switching to the other.
const BATCH_BLOCK: usize = 2;
/// Single inserts per writer per side per round (scaled).
const SINGLES_PER_WRITER: f64 = 300.0;
/// Single inserts per writer sent to one side before switching to the other.
const SINGLE_BLOCK: usize = 50;
/// Most time one round of an insert shape may take, all sides together (scaled): a slow disk
/// makes a round stop early (after a whole block) instead of blowing the time budget.
const INSERT_ROUND_CAP: Duration = Duration::from_secs(3);
/// Documents loaded for the lookups (scaled).
const LOOKUP_DOCS: f64 = 10_000.0;
/// Interleaved rounds of the lookup phase.
const LOOKUP_ROUNDS: usize = 8;
/// Finds and pings per round (scaled), sent in alternating blocks of [`LOOKUP_BLOCK`].
const LOOKUPS_PER_ROUND: f64 = 3_000.0;
/// Requests of one kind sent before switching to the other.
const LOOKUP_BLOCK: usize = 250;
/// Most time one round of the lookup phase may take (scaled).
const LOOKUP_ROUND_CAP: Duration = Duration::from_secs(3);
/// Goal: Ebb's batched insert rate over the engine's, at least.
const INSERT_GOAL: f64 = 0.70;
/// Goal: p50(find by `_id`) over p50(ping), at most.
const FIND_GOAL: f64 = 1.5;
/// Per-round ratios further apart than this (largest / smallest) mean the machine was noisy.
const NOISY_SPREAD: f64 = 1.25;
/// Engine baseline "collection ids" (key prefixes), one per shape.
const ENGINE_BATCHED: u64 = 1;
const ENGINE_SINGLE: u64 = 2;
const ENGINE_SERIAL: u64 = 3;
const ENGINE_RELAXED: u64 = 4;
const ENGINE_SINGLE_BLOCKING: u64 = 5;

fn main() {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(CLIENT_WORKERS)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("crud bench: cannot build the client runtime: {e}");
            std::process::exit(1);
        }
    };
    // The bench itself runs as a task, on the runtime's workers like any client task.
    let result = runtime.block_on(async {
        tokio::spawn(bench())
            .await
            .unwrap_or_else(|e| Err(format!("the bench task failed: {e}").into()))
    });
    if let Err(e) = result {
        eprintln!("crud bench failed: {e}");
        std::process::exit(1);
    }
}

async fn bench() -> BenchResult {
    let scale = scale();
    header(scale);

    let engine_dir = tempfile::tempdir()?;
    let engine = {
        let path = engine_dir.path().to_owned();
        let storage = tokio::task::spawn_blocking(move || DiskStorage::open(&path)).await??;
        Arc::new(GroupCommit::new(Arc::new(storage)))
    };
    let server = EbbServer::start()?;
    println!(
        "engine store: {}; Ebb store: {}",
        engine_dir.path().display(),
        server.data_dir().display()
    );

    let client = client(server.addr, None).await?;
    let db = client.database("bench");
    db.run_command(doc! { "ping": 1 }).await?;

    let only = std::env::var("EBB_BENCH_ONLY").unwrap_or_default();
    let inserts = if only.is_empty() || only == "inserts" {
        Some(insert_phase(&engine, server.addr, &db, scale).await?)
    } else {
        None
    };
    let lookups = if only.is_empty() || only == "lookups" {
        Some(lookup_phase(server.addr, &db, scale).await?)
    } else {
        None
    };
    report_goals(inserts.as_ref(), lookups.as_ref());

    drop((db, client));
    server.stop()?;
    let engine_store = Arc::clone(&engine);
    tokio::task::spawn_blocking(move || engine_store.shutdown()).await?;
    drop(engine);
    drop(engine_dir);
    Ok(())
}

fn header(scale: f64) {
    println!();
    println!(
        "Ebb CRUD over the wire vs baselines ({} build, {} CPUs, {SERVER_WORKERS} server / \
         {CLIENT_WORKERS} client runtime workers, EBB_BENCH_SCALE={scale})",
        if cfg!(debug_assertions) {
            "DEBUG"
        } else {
            "release"
        },
        thread::available_parallelism().map_or(0, std::num::NonZero::get),
    );
    if let Ok(load) = std::fs::read_to_string("/proc/loadavg") {
        println!(
            "load average before the run: {} (other busy processes skew every number)",
            load.split_whitespace()
                .take(3)
                .collect::<Vec<_>>()
                .join(" ")
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Documents
// ---------------------------------------------------------------------------------------------

/// A document of exactly [`DOC_SIZE`] bytes with `_id: id` first.
fn make_doc(id: i64) -> RawDocumentBuf {
    let mut doc = rawdoc! {
        "_id": id,
        "kind": "bench",
        "n": i32::try_from(id.rem_euclid(1_000_000)).unwrap_or(0),
        "at": bson::DateTime::from_millis(1_700_000_000_000 + id),
        "tags": ["alpha", "beta", "gamma"],
        "nested": { "a": 1, "b": "two", "c": 3.5 },
    };
    let empty_payload_len = {
        let mut probe = doc.clone();
        probe.append(bson::raw::cstr!("payload"), "");
        probe.as_bytes().len()
    };
    let mut rng = XorShift(
        u64::try_from(id)
            .unwrap_or(0)
            .wrapping_mul(0x9E37_79B9_7F4A_7C15)
            | 1,
    );
    let payload: String = (0..DOC_SIZE.saturating_sub(empty_payload_len))
        .map(|_| char::from(b'a' + u8::try_from(rng.next() % 26).unwrap_or(0)))
        .collect();
    doc.append(bson::raw::cstr!("payload"), payload);
    doc
}

/// `count` documents with `_id`s `first..first + count`.
fn make_docs(first: i64, count: usize) -> Vec<RawDocumentBuf> {
    (first..).take(count).map(make_doc).collect()
}

/// A small, seedable generator (no cryptographic or statistical ambitions).
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

// ---------------------------------------------------------------------------------------------
// The engine baseline
// ---------------------------------------------------------------------------------------------

/// The record ids the engine baseline gives its documents, in insertion order as Ebb does.
static NEXT_RID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// Adds `doc` to `batch` as Ebb stores it: key `collection · record id`, value record header
/// + the BSON, and its `_id` index entry `collection · keystring(_id)` → record id.
fn put_doc(batch: &mut Batch, collection: u64, now_ms: i64, doc: &RawDocumentBuf) -> BenchResult {
    let id = doc.get("_id")?.ok_or("document without _id")?;
    let rid = NEXT_RID.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    batch.put(
        Keyspace::Docs,
        record::doc_key(collection, rid).to_vec(),
        record::encode(now_ms, record::NEVER, doc),
    );
    batch.put(
        Keyspace::Index,
        ebb::index::id_entry_key(collection, &keystring::to_key(id)),
        ebb::index::rid_value(rid).to_vec(),
    );
    Ok(())
}

fn now_ms() -> i64 {
    bson::DateTime::now().timestamp_millis()
}

/// How the engine baseline calls the (blocking) `GroupCommit::commit`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CommitOn {
    /// On the runtime worker that runs the writer, as Ebb's write handlers do today.
    Worker,
    /// In `spawn_blocking`: every commit off the runtime worker, as `docs/storage.md` once planned.
    Blocking,
}

/// Commits `batch` and, if `durable`, waits until it is.
async fn engine_commit(
    engine: &Arc<GroupCommit>,
    batch: Batch,
    on: CommitOn,
    durable: bool,
) -> BenchResult {
    let ticket = match on {
        CommitOn::Worker => engine.commit(batch)?,
        CommitOn::Blocking => {
            let engine = Arc::clone(engine);
            tokio::task::spawn_blocking(move || engine.commit(batch)).await??
        }
    };
    if durable {
        engine.durable(ticket).await?;
    }
    Ok(())
}

/// One writer, one commit of [`BATCH`] puts per batch (on the worker), each awaited until durable
/// if `durable`.
async fn engine_batched(
    engine: &Arc<GroupCommit>,
    batches: &[Vec<RawDocumentBuf>],
    collection: u64,
    durable: bool,
) -> BenchResult<Run> {
    let start = Instant::now();
    let mut docs = 0;
    for docs_of_batch in batches {
        let now = now_ms();
        let mut batch = Batch::new();
        for doc in docs_of_batch {
            put_doc(&mut batch, collection, now, doc)?;
        }
        engine_commit(engine, batch, CommitOn::Worker, durable).await?;
        docs += docs_of_batch.len();
    }
    Ok(Run::new(docs, start.elapsed()))
}

/// One task per writer, each committing its documents `range` one at a time and awaiting the
/// durability of each.
async fn engine_single(
    engine: &Arc<GroupCommit>,
    per_writer: &Arc<Vec<Vec<RawDocumentBuf>>>,
    range: Range<usize>,
    on: CommitOn,
) -> BenchResult<Run> {
    let collection = match on {
        CommitOn::Worker => ENGINE_SINGLE,
        CommitOn::Blocking => ENGINE_SINGLE_BLOCKING,
    };
    let start = Instant::now();
    let mut tasks = Vec::with_capacity(per_writer.len());
    for w in 0..per_writer.len() {
        let engine = Arc::clone(engine);
        let docs = Arc::clone(per_writer);
        let range = range.clone();
        tasks.push(tokio::spawn(async move {
            let mut n = 0;
            for doc in writer_docs(&docs, w, range) {
                let mut batch = Batch::new();
                put_doc(&mut batch, collection, now_ms(), doc)?;
                engine_commit(&engine, batch, on, true).await?;
                n += 1;
            }
            BenchResult::Ok(n)
        }));
    }
    let mut docs = 0;
    for t in tasks {
        docs += t.await??;
    }
    Ok(Run::new(docs, start.elapsed()))
}

/// Writer `w`'s documents in `range` (fewer if it has fewer).
fn writer_docs(
    per_writer: &[Vec<RawDocumentBuf>],
    w: usize,
    range: Range<usize>,
) -> &[RawDocumentBuf] {
    let docs = per_writer.get(w).map_or(&[][..], Vec::as_slice);
    let end = range.end.min(docs.len());
    docs.get(range.start.min(end)..end).unwrap_or_default()
}

/// One writer, one document per commit: one fsync per document, no grouping possible.
async fn engine_serial(
    engine: &Arc<GroupCommit>,
    docs: &[RawDocumentBuf],
    cap: Duration,
) -> BenchResult<Run> {
    let start = Instant::now();
    let mut n = 0;
    for doc in docs {
        let mut batch = Batch::new();
        put_doc(&mut batch, ENGINE_SERIAL, now_ms(), doc)?;
        engine_commit(engine, batch, CommitOn::Blocking, true).await?;
        n += 1;
        if start.elapsed() >= cap {
            break;
        }
    }
    Ok(Run::new(n, start.elapsed()))
}

// ---------------------------------------------------------------------------------------------
// Ebb over the wire
// ---------------------------------------------------------------------------------------------

/// Ebb on a durable store in a temporary directory, in a runtime of its own on its own thread.
struct EbbServer {
    addr: SocketAddr,
    dir: tempfile::TempDir,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<io::Result<()>>>,
}

impl EbbServer {
    fn start() -> io::Result<EbbServer> {
        let dir = tempfile::tempdir()?;
        let data_dir = dir.path().to_owned();
        let (addr_tx, addr_rx) = std::sync::mpsc::channel::<io::Result<SocketAddr>>();
        let (stop_tx, stop_rx) = oneshot::channel::<()>();
        let thread =
            thread::Builder::new()
                .name("ebb-server".into())
                .spawn(move || -> io::Result<()> {
                    let runtime = tokio::runtime::Builder::new_multi_thread()
                        .worker_threads(SERVER_WORKERS)
                        .thread_name("ebb-worker")
                        .enable_all()
                        .build()?;
                    runtime.block_on(async move {
                        let listener = match tokio::net::TcpListener::bind("127.0.0.1:0").await {
                            Ok(l) => l,
                            Err(e) => {
                                let _ = addr_tx.send(Err(io::Error::new(e.kind(), e.to_string())));
                                return Err(e);
                            }
                        };
                        let addr = listener.local_addr()?;
                        let config = ebb::Config {
                            in_memory: false,
                            data_dir,
                            port: addr.port(),
                            shutdown_timeout_secs: 1,
                            ..ebb::Config::default()
                        };
                        let _ = addr_tx.send(Ok(addr));
                        ebb::run(listener, config, async move {
                            let _ = stop_rx.await;
                        })
                        .await
                    })
                })?;
        let addr = addr_rx
            .recv_timeout(Duration::from_secs(10))
            .map_err(|e| io::Error::other(format!("Ebb did not start: {e}")))??;
        Ok(EbbServer {
            addr,
            dir,
            stop: Some(stop_tx),
            thread: Some(thread),
        })
    }

    fn data_dir(&self) -> &Path {
        self.dir.path()
    }

    fn stop(mut self) -> io::Result<()> {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        match self.thread.take().map(JoinHandle::join) {
            Some(Ok(result)) => result,
            Some(Err(_)) => Err(io::Error::other("the Ebb server thread panicked")),
            None => Ok(()),
        }
    }
}

impl Drop for EbbServer {
    fn drop(&mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A driver client for `addr`, at most `pool` connections (driver default when `None`).
async fn client(addr: SocketAddr, pool: Option<u32>) -> mongodb::error::Result<Client> {
    let mut options = ClientOptions::parse(format!(
        "mongodb://{addr}/?directConnection=true&serverSelectionTimeoutMS=10000"
    ))
    .await?;
    options.app_name = Some("ebb-crud-bench".into());
    options.max_pool_size = pool;
    Client::with_options(options)
}

/// One writer, `insert_many` of each batch in turn.
async fn ebb_batched(
    coll: &Collection<RawDocumentBuf>,
    batches: &[Vec<RawDocumentBuf>],
) -> BenchResult<Run> {
    let start = Instant::now();
    let mut docs = 0;
    for batch in batches {
        let result = coll.insert_many(batch).await?;
        if result.inserted_ids.len() != batch.len() {
            return Err(format!(
                "insert_many of {} documents reported {} inserted",
                batch.len(),
                result.inserted_ids.len()
            )
            .into());
        }
        docs += batch.len();
    }
    Ok(Run::new(docs, start.elapsed()))
}

/// One task per writer, each sending `insert_one` after `insert_one` for its documents `range`.
async fn ebb_single(
    coll: &Collection<RawDocumentBuf>,
    per_writer: &Arc<Vec<Vec<RawDocumentBuf>>>,
    range: Range<usize>,
) -> BenchResult<Run> {
    let start = Instant::now();
    let mut tasks = Vec::with_capacity(per_writer.len());
    for w in 0..per_writer.len() {
        let coll = coll.clone();
        let docs = Arc::clone(per_writer);
        let range = range.clone();
        tasks.push(tokio::spawn(async move {
            let mut n = 0;
            for doc in writer_docs(&docs, w, range) {
                coll.insert_one(doc).await?;
                n += 1;
            }
            BenchResult::Ok(n)
        }));
    }
    let mut docs = 0;
    for t in tasks {
        docs += t.await??;
    }
    Ok(Run::new(docs, start.elapsed()))
}

// ---------------------------------------------------------------------------------------------
// Phase 1: inserts
// ---------------------------------------------------------------------------------------------

/// Documents written in some time.
#[derive(Debug, Clone, Copy, Default)]
struct Run {
    docs: usize,
    elapsed: Duration,
}

impl Run {
    fn new(docs: usize, elapsed: Duration) -> Self {
        Run { docs, elapsed }
    }

    fn rate(self) -> f64 {
        let secs = self.elapsed.as_secs_f64();
        if secs > 0.0 {
            to_f64(self.docs) / secs
        } else {
            0.0
        }
    }

    fn add(&mut self, other: Run) {
        self.docs += other.docs;
        self.elapsed += other.elapsed;
    }
}

/// One insert shape, engine vs Ebb: every block both ran the same documents.
#[derive(Debug, Default)]
struct InsertComparison {
    engine: Run,
    ebb: Run,
    /// Ebb/engine rate of each block.
    block_ratios: Vec<f64>,
    /// Ebb/engine rate of each round.
    round_ratios: Vec<f64>,
}

impl InsertComparison {
    /// Ebb's rate over the engine's, from the totals.
    fn ratio(&self) -> f64 {
        self.ebb.rate() / self.engine.rate()
    }

    /// The median of the per-block ratios: robust to a disk stall that hits one block.
    fn median_block_ratio(&self) -> f64 {
        median(&self.block_ratios)
    }

    fn block(&mut self, engine: Run, ebb: Run) {
        self.block_ratios.push(ebb.rate() / engine.rate());
    }

    fn round(&mut self, engine: Run, ebb: Run) {
        self.round_ratios.push(ebb.rate() / engine.rate());
        self.engine.add(engine);
        self.ebb.add(ebb);
    }

    fn print(&self, name: &str) {
        let (lo, hi) = min_max(&self.round_ratios);
        println!(
            "  {name:<30} {:>10.0} {:>10.0} {:>8.3}x {:>8.3}x {:>7.3}..{:.3}",
            self.engine.rate(),
            self.ebb.rate(),
            self.ratio(),
            self.median_block_ratio(),
            lo,
            hi
        );
    }
}

struct InsertResults {
    batched: InsertComparison,
    batched_raw: Run,
    /// Raw/engine rate of each block of the durable batched shape.
    batched_raw_blocks: Vec<f64>,
    relaxed: InsertComparison,
    single: InsertComparison,
    single_blocking: Run,
}

/// Runs `a` then `b`, or `b` then `a`, and returns their results in `(a, b)` order.
macro_rules! pair {
    ($a_first:expr, $a:expr, $b:expr) => {
        if $a_first {
            let a = $a.await?;
            (a, $b.await?)
        } else {
            let b = $b.await?;
            ($a.await?, b)
        }
    };
}

async fn insert_phase(
    engine: &Arc<GroupCommit>,
    addr: SocketAddr,
    db: &mongodb::Database,
    scale: f64,
) -> BenchResult<InsertResults> {
    let batches_per_round = scaled(BATCHES_PER_ROUND, scale);
    let singles_per_writer = scaled(SINGLES_PER_WRITER, scale);
    let cap = INSERT_ROUND_CAP.mul_f64(scale);
    let batched_coll = db.collection::<RawDocumentBuf>("batched");
    let relaxed_coll = db.collection_with_options::<RawDocumentBuf>(
        "relaxed",
        CollectionOptions::builder()
            .write_concern(WriteConcern::builder().journal(false).build())
            .build(),
    );
    let single_coll = db.collection::<RawDocumentBuf>("single");
    // Every store gets the same `_id`s; they are separate stores (or key prefixes), so nothing
    // collides.
    let mut next_id: i64 = 0;
    let mut take_ids = |n: usize| {
        let first = next_id;
        next_id += i64::try_from(n).unwrap_or(i64::MAX);
        first
    };

    // Warm-up: creates the collections, opens the driver's connections, fills caches.
    let warm = vec![make_docs(take_ids(BATCH), BATCH)];
    engine_batched(engine, &warm, ENGINE_BATCHED, true).await?;
    engine_batched(engine, &warm, ENGINE_RELAXED, false).await?;
    ebb_batched(&batched_coll, &warm).await?;
    ebb_batched(&relaxed_coll, &warm).await?;
    let mut raw = RawConn::connect(addr)?;
    let requests = raw.insert_requests("batched_raw", &warm)?;
    raw = raw_inserts(raw, requests).await?.0;
    let warm_single = Arc::new(
        (0..WRITERS)
            .map(|_| make_docs(take_ids(20), 20))
            .collect::<Vec<_>>(),
    );
    engine_single(engine, &warm_single, 0..20, CommitOn::Worker).await?;
    engine_single(engine, &warm_single, 0..20, CommitOn::Blocking).await?;
    ebb_single(&single_coll, &warm_single, 0..20).await?;

    println!();
    println!(
        "1. inserts of {DOC_SIZE} B documents, docs/s. {INSERT_ROUNDS} rounds; per side per \
         round {batches_per_round} batches of {BATCH} from 1 writer, then {WRITERS} writers x \
         {singles_per_writer} single inserts. Sides take turns every {BATCH_BLOCK} batches / \
         {SINGLE_BLOCK} inserts per writer, the order rotating; a shape's round stops early \
         once it has taken {cap:.1?}."
    );
    println!(
        "   durable = acknowledged after fsync (Ebb's default write concern; engine awaits \
         durable(ticket)); relaxed = Ebb writeConcern {{j: false}} vs engine commit without the \
         wait. \"Ebb raw\" sends the same inserts as hand-built OP_MSGs on a blocking socket (no \
         driver). The engine commits on the runtime worker, as Ebb's insert handler does; \
         \"eng spawnb\" is the engine x8 committing in spawn_blocking instead."
    );
    let mut batched = InsertComparison::default();
    let mut batched_raw = Run::default();
    let mut batched_raw_blocks = Vec::new();
    let mut relaxed = InsertComparison::default();
    let mut single = InsertComparison::default();
    let mut single_blocking = Run::default();
    let (mut batched_lines, mut single_lines) = (Vec::new(), Vec::new());
    for round in 0..INSERT_ROUNDS {
        let round_batches: Vec<_> = (0..batches_per_round)
            .map(|_| make_docs(take_ids(BATCH), BATCH))
            .collect();
        let round_start = Instant::now();
        let (mut e, mut w, mut raw_run) = (Run::default(), Run::default(), Run::default());
        let (mut re, mut rw) = (Run::default(), Run::default());
        for (block, chunk) in round_batches.chunks(BATCH_BLOCK).enumerate() {
            // Durable: engine, Ebb through the driver, Ebb through a raw socket, taking turns.
            let (mut be, mut bw, mut br) = (Run::default(), Run::default(), Run::default());
            for i in 0..3 {
                match (round + block + i) % 3 {
                    0 => be = engine_batched(engine, chunk, ENGINE_BATCHED, true).await?,
                    1 => bw = ebb_batched(&batched_coll, chunk).await?,
                    _ => {
                        let requests = raw.insert_requests("batched_raw", chunk)?;
                        let (conn, run) = raw_inserts(raw, requests).await?;
                        raw = conn;
                        br = run;
                    }
                }
            }
            batched_raw_blocks.push(br.rate() / be.rate());
            raw_run.add(br);
            batched.block(be, bw);
            let (bre, brw) = pair!(
                (round + block) % 2 == 1,
                engine_batched(engine, chunk, ENGINE_RELAXED, false),
                ebb_batched(&relaxed_coll, chunk)
            );
            relaxed.block(bre, brw);
            e.add(be);
            w.add(bw);
            re.add(bre);
            rw.add(brw);
            if round_start.elapsed() >= cap {
                break;
            }
        }
        batched_raw.add(raw_run);
        batched.round(e, w);
        relaxed.round(re, rw);
        drop(round_batches);

        let per_writer = Arc::new(
            (0..WRITERS)
                .map(|_| make_docs(take_ids(singles_per_writer), singles_per_writer))
                .collect::<Vec<_>>(),
        );
        // Three sides take turns: engine committing on the worker (the baseline, as Ebb's
        // handler commits), engine committing in spawn_blocking, Ebb.
        let round_start = Instant::now();
        let (mut se, mut sw, mut sb) = (Run::default(), Run::default(), Run::default());
        for (block, first) in (0..singles_per_writer).step_by(SINGLE_BLOCK).enumerate() {
            let range = first..(first + SINGLE_BLOCK).min(singles_per_writer);
            let (mut be, mut bw) = (Run::default(), Run::default());
            for i in 0..3 {
                match (round + block + i) % 3 {
                    0 => {
                        be = engine_single(engine, &per_writer, range.clone(), CommitOn::Worker)
                            .await?;
                    }
                    1 => bw = ebb_single(&single_coll, &per_writer, range.clone()).await?,
                    _ => sb.add(
                        engine_single(engine, &per_writer, range.clone(), CommitOn::Blocking)
                            .await?,
                    ),
                }
            }
            single.block(be, bw);
            se.add(be);
            sw.add(bw);
            if round_start.elapsed() >= cap {
                break;
            }
        }
        single.round(se, sw);
        single_blocking.add(sb);
        batched_lines.push(format!(
            "  {:<6} {:>10.0} {:>10.0} {:>7.3}x {:>10.0} {:>7.3}x   {:>10.0} {:>10.0} {:>7.3}x",
            round + 1,
            e.rate(),
            w.rate(),
            w.rate() / e.rate(),
            raw_run.rate(),
            raw_run.rate() / e.rate(),
            re.rate(),
            rw.rate(),
            rw.rate() / re.rate(),
        ));
        single_lines.push(format!(
            "  {:<6} {:>10.0} {:>10.0} {:>7.3}x   {:>10.0}",
            round + 1,
            se.rate(),
            sw.rate(),
            sw.rate() / se.rate(),
            sb.rate(),
        ));
    }
    println!();
    println!("  batches of {BATCH} documents, 1 writer");
    println!("  {:<6} {:-^50}   {:-^30}", "", " durable ", " relaxed ");
    println!(
        "  {:<6} {:>10} {:>10} {:>8} {:>10} {:>8}   {:>10} {:>10} {:>8}",
        "round", "engine", "Ebb", "ratio", "Ebb raw", "ratio", "engine", "Ebb", "ratio"
    );
    for line in batched_lines {
        println!("{line}");
    }
    println!();
    println!("  single inserts, {WRITERS} concurrent writers, durable");
    println!(
        "  {:<6} {:>10} {:>10} {:>8}   {:>10}",
        "round", "engine", "Ebb", "ratio", "eng spawnb"
    );
    for line in single_lines {
        println!("{line}");
    }

    // One writer, one document per commit: the cost of an fsync with nothing to group.
    let serial_n = scaled(200.0, scale);
    let serial_docs = make_docs(take_ids(serial_n), serial_n);
    let serial = engine_serial(engine, &serial_docs, Duration::from_secs(1).mul_f64(scale)).await?;

    println!();
    println!(
        "  {:<30} {:>10} {:>10} {:>9} {:>9} {:>14}",
        "all rounds, docs/s", "engine", "Ebb", "Ebb/eng", "median*", "rounds min..max"
    );
    batched.print(&format!("durable, batches of {BATCH}"));
    println!(
        "  {:<30} {:>10} {:>10.0} {:>8.3}x   (Ebb without the driver: hand-built OP_MSG, blocking \
         socket)",
        "  raw OP_MSG variant",
        "",
        batched_raw.rate(),
        batched_raw.rate() / batched.engine.rate(),
    );
    relaxed.print(&format!("relaxed, batches of {BATCH}"));
    single.print(&format!("durable, single x{WRITERS} writers"));
    println!(
        "  {:<30} {:>10.0}   (engine, {WRITERS} writers committing in spawn_blocking: {:.3}x \
         the on-worker rate)",
        "  spawn_blocking variant",
        single_blocking.rate(),
        single_blocking.rate() / single.engine.rate(),
    );
    println!(
        "  {:<30} {:>10.0}   (one fsync per doc: {:.0} us each; {WRITERS} writers get {:.1}x that)",
        "durable, single x1 writer",
        serial.rate(),
        1e6 / serial.rate(),
        single.engine.rate() / serial.rate(),
    );
    println!(
        "  * median of the per-block Ebb/engine ratios (each block: both sides, same documents, \
         back to back)"
    );
    Ok(InsertResults {
        batched,
        batched_raw,
        batched_raw_blocks,
        relaxed,
        single,
        single_blocking,
    })
}

// ---------------------------------------------------------------------------------------------
// Phase 2: find by _id vs ping
// ---------------------------------------------------------------------------------------------

/// Latencies in nanoseconds.
#[derive(Debug, Default)]
struct Samples(Vec<u64>);

impl Samples {
    fn push(&mut self, d: Duration) {
        self.0.push(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
    }

    /// The `q` quantile in microseconds (nearest rank on the sorted samples).
    fn quantile_us(&self, q: f64) -> f64 {
        let mut sorted = self.0.clone();
        sorted.sort_unstable();
        let Some(last) = sorted.len().checked_sub(1) else {
            return 0.0;
        };
        #[expect(
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss,
            reason = "an index into the sorted samples, in range by construction"
        )]
        let index = ((to_f64(last) * q).round() as usize).min(last);
        sorted
            .get(index)
            .map_or(0.0, |&ns| to_f64_u64(ns) / 1_000.0)
    }

    fn mean_us(&self) -> f64 {
        if self.0.is_empty() {
            return 0.0;
        }
        let total: u64 = self.0.iter().sum();
        to_f64_u64(total) / to_f64(self.0.len()) / 1_000.0
    }
}

/// One kind of request in the lookup phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lookup {
    /// `find_one({_id: k})` through the driver.
    DriverFind,
    /// `ping` through the driver.
    DriverPing,
    /// The same `find` as a hand-built `OP_MSG` on a plain blocking socket: no driver.
    RawFind,
    /// `ping` likewise.
    RawPing,
}

impl Lookup {
    const ALL: [Lookup; 4] = [
        Lookup::DriverFind,
        Lookup::DriverPing,
        Lookup::RawFind,
        Lookup::RawPing,
    ];

    fn slot(self) -> usize {
        match self {
            Lookup::DriverFind => 0,
            Lookup::DriverPing => 1,
            Lookup::RawFind => 2,
            Lookup::RawPing => 3,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Lookup::DriverFind => "find_one (driver)",
            Lookup::DriverPing => "ping (driver)",
            Lookup::RawFind => "find (raw OP_MSG)",
            Lookup::RawPing => "ping (raw OP_MSG)",
        }
    }
}

struct LookupResults {
    /// By [`Lookup::slot`].
    samples: [Samples; 4],
    /// p50(find)/p50(ping) through the driver, per round.
    round_ratios: Vec<f64>,
}

impl LookupResults {
    fn p50(&self, kind: Lookup) -> f64 {
        self.samples[kind.slot()].quantile_us(0.5)
    }

    /// p50(find)/p50(ping) through the driver: the goal's measure.
    fn ratio(&self) -> f64 {
        self.p50(Lookup::DriverFind) / self.p50(Lookup::DriverPing)
    }

    fn raw_ratio(&self) -> f64 {
        self.p50(Lookup::RawFind) / self.p50(Lookup::RawPing)
    }
}

/// A plain blocking connection speaking hand-built `OP_MSG`s: what the server costs without a
/// driver in the way.
struct RawConn {
    stream: std::net::TcpStream,
    reply: Vec<u8>,
    next_id: i32,
    ping: Vec<u8>,
}

impl RawConn {
    fn connect(addr: SocketAddr) -> BenchResult<RawConn> {
        let stream = std::net::TcpStream::connect(addr)?;
        stream.set_nodelay(true)?;
        let mut conn = RawConn {
            stream,
            reply: vec![0; 64 * 1024],
            next_id: 0,
            ping: Vec::new(),
        };
        conn.ping = conn.encode(rawdoc! { "ping": 1, "$db": "bench" })?;
        Ok(conn)
    }

    /// `body` as an `OP_MSG`, with a request id of its own.
    fn encode(&mut self, body: RawDocumentBuf) -> BenchResult<Vec<u8>> {
        self.encode_msg(ebb_wire::OpMsg::new(body))
    }

    /// `msg` as a message with a request id of its own.
    fn encode_msg(&mut self, msg: ebb_wire::OpMsg) -> BenchResult<Vec<u8>> {
        self.next_id = self.next_id.wrapping_add(1);
        let message = ebb_wire::Message {
            request_id: self.next_id,
            response_to: 0,
            body: ebb_wire::Body::Msg(msg),
            compressor: None,
        };
        let mut out = bytes::BytesMut::new();
        message.encode(None, &mut out)?;
        Ok(out.to_vec())
    }

    /// Sends `request` and reads the whole reply (checked to answer it) into `self.reply`;
    /// returns its length.
    fn round_trip(&mut self, request: &[u8]) -> BenchResult<usize> {
        use std::io::{Read, Write};
        self.stream.write_all(request)?;
        let mut have = 0;
        loop {
            let n = self.stream.read(&mut self.reply[have..])?;
            if n == 0 {
                return Err("the server closed the connection".into());
            }
            have += n;
            if have >= 16 {
                let len = usize::try_from(i32::from_le_bytes(self.reply[..4].try_into()?))?;
                if len < 16 || len > self.reply.len() || have > len {
                    return Err(format!("bad reply: messageLength {len}, {have} bytes read").into());
                }
                if have == len {
                    if self.reply[8..12] != request[4..8] {
                        return Err("the reply answers another request".into());
                    }
                    return Ok(len);
                }
            }
        }
    }

    /// The reply's `OP_MSG` body.
    fn reply_body(&self, len: usize) -> BenchResult<RawDocumentBuf> {
        let mut buf = bytes::BytesMut::from(&self.reply[..len]);
        let frame = ebb_wire::Frame::split(&mut buf, ebb_wire::MAX_MESSAGE_SIZE)?
            .ok_or("incomplete reply")?;
        match ebb_wire::Message::decode(&frame, ebb_wire::MAX_MESSAGE_SIZE)?.body {
            ebb_wire::Body::Msg(msg) => Ok(msg.body),
            _ => Err("the reply is not an OP_MSG".into()),
        }
    }

    /// One `insert` into `collection` per batch, the documents in a kind-1 sequence as drivers
    /// send them, default write concern.
    fn insert_requests(
        &mut self,
        collection: &str,
        batches: &[Vec<RawDocumentBuf>],
    ) -> BenchResult<Vec<(usize, Vec<u8>)>> {
        batches
            .iter()
            .map(|docs| {
                let mut msg = ebb_wire::OpMsg::new(rawdoc! {
                    "insert": collection,
                    "ordered": true,
                    "$db": "bench",
                });
                msg.sequences.push(ebb_wire::DocumentSequence {
                    identifier: "documents".into(),
                    documents: docs.clone(),
                });
                Ok((docs.len(), self.encode_msg(msg)?))
            })
            .collect()
    }

    /// `n` sequential finds by random `_id`, each checked.
    fn finds(&mut self, rng: &mut XorShift, keys: u64, n: usize, out: &mut Samples) -> BenchResult {
        for _ in 0..n {
            let id = i64::try_from(rng.below(keys))?;
            // What the driver sends for find_one, less its session and topology fields.
            let request = self.encode(rawdoc! {
                "find": "lookup",
                "filter": { "_id": id },
                "limit": 1_i64,
                "singleBatch": true,
                "$db": "bench",
            })?;
            let start = Instant::now();
            let len = self.round_trip(&request)?;
            out.push(start.elapsed());
            let body = self.reply_body(len)?;
            let found = body
                .get_document("cursor")
                .and_then(|c| c.get_array("firstBatch"))
                .ok()
                .and_then(|b| b.into_iter().next())
                .and_then(Result::ok)
                .and_then(|d| d.as_document().map(|d| d.get_i64("_id").ok()));
            if found != Some(Some(id)) {
                return Err(format!("raw find of _id {id} answered {body:?}").into());
            }
        }
        Ok(())
    }

    /// `n` sequential pings, each checked.
    fn pings(&mut self, n: usize, out: &mut Samples) -> BenchResult {
        let mut request = std::mem::take(&mut self.ping);
        for _ in 0..n {
            self.next_id = self.next_id.wrapping_add(1);
            request[4..8].copy_from_slice(&self.next_id.to_le_bytes());
            let start = Instant::now();
            let len = self.round_trip(&request)?;
            out.push(start.elapsed());
            if self.reply_body(len)?.get_f64("ok").ok() != Some(1.0) {
                return Err("raw ping did not answer ok: 1".into());
            }
        }
        self.ping = request;
        Ok(())
    }
}

async fn lookup_phase(
    addr: SocketAddr,
    db: &mongodb::Database,
    scale: f64,
) -> BenchResult<LookupResults> {
    let loaded = scaled(LOOKUP_DOCS, scale);
    let per_round = scaled(LOOKUPS_PER_ROUND, scale);
    let cap = LOOKUP_ROUND_CAP.mul_f64(scale);
    let load_coll = db.collection::<RawDocumentBuf>("lookup");
    let mut first = 0;
    while first < loaded {
        let n = BATCH.min(loaded - first);
        load_coll
            .insert_many(make_docs(i64::try_from(first)?, n))
            .await?;
        first += n;
    }

    // One connection for every driver lookup and ping, one raw connection for the others.
    let client = client(addr, Some(1)).await?;
    let db = client.database("bench");
    let coll = db.collection::<RawDocumentBuf>("lookup");
    let raw = RawConn::connect(addr)?;
    let mut rng = XorShift(0x0123_4567_89AB_CDEF);
    let keys = u64::try_from(loaded)?;
    let warmup = (per_round / 4).clamp(50, 500);
    let mut ignored = Samples::default();
    finds(&coll, &mut rng, keys, warmup, &mut ignored).await?;
    pings(&db, warmup, &mut ignored).await?;
    let raw_rng = XorShift(0x0FED_CBA9_8765_4321);
    let (mut raw, mut raw_rng, _) = raw_block(
        raw,
        raw_rng,
        Lookup::RawFind,
        keys,
        warmup,
        Samples::default(),
    )
    .await?;
    (raw, raw_rng, _) = raw_block(
        raw,
        raw_rng,
        Lookup::RawPing,
        keys,
        warmup,
        Samples::default(),
    )
    .await?;

    println!();
    println!(
        "2. find by _id (k random among {loaded} loaded docs) vs ping, sequential on one \
         connection; {LOOKUP_ROUNDS} rounds x {per_round} of each kind, the kinds taking turns \
         in blocks of {LOOKUP_BLOCK} (order rotating; warm-up {warmup}). The goal is measured \
         through the driver; the raw OP_MSG rows (blocking socket, no driver) show the server's \
         own share."
    );
    println!(
        "  {:<6} {:>10} {:>10} {:>8}   {:>10} {:>10} {:>8}",
        "", "driver", "", "", "raw", "", ""
    );
    println!(
        "  {:<6} {:>10} {:>10} {:>8}   {:>10} {:>10} {:>8}",
        "round", "find p50", "ping p50", "ratio", "find p50", "ping p50", "ratio"
    );
    let mut all: [Samples; 4] = Default::default();
    let mut round_ratios = Vec::new();
    for round in 0..LOOKUP_ROUNDS {
        let mut this: [Samples; 4] = Default::default();
        let start = Instant::now();
        let mut done = 0;
        let mut block = 0;
        while done < per_round && start.elapsed() < cap {
            let n = LOOKUP_BLOCK.min(per_round - done);
            for i in 0..Lookup::ALL.len() {
                let kind = Lookup::ALL[(round + block + i) % Lookup::ALL.len()];
                let out = &mut this[kind.slot()];
                match kind {
                    Lookup::DriverFind => finds(&coll, &mut rng, keys, n, out).await?,
                    Lookup::DriverPing => pings(&db, n, out).await?,
                    Lookup::RawFind | Lookup::RawPing => {
                        let samples = std::mem::take(out);
                        let (c, r, samples) =
                            raw_block(raw, raw_rng, kind, keys, n, samples).await?;
                        (raw, raw_rng, *out) = (c, r, samples);
                    }
                }
            }
            done += n;
            block += 1;
        }
        let p50 = |k: Lookup| this[k.slot()].quantile_us(0.5);
        let ratio = p50(Lookup::DriverFind) / p50(Lookup::DriverPing);
        round_ratios.push(ratio);
        println!(
            "  {:<6} {:>10.1} {:>10.1} {:>7.3}x   {:>10.1} {:>10.1} {:>7.3}x",
            round + 1,
            p50(Lookup::DriverFind),
            p50(Lookup::DriverPing),
            ratio,
            p50(Lookup::RawFind),
            p50(Lookup::RawPing),
            p50(Lookup::RawFind) / p50(Lookup::RawPing),
        );
        for (total, part) in all.iter_mut().zip(this) {
            total.0.extend(part.0);
        }
    }
    println!();
    println!(
        "  {:<20} {:>9} {:>9} {:>9} {:>9}",
        "all rounds, us", "p50", "p99", "mean", "count"
    );
    for kind in Lookup::ALL {
        let s = &all[kind.slot()];
        println!(
            "  {:<20} {:>9.1} {:>9.1} {:>9.1} {:>9}",
            kind.name(),
            s.quantile_us(0.5),
            s.quantile_us(0.99),
            s.mean_us(),
            s.0.len()
        );
    }
    let results = LookupResults {
        samples: all,
        round_ratios,
    };
    let (lo, hi) = min_max(&results.round_ratios);
    println!(
        "  driver: p50(find)/p50(ping) = {:.3}x (rounds {lo:.3}..{hi:.3}), p50 difference {:.1} \
         us; raw: {:.3}x, difference {:.1} us (so the driver adds {:.1} us to a find beyond what \
         it adds to a ping)",
        results.ratio(),
        results.p50(Lookup::DriverFind) - results.p50(Lookup::DriverPing),
        results.raw_ratio(),
        results.p50(Lookup::RawFind) - results.p50(Lookup::RawPing),
        (results.p50(Lookup::DriverFind) - results.p50(Lookup::DriverPing))
            - (results.p50(Lookup::RawFind) - results.p50(Lookup::RawPing)),
    );
    Ok(results)
}

/// Sends each `(documents, request)` of [`RawConn::insert_requests`] in turn on a blocking
/// thread, checking every reply's `n`; hands the connection back with the time it took.
async fn raw_inserts(
    mut conn: RawConn,
    requests: Vec<(usize, Vec<u8>)>,
) -> BenchResult<(RawConn, Run)> {
    tokio::task::spawn_blocking(move || -> BenchResult<_> {
        let mut elapsed = Duration::ZERO;
        let mut docs = 0;
        for (count, request) in requests {
            let start = Instant::now();
            let len = conn.round_trip(&request)?;
            elapsed += start.elapsed();
            let body = conn.reply_body(len)?;
            if body.get_i32("n").ok().and_then(|n| usize::try_from(n).ok()) != Some(count) {
                return Err(format!("raw insert of {count} documents answered {body:?}").into());
            }
            docs += count;
        }
        Ok((conn, Run::new(docs, elapsed)))
    })
    .await?
}

/// `n` raw finds or pings on a blocking thread; hands the connection, generator and samples back.
async fn raw_block(
    mut conn: RawConn,
    mut rng: XorShift,
    kind: Lookup,
    keys: u64,
    n: usize,
    mut out: Samples,
) -> BenchResult<(RawConn, XorShift, Samples)> {
    tokio::task::spawn_blocking(move || -> BenchResult<_> {
        match kind {
            Lookup::RawPing => conn.pings(n, &mut out)?,
            _ => conn.finds(&mut rng, keys, n, &mut out)?,
        }
        Ok((conn, rng, out))
    })
    .await?
}

/// `n` sequential `find_one({_id: k})`, `k` uniform in `0..keys`, each checked.
async fn finds(
    coll: &Collection<RawDocumentBuf>,
    rng: &mut XorShift,
    keys: u64,
    n: usize,
    out: &mut Samples,
) -> BenchResult {
    for _ in 0..n {
        let id = i64::try_from(rng.below(keys))?;
        let start = Instant::now();
        let found = coll.find_one(doc! { "_id": id }).await?;
        out.push(start.elapsed());
        match found {
            Some(d) if d.get_i64("_id").ok() == Some(id) => {}
            _ => return Err(format!("find_one({{_id: {id}}}) did not return it").into()),
        }
    }
    Ok(())
}

/// `n` sequential `ping`s, each checked.
async fn pings(db: &mongodb::Database, n: usize, out: &mut Samples) -> BenchResult {
    for _ in 0..n {
        let start = Instant::now();
        let reply = db.run_command(doc! { "ping": 1 }).await?;
        out.push(start.elapsed());
        if reply.get_f64("ok").ok() != Some(1.0) && reply.get_i32("ok").ok() != Some(1) {
            return Err(format!("ping answered {reply}").into());
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Goals and helpers
// ---------------------------------------------------------------------------------------------

fn report_goals(inserts: Option<&InsertResults>, lookups: Option<&LookupResults>) {
    println!();
    println!("goals (informational, never fail the run):");
    let mut noisy = Vec::new();
    if let Some(inserts) = inserts {
        // The goal is the server's: its rate over the wire against the engine's. A client
        // that costs next to nothing (hand-built OP_MSGs) measures that; the driver's own
        // serialization (about 2.4 us a document here) runs on the same two cores and is
        // reported beside it.
        let raw = median(&inserts.batched_raw_blocks);
        println!(
            "  batched inserts over the wire >= {:.0}% of the engine's own rate: {:.1}% (raw \
             OP_MSG client, median of blocks; {:.1}% from the totals)  {}",
            INSERT_GOAL * 100.0,
            raw * 100.0,
            inserts.batched_raw.rate() / inserts.batched.engine.rate() * 100.0,
            verdict(raw >= INSERT_GOAL)
        );
        let batched = inserts.batched.median_block_ratio();
        println!(
            "  the same through the mongodb driver: {:.1}% (median of blocks; {:.1}% from the \
             totals)  {}",
            batched * 100.0,
            inserts.batched.ratio() * 100.0,
            verdict(batched >= INSERT_GOAL)
        );
        println!(
            "  (for reference: relaxed batched {:.1}%, durable single x{WRITERS} {:.1}% of the \
             engine's rate (medians of blocks); the engine committing in spawn_blocking reaches \
             {:.1}% of its on-worker single x{WRITERS} rate)",
            inserts.relaxed.median_block_ratio() * 100.0,
            inserts.single.median_block_ratio() * 100.0,
            inserts.single_blocking.rate() / inserts.single.engine.rate() * 100.0,
        );
        noisy.push(("batched insert", &inserts.batched.round_ratios));
        noisy.push(("relaxed insert", &inserts.relaxed.round_ratios));
        noisy.push(("single insert", &inserts.single.round_ratios));
    }
    if let Some(lookups) = lookups {
        let find = lookups.ratio();
        println!(
            "  find-by-_id p50 <= {FIND_GOAL}x ping: {find:.3}x  {}",
            verdict(find <= FIND_GOAL)
        );
        println!(
            "  (for reference: without the driver, raw find p50 / raw ping p50 = {:.3}x)",
            lookups.raw_ratio()
        );
        noisy.push(("lookup", &lookups.round_ratios));
    }
    for (what, ratios) in noisy {
        let (lo, hi) = min_max(ratios);
        if lo > 0.0 && hi / lo > NOISY_SPREAD {
            println!(
                "  warning: {what} rounds disagree (ratios {lo:.3}..{hi:.3}): the machine was \
                 noisy; rerun it quiet"
            );
        }
    }
    println!();
}

fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    match sorted.len() {
        0 => 0.0,
        n if n % 2 == 1 => sorted[n / 2],
        n => f64::midpoint(sorted[n / 2 - 1], sorted[n / 2]),
    }
}

fn verdict(pass: bool) -> &'static str {
    if pass { "PASS" } else { "MISS" }
}

fn min_max(values: &[f64]) -> (f64, f64) {
    if values.is_empty() {
        return (0.0, 0.0);
    }
    values
        .iter()
        .fold((f64::MAX, f64::MIN), |(lo, hi), &v| (lo.min(v), hi.max(v)))
}

/// `EBB_BENCH_SCALE`, or 1.
fn scale() -> f64 {
    match std::env::var("EBB_BENCH_SCALE") {
        Ok(v) => match v.trim().parse::<f64>() {
            Ok(s) if s.is_finite() && s > 0.0 => s,
            _ => {
                eprintln!("EBB_BENCH_SCALE={v:?} is not a positive number; using 1.0");
                1.0
            }
        },
        Err(_) => 1.0,
    }
}

/// `base * scale`, rounded, at least 1.
fn scaled(base: f64, scale: f64) -> usize {
    #[expect(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        reason = "a small positive count"
    )]
    let n = (base * scale).round().clamp(1.0, 1e9) as usize;
    n
}

#[expect(clippy::cast_precision_loss, reason = "counts far below 2^52")]
fn to_f64(n: usize) -> f64 {
    n as f64
}

#[expect(
    clippy::cast_precision_loss,
    reason = "nanosecond totals far below 2^52"
)]
fn to_f64_u64(n: u64) -> f64 {
    n as f64
}
