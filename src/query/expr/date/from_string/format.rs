//! A string read with a `format`, as timelib's `timelib_parse_from_format_with_map` reads it with
//! mongod's `kDateFromStringFormatMap` (specifiers after `%`): the same fields, the same error
//! and warning messages at the same positions, reading on after an error as timelib does.

use super::super::calendar::{civil_from_days, days_from_civil, days_from_iso};
use super::zone::{self, ZoneRead};
use super::{Cur, Read, Unsupported};

const UNEXPECTED: &str = "Unexpected data found.";

/// `s` read with `format` (already validated: every `%` is followed by a known specifier).
pub(super) fn read(s: &[u8], format: &[u8]) -> Result<Read, Unsupported> {
    let mut c = Cur { b: s, p: 0 };
    let mut r = Read::default();
    let (mut iso_year, mut iso_week, mut iso_dow) = (None, None, None);
    let mut fp = 0;
    let mut prefix = false;
    while let Some(&f) = format.get(fp)
        && c.peek() != 0
    {
        let begin = c.p;
        if (!prefix && f != b'%') || (prefix && f == b'%') {
            if f != c.peek() {
                r.error(begin, "Format literal not found");
            }
            c.p += 1;
            fp += 1;
            prefix = false;
            continue;
        }
        if f == b'%' {
            fp += 1;
            prefix = true;
            continue;
        }
        prefix = false;
        let check_number = |r: &mut Read, c: &Cur<'_>| {
            if !c.peek().is_ascii_digit() {
                r.error(begin, UNEXPECTED);
            }
        };
        match f {
            b'b' | b'B' => match zone::lookup_month(&mut c) {
                0 => r.error(begin, "A textual month could not be found"),
                m => r.t.m = Some(m),
            },
            b'd' => {
                check_number(&mut r, &c);
                match c.number(2) {
                    None => r.error(begin, "A two digit day could not be found"),
                    Some((d, _)) => r.t.d = Some(d),
                }
            }
            b'G' => match c.number(4) {
                None => r.error(begin, "A four digit ISO year could not be found"),
                Some((y, _)) => iso_year = Some(y),
            },
            b'H' => {
                check_number(&mut r, &c);
                match c.number(2) {
                    None => r.error(begin, "A two digit hour could not be found"),
                    Some((h, _)) => r.t.h = Some(h),
                }
            }
            b'j' => {
                check_number(&mut r, &c);
                if r.t.y.is_none() {
                    r.error(
                        begin,
                        "A 'day of year' can only come after a year has been found",
                    );
                }
                match c.number(3) {
                    None => r.error(begin, "A three digit day-of-year could not be found"),
                    Some((n, _)) => {
                        // timelib counts the day of year from 0 and carries it into the
                        // months and years (`timelib_do_normalize`).
                        if let Some(y) = r.t.y {
                            let (y, m, d) = civil_from_days(days_from_civil(y, 1, 1) + n);
                            (r.t.y, r.t.m, r.t.d) = (Some(y), Some(m), Some(d));
                        }
                    }
                }
            }
            b'L' => {
                check_number(&mut r, &c);
                let from = c.p;
                match c.number(3) {
                    Some((n, _)) if c.p > from => {
                        let scale = match c.p - from {
                            1 => 100,
                            2 => 10,
                            3 => 1,
                            // Non-digits skipped before the number (an error was recorded).
                            _ => return Err(Unsupported),
                        };
                        r.t.us = Some(n * scale * 1000);
                    }
                    _ => r.error(begin, "A three digit millisecond could not be found"),
                }
            }
            b'm' => {
                check_number(&mut r, &c);
                match c.number(2) {
                    None => r.error(begin, "A two digit month could not be found"),
                    Some((m, _)) => r.t.m = Some(m),
                }
            }
            b'M' | b'S' => {
                check_number(&mut r, &c);
                match c.number(2) {
                    Some((n, 2)) if f == b'M' => r.t.i = Some(n),
                    Some((n, 2)) => r.t.s = Some(n),
                    _ if f == b'M' => r.error(begin, "A two digit minute could not be found"),
                    _ => r.error(begin, "A two digit second could not be found"),
                }
            }
            b'u' => match c.number(1) {
                None => r.error(begin, "A single digit day of week could not be found"),
                Some((n, _)) if !(1..=7).contains(&n) => {
                    r.error(begin, "Day of week must be between 1 and 7");
                }
                Some((n, _)) => iso_dow = Some(n),
            },
            b'V' => match c.number(2) {
                None => r.error(begin, "A two digit ISO week could not be found"),
                Some((n, _)) if !(1..=53).contains(&n) => {
                    r.error(begin, "ISO Week must be between 1 and 53");
                }
                Some((n, _)) => iso_week = Some(n),
            },
            b'Y' => {
                check_number(&mut r, &c);
                match c.number(4) {
                    None => r.error(begin, "A four digit year could not be found"),
                    Some((y, _)) => r.t.y = Some(y),
                }
            }
            b'z' => match zone::parse_zone(&mut c) {
                ZoneRead::Found(z) => r.t.zone = Some(z),
                ZoneRead::NotFound => r.zone_not_found(begin),
                ZoneRead::Unsupported => return Err(Unsupported),
            },
            b'Z' => match zone::parse_minutes(&mut c).ok_or(Unsupported)? {
                ZoneRead::Found(z) => r.t.zone = Some(z),
                ZoneRead::NotFound | ZoneRead::Unsupported => {
                    r.error(begin, "Invalid timezone offset in minutes");
                }
            },
            // Validation admits no other specifier.
            _ => return Err(Unsupported),
        }
        fp += 1;
    }
    if c.peek() != 0 {
        r.error(c.p, "Trailing data");
    }
    if fp < format.len() {
        r.error(c.p, "Not enough data available to satisfy format");
    }
    let t = &mut r.t;
    if t.h.is_some() || t.i.is_some() || t.s.is_some() || t.us.is_some() {
        t.h = t.h.or(Some(0));
        t.i = t.i.or(Some(0));
        t.s = t.s.or(Some(0));
        t.us = t.us.or(Some(0));
    }
    let iso = iso_week.is_some() || iso_year.is_some() || iso_dow.is_some();
    if t.y.is_some() && iso {
        r.error(c.p, "Mixing of ISO dates with natural dates is not allowed");
    }
    let t = &mut r.t;
    if iso_year.is_some() && (t.y.is_some() || t.m.is_some() || t.d.is_some()) {
        r.error(c.p, "Mixing of ISO dates with natural dates is not allowed");
    }
    let t = &mut r.t;
    if let Some(year) = iso_year {
        let days = days_from_iso(year, iso_week.unwrap_or(1), iso_dow.unwrap_or(1));
        let (y, m, d) = civil_from_days(days);
        (t.y, t.m, t.d) = (Some(y), Some(m), Some(d));
    } else if iso {
        r.warning(c.p, "The parsed date was invalid");
    }
    let t = &r.t;
    if let (Some(h), Some(i), Some(s)) = (t.h, t.i, t.s)
        && !super::valid_time(h, i, s)
    {
        r.warning(c.p, "The parsed time was invalid");
    }
    let t = &r.t;
    if let (Some(y), Some(m), Some(d)) = (t.y, t.m, t.d)
        && !super::valid_date(y, m, d)
    {
        r.warning(c.p, "The parsed date was invalid");
    }
    Ok(r)
}
