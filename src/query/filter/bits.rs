//! Bitwise operators: `$bitsAllSet $bitsAnySet $bitsAllClear $bitsAnyClear`.

use bson::RawBsonRef;

use super::numeric::{exact_i64, non_negative, parse_int, parse_long};
use super::parse::bad_value;
use super::{Item, Pred};
use crate::error::CommandError;
use crate::query::compare::number_as_f64;
use crate::query::{display, invalid_bson};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BitOp {
    AllSet,
    AllClear,
    AnySet,
    AnyClear,
}

#[derive(Debug, Clone)]
pub(super) struct BitTest {
    op: BitOp,
    positions: Vec<u32>,
}

impl BitTest {
    /// mongod's `BitTestMatchExpression::matchesSingleElement`.
    pub(super) fn matches(&self, v: RawBsonRef<'_>) -> bool {
        let is_set: Box<dyn Fn(u32) -> bool + '_> = match v {
            RawBsonRef::Binary(b) => Box::new(move |p: u32| {
                let byte = usize::try_from(p / 8).ok().and_then(|i| b.bytes.get(i));
                byte.is_some_and(|byte| (byte >> (p % 8)) & 1 == 1)
            }),
            RawBsonRef::Int32(_)
            | RawBsonRef::Int64(_)
            | RawBsonRef::Double(_)
            | RawBsonRef::Decimal128(_) => {
                let n = match v {
                    RawBsonRef::Int32(i) => i64::from(i),
                    RawBsonRef::Int64(i) => i,
                    // Non-integral or out-of-range doubles never match.
                    _ => match number_as_f64(v).and_then(exact_i64) {
                        Some(i) => i,
                        None => return false,
                    },
                };
                // Positions past 63 read the sign, as in two's complement sign extension.
                Box::new(move |p: u32| if p >= 64 { n < 0 } else { (n >> p) & 1 == 1 })
            }
            _ => return false,
        };
        match self.op {
            BitOp::AllSet => self.positions.iter().all(|&p| is_set(p)),
            BitOp::AllClear => self.positions.iter().all(|&p| !is_set(p)),
            BitOp::AnySet => self.positions.iter().any(|&p| is_set(p)),
            BitOp::AnyClear => self.positions.iter().any(|&p| !is_set(p)),
        }
    }
}

pub(super) fn parse_bits(
    path: &str,
    op: &str,
    value: RawBsonRef<'_>,
) -> Result<Item, CommandError> {
    let op_kind = match op {
        "$bitsAllSet" => BitOp::AllSet,
        "$bitsAllClear" => BitOp::AllClear,
        "$bitsAnySet" => BitOp::AnySet,
        _ => BitOp::AnyClear,
    };
    let mut positions = Vec::new();
    match value {
        RawBsonRef::Array(arr) => {
            for (i, item) in arr.into_iter().enumerate() {
                let v = item.map_err(|e| invalid_bson(&e))?;
                let name = i.to_string();
                let n = parse_int(&name, v)
                    .and_then(|n| non_negative(&name, v, i64::from(n)))
                    .map_err(|e| {
                        bad_value(format!("Failed to parse bit position. {}", e.errmsg))
                    })?;
                positions.push(u32::try_from(n).unwrap_or(u32::MAX));
            }
        }
        RawBsonRef::Binary(b) => {
            for (i, byte) in b.bytes.iter().enumerate() {
                for bit in 0..8 {
                    if (byte >> bit) & 1 == 1 {
                        positions.push(u32::try_from(i * 8).unwrap_or(u32::MAX - 8) + bit);
                    }
                }
            }
        }
        v if number_as_f64(v).is_some() => {
            let mask = non_negative(op, v, parse_long(op, v)?)?;
            positions.extend((0..63).filter(|bit| (mask >> bit) & 1 == 1));
        }
        other => {
            return Err(bad_value(format!(
                "{path} takes an Array, a number, or a BinData but received: {}",
                display::element(op, other)
            )));
        }
    }
    Ok(Item::Leaf(Pred::Bits(BitTest {
        op: op_kind,
        positions,
    })))
}
