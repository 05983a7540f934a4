//! String operators: `$concat $toLower $toUpper $strLenCP $substrCP`.

use bson::{RawBson, RawBsonRef};

use super::{
    CommandError, Env, Node, PositionalOp, Scope, Value, arg, call, coerce_to_string, display,
    eval, exactly, integral_i32, is_number, loc, nullish, parse_args, r, tname,
};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Concat,
    ToLower,
    ToUpper,
    StrLenCp,
    SubstrCp,
}

pub(super) fn parse_op(
    name: &str,
    v: RawBsonRef<'_>,
    sc: &mut Scope<'_>,
) -> Option<Result<Node, CommandError>> {
    let (op, arity) = match name {
        "concat" => (Op::Concat, None),
        "toLower" => (Op::ToLower, Some(1)),
        "toUpper" => (Op::ToUpper, Some(1)),
        "strLenCP" => (Op::StrLenCp, Some(1)),
        "substrCP" => (Op::SubstrCp, Some(3)),
        _ => return None,
    };
    Some(parse_args(v, sc).and_then(|args| {
        if let Some(n) = arity {
            exactly(name, &args, n)?;
        }
        Ok(call(op, args))
    }))
}

impl PositionalOp for Op {
    fn eval(self, args: &[Node], env: Env<'_>) -> Result<Value, CommandError> {
        let arg = |i: usize| arg(args, i, env);
        match self {
            Op::Concat => {
                let mut out = String::new();
                for a in args {
                    let v = eval(a, env)?;
                    match r(&v) {
                        v if nullish(v) => return Ok(Some(RawBson::Null)),
                        Some(RawBsonRef::String(s)) => out.push_str(s),
                        other => {
                            return Err(loc(
                                16702,
                                format!("$concat only supports strings, not {}", tname(other)),
                            ));
                        }
                    }
                }
                Ok(Some(RawBson::String(out)))
            }
            Op::ToLower | Op::ToUpper => {
                let s = coerce_to_string(r(&arg(0)?))?;
                Ok(Some(RawBson::String(if self == Op::ToLower {
                    s.to_ascii_lowercase()
                } else {
                    s.to_ascii_uppercase()
                })))
            }
            Op::StrLenCp => {
                let v = arg(0)?;
                let Some(RawBsonRef::String(s)) = r(&v) else {
                    return Err(loc(
                        34471,
                        format!(
                            "$strLenCP requires a string argument, found: {}",
                            tname(r(&v))
                        ),
                    ));
                };
                Ok(Some(RawBson::Int32(
                    i32::try_from(s.chars().count()).unwrap_or(i32::MAX),
                )))
            }
            Op::SubstrCp => substr_cp(r(&arg(0)?), r(&arg(1)?), r(&arg(2)?)),
        }
    }
}

fn substr_cp(
    s: Option<RawBsonRef<'_>>,
    start: Option<RawBsonRef<'_>>,
    len: Option<RawBsonRef<'_>>,
) -> Result<Value, CommandError> {
    let s = coerce_to_string(s)?;
    let shown = |v: Option<RawBsonRef<'_>>| v.map_or_else(|| "MISSING".to_owned(), display::value);
    if !is_number(start) {
        return Err(loc(
            34450,
            format!(
                "$substrCP: starting index must be a numeric type (is BSON type {})",
                tname(start)
            ),
        ));
    }
    let Some(start_i) = start.and_then(integral_i32) else {
        return Err(loc(
            34451,
            format!(
                "$substrCP: starting index cannot be represented as a 32-bit integral value: {}",
                shown(start)
            ),
        ));
    };
    if !is_number(len) {
        return Err(loc(
            34452,
            format!(
                "$substrCP: length must be a numeric type (is BSON type {})",
                tname(len)
            ),
        ));
    }
    let Some(len_i) = len.and_then(integral_i32) else {
        return Err(loc(
            34453,
            format!(
                "$substrCP: length cannot be represented as a 32-bit integral value: {}",
                shown(len)
            ),
        ));
    };
    if len_i < 0 {
        return Err(loc(
            34454,
            "$substrCP: length must be a nonnegative integer.",
        ));
    }
    if start_i < 0 {
        return Err(loc(
            34455,
            "$substrCP: the starting index must be nonnegative integer.",
        ));
    }
    let start_u = usize::try_from(start_i).unwrap_or(0);
    let len_u = usize::try_from(len_i).unwrap_or(0);
    Ok(Some(RawBson::String(
        s.chars().skip(start_u).take(len_u).collect(),
    )))
}
