//! Integer arguments of operators, read as mongod reads them.

use bson::RawBsonRef;

use super::parse::failed_to_parse;
use crate::error::CommandError;
use crate::query::compare::number_as_f64;
use crate::query::display;

/// 2^63, the first double above `i64::MAX`.
pub(super) const TWO_63: f64 = 9_223_372_036_854_775_808.0;

/// A whole double as an `i64`, if it is one (no NaN, infinity, fraction or overflow).
#[expect(clippy::cast_possible_truncation, reason = "range checked first")]
pub(super) fn exact_i64(d: f64) -> Option<i64> {
    if !d.is_finite() || !(-TWO_63..TWO_63).contains(&d) {
        return None;
    }
    let i = d as i64;
    #[expect(clippy::cast_precision_loss, reason = "comparing the round trip")]
    let back = i as f64;
    (back == d).then_some(i)
}

/// mongod's `parseIntegerElementToLong` on the element `name: v` (`FailedToParse`).
pub(super) fn parse_long(name: &str, v: RawBsonRef<'_>) -> Result<i64, CommandError> {
    let shown = || display::element(name, v);
    match v {
        RawBsonRef::Int32(i) => Ok(i64::from(i)),
        RawBsonRef::Int64(i) => Ok(i),
        RawBsonRef::Double(d) => {
            if d.is_nan() {
                return Err(failed_to_parse(format!(
                    "Expected an integer, but found NaN in: {}",
                    shown()
                )));
            }
            if !(-TWO_63..TWO_63).contains(&d) {
                return Err(failed_to_parse(format!(
                    "Cannot represent as a 64-bit integer: {}",
                    shown()
                )));
            }
            exact_i64(d).ok_or_else(|| failed_to_parse(format!("Expected an integer: {}", shown())))
        }
        RawBsonRef::Decimal128(_) => number_as_f64(v).and_then(exact_i64).ok_or_else(|| {
            failed_to_parse(format!("Cannot represent as a 64-bit integer: {}", shown()))
        }),
        _ => Err(failed_to_parse(format!(
            "Expected a number in: {}",
            shown()
        ))),
    }
}

/// mongod's `parseIntegerElementToInt`.
pub(super) fn parse_int(name: &str, v: RawBsonRef<'_>) -> Result<i32, CommandError> {
    let n = parse_long(name, v)?;
    i32::try_from(n).map_err(|_| {
        failed_to_parse(format!(
            "Cannot represent {} in an int",
            display::element(name, v)
        ))
    })
}

pub(super) fn non_negative(name: &str, v: RawBsonRef<'_>, n: i64) -> Result<i64, CommandError> {
    if n < 0 {
        return Err(failed_to_parse(format!(
            "Expected a non-negative number in: {}",
            display::element(name, v)
        )));
    }
    Ok(n)
}
