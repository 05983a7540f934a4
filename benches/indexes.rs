//! What do secondary indexes buy and cost, at a million documents?
//!
//! One process: Ebb on a durable store in a temporary directory, in its own 2-worker runtime on
//! its own thread; the `mongodb` driver in a second 2-worker runtime plays the client. Every
//! comparison is between two things measured in the same run, taking turns, so that machine
//! noise hits both alike.
//!
//! 1. **Insert throughput with 0, 1 and 3 secondary indexes.** Three collections: none, `{k: 1}`,
//!    and `{k: 1}` + `{g: 1, s: -1}` + `{tags: 1}` (multikey). Batches of 1,000 documents of
//!    about 200 BSON bytes (`insert_many`, acknowledged once synced) go to each in turn, in
//!    blocks, the order rotating each round. Docs/s of each, and each over the no-index rate.
//! 2. **Loading and building at 1M.** 1,000,000 documents into a fourth collection with no
//!    secondary index, then `createIndexes` of `{k: 1}` and `{g: 1}` over them (build rate).
//! 3. **Indexed lookup vs `_id` lookup.** `find_one({k: v})` (unique values, scattered against
//!    `_id` order) and `find_one({_id: i})` for random existing documents, sequential on one
//!    connection, in alternating blocks: p50/p99 of each and p50(k) / p50(`_id`).
//! 4. **Indexed query vs collection scan.** The same queries with the index and hinted
//!    `{$natural: 1}` (a collection scan): equality on `k` (one document) and a range on `g`
//!    (0.2% of the collection), alternating; median latency of each and the speed-up. The
//!    results must be identical, and `explain` must show the index in the plan, or the run
//!    fails.
//!
//! This is a measurement, not a test: there are no goals in the issue for these numbers, so
//! nothing here is PASS or MISS. The run fails (non-zero) only if the server cannot be started
//! or answers wrongly.
//!
//! `EBB_BENCH_SCALE` (a float, default 1.0) scales every document count and repetition.
//! `EBB_BENCH_ONLY=lookups` runs phases 2 and 3 alone, with five times the lookups;
//! `EBB_BENCH_ONLY=inserts` runs phase 1 alone (both for profiling).

#[path = "common/mod.rs"]
mod common;

use std::time::{Duration, Instant};

use bson::{Document, RawDocumentBuf, doc, rawdoc};
use common::{
    BenchResult, Samples, Server, XorShift, connect, median, per_second, run_bench, scale, scaled,
};
use mongodb::{Collection, Database, IndexModel};

/// BSON size of every document, about.
const DOC_SIZE: usize = 200;
/// Documents per `insert_many`.
const BATCH: usize = 1_000;
/// Documents per collection in the insert phase (scaled).
const INSERT_DOCS: f64 = 60_000.0;
/// Batches sent to one collection before the next takes its turn.
const INSERT_BLOCK: usize = 2;
/// Documents in the large collection (scaled).
const BIG_DOCS: f64 = 1_000_000.0;
/// Distinct `g` values (each held by `BIG_DOCS / G_VALUES` documents).
const G_VALUES: i64 = 1_000;
/// Lookups of each kind (scaled), in alternating blocks of [`LOOKUP_BLOCK`].
const LOOKUPS: f64 = 8_000.0;
const LOOKUP_BLOCK: usize = 250;
/// Repetitions of each query shape, indexed and scanned (scaled, at least 3).
const SCAN_REPS: f64 = 5.0;

fn main() {
    run_bench("indexes", bench());
}

async fn bench() -> BenchResult {
    let scale = scale();
    println!("Secondary indexes (EBB_BENCH_SCALE={scale})");
    let server = Server::start()?;
    println!("Ebb store: {}", server.data_dir().display());
    let client = connect(server.addr, "ebb-index-bench", Some(1)).await?;
    let db = client.database("bench");

    // `EBB_BENCH_ONLY=lookups`: load, build, then lookups for five times as long (profiling).
    let only = std::env::var("EBB_BENCH_ONLY").unwrap_or_default();
    let only_lookups = only == "lookups";
    if !only_lookups {
        insert_phase(&db, scaled(INSERT_DOCS, scale)).await?;
    }
    if only == "inserts" {
        drop(client);
        return server.stop();
    }
    let big = db.collection::<RawDocumentBuf>("big");
    let n = scaled(BIG_DOCS, scale);
    load_and_build(&db, &big, n).await?;
    let lookups = scaled(LOOKUPS, scale) * if only_lookups { 5 } else { 1 };
    lookup_phase(&big, n, lookups).await?;
    if !only_lookups {
        scan_phase(&db, &big, n, scaled(SCAN_REPS, scale).max(3)).await?;
    }

    drop(client);
    server.stop()
}

// ---------------------------------------------------------------------------------------------
// Documents
// ---------------------------------------------------------------------------------------------

/// `k` for document `i`: unique, scattered against `_id` order (an odd multiplier is a
/// bijection modulo 2^32).
fn k_of(i: i64) -> i64 {
    (i.wrapping_mul(2_654_435_761)).rem_euclid(1 << 32)
}

/// A document of about [`DOC_SIZE`] bytes.
fn make_doc(i: i64) -> RawDocumentBuf {
    let mut doc = rawdoc! {
        "_id": i,
        "k": k_of(i),
        "g": i.rem_euclid(G_VALUES),
        "s": format!("s{}", i.rem_euclid(5_000)),
        "tags": [i.rem_euclid(7), 10 + i.rem_euclid(11)],
    };
    let overhead = 1 + "pad".len() + 1 + 4 + 1;
    let fill = DOC_SIZE.saturating_sub(doc.as_bytes().len() + overhead);
    doc.append(bson::raw::cstr!("pad"), "x".repeat(fill));
    doc
}

async fn insert_batch(coll: &Collection<RawDocumentBuf>, first: i64, n: usize) -> BenchResult {
    let docs: Vec<RawDocumentBuf> = (first..first + i64::try_from(n)?).map(make_doc).collect();
    let reply = coll.insert_many(docs).await?;
    if reply.inserted_ids.len() != n {
        return Err(format!(
            "insert_many of {n} reported {} inserted",
            reply.inserted_ids.len()
        )
        .into());
    }
    Ok(())
}

async fn create(coll: &Collection<RawDocumentBuf>, keys: Document) -> BenchResult<Duration> {
    let start = Instant::now();
    coll.create_index(IndexModel::builder().keys(keys).build())
        .await?;
    Ok(start.elapsed())
}

// ---------------------------------------------------------------------------------------------
// 1. Inserts with 0, 1 and 3 indexes
// ---------------------------------------------------------------------------------------------

async fn insert_phase(db: &Database, per_collection: usize) -> BenchResult {
    let colls = [
        db.collection::<RawDocumentBuf>("w0"),
        db.collection::<RawDocumentBuf>("w1"),
        db.collection::<RawDocumentBuf>("w3"),
    ];
    create(&colls[1], doc! { "k": 1 }).await?;
    create(&colls[2], doc! { "k": 1 }).await?;
    create(&colls[2], doc! { "g": 1, "s": -1 }).await?;
    create(&colls[2], doc! { "tags": 1 }).await?;
    let batches = per_collection.div_ceil(BATCH);
    let mut took = [Duration::ZERO; 3];
    let mut done = [0_usize; 3];
    let mut round = 0;
    while done.iter().any(|&d| d < batches) {
        for turn in 0..3 {
            let c = (turn + round) % 3;
            for _ in 0..INSERT_BLOCK {
                let Some(slot) = done.get_mut(c) else { break };
                if *slot >= batches {
                    break;
                }
                let first = i64::try_from(*slot * BATCH)?;
                let start = Instant::now();
                insert_batch(&colls[c], first, BATCH).await?;
                took[c] += start.elapsed();
                *slot += 1;
            }
        }
        round += 1;
    }
    println!();
    println!(
        "1. insert_many of {BATCH} docs (~{DOC_SIZE} B), {per_collection} per collection, the \
         three collections taking turns in blocks of {INSERT_BLOCK} batches"
    );
    let base = per_second(batches * BATCH, took[0]);
    for (label, t) in [
        ("0 secondary indexes", took[0]),
        ("1 index {k: 1}", took[1]),
        ("3 indexes (+{g: 1, s: -1}, {tags: 1})", took[2]),
    ] {
        let rate = per_second(batches * BATCH, t);
        println!(
            "  {label:<40} {rate:>10.0} docs/s   {:>5.2}x of no index",
            rate / base
        );
    }
    for c in &colls {
        c.drop().await?;
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// 2. Load 1M, build indexes over them
// ---------------------------------------------------------------------------------------------

async fn load_and_build(db: &Database, big: &Collection<RawDocumentBuf>, n: usize) -> BenchResult {
    let start = Instant::now();
    let mut first = 0;
    while first < n {
        let k = BATCH.min(n - first);
        insert_batch(big, i64::try_from(first)?, k).await?;
        first += k;
    }
    let load = start.elapsed();
    println!();
    println!("2. {n} documents loaded (no secondary index)");
    println!(
        "  load                                     {:>10.0} docs/s   ({:.1} s)",
        per_second(n, load),
        load.as_secs_f64()
    );
    for keys in [doc! { "k": 1 }, doc! { "g": 1 }] {
        let took = create(big, keys.clone()).await?;
        println!(
            "  createIndexes {:<26} {:>10.0} docs/s   ({:.1} s)",
            keys.to_string(),
            per_second(n, took),
            took.as_secs_f64()
        );
    }
    let stats = db.run_command(doc! { "validate": "big" }).await?;
    if !matches!(stats.get("valid"), Some(bson::Bson::Boolean(true))) {
        return Err(format!("validate after the builds: {stats}").into());
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// 3. Lookups: indexed field vs `_id`
// ---------------------------------------------------------------------------------------------

async fn lookup_phase(big: &Collection<RawDocumentBuf>, n: usize, lookups: usize) -> BenchResult {
    let keys = u64::try_from(n)?;
    let mut rng = XorShift(0x9E37_79B9_7F4A_7C15);
    let (mut by_k, mut by_id) = (Samples::default(), Samples::default());
    // Warm-up, not recorded.
    lookups_block(big, &mut rng, keys, 200, true, &mut Samples::default()).await?;
    lookups_block(big, &mut rng, keys, 200, false, &mut Samples::default()).await?;
    let mut turn = 0;
    while by_k.len() < lookups || by_id.len() < lookups {
        let indexed = turn % 2 == 0;
        let out = if indexed { &mut by_k } else { &mut by_id };
        lookups_block(big, &mut rng, keys, LOOKUP_BLOCK, indexed, out).await?;
        turn += 1;
    }
    println!();
    println!(
        "3. find_one by indexed k vs by _id, random existing documents among {n}, sequential on \
         one connection, in alternating blocks of {LOOKUP_BLOCK}"
    );
    println!("  {:<24} {:>10} {:>10}", "", "p50 us", "p99 us");
    for (label, s) in [("find_one({k: v})", &by_k), ("find_one({_id: i})", &by_id)] {
        println!(
            "  {label:<24} {:>10.1} {:>10.1}",
            s.quantile_us(0.5),
            s.quantile_us(0.99)
        );
    }
    println!(
        "  indexed over _id: p50 {:.2}x, p99 {:.2}x",
        by_k.quantile_us(0.5) / by_id.quantile_us(0.5).max(1e-9),
        by_k.quantile_us(0.99) / by_id.quantile_us(0.99).max(1e-9)
    );
    Ok(())
}

async fn lookups_block(
    big: &Collection<RawDocumentBuf>,
    rng: &mut XorShift,
    keys: u64,
    count: usize,
    indexed: bool,
    out: &mut Samples,
) -> BenchResult {
    for _ in 0..count {
        let i = i64::try_from(rng.below(keys))?;
        let filter = if indexed {
            doc! { "k": k_of(i) }
        } else {
            doc! { "_id": i }
        };
        let start = Instant::now();
        let found = big.find_one(filter).await?;
        out.push(start.elapsed());
        match found.as_ref().map(|d| d.get_i64("_id")) {
            Some(Ok(id)) if id == i => {}
            other => return Err(format!("lookup of document {i} found {other:?}").into()),
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// 4. Indexed query vs collection scan
// ---------------------------------------------------------------------------------------------

async fn scan_phase(
    db: &Database,
    big: &Collection<RawDocumentBuf>,
    n: usize,
    reps: usize,
) -> BenchResult {
    let n_i64 = i64::try_from(n)?;
    let shapes: [(&str, QueryShape); 2] = [
        ("equality {k: v} (1 doc)", equality_query),
        ("range {g: {$gte: a, $lt: a + 2}}", range_query),
    ];
    println!();
    println!(
        "4. the same query with its index and as a collection scan (hint {{$natural: 1}}) over \
         {n} documents, alternating, {reps} of each"
    );
    println!(
        "  {:<34} {:>8} {:>12} {:>12} {:>9}",
        "", "docs", "indexed ms", "scan ms", "speed-up"
    );
    for (label, filter) in &shapes {
        explain_uses_index(db, filter(0, n_i64)).await?;
        let (mut indexed, mut scanned) = (Vec::new(), Vec::new());
        let mut returned = 0;
        for r in 0..reps {
            let f = filter(r, n_i64);
            let start = Instant::now();
            let mut a = all(big.find(f.clone()).await?).await?;
            indexed.push(start.elapsed().as_secs_f64() * 1e3);
            let start = Instant::now();
            let mut b = all(big
                .find(f)
                .hint(mongodb::options::Hint::Keys(doc! { "$natural": 1 }))
                .await?)
            .await?;
            scanned.push(start.elapsed().as_secs_f64() * 1e3);
            let id = |d: &RawDocumentBuf| d.get_i64("_id").unwrap_or(-1);
            a.sort_by_key(id);
            b.sort_by_key(id);
            if a != b || a.is_empty() {
                return Err(format!(
                    "{label}: the index returned {} documents, the scan {}",
                    a.len(),
                    b.len()
                )
                .into());
            }
            returned = a.len();
        }
        let (i, s) = (median(&indexed), median(&scanned));
        println!(
            "  {label:<34} {returned:>8} {i:>12.2} {s:>12.1} {:>8.0}x",
            s / i.max(1e-9)
        );
    }
    Ok(())
}

/// The `r`-th query of a shape over `n` documents.
type QueryShape = fn(usize, i64) -> Document;

/// The `r`-th equality query on `k` (a document among `n`).
fn equality_query(r: usize, n: i64) -> Document {
    let i = (i64::try_from(r).unwrap_or(0) * 7_919).rem_euclid(n);
    doc! { "k": k_of(i) }
}

/// The `r`-th range query on `g`: two of its values.
fn range_query(r: usize, _n: i64) -> Document {
    let a = (i64::try_from(r).unwrap_or(0) * 37).rem_euclid(G_VALUES - 2);
    doc! { "g": { "$gte": a, "$lt": a + 2 } }
}

/// Every document a cursor returns.
async fn all(mut cursor: mongodb::Cursor<RawDocumentBuf>) -> BenchResult<Vec<RawDocumentBuf>> {
    let mut out = Vec::new();
    while cursor.advance().await? {
        out.push(cursor.deserialize_current()?);
    }
    Ok(out)
}

/// Fails unless `explain` of the query shows an index scan in its winning plan.
async fn explain_uses_index(db: &Database, filter: Document) -> BenchResult {
    let reply = db
        .run_command(doc! {
            "explain": { "find": "big", "filter": filter.clone() },
            "verbosity": "queryPlanner",
        })
        .await?;
    let plan = reply
        .get_document("queryPlanner")
        .and_then(|q| q.get_document("winningPlan"))
        .map_err(|e| format!("explain of {filter}: {e}: {reply}"))?;
    if !plan.to_string().contains("IXSCAN") {
        return Err(format!("explain of {filter} shows no index scan: {plan}").into());
    }
    Ok(())
}
