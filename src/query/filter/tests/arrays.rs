use super::*;

#[test]
fn mod_size_all_table() {
    check(&[
        (rawdoc! {"a": {"$mod": [4, 0]}}, rawdoc! {"a": 8}, true),
        (rawdoc! {"a": {"$mod": [4, 0]}}, rawdoc! {"a": 9}, false),
        (rawdoc! {"a": {"$mod": [4, 1]}}, rawdoc! {"a": 9.9}, true),
        (rawdoc! {"a": {"$mod": [4, 1]}}, rawdoc! {"a": [2, 5]}, true),
        (rawdoc! {"a": {"$mod": [4, 0]}}, rawdoc! {"a": "8"}, false),
        (rawdoc! {"a": {"$mod": [4, 0]}}, rawdoc! {}, false),
        (
            rawdoc! {"a": {"$mod": [4000, 80]}},
            rawdoc! {"a": 4080},
            true,
        ),
        (
            rawdoc! {"a": {"$mod": [1_048_500.444, 60]}},
            rawdoc! {"a": 1_048_560},
            true,
        ),
        (
            rawdoc! {"a": {"$mod": [268_435_000, 440.555]}},
            rawdoc! {"a": 268_435_440},
            true,
        ),
        (
            rawdoc! {"a": {"$mod": [-100, 89]}},
            rawdoc! {"a": 123_456_789},
            true,
        ),
        (
            rawdoc! {"a": {"$mod": [100, -89]}},
            rawdoc! {"a": -123_456_789},
            true,
        ),
        (
            rawdoc! {"a": {"$mod": [i64::MAX, 0]}},
            rawdoc! {"a": i64::MAX},
            true,
        ),
        (
            rawdoc! {"a": {"$mod": [i64::MAX, 0]}},
            rawdoc! {"a": 9.223_372_036_854_776e18},
            false,
        ),
        (
            rawdoc! {"a": {"$mod": [9.223_372_036_854_776e18, 0]}},
            rawdoc! {"a": i64::MIN},
            true,
        ),
        (
            rawdoc! {"a": {"$mod": [-1, 0]}},
            rawdoc! {"a": i64::MIN},
            true,
        ),
        (
            rawdoc! {"a": {"$mod": [23_456_789, 5e-324]}},
            rawdoc! {"a": 5e-324},
            true,
        ),
        (
            rawdoc! {"a": {"$mod": [2, 0]}},
            rawdoc! {"a": f64::NAN},
            false,
        ),
        (
            rawdoc! {"a": {"$mod": [2, 0]}},
            rawdoc! {"a": dec("4")},
            true,
        ),
        (rawdoc! {"a": {"$size": 2}}, rawdoc! {"a": [1, 2]}, true),
        (rawdoc! {"a": {"$size": 2}}, rawdoc! {"a": [1]}, false),
        (rawdoc! {"a": {"$size": 0}}, rawdoc! {"a": []}, true),
        (rawdoc! {"a": {"$size": 0}}, rawdoc! {}, false),
        (rawdoc! {"a": {"$size": 1}}, rawdoc! {"a": [[1, 2]]}, true),
        (rawdoc! {"a": {"$size": 2}}, rawdoc! {"a": [[1, 2]]}, false),
        (rawdoc! {"a": {"$size": 1.0}}, rawdoc! {"a": [1]}, true),
        (
            rawdoc! {"a.b": {"$size": 1}},
            rawdoc! {"a": [{"b": [1]}, {"b": 2}]},
            true,
        ),
        (
            rawdoc! {"a": {"$not": {"$size": 1}}},
            rawdoc! {"a": [1, 2]},
            true,
        ),
        (
            rawdoc! {"a": {"$all": [1, 2]}},
            rawdoc! {"a": [2, 3, 1]},
            true,
        ),
        (
            rawdoc! {"a": {"$all": [1, 2]}},
            rawdoc! {"a": [2, 3]},
            false,
        ),
        (rawdoc! {"a": {"$all": [1]}}, rawdoc! {"a": 1}, true),
        (rawdoc! {"a": {"$all": []}}, rawdoc! {"a": [1]}, false),
        (
            rawdoc! {"a": {"$all": [[1, 2]]}},
            rawdoc! {"a": [1, 2]},
            true,
        ),
        (
            rawdoc! {"a": {"$all": [[1, 2]]}},
            rawdoc! {"a": [[1, 2], 3]},
            true,
        ),
        (
            rawdoc! {"a": {"$all": [regex("^x", ""), "yy"]}},
            rawdoc! {"a": ["xa", "yy"]},
            true,
        ),
        (rawdoc! {"a": {"$all": [null]}}, rawdoc! {}, true),
        (
            rawdoc! {"a": {"$all": [{"b": 1}]}},
            rawdoc! {"a": [{"b": 1}]},
            true,
        ),
        (
            rawdoc! {"a": {"$all": [{"$elemMatch": {"b": 1}}, {"$elemMatch": {"c": 2}}]}},
            rawdoc! {"a": [{"b": 1}, {"c": 2}]},
            true,
        ),
        (
            rawdoc! {"a": {"$all": [{"$elemMatch": {"b": 1}}, {"$elemMatch": {"c": 2}}]}},
            rawdoc! {"a": [{"b": 1}]},
            false,
        ),
        (
            rawdoc! {"a.b": {"$all": [1, 2]}},
            rawdoc! {"a": [{"b": 1}, {"b": 2}]},
            true,
        ),
    ]);
}

#[test]
fn elem_match_table() {
    check(&[
        (
            rawdoc! {"a": {"$elemMatch": {"$gt": 1, "$lt": 5}}},
            rawdoc! {"a": [0, 3]},
            true,
        ),
        (
            rawdoc! {"a": {"$elemMatch": {"$gt": 1, "$lt": 5}}},
            rawdoc! {"a": [0, 6]},
            false,
        ),
        (
            rawdoc! {"a": {"$gt": 1, "$lt": 5}},
            rawdoc! {"a": [0, 6]},
            true,
        ),
        (
            rawdoc! {"a": {"$elemMatch": {"$gt": 1}}},
            rawdoc! {"a": 3},
            false,
        ),
        (
            rawdoc! {"a": {"$elemMatch": {"$eq": 1}}},
            rawdoc! {"a": [[1]]},
            false,
        ),
        (
            rawdoc! {"a": {"$elemMatch": {"$ne": 1}}},
            rawdoc! {"a": [1, 2]},
            true,
        ),
        (
            rawdoc! {"a": {"$elemMatch": {"$ne": 1}}},
            rawdoc! {"a": [1, 1]},
            false,
        ),
        (
            rawdoc! {"a": {"$elemMatch": {"$not": {"$gt": 3}}}},
            rawdoc! {"a": [5, 2]},
            true,
        ),
        (
            rawdoc! {"a": {"$elemMatch": {"$in": [2, 3]}}},
            rawdoc! {"a": [1, 3]},
            true,
        ),
        (
            rawdoc! {"a": {"$elemMatch": {"$nin": [1]}}},
            rawdoc! {"a": [1]},
            false,
        ),
        (
            rawdoc! {"a": {"$elemMatch": {"$exists": true}}},
            rawdoc! {"a": [1]},
            true,
        ),
        (
            rawdoc! {"a": {"$elemMatch": {"$exists": false}}},
            rawdoc! {"a": [1]},
            false,
        ),
        (
            rawdoc! {"a": {"$elemMatch": {"$type": "string"}}},
            rawdoc! {"a": [1, "x"]},
            true,
        ),
        (
            rawdoc! {"a": {"$elemMatch": {"$size": 2}}},
            rawdoc! {"a": [[1, 2]]},
            true,
        ),
        (
            rawdoc! {"a": {"$elemMatch": {"$regex": "^x"}}},
            rawdoc! {"a": ["ax", "xa"]},
            true,
        ),
        (
            rawdoc! {"a": {"$elemMatch": {"$elemMatch": {"$gt": 1}}}},
            rawdoc! {"a": [[0, 2]]},
            true,
        ),
        (
            rawdoc! {"a": {"$elemMatch": {"b": 1, "c": 2}}},
            rawdoc! {"a": [{"b": 1}, {"c": 2}]},
            false,
        ),
        (
            rawdoc! {"a": {"$elemMatch": {"b": 1, "c": 2}}},
            rawdoc! {"a": [{"b": 1, "c": 2}]},
            true,
        ),
        (
            rawdoc! {"a": {"b": 1, "c": 2}},
            rawdoc! {"a": [{"b": 1, "c": 2}]},
            true,
        ),
        (
            rawdoc! {"a.b": 1, "a.c": 2},
            rawdoc! {"a": [{"b": 1}, {"c": 2}]},
            true,
        ),
        (
            rawdoc! {"a": {"$elemMatch": {"b": {"$gt": 1}}}},
            rawdoc! {"a": [{"b": 0}, {"b": [0, 5]}]},
            true,
        ),
        (
            rawdoc! {"a": {"$elemMatch": {"$or": [{"b": 1}, {"c": 1}]}}},
            rawdoc! {"a": [{"c": 1}]},
            true,
        ),
        (
            rawdoc! {"a": {"$elemMatch": {}}},
            rawdoc! {"a": [1, {"x": 1}]},
            true,
        ),
        (
            rawdoc! {"a": {"$elemMatch": {}}},
            rawdoc! {"a": [1, 2]},
            false,
        ),
        (
            rawdoc! {"a": {"$elemMatch": {"0": 5}}},
            rawdoc! {"a": [[5, 6]]},
            true,
        ),
        (
            rawdoc! {"a": {"$elemMatch": {"b": null}}},
            rawdoc! {"a": [{"c": 1}]},
            true,
        ),
        (
            rawdoc! {"a.b": {"$elemMatch": {"c": 1}}},
            rawdoc! {"a": [{"b": [{"c": 2}]}, {"b": [{"c": 1}]}]},
            true,
        ),
        (
            rawdoc! {"a": {"$not": {"$elemMatch": {"$gt": 1}}}},
            rawdoc! {"a": [0, 1]},
            true,
        ),
        (
            rawdoc! {"a": {"$elemMatch": {"$id": 1, "$ref": "c"}}},
            rawdoc! {"a": [{"$ref": "c", "$id": 1}]},
            true,
        ),
    ]);
}
