//! What does a collection scan cost per document when the collection is large, against the same
//! query over a collection small enough to be trivially cached? Issue #17: "A scan bench through
//! the wire (100k documents of ~1 KB, a filter matching 1%) reporting its time against the same
//! query served from a collection small enough to be trivially cached, per document; and the
//! numbers of the profile before and after."
//!
//! One process: Ebb on a durable store in a temporary directory, started with [`ebb::run`] in its
//! own 2-worker tokio runtime on its own thread (`common::Server`), as on the 2-core target; the
//! `mongodb` driver in a second 2-worker runtime plays the client, on one connection, one query
//! at a time. Three collections, none with an index but `_id`'s:
//!
//! * `big`: [`BIG_DOCS`] documents (about 100 MB);
//! * `small`: [`SMALL_DOCS`] documents (about 1 MB: whatever holds it, memtable or block cache,
//!   holds it whole after one read);
//! * `empty`: no document, created explicitly. A query on it is the fixed cost of a query (the
//!   round trip, the driver, parsing, compiling the filter, opening a snapshot, the reply), which
//!   the rows "net" take off the others' time before dividing by the documents scanned.
//!
//! Every document is exactly [`DOC_SIZE`] BSON bytes, the same shape in both collections:
//! `_id` (0..N), `name`, `group`, `k`, `score`, `active`, `created`, `tags` (3 of 8 words),
//! `address` (`{city, zip}`) and a `payload` of pseudo-random letters, all derived from `_id` by
//! splitmix64, so every run loads the same bytes. `k` is a permutation of 0..N (Fisher-Yates
//! over a seeded xorshift64), so the query's filter `{k: {$lt: N/100}}` matches exactly 1% of
//! each collection, scattered over it; `k` is the fourth field, after three the filter steps
//! over. Each query is `find(filter)` with no option (first batch of 101, then `getMore`s),
//! its cursor drained, every returned document read (its `_id` and `k`); the clock stops at
//! the end of the cursor. Then the answer is checked against the generator: exactly the
//! documents with `k < N/100` (count and sum of `_id`s), or the run fails.
//!
//! The measure, in each of two states of the store:
//!
//! 1. **As loaded**: right after the inserts, part of `big` still in memtables, part already
//!    flushed to tables (`serverStatus.wiredTiger.cache` is printed: block cache in use, bytes
//!    in memtables, blocks read into the cache).
//! 2. **After `compact`** on `big`, which rotates every memtable into tables and compacts them
//!    (the keyspaces are shared: `small` is in tables too): what a long-running server reads.
//!
//! In each state, the first scan of `big` (cold: right after the load, or after the
//! compaction wrote new tables) is timed and printed apart, as is the first of `small`; then a
//! warm-up, then [`ROUNDS`] rounds, in each of which the three collections take turns (the
//! order rotating every round, so that machine noise hits all alike): [`BIG_PER_ROUND`] queries
//! on `big`, as many on `small` as scan the same number of documents, and [`EMPTY_PER_ROUND`] on
//! `empty`. Per round and collection, the median time per query, and from it the time per
//! document scanned (ns/doc); over the rounds, the medians of those, documents scanned per
//! second, and the ratio big/small of the time per document (median of the per-round ratios),
//! plain and net of the fixed cost. A ratio of 1.0 means `big` scans as fast per document as a
//! collection trivially cached. Beside them, the CPU time per document scanned of the server
//! (the process's, less the client runtime's threads') and of the client, over all rounds
//! (`/proc` ticks of 10 ms): other processes' load moves it less than elapsed time. The issue
//! sets no figure for it: it is printed as information, with no PASS or MISS, and never
//! changes the exit status: this is a measurement, not a test.
//! The run fails (non-zero) only if the server cannot be started or answers wrongly.
//!
//! `EBB_BENCH_SCALE` (a float, default 1.0) scales both collections' sizes (at least 1,000 and
//! 100 documents) and the profiling window. `EBB_BENCH_ONLY=big` or `small` (for profiling)
//! loads the collections, runs the cold scans and a warm-up, then only queries on that one
//! collection for [`PROFILE_WINDOW`], after printing a line that says so (its process id in
//! it); `big-compacted` or `small-compacted` does the same after the `compact`.

#[path = "common/mod.rs"]
mod common;

use std::time::{Duration, Instant};

use bson::{Document, RawDocumentBuf, doc, rawdoc};
use common::{
    BenchResult, Cpu, Server, XorShift, connect, median, run_bench, scale, scaled, to_f64,
};
use mongodb::{Collection, Database};

/// BSON size of every document.
const DOC_SIZE: usize = 1_024;
/// Documents in `big` (scaled, at least 1,000).
const BIG_DOCS: f64 = 100_000.0;
/// Documents in `small` (scaled, at least 100).
const SMALL_DOCS: f64 = 1_000.0;
/// The filter matches one document in this many.
const ONE_IN: usize = 100;
/// Documents per `insert_many`.
const BATCH: usize = 1_000;
/// Interleaved rounds per state of the store.
const ROUNDS: usize = 9;
/// Queries on `big` per round; `small` gets as many as scan the same number of documents.
const BIG_PER_ROUND: usize = 4;
/// Queries on `empty` per round.
const EMPTY_PER_ROUND: usize = 50;
/// How long `EBB_BENCH_ONLY` repeats its queries (scaled, at least 5 s).
const PROFILE_WINDOW: Duration = Duration::from_secs(20);
/// Per-round ratios further apart than this (largest / smallest) mean the machine was noisy.
const NOISY_SPREAD: f64 = 1.25;
const DB: &str = "scanbench";

fn main() {
    run_bench("scan", bench());
}

/// The collections queried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    Big,
    Small,
    Empty,
}

impl Side {
    const ALL: [Side; 3] = [Side::Big, Side::Small, Side::Empty];

    fn name(self) -> &'static str {
        match self {
            Side::Big => "big",
            Side::Small => "small",
            Side::Empty => "empty",
        }
    }

    fn slot(self) -> usize {
        match self {
            Side::Big => 0,
            Side::Small => 1,
            Side::Empty => 2,
        }
    }
}

/// A collection, its size and what the query must answer there.
struct Target {
    coll: Collection<RawDocumentBuf>,
    /// Documents it holds (each scanned by every query).
    docs: usize,
    /// The filter's bound: `{k: {$lt: threshold}}`.
    threshold: i64,
    /// How many documents match, and the sum of their `_id`s.
    matches: usize,
    id_sum: i64,
}

impl Target {
    fn filter(&self) -> Document {
        doc! { "k": { "$lt": self.threshold } }
    }
}

/// One round's median time per query on each side, in seconds.
type Round = [f64; 3];

async fn bench() -> BenchResult {
    let scale = scale();
    let big_docs = scaled(BIG_DOCS, scale).max(1_000);
    let small_docs = scaled(SMALL_DOCS, scale).max(100);
    let only = std::env::var("EBB_BENCH_ONLY").unwrap_or_default();
    let profile = match only.as_str() {
        "" => None,
        "big" => Some((Side::Big, false)),
        "small" => Some((Side::Small, false)),
        "big-compacted" => Some((Side::Big, true)),
        "small-compacted" => Some((Side::Small, true)),
        other => {
            return Err(format!(
                "EBB_BENCH_ONLY={other:?}: expected big, small, big-compacted or small-compacted"
            )
            .into());
        }
    };
    println!(
        "scan bench: find({{k: {{$lt: N/{ONE_IN}}}}}) drained, over {big_docs} documents of \
         {DOC_SIZE} B against {small_docs}, per document scanned ({} build, durable store, \
         EBB_BENCH_SCALE={scale})",
        if cfg!(debug_assertions) {
            "DEBUG"
        } else {
            "release"
        },
    );
    common::print_load_average();

    let server = Server::start()?;
    let client = connect(server.addr, "ebb-scan-bench", Some(1)).await?;
    let db = client.database(DB);
    db.run_command(doc! { "ping": 1 }).await?;
    println!("store: {}", server.data_dir().display());

    let big = load(&db, "big", big_docs, 0x5eed_0000_0000_0b16).await?;
    let small = load(&db, "small", small_docs, 0x5eed_0000_0005_3a11).await?;
    db.create_collection("empty").await?;
    let empty = Target {
        coll: db.collection("empty"),
        docs: 0,
        threshold: i64::try_from(small_docs / ONE_IN)?,
        matches: 0,
        id_sum: 0,
    };
    let targets = [&big, &small, &empty];

    let mut summaries = Vec::new();
    for compacted in [false, true] {
        if compacted {
            let t = Instant::now();
            let reply = db.run_command(doc! { "compact": "big" }).await?;
            if !common::ok(&reply) {
                return Err(format!("compact answered {reply}").into());
            }
            println!();
            println!(
                "compact {{compact: \"big\"}}: {:.2} s, {} bytes freed",
                t.elapsed().as_secs_f64(),
                common::integer(&reply, "bytesFreed").unwrap_or(-1)
            );
        }
        let state = if compacted {
            "2. after compact (everything in tables)"
        } else {
            "1. as loaded"
        };
        println!();
        println!("{state}");
        cache_line(&client, "  before the first scans:").await?;
        cold_scans(&big, &small).await?;
        cache_line(&client, "  after them:           ").await?;
        warm_up(&targets).await?;
        match profile {
            Some((side, when)) if when == compacted => {
                let target = targets[side.slot()];
                return profile_window(target, side, scale).await;
            }
            Some(_) => continue,
            None => {}
        }
        summaries.push((state, measure(&targets).await?));
        cache_line(&client, "  after the rounds:     ").await?;
    }

    println!();
    println!("per document scanned, big over small (information: the issue sets no goal):");
    for (state, summary) in &summaries {
        println!(
            "  {state}: {:.3}x ({:.1} vs {:.1} ns/doc), net of the fixed cost {:.3}x",
            summary.ratio, summary.per_doc[0], summary.per_doc[1], summary.net_ratio
        );
        let (lo, hi) = min_max(&summary.round_ratios);
        if lo > 0.0 && hi / lo > NOISY_SPREAD {
            println!(
                "  warning: its rounds disagree (ratios {lo:.3}..{hi:.3}): the machine was \
                 noisy; rerun it quiet"
            );
        }
    }
    drop(db);
    drop(client);
    server.stop()
}

// ---------------------------------------------------------------------------------------------
// Documents
// ---------------------------------------------------------------------------------------------

const WORDS: [&str; 8] = [
    "alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel",
];
const CITIES: [&str; 6] = ["Lyon", "Porto", "Gdansk", "Turku", "Graz", "Ghent"];

/// Document `id` of a collection, with its `k`, exactly [`DOC_SIZE`] bytes.
fn make_doc(id: usize, k: i64) -> RawDocumentBuf {
    let h = splitmix(u64::try_from(id).unwrap_or(0));
    let pick = |shift: u32, n: usize| usize::try_from(h >> shift).unwrap_or(0) % n;
    let word = |shift: u32| WORDS.get(pick(shift, WORDS.len())).copied().unwrap_or("");
    let mut doc = rawdoc! {
        "_id": i64::try_from(id).unwrap_or(0),
        "name": format!("customer-{id:07}"),
        "group": i32::try_from(h % 50).unwrap_or(0),
        "k": k,
        "score": to_f64(usize::try_from(h % 100_000).unwrap_or(0)) / 1_000.0,
        "active": h & 1 == 0,
        "created": bson::DateTime::from_millis(
            1_700_000_000_000 + i64::try_from(h % 10_000_000_000).unwrap_or(0)
        ),
        "tags": [word(8), word(16), word(24)],
        "address": {
            "city": CITIES.get(pick(32, CITIES.len())).copied().unwrap_or(""),
            "zip": i32::try_from((h >> 40) % 100_000).unwrap_or(0),
        },
    };
    // An appended string element costs its type byte, "payload\0", a length and a final NUL.
    let overhead = 1 + "payload".len() + 1 + 4 + 1;
    let fill = DOC_SIZE.saturating_sub(doc.as_bytes().len() + overhead);
    let mut rng = XorShift(h | 1);
    let mut payload = String::with_capacity(fill);
    while payload.len() < fill {
        let mut x = rng.next_u64();
        for _ in 0..8.min(fill - payload.len()) {
            payload.push(char::from(b'a' + u8::try_from(x % 26).unwrap_or(0)));
            x /= 26;
        }
    }
    doc.append(bson::raw::cstr!("payload"), payload);
    doc
}

/// splitmix64's output function: a bijection on `u64` that scatters consecutive inputs.
fn splitmix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A deterministic permutation of `0..n` (Fisher-Yates over [`XorShift`] seeded with `seed`).
fn permutation(n: usize, seed: u64) -> Vec<i64> {
    let mut out: Vec<i64> = (0..n).map(|i| i64::try_from(i).unwrap_or(0)).collect();
    let mut rng = XorShift(seed | 1);
    for i in (1..n).rev() {
        let j = usize::try_from(rng.below(u64::try_from(i + 1).unwrap_or(1))).unwrap_or(0);
        out.swap(i, j);
    }
    out
}

/// Loads collection `name` with `n` documents, `k` a permutation of `0..n` from `seed`; returns
/// it with what the query must answer there, as the generator says.
async fn load(db: &Database, name: &str, n: usize, seed: u64) -> BenchResult<Target> {
    let ks = permutation(n, seed);
    let threshold = i64::try_from(n / ONE_IN)?;
    let (mut matches, mut id_sum) = (0, 0_i64);
    for (id, &k) in ks.iter().enumerate() {
        if k < threshold {
            matches += 1;
            id_sum += i64::try_from(id)?;
        }
    }
    let coll = db.collection::<RawDocumentBuf>(name);
    let took = common::insert_batches(&coll, n, BATCH, |i| {
        make_doc(i, ks.get(i).copied().unwrap_or(0))
    })
    .await?;
    let counted = coll.count_documents(doc! {}).await?;
    if counted != u64::try_from(n)? {
        return Err(format!("{name} holds {counted} documents after loading {n}").into());
    }
    println!(
        "loaded {name}: {n} documents ({:.1} MB) in {:.2} s ({:.0} docs/s); the filter \
         {{k: {{$lt: {threshold}}}}} matches {matches}",
        to_f64(n * DOC_SIZE) / 1e6,
        took.as_secs_f64(),
        common::per_second(n, took)
    );
    Ok(Target {
        coll,
        docs: n,
        threshold,
        matches,
        id_sum,
    })
}

// ---------------------------------------------------------------------------------------------
// Queries
// ---------------------------------------------------------------------------------------------

/// The query on `target`, drained, every document read; checks the answer.
async fn query(target: &Target) -> BenchResult<Duration> {
    let start = Instant::now();
    let mut cursor = target.coll.find(target.filter()).await?;
    let (mut count, mut id_sum, mut wrong) = (0_usize, 0_i64, None);
    while cursor.advance().await? {
        let doc = cursor.current();
        let (id, k) = (doc.get_i64("_id")?, doc.get_i64("k")?);
        if k >= target.threshold && wrong.is_none() {
            wrong = Some(id);
        }
        count += 1;
        id_sum += id;
    }
    let took = start.elapsed();
    if let Some(id) = wrong {
        return Err(format!(
            "{:?}: _id {id} returned, its k is not below {}",
            target.coll.name(),
            target.threshold
        )
        .into());
    }
    if count != target.matches || id_sum != target.id_sum {
        return Err(format!(
            "{:?}: {count} documents returned (sum of _ids {id_sum}), {} expected (sum {})",
            target.coll.name(),
            target.matches,
            target.id_sum
        )
        .into());
    }
    Ok(took)
}

/// `n` queries on `target`, the time of each in seconds.
async fn queries(target: &Target, n: usize) -> BenchResult<Vec<f64>> {
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        out.push(query(target).await?.as_secs_f64());
    }
    Ok(out)
}

/// Queries on `small` that scan as many documents as `big_queries` on `big`.
fn small_queries(targets: &[&Target; 3], big_queries: usize) -> usize {
    let (big, small) = (targets[0].docs, targets[1].docs.max(1));
    (big * big_queries / small).max(1)
}

/// The first query on `big` and on `small` in this state of the store.
async fn cold_scans(big: &Target, small: &Target) -> BenchResult {
    let b = query(big).await?;
    let s = query(small).await?;
    println!(
        "  first scan of big (cold): {:.1} ms, {:.1} ns/doc; first of small: {:.2} ms, {:.1} \
         ns/doc",
        b.as_secs_f64() * 1e3,
        ns_per_doc(b.as_secs_f64(), big.docs),
        s.as_secs_f64() * 1e3,
        ns_per_doc(s.as_secs_f64(), small.docs),
    );
    Ok(())
}

async fn warm_up(targets: &[&Target; 3]) -> BenchResult {
    queries(targets[0], 1).await?;
    queries(targets[1], small_queries(targets, 1)).await?;
    queries(targets[2], EMPTY_PER_ROUND / 2).await?;
    Ok(())
}

/// What the rounds of one state of the store measured.
struct Summary {
    /// Median over the rounds of each side's ns per document scanned (big, small).
    per_doc: [f64; 2],
    /// big/small per document: median of the rounds' ratios, and of their net ratios.
    ratio: f64,
    net_ratio: f64,
    round_ratios: Vec<f64>,
}

async fn measure(targets: &[&Target; 3]) -> BenchResult<Summary> {
    let counts = [
        BIG_PER_ROUND,
        small_queries(targets, BIG_PER_ROUND),
        EMPTY_PER_ROUND,
    ];
    println!(
        "  {ROUNDS} rounds, in each {} queries on big, {} on small, {} on empty, the three \
         taking turns (order rotating); per round, the median query:",
        counts[0], counts[1], counts[2]
    );
    println!(
        "  {:<6} {:>12} {:>10} {:>12} {:>10} {:>12} {:>9} {:>9}",
        "round", "big ms/q", "ns/doc", "small ms/q", "ns/doc", "empty us/q", "ratio", "net"
    );
    let mut rounds: Vec<Round> = Vec::with_capacity(ROUNDS);
    let mut cpu = [Cpu::default(); 3];
    for round in 0..ROUNDS {
        let mut this: Round = [0.0; 3];
        for i in 0..Side::ALL.len() {
            let side = Side::ALL[(round + i) % Side::ALL.len()];
            let before = Cpu::now();
            let times = queries(targets[side.slot()], counts[side.slot()]).await?;
            cpu[side.slot()].add(Cpu::now().since(before));
            this[side.slot()] = median(&times);
        }
        let (big, small) = per_doc(&this, targets, false);
        let (net_big, net_small) = per_doc(&this, targets, true);
        println!(
            "  {:<6} {:>12.2} {:>10.1} {:>12.3} {:>10.1} {:>12.1} {:>8.3}x {:>8.3}x",
            round + 1,
            this[0] * 1e3,
            big,
            this[1] * 1e3,
            small,
            this[2] * 1e6,
            big / small.max(1e-9),
            net_big / net_small.max(1e-9),
        );
        rounds.push(this);
    }
    let column = |f: &dyn Fn(&Round) -> f64| median(&rounds.iter().map(f).collect::<Vec<_>>());
    let round_ratios: Vec<f64> = rounds
        .iter()
        .map(|r| {
            let (b, s) = per_doc(r, targets, false);
            b / s.max(1e-9)
        })
        .collect();
    let net_ratios: Vec<f64> = rounds
        .iter()
        .map(|r| {
            let (b, s) = per_doc(r, targets, true);
            b / s.max(1e-9)
        })
        .collect();
    let per_doc_of = |slot: usize, net: bool| {
        column(&|r: &Round| {
            let (b, s) = per_doc(r, targets, net);
            if slot == 0 { b } else { s }
        })
    };
    let summary = Summary {
        per_doc: [per_doc_of(0, false), per_doc_of(1, false)],
        ratio: median(&round_ratios),
        net_ratio: median(&net_ratios),
        round_ratios,
    };
    println!("  medians over the rounds:");
    for side in [Side::Big, Side::Small] {
        let slot = side.slot();
        let (doc_ns, net_ns) = (per_doc_of(slot, false), per_doc_of(slot, true));
        println!(
            "    {:<5} {:>9.3} ms/query, {:>6.1} ns/doc scanned ({:>5.2} M docs/s; net of the \
             fixed cost {:>6.1} ns/doc, {:>5.2} M docs/s), {} documents of {} returned",
            side.name(),
            column(&|r: &Round| r[slot]) * 1e3,
            doc_ns,
            1e3 / doc_ns.max(1e-9),
            net_ns,
            1e3 / net_ns.max(1e-9),
            targets[slot].matches,
            targets[slot].docs,
        );
    }
    println!(
        "    empty {:>9.1} us/query (the fixed cost of a query)",
        column(&|r: &Round| r[2]) * 1e6
    );
    // CPU time, all rounds together: what other processes' load moves less than elapsed time.
    let cpu_per_doc = |side: Side| {
        let queries = counts[side.slot()] * ROUNDS;
        let (server_us, client_us) = cpu[side.slot()].per_op_us(queries);
        let docs = to_f64(targets[side.slot()].docs.max(1));
        (server_us * 1e3 / docs, client_us * 1e3 / docs)
    };
    let (big_server, big_client) = cpu_per_doc(Side::Big);
    let (small_server, small_client) = cpu_per_doc(Side::Small);
    println!(
        "    CPU time per document scanned, all rounds (100 Hz ticks): server big {big_server:.1} \
         ns, small {small_server:.1} ns ({:.3}x); client big {big_client:.1} ns, small \
         {small_client:.1} ns",
        big_server / small_server.max(1e-9)
    );
    let (lo, hi) = min_max(&summary.round_ratios);
    println!(
        "    big/small per document: {:.3}x (rounds {lo:.3}..{hi:.3}), net of the fixed cost \
         {:.3}x",
        summary.ratio, summary.net_ratio
    );
    Ok(summary)
}

/// ns per document scanned on `big` and `small` in one round, `net` of `empty`'s time if asked.
fn per_doc(round: &Round, targets: &[&Target; 3], net: bool) -> (f64, f64) {
    let fixed = if net { round[2] } else { 0.0 };
    (
        ns_per_doc(round[0] - fixed, targets[0].docs),
        ns_per_doc(round[1] - fixed, targets[1].docs),
    )
}

fn ns_per_doc(seconds: f64, docs: usize) -> f64 {
    seconds * 1e9 / to_f64(docs.max(1))
}

/// `EBB_BENCH_ONLY`: queries on one side only, for [`PROFILE_WINDOW`] (scaled).
async fn profile_window(target: &Target, side: Side, scale: f64) -> BenchResult {
    let window = common::scaled_duration(PROFILE_WINDOW, scale, Duration::from_secs(5));
    println!(
        "profiling window: queries on {} only for {:.0} s (pid {})",
        side.name(),
        window.as_secs_f64(),
        std::process::id()
    );
    let start = Instant::now();
    let mut times = Vec::new();
    while start.elapsed() < window {
        times.push(query(target).await?.as_secs_f64());
    }
    let per_query = median(&times);
    println!(
        "profiling window over: {} queries, median {:.3} ms/query, {:.1} ns/doc scanned",
        times.len(),
        per_query * 1e3,
        ns_per_doc(per_query, target.docs)
    );
    Ok(())
}

/// One line of `serverStatus.wiredTiger.cache`.
async fn cache_line(client: &mongodb::Client, label: &str) -> BenchResult {
    let status = client
        .database("admin")
        .run_command(doc! { "serverStatus": 1 })
        .await?;
    let cache = status.get_document("wiredTiger")?.get_document("cache")?;
    let mb = |field: &str| {
        common::integer(cache, field).map(|v| to_f64(usize::try_from(v).unwrap_or(0)) / 1e6)
    };
    println!(
        "{label} block cache {:.1} MB used of {:.0} MB, {:.1} MB in memtables, {} blocks read \
         into the cache so far",
        mb("bytes currently in the cache")?,
        mb("maximum bytes configured")?,
        mb("tracked dirty bytes in the cache")?,
        common::integer(cache, "pages read into cache")?,
    );
    Ok(())
}

fn min_max(values: &[f64]) -> (f64, f64) {
    if values.is_empty() {
        return (0.0, 0.0);
    }
    values
        .iter()
        .fold((f64::MAX, f64::MIN), |(lo, hi), &v| (lo.min(v), hi.max(v)))
}
