//! Numeric functions: rounding (`$ceil $floor $trunc $round`, with a `place`), powers and
//! logarithms (`$sqrt $pow $exp $ln $log $log10`) and trigonometry (`$sin $cos $tan $asin $acos
//! $atan $atan2 $sinh $cosh $tanh $asinh $acosh $atanh $degreesToRadians $radiansToDegrees`).
//!
//! Results keep mongod's types: rounding an int or a long gives the same type, the other
//! functions give a double (a decimal for a decimal input). A decimal input is computed in
//! decimal to 34 digits (`query::decimal`), its domain checked in decimal; only the paths
//! where mongod itself falls through to doubles use them. `$round` and `$trunc` on a double round its 34-digit
//! decimal form, as mongod does through a Decimal128 (so `{$round: [2.675, 2]}` is 2.67: the
//! double is 2.67499999…), then take the nearest double; `$round` rounds half to even.

use bson::{RawBson, RawBsonRef};

use super::arith::{Num, decimal};
use super::{
    CommandError, Env, Node, PositionalOp, Scope, Value, arg, call, exactly, format_g6,
    integral_i32, loc, nullish, parse_args, r, tname,
};
use crate::query::decimal::Decimal;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Ceil,
    Floor,
    Trunc,
    Round,
    Sqrt,
    Pow,
    Exp,
    Ln,
    Log,
    Log10,
    Trig(Trig),
    Atan2,
}

/// The one-argument trigonometric functions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Trig {
    Sin,
    Cos,
    Tan,
    Asin,
    Acos,
    Atan,
    Sinh,
    Cosh,
    Tanh,
    Asinh,
    Acosh,
    Atanh,
    DegreesToRadians,
    RadiansToDegrees,
}

pub(super) fn parse_op(
    name: &str,
    v: RawBsonRef<'_>,
    sc: &mut Scope<'_>,
) -> Option<Result<Node, CommandError>> {
    let op = match name {
        "ceil" => Op::Ceil,
        "floor" => Op::Floor,
        "trunc" => Op::Trunc,
        "round" => Op::Round,
        "sqrt" => Op::Sqrt,
        "pow" => Op::Pow,
        "exp" => Op::Exp,
        "ln" => Op::Ln,
        "log" => Op::Log,
        "log10" => Op::Log10,
        "atan2" => Op::Atan2,
        "sin" => Op::Trig(Trig::Sin),
        "cos" => Op::Trig(Trig::Cos),
        "tan" => Op::Trig(Trig::Tan),
        "asin" => Op::Trig(Trig::Asin),
        "acos" => Op::Trig(Trig::Acos),
        "atan" => Op::Trig(Trig::Atan),
        "sinh" => Op::Trig(Trig::Sinh),
        "cosh" => Op::Trig(Trig::Cosh),
        "tanh" => Op::Trig(Trig::Tanh),
        "asinh" => Op::Trig(Trig::Asinh),
        "acosh" => Op::Trig(Trig::Acosh),
        "atanh" => Op::Trig(Trig::Atanh),
        "degreesToRadians" => Op::Trig(Trig::DegreesToRadians),
        "radiansToDegrees" => Op::Trig(Trig::RadiansToDegrees),
        _ => return None,
    };
    Some(parse_args(v, sc).and_then(|args| {
        match op {
            Op::Trunc | Op::Round => {
                if args.is_empty() || args.len() > 2 {
                    return Err(loc(
                        28667,
                        format!(
                            "Expression ${name} takes at least 1 arguments, and at most 2, but {} \
                             were passed in.",
                            args.len()
                        ),
                    ));
                }
            }
            Op::Pow | Op::Log | Op::Atan2 => exactly(name, &args, 2)?,
            _ => exactly(name, &args, 1)?,
        }
        Ok(call(op, args))
    }))
}

impl PositionalOp for Op {
    fn eval(self, args: &[Node], env: Env<'_>) -> Result<Value, CommandError> {
        let a = arg(args, 0, env)?;
        let a = r(&a);
        match self {
            Op::Trunc | Op::Round => {
                let place = match args.get(1) {
                    Some(n) => super::eval(n, env)?,
                    None => Some(RawBson::Int32(0)),
                };
                round_or_trunc(self == Op::Round, a, r(&place))
            }
            Op::Pow => pow(a, r(&arg(args, 1, env)?)),
            Op::Log => log(a, r(&arg(args, 1, env)?)),
            Op::Atan2 => atan2(a, r(&arg(args, 1, env)?)),
            Op::Ceil | Op::Floor | Op::Sqrt | Op::Exp | Op::Ln | Op::Log10 | Op::Trig(_) => {
                let Some(n) = single_numeric(self, a)? else {
                    return Ok(Some(RawBson::Null));
                };
                unary(self, n).map(Some)
            }
        }
    }
}

fn op_name(op: Op) -> &'static str {
    match op {
        Op::Ceil => "$ceil",
        Op::Floor => "$floor",
        Op::Trunc => "$trunc",
        Op::Round => "$round",
        Op::Sqrt => "$sqrt",
        Op::Pow => "$pow",
        Op::Exp => "$exp",
        Op::Ln => "$ln",
        Op::Log => "$log",
        Op::Log10 => "$log10",
        Op::Atan2 => "$atan2",
        Op::Trig(t) => match t {
            Trig::Sin => "$sin",
            Trig::Cos => "$cos",
            Trig::Tan => "$tan",
            Trig::Asin => "$asin",
            Trig::Acos => "$acos",
            Trig::Atan => "$atan",
            Trig::Sinh => "$sinh",
            Trig::Cosh => "$cosh",
            Trig::Tanh => "$tanh",
            Trig::Asinh => "$asinh",
            Trig::Acosh => "$acosh",
            Trig::Atanh => "$atanh",
            Trig::DegreesToRadians => "$degreesToRadians",
            Trig::RadiansToDegrees => "$radiansToDegrees",
        },
    }
}

/// mongod's `ExpressionSingleNumericArg`: null for null or missing, 28765 for a non-number.
fn single_numeric(op: Op, v: Option<RawBsonRef<'_>>) -> Result<Option<Num>, CommandError> {
    if nullish(v) {
        return Ok(None);
    }
    match v.and_then(Num::of) {
        Some(n) => Ok(Some(n)),
        None => Err(loc(
            28765,
            format!(
                "{} only supports numeric types, not {}",
                op_name(op),
                tname(v)
            ),
        )),
    }
}

/// A double result, or a decimal one for a decimal input (the functions whose decimal paths
/// fall through to doubles).
fn float_result(input: Num, d: f64) -> RawBson {
    match input {
        Num::Decimal(_) => decimal(d),
        Num::Int(_) | Num::Long(_) | Num::Double(_) => RawBson::Double(d),
    }
}

fn unary(op: Op, n: Num) -> Result<RawBson, CommandError> {
    let x = n.f64();
    match op {
        Op::Ceil | Op::Floor => Ok(match n {
            Num::Int(_) | Num::Long(_) => n.bson(),
            Num::Double(_) => RawBson::Double(if op == Op::Ceil { x.ceil() } else { x.floor() }),
            Num::Decimal(d) => RawBson::Decimal128(d.floor_or_ceil(op == Op::Floor).bson()),
        }),
        Op::Sqrt => {
            // NaN gives NaN without an error.
            if let Num::Decimal(d) = n
                && !(d.is_negative() && !d.is_zero() && !d.is_nan())
            {
                return Ok(RawBson::Decimal128(d.sqrt().bson()));
            }
            if x < 0.0 {
                return Err(loc(
                    28714,
                    "$sqrt's argument must be greater than or equal to 0",
                ));
            }
            Ok(float_result(n, x.sqrt()))
        }
        Op::Exp => Ok(match n {
            Num::Decimal(d) => RawBson::Decimal128(d.exp().bson()),
            _ => float_result(n, x.exp()),
        }),
        Op::Ln | Op::Log10 => {
            // mongod's decimal path: a positive decimal's logarithm in decimal; anything else
            // falls through to the double checks.
            if let Num::Decimal(d) = n
                && !d.is_negative()
                && !d.is_zero()
                && !d.is_nan()
            {
                let v = if op == Op::Ln { d.ln() } else { d.log10() };
                return Ok(RawBson::Decimal128(v.bson()));
            }
            if !(x > 0.0 || x.is_nan()) {
                let (code, name) = if op == Op::Ln {
                    (28766, "$ln")
                } else {
                    (28761, "$log10")
                };
                return Err(loc(
                    code,
                    format!(
                        "{name}'s argument must be a positive number, but is {}",
                        format_g6(x)
                    ),
                ));
            }
            Ok(float_result(
                n,
                if op == Op::Ln { x.ln() } else { x.log10() },
            ))
        }
        Op::Trig(t) => trig(t, n),
        Op::Trunc | Op::Round | Op::Pow | Op::Log | Op::Atan2 => Err(CommandError::internal(
            "not a one-argument numeric function",
        )),
    }
}

/// The domain of a bounded function: inclusive `[lo,hi]` or exclusive `(lo,hi)`.
fn bounds(t: Trig) -> Option<(f64, f64, bool)> {
    match t {
        Trig::Asin | Trig::Acos | Trig::Atanh => Some((-1.0, 1.0, true)),
        Trig::Acosh => Some((1.0, f64::INFINITY, true)),
        Trig::Sin | Trig::Cos | Trig::Tan => Some((f64::NEG_INFINITY, f64::INFINITY, false)),
        Trig::Atan
        | Trig::Sinh
        | Trig::Cosh
        | Trig::Tanh
        | Trig::Asinh
        | Trig::DegreesToRadians
        | Trig::RadiansToDegrees => None,
    }
}

/// mongod's `ExpressionBoundedTrigonometric` check: a double against the bounds as doubles, a
/// decimal against them as decimals (`Decimal128(bound)`), the input written as mongod writes
/// it (a double's 6 significant digits, a decimal's own digits).
fn check_bounds(t: Trig, n: Num) -> Result<(), CommandError> {
    let Some((lo, hi, inclusive)) = bounds(t) else {
        return Ok(());
    };
    let (inside, shown) = match n {
        Num::Decimal(d) => {
            let (lo_d, hi_d) = (Decimal::of_f64(lo), Decimal::of_f64(hi));
            let above = d
                .compare(lo_d)
                .is_some_and(|o| o.is_gt() || (inclusive && o.is_eq()));
            let below = d
                .compare(hi_d)
                .is_some_and(|o| o.is_lt() || (inclusive && o.is_eq()));
            (above && below, d.bson().to_string())
        }
        Num::Int(_) | Num::Long(_) | Num::Double(_) => {
            let x = n.f64();
            let inside = if inclusive {
                x >= lo && x <= hi
            } else {
                x > lo && x < hi
            };
            (inside, format_g6(x))
        }
    };
    if inside {
        return Ok(());
    }
    let (open, close) = if inclusive { ('[', ']') } else { ('(', ')') };
    Err(loc(
        50989,
        format!(
            "cannot apply {} to {shown}, value must in {open}{},{}{close}",
            op_name(Op::Trig(t)),
            format_g6(lo),
            format_g6(hi)
        ),
    ))
}

/// mongod's `Decimal128::kPiOver180` and `k180OverPi`: π to 34 digits divided by 180, and
/// 180 divided by it, each rounded to 34 digits.
fn degrees_factor(to_radians: bool) -> Decimal {
    let (pi, half_turn) = (Decimal::pi(), Decimal::of_i64(180));
    if to_radians {
        pi / half_turn
    } else {
        half_turn / pi
    }
}

fn trig(t: Trig, n: Num) -> Result<RawBson, CommandError> {
    if bounds(t).is_some() && n.f64().is_nan() {
        // mongod returns a NaN argument as it is.
        return Ok(n.bson());
    }
    check_bounds(t, n)?;
    if let Num::Decimal(d) = n {
        // Decimal128's own functions, to 34 digits.
        let v = match t {
            Trig::Sin => d.sin(),
            Trig::Cos => d.cos(),
            Trig::Tan => d.tan(),
            Trig::Asin => d.asin(),
            Trig::Acos => d.acos(),
            Trig::Atan => d.atan(),
            Trig::Sinh => d.sinh(),
            Trig::Cosh => d.cosh(),
            Trig::Tanh => d.tanh(),
            Trig::Asinh => d.asinh(),
            Trig::Acosh => d.acosh(),
            Trig::Atanh => d.atanh(),
            Trig::DegreesToRadians => d * degrees_factor(true),
            Trig::RadiansToDegrees => d * degrees_factor(false),
        };
        return Ok(RawBson::Decimal128(v.bson()));
    }
    let x = n.f64();
    let y = match t {
        Trig::Sin => x.sin(),
        Trig::Cos => x.cos(),
        Trig::Tan => x.tan(),
        Trig::Asin => x.asin(),
        Trig::Acos => x.acos(),
        Trig::Atan => x.atan(),
        Trig::Sinh => x.sinh(),
        Trig::Cosh => x.cosh(),
        Trig::Tanh => x.tanh(),
        Trig::Asinh => x.asinh(),
        Trig::Acosh => x.acosh(),
        Trig::Atanh => x.atanh(),
        Trig::DegreesToRadians => x.to_radians(),
        Trig::RadiansToDegrees => x.to_degrees(),
    };
    Ok(RawBson::Double(y))
}

/// `$atan2: [y, x]` (mongod's `ExpressionTwoNumericArgs`): in decimal when either is a
/// decimal (the other coerced, a double by its 15 digits), else in doubles.
fn atan2(y: Option<RawBsonRef<'_>>, x: Option<RawBsonRef<'_>>) -> Result<Value, CommandError> {
    if nullish(y) {
        return Ok(Some(RawBson::Null));
    }
    let Some(ny) = y.and_then(Num::of) else {
        return Err(loc(
            51044,
            format!("$atan2 only supports numeric types, not {}", tname(y)),
        ));
    };
    if nullish(x) {
        return Ok(Some(RawBson::Null));
    }
    let Some(nx) = x.and_then(Num::of) else {
        return Err(loc(
            51045,
            format!("$atan2 only supports numeric types, not {}", tname(x)),
        ));
    };
    Ok(Some(match (ny, nx) {
        (Num::Decimal(_), _) | (_, Num::Decimal(_)) => {
            RawBson::Decimal128(ny.decimal().atan2(nx.decimal()).bson())
        }
        _ => RawBson::Double(ny.f64().atan2(nx.f64())),
    }))
}

/// `$log: [number, base]`.
fn log(a: Option<RawBsonRef<'_>>, b: Option<RawBsonRef<'_>>) -> Result<Value, CommandError> {
    if nullish(a) || nullish(b) {
        return Ok(Some(RawBson::Null));
    }
    let Some(x) = a.and_then(Num::of) else {
        return Err(loc(
            28756,
            format!("$log's argument must be numeric, not {}", tname(a)),
        ));
    };
    let Some(base) = b.and_then(Num::of) else {
        return Err(loc(
            28757,
            format!("$log's base must be numeric, not {}", tname(b)),
        ));
    };
    if matches!(x, Num::Decimal(_)) || matches!(base, Num::Decimal(_)) {
        // mongod's decimal path: in decimal when the argument is positive and the base
        // positive and not 1 (`Decimal128::logarithm(base)`); anything else (NaN included)
        // falls through to the double checks and a double.
        let (xd, bd) = (x.decimal(), base.decimal());
        let zero = Decimal::of_i64(0);
        let one = Decimal::of_i64(1);
        let above_zero = |d: Decimal| d.compare(zero).is_some_and(std::cmp::Ordering::is_gt);
        if above_zero(xd)
            && above_zero(bd)
            && bd.compare(one).is_some_and(std::cmp::Ordering::is_ne)
        {
            return Ok(Some(RawBson::Decimal128(logarithm(xd, bd).bson())));
        }
    }
    let (xd, bd) = (x.f64(), base.f64());
    if !(xd > 0.0 || xd.is_nan()) {
        return Err(loc(
            28758,
            format!(
                "$log's argument must be a positive number, but is {}",
                format_g6(xd)
            ),
        ));
    }
    if !((bd > 0.0 && (bd - 1.0).abs() > 0.0) || bd.is_nan()) {
        return Err(loc(
            28759,
            format!(
                "$log's base must be a positive number not equal to 1, but is {}",
                format_g6(bd)
            ),
        ));
    }
    Ok(Some(RawBson::Double(xd.ln() / bd.ln())))
}

/// mongod's `Decimal128::logarithm(base)`: the base-2 and base-10 logarithms for those bases
/// (exact for their powers), else the two natural logarithms divided.
fn logarithm(x: Decimal, base: Decimal) -> Decimal {
    let is = |n: i64| {
        base.compare(Decimal::of_i64(n))
            .is_some_and(std::cmp::Ordering::is_eq)
    };
    if is(2) {
        x.log2()
    } else if is(10) {
        x.log10()
    } else {
        x.ln() / base.ln()
    }
}

/// `$pow: [base, exponent]`: an int when both are ints and the result fits (else a long), a
/// long when either is a long and the result fits, else a double (a decimal for a decimal).
fn pow(a: Option<RawBsonRef<'_>>, b: Option<RawBsonRef<'_>>) -> Result<Value, CommandError> {
    if nullish(a) || nullish(b) {
        return Ok(Some(RawBson::Null));
    }
    let Some(base) = a.and_then(Num::of) else {
        return Err(loc(
            28762,
            format!("$pow's base must be numeric, not {}", tname(a)),
        ));
    };
    let Some(exp) = b.and_then(Num::of) else {
        return Err(loc(
            28763,
            format!("$pow's exponent must be numeric, not {}", tname(b)),
        ));
    };
    let zero_base = || {
        loc(
            28764,
            "$pow cannot take a base of 0 and a negative exponent",
        )
    };
    if matches!(base, Num::Decimal(_)) || matches!(exp, Num::Decimal(_)) {
        // Checked in decimal, as mongod does: -0 is negative, 1E-400 is not zero.
        let (b, e) = (base.decimal(), exp.decimal());
        if b.is_zero() && e.is_signed() {
            return Err(zero_base());
        }
        return Ok(Some(RawBson::Decimal128(b.pow(e).bson())));
    }
    let (bd, ed) = (base.f64(), exp.f64());
    if bd == 0.0 && ed < 0.0 {
        return Err(zero_base());
    }
    let long_result = matches!(base, Num::Long(_)) || matches!(exp, Num::Long(_));
    let int = |v: i64| -> RawBson {
        if long_result {
            RawBson::Int64(v)
        } else {
            i32::try_from(v).map_or(RawBson::Int64(v), RawBson::Int32)
        }
    };
    let (bi, ei) = match (base, exp) {
        (Num::Decimal(_), _) | (_, Num::Decimal(_)) => {
            return Err(CommandError::internal("$pow of a decimal computed above"));
        }
        (Num::Double(_), _) | (_, Num::Double(_)) => {
            return Ok(Some(RawBson::Double(bd.powf(ed))));
        }
        (Num::Int(_) | Num::Long(_), Num::Int(_) | Num::Long(_)) => {
            (base.i64().unwrap_or(0), exp.i64().unwrap_or(0))
        }
    };
    Ok(Some(match bi {
        0 => int(i64::from(ei == 0)),
        1 => int(1),
        -1 => int(if ei % 2 == 0 { 1 } else { -1 }),
        _ => match u32::try_from(ei).ok().and_then(|e| bi.checked_pow(e)) {
            Some(v) => int(v),
            None => RawBson::Double(bd.powf(ed)),
        },
    }))
}

/// `$round` (half to even) or `$trunc` of `v` to `place` decimal places (negative: tens,
/// hundreds, …), with mongod's checks on `place`.
fn round_or_trunc(
    round: bool,
    v: Option<RawBsonRef<'_>>,
    place: Option<RawBsonRef<'_>>,
) -> Result<Value, CommandError> {
    let name = if round { "$round" } else { "$trunc" };
    if nullish(v) {
        return Ok(Some(RawBson::Null));
    }
    let Some(n) = v.and_then(Num::of) else {
        return Err(loc(
            51081,
            format!("{name} only supports numeric types, not {}", tname(v)),
        ));
    };
    if nullish(place) {
        return Ok(Some(RawBson::Null));
    }
    let Some(place) = place.and_then(integral_i32) else {
        return Err(loc(
            51082,
            format!("precision argument to  {name} must be a integral value"),
        ));
    };
    if !(-20..=100).contains(&place) {
        return Err(loc(
            51083,
            format!("cannot apply {name} with precision value {place} value must be in [-20, 100]"),
        ));
    }
    Ok(Some(match n {
        Num::Int(_) | Num::Long(_) if place >= 0 => n.bson(),
        Num::Int(i) => {
            let r = round_integer(i128::from(i), place, round);
            i32::try_from(r).map_or(
                RawBson::Int64(i64::try_from(r).unwrap_or(0)),
                RawBson::Int32,
            )
        }
        Num::Long(i) => {
            let r = round_integer(i128::from(i), place, round);
            RawBson::Int64(i64::try_from(r).map_err(|_| {
                loc(
                    51080,
                    format!(
                        "invalid conversion from Decimal128 result in {name} resulting from \
                         arguments: [{i}, {place}]"
                    ),
                )
            })?)
        }
        Num::Double(d) => RawBson::Double(round_double(d, place, round)),
        Num::Decimal(d) => RawBson::Decimal128(d.round_to(place, !round).bson()),
    }))
}

/// `v` rounded (half to even) or truncated to a multiple of `10^-place` (`place` < 0).
fn round_integer(v: i128, place: i32, round: bool) -> i128 {
    let unit = 10_i128.pow(place.unsigned_abs());
    let (q, rem) = (v / unit, v % unit);
    let q = if round {
        let twice = rem.abs() * 2;
        if twice > unit || (twice == unit && q % 2 != 0) {
            q + v.signum()
        } else {
            q
        }
    } else {
        q
    };
    q * unit
}

/// `d` rounded or truncated at `place` decimal places, from its 34-significant-digit decimal
/// form (mongod's `Decimal128(double, kRoundTo34Digits)`), back to the nearest double.
fn round_double(d: f64, place: i32, round: bool) -> f64 {
    if !d.is_finite() || d == 0.0 {
        return d;
    }
    // 34 significant digits: d = ±m × 10^q with m < 10^34.
    let sci = format!("{:.33e}", d.abs());
    let Some((mant, exp)) = sci.split_once('e') else {
        return d;
    };
    let (Ok(m), Ok(e)) = (mant.replace('.', "").parse::<i128>(), exp.parse::<i32>()) else {
        return d;
    };
    let q = e - 33;
    let drop = -place - q;
    if drop <= 0 {
        return d;
    }
    let kept = if drop > 35 {
        0
    } else {
        let unit = 10_i128.pow(drop.unsigned_abs());
        let (k, rem) = (m / unit, m % unit);
        let twice = rem * 2;
        if round && (twice > unit || (twice == unit && k % 2 != 0)) {
            k + 1
        } else {
            k
        }
    };
    let text = format!("{}{kept}e{}", if d < 0.0 { "-" } else { "" }, -place);
    text.parse::<f64>().unwrap_or(d)
}

#[cfg(test)]
mod tests {
    use bson::{RawBson, rawbson, rawdoc};

    use crate::error::{CommandError, ErrorCode};
    use crate::query::Expression;

    fn eval(expr: &RawBson) -> Result<Option<RawBson>, CommandError> {
        Expression::parse(expr.as_raw_bson_ref())?.evaluate(&rawdoc! {"v": 19.25, "n": null})
    }

    #[test]
    fn values_table() -> Result<(), CommandError> {
        let cases: Vec<(RawBson, RawBson)> = vec![
            (rawbson!({"$ceil": 1.2}), rawbson!(2.0)),
            (rawbson!({"$ceil": 5}), rawbson!(5)),
            (rawbson!({"$floor": -1.5}), rawbson!(-2.0)),
            (rawbson!({"$floor": [7_i64]}), RawBson::Int64(7)),
            (rawbson!({"$ceil": "$n"}), RawBson::Null),
            (rawbson!({"$floor": "$missing"}), RawBson::Null),
            (rawbson!({"$trunc": [1.99, 1]}), rawbson!(1.9)),
            (rawbson!({"$trunc": 7.8}), rawbson!(7.0)),
            (rawbson!({"$trunc": [-1.99]}), rawbson!(-1.0)),
            (rawbson!({"$trunc": [1299, -2]}), rawbson!(1200)),
            (rawbson!({"$trunc": [1.5, "$n"]}), RawBson::Null),
            (rawbson!({"$round": [2.5]}), rawbson!(2.0)),
            (rawbson!({"$round": [3.5]}), rawbson!(4.0)),
            (rawbson!({"$round": [-2.5]}), rawbson!(-2.0)),
            (rawbson!({"$round": [2.675, 2]}), rawbson!(2.67)),
            (rawbson!({"$round": [0.125, 2]}), rawbson!(0.12)),
            (rawbson!({"$round": [0.375, 2]}), rawbson!(0.38)),
            (rawbson!({"$trunc": [-0.375, 2]}), rawbson!(-0.37)),
            (
                rawbson!({"$round": [2_147_483_647, -1]}),
                RawBson::Int64(2_147_483_650),
            ),
            (rawbson!({"$round": [5, null]}), RawBson::Null),
            (rawbson!({"$round": ["$v", 1]}), rawbson!(19.2)),
            (rawbson!({"$round": [28.73, 1]}), rawbson!(28.7)),
            (rawbson!({"$round": [-45.39, 1]}), rawbson!(-45.4)),
            (rawbson!({"$round": ["$v", -1]}), rawbson!(20.0)),
            (rawbson!({"$round": [-45.39, -1]}), rawbson!(-50.0)),
            (rawbson!({"$round": [1250, -2]}), rawbson!(1200)),
            (rawbson!({"$round": [1350, -2]}), rawbson!(1400)),
            (rawbson!({"$round": [-1350, -2]}), rawbson!(-1400)),
            (rawbson!({"$round": [1234, 2]}), rawbson!(1234)),
            (rawbson!({"$round": [0.001, 1]}), rawbson!(0.0)),
            (rawbson!({"$round": [123.456, -20]}), rawbson!(0.0)),
            (rawbson!({"$round": [i64::MAX, -20]}), RawBson::Int64(0)),
            (rawbson!({"$sqrt": 25}), rawbson!(5.0)),
            (rawbson!({"$sqrt": "$n"}), RawBson::Null),
            (rawbson!({"$exp": 0}), rawbson!(1.0)),
            (rawbson!({"$ln": 1}), rawbson!(0.0)),
            (rawbson!({"$log": [100, 10]}), rawbson!(2.0)),
            (rawbson!({"$log": [8, 2]}), rawbson!(3.0)),
            (rawbson!({"$log": [8, null]}), RawBson::Null),
            (rawbson!({"$log10": 1000}), rawbson!(3.0)),
            (rawbson!({"$pow": [5, 0]}), rawbson!(1)),
            (rawbson!({"$pow": [5, 2]}), rawbson!(25)),
            (rawbson!({"$pow": [2, -2]}), rawbson!(0.25)),
            (rawbson!({"$pow": [2, 31]}), RawBson::Int64(2_147_483_648)),
            (rawbson!({"$pow": [2_i64, 3]}), RawBson::Int64(8)),
            (
                rawbson!({"$pow": [2, 64]}),
                rawbson!(18_446_744_073_709_551_616.0),
            ),
            (rawbson!({"$pow": [-1, 3]}), rawbson!(-1)),
            (rawbson!({"$pow": [-1, -3]}), rawbson!(-1)),
            (rawbson!({"$pow": [0, 0]}), rawbson!(1)),
            (rawbson!({"$pow": [2.0, 2]}), rawbson!(4.0)),
            (rawbson!({"$pow": [2, 0.5]}), RawBson::Double(2_f64.sqrt())),
            (rawbson!({"$sin": 0}), rawbson!(0.0)),
            (rawbson!({"$cos": 0}), rawbson!(1.0)),
            (rawbson!({"$acos": 1}), rawbson!(0.0)),
            (rawbson!({"$tanh": 0}), rawbson!(0.0)),
            (rawbson!({"$acosh": 1}), rawbson!(0.0)),
            (rawbson!({"$atanh": 1}), RawBson::Double(f64::INFINITY)),
            (
                rawbson!({"$atan2": [1, 1]}),
                RawBson::Double(std::f64::consts::FRAC_PI_4),
            ),
            (rawbson!({"$atan2": [null, "x"]}), RawBson::Null),
            (
                rawbson!({"$degreesToRadians": 180}),
                RawBson::Double(std::f64::consts::PI),
            ),
            (
                rawbson!({"$radiansToDegrees": std::f64::consts::PI}),
                rawbson!(180.0),
            ),
            (rawbson!({"$sinh": null}), RawBson::Null),
        ];
        for (expr, want) in cases {
            assert_eq!(eval(&expr)?, Some(want), "{expr:?}");
        }
        // NaN goes through the bounded functions unchanged.
        let nan = eval(&rawbson!({"$asin": f64::NAN}))?;
        assert!(matches!(nan, Some(RawBson::Double(d)) if d.is_nan()));
        Ok(())
    }

    fn dec(s: &str) -> RawBson {
        RawBson::Decimal128(s.parse().unwrap_or_else(|_| panic!("{s} is a decimal")))
    }

    #[test]
    fn decimal_trigonometry_in_decimal() -> Result<(), CommandError> {
        let cases: Vec<(RawBson, RawBson)> = vec![
            (
                rawbson!({"$sin": (dec("1"))}),
                dec("0.8414709848078965066525023216302990"),
            ),
            (
                rawbson!({"$cos": (dec("1E+22"))}),
                dec("0.5232147853951389454975944733847095"),
            ),
            (
                rawbson!({"$tan": (dec("-0.7"))}),
                dec("-0.8422883804630794481281350022129377"),
            ),
            (
                rawbson!({"$asin": (dec("0.5"))}),
                dec("0.5235987755982988730771072305465838"),
            ),
            (
                rawbson!({"$acos": (dec("-1"))}),
                dec("3.141592653589793238462643383279503"),
            ),
            (
                rawbson!({"$atan": (dec("7.77"))}),
                dec("1.442799803062847565479059407365243"),
            ),
            (
                rawbson!({"$sinh": (dec("-5.5"))}),
                dec("-122.3439227463909619240977424045773"),
            ),
            (
                rawbson!({"$cosh": (dec("0.5"))}),
                dec("1.127625965206380785226225161402672"),
            ),
            (
                rawbson!({"$tanh": (dec("0.5"))}),
                dec("0.4621171572600097585023184836436725"),
            ),
            (
                rawbson!({"$asinh": (dec("1"))}),
                dec("0.8813735870195430252326093249797923"),
            ),
            (
                rawbson!({"$acosh": (dec("1.5"))}),
                dec("0.9624236501192068949955178268487368"),
            ),
            (rawbson!({"$acosh": (dec("Infinity"))}), dec("Infinity")),
            (
                rawbson!({"$atanh": (dec("0.5"))}),
                dec("0.5493061443340548456976226184612629"),
            ),
            (rawbson!({"$atanh": (dec("-1"))}), dec("-Infinity")),
            (rawbson!({"$sin": (dec("0"))}), dec("0")),
            (rawbson!({"$cos": (dec("0"))}), dec("1")),
            (rawbson!({"$acos": (dec("NaN"))}), dec("NaN")),
            (rawbson!({"$atan": (dec("NaN"))}), dec("NaN")),
            // π to 34 digits, as mongod's kPi, times (or over) 180 to 34 digits.
            (
                rawbson!({"$degreesToRadians": (dec("180"))}),
                dec("3.141592653589793238462643383279503"),
            ),
            (
                rawbson!({"$degreesToRadians": (dec("1"))}),
                dec("0.01745329251994329576923690768488613"),
            ),
            (
                rawbson!({"$radiansToDegrees": (dec("1"))}),
                dec("57.29577951308232087679815481410517"),
            ),
            (
                rawbson!({"$radiansToDegrees": (dec("3.141592653589793238462643383279503"))}),
                dec("180.0000000000000000000000000000000"),
            ),
            // $atan2 in decimal when either argument is one; a double by its 15 digits.
            (
                rawbson!({"$atan2": [(dec("1")), 1]}),
                dec("0.7853981633974483096156608458198757"),
            ),
            (
                rawbson!({"$atan2": [3, (dec("-4"))]}),
                dec("2.498091544796508851659834154562180"),
            ),
            (
                rawbson!({"$atan2": [0.1, (dec("1"))]}),
                dec("0.09966865249116202737844611987802059"),
            ),
            (
                rawbson!({"$atan2": [(dec("-0")), (dec("-1"))]}),
                dec("-3.141592653589793238462643383279503"),
            ),
        ];
        for (expr, want) in cases {
            let got = eval(&expr)?;
            assert_eq!(
                got.as_ref().map(|v| format!("{v:?}")),
                Some(format!("{want:?}")),
                "{expr:?}"
            );
        }
        Ok(())
    }

    #[test]
    fn decimal_bounds_checked_in_decimal() {
        let cases: Vec<(RawBson, &str)> = vec![
            (
                rawbson!({"$asin": (dec("1.000000000000000000000000000000001"))}),
                "cannot apply $asin to 1.000000000000000000000000000000001, value must in [-1,1]",
            ),
            (
                rawbson!({"$acosh": (dec("0.9999999999999999999999999999999999"))}),
                "cannot apply $acosh to 0.9999999999999999999999999999999999, value must in \
                 [1,inf]",
            ),
            (
                rawbson!({"$sin": (dec("-Infinity"))}),
                "cannot apply $sin to -Infinity, value must in (-inf,inf)",
            ),
            (
                rawbson!({"$atanh": (dec("-1.50"))}),
                "cannot apply $atanh to -1.50, value must in [-1,1]",
            ),
        ];
        for (expr, msg) in cases {
            let err = eval(&expr).unwrap_err();
            assert_eq!(
                (err.code, err.errmsg.as_str()),
                (ErrorCode::Location(50989), msg),
                "{expr:?}"
            );
        }
    }

    #[test]
    fn errors_table() {
        let cases: Vec<(RawBson, i32, &str)> = vec![
            (
                rawbson!({"$sqrt": "a"}),
                28765,
                "$sqrt only supports numeric types, not string",
            ),
            (
                rawbson!({"$ceil": [[1]]}),
                28765,
                "$ceil only supports numeric types, not array",
            ),
            (
                rawbson!({"$sqrt": -1}),
                28714,
                "$sqrt's argument must be greater than or equal to 0",
            ),
            (
                rawbson!({"$ln": 0}),
                28766,
                "$ln's argument must be a positive number, but is 0",
            ),
            (
                rawbson!({"$log10": -5}),
                28761,
                "$log10's argument must be a positive number, but is -5",
            ),
            (
                rawbson!({"$log": ["a", 2]}),
                28756,
                "$log's argument must be numeric, not string",
            ),
            (
                rawbson!({"$log": [2, true]}),
                28757,
                "$log's base must be numeric, not bool",
            ),
            (
                rawbson!({"$log": [-1, 2]}),
                28758,
                "$log's argument must be a positive number, but is -1",
            ),
            (
                rawbson!({"$log": [2, 1]}),
                28759,
                "$log's base must be a positive number not equal to 1, but is 1",
            ),
            (
                rawbson!({"$pow": ["a", 2]}),
                28762,
                "$pow's base must be numeric, not string",
            ),
            (
                rawbson!({"$pow": [2, "a"]}),
                28763,
                "$pow's exponent must be numeric, not string",
            ),
            (
                rawbson!({"$pow": [0, -1]}),
                28764,
                "$pow cannot take a base of 0 and a negative exponent",
            ),
            (
                rawbson!({"$pow": [(RawBson::Decimal128("0".parse().unwrap())), (RawBson::Decimal128("-0".parse().unwrap()))]}),
                28764,
                "$pow cannot take a base of 0 and a negative exponent",
            ),
            (
                rawbson!({"$acos": 2}),
                50989,
                "cannot apply $acos to 2, value must in [-1,1]",
            ),
            (
                rawbson!({"$sin": f64::INFINITY}),
                50989,
                "cannot apply $sin to inf, value must in (-inf,inf)",
            ),
            (
                rawbson!({"$acosh": 0.5}),
                50989,
                "cannot apply $acosh to 0.5, value must in [1,inf]",
            ),
            (
                rawbson!({"$atan2": ["a", 1]}),
                51044,
                "$atan2 only supports numeric types, not string",
            ),
            (
                rawbson!({"$atan2": [1, "a"]}),
                51045,
                "$atan2 only supports numeric types, not string",
            ),
            (
                rawbson!({"$round": ["a", null]}),
                51081,
                "$round only supports numeric types, not string",
            ),
            (
                rawbson!({"$round": [i64::MAX, -1]}),
                51080,
                "invalid conversion from Decimal128 result in $round resulting from arguments: \
                 [9223372036854775807, -1]",
            ),
            (
                rawbson!({"$round": ["a"]}),
                51081,
                "$round only supports numeric types, not string",
            ),
            (
                rawbson!({"$trunc": [1, 0.5]}),
                51082,
                "precision argument to  $trunc must be a integral value",
            ),
            (
                rawbson!({"$round": [1, 101]}),
                51083,
                "cannot apply $round with precision value 101 value must be in [-20, 100]",
            ),
            (
                rawbson!({"$round": [1, 2, 3]}),
                28667,
                "Expression $round takes at least 1 arguments, and at most 2, but 3 were passed in.",
            ),
            (
                rawbson!({"$pow": [1]}),
                16020,
                "Expression $pow takes exactly 2 arguments. 1 were passed in.",
            ),
        ];
        for (expr, code, msg) in cases {
            let err = eval(&expr).unwrap_err();
            assert_eq!(
                (err.code, err.errmsg.as_str()),
                (ErrorCode::Location(code), msg),
                "{expr:?}"
            );
        }
    }
}
