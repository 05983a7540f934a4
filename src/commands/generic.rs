//! The generic arguments, read and checked in one place for every command: the Stable API
//! parameters, `readConcern`, `writeConcern` and the transaction fields, with mongod's codes
//! and messages. Whether a command takes a read or write concern comes from its row in the
//! command table ([`super::COMMANDS`]), the same row `listCommands` reports.
//!
//! A standalone refuses what needs a replica set (read concerns that wait for a cluster time,
//! `linearizable`, `snapshot`, `w` above 1 or tags, transaction numbers) as a standalone mongod
//! refuses it, never accepted and ignored. The primary of a replica set of one (`--replSet`)
//! takes them with their meaning on one member: the cluster times a read names are checked
//! against the clock by the caller ([`Limits`]), and a `w` that one member cannot satisfy is
//! answered after the write with mongod's `writeConcernError`.

use bson::{RawBsonRef, RawDocument, RawDocumentBuf, Timestamp, rawdoc};

use super::args::{truthy, type_name, wrong_type};
use super::spec::{Ty, wrong_type as ty_mismatch};
use crate::error::{CommandError, CommandResult, ErrorCode};

/// Which read concerns a command takes (mongod's `supportsReadConcern`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadConcerns {
    /// Only the default: `{}` or `{level: "local"}` (most commands).
    LocalOnly,
    /// Every level (reads: find, aggregate, count, distinct).
    All,
}

/// The generic arguments of one command that Ebb acts on, as read from its body.
#[derive(Debug, Default, Clone, Copy)]
struct Found<'a> {
    api_version: Option<RawBsonRef<'a>>,
    api_strict: Option<RawBsonRef<'a>>,
    api_deprecation_errors: Option<RawBsonRef<'a>>,
    read_concern: Option<RawBsonRef<'a>>,
    write_concern: Option<RawBsonRef<'a>>,
    txn_number: Option<RawBsonRef<'a>>,
    max_time_ms: Option<RawBsonRef<'a>>,
    autocommit: Option<RawBsonRef<'a>>,
    start_transaction: Option<RawBsonRef<'a>>,
    lsid: bool,
}

fn invalid_bson(e: &bson::error::Error) -> CommandError {
    CommandError::new(ErrorCode::InvalidBSON, e.to_string())
}

fn find(body: &RawDocument) -> CommandResult<Found<'_>> {
    let mut found = Found::default();
    for elem in body {
        let (key, value) = elem.map_err(|e| invalid_bson(&e))?;
        let slot = match key.as_str() {
            "apiVersion" => &mut found.api_version,
            "apiStrict" => &mut found.api_strict,
            "apiDeprecationErrors" => &mut found.api_deprecation_errors,
            "readConcern" => &mut found.read_concern,
            "writeConcern" => &mut found.write_concern,
            "txnNumber" => &mut found.txn_number,
            "maxTimeMS" => &mut found.max_time_ms,
            "autocommit" => &mut found.autocommit,
            "startTransaction" => &mut found.start_transaction,
            "lsid" => {
                found.lsid = true;
                continue;
            }
            _ => continue,
        };
        slot.get_or_insert(value);
    }
    Ok(found)
}

/// What a command declares about the generic arguments, from its table row.
#[derive(Debug, Clone, Copy)]
pub struct Accepts {
    /// The command's name as mongod names it in messages.
    pub name: &'static str,
    /// Whether it is part of Stable API version 1.
    pub api_v1: bool,
    /// Which read concerns it takes.
    pub read_concerns: ReadConcerns,
    /// Whether it takes a write concern.
    pub write_concern: bool,
    /// Whether the server is the primary of a replica set (else a standalone).
    pub replset: bool,
}

/// What the generic arguments ask of the command's run.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Limits {
    /// `maxTimeMS`, when given and not 0: how long the command may run.
    pub max_time_ms: Option<u64>,
    /// Whether the command runs in a multi-document transaction (`autocommit: false`).
    pub transaction: bool,
    /// Whether it reads at the `snapshot` level (replica set only).
    pub snapshot: bool,
    /// `readConcern.afterClusterTime` (replica set only): the read waits for the clock to
    /// reach it.
    pub after_cluster_time: Option<Timestamp>,
    /// `readConcern.atClusterTime` (replica set only, level `snapshot`): the time to read at.
    pub at_cluster_time: Option<Timestamp>,
    /// The `writeConcernError` a replica set of one answers after the write, for a write
    /// concern it cannot satisfy (`w` above 1, a mode or tags it does not have).
    pub write_concern_error: Option<RawDocumentBuf>,
}

/// Checks the generic arguments of `body` for a command that declares `accepts`.
pub fn check(accepts: &Accepts, body: &RawDocument) -> CommandResult<Limits> {
    let found = find(body)?;
    check_api(accepts, &found)?;
    let mut limits = Limits {
        max_time_ms: found.max_time_ms.map(max_time_ms).transpose()?.flatten(),
        ..Limits::default()
    };
    let in_transaction = check_transaction(accepts, &found)?;
    limits.transaction = in_transaction;
    if let Some(rc) = found.read_concern {
        let parsed = ReadConcern::parse(rc)?;
        if in_transaction {
            // The read concern of a transaction, which its first command gives: any command of
            // it takes one, at the levels a transaction has.
            if !matches!(
                parsed.level,
                None | Some(Level::Local | Level::Majority | Level::Snapshot)
            ) {
                return Err(CommandError::new(
                    ErrorCode::InvalidOptions,
                    "The readConcern level must be either 'local' (default), 'majority' or \
                     'snapshot' in order to run in a transaction",
                ));
            }
        } else {
            parsed.check_supported(accepts)?;
        }
        if accepts.replset {
            if !in_transaction {
                parsed.check_replset(accepts)?;
            }
            limits.snapshot = parsed.level == Some(Level::Snapshot);
            if parsed.after_cluster_time {
                limits.after_cluster_time = parsed.cluster_time;
            }
            if parsed.at_cluster_time {
                limits.at_cluster_time = parsed.cluster_time;
            }
        } else {
            parsed.check_standalone()?;
        }
    }
    if let Some(wc) = found.write_concern {
        if in_transaction && !matches!(accepts.name, "commitTransaction" | "abortTransaction") {
            return Err(CommandError::new(
                ErrorCode::InvalidOptions,
                "writeConcern is not allowed within a multi-statement transaction",
            ));
        }
        if !accepts.write_concern {
            return Err(CommandError::new(
                ErrorCode::InvalidOptions,
                "Command does not support writeConcern",
            ));
        }
        let parsed = WriteConcernArgs::parse(wc)?;
        if accepts.replset {
            limits.write_concern_error = parsed.replset_error();
        } else {
            parsed.check_standalone()?;
        }
    }
    Ok(limits)
}

/// Reads `maxTimeMS` as mongod's `parseMaxTimeMS` does: a number from 0 to 2^31 − 1, integral
/// when it is a double; 0 means no limit.
fn max_time_ms(value: RawBsonRef<'_>) -> CommandResult<Option<u64>> {
    let n = match value {
        RawBsonRef::Int32(i) => i64::from(i),
        RawBsonRef::Int64(i) => i,
        RawBsonRef::Double(d) => {
            if d.is_nan() || d < 0.0 || d > f64::from(i32::MAX) {
                return Err(CommandError::bad_value("maxTimeMS is out of range"));
            }
            if d.floor() != d {
                return Err(CommandError::bad_value("maxTimeMS has non-integral value"));
            }
            #[expect(clippy::cast_possible_truncation, reason = "checked to be in range")]
            let n = d as i64;
            n
        }
        RawBsonRef::Decimal128(d) => {
            let f = d.to_string().parse::<f64>().unwrap_or(f64::NAN);
            if f.is_nan() || f < 0.0 || f >= f64::from(i32::MAX) + 1.0 {
                return Err(CommandError::bad_value("maxTimeMS is out of range"));
            }
            #[expect(clippy::cast_possible_truncation, reason = "checked to be in range")]
            let n = f as i64;
            n
        }
        _ => return Err(CommandError::bad_value("maxTimeMS must be a number")),
    };
    if !(0..=i64::from(i32::MAX)).contains(&n) {
        return Err(CommandError::bad_value("maxTimeMS is out of range"));
    }
    Ok(u64::try_from(n).ok().filter(|&n| n > 0))
}

/// The Stable API parameters (mongod's `initializeAPIParameters`).
fn check_api(accepts: &Accepts, found: &Found<'_>) -> CommandResult<()> {
    let version = match found.api_version {
        None => None,
        Some(RawBsonRef::String(v)) => Some(v),
        Some(other) => {
            return Err(ty_mismatch(
                "APIParametersFromClient.apiVersion",
                other,
                Ty::String,
            ));
        }
    };
    let flag = |value: Option<RawBsonRef<'_>>, name: &str| match value {
        None => Ok(None),
        Some(RawBsonRef::Boolean(b)) => Ok(Some(b)),
        Some(other) => Err(ty_mismatch(
            &format!("APIParametersFromClient.{name}"),
            other,
            Ty::Bool,
        )),
    };
    let strict = flag(found.api_strict, "apiStrict")?;
    let deprecation_errors = flag(found.api_deprecation_errors, "apiDeprecationErrors")?;
    let Some(version) = version else {
        if strict.is_some() || deprecation_errors.is_some() {
            return Err(CommandError::new(
                ErrorCode::Location(4_886_600),
                "Provided apiStrict and/or apiDeprecationErrors without passing apiVersion",
            ));
        }
        return Ok(());
    };
    if version != "1" {
        return Err(CommandError::new(
            ErrorCode::APIVersionError,
            if version == "2" {
                "Cannot accept API version 2".to_owned()
            } else {
                "API version must be \"1\"".to_owned()
            },
        ));
    }
    if strict == Some(true) && !accepts.api_v1 {
        return Err(CommandError::new(
            ErrorCode::APIStrictError,
            format!(
                "Provided apiStrict:true, but the command {} is not in API Version 1. Information \
                 on supported commands and migrations in API Version 1 can be found at \
                 https://dochub.mongodb.org/core/manual-versioned-api",
                accepts.name
            ),
        ));
    }
    Ok(())
}

/// Transactions need a replica set; a standalone refuses transaction numbers.
/// The commands a retryable write may be (mongod's `isRetryableWriteCommand`).
const RETRYABLE_WRITES: [&str; 5] = [
    "insert",
    "update",
    "delete",
    "findAndModify",
    "findandmodify",
];

/// The commands a multi-document transaction may run (mongod's `txnCmdAllowlist`, for the
/// commands Ebb has).
const IN_TRANSACTION: [&str; 14] = [
    "abortTransaction",
    "aggregate",
    "bulkWrite",
    "commitTransaction",
    "create",
    "createIndexes",
    "delete",
    "distinct",
    "find",
    "findAndModify",
    "getMore",
    "insert",
    "killCursors",
    "update",
];

/// Checks the transaction fields; returns whether the command runs in a multi-document
/// transaction (`autocommit: false`).
fn check_transaction(accepts: &Accepts, found: &Found<'_>) -> CommandResult<bool> {
    if let Some(txn) = found.txn_number {
        if !found.lsid {
            return Err(CommandError::new(
                ErrorCode::InvalidOptions,
                "Transaction number requires a session ID to also be specified",
            ));
        }
        if !accepts.replset {
            return Err(CommandError::new(
                ErrorCode::IllegalOperation,
                "Transaction numbers are only allowed on a replica set member or mongos",
            ));
        }
        if !matches!(txn, RawBsonRef::Int64(_)) {
            return Err(wrong_type(
                "OperationSessionInfoFromClient.txnNumber",
                txn,
                " 'long'",
            ));
        }
        if let Some(autocommit) = found.autocommit {
            match autocommit {
                RawBsonRef::Boolean(false) => {}
                RawBsonRef::Boolean(true) => {
                    return Err(CommandError::new(
                        ErrorCode::InvalidOptions,
                        "Specifying autocommit=true is not allowed.",
                    ));
                }
                other => {
                    return Err(ty_mismatch(
                        "OperationSessionInfoFromClient.autocommit",
                        other,
                        Ty::Bool,
                    ));
                }
            }
            match found.start_transaction {
                None | Some(RawBsonRef::Boolean(true)) => {}
                Some(RawBsonRef::Boolean(false)) => {
                    return Err(CommandError::new(
                        ErrorCode::InvalidOptions,
                        "Specifying startTransaction=false is not allowed.",
                    ));
                }
                Some(other) => {
                    return Err(ty_mismatch(
                        "OperationSessionInfoFromClient.startTransaction",
                        other,
                        Ty::Bool,
                    ));
                }
            }
            if !IN_TRANSACTION.contains(&accepts.name) && accepts.name != "findandmodify" {
                return Err(CommandError::new(
                    ErrorCode::OperationNotSupportedInTransaction,
                    format!(
                        "Cannot run '{}' in a multi-document transaction.",
                        accepts.name
                    ),
                ));
            }
            return Ok(true);
        }
        if found.start_transaction.is_some() {
            return Err(CommandError::new(
                ErrorCode::InvalidOptions,
                "'startTransaction' field requires 'autocommit' field to also be specified",
            ));
        }
        if !RETRYABLE_WRITES.contains(&accepts.name) {
            return Err(CommandError::new(
                ErrorCode::Location(50768),
                format!(
                    "txnNumber may only be provided for multi-document transactions and \
                     retryable write commands. autocommit:false was not provided, and {} is not \
                     a retryable write command.",
                    accepts.name
                ),
            ));
        }
        return Ok(false);
    }
    // mongod's order (`initializeOperationSessionInfo`): `autocommit` needs a transaction
    // number, `startTransaction` needs `autocommit`.
    if found.autocommit.is_some() {
        return Err(CommandError::new(
            ErrorCode::InvalidOptions,
            "'autocommit' field requires a transaction number to also be specified",
        ));
    }
    if found.start_transaction.is_some() {
        return Err(CommandError::new(
            ErrorCode::InvalidOptions,
            "'startTransaction' field requires 'autocommit' field to also be specified",
        ));
    }
    Ok(false)
}

/// A read concern's level.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    /// `local`, the default.
    Local,
    /// `majority`: on a standalone, every write is committed, so as `local`.
    Majority,
    /// `linearizable` (replica sets only).
    Linearizable,
    /// `available`: as `local` on a standalone.
    Available,
    /// `snapshot` (replica sets only).
    Snapshot,
}

/// A parsed `readConcern` (mongod's `ReadConcernArgs::parse`).
#[derive(Debug, Default, Clone, Copy)]
pub struct ReadConcern {
    level: Option<Level>,
    after_op_time: bool,
    after_cluster_time: bool,
    at_cluster_time: bool,
    /// The timestamp of `afterClusterTime` or `atClusterTime`.
    cluster_time: Option<Timestamp>,
}

impl ReadConcern {
    /// Parses the value of a command's `readConcern`.
    pub fn parse(value: RawBsonRef<'_>) -> CommandResult<Self> {
        let RawBsonRef::Document(doc) = value else {
            return Err(CommandError::new(
                ErrorCode::FailedToParse,
                "readConcern field should be an object",
            ));
        };
        let mut rc = ReadConcern::default();
        let extract_mismatch = |name: &str, expected: &str, v: RawBsonRef<'_>| {
            CommandError::type_mismatch(format!(
                "\"{name}\" had the wrong type. Expected {expected}, found {}",
                type_name(v.element_type())
            ))
        };
        for elem in doc {
            let (key, v) = elem.map_err(|e| invalid_bson(&e))?;
            match key.as_str() {
                "level" => {
                    let RawBsonRef::String(s) = v else {
                        return Err(extract_mismatch("level", "string", v));
                    };
                    rc.level = Some(match s {
                        "local" => Level::Local,
                        "majority" => Level::Majority,
                        "linearizable" => Level::Linearizable,
                        "available" => Level::Available,
                        "snapshot" => Level::Snapshot,
                        _ => {
                            return Err(CommandError::new(
                                ErrorCode::FailedToParse,
                                "readConcern.level must be either 'local', 'majority', \
                                 'linearizable', 'available', or 'snapshot'",
                            ));
                        }
                    });
                }
                "afterOpTime" => {
                    if !matches!(v, RawBsonRef::Document(_)) {
                        return Err(extract_mismatch("afterOpTime", "object", v));
                    }
                    rc.after_op_time = true;
                }
                "afterClusterTime" | "atClusterTime" => {
                    let RawBsonRef::Timestamp(ts) = v else {
                        return Err(extract_mismatch(key.as_str(), "timestamp", v));
                    };
                    if key.as_str() == "atClusterTime" {
                        if ts.time == 0 && ts.increment == 0 {
                            return Err(CommandError::new(
                                ErrorCode::InvalidOptions,
                                "atClusterTime cannot be a null timestamp",
                            ));
                        }
                        rc.at_cluster_time = true;
                    } else {
                        rc.after_cluster_time = true;
                    }
                    rc.cluster_time = Some(ts);
                }
                "provenance" => {
                    if !matches!(v, RawBsonRef::String(_)) {
                        return Err(wrong_type(
                            "ReadConcernArgs::parse.provenance",
                            v,
                            " 'string'",
                        ));
                    }
                }
                "$_allowTransactionTableSnapshot" => {
                    if !matches!(v, RawBsonRef::Boolean(_)) {
                        return Err(extract_mismatch(key.as_str(), "bool", v));
                    }
                }
                other => {
                    return Err(CommandError::new(
                        ErrorCode::InvalidOptions,
                        format!("Unrecognized option in readConcern: {other}"),
                    ));
                }
            }
        }
        let level = rc.level.unwrap_or(Level::Local);
        if rc.after_cluster_time && rc.after_op_time {
            return Err(CommandError::new(
                ErrorCode::InvalidOptions,
                "Can not specify both afterClusterTime and afterOpTime",
            ));
        }
        if rc.after_cluster_time && rc.at_cluster_time {
            return Err(CommandError::new(
                ErrorCode::InvalidOptions,
                "Specifying a timestamp for readConcern snapshot in a causally consistent \
                 session is not allowed. See \
                 https://docs.mongodb.com/manual/core/read-isolation-consistency-recency/#causal-consistency",
            ));
        }
        if rc.after_cluster_time
            && !matches!(level, Level::Majority | Level::Local | Level::Snapshot)
        {
            return Err(CommandError::new(
                ErrorCode::InvalidOptions,
                "afterClusterTime field can be set only if level is equal to majority, local, or \
                 snapshot",
            ));
        }
        if rc.after_op_time && level == Level::Snapshot {
            return Err(CommandError::new(
                ErrorCode::InvalidOptions,
                "afterOpTime field cannot be set if level is equal to snapshot",
            ));
        }
        if rc.at_cluster_time && level != Level::Snapshot {
            return Err(CommandError::new(
                ErrorCode::InvalidOptions,
                "atClusterTime field can be set only if level is equal to snapshot",
            ));
        }
        Ok(rc)
    }

    fn check_supported(self, accepts: &Accepts) -> CommandResult<()> {
        // On a replica set every command takes `afterClusterTime` at its default level (mongod
        // checks the level only): causally consistent sessions send it on writes and
        // commands too.
        let only_default = matches!(self.level, None | Some(Level::Local))
            && !self.after_op_time
            && (!self.after_cluster_time || accepts.replset)
            && !self.at_cluster_time;
        if accepts.read_concerns == ReadConcerns::All || only_default {
            return Ok(());
        }
        Err(CommandError::new(
            ErrorCode::InvalidOptions,
            format!(
                "Command {} does not support this readConcern :: caused by :: read concern not \
                 supported",
                accepts.name
            ),
        ))
    }

    /// What the primary of a replica set of one refuses: `linearizable` with `afterOpTime`
    /// (mongod's `waitForReadConcern`), and `snapshot` outside a transaction on commands other
    /// than `find`, `aggregate` and `distinct` (mongod's `supportsReadConcern`).
    fn check_replset(self, accepts: &Accepts) -> CommandResult<()> {
        if self.level == Some(Level::Linearizable) && self.after_op_time {
            return Err(CommandError::new(
                ErrorCode::FailedToParse,
                "afterOpTime not compatible with linearizable read concern",
            ));
        }
        if self.level == Some(Level::Snapshot)
            && !matches!(accepts.name, "find" | "aggregate" | "distinct")
        {
            return Err(CommandError::new(
                ErrorCode::InvalidOptions,
                format!(
                    "Command {} does not support {} :: caused by :: read concern snapshot not \
                     supported",
                    accepts.name,
                    self.describe()
                ),
            ));
        }
        Ok(())
    }

    /// The read concern as mongod's `ReadConcernArgs::toString` shows it in messages.
    fn describe(self) -> String {
        let mut fields = Vec::new();
        if let Some(level) = self.level {
            let name = match level {
                Level::Local => "local",
                Level::Majority => "majority",
                Level::Linearizable => "linearizable",
                Level::Available => "available",
                Level::Snapshot => "snapshot",
            };
            fields.push(format!("level: \"{name}\""));
        }
        if let Some(ts) = self.cluster_time {
            let name = if self.at_cluster_time {
                "atClusterTime"
            } else {
                "afterClusterTime"
            };
            fields.push(format!("{name}: {}", show_timestamp(ts)));
        }
        format!("{{ readConcern: {{ {} }} }}", fields.join(", "))
    }

    /// What a standalone cannot serve: `linearizable`, `snapshot`, and reads that wait for an
    /// operation or cluster time.
    fn check_standalone(self) -> CommandResult<()> {
        let not_a_replica_set = |what: &str| {
            Err(CommandError::new(
                ErrorCode::NotAReplicaSet,
                format!("node needs to be a replica set member to use {what}"),
            ))
        };
        match self.level {
            Some(Level::Linearizable) => return not_a_replica_set("read concern"),
            Some(Level::Snapshot) => return not_a_replica_set("readConcern: snapshot"),
            _ => {}
        }
        if self.after_op_time || self.after_cluster_time || self.at_cluster_time {
            return not_a_replica_set("read concern");
        }
        Ok(())
    }
}

/// A timestamp as mongod writes it in messages: `Timestamp(seconds, increment)`.
pub fn show_timestamp(ts: Timestamp) -> String {
    format!("Timestamp({}, {})", ts.time, ts.increment)
}

/// What `w` asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum W {
    /// A number of members (0 = unacknowledged).
    Nodes(i64),
    /// `"majority"`.
    Majority,
    /// Another mode name, or a tag set: replica sets only.
    Other,
}

/// A parsed `writeConcern` (mongod's `WriteConcernOptions::parse`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteConcernArgs {
    /// `w`, when given.
    pub w: Option<W>,
    /// `j`, when given.
    pub j: Option<bool>,
    /// What `w` named when it is not a number or `"majority"` (for the standalone's error).
    mode: String,
    /// `wtimeout` in milliseconds (0: none).
    wtimeout: i32,
}

impl WriteConcernArgs {
    /// Parses the value of a command's `writeConcern`; an empty document is the default.
    pub fn parse(value: RawBsonRef<'_>) -> CommandResult<Self> {
        let RawBsonRef::Document(doc) = value else {
            return Err(CommandError::type_mismatch(format!(
                "\"writeConcern\" had the wrong type. Expected object, found {}",
                type_name(value.element_type())
            )));
        };
        let mut out = WriteConcernArgs {
            w: None,
            j: None,
            mode: String::new(),
            wtimeout: 0,
        };
        let mut fsync = None;
        for elem in doc {
            let (key, v) = elem.map_err(|e| invalid_bson(&e))?;
            match key.as_str() {
                "w" => out.w = Self::parse_w(v, &mut out.mode)?,
                "j" => out.j = Some(truthy("WriteConcernOptions.j", v)?),
                "fsync" => fsync = Some(truthy("WriteConcernOptions.fsync", v)?),
                // Non-numbers read as 0 (no timeout), as mongod reads them.
                "wtimeout" => {
                    out.wtimeout = match v {
                        RawBsonRef::Int32(n) => n,
                        RawBsonRef::Int64(n) => {
                            i32::try_from(n).unwrap_or(if n < 0 { i32::MIN } else { i32::MAX })
                        }
                        #[expect(clippy::cast_possible_truncation, reason = "saturating")]
                        RawBsonRef::Double(d) if !d.is_nan() => d as i32,
                        _ => 0,
                    };
                }
                "wElectionId" | "wOpTime" | "getLastError" => {}
                "provenance" => match v {
                    RawBsonRef::String(
                        "clientSupplied"
                        | "implicitDefault"
                        | "customDefault"
                        | "getLastErrorDefaults"
                        | "internalWriteDefault",
                    ) => {}
                    RawBsonRef::String(s) => {
                        return Err(CommandError::bad_value(format!(
                            "Enumeration value '{s}' for field \
                             'WriteConcernOptions.provenance' is not a valid value."
                        )));
                    }
                    other => {
                        return Err(wrong_type(
                            "WriteConcernOptions.provenance",
                            other,
                            " 'string'",
                        ));
                    }
                },
                other => {
                    return Err(CommandError::unknown_field(&format!(
                        "WriteConcernOptions.{other}"
                    )));
                }
            }
        }
        if out.j == Some(true) && fsync == Some(true) {
            return Err(CommandError::new(
                ErrorCode::FailedToParse,
                "fsync and j options cannot be used together",
            ));
        }
        Ok(out)
    }

    fn parse_w(v: RawBsonRef<'_>, mode: &mut String) -> CommandResult<Option<W>> {
        let number = match v {
            RawBsonRef::Int32(i) => Some(i64::from(i)),
            RawBsonRef::Int64(i) => Some(i),
            #[expect(
                clippy::cast_possible_truncation,
                reason = "saturating, as mongod's safeNumberLong"
            )]
            RawBsonRef::Double(d) => Some(if d.is_nan() { 0 } else { d as i64 }),
            RawBsonRef::Decimal128(d) => Some(
                d.to_string()
                    .parse::<f64>()
                    .ok()
                    .filter(|f| !f.is_nan())
                    .map_or(0, |f| {
                        #[expect(
                            clippy::cast_possible_truncation,
                            reason = "saturating, as mongod's safeNumberLong"
                        )]
                        let n = f as i64;
                        n
                    }),
            ),
            _ => None,
        };
        if let Some(n) = number {
            if !(0..=50).contains(&n) {
                return Err(CommandError::new(
                    ErrorCode::FailedToParse,
                    format!(
                        "w has to be a non-negative number and not greater than 50; found: {n}"
                    ),
                ));
            }
            return Ok(Some(W::Nodes(n)));
        }
        match v {
            RawBsonRef::String("majority") => Ok(Some(W::Majority)),
            RawBsonRef::String(s) => {
                if s.contains('\0') {
                    return Err(CommandError::new(
                        ErrorCode::FailedToParse,
                        format!("w has illegal embedded NUL byte, w: {s}"),
                    ));
                }
                s.clone_into(mode);
                Ok(Some(W::Other))
            }
            RawBsonRef::Document(tags) => {
                if tags.iter().next().is_none() {
                    return Err(CommandError::new(
                        ErrorCode::FailedToParse,
                        "tagged write concern requires tags",
                    ));
                }
                for elem in tags {
                    let (k, t) = elem.map_err(|e| invalid_bson(&e))?;
                    if !matches!(
                        t,
                        RawBsonRef::Int32(_)
                            | RawBsonRef::Int64(_)
                            | RawBsonRef::Double(_)
                            | RawBsonRef::Decimal128(_)
                    ) {
                        return Err(CommandError::new(
                            ErrorCode::FailedToParse,
                            format!(
                                "tags must be a single level document with only number values; \
                                 found: {}: {}",
                                k.as_str(),
                                super::args::display(t)
                            ),
                        ));
                    }
                }
                *mode = super::args::display(v);
                Ok(Some(W::Other))
            }
            RawBsonRef::Null | RawBsonRef::Undefined => Ok(None),
            other => Err(CommandError::new(
                ErrorCode::FailedToParse,
                format!(
                    "w has to be a number, string, or object; found: {}",
                    type_name(other.element_type())
                ),
            )),
        }
    }

    /// What a replica set of one answers after the write (mongod's
    /// `checkIfWriteConcernCanBeSatisfied`, reported as `writeConcernError`): `w` above 1 cannot
    /// be satisfied (`UnsatisfiableWriteConcern`, 100), and the set has no modes or tags of its
    /// own (`UnknownReplWriteConcern`, 79). `wtimeout` never matters: one member is done at
    /// once.
    pub fn replset_error(&self) -> Option<RawDocumentBuf> {
        let (code, errmsg) = match self.w {
            Some(W::Nodes(n)) if n > 1 => (
                ErrorCode::UnsatisfiableWriteConcern,
                "Not enough data-bearing nodes".to_owned(),
            ),
            Some(W::Other) => (
                ErrorCode::UnknownReplWriteConcern,
                format!(
                    "No write concern mode named '{}' found in replica set configuration",
                    self.mode
                ),
            ),
            _ => return None,
        };
        // The write concern as mongod's `WriteConcernOptions::toBSON` shows it.
        let mut wc = RawDocumentBuf::new();
        if let Some(W::Nodes(n)) = self.w {
            wc.append(bson::raw::cstr!("w"), i32::try_from(n).unwrap_or(i32::MAX));
        } else {
            wc.append(bson::raw::cstr!("w"), self.mode.as_str());
        }
        if let Some(j) = self.j {
            wc.append(bson::raw::cstr!("j"), j);
        }
        wc.append(bson::raw::cstr!("wtimeout"), self.wtimeout);
        wc.append(bson::raw::cstr!("provenance"), "clientSupplied");
        Some(rawdoc! {
            "code": code.code(),
            "codeName": code.name().as_ref(),
            "errmsg": errmsg,
            "errInfo": { "writeConcern": wc },
        })
    }

    /// A standalone acknowledges `w` 0 or 1 and `"majority"`; more members, other modes and
    /// tags need a replica set.
    fn check_standalone(&self) -> CommandResult<()> {
        match self.w {
            Some(W::Nodes(n)) if n > 1 => Err(CommandError::bad_value(
                "cannot use 'w' > 1 when a host is not replicated",
            )),
            Some(W::Other) => Err(CommandError::bad_value(format!(
                "cannot use non-majority 'w' mode {} when a host is not a member of a replica set",
                self.mode
            ))),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use bson::{RawBsonRef, rawdoc};

    use super::{Accepts, ReadConcerns, check};
    use crate::error::ErrorCode;

    const FIND: Accepts = Accepts {
        name: "find",
        api_v1: true,
        read_concerns: ReadConcerns::All,
        write_concern: false,
        replset: false,
    };
    const INSERT: Accepts = Accepts {
        name: "insert",
        api_v1: true,
        read_concerns: ReadConcerns::LocalOnly,
        write_concern: true,
        replset: false,
    };
    const BUILD_INFO: Accepts = Accepts {
        name: "buildInfo",
        api_v1: false,
        read_concerns: ReadConcerns::LocalOnly,
        write_concern: false,
        replset: false,
    };

    #[test]
    fn max_time_ms() {
        let limit = |v: bson::RawBson| {
            let mut body = rawdoc! { "find": "c" };
            body.append(bson::cstr!("maxTimeMS"), v);
            check(&FIND, &body)
                .map(|l| l.max_time_ms)
                .map_err(|e| e.code.code())
        };
        assert_eq!(limit(bson::RawBson::Int32(0)), Ok(None));
        assert_eq!(limit(bson::RawBson::Int64(5)), Ok(Some(5)));
        assert_eq!(limit(bson::RawBson::Double(7.0)), Ok(Some(7)));
        assert_eq!(limit(bson::RawBson::Double(7.5)), Err(2));
        assert_eq!(limit(bson::RawBson::Int32(-1)), Err(2));
        assert_eq!(limit(bson::RawBson::Int64(1 << 31)), Err(2));
        assert_eq!(limit(bson::RawBson::String("5".into())), Err(2));
    }

    fn code(accepts: &Accepts, body: &bson::RawDocument) -> Option<i32> {
        check(accepts, body).err().map(|e| e.code.code())
    }

    #[test]
    fn write_concerns() {
        let wc = |wc: bson::RawDocumentBuf| {
            let mut body = rawdoc! { "insert": "c" };
            body.append(bson::cstr!("writeConcern"), wc);
            code(&INSERT, &body)
        };
        assert_eq!(wc(rawdoc! {}), None);
        assert_eq!(wc(rawdoc! { "w": 0 }), None);
        assert_eq!(wc(rawdoc! { "w": 1, "j": true, "wtimeout": 5 }), None);
        assert_eq!(wc(rawdoc! { "w": "majority" }), None);
        assert_eq!(wc(rawdoc! { "w": 1.0 }), None);
        assert_eq!(wc(rawdoc! { "w": -1 }), Some(9));
        assert_eq!(wc(rawdoc! { "w": 51 }), Some(9));
        assert_eq!(wc(rawdoc! { "w": 2 }), Some(2));
        assert_eq!(wc(rawdoc! { "w": "dc1" }), Some(2));
        assert_eq!(wc(rawdoc! { "w": { "dc": 1 } }), Some(2));
        assert_eq!(wc(rawdoc! { "w": {} }), Some(9));
        assert_eq!(wc(rawdoc! { "w": true }), Some(9));
        assert_eq!(wc(rawdoc! { "j": "yes" }), Some(14));
        assert_eq!(wc(rawdoc! { "j": true, "fsync": true }), Some(9));
        assert_eq!(wc(rawdoc! { "x": 1 }), Some(40415));
        let body = rawdoc! { "insert": "c", "writeConcern": 1 };
        assert_eq!(code(&INSERT, &body), Some(14));
        let body = rawdoc! { "find": "c", "writeConcern": { "w": 1 } };
        assert_eq!(code(&FIND, &body), Some(72));
    }

    #[test]
    fn read_concerns() {
        let rc = |accepts: &Accepts, rc: RawBsonRef<'_>| {
            let mut body = rawdoc! { "find": "c" };
            body.append(bson::cstr!("readConcern"), rc);
            code(accepts, &body)
        };
        let doc = |d: &bson::RawDocumentBuf| -> Option<i32> { rc(&FIND, RawBsonRef::Document(d)) };
        assert_eq!(doc(&rawdoc! {}), None);
        assert_eq!(doc(&rawdoc! { "level": "local" }), None);
        assert_eq!(doc(&rawdoc! { "level": "majority" }), None);
        assert_eq!(doc(&rawdoc! { "level": "available" }), None);
        assert_eq!(doc(&rawdoc! { "level": "linearizable" }), Some(123));
        assert_eq!(doc(&rawdoc! { "level": "snapshot" }), Some(123));
        assert_eq!(doc(&rawdoc! { "level": "nope" }), Some(9));
        assert_eq!(doc(&rawdoc! { "level": 1 }), Some(14));
        assert_eq!(doc(&rawdoc! { "other": 1 }), Some(72));
        let ts = bson::Timestamp {
            time: 1,
            increment: 1,
        };
        assert_eq!(doc(&rawdoc! { "afterClusterTime": ts }), Some(123));
        assert_eq!(
            doc(&rawdoc! { "level": "local", "atClusterTime": ts }),
            Some(72)
        );
        assert_eq!(rc(&FIND, RawBsonRef::String("local")), Some(9));
        // Writes take only the default outside transactions.
        let majority = rawdoc! { "level": "majority" };
        assert_eq!(rc(&INSERT, RawBsonRef::Document(&majority)), Some(72));
        let local = rawdoc! { "level": "local" };
        assert_eq!(rc(&INSERT, RawBsonRef::Document(&local)), None);
    }

    #[test]
    fn stable_api_and_transactions() {
        let api = |accepts: &Accepts, body: bson::RawDocumentBuf| code(accepts, &body);
        assert_eq!(api(&FIND, rawdoc! { "find": "c", "apiVersion": "1" }), None);
        let strict = rawdoc! { "find": "c", "apiVersion": "1", "apiStrict": true };
        assert_eq!(api(&FIND, strict), None);
        let strict = rawdoc! { "buildInfo": 1, "apiVersion": "1", "apiStrict": true };
        assert_eq!(api(&BUILD_INFO, strict), Some(323));
        let lax = rawdoc! { "buildInfo": 1, "apiVersion": "1", "apiStrict": false };
        assert_eq!(api(&BUILD_INFO, lax), None);
        assert_eq!(
            api(&FIND, rawdoc! { "find": "c", "apiStrict": true }),
            Some(4_886_600)
        );
        assert_eq!(
            api(&FIND, rawdoc! { "find": "c", "apiVersion": "0" }),
            Some(322)
        );
        assert_eq!(
            api(&FIND, rawdoc! { "find": "c", "apiVersion": 1 }),
            Some(14)
        );
        let body = rawdoc! { "find": "c", "apiVersion": "1", "apiStrict": 1 };
        assert_eq!(api(&FIND, body), Some(14));
        let body = rawdoc! { "find": "c", "txnNumber": 1_i64, "lsid": { "id": 1 } };
        assert_eq!(api(&FIND, body), Some(20));
        let body = rawdoc! { "find": "c", "txnNumber": 1_i64 };
        assert_eq!(api(&FIND, body), Some(72));
        let body = rawdoc! { "find": "c", "autocommit": false };
        assert_eq!(api(&FIND, body), Some(72));
        let err = check(&FIND, &rawdoc! { "find": "c", "apiVersion": "3" }).unwrap_err();
        assert_eq!(err.code, ErrorCode::APIVersionError);
    }
}
