//! The error labels mongod 7.0 adds to an error reply (`src/mongo/db/error_labels.cpp`):
//! one table of which codes are retryable and which make a transaction's error transient,
//! used for every error reply (`dispatch`) and for the ones `failCommand` shapes.

use bson::{RawBsonRef, RawDocument};

/// The labels mongod 7.0 adds to an error (`src/mongo/db/error_labels.cpp`), for what Ebb can
/// know: `TransientTransactionError` inside a transaction, `RetryableWriteError` for a
/// retryable write (or a commit or abort) failing with a retryable code,
/// `NonResumableChangeStreamError` for the change-stream codes that say so.
pub fn default_labels(
    command: &str,
    body: &RawDocument,
    code: Option<i32>,
    wc_code: Option<i32>,
) -> Vec<&'static str> {
    let present = |key: &str| {
        body.get(key)
            .ok()
            .flatten()
            .is_some_and(|v| !matches!(v, RawBsonRef::Null | RawBsonRef::Undefined))
    };
    let txn = present("txnNumber");
    let autocommit = present("autocommit");
    let commit_or_abort = matches!(command, "commitTransaction" | "abortTransaction");
    let mut labels = Vec::new();
    let transient = match code {
        Some(code) if txn && autocommit => {
            is_transient_transaction_error(code, wc_code.is_some(), commit_or_abort)
        }
        _ => false,
    };
    if transient {
        labels.push("TransientTransactionError");
    } else if txn
        && (!autocommit || commit_or_abort)
        && (code.is_some_and(is_retriable) || wc_code.is_some_and(is_retriable))
    {
        labels.push("RetryableWriteError");
    }
    if code.is_some_and(|c| matches!(c, 280 | 286)) {
        labels.push("NonResumableChangeStreamError");
    }
    labels
}

/// Whether an error of a change stream's `aggregate` or `getMore` with `code` gets mongod's
/// `ResumableChangeStreamError` label (`ErrorLabelBuilder::isResumableChangeStreamError`):
/// retriable and network errors, those that need retargeting, `RetryChangeStream` and
/// `FailedToSatisfyReadPreference`. Drivers resume the stream on it.
pub fn is_resumable_change_stream_error(command: &str, code: i32) -> bool {
    matches!(command, "aggregate" | "getMore")
        && (is_retriable(code)
            // Network errors: HostUnreachable, HostNotFound, NetworkTimeout, SocketException,
            // NetworkInterfaceExceededTimeLimit.
            || matches!(code, 6 | 7 | 89 | 9001 | 202)
            // Needing retargeting: StaleShardVersion, StaleEpoch, StaleConfig, StaleDbVersion.
            || matches!(code, 63 | 150 | 13388 | 249)
            // RetryChangeStream, FailedToSatisfyReadPreference, ResumeTenantChangeStream.
            || matches!(code, 234 | 133 | 299))
}

/// mongod's `RetriableError` category.
fn is_retriable(code: i32) -> bool {
    matches!(
        code,
        6 | 7
            | 89
            | 91
            | 134
            | 189
            | 262
            | 317
            | 358
            | 384
            | 9001
            | 10107
            | 11600
            | 11602
            | 13435
            | 13436
            | 50915
    )
}

/// mongod's `isTransientTransactionError`.
fn is_transient_transaction_error(code: i32, has_wc_error: bool, commit_or_abort: bool) -> bool {
    // InternalTransactionNotSupported is retryable, never transient.
    if code == 358 {
        return false;
    }
    // WriteConflict, LockTimeout, PreparedTransactionInProgress,
    // ShardCannotRefreshDueToLocksHeld, StaleDbVersion.
    if matches!(code, 112 | 24 | 267 | 343 | 249) {
        return true;
    }
    // The SnapshotError and NeedRetargettingError categories.
    if matches!(code, 239 | 246 | 250 | 272 | 150 | 13388) {
        return true;
    }
    // NoSuchTransaction.
    if commit_or_abort {
        code == 251 && !has_wc_error
    } else {
        is_retriable(code) || code == 251
    }
}
