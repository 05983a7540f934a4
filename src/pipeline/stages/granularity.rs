//! `$bucketAuto`'s `granularity`: the preferred-number series (Renard, E, 1-2-5) and powers of
//! two that bucket boundaries are rounded to, as mongod's `GranularityRounder`s round.
//!
//! Inputs are non-negative numbers (`$bucketAuto` checks each key first). Preferred numbers
//! answer doubles; powers of two answer `$pow(2, e)`'s type (int, long, or double below 1).
//! Decimal inputs are rounded as doubles (mongod rounds them in decimal).

use bson::RawBson;

use crate::error::{CommandError, CommandResult, ErrorCode};
use crate::pipeline::accumulators::as_f64;

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
        if x == 0.0 {
            return v.clone();
        }
        match self {
            Rounder::Series(s) => RawBson::Double(series_up(s, x)),
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
        if x == 0.0 {
            return v.clone();
        }
        match self {
            Rounder::Series(s) => RawBson::Double(series_down(s, x)),
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
}
