//! Which allocator should the server use? Issue #17, "a leaner write path": the release server
//! with mimalloc (its default, crate `ebb-alloc`) against the same binary with the system's
//! (glibc's) allocator (`EBB_ALLOCATOR=system`), measured in one run.
//!
//! Two processes of the real `ebb` binary (release, durable stores in temporary directories,
//! `--port 0`), one with each allocator (the start log names it, which is checked); the
//! `mongodb` driver in this process plays the clients. Each workload runs in time-bounded
//! slices where the two servers take turns (the order flipping every round, an even number of
//! rounds so that each goes first as often):
//!
//! - `insert_many` of [`BATCH`] documents of ~240 bytes from [`BATCH_WRITERS`] connections;
//! - `insert_one` from [`WRITERS`] connections;
//! - `find` of one document by `_id` from [`READERS`] connections, over what was inserted.
//!
//! Reported for each: operations/s, the server process's CPU time per operation (`utime +
//! stime` of `/proc/<pid>/stat`: the server alone, the client is this process), and their
//! ratios (mimalloc / system). Then each server's resident memory (`VmRSS`), idle after start
//! and at the end. The goal printed, "mimalloc uses less server CPU per operation on every
//! workload", decides whether it stays the default; it never changes the exit status. The run
//! fails only if a server cannot start or answers wrongly.
//!
//! `EBB_BENCH_SCALE` (a float, default 1.0) scales the slices.

#[path = "common/mod.rs"]
mod common;

use std::time::{Duration, Instant};

use bson::{RawDocumentBuf, doc, rawdoc};
use common::{BenchResult, EbbProcess, USER_HZ, connect, per_second, run_bench, scale, verdict};
use mongodb::{Client, Collection};

const BATCH: usize = 100;
const BATCH_WRITERS: usize = 4;
const WRITERS: usize = 8;
const READERS: usize = 4;
/// Rounds: even, so that each server goes first in half of them.
const ROUNDS: usize = 6;
/// One slice at scale 1.
const SLICE: Duration = Duration::from_millis(1500);
const DB: &str = "allocbench";
const PAD: usize = 200;

fn main() {
    run_bench("allocator", bench());
}

/// One `ebb` process and the allocator it runs with.
struct Process {
    name: &'static str,
    ebb: EbbProcess,
}

impl Process {
    fn start(name: &'static str, system: bool) -> BenchResult<Process> {
        // Set either way: an `EBB_ALLOCATOR` of this process's environment is not inherited.
        let ebb = EbbProcess::start(&[("EBB_ALLOCATOR", if system { "system" } else { "" })])?;
        let want = if system { "system" } else { "mimalloc" };
        let line = &ebb.start_line;
        if !line.contains(&format!("allocator=\"{want}\""))
            && !line.contains(&format!("allocator={want}"))
        {
            return Err(format!("{name}: the start line does not name {want}: {line}").into());
        }
        Ok(Process { name, ebb })
    }

    fn rss_mb(&self) -> f64 {
        self.ebb.rss_kb() / 1024.0
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Workload {
    Batches,
    Singles,
    Reads,
}

impl Workload {
    fn label(self) -> String {
        match self {
            Workload::Batches => format!("insert_many of {BATCH}, {BATCH_WRITERS} connections"),
            Workload::Singles => format!("insert_one, {WRITERS} connections"),
            Workload::Reads => format!("find by _id, {READERS} connections"),
        }
    }
}

fn padded(writer: usize, k: usize) -> RawDocumentBuf {
    rawdoc! {
        "_id": format!("{writer}-{k}"),
        "w": i64::try_from(writer).unwrap_or(0),
        "k": i64::try_from(k).unwrap_or(0),
        "pad": "x".repeat(PAD),
    }
}

/// Runs `workload` against `coll` for `time`: operations done. Writers start numbering their
/// documents at `from` (so slices never repeat an `_id`); readers read `_id`s below it.
async fn slice(
    coll: &Collection<RawDocumentBuf>,
    workload: Workload,
    time: Duration,
    from: usize,
) -> BenchResult<usize> {
    let tasks = match workload {
        Workload::Batches => BATCH_WRITERS,
        Workload::Singles => WRITERS,
        Workload::Reads => READERS,
    };
    let deadline = Instant::now() + time;
    let mut handles = Vec::new();
    for w in 0..tasks {
        let coll = coll.clone();
        handles.push(tokio::spawn(async move {
            let mut done = 0_usize;
            let mut rng = common::XorShift(0x9E37_79B9_7F4A_7C15 ^ (w as u64 + 1));
            while Instant::now() < deadline {
                match workload {
                    Workload::Batches => {
                        let docs: Vec<_> = (0..BATCH).map(|i| padded(w, from + done + i)).collect();
                        let reply = coll.insert_many(docs).await?;
                        if reply.inserted_ids.len() != BATCH {
                            return Err("an insert_many inserted less than its batch".into());
                        }
                        done += BATCH;
                    }
                    Workload::Singles => {
                        coll.insert_one(padded(100 + w, from + done)).await?;
                        done += 1;
                    }
                    Workload::Reads => {
                        let w = rng.below(BATCH_WRITERS as u64);
                        let k = rng.below(from as u64);
                        if coll
                            .find_one(doc! { "_id": format!("{w}-{k}") })
                            .await?
                            .is_none()
                        {
                            return Err(format!("no document {w}-{k}").into());
                        }
                        done += 1;
                    }
                }
            }
            BenchResult::Ok(done)
        }));
    }
    let mut total = 0;
    for h in handles {
        total += h
            .await
            .map_err(|e| format!("a client task failed: {e}"))??;
    }
    Ok(total)
}

#[derive(Default, Clone, Copy)]
struct Tally {
    ops: usize,
    took: Duration,
    ticks: u64,
}

impl Tally {
    fn cpu_us_per_op(self) -> f64 {
        common::to_f64_u64(self.ticks) / USER_HZ * 1e6 / common::to_f64(self.ops.max(1))
    }
}

async fn bench() -> BenchResult {
    let time = SLICE.mul_f64(scale()).max(Duration::from_millis(200));
    println!(
        "\nEbb allocator: mimalloc (the default) against the system allocator (EBB_ALLOCATOR=system), \
         the same release binary in two processes (durable stores, scale {:.2})",
        scale()
    );
    if let Ok(load) = std::fs::read_to_string("/proc/loadavg") {
        let load: Vec<&str> = load.split_whitespace().take(3).collect();
        println!(
            "load average before the run: {} (other busy processes skew every number)",
            load.join(" ")
        );
    }
    let servers = [
        Process::start("mimalloc", false)?,
        Process::start("system", true)?,
    ];
    tokio::time::sleep(Duration::from_millis(500)).await;
    let idle_rss: Vec<f64> = servers.iter().map(Process::rss_mb).collect();
    let mut colls = Vec::new();
    for s in &servers {
        let client: Client = connect(s.ebb.addr, "allocator-bench", Some(16)).await?;
        let coll = client.database(DB).collection::<RawDocumentBuf>("c");
        coll.drop().await?;
        // Warm-up: connections open, collection made.
        slice(
            &coll,
            Workload::Singles,
            Duration::from_millis(200),
            1 << 40,
        )
        .await?;
        colls.push(coll);
    }
    println!(
        "slices of {:.1}s taking turns, {ROUNDS} rounds, documents of ~{} bytes",
        time.as_secs_f64(),
        PAD + 40
    );
    let mut all_win = true;
    // Document numbers written so far by each batch writer, per server (the reads look them up).
    let mut written = [0_usize; 2];
    for workload in [Workload::Batches, Workload::Singles, Workload::Reads] {
        let mut tallies = [Tally::default(); 2];
        for round in 0..ROUNDS {
            let order = if round % 2 == 0 { [0, 1] } else { [1, 0] };
            for side in order {
                let from = match workload {
                    Workload::Reads => written[side].max(1),
                    _ => written[side] + round * 10_000_000,
                };
                let before = servers[side].ebb.ticks();
                let began = Instant::now();
                let ops = slice(&colls[side], workload, time, from).await?;
                let took = began.elapsed();
                let used = servers[side].ebb.ticks().saturating_sub(before);
                let t = &mut tallies[side];
                t.ops += ops;
                t.took += took;
                t.ticks += used;
                if workload == Workload::Batches && round == 0 {
                    // The reads look up `{w}-{k}` with `k` below this: documents of the first
                    // round, numbered from 0 by each writer (who wrote at least a batch).
                    written[side] = BATCH.min(ops / BATCH_WRITERS);
                }
            }
        }
        println!("  {}:", workload.label());
        println!(
            "    {:<10} {:>10} {:>10} {:>16}",
            "", "ops/s", "ops", "server CPU us/op"
        );
        for (s, t) in servers.iter().zip(&tallies) {
            println!(
                "    {:<10} {:>10.0} {:>10} {:>16.2}",
                s.name,
                per_second(t.ops, t.took),
                t.ops,
                t.cpu_us_per_op()
            );
        }
        let rate = per_second(tallies[0].ops, tallies[0].took)
            / per_second(tallies[1].ops, tallies[1].took).max(1e-9);
        let cpu = tallies[0].cpu_us_per_op() / tallies[1].cpu_us_per_op().max(1e-9);
        println!("    mimalloc / system: ops/s {rate:.3}, server CPU per op {cpu:.3}");
        all_win &= cpu < 1.0;
    }
    let end_rss: Vec<f64> = servers.iter().map(Process::rss_mb).collect();
    println!("  resident memory (MB):    idle after start      at the end");
    for (i, s) in servers.iter().enumerate() {
        println!(
            "    {:<10} {:>24.1} {:>17.1}",
            s.name, idle_rss[i], end_rss[i]
        );
    }
    println!("\ngoals (informational, never fail the run):");
    println!(
        "  mimalloc uses less server CPU per operation on every workload: {}",
        verdict(all_win)
    );
    Ok(())
}
