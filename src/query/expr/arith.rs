//! Arithmetic operators with mongod's type promotion (int → long → double on overflow):
//! `$add` (numbers and at most one date), `$subtract` (numbers, dates), `$multiply $divide
//! $mod $abs`.

use std::str::FromStr;

use bson::{RawBson, RawBsonRef};

use super::{
    CommandError, Env, ErrorCode, Node, PositionalOp, Scope, Value, arg, call, eval_all, exactly,
    loc, nullish, parse_args, r, tname,
};
use crate::query::decimal::Decimal;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Add,
    Subtract,
    Multiply,
    Divide,
    Mod,
    Abs,
}

pub(super) fn parse_op(
    name: &str,
    v: RawBsonRef<'_>,
    sc: &mut Scope<'_>,
) -> Option<Result<Node, CommandError>> {
    let (op, arity) = match name {
        "add" => (Op::Add, None),
        "multiply" => (Op::Multiply, None),
        "subtract" => (Op::Subtract, Some(2)),
        "divide" => (Op::Divide, Some(2)),
        "mod" => (Op::Mod, Some(2)),
        "abs" => (Op::Abs, Some(1)),
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
            Op::Add | Op::Multiply => sum_or_product(self == Op::Add, &eval_all(args, env)?),
            Op::Subtract => subtract(r(&arg(0)?), r(&arg(1)?)),
            Op::Divide => divide(r(&arg(0)?), r(&arg(1)?)),
            Op::Mod => modulo(r(&arg(0)?), r(&arg(1)?)),
            Op::Abs => abs(r(&arg(0)?)),
        }
    }
}

/// A number by its result type, narrowest first.
#[derive(Clone, Copy, Debug)]
pub(super) enum Num {
    Int(i32),
    Long(i64),
    Double(f64),
    /// Decimal128, computed exactly (`query::decimal`).
    Decimal(Decimal),
}

impl Num {
    pub(super) fn of(v: RawBsonRef<'_>) -> Option<Num> {
        match v {
            RawBsonRef::Int32(i) => Some(Num::Int(i)),
            RawBsonRef::Int64(i) => Some(Num::Long(i)),
            RawBsonRef::Double(d) => Some(Num::Double(d)),
            RawBsonRef::Decimal128(d) => Some(Num::Decimal(Decimal::of_bson(d))),
            _ => None,
        }
    }

    #[expect(clippy::cast_precision_loss, reason = "promotion to double, as mongod")]
    pub(super) fn f64(self) -> f64 {
        match self {
            Num::Int(i) => f64::from(i),
            Num::Long(i) => i as f64,
            Num::Double(d) => d,
            Num::Decimal(d) => d.f64(),
        }
    }

    /// As mongod's `Value::coerceToDecimal`: integers exactly, a double to 15 digits.
    pub(super) fn decimal(self) -> Decimal {
        match self {
            Num::Int(i) => Decimal::of_i64(i64::from(i)),
            Num::Long(i) => Decimal::of_i64(i),
            Num::Double(d) => Decimal::of_f64(d),
            Num::Decimal(d) => d,
        }
    }

    fn rank(self) -> u8 {
        match self {
            Num::Int(_) => 0,
            Num::Long(_) => 1,
            Num::Double(_) => 2,
            Num::Decimal(_) => 3,
        }
    }

    pub(super) fn i64(self) -> Option<i64> {
        match self {
            Num::Int(i) => Some(i64::from(i)),
            Num::Long(i) => Some(i),
            Num::Double(_) | Num::Decimal(_) => None,
        }
    }

    pub(super) fn bson(self) -> RawBson {
        match self {
            Num::Int(i) => RawBson::Int32(i),
            Num::Long(i) => RawBson::Int64(i),
            Num::Double(d) => RawBson::Double(d),
            Num::Decimal(d) => RawBson::Decimal128(d.bson()),
        }
    }
}

/// A double result given as a decimal: the shortest digits that read back as `d` (for the
/// functions Ebb computes through doubles: `$exp $ln $log $pow $sqrt`, trigonometry).
pub(super) fn decimal(d: f64) -> RawBson {
    let text = if d.is_nan() {
        "NaN".to_owned()
    } else if d.is_infinite() {
        if d > 0.0 { "Infinity" } else { "-Infinity" }.to_owned()
    } else {
        // The shortest digits that read back as `d`, without an exponent when they fit a
        // decimal's 34 digits (`50`, not `5E+1`, as mongod's decimal arithmetic writes it).
        let plain = format!("{d}");
        let digits = plain.bytes().filter(u8::is_ascii_digit).count();
        if digits <= 34 {
            plain
        } else {
            format!("{d:e}")
        }
    };
    bson::Decimal128::from_str(&text).map_or(RawBson::Double(d), RawBson::Decimal128)
}

/// An integer result of the given width, promoted when it does not fit.
fn int_result(v: Option<i64>, widest: u8, fallback: f64) -> Num {
    match v {
        Some(v) if widest == 0 => i32::try_from(v).map_or(Num::Long(v), Num::Int),
        Some(v) => Num::Long(v),
        None => Num::Double(fallback),
    }
}

/// Combines two numbers with an integer operation (checked), a float operation and a decimal
/// one (both operands coerced to decimals, as mongod's binary operators do).
fn combine(
    a: Num,
    b: Num,
    int_op: impl Fn(i64, i64) -> Option<i64>,
    float_op: impl Fn(f64, f64) -> f64,
    dec_op: impl Fn(Decimal, Decimal) -> Decimal,
) -> Num {
    let widest = a.rank().max(b.rank());
    match (a.i64(), b.i64()) {
        (Some(x), Some(y)) => int_result(int_op(x, y), widest, float_op(a.f64(), b.f64())),
        _ if widest == 3 => Num::Decimal(dec_op(a.decimal(), b.decimal())),
        _ => Num::Double(float_op(a.f64(), b.f64())),
    }
}

#[expect(clippy::cast_possible_truncation, reason = "mongod rounds to whole ms")]
fn round_ms(n: Num) -> i64 {
    n.i64().unwrap_or_else(|| n.f64().round() as i64)
}

/// The running total of `$add` or product of `$multiply`, widened as mongod's `AddState` and
/// `MultiplyState` widen it: int to long to double on overflow, and to decimal at the first
/// decimal operand (an integer total exactly; a double total to 34 digits for a sum, to 15 for
/// a product); each later operand is coerced to that type.
struct Running {
    add: bool,
    acc: Num,
}

impl Running {
    fn push(&mut self, n: Num) {
        let widest = self.acc.rank().max(n.rank());
        if widest == 3 {
            let total = match self.acc {
                Num::Decimal(d) => d,
                Num::Double(d) if self.add => Decimal::of_f64_34(d),
                other => other.decimal(),
            };
            let n = n.decimal();
            self.acc = Num::Decimal(if self.add { total + n } else { total * n });
        } else if self.add {
            self.acc = combine(self.acc, n, i64::checked_add, |x, y| x + y, |x, y| x + y);
        } else {
            self.acc = combine(self.acc, n, i64::checked_mul, |x, y| x * y, |x, y| x * y);
        }
    }
}

/// `$add` (numbers and at most one date) and `$multiply` (numbers).
fn sum_or_product(add: bool, values: &[Value]) -> Result<Value, CommandError> {
    let mut running = Running {
        add,
        acc: if add { Num::Int(0) } else { Num::Int(1) },
    };
    let mut date: Option<i64> = None;
    for v in values {
        let v = v.as_ref().map(RawBson::as_raw_bson_ref);
        if nullish(v) {
            return Ok(Some(RawBson::Null));
        }
        if let (true, Some(RawBsonRef::DateTime(d))) = (add, v) {
            if date.is_some() {
                return Err(loc(16612, "only one date allowed in an $add expression"));
            }
            date = Some(d.timestamp_millis());
            continue;
        }
        let Some(n) = v.and_then(Num::of) else {
            return Err(if add {
                loc(
                    16554,
                    format!("$add only supports numeric or date types, not {}", tname(v)),
                )
            } else {
                loc(
                    16555,
                    format!("$multiply only supports numeric types, not {}", tname(v)),
                )
            });
        };
        running.push(n);
    }
    let acc = running.acc;
    Ok(Some(match date {
        Some(ms) => RawBson::DateTime(bson::DateTime::from_millis(ms.wrapping_add(round_ms(acc)))),
        None => acc.bson(),
    }))
}

fn subtract(a: Option<RawBsonRef<'_>>, b: Option<RawBsonRef<'_>>) -> Result<Value, CommandError> {
    if nullish(a) || nullish(b) {
        return Ok(Some(RawBson::Null));
    }
    match (a, b) {
        (Some(RawBsonRef::DateTime(x)), Some(RawBsonRef::DateTime(y))) => Ok(Some(RawBson::Int64(
            x.timestamp_millis().wrapping_sub(y.timestamp_millis()),
        ))),
        (Some(RawBsonRef::DateTime(x)), Some(y)) if Num::of(y).is_some() => {
            let n = Num::of(y).unwrap_or(Num::Int(0));
            Ok(Some(RawBson::DateTime(bson::DateTime::from_millis(
                x.timestamp_millis().wrapping_sub(round_ms(n)),
            ))))
        }
        (Some(RawBsonRef::DateTime(_)), Some(_)) => Err(loc(
            16613,
            format!("cant $subtract a {} from a Date", tname(b)),
        )),
        (Some(x), Some(y)) => match (Num::of(x), Num::of(y)) {
            (Some(x), Some(y)) => Ok(Some(
                combine(x, y, i64::checked_sub, |x, y| x - y, |x, y| x - y).bson(),
            )),
            _ => Err(loc(
                16556,
                format!("cant $subtract a {} from a {}", tname(b), tname(a)),
            )),
        },
        _ => Ok(Some(RawBson::Null)),
    }
}

fn both_numbers<'a>(
    op: &str,
    code: ErrorCode,
    a: Option<RawBsonRef<'a>>,
    b: Option<RawBsonRef<'a>>,
) -> Result<(Num, Num), CommandError> {
    match (a.and_then(Num::of), b.and_then(Num::of)) {
        (Some(x), Some(y)) => Ok((x, y)),
        _ => Err(CommandError::new(
            code,
            format!(
                "{op} only supports numeric types, not {} and {}",
                tname(a),
                tname(b)
            ),
        )),
    }
}

fn divide(a: Option<RawBsonRef<'_>>, b: Option<RawBsonRef<'_>>) -> Result<Value, CommandError> {
    if nullish(a) || nullish(b) {
        return Ok(Some(RawBson::Null));
    }
    // mongod 7.0's `ExpressionDivide::apply`: TypeMismatch and BadValue (older servers
    // answered 16609 and 16608).
    let (x, y) = both_numbers("$divide", ErrorCode::TypeMismatch, a, b)?;
    if x.rank().max(y.rank()) == 3 {
        let (x, y) = (x.decimal(), y.decimal());
        if y.is_zero() {
            return Err(CommandError::new(
                ErrorCode::BadValue,
                "can't $divide by zero",
            ));
        }
        return Ok(Some(RawBson::Decimal128((x / y).bson())));
    }
    if y.f64() == 0.0 {
        return Err(CommandError::new(
            ErrorCode::BadValue,
            "can't $divide by zero",
        ));
    }
    Ok(Some(RawBson::Double(x.f64() / y.f64())))
}

fn modulo(a: Option<RawBsonRef<'_>>, b: Option<RawBsonRef<'_>>) -> Result<Value, CommandError> {
    if nullish(a) || nullish(b) {
        return Ok(Some(RawBson::Null));
    }
    let (x, y) = both_numbers("$mod", ErrorCode::Location(16611), a, b)?;
    let zero = match y {
        Num::Decimal(d) => d.is_zero(),
        other => other.f64() == 0.0,
    };
    if zero {
        return Err(loc(16610, "can't $mod by zero"));
    }
    // `i64::MIN % -1` overflows; its remainder is 0.
    Ok(Some(
        combine(
            x,
            y,
            |p, q| Some(p.checked_rem(q).unwrap_or(0)),
            |p, q| p % q,
            |p, q| p % q,
        )
        .bson(),
    ))
}

fn abs(v: Option<RawBsonRef<'_>>) -> Result<Value, CommandError> {
    if nullish(v) {
        return Ok(Some(RawBson::Null));
    }
    let Some(n) = v.and_then(Num::of) else {
        return Err(loc(
            28765,
            format!("$abs only supports numeric types, not {}", tname(v)),
        ));
    };
    Ok(Some(match n {
        Num::Int(i) => i
            .checked_abs()
            .map_or(RawBson::Int64(i64::from(i).abs()), RawBson::Int32),
        Num::Long(i) => RawBson::Int64(
            i.checked_abs()
                .ok_or_else(|| loc(28680, "can't take $abs of long long min"))?,
        ),
        Num::Double(d) => RawBson::Double(d.abs()),
        Num::Decimal(d) => RawBson::Decimal128(d.abs().bson()),
    }))
}
