//! Does deleting leave a lasting cost? Issue #21, "Storage that forgets": after documents
//! expire, are deleted, are overwritten or are dropped, a scan of what is left must cost what
//! a scan of the same live data freshly loaded costs, the server must go quiet, and the disk
//! space must come back, all by itself (no `compact`).
//!
//! One process: Ebb on a durable store in a temporary directory, started with [`ebb::run`] (test
//! commands on) in its own 2-worker tokio runtime on its own thread, as on the 2-core target; the
//! `mongodb` driver in a second 2-worker runtime plays the client. Every document is 200 BSON
//! bytes (`_id`, `kind`, `k`, `n`, `at`, a pad; the long-lived ones also carry `ttl: -1`).
//!
//! A **scan** is `find({})` read to the end of its cursor (every document fetched and copied).
//! Each collection measured against a baseline has a twin: a freshly loaded collection of the
//! same live size ([`LIVE_DOCS`] = 100 documents) and the same document shape, on the same
//! server. At each instant, scans of the two alternate, up to [`SCAN_REPS`] each (at least
//! [`MIN_SCAN_REPS`], fewer than 9 only when the set has run for [`SCAN_BUDGET`], so that the
//! instants stay on time), and the ratio is the median of one over the median of the other:
//! background work the server does then weighs on both alike. When the scans are slow (today,
//! a scan over a million tombstones takes most of a second), a set overruns the next instant,
//! which then starts late: each row prints when its set began.
//!
//! 1. **Mass expiry.** A collection with `{_ts: 1}` `expireAfterSeconds: 60` gets 1,000,000
//!    documents plus 100 with `ttl: -1` spread evenly among them (every 10,001st `_id`), loaded
//!    with `insert_many` of 1,000 with the server clock frozen. One `ebbAdvanceClock` of 61 s
//!    (unfreezing it) expires the million; `count_documents` must answer 100 at once, and
//!    `serverStatus` `metrics.ttl.deletedDocuments` is polled until it has grown by the million.
//!    Then, the server otherwise idle, the scan is measured at 0, 1, 2, 5 and 10 s. Goal: at most
//!    1.5× the fresh twin by 10 s (the first instant at or under 1.5× is printed too).
//! 2. **Idle CPU after mass expiry.** Right after line 1: the process's CPU time (`utime` +
//!    `stime` of `/proc/self/stat`; the client is idle, so this is the server) over 10 s of
//!    idleness, as % of one core. Goal: under 1%. The baseline is the same measure on the fresh
//!    server before anything was loaded.
//! 3. **`deleteMany` of 400,000.** A collection (no TTL) of 400,000 documents `k: _id` plus 100
//!    with `k: -1` spread among them; one `delete_many({k: {$gte: 0}})` removes the 400,000.
//!    Scans at 0, 1, 2, 5 and 10 s after it answered. Goal: at most 1.5× by 10 s.
//!    Line 3b, **a small `deleteMany`**: the same with 8,000 documents (not scaled), fewer
//!    tombstones than the compactor's share rule needs: only the scans' own steps over them
//!    (which the server counts) can make a compaction due. Goal: at most 1.5× by 10 s.
//! 4. **Hot document.** A 100-document collection; 100,000 `{$inc: {n: 1}}` of `{_id: 0}`, sent
//!    as `update` commands of 1,000 statements; the document must end at `n: 100000`. Scans at 0
//!    and 1 s after the last command. Goal: at most 1.5× at once.
//! 5. **Sliding TTL window.** Real clock (never advanced in this line; line 1's advance moved
//!    the server clock 61 s ahead of real time, which only shifts every instant alike, and the
//!    live count printed shows that the window holds what it should). A fresh collection with
//!    `expireAfterSeconds: 10` gets 5,000 documents a second (`insert_many` of 100 every 20 ms,
//!    paced) for 3 minutes; every 2 s the collection is scanned 3 times, and the median cost per
//!    live document returned is that instant's value. A static twin of 50,000 documents (the
//!    window's size) is scanned alternately with it; its own late/early ratio is printed as a
//!    gauge of how much the machine's load moved, and the ratio is also printed with each
//!    sample divided by its twin's (normalized: the machine's load cancels out). No scanned document may be more than 15 s
//!    old by the client's clock (that would be an expired document returned: a wrong answer).
//!    Goal: the median over the last third of the run (the last minute) within 1.2× of the
//!    median over 10–20 s (the window just filled).
//! 6. **Drops.** For 100,000, 400,000 and 1,600,000 documents: load a new collection, wait 2 s
//!    (the CPU used in that idle wait is printed), `drop()` it, and wait until the cleanup is
//!    done: until `serverStatus` `ebb.storage.dropsPending` is 0 when the server reports it,
//!    otherwise until the data directory (bytes, files, newest modification time) has not
//!    changed for 2 s (the cleanup then ends at the last change seen). Process CPU from the
//!    drop to that end, per document: goal, the largest size's cost per document within 1.5×
//!    of the smallest's (flat); the largest drop's cleanup wall time under 3 s. The data directory's size before the load, after it
//!    and 10 s after the drop: goal, back to at most the size before the load plus
//!    [`SPACE_ALLOWANCE`] (64 MiB) within 10 s. The polling (every 50 ms) is in the CPU figure.
//! 7. **Disk space.** After line 2 (about 20 s after the purge), after line 3's scans (about
//!    10 s after the delete) and after line 6, then once more after a final idle minute with
//!    everything still there: the data directory's size against the live data (`dbStats`
//!    `dataSize`, the BSON bytes of the live documents of every collection). Goal: at most 1.5×
//!    the live bytes plus 64 MiB (fjall keeps up to a 64 MiB memtable per keyspace in its
//!    journal until it flushes). The collections of lines 1 and 3 are kept to the end for this;
//!    the others are dropped when their line is done.
//!
//! Sizes are the bytes allocated on disk to the files under the data directory (not their
//! lengths: fjall creates each journal as a 64 MiB sparse file); files that were deleted but
//! that the process still holds open (and that still take disk space) are counted apart and
//! added in. CPU time comes from the kernel in clock ticks (`getconf CLK_TCK`, usually 100 a
//! second), so it is exact to about 10 ms.
//!
//! When the server offers a `compact` command, it is run once at the very end, after every
//! measurement, as an informational line: the measured lines never call it.
//!
//! The goals are printed as PASS or MISS and never change the exit status: this is a
//! measurement, not a test. The run fails (non-zero) only if the server cannot be started or
//! answers wrongly.
//!
//! `EBB_GARBAGE_LINES` (say `4`, or `1,2,7`) runs only the lines listed; every line when unset.
//!
//! `EBB_BENCH_SCALE` (a float, default 1.0) scales every document count (not the 100 live
//! documents nor the sliding window's rate) and the idle and sliding windows (with floors); the
//! scan instants and the 10 s deadlines are the goals' own and do not scale.

#[path = "common/mod.rs"]
mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use bson::{Bson, Document, RawDocumentBuf, doc, rawdoc};
use common::{
    BenchResult, CLIENT_WORKERS, SERVER_WORKERS, Server, connect, create_ts_ttl_index,
    insert_batches, integer, median, micros, ok, per_second, run_bench, scale, scaled,
    scaled_duration, to_f64, to_f64_u64, verdict,
};
use mongodb::{Collection, Database};

/// BSON size of every document.
const DOC_SIZE: usize = 200;
/// Live documents in each measured collection and in its fresh twin (not scaled).
const LIVE_DOCS: usize = 100;
/// Documents per `insert_many` when loading.
const INSERT_BATCH: usize = 1_000;
/// Line 1: documents that expire (scaled).
const EXPIRING_DOCS: f64 = 1_000_000.0;
/// Line 1: the collection default TTL.
const TTL_SECONDS: u64 = 60;
/// Line 1: how far the clock moves to expire them.
const ADVANCE_MS: i64 = 61_000;
/// Line 1: longest wait for the purge (scaled, at least [`MIN_PURGE_CAP`]).
const PURGE_CAP: Duration = Duration::from_secs(300);
const MIN_PURGE_CAP: Duration = Duration::from_secs(60);
/// Line 3: documents deleted (scaled).
const DELETED_DOCS: f64 = 400_000.0;
/// Line 4: documents in the collection, and updates of one of them (scaled).
/// Documents deleted in line 3b: below the 20,000 tombstones the share rule needs.
const SMALL_DELETED_DOCS: usize = 8_000;
const HOT_DOCS: usize = 100;
const HOT_UPDATES: f64 = 100_000.0;
const UPDATES_PER_COMMAND: usize = 1_000;
/// Line 5: TTL, insert pace, run length (scaled, at least [`MIN_SLIDE_RUN`]), sampling.
const SLIDE_TTL_SECONDS: u64 = 10;
const SLIDE_BATCH: usize = 100;
const SLIDE_EVERY: Duration = Duration::from_millis(20);
const SLIDE_RUN: Duration = Duration::from_secs(180);
const MIN_SLIDE_RUN: Duration = Duration::from_secs(45);
const SLIDE_SAMPLE_EVERY: Duration = Duration::from_secs(2);
/// Line 5: documents of the static twin scanned beside it (the window's size: rate × TTL).
const SLIDE_STATIC_DOCS: usize = 50_000;
const SLIDE_SCANS_PER_SAMPLE: usize = 3;
/// Line 5: the reference instants, seconds after the first insert (the window just filled).
const SLIDE_EARLY: (u64, u64) = (10, 20);
/// Line 5: a returned document older than the TTL plus this (client clock) was expired.
const SLIDE_SLACK_SECONDS: i64 = 5;
/// Line 6: documents per dropped collection (scaled).
const DROP_SIZES: [f64; 3] = [100_000.0, 400_000.0, 1_600_000.0];
/// Line 6: idle wait after a load, before measuring and dropping.
const DROP_SETTLE: Duration = Duration::from_secs(2);
/// Line 6: when the space is measured, after the drop.
const DROP_SPACE_AFTER: Duration = Duration::from_secs(10);
/// Line 6: without `dropsPending`, the cleanup is over when the size stood still this long.
const STABLE_FOR: Duration = Duration::from_secs(2);
/// Line 6: longest wait for a drop's cleanup.
const DROP_CAP: Duration = Duration::from_secs(300);
/// Scan instants, seconds after the garbage was made (not scaled: the goal's own).
const SCAN_TIMES: [u64; 5] = [0, 1, 2, 5, 10];
const HOT_SCAN_TIMES: [u64; 2] = [0, 1];
/// Scans per instant and per collection: at most, at least, and the time after which a set
/// stops at the least.
const SCAN_REPS: usize = 9;
const MIN_SCAN_REPS: usize = 3;
const SCAN_BUDGET: Duration = Duration::from_secs(1);
/// Idle CPU window (scaled, at least [`MIN_IDLE_WINDOW`]).
const IDLE_WINDOW: Duration = Duration::from_secs(10);
const MIN_IDLE_WINDOW: Duration = Duration::from_secs(2);
/// Line 7: the final idle wait (scaled, at least [`MIN_FINAL_WAIT`]).
const FINAL_WAIT: Duration = Duration::from_secs(60);
const MIN_FINAL_WAIT: Duration = Duration::from_secs(5);
/// How often the server (or the data directory) is polled.
const POLL: Duration = Duration::from_millis(50);
/// Goals.
const SCAN_GOAL: f64 = 1.5;
const IDLE_GOAL_PCT: f64 = 1.0;
const SLIDE_GOAL: f64 = 1.2;
const DROP_FLAT_GOAL: f64 = 1.5;
const DROP_WALL_GOAL: Duration = Duration::from_secs(3);
const SPACE_FACTOR: f64 = 1.5;
/// Fixed disk allowance of the space goals.
const SPACE_ALLOWANCE: u64 = 64 * MIB;
const MIB: u64 = 1024 * 1024;
const DB: &str = "garbagebench";

fn main() {
    run_bench("garbage", bench());
}

async fn bench() -> BenchResult {
    let scale = scale();
    print_header(scale);
    let server = Server::start()?;
    println!("Ebb store: {}", server.data_dir().display());
    let client = connect(server.addr, "ebb-garbage-bench", None).await?;
    let ebb = Ebb {
        admin: client.database("admin"),
        db: client.database(DB),
        dir: server.data_dir().to_path_buf(),
        cpu: CpuClock::new(),
    };
    ebb.db.run_command(doc! { "ping": 1 }).await?;
    let started = Instant::now();
    let status = ebb.status().await?;
    println!(
        "server reports ebb.storage.dropsPending: {}; compact command: probed at the end",
        if drops_pending(&status).is_some() {
            "yes"
        } else {
            "no (drops wait for the data directory to stand still)"
        }
    );

    let mut report = Report::default();
    let idle = scaled_duration(IDLE_WINDOW, scale, MIN_IDLE_WINDOW);
    let empty = ebb.disk();
    println!("empty store: {}", empty.show());
    let fresh_idle = ebb.idle_cpu(idle).await;
    println!(
        "idle CPU of the fresh server over {:.0} s: {}",
        idle.as_secs_f64(),
        show_pct(fresh_idle)
    );

    let lines = Lines::from_env();
    if lines.has("1") {
        mass_expiry(&ebb, scale, &mut report).await?;
    }
    if lines.has("2") {
        idle_after_expiry(&ebb, idle, fresh_idle, &mut report).await?;
    }
    if lines.has("1") {
        report
            .space(&ebb, "7. space after mass expiry (~20 s)")
            .await?;
    }
    if lines.has("3") {
        delete_many(&ebb, scale, &mut report).await?;
        report
            .space(&ebb, "7. space after deleteMany (~10 s)")
            .await?;
    }
    if lines.has("3b") {
        small_delete_many(&ebb, &mut report).await?;
    }
    if lines.has("4") {
        hot_document(&ebb, scale, &mut report).await?;
    }
    if lines.has("5") {
        sliding_window(&ebb, scale, &mut report).await?;
    }
    if lines.has("6") {
        drops(&ebb, scale, &mut report).await?;
        report
            .space(&ebb, "7. space after the drops (~10 s)")
            .await?;
    }
    if !lines.has("7") {
        report.print();
        println!("total time {:.1} s", started.elapsed().as_secs_f64());
        ebb.db.drop().await?;
        drop(ebb);
        drop(client);
        return server.stop();
    }

    let wait = scaled_duration(FINAL_WAIT, scale, MIN_FINAL_WAIT);
    println!();
    println!(
        "7. disk space after {:.0} s more of idleness (the collections of lines 1 and 3 still \
         there)",
        wait.as_secs_f64()
    );
    tokio::time::sleep(wait).await;
    report
        .space(
            &ebb,
            &format!("7. space, final ({:.0} s idle)", wait.as_secs_f64()),
        )
        .await?;
    informational_compact(&ebb).await?;

    report.print();
    println!("total time {:.1} s", started.elapsed().as_secs_f64());
    println!();
    ebb.db.drop().await?;
    drop(ebb);
    drop(client);
    server.stop()
}

/// The lines `EBB_GARBAGE_LINES` (a comma-separated list such as `4` or `1,2,7`) asks for;
/// every line when it is unset. Line 2 measures the idleness after line 1's expiry, and line 7
/// the space after the others: each alone still runs, but measures less.
struct Lines(Option<Vec<String>>);

impl Lines {
    fn from_env() -> Self {
        Lines(std::env::var("EBB_GARBAGE_LINES").ok().map(|v| {
            v.split(',')
                .map(|s| s.trim().to_owned())
                .filter(|s| !s.is_empty())
                .collect()
        }))
    }

    fn has(&self, line: &str) -> bool {
        self.0.as_ref().is_none_or(|l| l.iter().any(|x| x == line))
    }
}

fn print_header(scale: f64) {
    println!();
    println!(
        "Ebb garbage: what deleted data still costs ({} build, {} CPUs, {SERVER_WORKERS} server \
         / {CLIENT_WORKERS} client runtime workers, durable store, EBB_BENCH_SCALE={scale})",
        if cfg!(debug_assertions) {
            "DEBUG"
        } else {
            "release"
        },
        std::thread::available_parallelism().map_or(0, std::num::NonZero::get),
    );
    if let Ok(load) = std::fs::read_to_string("/proc/loadavg") {
        let first: Vec<&str> = load.split_whitespace().take(3).collect();
        println!(
            "load average before the run: {} (other busy processes skew every number)",
            first.join(" ")
        );
    }
}

// ---------------------------------------------------------------------------------------------
// 1 and 2: mass expiry
// ---------------------------------------------------------------------------------------------

async fn mass_expiry(ebb: &Ebb, scale: f64, report: &mut Report) -> BenchResult {
    let expiring = scaled(EXPIRING_DOCS, scale).max(LIVE_DOCS);
    println!();
    println!(
        "1. mass expiry: {expiring} documents expire at once ({{_ts: 1}} expireAfterSeconds \
         {TTL_SECONDS}), {LIVE_DOCS} with ttl: -1 among them stay"
    );
    let fresh = ebb.coll("expiry_fresh");
    create_ts_ttl_index(&fresh, TTL_SECONDS).await?;
    insert_batches(&fresh, LIVE_DOCS, INSERT_BATCH, |i| make_doc(i, true)).await?;
    let coll = ebb.coll("expiry");
    create_ts_ttl_index(&coll, TTL_SECONDS).await?;

    ebb.clock(0, Some(true)).await?;
    let total = expiring + LIVE_DOCS;
    let live = Spread::new(total, LIVE_DOCS);
    let took = insert_batches(&coll, total, INSERT_BATCH, |i| make_doc(i, live.is_live(i))).await?;
    print_load("load (insert_many x1000, clock frozen)", total, took);

    let before = ttl_deleted(&ebb.status().await?)?;
    let advanced = Instant::now();
    ebb.clock(ADVANCE_MS, Some(false)).await?;
    let count = coll.count_documents(doc! {}).await?;
    if count != to_u64(LIVE_DOCS) {
        return Err(format!(
            "count_documents after the clock advance answered {count}, {LIVE_DOCS} expected"
        )
        .into());
    }
    println!(
        "  count_documents({{}}) right after the advance: {count} (OK), in {:.0} ms",
        advanced.elapsed().as_secs_f64() * 1e3
    );
    let cap = scaled_duration(PURGE_CAP, scale, MIN_PURGE_CAP);
    let target = i64::try_from(expiring)?;
    let mut deleted = 0;
    while deleted < target && advanced.elapsed() < cap {
        tokio::time::sleep(POLL).await;
        deleted = ttl_deleted(&ebb.status().await?)? - before;
    }
    let purge = advanced.elapsed();
    if deleted < target {
        println!(
            "  purge: only {deleted} of {expiring} removed after {:.1} s (the cap); the scans \
             start anyway",
            purge.as_secs_f64()
        );
    } else {
        println!(
            "  purge (deletedDocuments +{expiring}): {:.2} s from the advance, {:.0} expiries/s",
            purge.as_secs_f64(),
            per_second(expiring, purge)
        );
    }
    println!("  scans of the {LIVE_DOCS} left vs the fresh twin, seconds after the purge:");
    let points = scan_series(&coll, &fresh, Instant::now(), &SCAN_TIMES).await?;
    report.push(series_goal(
        "1. mass expiry: scan at 10 s / fresh",
        &points,
        false,
    ));
    Ok(())
}

async fn idle_after_expiry(
    ebb: &Ebb,
    window: Duration,
    fresh_idle: Option<f64>,
    report: &mut Report,
) -> BenchResult {
    println!();
    println!(
        "2. idle CPU after mass expiry: process CPU over the next {:.0} s, nothing asked",
        window.as_secs_f64()
    );
    let pct = ebb.idle_cpu(window).await;
    println!("  {} of one core", show_pct(pct));
    report.push(Goal {
        name: "2. idle CPU after mass expiry".into(),
        measured: show_pct(pct),
        baseline: format!("{} (fresh)", show_pct(fresh_idle)),
        ratio: match (pct, fresh_idle) {
            (Some(p), Some(f)) if f > 0.0 => format!("{:.2}x", p / f),
            _ => "-".into(),
        },
        target: format!("< {IDLE_GOAL_PCT}%"),
        pass: pct.map(|p| p < IDLE_GOAL_PCT),
    });
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// 3: deleteMany
// ---------------------------------------------------------------------------------------------

async fn delete_many(ebb: &Ebb, scale: f64, report: &mut Report) -> BenchResult {
    let doomed = scaled(DELETED_DOCS, scale).max(LIVE_DOCS);
    println!();
    println!(
        "3. deleteMany: {doomed} documents removed by one delete_many({{k: {{$gte: 0}}}}), \
         {LIVE_DOCS} (k: -1) among them stay"
    );
    let fresh = ebb.coll("deleted_fresh");
    insert_batches(&fresh, LIVE_DOCS, INSERT_BATCH, |i| make_doc(i, true)).await?;
    let coll = ebb.coll("deleted");
    let total = doomed + LIVE_DOCS;
    let live = Spread::new(total, LIVE_DOCS);
    let took = insert_batches(&coll, total, INSERT_BATCH, |i| make_doc(i, live.is_live(i))).await?;
    print_load("load (insert_many x1000)", total, took);
    // Let the load's own flushes settle, as line 1's purge wait did.
    tokio::time::sleep(DROP_SETTLE).await;
    let t = Instant::now();
    let result = coll.delete_many(doc! { "k": { "$gte": 0 } }).await?;
    let took = t.elapsed();
    if result.deleted_count != to_u64(doomed) {
        return Err(format!(
            "delete_many reported {} deleted, {doomed} expected",
            result.deleted_count
        )
        .into());
    }
    print_load("delete_many", doomed, took);
    println!("  scans of the {LIVE_DOCS} left vs the fresh twin, seconds after delete_many:");
    let points = scan_series(&coll, &fresh, Instant::now(), &SCAN_TIMES).await?;
    report.push(series_goal(
        "3. deleteMany: scan at 10 s / fresh",
        &points,
        false,
    ));
    Ok(())
}

/// Line 3b: a `deleteMany` too small for the compactor's share rule (fewer tombstones than
/// `MIN_DEBT`): scans that step over it are what make it compacted.
async fn small_delete_many(ebb: &Ebb, report: &mut Report) -> BenchResult {
    let doomed = SMALL_DELETED_DOCS;
    println!();
    println!(
        "3b. small deleteMany: {doomed} documents removed (fewer than the compactor's share rule \
         needs), {LIVE_DOCS} stay; only scans over them can make a compaction due"
    );
    let fresh = ebb.coll("small_deleted_fresh");
    insert_batches(&fresh, LIVE_DOCS, INSERT_BATCH, |i| make_doc(i, true)).await?;
    let coll = ebb.coll("small_deleted");
    let total = doomed + LIVE_DOCS;
    let live = Spread::new(total, LIVE_DOCS);
    insert_batches(&coll, total, INSERT_BATCH, |i| make_doc(i, live.is_live(i))).await?;
    tokio::time::sleep(DROP_SETTLE).await;
    let compactions =
        |status: &Document| storage_status(status).and_then(|s| integer(s, "compactions").ok());
    let before = compactions(&ebb.status().await?);
    let result = coll.delete_many(doc! { "k": { "$gte": 0 } }).await?;
    if result.deleted_count != to_u64(doomed) {
        return Err(format!(
            "delete_many reported {} deleted, {doomed} expected",
            result.deleted_count
        )
        .into());
    }
    println!("  scans of the {LIVE_DOCS} left vs the fresh twin, seconds after delete_many:");
    let points = scan_series(&coll, &fresh, Instant::now(), &SCAN_TIMES).await?;
    let after = compactions(&ebb.status().await?);
    println!(
        "  compactions by the server: {} before the delete, {} after the scans",
        before.map_or_else(|| "?".to_owned(), |n| n.to_string()),
        after.map_or_else(|| "?".to_owned(), |n| n.to_string())
    );
    report.push(series_goal(
        "3b. small deleteMany: scan at 10 s / fresh",
        &points,
        false,
    ));
    coll.drop().await?;
    fresh.drop().await?;
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// 4: hot document
// ---------------------------------------------------------------------------------------------

async fn hot_document(ebb: &Ebb, scale: f64, report: &mut Report) -> BenchResult {
    let updates = scaled(HOT_UPDATES, scale).max(UPDATES_PER_COMMAND);
    println!();
    println!(
        "4. hot document: {updates} {{$inc: {{n: 1}}}} of {{_id: 0}} in a {HOT_DOCS}-document \
         collection, {UPDATES_PER_COMMAND} statements a command"
    );
    let fresh = ebb.coll("hot_fresh");
    insert_batches(&fresh, HOT_DOCS, INSERT_BATCH, |i| make_doc(i, true)).await?;
    let coll = ebb.coll("hot");
    insert_batches(&coll, HOT_DOCS, INSERT_BATCH, |i| make_doc(i, true)).await?;
    let stmt = doc! { "q": { "_id": 0_i64 }, "u": { "$inc": { "n": 1 } } };
    let t = Instant::now();
    let mut done = 0;
    while done < updates {
        let k = UPDATES_PER_COMMAND.min(updates - done);
        let statements: Vec<Bson> = (0..k).map(|_| Bson::Document(stmt.clone())).collect();
        let reply = ebb
            .db
            .run_command(doc! { "update": "hot", "updates": statements })
            .await?;
        if integer(&reply, "n")? != i64::try_from(k)? || reply.contains_key("writeErrors") {
            return Err(format!("update of {k} statements answered {reply}").into());
        }
        done += k;
    }
    let took = t.elapsed();
    let origin = Instant::now();
    print_load("updates", updates, took);
    let hot = coll.find_one(doc! { "_id": 0_i64 }).await?;
    let n = hot
        .as_ref()
        .and_then(|d| match d.get("n") {
            Ok(Some(bson::RawBsonRef::Int32(n))) => Some(i64::from(n)),
            Ok(Some(bson::RawBsonRef::Int64(n))) => Some(n),
            _ => None,
        })
        .ok_or("the hot document has no integer n")?;
    if n != i64::try_from(updates)? {
        return Err(format!("the hot document ends at n: {n}, {updates} expected").into());
    }
    println!("  scans of the {HOT_DOCS} documents vs the fresh twin, seconds after the updates:");
    let points = scan_series(&coll, &fresh, origin, &HOT_SCAN_TIMES).await?;
    report.push(series_goal(
        "4. hot document: scan at once / fresh",
        &points,
        true,
    ));
    coll.drop().await?;
    fresh.drop().await?;
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// 5: sliding TTL window
// ---------------------------------------------------------------------------------------------

/// One sampling instant of line 5: medians of the sliding collection's and the static twin's
/// scans, per document returned.
struct SlideSample {
    at: Duration,
    us: f64,
    static_us: f64,
    live: usize,
}

async fn sliding_window(ebb: &Ebb, scale: f64, report: &mut Report) -> BenchResult {
    let run = scaled_duration(SLIDE_RUN, scale, MIN_SLIDE_RUN);
    let rate = per_second(SLIDE_BATCH, SLIDE_EVERY);
    let static_docs = SLIDE_STATIC_DOCS;
    println!();
    println!(
        "5. sliding TTL window: expireAfterSeconds {SLIDE_TTL_SECONDS}, {rate:.0} documents/s \
         ({SLIDE_BATCH} every {} ms) for {:.0} s on the real clock; every {} s, \
         {SLIDE_SCANS_PER_SAMPLE} scans of it and of a static {static_docs}-document twin, \
         alternately",
        SLIDE_EVERY.as_millis(),
        run.as_secs_f64(),
        SLIDE_SAMPLE_EVERY.as_secs()
    );
    let still = ebb.coll("sliding_static");
    insert_batches(&still, static_docs, INSERT_BATCH, |i| make_doc(i, false)).await?;
    let coll = ebb.coll("sliding");
    create_ts_ttl_index(&coll, SLIDE_TTL_SECONDS).await?;
    let stop = Arc::new(AtomicBool::new(false));
    let started = Instant::now();
    let writer = {
        let coll = coll.clone();
        let stop = Arc::clone(&stop);
        tokio::spawn(async move { paced_inserts(coll, stop).await })
    };

    let mut samples: Vec<SlideSample> = Vec::new();
    let mut next = SLIDE_SAMPLE_EVERY;
    let scanned = async {
        while next <= run {
            tokio::time::sleep_until((started + next).into()).await;
            let at = started.elapsed();
            let (mut costs, mut static_costs, mut counts) = (Vec::new(), Vec::new(), Vec::new());
            for _ in 0..SLIDE_SCANS_PER_SAMPLE {
                let (took, n) = scan_checked(&coll).await?;
                costs.push(micros(took) / to_f64(n.max(1)));
                counts.push(n);
                static_costs.push(micros(scan(&still, static_docs).await?) / to_f64(static_docs));
            }
            counts.sort_unstable();
            let sample = SlideSample {
                at,
                us: median(&costs),
                static_us: median(&static_costs),
                live: counts.get(counts.len() / 2).copied().unwrap_or(0),
            };
            println!(
                "  t = {:>5.1} s: {:>7} live, {:>6.3} µs per live document (static twin {:>6.3})",
                at.as_secs_f64(),
                sample.live,
                sample.us,
                sample.static_us
            );
            samples.push(sample);
            next += SLIDE_SAMPLE_EVERY;
        }
        BenchResult::Ok(())
    }
    .await;
    stop.store(true, Ordering::Relaxed);
    let inserted = writer.await??;
    scanned?;
    let took = started.elapsed();
    let achieved = per_second(inserted, took);
    println!(
        "  inserted {inserted} in {:.1} s: {achieved:.0} documents/s (goal pace {rate:.0})",
        took.as_secs_f64()
    );
    let expected_live = achieved * to_f64(usize::try_from(SLIDE_TTL_SECONDS)?);
    let full: Vec<usize> = samples
        .iter()
        .filter(|s| s.at >= Duration::from_secs(SLIDE_EARLY.0 + 5))
        .map(|s| s.live)
        .collect();
    if let (Some(lo), Some(hi)) = (full.iter().min(), full.iter().max()) {
        println!(
            "  live documents once the window was full: {lo} to {hi} (about {expected_live:.0} \
             expected: rate × TTL)"
        );
        if to_f64(*lo) < 0.5 * expected_live {
            println!(
                "  warning: far fewer live documents than the rate and TTL give: documents \
                 expire too early, or the inserts fell behind"
            );
        }
    }

    let late_from = run.saturating_sub(run / 3);
    let early: Vec<&SlideSample> = samples
        .iter()
        .filter(|s| {
            s.at >= Duration::from_secs(SLIDE_EARLY.0)
                && s.at <= Duration::from_secs(SLIDE_EARLY.1) + Duration::from_millis(500)
        })
        .collect();
    let late: Vec<&SlideSample> = samples.iter().filter(|s| s.at >= late_from).collect();
    let med = |v: &[&SlideSample], f: fn(&SlideSample) -> f64| {
        median(&v.iter().map(|s| f(s)).collect::<Vec<f64>>())
    };
    let (e, l) = (med(&early, |s| s.us), med(&late, |s| s.us));
    let (se, sl) = (med(&early, |s| s.static_us), med(&late, |s| s.static_us));
    let ratio = if e > 0.0 { l / e } else { f64::NAN };
    let static_ratio = if se > 0.0 { sl / se } else { f64::NAN };
    // Each sample over the static twin scanned beside it: the machine's load cancels out.
    let (ne, nl) = (
        med(&early, |s| s.us / s.static_us.max(1e-9)),
        med(&late, |s| s.us / s.static_us.max(1e-9)),
    );
    let normalized = if ne > 0.0 { nl / ne } else { f64::NAN };
    println!(
        "  median per live document: {l:.3} µs over t ≥ {:.0} s ({} samples) vs {e:.3} µs over \
         t = {}–{} s ({} samples): {ratio:.2}x",
        late_from.as_secs_f64(),
        late.len(),
        SLIDE_EARLY.0,
        SLIDE_EARLY.1,
        early.len()
    );
    println!(
        "  the static twin over the same samples: {sl:.3} vs {se:.3} µs, {static_ratio:.2}x \
         (far from 1.00: the machine's load changed, and the ratio above with it)"
    );
    println!(
        "  each sample over its static twin's: {nl:.2} late vs {ne:.2} early, {normalized:.2}x \
         (the same ratio with the machine's load cancelled out)"
    );
    report.push(Goal {
        name: "5. sliding TTL window: late / early".into(),
        measured: format!("{l:.3} µs/doc"),
        baseline: format!("{e:.3} µs/doc"),
        ratio: format!("{ratio:.2}x"),
        target: format!("≤ {SLIDE_GOAL}x (normalized {normalized:.2}x)"),
        pass: Some(ratio <= SLIDE_GOAL),
    });
    coll.drop().await?;
    still.drop().await?;
    Ok(())
}

/// `insert_many` of [`SLIDE_BATCH`] every [`SLIDE_EVERY`] (catching up after a slow one) until
/// `stop`; returns how many it inserted.
async fn paced_inserts(
    coll: Collection<RawDocumentBuf>,
    stop: Arc<AtomicBool>,
) -> BenchResult<usize> {
    let mut ticker = tokio::time::interval(SLIDE_EVERY);
    let mut id = 0_usize;
    while !stop.load(Ordering::Relaxed) {
        ticker.tick().await;
        let docs: Vec<RawDocumentBuf> =
            (id..id + SLIDE_BATCH).map(|i| make_doc(i, false)).collect();
        let reply = coll.insert_many(docs).await?;
        if reply.inserted_ids.len() != SLIDE_BATCH {
            return Err(format!(
                "insert_many of {SLIDE_BATCH} reported {} inserted",
                reply.inserted_ids.len()
            )
            .into());
        }
        id += SLIDE_BATCH;
    }
    Ok(id)
}

/// A scan of the sliding collection that fails if a document older than its TTL (by the
/// client's clock, with [`SLIDE_SLACK_SECONDS`] to spare) comes back.
async fn scan_checked(coll: &Collection<RawDocumentBuf>) -> BenchResult<(Duration, usize)> {
    let now_ms = bson::DateTime::now().timestamp_millis();
    let oldest = now_ms - (i64::try_from(SLIDE_TTL_SECONDS)? + SLIDE_SLACK_SECONDS) * 1_000;
    let t = Instant::now();
    let mut cursor = coll.find(doc! {}).await?;
    let mut docs = Vec::new();
    let mut stale = 0_usize;
    while cursor.advance().await? {
        if cursor.current().get_datetime("at")?.timestamp_millis() < oldest {
            stale += 1;
        }
        docs.push(cursor.deserialize_current()?);
    }
    let took = t.elapsed();
    if stale > 0 {
        return Err(format!(
            "a scan returned {stale} documents written more than {SLIDE_TTL_SECONDS} + \
             {SLIDE_SLACK_SECONDS} s ago: expired documents are visible"
        )
        .into());
    }
    Ok((took, docs.len()))
}

// ---------------------------------------------------------------------------------------------
// 6: drops
// ---------------------------------------------------------------------------------------------

struct DropRun {
    docs: usize,
    cleanup: Cleanup,
    before: Disk,
    loaded: Disk,
    after: Disk,
}

async fn drops(ebb: &Ebb, scale: f64, report: &mut Report) -> BenchResult {
    println!();
    println!(
        "6. drops: load, wait {} s, drop(), wait for the cleanup; space {} s after the drop",
        DROP_SETTLE.as_secs(),
        DROP_SPACE_AFTER.as_secs()
    );
    let mut runs = Vec::new();
    for (i, &base) in DROP_SIZES.iter().enumerate() {
        let docs = scaled(base, scale).max(INSERT_BATCH);
        let coll = ebb.coll(&format!("drop_{i}"));
        tokio::time::sleep(DROP_SETTLE).await;
        let before = ebb.disk();
        let took = insert_batches(&coll, docs, INSERT_BATCH, |i| make_doc(i, false)).await?;
        print_load(&format!("N = {docs}: load"), docs, took);
        let idle = ebb.idle_cpu(DROP_SETTLE).await;
        let loaded = ebb.disk();
        let cpu = ebb.cpu.now();
        let dropped = Instant::now();
        coll.drop().await?;
        let cleanup = ebb.await_cleanup(dropped, cpu).await?;
        tokio::time::sleep_until((dropped + DROP_SPACE_AFTER).into()).await;
        let after = ebb.disk();
        println!(
            "  N = {docs}: idle CPU before the drop {}; cleanup {} ({}): {} of CPU, {} per \
             document",
            show_pct(idle),
            cleanup.show_wall(),
            cleanup.how,
            show_secs(cleanup.cpu),
            show_us(cleanup.cpu_per_doc(docs))
        );
        println!(
            "  N = {docs}: data dir before the load {}, after it {}, {} s after the drop {}",
            before.show(),
            loaded.show(),
            DROP_SPACE_AFTER.as_secs(),
            after.show()
        );
        runs.push(DropRun {
            docs,
            cleanup,
            before,
            loaded,
            after,
        });
    }
    let (Some(small), Some(large)) = (runs.first(), runs.last()) else {
        return Ok(());
    };
    let (s, l) = (
        small.cleanup.cpu_per_doc(small.docs),
        large.cleanup.cpu_per_doc(large.docs),
    );
    let ratio = match (s, l) {
        (Some(s), Some(l)) if s > 0.0 => Some(l / s),
        _ => None,
    };
    report.push(Goal {
        name: format!("6. drop CPU per doc, {}/{}", large.docs, small.docs),
        measured: show_us(l),
        baseline: show_us(s),
        ratio: ratio.map_or("-".into(), |r| format!("{r:.2}x")),
        target: format!("≤ {DROP_FLAT_GOAL}x"),
        pass: ratio.map(|r| r <= DROP_FLAT_GOAL),
    });
    report.push(Goal {
        name: format!("6. drop of {}: cleanup wall time", large.docs),
        measured: large.cleanup.show_wall(),
        baseline: "-".into(),
        ratio: "-".into(),
        target: format!("< {} s", DROP_WALL_GOAL.as_secs()),
        pass: Some(large.cleanup.wall.is_some_and(|w| w < DROP_WALL_GOAL)),
    });
    for run in &runs {
        let budget = run.before.total() + SPACE_ALLOWANCE;
        let after = run.after.total();
        report.push(Goal {
            name: format!(
                "6. drop of {}: space {} s after",
                run.docs,
                DROP_SPACE_AFTER.as_secs()
            ),
            measured: show_mib(after),
            baseline: format!(
                "{} before, {} loaded",
                show_mib(run.before.total()),
                show_mib(run.loaded.total())
            ),
            ratio: format!("{:.2}", to_f64_u64(after) / to_f64_u64(budget)),
            target: format!("≤ before + {}", show_mib(SPACE_ALLOWANCE)),
            pass: Some(after <= budget),
        });
    }
    Ok(())
}

/// A drop's cleanup, from the `drop` command.
struct Cleanup {
    /// Until the cleanup was seen done (`None`: not before [`DROP_CAP`]).
    wall: Option<Duration>,
    cpu: Option<Duration>,
    how: &'static str,
}

impl Cleanup {
    fn cpu_per_doc(&self, docs: usize) -> Option<f64> {
        self.cpu
            .map(|c| c.as_secs_f64() * 1e6 / to_f64(docs.max(1)))
    }

    fn show_wall(&self) -> String {
        self.wall.map_or_else(
            || format!("not done after {} s", DROP_CAP.as_secs()),
            |w| format!("{:.2} s", w.as_secs_f64()),
        )
    }
}

// ---------------------------------------------------------------------------------------------
// 7 and the report
// ---------------------------------------------------------------------------------------------

/// One goal line of the final table.
struct Goal {
    name: String,
    measured: String,
    baseline: String,
    ratio: String,
    target: String,
    /// `None`: could not be measured here.
    pass: Option<bool>,
}

#[derive(Default)]
struct Report {
    goals: Vec<Goal>,
}

impl Report {
    fn push(&mut self, goal: Goal) {
        self.goals.push(goal);
    }

    /// The data directory against the live data of every collection, as a line 7 goal.
    async fn space(&mut self, ebb: &Ebb, name: &str) -> BenchResult {
        let disk = ebb.disk();
        let stats = ebb.db.run_command(doc! { "dbStats": 1 }).await?;
        let live = match stats.get("dataSize") {
            Some(Bson::Double(d)) => f64_to_u64(*d),
            Some(Bson::Int64(n)) => u64::try_from(*n).unwrap_or(0),
            Some(Bson::Int32(n)) => u64::try_from(*n).unwrap_or(0),
            other => return Err(format!("dbStats has no dataSize: {other:?}").into()),
        };
        let budget = f64_to_u64(SPACE_FACTOR * to_f64_u64(live)) + SPACE_ALLOWANCE;
        println!(
            "  {name}: data dir {}, live data {} ({} objects), budget {}",
            disk.show(),
            show_mib(live),
            stats.get("objects").map_or("?".into(), ToString::to_string),
            show_mib(budget)
        );
        self.push(Goal {
            name: name.into(),
            measured: show_mib(disk.total()),
            baseline: format!("{} live", show_mib(live)),
            ratio: format!("{:.2}", to_f64_u64(disk.total()) / to_f64_u64(budget)),
            target: format!("≤ {SPACE_FACTOR}×live + {}", show_mib(SPACE_ALLOWANCE)),
            pass: Some(disk.total() <= budget),
        });
        Ok(())
    }

    fn print(&self) {
        println!();
        println!("goals (informational: the exit status does not depend on them)");
        println!(
            "  {:<42} {:>16} {:>34} {:>8}  {:<27} verdict",
            "line", "measured", "baseline", "ratio", "goal"
        );
        for g in &self.goals {
            println!(
                "  {:<42} {:>16} {:>34} {:>8}  {:<27} {}",
                g.name,
                g.measured,
                g.baseline,
                g.ratio,
                g.target,
                g.pass.map_or("n/a", verdict)
            );
        }
        println!("  (space ratio: data dir over the goal's budget; at most 1.00 passes)");
    }
}

/// `compact` on the collections kept to the end, if the server has the command: after every
/// measurement, for information only.
async fn informational_compact(ebb: &Ebb) -> BenchResult {
    println!();
    let before = ebb.disk();
    let mut freed = 0_i64;
    for name in ["expiry", "deleted"] {
        match ebb.db.run_command(doc! { "compact": name }).await {
            Ok(reply) => freed += integer(&reply, "bytesFreed").unwrap_or(0),
            Err(e) => {
                let why = match *e.kind {
                    mongodb::error::ErrorKind::Command(ref c) => {
                        format!("{} {}: {}", c.code, c.code_name, c.message)
                    }
                    ref other => other.to_string(),
                };
                println!("informational: compact not run ({why})");
                return Ok(());
            }
        }
    }
    let after = ebb.disk();
    println!(
        "informational: compact of lines 1 and 3's collections: bytesFreed {}, data dir {} -> {}",
        show_mib(u64::try_from(freed).unwrap_or(0)),
        before.show(),
        after.show()
    );
    if let Some(storage) = storage_status(&ebb.status().await?) {
        println!("informational: serverStatus ebb.storage: {storage}");
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Scans
// ---------------------------------------------------------------------------------------------

/// One instant of a scan series: medians of both collections' scans.
struct ScanPoint {
    planned: u64,
    started: Duration,
    scan_us: f64,
    fresh_us: f64,
    reps: usize,
}

impl ScanPoint {
    fn ratio(&self) -> f64 {
        self.scan_us / self.fresh_us.max(1e-3)
    }
}

/// Scans `coll` and its fresh twin, alternately, at each of `times` seconds after `origin`.
/// Both must return [`LIVE_DOCS`] (or [`HOT_DOCS`]: the same) documents.
async fn scan_series(
    coll: &Collection<RawDocumentBuf>,
    fresh: &Collection<RawDocumentBuf>,
    origin: Instant,
    times: &[u64],
) -> BenchResult<Vec<ScanPoint>> {
    let mut points = Vec::new();
    for &t in times {
        tokio::time::sleep_until((origin + Duration::from_secs(t)).into()).await;
        let set = Instant::now();
        let started = origin.elapsed();
        let (mut scans, mut fresh_scans) = (Vec::new(), Vec::new());
        while scans.len() < SCAN_REPS
            && (scans.len() < MIN_SCAN_REPS || set.elapsed() < SCAN_BUDGET)
        {
            scans.push(micros(scan(coll, LIVE_DOCS).await?));
            fresh_scans.push(micros(scan(fresh, LIVE_DOCS).await?));
        }
        let point = ScanPoint {
            planned: t,
            started,
            scan_us: median(&scans),
            fresh_us: median(&fresh_scans),
            reps: scans.len(),
        };
        println!(
            "    t = {:>2} s (began at {:>5.2} s): {:>10.1} µs vs fresh {:>8.1} µs, {:>8.2}x \
             ({} scans each)",
            point.planned,
            point.started.as_secs_f64(),
            point.scan_us,
            point.fresh_us,
            point.ratio(),
            point.reps
        );
        points.push(point);
    }
    Ok(points)
}

/// `find({})` read to the end, every document copied out; fails unless it returns `expected`.
async fn scan(coll: &Collection<RawDocumentBuf>, expected: usize) -> BenchResult<Duration> {
    let t = Instant::now();
    let mut cursor = coll.find(doc! {}).await?;
    let mut docs: Vec<RawDocumentBuf> = Vec::with_capacity(expected);
    while cursor.advance().await? {
        docs.push(cursor.deserialize_current()?);
    }
    let took = t.elapsed();
    if docs.len() != expected {
        return Err(format!(
            "a scan of {} returned {} documents, {expected} expected",
            coll.name(),
            docs.len()
        )
        .into());
    }
    Ok(took)
}

/// The goal line of a scan series: the first instant's ratio (`at_once`) or the last one's.
fn series_goal(name: &str, points: &[ScanPoint], at_once: bool) -> Goal {
    let judged = if at_once {
        points.first()
    } else {
        points.last()
    };
    let first_ok = points.iter().find(|p| p.ratio() <= SCAN_GOAL);
    let when = match first_ok {
        Some(p) => format!("≤{SCAN_GOAL}x from {} s", p.planned),
        None => format!("never ≤{SCAN_GOAL}x"),
    };
    match judged {
        Some(p) => Goal {
            name: name.into(),
            measured: format!("{:.0} µs", p.scan_us),
            baseline: format!("{:.0} µs", p.fresh_us),
            ratio: format!("{:.2}x", p.ratio()),
            target: if at_once {
                format!("≤ {SCAN_GOAL}x at once")
            } else {
                format!("≤ {SCAN_GOAL}x ({when})")
            },
            pass: Some(p.ratio() <= SCAN_GOAL),
        },
        None => Goal {
            name: name.into(),
            measured: "-".into(),
            baseline: "-".into(),
            ratio: "-".into(),
            target: format!("≤ {SCAN_GOAL}x"),
            pass: None,
        },
    }
}

// ---------------------------------------------------------------------------------------------
// The server, its commands, the process and the disk
// ---------------------------------------------------------------------------------------------

struct Ebb {
    admin: Database,
    db: Database,
    dir: PathBuf,
    cpu: CpuClock,
}

impl Ebb {
    fn coll(&self, name: &str) -> Collection<RawDocumentBuf> {
        self.db.collection::<RawDocumentBuf>(name)
    }

    async fn status(&self) -> BenchResult<Document> {
        Ok(self.admin.run_command(doc! { "serverStatus": 1 }).await?)
    }

    /// `ebbAdvanceClock`, optionally freezing (or unfreezing) first.
    async fn clock(&self, ms: i64, freeze: Option<bool>) -> BenchResult {
        let mut command = doc! { "ebbAdvanceClock": ms };
        if let Some(f) = freeze {
            command.insert("freeze", f);
        }
        let reply = self.admin.run_command(command).await?;
        if ok(&reply) {
            Ok(())
        } else {
            Err(format!("ebbAdvanceClock failed: {reply}").into())
        }
    }

    fn disk(&self) -> Disk {
        Disk::measure(&self.dir)
    }

    /// Process CPU over `window` of doing nothing, in % of one core.
    async fn idle_cpu(&self, window: Duration) -> Option<f64> {
        let before = self.cpu.now();
        let t = Instant::now();
        tokio::time::sleep(window).await;
        let used = self.cpu.since(before)?;
        Some(100.0 * used.as_secs_f64() / t.elapsed().as_secs_f64())
    }

    /// Waits for a drop's cleanup: `dropsPending == 0` when the server reports it, otherwise
    /// the data directory standing still for [`STABLE_FOR`] (the cleanup then ended at its last
    /// change).
    async fn await_cleanup(&self, dropped: Instant, cpu: Option<Duration>) -> BenchResult<Cleanup> {
        let reported = drops_pending(&self.status().await?).is_some();
        let mut last_seen = self.disk();
        let mut last_change = (dropped.elapsed(), self.cpu.since(cpu));
        loop {
            tokio::time::sleep(POLL).await;
            if reported {
                if drops_pending(&self.status().await?).unwrap_or(0) == 0 {
                    return Ok(Cleanup {
                        wall: Some(dropped.elapsed()),
                        cpu: self.cpu.since(cpu),
                        how: "until dropsPending = 0",
                    });
                }
            } else {
                let seen = self.disk();
                if seen != last_seen {
                    last_seen = seen;
                    last_change = (dropped.elapsed(), self.cpu.since(cpu));
                } else if dropped.elapsed().saturating_sub(last_change.0) >= STABLE_FOR {
                    return Ok(Cleanup {
                        wall: Some(last_change.0),
                        cpu: last_change.1,
                        how: "until the data dir's last change",
                    });
                }
            }
            if dropped.elapsed() > DROP_CAP {
                return Ok(Cleanup {
                    wall: None,
                    cpu: self.cpu.since(cpu),
                    how: "cap reached",
                });
            }
        }
    }
}

fn ttl_deleted(status: &Document) -> BenchResult<i64> {
    let ttl = status
        .get_document("metrics")
        .and_then(|m| m.get_document("ttl"))
        .map_err(|e| format!("serverStatus has no metrics.ttl: {e}"))?;
    integer(ttl, "deletedDocuments")
}

/// `serverStatus` `ebb.storage`, when the server reports it.
fn storage_status(status: &Document) -> Option<&Document> {
    status
        .get_document("ebb")
        .and_then(|e| e.get_document("storage"))
        .ok()
}

/// `ebb.storage.dropsPending`, when the server reports it.
fn drops_pending(status: &Document) -> Option<i64> {
    storage_status(status).and_then(|s| integer(s, "dropsPending").ok())
}

/// The process's CPU time (all threads, user and system) from `/proc/self/stat`; `None` where
/// there is no such file.
struct CpuClock {
    ticks_per_second: f64,
}

impl CpuClock {
    fn new() -> CpuClock {
        let ticks = std::process::Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|o| String::from_utf8(o.stdout).ok())
            .and_then(|s| s.trim().parse::<f64>().ok())
            .filter(|t| *t > 0.0)
            .unwrap_or(100.0);
        CpuClock {
            ticks_per_second: ticks,
        }
    }

    fn now(&self) -> Option<Duration> {
        let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
        // The command name (field 2) is in parentheses and may hold spaces; utime and stime
        // are fields 14 and 15, so the 12th and 13th after it.
        let (_, rest) = stat.rsplit_once(')')?;
        let mut fields = rest.split_whitespace().skip(11);
        let utime: u64 = fields.next()?.parse().ok()?;
        let stime: u64 = fields.next()?.parse().ok()?;
        Some(Duration::from_secs_f64(
            to_f64_u64(utime + stime) / self.ticks_per_second,
        ))
    }

    fn since(&self, before: Option<Duration>) -> Option<Duration> {
        Some(self.now()?.saturating_sub(before?))
    }
}

/// Disk space the data directory takes: bytes allocated to the files under it, plus to files
/// deleted from it that the process still holds open. Allocated, not file lengths: fjall
/// creates each journal as a 64 MiB sparse file and fills it as it writes.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Disk {
    files: u64,
    held: u64,
    /// How many files, and the newest modification: with the bytes, what tells that the
    /// directory changed (a write into a journal's allocated part changes no size).
    count: usize,
    newest: Option<std::time::SystemTime>,
}

impl Disk {
    fn measure(dir: &Path) -> Disk {
        let mut disk = Disk {
            files: 0,
            held: held_deleted_bytes(dir),
            count: 0,
            newest: None,
        };
        disk.walk(dir);
        disk
    }

    /// Adds the files under `dir`; files that vanish during the walk (compactions) are skipped.
    fn walk(&mut self, dir: &Path) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let Ok(meta) = entry.metadata() else {
                continue;
            };
            if meta.is_dir() {
                self.walk(&entry.path());
            } else {
                self.files += allocated(&meta);
                self.count += 1;
                if let Ok(modified) = meta.modified() {
                    self.newest = Some(self.newest.map_or(modified, |n| n.max(modified)));
                }
            }
        }
    }

    fn total(self) -> u64 {
        self.files + self.held
    }

    fn show(self) -> String {
        if self.held == 0 {
            show_mib(self.files)
        } else {
            format!(
                "{} ({} in files deleted but still open)",
                show_mib(self.total()),
                show_mib(self.held)
            )
        }
    }
}

/// Bytes allocated to a file on disk (its length where that is unknown).
#[cfg(unix)]
fn allocated(meta: &std::fs::Metadata) -> u64 {
    use std::os::unix::fs::MetadataExt;
    meta.blocks() * 512
}

#[cfg(not(unix))]
fn allocated(meta: &std::fs::Metadata) -> u64 {
    meta.len()
}

/// Bytes allocated to files under `dir` that are deleted but still open in this process
/// (Linux; 0 elsewhere).
fn held_deleted_bytes(dir: &Path) -> u64 {
    let Ok(fds) = std::fs::read_dir("/proc/self/fd") else {
        return 0;
    };
    let dir = dir.to_string_lossy();
    let mut total = 0;
    for fd in fds.flatten() {
        let Ok(target) = std::fs::read_link(fd.path()) else {
            continue;
        };
        let target = target.to_string_lossy();
        if target.starts_with(&*dir) && target.ends_with(" (deleted)") {
            total += std::fs::metadata(fd.path()).map_or(0, |m| allocated(&m));
        }
    }
    total
}

// ---------------------------------------------------------------------------------------------
// Documents and loading
// ---------------------------------------------------------------------------------------------

/// A document of exactly [`DOC_SIZE`] BSON bytes, `_id: id` first. Long-lived ones (`live`)
/// carry `ttl: -1` (never expires under a `_ts` TTL index) and `k: -1`; the others `k: id`.
fn make_doc(id: usize, live: bool) -> RawDocumentBuf {
    let id = i64::try_from(id).unwrap_or(i64::MAX);
    let mut doc = rawdoc! {
        "_id": id,
        "kind": "garbage-bench",
        "k": if live { -1 } else { id },
        "n": 0_i32,
        "at": bson::DateTime::now(),
    };
    if live {
        doc.append(bson::raw::cstr!("ttl"), -1_i32);
    }
    // An appended string element costs its type byte, "pad\0", a length and a trailing NUL.
    let overhead = 1 + "pad".len() + 1 + 4 + 1;
    let fill = DOC_SIZE.saturating_sub(doc.as_bytes().len() + overhead);
    doc.append(bson::raw::cstr!("pad"), "x".repeat(fill));
    doc
}

/// `live` documents spread evenly over `0..total`: every `stride`-th from 0.
#[derive(Clone, Copy)]
struct Spread {
    stride: usize,
    live: usize,
}

impl Spread {
    fn new(total: usize, live: usize) -> Spread {
        Spread {
            stride: (total / live.max(1)).max(1),
            live,
        }
    }

    fn is_live(self, i: usize) -> bool {
        i.is_multiple_of(self.stride) && i / self.stride < self.live
    }
}

fn print_load(what: &str, docs: usize, took: Duration) {
    println!(
        "  {what:<40} {docs:>9} in {:>7.2} s: {:>8.0} docs/s",
        took.as_secs_f64(),
        per_second(docs, took)
    );
}

// ---------------------------------------------------------------------------------------------
// Numbers
// ---------------------------------------------------------------------------------------------

fn to_u64(n: usize) -> u64 {
    u64::try_from(n).unwrap_or(u64::MAX)
}

#[expect(
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    reason = "a byte count, positive and far below 2^53"
)]
fn f64_to_u64(x: f64) -> u64 {
    x.max(0.0).round() as u64
}

fn show_mib(bytes: u64) -> String {
    format!("{:.1} MiB", to_f64_u64(bytes) / to_f64_u64(MIB))
}

fn show_pct(pct: Option<f64>) -> String {
    pct.map_or("n/a".into(), |p| format!("{p:.2}%"))
}

fn show_secs(d: Option<Duration>) -> String {
    d.map_or("n/a".into(), |d| format!("{:.2} s", d.as_secs_f64()))
}

fn show_us(us: Option<f64>) -> String {
    us.map_or("n/a".into(), |u| format!("{u:.2} µs"))
}
