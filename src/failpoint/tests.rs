use bson::rawdoc;

use super::*;

fn target<'a>(
    command: &'a str,
    body: &'a RawDocument,
    app: Option<&'a str>,
    is_alias: &'a (dyn Fn(&str) -> bool + Sync),
) -> Target<'a> {
    Target {
        command,
        is_alias,
        db: "test",
        collection: Some("c"),
        app_name: app,
        connection_id: 7,
        body,
        change_stream: false,
    }
}

fn set(fps: &FailPoints, body: &RawDocument) -> i64 {
    let reply = configure(fps, body).unwrap();
    match reply.get("count").unwrap().unwrap() {
        RawBsonRef::Int32(n) => i64::from(n),
        RawBsonRef::Int64(n) => n,
        other => panic!("count is {other:?}"),
    }
}

#[test]
fn code_names_are_sorted_and_known() {
    assert!(CODE_NAMES.windows(2).all(|w| w[0].0 < w[1].0));
    assert_eq!(code_name(91), "ShutdownInProgress");
    assert_eq!(code_name(10107), "NotWritablePrimary");
    assert_eq!(code_name(64), "WriteConcernFailed");
    assert_eq!(code_name(12_345_678), "Location12345678");
    // Ebb's own table agrees where both name a code.
    for code in [
        ErrorCode::BadValue,
        ErrorCode::CommandNotFound,
        ErrorCode::DuplicateKey,
        ErrorCode::FailPointSetFailed,
        ErrorCode::IDLUnknownField,
        ErrorCode::InterruptedAtShutdown,
    ] {
        assert_eq!(code_name(code.code()), code.name());
    }
}

#[test]
fn unknown_fail_point_and_bad_specs() {
    let fps = FailPoints::default();
    let err = configure(
        &fps,
        &rawdoc! { "configureFailPoint": "nope", "mode": "alwaysOn" },
    )
    .unwrap_err();
    assert_eq!(err.code, ErrorCode::FailPointSetFailed);
    assert_eq!(err.errmsg, "nope not found");
    let cases = [
        (
            rawdoc! { "configureFailPoint": "failCommand" },
            ErrorCode::IllegalOperation,
        ),
        (
            rawdoc! { "configureFailPoint": "failCommand", "mode": "sometimes" },
            ErrorCode::BadValue,
        ),
        (
            rawdoc! { "configureFailPoint": "failCommand", "mode": 1 },
            ErrorCode::TypeMismatch,
        ),
        (
            rawdoc! { "configureFailPoint": "failCommand", "mode": {"times": -1} },
            ErrorCode::BadValue,
        ),
        (
            rawdoc! { "configureFailPoint": "failCommand", "mode": {"times": "x"} },
            ErrorCode::TypeMismatch,
        ),
        (
            rawdoc! { "configureFailPoint": "failCommand", "mode": {"times": 1.5} },
            ErrorCode::BadValue,
        ),
        (
            rawdoc! { "configureFailPoint": "failCommand", "mode": {"skip": 3_000_000_000_i64} },
            ErrorCode::BadValue,
        ),
        (
            rawdoc! { "configureFailPoint": "failCommand", "mode": {"activationProbability": 2} },
            ErrorCode::BadValue,
        ),
        (
            rawdoc! { "configureFailPoint": "failCommand", "mode": {"activationProbability": "1"} },
            ErrorCode::TypeMismatch,
        ),
        (
            rawdoc! { "configureFailPoint": "failCommand", "mode": {"other": 1} },
            ErrorCode::BadValue,
        ),
        (
            rawdoc! { "configureFailPoint": "failCommand", "mode": "off", "data": 1 },
            ErrorCode::TypeMismatch,
        ),
    ];
    for (body, code) in cases {
        let err = configure(&fps, &body).unwrap_err();
        assert_eq!(err.code, code, "{body:?}: {err:?}");
    }
    let err = configure(
        &fps,
        &rawdoc! { "configureFailPoint": "failCommand", "mode": {"times": "x"} },
    )
    .unwrap_err();
    assert_eq!(
        err.errmsg,
        "Expected field \"times\" to have numeric type, but found string"
    );
}

#[test]
fn times_counts_exactly_and_count_reports_hits() {
    let fps = FailPoints::default();
    let body = rawdoc! { "insert": "c" };
    let alias = |n: &str| n == "insert";
    let t = target("insert", &body, None, &alias);
    let spec = rawdoc! {
        "configureFailPoint": "failCommand", "mode": {"times": 2},
        "data": {"failCommands": ["insert"], "errorCode": 2},
    };
    assert_eq!(set(&fps, &spec), 0);
    let fired = (0..5)
        .filter(|_| fps.fire(|d| selects(d, &t)).is_some())
        .count();
    assert_eq!(fired, 2);
    // A command it does not select is not counted.
    let other = rawdoc! { "find": "c" };
    let no = |_: &str| false;
    let spec = rawdoc! {
        "configureFailPoint": "failCommand", "mode": {"times": 1},
        "data": {"failCommands": ["insert"], "errorCode": 2},
    };
    assert_eq!(set(&fps, &spec), 2);
    assert!(
        fps.fire(|d| selects(d, &target("find", &other, None, &no)))
            .is_none()
    );
    assert!(fps.fire(|d| selects(d, &t)).is_some());
    let off = rawdoc! { "configureFailPoint": "failCommand", "mode": "off" };
    assert_eq!(set(&fps, &off), 3);
    assert!(fps.fire(|_| true).is_none());
}

#[test]
fn times_zero_fires_once_and_skip_skips() {
    let fps = FailPoints::default();
    set(
        &fps,
        &rawdoc! { "configureFailPoint": "failCommand", "mode": {"times": 0} },
    );
    assert!(fps.fire(|_| true).is_some());
    assert!(fps.fire(|_| true).is_none());
    set(
        &fps,
        &rawdoc! { "configureFailPoint": "failCommand", "mode": {"skip": 2} },
    );
    let fired: Vec<bool> = (0..4).map(|_| fps.fire(|_| true).is_some()).collect();
    assert_eq!(fired, [false, false, true, true]);
}

#[test]
fn probability_bounds() {
    let fps = FailPoints::default();
    set(
        &fps,
        &rawdoc! { "configureFailPoint": "failCommand", "mode": {"activationProbability": 0.0} },
    );
    assert!((0..1000).all(|_| fps.fire(|_| true).is_none()));
    set(
        &fps,
        &rawdoc! { "configureFailPoint": "failCommand", "mode": {"activationProbability": 1} },
    );
    assert!((0..1000).all(|_| fps.fire(|_| true).is_some()));
    set(
        &fps,
        &rawdoc! { "configureFailPoint": "failCommand", "mode": {"activationProbability": 0.5} },
    );
    let fired = (0..10_000).filter(|_| fps.fire(|_| true).is_some()).count();
    assert!((4000..6000).contains(&fired), "{fired}");
}

#[test]
fn times_is_exact_under_concurrency() {
    let fps = Arc::new(FailPoints::default());
    set(
        &fps,
        &rawdoc! { "configureFailPoint": "failCommand", "mode": {"times": 1000} },
    );
    let handles: Vec<_> = (0..8)
        .map(|_| {
            let fps = Arc::clone(&fps);
            std::thread::spawn(move || (0..500).filter(|_| fps.fire(|_| true).is_some()).count())
        })
        .collect();
    let total: usize = handles.into_iter().map(|h| h.join().unwrap()).sum();
    assert_eq!(total, 1000);
}

#[test]
fn selection_by_alias_app_namespace_and_thread() {
    let body = rawdoc! { "isMaster": 1 };
    let alias = |n: &str| matches!(n, "hello" | "isMaster" | "ismaster");
    let data = parse_data(&rawdoc! { "failCommands": ["hello"], "appName": "a" });
    assert!(selects(
        &data,
        &target("isMaster", &body, Some("a"), &alias)
    ));
    assert!(!selects(
        &data,
        &target("isMaster", &body, Some("b"), &alias)
    ));
    assert!(!selects(&data, &target("isMaster", &body, None, &alias)));
    let data = parse_data(&rawdoc! { "failAllCommands": true });
    let any = |_: &str| true;
    assert!(selects(&data, &target("ping", &body, None, &any)));
    assert!(!selects(
        &data,
        &target("configureFailPoint", &body, None, &any)
    ));
    let data = parse_data(&rawdoc! { "failAllCommands": true, "namespace": "test.c" });
    assert!(selects(&data, &target("find", &body, None, &any)));
    let mut t = target("find", &body, None, &any);
    t.collection = Some("d");
    assert!(!selects(&data, &t));
    let data = parse_data(&rawdoc! { "failAllCommands": true, "threadName": "conn8" });
    assert!(!selects(&data, &target("find", &body, None, &any)));
}

#[test]
fn labels_follow_mongods_rules() {
    let retryable = rawdoc! { "insert": "c", "txnNumber": 1_i64 };
    assert_eq!(
        crate::labels::default_labels("insert", &retryable, Some(91), None),
        ["RetryableWriteError"]
    );
    assert!(crate::labels::default_labels("insert", &retryable, Some(2), None).is_empty());
    assert!(
        crate::labels::default_labels("insert", &rawdoc! { "insert": "c" }, Some(91), None)
            .is_empty()
    );
    let in_txn = rawdoc! { "insert": "c", "txnNumber": 1_i64, "autocommit": false };
    assert_eq!(
        crate::labels::default_labels("insert", &in_txn, Some(112), None),
        ["TransientTransactionError"]
    );
    let commit = rawdoc! { "commitTransaction": 1, "txnNumber": 1_i64, "autocommit": false };
    assert_eq!(
        crate::labels::default_labels("commitTransaction", &commit, Some(91), None),
        ["RetryableWriteError"]
    );
    assert_eq!(
        crate::labels::default_labels("commitTransaction", &commit, Some(251), None),
        ["TransientTransactionError"]
    );
    // Given labels replace them; an empty array removes them.
    let body = rawdoc! { "insert": "c" };
    let alias = |_: &str| true;
    let t = target("insert", &body, None, &alias);
    let data = parse_data(&rawdoc! { "errorCode": 91, "errorLabels": ["X"] });
    let reply = error_reply(91, FAIL_MESSAGE, &data, &t);
    assert_eq!(
        reply,
        rawdoc! {
            "ok": 0.0, "errmsg": FAIL_MESSAGE, "code": 91,
            "codeName": "ShutdownInProgress", "errorLabels": ["X"],
        }
    );
    let data = parse_data(&rawdoc! { "errorCode": 91, "errorLabels": [] });
    let t = target("insert", &retryable, None, &alias);
    assert!(
        error_reply(91, FAIL_MESSAGE, &data, &t)
            .get("errorLabels")
            .unwrap()
            .is_none()
    );
}

#[test]
fn write_concern_error_goes_before_ok() {
    let fps = FailPoints::default();
    set(
        &fps,
        &rawdoc! {
            "configureFailPoint": "failCommand", "mode": {"times": 1},
            "data": {"failCommands": ["insert"], "writeConcernError": {"code": 91, "errmsg": "x"}},
        },
    );
    let body = rawdoc! { "insert": "c", "txnNumber": 1_i64 };
    let alias = |n: &str| n == "insert";
    let t = target("insert", &body, None, &alias);
    let reply = fps
        .after_command(&t, Ok(rawdoc! { "n": 1, "ok": 1.0 }))
        .unwrap();
    assert_eq!(
        reply,
        rawdoc! {
            "n": 1, "writeConcernError": {"code": 91, "errmsg": "x"},
            "errorLabels": ["RetryableWriteError"], "ok": 1.0,
        }
    );
    // Fired once: the next reply is untouched.
    let reply = fps
        .after_command(&t, Ok(rawdoc! { "n": 1, "ok": 1.0 }))
        .unwrap();
    assert_eq!(reply, rawdoc! { "n": 1, "ok": 1.0 });
}

#[test]
fn block_time_errors_surface_when_fired() {
    let data = parse_data(&rawdoc! { "blockConnection": true });
    assert_eq!(
        data.block.unwrap().unwrap_err().errmsg,
        "must specify 'blockTimeMS' when 'blockConnection' is true"
    );
    let data = parse_data(&rawdoc! { "blockConnection": true, "blockTimeMS": -1 });
    assert_eq!(
        data.block.unwrap().unwrap_err().errmsg,
        "'blockTimeMS' must be non-negative"
    );
    let data = parse_data(&rawdoc! { "blockConnection": 1, "blockTimeMS": 5.0 });
    assert_eq!(data.block.unwrap().unwrap(), 5);
}

/// `onPrimaryTransactionalWrite`: fires per statement as its mode says; closes the
/// connection unless `closeConnection: false`; fails before the commit with
/// `failBeforeCommitExceptionCode`.
#[test]
fn on_primary_transactional_write() {
    let points = FailPoints::default();
    assert!(points.on_transactional_write().is_none());
    configure(
        &points,
        &rawdoc! {
            "configureFailPoint": ON_PRIMARY_TRANSACTIONAL_WRITE,
            "mode": { "times": 1 },
            "data": { "failBeforeCommitExceptionCode": 1 },
        },
    )
    .expect("set");
    assert!(points.active());
    assert_eq!(
        points.on_transactional_write(),
        Some(TransactionalWrite {
            close: true,
            fail_code: Some(1)
        })
    );
    assert!(points.on_transactional_write().is_none(), "once");
    configure(
        &points,
        &rawdoc! {
            "configureFailPoint": ON_PRIMARY_TRANSACTIONAL_WRITE,
            "mode": "alwaysOn",
            "data": { "closeConnection": false },
        },
    )
    .expect("set");
    assert_eq!(
        points.on_transactional_write(),
        Some(TransactionalWrite {
            close: false,
            fail_code: None
        })
    );
}
