use super::*;

#[test]
fn compile_errors() {
    let cases: Vec<(RawDocumentBuf, ErrorCode, &str)> = vec![
        (
            rawdoc! {"a": {"$foo": 1}},
            ErrorCode::BadValue,
            "unknown operator: $foo",
        ),
        (
            rawdoc! {"$foo": 1},
            ErrorCode::BadValue,
            "unknown top level operator: $foo. If you have a field name that starts with a \
             '$' symbol, consider using $getField or $setField.",
        ),
        (
            rawdoc! {"$and": []},
            ErrorCode::BadValue,
            "$and/$or/$nor must be a nonempty array",
        ),
        (
            rawdoc! {"$or": 1},
            ErrorCode::BadValue,
            "$or must be an array",
        ),
        (
            rawdoc! {"$nor": [1]},
            ErrorCode::BadValue,
            "$or/$and/$nor entries need to be full objects",
        ),
        (
            rawdoc! {"a": {"$in": 1}},
            ErrorCode::BadValue,
            "$in needs an array",
        ),
        (
            rawdoc! {"a": {"$nin": {}}},
            ErrorCode::BadValue,
            "$nin needs an array",
        ),
        (
            rawdoc! {"a": {"$in": [{"$gt": 1}]}},
            ErrorCode::BadValue,
            "cannot nest $ under $in",
        ),
        (
            rawdoc! {"a": {"$gt": 1, "b": 1}},
            ErrorCode::BadValue,
            "unknown operator: b",
        ),
        (
            rawdoc! {"a": {"$not": 1}},
            ErrorCode::BadValue,
            "$not needs a regex or a document",
        ),
        (
            rawdoc! {"a": {"$not": {}}},
            ErrorCode::BadValue,
            "$not cannot be empty",
        ),
        (
            rawdoc! {"a": bson::RawBson::Undefined},
            ErrorCode::BadValue,
            "cannot compare to undefined",
        ),
        (
            rawdoc! {"a": {"$gt": regex("x", "")}},
            ErrorCode::BadValue,
            "Can't have RegEx as arg to predicate over field 'a'.",
        ),
        (
            rawdoc! {"a": {"$ne": regex("x", "")}},
            ErrorCode::BadValue,
            "Can't have regex as arg to $ne.",
        ),
        (
            rawdoc! {"a": {"$where": "x"}},
            ErrorCode::BadValue,
            "$where cannot be applied to a field",
        ),
        (
            rawdoc! {"$alwaysTrue": 2},
            ErrorCode::FailedToParse,
            "$alwaysTrue must be an integer value of 1",
        ),
        (
            rawdoc! {"$where": "1"},
            ErrorCode::Location(6_108_304),
            "no globalScriptEngine in $where parsing",
        ),
    ];
    for (filter, code, msg) in cases {
        let err = Filter::compile(&filter).unwrap_err();
        assert_eq!((err.code, err.errmsg.as_str()), (code, msg), "{filter:?}");
    }
}

#[test]
fn new_operator_errors() {
    let cases: Vec<(RawDocumentBuf, ErrorCode, &str)> = vec![
        (
            rawdoc! {"$not": {"a": 1}},
            ErrorCode::BadValue,
            "unknown top level operator: $not. If you are trying to negate an entire \
             expression, use $nor.",
        ),
        (
            rawdoc! {"a": {"$type": "foo"}},
            ErrorCode::BadValue,
            "Unknown type name alias: foo",
        ),
        (
            rawdoc! {"a": {"$type": 100}},
            ErrorCode::BadValue,
            "Invalid numerical type code: 100",
        ),
        (
            rawdoc! {"a": {"$type": 1.5}},
            ErrorCode::BadValue,
            "Invalid numerical type code: 1.5",
        ),
        (
            rawdoc! {"a": {"$type": 0}},
            ErrorCode::BadValue,
            "Invalid numerical type code: 0",
        ),
        (
            rawdoc! {"a": {"$type": {}}},
            ErrorCode::TypeMismatch,
            "type must be represented as a number or a string",
        ),
        (
            rawdoc! {"a": {"$type": [null]}},
            ErrorCode::TypeMismatch,
            "type must be represented as a number or a string",
        ),
        (
            rawdoc! {"a": {"$type": []}},
            ErrorCode::FailedToParse,
            "a must match at least one type",
        ),
        (
            rawdoc! {"a": {"$mod": 1}},
            ErrorCode::BadValue,
            "malformed mod, needs to be an array",
        ),
        (
            rawdoc! {"a": {"$mod": []}},
            ErrorCode::BadValue,
            "malformed mod, not enough elements",
        ),
        (
            rawdoc! {"a": {"$mod": [1]}},
            ErrorCode::BadValue,
            "malformed mod, not enough elements",
        ),
        (
            rawdoc! {"a": {"$mod": [1, 2, 3]}},
            ErrorCode::BadValue,
            "malformed mod, too many elements",
        ),
        (
            rawdoc! {"a": {"$mod": ["1", 2]}},
            ErrorCode::BadValue,
            "malformed mod, divisor not a number",
        ),
        (
            rawdoc! {"a": {"$mod": [1, null]}},
            ErrorCode::BadValue,
            "malformed mod, remainder not a number",
        ),
        (
            rawdoc! {"a": {"$mod": [0, 1]}},
            ErrorCode::BadValue,
            "divisor cannot be 0",
        ),
        (
            rawdoc! {"a": {"$mod": [5e-324, 1]}},
            ErrorCode::BadValue,
            "divisor cannot be 0",
        ),
        (
            rawdoc! {"a": {"$mod": [f64::NAN, 1]}},
            ErrorCode::BadValue,
            "malformed mod, divisor value is invalid :: caused by :: Unable to coerce \
             NaN/Inf to integral type",
        ),
        (
            rawdoc! {"a": {"$mod": [1, f64::NEG_INFINITY]}},
            ErrorCode::BadValue,
            "malformed mod, remainder value is invalid :: caused by :: Unable to coerce \
             NaN/Inf to integral type",
        ),
        (
            rawdoc! {"a": {"$mod": [1.797_69e307, 0]}},
            ErrorCode::BadValue,
            "malformed mod, divisor value is invalid :: caused by :: Out of bounds \
             coercing to integral value",
        ),
        (
            rawdoc! {"a": {"$size": "1"}},
            ErrorCode::BadValue,
            "Failed to parse $size. Expected a number in: $size: \"1\"",
        ),
        (
            rawdoc! {"a": {"$size": -1}},
            ErrorCode::BadValue,
            "Failed to parse $size. Expected a non-negative number in: $size: -1",
        ),
        (
            rawdoc! {"a": {"$size": 1.5}},
            ErrorCode::BadValue,
            "Failed to parse $size. Expected an integer: $size: 1.5",
        ),
        (
            rawdoc! {"a": {"$size": 3_000_000_000_i64}},
            ErrorCode::BadValue,
            "Failed to parse $size. Cannot represent $size: 3000000000 in an int",
        ),
        (
            rawdoc! {"a": {"$all": 1}},
            ErrorCode::BadValue,
            "$all needs an array",
        ),
        (
            rawdoc! {"a": {"$all": [{"$gt": 1}]}},
            ErrorCode::BadValue,
            "no $ expressions in $all",
        ),
        (
            rawdoc! {"a": {"$all": [{"$elemMatch": {"b": 1}}, 5]}},
            ErrorCode::BadValue,
            "$all/$elemMatch has to be consistent",
        ),
        (
            rawdoc! {"a": {"$elemMatch": 1}},
            ErrorCode::BadValue,
            "$elemMatch needs an Object",
        ),
        (
            rawdoc! {"a": {"$elemMatch": {"$expr": {"$eq": [1, 1]}}}},
            ErrorCode::BadValue,
            "$expr can only be applied to the top-level document",
        ),
        (
            rawdoc! {"a": {"$elemMatch": {"$where": "1"}}},
            ErrorCode::BadValue,
            "$where can only be applied to the top-level document",
        ),
        (
            rawdoc! {"a": {"$elemMatch": {"$gt": 1, "b": 1}}},
            ErrorCode::BadValue,
            "unknown operator: b",
        ),
        (
            rawdoc! {"a": {"$bitsAllSet": "x"}},
            ErrorCode::BadValue,
            "a takes an Array, a number, or a BinData but received: $bitsAllSet: \"x\"",
        ),
        (
            rawdoc! {"a": {"$bitsAllSet": -1}},
            ErrorCode::FailedToParse,
            "Expected a non-negative number in: $bitsAllSet: -1",
        ),
        (
            rawdoc! {"a": {"$bitsAnySet": 1.5}},
            ErrorCode::FailedToParse,
            "Expected an integer: $bitsAnySet: 1.5",
        ),
        (
            rawdoc! {"a": {"$bitsAllClear": [1, -1]}},
            ErrorCode::BadValue,
            "Failed to parse bit position. Expected a non-negative number in: 1: -1",
        ),
        (
            rawdoc! {"a": {"$bitsAnyClear": ["a"]}},
            ErrorCode::BadValue,
            "Failed to parse bit position. Expected a number in: 0: \"a\"",
        ),
        (
            rawdoc! {"a": {"$regex": 1}},
            ErrorCode::BadValue,
            "$regex has to be a string",
        ),
        (
            rawdoc! {"a": {"$regex": "x", "$options": 1}},
            ErrorCode::BadValue,
            "$options has to be a string",
        ),
        (
            rawdoc! {"a": {"$options": "i"}},
            ErrorCode::BadValue,
            "$options needs a $regex",
        ),
        (
            rawdoc! {"a": {"$regex": regex("x", "i"), "$options": "m"}},
            ErrorCode::Location(51075),
            "options set in both $regex and $options",
        ),
        (
            rawdoc! {"a": {"$options": "m", "$regex": regex("x", "i")}},
            ErrorCode::Location(51074),
            "options set in both $regex and $options",
        ),
        (
            rawdoc! {"a": {"$regex": "x", "$options": "g"}},
            ErrorCode::Location(51108),
            " invalid flag in regex options: g",
        ),
        (
            rawdoc! {"a": {"$regex": "(?=x)"}},
            ErrorCode::Location(51091),
            "Regular expression is invalid: lookahead and lookbehind assertions are not \
             supported by Ebb (its regex engine never backtracks)",
        ),
        (
            rawdoc! {"a": {"$in": [regex("(", "")]}},
            ErrorCode::Location(51091),
            "Regular expression is invalid: unclosed group",
        ),
        (
            rawdoc! {"a": {"$not": regex("x", "q")}},
            ErrorCode::Location(51108),
            " invalid flag in regex options: q",
        ),
        (
            rawdoc! {"$expr": {"$foo": 1}},
            ErrorCode::InvalidPipelineOperator,
            "Unrecognized expression '$foo'",
        ),
        (
            rawdoc! {"$expr": {"$function": {"body": "1", "args": [], "lang": "js"}}},
            ErrorCode::Location(31264),
            "Cannot run server-side javascript without the javascript engine enabled",
        ),
        (
            rawdoc! {"$text": {"$search": "x"}},
            ErrorCode::NotImplemented,
            "the $text query operator is not supported by Ebb yet",
        ),
        (
            rawdoc! {"a": {"$near": [0, 0]}},
            ErrorCode::NotImplemented,
            "the $near query operator is not supported by Ebb yet",
        ),
        (
            rawdoc! {"a": {"$geoWithin": {}}},
            ErrorCode::NotImplemented,
            "the $geoWithin query operator is not supported by Ebb yet",
        ),
        (
            rawdoc! {"$jsonSchema": 1},
            ErrorCode::TypeMismatch,
            "$jsonSchema must be an object",
        ),
        (
            rawdoc! {"$jsonSchema": {}},
            ErrorCode::NotImplemented,
            "the $jsonSchema query operator is not supported by Ebb yet",
        ),
        (
            rawdoc! {"$sampleRate": 2},
            ErrorCode::BadValue,
            "numeric argument to $sampleRate must be in [0, 1]",
        ),
        (
            rawdoc! {"$sampleRate": "x"},
            ErrorCode::BadValue,
            "argument to $sampleRate must be a numeric type",
        ),
        (
            rawdoc! {"$alwaysTrue": "x"},
            ErrorCode::FailedToParse,
            "Expected a number in: $alwaysTrue: \"x\"",
        ),
        (
            rawdoc! {"a": {"$in": [1, RawBson::Undefined]}},
            ErrorCode::BadValue,
            "InMatchExpression equality cannot be undefined",
        ),
        (
            rawdoc! {"a": {"$expr": 1}},
            ErrorCode::BadValue,
            "unknown operator: $expr",
        ),
    ];
    for (filter, code, msg) in cases {
        let err = Filter::compile(&filter).unwrap_err();
        assert_eq!((err.code, err.errmsg.as_str()), (code, msg), "{filter:?}");
    }
    let err = Filter::compile_with(&rawdoc! {"$where": "1"}, FilterContext::Pipeline).unwrap_err();
    assert_eq!(
        (err.code, err.errmsg.as_str()),
        (ErrorCode::BadValue, "$where is not allowed in this context")
    );
}
