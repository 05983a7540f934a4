//! Type operators: `$type`, `$isNumber`, and `$convert` with its shorthands `$toBool $toDate
//! $toDecimal $toDouble $toInt $toLong $toObjectId $toString`.
//!
//! `$convert` follows mongod 7.0's conversion table: each (input type, target type) pair either
//! converts or fails with `ConversionFailure` (241) "Unsupported conversion from … to … in
//! $convert with no onError value"; failed conversions (a string that is not a number, an
//! overflowing cast, NaN to an integer) are `ConversionFailure` too, and only those are replaced
//! by `onError`. A null or missing input gives `onNull` (default null); a null or missing `to`
//! gives null. Decimal128 results go through `f64` except where the input is an integer or a
//! decimal string; a string parses to a date only in ISO 8601 form (`2024-01-31`,
//! `2024-01-31T10:00:00.123Z`, `…+01:00`), where mongod accepts more.

use bson::oid::ObjectId;
use bson::spec::ElementType;
use bson::{RawBson, RawBsonRef};

use super::{
    CommandError, Env, Node, Operator, PositionalOp, Scope, Value, arg, call, eval, exactly,
    integral_i32, nullish, object_fields, parse, parse_args, r, tname,
};
use crate::error::ErrorCode;
use crate::query::compare::{Dec, decimal_to_f64};
use crate::query::decimal::Decimal;
use crate::query::display::{format_g, type_name};
use crate::query::true_value;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Type,
    IsNumber,
    /// `$toInt` and the other shorthands: `$convert` to this type, without `onError`/`onNull`.
    To(ElementType),
}

pub(super) fn parse_op(
    name: &str,
    v: RawBsonRef<'_>,
    sc: &mut Scope<'_>,
) -> Option<Result<Node, CommandError>> {
    let op = match name {
        "convert" => return Some(parse_convert(v, sc)),
        "type" => Op::Type,
        "isNumber" => Op::IsNumber,
        "toBool" => Op::To(ElementType::Boolean),
        "toDate" => Op::To(ElementType::DateTime),
        "toDecimal" => Op::To(ElementType::Decimal128),
        "toDouble" => Op::To(ElementType::Double),
        "toInt" => Op::To(ElementType::Int32),
        "toLong" => Op::To(ElementType::Int64),
        "toObjectId" => Op::To(ElementType::ObjectId),
        "toString" => Op::To(ElementType::String),
        _ => return None,
    };
    Some(parse_args(v, sc).and_then(|args| {
        exactly(name, &args, 1)?;
        Ok(call(op, args))
    }))
}

impl PositionalOp for Op {
    fn eval(self, args: &[Node], env: Env<'_>) -> Result<Value, CommandError> {
        let v = arg(args, 0, env)?;
        let v = r(&v);
        match self {
            Op::Type => Ok(Some(RawBson::String(tname(v).to_owned()))),
            Op::IsNumber => Ok(Some(RawBson::Boolean(matches!(
                v,
                Some(
                    RawBsonRef::Int32(_)
                        | RawBsonRef::Int64(_)
                        | RawBsonRef::Double(_)
                        | RawBsonRef::Decimal128(_)
                )
            )))),
            Op::To(target) => match v {
                Some(v) if !nullish(Some(v)) => convert(v, target).map(Some),
                _ => Ok(Some(RawBson::Null)),
            },
        }
    }
}

/// `{$convert: {input, to, onError, onNull}}`.
#[derive(Debug)]
struct Convert {
    input: Node,
    to: Node,
    on_error: Option<Node>,
    on_null: Option<Node>,
}

fn failed_to_parse(msg: impl Into<String>) -> CommandError {
    CommandError::new(ErrorCode::FailedToParse, msg)
}

fn parse_convert(v: RawBsonRef<'_>, sc: &mut Scope<'_>) -> Result<Node, CommandError> {
    let RawBsonRef::Document(d) = v else {
        return Err(failed_to_parse(format!(
            "$convert expects an object of named arguments but found: {}",
            tname(Some(v))
        )));
    };
    let (mut input, mut to, mut on_error, mut on_null) = (None, None, None, None);
    for (k, v) in object_fields(d)? {
        let slot = match k {
            "input" => &mut input,
            "to" => &mut to,
            "onError" => &mut on_error,
            "onNull" => &mut on_null,
            other => {
                return Err(failed_to_parse(format!(
                    "$convert found an unknown argument: {other}"
                )));
            }
        };
        *slot = Some(parse(v, sc)?);
    }
    let input = input.ok_or_else(|| failed_to_parse("Missing 'input' parameter to $convert"))?;
    let to = to.ok_or_else(|| failed_to_parse("Missing 'to' parameter to $convert"))?;
    Ok(Node::op(Convert {
        input,
        to,
        on_error,
        on_null,
    }))
}

impl Operator for Convert {
    fn eval(&self, env: Env<'_>) -> Result<Value, CommandError> {
        let to = eval(&self.to, env)?;
        let input = eval(&self.input, env)?;
        let target = match r(&to) {
            t if nullish(t) => None,
            Some(t) => Some(target_type(t)?),
            None => None,
        };
        let input = match r(&input) {
            i if nullish(i) => {
                return match &self.on_null {
                    Some(n) => eval(n, env),
                    None => Ok(Some(RawBson::Null)),
                };
            }
            Some(i) => i,
            None => return Ok(Some(RawBson::Null)),
        };
        let Some(target) = target else {
            return Ok(Some(RawBson::Null));
        };
        let converted = match target {
            Some(t) => convert(input, t),
            None => Err(conversion_failure(format!(
                "Unsupported conversion from {} to missing in $convert with no onError value",
                type_name(input.element_type())
            ))),
        };
        match converted {
            Ok(v) => Ok(Some(v)),
            Err(e) if e.code == ErrorCode::ConversionFailure => match &self.on_error {
                Some(n) => eval(n, env),
                None => Err(e),
            },
            Err(e) => Err(e),
        }
    }

    fn args(&self) -> Vec<&Node> {
        let mut out = vec![&self.input, &self.to];
        out.extend(&self.on_error);
        out.extend(&self.on_null);
        out
    }
}

/// The BSON type names `$convert` (and `$type` in queries) know, with their numbers.
const TYPE_NAMES: &[(&str, i32)] = &[
    ("double", 1),
    ("string", 2),
    ("object", 3),
    ("array", 4),
    ("binData", 5),
    ("undefined", 6),
    ("objectId", 7),
    ("bool", 8),
    ("date", 9),
    ("null", 10),
    ("regex", 11),
    ("dbPointer", 12),
    ("javascript", 13),
    ("symbol", 14),
    ("javascriptWithScope", 15),
    ("int", 16),
    ("timestamp", 17),
    ("long", 18),
    ("decimal", 19),
    ("minKey", -1),
    ("maxKey", 127),
];

fn element_type(code: i32) -> Option<ElementType> {
    let byte = u8::try_from(code.rem_euclid(256)).ok()?;
    TYPE_NAMES
        .iter()
        .any(|(_, c)| *c == code)
        .then(|| ElementType::from(byte))
        .flatten()
}

/// `to` as a type: a type name or number, with mongod's errors; `None` for `"missing"`, a
/// name mongod accepts and no value converts to.
fn target_type(to: RawBsonRef<'_>) -> Result<Option<ElementType>, CommandError> {
    match to {
        RawBsonRef::String("missing") => Ok(None),
        RawBsonRef::String(name) => TYPE_NAMES
            .iter()
            .find(|(n, _)| *n == name)
            .and_then(|(_, code)| element_type(*code))
            .map(Some)
            .ok_or_else(|| CommandError::bad_value(format!("Unknown type name: {name}"))),
        RawBsonRef::Int32(_)
        | RawBsonRef::Int64(_)
        | RawBsonRef::Double(_)
        | RawBsonRef::Decimal128(_) => {
            let Some(code) = integral_i32(to) else {
                return Err(failed_to_parse(
                    "In $convert, numeric 'to' argument is not an integer",
                ));
            };
            element_type(code).map(Some).ok_or_else(|| {
                failed_to_parse(format!(
                    "In $convert, numeric value for 'to' does not correspond to a BSON type: {code}"
                ))
            })
        }
        other => Err(failed_to_parse(format!(
            "$convert's 'to' argument must be a string or number, but is {}",
            type_name(other.element_type())
        ))),
    }
}

fn conversion_failure(msg: impl Into<String>) -> CommandError {
    CommandError::new(ErrorCode::ConversionFailure, msg)
}

fn overflow(shown: &str) -> CommandError {
    conversion_failure(format!(
        "Conversion would overflow target type in $convert with no onError value: {shown}"
    ))
}

/// mongod's conversion of a present, non-null value to `target`.
fn convert(v: RawBsonRef<'_>, target: ElementType) -> Result<RawBson, CommandError> {
    let unsupported = || {
        conversion_failure(format!(
            "Unsupported conversion from {} to {} in $convert with no onError value",
            type_name(v.element_type()),
            type_name(target)
        ))
    };
    Ok(match (target, v) {
        (ElementType::Double, RawBsonRef::Double(d)) => RawBson::Double(d),
        (ElementType::Double, RawBsonRef::String(s)) => RawBson::Double(parse_double(s)?),
        (ElementType::Double, RawBsonRef::Boolean(b)) => RawBson::Double(if b { 1.0 } else { 0.0 }),
        (ElementType::Double, RawBsonRef::Int32(i)) => RawBson::Double(f64::from(i)),
        #[expect(clippy::cast_precision_loss, reason = "mongod's coerceToDouble")]
        (ElementType::Double, RawBsonRef::Int64(i)) => RawBson::Double(i as f64),
        #[expect(clippy::cast_precision_loss, reason = "mongod's conversion of a date")]
        (ElementType::Double, RawBsonRef::DateTime(t)) => {
            RawBson::Double(t.timestamp_millis() as f64)
        }
        (ElementType::Double, RawBsonRef::Decimal128(d)) => {
            let f = decimal_to_f64(d);
            if f.is_infinite() && !matches!(Dec::of(d), Dec::Inf { .. }) {
                return Err(overflow(&d.to_string()));
            }
            RawBson::Double(f)
        }

        (ElementType::String, RawBsonRef::Double(d)) => RawBson::String(format_double(d)),
        (ElementType::String, RawBsonRef::String(s)) => RawBson::String(s.to_owned()),
        (ElementType::String, RawBsonRef::ObjectId(o)) => RawBson::String(o.to_hex()),
        (ElementType::String, RawBsonRef::Boolean(b)) => RawBson::String(b.to_string()),
        (ElementType::String, RawBsonRef::DateTime(t)) => {
            RawBson::String(iso_date(t.timestamp_millis()))
        }
        (ElementType::String, RawBsonRef::Int32(i)) => RawBson::String(i.to_string()),
        (ElementType::String, RawBsonRef::Int64(i)) => RawBson::String(i.to_string()),
        (ElementType::String, RawBsonRef::Decimal128(d)) => RawBson::String(d.to_string()),

        (ElementType::ObjectId, RawBsonRef::String(s)) => RawBson::ObjectId(parse_oid(s)?),
        (ElementType::ObjectId, RawBsonRef::ObjectId(o)) => RawBson::ObjectId(o),

        (ElementType::Boolean, RawBsonRef::Null | RawBsonRef::Undefined) => {
            return Err(unsupported());
        }
        (ElementType::Boolean, v) => RawBson::Boolean(true_value(v)),

        (ElementType::DateTime, RawBsonRef::Double(d)) => date(double_to_long(d)?),
        (ElementType::DateTime, RawBsonRef::String(s)) => date(parse_date(s)?),
        (ElementType::DateTime, RawBsonRef::ObjectId(o)) => date(o.timestamp().timestamp_millis()),
        (ElementType::DateTime, RawBsonRef::DateTime(t)) => RawBson::DateTime(t),
        (ElementType::DateTime, RawBsonRef::Timestamp(t)) => date(i64::from(t.time) * 1000),
        (ElementType::DateTime, RawBsonRef::Int64(i)) => date(i),
        (ElementType::DateTime, RawBsonRef::Decimal128(d)) => date(decimal_to_long(d)?),

        (ElementType::Int32, RawBsonRef::Double(d)) => {
            check_finite(d)?;
            if !(d >= f64::from(i32::MIN) && d <= f64::from(i32::MAX)) {
                return Err(overflow(&format_g(d, 6)));
            }
            #[expect(clippy::cast_possible_truncation, reason = "range checked above")]
            RawBson::Int32(d as i32)
        }
        (ElementType::Int32, RawBsonRef::String(s)) => {
            let n = parse_integer(s)?;
            RawBson::Int32(i32::try_from(n).map_err(|_| number_failure(s, "Overflow"))?)
        }
        (ElementType::Int32, RawBsonRef::Boolean(b)) => RawBson::Int32(i32::from(b)),
        (ElementType::Int32, RawBsonRef::Int32(i)) => RawBson::Int32(i),
        (ElementType::Int32, RawBsonRef::Int64(i)) => {
            // mongod's message ends with the colon here, without the value.
            RawBson::Int32(i32::try_from(i).map_err(|_| overflow(""))?)
        }
        (ElementType::Int32, RawBsonRef::Decimal128(d)) => RawBson::Int32(
            i32::try_from(decimal_to_long(d)?).map_err(|_| overflow(&d.to_string()))?,
        ),

        (ElementType::Int64, RawBsonRef::Double(d)) => RawBson::Int64(double_to_long(d)?),
        (ElementType::Int64, RawBsonRef::String(s)) => RawBson::Int64(parse_integer(s)?),
        (ElementType::Int64, RawBsonRef::Boolean(b)) => RawBson::Int64(i64::from(b)),
        (ElementType::Int64, RawBsonRef::DateTime(t)) => RawBson::Int64(t.timestamp_millis()),
        (ElementType::Int64, RawBsonRef::Int32(i)) => RawBson::Int64(i64::from(i)),
        (ElementType::Int64, RawBsonRef::Int64(i)) => RawBson::Int64(i),
        (ElementType::Int64, RawBsonRef::Decimal128(d)) => RawBson::Int64(decimal_to_long(d)?),

        (ElementType::Decimal128, RawBsonRef::Double(d)) => decimal_of_double(d),
        (ElementType::Decimal128, RawBsonRef::String(s)) => parse_decimal(s)?,
        (ElementType::Decimal128, RawBsonRef::Boolean(b)) => exact_decimal(i64::from(b)),
        (ElementType::Decimal128, RawBsonRef::DateTime(t)) => exact_decimal(t.timestamp_millis()),
        (ElementType::Decimal128, RawBsonRef::Int32(i)) => exact_decimal(i64::from(i)),
        (ElementType::Decimal128, RawBsonRef::Int64(i)) => exact_decimal(i),
        (ElementType::Decimal128, RawBsonRef::Decimal128(d)) => RawBson::Decimal128(d),

        _ => return Err(unsupported()),
    })
}

fn date(ms: i64) -> RawBson {
    RawBson::DateTime(bson::DateTime::from_millis(ms))
}

fn check_finite(d: f64) -> Result<(), CommandError> {
    if d.is_nan() {
        return Err(conversion_failure(
            "Attempt to convert NaN value to integer type in $convert with no onError value",
        ));
    }
    if d.is_infinite() {
        return Err(conversion_failure(
            "Attempt to convert infinity value to integer type in $convert with no onError value",
        ));
    }
    Ok(())
}

/// A double cast to a long (truncated), with mongod's checks.
fn double_to_long(d: f64) -> Result<i64, CommandError> {
    check_finite(d)?;
    // 2^63, the first double past the longs.
    let limit = 9_223_372_036_854_775_808.0_f64;
    if !(d >= -limit && d < limit) {
        return Err(overflow(&format_g(d, 6)));
    }
    #[expect(clippy::cast_possible_truncation, reason = "range checked above")]
    Ok(d as i64)
}

/// A decimal truncated toward zero to a long, exactly, with mongod's checks.
fn decimal_to_long(d: bson::Decimal128) -> Result<i64, CommandError> {
    let (neg, coeff, exp) = match Dec::of(d) {
        Dec::NaN => return check_finite(f64::NAN).map(|()| 0),
        Dec::Inf { .. } => return check_finite(f64::INFINITY).map(|()| 0),
        Dec::Finite { neg, coeff, exp } => (neg, coeff, exp),
    };
    let magnitude = if coeff == 0 {
        Some(0)
    } else if exp >= 0 {
        10_u128
            .checked_pow(exp.unsigned_abs())
            .and_then(|p| coeff.checked_mul(p))
    } else {
        Some(
            10_u128
                .checked_pow(exp.unsigned_abs())
                .map_or(0, |p| coeff / p),
        )
    };
    let value = magnitude
        .and_then(|m| i128::try_from(m).ok())
        .map(|m| if neg { -m } else { m })
        .and_then(|v| i64::try_from(v).ok());
    value.ok_or_else(|| overflow(&d.to_string()))
}

/// An integer as a decimal, exactly.
fn exact_decimal(i: i64) -> RawBson {
    RawBson::Decimal128(Decimal::of_i64(i).bson())
}

/// A double as mongod's `Decimal128(double)`: its 15 significant digits (`0.1` is
/// `0.100000000000000`).
fn decimal_of_double(d: f64) -> RawBson {
    RawBson::Decimal128(Decimal::of_f64(d).bson())
}

fn number_failure(s: &str, reason: &str) -> CommandError {
    conversion_failure(format!(
        "Failed to parse number '{s}' in $convert with no onError value: {reason}"
    ))
}

fn reject_hex(s: &str) -> Result<(), CommandError> {
    if s.starts_with("0x") || s.starts_with("0X") {
        return Err(conversion_failure(format!(
            "Illegal hexadecimal input in $convert with no onError value: {s}"
        )));
    }
    Ok(())
}

/// A base-10 integer as mongod's `NumberParser` reads it: an optional sign, then digits only.
fn parse_integer(s: &str) -> Result<i64, CommandError> {
    reject_hex(s)?;
    let digits = s.strip_prefix(['-', '+']).unwrap_or(s);
    if digits.is_empty() {
        return Err(number_failure(s, "No digits"));
    }
    if !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(number_failure(s, "Did not consume whole string."));
    }
    // Digits only, so the one failure left is range.
    s.parse::<i64>().map_err(|_| number_failure(s, "Overflow"))
}

/// A double as `strtod` reads the whole string (no leading whitespace).
fn parse_double(s: &str) -> Result<f64, CommandError> {
    reject_hex(s)?;
    if s.is_empty() {
        return Err(number_failure(s, "Empty string"));
    }
    if s.starts_with(|c: char| c.is_ascii_whitespace()) {
        return Err(number_failure(s, "Leading whitespace"));
    }
    let Ok(d) = s.parse::<f64>() else {
        // Whether `strtod` would take a prefix decides between the two messages: a sign, then
        // a digit, a `.` and a digit, or `inf`/`nan`.
        let t = s.strip_prefix(['+', '-']).unwrap_or(s).as_bytes();
        let digit = |i: usize| t.get(i).is_some_and(u8::is_ascii_digit);
        let word = t.get(..3).map(<[u8]>::to_ascii_lowercase);
        let consumed_some = digit(0)
            || (t.first() == Some(&b'.') && digit(1))
            || word.as_deref() == Some(b"inf")
            || word.as_deref() == Some(b"nan");
        return Err(number_failure(
            s,
            if consumed_some {
                "Did not consume whole string."
            } else {
                "Did not consume any digits"
            },
        ));
    };
    let lower = s.to_ascii_lowercase();
    let named = lower.contains("inf") || lower.contains("nan");
    let nonzero_digit = s
        .split(['e', 'E'])
        .next()
        .is_some_and(|m| m.bytes().any(|b| (b'1'..=b'9').contains(&b)));
    // `strtod` sets ERANGE on overflow and on underflow to zero or a subnormal.
    if (d.is_infinite() && !named) || (nonzero_digit && d.abs() < f64::MIN_POSITIVE) {
        return Err(number_failure(s, "Out of range"));
    }
    Ok(d)
}

fn parse_decimal(s: &str) -> Result<RawBson, CommandError> {
    reject_hex(s)?;
    if s.is_empty() {
        return Err(number_failure(s, "Empty string"));
    }
    s.parse::<bson::Decimal128>()
        .map(RawBson::Decimal128)
        .map_err(|_| number_failure(s, "Failed to parse string to decimal"))
}

fn parse_oid(s: &str) -> Result<ObjectId, CommandError> {
    let fail = |reason: String| {
        conversion_failure(format!(
            "Failed to parse objectId '{s}' in $convert with no onError value: {reason}"
        ))
    };
    if s.len() != 24 {
        return Err(fail(format!(
            "Invalid string length for parsing to OID, expected 24 but found {}",
            s.len()
        )));
    }
    if let Some(c) = s.chars().find(|c| !c.is_ascii_hexdigit()) {
        return Err(fail(format!("Invalid character found in hex string: {c}")));
    }
    ObjectId::parse_str(s).map_err(|e| fail(e.to_string()))
}

/// A double as mongod 7.0's `$convert` writes it: C's `%g` (6 significant digits, through
/// `str::stream`), with `Infinity`, `-Infinity`, `NaN` and `-0` spelled out. (Later versions
/// print the shortest round-trip form.)
fn format_double(d: f64) -> String {
    if d.is_nan() {
        return "NaN".to_owned();
    }
    if d.is_infinite() {
        return if d > 0.0 { "Infinity" } else { "-Infinity" }.to_owned();
    }
    if d == 0.0 && d.is_sign_negative() {
        return "-0".to_owned();
    }
    format_g(d, 6)
}

/// The civil date of a day count since 1970-01-01.
fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// A date as `%Y-%m-%dT%H:%M:%S.%LZ`.
fn iso_date(ms: i64) -> String {
    let days = ms.div_euclid(86_400_000);
    let rem = ms.rem_euclid(86_400_000);
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3_600_000,
        rem / 60_000 % 60,
        rem / 1000 % 60,
        rem % 1000
    )
}

/// A date string as `$dateFromString` reads it without a format (in UTC), as milliseconds
/// since the epoch; mongod's `ConversionFailure` when it does not parse.
fn parse_date(s: &str) -> Result<i64, CommandError> {
    super::date::string_millis(s).map_err(|message| {
        conversion_failure(message.unwrap_or_else(|| {
            format!("Error parsing date string '{s}'; Ebb does not read this form of date")
        }))
    })
}

#[cfg(test)]
mod tests {
    use std::str::FromStr;

    use bson::oid::ObjectId;
    use bson::{Decimal128, RawBson, rawbson, rawdoc};

    use crate::error::{CommandError, ErrorCode};
    use crate::query::Expression;

    fn eval(expr: &RawBson) -> Result<Option<RawBson>, CommandError> {
        Expression::parse(expr.as_raw_bson_ref())?.evaluate(&rawdoc! {"s": "12", "n": null})
    }

    fn dec(s: &str) -> RawBson {
        RawBson::Decimal128(Decimal128::from_str(s).unwrap())
    }

    fn date(ms: i64) -> RawBson {
        RawBson::DateTime(bson::DateTime::from_millis(ms))
    }

    #[test]
    fn conversions_table() -> Result<(), CommandError> {
        let oid = ObjectId::parse_str("5ab9cbfa31c2ab715d42129e").unwrap();
        let cases: Vec<(RawBson, RawBson)> = vec![
            (rawbson!({"$toInt": "$s"}), rawbson!(12)),
            (rawbson!({"$toInt": "-7"}), rawbson!(-7)),
            (rawbson!({"$toInt": 2.9}), rawbson!(2)),
            (rawbson!({"$toInt": -2.9}), rawbson!(-2)),
            (rawbson!({"$toInt": true}), rawbson!(1)),
            (rawbson!({"$toInt": [5_i64]}), rawbson!(5)),
            (rawbson!({"$toInt": "$n"}), RawBson::Null),
            (rawbson!({"$toInt": "$missing"}), RawBson::Null),
            (
                rawbson!({"$toLong": "5000000000"}),
                RawBson::Int64(5_000_000_000),
            ),
            (rawbson!({"$toLong": {"$toDate": 5_i64}}), RawBson::Int64(5)),
            (rawbson!({"$toLong": dec("-12.9")}), RawBson::Int64(-12)),
            (rawbson!({"$toDouble": "1.5"}), rawbson!(1.5)),
            (rawbson!({"$toDouble": "-1e3"}), rawbson!(-1000.0)),
            (rawbson!({"$toDouble": false}), rawbson!(0.0)),
            (rawbson!({"$toDouble": 7_i64}), rawbson!(7.0)),
            (rawbson!({"$toDouble": dec("2.5")}), rawbson!(2.5)),
            (rawbson!({"$toDouble": date(1_000)}), rawbson!(1000.0)),
            (rawbson!({"$toDecimal": 0.1}), dec("0.100000000000000")),
            (rawbson!({"$toDecimal": 2.5}), dec("2.50000000000000")),
            (rawbson!({"$toDecimal": 5}), dec("5")),
            (rawbson!({"$toDecimal": "1.23"}), dec("1.23")),
            (rawbson!({"$toDecimal": true}), dec("1")),
            (rawbson!({"$toBool": 0}), rawbson!(false)),
            (rawbson!({"$toBool": 0.5}), rawbson!(true)),
            (rawbson!({"$toBool": "false"}), rawbson!(true)),
            (rawbson!({"$toBool": ""}), rawbson!(true)),
            (rawbson!({"$toBool": [[]]}), rawbson!(true)),
            (rawbson!({"$toBool": dec("0")}), rawbson!(false)),
            (rawbson!({"$toString": 2.5}), rawbson!("2.5")),
            (rawbson!({"$toString": 1.0}), rawbson!("1")),
            (rawbson!({"$toString": 1e16}), rawbson!("1e+16")),
            (rawbson!({"$toString": 1.5e-7}), rawbson!("1.5e-07")),
            (rawbson!({"$toString": 0.0001}), rawbson!("0.0001")),
            (rawbson!({"$toString": 123_456.789}), rawbson!("123457")),
            (
                rawbson!({"$toString": 1_234_567.89}),
                rawbson!("1.23457e+06"),
            ),
            (rawbson!({"$toString": -0.0}), rawbson!("-0")),
            (rawbson!({"$toString": f64::INFINITY}), rawbson!("Infinity")),
            (rawbson!({"$toString": 42}), rawbson!("42")),
            (rawbson!({"$toString": true}), rawbson!("true")),
            (rawbson!({"$toString": dec("1.50")}), rawbson!("1.50")),
            (
                rawbson!({"$toString": RawBson::ObjectId(oid)}),
                rawbson!("5ab9cbfa31c2ab715d42129e"),
            ),
            (
                rawbson!({"$toString": date(1_522_169_931_538)}),
                rawbson!("2018-03-27T16:58:51.538Z"),
            ),
            (
                rawbson!({"$toString": date(-1)}),
                rawbson!("1969-12-31T23:59:59.999Z"),
            ),
            (
                rawbson!({"$toObjectId": "5ab9cbfa31c2ab715d42129e"}),
                RawBson::ObjectId(oid),
            ),
            (
                rawbson!({"$toDate": "2018-03-27T16:58:51.538Z"}),
                date(1_522_169_931_538),
            ),
            (rawbson!({"$toDate": "2018-03-27"}), date(1_522_108_800_000)),
            (
                rawbson!({"$toDate": "2018-03-27T18:58:51+02:00"}),
                date(1_522_169_931_000),
            ),
            (
                rawbson!({"$toDate": 120_000_000_000.5}),
                date(120_000_000_000),
            ),
            (
                rawbson!({"$toDate": dec("1253372036000.50")}),
                date(1_253_372_036_000),
            ),
            (
                rawbson!({"$toDate": RawBson::ObjectId(oid)}),
                date(1_522_125_818_000),
            ),
            (
                rawbson!({"$toDate": RawBson::Timestamp(bson::Timestamp { time: 5, increment: 1 })}),
                date(5_000),
            ),
            (rawbson!({"$isNumber": 1}), rawbson!(true)),
            (rawbson!({"$isNumber": dec("1")}), rawbson!(true)),
            (rawbson!({"$isNumber": "1"}), rawbson!(false)),
            (rawbson!({"$isNumber": "$missing"}), rawbson!(false)),
            // $convert: names, numbers, onError, onNull.
            (
                rawbson!({"$convert": {"input": "5", "to": "int"}}),
                rawbson!(5),
            ),
            (
                rawbson!({"$convert": {"input": "5", "to": 16}}),
                rawbson!(5),
            ),
            (
                rawbson!({"$convert": {"input": "5", "to": 18.0}}),
                RawBson::Int64(5),
            ),
            (
                rawbson!({"$convert": {"input": 5, "to": "bool"}}),
                rawbson!(true),
            ),
            (
                rawbson!({"$convert": {"input": "x", "to": "int", "onError": "bad"}}),
                rawbson!("bad"),
            ),
            (
                rawbson!({"$convert": {"input": [1], "to": "int", "onError": -1}}),
                rawbson!(-1),
            ),
            (
                rawbson!({"$convert": {"input": "$n", "to": "int", "onNull": 0}}),
                rawbson!(0),
            ),
            (
                rawbson!({"$convert": {"input": "$missing", "to": "int", "onNull": "none"}}),
                rawbson!("none"),
            ),
            (
                rawbson!({"$convert": {"input": "$n", "to": "int"}}),
                RawBson::Null,
            ),
            (
                rawbson!({"$convert": {"input": 5, "to": null}}),
                RawBson::Null,
            ),
            (
                rawbson!({"$convert": {"input": 5, "to": "$missing"}}),
                RawBson::Null,
            ),
            (rawbson!({"$type": {"$toLong": 1}}), rawbson!("long")),
        ];
        for (expr, want) in cases {
            assert_eq!(eval(&expr)?, Some(want), "{expr:?}");
        }
        Ok(())
    }

    #[test]
    fn conversion_errors() {
        let failure = ErrorCode::ConversionFailure;
        let cases: Vec<(RawBson, ErrorCode, &str)> = vec![
            (
                rawbson!({"$toInt": "1.5"}),
                failure,
                "Failed to parse number '1.5' in $convert with no onError value: Did not consume \
                 whole string.",
            ),
            (
                rawbson!({"$toInt": ""}),
                failure,
                "Failed to parse number '' in $convert with no onError value: No digits",
            ),
            (
                rawbson!({"$toInt": "3000000000"}),
                failure,
                "Failed to parse number '3000000000' in $convert with no onError value: Overflow",
            ),
            (
                rawbson!({"$toLong": "0x1F"}),
                failure,
                "Illegal hexadecimal input in $convert with no onError value: 0x1F",
            ),
            (
                rawbson!({"$toDouble": " 1"}),
                failure,
                "Failed to parse number ' 1' in $convert with no onError value: Leading whitespace",
            ),
            (
                rawbson!({"$toDouble": "abc"}),
                failure,
                "Failed to parse number 'abc' in $convert with no onError value: Did not consume \
                 any digits",
            ),
            (
                rawbson!({"$toDouble": "-.5x"}),
                failure,
                "Failed to parse number '-.5x' in $convert with no onError value: Did not consume \
                 whole string.",
            ),
            (
                rawbson!({"$toDouble": "1e400"}),
                failure,
                "Failed to parse number '1e400' in $convert with no onError value: Out of range",
            ),
            (
                rawbson!({"$toDouble": ""}),
                failure,
                "Failed to parse number '' in $convert with no onError value: Empty string",
            ),
            (
                rawbson!({"$toInt": 3e9}),
                failure,
                "Conversion would overflow target type in $convert with no onError value: 3e+09",
            ),
            (
                rawbson!({"$toInt": 5_000_000_000_i64}),
                failure,
                "Conversion would overflow target type in $convert with no onError value: ",
            ),
            (
                rawbson!({"$toLong": f64::NAN}),
                failure,
                "Attempt to convert NaN value to integer type in $convert with no onError value",
            ),
            (
                rawbson!({"$toInt": f64::NEG_INFINITY}),
                failure,
                "Attempt to convert infinity value to integer type in $convert with no onError \
                 value",
            ),
            (
                rawbson!({"$toObjectId": "abc"}),
                failure,
                "Failed to parse objectId 'abc' in $convert with no onError value: Invalid string \
                 length for parsing to OID, expected 24 but found 3",
            ),
            (
                rawbson!({"$toObjectId": "5ab9cbfa31c2ab715d42129z"}),
                failure,
                "Failed to parse objectId '5ab9cbfa31c2ab715d42129z' in $convert with no onError \
                 value: Invalid character found in hex string: z",
            ),
            (
                rawbson!({"$toDate": 5}),
                failure,
                "Unsupported conversion from int to date in $convert with no onError value",
            ),
            (
                rawbson!({"$toString": [[1]]}),
                failure,
                "Unsupported conversion from array to string in $convert with no onError value",
            ),
            (
                rawbson!({"$toDate": "2020-01-01T00:00+1\u{e9}1"}),
                failure,
                "Error parsing date string '2020-01-01T00:00+1\u{e9}1'; Ebb does not read this \
                 form of date",
            ),
            (
                // mongod's (timelib's) message, as `$dateFromString` gives it.
                rawbson!({"$toDate": "2024-02-30"}),
                failure,
                "Error parsing date string '2024-02-30'; 11: The parsed date was invalid '\0'",
            ),
            (
                rawbson!({"$convert": {"input": 1, "to": "missing"}}),
                failure,
                "Unsupported conversion from int to missing in $convert with no onError value",
            ),
            (
                rawbson!({"$convert": {"input": 1, "to": "int128"}}),
                ErrorCode::BadValue,
                "Unknown type name: int128",
            ),
            (
                rawbson!({"$convert": {"input": 1, "to": 1.5, "onError": 0}}),
                ErrorCode::FailedToParse,
                "In $convert, numeric 'to' argument is not an integer",
            ),
            (
                rawbson!({"$convert": {"input": 1, "to": 20}}),
                ErrorCode::FailedToParse,
                "In $convert, numeric value for 'to' does not correspond to a BSON type: 20",
            ),
            (
                rawbson!({"$convert": {"input": 1, "to": true}}),
                ErrorCode::FailedToParse,
                "$convert's 'to' argument must be a string or number, but is bool",
            ),
            (
                rawbson!({"$convert": {"to": "int"}}),
                ErrorCode::FailedToParse,
                "Missing 'input' parameter to $convert",
            ),
            (
                rawbson!({"$convert": {"input": 1}}),
                ErrorCode::FailedToParse,
                "Missing 'to' parameter to $convert",
            ),
            (
                rawbson!({"$convert": {"input": 1, "to": "int", "x": 1}}),
                ErrorCode::FailedToParse,
                "$convert found an unknown argument: x",
            ),
            (
                rawbson!({"$convert": 1}),
                ErrorCode::FailedToParse,
                "$convert expects an object of named arguments but found: int",
            ),
            (
                rawbson!({"$toInt": [1, 2]}),
                ErrorCode::Location(16020),
                "Expression $toInt takes exactly 1 argument. 2 were passed in.",
            ),
        ];
        for (expr, code, msg) in cases {
            let err = eval(&expr).unwrap_err();
            assert_eq!((err.code, err.errmsg.as_str()), (code, msg), "{expr:?}");
        }
    }
}
