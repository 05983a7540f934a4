//! Every accumulator through `$group`: the manual's examples and mongod's argument errors.

use bson::{Bson, Document, RawBson, doc};

use crate::pipeline::stages::tests::{aggregate, code};

fn group(spec: Document, docs: &[Document]) -> Vec<Document> {
    aggregate(&[doc! {"$group": spec}, doc! {"$sort": {"_id": 1}}], docs).unwrap()
}

fn one(acc: Document, docs: &[Document]) -> Bson {
    let out = group(doc! {"_id": null, "v": acc}, docs);
    out[0].get("v").unwrap().clone()
}

fn acc_code(acc: Document) -> i32 {
    code(
        doc! {"$group": {"_id": null, "v": acc}},
        &[doc! {"_id": 1, "x": 1}],
    )
}

/// The manual's `$firstN`/`$top` game scores.
fn games() -> Vec<Document> {
    vec![
        doc! {"playerId": "PlayerA", "gameId": "G1", "score": 31},
        doc! {"playerId": "PlayerB", "gameId": "G1", "score": 33},
        doc! {"playerId": "PlayerC", "gameId": "G1", "score": 99},
        doc! {"playerId": "PlayerD", "gameId": "G1", "score": 1},
        doc! {"playerId": "PlayerA", "gameId": "G2", "score": 10},
        doc! {"playerId": "PlayerB", "gameId": "G2", "score": 14},
        doc! {"playerId": "PlayerC", "gameId": "G2", "score": 66},
        doc! {"playerId": "PlayerD", "gameId": "G2", "score": 80},
    ]
}

#[test]
fn first_last_n_keep_order_and_nulls() {
    let out = group(
        doc! {"_id": "$gameId", "firstThree": {"$firstN": {"input": "$score", "n": 3}},
        "lastTwo": {"$lastN": {"input": ["$playerId", "$score"], "n": 2}}},
        &games(),
    );
    assert_eq!(
        out[0],
        doc! {"_id": "G1", "firstThree": [31, 33, 99], "lastTwo": [["PlayerC", 99], ["PlayerD", 1]]}
    );
    // `n` may read the group key.
    let out = group(
        doc! {"_id": {"gameId": "$gameId"}, "s": {"$firstN": {
            "input": "$score",
            "n": {"$cond": {"if": {"$eq": ["$gameId", "G2"]}, "then": 1, "else": 3}}
        }}},
        &games(),
    );
    assert_eq!(out[0].get_array("s").unwrap().len(), 3);
    assert_eq!(out[1].get_array("s").unwrap(), &vec![Bson::Int32(10)]);
    // Missing is null.
    let docs = [doc! {"a": 1}, doc! {"x": 2}];
    assert_eq!(
        one(doc! {"$firstN": {"input": "$a", "n": 5}}, &docs),
        Bson::Array(vec![1.into(), Bson::Null])
    );
}

#[test]
fn min_max_n_skip_nulls() {
    let mut docs = games();
    docs.push(doc! {"gameId": "G1", "score": null});
    let out = group(
        doc! {"_id": "$gameId", "max": {"$maxN": {"input": "$score", "n": 3}},
        "min": {"$minN": {"input": "$score", "n": 2}}},
        &docs,
    );
    assert_eq!(
        out[0],
        doc! {"_id": "G1", "max": [99, 33, 31], "min": [1, 31]}
    );
    assert_eq!(
        out[1],
        doc! {"_id": "G2", "max": [80, 66, 14], "min": [10, 14]}
    );
}

#[test]
fn top_and_bottom() {
    let out = group(
        doc! {"_id": "$gameId",
        "top": {"$top": {"output": ["$playerId", "$score"], "sortBy": {"score": -1}}},
        "bottom": {"$bottom": {"output": ["$playerId", "$score"], "sortBy": {"score": -1}}},
        "top2": {"$topN": {"n": 2, "output": "$playerId", "sortBy": {"score": -1}}},
        "bottom2": {"$bottomN": {"n": 2, "output": "$playerId", "sortBy": {"score": -1}}}},
        &games(),
    );
    assert_eq!(
        out[0],
        doc! {"_id": "G1", "top": ["PlayerC", 99], "bottom": ["PlayerD", 1],
        "top2": ["PlayerC", "PlayerB"], "bottom2": ["PlayerA", "PlayerD"]}
    );
    // Ties keep the first seen; a missing output is null.
    let docs = [
        doc! {"k": 1, "o": "a"},
        doc! {"k": 1, "o": "b"},
        doc! {"k": 1},
    ];
    assert_eq!(
        one(doc! {"$top": {"output": "$o", "sortBy": {"k": 1}}}, &docs),
        Bson::from("a")
    );
    assert_eq!(
        one(
            doc! {"$bottomN": {"n": 3, "output": "$o", "sortBy": {"k": 1}}},
            &docs
        ),
        Bson::Array(vec!["a".into(), "b".into(), Bson::Null])
    );
}

#[test]
fn add_to_set_merge_objects_count_std_dev() {
    let docs = [
        doc! {"item": "a", "q": 1, "d": {"x": 1}, "s": 1.0},
        doc! {"item": "b", "q": 1, "d": {"y": 2}, "s": 2.0},
        doc! {"item": "a", "q": 2.0, "d": {"x": 3}, "s": 3.0},
        doc! {"item": "c", "q": 1, "d": null},
    ];
    assert_eq!(
        one(doc! {"$addToSet": "$item"}, &docs),
        Bson::Array(vec!["a".into(), "b".into(), "c".into()])
    );
    // 1 and 1.0 are the same value; 2.0 is another.
    assert_eq!(
        one(doc! {"$addToSet": "$q"}, &docs)
            .as_array()
            .unwrap()
            .len(),
        2
    );
    assert_eq!(
        one(doc! {"$mergeObjects": "$d"}, &docs),
        Bson::Document(doc! {"x": 3, "y": 2})
    );
    assert_eq!(one(doc! {"$count": {}}, &docs), Bson::Int32(4));
    assert_eq!(
        one(doc! {"$stdDevPop": "$s"}, &docs),
        Bson::Double((2.0_f64 / 3.0).sqrt())
    );
    assert_eq!(one(doc! {"$stdDevSamp": "$s"}, &docs), Bson::Double(1.0));
    assert_eq!(one(doc! {"$stdDevSamp": "$q"}, &docs[..1]), Bson::Null);
    assert_eq!(one(doc! {"$stdDevPop": "$nothing"}, &docs), Bson::Null);
}

#[test]
fn median_and_percentile_manual_example() {
    let docs = [
        doc! {"studentId": "2345", "test01": 62},
        doc! {"studentId": "2356", "test01": 60},
        doc! {"studentId": "2358", "test01": 67},
        doc! {"studentId": "2367", "test01": 64},
        doc! {"studentId": "2369", "test01": 60},
    ];
    assert_eq!(
        one(
            doc! {"$median": {"input": "$test01", "method": "approximate"}},
            &docs
        ),
        Bson::Double(62.0)
    );
    assert_eq!(
        one(
            doc! {"$percentile": {"input": "$test01", "p": [0.5, 0.75, 0.9, 0.95], "method": "approximate"}},
            &docs
        ),
        Bson::Array(vec![62.0.into(), 64.0.into(), 67.0.into(), 67.0.into()])
    );
    assert_eq!(
        one(
            doc! {"$percentile": {"input": "$none", "p": [0.5, 1], "method": "approximate"}},
            &docs
        ),
        Bson::Array(vec![Bson::Null, Bson::Null])
    );
    assert_eq!(
        one(
            doc! {"$median": {"input": "$none", "method": "approximate"}},
            &docs
        ),
        Bson::Null
    );
}

#[test]
fn argument_errors() {
    assert_eq!(acc_code(doc! {"$sum": [1, 2]}), 40237);
    assert_eq!(acc_code(doc! {"$count": 1}), 14);
    assert_eq!(acc_code(doc! {"$count": {"a": 1}}), 14);
    assert_eq!(acc_code(doc! {"$frob": 1}), 15952);
    assert_eq!(acc_code(doc! {"$accumulator": {}}), 31264);
    assert_eq!(code(doc! {"$group": {"_id": null, "v": 1}}, &[]), 40234);
    assert_eq!(
        code(doc! {"$group": {"_id": null, "v": {"sum": 1}}}, &[]),
        40234
    );
    assert_eq!(
        code(doc! {"$group": {"_id": null, "a.b": {"$sum": 1}}}, &[]),
        40235
    );
    assert_eq!(
        code(
            doc! {"$group": {"_id": null, "v": {"$sum": 1, "$avg": 1}}},
            &[]
        ),
        40238
    );
    assert_eq!(acc_code(doc! {"$mergeObjects": "$x"}), 40400);
    // The N family.
    assert_eq!(acc_code(doc! {"$firstN": 1}), 5_787_801);
    assert_eq!(acc_code(doc! {"$maxN": 1}), 5_787_900);
    assert_eq!(
        acc_code(doc! {"$firstN": {"input": "$x", "n": 1, "z": 1}}),
        5_787_901
    );
    assert_eq!(acc_code(doc! {"$firstN": {"input": "$x"}}), 5_787_906);
    assert_eq!(acc_code(doc! {"$lastN": {"n": 1}}), 5_787_907);
    assert_eq!(
        acc_code(doc! {"$minN": {"input": "$x", "n": "a"}}),
        5_787_902
    );
    assert_eq!(
        acc_code(doc! {"$minN": {"input": "$x", "n": 1.5}}),
        5_787_903
    );
    assert_eq!(acc_code(doc! {"$minN": {"input": "$x", "n": 0}}), 5_787_908);
    assert_eq!(acc_code(doc! {"$top": 1}), 5_788_001);
    assert_eq!(
        acc_code(doc! {"$top": {"n": 1, "output": "$x", "sortBy": {"x": 1}}}),
        5_788_002
    );
    assert_eq!(
        acc_code(doc! {"$topN": {"output": "$x", "sortBy": {"x": 1}}}),
        5_788_003
    );
    assert_eq!(acc_code(doc! {"$bottom": {"sortBy": {"x": 1}}}), 5_788_004);
    assert_eq!(
        acc_code(doc! {"$bottomN": {"n": 2, "output": "$x"}}),
        5_788_005
    );
    // Percentiles.
    assert_eq!(acc_code(doc! {"$median": 1}), 7_436_100);
    assert_eq!(acc_code(doc! {"$percentile": 1}), 7_429_703);
    assert_eq!(acc_code(doc! {"$median": {"input": "$x"}}), 40414);
    assert_eq!(
        acc_code(doc! {"$median": {"input": "$x", "method": "discrete"}}),
        2
    );
    assert_eq!(acc_code(doc! {"$median": {"input": "$x", "method": 1}}), 14);
    assert_eq!(
        acc_code(doc! {"$median": {"input": "$x", "method": "approximate", "z": 1}}),
        40415
    );
    assert_eq!(
        acc_code(doc! {"$percentile": {"input": "$x", "method": "approximate"}}),
        40414
    );
    let p =
        |p: Bson| acc_code(doc! {"$percentile": {"input": "$x", "p": p, "method": "approximate"}});
    assert_eq!(p("$x".into()), 7_750_300);
    assert_eq!(p(Bson::Int32(1)), 7_750_301);
    assert_eq!(p(Bson::Array(vec![])), 7_750_301);
    assert_eq!(p(Bson::Array(vec!["a".into()])), 7_750_302);
    assert_eq!(p(Bson::Array(vec![1.5.into()])), 7_750_303);
}

#[test]
fn bucket_outputs_use_the_same_accumulators() {
    let out = aggregate(
        &[
            doc! {"$bucket": {"groupBy": "$score", "boundaries": [0, 50, 100], "output": {
                "best": {"$top": {"output": "$playerId", "sortBy": {"score": -1}}},
                "players": {"$addToSet": "$gameId"}
            }}},
        ],
        &games(),
    )
    .unwrap();
    assert_eq!(
        out[0],
        doc! {"_id": 0, "best": "PlayerB", "players": ["G1", "G2"]}
    );
    assert_eq!(
        out[1],
        doc! {"_id": 50, "best": "PlayerC", "players": ["G1", "G2"]}
    );
}

mod props {
    use std::collections::BTreeMap;

    use bson::{Bson, Document, doc};
    use proptest::prelude::*;

    use crate::pipeline::stages::tests::aggregate;

    #[derive(Debug, Clone)]
    enum V {
        Int(i32),
        Long(i64),
        Double(i32),
        Str(String),
        Null,
        Missing,
    }

    fn value() -> impl Strategy<Value = V> {
        prop_oneof![
            (-1000..1000).prop_map(V::Int),
            (-1000_i64..1000).prop_map(V::Long),
            (-1000..1000).prop_map(V::Double),
            "[a-c]{0,2}".prop_map(V::Str),
            Just(V::Null),
            Just(V::Missing),
        ]
    }

    /// A naive model of one group: `$sum`, `$count`, `$min`.
    #[derive(Default)]
    struct Model {
        total: i64,
        long: bool,
        double: bool,
        count: i32,
        min: Option<V>,
    }

    /// (rank, number, string): numbers before strings.
    fn order(v: &V) -> (u8, i64, String) {
        match v {
            V::Int(i) | V::Double(i) => (0, i64::from(*i), String::new()),
            V::Long(i) => (0, *i, String::new()),
            V::Str(s) => (1, 0, s.clone()),
            V::Null | V::Missing => (2, 0, String::new()),
        }
    }

    fn bson(v: &V) -> Option<Bson> {
        match v {
            V::Int(i) => Some(Bson::Int32(*i)),
            V::Long(i) => Some(Bson::Int64(*i)),
            V::Double(i) => Some(Bson::Double(f64::from(*i))),
            V::Str(s) => Some(Bson::String(s.clone())),
            V::Null => Some(Bson::Null),
            V::Missing => None,
        }
    }

    proptest! {
        #[test]
        fn group_agrees_with_a_naive_model(rows in prop::collection::vec((0..4_i32, value()), 0..40)) {
            let mut model: BTreeMap<i32, Model> = BTreeMap::new();
            let mut docs = Vec::new();
            for (i, (k, v)) in rows.iter().enumerate() {
                let mut d = doc! {"_id": i32::try_from(i).unwrap(), "k": *k};
                if let Some(b) = bson(v) {
                    d.insert("v", b);
                }
                docs.push(d);
                let m = model.entry(*k).or_default();
                m.count += 1;
                match v {
                    V::Int(i) => m.total += i64::from(*i),
                    V::Long(i) => { m.total += i; m.long = true; }
                    V::Double(i) => { m.total += i64::from(*i); m.double = true; }
                    _ => {}
                }
                if !matches!(v, V::Null | V::Missing)
                    && m.min.as_ref().is_none_or(|best| order(v) < order(best))
                {
                    m.min = Some(v.clone());
                }
            }
            let out = aggregate(
                &[
                    doc! {"$group": {"_id": "$k", "sum": {"$sum": "$v"}, "n": {"$count": {}}, "min": {"$min": "$v"}}},
                    doc! {"$sort": {"_id": 1}},
                ],
                &docs,
            )
            .unwrap();
            prop_assert_eq!(out.len(), model.len());
            for (d, (k, m)) in out.iter().zip(&model) {
                #[expect(clippy::cast_precision_loss, reason = "small totals are exact")]
                let sum = if m.double {
                    Bson::Double(m.total as f64)
                } else if m.long {
                    Bson::Int64(m.total)
                } else {
                    Bson::Int32(i32::try_from(m.total).unwrap())
                };
                let expected: Document = doc! {
                    "_id": *k,
                    "sum": sum,
                    "n": m.count,
                    "min": m.min.as_ref().and_then(bson).unwrap_or(Bson::Null),
                };
                prop_assert_eq!(d, &expected);
            }
        }
    }
}

#[test]
fn sums_and_averages_of_decimals_stay_decimal() {
    let d = |s: &str| RawBson::Decimal128(s.parse().unwrap_or_else(|e| panic!("{s}: {e:?}")));
    let total = [d("10.5"), RawBson::Int32(2), d("7")]
        .iter()
        .fold(RawBson::Int32(0), super::sum::add);
    assert_eq!(total, d("19.5"));
    let total = [RawBson::Int32(1), RawBson::Double(2.5)]
        .iter()
        .fold(RawBson::Int32(0), super::sum::add);
    assert_eq!(total, RawBson::Double(3.5));
}
