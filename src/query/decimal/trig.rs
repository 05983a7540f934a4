//! Trigonometric and hyperbolic functions of decimal128 values, as mongod's `Decimal128::sin`
//! … `atan2` answer them: computed in 68-digit working numbers and rounded once to 34 digits
//! (half-even). Arguments of `sin`, `cos` and `tan` are reduced modulo π/2 exactly, with π to
//! as many digits as the argument has integer digits (up to 6,145), so `sin(1E+100)` is right
//! to the last digit.
//!
//! libdecnumber has no trigonometry: the functions here are series (sine, cosine, arctangent
//! near zero) and identities over its exp, ln and sqrt.

use dec::{Context, Decimal as Wide, Rounding};

use super::{Decimal, Quad, cx, pi::PI};

/// Working numbers: 72 digits of room, computed at 68.
type Fine = Wide<24>;
const FINE_DIGITS: usize = 68;

/// The numbers of the exact argument reduction: up to 6,300 digits.
type Big = Wide<2100>;
const BIG_DIGITS: usize = 6300;

/// Digits kept past an argument's integer digits when it is reduced modulo π/2: the 34 of the
/// result, and margin for arguments close to a multiple of π/2.
const REDUCTION_GUARD: usize = 34 + 64;

fn fcx() -> Context<Fine> {
    let mut cx = Context::<Fine>::default();
    cx.set_rounding(Rounding::HalfEven);
    // 68 ≤ 72 and ±999,999 are libdecnumber's limits for exp and ln: cannot fail.
    let _ = cx.set_precision(FINE_DIGITS);
    let _ = cx.set_max_exponent(999_999);
    let _ = cx.set_min_exponent(-999_999);
    cx
}

fn infinity(negative: bool) -> Decimal {
    let text = if negative { "-Infinity" } else { "Infinity" };
    Decimal::parse(text).unwrap_or(Decimal(Quad::NAN))
}

fn fine(x: Decimal) -> Fine {
    Fine::from(x.0)
}

fn int(i: i32) -> Fine {
    fcx().from_i32(i)
}

fn out(f: &Fine) -> Decimal {
    Decimal(cx().from_decimal(f))
}

fn add(a: &Fine, b: &Fine) -> Fine {
    let mut r = *a;
    fcx().add(&mut r, b);
    r
}

fn sub(a: &Fine, b: &Fine) -> Fine {
    let mut r = *a;
    fcx().sub(&mut r, b);
    r
}

fn mul(a: &Fine, b: &Fine) -> Fine {
    let mut r = *a;
    fcx().mul(&mut r, b);
    r
}

fn div(a: &Fine, b: &Fine) -> Fine {
    let mut r = *a;
    fcx().div(&mut r, b);
    r
}

fn neg(a: &Fine) -> Fine {
    let mut r = *a;
    fcx().minus(&mut r);
    r
}

fn abs(a: &Fine) -> Fine {
    let mut r = *a;
    fcx().abs(&mut r);
    r
}

fn sqrt(a: &Fine) -> Fine {
    let mut r = *a;
    fcx().sqrt(&mut r);
    r
}

fn exp(a: &Fine) -> Fine {
    let mut r = *a;
    fcx().exp(&mut r);
    r
}

fn ln(a: &Fine) -> Fine {
    let mut r = *a;
    fcx().ln(&mut r);
    r
}

/// The power of ten of the leading digit (`adjusted exponent`); very negative for zero.
fn magnitude<const N: usize>(d: &Wide<N>) -> i64 {
    if d.is_zero() {
        return i64::MIN / 2;
    }
    i64::from(d.exponent()) + i64::from(d.digits()) - 1
}

fn less(a: &Fine, b: &Fine) -> bool {
    fcx().partial_cmp(a, b) == Some(std::cmp::Ordering::Less)
}

/// π at the working precision.
fn pi() -> Fine {
    fcx()
        .parse(&PI[..FINE_DIGITS + 8])
        .unwrap_or_else(|_| Fine::nan())
}

fn half_pi() -> Fine {
    div(&pi(), &int(2))
}

/// Whether a series' term no longer reaches the working precision of its sum.
fn negligible(term: &Fine, sum: &Fine) -> bool {
    // The working digits and two more.
    const BELOW: i64 = 70;
    term.is_zero() || magnitude(term) < magnitude(sum) - BELOW
}

/// Sums a series from `first`, each term from the last and its index (1, 2, …), until the
/// terms no longer reach the working precision.
fn series(first: Fine, next: impl Fn(&Fine, i32) -> Fine) -> Fine {
    let mut sum = first;
    let mut term = first;
    for n in 1..2000 {
        term = next(&term, n);
        sum = add(&sum, &term);
        if negligible(&term, &sum) {
            break;
        }
    }
    sum
}

/// sin r for |r| ≤ 1 (Taylor).
fn sin_series(r: &Fine) -> Fine {
    let r2 = mul(r, r);
    series(*r, |t, n| {
        let k = 2 * n;
        neg(&div(&mul(t, &r2), &int(k * (k + 1))))
    })
}

/// cos r for |r| ≤ 1 (Taylor).
fn cos_series(r: &Fine) -> Fine {
    let r2 = mul(r, r);
    series(int(1), |t, n| {
        let k = 2 * n;
        neg(&div(&mul(t, &r2), &int((k - 1) * k)))
    })
}

/// sinh r for |r| < 1 (Taylor).
fn sinh_series(r: &Fine) -> Fine {
    let r2 = mul(r, r);
    series(*r, |t, n| {
        let k = 2 * n;
        div(&mul(t, &r2), &int(k * (k + 1)))
    })
}

/// `x` reduced modulo π/2: `r` in [-π/4, π/4] (`x` itself below 1) and the quadrant, so
/// that x = r + k·π/2 with k ≡ quadrant (mod 4).
fn reduce(x: Decimal) -> (Fine, u8) {
    let xb = Big::from(x.0);
    let top = magnitude(&xb);
    if top < 0 {
        return (fine(x), 0);
    }
    let digits = usize::try_from(top)
        .unwrap_or(BIG_DIGITS)
        .saturating_add(REDUCTION_GUARD)
        .min(BIG_DIGITS);
    let mut bcx = Context::<Big>::default();
    bcx.set_rounding(Rounding::HalfEven);
    let _ = bcx.set_precision(digits);
    let _ = bcx.set_max_exponent(999_999);
    let _ = bcx.set_min_exponent(-999_999);
    let Ok(mut half) = bcx.parse(&PI[..(digits + 4).min(PI.len())]) else {
        return (Fine::nan(), 0);
    };
    let two = bcx.from_i32(2);
    bcx.div(&mut half, &two);
    // k = x / (π/2) to the nearest integer, r = x - k·π/2.
    let mut k = xb;
    bcx.div(&mut k, &half);
    bcx.round(&mut k);
    let mut multiple = k;
    bcx.mul(&mut multiple, &half);
    let mut r = xb;
    bcx.sub(&mut r, &multiple);
    let four = bcx.from_i32(4);
    bcx.rem(&mut k, &four);
    // A whole number in (-4, 4).
    let quadrant = k.to_string().parse::<i32>().unwrap_or(0).rem_euclid(4);
    (
        fcx().to_width(r),
        u8::try_from(quadrant).unwrap_or_default(),
    )
}

/// arctan t for a finite or infinite working number.
fn atan_fine(t: &Fine) -> Fine {
    if t.is_nan() || t.is_zero() {
        return *t;
    }
    let negative = t.is_negative();
    let a = abs(t);
    let one = int(1);
    let v = if a.is_infinite() {
        half_pi()
    } else if less(&one, &a) {
        // arctan a = π/2 - arctan(1/a)
        sub(&half_pi(), &atan_small(&div(&one, &a)))
    } else {
        atan_small(&a)
    };
    if negative { neg(&v) } else { v }
}

/// arctan a for 0 ≤ a ≤ 1: the argument halved (arctan a = 2·arctan(a / (1 + √(1 + a²))))
/// until below 10⁻³, then the Taylor series.
fn atan_small(a: &Fine) -> Fine {
    let one = int(1);
    let mut a = *a;
    let mut factor = 1;
    while magnitude(&a) > -3 && factor < 1 << 12 {
        a = div(&a, &add(&one, &sqrt(&add(&one, &mul(&a, &a)))));
        factor *= 2;
    }
    let a2 = mul(&a, &a);
    // Terms a^(2n+1)/(2n+1), alternating: carried as powers, divided as they are summed.
    let mut sum = a;
    let mut power = a;
    for n in 1..2000 {
        power = neg(&mul(&power, &a2));
        let term = div(&power, &int(2 * n + 1));
        sum = add(&sum, &term);
        if negligible(&term, &sum) {
            break;
        }
    }
    mul(&sum, &int(factor))
}

impl Decimal {
    fn fine_magnitude(self) -> i64 {
        magnitude(&fine(self))
    }

    /// The sine (NaN for an infinity).
    #[must_use]
    pub fn sin(self) -> Decimal {
        if !self.is_finite() {
            return Decimal(Quad::NAN);
        }
        if self.is_zero() {
            return self;
        }
        let (r, k) = reduce(self);
        out(&match k {
            0 => sin_series(&r),
            1 => cos_series(&r),
            2 => neg(&sin_series(&r)),
            _ => neg(&cos_series(&r)),
        })
    }

    /// The cosine (NaN for an infinity).
    #[must_use]
    pub fn cos(self) -> Decimal {
        if !self.is_finite() {
            return Decimal(Quad::NAN);
        }
        if self.is_zero() {
            return Decimal::of_i64(1);
        }
        let (r, k) = reduce(self);
        out(&match k {
            0 => cos_series(&r),
            1 => neg(&sin_series(&r)),
            2 => neg(&cos_series(&r)),
            _ => sin_series(&r),
        })
    }

    /// The tangent (NaN for an infinity).
    #[must_use]
    pub fn tan(self) -> Decimal {
        if !self.is_finite() {
            return Decimal(Quad::NAN);
        }
        if self.is_zero() {
            return self;
        }
        let (r, k) = reduce(self);
        let (s, c) = (sin_series(&r), cos_series(&r));
        out(&if k % 2 == 0 {
            div(&s, &c)
        } else {
            neg(&div(&c, &s))
        })
    }

    /// The arcsine, in [-π/2, π/2] (NaN outside [-1, 1]).
    #[must_use]
    pub fn asin(self) -> Decimal {
        if self.is_nan() || self.is_zero() {
            return self;
        }
        let x = fine(self);
        let one = int(1);
        let a = abs(&x);
        if less(&one, &a) {
            return Decimal(Quad::NAN);
        }
        // arcsin x = arctan(x / √((1 - x)(1 + x))), ±π/2 at ±1.
        let root = sqrt(&mul(&sub(&one, &x), &add(&one, &x)));
        if root.is_zero() {
            let h = half_pi();
            return out(&if x.is_negative() { neg(&h) } else { h });
        }
        out(&atan_fine(&div(&x, &root)))
    }

    /// The arccosine, in [0, π] (NaN outside [-1, 1]).
    #[must_use]
    pub fn acos(self) -> Decimal {
        if self.is_nan() {
            return self;
        }
        let x = fine(self);
        let one = int(1);
        if less(&one, &abs(&x)) {
            return Decimal(Quad::NAN);
        }
        let below = add(&one, &x);
        if below.is_zero() {
            return out(&pi());
        }
        // arccos x = 2·arctan(√((1 - x) / (1 + x))): no cancellation near 1.
        let v = mul(&int(2), &atan_fine(&sqrt(&div(&sub(&one, &x), &below))));
        if v.is_zero() {
            return Decimal::of_i64(0);
        }
        out(&v)
    }

    /// The arctangent, in [-π/2, π/2].
    #[must_use]
    pub fn atan(self) -> Decimal {
        if self.is_zero() {
            return self;
        }
        out(&atan_fine(&fine(self)))
    }

    /// The angle of the point (`other`, `self`), in [-π, π], as C's `atan2(y, x)`: signed
    /// zeros and infinities give the quadrant's angle.
    #[must_use]
    pub fn atan2(self, other: Decimal) -> Decimal {
        let (y, x) = (fine(self), fine(other));
        if y.is_nan() || x.is_nan() {
            return Decimal(Quad::NAN);
        }
        let signed = |v: Fine| if y.is_negative() { neg(&v) } else { v };
        let v = if y.is_zero() {
            if x.is_negative() {
                signed(pi())
            } else {
                return self;
            }
        } else if x.is_zero() {
            signed(half_pi())
        } else if x.is_infinite() {
            match (y.is_infinite(), x.is_negative()) {
                (false, false) => {
                    return if y.is_negative() {
                        out(&neg(&int(0)))
                    } else {
                        Decimal::of_i64(0)
                    };
                }
                (false, true) => signed(pi()),
                (true, false) => signed(div(&pi(), &int(4))),
                (true, true) => signed(div(&mul(&pi(), &int(3)), &int(4))),
            }
        } else if y.is_infinite() {
            signed(half_pi())
        } else {
            let a = atan_fine(&div(&y, &x));
            if !x.is_negative() {
                a
            } else if y.is_negative() {
                sub(&a, &pi())
            } else {
                add(&a, &pi())
            }
        };
        out(&v)
    }

    /// The hyperbolic sine.
    #[must_use]
    pub fn sinh(self) -> Decimal {
        if !self.is_finite() || self.is_zero() {
            return self;
        }
        let x = fine(self);
        if self.fine_magnitude() < 0 {
            return out(&sinh_series(&x));
        }
        if self.fine_magnitude() >= 7 {
            // e^(10^7) is past decimal128's range.
            return infinity(x.is_negative());
        }
        // (e^x - e^-x) / 2
        let e = exp(&x);
        out(&div(&sub(&e, &div(&int(1), &e)), &int(2)))
    }

    /// The hyperbolic cosine.
    #[must_use]
    pub fn cosh(self) -> Decimal {
        if self.is_nan() {
            return self;
        }
        if self.0.is_infinite() || self.fine_magnitude() >= 7 {
            return infinity(false);
        }
        if self.is_zero() {
            return Decimal::of_i64(1);
        }
        let e = exp(&fine(self));
        out(&div(&add(&e, &div(&int(1), &e)), &int(2)))
    }

    /// The hyperbolic tangent.
    #[must_use]
    pub fn tanh(self) -> Decimal {
        if self.is_nan() || self.is_zero() {
            return self;
        }
        let one = int(1);
        if self.0.is_infinite() {
            return Decimal::of_i64(if self.is_negative() { -1 } else { 1 });
        }
        let x = fine(self);
        if self.fine_magnitude() < 0 {
            let s = sinh_series(&x);
            return out(&div(&s, &sqrt(&add(&one, &mul(&s, &s)))));
        }
        // 1 - 2/(e^2|x| + 1); past |x| = 200 that is 1 to far more than 68 digits.
        let a = if self.fine_magnitude() >= 3 {
            int(200)
        } else {
            abs(&x)
        };
        let e = exp(&mul(&int(2), &a));
        let v = sub(&one, &div(&int(2), &add(&e, &one)));
        out(&if x.is_negative() { neg(&v) } else { v })
    }

    /// The inverse hyperbolic sine.
    #[must_use]
    pub fn asinh(self) -> Decimal {
        if !self.is_finite() || self.is_zero() {
            return self;
        }
        let x = fine(self);
        if self.fine_magnitude() < -10 {
            // x - x³/6 + 3x⁵/40: the next term is past the working precision.
            let x2 = mul(&x, &x);
            let x3 = mul(&x2, &x);
            let x5 = mul(&x3, &x2);
            let v = add(
                &sub(&x, &div(&x3, &int(6))),
                &div(&mul(&x5, &int(3)), &int(40)),
            );
            return out(&v);
        }
        // sign · ln(|x| + √(x² + 1))
        let a = abs(&x);
        let v = ln(&add(&a, &sqrt(&add(&mul(&a, &a), &int(1)))));
        out(&if x.is_negative() { neg(&v) } else { v })
    }

    /// The inverse hyperbolic cosine (NaN below 1).
    #[must_use]
    pub fn acosh(self) -> Decimal {
        if self.is_nan() {
            return self;
        }
        let x = fine(self);
        let one = int(1);
        if less(&x, &one) {
            return Decimal(Quad::NAN);
        }
        if x.is_infinite() {
            return self;
        }
        // ln(x + √((x - 1)(x + 1)))
        let v = ln(&add(&x, &sqrt(&mul(&sub(&x, &one), &add(&x, &one)))));
        if v.is_zero() {
            return Decimal::of_i64(0);
        }
        out(&v)
    }

    /// The inverse hyperbolic tangent (±Infinity at ±1, NaN outside [-1, 1]).
    #[must_use]
    pub fn atanh(self) -> Decimal {
        if self.is_nan() || self.is_zero() {
            return self;
        }
        let x = fine(self);
        let one = int(1);
        let a = abs(&x);
        if less(&one, &a) {
            return Decimal(Quad::NAN);
        }
        if !less(&a, &one) {
            return infinity(x.is_negative());
        }
        if self.fine_magnitude() < -10 {
            // x + x³/3 + x⁵/5
            let x2 = mul(&x, &x);
            let x3 = mul(&x2, &x);
            let x5 = mul(&x3, &x2);
            return out(&add(&add(&x, &div(&x3, &int(3))), &div(&x5, &int(5))));
        }
        // ln((1 + x) / (1 - x)) / 2
        let v = ln(&div(&add(&one, &x), &sub(&one, &x)));
        out(&div(&v, &int(2)))
    }

    /// mongod's `Decimal128::kPi`: π to 34 digits.
    pub fn pi() -> Decimal {
        Decimal::parse(&PI[..40]).unwrap_or(Decimal(Quad::NAN))
    }
}

#[cfg(test)]
mod tests {
    use super::Decimal;

    fn d(s: &str) -> Decimal {
        Decimal::parse(s).unwrap_or_else(|| panic!("{s} is a decimal"))
    }

    fn apply(f: &str, args: &[&str]) -> Decimal {
        let x = d(args[0]);
        match f {
            "sin" => x.sin(),
            "cos" => x.cos(),
            "tan" => x.tan(),
            "asin" => x.asin(),
            "acos" => x.acos(),
            "atan" => x.atan(),
            "atan2" => x.atan2(d(args[1])),
            "sinh" => x.sinh(),
            "cosh" => x.cosh(),
            "tanh" => x.tanh(),
            "asinh" => x.asinh(),
            "acosh" => x.acosh(),
            "atanh" => x.atanh(),
            _ => panic!("{f}"),
        }
    }

    /// Reference values: mpmath at 120 digits or more (as many as the argument's integer
    /// digits and 100), rounded half-even to 34 digits.
    #[test]
    fn correctly_rounded_to_34_digits() {
        let cases: &[(&str, &[&str], &str)] = &[
            ("sin", &["1"], "0.8414709848078965066525023216302990"),
            ("sin", &["0.5"], "0.4794255386042030002732879352155714"),
            (
                "sin",
                &["3.141592653589793238462643383279503"],
                "-1.158028306006248941790250554076922E-34",
            ),
            ("sin", &["1E+100"], "-0.3723761236612766882620866955531643"),
            ("sin", &["-7.5"], "-0.9379999767747388579484637981490472"),
            ("sin", &["1E+6144"], "0.9168078385445297016578219657016703"),
            (
                "sin",
                &["123456789.123456789"],
                "0.9998509308719309246478000800260099",
            ),
            ("sin", &["1E-30"], "1.000000000000000000000000000000000E-30"),
            ("sin", &["0.001"], "0.0009999998333333416666664682539710097"),
            ("cos", &["1"], "0.5403023058681397174009366074429766"),
            (
                "cos",
                &["1.570796326794896619231321691639751"],
                "4.420985846996875529104874722961539E-34",
            ),
            ("cos", &["100"], "0.8623188722876839341019385139508425"),
            ("cos", &["-2.5"], "-0.8011436155469337148335027904673517"),
            ("cos", &["1E+22"], "0.5232147853951389454975944733847095"),
            ("tan", &["1"], "1.557407724654902230506974807458360"),
            (
                "tan",
                &["1.570796326794896619231321691639751"],
                "2261938930836633226244288822199802",
            ),
            ("tan", &["-0.7"], "-0.8422883804630794481281350022129377"),
            ("tan", &["1E+50"], "1.287099709502970364501353583635183"),
            ("asin", &["0.5"], "0.5235987755982988730771072305465838"),
            (
                "asin",
                &["-0.999999"],
                "-1.569382113114672367468249895867096",
            ),
            (
                "asin",
                &["1E-20"],
                "1.000000000000000000000000000000000E-20",
            ),
            (
                "asin",
                &["0.9999999999999999999999999999999999"],
                "1.570796326794896605089186067908801",
            ),
            ("acos", &["0.5"], "1.047197551196597746154214461093168"),
            (
                "acos",
                &["0.9999999999999999999999999999999999"],
                "1.414213562373095048801688724209698E-17",
            ),
            ("acos", &["-0.3"], "1.875488980810294127203324652867281"),
            ("atan", &["1"], "0.7853981633974483096156608458198757"),
            ("atan", &["1E+30"], "1.570796326794896619231321691638751"),
            ("atan", &["-0.25"], "-0.2449786631268641541720824812112758"),
            ("atan", &["7.77"], "1.442799803062847565479059407365243"),
            (
                "atan",
                &["1E-25"],
                "1.000000000000000000000000000000000E-25",
            ),
            ("atan2", &["1", "1"], "0.7853981633974483096156608458198757"),
            (
                "atan2",
                &["-2", "-3"],
                "-2.553590050042225687217032302654417",
            ),
            ("atan2", &["3", "-4"], "2.498091544796508851659834154562180"),
            (
                "atan2",
                &["1E-10", "1E+10"],
                "1.000000000000000000000000000000000E-20",
            ),
            ("sinh", &["1"], "1.175201193643801456882381850595601"),
            ("sinh", &["0.001"], "0.001000000166666675000000198412701168"),
            ("sinh", &["-5.5"], "-122.3439227463909619240977424045773"),
            (
                "sinh",
                &["1E-15"],
                "1.000000000000000000000000000000167E-15",
            ),
            (
                "sinh",
                &["10000"],
                "4.403409112831460793630748003822281E+4342",
            ),
            ("cosh", &["1"], "1.543080634815243778477905620757062"),
            ("cosh", &["-20"], "242582597.7048951400151302264900492"),
            ("cosh", &["0.5"], "1.127625965206380785226225161402672"),
            ("tanh", &["0.5"], "0.4621171572600097585023184836436725"),
            ("tanh", &["-3"], "-0.9950547536867304513318801852554885"),
            ("tanh", &["50"], "1.000000000000000000000000000000000"),
            (
                "tanh",
                &["1E-12"],
                "9.999999999999999999999996666666667E-13",
            ),
            ("asinh", &["1"], "0.8813735870195430252326093249797923"),
            (
                "asinh",
                &["-1E-12"],
                "-9.999999999999999999999998333333333E-13",
            ),
            ("asinh", &["1E+100"], "230.9516564799645137112163775898946"),
            ("asinh", &["0.3"], "0.2956730475634224391027105297335171"),
            ("acosh", &["1.5"], "0.9624236501192068949955178268487368"),
            (
                "acosh",
                &["1.000000000000000000000000000000001"],
                "4.472135954999579392818347337462552E-17",
            ),
            ("acosh", &["1E+200"], "461.2101657793690821130155230583310"),
            ("atanh", &["0.5"], "0.5493061443340548456976226184612629"),
            (
                "atanh",
                &["-0.9999999999"],
                "-11.85949905522520107479794833415089",
            ),
            (
                "atanh",
                &["1E-15"],
                "1.000000000000000000000000000000333E-15",
            ),
            (
                "sin",
                &["6.283185307179586476925286766559006"],
                "2.316056612012497883580501108153844E-34",
            ),
            (
                "cos",
                &["9.999999999999999999999999999999999E+6144"],
                "-0.8296453523350967216289114223081673",
            ),
            (
                "tan",
                &["3.926990816987241548078304229099379"],
                "1.000000000000000000000000000000001",
            ),
            ("sin", &["355"], "-0.00003014435335948844921433028000865010"),
            ("sin", &["1E-6176"], "1E-6176"),
            (
                "atan",
                &["-1E+6144"],
                "-1.570796326794896619231321691639751",
            ),
            (
                "sinh",
                &["710.5"],
                "1.841617344801785926261951040945013E+308",
            ),
            (
                "cosh",
                &["5000"],
                "1.483814192011833534483148402644735E+2171",
            ),
            (
                "acos",
                &["-0.9999999999999999999999999999999999"],
                "3.141592653589793224320507759548552",
            ),
        ];
        let mut wrong = Vec::new();
        for (f, args, want) in cases {
            let got = apply(f, args).bson().to_string();
            if got != *want {
                wrong.push(format!("{f}{args:?}: {got}, want {want}"));
            }
        }
        assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    }
}
