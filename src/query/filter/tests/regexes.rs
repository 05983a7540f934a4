use super::*;

#[test]
fn regex_table() {
    check(&[
        (rawdoc! {"a": regex("^ab", "")}, rawdoc! {"a": "abc"}, true),
        (rawdoc! {"a": regex("^ab", "")}, rawdoc! {"a": "xab"}, false),
        (rawdoc! {"a": regex("^AB", "i")}, rawdoc! {"a": "abc"}, true),
        (
            rawdoc! {"a": regex("b", "")},
            rawdoc! {"a": ["x", "abc"]},
            true,
        ),
        (rawdoc! {"a": regex("b", "")}, rawdoc! {"a": 1}, false),
        (rawdoc! {"a": regex("b", "")}, rawdoc! {}, false),
        (
            rawdoc! {"a": regex("b", "")},
            rawdoc! {"a": RawBson::Symbol("abc".into())},
            true,
        ),
        (
            rawdoc! {"a": regex("b", "")},
            rawdoc! {"a": regex("b", "")},
            true,
        ),
        (
            rawdoc! {"a": regex("b", "")},
            rawdoc! {"a": regex("b", "i")},
            false,
        ),
        (
            rawdoc! {"a": {"$regex": "^a", "$options": "i"}},
            rawdoc! {"a": "ABC"},
            true,
        ),
        (
            rawdoc! {"a": {"$options": "i", "$regex": "^a"}},
            rawdoc! {"a": "ABC"},
            true,
        ),
        (
            rawdoc! {"a": {"$regex": regex("^a", "i")}},
            rawdoc! {"a": "ABC"},
            true,
        ),
        (
            rawdoc! {"a": {"$regex": regex("^a", ""), "$options": "i"}},
            rawdoc! {"a": "A"},
            true,
        ),
        (
            rawdoc! {"a": {"$regex": "^a$", "$options": "m"}},
            rawdoc! {"a": "x\na"},
            true,
        ),
        (
            rawdoc! {"a": {"$regex": "a.b", "$options": "s"}},
            rawdoc! {"a": "a\nb"},
            true,
        ),
        (
            rawdoc! {"a": {"$regex": "a b", "$options": "x"}},
            rawdoc! {"a": "ab"},
            true,
        ),
        (
            rawdoc! {"a": {"$regex": "b", "$gt": "a"}},
            rawdoc! {"a": "b"},
            true,
        ),
        (
            rawdoc! {"a": {"$regex": "b", "$gt": "c"}},
            rawdoc! {"a": "b"},
            false,
        ),
        (
            rawdoc! {"a": {"$not": regex("^a", "")}},
            rawdoc! {"a": "b"},
            true,
        ),
        (
            rawdoc! {"a": {"$not": regex("^a", "")}},
            rawdoc! {"a": ["b", "a"]},
            false,
        ),
        (rawdoc! {"a": {"$not": regex("^a", "")}}, rawdoc! {}, true),
        (
            rawdoc! {"a": {"$not": {"$regex": "^a"}}},
            rawdoc! {"a": "b"},
            true,
        ),
        (
            rawdoc! {"a": {"$in": [regex("^a", ""), 5]}},
            rawdoc! {"a": "ab"},
            true,
        ),
        (
            rawdoc! {"a": {"$in": [regex("^a", ""), 5]}},
            rawdoc! {"a": 5},
            true,
        ),
        (
            rawdoc! {"a": {"$in": [regex("^a", ""), 5]}},
            rawdoc! {"a": "b"},
            false,
        ),
        (
            rawdoc! {"a": {"$nin": [regex("^a", "")]}},
            rawdoc! {"a": "b"},
            true,
        ),
        (
            rawdoc! {"a": {"$nin": [regex("^a", "")]}},
            rawdoc! {"a": "a"},
            false,
        ),
        (
            rawdoc! {"a.b": regex("x", "")},
            rawdoc! {"a": [{"b": "y"}, {"b": "x"}]},
            true,
        ),
    ]);
}
