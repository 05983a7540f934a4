//! Calendar arithmetic and time zones for the date operators: mongod's `TimeZone` (UTC, fixed
//! offsets, IANA zones from jiff's bundled database), timelib's broken-down local time, and
//! `dateAdd`, `dateDiff`, `truncateDate` and `formatDate` of mongod's `date_time_support.cpp`.
//! Days and seconds are `i64` (proleptic Gregorian), so every BSON datetime works.

use std::fmt::Write as _;
use std::sync::OnceLock;

use jiff::tz::{TimeZone, TimeZoneDatabase};

use super::super::{CommandError, loc};

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

pub(super) fn database() -> &'static TimeZoneDatabase {
    static DB: OnceLock<TimeZoneDatabase> = OnceLock::new();
    DB.get_or_init(TimeZoneDatabase::bundled)
}

/// mongod's `TimeZoneDatabase::parseUtcOffset`: `±HH`, `±HHMM`, `±HH:MM`.
pub(super) fn parse_utc_offset(s: &str) -> Option<i64> {
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
    pub(super) fn offset_at(&self, utc_secs: i64) -> i64 {
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
    pub(super) fn local_to_utc(&self, local_secs: i64) -> i64 {
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
pub(super) fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468 + (day - 1)
}

/// The date of a day number: (year, month 1..=12, day 1..=31).
pub(super) fn civil_from_days(days: i64) -> (i64, i64, i64) {
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

pub(super) fn is_leap(y: i64) -> bool {
    y % 4 == 0 && (y % 100 != 0 || y % 400 == 0)
}

pub(super) fn days_in_month(y: i64, m: i64) -> i64 {
    match m {
        2 if is_leap(y) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// ISO day of week of a day number: 1 (Monday) ..= 7 (Sunday).
pub(super) fn iso_dow(days: i64) -> i64 {
    // 1970-01-01 was a Thursday.
    (days + 3).rem_euclid(7) + 1
}

/// ISO 8601 week-numbering (year, week) of a day number.
pub(super) fn iso_week(days: i64) -> (i64, i64) {
    // The Thursday of this ISO week decides the year.
    let thursday = days - iso_dow(days) + 4;
    let (iso_year, _, _) = civil_from_days(thursday);
    let week = (thursday - days_from_civil(iso_year, 1, 1)) / 7 + 1;
    (iso_year, week)
}

/// The day number of ISO (year, week, day of week), out-of-range values carried over.
pub(super) fn days_from_iso(year: i64, week: i64, dow: i64) -> i64 {
    let jan4 = days_from_civil(year, 1, 4);
    let monday = jan4 - (iso_dow(jan4) - 1);
    monday + (week - 1) * 7 + (dow - 1)
}

/// A broken-down local time (timelib's `timelib_time` after `unixtime2local`).
#[derive(Debug, Clone, Copy)]
pub(super) struct Local {
    pub(super) days: i64,
    pub(super) year: i64,
    pub(super) month: i64,
    pub(super) day: i64,
    pub(super) hour: i64,
    pub(super) minute: i64,
    pub(super) second: i64,
    pub(super) millis: i64,
    /// The UTC offset in force, seconds east.
    pub(super) offset: i64,
}

impl Local {
    pub(super) fn of(ms: i64, tz: &Tz) -> Local {
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
    pub(super) fn day_of_year(&self) -> i64 {
        self.days - days_from_civil(self.year, 1, 1) + 1
    }

    /// 1 (Sunday) ..= 7.
    pub(super) fn day_of_week(&self) -> i64 {
        iso_dow(self.days) % 7 + 1
    }

    /// mongod's `TimeZone::week`: weeks start on Sunday; days before the first Sunday are week 0.
    pub(super) fn week(&self) -> i64 {
        (self.day_of_year() - self.day_of_week() + 7) / 7
    }
}

/// The instant of a local date and time in `tz`: timelib's normalisation carries any value
/// over (month 13 is January of the next year, hour -1 the previous day's 23:00).
pub(super) fn from_local(
    tz: &Tz,
    days: i64,
    hour: i64,
    minute: i64,
    second: i64,
    millis: i64,
) -> Option<i64> {
    let secs = days
        .checked_mul(SECS_PER_DAY)?
        .checked_add(hour.checked_mul(3600)?)?
        .checked_add(minute.checked_mul(60)?)?
        .checked_add(second)?;
    let utc = tz.local_to_utc(secs);
    utc.checked_mul(1000)?.checked_add(millis)
}

/// Months added to (year, month), as mongod's `addMonths`.
pub(super) fn add_months(year: i64, month: i64, amount: i64) -> (i64, i64) {
    let total = year * 12 + (month - 1) + amount;
    (total.div_euclid(12), total.rem_euclid(12) + 1)
}

// ---- units ----

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Unit {
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
    pub(super) fn parse(s: &str) -> Option<Unit> {
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

    pub(super) fn name(self) -> &'static str {
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
    pub(super) fn fixed_ms(self) -> Option<i64> {
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
pub(super) fn parse_day_of_week(s: &str) -> Option<i64> {
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
pub(super) fn amount_valid(amount: i64, unit: Unit) -> bool {
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

pub(super) fn add_overflow() -> CommandError {
    loc(5_166_406, "dateAdd overflowed")
}

/// mongod's `dateAdd`: calendar units in the zone's wall-clock time (clamping the day to the
/// end of the month), hours and smaller as elapsed time.
pub(super) fn date_add(ms: i64, unit: Unit, amount: i64, tz: &Tz) -> Result<i64, CommandError> {
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
pub(super) fn date_diff(
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
pub(super) fn week_day(days: i64, start_of_week: i64) -> i64 {
    (iso_dow(days) - start_of_week + 7) % 7
}

pub(super) fn trunc_overflow(code: i32) -> CommandError {
    loc(code, "dateTrunc overflowed")
}

/// mongod's `truncateDate` with its default reference point, 2000-01-01T00:00 in `tz` (for
/// weeks, the first `start_of_week` day on or after it).
pub(super) fn date_trunc(
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

/// The months' English names (`%B`; their first three letters are `%b`).
const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];

/// The format `$dateToString` uses without `format`.
pub(super) const ISO_FORMAT: &str = "%Y-%m-%dT%H:%M:%S.%LZ";

/// mongod's `checkFormatString`: every `%` is followed by a known specifier.
pub(super) fn validate_format(format: &str) -> Result<(), CommandError> {
    let mut chars = format.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            continue;
        }
        match chars.next() {
            None => return Err(loc(18535, "Unmatched '%' at end of format string")),
            Some(
                '%' | 'b' | 'B' | 'd' | 'G' | 'H' | 'j' | 'L' | 'm' | 'M' | 'S' | 'w' | 'u' | 'U'
                | 'V' | 'Y' | 'z' | 'Z',
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
pub(super) fn padded(out: &mut String, n: i64, width: usize) -> Result<(), CommandError> {
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
pub(super) fn format_date(format: &str, ms: i64, tz: &Tz) -> Result<String, CommandError> {
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
            // MongoDB 7.0's month names, in title case.
            Some(c @ ('b' | 'B')) => {
                let name = usize::try_from(t.month - 1)
                    .ok()
                    .and_then(|i| MONTHS.get(i))
                    .copied()
                    .unwrap_or("");
                out.push_str(if c == 'b' {
                    name.get(..3).unwrap_or(name)
                } else {
                    name
                });
            }
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
