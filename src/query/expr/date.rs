//! Date operators with mongod's semantics (timelib's calendar arithmetic, as used by
//! `date_time_support.cpp`): the parts `$year $month $dayOfMonth $hour $minute $second
//! $millisecond $dayOfYear $dayOfWeek $week $isoWeek $isoWeekYear $isoDayOfWeek` (each also as
//! `{date, timezone}`), `$dateToString $dateToParts $dateFromParts $dateAdd $dateSubtract
//! $dateDiff $dateTrunc`.
//!
//! Calendar arithmetic (in `calendar`) is done on `i64` days and seconds (proleptic Gregorian, any BSON
//! datetime, so years far outside 1..9999 work without overflow); a time zone only gives the
//! UTC offset at an instant. Zones are mongod's: `"UTC"`, an IANA name of the bundled database
//! (exact case), or an offset `±HH`, `±HHMM`, `±HH:MM`; anything else is 40485. A named zone's
//! offset for an instant outside the database's range (years -9999..9999) is the offset at the
//! nearest end of that range.

use bson::{RawBson, RawBsonRef, RawDocumentBuf, cstr};

use super::{
    CommandError, Env, Node, Operator, Scope, Value, display, eval, loc, nullish, object_fields,
    parse, r, tname,
};
use crate::error::ErrorCode;

mod calendar;
mod from_string;
#[cfg(test)]
mod tests;

use calendar::{
    ISO_FORMAT, Local, Tz, Unit, add_months, date_add, date_diff, date_trunc, days_from_civil,
    days_from_iso, format_date, from_local, iso_dow, iso_week, parse_day_of_week, validate_format,
};

// ---- operators ----

#[expect(clippy::cast_possible_truncation, reason = "mongod's parts are C ints")]
fn int(v: i64) -> RawBson {
    RawBson::Int32(v as i32)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Part {
    Year,
    Month,
    DayOfMonth,
    Hour,
    Minute,
    Second,
    Millisecond,
    DayOfYear,
    DayOfWeek,
    Week,
    IsoWeek,
    IsoWeekYear,
    IsoDayOfWeek,
}

impl Part {
    fn of(name: &str) -> Option<Part> {
        Some(match name {
            "year" => Part::Year,
            "month" => Part::Month,
            "dayOfMonth" => Part::DayOfMonth,
            "hour" => Part::Hour,
            "minute" => Part::Minute,
            "second" => Part::Second,
            "millisecond" => Part::Millisecond,
            "dayOfYear" => Part::DayOfYear,
            "dayOfWeek" => Part::DayOfWeek,
            "week" => Part::Week,
            "isoWeek" => Part::IsoWeek,
            "isoWeekYear" => Part::IsoWeekYear,
            "isoDayOfWeek" => Part::IsoDayOfWeek,
            _ => return None,
        })
    }

    fn name(self) -> &'static str {
        match self {
            Part::Year => "$year",
            Part::Month => "$month",
            Part::DayOfMonth => "$dayOfMonth",
            Part::Hour => "$hour",
            Part::Minute => "$minute",
            Part::Second => "$second",
            Part::Millisecond => "$millisecond",
            Part::DayOfYear => "$dayOfYear",
            Part::DayOfWeek => "$dayOfWeek",
            Part::Week => "$week",
            Part::IsoWeek => "$isoWeek",
            Part::IsoWeekYear => "$isoWeekYear",
            Part::IsoDayOfWeek => "$isoDayOfWeek",
        }
    }

    fn value(self, ms: i64, tz: &Tz) -> RawBson {
        let t = Local::of(ms, tz);
        match self {
            Part::Year => int(t.year),
            Part::Month => int(t.month),
            Part::DayOfMonth => int(t.day),
            Part::Hour => int(t.hour),
            Part::Minute => int(t.minute),
            Part::Second => int(t.second),
            Part::Millisecond => int(t.millis),
            Part::DayOfYear => int(t.day_of_year()),
            Part::DayOfWeek => int(t.day_of_week()),
            Part::Week => int(t.week()),
            Part::IsoWeek => int(iso_week(t.days).1),
            // mongod's `TimeZone::isoYear` is a `long long`.
            Part::IsoWeekYear => RawBson::Int64(iso_week(t.days).0),
            Part::IsoDayOfWeek => int(iso_dow(t.days)),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// Slots: date, timezone.
    Part(Part),
    /// Slots: date, format, timezone, onNull.
    ToString,
    /// Slots: date, timezone, iso8601.
    ToParts,
    /// Slots: year, month, day, hour, minute, second, millisecond, isoWeekYear, isoWeek,
    /// isoDayOfWeek, timezone.
    FromParts,
    /// Slots: startDate, unit, amount, timezone.
    Add,
    Subtract,
    /// Slots: startDate, endDate, unit, timezone, startOfWeek.
    Diff,
    /// Slots: date, unit, binSize, timezone, startOfWeek.
    Trunc,
    /// Slots: dateString, format, timezone, onNull, onError.
    FromString,
}

const TO_STRING: &[&str] = &["date", "format", "timezone", "onNull"];
const TO_PARTS: &[&str] = &["date", "timezone", "iso8601"];
const FROM_PARTS: &[&str] = &[
    "year",
    "month",
    "day",
    "hour",
    "minute",
    "second",
    "millisecond",
    "isoWeekYear",
    "isoWeek",
    "isoDayOfWeek",
    "timezone",
];
const ARITH: &[&str] = &["startDate", "unit", "amount", "timezone"];
const DIFF: &[&str] = &["startDate", "endDate", "unit", "timezone", "startOfWeek"];
const FROM_STRING: &[&str] = &["dateString", "format", "timezone", "onNull", "onError"];
const TRUNC: &[&str] = &["date", "unit", "binSize", "timezone", "startOfWeek"];

/// A parsed date operator: its kind and its arguments by slot (`None`: not given).
#[derive(Debug)]
struct DateExpr {
    kind: Kind,
    slots: Vec<Option<Node>>,
}

pub(super) fn parse_op(
    name: &str,
    v: RawBsonRef<'_>,
    sc: &mut Scope<'_>,
) -> Option<Result<Node, CommandError>> {
    if let Some(part) = Part::of(name) {
        return Some(parse_part(name, part, v, sc));
    }
    let result = match name {
        "dateToString" => parse_named(v, sc, Kind::ToString, TO_STRING),
        "dateToParts" => parse_named(v, sc, Kind::ToParts, TO_PARTS),
        "dateFromParts" => parse_named(v, sc, Kind::FromParts, FROM_PARTS),
        "dateAdd" => parse_named(v, sc, Kind::Add, ARITH),
        "dateSubtract" => parse_named(v, sc, Kind::Subtract, ARITH),
        "dateDiff" => parse_named(v, sc, Kind::Diff, DIFF),
        "dateTrunc" => parse_named(v, sc, Kind::Trunc, TRUNC),
        "dateFromString" => parse_named(v, sc, Kind::FromString, FROM_STRING),
        _ => return None,
    };
    Some(result.map(Node::op))
}

/// `{$year: date}`, `{$year: [date]}`, `{$year: {date, timezone}}`, as mongod's
/// `DateExpressionAcceptingTimeZone::parse`.
fn parse_part(
    name: &str,
    part: Part,
    v: RawBsonRef<'_>,
    sc: &mut Scope<'_>,
) -> Result<Node, CommandError> {
    let kind = Kind::Part(part);
    let date = match v {
        RawBsonRef::Document(d) => {
            let fields = object_fields(d)?;
            if fields.first().is_some_and(|(k, _)| k.starts_with('$')) {
                parse(v, sc)?
            } else {
                let (mut date, mut tz) = (None, None);
                for (k, sub) in fields {
                    match k {
                        "date" => date = Some(parse(sub, sc)?),
                        "timezone" => tz = Some(parse(sub, sc)?),
                        other => {
                            return Err(loc(
                                40535,
                                format!("unrecognized option to ${name}: \"{other}\""),
                            ));
                        }
                    }
                }
                let Some(date) = date else {
                    return Err(loc(
                        40539,
                        format!(
                            "missing 'date' argument to ${name}, provided: ${name}: {}",
                            display::value(v)
                        ),
                    ));
                };
                return Ok(Node::op(DateExpr {
                    kind,
                    slots: vec![Some(date), tz],
                }));
            }
        }
        RawBsonRef::Array(a) => {
            let items: Vec<RawBsonRef<'_>> = a
                .into_iter()
                .collect::<Result<_, _>>()
                .map_err(|e| super::invalid_bson(&e))?;
            if items.len() != 1 {
                return Err(loc(
                    40536,
                    format!(
                        "${name} accepts exactly one argument if given an array, but was given {}",
                        items.len()
                    ),
                ));
            }
            match items.first() {
                Some(item) => parse(*item, sc)?,
                None => Node::Missing,
            }
        }
        other => parse(other, sc)?,
    };
    Ok(Node::op(DateExpr {
        kind,
        slots: vec![Some(date), None],
    }))
}

/// The named-argument operators: mongod's per-operator parse errors.
fn parse_named(
    v: RawBsonRef<'_>,
    sc: &mut Scope<'_>,
    kind: Kind,
    names: &[&str],
) -> Result<DateExpr, CommandError> {
    let RawBsonRef::Document(d) = v else {
        return Err(match kind {
            Kind::ToString => loc(
                18629,
                "$dateToString only supports an object as its argument",
            ),
            Kind::ToParts => loc(
                40524,
                "$dateToParts only supports an object as its argument",
            ),
            Kind::FromParts => loc(
                40519,
                "$dateFromParts only supports an object as its argument",
            ),
            Kind::FromString => loc(
                40540,
                format!(
                    "$dateFromString only supports an object as an argument, found: {}",
                    tname(Some(v))
                ),
            ),
            Kind::Add => loc(5_166_400, "$dateAdd expects an object as its argument"),
            Kind::Subtract => loc(5_166_400, "$dateSubtract expects an object as its argument"),
            Kind::Diff => loc(
                5_166_301,
                "$dateDiff only supports an object as its argument",
            ),
            Kind::Trunc | Kind::Part(_) => loc(
                5_439_007,
                "$dateTrunc only supports an object as its argument",
            ),
        });
    };
    let mut slots: Vec<Option<Node>> = names.iter().map(|_| None).collect();
    for (k, sub) in object_fields(d)? {
        let Some(slot) = names
            .iter()
            .position(|n| *n == k)
            .and_then(|i| slots.get_mut(i))
        else {
            return Err(unknown_argument(kind, k));
        };
        *slot = Some(parse(sub, sc)?);
    }
    let has = |i: usize| slots.get(i).is_some_and(Option::is_some);
    match kind {
        Kind::ToString if !has(0) => {
            return Err(loc(18628, "Missing 'date' parameter to $dateToString"));
        }
        Kind::FromString if !has(0) => {
            return Err(loc(
                40542,
                "Missing 'dateString' parameter to $dateFromString",
            ));
        }
        Kind::ToParts if !has(0) => {
            return Err(loc(40522, "Missing 'date' parameter to $dateToParts"));
        }
        Kind::FromParts => {
            let (year, iso_year) = (has(0), has(7));
            if !year && !iso_year {
                return Err(loc(
                    40516,
                    "$dateFromParts requires either 'year' or 'isoWeekYear' to be present",
                ));
            }
            if year && (iso_year || has(8) || has(9)) {
                return Err(loc(
                    40489,
                    "$dateFromParts does not allow mixing natural dates with ISO dates",
                ));
            }
            if iso_year && (has(1) || has(2)) {
                return Err(loc(
                    40525,
                    "$dateFromParts does not allow mixing ISO dates with natural dates",
                ));
            }
        }
        Kind::Add | Kind::Subtract if !(has(0) && has(1) && has(2)) => {
            return Err(loc(
                5_166_402,
                format!(
                    "{} requires startDate, unit, and amount to be present",
                    op_name(kind)
                ),
            ));
        }
        Kind::Diff => {
            for (i, code, field) in [
                (0, 5_166_303, "startDate"),
                (1, 5_166_304, "endDate"),
                (2, 5_166_305, "unit"),
            ] {
                if !has(i) {
                    return Err(loc(
                        code,
                        format!("Missing '{field}' parameter to $dateDiff"),
                    ));
                }
            }
        }
        Kind::Trunc => {
            if !has(0) {
                return Err(loc(5_439_009, "Missing 'date' parameter to $dateTrunc"));
            }
            if !has(1) {
                return Err(loc(5_439_010, "Missing 'unit' parameter to $dateTrunc"));
            }
        }
        _ => {}
    }
    Ok(DateExpr { kind, slots })
}

fn op_name(kind: Kind) -> &'static str {
    match kind {
        Kind::ToString => "$dateToString",
        Kind::ToParts => "$dateToParts",
        Kind::FromParts => "$dateFromParts",
        Kind::Add => "$dateAdd",
        Kind::Subtract => "$dateSubtract",
        Kind::Diff => "$dateDiff",
        Kind::FromString => "$dateFromString",
        Kind::Trunc | Kind::Part(_) => "$dateTrunc",
    }
}

fn unknown_argument(kind: Kind, field: &str) -> CommandError {
    let name = op_name(kind);
    match kind {
        Kind::ToString => loc(18534, format!("Unrecognized argument to {name}: {field}")),
        Kind::ToParts => loc(40520, format!("Unrecognized argument to {name}: {field}")),
        Kind::FromParts => loc(40518, format!("Unrecognized argument to {name}: {field}")),
        Kind::FromString => loc(40541, format!("Unrecognized argument to {name}: {field}")),
        Kind::Add | Kind::Subtract => loc(
            5_166_401,
            format!(
                "Unrecognized argument to {name}: {field}. Expected arguments are startDate, \
                 unit, amount, and optionally timezone."
            ),
        ),
        Kind::Diff => loc(
            5_166_302,
            format!("Unrecognized argument to {name}: {field}"),
        ),
        Kind::Trunc | Kind::Part(_) => loc(
            5_439_008,
            format!(
                "Unrecognized argument to {name}: {field}. Expected arguments are date, unit, \
                 and optionally, binSize, timezone, startOfWeek"
            ),
        ),
    }
}

/// mongod's `Value::coercibleToDate`/`coerceToDate`: dates, timestamps (their seconds) and
/// ObjectIds (their creation second).
fn as_date(v: RawBsonRef<'_>) -> Option<i64> {
    match v {
        RawBsonRef::DateTime(d) => Some(d.timestamp_millis()),
        RawBsonRef::Timestamp(ts) => Some(i64::from(ts.time) * 1000),
        RawBsonRef::ObjectId(oid) => {
            let b = oid.bytes();
            let secs = u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
            Some(i64::from(secs) * 1000)
        }
        _ => None,
    }
}

/// `coerceToDate`, with mongod's 16006 for other types.
fn coerce_date(v: RawBsonRef<'_>) -> Result<i64, CommandError> {
    as_date(v).ok_or_else(|| {
        loc(
            16006,
            format!("can't convert from BSON type {} to Date", tname(Some(v))),
        )
    })
}

/// A date argument of `$dateDiff`/`$dateTrunc` (5166307-style errors).
fn convert_date(v: RawBsonRef<'_>, code: i32, op: &str, param: &str) -> Result<i64, CommandError> {
    as_date(v).ok_or_else(|| {
        loc(
            code,
            format!(
                "{op} requires '{param}' to be a date, but got {}",
                tname(Some(v))
            ),
        )
    })
}

/// mongod's `makeTimeZone`: UTC when not given, `None` when null or missing.
fn make_tz(node: Option<&Node>, env: Env<'_>) -> Result<Option<Tz>, CommandError> {
    let Some(node) = node else {
        return Ok(Some(Tz::Utc));
    };
    let v = eval(node, env)?;
    match r(&v) {
        v if nullish(v) => Ok(None),
        Some(RawBsonRef::String(s)) => Tz::named(s).map(Some),
        other => Err(loc(
            40517,
            format!("timezone must evaluate to a string, found {}", tname(other)),
        )),
    }
}

/// An error with mongod's `addContextToAssertionException` prefix.
fn with_context(e: &CommandError, context: &str) -> CommandError {
    CommandError::new(e.code, format!("{context} :: caused by :: {}", e.errmsg))
}

fn parse_unit(v: RawBsonRef<'_>, op: &str) -> Result<Unit, CommandError> {
    let RawBsonRef::String(s) = v else {
        return Err(loc(
            5_439_013,
            format!(
                "{op} requires 'unit' to be a string, but got {}",
                tname(Some(v))
            ),
        ));
    };
    Unit::parse(s).ok_or_else(|| {
        CommandError::new(
            ErrorCode::FailedToParse,
            format!("{op} parameter 'unit' value parsing failed :: caused by :: unknown time unit value: {s}"),
        )
    })
}

fn parse_start_of_week(v: RawBsonRef<'_>, op: &str) -> Result<i64, CommandError> {
    let RawBsonRef::String(s) = v else {
        return Err(loc(
            5_439_015,
            format!(
                "{op} requires 'startOfWeek' to be a string, but got {}",
                tname(Some(v))
            ),
        ));
    };
    parse_day_of_week(s).ok_or_else(|| {
        loc(
            5_439_016,
            format!(
                "{op} parameter 'startOfWeek' value cannot be recognized as a day of a week: {s}"
            ),
        )
    })
}

/// mongod's `Value::integral64Bit` and `coerceToLong`.
fn integral64(v: RawBsonRef<'_>) -> Option<i64> {
    match v {
        RawBsonRef::Int32(i) => Some(i64::from(i)),
        RawBsonRef::Int64(i) => Some(i),
        RawBsonRef::Double(_) | RawBsonRef::Decimal128(_) => {
            let d = crate::query::compare::number_as_f64(v)?;
            #[expect(
                clippy::cast_possible_truncation,
                reason = "checked to be exact and in range below"
            )]
            let i = d as i64;
            #[expect(clippy::cast_precision_loss, reason = "exactness check")]
            let exact = d.fract() == 0.0 && d >= i64::MIN as f64 && d < i64::MAX as f64;
            exact.then_some(i)
        }
        _ => None,
    }
}

impl DateExpr {
    fn slot(&self, i: usize) -> Option<&Node> {
        self.slots.get(i).and_then(Option::as_ref)
    }

    fn arg(&self, i: usize, env: Env<'_>) -> Result<Value, CommandError> {
        self.slot(i).map_or(Ok(None), |n| eval(n, env))
    }

    fn part(&self, part: Part, env: Env<'_>) -> Result<Value, CommandError> {
        let date = self.arg(0, env)?;
        let Some(date) = r(&date).filter(|v| !nullish(Some(*v))) else {
            return Ok(Some(RawBson::Null));
        };
        let ms = coerce_date(date)?;
        // mongod 7.0's `DateExpressionAcceptingTimeZone::evaluate`: its own 40533 for a
        // timezone that is not a string.
        let tz = match self.slot(1) {
            None => Tz::Utc,
            Some(node) => match r(&eval(node, env)?) {
                v if nullish(v) => return Ok(Some(RawBson::Null)),
                Some(RawBsonRef::String(s)) => Tz::named(s)?,
                other => {
                    return Err(loc(
                        40533,
                        format!(
                            "{} requires a string for the timezone argument, but was given a {} \
                             ({})",
                            part.name(),
                            tname(other),
                            other.map_or_else(String::new, display::value)
                        ),
                    ));
                }
            },
        };
        Ok(Some(part.value(ms, &tz)))
    }

    fn to_string(&self, env: Env<'_>) -> Result<Value, CommandError> {
        let date = self.arg(0, env)?;
        let format = self.arg(1, env)?;
        match r(&format) {
            None | Some(RawBsonRef::Null | RawBsonRef::Undefined) => {}
            Some(RawBsonRef::String(s)) => validate_format(s)?,
            Some(other) => {
                return Err(loc(
                    18533,
                    format!(
                        "$dateToString requires that 'format' be a string, found: {} with value {}",
                        tname(Some(other)),
                        display::value(other)
                    ),
                ));
            }
        }
        let tz = make_tz(self.slot(2), env)?;
        if nullish(r(&date)) {
            return match self.slot(3) {
                Some(on_null) => eval(on_null, env),
                None => Ok(Some(RawBson::Null)),
            };
        }
        let Some(tz) = tz else {
            return Ok(Some(RawBson::Null));
        };
        let format = match (self.slot(1), r(&format)) {
            (None, _) => ISO_FORMAT,
            (Some(_), Some(RawBsonRef::String(s))) => s,
            (Some(_), _) => return Ok(Some(RawBson::Null)),
        };
        let ms = coerce_date(r(&date).unwrap_or(RawBsonRef::Null))?;
        Ok(Some(RawBson::String(format_date(format, ms, &tz)?)))
    }

    fn to_parts(&self, env: Env<'_>) -> Result<Value, CommandError> {
        let date = self.arg(0, env)?;
        let Some(tz) = make_tz(self.slot(1), env)? else {
            return Ok(Some(RawBson::Null));
        };
        let iso = match self.slot(2) {
            None => false,
            Some(n) => match r(&eval(n, env)?) {
                v if nullish(v) => return Ok(Some(RawBson::Null)),
                Some(RawBsonRef::Boolean(b)) => b,
                other => {
                    return Err(loc(
                        40521,
                        format!("iso8601 must evaluate to a bool, found {}", tname(other)),
                    ));
                }
            },
        };
        let Some(date) = r(&date).filter(|v| !nullish(Some(*v))) else {
            return Ok(Some(RawBson::Null));
        };
        let ms = coerce_date(date)?;
        let t = Local::of(ms, &tz);
        let mut out = RawDocumentBuf::new();
        if iso {
            let (y, w) = iso_week(t.days);
            out.append(cstr!("isoWeekYear"), int(y));
            out.append(cstr!("isoWeek"), int(w));
            out.append(cstr!("isoDayOfWeek"), int(iso_dow(t.days)));
        } else {
            out.append(cstr!("year"), int(t.year));
            out.append(cstr!("month"), int(t.month));
            out.append(cstr!("day"), int(t.day));
        }
        out.append(cstr!("hour"), int(t.hour));
        out.append(cstr!("minute"), int(t.minute));
        out.append(cstr!("second"), int(t.second));
        out.append(cstr!("millisecond"), int(t.millis));
        Ok(Some(RawBson::Document(out)))
    }

    /// mongod's `evaluateNumberWithDefault[AndBounds]`: `Ok(None)` when nullish.
    fn number(
        &self,
        i: usize,
        env: Env<'_>,
        default: i64,
        bounded: bool,
    ) -> Result<Option<i64>, CommandError> {
        let Some(node) = self.slot(i) else {
            return Ok(Some(default));
        };
        let field = FROM_PARTS.get(i).copied().unwrap_or("?");
        let v = eval(node, env)?;
        let v = match r(&v) {
            v if nullish(v) => return Ok(None),
            Some(v) => v,
            None => return Ok(None),
        };
        let Some(n) = integral64(v) else {
            return Err(loc(
                40515,
                format!(
                    "'{field}' must evaluate to an integer, found {} with value {}",
                    tname(Some(v)),
                    display::value(v)
                ),
            ));
        };
        if bounded && !(i64::from(i16::MIN)..=i64::from(i16::MAX)).contains(&n) {
            return Err(loc(
                31034,
                format!(
                    "'{field}' must evaluate to a value in the range [-32768, 32767]; value {n} \
                     is not in range"
                ),
            ));
        }
        Ok(Some(n))
    }

    fn build_from_parts(&self, env: Env<'_>) -> Result<Value, CommandError> {
        let null = Ok(Some(RawBson::Null));
        let (Some(hour), Some(minute), Some(second), Some(millis)) = (
            self.number(3, env, 0, true)?,
            self.number(4, env, 0, true)?,
            self.number(5, env, 0, false)?,
            self.number(6, env, 0, false)?,
        ) else {
            return null;
        };
        let Some(tz) = make_tz(self.slot(10), env)? else {
            return null;
        };
        let days = if self.slot(0).is_some() {
            let (Some(year), Some(month), Some(day)) = (
                self.number(0, env, 1970, false)?,
                self.number(1, env, 1, true)?,
                self.number(2, env, 1, true)?,
            ) else {
                return null;
            };
            if !(1..=9999).contains(&year) {
                return Err(loc(
                    40523,
                    format!(
                        "'year' must evaluate to an integer in the range 1 to 9999, found {year}"
                    ),
                ));
            }
            let (y, m) = add_months(year, 1, month - 1);
            days_from_civil(y, m, 1) + (day - 1)
        } else {
            let (Some(year), Some(week), Some(dow)) = (
                self.number(7, env, 1970, false)?,
                self.number(8, env, 1, true)?,
                self.number(9, env, 1, true)?,
            ) else {
                return null;
            };
            if !(1..=9999).contains(&year) {
                return Err(loc(
                    31095,
                    format!(
                        "'isoWeekYear' must evaluate to an integer in the range 1 to 9999, found \
                         {year}"
                    ),
                ));
            }
            days_from_iso(year, week, dow)
        };
        // Seconds and milliseconds are unbounded: mongod holds the milliseconds as
        // microseconds and the result's seconds as milliseconds, both checked for overflow.
        let total_ms = millis
            .checked_mul(1000)
            .and_then(|_| second.checked_mul(1000))
            .and_then(|s| s.checked_add(millis));
        let Some(total_ms) = total_ms else {
            return Err(add_overflow_parts());
        };
        let (extra_secs, ms) = (total_ms.div_euclid(1000), total_ms.rem_euclid(1000));
        from_local(&tz, days, hour, minute, extra_secs, ms)
            .map(|ms| Some(RawBson::DateTime(bson::DateTime::from_millis(ms))))
            .ok_or_else(add_overflow_parts)
    }

    /// Argument `i` when given and not nullish (`None`: the operator answers null).
    fn present(&self, i: usize, env: Env<'_>) -> Result<Option<RawBson>, CommandError> {
        Ok(self
            .arg(i, env)?
            .filter(|v| !nullish(Some(v.as_raw_bson_ref()))))
    }

    /// `$dateAdd`/`$dateSubtract` in mongod 7.0's order: any nullish argument (or zone) is
    /// null, then the zone, the start date, the unit and the amount are checked.
    fn arithmetic(&self, env: Env<'_>) -> Result<Value, CommandError> {
        let null = Ok(Some(RawBson::Null));
        let name = op_name(self.kind);
        let (Some(start), Some(unit), Some(amount)) = (
            self.present(0, env)?,
            self.present(1, env)?,
            self.present(2, env)?,
        ) else {
            return null;
        };
        let Some(tz) = make_tz(self.slot(3), env)? else {
            return null;
        };
        let Some(ms) = as_date(start.as_raw_bson_ref()) else {
            return Err(loc(
                5_166_403,
                format!("{name} requires startDate to be convertible to a date"),
            ));
        };
        let unit = parse_unit(unit.as_raw_bson_ref(), name)?;
        let Some(mut amount) = integral64(amount.as_raw_bson_ref()) else {
            return Err(loc(
                5_166_405,
                format!("{name} expects integer amount of time units"),
            ));
        };
        if self.kind == Kind::Subtract {
            amount = amount.checked_neg().ok_or_else(|| {
                loc(
                    6_045_000,
                    format!("invalid $dateSubtract 'amount' parameter value: {amount}"),
                )
            })?;
        }
        let out = date_add(ms, unit, amount, &tz)?;
        Ok(Some(RawBson::DateTime(bson::DateTime::from_millis(out))))
    }

    /// `$dateDiff` in mongod 7.0's order.
    fn diff(&self, env: Env<'_>) -> Result<Value, CommandError> {
        let null = Ok(Some(RawBson::Null));
        let (Some(start), Some(end), Some(unit)) = (
            self.present(0, env)?,
            self.present(1, env)?,
            self.present(2, env)?,
        ) else {
            return null;
        };
        let start_of_week = self.start_of_week(4, &unit, env)?;
        if matches!(start_of_week, WeekStart::Null) {
            return null;
        }
        let tz = make_tz(self.slot(3), env)
            .map_err(|e| with_context(&e, "$dateDiff parameter 'timezone' value parsing failed"))?;
        let Some(tz) = tz else {
            return null;
        };
        let start = convert_date(start.as_raw_bson_ref(), 5_166_307, "$dateDiff", "startDate")?;
        let end = convert_date(end.as_raw_bson_ref(), 5_166_307, "$dateDiff", "endDate")?;
        let unit = parse_unit(unit.as_raw_bson_ref(), "$dateDiff")?;
        let start_of_week = parse_week_start(start_of_week, "$dateDiff")?;
        Ok(Some(RawBson::Int64(date_diff(
            start,
            end,
            unit,
            &tz,
            start_of_week,
        )?)))
    }

    /// The `startOfWeek` argument, read (mongod's `isTimeUnitWeek`) only when the unit is the
    /// string `"week"`.
    fn start_of_week(
        &self,
        i: usize,
        unit: &RawBson,
        env: Env<'_>,
    ) -> Result<WeekStart, CommandError> {
        match self.slot(i) {
            Some(node) if matches!(unit, RawBson::String(s) if s == "week") => {
                match eval(node, env)? {
                    Some(v) if !nullish(Some(v.as_raw_bson_ref())) => Ok(WeekStart::Given(v)),
                    _ => Ok(WeekStart::Null),
                }
            }
            _ => Ok(WeekStart::Default),
        }
    }

    /// `$dateTrunc` in mongod 7.0's order.
    fn trunc(&self, env: Env<'_>) -> Result<Value, CommandError> {
        let null = Ok(Some(RawBson::Null));
        let (Some(date), Some(unit)) = (self.present(0, env)?, self.present(1, env)?) else {
            return null;
        };
        let bin_size = match self.slot(2) {
            None => None,
            Some(_) => match self.present(2, env)? {
                None => return null,
                some => some,
            },
        };
        let start_of_week = self.start_of_week(4, &unit, env)?;
        if matches!(start_of_week, WeekStart::Null) {
            return null;
        }
        let tz = make_tz(self.slot(3), env).map_err(|e| {
            with_context(&e, "$dateTrunc parameter 'timezone' value parsing failed")
        })?;
        let Some(tz) = tz else {
            return null;
        };
        let ms = convert_date(date.as_raw_bson_ref(), 5_439_012, "$dateTrunc", "date")?;
        let unit = parse_unit(unit.as_raw_bson_ref(), "$dateTrunc")?;
        let bin_size = match bin_size {
            None => 1,
            Some(v) => trunc_bin_size(v.as_raw_bson_ref())?,
        };
        let start_of_week = parse_week_start(start_of_week, "$dateTrunc")?;
        let out = date_trunc(ms, unit, bin_size, &tz, start_of_week)?;
        Ok(Some(RawBson::DateTime(bson::DateTime::from_millis(out))))
    }
}

impl DateExpr {
    /// `$dateFromString` in mongod 7.0's order; `onError` answers for its `ConversionFailure`s.
    fn parse_string(&self, env: Env<'_>) -> Result<Value, CommandError> {
        let string = self.arg(0, env)?;
        let format = match self.slot(1) {
            None => None,
            Some(node) => {
                let v = eval(node, env)?;
                match r(&v) {
                    None | Some(RawBsonRef::Null | RawBsonRef::Undefined) => {}
                    Some(RawBsonRef::String(f)) => validate_from_format(f)?,
                    Some(other) => {
                        return Err(loc(
                            40684,
                            format!(
                                "$dateFromString requires that 'format' be a string, found: {} \
                                 with value {}",
                                tname(Some(other)),
                                display::value(other)
                            ),
                        ));
                    }
                }
                Some(v)
            }
        };
        let tz = make_tz(self.slot(2), env)?;
        if nullish(r(&string)) {
            return match self.slot(3) {
                Some(on_null) => eval(on_null, env),
                None => Ok(Some(RawBson::Null)),
            };
        }
        match convert_string(r(&string), format.as_ref(), tz.as_ref()) {
            Err(e) if e.code == ErrorCode::ConversionFailure => match self.slot(4) {
                Some(on_error) => eval(on_error, env),
                None => Err(e),
            },
            other => other,
        }
    }
}

/// mongod's `checkFormatString` for `$dateFromString` (no `%w` nor `%U`).
fn validate_from_format(format: &str) -> Result<(), CommandError> {
    validate_format(format)?;
    let mut chars = format.chars();
    while let Some(c) = chars.next() {
        if c == '%'
            && let Some(w @ ('w' | 'U')) = chars.next()
        {
            return Err(loc(
                18536,
                format!("Invalid format character '%{w}' in format string"),
            ));
        }
    }
    Ok(())
}

fn conversion(msg: impl Into<String>) -> CommandError {
    CommandError::new(ErrorCode::ConversionFailure, msg)
}

/// The conversion `$dateFromString` guards with `onError`.
fn convert_string(
    string: Option<RawBsonRef<'_>>,
    format: Option<&Value>,
    tz: Option<&Tz>,
) -> Result<Value, CommandError> {
    let s = match string {
        Some(RawBsonRef::String(s)) => s,
        other => {
            return Err(conversion(format!(
                "$dateFromString requires that 'dateString' be a string, found: {} with value {}",
                tname(other),
                other.map_or_else(String::new, display::value)
            )));
        }
    };
    let Some(tz) = tz else {
        return Ok(Some(RawBson::Null));
    };
    let outcome = match format {
        Some(f) => match f.as_ref().map(RawBson::as_raw_bson_ref) {
            Some(RawBsonRef::String(f)) => from_string::with_format(s, f),
            _ => return Ok(Some(RawBson::Null)),
        },
        None => from_string::free(s),
    };
    let p = match outcome {
        from_string::Outcome::Date(p) => p,
        from_string::Outcome::Failed(msg) => return Err(conversion(msg)),
        from_string::Outcome::Unsupported => {
            if format.is_none() && from_string::certainly_invalid(s) {
                return Err(conversion(format!("Error parsing date string '{s}'")));
            }
            return Err(super::super::not_implemented(&format!(
                "$dateFromString of '{s}' (a form of timelib's reading Ebb does not know)"
            )));
        }
    };
    // mongod's `TimeZone::isUtcZone`: no zone, or an offset of zero.
    let utc = matches!(tz, Tz::Utc | Tz::Fixed(0));
    match &p.zone {
        Some(from_string::Zone::Offset(_)) if !utc => {
            return Err(conversion(
                "you cannot pass in a date/time string with GMT offset together with a timezone \
                 argument",
            ));
        }
        Some(from_string::Zone::Abbr { abbr, .. }) if !utc => {
            return Err(conversion(format!(
                "you cannot pass in a date/time string with time zone information ('{abbr}') \
                 together with a timezone argument"
            )));
        }
        _ => {}
    }
    parsed_millis(&p, tz)
        .map(|ms| Some(RawBson::DateTime(bson::DateTime::from_millis(ms))))
        .ok_or_else(add_overflow_parts)
}

/// The instant of a read date: its own zone or `tz`, after timelib's move to a week day.
fn parsed_millis(p: &from_string::Parsed, tz: &Tz) -> Option<i64> {
    let zone = p
        .zone
        .as_ref()
        .map_or_else(|| tz.clone(), |z| Tz::Fixed(z.offset()));
    let mut days = days_from_civil(p.year, p.month, p.day);
    if let Some(weekday) = p.weekday {
        // timelib's `do_adjust_for_weekday` (behaviour 1): forward 0..=6 days.
        days += (weekday - iso_dow(days).rem_euclid(7)).rem_euclid(7);
    }
    days += p.rel_days;
    // mongod: `Seconds(sse) + Microseconds(us)` cast to milliseconds, towards zero.
    let whole = from_local(&zone, days, p.hour, p.minute, p.second, 0)?;
    Some(whole.checked_mul(1000)?.checked_add(p.micros)? / 1000)
}

/// A date string as `$toDate` and `$convert` read it (mongod parses it as `$dateFromString`
/// does, in UTC): its instant in milliseconds; `Err(Some(message))` when mongod fails with
/// that `ConversionFailure` message, `Err(None)` when Ebb does not read the form.
pub(super) fn string_millis(s: &str) -> Result<i64, Option<String>> {
    match from_string::free(s) {
        from_string::Outcome::Date(p) => parsed_millis(&p, &Tz::Utc).ok_or(None),
        from_string::Outcome::Failed(msg) => Err(Some(msg)),
        from_string::Outcome::Unsupported if from_string::certainly_invalid(s) => {
            Err(Some(format!("Error parsing date string '{s}'")))
        }
        from_string::Outcome::Unsupported => Err(None),
    }
}

/// An evaluated `startOfWeek`.
enum WeekStart {
    /// Not read (not given, or the unit is not `"week"`): Sunday.
    Default,
    /// Null or missing: the operator answers null.
    Null,
    Given(RawBson),
}

/// An evaluated `startOfWeek` as an ISO day.
fn parse_week_start(v: WeekStart, op: &str) -> Result<i64, CommandError> {
    match v {
        WeekStart::Given(v) => parse_start_of_week(v.as_raw_bson_ref(), op),
        WeekStart::Default | WeekStart::Null => Ok(7),
    }
}

/// mongod's `convertDateTruncBinSizeValue`.
fn trunc_bin_size(v: RawBsonRef<'_>) -> Result<i64, CommandError> {
    let Some(n) = integral64(v) else {
        return Err(loc(
            5_439_017,
            format!(
                "$dateTrunc requires 'binSize' to be a 64-bit integer, but got value '{}' of type \
                 {}",
                display::value(v),
                tname(Some(v))
            ),
        ));
    };
    if n <= 0 {
        return Err(loc(
            5_439_018,
            format!("$dateTrunc requires 'binSize' to be greater than 0, but got value {n}"),
        ));
    }
    Ok(n)
}

/// mongod's `Duration` cast check, which `$dateFromParts` meets with huge seconds or
/// milliseconds.
fn add_overflow_parts() -> CommandError {
    CommandError::new(
        ErrorCode::DurationOverflow,
        "Overflow casting from a lower-precision duration to a higher-precision duration",
    )
}

impl Operator for DateExpr {
    fn eval(&self, env: Env<'_>) -> Result<Value, CommandError> {
        match self.kind {
            Kind::Part(p) => self.part(p, env),
            Kind::ToString => self.to_string(env),
            Kind::ToParts => self.to_parts(env),
            Kind::FromParts => self.build_from_parts(env),
            Kind::Add | Kind::Subtract => self.arithmetic(env),
            Kind::Diff => self.diff(env),
            Kind::Trunc => self.trunc(env),
            Kind::FromString => self.parse_string(env),
        }
    }

    fn args(&self) -> Vec<&Node> {
        self.slots.iter().flatten().collect()
    }
}
