//! `$setWindowFields: {partitionBy?, sortBy?, output: {<field>: {<function>: …, window?}}}`:
//! each document gains the output fields, computed over a window of the documents of its
//! partition (mongod's `DocumentSourceInternalSetWindowFields`, after the `$sort` by partition
//! key then `sortBy` that mongod puts before it).
//!
//! A blocking stage: it reads its whole input, held within the blocking stages' memory limit
//! without `allowDiskUse` (past it, 292 from the sort mongod puts first, or 5414201 from the
//! stage's own tracker when nothing is sorted); with `allowDiskUse` it holds its input in
//! memory all the same (mongod would spill). The functions' values always count against the
//! limit (5414201), so a `$push` over a large partition cannot grow without bound.

mod bounds;
mod functions;

use std::cmp::Ordering;
use std::sync::Arc;

use bson::{RawBson, RawBsonRef, RawDocument, RawDocumentBuf};

use self::functions::{SortInfo, WindowFn};
use crate::error::{CommandError, CommandResult, ErrorCode};
use crate::pipeline::{Context, Doc, Stage, Stream, aggregation_error, blocking};
use crate::query::compare::compare_collated;
use crate::query::display::type_name;
use crate::query::sort::SortSpec;
use crate::query::{Collation, Expression, Variables};

/// `FailedToParse` (9), mongod's window parse error.
fn failed(msg: impl Into<String>) -> CommandError {
    CommandError::new(ErrorCode::FailedToParse, msg)
}

/// A source-location assertion.
fn loc(code: i32, msg: impl Into<String>) -> CommandError {
    CommandError::new(ErrorCode::Location(code), msg)
}

/// The documents of one partition, in window order, with what the functions read of them.
pub struct Partition<'p> {
    docs: &'p [RawDocumentBuf],
    /// The `sortBy` key of each document.
    sort_keys: Vec<Vec<RawBson>>,
    /// The value of the first `sortBy` field of each document (range windows, `$derivative`,
    /// `$integral`, `$linearFill`); `Undefined` where missing.
    first_values: Vec<RawBson>,
}

impl Partition<'_> {
    fn range_keys(&self) -> &[RawBson] {
        &self.first_values
    }
}

/// `$setWindowFields`.
pub struct SetWindowFields {
    partition_by: Option<Expression>,
    sort: Option<SortSpec>,
    /// The first `sortBy` field's path.
    sort_path: Option<Vec<String>>,
    output: Vec<(Vec<String>, WindowFn)>,
    collation: Option<Arc<Collation>>,
}

impl SetWindowFields {
    /// Parses the stage's argument.
    pub fn parse(arg: RawBsonRef<'_>, vars: &Arc<Variables>) -> CommandResult<SetWindowFields> {
        let RawBsonRef::Document(spec) = arg else {
            return Err(failed(format!(
                "the $setWindowFields stage specification must be an object, found {}",
                type_name(arg.element_type())
            )));
        };
        let mut partition = None;
        let mut sort_by = None;
        let mut output = None;
        for item in spec {
            let (k, v) =
                item.map_err(|e| CommandError::new(ErrorCode::InvalidBSON, e.to_string()))?;
            match k.as_str() {
                "partitionBy" => partition = Some(v),
                "sortBy" => sort_by = Some(object(v, "sortBy")?),
                "output" => output = Some(object(v, "output")?),
                other => {
                    return Err(CommandError::unknown_field(&format!(
                        "$setWindowFields.{other}"
                    )));
                }
            }
        }
        let output =
            output.ok_or_else(|| CommandError::missing_field("$setWindowFields.output"))?;
        let partition_by = match partition {
            Some(p) => {
                let expr = Expression::parse_in(p, vars)?;
                if let Some(c) = bounds::constant(p, vars)? {
                    if matches!(c, RawBson::Array(_)) {
                        return Err(CommandError::type_mismatch(
                            "An expression used to partition cannot evaluate to value of type \
                             array",
                        ));
                    }
                    None
                } else {
                    Some(expr)
                }
            }
            None => None,
        };
        let sort = sort_by.map(SortSpec::compile_for_pipeline).transpose()?;
        let plan = sort.as_ref().map(SortSpec::plan_keys);
        let info = SortInfo {
            keys: plan.as_deref(),
        };
        let mut fields: Vec<(Vec<String>, WindowFn)> = Vec::new();
        for item in output {
            let (k, v) =
                item.map_err(|e| CommandError::new(ErrorCode::InvalidBSON, e.to_string()))?;
            let name = k.as_str();
            crate::query::check_field_path(name)?;
            let path: Vec<String> = name.split('.').map(str::to_owned).collect();
            let conflict = fields.iter().any(|(p, _)| {
                let n = p.len().min(path.len());
                p.get(..n) == path.get(..n)
            });
            if conflict {
                return Err(loc(
                    6_307_900,
                    "$setWindowFields 'output' specification contains two conflicting paths",
                ));
            }
            fields.push((path, WindowFn::parse(name, v, &info, vars)?));
        }
        let sort_path = plan
            .as_ref()
            .and_then(|p| p.first())
            .map(|(p, _)| p.split('.').map(str::to_owned).collect());
        Ok(SetWindowFields {
            partition_by,
            sort,
            sort_path,
            output: fields,
            collation: None,
        })
    }

    fn compute(&self, input: Stream<'_>, ctx: &Context) -> CommandResult<Vec<Doc>> {
        let max_bytes = (!ctx.limits.allow_disk_use).then_some(ctx.limits.max_bytes);
        let mut bytes = 0_usize;
        // (partition key, sort key, document, expiry)
        let mut rows: Vec<(RawBson, Vec<RawBson>, RawDocumentBuf, i64)> = Vec::new();
        for item in input {
            let (doc, expiry) = item?;
            let key = match &self.partition_by {
                Some(p) => match p.evaluate(&doc).map_err(aggregation_error)? {
                    Some(RawBson::Array(_)) => {
                        return Err(aggregation_error(CommandError::type_mismatch(
                            "An expression used to partition cannot evaluate to value of type \
                             array",
                        )));
                    }
                    Some(v) => v,
                    None => RawBson::Null,
                },
                None => RawBson::Null,
            };
            let sort_key: Vec<RawBson> = self.sort.as_ref().map_or_else(Vec::new, |s| {
                s.key(&doc).into_iter().map(RawBson::from).collect()
            });
            bytes = bytes
                .saturating_add(doc.as_bytes().len())
                .saturating_add(crate::pipeline::accumulators::value_bytes(Some(&key)))
                .saturating_add(64);
            if let Some(max) = max_bytes
                && bytes > max
            {
                // mongod's `$sort` before the stage fails first; without one, the stage's own
                // memory tracker does.
                let sorted = self.sort.is_some() || self.partition_by.is_some();
                return Err(aggregation_error(if sorted {
                    crate::sorter::exceeded(max)
                } else {
                    exceeded(bytes, max)
                }));
            }
            rows.push((key, sort_key, doc, expiry));
        }
        let coll = self.collation.as_deref();
        rows.sort_by(|a, b| {
            compare_collated(a.0.as_raw_bson_ref(), b.0.as_raw_bson_ref(), coll).then_with(|| {
                self.sort.as_ref().map_or(Ordering::Equal, |s| {
                    s.compare_keys(&refs(&a.1), &refs(&b.1))
                })
            })
        });
        let mut out = Vec::with_capacity(rows.len());
        let mut start = 0;
        while start < rows.len() {
            let mut end = start + 1;
            while let (Some(a), Some(b)) = (rows.get(start), rows.get(end))
                && compare_collated(a.0.as_raw_bson_ref(), b.0.as_raw_bson_ref(), coll).is_eq()
            {
                end += 1;
            }
            let slice = rows.get(start..end).unwrap_or_default();
            out.extend(self.partition(slice, ctx).map_err(aggregation_error)?);
            start = end;
        }
        Ok(out)
    }

    /// Computes the output fields of one partition.
    fn partition(
        &self,
        rows: &[(RawBson, Vec<RawBson>, RawDocumentBuf, i64)],
        ctx: &Context,
    ) -> CommandResult<Vec<Doc>> {
        let docs: Vec<RawDocumentBuf> = rows.iter().map(|r| r.2.clone()).collect();
        let first_values = docs
            .iter()
            .map(|d| {
                self.sort_path.as_ref().map_or(RawBson::Null, |p| {
                    crate::pipeline::doc::get(d, p).map_or(RawBson::Undefined, RawBson::from)
                })
            })
            .collect();
        let part = Partition {
            docs: &docs,
            sort_keys: rows.iter().map(|r| r.1.clone()).collect(),
            first_values,
        };
        // mongod's tracker counts the partition (unless it may spill) and the functions'
        // values; the values are held whatever `allowDiskUse` says.
        let max = ctx.limits.max_bytes;
        let mut bytes = if ctx.limits.allow_disk_use {
            0
        } else {
            docs.iter().map(|d| d.as_bytes().len()).sum()
        };
        let mut columns = Vec::with_capacity(self.output.len());
        for (_, f) in &self.output {
            let column = f.compute(&part)?;
            for v in &column {
                bytes = bytes.saturating_add(crate::pipeline::accumulators::value_bytes(Some(v)));
            }
            if bytes > max {
                return Err(exceeded(bytes, max));
            }
            columns.push(column);
        }
        let mut out = Vec::with_capacity(docs.len());
        for (i, (doc, row)) in docs.iter().zip(rows).enumerate() {
            let mut doc: RawDocumentBuf = doc.clone();
            for ((path, _), column) in self.output.iter().zip(&columns) {
                let value = column.get(i).cloned().unwrap_or(RawBson::Null);
                doc = crate::pipeline::doc::set(&doc, path, Some(value));
            }
            out.push((doc, row.3));
        }
        Ok(out)
    }
}

fn refs(key: &[RawBson]) -> Vec<RawBsonRef<'_>> {
    key.iter().map(RawBson::as_raw_bson_ref).collect()
}

/// An object argument of the stage, or the IDL's type error.
fn object<'a>(v: RawBsonRef<'a>, field: &str) -> CommandResult<&'a RawDocument> {
    match v {
        RawBsonRef::Document(d) => Ok(d),
        other => Err(CommandError::type_mismatch(format!(
            "BSON field '$setWindowFields.{field}' is the wrong type '{}', expected type 'object'",
            type_name(other.element_type())
        ))),
    }
}

/// mongod's 5414201: the stage's memory past its limit.
fn exceeded(used: usize, max: usize) -> CommandError {
    loc(
        5_414_201,
        format!(
            "Exceeded memory limit in DocumentSourceSetWindowFields, used {used} bytes but max \
             allowed is {max}"
        ),
    )
}

impl Stage for SetWindowFields {
    fn run<'a>(&'a self, input: Stream<'a>, ctx: &'a Context) -> Stream<'a> {
        blocking(move || self.compute(input, ctx))
    }

    fn collate(&mut self, collation: &Arc<Collation>) {
        self.collation = Some(collation.clone());
        if let Some(s) = self.sort.take() {
            self.sort = Some(s.with_collation(Some(collation.clone())));
        }
        for (_, f) in &mut self.output {
            f.set_collation(Some(collation.clone()));
        }
    }
}

#[cfg(test)]
mod tests;
