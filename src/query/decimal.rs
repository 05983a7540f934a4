//! Decimal128 arithmetic as mongod computes it: IEEE 754-2008 decimal128 (34 digits, exponents
//! from -6176 to 6111, ties rounded to even), with the standard's preferred exponents, so that
//! `200.0 × 1` is `200.0` and `1.10 + 2.205` is `3.305`, never a double's approximation.
//!
//! The arithmetic is libdecnumber's (the `dec` crate), the reference implementation of the
//! General Decimal Arithmetic specification; mongod uses Intel's library, and both follow IEEE
//! 754-2008, which defines each result exactly. BSON stores decimals in the binary integer
//! encoding and libdecnumber in the densely packed one: values cross over by their canonical
//! strings, which both sides read and write exactly. Conversions from doubles follow mongod's
//! `Decimal128(double, precision)`: 15 significant digits by default, 34 where mongod asks.

use std::fmt;
use std::str::FromStr;

use std::ops::{Add, Div, Mul, Rem, Sub};

use dec::{Context, Decimal as Wide, Decimal128 as Quad, Rounding};

mod pi;
mod trig;

/// A decimal128 value.
#[derive(Clone, Copy)]
pub struct Decimal(Quad);

impl fmt::Debug for Decimal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Decimal({})", self.0)
    }
}

impl fmt::Display for Decimal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

fn cx() -> Context<Quad> {
    // decimal128's context: 34 digits, half-even rounding.
    Context::<Quad>::default()
}

/// Digits of the working numbers of the functions decimal128's context lacks (39: 13 units of
/// three digits), rounded to 34 as they are computed.
type Work = Wide<13>;

fn work_cx() -> Context<Work> {
    let mut cx = Context::<Work>::default();
    cx.set_rounding(Rounding::HalfEven);
    // 34 ≤ 39: cannot fail. libdecnumber's exp, ln and log10 refuse contexts whose exponents
    // reach past ±999,999 (decimal128's are ±6,144: rounded to them on the way back).
    let _ = cx.set_precision(34);
    let _ = cx.set_max_exponent(999_999);
    let _ = cx.set_min_exponent(-999_999);
    cx
}

impl Decimal {
    /// The value of a BSON decimal.
    pub fn of_bson(d: bson::Decimal128) -> Decimal {
        Decimal::parse(&d.to_string()).unwrap_or(Decimal(Quad::NAN))
    }

    /// This value as a BSON decimal.
    pub fn bson(self) -> bson::Decimal128 {
        bson::Decimal128::from_str(&self.0.to_string()).unwrap_or_else(|_| {
            // Every finite decimal128 and the specials have a string BSON reads; kept total.
            bson::Decimal128::from_str("NaN").unwrap_or(bson::Decimal128::from_bytes([0; 16]))
        })
    }

    /// A decimal string (`"1.50"`, `"-2E+3"`, `"NaN"`, `"Infinity"`), rounded to 34 digits.
    pub fn parse(s: &str) -> Option<Decimal> {
        cx().parse(s).ok().map(Decimal)
    }

    pub fn of_i64(i: i64) -> Decimal {
        Decimal(cx().from_i128(i128::from(i)))
    }

    /// mongod's `Decimal128(double)`: the double rounded to 15 significant digits, trailing zeros
    /// kept (`0.1` is `0.100000000000000`); zero, the infinities and NaN as themselves.
    pub fn of_f64(d: f64) -> Decimal {
        Decimal::of_f64_digits(d, 15)
    }

    /// mongod's `Decimal128(double, kRoundTo34Digits)`.
    pub fn of_f64_34(d: f64) -> Decimal {
        Decimal::of_f64_digits(d, 34)
    }

    fn of_f64_digits(d: f64, digits: usize) -> Decimal {
        let text = if d.is_nan() {
            "NaN".to_owned()
        } else if d.is_infinite() {
            if d > 0.0 { "Infinity" } else { "-Infinity" }.to_owned()
        } else if d == 0.0 {
            if d.is_sign_negative() { "-0" } else { "0" }.to_owned()
        } else {
            // Rust prints the exact binary value rounded to this many digits (ties to even).
            format!("{d:.*e}", digits - 1)
        };
        Decimal::parse(&text).unwrap_or(Decimal(Quad::NAN))
    }

    /// A number as mongod's `Value::coerceToDecimal` reads it (integers exactly, a double by
    /// its 15 digits); `None` for anything else.
    pub fn coerce(v: bson::RawBsonRef<'_>) -> Option<Decimal> {
        match v {
            bson::RawBsonRef::Int32(i) => Some(Decimal::of_i64(i64::from(i))),
            bson::RawBsonRef::Int64(i) => Some(Decimal::of_i64(i)),
            bson::RawBsonRef::Double(d) => Some(Decimal::of_f64(d)),
            bson::RawBsonRef::Decimal128(d) => Some(Decimal::of_bson(d)),
            _ => None,
        }
    }

    /// The nearest double.
    pub fn f64(self) -> f64 {
        let text = self.0.to_string();
        match text.as_str() {
            "NaN" | "-NaN" | "sNaN" | "-sNaN" => f64::NAN,
            "Infinity" => f64::INFINITY,
            "-Infinity" => f64::NEG_INFINITY,
            _ => text.parse().unwrap_or(f64::NAN),
        }
    }

    #[must_use]
    pub fn abs(self) -> Decimal {
        Decimal(cx().abs(self.0))
    }

    fn work(self) -> Work {
        Work::from(self.0)
    }

    fn of_work(w: &Work) -> Decimal {
        Decimal(cx().from_decimal(w))
    }

    /// The square root, correctly rounded (IEEE 754's `squareRoot`; NaN for a negative).
    #[must_use]
    pub fn sqrt(self) -> Decimal {
        let mut w = self.work();
        work_cx().sqrt(&mut w);
        Decimal::of_work(&w)
    }

    /// e to this power, to 34 digits.
    #[must_use]
    pub fn exp(self) -> Decimal {
        let mut w = self.work();
        work_cx().exp(&mut w);
        Decimal::of_work(&w)
    }

    /// The natural logarithm, to 34 digits.
    #[must_use]
    pub fn ln(self) -> Decimal {
        let mut w = self.work();
        work_cx().ln(&mut w);
        Decimal::of_work(&w)
    }

    /// The base-10 logarithm, to 34 digits (exact for powers of ten).
    #[must_use]
    pub fn log10(self) -> Decimal {
        let mut w = self.work();
        work_cx().log10(&mut w);
        Decimal::of_work(&w)
    }

    /// The base-2 logarithm, to 34 digits: exact for a power of two (`0.125` gives `-3`).
    #[must_use]
    pub fn log2(self) -> Decimal {
        let mut ln2 = Work::from(cx().from_i128(2));
        let mut cx = work_cx();
        // Five more digits than the result's, rounded once.
        let _ = cx.set_precision(39);
        cx.ln(&mut ln2);
        let mut w = self.work();
        cx.ln(&mut w);
        cx.div(&mut w, &ln2);
        let v = Decimal::of_work(&w);
        // A power of two (exactly a decimal128 from 2^-48 to 2^112): the integer nearest to
        // the quotient, exactly.
        let k = v.round_to(0, false);
        if let Ok(e) = k.0.to_string().parse::<i32>()
            && (-48..=112).contains(&e)
        {
            let two = cx.from_i128(2);
            let mut p = cx.from_i128(1);
            for _ in 0..e.unsigned_abs() {
                if e > 0 {
                    cx.mul(&mut p, &two);
                } else {
                    cx.div(&mut p, &two);
                }
            }
            if cx.partial_cmp(&p, &self.work()) == Some(std::cmp::Ordering::Equal) {
                return Decimal::of_i64(i64::from(e));
            }
        }
        v
    }

    /// This value to the power `e`, to 34 digits, as mongod's `Decimal128::power` answers it:
    /// the power plus the zero with the most negative exponent, so that an exact power is
    /// written with all 34 digits (`2^10` is `1024.000000000000000000000000000000`).
    #[must_use]
    pub fn pow(self, e: Decimal) -> Decimal {
        let mut w = self.work();
        work_cx().pow(&mut w, &e.work());
        Decimal::of_work(&w) + Decimal::parse("0E-6176").unwrap_or(Decimal(Quad::ZERO))
    }

    /// The numeric order of two decimals (`None` when either is NaN); `1.0` equals `1`.
    pub fn compare(self, other: Decimal) -> Option<std::cmp::Ordering> {
        cx().partial_cmp(self.0, other.0)
    }

    pub fn is_zero(self) -> bool {
        self.0.is_zero()
    }

    pub fn is_nan(self) -> bool {
        self.0.is_nan()
    }

    pub fn is_finite(self) -> bool {
        self.0.is_finite()
    }

    /// Less than zero (not -0, not NaN).
    pub fn is_negative(self) -> bool {
        self.0.is_negative()
    }

    /// The sign bit, as mongod's `Decimal128::isNegative`: -0 is signed.
    pub fn is_signed(self) -> bool {
        self.0.is_signed()
    }

    /// mongod's `$round`/`$trunc` of a decimal: quantized to `places` decimal places (negative:
    /// to tens, hundreds…), ties to even or toward zero, so the result always has that exponent
    /// (`1.2345` to 2 places is `1.23`, `1.5` to 3 is `1.500`, `1234` to -2 is `1.2E+3`); NaN
    /// when that takes more than 34 digits. Infinities stay as they are.
    #[must_use]
    pub fn round_to(self, places: i32, truncate: bool) -> Decimal {
        if self.0.is_infinite() {
            return self;
        }
        let mut cx = cx();
        if truncate {
            cx.set_rounding(dec::Rounding::Down);
        }
        let mut quantum = cx.from_i128(1);
        cx.set_exponent(&mut quantum, -places);
        Decimal(cx.quantize(self.0, quantum))
    }

    /// mongod's `$floor`/`$ceil` of a decimal: quantized to exponent 0 toward negative
    /// (`floor`) or positive infinity (`1E+3` is `1000`).
    #[must_use]
    pub fn floor_or_ceil(self, floor: bool) -> Decimal {
        let mut cx = cx();
        cx.set_rounding(if floor {
            dec::Rounding::Floor
        } else {
            dec::Rounding::Ceiling
        });
        let one = cx.from_i128(1);
        Decimal(cx.quantize(self.0, one))
    }
}

impl Add for Decimal {
    type Output = Decimal;

    fn add(self, other: Decimal) -> Decimal {
        Decimal(cx().add(self.0, other.0))
    }
}

impl Sub for Decimal {
    type Output = Decimal;

    fn sub(self, other: Decimal) -> Decimal {
        Decimal(cx().sub(self.0, other.0))
    }
}

impl Mul for Decimal {
    type Output = Decimal;

    fn mul(self, other: Decimal) -> Decimal {
        Decimal(cx().mul(self.0, other.0))
    }
}

impl Div for Decimal {
    type Output = Decimal;

    fn div(self, other: Decimal) -> Decimal {
        Decimal(cx().div(self.0, other.0))
    }
}

/// The remainder of the truncating division, with the dividend's sign (C's `fmod`, as
/// mongod's `Decimal128::modulo`).
impl Rem for Decimal {
    type Output = Decimal;

    fn rem(self, other: Decimal) -> Decimal {
        Decimal(cx().rem(self.0, other.0))
    }
}

#[cfg(test)]
mod tests {
    use super::Decimal;
    use std::str::FromStr;

    fn d(s: &str) -> Decimal {
        Decimal::parse(s).unwrap_or_else(|| panic!("{s} is a decimal"))
    }

    fn bson_text(x: Decimal) -> String {
        x.bson().to_string()
    }

    #[test]
    fn exact_with_the_preferred_exponent() {
        assert_eq!(bson_text(d("1.10") + d("2.205")), "3.305");
        assert_eq!(bson_text(d("200.0") * Decimal::of_i64(1)), "200.0");
        assert_eq!(bson_text(d("20.0") * Decimal::of_i64(10)), "200.0");
        assert_eq!(bson_text(d("0.3") - d("0.1")), "0.2");
        assert_eq!(bson_text(d("10") / d("4")), "2.5");
        assert_eq!(
            bson_text(d("1") / d("3")),
            "0.3333333333333333333333333333333333"
        );
        assert_eq!(bson_text(d("7.5") % d("2")), "1.5");
        assert_eq!(bson_text(d("-7.5") % d("2")), "-1.5");
        assert_eq!(bson_text(d("-2.50").abs()), "2.50");
    }

    #[test]
    fn bson_round_trips() {
        for s in [
            "0",
            "-0",
            "1E+3",
            "1.000",
            "NaN",
            "Infinity",
            "-Infinity",
            "1E-6176",
        ] {
            let b = bson::Decimal128::from_str(s).unwrap_or_else(|_| panic!("{s}"));
            assert_eq!(Decimal::of_bson(b).bson().bytes(), b.bytes(), "{s}");
        }
    }

    #[test]
    fn doubles_as_mongod_converts_them() {
        assert_eq!(bson_text(Decimal::of_f64(0.1)), "0.100000000000000");
        assert_eq!(bson_text(Decimal::of_f64(2.5)), "2.50000000000000");
        assert_eq!(bson_text(Decimal::of_f64(-0.0)), "-0");
        assert_eq!(bson_text(Decimal::of_f64(f64::INFINITY)), "Infinity");
        assert_eq!(
            bson_text(Decimal::of_f64_34(0.1)),
            "0.1000000000000000055511151231257827"
        );
        assert!((d("2.5").f64() - 2.5).abs() < f64::EPSILON);
    }

    #[test]
    fn functions_to_34_digits() {
        assert_eq!(
            bson_text(d("2").sqrt()),
            "1.414213562373095048801688724209698"
        );
        assert_eq!(bson_text(d("4").sqrt()), "2");
        assert!(d("-4").sqrt().is_nan());
        assert_eq!(
            bson_text(d("1").exp()),
            "2.718281828459045235360287471352662"
        );
        assert_eq!(bson_text(d("0").exp()), "1");
        assert_eq!(
            bson_text(d("10").ln()),
            "2.302585092994045684017991454684364"
        );
        assert_eq!(bson_text(d("1000").log10()), "3");
        assert_eq!(
            bson_text(d("2").pow(d("10"))),
            "1024.000000000000000000000000000000"
        );
        assert_eq!(
            bson_text(d("2").pow(d("-3"))),
            "0.1250000000000000000000000000000000"
        );
        assert_eq!(bson_text(d("10").pow(d("-6177"))), "0E-6176");
        assert_eq!(bson_text(d("10").pow(d("6145"))), "Infinity");
        assert_eq!(
            bson_text(d("2").pow(d("0.5"))),
            "1.414213562373095048801688724209698"
        );
    }

    #[test]
    fn rounding_to_places() {
        assert_eq!(bson_text(d("1.2345").round_to(2, false)), "1.23");
        assert_eq!(bson_text(d("1.235").round_to(2, false)), "1.24");
        assert_eq!(bson_text(d("1.245").round_to(2, false)), "1.24");
        assert_eq!(bson_text(d("1.249").round_to(2, true)), "1.24");
        assert_eq!(bson_text(d("1234").round_to(-2, false)), "1.2E+3");
        assert_eq!(bson_text(d("1.5").round_to(3, false)), "1.500");
        assert_eq!(bson_text(d("1E+3").floor_or_ceil(true)), "1000");
        assert_eq!(bson_text(d("-1.5").floor_or_ceil(true)), "-2");
        assert_eq!(bson_text(d("-1.5").floor_or_ceil(false)), "-1");
    }
}
