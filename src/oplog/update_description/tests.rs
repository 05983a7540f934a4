//! Cases from mongod's `change_stream_document_diff_parser_test.cpp` (inputs and expected
//! outputs), the `disambiguatedPaths` jstest's update, and the whole `updateDescription` shape.

use bson::{Bson, Document, RawDocumentBuf, doc};

use super::*;

fn describe(diff: &Document) -> (Document, Vec<String>, Vec<(String, i32)>, Document) {
    let d = update_description(&RawDocumentBuf::try_from(diff).unwrap()).unwrap();
    (
        Document::try_from(d.updated_fields.as_ref()).unwrap(),
        d.removed_fields,
        d.truncated_arrays,
        Document::try_from(d.disambiguated_paths.as_ref()).unwrap(),
    )
}

#[test]
fn numeric_fields_below_the_root_are_disambiguated() {
    let (updated, removed, truncated, paths) = describe(&doc! {"sa": {"u": {"0": 1}}});
    assert_eq!(updated, doc! {"a.0": 1});
    assert_eq!(paths, doc! {"a.0": ["a", "0"]});
    assert!(removed.is_empty() && truncated.is_empty());

    let (updated, _, _, paths) = describe(&doc! {"sa": {"s0": {"a": true, "u0": 1}}});
    assert_eq!(updated, doc! {"a.0.0": 1});
    assert_eq!(paths, doc! {"a.0.0": ["a", "0", 0]});
}

#[test]
fn unambiguous_paths_are_not_disambiguated() {
    // A numeric field at the root cannot be an array index.
    let (updated, _, _, paths) = describe(&doc! {"u": {"0": 1}});
    assert_eq!(updated, doc! {"0": 1});
    assert!(paths.is_empty());
    // Nor a numeric field with a leading zero.
    let (updated, _, _, paths) = describe(&doc! {"sa": {"u": {"01": 1}}});
    assert_eq!(updated, doc! {"a.01": 1});
    assert!(paths.is_empty());
    // Array indexes alone are not ambiguous.
    let (updated, _, _, paths) = describe(&doc! {"sa": {"a": true, "s0": {"u": {"b": 1}}}});
    assert_eq!(updated, doc! {"a.0.b": 1});
    assert!(paths.is_empty());
}

#[test]
fn removed_fields_and_truncated_arrays() {
    let (updated, removed, truncated, paths) =
        describe(&doc! {"d": {"a.b": false}, "sc": {"d": {"0": false}}});
    assert!(updated.is_empty() && truncated.is_empty());
    assert_eq!(removed, ["a.b", "c.0"]);
    assert_eq!(paths, doc! {"a.b": ["a.b"], "c.0": ["c", "0"]});

    let (updated, removed, truncated, paths) = describe(&doc! {
        "sa.b": {"a": true, "l": 5},
        "sc": {"s0": {"a": true, "l": 5}},
    });
    assert!(updated.is_empty() && removed.is_empty());
    assert_eq!(truncated, [("a.b".to_owned(), 5), ("c.0".to_owned(), 5)]);
    assert_eq!(paths, doc! {"a.b": ["a.b"], "c.0": ["c", "0"]});
}

#[test]
fn combination_of_ambiguous_fields() {
    let (updated, _, _, paths) = describe(&doc! {
        "sa.b": {"a": true, "s0": {"u": {"1": 1}}},
        "sc": {"a": true, "s0": {"u": {"d.e": 1}}, "s1": {"u": {"2": 1}}},
        "sf": {"s1": {"u": {"g.h": 1}, "s2": {"a": true, "u3": 1, "s4": {"u": {"5": 1}}}}},
    });
    assert_eq!(
        updated,
        doc! {"a.b.0.1": 1, "c.0.d.e": 1, "c.1.2": 1, "f.1.g.h": 1, "f.1.2.3": 1, "f.1.2.4.5": 1}
    );
    assert_eq!(
        paths,
        doc! {
            "a.b.0.1": ["a.b", 0, "1"],
            "c.0.d.e": ["c", 0, "d.e"],
            "c.1.2": ["c", 1, "2"],
            "f.1.g.h": ["f", "1", "g.h"],
            "f.1.2.3": ["f", "1", "2", 3],
            "f.1.2.4.5": ["f", "1", "2", 4, "5"],
        }
    );
}

#[test]
fn duplicate_paths_are_kept() {
    let d = update_description(
        &RawDocumentBuf::try_from(&doc! {"u": {"a.b": 2}, "sa": {"u": {"b": 1}}}).unwrap(),
    )
    .unwrap();
    let fields: Vec<(String, Bson)> = d
        .updated_fields
        .iter()
        .map(|r| {
            let (k, v) = r.unwrap();
            (k.as_str().to_owned(), Bson::try_from(v).unwrap())
        })
        .collect();
    assert_eq!(
        fields,
        [
            ("a.b".to_owned(), Bson::Int32(2)),
            ("a.b".to_owned(), Bson::Int32(1))
        ]
    );
    assert_eq!(
        Document::try_from(d.disambiguated_paths.as_ref()).unwrap(),
        doc! {"a.b": ["a.b"]}
    );
}

#[test]
fn updates_then_inserts_then_removals_then_sub_diffs() {
    let (updated, removed, truncated, _) = describe(&doc! {
        "d": {"z": false},
        "u": {"b": 1},
        "i": {"a": 2},
        "sc": {"a": true, "l": 1, "u0": 3},
    });
    assert_eq!(updated, doc! {"b": 1, "a": 2, "c.0": 3});
    assert_eq!(removed, ["z"]);
    assert_eq!(truncated, [("c".to_owned(), 1)]);
}

#[test]
fn the_event_document() -> Result<(), DiffError> {
    let d = update_description(
        &RawDocumentBuf::try_from(&doc! {"d": {"x": false}, "sa": {"u": {"0": 1}}}).unwrap(),
    )?;
    let plain = Document::try_from(d.to_document(false)?.as_ref()).unwrap();
    assert_eq!(
        plain,
        doc! {"updatedFields": {"a.0": 1}, "removedFields": ["x"], "truncatedArrays": []}
    );
    let expanded = Document::try_from(d.to_document(true)?.as_ref()).unwrap();
    assert_eq!(
        expanded,
        doc! {
            "updatedFields": {"a.0": 1},
            "removedFields": ["x"],
            "truncatedArrays": [],
            "disambiguatedPaths": {"a.0": ["a", "0"]},
        }
    );
    let d =
        update_description(&RawDocumentBuf::try_from(&doc! {"sa": {"a": true, "l": 2}}).unwrap())?;
    let plain = Document::try_from(d.to_document(false)?.as_ref()).unwrap();
    assert_eq!(
        plain.get_array("truncatedArrays").unwrap(),
        &vec![Bson::Document(doc! {"field": "a", "newSize": 2})]
    );
    Ok(())
}

#[test]
fn computed_diffs_describe_the_change() -> Result<(), DiffError> {
    // mongod's jstest: indexes and plain fields only, so no disambiguatedPaths.
    let pre = doc! {"_id": 100, "a": 1, "arrayForReplacement": [1, 2, 3, 4, 5, 6, 7],
    "topLevelArray": [{"subArray": [0, [0, 1, [0, 1, 2]]]}]};
    let post = doc! {"_id": 100, "a": 2, "arrayForReplacement": [0],
    "topLevelArray": [{"subArray": [0, [0, [0, 1, 3]]]}]};
    let diff = crate::oplog::compute_full_diff(
        &RawDocumentBuf::try_from(&pre).unwrap(),
        &RawDocumentBuf::try_from(&post).unwrap(),
    )?;
    let (updated, removed, truncated, paths) =
        describe(&Document::try_from(diff.as_ref()).unwrap());
    assert!(removed.is_empty());
    assert_eq!(updated.get("a"), Some(&Bson::Int32(2)));
    assert!(truncated.contains(&("arrayForReplacement".to_owned(), 1)));
    assert!(paths.is_empty());
    Ok(())
}

#[test]
fn malformed_diffs_are_errors() {
    for diff in [
        doc! {},
        doc! {"a": true},
        doc! {"sa": {"a": true, "q1": 1}},
        doc! {"sa": 1},
    ] {
        assert!(
            update_description(&RawDocumentBuf::try_from(&diff).unwrap()).is_err(),
            "{diff}"
        );
    }
}
