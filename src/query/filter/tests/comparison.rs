use super::*;

#[test]
fn equality_table() {
    let cases: Vec<(RawDocumentBuf, RawDocumentBuf, bool)> = vec![
        (rawdoc! {}, rawdoc! {"a": 1}, true),
        (rawdoc! {"a": 1}, rawdoc! {"a": 1}, true),
        (rawdoc! {"a": 1}, rawdoc! {"a": 1.0}, true),
        (rawdoc! {"a": 1}, rawdoc! {"a": 2}, false),
        (rawdoc! {"a": 1}, rawdoc! {"a": "1"}, false),
        (rawdoc! {"a": 1}, rawdoc! {"a": [1, 2]}, true),
        (rawdoc! {"a": [1, 2]}, rawdoc! {"a": [1, 2]}, true),
        (rawdoc! {"a": [1, 2]}, rawdoc! {"a": [2, 1]}, false),
        (rawdoc! {"a": [1]}, rawdoc! {"a": [[1], 2]}, true),
        (rawdoc! {"a": 1}, rawdoc! {"a": [[1]]}, false),
        (rawdoc! {"a": null}, rawdoc! {}, true),
        (rawdoc! {"a": null}, rawdoc! {"a": null}, true),
        (
            rawdoc! {"a": null},
            rawdoc! {"a": bson::RawBson::Undefined},
            true,
        ),
        (rawdoc! {"a": null}, rawdoc! {"a": 0}, false),
        (rawdoc! {"a": null}, rawdoc! {"a": [1, null]}, true),
        (rawdoc! {"a": null}, rawdoc! {"a": []}, false),
        (rawdoc! {"a.b": null}, rawdoc! {"a": 1}, true),
        (
            rawdoc! {"a.b": null},
            rawdoc! {"a": [{"b": 1}, {"c": 1}]},
            true,
        ),
        (rawdoc! {"a.b": null}, rawdoc! {"a": [1, 2]}, false),
        (
            rawdoc! {"a.b": 2},
            rawdoc! {"a": [{"b": 1}, {"b": 2}]},
            true,
        ),
        (rawdoc! {"a.b": 2}, rawdoc! {"a": {"b": [1, 2]}}, true),
        (rawdoc! {"a.1": 2}, rawdoc! {"a": [1, 2]}, true),
        (rawdoc! {"a.0.b": 1}, rawdoc! {"a": [{"b": 1}]}, true),
        (rawdoc! {"a": {"b": 1}}, rawdoc! {"a": {"b": 1}}, true),
        (
            rawdoc! {"a": {"b": 1}},
            rawdoc! {"a": {"b": 1, "c": 2}},
            false,
        ),
        (
            rawdoc! {"a": {"b": 1, "c": 2}},
            rawdoc! {"a": {"c": 2, "b": 1}},
            false,
        ),
        (rawdoc! {"a": {"b": 1}}, rawdoc! {"a": [{"b": 1}]}, true),
        (rawdoc! {"a": 1, "b": 2}, rawdoc! {"a": 1, "b": 2}, true),
        (rawdoc! {"a": 1, "b": 2}, rawdoc! {"a": 1, "b": 3}, false),
        (rawdoc! {"a": f64::NAN}, rawdoc! {"a": f64::NAN}, true),
        (rawdoc! {"a": {"$eq": [1]}}, rawdoc! {"a": [1]}, true),
        (
            rawdoc! {"a": {"$ref": "c", "$id": 1}},
            rawdoc! {"a": {"$ref": "c", "$id": 1}},
            true,
        ),
        (
            rawdoc! {"a": {"$eq": regex("x", "")}},
            rawdoc! {"a": regex("x", "")},
            true,
        ),
    ];
    for (filter, doc, want) in cases {
        assert_eq!(matches(&filter, &doc), want, "{filter:?} on {doc:?}");
    }
}

#[test]
fn comparison_table() {
    let cases: Vec<(RawDocumentBuf, RawDocumentBuf, bool)> = vec![
        (rawdoc! {"a": {"$gt": 5}}, rawdoc! {"a": 6}, true),
        (rawdoc! {"a": {"$gt": 5}}, rawdoc! {"a": 5.5}, true),
        (rawdoc! {"a": {"$gt": 5}}, rawdoc! {"a": 5}, false),
        (rawdoc! {"a": {"$gt": 5}}, rawdoc! {"a": "6"}, false),
        (rawdoc! {"a": {"$gt": 5}}, rawdoc! {}, false),
        (rawdoc! {"a": {"$gt": 5}}, rawdoc! {"a": [1, 7]}, true),
        (rawdoc! {"a": {"$lt": 5}}, rawdoc! {"a": [6, 7]}, false),
        (
            rawdoc! {"a": {"$gte": 5, "$lte": 5}},
            rawdoc! {"a": 5.0},
            true,
        ),
        (
            rawdoc! {"a": {"$gt": 1, "$lt": 3}},
            rawdoc! {"a": [0, 4]},
            true,
        ),
        (rawdoc! {"a": {"$lt": "b"}}, rawdoc! {"a": "a"}, true),
        (rawdoc! {"a": {"$lt": "b"}}, rawdoc! {"a": 1}, false),
        (rawdoc! {"a": {"$gte": null}}, rawdoc! {}, true),
        (rawdoc! {"a": {"$lte": null}}, rawdoc! {"a": null}, true),
        (rawdoc! {"a": {"$gt": null}}, rawdoc! {"a": null}, false),
        (rawdoc! {"a": {"$lt": null}}, rawdoc! {"a": 1}, false),
        (
            rawdoc! {"a": {"$lt": bson::RawBson::MaxKey}},
            rawdoc! {"a": "x"},
            true,
        ),
        (
            rawdoc! {"a": {"$lt": bson::RawBson::MaxKey}},
            rawdoc! {},
            true,
        ),
        (
            rawdoc! {"a": {"$gt": bson::RawBson::MinKey}},
            rawdoc! {"a": true},
            true,
        ),
        (
            rawdoc! {"a": {"$gt": bson::RawBson::MinKey}},
            rawdoc! {"a": bson::RawBson::MinKey},
            false,
        ),
        (
            rawdoc! {"a": {"$lt": bson::RawBson::MinKey}},
            rawdoc! {"a": 1},
            false,
        ),
        (rawdoc! {"a": {"$lt": 5}}, rawdoc! {"a": f64::NAN}, false),
        (rawdoc! {"a": {"$gt": f64::NAN}}, rawdoc! {"a": 1}, false),
        (
            rawdoc! {"a": {"$gte": f64::NAN}},
            rawdoc! {"a": f64::NAN},
            true,
        ),
        (
            rawdoc! {"a": {"$gt": f64::NAN}},
            rawdoc! {"a": f64::NAN},
            false,
        ),
        (rawdoc! {"a": {"$gt": [1]}}, rawdoc! {"a": [2]}, true),
        (rawdoc! {"a": {"$gt": [1]}}, rawdoc! {"a": [[2]]}, true),
        (
            rawdoc! {"a": {"$gt": {"b": 1}}},
            rawdoc! {"a": {"b": 2}},
            true,
        ),
        (
            rawdoc! {"a": {"$gt": 9_007_199_254_740_992_i64}},
            rawdoc! {"a": 9_007_199_254_740_992.0},
            false,
        ),
        (
            rawdoc! {"a": {"$gt": 9_007_199_254_740_992.0}},
            rawdoc! {"a": 9_007_199_254_740_993_i64},
            true,
        ),
    ];
    for (filter, doc, want) in cases {
        assert_eq!(matches(&filter, &doc), want, "{filter:?} on {doc:?}");
    }
}

#[test]
fn set_and_logical_table() {
    let cases: Vec<(RawDocumentBuf, RawDocumentBuf, bool)> = vec![
        (rawdoc! {"a": {"$ne": 1}}, rawdoc! {"a": 2}, true),
        (rawdoc! {"a": {"$ne": 1}}, rawdoc! {"a": [1, 2]}, false),
        (rawdoc! {"a": {"$ne": 1}}, rawdoc! {}, true),
        (rawdoc! {"a": {"$ne": null}}, rawdoc! {}, false),
        (rawdoc! {"a": {"$ne": null}}, rawdoc! {"a": 0}, true),
        (rawdoc! {"a": {"$in": [1, 2]}}, rawdoc! {"a": 2.0}, true),
        (rawdoc! {"a": {"$in": [1, 2]}}, rawdoc! {"a": [3, 1]}, true),
        (rawdoc! {"a": {"$in": [1, 2]}}, rawdoc! {"a": 3}, false),
        (
            rawdoc! {"a": {"$in": [[1, 2]]}},
            rawdoc! {"a": [1, 2]},
            true,
        ),
        (rawdoc! {"a": {"$in": []}}, rawdoc! {"a": 1}, false),
        (rawdoc! {"a": {"$in": [null]}}, rawdoc! {}, true),
        (
            rawdoc! {"a": {"$in": [null]}},
            rawdoc! {"a": bson::RawBson::Undefined},
            true,
        ),
        (rawdoc! {"a": {"$nin": [1, 2]}}, rawdoc! {"a": 3}, true),
        (rawdoc! {"a": {"$nin": [1, 2]}}, rawdoc! {}, true),
        (rawdoc! {"a": {"$nin": [null]}}, rawdoc! {}, false),
        (rawdoc! {"a": {"$nin": []}}, rawdoc! {"a": 1}, true),
        (rawdoc! {"a": {"$exists": true}}, rawdoc! {"a": null}, true),
        (rawdoc! {"a": {"$exists": true}}, rawdoc! {}, false),
        (rawdoc! {"a": {"$exists": 0}}, rawdoc! {}, true),
        (
            rawdoc! {"a.b": {"$exists": true}},
            rawdoc! {"a": [{"b": 1}]},
            true,
        ),
        (
            rawdoc! {"a.b": {"$exists": false}},
            rawdoc! {"a": [1]},
            true,
        ),
        (rawdoc! {"a": {"$exists": true}}, rawdoc! {"a": []}, true),
        (rawdoc! {"a": {"$not": {"$gt": 5}}}, rawdoc! {"a": 3}, true),
        (rawdoc! {"a": {"$not": {"$gt": 5}}}, rawdoc! {"a": 7}, false),
        (
            rawdoc! {"a": {"$not": {"$gt": 5}}},
            rawdoc! {"a": "x"},
            true,
        ),
        (
            rawdoc! {"a": {"$not": {"$gt": 1, "$lt": 5}}},
            rawdoc! {"a": 3},
            false,
        ),
        (
            rawdoc! {"$and": [{"a": 1}, {"b": 2}]},
            rawdoc! {"a": 1, "b": 2},
            true,
        ),
        (
            rawdoc! {"$and": [{"a": 1}, {"b": 2}]},
            rawdoc! {"a": 1},
            false,
        ),
        (
            rawdoc! {"$or": [{"a": 1}, {"b": 2}]},
            rawdoc! {"b": 2},
            true,
        ),
        (
            rawdoc! {"$or": [{"a": 1}, {"b": 2}]},
            rawdoc! {"c": 2},
            false,
        ),
        (
            rawdoc! {"$nor": [{"a": 1}, {"b": 2}]},
            rawdoc! {"c": 2},
            true,
        ),
        (
            rawdoc! {"$nor": [{"a": 1}, {"b": 2}]},
            rawdoc! {"a": 1},
            false,
        ),
        (rawdoc! {"$comment": "x", "a": 1}, rawdoc! {"a": 1}, true),
        (rawdoc! {"$alwaysFalse": 1}, rawdoc! {"a": 1}, false),
        (rawdoc! {"$alwaysTrue": 1}, rawdoc! {}, true),
    ];
    for (filter, doc, want) in cases {
        assert_eq!(matches(&filter, &doc), want, "{filter:?} on {doc:?}");
    }
}
