//! Cluster time in replica-set mode, around every command: the `$clusterTime` a client gossips
//! moves the clock forward before the command runs; the reply (or error) carries `$clusterTime`
//! with the dummy signature of a server without authentication, and `operationTime` (the write's
//! own time for a write, else the last write's); reads naming a cluster time are checked
//! against the clock, with mongod's errors.

use bson::{RawBsonRef, RawDocument, RawDocumentBuf, Timestamp, rawdoc};

use super::generic::{Limits, show_timestamp};
use crate::error::{CommandError, CommandResult, ErrorCode};
use crate::replset::{ReplSet, before};

/// How far ahead of the wall clock a gossiped cluster time may be (mongod's
/// `maxAcceptableLogicalClockDriftSecs`, one year).
const MAX_DRIFT_SECS: u32 = 365 * 24 * 60 * 60;

fn now_ms() -> i64 {
    bson::DateTime::now().timestamp_millis()
}

/// Reads a client's `$clusterTime` (`{clusterTime: Timestamp, signature: …}`) and moves the
/// clock forward to it. Without authentication mongod takes it unsigned; a time too far ahead
/// of the wall clock is refused (`ClusterTimeFailsRateLimiter`), as mongod's rate limiter does.
pub fn gossip_in(rs: &ReplSet, body: &RawDocument) -> CommandResult<()> {
    let Ok(Some(RawBsonRef::Document(gossip))) = body.get("$clusterTime") else {
        return Ok(());
    };
    let Ok(Some(RawBsonRef::Timestamp(ts))) = gossip.get("clusterTime") else {
        return Ok(());
    };
    let wall = u32::try_from(now_ms().div_euclid(1000)).unwrap_or(u32::MAX);
    if ts.time > wall.saturating_add(MAX_DRIFT_SECS) {
        return Err(CommandError::new(
            ErrorCode::ClusterTimeFailsRateLimiter,
            format!(
                "New $clusterTime, {}, is too far from this node's wall clock time, {wall}.",
                ts.time
            ),
        ));
    }
    // mongod's clock stops at seconds and increments of 2^31 - 1.
    let max = i32::MAX.unsigned_abs();
    if ts.time > max || ts.increment > max {
        return Err(CommandError::new(
            ErrorCode::Location(40484),
            "$clusterTime cannot be advanced beyond its maximum value",
        ));
    }
    rs.clock.advance(ts);
    Ok(())
}

/// `reply` with `$clusterTime` and `operationTime` appended.
pub fn append(
    rs: &ReplSet,
    mut reply: RawDocumentBuf,
    operation_time: Timestamp,
) -> RawDocumentBuf {
    reply.append(
        bson::raw::cstr!("$clusterTime"),
        rawdoc! {
            "clusterTime": rs.clock.cluster_time(),
            "signature": {
                "hash": bson::Binary {
                    subtype: bson::spec::BinarySubtype::Generic,
                    bytes: vec![0; 20],
                },
                "keyId": 0_i64,
            },
        },
    );
    reply.append(bson::raw::cstr!("operationTime"), operation_time);
    reply
}

/// The reply to a command that ran, its write done: the write's time is a new tick of the
/// clock (after the commit, so that a read naming it sees the write); other commands answer the
/// last write's time.
pub fn operation_time(rs: &ReplSet, wrote: bool) -> Timestamp {
    if wrote {
        rs.clock.tick(now_ms())
    } else {
        rs.clock.last_write().0
    }
}

/// Checks `readConcern.afterClusterTime` and `atClusterTime` as mongod's `waitForReadConcern`
/// does: a time later than the cluster time is refused (`InvalidOptions`); one later than the
/// last write takes a no-op write, so that the read's `operationTime` reaches it (on one member
/// every earlier write is committed: nothing else to wait for). Whether an `atClusterTime`
/// before the last write can be read is `crate::txn::History`'s to say.
pub fn check_read_times(rs: &ReplSet, limits: &Limits) -> CommandResult<()> {
    for (name, target) in [
        ("afterClusterTime", limits.after_cluster_time),
        ("atClusterTime", limits.at_cluster_time),
    ] {
        let Some(target) = target else { continue };
        let current = rs.clock.cluster_time();
        if before(current, target) {
            return Err(CommandError::new(
                ErrorCode::InvalidOptions,
                format!(
                    "readConcern {name} value must not be greater than the current clusterTime. \
                     Requested clusterTime: {}; current clusterTime: {}",
                    show_timestamp(target),
                    show_timestamp(current)
                ),
            ));
        }
        let last_write = rs.clock.last_write().0;
        if before(last_write, target) {
            rs.clock.tick(now_ms());
        }
    }
    Ok(())
}

/// The reply of a read at the `snapshot` level, with the time it read at: `atClusterTime` in
/// its `cursor` (find, aggregate) or beside its result (distinct), as mongod answers.
pub fn with_at_cluster_time(reply: &RawDocument, at: bson::Timestamp) -> RawDocumentBuf {
    let mut out = RawDocumentBuf::new();
    let mut placed = false;
    for elem in reply.iter().flatten() {
        let (key, value) = elem;
        match (key.as_str(), value) {
            ("cursor", bson::RawBsonRef::Document(cursor)) if !placed => {
                let mut c = RawDocumentBuf::new();
                for (k, v) in cursor.iter().flatten() {
                    c.append(k, v);
                }
                c.append(bson::raw::cstr!("atClusterTime"), at);
                out.append(key, c);
                placed = true;
            }
            ("ok", _) if !placed => {
                out.append(bson::raw::cstr!("atClusterTime"), at);
                out.append(key, value);
                placed = true;
            }
            _ => out.append(key, value),
        }
    }
    out
}

/// `reply` with `writeConcernError` before its `ok`, where mongod puts it.
pub fn with_write_concern_error(reply: &RawDocument, wce: RawDocumentBuf) -> RawDocumentBuf {
    let mut out = RawDocumentBuf::new();
    let mut pending = Some(wce);
    for elem in reply.iter_elements().map_while(Result::ok) {
        if elem.key().as_str() == "ok"
            && let Some(wce) = pending.take()
        {
            out.append(bson::raw::cstr!("writeConcernError"), wce);
        }
        if let Ok(value) = elem.value() {
            out.append(elem.key(), value);
        }
    }
    if let Some(wce) = pending {
        out.append(bson::raw::cstr!("writeConcernError"), wce);
    }
    out
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use bson::rawdoc;

    use super::*;
    use crate::storage::{GroupCommit, MemoryStorage};

    fn replset() -> ReplSet {
        let store = GroupCommit::new(Arc::new(MemoryStorage::new()));
        let rs = ReplSet::open("rs0", "localhost:1".into(), &store).unwrap();
        store.shutdown();
        rs
    }

    fn ts(time: u32, increment: u32) -> Timestamp {
        Timestamp { time, increment }
    }

    #[test]
    fn gossip_advances_and_far_future_is_refused() {
        let rs = replset();
        let now = rs.clock.cluster_time();
        let later = ts(now.time + 10, 3);
        gossip_in(
            &rs,
            &rawdoc! { "find": "c", "$clusterTime": { "clusterTime": later } },
        )
        .unwrap();
        assert_eq!(rs.clock.cluster_time(), later);
        let far = ts(u32::MAX, 1);
        let err = gossip_in(
            &rs,
            &rawdoc! { "ping": 1, "$clusterTime": { "clusterTime": far } },
        )
        .unwrap_err();
        assert_eq!(err.code, ErrorCode::ClusterTimeFailsRateLimiter);
        assert_eq!(rs.clock.cluster_time(), later);
        let err = gossip_in(
            &rs,
            &rawdoc! { "ping": 1, "$clusterTime": { "clusterTime": ts(now.time, u32::MAX) } },
        )
        .unwrap_err();
        assert_eq!(err.code, ErrorCode::Location(40484));
        // Malformed gossip is ignored.
        gossip_in(&rs, &rawdoc! { "ping": 1, "$clusterTime": 5 }).unwrap();
    }

    #[test]
    fn replies_carry_cluster_time_and_operation_time() {
        let rs = replset();
        let before_write = rs.clock.last_write().0;
        let op = operation_time(&rs, true);
        assert!(crate::replset::before(before_write, op));
        let reply = append(&rs, rawdoc! { "ok": 1.0 }, op);
        let keys: Vec<&str> = reply
            .iter_elements()
            .map(|e| e.unwrap().key().as_str())
            .collect();
        assert_eq!(keys, ["ok", "$clusterTime", "operationTime"]);
        let ct = reply.get_document("$clusterTime").unwrap();
        assert_eq!(ct.get_timestamp("clusterTime").unwrap(), op);
        let sig = ct.get_document("signature").unwrap();
        assert_eq!(sig.get_binary("hash").unwrap().bytes, &[0_u8; 20]);
        assert_eq!(sig.get_i64("keyId").unwrap(), 0);
        assert_eq!(operation_time(&rs, false), op);
    }

    #[test]
    fn read_times_are_checked_against_the_clock() {
        let rs = replset();
        let now = rs.clock.cluster_time();
        let future = ts(now.time + 100, 1);
        let limits = Limits {
            after_cluster_time: Some(future),
            ..Limits::default()
        };
        let err = check_read_times(&rs, &limits).unwrap_err();
        assert_eq!(err.code, ErrorCode::InvalidOptions);
        assert_eq!(
            err.errmsg,
            format!(
                "readConcern afterClusterTime value must not be greater than the current \
                 clusterTime. Requested clusterTime: Timestamp({}, 1); current clusterTime: \
                 Timestamp({}, {})",
                now.time + 100,
                now.time,
                now.increment
            )
        );
        // Gossiped, then named: a no-op write brings the last write to it.
        rs.clock.advance(future);
        check_read_times(&rs, &limits).unwrap();
        assert!(!crate::replset::before(rs.clock.last_write().0, future));
        // A time before the last write passes here: whether it can be read is the history's
        // to say (`crate::txn::History`).
        let old = Limits {
            at_cluster_time: Some(now),
            ..Limits::default()
        };
        check_read_times(&rs, &old).unwrap();
        let at_last = Limits {
            at_cluster_time: Some(rs.clock.last_write().0),
            ..Limits::default()
        };
        check_read_times(&rs, &at_last).unwrap();
    }

    #[test]
    fn write_concern_error_goes_before_ok() {
        let reply = rawdoc! { "n": 1, "ok": 1.0 };
        let out = with_write_concern_error(&reply, rawdoc! { "code": 100 });
        let keys: Vec<&str> = out
            .iter_elements()
            .map(|e| e.unwrap().key().as_str())
            .collect();
        assert_eq!(keys, ["n", "writeConcernError", "ok"]);
    }
}
