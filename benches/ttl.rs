//! How fast does Ebb's background TTL purge remove expired documents, and what does it cost the
//! foreground while it runs?
//!
//! One process: Ebb on a durable store in a temporary directory, started with [`ebb::run`] (test
//! commands on) in its own 2-worker tokio runtime on its own thread, as on the 2-core target; the
//! `mongodb` driver in a second 2-worker runtime plays the clients.
//!
//! 1. **Purge rate.** A collection gets the Cosmos default `{_ts: 1}` with
//!    `expireAfterSeconds: 60`, then 100,000 documents of 200 BSON bytes (`insert_many`, 1,000 a
//!    batch). The server clock is frozen and moved 61 s forward in one `ebbAdvanceClock`: every
//!    document is expired from that instant. `count_documents({})` must answer 0 at once (expired
//!    documents are hidden without waiting for the purge), and `serverStatus`
//!    `metrics.ttl.deletedDocuments` is polled every 10 ms until it has grown by 100,000. The
//!    rate is documents over the time from the advance to that poll. Then the bench waits, poking
//!    the clock, for the purge task's next pass: that is how long the compaction Ebb runs after
//!    large purges kept the task busy.
//! 2. **Foreground latency while purging.** A second collection holds 10,000 live documents
//!    (no TTL). Two client tasks run sequentially against it, one `find_one({_id: k})` (random
//!    existing `k`) after another, and one `insert_one` (new `_id`, default write concern:
//!    acknowledged once synced) after another. Four rounds; in each, another collection is
//!    loaded with 100,000 expiring documents, and after a short pause the tasks run
//!    * with no purge running (a baseline window), then
//!    * from the clock advance that expires the 100,000 until the purge task is idle again
//!      (deletion, then compaction; both shown apart too).
//!
//!    A last baseline window follows the last round. The measure is the p99 ratio of all purge
//!    windows pooled over all baseline windows pooled: one ~1 s window holds about 4,000
//!    inserts, so a single disk hiccup used to decide a round's p99 (the same code measured
//!    1.2x to 2.95x). The per-round ratios are printed too.
//!
//! The goals, "purge ≥ 50k expiries/s" and "foreground p99 during the purge ≤ 1.5× without"
//! (issue #17), are printed as PASS or MISS and never change the exit status: this is a
//! measurement, not a test. The run fails (non-zero) only if the server cannot be started or
//! answers wrongly.
//!
//! `EBB_BENCH_SCALE` (a float, default 1.0) scales every document count and time window.

#[path = "common/mod.rs"]
mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::time::{Duration, Instant};

use bson::{RawDocumentBuf, doc, rawdoc};
use common::{
    BenchResult, CLIENT_WORKERS, SERVER_WORKERS, Server, XorShift, connect, create_ts_ttl_index,
    insert_batches, integer, micros, ok, per_second, run_bench, scale, scaled_duration, verdict,
};
use mongodb::{Collection, Database};

/// BSON size of every document.
const DOC_SIZE: usize = 200;
/// Expiring documents per purge (scaled).
const EXPIRING_DOCS: f64 = 100_000.0;
/// Live documents the foreground reads (scaled).
const LIVE_DOCS: f64 = 10_000.0;
/// Documents per `insert_many`.
const INSERT_BATCH: usize = 1_000;
/// The collection default TTL.
const TTL_SECONDS: u64 = 60;
/// How far the clock moves to expire everything loaded before.
const ADVANCE_MS: i64 = 61_000;
/// How often `serverStatus` is polled.
const POLL: Duration = Duration::from_millis(10);
/// Longest wait for one purge to finish (scaled, at least [`MIN_CAP`]).
const PURGE_CAP: Duration = Duration::from_secs(30);
/// Longest wait for the purge task to come back after a purge (compaction; scaled, at least
/// [`MIN_CAP`]).
const SETTLE_CAP: Duration = Duration::from_secs(20);
/// Floor of the scaled caps.
const MIN_CAP: Duration = Duration::from_secs(5);
/// Length of each baseline window (scaled, at least [`MIN_BASELINE`]).
const BASELINE: Duration = Duration::from_secs(3);
/// Floor of the scaled baseline window.
const MIN_BASELINE: Duration = Duration::from_millis(500);
/// Purges measured under the foreground load; their windows are pooled, and so are the
/// baseline windows between them, so that one disk hiccup in a ~1 s window does not decide
/// the p99.
const PURGE_ROUNDS: usize = 4;
/// Pause after loading, before a window starts.
const SETTLE: Duration = Duration::from_millis(500);
/// Foreground load that runs before the clock is advanced (not counted).
const LEAD_IN: Duration = Duration::from_millis(200);
/// Goal: expired documents removed per second, at least.
const PURGE_GOAL: f64 = 50_000.0;
/// Goal: foreground p99 during the purge over its baseline, at most (issue #17; it was "below
/// 2×" before).
const LATENCY_GOAL: f64 = 1.5;
/// Baseline p99s further apart than this (largest / smallest) mean the machine was noisy.
const NOISY_SPREAD: f64 = 1.5;
/// Database of every collection the bench uses.
const DB: &str = "ttlbench";

fn main() {
    run_bench("ttl", bench());
}

async fn bench() -> BenchResult {
    let scale = scale();
    let expiring = scaled_count(EXPIRING_DOCS, scale);
    let live = scaled_count(LIVE_DOCS, scale);
    print_header(scale);

    let server = Server::start()?;
    println!("Ebb store: {}", server.data_dir().display());
    let client = connect(server.addr, "ebb-ttl-bench", None).await?;
    let ebb = Ebb {
        admin: client.database("admin"),
        db: client.database(DB),
    };
    ebb.db.run_command(doc! { "ping": 1 }).await?;
    let started = Instant::now();

    let rate = purge_rate(&ebb, expiring, scale).await?;
    let load = foreground_phase(&ebb, expiring, live, scale).await?;
    report_goals(&rate, &load);
    println!("total time {:.1} s", started.elapsed().as_secs_f64());
    println!();

    drop(ebb);
    drop(client);
    server.stop()
}

fn print_header(scale: f64) {
    println!();
    println!(
        "Ebb TTL purge: rate and foreground cost ({} build, {} CPUs, {SERVER_WORKERS} server / \
         {CLIENT_WORKERS} client runtime workers, durable store, EBB_BENCH_SCALE={scale})",
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
// Phase 1: purge rate
// ---------------------------------------------------------------------------------------------

struct PurgeRate {
    docs: usize,
    purge: Purge,
}

async fn purge_rate(ebb: &Ebb, docs: usize, scale: f64) -> BenchResult<PurgeRate> {
    println!();
    println!(
        "1. purge rate: {docs} documents of {DOC_SIZE} B, {{_ts: 1}} expireAfterSeconds \
         {TTL_SECONDS}, all expired by one clock advance"
    );
    let coll = ebb.db.collection::<RawDocumentBuf>("expire_rate");
    create_ts_ttl_index(&coll, TTL_SECONDS).await?;
    let load = load(&coll, 0, docs).await?;
    print_load("load (insert_many x1000)", docs, load);

    ebb.clock(0, Some(true)).await?;
    let before = ebb.ttl_counters().await?;
    let advanced = Instant::now();
    ebb.clock(ADVANCE_MS, None).await?;

    // Watch the counter from another task while this one checks visibility.
    let watcher = {
        let ebb = ebb.clone();
        let cap = scaled_duration(PURGE_CAP, scale, MIN_CAP);
        tokio::spawn(async move { ebb.await_purge(before, docs, advanced, cap).await })
    };
    let t = Instant::now();
    let count = coll.count_documents(doc! {}).await?;
    let count_took = t.elapsed();
    let t = Instant::now();
    let found = coll.find_one(doc! { "_id": 0_i64 }).await?;
    let find_took = t.elapsed();
    let mut purge = watcher.await??;
    if count != 0 || found.is_some() {
        return Err(format!(
            "expired documents still visible right after the advance: count_documents {count}, \
             find_one(_id: 0) {}",
            if found.is_some() { "found" } else { "none" }
        )
        .into());
    }
    ebb.await_idle(&mut purge, scale).await?;

    println!(
        "  {:<34} {:>12}   answered in {:>8.2} ms  OK",
        "count_documents({}) after advance",
        count,
        millis(count_took)
    );
    println!(
        "  {:<34} {:>12}   answered in {:>8.2} ms  OK",
        "find_one({_id: 0}) after advance",
        "none",
        millis(find_took)
    );
    purge.print(docs);
    Ok(PurgeRate { docs, purge })
}

// ---------------------------------------------------------------------------------------------
// Phase 2: foreground latency during a purge
// ---------------------------------------------------------------------------------------------

struct ForegroundLoad {
    baseline: OpStats,
    purging: OpStats,
    purge: Purge,
}

/// Latencies of both foreground operations over one window.
struct OpStats {
    find: Summary,
    insert: Summary,
}

async fn foreground_phase(
    ebb: &Ebb,
    expiring: usize,
    live_docs: usize,
    scale: f64,
) -> BenchResult<ForegroundLoad> {
    println!();
    println!(
        "2. foreground while purging: {live_docs} live documents (no TTL) read by _id and \
         appended to by 2 sequential tasks; {PURGE_ROUNDS} rounds, in each {expiring} documents \
         of another collection are loaded, a baseline window runs, then they expire"
    );
    let live = ebb.db.collection::<RawDocumentBuf>("live");
    let t = load(&live, 0, live_docs).await?;
    print_load("load live", live_docs, t);

    let fg = Foreground {
        coll: live.clone(),
        keys: live_docs,
        next_id: Arc::new(AtomicI64::new(i64::try_from(live_docs)?)),
    };
    // Warm-up: connections, caches.
    fg.run_for(Duration::from_millis(300)).await?;

    let window = scaled_duration(BASELINE, scale, MIN_BASELINE);
    let mut baselines = Vec::new();
    let mut rounds = Vec::new();
    for round in 0..PURGE_ROUNDS {
        let doomed = ebb
            .db
            .collection::<RawDocumentBuf>(&format!("expire_load_{round}"));
        create_ts_ttl_index(&doomed, TTL_SECONDS).await?;
        // The clock is frozen: these expire 60 s after its current instant.
        let t = load(&doomed, 0, expiring).await?;
        print_load(&format!("round {round}: load expiring"), expiring, t);
        // The load's own background work (memtable flushes) settles before either window.
        tokio::time::sleep(SETTLE).await;
        let before = fg.run_for(window).await?;

        let running = fg.start();
        tokio::time::sleep(LEAD_IN).await;
        let counters = ebb.ttl_counters().await?;
        let advanced = Instant::now();
        ebb.clock(ADVANCE_MS, None).await?;
        let cap = scaled_duration(PURGE_CAP, scale, MIN_CAP);
        let mut purge = ebb.await_purge(counters, expiring, advanced, cap).await?;
        ebb.await_idle(&mut purge, scale).await?;
        let during = running.stop().await?;

        let remaining = doomed.count_documents(doc! {}).await?;
        if remaining != 0 {
            return Err(
                format!("{remaining} expired documents still counted after the purge").into(),
            );
        }
        let deleted_until = purge.deleted_at.map(|d| advanced + d);
        let idle_at = purge.idle_after.map(|d| advanced + d);
        let deleting = during.window(Some(advanced), deleted_until);
        let compacting = match (deleted_until, idle_at) {
            (Some(_), Some(_)) => during.window(deleted_until, idle_at),
            _ => Samples::default(),
        };
        let purging = during.window(Some(advanced), idle_at.or(deleted_until));
        baselines.push(before);
        rounds.push((purge, deleting, compacting, purging));
    }
    tokio::time::sleep(SETTLE).await;
    baselines.push(fg.run_for(window).await?);

    let expected = u64::try_from(fg.next_id.load(Ordering::SeqCst))?;
    let live_count = live.count_documents(doc! {}).await?;
    if live_count != expected {
        return Err(format!(
            "the live collection holds {live_count} documents, {expected} expected"
        )
        .into());
    }

    let pool = |parts: &mut dyn Iterator<Item = &Samples>| {
        parts.fold(Samples::default(), |all, s| all.merged(s))
    };
    let baseline = pool(&mut baselines.iter());
    let deleting = pool(&mut rounds.iter().map(|r| &r.1));
    let compacting = pool(&mut rounds.iter().map(|r| &r.2));
    let purging = pool(&mut rounds.iter().map(|r| &r.3));

    println!();
    for (round, r) in rounds.iter().enumerate() {
        println!("  round {round}:");
        r.0.print(expiring);
    }
    println!();
    println!(
        "  {:<24} {:<7} {:>7} {:>9} {:>9} {:>9} {:>9} {:>9}",
        "window", "op", "ops", "ops/s", "p50 us", "p90 us", "p99 us", "max us"
    );
    let mut rows: Vec<(String, &Samples)> = baselines
        .iter()
        .enumerate()
        .map(|(i, b)| (format!("baseline {i}"), b))
        .collect();
    rows.push(("baseline (all)".to_owned(), &baseline));
    for (i, r) in rounds.iter().enumerate() {
        rows.push((format!("purge {i} (whole window)"), &r.3));
    }
    rows.push(("purge: deleting (all)".to_owned(), &deleting));
    rows.push(("purge: compacting (all)".to_owned(), &compacting));
    rows.push(("purge (all windows)".to_owned(), &purging));
    for (name, samples) in &rows {
        for (op, s) in [("find", &samples.find), ("insert", &samples.insert)] {
            s.summary().print_row(name, op);
        }
    }
    let stats = |s: &Samples| OpStats {
        find: s.find.summary(),
        insert: s.insert.summary(),
    };
    let base = stats(&baseline);
    let pooled = stats(&purging);
    for op in ["find", "insert"] {
        let p99s: Vec<f64> = baselines
            .iter()
            .map(|b| {
                let st = stats(b);
                if op == "find" {
                    st.find.p99_us
                } else {
                    st.insert.p99_us
                }
            })
            .collect();
        let (lo, hi) = p99s
            .iter()
            .fold((f64::MAX, f64::MIN), |(lo, hi), &v| (lo.min(v), hi.max(v)));
        if hi / lo > NOISY_SPREAD {
            println!(
                "  warning: {op} p99 differs {:.2}x between baseline windows: the machine was \
                 noisy, so the ratio below is too; rerun it quiet",
                hi / lo
            );
        }
    }
    println!();
    println!(
        "  {:<24} {:<7} {:>9} {:>9}",
        "purge / baseline (all)", "op", "p50", "p99"
    );
    for (op, b, p) in [
        ("find", &base.find, &pooled.find),
        ("insert", &base.insert, &pooled.insert),
    ] {
        println!(
            "  {:<24} {:<7} {:>8.2}x {:>8.2}x",
            "",
            op,
            p.p50_us / b.p50_us,
            p.p99_us / b.p99_us
        );
    }
    println!("  per round, p99 over the baseline before it:");
    for (i, r) in rounds.iter().enumerate() {
        let (b, p) = (baselines.get(i).map(&stats), stats(&r.3));
        if let Some(b) = b {
            println!(
                "    round {i}: find {:.2}x, insert {:.2}x",
                p.find.p99_us / b.find.p99_us,
                p.insert.p99_us / b.insert.p99_us
            );
        }
    }
    let purge = rounds
        .into_iter()
        .next()
        .map(|r| r.0)
        .ok_or("no purge round ran")?;
    Ok(ForegroundLoad {
        baseline: base,
        purging: pooled,
        purge,
    })
}

fn report_goals(rate: &PurgeRate, load: &ForegroundLoad) {
    println!();
    println!("goals (informational: the exit status does not depend on them)");
    let purge_rate = rate.purge.rate(rate.docs);
    println!(
        "  {:<44} {:>10.0} expiries/s          {}",
        format!("purge >= {PURGE_GOAL:.0} expiries/s"),
        purge_rate,
        verdict(purge_rate >= PURGE_GOAL)
    );
    if let Some(under_load) = load.purge.deleted_at {
        println!(
            "  {:<44} {:>10.0} expiries/s",
            "  (same purge under foreground load)",
            load.purge.rate_over(under_load)
        );
    }
    let find = load.purging.find.p99_us / load.baseline.find.p99_us;
    let insert = load.purging.insert.p99_us / load.baseline.insert.p99_us;
    let worst = find.max(insert);
    println!(
        "  {:<44} find {find:>5.2}x, insert {insert:>5.2}x  {}",
        format!("foreground p99 during the purge <= {LATENCY_GOAL}x without"),
        verdict(worst <= LATENCY_GOAL)
    );
    println!();
}

// ---------------------------------------------------------------------------------------------
// The server and its commands
// ---------------------------------------------------------------------------------------------

/// Handles on the server: `admin` for the test and status commands, `db` for the data.
#[derive(Clone)]
struct Ebb {
    admin: Database,
    db: Database,
}

/// `metrics.ttl` from `serverStatus`.
#[derive(Clone, Copy, Debug)]
struct TtlCounters {
    deleted: i64,
    passes: i64,
}

/// One purge as the counters showed it, timed from the clock advance.
struct Purge {
    /// The clock advance everything is timed from.
    advanced: Instant,
    /// When `deletedDocuments` had grown by the target (`None`: the cap passed first).
    deleted_at: Option<Duration>,
    /// When the purge task had run another pass after that (compaction done).
    idle_after: Option<Duration>,
    /// Documents removed by then.
    deleted: i64,
    /// Purge passes that removed them.
    passes: i64,
    /// Polls that saw the counter move, and the most it moved between two polls.
    steps: usize,
    largest_step: i64,
}

impl Purge {
    fn rate(&self, docs: usize) -> f64 {
        match self.deleted_at {
            Some(d) => per_second(docs, d),
            None => 0.0,
        }
    }

    fn rate_over(&self, took: Duration) -> f64 {
        let deleted = usize::try_from(self.deleted).unwrap_or(0);
        per_second(deleted, took)
    }

    fn print(&self, docs: usize) {
        match self.deleted_at {
            Some(took) => println!(
                "  {:<34} {:>12}   in {:>8.3} s: {:>9.0} expiries/s ({} passes; the counter moved \
                 {} times, by up to {})",
                "purge (deletedDocuments +n)",
                docs,
                took.as_secs_f64(),
                per_second(docs, took),
                self.passes,
                self.steps,
                self.largest_step,
            ),
            None => println!(
                "  {:<34} {:>12}   of {docs} removed before the cap: {:.0} expiries/s at most",
                "purge (deletedDocuments +n)", self.deleted, 0.0
            ),
        }
        match (self.deleted_at, self.idle_after) {
            (Some(deleted), Some(idle)) => println!(
                "  {:<34} {:>12}   {:>8.3} s more until the purge task's next pass",
                "compaction after the purge",
                "",
                idle.saturating_sub(deleted).as_secs_f64()
            ),
            (Some(_), None) => println!(
                "  {:<34} {:>12}   the purge task did not come back before the cap",
                "compaction after the purge", ""
            ),
            _ => {}
        }
    }
}

impl Ebb {
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

    async fn ttl_counters(&self) -> BenchResult<TtlCounters> {
        let reply = self.admin.run_command(doc! { "serverStatus": 1 }).await?;
        let ttl = reply
            .get_document("metrics")
            .and_then(|m| m.get_document("ttl"))
            .map_err(|e| format!("serverStatus has no metrics.ttl: {e}"))?;
        Ok(TtlCounters {
            deleted: integer(ttl, "deletedDocuments")?,
            passes: integer(ttl, "passes")?,
        })
    }

    /// Polls until `deletedDocuments` has grown by `docs` since `before`, or `cap` passes.
    async fn await_purge(
        &self,
        before: TtlCounters,
        docs: usize,
        since: Instant,
        cap: Duration,
    ) -> BenchResult<Purge> {
        let target = i64::try_from(docs)?;
        let mut purge = Purge {
            advanced: since,
            deleted_at: None,
            idle_after: None,
            deleted: 0,
            passes: 0,
            steps: 0,
            largest_step: 0,
        };
        let mut ticker = tokio::time::interval(POLL);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut last = 0;
        loop {
            ticker.tick().await;
            let now = self.ttl_counters().await?;
            let seen = Instant::now();
            let deleted = now.deleted - before.deleted;
            if deleted > last {
                purge.steps += 1;
                purge.largest_step = purge.largest_step.max(deleted - last);
                last = deleted;
            }
            purge.deleted = deleted;
            purge.passes = now.passes - before.passes;
            if deleted >= target {
                purge.deleted_at = Some(seen - since);
                return Ok(purge);
            }
            if seen - since > cap {
                return Ok(purge);
            }
        }
    }

    /// After a purge: pokes the clock (a zero advance wakes an idle purge task) until the purge
    /// task runs another pass. It only waits for the clock once any compaction it started after
    /// the purge is over, so this measures that compaction.
    async fn await_idle(&self, purge: &mut Purge, scale: f64) -> BenchResult {
        let Some(deleted_at) = purge.deleted_at else {
            return Ok(());
        };
        let since = purge.advanced;
        let passes = self.ttl_counters().await?.passes;
        let cap = scaled_duration(SETTLE_CAP, scale, MIN_CAP);
        let mut ticker = tokio::time::interval(POLL);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticker.tick().await;
            self.clock(0, None).await?;
            let now = self.ttl_counters().await?;
            let seen = Instant::now();
            if now.passes > passes {
                purge.idle_after = Some(seen - since);
                return Ok(());
            }
            if seen - since > deleted_at + cap {
                return Ok(());
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Documents and loading
// ---------------------------------------------------------------------------------------------

/// A document of exactly [`DOC_SIZE`] BSON bytes, `_id: id` first.
fn make_doc(id: i64) -> RawDocumentBuf {
    let head = rawdoc! {
        "_id": id,
        "kind": "ttl-bench",
        "n": i32::try_from(id.rem_euclid(1_000)).unwrap_or(0),
        "at": bson::DateTime::from_millis(1_700_000_000_000 + id),
    };
    // An appended string element costs its type byte, "pad\0", a length and a trailing NUL.
    let overhead = 1 + "pad".len() + 1 + 4 + 1;
    let fill = DOC_SIZE.saturating_sub(head.as_bytes().len() + overhead);
    let mut doc = head;
    doc.append(bson::raw::cstr!("pad"), "x".repeat(fill));
    doc
}

/// Inserts documents `first..first + n` with `insert_many`, [`INSERT_BATCH`] at a time.
async fn load(coll: &Collection<RawDocumentBuf>, first: i64, n: usize) -> BenchResult<Duration> {
    insert_batches(coll, n, INSERT_BATCH, |i| {
        make_doc(first.saturating_add(i64::try_from(i).unwrap_or(i64::MAX)))
    })
    .await
}

fn print_load(what: &str, docs: usize, took: Duration) {
    println!(
        "  {what:<34} {docs:>12}   in {:>8.3} s: {:>9.0} docs/s",
        took.as_secs_f64(),
        per_second(docs, took)
    );
}

// ---------------------------------------------------------------------------------------------
// The foreground load
// ---------------------------------------------------------------------------------------------

/// Finds by `_id` on one task and inserts on another, each one request after another.
struct Foreground {
    coll: Collection<RawDocumentBuf>,
    /// Existing `_id`s are `0..keys`.
    keys: usize,
    /// The next `_id` to insert.
    next_id: Arc<AtomicI64>,
}

/// One request: when it started and how long it took.
#[derive(Clone, Copy)]
struct Sample {
    at: Instant,
    took: Duration,
}

#[derive(Default)]
struct Samples {
    find: Latencies,
    insert: Latencies,
}

#[derive(Default, Clone)]
struct Latencies {
    samples: Vec<Sample>,
    /// Wall time the samples cover (for ops/s).
    span: Duration,
}

struct Running {
    stop: Arc<AtomicBool>,
    find: tokio::task::JoinHandle<BenchResult<Vec<Sample>>>,
    insert: tokio::task::JoinHandle<BenchResult<Vec<Sample>>>,
    started: Instant,
}

impl Foreground {
    fn start(&self) -> Running {
        let stop = Arc::new(AtomicBool::new(false));
        let find = {
            let coll = self.coll.clone();
            let stop = Arc::clone(&stop);
            let keys = u64::try_from(self.keys).unwrap_or(1).max(1);
            let seed = self.next_id.load(Ordering::SeqCst).unsigned_abs() | 1;
            tokio::spawn(async move {
                let mut rng = XorShift(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
                let mut out = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    let id = i64::try_from(rng.next_u64() % keys)?;
                    let at = Instant::now();
                    let found = coll.find_one(doc! { "_id": id }).await?;
                    let took = at.elapsed();
                    if found.is_none() {
                        return Err(format!("find_one({{_id: {id}}}) found nothing").into());
                    }
                    out.push(Sample { at, took });
                }
                Ok(out)
            })
        };
        let insert = {
            let coll = self.coll.clone();
            let stop = Arc::clone(&stop);
            let next_id = Arc::clone(&self.next_id);
            tokio::spawn(async move {
                let mut out = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    let doc = make_doc(next_id.fetch_add(1, Ordering::SeqCst));
                    let at = Instant::now();
                    coll.insert_one(doc).await?;
                    out.push(Sample {
                        at,
                        took: at.elapsed(),
                    });
                }
                Ok(out)
            })
        };
        Running {
            stop,
            find,
            insert,
            started: Instant::now(),
        }
    }

    async fn run_for(&self, window: Duration) -> BenchResult<Samples> {
        let running = self.start();
        tokio::time::sleep(window).await;
        running.stop().await
    }
}

impl Running {
    async fn stop(self) -> BenchResult<Samples> {
        self.stop.store(true, Ordering::Relaxed);
        let find = self.find.await??;
        let insert = self.insert.await??;
        let span = self.started.elapsed();
        Ok(Samples {
            find: Latencies {
                samples: find,
                span,
            },
            insert: Latencies {
                samples: insert,
                span,
            },
        })
    }
}

impl Samples {
    /// The requests that started within `[from, to)` (open ends: no bound).
    fn window(&self, from: Option<Instant>, to: Option<Instant>) -> Samples {
        let pick = |l: &Latencies| {
            let samples: Vec<Sample> = l
                .samples
                .iter()
                .filter(|s| from.is_none_or(|f| s.at >= f) && to.is_none_or(|t| s.at < t))
                .copied()
                .collect();
            let span = match (from, to) {
                (Some(f), Some(t)) => t.saturating_duration_since(f),
                _ => l.span,
            };
            Latencies { samples, span }
        };
        Samples {
            find: pick(&self.find),
            insert: pick(&self.insert),
        }
    }

    fn merged(&self, other: &Samples) -> Samples {
        let join = |a: &Latencies, b: &Latencies| Latencies {
            samples: a.samples.iter().chain(&b.samples).copied().collect(),
            span: a.span + b.span,
        };
        Samples {
            find: join(&self.find, &other.find),
            insert: join(&self.insert, &other.insert),
        }
    }
}

impl Latencies {
    fn summary(&self) -> Summary {
        let mut sorted: Vec<Duration> = self.samples.iter().map(|s| s.took).collect();
        sorted.sort_unstable();
        let n = sorted.len();
        // Nearest rank: the smallest latency with at least `permille` of the samples at or
        // below it.
        let pct = |permille: usize| {
            let rank = (n * permille).div_ceil(1_000).max(1);
            sorted.get(rank - 1).map_or(f64::NAN, |d| micros(*d))
        };
        Summary {
            ops: n,
            per_second: per_second(n, self.span),
            p50_us: pct(500),
            p90_us: pct(900),
            p99_us: pct(990),
            max_us: sorted.last().map_or(f64::NAN, |d| micros(*d)),
        }
    }
}

struct Summary {
    ops: usize,
    per_second: f64,
    p50_us: f64,
    p90_us: f64,
    p99_us: f64,
    max_us: f64,
}

impl Summary {
    fn print_row(&self, window: &str, op: &str) {
        println!(
            "  {window:<24} {op:<7} {:>7} {:>9.0} {:>9.1} {:>9.1} {:>9.1} {:>9.1}",
            self.ops, self.per_second, self.p50_us, self.p90_us, self.p99_us, self.max_us
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Numbers
// ---------------------------------------------------------------------------------------------

#[expect(
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    reason = "a positive count far below usize::MAX"
)]
fn scaled_count(base: f64, scale: f64) -> usize {
    ((base * scale).round() as usize).max(INSERT_BATCH)
}

fn millis(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}
