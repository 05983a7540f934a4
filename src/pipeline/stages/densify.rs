//! `$densify`: adds documents where a numeric or date field skips steps of a range, as mongod
//! 7.0 does it: the input sorted by the partition fields (not for `bounds: "full"`) then the
//! field, generated documents placed before the document that follows them, and those after a
//! partition's last document (`full` and explicit bounds with partitions) at the end.

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::sync::Arc;

use bson::{RawBson, RawBsonRef, RawDocumentBuf, rawdoc};

use super::unwind::field_path;
use crate::error::{CommandError, CommandResult, ErrorCode};
use crate::pipeline::{Context, Doc, Stage, Stream, aggregation_error, blocking, computed, doc};
use crate::query::compare::compare;
use crate::query::display::type_name;
use crate::query::expr::Expression;
use crate::query::sort::SortSpec;
use crate::query::{Collation, Variables};

/// mongod's `internalQueryMaxAllowedDensifyDocs`.
const MAX_GENERATED: usize = 500_000;

/// mongod's `internalDocumentSourceDensifyMaxMemoryBytes` (100 MiB), for the partition table.
const MAX_MEMORY_BYTES: usize = 100 * 1024 * 1024;

const UNITS: [&str; 9] = [
    "millisecond",
    "second",
    "minute",
    "hour",
    "day",
    "week",
    "month",
    "quarter",
    "year",
];

fn loc(code: i32, msg: impl Into<String>) -> CommandError {
    CommandError::new(ErrorCode::Location(code), msg)
}

fn invalid_bson(e: &bson::error::Error) -> CommandError {
    CommandError::new(ErrorCode::InvalidBSON, e.to_string())
}

fn wrong_type(field: &str, found: RawBsonRef<'_>, expected: &str) -> CommandError {
    CommandError::new(
        ErrorCode::TypeMismatch,
        format!(
            "BSON field '$densify.{field}' is the wrong type '{}', expected type '{expected}'",
            type_name(found.element_type())
        ),
    )
}

fn missing(field: &str) -> CommandError {
    CommandError::new(
        ErrorCode::IDLFailedToParse,
        format!("BSON field '$densify.{field}' is missing but a required field"),
    )
}

fn unknown(field: &str) -> CommandError {
    CommandError::new(
        ErrorCode::IDLUnknownField,
        format!("BSON field '$densify.{field}' is an unknown field."),
    )
}

fn is_number(v: &RawBson) -> bool {
    matches!(
        v,
        RawBson::Int32(_) | RawBson::Int64(_) | RawBson::Double(_) | RawBson::Decimal128(_)
    )
}

#[derive(Clone)]
enum Bounds {
    Full,
    Partition,
    /// `[lower, upper)`.
    Explicit(RawBson, RawBson),
}

/// A BSON value ordered by the BSON comparison order (a partition's key).
struct Key(RawBson);

impl PartialEq for Key {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Key {}
impl PartialOrd for Key {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Key {
    fn cmp(&self, other: &Self) -> Ordering {
        compare(self.0.as_raw_bson_ref(), other.0.as_raw_bson_ref())
    }
}

/// One partition: the fields its generated documents carry, and the last value on the step
/// it holds (seen or generated).
struct Partition {
    include: RawDocumentBuf,
    current: Option<RawBson>,
}

/// `$densify: {field, partitionByFields?, range: {step, bounds, unit?}}`.
pub struct Densify {
    field: Vec<String>,
    partition: Option<Expression>,
    bounds: Bounds,
    unit: Option<String>,
    sort: SortSpec,
    /// `$$v + step` and `$$v - step` over `{v: value}`, with mongod's arithmetic (or
    /// `$dateAdd`/`$dateSubtract` in UTC for dates).
    add: Expression,
    sub: Expression,
    max_generated: usize,
    max_memory: usize,
}

fn lt(a: &RawBson, b: &RawBson) -> bool {
    compare(a.as_raw_bson_ref(), b.as_raw_bson_ref()) == Ordering::Less
}

fn eq(a: &RawBson, b: &RawBson) -> bool {
    compare(a.as_raw_bson_ref(), b.as_raw_bson_ref()) == Ordering::Equal
}

impl Densify {
    pub(super) fn parse(arg: RawBsonRef<'_>, vars: &Arc<Variables>) -> CommandResult<Densify> {
        let RawBsonRef::Document(spec) = arg else {
            return Err(CommandError::new(
                ErrorCode::FailedToParse,
                format!(
                    "The $densify stage specification must be an object, found {}",
                    type_name(arg.element_type())
                ),
            ));
        };
        let (mut field, mut partitions, mut range) = (None, Vec::new(), None);
        for item in spec {
            let (name, value) = item.map_err(|e| invalid_bson(&e))?;
            match (name.as_str(), value) {
                ("field", RawBsonRef::String(s)) => field = Some(s.to_owned()),
                ("field", other) => return Err(wrong_type("field", other, "string")),
                ("partitionByFields", RawBsonRef::Array(a)) => {
                    for (i, e) in a.into_iter().enumerate() {
                        match e.map_err(|e| invalid_bson(&e))? {
                            RawBsonRef::String(s) => partitions.push(s.to_owned()),
                            other => {
                                return Err(wrong_type(
                                    &format!("partitionByFields.{i}"),
                                    other,
                                    "string",
                                ));
                            }
                        }
                    }
                }
                ("partitionByFields", other) => {
                    return Err(wrong_type("partitionByFields", other, "array"));
                }
                ("range", RawBsonRef::Document(d)) => range = Some(d),
                ("range", other) => return Err(wrong_type("range", other, "object")),
                (other, _) => return Err(unknown(other)),
            }
        }
        let Some(field) = field else {
            return Err(missing("field"));
        };
        let Some(range) = range else {
            return Err(missing("range"));
        };
        let (mut step, mut bounds, mut unit) = (None, None, None);
        for item in range {
            let (name, value) = item.map_err(|e| invalid_bson(&e))?;
            match (name.as_str(), value) {
                ("step", v) => step = Some(RawBson::from(v)),
                ("bounds", v) => bounds = Some(RawBson::from(v)),
                ("unit", RawBsonRef::String(s)) => unit = Some(s.to_owned()),
                ("unit", other) => return Err(wrong_type("range.unit", other, "string")),
                (other, _) => return Err(unknown(&format!("range.{other}"))),
            }
        }
        let Some(step) = step else {
            return Err(missing("range.step"));
        };
        let Some(bounds) = bounds else {
            return Err(missing("range.bounds"));
        };
        if !is_number(&step) || !lt(&RawBson::Int32(0), &step) {
            return Err(loc(
                5_733_401,
                "The step parameter in a range statement must be a strictly positive numeric \
                 value",
            ));
        }
        if let Some(u) = &unit {
            if !whole(&step) {
                return Err(loc(
                    6_586_400,
                    "The step parameter in a range statement must be a whole number when \
                     densifying a date range",
                ));
            }
            if !UNITS.contains(&u.as_str()) {
                return Err(CommandError::new(
                    ErrorCode::FailedToParse,
                    format!("unknown time unit value: {u}"),
                ));
            }
        }
        let bounds = parse_bounds(&bounds, &step, unit.is_some())?;
        let path = field_path(&field)?;
        let mut partition_paths = Vec::new();
        for p in &partitions {
            partition_paths.push(field_path(p)?);
        }
        if matches!(bounds, Bounds::Partition) && partitions.is_empty() {
            return Err(loc(
                5_733_408,
                "One cannot specify the bounds as 'partition' without specifying a non-empty \
                 array of partitionByFields. You may have meant to specify 'full' bounds.",
            ));
        }
        // The partition expression {a: "$a", x: {y: "$x.y"}} and the sort mongod puts first.
        let mut sort_doc = RawDocumentBuf::new();
        let partition = if partitions.is_empty() {
            None
        } else {
            let mut obj = RawDocumentBuf::new();
            for (p, parts) in partitions.iter().zip(&partition_paths) {
                obj = doc::set(&obj, parts, Some(RawBson::String(format!("${p}"))));
                if !matches!(bounds, Bounds::Full) {
                    sort_doc.append(cstr(p)?, 1);
                }
            }
            Some(Expression::parse_in(RawBsonRef::Document(&obj), vars)?)
        };
        sort_doc.append(cstr(&field)?, 1);
        let sort = SortSpec::compile_for_pipeline(&sort_doc)?;
        let step_value = step.clone();
        let (add, sub) = match &unit {
            Some(u) => (
                rawdoc! {"$dateAdd": {"startDate": "$v", "unit": u.as_str(), "amount": step_value.clone()}},
                rawdoc! {"$dateSubtract": {"startDate": "$v", "unit": u.as_str(), "amount": step_value}},
            ),
            None => (
                rawdoc! {"$add": ["$v", step_value.clone()]},
                rawdoc! {"$subtract": ["$v", step_value]},
            ),
        };
        Ok(Densify {
            field: path,
            partition,
            bounds,
            unit,
            sort,
            add: Expression::parse_in(RawBsonRef::Document(&add), vars)?,
            sub: Expression::parse_in(RawBsonRef::Document(&sub), vars)?,
            max_generated: MAX_GENERATED,
            max_memory: MAX_MEMORY_BYTES,
        })
    }

    fn next(&self, v: &RawBson) -> CommandResult<RawBson> {
        step(&self.add, v)
    }

    fn prev(&self, v: &RawBson) -> CommandResult<RawBson> {
        step(&self.sub, v)
    }

    /// The document's densify value: `None` when nullish (it passes unchanged).
    fn value(&self, d: &RawBsonRef<'_>) -> CommandResult<Option<RawBson>> {
        let v = RawBson::from(*d);
        match &v {
            RawBson::Null | RawBson::Undefined => Ok(None),
            RawBson::DateTime(_) if self.unit.is_some() => Ok(Some(v)),
            v2 if is_number(v2) && self.unit.is_none() => Ok(Some(v)),
            RawBson::DateTime(_) => Err(loc(
                6_053_600,
                "Encountered date densify value in collection when step does not have a date \
                 unit.",
            )),
            v2 if is_number(v2) => Err(loc(
                6_053_600,
                "Encountered numeric densify value in collection when step has a date unit.",
            )),
            _ => Err(loc(
                5_733_201,
                "Densify field type must be numeric or a date",
            )),
        }
    }

    fn run_all(&self, mut docs: Vec<Doc>) -> CommandResult<Vec<Doc>> {
        docs.sort_by(|a, b| self.sort.compare(&a.0, &b.0));
        let mut run = Run {
            stage: self,
            out: Vec::with_capacity(docs.len()),
            generated: 0,
        };
        let mut table: BTreeMap<Key, usize> = BTreeMap::new();
        let mut parts: Vec<Partition> = Vec::new();
        let (mut global_min, mut global_max): (Option<RawBson>, Option<RawBson>) = (None, None);
        let mut done = false;
        let mut table_bytes = 0_usize;
        for d in docs {
            let val = match doc::get(&d.0, &self.field) {
                Some(v) => self.value(&v)?,
                None => None,
            };
            let Some(val) = val else {
                run.out.push(d);
                continue;
            };
            let (key, include) = match &self.partition {
                Some(p) => {
                    let k = p
                        .evaluate(&d.0)?
                        .unwrap_or(RawBson::Document(RawDocumentBuf::new()));
                    let inc = match &k {
                        RawBson::Document(doc) => doc.clone(),
                        _ => RawDocumentBuf::new(),
                    };
                    (k, inc)
                }
                None => (RawBson::Null, RawDocumentBuf::new()),
            };
            let idx = if let Some(i) = table.get(&Key(key.clone())) {
                *i
            } else {
                let current = match &self.bounds {
                    Bounds::Full => {
                        let min = global_min.get_or_insert_with(|| val.clone()).clone();
                        Some(self.prev(&min)?)
                    }
                    Bounds::Partition => None,
                    Bounds::Explicit(lo, _) => Some(self.prev(lo)?),
                };
                table_bytes = table_bytes
                    .saturating_add(include.as_bytes().len())
                    .saturating_add(32);
                if table_bytes > self.max_memory {
                    return Err(loc(
                        6_007_200,
                        format!("$densify exceeded memory limit of {}", self.max_memory),
                    ));
                }
                parts.push(Partition { include, current });
                table.insert(Key(key), parts.len() - 1);
                parts.len() - 1
            };
            let Some(part) = parts.get_mut(idx) else {
                return Err(CommandError::internal("$densify partition table"));
            };
            match &self.bounds {
                Bounds::Full => {
                    global_max = Some(val.clone());
                    run.need_gen(part, d, &val)?;
                }
                Bounds::Partition => {
                    if part.current.is_none() {
                        part.current = Some(val);
                        run.out.push(d);
                    } else {
                        run.need_gen(part, d, &val)?;
                    }
                }
                Bounds::Explicit(lo, hi) => {
                    if done || lt(&val, lo) {
                        run.out.push(d);
                        continue;
                    }
                    let current = part.current.clone().unwrap_or_else(|| lo.clone());
                    if eq(&val, lo) {
                        part.current = Some(val);
                        run.out.push(d);
                        continue;
                    }
                    let next = self.next(&current)?;
                    if lt(&val, hi) && eq(&val, &next) {
                        part.current = Some(val);
                        run.out.push(d);
                    } else if lt(&val, &next) {
                        run.out.push(d);
                    } else if !lt(&val, hi) && !lt(&next, hi) {
                        part.current = Some(next);
                        run.out.push(d);
                        if self.partition.is_none() {
                            done = true;
                        }
                    } else {
                        let upper = if lt(&val, hi) { &val } else { hi };
                        let last = run.generate(&part.include, next, upper, false)?;
                        if let Some(g) = last {
                            let after = self.next(&g)?;
                            part.current = Some(if eq(&after, &val) { val } else { g });
                        }
                        run.out.push(d);
                    }
                }
            }
        }
        // After the last document.
        match &self.bounds {
            Bounds::Partition => {}
            Bounds::Full => {
                if self.partition.is_some()
                    && let Some(max) = &global_max
                {
                    for part in &parts {
                        if let Some(c) = &part.current {
                            let start = self.next(c)?;
                            run.generate(&part.include, start, max, true)?;
                        }
                    }
                }
            }
            Bounds::Explicit(lo, hi) => {
                if parts.is_empty() {
                    run.generate(&RawDocumentBuf::new(), lo.clone(), hi, false)?;
                } else if !done {
                    for part in &parts {
                        let c = part.current.clone().unwrap_or_else(|| lo.clone());
                        let mut start = self.next(&c)?;
                        if lt(&start, lo) {
                            start = lo.clone();
                        }
                        run.generate(&part.include, start, hi, false)?;
                    }
                }
            }
        }
        Ok(run.out)
    }
}

/// The output being built, and the count of generated documents.
struct Run<'s> {
    stage: &'s Densify,
    out: Vec<Doc>,
    generated: usize,
}

impl Run<'_> {
    /// Generates documents from `from` on the step while below `until` (or equal, when
    /// `inclusive`); the last value generated.
    fn generate(
        &mut self,
        include: &RawDocumentBuf,
        from: RawBson,
        until: &RawBson,
        inclusive: bool,
    ) -> CommandResult<Option<RawBson>> {
        let mut v = from;
        let mut last = None;
        while lt(&v, until) || (inclusive && eq(&v, until)) {
            self.generated = self.generated.saturating_add(1);
            if self.generated > self.stage.max_generated {
                return Err(loc(
                    5_897_900,
                    format!(
                        "Generated {} documents in $densify, which is over the limit of {}. \
                         Increase the 'internalQueryMaxAllowedDensifyDocs' parameter to allow \
                         more generated documents",
                        self.generated, self.stage.max_generated
                    ),
                ));
            }
            self.out.push(computed(doc::set(
                include,
                &self.stage.field,
                Some(v.clone()),
            )));
            let next = self.stage.next(&v)?;
            last = Some(std::mem::replace(&mut v, next));
        }
        Ok(last)
    }

    /// mongod's `handleNeedGen`: fills from the partition's last value on the step up to `val`,
    /// then emits the document.
    fn need_gen(&mut self, part: &mut Partition, d: Doc, val: &RawBson) -> CommandResult<()> {
        let Some(current) = part.current.clone() else {
            part.current = Some(val.clone());
            self.out.push(d);
            return Ok(());
        };
        let next = self.stage.next(&current)?;
        if eq(val, &next) {
            part.current = Some(val.clone());
        }
        if !lt(&next, val) {
            self.out.push(d);
            return Ok(());
        }
        if let Some(g) = self.generate(&part.include, next, val, false)? {
            let after = self.stage.next(&g)?;
            part.current = Some(if eq(&after, val) { val.clone() } else { g });
        }
        self.out.push(d);
        Ok(())
    }
}

/// `op` (one step up or down) applied to `v`.
fn step(op: &Expression, v: &RawBson) -> CommandResult<RawBson> {
    op.evaluate(&rawdoc! {"v": v.clone()})?
        .ok_or_else(|| CommandError::internal("$densify step gave no value"))
}

fn cstr(s: &str) -> CommandResult<&bson::raw::CStr> {
    <&bson::raw::CStr>::try_from(s).map_err(|e| CommandError::bad_value(e.to_string()))
}

/// Whether a numeric step is a whole number that fits 64 bits.
fn whole(v: &RawBson) -> bool {
    match v {
        RawBson::Int32(_) | RawBson::Int64(_) => true,
        RawBson::Double(f) => f.fract() == 0.0 && f.abs() < 9.2e18,
        RawBson::Decimal128(d) => d
            .to_string()
            .parse::<f64>()
            .is_ok_and(|f| f.fract() == 0.0 && f.abs() < 9.2e18),
        _ => false,
    }
}

fn parse_bounds(bounds: &RawBson, step: &RawBson, has_unit: bool) -> CommandResult<Bounds> {
    match bounds {
        RawBson::Array(a) => {
            let items: Vec<RawBson> = a
                .into_iter()
                .map(|e| e.map(RawBson::from).map_err(|e| invalid_bson(&e)))
                .collect::<CommandResult<_>>()?;
            let [lo, hi] = items.as_slice() else {
                return Err(loc(
                    5_733_403,
                    "A bounding array in a range statement must have exactly two elements",
                ));
            };
            if lt(hi, lo) {
                return Err(loc(
                    5_733_402,
                    "A bounding array must be an ascending array of either two dates or two \
                     numbers",
                ));
            }
            if is_number(lo) {
                if has_unit {
                    return Err(loc(5_733_409, "Numeric bounds may not have unit parameter"));
                }
                if !is_number(hi) {
                    return Err(loc(
                        5_733_406,
                        "A bounding array must contain either both dates or both numeric types",
                    ));
                }
                if lo.element_type() != hi.element_type()
                    || lo.element_type() != step.element_type()
                {
                    return Err(loc(
                        5_876_900,
                        "Upper bound, lower bound, and step must all have the same type",
                    ));
                }
                Ok(Bounds::Explicit(lo.clone(), hi.clone()))
            } else if matches!(lo, RawBson::DateTime(_)) {
                if !matches!(hi, RawBson::DateTime(_)) {
                    return Err(loc(
                        5_733_405,
                        "A bounding array must contain either both dates or both numeric types",
                    ));
                }
                if !has_unit {
                    return Err(loc(
                        5_733_410,
                        "A bounding array of dates must specify a unit",
                    ));
                }
                Ok(Bounds::Explicit(lo.clone(), hi.clone()))
            } else {
                Err(loc(5_946_800, "Explicit bounds must be numeric or dates"))
            }
        }
        RawBson::String(s) if s == "full" => Ok(Bounds::Full),
        RawBson::String(s) if s == "partition" => Ok(Bounds::Partition),
        RawBson::String(_) => Err(loc(
            5_946_802,
            "Bounds string must either be 'full' or 'partition'",
        )),
        _ => Err(loc(
            5_733_404,
            "The bounds in a range statement must be the string 'full', 'partition', or an \
             ascending array of two numbers or two dates",
        )),
    }
}

impl Stage for Densify {
    fn run<'a>(&'a self, input: Stream<'a>, _ctx: &'a Context) -> Stream<'a> {
        blocking(move || {
            let docs = input.collect::<CommandResult<Vec<Doc>>>()?;
            self.run_all(docs).map_err(aggregation_error)
        })
    }

    fn collate(&mut self, collation: &Arc<Collation>) {
        self.sort = std::mem::take(&mut self.sort).with_collation(Some(Arc::clone(collation)));
    }
}

#[cfg(test)]
mod tests {
    use bson::{DateTime, Document, doc};

    use crate::pipeline::stages::tests::{aggregate, code};

    fn coffee() -> Vec<Document> {
        vec![
            doc! {"_id": 1, "altitude": 600, "variety": "Arabica Typica", "score": 68.3},
            doc! {"_id": 2, "altitude": 750, "variety": "Arabica Typica", "score": 69.5},
            doc! {"_id": 3, "altitude": 950, "variety": "Arabica Typica", "score": 70.5},
            doc! {"_id": 4, "altitude": 1250, "variety": "Gesha", "score": 88.15},
            doc! {"_id": 5, "altitude": 1700, "variety": "Gesha", "score": 95.5, "price": 1029},
        ]
    }

    fn shape(out: &[Document]) -> Vec<(String, i32)> {
        out.iter()
            .map(|d| {
                (
                    d.get_str("variety").unwrap_or("").to_owned(),
                    d.get_i32("altitude").unwrap(),
                )
            })
            .collect()
    }

    fn pairs(v: &[(&str, i32)]) -> Vec<(String, i32)> {
        v.iter().map(|(s, n)| ((*s).to_owned(), *n)).collect()
    }

    #[test]
    fn full_range_with_partitions() {
        let out = aggregate(
            &[
                doc! {"$densify": {"field": "altitude", "partitionByFields": ["variety"],
                "range": {"bounds": "full", "step": 200}}},
            ],
            &coffee(),
        )
        .unwrap();
        let a = "Arabica Typica";
        assert_eq!(
            shape(&out),
            pairs(&[
                (a, 600),
                (a, 750),
                (a, 800),
                (a, 950),
                ("Gesha", 600),
                ("Gesha", 800),
                ("Gesha", 1000),
                ("Gesha", 1200),
                ("Gesha", 1250),
                ("Gesha", 1400),
                ("Gesha", 1600),
                ("Gesha", 1700),
                (a, 1000),
                (a, 1200),
                (a, 1400),
                (a, 1600),
            ])
        );
        assert_eq!(out[2], doc! {"variety": a, "altitude": 800});
    }

    #[test]
    fn partition_range() {
        let out = aggregate(
            &[
                doc! {"$densify": {"field": "altitude", "partitionByFields": ["variety"],
                "range": {"bounds": "partition", "step": 200}}},
            ],
            &coffee(),
        )
        .unwrap();
        let a = "Arabica Typica";
        assert_eq!(
            shape(&out),
            pairs(&[
                (a, 600),
                (a, 750),
                (a, 800),
                (a, 950),
                ("Gesha", 1250),
                ("Gesha", 1450),
                ("Gesha", 1650),
                ("Gesha", 1700),
            ])
        );
    }

    #[test]
    fn explicit_numeric_and_date_bounds() {
        let docs = vec![
            doc! {"_id": 1, "x": -5},
            doc! {"_id": 2, "x": 3},
            doc! {"_id": 3, "x": null},
            doc! {"_id": 4, "x": 12},
        ];
        let out = aggregate(
            &[doc! {"$densify": {"field": "x", "range": {"bounds": [0, 10], "step": 4}}}],
            &docs,
        )
        .unwrap();
        let xs: Vec<String> = out
            .iter()
            .map(|d| d.get("x").map_or("-".into(), ToString::to_string))
            .collect();
        assert_eq!(xs, ["null", "-5", "0", "3", "4", "8", "12"]);
        let h = |n: i64| DateTime::from_millis(1_621_296_000_000 + n * 3_600_000);
        let docs = vec![doc! {"t": h(0)}, doc! {"t": h(4)}, doc! {"t": h(9)}];
        let out = aggregate(
            &[doc! {"$densify": {"field": "t",
            "range": {"step": 1, "unit": "hour", "bounds": [h(0), h(8)]}}}],
            &docs,
        )
        .unwrap();
        let ts: Vec<i64> = out
            .iter()
            .map(|d| {
                (d.get_datetime("t").unwrap().timestamp_millis() - h(0).timestamp_millis())
                    / 3_600_000
            })
            .collect();
        assert_eq!(ts, [0, 1, 2, 3, 4, 5, 6, 7, 9]);
        // No input: the whole explicit range.
        let out = aggregate(
            &[doc! {"$densify": {"field": "x", "range": {"bounds": [0, 3], "step": 1}}}],
            &[],
        )
        .unwrap();
        assert_eq!(out, vec![doc! {"x": 0}, doc! {"x": 1}, doc! {"x": 2}]);
    }

    #[test]
    fn generated_limit() {
        let out = aggregate(
            &[doc! {"$densify": {"field": "x", "range": {"bounds": [0, 500_000], "step": 1}}}],
            &[],
        );
        assert_eq!(out.unwrap().len(), 500_000);
        assert_eq!(
            code(
                doc! {"$densify": {"field": "x", "range": {"bounds": [0, 500_001], "step": 1}}},
                &[]
            ),
            5_897_900
        );
    }

    #[test]
    fn partition_table_memory_limit() {
        let spec = bson::rawdoc! {"field": "x", "partitionByFields": ["p"],
        "range": {"bounds": "partition", "step": 1}};
        let mut stage = super::Densify::parse(
            bson::RawBsonRef::Document(&spec),
            &std::sync::Arc::new(crate::query::Variables::system_clock()),
        )
        .unwrap();
        stage.max_memory = 200;
        let docs: Vec<crate::pipeline::Doc> = (0..20)
            .map(|i| crate::pipeline::computed(bson::rawdoc! {"p": i, "x": 1}))
            .collect();
        assert_eq!(
            stage.run_all(docs.clone()).unwrap_err().code.code(),
            6_007_200
        );
        stage.max_memory = super::MAX_MEMORY_BYTES;
        assert_eq!(stage.run_all(docs).unwrap().len(), 20);
    }

    #[test]
    fn errors() {
        let d = |range: Document| doc! {"$densify": {"field": "x", "range": range}};
        assert_eq!(code(doc! {"$densify": 1}, &[]), 9);
        assert_eq!(
            code(
                doc! {"$densify": {"range": {"step": 1, "bounds": "full"}}},
                &[]
            ),
            40414
        );
        assert_eq!(code(doc! {"$densify": {"field": "x"}}, &[]), 40414);
        assert_eq!(
            code(
                doc! {"$densify": {"field": "x", "y": 1, "range": {"step": 1, "bounds": "full"}}},
                &[]
            ),
            40415
        );
        assert_eq!(code(d(doc! {"step": 0, "bounds": "full"}), &[]), 5_733_401);
        assert_eq!(
            code(d(doc! {"step": "1", "bounds": "full"}), &[]),
            5_733_401
        );
        assert_eq!(
            code(d(doc! {"step": 1.5, "unit": "hour", "bounds": "full"}), &[]),
            6_586_400
        );
        assert_eq!(
            code(d(doc! {"step": 1, "unit": "eon", "bounds": "full"}), &[]),
            9
        );
        assert_eq!(code(d(doc! {"step": 1, "bounds": [1]}), &[]), 5_733_403);
        assert_eq!(code(d(doc! {"step": 1, "bounds": [2, 1]}), &[]), 5_733_402);
        assert_eq!(
            code(d(doc! {"step": 1, "unit": "day", "bounds": [1, 2]}), &[]),
            5_733_409
        );
        assert_eq!(
            code(d(doc! {"step": 1, "bounds": [1, 2.5]}), &[]),
            5_876_900
        );
        assert_eq!(
            code(d(doc! {"step": 1, "bounds": ["a", "b"]}), &[]),
            5_946_800
        );
        assert_eq!(code(d(doc! {"step": 1, "bounds": "all"}), &[]), 5_946_802);
        assert_eq!(code(d(doc! {"step": 1, "bounds": 1}), &[]), 5_733_404);
        assert_eq!(
            code(d(doc! {"step": 1, "bounds": "partition"}), &[]),
            5_733_408
        );
        let now = DateTime::now();
        assert_eq!(
            code(d(doc! {"step": 1, "bounds": [now, now]}), &[]),
            5_733_410
        );
        let full = d(doc! {"step": 1, "bounds": "full"});
        assert_eq!(code(full.clone(), &[doc! {"x": "a"}]), 5_733_201);
        assert_eq!(code(full, &[doc! {"x": now}]), 6_053_600);
    }
}
