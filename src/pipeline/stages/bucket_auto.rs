//! `$bucketAuto`: sorts documents by `groupBy` and cuts them into `buckets` ranges of about
//! equal counts (equal values never split), each `{_id: {min, max}, <output>…}`, with bounds
//! rounded to a `granularity` series when one is given.

use std::sync::Arc;

use bson::{RawBson, RawBsonRef, RawDocumentBuf, rawdoc};

use super::bucket::{is_group_by, parse_output};
use super::granularity::Rounder;
use crate::error::{CommandError, CommandResult, ErrorCode};
use crate::pipeline::accumulators::{Accumulator, as_f64, value_bytes};
use crate::pipeline::{Context, Stage, Stream, aggregation_error, blocking, computed};
use crate::query::compare::compare_collated;
use crate::query::display::{self, type_name};
use crate::query::{Collation, Expression, Variables};

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

    fn bucket(
        &self,
        entries: &[(RawBson, RawDocumentBuf)],
        min: RawBson,
        max: RawBson,
    ) -> CommandResult<RawDocumentBuf> {
        let empty = RawBson::Null;
        let mut states = self
            .fields
            .iter()
            .map(|(_, acc)| acc.start(&empty))
            .collect::<CommandResult<Vec<_>>>()?;
        for (_, doc) in entries {
            for ((_, acc), state) in self.fields.iter().zip(states.iter_mut()) {
                acc.process(state, doc)?;
            }
        }
        let mut out = RawDocumentBuf::new();
        out.append(bson::raw::cstr!("_id"), rawdoc! {"min": min, "max": max});
        for ((name, acc), state) in self.fields.iter().zip(states) {
            if let Ok(name) = <&bson::raw::CStr>::try_from(name.as_str()) {
                out.append(name, acc.finish(state)?);
            }
        }
        Ok(out)
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

impl Stage for BucketAuto {
    fn run<'a>(&'a self, input: Stream<'a>, ctx: &'a Context) -> Stream<'a> {
        blocking(move || {
            let max_bytes = (!ctx.limits.allow_disk_use).then_some(ctx.limits.max_bytes);
            let mut bytes: usize = 0;
            let mut entries = Vec::new();
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
                bytes = bytes.saturating_add(doc.as_bytes().len() + value_bytes(Some(&key)));
                if let Some(max) = max_bytes
                    && bytes > max
                {
                    return Err(aggregation_error(crate::sorter::exceeded(max)));
                }
                entries.push((key, doc));
            }
            let coll = self.collation.as_deref();
            entries.sort_by(|a, b| {
                compare_collated(a.0.as_raw_bson_ref(), b.0.as_raw_bson_ref(), coll)
            });
            let n = entries.len();
            #[expect(
                clippy::cast_precision_loss,
                clippy::cast_possible_truncation,
                clippy::cast_sign_loss,
                reason = "mongod rounds the double quotient; counts are far below 2^52"
            )]
            let approx = ((n as f64 / self.buckets as f64).round() as usize).max(1);
            let mut out = Vec::new();
            let mut start = 0;
            let mut number = 0;
            let mut previous_max: Option<RawBson> = None;
            let key = |i: usize| entries.get(i).map(|(k, _)| k);
            while start < n {
                number += 1;
                let mut end = if number == self.buckets {
                    n
                } else {
                    start.saturating_add(approx).min(n)
                };
                let (Some(first), Some(last)) = (key(start), key(end - 1)) else {
                    break;
                };
                let (min, max) = if let Some(r) = self.granularity {
                    let min = previous_max.take().unwrap_or_else(|| r.round_down(first));
                    // Values below the rounded-up boundary join this bucket.
                    let boundary = r.round_up(last);
                    while let Some(next) = key(end)
                        && compare_collated(
                            boundary.as_raw_bson_ref(),
                            next.as_raw_bson_ref(),
                            coll,
                        )
                        .is_gt()
                    {
                        end += 1;
                    }
                    let max = match key(end) {
                        Some(next) if as_f64(&boundary) == Some(0.0) => r.round_down(next),
                        _ => boundary,
                    };
                    (min, max)
                } else {
                    // Values equal to the bucket's last one stay in it; a bucket's max is the
                    // next bucket's min (exclusive), except for the last.
                    while let Some(next) = key(end)
                        && compare_collated(next.as_raw_bson_ref(), last.as_raw_bson_ref(), coll)
                            .is_eq()
                    {
                        end += 1;
                    }
                    (first.clone(), key(end).unwrap_or(last).clone())
                };
                previous_max = Some(max.clone());
                let doc = self
                    .bucket(&entries[start..end], min, max)
                    .map_err(aggregation_error)?;
                out.push(computed(doc));
                start = end;
            }
            Ok(out)
        })
    }

    fn collate(&mut self, collation: &Arc<Collation>) {
        self.collation = Some(collation.clone());
        for (_, acc) in &mut self.fields {
            acc.set_collation(Some(collation.clone()));
        }
    }
}
