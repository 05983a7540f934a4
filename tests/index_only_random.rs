//! A randomized differential test of the planner's index-only plans (`COUNT_SCAN` and counts
//! from keys, covered projections, `DISTINCT_SCAN`, the `$or` union of index scans), through
//! the `mongodb` crate.
//!
//! Random documents whose fields take values of many types (numbers equal across int32, int64,
//! double and decimal128, `-0.0`, NaN, strings, `null`, missing, documents, dates, ObjectIds,
//! sometimes arrays), random indexes (single, compound, descending, sparse, partial, on a
//! nested field, with `_id`), random queries. Each query is answered as planned and hinted
//! `{$natural: 1}` (a collection scan, which reads every document): `find` (whole documents,
//! and projections of index fields), `count` with skip and limit, `countDocuments`, other
//! counting pipelines, and `distinct` on every field. Any difference, to the type of a value
//! or the bits of a double, is a failure. Random writes run between rounds, `validate` after
//! them. Explain tells which plans ran; the test fails if the index-only ones never did.
//!
//! Of values that compare equal (`1`, `1.0`, `"B"` and `"b"` under a collation), `distinct`
//! answers one, that of the first document the plan meets: an index scan may legitimately
//! answer another type than a collection scan (counted, not failed). A single-field
//! `DISTINCT_SCAN` must answer the collection scan's; one over a compound index does not (a
//! known discrepancy, counted and reported unless `EBB_INDEX_ONLY_STRICT=1`, see
//! `distinct_scan_on_compound_index_keeps_natural_order_type`).
//!
//! Found so far, minimized at the end of this file: `prefix_range_on_descending_compound_key`
//! (wrong answers, left failing on purpose; random seeds whose queries hit it fail too).
//!
//! Settings: `EBB_INDEX_ONLY_SEED` replays a seed (printed at the start),
//! `EBB_INDEX_ONLY_ROUNDS` sets the number of rounds, `EBB_INDEX_ONLY_SCALE` multiplies the
//! queries per round, `EBB_INDEX_ONLY_NO_PREFIX_REGEX=1` leaves out anchored regexes (to look
//! past the bug above), `EBB_INDEX_ONLY_STRICT=1` fails known discrepancies too.

mod common;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::str::FromStr;

use bson::oid::ObjectId;
use bson::spec::BinarySubtype;
use bson::{Binary, Bson, DateTime, Decimal128, Document, Regex, Timestamp, doc};
use common::rng::Rng;
use common::{TestResult, TestServer, advance_clock};
use mongodb::options::Hint;
use mongodb::{Client, Database};

/// The fields indexes are made of, queried, written and asked for `distinct` values.
const FIELDS: [&str; 5] = ["a", "b", "c", "d.x", "d"];

fn chance(rng: &mut Rng, percent: usize) -> bool {
    rng.below(100) < percent
}

fn pick<T: Clone>(rng: &mut Rng, xs: &[T]) -> T {
    xs[rng.below(xs.len())].clone()
}

fn dec(s: &str) -> Bson {
    Decimal128::from_str(s).map_or(Bson::Null, Bson::Decimal128)
}

fn natural() -> Document {
    doc! { "$natural": 1 }
}

/// A small number, often the same one in several types.
fn number(rng: &mut Rng) -> Bson {
    let k = i32::try_from(rng.below(7)).unwrap_or(0) - 1;
    match rng.below(13) {
        0..=2 => Bson::Int32(k),
        3 | 4 => Bson::Int64(i64::from(k)),
        5 | 6 => Bson::Double(f64::from(k)),
        7 => Bson::Double(f64::from(k) + 0.5),
        8 | 9 => dec(pick(
            rng,
            &[
                "1.0", "1.00", "1", "2", "2.0", "-0", "0", "0.0", "0.5", "1.5", "0.1", "-1", "3",
            ],
        )),
        10 | 11 => pick(
            rng,
            &[
                Bson::Double(-0.0),
                Bson::Int32(0),
                Bson::Double(f64::NAN),
                dec("NaN"),
                dec("-NaN"),
                Bson::Double(f64::INFINITY),
                Bson::Double(f64::NEG_INFINITY),
                dec("Infinity"),
                dec("-Infinity"),
                Bson::Double(0.1),
                dec("1E+400"),
                dec("-1E+400"),
                dec("1E-400"),
                Bson::Int64((1 << 53) + 1),
                Bson::Int64(1 << 53),
                Bson::Double(9_007_199_254_740_992.0),
                dec("9007199254740993"),
                Bson::Int64(i64::MAX),
                Bson::Int64(i64::MIN),
                Bson::Double(9.223_372_036_854_776e18),
                Bson::Int32(i32::MIN),
                dec("-0.0"),
                Bson::Double(f64::MIN_POSITIVE),
                Bson::Double(5e-324),
            ],
        ),
        _ => Bson::Int32(k),
    }
}

fn string(rng: &mut Rng) -> Bson {
    Bson::String(
        pick(
            rng,
            &[
                "",
                "a",
                "ab",
                "abc",
                "b",
                "B",
                "é",
                "e\u{301}",
                "日本",
                "a b",
                "z\u{10FFFF}",
                "1",
                "a\u{7f}",
                "\u{ffff}",
            ],
        )
        .to_owned(),
    )
}

/// A value that is not an array.
fn scalar(rng: &mut Rng) -> Bson {
    match rng.below(22) {
        0..=9 => number(rng),
        10..=12 => string(rng),
        13 => Bson::Null,
        14 => Bson::Boolean(chance(rng, 50)),
        15 => Bson::DateTime(DateTime::from_millis(pick(rng, &[-1000, 0, 1000, 5000]))),
        16 => Bson::ObjectId(ObjectId::from_bytes(
            [pick(rng, &[0_u8, 1, 0x7f, 0xff]); 12],
        )),
        17 | 18 => {
            let inner = match rng.below(8) {
                0 => doc! {},
                1 => doc! { "y": number(rng) },
                2 => doc! { "x": number(rng), "y": 2 },
                3 => doc! { "x": string(rng) },
                4 => doc! { "x": Bson::Null },
                5 => doc! { "x": { "x": number(rng) } },
                _ => doc! { "x": number(rng) },
            };
            Bson::Document(inner)
        }
        19 => match rng.below(8) {
            0 => Bson::Binary(Binary {
                subtype: BinarySubtype::Generic,
                bytes: vec![1, 2],
            }),
            1 => Bson::Timestamp(Timestamp {
                time: 5,
                increment: 1,
            }),
            2 => Bson::MinKey,
            3 => Bson::MaxKey,
            4 => Bson::RegularExpression(Regex {
                pattern: bson::cstr!("^ab").into(),
                options: bson::cstr!("").into(),
            }),
            5 => Bson::Symbol("ab".to_owned()),
            6 => Bson::Undefined,
            _ => Bson::Binary(Binary {
                subtype: BinarySubtype::Uuid,
                bytes: vec![0; 16],
            }),
        },
        _ => number(rng),
    }
}

/// A value, sometimes an array when `arrays`.
fn value(rng: &mut Rng, arrays: bool) -> Bson {
    if arrays && chance(rng, 15) {
        let n = rng.below(4);
        let mut items: Vec<Bson> = (0..n).map(|_| scalar(rng)).collect();
        if chance(rng, 10) {
            items.push(Bson::Array(vec![number(rng)]));
        }
        return Bson::Array(items);
    }
    scalar(rng)
}

/// An `_id` of value `id`, of a type that depends on it only (so that a replacement keeps it).
fn typed_id(id: i32) -> Bson {
    match id % 5 {
        0 => Bson::Int64(i64::from(id)),
        1 => Bson::Double(f64::from(id)),
        2 => dec(&id.to_string()),
        _ => Bson::Int32(id),
    }
}

/// A random document: `a`, `b`, `c` (each sometimes missing), `d` (a document `{x}`, a
/// scalar, missing, or with `arrays`, an array of documents).
fn random_doc(rng: &mut Rng, id: i32, arrays: &[&str]) -> Document {
    let mut d = doc! { "_id": typed_id(id) };
    let mut fields = ["a", "b", "c"];
    // Stored field order varies.
    if chance(rng, 30) {
        fields.reverse();
    }
    for f in fields {
        if chance(rng, 85) {
            d.insert(f, value(rng, arrays.contains(&f)));
        }
    }
    match rng.below(10) {
        0 => {}
        1 => {
            d.insert("d", scalar(rng));
        }
        2 if arrays.contains(&"d.x") => {
            d.insert(
                "d",
                vec![
                    Bson::Document(doc! { "x": scalar(rng) }),
                    Bson::Document(doc! { "x": scalar(rng) }),
                ],
            );
        }
        3 => {
            d.insert("d", doc! { "y": 1 });
        }
        _ => {
            d.insert("d", doc! { "x": value(rng, arrays.contains(&"d.x")) });
        }
    }
    d
}

/// 2 to 4 random index specs (distinct key patterns).
fn random_indexes(rng: &mut Rng, n: usize) -> Vec<Document> {
    let mut out: Vec<Document> = Vec::new();
    let dir = |rng: &mut Rng| if chance(rng, 70) { 1 } else { -1 };
    while out.len() < n {
        let mut key = Document::new();
        match rng.below(12) {
            0..=4 => {
                key.insert(pick(rng, &FIELDS), dir(rng));
            }
            5..=8 => {
                let f1 = pick(rng, &FIELDS);
                let mut f2 = pick(rng, &FIELDS);
                while f2 == f1 {
                    f2 = pick(rng, &FIELDS);
                }
                key.insert(f1, dir(rng));
                key.insert(f2, dir(rng));
                if chance(rng, 20) {
                    let f3 = pick(rng, &FIELDS);
                    if !key.contains_key(f3) {
                        key.insert(f3, dir(rng));
                    }
                }
            }
            9 | 10 => {
                key.insert(pick(rng, &["a", "b", "c"]), dir(rng));
                key.insert("_id", dir(rng));
            }
            _ => {
                key.insert("_id", 1);
                key.insert(pick(rng, &["a", "b"]), dir(rng));
            }
        }
        if out.iter().any(|s| s.get_document("key").ok() == Some(&key)) {
            continue;
        }
        let mut spec = doc! { "key": key, "name": format!("i{}", out.len()) };
        match rng.below(10) {
            0 | 1 => {
                spec.insert("sparse", true);
            }
            2..=4 => {
                let f = pick(rng, &["a", "b", "c"]);
                let k = i32::try_from(rng.below(4)).unwrap_or(0);
                let expr = match rng.below(6) {
                    0 => doc! { f: { "$gt": k } },
                    1 => doc! { f: { "$gte": k } },
                    2 => doc! { f: { "$lte": k } },
                    3 => doc! { f: { "$exists": true } },
                    4 => doc! { f: k },
                    _ => doc! { f: { "$gt": "a" } },
                };
                spec.insert("partialFilterExpression", expr);
            }
            _ => {}
        }
        out.push(spec);
    }
    out
}

const TYPES: [&str; 13] = [
    "number",
    "double",
    "int",
    "long",
    "decimal",
    "string",
    "null",
    "object",
    "array",
    "bool",
    "date",
    "objectId",
    "undefined",
];

/// A value for a query operand: a scalar, sometimes an array.
fn operand(rng: &mut Rng) -> Bson {
    if chance(rng, 5) {
        return Bson::Array(vec![scalar(rng), number(rng)]);
    }
    loop {
        // (A regex operand matches strings by its prefix.)
        let v = scalar(rng);
        if !(no_prefix_regex() && matches!(v, Bson::RegularExpression(_))) {
            return v;
        }
    }
}

/// One predicate on a field: what goes under the field's name.
fn predicate(rng: &mut Rng) -> Bson {
    let cmp = ["$gt", "$gte", "$lt", "$lte"];
    match rng.below(20) {
        0..=3 => operand(rng),
        4 => Bson::Document(doc! { "$eq": operand(rng) }),
        5..=8 => {
            let op = pick(rng, &cmp);
            Bson::Document(doc! { op: operand(rng) })
        }
        9 | 10 => {
            let lo = pick(rng, &["$gt", "$gte"]);
            let hi = pick(rng, &["$lt", "$lte"]);
            let a = scalar(rng);
            let b = if chance(rng, 80) {
                number(rng)
            } else {
                scalar(rng)
            };
            Bson::Document(doc! { lo: a, hi: b })
        }
        11 | 12 => {
            let n = 1 + rng.below(4);
            let mut vals: Vec<Bson> = (0..n).map(|_| operand(rng)).collect();
            if chance(rng, 30) {
                vals.push(Bson::Null);
            }
            if chance(rng, 10) && !no_prefix_regex() {
                vals.push(Bson::RegularExpression(Regex {
                    pattern: bson::cstr!("^a").into(),
                    options: bson::cstr!("").into(),
                }));
            }
            Bson::Document(doc! { "$in": vals })
        }
        13 => Bson::Null,
        14 => Bson::Document(doc! { "$exists": chance(rng, 50) }),
        15 => Bson::Document(doc! { "$ne": operand(rng) }),
        16 => Bson::Document(doc! { "$type": pick(rng, &TYPES) }),
        17 => {
            let patterns: &[&str] = if no_prefix_regex() {
                &["^", "a", "b$", ".*"]
            } else {
                &[
                    "^a", "^", "^ab", "^é", "^日", "a", "^a.*", "^A", "^\\x7f", "^z",
                ]
            };
            let mut d = doc! { "$regex": pick(rng, patterns) };
            if chance(rng, 20) {
                d.insert("$options", "i");
            }
            Bson::Document(d)
        }
        18 => {
            let vals: Vec<Bson> = (0..=rng.below(3)).map(|_| operand(rng)).collect();
            Bson::Document(doc! { "$nin": vals })
        }
        _ => {
            let op = pick(rng, &cmp);
            Bson::Document(doc! { "$not": { op: scalar(rng) } })
        }
    }
}

/// A conjunction of 1 to `max` predicates, mostly on fields that `focus` (key fields of the
/// collection's indexes) names.
fn conjunction(rng: &mut Rng, focus: &[String], max: usize) -> Document {
    let mut out = Document::new();
    let mut extra: Vec<Bson> = Vec::new();
    for _ in 0..=rng.below(max) {
        let field = if !focus.is_empty() && chance(rng, 75) {
            pick(rng, focus)
        } else {
            pick(rng, &["a", "b", "c", "d.x", "d", "_id"]).to_owned()
        };
        let p = if field == "_id" && chance(rng, 70) {
            let k = i32::try_from(rng.below(300)).unwrap_or(0);
            let op = pick(rng, &["$gt", "$gte", "$lt", "$lte"]);
            Bson::Document(doc! { op: k })
        } else {
            predicate(rng)
        };
        if out.contains_key(&field) {
            extra.push(Bson::Document(doc! { field: p }));
        } else {
            out.insert(field, p);
        }
    }
    if !extra.is_empty() {
        out.insert("$and", extra);
    }
    out
}

fn cmp_expr(rng: &mut Rng) -> Document {
    let op = pick(rng, &["$gt", "$lt", "$eq", "$gte", "$ne"]);
    let field = pick(rng, &["$a", "$b", "$c", "$d.x"]);
    doc! { op: [field, { "$literal": scalar(rng) }] }
}

/// A predicate that index bounds may decide exactly (no `null`, regex, document or array).
fn exact_predicate(rng: &mut Rng) -> Bson {
    let plain = |rng: &mut Rng| loop {
        let v = scalar(rng);
        if !matches!(
            v,
            Bson::Null | Bson::Document(_) | Bson::Undefined | Bson::RegularExpression(_)
        ) {
            return v;
        }
    };
    match rng.below(8) {
        0 | 1 => plain(rng),
        2 => Bson::Document(doc! { "$eq": plain(rng) }),
        3 | 4 => {
            let op = pick(rng, &["$gt", "$gte", "$lt", "$lte"]);
            Bson::Document(doc! { op: plain(rng) })
        }
        5 => {
            let lo = pick(rng, &["$gt", "$gte"]);
            let hi = pick(rng, &["$lt", "$lte"]);
            Bson::Document(doc! { lo: plain(rng), hi: number(rng) })
        }
        _ => {
            let vals: Vec<Bson> = (0..=rng.below(4)).map(|_| plain(rng)).collect();
            Bson::Document(doc! { "$in": vals })
        }
    }
}

/// A conjunction on the leading fields of an index `key` that its bounds may decide.
fn bounded(rng: &mut Rng, key: &[String]) -> Document {
    let mut q = Document::new();
    for (i, f) in key.iter().enumerate() {
        if i > 0 && chance(rng, 50) {
            break;
        }
        let p = if f == "_id" {
            let k = i32::try_from(rng.below(300)).unwrap_or(0);
            Bson::Document(doc! { pick(rng, &["$gt", "$lt", "$gte"]): k })
        } else {
            exact_predicate(rng)
        };
        q.insert(f.clone(), p);
    }
    q
}

/// A random query over a collection whose indexes name `focus` and whose partial filters are
/// `partials`.
fn random_query(
    rng: &mut Rng,
    focus: &[String],
    keys: &[Vec<String>],
    partials: &[Document],
) -> Document {
    let mut q = match rng.below(30) {
        0 => Document::new(),
        1..=9 => conjunction(rng, focus, 3),
        20..=26 if !keys.is_empty() => {
            let key = pick(rng, keys);
            bounded(rng, &key)
        }
        27..=29 if !keys.is_empty() => {
            let branches: Vec<Bson> = (0..2 + rng.below(2))
                .map(|_| {
                    let key = pick(rng, keys);
                    let mut b = bounded(rng, &key);
                    if chance(rng, 20) {
                        b.extend(conjunction(rng, focus, 1));
                    }
                    Bson::Document(b)
                })
                .collect();
            doc! { "$or": branches }
        }
        10..=13 => {
            let n = 2 + rng.below(2);
            let branches: Vec<Bson> = (0..n)
                .map(|_| Bson::Document(conjunction(rng, focus, 2)))
                .collect();
            let mut q = if chance(rng, 30) {
                conjunction(rng, focus, 1)
            } else {
                Document::new()
            };
            q.remove("$or");
            q.insert("$or", branches);
            q
        }
        14 | 15 => {
            let or = |rng: &mut Rng| {
                let n = 1 + rng.below(3);
                let branches: Vec<Bson> = (0..n)
                    .map(|_| Bson::Document(conjunction(rng, focus, 2)))
                    .collect();
                doc! { "$or": branches }
            };
            match rng.below(4) {
                0 => doc! { "$and": [conjunction(rng, focus, 2), conjunction(rng, focus, 2)] },
                1 => doc! { "$and": [or(rng), conjunction(rng, focus, 2)] },
                2 => doc! { "$or": [or(rng), conjunction(rng, focus, 2)] },
                _ => {
                    let mut q = or(rng);
                    q.insert("$and", [Bson::Document(or(rng))]);
                    q
                }
            }
        }
        16 | 17 => {
            let mut q = conjunction(rng, focus, 2);
            q.insert("$nor", [Bson::Document(conjunction(rng, focus, 1))]);
            q
        }
        _ => {
            let mut q = conjunction(rng, focus, 2);
            q.insert("$expr", cmp_expr(rng));
            q
        }
    };
    // Imply a partial filter now and then, so that partial indexes are used.
    if !partials.is_empty() && chance(rng, 30) {
        let p = pick(rng, partials);
        for (k, v) in &p {
            if q.contains_key(k) {
                let prior = q.remove(k).unwrap_or(Bson::Null);
                let mut and = match q.remove("$and") {
                    Some(Bson::Array(a)) => a,
                    _ => Vec::new(),
                };
                and.push(Bson::Document(doc! { k.clone(): prior }));
                and.push(Bson::Document(doc! { k.clone(): v.clone() }));
                q.insert("$and", and);
            } else {
                q.insert(k.clone(), v.clone());
            }
        }
    }
    q
}

// ---------------------------------------------------------------------------------------------
// Comparing answers
// ---------------------------------------------------------------------------------------------

/// An answer: a value, or an error's code.
type Answer<T> = Result<T, String>;

fn error_text(e: &mongodb::error::Error) -> String {
    match &*e.kind {
        mongodb::error::ErrorKind::Command(c) => format!("error {} ({})", c.code, c.code_name),
        other => format!("error {other:?}"),
    }
}

/// The bytes of a value (so that `-0.0` and `0.0`, or two NaNs, compare as stored).
fn bytes_of(v: &Bson) -> Vec<u8> {
    doc! { "": v.clone() }.to_vec().unwrap_or_default()
}

/// A document with its top-level fields sorted by name.
fn by_name(d: &Document) -> Document {
    let mut fields: Vec<(&String, &Bson)> = d.iter().collect();
    fields.sort_by(|a, b| a.0.cmp(b.0));
    fields
        .into_iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// What the test tallies: which plans ran (with a non-empty answer) and how many comparisons.
#[derive(Default)]
struct Tally(BTreeMap<String, usize>);

impl Tally {
    fn add(&mut self, what: String) {
        *self.0.entry(what).or_default() += 1;
    }

    /// How many of `what`, over every phase.
    fn of(&self, what: &str) -> usize {
        self.0
            .iter()
            .filter(|(k, _)| k.ends_with(what))
            .map(|(_, n)| n)
            .sum()
    }
}

/// A collection under test.
struct Coll {
    db: Database,
    name: String,
    /// Fields that may hold arrays.
    arrays: Vec<&'static str>,
    /// The specs of its secondary indexes.
    indexes: Vec<Document>,
    next_id: i32,
    /// Whether it has a TTL index (documents may expire): no index-only plan may run.
    ttl: bool,
    /// The TTL index's spec while it exists.
    extra: Option<Document>,
    /// What its documents get besides `random_doc`'s fields (expiry fields).
    decorate: fn(&mut Rng, &mut Document),
}

impl Coll {
    fn new_doc(&self, rng: &mut Rng, id: i32) -> Document {
        let mut d = random_doc(rng, id, &self.arrays);
        (self.decorate)(rng, &mut d);
        d
    }

    fn focus(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for spec in &self.indexes {
            if let Ok(key) = spec.get_document("key") {
                for k in key.keys() {
                    if k != "_id" && !k.starts_with('_') && !out.contains(k) {
                        out.push(k.clone());
                    }
                }
            }
        }
        out
    }

    /// The key fields of each index, in order.
    fn keys(&self) -> Vec<Vec<String>> {
        self.indexes
            .iter()
            .filter_map(|s| s.get_document("key").ok())
            .map(|k| k.keys().cloned().collect())
            .collect()
    }

    fn partials(&self) -> Vec<Document> {
        self.indexes
            .iter()
            .filter_map(|s| s.get_document("partialFilterExpression").ok().cloned())
            .collect()
    }

    fn describe(&self) -> String {
        let specs: Vec<String> = self.indexes.iter().map(ToString::to_string).collect();
        let extra = self
            .extra
            .as_ref()
            .map(|e| format!(" and TTL index {e}"))
            .unwrap_or_default();
        format!(
            "collection {} indexes [{}]{extra}",
            self.name,
            specs.join(", ")
        )
    }
}

/// The test's state: the generator, tallies and failures.
struct Check {
    seed: u64,
    rng: Rng,
    tally: Tally,
    /// What the tallies are counted under.
    phase: String,
    failures: Vec<String>,
    /// Differences of a known issue, reported rather than failed.
    known: Vec<String>,
}

impl Check {
    fn new(seed: u64) -> Check {
        Check {
            seed,
            rng: Rng(seed),
            tally: Tally::default(),
            phase: String::new(),
            failures: Vec::new(),
            known: Vec::new(),
        }
    }

    fn note(&mut self, what: &str) {
        let key = format!("{}{what}", self.phase);
        self.tally.add(key);
    }

    /// Notes that an index-only plan ran: a failure where documents may expire (a TTL index),
    /// since keys do not tell whether their documents have.
    fn index_only(&mut self, coll: &Coll, what: &str, cmd: &Document) {
        if coll.ttl {
            let msg = format!(
                "MISMATCH (seed {}) index-only plan ({what}) with a TTL index\n  {}\n  command {cmd}",
                self.seed,
                coll.describe()
            );
            eprintln!("{msg}");
            self.failures.push(msg);
        } else {
            self.note(what);
        }
    }

    async fn fail(
        &mut self,
        coll: &Coll,
        what: &str,
        cmd: &Document,
        got: String,
        want: String,
        explain: Option<Document>,
    ) {
        let mut msg = format!(
            "MISMATCH (seed {}) {what}\n  {}\n  command {cmd}\n  planned:   {got}\n  collscan:  {want}",
            self.seed,
            coll.describe()
        );
        let plan = match explain {
            Some(e) => e,
            None => coll
                .db
                .run_command(doc! { "explain": cmd.clone(), "verbosity": "queryPlanner" })
                .await
                .unwrap_or_default(),
        };
        if let Some(w) = find_doc(&plan, "winningPlan") {
            let _ = write!(msg, "\n  plan: {w}");
        }
        eprintln!("{msg}");
        self.failures.push(msg);
    }
}

/// The first document under `key` anywhere in `d`.
fn find_doc<'a>(d: &'a Document, key: &str) -> Option<&'a Document> {
    if let Ok(w) = d.get_document(key) {
        return Some(w);
    }
    for (_, v) in d {
        let found = match v {
            Bson::Document(s) => find_doc(s, key),
            Bson::Array(a) => a
                .iter()
                .filter_map(Bson::as_document)
                .find_map(|s| find_doc(s, key)),
            _ => None,
        };
        if found.is_some() {
            return found;
        }
    }
    None
}

/// The first stage named `name` in a plan tree.
fn stage_named<'a>(plan: &'a Document, name: &str) -> Option<&'a Document> {
    if plan.get_str("stage").ok() == Some(name) {
        return Some(plan);
    }
    if let Ok(i) = plan.get_document("inputStage") {
        return stage_named(i, name);
    }
    plan.get_array("inputStages")
        .ok()?
        .iter()
        .filter_map(Bson::as_document)
        .find_map(|s| stage_named(s, name))
}

/// The stage names of a plan tree, depth first.
fn stages(plan: &Document, out: &mut Vec<String>) {
    if let Ok(s) = plan.get_str("stage") {
        out.push(s.to_owned());
    }
    if let Ok(i) = plan.get_document("inputStage") {
        stages(i, out);
    }
    if let Ok(a) = plan.get_array("inputStages") {
        for s in a.iter().filter_map(Bson::as_document) {
            stages(s, out);
        }
    }
}

fn plan_stages(explain: &Document) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(w) = find_doc(explain, "winningPlan") {
        stages(w, &mut out);
    }
    out
}

/// The name of the index the plan scans (the first one met).
fn plan_index(plan: &Document) -> Option<String> {
    if let Ok(n) = plan.get_str("indexName") {
        return Some(n.to_owned());
    }
    if let Ok(i) = plan.get_document("inputStage") {
        return plan_index(i);
    }
    None
}

fn num(d: &Document, key: &str) -> Option<i64> {
    match d.get(key) {
        Some(Bson::Int32(n)) => Some(i64::from(*n)),
        Some(Bson::Int64(n)) => Some(*n),
        _ => None,
    }
}

async fn command(db: &Database, cmd: Document) -> Answer<Document> {
    db.run_command(cmd).await.map_err(|e| error_text(&e))
}

async fn cursor(db: &Database, cmd: Document) -> Answer<Vec<Document>> {
    let mut c = db
        .run_cursor_command(cmd)
        .await
        .map_err(|e| error_text(&e))?;
    let mut out = Vec::new();
    loop {
        match c.advance().await {
            Ok(true) => out.push(
                c.deserialize_current()
                    .map_err(|e| format!("undecodable: {e}"))?,
            ),
            Ok(false) => return Ok(out),
            Err(e) => return Err(error_text(&e)),
        }
    }
}

/// Documents in a comparable order (by their bytes: `_id` first for whole documents), with
/// their fields sorted by name when `sort_fields`.
fn canonical(docs: &Answer<Vec<Document>>, sort_fields: bool) -> Answer<Vec<Vec<u8>>> {
    let docs = docs.as_ref().map_err(Clone::clone)?;
    let mut out: Vec<Vec<u8>> = docs
        .iter()
        .map(|d| {
            let d = if sort_fields { by_name(d) } else { d.clone() };
            d.to_vec().unwrap_or_default()
        })
        .collect();
    out.sort();
    Ok(out)
}

fn show_docs(docs: &Answer<Vec<Document>>) -> String {
    match docs {
        Ok(d) => {
            let mut sorted: Vec<String> = d.iter().map(|d| show_doc(&by_name(d))).collect();
            sorted.sort();
            format!("{} docs {}", sorted.len(), sorted.join(" "))
        }
        Err(e) => e.clone(),
    }
}

/// The documents one side has and the other lacks, for a short mismatch message.
fn docs_diff(got: &Answer<Vec<Document>>, want: &Answer<Vec<Document>>) -> (String, String) {
    match (got, want) {
        (Ok(g), Ok(w)) => {
            let key = |d: &Document| by_name(d).to_vec().unwrap_or_default();
            let wk: Vec<Vec<u8>> = w.iter().map(key).collect();
            let gk: Vec<Vec<u8>> = g.iter().map(key).collect();
            let only_g: Vec<String> = g
                .iter()
                .filter(|d| !wk.contains(&key(d)))
                .map(show_doc)
                .collect();
            let only_w: Vec<String> = w
                .iter()
                .filter(|d| !gk.contains(&key(d)))
                .map(show_doc)
                .collect();
            (
                format!("{} docs, only here: {}", g.len(), only_g.join(" ")),
                format!("{} docs, only here: {}", w.len(), only_w.join(" ")),
            )
        }
        _ => (show_docs(got), show_docs(want)),
    }
}

/// A value as the mismatch messages show it: decimals as strings, doubles with their sign.
fn show(v: &Bson) -> String {
    match v {
        Bson::Decimal128(d) => format!("Decimal128(\"{d}\")"),
        Bson::Double(f) => format!("Double({f:?})"),
        Bson::Array(a) => format!("[{}]", a.iter().map(show).collect::<Vec<_>>().join(", ")),
        Bson::Document(d) => show_doc(d),
        other => format!("{other:?}"),
    }
}

fn show_doc(d: &Document) -> String {
    let fields: Vec<String> = d.iter().map(|(k, v)| format!("{k}: {}", show(v))).collect();
    format!("{{{}}}", fields.join(", "))
}

fn show_values(values: &Answer<Vec<Bson>>) -> String {
    match values {
        Ok(v) => format!("[{}]", v.iter().map(show).collect::<Vec<_>>().join(", ")),
        Err(e) => e.clone(),
    }
}

/// Where two `distinct` answers differ: values that compare equal but differ in type (or
/// bits), or values one side lacks.
fn values_diff(got: &[Bson], want: &[Bson]) -> String {
    let mut out = String::new();
    let gk: Vec<Vec<u8>> = got.iter().map(bytes_of).collect();
    let wk: Vec<Vec<u8>> = want.iter().map(bytes_of).collect();
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        if bytes_of(g) != bytes_of(w) {
            let _ = write!(out, " at {i}: planned {}, collscan {};", show(g), show(w));
            break;
        }
    }
    let only_g: Vec<String> = got
        .iter()
        .filter(|v| !wk.contains(&bytes_of(v)))
        .map(show)
        .collect();
    let only_w: Vec<String> = want
        .iter()
        .filter(|v| !gk.contains(&bytes_of(v)))
        .map(show)
        .collect();
    let _ = write!(
        out,
        " only planned: [{}]; only collscan: [{}]",
        only_g.join(", "),
        only_w.join(", ")
    );
    out
}

// ---------------------------------------------------------------------------------------------
// One query, every way
// ---------------------------------------------------------------------------------------------

/// A projection of top-level key fields of `spec` (or of random fields), with `_id` excluded
/// unless it is a key field (and now and then included anyway, which reads documents).
fn random_projection(rng: &mut Rng, spec: Option<&Document>) -> Document {
    let fields: Vec<String> = spec
        .and_then(|s| s.get_document("key").ok())
        .map(|k| {
            k.keys()
                .filter(|f| !f.contains('.'))
                .cloned()
                .collect::<Vec<String>>()
        })
        .filter(|f| f.iter().any(|f| f != "_id"))
        .unwrap_or_else(|| vec![pick(rng, &["a", "b", "c"]).to_owned()]);
    let on = [
        Bson::Int32(1),
        Bson::Boolean(true),
        Bson::Double(1.0),
        Bson::Int64(1),
        dec("1"),
    ];
    let mut p = Document::new();
    for f in &fields {
        if f == "_id" {
            continue;
        }
        if p.is_empty() || chance(rng, 60) {
            p.insert(f.clone(), pick(rng, &on));
        }
    }
    let id_key = fields.iter().any(|f| f == "_id");
    if id_key && chance(rng, 50) {
        p.insert("_id", pick(rng, &on));
    } else if !chance(rng, 10) {
        p.insert(
            "_id",
            pick(
                rng,
                &[Bson::Int32(0), Bson::Boolean(false), Bson::Double(0.0)],
            ),
        );
    }
    p
}

async fn check_query(check: &mut Check, coll: &Coll, q: &Document) {
    let db = &coll.db;
    let name = coll.name.as_str();
    check.note("queries");
    // Now and then a collation (strings compare case-insensitively): index-only plans must
    // still answer as scans do.
    let collation = chance(&mut check.rng, 10).then(|| doc! { "locale": "en", "strength": 2 });
    let col = |mut cmd: Document| {
        if let Some(c) = &collation {
            cmd.insert("collation", c.clone());
        }
        cmd
    };

    // `find`, whole documents.
    let batch = pick(&mut check.rng, &[2_i32, 5, 101]);
    let cmd = col(doc! { "find": name, "filter": q.clone(), "batchSize": batch });
    let got = cursor(db, cmd.clone()).await;
    let mut hinted = cmd.clone();
    hinted.insert("hint", natural());
    let want = cursor(db, hinted).await;
    let find_explain = command(
        db,
        doc! { "explain": col(doc! { "find": name, "filter": q.clone() }), "verbosity": "queryPlanner" },
    )
    .await
    .unwrap_or_default();
    let find_stages = plan_stages(&find_explain);
    if canonical(&got, false) != canonical(&want, false) {
        let (g, w) = docs_diff(&got, &want);
        check
            .fail(coll, "find", &cmd, g, w, Some(find_explain.clone()))
            .await;
    } else if got.as_ref().is_ok_and(|d| !d.is_empty()) {
        if find_stages.iter().any(|s| s == "OR") {
            check.note("find via OR union (non-empty)");
        } else if find_stages.iter().any(|s| s == "IXSCAN") {
            check.note("find via IXSCAN (non-empty)");
        }
    }

    // `find` with a projection of the chosen index's fields.
    let chosen = find_doc(&find_explain, "winningPlan")
        .and_then(plan_index)
        .and_then(|n| {
            coll.indexes
                .iter()
                .find(|s| s.get_str("name").ok() == Some(n.as_str()))
        });
    let projection = random_projection(&mut check.rng, chosen);
    let cmd = col(
        doc! { "find": name, "filter": q.clone(), "projection": projection.clone(), "batchSize": batch },
    );
    let got = cursor(db, cmd.clone()).await;
    let mut hinted = cmd.clone();
    hinted.insert("hint", natural());
    let want = cursor(db, hinted).await;
    if canonical(&got, true) == canonical(&want, true) {
        let e = command(
            db,
            doc! { "explain": cmd.clone(), "verbosity": "queryPlanner" },
        )
        .await
        .unwrap_or_default();
        if plan_stages(&e).iter().any(|s| s == "PROJECTION_COVERED") {
            let what = if got.as_ref().is_ok_and(|d| !d.is_empty()) {
                "find PROJECTION_COVERED (non-empty)"
            } else {
                "find PROJECTION_COVERED (empty)"
            };
            check.index_only(coll, what, &cmd);
        }
    } else {
        let (g, w) = docs_diff(&got, &want);
        check.fail(coll, "find projected", &cmd, g, w, None).await;
    }

    // With skip and limit (no sort: which documents is the plan's business, how many is not,
    // and each is one of the whole answer's).
    if let Ok(all) = &want {
        let skip = check.rng.below(4);
        let limit = 1 + check.rng.below(6);
        let mut cmd = cmd.clone();
        cmd.insert("skip", i64::try_from(skip).unwrap_or(0));
        cmd.insert("limit", i64::try_from(limit).unwrap_or(0));
        let got = cursor(db, cmd.clone()).await;
        let expect = all.len().saturating_sub(skip).min(limit);
        let pool = canonical(&want, true).unwrap_or_default();
        let fits = got.as_ref().is_ok_and(|g| {
            g.len() == expect && {
                let mut pool = pool.clone();
                canonical(&got, true).unwrap_or_default().iter().all(|d| {
                    pool.iter()
                        .position(|p| p == d)
                        .map(|i| pool.swap_remove(i))
                        .is_some()
                })
            }
        });
        if !fits {
            check
                .fail(
                    coll,
                    &format!("find projected, skip {skip} limit {limit}: {expect} of the whole answer wanted"),
                    &cmd,
                    show_docs(&got),
                    show_docs(&want),
                    None,
                )
                .await;
        }
    }

    // The same hinted to an index (neither sparse nor partial, so that it holds every
    // document): bounds on later key fields are checked entry by entry, and may still decide
    // the filter.
    let plain: Vec<&Document> = coll
        .indexes
        .iter()
        .filter(|s| !s.contains_key("sparse") && !s.contains_key("partialFilterExpression"))
        .collect();
    if !plain.is_empty() {
        let spec = pick(&mut check.rng, &plain);
        let index = spec.get_str("name").unwrap_or_default().to_owned();
        let projection = random_projection(&mut check.rng, Some(spec));
        let cmd = col(
            doc! { "find": name, "filter": q.clone(), "projection": projection, "hint": index.clone(), "batchSize": batch },
        );
        let got = cursor(db, cmd.clone()).await;
        let mut hinted = cmd.clone();
        hinted.insert("hint", natural());
        let want = cursor(db, hinted).await;
        if canonical(&got, true) == canonical(&want, true) {
            let e = command(
                db,
                doc! { "explain": cmd.clone(), "verbosity": "queryPlanner" },
            )
            .await
            .unwrap_or_default();
            if plan_stages(&e).iter().any(|s| s == "PROJECTION_COVERED")
                && got.as_ref().is_ok_and(|d| !d.is_empty())
            {
                check.index_only(
                    coll,
                    "find PROJECTION_COVERED, hinted index (non-empty)",
                    &cmd,
                );
            }
        } else {
            let (g, w) = docs_diff(&got, &want);
            check
                .fail(coll, "find projected, hinted index", &cmd, g, w, None)
                .await;
        }
        let cmd = col(doc! { "count": name, "query": q.clone(), "hint": index });
        let got = command(db, cmd.clone()).await.map(|r| num(&r, "n"));
        let mut hinted = cmd.clone();
        hinted.insert("hint", natural());
        let want = command(db, hinted).await.map(|r| num(&r, "n"));
        if got != want {
            check
                .fail(
                    coll,
                    "count, hinted index",
                    &cmd,
                    format!("{got:?}"),
                    format!("{want:?}"),
                    None,
                )
                .await;
        } else if got.as_ref().is_ok_and(|n| n.unwrap_or(0) > 0) {
            let e = command(
                db,
                doc! { "explain": cmd.clone(), "verbosity": "queryPlanner" },
            )
            .await
            .unwrap_or_default();
            if !plan_stages(&e).iter().any(|s| s == "FETCH") {
                check.index_only(coll, "count from keys, hinted index (n > 0)", &cmd);
            }
        }
    }

    // `count`, with skip and limit.
    let (skip, limit) = pick(
        &mut check.rng,
        &[(0, 0), (0, 0), (3, 0), (0, 5), (2, 4), (0, -3)],
    );
    let mut cmd = col(doc! { "count": name, "query": q.clone() });
    if skip > 0 {
        cmd.insert("skip", skip);
    }
    if limit != 0 {
        cmd.insert("limit", limit);
    }
    let got = command(db, cmd.clone()).await.map(|r| num(&r, "n"));
    let mut hinted = cmd.clone();
    hinted.insert("hint", natural());
    let want = command(db, hinted).await.map(|r| num(&r, "n"));
    if got != want {
        check
            .fail(
                coll,
                "count",
                &cmd,
                format!("{got:?}"),
                format!("{want:?}"),
                None,
            )
            .await;
    } else if let Ok(Some(n)) = got {
        let e = command(
            db,
            doc! { "explain": cmd.clone(), "verbosity": "executionStats" },
        )
        .await
        .unwrap_or_default();
        let s = plan_stages(&e);
        let examined = find_doc(&e, "executionStats").and_then(|s| num(s, "totalDocsExamined"));
        let keys_only = !s.iter().any(|s| s == "FETCH" || s == "COLLSCAN");
        if keys_only {
            if examined != Some(0) {
                check
                    .fail(
                        coll,
                        "count from keys examined documents",
                        &cmd,
                        format!("{examined:?}"),
                        "0".to_owned(),
                        Some(e),
                    )
                    .await;
            } else if n > 0 {
                let what = if s.iter().any(|s| s == "COUNT_SCAN") {
                    "count COUNT_SCAN, 0 docs examined (n > 0)"
                } else {
                    "count keys only IXSCAN, 0 docs examined (n > 0)"
                };
                check.index_only(coll, what, &cmd);
            } else {
                check.index_only(coll, "count from keys (n = 0)", &cmd);
            }
        } else if n > 0 && s.iter().any(|s| s == "OR") {
            check.note("count via OR union (n > 0)");
        }
    }

    // The driver's `countDocuments` (`$match`, `$skip`, `$limit`, `$group {_id: 1, n: {$sum:
    // 1}}`).
    let c = db.collection::<Document>(name);
    let mut planned = c.count_documents(q.clone());
    let mut scanned = c.count_documents(q.clone()).hint(Hint::Keys(natural()));
    if collation.is_some() {
        let en = mongodb::options::Collation::builder()
            .locale("en")
            .strength(mongodb::options::CollationStrength::Secondary)
            .build();
        planned = planned.collation(en.clone());
        scanned = scanned.collation(en);
    }
    if skip > 0 {
        planned = planned.skip(u64::try_from(skip).unwrap_or(0));
        scanned = scanned.skip(u64::try_from(skip).unwrap_or(0));
    }
    if limit > 0 {
        planned = planned.limit(u64::try_from(limit).unwrap_or(0));
        scanned = scanned.limit(u64::try_from(limit).unwrap_or(0));
    }
    let got = planned.await.map_err(|e| error_text(&e));
    let want = scanned.await.map_err(|e| error_text(&e));
    if got != want {
        check
            .fail(
                coll,
                &format!("countDocuments skip {skip} limit {limit}"),
                &doc! { "countDocuments": name, "filter": q.clone() },
                format!("{got:?}"),
                format!("{want:?}"),
                None,
            )
            .await;
    }

    // Other pipelines that only count.
    let tail = match check.rng.below(4) {
        0 => vec![doc! { "$count": "n" }],
        1 => vec![doc! { "$group": { "_id": Bson::Null, "n": { "$sum": 2 } } }],
        2 => vec![
            doc! { "$skip": 1 },
            doc! { "$limit": 7 },
            doc! { "$group": { "_id": "k", "n": { "$sum": 1 }, "m": { "$sum": 0.5 } } },
        ],
        _ => vec![doc! { "$project": { "a": 1, "_id": 0 } }],
    };
    let mut pipeline = vec![doc! { "$match": q.clone() }];
    pipeline.extend(tail);
    let cmd = col(doc! { "aggregate": name, "pipeline": pipeline, "cursor": { "batchSize": 3 } });
    let got = cursor(db, cmd.clone()).await;
    let mut hinted = cmd.clone();
    hinted.insert("hint", natural());
    let want = cursor(db, hinted).await;
    if canonical(&got, true) != canonical(&want, true) {
        let (g, w) = docs_diff(&got, &want);
        check.fail(coll, "aggregate", &cmd, g, w, None).await;
    } else if got.as_ref().is_ok_and(|d| !d.is_empty()) {
        let e = command(
            db,
            doc! { "explain": cmd.clone(), "verbosity": "executionStats" },
        )
        .await
        .unwrap_or_default();
        let s = plan_stages(&e);
        if !s.is_empty() && !s.iter().any(|s| s == "FETCH" || s == "COLLSCAN") {
            let examined = find_doc(&e, "executionStats").and_then(|s| num(s, "totalDocsExamined"));
            if examined == Some(0) || examined.is_none() {
                check.index_only(coll, "aggregate count from keys (non-empty)", &cmd);
            }
        }
    }

    // `distinct` on every field.
    for key in FIELDS {
        check_distinct(check, coll, q, key, collation.as_ref()).await;
    }
}

/// Whether `a` and `b` compare equal (as a collection scan's `$eq` decides, under `collation`),
/// through a scratch collection.
async fn server_equal(db: &Database, a: &Bson, b: &Bson, collation: Option<&Document>) -> bool {
    let scratch = db.collection::<Document>("scratch");
    if scratch
        .replace_one(doc! { "_id": 0 }, doc! { "_id": 0, "v": a.clone() })
        .upsert(true)
        .await
        .is_err()
    {
        return false;
    }
    let mut cmd =
        doc! { "count": "scratch", "query": { "v": { "$eq": b.clone() } }, "hint": natural() };
    if let Some(c) = collation {
        cmd.insert("collation", c.clone());
    }
    command(db, cmd)
        .await
        .is_ok_and(|r| num(&r, "n") == Some(1))
}

async fn check_distinct(
    check: &mut Check,
    coll: &Coll,
    q: &Document,
    key: &str,
    collation: Option<&Document>,
) {
    let db = &coll.db;
    let mut cmd = doc! { "distinct": coll.name.clone(), "key": key, "query": q.clone() };
    if let Some(c) = collation {
        cmd.insert("collation", c.clone());
    }
    let got = command(db, cmd.clone())
        .await
        .map(|r| r.get_array("values").cloned().unwrap_or_default());
    let mut hinted = cmd.clone();
    hinted.insert("hint", natural());
    let want = command(db, hinted)
        .await
        .map(|r| r.get_array("values").cloned().unwrap_or_default());
    let explain = command(
        db,
        doc! { "explain": cmd.clone(), "verbosity": "queryPlanner" },
    )
    .await
    .unwrap_or_default();
    let s = plan_stages(&explain);
    let distinct_scan = s.iter().any(|s| s == "DISTINCT_SCAN");
    let (g, w) = match (&got, &want) {
        (Ok(g), Ok(w)) => (g, w),
        (Err(g), Err(w)) if g == w => return,
        _ => {
            check
                .fail(
                    coll,
                    &format!("distinct {key}"),
                    &cmd,
                    show_values(&got),
                    show_values(&want),
                    Some(explain),
                )
                .await;
            return;
        }
    };
    let differing: Vec<usize> = (0..g.len().max(w.len()))
        .filter(|&i| g.get(i).map(bytes_of) != w.get(i).map(bytes_of))
        .collect();
    if differing.is_empty() {
        if distinct_scan && s.iter().any(|s| s == "PROJECTION_COVERED") {
            let what = if g.is_empty() {
                "distinct DISTINCT_SCAN covered (empty)"
            } else {
                "distinct DISTINCT_SCAN covered (non-empty)"
            };
            check.index_only(coll, what, &cmd);
        } else if !g.is_empty() && distinct_scan {
            check.note("distinct DISTINCT_SCAN fetching (non-empty)");
        }
        return;
    }
    // Values that compare equal but differ in type: which one stands for them depends on
    // which document is met first, in the order the plan reads them.
    let mut representative = g.len() == w.len();
    for &i in &differing {
        if !representative {
            break;
        }
        representative = server_equal(db, &g[i], &w[i], collation).await;
    }
    let detail = values_diff(g, w);
    if representative && !distinct_scan {
        // An index scan (or a union of them) reads documents in key order, not in natural
        // order, as mongod does: another document's value may stand for equal ones.
        check.note("distinct: equal values, other type, index order (allowed)");
        return;
    }
    let compound = find_doc(&explain, "winningPlan")
        .and_then(|w| stage_named(w, "DISTINCT_SCAN"))
        .and_then(|d| d.get_document("keyPattern").ok())
        .is_some_and(|k| k.len() > 1);
    if representative && compound && !strict() {
        // KNOWN ISSUE (reported, see `distinct_scan_on_compound_index_keeps_natural_order_type`):
        // under one value of its first field, a compound index orders entries by its other
        // fields, not by record id, so DISTINCT_SCAN takes the type of another document than
        // a collection scan's first.
        check.note("distinct: DISTINCT_SCAN on a compound index, other type (KNOWN ISSUE)");
        check.known.push(format!(
            "distinct {key} {q} on {}:{detail}",
            coll.describe()
        ));
        return;
    }
    let what = if representative {
        format!(
            "distinct {key}: DISTINCT_SCAN took another document's type for equal values:{detail}"
        )
    } else {
        format!("distinct {key}:{detail}")
    };
    check
        .fail(
            coll,
            &what,
            &cmd,
            show_values(&got),
            show_values(&want),
            Some(explain),
        )
        .await;
}

// ---------------------------------------------------------------------------------------------
// Writes
// ---------------------------------------------------------------------------------------------

/// The same number in another type (or another representation of it), if `v` is a number.
fn retyped(rng: &mut Rng, v: &Bson) -> Option<Bson> {
    Some(match v {
        Bson::Int32(n) => {
            if chance(rng, 50) {
                Bson::Int64(i64::from(*n))
            } else {
                Bson::Double(f64::from(*n))
            }
        }
        Bson::Int64(n) => match i32::try_from(*n) {
            Ok(small) if chance(rng, 50) => Bson::Int32(small),
            _ => dec(&n.to_string()),
        },
        Bson::Double(f) if *f == 0.0 => {
            if f.is_sign_negative() {
                pick(rng, &[Bson::Double(0.0), Bson::Int32(0), dec("-0")])
            } else {
                Bson::Double(-0.0)
            }
        }
        Bson::Double(f) if f.is_nan() => dec("NaN"),
        Bson::Double(f) if f.fract() == 0.0 && f.abs() < 1e9 => {
            #[expect(
                clippy::cast_possible_truncation,
                reason = "checked integral and small"
            )]
            let n = *f as i64;
            if chance(rng, 50) {
                Bson::Int64(n)
            } else {
                dec(&format!("{n}.0"))
            }
        }
        Bson::Double(f) if f.is_infinite() => dec(if *f > 0.0 { "Infinity" } else { "-Infinity" }),
        Bson::Decimal128(d) => {
            let s = d.to_string();
            match s.as_str() {
                "1.0" => dec("1.00"),
                "1.00" => Bson::Int32(1),
                "1" => dec("1.0"),
                "2" | "2.0" => Bson::Double(2.0),
                "-0" | "0" | "0.0" | "-0.0" => Bson::Double(-0.0),
                "NaN" => Bson::Double(f64::NAN),
                "Infinity" => Bson::Double(f64::INFINITY),
                "0.5" => Bson::Double(0.5),
                "1.5" => Bson::Double(1.5),
                _ => return None,
            }
        }
        _ => return None,
    })
}

/// `n` random writes; returns how many the server refused.
async fn mutate(check: &mut Check, coll: &mut Coll, n: usize) -> TestResult<usize> {
    let c = coll.db.collection::<Document>(&coll.name);
    let mut refused = 0;
    for _ in 0..n {
        let rng = &mut check.rng;
        let id = i32::try_from(rng.below(usize::try_from(coll.next_id).unwrap_or(1))).unwrap_or(0);
        let field = pick(rng, &FIELDS);
        let arrays = coll.arrays.contains(&field);
        let result = match rng.below(12) {
            0..=2 => c
                .update_one(
                    doc! { "_id": id },
                    doc! { "$set": { field: value(rng, arrays) } },
                )
                .await
                .map(|_| ()),
            3 | 4 => {
                // The same number in another type: a key kept, its value changed.
                let Some(d) = c.find_one(doc! { "_id": id }).await? else {
                    continue;
                };
                let current = match field {
                    "d.x" => d.get_document("d").ok().and_then(|d| d.get("x")).cloned(),
                    f => d.get(f).cloned(),
                };
                let Some(new) = current.and_then(|v| retyped(rng, &v)) else {
                    continue;
                };
                check.note("writes: same number, other type");
                c.update_one(doc! { "_id": id }, doc! { "$set": { field: new } })
                    .await
                    .map(|_| ())
            }
            5 => {
                let by = pick(
                    rng,
                    &[Bson::Double(1.0), Bson::Int64(1), Bson::Int32(1), dec("1")],
                );
                let filter = if chance(rng, 70) {
                    doc! { "_id": id, field: { "$type": "number" } }
                } else {
                    doc! { field: { "$type": "number" }, "_id": { "$gte": id, "$lt": id + 20 } }
                };
                c.update_many(filter, doc! { "$mul": { field: by } })
                    .await
                    .map(|_| ())
            }
            6 => c
                .update_one(doc! { "_id": id }, doc! { "$unset": { field: 1 } })
                .await
                .map(|_| ()),
            7 => {
                let d = coll.new_doc(rng, id);
                c.replace_one(doc! { "_id": id }, d).await.map(|_| ())
            }
            8 => c.delete_one(doc! { "_id": id }).await.map(|_| ()),
            9 => {
                let d = coll.new_doc(rng, coll.next_id);
                coll.next_id += 1;
                c.insert_one(d).await.map(|_| ())
            }
            10 => {
                let q = random_query(rng, &coll.focus(), &coll.keys(), &[]);
                let v = value(rng, arrays);
                c.update_many(q, doc! { "$set": { field: v } })
                    .await
                    .map(|_| ())
            }
            _ => {
                let d = coll.new_doc(rng, id);
                c.replace_one(doc! { "_id": id }, d)
                    .upsert(true)
                    .await
                    .map(|_| ())
            }
        };
        if result.is_err() {
            refused += 1;
        }
    }
    Ok(refused)
}

async fn assert_valid(coll: &Coll) -> TestResult {
    let v = coll
        .db
        .run_command(doc! { "validate": coll.name.clone(), "full": true })
        .await?;
    assert!(
        v.get_bool("valid")?,
        "validate {} ({}): {v}",
        coll.name,
        coll.describe()
    );
    Ok(())
}

/// How a collection under test is made.
struct Setup {
    name: &'static str,
    /// Fields that may hold arrays (their indexes become multikey).
    arrays: Vec<&'static str>,
    docs: usize,
    /// An index besides the random ones (a TTL index).
    extra_index: Option<Document>,
    /// Whether the indexes are built over the loaded documents (else maintained as they come).
    index_after: bool,
    decorate: fn(&mut Rng, &mut Document),
}

impl Setup {
    fn new(name: &'static str, arrays: Vec<&'static str>, docs: usize) -> Setup {
        Setup {
            name,
            arrays,
            docs,
            extra_index: None,
            index_after: false,
            decorate: |_, _| {},
        }
    }
}

async fn create(check: &mut Check, db: &Database, setup: Setup) -> TestResult<Coll> {
    let n = 2 + check.rng.below(3);
    let indexes = random_indexes(&mut check.rng, n);
    let mut coll = Coll {
        db: db.clone(),
        name: setup.name.to_owned(),
        arrays: setup.arrays,
        indexes: indexes.clone(),
        next_id: 0,
        ttl: setup.extra_index.is_some(),
        extra: setup.extra_index.clone(),
        decorate: setup.decorate,
    };
    let mut all = indexes;
    all.extend(setup.extra_index);
    let build = doc! { "createIndexes": setup.name, "indexes": all };
    if !setup.index_after {
        db.run_command(build.clone()).await?;
    }
    let c = db.collection::<Document>(setup.name);
    let mut batch = Vec::new();
    for _ in 0..setup.docs {
        batch.push(coll.new_doc(&mut check.rng, coll.next_id));
        coll.next_id += 1;
    }
    // Some documents may be refused (parallel arrays under a compound index): unordered.
    let _ = c.insert_many(batch).ordered(false).await;
    if setup.index_after {
        // (Parallel arrays may refuse the build: then those indexes are made first, and the
        // documents that cannot be indexed are refused instead.)
        if db.run_command(build.clone()).await.is_err() {
            c.delete_many(doc! {}).await?;
            db.run_command(build).await?;
            let mut batch = Vec::new();
            for id in 0..coll.next_id {
                batch.push(coll.new_doc(&mut check.rng, id));
            }
            let _ = c.insert_many(batch).ordered(false).await;
        }
    }
    eprintln!("{}", coll.describe());
    Ok(coll)
}

fn seed() -> u64 {
    std::env::var("EBB_INDEX_ONLY_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x1D0_0417)
}

/// `EBB_INDEX_ONLY_SCALE`: queries per round are multiplied by it (longer runs, more cases).
fn scale() -> usize {
    std::env::var("EBB_INDEX_ONLY_SCALE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1)
}

/// `EBB_INDEX_ONLY_NO_PREFIX_REGEX=1`: no anchored regex with a literal prefix in queries (to
/// look past the descending compound index bug their bounds hit, see
/// `prefix_range_on_descending_compound_key`).
fn no_prefix_regex() -> bool {
    std::env::var("EBB_INDEX_ONLY_NO_PREFIX_REGEX").is_ok_and(|v| v == "1")
}

/// `EBB_INDEX_ONLY_STRICT=1`: known issues fail too.
fn strict() -> bool {
    std::env::var("EBB_INDEX_ONLY_STRICT").is_ok_and(|v| v == "1")
}

fn rounds() -> usize {
    std::env::var("EBB_INDEX_ONLY_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3)
}

fn report(check: &Check, what: &str) {
    eprintln!(
        "{what}: seed {} (EBB_INDEX_ONLY_SEED replays it)",
        check.seed
    );
    for (k, v) in &check.tally.0 {
        eprintln!("  {k}: {v}");
    }
    eprintln!("  mismatches: {}", check.failures.len());
    for k in check.known.iter().take(3) {
        eprintln!("  known issue: {k}");
    }
}

fn assert_no_failures(check: &Check) {
    assert!(
        check.failures.is_empty(),
        "{} mismatches (seed {}), the first:\n{}",
        check.failures.len(),
        check.seed,
        check
            .failures
            .iter()
            .take(5)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
}

async fn query_round(check: &mut Check, coll: &Coll, queries: usize) {
    let focus = coll.focus();
    let partials = coll.partials();
    let keys = coll.keys();
    for _ in 0..queries * scale() {
        let q = random_query(&mut check.rng, &focus, &keys, &partials);
        check_query(check, coll, &q).await;
    }
}

/// Random queries over collections with random indexes, some of which stay non-multikey (their
/// fields never hold arrays) and some become multikey, answered as planned and as a
/// collection scan, with random writes between rounds and a restart (the durable store keeps
/// entries' values and multikey flags).
#[tokio::test]
async fn random_queries_answer_as_collection_scans() -> TestResult {
    let mut check = Check::new(seed());
    eprintln!("seed {} (EBB_INDEX_ONLY_SEED replays it)", check.seed);
    let dir = tempfile::tempdir()?;
    let mut server = TestServer::start_durable(dir.path(), |_| {}).await?;
    let mut client = server.client().await?;
    let db = client.database("index_only_random");
    let mut colls = vec![
        create(&mut check, &db, Setup::new("s1", vec![], 250)).await?,
        create(
            &mut check,
            &db,
            Setup {
                index_after: true,
                ..Setup::new("s2", vec![], 250)
            },
        )
        .await?,
        create(&mut check, &db, Setup::new("m1", vec!["c"], 250)).await?,
        create(
            &mut check,
            &db,
            Setup {
                index_after: true,
                ..Setup::new("m2", vec!["a", "d.x"], 200)
            },
        )
        .await?,
    ];
    let rounds = rounds();
    for round in 0..rounds {
        check.phase = format!("round {round}: ");
        for coll in &mut colls {
            query_round(&mut check, coll, 18).await;
            if round + 1 < rounds {
                let refused = mutate(&mut check, coll, 120).await?;
                check.note("write rounds");
                if refused > 0 {
                    eprintln!("{}: {refused} writes refused", coll.name);
                }
                assert_valid(coll).await?;
            }
        }
        if round == 0 {
            drop(client);
            server.stop().await?;
            server = TestServer::start_durable(dir.path(), |_| {}).await?;
            client = server.client().await?;
            let db = client.database("index_only_random");
            for coll in &mut colls {
                coll.db = db.clone();
            }
        }
    }
    for coll in &colls {
        assert_valid(coll).await?;
    }
    report(&check, "random_queries_answer_as_collection_scans");
    assert_no_failures(&check);
    for path in [
        "count COUNT_SCAN, 0 docs examined (n > 0)",
        "find PROJECTION_COVERED (non-empty)",
        "distinct DISTINCT_SCAN covered (non-empty)",
        "distinct DISTINCT_SCAN fetching (non-empty)",
        "find via OR union (non-empty)",
        "aggregate count from keys (non-empty)",
    ] {
        assert!(
            check.tally.of(path) > 0,
            "no query took the path {path}: the test exercises nothing there"
        );
    }
    drop(client);
    server.stop().await?;
    Ok(())
}

/// A Cosmos DB `ttl` field on some documents: some expire, some never.
fn cosmos_ttl(rng: &mut Rng, d: &mut Document) {
    match rng.below(3) {
        0 => {
            d.insert("ttl", 5);
        }
        1 => {
            d.insert("ttl", -1);
        }
        _ => {}
    }
}

/// The test clock's instant when the expiry test starts (ms).
static CLOCK_START: std::sync::atomic::AtomicI64 = std::sync::atomic::AtomicI64::new(0);

/// A date `e` for a TTL index on it: up to 20 s before the expiry test's start.
fn recent_date(rng: &mut Rng, d: &mut Document) {
    if chance(rng, 70) {
        let ago = i64::try_from(rng.below(20)).unwrap_or(0) * 1000;
        let now = CLOCK_START.load(std::sync::atomic::Ordering::Relaxed);
        d.insert("e", DateTime::from_millis(now - ago));
    }
}

/// The same where documents expire: a `_ts` TTL index, a Cosmos DB default of -1 with
/// per-document `ttl` fields, a TTL index on a date field. Some documents expired (their keys
/// still in the indexes), then the TTL indexes are dropped (expired documents stay hidden, and
/// index-only plans run again).
#[tokio::test]
async fn random_queries_with_expired_documents() -> TestResult {
    let mut check = Check::new(seed() ^ 0x7717);
    eprintln!(
        "seed {} (EBB_INDEX_ONLY_SEED replays it, xored with 0x7717)",
        check.seed
    );
    let server = TestServer::start_with_test_clock().await?;
    let client: Client = server.client().await?;
    let start = advance_clock(&client, 0).await?.timestamp_millis();
    CLOCK_START.store(start, std::sync::atomic::Ordering::Relaxed);
    let db = client.database("index_only_random_ttl");
    let mut colls = vec![
        create(
            &mut check,
            &db,
            Setup {
                extra_index: Some(
                    doc! { "key": { "_ts": 1 }, "name": "_ts_1", "expireAfterSeconds": 10 },
                ),
                ..Setup::new("t", vec!["c"], 150)
            },
        )
        .await?,
        create(
            &mut check,
            &db,
            Setup {
                extra_index: Some(
                    doc! { "key": { "_ts": 1 }, "name": "_ts_1", "expireAfterSeconds": -1 },
                ),
                decorate: cosmos_ttl,
                ..Setup::new("tc", vec![], 150)
            },
        )
        .await?,
        create(
            &mut check,
            &db,
            Setup {
                extra_index: Some(
                    doc! { "key": { "e": 1 }, "name": "e_1", "expireAfterSeconds": 10 },
                ),
                decorate: recent_date,
                index_after: true,
                ..Setup::new("td", vec![], 200)
            },
        )
        .await?,
    ];
    advance_clock(&client, 6000).await?;
    for coll in &mut colls {
        let c = db.collection::<Document>(&coll.name);
        let mut batch = Vec::new();
        for _ in 0..150 {
            batch.push(coll.new_doc(&mut check.rng, coll.next_id));
            coll.next_id += 1;
        }
        let _ = c.insert_many(batch).ordered(false).await;
        // Writes refresh some of the first documents.
        mutate(&mut check, coll, 20).await?;
    }
    advance_clock(&client, 5000).await?;
    for coll in &mut colls {
        check.phase = format!("{} with TTL: ", coll.name);
        let c = db.collection::<Document>(&coll.name);
        let live = c
            .count_documents(doc! {})
            .hint(Hint::Keys(natural()))
            .await?;
        eprintln!("{}: {live} of {} documents live", coll.name, coll.next_id);
        assert!(
            live > 50 && live < u64::try_from(coll.next_id)?,
            "{}: {live} live",
            coll.name
        );
        query_round(&mut check, coll, 15).await;
        mutate(&mut check, coll, 60).await?;
        advance_clock(&client, 1000).await?;
        query_round(&mut check, coll, 10).await;
        assert_valid(coll).await?;
    }

    // No TTL index: keys alone answer again, and what expired must stay out.
    for coll in &mut colls {
        let ttl = if coll.name == "td" { "e_1" } else { "_ts_1" };
        db.run_command(doc! { "dropIndexes": coll.name.clone(), "index": ttl })
            .await?;
        coll.ttl = false;
        coll.extra = None;
    }
    advance_clock(&client, 20_000).await?;
    for coll in &mut colls {
        check.phase = format!("{} after dropping TTL: ", coll.name);
        query_round(&mut check, coll, 15).await;
        mutate(&mut check, coll, 60).await?;
        query_round(&mut check, coll, 8).await;
        assert_valid(coll).await?;
    }
    report(&check, "random_queries_with_expired_documents");
    assert_no_failures(&check);
    assert!(
        check.tally.of("count COUNT_SCAN, 0 docs examined (n > 0)") > 0,
        "no count from keys after the TTL indexes were dropped"
    );
    drop(client);
    server.stop().await?;
    Ok(())
}

/// The comparisons see what they must: a value's type and a double's sign, not field order
/// (of projections).
#[test]
fn comparisons_see_types_and_bits() {
    assert_ne!(bytes_of(&Bson::Int32(1)), bytes_of(&Bson::Double(1.0)));
    assert_ne!(bytes_of(&Bson::Int32(1)), bytes_of(&Bson::Int64(1)));
    assert_ne!(bytes_of(&dec("1.0")), bytes_of(&dec("1.00")));
    assert_ne!(bytes_of(&Bson::Double(0.0)), bytes_of(&Bson::Double(-0.0)));
    assert_eq!(
        bytes_of(&Bson::Double(f64::NAN)),
        bytes_of(&Bson::Double(f64::NAN))
    );
    let a: Answer<Vec<Document>> = Ok(vec![doc! { "b": 1, "a": 2 }]);
    let b: Answer<Vec<Document>> = Ok(vec![doc! { "a": 2, "b": 1 }]);
    assert_eq!(canonical(&a, true), canonical(&b, true));
    assert_ne!(canonical(&a, false), canonical(&b, false));
    let c: Answer<Vec<Document>> = Ok(vec![doc! { "a": 2.0, "b": 1 }]);
    assert_ne!(canonical(&b, true), canonical(&c, true));
}

// ---------------------------------------------------------------------------------------------
// What the randomized tests found, minimized
// ---------------------------------------------------------------------------------------------

/// FOUND BUG, LEFT FAILING ON PURPOSE (src/ not fixed here). A compound index whose first
/// key field is descending loses documents for a string range `[s, t)` where `t` is `s` with
/// its last character incremented: what every anchored regex prefix gives (`/^a/` reads
/// `["a", "b")`), or `{$gte: "a", $lt: "b"}`. Descending, that interval's byte range is
/// `[prefix_end(enc("b")), prefix_end(enc("a")))` = `[X, prefix_end(X))` (the `FF FF`
/// terminator of the complemented strings is dropped), which `IndexScan::key_ranges`
/// (src/query/plan.rs) takes for a point (`all_points`: `upper == prefix_end(lower)`): it then
/// appends the next field's ranges right after those truncated bytes, and no whole key lies
/// between them. Every read through the index is wrong (find, count, distinct, updates and
/// deletes), not only index-only ones; a single-field or ascending index is right.
#[tokio::test]
async fn prefix_range_on_descending_compound_key() -> TestResult {
    let server = TestServer::start().await?;
    let client = server.client().await?;
    let db = client.database("index_only_random_prefix");
    let c = db.collection::<Document>("c");
    c.insert_many([doc! { "_id": 1, "a": "a" }, doc! { "_id": 2, "a": "abc" }])
        .await?;
    db.run_command(doc! {
        "createIndexes": "c",
        "indexes": [{ "key": { "a": -1, "b": 1 }, "name": "a_-1_b_1" }],
    })
    .await?;
    let mut wrong = Vec::new();
    for q in [
        doc! { "a": { "$regex": "^a" } },
        doc! { "a": { "$gte": "a", "$lt": "b" } },
    ] {
        let want = c
            .count_documents(q.clone())
            .hint(Hint::Keys(natural()))
            .await?;
        let found = cursor(&db, doc! { "find": "c", "filter": q.clone() })
            .await
            .map(|d| d.len())?;
        let counted = c.count_documents(q.clone()).await?;
        let updated = c
            .update_many(q.clone(), doc! { "$set": { "seen": true } })
            .await?
            .matched_count;
        if [u64::try_from(found)?, counted, updated] != [want; 3] {
            let e = db
                .run_command(doc! { "explain": { "find": "c", "filter": q.clone() } })
                .await?;
            let bounds = find_doc(&e, "indexBounds").cloned().unwrap_or_default();
            wrong.push(format!(
                "{q}: {want} documents match; find returns {found}, countDocuments {counted}, \
                 updateMany matches {updated} (bounds {bounds})"
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    Ok(())
}

/// Of values that compare equal (`1`, `1.0`), `distinct` answers one, and which one depends on
/// the plan, as in mongod: a collection scan answers the first document's; a `DISTINCT_SCAN`
/// the first entry's under that key in index order, which for a compound index follows its
/// other key fields (here `b`), not record ids. Both are the one value.
#[tokio::test]
async fn distinct_scan_on_compound_index_answers_an_equal_value() -> TestResult {
    let server = TestServer::start().await?;
    let client = server.client().await?;
    let db = client.database("index_only_random_distinct");
    let c = db.collection::<Document>("c");
    c.insert_many([
        doc! { "_id": 1, "a": 1, "b": 2 },
        doc! { "_id": 2, "a": 1.0, "b": 1 },
    ])
    .await?;
    db.run_command(doc! {
        "createIndexes": "c",
        "indexes": [{ "key": { "a": 1, "b": 1 }, "name": "a_1_b_1" }],
    })
    .await?;
    let scan = db
        .run_command(doc! { "distinct": "c", "key": "a", "hint": natural() })
        .await?;
    let planned = db.run_command(doc! { "distinct": "c", "key": "a" }).await?;
    let values = |r: &Document| -> Vec<String> {
        r.get_array("values")
            .map(|v| v.iter().map(show).collect())
            .unwrap_or_default()
    };
    assert_eq!(values(&scan), ["Int32(1)"]);
    // The covered DISTINCT_SCAN meets the entry of `b: 1` (document 2) first.
    assert_eq!(values(&planned), ["Double(1.0)"]);
    Ok(())
}
