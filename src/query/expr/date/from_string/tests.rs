use super::*;

fn date(o: &Outcome) -> Option<(i64, i64, i64, i64, i64, i64, i64)> {
    match o {
        Outcome::Date(p) => Some((p.year, p.month, p.day, p.hour, p.minute, p.second, p.micros)),
        _ => None,
    }
}

fn fmt(s: &str, f: &str) -> Outcome {
    with_format(s, f)
}

fn failed(o: &Outcome) -> String {
    match o {
        Outcome::Failed(msg) => msg.clone(),
        other => panic!("not a failure: {other:?}"),
    }
}

fn offset(o: &Outcome) -> Option<i64> {
    match o {
        Outcome::Date(p) => p.zone.as_ref().map(Zone::offset),
        _ => None,
    }
}

#[test]
fn every_format_specifier() {
    // %Y %m %d %H %M %S %L
    assert_eq!(
        date(&fmt("2017-07-04T11:56:02.813Z", "%Y-%m-%dT%H:%M:%S.%LZ")),
        Some((2017, 7, 4, 11, 56, 2, 813_000))
    );
    assert_eq!(
        date(&fmt("2017-07-04T11:56.02.8", "%Y-%m-%dT%H:%M.%S.%L")),
        Some((2017, 7, 4, 11, 56, 2, 800_000))
    );
    assert_eq!(
        date(&fmt("2017-07-04T11:56.02.81", "%Y-%m-%dT%H:%M.%S.%L")),
        Some((2017, 7, 4, 11, 56, 2, 810_000))
    );
    // One-digit day, month and hour; a short year is taken as written.
    assert_eq!(
        date(&fmt("6-5-24 7:08", "%m-%d-%Y %H:%M")),
        Some((24, 6, 5, 7, 8, 0, 0))
    );
    // %b %B: month names, either length, any case.
    assert_eq!(
        date(&fmt("15 January 2024", "%d %B %Y")),
        Some((2024, 1, 15, 0, 0, 0, 0))
    );
    assert_eq!(
        date(&fmt("15 jan 2024", "%d %b %Y")),
        Some((2024, 1, 15, 0, 0, 0, 0))
    );
    assert_eq!(
        date(&fmt("15 September 2024", "%d %b %Y")),
        Some((2024, 9, 15, 0, 0, 0, 0))
    );
    // %j counts from 0 (timelib) and carries over.
    assert_eq!(
        date(&fmt("2024-015", "%Y-%j")),
        Some((2024, 1, 16, 0, 0, 0, 0))
    );
    assert_eq!(
        date(&fmt("2023-366", "%Y-%j")),
        Some((2024, 1, 2, 0, 0, 0, 0))
    );
    assert_eq!(
        date(&fmt("2024-999", "%Y-%j")),
        Some((2026, 9, 26, 0, 0, 0, 0))
    );
    // %G %V %u (mongod's jstests).
    assert_eq!(date(&fmt("2017", "%G")), Some((2017, 1, 2, 0, 0, 0, 0)));
    assert_eq!(
        date(&fmt("2017, Week 53", "%G, Week %V")),
        Some((2018, 1, 1, 0, 0, 0, 0))
    );
    assert_eq!(
        date(&fmt("2017, Day 5", "%G, Day %u")),
        Some((2017, 1, 6, 0, 0, 0, 0))
    );
    assert_eq!(
        date(&fmt("53.7.2017", "%V.%u.%G")),
        Some((2018, 1, 7, 0, 0, 0, 0))
    );
    assert_eq!(date(&fmt("1.1.1", "%V.%u.%G")), Some((1, 1, 1, 0, 0, 0, 0)));
    assert_eq!(
        date(&fmt("2024-W03-1", "%G-W%V-%u")),
        Some((2024, 1, 15, 0, 0, 0, 0))
    );
    // %z: offsets, abbreviations, military letters, GMT forms.
    let z = fmt("4/26/1992:+0445", "%m/%d/%Y:%z");
    assert_eq!(offset(&z), Some(17_100));
    for (s, secs) in [
        ("2017-07-14T12:02:44.771 GMT", 0),
        ("2017-07-14T12:02:44.771 GMT+00:00", 0),
        ("2017-07-14T12:02:44.771 GMT+02", 7200),
        ("2017-07-14T12:02:44.771+03", 10_800),
        ("2017-07-14T12:02:44.771+0330", 12_600),
        ("2017-07-14T12:02:44.771+03:30", 12_600),
        ("2017-07-14T12:02:44.771 UTC", 0),
        ("2017-07-14T12:02:44.771 CEST", 7200),
        ("2017-07-14T12:02:44.771 EST", -18_000),
        ("2017-07-14T12:02:44.771 PDT", -25_200),
        ("2017-07-14T12:02:44.771 A", 3600),
        ("2017-07-14T12:02:44.771 L", 39_600),
        ("2017-07-14T12:02:44.771 P", -10_800),
        ("2017-07-14T12:02:44.771 Z", 0),
        ("2017-07-14T12:02:44.771 +285", 2 * 3600 + 85 * 60),
    ] {
        assert_eq!(offset(&fmt(s, "%Y-%m-%dT%H:%M:%S.%L%z")), Some(secs), "{s}");
    }
    let abbr = fmt("2017-07-14T12:02:44 cest", "%Y-%m-%dT%H:%M:%S %z");
    assert!(
        matches!(&abbr, Outcome::Date(p) if p.zone == Some(Zone::Abbr { abbr: "CEST".into(), offset: 7200 }))
    );
    // %Z: minutes.
    assert_eq!(offset(&fmt("4/26/1992:+285", "%m/%d/%Y:%Z")), Some(17_100));
    assert_eq!(
        offset(&fmt("2024-01-15 10:30 -90", "%Y-%m-%d %H:%M %Z")),
        Some(-5400)
    );
    // %% and literals.
    assert_eq!(
        date(&fmt("1992 % 04 % 26", "%Y %% %m %% %d")),
        Some((1992, 4, 26, 0, 0, 0, 0))
    );
    assert_eq!(
        date(&fmt(
            "Day: 05 Month: 12 Year: 1988",
            "Day: %d Month: %m Year: %Y"
        )),
        Some((1988, 12, 5, 0, 0, 0, 0))
    );
    // An unknown abbreviation is not guessed.
    assert_eq!(fmt("2017-07-14 SGT", "%Y-%m-%d %z"), Outcome::Unsupported);
}

#[test]
fn format_errors_are_mongods() {
    let e = |s: &str, f: &str| failed(&fmt(s, f));
    assert_eq!(
        e("2024", "%Y"),
        "an incomplete date/time string has been found, with elements missing: \"2024\""
    );
    assert_eq!(
        e("2024-13-01", "%Y-%m-%d"),
        "Error parsing date string '2024-13-01'; 10: The parsed date was invalid '\0'"
    );
    assert_eq!(
        e("2024-01-15", "%Y/%m/%d"),
        "Error parsing date string '2024-01-15'; 4: Format literal not found '-'; 7: Format \
         literal not found '-'"
    );
    assert_eq!(
        e("2024-01", "%Y-%m-%d"),
        "Error parsing date string '2024-01'; 7: Not enough data available to satisfy format '\0'"
    );
    assert_eq!(
        e("2018-01", "%Y"),
        "Error parsing date string '2018-01'; 4: Trailing data '-'"
    );
    assert_eq!(
        e("abc", "%Y"),
        "Error parsing date string 'abc'; 0: Unexpected data found. 'a'; 0: A four digit year \
         could not be found 'a'"
    );
    assert_eq!(
        e("2024-01-15 EST", "%Y-%m-%d %Z"),
        "Error parsing date string '2024-01-15 EST'; 11: Invalid timezone offset in minutes 'E'; \
         11: Trailing data 'E'"
    );
    assert_eq!(
        e("2024-01-15 Europe/Dublin", "%Y-%m-%d %z"),
        "Error parsing date string '2024-01-15 Europe/Dublin'; 11: passing a time zone \
         identifier as part of the string is not allowed 'E'"
    );
    assert_eq!(
        e("2024 2024-W01-1", "%Y %G-W%V-%u"),
        "Error parsing date string '2024 2024-W01-1'; 15: Mixing of ISO dates with natural dates \
         is not allowed '\0'; 15: Mixing of ISO dates with natural dates is not allowed '\0'"
    );
    assert_eq!(
        e("015-2024", "%j-%Y"),
        "Error parsing date string '015-2024'; 0: A 'day of year' can only come after a year has \
         been found '0'"
    );
    assert!(e("1992-26-04", "Y-d-m").contains("Format literal not found"));
    assert!(e("ISO Day 6", "ISO Day %u").contains("The parsed date was invalid"));
    assert!(e("ISO Week 52", "ISO Week %V").contains("The parsed date was invalid"));
    assert!(
        e("ISO Week 1, 2018", "ISO Week %V, %Y")
            .contains("Mixing of ISO dates with natural dates is not allowed")
    );
    assert!(
        e("12/31/2018", "%m/%d/%G")
            .contains("Mixing of ISO dates with natural dates is not allowed")
    );
    // Embedded NULs end the C strings timelib reads.
    assert!(e("12/31\0/2018", "%m/%d/%Y").contains("Not enough data available"));
    assert!(e("12/31/2018", "%m/%d\0/%Y").contains("Trailing data"));
    assert_eq!(
        e("2024-02-30 10:61", "%Y-%m-%d %H:%M"),
        "Error parsing date string '2024-02-30 10:61'; 16: The parsed time was invalid '\0'; 16: \
         The parsed date was invalid '\0'"
    );
    assert!(e("q 2024", "%b %Y").contains("0: A textual month could not be found 'q'"));
    // timelib's month names include Roman numerals.
    assert_eq!(
        date(&fmt("5 x 2024", "%d %b %Y")),
        Some((2024, 10, 5, 0, 0, 0, 0))
    );
    assert_eq!(
        e("é", "%Y"),
        "Error parsing date string 'é'; 0: Unexpected data found. '\u{fffd}'; 0: A four digit \
         year could not be found '\u{fffd}'"
    );
    assert!(e("2024 60", "%Y %V").contains("ISO Week must be between 1 and 53"));
    assert!(e("2024 8", "%G %u").contains("Day of week must be between 1 and 7"));
    assert!(
        e("2024-01-01 1:5", "%Y-%m-%d %H:%M").contains("A two digit minute could not be found")
    );
}

#[test]
fn free_forms() {
    let d = |s: &str| date(&free(s));
    for (s, want) in [
        ("2017-02-08", (2017, 2, 8, 0, 0, 0, 0)),
        ("2017-02-08T12:10:40.787", (2017, 2, 8, 12, 10, 40, 787_000)),
        ("2017-02-08 12:10:40.7", (2017, 2, 8, 12, 10, 40, 700_000)),
        ("2017-02-08T12:10", (2017, 2, 8, 12, 10, 0, 0)),
        ("2017-02-08T12", (2017, 2, 8, 12, 0, 0, 0)),
        ("2017-2-8", (2017, 2, 8, 0, 0, 0, 0)),
        ("2017-07-04T11:56.02.813", (2017, 7, 4, 11, 56, 2, 813_000)),
        ("Feb 8 2017", (2017, 2, 8, 0, 0, 0, 0)),
        ("8 February 2017", (2017, 2, 8, 0, 0, 0, 0)),
        ("08 Feb 2017", (2017, 2, 8, 0, 0, 0, 0)),
        ("February 8, 2017 12:10:40", (2017, 2, 8, 12, 10, 40, 0)),
        ("July 4th, 2017", (2017, 7, 4, 0, 0, 0, 0)),
        ("July 4th, 2017 11am", (2017, 7, 4, 11, 0, 0, 0)),
        ("July 4th, 2017 12pm", (2017, 7, 4, 12, 0, 0, 0)),
        ("2024-01-01 12:00 AM", (2024, 1, 1, 0, 0, 0, 0)),
        ("2024-01-01 10:30 p.m.", (2024, 1, 1, 22, 30, 0, 0)),
        ("2024-01-01 10 pm", (2024, 1, 1, 22, 0, 0, 0)),
        ("7/4/17", (2017, 7, 4, 0, 0, 0, 0)),
        ("02/08/2017", (2017, 2, 8, 0, 0, 0, 0)),
        ("2017/02/08", (2017, 2, 8, 0, 0, 0, 0)),
        ("04-07-2017", (2017, 7, 4, 0, 0, 0, 0)),
        ("08.02.2017", (2017, 2, 8, 0, 0, 0, 0)),
        ("2017-Jul-04", (2017, 7, 4, 0, 0, 0, 0)),
        ("8-Feb-2017", (2017, 2, 8, 0, 0, 0, 0)),
        // `datefull` wins the tie with `pgtextreverse`: day, month, year.
        ("08-Feb-20", (2020, 2, 8, 0, 0, 0, 0)),
        ("45-Feb-20", (2045, 2, 20, 0, 0, 0, 0)),
        ("Jan 2024", (2024, 1, 1, 0, 0, 0, 0)),
        ("2024 Jan", (2024, 1, 1, 0, 0, 0, 0)),
        ("Sept 2024", (2024, 9, 1, 0, 0, 0, 0)),
        ("22:00 2024-01-01", (2024, 1, 1, 22, 0, 0, 0)),
        ("  2017-02-08  ", (2017, 2, 8, 0, 0, 0, 0)),
        ("20170208", (2017, 2, 8, 0, 0, 0, 0)),
        ("20170208T12:10:40", (2017, 2, 8, 12, 10, 40, 0)),
        ("2017-Jul-04 noon", (2017, 7, 4, 12, 0, 0, 0)),
        ("2017-07-04 10:00 midnight", (2017, 7, 4, 0, 0, 0, 0)),
        ("now 2017-07-04", (2017, 7, 4, 0, 0, 0, 0)),
    ] {
        assert_eq!(d(s), Some(want), "{s}");
    }
    for (s, secs) in [
        ("2017-02-08T12:10:40Z", 0),
        ("2017-02-08T12:10:40+05:30", 19_800),
        ("2018-03-15 +10:00", 36_000),
        ("2017-02-08 12:10:40 GMT+02:00", 7200),
        ("2017-07-04 12:48:07 GMT+0545", 20_700),
        ("2017-07-04 12:48:07 GMT-0200", -7200),
        ("July 4th, 2017 12:39:30 BST", 3600),
        ("Wed, 08 Feb 2017 12:10:40 +0000", 0),
        ("2024-01-01T", -25_200),
        ("2024-01-01 22:30:00 IST", 7200),
        ("2024-01-01 22:30:00 utc", 0),
        ("2017-02-08T12:10:40 x", -39_600),
    ] {
        assert_eq!(offset(&free(s)), Some(secs), "{s}");
    }
    let wd = |s: &str| match free(s) {
        Outcome::Date(p) => p.weekday,
        _ => None,
    };
    assert_eq!(wd("Wed, 08 Feb 2017 12:10:40 +0000"), Some(3));
    assert_eq!(wd("Sunday 01 Jan 2024"), Some(0));
    let rel = |s: &str| match free(s) {
        Outcome::Date(p) => Some((p.year, p.month, p.day, p.rel_days)),
        _ => None,
    };
    // January 1st and timelib's `timelib_daynr_from_weeknr`.
    assert_eq!(rel("2017-W05-3"), Some((2017, 1, 1, 31)));
    assert_eq!(rel("2017W053"), Some((2017, 1, 1, 31)));
    assert_eq!(rel("2024-W01-1"), Some((2024, 1, 1, 0)));
    assert_eq!(rel("2020-W53-7"), Some((2020, 1, 1, 368)));
    assert_eq!(rel("2017-W05"), Some((2017, 1, 1, 29)));
    assert_eq!(rel("2017-07-04 tomorrow"), Some((2017, 7, 4, 1)));
    assert_eq!(rel("yesterday 2017-07-04"), Some((2017, 7, 4, -1)));
}

#[test]
fn free_errors_are_mongods() {
    let e = |s: &str| failed(&free(s));
    assert_eq!(e(""), "Error parsing date string ''; 0: Empty string '\0'");
    assert_eq!(
        e("2024-02-30"),
        "Error parsing date string '2024-02-30'; 11: The parsed date was invalid '\0'"
    );
    assert_eq!(
        e("2024-01-01 23:59:60"),
        "Error parsing date string '2024-01-01 23:59:60'; 20: The parsed time was invalid '\0'"
    );
    assert_eq!(
        e("12:00"),
        "an incomplete date/time string has been found, with elements missing: \"12:00\""
    );
    assert!(e("July 4th").starts_with("an incomplete date/time string has been found"));
    assert!(e("12:50:53").starts_with("an incomplete date/time string has been found"));
    assert!(e("now").starts_with("an incomplete date/time string has been found"));
    assert!(e("today").starts_with("an incomplete date/time string has been found"));
    assert_eq!(
        e("Jan, 2024"),
        "Error parsing date string 'Jan, 2024'; 10: The parsed date was invalid '\0'"
    );
    // A bare HHMM is a time (`gnunocolon`), or the year after a time; never a whole date.
    assert!(e("2017").starts_with("an incomplete date/time string has been found"));
    assert!(e("12:00 2017").starts_with("an incomplete date/time string has been found"));
    assert!(e("9999").starts_with("an incomplete date/time string has been found"));
    assert_eq!(
        e("2017-02-08 2400"),
        "Error parsing date string '2017-02-08 2400'; 16: The parsed time was invalid '\0'"
    );
    assert_eq!(
        e("2017-07-12T22:23:55 Europe/Amsterdam"),
        "Error parsing date string '2017-07-12T22:23:55 Europe/Amsterdam'; 20: passing a time \
         zone identifier as part of the string is not allowed 'E'"
    );
    assert!(e("2017-07-12T22:23:55 America/New_York").contains("time zone identifier"));
}

#[test]
fn free_unknown_forms_are_not_guessed() {
    for s in [
        "2024-13-01",
        "2024-01-01T25:00",
        "next monday",
        "2017-02-08 1230",
        "2017-02-08 12:30 2018",
        "2017 2018 2019",
        "tomorrow yesterday 2017-07-04",
        "2017-W54",
        "2017-W05-3 tomorrow",
        "+1 week",
        "@1234567890",
        "Feb 8 12:10",
        "2024-01-01 SGT",
        "8 X 2017",
        "10:00:30.5 pm 2024-01-01",
        "2024-01-01 0:30 am",
        "2024-01-01 +25:00",
        "20177-02-09T03:35:02.055",
        "2017-02-08\u{e9}",
    ] {
        assert_eq!(free(s), Outcome::Unsupported, "{s}");
    }
    assert!(certainly_invalid("20177-02-09T03:35:02.055"));
    assert!(!certainly_invalid("2017-02-09"));
    for s in [
        "invalid",
        "Invalid date string",
        "  garbage",
        "abcdef",
        "Feburary 8",
    ] {
        assert!(certainly_invalid(s), "{s}");
    }
    for s in [
        "Not even close",
        "abcde",
        "Sunday",
        "tomorrow noon",
        "second monday of",
        "Septembers",
        "Wednesdays",
        "x invalid",
    ] {
        assert!(!certainly_invalid(s), "{s}");
    }
}

#[test]
fn no_input_panics() {
    let parts = [
        "",
        "0",
        "9",
        "99",
        "2017",
        "99999",
        "9999999999",
        "-",
        "+",
        ":",
        ".",
        "/",
        " ",
        ",",
        "T",
        "t",
        "Z",
        "W",
        "am",
        "p.m.",
        "th",
        "Feb",
        "x",
        "GMT",
        "UTC",
        "Europe/Paris",
        "(",
        "%",
        "\0",
        "é",
        "Wed",
        "noon",
        "-99:99",
        "+2400",
    ];
    let formats = [
        "%Y", "%m", "%d", "%H", "%M", "%S", "%L", "%j", "%G", "%V", "%u", "%z", "%Z", "%b", "%%",
        "-", " ",
    ];
    for a in parts {
        for b in parts {
            for c in parts {
                let _ = free(&format!("{a}{b}{c}"));
            }
            for f in formats {
                for g in formats {
                    let _ = with_format(&format!("{a}{b}"), &format!("{f}{g}"));
                }
            }
        }
    }
}
