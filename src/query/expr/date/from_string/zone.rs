//! Zones inside a date string, as timelib's `timelib_parse_zone` reads them for mongod (which
//! never resolves a time zone identifier there), and the month names timelib knows.

use super::{Cur, Zone};

/// What a zone read found.
pub(super) enum ZoneRead {
    Found(Zone),
    /// timelib's "The timezone could not be found in the database" (mongod words it as
    /// "passing a time zone identifier as part of the string is not allowed").
    NotFound,
    /// A word Ebb's abbreviation table does not know but timelib's might.
    Unsupported,
}

/// timelib's abbreviations (the first entry of `timezonemap.h` for each, which is what a lookup
/// without an offset finds) that Ebb knows: the total UTC offset in seconds. `utc` and `gmt` are
/// timelib's own special case; the single letters are the military zones. Only abbreviations
/// whose zone has had one offset under that name are here (`HST` and `MSK` have had two, and
/// which entry timelib's table lists first varies with its version).
const ABBREVIATIONS: &[(&str, i64)] = &[
    ("utc", 0),
    ("gmt", 0),
    ("z", 0),
    ("a", 3600),
    ("b", 7200),
    ("c", 10_800),
    ("d", 14_400),
    ("e", 18_000),
    ("f", 21_600),
    ("g", 25_200),
    ("h", 28_800),
    ("i", 32_400),
    ("k", 36_000),
    ("l", 39_600),
    ("m", 43_200),
    ("n", -3600),
    ("o", -7200),
    ("p", -10_800),
    ("q", -14_400),
    ("r", -18_000),
    ("s", -21_600),
    ("t", -25_200),
    ("u", -28_800),
    ("v", -32_400),
    ("w", -36_000),
    ("x", -39_600),
    ("y", -43_200),
    ("akdt", -28_800),
    ("akst", -32_400),
    ("bst", 3600),
    ("cdt", -18_000),
    ("cest", 7200),
    ("cet", 3600),
    ("cst", -21_600),
    ("edt", -14_400),
    ("eest", 10_800),
    ("eet", 7200),
    ("est", -18_000),
    ("ist", 7200),
    ("jst", 32_400),
    ("mdt", -21_600),
    ("mst", -25_200),
    ("pdt", -25_200),
    ("pst", -28_800),
    ("wet", 0),
    ("west", 3600),
];

/// timelib's `MAX_ABBR_LEN` (glibc's `_POSIX_TZNAME_MAX`): longer words are never abbreviations.
const MAX_ABBR_LEN: usize = 6;

/// The UTC offset of an abbreviation Ebb knows.
pub(super) fn abbreviation(word: &[u8]) -> Option<i64> {
    ABBREVIATIONS
        .iter()
        .find(|(name, _)| name.as_bytes().eq_ignore_ascii_case(word))
        .map(|&(_, offset)| offset)
}

/// An abbreviation word's zone: `None` when Ebb cannot tell (a short word not in its table).
pub(super) fn word_zone(word: &[u8]) -> Option<ZoneRead> {
    if word.len() >= MAX_ABBR_LEN || word.is_empty() {
        return Some(ZoneRead::NotFound);
    }
    let offset = abbreviation(word)?;
    let abbr = String::from_utf8_lossy(word).to_ascii_uppercase();
    Some(ZoneRead::Found(Zone::Abbr { abbr, offset }))
}

/// Leading decimal digits as C's `strtol` reads them (0 when none).
fn strtol(b: &[u8]) -> i64 {
    b.iter()
        .take_while(|c| c.is_ascii_digit())
        .take(9)
        .fold(0, |acc, c| acc * 10 + i64::from(c - b'0'))
}

/// timelib's `timelib_parse_tz_cor`: the digits and colons after a sign, in seconds.
fn tz_cor(c: &mut Cur<'_>) -> Option<i64> {
    let begin = c.p;
    while c.peek().is_ascii_digit() || c.peek() == b':' {
        c.p += 1;
    }
    let b = c.b.get(begin..).unwrap_or_default();
    let at = |i: usize| b.get(i).copied().unwrap_or(0);
    let from = |i: usize| strtol(b.get(i..).unwrap_or_default());
    match c.p - begin {
        1 | 2 => Some(strtol(b) * 3600),
        3 | 4 if at(1) == b':' => Some(strtol(b) * 3600 + from(2) * 60),
        3 | 4 if at(2) == b':' => Some(strtol(b) * 3600 + from(3) * 60),
        3 | 4 => {
            let n = strtol(b);
            Some(n / 100 * 3600 + n % 100 * 60)
        }
        5 if at(2) == b':' => Some(strtol(b) * 3600 + from(3) * 60),
        6 => {
            let n = strtol(b);
            Some(n / 10_000 * 3600 + n / 100 % 100 * 60 + n % 100)
        }
        8 if at(2) == b':' && at(5) == b':' => Some(strtol(b) * 3600 + from(3) * 60 + from(6)),
        _ => None,
    }
}

/// timelib's `timelib_parse_zone` with mongod's time zone wrapper (which finds nothing).
pub(super) fn parse_zone(c: &mut Cur<'_>) -> ZoneRead {
    while matches!(c.peek(), b' ' | b'\t' | b'(') {
        c.p += 1;
    }
    if c.rest().starts_with(b"GMT") && matches!(c.at(3), b'+' | b'-') {
        c.p += 3;
    }
    let sign = match c.peek() {
        b'+' => 1,
        b'-' => -1,
        _ => 0,
    };
    let read = if sign == 0 {
        let begin = c.p;
        while matches!(c.peek(), b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'/' | b'_' | b'-' | b'+')
        {
            c.p += 1;
        }
        match word_zone(c.b.get(begin..c.p).unwrap_or_default()) {
            Some(read) => read,
            None => return ZoneRead::Unsupported,
        }
    } else {
        c.p += 1;
        match tz_cor(c) {
            Some(secs) => ZoneRead::Found(Zone::Offset(sign * secs)),
            None => ZoneRead::NotFound,
        }
    };
    while c.peek() == b')' {
        c.p += 1;
    }
    read
}

/// timelib's `timelib_parse_tz_minutes` (`%Z`): a sign and minutes.
pub(super) fn parse_minutes(c: &mut Cur<'_>) -> Option<ZoneRead> {
    let sign = match c.peek() {
        b'+' => 1,
        b'-' => -1,
        _ => return Some(ZoneRead::NotFound),
    };
    c.p += 1;
    let begin = c.p;
    while c.peek().is_ascii_digit() {
        c.p += 1;
    }
    // Beyond 7 digits timelib's `int` arithmetic overflows; Ebb does not guess.
    if c.p - begin > 7 {
        return None;
    }
    let minutes = strtol(c.b.get(begin..).unwrap_or_default());
    Some(ZoneRead::Found(Zone::Offset(sign * minutes * 60)))
}

/// The month names timelib's `timelib_lookup_month` knows (Roman numerals included).
const MONTHS: &[(&str, i64)] = &[
    ("jan", 1),
    ("feb", 2),
    ("mar", 3),
    ("apr", 4),
    ("may", 5),
    ("jun", 6),
    ("jul", 7),
    ("aug", 8),
    ("sep", 9),
    ("sept", 9),
    ("oct", 10),
    ("nov", 11),
    ("dec", 12),
    ("i", 1),
    ("ii", 2),
    ("iii", 3),
    ("iv", 4),
    ("v", 5),
    ("vi", 6),
    ("vii", 7),
    ("viii", 8),
    ("ix", 9),
    ("x", 10),
    ("xi", 11),
    ("xii", 12),
    ("january", 1),
    ("february", 2),
    ("march", 3),
    ("april", 4),
    ("june", 6),
    ("july", 7),
    ("august", 8),
    ("september", 9),
    ("october", 10),
    ("november", 11),
    ("december", 12),
];

/// The month a whole word names (case-insensitive), Roman numerals when `roman`.
pub(super) fn month(word: &[u8], roman: bool) -> Option<i64> {
    MONTHS
        .iter()
        .filter(|(name, _)| roman || !name.bytes().all(|b| matches!(b, b'i' | b'v' | b'x')))
        .find(|(name, _)| name.as_bytes().eq_ignore_ascii_case(word))
        .map(|&(_, m)| m)
}

/// timelib's `timelib_lookup_month`: the letters at the cursor, read as a month (0 when none).
pub(super) fn lookup_month(c: &mut Cur<'_>) -> i64 {
    let begin = c.p;
    while c.peek().is_ascii_alphabetic() {
        c.p += 1;
    }
    month(c.b.get(begin..c.p).unwrap_or_default(), true).unwrap_or(0)
}
