//! The accumulators that keep `n` values: `$firstN`, `$lastN`, `$minN`, `$maxN` (`{input, n}`)
//! and `$top`, `$bottom`, `$topN`, `$bottomN` (`{n?, sortBy, output}`), mongod's
//! `AccumulatorN` family.

use std::cmp::Ordering;
use std::collections::VecDeque;
use std::sync::Arc;

use bson::{RawArrayBuf, RawBson, RawBsonRef, RawDocument};

use super::{Accumulator, Op, fields, loc, value_bytes};
use crate::error::CommandResult;
use crate::query::display;
use crate::query::sort::SortSpec;
use crate::query::{Expression, Variables};

/// A kept value with its sort key (empty outside the `$top`/`$bottom` family).
type Item = (Vec<RawBson>, RawBson);

/// The values one group keeps, with the sort key of each for the `$top`/`$bottom` family.
#[derive(Clone)]
pub struct Ranked {
    n: usize,
    items: VecDeque<Item>,
    bytes: usize,
}

/// Parses `$firstN`/`$lastN`/`$minN`/`$maxN: {input, n}`.
pub(super) fn parse_n(
    name: &str,
    arg: RawBsonRef<'_>,
    vars: &Arc<Variables>,
) -> CommandResult<Accumulator> {
    let RawBsonRef::Document(spec) = arg else {
        let code = if matches!(name, "$firstN" | "$lastN") {
            5_787_801
        } else {
            5_787_900
        };
        return Err(loc(
            code,
            format!(
                "specification must be an object; found {}",
                display::value(arg)
            ),
        ));
    };
    let mut input = None;
    let mut n = None;
    for (k, v) in fields(spec)? {
        match k {
            "input" => input = Some(Expression::parse_in(v, vars)?),
            "n" => n = Some(Expression::parse_in(v, vars)?),
            other => {
                return Err(loc(
                    5_787_901,
                    format!("Unknown argument for 'n' operator: {other}"),
                ));
            }
        }
    }
    let n = n.ok_or_else(|| loc(5_787_906, "Missing value for 'n'"))?;
    let input = input.ok_or_else(|| loc(5_787_907, "Missing value for 'input'"))?;
    let op = match name {
        "$firstN" => Op::FirstN,
        "$lastN" => Op::LastN,
        "$minN" => Op::MinN,
        _ => Op::MaxN,
    };
    Ok(Accumulator {
        op,
        input,
        n: Some(n),
        sort: None,
        ps: Vec::new(),
        collation: None,
    })
}

/// Parses `$top`/`$bottom: {sortBy, output}` and `$topN`/`$bottomN: {n, sortBy, output}`.
pub(super) fn parse_top_bottom(
    name: &str,
    arg: RawBsonRef<'_>,
    vars: &Arc<Variables>,
) -> CommandResult<Accumulator> {
    let single = matches!(name, "$top" | "$bottom");
    let RawBsonRef::Document(spec) = arg else {
        return Err(loc(
            5_788_001,
            format!(
                "specification must be an object; found {}",
                display::value(arg)
            ),
        ));
    };
    let mut n = None;
    let mut output = None;
    let mut sort_by = None;
    for (k, v) in fields(spec)? {
        match k {
            "n" if !single => n = Some(Expression::parse_in(v, vars)?),
            "output" => output = Some(Expression::parse_in(v, vars)?),
            "sortBy" => sort_by = Some(v),
            other => {
                return Err(loc(
                    5_788_002,
                    format!("Unknown argument to {name} '{other}'"),
                ));
            }
        }
    }
    let n = if single {
        None
    } else {
        Some(n.ok_or_else(|| loc(5_788_003, "Missing value for 'n'"))?)
    };
    let output = output.ok_or_else(|| loc(5_788_004, "Missing value for 'output'"))?;
    let sort_by = sort_by.ok_or_else(|| loc(5_788_005, "Missing value for 'sortBy'"))?;
    let RawBsonRef::Document(sort_by) = sort_by else {
        return Err(loc(
            10065,
            format!(
                "invalid parameter: expected an object (sortBy), found {}",
                display::value(sort_by)
            ),
        ));
    };
    let sort = SortSpec::compile_for_pipeline(sort_by)?;
    let op = match name {
        "$top" => Op::Top,
        "$topN" => Op::TopN,
        "$bottom" => Op::Bottom,
        _ => Op::BottomN,
    };
    Ok(Accumulator {
        op,
        input: output,
        n,
        sort: Some(sort),
        ps: Vec::new(),
        collation: None,
    })
}

/// mongod's check of an evaluated `n`: a positive integral number.
pub(super) fn validate_n(v: Option<&RawBson>) -> CommandResult<usize> {
    let shown = || {
        v.map_or_else(
            || "MISSING".to_owned(),
            |v| display::value(v.as_raw_bson_ref()),
        )
    };
    let Some(x) = v.and_then(super::as_f64) else {
        return Err(loc(
            5_787_902,
            format!(
                "Value for 'n' must be of integral type, but found {}",
                shown()
            ),
        ));
    };
    let n = match v {
        Some(RawBson::Int32(i)) => i64::from(*i),
        Some(RawBson::Int64(i)) => *i,
        #[expect(
            clippy::cast_possible_truncation,
            reason = "checked to be integral below"
        )]
        _ => x.trunc() as i64,
    };
    #[expect(
        clippy::cast_precision_loss,
        reason = "mongod compares n with the double value"
    )]
    if !matches!(v, Some(RawBson::Int32(_) | RawBson::Int64(_))) && (n as f64) != x {
        return Err(loc(
            5_787_903,
            format!(
                "Value for 'n' must be of integral type, but found {}",
                shown()
            ),
        ));
    }
    if n <= 0 {
        return Err(loc(
            5_787_908,
            format!("'n' must be greater than 0, found {n}"),
        ));
    }
    Ok(usize::try_from(n).unwrap_or(usize::MAX))
}

impl Ranked {
    pub(super) fn new(n: usize) -> Ranked {
        Ranked {
            n,
            items: VecDeque::new(),
            bytes: 0,
        }
    }

    pub(super) fn bytes(&self) -> usize {
        self.bytes
    }

    fn insert_at(&mut self, at: usize, key: Vec<RawBson>, v: RawBson) {
        self.bytes = self.bytes.saturating_add(
            value_bytes(Some(&v)) + key.iter().map(|k| value_bytes(Some(k))).sum::<usize>(),
        );
        self.items.insert(at, (key, v));
    }

    fn remove_at(&mut self, at: usize) {
        if let Some((key, v)) = self.items.remove(at) {
            self.bytes = self.bytes.saturating_sub(
                value_bytes(Some(&v)) + key.iter().map(|k| value_bytes(Some(k))).sum::<usize>(),
            );
        }
    }

    /// Inserts `v` after the values ordered before or equal to it (`less`-first order).
    fn insert_sorted(
        &mut self,
        key: Vec<RawBson>,
        v: RawBson,
        cmp: &dyn Fn(&Item, &Vec<RawBson>, &RawBson) -> Ordering,
    ) {
        let at = self
            .items
            .iter()
            .position(|item| cmp(item, &key, &v).is_gt())
            .unwrap_or(self.items.len());
        self.insert_at(at, key, v);
    }

    pub(super) fn process(&mut self, acc: &Accumulator, doc: &RawDocument) -> CommandResult<()> {
        let v = acc.input.evaluate(doc)?;
        match acc.op {
            Op::FirstN | Op::LastN => self.offer(acc, Vec::new(), v.unwrap_or(RawBson::Null)),
            Op::MinN | Op::MaxN => {
                if let Some(v) = v.filter(|v| !matches!(v, RawBson::Null | RawBson::Undefined)) {
                    self.offer(acc, Vec::new(), v);
                }
            }
            Op::Top | Op::TopN | Op::Bottom | Op::BottomN => {
                if let Some(sort) = &acc.sort {
                    let key: Vec<RawBson> = sort.key(doc).into_iter().map(RawBson::from).collect();
                    self.offer(acc, key, v.unwrap_or(RawBson::Null));
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// Takes one value (with its sort key, for the `$top`/`$bottom` family), as seen after
    /// every value already kept.
    fn offer(&mut self, acc: &Accumulator, key: Vec<RawBson>, v: RawBson) {
        match acc.op {
            Op::FirstN if self.items.len() < self.n => {
                self.insert_at(self.items.len(), key, v);
            }
            Op::LastN => {
                if self.items.len() == self.n {
                    self.remove_at(0);
                }
                self.insert_at(self.items.len(), key, v);
            }
            Op::MinN | Op::MaxN => {
                // Kept ascending; `$minN` drops the largest, `$maxN` the smallest.
                if self.items.len() == self.n {
                    let (at, drop) = if acc.op == Op::MinN {
                        let last = self.items.len() - 1;
                        (last, acc.compare(&self.items[last].1, &v).is_gt())
                    } else {
                        (0, acc.compare(&self.items[0].1, &v).is_lt())
                    };
                    if !drop {
                        return;
                    }
                    self.remove_at(at);
                }
                self.insert_sorted(key, v, &|item, _, v| acc.compare(&item.1, v));
            }
            Op::Top | Op::TopN | Op::Bottom | Op::BottomN => {
                let Some(sort) = &acc.sort else {
                    return;
                };
                let cmp = |a: &[RawBson], b: &[RawBson]| {
                    let a: Vec<RawBsonRef<'_>> = a.iter().map(RawBson::as_raw_bson_ref).collect();
                    let b: Vec<RawBsonRef<'_>> = b.iter().map(RawBson::as_raw_bson_ref).collect();
                    sort.compare_keys(&a, &b)
                };
                // Kept in sort order; on a tie the value seen first stays.
                if self.items.len() == self.n {
                    let top = matches!(acc.op, Op::Top | Op::TopN);
                    let (at, drop) = if top {
                        let last = self.items.len() - 1;
                        (last, cmp(&self.items[last].0, &key).is_gt())
                    } else {
                        (0, cmp(&key, &self.items[0].0).is_gt())
                    };
                    if !drop {
                        return;
                    }
                    self.remove_at(at);
                }
                self.insert_sorted(key, v, &|item, key, _| cmp(&item.0, key));
            }
            _ => {}
        }
    }

    /// The kept values as a partial state for a spill file: `[[<sort key…>], <value>]` each,
    /// in the order kept.
    pub(super) fn into_partial(self) -> RawBson {
        let mut out = RawArrayBuf::new();
        for (key, v) in self.items {
            let mut k = RawArrayBuf::new();
            for part in key {
                k.push(part);
            }
            let mut item = RawArrayBuf::new();
            item.push(k);
            item.push(v);
            out.push(item);
        }
        RawBson::Array(out)
    }

    /// Takes a partial state of the same group, from later documents than those seen: its
    /// values are offered in the order it kept them, which is their input order among equals,
    /// so the result is the one of taking every document in turn.
    pub(super) fn merge_partial(
        &mut self,
        acc: &Accumulator,
        partial: &bson::RawArray,
    ) -> CommandResult<()> {
        for item in partial {
            let item = item.map_err(|e| super::invalid_bson(&e))?;
            let RawBsonRef::Array(pair) = item else {
                return Err(super::partial::partial_error());
            };
            let mut it = pair.into_iter();
            let (Some(Ok(RawBsonRef::Array(key))), Some(Ok(v))) = (it.next(), it.next()) else {
                return Err(super::partial::partial_error());
            };
            let key = key
                .into_iter()
                .map(|k| k.map(RawBson::from).map_err(|e| super::invalid_bson(&e)))
                .collect::<CommandResult<Vec<_>>>()?;
            self.offer(acc, key, RawBson::from(v));
        }
        Ok(())
    }

    pub(super) fn finish(self, acc: &Accumulator) -> RawBson {
        let mut values = self.items.into_iter().map(|(_, v)| v);
        match acc.op {
            Op::Top | Op::Bottom => values.next_back().unwrap_or(RawBson::Null),
            Op::MaxN => {
                let mut out = RawArrayBuf::new();
                for v in values.rev() {
                    out.push(v);
                }
                RawBson::Array(out)
            }
            _ => {
                let mut out = RawArrayBuf::new();
                for v in values {
                    out.push(v);
                }
                RawBson::Array(out)
            }
        }
    }
}
