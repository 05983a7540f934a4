//! `$let` (scoped variables) and `$rand`.

use bson::{RawBson, RawBsonRef};

use super::{
    CommandError, Env, Frame, Node, Operator, Scope, Value, eval, loc, object_fields, parse,
    variables,
};
use crate::query::random_unit;

pub(super) fn parse_op(
    name: &str,
    v: RawBsonRef<'_>,
    sc: &mut Scope<'_>,
) -> Option<Result<Node, CommandError>> {
    match name {
        "let" => Some(parse_let(v, sc)),
        "rand" => Some(parse_rand(v)),
        _ => None,
    }
}

/// `$let`: `values` are evaluated in the enclosing scope into the slots from `base` on, then
/// `body` in a scope that sees them.
#[derive(Debug)]
struct Let {
    values: Vec<Node>,
    base: usize,
    body: Node,
}

impl Operator for Let {
    fn eval(&self, env: Env<'_>) -> Result<Value, CommandError> {
        let mut bound = Vec::with_capacity(self.values.len());
        for v in &self.values {
            bound.push(eval(v, env)?);
        }
        let frame = Frame::new(env, self.base, bound);
        eval(&self.body, env.with(&frame))
    }

    fn args(&self) -> Vec<&Node> {
        let mut out: Vec<&Node> = self.values.iter().collect();
        out.push(&self.body);
        out
    }
}

/// `{$let: {vars: {name: expr, …}, in: expr}}`: the values are parsed in the enclosing scope,
/// then the names (checked as mongod checks user-written names) are in scope for `in`.
fn parse_let(v: RawBsonRef<'_>, sc: &mut Scope<'_>) -> Result<Node, CommandError> {
    let RawBsonRef::Document(d) = v else {
        return Err(loc(16874, "$let only supports an object as its argument"));
    };
    let (mut vars, mut body) = (None, None);
    for (k, v) in object_fields(d)? {
        match k {
            "vars" => vars = Some(v),
            "in" => body = Some(v),
            other => {
                return Err(loc(
                    16875,
                    format!("Unrecognized parameter to $let: {other}"),
                ));
            }
        }
    }
    let vars = vars.ok_or_else(|| loc(16876, "Missing 'vars' parameter to $let"))?;
    let body = body.ok_or_else(|| loc(16877, "Missing 'in' parameter to $let"))?;
    let RawBsonRef::Document(vars) = vars else {
        return Err(loc(10065, "invalid parameter: expected an object (vars)"));
    };
    let mut names = Vec::new();
    let mut values = Vec::new();
    for (k, v) in object_fields(vars)? {
        names.push(k.to_owned());
        values.push(parse(v, sc)?);
    }
    for name in &names {
        variables::check_write_name(name)?;
    }
    let base = sc.bind(names);
    let body = parse(body, sc);
    sc.unbind(base);
    Ok(Node::op(Let {
        values,
        base,
        body: body?,
    }))
}

/// `$rand`: a double in [0, 1).
#[derive(Debug)]
struct Rand;

impl Operator for Rand {
    fn eval(&self, _env: Env<'_>) -> Result<Value, CommandError> {
        Ok(Some(RawBson::Double(random_unit())))
    }

    fn args(&self) -> Vec<&Node> {
        Vec::new()
    }
}

/// `{$rand: {}}`.
fn parse_rand(v: RawBsonRef<'_>) -> Result<Node, CommandError> {
    match v {
        RawBsonRef::Document(d) if d.is_empty() => Ok(Node::op(Rand)),
        RawBsonRef::Document(_) => Err(loc(3_040_501, "$rand does not currently accept arguments")),
        _ => Err(loc(10065, "invalid parameter: expected an object ($rand)")),
    }
}
