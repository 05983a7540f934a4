//! Conditional operators: `$cond` (array and `{if, then, else}` forms), `$ifNull` and
//! `$switch` (`{branches: [{case, then}, …], default}`).

use bson::RawBsonRef;

use super::display::type_name;
use super::{Operator, tname};

use super::{
    CommandError, Env, Node, PositionalOp, Scope, Value, arg, call, eval, exactly, loc, nullish,
    object_fields, parse, parse_args, r, truthy,
};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    /// `[if, then, else]`.
    Cond,
    IfNull,
}

pub(super) fn parse_op(
    name: &str,
    v: RawBsonRef<'_>,
    sc: &mut Scope<'_>,
) -> Option<Result<Node, CommandError>> {
    match name {
        "cond" => Some(parse_cond(v, sc)),
        "switch" => Some(parse_switch(v, sc)),
        "ifNull" => Some(parse_args(v, sc).and_then(|args| {
            if args.len() < 2 {
                return Err(loc(
                    1_257_300,
                    format!("$ifNull needs at least two arguments, had: {}", args.len()),
                ));
            }
            Ok(call(Op::IfNull, args))
        })),
        _ => None,
    }
}

fn parse_cond(v: RawBsonRef<'_>, sc: &mut Scope<'_>) -> Result<Node, CommandError> {
    let RawBsonRef::Document(d) = v else {
        let args = parse_args(v, sc)?;
        exactly("cond", &args, 3)?;
        return Ok(call(Op::Cond, args));
    };
    let (mut c, mut t, mut e) = (None, None, None);
    for (k, v) in object_fields(d)? {
        let slot = match k {
            "if" => &mut c,
            "then" => &mut t,
            "else" => &mut e,
            other => {
                return Err(loc(
                    17083,
                    format!("Unrecognized parameter to $cond: {other}"),
                ));
            }
        };
        *slot = Some(parse(v, sc)?);
    }
    let c = c.ok_or_else(|| loc(17080, "Missing 'if' parameter to $cond"))?;
    let t = t.ok_or_else(|| loc(17081, "Missing 'then' parameter to $cond"))?;
    let e = e.ok_or_else(|| loc(17082, "Missing 'else' parameter to $cond"))?;
    Ok(call(Op::Cond, vec![c, t, e]))
}

impl PositionalOp for Op {
    fn eval(self, args: &[Node], env: Env<'_>) -> Result<Value, CommandError> {
        match self {
            Op::Cond => {
                if truthy(&arg(args, 0, env)?) {
                    arg(args, 1, env)
                } else {
                    arg(args, 2, env)
                }
            }
            Op::IfNull => {
                let Some((last, init)) = args.split_last() else {
                    return Ok(None);
                };
                for a in init {
                    let v = eval(a, env)?;
                    if !nullish(r(&v)) {
                        return Ok(v);
                    }
                }
                eval(last, env)
            }
        }
    }
}

/// `$switch`: the `then` of the first branch whose `case` is true, else `default`, else
/// mongod's 40066.
#[derive(Debug)]
struct Switch {
    branches: Vec<(Node, Node)>,
    default: Option<Node>,
}

impl Operator for Switch {
    fn eval(&self, env: Env<'_>) -> Result<Value, CommandError> {
        for (case, then) in &self.branches {
            if truthy(&eval(case, env)?) {
                return eval(then, env);
            }
        }
        match &self.default {
            Some(d) => eval(d, env),
            None => Err(loc(
                40066,
                "$switch could not find a matching branch for an input, and no default was \
                 specified.",
            )),
        }
    }

    fn args(&self) -> Vec<&Node> {
        let mut out = Vec::new();
        for (case, then) in &self.branches {
            out.push(case);
            out.push(then);
        }
        out.extend(&self.default);
        out
    }
}

fn parse_switch(v: RawBsonRef<'_>, sc: &mut Scope<'_>) -> Result<Node, CommandError> {
    let RawBsonRef::Document(d) = v else {
        return Err(loc(
            40060,
            format!(
                "$switch requires an object as an argument, found: {}",
                tname(Some(v))
            ),
        ));
    };
    let mut branches = Vec::new();
    let mut default = None;
    for (k, v) in object_fields(d)? {
        match k {
            "branches" => {
                let RawBsonRef::Array(items) = v else {
                    return Err(loc(
                        40061,
                        format!(
                            "$switch expected an array for 'branches', found: {}",
                            tname(Some(v))
                        ),
                    ));
                };
                for item in items {
                    let item = item.map_err(|e| crate::query::invalid_bson(&e))?;
                    let RawBsonRef::Document(branch) = item else {
                        return Err(loc(
                            40062,
                            format!(
                                "$switch expected each branch to be an object, found: {}",
                                type_name(item.element_type())
                            ),
                        ));
                    };
                    let (mut case, mut then) = (None, None);
                    for (bk, bv) in object_fields(branch)? {
                        match bk {
                            "case" => case = Some(parse(bv, sc)?),
                            "then" => then = Some(parse(bv, sc)?),
                            other => {
                                return Err(loc(
                                    40063,
                                    format!(
                                        "$switch found an unknown argument to a branch: {other}"
                                    ),
                                ));
                            }
                        }
                    }
                    let case = case.ok_or_else(|| {
                        loc(
                            40064,
                            "$switch requires each branch have a 'case' expression",
                        )
                    })?;
                    let then = then.ok_or_else(|| {
                        loc(
                            40065,
                            "$switch requires each branch have a 'then' expression.",
                        )
                    })?;
                    branches.push((case, then));
                }
            }
            "default" => default = Some(parse(v, sc)?),
            other => {
                return Err(loc(
                    40067,
                    format!("$switch found an unknown argument: {other}"),
                ));
            }
        }
    }
    if branches.is_empty() {
        return Err(loc(40068, "$switch requires at least one branch."));
    }
    Ok(Node::op(Switch { branches, default }))
}

#[cfg(test)]
mod tests {
    use bson::{RawBson, rawbson, rawdoc};

    use crate::error::{CommandError, ErrorCode};
    use crate::query::Expression;

    fn eval(expr: &RawBson) -> Result<Option<RawBson>, CommandError> {
        Expression::parse(expr.as_raw_bson_ref())?.evaluate(&rawdoc! {"x": 5, "s": "a"})
    }

    #[test]
    fn switch_table() -> Result<(), CommandError> {
        let cases: Vec<(RawBson, Option<RawBson>)> = vec![
            (
                rawbson!({"$switch": {"branches": [
                    {"case": {"$lt": ["$x", 3]}, "then": "small"},
                    {"case": {"$lt": ["$x", 10]}, "then": "medium"},
                ], "default": "large"}}),
                Some(rawbson!("medium")),
            ),
            (
                rawbson!({"$switch": {"branches": [{"case": false, "then": 1}], "default": "$x"}}),
                Some(rawbson!(5)),
            ),
            // Truthiness, and the first matching branch wins.
            (
                rawbson!({"$switch": {"branches": [{"case": 0, "then": 1}, {"case": "$s", "then": 2}, {"case": true, "then": 3}]}}),
                Some(rawbson!(2)),
            ),
            (
                rawbson!({"$switch": {"branches": [{"case": true, "then": "$missing"}]}}),
                None,
            ),
        ];
        for (expr, want) in cases {
            assert_eq!(eval(&expr)?, want, "{expr:?}");
        }
        Ok(())
    }

    #[test]
    fn switch_errors() {
        let cases: Vec<(RawBson, i32, &str)> = vec![
            (
                rawbson!({"$switch": "x"}),
                40060,
                "$switch requires an object as an argument, found: string",
            ),
            (
                rawbson!({"$switch": {"branches": 1}}),
                40061,
                "$switch expected an array for 'branches', found: int",
            ),
            (
                rawbson!({"$switch": {"branches": ["x"]}}),
                40062,
                "$switch expected each branch to be an object, found: string",
            ),
            (
                rawbson!({"$switch": {"branches": [{"case": 1, "then": 1, "z": 1}]}}),
                40063,
                "$switch found an unknown argument to a branch: z",
            ),
            (
                rawbson!({"$switch": {"branches": [{}]}}),
                40064,
                "$switch requires each branch have a 'case' expression",
            ),
            (
                rawbson!({"$switch": {"branches": [{"case": 1}]}}),
                40065,
                "$switch requires each branch have a 'then' expression.",
            ),
            (
                rawbson!({"$switch": {"branches": [{"case": false, "then": 1}]}}),
                40066,
                "$switch could not find a matching branch for an input, and no default was \
                 specified.",
            ),
            (
                rawbson!({"$switch": {"x": 1}}),
                40067,
                "$switch found an unknown argument: x",
            ),
            (
                rawbson!({"$switch": {"branches": [], "default": 1}}),
                40068,
                "$switch requires at least one branch.",
            ),
            (
                rawbson!({"$switch": {}}),
                40068,
                "$switch requires at least one branch.",
            ),
        ];
        for (expr, code, msg) in cases {
            let err = eval(&expr).unwrap_err();
            assert_eq!(
                (err.code, err.errmsg.as_str()),
                (ErrorCode::Location(code), msg),
                "{expr:?}"
            );
        }
    }
}
