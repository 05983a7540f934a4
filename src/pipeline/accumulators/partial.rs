//! Partial states, for a `$group` that spills: a group's [`State`] written to a spill file as
//! one BSON value ([`Accumulator::partial`], mongod's `getValue(toBeMerged: true)`), then
//! folded into the state of the same group built from later partials
//! ([`Accumulator::merge_partial`], mongod's `processInternal(…, merging: true)`).
//!
//! Partials of one group are merged in input order (the spill's merge takes the earliest run
//! first on equal keys), so merging gives what taking every document in turn gives: `$first`
//! keeps the first partial's value, `$last` the last's, `$push` and `$addToSet` concatenate (the
//! set keeping first-seen order), `$mergeObjects` merges in order, the N accumulators offer the
//! kept values again. Sums of integers and of doubles with exact sums are the same; `$avg`
//! keeps its sum and count; `$stdDevPop`/`$stdDevSamp` keep Welford's count, mean and sum of
//! squared deviations and combine them (Chan et al.), which may differ from the one-pass value
//! in the last bits of the double.

use bson::raw::cstr;
use bson::{RawArrayBuf, RawBson, RawBsonRef, RawDocument, RawDocumentBuf};

use super::{Accumulator, State, invalid_bson, merge, sum};
use crate::error::{CommandError, CommandResult};

/// A spill file's partial state is not what this accumulator wrote.
pub(super) fn partial_error() -> CommandError {
    CommandError::internal("$group spill file: malformed partial state")
}

fn doc(v: RawBsonRef<'_>) -> CommandResult<&RawDocument> {
    match v {
        RawBsonRef::Document(d) => Ok(d),
        _ => Err(partial_error()),
    }
}

fn field<'a>(d: &'a RawDocument, name: &str) -> CommandResult<Option<RawBsonRef<'a>>> {
    d.get(name).map_err(|e| invalid_bson(&e))
}

fn array(v: RawBsonRef<'_>) -> CommandResult<&bson::RawArray> {
    match v {
        RawBsonRef::Array(a) => Ok(a),
        _ => Err(partial_error()),
    }
}

fn values(a: &bson::RawArray) -> impl Iterator<Item = CommandResult<RawBson>> + '_ {
    a.into_iter()
        .map(|v| v.map(RawBson::from).map_err(|e| invalid_bson(&e)))
}

/// `{v: <value>}`, or `{}` for none.
fn optional(v: Option<RawBson>) -> RawBson {
    let mut d = RawDocumentBuf::new();
    if let Some(v) = v {
        d.append(cstr!("v"), v);
    }
    RawBson::Document(d)
}

fn to_i64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

fn to_u64(v: Option<RawBsonRef<'_>>) -> CommandResult<u64> {
    match v {
        Some(RawBsonRef::Int64(n)) => u64::try_from(n).map_err(|_| partial_error()),
        _ => Err(partial_error()),
    }
}

fn to_f64(v: Option<RawBsonRef<'_>>) -> CommandResult<f64> {
    match v {
        Some(RawBsonRef::Double(x)) => Ok(x),
        _ => Err(partial_error()),
    }
}

impl Accumulator {
    /// `state` as a BSON value for a spill file.
    pub fn partial(&self, state: State) -> RawBson {
        match state {
            State::Sum { total, n } => {
                let mut d = RawDocumentBuf::new();
                d.append(cstr!("t"), total);
                d.append(cstr!("n"), to_i64(n));
                RawBson::Document(d)
            }
            State::Best(v) | State::Last(v) => optional(v),
            State::First(None) => RawBson::Document(RawDocumentBuf::new()),
            State::First(Some(v)) => {
                let mut d = RawDocumentBuf::new();
                d.append(cstr!("f"), true);
                if let Some(v) = v {
                    d.append(cstr!("v"), v);
                }
                RawBson::Document(d)
            }
            State::Push(items) | State::Set { items, .. } => RawBson::Array(items),
            State::Merge(d) => RawBson::Document(d),
            State::Moments { n, mean, m2 } => {
                let mut d = RawDocumentBuf::new();
                d.append(cstr!("n"), to_i64(n));
                d.append(cstr!("m"), mean);
                d.append(cstr!("q"), m2);
                RawBson::Document(d)
            }
            State::Ranked(r) => r.into_partial(),
            State::Values(values) => {
                let mut a = RawArrayBuf::new();
                for x in values {
                    a.push(x);
                }
                RawBson::Array(a)
            }
        }
    }

    /// Folds `partial` (written by [`Accumulator::partial`] for the same group, from documents
    /// after those `state` has seen) into `state`.
    pub fn merge_partial(&self, state: &mut State, partial: RawBsonRef<'_>) -> CommandResult<()> {
        match state {
            State::Sum { total, n } => {
                let d = doc(partial)?;
                let t = field(d, "t")?.ok_or_else(partial_error)?;
                let current = std::mem::replace(total, RawBson::Null);
                *total = sum::add(current, &RawBson::from(t));
                *n = n.saturating_add(to_u64(field(d, "n")?)?);
            }
            State::Best(best) => {
                if let Some(v) = field(doc(partial)?, "v")? {
                    self.offer_best(best, RawBson::from(v));
                }
            }
            State::Last(last) => {
                // Every partial saw at least one document: the later one's value wins, even
                // missing.
                *last = field(doc(partial)?, "v")?.map(RawBson::from);
            }
            State::First(first) => {
                let d = doc(partial)?;
                if first.is_none() && field(d, "f")?.is_some() {
                    *first = Some(field(d, "v")?.map(RawBson::from));
                }
            }
            State::Push(items) => {
                for v in values(array(partial)?) {
                    items.push(v?);
                }
            }
            State::Set { items, seen } => {
                for v in values(array(partial)?) {
                    self.insert_into_set(items, seen, v?);
                }
            }
            State::Merge(acc) => *acc = merge(acc, doc(partial)?),
            State::Moments { n, mean, m2 } => {
                let d = doc(partial)?;
                let (pn, pmean, pm2) = (
                    to_u64(field(d, "n")?)?,
                    to_f64(field(d, "m")?)?,
                    to_f64(field(d, "q")?)?,
                );
                if pn == 0 {
                    return Ok(());
                }
                if *n == 0 {
                    (*n, *mean, *m2) = (pn, pmean, pm2);
                    return Ok(());
                }
                let total = n.saturating_add(pn);
                #[expect(clippy::cast_precision_loss, reason = "counts are far below 2^52")]
                let (na, nb, nt) = (*n as f64, pn as f64, total as f64);
                let delta = pmean - *mean;
                *mean += delta * nb / nt;
                *m2 += pm2 + delta * delta * na * nb / nt;
                *n = total;
            }
            State::Ranked(r) => r.merge_partial(self, array(partial)?)?,
            State::Values(vs) => {
                for v in array(partial)? {
                    match v.map_err(|e| invalid_bson(&e))? {
                        RawBsonRef::Double(x) => vs.push(x),
                        _ => return Err(partial_error()),
                    }
                }
            }
        }
        Ok(())
    }
}
