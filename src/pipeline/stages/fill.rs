//! `$fill`: fills null and missing fields, as mongod desugars it. Fields with a `method`
//! (`locf`, `linear`) are computed as `$setWindowFields` would compute `$locf`/`$linearFill`:
//! the documents sorted by partition, then `sortBy`, each partition on its own. Fields with a
//! `value` are then set as `$addFields: {f: {$ifNull: ["$f", value]}}` sets them.

use std::cmp::Ordering;
use std::sync::{Arc, OnceLock};

use bson::{RawBson, RawBsonRef, RawDocument, RawDocumentBuf, rawbson, rawdoc};

use super::reshape::Reshape;
use crate::error::{CommandError, CommandResult, ErrorCode};
use crate::pipeline::{Context, Doc, Stage, Stream, aggregation_error, blocking, doc};
use crate::query::compare::compare;
use crate::query::display::type_name;
use crate::query::expr::Expression;
use crate::query::sort::SortSpec;
use crate::query::{Collation, Variables};

fn loc(code: i32, msg: impl Into<String>) -> CommandError {
    CommandError::new(ErrorCode::Location(code), msg)
}

fn type_mismatch(msg: impl Into<String>) -> CommandError {
    CommandError::new(ErrorCode::TypeMismatch, msg)
}

fn wrong_type(field: &str, found: RawBsonRef<'_>, expected: &str) -> CommandError {
    type_mismatch(format!(
        "BSON field '$fill.{field}' is the wrong type '{}', expected {expected}",
        type_name(found.element_type())
    ))
}

fn unknown(field: &str) -> CommandError {
    CommandError::new(
        ErrorCode::IDLUnknownField,
        format!("BSON field '$fill.{field}' is an unknown field."),
    )
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Method {
    Locf,
    Linear,
}

/// One field filled by a method: its path and the expression reading it (`"$<field>"`).
struct Filled {
    path: Vec<String>,
    input: Expression,
    method: Method,
}

/// `$fill: {sortBy?, partitionBy? | partitionByFields?, output}`.
pub struct Fill {
    partition: Option<Expression>,
    sort: Option<SortSpec>,
    /// The single `sortBy` field, for `linear`.
    sort_path: Option<Vec<String>>,
    methods: Vec<Filled>,
    values: Option<Reshape>,
}

impl Fill {
    pub(super) fn parse(arg: RawBsonRef<'_>, vars: &Arc<Variables>) -> CommandResult<Fill> {
        let RawBsonRef::Document(spec) = arg else {
            return Err(CommandError::new(
                ErrorCode::FailedToParse,
                format!(
                    "The $fill stage specification must be an object, found {}",
                    type_name(arg.element_type())
                ),
            ));
        };
        let (mut sort_by, mut partition_by, mut partition_fields, mut output) =
            (None, None, None, None);
        for item in spec {
            let (name, value) =
                item.map_err(|e| CommandError::new(ErrorCode::InvalidBSON, e.to_string()))?;
            match (name.as_str(), value) {
                ("sortBy", RawBsonRef::Document(d)) => sort_by = Some(d),
                ("sortBy", other) => return Err(wrong_type("sortBy", other, "type 'object'")),
                ("partitionBy", v @ (RawBsonRef::String(_) | RawBsonRef::Document(_))) => {
                    partition_by = Some(v);
                }
                ("partitionBy", other) => {
                    return Err(wrong_type("partitionBy", other, "types '[string, object]'"));
                }
                ("partitionByFields", RawBsonRef::Array(a)) => {
                    let mut fields = Vec::new();
                    for (i, e) in a.into_iter().enumerate() {
                        match e
                            .map_err(|e| CommandError::new(ErrorCode::InvalidBSON, e.to_string()))?
                        {
                            RawBsonRef::String(s) => fields.push(s.to_owned()),
                            other => {
                                return Err(wrong_type(
                                    &format!("partitionByFields.{i}"),
                                    other,
                                    "type 'string'",
                                ));
                            }
                        }
                    }
                    partition_fields = Some(fields);
                }
                ("partitionByFields", other) => {
                    return Err(wrong_type("partitionByFields", other, "type 'array'"));
                }
                ("output", RawBsonRef::Document(d)) => output = Some(d),
                ("output", other) => return Err(wrong_type("output", other, "type 'object'")),
                (other, _) => return Err(unknown(other)),
            }
        }
        let Some(output) = output else {
            return Err(CommandError::new(
                ErrorCode::IDLFailedToParse,
                "BSON field '$fill.output' is missing but a required field",
            ));
        };
        if output.is_empty() {
            return Err(loc(
                6_050_203,
                "The output field in '$fill' must contain an object with at least one element",
            ));
        }
        let mut methods = Vec::new();
        let mut values = RawDocumentBuf::new();
        for item in output {
            let (field, spec) =
                item.map_err(|e| CommandError::new(ErrorCode::InvalidBSON, e.to_string()))?;
            let RawBsonRef::Document(spec) = spec else {
                return Err(loc(
                    6_050_200,
                    "Each fill output specification must be an object with exactly one field",
                ));
            };
            let (mut method, mut value) = (None, None);
            for item in spec {
                let (name, v) =
                    item.map_err(|e| CommandError::new(ErrorCode::InvalidBSON, e.to_string()))?;
                match (name.as_str(), v) {
                    ("method", RawBsonRef::String(s)) => method = Some(s),
                    ("method", other) => return Err(wrong_type("method", other, "type 'string'")),
                    ("value", v) => value = Some(v),
                    (other, _) => return Err(unknown(other)),
                }
            }
            let input_path = format!("${}", field.as_str());
            if let Some(m) = method {
                if value.is_some() {
                    return Err(loc(
                        6_050_201,
                        "Each fill output specification must have exactly one of 'method' or \
                         'value' fields, not both",
                    ));
                }
                let method = match m {
                    "locf" => Method::Locf,
                    "linear" => Method::Linear,
                    _ => return Err(loc(6_050_202, "Method must be either locf or linear")),
                };
                methods.push(Filled {
                    path: super::unwind::field_path(field.as_str())?,
                    input: Expression::parse_in(RawBsonRef::String(&input_path), vars)?,
                    method,
                });
            }
            if let Some(v) = value {
                let mut args = bson::RawArrayBuf::new();
                args.push(RawBson::String(input_path));
                args.push(RawBson::from(v));
                values.append(field, bson::rawdoc! {"$ifNull": args});
            }
        }
        let mut partition = None;
        if let Some(p) = partition_by {
            if partition_fields.is_some() {
                return Err(loc(
                    6_050_204,
                    "Maximum one of 'partitionBy' and 'partitionByFields can be specified in \
                     '$fill'",
                ));
            }
            if !methods.is_empty() {
                partition = Some(Expression::parse_in(p, vars)?);
            }
        }
        if let Some(fields) = partition_fields {
            let mut obj = RawDocumentBuf::new();
            for f in fields {
                let key = bson::raw::CString::try_from(f.as_str())
                    .map_err(|e| CommandError::bad_value(e.to_string()))?;
                obj.append(key, RawBson::String(format!("${f}")));
            }
            if !methods.is_empty() {
                partition = Some(Expression::parse_in(RawBsonRef::Document(&obj), vars)?);
            }
        }
        // Without a method mongod builds no $setWindowFields: sortBy and partitionBy go unread.
        if methods.is_empty() {
            partition = None;
        }
        let sort = sort_by
            .filter(|_| !methods.is_empty())
            .map(SortSpec::compile_for_pipeline)
            .transpose()?;
        let sort_path = sort.as_ref().and_then(|s| {
            let keys = s.plan_keys();
            match keys.as_slice() {
                [(path, _)] => Some(path.split('.').map(str::to_owned).collect()),
                _ => None,
            }
        });
        if sort_path.is_none() && methods.iter().any(|m| m.method == Method::Linear) {
            return Err(loc(
                605_001,
                "$linearFill must be specified with a top level sortBy expression with exactly \
                 one element",
            ));
        }
        let values = if values.is_empty() {
            None
        } else {
            Some(Reshape::parse(&bson::rawdoc! {"$addFields": values}, vars)?)
        };
        Ok(Fill {
            partition,
            sort,
            sort_path,
            methods,
            values,
        })
    }

    /// The documents sorted by partition then `sortBy`, each method field filled.
    fn fill_methods(&self, docs: Vec<Doc>) -> CommandResult<Vec<Doc>> {
        let mut keyed = Vec::with_capacity(docs.len());
        for d in docs {
            let key = match &self.partition {
                Some(p) => p.evaluate(&d.0)?.unwrap_or(RawBson::Null),
                None => RawBson::Null,
            };
            keyed.push((key, d));
        }
        keyed.sort_by(|(ka, a), (kb, b)| {
            compare(ka.as_raw_bson_ref(), kb.as_raw_bson_ref()).then_with(|| {
                self.sort
                    .as_ref()
                    .map_or(Ordering::Equal, |s| s.compare(&a.0, &b.0))
            })
        });
        let mut out = Vec::with_capacity(keyed.len());
        let mut start = 0;
        while start < keyed.len() {
            let key = &keyed[start].0;
            let end = keyed[start..]
                .iter()
                .position(|(k, _)| compare(k.as_raw_bson_ref(), key.as_raw_bson_ref()).is_ne())
                .map_or(keyed.len(), |n| start + n);
            let mut part: Vec<Doc> = keyed[start..end].iter().map(|(_, d)| d.clone()).collect();
            for m in &self.methods {
                let filled = match m.method {
                    Method::Locf => locf(&part, &m.input)?,
                    Method::Linear => linear(&part, &m.input, self.sort_path.as_deref())?,
                };
                for (d, v) in part.iter_mut().zip(filled) {
                    d.0 = doc::set(&d.0, &m.path, Some(v));
                }
            }
            out.extend(part);
            start = end;
        }
        Ok(out)
    }
}

fn nullish(v: Option<&RawBson>) -> bool {
    matches!(v, None | Some(RawBson::Null | RawBson::Undefined))
}

/// `$locf`: each value, or the last non-null one before it (null before any).
fn locf(part: &[Doc], input: &Expression) -> CommandResult<Vec<RawBson>> {
    let mut last = RawBson::Null;
    let mut out = Vec::with_capacity(part.len());
    for (d, _) in part {
        let v = input.evaluate(d)?;
        if let Some(v) = v.filter(|v| !nullish(Some(v))) {
            last = v;
        }
        out.push(last.clone());
    }
    Ok(out)
}

fn is_number(v: &RawBson) -> bool {
    matches!(
        v,
        RawBson::Int32(_) | RawBson::Int64(_) | RawBson::Double(_) | RawBson::Decimal128(_)
    )
}

/// A sort value as `$linearFill` reads it: a number as it is, or a date (Timestamps and
/// ObjectIds as the date they hold); `true` for a date.
fn coordinate(v: &RawBson) -> Option<(RawBson, bool)> {
    let date = |ms: i64| Some((RawBson::DateTime(bson::DateTime::from_millis(ms)), true));
    match v {
        RawBson::DateTime(_) => Some((v.clone(), true)),
        RawBson::Timestamp(t) => date(i64::from(t.time) * 1000),
        RawBson::ObjectId(o) => date(o.timestamp().timestamp_millis()),
        other if is_number(other) => Some((other.clone(), false)),
        _ => None,
    }
}

/// mongod's `$linearFill` interpolation (`WindowFunctionExecLinearFill`): the value at `x` on
/// the line through (x1, y1) and (x2, y2), computed as `y1 + (x - x1) * ((y2 - y1) / (x2 -
/// x1))` with `$add`, `$subtract`, `$multiply` and `$divide`, in that order and with their
/// types: a decimal when any of the five is a decimal (exact, in decimal128), else a double;
/// dates subtract to milliseconds.
fn interpolate(
    (x1, y1): (&RawBson, &RawBson),
    (x2, y2): (&RawBson, &RawBson),
    x: &RawBson,
) -> CommandResult<RawBson> {
    static LINE: OnceLock<Option<Expression>> = OnceLock::new();
    let line = LINE.get_or_init(|| {
        let spec = rawbson!({"$add": ["$y1", {"$multiply": [
            {"$subtract": ["$x", "$x1"]},
            {"$divide": [{"$subtract": ["$y2", "$y1"]}, {"$subtract": ["$x2", "$x1"]}]}
        ]}]});
        Expression::parse(spec.as_raw_bson_ref()).ok()
    });
    let Some(line) = line else {
        return Err(CommandError::internal(
            "the $linearFill line does not parse",
        ));
    };
    let points = rawdoc! {
        "x1": x1.clone(), "y1": y1.clone(), "x2": x2.clone(), "y2": y2.clone(), "x": x.clone()
    };
    Ok(line.evaluate(&points)?.unwrap_or(RawBson::Null))
}

/// A point whose value is known.
fn known((px, py): &(RawBson, Option<RawBson>)) -> Option<(&RawBson, &RawBson)> {
    py.as_ref().map(|v| (px, v))
}

/// `$fill`'s `linear`: `$linearFill` along the `sortBy` field (every value null without one).
fn linear(
    part: &[Doc],
    input: &Expression,
    sort: Option<&[String]>,
) -> CommandResult<Vec<RawBson>> {
    let Some(sort) = sort else {
        return Ok(vec![RawBson::Null; part.len()]);
    };
    linear_fill(
        part.iter()
            .map(|(d, _)| (d.as_ref(), doc::get(d, sort).map(RawBson::from))),
        input,
    )
}

/// `$linearFill` over one partition in sort order, each document with its `sortBy` value
/// (`None` when missing), as mongod's `WindowFunctionExecLinearFill` (which `$fill` desugars
/// to): nulls between two numbers interpolated along the sort values, nulls before the first or
/// after the last number left null; its errors (TypeMismatch for a value or sort value of
/// another type or sort values mixing numbers and dates, 6050106 for a repeated sort value).
pub(super) fn linear_fill<'d>(
    rows: impl Iterator<Item = (&'d RawDocument, Option<RawBson>)>,
    input: &Expression,
) -> CommandResult<Vec<RawBson>> {
    let mut points: Vec<(RawBson, Option<RawBson>)> = Vec::new();
    let mut last_x: Option<(RawBson, bool)> = None;
    for (d, x) in rows {
        let y = input.evaluate(d)?;
        let y = match y {
            Some(v) if nullish(Some(&v)) => None,
            None => None,
            Some(v) if is_number(&v) => Some(v),
            Some(v) => {
                return Err(type_mismatch(format!(
                    "Value to be filled must be numeric or nullish, but found {}",
                    type_name(v.element_type())
                )));
            }
        };
        let missing = x.is_none();
        let x = x.unwrap_or(RawBson::Null);
        let Some((xv, is_date)) = coordinate(&x) else {
            return Err(type_mismatch(format!(
                "Value of the sortBy field must be numeric or a date, but found {}",
                if missing {
                    "missing"
                } else {
                    type_name(x.element_type())
                }
            )));
        };
        if let Some((prev, prev_date)) = &last_x {
            if compare(prev.as_raw_bson_ref(), x.as_raw_bson_ref()).is_eq() {
                return Err(loc(
                    6_050_106,
                    "There can be no repeated values in the sort field in the same partition",
                ));
            }
            if *prev_date != is_date {
                return Err(type_mismatch(format!(
                    "Conflicting sort value types, previously received type {}, but found {}",
                    type_name(prev.element_type()),
                    type_name(x.element_type())
                )));
            }
        }
        last_x = Some((x, is_date));
        points.push((xv, y));
    }
    // The next known point after each document, found in one pass from the end (a run of
    // nulls costs its length, not its square).
    let mut after: Vec<Option<(&RawBson, &RawBson)>> = vec![None; points.len()];
    let mut next = None;
    for (slot, point) in after.iter_mut().zip(&points).rev() {
        *slot = next;
        if let Some(p) = known(point) {
            next = Some(p);
        }
    }
    let mut out = Vec::with_capacity(points.len());
    let mut before = None;
    for ((x, y), after) in points.iter().zip(after) {
        if let Some(v) = y {
            out.push(v.clone());
            before = Some((x, v));
            continue;
        }
        out.push(match (before, after) {
            (Some(first), Some(second)) => interpolate(first, second, x)?,
            _ => RawBson::Null,
        });
    }
    Ok(out)
}

impl Stage for Fill {
    fn run<'a>(&'a self, input: Stream<'a>, ctx: &'a Context) -> Stream<'a> {
        let filled: Stream<'a> = if self.methods.is_empty() {
            input
        } else {
            blocking(move || {
                let docs = input.collect::<CommandResult<Vec<Doc>>>()?;
                self.fill_methods(docs).map_err(aggregation_error)
            })
        };
        match &self.values {
            Some(v) => v.run(filled, ctx),
            None => filled,
        }
    }

    fn collate(&mut self, collation: &Arc<Collation>) {
        if let Some(s) = self.sort.take() {
            self.sort = Some(s.with_collation(Some(Arc::clone(collation))));
        }
    }
}

#[cfg(test)]
mod tests {
    use bson::{Bson, DateTime, Document, doc};

    use crate::pipeline::stages::tests::{aggregate, code};

    fn hour(h: i64) -> DateTime {
        DateTime::from_millis(1_615_194_000_000 + h * 3_600_000)
    }

    #[test]
    fn constant_value_and_locf() {
        let docs = vec![
            doc! {"_id": 1, "a": 1, "b": null},
            doc! {"_id": 2},
            doc! {"_id": 3, "a": 3, "b": "x"},
            doc! {"_id": 4, "b": null},
        ];
        let out = aggregate(
            &[doc! {"$fill": {"output": {"b": {"value": "none"}}}}],
            &docs,
        )
        .unwrap();
        let b: Vec<&str> = out.iter().map(|d| d.get_str("b").unwrap()).collect();
        assert_eq!(b, ["none", "none", "x", "none"]);
        let out = aggregate(
            &[doc! {"$fill": {"sortBy": {"_id": -1}, "output": {"a": {"method": "locf"}}}}],
            &docs,
        )
        .unwrap();
        assert_eq!(
            out,
            vec![
                doc! {"_id": 4, "b": null, "a": null},
                doc! {"_id": 3, "a": 3, "b": "x"},
                doc! {"_id": 2, "a": 3},
                doc! {"_id": 1, "a": 1, "b": null},
            ]
        );
    }

    #[test]
    fn linear_interpolation() {
        let docs = vec![
            doc! {"_id": 1, "time": hour(0), "price": 500},
            doc! {"_id": 2, "time": hour(1)},
            doc! {"_id": 3, "time": hour(2), "price": 515},
            doc! {"_id": 4, "time": hour(3)},
            doc! {"_id": 5, "time": hour(4), "price": null},
            doc! {"_id": 6, "time": hour(5), "price": 485},
            doc! {"_id": 7, "time": hour(6)},
        ];
        let out = aggregate(
            &[doc! {"$fill": {"sortBy": {"time": 1}, "output": {"price": {"method": "linear"}}}}],
            &docs,
        )
        .unwrap();
        let prices: Vec<Bson> = out
            .iter()
            .map(|d| d.get("price").unwrap().clone())
            .collect();
        assert_eq!(
            prices,
            vec![
                Bson::Int32(500),
                Bson::Double(507.5),
                Bson::Int32(515),
                Bson::Double(505.0),
                Bson::Double(495.0),
                Bson::Int32(485),
                Bson::Null,
            ]
        );
    }

    fn dec(s: &str) -> Bson {
        Bson::Decimal128(s.parse().unwrap())
    }

    /// `(x, y)` points, `y` None where it is to be filled, through `$fill` and through
    /// `$setWindowFields`' `$linearFill`: the filled column of each.
    fn both_ways(points: &[(Bson, Option<Bson>)]) -> [Vec<Bson>; 2] {
        let docs: Vec<Document> = points
            .iter()
            .enumerate()
            .map(|(i, (x, y))| {
                let mut d = doc! {"_id": i32::try_from(i).unwrap(), "x": x.clone()};
                if let Some(y) = y {
                    d.insert("y", y.clone());
                }
                d
            })
            .collect();
        let fill = aggregate(
            &[doc! {"$fill": {"sortBy": {"x": 1}, "output": {"y": {"method": "linear"}}}}],
            &docs,
        )
        .unwrap();
        let window = aggregate(
            &[doc! {"$setWindowFields": {"sortBy": {"x": 1},
            "output": {"y": {"$linearFill": "$y"}}}}],
            &docs,
        )
        .unwrap();
        [fill, window].map(|out| out.iter().map(|d| d.get("y").unwrap().clone()).collect())
    }

    #[test]
    fn linear_interpolation_as_mongod_computes_it() {
        // y1 + (x - x1) * ((y2 - y1) / (x2 - x1)), in that order: 10/3 first (a double
        // 3.3333333333333335), not 10 * (1/3) (3.333333333333333).
        let got = both_ways(&[
            (Bson::Int32(0), Some(Bson::Int32(0))),
            (Bson::Int32(1), None),
            (Bson::Int32(3), Some(Bson::Int32(10))),
        ]);
        for column in got {
            assert_eq!(column[1], Bson::Double(3.333_333_333_333_333_5));
        }
        // Decimal values interpolate in decimal, exactly.
        let got = both_ways(&[
            (Bson::Int32(1), Some(dec("1.10"))),
            (Bson::Int32(2), None),
            (Bson::Int32(3), Some(dec("2.205"))),
        ]);
        for column in got {
            assert_eq!(column, vec![dec("1.10"), dec("1.6525"), dec("2.205")]);
        }
        // A decimal sort value makes the line decimal too, to 34 digits.
        let got = both_ways(&[
            (Bson::Int32(0), Some(Bson::Int32(1))),
            (Bson::Int32(1), None),
            (dec("3"), Some(Bson::Int32(2))),
        ]);
        for column in got {
            assert_eq!(column[1], dec("1.333333333333333333333333333333333"));
        }
        // Dates subtract to milliseconds: 1 + 3600000 * (1 / 7200000).
        let got = both_ways(&[
            (Bson::DateTime(hour(0)), Some(dec("1"))),
            (Bson::DateTime(hour(1)), None),
            (Bson::DateTime(hour(2)), Some(dec("2"))),
        ]);
        for column in got {
            assert_eq!(column[1], dec("1.500000000000000000000000000000000"));
        }
        // A long run of nulls, each filled from the same two ends.
        let mut run: Vec<(Bson, Option<Bson>)> =
            (0..=2000).map(|x| (Bson::Int32(x), None)).collect();
        run[0].1 = Some(Bson::Int32(0));
        run[2000].1 = Some(Bson::Int32(4000));
        for column in both_ways(&run) {
            assert_eq!(column[1000], Bson::Double(2000.0));
            assert_eq!(column[1999], Bson::Double(3998.0));
        }
        // Doubles and integers only: a double.
        let got = both_ways(&[
            (Bson::Int64(10), Some(Bson::Double(0.5))),
            (Bson::Int64(20), None),
            (Bson::Int64(40), Some(Bson::Int64(2))),
        ]);
        for column in got {
            assert_eq!(column[1], Bson::Double(1.0));
        }
    }

    #[test]
    fn linear_fill_errors_the_same_both_ways() {
        let stages = |docs: &[Document]| {
            [
                code(
                    doc! {"$fill": {"sortBy": {"x": 1}, "output": {"y": {"method": "linear"}}}},
                    docs,
                ),
                code(
                    doc! {"$setWindowFields": {"sortBy": {"x": 1},
                    "output": {"y": {"$linearFill": "$y"}}}},
                    docs,
                ),
            ]
        };
        // A value that is not a number, a sort value that is not one, missing, or repeated.
        assert_eq!(
            stages(&[doc! {"x": 1, "y": 1}, doc! {"x": 2, "y": "a"}]),
            [14, 14]
        );
        assert_eq!(
            stages(&[doc! {"x": "a", "y": 1}, doc! {"x": "b", "y": 2}]),
            [14, 14]
        );
        assert_eq!(stages(&[doc! {"y": 1}, doc! {"x": 1, "y": 2}]), [14, 14]);
        assert_eq!(
            stages(&[doc! {"x": 1, "y": 1}, doc! {"x": 1, "y": 2}]),
            [6_050_106, 6_050_106]
        );
        // Numbers and dates mixed.
        assert_eq!(
            stages(&[doc! {"x": 1, "y": 1}, doc! {"x": hour(0), "y": 2}]),
            [14, 14]
        );
    }

    #[test]
    fn partitions() {
        let docs = vec![
            doc! {"_id": 1, "d": 1, "r": "J", "s": 90},
            doc! {"_id": 2, "d": 1, "r": "S", "s": 75},
            doc! {"_id": 3, "d": 2, "r": "J"},
            doc! {"_id": 4, "d": 2, "r": "S"},
        ];
        for partition in [
            doc! {"partitionBy": {"r": "$r"}},
            doc! {"partitionBy": "$r"},
            doc! {"partitionByFields": ["r"]},
        ] {
            let mut spec = doc! {"sortBy": {"d": 1}, "output": {"s": {"method": "locf"}}};
            spec.extend(partition);
            let out = aggregate(&[doc! {"$fill": spec}], &docs).unwrap();
            let got: Vec<(i32, i32)> = out
                .iter()
                .map(|d| (d.get_i32("_id").unwrap(), d.get_i32("s").unwrap()))
                .collect();
            assert_eq!(got, vec![(1, 90), (3, 90), (2, 75), (4, 75)]);
        }
    }

    #[test]
    fn errors() {
        let fill = |spec: Document| doc! {"$fill": spec};
        assert_eq!(code(doc! {"$fill": 1}, &[]), 9);
        assert_eq!(code(fill(doc! {}), &[]), 40414);
        assert_eq!(code(fill(doc! {"output": {}}), &[]), 6_050_203);
        assert_eq!(code(fill(doc! {"output": {"a": 1}}), &[]), 6_050_200);
        assert_eq!(
            code(
                fill(doc! {"output": {"a": {"method": "locf", "value": 1}}}),
                &[]
            ),
            6_050_201
        );
        assert_eq!(
            code(fill(doc! {"output": {"a": {"method": "next"}}}), &[]),
            6_050_202
        );
        assert_eq!(
            code(
                fill(doc! {"partitionBy": "$a", "partitionByFields": ["a"],
                "output": {"a": {"value": 1}}}),
                &[]
            ),
            6_050_204
        );
        assert_eq!(
            code(fill(doc! {"output": {"a": {"method": "linear"}}}), &[]),
            605_001
        );
        assert_eq!(
            code(
                fill(doc! {"sortBy": {"a": 1, "b": 1}, "output": {"a": {"method": "linear"}}}),
                &[]
            ),
            605_001
        );
        assert_eq!(
            code(fill(doc! {"x": 1, "output": {"a": {"value": 1}}}), &[]),
            40415
        );
        assert_eq!(code(fill(doc! {"output": {"a": {"x": 1}}}), &[]), 40415);
        assert_eq!(
            code(fill(doc! {"sortBy": 1, "output": {"a": {"value": 1}}}), &[]),
            14
        );
        let linear = fill(doc! {"sortBy": {"t": 1}, "output": {"v": {"method": "linear"}}});
        assert_eq!(code(linear.clone(), &[doc! {"t": 1, "v": "x"}]), 14);
        assert_eq!(code(linear.clone(), &[doc! {"t": "a", "v": 1}]), 14);
        assert_eq!(
            code(
                linear.clone(),
                &[doc! {"t": 1, "v": 1}, doc! {"t": 1, "v": 2}]
            ),
            6_050_106
        );
        assert_eq!(
            code(
                linear,
                &[doc! {"t": 1, "v": 1}, doc! {"t": hour(0), "v": 2}]
            ),
            14
        );
    }
}
