//! Date operators with mongod's semantics (timelib's calendar arithmetic, as used by
//! `date_time_support.cpp`): the parts `$year $month $dayOfMonth $hour $minute $second
//! $millisecond $dayOfYear $dayOfWeek $week $isoWeek $isoWeekYear $isoDayOfWeek` (each also as
//! `{date, timezone}`), `$dateToString $dateToParts $dateFromParts $dateAdd $dateSubtract
//! $dateDiff $dateTrunc`.
//!
//! Calendar arithmetic is done here on `i64` days and seconds (proleptic Gregorian, any BSON
//! datetime, so years far outside 1..9999 work without overflow); a time zone only gives the
//! UTC offset at an instant. Zones are mongod's: `"UTC"`, an IANA name of the bundled database
//! (exact case), or an offset `±HH`, `±HHMM`, `±HH:MM`; anything else is 40485. A named zone's
//! offset for an instant outside the database's range (years -9999..9999) is the offset at the
//! nearest end of that range.

use std::fmt::Write as _;
use std::sync::OnceLock;

use bson::{RawBson, RawBsonRef, RawDocumentBuf, cstr};
use jiff::tz::{TimeZone, TimeZoneDatabase};

use super::{
    CommandError, Env, Node, Operator, Scope, Value, display, eval, loc, nullish, object_fields,
    parse, r, tname,
};
use crate::error::ErrorCode;

const MS_PER_DAY: i64 = 86_400_000;
const SECS_PER_DAY: i64 = 86_400;

// ---- time zones ----

/// A time zone as mongod's `TimeZone`: UTC, a fixed offset, or an IANA zone.
#[derive(Debug, Clone)]
pub(super) enum Tz {
    Utc,
    /// Seconds east of UTC.
    Fixed(i64),
    Named(TimeZone),
}

fn database() -> &'static TimeZoneDatabase {
    static DB: OnceLock<TimeZoneDatabase> = OnceLock::new();
    DB.get_or_init(TimeZoneDatabase::bundled)
}

/// mongod's `TimeZoneDatabase::parseUtcOffset`: `±HH`, `±HHMM`, `±HH:MM`.
fn parse_utc_offset(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    let sign = match b.first() {
        Some(b'+') => 1,
        Some(b'-') => -1,
        _ => return None,
    };
    let digit = |i: usize| -> Option<i64> {
        b.get(i)
            .filter(|c| c.is_ascii_digit())
            .map(|c| i64::from(c - b'0'))
    };
    let two = |i: usize| -> Option<i64> { Some(digit(i)? * 10 + digit(i + 1)?) };
    let (h, m) = match b.len() {
        3 => (two(1)?, 0),
        5 => (two(1)?, two(3)?),
        6 if b.get(3) == Some(&b':') => (two(1)?, two(4)?),
        _ => return None,
    };
    Some(sign * (h * 3600 + m * 60))
}

impl Tz {
    /// mongod's `TimeZoneDatabase::getTimeZone`.
    pub(super) fn named(name: &str) -> Result<Tz, CommandError> {
        if name == "UTC" {
            return Ok(Tz::Utc);
        }
        if let Ok(tz) = database().get(name)
            && tz.iana_name() == Some(name)
        {
            return Ok(Tz::Named(tz));
        }
        if let Some(secs) = parse_utc_offset(name) {
            return Ok(Tz::Fixed(secs));
        }
        Err(loc(
            40485,
            format!("unrecognized time zone identifier: \"{name}\""),
        ))
    }

    /// The UTC offset (seconds east) at the instant `utc_secs`.
    fn offset_at(&self, utc_secs: i64) -> i64 {
        match self {
            Tz::Utc => 0,
            Tz::Fixed(s) => *s,
            Tz::Named(tz) => {
                let lo = jiff::Timestamp::MIN.as_second();
                let hi = jiff::Timestamp::MAX.as_second();
                let ts = jiff::Timestamp::from_second(utc_secs.clamp(lo, hi))
                    .unwrap_or(jiff::Timestamp::UNIX_EPOCH);
                i64::from(tz.to_offset(ts).seconds())
            }
        }
    }

    /// The instant (UTC seconds) of a local wall-clock time `local_secs`, as timelib resolves
    /// it: in a repeated hour the earlier instant, in a skipped hour the offset from before the
    /// gap (02:30 in a spring-forward gap is 03:30 of the new offset).
    fn local_to_utc(&self, local_secs: i64) -> i64 {
        match self {
            Tz::Utc => local_secs,
            Tz::Fixed(s) => local_secs.saturating_sub(*s),
            Tz::Named(_) => {
                let before = self.offset_at(local_secs);
                let guess = self.offset_at(local_secs.saturating_sub(before));
                if self.offset_at(local_secs.saturating_sub(guess)) == guess {
                    local_secs.saturating_sub(guess)
                } else {
                    local_secs.saturating_sub(before)
                }
            }
        }
    }
}

// ---- calendar arithmetic ----

/// Days since 1970-01-01 of a proleptic Gregorian date (`month` 1..=12; `day` may be any value,
/// counted from the first of the month).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468 + (day - 1)
}

/// The date of a day number: (year, month 1..=12, day 1..=31).
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (
        if m <= 2 {
            era * 400 + yoe + 1
        } else {
            era * 400 + yoe
        },
        m,
        d,
    )
}

fn is_leap(y: i64) -> bool {
    y % 4 == 0 && (y % 100 != 0 || y % 400 == 0)
}

fn days_in_month(y: i64, m: i64) -> i64 {
    match m {
        2 if is_leap(y) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// ISO day of week of a day number: 1 (Monday) ..= 7 (Sunday).
fn iso_dow(days: i64) -> i64 {
    // 1970-01-01 was a Thursday.
    (days + 3).rem_euclid(7) + 1
}

/// ISO 8601 week-numbering (year, week) of a day number.
fn iso_week(days: i64) -> (i64, i64) {
    // The Thursday of this ISO week decides the year.
    let thursday = days - iso_dow(days) + 4;
    let (iso_year, _, _) = civil_from_days(thursday);
    let week = (thursday - days_from_civil(iso_year, 1, 1)) / 7 + 1;
    (iso_year, week)
}

/// The day number of ISO (year, week, day of week), out-of-range values carried over.
fn days_from_iso(year: i64, week: i64, dow: i64) -> i64 {
    let jan4 = days_from_civil(year, 1, 4);
    let monday = jan4 - (iso_dow(jan4) - 1);
    monday + (week - 1) * 7 + (dow - 1)
}

/// A broken-down local time (timelib's `timelib_time` after `unixtime2local`).
#[derive(Debug, Clone, Copy)]
struct Local {
    days: i64,
    year: i64,
    month: i64,
    day: i64,
    hour: i64,
    minute: i64,
    second: i64,
    millis: i64,
    /// The UTC offset in force, seconds east.
    offset: i64,
}

impl Local {
    fn of(ms: i64, tz: &Tz) -> Local {
        let utc_secs = ms.div_euclid(1000);
        let millis = ms.rem_euclid(1000);
        let offset = tz.offset_at(utc_secs);
        let local = utc_secs + offset;
        let days = local.div_euclid(SECS_PER_DAY);
        let sod = local.rem_euclid(SECS_PER_DAY);
        let (year, month, day) = civil_from_days(days);
        Local {
            days,
            year,
            month,
            day,
            hour: sod / 3600,
            minute: sod / 60 % 60,
            second: sod % 60,
            millis,
            offset,
        }
    }

    /// 1..=366.
    fn day_of_year(&self) -> i64 {
        self.days - days_from_civil(self.year, 1, 1) + 1
    }

    /// 1 (Sunday) ..= 7.
    fn day_of_week(&self) -> i64 {
        iso_dow(self.days) % 7 + 1
    }

    /// mongod's `TimeZone::week`: weeks start on Sunday; days before the first Sunday are week 0.
    fn week(&self) -> i64 {
        (self.day_of_year() - self.day_of_week() + 7) / 7
    }
}

#[expect(clippy::cast_possible_truncation, reason = "mongod's parts are C ints")]
fn int(v: i64) -> RawBson {
    RawBson::Int32(v as i32)
}

/// The instant of a local date and time in `tz`: timelib's normalisation carries any value
/// over (month 13 is January of the next year, hour -1 the previous day's 23:00).
fn from_local(tz: &Tz, days: i64, hour: i64, minute: i64, second: i64, millis: i64) -> Option<i64> {
    let secs = days
        .checked_mul(SECS_PER_DAY)?
        .checked_add(hour.checked_mul(3600)?)?
        .checked_add(minute.checked_mul(60)?)?
        .checked_add(second)?;
    let utc = tz.local_to_utc(secs);
    utc.checked_mul(1000)?.checked_add(millis)
}

/// Months added to (year, month), as mongod's `addMonths`.
fn add_months(year: i64, month: i64, amount: i64) -> (i64, i64) {
    let total = year * 12 + (month - 1) + amount;
    (total.div_euclid(12), total.rem_euclid(12) + 1)
}

// ---- units ----

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Unit {
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

impl Unit {
    fn parse(s: &str) -> Option<Unit> {
        Some(match s {
            "year" => Unit::Year,
            "quarter" => Unit::Quarter,
            "month" => Unit::Month,
            "week" => Unit::Week,
            "day" => Unit::Day,
            "hour" => Unit::Hour,
            "minute" => Unit::Minute,
            "second" => Unit::Second,
            "millisecond" => Unit::Millisecond,
            _ => return None,
        })
    }

    fn name(self) -> &'static str {
        match self {
            Unit::Year => "year",
            Unit::Quarter => "quarter",
            Unit::Month => "month",
            Unit::Week => "week",
            Unit::Day => "day",
            Unit::Hour => "hour",
            Unit::Minute => "minute",
            Unit::Second => "second",
            Unit::Millisecond => "millisecond",
        }
    }

    /// Milliseconds of a sub-day unit.
    fn fixed_ms(self) -> Option<i64> {
        match self {
            Unit::Hour => Some(3_600_000),
            Unit::Minute => Some(60_000),
            Unit::Second => Some(1000),
            Unit::Millisecond => Some(1),
            _ => None,
        }
    }
}

/// mongod's day-of-week names (case-insensitive), as ISO numbers 1 (Monday) ..= 7.
fn parse_day_of_week(s: &str) -> Option<i64> {
    Some(match s.to_ascii_lowercase().as_str() {
        "monday" | "mon" => 1,
        "tuesday" | "tue" => 2,
        "wednesday" | "wed" => 3,
        "thursday" | "thu" => 4,
        "friday" | "fri" => 5,
        "saturday" | "sat" => 6,
        "sunday" | "sun" => 7,
        _ => return None,
    })
}

// ---- $dateAdd, $dateDiff, $dateTrunc ----

/// mongod's `isDateAddAmountValid`: the amount roughly fits the range of a date.
fn amount_valid(amount: i64, unit: Unit) -> bool {
    const MAX_DAYS: i64 = 213_503_982_335; // u64::MAX / ms per day + 1
    const MAX_YEARS: i64 = MAX_DAYS / 365 + 1;
    let max = match unit {
        Unit::Year => MAX_YEARS,
        Unit::Quarter => MAX_YEARS * 4,
        Unit::Month => MAX_YEARS * 12,
        Unit::Week => MAX_DAYS / 7,
        Unit::Day => MAX_DAYS,
        Unit::Hour => MAX_DAYS * 24,
        Unit::Minute => MAX_DAYS * 24 * 60,
        Unit::Second | Unit::Millisecond => MAX_DAYS * 24 * 3600,
    };
    -max < amount && amount < max
}

fn add_overflow() -> CommandError {
    loc(5_166_406, "dateAdd overflowed")
}

/// mongod's `dateAdd`: calendar units in the zone's wall-clock time (clamping the day to the
/// end of the month), hours and smaller as elapsed time.
fn date_add(ms: i64, unit: Unit, amount: i64, tz: &Tz) -> Result<i64, CommandError> {
    if unit == Unit::Millisecond {
        return ms.checked_add(amount).ok_or_else(add_overflow);
    }
    if !amount_valid(amount, unit) {
        return Err(loc(
            5_976_500,
            format!(
                "invalid dateAdd 'amount' parameter value: {amount} {}",
                unit.name()
            ),
        ));
    }
    if let Some(per) = unit.fixed_ms() {
        return amount
            .checked_mul(per)
            .and_then(|d| ms.checked_add(d))
            .ok_or_else(add_overflow);
    }
    let t = Local::of(ms, tz);
    let days = match unit {
        Unit::Year | Unit::Quarter | Unit::Month => {
            let months = match unit {
                Unit::Year => amount * 12,
                Unit::Quarter => amount * 3,
                _ => amount,
            };
            let (y, m) = add_months(t.year, t.month, months);
            let d = t.day.min(days_in_month(y, m));
            days_from_civil(y, m, d)
        }
        Unit::Week => t.days + amount * 7,
        _ => t.days + amount,
    };
    from_local(tz, days, t.hour, t.minute, t.second, t.millis).ok_or_else(add_overflow)
}

/// mongod's `dateDiff`.
fn date_diff(
    start: i64,
    end: i64,
    unit: Unit,
    tz: &Tz,
    start_of_week: i64,
) -> Result<i64, CommandError> {
    if unit == Unit::Millisecond {
        return end
            .checked_sub(start)
            .ok_or_else(|| loc(5_166_308, "dateDiff overflowed"));
    }
    let a = Local::of(start, tz);
    let b = Local::of(end, tz);
    let days = b.days - a.days;
    let hours = b.hour - a.hour + days * 24;
    let minutes = b.minute - a.minute + hours * 60;
    Ok(match unit {
        Unit::Year => b.year - a.year,
        Unit::Quarter => (b.month - 1) / 3 - (a.month - 1) / 3 + (b.year - a.year) * 4,
        Unit::Month => b.month - a.month + (b.year - a.year) * 12,
        Unit::Week => {
            (days + week_day(a.days, start_of_week) - week_day(b.days, start_of_week)) / 7
        }
        Unit::Day => days,
        Unit::Hour => hours + (a.offset - b.offset) / 3600,
        Unit::Minute => minutes + (a.offset - b.offset) / 60,
        Unit::Second | Unit::Millisecond => {
            b.second - a.second + minutes * 60 + (a.offset - b.offset)
        }
    })
}

/// The day's position (0..=6) in a week starting on ISO day `start_of_week`.
fn week_day(days: i64, start_of_week: i64) -> i64 {
    (iso_dow(days) - start_of_week + 7) % 7
}

fn trunc_overflow(code: i32) -> CommandError {
    loc(code, "dateTrunc overflowed")
}

/// mongod's `truncateDate` with its default reference point, 2000-01-01T00:00 in `tz` (for
/// weeks, the first `start_of_week` day on or after it).
fn date_trunc(
    ms: i64,
    unit: Unit,
    bin_size: i64,
    tz: &Tz,
    start_of_week: i64,
) -> Result<i64, CommandError> {
    const REFERENCE_MS: i64 = 946_684_800_000;
    let mut reference_ms = REFERENCE_MS - tz.offset_at(REFERENCE_MS / 1000) * 1000;
    let mut reference_day = 1;
    if unit == Unit::Week {
        // 2000-01-01 was a Saturday (ISO 6).
        let pos = (6 - start_of_week + 7) % 7;
        let adjust = (7 - pos) % 7;
        reference_ms += adjust * MS_PER_DAY;
        reference_day += adjust;
    }
    if let Some(per) = unit.fixed_ms() {
        let bin = bin_size
            .checked_mul(per)
            .ok_or_else(|| trunc_overflow(5_439_002))?;
        let shifted = ms
            .checked_sub(reference_ms)
            .ok_or_else(|| trunc_overflow(5_439_000))?;
        return ms
            .checked_sub(shifted.rem_euclid(bin))
            .ok_or_else(|| trunc_overflow(5_439_001));
    }
    if bin_size > 100_000_000_000 {
        return Err(loc(5_439_006, "dateTrunc unsupported binSize value"));
    }
    let t = Local::of(ms, tz);
    let reference_days = days_from_civil(2000, 1, reference_day);
    let distance = match unit {
        Unit::Day => t.days - reference_days,
        Unit::Week => {
            (t.days - reference_days + week_day(reference_days, start_of_week)
                - week_day(t.days, start_of_week))
                / 7
        }
        Unit::Month => t.month - 1 + (t.year - 2000) * 12,
        Unit::Quarter => (t.month - 1) / 3 + (t.year - 2000) * 4,
        _ => t.year - 2000,
    };
    let lower = distance - distance.rem_euclid(bin_size);
    date_add(reference_ms, unit, lower, tz)
}

// ---- $dateToString ----

/// The format `$dateToString` uses without `format`.
const ISO_FORMAT: &str = "%Y-%m-%dT%H:%M:%S.%LZ";

/// mongod's `checkFormatString`: every `%` is followed by a known specifier.
fn validate_format(format: &str) -> Result<(), CommandError> {
    let mut chars = format.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            continue;
        }
        match chars.next() {
            None => return Err(loc(18535, "Unmatched '%' at end of format string")),
            Some(
                '%' | 'd' | 'G' | 'H' | 'j' | 'L' | 'm' | 'M' | 'S' | 'w' | 'u' | 'U' | 'V' | 'Y'
                | 'z' | 'Z',
            ) => {}
            Some(other) => {
                return Err(loc(
                    18536,
                    format!("Invalid format character '%{other}' in format string"),
                ));
            }
        }
    }
    Ok(())
}

/// mongod's `insertPadded`: 0..=9999, zero-padded to `width`.
fn padded(out: &mut String, n: i64, width: usize) -> Result<(), CommandError> {
    if !(0..=9999).contains(&n) {
        return Err(loc(
            18537,
            format!(
                "Could not convert date to string: date component was outside the supported \
                 range of 0-9999: {n}"
            ),
        ));
    }
    let _ = write!(out, "{n:0width$}");
    Ok(())
}

/// mongod's `TimeZone::outputDateWithFormat` (the format already validated).
fn format_date(format: &str, ms: i64, tz: &Tz) -> Result<String, CommandError> {
    let t = Local::of(ms, tz);
    let mut out = String::new();
    let mut chars = format.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('%') => out.push('%'),
            Some('Y') => padded(&mut out, t.year, 4)?,
            Some('m') => padded(&mut out, t.month, 2)?,
            Some('d') => padded(&mut out, t.day, 2)?,
            Some('H') => padded(&mut out, t.hour, 2)?,
            Some('M') => padded(&mut out, t.minute, 2)?,
            Some('S') => padded(&mut out, t.second, 2)?,
            Some('L') => padded(&mut out, t.millis, 3)?,
            Some('j') => padded(&mut out, t.day_of_year(), 3)?,
            Some('w') => padded(&mut out, t.day_of_week(), 1)?,
            Some('u') => padded(&mut out, iso_dow(t.days), 1)?,
            Some('U') => padded(&mut out, t.week(), 2)?,
            Some('V') => padded(&mut out, iso_week(t.days).1, 2)?,
            Some('G') => padded(&mut out, iso_week(t.days).0, 4)?,
            Some('z') => {
                out.push(if t.offset < 0 { '-' } else { '+' });
                padded(&mut out, (t.offset / 3600).abs(), 2)?;
                padded(&mut out, (t.offset / 60 % 60).abs(), 2)?;
            }
            Some('Z') => out.push_str(&(t.offset / 60).to_string()),
            _ => {}
        }
    }
    Ok(out)
}

// ---- operators ----

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
        Kind::Trunc | Kind::Part(_) => "$dateTrunc",
    }
}

fn unknown_argument(kind: Kind, field: &str) -> CommandError {
    let name = op_name(kind);
    match kind {
        Kind::ToString => loc(18534, format!("Unrecognized argument to {name}: {field}")),
        Kind::ToParts => loc(40520, format!("Unrecognized argument to {name}: {field}")),
        Kind::FromParts => loc(40518, format!("Unrecognized argument to {name}: {field}")),
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
        let Some(tz) = make_tz(self.slot(1), env)? else {
            return Ok(Some(RawBson::Null));
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

    fn arithmetic(&self, env: Env<'_>) -> Result<Value, CommandError> {
        let null = Ok(Some(RawBson::Null));
        let name = op_name(self.kind);
        let start = self.arg(0, env)?;
        let Some(start) = r(&start).filter(|v| !nullish(Some(*v))) else {
            return null;
        };
        let unit = self.arg(1, env)?;
        let Some(unit) = r(&unit).filter(|v| !nullish(Some(*v))) else {
            return null;
        };
        let unit = parse_unit(unit, name)?;
        let amount = self.arg(2, env)?;
        let Some(amount) = r(&amount).filter(|v| !nullish(Some(*v))) else {
            return null;
        };
        let Some(tz) = make_tz(self.slot(3), env)? else {
            return null;
        };
        let Some(ms) = as_date(start) else {
            return Err(loc(
                5_166_403,
                format!("{name} requires startDate to be convertible to a date"),
            ));
        };
        let Some(mut amount) = integral64(amount) else {
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

    fn diff(&self, env: Env<'_>) -> Result<Value, CommandError> {
        let null = Ok(Some(RawBson::Null));
        let start = self.arg(0, env)?;
        let Some(start) = r(&start).filter(|v| !nullish(Some(*v))) else {
            return null;
        };
        let end = self.arg(1, env)?;
        let Some(end) = r(&end).filter(|v| !nullish(Some(*v))) else {
            return null;
        };
        let unit = self.arg(2, env)?;
        let Some(unit) = r(&unit).filter(|v| !nullish(Some(*v))) else {
            return null;
        };
        let unit = parse_unit(unit, "$dateDiff")?;
        let Some(start_of_week) = self.start_of_week(4, unit, env, "$dateDiff")? else {
            return null;
        };
        let tz = make_tz(self.slot(3), env)
            .map_err(|e| with_context(&e, "$dateDiff parameter 'timezone' value parsing failed"))?;
        let Some(tz) = tz else {
            return null;
        };
        let start = convert_date(start, 5_166_307, "$dateDiff", "startDate")?;
        let end = convert_date(end, 5_166_307, "$dateDiff", "endDate")?;
        Ok(Some(RawBson::Int64(date_diff(
            start,
            end,
            unit,
            &tz,
            start_of_week,
        )?)))
    }

    /// The `startOfWeek` argument when the unit is a week (Sunday by default); `None` when
    /// nullish.
    fn start_of_week(
        &self,
        i: usize,
        unit: Unit,
        env: Env<'_>,
        op: &str,
    ) -> Result<Option<i64>, CommandError> {
        match self.slot(i) {
            Some(node) if unit == Unit::Week => match r(&eval(node, env)?) {
                v if nullish(v) => Ok(None),
                Some(v) => parse_start_of_week(v, op).map(Some),
                None => Ok(None),
            },
            _ => Ok(Some(7)),
        }
    }

    fn trunc(&self, env: Env<'_>) -> Result<Value, CommandError> {
        let null = Ok(Some(RawBson::Null));
        let date = self.arg(0, env)?;
        let Some(date) = r(&date).filter(|v| !nullish(Some(*v))) else {
            return null;
        };
        let bin_size = match self.slot(2) {
            None => 1,
            Some(node) => {
                let v = eval(node, env)?;
                let Some(v) = r(&v).filter(|v| !nullish(Some(*v))) else {
                    return null;
                };
                let Some(n) = integral64(v) else {
                    return Err(loc(
                        5_439_017,
                        format!(
                            "$dateTrunc requires 'binSize' to be a 64-bit integer, but got value \
                             '{}' of type {}",
                            display::value(v),
                            tname(Some(v))
                        ),
                    ));
                };
                if n <= 0 {
                    return Err(loc(
                        5_439_018,
                        format!(
                            "$dateTrunc requires 'binSize' to be greater than 0, but got value {n}"
                        ),
                    ));
                }
                n
            }
        };
        let unit = self.arg(1, env)?;
        let Some(unit) = r(&unit).filter(|v| !nullish(Some(*v))) else {
            return null;
        };
        let unit = parse_unit(unit, "$dateTrunc")?;
        let Some(start_of_week) = self.start_of_week(4, unit, env, "$dateTrunc")? else {
            return null;
        };
        let tz = make_tz(self.slot(3), env).map_err(|e| {
            with_context(&e, "$dateTrunc parameter 'timezone' value parsing failed")
        })?;
        let Some(tz) = tz else {
            return null;
        };
        let ms = convert_date(date, 5_439_012, "$dateTrunc", "date")?;
        let out = date_trunc(ms, unit, bin_size, &tz, start_of_week)?;
        Ok(Some(RawBson::DateTime(bson::DateTime::from_millis(out))))
    }
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
        }
    }

    fn args(&self) -> Vec<&Node> {
        self.slots.iter().flatten().collect()
    }
}

#[cfg(test)]
mod tests {
    use bson::{DateTime, RawDocumentBuf, rawbson, rawdoc};

    use super::super::Expression;
    use super::*;

    fn eval_on(expr: &RawBson, doc: &RawDocumentBuf) -> Result<Value, CommandError> {
        Expression::parse(expr.as_raw_bson_ref())?.evaluate(doc)
    }

    fn date(s: &str) -> RawBson {
        RawBson::DateTime(DateTime::parse_rfc3339_str(s).unwrap())
    }

    fn check(doc: &RawDocumentBuf, cases: Vec<(RawBson, Option<RawBson>)>) {
        for (expr, want) in cases {
            let got = eval_on(&expr, doc).unwrap_or_else(|e| panic!("{expr:?}: {e:?}"));
            assert_eq!(got, want, "{expr:?}");
        }
    }

    fn check_errors(doc: &RawDocumentBuf, cases: Vec<(RawBson, ErrorCode, &str)>) {
        for (expr, code, msg) in cases {
            let err = eval_on(&expr, doc).expect_err(&format!("{expr:?}"));
            assert_eq!((err.code, err.errmsg.as_str()), (code, msg), "{expr:?}");
        }
    }

    fn doc() -> RawDocumentBuf {
        let mut d = rawdoc! {"s": "x", "n": null, "i": 1};
        d.append(cstr!("d"), date("2014-01-01T08:15:39.736Z"));
        d.append(cstr!("y2016"), date("2016-01-01T00:00:00Z"));
        d.append(cstr!("p"), date("2017-01-01T01:29:09.123Z"));
        d.append(cstr!("neg"), RawBson::DateTime(DateTime::from_millis(-1)));
        d.append(
            cstr!("ts"),
            RawBson::Timestamp(bson::Timestamp {
                time: 1_500_000_000,
                increment: 7,
            }),
        );
        d.append(
            cstr!("oid"),
            RawBson::ObjectId(bson::oid::ObjectId::parse_str("5a0b1c2d0000000000000000").unwrap()),
        );
        d.append(
            cstr!("far"),
            RawBson::DateTime(DateTime::from_millis(i64::MAX)),
        );
        d.append(
            cstr!("farNeg"),
            RawBson::DateTime(DateTime::from_millis(i64::MIN)),
        );
        d
    }

    #[test]
    fn parts_match_the_manual() {
        let doc = doc();
        check(
            &doc,
            vec![
                (rawbson!({"$year": "$d"}), Some(rawbson!(2014))),
                (rawbson!({"$month": "$d"}), Some(rawbson!(1))),
                (rawbson!({"$dayOfMonth": "$d"}), Some(rawbson!(1))),
                (rawbson!({"$hour": "$d"}), Some(rawbson!(8))),
                (rawbson!({"$minute": "$d"}), Some(rawbson!(15))),
                (rawbson!({"$second": "$d"}), Some(rawbson!(39))),
                (rawbson!({"$millisecond": "$d"}), Some(rawbson!(736))),
                (rawbson!({"$dayOfYear": "$d"}), Some(rawbson!(1))),
                (rawbson!({"$dayOfWeek": "$d"}), Some(rawbson!(4))),
                (rawbson!({"$week": "$d"}), Some(rawbson!(0))),
                (rawbson!({"$isoWeek": "$y2016"}), Some(rawbson!(53))),
                (
                    rawbson!({"$isoWeekYear": "$y2016"}),
                    Some(RawBson::Int64(2015)),
                ),
                (rawbson!({"$isoDayOfWeek": "$y2016"}), Some(rawbson!(5))),
                (rawbson!({"$year": ["$d"]}), Some(rawbson!(2014))),
                (rawbson!({"$year": {"date": "$d"}}), Some(rawbson!(2014))),
                (
                    rawbson!({"$hour": {"date": "$d", "timezone": "America/Chicago"}}),
                    Some(rawbson!(2)),
                ),
                (
                    rawbson!({"$minute": {"date": "$d", "timezone": "+05:30"}}),
                    Some(rawbson!(45)),
                ),
                (
                    rawbson!({"$hour": {"date": "$d", "timezone": "+0530"}}),
                    Some(rawbson!(13)),
                ),
                (
                    rawbson!({"$hour": {"date": "$d", "timezone": "-03"}}),
                    Some(rawbson!(5)),
                ),
                (
                    rawbson!({"$year": {"date": "$d", "timezone": "Pacific/Kiritimati"}}),
                    Some(rawbson!(2014)),
                ),
                (
                    rawbson!({"$hour": {"date": "$d", "timezone": "$n"}}),
                    Some(RawBson::Null),
                ),
                (rawbson!({"$year": "$missing"}), Some(RawBson::Null)),
                (rawbson!({"$year": null}), Some(RawBson::Null)),
                // One millisecond before the epoch is 1969-12-31T23:59:59.999.
                (rawbson!({"$year": "$neg"}), Some(rawbson!(1969))),
                (rawbson!({"$second": "$neg"}), Some(rawbson!(59))),
                (rawbson!({"$millisecond": "$neg"}), Some(rawbson!(999))),
                // Timestamps and ObjectIds are dates of their seconds.
                (rawbson!({"$year": "$ts"}), Some(rawbson!(2017))),
                (rawbson!({"$month": "$oid"}), Some(rawbson!(11))),
                // Far outside chrono's range, without overflow.
                (
                    rawbson!({"$isoWeekYear": "$far"}),
                    Some(RawBson::Int64(292_278_994)),
                ),
                (
                    rawbson!({"$isoWeekYear": {"date": "$farNeg", "timezone": "Europe/Paris"}}),
                    Some(RawBson::Int64(-292_275_055)),
                ),
                (
                    rawbson!({"$week": {"$add": ["$d", 5 * 86_400_000_i64]}}),
                    Some(rawbson!(1)),
                ),
            ],
        );
    }

    #[test]
    fn date_to_string_specifiers() {
        let doc = doc();
        check(
            &doc,
            vec![
                (
                    rawbson!({"$dateToString": {"date": "$d"}}),
                    Some(rawbson!("2014-01-01T08:15:39.736Z")),
                ),
                (
                    rawbson!({"$dateToString": {"format": "%Y-%m-%d", "date": "$d"}}),
                    Some(rawbson!("2014-01-01")),
                ),
                (
                    rawbson!({"$dateToString": {"format": "%H:%M:%S:%L%z", "date": "$d", "timezone": "America/New_York"}}),
                    Some(rawbson!("03:15:39:736-0500")),
                ),
                (
                    rawbson!({"$dateToString": {"format": "%Z", "date": "$d", "timezone": "America/New_York"}}),
                    Some(rawbson!("-300")),
                ),
                (
                    rawbson!({"$dateToString": {"format": "%H:%M %z %Z", "date": "$d", "timezone": "+04:30"}}),
                    Some(rawbson!("12:45 +0430 270")),
                ),
                (
                    rawbson!({"$dateToString": {"format": "%j %w %u %U %V %G %%", "date": "$d"}}),
                    Some(rawbson!("001 4 3 00 01 2014 %")),
                ),
                (
                    rawbson!({"$dateToString": {"format": "%G-W%V-%u", "date": "$y2016"}}),
                    Some(rawbson!("2015-W53-5")),
                ),
                (
                    rawbson!({"$dateToString": {"date": "$missing", "onNull": "none"}}),
                    Some(rawbson!("none")),
                ),
                (
                    rawbson!({"$dateToString": {"date": "$missing"}}),
                    Some(RawBson::Null),
                ),
                (
                    rawbson!({"$dateToString": {"date": "$d", "format": null}}),
                    Some(RawBson::Null),
                ),
                (
                    rawbson!({"$dateToString": {"date": "$d", "timezone": "$n"}}),
                    Some(RawBson::Null),
                ),
                (
                    rawbson!({"$dateToString": {"date": "$ts", "format": "%Y"}}),
                    Some(rawbson!("2017")),
                ),
            ],
        );
        check_errors(
            &doc,
            vec![
                (
                    rawbson!({"$dateToString": {"date": "$d", "format": "%Y%"}}),
                    ErrorCode::Location(18535),
                    "Unmatched '%' at end of format string",
                ),
                (
                    rawbson!({"$dateToString": {"date": "$d", "format": "%q"}}),
                    ErrorCode::Location(18536),
                    "Invalid format character '%q' in format string",
                ),
                (
                    rawbson!({"$dateToString": {"date": "$d", "format": 1}}),
                    ErrorCode::Location(18533),
                    "$dateToString requires that 'format' be a string, found: int with value 1",
                ),
                (
                    rawbson!({"$dateToString": {"date": "$far"}}),
                    ErrorCode::Location(18537),
                    "Could not convert date to string: date component was outside the supported \
                     range of 0-9999: 292278994",
                ),
                (
                    rawbson!({"$dateToString": {"date": "$s"}}),
                    ErrorCode::Location(16006),
                    "can't convert from BSON type string to Date",
                ),
                (
                    rawbson!({"$dateToString": {"format": "%Y"}}),
                    ErrorCode::Location(18628),
                    "Missing 'date' parameter to $dateToString",
                ),
                (
                    rawbson!({"$dateToString": {"date": "$d", "x": 1}}),
                    ErrorCode::Location(18534),
                    "Unrecognized argument to $dateToString: x",
                ),
                (
                    rawbson!({"$dateToString": "$d"}),
                    ErrorCode::Location(18629),
                    "$dateToString only supports an object as its argument",
                ),
            ],
        );
    }

    #[test]
    fn part_errors_and_time_zones() {
        let doc = doc();
        check_errors(
            &doc,
            vec![
                (
                    rawbson!({"$year": {"date": "$d", "timezone": "Mars/Olympus"}}),
                    ErrorCode::Location(40485),
                    "unrecognized time zone identifier: \"Mars/Olympus\"",
                ),
                (
                    rawbson!({"$year": {"date": "$d", "timezone": "america/new_york"}}),
                    ErrorCode::Location(40485),
                    "unrecognized time zone identifier: \"america/new_york\"",
                ),
                (
                    rawbson!({"$year": {"date": "$d", "timezone": "+5:30"}}),
                    ErrorCode::Location(40485),
                    "unrecognized time zone identifier: \"+5:30\"",
                ),
                (
                    rawbson!({"$year": {"date": "$d", "timezone": 5}}),
                    ErrorCode::Location(40517),
                    "timezone must evaluate to a string, found int",
                ),
                (
                    rawbson!({"$year": ["$d", "$d"]}),
                    ErrorCode::Location(40536),
                    "$year accepts exactly one argument if given an array, but was given 2",
                ),
                (
                    rawbson!({"$month": {"date": "$d", "tz": 1}}),
                    ErrorCode::Location(40535),
                    "unrecognized option to $month: \"tz\"",
                ),
                (
                    rawbson!({"$week": {"timezone": "UTC"}}),
                    ErrorCode::Location(40539),
                    "missing 'date' argument to $week, provided: $week: { timezone: \"UTC\" }",
                ),
                (
                    rawbson!({"$hour": "$s"}),
                    ErrorCode::Location(16006),
                    "can't convert from BSON type string to Date",
                ),
            ],
        );
    }

    #[test]
    fn date_to_parts() {
        let doc = doc();
        check(
            &doc,
            vec![
                (
                    rawbson!({"$dateToParts": {"date": "$p"}}),
                    Some(
                        rawbson!({"year": 2017, "month": 1, "day": 1, "hour": 1, "minute": 29, "second": 9, "millisecond": 123}),
                    ),
                ),
                (
                    rawbson!({"$dateToParts": {"date": "$p", "iso8601": true}}),
                    Some(
                        rawbson!({"isoWeekYear": 2016, "isoWeek": 52, "isoDayOfWeek": 7, "hour": 1, "minute": 29, "second": 9, "millisecond": 123}),
                    ),
                ),
                (
                    rawbson!({"$dateToParts": {"date": "$p", "timezone": "America/New_York"}}),
                    Some(
                        rawbson!({"year": 2016, "month": 12, "day": 31, "hour": 20, "minute": 29, "second": 9, "millisecond": 123}),
                    ),
                ),
                (
                    rawbson!({"$dateToParts": {"date": "$p", "iso8601": null}}),
                    Some(RawBson::Null),
                ),
                (
                    rawbson!({"$dateToParts": {"date": "$missing"}}),
                    Some(RawBson::Null),
                ),
            ],
        );
        check_errors(
            &doc,
            vec![
                (
                    rawbson!({"$dateToParts": {"date": "$p", "iso8601": 1}}),
                    ErrorCode::Location(40521),
                    "iso8601 must evaluate to a bool, found int",
                ),
                (
                    rawbson!({"$dateToParts": {}}),
                    ErrorCode::Location(40522),
                    "Missing 'date' parameter to $dateToParts",
                ),
                (
                    rawbson!({"$dateToParts": {"date": "$p", "y": 1}}),
                    ErrorCode::Location(40520),
                    "Unrecognized argument to $dateToParts: y",
                ),
                (
                    rawbson!({"$dateToParts": 1}),
                    ErrorCode::Location(40524),
                    "$dateToParts only supports an object as its argument",
                ),
            ],
        );
    }

    #[test]
    fn date_from_parts() {
        let doc = doc();
        check(
            &doc,
            vec![
                (
                    rawbson!({"$dateFromParts": {"year": 2017, "month": 2, "day": 8, "hour": 12}}),
                    Some(date("2017-02-08T12:00:00Z")),
                ),
                (
                    rawbson!({"$dateFromParts": {"isoWeekYear": 2017, "isoWeek": 6, "isoDayOfWeek": 3, "hour": 12}}),
                    Some(date("2017-02-08T12:00:00Z")),
                ),
                (
                    rawbson!({"$dateFromParts": {"year": 2016, "month": 12, "day": 31, "hour": 23, "minute": 46, "second": 12, "timezone": "America/New_York"}}),
                    Some(date("2017-01-01T04:46:12Z")),
                ),
                (
                    rawbson!({"$dateFromParts": {"year": 2017, "month": 14, "day": 1}}),
                    Some(date("2018-02-01T00:00:00Z")),
                ),
                (
                    rawbson!({"$dateFromParts": {"year": 2017, "month": 0, "day": 1}}),
                    Some(date("2016-12-01T00:00:00Z")),
                ),
                (
                    rawbson!({"$dateFromParts": {"year": 2017, "month": -1, "day": 1}}),
                    Some(date("2016-11-01T00:00:00Z")),
                ),
                (
                    rawbson!({"$dateFromParts": {"year": 2017, "month": 3, "day": 0}}),
                    Some(date("2017-02-28T00:00:00Z")),
                ),
                (
                    rawbson!({"$dateFromParts": {"year": 2017, "hour": -1, "minute": 61, "second": 3601, "millisecond": -1}}),
                    Some(date("2017-01-01T01:01:00.999Z")),
                ),
                (
                    rawbson!({"$dateFromParts": {"year": 2017.0, "month": 3_i64}}),
                    Some(date("2017-03-01T00:00:00Z")),
                ),
                // A wall-clock time in the spring-forward gap moves forward by the gap.
                (
                    rawbson!({"$dateFromParts": {"year": 2020, "month": 3, "day": 8, "hour": 2, "minute": 30, "timezone": "America/New_York"}}),
                    Some(date("2020-03-08T07:30:00Z")),
                ),
                // A repeated wall-clock time is the earlier instant.
                (
                    rawbson!({"$dateFromParts": {"year": 2020, "month": 11, "day": 1, "hour": 1, "minute": 30, "timezone": "America/New_York"}}),
                    Some(date("2020-11-01T05:30:00Z")),
                ),
                (
                    rawbson!({"$dateFromParts": {"year": 2017, "day": null}}),
                    Some(RawBson::Null),
                ),
                (
                    rawbson!({"$dateFromParts": {"year": 2017, "timezone": null}}),
                    Some(RawBson::Null),
                ),
            ],
        );
        check_errors(
            &doc,
            vec![
                (
                    rawbson!({"$dateFromParts": {"month": 1}}),
                    ErrorCode::Location(40516),
                    "$dateFromParts requires either 'year' or 'isoWeekYear' to be present",
                ),
                (
                    rawbson!({"$dateFromParts": {"year": 2017, "isoWeek": 1}}),
                    ErrorCode::Location(40489),
                    "$dateFromParts does not allow mixing natural dates with ISO dates",
                ),
                (
                    rawbson!({"$dateFromParts": {"isoWeekYear": 2017, "month": 1}}),
                    ErrorCode::Location(40525),
                    "$dateFromParts does not allow mixing ISO dates with natural dates",
                ),
                (
                    rawbson!({"$dateFromParts": {"year": 2017, "foo": 1}}),
                    ErrorCode::Location(40518),
                    "Unrecognized argument to $dateFromParts: foo",
                ),
                (
                    rawbson!({"$dateFromParts": []}),
                    ErrorCode::Location(40519),
                    "$dateFromParts only supports an object as its argument",
                ),
                (
                    rawbson!({"$dateFromParts": {"year": 2017, "month": 1.5}}),
                    ErrorCode::Location(40515),
                    "'month' must evaluate to an integer, found double with value 1.5",
                ),
                (
                    rawbson!({"$dateFromParts": {"year": 2017, "hour": 40000}}),
                    ErrorCode::Location(31034),
                    "'hour' must evaluate to a value in the range [-32768, 32767]; value 40000 is \
                     not in range",
                ),
                (
                    rawbson!({"$dateFromParts": {"year": 10000}}),
                    ErrorCode::Location(40523),
                    "'year' must evaluate to an integer in the range 1 to 9999, found 10000",
                ),
                (
                    rawbson!({"$dateFromParts": {"isoWeekYear": 0}}),
                    ErrorCode::Location(31095),
                    "'isoWeekYear' must evaluate to an integer in the range 1 to 9999, found 0",
                ),
                (
                    rawbson!({"$dateFromParts": {"year": 1970, "millisecond": i64::MAX}}),
                    ErrorCode::DurationOverflow,
                    "Overflow casting from a lower-precision duration to a higher-precision duration",
                ),
                (
                    rawbson!({"$dateFromParts": {"year": 1970, "second": i64::MAX}}),
                    ErrorCode::DurationOverflow,
                    "Overflow casting from a lower-precision duration to a higher-precision duration",
                ),
            ],
        );
    }

    #[test]
    fn date_add_and_subtract() {
        let mut doc = doc();
        doc.append(cstr!("oct31"), date("2020-10-31T12:10:05Z"));
        doc.append(cstr!("mar13"), date("2021-03-13T12:00:00Z"));
        doc.append(cstr!("nov1"), date("2020-11-01T05:50:02Z"));
        doc.append(cstr!("jan31"), date("2020-01-31T00:00:00Z"));
        check(
            &doc,
            vec![
                (
                    rawbson!({"$dateAdd": {"startDate": "$oct31", "unit": "month", "amount": 1}}),
                    Some(date("2020-11-30T12:10:05Z")),
                ),
                (
                    rawbson!({"$dateAdd": {"startDate": "$jan31", "unit": "month", "amount": 1}}),
                    Some(date("2020-02-29T00:00:00Z")),
                ),
                (
                    rawbson!({"$dateAdd": {"startDate": "$jan31", "unit": "quarter", "amount": 1}}),
                    Some(date("2020-04-30T00:00:00Z")),
                ),
                (
                    rawbson!({"$dateAdd": {"startDate": "$jan31", "unit": "year", "amount": -1}}),
                    Some(date("2019-01-31T00:00:00Z")),
                ),
                (
                    rawbson!({"$dateAdd": {"startDate": "$mar13", "unit": "day", "amount": 1, "timezone": "America/New_York"}}),
                    Some(date("2021-03-14T11:00:00Z")),
                ),
                (
                    rawbson!({"$dateAdd": {"startDate": "$mar13", "unit": "hour", "amount": 24, "timezone": "America/New_York"}}),
                    Some(date("2021-03-14T12:00:00Z")),
                ),
                (
                    rawbson!({"$dateAdd": {"startDate": "$nov1", "unit": "hour", "amount": 1, "timezone": "America/New_York"}}),
                    Some(date("2020-11-01T06:50:02Z")),
                ),
                (
                    rawbson!({"$dateAdd": {"startDate": "$mar13", "unit": "week", "amount": 2}}),
                    Some(date("2021-03-27T12:00:00Z")),
                ),
                (
                    rawbson!({"$dateAdd": {"startDate": "$mar13", "unit": "millisecond", "amount": 1.0}}),
                    Some(date("2021-03-13T12:00:00.001Z")),
                ),
                (
                    rawbson!({"$dateSubtract": {"startDate": "$oct31", "unit": "month", "amount": 1}}),
                    Some(date("2020-09-30T12:10:05Z")),
                ),
                (
                    rawbson!({"$dateSubtract": {"startDate": "$mar13", "unit": "minute", "amount": 30}}),
                    Some(date("2021-03-13T11:30:00Z")),
                ),
                (
                    rawbson!({"$dateAdd": {"startDate": "$ts", "unit": "second", "amount": 1}}),
                    Some(RawBson::DateTime(DateTime::from_millis(1_500_000_001_000))),
                ),
                (
                    rawbson!({"$dateAdd": {"startDate": "$missing", "unit": "day", "amount": 1}}),
                    Some(RawBson::Null),
                ),
                (
                    rawbson!({"$dateAdd": {"startDate": "$d", "unit": null, "amount": 1}}),
                    Some(RawBson::Null),
                ),
                (
                    rawbson!({"$dateAdd": {"startDate": "$d", "unit": "day", "amount": null}}),
                    Some(RawBson::Null),
                ),
            ],
        );
        check_errors(
            &doc,
            vec![
                (
                    rawbson!({"$dateAdd": {"startDate": "$d", "unit": "day"}}),
                    ErrorCode::Location(5_166_402),
                    "$dateAdd requires startDate, unit, and amount to be present",
                ),
                (
                    rawbson!({"$dateSubtract": 1}),
                    ErrorCode::Location(5_166_400),
                    "$dateSubtract expects an object as its argument",
                ),
                (
                    rawbson!({"$dateAdd": {"startDate": "$d", "unit": "day", "amount": 1, "x": 1}}),
                    ErrorCode::Location(5_166_401),
                    "Unrecognized argument to $dateAdd: x. Expected arguments are startDate, \
                     unit, amount, and optionally timezone.",
                ),
                (
                    rawbson!({"$dateAdd": {"startDate": "$s", "unit": "day", "amount": 1}}),
                    ErrorCode::Location(5_166_403),
                    "$dateAdd requires startDate to be convertible to a date",
                ),
                (
                    rawbson!({"$dateAdd": {"startDate": "$d", "unit": "day", "amount": 1.5}}),
                    ErrorCode::Location(5_166_405),
                    "$dateAdd expects integer amount of time units",
                ),
                (
                    rawbson!({"$dateAdd": {"startDate": "$d", "unit": "days", "amount": 1}}),
                    ErrorCode::FailedToParse,
                    "$dateAdd parameter 'unit' value parsing failed :: caused by :: unknown time \
                     unit value: days",
                ),
                (
                    rawbson!({"$dateAdd": {"startDate": "$d", "unit": 1, "amount": 1}}),
                    ErrorCode::Location(5_439_013),
                    "$dateAdd requires 'unit' to be a string, but got int",
                ),
                (
                    rawbson!({"$dateAdd": {"startDate": "$d", "unit": "year", "amount": 1_000_000_000}}),
                    ErrorCode::Location(5_976_500),
                    "invalid dateAdd 'amount' parameter value: 1000000000 year",
                ),
                (
                    rawbson!({"$dateAdd": {"startDate": "$far", "unit": "millisecond", "amount": 1}}),
                    ErrorCode::Location(5_166_406),
                    "dateAdd overflowed",
                ),
                (
                    rawbson!({"$dateAdd": {"startDate": "$far", "unit": "day", "amount": 1}}),
                    ErrorCode::Location(5_166_406),
                    "dateAdd overflowed",
                ),
                (
                    rawbson!({"$dateSubtract": {"startDate": "$d", "unit": "day", "amount": i64::MIN}}),
                    ErrorCode::Location(6_045_000),
                    "invalid $dateSubtract 'amount' parameter value: -9223372036854775808",
                ),
            ],
        );
    }

    #[test]
    fn date_diff() {
        let mut doc = doc();
        doc.append(cstr!("a"), date("2020-12-31T23:59:00Z"));
        doc.append(cstr!("b"), date("2021-01-01T00:01:00Z"));
        doc.append(cstr!("sat"), date("2022-01-01T00:00:00Z"));
        doc.append(cstr!("sun"), date("2022-01-02T00:00:00Z"));
        doc.append(cstr!("est"), date("2021-03-14T06:00:00Z"));
        doc.append(cstr!("edt"), date("2021-03-14T07:00:00Z"));
        let diff = |unit: &str| rawbson!({"$dateDiff": {"startDate": "$a", "endDate": "$b", "unit": unit}});
        check(
            &doc,
            vec![
                (diff("year"), Some(RawBson::Int64(1))),
                (diff("quarter"), Some(RawBson::Int64(1))),
                (diff("month"), Some(RawBson::Int64(1))),
                (diff("day"), Some(RawBson::Int64(1))),
                (diff("hour"), Some(RawBson::Int64(1))),
                (diff("minute"), Some(RawBson::Int64(2))),
                (diff("second"), Some(RawBson::Int64(120))),
                (diff("millisecond"), Some(RawBson::Int64(120_000))),
                (
                    rawbson!({"$dateDiff": {"startDate": "$b", "endDate": "$a", "unit": "year"}}),
                    Some(RawBson::Int64(-1)),
                ),
                (
                    rawbson!({"$dateDiff": {"startDate": "$sat", "endDate": "$sun", "unit": "week"}}),
                    Some(RawBson::Int64(1)),
                ),
                (
                    rawbson!({"$dateDiff": {"startDate": "$sat", "endDate": "$sun", "unit": "week", "startOfWeek": "MONDAY"}}),
                    Some(RawBson::Int64(0)),
                ),
                (
                    rawbson!({"$dateDiff": {"startDate": "$est", "endDate": "$edt", "unit": "hour", "timezone": "America/New_York"}}),
                    Some(RawBson::Int64(1)),
                ),
                (
                    rawbson!({"$dateDiff": {"startDate": "$a", "endDate": "$b", "unit": "day", "timezone": "+03"}}),
                    Some(RawBson::Int64(0)),
                ),
                // startOfWeek is read only for weeks.
                (
                    rawbson!({"$dateDiff": {"startDate": "$a", "endDate": "$b", "unit": "day", "startOfWeek": 1}}),
                    Some(RawBson::Int64(1)),
                ),
                (
                    rawbson!({"$dateDiff": {"startDate": "$a", "endDate": "$n", "unit": "day"}}),
                    Some(RawBson::Null),
                ),
            ],
        );
        check_errors(
            &doc,
            vec![
                (
                    rawbson!({"$dateDiff": {"startDate": "$a", "unit": "day"}}),
                    ErrorCode::Location(5_166_304),
                    "Missing 'endDate' parameter to $dateDiff",
                ),
                (
                    rawbson!({"$dateDiff": {"startDate": "$s", "endDate": "$b", "unit": "day"}}),
                    ErrorCode::Location(5_166_307),
                    "$dateDiff requires 'startDate' to be a date, but got string",
                ),
                (
                    rawbson!({"$dateDiff": {"startDate": "$a", "endDate": "$b", "unit": "day", "timezone": "Nowhere"}}),
                    ErrorCode::Location(40485),
                    "$dateDiff parameter 'timezone' value parsing failed :: caused by :: \
                     unrecognized time zone identifier: \"Nowhere\"",
                ),
                (
                    rawbson!({"$dateDiff": {"startDate": "$a", "endDate": "$b", "unit": "week", "startOfWeek": "someday"}}),
                    ErrorCode::Location(5_439_016),
                    "$dateDiff parameter 'startOfWeek' value cannot be recognized as a day of a \
                     week: someday",
                ),
                (
                    rawbson!({"$dateDiff": {"startDate": "$far", "endDate": "$farNeg", "unit": "millisecond"}}),
                    ErrorCode::Location(5_166_308),
                    "dateDiff overflowed",
                ),
            ],
        );
    }

    #[test]
    fn date_trunc() {
        let mut doc = doc();
        doc.append(cstr!("o"), date("2020-05-18T14:10:30Z"));
        let trunc = |unit: &str, bin: i64| rawbson!({"$dateTrunc": {"date": "$o", "unit": unit, "binSize": bin}});
        check(
            &doc,
            vec![
                (trunc("year", 1), Some(date("2020-01-01T00:00:00Z"))),
                (trunc("year", 3), Some(date("2018-01-01T00:00:00Z"))),
                (trunc("quarter", 1), Some(date("2020-04-01T00:00:00Z"))),
                (trunc("month", 6), Some(date("2020-01-01T00:00:00Z"))),
                (trunc("week", 1), Some(date("2020-05-17T00:00:00Z"))),
                (trunc("day", 1), Some(date("2020-05-18T00:00:00Z"))),
                (trunc("hour", 2), Some(date("2020-05-18T14:00:00Z"))),
                (trunc("minute", 15), Some(date("2020-05-18T14:00:00Z"))),
                // Bins of 7 seconds counted from 2000-01-01T00:00:00Z.
                (trunc("second", 7), Some(date("2020-05-18T14:10:25Z"))),
                (
                    rawbson!({"$dateTrunc": {"date": "$o", "unit": "week", "binSize": 2, "timezone": "America/Los_Angeles", "startOfWeek": "Monday"}}),
                    Some(date("2020-05-11T07:00:00Z")),
                ),
                (
                    rawbson!({"$dateTrunc": {"date": "$o", "unit": "day", "timezone": "+05:30"}}),
                    Some(date("2020-05-17T18:30:00Z")),
                ),
                (
                    rawbson!({"$dateTrunc": {"date": "$o", "unit": "hour", "timezone": "+05:30"}}),
                    Some(date("2020-05-18T13:30:00Z")),
                ),
                (
                    rawbson!({"$dateTrunc": {"date": "$missing", "unit": "hour"}}),
                    Some(RawBson::Null),
                ),
                (
                    rawbson!({"$dateTrunc": {"date": "$o", "unit": "hour", "binSize": null}}),
                    Some(RawBson::Null),
                ),
            ],
        );
        check_errors(
            &doc,
            vec![
                (
                    rawbson!({"$dateTrunc": {"unit": "day"}}),
                    ErrorCode::Location(5_439_009),
                    "Missing 'date' parameter to $dateTrunc",
                ),
                (
                    rawbson!({"$dateTrunc": {"date": "$o"}}),
                    ErrorCode::Location(5_439_010),
                    "Missing 'unit' parameter to $dateTrunc",
                ),
                (
                    rawbson!({"$dateTrunc": {"date": "$o", "unit": "day", "binSize": 0}}),
                    ErrorCode::Location(5_439_018),
                    "$dateTrunc requires 'binSize' to be greater than 0, but got value 0",
                ),
                (
                    rawbson!({"$dateTrunc": {"date": "$o", "unit": "day", "binSize": "x"}}),
                    ErrorCode::Location(5_439_017),
                    "$dateTrunc requires 'binSize' to be a 64-bit integer, but got value '\"x\"' \
                     of type string",
                ),
                (
                    rawbson!({"$dateTrunc": {"date": "$o", "unit": "day", "binSize": 200_000_000_000_i64}}),
                    ErrorCode::Location(5_439_006),
                    "dateTrunc unsupported binSize value",
                ),
                (
                    rawbson!({"$dateTrunc": {"date": "$o", "unit": "hour", "binSize": i64::MAX}}),
                    ErrorCode::Location(5_439_002),
                    "dateTrunc overflowed",
                ),
                (
                    rawbson!({"$dateTrunc": {"date": "$s", "unit": "hour"}}),
                    ErrorCode::Location(5_439_012),
                    "$dateTrunc requires 'date' to be a date, but got string",
                ),
            ],
        );
    }

    #[test]
    fn calendar_round_trips() {
        for days in [-800_000_i64, -719_468, -1, 0, 1, 10_957, 18_400, 2_932_896] {
            let (y, m, d) = civil_from_days(days);
            assert_eq!(days_from_civil(y, m, d), days, "{days}");
        }
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(-1), (1969, 12, 31));
        assert_eq!(iso_week(days_from_civil(2008, 12, 29)), (2009, 1));
        assert_eq!(iso_week(days_from_civil(2010, 1, 3)), (2009, 53));
    }
}
