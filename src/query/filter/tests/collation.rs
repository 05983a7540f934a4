use super::*;

#[test]
fn collation_table() {
    let en1 = rawdoc! {"locale": "en", "strength": 1};
    let en2 = rawdoc! {"locale": "en", "strength": 2};
    let en3 = rawdoc! {"locale": "en", "strength": 3};
    let num = rawdoc! {"locale": "en", "numericOrdering": true};
    let simple = rawdoc! {"locale": "simple"};
    let cases: Vec<(&RawDocumentBuf, RawDocumentBuf, RawDocumentBuf, bool)> = vec![
        (&en2, rawdoc! {"a": "cat"}, rawdoc! {"a": "CAT"}, true),
        (&en3, rawdoc! {"a": "cat"}, rawdoc! {"a": "CAT"}, false),
        (&simple, rawdoc! {"a": "cat"}, rawdoc! {"a": "CAT"}, false),
        (&en2, rawdoc! {"a": "cafe"}, rawdoc! {"a": "café"}, false),
        (&en1, rawdoc! {"a": "cafe"}, rawdoc! {"a": "CAFÉ"}, true),
        (
            &en2,
            rawdoc! {"a": {"$ne": "cat"}},
            rawdoc! {"a": "Cat"},
            false,
        ),
        // Ranges compare in the locale's order: "B" > "a" there, not in binary.
        (&en2, rawdoc! {"a": {"$gt": "a"}}, rawdoc! {"a": "B"}, true),
        (
            &simple,
            rawdoc! {"a": {"$gt": "a"}},
            rawdoc! {"a": "B"},
            false,
        ),
        (&en2, rawdoc! {"a": {"$lte": "b"}}, rawdoc! {"a": "B"}, true),
        (&num, rawdoc! {"a": {"$gt": "9"}}, rawdoc! {"a": "10"}, true),
        (
            &en3,
            rawdoc! {"a": {"$gt": "9"}},
            rawdoc! {"a": "10"},
            false,
        ),
        // Type bracketing still holds: strings never equal numbers.
        (&en1, rawdoc! {"a": {"$gte": ""}}, rawdoc! {"a": 5}, false),
        // $in / $nin, with more values than one so that the set is searched.
        (
            &en2,
            rawdoc! {"a": {"$in": ["x", "DOG", 3]}},
            rawdoc! {"a": "dog"},
            true,
        ),
        (
            &en3,
            rawdoc! {"a": {"$in": ["x", "DOG", 3]}},
            rawdoc! {"a": "dog"},
            false,
        ),
        (
            &en2,
            rawdoc! {"a": {"$nin": ["x", "DOG"]}},
            rawdoc! {"a": "Dog"},
            false,
        ),
        // Arrays, nested documents and arrays of them.
        (&en2, rawdoc! {"a": "x"}, rawdoc! {"a": ["y", "X"]}, true),
        (
            &en2,
            rawdoc! {"a": {"b": "Q"}},
            rawdoc! {"a": {"b": "q"}},
            true,
        ),
        (
            &en2,
            rawdoc! {"a": ["P", "q"]},
            rawdoc! {"a": ["p", "Q"]},
            true,
        ),
        // Field names stay binary.
        (
            &en2,
            rawdoc! {"a": {"B": 1}},
            rawdoc! {"a": {"b": 1}},
            false,
        ),
        (
            &en2,
            rawdoc! {"a": {"$all": ["X", "y"]}},
            rawdoc! {"a": ["x", "Y"]},
            true,
        ),
        (
            &en2,
            rawdoc! {"a": {"$elemMatch": {"$eq": "X"}}},
            rawdoc! {"a": ["x"]},
            true,
        ),
        (
            &en2,
            rawdoc! {"a": {"$elemMatch": {"b": {"$in": ["X", "z"]}}}},
            rawdoc! {"a": [{"b": "x"}]},
            true,
        ),
        (
            &en2,
            rawdoc! {"$or": [{"a": "no"}, {"a": "YES"}]},
            rawdoc! {"a": "yes"},
            true,
        ),
        // $regex is not collated.
        (
            &en2,
            rawdoc! {"a": {"$regex": "^X"}},
            rawdoc! {"a": "x"},
            false,
        ),
    ];
    for (spec, filter, doc, want) in cases {
        let f = Filter::compile(&filter)
            .unwrap()
            .with_collation(collation(spec));
        assert_eq!(f.matches(&doc), want, "{spec:?} {filter:?} on {doc:?}");
    }
}

#[test]
fn collated_id_equality_is_not_a_point_read() {
    let en2 = collation(&rawdoc! {"locale": "en", "strength": 2});
    let f = |q: RawDocumentBuf| Filter::compile(&q).unwrap().with_collation(en2.clone());
    assert_eq!(f(rawdoc! {"_id": "a"}).id_equality(), None);
    assert_eq!(f(rawdoc! {"_id": {"$eq": "a"}, "b": 1}).id_equality(), None);
    assert_eq!(f(rawdoc! {"_id": 5}).id_equality(), Some(RawBson::Int32(5)));
    let plain = Filter::compile(&rawdoc! {"_id": "a"}).unwrap();
    assert_eq!(plain.id_equality(), Some(RawBson::String("a".into())));
}
