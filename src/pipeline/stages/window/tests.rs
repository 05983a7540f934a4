//! `$setWindowFields` over the manual's examples, and mongod's errors.

use bson::{Bson, DateTime, Document, doc};

use crate::pipeline::stages::tests::{aggregate, aggregate_in, code, ctx};

fn date(s: &str) -> Bson {
    Bson::DateTime(DateTime::parse_rfc3339_str(s).unwrap())
}

/// The manual's `cakeSales` collection.
fn cakes() -> Vec<Document> {
    vec![
        doc! {"_id": 0, "type": "chocolate", "orderDate": date("2020-05-18T14:10:30Z"), "state": "CA", "price": 13, "quantity": 120},
        doc! {"_id": 1, "type": "chocolate", "orderDate": date("2021-03-20T11:30:05Z"), "state": "WA", "price": 14, "quantity": 140},
        doc! {"_id": 2, "type": "vanilla", "orderDate": date("2021-01-11T06:31:15Z"), "state": "CA", "price": 12, "quantity": 145},
        doc! {"_id": 3, "type": "vanilla", "orderDate": date("2020-02-08T13:13:23Z"), "state": "WA", "price": 13, "quantity": 104},
        doc! {"_id": 4, "type": "strawberry", "orderDate": date("2019-05-18T16:09:01Z"), "state": "CA", "price": 41, "quantity": 162},
        doc! {"_id": 5, "type": "strawberry", "orderDate": date("2019-01-08T06:12:03Z"), "state": "WA", "price": 43, "quantity": 134},
    ]
}

/// `(_id, field)` of each output document, in order.
fn column(out: &[Document], field: &str) -> Vec<(i32, Bson)> {
    out.iter()
        .map(|d| {
            (
                d.get_i32("_id").unwrap(),
                d.get(field).cloned().unwrap_or(Bson::Undefined),
            )
        })
        .collect()
}

fn swf(spec: Document) -> Vec<Document> {
    aggregate(&[doc! {"$setWindowFields": spec}], &cakes()).unwrap()
}

fn swf_code(spec: Document) -> i32 {
    code(doc! {"$setWindowFields": spec}, &cakes())
}

#[test]
fn cumulative_sum_per_state() {
    let out = swf(doc! {
        "partitionBy": "$state", "sortBy": {"orderDate": 1},
        "output": {"cumulativeQuantityForState": {
            "$sum": "$quantity", "window": {"documents": ["unbounded", "current"]}}}
    });
    assert_eq!(
        column(&out, "cumulativeQuantityForState"),
        vec![
            (4, Bson::Int32(162)),
            (0, Bson::Int32(282)),
            (2, Bson::Int32(427)),
            (5, Bson::Int32(134)),
            (3, Bson::Int32(238)),
            (1, Bson::Int32(378)),
        ]
    );
}

#[test]
fn moving_average_and_whole_partition() {
    let out = swf(doc! {
        "partitionBy": {"$year": "$orderDate"}, "sortBy": {"orderDate": 1},
        "output": {
            "avg": {"$avg": "$quantity", "window": {"documents": [-1, 0]}},
            "max": {"$max": "$quantity"},
        }
    });
    assert_eq!(
        column(&out, "avg"),
        vec![
            (5, Bson::Double(134.0)),
            (4, Bson::Double(148.0)),
            (3, Bson::Double(104.0)),
            (0, Bson::Double(112.0)),
            (2, Bson::Double(145.0)),
            (1, Bson::Double(142.5)),
        ]
    );
    assert_eq!(
        column(&out, "max"),
        vec![
            (5, Bson::Int32(162)),
            (4, Bson::Int32(162)),
            (3, Bson::Int32(120)),
            (0, Bson::Int32(120)),
            (2, Bson::Int32(145)),
            (1, Bson::Int32(145)),
        ]
    );
}

#[test]
fn range_windows_numeric_and_time() {
    let out = swf(doc! {
        "partitionBy": "$state", "sortBy": {"price": 1},
        "output": {"q": {"$sum": "$quantity", "window": {"range": [-10, 10]}}}
    });
    assert_eq!(
        column(&out, "q"),
        vec![
            (2, Bson::Int32(265)),
            (0, Bson::Int32(265)),
            (4, Bson::Int32(162)),
            (3, Bson::Int32(244)),
            (1, Bson::Int32(244)),
            (5, Bson::Int32(134)),
        ]
    );
    let out = swf(doc! {
        "partitionBy": "$state", "sortBy": {"orderDate": 1},
        "output": {"recent": {"$push": "$quantity",
            "window": {"range": ["unbounded", 10], "unit": "month"}}}
    });
    assert_eq!(
        column(&out, "recent"),
        vec![
            (4, Bson::Array(vec![162.into()])),
            (0, Bson::Array(vec![162.into(), 120.into(), 145.into()])),
            (2, Bson::Array(vec![162.into(), 120.into(), 145.into()])),
            (5, Bson::Array(vec![134.into()])),
            (3, Bson::Array(vec![134.into(), 104.into()])),
            (1, Bson::Array(vec![134.into(), 104.into(), 140.into()])),
        ]
    );
}

#[test]
fn ranks_and_document_numbers() {
    let docs = vec![
        doc! {"_id": 1, "q": 5},
        doc! {"_id": 2, "q": 3},
        doc! {"_id": 3, "q": 5},
        doc! {"_id": 4, "q": 1},
    ];
    let out = aggregate(
        &[doc! {"$setWindowFields": {"sortBy": {"q": -1}, "output": {
        "r": {"$rank": {}}, "d": {"$denseRank": {}}, "n": {"$documentNumber": {}}}}}],
        &docs,
    )
    .unwrap();
    let r: Vec<_> = column(&out, "r").into_iter().map(|(_, v)| v).collect();
    let d: Vec<_> = column(&out, "d").into_iter().map(|(_, v)| v).collect();
    let n: Vec<_> = column(&out, "n").into_iter().map(|(_, v)| v).collect();
    assert_eq!(r, vec![Bson::Int32(1), 1.into(), 3.into(), 4.into()]);
    assert_eq!(d, vec![Bson::Int32(1), 1.into(), 2.into(), 3.into()]);
    assert_eq!(n, vec![Bson::Int32(1), 2.into(), 3.into(), 4.into()]);
}

#[test]
fn shift_locf_and_linear_fill() {
    let out = swf(doc! {
        "partitionBy": "$state", "sortBy": {"quantity": -1},
        "output": {"next": {"$shift": {"output": "$quantity", "by": 1, "default": "Not available"}}}
    });
    assert_eq!(
        column(&out, "next"),
        vec![
            (4, Bson::Int32(145)),
            (2, Bson::Int32(120)),
            (0, Bson::String("Not available".into())),
            (1, Bson::Int32(134)),
            (5, Bson::Int32(104)),
            (3, Bson::String("Not available".into())),
        ]
    );
    let docs = vec![
        doc! {"_id": 1, "t": 1, "p": 500},
        doc! {"_id": 2, "t": 2},
        doc! {"_id": 3, "t": 3, "p": 515},
        doc! {"_id": 4, "t": 4, "p": null},
        doc! {"_id": 5, "t": 5},
        doc! {"_id": 6, "t": 6, "p": 485},
        doc! {"_id": 7, "t": 7},
    ];
    let out = aggregate(
        &[doc! {"$setWindowFields": {"sortBy": {"t": 1}, "output": {
        "lin": {"$linearFill": "$p"}, "locf": {"$locf": "$p"}}}}],
        &docs,
    )
    .unwrap();
    assert_eq!(
        column(&out, "lin"),
        vec![
            (1, Bson::Int32(500)),
            (2, Bson::Double(507.5)),
            (3, Bson::Int32(515)),
            (4, Bson::Double(505.0)),
            (5, Bson::Double(495.0)),
            (6, Bson::Int32(485)),
            (7, Bson::Null),
        ]
    );
    assert_eq!(
        column(&out, "locf"),
        vec![
            (1, Bson::Int32(500)),
            (2, Bson::Int32(500)),
            (3, Bson::Int32(515)),
            (4, Bson::Int32(515)),
            (5, Bson::Int32(515)),
            (6, Bson::Int32(485)),
            (7, Bson::Int32(485)),
        ]
    );
}

#[test]
fn derivative_integral_and_moving_averages() {
    let docs = vec![
        doc! {"_id": 1, "t": date("2020-05-18T14:10:30Z"), "m": 1295.1},
        doc! {"_id": 2, "t": date("2020-05-18T14:11:00Z"), "m": 1295.63},
        doc! {"_id": 3, "t": date("2020-05-18T14:11:30Z"), "m": 1296.25},
    ];
    let out = aggregate(
        &[doc! {"$setWindowFields": {"sortBy": {"t": 1}, "output": {
            "speed": {"$derivative": {"input": "$m", "unit": "hour"},
                "window": {"range": [-30, 0], "unit": "second"}},
            "area": {"$integral": {"input": "$m", "unit": "second"},
                "window": {"documents": [-1, "current"]}},
            "ema": {"$expMovingAvg": {"input": "$m", "N": 2}},
        }}}],
        &docs,
    )
    .unwrap();
    assert_eq!(
        column(&out, "speed"),
        vec![
            (1, Bson::Null),
            (2, Bson::Double(63.600_000_000_024_01)),
            (3, Bson::Double(74.399_999_999_986_9)),
        ]
    );
    // One point: mongod's int 0.
    assert_eq!(out[0].get("area"), Some(&Bson::Int32(0)));
    let area = out[1].get_f64("area").unwrap();
    assert!((area - 30.0 * (1295.1 + 1295.63) / 2.0).abs() < 1e-6);
    let ema: Vec<f64> = out.iter().map(|d| d.get_f64("ema").unwrap()).collect();
    let alpha = 2.0 / 3.0;
    assert!((ema[0] - 1295.1).abs() < 1e-9);
    assert!((ema[1] - (1295.63 * alpha + 1295.1 * (1.0 - alpha))).abs() < 1e-9);
}

#[test]
fn covariance_and_n_accumulators() {
    let out = swf(doc! {
        "partitionBy": "$state", "sortBy": {"orderDate": 1},
        "output": {
            "cov": {"$covariancePop": [{"$year": "$orderDate"}, "$quantity"],
                "window": {"documents": ["unbounded", "current"]}},
            "top2": {"$maxN": {"input": "$quantity", "n": 2}},
            "first": {"$first": "$quantity", "window": {"documents": [1, 1]}},
        }
    });
    // The manual's example, with mongod's digits.
    let cov: Vec<f64> = out.iter().map(|d| d.get_f64("cov").unwrap()).collect();
    assert_eq!(
        cov,
        vec![0.0, -10.5, -5.666_666_666_666_671, 0.0, -7.5, 2.0]
    );
    assert_eq!(
        column(&out, "top2")[0].1,
        Bson::Array(vec![162.into(), 145.into()])
    );
    assert_eq!(
        column(&out, "first"),
        vec![
            (4, Bson::Int32(120)),
            (0, Bson::Int32(145)),
            (2, Bson::Null),
            (5, Bson::Int32(104)),
            (3, Bson::Int32(140)),
            (1, Bson::Null),
        ]
    );
}

#[test]
fn parse_errors() {
    let cases: Vec<(Document, i32)> = vec![
        (doc! {}, 40414),
        (doc! {"output": {}, "x": 1}, 40415),
        (doc! {"output": {}, "sortBy": 1}, 14),
        (doc! {"output": {"a": 1}}, 9),
        (doc! {"output": {"a": {"$mergeObjects": "$x"}}}, 9),
        (
            doc! {"output": {"a": {"$sum": 1, "window": {"documents": [0, 1]}}}},
            5_339_901,
        ),
        (
            doc! {"sortBy": {"a": 1}, "output": {"a": {"$sum": 1, "window": {"documents": [1, 0]}}}},
            5_339_900,
        ),
        (
            doc! {"sortBy": {"a": 1, "b": 1}, "output": {"a": {"$sum": 1, "window": {"range": [0, 1]}}}},
            5_339_902,
        ),
        (
            doc! {"sortBy": {"a": -1}, "output": {"a": {"$sum": 1, "window": {"range": [0, 1]}}}},
            8_947_401,
        ),
        (
            doc! {"sortBy": {"a": 1}, "output": {"a": {"$sum": 1, "window": {"documents": [0.5, 1]}}}},
            9,
        ),
        (
            doc! {"sortBy": {"a": 1}, "output": {"a": {"$sum": 1, "window": {"documents": ["x", 1]}}}},
            9,
        ),
        (doc! {"output": {"a": {"$rank": {}}}}, 5_371_602),
        (
            doc! {"sortBy": {"a": 1}, "output": {"a": {"$rank": 1}}},
            5_371_603,
        ),
        (
            doc! {"sortBy": {"a": 1}, "output": {"a": {"$rank": {}, "window": {}}}},
            5_371_601,
        ),
        (
            doc! {"output": {"a": {"$shift": {"output": "$a", "by": 1}}}},
            9,
        ),
        (
            doc! {"sortBy": {"a": 1}, "output": {"a": {"$derivative": {"input": "$a"}}}},
            9,
        ),
        (
            doc! {"sortBy": {"a": 1}, "output": {"a": {"$expMovingAvg": {"input": "$a", "alpha": 2}}}},
            9,
        ),
        (doc! {"output": {"a": {"$linearFill": "$a"}}}, 605_001),
        (
            doc! {"output": {"a": {"$sum": 1}, "a.b": {"$sum": 1}}},
            6_307_900,
        ),
        (doc! {"partitionBy": [1], "output": {}}, 14),
        (
            doc! {"output": {"a": {"$firstN": {"input": "$a", "n": 0}}}},
            5_787_908,
        ),
    ];
    for (spec, want) in cases {
        assert_eq!(swf_code(spec.clone()), want, "{spec}");
    }
}

#[test]
fn runtime_errors_and_memory_limit() {
    let docs = vec![doc! {"_id": 1, "a": "x", "p": [1]}];
    let range = doc! {"$setWindowFields": {"sortBy": {"a": 1}, "output": {
    "s": {"$sum": 1, "window": {"range": ["unbounded", "unbounded"]}}}}};
    assert_eq!(code(range, &docs), 5_429_414);
    let array = doc! {"$setWindowFields": {"partitionBy": "$p", "output": {"s": {"$sum": 1}}}};
    assert_eq!(code(array, &docs), 14);
    let spec = [doc! {"$setWindowFields": {"output": {"s": {"$sum": "$quantity"}}}}];
    let err = aggregate_in(&ctx(false, 200), &spec, &cakes()).unwrap_err();
    assert_eq!(err.code.code(), 5_414_201);
    assert_eq!(
        aggregate_in(&ctx(true, 200), &spec, &cakes())
            .unwrap()
            .len(),
        6
    );
    let sorted = [doc! {"$setWindowFields": {"sortBy": {"price": 1},
    "output": {"s": {"$sum": "$quantity"}}}}];
    let err = aggregate_in(&ctx(false, 200), &sorted, &cakes()).unwrap_err();
    assert_eq!(err.code.code(), 292);
    // The values count whatever allowDiskUse says: six copies of a six-element array.
    let pushed = [doc! {"$setWindowFields": {"output": {"s": {"$push": "$type"}}}}];
    let err = aggregate_in(&ctx(true, 300), &pushed, &cakes()).unwrap_err();
    assert_eq!(err.code.code(), 5_414_201);
}

#[test]
fn range_current_is_the_document_not_its_ties() {
    let docs = vec![
        doc! {"_id": 1, "t": 1},
        doc! {"_id": 2, "t": 2},
        doc! {"_id": 3, "t": 2},
        doc! {"_id": 4, "t": 3},
    ];
    let out = aggregate(
        &[doc! {"$setWindowFields": {"sortBy": {"t": 1}, "output": {
            "upTo": {"$push": "$_id", "window": {"range": ["unbounded", "current"]}},
            "near": {"$push": "$_id", "window": {"range": [0, 0]}},
        }}}],
        &docs,
    )
    .unwrap();
    let ids = |d: &Document, f: &str| -> Vec<i32> {
        d.get_array(f)
            .unwrap()
            .iter()
            .map(|v| v.as_i32().unwrap())
            .collect()
    };
    assert_eq!(ids(&out[1], "upTo"), vec![1, 2]);
    assert_eq!(ids(&out[1], "near"), vec![2, 3]);
    assert_eq!(ids(&out[2], "upTo"), vec![1, 2, 3]);
}

#[test]
fn empty_windows_dotted_outputs_and_negative_shifts() {
    let docs = vec![
        doc! {"_id": 1, "v": 1},
        doc! {"_id": 2, "v": 2},
        doc! {"_id": 3, "v": 4},
    ];
    let out = aggregate(
        &[doc! {"$setWindowFields": {"sortBy": {"_id": 1}, "output": {
            "before.sum": {"$sum": "$v", "window": {"documents": ["unbounded", -1]}},
            "before.avg": {"$avg": "$v", "window": {"documents": ["unbounded", -1]}},
            "prev": {"$shift": {"output": "$v", "by": -1}},
            "med": {"$median": {"input": "$v", "method": "approximate"},
                "window": {"documents": [-1, 1]}},
        }}}],
        &docs,
    )
    .unwrap();
    assert_eq!(
        out[0],
        doc! {"_id": 1, "v": 1, "before": {"sum": 0, "avg": Bson::Null}, "prev": Bson::Null,
        "med": 1.0}
    );
    assert_eq!(
        out[2],
        doc! {"_id": 3, "v": 4, "before": {"sum": 3, "avg": 1.5}, "prev": 2, "med": 2.0}
    );
}

/// Seeded documents: partitions of many sizes (strings, numbers, missing), ties on the sort
/// keys, a pad that makes the input a few runs' worth at a 40,000-byte limit.
fn random_docs(seed: u64, n: i32) -> Vec<Document> {
    let mut x = seed;
    let mut next = move |m: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        i32::try_from(x % m).unwrap()
    };
    let parts = ["a", "A", "b", "c"];
    (0..n)
        .map(|i| {
            let mut d = doc! {"_id": i, "t": next(30), "u": next(3), "v": next(100)};
            match next(6) {
                0 => {}
                1 => {
                    d.insert("p", next(3));
                }
                _ => {
                    d.insert("p", parts[usize::try_from(next(4)).unwrap()]);
                }
            }
            d.insert("pad", "x".repeat(50));
            d
        })
        .collect()
}

/// Spilled (the sort before the stage past a 40,000-byte limit) or in memory, the same output
/// in the same order; without `allowDiskUse` the same input is 292.
#[test]
fn spilled_windows_equal_in_memory_windows() {
    let docs = random_docs(11, 1200);
    let output = doc! {
        "sum": {"$sum": "$v", "window": {"documents": [-2, 1]}},
        "range": {"$max": "$v", "window": {"range": [-3, 0]}},
        "rank": {"$rank": {}},
        "n": {"$documentNumber": {}},
        "prev": {"$shift": {"output": "$_id", "by": -1, "default": null}},
    };
    let specs = [
        doc! {"partitionBy": "$p", "sortBy": {"t": 1}, "output": output.clone()},
        doc! {"partitionBy": {"$toUpper": "$p"}, "sortBy": {"t": -1, "u": 1}, "output": {
        "ids": {"$push": "$_id", "window": {"documents": [-1, 1]}}}},
        doc! {"sortBy": {"t": 1, "_id": -1}, "output": {
        "sum": {"$sum": "$v", "window": {"documents": [-1, 1]}}}},
        doc! {"partitionBy": "$u", "output": {"all": {"$sum": "$v"}, "f": {"$first": "$_id"}}},
    ];
    for spec in specs {
        let pipeline = [doc! {"$setWindowFields": spec.clone()}];
        let memory = aggregate_in(&ctx(true, usize::MAX), &pipeline, &docs).unwrap();
        let spilled = aggregate_in(&ctx(true, 40_000), &pipeline, &docs).unwrap();
        assert_eq!(memory.len(), docs.len());
        assert_eq!(memory, spilled, "{spec}");
        let err = aggregate_in(&ctx(false, 40_000), &pipeline, &docs).unwrap_err();
        assert_eq!(err.code.code(), 292, "{spec}");
    }
}
