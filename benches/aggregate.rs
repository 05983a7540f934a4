//! What do the aggregation framework's heavy stages cost, next to baselines measured in the same
//! run? Issue #12, "The aggregation framework, whole".
//!
//! One process: two Ebbs on durable stores in temporary directories, each started with
//! [`ebb::run`] in its own 2-worker tokio runtime on its own thread, as on the 2-core target; the
//! `mongodb` driver in a third 2-worker runtime plays the client, on one connection per server.
//! The two servers differ only in the blocking-sort memory limit
//! (`internalQueryMaxBlockingSortMemoryUsageBytes`, [`ebb::Config::max_blocking_sort_bytes`],
//! which Ebb takes only at start, as there is no `setParameter`): the **main** one has it raised
//! to [`RAISED_SORT_BYTES`], so that every sort here fits in memory; the **spilling** one has it
//! lowered to [`LOWERED_SORT_BYTES`] (scaled), so that the sort of line 3 spills several runs.
//!
//! Every document is about [`DOC_SIZE`] BSON bytes: `_id` (0..N), `k` (one of [`K_VALUES`]),
//! `v` (0..100), `r` (a pseudo-random 63-bit number, distinct), a pad. Each measure is repeated,
//! the measured side and its baseline taking turns, and the median of each is kept, so that
//! machine noise hits both alike.
//!
//! 1. **`$group` vs a scan.** Over [`DOCS`] documents,
//!    `[{$group: {_id: "$k", n: {$sum: 1}, s: {$sum: "$v"}}}]` read to the end, against
//!    `find({})` read to the end (every document reached through the driver's cursor). Input
//!    documents/s of each, and group over scan. Goal: ≥ 0.5. The groups must be [`K_VALUES`],
//!    their `n` must add up to N and their `s` to the sum of `v`, or the run fails.
//! 2. **`$lookup` vs `find_one`.** [`LOOKUP_DOCS`] documents `{_id, fk, pad}` (`fk` random in
//!    0..M) joined into a collection of M = [`LOOKUP_DOCS`] documents `{_id, key, pad}` (`key` a
//!    permutation of 0..M, scattered against `_id`) with an index `{key: 1}`:
//!    `[{$lookup: {from, localField: "fk", foreignField: "key", as: "m"}}]` read to the end,
//!    against `find_one({key: fk})` for the same `fk`s, in the same order, one after the other on
//!    one connection. Total time of each, and lookup over finds. Goal: ≤ 2×. Every joined
//!    document must carry exactly one match, the right one, and every `find_one` must find one.
//! 3. **`$sort` spilling vs in memory.** `[{$sort: {r: 1}}]` over the [`DOCS`] documents, read
//!    to the end: on the spilling server (`allowDiskUse` left to its default, true), against the
//!    same on the main server with `allowDiskUse: false`, which mongod and Ebb refuse with
//!    `QueryExceededMemoryLimitNoDiskUseAllowed` (292) unless the sort fits in memory: so the
//!    baseline is proven to be in memory. That the other does spill is checked before the
//!    timing the same way: with `allowDiskUse: false` it must fail with 292. Total time of each,
//!    and spilled over in memory. Goal: ≤ 3×. Both results must be in `r` order, all N.
//!
//! The goals are printed as PASS or MISS and never change the exit status: this is a
//! measurement, not a test. The run fails (non-zero) only if a server cannot be started or
//! answers wrongly.
//!
//! 4. **`$group` spilling vs in memory.** `[{$group: {_id: "$r", n: {$sum: 1}}}]` over the
//!    [`DOCS`] documents (one group each), read to the end, on the spilling server against the
//!    main one with `allowDiskUse: false`, checked the same way as line 3 (292 on the spilling
//!    server without disk use, so it does spill). Total time of each and their ratio; no goal
//!    is set. Every group must count 1, and there must be N.
//!
//! `EBB_BENCH_SCALE` (a float, default 1.0) scales every document count and the lowered sort
//! limit (so that the spilling sort writes about as many runs at every scale).
//! `EBB_BENCH_ONLY=group`, `lookup`, `sort` or `group-spill` runs one line alone (for
//! profiling; `sort` runs line 4 too, on the same spilling server).

#[path = "common/mod.rs"]
mod common;

use std::time::{Duration, Instant};

use bson::{Bson, Document, RawDocumentBuf, doc, rawdoc};
use common::{
    BenchResult, Server, XorShift, connect, integer, median, per_second, run_bench, scale, scaled,
    verdict,
};
use mongodb::{Collection, Database, IndexModel};

/// BSON size of every document, about.
const DOC_SIZE: usize = 200;
/// Documents grouped, scanned and sorted (scaled).
const DOCS: f64 = 1_000_000.0;
/// Distinct values of the group key `k`.
const K_VALUES: u64 = 1_000;
/// Documents on each side of the `$lookup` (scaled).
const LOOKUP_DOCS: f64 = 100_000.0;
/// Documents per `insert_many`.
const BATCH: usize = 1_000;
/// The main server's blocking-sort limit: far above what [`DOCS`] documents take.
const RAISED_SORT_BYTES: usize = 8 * 1024 * 1024 * 1024;
/// The spilling server's blocking-sort limit (scaled): about a sixth of the sorted data.
const LOWERED_SORT_BYTES: f64 = 32.0 * 1024.0 * 1024.0;
/// Repetitions of each side of each line, taking turns.
const REPS: usize = 3;
/// Goals.
const GROUP_GOAL: f64 = 0.5;
const LOOKUP_GOAL: f64 = 2.0;
const SORT_GOAL: f64 = 3.0;
const DB: &str = "aggbench";

fn main() {
    run_bench("aggregate", bench());
}

async fn bench() -> BenchResult {
    let scale = scale();
    let docs = scaled(DOCS, scale);
    let lookup_docs = scaled(LOOKUP_DOCS, scale);
    let lowered = scaled(LOWERED_SORT_BYTES, scale);
    println!(
        "aggregate bench: $group, $lookup, $sort and a spilling $group against baselines \
         (durable stores, EBB_BENCH_SCALE={scale})"
    );
    let only = std::env::var("EBB_BENCH_ONLY").unwrap_or_default();
    let runs = |line: &str| only.is_empty() || only == line;

    let main = Server::start_with(|c| c.max_blocking_sort_bytes = RAISED_SORT_BYTES)?;
    let client = connect(main.addr, "ebb-aggregate-bench", Some(1)).await?;
    let db = client.database(DB);
    db.run_command(doc! { "ping": 1 }).await?;
    println!(
        "main server: blocking-sort limit {RAISED_SORT_BYTES} bytes, store {}",
        main.data_dir().display()
    );

    let mut goals = Vec::new();
    let coll = db.collection::<RawDocumentBuf>("docs");
    if runs("group") || runs("sort") || runs("group-spill") {
        let took = common::insert_batches(&coll, docs, BATCH, make_doc).await?;
        print_load("docs (main server)", docs, took);
    }
    if runs("group") {
        goals.push(group_line(&coll, docs).await?);
    }
    if runs("lookup") {
        goals.push(lookup_line(&db, lookup_docs).await?);
    }
    if runs("sort") || runs("group-spill") {
        let spilling = Server::start_with(move |c| c.max_blocking_sort_bytes = lowered)?;
        let spill_client = connect(spilling.addr, "ebb-aggregate-bench-spill", Some(1)).await?;
        let spill_coll = spill_client
            .database(DB)
            .collection::<RawDocumentBuf>("docs");
        println!(
            "spilling server: blocking-sort limit {lowered} bytes, store {}",
            spilling.data_dir().display()
        );
        let took = common::insert_batches(&spill_coll, docs, BATCH, make_doc).await?;
        print_load("docs (spilling server)", docs, took);
        if runs("sort") {
            goals.push(sort_line(&coll, &spill_coll, docs).await?);
        }
        goals.push(group_spill_line(&coll, &spill_coll, docs).await?);
        drop(spill_client);
        spilling.stop()?;
    }

    println!();
    for goal in &goals {
        println!("{goal}");
    }
    drop(client);
    main.stop()
}

// ---------------------------------------------------------------------------------------------
// Line 1: $group vs a collection scan
// ---------------------------------------------------------------------------------------------

async fn group_line(coll: &Collection<RawDocumentBuf>, docs: usize) -> BenchResult<String> {
    println!("1. $group by k ({K_VALUES} values) vs find({{}}) over {docs} documents");
    let (mut grouped, mut scanned) = (Vec::new(), Vec::new());
    for rep in 0..REPS {
        // Alternate which side goes first.
        for side in [rep % 2, 1 - rep % 2] {
            if side == 0 {
                let took = group(coll, docs).await?;
                grouped.push(per_second(docs, took));
            } else {
                let took = scan(coll, docs).await?;
                scanned.push(per_second(docs, took));
            }
        }
    }
    let (g, s) = (median(&grouped), median(&scanned));
    let ratio = g / s.max(1e-9);
    println!(
        "  $group {g:>10.0} docs/s (runs: {}), scan {s:>10.0} docs/s (runs: {})",
        show_rates(&grouped),
        show_rates(&scanned)
    );
    Ok(format!(
        "$group over {docs} docs: {g:.0} docs/s vs scan {s:.0} docs/s = {ratio:.2} \
         (goal ≥ {GROUP_GOAL}) {}",
        verdict(ratio >= GROUP_GOAL)
    ))
}

/// The `$group`, read to the end and checked.
async fn group(coll: &Collection<RawDocumentBuf>, docs: usize) -> BenchResult<Duration> {
    let pipeline = [doc! { "$group": {
        "_id": "$k",
        "n": { "$sum": 1 },
        "s": { "$sum": "$v" },
    } }];
    let t = Instant::now();
    let mut cursor = coll.aggregate(pipeline).await?;
    let mut out: Vec<Document> = Vec::new();
    while cursor.advance().await? {
        out.push(cursor.deserialize_current()?);
    }
    let took = t.elapsed();
    let groups = u64::try_from(out.len())?;
    let (mut n, mut s) = (0_i64, 0_i64);
    for g in &out {
        n += integer(g, "n")?;
        s += integer(g, "s")?;
    }
    let expected_s: i64 = (0..docs).map(|i| i64::try_from(i % 100).unwrap_or(0)).sum();
    let expected_groups = K_VALUES.min(u64::try_from(docs)?);
    if groups != expected_groups || n != i64::try_from(docs)? || s != expected_s {
        return Err(format!(
            "$group answered {groups} groups, n {n}, s {s}; expected {expected_groups}, {docs}, \
             {expected_s}"
        )
        .into());
    }
    Ok(took)
}

/// `find({})` read to the end of its cursor, every document reached; checks the count.
async fn scan(coll: &Collection<RawDocumentBuf>, docs: usize) -> BenchResult<Duration> {
    let t = Instant::now();
    let mut cursor = coll.find(doc! {}).await?;
    let (mut count, mut bytes) = (0_usize, 0_usize);
    while cursor.advance().await? {
        count += 1;
        bytes += cursor.current().as_bytes().len();
    }
    let took = t.elapsed();
    if count != docs || bytes == 0 {
        return Err(format!("the scan returned {count} documents, {docs} expected").into());
    }
    Ok(took)
}

// ---------------------------------------------------------------------------------------------
// Line 2: $lookup vs find_one
// ---------------------------------------------------------------------------------------------

async fn lookup_line(db: &Database, n: usize) -> BenchResult<String> {
    println!("2. $lookup of {n} documents into {n} with an index on foreignField vs {n} find_one");
    let local = db.collection::<RawDocumentBuf>("local");
    let foreign = db.collection::<RawDocumentBuf>("foreign");
    let keys = permutation(n);
    let n_u64 = u64::try_from(n)?;
    let mut rng = XorShift(0x5eed_1234_abcd_0001);
    let fks: Vec<i64> = (0..n)
        .map(|_| i64::try_from(rng.below(n_u64)).unwrap_or(0))
        .collect();
    let took = common::insert_batches(&foreign, n, BATCH, |i| {
        padded(rawdoc! { "_id": to_i64(i), "key": keys.get(i).copied().unwrap_or(0) })
    })
    .await?;
    print_load("foreign", n, took);
    let t = Instant::now();
    foreign
        .create_index(IndexModel::builder().keys(doc! { "key": 1 }).build())
        .await?;
    println!(
        "  index {{key: 1}} built in {:.2} s",
        t.elapsed().as_secs_f64()
    );
    let took = common::insert_batches(&local, n, BATCH, |i| {
        padded(rawdoc! { "_id": to_i64(i), "fk": fks.get(i).copied().unwrap_or(0) })
    })
    .await?;
    print_load("local", n, took);
    // `_id` of the foreign document with each key, to check the joins.
    let mut owner = vec![0_i64; n];
    for (id, &key) in keys.iter().enumerate() {
        if let Some(slot) = usize::try_from(key).ok().and_then(|k| owner.get_mut(k)) {
            *slot = to_i64(id);
        }
    }

    let (mut joins, mut finds) = (Vec::new(), Vec::new());
    for rep in 0..REPS {
        for side in [rep % 2, 1 - rep % 2] {
            if side == 0 {
                joins.push(lookup(&local, n, &fks, &owner).await?.as_secs_f64());
            } else {
                finds.push(find_ones(&foreign, &fks, &owner).await?.as_secs_f64());
            }
        }
    }
    let (j, f) = (median(&joins), median(&finds));
    let ratio = j / f.max(1e-9);
    println!(
        "  $lookup {j:>7.3} s (runs: {}), find_one x{n} {f:>7.3} s (runs: {})",
        show_secs(&joins),
        show_secs(&finds)
    );
    explain_lookup(&local).await?;
    Ok(format!(
        "$lookup of {n} into {n}: {j:.3} s vs {n} find_one {f:.3} s = {ratio:.2}x \
         (goal ≤ {LOOKUP_GOAL}x) {}",
        verdict(ratio <= LOOKUP_GOAL)
    ))
}

fn lookup_pipeline() -> [Document; 1] {
    [doc! { "$lookup": {
        "from": "foreign",
        "localField": "fk",
        "foreignField": "key",
        "as": "m",
    } }]
}

/// The `$lookup`, read to the end; every document must hold its one right match.
async fn lookup(
    local: &Collection<RawDocumentBuf>,
    n: usize,
    fks: &[i64],
    owner: &[i64],
) -> BenchResult<Duration> {
    let t = Instant::now();
    let mut cursor = local
        .aggregate(lookup_pipeline())
        .with_type::<RawDocumentBuf>()
        .await?;
    let mut out: Vec<RawDocumentBuf> = Vec::with_capacity(n);
    while cursor.advance().await? {
        out.push(cursor.deserialize_current()?);
    }
    let took = t.elapsed();
    if out.len() != n {
        return Err(format!("$lookup returned {} documents, {n} expected", out.len()).into());
    }
    for d in &out {
        let id = d.get_i64("_id")?;
        let fk = fks.get(usize::try_from(id)?).copied();
        let matches = d.get_array("m")?;
        let mut ids = Vec::new();
        for m in matches {
            let m = m?
                .as_document()
                .ok_or("a $lookup match is not a document")?;
            ids.push((m.get_i64("_id")?, m.get_i64("key")?));
        }
        let expected = fk.and_then(|k| Some((*owner.get(usize::try_from(k).ok()?)?, k)));
        if d.get_i64("fk").ok() != fk || ids.len() != 1 || ids.first().copied() != expected {
            return Err(format!("local {id}: joined {ids:?}, expected {expected:?}").into());
        }
    }
    Ok(took)
}

/// `find_one({key: fk})` for each `fk`, one after the other.
async fn find_ones(
    foreign: &Collection<RawDocumentBuf>,
    fks: &[i64],
    owner: &[i64],
) -> BenchResult<Duration> {
    let t = Instant::now();
    let mut found = Vec::with_capacity(fks.len());
    for &fk in fks {
        found.push(foreign.find_one(doc! { "key": fk }).await?);
    }
    let took = t.elapsed();
    for (&fk, doc) in fks.iter().zip(&found) {
        let id = doc.as_ref().map(|d| d.get_i64("_id")).transpose()?;
        let expected = usize::try_from(fk).ok().and_then(|k| owner.get(k).copied());
        if id.is_none() || id != expected {
            return Err(format!("find_one({{key: {fk}}}) found {id:?}").into());
        }
    }
    Ok(took)
}

/// Prints what `explain` says of the `$lookup` (the plan and, when reported, per-stage time).
async fn explain_lookup(local: &Collection<RawDocumentBuf>) -> BenchResult {
    let db = local.client().database(DB);
    let reply = db
        .run_command(doc! {
            "explain": {
                "aggregate": local.name(),
                "pipeline": lookup_pipeline().to_vec(),
                "cursor": {},
            },
            "verbosity": "executionStats",
        })
        .await?;
    if let Ok(stages) = reply.get_array("stages") {
        for stage in stages {
            if let Bson::Document(stage) = stage {
                let name = stage.keys().next().cloned().unwrap_or_default();
                // mongod reports these per stage in executionStats; whichever Ebb gives.
                let detail: Vec<String> = [
                    "executionTimeMillisEstimate",
                    "nReturned",
                    "totalDocsExamined",
                    "totalKeysExamined",
                    "collectionScans",
                    "indexesUsed",
                ]
                .iter()
                .filter_map(|f| stage.get(*f).map(|v| format!("{f}: {v}")))
                .collect();
                let mut shown = stage.to_string();
                if detail.is_empty() && shown.len() > 240 {
                    shown = shown.chars().take(240).collect::<String>() + "…";
                }
                let detail = if detail.is_empty() {
                    shown
                } else {
                    detail.join(", ")
                };
                println!("  explain {name}: {detail}");
            }
        }
    } else {
        println!("  explain (no stages): {reply}");
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Line 3: $sort spilling vs in memory
// ---------------------------------------------------------------------------------------------

async fn sort_line(
    in_memory: &Collection<RawDocumentBuf>,
    spilling: &Collection<RawDocumentBuf>,
    docs: usize,
) -> BenchResult<String> {
    println!("3. $sort of {docs} documents by a random field, spilling vs in memory");
    // The spilling server must refuse the sort without disk use: it is past its limit.
    match sort(spilling, docs, false).await? {
        Err(292) => {
            println!("  the spilling server refuses it with allowDiskUse: false (292): it spills");
        }
        Err(code) => {
            return Err(format!("the spilling sort failed with code {code}, not 292").into());
        }
        Ok(_) => {
            return Err("the sort fits under the lowered limit: lower LOWERED_SORT_BYTES".into());
        }
    }
    let (mut spilled, mut held) = (Vec::new(), Vec::new());
    for rep in 0..REPS {
        for side in [rep % 2, 1 - rep % 2] {
            if side == 0 {
                spilled.push(refused(sort(spilling, docs, true).await?)?.as_secs_f64());
            } else {
                held.push(refused(sort(in_memory, docs, false).await?)?.as_secs_f64());
            }
        }
    }
    let (s, m) = (median(&spilled), median(&held));
    let ratio = s / m.max(1e-9);
    println!(
        "  spilling {s:>7.3} s (runs: {}), in memory {m:>7.3} s (runs: {})",
        show_secs(&spilled),
        show_secs(&held)
    );
    Ok(format!(
        "$sort of {docs} docs: spilling {s:.3} s vs in memory {m:.3} s = {ratio:.2}x \
         (goal ≤ {SORT_GOAL}x) {}",
        verdict(ratio <= SORT_GOAL)
    ))
}

// ---------------------------------------------------------------------------------------------
// Line 4: $group spilling vs in memory
// ---------------------------------------------------------------------------------------------

async fn group_spill_line(
    in_memory: &Collection<RawDocumentBuf>,
    spilling: &Collection<RawDocumentBuf>,
    docs: usize,
) -> BenchResult<String> {
    println!("4. $group of {docs} documents into {docs} groups (by r), spilling vs in memory");
    match group_by_r(spilling, docs, false).await? {
        Err(292) => {
            println!("  the spilling server refuses it with allowDiskUse: false (292): it spills");
        }
        Err(code) => {
            return Err(format!("the spilling $group failed with code {code}, not 292").into());
        }
        Ok(_) => {
            return Err("the $group fits under the lowered limit: lower LOWERED_SORT_BYTES".into());
        }
    }
    let (mut spilled, mut held) = (Vec::new(), Vec::new());
    for rep in 0..REPS {
        for side in [rep % 2, 1 - rep % 2] {
            if side == 0 {
                spilled.push(refused(group_by_r(spilling, docs, true).await?)?.as_secs_f64());
            } else {
                held.push(refused(group_by_r(in_memory, docs, false).await?)?.as_secs_f64());
            }
        }
    }
    let (s, m) = (median(&spilled), median(&held));
    let ratio = s / m.max(1e-9);
    println!(
        "  spilling {s:>7.3} s (runs: {}), in memory {m:>7.3} s (runs: {})",
        show_secs(&spilled),
        show_secs(&held)
    );
    Ok(format!(
        "$group of {docs} docs into {docs} groups: spilling {s:.3} s vs in memory {m:.3} s = \
         {ratio:.2}x (no goal set; the $sort line's is {SORT_GOAL}x)"
    ))
}

/// `[{$group: {_id: "$r", n: {$sum: 1}}}]` read to the end (with `allowDiskUse` as given);
/// checks that every document is its own group. `Ok(Err(code))` when the server refuses it.
async fn group_by_r(
    coll: &Collection<RawDocumentBuf>,
    docs: usize,
    allow_disk_use: bool,
) -> BenchResult<Result<Duration, i32>> {
    let t = Instant::now();
    let opened = coll
        .aggregate([doc! { "$group": { "_id": "$r", "n": { "$sum": 1 } } }])
        .allow_disk_use(allow_disk_use)
        .with_type::<RawDocumentBuf>()
        .await;
    let mut cursor = match opened {
        Ok(c) => c,
        Err(e) => match e.server_code() {
            Some(code) => return Ok(Err(code)),
            None => return Err(e.into()),
        },
    };
    let (mut count, mut ones) = (0_usize, true);
    loop {
        match cursor.advance().await {
            Ok(true) => {}
            Ok(false) => break,
            Err(e) => match e.server_code() {
                Some(code) => return Ok(Err(code)),
                None => return Err(e.into()),
            },
        }
        ones &= cursor.current().get_i32("n")? == 1;
        count += 1;
    }
    let took = t.elapsed();
    if count != docs || !ones {
        return Err(format!("the $group returned {count} groups (all of one: {ones})").into());
    }
    Ok(Ok(took))
}

/// A sort's time, or the error code the server refused it with, as an error.
fn refused(sorted: Result<Duration, i32>) -> BenchResult<Duration> {
    sorted.map_err(|code| format!("the sort failed with code {code}").into())
}

/// `[{$sort: {r: 1}}]` read to the end (with `allowDiskUse` as given); checks count and order.
/// `Ok(Err(code))` when the server refuses it with a command error.
async fn sort(
    coll: &Collection<RawDocumentBuf>,
    docs: usize,
    allow_disk_use: bool,
) -> BenchResult<Result<Duration, i32>> {
    let t = Instant::now();
    let opened = coll
        .aggregate([doc! { "$sort": { "r": 1 } }])
        .allow_disk_use(allow_disk_use)
        .with_type::<RawDocumentBuf>()
        .await;
    let mut cursor = match opened {
        Ok(c) => c,
        Err(e) => match e.server_code() {
            Some(code) => return Ok(Err(code)),
            None => return Err(e.into()),
        },
    };
    let (mut count, mut last) = (0_usize, i64::MIN);
    let mut ordered = true;
    loop {
        match cursor.advance().await {
            Ok(true) => {}
            Ok(false) => break,
            Err(e) => match e.server_code() {
                Some(code) => return Ok(Err(code)),
                None => return Err(e.into()),
            },
        }
        let r = cursor.current().get_i64("r")?;
        ordered &= r >= last;
        last = r;
        count += 1;
    }
    let took = t.elapsed();
    if count != docs || !ordered {
        return Err(format!("the sort returned {count} documents (ordered: {ordered})").into());
    }
    Ok(Ok(took))
}

/// The server's error code, for a command error.
trait ServerCode {
    fn server_code(&self) -> Option<i32>;
}

impl ServerCode for mongodb::error::Error {
    fn server_code(&self) -> Option<i32> {
        match self.kind.as_ref() {
            mongodb::error::ErrorKind::Command(c) => Some(c.code),
            _ => None,
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Documents
// ---------------------------------------------------------------------------------------------

/// Document `i` of the grouped and sorted collection.
fn make_doc(i: usize) -> RawDocumentBuf {
    let id = to_i64(i);
    let h = splitmix(u64::try_from(i).unwrap_or(0));
    padded(rawdoc! {
        "_id": id,
        "k": i64::try_from((h >> 32) % K_VALUES).unwrap_or(0),
        "v": i64::try_from(i % 100).unwrap_or(0),
        // splitmix64 is a bijection, so `r` is distinct; the top bit off keeps it an i64.
        "r": i64::try_from(h >> 1).unwrap_or(0),
    })
}

/// `doc` with a string `pad` that brings it to [`DOC_SIZE`] BSON bytes.
fn padded(mut doc: RawDocumentBuf) -> RawDocumentBuf {
    // An appended string element costs its type byte, "pad\0", a length and a trailing NUL.
    let overhead = 1 + "pad".len() + 1 + 4 + 1;
    let fill = DOC_SIZE.saturating_sub(doc.as_bytes().len() + overhead);
    doc.append(bson::raw::cstr!("pad"), "x".repeat(fill));
    doc
}

/// splitmix64's output function: a bijection on `u64` that scatters consecutive inputs.
fn splitmix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A deterministic permutation of `0..n` (Fisher-Yates over [`XorShift`]).
fn permutation(n: usize) -> Vec<i64> {
    let mut keys: Vec<i64> = (0..n).map(to_i64).collect();
    let mut rng = XorShift(0x0dd_ba11_cafe_f00d);
    for i in (1..n).rev() {
        let j = usize::try_from(rng.below(u64::try_from(i + 1).unwrap_or(1))).unwrap_or(0);
        keys.swap(i, j);
    }
    keys
}

fn to_i64(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

fn print_load(what: &str, docs: usize, took: Duration) {
    println!(
        "  loaded {what:<24} {docs:>9} in {:>7.2} s: {:>8.0} docs/s",
        took.as_secs_f64(),
        per_second(docs, took)
    );
}

fn show_rates(rates: &[f64]) -> String {
    let shown: Vec<String> = rates.iter().map(|r| format!("{r:.0}")).collect();
    shown.join(", ")
}

fn show_secs(secs: &[f64]) -> String {
    let shown: Vec<String> = secs.iter().map(|s| format!("{s:.3}")).collect();
    shown.join(", ")
}
