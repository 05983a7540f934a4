//! `$setWindowFields: {partitionBy?, sortBy?, output: {<field>: {<function>: …, window?}}}`:
//! each document gains the output fields, computed over a window of the documents of its
//! partition (mongod's `DocumentSourceInternalSetWindowFields`, after the `$sort` by partition
//! key then `sortBy` that mongod puts before it).
//!
//! A blocking stage: it reads its whole input through a [`Sorter`] by partition key then
//! `sortBy` (the `$sort` mongod puts first), held to the blocking stages' memory limit: past
//! it, the sort spills under `allowDiskUse` and fails with 292 without it. The output is then
//! computed one partition at a time as the sorted input is read back, so only the partition
//! being computed is in memory (a single partition is held whole; mongod would spill its
//! window cache too). With neither `partitionBy` nor `sortBy` nothing is sorted and the input
//! is one partition, held to the stage's own tracker (5414201) without `allowDiskUse`. The
//! functions' values always count against the limit (5414201), so a `$push` over a large
//! partition cannot grow without bound.

mod bounds;
mod functions;

use std::sync::Arc;

use bson::raw::{CStr, cstr};
use bson::{RawArrayBuf, RawBson, RawBsonRef, RawDocument, RawDocumentBuf};

use self::functions::{SortInfo, WindowFn};
use crate::error::{CommandError, CommandResult, ErrorCode};
use crate::pipeline::{Context, Doc, Stage, Stream, aggregation_error};
use crate::query::compare::compare_collated;
use crate::query::display::type_name;
use crate::query::sort::SortSpec;
use crate::query::{Collation, Expression, Variables};
use crate::sorter::Sorter;

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

    /// The input as rows (partition key, document, expiry) in window order: through a
    /// [`Sorter`] by partition key then `sortBy` (mongod's `$sort` before the stage: it spills
    /// past the limit under `allowDiskUse`, else 292), or as they come when there is neither.
    fn rows<'a>(&'a self, input: Stream<'a>, ctx: &Context) -> CommandResult<Rows<'a>> {
        if self.partition_by.is_none() && self.sort.is_none() {
            // One partition, unsorted: the stage's own tracker (5414201) without `allowDiskUse`.
            let max_bytes = (!ctx.limits.allow_disk_use).then_some(ctx.limits.max_bytes);
            let mut bytes = 0_usize;
            let mut rows = Vec::new();
            for item in input {
                let (doc, expiry) = item?;
                bytes = bytes
                    .saturating_add(doc.as_bytes().len())
                    .saturating_add(80);
                if let Some(max) = max_bytes
                    && bytes > max
                {
                    return Err(aggregation_error(exceeded(bytes, max)));
                }
                rows.push((RawBson::Null, doc, expiry));
            }
            return Ok(Box::new(rows.into_iter().map(Ok)));
        }
        // `{p: [<partition key>], d: <document>}` by `{p: 1, d.<sortBy path>: ±1…}`: the
        // one-element array makes the key compare whole, and `d.` paths give `sortBy`'s keys.
        let mut spec = RawDocumentBuf::new();
        spec.append(cstr!("p"), 1);
        for (path, ascending) in self
            .sort
            .as_ref()
            .map(SortSpec::plan_keys)
            .unwrap_or_default()
        {
            let name = format!("d.{path}");
            if let Ok(name) = <&CStr>::try_from(name.as_str()) {
                spec.append(name, if ascending { 1 } else { -1 });
            }
        }
        let spec = SortSpec::compile(&spec)?.with_collation(self.collation.clone());
        let mut sorter = Sorter::new(spec, None, ctx.limits.clone());
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
            let mut p = RawArrayBuf::new();
            p.push(key);
            let mut entry = RawDocumentBuf::new();
            entry.append(cstr!("p"), p);
            entry.append(cstr!("d"), doc);
            sorter.push(entry, expiry).map_err(aggregation_error)?;
        }
        let mut results = sorter.finish()?;
        Ok(Box::new(std::iter::from_fn(move || {
            let entry = match results.next_entry() {
                Ok(Some((entry, expiry))) => (entry, expiry),
                Ok(None) => return None,
                Err(e) => return Some(Err(e)),
            };
            let (entry, expiry) = entry;
            let key = match entry.get("p") {
                Ok(Some(RawBsonRef::Array(p))) => p.get(0).ok().flatten().map(RawBson::from),
                _ => None,
            };
            let doc = match entry.get("d") {
                Ok(Some(RawBsonRef::Document(d))) => Some(d.to_owned()),
                _ => None,
            };
            Some(match (key, doc) {
                (Some(k), Some(d)) => Ok((k, d, expiry)),
                _ => Err(CommandError::internal(
                    "$setWindowFields: malformed sorted entry",
                )),
            })
        })))
    }

    /// The output, one partition at a time: only the partition being computed is held.
    fn compute<'a>(&'a self, input: Stream<'a>, ctx: &'a Context) -> Stream<'a> {
        let rows = match self.rows(input, ctx) {
            Ok(rows) => rows,
            Err(e) => return Box::new(std::iter::once(Err(e))),
        };
        let mut rows = rows.peekable();
        let mut pending = std::collections::VecDeque::new();
        let coll = self.collation.as_deref();
        Box::new(std::iter::from_fn(move || {
            loop {
                if let Some(doc) = pending.pop_front() {
                    return Some(Ok(doc));
                }
                let first = match rows.next()? {
                    Ok(row) => row,
                    Err(e) => return Some(Err(e)),
                };
                let mut part = vec![first];
                while let Some(Ok((key, _, _))) = rows.peek() {
                    let same = part.first().is_some_and(|f| {
                        compare_collated(f.0.as_raw_bson_ref(), key.as_raw_bson_ref(), coll).is_eq()
                    });
                    if !same {
                        break;
                    }
                    if let Some(Ok(row)) = rows.next() {
                        part.push(row);
                    }
                }
                match self.partition(part, ctx) {
                    Ok(docs) => pending.extend(docs),
                    Err(e) => return Some(Err(aggregation_error(e))),
                }
            }
        }))
    }

    /// Computes the output fields of one partition.
    fn partition(&self, rows: Vec<Row>, ctx: &Context) -> CommandResult<Vec<Doc>> {
        let (docs, expiries): (Vec<RawDocumentBuf>, Vec<i64>) =
            rows.into_iter().map(|(_, d, e)| (d, e)).unzip();
        let first_values = docs
            .iter()
            .map(|d| {
                self.sort_path.as_ref().map_or(RawBson::Null, |p| {
                    crate::pipeline::doc::get(d, p).map_or(RawBson::Undefined, RawBson::from)
                })
            })
            .collect();
        let sort_keys = docs
            .iter()
            .map(|d| {
                self.sort.as_ref().map_or_else(Vec::new, |s| {
                    s.key(d).into_iter().map(RawBson::from).collect()
                })
            })
            .collect();
        let part = Partition {
            docs: &docs,
            sort_keys,
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
        for (i, (doc, expiry)) in docs.iter().zip(expiries).enumerate() {
            let mut doc: RawDocumentBuf = doc.clone();
            for ((path, _), column) in self.output.iter().zip(&columns) {
                let value = column.get(i).cloned().unwrap_or(RawBson::Null);
                doc = crate::pipeline::doc::set(&doc, path, Some(value));
            }
            out.push((doc, expiry));
        }
        Ok(out)
    }
}

/// A document of the input with its partition key and expiry instant.
type Row = (RawBson, RawDocumentBuf, i64);

/// The input rows in window order.
type Rows<'a> = Box<dyn Iterator<Item = CommandResult<Row>> + 'a>;

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
        // Blocking: the first pull reads (and sorts) the whole input.
        Box::new(std::iter::once_with(move || self.compute(input, ctx)).flatten())
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
