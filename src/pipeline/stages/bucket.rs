//! `$bucket`: groups documents into the ranges `boundaries` give (lower bound inclusive,
//! upper exclusive), others into `default`; sorted by bucket (mongod's `$group` with a
//! `$switch` `_id`, then `$sort: {_id: 1}`), comparing under the command's collation.

use std::sync::Arc;

use bson::{RawBson, RawBsonRef, RawDocument, rawdoc};

use crate::error::{CommandError, CommandResult, ErrorCode};
use crate::pipeline::accumulators::Accumulator;
use crate::pipeline::stages::group::Groups;
use crate::pipeline::{Context, Stage, Stream, aggregation_error, blocking, computed};
use crate::query::compare::{canonical_type, compare, compare_collated};
use crate::query::display::{self, type_name};
use crate::query::{Collation, Expression, Variables};

/// `$bucket: {groupBy, boundaries, default?, output?}`.
pub struct Bucket {
    group_by: Expression,
    boundaries: Vec<RawBson>,
    default: Option<RawBson>,
    fields: Vec<(String, Accumulator)>,
    collation: Option<Arc<Collation>>,
}

fn loc(code: i32, msg: impl Into<String>) -> CommandError {
    CommandError::new(ErrorCode::Location(code), msg)
}

fn invalid_bson(e: &bson::error::Error) -> CommandError {
    CommandError::new(ErrorCode::InvalidBSON, e.to_string())
}

/// Whether a `groupBy` is a `$`-prefixed path or an expression object.
pub(super) fn is_group_by(v: RawBsonRef<'_>) -> bool {
    match v {
        RawBsonRef::String(s) => s.starts_with('$'),
        RawBsonRef::Document(d) => d
            .iter()
            .next()
            .and_then(Result::ok)
            .is_some_and(|(k, _)| k.as_str().starts_with('$')),
        _ => false,
    }
}

/// A value that parses to a constant expression (mongod's `getExpressionConstant`): evaluated
/// with no document, or `None` when it reads one.
fn constant(v: RawBsonRef<'_>, vars: &Arc<Variables>) -> CommandResult<Option<RawBson>> {
    match v {
        RawBsonRef::String(s) if s.starts_with('$') => Ok(None),
        RawBsonRef::Document(_) | RawBsonRef::Array(_) => {
            let e = Expression::parse_in(v, vars)?;
            let empty = bson::RawDocumentBuf::new();
            Ok(e.evaluate(&empty)?)
        }
        other => Ok(Some(RawBson::from(other))),
    }
}

/// Parses the output fields of `$bucket`/`$bucketAuto` (`{count: {$sum: 1}}` when absent).
pub(super) fn parse_output(
    output: Option<&RawDocument>,
    vars: &Arc<Variables>,
) -> CommandResult<Vec<(String, Accumulator)>> {
    let mut fields = Vec::new();
    if let Some(spec) = output {
        for item in spec {
            let (k, v) = item.map_err(|e| invalid_bson(&e))?;
            fields.push((
                k.as_str().to_owned(),
                Accumulator::parse(k.as_str(), v, vars)?,
            ));
        }
    } else {
        let count = rawdoc! {"$sum": 1};
        fields.push((
            "count".to_owned(),
            Accumulator::parse("count", RawBsonRef::Document(&count), vars)?,
        ));
    }
    Ok(fields)
}

impl Bucket {
    pub(super) fn parse(arg: RawBsonRef<'_>, vars: &Arc<Variables>) -> CommandResult<Bucket> {
        let RawBsonRef::Document(spec) = arg else {
            return Err(loc(
                40201,
                format!(
                    "Argument to $bucket stage must be an object, but found type: {}.",
                    type_name(arg.element_type())
                ),
            ));
        };
        let mut group_by = None;
        let mut boundaries: Vec<RawBson> = Vec::new();
        let mut default = None;
        let mut output = None;
        for item in spec {
            let (k, v) = item.map_err(|e| invalid_bson(&e))?;
            match k.as_str() {
                "groupBy" => {
                    if !is_group_by(v) {
                        return Err(loc(
                            40202,
                            format!(
                                "The $bucket 'groupBy' field must be defined as a $-prefixed path \
                                 or an expression, but found: {}.",
                                display::value(v)
                            ),
                        ));
                    }
                    group_by = Some(Expression::parse_in(v, vars)?);
                }
                "boundaries" => {
                    let RawBsonRef::Array(items) = v else {
                        return Err(loc(
                            40200,
                            format!(
                                "The $bucket 'boundaries' field must be an array, but found \
                                 type: {}.",
                                type_name(v.element_type())
                            ),
                        ));
                    };
                    boundaries.clear();
                    for item in items {
                        let item = item.map_err(|e| invalid_bson(&e))?;
                        let Some(c) = constant(item, vars)? else {
                            return Err(loc(
                                40191,
                                format!(
                                    "The $bucket 'boundaries' field must be an array of constant \
                                     values, but found value: {}.",
                                    display::value(item)
                                ),
                            ));
                        };
                        boundaries.push(c);
                    }
                    if boundaries.len() < 2 {
                        return Err(loc(
                            40192,
                            format!(
                                "The $bucket 'boundaries' field must have at least 2 values, but \
                                 found {} value(s).",
                                boundaries.len()
                            ),
                        ));
                    }
                    for (i, pair) in boundaries.windows(2).enumerate() {
                        let (lower, upper) = (pair[0].as_raw_bson_ref(), pair[1].as_raw_bson_ref());
                        if canonical_type(lower) != canonical_type(upper) {
                            return Err(loc(
                                40193,
                                format!(
                                    "All values in the the 'boundaries' option to $bucket must \
                                     have the same type. Found conflicting types {} and {}.",
                                    type_name(lower.element_type()),
                                    type_name(upper.element_type())
                                ),
                            ));
                        }
                        if !compare(lower, upper).is_lt() {
                            return Err(loc(
                                40194,
                                format!(
                                    "The 'boundaries' option to $bucket must be sorted, but \
                                     elements {} and {} are not in ascending order ({} is not \
                                     less than {}).",
                                    i,
                                    i + 1,
                                    display::value(lower),
                                    display::value(upper)
                                ),
                            ));
                        }
                    }
                }
                "default" => {
                    let Some(c) = constant(v, vars)? else {
                        return Err(loc(
                            40195,
                            format!(
                                "The $bucket 'default' field must be a constant expression, but \
                                 found: {}.",
                                display::value(v)
                            ),
                        ));
                    };
                    default = Some(c);
                }
                "output" => {
                    let RawBsonRef::Document(o) = v else {
                        return Err(loc(
                            40196,
                            format!(
                                "The $bucket 'output' field must be an object, but found type: \
                                 {}.",
                                type_name(v.element_type())
                            ),
                        ));
                    };
                    output = Some(o);
                }
                other => {
                    return Err(loc(
                        40197,
                        format!("Unrecognized option to $bucket: {other}."),
                    ));
                }
            }
        }
        let (Some(group_by), false) = (group_by, boundaries.is_empty()) else {
            return Err(loc(
                40198,
                "$bucket requires 'groupBy' and 'boundaries' to be specified.",
            ));
        };
        if let (Some(d), Some(lo), Some(hi)) = (&default, boundaries.first(), boundaries.last()) {
            let d = d.as_raw_bson_ref();
            if canonical_type(d) == canonical_type(lo.as_raw_bson_ref())
                && !(compare(d, lo.as_raw_bson_ref()).is_lt()
                    || compare(d, hi.as_raw_bson_ref()).is_ge())
            {
                return Err(loc(
                    40199,
                    "The $bucket 'default' field must be less than the lowest boundary or greater \
                     than or equal to the highest boundary.",
                ));
            }
        }
        Ok(Bucket {
            group_by,
            boundaries,
            default,
            fields: parse_output(output, vars)?,
            collation: None,
        })
    }

    /// The bucket of a `groupBy` value: the lower boundary of its range, or the default.
    fn bucket_of(&self, v: Option<&RawBson>) -> CommandResult<RawBson> {
        let v = v.map_or(RawBsonRef::Null, RawBson::as_raw_bson_ref);
        let coll = self.collation.as_deref();
        for pair in self.boundaries.windows(2) {
            if compare_collated(v, pair[0].as_raw_bson_ref(), coll).is_ge()
                && compare_collated(v, pair[1].as_raw_bson_ref(), coll).is_lt()
            {
                return Ok(pair[0].clone());
            }
        }
        self.default.clone().ok_or_else(|| {
            loc(
                40066,
                "$switch could not find a matching branch for an input, and no default was \
                 specified.",
            )
        })
    }
}

impl Stage for Bucket {
    fn run<'a>(&'a self, input: Stream<'a>, ctx: &'a Context) -> Stream<'a> {
        blocking(move || {
            let mut groups = Groups::with_fields(&self.fields, self.collation.as_ref(), ctx);
            for item in input {
                let (doc, _) = item?;
                let v = self.group_by.evaluate(&doc).map_err(aggregation_error)?;
                let key = self.bucket_of(v.as_ref()).map_err(aggregation_error)?;
                groups.add(key, &doc).map_err(aggregation_error)?;
            }
            let mut out = groups.finish()?;
            let coll = self.collation.as_deref();
            out.sort_by(|a, b| compare_collated(id_of(a), id_of(b), coll));
            Ok(out.into_iter().map(computed).collect())
        })
    }

    fn collate(&mut self, collation: &Arc<Collation>) {
        self.collation = Some(collation.clone());
        for (_, acc) in &mut self.fields {
            acc.set_collation(Some(collation.clone()));
        }
    }
}

/// A group's `_id`.
fn id_of(d: &bson::RawDocumentBuf) -> RawBsonRef<'_> {
    d.get("_id").ok().flatten().unwrap_or(RawBsonRef::Null)
}
