//! The array operators that bind variables: `$map` and `$filter` (the element as `as:`,
//! `$$this` by default) and `$reduce` (`$$this` and `$$value`). As in mongod, `input` (and
//! `$filter`'s `limit`, `$reduce`'s `initialValue`) see only the enclosing scope; the bound
//! names are in scope for `in`/`cond` alone.

use bson::{RawArrayBuf, RawBson, RawBsonRef};

use super::array::{items, value_string};
use super::{
    CommandError, Env, Frame, Node, Operator, Scope, Value, eval, integral_i32, loc, nullish,
    object_fields, parse, r, tname, truthy, variables,
};

pub(super) fn parse_op(
    name: &str,
    v: RawBsonRef<'_>,
    sc: &mut Scope<'_>,
) -> Option<Result<Node, CommandError>> {
    match name {
        "map" => Some(parse_map(v, sc)),
        "filter" => Some(parse_filter(v, sc)),
        "reduce" => Some(parse_reduce(v, sc)),
        _ => None,
    }
}

/// `$map`: `each` evaluated with the element in slot `base`.
#[derive(Debug)]
struct Map {
    input: Node,
    base: usize,
    each: Node,
}

/// `$filter`: the elements for which `cond` (element in slot `base`) is true, at most `limit`.
#[derive(Debug)]
struct Filter {
    input: Node,
    base: usize,
    cond: Node,
    limit: Option<Node>,
}

/// `$reduce`: `$$this` in slot `base`, `$$value` in `base + 1`.
#[derive(Debug)]
struct Reduce {
    input: Node,
    initial: Node,
    base: usize,
    each: Node,
}

/// The name `as:` binds: `this` when absent; a non-string is mongod's empty name (rejected).
fn bound_name(as_: Option<RawBsonRef<'_>>) -> Result<String, CommandError> {
    let name = match as_ {
        None => "this",
        Some(RawBsonRef::String(s)) => s,
        Some(_) => "",
    };
    variables::check_write_name(name)?;
    Ok(name.to_owned())
}

/// Parses `body` with `names` in scope, returning their first slot.
fn parse_bound(
    names: Vec<String>,
    body: RawBsonRef<'_>,
    sc: &mut Scope<'_>,
) -> Result<(usize, Node), CommandError> {
    let base = sc.bind(names);
    let node = parse(body, sc);
    sc.unbind(base);
    Ok((base, node?))
}

fn parse_map(v: RawBsonRef<'_>, sc: &mut Scope<'_>) -> Result<Node, CommandError> {
    let RawBsonRef::Document(d) = v else {
        return Err(loc(16878, "$map only supports an object as its argument"));
    };
    let (mut input, mut as_, mut each) = (None, None, None);
    for (k, v) in object_fields(d)? {
        match k {
            "input" => input = Some(v),
            "as" => as_ = Some(v),
            "in" => each = Some(v),
            other => {
                return Err(loc(
                    16879,
                    format!("Unrecognized parameter to $map: {other}"),
                ));
            }
        }
    }
    let input = input.ok_or_else(|| loc(16880, "Missing 'input' parameter to $map"))?;
    let each = each.ok_or_else(|| loc(16882, "Missing 'in' parameter to $map"))?;
    let input = parse(input, sc)?;
    let name = bound_name(as_)?;
    let (base, each) = parse_bound(vec![name], each, sc)?;
    Ok(Node::op(Map { input, base, each }))
}

fn parse_filter(v: RawBsonRef<'_>, sc: &mut Scope<'_>) -> Result<Node, CommandError> {
    let RawBsonRef::Document(d) = v else {
        return Err(loc(
            28646,
            "$filter only supports an object as its argument",
        ));
    };
    let (mut input, mut as_, mut cond, mut limit) = (None, None, None, None);
    for (k, v) in object_fields(d)? {
        match k {
            "input" => input = Some(v),
            "as" => as_ = Some(v),
            "cond" => cond = Some(v),
            "limit" => limit = Some(v),
            other => {
                return Err(loc(
                    28647,
                    format!("Unrecognized parameter to $filter: {other}"),
                ));
            }
        }
    }
    let input = input.ok_or_else(|| loc(28648, "Missing 'input' parameter to $filter"))?;
    let cond = cond.ok_or_else(|| loc(28650, "Missing 'cond' parameter to $filter"))?;
    let input = parse(input, sc)?;
    let name = bound_name(as_)?;
    let (base, cond) = parse_bound(vec![name], cond, sc)?;
    let limit = limit.map(|l| parse(l, sc)).transpose()?;
    Ok(Node::op(Filter {
        input,
        base,
        cond,
        limit,
    }))
}

fn parse_reduce(v: RawBsonRef<'_>, sc: &mut Scope<'_>) -> Result<Node, CommandError> {
    let RawBsonRef::Document(d) = v else {
        return Err(loc(
            40075,
            format!(
                "$reduce requires an object as an argument, found: {}",
                tname(Some(v))
            ),
        ));
    };
    let (mut input, mut initial, mut each) = (None, None, None);
    for (k, v) in object_fields(d)? {
        match k {
            "input" => input = Some(parse(v, sc)?),
            "initialValue" => initial = Some(parse(v, sc)?),
            "in" => {
                each = Some(parse_bound(
                    vec!["this".to_owned(), "value".to_owned()],
                    v,
                    sc,
                )?);
            }
            other => {
                return Err(loc(
                    40076,
                    format!("$reduce found an unknown argument: {other}"),
                ));
            }
        }
    }
    let input = input.ok_or_else(|| loc(40077, "$reduce requires 'input' to be specified"))?;
    let initial =
        initial.ok_or_else(|| loc(40078, "$reduce requires 'initialValue' to be specified"))?;
    let (base, each) = each.ok_or_else(|| loc(40079, "$reduce requires 'in' to be specified"))?;
    Ok(Node::op(Reduce {
        input,
        initial,
        base,
        each,
    }))
}

/// The input array's elements, `None` for a nullish input (the result is null), else
/// `not_array`'s error.
fn input_items(
    input: &Value,
    not_array: impl FnOnce(Option<RawBsonRef<'_>>) -> CommandError,
) -> Result<Option<Vec<RawBsonRef<'_>>>, CommandError> {
    match r(input) {
        x if nullish(x) => Ok(None),
        Some(RawBsonRef::Array(a)) => Ok(Some(items(a))),
        other => Err(not_array(other)),
    }
}

impl Operator for Map {
    fn eval(&self, env: Env<'_>) -> Result<Value, CommandError> {
        let input = eval(&self.input, env)?;
        let Some(elems) = input_items(&input, |v| {
            loc(
                16883,
                format!("input to $map must be an array not {}", tname(v)),
            )
        })?
        else {
            return Ok(Some(RawBson::Null));
        };
        let mut out = RawArrayBuf::new();
        for e in elems {
            let frame = Frame::new(env, self.base, vec![Some(e.into())]);
            out.push(eval(&self.each, env.with(&frame))?.unwrap_or(RawBson::Null));
        }
        Ok(Some(RawBson::Array(out)))
    }

    fn args(&self) -> Vec<&Node> {
        vec![&self.input, &self.each]
    }
}

impl Operator for Filter {
    fn eval(&self, env: Env<'_>) -> Result<Value, CommandError> {
        let input = eval(&self.input, env)?;
        let Some(elems) = input_items(&input, |v| {
            loc(
                28651,
                format!("input to $filter must be an array not {}", tname(v)),
            )
        })?
        else {
            return Ok(Some(RawBson::Null));
        };
        if elems.is_empty() {
            return Ok(input);
        }
        let mut remaining = None;
        if let Some(limit) = &self.limit {
            let l = eval(limit, env)?;
            let l = r(&l);
            if !nullish(l) {
                let Some(n) = l.and_then(integral_i32) else {
                    return Err(loc(
                        327_391,
                        format!(
                            "$filter: limit must be represented as a 32-bit integral value: {}",
                            value_string(l)
                        ),
                    ));
                };
                if n <= 0 {
                    return Err(loc(
                        327_392,
                        format!("$filter: limit must be greater than 0: {}", value_string(l)),
                    ));
                }
                remaining = Some(n);
            }
        }
        let mut out = RawArrayBuf::new();
        for e in elems {
            if remaining == Some(0) {
                break;
            }
            let frame = Frame::new(env, self.base, vec![Some(e.into())]);
            if truthy(&eval(&self.cond, env.with(&frame))?) {
                out.push(RawBson::from(e));
                remaining = remaining.map(|n| n - 1);
            }
        }
        Ok(Some(RawBson::Array(out)))
    }

    fn args(&self) -> Vec<&Node> {
        let mut out = vec![&self.input, &self.cond];
        out.extend(&self.limit);
        out
    }
}

impl Operator for Reduce {
    fn eval(&self, env: Env<'_>) -> Result<Value, CommandError> {
        let input = eval(&self.input, env)?;
        let Some(elems) = input_items(&input, |v| {
            loc(
                40080,
                format!(
                    "$reduce requires that 'input' be an array, found: {}",
                    value_string(v)
                ),
            )
        })?
        else {
            return Ok(Some(RawBson::Null));
        };
        let mut acc = eval(&self.initial, env)?;
        for e in elems {
            let frame = Frame::new(env, self.base, vec![Some(e.into()), acc]);
            acc = eval(&self.each, env.with(&frame))?;
        }
        Ok(acc)
    }

    fn args(&self) -> Vec<&Node> {
        vec![&self.input, &self.initial, &self.each]
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
    fn map_filter_reduce() {
        check(vec![
            (
                rawbson!({"$map": {"input": "$a", "as": "x", "in": {"$multiply": ["$$x", 2]}}}),
                Some(rawbson!([2, 4, 6])),
            ),
            (
                rawbson!({"$map": {"input": "$a", "in": {"$add": ["$$this", 1]}}}),
                Some(rawbson!([2, 3, 4])),
            ),
            (
                rawbson!({"$map": {"input": [1], "in": "$$REMOVE"}}),
                Some(rawbson!([null])),
            ),
            (
                rawbson!({"$map": {"input": "$missing", "in": 1}}),
                Some(RawBson::Null),
            ),
            (
                rawbson!({"$map": {"input": [], "in": 1}}),
                Some(rawbson!([])),
            ),
            // An inner `$map` sees the outer one's element.
            (
                rawbson!({"$map": {"input": [[1, 2], [3]], "as": "r", "in": {"$map": {"input": "$$r", "as": "c", "in": {"$add": ["$$c", {"$size": "$$r"}]}}}}}),
                Some(rawbson!([[3, 4], [4]])),
            ),
            (
                rawbson!({"$let": {"vars": {"k": 10}, "in": {"$map": {"input": "$a", "in": {"$add": ["$$this", "$$k"]}}}}}),
                Some(rawbson!([11, 12, 13])),
            ),
            // Binding CURRENT makes field paths read the element.
            (
                rawbson!({"$map": {"input": "$docs", "as": "CURRENT", "in": "$x"}}),
                Some(rawbson!([2, 1, 3])),
            ),
            (
                rawbson!({"$map": {"input": "$docs", "as": "d", "in": "$$d.y"}}),
                Some(rawbson!(["b", "a", null])),
            ),
            (
                rawbson!({"$filter": {"input": "$a", "as": "v", "cond": {"$gte": ["$$v", 2]}}}),
                Some(rawbson!([2, 3])),
            ),
            (
                rawbson!({"$filter": {"input": "$a", "cond": {"$gte": ["$$this", 2]}, "limit": 1}}),
                Some(rawbson!([2])),
            ),
            (
                rawbson!({"$filter": {"input": "$a", "cond": true, "limit": 2.0}}),
                Some(rawbson!([1, 2])),
            ),
            (
                rawbson!({"$filter": {"input": "$a", "cond": true, "limit": null}}),
                Some(rawbson!([1, 2, 3])),
            ),
            (
                rawbson!({"$filter": {"input": "$n", "cond": true}}),
                Some(RawBson::Null),
            ),
            // An empty input is returned before `limit` is looked at.
            (
                rawbson!({"$filter": {"input": [], "cond": true, "limit": "bad"}}),
                Some(rawbson!([])),
            ),
            (
                rawbson!({"$reduce": {"input": ["a", "b", "c"], "initialValue": "", "in": {"$concat": ["$$value", "$$this"]}}}),
                Some(rawbson!("abc")),
            ),
            (
                rawbson!({"$reduce": {"input": [1, 2, 3, 4], "initialValue": {"sum": 5, "product": 2}, "in": {"sum": {"$add": ["$$value.sum", "$$this"]}, "product": {"$multiply": ["$$value.product", "$$this"]}}}}),
                Some(rawbson!({"sum": 15, "product": 48})),
            ),
            (
                rawbson!({"$reduce": {"input": [[3, 4], [5, 6]], "initialValue": [1, 2], "in": {"$concatArrays": ["$$value", "$$this"]}}}),
                Some(rawbson!([1, 2, 3, 4, 5, 6])),
            ),
            (
                rawbson!({"$reduce": {"input": [], "initialValue": 7, "in": 0}}),
                Some(rawbson!(7)),
            ),
            (
                rawbson!({"$reduce": {"input": null, "initialValue": 7, "in": 0}}),
                Some(RawBson::Null),
            ),
        ]);
    }

    #[test]
    fn errors() {
        check_errors(vec![
            (
                rawbson!({"$map": 1}),
                16878,
                "$map only supports an object as its argument",
            ),
            (
                rawbson!({"$map": {"input": [], "in": 1, "x": 1}}),
                16879,
                "Unrecognized parameter to $map: x",
            ),
            (
                rawbson!({"$map": {"in": 1}}),
                16880,
                "Missing 'input' parameter to $map",
            ),
            (
                rawbson!({"$map": {"input": []}}),
                16882,
                "Missing 'in' parameter to $map",
            ),
            (
                rawbson!({"$map": {"input": "$s", "in": 1}}),
                16883,
                "input to $map must be an array not string",
            ),
            (
                rawbson!({"$map": {"input": [], "as": "X", "in": 1}}),
                16867,
                "'X' starts with an invalid character for a user variable name",
            ),
            (
                rawbson!({"$map": {"input": [], "as": 1, "in": 1}}),
                16866,
                "empty variable names are not allowed",
            ),
            (
                rawbson!({"$map": {"input": [], "as": "x", "in": "$$this"}}),
                17276,
                "Use of undefined variable: this",
            ),
            (
                rawbson!({"$map": {"input": "$$x", "as": "x", "in": 1}}),
                17276,
                "Use of undefined variable: x",
            ),
            (
                rawbson!([{"$map": {"input": [], "as": "x", "in": 1}}, "$$x"]),
                17276,
                "Use of undefined variable: x",
            ),
            (
                rawbson!({"$filter": 1}),
                28646,
                "$filter only supports an object as its argument",
            ),
            (
                rawbson!({"$filter": {"input": [], "cond": 1, "as2": 1}}),
                28647,
                "Unrecognized parameter to $filter: as2",
            ),
            (
                rawbson!({"$filter": {"cond": 1}}),
                28648,
                "Missing 'input' parameter to $filter",
            ),
            (
                rawbson!({"$filter": {"input": []}}),
                28650,
                "Missing 'cond' parameter to $filter",
            ),
            (
                rawbson!({"$filter": {"input": 1, "cond": 1}}),
                28651,
                "input to $filter must be an array not int",
            ),
            (
                rawbson!({"$filter": {"input": [1], "cond": true, "limit": 1.5}}),
                327_391,
                "$filter: limit must be represented as a 32-bit integral value: 1.5",
            ),
            (
                rawbson!({"$filter": {"input": [1], "cond": true, "limit": "a"}}),
                327_391,
                "$filter: limit must be represented as a 32-bit integral value: \"a\"",
            ),
            (
                rawbson!({"$filter": {"input": [1], "cond": true, "limit": 0}}),
                327_392,
                "$filter: limit must be greater than 0: 0",
            ),
            (
                rawbson!({"$filter": {"input": [1], "as": "x", "cond": true, "limit": "$$x"}}),
                17276,
                "Use of undefined variable: x",
            ),
            (
                rawbson!({"$reduce": 1}),
                40075,
                "$reduce requires an object as an argument, found: int",
            ),
            (
                rawbson!({"$reduce": {"input": [], "initialValue": 0, "in": 0, "x": 1}}),
                40076,
                "$reduce found an unknown argument: x",
            ),
            (
                rawbson!({"$reduce": {"initialValue": 0, "in": 0}}),
                40077,
                "$reduce requires 'input' to be specified",
            ),
            (
                rawbson!({"$reduce": {"input": [], "in": 0}}),
                40078,
                "$reduce requires 'initialValue' to be specified",
            ),
            (
                rawbson!({"$reduce": {"input": [], "initialValue": 0}}),
                40079,
                "$reduce requires 'in' to be specified",
            ),
            (
                rawbson!({"$reduce": {"input": "$s", "initialValue": 0, "in": 0}}),
                40080,
                "$reduce requires that 'input' be an array, found: \"x\"",
            ),
            (
                rawbson!({"$reduce": {"input": [], "initialValue": "$$value", "in": 0}}),
                17276,
                "Use of undefined variable: value",
            ),
        ]);
    }
}
