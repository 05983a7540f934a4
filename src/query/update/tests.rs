use super::*;
use bson::rawdoc;

fn apply(
    update: &RawDocumentBuf,
    doc: &RawDocumentBuf,
) -> Result<Option<RawDocumentBuf>, CommandError> {
    Update::compile(update)?.apply(doc)
}

#[test]
#[expect(clippy::too_many_lines, reason = "one table")]
fn operator_table() -> Result<(), CommandError> {
    let cases: Vec<(RawDocumentBuf, RawDocumentBuf, Option<RawDocumentBuf>)> = vec![
        (
            rawdoc! {"$set": {"a": 2}},
            rawdoc! {"_id": 1, "a": 1},
            Some(rawdoc! {"_id": 1, "a": 2}),
        ),
        (rawdoc! {"$set": {"a": 1}}, rawdoc! {"_id": 1, "a": 1}, None),
        (
            rawdoc! {"$set": {"a": 1.0}},
            rawdoc! {"_id": 1, "a": 1},
            Some(rawdoc! {"_id": 1, "a": 1.0}),
        ),
        (rawdoc! {"$set": {}}, rawdoc! {"_id": 1}, None),
        (
            rawdoc! {"$set": {"b": 1, "a": 2}},
            rawdoc! {"_id": 1, "z": 0},
            Some(rawdoc! {"_id": 1, "z": 0, "a": 2, "b": 1}),
        ),
        (
            rawdoc! {"$set": {"a.b.c": 1}},
            rawdoc! {"_id": 1},
            Some(rawdoc! {"_id": 1, "a": {"b": {"c": 1}}}),
        ),
        (
            rawdoc! {"$set": {"a.b": 1}},
            rawdoc! {"_id": 1, "a": {"c": 0}},
            Some(rawdoc! {"_id": 1, "a": {"c": 0, "b": 1}}),
        ),
        (
            rawdoc! {"$set": {"a.1": 9}},
            rawdoc! {"_id": 1, "a": [1, 2, 3]},
            Some(rawdoc! {"_id": 1, "a": [1, 9, 3]}),
        ),
        (
            rawdoc! {"$set": {"a.3": 9}},
            rawdoc! {"_id": 1, "a": [1]},
            Some(rawdoc! {"_id": 1, "a": [1, null, null, 9]}),
        ),
        (
            rawdoc! {"$set": {"a.0.b": 9}},
            rawdoc! {"_id": 1, "a": [{"b": 1}]},
            Some(rawdoc! {"_id": 1, "a": [{"b": 9}]}),
        ),
        (
            rawdoc! {"$set": {"a.0": 9}},
            rawdoc! {"_id": 1},
            Some(rawdoc! {"_id": 1, "a": {"0": 9}}),
        ),
        (
            rawdoc! {"$set": {"a.0": 9}},
            rawdoc! {"_id": 1, "a": {"0": 1}},
            Some(rawdoc! {"_id": 1, "a": {"0": 9}}),
        ),
        (rawdoc! {"$set": {"_id": 1}}, rawdoc! {"_id": 1}, None),
        (
            rawdoc! {"$unset": {"a": ""}},
            rawdoc! {"_id": 1, "a": 1, "b": 2},
            Some(rawdoc! {"_id": 1, "b": 2}),
        ),
        (
            rawdoc! {"$unset": {"x": 1}},
            rawdoc! {"_id": 1, "a": 1},
            None,
        ),
        (
            rawdoc! {"$unset": {"a.b": 1}},
            rawdoc! {"_id": 1, "a": 1},
            None,
        ),
        (
            rawdoc! {"$unset": {"a.b": 1}},
            rawdoc! {"_id": 1, "a": [1]},
            None,
        ),
        (
            rawdoc! {"$unset": {"a.0": 1}},
            rawdoc! {"_id": 1, "a": [1, 2]},
            Some(rawdoc! {"_id": 1, "a": [null, 2]}),
        ),
        (
            rawdoc! {"$unset": {"a.b": 1}},
            rawdoc! {"_id": 1, "a": {"b": 1, "c": 1}},
            Some(rawdoc! {"_id": 1, "a": {"c": 1}}),
        ),
        (
            rawdoc! {"$inc": {"a": 1}},
            rawdoc! {"_id": 1, "a": 1},
            Some(rawdoc! {"_id": 1, "a": 2}),
        ),
        (
            rawdoc! {"$inc": {"a": 1}},
            rawdoc! {"_id": 1},
            Some(rawdoc! {"_id": 1, "a": 1}),
        ),
        (rawdoc! {"$inc": {"a": 0}}, rawdoc! {"_id": 1, "a": 5}, None),
        (
            rawdoc! {"$inc": {"a": 1}},
            rawdoc! {"_id": 1, "a": i32::MAX},
            Some(rawdoc! {"_id": 1, "a": 2_147_483_648_i64}),
        ),
        (
            rawdoc! {"$inc": {"a": 1_i64}},
            rawdoc! {"_id": 1, "a": 1},
            Some(rawdoc! {"_id": 1, "a": 2_i64}),
        ),
        (
            rawdoc! {"$inc": {"a": 0.5}},
            rawdoc! {"_id": 1, "a": 1},
            Some(rawdoc! {"_id": 1, "a": 1.5}),
        ),
        (
            rawdoc! {"$inc": {"a": 1}},
            rawdoc! {"_id": 1, "a": 1.5},
            Some(rawdoc! {"_id": 1, "a": 2.5}),
        ),
        (
            rawdoc! {"$inc": {"a.b": 2, "c": 1}},
            rawdoc! {"_id": 1, "a": {"b": 1}},
            Some(rawdoc! {"_id": 1, "a": {"b": 3}, "c": 1}),
        ),
        (
            rawdoc! {"$inc": {"a.1": 2}},
            rawdoc! {"_id": 1, "a": [1, 1]},
            Some(rawdoc! {"_id": 1, "a": [1, 3]}),
        ),
        (
            rawdoc! {"$mul": {"a": 3}},
            rawdoc! {"_id": 1, "a": 2},
            Some(rawdoc! {"_id": 1, "a": 6}),
        ),
        (
            rawdoc! {"$mul": {"a": 3_i64}},
            rawdoc! {"_id": 1},
            Some(rawdoc! {"_id": 1, "a": 0_i64}),
        ),
        (
            rawdoc! {"$min": {"a": 1}},
            rawdoc! {"_id": 1, "a": 2},
            Some(rawdoc! {"_id": 1, "a": 1}),
        ),
        (rawdoc! {"$min": {"a": 3}}, rawdoc! {"_id": 1, "a": 2}, None),
        (
            rawdoc! {"$max": {"a": "x"}},
            rawdoc! {"_id": 1, "a": 2},
            Some(rawdoc! {"_id": 1, "a": "x"}),
        ),
        (rawdoc! {"$setOnInsert": {"a": 1}}, rawdoc! {"_id": 1}, None),
        (
            rawdoc! {"$set": {"a": 1}, "$unset": {"b": 1}},
            rawdoc! {"_id": 1, "b": 0},
            Some(rawdoc! {"_id": 1, "a": 1}),
        ),
        (
            rawdoc! {"$set": {"a.$x": 1}},
            rawdoc! {"_id": 1},
            Some(rawdoc! {"_id": 1, "a": {"$x": 1}}),
        ),
    ];
    for (update, doc, want) in cases {
        assert_eq!(apply(&update, &doc)?, want, "{update:?} on {doc:?}");
    }
    Ok(())
}

#[test]
fn replacement_table() -> Result<(), CommandError> {
    let cases: Vec<(RawDocumentBuf, RawDocumentBuf, Option<RawDocumentBuf>)> = vec![
        (
            rawdoc! {"b": 2},
            rawdoc! {"_id": 1, "a": 1},
            Some(rawdoc! {"_id": 1, "b": 2}),
        ),
        (
            rawdoc! {},
            rawdoc! {"_id": 1, "a": 1},
            Some(rawdoc! {"_id": 1}),
        ),
        (
            rawdoc! {"b": 2, "_id": 1},
            rawdoc! {"_id": 1, "a": 1},
            Some(rawdoc! {"_id": 1, "b": 2}),
        ),
        (
            rawdoc! {"b": 2, "_id": 1.0},
            rawdoc! {"_id": 1, "b": 2},
            None,
        ),
        (rawdoc! {"a": 1}, rawdoc! {"_id": 1, "a": 1}, None),
    ];
    for (update, doc, want) in cases {
        assert_eq!(apply(&update, &doc)?, want, "{update:?} on {doc:?}");
    }
    assert!(Update::compile(&rawdoc! {"a": 1})?.is_replacement());
    assert!(!Update::compile(&rawdoc! {"$set": {"a": 1}})?.is_replacement());
    Ok(())
}

#[test]
#[expect(clippy::too_many_lines, reason = "one table")]
fn errors() {
    let cases: Vec<(RawDocumentBuf, RawDocumentBuf, ErrorCode, &str)> = vec![
        (
            rawdoc! {"$set": 1},
            rawdoc! {},
            ErrorCode::FailedToParse,
            "Modifiers operate on fields but we found type int instead. For example: {$mod: {<field>: ...}} not {$set: 1}",
        ),
        (
            rawdoc! {"$set": "s"},
            rawdoc! {},
            ErrorCode::FailedToParse,
            "Modifiers operate on fields but we found type string instead. For example: {$mod: {<field>: ...}} not {$set: \"s\"}",
        ),
        (
            rawdoc! {"$set": []},
            rawdoc! {},
            ErrorCode::FailedToParse,
            "Modifiers operate on fields but we found type array instead. For example: {$mod: {<field>: ...}} not {$set: []}",
        ),
        (
            rawdoc! {"$foo": {"a": 1}},
            rawdoc! {},
            ErrorCode::FailedToParse,
            "Unknown modifier: $foo. Expected a valid update modifier or pipeline-style update specified as an array",
        ),
        (
            rawdoc! {"$set": {"a": 1}, "b": 1},
            rawdoc! {},
            ErrorCode::FailedToParse,
            "Unknown modifier: b. Expected a valid update modifier or pipeline-style update specified as an array",
        ),
        (
            rawdoc! {"b": 1, "$set": {"a": 1}},
            rawdoc! {},
            ErrorCode::DollarPrefixedFieldName,
            "The dollar ($) prefixed field '$set' in '$set' is not allowed in the context of an update's replacement document. Consider using an aggregation pipeline with $replaceWith.",
        ),
        (
            rawdoc! {"$set": {"a": 1, "a.b": 1}},
            rawdoc! {},
            ErrorCode::ConflictingUpdateOperators,
            "Updating the path 'a.b' would create a conflict at 'a'",
        ),
        (
            rawdoc! {"$set": {"a.b": 1}, "$inc": {"a": 1}},
            rawdoc! {},
            ErrorCode::ConflictingUpdateOperators,
            "Updating the path 'a' would create a conflict at 'a'",
        ),
        (
            rawdoc! {"$set": {"a": 1}, "$unset": {"a": 1}},
            rawdoc! {},
            ErrorCode::ConflictingUpdateOperators,
            "Updating the path 'a' would create a conflict at 'a'",
        ),
        (
            rawdoc! {"$set": {"": 1}},
            rawdoc! {},
            ErrorCode::EmptyFieldName,
            "An empty update path is not valid.",
        ),
        (
            rawdoc! {"$set": {"a..b": 1}},
            rawdoc! {},
            ErrorCode::EmptyFieldName,
            "The update path 'a..b' contains an empty field name, which is not allowed.",
        ),
        (
            rawdoc! {"$inc": {"a": "x"}},
            rawdoc! {},
            ErrorCode::TypeMismatch,
            "Cannot increment with non-numeric argument: {a: \"x\"}",
        ),
        (
            rawdoc! {"$mul": {"a": null}},
            rawdoc! {},
            ErrorCode::TypeMismatch,
            "Cannot multiply with non-numeric argument: {a: null}",
        ),
        (
            rawdoc! {"$set": {"_id": 2}},
            rawdoc! {"_id": 1},
            ErrorCode::ImmutableField,
            "Performing an update on the path '_id' would modify the immutable field '_id'",
        ),
        (
            rawdoc! {"$set": {"_id": 1.0}},
            rawdoc! {"_id": 1},
            ErrorCode::ImmutableField,
            "Performing an update on the path '_id' would modify the immutable field '_id'",
        ),
        (
            rawdoc! {"$unset": {"_id": 1}},
            rawdoc! {"_id": 1},
            ErrorCode::ImmutableField,
            "Performing an update on the path '_id' would modify the immutable field '_id'",
        ),
        (
            rawdoc! {"$set": {"_id.x": 2}},
            rawdoc! {"_id": {"x": 1}},
            ErrorCode::ImmutableField,
            "Performing an update on the path '_id.x' would modify the immutable field '_id'",
        ),
        (
            rawdoc! {"$inc": {"a": 1}},
            rawdoc! {"_id": 1, "a": "x"},
            ErrorCode::TypeMismatch,
            "Cannot apply $inc to a value of non-numeric type. {_id: 1} has the field 'a' of non-numeric type string",
        ),
        (
            rawdoc! {"$inc": {"a.0.b": 1}},
            rawdoc! {"_id": "i", "a": [{"b": null}]},
            ErrorCode::TypeMismatch,
            "Cannot apply $inc to a value of non-numeric type. {_id: \"i\"} has the field 'b' of non-numeric type null",
        ),
        (
            rawdoc! {"$inc": {"a": 1}},
            rawdoc! {"_id": 1, "a": i64::MAX},
            ErrorCode::BadValue,
            "Failed to apply $inc operations to current value ((NumberLong)9223372036854775807) for document {_id: 1}",
        ),
        (
            rawdoc! {"$inc": {"a": i64::MAX}},
            rawdoc! {"_id": 1, "a": 42},
            ErrorCode::BadValue,
            "Failed to apply $inc operations to current value ((NumberInt)42) for document {_id: 1}",
        ),
        (
            rawdoc! {"$set": {"a.b": 1}},
            rawdoc! {"_id": 1, "a": 5},
            ErrorCode::PathNotViable,
            "Cannot create field 'b' in element {a: 5}",
        ),
        (
            rawdoc! {"$set": {"a.b": 1}},
            rawdoc! {"_id": 1, "a": [{"b": 0}]},
            ErrorCode::PathNotViable,
            "Cannot create field 'b' in element {a: [ { b: 0 } ]}",
        ),
        (
            rawdoc! {"$set": {"a.b.c": 1}},
            rawdoc! {"_id": 1, "a": {"b": "x"}},
            ErrorCode::PathNotViable,
            "Cannot create field 'c' in element {b: \"x\"}",
        ),
        (
            rawdoc! {"$set": {"$x": 1}},
            rawdoc! {"_id": 1},
            ErrorCode::DollarPrefixedFieldName,
            "The dollar ($) prefixed field '$x' in '$x' is not allowed in the context of an update's replacement document. Consider using an aggregation pipeline with $replaceWith.",
        ),
        (
            rawdoc! {"_id": 2},
            rawdoc! {"_id": 1},
            ErrorCode::ImmutableField,
            "After applying the update, the (immutable) field '_id' was found to have been altered to _id: 2",
        ),
        (
            rawdoc! {"$set": {"a.2000000": 1}},
            rawdoc! {"_id": 1, "a": []},
            ErrorCode::CannotBackfillArray,
            "can't backfill more than 1500000 elements",
        ),
        (
            rawdoc! {"$set": {"a.$": 1}},
            rawdoc! {},
            ErrorCode::BadValue,
            "The positional operator did not find the match needed from the query.",
        ),
        (
            rawdoc! {"$inc": {"a": bson::Decimal128::from_bytes([0; 16])}},
            rawdoc! {},
            ErrorCode::NotImplemented,
            "decimal128 arithmetic is not supported by Ebb yet",
        ),
    ];
    for (update, doc, code, msg) in cases {
        let err = apply(&update, &doc).unwrap_err();
        assert_eq!((err.code, err.errmsg.as_str()), (code, msg), "{update:?}");
    }
}

#[test]
fn upserts() -> Result<(), CommandError> {
    let eq = |pairs: &[(&str, RawBson)]| -> Vec<(String, RawBson)> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), v.clone()))
            .collect()
    };
    let set = Update::compile(&rawdoc! {"$set": {"c": 1}, "$setOnInsert": {"d": 2}})?;
    assert_eq!(
        upsert_seed(
            &eq(&[
                ("b", RawBson::Int32(1)),
                ("_id", RawBson::Int32(7)),
                ("a.x", RawBson::Int32(2))
            ]),
            &set
        )?,
        rawdoc! {"_id": 7, "a": {"x": 2}, "b": 1, "c": 1, "d": 2}
    );
    let inc = Update::compile(&rawdoc! {"$inc": {"n": 1}})?;
    assert_eq!(
        upsert_seed(&eq(&[("n", RawBson::Int32(5))]), &inc)?,
        rawdoc! {"n": 6}
    );
    let id_set = Update::compile(&rawdoc! {"$set": {"_id": 3}})?;
    assert_eq!(upsert_seed(&[], &id_set)?, rawdoc! {"_id": 3});
    let err = upsert_seed(&eq(&[("_id", RawBson::Int32(1))]), &id_set).unwrap_err();
    assert_eq!(err.code, ErrorCode::ImmutableField);
    let err = upsert_seed(
        &eq(&[("a", RawBson::Int32(1)), ("a.b", RawBson::Int32(1))]),
        &set,
    )
    .unwrap_err();
    assert_eq!(
        (err.code, err.errmsg.as_str()),
        (
            ErrorCode::NotSingleValueField,
            "cannot infer query fields to set, both paths 'a.b' and 'a' are matched"
        )
    );
    let err = upsert_seed(
        &eq(&[("a", RawBson::Int32(1)), ("a", RawBson::Int32(2))]),
        &set,
    )
    .unwrap_err();
    assert_eq!(
        err.errmsg,
        "cannot infer query fields to set, path 'a' is matched twice"
    );

    let repl = Update::compile(&rawdoc! {"x": 1})?;
    assert_eq!(
        upsert_seed(
            &eq(&[("a", RawBson::Int32(1)), ("_id", RawBson::Int32(9))]),
            &repl
        )?,
        rawdoc! {"_id": 9, "x": 1}
    );
    assert_eq!(
        upsert_seed(&eq(&[("a", RawBson::Int32(1))]), &repl)?,
        rawdoc! {"x": 1}
    );
    let err = upsert_seed(&eq(&[("_id.k", RawBson::Int32(1))]), &repl).unwrap_err();
    assert_eq!(err.code, ErrorCode::NotExactValueField);
    let repl_id = Update::compile(&rawdoc! {"x": 1, "_id": 2})?;
    assert_eq!(upsert_seed(&[], &repl_id)?, rawdoc! {"_id": 2, "x": 1});
    let bad_id = Update::compile(&rawdoc! {"_id": [1]})?;
    assert_eq!(
        upsert_seed(&[], &bad_id).unwrap_err().code,
        ErrorCode::InvalidIdField
    );
    Ok(())
}

/// The fixed time the tables below apply updates at.
const NOW_MS: i64 = 1_700_000_000_123;

fn at_now() -> UpdateContext<'static> {
    UpdateContext::at(NOW_MS)
}

/// Applies `update` (with optional `arrayFilters` and query) at [`NOW_MS`].
fn run(
    update: &RawDocumentBuf,
    filters: Option<&RawBson>,
    query: Option<&RawDocumentBuf>,
    doc: &RawDocumentBuf,
) -> Result<Option<RawDocumentBuf>, CommandError> {
    let filters = match filters {
        Some(RawBson::Array(a)) => Some(a.as_ref()),
        _ => None,
    };
    let compiled = Update::compile_with_array_filters(update, filters)?;
    let filter = query.map(|q| Filter::compile(q)).transpose()?;
    let ctx = UpdateContext {
        filter: filter.as_ref(),
        ..at_now()
    };
    compiled.apply_with(doc, &ctx)
}

fn date() -> bson::DateTime {
    bson::DateTime::from_millis(NOW_MS)
}

fn timestamp() -> bson::Timestamp {
    bson::Timestamp {
        time: 1_700_000_000,
        increment: 1,
    }
}

#[test]
#[expect(clippy::too_many_lines, reason = "one table")]
fn array_operator_table() -> Result<(), CommandError> {
    let cases: Vec<(RawDocumentBuf, RawDocumentBuf, Option<RawDocumentBuf>)> = vec![
        // $rename
        (
            rawdoc! {"$rename": {"a": "b"}},
            rawdoc! {"_id": 1, "a": 1, "c": 2},
            Some(rawdoc! {"_id": 1, "c": 2, "b": 1}),
        ),
        (
            rawdoc! {"$rename": {"a": "c"}},
            rawdoc! {"_id": 1, "a": 1, "c": 2},
            Some(rawdoc! {"_id": 1, "c": 1}),
        ),
        (
            rawdoc! {"$rename": {"x": "y"}},
            rawdoc! {"_id": 1, "a": 1},
            None,
        ),
        (
            rawdoc! {"$rename": {"a.b": "c.d"}},
            rawdoc! {"_id": 1, "a": {"b": 1, "e": 2}},
            Some(rawdoc! {"_id": 1, "a": {"e": 2}, "c": {"d": 1}}),
        ),
        (
            rawdoc! {"$rename": {"a": "b.c"}},
            rawdoc! {"_id": 1, "a": [1, 2]},
            Some(rawdoc! {"_id": 1, "b": {"c": [1, 2]}}),
        ),
        (
            rawdoc! {"$rename": {"a.b": "a.c"}},
            rawdoc! {"_id": 1, "a": {"b": 1}},
            Some(rawdoc! {"_id": 1, "a": {"c": 1}}),
        ),
        // $currentDate
        (
            rawdoc! {"$currentDate": {"a": true, "b": {"$type": "timestamp"}, "c": {"$type": "date"}}},
            rawdoc! {"_id": 1, "a": 1},
            Some(rawdoc! {"_id": 1, "a": date(), "b": timestamp(), "c": date()}),
        ),
        // $push
        (
            rawdoc! {"$push": {"a": 3}},
            rawdoc! {"_id": 1, "a": [1, 2]},
            Some(rawdoc! {"_id": 1, "a": [1, 2, 3]}),
        ),
        (
            rawdoc! {"$push": {"a": 1}},
            rawdoc! {"_id": 1},
            Some(rawdoc! {"_id": 1, "a": [1]}),
        ),
        (
            rawdoc! {"$push": {"a": {"$each": [3, 4]}}},
            rawdoc! {"_id": 1, "a": [1, 2]},
            Some(rawdoc! {"_id": 1, "a": [1, 2, 3, 4]}),
        ),
        (
            rawdoc! {"$push": {"a": {"$each": [5], "$slice": -2}}},
            rawdoc! {"_id": 1, "a": [1, 2, 3]},
            Some(rawdoc! {"_id": 1, "a": [3, 5]}),
        ),
        (
            rawdoc! {"$push": {"a": {"$each": [], "$slice": 1}}},
            rawdoc! {"_id": 1, "a": [1, 2, 3]},
            Some(rawdoc! {"_id": 1, "a": [1]}),
        ),
        (
            rawdoc! {"$push": {"a": {"$each": [], "$slice": 0}}},
            rawdoc! {"_id": 1, "a": [1, 2]},
            Some(rawdoc! {"_id": 1, "a": []}),
        ),
        (
            rawdoc! {"$push": {"a": {"$each": [2, 1], "$sort": 1}}},
            rawdoc! {"_id": 1, "a": [3]},
            Some(rawdoc! {"_id": 1, "a": [1, 2, 3]}),
        ),
        (
            rawdoc! {"$push": {"a": {"$each": [], "$sort": -1}}},
            rawdoc! {"_id": 1, "a": [1, 3, 2]},
            Some(rawdoc! {"_id": 1, "a": [3, 2, 1]}),
        ),
        (
            rawdoc! {"$push": {"a": {"$each": ["b", 1, null], "$sort": 1}}},
            rawdoc! {"_id": 1},
            Some(rawdoc! {"_id": 1, "a": [null, 1, "b"]}),
        ),
        (
            rawdoc! {"$push": {"a": {"$each": [{"s": 2}], "$sort": {"s": 1}}}},
            rawdoc! {"_id": 1, "a": [{"s": 3}, {"s": 1}]},
            Some(rawdoc! {"_id": 1, "a": [{"s": 1}, {"s": 2}, {"s": 3}]}),
        ),
        (
            rawdoc! {"$push": {"a": {"$each": [], "$sort": {"x": -1}}}},
            rawdoc! {"_id": 1, "a": [{"x": 1}, 5, {"x": 3}]},
            Some(rawdoc! {"_id": 1, "a": [{"x": 3}, {"x": 1}, 5]}),
        ),
        (
            rawdoc! {"$push": {"a": {"$each": [9], "$position": 0}}},
            rawdoc! {"_id": 1, "a": [1, 2]},
            Some(rawdoc! {"_id": 1, "a": [9, 1, 2]}),
        ),
        (
            rawdoc! {"$push": {"a": {"$each": [9], "$position": -1}}},
            rawdoc! {"_id": 1, "a": [1, 2]},
            Some(rawdoc! {"_id": 1, "a": [1, 9, 2]}),
        ),
        (
            rawdoc! {"$push": {"a": {"$each": [9], "$position": 10}}},
            rawdoc! {"_id": 1, "a": [1, 2]},
            Some(rawdoc! {"_id": 1, "a": [1, 2, 9]}),
        ),
        (
            rawdoc! {"$push": {"a": {"$each": [8, 9], "$position": -5}}},
            rawdoc! {"_id": 1, "a": [1, 2]},
            Some(rawdoc! {"_id": 1, "a": [8, 9, 1, 2]}),
        ),
        (
            rawdoc! {"$push": {"a": {"$slice": -1, "$each": [5]}}},
            rawdoc! {"_id": 1, "a": [1]},
            Some(rawdoc! {"_id": 1, "a": [5]}),
        ),
        (
            rawdoc! {"$push": {"a": {"$slice": 1}}},
            rawdoc! {"_id": 1, "a": [1]},
            Some(rawdoc! {"_id": 1, "a": [1, {"$slice": 1}]}),
        ),
        (
            rawdoc! {"$push": {"a.b": 1}},
            rawdoc! {"_id": 1, "a": {}},
            Some(rawdoc! {"_id": 1, "a": {"b": [1]}}),
        ),
        // $addToSet
        (
            rawdoc! {"$addToSet": {"a": 2}},
            rawdoc! {"_id": 1, "a": [1, 2]},
            None,
        ),
        (
            rawdoc! {"$addToSet": {"a": 2.0}},
            rawdoc! {"_id": 1, "a": [1, 2]},
            None,
        ),
        (
            rawdoc! {"$addToSet": {"a": 3}},
            rawdoc! {"_id": 1, "a": [1, 2]},
            Some(rawdoc! {"_id": 1, "a": [1, 2, 3]}),
        ),
        (
            rawdoc! {"$addToSet": {"a": {"$each": [2, 3, 3, 4]}}},
            rawdoc! {"_id": 1, "a": [1, 2]},
            Some(rawdoc! {"_id": 1, "a": [1, 2, 3, 4]}),
        ),
        (
            rawdoc! {"$addToSet": {"a": {"$each": [1, 1]}}},
            rawdoc! {"_id": 1},
            Some(rawdoc! {"_id": 1, "a": [1]}),
        ),
        (
            rawdoc! {"$addToSet": {"a": {"b": 1}}},
            rawdoc! {"_id": 1, "a": [{"b": 1}]},
            None,
        ),
        (
            rawdoc! {"$addToSet": {"a": {"b": 1, "c": 1}}},
            rawdoc! {"_id": 1, "a": [{"b": 1}]},
            Some(rawdoc! {"_id": 1, "a": [{"b": 1}, {"b": 1, "c": 1}]}),
        ),
        (
            rawdoc! {"$addToSet": {"a": [1]}},
            rawdoc! {"_id": 1, "a": [1]},
            Some(rawdoc! {"_id": 1, "a": [1, [1]]}),
        ),
        // $pop
        (
            rawdoc! {"$pop": {"a": 1}},
            rawdoc! {"_id": 1, "a": [1, 2, 3]},
            Some(rawdoc! {"_id": 1, "a": [1, 2]}),
        ),
        (
            rawdoc! {"$pop": {"a": -1}},
            rawdoc! {"_id": 1, "a": [1, 2, 3]},
            Some(rawdoc! {"_id": 1, "a": [2, 3]}),
        ),
        (
            rawdoc! {"$pop": {"a": 1}},
            rawdoc! {"_id": 1, "a": []},
            None,
        ),
        (rawdoc! {"$pop": {"a": 1.0}}, rawdoc! {"_id": 1}, None),
        (
            rawdoc! {"$pop": {"a.b": 1}},
            rawdoc! {"_id": 1, "a": {}},
            None,
        ),
        (
            rawdoc! {"$pop": {"a.5": 1}},
            rawdoc! {"_id": 1, "a": [1]},
            None,
        ),
        // $pull
        (
            rawdoc! {"$pull": {"a": 2}},
            rawdoc! {"_id": 1, "a": [1, 2, 3, 2]},
            Some(rawdoc! {"_id": 1, "a": [1, 3]}),
        ),
        (
            rawdoc! {"$pull": {"a": {"$gte": 2}}},
            rawdoc! {"_id": 1, "a": [1, 2, 3]},
            Some(rawdoc! {"_id": 1, "a": [1]}),
        ),
        (
            rawdoc! {"$pull": {"a": {"$in": [1, 3]}}},
            rawdoc! {"_id": 1, "a": [1, 2, 3]},
            Some(rawdoc! {"_id": 1, "a": [2]}),
        ),
        (
            rawdoc! {"$pull": {"a": {"b": 1}}},
            rawdoc! {"_id": 1, "a": [{"b": 1, "c": 2}, {"b": 2}, 1]},
            Some(rawdoc! {"_id": 1, "a": [{"b": 2}, 1]}),
        ),
        (
            rawdoc! {"$pull": {"a": [1, 2]}},
            rawdoc! {"_id": 1, "a": [[1, 2], [2, 1], 1]},
            Some(rawdoc! {"_id": 1, "a": [[2, 1], 1]}),
        ),
        (
            rawdoc! {"$pull": {"a": {"$gt": 1}}},
            rawdoc! {"_id": 1, "a": [[0, 5], 0]},
            Some(rawdoc! {"_id": 1, "a": [0]}),
        ),
        (
            rawdoc! {"$pull": {"a": {}}},
            rawdoc! {"_id": 1, "a": [{"b": 1}, 2]},
            Some(rawdoc! {"_id": 1, "a": [2]}),
        ),
        (
            rawdoc! {"$pull": {"a.b": 1}},
            rawdoc! {"_id": 1, "a": {"b": [1, 2]}},
            Some(rawdoc! {"_id": 1, "a": {"b": [2]}}),
        ),
        (
            rawdoc! {"$pull": {"a": 9}},
            rawdoc! {"_id": 1, "a": [1]},
            None,
        ),
        (rawdoc! {"$pull": {"a": 1}}, rawdoc! {"_id": 1}, None),
        (
            rawdoc! {"$pull": {"a": crate::query::testutil::regex("^x", "")}},
            rawdoc! {"_id": 1, "a": ["xa", "b", 1]},
            Some(rawdoc! {"_id": 1, "a": ["b", 1]}),
        ),
        (
            rawdoc! {"$pull": {"a": {"$elemMatch": {"$gt": 4}}}},
            rawdoc! {"_id": 1, "a": [[1, 5], [2], 7]},
            Some(rawdoc! {"_id": 1, "a": [[2], 7]}),
        ),
        // $pullAll
        (
            rawdoc! {"$pullAll": {"a": [1, 3]}},
            rawdoc! {"_id": 1, "a": [1, 2, 3, 1]},
            Some(rawdoc! {"_id": 1, "a": [2]}),
        ),
        (
            rawdoc! {"$pullAll": {"a": [1.0]}},
            rawdoc! {"_id": 1, "a": [1]},
            Some(rawdoc! {"_id": 1, "a": []}),
        ),
        // $bit
        (
            rawdoc! {"$bit": {"a": {"and": 6}}},
            rawdoc! {"_id": 1, "a": 3},
            Some(rawdoc! {"_id": 1, "a": 2}),
        ),
        (
            rawdoc! {"$bit": {"a": {"or": 4}}},
            rawdoc! {"_id": 1, "a": 3},
            Some(rawdoc! {"_id": 1, "a": 7}),
        ),
        (
            rawdoc! {"$bit": {"a": {"xor": 1}}},
            rawdoc! {"_id": 1, "a": 3},
            Some(rawdoc! {"_id": 1, "a": 2}),
        ),
        (
            rawdoc! {"$bit": {"a": {"and": 5_i64}}},
            rawdoc! {"_id": 1, "a": 3},
            Some(rawdoc! {"_id": 1, "a": 1_i64}),
        ),
        (
            rawdoc! {"$bit": {"a": {"or": 5}}},
            rawdoc! {"_id": 1},
            Some(rawdoc! {"_id": 1, "a": 5}),
        ),
        (
            rawdoc! {"$bit": {"a": {"and": 1, "or": 8}}},
            rawdoc! {"_id": 1, "a": 3},
            Some(rawdoc! {"_id": 1, "a": 9}),
        ),
        (
            rawdoc! {"$bit": {"a": {"and": 3}}},
            rawdoc! {"_id": 1, "a": 3},
            None,
        ),
    ];
    for (update, doc, want) in cases {
        assert_eq!(
            run(&update, None, None, &doc)?,
            want,
            "{update:?} on {doc:?}"
        );
    }
    Ok(())
}

#[test]
fn positional_table() -> Result<(), CommandError> {
    let cases: Vec<(
        RawDocumentBuf,
        RawDocumentBuf,
        RawDocumentBuf,
        Option<RawDocumentBuf>,
    )> = vec![
        (
            rawdoc! {"$set": {"a.$": 9}},
            rawdoc! {"a": 2},
            rawdoc! {"_id": 1, "a": [1, 2, 3]},
            Some(rawdoc! {"_id": 1, "a": [1, 9, 3]}),
        ),
        (
            rawdoc! {"$inc": {"a.$.n": 1}},
            rawdoc! {"a.k": "y"},
            rawdoc! {"_id": 1, "a": [{"k": "x", "n": 1}, {"k": "y", "n": 1}]},
            Some(rawdoc! {"_id": 1, "a": [{"k": "x", "n": 1}, {"k": "y", "n": 2}]}),
        ),
        (
            rawdoc! {"$set": {"a.$.x": 1, "a.1.y": 2}},
            rawdoc! {"a.k": 2},
            rawdoc! {"_id": 1, "a": [{"k": 1}, {"k": 2}]},
            Some(rawdoc! {"_id": 1, "a": [{"k": 1}, {"k": 2, "x": 1, "y": 2}]}),
        ),
        (
            rawdoc! {"$unset": {"a.$": 1}},
            rawdoc! {"a": 2},
            rawdoc! {"_id": 1, "a": [1, 2, 3]},
            Some(rawdoc! {"_id": 1, "a": [1, null, 3]}),
        ),
        (
            rawdoc! {"$set": {"b.$": 1}},
            rawdoc! {"a": 2},
            rawdoc! {"_id": 1, "a": [1, 2], "b": [0, 0, 0]},
            Some(rawdoc! {"_id": 1, "a": [1, 2], "b": [0, 1, 0]}),
        ),
        (
            rawdoc! {"$set": {"b.$": 1}},
            rawdoc! {"a": 2},
            rawdoc! {"_id": 1, "a": [1, 2]},
            Some(rawdoc! {"_id": 1, "a": [1, 2], "b": {"1": 1}}),
        ),
        (
            rawdoc! {"$push": {"a.$.l": 5}},
            rawdoc! {"_id": 1, "a.k": 1},
            rawdoc! {"_id": 1, "a": [{"k": 0}, {"k": 1, "l": []}]},
            Some(rawdoc! {"_id": 1, "a": [{"k": 0}, {"k": 1, "l": [5]}]}),
        ),
        (
            rawdoc! {"$set": {"a.$": 2}},
            rawdoc! {"a": 2},
            rawdoc! {"_id": 1, "a": [1, 2]},
            None,
        ),
        (
            rawdoc! {"$set": {"a.$.d": 1}},
            rawdoc! {"a": {"$elemMatch": {"b": 1, "c": 2}}},
            rawdoc! {"_id": 1, "a": [{"b": 1, "c": 1}, {"b": 1, "c": 2}]},
            Some(rawdoc! {"_id": 1, "a": [{"b": 1, "c": 1}, {"b": 1, "c": 2, "d": 1}]}),
        ),
    ];
    for (update, query, doc, want) in cases {
        assert_eq!(
            run(&update, None, Some(&query), &doc)?,
            want,
            "{update:?} with {query:?} on {doc:?}"
        );
    }
    // The positional `$` and array filters together.
    assert_eq!(
        run(
            &rawdoc! {"$set": {"a.$.b.$[x]": 0}},
            Some(&bson::rawbson!([{"x": 2}])),
            Some(&rawdoc! {"a.k": 1}),
            &rawdoc! {"_id": 1, "a": [{"k": 0}, {"k": 1, "b": [1, 2]}]},
        )?,
        Some(rawdoc! {"_id": 1, "a": [{"k": 0}, {"k": 1, "b": [1, 0]}]})
    );
    assert!(Update::compile(&rawdoc! {"$set": {"a.$": 1}})?.is_positional());
    assert!(!Update::compile(&rawdoc! {"$set": {"a.$[]": 1}})?.is_positional());
    Ok(())
}

#[test]
fn array_filters_table() -> Result<(), CommandError> {
    let none = RawBson::Array(bson::RawArrayBuf::new());
    let cases: Vec<(
        RawDocumentBuf,
        RawBson,
        RawDocumentBuf,
        Option<RawDocumentBuf>,
    )> = vec![
        (
            rawdoc! {"$set": {"a.$[]": 0}},
            none.clone(),
            rawdoc! {"_id": 1, "a": [1, 2]},
            Some(rawdoc! {"_id": 1, "a": [0, 0]}),
        ),
        (
            rawdoc! {"$inc": {"a.$[]": 1}},
            none.clone(),
            rawdoc! {"_id": 1, "a": []},
            None,
        ),
        (
            rawdoc! {"$set": {"a.$[x]": 0}},
            bson::rawbson!([{"x": {"$gt": 1}}]),
            rawdoc! {"_id": 1, "a": [1, 2, 3]},
            Some(rawdoc! {"_id": 1, "a": [1, 0, 0]}),
        ),
        (
            rawdoc! {"$set": {"a.$[e].s": 0}},
            bson::rawbson!([{"e.k": 1}]),
            rawdoc! {"_id": 1, "a": [{"k": 1, "s": 5}, {"k": 2, "s": 5}]},
            Some(rawdoc! {"_id": 1, "a": [{"k": 1, "s": 0}, {"k": 2, "s": 5}]}),
        ),
        (
            rawdoc! {"$inc": {"a.$[].b.$[x]": 10}},
            bson::rawbson!([{"x": {"$lt": 2}}]),
            rawdoc! {"_id": 1, "a": [{"b": [1, 2]}, {"b": [0]}]},
            Some(rawdoc! {"_id": 1, "a": [{"b": [11, 2]}, {"b": [10]}]}),
        ),
        (
            rawdoc! {"$unset": {"a.$[x]": 1}},
            bson::rawbson!([{"x": 2}]),
            rawdoc! {"_id": 1, "a": [1, 2]},
            Some(rawdoc! {"_id": 1, "a": [1, null]}),
        ),
        (
            rawdoc! {"$set": {"a.$[i].c": 1, "a.$[j].d": 2}},
            bson::rawbson!([{"i.k": 1}, {"j.k": 1}]),
            rawdoc! {"_id": 1, "a": [{"k": 1}, {"k": 2}]},
            Some(rawdoc! {"_id": 1, "a": [{"k": 1, "c": 1, "d": 2}, {"k": 2}]}),
        ),
        (
            rawdoc! {"$pull": {"a.$[].l": 1}},
            none.clone(),
            rawdoc! {"_id": 1, "a": [{"l": [1, 2]}, {"l": [1]}]},
            Some(rawdoc! {"_id": 1, "a": [{"l": [2]}, {"l": []}]}),
        ),
        (
            rawdoc! {"$set": {"m.a.$[x]": 0}},
            bson::rawbson!([{"x": 1}]),
            rawdoc! {"_id": 1, "m": {"a": [1, 2, 1]}},
            Some(rawdoc! {"_id": 1, "m": {"a": [0, 2, 0]}}),
        ),
    ];
    for (update, filters, doc, want) in cases {
        assert_eq!(
            run(&update, Some(&filters), None, &doc)?,
            want,
            "{update:?} with {filters:?} on {doc:?}"
        );
    }
    // A replacement ignores array filters; an update must use them all.
    let filters = bson::rawbson!([{"x": 1}]);
    assert!(run(&rawdoc! {"a": 1}, Some(&filters), None, &rawdoc! {"_id": 1}).is_ok());
    Ok(())
}

#[test]
#[expect(clippy::too_many_lines, reason = "one table")]
fn new_operator_errors() {
    let cases: Vec<(RawDocumentBuf, RawDocumentBuf, ErrorCode, &str)> = vec![
        // Parse errors.
        (
            rawdoc! {"$rename": {"a": 1}},
            rawdoc! {},
            ErrorCode::BadValue,
            "The 'to' field for $rename must be a string: a: 1",
        ),
        (
            rawdoc! {"$rename": {"a": "a"}},
            rawdoc! {},
            ErrorCode::BadValue,
            "The source and target field for $rename must differ: a: \"a\"",
        ),
        (
            rawdoc! {"$rename": {"a": "a.b"}},
            rawdoc! {},
            ErrorCode::BadValue,
            "The source and target field for $rename must not be on the same path: a: \"a.b\"",
        ),
        (
            rawdoc! {"$rename": {"a.$": "b"}},
            rawdoc! {},
            ErrorCode::BadValue,
            "The source field for $rename may not be dynamic: a.$",
        ),
        (
            rawdoc! {"$rename": {"a": "b.$[]"}},
            rawdoc! {},
            ErrorCode::BadValue,
            "The destination field for $rename may not be dynamic: b.$[]",
        ),
        (
            rawdoc! {"$rename": {"a": "b"}, "$set": {"b": 1}},
            rawdoc! {},
            ErrorCode::ConflictingUpdateOperators,
            "Updating the path 'b' would create a conflict at 'b'",
        ),
        (
            rawdoc! {"$set": {"a": 1}, "$rename": {"a": "b"}},
            rawdoc! {},
            ErrorCode::ConflictingUpdateOperators,
            "Updating the path 'a' would create a conflict at 'a'",
        ),
        (
            rawdoc! {"$currentDate": {"a": 1}},
            rawdoc! {},
            ErrorCode::BadValue,
            "int is not valid type for $currentDate. Please use a boolean ('true') or a $type \
             expression ({$type: 'timestamp/date'}).",
        ),
        (
            rawdoc! {"$currentDate": {"a": {"$type": "x"}}},
            rawdoc! {},
            ErrorCode::BadValue,
            "The '$type' string field is required to be 'date' or 'timestamp': {$currentDate: \
             {field : {$type: 'date'}}}",
        ),
        (
            rawdoc! {"$currentDate": {"a": {"x": 1}}},
            rawdoc! {},
            ErrorCode::BadValue,
            "Unrecognized $currentDate option: x",
        ),
        (
            rawdoc! {"$push": {"a": {"$each": 1}}},
            rawdoc! {},
            ErrorCode::BadValue,
            "The argument to $each in $push must be an array but it was of type: int",
        ),
        (
            rawdoc! {"$push": {"a": {"$each": [], "$foo": 1}}},
            rawdoc! {},
            ErrorCode::BadValue,
            "Unrecognized clause in $push: $foo",
        ),
        (
            rawdoc! {"$push": {"a": {"$each": [], "$slice": 1.5}}},
            rawdoc! {},
            ErrorCode::BadValue,
            "The value for $slice must be an integer value but was given type: double",
        ),
        (
            rawdoc! {"$push": {"a": {"$each": [], "$sort": 2}}},
            rawdoc! {},
            ErrorCode::BadValue,
            "The $sort element value must be either 1 or -1",
        ),
        (
            rawdoc! {"$push": {"a": {"$each": [], "$sort": "x"}}},
            rawdoc! {},
            ErrorCode::BadValue,
            "The $sort is invalid: use 1/-1 to sort the whole element, or {field:1/-1} to sort \
             embedded fields",
        ),
        (
            rawdoc! {"$push": {"a": {"$each": [], "$sort": {}}}},
            rawdoc! {},
            ErrorCode::BadValue,
            "The sort pattern is empty when it should be a set of fields.",
        ),
        (
            rawdoc! {"$push": {"a": {"$each": [], "$sort": {"b": 0}}}},
            rawdoc! {},
            ErrorCode::BadValue,
            "The sort element value must be either 1 or -1",
        ),
        (
            rawdoc! {"$push": {"a": {"$each": [], "$sort": {"b..c": 1}}}},
            rawdoc! {},
            ErrorCode::BadValue,
            "The sort field is a dotted field but has an empty part: b..c",
        ),
        (
            rawdoc! {"$push": {"a": {"$each": [], "$position": "x"}}},
            rawdoc! {},
            ErrorCode::BadValue,
            "The value for $position must be an integer value, not of type: string",
        ),
        (
            rawdoc! {"$addToSet": {"a": {"$each": 1}}},
            rawdoc! {},
            ErrorCode::TypeMismatch,
            "The argument to $each in $addToSet must be an array but it was of type int",
        ),
        (
            rawdoc! {"$addToSet": {"a": {"$each": [1], "b": 2}}},
            rawdoc! {},
            ErrorCode::BadValue,
            "Found unexpected fields after $each in $addToSet: { $each: [ 1 ], b: 2 }",
        ),
        (
            rawdoc! {"$pop": {"a": 2}},
            rawdoc! {},
            ErrorCode::FailedToParse,
            "$pop expects 1 or -1, found: 2",
        ),
        (
            rawdoc! {"$pop": {"a": "x"}},
            rawdoc! {},
            ErrorCode::FailedToParse,
            "Expected a number in: a: \"x\"",
        ),
        (
            rawdoc! {"$pop": {"a": 1.5}},
            rawdoc! {},
            ErrorCode::FailedToParse,
            "Expected an integer: a: 1.5",
        ),
        (
            rawdoc! {"$pullAll": {"a": 1}},
            rawdoc! {},
            ErrorCode::BadValue,
            "$pullAll requires an array argument but was given a int",
        ),
        (
            rawdoc! {"$bit": {"a": 1}},
            rawdoc! {},
            ErrorCode::BadValue,
            "The $bit modifier is not compatible with a int. You must pass in an embedded \
             document: {$bit: {field: {and/or/xor: #}}",
        ),
        (
            rawdoc! {"$bit": {"a": {"nand": 1}}},
            rawdoc! {},
            ErrorCode::BadValue,
            "The $bit modifier only supports 'and', 'or', and 'xor', not 'nand' which is an \
             unknown operator: {nand: 1}",
        ),
        (
            rawdoc! {"$bit": {"a": {"and": 1.0}}},
            rawdoc! {},
            ErrorCode::BadValue,
            "The $bit modifier field must be an Integer(32/64 bit); a 'double' is not supported \
             here: {and: 1.0}",
        ),
        (
            rawdoc! {"$bit": {"a": {}}},
            rawdoc! {},
            ErrorCode::BadValue,
            "You must pass in at least one bitwise operation. The format is: {$bit: {field: \
             {and/or/xor: #}}",
        ),
        (
            rawdoc! {"$set": {"a.$.b.$": 1}},
            rawdoc! {},
            ErrorCode::BadValue,
            "Too many positional (i.e. '$') elements found in path 'a.$.b.$'",
        ),
        (
            rawdoc! {"$set": {"$.a": 1}},
            rawdoc! {},
            ErrorCode::BadValue,
            "Cannot have positional (i.e. '$') element in the first position in path '$.a'",
        ),
        (
            rawdoc! {"$set": {"$[].a": 1}},
            rawdoc! {},
            ErrorCode::BadValue,
            "Cannot have array filter identifier (i.e. '$[<id>]') element in the first position \
             in path '$[].a'",
        ),
        (
            rawdoc! {"$set": {"a.$[x]": 1}},
            rawdoc! {},
            ErrorCode::BadValue,
            "No array filter found for identifier 'x' in path 'a.$[x]'",
        ),
        (
            rawdoc! {"$set": {"a.$[]": 1, "a.0": 1}},
            rawdoc! {},
            ErrorCode::ConflictingUpdateOperators,
            "Updating the path 'a.0' would create a conflict at 'a'",
        ),
        (
            rawdoc! {"$set": {"a.$[]": 1, "a.$[].b": 1}},
            rawdoc! {},
            ErrorCode::ConflictingUpdateOperators,
            "Updating the path 'a.$[].b' would create a conflict at 'a.$[]'",
        ),
        // Errors applying to a document.
        (
            rawdoc! {"$push": {"a": 1}},
            rawdoc! {"_id": 1, "a": 1},
            ErrorCode::BadValue,
            "The field 'a' must be an array but is of type int in document {_id: 1}",
        ),
        (
            rawdoc! {"$push": {"a.b": 1}},
            rawdoc! {"_id": 1, "a": {"b": "x"}},
            ErrorCode::BadValue,
            "The field 'a.b' must be an array but is of type string in document {_id: 1}",
        ),
        (
            rawdoc! {"$addToSet": {"a.b": 1}},
            rawdoc! {"_id": 1, "a": {"b": 1}},
            ErrorCode::BadValue,
            "Cannot apply $addToSet to non-array field. Field named 'b' has non-array type int",
        ),
        (
            rawdoc! {"$pop": {"a": 1}},
            rawdoc! {"_id": 1, "a": 1},
            ErrorCode::TypeMismatch,
            "Path 'a' contains an element of non-array type 'int'",
        ),
        (
            rawdoc! {"$pull": {"a": 1}},
            rawdoc! {"_id": 1, "a": 1},
            ErrorCode::BadValue,
            "Cannot apply $pull to a non-array value",
        ),
        (
            rawdoc! {"$pullAll": {"a": [1]}},
            rawdoc! {"_id": 1, "a": "x"},
            ErrorCode::BadValue,
            "Cannot apply $pull to a non-array value",
        ),
        (
            rawdoc! {"$pull": {"a.b": 1}},
            rawdoc! {"_id": 1, "a": 5},
            ErrorCode::PathNotViable,
            "Cannot use the part (b) of (a.b) to traverse the element ({a: 5})",
        ),
        (
            rawdoc! {"$pop": {"a.b.c": 1}},
            rawdoc! {"_id": 1, "a": [1]},
            ErrorCode::PathNotViable,
            "Cannot use the part (b) of (a.b.c) to traverse the element ({a: [ 1 ]})",
        ),
        (
            rawdoc! {"$bit": {"a": {"and": 1}}},
            rawdoc! {"_id": 1, "a": "x"},
            ErrorCode::BadValue,
            "Cannot apply $bit to a value of non-integral type._id: 1 has the field a of \
             non-integer type string",
        ),
        (
            rawdoc! {"$rename": {"a.b": "c"}},
            rawdoc! {"_id": 1, "a": 5},
            ErrorCode::PathNotViable,
            "cannot use the part (a of a.b) to traverse the element ({a: 5})",
        ),
        (
            rawdoc! {"$rename": {"a.0": "c"}},
            rawdoc! {"_id": 1, "a": [1]},
            ErrorCode::BadValue,
            "The source field cannot be an array element, 'a.0' in doc with _id: 1 has an array \
             field called 'a'",
        ),
        (
            rawdoc! {"$rename": {"a.0.b": "c"}},
            rawdoc! {"_id": 1, "a": [{"b": 1}]},
            ErrorCode::BadValue,
            "The source field cannot be an array element, 'a.0.b' in doc with _id: 1 has an \
             array field called 'a'",
        ),
        (
            rawdoc! {"$rename": {"x": "a.0"}},
            rawdoc! {"_id": 1, "x": 1, "a": [1]},
            ErrorCode::BadValue,
            "The destination field cannot be an array element, 'a.0' in doc with _id: 1 has an \
             array field called 'a'",
        ),
        (
            rawdoc! {"$rename": {"x": "a.b"}},
            rawdoc! {"_id": 1, "x": 1, "a": [1]},
            ErrorCode::BadValue,
            "The destination field cannot be an array element, 'a.b' in doc with _id: 1 has an \
             array field called 'a'",
        ),
        (
            rawdoc! {"$rename": {"x": "a.b"}},
            rawdoc! {"_id": 1, "x": 1, "a": 5},
            ErrorCode::PathNotViable,
            "Cannot create field 'b' in element {a: 5}",
        ),
        (
            rawdoc! {"$rename": {"_id": "x"}},
            rawdoc! {"_id": 1},
            ErrorCode::ImmutableField,
            "Performing an update on the path '_id' would modify the immutable field '_id'",
        ),
        (
            rawdoc! {"$set": {"a.$[]": 1}},
            rawdoc! {"_id": 1},
            ErrorCode::BadValue,
            "The path 'a' must exist in the document in order to apply array updates.",
        ),
        (
            rawdoc! {"$set": {"a.$[].b": 1}},
            rawdoc! {"_id": 1, "a": 5},
            ErrorCode::BadValue,
            "Cannot apply array updates to non-array element a: 5",
        ),
        (
            rawdoc! {"$set": {"x.a.$[]": 1}},
            rawdoc! {"_id": 1, "x": 5},
            ErrorCode::BadValue,
            "The path 'x.a' must exist in the document in order to apply array updates.",
        ),
        (
            rawdoc! {"$set": {"a.$[].b": 1}},
            rawdoc! {"_id": 1, "a": [1]},
            ErrorCode::PathNotViable,
            "Cannot create field 'b' in element {0: 1}",
        ),
    ];
    for (update, doc, code, msg) in cases {
        let err = run(&update, None, None, &doc).unwrap_err();
        assert_eq!(
            (err.code, err.errmsg.as_str()),
            (code, msg),
            "{update:?} on {doc:?}"
        );
    }
    // `$pull` conditions are the filter engine's, with its errors.
    let err = run(
        &rawdoc! {"$pull": {"a": {"$foo": 1}}},
        None,
        None,
        &rawdoc! {},
    )
    .unwrap_err();
    assert_eq!(err.code, ErrorCode::BadValue);
    assert!(err.errmsg.starts_with("unknown top level operator: $foo"));
}

/// An update, its array filters and query, a document, and the error applying it gives.
type ErrorCase = (
    RawDocumentBuf,
    Option<RawBson>,
    Option<RawDocumentBuf>,
    RawDocumentBuf,
    ErrorCode,
    &'static str,
);

#[test]
fn run_time_conflicts_and_filter_errors() {
    let cases: Vec<ErrorCase> = vec![
        (
            rawdoc! {"$set": {"a.$": 0, "a.0": 5}},
            None,
            Some(rawdoc! {"a": 1}),
            rawdoc! {"_id": 1, "a": [1, 2]},
            ErrorCode::ConflictingUpdateOperators,
            "Update created a conflict at 'a.0'",
        ),
        (
            rawdoc! {"$set": {"a.$": 1}},
            None,
            Some(rawdoc! {"_id": 1}),
            rawdoc! {"_id": 1, "a": [1]},
            ErrorCode::BadValue,
            "The positional operator did not find the match needed from the query.",
        ),
        (
            rawdoc! {"$set": {"a.$[x]": 9, "a.$[]": 0}},
            Some(bson::rawbson!([{"x": 2}])),
            None,
            rawdoc! {"_id": 1, "a": [1, 2]},
            ErrorCode::ConflictingUpdateOperators,
            "Update created a conflict at 'a.1'",
        ),
        (
            rawdoc! {"$set": {"a.$[i].b.$[k].c": 1, "a.$[j].b.$[k].c": 2}},
            Some(bson::rawbson!([{"i.x": 0}, {"j.x": 0}, {"k.y": 0}])),
            None,
            rawdoc! {"_id": 0, "a": [{"x": 0, "b": [{"y": 0, "c": 0}]}]},
            ErrorCode::ConflictingUpdateOperators,
            "Update created a conflict at 'a.0.b.$[k].c'",
        ),
        (
            rawdoc! {"$set": {"a": 1}},
            Some(bson::rawbson!([{"x": 1}])),
            None,
            rawdoc! {"_id": 1},
            ErrorCode::FailedToParse,
            "The array filter for identifier 'x' was not used in the update { $set: { a: 1 } }",
        ),
        (
            rawdoc! {"$set": {"a.$[i]": 3}},
            Some(bson::rawbson!([{"j": 2}])),
            None,
            rawdoc! {"_id": 1},
            ErrorCode::BadValue,
            "No array filter found for identifier 'i' in path 'a.$[i]'",
        ),
    ];
    for (update, filters, query, doc, code, msg) in cases {
        let err = run(&update, filters.as_ref(), query.as_ref(), &doc).unwrap_err();
        assert_eq!(
            (err.code, err.errmsg.as_str()),
            (code, msg),
            "{update:?} on {doc:?}"
        );
    }
}

#[test]
fn upserts_with_new_operators() -> Result<(), CommandError> {
    let eq = |pairs: &[(&str, RawBson)]| -> Vec<(String, RawBson)> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), v.clone()))
            .collect()
    };
    let seed = |pairs: &[(&str, RawBson)], update: &Update| {
        upsert_seed_with(&eq(pairs), update, &at_now())
    };
    let u = Update::compile(
        &rawdoc! {"$setOnInsert": {"b": 2}, "$push": {"l": 1}, "$currentDate": {"d": true}},
    )?;
    assert_eq!(
        seed(&[("a", RawBson::Int32(1))], &u)?,
        rawdoc! {"a": 1, "b": 2, "d": date(), "l": [1]}
    );
    let u = Update::compile(&rawdoc! {"$set": {"a.$[]": 0}})?;
    assert_eq!(
        seed(&[("a", bson::rawbson!([1, 2]))], &u)?,
        rawdoc! {"a": [0, 0]}
    );
    let u = Update::compile(&rawdoc! {"$set": {"a.$[].b": 1}})?;
    let err = seed(&[("a", RawBson::Int32(1))], &u).unwrap_err();
    assert_eq!(
        err.errmsg,
        "Cannot apply array updates to non-array element a: 1"
    );
    let err = seed(&[], &u).unwrap_err();
    assert_eq!(
        err.errmsg,
        "The path 'a' must exist in the document in order to apply array updates."
    );
    let u = Update::compile(&rawdoc! {"$set": {"a.$": 1}})?;
    let err = seed(&[("a", bson::rawbson!([1]))], &u).unwrap_err();
    assert_eq!(
        (err.code, err.errmsg.as_str()),
        (
            ErrorCode::BadValue,
            "The positional operator did not find the match needed from the query."
        )
    );
    let u = Update::compile(&rawdoc! {"$set": {"c": 1}})?;
    assert_eq!(
        seed(
            &[
                ("a.$", RawBson::Int32(1)),
                ("b.$[]", RawBson::Int32(1)),
                ("d", RawBson::Int32(2))
            ],
            &u
        )?,
        rawdoc! {"d": 2, "c": 1}
    );
    let u = Update::compile(&rawdoc! {"$rename": {"a": "b"}})?;
    assert_eq!(seed(&[("a", RawBson::Int32(1))], &u)?, rawdoc! {"b": 1});
    let stages = bson::rawbson!([{"$set": {"b": "$a"}}]);
    let u = Update::compile_modification(stages.as_raw_bson_ref(), None)?;
    assert_eq!(
        seed(&[("a", RawBson::Int32(1)), ("_id", RawBson::Int32(5))], &u)?,
        rawdoc! {"_id": 5, "a": 1, "b": 1}
    );
    Ok(())
}

#[test]
fn pipeline_updates() -> Result<(), CommandError> {
    let compile = |stages: RawBson| Update::compile_modification(stages.as_raw_bson_ref(), None);
    let doc = rawdoc! {"_id": 1, "a": 2};
    let u = compile(bson::rawbson!([{"$set": {"a": 2}}]))?;
    assert!(u.is_pipeline() && !u.is_replacement() && !u.is_positional());
    assert_eq!(u.apply_with(&doc, &at_now())?, None);
    let u = compile(bson::rawbson!([{"$set": {"b": {"$literal": 1}}}, {"$unset": "a"}]))?;
    assert_eq!(
        u.apply_with(&doc, &at_now())?,
        Some(rawdoc! {"_id": 1, "b": 1})
    );
    let u = compile(bson::rawbson!([{"$replaceWith": {"x": "$a", "_id": "$_id"}}]))?;
    assert_eq!(
        u.apply_with(&doc, &at_now())?,
        Some(rawdoc! {"_id": 1, "x": 2})
    );
    let u = compile(bson::rawbson!([{"$replaceWith": {"x": 1}}]))?;
    assert_eq!(
        u.apply_with(&doc, &at_now())?,
        Some(rawdoc! {"_id": 1, "x": 1})
    );
    let u = compile(bson::rawbson!([{"$set": {"_id": 2}}]))?;
    let err = u.apply_with(&doc, &at_now()).unwrap_err();
    assert_eq!(
        (err.code, err.errmsg.as_str()),
        (
            ErrorCode::ImmutableField,
            "After applying the update, the (immutable) field '_id' was found to have been \
             altered to _id: 2"
        )
    );
    let filters = bson::rawbson!([{"x": 1}]);
    let RawBson::Array(filters) = filters else {
        unreachable!()
    };
    let stages = bson::rawbson!([{"$set": {"a": 1}}]);
    let err = Update::compile_modification(stages.as_raw_bson_ref(), Some(&filters)).unwrap_err();
    assert_eq!(
        (err.code, err.errmsg.as_str()),
        (
            ErrorCode::FailedToParse,
            "arrayFilters may not be specified for pipeline-style updates"
        )
    );
    let err = Update::compile_modification(RawBsonRef::Int32(1), None).unwrap_err();
    assert_eq!(err.code, ErrorCode::FailedToParse);
    Ok(())
}

/// Pipelines store what their expressions compute, `.` and `$` names included (MongoDB 5.0+);
/// operator updates still may not create a `$`-prefixed top-level field. The pipeline sees the
/// command's `let` and, for an upsert too, its `$$NOW`.
#[test]
fn pipeline_updates_with_variables_and_dots_and_dollars() -> Result<(), CommandError> {
    let vars = Arc::new(
        Variables::new(bson::DateTime::from_millis(NOW_MS))
            .with_let(&rawdoc! {"name": {"$literal": "$price"}, "v": 7})?,
    );
    let stages = bson::rawbson!([
        {"$replaceWith": {"$setField": {"field": {"$literal": "$price"}, "value": "$$v", "input": "$$ROOT"}}},
        {"$set": {"sub": {"$setField": {"field": "a.b", "value": "$$NOW", "input": {}}}}},
    ]);
    let u = Update::compile_modification_in(stages.as_raw_bson_ref(), None, &vars)?;
    let now = bson::DateTime::from_millis(NOW_MS);
    assert_eq!(
        u.apply_with(&rawdoc! {"_id": 1}, &UpdateContext::at(0))?,
        Some(rawdoc! {"_id": 1, "$price": 7, "sub": {"a.b": now}})
    );
    assert_eq!(
        upsert_seed_with(&[("_id".to_owned(), RawBson::Int32(2))], &u, &at_now())?,
        rawdoc! {"_id": 2, "$price": 7, "sub": {"a.b": now}}
    );
    // `$getField` with a variable is not a constant field name.
    let stages = bson::rawbson!([{"$set": {"p": {"$getField": "$$name"}}}]);
    let err = Update::compile_modification_in(stages.as_raw_bson_ref(), None, &vars).unwrap_err();
    assert_eq!(err.code, ErrorCode::Location(5_654_600));
    let u = Update::compile(&rawdoc! {"$set": {"$price": 1}})?;
    let err = u.apply_with(&rawdoc! {"_id": 1}, &at_now()).unwrap_err();
    assert_eq!(err.code, ErrorCode::DollarPrefixedFieldName);
    Ok(())
}

#[test]
fn collated_operators() -> Result<(), CommandError> {
    use crate::query::Collation;
    use std::sync::Arc;
    let en2 = Collation::parse(&rawdoc! {"locale": "en", "strength": 2})?.map(Arc::new);
    let cases: Vec<(
        RawDocumentBuf,
        Option<RawDocumentBuf>,
        RawDocumentBuf,
        Option<RawDocumentBuf>,
    )> = vec![
        (
            rawdoc! {"$addToSet": {"a": {"$each": ["X", "x", "y"]}}},
            None,
            rawdoc! {"_id": 1, "a": ["x"]},
            Some(rawdoc! {"_id": 1, "a": ["x", "y"]}),
        ),
        (
            rawdoc! {"$pull": {"a": "B"}},
            None,
            rawdoc! {"_id": 1, "a": ["a", "b", "c"]},
            Some(rawdoc! {"_id": 1, "a": ["a", "c"]}),
        ),
        (
            rawdoc! {"$pull": {"a": {"$in": ["A", "C"]}}},
            None,
            rawdoc! {"_id": 1, "a": ["a", "b", "c"]},
            Some(rawdoc! {"_id": 1, "a": ["b"]}),
        ),
        (
            rawdoc! {"$pull": {"a": {"k": "B"}}},
            None,
            rawdoc! {"_id": 1, "a": [{"k": "b"}, {"k": "c"}]},
            Some(rawdoc! {"_id": 1, "a": [{"k": "c"}]}),
        ),
        (
            rawdoc! {"$pullAll": {"a": ["A"]}},
            None,
            rawdoc! {"_id": 1, "a": ["a", "b"]},
            Some(rawdoc! {"_id": 1, "a": ["b"]}),
        ),
        // "B" is above "a" in the locale's order, below it in binary.
        (
            rawdoc! {"$max": {"a": "B"}},
            None,
            rawdoc! {"_id": 1, "a": "a"},
            Some(rawdoc! {"_id": 1, "a": "B"}),
        ),
        (
            rawdoc! {"$min": {"a": "B"}},
            None,
            rawdoc! {"_id": 1, "a": "a"},
            None,
        ),
        (
            rawdoc! {"$push": {"a": {"$each": ["B"], "$sort": 1}}},
            None,
            rawdoc! {"_id": 1, "a": ["c", "a"]},
            Some(rawdoc! {"_id": 1, "a": ["a", "B", "c"]}),
        ),
        (
            rawdoc! {"$set": {"a.$[e]": 0}},
            Some(rawdoc! {"e": "X"}),
            rawdoc! {"_id": 1, "a": ["x", "y", "X"]},
            Some(rawdoc! {"_id": 1, "a": [0, "y", 0]}),
        ),
    ];
    for (update, filter, doc, want) in cases {
        let mut array = bson::RawArrayBuf::new();
        if let Some(f) = &filter {
            array.push(f.clone());
        }
        let filters: Option<&bson::RawArray> = filter.as_ref().map(|_| &*array);
        let collated =
            Update::compile_with_array_filters(&update, filters)?.with_collation(en2.clone());
        assert_eq!(collated.apply(&doc)?, want, "{update:?} on {doc:?}");
    }
    // Without the collation, case matters.
    let plain = Update::compile(&rawdoc! {"$pull": {"a": "B"}})?;
    assert_eq!(plain.apply(&rawdoc! {"_id": 1, "a": ["b"]})?, None);
    Ok(())
}
