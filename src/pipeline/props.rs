//! Property tests: `$group` (`$sum`, `$count`, `$min`, `$max`, `$push`, `$addToSet`) and
//! `$sort` (compound keys, either direction, with and without a `$limit`) over random
//! documents of mixed types, missing fields and arrays agree with a naive model written here
//! from the manual's rules, independently of `query::compare`:
//!
//! - BSON's order of types: null (and missing) < numbers < strings < objects < arrays;
//!   numbers by value across int, long and double; arrays element by element, then by length;
//! - a sort key of an array is its smallest element ascending, its largest descending, and an
//!   empty array sorts before null; equal keys keep their input order (Ebb's sort is stable);
//! - `$group` puts equal values (`1`, `1.0` and `NumberLong(1)`; null and missing) in one
//!   group, shown by the first value seen; `$sum` adds the numbers only (int, then long, then
//!   double as they mix), `$min`/`$max` skip null and missing, `$push` skips missing,
//!   `$addToSet` keeps one of equal values.

use std::cmp::Ordering;

use bson::{Bson, Document, doc};
use proptest::prelude::*;

use crate::pipeline::stages::tests::aggregate;

/// A field's value, or its absence.
#[derive(Debug, Clone)]
enum V {
    Missing,
    Null,
    Int(i32),
    Long(i64),
    Double(f64),
    Str(String),
    Obj(i32),
    Arr(Vec<V>),
}

fn scalar() -> impl Strategy<Value = V> {
    prop_oneof![
        Just(V::Null),
        (-3..4_i32).prop_map(V::Int),
        (-3..4_i64).prop_map(V::Long),
        // Whole doubles equal the ints; halves fall between them.
        (-6..8_i32).prop_map(|h| V::Double(f64::from(h) / 2.0)),
        "[ab]{0,2}".prop_map(V::Str),
        (-2..3_i32).prop_map(V::Obj),
    ]
}

fn value() -> impl Strategy<Value = V> {
    prop_oneof![
        4 => scalar(),
        1 => Just(V::Missing),
        1 => prop::collection::vec(scalar(), 0..4).prop_map(V::Arr),
    ]
}

fn bson(v: &V) -> Option<Bson> {
    Some(match v {
        V::Missing => return None,
        V::Null => Bson::Null,
        V::Int(i) => Bson::Int32(*i),
        V::Long(i) => Bson::Int64(*i),
        V::Double(d) => Bson::Double(*d),
        V::Str(s) => Bson::String(s.clone()),
        V::Obj(i) => Bson::Document(doc! {"x": *i}),
        V::Arr(items) => Bson::Array(
            items
                .iter()
                .map(|v| bson(v).unwrap_or(Bson::Null))
                .collect(),
        ),
    })
}

/// The rank of a value's type in BSON's order.
fn rank(v: &V) -> u8 {
    match v {
        V::Missing | V::Null => 1,
        V::Int(_) | V::Long(_) | V::Double(_) => 2,
        V::Str(_) => 3,
        V::Obj(_) => 4,
        V::Arr(_) => 5,
    }
}

#[expect(clippy::cast_precision_loss, reason = "the model's longs are small")]
fn number(v: &V) -> Option<f64> {
    match v {
        V::Int(i) => Some(f64::from(*i)),
        V::Long(i) => Some(*i as f64),
        V::Double(d) => Some(*d),
        _ => None,
    }
}

/// BSON's order of two values.
fn cmp(a: &V, b: &V) -> Ordering {
    rank(a).cmp(&rank(b)).then_with(|| match (a, b) {
        (V::Str(x), V::Str(y)) => x.cmp(y),
        (V::Obj(x), V::Obj(y)) => x.cmp(y),
        (V::Arr(x), V::Arr(y)) => x
            .iter()
            .zip(y)
            .map(|(p, q)| cmp(p, q))
            .find(|o| o.is_ne())
            .unwrap_or_else(|| x.len().cmp(&y.len())),
        _ => match (number(a), number(b)) {
            (Some(x), Some(y)) => x.total_cmp(&y),
            _ => Ordering::Equal,
        },
    })
}

/// A sort key: a value, or the key of an empty array (before null).
#[derive(Debug, Clone)]
enum Key {
    EmptyArray,
    Value(V),
}

fn sort_key(v: &V, ascending: bool) -> Key {
    match v {
        V::Arr(items) if items.is_empty() => Key::EmptyArray,
        V::Arr(items) => {
            let pick = if ascending {
                items.iter().min_by(|a, b| cmp(a, b))
            } else {
                items.iter().max_by(|a, b| cmp(a, b))
            };
            Key::Value(pick.cloned().unwrap_or(V::Null))
        }
        V::Missing => Key::Value(V::Null),
        other => Key::Value(other.clone()),
    }
}

fn cmp_keys(a: &Key, b: &Key) -> Ordering {
    match (a, b) {
        (Key::EmptyArray, Key::EmptyArray) => Ordering::Equal,
        (Key::EmptyArray, Key::Value(_)) => Ordering::Less,
        (Key::Value(_), Key::EmptyArray) => Ordering::Greater,
        (Key::Value(x), Key::Value(y)) => cmp(x, y),
    }
}

/// Back from a BSON value the server returned, to compare it with the model's.
fn from_bson(b: &Bson) -> V {
    match b {
        Bson::Null => V::Null,
        Bson::Int32(i) => V::Int(*i),
        Bson::Int64(i) => V::Long(*i),
        Bson::Double(d) => V::Double(*d),
        Bson::String(s) => V::Str(s.clone()),
        Bson::Document(d) => V::Obj(d.get_i32("x").unwrap_or(i32::MIN)),
        Bson::Array(items) => V::Arr(items.iter().map(from_bson).collect()),
        other => panic!("unexpected {other:?}"),
    }
}

/// One group of the model.
struct Group {
    id: V,
    sum: Option<V>,
    count: i32,
    min: Option<V>,
    max: Option<V>,
    push: Vec<V>,
    set: Vec<V>,
}

fn add(total: Option<V>, v: &V) -> Option<V> {
    let n = number(v)?;
    let t = total.unwrap_or(V::Int(0));
    Some(match (&t, v) {
        (V::Int(a), V::Int(b)) => V::Int(a + b),
        (V::Int(a), V::Long(b)) => V::Long(i64::from(*a) + b),
        (V::Long(a), V::Int(b)) => V::Long(a + i64::from(*b)),
        (V::Long(a), V::Long(b)) => V::Long(a + b),
        _ => V::Double(number(&t).unwrap_or(0.0) + n),
    })
}

fn group_model(rows: &[(V, V)]) -> Vec<Group> {
    let mut groups: Vec<Group> = Vec::new();
    for (k, v) in rows {
        let key = if matches!(k, V::Missing) {
            V::Null
        } else {
            k.clone()
        };
        let at = groups
            .iter()
            .position(|g| cmp(&g.id, &key).is_eq())
            .unwrap_or_else(|| {
                groups.push(Group {
                    id: key,
                    sum: None,
                    count: 0,
                    min: None,
                    max: None,
                    push: Vec::new(),
                    set: Vec::new(),
                });
                groups.len() - 1
            });
        let g = &mut groups[at];
        g.count += 1;
        if number(v).is_some() {
            g.sum = add(g.sum.take(), v);
        }
        if !matches!(v, V::Missing | V::Null) {
            if g.min.as_ref().is_none_or(|m| cmp(v, m).is_lt()) {
                g.min = Some(v.clone());
            }
            if g.max.as_ref().is_none_or(|m| cmp(v, m).is_gt()) {
                g.max = Some(v.clone());
            }
        }
        if !matches!(v, V::Missing) {
            g.push.push(v.clone());
            if !g.set.iter().any(|s| cmp(s, v).is_eq()) {
                g.set.push(v.clone());
            }
        }
    }
    groups
}

/// Exactly the same value: the same type and value (so that `1` and `1.0` differ).
fn same(a: &V, b: &V) -> bool {
    match (a, b) {
        (V::Null, V::Null) => true,
        (V::Int(x), V::Int(y)) => x == y,
        (V::Long(x), V::Long(y)) => x == y,
        (V::Double(x), V::Double(y)) => x.to_bits() == y.to_bits() || x == y,
        (V::Str(x), V::Str(y)) => x == y,
        (V::Obj(x), V::Obj(y)) => x == y,
        (V::Arr(x), V::Arr(y)) => x.len() == y.len() && x.iter().zip(y).all(|(p, q)| same(p, q)),
        _ => false,
    }
}

fn same_all(a: &[V], b: &[V]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(p, q)| same(p, q))
}

fn field(d: &Document, name: &str) -> V {
    d.get(name).map_or(V::Missing, from_bson)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    #[test]
    fn group_agrees_with_a_naive_model(rows in prop::collection::vec((value(), value()), 0..30)) {
        let docs: Vec<Document> = rows
            .iter()
            .enumerate()
            .map(|(i, (k, v))| {
                let mut d = doc! {"_id": i32::try_from(i).unwrap()};
                if let Some(k) = bson(k) {
                    d.insert("k", k);
                }
                if let Some(v) = bson(v) {
                    d.insert("v", v);
                }
                d
            })
            .collect();
        let out = aggregate(
            &[doc! {"$group": {
                "_id": "$k",
                "sum": {"$sum": "$v"},
                "n": {"$count": {}},
                "min": {"$min": "$v"},
                "max": {"$max": "$v"},
                "push": {"$push": "$v"},
                "set": {"$addToSet": "$v"},
            }}],
            &docs,
        )
        .unwrap();
        let model = group_model(&rows);
        prop_assert_eq!(out.len(), model.len(), "{:?}", out);
        for g in &model {
            // The server's group of this key (its order of groups is its own).
            let found: Vec<&Document> = out
                .iter()
                .filter(|d| cmp(&field(d, "_id"), &g.id).is_eq())
                .collect();
            prop_assert_eq!(found.len(), 1, "{:?} in {:?}", g.id, out);
            let d = found[0];
            prop_assert!(same(&field(d, "_id"), &g.id), "_id {:?} vs {:?}", d, g.id);
            let sum = g.sum.clone().unwrap_or(V::Int(0));
            prop_assert!(same(&field(d, "sum"), &sum), "sum {:?} vs {:?}", d, sum);
            prop_assert_eq!(d.get_i32("n").unwrap(), g.count);
            let min = g.min.clone().unwrap_or(V::Null);
            prop_assert!(same(&field(d, "min"), &min), "min {:?} vs {:?}", d, min);
            let max = g.max.clone().unwrap_or(V::Null);
            prop_assert!(same(&field(d, "max"), &max), "max {:?} vs {:?}", d, max);
            let V::Arr(push) = field(d, "push") else {
                panic!("push {d:?}");
            };
            prop_assert!(same_all(&push, &g.push), "push {:?} vs {:?}", d, g.push);
            // A set: the same members, in any order, one of equal values each.
            let V::Arr(mut set) = field(d, "set") else {
                panic!("set {d:?}");
            };
            let mut want = g.set.clone();
            set.sort_by(cmp);
            want.sort_by(cmp);
            prop_assert!(
                set.len() == want.len() && set.iter().zip(&want).all(|(p, q)| cmp(p, q).is_eq()),
                "set {:?} vs {:?}", d, want
            );
        }
    }

    #[test]
    fn sort_agrees_with_a_naive_model(
        rows in prop::collection::vec((value(), value()), 0..30),
        keys in prop::collection::vec((prop::sample::select(vec!["p", "q"]), any::<bool>()), 1..3),
        limit in prop::option::of(1..8_usize),
    ) {
        let docs: Vec<Document> = rows
            .iter()
            .enumerate()
            .map(|(i, (p, q))| {
                let mut d = doc! {"_id": i32::try_from(i).unwrap()};
                if let Some(p) = bson(p) {
                    d.insert("p", p);
                }
                if let Some(q) = bson(q) {
                    d.insert("q", q);
                }
                d
            })
            .collect();
        // A key named twice is the first's.
        let mut spec = Document::new();
        for (f, asc) in &keys {
            if !spec.contains_key(*f) {
                spec.insert(*f, if *asc { 1 } else { -1 });
            }
        }
        let mut pipeline = vec![doc! {"$sort": spec.clone()}];
        if let Some(n) = limit {
            pipeline.push(doc! {"$limit": i64::try_from(n).unwrap()});
        }
        let out = aggregate(&pipeline, &docs).unwrap();
        let got: Vec<i32> = out.iter().map(|d| d.get_i32("_id").unwrap()).collect();

        let mut want: Vec<usize> = (0..rows.len()).collect();
        let key_of = |i: usize, f: &str, asc: bool| {
            let (p, q) = &rows[i];
            sort_key(if f == "p" { p } else { q }, asc)
        };
        want.sort_by(|&x, &y| {
            spec.iter()
                .map(|(f, dir)| {
                    let asc = dir.as_i32() == Some(1);
                    let o = cmp_keys(&key_of(x, f, asc), &key_of(y, f, asc));
                    if asc { o } else { o.reverse() }
                })
                .find(|o| o.is_ne())
                .unwrap_or(Ordering::Equal)
        });
        let want: Vec<i32> = want
            .into_iter()
            .take(limit.unwrap_or(usize::MAX))
            .map(|i| i32::try_from(i).unwrap())
            .collect();
        prop_assert_eq!(got, want, "{:?}", spec);
    }
}
