//! Table tests of bounds, choice and sort coverage.
#![expect(
    clippy::needless_pass_by_value,
    reason = "table helpers take owned cases"
)]

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use bson::{RawDocumentBuf, rawdoc};

use super::*;
use crate::query::Collation;

fn index(id: u64, spec: RawDocumentBuf, multikey: bool) -> IndexSpec {
    let mut s = IndexSpec::from_spec(&spec).expect("spec");
    s.id = id;
    s.multikey = Arc::new(AtomicBool::new(multikey));
    s
}

fn simple(id: u64, name: &str, key: RawDocumentBuf) -> IndexSpec {
    index(id, rawdoc! { "v": 2, "key": key, "name": name }, false)
}

fn plan_of(
    filter: RawDocumentBuf,
    sort: Option<RawDocumentBuf>,
    hint: Option<Hint>,
    indexes: &[IndexSpec],
) -> CommandResult<Plan> {
    let f = Filter::compile(&filter).expect("filter");
    let s = sort.map(|s| SortSpec::compile(&s).expect("sort"));
    plan(
        &Query {
            filter: Some(&f),
            sort: s.as_ref(),
            hint: hint.as_ref(),
        },
        indexes,
    )
}

/// The chosen index's name and `indexBounds` (`None` for a collection scan).
fn chosen(p: &Plan) -> Option<(String, RawDocumentBuf)> {
    match &p.access {
        Access::Collscan { .. } | Access::Or(_) => None,
        Access::Index(ix) => Some((ix.name.clone(), ix.bounds_doc())),
    }
}

fn strings(list: &[&str]) -> bson::RawArrayBuf {
    let mut a = bson::RawArrayBuf::new();
    for s in list {
        a.push(*s);
    }
    a
}

#[test]
fn bounds_of_single_field_predicates() {
    let a = [simple(7, "a_1", rawdoc! { "a": 1 })];
    let cases: Vec<(RawDocumentBuf, Vec<&str>)> = vec![
        (rawdoc! { "a": 1 }, vec!["[1, 1]"]),
        (rawdoc! { "a": { "$eq": 2.5 } }, vec!["[2.5, 2.5]"]),
        (rawdoc! { "a": { "$gt": 5 } }, vec!["(5, inf.0]"]),
        (rawdoc! { "a": { "$gte": 1, "$lt": 5 } }, vec!["[1, 5)"]),
        (
            rawdoc! { "$and": [{ "a": { "$lte": 9 } }, { "a": { "$gt": 2 } }] },
            vec!["(2, 9]"],
        ),
        (rawdoc! { "a": { "$lt": 5 } }, vec!["[-inf.0, 5)"]),
        (
            rawdoc! { "a": { "$in": [3, 1, 1.0, "x"] } },
            vec!["[1, 1]", "[3, 3]", "[\"x\", \"x\"]"],
        ),
        (
            rawdoc! { "a": null },
            vec!["[undefined, undefined]", "[null, null]"],
        ),
        (rawdoc! { "a": { "$lt": "m" } }, vec!["[\"\", \"m\")"]),
        (rawdoc! { "a": { "$gte": "m" } }, vec!["[\"m\", {})"]),
        (
            rawdoc! { "a": { "$regex": "^ab" } },
            vec!["[\"ab\", \"ac\")", "[/^ab/, /^ab/]"],
        ),
        (
            rawdoc! { "a": { "$regex": "b", "$options": "i" } },
            vec!["[\"\", {})", "[/b/i, /b/i]"],
        ),
        (rawdoc! { "a": { "$gt": 5, "$lt": 3 } }, vec![]),
        (
            rawdoc! { "a": { "$gt": RawBson::MinKey } },
            vec!["(MinKey, MaxKey]"],
        ),
        (rawdoc! { "a": true }, vec!["[true, true]"]),
        (rawdoc! { "a": { "$gt": false } }, vec!["(false, true]"]),
        (
            rawdoc! { "a": 1, "b": 2, "$or": [{ "c": 1 }, { "d": 1 }] },
            vec!["[1, 1]"],
        ),
    ];
    for (filter, want) in cases {
        let p = plan_of(filter.clone(), None, None, &a).expect("plans");
        let (name, bounds) = chosen(&p).unwrap_or_else(|| panic!("{filter:?}: no index"));
        assert_eq!(name, "a_1");
        assert_eq!(bounds, rawdoc! { "a": strings(&want) }, "{filter:?}");
    }
}

#[test]
fn unplannable_predicates_scan_the_collection() {
    let a = [simple(7, "a_1", rawdoc! { "a": 1 })];
    for filter in [
        rawdoc! {},
        rawdoc! { "a": { "$ne": 1 } },
        rawdoc! { "a": { "$exists": true } },
        rawdoc! { "a": [1, 2] },
        rawdoc! { "$or": [{ "a": 1 }, { "b": 2 }] },
        rawdoc! { "b": 1 },
        rawdoc! { "a": { "$type": "string" } },
        rawdoc! { "a": { "$elemMatch": { "$gt": 1 } } },
    ] {
        let p = plan_of(filter.clone(), None, None, &a).expect("plans");
        assert!(chosen(&p).is_none(), "{filter:?}");
    }
}

#[test]
fn or_branches_are_each_scanned() {
    let ab = [
        simple(7, "a_1", rawdoc! { "a": 1 }),
        simple(8, "b_1", rawdoc! { "b": 1 }),
    ];
    let legs = |filter: RawDocumentBuf| {
        let p = plan_of(filter, None, None, &ab).expect("plans");
        match p.access {
            Access::Or(legs) => Some(
                legs.iter()
                    .map(|l| (l.name.clone(), l.bounds_doc(), l.exact))
                    .collect::<Vec<_>>(),
            ),
            _ => None,
        }
    };
    let got = legs(rawdoc! { "$or": [{ "a": 1 }, { "b": { "$gt": 2 } }] }).expect("a union");
    assert_eq!(
        got,
        vec![
            (
                "a_1".to_owned(),
                rawdoc! { "a": strings(&["[1, 1]"]) },
                false
            ),
            (
                "b_1".to_owned(),
                rawdoc! { "b": strings(&["(2, inf.0]"]) },
                false
            ),
        ]
    );
    // The conjuncts beside the `$or` bound each branch too.
    let got = legs(rawdoc! { "b": 5, "$or": [{ "a": 1 }, { "c": 2 }] });
    assert!(got.is_none(), "b's index serves the whole query");
    let got = legs(rawdoc! { "c": 5, "$or": [{ "a": 1 }, { "b": 2, "c": 1 }] }).expect("a union");
    assert_eq!(got.len(), 2);
    // A branch no index serves: the collection is scanned.
    assert!(legs(rawdoc! { "$or": [{ "a": 1 }, { "c": 2 }] }).is_none());
    // A hint, or `$natural`, decides.
    let p = plan_of(
        rawdoc! { "$or": [{ "a": 1 }, { "b": 2 }] },
        None,
        Some(Hint::Natural(false)),
        &ab,
    )
    .expect("plans");
    assert!(matches!(p.access, Access::Collscan { .. }));
}

#[test]
fn compound_bounds_follow_the_prefix() {
    let ab = [simple(3, "a_1_b_-1", rawdoc! { "a": 1, "b": -1 })];
    let cases = vec![
        (
            rawdoc! { "a": 1, "b": { "$gt": 2 } },
            rawdoc! { "a": strings(&["[1, 1]"]), "b": strings(&["[inf.0, 2)"]) },
        ),
        (
            rawdoc! { "a": { "$gt": 1 } },
            rawdoc! { "a": strings(&["(1, inf.0]"]), "b": strings(&["[MaxKey, MinKey]"]) },
        ),
        (
            rawdoc! { "a": { "$in": [2, 1] }, "b": { "$in": [5, 6] } },
            rawdoc! { "a": strings(&["[1, 1]", "[2, 2]"]), "b": strings(&["[6, 6]", "[5, 5]"]) },
        ),
    ];
    for (filter, want) in cases {
        let p = plan_of(filter.clone(), None, None, &ab).expect("plans");
        assert_eq!(chosen(&p).map(|c| c.1), Some(want), "{filter:?}");
    }
    // No bound on the leading field: not usable.
    let p = plan_of(rawdoc! { "b": 1 }, None, None, &ab).expect("plans");
    assert!(chosen(&p).is_none());
}

#[test]
fn multikey_indexes_do_not_intersect_ranges() {
    let a = [index(
        9,
        rawdoc! { "v": 2, "key": { "a": 1 }, "name": "a_1" },
        true,
    )];
    let p = plan_of(rawdoc! { "a": { "$gt": 1, "$lt": 5 } }, None, None, &a).expect("plans");
    assert_eq!(
        chosen(&p).map(|c| c.1),
        Some(rawdoc! { "a": strings(&["(1, inf.0]"]) })
    );
    // An equality is preferred to a range.
    let p = plan_of(rawdoc! { "a": { "$gt": 1, "$eq": 3 } }, None, None, &a).expect("plans");
    assert_eq!(
        chosen(&p).map(|c| c.1),
        Some(rawdoc! { "a": strings(&["[3, 3]"]) })
    );
    // And it never gives the sort order.
    let p = plan_of(rawdoc! { "a": 3 }, Some(rawdoc! { "a": 1 }), None, &a).expect("plans");
    assert!(!p.sorted);
    // Two fields under one array: only the first is bounded.
    let ab = [index(
        9,
        rawdoc! { "v": 2, "key": { "x.a": 1, "x.b": 1 }, "name": "x" },
        true,
    )];
    let p = plan_of(rawdoc! { "x.a": 1, "x.b": 2 }, None, None, &ab).expect("plans");
    assert_eq!(
        chosen(&p).map(|c| c.1),
        Some(rawdoc! { "x.a": strings(&["[1, 1]"]), "x.b": strings(&["[MinKey, MaxKey]"]) })
    );
}

#[test]
fn the_most_selective_index_wins_and_ties_go_to_the_oldest() {
    let idx = [
        simple(1, "a_1", rawdoc! { "a": 1 }),
        simple(2, "b_1", rawdoc! { "b": 1 }),
        simple(3, "a_1_b_1", rawdoc! { "a": 1, "b": 1 }),
        simple(4, "a_1_c_1", rawdoc! { "a": 1, "c": 1 }),
    ];
    let name = |f: RawDocumentBuf, s: Option<RawDocumentBuf>| {
        chosen(&plan_of(f, s, None, &idx).expect("plans")).map(|c| c.0)
    };
    assert_eq!(name(rawdoc! { "a": 1 }, None).as_deref(), Some("a_1"));
    assert_eq!(name(rawdoc! { "b": 1 }, None).as_deref(), Some("b_1"));
    assert_eq!(
        name(rawdoc! { "a": 1, "b": 2 }, None).as_deref(),
        Some("a_1_b_1")
    );
    assert_eq!(
        name(rawdoc! { "a": 1, "c": { "$gt": 2 } }, None).as_deref(),
        Some("a_1_c_1")
    );
    assert_eq!(
        name(rawdoc! { "a": 1 }, Some(rawdoc! { "c": -1 })).as_deref(),
        Some("a_1_c_1")
    );
    assert_eq!(
        name(rawdoc! { "_id": 4, "a": 1, "b": 2 }, None).as_deref(),
        Some("_id_")
    );
    assert_eq!(
        name(rawdoc! { "_id": { "$gt": 4 } }, None).as_deref(),
        Some("_id_")
    );
    // A sort alone uses the index that gives it.
    assert_eq!(
        name(rawdoc! {}, Some(rawdoc! { "b": 1 })).as_deref(),
        Some("b_1")
    );
    assert_eq!(name(rawdoc! {}, Some(rawdoc! { "d": 1 })), None);
}

#[test]
fn sort_coverage() {
    let ab = [simple(3, "a_1_b_1", rawdoc! { "a": 1, "b": 1 })];
    let covered = |f: RawDocumentBuf, s: RawDocumentBuf| -> Option<bool> {
        let p = plan_of(f, Some(s), None, &ab).expect("plans");
        match (&p.access, p.sorted) {
            (Access::Index(ix), true) => Some(ix.reverse),
            _ => None,
        }
    };
    assert_eq!(covered(rawdoc! {}, rawdoc! { "a": 1 }), Some(false));
    assert_eq!(
        covered(rawdoc! {}, rawdoc! { "a": -1, "b": -1 }),
        Some(true)
    );
    assert_eq!(covered(rawdoc! {}, rawdoc! { "a": 1, "b": -1 }), None);
    assert_eq!(covered(rawdoc! { "a": 5 }, rawdoc! { "b": -1 }), Some(true));
    assert_eq!(
        covered(rawdoc! { "a": 5 }, rawdoc! { "a": 1, "b": 1 }),
        Some(false)
    );
    assert_eq!(
        covered(rawdoc! { "a": { "$in": [1, 2] } }, rawdoc! { "b": 1 }),
        None
    );
    assert_eq!(
        covered(rawdoc! { "a": { "$in": [1, 2] } }, rawdoc! { "a": 1 }),
        Some(false)
    );
    assert_eq!(
        covered(rawdoc! { "a": { "$gt": 1 } }, rawdoc! { "b": 1 }),
        None
    );
    // A collated sort cannot come from binary keys.
    let f = Filter::compile(&rawdoc! {}).expect("filter");
    let s = SortSpec::compile(&rawdoc! { "a": 1 })
        .expect("sort")
        .with_collation(
            Collation::parse(&rawdoc! { "locale": "en" })
                .expect("c")
                .map(Arc::new),
        );
    let p = plan(
        &Query {
            filter: Some(&f),
            sort: Some(&s),
            hint: None,
        },
        &ab,
    )
    .expect("plans");
    assert!(!p.sorted);
}

#[test]
fn sparse_partial_and_hidden_indexes() {
    let sparse = [index(
        5,
        rawdoc! { "v": 2, "key": { "a": 1 }, "name": "a_1", "sparse": true },
        false,
    )];
    let used = |f: RawDocumentBuf, s: Option<RawDocumentBuf>, idx: &[IndexSpec]| {
        chosen(&plan_of(f, s, None, idx).expect("plans")).is_some()
    };
    assert!(used(rawdoc! { "a": 1 }, None, &sparse));
    assert!(used(
        rawdoc! { "a": { "$exists": true }, "b": 1 },
        Some(rawdoc! { "a": 1 }),
        &sparse
    ));
    assert!(!used(rawdoc! { "a": null }, None, &sparse));
    assert!(!used(rawdoc! {}, Some(rawdoc! { "a": 1 }), &sparse));
    // Hinted, it is used even though results may then be incomplete.
    let p = plan_of(rawdoc! {}, None, Some(Hint::Name("a_1".into())), &sparse).expect("plans");
    assert!(chosen(&p).is_some());

    let partial = [index(
        6,
        rawdoc! {
            "v": 2, "key": { "a": 1 }, "name": "a_1",
            "partialFilterExpression": { "a": { "$gt": 5 }, "b": { "$exists": true } },
        },
        false,
    )];
    assert!(used(rawdoc! { "a": 7, "b": 1 }, None, &partial));
    assert!(used(
        rawdoc! { "a": { "$gte": 6, "$lt": 9 }, "b": "x" },
        None,
        &partial
    ));
    assert!(!used(rawdoc! { "a": 7 }, None, &partial));
    assert!(!used(rawdoc! { "a": 3, "b": 1 }, None, &partial));
    assert!(!used(
        rawdoc! { "a": { "$gte": 5 }, "b": 1 },
        None,
        &partial
    ));

    let hidden = [index(
        8,
        rawdoc! { "v": 2, "key": { "a": 1 }, "name": "a_1", "hidden": true },
        false,
    )];
    assert!(!used(rawdoc! { "a": 1 }, None, &hidden));
    let err = plan_of(
        rawdoc! { "a": 1 },
        None,
        Some(Hint::Name("a_1".into())),
        &hidden,
    )
    .expect_err("hidden");
    assert_eq!(err.code, ErrorCode::BadValue);
}

#[test]
fn hints() {
    let idx = [
        simple(1, "a_1", rawdoc! { "a": 1 }),
        simple(0, "_ts_1", rawdoc! { "_ts": 1 }),
    ];
    let p = plan_of(rawdoc! { "a": 1 }, None, Some(Hint::Natural(true)), &idx).expect("plans");
    assert!(matches!(p.access, Access::Collscan { reverse: true }));
    let p = plan_of(
        rawdoc! { "b": 1 },
        None,
        Some(Hint::Key(rawdoc! { "a": 1.0 })),
        &idx,
    )
    .expect("plans");
    assert_eq!(
        chosen(&p),
        Some((
            "a_1".to_owned(),
            rawdoc! { "a": strings(&["[MinKey, MaxKey]"]) }
        ))
    );
    let p = plan_of(rawdoc! {}, None, Some(Hint::Name("_id_".into())), &idx).expect("plans");
    assert_eq!(chosen(&p).map(|c| c.0).as_deref(), Some("_id_"));
    for bad in [
        Hint::Name("nope".into()),
        Hint::Key(rawdoc! { "a": -1 }),
        Hint::Name("_ts_1".into()),
    ] {
        let err = plan_of(rawdoc! {}, None, Some(bad), &idx).expect_err("no such index");
        assert_eq!(err.code, ErrorCode::BadValue);
        assert_eq!(
            err.errmsg,
            "hint provided does not correspond to an existing index"
        );
    }
    assert_eq!(
        Hint::parse(RawBsonRef::Int32(1), "h")
            .expect_err("type")
            .code,
        ErrorCode::TypeMismatch
    );
}

#[test]
fn collation_leaves_string_bounds_open() {
    let a = [simple(7, "a_1", rawdoc! { "a": 1 })];
    let c = Collation::parse(&rawdoc! { "locale": "en", "strength": 2 })
        .expect("collation")
        .map(Arc::new);
    let run = |filter: RawDocumentBuf| {
        let f = Filter::compile(&filter)
            .expect("filter")
            .with_collation(c.clone());
        chosen(
            &plan(
                &Query {
                    filter: Some(&f),
                    sort: None,
                    hint: None,
                },
                &a,
            )
            .expect("plans"),
        )
    };
    assert!(run(rawdoc! { "a": "x" }).is_none());
    assert!(run(rawdoc! { "a": { "$in": [1, "x"] } }).is_none());
    assert_eq!(
        run(rawdoc! { "a": { "$gt": 5 } }).map(|c| c.1),
        Some(rawdoc! { "a": strings(&["(5, inf.0]"]) })
    );
}

#[test]
fn regex_prefixes() {
    assert_eq!(regex_prefix("^abc", "").as_deref(), Some("abc"));
    assert_eq!(regex_prefix("^ab.c", "").as_deref(), Some("ab"));
    assert_eq!(regex_prefix("^abc*", "").as_deref(), Some("ab"));
    assert_eq!(regex_prefix("^a\\.b", "").as_deref(), Some("a.b"));
    assert_eq!(regex_prefix("\\Aab", "s").as_deref(), Some("ab"));
    assert_eq!(regex_prefix("abc", ""), None);
    assert_eq!(regex_prefix("^abc", "i"), None);
    assert_eq!(regex_prefix("^a|b", ""), None);
}

#[test]
fn key_ranges_of_compound_points_and_ranges() {
    let ix = IndexScan {
        index: Some(0),
        index_id: 1,
        name: "a_1_b_1".into(),
        key_pattern: rawdoc! { "a": 1, "b": 1 },
        fields: vec![
            ("a".into(), Direction::Ascending),
            ("b".into(), Direction::Ascending),
        ],
        bounds: vec![
            vec![
                Interval::point(RawBson::Int32(1)),
                Interval::point(RawBson::Int32(2)),
            ],
            vec![Interval::new(
                RawBson::Int32(5),
                false,
                RawBson::Double(f64::INFINITY),
                true,
            )],
        ],
        reverse: false,
        multikey: false,
        unique: false,
        sparse: false,
        partial: false,
        exact: true,
        keys_only: false,
        distinct: false,
        covered: false,
    };
    let prefix = crate::index::index_prefix(1);
    let (ranges, checks) = ix.key_ranges(&prefix);
    assert_eq!(ranges.len(), 2);
    let key = |a: i32, b: i32| {
        let mut k = prefix.to_vec();
        encode_component(RawBsonRef::Int32(a), Direction::Ascending, &mut k);
        encode_component(RawBsonRef::Int32(b), Direction::Ascending, &mut k);
        k.extend_from_slice(&[1, 2, 3]);
        k
    };
    let inside = |k: &[u8]| {
        ranges
            .iter()
            .any(|r| k >= r.lower.as_slice() && r.upper.as_deref().is_none_or(|u| k < u))
    };
    assert!(inside(&key(1, 6)));
    assert!(inside(&key(2, 100)));
    assert!(!inside(&key(1, 5)));
    assert!(!inside(&key(3, 6)));
    assert!(!inside(&key(0, 6)));
    assert_eq!(checks.len(), 2);
    let mut five = Vec::new();
    encode_component(RawBsonRef::Int32(5), Direction::Ascending, &mut five);
    assert!(!checks[1].admits(&five));
}

#[test]
fn only_a_range_over_every_key_covers_all() {
    let scan = |bounds: Vec<Interval>, dir: Direction| IndexScan {
        index: Some(0),
        index_id: 1,
        name: "a_1".into(),
        key_pattern: rawdoc! { "a": 1 },
        fields: vec![("a".into(), dir)],
        bounds: vec![bounds],
        reverse: false,
        multikey: false,
        unique: false,
        sparse: false,
        partial: false,
        exact: true,
        keys_only: false,
        distinct: false,
        covered: false,
    };
    let prefix = crate::index::index_prefix(1);
    for dir in [Direction::Ascending, Direction::Descending] {
        let (ranges, _) = scan(vec![Interval::full()], dir).key_ranges(&prefix);
        assert_eq!(ranges.len(), 1);
        let desc = dir == Direction::Descending;
        assert!(
            ranges[0].covers_all(&prefix, desc),
            "{dir:?} {:?}",
            ranges[0]
        );
        assert!(
            !ranges[0].covers_all(&prefix, !desc),
            "{dir:?} {:?}",
            ranges[0]
        );
        let (ranges, _) = scan(vec![Interval::point(RawBson::Int32(1))], dir).key_ranges(&prefix);
        assert!(!ranges[0].covers_all(&prefix, desc), "{dir:?}");
        let (ranges, _) = scan(
            vec![Interval::new(
                RawBson::Int32(1),
                true,
                RawBson::MaxKey,
                true,
            )],
            dir,
        )
        .key_ranges(&prefix);
        assert!(!ranges[0].covers_all(&prefix, desc), "{dir:?}");
    }
    let whole = KeyRange {
        lower: prefix.to_vec(),
        upper: prefix_end(&prefix),
    };
    assert!(whole.covers_all(&prefix, false) && whole.covers_all(&prefix, true));
}
