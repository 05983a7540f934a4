//! How far is Ebb's durable write path from what the disk and the engine under it allow? Two goals
//! of issue #17, measured in one run, each against a baseline measured in the same run:
//!
//! 1. **`insert_one` latency vs `ping` + `fdatasync`.** Goal: "`insert_one` p50 ≤ `ping` p50 +
//!    1.3× the bare `fdatasync` p50 of the data disk". On one connection through the `mongodb`
//!    driver, one request at a time: `ping` (`run_command({ping: 1})`) and `insert_one` of a
//!    [`DOC_SIZE`]-byte document (default write concern: Ebb answers once the group commit's
//!    `fdatasync` covers the insert). The bare `fdatasync`: a file in the server's own data
//!    directory (same file system, same disk as its journal), to which each sample appends a
//!    [`PROBE_RECORD`]-byte record (about what one such insert adds to the journal) and then
//!    times `File::sync_data()` alone. Beside them, for diagnosis only:
//!    * "`insert_one` j:false": the same inserts into another collection with write concern
//!      `{j: false}` (Ebb answers without waiting for the sync): the server's own work on an
//!      insert, so that `insert_one - j:false` is the wait for durability;
//!    * "fdatasync prealloc": the same in a file first sized to 64 MiB with `set_len` and
//!      written from its start, as fjall lays out its journal (the file's size no longer changes
//!      with each write, only blocks get allocated);
//!    * "engine one": the engine without the server: [`DiskStorage`] (in another temporary
//!      directory, same file system) behind [`GroupCommit`], one commit of that one document as
//!      Ebb stores it, then `durable(ticket)`, from a task of the client runtime;
//!    * "`insert_one` hand-off": the same inserts into a second server started with
//!      `--leader-sync false`, where every durable insert hands its sync to the syncer thread
//!      (what the first server does only when two writers wait at once): what leading saves.
//!
//!    The seven kinds take turns in blocks of [`LATENCY_BLOCK`] (the order rotating every
//!    block), so machine and disk noise hit them all alike; the file syncs run on a blocking
//!    thread. Per round: each kind's p50 and the ratio `(insert_one p50 - ping p50) /
//!    fdatasync p50`; the goal (ratio ≤ 1.3) is judged on the median of the per-round ratios,
//!    the ratio from all rounds' samples pooled is printed beside it.
//! 2. **`insert_many` vs the engine's grouped write rate.** Goal: "`insert_many` ≥ 75% of the
//!    engine's own grouped write rate". [`WRITERS`] writers, each sending `insert_many` of
//!    [`BATCH`] documents of [`DOC_SIZE`] bytes into one collection, one after another, on a
//!    driver client with [`WRITERS`] connections, for a time-bounded slice; documents/s = the
//!    documents acknowledged / the time until the last writer's last batch came back. The
//!    engine's rate: the same number of writers (tasks of the client runtime, 2 workers, as the
//!    server's handlers run on its 2 workers), each committing the same documents [`BATCH`] at a
//!    time straight into [`DiskStorage`] behind [`GroupCommit`] (what the server itself uses:
//!    one commit per batch, on the task, then `durable(ticket)`, so concurrent writers share
//!    `fdatasync`s), keys and values as Ebb builds them (`collection id · record id` → record
//!    header + BSON, and the `_id` index entry `collection id · keystring(_id)` → record id). The
//!    engine store is opened with the block cache the server gives its own. Engine and Ebb
//!    slices alternate (the order flipping every round); the goal is judged on the median of the
//!    per-round ratios (Ebb / engine), the ratio of the totals is printed beside it, with the CPU
//!    time (every thread of the process) each side spent per document.
//!
//! Ebb runs in-process on a durable store in a fresh temporary directory (`common::Server`: its
//! own 2-worker tokio runtime on its own thread, as on the 2-core target); the driver and the
//! engine baseline run in a second 2-worker runtime. No tracing subscriber is installed. The
//! server's default configuration keeps no oplog, so neither side writes one.
//!
//! The goals are printed as PASS or MISS and never change the exit status: this is a
//! measurement, not a test. The run fails (non-zero) only if a server or store cannot be
//! started, or answers wrongly (an insert not acknowledged with its `_id` or its count, a ping
//! not `ok`, a final count that differs from what was inserted).
//!
//! `EBB_BENCH_SCALE` (a float, default 1.0) scales every count, slice and time cap.

#[path = "common/mod.rs"]
mod common;

use std::fs::File;
use std::io::{self, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bson::{Bson, RawDocumentBuf, doc, rawdoc};
use common::{
    BenchResult, Cpu, Samples, Server, USER_HZ, XorShift, connect, median, ok, run_bench, scale,
    scaled, scaled_duration, to_f64, to_f64_u64, verdict,
};
use ebb::query::keystring;
use ebb::storage::{Batch, DiskStorage, GroupCommit, Keyspace, record};
use mongodb::options::{CollectionOptions, WriteConcern};
use mongodb::{Collection, Database};

/// Size of every document, in BSON bytes.
const DOC_SIZE: usize = 240;
/// Bytes appended to the probe file before each timed `fdatasync`: about one insert of a
/// [`DOC_SIZE`] document in the journal (record key and value, `_id` index entry, framing).
const PROBE_RECORD: usize = 300;
/// Size the preallocated probe file is given, as fjall sizes a new journal.
const PREALLOCATED: u64 = 64 * 1024 * 1024;
/// Interleaved rounds of the latency phase.
const LATENCY_ROUNDS: usize = 8;
/// Samples of each kind per round (scaled).
const LATENCY_PER_ROUND: f64 = 500.0;
/// Samples of one kind taken before the next kind's turn.
const LATENCY_BLOCK: usize = 50;
/// Most time one latency round may take, all kinds together (scaled): a slow disk makes a round
/// stop early (after a whole block of every kind) instead of blowing the time budget.
const LATENCY_ROUND_CAP: Duration = Duration::from_secs(5);
/// Goal: `(insert_one p50 - ping p50) / fdatasync p50`, at most.
const LATENCY_GOAL: f64 = 1.3;
/// Concurrent writers of the rate phase (driver connections; engine tasks).
const WRITERS: usize = 4;
/// Documents per `insert_many` / per engine commit.
const BATCH: usize = 100;
/// Interleaved rounds of the rate phase.
const RATE_ROUNDS: usize = 12;
/// How long each side writes per round (scaled).
const SLICE: Duration = Duration::from_millis(1_500);
/// After a slice, the process counts as quiet once it used at most this many CPU clock ticks
/// (`USER_HZ`, 10 ms each) in one [`SETTLE_POLL`].
const QUIET_TICKS: u64 = 1;
const SETTLE_POLL: Duration = Duration::from_millis(100);
/// Most time [`settle`] waits for quiet.
const SETTLE_CAP: Duration = Duration::from_secs(3);
/// Goal: Ebb's `insert_many` rate over the engine's grouped rate, at least.
const RATE_GOAL: f64 = 0.75;
/// Per-round ratios further apart than this (largest / smallest) mean the machine was noisy.
const NOISY_SPREAD: f64 = 1.25;
/// Engine baseline "collection ids" (key prefixes).
const ENGINE_ONE: u64 = 1;
const ENGINE_MANY: u64 = 2;
const DB: &str = "writepath";

fn main() {
    run_bench("write_path", bench());
}

async fn bench() -> BenchResult {
    let scale = scale();
    header(scale);

    let server = Server::start()?;
    let engine_dir = tempfile::tempdir()?;
    let engine = {
        let path = engine_dir.path().to_owned();
        let cache = ebb::Config::default().cache_bytes(ebb::config::physical_memory());
        let storage =
            tokio::task::spawn_blocking(move || DiskStorage::open_with_cache(&path, Some(cache)))
                .await??;
        Arc::new(GroupCommit::new(Arc::new(storage)))
    };
    println!(
        "Ebb store: {}; engine store: {}",
        server.data_dir().display(),
        engine_dir.path().display()
    );

    // The same server with leading syncs off: every durable insert hands its sync to the
    // syncer thread (diagnosis only).
    let handoff = Server::start_with(|config| config.leader_sync = false)?;
    let latency = latency_phase(&server, &handoff, &engine, scale).await?;
    handoff.stop()?;
    let rates = rate_phase(&server, &engine, scale).await?;
    report_goals(&latency, &rates);

    let store = Arc::clone(&engine);
    tokio::task::spawn_blocking(move || store.shutdown()).await?;
    drop(engine);
    drop(engine_dir);
    server.stop()?;
    Ok(())
}

fn header(scale: f64) {
    println!();
    println!(
        "Ebb's durable write path vs the disk and the engine ({} build, {} CPUs, {} server / {} \
         client runtime workers, EBB_BENCH_SCALE={scale})",
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

// ---------------------------------------------------------------------------------------------
// Documents and the engine baseline
// ---------------------------------------------------------------------------------------------

/// A document of exactly [`DOC_SIZE`] bytes with `_id: id` first.
fn make_doc(id: i64) -> RawDocumentBuf {
    let mut doc = rawdoc! {
        "_id": id,
        "kind": "bench",
        "n": i32::try_from(id.rem_euclid(1_000_000)).unwrap_or(0),
        "at": bson::DateTime::from_millis(1_700_000_000_000 + id),
        "tags": ["alpha", "beta"],
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
        .map(|_| char::from(b'a' + u8::try_from(rng.below(26)).unwrap_or(0)))
        .collect();
    doc.append(bson::raw::cstr!("payload"), payload);
    doc
}

/// The record ids the engine baseline gives its documents, in insertion order as Ebb does.
static NEXT_RID: AtomicU64 = AtomicU64::new(1);

/// Adds `doc` to `batch` as Ebb stores it: key `collection · record id`, value record header
/// + the BSON, and its `_id` index entry `collection · keystring(_id)` → record id.
fn put_doc(batch: &mut Batch, collection: u64, now_ms: i64, doc: &RawDocumentBuf) -> BenchResult {
    let id = doc.get("_id")?.ok_or("document without _id")?;
    let rid = NEXT_RID.fetch_add(1, Ordering::Relaxed);
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

/// Hands out `_id`s, `n` at a time.
fn take_ids(next: &AtomicI64, n: usize) -> BenchResult<i64> {
    Ok(next.fetch_add(i64::try_from(n)?, Ordering::Relaxed))
}

// ---------------------------------------------------------------------------------------------
// Phase 1: insert_one latency
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Ping,
    Insert,
    InsertRelaxed,
    Fsync,
    FsyncPrealloc,
    EngineOne,
    InsertHandOff,
}

impl Kind {
    const ALL: [Kind; 7] = [
        Kind::Ping,
        Kind::Insert,
        Kind::InsertRelaxed,
        Kind::Fsync,
        Kind::FsyncPrealloc,
        Kind::EngineOne,
        Kind::InsertHandOff,
    ];

    fn name(self) -> &'static str {
        match self {
            Kind::Ping => "ping",
            Kind::Insert => "insert_one",
            Kind::InsertRelaxed => "insert_one j:false",
            Kind::Fsync => "fdatasync (append)",
            Kind::FsyncPrealloc => "fdatasync prealloc",
            Kind::EngineOne => "engine one",
            Kind::InsertHandOff => "insert_one hand-off",
        }
    }
}

/// Samples of every kind.
#[derive(Debug, Default)]
struct LatencySet {
    ping: Samples,
    insert: Samples,
    relaxed: Samples,
    fsync: Samples,
    prealloc: Samples,
    engine: Samples,
    handoff: Samples,
}

impl LatencySet {
    fn get(&self, kind: Kind) -> &Samples {
        match kind {
            Kind::Ping => &self.ping,
            Kind::Insert => &self.insert,
            Kind::InsertRelaxed => &self.relaxed,
            Kind::Fsync => &self.fsync,
            Kind::FsyncPrealloc => &self.prealloc,
            Kind::EngineOne => &self.engine,
            Kind::InsertHandOff => &self.handoff,
        }
    }

    fn get_mut(&mut self, kind: Kind) -> &mut Samples {
        match kind {
            Kind::Ping => &mut self.ping,
            Kind::Insert => &mut self.insert,
            Kind::InsertRelaxed => &mut self.relaxed,
            Kind::Fsync => &mut self.fsync,
            Kind::FsyncPrealloc => &mut self.prealloc,
            Kind::EngineOne => &mut self.engine,
            Kind::InsertHandOff => &mut self.handoff,
        }
    }

    fn p50(&self, kind: Kind) -> f64 {
        self.get(kind).quantile_us(0.5)
    }

    /// `(insert_one p50 - ping p50) / fdatasync p50`.
    fn ratio(&self) -> f64 {
        (self.p50(Kind::Insert) - self.p50(Kind::Ping)) / self.p50(Kind::Fsync)
    }

    fn extend(&mut self, mut other: LatencySet) {
        for kind in Kind::ALL {
            let part = std::mem::take(other.get_mut(kind));
            self.get_mut(kind).0.extend(part.0);
        }
    }
}

/// A file in the data directory that each sample appends a record to and then `fdatasync`s.
struct SyncProbe {
    file: File,
    path: PathBuf,
    record: Vec<u8>,
    /// Bytes written since the start (or the last wrap).
    written: u64,
    /// For a preallocated file: its size, where writing starts over from the beginning.
    wrap_at: Option<u64>,
}

impl SyncProbe {
    /// A new file at `path`, opened for appending.
    fn appending(path: PathBuf) -> io::Result<SyncProbe> {
        let file = File::options().create_new(true).append(true).open(&path)?;
        Ok(SyncProbe::with(file, path, None))
    }

    /// A new file at `path` sized to [`PREALLOCATED`] bytes (a hole, as `set_len` leaves it)
    /// and synced, written from its start: fjall's journal files.
    fn preallocated(path: PathBuf) -> io::Result<SyncProbe> {
        let file = File::options().create_new(true).write(true).open(&path)?;
        file.set_len(PREALLOCATED)?;
        file.sync_all()?;
        Ok(SyncProbe::with(file, path, Some(PREALLOCATED)))
    }

    fn with(file: File, path: PathBuf, wrap_at: Option<u64>) -> SyncProbe {
        let mut rng = XorShift(0x5EED_F11E_D00D_CAFE);
        let record = (0..PROBE_RECORD)
            .map(|_| u8::try_from(rng.below(256)).unwrap_or(0))
            .collect();
        SyncProbe {
            file,
            path,
            record,
            written: 0,
            wrap_at,
        }
    }

    /// `n` appends, each followed by a timed `sync_data`.
    fn run(&mut self, n: usize, out: &mut Samples) -> io::Result<()> {
        let len = u64::try_from(self.record.len()).unwrap_or(u64::MAX);
        for _ in 0..n {
            if let Some(limit) = self.wrap_at
                && self.written + len > limit
            {
                self.file.seek(SeekFrom::Start(0))?;
                self.written = 0;
            }
            self.file.write_all(&self.record)?;
            self.written += len;
            let start = Instant::now();
            self.file.sync_data()?;
            out.push(start.elapsed());
        }
        Ok(())
    }

    fn remove(self) -> io::Result<()> {
        drop(self.file);
        std::fs::remove_file(&self.path)
    }
}

/// [`SyncProbe::run`] on a blocking thread; hands the probe and the samples back.
async fn sync_block(
    mut probe: SyncProbe,
    n: usize,
    mut out: Samples,
) -> BenchResult<(SyncProbe, Samples)> {
    tokio::task::spawn_blocking(move || -> BenchResult<_> {
        probe.run(n, &mut out)?;
        Ok((probe, out))
    })
    .await?
}

/// `n` sequential pings, each checked.
async fn pings(db: &Database, n: usize, out: &mut Samples) -> BenchResult {
    for _ in 0..n {
        let start = Instant::now();
        let reply = db.run_command(doc! { "ping": 1 }).await?;
        out.push(start.elapsed());
        if !ok(&reply) {
            return Err(format!("ping answered {reply}").into());
        }
    }
    Ok(())
}

/// `n` sequential `insert_one`s of fresh documents, each checked.
async fn insert_ones(
    coll: &Collection<RawDocumentBuf>,
    ids: &AtomicI64,
    n: usize,
    out: &mut Samples,
) -> BenchResult {
    for _ in 0..n {
        let id = take_ids(ids, 1)?;
        let doc = make_doc(id);
        let start = Instant::now();
        let result = coll.insert_one(&doc).await?;
        out.push(start.elapsed());
        if result.inserted_id != Bson::Int64(id) {
            return Err(format!(
                "insert_one of _id {id} reported inserting {}",
                result.inserted_id
            )
            .into());
        }
    }
    Ok(())
}

/// `n` engine commits of one document each, each awaited until durable (on this task, as Ebb's
/// insert handler commits).
async fn engine_ones(
    engine: &GroupCommit,
    ids: &AtomicI64,
    n: usize,
    out: &mut Samples,
) -> BenchResult {
    for _ in 0..n {
        let doc = make_doc(take_ids(ids, 1)?);
        let start = Instant::now();
        let mut batch = Batch::new();
        put_doc(&mut batch, ENGINE_ONE, now_ms(), &doc)?;
        let ticket = engine.commit(batch)?;
        engine.durable(ticket).await?;
        out.push(start.elapsed());
    }
    Ok(())
}

struct LatencyResults {
    all: LatencySet,
    round_ratios: Vec<f64>,
    samples_per_kind: usize,
}

async fn latency_phase(
    server: &Server,
    handoff_server: &Server,
    engine: &Arc<GroupCommit>,
    scale: f64,
) -> BenchResult<LatencyResults> {
    let per_round = scaled(LATENCY_PER_ROUND, scale);
    let cap = LATENCY_ROUND_CAP.mul_f64(scale);
    // One connection for every ping and insert_one.
    let client = connect(server.addr, "ebb-write-path-latency", Some(1)).await?;
    let db = client.database(DB);
    let coll = db.collection::<RawDocumentBuf>("one");
    let relaxed = db.collection_with_options::<RawDocumentBuf>(
        "one_relaxed",
        CollectionOptions::builder()
            .write_concern(WriteConcern::builder().journal(false).build())
            .build(),
    );
    let handoff_client = connect(handoff_server.addr, "ebb-write-path-handoff", Some(1)).await?;
    let handoff = handoff_client
        .database(DB)
        .collection::<RawDocumentBuf>("one");
    let ids = AtomicI64::new(0);
    let handoff_ids = AtomicI64::new(0);
    let relaxed_ids = AtomicI64::new(0);
    let engine_ids = AtomicI64::new(0);
    let mut append = SyncProbe::appending(server.data_dir().join("write_path-fdatasync.probe"))?;
    let mut prealloc = SyncProbe::preallocated(
        server
            .data_dir()
            .join("write_path-fdatasync-prealloc.probe"),
    )?;

    // Warm-up: opens the connection, creates the collection, fills caches, starts the files.
    let warmup = (per_round / 3).clamp(10, 50);
    let mut ignored = LatencySet::default();
    pings(&db, warmup, &mut ignored.ping).await?;
    insert_ones(&coll, &ids, warmup, &mut ignored.insert).await?;
    insert_ones(&relaxed, &relaxed_ids, warmup, &mut ignored.relaxed).await?;
    insert_ones(&handoff, &handoff_ids, warmup, &mut ignored.handoff).await?;
    engine_ones(engine, &engine_ids, warmup, &mut ignored.engine).await?;
    (append, _) = sync_block(append, warmup, Samples::default()).await?;
    (prealloc, _) = sync_block(prealloc, warmup, Samples::default()).await?;

    println!();
    println!(
        "1. insert_one latency vs ping and the bare fdatasync, sequential on one driver \
         connection; {LATENCY_ROUNDS} rounds x {per_round} of each kind, the kinds taking turns \
         in blocks of {LATENCY_BLOCK} (order rotating; warm-up {warmup}; a round stops early \
         after {cap:.1?}). Documents of {DOC_SIZE} B, default write concern; fdatasync after \
         appending {PROBE_RECORD} B to a file in the Ebb store's directory; engine one = one \
         1-document commit + durable(ticket) on the engine alone; hand-off = insert_one on a \
         second server started with --leader-sync false. Per-round p50s, us:"
    );
    println!(
        "  {:<6} {:>9} {:>11} {:>10} {:>10} {:>10} {:>10} {:>9} {:>8}",
        "round",
        "ping",
        "insert_one",
        "j:false",
        "fdatasync",
        "prealloc",
        "engine 1",
        "hand-off",
        "ratio"
    );
    let mut all = LatencySet::default();
    let mut round_ratios = Vec::with_capacity(LATENCY_ROUNDS);
    for round in 0..LATENCY_ROUNDS {
        let mut this = LatencySet::default();
        let start = Instant::now();
        let mut done = 0;
        let mut block = 0;
        while done < per_round && start.elapsed() < cap {
            let n = LATENCY_BLOCK.min(per_round - done);
            let first = (round + block) % Kind::ALL.len();
            for &kind in Kind::ALL.iter().cycle().skip(first).take(Kind::ALL.len()) {
                match kind {
                    Kind::Ping => pings(&db, n, &mut this.ping).await?,
                    Kind::Insert => insert_ones(&coll, &ids, n, &mut this.insert).await?,
                    Kind::InsertRelaxed => {
                        insert_ones(&relaxed, &relaxed_ids, n, &mut this.relaxed).await?;
                    }
                    Kind::EngineOne => {
                        engine_ones(engine, &engine_ids, n, &mut this.engine).await?;
                    }
                    Kind::InsertHandOff => {
                        insert_ones(&handoff, &handoff_ids, n, &mut this.handoff).await?;
                    }
                    Kind::Fsync => {
                        let samples = std::mem::take(&mut this.fsync);
                        (append, this.fsync) = sync_block(append, n, samples).await?;
                    }
                    Kind::FsyncPrealloc => {
                        let samples = std::mem::take(&mut this.prealloc);
                        (prealloc, this.prealloc) = sync_block(prealloc, n, samples).await?;
                    }
                }
            }
            done += n;
            block += 1;
        }
        let ratio = this.ratio();
        round_ratios.push(ratio);
        println!(
            "  {:<6} {:>9.1} {:>11.1} {:>10.1} {:>10.1} {:>10.1} {:>10.1} {:>9.1} {:>7.3}x",
            round + 1,
            this.p50(Kind::Ping),
            this.p50(Kind::Insert),
            this.p50(Kind::InsertRelaxed),
            this.p50(Kind::Fsync),
            this.p50(Kind::FsyncPrealloc),
            this.p50(Kind::EngineOne),
            this.p50(Kind::InsertHandOff),
            ratio
        );
        all.extend(this);
    }
    append.remove()?;
    prealloc.remove()?;

    println!();
    println!(
        "  {:<20} {:>9} {:>9} {:>9}",
        "all rounds, us", "p50", "p99", "count"
    );
    for kind in Kind::ALL {
        let s = all.get(kind);
        println!(
            "  {:<20} {:>9.1} {:>9.1} {:>9}",
            kind.name(),
            s.quantile_us(0.5),
            s.quantile_us(0.99),
            s.len()
        );
    }
    let (ping, insert, fsync) = (
        all.p50(Kind::Ping),
        all.p50(Kind::Insert),
        all.p50(Kind::Fsync),
    );
    let (engine_one, relaxed_p50) = (all.p50(Kind::EngineOne), all.p50(Kind::InsertRelaxed));
    println!(
        "  insert_one p50 - ping p50 = {:.1} us = {:.3} x fdatasync p50 (all rounds pooled; \
         rounds {}). Where it goes (p50 differences): the server's own work on an insert \
         (insert_one j:false - ping) {:.1} us; waiting for durability (insert_one - j:false) \
         {:.1} us, against the engine's own 1-document commit + durable {engine_one:.1} us \
         ({:.3} x fdatasync; {:.1} us over the preallocated-file fdatasync, {:.1} us over the \
         appending one). With the sync handed to the syncer thread (--leader-sync false), \
         insert_one p50 - ping p50 = {:.1} us = {:.3} x fdatasync p50",
        insert - ping,
        all.ratio(),
        range_text(&round_ratios),
        relaxed_p50 - ping,
        insert - relaxed_p50,
        engine_one / fsync,
        engine_one - all.p50(Kind::FsyncPrealloc),
        engine_one - fsync,
        all.p50(Kind::InsertHandOff) - ping,
        (all.p50(Kind::InsertHandOff) - ping) / fsync,
    );

    // Counted through a handle without the `{j: false}` write concern, which the driver would
    // send along with the count's `aggregate` (and Ebb refuses on a read).
    let relaxed_plain = db.collection::<RawDocumentBuf>("one_relaxed");
    for (coll, ids) in [
        (&coll, &ids),
        (&relaxed_plain, &relaxed_ids),
        (&handoff, &handoff_ids),
    ] {
        let count = coll.count_documents(doc! {}).await?;
        let inserted = ids.load(Ordering::Relaxed);
        if i64::try_from(count)? != inserted {
            return Err(format!(
                "{} holds {count} documents, {inserted} were inserted",
                coll.name()
            )
            .into());
        }
    }
    drop((coll, relaxed, relaxed_plain, db, client));
    drop((handoff, handoff_client));
    Ok(LatencyResults {
        samples_per_kind: all.insert.len(),
        all,
        round_ratios,
    })
}

// ---------------------------------------------------------------------------------------------
// Phase 2: insert_many rate vs the engine's grouped rate
// ---------------------------------------------------------------------------------------------

/// Documents written in some time, and the process's CPU time meanwhile; then how long the
/// store took to settle after it ([`settle`]) and the CPU time that took.
#[derive(Debug, Clone, Copy, Default)]
struct Run {
    docs: usize,
    elapsed: Duration,
    cpu: Cpu,
    settle: Duration,
    settle_cpu: Cpu,
    /// Bytes the process sent to storage from the slice's start to the settle's end
    /// (`/proc/self/io` `write_bytes`: journal, flushed tables, compactions).
    disk_bytes: u64,
}

impl Run {
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
        self.cpu.add(other.cpu);
        self.settle += other.settle;
        self.settle_cpu.add(other.settle_cpu);
        self.disk_bytes += other.disk_bytes;
    }

    /// CPU microseconds per document, every thread of the process.
    fn cpu_us_per_doc(self) -> f64 {
        to_f64_u64(self.cpu.total) / USER_HZ * 1e6 / to_f64(self.docs.max(1))
    }

    /// Bytes sent to storage per document.
    fn disk_per_doc(self) -> f64 {
        to_f64_u64(self.disk_bytes) / to_f64(self.docs.max(1))
    }

    /// CPU microseconds per document spent settling after the slice (background work it left).
    fn settle_cpu_us_per_doc(self) -> f64 {
        to_f64_u64(self.settle_cpu.total) / USER_HZ * 1e6 / to_f64(self.docs.max(1))
    }
}

/// Bytes this process has caused to be sent to storage so far (0 where `/proc` cannot tell).
fn written_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/io")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("write_bytes:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

/// Waits for what a slice left behind to be done before the next one starts, so that no slice
/// pays for the one before it: `syncfs` on the file system of `dir` (the stores' dirty pages
/// reach the disk), then until the process is quiet ([`QUIET_TICKS`] or fewer CPU ticks in a
/// [`SETTLE_POLL`], i.e. the engines' background flushes and compactions are done), at most
/// [`SETTLE_CAP`]. Returns how long it took and the CPU time meanwhile.
async fn settle(dir: &Path) -> BenchResult<(Duration, Cpu)> {
    let cpu = Cpu::now();
    let start = Instant::now();
    let dir = dir.to_owned();
    tokio::task::spawn_blocking(move || -> io::Result<()> {
        rustix::fs::syncfs(File::open(&dir)?)?;
        Ok(())
    })
    .await??;
    let mut last = Cpu::now().total;
    while start.elapsed() < SETTLE_CAP {
        tokio::time::sleep(SETTLE_POLL).await;
        let now = Cpu::now().total;
        if now.saturating_sub(last) <= QUIET_TICKS {
            break;
        }
        last = now;
    }
    Ok((start.elapsed(), Cpu::now().since(cpu)))
}

/// [`WRITERS`] tasks, each sending `insert_many` of [`BATCH`] fresh documents after another until
/// `slice` has passed.
async fn ebb_slice(
    coll: &Collection<RawDocumentBuf>,
    ids: &Arc<AtomicI64>,
    slice: Duration,
) -> BenchResult<Run> {
    let cpu = Cpu::now();
    let start = Instant::now();
    let deadline = start + slice;
    let mut tasks = Vec::with_capacity(WRITERS);
    for _ in 0..WRITERS {
        let coll = coll.clone();
        let ids = Arc::clone(ids);
        tasks.push(tokio::spawn(async move {
            let mut n = 0;
            while Instant::now() < deadline {
                let first = take_ids(&ids, BATCH)?;
                let docs: Vec<RawDocumentBuf> = (first..).take(BATCH).map(make_doc).collect();
                let result = coll.insert_many(&docs).await?;
                if result.inserted_ids.len() != BATCH {
                    return Err(format!(
                        "insert_many of {BATCH} documents reported {} inserted",
                        result.inserted_ids.len()
                    )
                    .into());
                }
                n += BATCH;
            }
            BenchResult::Ok(n)
        }));
    }
    finish(tasks, start, cpu).await
}

/// What the writer tasks of one slice did: the documents they wrote, from `start` and the
/// process's CPU time `cpu` until the last one ended.
async fn finish(
    tasks: Vec<tokio::task::JoinHandle<BenchResult<usize>>>,
    start: Instant,
    cpu: Cpu,
) -> BenchResult<Run> {
    let mut docs = 0;
    for t in tasks {
        docs += t.await??;
    }
    let elapsed = start.elapsed();
    Ok(Run {
        docs,
        elapsed,
        cpu: Cpu::now().since(cpu),
        ..Run::default()
    })
}

/// [`WRITERS`] tasks, each committing [`BATCH`] fresh documents at a time to the engine and
/// awaiting their durability, until `slice` has passed.
async fn engine_slice(
    engine: &Arc<GroupCommit>,
    ids: &Arc<AtomicI64>,
    slice: Duration,
) -> BenchResult<Run> {
    let cpu = Cpu::now();
    let start = Instant::now();
    let deadline = start + slice;
    let mut tasks = Vec::with_capacity(WRITERS);
    for _ in 0..WRITERS {
        let engine = Arc::clone(engine);
        let ids = Arc::clone(ids);
        tasks.push(tokio::spawn(async move {
            let mut n = 0;
            while Instant::now() < deadline {
                let first = take_ids(&ids, BATCH)?;
                let now = now_ms();
                let mut batch = Batch::new();
                for doc in (first..).take(BATCH).map(make_doc) {
                    put_doc(&mut batch, ENGINE_MANY, now, &doc)?;
                }
                let ticket = engine.commit(batch)?;
                engine.durable(ticket).await?;
                n += BATCH;
            }
            BenchResult::Ok(n)
        }));
    }
    finish(tasks, start, cpu).await
}

struct RateResults {
    engine: Run,
    ebb: Run,
    round_ratios: Vec<f64>,
}

async fn rate_phase(
    server: &Server,
    engine: &Arc<GroupCommit>,
    scale: f64,
) -> BenchResult<RateResults> {
    let slice = scaled_duration(SLICE, scale, Duration::from_millis(100));
    let pool = u32::try_from(WRITERS)?;
    let client = connect(server.addr, "ebb-write-path-rate", Some(pool)).await?;
    let coll = client.database(DB).collection::<RawDocumentBuf>("many");
    let ebb_ids = Arc::new(AtomicI64::new(0));
    let engine_ids = Arc::new(AtomicI64::new(0));

    // Warm-up: opens the connections, creates the collection, grows both stores a little.
    let warm = slice.mul_f64(0.3);
    engine_slice(engine, &engine_ids, warm).await?;
    ebb_slice(&coll, &ebb_ids, warm).await?;
    let dir = server.data_dir();
    settle(dir).await?;

    println!();
    println!(
        "2. insert_many rate vs the engine's own grouped write rate: {WRITERS} writers x batches \
         of {BATCH} documents of {DOC_SIZE} B, each writer's next batch after the last one is \
         durable (Ebb: insert_many through the driver, {WRITERS} connections, default write \
         concern; engine: one GroupCommit commit per batch + durable(ticket)). {RATE_ROUNDS} \
         rounds of a {slice:.1?} slice per side, the order flipping every round (warm-up \
         {warm:.1?} each). After every slice the bench waits for the stores to settle (syncfs, \
         then the process quiet: background flushes and compactions done; at most \
         {SETTLE_CAP:.1?}), untimed. Pairs are engine/Ebb: CPU per document in the slice (every \
         thread), bytes sent to storage per document (slice and settle), documents stored so far, \
         seconds the settle took."
    );
    println!(
        "  {:<6} {:>12} {:>12} {:>8}   {:>11} {:>11} {:>13} {:>11}",
        "round",
        "engine doc/s",
        "Ebb doc/s",
        "ratio",
        "CPU us/doc",
        "disk B/doc",
        "stored kdocs",
        "settle s"
    );
    let mut results = RateResults {
        engine: Run::default(),
        ebb: Run::default(),
        round_ratios: Vec::with_capacity(RATE_ROUNDS),
    };
    for round in 0..RATE_ROUNDS {
        let engine_first = round % 2 == 0;
        let (mut e, mut w) = (Run::default(), Run::default());
        for turn in 0..2 {
            let disk = written_bytes();
            let run = if (turn == 0) == engine_first {
                e = engine_slice(engine, &engine_ids, slice).await?;
                &mut e
            } else {
                w = ebb_slice(&coll, &ebb_ids, slice).await?;
                &mut w
            };
            (run.settle, run.settle_cpu) = settle(dir).await?;
            run.disk_bytes = written_bytes().saturating_sub(disk);
        }
        let ratio = w.rate() / e.rate();
        results.round_ratios.push(ratio);
        println!(
            "  {:<6} {:>12.0} {:>12.0} {:>7.3}x   {:>11} {:>11} {:>13} {:>11}",
            round + 1,
            e.rate(),
            w.rate(),
            ratio,
            format!("{:.1}/{:.1}", e.cpu_us_per_doc(), w.cpu_us_per_doc()),
            format!("{:.0}/{:.0}", e.disk_per_doc(), w.disk_per_doc()),
            format!(
                "{}/{}",
                engine_ids.load(Ordering::Relaxed) / 1_000,
                ebb_ids.load(Ordering::Relaxed) / 1_000
            ),
            format!(
                "{:.2}/{:.2}",
                e.settle.as_secs_f64(),
                w.settle.as_secs_f64()
            ),
        );
        results.engine.add(e);
        results.ebb.add(w);
    }
    println!(
        "  totals: engine {:.0} doc/s, Ebb {:.0} doc/s, ratio {:.3}x (rounds {}); CPU per \
         document (all threads) engine {:.1} us, Ebb {:.1} us, and settling after the slices \
         {:.1} us / {:.1} us more; bytes sent to storage per document engine {:.0}, Ebb {:.0}",
        results.engine.rate(),
        results.ebb.rate(),
        results.ebb.rate() / results.engine.rate(),
        range_text(&results.round_ratios),
        results.engine.cpu_us_per_doc(),
        results.ebb.cpu_us_per_doc(),
        results.engine.settle_cpu_us_per_doc(),
        results.ebb.settle_cpu_us_per_doc(),
        results.engine.disk_per_doc(),
        results.ebb.disk_per_doc()
    );

    let count = coll.count_documents(doc! {}).await?;
    let inserted = ebb_ids.load(Ordering::Relaxed);
    if i64::try_from(count)? != inserted {
        return Err(
            format!("the collection holds {count} documents, {inserted} were inserted").into(),
        );
    }
    drop((coll, client));
    Ok(results)
}

// ---------------------------------------------------------------------------------------------
// Goals and helpers
// ---------------------------------------------------------------------------------------------

fn report_goals(latency: &LatencyResults, rates: &RateResults) {
    println!();
    println!("goals (informational, never fail the run):");
    let all = &latency.all;
    let ratio = median(&latency.round_ratios);
    let (ping, insert, fsync) = (
        all.p50(Kind::Ping),
        all.p50(Kind::Insert),
        all.p50(Kind::Fsync),
    );
    println!(
        "  insert_one p50 <= ping p50 + {LATENCY_GOAL} x fdatasync p50: (insert_one p50 - ping \
         p50) / fdatasync p50 = {ratio:.3} (median of {} rounds; {:.3} pooled: {insert:.1} us vs \
         {ping:.1} + {LATENCY_GOAL} x {fsync:.1} = {:.1} us, {} samples of each)  {}",
        latency.round_ratios.len(),
        all.ratio(),
        ping + LATENCY_GOAL * fsync,
        latency.samples_per_kind,
        verdict(ratio <= LATENCY_GOAL)
    );
    let rate_ratio = median(&rates.round_ratios);
    println!(
        "  insert_many x{WRITERS} >= {:.0}% of the engine's own grouped write rate: {:.1}% \
         (median of {} rounds; {:.1}% from the totals: {:.0} vs {:.0} doc/s)  {}",
        RATE_GOAL * 100.0,
        rate_ratio * 100.0,
        rates.round_ratios.len(),
        rates.ebb.rate() / rates.engine.rate() * 100.0,
        rates.ebb.rate(),
        rates.engine.rate(),
        verdict(rate_ratio >= RATE_GOAL)
    );
    for (what, ratios) in [
        ("insert_one latency", &latency.round_ratios),
        ("insert_many rate", &rates.round_ratios),
    ] {
        let (lo, hi) = min_max(ratios);
        if lo > 0.0 && hi / lo > NOISY_SPREAD {
            println!(
                "  warning: {what} rounds disagree (ratios {lo:.3}..{hi:.3}): the machine or \
                 the disk was noisy; rerun it quiet"
            );
        }
    }
    println!();
}

fn min_max(values: &[f64]) -> (f64, f64) {
    if values.is_empty() {
        return (0.0, 0.0);
    }
    values
        .iter()
        .fold((f64::MAX, f64::MIN), |(lo, hi), &v| (lo.min(v), hi.max(v)))
}

fn range_text(values: &[f64]) -> String {
    let (lo, hi) = min_max(values);
    format!("{lo:.3}..{hi:.3}")
}
