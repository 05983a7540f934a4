//! `$bucketAuto`: sorts documents by `groupBy` and cuts them into `buckets` ranges of about
//! equal counts (equal values never split), each `{_id: {min, max}, <output>…}`, with bounds
//! rounded to a `granularity` series when one is given.
//!
//! The input is sorted by a [`Sorter`], so it is held to the blocking stages' memory limit and
//! spills past it under `allowDiskUse` (292 without it); buckets are then filled as the sorted
//! documents are read back, one bucket's accumulator states in memory at a time.

use std::sync::Arc;

use bson::raw::cstr;
use bson::{RawArrayBuf, RawBson, RawBsonRef, RawDocument, RawDocumentBuf, rawdoc};

use super::bucket::{is_group_by, parse_output};
use super::granularity::Rounder;
use crate::error::{CommandError, CommandResult, ErrorCode};
use crate::pipeline::accumulators::{Accumulator, State, as_f64};
use crate::pipeline::{Context, Doc, Stage, Stream, aggregation_error, blocking, computed};
use crate::query::compare::compare_collated;
use crate::query::display::{self, type_name};
use crate::query::sort::SortSpec;
use crate::query::{Collation, Expression, Variables};
use crate::sorter::{Sorted, Sorter};

/// `$bucketAuto: {groupBy, buckets, output?, granularity?}`.
pub struct BucketAuto {
    group_by: Expression,
    buckets: usize,
    granularity: Option<Rounder>,
    fields: Vec<(String, Accumulator)>,
    collation: Option<Arc<Collation>>,
}

fn loc(code: i32, msg: impl Into<String>) -> CommandError {
    CommandError::new(ErrorCode::Location(code), msg)
}

impl BucketAuto {
    pub(super) fn parse(arg: RawBsonRef<'_>, vars: &Arc<Variables>) -> CommandResult<BucketAuto> {
        let RawBsonRef::Document(spec) = arg else {
            return Err(loc(
                40240,
                format!(
                    "The argument to $bucketAuto must be an object, but found type: {}",
                    type_name(arg.element_type())
                ),
            ));
        };
        let mut group_by = None;
        let mut buckets = None;
        let mut output = None;
        let mut granularity = None;
        for item in spec {
            let (k, v) =
                item.map_err(|e| CommandError::new(ErrorCode::InvalidBSON, e.to_string()))?;
            match k.as_str() {
                "groupBy" => {
                    if !is_group_by(v) {
                        return Err(loc(
                            40239,
                            format!(
                                "The $bucketAuto 'groupBy' field must be defined as a $-prefixed \
                                 path or an expression object, but found: {}",
                                display::value(v)
                            ),
                        ));
                    }
                    group_by = Some(Expression::parse_in(v, vars)?);
                }
                "buckets" => buckets = Some(parse_buckets(v)?),
                "output" => {
                    let RawBsonRef::Document(o) = v else {
                        return Err(loc(
                            40244,
                            format!(
                                "The $bucketAuto 'output' field must be an object, but found \
                                 type: {}",
                                type_name(v.element_type())
                            ),
                        ));
                    };
                    output = Some(o);
                }
                "granularity" => {
                    let RawBsonRef::String(g) = v else {
                        return Err(loc(
                            40261,
                            format!(
                                "The $bucketAuto 'granularity' field must be a string, but found \
                                 type: {}",
                                type_name(v.element_type())
                            ),
                        ));
                    };
                    granularity = Some(Rounder::parse(g)?);
                }
                other => {
                    return Err(loc(
                        40245,
                        format!("Unrecognized option to $bucketAuto: {other}"),
                    ));
                }
            }
        }
        let (Some(group_by), Some(buckets)) = (group_by, buckets) else {
            return Err(loc(
                40246,
                "$bucketAuto requires 'groupBy' and 'buckets' to be specified",
            ));
        };
        if buckets <= 0 {
            return Err(loc(
                40243,
                format!(
                    "The $bucketAuto 'buckets' field must be greater than 0, but found: {buckets}"
                ),
            ));
        }
        Ok(BucketAuto {
            group_by,
            buckets: usize::try_from(buckets).unwrap_or(1),
            granularity,
            fields: parse_output(output, vars)?,
            collation: None,
        })
    }
}

/// mongod's checks of a key that a granularity will round.
fn check_rounded(key: &RawBson) -> CommandResult<()> {
    let Some(x) = as_f64(key) else {
        return Err(loc(
            40258,
            format!(
                "$bucketAuto can specify a 'granularity' with numeric boundaries only, but found a \
                 value with type: {}",
                type_name(key.element_type())
            ),
        ));
    };
    if x.is_nan() {
        return Err(loc(
            40259,
            "$bucketAuto can specify a 'granularity' with numeric boundaries only, but found a NaN",
        ));
    }
    if x < 0.0 {
        return Err(loc(
            40260,
            "$bucketAuto can specify a 'granularity' with non-negative numbers only, but found a \
             negative number",
        ));
    }
    Ok(())
}

fn parse_buckets(v: RawBsonRef<'_>) -> CommandResult<i64> {
    let n = crate::query::compare::number_as_f64(v).ok_or_else(|| {
        loc(
            40241,
            format!(
                "The $bucketAuto 'buckets' field must be a numeric value, but found type: {}",
                type_name(v.element_type())
            ),
        )
    })?;
    let exact = match v {
        RawBsonRef::Int32(i) => Some(i64::from(i)),
        RawBsonRef::Int64(i) if i32::try_from(i).is_ok() => Some(i),
        #[expect(
            clippy::cast_possible_truncation,
            reason = "checked to be a 32-bit integer"
        )]
        _ if n.fract() == 0.0 && n >= f64::from(i32::MIN) && n <= f64::from(i32::MAX) => {
            Some(n as i64)
        }
        _ => None,
    };
    exact.ok_or_else(|| {
        loc(
            40242,
            format!(
                "The $bucketAuto 'buckets' field must be representable as a 32-bit integer, but \
                 found {}",
                crate::query::expr::format_g6(n)
            ),
        )
    })
}

impl BucketAuto {
    /// Sorts the input by `groupBy` through a [`Sorter`] (held to the blocking stages' limit:
    /// it spills under `allowDiskUse`, else fails with 292), as `{k: [<key>], d: <document>}`
    /// sorted by `k` (the one-element array makes the key compare whole, arrays included).
    fn sorted(&self, input: Stream<'_>, ctx: &Context) -> CommandResult<(Sorted, usize)> {
        let spec = SortSpec::compile(&rawdoc! {"k": 1})?.with_collation(self.collation.clone());
        let mut sorter = Sorter::new(spec, None, ctx.limits.clone());
        let mut n: usize = 0;
        for item in input {
            let (doc, _) = item?;
            let key = self
                .group_by
                .evaluate(&doc)
                .map_err(aggregation_error)?
                .unwrap_or(RawBson::Null);
            if self.granularity.is_some() {
                check_rounded(&key).map_err(aggregation_error)?;
            }
            let mut k = RawArrayBuf::new();
            k.push(key);
            let mut entry = RawDocumentBuf::new();
            entry.append(cstr!("k"), k);
            entry.append(cstr!("d"), doc);
            sorter
                .push(entry, crate::storage::record::NEVER)
                .map_err(aggregation_error)?;
            n += 1;
        }
        Ok((sorter.finish()?, n))
    }

    fn buckets(&self, input: Stream<'_>, ctx: &Context) -> CommandResult<Vec<Doc>> {
        let (mut sorted, n) = self.sorted(input, ctx)?;
        let mut next = || -> CommandResult<Option<(RawBson, RawDocumentBuf)>> {
            let Some((entry, _)) = sorted.next_entry()? else {
                return Ok(None);
            };
            let key = match entry.get("k") {
                Ok(Some(RawBsonRef::Array(k))) => k.get(0).ok().flatten().map(RawBson::from),
                _ => None,
            };
            let doc = match entry.get("d") {
                Ok(Some(RawBsonRef::Document(d))) => Some(d.to_owned()),
                _ => None,
            };
            match (key, doc) {
                (Some(k), Some(d)) => Ok(Some((k, d))),
                _ => Err(CommandError::internal(
                    "$bucketAuto: malformed sorted entry",
                )),
            }
        };
        let coll = self.collation.as_deref();
        #[expect(
            clippy::cast_precision_loss,
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss,
            reason = "mongod rounds the double quotient; counts are far below 2^52"
        )]
        let approx = ((n as f64 / self.buckets as f64).round() as usize).max(1);
        let mut out = Vec::new();
        let mut number = 0;
        let mut previous_max: Option<RawBson> = None;
        // The next entry in order, read ahead of the bucket being filled.
        let mut ahead = next()?;
        while let Some((first, doc)) = ahead.take() {
            number += 1;
            let mut bucket = Bucket::start(self)?;
            bucket.add(self, &doc)?;
            let mut count: usize = 1;
            let mut last = first.clone();
            ahead = next()?;
            // The last bucket takes everything left.
            while number == self.buckets || count < approx {
                let Some((key, doc)) = ahead.take() else {
                    break;
                };
                bucket.add(self, &doc)?;
                count += 1;
                last = key;
                ahead = next()?;
            }
            let (min, max) = if let Some(r) = self.granularity {
                let min = previous_max.take().unwrap_or_else(|| r.round_down(&first));
                // Values below the rounded-up boundary join this bucket.
                let boundary = r.round_up(&last);
                while let Some((key, _)) = &ahead
                    && compare_collated(boundary.as_raw_bson_ref(), key.as_raw_bson_ref(), coll)
                        .is_gt()
                {
                    if let Some((_, doc)) = ahead.take() {
                        bucket.add(self, &doc)?;
                    }
                    ahead = next()?;
                }
                let max = match &ahead {
                    Some((next, _)) if as_f64(&boundary) == Some(0.0) => r.round_down(next),
                    _ => boundary,
                };
                (min, max)
            } else {
                // Values equal to the bucket's last one stay in it; a bucket's max is the next
                // bucket's min (exclusive), except for the last.
                while let Some((key, _)) = &ahead
                    && compare_collated(key.as_raw_bson_ref(), last.as_raw_bson_ref(), coll).is_eq()
                {
                    if let Some((_, doc)) = ahead.take() {
                        bucket.add(self, &doc)?;
                    }
                    ahead = next()?;
                }
                let max = ahead.as_ref().map_or(last, |(k, _)| k.clone());
                (first, max)
            };
            previous_max = Some(max.clone());
            out.push(computed(bucket.finish(self, min, max)?));
        }
        Ok(out)
    }
}

/// The accumulators' states of the bucket being filled.
struct Bucket(Vec<State>);

impl Bucket {
    fn start(stage: &BucketAuto) -> CommandResult<Bucket> {
        let empty = RawBson::Null;
        Ok(Bucket(
            stage
                .fields
                .iter()
                .map(|(_, acc)| acc.start(&empty))
                .collect::<CommandResult<Vec<_>>>()
                .map_err(aggregation_error)?,
        ))
    }

    fn add(&mut self, stage: &BucketAuto, doc: &RawDocument) -> CommandResult<()> {
        for ((_, acc), state) in stage.fields.iter().zip(self.0.iter_mut()) {
            acc.process(state, doc).map_err(aggregation_error)?;
        }
        Ok(())
    }

    fn finish(
        self,
        stage: &BucketAuto,
        min: RawBson,
        max: RawBson,
    ) -> CommandResult<RawDocumentBuf> {
        let mut out = RawDocumentBuf::new();
        out.append(cstr!("_id"), rawdoc! {"min": min, "max": max});
        for ((name, acc), state) in stage.fields.iter().zip(self.0) {
            if let Ok(name) = <&bson::raw::CStr>::try_from(name.as_str()) {
                out.append(name, acc.finish(state).map_err(aggregation_error)?);
            }
        }
        Ok(out)
    }
}

impl Stage for BucketAuto {
    fn run<'a>(&'a self, input: Stream<'a>, ctx: &'a Context) -> Stream<'a> {
        blocking(move || self.buckets(input, ctx))
    }

    fn collate(&mut self, collation: &Arc<Collation>) {
        self.collation = Some(collation.clone());
        for (_, acc) in &mut self.fields {
            acc.set_collation(Some(collation.clone()));
        }
    }
}

#[cfg(test)]
mod tests {
    use bson::{Document, doc};

    use crate::pipeline::stages::tests::{aggregate_in, ctx};

    fn docs(seed: u64, n: i32) -> Vec<Document> {
        let mut x = seed;
        let mut next = move |m: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            i32::try_from(x % m).unwrap()
        };
        let words = ["a", "A", "b", "B", "c"];
        (0..n)
            .map(|i| {
                let v = next(50);
                let w = words[usize::try_from(next(5)).unwrap()];
                doc! {"_id": i, "v": v, "h": f64::from(next(40)) / 4.0, "w": w, "pad": "x".repeat(60)}
            })
            .collect()
    }

    /// Spilled or in memory, the same buckets (equal keys, ties included, with and without a
    /// granularity or a collation); and the spilling input is past the limit (292 without
    /// `allowDiskUse`).
    #[test]
    fn spilled_buckets_equal_in_memory_buckets() {
        let input = docs(3, 800);
        let output = doc! {"n": {"$sum": 1}, "ids": {"$push": "$_id"}, "f": {"$first": "$w"}};
        for (group_by, granularity) in [("$v", None), ("$h", Some("R5")), ("$w", None)] {
            for buckets in [1, 3, 7, 40] {
                let mut spec =
                    doc! {"groupBy": group_by, "buckets": buckets, "output": output.clone()};
                if let Some(g) = granularity {
                    spec.insert("granularity", g);
                }
                let pipeline = [doc! {"$bucketAuto": spec}];
                let memory = aggregate_in(&ctx(true, usize::MAX), &pipeline, &input).unwrap();
                let spilled = aggregate_in(&ctx(true, 4_000), &pipeline, &input).unwrap();
                assert_eq!(memory, spilled, "{group_by} {buckets}");
                let err = aggregate_in(&ctx(false, 4_000), &pipeline, &input).unwrap_err();
                assert_eq!(err.code.code(), 292);
            }
        }
    }
}
