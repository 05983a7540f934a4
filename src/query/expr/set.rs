//! Set operators over arrays: `$setEquals $setIntersection $setUnion $setDifference
//! $setIsSubset`. Elements are equal as mongod's value comparator says (`1` equals `1.0`,
//! collation-free); duplicates are ignored. `$setUnion` and `$setIntersection` return their
//! elements in sorted order (mongod's ordered `ValueSet`), `$setDifference` in the order of
//! the first array.

use bson::{RawBson, RawBsonRef};

use super::array::{array_of, constant, items};
use super::{
    CommandError, Env, Node, PositionalOp, Scope, Value, agg_compare, arg, boolean, eval, exactly,
    loc, nullish, parse_args, r, tname,
};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Equals,
    Intersection,
    Union,
    Difference,
    IsSubset,
    /// `$setIsSubset` whose second argument is a constant array (mongod's optimised form,
    /// with its own code for a first argument that is not an array).
    IsSubsetOfConstant,
}

pub(super) fn parse_op(
    name: &str,
    v: RawBsonRef<'_>,
    sc: &mut Scope<'_>,
) -> Option<Result<Node, CommandError>> {
    let op = match name {
        "setEquals" => Op::Equals,
        "setIntersection" => Op::Intersection,
        "setUnion" => Op::Union,
        "setDifference" => Op::Difference,
        "setIsSubset" => Op::IsSubset,
        _ => return None,
    };
    Some(parse_args(v, sc).and_then(|args| {
        let mut op = op;
        match op {
            Op::Equals if args.len() < 2 => {
                return Err(loc(
                    17045,
                    format!(
                        "$setEquals needs at least two arguments had: {}",
                        args.len()
                    ),
                ));
            }
            Op::Difference => exactly(name, &args, 2)?,
            Op::IsSubset => {
                exactly(name, &args, 2)?;
                op = subset_of_constant(&args)?;
            }
            _ => {}
        }
        Ok(super::call(op, args))
    }))
}

/// mongod optimises `$setIsSubset` with a constant second argument before reading any
/// document: a constant that is not an array fails then (17311), and the first argument's
/// check takes another code. When both arguments are constant, mongod evaluates the whole
/// expression instead, with the ordinary errors.
fn subset_of_constant(args: &[Node]) -> Result<Op, CommandError> {
    let [lhs, rhs] = args else {
        return Ok(Op::IsSubset);
    };
    if constant(lhs).is_some() {
        return Ok(Op::IsSubset);
    }
    match constant(rhs) {
        Some(RawBson::Array(_)) => Ok(Op::IsSubsetOfConstant),
        Some(other) => Err(loc(
            17311,
            format!(
                "both operands of $setIsSubset must be arrays. Second argument is of type: {}",
                tname(Some(other.as_raw_bson_ref()))
            ),
        )),
        None => Ok(Op::IsSubset),
    }
}

/// The distinct elements of `elems`, sorted; of equal elements the first is kept (mongod's
/// ordered set keeps the first inserted).
fn sorted_set(mut elems: Vec<RawBsonRef<'_>>) -> Vec<RawBsonRef<'_>> {
    elems.sort_by(|a, b| agg_compare(Some(*a), Some(*b)));
    elems.dedup_by(|later, earlier| agg_compare(Some(*later), Some(*earlier)).is_eq());
    elems
}

fn contains(set: &[RawBsonRef<'_>], v: RawBsonRef<'_>) -> bool {
    set.binary_search_by(|e| agg_compare(Some(*e), Some(v)))
        .is_ok()
}

impl PositionalOp for Op {
    fn eval(self, args: &[Node], env: Env<'_>) -> Result<Value, CommandError> {
        match self {
            Op::Equals => set_equals(args, env),
            Op::Intersection => set_intersection(args, env),
            Op::Union => set_union(args, env),
            Op::Difference => set_difference(args, env),
            Op::IsSubset | Op::IsSubsetOfConstant => {
                let (lhs, rhs) = (arg(args, 0, env)?, arg(args, 1, env)?);
                let Some(RawBsonRef::Array(lhs)) = r(&lhs) else {
                    let code = if self == Op::IsSubset { 17046 } else { 17310 };
                    return Err(loc(
                        code,
                        format!(
                            "both operands of $setIsSubset must be arrays. First argument is of \
                             type: {}",
                            tname(r(&lhs))
                        ),
                    ));
                };
                let Some(RawBsonRef::Array(rhs)) = r(&rhs) else {
                    return Err(loc(
                        17042,
                        format!(
                            "both operands of $setIsSubset must be arrays. Second argument is of \
                             type: {}",
                            tname(r(&rhs))
                        ),
                    ));
                };
                let rhs = sorted_set(items(rhs));
                Ok(boolean(items(lhs).into_iter().all(|e| contains(&rhs, e))))
            }
        }
    }
}

fn set_equals(args: &[Node], env: Env<'_>) -> Result<Value, CommandError> {
    let mut first: Option<Vec<RawBson>> = None;
    for (i, a) in args.iter().enumerate() {
        let v = eval(a, env)?;
        let Some(RawBsonRef::Array(arr)) = r(&v) else {
            return Err(loc(
                17044,
                format!(
                    "All operands of $setEquals must be arrays. {}-th argument is of type: {}",
                    i + 1,
                    tname(r(&v))
                ),
            ));
        };
        let set: Vec<RawBson> = sorted_set(items(arr))
            .into_iter()
            .map(RawBson::from)
            .collect();
        match &first {
            None => first = Some(set),
            Some(lhs) => {
                let equal = lhs.len() == set.len()
                    && lhs.iter().zip(&set).all(|(x, y)| {
                        agg_compare(Some(x.as_raw_bson_ref()), Some(y.as_raw_bson_ref())).is_eq()
                    });
                if !equal {
                    return Ok(boolean(false));
                }
            }
        }
    }
    Ok(boolean(true))
}

fn set_intersection(args: &[Node], env: Env<'_>) -> Result<Value, CommandError> {
    let values = args
        .iter()
        .map(|a| eval(a, env))
        .collect::<Result<Vec<_>, _>>()?;
    let mut current: Option<Vec<RawBsonRef<'_>>> = None;
    for v in &values {
        let arr = match r(v) {
            x if nullish(x) => return Ok(Some(RawBson::Null)),
            Some(RawBsonRef::Array(a)) => a,
            other => {
                return Err(loc(
                    17047,
                    format!(
                        "All operands of $setIntersection must be arrays. One argument is of \
                         type: {}",
                        tname(other)
                    ),
                ));
            }
        };
        current = Some(match current {
            None => sorted_set(items(arr)),
            Some(cur) if cur.is_empty() => cur,
            Some(cur) => {
                // As mongod: keep the smaller set's elements that the larger one holds.
                let next = sorted_set(items(arr));
                let (mut small, large) = if cur.len() > next.len() {
                    (next, cur)
                } else {
                    (cur, next)
                };
                small.retain(|e| contains(&large, *e));
                small
            }
        });
    }
    array_of(current.unwrap_or_default())
}

fn set_union(args: &[Node], env: Env<'_>) -> Result<Value, CommandError> {
    let values = args
        .iter()
        .map(|a| eval(a, env))
        .collect::<Result<Vec<_>, _>>()?;
    let mut all = Vec::new();
    for v in &values {
        match r(v) {
            x if nullish(x) => return Ok(Some(RawBson::Null)),
            Some(RawBsonRef::Array(a)) => all.extend(items(a)),
            other => {
                return Err(loc(
                    17043,
                    format!(
                        "All operands of $setUnion must be arrays. One argument is of type: {}",
                        tname(other)
                    ),
                ));
            }
        }
    }
    array_of(sorted_set(all))
}

fn set_difference(args: &[Node], env: Env<'_>) -> Result<Value, CommandError> {
    let (lhs, rhs) = (arg(args, 0, env)?, arg(args, 1, env)?);
    if nullish(r(&lhs)) || nullish(r(&rhs)) {
        return Ok(Some(RawBson::Null));
    }
    let Some(RawBsonRef::Array(lhs)) = r(&lhs) else {
        return Err(loc(
            17048,
            format!(
                "both operands of $setDifference must be arrays. First argument is of type: {}",
                tname(r(&lhs))
            ),
        ));
    };
    let Some(RawBsonRef::Array(rhs)) = r(&rhs) else {
        return Err(loc(
            17049,
            format!(
                "both operands of $setDifference must be arrays. Second argument is of type: {}",
                tname(r(&rhs))
            ),
        ));
    };
    // The right set also removes the left array's repeats: each element kept joins it.
    let mut seen = sorted_set(items(rhs));
    let mut out = Vec::new();
    for e in items(lhs) {
        if let Err(at) = seen.binary_search_by(|s| agg_compare(Some(*s), Some(e))) {
            seen.insert(at, e);
            out.push(e);
        }
    }
    array_of(out)
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
    fn set_operators() {
        check(vec![
            (
                rawbson!({"$setEquals": [["red", "blue"], ["blue", "red", "blue"]]}),
                Some(rawbson!(true)),
            ),
            (
                rawbson!({"$setEquals": [[1], [1.0], [1, 1]]}),
                Some(rawbson!(true)),
            ),
            (
                rawbson!({"$setEquals": [[1], [1], [2]]}),
                Some(rawbson!(false)),
            ),
            (
                rawbson!({"$setIntersection": [[1, 2, 3], [3, 2, 5]]}),
                Some(rawbson!([2, 3])),
            ),
            (
                rawbson!({"$setIntersection": [[], [1]]}),
                Some(rawbson!([])),
            ),
            (rawbson!({"$setIntersection": []}), Some(rawbson!([]))),
            (
                rawbson!({"$setIntersection": [[1, 2], "$missing"]}),
                Some(RawBson::Null),
            ),
            (
                rawbson!({"$setUnion": [[3, 1], [2, 1, 3.0]]}),
                Some(rawbson!([1, 2, 3])),
            ),
            (rawbson!({"$setUnion": [[1], null]}), Some(RawBson::Null)),
            (
                rawbson!({"$setDifference": [["b", "a", "b", "c"], ["c"]]}),
                Some(rawbson!(["b", "a"])),
            ),
            (
                rawbson!({"$setDifference": [null, [1]]}),
                Some(RawBson::Null),
            ),
            (
                rawbson!({"$setIsSubset": [[1, 1], [1, 2]]}),
                Some(rawbson!(true)),
            ),
            (
                rawbson!({"$setIsSubset": ["$a", [1, 3]]}),
                Some(rawbson!(false)),
            ),
            (rawbson!({"$setIsSubset": [[], []]}), Some(rawbson!(true))),
        ]);
    }

    #[test]
    fn set_errors() {
        check_errors(vec![
            (
                rawbson!({"$setEquals": [[1]]}),
                17045,
                "$setEquals needs at least two arguments had: 1",
            ),
            (
                rawbson!({"$setEquals": [[1], "$s"]}),
                17044,
                "All operands of $setEquals must be arrays. 2-th argument is of type: string",
            ),
            (
                rawbson!({"$setIntersection": [[1], 1]}),
                17047,
                "All operands of $setIntersection must be arrays. One argument is of type: int",
            ),
            (
                rawbson!({"$setUnion": [[1], "x"]}),
                17043,
                "All operands of $setUnion must be arrays. One argument is of type: string",
            ),
            (
                rawbson!({"$setDifference": ["$s", [1]]}),
                17048,
                "both operands of $setDifference must be arrays. First argument is of type: \
                 string",
            ),
            (
                rawbson!({"$setDifference": [[1], 1]}),
                17049,
                "both operands of $setDifference must be arrays. Second argument is of type: int",
            ),
            (
                rawbson!({"$setDifference": [[1]]}),
                16020,
                "Expression $setDifference takes exactly 2 arguments. 1 were passed in.",
            ),
            (
                rawbson!({"$setIsSubset": ["$s", "$a"]}),
                17046,
                "both operands of $setIsSubset must be arrays. First argument is of type: string",
            ),
            (
                rawbson!({"$setIsSubset": ["$a", "$s"]}),
                17042,
                "both operands of $setIsSubset must be arrays. Second argument is of type: \
                 string",
            ),
            (
                rawbson!({"$setIsSubset": ["$s", [1]]}),
                17310,
                "both operands of $setIsSubset must be arrays. First argument is of type: string",
            ),
            (
                rawbson!({"$setIsSubset": ["$a", null]}),
                17311,
                "both operands of $setIsSubset must be arrays. Second argument is of type: null",
            ),
            (
                rawbson!({"$setIsSubset": [1, [1]]}),
                17046,
                "both operands of $setIsSubset must be arrays. First argument is of type: int",
            ),
        ]);
    }
}
