//! Cases from mongod's `document_diff_calculator_test.cpp` and `document_diff_applier_test.cpp`
//! (inputs and expected outputs), and property tests: applying the computed diff to the
//! pre-image gives the post-image byte for byte.

use bson::{Bson, Document, RawDocumentBuf, doc, rawdoc};
use proptest::prelude::*;

use super::*;

fn raw(d: &Document) -> RawDocumentBuf {
    RawDocumentBuf::try_from(d).unwrap()
}

/// `computeOplogDiff(pre, post, padding)`, checked to apply back to `post`.
fn oplog_diff(pre: &Document, post: &Document, padding: usize) -> Option<Document> {
    let (pre, post) = (raw(pre), raw(post));
    let diff = compute_oplog_diff(&pre, &post, padding).unwrap()?;
    assert_eq!(apply_diff(&pre, &diff).unwrap().as_bytes(), post.as_bytes());
    Some(Document::try_from(diff.as_ref()).unwrap())
}

fn assert_diff(pre: &Document, post: &Document, padding: usize, expected: &Document) {
    let got = oplog_diff(pre, post, padding).expect("a diff");
    assert_eq!(
        raw(&got).as_bytes(),
        raw(expected).as_bytes(),
        "{got} != {expected}"
    );
}

#[test]
fn same_objects_no_diff() {
    for d in [
        doc! {"field1": 1},
        doc! {"field1": []},
        doc! {"field1": [{}]},
        doc! {"field1": [0, 1, 2, 3, 4]},
        doc! {"field1": null},
        doc! {"0": [0]},
        doc! {"0": [[{"0": [[{"0": [[]]}]]}]]},
    ] {
        let r = raw(&d);
        assert_eq!(
            compute_full_diff(&r, &r).unwrap().as_bytes(),
            rawdoc! {}.as_bytes()
        );
    }
}

#[test]
fn simple_insert_update_delete() {
    assert_diff(
        &doc! {"a": {"b": 1}},
        &doc! {"a": {"b": 1}, "c": 1},
        0,
        &doc! {"i": {"c": 1}},
    );
    assert_diff(
        &doc! {"a": {"b": 1}, "c": 1},
        &doc! {"a": {"b": 1}, "c": 2},
        0,
        &doc! {"u": {"c": 2}},
    );
    assert_diff(
        &doc! {"a": {"b": 1}, "c": 1},
        &doc! {"a": {"b": 1}},
        0,
        &doc! {"d": {"c": false}},
    );
}

#[test]
fn nested_insert_is_an_update_of_the_whole_value() {
    assert_diff(
        &doc! {"a": {}, "e": 1, "f": 1},
        &doc! {"a": {"b": {"c": {"d": 1}}}, "e": 1, "f": 1},
        0,
        &doc! {"u": {"a": {"b": {"c": {"d": 1}}}}},
    );
    assert_diff(
        &doc! {"a": 1, "g": 1, "h": 1},
        &doc! {"a": {"b": 2, "c": [2], "d": {"e": 2}, "f": 1}, "g": 1, "h": 1},
        0,
        &doc! {"u": {"a": {"b": 2, "c": [2], "d": {"e": 2}, "f": 1}}},
    );
}

#[test]
fn nested_updates() {
    assert_diff(
        &doc! {"a": {"b": {"c": {"d": 1, "e": 1, "f": 1}}}},
        &doc! {"a": {"b": {"c": {"d": 2, "e": 1, "f": 1}}}},
        0,
        &doc! {"sa": {"sb": {"sc": {"u": {"d": 2}}}}},
    );
    assert_diff(
        &doc! {"a": {"b": {"c": {"d": [1], "e": 1, "f": 1}}}},
        &doc! {"a": {"b": {"c": {"d": [2], "e": 1, "f": 1}}}},
        0,
        &doc! {"sa": {"sb": {"sc": {"u": {"d": [2]}}}}},
    );
    assert_diff(
        &doc! {"a": {"b": {"c": {"d": 1}, "e": 1, "f": 1}}},
        &doc! {"a": {"b": {"c": {}, "e": 1, "f": 1}}},
        0,
        &doc! {"sa": {"sb": {"u": {"c": {}}}}},
    );
}

#[test]
fn large_deltas_give_no_diff() {
    let none = |pre: Document, post: Document, padding| {
        assert!(
            oplog_diff(&pre, &post, padding).is_none(),
            "{pre} -> {post}"
        );
    };
    none(
        doc! {"a": 1, "b": 2, "c": 3},
        doc! {"A": 1, "B": 2, "C": 3},
        0,
    );
    none(
        doc! {"b": 1, "c": 1, "d": 1},
        doc! {"a": 1, "b": 1, "c": 1, "d": 1},
        0,
    );
    none(doc! {}, doc! {}, 0);
    none(doc! {"b": 1}, doc! {}, 0);
    none(doc! {"a": {"b": 1}}, doc! {}, 0);
    none(doc! {"b": [1, 2, 3]}, doc! {}, 0);
    none(doc! {"b": {}}, doc! {}, 0);
    none(doc! {}, doc! {"b": 1}, 0);
    none(doc! {}, doc! {"a": {"b": 1}}, 0);
    none(doc! {}, doc! {"b": [1, 2, 3]}, 0);
    none(doc! {}, doc! {"b": {}}, 0);
    none(doc! {"a": null}, doc! {}, 15);
}

#[test]
fn moved_field_is_inserted_at_the_end() {
    assert_diff(
        &doc! {"a": 1, "b": "valueString", "c": 3, "d": 4},
        &doc! {"b": "valueString", "c": 3, "d": 4, "a": 1},
        15,
        &doc! {"i": {"a": 1}},
    );
}

#[test]
fn deletes_in_ascending_order_after_trailing_ones() {
    assert_diff(
        &doc! {"b": 1, "a": 2, "c": 3, "d": 4, "e": "valueString"},
        &doc! {"c": 3, "d": 4, "e": "valueString"},
        15,
        &doc! {"d": {"a": false, "b": false}},
    );
    assert_diff(
        &doc! {"b": 1, "a": 2, "c": "value", "d": "valueString", "e": "valueString", "g": 1, "f": 1},
        &doc! {"c": "value", "d": "valueString", "e": "valueString"},
        15,
        &doc! {"d": {"g": false, "f": false, "a": false, "b": false}},
    );
}

#[test]
fn type_changes_are_updates() {
    let double = doc! {"a": "valueString", "b": 2, "c": {"subField1": 1, "subField2": 3.0}, "d": 4};
    let int = doc! {"a": "valueString", "b": 2, "c": {"subField1": 1, "subField2": 3}, "d": 4};
    let long = doc! {"a": "valueString", "b": 2, "c": {"subField1": 1, "subField2": 3_i64}, "d": 4};
    assert_diff(&double, &int, 15, &doc! {"sc": {"u": {"subField2": 3}}});
    assert_diff(&int, &long, 15, &doc! {"sc": {"u": {"subField2": 3_i64}}});
    assert_diff(&long, &double, 15, &doc! {"sc": {"u": {"subField2": 3.0}}});
    assert_diff(
        &doc! {"a": null, "b": Bson::Undefined, "c": null, "d": "someValueStr"},
        &doc! {"a": null, "b": Bson::Undefined, "c": Bson::Undefined, "d": "someValueStr"},
        15,
        &doc! {"u": {"c": Bson::Undefined}},
    );
}

#[test]
fn field_order() {
    assert_diff(
        &doc! {"a": 1, "b": 2, "c": {"p": 1, "q": 1, "s": 1, "r": 2}, "d": 4},
        &doc! {"a": 1, "b": 2, "c": {"p": 1, "q": 1, "r": 2, "s": 1}, "d": 4},
        10,
        &doc! {"sc": {"i": {"s": 1}}},
    );
}

#[test]
fn arrays() {
    assert_diff(
        &doc! {"field1": "abcd", "field2": [1, 2, 3]},
        &doc! {"field1": "abcd", "field2": [1, 2, 3, 4]},
        5,
        &doc! {"sfield2": {"a": true, "u3": 4}},
    );
    assert_diff(
        &doc! {"field1": "abcd", "field2": [1, 2, 3, [[2]]]},
        &doc! {"field1": "abcd", "field2": [1, 2, 3, [[4]]]},
        0,
        &doc! {"sfield2": {"a": true, "u3": [[4]]}},
    );
    assert_diff(
        &doc! {"field1": "abcd", "field2": [1, 2, 3, [1, "longString", [2], 4, 5, 6], 5, 5, 5]},
        &doc! {"field1": "abcd", "field2": [1, 2, 3, [1, "longString", [4], 4], 5, 6]},
        0,
        &doc! {"sfield2": {"a": true, "l": 6, "s3": {"a": true, "l": 4, "u2": [4]}, "u5": 6}},
    );
}

#[test]
fn applier_cases() -> Result<(), DiffError> {
    let apply = |pre: Document, diff: Document| -> Result<Document, DiffError> {
        let out = apply_diff(&raw(&pre), &raw(&diff))?;
        Ok(Document::try_from(out.as_ref()).unwrap())
    };
    // Updates in place, inserts at the end, deletes dropped.
    assert_eq!(
        apply(
            doc! {"a": 1, "b": 2, "c": 3},
            doc! {"d": {"a": false}, "u": {"b": 5}, "i": {"e": 9}}
        )?,
        doc! {"b": 5, "c": 3, "e": 9}
    );
    // An insert of an existing field moves it to the end.
    assert_eq!(
        apply(doc! {"a": 1, "b": 2}, doc! {"i": {"a": 9}})?,
        doc! {"b": 2, "a": 9}
    );
    // An update of a missing field appends it, before the inserts.
    assert_eq!(
        apply(doc! {"a": 1}, doc! {"u": {"z": 1}, "i": {"y": 2}})?,
        doc! {"a": 1, "z": 1, "y": 2}
    );
    // Array diffs: resize shorter, pad longer with null, sub-diffs.
    assert_eq!(
        apply(
            doc! {"a": [1, 2, 3, 4]},
            doc! {"sa": {"a": true, "l": 2, "u0": 9}}
        )?,
        doc! {"a": [9, 2]}
    );
    assert_eq!(
        apply(doc! {"a": [1]}, doc! {"sa": {"a": true, "l": 4, "u2": 7}})?,
        doc! {"a": [1, Bson::Null, 7, Bson::Null]}
    );
    assert_eq!(
        apply(
            doc! {"a": [{"b": 1}, [1]]},
            doc! {"sa": {"a": true, "s0": {"u": {"b": 2}}, "s1": {"a": true, "u1": 2}}}
        )?,
        doc! {"a": [{"b": 2}, [1, 2]]}
    );
    // A sub-diff whose type no longer matches the pre-image writes null.
    assert_eq!(
        apply(doc! {"a": 5}, doc! {"sa": {"u": {"b": 1}}})?,
        doc! {"a": Bson::Null}
    );
    assert_eq!(
        apply(
            doc! {"a": [5]},
            doc! {"sa": {"a": true, "s0": {"u": {"b": 1}}, "s3": {"u": {"c": 1}}}}
        )?,
        doc! {"a": [Bson::Null, Bson::Null, Bson::Null, Bson::Null]}
    );
    Ok(())
}

#[test]
fn malformed_diffs_are_errors_not_panics() {
    let code = |pre: Document, diff: Document| match apply_diff(&raw(&pre), &raw(&diff)) {
        Err(DiffError::Malformed { code, .. }) => code,
        other => panic!("{other:?}"),
    };
    assert_eq!(code(doc! {}, doc! {}), 4_770_500);
    assert_eq!(code(doc! {}, doc! {"x": {}}), 4_770_503);
    assert_eq!(code(doc! {}, doc! {"i": {}, "u": {}}), 4_770_503);
    assert_eq!(code(doc! {}, doc! {"u": 1}), 4_770_507);
    assert_eq!(code(doc! {}, doc! {"sa": {}, "u": {}}), 4_770_514);
    assert_eq!(
        code(doc! {}, doc! {"u": {"a": 1}, "i": {"a": 2}}),
        4_728_000
    );
    assert_eq!(code(doc! {"a": []}, doc! {"sa": {"a": false}}), 4_770_520);
    assert_eq!(
        code(doc! {"a": []}, doc! {"sa": {"a": true, "ux": 1}}),
        4_770_512
    );
    assert_eq!(
        code(doc! {"a": []}, doc! {"sa": {"a": true, "x1": 1}}),
        4_770_502
    );
    assert_eq!(
        code(doc! {"a": []}, doc! {"sa": {"a": true, "u": 1}}),
        4_770_521
    );
    // Out of order indexes would make mongod's applier loop; refused here.
    assert_eq!(
        code(doc! {"a": []}, doc! {"sa": {"a": true, "u5": 1, "u2": 1}}),
        4_770_512
    );
    // A huge length is bounded by the output size, not memory.
    assert_eq!(
        apply_diff(
            &raw(&doc! {"a": []}),
            &raw(&doc! {"sa": {"a": true, "l": i32::MAX}})
        ),
        Err(DiffError::TooLarge)
    );
}

fn nested(depth: usize, leaf: Bson) -> Document {
    let mut d = doc! {"x": leaf};
    for _ in 0..depth {
        d = doc! {"x": d};
    }
    d
}

#[test]
fn depth_is_bounded() {
    let deep_pre = raw(&nested(MAX_DEPTH + 5, Bson::Int32(1)));
    let deep_post = raw(&nested(MAX_DEPTH + 5, Bson::Int32(2)));
    assert_eq!(
        compute_full_diff(&deep_pre, &deep_post),
        Err(DiffError::TooDeep)
    );
    // 100 levels, mongod's limit for stored documents, work.
    let pre = raw(&nested(100, Bson::Int32(1)));
    let post = raw(&nested(100, Bson::Int32(2)));
    let diff = compute_full_diff(&pre, &post).unwrap();
    assert_eq!(apply_diff(&pre, &diff).unwrap().as_bytes(), post.as_bytes());
}

// ---------------------------------------------------------------------------------------------
// Property tests.

const KEYS: [&str; 8] = ["a", "b", "c", "d", "0", "1", "x.y", "long_field_name"];

fn scalar() -> impl Strategy<Value = Bson> {
    prop_oneof![
        Just(Bson::Null),
        (-3..4_i32).prop_map(Bson::Int32),
        (-3..4_i64).prop_map(Bson::Int64),
        prop_oneof![Just(0.0), Just(-0.0), Just(1.5), Just(f64::NAN)].prop_map(Bson::Double),
        "[a-z]{0,12}".prop_map(Bson::String),
        any::<bool>().prop_map(Bson::Boolean),
    ]
}

fn value() -> impl Strategy<Value = Bson> {
    scalar().prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..6).prop_map(Bson::Array),
            proptest::collection::vec((0..KEYS.len(), inner), 0..6).prop_map(|fields| {
                let mut d = Document::new();
                for (k, v) in fields {
                    d.insert(KEYS[k], v);
                }
                Bson::Document(d)
            }),
        ]
    })
}

fn document() -> impl Strategy<Value = Document> {
    proptest::collection::vec((0..KEYS.len(), value()), 0..8).prop_map(|fields| {
        let mut d = Document::new();
        for (k, v) in fields {
            d.insert(KEYS[k], v);
        }
        d
    })
}

fn roll(seed: &mut u64, n: u64) -> u64 {
    *seed = seed
        .wrapping_mul(6_364_136_223_846_793_005)
        .wrapping_add(1_442_695_040_888_963_407);
    (*seed >> 33) % n
}

/// A post-image near `pre`: fields removed, changed, moved to the end, added; arrays grown,
/// shrunk or edited; the same recursively, as updates do.
fn mutate(v: &Bson, seed: &mut u64, fresh: &mut impl FnMut() -> Bson) -> Bson {
    match v {
        Bson::Document(d) => {
            let mut out = Document::new();
            let mut moved = Vec::new();
            for (k, v) in d {
                match roll(seed, 8) {
                    0 => {}
                    1 => moved.push((k.clone(), v.clone())),
                    2 => {
                        out.insert(k.clone(), fresh());
                    }
                    3 | 4 => {
                        out.insert(k.clone(), mutate(v, seed, fresh));
                    }
                    _ => {
                        out.insert(k.clone(), v.clone());
                    }
                }
            }
            for (k, v) in moved {
                out.insert(k, v);
            }
            if roll(seed, 3) == 0 {
                let k = KEYS[usize::try_from(roll(seed, KEYS.len() as u64)).unwrap()];
                if !out.contains_key(k) {
                    out.insert(k, fresh());
                }
            }
            Bson::Document(out)
        }
        Bson::Array(a) => {
            let mut out: Vec<Bson> = Vec::new();
            for v in a {
                match roll(seed, 6) {
                    0 => out.push(fresh()),
                    1 | 2 => out.push(mutate(v, seed, fresh)),
                    _ => out.push(v.clone()),
                }
            }
            match roll(seed, 4) {
                0 => out.truncate(out.len() / 2),
                1 => out.push(fresh()),
                _ => {}
            }
            Bson::Array(out)
        }
        other => {
            if roll(seed, 2) == 0 {
                fresh()
            } else {
                other.clone()
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn apply_of_diff_gives_the_post_image(
        pre in document(),
        seed in any::<u64>(),
        fresh_values in proptest::collection::vec(value(), 16),
        padding in prop_oneof![Just(0_usize), Just(DELTA_OPLOG_ENTRY_METADATA_SIZE)],
    ) {
        let mut seed = seed;
        let mut next = 0;
        let mut fresh = || { next += 1; fresh_values[next % fresh_values.len()].clone() };
        let Bson::Document(post) = mutate(&Bson::Document(pre.clone()), &mut seed, &mut fresh)
        else { unreachable!() };
        let (pre, post) = (raw(&pre), raw(&post));

        let full = compute_full_diff(&pre, &post).unwrap();
        if full.is_empty() {
            // No change: mongod logs nothing (and refuses to apply an empty diff).
            prop_assert_eq!(pre.as_bytes(), post.as_bytes());
            return Ok(());
        }
        let applied = apply_diff(&pre, &full).unwrap();
        prop_assert_eq!(applied.as_bytes(), post.as_bytes());
        crate::oplog::update_description(&full).ok();

        if let Some(diff) = compute_oplog_diff(&pre, &post, padding).unwrap() {
            prop_assert!(diff.as_bytes().len() < post.as_bytes().len());
            let applied = apply_diff(&pre, &diff).unwrap();
            prop_assert_eq!(applied.as_bytes(), post.as_bytes());
        }
    }

    #[test]
    fn independent_images_round_trip(pre in document(), post in document()) {
        let (pre, post) = (raw(&pre), raw(&post));
        let full = compute_full_diff(&pre, &post).unwrap();
        if full.is_empty() {
            // No change: mongod logs nothing (and refuses to apply an empty diff).
            prop_assert_eq!(pre.as_bytes(), post.as_bytes());
            return Ok(());
        }
        let applied = apply_diff(&pre, &full).unwrap();
        prop_assert_eq!(applied.as_bytes(), post.as_bytes());
    }

    #[test]
    fn apply_never_panics_on_arbitrary_diffs(pre in document(), diff in document()) {
        let _ = apply_diff(&raw(&pre), &raw(&diff));
        let _ = crate::oplog::update_description(&raw(&diff));
    }
}

#[test]
fn more_calculator_cases() {
    assert_diff(
        &doc! {"": "1", "field2": [1, 2, 3, {"": {"": 1, "padding": "largeFieldValue"}}]},
        &doc! {"": "2", "field2": [1, 2, 3, {"": {"": 2, "padding": "largeFieldValue"}}]},
        15,
        &doc! {"u": {"": "2"}, "sfield2": {"a": true, "s3": {"s": {"u": {"": 2}}}}},
    );
    assert_diff(
        &doc! {"field1": "abcd", "field2": [1, 2, 3,
        {"field3": ["veryLargeStringValueveryLargeStringValue", 2, 3, 4]}]},
        &doc! {"field1": "abcd", "field2": [1, 2, 3,
        {"field3": ["veryLargeStringValueveryLargeStringValue", 2, 4, 3, 5]}]},
        0,
        &doc! {"sfield2": {"a": true, "s3": {"sfield3": {"a": true, "u2": 4, "u3": 3, "u4": 5}}}},
    );
    assert_diff(
        &doc! {"field1": "abcd", "field2": [1, 2, 3, {"field3": ["largeString", 2, 3, 4, 5]}]},
        &doc! {"field1": "abcd", "field2": [1, 2, 3, {"field3": ["largeString", 2, 3, 5]}]},
        15,
        &doc! {"sfield2": {"a": true, "s3": {"sfield3": {"a": true, "l": 4, "u3": 5}}}},
    );
    assert_diff(
        &doc! {"level1Field1": "abcd",
        "level1Field2": {"level2Field1": {"level3Field1": {"p": 1}, "level3Field2": {"q": 1}},
            "level2Field2": 2},
        "level1Field3": 3,
        "level1Field4": {"level2Field1": {"level3Field1": {"p": 1}, "level3Field2": {"q": 1}}}},
        &doc! {"level1Field1": "abcd",
        "level1Field2": {"level2Field1": {"level3Field1": {"q": 1}, "level3Field2": {"q": 1}},
            "level2Field2": 2},
        "level1Field3": "3",
        "level1Field4": {"level2Field1": {"level3Field1": {"q": 1}, "level3Field2": {"q": 1}}}},
        15,
        &doc! {"u": {"level1Field3": "3"},
        "slevel1Field2": {"slevel2Field1": {"u": {"level3Field1": {"q": 1}}}},
        "slevel1Field4": {"slevel2Field1": {"u": {"level3Field1": {"q": 1}}}}},
    );
    assert_diff(
        &doc! {"field1": "abcd", "field2": [1, 2, 3, {"field3": [2, 3, 4, 5]}]},
        &doc! {"field1": "abcd", "field2": [1, 2, 3, {"field3": [1, 2, 3, 4, 5]}]},
        15,
        &doc! {"sfield2": {"a": true, "u3": {"field3": [1, 2, 3, 4, 5]}}},
    );
    assert_diff(
        &doc! {"field1": [1, 2, 3, 4, 5, 6, {"a": 1, "b": 2, "c": 3, "d": 4}, 7]},
        &doc! {"field1": [1, 2, 3, 4, 5, 6, {"p": 1, "q": 2}, 7]},
        0,
        &doc! {"sfield1": {"a": true, "u6": {"p": 1, "q": 2}}},
    );
    assert_diff(
        &doc! {"field": {"p": "someString", "q": 2, "r": {"a": 1, "b": 2, "c": 3, "d": 4}, "s": 3}},
        &doc! {"field": {"p": "someString", "q": 2, "r": {"p": 1, "q": 2}, "s": 3}},
        0,
        &doc! {"sfield": {"u": {"r": {"p": 1, "q": 2}}}},
    );
    assert_diff(
        &doc! {"field": {"p": "someString", "q": 2, "r": [1, 3, 4, 5], "s": 3}},
        &doc! {"field": {"p": "someString", "q": 2, "r": [1, 2, 3, 4], "s": 3}},
        0,
        &doc! {"sfield": {"u": {"r": [1, 2, 3, 4]}}},
    );
}

/// `{largeField, subObj: {largeField, subObj: ...}}`, `levels` deep, `field: value` innermost.
fn deep(levels: usize, value: Option<i32>) -> Document {
    let large = "a".repeat(50);
    let mut inner = doc! {"largeField": large.clone()};
    if let Some(v) = value {
        inner.insert("field", v);
    }
    for _ in 1..levels {
        inner = doc! {"largeField": large.clone(), "subObj": inner};
    }
    doc! {"largeField": large, "subObj": inner}
}

#[test]
fn deeply_nested_objects() {
    // mongod's DeeplyNestObjectGenerateDiff and DeepestObjectSubDiff, 100 levels deep.
    assert_diff(
        &deep(100, None),
        &doc! {"largeField": "a".repeat(50)},
        0,
        &doc! {"d": {"subObj": false}},
    );
    let mut expected = doc! {"u": {"field": 2}};
    for _ in 0..100 {
        expected = doc! {"ssubObj": expected};
    }
    assert_diff(&deep(100, Some(1)), &deep(100, Some(2)), 0, &expected);
}
