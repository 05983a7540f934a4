//! Conditional operators: `$cond` (array and `{if, then, else}` forms) and `$ifNull`.

use bson::RawBsonRef;

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
