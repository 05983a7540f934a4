use super::*;

#[test]
fn type_table() {
    check(&[
        (rawdoc! {"a": {"$type": "string"}}, rawdoc! {"a": "x"}, true),
        (rawdoc! {"a": {"$type": 2}}, rawdoc! {"a": "x"}, true),
        (rawdoc! {"a": {"$type": 2.0}}, rawdoc! {"a": "x"}, true),
        (rawdoc! {"a": {"$type": "int"}}, rawdoc! {"a": 1.0}, false),
        (rawdoc! {"a": {"$type": "double"}}, rawdoc! {"a": 1.0}, true),
        (
            rawdoc! {"a": {"$type": "number"}},
            rawdoc! {"a": 1_i64},
            true,
        ),
        (
            rawdoc! {"a": {"$type": "number"}},
            rawdoc! {"a": dec("1.5")},
            true,
        ),
        (
            rawdoc! {"a": {"$type": "number"}},
            rawdoc! {"a": "1"},
            false,
        ),
        (
            rawdoc! {"a": {"$type": ["string", "bool"]}},
            rawdoc! {"a": true},
            true,
        ),
        (rawdoc! {"a": {"$type": "array"}}, rawdoc! {"a": []}, true),
        (
            rawdoc! {"a": {"$type": "array"}},
            rawdoc! {"a": [[1]]},
            true,
        ),
        (rawdoc! {"a": {"$type": "array"}}, rawdoc! {"a": 1}, false),
        (
            rawdoc! {"a": {"$type": "int"}},
            rawdoc! {"a": ["x", 1]},
            true,
        ),
        (rawdoc! {"a": {"$type": "null"}}, rawdoc! {"a": null}, true),
        (rawdoc! {"a": {"$type": "null"}}, rawdoc! {}, false),
        (
            rawdoc! {"a": {"$type": "undefined"}},
            rawdoc! {"a": RawBson::Undefined},
            true,
        ),
        (
            rawdoc! {"a": {"$type": "minKey"}},
            rawdoc! {"a": RawBson::MinKey},
            true,
        ),
        (
            rawdoc! {"a": {"$type": -1}},
            rawdoc! {"a": RawBson::MinKey},
            true,
        ),
        (
            rawdoc! {"a": {"$type": 127}},
            rawdoc! {"a": RawBson::MaxKey},
            true,
        ),
        (
            rawdoc! {"a": {"$type": "objectId"}},
            rawdoc! {"a": bson::oid::ObjectId::new()},
            true,
        ),
        (
            rawdoc! {"a": {"$type": "object"}},
            rawdoc! {"a": {"b": 1}},
            true,
        ),
        (
            rawdoc! {"a": {"$type": "binData"}},
            rawdoc! {"a": bin(&[1])},
            true,
        ),
        (
            rawdoc! {"a": {"$type": "regex"}},
            rawdoc! {"a": regex("x", "")},
            true,
        ),
        (
            rawdoc! {"a": {"$type": "date"}},
            rawdoc! {"a": bson::DateTime::from_millis(0)},
            true,
        ),
        (rawdoc! {"a": {"$type": "long"}}, rawdoc! {"a": 5_i64}, true),
        (
            rawdoc! {"a": {"$type": "decimal"}},
            rawdoc! {"a": dec("1")},
            true,
        ),
        (
            rawdoc! {"a.b": {"$type": "int"}},
            rawdoc! {"a": [{"b": 1}]},
            true,
        ),
    ]);
}
