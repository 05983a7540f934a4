//! Number arithmetic of `$sum` and `$avg`: int32 widens to int64 on overflow, int64 to double;
//! with a decimal128 the result is a decimal128, computed exactly (`query::decimal`): integers
//! join it exactly, doubles by their 34-digit decimal form (mongod sums the doubles apart and
//! adds their 34-digit form at the end; the two agree unless doubles and decimals mix).

use bson::RawBson;

use crate::query::decimal::Decimal;

/// `acc + v`, widening as mongod's `$sum` does.
pub(super) fn add(acc: RawBson, v: &RawBson) -> RawBson {
    match (acc, v) {
        (RawBson::Int32(a), RawBson::Int32(b)) => a
            .checked_add(*b)
            .map_or(RawBson::Int64(i64::from(a) + i64::from(*b)), RawBson::Int32),
        (RawBson::Int32(a), RawBson::Int64(b)) => add_i64(i64::from(a), *b),
        (RawBson::Int64(a), RawBson::Int32(b)) => add_i64(a, i64::from(*b)),
        (RawBson::Int64(a), RawBson::Int64(b)) => add_i64(a, *b),
        (a, b) if matches!(a, RawBson::Decimal128(_)) || matches!(b, RawBson::Decimal128(_)) => {
            match (as_decimal(&a), as_decimal(b)) {
                (Some(x), Some(y)) => RawBson::Decimal128((x + y).bson()),
                (Some(x), None) | (None, Some(x)) => RawBson::Decimal128(x.bson()),
                (None, None) => a,
            }
        }
        (a, b) => RawBson::Double(as_f64(&a).unwrap_or(0.0) + as_f64(b).unwrap_or(0.0)),
    }
}

#[expect(
    clippy::cast_precision_loss,
    reason = "overflow falls back to double, as MongoDB does"
)]
fn add_i64(a: i64, b: i64) -> RawBson {
    a.checked_add(b)
        .map_or(RawBson::Double(a as f64 + b as f64), RawBson::Int64)
}

/// A number as a double (`None`: not a number).
#[expect(
    clippy::cast_precision_loss,
    reason = "averages and mixed sums are doubles"
)]
pub(crate) fn as_f64(v: &RawBson) -> Option<f64> {
    match v {
        RawBson::Int32(i) => Some(f64::from(*i)),
        RawBson::Int64(i) => Some(*i as f64),
        RawBson::Double(d) => Some(*d),
        RawBson::Decimal128(d) => d.to_string().parse().ok(),
        _ => None,
    }
}

/// A number as a decimal: integers exactly, a double by its 34 significant digits.
pub(crate) fn as_decimal(v: &RawBson) -> Option<Decimal> {
    match v {
        RawBson::Int32(i) => Some(Decimal::of_i64(i64::from(*i))),
        RawBson::Int64(i) => Some(Decimal::of_i64(*i)),
        RawBson::Double(d) => Some(Decimal::of_f64_34(*d)),
        RawBson::Decimal128(d) => Some(Decimal::of_bson(*d)),
        _ => None,
    }
}
