//! Does a write batch cost O(N)? The time per statement of one `update` (or `delete`) command
//! of 1,000, 10,000 and 100,000 statements, and the ratio of the largest to the smallest.
//!
//! One process: Ebb on a durable store in a temporary directory, started with [`ebb::run`] in its
//! own 2-worker tokio runtime on its own thread, as on the 2-core target; the `mongodb` driver in
//! a second 2-worker runtime sends the commands.
//!
//! 1. **Updates, hot document.** A fresh collection holds one document `{_id: 0, a: 0}`; one
//!    `update` command carries N statements `{q: {}, u: {$inc: {a: 1}}}`. Each statement scans
//!    the collection (its filter is empty) and finds the document the previous one wrote; the
//!    document must end at `a: N`.
//! 2. **Updates by `_id`**: the same with `q: {_id: 0}` (a point read), the baseline.
//! 3. **Deletes from the front.** A fresh collection holds N documents (`_id` 0..N); one `delete`
//!    command carries N statements `{q: {}, limit: 1}`, each removing the first document left,
//!    so each scan starts where the previous statements deleted. The collection must end empty.
//! 4. **Deletes by `_id`**: N statements `{q: {_id: i}, limit: 1}`, the baseline.
//!
//! The goal, "100k/1k ratio of the cost per statement within 1.5×", is printed as PASS or MISS
//! and never changes the exit status: this is a measurement, not a test. The run fails
//! (non-zero) only if the server cannot be started or answers wrongly.
//!
//! A command of 1,000 statements takes tens of milliseconds, so one disk hiccup moves it: each
//! size runs on fresh collections until it has run about 100,000 statements in all (at most
//! [`MAX_REPEATS`] commands) and reports the median command's cost per statement.
//!
//! `EBB_BENCH_SCALE` (a float, default 1.0) scales every statement count.

#[path = "common/mod.rs"]
mod common;

use std::time::{Duration, Instant};

use bson::{Bson, Document, doc};
use common::{BenchResult, Server, connect, run_bench, scale, scaled, to_f64, verdict};
use mongodb::Database;

/// Statements per command (scaled).
const SIZES: [f64; 3] = [1_000.0, 10_000.0, 100_000.0];
/// At most this many commands of one size (the smallest sizes repeat the most).
const MAX_REPEATS: usize = 15;
/// The goal: the largest batch's cost per statement over the smallest's.
const GOAL_RATIO: f64 = 1.5;
const DB: &str = "batchbench";

fn main() {
    run_bench("batches", bench());
}

#[derive(Clone, Copy)]
enum Workload {
    UpdateScan,
    UpdateById,
    DeleteScan,
    DeleteById,
}

impl Workload {
    const ALL: [Workload; 4] = [
        Workload::UpdateScan,
        Workload::UpdateById,
        Workload::DeleteScan,
        Workload::DeleteById,
    ];

    fn label(self) -> &'static str {
        match self {
            Workload::UpdateScan => "update {q: {}, u: {$inc: {a: 1}}}",
            Workload::UpdateById => "update {q: {_id: 0}, u: {$inc: {a: 1}}}",
            Workload::DeleteScan => "delete {q: {}, limit: 1}",
            Workload::DeleteById => "delete {q: {_id: i}, limit: 1}",
        }
    }
}

async fn bench() -> BenchResult {
    let scale = scale();
    println!(
        "batches bench: cost per statement of one write command of N statements \
         (durable store, EBB_BENCH_SCALE={scale})"
    );
    let server = Server::start()?;
    let client = connect(server.addr, "ebb-batches-bench", None).await?;
    let db = client.database(DB);
    db.run_command(doc! { "ping": 1 }).await?;
    let sizes: Vec<usize> = SIZES.iter().map(|&n| scaled(n, scale)).collect();
    let mut results = Vec::new();
    for workload in Workload::ALL {
        println!("{}", workload.label());
        let mut per_statement = Vec::new();
        let largest = sizes.last().copied().unwrap_or(1);
        for (i, &n) in sizes.iter().enumerate() {
            let repeats = (largest / n.max(1)).clamp(1, MAX_REPEATS);
            let mut costs = Vec::with_capacity(repeats);
            for r in 0..repeats {
                let took = run_one(&db, workload, n, &format!("c{i}_{r}")).await?;
                costs.push(took.as_secs_f64() * 1e6 / to_f64(n));
            }
            costs.sort_by(f64::total_cmp);
            let us = costs.get(costs.len() / 2).copied().unwrap_or(0.0);
            let (lo, hi) = (
                costs.first().copied().unwrap_or(0.0),
                costs.last().copied().unwrap_or(0.0),
            );
            println!(
                "  N = {n:>7}: {repeats:>2} commands, median {us:>8.2} µs per statement \
                 (from {lo:.2} to {hi:.2})"
            );
            per_statement.push(us);
        }
        let ratio = match (per_statement.first(), per_statement.last()) {
            (Some(&first), Some(&last)) if first > 0.0 => last / first,
            _ => 0.0,
        };
        println!(
            "  ratio {}/{} per statement: {ratio:.2}x (goal ≤ {GOAL_RATIO}x) {}",
            sizes.last().copied().unwrap_or(0),
            sizes.first().copied().unwrap_or(0),
            verdict(ratio <= GOAL_RATIO)
        );
        results.push((workload.label(), ratio));
        db.drop().await?;
    }
    println!();
    let (small, large) = (
        sizes.first().copied().unwrap_or(0),
        sizes.last().copied().unwrap_or(0),
    );
    for (label, ratio) in results {
        println!(
            "{label}: {large}/{small} = {ratio:.2}x {}",
            verdict(ratio <= GOAL_RATIO)
        );
    }
    drop(client);
    server.stop()
}

/// Sets up collection `name` for `workload`, runs its one command of `n` statements, checks the
/// outcome, and returns how long the command took.
async fn run_one(db: &Database, workload: Workload, n: usize, name: &str) -> BenchResult<Duration> {
    let coll = db.collection::<Document>(name);
    let n_i64 = i64::try_from(n)?;
    let command = match workload {
        Workload::UpdateScan | Workload::UpdateById => {
            coll.insert_one(doc! { "_id": 0, "a": 0_i64 }).await?;
            let q = if matches!(workload, Workload::UpdateScan) {
                doc! {}
            } else {
                doc! { "_id": 0 }
            };
            let stmt = doc! { "q": q, "u": { "$inc": { "a": 1 } } };
            let updates: Vec<Bson> = (0..n).map(|_| Bson::Document(stmt.clone())).collect();
            doc! { "update": name, "updates": updates }
        }
        Workload::DeleteScan | Workload::DeleteById => {
            for chunk in (0..n_i64).collect::<Vec<_>>().chunks(10_000) {
                coll.insert_many(chunk.iter().map(|&i| doc! { "_id": i, "a": i }))
                    .await?;
            }
            let deletes: Vec<Bson> = (0..n_i64)
                .map(|i| {
                    let q = if matches!(workload, Workload::DeleteScan) {
                        doc! {}
                    } else {
                        doc! { "_id": i }
                    };
                    Bson::Document(doc! { "q": q, "limit": 1 })
                })
                .collect();
            doc! { "delete": name, "deletes": deletes }
        }
    };
    let started = Instant::now();
    let reply = db.run_command(command).await?;
    let took = started.elapsed();
    let done = match reply.get("n") {
        Some(Bson::Int32(k)) => i64::from(*k),
        other => return Err(format!("no n in the reply: {other:?} ({reply})").into()),
    };
    if done != n_i64 || reply.contains_key("writeErrors") {
        return Err(format!("{name}: expected n = {n}, got {reply}").into());
    }
    match workload {
        Workload::UpdateScan | Workload::UpdateById => {
            let doc = coll.find_one(doc! { "_id": 0 }).await?;
            let a = doc.as_ref().and_then(|d| d.get_i64("a").ok());
            if a != Some(n_i64) {
                return Err(format!("{name}: expected a = {n}, found {doc:?}").into());
            }
        }
        Workload::DeleteScan | Workload::DeleteById => {
            let left = coll.count_documents(doc! {}).await?;
            if left != 0 {
                return Err(format!("{name}: {left} documents left after the deletes").into());
            }
        }
    }
    Ok(took)
}
