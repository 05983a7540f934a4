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
//!
//! **Split scans** (the performance issue's question: may a scan of a large collection use more
//! than one core, splitting its key range?). A measurement for that decision, not an
//! implementation of it. On the same store, the same 1% filtered scan of the whole collection
//! runs (a) on one thread, as above; (b) split into 2 key ranges at the record id halfway
//! between the collection's first and last (record keys are the collection prefix then the
//! record id, big-endian; two seeks find the ends), scanned at once by 2 threads (this one and
//! one spawned per scan, `std::thread::scope`) reading one shared snapshot, the matches put
//! back in key order; (c) 4 such ranges taken in turn by the same 2 threads (a thread slowed by
//! other load takes fewer). Every split's documents must be (a)'s, in the same order, or the run
//! fails. The three rotate over [`SPLIT_ROUNDS`] rounds; each reports its median wall time, the
//! CPU time of its scanning threads (`/proc/thread-self/schedstat`, with the time they waited
//! for a CPU) and of the whole process (`/proc/self/stat`), and the speed-up of (b) and (c)
//! over (a) with the CPU it cost. The load average is printed before and after: on a busy
//! machine the second thread finds no idle core, which is the condition the issue puts on
//! splitting.
//!
//! `EBB_BENCH_SCALE` (a float, default 1.0) scales the number of documents and rounds.
//! `EBB_BENCH_ONLY=engine` runs the engine part alone (for profiling), `EBB_BENCH_ONLY=split`
//! the split scans alone; by default all three parts run.

use std::hint::black_box;
use std::thread;
use std::time::{Duration, Instant};

use std::ops::Bound;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use bson::raw::cstr;
use bson::{RawDocument, RawDocumentBuf, doc, rawdoc};
use ebb::Config;
use ebb::config::physical_memory;
use ebb::cursor::{MAX_BATCH_BYTES, Record, Scan};
use ebb::query::filter::Filter;
use ebb::storage::{Batch, DiskStorage, Keyspace, Snapshot, Storage, prefix_end, record};

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
/// Interleaved rounds of the split-scan part (scaled, at least [`MIN_ROUNDS`]).
const SPLIT_ROUNDS: f64 = 30.0;
/// Threads a split scan runs on (this one and one more).
const SPLIT_THREADS: usize = 2;
/// `/proc`'s clock ticks a second (`USER_HZ`: 100 on Linux).
const USER_HZ: f64 = 100.0;

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
    match std::env::var("EBB_BENCH_ONLY").as_deref() {
        Ok("engine") => return engine(&load(scale)?, scale),
        Ok("split") => return split(&load(scale)?, scale),
        _ => {}
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
    let loaded = load(scale)?;
    engine(&loaded, scale)?;
    split(&loaded, scale)
}

// ---------------------------------------------------------------------------------------------
// Through the engine
// ---------------------------------------------------------------------------------------------

/// The store the engine parts read: the first [`ENGINE_DOCS`] generated documents as one
/// collection's records, flushed and compacted, in a temporary directory (closed).
struct Loaded {
    dir: tempfile::TempDir,
    n_docs: usize,
    /// How many documents the parts' filter (`qty < 10`) matches, from the generator.
    expected: usize,
}

/// Stores the documents for the engine parts.
fn load(scale: f64) -> BenchResult<Loaded> {
    let n_docs = scaled(ENGINE_DOCS, scale, 1_000);
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
    println!();
    println!(
        "Engine store: {n_docs} documents ({} MB) stored as one collection's records in a durable \
         store (block cache {} MB), flushed and compacted, in {:.1} s",
        bytes / 1_000_000,
        Config::default().cache_bytes(physical_memory()) >> 20,
        loaded.elapsed().as_secs_f64()
    );
    Ok(Loaded {
        dir,
        n_docs,
        expected: shapes.iter().filter(|s| s.qty < 10).count(),
    })
}

/// The engine part: the scan against iteration, and cold against warm.
fn engine(loaded: &Loaded, scale: f64) -> BenchResult {
    let (dir, n_docs, expected) = (&loaded.dir, loaded.n_docs, loaded.expected);
    let rounds = scaled(ENGINE_ROUNDS, scale, MIN_ROUNDS);
    println!();
    println!("Through the engine: {rounds} rounds");
    let filter = selective_filter()?;

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

/// The engine parts' filter: `{qty: {$lt: 10}}`, which 1% of the documents match.
fn selective_filter() -> BenchResult<Filter> {
    Ok(Filter::compile(&rawdoc! { "qty": { "$lt": 10 } }).map_err(|e| e.errmsg)?)
}

/// The collection scan `find` runs, with `filter`, drained in reply-sized batches: how long
/// it took and how many documents matched.
fn timed_scan(store: &DiskStorage, filter: &Filter) -> BenchResult<(Duration, usize)> {
    let (lower, upper) = collection_range()?;
    let started = Instant::now();
    let (matched, _) = scan_records(
        store.snapshot(),
        Bound::Included(lower),
        Bound::Excluded(upper),
        filter,
        Some(COLLECTION),
    )?;
    Ok((started.elapsed(), matched.len()))
}

/// The collection scan `find` runs (`cursor::Scan`) over the records in `lower..upper` of
/// `snapshot`, with `filter`, drained in reply-sized batches: the matching records, in key
/// order, and how many records it read. `whole` as [`Scan::whole`]: the collection's id when
/// the bounds are all of its keys.
fn scan_records(
    snapshot: Box<dyn Snapshot>,
    lower: Bound<Vec<u8>>,
    upper: Bound<Vec<u8>>,
    filter: &Filter,
    whole: Option<u64>,
) -> BenchResult<(Vec<Record>, u64)> {
    let mut scan = Scan {
        snapshot,
        lower,
        upper,
        filter: Some(filter.clone()),
        projection: None,
        skip: 0,
        remaining: None,
        now_ms: 1_800_000_000_000,
        done: false,
        reverse: false,
        examined: 0,
        interrupt: None,
        whole,
        keyspace: Keyspace::Docs,
        split: false,
    };
    let mut matched = Vec::new();
    while !scan.done {
        let batch = scan.next_records(usize::MAX, MAX_BATCH_BYTES)?;
        matched.extend(black_box(batch));
    }
    Ok((matched, scan.examined))
}

// ---------------------------------------------------------------------------------------------
// Split scans
// ---------------------------------------------------------------------------------------------

/// One way of running part 3's scan, and what its rounds measured.
struct Side {
    label: &'static str,
    /// Key ranges the collection is split into, and threads scanning them (1 and 1: the scan
    /// `find` runs today).
    ranges: usize,
    threads: usize,
    /// Per round, seconds: wall time, and the scanning threads' CPU time and run-queue wait
    /// (`NaN` where `/proc/thread-self/schedstat` cannot tell).
    wall: Vec<f64>,
    cpu: Vec<f64>,
    waited: Vec<f64>,
    /// The whole process's CPU time over all the rounds (every thread, the store's own too), in
    /// `/proc` clock ticks; `None` where `/proc/self/stat` cannot tell.
    process_ticks: Option<u64>,
}

/// A range of keys: lower and upper bounds.
type KeyRange = (Bound<Vec<u8>>, Bound<Vec<u8>>);

/// What one thread of a split scan did: the ranges it scanned (index, matches, records read),
/// and the CPU it used.
type Done = (Vec<(usize, Vec<Record>, u64)>, Option<Sched>);

/// One split scan: how long it took, what it returned, the CPU its threads and the process
/// used.
struct SplitRun {
    wall: Duration,
    records: Vec<Record>,
    sched: Option<Sched>,
    process_ticks: Option<u64>,
}

/// Part 3: the filtered scan of the whole collection on one thread, against the same split into
/// key ranges scanned by two threads at once.
fn split(loaded: &Loaded, scale: f64) -> BenchResult {
    let rounds = scaled(SPLIT_ROUNDS, scale, MIN_ROUNDS);
    let n_docs = loaded.n_docs;
    println!();
    println!(
        "Split scans: the same filtered scan of the whole collection on one thread, and split \
         into key ranges (at record ids equally far apart) scanned by {SPLIT_THREADS} threads at \
         once from one snapshot, the matches concatenated in key order; {rounds} rounds, {} \
         CPUs",
        thread::available_parallelism().map_or(0, std::num::NonZero::get)
    );
    println!(
        "  load average before: {}",
        load_average().as_deref().unwrap_or("unknown")
    );
    let filter = selective_filter()?;
    let store = open_store(loaded.dir.path())?;
    let mut sides: Vec<Side> = [
        ("(a) one thread, whole range", 1, 1),
        ("(b) 2 ranges on 2 threads", 2, SPLIT_THREADS),
        ("(c) 4 ranges on 2 threads", 4, SPLIT_THREADS),
    ]
    .into_iter()
    .map(|(label, ranges, threads)| Side {
        label,
        ranges,
        threads,
        wall: Vec::new(),
        cpu: Vec::new(),
        waited: Vec::new(),
        process_ticks: Some(0),
    })
    .collect();

    // One untimed pass each first; the one-thread scan's records are what every split must
    // return, in the same order.
    let reference = split_scan(&store, &filter, 1, 1)?.records;
    check_matched(reference.len(), loaded.expected)?;
    for side in &sides {
        same_records(
            &reference,
            &split_scan(&store, &filter, side.ranges, side.threads)?.records,
            side.label,
        )?;
    }
    let started = Instant::now();
    for round in 0..rounds {
        let k = sides.len();
        for i in 0..k {
            let side = &mut sides[(round + i) % k];
            let run = split_scan(&store, &filter, side.ranges, side.threads)?;
            same_records(&reference, &run.records, side.label)?;
            side.wall.push(run.wall.as_secs_f64());
            side.cpu
                .push(run.sched.map_or(f64::NAN, |s| nanos(s.run_ns)));
            side.waited
                .push(run.sched.map_or(f64::NAN, |s| nanos(s.wait_ns)));
            side.process_ticks = side
                .process_ticks
                .zip(run.process_ticks)
                .map(|(a, b)| a + b);
        }
    }
    let measured = started.elapsed();

    println!(
        "  {:<28} {:>9} {:>7} {:>10} {:>11} {:>11} {:>9} {:>8}",
        "", "wall", "spread", "docs/s", "CPU: scan", "process", "CPU/wall", "waited"
    );
    let rounds_f = f64::from(u32::try_from(rounds)?);
    for side in &sides {
        let wall = median(&side.wall);
        let cpu = mean(&side.cpu);
        let process = side
            .process_ticks
            .map_or(f64::NAN, |t| to_f64_u64(t) / USER_HZ / rounds_f);
        println!(
            "  {:<28} {:>6.1} ms {:>7.2} {:>10}/s {:>8.1} ms {:>8.1} ms {:>9.2} {:>5.1} ms{}",
            side.label,
            wall * 1e3,
            spread(&side.wall),
            format_rate(f64::from(u32::try_from(n_docs)?) / wall),
            cpu * 1e3,
            process * 1e3,
            cpu / mean(&side.wall),
            mean(&side.waited) * 1e3,
            if spread(&side.wall) > NOISY_SPREAD {
                "  noisy"
            } else {
                ""
            }
        );
    }
    println!(
        "  (wall: median over the rounds; CPU of the scanning threads (schedstat) and of the \
         whole process (/proc/self/stat, 10 ms ticks), and the time the scanning threads \
         waited for a CPU: means per scan; CPU/wall: cores kept busy)"
    );
    let one = &sides[0];
    for side in &sides[1..] {
        let paired: Vec<f64> = one
            .wall
            .iter()
            .zip(&side.wall)
            .map(|(a, b)| a / b)
            .collect();
        println!(
            "  {} against (a): {:.2}x as fast (medians; {:.2}x the median of per-round \
             ratios), for {:.2}x the scanning threads' CPU ({:+.1} ms a scan) and {:.2}x the \
             process's",
            &side.label[..3],
            median(&one.wall) / median(&side.wall),
            median(&paired),
            mean(&side.cpu) / mean(&one.cpu),
            (mean(&side.cpu) - mean(&one.cpu)) * 1e3,
            side.process_ticks
                .zip(one.process_ticks)
                .map_or(f64::NAN, |(s, o)| to_f64_u64(s) / to_f64_u64(o))
        );
    }
    println!(
        "  every split returned the same {} documents in the same order as (a); measured in \
         {:.1} s",
        reference.len(),
        measured.as_secs_f64()
    );
    println!(
        "  load average after: {}",
        load_average().as_deref().unwrap_or("unknown")
    );
    Ok(())
}

/// The filtered scan of the whole collection, as [`scan_records`] runs it: on this thread
/// with `ranges` 1, else split into `ranges` key ranges (between record ids equally far apart,
/// from the collection's first to its last) that `threads` threads (this one and others
/// spawned for it) take one after the other, all reading one snapshot; the matches of each
/// range are put back in key order.
fn split_scan(
    store: &DiskStorage,
    filter: &Filter,
    ranges: usize,
    threads: usize,
) -> BenchResult<SplitRun> {
    let process_before = process_ticks();
    let started = Instant::now();
    let (records, sched) = if ranges <= 1 {
        let before = Sched::now();
        let (lower, upper) = collection_range()?;
        let (records, _) = scan_records(
            store.snapshot(),
            Bound::Included(lower),
            Bound::Excluded(upper),
            filter,
            Some(COLLECTION),
        )?;
        (records, Sched::since(before))
    } else {
        let snapshot: Arc<dyn Snapshot> = Arc::from(store.snapshot());
        let bounds = split_bounds(snapshot.as_ref(), ranges)?;
        let next = AtomicUsize::new(0);
        // Each thread takes the next range not yet taken until none is left.
        let work = || -> Result<Done, String> {
            let before = Sched::now();
            let mut done = Vec::new();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some((lower, upper)) = bounds.get(i) else {
                    break;
                };
                let (records, examined) = scan_records(
                    snapshot
                        .share()
                        .ok_or("the engine's snapshot cannot be shared")?,
                    lower.clone(),
                    upper.clone(),
                    filter,
                    None,
                )
                .map_err(|e| e.to_string())?;
                done.push((i, records, examined));
            }
            Ok((done, Sched::since(before)))
        };
        let results = thread::scope(|s| {
            let helpers: Vec<_> = (1..threads).map(|_| s.spawn(work)).collect();
            let mut results = vec![work()];
            for helper in helpers {
                results.push(
                    helper
                        .join()
                        .unwrap_or_else(|_| Err("a scan thread panicked".to_owned())),
                );
            }
            results
        });
        let mut parts: Vec<Option<Vec<Record>>> = (0..bounds.len()).map(|_| None).collect();
        let mut examined = 0;
        let mut sched = Some(Sched::default());
        for result in results {
            let (done, used) = result?;
            sched = sched.zip(used).map(|(a, b)| a.plus(b));
            for (i, records, read) in done {
                parts[i] = Some(records);
                examined += read;
            }
        }
        // All of the collection was read: told to the store once, as a whole scan does.
        snapshot.scanned(Keyspace::Docs, COLLECTION, examined);
        let mut records = Vec::new();
        for part in parts {
            records.extend(part.ok_or("a range was left unscanned")?);
        }
        (records, sched)
    };
    let wall = started.elapsed();
    Ok(SplitRun {
        wall,
        records,
        sched,
        process_ticks: process_ticks()
            .zip(process_before)
            .map(|(after, before)| after.saturating_sub(before)),
    })
}

/// The collection's keys cut into `ranges` ranges at record ids equally far apart between its
/// first record's and its last's (two seeks), in key order.
fn split_bounds(snapshot: &dyn Snapshot, ranges: usize) -> BenchResult<Vec<KeyRange>> {
    let (lower, upper) = collection_range()?;
    let end = |reverse| -> BenchResult<Option<u64>> {
        let first = snapshot
            .range(
                Keyspace::Docs,
                Bound::Included(&lower),
                Bound::Excluded(&upper),
                reverse,
            )
            .next()
            .transpose()?;
        Ok(match first {
            Some((key, _)) => Some(record::rid_of_doc_key(&key).ok_or("a record key too short")?),
            None => None,
        })
    };
    let mut bounds = Vec::new();
    let mut from = Bound::Included(lower.clone());
    if let (Some(first), Some(last)) = (end(false)?, end(true)?) {
        let span = u128::from(last - first) + 1;
        let k = u128::from(u64::try_from(ranges)?);
        for i in 1..k {
            let at = first + u64::try_from(span * i / k)?;
            let key = record::doc_key(COLLECTION, at).to_vec();
            bounds.push((from, Bound::Excluded(key.clone())));
            from = Bound::Included(key);
        }
    }
    bounds.push((from, Bound::Excluded(upper)));
    Ok(bounds)
}

/// Fails unless `got` holds the same records as `expected` (record ids, documents and expiry
/// instants), in the same order.
fn same_records(expected: &[Record], got: &[Record], label: &str) -> BenchResult {
    if expected.len() != got.len() {
        return Err(format!(
            "{label} returned {} documents, the one-thread scan {}",
            got.len(),
            expected.len()
        )
        .into());
    }
    for (i, (e, g)) in expected.iter().zip(got).enumerate() {
        if e.0 != g.0 || e.1.as_bytes() != g.1.as_bytes() || e.2 != g.2 {
            return Err(format!(
                "{label} differs from the one-thread scan at its document {i}: record id {} \
                 where {} was expected",
                g.0, e.0
            )
            .into());
        }
    }
    Ok(())
}

/// What the scheduler tells of the calling thread (`/proc/thread-self/schedstat`): nanoseconds
/// on a CPU, and runnable but waiting for one.
#[derive(Debug, Clone, Copy, Default)]
struct Sched {
    run_ns: u64,
    wait_ns: u64,
}

impl Sched {
    /// Now, for the calling thread; `None` where the kernel does not tell.
    fn now() -> Option<Sched> {
        let stat = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
        let mut fields = stat.split_whitespace();
        Some(Sched {
            run_ns: fields.next()?.parse().ok()?,
            wait_ns: fields.next()?.parse().ok()?,
        })
    }

    /// What the calling thread used since `before` (read on the same thread).
    fn since(before: Option<Sched>) -> Option<Sched> {
        let (now, before) = (Sched::now()?, before?);
        Some(Sched {
            run_ns: now.run_ns.saturating_sub(before.run_ns),
            wait_ns: now.wait_ns.saturating_sub(before.wait_ns),
        })
    }

    fn plus(self, other: Sched) -> Sched {
        Sched {
            run_ns: self.run_ns + other.run_ns,
            wait_ns: self.wait_ns + other.wait_ns,
        }
    }
}

/// The CPU time the whole process used so far (every thread, those ended too: user and
/// system), in `/proc` clock ticks ([`USER_HZ`]); `None` where there is no `/proc/self/stat`.
fn process_ticks() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The command name (field 2) is in parentheses and may hold spaces; utime and stime are
    // fields 14 and 15, the 12th and 13th after it.
    let (_, rest) = stat.rsplit_once(')')?;
    let mut fields = rest.split_whitespace().skip(11);
    let utime: u64 = fields.next()?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some(utime + stime)
}

/// The 1-, 5- and 15-minute load averages, from `/proc/loadavg`.
fn load_average() -> Option<String> {
    let load = std::fs::read_to_string("/proc/loadavg").ok()?;
    Some(
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" "),
    )
}

fn nanos(ns: u64) -> f64 {
    to_f64_u64(ns) / 1e9
}

#[expect(
    clippy::cast_precision_loss,
    reason = "CPU times and tick counts, far below 2^52"
)]
fn to_f64_u64(n: u64) -> f64 {
    n as f64
}

fn mean(values: &[f64]) -> f64 {
    let n = f64::from(u32::try_from(values.len()).unwrap_or(u32::MAX));
    values.iter().sum::<f64>() / n
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
    if let Some(load) = load_average() {
        println!("load average before the run: {load} (other busy processes skew every number)");
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
