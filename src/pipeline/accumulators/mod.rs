//! `$group`'s accumulators, which `$bucket` and `$bucketAuto` share: each parses from
//! `{<op>: <argument>}`, starts a [`State`] per group, takes each document of the group, and
//! gives the group's value at the end.

mod sum;

use std::sync::Arc;

use bson::{RawArrayBuf, RawBson, RawBsonRef, RawDocument};

use crate::error::{CommandError, CommandResult, ErrorCode};
use crate::query::compare::compare_collated;
use crate::query::{Collation, Expression, Variables};

/// One accumulator of a `$group` (or `$bucket`, `$bucketAuto`) output field.
#[derive(Clone)]
pub struct Accumulator {
    op: Op,
    input: Expression,
    /// The command's collation: `$min`/`$max` compare strings under it.
    collation: Option<Arc<Collation>>,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Op {
    Sum,
    Avg,
    Min,
    Max,
    First,
    Last,
    Push,
}

/// One group's running value of one accumulator.
pub enum State {
    /// `$sum`, `$avg`: the total so far and how many numbers made it.
    Sum { total: RawBson, n: u64 },
    /// `$min`, `$max`: the best value so far.
    Best(Option<RawBson>),
    /// `$first`: the first document's value (`Some(None)`: it was missing).
    First(Option<Option<RawBson>>),
    /// `$last`: the last document's value.
    Last(Option<RawBson>),
    /// `$push`: every value.
    Push(RawArrayBuf),
}

impl State {
    /// Bytes the state holds, roughly, for the blocking stages' memory limit.
    pub fn bytes(&self) -> usize {
        match self {
            State::Sum { .. } => 24,
            State::Best(v) | State::Last(v) => value_bytes(v.as_ref()),
            State::First(v) => value_bytes(v.as_ref().and_then(Option::as_ref)),
            State::Push(a) => a.as_bytes().len(),
        }
    }
}

/// Bytes a value takes, roughly.
pub fn value_bytes(v: Option<&RawBson>) -> usize {
    16 + match v {
        Some(RawBson::String(s)) => s.len(),
        Some(RawBson::Document(d)) => d.as_bytes().len(),
        Some(RawBson::Array(a)) => a.as_bytes().len(),
        Some(RawBson::Binary(b)) => b.bytes.len(),
        _ => 8,
    }
}

impl Accumulator {
    /// Parses output field `field`'s `{<op>: <argument>}`, with mongod's errors.
    pub fn parse(
        field: &str,
        spec: RawBsonRef<'_>,
        vars: &Arc<Variables>,
    ) -> CommandResult<Accumulator> {
        let RawBsonRef::Document(acc) = spec else {
            return Err(CommandError::new(
                ErrorCode::Location(40234),
                format!("The field '{field}' must be an accumulator object"),
            ));
        };
        let mut it = acc.iter();
        let (Some(Ok((op, arg))), None) = (it.next(), it.next()) else {
            return Err(CommandError::new(
                ErrorCode::Location(40238),
                format!("The field '{field}' must specify one accumulator"),
            ));
        };
        let op = match op.as_str() {
            "$sum" => Op::Sum,
            "$avg" => Op::Avg,
            "$min" => Op::Min,
            "$max" => Op::Max,
            "$first" => Op::First,
            "$last" => Op::Last,
            "$push" => Op::Push,
            other => {
                return Err(CommandError::new(
                    ErrorCode::Location(15952),
                    format!("unknown group operator '{other}'"),
                ));
            }
        };
        Ok(Accumulator {
            op,
            input: Expression::parse_in(arg, vars)?,
            collation: None,
        })
    }

    /// Compares strings under `collation` from now on.
    pub fn set_collation(&mut self, collation: Option<Arc<Collation>>) {
        self.collation = collation;
    }

    /// A new group's state; `_key` is the group's `_id`.
    pub fn start(&self, _key: &RawBson) -> CommandResult<State> {
        Ok(match self.op {
            Op::Sum | Op::Avg => State::Sum {
                total: RawBson::Int32(0),
                n: 0,
            },
            Op::Min | Op::Max => State::Best(None),
            Op::First => State::First(None),
            Op::Last => State::Last(None),
            Op::Push => State::Push(RawArrayBuf::new()),
        })
    }

    /// Takes one document of the group.
    pub fn process(&self, state: &mut State, doc: &RawDocument) -> CommandResult<()> {
        let v = self.input.evaluate(doc)?;
        match state {
            State::Sum { total, n } => {
                if let Some(v) = v
                    && sum::as_f64(&v).is_some()
                {
                    *n += 1;
                    let current = std::mem::replace(total, RawBson::Null);
                    *total = sum::add(current, &v);
                }
            }
            State::Best(best) => {
                if let Some(v) = v
                    && !matches!(v, RawBson::Null)
                {
                    let replace = best.as_ref().is_none_or(|b| {
                        let ord = compare_collated(
                            v.as_raw_bson_ref(),
                            b.as_raw_bson_ref(),
                            self.collation.as_deref(),
                        );
                        if self.op == Op::Min {
                            ord.is_lt()
                        } else {
                            ord.is_gt()
                        }
                    });
                    if replace {
                        *best = Some(v);
                    }
                }
            }
            State::First(first) => {
                if first.is_none() {
                    *first = Some(v);
                }
            }
            State::Last(last) => *last = v,
            State::Push(items) => {
                if let Some(v) = v {
                    items.push(v);
                }
            }
        }
        Ok(())
    }

    /// The group's value.
    #[expect(clippy::cast_precision_loss, reason = "averages are doubles")]
    pub fn finish(&self, state: State) -> CommandResult<RawBson> {
        Ok(match state {
            State::Sum { total, n } => match self.op {
                Op::Avg if n == 0 => RawBson::Null,
                Op::Avg => RawBson::Double(sum::as_f64(&total).unwrap_or(0.0) / n as f64),
                _ => total,
            },
            State::Best(v) | State::Last(v) => v.unwrap_or(RawBson::Null),
            State::First(v) => v.flatten().unwrap_or(RawBson::Null),
            State::Push(items) => RawBson::Array(items),
        })
    }
}
