//! The random load: documents whose fields take values of many types, random indexes,
//! random queries and projections.

use std::str::FromStr;

use bson::oid::ObjectId;
use bson::spec::BinarySubtype;
use bson::{Binary, Bson, DateTime, Decimal128, Document, Regex, Timestamp, doc};

use crate::common::rng::Rng;
use crate::no_prefix_regex;

/// The fields indexes are made of, queried, written and asked for `distinct` values.
pub(crate) const FIELDS: [&str; 5] = ["a", "b", "c", "d.x", "d"];

pub(crate) fn chance(rng: &mut Rng, percent: usize) -> bool {
    rng.below(100) < percent
}

pub(crate) fn pick<T: Clone>(rng: &mut Rng, xs: &[T]) -> T {
    xs[rng.below(xs.len())].clone()
}

pub(crate) fn dec(s: &str) -> Bson {
    Decimal128::from_str(s).map_or(Bson::Null, Bson::Decimal128)
}

pub(crate) fn natural() -> Document {
    doc! { "$natural": 1 }
}

/// `cmd` hinted to a collection scan: what an index-only plan's answer is checked against.
pub(crate) fn naturally(cmd: &Document) -> Document {
    let mut hinted = cmd.clone();
    hinted.insert("hint", natural());
    hinted
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
pub(crate) fn value(rng: &mut Rng, arrays: bool) -> Bson {
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
pub(crate) fn random_doc(rng: &mut Rng, id: i32, arrays: &[&str]) -> Document {
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
pub(crate) fn random_indexes(rng: &mut Rng, n: usize) -> Vec<Document> {
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
pub(crate) fn random_query(
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

/// A projection of top-level key fields of `spec` (or of random fields), with `_id` excluded
/// unless it is a key field (and now and then included anyway, which reads documents).
pub(crate) fn random_projection(rng: &mut Rng, spec: Option<&Document>) -> Document {
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
