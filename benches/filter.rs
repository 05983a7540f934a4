//! How fast does Ebb evaluate query filters over raw BSON, next to a baseline measured in the
//! same run?
//!
//! Documents of about 1 KB with varied shapes (optional fields, fields in different orders,
//! arrays of different lengths, nested documents three levels deep, mixed numeric types) are
//! built once in memory as `RawDocumentBuf`s, as a collection scan sees them. Each filter is
//! compiled once with `Filter::compile` and run with `Filter::matches` over every document; the
//! baseline walks every top-level element of the same documents with `RawDocument::iter` (key
//! and value decoded, nothing compared); a reference row walks only the element headers (keys
//! and types, values undecoded). Rounds interleave all the measurements, the order
//! rotating every round, so that machine noise hits every row alike; each row reports the
//! median of its per-round rates, in documents per second, and that rate over the baseline's.
//!
//! The filters are the typical ones: an equality on a top-level field, a range on a nested
//! dotted path, `$in` over 10 values, an `$or` of two clauses, an `$elemMatch` over an array of
//! documents, an unanchored `$regex`, and an `$expr` comparing two fields. Each one's match
//! count is checked against the same predicate computed from the generator's parameters: a
//! filter that answers wrongly fails the run (non-zero exit). Nothing else does: the rates are
//! a measurement, not a test.
//!
//! **Through the engine** (issue #17's goals). The first [`ENGINE_DOCS`] of those documents are
//! stored as a collection's records in a durable store (`DiskStorage`, in a temporary
//! directory, with the block cache the server's default budget gives), flushed and compacted
//! into tables as a long-lived collection's are. Then:
//! * the baseline iterates the collection's records out of the engine (a range over its keys,
//!   every value's bytes touched), and a selective filter (`qty < 10`: 1%) runs through the
//!   same collection scan `find` uses (`cursor::Scan`, records decoded, expiry judged, the
//!   filter matched, matching documents copied out). Goal: the scan at ≥ 50% of the
//!   iteration's rate, judged on the median of interleaved rounds.
//! * cold against warm: the store is closed, the OS page cache of its files dropped
//!   (`posix_fadvise(DONTNEED)`), and it is opened again; the first scan reads from disk into
//!   the block cache (cold), the next from the block cache (warm). Goal: warm ≥ 3× faster than
//!   cold. A scan after reopening with the OS cache kept (engine cache cold, files in memory) is
//!   printed beside them.
//!
//! `EBB_BENCH_SCALE` (a float, default 1.0) scales the number of documents and rounds.
//! `EBB_BENCH_ONLY=engine` runs the engine part alone (for profiling).

use std::hint::black_box;
use std::thread;
use std::time::{Duration, Instant};

use std::ops::Bound;
use std::path::Path;

use bson::raw::cstr;
use bson::{RawDocument, RawDocumentBuf, doc, rawdoc};
use ebb::Config;
use ebb::config::physical_memory;
use ebb::cursor::{MAX_BATCH_BYTES, Scan};
use ebb::query::filter::Filter;
use ebb::storage::{Batch, DiskStorage, Keyspace, Storage, prefix_end, record};

type BenchResult<T = ()> = Result<T, Box<dyn std::error::Error>>;

/// Documents evaluated per pass (scaled).
const DOCS: f64 = 40_000.0;
/// Interleaved rounds (scaled, at least [`MIN_ROUNDS`]).
const ROUNDS: f64 = 15.0;
const MIN_ROUNDS: usize = 5;
/// The size every document is padded to, when its fields leave room.
const DOC_SIZE: usize = 1_024;
/// Per-round rates further apart than this (largest / smallest) mean the machine was noisy.
const NOISY_SPREAD: f64 = 1.25;
/// Documents stored in the engine part (scaled).
const ENGINE_DOCS: f64 = 100_000.0;
/// Interleaved rounds of the engine part (scaled, at least [`MIN_ROUNDS`]).
const ENGINE_ROUNDS: f64 = 9.0;
/// The collection id the engine part stores its records under.
const COLLECTION: u64 = 1;
/// Goal: the filtered scan's rate over the iteration's, at least.
const SCAN_GOAL: f64 = 0.5;
/// Goal: the cold scan's time over the warm one's, at least.
const WARM_GOAL: f64 = 3.0;

const STATUSES: &[&str] = &["new", "paid", "shipped", "delivered", "cancelled"];
const NAMES: &[&str] = &[
    "anderson", "brook", "carlson", "dana", "ellison", "frost", "garcia", "hudson", "ito",
    "jackson", "kowalski", "lee", "morrison", "nakamura", "olsen", "peterson",
];
const KINDS: &[&str] = &["order", "return", "quote"];

fn main() {
    if let Err(e) = bench() {
        eprintln!("filter bench failed: {e}");
        std::process::exit(1);
    }
}

/// What a generated document holds, to compute each filter's expected matches independently of
/// the filter engine.
struct Shape {
    status: &'static str,
    qty: i32,
    /// `reorder`: an int32, or a double (`x.5`) in every fifth document.
    reorder: f64,
    region: String,
    name: &'static str,
    /// `customer.address.geo.lat`, absent in every tenth document.
    lat: Option<f64>,
    /// `items`: `(qty, price)` of each.
    items: Vec<(i32, f64)>,
}

/// A small deterministic generator (`SplitMix64`), so that every run sees the same documents.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..n`.
    fn below(&mut self, n: usize) -> usize {
        usize::try_from(self.next() % u64::try_from(n).unwrap_or(1)).unwrap_or(0)
    }

    fn int(&mut self, n: usize) -> i32 {
        i32::try_from(self.below(n)).unwrap_or(0)
    }

    fn pick<T: Copy>(&mut self, from: &[T]) -> T {
        from[self.below(from.len())]
    }

    fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }
}

fn shape(rng: &mut Rng) -> Shape {
    let qty = rng.int(1_000);
    let reorder = if rng.chance(20) {
        f64::from(rng.int(1_000)) + 0.5
    } else {
        f64::from(rng.int(1_000))
    };
    let items = (0..rng.below(7))
        .map(|_| (rng.int(10), f64::from(rng.int(4_000)) / 100.0))
        .collect();
    Shape {
        status: rng.pick(STATUSES),
        qty,
        reorder,
        region: format!("r{:02}", rng.below(20)),
        name: rng.pick(NAMES),
        lat: (!rng.chance(10)).then(|| f64::from(rng.int(18_000)) / 100.0 - 90.0),
        items,
    }
}

/// The document for `shape`: about [`DOC_SIZE`] bytes, fields in one of three orders, some
/// optional.
fn document(id: i64, s: &Shape, rng: &mut Rng) -> RawDocumentBuf {
    let mut address = rawdoc! { "street": format!("{} {} street", rng.below(999), s.name), "city": format!("city{}", rng.below(50)) };
    if let Some(lat) = s.lat {
        address.append(
            cstr!("geo"),
            rawdoc! { "lat": lat, "lon": f64::from(rng.int(36_000)) / 100.0 - 180.0 },
        );
    }
    let mut customer = rawdoc! { "name": s.name, "tier": rng.int(5), "address": address };
    if rng.chance(30) {
        customer.append(cstr!("email"), format!("{}@example.com", s.name));
    }
    let mut items = bson::RawArrayBuf::new();
    for (i, (qty, price)) in s.items.iter().enumerate() {
        items.push(rawdoc! { "sku": format!("sku-{i}-{}", rng.below(10_000)), "qty": *qty, "price": *price });
    }
    let mut tags = bson::RawArrayBuf::new();
    for _ in 0..rng.below(9) {
        tags.push(format!("tag{}", rng.below(40)));
    }
    let reorder = if s.reorder.fract() == 0.0 {
        bson::RawBson::Int32(to_i32(s.reorder))
    } else {
        bson::RawBson::Double(s.reorder)
    };
    // Three field orders: the filtered fields early, in the middle, or after the bulk.
    let order = rng.below(3);
    let mut doc = rawdoc! { "_id": id };
    let scalars = |doc: &mut RawDocumentBuf| {
        doc.append(cstr!("status"), s.status);
        doc.append(cstr!("qty"), s.qty);
        doc.append(cstr!("reorder"), reorder.clone());
        doc.append(cstr!("region"), s.region.as_str());
    };
    if order == 0 {
        scalars(&mut doc);
    }
    doc.append(cstr!("kind"), rng.pick(KINDS));
    doc.append(
        cstr!("created"),
        bson::DateTime::from_millis(1_700_000_000_000 + id * 1_000),
    );
    if rng.chance(50) {
        doc.append(
            cstr!("updated"),
            bson::DateTime::from_millis(1_700_100_000_000 + id * 1_000),
        );
    }
    doc.append(cstr!("customer"), customer);
    if order == 1 {
        scalars(&mut doc);
    }
    doc.append(cstr!("items"), items);
    doc.append(cstr!("tags"), tags);
    if rng.chance(40) {
        doc.append(cstr!("notes"), "leave at the door; call on arrival");
    }
    // Padding: a string field sized so that the document reaches DOC_SIZE when it fits
    // (type byte, name and NUL, length, NUL: 14 bytes besides the text), counting the fields
    // that still follow it.
    let after = if order == 2 {
        let mut tail = RawDocumentBuf::new();
        scalars(&mut tail);
        tail.as_bytes().len() - 5
    } else {
        0
    };
    let room = DOC_SIZE.saturating_sub(doc.as_bytes().len() + 14 + after);
    doc.append(cstr!("payload"), "x".repeat(room));
    if order == 2 {
        scalars(&mut doc);
    }
    doc
}

#[expect(
    clippy::cast_possible_truncation,
    reason = "whole numbers below 1000, by construction"
)]
fn to_i32(v: f64) -> i32 {
    v as i32
}

/// One measured row: a filter (or the baseline) and its expected match count.
struct Case {
    label: &'static str,
    spec: String,
    run: Run,
    expected: Option<usize>,
    /// Rates per round, documents per second.
    rates: Vec<f64>,
    matched: usize,
}

enum Run {
    /// Every element's key and value decoded (`RawDocument::iter`).
    Baseline,
    /// Every element's key and type read, values left undecoded (`iter_elements`): for
    /// reference, how much of the baseline is decoding values.
    Headers,
    Filter(Filter),
}

impl Case {
    fn filter(
        label: &'static str,
        query: &bson::Document,
        shapes: &[Shape],
        predicate: impl Fn(&Shape) -> bool,
    ) -> BenchResult<Case> {
        let raw = RawDocumentBuf::try_from(query)?;
        Ok(Case {
            label,
            spec: query.to_string(),
            run: Run::Filter(Filter::compile(&raw).map_err(|e| e.errmsg)?),
            expected: Some(shapes.iter().filter(|s| predicate(s)).count()),
            rates: Vec::new(),
            matched: 0,
        })
    }

    /// One pass over `docs`: how long it took, and how many matched (elements, for the
    /// baseline).
    fn pass(&self, docs: &[RawDocumentBuf]) -> BenchResult<(Duration, usize)> {
        let started = Instant::now();
        let mut n = 0_usize;
        match &self.run {
            Run::Baseline => {
                for doc in docs {
                    let doc: &RawDocument = doc;
                    for elem in doc {
                        black_box(elem?);
                        n += 1;
                    }
                }
            }
            Run::Headers => {
                for doc in docs {
                    for elem in doc.iter_elements() {
                        let elem = elem?;
                        black_box((elem.key(), elem.element_type()));
                        n += 1;
                    }
                }
            }
            Run::Filter(f) => {
                for doc in docs {
                    if f.matches(black_box(doc)) {
                        n += 1;
                    }
                }
            }
        }
        Ok((started.elapsed(), black_box(n)))
    }
}

fn bench() -> BenchResult {
    let scale = scale();
    let n_docs = scaled(DOCS, scale, 1_000);
    let rounds = scaled(ROUNDS, scale, MIN_ROUNDS);
    header(scale);
    if std::env::var("EBB_BENCH_ONLY").is_ok_and(|v| v == "engine") {
        return engine(scale);
    }

    let built = Instant::now();
    let mut rng = Rng(0x00EB_B0F1_17E5);
    let shapes: Vec<Shape> = (0..n_docs).map(|_| shape(&mut rng)).collect();
    let docs: Vec<RawDocumentBuf> = shapes
        .iter()
        .zip(0_i64..)
        .map(|(s, id)| document(id, s, &mut rng))
        .collect();
    let sizes: Vec<usize> = docs.iter().map(|d| d.as_bytes().len()).collect();
    let total: usize = sizes.iter().sum();
    println!(
        "{n_docs} documents, {} B on average (smallest {}, largest {}), built in {:.1} s; \
         {rounds} rounds",
        total / n_docs.max(1),
        sizes.iter().min().unwrap_or(&0),
        sizes.iter().max().unwrap_or(&0),
        built.elapsed().as_secs_f64()
    );

    let regions = [
        "r00", "r02", "r04", "r06", "r08", "r10", "r12", "r14", "x98", "x99",
    ];
    let mut cases = vec![
        Case {
            label: "baseline: walk every element",
            spec: "RawDocument::iter, no filter".to_owned(),
            run: Run::Baseline,
            expected: None,
            rates: Vec::new(),
            matched: 0,
        },
        Case {
            label: "(reference: element headers)",
            spec: "RawDocument::iter_elements, values not decoded".to_owned(),
            run: Run::Headers,
            expected: None,
            rates: Vec::new(),
            matched: 0,
        },
        Case::filter(
            "equality, top-level field",
            &doc! { "status": "shipped" },
            &shapes,
            |s| s.status == "shipped",
        )?,
        Case::filter(
            "range, nested dotted path",
            &doc! { "customer.address.geo.lat": { "$gte": 10.0, "$lt": 40.0 } },
            &shapes,
            |s| s.lat.is_some_and(|l| (10.0..40.0).contains(&l)),
        )?,
        Case::filter(
            "$in, 10 values",
            &doc! { "region": { "$in": regions.to_vec() } },
            &shapes,
            |s| regions.contains(&s.region.as_str()),
        )?,
        Case::filter(
            "$or, two clauses",
            &doc! { "$or": [{ "status": "cancelled" }, { "qty": { "$gt": 900 } }] },
            &shapes,
            |s| s.status == "cancelled" || s.qty > 900,
        )?,
        Case::filter(
            "$elemMatch, array of documents",
            &doc! { "items": { "$elemMatch": { "qty": { "$gte": 5 }, "price": { "$lt": 20.0 } } } },
            &shapes,
            |s| s.items.iter().any(|&(q, p)| q >= 5 && p < 20.0),
        )?,
        Case::filter(
            "$regex, unanchored",
            &doc! { "customer.name": { "$regex": "son$" } },
            &shapes,
            |s| s.name.ends_with("son"),
        )?,
        Case::filter(
            "$expr, two fields",
            &doc! { "$expr": { "$gt": ["$qty", "$reorder"] } },
            &shapes,
            |s| f64::from(s.qty) > s.reorder,
        )?,
    ];

    // One untimed pass each warms caches and checks the answers.
    for case in &mut cases {
        let (_, matched) = case.pass(&docs)?;
        case.matched = matched;
        if let Some(expected) = case.expected
            && expected != matched
        {
            return Err(format!(
                "{} ({}) matched {matched} documents, expected {expected}",
                case.label, case.spec
            )
            .into());
        }
    }

    let started = Instant::now();
    for round in 0..rounds {
        let k = cases.len();
        for i in 0..k {
            let case = &mut cases[(round + i) % k];
            let (took, _) = case.pass(&docs)?;
            case.rates.push(per_second(n_docs, took));
        }
    }
    let measured = started.elapsed();

    report(&cases, n_docs);
    println!();
    println!(
        "measured in {:.1} s; rates are medians over the rounds, \"vs baseline\" is the row's \
         rate over the baseline's (1.00 = as fast as only walking the elements)",
        measured.as_secs_f64()
    );
    engine(scale)
}

// ---------------------------------------------------------------------------------------------
// Through the engine
// ---------------------------------------------------------------------------------------------

/// The engine part: stores the documents, then measures the scan against iteration and cold
/// against warm.
fn engine(scale: f64) -> BenchResult {
    let n_docs = scaled(ENGINE_DOCS, scale, 1_000);
    let rounds = scaled(ENGINE_ROUNDS, scale, MIN_ROUNDS);
    let mut rng = Rng(0x00EB_B0F1_17E5);
    let shapes: Vec<Shape> = (0..n_docs).map(|_| shape(&mut rng)).collect();
    let dir = tempfile::tempdir()?;
    let loaded = Instant::now();
    let mut bytes = 0_usize;
    {
        let store = open_store(dir.path())?;
        let mut batch = Batch::new();
        for (rid, s) in (1_u64..).zip(&shapes) {
            let doc = document(i64::try_from(rid)?, s, &mut rng);
            bytes += doc.as_bytes().len();
            batch.put(
                Keyspace::Docs,
                record::doc_key(COLLECTION, rid).to_vec(),
                record::encode(0, record::NEVER, &doc),
            );
            if rid.is_multiple_of(1_000) {
                store.commit(std::mem::take(&mut batch))?;
            }
        }
        store.commit(batch)?;
        store.sync()?;
        // Into tables, as a collection that has lived a while is.
        store.compact(&[Keyspace::Docs])?;
    }
    let expected = shapes.iter().filter(|s| s.qty < 10).count();
    println!();
    println!(
        "Through the engine: {n_docs} documents ({} MB) stored as one collection's records in a \
         durable store (block cache {} MB), flushed and compacted, in {:.1} s; {rounds} rounds",
        bytes / 1_000_000,
        Config::default().cache_bytes(physical_memory()) >> 20,
        loaded.elapsed().as_secs_f64()
    );
    let filter = Filter::compile(&rawdoc! { "qty": { "$lt": 10 } }).map_err(|e| e.errmsg)?;

    // Cold, then warm: the engine's cache and the OS page cache both empty at first.
    let cold = {
        drop_page_cache(dir.path())?;
        let store = open_store(dir.path())?;
        let (cold, matched) = timed_scan(&store, &filter)?;
        check_matched(matched, expected)?;
        let (warm, _) = timed_scan(&store, &filter)?;
        let (warm_again, _) = timed_scan(&store, &filter)?;
        (cold, warm.min(warm_again))
    };
    let page_cached = {
        let store = open_store(dir.path())?;
        timed_scan(&store, &filter)?.0
    };

    let store = open_store(dir.path())?;
    let (mut iterate, mut scan) = (Vec::new(), Vec::new());
    // One untimed pass of each first.
    iterate_records(&store)?;
    timed_scan(&store, &filter)?;
    for round in 0..rounds {
        for side in 0..2 {
            if (round + side) % 2 == 0 {
                let (took, n) = iterate_records(&store)?;
                if n != n_docs {
                    return Err(format!("iterated {n} records of {n_docs}").into());
                }
                iterate.push(per_second(n_docs, took));
            } else {
                let (took, matched) = timed_scan(&store, &filter)?;
                check_matched(matched, expected)?;
                scan.push(per_second(n_docs, took));
            }
        }
    }
    let (iterate_rate, scan_rate) = (median(&iterate), median(&scan));
    println!(
        "  iterate the records' bytes    {:>10}/s  {:>6.0} ns/doc  (spread {:.2})",
        format_rate(iterate_rate),
        1e9 / iterate_rate,
        spread(&iterate)
    );
    println!(
        "  scan with {{qty: {{$lt: 10}}}}     {:>10}/s  {:>6.0} ns/doc  (spread {:.2}), {} matched \
         ({:.1}%)",
        format_rate(scan_rate),
        1e9 / scan_rate,
        spread(&scan),
        expected,
        percent(expected, n_docs)
    );
    let (cold_scan, warm_scan) = cold;
    println!(
        "  cold scan (OS cache dropped, engine cache empty) {:.1} ms, warm {:.1} ms; engine cache \
         empty but files in the OS cache {:.1} ms",
        cold_scan.as_secs_f64() * 1e3,
        warm_scan.as_secs_f64() * 1e3,
        page_cached.as_secs_f64() * 1e3
    );
    let scan_ratio = scan_rate / iterate_rate;
    let warm_ratio = cold_scan.as_secs_f64() / warm_scan.as_secs_f64();
    println!();
    println!("goals (informational, never fail the run):");
    println!(
        "  selective scan >= {:.0}% of iterating the engine's records: {:.1}%  {}",
        SCAN_GOAL * 100.0,
        scan_ratio * 100.0,
        if scan_ratio >= SCAN_GOAL {
            "PASS"
        } else {
            "MISS"
        }
    );
    println!(
        "  a warm scan >= {WARM_GOAL}x faster than a cold one: {warm_ratio:.1}x  {}",
        if warm_ratio >= WARM_GOAL {
            "PASS"
        } else {
            "MISS"
        }
    );
    Ok(())
}

/// Opens the store as the server does, with the block cache its default budget gives
/// (`WiredTiger`'s: half of memory less 1 GB, at least 256 MB).
fn open_store(dir: &Path) -> BenchResult<DiskStorage> {
    let cache = Config::default().cache_bytes(physical_memory());
    Ok(DiskStorage::open_with_cache(dir, Some(cache))?)
}

fn check_matched(matched: usize, expected: usize) -> BenchResult {
    if matched == expected {
        Ok(())
    } else {
        Err(format!("the scan matched {matched} documents, expected {expected}").into())
    }
}

/// The bounds of the collection's records.
fn collection_range() -> BenchResult<(Vec<u8>, Vec<u8>)> {
    let prefix = record::collection_prefix(COLLECTION).to_vec();
    let end = prefix_end(&prefix).ok_or("no end to the collection's keys")?;
    Ok((prefix, end))
}

/// Every record of the collection out of the engine, each value's bytes touched: how long it
/// took and how many.
fn iterate_records(store: &DiskStorage) -> BenchResult<(Duration, usize)> {
    let (lower, upper) = collection_range()?;
    let started = Instant::now();
    let snapshot = store.snapshot();
    let mut n = 0;
    let mut sum = 0_u64;
    for entry in snapshot.range(
        Keyspace::Docs,
        Bound::Included(&lower),
        Bound::Excluded(&upper),
        false,
    ) {
        let (_, value) = entry?;
        sum = sum.wrapping_add(u64::from(value.first().copied().unwrap_or(0)));
        sum = sum.wrapping_add(u64::from(value.last().copied().unwrap_or(0)));
        black_box(value.len());
        n += 1;
    }
    black_box(sum);
    Ok((started.elapsed(), n))
}

/// The collection scan `find` runs, with `filter`, drained in reply-sized batches: how long
/// it took and how many documents matched.
fn timed_scan(store: &DiskStorage, filter: &Filter) -> BenchResult<(Duration, usize)> {
    let (lower, upper) = collection_range()?;
    let started = Instant::now();
    let mut scan = Scan {
        snapshot: store.snapshot(),
        lower: Bound::Included(lower),
        upper: Bound::Excluded(upper),
        filter: Some(filter.clone()),
        projection: None,
        skip: 0,
        remaining: None,
        now_ms: 1_800_000_000_000,
        done: false,
        reverse: false,
        examined: 0,
        interrupt: None,
        whole: Some(COLLECTION),
        keyspace: Keyspace::Docs,
    };
    let mut matched = 0;
    while !scan.done {
        let batch = scan.next_records(usize::MAX, MAX_BATCH_BYTES)?;
        matched += black_box(batch).len();
    }
    Ok((started.elapsed(), matched))
}

/// Drops the OS page cache of every file under `dir` (`posix_fadvise(DONTNEED)` after a sync),
/// so that the next read of them comes from the disk.
fn drop_page_cache(dir: &Path) -> BenchResult {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            drop_page_cache(&path)?;
        } else if path.is_file() {
            let file = std::fs::File::open(&path)?;
            file.sync_all()?;
            rustix::fs::fadvise(&file, 0, None, rustix::fs::Advice::DontNeed)?;
        }
    }
    Ok(())
}

fn report(cases: &[Case], n_docs: usize) {
    let baseline = median(&cases[0].rates);
    println!();
    println!(
        "  {:<32} {:<62} {:>8} {:>12} {:>8} {:>11} {:>7}",
        "", "filter", "matched", "docs/s", "ns/doc", "vs baseline", "spread"
    );
    for case in cases {
        let rate = median(&case.rates);
        let spread = spread(&case.rates);
        let matched = if case.expected.is_some() {
            format!("{:.1}%", percent(case.matched, n_docs))
        } else {
            "-".to_owned()
        };
        println!(
            "  {:<32} {:<62} {:>8} {:>12} {:>8.0} {:>11.2} {:>6.2}{}",
            case.label,
            truncate(&case.spec, 62),
            matched,
            format_rate(rate),
            1e9 / rate,
            rate / baseline,
            spread,
            if spread > NOISY_SPREAD { " noisy" } else { "" }
        );
    }
}

fn header(scale: f64) {
    println!();
    println!(
        "Ebb filter evaluation over raw BSON vs walking the same documents ({} build, {} CPUs, \
         EBB_BENCH_SCALE={scale})",
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

fn truncate(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        s.to_owned()
    } else {
        let mut out: String = s.chars().take(max - 1).collect();
        out.push('…');
        out
    }
}

fn format_rate(rate: f64) -> String {
    if rate >= 1e6 {
        format!("{:.2} M", rate / 1e6)
    } else {
        format!("{:.0} k", rate / 1e3)
    }
}

fn median(values: &[f64]) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => f64::midpoint(v[n / 2 - 1], v[n / 2]),
    }
}

fn spread(values: &[f64]) -> f64 {
    let max = values.iter().copied().fold(f64::NAN, f64::max);
    let min = values.iter().copied().fold(f64::NAN, f64::min);
    max / min
}

fn percent(part: usize, whole: usize) -> f64 {
    let to_f64 = |n: usize| u32::try_from(n).map_or(f64::from(u32::MAX), f64::from);
    100.0 * to_f64(part) / to_f64(whole.max(1))
}

fn per_second(n: usize, took: Duration) -> f64 {
    let n = u32::try_from(n).map_or(f64::from(u32::MAX), f64::from);
    if took.is_zero() {
        f64::NAN
    } else {
        n / took.as_secs_f64()
    }
}

fn scale() -> f64 {
    match std::env::var("EBB_BENCH_SCALE") {
        Ok(v) => match v.trim().parse::<f64>() {
            Ok(s) if s.is_finite() && s > 0.0 => s,
            _ => {
                eprintln!("EBB_BENCH_SCALE={v:?} is not a positive number; using 1");
                1.0
            }
        },
        Err(_) => 1.0,
    }
}

#[expect(
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    reason = "a positive count, rounded"
)]
fn scaled(base: f64, scale: f64, floor: usize) -> usize {
    ((base * scale).round() as usize).max(floor)
}
