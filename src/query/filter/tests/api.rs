use super::*;

#[test]
fn id_equality_and_equality_fields() {
    let id = |f: RawDocumentBuf| Filter::compile(&f).unwrap().id_equality();
    assert_eq!(id(rawdoc! {"_id": 5}), Some(bson::RawBson::Int32(5)));
    assert_eq!(
        id(rawdoc! {"_id": {"$eq": "x"}}),
        Some(bson::RawBson::String("x".into()))
    );
    assert_eq!(
        id(rawdoc! {"_id": 5, "a": 1}),
        Some(bson::RawBson::Int32(5))
    );
    assert_eq!(
        id(rawdoc! {"$and": [{"a": 1}, {"_id": 5}]}),
        Some(bson::RawBson::Int32(5))
    );
    assert_eq!(id(rawdoc! {"_id": [5]}), None);
    assert_eq!(id(rawdoc! {"_id": {"a": 1}}), None);
    assert_eq!(id(rawdoc! {"_id": {"$gt": 5}}), None);
    assert_eq!(id(rawdoc! {"$or": [{"_id": 5}]}), None);

    let f = Filter::compile(&rawdoc! {
        "a": 1, "b": {"$eq": 2, "$gt": 0}, "$and": [{"c.d": 3}, {"$or": [{"e": 4}]}], "f": {"$in": [5]}
    })
    .unwrap();
    let got: Vec<(String, bson::RawBson)> = f.equality_fields();
    assert_eq!(
        got,
        vec![
            ("a".to_owned(), bson::RawBson::Int32(1)),
            ("b".to_owned(), bson::RawBson::Int32(2)),
            ("c.d".to_owned(), bson::RawBson::Int32(3)),
        ]
    );
    assert!(Filter::compile(&rawdoc! {}).unwrap().is_match_all());
    assert!(Filter::match_all().matches(&rawdoc! {"a": 1}));
}

#[test]
fn matched_array_index_table() {
    let cases: Vec<(RawDocumentBuf, RawDocumentBuf, Option<usize>)> = vec![
        (rawdoc! {"a": 2}, rawdoc! {"a": [1, 2, 3]}, Some(1)),
        (rawdoc! {"a": {"$gt": 1}}, rawdoc! {"a": [1, 2, 3]}, Some(1)),
        (rawdoc! {"a": 1}, rawdoc! {"a": 1}, None),
        (rawdoc! {"a": [1, 2]}, rawdoc! {"a": [1, 2]}, None),
        (
            rawdoc! {"a.b": 5},
            rawdoc! {"a": [{"b": 1}, {"b": 5}]},
            Some(1),
        ),
        (
            rawdoc! {"a.b": 5},
            rawdoc! {"a": [{"b": [4]}, {"b": [4, 5]}]},
            Some(1),
        ),
        (
            rawdoc! {"a": {"$elemMatch": {"b": 2}}},
            rawdoc! {"a": [{"b": 1}, {"b": 2}]},
            Some(1),
        ),
        (
            rawdoc! {"a": {"$elemMatch": {"$gt": 2}}},
            rawdoc! {"a": [1, 5]},
            Some(1),
        ),
        (
            rawdoc! {"a": 2, "b": 7},
            rawdoc! {"a": [1, 2], "b": [7]},
            Some(0),
        ),
        (
            rawdoc! {"a": 2, "b": 7},
            rawdoc! {"a": [1, 2], "b": 7},
            Some(1),
        ),
        (rawdoc! {"$or": [{"a": 2}]}, rawdoc! {"a": [1, 2]}, None),
        (rawdoc! {"a": 9}, rawdoc! {"a": [1, 2]}, None),
        (rawdoc! {"a.1": 2}, rawdoc! {"a": [1, 2]}, Some(1)),
    ];
    for (filter, doc, want) in cases {
        let f = Filter::compile(&filter).unwrap();
        assert_eq!(f.matched_array_index(&doc), want, "{filter:?} on {doc:?}");
    }
}
