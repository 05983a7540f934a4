//! Array operators: `$in $size $arrayElemAt $first $last $isArray $concatArrays $reverseArray
//! $slice $range $indexOfArray $arrayToObject $objectToArray $allElementsTrue $anyElementTrue`
//! (positional), and `$zip $sortArray $firstN $lastN $maxN $minN` (named arguments). Messages
//! and codes are mongod's (`expression.cpp`, `accumulator_multi.cpp`), missing-space typos
//! included.

use std::cmp::Ordering;

use bson::raw::CString;
use bson::{RawArray, RawArrayBuf, RawBson, RawBsonRef, RawDocumentBuf};

use super::{
    CommandError, Env, Node, Operator, PositionalOp, Scope, Value, agg_compare, arg, boolean, call,
    eval, exactly, format_g6, integral_i32, is_number, loc, nullish, object_fields, parse,
    parse_args, r, tname, truthy,
};
use crate::error::ErrorCode;
use crate::query::compare::number_as_f64;
use crate::query::display;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    In,
    Size,
    ArrayElemAt,
    First,
    Last,
    IsArray,
    ConcatArrays,
    ReverseArray,
    Slice,
    Range,
    IndexOfArray,
    ArrayToObject,
    ObjectToArray,
    AllElementsTrue,
    AnyElementTrue,
}

/// How many positional arguments an operator takes.
#[derive(Clone, Copy)]
enum Arity {
    Exactly(usize),
    Between(usize, usize),
    Any,
}

pub(super) fn parse_op(
    name: &str,
    v: RawBsonRef<'_>,
    sc: &mut Scope<'_>,
) -> Option<Result<Node, CommandError>> {
    use Arity::{Any, Between, Exactly};
    let (op, arity) = match name {
        "in" => (Op::In, Exactly(2)),
        "size" => (Op::Size, Exactly(1)),
        "arrayElemAt" => (Op::ArrayElemAt, Exactly(2)),
        "first" => (Op::First, Exactly(1)),
        "last" => (Op::Last, Exactly(1)),
        "isArray" => (Op::IsArray, Exactly(1)),
        "concatArrays" => (Op::ConcatArrays, Any),
        "reverseArray" => (Op::ReverseArray, Exactly(1)),
        "slice" => (Op::Slice, Between(2, 3)),
        "range" => (Op::Range, Between(2, 3)),
        "indexOfArray" => (Op::IndexOfArray, Between(2, 4)),
        "arrayToObject" => (Op::ArrayToObject, Exactly(1)),
        "objectToArray" => (Op::ObjectToArray, Exactly(1)),
        "allElementsTrue" => (Op::AllElementsTrue, Exactly(1)),
        "anyElementTrue" => (Op::AnyElementTrue, Exactly(1)),
        "zip" => return Some(parse_zip(v, sc)),
        "sortArray" => return Some(parse_sort_array(v, sc)),
        "firstN" => return Some(parse_n(NKind::First, v, sc)),
        "lastN" => return Some(parse_n(NKind::Last, v, sc)),
        "maxN" => return Some(parse_n(NKind::Max, v, sc)),
        "minN" => return Some(parse_n(NKind::Min, v, sc)),
        _ => return None,
    };
    Some(parse_args(v, sc).and_then(|args| {
        match arity {
            Exactly(n) => exactly(name, &args, n)?,
            Between(min, max) => between(name, &args, min, max)?,
            Any => {}
        }
        if op == Op::IndexOfArray {
            check_constant_index_of_array(&args)?;
        }
        Ok(call(op, args))
    }))
}

/// mongod's `ExpressionRangedArity` check.
pub(super) fn between(
    name: &str,
    args: &[Node],
    min: usize,
    max: usize,
) -> Result<(), CommandError> {
    if (min..=max).contains(&args.len()) {
        return Ok(());
    }
    Err(loc(
        28667,
        format!(
            "Expression ${name} takes at least {min} arguments, and at most {max}. {} were \
             passed in.",
            args.len()
        ),
    ))
}

/// mongod's `$indexOfArray` optimisation, run before any document: a constant first argument
/// that is not an array (nor null) is an error of its own, unless every argument is constant
/// (then the whole expression is evaluated once, with the ordinary errors).
fn check_constant_index_of_array(args: &[Node]) -> Result<(), CommandError> {
    if args.iter().all(|a| constant(a).is_some()) {
        return Ok(());
    }
    if let Some(v) = args.first().and_then(constant) {
        let v = v.as_raw_bson_ref();
        if !nullish(Some(v)) && !matches!(v, RawBsonRef::Array(_)) {
            return Err(loc(
                50809,
                format!(
                    "First operand of $indexOfArray must be an array. First argument is of \
                     type: {}",
                    tname(Some(v))
                ),
            ));
        }
    }
    Ok(())
}

/// The value of an expression that reads nothing (a constant, or an array or object of
/// constants), which mongod's optimiser folds into a constant before reading any document.
pub(super) fn constant(node: &Node) -> Option<RawBson> {
    match node {
        Node::Const(v) => Some(v.clone()),
        Node::Array(items) => {
            let mut out = RawArrayBuf::new();
            for item in items {
                // `$$REMOVE` in an array is null.
                out.push(match item {
                    Node::Missing => RawBson::Null,
                    other => constant(other)?,
                });
            }
            Some(RawBson::Array(out))
        }
        Node::Object(fields) => {
            let mut out = RawDocumentBuf::new();
            for (k, v) in fields {
                // `$$REMOVE` leaves the field out.
                if !matches!(v, Node::Missing) {
                    out.append(k, constant(v)?);
                }
            }
            Some(RawBson::Document(out))
        }
        _ => None,
    }
}

/// The elements of an array.
pub(super) fn items(a: &RawArray) -> Vec<RawBsonRef<'_>> {
    a.into_iter().map_while(Result::ok).collect()
}

/// An array value from elements, as an operator's result.
#[expect(clippy::unnecessary_wraps, reason = "an operator's result")]
pub(super) fn array_of<'a>(
    elems: impl IntoIterator<Item = RawBsonRef<'a>>,
) -> Result<Value, CommandError> {
    let mut out = RawArrayBuf::new();
    for e in elems {
        out.push(RawBson::from(e));
    }
    Ok(Some(RawBson::Array(out)))
}

/// A value as mongod's `Value::toString` prints it (doubles with 6 significant digits, arrays
/// as `[a, b]`, documents as BSON).
pub(super) fn value_string(v: Option<RawBsonRef<'_>>) -> String {
    match v {
        None => "missing".to_owned(),
        Some(RawBsonRef::Double(d)) => format_g6(d),
        Some(RawBsonRef::Decimal128(d)) => d.to_string(),
        Some(RawBsonRef::Array(a)) => {
            let parts: Vec<String> = items(a)
                .into_iter()
                .map(|e| value_string(Some(e)))
                .collect();
            format!("[{}]", parts.join(", "))
        }
        Some(other) => display::value(other),
    }
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
            Op::ArrayElemAt => array_elem_at("arrayElemAt", false, r(&arg(0)?), r(&arg(1)?)),
            Op::First => array_elem_at("first", true, r(&arg(0)?), Some(RawBsonRef::Int32(0))),
            Op::Last => array_elem_at("last", true, r(&arg(0)?), Some(RawBsonRef::Int32(-1))),
            Op::IsArray => Ok(boolean(matches!(r(&arg(0)?), Some(RawBsonRef::Array(_))))),
            Op::ConcatArrays => concat_arrays(args, env),
            Op::ReverseArray => {
                let v = arg(0)?;
                match r(&v) {
                    x if nullish(x) => Ok(Some(RawBson::Null)),
                    Some(RawBsonRef::Array(a)) => array_of(items(a).into_iter().rev()),
                    other => Err(loc(
                        34435,
                        format!(
                            "The argument to $reverseArray must be an array, but was of type: {}",
                            tname(other)
                        ),
                    )),
                }
            }
            Op::Slice => slice(args, env),
            Op::Range => range(args, env),
            Op::IndexOfArray => index_of_array(args, env),
            Op::ArrayToObject => array_to_object(r(&arg(0)?)),
            Op::ObjectToArray => object_to_array(r(&arg(0)?)),
            Op::AllElementsTrue | Op::AnyElementTrue => {
                let all = self == Op::AllElementsTrue;
                let v = arg(0)?;
                let Some(RawBsonRef::Array(a)) = r(&v) else {
                    let (code, name) = if all {
                        (17040, "$allElementsTrue")
                    } else {
                        (17041, "$anyElementTrue")
                    };
                    return Err(loc(
                        code,
                        format!(
                            "{name}'s argument must be an array, but is {}",
                            tname(r(&v))
                        ),
                    ));
                };
                let mut elems = items(a).into_iter();
                Ok(boolean(if all {
                    elems.all(|e| truthy(&Some(e.into())))
                } else {
                    elems.any(|e| truthy(&Some(e.into())))
                }))
            }
        }
    }
}

/// mongod's `arrayElemAt`, shared by `$arrayElemAt`, `$first` and `$last` (`unary`: the
/// operator takes the array alone, which its messages say).
fn array_elem_at(
    name: &str,
    unary: bool,
    arr: Option<RawBsonRef<'_>>,
    idx: Option<RawBsonRef<'_>>,
) -> Result<Value, CommandError> {
    if nullish(arr) || nullish(idx) {
        return Ok(Some(RawBson::Null));
    }
    let Some(RawBsonRef::Array(a)) = arr else {
        let which = if unary { "argument" } else { "first argument" };
        return Err(loc(
            28689,
            format!("${name}'s {which} must be an array, but is {}", tname(arr)),
        ));
    };
    if !is_number(idx) {
        return Err(loc(
            28690,
            format!(
                "${name}'s second argument must be a numeric value, but is {}",
                tname(idx)
            ),
        ));
    }
    let Some(i) = idx.and_then(integral_i32) else {
        let d = idx.and_then(number_as_f64).unwrap_or(f64::NAN);
        return Err(loc(
            28691,
            format!(
                "${name}'s second argument must be representable as a 32-bit integer: {}",
                format_g6(d)
            ),
        ));
    };
    let items = items(a);
    let len = i64::try_from(items.len()).unwrap_or(i64::MAX);
    let i = i64::from(i);
    let pos = if i < 0 { len + i } else { i };
    Ok(usize::try_from(pos)
        .ok()
        .and_then(|p| items.get(p))
        .map(|v| RawBson::from(*v)))
}

fn concat_arrays(args: &[Node], env: Env<'_>) -> Result<Value, CommandError> {
    let mut out = RawArrayBuf::new();
    for a in args {
        let v = eval(a, env)?;
        match r(&v) {
            x if nullish(x) => return Ok(Some(RawBson::Null)),
            Some(RawBsonRef::Array(a)) => {
                for e in items(a) {
                    out.push(RawBson::from(e));
                }
            }
            other => {
                return Err(loc(
                    28664,
                    format!("$concatArrays only supports arrays, not {}", tname(other)),
                ));
            }
        }
    }
    Ok(Some(RawBson::Array(out)))
}

/// `{$slice: [array, n]}` or `{$slice: [array, position, n]}`.
fn slice(args: &[Node], env: Env<'_>) -> Result<Value, CommandError> {
    let (arr, second) = (arg(args, 0, env)?, arg(args, 1, env)?);
    let (arr, second) = (r(&arr), r(&second));
    if nullish(arr) || nullish(second) {
        return Ok(Some(RawBson::Null));
    }
    let Some(RawBsonRef::Array(a)) = arr else {
        return Err(loc(
            28724,
            format!(
                "First argument to $slice must be an array, but is of type: {}",
                tname(arr)
            ),
        ));
    };
    if !is_number(second) {
        return Err(loc(
            28725,
            format!(
                "Second argument to $slice must be a numeric value, but is of type: {}",
                tname(second)
            ),
        ));
    }
    let Some(second) = second.and_then(integral_i32) else {
        return Err(loc(
            28726,
            format!(
                "Second argument to $slice can't be represented as a 32-bit integer: {}",
                format_g6(second.and_then(number_as_f64).unwrap_or(f64::NAN))
            ),
        ));
    };
    let elems = items(a);
    let len = i64::try_from(elems.len()).unwrap_or(i64::MAX);
    let (start, end) = if args.len() == 2 {
        let count = i64::from(second);
        if count >= 0 {
            (0, count.min(len))
        } else {
            ((len + count).max(0), len)
        }
    } else {
        let start = i64::from(second);
        let start = if start < 0 {
            (len + start).max(0)
        } else {
            start.min(len)
        };
        let count = arg(args, 2, env)?;
        let count = r(&count);
        if nullish(count) {
            return Ok(Some(RawBson::Null));
        }
        if !is_number(count) {
            return Err(loc(
                28727,
                format!(
                    "Third argument to $slice must be numeric, but is of type: {}",
                    tname(count)
                ),
            ));
        }
        let Some(count) = count.and_then(integral_i32) else {
            return Err(loc(
                28728,
                format!(
                    "Third argument to $slice can't be represented as a 32-bit integer: {}",
                    format_g6(count.and_then(number_as_f64).unwrap_or(f64::NAN))
                ),
            ));
        };
        if count <= 0 {
            return Err(loc(
                28729,
                format!("Third argument to $slice must be positive: {count}"),
            ));
        }
        (start, (start + i64::from(count)).min(len))
    };
    let (start, end) = (
        usize::try_from(start).unwrap_or(0),
        usize::try_from(end).unwrap_or(0),
    );
    array_of(elems.get(start..end).unwrap_or_default().iter().copied())
}

/// mongod's `internalQueryMaxRangeBytes` default: what `$range` may allocate.
const MAX_RANGE_BYTES: i64 = 100 * 1024 * 1024;
/// mongod's estimate of one element of `$range`'s output (`sizeof(Value)`), and of the vector.
const RANGE_VALUE_BYTES: i64 = 16;
const RANGE_VECTOR_BYTES: i64 = 24;

/// `{$range: [start, end, step?]}`: 32-bit integers, `step` non-zero.
fn range(args: &[Node], env: Env<'_>) -> Result<Value, CommandError> {
    let (start, end) = (arg(args, 0, env)?, arg(args, 1, env)?);
    let (start, end) = (r(&start), r(&end));
    let start = range_bound(start, "a numeric starting value", "a starting value", 34443)?;
    let end = range_bound(end, "a numeric ending value", "an ending value", 34445)?;
    let mut step = 1_i64;
    if args.len() == 3 {
        let s = arg(args, 2, env)?;
        let s = r(&s);
        if !is_number(s) {
            return Err(loc(
                34447,
                format!(
                    "$range requires a numeric step value, found value of type:{}",
                    tname(s)
                ),
            ));
        }
        let Some(s) = s.and_then(integral_i32) else {
            return Err(loc(
                34448,
                format!(
                    "$range requires a step value that can be represented as a 32-bit integer, \
                     found value: {}",
                    value_string(s)
                ),
            ));
        };
        if s == 0 {
            return Err(loc(34449, "$range requires a non-zero step value"));
        }
        step = i64::from(s);
    }
    let (mut current, end) = (i64::from(start), i64::from(end));
    let steps = (end - current) / step;
    let length = if steps >= 0 { 1 + steps } else { 0 };
    let needed = RANGE_VECTOR_BYTES + length * RANGE_VALUE_BYTES;
    if needed >= MAX_RANGE_BYTES {
        return Err(CommandError::new(
            ErrorCode::ExceededMemoryLimit,
            format!(
                "$range would use too much memory ({needed} bytes) and cannot spill to disk. \
                 Memory limit: {MAX_RANGE_BYTES} bytes"
            ),
        ));
    }
    let mut out = RawArrayBuf::new();
    while if step > 0 {
        current < end
    } else {
        current > end
    } {
        // Between two 32-bit bounds, so a 32-bit value.
        out.push(RawBson::Int32(i32::try_from(current).unwrap_or_default()));
        current += step;
    }
    Ok(Some(RawBson::Array(out)))
}

/// A `$range` start or end: a number that is an exact 32-bit integer.
fn range_bound(
    v: Option<RawBsonRef<'_>>,
    numeric: &str,
    representable: &str,
    code: i32,
) -> Result<i32, CommandError> {
    if !is_number(v) {
        return Err(loc(
            code,
            format!(
                "$range requires {numeric}, found value of type: {}",
                tname(v)
            ),
        ));
    }
    v.and_then(integral_i32).ok_or_else(|| {
        loc(
            code + 1,
            format!(
                "$range requires {representable} that can be represented as a 32-bit integer, \
                 found value: {}",
                value_string(v)
            ),
        )
    })
}

/// `{$indexOfArray: [array, value, start?, end?]}`.
fn index_of_array(args: &[Node], env: Env<'_>) -> Result<Value, CommandError> {
    let arr = arg(args, 0, env)?;
    let a = match r(&arr) {
        x if nullish(x) => return Ok(Some(RawBson::Null)),
        Some(RawBsonRef::Array(a)) => a,
        other => {
            return Err(loc(
                40090,
                format!(
                    "$indexOfArray requires an array as a first argument, found: {}",
                    tname(other)
                ),
            ));
        }
    };
    let elems = items(a);
    let mut start = 0;
    let mut end = elems.len();
    if args.len() > 2 {
        start = index_bound(r(&arg(args, 2, env)?), "starting index")?;
    }
    if args.len() > 3 {
        end = end.min(index_bound(r(&arg(args, 3, env)?), "ending index")?);
    }
    let target = arg(args, 1, env)?;
    let found = elems
        .get(start..end)
        .unwrap_or_default()
        .iter()
        .position(|e| agg_compare(Some(*e), r(&target)).is_eq())
        .map_or(-1, |i| i32::try_from(i + start).unwrap_or(i32::MAX));
    Ok(Some(RawBson::Int32(found)))
}

/// mongod's `uassertIfNotIntegralAndNonNegative` (its message lacks a space after the name).
fn index_bound(v: Option<RawBsonRef<'_>>, what: &str) -> Result<usize, CommandError> {
    let Some(i) = v.and_then(integral_i32) else {
        return Err(loc(
            40096,
            format!(
                "$indexOfArrayrequires an integral {what}, found a value of type: {}, with \
                 value: {}",
                tname(v),
                value_string(v)
            ),
        ));
    };
    usize::try_from(i).map_err(|_| {
        loc(
            40097,
            format!(
                "$indexOfArray requires a nonnegative {what}, found: {}",
                value_string(v)
            ),
        )
    })
}

/// An ordered document under construction where a repeated name overwrites the earlier value
/// in place (mongod's `MutableDocument` `setField`).
#[derive(Default)]
pub(super) struct FieldList {
    fields: Vec<(String, RawBson)>,
}

impl FieldList {
    pub(super) fn set(&mut self, name: &str, value: RawBson) {
        if let Some(slot) = self.fields.iter_mut().find(|(n, _)| n == name) {
            slot.1 = value;
        } else {
            self.fields.push((name.to_owned(), value));
        }
    }

    /// The document; `code` is mongod's error for a name holding a NUL byte.
    pub(super) fn into_document(self, code: i32) -> Result<RawDocumentBuf, CommandError> {
        let mut out = RawDocumentBuf::new();
        for (name, value) in self.fields {
            let name = CString::try_from(name)
                .map_err(|_| loc(code, "Key field cannot contain an embedded null byte"))?;
            out.append(name, value);
        }
        Ok(out)
    }
}

/// `$arrayToObject`: `[[k, v], …]` or `[{k, v}, …]`, the first element choosing the format.
fn array_to_object(input: Option<RawBsonRef<'_>>) -> Result<Value, CommandError> {
    if nullish(input) {
        return Ok(Some(RawBson::Null));
    }
    let Some(RawBsonRef::Array(a)) = input else {
        return Err(loc(
            40386,
            format!(
                "$arrayToObject requires an array input, found: {}",
                tname(input)
            ),
        ));
    };
    let elems = items(a);
    let pairs = match elems.first() {
        None => return Ok(Some(RawBson::Document(RawDocumentBuf::new()))),
        Some(RawBsonRef::Array(_)) => true,
        Some(RawBsonRef::Document(_)) => false,
        Some(other) => {
            return Err(loc(
                40398,
                format!(
                    "Unrecognised input type format for $arrayToObject: {}",
                    tname(Some(*other))
                ),
            ));
        }
    };
    let mut out = FieldList::default();
    let mut nul_code = 4_940_400;
    for elem in elems {
        let (key, value) = if pairs {
            let RawBsonRef::Array(kv) = elem else {
                return Err(loc(
                    40396,
                    format!(
                        "$arrayToObject requires a consistent input format. Elements mustall be \
                         arrays or all be objects. Array was detected, now found: {}",
                        tname(Some(elem))
                    ),
                ));
            };
            let kv = items(kv);
            let [k, v] = kv.as_slice() else {
                return Err(loc(
                    40397,
                    format!(
                        "$arrayToObject requires an array of size 2 arrays,found array of size: {}",
                        kv.len()
                    ),
                ));
            };
            let RawBsonRef::String(k) = k else {
                return Err(loc(
                    40395,
                    format!(
                        "$arrayToObject requires an array of key-value pairs, where the key must \
                         be of type string. Found key type: {}",
                        tname(Some(*k))
                    ),
                ));
            };
            (*k, *v)
        } else {
            nul_code = 4_940_401;
            let RawBsonRef::Document(d) = elem else {
                return Err(loc(
                    40391,
                    format!(
                        "$arrayToObject requires a consistent input format. Elements mustall be \
                         arrays or all be objects. Object was detected, now found: {}",
                        tname(Some(elem))
                    ),
                ));
            };
            let fields = object_fields(d)?;
            if fields.len() != 2 {
                return Err(loc(
                    40392,
                    format!(
                        "$arrayToObject requires an object keys of 'k' and 'v'. Found incorrect \
                         number of keys:{}",
                        fields.len()
                    ),
                ));
            }
            let get = |name: &str| fields.iter().find(|(n, _)| *n == name).map(|(_, v)| *v);
            let (Some(k), Some(v)) = (get("k"), get("v")) else {
                return Err(loc(
                    40393,
                    format!(
                        "$arrayToObject requires an object with keys 'k' and 'v'. Missing either \
                         or both keys from: {}",
                        value_string(Some(elem))
                    ),
                ));
            };
            let RawBsonRef::String(k) = k else {
                return Err(loc(
                    40394,
                    format!(
                        "$arrayToObject requires an object with keys 'k' and 'v', where the value \
                         of 'k' must be of type string. Found type: {}",
                        tname(Some(k))
                    ),
                ));
            };
            (k, v)
        };
        if key.contains('\0') {
            return Err(loc(
                nul_code,
                "Key field cannot contain an embedded null byte",
            ));
        }
        out.set(key, value.into());
    }
    Ok(Some(RawBson::Document(out.into_document(nul_code)?)))
}

/// `$objectToArray`: `[{k: name, v: value}, …]` in field order.
fn object_to_array(input: Option<RawBsonRef<'_>>) -> Result<Value, CommandError> {
    if nullish(input) {
        return Ok(Some(RawBson::Null));
    }
    let Some(RawBsonRef::Document(d)) = input else {
        return Err(loc(
            40390,
            format!(
                "$objectToArray requires a document input, found: {}",
                tname(input)
            ),
        ));
    };
    let mut out = RawArrayBuf::new();
    for (k, v) in object_fields(d)? {
        let mut pair = RawDocumentBuf::new();
        pair.append(bson::raw::cstr!("k"), k);
        pair.append(bson::raw::cstr!("v"), RawBson::from(v));
        out.push(pair);
    }
    Ok(Some(RawBson::Array(out)))
}

// ---- $zip ----

/// `{$zip: {inputs: [...], useLongestLength?, defaults?}}`.
#[derive(Debug)]
struct Zip {
    inputs: Vec<Node>,
    defaults: Vec<Node>,
    longest: bool,
}

fn parse_zip(v: RawBsonRef<'_>, sc: &mut Scope<'_>) -> Result<Node, CommandError> {
    let RawBsonRef::Document(d) = v else {
        return Err(loc(
            34460,
            format!(
                "$zip only supports an object as an argument, found {}",
                tname(Some(v))
            ),
        ));
    };
    let mut zip = Zip {
        inputs: Vec::new(),
        defaults: Vec::new(),
        longest: false,
    };
    for (k, v) in object_fields(d)? {
        match k {
            "inputs" | "defaults" => {
                let RawBsonRef::Array(a) = v else {
                    let (code, what) = if k == "inputs" {
                        (34461, "inputs")
                    } else {
                        (34462, "defaults")
                    };
                    return Err(loc(
                        code,
                        format!(
                            "{what} must be an array of expressions, found {}",
                            tname(Some(v))
                        ),
                    ));
                };
                let mut nodes = Vec::new();
                for e in items(a) {
                    nodes.push(parse(e, sc)?);
                }
                if k == "inputs" {
                    zip.inputs.extend(nodes);
                } else {
                    zip.defaults.extend(nodes);
                }
            }
            "useLongestLength" => {
                let RawBsonRef::Boolean(b) = v else {
                    // mongod names the type of the whole argument, always an object.
                    return Err(loc(34463, "useLongestLength must be a bool, found object"));
                };
                zip.longest = b;
            }
            other => {
                return Err(loc(
                    34464,
                    format!("$zip found an unknown argument: {other}"),
                ));
            }
        }
    }
    if zip.inputs.is_empty() {
        return Err(loc(34465, "$zip requires at least one input array"));
    }
    if !zip.longest && !zip.defaults.is_empty() {
        return Err(loc(
            34466,
            "cannot specify defaults unless useLongestLength is true",
        ));
    }
    if !zip.defaults.is_empty() && zip.defaults.len() != zip.inputs.len() {
        return Err(loc(34467, "defaults and inputs must have the same length"));
    }
    Ok(Node::op(zip))
}

impl Operator for Zip {
    fn eval(&self, env: Env<'_>) -> Result<Value, CommandError> {
        let mut arrays: Vec<Vec<RawBson>> = Vec::with_capacity(self.inputs.len());
        for input in &self.inputs {
            let v = eval(input, env)?;
            match r(&v) {
                x if nullish(x) => return Ok(Some(RawBson::Null)),
                Some(RawBsonRef::Array(a)) => {
                    arrays.push(items(a).into_iter().map(RawBson::from).collect());
                }
                other => {
                    return Err(loc(
                        34468,
                        format!(
                            "$zip found a non-array expression in input: {}",
                            value_string(other)
                        ),
                    ));
                }
            }
        }
        let min = arrays.iter().map(Vec::len).min().unwrap_or(0);
        let max = arrays.iter().map(Vec::len).max().unwrap_or(0);
        let mut defaults = vec![RawBson::Null; arrays.len()];
        if min != max {
            for (slot, d) in defaults.iter_mut().zip(&self.defaults) {
                *slot = eval(d, env)?.unwrap_or(RawBson::Null);
            }
        }
        let len = if self.longest { max } else { min };
        let mut out = RawArrayBuf::new();
        for i in 0..len {
            let mut row = RawArrayBuf::new();
            for (array, default) in arrays.iter().zip(&defaults) {
                row.push(array.get(i).unwrap_or(default).clone());
            }
            out.push(row);
        }
        Ok(Some(RawBson::Array(out)))
    }

    fn args(&self) -> Vec<&Node> {
        self.inputs.iter().chain(&self.defaults).collect()
    }
}

// ---- $sortArray ----

/// How `$sortArray` orders: whole values, or documents by fields (dotted paths), each with its
/// direction.
#[derive(Debug)]
enum SortBy {
    Whole(Ordering),
    Fields(Vec<(Vec<String>, Ordering)>),
}

#[derive(Debug)]
struct SortArray {
    input: Node,
    by: SortBy,
}

fn parse_sort_array(v: RawBsonRef<'_>, sc: &mut Scope<'_>) -> Result<Node, CommandError> {
    let RawBsonRef::Document(d) = v else {
        return Err(loc(
            2_942_500,
            format!(
                "$sortArray requires an object as an argument, found: {}",
                tname(Some(v))
            ),
        ));
    };
    let (mut input, mut by) = (None, None);
    for (k, v) in object_fields(d)? {
        match k {
            "input" => input = Some(parse(v, sc)?),
            "sortBy" => by = Some(parse_sort_by(v)?),
            other => {
                return Err(loc(
                    2_942_501,
                    format!("$sortArray found an unknown argument: {other}"),
                ));
            }
        }
    }
    let input =
        input.ok_or_else(|| loc(2_942_502, "$sortArray requires 'input' to be specified"))?;
    let by = by.ok_or_else(|| loc(2_942_503, "$sortArray requires 'sortBy' to be specified"))?;
    Ok(Node::op(SortArray { input, by }))
}

/// A direction that must be exactly 1 or -1 (any numeric type).
fn direction(v: RawBsonRef<'_>) -> Option<Ordering> {
    let d = number_as_f64(v)?;
    match d {
        1.0 => Some(Ordering::Less),
        -1.0 => Some(Ordering::Greater),
        _ => None,
    }
}

/// mongod's `createSortSpecObject`: `1`/`-1`, or a non-empty `{path: 1/-1, …}`
/// (`pattern_cmp::checkSortClause`, whose status mongod reports with its code name).
fn parse_sort_by(v: RawBsonRef<'_>) -> Result<SortBy, CommandError> {
    let bad = |why: String| loc(2_942_505, format!("BadValue: {why}"));
    match v {
        RawBsonRef::Document(d) => {
            let fields = object_fields(d)?;
            if fields.is_empty() {
                return Err(bad(
                    "The sort pattern is empty when it should be a set of fields.".to_owned(),
                ));
            }
            let mut out = Vec::new();
            for (name, dir) in fields {
                let Some(dir) = direction(dir) else {
                    return Err(bad(
                        "The sort element value must be either 1 or -1".to_owned()
                    ));
                };
                if name.is_empty() {
                    return Err(bad("The sort field cannot be empty".to_owned()));
                }
                let parts: Vec<String> = name.split('.').map(str::to_owned).collect();
                if parts.iter().any(String::is_empty) {
                    return Err(bad(format!(
                        "The sort field is a dotted field but has an empty part: {name}"
                    )));
                }
                out.push((parts, dir));
            }
            Ok(SortBy::Fields(out))
        }
        v if is_number(Some(v)) => direction(v)
            .map(SortBy::Whole)
            .ok_or_else(|| loc(2_942_506, "The $sort element value must be either 1 or -1")),
        _ => Err(loc(
            2_942_507,
            "The $sort is invalid: use 1/-1 to sort the whole element, or {field:1/-1} to sort \
             embedded fields",
        )),
    }
}

/// The value at a dotted path as mongod's `getFieldDotted` reads it for a sort key: arrays are
/// entered by position only, nothing found is null.
fn sort_key<'a>(v: RawBsonRef<'a>, path: &[String]) -> RawBsonRef<'a> {
    let mut cur = v;
    for part in path {
        let next = match cur {
            RawBsonRef::Document(d) => d.get(part).ok().flatten(),
            RawBsonRef::Array(a) => part
                .parse::<usize>()
                .ok()
                .filter(|i| i.to_string() == *part)
                .and_then(|i| items(a).get(i).copied()),
            _ => None,
        };
        match next {
            Some(n) => cur = n,
            None => return RawBsonRef::Null,
        }
    }
    cur
}

impl Operator for SortArray {
    fn eval(&self, env: Env<'_>) -> Result<Value, CommandError> {
        let input = eval(&self.input, env)?;
        let a = match r(&input) {
            x if nullish(x) => return Ok(Some(RawBson::Null)),
            Some(RawBsonRef::Array(a)) => a,
            other => {
                return Err(loc(
                    2_942_504,
                    format!(
                        "The input argument to $sortArray must be an array, but was of type: {}",
                        tname(other)
                    ),
                ));
            }
        };
        let mut elems = items(a);
        match &self.by {
            SortBy::Whole(dir) => {
                elems.sort_by(|x, y| {
                    let o = agg_compare(Some(*x), Some(*y));
                    if *dir == Ordering::Less {
                        o
                    } else {
                        o.reverse()
                    }
                });
            }
            SortBy::Fields(fields) => elems.sort_by(|x, y| {
                for (path, dir) in fields {
                    // A value that is not a document has no fields: every key is null.
                    let key = |v: RawBsonRef<'_>| match v {
                        RawBsonRef::Document(_) => sort_key(v, path).into(),
                        _ => RawBson::Null,
                    };
                    let (kx, ky) = (key(*x), key(*y));
                    let o = agg_compare(Some(kx.as_raw_bson_ref()), Some(ky.as_raw_bson_ref()));
                    let o = if *dir == Ordering::Less {
                        o
                    } else {
                        o.reverse()
                    };
                    if o.is_ne() {
                        return o;
                    }
                }
                Ordering::Equal
            }),
        }
        array_of(elems)
    }

    fn args(&self) -> Vec<&Node> {
        vec![&self.input]
    }
}

// ---- $firstN $lastN $maxN $minN ----

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum NKind {
    First,
    Last,
    Max,
    Min,
}

impl NKind {
    fn name(self) -> &'static str {
        match self {
            NKind::First => "$firstN",
            NKind::Last => "$lastN",
            NKind::Max => "$maxN",
            NKind::Min => "$minN",
        }
    }
}

/// `{$firstN: {n, input}}` and its siblings (mongod's `ExpressionFromAccumulatorN`).
#[derive(Debug)]
struct TakeN {
    kind: NKind,
    n: Node,
    input: Node,
}

fn parse_n(kind: NKind, v: RawBsonRef<'_>, sc: &mut Scope<'_>) -> Result<Node, CommandError> {
    let RawBsonRef::Document(d) = v else {
        let code = if matches!(kind, NKind::First | NKind::Last) {
            5_787_801
        } else {
            5_787_900
        };
        return Err(loc(
            code,
            format!(
                "specification must be an object; found {}",
                display::element(kind.name(), v)
            ),
        ));
    };
    let (mut n, mut input) = (None, None);
    for (k, v) in object_fields(d)? {
        match k {
            "input" => input = Some(parse(v, sc)?),
            "n" => n = Some(parse(v, sc)?),
            other => {
                return Err(loc(
                    5_787_901,
                    format!("Unknown argument for 'n' operator: {other}"),
                ));
            }
        }
    }
    let n = n.ok_or_else(|| loc(5_787_906, "Missing value for 'n'"))?;
    let input = input.ok_or_else(|| loc(5_787_907, "Missing value for 'input'"))?;
    Ok(Node::op(TakeN { kind, n, input }))
}

/// mongod's `AccumulatorN::validateN`: a positive number with an integral value.
fn validate_n(v: Option<RawBsonRef<'_>>) -> Result<usize, CommandError> {
    let not_integral = |code| {
        loc(
            code,
            format!(
                "Value for 'n' must be of integral type, but found {}",
                value_string(v)
            ),
        )
    };
    let n = match v {
        Some(RawBsonRef::Int32(i)) => i64::from(i),
        Some(RawBsonRef::Int64(i)) => i,
        Some(x @ (RawBsonRef::Double(_) | RawBsonRef::Decimal128(_))) => {
            let d = number_as_f64(x).unwrap_or(f64::NAN);
            if d.is_nan() || d.fract() != 0.0 {
                return Err(not_integral(5_787_903));
            }
            #[expect(clippy::cast_possible_truncation, reason = "saturating, as mongod's")]
            let n = d as i64;
            n
        }
        _ => return Err(not_integral(5_787_902)),
    };
    if n <= 0 {
        return Err(loc(
            5_787_908,
            format!("'n' must be greater than 0, found {n}"),
        ));
    }
    Ok(usize::try_from(n).unwrap_or(usize::MAX))
}

/// The `n` largest (`max`) or smallest non-null elements, as mongod's `AccumulatorMinMaxN`
/// keeps them: an ordered multiset (equal elements in arrival order) that, once full, admits an
/// element only if it beats the worst kept one; largest first for `max`, smallest first for
/// `min`.
fn min_max_n(max: bool, n: usize, elems: Vec<RawBsonRef<'_>>) -> Vec<RawBsonRef<'_>> {
    let cmp = |a: RawBsonRef<'_>, b: RawBsonRef<'_>| agg_compare(Some(a), Some(b));
    let mut kept: Vec<RawBsonRef<'_>> = Vec::new();
    for e in elems.into_iter().filter(|e| !nullish(Some(*e))) {
        if kept.len() >= n {
            let beats_worst = if max {
                kept.first().is_some_and(|w| cmp(*w, e).is_lt())
            } else {
                kept.last().is_some_and(|w| cmp(*w, e).is_gt())
            };
            if !beats_worst {
                continue;
            }
            if max {
                kept.remove(0);
            } else {
                kept.pop();
            }
        }
        let at = kept.partition_point(|k| cmp(*k, e).is_le());
        kept.insert(at, e);
    }
    if max {
        kept.reverse();
    }
    kept
}

impl Operator for TakeN {
    fn eval(&self, env: Env<'_>) -> Result<Value, CommandError> {
        let n = validate_n(r(&eval(&self.n, env)?))?;
        let input = eval(&self.input, env)?;
        let Some(RawBsonRef::Array(a)) = r(&input) else {
            return Err(loc(5_788_200, "Input must be an array"));
        };
        let mut elems = items(a);
        match self.kind {
            NKind::First => elems.truncate(n),
            NKind::Last => {
                let skip = elems.len().saturating_sub(n);
                elems.drain(..skip);
            }
            NKind::Max | NKind::Min => {
                return array_of(min_max_n(self.kind == NKind::Max, n, elems));
            }
        }
        array_of(elems)
    }

    fn args(&self) -> Vec<&Node> {
        vec![&self.n, &self.input]
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
    fn positional_operators() {
        check(vec![
            (rawbson!({"$first": "$a"}), Some(rawbson!(1))),
            (rawbson!({"$last": "$a"}), Some(rawbson!(3))),
            (rawbson!({"$first": [[]]}), None),
            (rawbson!({"$first": "$missing"}), Some(RawBson::Null)),
            (rawbson!({"$isArray": "$a"}), Some(rawbson!(true))),
            (rawbson!({"$isArray": ["$s"]}), Some(rawbson!(false))),
            (rawbson!({"$isArray": "$missing"}), Some(rawbson!(false))),
            (
                rawbson!({"$concatArrays": ["$a", [4], []]}),
                Some(rawbson!([1, 2, 3, 4])),
            ),
            (
                rawbson!({"$concatArrays": ["$a", "$missing"]}),
                Some(RawBson::Null),
            ),
            (rawbson!({"$concatArrays": []}), Some(rawbson!([]))),
            (rawbson!({"$reverseArray": "$a"}), Some(rawbson!([3, 2, 1]))),
            (rawbson!({"$reverseArray": "$n"}), Some(RawBson::Null)),
            (
                rawbson!({"$slice": [[1, 2, 3, 4], 2]}),
                Some(rawbson!([1, 2])),
            ),
            (
                rawbson!({"$slice": [[1, 2, 3, 4], -2]}),
                Some(rawbson!([3, 4])),
            ),
            (
                rawbson!({"$slice": [[1, 2, 3, 4], -10]}),
                Some(rawbson!([1, 2, 3, 4])),
            ),
            (
                rawbson!({"$slice": [[1, 2, 3, 4], 1, 2]}),
                Some(rawbson!([2, 3])),
            ),
            (
                rawbson!({"$slice": [[1, 2, 3, 4], -3, 2]}),
                Some(rawbson!([2, 3])),
            ),
            (
                rawbson!({"$slice": [[1, 2, 3, 4], 10, 2]}),
                Some(rawbson!([])),
            ),
            (
                rawbson!({"$slice": [[1, 2, 3, 4], -10, 2]}),
                Some(rawbson!([1, 2])),
            ),
            (rawbson!({"$slice": ["$a", "$n"]}), Some(RawBson::Null)),
            (rawbson!({"$slice": ["$a", 0, null]}), Some(RawBson::Null)),
            (
                rawbson!({"$range": [0, 5]}),
                Some(rawbson!([0, 1, 2, 3, 4])),
            ),
            (
                rawbson!({"$range": [0, 10, 3]}),
                Some(rawbson!([0, 3, 6, 9])),
            ),
            (rawbson!({"$range": [5, 0, -2]}), Some(rawbson!([5, 3, 1]))),
            (rawbson!({"$range": [5, 0]}), Some(rawbson!([]))),
            (rawbson!({"$range": [0, 3.0]}), Some(rawbson!([0, 1, 2]))),
            (
                rawbson!({"$indexOfArray": [["a", "b", "a"], "a"]}),
                Some(rawbson!(0)),
            ),
            (
                rawbson!({"$indexOfArray": [["a", "b", "a"], "a", 1]}),
                Some(rawbson!(2)),
            ),
            (
                rawbson!({"$indexOfArray": [["a", "b", "a"], "a", 1, 2]}),
                Some(rawbson!(-1)),
            ),
            (
                rawbson!({"$indexOfArray": [[1, 2], 2.0]}),
                Some(rawbson!(1)),
            ),
            (
                rawbson!({"$indexOfArray": [[1, 2, 3], 2, 5]}),
                Some(rawbson!(-1)),
            ),
            (rawbson!({"$indexOfArray": ["$n", 1]}), Some(RawBson::Null)),
            (
                rawbson!({"$arrayToObject": [[["a", 1], ["b", 2], ["a", 3]]]}),
                Some(rawbson!({"a": 3, "b": 2})),
            ),
            (
                rawbson!({"$arrayToObject": [[{"k": "a", "v": 1}, {"v": 2, "k": "b.c"}]]}),
                Some(rawbson!({"a": 1, "b.c": 2})),
            ),
            (rawbson!({"$arrayToObject": [[]]}), Some(rawbson!({}))),
            (rawbson!({"$arrayToObject": "$n"}), Some(RawBson::Null)),
            (
                rawbson!({"$objectToArray": "$d"}),
                Some(rawbson!([{"k": "k", "v": 1}, {"k": "l", "v": "m"}])),
            ),
            (
                rawbson!({"$objectToArray": "$missing"}),
                Some(RawBson::Null),
            ),
            (
                rawbson!({"$arrayToObject": {"$objectToArray": "$d"}}),
                Some(rawbson!({"k": 1, "l": "m"})),
            ),
            (
                rawbson!({"$allElementsTrue": [[1, true]]}),
                Some(rawbson!(true)),
            ),
            (
                rawbson!({"$allElementsTrue": [[1, 0]]}),
                Some(rawbson!(false)),
            ),
            (rawbson!({"$allElementsTrue": [[]]}), Some(rawbson!(true))),
            (
                rawbson!({"$anyElementTrue": [[0, null, false]]}),
                Some(rawbson!(false)),
            ),
            (
                rawbson!({"$anyElementTrue": [[0, []]]}),
                Some(rawbson!(true)),
            ),
            (rawbson!({"$anyElementTrue": [[]]}), Some(rawbson!(false))),
        ]);
    }

    #[test]
    fn named_operators() {
        check(vec![
            (
                rawbson!({"$zip": {"inputs": [[1, 2], [3]]}}),
                Some(rawbson!([[1, 3]])),
            ),
            (
                rawbson!({"$zip": {"inputs": [[1, 2], [3]], "useLongestLength": true}}),
                Some(rawbson!([[1, 3], [2, null]])),
            ),
            (
                rawbson!({"$zip": {"inputs": [[1, 2], [3]], "useLongestLength": true, "defaults": [0, 9]}}),
                Some(rawbson!([[1, 3], [2, 9]])),
            ),
            (
                rawbson!({"$zip": {"inputs": ["$a", "$missing"]}}),
                Some(RawBson::Null),
            ),
            (
                rawbson!({"$sortArray": {"input": [3, 1, 2], "sortBy": 1}}),
                Some(rawbson!([1, 2, 3])),
            ),
            (
                rawbson!({"$sortArray": {"input": [3, "a", 1.5], "sortBy": -1}}),
                Some(rawbson!(["a", 3, 1.5])),
            ),
            (
                rawbson!({"$sortArray": {"input": "$docs", "sortBy": {"x": 1}}}),
                Some(rawbson!([{"x": 1, "y": "a"}, {"x": 2, "y": "b"}, {"x": 3}])),
            ),
            (
                rawbson!({"$sortArray": {"input": "$docs", "sortBy": {"y": -1}}}),
                Some(rawbson!([{"x": 2, "y": "b"}, {"x": 1, "y": "a"}, {"x": 3}])),
            ),
            (
                rawbson!({"$sortArray": {"input": [1, {"x": 0}, "s"], "sortBy": {"x": 1}}}),
                Some(rawbson!([1, "s", {"x": 0}])),
            ),
            (
                rawbson!({"$sortArray": {"input": [{"a": {"b": 2}}, {"a": {"b": 1}}], "sortBy": {"a.b": 1}}}),
                Some(rawbson!([{"a": {"b": 1}}, {"a": {"b": 2}}])),
            ),
            (
                rawbson!({"$sortArray": {"input": "$n", "sortBy": 1}}),
                Some(RawBson::Null),
            ),
            (
                rawbson!({"$firstN": {"n": 2, "input": [1, 2, 3]}}),
                Some(rawbson!([1, 2])),
            ),
            (
                rawbson!({"$lastN": {"n": 2, "input": [1, 2, 3]}}),
                Some(rawbson!([2, 3])),
            ),
            (
                rawbson!({"$lastN": {"n": 5.0, "input": [1, 2, 3]}}),
                Some(rawbson!([1, 2, 3])),
            ),
            (
                rawbson!({"$firstN": {"n": 2, "input": [null, 1]}}),
                Some(rawbson!([null, 1])),
            ),
            (
                rawbson!({"$maxN": {"n": 2, "input": [3, null, 1, 5]}}),
                Some(rawbson!([5, 3])),
            ),
            (
                rawbson!({"$minN": {"n": 2, "input": [3, null, 1, 5]}}),
                Some(rawbson!([1, 3])),
            ),
            // Of equal values, the first ones seen stay once the set is full.
            (
                rawbson!({"$maxN": {"n": 1, "input": [2, 2.0, 1]}}),
                Some(rawbson!([2])),
            ),
            (
                rawbson!({"$minN": {"n": 2, "input": [2, 1.0, 1]}}),
                Some(rawbson!([1.0, 1])),
            ),
            (
                rawbson!({"$maxN": {"n": 3, "input": [2, 2.0, 1]}}),
                Some(rawbson!([2.0, 2, 1])),
            ),
        ]);
    }

    #[test]
    fn positional_errors() {
        check_errors(vec![
            (
                rawbson!({"$first": [1, 2]}),
                16020,
                "Expression $first takes exactly 1 argument. 2 were passed in.",
            ),
            (
                rawbson!({"$first": "$s"}),
                28689,
                "$first's argument must be an array, but is string",
            ),
            (
                rawbson!({"$slice": ["$a"]}),
                28667,
                "Expression $slice takes at least 2 arguments, and at most 3. 1 were passed in.",
            ),
            (
                rawbson!({"$slice": ["$s", 1]}),
                28724,
                "First argument to $slice must be an array, but is of type: string",
            ),
            (
                rawbson!({"$slice": ["$a", "x"]}),
                28725,
                "Second argument to $slice must be a numeric value, but is of type: string",
            ),
            (
                rawbson!({"$slice": ["$a", 1.5]}),
                28726,
                "Second argument to $slice can't be represented as a 32-bit integer: 1.5",
            ),
            (
                rawbson!({"$slice": ["$a", 0, "x"]}),
                28727,
                "Third argument to $slice must be numeric, but is of type: string",
            ),
            (
                rawbson!({"$slice": ["$a", 0, 0]}),
                28729,
                "Third argument to $slice must be positive: 0",
            ),
            (
                rawbson!({"$range": ["a", 1]}),
                34443,
                "$range requires a numeric starting value, found value of type: string",
            ),
            (
                rawbson!({"$range": [0, 1.5]}),
                34446,
                "$range requires an ending value that can be represented as a 32-bit integer, \
                 found value: 1.5",
            ),
            (
                rawbson!({"$range": [0, 5, "$missing"]}),
                34447,
                "$range requires a numeric step value, found value of type:missing",
            ),
            (
                rawbson!({"$range": [0, 5, 0]}),
                34449,
                "$range requires a non-zero step value",
            ),
            (
                rawbson!({"$indexOfArray": ["$s", 1]}),
                40090,
                "$indexOfArray requires an array as a first argument, found: string",
            ),
            (
                rawbson!({"$indexOfArray": ["$a", 1, -1]}),
                40097,
                "$indexOfArray requires a nonnegative starting index, found: -1",
            ),
            (
                rawbson!({"$indexOfArray": ["$a", 1, "x"]}),
                40096,
                "$indexOfArrayrequires an integral starting index, found a value of type: \
                 string, with value: \"x\"",
            ),
            (
                rawbson!({"$indexOfArray": [5, "$a"]}),
                50809,
                "First operand of $indexOfArray must be an array. First argument is of type: int",
            ),
            (
                rawbson!({"$indexOfArray": [5, 1]}),
                40090,
                "$indexOfArray requires an array as a first argument, found: int",
            ),
            (
                rawbson!({"$arrayToObject": "$s"}),
                40386,
                "$arrayToObject requires an array input, found: string",
            ),
            (
                rawbson!({"$arrayToObject": [[1]]}),
                40398,
                "Unrecognised input type format for $arrayToObject: int",
            ),
            (
                rawbson!({"$arrayToObject": [[["a"]]]}),
                40397,
                "$arrayToObject requires an array of size 2 arrays,found array of size: 1",
            ),
            (
                rawbson!({"$arrayToObject": [[[1, 2]]]}),
                40395,
                "$arrayToObject requires an array of key-value pairs, where the key must be of \
                 type string. Found key type: int",
            ),
            (
                rawbson!({"$arrayToObject": [[["a", 1], {"k": "b", "v": 2}]]}),
                40396,
                "$arrayToObject requires a consistent input format. Elements mustall be arrays \
                 or all be objects. Array was detected, now found: object",
            ),
            (
                rawbson!({"$arrayToObject": [[{"k": "a", "v": 1}, ["b", 2]]]}),
                40391,
                "$arrayToObject requires a consistent input format. Elements mustall be arrays \
                 or all be objects. Object was detected, now found: array",
            ),
            (
                rawbson!({"$arrayToObject": [[{"k": "a"}]]}),
                40392,
                "$arrayToObject requires an object keys of 'k' and 'v'. Found incorrect number \
                 of keys:1",
            ),
            (
                rawbson!({"$arrayToObject": [[{"k": "a", "x": 1}]]}),
                40393,
                "$arrayToObject requires an object with keys 'k' and 'v'. Missing either or \
                 both keys from: { k: \"a\", x: 1 }",
            ),
            (
                rawbson!({"$arrayToObject": [[{"k": 1, "v": 1}]]}),
                40394,
                "$arrayToObject requires an object with keys 'k' and 'v', where the value of \
                 'k' must be of type string. Found type: int",
            ),
            (
                rawbson!({"$arrayToObject": [[["a\u{0}b", 1]]]}),
                4_940_400,
                "Key field cannot contain an embedded null byte",
            ),
            (
                rawbson!({"$objectToArray": "$a"}),
                40390,
                "$objectToArray requires a document input, found: array",
            ),
            (
                rawbson!({"$allElementsTrue": "$missing"}),
                17040,
                "$allElementsTrue's argument must be an array, but is missing",
            ),
            (
                rawbson!({"$anyElementTrue": 1}),
                17041,
                "$anyElementTrue's argument must be an array, but is int",
            ),
            (
                rawbson!({"$concatArrays": ["$a", 1]}),
                28664,
                "$concatArrays only supports arrays, not int",
            ),
            (
                rawbson!({"$reverseArray": 1}),
                34435,
                "The argument to $reverseArray must be an array, but was of type: int",
            ),
        ]);
        let err = eval(&rawbson!({"$range": [0, i32::MAX]})).unwrap_err();
        assert_eq!(
            (err.code, err.errmsg.as_str()),
            (
                ErrorCode::ExceededMemoryLimit,
                "$range would use too much memory (34359738392 bytes) and cannot spill to disk. \
                 Memory limit: 104857600 bytes"
            )
        );
    }

    /// `$sampleRate` is a query operator (`$match`), not an expression: mongod's expression
    /// parser does not know it.
    #[test]
    fn sample_rate_is_not_an_expression() {
        let err = eval(&rawbson!({"$sampleRate": 0.5})).unwrap_err();
        assert_eq!(
            (err.code, err.errmsg.as_str()),
            (
                ErrorCode::InvalidPipelineOperator,
                "Unrecognized expression '$sampleRate'"
            )
        );
    }

    #[test]
    fn named_errors() {
        check_errors(vec![
            (
                rawbson!({"$zip": 1}),
                34460,
                "$zip only supports an object as an argument, found int",
            ),
            (
                rawbson!({"$zip": {"inputs": 1}}),
                34461,
                "inputs must be an array of expressions, found int",
            ),
            (
                rawbson!({"$zip": {"inputs": [[1]], "defaults": 1}}),
                34462,
                "defaults must be an array of expressions, found int",
            ),
            (
                rawbson!({"$zip": {"inputs": [[1]], "useLongestLength": 1}}),
                34463,
                "useLongestLength must be a bool, found object",
            ),
            (
                rawbson!({"$zip": {"inputs": [[1]], "x": 1}}),
                34464,
                "$zip found an unknown argument: x",
            ),
            (
                rawbson!({"$zip": {}}),
                34465,
                "$zip requires at least one input array",
            ),
            (
                rawbson!({"$zip": {"inputs": [[1]], "defaults": [1]}}),
                34466,
                "cannot specify defaults unless useLongestLength is true",
            ),
            (
                rawbson!({"$zip": {"inputs": [[1]], "useLongestLength": true, "defaults": [1, 2]}}),
                34467,
                "defaults and inputs must have the same length",
            ),
            (
                rawbson!({"$zip": {"inputs": ["$s"]}}),
                34468,
                "$zip found a non-array expression in input: \"x\"",
            ),
            (
                rawbson!({"$sortArray": 1}),
                2_942_500,
                "$sortArray requires an object as an argument, found: int",
            ),
            (
                rawbson!({"$sortArray": {"input": [1], "sortBy": 1, "z": 1}}),
                2_942_501,
                "$sortArray found an unknown argument: z",
            ),
            (
                rawbson!({"$sortArray": {"sortBy": 1}}),
                2_942_502,
                "$sortArray requires 'input' to be specified",
            ),
            (
                rawbson!({"$sortArray": {"input": [1]}}),
                2_942_503,
                "$sortArray requires 'sortBy' to be specified",
            ),
            (
                rawbson!({"$sortArray": {"input": "$s", "sortBy": 1}}),
                2_942_504,
                "The input argument to $sortArray must be an array, but was of type: string",
            ),
            (
                rawbson!({"$sortArray": {"input": [1], "sortBy": {}}}),
                2_942_505,
                "BadValue: The sort pattern is empty when it should be a set of fields.",
            ),
            (
                rawbson!({"$sortArray": {"input": [1], "sortBy": {"a": 2}}}),
                2_942_505,
                "BadValue: The sort element value must be either 1 or -1",
            ),
            (
                rawbson!({"$sortArray": {"input": [1], "sortBy": {"a..b": 1}}}),
                2_942_505,
                "BadValue: The sort field is a dotted field but has an empty part: a..b",
            ),
            (
                rawbson!({"$sortArray": {"input": [1], "sortBy": 2}}),
                2_942_506,
                "The $sort element value must be either 1 or -1",
            ),
            (
                rawbson!({"$sortArray": {"input": [1], "sortBy": "a"}}),
                2_942_507,
                "The $sort is invalid: use 1/-1 to sort the whole element, or {field:1/-1} to \
                 sort embedded fields",
            ),
            (
                rawbson!({"$firstN": 1}),
                5_787_801,
                "specification must be an object; found $firstN: 1",
            ),
            (
                rawbson!({"$maxN": [1]}),
                5_787_900,
                "specification must be an object; found $maxN: [ 1 ]",
            ),
            (
                rawbson!({"$firstN": {"n": 1, "input": [1], "x": 1}}),
                5_787_901,
                "Unknown argument for 'n' operator: x",
            ),
            (
                rawbson!({"$firstN": {"input": [1]}}),
                5_787_906,
                "Missing value for 'n'",
            ),
            (
                rawbson!({"$lastN": {"n": 1}}),
                5_787_907,
                "Missing value for 'input'",
            ),
            (
                rawbson!({"$minN": {"n": "a", "input": [1]}}),
                5_787_902,
                "Value for 'n' must be of integral type, but found \"a\"",
            ),
            (
                rawbson!({"$firstN": {"n": 1.5, "input": [1]}}),
                5_787_903,
                "Value for 'n' must be of integral type, but found 1.5",
            ),
            (
                rawbson!({"$firstN": {"n": 0, "input": [1]}}),
                5_787_908,
                "'n' must be greater than 0, found 0",
            ),
            (
                rawbson!({"$firstN": {"n": 1, "input": "$missing"}}),
                5_788_200,
                "Input must be an array",
            ),
        ]);
    }
}
