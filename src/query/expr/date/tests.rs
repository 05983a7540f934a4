//! The date operators against the manual's examples and mongod's errors.

use bson::{DateTime, RawDocumentBuf, rawbson, rawdoc};

use super::super::Expression;
use super::calendar::{civil_from_days, days_from_civil, iso_week};
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
            // Backward-compatible links of the IANA database, and GMT, as mongod's timelib has.
            (
                rawbson!({"$hour": {"date": "$d", "timezone": "US/Eastern"}}),
                Some(rawbson!(3)),
            ),
            (
                rawbson!({"$minute": {"date": "$d", "timezone": "Asia/Calcutta"}}),
                Some(rawbson!(45)),
            ),
            (
                rawbson!({"$hour": {"date": "$d", "timezone": "GMT"}}),
                Some(rawbson!(8)),
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
                rawbson!({"$dateToString": {"format": "%H %z %Z", "date": {"$add": ["$d", 180_i64 * 86_400_000]}, "timezone": "America/New_York"}}),
                Some(rawbson!("04 -0400 -240")),
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
                ErrorCode::Location(40533),
                "$year requires a string for the timezone argument, but was given a int (5)",
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
                rawbson!({"$dateToParts": {"date": "$p", "timezone": 5}}),
                ErrorCode::Location(40517),
                "timezone must evaluate to a string, found int",
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
    let diff =
        |unit: &str| rawbson!({"$dateDiff": {"startDate": "$a", "endDate": "$b", "unit": unit}});
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
            // mongod 7.0 checks the dates before the unit.
            (
                rawbson!({"$dateDiff": {"startDate": "$s", "endDate": "$b", "unit": "days"}}),
                ErrorCode::Location(5_166_307),
                "$dateDiff requires 'startDate' to be a date, but got string",
            ),
            (
                rawbson!({"$dateDiff": {"startDate": "$a", "endDate": "$b", "unit": "days"}}),
                ErrorCode::FailedToParse,
                "$dateDiff parameter 'unit' value parsing failed :: caused by :: unknown time \
                 unit value: days",
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

/// Every operator on the extreme dates, in every kind of zone, answers without panicking.
#[test]
fn extremes_never_panic() {
    let exprs = [
        rawbson!({"$dateToParts": {"date": "$x", "timezone": "$z", "iso8601": true}}),
        rawbson!({"$dateToString": {"date": "$x", "timezone": "$z", "format": "%G %V %U %j %Z"}}),
        rawbson!({"$week": {"date": "$x", "timezone": "$z"}}),
        rawbson!({"$dateAdd": {"startDate": "$x", "unit": "month", "amount": 7, "timezone": "$z"}}),
        rawbson!({"$dateSubtract": {"startDate": "$x", "unit": "year", "amount": 584_942_417, "timezone": "$z"}}),
        rawbson!({"$dateAdd": {"startDate": "$x", "unit": "second", "amount": -18_446_744_073_709_i64, "timezone": "$z"}}),
        rawbson!({"$dateDiff": {"startDate": "$x", "endDate": 0_i64, "unit": "week", "timezone": "$z"}}),
        rawbson!({"$dateDiff": {"startDate": {"$toDate": 0}, "endDate": "$x", "unit": "second", "timezone": "$z"}}),
        rawbson!({"$dateTrunc": {"date": "$x", "unit": "quarter", "binSize": 100_000_000_000_i64, "timezone": "$z"}}),
        rawbson!({"$dateTrunc": {"date": "$x", "unit": "millisecond", "binSize": i64::MAX, "timezone": "$z"}}),
        rawbson!({"$dateFromParts": {"year": 9999, "month": 32767, "day": 32767, "hour": 32767, "minute": 32767, "second": i64::MAX / 1000, "timezone": "$z"}}),
        rawbson!({"$dateFromParts": {"isoWeekYear": 1, "isoWeek": -32768, "isoDayOfWeek": -32768, "second": i64::MIN / 1000, "millisecond": i64::MIN / 1000, "timezone": "$z"}}),
    ];
    for ms in [i64::MIN, i64::MIN + 1, -1, 0, i64::MAX - 1, i64::MAX] {
        for zone in ["UTC", "America/New_York", "Asia/Kolkata", "+99:99", "-99"] {
            let mut doc = rawdoc! {"z": zone};
            doc.append(cstr!("x"), RawBson::DateTime(DateTime::from_millis(ms)));
            for expr in &exprs {
                // Errors are fine (overflow, unsupported $toDate); panics are not.
                let _ = eval_on(expr, &doc);
            }
        }
    }
}

#[test]
fn date_from_string() {
    let doc = doc();
    check(
        &doc,
        vec![
            (
                rawbson!({"$dateFromString": {"dateString": "2017-02-08T12:10:40.787"}}),
                Some(date("2017-02-08T12:10:40.787Z")),
            ),
            (
                rawbson!({"$dateFromString": {"dateString": "2017-02-08T12:10:40.787", "timezone": "America/New_York"}}),
                Some(date("2017-02-08T17:10:40.787Z")),
            ),
            (
                rawbson!({"$dateFromString": {"dateString": "2017-02-08"}}),
                Some(date("2017-02-08T00:00:00Z")),
            ),
            (
                rawbson!({"$dateFromString": {"dateString": "2017-02-08T12:10:40+05:30"}}),
                Some(date("2017-02-08T06:40:40Z")),
            ),
            (
                rawbson!({"$dateFromString": {"dateString": "2017-02-08T12:10:40Z", "timezone": "UTC"}}),
                Some(date("2017-02-08T12:10:40Z")),
            ),
            (
                rawbson!({"$dateFromString": {"dateString": "06-15-2018", "format": "%m-%d-%Y"}}),
                Some(date("2018-06-15T00:00:00Z")),
            ),
            (
                rawbson!({"$dateFromString": {"dateString": "15-06-2018", "format": "%d-%m-%Y", "timezone": "+02"}}),
                Some(date("2018-06-14T22:00:00Z")),
            ),
            (
                rawbson!({"$dateFromString": {"dateString": "$missing", "onNull": "none"}}),
                Some(rawbson!("none")),
            ),
            (
                rawbson!({"$dateFromString": {"dateString": "$n"}}),
                Some(RawBson::Null),
            ),
            (
                rawbson!({"$dateFromString": {"dateString": "2017-02-08", "format": null}}),
                Some(RawBson::Null),
            ),
            (
                rawbson!({"$dateFromString": {"dateString": "2017-02-08", "timezone": null}}),
                Some(RawBson::Null),
            ),
            (
                rawbson!({"$dateFromString": {"dateString": 5, "onError": "bad"}}),
                Some(rawbson!("bad")),
            ),
            // Without a format, the forms of mongod's jstests and the manual.
            (
                rawbson!({"$dateFromString": {"dateString": "Feb 8 2017"}}),
                Some(date("2017-02-08T00:00:00Z")),
            ),
            (
                rawbson!({"$dateFromString": {"dateString": "8 February 2017", "timezone": "America/New_York"}}),
                Some(date("2017-02-08T05:00:00Z")),
            ),
            (
                rawbson!({"$dateFromString": {"dateString": "February 8, 2017 12:10:40"}}),
                Some(date("2017-02-08T12:10:40Z")),
            ),
            (
                rawbson!({"$dateFromString": {"dateString": "2017-02-08 12:10:40 GMT+02:00"}}),
                Some(date("2017-02-08T10:10:40Z")),
            ),
            (
                rawbson!({"$dateFromString": {"dateString": "Wed, 08 Feb 2017 12:10:40 +0000"}}),
                Some(date("2017-02-08T12:10:40Z")),
            ),
            // timelib moves to the next day of that name.
            (
                rawbson!({"$dateFromString": {"dateString": "Tue, 01 Jan 2024 10:00:00 GMT"}}),
                Some(date("2024-01-02T10:00:00Z")),
            ),
            (
                rawbson!({"$dateFromString": {"dateString": "Sun, 01 Jan 2024"}}),
                Some(date("2024-01-07T00:00:00Z")),
            ),
            (
                rawbson!({"$dateFromString": {"dateString": "2017/02/08"}}),
                Some(date("2017-02-08T00:00:00Z")),
            ),
            (
                rawbson!({"$dateFromString": {"dateString": "02/08/2017"}}),
                Some(date("2017-02-08T00:00:00Z")),
            ),
            (
                rawbson!({"$dateFromString": {"dateString": "July 4th, 2017 12:39:30 BST"}}),
                Some(date("2017-07-04T11:39:30Z")),
            ),
            (
                rawbson!({"$dateFromString": {"dateString": "2017-07-04 12:48:07 GMT+0545"}}),
                Some(date("2017-07-04T07:03:07Z")),
            ),
            (
                rawbson!({"$dateFromString": {"dateString": "2017-07-14T12:02:44.771 PDT"}}),
                Some(date("2017-07-14T19:02:44.771Z")),
            ),
            (
                rawbson!({"$dateFromString": {"dateString": "2017-07-14T12:02:44.771 Z", "timezone": "UTC"}}),
                Some(date("2017-07-14T12:02:44.771Z")),
            ),
            (
                rawbson!({"$dateFromString": {"dateString": "2017-07-04T11:56.02", "timezone": "Europe/London"}}),
                Some(date("2017-07-04T10:56:02Z")),
            ),
            // Before 1970, mongod's cast of seconds plus microseconds to milliseconds rounds towards
            // zero: later in time.
            (
                rawbson!({"$dateFromString": {"dateString": "1969-12-31T23:59:59.0005"}}),
                Some(date("1969-12-31T23:59:59.001Z")),
            ),
            (
                rawbson!({"$dateFromString": {"dateString": "1969-12-31T23:59:58.9996"}}),
                Some(date("1969-12-31T23:59:59.000Z")),
            ),
            (
                rawbson!({"$dateFromString": {"dateString": "2017-W05-3"}}),
                Some(date("2017-02-01T00:00:00Z")),
            ),
            (
                rawbson!({"$dateFromString": {"dateString": "2020-W53-7 10:00"}}),
                Some(date("2021-01-03T10:00:00Z")),
            ),
            (
                rawbson!({"$dateFromString": {"dateString": "2017-07-04 tomorrow 10:00"}}),
                Some(date("2017-07-05T10:00:00Z")),
            ),
            (
                rawbson!({"$dateFromString": {"dateString": "Tue 2017-12-31 yesterday"}}),
                Some(date("2018-01-01T00:00:00Z")),
            ),
            // With a format: every specifier.
            (
                rawbson!({"$dateFromString": {"dateString": "4/26/1992:+285", "format": "%m/%d/%Y:%Z"}}),
                Some(date("1992-04-25T19:15:00Z")),
            ),
            (
                rawbson!({"$dateFromString": {"dateString": "4/26/1992:+0445", "format": "%m/%d/%Y:%z"}}),
                Some(date("1992-04-25T19:15:00Z")),
            ),
            (
                rawbson!({"$dateFromString": {"dateString": "53.7.2017", "format": "%V.%u.%G"}}),
                Some(date("2018-01-07T00:00:00Z")),
            ),
            (
                rawbson!({"$dateFromString": {"dateString": "2024-015 10:20:30.4", "format": "%Y-%j %H:%M:%S.%L"}}),
                Some(date("2024-01-16T10:20:30.400Z")),
            ),
            (
                rawbson!({"$dateFromString": {"dateString": "15 Jan 2024", "format": "%d %b %Y", "timezone": "Asia/Tokyo"}}),
                Some(date("2024-01-14T15:00:00Z")),
            ),
            (
                rawbson!({"$dateFromString": {"dateString": "1992 % 04 % 26", "format": "%Y %% %m %% %d"}}),
                Some(date("1992-04-26T00:00:00Z")),
            ),
            // onError answers for every parse failure; onNull only for a null string.
            (
                rawbson!({"$dateFromString": {"dateString": "2018-01", "format": "%Y-%m-%d", "onError": "bad"}}),
                Some(rawbson!("bad")),
            ),
            (
                rawbson!({"$dateFromString": {"dateString": "July 4th", "onError": "bad"}}),
                Some(rawbson!("bad")),
            ),
            // mongod's jstest date_from_string_on_error.js.
            (
                rawbson!({"$dateFromString": {"dateString": "2017", "onError": "bad"}}),
                Some(rawbson!("bad")),
            ),
            (
                rawbson!({"$dateFromString": {"dateString": "invalid", "onError": "bad"}}),
                Some(rawbson!("bad")),
            ),
            (
                rawbson!({"$dateFromString": {"dateString": "Invalid date string", "format": null, "onError": "bad"}}),
                Some(RawBson::Null),
            ),
            (
                rawbson!({"$dateFromString": {"dateString": "2017-02-08 Europe/Paris", "onError": "bad"}}),
                Some(rawbson!("bad")),
            ),
            (
                rawbson!({"$dateFromString": {"dateString": "2017-02-08Z", "timezone": "Europe/Paris", "onError": "bad"}}),
                Some(rawbson!("bad")),
            ),
            (
                rawbson!({"$dateFromString": {"dateString": "$n", "format": "%Y", "onNull": "none", "onError": "bad"}}),
                Some(rawbson!("none")),
            ),
        ],
    );
    check_errors(
        &doc,
        vec![
            (
                rawbson!({"$dateFromString": {"dateString": 5}}),
                ErrorCode::ConversionFailure,
                "$dateFromString requires that 'dateString' be a string, found: int with value 5",
            ),
            (
                rawbson!({"$dateFromString": {"dateString": "2017-02-08T12:10:40+05:30", "timezone": "Europe/Paris"}}),
                ErrorCode::ConversionFailure,
                "you cannot pass in a date/time string with GMT offset together with a timezone \
                 argument",
            ),
            (
                rawbson!({"$dateFromString": {"dateString": "2017-02-08T12:10:40Z", "timezone": "Europe/Paris"}}),
                ErrorCode::ConversionFailure,
                "you cannot pass in a date/time string with time zone information ('Z') \
                 together with a timezone argument",
            ),
            (
                rawbson!({"$dateFromString": {"dateString": "next monday", "onError": "bad"}}),
                ErrorCode::NotImplemented,
                "$dateFromString of 'next monday' (a form of timelib's reading Ebb does not \
                 know) is not supported by Ebb yet",
            ),
            (
                rawbson!({"$dateFromString": {"dateString": "2017-07-12T22:23:55 CEST", "timezone": "Europe/Amsterdam"}}),
                ErrorCode::ConversionFailure,
                "you cannot pass in a date/time string with time zone information ('CEST') \
                 together with a timezone argument",
            ),
            (
                rawbson!({"$dateFromString": {"dateString": "2017-07-12T22:23:55 GMT+02:00", "timezone": "Europe/Amsterdam"}}),
                ErrorCode::ConversionFailure,
                "you cannot pass in a date/time string with GMT offset together with a timezone \
                 argument",
            ),
            (
                rawbson!({"$dateFromString": {"dateString": "4/26/1992:+0445", "format": "%m/%d/%Y:%z", "timezone": "+0500"}}),
                ErrorCode::ConversionFailure,
                "you cannot pass in a date/time string with GMT offset together with a timezone \
                 argument",
            ),
            (
                rawbson!({"$dateFromString": {"dateString": "2017-07-12T22:23:55 America/New_York", "timezone": "Europe/Amsterdam"}}),
                ErrorCode::ConversionFailure,
                "Error parsing date string '2017-07-12T22:23:55 America/New_York'; 20: passing a \
                 time zone identifier as part of the string is not allowed 'A'",
            ),
            (
                rawbson!({"$dateFromString": {"dateString": "Invalid date string"}}),
                ErrorCode::ConversionFailure,
                "Error parsing date string 'Invalid date string'",
            ),
            (
                rawbson!({"$dateFromString": {"dateString": "2018-01", "format": "%Y-%m-%d"}}),
                ErrorCode::ConversionFailure,
                "Error parsing date string '2018-01'; 7: Not enough data available to satisfy \
                 format '\0'",
            ),
            (
                rawbson!({"$dateFromString": {"dateString": "July 4th"}}),
                ErrorCode::ConversionFailure,
                "an incomplete date/time string has been found, with elements missing: \"July \
                 4th\"",
            ),
            (
                rawbson!({"$dateFromString": {"dateString": "1992", "format": "%Y%", "onError": "bad"}}),
                ErrorCode::Location(18535),
                "Unmatched '%' at end of format string",
            ),
            (
                rawbson!({"$dateFromString": {"dateString": "1992", "format": "%U"}}),
                ErrorCode::Location(18536),
                "Invalid format character '%U' in format string",
            ),
            (
                rawbson!({"$dateFromString": {"dateString": "1992", "format": "%n"}}),
                ErrorCode::Location(18536),
                "Invalid format character '%n' in format string",
            ),
            (
                rawbson!({"$dateFromString": {"dateString": "2017", "format": "%w"}}),
                ErrorCode::Location(18536),
                "Invalid format character '%w' in format string",
            ),
            (
                rawbson!({"$dateFromString": {"dateString": "2017", "format": 1}}),
                ErrorCode::Location(40684),
                "$dateFromString requires that 'format' be a string, found: int with value 1",
            ),
            (
                rawbson!({"$dateFromString": {"format": "%Y"}}),
                ErrorCode::Location(40542),
                "Missing 'dateString' parameter to $dateFromString",
            ),
            (
                rawbson!({"$dateFromString": {"dateString": "x", "y": 1}}),
                ErrorCode::Location(40541),
                "Unrecognized argument to $dateFromString: y",
            ),
            (
                rawbson!({"$dateFromString": "2017"}),
                ErrorCode::Location(40540),
                "$dateFromString only supports an object as an argument, found: string",
            ),
        ],
    );
}
