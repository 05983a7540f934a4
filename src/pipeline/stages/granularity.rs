//! `$bucketAuto`'s `granularity`: the preferred-number series (Renard, E, 1-2-5) and powers of
//! two that bucket boundaries are rounded to, as mongod's `GranularityRounder`s round.
//!
//! Inputs are non-negative numbers (`$bucketAuto` checks each key first). Preferred numbers
//! answer doubles, or decimals for a decimal: mongod rounds a decimal in decimal, with the
//! series' doubles as decimals of 15 digits scaled by powers of ten (so 0.8 rounds up to
//! `1.00000000000000` in E6). Powers of two answer `$pow(2, e)`'s type: an int, a long, a
//! double below 1, and for a decimal a decimal power written with 34 digits.
//!
//! mongod loops forever on an infinite input (its multiplier never catches up); Ebb answers
//! the infinity itself.

use bson::RawBson;

use crate::error::{CommandError, CommandResult, ErrorCode};
use crate::pipeline::accumulators::as_f64;
use crate::query::decimal::Decimal;

const R5: &[f64] = &[10., 16., 25., 40., 63.];
const R10: &[f64] = &[100., 125., 160., 200., 250., 315., 400., 500., 630., 800.];
const R20: &[f64] = &[
    100., 112., 125., 140., 160., 180., 200., 224., 250., 280., 315., 355., 400., 450., 500., 560.,
    630., 710., 800., 900.,
];
// mongod's table, which has no 335.
const R40: &[f64] = &[
    100., 106., 112., 118., 125., 132., 140., 150., 160., 170., 180., 190., 200., 212., 224., 236.,
    250., 265., 280., 300., 315., 355., 375., 400., 425., 450., 475., 500., 530., 560., 600., 630.,
    670., 710., 750., 800., 850., 900., 950.,
];
const R80: &[f64] = &[
    103., 109., 115., 122., 128., 136., 145., 155., 165., 175., 185., 195., 206., 218., 230., 243.,
    258., 272., 290., 307., 325., 345., 365., 387., 412., 437., 462., 487., 515., 545., 575., 615.,
    650., 690., 730., 775., 825., 875., 925., 975.,
];
const S125: &[f64] = &[10., 20., 50.];
const E6: &[f64] = &[10., 15., 22., 33., 47., 68.];
const E12: &[f64] = &[10., 12., 15., 18., 22., 27., 33., 39., 47., 56., 68., 82.];
const E24: &[f64] = &[
    10., 11., 12., 13., 15., 16., 18., 20., 22., 24., 27., 30., 33., 36., 39., 43., 47., 51., 56.,
    62., 68., 75., 82., 91.,
];
const E48: &[f64] = &[
    100., 105., 110., 115., 121., 127., 133., 140., 147., 154., 162., 169., 178., 187., 196., 205.,
    215., 226., 237., 249., 261., 274., 287., 301., 316., 332., 348., 365., 383., 402., 422., 442.,
    464., 487., 511., 536., 562., 590., 619., 649., 681., 715., 750., 787., 825., 866., 909., 953.,
];
const E96: &[f64] = &[
    100., 102., 105., 107., 110., 113., 115., 118., 121., 124., 127., 130., 133., 137., 140., 143.,
    147., 150., 154., 158., 162., 165., 169., 174., 178., 182., 187., 191., 196., 200., 205., 210.,
    215., 221., 226., 232., 237., 243., 249., 255., 261., 267., 274., 280., 287., 294., 301., 309.,
    316., 324., 332., 340., 348., 357., 365., 374., 383., 392., 402., 412., 422., 432., 442., 453.,
    464., 475., 487., 499., 511., 523., 536., 549., 562., 576., 590., 604., 619., 634., 649., 665.,
    681., 698., 715., 732., 750., 768., 787., 806., 825., 845., 866., 887., 909., 931., 953., 976.,
];
const E192: &[f64] = &[
    100., 101., 102., 104., 105., 106., 107., 109., 110., 111., 113., 114., 115., 117., 118., 120.,
    121., 123., 124., 126., 127., 129., 130., 132., 133., 135., 137., 138., 140., 142., 143., 145.,
    147., 149., 150., 152., 154., 156., 158., 160., 162., 164., 165., 167., 169., 172., 174., 176.,
    178., 180., 182., 184., 187., 189., 191., 193., 196., 198., 200., 203., 205., 208., 210., 213.,
    215., 218., 221., 223., 226., 229., 232., 234., 237., 240., 243., 246., 249., 252., 255., 258.,
    261., 264., 267., 271., 274., 277., 280., 284., 287., 291., 294., 298., 301., 305., 309., 312.,
    316., 320., 324., 328., 332., 336., 340., 344., 348., 352., 357., 361., 365., 370., 374., 379.,
    383., 388., 392., 397., 402., 407., 412., 417., 422., 427., 432., 437., 442., 448., 453., 459.,
    464., 470., 475., 481., 487., 493., 499., 505., 511., 517., 523., 530., 536., 542., 549., 556.,
    562., 569., 576., 583., 590., 597., 604., 612., 619., 626., 634., 642., 649., 657., 665., 673.,
    681., 690., 698., 706., 715., 723., 732., 741., 750., 759., 768., 777., 787., 796., 806., 816.,
    825., 835., 845., 856., 866., 876., 887., 898., 909., 920., 931., 942., 953., 965., 976., 988.,
];

/// A granularity's rounding.
#[derive(Clone, Copy)]
pub enum Rounder {
    /// A preferred-number series, scaled by powers of ten.
    Series(&'static [f64]),
    /// `POWERSOF2`.
    PowersOfTwo,
}

impl Rounder {
    /// The rounder `name` names (mongod's 40257 for another).
    pub fn parse(name: &str) -> CommandResult<Rounder> {
        Ok(Rounder::Series(match name {
            "R5" => R5,
            "R10" => R10,
            "R20" => R20,
            "R40" => R40,
            "R80" => R80,
            "1-2-5" => S125,
            "E6" => E6,
            "E12" => E12,
            "E24" => E24,
            "E48" => E48,
            "E96" => E96,
            "E192" => E192,
            "POWERSOF2" => return Ok(Rounder::PowersOfTwo),
            other => {
                return Err(CommandError::new(
                    ErrorCode::Location(40257),
                    format!("Unknown rounding granularity '{other}'"),
                ));
            }
        }))
    }

    /// The smallest boundary strictly above `v` (0 stays 0).
    pub fn round_up(self, v: &RawBson) -> RawBson {
        let x = as_f64(v).unwrap_or(0.0);
        if x == 0.0 || infinite(v) {
            return v.clone();
        }
        match self {
            Rounder::Series(s) => match v {
                RawBson::Decimal128(d) => {
                    RawBson::Decimal128(decimal_up(s, Decimal::of_bson(*d)).bson())
                }
                _ => RawBson::Double(series_up(s, x)),
            },
            Rounder::PowersOfTwo if matches!(v, RawBson::Decimal128(_)) => {
                #[expect(clippy::cast_possible_truncation, reason = "log2 of a decimal fits")]
                let e = (log2(v).floor() + 1.0) as i32;
                decimal_pow2(e)
            }
            Rounder::PowersOfTwo => pow2(match v {
                RawBson::Int32(_) | RawBson::Int64(_) => {
                    let n = integer(v);
                    64 - i32::try_from(n.leading_zeros()).unwrap_or(0)
                }
                #[expect(clippy::cast_possible_truncation, reason = "log2 of a double fits")]
                _ => (x.log2().floor() + 1.0) as i32,
            }),
        }
    }

    /// The largest boundary strictly below `v` (0 stays 0).
    pub fn round_down(self, v: &RawBson) -> RawBson {
        let x = as_f64(v).unwrap_or(0.0);
        if x == 0.0 || infinite(v) {
            return v.clone();
        }
        match self {
            Rounder::Series(s) => match v {
                RawBson::Decimal128(d) => {
                    RawBson::Decimal128(decimal_down(s, Decimal::of_bson(*d)).bson())
                }
                _ => RawBson::Double(series_down(s, x)),
            },
            Rounder::PowersOfTwo if matches!(v, RawBson::Decimal128(_)) => {
                #[expect(clippy::cast_possible_truncation, reason = "log2 of a decimal fits")]
                let e = (log2(v).ceil() - 1.0) as i32;
                decimal_pow2(e)
            }
            Rounder::PowersOfTwo => pow2(match v {
                RawBson::Int32(_) | RawBson::Int64(_) => {
                    let n = integer(v);
                    let top = 63 - i32::try_from(n.leading_zeros()).unwrap_or(0);
                    if n.count_ones() == 1 { top - 1 } else { top }
                }
                #[expect(clippy::cast_possible_truncation, reason = "log2 of a double fits")]
                _ => (x.log2().ceil() - 1.0) as i32,
            }),
        }
    }
}

/// An infinite double or decimal (a decimal past a double's range is finite).
fn infinite(v: &RawBson) -> bool {
    match v {
        RawBson::Double(d) => d.is_infinite(),
        RawBson::Decimal128(d) => !Decimal::of_bson(*d).is_finite(),
        _ => false,
    }
}

/// mongod's `Decimal128::logarithm(2)` of a decimal, as a double.
fn log2(v: &RawBson) -> f64 {
    let RawBson::Decimal128(d) = v else {
        return f64::NAN;
    };
    Decimal::of_bson(*d).log2().f64()
}

/// `$pow(2, e)` with `e` a decimal: mongod's `Decimal128::power`.
fn decimal_pow2(e: i32) -> RawBson {
    RawBson::Decimal128(Decimal::of_i64(2).pow(Decimal::of_i64(i64::from(e))).bson())
}

/// The most times a decimal's multiplier is scaled by ten: past decimal128's whole range.
const MAX_SCALINGS: usize = 13_000;

fn less(a: Decimal, b: Decimal) -> bool {
    a.compare(b).is_some_and(std::cmp::Ordering::is_lt)
}

/// The series as mongod's `Decimal128(double)`: `10.0000000000000`, `16.0000000000000`, ….
fn decimal_series(s: &[f64]) -> Vec<Decimal> {
    s.iter().map(|&b| Decimal::of_f64(b)).collect()
}

/// `series_up` in decimal, as mongod's `GranularityRounderPreferredNumbers::roundUp`.
fn decimal_up(s: &[f64], x: Decimal) -> Decimal {
    let series = decimal_series(s);
    let (Some(&first), Some(&last)) = (series.first(), series.last()) else {
        return x;
    };
    let ten = Decimal::of_i64(10);
    let mut m = Decimal::of_i64(1);
    for _ in 0..MAX_SCALINGS {
        if less(x, last * m) {
            break;
        }
        m = m * ten;
    }
    for _ in 0..MAX_SCALINGS {
        if !less(x, first * m) {
            break;
        }
        let previous_min = first * m;
        m = m / ten;
        if !less(x, last * m) {
            return previous_min;
        }
    }
    series
        .iter()
        .map(|&b| b * m)
        .find(|&b| less(x, b))
        .unwrap_or(last * m)
}

/// `series_down` in decimal, as mongod's `GranularityRounderPreferredNumbers::roundDown`.
fn decimal_down(s: &[f64], x: Decimal) -> Decimal {
    let series = decimal_series(s);
    let (Some(&first), Some(&last)) = (series.first(), series.last()) else {
        return x;
    };
    let ten = Decimal::of_i64(10);
    let mut m = Decimal::of_i64(1);
    for _ in 0..MAX_SCALINGS {
        if less(first * m, x) {
            break;
        }
        m = m / ten;
    }
    for _ in 0..MAX_SCALINGS {
        if !less(last * m, x) {
            break;
        }
        let previous_max = last * m;
        m = m * ten;
        if !less(first * m, x) {
            return previous_max;
        }
    }
    series
        .iter()
        .map(|&b| b * m)
        .take_while(|&b| less(b, x))
        .last()
        .unwrap_or(first * m)
}

fn integer(v: &RawBson) -> i64 {
    match v {
        RawBson::Int32(i) => i64::from(*i),
        RawBson::Int64(i) => *i,
        _ => 0,
    }
}

/// `$pow(2, e)`: an int, a long, or a double when negative or too large.
fn pow2(e: i32) -> RawBson {
    match e {
        0..=30 => RawBson::Int32(1 << e),
        31..=62 => RawBson::Int64(1_i64 << e),
        _ => RawBson::Double(2_f64.powi(e)),
    }
}

fn series_up(s: &[f64], x: f64) -> f64 {
    let (Some(&first), Some(&last)) = (s.first(), s.last()) else {
        return x;
    };
    let mut m = 1.0;
    while x >= last * m {
        m *= 10.0;
    }
    while x < first * m {
        let previous_min = first * m;
        m /= 10.0;
        if x >= last * m {
            return previous_min;
        }
    }
    s.iter().map(|b| b * m).find(|b| x < *b).unwrap_or(last * m)
}

fn series_down(s: &[f64], x: f64) -> f64 {
    let (Some(&first), Some(&last)) = (s.first(), s.last()) else {
        return x;
    };
    let mut m = 1.0;
    while x <= first * m {
        m /= 10.0;
    }
    while x > last * m {
        let previous_max = last * m;
        m *= 10.0;
        if x <= first * m {
            return previous_max;
        }
    }
    s.iter()
        .map(|b| b * m)
        .take_while(|b| *b < x)
        .last()
        .unwrap_or(first * m)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn series_and_powers_of_two() {
        let e6 = Rounder::parse("E6").unwrap();
        assert_eq!(e6.round_up(&RawBson::Double(0.8)), RawBson::Double(1.0));
        assert_eq!(e6.round_up(&RawBson::Int32(10)), RawBson::Double(15.0));
        assert_eq!(e6.round_up(&RawBson::Int32(150)), RawBson::Double(220.0));
        assert_eq!(e6.round_down(&RawBson::Double(0.8)), RawBson::Double(0.68));
        assert_eq!(e6.round_down(&RawBson::Int32(15)), RawBson::Double(10.0));
        assert_eq!(e6.round_up(&RawBson::Int32(0)), RawBson::Int32(0));
        let p2 = Rounder::parse("POWERSOF2").unwrap();
        assert_eq!(p2.round_up(&RawBson::Int32(4)), RawBson::Int32(8));
        assert_eq!(p2.round_up(&RawBson::Int32(5)), RawBson::Int32(8));
        assert_eq!(p2.round_down(&RawBson::Int32(4)), RawBson::Int32(2));
        assert_eq!(p2.round_down(&RawBson::Int32(5)), RawBson::Int32(4));
        assert_eq!(p2.round_up(&RawBson::Double(3.5)), RawBson::Int32(4));
        assert_eq!(p2.round_down(&RawBson::Double(0.3)), RawBson::Double(0.25));
        assert_eq!(
            Rounder::parse("X").err().map(|e| e.code.code()),
            Some(40257)
        );
    }

    fn dec(s: &str) -> RawBson {
        RawBson::Decimal128(s.parse().unwrap())
    }

    #[test]
    fn decimals_round_in_decimal() {
        let e6 = Rounder::parse("E6").unwrap();
        // The series' doubles as 15-digit decimals, scaled by 10 or 0.1.
        assert_eq!(e6.round_up(&dec("0.8")), dec("1.00000000000000"));
        assert_eq!(e6.round_up(&dec("10")), dec("15.0000000000000"));
        assert_eq!(e6.round_up(&dec("150")), dec("220.0000000000000"));
        assert_eq!(e6.round_down(&dec("0.8")), dec("0.680000000000000"));
        assert_eq!(e6.round_down(&dec("15")), dec("10.0000000000000"));
        assert_eq!(e6.round_down(&dec("0.0015")), dec("0.00100000000000000"));
        // Exactly, past a double's precision: 1.5 + 10^-30 rounds up past 1.5, not to it.
        assert_eq!(
            e6.round_up(&dec("1.500000000000000000000000000001")),
            dec("2.20000000000000")
        );
        assert_eq!(
            e6.round_down(&dec("1.500000000000000000000000000001")),
            dec("1.50000000000000")
        );
        // And past a double's range.
        assert_eq!(
            Rounder::parse("R5").unwrap().round_up(&dec("1E+400")),
            dec("1.600000000000000000000000000000000E+400")
        );
        assert_eq!(e6.round_up(&dec("0")), dec("0"));
        assert_eq!(e6.round_up(&dec("Infinity")), dec("Infinity"));
        assert_eq!(
            e6.round_up(&RawBson::Double(f64::INFINITY)),
            RawBson::Double(f64::INFINITY)
        );
        // Powers of two: $pow(2, e) with a decimal e, written with 34 digits.
        let p2 = Rounder::parse("POWERSOF2").unwrap();
        assert_eq!(
            p2.round_up(&dec("5")),
            dec("8.000000000000000000000000000000000")
        );
        assert_eq!(
            p2.round_down(&dec("8")),
            dec("4.000000000000000000000000000000000")
        );
        assert_eq!(
            p2.round_down(&dec("0.3")),
            dec("0.2500000000000000000000000000000000")
        );
        assert_eq!(
            p2.round_up(&dec("1E+40")),
            dec("1.088903574147003083082798743781658E+40")
        );
    }
}
