use super::*;

#[test]
fn expr_and_misc_table() {
    check(&[
        (
            rawdoc! {"$expr": {"$gt": ["$a", "$b"]}},
            rawdoc! {"a": 3, "b": 2},
            true,
        ),
        (
            rawdoc! {"$expr": {"$gt": ["$a", "$b"]}},
            rawdoc! {"a": 1, "b": 2},
            false,
        ),
        (rawdoc! {"$expr": {"$eq": ["$a", null]}}, rawdoc! {}, false),
        (rawdoc! {"$expr": "$a"}, rawdoc! {"a": 0}, false),
        (rawdoc! {"$expr": "$a"}, rawdoc! {"a": 2}, true),
        (rawdoc! {"$expr": true, "a": 1}, rawdoc! {"a": 1}, true),
        (
            rawdoc! {"$or": [{"$expr": {"$eq": ["$a", 1]}}, {"b": 1}]},
            rawdoc! {"a": 1},
            true,
        ),
        (rawdoc! {"$sampleRate": 1}, rawdoc! {}, true),
        (rawdoc! {"$sampleRate": 0.0}, rawdoc! {}, false),
        (rawdoc! {"$id": 5}, rawdoc! {"$id": 5}, true),
        (
            rawdoc! {"a": {"$exists": true, "$ne": null}},
            rawdoc! {"a": null},
            false,
        ),
        (rawdoc! {"a": {"$eq": null}}, rawdoc! {"a": [1]}, false),
        (
            rawdoc! {"a.b": {"$exists": false}},
            rawdoc! {"a": [{"b": 1}, {}]},
            false,
        ),
        (rawdoc! {"a.1": {"$gt": 1}}, rawdoc! {"a": [1, 2]}, true),
        (
            rawdoc! {"a.1.b": 2},
            rawdoc! {"a": [{"b": 1}, {"b": 2}]},
            true,
        ),
        (rawdoc! {"": 1}, rawdoc! {"": 1}, true),
        (rawdoc! {"a": dec("1.0")}, rawdoc! {"a": 1_i64}, true),
        (rawdoc! {"a": {"$in": [dec("2")]}}, rawdoc! {"a": 2.0}, true),
        (rawdoc! {"a": {"$lt": dec("2.5")}}, rawdoc! {"a": 2}, true),
    ]);
    let f = Filter::compile(&rawdoc! {"$expr": {"$add": ["$a", 1]}}).unwrap();
    let err = f.try_matches(&rawdoc! {"a": "x"}).unwrap_err();
    assert_eq!(err.code, ErrorCode::Location(16554));
    assert!(!f.matches(&rawdoc! {"a": "x"}));
    let mut hits = 0;
    let f = Filter::compile(&rawdoc! {"$sampleRate": 0.5}).unwrap();
    for _ in 0..1000 {
        hits += usize::from(f.matches(&rawdoc! {}));
    }
    assert!((300..700).contains(&hits), "{hits}");
}
