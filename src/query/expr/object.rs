//! `$bsonSize`, a document's size in bytes; `$binarySize`, a string's or binary's;
//! `$mergeObjects`: the fields of several documents, later ones overwriting earlier ones in
//! place. As mongod's expression form of the accumulator, one argument that is an array merges
//! its elements; null and missing inputs are skipped.

use bson::{RawBson, RawBsonRef};

use super::array::{FieldList, items, value_string};
use super::{
    CommandError, Env, Node, PositionalOp, Scope, Value, eval, loc, nullish, object_fields,
    parse_args, r, tname,
};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct MergeObjects;

/// `$bsonSize`: the size in bytes of a document as BSON (null for null or missing).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct BsonSize;

impl PositionalOp for BsonSize {
    fn eval(self, args: &[Node], env: Env<'_>) -> Result<Value, CommandError> {
        let v = super::arg(args, 0, env)?;
        match r(&v) {
            v if nullish(v) => Ok(Some(RawBson::Null)),
            Some(RawBsonRef::Document(d)) => Ok(Some(
                i32::try_from(d.as_bytes().len()).map_or(RawBson::Null, RawBson::Int32),
            )),
            other => Err(loc(
                31393,
                format!(
                    "$bsonSize requires a document input, found: {}",
                    tname(other)
                ),
            )),
        }
    }
}

/// `$binarySize`: the size in bytes of a string (UTF-8) or of a binary's data (null for null or
/// missing).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct BinarySize;

impl PositionalOp for BinarySize {
    fn eval(self, args: &[Node], env: Env<'_>) -> Result<Value, CommandError> {
        let v = super::arg(args, 0, env)?;
        let len = match r(&v) {
            v if nullish(v) => return Ok(Some(RawBson::Null)),
            Some(RawBsonRef::String(s)) => s.len(),
            Some(RawBsonRef::Binary(b)) => b.bytes.len(),
            other => {
                return Err(loc(
                    51276,
                    format!(
                        "$binarySize requires a string or BinData argument, found: {}",
                        tname(other)
                    ),
                ));
            }
        };
        Ok(Some(
            i32::try_from(len).map_or(RawBson::Int64(i64::MAX), RawBson::Int32),
        ))
    }
}

pub(super) fn parse_op(
    name: &str,
    v: RawBsonRef<'_>,
    sc: &mut Scope<'_>,
) -> Option<Result<Node, CommandError>> {
    match name {
        "mergeObjects" => Some(parse_args(v, sc).map(|args| super::call(MergeObjects, args))),
        "bsonSize" => Some(parse_args(v, sc).and_then(|args| {
            super::exactly(name, &args, 1)?;
            Ok(super::call(BsonSize, args))
        })),
        "binarySize" => Some(parse_args(v, sc).and_then(|args| {
            super::exactly(name, &args, 1)?;
            Ok(super::call(BinarySize, args))
        })),
        _ => None,
    }
}

fn merge(out: &mut FieldList, v: Option<RawBsonRef<'_>>) -> Result<(), CommandError> {
    if nullish(v) {
        return Ok(());
    }
    let Some(RawBsonRef::Document(d)) = v else {
        return Err(loc(
            40400,
            format!(
                "$mergeObjects requires object inputs, but input {} is of type {}",
                value_string(v),
                tname(v)
            ),
        ));
    };
    for (k, v) in object_fields(d)? {
        out.set(k, v.into());
    }
    Ok(())
}

impl PositionalOp for MergeObjects {
    fn eval(self, args: &[Node], env: Env<'_>) -> Result<Value, CommandError> {
        let mut out = FieldList::default();
        if let [only] = args {
            let v = eval(only, env)?;
            match r(&v) {
                Some(RawBsonRef::Array(a)) => {
                    for e in items(a) {
                        merge(&mut out, Some(e))?;
                    }
                }
                other => merge(&mut out, other)?,
            }
        } else {
            for a in args {
                merge(&mut out, r(&eval(a, env)?))?;
            }
        }
        Ok(Some(RawBson::Document(out.into_document(40400)?)))
    }
}

#[cfg(test)]
mod tests {
    use bson::{RawBson, RawDocumentBuf, rawbson, rawdoc};

    use crate::error::{CommandError, ErrorCode};
    use crate::query::Expression;

    fn doc() -> RawDocumentBuf {
        rawdoc! {
            "a": [1, 2, 3], "s": "x", "d": {"k": 1, "l": "m"}, "n": null,
            "docs": [{"x": 2, "y": "b"}, {"x": 1, "y": "a"}, {"x": 3}],
        }
    }

    fn eval(expr: &RawBson) -> Result<Option<RawBson>, CommandError> {
        Expression::parse(expr.as_raw_bson_ref())?.evaluate(&doc())
    }

    fn check(cases: Vec<(RawBson, Option<RawBson>)>) {
        for (expr, want) in cases {
            let got = eval(&expr).unwrap_or_else(|e| panic!("{expr:?}: {e:?}"));
            assert_eq!(got, want, "{expr:?}");
        }
    }

    fn check_errors(cases: Vec<(RawBson, i32, &str)>) {
        for (expr, code, msg) in cases {
            let err = eval(&expr).expect_err(&format!("{expr:?} should fail"));
            assert_eq!(
                (err.code, err.errmsg.as_str()),
                (ErrorCode::Location(code), msg),
                "{expr:?}"
            );
        }
    }

    #[test]
    fn merge_objects() {
        check(vec![
            (
                rawbson!({"$mergeObjects": [{"a": 1, "b": 1}, {"b": 2, "c": 3}]}),
                Some(rawbson!({"a": 1, "b": 2, "c": 3})),
            ),
            (
                rawbson!({"$mergeObjects": ["$d", null, "$missing", {"k": 5}]}),
                Some(rawbson!({"k": 5, "l": "m"})),
            ),
            // One argument that is an array merges its elements.
            (
                rawbson!({"$mergeObjects": "$docs"}),
                Some(rawbson!({"x": 3, "y": "a"})),
            ),
            (rawbson!({"$mergeObjects": []}), Some(rawbson!({}))),
            (rawbson!({"$mergeObjects": "$missing"}), Some(rawbson!({}))),
        ]);
        check_errors(vec![
            (
                rawbson!({"$mergeObjects": [{"a": 1}, "$s"]}),
                40400,
                "$mergeObjects requires object inputs, but input \"x\" is of type string",
            ),
            (
                rawbson!({"$mergeObjects": [[1, {"a": 1}]]}),
                40400,
                "$mergeObjects requires object inputs, but input 1 is of type int",
            ),
        ]);
    }
}
