//! `$group`'s accumulators, which `$bucket` and `$bucketAuto` share: each parses from
//! `{<op>: <argument>}` (mongod's `AccumulationStatement`), starts a [`State`] per group, takes
//! each document of the group, and gives the group's value at the end.
//!
//! `$sum $avg $min $max $first $last $push $addToSet $count $mergeObjects $stdDevPop
//! $stdDevSamp` take one expression; `$firstN $lastN $maxN $minN` take `{input, n}`, `$top
//! $bottom` `{sortBy, output}` and `$topN $bottomN` `{n, sortBy, output}` ([`ranked`]);
//! `$median` `{input, method}` and `$percentile` `{input, p, method}` ([`percentile`]). An `n`
//! is evaluated once per group, against the group's `_id` when it is a document (so it may
//! read the key's fields), else against an empty document.

mod partial;
mod percentile;
mod ranked;
mod sum;

use std::collections::HashSet;
use std::sync::Arc;

use bson::{RawArrayBuf, RawBson, RawBsonRef, RawDocument, RawDocumentBuf};

pub(crate) use self::sum::as_f64;
use crate::error::{CommandError, CommandResult, ErrorCode};
use crate::query::compare::compare_collated;
use crate::query::display::{self, type_name};
use crate::query::sort::SortSpec;
use crate::query::{Collation, Expression, Variables, keystring};

/// One accumulator of a `$group` (or `$bucket`, `$bucketAuto`) output field.
#[derive(Clone)]
pub struct Accumulator {
    op: Op,
    input: Expression,
    /// `n` of the N accumulators.
    n: Option<Expression>,
    /// `sortBy` of `$top`/`$bottom`/`$topN`/`$bottomN`.
    sort: Option<SortSpec>,
    /// `p` of `$percentile` (`[0.5]` for `$median`).
    ps: Vec<f64>,
    /// The command's collation: `$min`/`$max` (and the N forms) compare strings under it,
    /// `$addToSet` keeps one of each equal string.
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
    AddToSet,
    MergeObjects,
    StdDevPop,
    StdDevSamp,
    FirstN,
    LastN,
    MinN,
    MaxN,
    Top,
    TopN,
    Bottom,
    BottomN,
    Median,
    Percentile,
}

/// One group's running value of one accumulator.
#[derive(Clone)]
pub enum State {
    /// `$sum`, `$avg`, `$count`: the total so far and how many numbers made it.
    Sum { total: RawBson, n: u64 },
    /// `$min`, `$max`: the best value so far.
    Best(Option<RawBson>),
    /// `$first`: the first document's value (`Some(None)`: it was missing).
    First(Option<Option<RawBson>>),
    /// `$last`: the last document's value.
    Last(Option<RawBson>),
    /// `$push`: every value.
    Push(RawArrayBuf),
    /// `$addToSet`: each distinct value once, in first-seen order.
    Set {
        items: RawArrayBuf,
        seen: HashSet<Vec<u8>>,
    },
    /// `$mergeObjects`: the fields so far.
    Merge(RawDocumentBuf),
    /// `$stdDevPop`/`$stdDevSamp`: Welford's running count, mean and sum of squared deviations.
    Moments { n: u64, mean: f64, m2: f64 },
    /// `$firstN`, `$lastN`, `$minN`, `$maxN`, `$top(N)`, `$bottom(N)`.
    Ranked(ranked::Ranked),
    /// `$median`, `$percentile`: the numbers seen.
    Values(Vec<f64>),
}

impl State {
    /// Bytes the state holds, roughly, for the blocking stages' memory limit.
    pub fn bytes(&self) -> usize {
        match self {
            State::Sum { .. } | State::Moments { .. } => 24,
            State::Best(v) | State::Last(v) => value_bytes(v.as_ref()),
            State::First(v) => value_bytes(v.as_ref().and_then(Option::as_ref)),
            State::Push(a) => a.as_bytes().len(),
            State::Set { items, seen } => {
                items.as_bytes().len().saturating_mul(2) + seen.len() * 16
            }
            State::Merge(d) => d.as_bytes().len(),
            State::Ranked(r) => r.bytes(),
            State::Values(v) => v.len() * 8,
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

pub(crate) fn loc(code: i32, msg: impl Into<String>) -> CommandError {
    CommandError::new(ErrorCode::Location(code), msg)
}

fn invalid_bson(e: &bson::error::Error) -> CommandError {
    CommandError::new(ErrorCode::InvalidBSON, e.to_string())
}

impl Accumulator {
    /// Parses output field `field`'s `{<op>: <argument>}`, with mongod's errors.
    pub fn parse(
        field: &str,
        spec: RawBsonRef<'_>,
        vars: &Arc<Variables>,
    ) -> CommandResult<Accumulator> {
        let acc = match spec {
            RawBsonRef::Document(acc)
                if acc
                    .iter()
                    .next()
                    .and_then(Result::ok)
                    .is_some_and(|(k, _)| k.as_str().starts_with('$')) =>
            {
                acc
            }
            _ => {
                return Err(loc(
                    40234,
                    format!("The field '{field}' must be an accumulator object"),
                ));
            }
        };
        if field.contains('.') {
            return Err(loc(
                40235,
                format!("The field name '{field}' cannot contain '.'"),
            ));
        }
        let mut it = acc.iter();
        let (Some(Ok((op, arg))), None) = (it.next(), it.next()) else {
            return Err(loc(
                40238,
                format!("The field '{field}' must specify one accumulator"),
            ));
        };
        let name = op.as_str();
        if matches!(arg, RawBsonRef::Array(_)) {
            return Err(loc(
                40237,
                format!("The {name} accumulator is a unary operator"),
            ));
        }
        let op = match name {
            "$sum" => Op::Sum,
            "$avg" => Op::Avg,
            "$min" => Op::Min,
            "$max" => Op::Max,
            "$first" => Op::First,
            "$last" => Op::Last,
            "$push" => Op::Push,
            "$addToSet" => Op::AddToSet,
            "$mergeObjects" => Op::MergeObjects,
            "$stdDevPop" => Op::StdDevPop,
            "$stdDevSamp" => Op::StdDevSamp,
            "$count" => {
                let empty = matches!(arg, RawBsonRef::Document(d) if d.is_empty());
                if !empty {
                    return Err(CommandError::type_mismatch(
                        "$count takes no arguments, i.e. $count:{}",
                    ));
                }
                return Ok(Accumulator::single(
                    Op::Sum,
                    Expression::parse_in(RawBsonRef::Int32(1), vars)?,
                ));
            }
            "$firstN" | "$lastN" | "$minN" | "$maxN" => {
                return ranked::parse_n(name, arg, vars);
            }
            "$top" | "$topN" | "$bottom" | "$bottomN" => {
                return ranked::parse_top_bottom(name, arg, vars);
            }
            "$median" | "$percentile" => return percentile::parse(name, arg, vars),
            "$accumulator" => {
                return Err(loc(
                    31264,
                    "Cannot run server-side javascript without the javascript engine enabled",
                ));
            }
            other => {
                return Err(loc(15952, format!("unknown group operator '{other}'")));
            }
        };
        Ok(Accumulator::single(op, Expression::parse_in(arg, vars)?))
    }

    fn single(op: Op, input: Expression) -> Accumulator {
        Accumulator {
            op,
            input,
            n: None,
            sort: None,
            ps: Vec::new(),
            collation: None,
        }
    }

    /// Compares strings under `collation` from now on.
    pub fn set_collation(&mut self, collation: Option<Arc<Collation>>) {
        if let Some(s) = self.sort.take() {
            self.sort = Some(s.with_collation(collation.clone()));
        }
        self.collation = collation;
    }

    /// A new group's state; `key` is the group's `_id` (an N accumulator's `n` may read it).
    pub fn start(&self, key: &RawBson) -> CommandResult<State> {
        Ok(match self.op {
            Op::Sum | Op::Avg => State::Sum {
                total: RawBson::Int32(0),
                n: 0,
            },
            Op::Min | Op::Max => State::Best(None),
            Op::First => State::First(None),
            Op::Last => State::Last(None),
            Op::Push => State::Push(RawArrayBuf::new()),
            Op::AddToSet => State::Set {
                items: RawArrayBuf::new(),
                seen: HashSet::new(),
            },
            Op::MergeObjects => State::Merge(RawDocumentBuf::new()),
            Op::StdDevPop | Op::StdDevSamp => State::Moments {
                n: 0,
                mean: 0.0,
                m2: 0.0,
            },
            Op::FirstN
            | Op::LastN
            | Op::MinN
            | Op::MaxN
            | Op::Top
            | Op::TopN
            | Op::Bottom
            | Op::BottomN => State::Ranked(ranked::Ranked::new(self.group_n(key)?)),
            Op::Median | Op::Percentile => State::Values(Vec::new()),
        })
    }

    /// `n` for a group of `key`.
    fn group_n(&self, key: &RawBson) -> CommandResult<usize> {
        let Some(n) = &self.n else {
            return Ok(1);
        };
        let empty = RawDocumentBuf::new();
        let root = match key {
            RawBson::Document(d) => d.as_ref(),
            _ => empty.as_ref(),
        };
        ranked::validate_n(n.evaluate(root)?.as_ref())
    }

    /// Takes one document of the group.
    pub fn process(&self, state: &mut State, doc: &RawDocument) -> CommandResult<()> {
        if let State::Ranked(r) = state {
            return r.process(self, doc);
        }
        let v = self.input.evaluate(doc)?;
        match state {
            State::Sum { total, n } => {
                if let Some(v) = v
                    && as_f64(&v).is_some()
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
                    self.offer_best(best, v);
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
            State::Set { items, seen } => {
                if let Some(v) = v {
                    self.insert_into_set(items, seen, v);
                }
            }
            State::Merge(acc) => match v {
                None | Some(RawBson::Null | RawBson::Undefined) => {}
                Some(RawBson::Document(d)) => *acc = merge(acc, &d),
                Some(other) => {
                    return Err(loc(
                        40400,
                        format!(
                            "$mergeObjects requires object inputs, but input {} is of type {}",
                            display::value(other.as_raw_bson_ref()),
                            type_name(other.element_type())
                        ),
                    ));
                }
            },
            State::Moments { n, mean, m2 } => {
                if let Some(x) = v.as_ref().and_then(as_f64) {
                    *n += 1;
                    #[expect(clippy::cast_precision_loss, reason = "counts are far below 2^52")]
                    let count = *n as f64;
                    let delta = x - *mean;
                    *mean += delta / count;
                    *m2 += delta * (x - *mean);
                }
            }
            State::Values(values) => {
                if let Some(x) = v.as_ref().and_then(as_f64) {
                    values.push(x);
                }
            }
            State::Ranked(_) => {}
        }
        Ok(())
    }

    /// `$min`/`$max`: keeps `v` if it is strictly better than the best so far (the first of
    /// equal values stays).
    fn offer_best(&self, best: &mut Option<RawBson>, v: RawBson) {
        let replace = best.as_ref().is_none_or(|b| {
            let ord = self.compare(&v, b);
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

    /// `$addToSet`: adds `v` unless an equal value (under the collation) is there.
    fn insert_into_set(&self, items: &mut RawArrayBuf, seen: &mut HashSet<Vec<u8>>, v: RawBson) {
        let key = match &self.collation {
            Some(c) => {
                keystring::to_key(crate::pipeline::stages::collation_key(&v, c).as_raw_bson_ref())
            }
            None => keystring::to_key(v.as_raw_bson_ref()),
        };
        if seen.insert(key) {
            items.push(v);
        }
    }

    /// Compares two values as this accumulator does (under the command's collation).
    fn compare(&self, a: &RawBson, b: &RawBson) -> std::cmp::Ordering {
        compare_collated(
            a.as_raw_bson_ref(),
            b.as_raw_bson_ref(),
            self.collation.as_deref(),
        )
    }

    /// The group's value.
    #[expect(clippy::cast_precision_loss, reason = "averages are doubles")]
    pub fn finish(&self, state: State) -> CommandResult<RawBson> {
        Ok(match state {
            State::Sum { total, n } => match self.op {
                Op::Avg if n == 0 => RawBson::Null,
                Op::Avg => match &total {
                    RawBson::Decimal128(d) => {
                        let count = crate::query::decimal::Decimal::of_i64(
                            i64::try_from(n).unwrap_or(i64::MAX),
                        );
                        RawBson::Decimal128(
                            (crate::query::decimal::Decimal::of_bson(*d) / count).bson(),
                        )
                    }
                    _ => RawBson::Double(as_f64(&total).unwrap_or(0.0) / n as f64),
                },
                _ => total,
            },
            State::Best(v) | State::Last(v) => v.unwrap_or(RawBson::Null),
            State::First(v) => v.flatten().unwrap_or(RawBson::Null),
            State::Push(items) | State::Set { items, .. } => RawBson::Array(items),
            State::Merge(d) => RawBson::Document(d),
            State::Moments { n, m2, .. } => {
                let divisor = if self.op == Op::StdDevSamp {
                    n.saturating_sub(1)
                } else {
                    n
                };
                if divisor == 0 {
                    RawBson::Null
                } else {
                    RawBson::Double((m2 / divisor as f64).max(0.0).sqrt())
                }
            }
            State::Ranked(r) => r.finish(self),
            State::Values(values) => percentile::finish(self, values),
        })
    }
}

/// `acc` with `add`'s fields set: in place when present, appended otherwise.
fn merge(acc: &RawDocument, add: &RawDocument) -> RawDocumentBuf {
    let mut out = RawDocumentBuf::new();
    let mut used = HashSet::new();
    for (k, v) in acc.iter().map_while(Result::ok) {
        match add.get(k.as_str()).ok().flatten() {
            Some(new) => {
                used.insert(k.as_str().to_owned());
                out.append(k, RawBson::from(new));
            }
            None => out.append(k, RawBson::from(v)),
        }
    }
    for (k, v) in add.iter().map_while(Result::ok) {
        if !used.contains(k.as_str()) && acc.get(k.as_str()).ok().flatten().is_none() {
            used.insert(k.as_str().to_owned());
            out.append(k, RawBson::from(v));
        }
    }
    out
}

/// An argument document's fields, for the accumulators taking `{…}`.
fn fields(arg: &RawDocument) -> CommandResult<Vec<(&str, RawBsonRef<'_>)>> {
    arg.iter()
        .map(|item| {
            item.map(|(k, v)| (k.as_str(), v))
                .map_err(|e| invalid_bson(&e))
        })
        .collect()
}

#[cfg(test)]
mod tests;
