//! What does answering from index keys alone buy? Four query shapes whose plans can skip most
//! or all of the documents, each against the same query made to read them, in the same run.
//!
//! One process: Ebb on a durable store in a temporary directory, in its own 2-worker runtime on
//! its own thread (`common::Server`), as on the 2-core target; the `mongodb` driver in a second
//! 2-worker runtime plays the client, on one connection, one query at a time. One collection,
//! `c`, of [`DOCS`] documents of 200 to 500 BSON bytes: `_id` (0..N), `k` (a permutation of
//! 0..N, unique and scattered against `_id` order), `g` = `k % 100` (an int32, 100 distinct
//! values, each held by 1% of the documents, scattered), and a `pad` string whose length varies
//! with `_id`. Indexes `{g: 1}` and `{k: 1}`, built after the load; neither is multikey and the
//! collection has no TTL index. Everything is derived from `_id` by seeded generators, so every
//! run loads the same bytes, and every answer is checked against the generator.
//!
//! 1. **Counts from keys alone.** `countDocuments({g: {$gte: 10, $lt: 20}})` (the driver's
//!    `aggregate [$match, $group {_id: 1, n: {$sum: 1}}]`, 10% of the documents), which the
//!    bounds of `{g: 1}` decide whole (its explain: an `IXSCAN` with no `FETCH` above it, no
//!    document read), against the same count with `pad: {$exists: true}` added: every document
//!    has `pad`, so it matches the same documents, but the keys cannot decide it and every
//!    document in the range is fetched through the same index. Then the `count` command for
//!    `{g: 7}` (1%), both ways (its explain: `COUNT` → `COUNT_SCAN`).
//! 2. **`DISTINCT_SCAN`.** `distinct("g", {})` and `distinct("g", {k: {$lt: N/2}})`, which read
//!    one document per distinct value of `g` and seek past the rest of its keys, against the
//!    same `distinct` with `hint: {$natural: 1}` (a collection scan: a hint turns the distinct
//!    scan off). The values are compared sorted.
//! 3. **`$or`.** `find({$or: [{g: 3}, {k: {$lt: 100}}]})`, drained, against the same with
//!    `hint: {$natural: 1}`; the documents are compared sorted by `_id`. The winning plan is
//!    printed, whatever it is (an index union or a collection scan).
//! 4. **Covered projections.** `find({g: {$gte: 10, $lt: 20}}, {g: 1, _id: 0})`, drained (10%
//!    of the documents), which the entries of `{g: 1}` answer whole (its explain:
//!    `PROJECTION_COVERED` over `IXSCAN`, no document examined), against the same find and
//!    projection with `pad: {$exists: true}` added to the filter (the same answer, but the
//!    bounds no longer decide the filter, so every document in the range is fetched through
//!    the same index). Then point lookups `find({k: v}, {k: 1, _id: 0})` both ways (covered,
//!    and with `pad: {$exists: true}`): [`LOOKUP_VALUES`] values of `k` scattered over the
//!    collection, [`LOOKUP_BLOCK`] lookups of each side per round walking them in turn, both
//!    sides the same values. A returned document must hold the projected field alone, with
//!    the generator's value and type (`g` an int32, `k` an int64); the answers are compared
//!    sorted.
//!
//! For each pair: a warm-up, then [`ROUNDS`] rounds in which the two sides take turns (the one
//! that goes first alternating), [`PER_BLOCK`] queries each ([`LOOKUP_BLOCK`] for the point
//! lookups). Per round and side, the median query; over the rounds, the median of those (each
//! side's median latency) and the median of the rounds' ratios (the side that reads more
//! documents over the other, so above 1 means the plan that skips documents is faster), with
//! the smallest and largest round ratio beside it.
//! Before the rounds, `explain` (`executionStats`) of each side: its winning plan and the keys
//! and documents it examined. The run fails if a keys-only count examined any document (or
//! plans a `FETCH`) or the other side none, if either count side does not use `{g: 1}` alone,
//! if the unhinted `distinct` is not a `DISTINCT_SCAN` or the hinted one not a `COLLSCAN`, if a
//! covered find's plan is not `PROJECTION_COVERED` over an `IXSCAN` of the expected index
//! alone or it examined any document, or its fetching twin does not `FETCH` through the same
//! index every document it returns, or if any answer of either side differs from the
//! generator's (so the two sides differ from each other; a returned document's `g` must also
//! be its `k`'s): the error names the query.
//!
//! This is a measurement, not a test: no figure here is PASS or MISS, and no time is asserted.
//! The run fails (non-zero) only if the server cannot be started or answers wrongly.
//!
//! `EBB_BENCH_SCALE` (a float, default 1.0) scales the document count (at least 1,000) and the
//! rounds (at least 5).

#[path = "common/mod.rs"]
mod common;

use std::collections::BTreeSet;
use std::time::Instant;

use bson::{Bson, Document, RawDocumentBuf, doc, rawdoc};
use common::{BenchResult, Server, XorShift, connect, median, run_bench, scale, scaled};
use mongodb::options::Hint;
use mongodb::{Collection, Database, IndexModel};

/// Documents in `c` (scaled, at least 1,000).
const DOCS: f64 = 100_000.0;
/// Distinct values of `g`.
const G_VALUES: i64 = 100;
/// Shortest and longest `pad` (the documents are about 60 bytes more).
const PAD_MIN: usize = 150;
const PAD_MAX: usize = 440;
/// Documents per `insert_many`.
const BATCH: usize = 1_000;
/// Alternating rounds per pair of queries (scaled, at least 5).
const ROUNDS: f64 = 40.0;
/// Queries of one side per round.
const PER_BLOCK: usize = 5;
/// Queries of each side before the rounds, not recorded.
const WARM_UP: usize = 2;
/// Point lookups of one side per round (phase 4).
const LOOKUP_BLOCK: usize = 50;
/// Distinct values of `k` the point lookups walk (phase 4).
const LOOKUP_VALUES: usize = 64;
const DB: &str = "indexonlybench";
const COLL: &str = "c";

fn main() {
    run_bench("index_only", bench());
}

async fn bench() -> BenchResult {
    let scale = scale();
    let n = scaled(DOCS, scale).max(1_000);
    let rounds = scaled(ROUNDS, scale).max(5);
    println!(
        "index_only bench: counts from keys alone, DISTINCT_SCAN, $or and covered projections, \
         each against the same query reading documents, over {n} documents ({} build, durable \
         store, EBB_BENCH_SCALE={scale})",
        if cfg!(debug_assertions) {
            "DEBUG"
        } else {
            "release"
        },
    );
    common::print_load_average();

    let server = Server::start()?;
    let client = connect(server.addr, "ebb-index-only-bench", Some(1)).await?;
    let db = client.database(DB);
    db.run_command(doc! { "ping": 1 }).await?;
    println!("store: {}", server.data_dir().display());

    let data = load(&db, n).await?;
    let ctx = Ctx {
        db: &db,
        coll: db.collection(COLL),
        rounds,
    };

    println!();
    println!(
        "{rounds} rounds per pair, {PER_BLOCK} queries of each side per round, the sides taking \
         turns (the first alternating); medians over the rounds of each round's median query"
    );

    // 1. Counts.
    let range = doc! { "g": { "$gte": 10, "$lt": 20 } };
    let range_fetch = doc! { "g": { "$gte": 10, "$lt": 20 }, "pad": { "$exists": true } };
    let equal = doc! { "g": 7 };
    let equal_fetch = doc! { "g": 7, "pad": { "$exists": true } };
    println!();
    println!("1. counts: from the keys of {{g: 1}} alone, against fetching every document");
    let mut results = Vec::new();
    for (label, keys, fetch, expected) in [
        (
            "countDocuments({g: {$gte: 10, $lt: 20}})",
            Query::CountDocuments(range),
            Query::CountDocuments(range_fetch),
            data.count(|d| (10..20).contains(&d.g)),
        ),
        (
            "count {g: 7}",
            Query::CountCommand(equal),
            Query::CountCommand(equal_fetch),
            data.count(|d| d.g == 7),
        ),
    ] {
        let expected = Answer::Count(expected);
        let (k, f) = (explain(&ctx, &keys).await?, explain(&ctx, &fetch).await?);
        print_plan("keys only", &keys, &k);
        print_plan("fetching ", &fetch, &f);
        if k.docs_examined != Some(0) || k.plan.contains("FETCH") {
            return Err(format!(
                "{}: the keys-only count is not read from the keys alone: plan {}, {:?} \
                 documents examined",
                keys.describe(),
                k.plan,
                k.docs_examined
            )
            .into());
        }
        if f.docs_examined.unwrap_or(0) == 0 || !f.plan.contains("FETCH") {
            return Err(format!(
                "{}: the fetching count fetched nothing: plan {}, {:?} documents examined",
                fetch.describe(),
                f.plan,
                f.docs_examined
            )
            .into());
        }
        for (q, e) in [(&keys, &k), (&fetch, &f)] {
            if !e.plan.contains("g_1") || e.plan.contains("k_1") || e.plan.contains("COLLSCAN") {
                return Err(format!(
                    "{}: expected a plan on the index {{g: 1}} alone, got {}",
                    q.describe(),
                    e.plan
                )
                .into());
            }
        }
        results.push((label, compare(&ctx, &keys, &fetch, &expected).await?));
    }
    print_table("keys", "fetch", &results);

    // 2. Distinct.
    let half = i64::try_from(n / 2)?;
    let under_half = doc! { "k": { "$lt": half } };
    println!();
    println!("2. distinct(\"g\"): DISTINCT_SCAN on {{g: 1}} against a collection scan");
    let mut results = Vec::new();
    for (label, filter, expected) in [
        (
            "distinct g, {}".to_string(),
            doc! {},
            data.distinct_g(|_| true),
        ),
        (
            format!("distinct g, {{k: {{$lt: {half}}}}}"),
            under_half,
            data.distinct_g(|d| d.k < half),
        ),
    ] {
        let index = Query::Distinct {
            filter: filter.clone(),
            natural: false,
        };
        let scan = Query::Distinct {
            filter,
            natural: true,
        };
        let (i, s) = (explain(&ctx, &index).await?, explain(&ctx, &scan).await?);
        print_plan("unhinted ", &index, &i);
        print_plan("hinted   ", &scan, &s);
        if !i.plan.contains("DISTINCT_SCAN") {
            return Err(format!(
                "{}: expected a DISTINCT_SCAN, got {}",
                index.describe(),
                i.plan
            )
            .into());
        }
        if !s.plan.contains("COLLSCAN") {
            return Err(format!(
                "{}: expected a collection scan, got {}",
                scan.describe(),
                s.plan
            )
            .into());
        }
        let expected = Answer::Values(expected);
        let summary = compare(&ctx, &index, &scan, &expected).await?;
        results.push((label, summary));
    }
    let results: Vec<(&str, Summary)> = results.iter().map(|(l, s)| (l.as_str(), *s)).collect();
    print_table("distinct", "scan", &results);

    // 3. $or.
    let or = doc! { "$or": [ { "g": 3 }, { "k": { "$lt": 100 } } ] };
    println!();
    println!(
        "3. find({{$or: [{{g: 3}}, {{k: {{$lt: 100}}}}]}}) drained, against a collection scan"
    );
    let unhinted = Query::Find {
        filter: or.clone(),
        natural: false,
    };
    let scan = Query::Find {
        filter: or,
        natural: true,
    };
    let (u, s) = (explain(&ctx, &unhinted).await?, explain(&ctx, &scan).await?);
    print_plan("unhinted ", &unhinted, &u);
    print_plan("hinted   ", &scan, &s);
    let expected = Answer::Ids(data.ids(|d| d.g == 3 || d.k < 100));
    let summary = compare(&ctx, &unhinted, &scan, &expected).await?;
    print_table(
        "unhinted",
        "scan",
        &[("$or [{g: 3}, {k: {$lt: 100}}]", summary)],
    );

    // 4. Covered projections.
    println!();
    println!(
        "4. find with a projection of the index's field: from the index entries alone \
         (PROJECTION_COVERED), against fetching every document"
    );
    let mut results = Vec::new();
    let range_g = Query::Projected {
        filter: doc! { "g": { "$gte": 10, "$lt": 20 } },
        field: "g",
    };
    let range_g_fetch = Query::Projected {
        filter: doc! { "g": { "$gte": 10, "$lt": 20 }, "pad": { "$exists": true } },
        field: "g",
    };
    let expected = Answer::Projected(data.projected_g(|d| (10..20).contains(&d.g)));
    check_covered(&ctx, &range_g, &range_g_fetch, "g_1", &expected).await?;
    results.push((
        "{g: {$gte: 10, $lt: 20}}, {g: 1, _id: 0}".to_string(),
        compare_many(&ctx, &[(range_g, range_g_fetch, expected)], PER_BLOCK).await?,
    ));
    let mut lookups = Vec::new();
    let mut rng = XorShift(0x5eed_0000_c0fe_4e44);
    for _ in 0..LOOKUP_VALUES {
        let k = i64::try_from(rng.below(u64::try_from(n)?))?;
        lookups.push((
            Query::Projected {
                filter: doc! { "k": k },
                field: "k",
            },
            Query::Projected {
                filter: doc! { "k": k, "pad": { "$exists": true } },
                field: "k",
            },
            Answer::Projected(data.projected_k(|d| d.k == k)),
        ));
    }
    if let Some((covered, fetch, expected)) = lookups.first() {
        check_covered(&ctx, covered, fetch, "k_1", expected).await?;
    }
    results.push((
        format!("{{k: v}}, {{k: 1, _id: 0}}, {LOOKUP_VALUES} values"),
        compare_many(&ctx, &lookups, LOOKUP_BLOCK).await?,
    ));
    let results: Vec<(&str, Summary)> = results.iter().map(|(l, s)| (l.as_str(), *s)).collect();
    print_table("covered", "fetch", &results);

    println!();
    if let Ok(load) = std::fs::read_to_string("/proc/loadavg") {
        println!(
            "load average after the run: {}",
            load.split_whitespace()
                .take(3)
                .collect::<Vec<_>>()
                .join(" ")
        );
    }
    drop(ctx);
    drop(db);
    drop(client);
    server.stop()
}

// ---------------------------------------------------------------------------------------------
// Documents
// ---------------------------------------------------------------------------------------------

/// What the generator put in one document.
#[derive(Debug, Clone, Copy)]
struct Row {
    id: i64,
    k: i64,
    g: i32,
}

/// Every document's fields, by `_id`: what every answer is checked against.
struct Data {
    rows: Vec<Row>,
}

impl Data {
    fn count(&self, pred: impl Fn(&Row) -> bool) -> i64 {
        i64::try_from(self.rows.iter().filter(|r| pred(r)).count()).unwrap_or(-1)
    }

    fn distinct_g(&self, pred: impl Fn(&Row) -> bool) -> Vec<Bson> {
        let set: BTreeSet<i32> = self.rows.iter().filter(|r| pred(r)).map(|r| r.g).collect();
        set.into_iter().map(Bson::Int32).collect()
    }

    fn ids(&self, pred: impl Fn(&Row) -> bool) -> Vec<i64> {
        self.rows.iter().filter(|r| pred(r)).map(|r| r.id).collect()
    }

    /// The `g` of every matching document (an int32, as stored), sorted.
    fn projected_g(&self, pred: impl Fn(&Row) -> bool) -> Vec<Bson> {
        let mut v: Vec<i32> = self.rows.iter().filter(|r| pred(r)).map(|r| r.g).collect();
        v.sort_unstable();
        v.into_iter().map(Bson::Int32).collect()
    }

    /// The `k` of every matching document (an int64, as stored), sorted.
    fn projected_k(&self, pred: impl Fn(&Row) -> bool) -> Vec<Bson> {
        let mut v: Vec<i64> = self.rows.iter().filter(|r| pred(r)).map(|r| r.k).collect();
        v.sort_unstable();
        v.into_iter().map(Bson::Int64).collect()
    }
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

/// The document of `row`, its `pad` [`PAD_MIN`] to [`PAD_MAX`] letters long.
fn make_doc(row: Row) -> RawDocumentBuf {
    let h = splitmix(u64::try_from(row.id).unwrap_or(0));
    let span = u64::try_from(PAD_MAX - PAD_MIN + 1).unwrap_or(1);
    let len = PAD_MIN + usize::try_from(h % span).unwrap_or(0);
    let letter = char::from(b'a' + u8::try_from((h >> 32) % 26).unwrap_or(0));
    rawdoc! {
        "_id": row.id,
        "g": row.g,
        "k": row.k,
        "pad": letter.to_string().repeat(len),
    }
}

/// Loads `c` with `n` documents and builds `{g: 1}` and `{k: 1}`; returns what it holds.
async fn load(db: &Database, n: usize) -> BenchResult<Data> {
    let ks = permutation(n, 0x5eed_0000_1d0e_0417);
    let mut rows = Vec::with_capacity(n);
    for (i, &k) in ks.iter().enumerate() {
        rows.push(Row {
            id: i64::try_from(i)?,
            k,
            g: i32::try_from(k.rem_euclid(G_VALUES))?,
        });
    }
    let coll = db.collection::<RawDocumentBuf>(COLL);
    let took = common::insert_batches(&coll, n, BATCH, |i| {
        rows.get(i)
            .copied()
            .map_or_else(RawDocumentBuf::new, make_doc)
    })
    .await?;
    let counted = coll.count_documents(doc! {}).await?;
    if counted != u64::try_from(n)? {
        return Err(format!("{COLL} holds {counted} documents after loading {n}").into());
    }
    let bytes: usize = rows.iter().map(|&r| make_doc(r).as_bytes().len()).sum();
    println!(
        "loaded {COLL}: {n} documents ({:.1} MB, {:.0} B each on average) in {:.2} s",
        common::to_f64(bytes) / 1e6,
        common::to_f64(bytes) / common::to_f64(n),
        took.as_secs_f64()
    );
    for keys in [doc! { "g": 1 }, doc! { "k": 1 }] {
        let start = Instant::now();
        coll.create_index(IndexModel::builder().keys(keys.clone()).build())
            .await?;
        println!(
            "createIndexes {keys}: {:.2} s",
            start.elapsed().as_secs_f64()
        );
    }
    Ok(Data { rows })
}

// ---------------------------------------------------------------------------------------------
// Queries
// ---------------------------------------------------------------------------------------------

/// One side of a comparison.
#[derive(Debug, Clone)]
enum Query {
    /// The driver's `countDocuments(filter)`.
    CountDocuments(Document),
    /// The `count` command with `query: filter`.
    CountCommand(Document),
    /// `distinct("g", filter)`, hinted `{$natural: 1}` if `natural`.
    Distinct { filter: Document, natural: bool },
    /// `find(filter)` drained, hinted `{$natural: 1}` if `natural`.
    Find { filter: Document, natural: bool },
    /// `find(filter)` with the projection `{field: 1, _id: 0}`, drained.
    Projected {
        filter: Document,
        field: &'static str,
    },
}

/// What a query answered, in a form two answers compare in.
#[derive(Debug, Clone, PartialEq)]
enum Answer {
    Count(i64),
    /// Sorted.
    Values(Vec<Bson>),
    /// The documents' `_id`s, sorted; each document checked against the generator.
    Ids(Vec<i64>),
    /// The projected field's values, sorted (by number; the types compare too); each document
    /// checked to hold that field alone.
    Projected(Vec<Bson>),
}

fn natural() -> Hint {
    Hint::Keys(doc! { "$natural": 1 })
}

impl Query {
    /// The query as the shell would write it (for errors).
    fn describe(&self) -> String {
        match self {
            Query::CountDocuments(f) => format!("db.{COLL}.countDocuments({f})"),
            Query::CountCommand(f) => format!("{{count: \"{COLL}\", query: {f}}}"),
            Query::Distinct { filter, natural } => format!(
                "db.{COLL}.distinct(\"g\", {filter}{})",
                if *natural {
                    ", {hint: {$natural: 1}}"
                } else {
                    ""
                }
            ),
            Query::Find { filter, natural } => format!(
                "db.{COLL}.find({filter}){}",
                if *natural { ".hint({$natural: 1})" } else { "" }
            ),
            Query::Projected { filter, field } => {
                format!("db.{COLL}.find({filter}, {})", projection(field))
            }
        }
    }

    /// The command `explain` wraps.
    fn command(&self) -> Document {
        let hinted = |mut d: Document, natural: bool| {
            if natural {
                d.insert("hint", doc! { "$natural": 1 });
            }
            d
        };
        match self {
            Query::CountDocuments(f) => doc! {
                "aggregate": COLL,
                "pipeline": [
                    { "$match": f.clone() },
                    { "$group": { "_id": 1, "n": { "$sum": 1 } } },
                ],
                "cursor": {},
            },
            Query::CountCommand(f) => doc! { "count": COLL, "query": f.clone() },
            Query::Distinct { filter, natural } => hinted(
                doc! { "distinct": COLL, "key": "g", "query": filter.clone() },
                *natural,
            ),
            Query::Find { filter, natural } => {
                hinted(doc! { "find": COLL, "filter": filter.clone() }, *natural)
            }
            Query::Projected { filter, field } => doc! {
                "find": COLL,
                "filter": filter.clone(),
                "projection": projection(field),
            },
        }
    }

    async fn run(&self, ctx: &Ctx<'_>) -> BenchResult<Answer> {
        match self {
            Query::CountDocuments(f) => Ok(Answer::Count(i64::try_from(
                ctx.coll.count_documents(f.clone()).await?,
            )?)),
            Query::CountCommand(_) => {
                let reply = ctx.db.run_command(self.command()).await?;
                if !common::ok(&reply) {
                    return Err(format!("{}: {reply}", self.describe()).into());
                }
                Ok(Answer::Count(common::integer(&reply, "n")?))
            }
            Query::Distinct { filter, natural: n } => {
                let mut action = ctx.coll.distinct("g", filter.clone());
                if *n {
                    action = action.hint(natural());
                }
                let mut values = action.await?;
                values.sort_by_key(numeric);
                Ok(Answer::Values(values))
            }
            Query::Find { filter, natural: n } => {
                let mut action = ctx.coll.find(filter.clone());
                if *n {
                    action = action.hint(natural());
                }
                let mut cursor = action.await?;
                let mut ids = Vec::new();
                while cursor.advance().await? {
                    let d = cursor.current();
                    let id = d.get_i64("_id")?;
                    if let Err(e) = check_row(id, d.get_i32("g")?, d.get_i64("k")?) {
                        return Err(format!("{}: {e}", self.describe()).into());
                    }
                    ids.push(id);
                }
                ids.sort_unstable();
                Ok(Answer::Ids(ids))
            }
            Query::Projected { filter, field } => {
                let mut cursor = ctx
                    .coll
                    .find(filter.clone())
                    .projection(projection(field))
                    .await?;
                let mut values = Vec::new();
                while cursor.advance().await? {
                    let d = cursor.current();
                    let mut fields = d.iter();
                    let value = match (fields.next().transpose()?, fields.next()) {
                        (Some((name, value)), None) if name == *field => value,
                        _ => {
                            return Err(format!(
                                "{}: returned {:?}, expected a document of {field} alone",
                                self.describe(),
                                d
                            )
                            .into());
                        }
                    };
                    values.push(Bson::try_from(value)?);
                }
                values.sort_by_key(numeric);
                Ok(Answer::Projected(values))
            }
        }
    }
}

/// The projection of phase 4: `{field: 1, _id: 0}`.
fn projection(field: &str) -> Document {
    doc! { field: 1, "_id": 0 }
}

/// An integer value's number, for sorting `distinct` values (others sort first).
fn numeric(v: &Bson) -> i64 {
    match v {
        Bson::Int32(x) => i64::from(*x),
        Bson::Int64(x) => *x,
        _ => i64::MIN,
    }
}

/// Where the queries go.
struct Ctx<'a> {
    db: &'a Database,
    coll: Collection<RawDocumentBuf>,
    rounds: usize,
}

/// Whether a returned document's `g` is its `k`'s, as the generator made it.
fn check_row(id: i64, g: i32, k: i64) -> Result<(), String> {
    if i64::from(g) != k.rem_euclid(G_VALUES) {
        return Err(format!("_id {id} returned with g {g} and k {k}"));
    }
    Ok(())
}

/// Runs `query`, checks its answer; returns its time in seconds.
async fn timed(ctx: &Ctx<'_>, query: &Query, expected: &Answer) -> BenchResult<f64> {
    let start = Instant::now();
    let answer = query.run(ctx).await?;
    let took = start.elapsed().as_secs_f64();
    if &answer != expected {
        return Err(format!(
            "wrong answer to {}: {}, expected {}",
            query.describe(),
            brief(&answer),
            brief(expected)
        )
        .into());
    }
    Ok(took)
}

/// An answer, short enough for an error message, with what tells two apart.
fn brief(answer: &Answer) -> String {
    match answer {
        Answer::Count(n) => format!("n = {n}"),
        Answer::Values(v) => format!(
            "{} values {:?}",
            v.len(),
            v.iter().map(ToString::to_string).collect::<Vec<_>>()
        ),
        Answer::Ids(ids) => format!(
            "{} documents, _id sum {}, first {:?}",
            ids.len(),
            ids.iter().sum::<i64>(),
            ids.iter().take(10).collect::<Vec<_>>()
        ),
        Answer::Projected(v) => format!(
            "{} values, sum {}, first {:?}",
            v.len(),
            v.iter().map(numeric).sum::<i64>(),
            v.iter()
                .take(10)
                .map(ToString::to_string)
                .collect::<Vec<_>>()
        ),
    }
}

/// One pair's medians over the rounds, in seconds, and their ratios (`b / a`).
#[derive(Debug, Clone, Copy)]
struct Summary {
    a: f64,
    b: f64,
    ratio: f64,
    lo: f64,
    hi: f64,
    answer_size: usize,
}

/// Warm-up, then the rounds: `a` and `b` taking turns, each checked against `expected`.
async fn compare(ctx: &Ctx<'_>, a: &Query, b: &Query, expected: &Answer) -> BenchResult<Summary> {
    compare_many(ctx, &[(a.clone(), b.clone(), expected.clone())], PER_BLOCK).await
}

/// [`compare`] over several versions of one pair (`(a, b, expected)`, the same shape with
/// other values), `per_block` queries of a side per round: a block walks `cases` in turn,
/// from where the round's first block started, so both sides run the same values. The
/// answer size shown is the first case's.
async fn compare_many(
    ctx: &Ctx<'_>,
    cases: &[(Query, Query, Answer)],
    per_block: usize,
) -> BenchResult<Summary> {
    let Some((_, _, first)) = cases.first() else {
        return Err("compare_many: no case".into());
    };
    for (a, b, expected) in cases.iter().cycle().take(WARM_UP * cases.len()) {
        timed(ctx, a, expected).await?;
        timed(ctx, b, expected).await?;
    }
    let (mut a_rounds, mut b_rounds, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..ctx.rounds {
        let mut times = [Vec::new(), Vec::new()];
        for turn in 0..2 {
            let side = (round + turn) % 2;
            for i in 0..per_block {
                let (a, b, expected) = &cases[(round * per_block + i) % cases.len()];
                let query = if side == 0 { a } else { b };
                times[side].push(timed(ctx, query, expected).await?);
            }
        }
        let (ma, mb) = (median(&times[0]), median(&times[1]));
        a_rounds.push(ma);
        b_rounds.push(mb);
        ratios.push(mb / ma.max(1e-9));
    }
    let (lo, hi) = ratios
        .iter()
        .fold((f64::MAX, f64::MIN), |(lo, hi), &r| (lo.min(r), hi.max(r)));
    Ok(Summary {
        a: median(&a_rounds),
        b: median(&b_rounds),
        ratio: median(&ratios),
        lo,
        hi,
        answer_size: match first {
            Answer::Count(n) => usize::try_from(*n).unwrap_or(0),
            Answer::Values(v) | Answer::Projected(v) => v.len(),
            Answer::Ids(ids) => ids.len(),
        },
    })
}

/// The pairs' medians: `a` and `b` are the sides' column names.
fn print_table(a: &str, b: &str, rows: &[(&str, Summary)]) {
    let ratio = format!("{b}/{a}");
    println!(
        "  {:<44} {:>8} {:>12} {:>12} {:>14} {:>18}",
        "",
        "answer",
        format!("{a} ms"),
        format!("{b} ms"),
        ratio,
        "rounds' ratios"
    );
    for (label, s) in rows {
        let range = format!("{:.2}..{:.2}x", s.lo, s.hi);
        println!(
            "  {label:<44} {:>8} {:>12.3} {:>12.3} {:>13.2}x {range:>18}",
            s.answer_size,
            s.a * 1e3,
            s.b * 1e3,
            s.ratio,
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Explain
// ---------------------------------------------------------------------------------------------

/// What `explain` (`executionStats`) says of a query.
struct Explained {
    /// The winning plan's stages, nested: `FETCH(IXSCAN g_1)`.
    plan: String,
    keys_examined: Option<i64>,
    docs_examined: Option<i64>,
}

async fn explain(ctx: &Ctx<'_>, query: &Query) -> BenchResult<Explained> {
    let reply = ctx
        .db
        .run_command(doc! { "explain": query.command(), "verbosity": "executionStats" })
        .await?;
    let plan = find_field(&reply, "winningPlan")
        .and_then(|p| match p {
            Bson::Document(d) => Some(shape(d)),
            _ => None,
        })
        .ok_or_else(|| format!("explain of {}: no winning plan: {reply}", query.describe()))?;
    let number = |field: &str| {
        find_field(&reply, field).and_then(|v| match v {
            Bson::Int32(x) => Some(i64::from(*x)),
            Bson::Int64(x) => Some(*x),
            _ => None,
        })
    };
    Ok(Explained {
        plan,
        keys_examined: number("totalKeysExamined"),
        docs_examined: number("totalDocsExamined"),
    })
}

/// The first value of `field` anywhere in `doc` (depth first): an aggregate's explain nests
/// its query's under `stages`.
fn find_field<'a>(doc: &'a Document, field: &str) -> Option<&'a Bson> {
    if let Some(v) = doc.get(field) {
        return Some(v);
    }
    doc.values().find_map(|v| find_in(v, field))
}

fn find_in<'a>(value: &'a Bson, field: &str) -> Option<&'a Bson> {
    match value {
        Bson::Document(d) => find_field(d, field),
        Bson::Array(a) => a.iter().find_map(|v| find_in(v, field)),
        _ => None,
    }
}

/// A plan stage and its inputs: `STAGE indexName(input, ...)`.
fn shape(stage: &Document) -> String {
    let mut out = stage.get_str("stage").unwrap_or("?").to_string();
    if let Ok(name) = stage.get_str("indexName") {
        out.push(' ');
        out.push_str(name);
    }
    let mut inputs: Vec<String> = Vec::new();
    if let Ok(input) = stage.get_document("inputStage") {
        inputs.push(shape(input));
    }
    if let Ok(list) = stage.get_array("inputStages") {
        inputs.extend(list.iter().filter_map(Bson::as_document).map(shape));
    }
    if !inputs.is_empty() {
        out.push('(');
        out.push_str(&inputs.join(", "));
        out.push(')');
    }
    out
}

/// Explains a covered find and its fetching twin, prints both plans, and fails unless the
/// first is `PROJECTION_COVERED` over an `IXSCAN` of `index` that examined no document and the
/// second `FETCH`es through `index` every document of the answer.
async fn check_covered(
    ctx: &Ctx<'_>,
    covered: &Query,
    fetch: &Query,
    index: &str,
    expected: &Answer,
) -> BenchResult {
    let (c, f) = (explain(ctx, covered).await?, explain(ctx, fetch).await?);
    print_plan("covered  ", covered, &c);
    print_plan("fetching ", fetch, &f);
    let scan = format!("IXSCAN {index}");
    if c.plan != format!("PROJECTION_COVERED({scan})") || c.docs_examined != Some(0) {
        return Err(format!(
            "{}: expected PROJECTION_COVERED({scan}) examining no document, got {}, {:?} \
             documents examined",
            covered.describe(),
            c.plan,
            c.docs_examined
        )
        .into());
    }
    let returned = match expected {
        Answer::Projected(v) => i64::try_from(v.len())?,
        _ => return Err(format!("{}: not a projection", covered.describe()).into()),
    };
    if !f.plan.contains(&format!("FETCH({scan})"))
        || f.plan.contains("PROJECTION_COVERED")
        || f.docs_examined != Some(returned)
    {
        return Err(format!(
            "{}: expected a FETCH({scan}) examining the {returned} documents returned, got {}, \
             {:?} documents examined",
            fetch.describe(),
            f.plan,
            f.docs_examined
        )
        .into());
    }
    Ok(())
}

fn print_plan(side: &str, query: &Query, e: &Explained) {
    let show = |v: Option<i64>| v.map_or_else(|| "?".to_string(), |v| v.to_string());
    println!(
        "  {side} {}: {}; keys examined {}, documents examined {}",
        query.describe(),
        e.plan,
        show(e.keys_examined),
        show(e.docs_examined)
    );
}
