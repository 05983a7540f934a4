//! A window function's `window: {documents: [lower, upper]}` or `{range: [lower, upper],
//! unit?}` (mongod's `WindowBounds`), and the documents of a partition each one covers.

use std::cmp::Ordering;
use std::sync::Arc;

use bson::{DateTime, RawBson, RawBsonRef, RawDocument};

use super::{failed, loc};
use crate::error::CommandResult;
use crate::query::compare::compare;
use crate::query::display::{self, type_name};
use crate::query::{Expression, Variables};

/// One end of a window.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Bound<T> {
    /// The partition's edge.
    Unbounded,
    /// The current document (its position, or its sort value).
    Current,
    /// An offset from the current document.
    At(T),
}

/// A time unit of a time-based range (mongod's `TimeUnit`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimeUnit {
    Year,
    Quarter,
    Month,
    Week,
    Day,
    Hour,
    Minute,
    Second,
    Millisecond,
}

impl TimeUnit {
    /// Parses a unit name, with mongod's error for an unknown one.
    pub fn parse(name: &str) -> CommandResult<TimeUnit> {
        Ok(match name {
            "year" => TimeUnit::Year,
            "quarter" => TimeUnit::Quarter,
            "month" => TimeUnit::Month,
            "week" => TimeUnit::Week,
            "day" => TimeUnit::Day,
            "hour" => TimeUnit::Hour,
            "minute" => TimeUnit::Minute,
            "second" => TimeUnit::Second,
            "millisecond" => TimeUnit::Millisecond,
            other => {
                return Err(failed(format!("unknown time unit value: {other}")));
            }
        })
    }

    /// Milliseconds of a fixed unit (`week` or smaller); `None` for calendar units.
    pub fn millis(self) -> Option<i64> {
        Some(match self {
            TimeUnit::Year | TimeUnit::Quarter | TimeUnit::Month => return None,
            TimeUnit::Week => 604_800_000,
            TimeUnit::Day => 86_400_000,
            TimeUnit::Hour => 3_600_000,
            TimeUnit::Minute => 60_000,
            TimeUnit::Second => 1000,
            TimeUnit::Millisecond => 1,
        })
    }

    /// `ms` plus `amount` units, in UTC (calendar units clamp to the month's last day, as
    /// mongod's `dateAdd`); `None` past the representable range.
    fn add(self, ms: i64, amount: i64) -> Option<i64> {
        if let Some(unit) = self.millis() {
            return ms.checked_add(amount.checked_mul(unit)?);
        }
        let months = match self {
            TimeUnit::Year => amount.checked_mul(12)?,
            TimeUnit::Quarter => amount.checked_mul(3)?,
            _ => amount,
        };
        let ts = jiff::Timestamp::from_millisecond(ms).ok()?;
        let civil = ts.to_zoned(jiff::tz::TimeZone::UTC).datetime();
        let span = jiff::Span::new().try_months(months).ok()?;
        let moved = civil.checked_add(span).ok()?;
        let back = moved.to_zoned(jiff::tz::TimeZone::UTC).ok()?;
        Some(back.timestamp().as_millisecond())
    }
}

/// A window's bounds.
#[derive(Clone, Debug, PartialEq)]
pub enum Bounds {
    /// `documents: [lower, upper]`: positions relative to the current document.
    Documents(Bound<i64>, Bound<i64>),
    /// `range: [lower, upper]`: sort values relative to the current one, in `unit`s for dates.
    Range {
        lower: Bound<f64>,
        upper: Bound<f64>,
        unit: Option<TimeUnit>,
    },
}

impl Bounds {
    /// The default window: the whole partition.
    pub const WHOLE: Bounds = Bounds::Documents(Bound::Unbounded, Bound::Unbounded);

    /// From the first to the current document.
    pub const TO_CURRENT: Bounds = Bounds::Documents(Bound::Unbounded, Bound::Current);

    /// Whether the window is the whole partition.
    pub fn is_whole(&self) -> bool {
        *self == Bounds::WHOLE
    }

    /// Parses a `window` argument; `sort` is the stage's `sortBy` as (path, ascending) pairs.
    pub fn parse(
        arg: RawBsonRef<'_>,
        sort: Option<&[(String, bool)]>,
        vars: &Arc<Variables>,
    ) -> CommandResult<Bounds> {
        let RawBsonRef::Document(spec) = arg else {
            return Err(failed("'window' field must be an object"));
        };
        let documents = spec.get("documents").ok().flatten();
        let range = spec.get("range").ok().flatten();
        let unit = spec.get("unit").ok().flatten();
        let count = spec.iter().count();
        if documents.is_some() && range.is_some() {
            return Err(failed(
                "Window bounds can specify either 'documents' or 'unit', not both.",
            ));
        }
        if range.is_none() && unit.is_some() {
            return Err(failed(
                "Window bounds can only specify 'unit' with range-based bounds.",
            ));
        }
        if let Some(documents) = documents {
            if count != 1 {
                return Err(failed(
                    "'window' field that specifies documents cannot have other fields",
                ));
            }
            let (lo, hi) = pair(documents)?;
            let int = |v: &RawBson| -> CommandResult<i64> {
                integral(v)
                    .ok_or_else(|| failed("Numeric document-based bounds must be an integer"))
            };
            let lower = bound(lo, vars, int)?;
            let upper = bound(hi, vars, int)?;
            check_forward(lower, upper, |a, b| a <= b, |v| v.to_string())?;
            let bounds = Bounds::Documents(lower, upper);
            if !bounds.is_whole() && sort.is_none() {
                return Err(loc(5_339_901, "Document-based bounds require a sortBy"));
            }
            return Ok(bounds);
        }
        let Some(range) = range else {
            if count != 0 {
                return Err(failed(
                    "'window' field can only contain 'documents' as the only argument or \
                     'range' with an optional 'unit' field",
                ));
            }
            return Ok(Bounds::WHOLE);
        };
        let (lo, hi) = pair(range)?;
        let (lower, upper, unit) = if let Some(unit) = unit {
            if count != 2 {
                return Err(failed(
                    "'window' field that specifies unit cannot have other fields besides 'range'",
                ));
            }
            let RawBsonRef::String(unit) = unit else {
                return Err(failed("'unit' must be a string"));
            };
            let int = |v: &RawBson| -> CommandResult<f64> {
                #[expect(clippy::cast_precision_loss, reason = "time offsets are small")]
                integral(v)
                    .map(|n| n as f64)
                    .ok_or_else(|| failed("With 'unit', range-based bounds must be an integer"))
            };
            let lower = bound(lo, vars, int)?;
            let upper = bound(hi, vars, int)?;
            check_forward(lower, upper, |a, b| a <= b, display::double)?;
            (lower, upper, Some(TimeUnit::parse(unit)?))
        } else {
            if count != 1 {
                return Err(failed(
                    "'window' field that specifies range cannot have other fields besides 'unit'",
                ));
            }
            let num = |v: &RawBson| -> CommandResult<f64> {
                crate::pipeline::accumulators::as_f64(v)
                    .ok_or_else(|| failed("Range-based bounds expression must be a number"))
            };
            let lower = bound(lo, vars, num)?;
            let upper = bound(hi, vars, num)?;
            check_forward(lower, upper, |a, b| a <= b, display::double)?;
            (lower, upper, None)
        };
        match sort {
            Some([(_, ascending)]) => {
                if !ascending {
                    return Err(loc(
                        8_947_401,
                        "Range-based bounds require an ascending sortBy",
                    ));
                }
            }
            _ => {
                return Err(loc(
                    5_339_902,
                    "Range-based bounds require sortBy a single field",
                ));
            }
        }
        Ok(Bounds::Range { lower, upper, unit })
    }

    /// The window `[first, last]` (inclusive positions) of the document at `i` in a partition
    /// whose sort keys (first sort field) are `keys`; `None` when it is empty.
    pub fn window(&self, i: usize, keys: &[RawBson]) -> CommandResult<Option<(usize, usize)>> {
        let n = keys.len();
        if n == 0 || i >= n {
            return Ok(None);
        }
        let last = n - 1;
        match self {
            Bounds::Documents(lower, upper) => {
                let at = |b: &Bound<i64>, unbounded: i64| -> i64 {
                    let pos = i64::try_from(i).unwrap_or(i64::MAX);
                    match b {
                        Bound::Unbounded => unbounded,
                        Bound::Current => pos,
                        Bound::At(k) => pos.saturating_add(*k),
                    }
                };
                let max = i64::try_from(last).unwrap_or(i64::MAX);
                let lo = at(lower, 0).max(0);
                let hi = at(upper, max).min(max);
                if lo > hi {
                    return Ok(None);
                }
                let (Ok(lo), Ok(hi)) = (usize::try_from(lo), usize::try_from(hi)) else {
                    return Ok(None);
                };
                Ok(Some((lo, hi)))
            }
            Bounds::Range { lower, upper, unit } => {
                let Some(base) = keys.get(i) else {
                    return Ok(None);
                };
                check_range_value(base, *unit)?;
                // "current" is the current document itself, not its sort value (mongod's
                // partition_iterator.cpp): ties on either side stay outside.
                let lo = match lower {
                    Bound::Unbounded => 0,
                    Bound::Current => i,
                    b @ Bound::At(_) => {
                        let Some(v) = offset(base, b, *unit) else {
                            return Ok(None);
                        };
                        keys.partition_point(|k| key_cmp(k, &v).is_lt())
                    }
                };
                let hi = match upper {
                    Bound::Unbounded => n,
                    Bound::Current => i + 1,
                    b @ Bound::At(_) => {
                        let Some(v) = offset(base, b, *unit) else {
                            return Ok(None);
                        };
                        keys.partition_point(|k| key_cmp(k, &v).is_le())
                    }
                };
                if lo >= hi {
                    return Ok(None);
                }
                Ok(Some((lo, hi - 1)))
            }
        }
    }

    /// Checks every sort value of a partition for a range window (mongod checks each document
    /// as it becomes the current one).
    pub fn check_keys(&self, keys: &[RawBson]) -> CommandResult<()> {
        if let Bounds::Range { unit, .. } = self {
            for k in keys {
                check_range_value(k, *unit)?;
            }
        }
        Ok(())
    }
}

/// Compares sort values in BSON order (the partition is sorted ascending on them).
fn key_cmp(a: &RawBson, b: &RawBson) -> Ordering {
    compare(a.as_raw_bson_ref(), b.as_raw_bson_ref())
}

/// A sort value `base` moved by bound `b` (`Current`: unchanged).
fn offset(base: &RawBson, b: &Bound<f64>, unit: Option<TimeUnit>) -> Option<RawBson> {
    let amount = match b {
        Bound::At(x) => *x,
        Bound::Current | Bound::Unbounded => 0.0,
    };
    match (base, unit) {
        (RawBson::DateTime(d), Some(unit)) => {
            #[expect(clippy::cast_possible_truncation, reason = "time bounds are integers")]
            let amount = amount as i64;
            let ms = unit.add(d.timestamp_millis(), amount)?;
            Some(RawBson::DateTime(DateTime::from_millis(ms)))
        }
        (v, None) => {
            if amount == 0.0 {
                return Some(v.clone());
            }
            let x = crate::pipeline::accumulators::as_f64(v)?;
            Some(RawBson::Double(x + amount))
        }
        _ => None,
    }
}

/// mongod's checks of the current document's sort value in a range window.
fn check_range_value(v: &RawBson, unit: Option<TimeUnit>) -> CommandResult<()> {
    let ty = if matches!(v, RawBson::Undefined) {
        "missing"
    } else {
        type_name(v.element_type())
    };
    if unit.is_some() {
        if !matches!(v, RawBson::DateTime(_)) {
            return Err(loc(
                5_429_513,
                format!("Invalid range: Expected the sortBy field to be a Date, but it was {ty}"),
            ));
        }
        return Ok(());
    }
    if matches!(v, RawBson::DateTime(_)) {
        return Err(loc(
            5_429_413,
            "Invalid range: For windows that involve date or time ranges, a unit must be provided.",
        ));
    }
    if !matches!(
        v,
        RawBson::Int32(_) | RawBson::Int64(_) | RawBson::Double(_) | RawBson::Decimal128(_)
    ) {
        return Err(loc(
            5_429_414,
            format!("Invalid range: Expected the sortBy field to be a number, but it was {ty}"),
        ));
    }
    Ok(())
}

/// The two elements of a bounds array.
fn pair(v: RawBsonRef<'_>) -> CommandResult<(RawBsonRef<'_>, RawBsonRef<'_>)> {
    if let RawBsonRef::Array(a) = v {
        let items: Vec<_> = a.into_iter().map_while(Result::ok).collect();
        if let [lo, hi] = items[..] {
            return Ok((lo, hi));
        }
    }
    Err(failed(format!(
        "Window bounds must be a 2-element array: {}",
        display::value(v)
    )))
}

/// One bound: `"unbounded"`, `"current"`, or a constant that `value` converts.
fn bound<T>(
    v: RawBsonRef<'_>,
    vars: &Arc<Variables>,
    value: impl Fn(&RawBson) -> CommandResult<T>,
) -> CommandResult<Bound<T>> {
    if let RawBsonRef::String(s) = v {
        return match s {
            "unbounded" => Ok(Bound::Unbounded),
            "current" => Ok(Bound::Current),
            _ => Err(failed(
                "Window bounds must be 'unbounded', 'current', or a number.",
            )),
        };
    }
    let constant =
        constant(v, vars)?.ok_or_else(|| failed("Window bounds expression must be a constant."))?;
    Ok(Bound::At(value(&constant)?))
}

/// The value of a constant expression (one that reads no document): evaluated against an
/// empty document; `None` when it reads a field.
pub(super) fn constant(v: RawBsonRef<'_>, vars: &Arc<Variables>) -> CommandResult<Option<RawBson>> {
    if reads_fields(v) {
        return Ok(None);
    }
    let expr = Expression::parse_in(v, vars)?;
    Ok(Some(
        expr.evaluate(
            RawDocument::from_bytes(&[5, 0, 0, 0, 0])
                .map_err(|e| crate::error::CommandError::internal(e.to_string()))?,
        )?
        .unwrap_or(RawBson::Null),
    ))
}

/// Whether an expression names a field path (`"$a"`) or `$$ROOT`/`$$CURRENT` anywhere.
fn reads_fields(v: RawBsonRef<'_>) -> bool {
    match v {
        RawBsonRef::String(s) => {
            s.starts_with('$')
                && (!s.starts_with("$$") || s.starts_with("$$ROOT") || s.starts_with("$$CURRENT"))
        }
        RawBsonRef::Document(d) => d
            .iter()
            .map_while(Result::ok)
            .any(|(k, v)| k.as_str() != "$literal" && reads_fields(v)),
        RawBsonRef::Array(a) => a.into_iter().map_while(Result::ok).any(reads_fields),
        _ => false,
    }
}

/// An integral number as `i64` (doubles and decimals with no fraction too).
fn integral(v: &RawBson) -> Option<i64> {
    match v {
        RawBson::Int32(n) => Some(i64::from(*n)),
        RawBson::Int64(n) => Some(*n),
        other => {
            let x = crate::pipeline::accumulators::as_f64(other)?;
            #[expect(
                clippy::cast_possible_truncation,
                reason = "checked integral and in range"
            )]
            (x.fract() == 0.0 && x.abs() < 9.0e15).then_some(x as i64)
        }
    }
}

/// mongod's 5339900 when a numeric lower bound exceeds the upper (`current` counts as 0).
fn check_forward<T: Copy + Default>(
    lower: Bound<T>,
    upper: Bound<T>,
    le: impl Fn(T, T) -> bool,
    show: impl Fn(T) -> String,
) -> CommandResult<()> {
    let num = |b: Bound<T>| match b {
        Bound::Current => Some(T::default()),
        Bound::At(x) => Some(x),
        Bound::Unbounded => None,
    };
    if let (Some(a), Some(b)) = (num(lower), num(upper))
        && !le(a, b)
    {
        return Err(loc(
            5_339_900,
            format!(
                "Lower bound must not exceed upper bound: [{}, {}]",
                show(a),
                show(b)
            ),
        ));
    }
    Ok(())
}
