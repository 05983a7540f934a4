//! The window functions of `$setWindowFields` (mongod's `window_function::Expression`): the
//! `$group` accumulators mongod allows in a window, computed over each document's window, and
//! the window-only functions.

use std::sync::Arc;

use bson::{RawBson, RawBsonRef, RawDocumentBuf};

use super::bounds::{Bounds, TimeUnit, constant};
use super::{Partition, failed, loc};
use crate::error::CommandResult;
use crate::pipeline::accumulators::{Accumulator, State, as_f64};
use crate::query::decimal::Decimal;
use crate::query::display::{self, type_name};
use crate::query::{Expression, Variables};

/// The accumulators mongod 7.0 registers as window functions (`$mergeObjects` and
/// `$accumulator` are not among them).
const ACCUMULATORS: &[&str] = &[
    "$sum",
    "$avg",
    "$min",
    "$max",
    "$count",
    "$push",
    "$addToSet",
    "$first",
    "$last",
    "$stdDevPop",
    "$stdDevSamp",
    "$firstN",
    "$lastN",
    "$minN",
    "$maxN",
    "$top",
    "$topN",
    "$bottom",
    "$bottomN",
    "$median",
    "$percentile",
];

/// The window-only functions.
const WINDOW_ONLY: &[&str] = &[
    "$rank",
    "$denseRank",
    "$documentNumber",
    "$shift",
    "$derivative",
    "$integral",
    "$expMovingAvg",
    "$covariancePop",
    "$covarianceSamp",
    "$locf",
    "$linearFill",
];

fn is_function(name: &str) -> bool {
    ACCUMULATORS.contains(&name) || WINDOW_ONLY.contains(&name)
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum RankKind {
    Rank,
    Dense,
    Number,
}

/// What a window function computes.
enum Func {
    /// A `$group` accumulator over the window.
    Acc(Box<Accumulator>),
    Rank(RankKind),
    Shift {
        output: Expression,
        by: i64,
        default: RawBson,
    },
    Locf(Expression),
    LinearFill(Expression),
    Derivative {
        input: Expression,
        unit: Option<i64>,
    },
    Integral {
        input: Expression,
        unit: Option<i64>,
    },
    ExpMovingAvg {
        input: Expression,
        alpha: Decimal,
    },
    Covariance {
        x: Expression,
        y: Expression,
        samp: bool,
    },
}

/// One output field's window function with its window.
pub struct WindowFn {
    func: Func,
    bounds: Bounds,
}

/// The stage's `sortBy` as the window functions see it.
pub struct SortInfo<'s> {
    /// (path, ascending) of each key; `None` without `sortBy`.
    pub keys: Option<&'s [(String, bool)]>,
}

impl SortInfo<'_> {
    fn single(&self) -> bool {
        matches!(self.keys, Some([_]))
    }
}

impl WindowFn {
    /// Parses output field `field`'s `{<function>: <argument>, window?: {…}}`.
    pub fn parse(
        field: &str,
        spec: RawBsonRef<'_>,
        sort: &SortInfo<'_>,
        vars: &Arc<Variables>,
    ) -> CommandResult<WindowFn> {
        let RawBsonRef::Document(spec) = spec else {
            return Err(failed(format!("The field '{field}' must be an object")));
        };
        let items: Vec<(&str, RawBsonRef<'_>)> = spec
            .iter()
            .map_while(Result::ok)
            .map(|(k, v)| (k.as_str(), v))
            .collect();
        let Some(&(name, _)) = items.iter().find(|(k, _)| k.starts_with('$')) else {
            let first = items
                .first()
                .map_or(String::new(), |(k, _)| format!(", {k}"));
            return Err(failed(format!(
                "Expected a $-prefixed window function{first}"
            )));
        };
        if !is_function(name) {
            return Err(failed(format!("Unrecognized window function, {name}")));
        }
        match name {
            "$rank" | "$denseRank" | "$documentNumber" => parse_rank(name, &items, sort),
            "$shift" => parse_shift(&items, sort, vars),
            "$expMovingAvg" => parse_exp_moving_avg(&items, sort, vars),
            "$derivative" | "$integral" => parse_with_unit(name, &items, sort, vars),
            "$locf" | "$linearFill" => parse_fill(name, &items, sort, vars),
            "$first" | "$last" | "$firstN" | "$lastN" | "$minN" | "$maxN" | "$top" | "$topN"
            | "$bottom" | "$bottomN" | "$median" | "$percentile" => {
                parse_named(field, name, &items, sort, vars)
            }
            _ => parse_removable(field, &items, sort, vars),
        }
    }

    /// One value per document of the partition.
    pub fn compute(&self, part: &Partition<'_>) -> CommandResult<Vec<RawBson>> {
        let n = part.docs.len();
        match &self.func {
            Func::Acc(acc) => self.accumulate(acc, part),
            Func::Rank(kind) => Ok(ranks(*kind, &part.sort_keys)),
            Func::Shift {
                output,
                by,
                default,
            } => (0..n)
                .map(|i| {
                    let j = i64::try_from(i).ok().and_then(|i| i.checked_add(*by));
                    let doc = j
                        .and_then(|j| usize::try_from(j).ok())
                        .and_then(|j| part.docs.get(j));
                    match doc {
                        Some(d) => Ok(output.evaluate(d)?.unwrap_or(RawBson::Null)),
                        None => Ok(default.clone()),
                    }
                })
                .collect(),
            Func::Locf(input) => {
                let mut last = RawBson::Null;
                part.docs
                    .iter()
                    .map(|d| {
                        match input.evaluate(d)? {
                            None | Some(RawBson::Null) => {}
                            Some(v) => last = v,
                        }
                        Ok(last.clone())
                    })
                    .collect()
            }
            Func::LinearFill(input) => linear_fill(input, part),
            Func::Derivative { input, unit } => self.derivative(input, *unit, part),
            Func::Integral { input, unit } => self.integral(input, *unit, part),
            Func::ExpMovingAvg { input, alpha } => {
                // mongod's `AccumulatorExpMovingAvg`: every input coerced to a decimal (a double
                // by its 15 digits), the average kept in decimal, answered as a double unless an
                // input was a decimal.
                let keep = Decimal::of_i64(1) - *alpha;
                let mut avg: Option<Decimal> = None;
                let mut decimal = false;
                part.docs
                    .iter()
                    .map(|d| {
                        if let Some(v) = input.evaluate(d)?.as_ref().and_then(as_decimal) {
                            decimal |= v.1;
                            avg = Some(avg.map_or(v.0, |a| v.0 * *alpha + a * keep));
                        }
                        Ok(match avg {
                            None => RawBson::Null,
                            Some(a) if decimal => RawBson::Decimal128(a.bson()),
                            Some(a) => RawBson::Double(a.f64()),
                        })
                    })
                    .collect()
            }
            Func::Covariance { x, y, samp } => self.covariance(x, y, *samp, part),
        }
    }

    /// An accumulator over each document's window: one running state while the window only
    /// grows at its end, a fresh one otherwise.
    fn accumulate(&self, acc: &Accumulator, part: &Partition<'_>) -> CommandResult<Vec<RawBson>> {
        let keys = part.range_keys();
        self.bounds.check_keys(keys)?;
        let mut out = Vec::with_capacity(part.docs.len());
        let mut running: Option<(usize, usize, State)> = None;
        let mut last: Option<((usize, usize), RawBson)> = None;
        for i in 0..part.docs.len() {
            let Some((lo, hi)) = self.bounds.window(i, keys)? else {
                out.push(acc.finish(acc.start(&RawBson::Null)?)?);
                continue;
            };
            if let Some((w, v)) = &last
                && *w == (lo, hi)
            {
                out.push(v.clone());
                continue;
            }
            let (from, mut state) = match running.take() {
                Some((rlo, next, state)) if rlo == lo && next <= hi + 1 => (next, state),
                _ => (lo, acc.start(&RawBson::Null)?),
            };
            for doc in part.docs.get(from..=hi).unwrap_or_default() {
                acc.process(&mut state, doc)?;
            }
            let value = acc.finish(state.clone())?;
            running = Some((lo, hi + 1, state));
            last = Some(((lo, hi), value.clone()));
            out.push(value);
        }
        Ok(out)
    }

    /// `$derivative`: the slope between the first and last documents of each window.
    fn derivative(
        &self,
        input: &Expression,
        unit: Option<i64>,
        part: &Partition<'_>,
    ) -> CommandResult<Vec<RawBson>> {
        let keys = part.range_keys();
        self.bounds.check_keys(keys)?;
        let xs = time_axis(keys, unit, "$derivative", 5_624_900, 5_624_901)?;
        let mut out = Vec::with_capacity(part.docs.len());
        for i in 0..part.docs.len() {
            let value = match self.bounds.window(i, keys)? {
                Some((lo, hi)) if lo < hi => {
                    let y0 = eval_number(input, part.docs.get(lo))?;
                    let y1 = eval_number(input, part.docs.get(hi))?;
                    match (
                        y0,
                        y1,
                        xs.get(lo).copied().flatten(),
                        xs.get(hi).copied().flatten(),
                    ) {
                        (Some(y0), Some(y1), Some(x0), Some(x1)) if x1 != x0 => {
                            RawBson::Double((y1 - y0) / (x1 - x0) * per_unit(unit))
                        }
                        _ => RawBson::Null,
                    }
                }
                _ => RawBson::Null,
            };
            out.push(value);
        }
        Ok(out)
    }

    /// `$integral`: the trapezoidal area under each window's points.
    fn integral(
        &self,
        input: &Expression,
        unit: Option<i64>,
        part: &Partition<'_>,
    ) -> CommandResult<Vec<RawBson>> {
        let keys = part.range_keys();
        self.bounds.check_keys(keys)?;
        let xs = time_axis(keys, unit, "$integral", 5_423_901, 5_423_902)?;
        let ys = part
            .docs
            .iter()
            .map(|d| eval_number(input, Some(d)))
            .collect::<CommandResult<Vec<_>>>()?;
        let mut out = Vec::with_capacity(part.docs.len());
        for i in 0..part.docs.len() {
            let value = match self.bounds.window(i, keys)? {
                Some((lo, hi)) => {
                    // mongod's sum starts as the int 0: a window of one point stays an int.
                    let mut area: Option<f64> = None;
                    let mut prev: Option<(f64, f64)> = None;
                    for k in lo..=hi {
                        if let (Some(Some(x)), Some(Some(y))) = (xs.get(k), ys.get(k)) {
                            if let Some((px, py)) = prev {
                                let trapezoid = (x - px) * (y + py) / 2.0;
                                area = Some(area.unwrap_or(0.0) + trapezoid);
                            }
                            prev = Some((*x, *y));
                        }
                    }
                    match area {
                        Some(a) => RawBson::Double(a / per_unit(unit)),
                        None => RawBson::Int32(0),
                    }
                }
                None => RawBson::Null,
            };
            out.push(value);
        }
        Ok(out)
    }

    /// `$covariancePop`/`$covarianceSamp` over each window's numeric pairs.
    fn covariance(
        &self,
        x: &Expression,
        y: &Expression,
        samp: bool,
        part: &Partition<'_>,
    ) -> CommandResult<Vec<RawBson>> {
        let keys = part.range_keys();
        self.bounds.check_keys(keys)?;
        let pairs = part
            .docs
            .iter()
            .map(|d| Ok((eval_number(x, Some(d))?, eval_number(y, Some(d))?)))
            .collect::<CommandResult<Vec<_>>>()?;
        let mut out = Vec::with_capacity(part.docs.len());
        for i in 0..part.docs.len() {
            let mut n = 0.0;
            let (mut mx, mut my, mut c) = (0.0, 0.0, 0.0);
            if let Some((lo, hi)) = self.bounds.window(i, keys)? {
                for (a, b) in pairs.get(lo..=hi).unwrap_or_default() {
                    if let (Some(a), Some(b)) = (a, b) {
                        n += 1.0;
                        let dx = a - mx;
                        mx += dx / n;
                        my += (b - my) / n;
                        c += dx * (b - my);
                    }
                }
            }
            let divisor = if samp { n - 1.0 } else { n };
            out.push(if divisor <= 0.0 {
                RawBson::Null
            } else {
                RawBson::Double(c / divisor)
            });
        }
        Ok(out)
    }
}

/// Milliseconds of a unit (1 without one).
#[expect(
    clippy::cast_precision_loss,
    reason = "units are at most a week of milliseconds"
)]
fn per_unit(unit: Option<i64>) -> f64 {
    unit.map_or(1.0, |u| u as f64)
}

/// A number (dates as milliseconds) from `input` on `doc`; `None` when not a number.
fn eval_number(input: &Expression, doc: Option<&RawDocumentBuf>) -> CommandResult<Option<f64>> {
    let Some(doc) = doc else {
        return Ok(None);
    };
    Ok(match input.evaluate(doc)? {
        #[expect(clippy::cast_precision_loss, reason = "dates as doubles, as mongod")]
        Some(RawBson::DateTime(d)) => Some(d.timestamp_millis() as f64),
        Some(v) => as_f64(&v),
        None => None,
    })
}

/// The x axis of `$derivative`/`$integral`: numbers, or dates in milliseconds (mongod's errors
/// when a unit meets a number or a date meets no unit).
fn time_axis(
    keys: &[RawBson],
    unit: Option<i64>,
    name: &str,
    unit_needs_date: i32,
    date_needs_unit: i32,
) -> CommandResult<Vec<Option<f64>>> {
    keys.iter()
        .map(|k| match (k, unit) {
            #[expect(clippy::cast_precision_loss, reason = "dates as doubles, as mongod")]
            (RawBson::DateTime(d), Some(_)) => Ok(Some(d.timestamp_millis() as f64)),
            (RawBson::DateTime(_), None) => Err(loc(
                date_needs_unit,
                format!("{name} where the sortBy is a Date requires an 'unit'"),
            )),
            (other, Some(_)) => Err(loc(
                unit_needs_date,
                format!(
                    "{name} with unit expects the sortBy field to be a Date, but it was: {}",
                    type_name(other.element_type())
                ),
            )),
            (other, None) => Ok(as_f64(other)),
        })
        .collect()
}

/// `$rank`, `$denseRank`, `$documentNumber` from the partition's sort keys.
fn ranks(kind: RankKind, keys: &[Vec<RawBson>]) -> Vec<RawBson> {
    let mut out = Vec::with_capacity(keys.len());
    let mut rank = 0_usize;
    let mut dense = 0_usize;
    for (i, key) in keys.iter().enumerate() {
        let same = i > 0 && keys.get(i - 1).is_some_and(|prev| keys_equal(prev, key));
        if !same {
            rank = i + 1;
            dense += 1;
        }
        let v = match kind {
            RankKind::Rank => rank,
            RankKind::Dense => dense,
            RankKind::Number => i + 1,
        };
        out.push(match i32::try_from(v) {
            Ok(v) => RawBson::Int32(v),
            Err(_) => RawBson::Int64(i64::try_from(v).unwrap_or(i64::MAX)),
        });
    }
    out
}

fn keys_equal(a: &[RawBson], b: &[RawBson]) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|(x, y)| {
            crate::query::compare::compare(x.as_raw_bson_ref(), y.as_raw_bson_ref()).is_eq()
        })
}

/// `$linearFill`: nulls between two numbers become the straight line between them, as
/// `$fill`'s `linear` computes them (both are mongod's `WindowFunctionExecLinearFill`).
fn linear_fill(input: &Expression, part: &Partition<'_>) -> CommandResult<Vec<RawBson>> {
    let rows = part.docs.iter().zip(part.range_keys()).map(|(d, k)| {
        let x = (!matches!(k, RawBson::Undefined)).then(|| k.clone());
        (d.as_ref(), x)
    });
    crate::pipeline::stages::fill::linear_fill(rows, input)
}

/// `$rank`, `$denseRank`, `$documentNumber: {}`.
fn parse_rank(
    name: &str,
    items: &[(&str, RawBsonRef<'_>)],
    sort: &SortInfo<'_>,
) -> CommandResult<WindowFn> {
    if items.len() != 1 {
        return Err(loc(
            5_371_601,
            "Rank style window functions take no other arguments",
        ));
    }
    if !matches!(items.first(), Some((_, RawBsonRef::Document(d))) if d.is_empty()) {
        return Err(loc(
            5_371_603,
            format!("{name} must be specified with '{{}}' as the value"),
        ));
    }
    if !sort.single() {
        return Err(loc(
            5_371_602,
            format!(
                "{name} must be specified with a top level sortBy expression with exactly one \
                 element"
            ),
        ));
    }
    let kind = match name {
        "$rank" => RankKind::Rank,
        "$denseRank" => RankKind::Dense,
        _ => RankKind::Number,
    };
    Ok(WindowFn {
        func: Func::Rank(kind),
        bounds: Bounds::TO_CURRENT,
    })
}

/// `$shift: {output, by, default?}` (no window).
fn parse_shift(
    items: &[(&str, RawBsonRef<'_>)],
    sort: &SortInfo<'_>,
    vars: &Arc<Variables>,
) -> CommandResult<WindowFn> {
    if items.len() != 1 {
        return Err(failed("$shift does not accept a 'window' field"));
    }
    if sort.keys.is_none() {
        return Err(failed("'$shift' requires a sortBy"));
    }
    let Some((_, RawBsonRef::Document(arg))) = items.first() else {
        return Err(failed("Argument to $shift must be an object"));
    };
    let mut output = None;
    let mut by = None;
    let mut default = None;
    for (k, v) in arg.iter().map_while(Result::ok) {
        match k.as_str() {
            "output" => output = Some(Expression::parse_in(v, vars)?),
            "by" => {
                let n = match v {
                    RawBsonRef::Int32(n) => Some(i64::from(n)),
                    RawBsonRef::Int64(n) => Some(n),
                    RawBsonRef::Double(d) if d.fract() == 0.0 && d.abs() < 9.0e15 =>
                    {
                        #[expect(clippy::cast_possible_truncation, reason = "checked integral")]
                        Some(d as i64)
                    }
                    _ => None,
                };
                by = Some(n.ok_or_else(|| {
                    failed(format!(
                        "'$shift:by' field must be an integer, but found {}",
                        display::element("by", v)
                    ))
                })?);
            }
            "default" => {
                default = Some(constant(v, vars)?.ok_or_else(|| {
                    failed("'$shift:default' expression must yield a constant value.")
                })?);
            }
            other => return Err(failed(format!("Unknown argument in $shift: {other}"))),
        }
    }
    let output = output.ok_or_else(|| failed("$shift requires an 'output' expression."))?;
    let by = by.ok_or_else(|| failed("$shift requires a 'by' field."))?;
    Ok(WindowFn {
        func: Func::Shift {
            output,
            by,
            default: default.unwrap_or(RawBson::Null),
        },
        bounds: Bounds::WHOLE,
    })
}

/// A number as mongod's `Value::coerceToDecimal` reads it, and whether it was a decimal.
fn as_decimal(v: &RawBson) -> Option<(Decimal, bool)> {
    let v = v.as_raw_bson_ref();
    Decimal::coerce(v).map(|d| (d, matches!(v, RawBsonRef::Decimal128(_))))
}

/// `$expMovingAvg: {input, N | alpha}` (no window).
fn parse_exp_moving_avg(
    items: &[(&str, RawBsonRef<'_>)],
    sort: &SortInfo<'_>,
    vars: &Arc<Variables>,
) -> CommandResult<WindowFn> {
    let Some((_, RawBsonRef::Document(arg))) = items.first().filter(|_| items.len() == 1) else {
        return Err(failed(
            "$expMovingAvg must have exactly one argument that is an object",
        ));
    };
    let fields: Vec<_> = arg.iter().map_while(Result::ok).collect();
    let shape = "$expMovingAvg sub object must have exactly two fields: An 'input' field, and \
                 either an 'N' field or an 'alpha' field";
    if fields.len() != 2 || arg.get("input").ok().flatten().is_none() {
        return Err(failed(shape));
    }
    if sort.keys.is_none() {
        return Err(failed("$expMovingAvg requires an explicit 'sortBy'"));
    }
    let input = Expression::parse_in(
        arg.get("input").ok().flatten().unwrap_or(RawBsonRef::Null),
        vars,
    )?;
    let alpha = if let Some(n) = arg.get("N").ok().flatten() {
        let x = as_f64(&RawBson::from(n)).ok_or_else(|| {
            failed(format!(
                "'N' field must be an integer, but found type {}",
                type_name(n.element_type())
            ))
        })?;
        if x.fract() != 0.0 {
            return Err(failed(format!(
                "'N' field must be an integer, but found  {}. To use a non-integer, use the \
                 'alpha' argument instead",
                display::element("N", n)
            )));
        }
        if x <= 0.0 {
            return Err(failed(format!("'N' must be greater than zero. Got {x}")));
        }
        // mongod: `Decimal128(2).divide(Decimal128(N + 1))`.
        Decimal::of_i64(2) / (Decimal::of_f64(x) + Decimal::of_i64(1))
    } else if let Some(a) = arg.get("alpha").ok().flatten() {
        let x = as_f64(&RawBson::from(a)).ok_or_else(|| failed("'alpha' must be a number"))?;
        if !(x > 0.0 && x < 1.0) {
            return Err(failed(format!(
                "'alpha' must be between 0 and 1 (exclusive), found {}",
                display::element("alpha", a)
            )));
        }
        as_decimal(&RawBson::from(a)).map_or_else(|| Decimal::of_f64(x), |(d, _)| d)
    } else {
        return Err(failed(format!(
            "Got unrecognized field in $expMovingAvg{shape}"
        )));
    };
    Ok(WindowFn {
        func: Func::ExpMovingAvg { input, alpha },
        bounds: Bounds::TO_CURRENT,
    })
}

/// `$derivative`/`$integral: {input, unit?}` with a window (required by `$derivative`).
fn parse_with_unit(
    name: &str,
    items: &[(&str, RawBsonRef<'_>)],
    sort: &SortInfo<'_>,
    vars: &Arc<Variables>,
) -> CommandResult<WindowFn> {
    match sort.keys {
        None => return Err(failed(format!("{name} requires a sortBy"))),
        Some([_]) => {}
        Some(_) => return Err(failed(format!("{name} requires a non-compound sortBy"))),
    }
    let mut bounds = None;
    let mut args = None;
    for &(k, v) in items {
        if k == "window" {
            if bounds.is_some() {
                return Err(failed(format!(
                    "There can be only one 'window' field for {name}"
                )));
            }
            bounds = Some(Bounds::parse(v, sort.keys, vars)?);
        } else if k == name {
            args = Some(v);
        } else {
            return Err(failed(format!("{name} got unexpected argument: {k}")));
        }
    }
    let Some(RawBsonRef::Document(args)) = args else {
        let shown = args.map_or(String::new(), |a| display::value(a));
        return Err(failed(format!(
            "{name} expects an object, but got a {shown}"
        )));
    };
    let mut input = None;
    let mut unit = None;
    for (k, v) in args.iter().map_while(Result::ok) {
        match k.as_str() {
            "input" => input = Some(Expression::parse_in(v, vars)?),
            "unit" => {
                let RawBsonRef::String(s) = v else {
                    return Err(failed(format!(
                        "unit' must be a string, but got {}",
                        type_name(v.element_type())
                    )));
                };
                let ms = TimeUnit::parse(s)?
                    .millis()
                    .ok_or_else(|| loc(5_490_710, "unit must be 'week' or smaller"))?;
                unit = Some(ms);
            }
            other => return Err(failed(format!("{name} got unexpected argument: {other}"))),
        }
    }
    let input = input.ok_or_else(|| failed(format!("{name} requires an 'input' expression")))?;
    let func = if name == "$derivative" {
        if bounds.is_none() {
            return Err(failed("$derivative requires explicit window bounds"));
        }
        Func::Derivative { input, unit }
    } else {
        Func::Integral { input, unit }
    };
    Ok(WindowFn {
        func,
        bounds: bounds.unwrap_or(Bounds::WHOLE),
    })
}

/// `$locf: <expression>`, `$linearFill: <expression>` (no window).
fn parse_fill(
    name: &str,
    items: &[(&str, RawBsonRef<'_>)],
    sort: &SortInfo<'_>,
    vars: &Arc<Variables>,
) -> CommandResult<WindowFn> {
    let mut input = None;
    let mut window = false;
    for &(k, v) in items {
        if k == "window" {
            window = true;
        } else if is_function(k) {
            if input.is_some() {
                return Err(failed(
                    "Cannot specify two functions in window function spec",
                ));
            }
            input = Some(Expression::parse_in(v, vars)?);
        } else {
            return Err(failed(format!(
                "Window function found an unknown argument: {k}"
            )));
        }
    }
    let input = input.ok_or_else(|| failed("Must specify a window function in output field"))?;
    if window {
        return Err(failed(format!("'window' field is not allowed in {name}")));
    }
    let func = if name == "$locf" {
        Func::Locf(input)
    } else {
        if !sort.single() {
            return Err(loc(
                605_001,
                format!(
                    "{name} must be specified with a top level sortBy expression with exactly \
                     one element"
                ),
            ));
        }
        Func::LinearFill(input)
    };
    Ok(WindowFn {
        func,
        bounds: Bounds::WHOLE,
    })
}

/// The accumulators parsed under their own name (`$first`, the N family, `$median`…), whose
/// other arguments are only `window`.
fn parse_named(
    field: &str,
    name: &str,
    items: &[(&str, RawBsonRef<'_>)],
    sort: &SortInfo<'_>,
    vars: &Arc<Variables>,
) -> CommandResult<WindowFn> {
    let mut bounds = None;
    let mut arg = None;
    for &(k, v) in items {
        if k == "window" {
            if bounds.is_some() {
                return Err(failed(format!(
                    "saw multiple 'window' fields in '{name}' expression"
                )));
            }
            bounds = Some(Bounds::parse(v, sort.keys, vars)?);
        } else if k == name {
            arg = Some(v);
        } else {
            return Err(failed(format!("{name} got unexpected argument: {k}")));
        }
    }
    let arg = arg.ok_or_else(|| failed(format!("missing accumulator specification for {name}")))?;
    let acc = accumulator(field, name, arg, vars)?;
    // mongod evaluates `n` once, against no document: check it now.
    acc.start(&RawBson::Null)?;
    Ok(WindowFn {
        func: Func::Acc(Box::new(acc)),
        bounds: bounds.unwrap_or(Bounds::WHOLE),
    })
}

/// The accumulators mongod's `ExpressionRemovable` parses (`$sum`, `$avg`…) and the
/// covariances: `{<function>: <argument>, window?}`.
fn parse_removable(
    field: &str,
    items: &[(&str, RawBsonRef<'_>)],
    sort: &SortInfo<'_>,
    vars: &Arc<Variables>,
) -> CommandResult<WindowFn> {
    let mut bounds = Bounds::WHOLE;
    let mut func: Option<(&str, RawBsonRef<'_>)> = None;
    for &(k, v) in items {
        if k == "window" {
            bounds = Bounds::parse(v, sort.keys, vars)?;
        } else if is_function(k) {
            if func.is_some() {
                return Err(failed(
                    "Cannot specify two functions in window function spec",
                ));
            }
            func = Some((k, v));
        } else {
            return Err(failed(format!(
                "Window function found an unknown argument: {k}"
            )));
        }
    }
    let (name, arg) =
        func.ok_or_else(|| failed("Must specify a window function in output field"))?;
    let func = match name {
        "$covariancePop" | "$covarianceSamp" => {
            let exprs = match arg {
                RawBsonRef::Array(a) => a
                    .into_iter()
                    .map_while(Result::ok)
                    .map(|v| Expression::parse_in(v, vars))
                    .collect::<CommandResult<Vec<_>>>()?,
                _ => Vec::new(),
            };
            let [x, y]: [Expression; 2] = exprs.try_into().map_err(|_| {
                failed(format!(
                    "Expression {name} takes exactly 2 arguments. 1 were passed in."
                ))
            })?;
            Func::Covariance {
                x,
                y,
                samp: name == "$covarianceSamp",
            }
        }
        _ => Func::Acc(Box::new(accumulator(field, name, arg, vars)?)),
    };
    Ok(WindowFn { func, bounds })
}

/// A `$group` accumulator for `{<name>: <arg>}`.
fn accumulator(
    field: &str,
    name: &str,
    arg: RawBsonRef<'_>,
    vars: &Arc<Variables>,
) -> CommandResult<Accumulator> {
    let mut spec = RawDocumentBuf::new();
    let key = <&bson::raw::CStr>::try_from(name)
        .map_err(|e| crate::error::CommandError::bad_value(e.to_string()))?;
    spec.append(key, RawBson::from(arg));
    // A window's output may be a dotted path, which `$group` forbids: the accumulator sees
    // the last part (its name only shows in errors the window's own checks rule out).
    let last = field.rsplit('.').next().unwrap_or(field);
    Accumulator::parse(last, RawBsonRef::Document(&spec), vars)
}

impl WindowFn {
    /// Compares strings under `collation` from now on.
    pub fn set_collation(&mut self, collation: Option<Arc<crate::query::Collation>>) {
        if let Func::Acc(acc) = &mut self.func {
            acc.set_collation(collation);
        }
    }
}
