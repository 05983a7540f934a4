//! Array operators: `$in $size $arrayElemAt`.

use bson::{RawBson, RawBsonRef};

use super::{
    CommandError, Env, Node, PositionalOp, Scope, Value, agg_compare, arg, boolean, call, exactly,
    format_g6, integral_i32, is_number, loc, nullish, parse_args, r, tname,
};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    In,
    Size,
    ArrayElemAt,
}

pub(super) fn parse_op(
    name: &str,
    v: RawBsonRef<'_>,
    sc: &mut Scope<'_>,
) -> Option<Result<Node, CommandError>> {
    let (op, arity) = match name {
        "in" => (Op::In, 2),
        "size" => (Op::Size, 1),
        "arrayElemAt" => (Op::ArrayElemAt, 2),
        _ => return None,
    };
    Some(parse_args(v, sc).and_then(|args| {
        exactly(name, &args, arity)?;
        Ok(call(op, args))
    }))
}

impl PositionalOp for Op {
    fn eval(self, args: &[Node], env: Env<'_>) -> Result<Value, CommandError> {
        let arg = |i: usize| arg(args, i, env);
        match self {
            Op::In => {
                let (x, arr) = (arg(0)?, arg(1)?);
                let Some(RawBsonRef::Array(a)) = r(&arr) else {
                    return Err(loc(
                        40081,
                        format!(
                            "$in requires an array as a second argument, found: {}",
                            tname(r(&arr))
                        ),
                    ));
                };
                let x = r(&x);
                Ok(boolean(
                    a.into_iter()
                        .map_while(Result::ok)
                        .any(|e| agg_compare(Some(e), x).is_eq()),
                ))
            }
            Op::Size => {
                let v = arg(0)?;
                let Some(RawBsonRef::Array(a)) = r(&v) else {
                    return Err(loc(
                        17124,
                        format!(
                            "The argument to $size must be an array. Type of argument: {}",
                            tname(r(&v))
                        ),
                    ));
                };
                let n = a.into_iter().count();
                Ok(Some(RawBson::Int32(i32::try_from(n).unwrap_or(i32::MAX))))
            }
            Op::ArrayElemAt => array_elem_at(r(&arg(0)?), r(&arg(1)?)),
        }
    }
}

fn array_elem_at(
    arr: Option<RawBsonRef<'_>>,
    idx: Option<RawBsonRef<'_>>,
) -> Result<Value, CommandError> {
    if nullish(arr) || nullish(idx) {
        return Ok(Some(RawBson::Null));
    }
    let Some(RawBsonRef::Array(a)) = arr else {
        return Err(loc(
            28689,
            format!(
                "$arrayElemAt's first argument must be an array, but is {}",
                tname(arr)
            ),
        ));
    };
    if !is_number(idx) {
        return Err(loc(
            28690,
            format!(
                "$arrayElemAt's second argument must be a numeric value, but is {}",
                tname(idx)
            ),
        ));
    }
    let Some(i) = idx.and_then(integral_i32) else {
        let d = idx
            .and_then(crate::query::compare::number_as_f64)
            .unwrap_or(f64::NAN);
        return Err(loc(
            28691,
            format!(
                "$arrayElemAt's second argument must be representable as a 32-bit integer: {}",
                format_g6(d)
            ),
        ));
    };
    let items: Vec<RawBsonRef<'_>> = a.into_iter().map_while(Result::ok).collect();
    let len = i64::try_from(items.len()).unwrap_or(i64::MAX);
    let i = i64::from(i);
    let pos = if i < 0 { len + i } else { i };
    Ok(usize::try_from(pos)
        .ok()
        .and_then(|p| items.get(p))
        .map(|v| RawBson::from(*v)))
}
