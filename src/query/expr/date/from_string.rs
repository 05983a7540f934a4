//! The strings `$dateFromString` reads, as mongod reads them with timelib
//! (`TimeZoneDatabase::fromString` in `date_time_support.cpp`).
//!
//! - With `format` (`format`): every specifier of mongod's `kDateFromStringFormatMap`
//!   (`%b %B %d %G %H %j %L %m %M %S %u %V %Y %z %Z %%`), timelib's reading, errors and warnings
//!   included, so a string that does not match its format fails with mongod's message.
//! - Without `format` (`free`): the forms of timelib's `timelib_strtotime` that users send:
//!   ISO 8601 dates and times, `YYYY/MM/DD`, US `MM/DD/YYYY`, `D.M.YYYY`, `D-M-YYYY`, textual
//!   months (`Feb 8 2017`, `8 February 2017`, `February 8, 2017`, `July 4th, 2017`,
//!   `Feb 2017`), leading week days (RFC 2822 `Wed, 08 Feb 2017 12:10:40 +0000`, where timelib
//!   moves to the next such day), 12-hour times (`11am`, `10:30 p.m.`), and zones (`Z`,
//!   `±HH[[:]MM]`, `GMT±…`, `UTC`, common abbreviations, military letters; a time zone
//!   identifier is mongod's error), `YYYYMMDD`, ISO week dates (`2017-W05-3`), and the words
//!   `now today midnight noon tomorrow yesterday`. A string beyond these is `Unsupported`: the caller answers
//!   `NotImplemented`, never a date or message mongod would not give.

use std::fmt::Write as _;

use super::calendar::days_in_month;

mod format;
mod free;
mod zone;

/// The zone a string names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Zone {
    /// A numeric offset (timelib's zone type 1), seconds east.
    Offset(i64),
    /// An abbreviation (zone type 2): its upper-case text and UTC offset in seconds.
    Abbr { abbr: String, offset: i64 },
}

impl Zone {
    /// Seconds east of UTC.
    pub(super) fn offset(&self) -> i64 {
        match self {
            Zone::Offset(secs) | Zone::Abbr { offset: secs, .. } => *secs,
        }
    }
}

/// A string Ebb does not read the way timelib would.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Unsupported;

/// A fully read date and time, local to `zone` when there is one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Parsed {
    pub(super) year: i64,
    pub(super) month: i64,
    pub(super) day: i64,
    pub(super) hour: i64,
    pub(super) minute: i64,
    pub(super) second: i64,
    pub(super) micros: i64,
    pub(super) zone: Option<Zone>,
    /// timelib's relative week day (0 = Sunday): the date moves forward to it (0..=6 days).
    pub(super) weekday: Option<i64>,
    /// timelib's relative days (`tomorrow`, an ISO week date), added after the week day.
    pub(super) rel_days: i64,
}

/// The outcome of reading a string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Outcome {
    Date(Parsed),
    /// mongod's `ConversionFailure` message.
    Failed(String),
    Unsupported,
}

/// timelib's `TIMELIB_UNSET`, which its validity checks meet for a missing year.
const UNSET: i64 = -9_999_999;

/// The fields timelib has read (`None`: `TIMELIB_UNSET`).
#[derive(Debug, Default, Clone)]
struct Time {
    y: Option<i64>,
    m: Option<i64>,
    d: Option<i64>,
    h: Option<i64>,
    i: Option<i64>,
    s: Option<i64>,
    us: Option<i64>,
    zone: Option<Zone>,
    weekday: Option<i64>,
    rel_days: Option<i64>,
}

/// A read: the fields, and timelib's errors and warnings (position, message).
#[derive(Debug, Default)]
struct Read {
    t: Time,
    errors: Vec<(usize, &'static str)>,
    warnings: Vec<(usize, &'static str)>,
}

impl Read {
    fn error(&mut self, at: usize, msg: &'static str) {
        self.errors.push((at, msg));
    }

    fn warning(&mut self, at: usize, msg: &'static str) {
        self.warnings.push((at, msg));
    }

    /// timelib's `TIMELIB_ERR_TZID_NOT_FOUND`, which mongod words its own way.
    fn zone_not_found(&mut self, at: usize) {
        self.error(
            at,
            "passing a time zone identifier as part of the string is not allowed",
        );
    }
}

/// A cursor over a C string: bytes past the end read as NUL.
#[derive(Debug, Clone, Copy)]
struct Cur<'a> {
    b: &'a [u8],
    p: usize,
}

impl<'a> Cur<'a> {
    fn at(&self, ahead: usize) -> u8 {
        self.p
            .checked_add(ahead)
            .and_then(|i| self.b.get(i))
            .copied()
            .unwrap_or(0)
    }

    fn peek(&self) -> u8 {
        self.at(0)
    }

    fn rest(&self) -> &'a [u8] {
        self.b.get(self.p..).unwrap_or_default()
    }

    /// timelib's `timelib_get_nr_ex`: skips to the next digit (`None` at the end), then reads
    /// up to `max` digits: (value, digits read).
    fn number(&mut self, max: usize) -> Option<(i64, usize)> {
        while !self.peek().is_ascii_digit() {
            if self.peek() == 0 {
                return None;
            }
            self.p += 1;
        }
        let mut n = 0;
        let mut len = 0;
        while len < max && self.peek().is_ascii_digit() {
            n = n * 10 + i64::from(self.peek() - b'0');
            self.p += 1;
            len += 1;
        }
        Some((n, len))
    }
}

/// timelib's `timelib_valid_time`.
fn valid_time(h: i64, i: i64, s: i64) -> bool {
    (0..=23).contains(&h) && (0..=59).contains(&i) && (0..=59).contains(&s)
}

/// timelib's `timelib_valid_date`.
fn valid_date(y: i64, m: i64, d: i64) -> bool {
    (1..=12).contains(&m) && d >= 1 && d <= days_in_month(y, m)
}

/// The bytes timelib sees: a C string ends at its first NUL.
fn c_string(s: &str) -> &[u8] {
    let b = s.as_bytes();
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    b.get(..end).unwrap_or_default()
}

/// mongod's checks after timelib's read, on the bytes timelib read (`b`).
fn finish(s: &str, b: &[u8], read: Read) -> Outcome {
    if !read.errors.is_empty() || !read.warnings.is_empty() {
        let mut msg = format!("Error parsing date string '{s}'");
        for (at, text) in read.errors.iter().chain(&read.warnings) {
            let c = b.get(*at).copied().unwrap_or(0);
            // mongod appends the byte itself, which past ASCII is a lone UTF-8 byte (no valid
            // string): Ebb writes U+FFFD there.
            let c = if c.is_ascii() {
                char::from(c)
            } else {
                '\u{fffd}'
            };
            let _ = write!(msg, "; {at}: {text} '{c}'");
        }
        return Outcome::Failed(msg);
    }
    let mut t = read.t;
    if t.h.is_none() && t.i.is_none() && t.s.is_none() {
        (t.h, t.i, t.s, t.us) = (Some(0), Some(0), Some(0), Some(0));
    }
    let (Some(year), Some(month), Some(day), Some(hour), Some(minute), Some(second)) =
        (t.y, t.m, t.d, t.h, t.i, t.s)
    else {
        return Outcome::Failed(format!(
            "an incomplete date/time string has been found, with elements missing: \"{s}\""
        ));
    };
    Outcome::Date(Parsed {
        year,
        month,
        day,
        hour,
        minute,
        second,
        micros: t.us.unwrap_or(0),
        zone: t.zone,
        weekday: t.weekday,
        rel_days: t.rel_days.unwrap_or(0),
    })
}

/// `s` read with `format` (already validated by mongod's rules).
pub(super) fn with_format(s: &str, format: &str) -> Outcome {
    let b = c_string(s);
    match format::read(b, c_string(format)) {
        Ok(read) => finish(s, b, read),
        Err(Unsupported) => Outcome::Unsupported,
    }
}

/// `s` read without a format, as `timelib_strtotime` reads it.
pub(super) fn free(s: &str) -> Outcome {
    let b = s.as_bytes();
    if b.is_empty() {
        let mut read = Read::default();
        read.error(0, "Empty string");
        return finish(s, b, read);
    }
    // timelib trims C white space at both ends, keeping one byte of an all-blank string.
    let blank = |c: &u8| matches!(c, b' ' | b'\t' | b'\n' | b'\x0b' | b'\x0c' | b'\r');
    let start = b
        .iter()
        .position(|c| !blank(c))
        .unwrap_or(b.len().saturating_sub(1));
    let end = b
        .iter()
        .rposition(|c| !blank(c))
        .map_or(start + 1, |e| e + 1);
    let trimmed = b.get(start..end).unwrap_or_default();
    match free::read(trimmed) {
        Ok(read) => finish(s, trimmed, read),
        Err(Unsupported) => Outcome::Unsupported,
    }
}

/// The scanner's words (and openings of its multi-word forms) of six letters or more, which
/// win over the six-letter zone token at the start of a longer word.
const LONG_KEYWORDS: &[&str] = &[
    "yesterday",
    "midnight",
    "tomorrow",
    "weekday",
    "monday",
    "tuesday",
    "wednesday",
    "thursday",
    "friday",
    "saturday",
    "sunday",
    "january",
    "february",
    "august",
    "september",
    "october",
    "november",
    "december",
    "second",
    "fourth",
    "seventh",
    "eighth",
    "eleventh",
    "twelfth",
    "previous",
    "millisecond",
    "microsecond",
    "minute",
    "fortnight",
    "forthnight",
    "months",
];

/// Whether mongod certainly fails to read `s` as a date (so the answer is its
/// `ConversionFailure`, not `NotImplemented`), though Ebb does not know the detail of
/// timelib's errors for it (the message is only their common opening):
/// - an ISO-shaped date whose year has more than four digits (`20177-02-09`), which none of
///   timelib's date forms takes;
/// - a string opening with a word of six letters or more that no timelib word opens
///   (`invalid`, `garbage`): the scanner reads its first six letters as a zone name, which
///   mongod's time zone lookup never finds.
pub(super) fn certainly_invalid(s: &str) -> bool {
    let digits = s.bytes().take_while(u8::is_ascii_digit).count();
    if digits > 4 && s.as_bytes().get(digits) == Some(&b'-') {
        return true;
    }
    let trimmed = s.trim_start_matches([' ', '\t', '\n', '\x0b', '\x0c', '\r']);
    let word: Vec<u8> = trimmed
        .bytes()
        .take_while(u8::is_ascii_alphabetic)
        .map(|c| c.to_ascii_lowercase())
        .collect();
    word.len() >= 6 && !LONG_KEYWORDS.iter().any(|k| word.starts_with(k.as_bytes()))
}

#[cfg(test)]
mod tests;
