//! The replica set commands of a set of one (`--replSet`): `replSetInitiate` (the set is
//! initiated on its own), `replSetGetStatus` and `replSetGetConfig`, in mongod's shapes, so that
//! mongosh's `rs.status()` and `rs.conf()` work. A standalone answers them as mongod does
//! (`NoReplicationEnabled`, 76).

use bson::{RawArrayBuf, RawDocumentBuf, rawdoc};

use crate::dispatch::Request;
use crate::error::{CommandError, CommandResult, ErrorCode};
use crate::replset::{ReplSet, SET_VERSION};
use crate::state::ServerState;

/// `heartbeatIntervalMillis` of the default settings.
const HEARTBEAT_INTERVAL_MS: i32 = 2000;
/// `electionTimeoutMillis` of the default settings.
const ELECTION_TIMEOUT_MS: i32 = 10_000;

fn not_running_with_repl_set() -> CommandError {
    CommandError::new(
        ErrorCode::NoReplicationEnabled,
        "not running with --replSet",
    )
}

fn replset(state: &ServerState) -> CommandResult<&ReplSet> {
    state.replset.as_ref().ok_or_else(not_running_with_repl_set)
}

/// `replSetInitiate`: the set of one is initiated at start.
pub(super) fn repl_set_initiate(state: &ServerState) -> CommandResult {
    if state.replset.is_none() {
        return Err(CommandError::new(
            ErrorCode::NoReplicationEnabled,
            "This node was not started with replication enabled.",
        ));
    }
    Err(CommandError::new(
        ErrorCode::AlreadyInitialized,
        "already initialized",
    ))
}

/// `replSetGetStatus`: one member, the primary.
pub(super) fn repl_set_get_status(state: &ServerState) -> CommandResult {
    let rs = replset(state)?;
    let (ts, wall) = rs.clock.last_write();
    let op_time = rs.op_time(ts);
    let now = bson::DateTime::now();
    let uptime = i32::try_from(state.started.elapsed().as_secs()).unwrap_or(i32::MAX);
    let member = rawdoc! {
        "_id": 0,
        "name": rs.host.as_str(),
        "health": 1.0,
        "state": 1,
        "stateStr": "PRIMARY",
        "uptime": uptime,
        "optime": op_time.clone(),
        "optimeDate": seconds_date(wall),
        "lastAppliedWallTime": wall,
        "lastDurableWallTime": wall,
        "syncSourceHost": "",
        "syncSourceId": -1,
        "infoMessage": "",
        "electionTime": rs.election_time,
        "electionDate": seconds_date(rs.election_date),
        "configVersion": SET_VERSION,
        "configTerm": rs.term,
        "self": true,
        "lastHeartbeatMessage": "",
    };
    let mut members = RawArrayBuf::new();
    members.push(member);
    Ok(rawdoc! {
        "set": rs.name.as_str(),
        "date": now,
        "myState": 1,
        "term": rs.term,
        "syncSourceHost": "",
        "syncSourceId": -1,
        "heartbeatIntervalMillis": i64::from(HEARTBEAT_INTERVAL_MS),
        "majorityVoteCount": 1,
        "writeMajorityCount": 1,
        "votingMembersCount": 1,
        "writableVotingMembersCount": 1,
        "optimes": {
            "lastCommittedOpTime": op_time.clone(),
            "lastCommittedWallTime": wall,
            "readConcernMajorityOpTime": op_time.clone(),
            "appliedOpTime": op_time.clone(),
            "durableOpTime": op_time,
            "lastAppliedWallTime": wall,
            "lastDurableWallTime": wall,
        },
        "lastStableRecoveryTimestamp": ts,
        "electionCandidateMetrics": {
            "lastElectionReason": "electionTimeout",
            "lastElectionDate": rs.election_date,
            "electionTerm": rs.term,
            "lastCommittedOpTimeAtElection": { "ts": bson::Timestamp { time: 0, increment: 0 }, "t": -1_i64 },
            "lastSeenOpTimeAtElection": { "ts": bson::Timestamp { time: 0, increment: 0 }, "t": -1_i64 },
            "numVotesNeeded": 1,
            "priorityAtElection": 1.0,
            "electionTimeoutMillis": i64::from(ELECTION_TIMEOUT_MS),
            "newTermStartDate": rs.election_date,
            "wMajorityWriteAvailabilityDate": rs.election_date,
        },
        "members": members,
        "ok": 1.0,
    })
}

/// A date cut to whole seconds (mongod's `optimeDate`, from the optime's seconds).
fn seconds_date(d: bson::DateTime) -> bson::DateTime {
    bson::DateTime::from_millis(d.timestamp_millis().div_euclid(1000).saturating_mul(1000))
}

/// The set's configuration document (`replSetGetConfig.config`).
pub fn config_document(rs: &ReplSet) -> RawDocumentBuf {
    let mut members = RawArrayBuf::new();
    members.push(rawdoc! {
        "_id": 0,
        "host": rs.host.as_str(),
        "arbiterOnly": false,
        "buildIndexes": true,
        "hidden": false,
        "priority": 1.0,
        "tags": {},
        "secondaryDelaySecs": 0_i64,
        "votes": 1,
    });
    rawdoc! {
        "_id": rs.name.as_str(),
        "version": SET_VERSION,
        "term": i32::try_from(rs.term).unwrap_or(i32::MAX),
        "members": members,
        "protocolVersion": 1_i64,
        "writeConcernMajorityJournalDefault": true,
        "settings": {
            "chainingAllowed": true,
            "heartbeatIntervalMillis": HEARTBEAT_INTERVAL_MS,
            "heartbeatTimeoutSecs": 10,
            "electionTimeoutMillis": ELECTION_TIMEOUT_MS,
            "catchUpTimeoutMillis": -1,
            "catchUpTakeoverDelayMillis": 30_000,
            "getLastErrorModes": {},
            "getLastErrorDefaults": { "w": 1, "wtimeout": 0 },
            "replicaSetId": rs.replica_set_id,
        },
    }
}

/// `replSetGetConfig` (`commitmentStatus: true` adds that the configuration is committed, as it
/// always is on one member).
pub(super) fn repl_set_get_config(req: &Request<'_>, state: &ServerState) -> CommandResult {
    let rs = replset(state)?;
    let commitment = match req.body.get("commitmentStatus") {
        Ok(Some(v)) => super::args::truthy("replSetGetConfig.commitmentStatus", v)?,
        _ => false,
    };
    let mut reply = rawdoc! { "config": config_document(rs) };
    if commitment {
        reply.append(bson::raw::cstr!("commitmentStatus"), true);
    }
    reply.append(bson::raw::cstr!("ok"), 1.0);
    Ok(reply)
}
