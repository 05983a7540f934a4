//! `$getField`, `$setField` and `$unsetField`: one field of a document, by its exact name, which
//! may hold `.` or start with `$` (names a field path cannot spell). As in MongoDB 7.0 the name
//! must be a constant string, known when the expression is parsed.

use bson::raw::CString;
use bson::{RawBson, RawBsonRef, RawDocument, RawDocumentBuf};

use super::{Env, Node, Operator, Scope, Value, eval, loc, nullish, parse, r};
use crate::error::CommandError;
use crate::query::display::type_name;
use crate::query::invalid_bson;

pub(super) fn parse_op(
    name: &str,
    v: RawBsonRef<'_>,
    sc: &mut Scope<'_>,
) -> Option<Result<Node, CommandError>> {
    match name {
        "getField" => Some(parse_get_field(v, sc)),
        "setField" => Some(parse_set_field(v, sc, true)),
        "unsetField" => Some(parse_set_field(v, sc, false)),
        _ => None,
    }
}

/// `$getField` with its constant field name.
#[derive(Debug)]
struct GetField {
    field: String,
    input: Node,
}

/// `$setField` (`value: Some`) or `$unsetField` (`value: None`).
#[derive(Debug)]
struct SetField {
    field: String,
    input: Node,
    value: Option<Node>,
}

impl Operator for GetField {
    fn eval(&self, env: Env<'_>) -> Result<Value, CommandError> {
        get_field(&self.field, eval(&self.input, env)?)
    }

    fn args(&self) -> Vec<&Node> {
        vec![&self.input]
    }
}

impl Operator for SetField {
    fn eval(&self, env: Env<'_>) -> Result<Value, CommandError> {
        let input = eval(&self.input, env)?;
        set_field(&self.field, input, || match &self.value {
            Some(v) => eval(v, env),
            None => Ok(None),
        })
    }

    fn args(&self) -> Vec<&Node> {
        let mut out = vec![&self.input];
        out.extend(&self.value);
        out
    }
}

/// The codes of one operator's checks on its `field` argument.
struct FieldCodes {
    path: i32,
    non_constant: i32,
    non_string: i32,
}

const GET_FIELD: FieldCodes = FieldCodes {
    path: 5_654_600,
    non_constant: 5_654_601,
    non_string: 5_654_602,
};

const SET_FIELD: FieldCodes = FieldCodes {
    path: 4_161_108,
    non_constant: 4_161_106,
    non_string: 4_161_107,
};

/// The constant name `op`'s `field` argument (`raw`, parsed as `node`) gives.
fn field_name(
    op: &str,
    raw: RawBsonRef<'_>,
    node: &Node,
    codes: &FieldCodes,
) -> Result<String, CommandError> {
    if let RawBsonRef::String(s) = raw
        && s.starts_with('$')
    {
        // A field path or a variable: mongod names it as a path from its variable.
        let shown = match s.strip_prefix("$$") {
            Some(var) => format!("${var}"),
            None => format!("$CURRENT.{}", &s[1..]),
        };
        return Err(loc(
            codes.path,
            format!(
                "'{shown}' is a field path reference which is not allowed in this context. Did \
                 you mean {{$literal: '{shown}'}}?"
            ),
        ));
    }
    match node {
        Node::Const(RawBson::String(s)) => Ok(s.clone()),
        Node::Const(other) => Err(loc(
            codes.non_string,
            format!(
                "{op} requires 'field' to evaluate to type String, but got {}",
                type_name(other.element_type())
            ),
        )),
        _ => Err(loc(
            codes.non_constant,
            format!(
                "{op} requires 'field' to evaluate to a constant, but got a non-constant argument"
            ),
        )),
    }
}

fn first_key(d: &RawDocument) -> Result<Option<&str>, CommandError> {
    match d.iter().next() {
        Some(item) => Ok(Some(item.map_err(|e| invalid_bson(&e))?.0.as_str())),
        None => Ok(None),
    }
}

/// `{$getField: {field, input}}`, or the short form `{$getField: field}` (input `$$CURRENT`),
/// which an object whose first key starts with `$` also is.
fn parse_get_field(v: RawBsonRef<'_>, sc: &mut Scope<'_>) -> Result<Node, CommandError> {
    let spec = match v {
        RawBsonRef::Document(d) if !first_key(d)?.is_some_and(|k| k.starts_with('$')) => Some(d),
        _ => None,
    };
    let (raw, field, input) = match spec {
        None => (v, parse(v, sc)?, sc.current(Vec::new())),
        Some(d) => {
            let (mut field, mut input) = (None, None);
            for item in d {
                let (k, v) = item.map_err(|e| invalid_bson(&e))?;
                match k.as_str() {
                    "field" => field = Some((v, parse(v, sc)?)),
                    "input" => input = Some(parse(v, sc)?),
                    other => {
                        return Err(loc(
                            3_041_701,
                            format!("$getField found an unknown argument: {other}"),
                        ));
                    }
                }
            }
            let (raw, field) = field
                .ok_or_else(|| loc(3_041_702, "$getField requires 'field' to be specified"))?;
            let input = input
                .ok_or_else(|| loc(3_041_703, "$getField requires 'input' to be specified"))?;
            (raw, field, input)
        }
    };
    Ok(Node::op(GetField {
        field: field_name("$getField", raw, &field, &GET_FIELD)?,
        input,
    }))
}

/// `{$setField: {field, input, value}}` (`set`), or `{$unsetField: {field, input}}`.
fn parse_set_field(v: RawBsonRef<'_>, sc: &mut Scope<'_>, set: bool) -> Result<Node, CommandError> {
    let op = if set { "$setField" } else { "$unsetField" };
    let RawBsonRef::Document(d) = v else {
        return Err(loc(
            4_161_100,
            format!("{op} only supports an object as its argument"),
        ));
    };
    let (mut field, mut input, mut value) = (None, None, None);
    for item in d {
        let (k, v) = item.map_err(|e| invalid_bson(&e))?;
        match k.as_str() {
            "field" => field = Some((v, parse(v, sc)?)),
            "input" => input = Some(parse(v, sc)?),
            "value" if set => value = Some(parse(v, sc)?),
            other => {
                return Err(loc(
                    4_161_101,
                    format!("{op} found an unknown argument: {other}"),
                ));
            }
        }
    }
    let (raw, field) =
        field.ok_or_else(|| loc(4_161_102, format!("{op} requires 'field' to be specified")))?;
    if set && value.is_none() {
        return Err(loc(4_161_103, "$setField requires 'value' to be specified"));
    }
    let input =
        input.ok_or_else(|| loc(4_161_109, format!("{op} requires 'input' to be specified")))?;
    Ok(Node::op(SetField {
        field: field_name(op, raw, &field, &SET_FIELD)?,
        input,
        value,
    }))
}

/// `$getField` on its evaluated input: missing input is missing, null (or undefined) is null,
/// a document gives its field (or missing), anything else is missing.
fn get_field(field: &str, input: Value) -> Result<Value, CommandError> {
    match input {
        None => Ok(None),
        Some(RawBson::Null | RawBson::Undefined) => Ok(Some(RawBson::Null)),
        Some(RawBson::Document(d)) => Ok(d
            .get(field)
            .map_err(|e| invalid_bson(&e))?
            .map(RawBson::from)),
        Some(_) => Ok(None),
    }
}

/// `$setField`/`$unsetField` on its evaluated input: null for null or missing input, else the
/// input document with the field replaced in place, appended, or (for a missing value)
/// removed. `value` is evaluated only for a document input.
fn set_field(
    field: &str,
    input: Value,
    value: impl FnOnce() -> Result<Value, CommandError>,
) -> Result<Value, CommandError> {
    if nullish(r(&input)) {
        return Ok(Some(RawBson::Null));
    }
    let Some(RawBson::Document(doc)) = input else {
        // mongod names `$setField` here for `$unsetField` too.
        return Err(loc(
            4_161_105,
            "$setField requires 'input' to evaluate to type Object",
        ));
    };
    let value = value()?;
    let mut out = RawDocumentBuf::new();
    let mut placed = false;
    for item in &doc {
        let (k, v) = item.map_err(|e| invalid_bson(&e))?;
        if k.as_str() != field {
            out.append(k, v);
        } else if !placed {
            placed = true;
            if let Some(new) = &value {
                out.append(k, new.clone());
            }
        }
    }
    if !placed && let Some(new) = value {
        out.append(
            CString::try_from(field.to_owned()).map_err(|e| invalid_bson(&e))?,
            new,
        );
    }
    Ok(Some(RawBson::Document(out)))
}

#[cfg(test)]
mod tests {
    use bson::{RawBson, RawDocumentBuf, rawbson, rawdoc};

    use super::super::Expression;
    use crate::error::{CommandError, ErrorCode};

    fn eval(expr: &RawBson, doc: &RawDocumentBuf) -> Result<Option<RawBson>, CommandError> {
        Expression::parse(expr.as_raw_bson_ref())?.evaluate(doc)
    }

    #[test]
    fn get_field_table() -> Result<(), CommandError> {
        let doc = rawdoc! {
            "a.b": 1, "$c": 2, "a": {"b": 3}, "n": null, "s": "x", "o": {"$d": 4},
        };
        let cases: Vec<(RawBson, Option<RawBson>)> = vec![
            (rawbson!({"$getField": "a.b"}), Some(rawbson!(1))),
            (
                rawbson!({"$getField": {"$literal": "$c"}}),
                Some(rawbson!(2)),
            ),
            (
                rawbson!({"$getField": {"$const": "a.b"}}),
                Some(rawbson!(1)),
            ),
            (
                rawbson!({"$getField": {"field": "a", "input": "$$ROOT"}}),
                Some(rawbson!({"b": 3})),
            ),
            (
                rawbson!({"$getField": {"field": {"$literal": "$d"}, "input": "$o"}}),
                Some(rawbson!(4)),
            ),
            (
                rawbson!({"$getField": {"field": "b", "input": "$a"}}),
                Some(rawbson!(3)),
            ),
            (
                rawbson!({"$getField": {"field": "x", "input": {"x": {"$add": [1, 2]}}}}),
                Some(rawbson!(3)),
            ),
            (rawbson!({"$getField": "nope"}), None),
            // Null input is null; missing or non-object input is missing.
            (
                rawbson!({"$getField": {"field": "x", "input": "$n"}}),
                Some(RawBson::Null),
            ),
            (
                rawbson!({"$getField": {"field": "x", "input": "$nope"}}),
                None,
            ),
            (rawbson!({"$getField": {"field": "x", "input": "$s"}}), None),
        ];
        for (expr, want) in cases {
            assert_eq!(eval(&expr, &doc)?, want, "{expr:?}");
        }
        Ok(())
    }

    #[test]
    fn set_and_unset_field_table() -> Result<(), CommandError> {
        let doc = rawdoc! {"_id": 1, "foo": {}, "a": 1, "s": "x"};
        let cases: Vec<(RawBson, Option<RawBson>)> = vec![
            // A new name is appended, and may hold `.` or start with `$`.
            (
                rawbson!({"$setField": {"field": "a.b", "value": 1, "input": "$$ROOT"}}),
                Some(rawbson!({"_id": 1, "foo": {}, "a": 1, "s": "x", "a.b": 1})),
            ),
            (
                rawbson!({"$setField": {"field": {"$literal": "$a"}, "value": 2, "input": "$foo"}}),
                Some(rawbson!({"$a": 2})),
            ),
            // An existing field is replaced in place.
            (
                rawbson!({"$setField": {"field": "a", "value": 9, "input": {"a": 1, "b": 2}}}),
                Some(rawbson!({"a": 9, "b": 2})),
            ),
            (
                rawbson!({"$setField": {"field": "x", "value": {"$add": ["$a", 1]}, "input": {}}}),
                Some(rawbson!({"x": 2})),
            ),
            // A missing value removes the field.
            (
                rawbson!({"$setField": {"field": "a", "value": "$$REMOVE", "input": {"a": 1, "b": 2}}}),
                Some(rawbson!({"b": 2})),
            ),
            (
                rawbson!({"$setField": {"field": "a", "value": "$nope", "input": {"a": 1}}}),
                Some(rawbson!({})),
            ),
            // Null or missing input is null.
            (
                rawbson!({"$setField": {"field": "a", "value": 1, "input": null}}),
                Some(RawBson::Null),
            ),
            (
                rawbson!({"$setField": {"field": "a", "value": 1, "input": "$nope"}}),
                Some(RawBson::Null),
            ),
            (
                rawbson!({"$unsetField": {"field": "a.b", "input": {"$literal": {"a.b": 1, "c": 2}}}}),
                Some(rawbson!({"c": 2})),
            ),
            (
                rawbson!({"$unsetField": {"field": "zz", "input": {"$literal": {"c": 2}}}}),
                Some(rawbson!({"c": 2})),
            ),
            (
                rawbson!({"$unsetField": {"field": "a", "input": null}}),
                Some(RawBson::Null),
            ),
        ];
        for (expr, want) in cases {
            assert_eq!(eval(&expr, &doc)?, want, "{expr:?}");
        }
        Ok(())
    }

    #[test]
    fn field_error_table() {
        let doc = rawdoc! {"s": "x"};
        let path_msg = |p: &str| {
            format!(
                "'{p}' is a field path reference which is not allowed in this context. Did you \
                 mean {{$literal: '{p}'}}?"
            )
        };
        let cases: Vec<(RawBson, i32, String)> = vec![
            (
                rawbson!({"$getField": {"input": {"a": "b"}}}),
                3_041_702,
                "$getField requires 'field' to be specified".into(),
            ),
            (
                rawbson!({"$getField": {"field": "a"}}),
                3_041_703,
                "$getField requires 'input' to be specified".into(),
            ),
            (
                rawbson!({"$getField": {"field": "a", "input": {}, "x": 1}}),
                3_041_701,
                "$getField found an unknown argument: x".into(),
            ),
            (
                rawbson!({"$getField": 5}),
                5_654_602,
                "$getField requires 'field' to evaluate to type String, but got int".into(),
            ),
            (
                rawbson!({"$getField": {"field": null, "input": {}}}),
                5_654_602,
                "$getField requires 'field' to evaluate to type String, but got null".into(),
            ),
            (
                rawbson!({"$getField": {"$const": [1]}}),
                5_654_602,
                "$getField requires 'field' to evaluate to type String, but got array".into(),
            ),
            (
                rawbson!({"$getField": {"field": {"a": 1}, "input": {}}}),
                5_654_601,
                "$getField requires 'field' to evaluate to a constant, but got a non-constant \
                 argument"
                    .into(),
            ),
            (
                rawbson!({"$getField": {"$add": [2, 3]}}),
                5_654_601,
                "$getField requires 'field' to evaluate to a constant, but got a non-constant \
                 argument"
                    .into(),
            ),
            (
                rawbson!({"$getField": "$a.b"}),
                5_654_600,
                path_msg("$CURRENT.a.b"),
            ),
            (
                rawbson!({"$getField": "$$CURRENT.a"}),
                5_654_600,
                path_msg("$CURRENT.a"),
            ),
            (
                rawbson!({"$getField": "$$nope"}),
                17276,
                "Use of undefined variable: nope".into(),
            ),
            (
                rawbson!({"$setField": 1}),
                4_161_100,
                "$setField only supports an object as its argument".into(),
            ),
            (
                rawbson!({"$unsetField": []}),
                4_161_100,
                "$unsetField only supports an object as its argument".into(),
            ),
            (
                rawbson!({"$setField": {"input": {}}}),
                4_161_102,
                "$setField requires 'field' to be specified".into(),
            ),
            (
                rawbson!({"$setField": {"field": "a"}}),
                4_161_103,
                "$setField requires 'value' to be specified".into(),
            ),
            (
                rawbson!({"$setField": {"field": "a", "value": 1}}),
                4_161_109,
                "$setField requires 'input' to be specified".into(),
            ),
            (
                rawbson!({"$unsetField": {"field": "a"}}),
                4_161_109,
                "$unsetField requires 'input' to be specified".into(),
            ),
            (
                rawbson!({"$unsetField": {"field": "a", "value": 1, "input": {}}}),
                4_161_101,
                "$unsetField found an unknown argument: value".into(),
            ),
            (
                rawbson!({"$setField": {"field": true, "input": {}, "value": 1}}),
                4_161_107,
                "$setField requires 'field' to evaluate to type String, but got bool".into(),
            ),
            (
                rawbson!({"$unsetField": {"field": 33, "input": 33}}),
                4_161_107,
                "$unsetField requires 'field' to evaluate to type String, but got int".into(),
            ),
            (
                rawbson!({"$setField": {"field": {"$concat": ["a", "b"]}, "input": {}, "value": 1}}),
                4_161_106,
                "$setField requires 'field' to evaluate to a constant, but got a non-constant \
                 argument"
                    .into(),
            ),
            (
                rawbson!({"$setField": {"field": "$f", "input": {}, "value": 0}}),
                4_161_108,
                path_msg("$CURRENT.f"),
            ),
            (
                rawbson!({"$unsetField": {"field": "$$ROOT", "input": {}}}),
                4_161_108,
                path_msg("$ROOT"),
            ),
            // Evaluation: the input must be an object (mongod names `$setField` for both).
            (
                rawbson!({"$setField": {"field": "a", "input": true, "value": 1}}),
                4_161_105,
                "$setField requires 'input' to evaluate to type Object".into(),
            ),
            (
                rawbson!({"$unsetField": {"field": "a", "input": "$s"}}),
                4_161_105,
                "$setField requires 'input' to evaluate to type Object".into(),
            ),
        ];
        for (expr, code, msg) in cases {
            let err = eval(&expr, &doc).unwrap_err();
            assert_eq!(
                (err.code, err.errmsg.as_str()),
                (ErrorCode::Location(code), msg.as_str()),
                "{expr:?}"
            );
        }
    }
}
