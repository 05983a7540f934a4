use super::*;

#[test]
fn bits_table() {
    check(&[
        (rawdoc! {"a": {"$bitsAllSet": 5}}, rawdoc! {"a": 7}, true),
        (rawdoc! {"a": {"$bitsAllSet": 5}}, rawdoc! {"a": 6}, false),
        (
            rawdoc! {"a": {"$bitsAllSet": [0, 2]}},
            rawdoc! {"a": 5},
            true,
        ),
        (rawdoc! {"a": {"$bitsAllSet": [1]}}, rawdoc! {"a": 5}, false),
        (rawdoc! {"a": {"$bitsAllSet": []}}, rawdoc! {"a": 5}, true),
        (rawdoc! {"a": {"$bitsAnySet": []}}, rawdoc! {"a": 5}, false),
        (
            rawdoc! {"a": {"$bitsAnySet": [1, 2]}},
            rawdoc! {"a": 4},
            true,
        ),
        (
            rawdoc! {"a": {"$bitsAllClear": [1, 3]}},
            rawdoc! {"a": 5},
            true,
        ),
        (rawdoc! {"a": {"$bitsAllClear": 1}}, rawdoc! {"a": 5}, false),
        (
            rawdoc! {"a": {"$bitsAnyClear": [0, 1]}},
            rawdoc! {"a": 5},
            true,
        ),
        (
            rawdoc! {"a": {"$bitsAnyClear": [0, 2]}},
            rawdoc! {"a": 5},
            false,
        ),
        (
            rawdoc! {"a": {"$bitsAllSet": [100]}},
            rawdoc! {"a": -1},
            true,
        ),
        (
            rawdoc! {"a": {"$bitsAllSet": [100]}},
            rawdoc! {"a": 1},
            false,
        ),
        (
            rawdoc! {"a": {"$bitsAllSet": [63]}},
            rawdoc! {"a": i64::MIN},
            true,
        ),
        (rawdoc! {"a": {"$bitsAllSet": 1}}, rawdoc! {"a": 3.0}, true),
        (rawdoc! {"a": {"$bitsAllSet": 1}}, rawdoc! {"a": 3.5}, false),
        (
            rawdoc! {"a": {"$bitsAllClear": 1}},
            rawdoc! {"a": f64::NAN},
            false,
        ),
        (rawdoc! {"a": {"$bitsAllSet": 1}}, rawdoc! {"a": "1"}, false),
        (
            rawdoc! {"a": {"$bitsAllSet": 1}},
            rawdoc! {"a": [2, 3]},
            true,
        ),
        (
            rawdoc! {"a": {"$bitsAllSet": bin(&[0b101])}},
            rawdoc! {"a": 5},
            true,
        ),
        (
            rawdoc! {"a": {"$bitsAllSet": [0, 9]}},
            rawdoc! {"a": bin(&[1, 2])},
            true,
        ),
        (
            rawdoc! {"a": {"$bitsAllSet": [0, 16]}},
            rawdoc! {"a": bin(&[1, 2])},
            false,
        ),
        (
            rawdoc! {"a": {"$bitsAllClear": [16]}},
            rawdoc! {"a": bin(&[1, 2])},
            true,
        ),
        (
            rawdoc! {"a": {"$bitsAnySet": bin(&[0, 2])}},
            rawdoc! {"a": bin(&[0, 2])},
            true,
        ),
    ]);
}
