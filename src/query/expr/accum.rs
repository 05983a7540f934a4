//! The accumulators as expressions: `$sum $avg $max $min $stdDevPop $stdDevSamp` over their
//! arguments, or over the elements of their one argument when it is an array (mongod's
//! `ExpressionFromAccumulator`). Non-numbers are skipped by the numeric ones, null and missing
//! by `$max`/`$min`; with nothing to accumulate `$sum` is 0 and the others null.

use std::cmp::Ordering;

use bson::{RawBson, RawBsonRef};

use super::arith::Num;
use super::{
    CommandError, Env, Node, PositionalOp, Scope, Value, agg_compare, eval_all, nullish,
    parse_args, r,
};
use crate::query::decimal::Decimal;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Sum,
    Avg,
    Max,
    Min,
    StdDevPop,
    StdDevSamp,
}

pub(super) fn parse_op(
    name: &str,
    v: RawBsonRef<'_>,
    sc: &mut Scope<'_>,
) -> Option<Result<Node, CommandError>> {
    let op = match name {
        "sum" => Op::Sum,
        "avg" => Op::Avg,
        "max" => Op::Max,
        "min" => Op::Min,
        "stdDevPop" => Op::StdDevPop,
        "stdDevSamp" => Op::StdDevSamp,
        _ => return None,
    };
    Some(parse_args(v, sc).map(|args| super::call(op, args)))
}

impl PositionalOp for Op {
    fn eval(self, args: &[Node], env: Env<'_>) -> Result<Value, CommandError> {
        let values = eval_all(args, env)?;
        let items: Vec<RawBsonRef<'_>> = match values.as_slice() {
            [only] => match r(only) {
                Some(RawBsonRef::Array(a)) => a.into_iter().map_while(Result::ok).collect(),
                Some(v) => vec![v],
                None => Vec::new(),
            },
            many => many.iter().filter_map(r).collect(),
        };
        Ok(Some(match self {
            Op::Sum => sum(&items),
            Op::Avg => avg(&items),
            Op::Max => extreme(&items, Ordering::Greater),
            Op::Min => extreme(&items, Ordering::Less),
            Op::StdDevPop => std_dev(&items, false),
            Op::StdDevSamp => std_dev(&items, true),
        }))
    }
}

/// The sum of the numbers among `items`, as the narrowest type that holds it exactly: int,
/// long (on int overflow), double (on long overflow, or with a double), decimal with a decimal.
fn sum(items: &[RawBsonRef<'_>]) -> RawBson {
    let (mut int, mut float) = (Some(0_i64), 0.0_f64);
    let (mut long, mut double, mut dec) = (false, false, false);
    for n in items.iter().filter_map(|v| Num::of(*v)) {
        match n {
            Num::Int(_) => {}
            Num::Long(_) => long = true,
            Num::Double(_) => double = true,
            Num::Decimal(_) => dec = true,
        }
        int = match (int, n.i64()) {
            (Some(acc), Some(x)) => acc.checked_add(x),
            _ => None,
        };
        float += n.f64();
    }
    if dec {
        return RawBson::Decimal128(decimal_sum(items).bson());
    }
    match int {
        Some(total) if !double => {
            if long {
                RawBson::Int64(total)
            } else {
                i32::try_from(total).map_or(RawBson::Int64(total), RawBson::Int32)
            }
        }
        _ => RawBson::Double(float),
    }
}

fn avg(items: &[RawBsonRef<'_>]) -> RawBson {
    let nums: Vec<Num> = items.iter().filter_map(|v| Num::of(*v)).collect();
    if nums.is_empty() {
        return RawBson::Null;
    }
    if nums.iter().any(|n| matches!(n, Num::Decimal(_))) {
        let count = Decimal::of_i64(i64::try_from(nums.len()).unwrap_or(i64::MAX));
        return RawBson::Decimal128((decimal_sum(items) / count).bson());
    }
    #[expect(clippy::cast_precision_loss, reason = "a count as a double, as mongod")]
    let mean = nums.iter().map(|n| n.f64()).sum::<f64>() / nums.len() as f64;
    RawBson::Double(mean)
}

/// mongod's decimal `$sum`: the decimals added exactly, then the other numbers' total (exact
/// for integers, a double's 34 digits otherwise).
fn decimal_sum(items: &[RawBsonRef<'_>]) -> Decimal {
    let (mut decimals, mut int, mut float, mut double) =
        (Decimal::of_i64(0), Some(0_i64), 0.0_f64, false);
    for n in items.iter().filter_map(|v| Num::of(*v)) {
        match n {
            Num::Decimal(d) => decimals = decimals + d,
            Num::Double(d) => {
                double = true;
                float += d;
            }
            other => {
                int = int.and_then(|acc| other.i64().and_then(|x| acc.checked_add(x)));
                float += other.f64();
            }
        }
    }
    let rest = match int {
        Some(total) if !double => Decimal::of_i64(total),
        _ => Decimal::of_f64_34(float),
    };
    decimals + rest
}

/// The greatest (`Greater`) or least value among `items` by BSON order, null and missing
/// aside.
fn extreme(items: &[RawBsonRef<'_>], want: Ordering) -> RawBson {
    let mut best: Option<RawBsonRef<'_>> = None;
    for v in items.iter().copied().filter(|v| !nullish(Some(*v))) {
        if best.is_none_or(|b| agg_compare(Some(v), Some(b)) == want) {
            best = Some(v);
        }
    }
    best.map_or(RawBson::Null, RawBson::from)
}

/// The population (or sample) standard deviation of the numbers among `items`.
fn std_dev(items: &[RawBsonRef<'_>], sample: bool) -> RawBson {
    let xs: Vec<f64> = items
        .iter()
        .filter_map(|v| Num::of(*v))
        .map(Num::f64)
        .collect();
    let n = xs.len();
    if n == 0 || (sample && n < 2) {
        return RawBson::Null;
    }
    #[expect(clippy::cast_precision_loss, reason = "counts as doubles, as mongod")]
    let (count, denom) = (n as f64, if sample { (n - 1) as f64 } else { n as f64 });
    let mean = xs.iter().sum::<f64>() / count;
    let var = xs.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / denom;
    RawBson::Double(var.sqrt())
}

#[cfg(test)]
mod tests {
    use bson::{RawBson, rawdoc};

    use crate::query::expr::Expression;

    fn eval(e: &bson::RawDocument) -> Option<RawBson> {
        let doc = rawdoc! {"a": [1, 2, 3], "b": [1.5, "x", null], "big": [i32::MAX, 1], "n": null};
        Expression::parse(bson::RawBsonRef::Document(e))
            .and_then(|x| x.evaluate(&doc))
            .unwrap_or_else(|err| panic!("{e:?}: {err:?}"))
    }

    #[test]
    fn accumulators_as_expressions() {
        assert_eq!(eval(&rawdoc! {"$sum": "$a"}), Some(RawBson::Int32(6)));
        assert_eq!(eval(&rawdoc! {"$sum": ["$a", 4]}), Some(RawBson::Int32(4)));
        assert_eq!(
            eval(&rawdoc! {"$sum": [1, 2.5]}),
            Some(RawBson::Double(3.5))
        );
        assert_eq!(
            eval(&rawdoc! {"$sum": "$big"}),
            Some(RawBson::Int64(2_147_483_648))
        );
        assert_eq!(eval(&rawdoc! {"$sum": "$missing"}), Some(RawBson::Int32(0)));
        assert_eq!(eval(&rawdoc! {"$sum": "$b"}), Some(RawBson::Double(1.5)));
        assert_eq!(eval(&rawdoc! {"$avg": "$a"}), Some(RawBson::Double(2.0)));
        assert_eq!(eval(&rawdoc! {"$avg": "$n"}), Some(RawBson::Null));
        assert_eq!(eval(&rawdoc! {"$max": "$a"}), Some(RawBson::Int32(3)));
        assert_eq!(
            eval(&rawdoc! {"$max": [1, "x", null]}),
            Some(RawBson::String("x".into()))
        );
        assert_eq!(
            eval(&rawdoc! {"$min": ["$n", 4, 2.5]}),
            Some(RawBson::Double(2.5))
        );
        assert_eq!(eval(&rawdoc! {"$min": []}), Some(RawBson::Null));
        assert_eq!(
            eval(&rawdoc! {"$stdDevPop": [1, 3]}),
            Some(RawBson::Double(1.0))
        );
        assert_eq!(
            eval(&rawdoc! {"$stdDevSamp": "$a"}),
            Some(RawBson::Double(1.0))
        );
        assert_eq!(eval(&rawdoc! {"$stdDevSamp": [1]}), Some(RawBson::Null));
    }
}
