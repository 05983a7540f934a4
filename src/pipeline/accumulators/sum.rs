//! Number arithmetic of `$sum` and `$avg`: int32 widens to int64 on overflow, int64 to double;
//! with a decimal128 the result is a decimal128 (computed through `f64`).

use bson::RawBson;

/// `acc + v`, widening as mongod's `$sum` does.
pub(super) fn add(acc: RawBson, v: &RawBson) -> RawBson {
    match (acc, v) {
        (RawBson::Int32(a), RawBson::Int32(b)) => a
            .checked_add(*b)
            .map_or(RawBson::Int64(i64::from(a) + i64::from(*b)), RawBson::Int32),
        (RawBson::Int32(a), RawBson::Int64(b)) => add_i64(i64::from(a), *b),
        (RawBson::Int64(a), RawBson::Int32(b)) => add_i64(a, i64::from(*b)),
        (RawBson::Int64(a), RawBson::Int64(b)) => add_i64(a, *b),
        (a, b) => {
            let total = as_f64(&a).unwrap_or(0.0) + as_f64(b).unwrap_or(0.0);
            if matches!(a, RawBson::Decimal128(_)) || matches!(b, RawBson::Decimal128(_)) {
                crate::query::expr::decimal_from_f64(total)
            } else {
                RawBson::Double(total)
            }
        }
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
