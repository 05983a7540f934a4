//! What do change streams cost, and do they keep up? Issue #15, "Change streams on a durable
//! oplog", measured against baselines taken in the same run.
//!
//! One process: Ebb on durable stores in temporary directories, each started as the primary of
//! the one-member replica set `rs0` (`--replSet rs0`, [`ebb::Config::repl_set`]) with
//! [`ebb::run`] in its own 2-worker tokio runtime on its own thread, as on the 2-core target;
//! the `mongodb` driver in a second 2-worker runtime plays the clients (`directConnection`).
//! Every write uses the default write concern, which Ebb acknowledges once the write is on
//! disk. Streams are the driver's `watch()` on one collection, read as raw documents.
//!
//! 1. **Event latency against `ping`.** A writer connection inserts `{_id: i}` with
//!    `insert_one`, one at a time; a second connection has a `getMore` of a change stream on the
//!    collection waiting (`maxAwaitTimeMS` 2 s, so it is almost always waiting when the insert
//!    lands: after each sample the writer pauses [`SETTLE`] so that the stream's next `getMore`
//!    is at the server). **Event latency** is the time from sending the insert to the arrival, at the
//!    stream's client, of the `insert` event for `_id: i` (both clocks are the same monotonic
//!    clock of this process). It covers a request's trip to the server, the commit, waking the
//!    stream's `getMore`, reading the oplog entry, making the event and the reply's trip back:
//!    a round trip plus the server's work, so it is set against the `ping` round trip of the
//!    writer's connection, measured in blocks taking turns with the inserts. The insert's own
//!    round trip (to its acknowledgement, after the sync to disk) is printed beside it, and how
//!    many events arrived before their insert was acknowledged: a stream shows only durable
//!    entries, so event and acknowledgement both follow the same sync and race to the client.
//!    p50 and p99 of each; the ratios p50(event) /
//!    p50(ping) and p99(event) / p50(ping). The issue sets no figure: reported, not judged.
//! 2. **Insert throughput with the oplog against without.** A second server, the same replica
//!    set on its own store, runs with [`ebb::Config::bench_without_oplog`] (a switch only the
//!    benches set: no oplog is written, so change streams are refused there, which is checked).
//!    Two shapes, documents/s: single documents from [`WRITERS`] concurrent connections
//!    (`insert_one`), and batches of [`BATCH`] from [`BATCH_WRITERS`] connections
//!    (`insert_many`), in time-bounded slices where the two servers take turns (the order
//!    flipping every round). Goal: with the oplog ≥ 85% of without, judged on the median of the
//!    per-round ratios (robust to a disk stall hitting one slice); the ratio of the totals is
//!    printed beside it, and the CPU time per document of the process (server side, all but
//!    the client runtime's threads) and of the client runtime, which says where time goes.
//!    Both collections must end with every document inserted, and the oplog server's oplog
//!    must hold an entry for each.
//! 3. **A stream keeps up with [`FIREHOSE_RATE`] writes/s.** [`FIREHOSE_WRITERS`] connections
//!    insert batches of [`FIREHOSE_BATCH`] documents on a schedule that adds up to the target
//!    rate (a late writer catches up at once), each document carrying the time it was handed to
//!    the driver; one stream reads every event. Reported: the rate writes reached (documents
//!    acknowledged over the time to the last acknowledgement) and the rate the stream read
//!    (events over the time to the last event), and their ratio; the stream's lag as time
//!    behind (an event's arrival less its document's send time, p50/p99/max, next to the
//!    `insert_many` round trip) and as events behind (documents acknowledged less events read,
//!    sampled every [`LAG_SAMPLE`]); and how long after the last acknowledgement the last event
//!    came. Goal: the stream reads ≥ 95% of the write rate, the writes reaching ≥ 95% of the
//!    target (printed apart: a machine that cannot write that fast says nothing of streams).
//!
//! The goals are printed as PASS or MISS and never change the exit status: this is a
//! measurement, not a test. The run fails (non-zero) only if a server cannot be started or
//! answers wrongly (a missing or unexpected event, a wrong count).
//!
//! `EBB_BENCH_SCALE` (a float, default 1.0) scales every count and every slice's duration.
//! `EBB_BENCH_ONLY=latency`, `throughput` or `keepup` runs one line alone (for profiling);
//! `throughput-with` or `throughput-without` runs line 2 against one server only (a profile of
//! one side), with no ratio. `EBB_BENCH_SHAPE=singles` or `batches` runs one shape of line 2.

#[path = "common/mod.rs"]
mod common;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use bson::{RawDocumentBuf, doc, rawdoc};
use common::{
    BenchResult, Cpu, Samples, Server, median, per_second, run_bench, scale, scaled,
    scaled_duration, to_f64, verdict,
};
use mongodb::error::ErrorKind;
use mongodb::options::ClientOptions;
use mongodb::{Client, Collection};

/// The replica set's name.
const SET_NAME: &str = "rs0";
const DB: &str = "csbench";

/// Line 1: latency samples of each kind (scaled).
const LATENCY_SAMPLES: f64 = 1_000.0;
/// Line 1: samples of one kind before the other's turn.
const LATENCY_BLOCK: usize = 50;
/// Line 1: untimed samples first (connections, caches, the stream's first `getMore`).
const LATENCY_WARMUP: usize = 50;
/// Line 1: the writer's pause after each sample, so that the stream's next `getMore` waits at
/// the server before the next insert.
const SETTLE: Duration = Duration::from_millis(1);
/// Line 1: most time one line may take (scaled); it stops early, after a whole block.
const LATENCY_CAP: Duration = Duration::from_secs(20);
/// Line 1: the stream's `maxAwaitTimeMS`. After the line, the run waits this long (and a bit)
/// so that the stream's last `getMore`, left at the server when the stream is dropped, has
/// ended before the next line: it would read every new oplog entry meanwhile.
const LATENCY_AWAIT: Duration = Duration::from_secs(2);
/// Longest wait for an event before the run fails.
const EVENT_TIMEOUT: Duration = Duration::from_secs(10);

/// Line 2: concurrent `insert_one` writers.
const WRITERS: usize = 8;
/// Line 2: concurrent `insert_many` writers.
const BATCH_WRITERS: usize = 4;
/// Line 2: documents per `insert_many`.
const BATCH: usize = 100;
/// Line 2: rounds; in each, every side runs every shape for one slice. On the 2-core target
/// one round's ratio swings from 0.64 to 1.17 (a flush or a compaction lands in one side's
/// slice): with nine, the median does not hang on two bad rounds.
const ROUNDS: usize = 9;
/// Line 2: one slice (scaled).
const SLICE: Duration = Duration::from_secs(1);
/// The least a slice runs, whatever the scale.
const MIN_SLICE: Duration = Duration::from_millis(200);
/// Goal of line 2: throughput with the oplog over throughput without, at least.
const THROUGHPUT_GOAL: f64 = 0.85;
/// Per-round ratios further apart than this (largest / smallest) mean the machine was noisy.
const NOISY_SPREAD: f64 = 1.25;

/// Line 3: the write rate a stream must keep up with, documents/s.
const FIREHOSE_RATE: f64 = 20_000.0;
/// Line 3: how long the writers write (scaled).
const FIREHOSE_TIME: Duration = Duration::from_secs(5);
/// Line 3: concurrent `insert_many` writers.
const FIREHOSE_WRITERS: usize = 4;
/// Line 3: documents per `insert_many`.
const FIREHOSE_BATCH: usize = 100;
/// Line 3: how often the events behind are sampled.
const LAG_SAMPLE: Duration = Duration::from_millis(100);
/// Goal of line 3: events/s read over writes/s, at least (and writes/s over the target).
const KEEP_UP_GOAL: f64 = 0.95;

/// The size of the padding string of line 2's and 3's documents.
const PAD: usize = 200;

fn main() {
    run_bench("change_streams", bench());
}

/// One goal's line for the summary.
struct Goal {
    text: String,
    pass: bool,
}

async fn bench() -> BenchResult {
    let scale = scale();
    header(scale);
    let only = std::env::var("EBB_BENCH_ONLY").unwrap_or_default();
    let wanted = |line: &str| only.is_empty() || only == line || only.starts_with(line);
    let sides = match only.as_str() {
        "throughput-with" => [true, false],
        "throughput-without" => [false, true],
        _ => [true, true],
    };
    let logged = Server::start_with(|c| c.repl_set = Some(SET_NAME.into()))?;
    let unlogged = if wanted("throughput") {
        Some(Server::start_with(|c| {
            c.repl_set = Some(SET_NAME.into());
            c.bench_without_oplog = true;
        })?)
    } else {
        None
    };
    println!("Ebb store with the oplog: {}", logged.data_dir().display());
    if let Some(s) = &unlogged {
        println!("Ebb store without the oplog: {}", s.data_dir().display());
    }
    for server in std::iter::once(&logged).chain(unlogged.as_ref()) {
        let client = client(server.addr, "ebb-cs-bench-check", 1).await?;
        check_replica_set(&client).await?;
    }

    let mut goals = Vec::new();
    if wanted("latency") {
        latency_line(logged.addr, scale).await?;
    }
    if let Some(unlogged) = &unlogged {
        goals.extend(throughput_line(logged.addr, unlogged.addr, sides, scale).await?);
    }
    if wanted("keepup") {
        goals.extend(keep_up_line(logged.addr, scale).await?);
    }

    println!();
    println!("goals (informational, never fail the run):");
    for goal in goals {
        println!("  {}  {}", goal.text, verdict(goal.pass));
    }
    println!();
    if let Some(s) = unlogged {
        s.stop()?;
    }
    logged.stop()
}

fn header(scale: f64) {
    println!();
    println!(
        "Ebb change streams: event latency, the oplog's cost, keeping up ({} build, {} CPUs, {} \
         server / {} client runtime workers, replica set {SET_NAME}, durable store, \
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

/// A driver client for `addr` (`directConnection`), at most `pool` connections.
async fn client(addr: SocketAddr, app: &str, pool: usize) -> BenchResult<Client> {
    let mut options = ClientOptions::parse(format!(
        "mongodb://{addr}/?directConnection=true&serverSelectionTimeoutMS=10000"
    ))
    .await?;
    options.app_name = Some(app.into());
    options.max_pool_size = Some(u32::try_from(pool)?);
    Ok(Client::with_options(options)?)
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

/// An `insert` event's `documentKey._id` (an integer) and its `fullDocument`.
fn inserted(event: &RawDocumentBuf) -> BenchResult<(i64, &bson::RawDocument)> {
    let kind = event.get_str("operationType")?;
    if kind != "insert" {
        return Err(format!("an unexpected {kind} event: {event:?}").into());
    }
    let id = event.get_document("documentKey")?.get_i64("_id")?;
    Ok((id, event.get_document("fullDocument")?))
}

/// Microseconds from `epoch` to now.
fn micros_since(epoch: Instant) -> i64 {
    i64::try_from(epoch.elapsed().as_micros()).unwrap_or(i64::MAX)
}

fn sample_row(name: &str, s: &Samples) {
    println!(
        "  {name:<40} {:>9.1} {:>9.1} {:>7}",
        s.quantile_us(0.5),
        s.quantile_us(0.99),
        s.len()
    );
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

// ---------------------------------------------------------------------------------------------
// Line 1: event latency against ping
// ---------------------------------------------------------------------------------------------

async fn latency_line(addr: SocketAddr, scale: f64) -> BenchResult {
    let samples = scaled(LATENCY_SAMPLES, scale);
    println!();
    println!(
        "1. event latency: insert_one sent -> its event at a waiting getMore, against ping \
         ({samples} of each, blocks of {LATENCY_BLOCK} taking turns)"
    );
    let writer = client(addr, "ebb-cs-bench-writer", 1).await?;
    let streamer = client(addr, "ebb-cs-bench-stream", 1).await?;
    let db = writer.database(DB);
    db.create_collection("latency").await?;
    let coll = db.collection::<RawDocumentBuf>("latency");
    let mut stream = streamer
        .database(DB)
        .collection::<RawDocumentBuf>("latency")
        .watch()
        .max_await_time(LATENCY_AWAIT)
        .await?
        .with_type::<RawDocumentBuf>();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(i64, Instant)>();
    let reader = tokio::spawn(async move {
        loop {
            if let Some(event) = stream.next_if_any().await? {
                let at = Instant::now();
                let (id, _) = inserted(&event)?;
                if tx.send((id, at)).is_err() {
                    return BenchResult::Ok(());
                }
            }
        }
    });

    let mut next_id = 0_i64;
    let mut one_event = async |events: &mut Samples, inserts: &mut Samples| -> BenchResult<bool> {
        let id = next_id;
        next_id += 1;
        let sent = Instant::now();
        coll.insert_one(rawdoc! { "_id": id, "n": 1 }).await?;
        let acked = Instant::now();
        let (got, arrived) = tokio::time::timeout(EVENT_TIMEOUT, rx.recv())
            .await
            .map_err(|_| format!("no event for _id {id} within {EVENT_TIMEOUT:?}"))?
            .ok_or("the stream's reader stopped")?;
        if got != id {
            return Err(format!("the event of _id {got} came for the insert of _id {id}").into());
        }
        events.push(arrived - sent);
        inserts.push(acked - sent);
        tokio::time::sleep(SETTLE).await;
        Ok(arrived < acked)
    };
    let ping = async |pings: &mut Samples| -> BenchResult {
        let sent = Instant::now();
        db.run_command(doc! { "ping": 1 }).await?;
        pings.push(sent.elapsed());
        tokio::time::sleep(SETTLE).await;
        Ok(())
    };

    let (mut scratch_e, mut scratch_i, mut scratch_p) =
        (Samples::default(), Samples::default(), Samples::default());
    for _ in 0..LATENCY_WARMUP {
        one_event(&mut scratch_e, &mut scratch_i).await?;
        ping(&mut scratch_p).await?;
    }
    let (mut events, mut inserts, mut pings) =
        (Samples::default(), Samples::default(), Samples::default());
    let mut early = 0_usize;
    let cap = scaled_duration(LATENCY_CAP, scale, Duration::from_secs(2));
    let started = Instant::now();
    let mut block = 0_usize;
    while events.len() < samples && started.elapsed() < cap {
        let n = LATENCY_BLOCK.min(samples - events.len());
        let events_first = block.is_multiple_of(2);
        block += 1;
        if !events_first {
            for _ in 0..n {
                ping(&mut pings).await?;
            }
        }
        for _ in 0..n {
            if one_event(&mut events, &mut inserts).await? {
                early += 1;
            }
        }
        if events_first {
            for _ in 0..n {
                ping(&mut pings).await?;
            }
        }
    }
    reader.abort();
    drop(streamer);
    tokio::time::sleep(LATENCY_AWAIT + Duration::from_millis(500)).await;

    println!("  {:<40} {:>9} {:>9} {:>7}", "(us)", "p50", "p99", "n");
    sample_row("ping round trip", &pings);
    sample_row("insert_one round trip (acknowledged)", &inserts);
    sample_row("event latency (insert sent -> event)", &events);
    let ping50 = pings.quantile_us(0.5);
    let ratio = |v: f64| if ping50 > 0.0 { v / ping50 } else { 0.0 };
    println!(
        "  p50(event) / p50(ping) = {:.2}, p99(event) / p50(ping) = {:.2}; p50(event) - \
         p50(ping) = {:.1} us",
        ratio(events.quantile_us(0.5)),
        ratio(events.quantile_us(0.99)),
        events.quantile_us(0.5) - ping50,
    );
    println!(
        "  events that arrived before their insert was acknowledged: {early} of {} (both follow \
         the same sync to disk)",
        events.len()
    );
    if events.len() < samples {
        println!(
            "  warning: stopped at {} samples after {:.1}s (the cap): a slow disk",
            events.len(),
            started.elapsed().as_secs_f64()
        );
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Line 2: insert throughput with the oplog against without
// ---------------------------------------------------------------------------------------------

#[derive(Clone, Copy, PartialEq, Eq)]
enum Shape {
    Singles,
    Batches,
}

impl Shape {
    fn name(self) -> &'static str {
        match self {
            Shape::Singles => "singles",
            Shape::Batches => "batches",
        }
    }

    fn label(self) -> String {
        match self {
            Shape::Singles => format!("insert_one, {WRITERS} connections"),
            Shape::Batches => {
                format!("insert_many of {BATCH}, {BATCH_WRITERS} connections")
            }
        }
    }
}

/// One side's totals for a shape.
#[derive(Default, Clone, Copy)]
struct Tally {
    docs: usize,
    took: Duration,
    cpu: Cpu,
}

fn padded(writer: usize, k: usize) -> RawDocumentBuf {
    rawdoc! {
        "w": i64::try_from(writer).unwrap_or(0),
        "k": i64::try_from(k).unwrap_or(0),
        "pad": "x".repeat(PAD),
    }
}

/// Runs `shape` against `coll` for `time`: documents inserted, and the time until every
/// writer's last reply.
async fn slice(
    coll: &Collection<RawDocumentBuf>,
    shape: Shape,
    time: Duration,
) -> BenchResult<(usize, Duration)> {
    let started = Instant::now();
    let deadline = started + time;
    let writers = match shape {
        Shape::Singles => WRITERS,
        Shape::Batches => BATCH_WRITERS,
    };
    let mut tasks = tokio::task::JoinSet::new();
    for w in 0..writers {
        let coll = coll.clone();
        tasks.spawn(async move {
            let mut done = 0_usize;
            while Instant::now() < deadline {
                match shape {
                    Shape::Singles => {
                        coll.insert_one(padded(w, done)).await?;
                        done += 1;
                    }
                    Shape::Batches => {
                        let docs: Vec<_> = (done..done + BATCH).map(|k| padded(w, k)).collect();
                        let reply = coll.insert_many(docs).await?;
                        if reply.inserted_ids.len() != BATCH {
                            return Err(format!(
                                "insert_many of {BATCH} reported {} inserted",
                                reply.inserted_ids.len()
                            )
                            .into());
                        }
                        done += BATCH;
                    }
                }
            }
            BenchResult::Ok(done)
        });
    }
    let mut docs = 0;
    while let Some(done) = tasks.join_next().await {
        docs += done??;
    }
    Ok((docs, started.elapsed()))
}

async fn throughput_line(
    logged: SocketAddr,
    unlogged: SocketAddr,
    sides: [bool; 2],
    scale: f64,
) -> BenchResult<Vec<Goal>> {
    let time = scaled_duration(SLICE, scale, MIN_SLICE);
    println!();
    println!(
        "2. insert throughput, the same replica set with the oplog and without \
         (bench_without_oplog), slices of {:.1}s taking turns, {ROUNDS} rounds, documents of \
         ~{} bytes",
        time.as_secs_f64(),
        PAD + 40
    );
    let pool = WRITERS.max(BATCH_WRITERS);
    let clients = [
        client(logged, "ebb-cs-bench-logged", pool).await?,
        client(unlogged, "ebb-cs-bench-unlogged", pool).await?,
    ];
    // The baseline refuses change streams, as a server without an oplog must.
    match clients[1]
        .database(DB)
        .collection::<RawDocumentBuf>("probe")
        .watch()
        .await
    {
        Err(e) if matches!(&*e.kind, ErrorKind::Command(c) if c.code == 40573) => {}
        Err(e) => {
            return Err(format!("the server without an oplog refused a stream with {e}").into());
        }
        Ok(_) => return Err("the server without an oplog opened a change stream".into()),
    }

    let mut goals = Vec::new();
    let shapes = match std::env::var("EBB_BENCH_SHAPE").as_deref() {
        Ok("singles") => vec![Shape::Singles],
        Ok("batches") => vec![Shape::Batches],
        _ => vec![Shape::Singles, Shape::Batches],
    };
    for shape in shapes {
        let colls: Vec<Collection<RawDocumentBuf>> = clients
            .iter()
            .map(|c| c.database(DB).collection(shape.name()))
            .collect();
        for coll in &colls {
            coll.drop().await?;
            // Warm-up: connections open, collection made.
            slice(coll, shape, MIN_SLICE / 2).await?;
        }
        let before: Vec<u64> = {
            let mut v = Vec::new();
            for coll in &colls {
                v.push(coll.count_documents(doc! {}).await?);
            }
            v
        };
        let mut tallies = [Tally::default(); 2];
        let mut ratios = Vec::new();
        for round in 0..ROUNDS {
            let mut rates = [0.0_f64; 2];
            let order = if round.is_multiple_of(2) {
                [0, 1]
            } else {
                [1, 0]
            };
            for side in order {
                let Some(coll) = colls.get(side).filter(|_| sides[side]) else {
                    continue;
                };
                let cpu = Cpu::now();
                let (docs, took) = slice(coll, shape, time).await?;
                let used = Cpu::now().since(cpu);
                if let (Some(t), Some(r)) = (tallies.get_mut(side), rates.get_mut(side)) {
                    t.docs += docs;
                    t.took += took;
                    t.cpu.add(used);
                    *r = per_second(docs, took);
                }
            }
            if rates[0] > 0.0 && rates[1] > 0.0 {
                ratios.push(rates[0] / rates[1]);
            }
        }
        for ((coll, tally), was) in colls.iter().zip(&tallies).zip(&before) {
            let count = coll.count_documents(doc! {}).await?;
            let expected = was + u64::try_from(tally.docs)?;
            if count != expected {
                return Err(format!(
                    "{}: {count} documents after inserting {expected}",
                    shape.name()
                )
                .into());
            }
        }
        let logged_entries = clients[0]
            .database("local")
            .collection::<RawDocumentBuf>("oplog.rs")
            .count_documents(doc! { "op": "i", "ns": format!("{DB}.{}", shape.name()) })
            .await?;
        let logged_docs = colls[0].count_documents(doc! {}).await?;
        if logged_entries < logged_docs {
            return Err(format!(
                "{}: {logged_entries} oplog entries for {logged_docs} documents",
                shape.name()
            )
            .into());
        }

        println!("  {}:", shape.label());
        println!(
            "    {:<22} {:>10} {:>8} {:>14} {:>14}",
            "", "docs/s", "docs", "server us/doc", "client us/doc"
        );
        for (name, t) in [("with the oplog", tallies[0]), ("without", tallies[1])] {
            let (server, client) = t.cpu.per_op_us(t.docs);
            println!(
                "    {name:<22} {:>10.0} {:>8} {:>14.1} {:>14.1}",
                per_second(t.docs, t.took),
                t.docs,
                server,
                client
            );
        }
        if ratios.is_empty() {
            continue;
        }
        let ratio = median(&ratios);
        let totals = per_second(tallies[0].docs, tallies[0].took)
            / per_second(tallies[1].docs, tallies[1].took).max(1e-9);
        println!(
            "    with / without: median of rounds {ratio:.3} (rounds: {}), totals {totals:.3}",
            ratios
                .iter()
                .map(|r| format!("{r:.3}"))
                .collect::<Vec<_>>()
                .join(" ")
        );
        spread_warning(shape.name(), &ratios);
        goals.push(Goal {
            text: format!(
                "inserts with the oplog >= {:.0}% of without, {}: {:.1}%",
                THROUGHPUT_GOAL * 100.0,
                shape.label(),
                ratio * 100.0
            ),
            pass: ratio >= THROUGHPUT_GOAL,
        });
    }
    Ok(goals)
}

// ---------------------------------------------------------------------------------------------
// Line 3: a stream keeps up with 20k writes/s
// ---------------------------------------------------------------------------------------------

async fn keep_up_line(addr: SocketAddr, scale: f64) -> BenchResult<Vec<Goal>> {
    let time = scaled_duration(FIREHOSE_TIME, scale, MIN_SLICE);
    let batches = scaled(
        FIREHOSE_RATE * time.as_secs_f64() / to_f64(FIREHOSE_BATCH),
        1.0,
    );
    let total = batches * FIREHOSE_BATCH;
    let period = Duration::from_secs_f64(to_f64(FIREHOSE_BATCH) / FIREHOSE_RATE);
    println!();
    println!(
        "3. one stream against {FIREHOSE_RATE:.0} writes/s: {FIREHOSE_WRITERS} connections, \
         insert_many of {FIREHOSE_BATCH} on a schedule, {total} documents over {:.1}s",
        time.as_secs_f64()
    );
    let writer = client(addr, "ebb-cs-bench-firehose", FIREHOSE_WRITERS).await?;
    let streamer = client(addr, "ebb-cs-bench-follower", 1).await?;
    let db = writer.database(DB);
    db.create_collection("firehose").await?;
    let coll = db.collection::<RawDocumentBuf>("firehose");
    // Connections open before the clock starts.
    for _ in 0..FIREHOSE_WRITERS {
        db.run_command(doc! { "ping": 1 }).await?;
    }
    let mut stream = streamer
        .database(DB)
        .collection::<RawDocumentBuf>("firehose")
        .watch()
        .max_await_time(Duration::from_secs(1))
        .await?
        .with_type::<RawDocumentBuf>();

    let epoch = Instant::now();
    let acked = Arc::new(AtomicUsize::new(0));
    let read = Arc::new(AtomicUsize::new(0));
    let reader = {
        let read = Arc::clone(&read);
        tokio::spawn(async move {
            let mut behind = Samples::default();
            let mut seen = vec![false; total];
            let mut last = Duration::ZERO;
            let mut count = 0;
            while count < total {
                let event = tokio::time::timeout(EVENT_TIMEOUT, stream.next_if_any())
                    .await
                    .map_err(|_| format!("no event for {EVENT_TIMEOUT:?} after {count}"))??;
                let Some(event) = event else { continue };
                let arrived = micros_since(epoch);
                let (id, doc) = inserted(&event)?;
                let sent = doc.get_i64("at")?;
                let slot = usize::try_from(id)
                    .ok()
                    .and_then(|i| seen.get_mut(i))
                    .ok_or_else(|| format!("an event for an unknown _id {id}"))?;
                if std::mem::replace(slot, true) {
                    return Err(format!("a second event for _id {id}").into());
                }
                behind.push(Duration::from_micros(
                    u64::try_from(arrived.saturating_sub(sent)).unwrap_or(0),
                ));
                last = epoch.elapsed();
                count += 1;
                read.store(count, Ordering::Relaxed);
            }
            BenchResult::Ok((behind, last))
        })
    };
    let sampler = {
        let (acked, read) = (Arc::clone(&acked), Arc::clone(&read));
        tokio::spawn(async move {
            let mut lags = Vec::new();
            let mut tick = tokio::time::interval(LAG_SAMPLE);
            loop {
                tick.tick().await;
                let r = read.load(Ordering::Relaxed);
                let a = acked.load(Ordering::Relaxed);
                lags.push(a.saturating_sub(r));
                if r >= total {
                    return lags;
                }
            }
        })
    };

    let mut writers = tokio::task::JoinSet::new();
    for w in 0..FIREHOSE_WRITERS {
        let (coll, acked) = (coll.clone(), Arc::clone(&acked));
        writers.spawn(async move {
            let mut round_trips = Samples::default();
            let mut last_ack = Duration::ZERO;
            for b in (w..batches).step_by(FIREHOSE_WRITERS) {
                let due = epoch + period.mul_f64(to_f64(b));
                tokio::time::sleep_until(due.into()).await;
                let at = micros_since(epoch);
                let first = b * FIREHOSE_BATCH;
                let docs: Vec<_> = (first..first + FIREHOSE_BATCH)
                    .map(|id| {
                        rawdoc! {
                            "_id": i64::try_from(id).unwrap_or(i64::MAX),
                            "at": at,
                            "pad": "x".repeat(PAD),
                        }
                    })
                    .collect();
                let sent = Instant::now();
                let reply = coll.insert_many(docs).await?;
                round_trips.push(sent.elapsed());
                if reply.inserted_ids.len() != FIREHOSE_BATCH {
                    return Err(format!(
                        "insert_many of {FIREHOSE_BATCH} reported {} inserted",
                        reply.inserted_ids.len()
                    )
                    .into());
                }
                acked.fetch_add(FIREHOSE_BATCH, Ordering::Relaxed);
                last_ack = last_ack.max(epoch.elapsed());
            }
            BenchResult::Ok((round_trips, last_ack))
        });
    }
    let mut round_trips = Samples::default();
    let mut last_ack = Duration::ZERO;
    while let Some(done) = writers.join_next().await {
        let (trips, last) = done??;
        round_trips.0.extend(trips.0);
        last_ack = last_ack.max(last);
    }
    let (behind, last_event) = reader.await??;
    let lags = sampler.await?;

    let write_rate = per_second(total, last_ack);
    let read_rate = per_second(total, last_event);
    let ratio = read_rate / write_rate.max(1e-9);
    println!(
        "  writes: {write_rate:.0} documents/s ({:.1}% of the target), the last acknowledged \
         at {:.2}s",
        write_rate / FIREHOSE_RATE * 100.0,
        last_ack.as_secs_f64()
    );
    println!(
        "  stream: {read_rate:.0} events/s, the last at {:.2}s ({:.1} ms after the last \
         acknowledgement); read / write rate = {ratio:.3}",
        last_event.as_secs_f64(),
        (last_event.as_secs_f64() - last_ack.as_secs_f64()) * 1e3
    );
    println!("  {:<40} {:>9} {:>9} {:>7}", "(us)", "p50", "p99", "n");
    sample_row("insert_many round trip", &round_trips);
    sample_row("time behind (document sent -> event)", &behind);
    println!(
        "  time behind, the most: {:.1} ms",
        behind.quantile_us(1.0) / 1e3
    );
    let lag_mean = to_f64(lags.iter().sum::<usize>()) / to_f64(lags.len().max(1));
    println!(
        "  events behind (acknowledged - read, every {} ms): mean {lag_mean:.0}, most {}",
        LAG_SAMPLE.as_millis(),
        lags.iter().max().copied().unwrap_or(0)
    );
    Ok(vec![
        Goal {
            text: format!(
                "the writes reach >= {:.0}% of {FIREHOSE_RATE:.0}/s: {write_rate:.0}/s",
                KEEP_UP_GOAL * 100.0
            ),
            pass: write_rate >= KEEP_UP_GOAL * FIREHOSE_RATE,
        },
        Goal {
            text: format!(
                "one stream reads >= {:.0}% of the write rate: {:.1}%",
                KEEP_UP_GOAL * 100.0,
                ratio * 100.0
            ),
            pass: ratio >= KEEP_UP_GOAL,
        },
    ])
}
