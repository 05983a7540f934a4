//! A string read without a format: the forms of timelib's `timelib_strtotime` scanner that Ebb
//! knows, token by token, with the scanner's regular-expression limits (a month is `0?[0-9]` or
//! `1[0-2]`, an hour `[01]?[0-9]` or `2[0-4]`, …). Anything else, or anything the scanner
//! might read as a longer token Ebb does not know, is `Unsupported`.

use super::zone::{self, ZoneRead};
use super::{Cur, Read, UNSET, Unsupported, Zone, valid_date, valid_time};

type R<T> = Result<T, Unsupported>;

const WEEKDAYS: &[(&str, i64)] = &[
    ("sunday", 0),
    ("monday", 1),
    ("tuesday", 2),
    ("wednesday", 3),
    ("thursday", 4),
    ("friday", 5),
    ("saturday", 6),
    ("sun", 0),
    ("mon", 1),
    ("tue", 2),
    ("wed", 3),
    ("thu", 4),
    ("fri", 5),
    ("sat", 6),
];

fn weekday(word: &[u8]) -> Option<i64> {
    WEEKDAYS
        .iter()
        .find(|(name, _)| name.as_bytes().eq_ignore_ascii_case(word))
        .map(|&(_, d)| d)
}

/// The scanner's `month`: `0?[0-9] | 1[0-2]`.
fn is_month(n: i64, len: usize) -> bool {
    len == 1 || (len == 2 && n <= 12)
}

/// The scanner's `day` (without suffix): `[0-2]?[0-9] | 3[01]`.
fn is_day(n: i64, len: usize) -> bool {
    len == 1 || (len == 2 && n <= 31)
}

/// The scanner's `hour24`: `[01]?[0-9] | 2[0-4]`.
fn is_hour24(n: i64, len: usize) -> bool {
    len == 1 || (len == 2 && n <= 24)
}

/// The scanner's `hour12`: `0?[1-9] | 1[0-2]`.
fn is_hour12(n: i64, len: usize) -> bool {
    (1..=12).contains(&n) && (len == 1 || len == 2)
}

/// timelib's `TIMELIB_PROCESS_YEAR`: a year of fewer than four digits below 100 is 19xx/20xx.
fn process_year(y: i64, len: usize) -> i64 {
    match y {
        _ if len >= 4 => y,
        0..70 => y + 2000,
        70..100 => y + 1900,
        _ => y,
    }
}

struct Reader<'a> {
    c: Cur<'a>,
    r: Read,
    have_date: bool,
    have_time: bool,
    have_zone: bool,
    /// Bare four-digit numbers read (`gnunocolon` or `year4`): timelib leaves the
    /// microseconds unset then, so Ebb only answers the errors such strings meet.
    bare: Bare,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Bare {
    No,
    Read,
    /// One was the year after a time (`gnunocolon` with a time already read).
    Year,
}

/// `b` (trimmed, not empty) read as timelib's scanner reads it.
pub(super) fn read(b: &[u8]) -> R<Read> {
    if b.iter()
        .any(|&c| c == 0 || !c.is_ascii() || (c.is_ascii_control() && c != b'\t'))
    {
        return Err(Unsupported);
    }
    let mut x = Reader {
        c: Cur { b, p: 0 },
        r: Read::default(),
        have_date: false,
        have_time: false,
        have_zone: false,
        bare: Bare::No,
    };
    loop {
        while matches!(x.c.peek(), b' ' | b'\t' | b',' | b'.') {
            x.c.p += 1;
        }
        match x.c.peek() {
            0 => break,
            b'0'..=b'9' => x.numeric()?,
            b'+' | b'-' => x.offset()?,
            c if c.is_ascii_alphabetic() => x.word()?,
            _ => return Err(Unsupported),
        }
    }
    // The scanner's checks run at its last token, one past the end of the string.
    let end = b.len() + 1;
    let t = &x.r.t;
    if x.have_time
        && !valid_time(
            t.h.unwrap_or(UNSET),
            t.i.unwrap_or(UNSET),
            t.s.unwrap_or(UNSET),
        )
    {
        x.r.warning(end, "The parsed time was invalid");
    }
    let t = &x.r.t;
    if x.have_date
        && !valid_date(
            t.y.unwrap_or(UNSET),
            t.m.unwrap_or(UNSET),
            t.d.unwrap_or(UNSET),
        )
    {
        x.r.warning(end, "The parsed date was invalid");
    }
    let t = &x.r.t;
    let fails = !x.r.errors.is_empty() || !x.r.warnings.is_empty();
    if x.bare != Bare::No && !fails && t.y.is_some() && t.m.is_some() && t.d.is_some() {
        return Err(Unsupported);
    }
    Ok(x.r)
}

impl Reader<'_> {
    /// A run of digits: (value, length); more than nine digits is no form Ebb reads.
    fn run(&mut self) -> R<(i64, usize)> {
        let begin = self.c.p;
        let mut n: i64 = 0;
        while self.c.peek().is_ascii_digit() {
            n = n * 10 + i64::from(self.c.peek() - b'0');
            self.c.p += 1;
            if self.c.p - begin > 9 {
                return Err(Unsupported);
            }
        }
        match self.c.p - begin {
            0 => Err(Unsupported),
            len => Ok((n, len)),
        }
    }

    /// After a number: no digit, `:`, `/` nor `.digit` that a longer token would take.
    fn end_number(&self) -> R<()> {
        let next = self.c.peek();
        let bad = next.is_ascii_digit()
            || matches!(next, b':' | b'/')
            || (next == b'.' && self.c.at(1).is_ascii_digit());
        if bad { Err(Unsupported) } else { Ok(()) }
    }

    fn letters(&mut self) -> &[u8] {
        let begin = self.c.p;
        while self.c.peek().is_ascii_alphabetic() {
            self.c.p += 1;
        }
        self.c.b.get(begin..self.c.p).unwrap_or_default()
    }

    fn date(&mut self, y: Option<i64>, m: i64, d: Option<i64>) -> R<()> {
        if self.have_date {
            return Err(Unsupported);
        }
        self.have_date = true;
        (self.r.t.y, self.r.t.m, self.r.t.d) = (y, Some(m), d);
        Ok(())
    }

    fn time(&mut self, h: i64, i: i64, s: i64, us: i64) -> R<()> {
        if self.have_time {
            return Err(Unsupported);
        }
        self.have_time = true;
        let t = &mut self.r.t;
        (t.h, t.i, t.s, t.us) = (Some(h), Some(i), Some(s), Some(us));
        Ok(())
    }

    fn zone(&mut self, z: Zone) -> R<()> {
        if self.have_zone {
            return Err(Unsupported);
        }
        self.have_zone = true;
        self.r.t.zone = Some(z);
        Ok(())
    }

    /// A token opening with a digit.
    fn numeric(&mut self) -> R<()> {
        let (n1, l1) = self.run()?;
        if l1 == 8 {
            // `datenocolon`: YYYYMMDD, two-digit month and day.
            let (y, m, d) = (n1 / 10_000, n1 / 100 % 100, n1 % 100);
            if m > 12 || d > 31 {
                return Err(Unsupported);
            }
            self.end_number()?;
            return self.date(Some(y), m, Some(d));
        }
        if l1 == 4 && (self.c.peek() == b'W' || (self.c.peek() == b'-' && self.c.at(1) == b'W')) {
            return self.iso_week(n1);
        }
        match self.c.peek() {
            b'-' if self.c.at(1).is_ascii_digit() => {
                self.c.p += 1;
                let (n2, l2) = self.run()?;
                if self.c.peek() != b'-' || !self.c.at(1).is_ascii_digit() {
                    return Err(Unsupported);
                }
                self.c.p += 1;
                let (n3, l3) = self.run()?;
                self.end_number()?;
                if l3 == 4 && l1 <= 2 && is_day(n1, l1) && is_month(n2, l2) {
                    // `pointeddate4`, longer than any year-first reading.
                    self.date(Some(n3), n2, Some(n1))
                } else if l1 <= 4 && is_month(n2, l2) && is_day(n3, l3) {
                    self.date(Some(process_year(n1, l1)), n2, Some(n3))
                } else {
                    Err(Unsupported)
                }
            }
            b'-' if self.c.at(1).is_ascii_alphabetic() && l1 <= 4 => {
                self.c.p += 1;
                let word = self.letters().to_vec();
                let m = zone::month(&word, false).ok_or(Unsupported)?;
                if self.c.peek() != b'-' || !self.c.at(1).is_ascii_digit() {
                    return Err(Unsupported);
                }
                self.c.p += 1;
                let (n3, l3) = self.run()?;
                self.end_number()?;
                if l1 <= 2 && is_day(n1, l1) {
                    // `datefull` (`8-Feb-2017`, `08-Feb-17`): as long as `pgtextreverse` or
                    // longer, and first among the scanner's rules.
                    if l3 > 4 {
                        return Err(Unsupported);
                    }
                    return self.date(Some(process_year(n3, l3)), m, Some(n1));
                }
                // `pgtextreverse`: year "-" monthabbr "-" daylz.
                if word.len() > 4 || l3 != 2 || n3 > 31 {
                    return Err(Unsupported);
                }
                self.date(Some(process_year(n1, l1)), m, Some(n3))
            }
            b'/' if self.c.at(1).is_ascii_digit() => {
                self.c.p += 1;
                let (n2, l2) = self.run()?;
                if l1 == 4 {
                    if self.c.peek() != b'/' || !self.c.at(1).is_ascii_digit() {
                        return Err(Unsupported);
                    }
                    self.c.p += 1;
                    let (n3, l3) = self.run()?;
                    if self.c.peek() == b'/' && l2 == 2 && l3 == 2 {
                        self.c.p += 1;
                    }
                    self.end_number()?;
                    if !is_month(n2, l2) || !is_day(n3, l3) {
                        return Err(Unsupported);
                    }
                    self.date(Some(n1), n2, Some(n3))
                } else if l1 <= 2 && is_month(n1, l1) && is_day(n2, l2) {
                    let year = if self.c.peek() == b'/' {
                        self.c.p += 1;
                        let (y, ly) = self.run()?;
                        if ly > 4 {
                            return Err(Unsupported);
                        }
                        Some(process_year(y, ly))
                    } else {
                        None
                    };
                    self.end_number()?;
                    self.date(year, n1, Some(n2))
                } else {
                    Err(Unsupported)
                }
            }
            b'.' if self.pointed_date(n1, l1)? => Ok(()),
            b':' | b'.' if self.c.at(1).is_ascii_digit() => self.clock(n1, l1),
            _ => self.number_then_words(n1, l1),
        }
    }

    /// `isoweekday` / `isoweek`: `YYYY-?Www(-?D)?` (the cursor after the year): January 1st
    /// and timelib's `timelib_daynr_from_weeknr` relative days.
    fn iso_week(&mut self, year: i64) -> R<()> {
        if self.c.peek() == b'-' {
            self.c.p += 1;
        }
        self.c.p += 1;
        let (w0, w1) = (self.c.peek(), self.c.at(1));
        if !w0.is_ascii_digit() || !w1.is_ascii_digit() {
            return Err(Unsupported);
        }
        let week = i64::from(w0 - b'0') * 10 + i64::from(w1 - b'0');
        if !(1..=53).contains(&week) {
            return Err(Unsupported);
        }
        self.c.p += 2;
        let dash = self.c.peek() == b'-';
        let digit = if dash { self.c.at(1) } else { self.c.peek() };
        let day = if matches!(digit, b'0'..=b'7') {
            self.c.p += usize::from(dash) + 1;
            i64::from(digit - b'0')
        } else {
            1
        };
        self.end_number()?;
        if self.r.t.rel_days.is_some() {
            return Err(Unsupported);
        }
        self.date(Some(year), 1, Some(1))?;
        // The day of week of January 1st, 0 = Sunday.
        let jan1 =
            (super::super::calendar::iso_dow(super::super::calendar::days_from_civil(year, 1, 1)))
                .rem_euclid(7);
        let first = if jan1 > 4 { 7 - jan1 } else { -jan1 };
        self.r.t.rel_days = Some(first + (week - 1) * 7 + day);
        Ok(())
    }

    /// `pointeddate4`: `D.M.YYYY` (the cursor after `D`); false (cursor kept) for another form.
    fn pointed_date(&mut self, n1: i64, l1: usize) -> R<bool> {
        let save = self.c.p;
        self.c.p += 1;
        let found = (|| {
            let (n2, l2) = self.run().ok()?;
            (self.c.peek() == b'.').then_some(())?;
            self.c.p += 1;
            let (n3, l3) = self.run().ok()?;
            let ok = l3 == 4 && l1 <= 2 && is_day(n1, l1) && is_month(n2, l2);
            ok.then_some((n2, n3))
        })();
        let Some((m, y)) = found else {
            self.c.p = save;
            return Ok(false);
        };
        self.end_number()?;
        self.date(Some(y), m, Some(n1))?;
        Ok(true)
    }

    /// A meridian (`am`, `p.m.`…) at the cursor, which the scanner wants followed by a blank
    /// or the end: (pm, length).
    fn meridian(&self) -> Option<(bool, usize)> {
        let pm = match self.c.peek() {
            b'a' | b'A' => false,
            b'p' | b'P' => true,
            _ => return None,
        };
        let mut k = 1;
        if self.c.at(k) == b'.' {
            k += 1;
        }
        if !matches!(self.c.at(k), b'm' | b'M') {
            return None;
        }
        k += 1;
        if self.c.at(k) == b'.' {
            k += 1;
        }
        matches!(self.c.at(k), 0 | b' ' | b'\t').then_some((pm, k))
    }

    /// timelib's `timelib_meridian`.
    fn with_meridian(h: i64, pm: bool) -> i64 {
        match (pm, h) {
            (false, 12) => 0,
            (true, 12) | (false, _) => h,
            (true, _) => h + 12,
        }
    }

    /// A clock time after its hour (`H:MM[:SS[.frac]]`, `:` or `.` between), maybe with a
    /// meridian.
    fn clock(&mut self, h: i64, lh: usize) -> R<()> {
        if !is_hour24(h, lh) {
            return Err(Unsupported);
        }
        self.c.p += 1;
        let (i, li) = self.run()?;
        if li > 2 || i > 59 {
            return Err(Unsupported);
        }
        let mut second = None;
        let mut us = 0;
        let mut frac = false;
        if matches!(self.c.peek(), b':' | b'.') && self.c.at(1).is_ascii_digit() {
            self.c.p += 1;
            let (s, ls) = self.run()?;
            if ls > 2 || s > 60 {
                return Err(Unsupported);
            }
            second = Some((s, ls));
            if self.c.peek() == b'.' && self.c.at(1).is_ascii_digit() {
                // timelib keeps microseconds (its `timelib_get_frac_nr`).
                self.c.p += 1;
                frac = true;
                let mut k = 0;
                while self.c.peek().is_ascii_digit() {
                    if k < 6 {
                        us = us * 10 + i64::from(self.c.peek() - b'0');
                        k += 1;
                    }
                    self.c.p += 1;
                }
                for _ in k..6 {
                    us *= 10;
                }
            }
        }
        self.end_number()?;
        let save = self.c.p;
        while matches!(self.c.peek(), b' ' | b'\t') {
            self.c.p += 1;
        }
        let mut h = h;
        if let Some((pm, len)) = self.meridian() {
            // `timeshort12` / `timelong12`: two-digit minutes (or seconds), no fraction.
            let ok = is_hour12(h, lh)
                && !frac
                && match second {
                    None => li == 2,
                    Some((_, ls)) => ls == 2,
                };
            if !ok {
                return Err(Unsupported);
            }
            h = Self::with_meridian(h, pm);
            self.c.p += len;
        } else {
            self.c.p = save;
        }
        self.time(h, i, second.map_or(0, |(s, _)| s), us)
    }

    /// A number followed by blanks or letters: `11am`, `8 February 2017`, `8th Feb`,
    /// `2017 Feb`.
    fn number_then_words(&mut self, n: i64, len: usize) -> R<()> {
        let save = self.c.p;
        while matches!(self.c.peek(), b' ' | b'\t') {
            self.c.p += 1;
        }
        if len <= 2
            && let Some((pm, k)) = self.meridian()
        {
            if !is_hour12(n, len) {
                return Err(Unsupported);
            }
            self.c.p += k;
            return self.time(Self::with_meridian(n, pm), 0, 0, 0);
        }
        self.c.p = save;
        if len == 4 {
            let mut ahead = self.c;
            while matches!(ahead.peek(), b' ' | b'\t' | b'.' | b'-') {
                ahead.p += 1;
            }
            let word_start = ahead.p;
            while ahead.peek().is_ascii_alphabetic() {
                ahead.p += 1;
            }
            let word = ahead.b.get(word_start..ahead.p).unwrap_or_default();
            if zone::month(word, true).is_none() {
                return self.bare_number(n);
            }
        }
        let day = len <= 2 && is_day(n, len);
        if day
            && matches!(
                self.c.rest(),
                [b's', b't', ..] | [b'n' | b'r', b'd', ..] | [b't', b'h', ..]
            )
        {
            self.c.p += 2;
        }
        while matches!(self.c.peek(), b' ' | b'\t' | b'.' | b'-') {
            self.c.p += 1;
        }
        let word = self.letters().to_vec();
        let m = zone::month(&word, true).ok_or(Unsupported)?;
        if zone::month(&word, false).is_none() {
            // A Roman numeral: a month here, but not in the forms Ebb reads.
            return Err(Unsupported);
        }
        if len == 4 {
            // `datenodayrev`.
            return self.date(Some(n), m, Some(1));
        }
        if !day {
            return Err(Unsupported);
        }
        let after_month = self.c.p;
        while matches!(self.c.peek(), b' ' | b'\t' | b'.' | b'-') {
            self.c.p += 1;
        }
        if self.c.peek().is_ascii_digit() {
            // `datefull`.
            let (y, ly) = self.run()?;
            if ly > 4 {
                return Err(Unsupported);
            }
            self.end_number()?;
            self.date(Some(process_year(y, ly)), m, Some(n))
        } else {
            // `datenoyearrev`.
            self.c.p = after_month;
            self.date(None, m, Some(n))
        }
    }

    /// A bare four-digit number: `gnunocolon` (`HHMM`, a time, or the year after a time) or,
    /// when it is no time, `year4`.
    fn bare_number(&mut self, n: i64) -> R<()> {
        self.end_number()?;
        if self.bare == Bare::No {
            self.bare = Bare::Read;
        }
        let (hh, mm) = (n / 100, n % 100);
        if hh > 24 || mm > 59 {
            self.r.t.y = Some(n);
        } else if !self.have_time {
            self.have_time = true;
            let t = &mut self.r.t;
            (t.h, t.i, t.s) = (Some(hh), Some(mm), Some(0));
        } else if self.bare != Bare::Year {
            self.bare = Bare::Year;
            self.r.t.y = Some(n);
        } else {
            return Err(Unsupported);
        }
        Ok(())
    }

    /// A numeric zone: `±H`, `±HH`, `±HMM`, `±HHMM`, `±H:MM`, `±HH:MM`.
    fn offset(&mut self) -> R<()> {
        let start = self.c.p;
        let mut end = start + 1;
        while self
            .c
            .b
            .get(end)
            .is_some_and(|c| c.is_ascii_digit() || *c == b':')
        {
            end += 1;
        }
        let body = self.c.b.get(start + 1..end).unwrap_or_default();
        let num = |s: &[u8]| {
            s.iter()
                .all(u8::is_ascii_digit)
                .then(|| s.iter().fold(0, |a, c| a * 10 + i64::from(c - b'0')))
        };
        let (h, m) = match body {
            [_] | [_, _] => (num(body), Some(0)),
            [h @ .., b':', m1, m2] if h.len() <= 2 => (num(h), num(&[*m1, *m2])),
            [h @ .., m1, m2] if h.len() <= 2 => (num(h), num(&[*m1, *m2])),
            _ => (None, None),
        };
        match (h, m) {
            (Some(h), Some(m)) if h <= 24 && m <= 59 => {}
            _ => return Err(Unsupported),
        }
        match zone::parse_zone(&mut self.c) {
            ZoneRead::Found(z) if self.c.p == end => {
                self.end_number()?;
                self.zone(z)
            }
            _ => Err(Unsupported),
        }
    }

    /// A token opening with a letter: a week day, a month, `T` and a time, or a zone.
    fn word(&mut self) -> R<()> {
        let start = self.c.p;
        if matches!(self.c.peek(), b'T' | b't') && self.c.at(1).is_ascii_digit() {
            self.c.p += 1;
            let (h, lh) = self.run()?;
            return if matches!(self.c.peek(), b':' | b'.') && self.c.at(1).is_ascii_digit() {
                self.clock(h, lh)
            } else if is_hour24(h, lh) {
                // `timetiny24`.
                self.end_number()?;
                self.time(h, 0, 0, 0)
            } else {
                Err(Unsupported)
            };
        }
        let word = self.letters().to_vec();
        if let Some(()) = self.keyword(&word)? {
            return Ok(());
        }
        if let Some(day) = weekday(&word) {
            // `daytext`: a relative week day, which also clears the time read so far.
            if self.r.t.weekday.is_some() || self.c.peek() == b'-' || self.c.peek() == b'/' {
                return Err(Unsupported);
            }
            self.r.t.weekday = Some(day);
            self.have_time = false;
            let t = &mut self.r.t;
            (t.h, t.i, t.s, t.us) = (Some(0), Some(0), Some(0), Some(0));
            return Ok(());
        }
        if let Some(m) = zone::month(&word, false) {
            return self.textual(m);
        }
        if word == b"GMT" && matches!(self.c.peek(), b'+' | b'-') {
            return self.offset();
        }
        let identifier =
            matches!(self.c.peek(), b'_' | b'/' | b'-') && self.c.at(1).is_ascii_alphabetic();
        if identifier {
            // The scanner's `[A-Z][a-z]+([_/-][A-Za-z]+)+`: a time zone identifier, which mongod
            // does not allow in the string.
            let shaped = word.len() >= 2
                && word.first().is_some_and(u8::is_ascii_uppercase)
                && word.iter().skip(1).all(u8::is_ascii_lowercase);
            if !shaped {
                return Err(Unsupported);
            }
            while matches!(self.c.peek(), b'_' | b'/' | b'-') && self.c.at(1).is_ascii_alphabetic()
            {
                self.c.p += 1;
                self.letters();
            }
            if self.c.p - start < 6 || !matches!(self.c.peek(), 0 | b' ' | b'\t' | b',') {
                return Err(Unsupported);
            }
            if self.have_zone {
                return Err(Unsupported);
            }
            self.have_zone = true;
            self.r.zone_not_found(start);
            return Ok(());
        }
        if !matches!(self.c.peek(), 0 | b' ' | b'\t' | b',' | b'+' | b'-') {
            return Err(Unsupported);
        }
        match zone::abbreviation(&word) {
            Some(offset) if word.len() < 6 => {
                let abbr = String::from_utf8_lossy(&word).to_ascii_uppercase();
                self.zone(Zone::Abbr { abbr, offset })
            }
            _ => Err(Unsupported),
        }
    }

    /// timelib's words `now today midnight noon tomorrow yesterday`.
    fn keyword(&mut self, word: &[u8]) -> R<Option<()>> {
        let lower = word.to_ascii_lowercase();
        let rel = match lower.as_slice() {
            b"now" => return Ok(Some(())),
            b"today" | b"midnight" | b"noon" => None,
            b"tomorrow" => Some(1),
            b"yesterday" => Some(-1),
            _ => return Ok(None),
        };
        if self.c.peek().is_ascii_alphanumeric() {
            return Err(Unsupported);
        }
        if let Some(rel) = rel {
            if self.r.t.rel_days.is_some() {
                return Err(Unsupported);
            }
            self.r.t.rel_days = Some(rel);
        }
        // `TIMELIB_UNHAVE_TIME`, then `noon` has a time of 12:00.
        self.have_time = false;
        let t = &mut self.r.t;
        (t.h, t.i, t.s, t.us) = (Some(0), Some(0), Some(0), Some(0));
        if lower == b"noon" {
            self.time(12, 0, 0, 0)?;
        }
        Ok(Some(()))
    }

    /// After a month name: `Feb 8 2017`, `February 8, 2017`, `July 4th, 2017`, `Feb 2017`,
    /// `July 4th`, or the month alone.
    fn textual(&mut self, m: i64) -> R<()> {
        let after_word = self.c.p;
        while matches!(self.c.peek(), b' ' | b'\t' | b'.' | b'-') {
            self.c.p += 1;
        }
        if !self.c.peek().is_ascii_digit() {
            // The month alone (`monthfull | monthabbr`).
            self.c.p = after_word;
            if self.c.peek().is_ascii_alphanumeric() {
                return Err(Unsupported);
            }
            if self.have_date {
                return Err(Unsupported);
            }
            self.have_date = true;
            self.r.t.m = Some(m);
            return Ok(());
        }
        let (n, len) = self.run()?;
        if len == 4 {
            // `datenoday`.
            self.end_number()?;
            return self.date(Some(n), m, Some(1));
        }
        if !is_day(n, len) || matches!(self.c.peek(), b':' | b'/' | b'-') {
            return Err(Unsupported);
        }
        if self.c.peek() == b'.' && self.c.at(1).is_ascii_digit() {
            return Err(Unsupported);
        }
        if matches!(
            self.c.rest(),
            [b's', b't', ..] | [b'n' | b'r', b'd', ..] | [b't', b'h', ..]
        ) {
            self.c.p += 2;
        }
        let seps = self.c.p;
        while matches!(
            self.c.peek(),
            b',' | b'.' | b's' | b't' | b'n' | b'd' | b'r' | b'h' | b'\t' | b' '
        ) {
            self.c.p += 1;
        }
        if self.c.p > seps && self.c.peek().is_ascii_digit() {
            // `datetextual`.
            let (y, ly) = self.run()?;
            if ly > 4 {
                return Err(Unsupported);
            }
            self.end_number()?;
            return self.date(Some(process_year(y, ly)), m, Some(n));
        }
        if self.c.peek().is_ascii_alphabetic() || (self.c.p == seps && self.c.peek() != 0) {
            return Err(Unsupported);
        }
        // `datenoyear`.
        self.date(None, m, Some(n))
    }
}
