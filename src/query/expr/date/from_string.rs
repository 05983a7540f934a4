//! The strings `$dateFromString` reads: the common ISO 8601 forms without `format`
//! (`2017-02-08`, `2017-02-08T12:10:40.787`, with `Z` or a `±HH[:MM]` offset, also after a
//! space: `2018-03-15 +10:00`) and, with
//! `format`, the numeric specifiers `%Y %m %d %H %M %S %L`, `%z` and `%%`. Anything else is
//! `None`: timelib accepts many more forms and words its errors its own way, so the caller
//! answers `NotImplemented` rather than a value or message mongod would not give.

use super::calendar::days_in_month;

/// The zone a string names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Zone {
    /// `Z`: an abbreviation for timelib.
    Z,
    /// A numeric offset, seconds east.
    Offset(i64),
}

/// A parsed date and time (local to `zone` when there is one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Parsed {
    pub(super) year: i64,
    pub(super) month: i64,
    pub(super) day: i64,
    pub(super) hour: i64,
    pub(super) minute: i64,
    pub(super) second: i64,
    pub(super) millis: i64,
    pub(super) zone: Option<Zone>,
}

struct Cursor<'a> {
    rest: &'a [u8],
}

impl Cursor<'_> {
    /// 1 to `max` digits.
    fn digits(&mut self, max: usize) -> Option<i64> {
        let n = self
            .rest
            .iter()
            .take(max)
            .take_while(|c| c.is_ascii_digit())
            .count();
        if n == 0 {
            return None;
        }
        let (d, rest) = self.rest.split_at(n);
        self.rest = rest;
        Some(d.iter().fold(0, |acc, c| acc * 10 + i64::from(c - b'0')))
    }

    /// Exactly `n` digits.
    fn exact(&mut self, n: usize) -> Option<i64> {
        let before = self.rest.len();
        let v = self.digits(n)?;
        (before - self.rest.len() == n).then_some(v)
    }

    fn eat(&mut self, c: u8) -> bool {
        if self.rest.first() == Some(&c) {
            self.rest = self.rest.get(1..).unwrap_or_default();
            true
        } else {
            false
        }
    }

    /// `Z`, `±HH`, `±HHMM` or `±HH:MM`.
    fn zone(&mut self) -> Option<Zone> {
        if self.eat(b'Z') {
            return Some(Zone::Z);
        }
        let sign = if self.eat(b'+') {
            1
        } else if self.eat(b'-') {
            -1
        } else {
            return None;
        };
        let h = self.exact(2)?;
        let m = if self.eat(b':') {
            self.exact(2)?
        } else {
            self.exact(2).unwrap_or(0)
        };
        Some(Zone::Offset(sign * (h * 3600 + m * 60)))
    }
}

impl Parsed {
    /// The parsed values when they form a valid date and time.
    fn valid(self) -> Option<Parsed> {
        let ok = (1..=12).contains(&self.month)
            && (1..=days_in_month(self.year, self.month)).contains(&self.day)
            && (0..24).contains(&self.hour)
            && (0..60).contains(&self.minute)
            && (0..60).contains(&self.second);
        ok.then_some(self)
    }
}

/// `YYYY-MM-DD[(T| )HH:MM[:SS[.fraction]][zone]]`.
pub(super) fn parse_iso(s: &str) -> Option<Parsed> {
    let mut c = Cursor { rest: s.as_bytes() };
    let year = c.exact(4)?;
    c.eat(b'-').then_some(())?;
    let month = c.exact(2)?;
    c.eat(b'-').then_some(())?;
    let day = c.exact(2)?;
    let mut p = Parsed {
        year,
        month,
        day,
        hour: 0,
        minute: 0,
        second: 0,
        millis: 0,
        zone: None,
    };
    if !c.rest.is_empty() {
        let t = c.eat(b'T');
        (t || c.eat(b' ')).then_some(())?;
        // After a space, a zone may follow the date alone (`2018-03-15 +10:00`).
        let time = t || c.rest.first().is_some_and(u8::is_ascii_digit);
        if !time {
            p.zone = Some(c.zone()?);
            c.rest.is_empty().then_some(())?;
            return p.valid();
        }
        p.hour = c.exact(2)?;
        c.eat(b':').then_some(())?;
        p.minute = c.exact(2)?;
        if c.eat(b':') {
            p.second = c.exact(2)?;
            if c.eat(b'.') {
                // timelib keeps microseconds; a date keeps whole milliseconds.
                let digits = c.rest.iter().take_while(|b| b.is_ascii_digit()).count();
                if digits == 0 || digits > 9 {
                    return None;
                }
                let mut ms = 0;
                for (i, b) in c.rest.iter().take(digits).enumerate() {
                    if i < 3 {
                        ms = ms * 10 + i64::from(b - b'0');
                    }
                }
                for _ in digits..3 {
                    ms *= 10;
                }
                p.millis = ms;
                c.rest = c.rest.get(digits..).unwrap_or_default();
            }
        }
        while c.eat(b' ') {}
        if !c.rest.is_empty() {
            p.zone = Some(c.zone()?);
        }
    }
    c.rest.is_empty().then_some(())?;
    p.valid()
}

/// Whether mongod certainly fails to read `s` as a date (so the answer is its
/// `ConversionFailure`, not `NotImplemented`): an ISO-shaped date whose year has more than four
/// digits (`20177-02-09`), which none of timelib's date forms takes.
pub(super) fn certainly_invalid(s: &str) -> bool {
    let digits = s.bytes().take_while(u8::is_ascii_digit).count();
    digits > 4 && s.as_bytes().get(digits) == Some(&b'-')
}

/// `s` read with `format` (already validated by mongod's rules).
pub(super) fn parse_with_format(s: &str, format: &str) -> Option<Parsed> {
    let mut c = Cursor { rest: s.as_bytes() };
    let (mut year, mut month, mut day) = (None, None, None);
    let mut p = Parsed {
        year: 0,
        month: 0,
        day: 0,
        hour: 0,
        minute: 0,
        second: 0,
        millis: 0,
        zone: None,
    };
    let mut spec = format.bytes();
    while let Some(f) = spec.next() {
        if f != b'%' {
            c.eat(f).then_some(())?;
            continue;
        }
        match spec.next()? {
            b'Y' => year = Some(c.digits(4)?),
            b'm' => month = Some(c.digits(2)?),
            b'd' => day = Some(c.digits(2)?),
            b'H' => p.hour = c.digits(2)?,
            b'M' => p.minute = c.digits(2)?,
            b'S' => p.second = c.digits(2)?,
            b'L' => p.millis = c.digits(3)?,
            b'z' => p.zone = Some(c.zone()?),
            b'%' => c.eat(b'%').then_some(())?,
            _ => return None,
        }
    }
    c.rest.is_empty().then_some(())?;
    p.year = year?;
    p.month = month?;
    p.day = day?;
    p.valid()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(year: i64, month: i64, day: i64, hms: (i64, i64, i64), millis: i64) -> Parsed {
        Parsed {
            year,
            month,
            day,
            hour: hms.0,
            minute: hms.1,
            second: hms.2,
            millis,
            zone: None,
        }
    }

    #[test]
    fn iso_forms() {
        assert_eq!(parse_iso("2017-02-08"), Some(at(2017, 2, 8, (0, 0, 0), 0)));
        assert_eq!(
            parse_iso("2017-02-08T12:10:40.787"),
            Some(at(2017, 2, 8, (12, 10, 40), 787))
        );
        assert_eq!(
            parse_iso("2017-02-08 12:10:40.7"),
            Some(at(2017, 2, 8, (12, 10, 40), 700))
        );
        assert_eq!(
            parse_iso("2017-02-08T12:10"),
            Some(at(2017, 2, 8, (12, 10, 0), 0))
        );
        let z = parse_iso("2017-02-08T12:10:40Z").map(|p| p.zone);
        assert_eq!(z, Some(Some(Zone::Z)));
        let spaced = parse_iso("2018-03-15 +10:00").map(|p| (p.day, p.hour, p.zone));
        assert_eq!(spaced, Some((15, 0, Some(Zone::Offset(36_000)))));
        let spaced = parse_iso("2018-03-15 10:20 -02:00").map(|p| (p.hour, p.zone));
        assert_eq!(spaced, Some((10, Some(Zone::Offset(-7_200)))));
        assert!(super::certainly_invalid("20177-02-09T03:35:02.055"));
        assert!(!super::certainly_invalid("2017-02-09"));
        assert!(!super::certainly_invalid("20170209"));
        let off = parse_iso("2017-02-08T12:10:40.787654-05:30").map(|p| (p.millis, p.zone));
        assert_eq!(off, Some((787, Some(Zone::Offset(-19_800)))));
        for bad in [
            "2017-02-30",
            "2017-13-01",
            "2017-02-08T24:00",
            "2017-2-8",
            "2017-02-08T12",
            "2017-02-08T12:10:40.",
            "2017-02-08T12:10:40 x",
            "Feb 8 2017",
            "",
        ] {
            assert_eq!(parse_iso(bad), None, "{bad}");
        }
    }

    #[test]
    fn formats() {
        assert_eq!(
            parse_with_format("06-15-2018", "%m-%d-%Y"),
            Some(at(2018, 6, 15, (0, 0, 0), 0))
        );
        assert_eq!(
            parse_with_format("6-5-2018 7:08:09.5", "%m-%d-%Y %H:%M:%S.%L"),
            Some(at(2018, 6, 5, (7, 8, 9), 5))
        );
        let z = parse_with_format("2018/06/15 +0430", "%Y/%m/%d %z").map(|p| p.zone);
        assert_eq!(z, Some(Some(Zone::Offset(16_200))));
        assert_eq!(parse_with_format("15-06-2018", "%m-%d-%Y"), None);
        assert_eq!(parse_with_format("2018-06", "%Y-%m"), None);
        assert_eq!(parse_with_format("2018-06-15x", "%Y-%m-%d"), None);
        assert_eq!(parse_with_format("2018 1", "%Y %j"), None);
    }
}
