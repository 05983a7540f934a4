//! Fail points, for the drivers' own test suites: `configureFailPoint` (answered only with
//! `--enable-test-commands`, as mongod answers it only with `enableTestCommands`) and the
//! fail points those suites rely on: `failCommand`, `onPrimaryTransactionalWrite` and
//! `failGetMoreAfterCursorCheckout`.
//!
//! Semantics follow mongod 7.0 (`src/mongo/util/fail_point.cpp`, `src/mongo/db/commands.cpp`,
//! `src/mongo/db/service_entry_point_common.cpp`):
//!
//! - a fail point has a mode (`off`, `alwaysOn`, `{times: n}`, `{skip: n}`,
//!   `{activationProbability: p}`) and a `data` document; it is evaluated only for commands
//!   its data selects (`failCommands` by name or alias, `appName`, `namespace`, `threadName`),
//!   and only a selected evaluation counts against `times` or `skip`;
//! - when a command is about to run (after its own parse, before anything else), an active
//!   `failCommand` with `closeConnection`, `blockConnection` or `errorCode` fires: it blocks
//!   `blockTimeMS`, then closes the connection without replying, or answers the error (with
//!   `errorLabels` when given, otherwise the labels mongod would add), or lets the command run;
//! - a command that takes a write concern evaluates it once more where mongod waits for the
//!   write concern: with `writeConcernError`, its reply carries that document instead.
//!
//! The state is one mutex per server: a fire and its `times` count are one step, so `times`
//! is exact under any concurrency. While no fail point is set, commands pay one atomic load.
//! Any other fail point name answers mongod's error for an unknown one (`FailPointSetFailed`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bson::{RawArrayBuf, RawBson, RawBsonRef, RawDocument, RawDocumentBuf, rawdoc};

use crate::error::{CommandError, CommandResult, ErrorCode};

/// mongod's fail point for any command, before it runs.
pub const FAIL_COMMAND: &str = "failCommand";
/// mongod's fail point at each statement of a retryable write, before its commit:
/// `closeConnection` (default true) closes the client's connection, and
/// `failBeforeCommitExceptionCode` fails the statement with that code, so it is not committed.
pub const ON_PRIMARY_TRANSACTIONAL_WRITE: &str = "onPrimaryTransactionalWrite";
/// mongod's fail point in `getMore` once the cursor is checked out: fails it with
/// `errorCode` (the error then gets the labels mongod adds, e.g. `ResumableChangeStreamError`
/// for a change stream's).
pub const FAIL_GET_MORE_AFTER_CURSOR_CHECKOUT: &str = "failGetMoreAfterCursorCheckout";

tokio::task_local! {
    /// Set by a command (a fired [`ON_PRIMARY_TRANSACTIONAL_WRITE`]) to close its connection
    /// instead of replying; read by `commands::run`, which scopes it around each command.
    pub static CLOSE_AFTER: std::cell::Cell<bool>;
}

/// What [`ON_PRIMARY_TRANSACTIONAL_WRITE`] does to a statement when it fires.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TransactionalWrite {
    /// Close the connection (the command's reply is not sent).
    pub close: bool,
    /// Fail the statement with this code before its commit.
    pub fail_code: Option<i32>,
}

/// Asks that the connection running this command close instead of replying (no effect
/// outside a command's scope).
pub fn close_after() {
    let _ = CLOSE_AFTER.try_with(|c| c.set(true));
}

/// mongod's message for every error `failCommand` raises.
const FAIL_MESSAGE: &str = "Failing command via 'failCommand' failpoint";

/// How often the fail point fires once its data selects a command.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
enum Mode {
    /// Never.
    #[default]
    Off,
    /// Every time.
    AlwaysOn,
    /// The next `n` times, then off (mongod fires once more for `{times: 0}`).
    Times(i64),
    /// Not the next `n` times, then every time.
    Skip(i64),
    /// When a uniform draw in `[0, 2^31 - 1]` falls below this threshold.
    Random(i64),
}

/// What `failCommand`'s `data` asks, read once when it is set.
#[derive(Debug, Clone, Default)]
struct FailCommand {
    /// `failCommands`: the command names (or aliases) it applies to.
    fail_commands: Vec<String>,
    /// `failAllCommands`: every command but `configureFailPoint`.
    fail_all: bool,
    /// `appName`: only connections whose handshake named this application.
    app_name: Option<String>,
    /// `namespace`: only commands on this namespace (`db` or `db.collection`).
    namespace: Option<String>,
    /// `threadName`: only the connection mongod would call so (`conn<id>`).
    thread_name: Option<String>,
    /// `closeConnection`.
    close_connection: bool,
    /// `blockConnection`, and what `blockTimeMS` gives (an error raised when it fires).
    block: Option<Result<u64, CommandError>>,
    /// `errorCode`.
    error_code: Option<i32>,
    /// `errorLabels`, when an array: they replace the labels mongod would add.
    error_labels: Option<RawArrayBuf>,
    /// `writeConcernError`, sent as given.
    write_concern_error: Option<RawBson>,
}

impl FailCommand {
    /// Whether the fail point fires when a command is about to run.
    fn acts_before(&self) -> bool {
        self.close_connection || self.block.is_some() || self.error_code.is_some()
    }
}

#[derive(Debug, Default)]
struct State {
    mode: Mode,
    data: Arc<FailCommand>,
    /// Times it fired since the server started (mongod's `timesEntered`).
    hits: i64,
    /// xorshift state for `activationProbability`.
    rng: u64,
}

/// The server's fail points ([`crate::ServerState::failpoints`]).
#[derive(Debug, Default)]
pub struct FailPoints {
    /// Whether `failCommand` may fire: the fast path of every command.
    active: AtomicBool,
    fail_command: Mutex<State>,
    /// Whether `onPrimaryTransactionalWrite` may fire.
    txn_active: AtomicBool,
    transactional_write: Mutex<State>,
    /// Whether `failGetMoreAfterCursorCheckout` may fire.
    getmore_active: AtomicBool,
    getmore_checkout: Mutex<State>,
}

/// The command a fail point is evaluated for.
pub struct Target<'a> {
    /// The command's name in the command table (`hello`, `findAndModify`…).
    pub command: &'a str,
    /// Whether a name is this command or one of its aliases.
    pub is_alias: &'a (dyn Fn(&str) -> bool + Sync),
    /// The database it runs against.
    pub db: &'a str,
    /// The collection it names, if it is a command on a collection.
    pub collection: Option<&'a str>,
    /// The connection's `client.application.name`, if its handshake sent one.
    pub app_name: Option<&'a str>,
    /// The connection's id (`hello.connectionId`).
    pub connection_id: i64,
    /// Whether it is a change stream's `aggregate` or `getMore`.
    pub change_stream: bool,
    /// The command document.
    pub body: &'a RawDocument,
}

impl std::fmt::Debug for Target<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Target")
            .field("command", &self.command)
            .field("db", &self.db)
            .field("collection", &self.collection)
            .finish_non_exhaustive()
    }
}

/// What to do with a command once `failCommand` was evaluated before it.
#[derive(Debug)]
pub enum Before {
    /// Run it.
    Run,
    /// Answer this reply instead (an error reply; not sent when the connection closes).
    Reply(RawDocumentBuf),
    /// Close the connection without replying.
    Close,
}

impl FailPoints {
    /// Whether some fail point may fire: the one check every command makes.
    pub fn active(&self) -> bool {
        self.active.load(Ordering::Acquire) || self.txn_active.load(Ordering::Acquire)
    }

    /// Evaluates `onPrimaryTransactionalWrite` for a retryable write's statement about to run:
    /// what it does when it fires.
    pub fn on_transactional_write(&self) -> Option<TransactionalWrite> {
        let data = fire_in(&self.transactional_write, &self.txn_active, |_| true)?;
        Some(TransactionalWrite {
            close: data.close_connection,
            fail_code: data.error_code,
        })
    }

    /// Evaluates `failGetMoreAfterCursorCheckout` for a `getMore` that checked its cursor out:
    /// the error it fails with, when it fires.
    pub fn on_get_more_checkout(&self) -> Option<CommandError> {
        let data = fire_in(&self.getmore_checkout, &self.getmore_active, |_| true)?;
        let code = data.error_code.unwrap_or(ErrorCode::InternalError.code());
        Some(CommandError::new(
            ErrorCode::from_code(code),
            "Failing command via 'failGetMoreAfterCursorCheckout' failpoint",
        ))
    }

    /// Sets `failCommand`; returns how many times it fired before.
    fn set(&self, mode: Mode, data: FailCommand) -> i64 {
        set_in(&self.fail_command, &self.active, mode, data)
    }

    /// Evaluates `failCommand` for a command its data selects (`selects`): `Some(data)` when
    /// it fires. An evaluation it does not select neither fires nor counts.
    fn fire(&self, selects: impl Fn(&FailCommand) -> bool) -> Option<Arc<FailCommand>> {
        fire_in(&self.fail_command, &self.active, selects)
    }

    /// `failCommand` where a command is about to run: blocks, closes or fails it.
    pub async fn before_command(
        &self,
        target: &Target<'_>,
        shutdown: &tokio_util::sync::CancellationToken,
    ) -> Before {
        let Some(data) = self.fire(|d| d.acts_before() && selects(d, target)) else {
            return Before::Run;
        };
        if let Some(block) = &data.block {
            let ms = match block {
                Ok(ms) => *ms,
                Err(e) => {
                    return Before::Reply(error_reply(e.code.code(), &e.errmsg, &data, target));
                }
            };
            tracing::info!(
                command = target.command,
                ms,
                "blocking command via 'failCommand'"
            );
            tokio::select! {
                () = tokio::time::sleep(Duration::from_millis(ms)) => {}
                () = shutdown.cancelled() => {
                    let e = CommandError::interrupted_at_shutdown();
                    return Before::Reply(error_reply(e.code.code(), &e.errmsg, &data, target));
                }
            }
        }
        if data.close_connection {
            tracing::info!(
                command = target.command,
                "closing connection via 'failCommand'"
            );
            return Before::Close;
        }
        match data.error_code {
            // Code 0 is mongod's OK: nothing is raised and the command runs.
            Some(code) if code != 0 => {
                tracing::info!(
                    command = target.command,
                    code,
                    "failing command via 'failCommand'"
                );
                Before::Reply(error_reply(code, FAIL_MESSAGE, &data, target))
            }
            _ => Before::Run,
        }
    }

    /// `failCommand` where a command that takes a write concern would wait for it: with
    /// `writeConcernError`, the reply (or error) carries that document, and the labels that
    /// go with it.
    pub fn after_command(&self, target: &Target<'_>, result: CommandResult) -> CommandResult {
        let Some(data) = self.fire(|d| d.write_concern_error.is_some() && selects(d, target))
        else {
            return result;
        };
        let Some(wce) = &data.write_concern_error else {
            return result;
        };
        let wc_code = match wce.as_raw_bson_ref() {
            RawBsonRef::Document(d) => d.get("code").ok().flatten().and_then(as_i32),
            _ => None,
        };
        match result {
            Ok(reply) => {
                let labels = labels(&data, target, None, wc_code);
                let mut out = RawDocumentBuf::new();
                let mut ok = None;
                for elem in reply.iter_elements().map_while(Result::ok) {
                    let Ok(value) = elem.value() else { continue };
                    if elem.key().as_str() == "ok" {
                        ok = Some(RawBson::from(value));
                    } else {
                        out.append(elem.key(), value);
                    }
                }
                out.append(bson::raw::cstr!("writeConcernError"), wce.clone());
                if let Some(labels) = labels {
                    out.append(bson::raw::cstr!("errorLabels"), labels);
                }
                out.append(bson::raw::cstr!("ok"), ok.unwrap_or(RawBson::Double(1.0)));
                Ok(out)
            }
            Err(mut e) => {
                let labels = labels(&data, target, Some(e.code.code()), wc_code);
                let mut info = e.info.take().map(|i| i.0).unwrap_or_default();
                info.append(bson::raw::cstr!("writeConcernError"), wce.clone());
                if let Some(labels) = labels {
                    info.append(bson::raw::cstr!("errorLabels"), labels);
                }
                Err(e.with_info(info))
            }
        }
    }
}

/// Whether `failCommand`'s data selects the command (mongod's
/// `shouldActivateFailCommandFailPoint`). Every Ebb client is external, so
/// `failInternalCommands` changes nothing.
fn selects(data: &FailCommand, target: &Target<'_>) -> bool {
    // Never configureFailPoint itself, even when named.
    if target.command == "configureFailPoint" {
        return false;
    }
    if let Some(thread) = &data.thread_name
        && *thread != format!("conn{}", target.connection_id)
    {
        return false;
    }
    if let Some(app) = &data.app_name
        && app != target.app_name.unwrap_or("")
    {
        return false;
    }
    if let Some(ns) = &data.namespace {
        let matches = match target.collection {
            Some(coll) => {
                ns.strip_prefix(target.db)
                    .and_then(|rest| rest.strip_prefix('.'))
                    == Some(coll)
            }
            None => ns == target.db,
        };
        if !matches {
            return false;
        }
    }
    data.fail_all || data.fail_commands.iter().any(|c| (target.is_alias)(c))
}

/// The error reply `failCommand` answers: `{ok: 0, errmsg, code, codeName, errorLabels?}`.
fn error_reply(code: i32, errmsg: &str, data: &FailCommand, target: &Target<'_>) -> RawDocumentBuf {
    let name = code_name(code);
    let mut reply = rawdoc! {
        "ok": 0.0,
        "errmsg": errmsg,
        "code": code,
        "codeName": name.as_ref(),
    };
    if let Some(labels) = labels(data, target, Some(code), None) {
        reply.append(bson::raw::cstr!("errorLabels"), labels);
    }
    reply
}

/// The `errorLabels` of a reply `failCommand` shaped: those of its data when it gives an
/// array (an empty one: none), otherwise those mongod's `ErrorLabelBuilder` adds.
fn labels(
    data: &FailCommand,
    target: &Target<'_>,
    code: Option<i32>,
    wc_code: Option<i32>,
) -> Option<RawArrayBuf> {
    if let Some(labels) = &data.error_labels {
        return (!labels.is_empty()).then(|| labels.clone());
    }
    let mut found = crate::labels::default_labels(target.command, target.body, code, wc_code);
    if target.change_stream
        && code.is_some_and(|c| crate::labels::is_resumable_change_stream_error(target.command, c))
    {
        found.push("ResumableChangeStreamError");
    }
    if found.is_empty() {
        return None;
    }
    let mut array = RawArrayBuf::new();
    for label in found {
        array.push(label);
    }
    Some(array)
}

fn as_i32(value: RawBsonRef<'_>) -> Option<i32> {
    match value {
        RawBsonRef::Int32(n) => Some(n),
        RawBsonRef::Int64(n) => i32::try_from(n).ok(),
        #[expect(
            clippy::cast_possible_truncation,
            reason = "mongod's numberInt() truncates a double toward zero"
        )]
        RawBsonRef::Double(d) if d.is_finite() && d.abs() < 2_147_483_648.0 => Some(d as i32),
        _ => None,
    }
}

/// `configureFailPoint: <name>, mode: …, data: {…}`: sets the fail point and answers how many
/// times it fired before, as mongod's `setGlobalFailPoint` does.
pub fn configure(failpoints: &FailPoints, body: &RawDocument) -> CommandResult {
    let name = match body.iter_elements().next().and_then(Result::ok) {
        Some(elem) => match elem.value() {
            Ok(RawBsonRef::String(s)) => s.to_owned(),
            _ => String::new(),
        },
        None => String::new(),
    };
    if name != FAIL_COMMAND
        && name != ON_PRIMARY_TRANSACTIONAL_WRITE
        && name != FAIL_GET_MORE_AFTER_CURSOR_CHECKOUT
    {
        return Err(CommandError::new(
            ErrorCode::FailPointSetFailed,
            format!("{name} not found"),
        ));
    }
    let (mode, data) = parse(body)?;
    tracing::warn!(name, ?mode, "set failpoint");
    let count = if name == FAIL_COMMAND {
        failpoints.set(mode, data)
    } else if name == FAIL_GET_MORE_AFTER_CURSOR_CHECKOUT {
        set_in(
            &failpoints.getmore_checkout,
            &failpoints.getmore_active,
            mode,
            data,
        )
    } else {
        // What onPrimaryTransactionalWrite reads of its data: closeConnection (true unless
        // given false) and failBeforeCommitExceptionCode.
        let raw = body.get_document("data").ok();
        let close = raw.is_none_or(|d| d.get("closeConnection").ok().flatten().is_none())
            || data.close_connection;
        let fail_code = raw
            .and_then(|d| {
                extract_integer(d, "failBeforeCommitExceptionCode")
                    .ok()
                    .flatten()
            })
            .and_then(|c| i32::try_from(c).ok());
        let data = FailCommand {
            close_connection: close,
            error_code: fail_code,
            ..FailCommand::default()
        };
        set_in(
            &failpoints.transactional_write,
            &failpoints.txn_active,
            mode,
            data,
        )
    };
    let mut reply = RawDocumentBuf::new();
    // mongod's appendNumber: an int below 2^30 in magnitude, a long above.
    match i32::try_from(count) {
        Ok(n) if n.unsigned_abs() < (1 << 30) => reply.append(bson::raw::cstr!("count"), n),
        _ => reply.append(bson::raw::cstr!("count"), count),
    }
    reply.append(bson::raw::cstr!("ok"), 1.0);
    Ok(reply)
}

/// mongod's `FailPoint::parseBSON`, then what `failCommand` reads of `data`.
fn parse(body: &RawDocument) -> CommandResult<(Mode, FailCommand)> {
    fn field<'d>(doc: &'d RawDocument, key: &str) -> CommandResult<Option<RawBsonRef<'d>>> {
        doc.get(key)
            .map_err(|e| CommandError::new(ErrorCode::InvalidBSON, e.to_string()))
    }
    let mode = match field(body, "mode")? {
        None => {
            return Err(CommandError::new(
                ErrorCode::IllegalOperation,
                "When setting a failpoint, you must supply a 'mode'",
            ));
        }
        Some(RawBsonRef::String("off")) => Mode::Off,
        Some(RawBsonRef::String("alwaysOn")) => Mode::AlwaysOn,
        Some(RawBsonRef::String(other)) => {
            return Err(CommandError::bad_value(format!("unknown mode: {other}")));
        }
        Some(RawBsonRef::Document(mode)) => parse_mode(mode)?,
        Some(_) => {
            return Err(CommandError::type_mismatch(
                "'mode' must be a string or JSON object",
            ));
        }
    };
    let data = match field(body, "data")? {
        None => FailCommand::default(),
        Some(RawBsonRef::Document(data)) => parse_data(data),
        // An array is an object to mongod; none of its fields ("0", "1"…) means anything here.
        Some(RawBsonRef::Array(_)) => FailCommand::default(),
        Some(_) => {
            return Err(CommandError::type_mismatch(
                "the 'data' option must be a JSON object",
            ));
        }
    };
    Ok((mode, data))
}

fn parse_mode(mode: &RawDocument) -> CommandResult<Mode> {
    let has = |key: &str| mode.get(key).ok().flatten().is_some();
    for (key, make) in [
        ("times", Mode::Times as fn(i64) -> Mode),
        ("skip", Mode::Skip),
    ] {
        if !has(key) {
            continue;
        }
        let n = extract_integer(mode, key)?.unwrap_or(0);
        if n < 0 {
            return Err(CommandError::bad_value(format!(
                "'{key}' option to 'mode' must be positive"
            )));
        }
        if n > i64::from(i32::MAX) {
            return Err(CommandError::bad_value(format!(
                "'{key}' option to 'mode' is too large"
            )));
        }
        return Ok(make(n));
    }
    if has("activationProbability") {
        let p = match mode.get("activationProbability").ok().flatten() {
            Some(RawBsonRef::Int32(n)) => f64::from(n),
            #[expect(clippy::cast_precision_loss, reason = "mongod's numberDouble()")]
            Some(RawBsonRef::Int64(n)) => n as f64,
            Some(RawBsonRef::Double(d)) => d,
            Some(RawBsonRef::Decimal128(_)) => {
                return Err(CommandError::new(
                    ErrorCode::NotImplemented,
                    "a decimal activationProbability is not supported by Ebb yet",
                ));
            }
            _ => {
                return Err(CommandError::type_mismatch(
                    "the 'activationProbability' option to 'mode' must be a double between 0 \
                     and 1",
                ));
            }
        };
        if !(0.0..=1.0).contains(&p) {
            return Err(CommandError::bad_value(format!(
                "activationProbability must be between 0.0 and 1.0; found {p}"
            )));
        }
        #[expect(
            clippy::cast_possible_truncation,
            reason = "p is in [0, 1] (or NaN, which gives 0): the product fits an i64"
        )]
        let threshold = (f64::from(i32::MAX) * p) as i64;
        return Ok(Mode::Random(threshold));
    }
    Err(CommandError::bad_value(
        "'mode' must be one of 'off', 'alwaysOn', '{times:n}', '{skip:n}' or \
         '{activationProbability:p}'",
    ))
}

/// mongod's `bsonExtractIntegerField`: `None` when absent; a number with an exact 64-bit
/// integer value, or its errors.
fn extract_integer(doc: &RawDocument, key: &str) -> CommandResult<Option<i64>> {
    let Some(value) = doc.get(key).ok().flatten() else {
        return Ok(None);
    };
    let not_exact = |shown: String| {
        CommandError::bad_value(format!(
            "Expected field \"{key}\" to have a value exactly representable as a 64-bit \
             integer, but found {key}: {shown}"
        ))
    };
    match value {
        RawBsonRef::Int32(n) => Ok(Some(i64::from(n))),
        RawBsonRef::Int64(n) => Ok(Some(n)),
        RawBsonRef::Double(d) => {
            if d.fract() == 0.0
                && (-9.223_372_036_854_776e18..9.223_372_036_854_776e18).contains(&d)
            {
                #[expect(
                    clippy::cast_possible_truncation,
                    reason = "checked: whole and within the i64 range"
                )]
                let n = d as i64;
                Ok(Some(n))
            } else {
                Err(not_exact(format!("{d:?}")))
            }
        }
        RawBsonRef::Decimal128(d) => Err(not_exact(d.to_string())),
        other => Err(CommandError::type_mismatch(format!(
            "Expected field \"{key}\" to have numeric type, but found {}",
            crate::commands::type_name(other.element_type())
        ))),
    }
}

/// mongod's `bsonExtractBooleanField`: a boolean, or a number read as one; anything else
/// reads as not given.
fn extract_bool(doc: &RawDocument, key: &str) -> bool {
    match doc.get(key).ok().flatten() {
        Some(RawBsonRef::Boolean(b)) => b,
        Some(RawBsonRef::Int32(n)) => n != 0,
        Some(RawBsonRef::Int64(n)) => n != 0,
        Some(RawBsonRef::Double(d)) => d != 0.0,
        _ => false,
    }
}

/// A string field as mongod's `getStringField` reads it ("" when not a string), if present.
fn string_field(doc: &RawDocument, key: &str) -> Option<String> {
    match doc.get(key).ok().flatten()? {
        RawBsonRef::String(s) => Some(s.to_owned()),
        _ => Some(String::new()),
    }
}

fn parse_data(data: &RawDocument) -> FailCommand {
    let mut fail_commands = Vec::new();
    match data.get("failCommands").ok().flatten() {
        Some(RawBsonRef::Array(list)) => {
            for name in list.into_iter().filter_map(Result::ok) {
                if let RawBsonRef::String(name) = name {
                    fail_commands.push(name.to_owned());
                }
            }
        }
        Some(RawBsonRef::Document(list)) => {
            for elem in list.iter_elements().filter_map(Result::ok) {
                if let Ok(RawBsonRef::String(name)) = elem.value() {
                    fail_commands.push(name.to_owned());
                }
            }
        }
        _ => {}
    }
    let has = |key: &str| data.get(key).ok().flatten().is_some();
    let block = extract_bool(data, "blockConnection").then(|| {
        let Ok(Some(ms)) = extract_integer(data, "blockTimeMS") else {
            return Err(CommandError::new(
                ErrorCode::InvalidOptions,
                "must specify 'blockTimeMS' when 'blockConnection' is true",
            ));
        };
        u64::try_from(ms).map_err(|_| {
            CommandError::new(
                ErrorCode::InvalidOptions,
                "'blockTimeMS' must be non-negative",
            )
        })
    });
    let error_code = match extract_integer(data, "errorCode") {
        // mongod keeps the low 32 bits of a larger number.
        #[expect(
            clippy::cast_possible_truncation,
            reason = "ErrorCodes::Error(long long) keeps the low 32 bits"
        )]
        Ok(Some(code)) => Some(code as i32),
        _ => None,
    };
    let error_labels = match data.get("errorLabels").ok().flatten() {
        Some(RawBsonRef::Array(labels)) => Some(labels.to_owned()),
        _ => None,
    };
    FailCommand {
        fail_commands,
        fail_all: has("failAllCommands"),
        app_name: string_field(data, "appName"),
        namespace: string_field(data, "namespace"),
        thread_name: string_field(data, "threadName"),
        close_connection: extract_bool(data, "closeConnection"),
        block,
        error_code,
        error_labels,
        write_concern_error: data
            .get("writeConcernError")
            .ok()
            .flatten()
            .map(RawBson::from),
    }
}

/// Sets the fail point held in `state` (`active` its fast flag); returns how many times it
/// fired before.
fn set_in(state: &Mutex<State>, active: &AtomicBool, mode: Mode, data: FailCommand) -> i64 {
    let mut state = state
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    state.mode = mode;
    state.data = Arc::new(data);
    if state.rng == 0 {
        state.rng = seed();
    }
    active.store(mode != Mode::Off, Ordering::Release);
    state.hits
}

/// Evaluates the fail point held in `state` (`active` its fast flag) for a command its data
/// selects: `Some(data)` when it fires. An evaluation it does not select neither fires nor
/// counts.
fn fire_in(
    state: &Mutex<State>,
    active: &AtomicBool,
    selects: impl Fn(&FailCommand) -> bool,
) -> Option<Arc<FailCommand>> {
    if !active.load(Ordering::Acquire) {
        return None;
    }
    let mut state = state
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if state.mode == Mode::Off || !selects(&state.data) {
        return None;
    }
    let fires = match state.mode {
        Mode::Off => false,
        Mode::AlwaysOn => true,
        Mode::Random(threshold) => i64::from(next_random(&mut state.rng)) < threshold,
        Mode::Times(n) => {
            let left = n.saturating_sub(1);
            if left <= 0 {
                state.mode = Mode::Off;
                active.store(false, Ordering::Release);
            } else {
                state.mode = Mode::Times(left);
            }
            true
        }
        Mode::Skip(n) => {
            if n > 0 {
                state.mode = Mode::Skip(n - 1);
                false
            } else {
                true
            }
        }
    };
    if !fires {
        return None;
    }
    state.hits = state.hits.saturating_add(1);
    Some(Arc::clone(&state.data))
}

fn seed() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    // Fold the 128-bit count; xorshift needs a non-zero state.
    #[expect(
        clippy::cast_possible_truncation,
        reason = "folding the halves on purpose"
    )]
    let folded = (nanos as u64) ^ ((nanos >> 64) as u64);
    folded | 1
}

/// A uniform draw in `[0, 2^31 - 1]` (xorshift64*: activation, not secrecy).
fn next_random(state: &mut u64) -> i32 {
    let mut x = *state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *state = x;
    let out = x.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 33;
    i32::try_from(out).unwrap_or(i32::MAX)
}

/// mongod 7.0's `codeName` for a code (`src/mongo/base/error_codes.yml`); `Location<n>` for a
/// number it does not name, as mongod reports one.
pub fn code_name(code: i32) -> std::borrow::Cow<'static, str> {
    match CODE_NAMES.binary_search_by_key(&code, |&(c, _)| c) {
        Ok(i) => CODE_NAMES
            .get(i)
            .map_or_else(|| format!("Location{code}").into(), |&(_, n)| n.into()),
        Err(_) => format!("Location{code}").into(),
    }
}

/// mongod 7.0's error codes, sorted by number.
static CODE_NAMES: &[(i32, &str)] = &[
    (0, "OK"),
    (1, "InternalError"),
    (2, "BadValue"),
    (3, "OBSOLETE_DuplicateKey"),
    (4, "NoSuchKey"),
    (5, "GraphContainsCycle"),
    (6, "HostUnreachable"),
    (7, "HostNotFound"),
    (8, "UnknownError"),
    (9, "FailedToParse"),
    (10, "CannotMutateObject"),
    (11, "UserNotFound"),
    (12, "UnsupportedFormat"),
    (13, "Unauthorized"),
    (14, "TypeMismatch"),
    (15, "Overflow"),
    (16, "InvalidLength"),
    (17, "ProtocolError"),
    (18, "AuthenticationFailed"),
    (19, "CannotReuseObject"),
    (20, "IllegalOperation"),
    (21, "EmptyArrayOperation"),
    (22, "InvalidBSON"),
    (23, "AlreadyInitialized"),
    (24, "LockTimeout"),
    (25, "RemoteValidationError"),
    (26, "NamespaceNotFound"),
    (27, "IndexNotFound"),
    (28, "PathNotViable"),
    (29, "NonExistentPath"),
    (30, "InvalidPath"),
    (31, "RoleNotFound"),
    (32, "RolesNotRelated"),
    (33, "PrivilegeNotFound"),
    (34, "CannotBackfillArray"),
    (35, "UserModificationFailed"),
    (36, "RemoteChangeDetected"),
    (37, "FileRenameFailed"),
    (38, "FileNotOpen"),
    (39, "FileStreamFailed"),
    (40, "ConflictingUpdateOperators"),
    (41, "FileAlreadyOpen"),
    (42, "LogWriteFailed"),
    (43, "CursorNotFound"),
    (45, "UserDataInconsistent"),
    (46, "LockBusy"),
    (47, "NoMatchingDocument"),
    (48, "NamespaceExists"),
    (49, "InvalidRoleModification"),
    (50, "MaxTimeMSExpired"),
    (51, "ManualInterventionRequired"),
    (52, "DollarPrefixedFieldName"),
    (53, "InvalidIdField"),
    (54, "NotSingleValueField"),
    (55, "InvalidDBRef"),
    (56, "EmptyFieldName"),
    (57, "DottedFieldName"),
    (58, "RoleModificationFailed"),
    (59, "CommandNotFound"),
    (60, "OBSOLETE_DatabaseNotFound"),
    (61, "ShardKeyNotFound"),
    (62, "OplogOperationUnsupported"),
    (63, "OBSOLETE_StaleShardVersion"),
    (64, "WriteConcernFailed"),
    (65, "MultipleErrorsOccurred"),
    (66, "ImmutableField"),
    (67, "CannotCreateIndex"),
    (68, "IndexAlreadyExists"),
    (69, "AuthSchemaIncompatible"),
    (70, "ShardNotFound"),
    (71, "ReplicaSetNotFound"),
    (72, "InvalidOptions"),
    (73, "InvalidNamespace"),
    (74, "NodeNotFound"),
    (75, "WriteConcernLegacyOK"),
    (76, "NoReplicationEnabled"),
    (77, "OperationIncomplete"),
    (78, "CommandResultSchemaViolation"),
    (79, "UnknownReplWriteConcern"),
    (80, "RoleDataInconsistent"),
    (81, "NoMatchParseContext"),
    (82, "NoProgressMade"),
    (83, "RemoteResultsUnavailable"),
    (84, "OBSOLETE_DuplicateKeyValue"),
    (85, "IndexOptionsConflict"),
    (86, "IndexKeySpecsConflict"),
    (87, "CannotSplit"),
    (88, "OBSOLETE_SplitFailed"),
    (89, "NetworkTimeout"),
    (90, "CallbackCanceled"),
    (91, "ShutdownInProgress"),
    (92, "SecondaryAheadOfPrimary"),
    (93, "InvalidReplicaSetConfig"),
    (94, "NotYetInitialized"),
    (95, "NotSecondary"),
    (96, "OperationFailed"),
    (97, "NoProjectionFound"),
    (98, "DBPathInUse"),
    (100, "UnsatisfiableWriteConcern"),
    (101, "OutdatedClient"),
    (102, "IncompatibleAuditMetadata"),
    (103, "NewReplicaSetConfigurationIncompatible"),
    (104, "NodeNotElectable"),
    (105, "IncompatibleShardingMetadata"),
    (106, "DistributedClockSkewed"),
    (107, "LockFailed"),
    (108, "InconsistentReplicaSetNames"),
    (109, "ConfigurationInProgress"),
    (110, "CannotInitializeNodeWithData"),
    (111, "NotExactValueField"),
    (112, "WriteConflict"),
    (113, "InitialSyncFailure"),
    (114, "InitialSyncOplogSourceMissing"),
    (115, "CommandNotSupported"),
    (116, "DocTooLargeForCapped"),
    (117, "ConflictingOperationInProgress"),
    (118, "NamespaceNotSharded"),
    (119, "InvalidSyncSource"),
    (120, "OplogStartMissing"),
    (121, "DocumentValidationFailure"),
    (122, "OBSOLETE_ReadAfterOptimeTimeout"),
    (123, "NotAReplicaSet"),
    (124, "IncompatibleElectionProtocol"),
    (125, "CommandFailed"),
    (126, "RPCProtocolNegotiationFailed"),
    (127, "UnrecoverableRollbackError"),
    (128, "LockNotFound"),
    (129, "LockStateChangeFailed"),
    (130, "SymbolNotFound"),
    (132, "OBSOLETE_ConfigServersInconsistent"),
    (133, "FailedToSatisfyReadPreference"),
    (134, "ReadConcernMajorityNotAvailableYet"),
    (135, "StaleTerm"),
    (136, "CappedPositionLost"),
    (137, "IncompatibleShardingConfigVersion"),
    (138, "RemoteOplogStale"),
    (139, "JSInterpreterFailure"),
    (140, "InvalidSSLConfiguration"),
    (141, "SSLHandshakeFailed"),
    (142, "JSUncatchableError"),
    (143, "CursorInUse"),
    (144, "IncompatibleCatalogManager"),
    (145, "PooledConnectionsDropped"),
    (146, "ExceededMemoryLimit"),
    (147, "ZLibError"),
    (148, "ReadConcernMajorityNotEnabled"),
    (149, "NoConfigPrimary"),
    (150, "StaleEpoch"),
    (151, "OperationCannotBeBatched"),
    (152, "OplogOutOfOrder"),
    (153, "ChunkTooBig"),
    (154, "InconsistentShardIdentity"),
    (155, "CannotApplyOplogWhilePrimary"),
    (156, "OBSOLETE_NeedsDocumentMove"),
    (157, "CanRepairToDowngrade"),
    (158, "MustUpgrade"),
    (159, "DurationOverflow"),
    (160, "MaxStalenessOutOfRange"),
    (161, "IncompatibleCollationVersion"),
    (162, "CollectionIsEmpty"),
    (163, "ZoneStillInUse"),
    (164, "InitialSyncActive"),
    (165, "ViewDepthLimitExceeded"),
    (166, "CommandNotSupportedOnView"),
    (167, "OptionNotSupportedOnView"),
    (168, "InvalidPipelineOperator"),
    (169, "CommandOnShardedViewNotSupportedOnMongod"),
    (170, "TooManyMatchingDocuments"),
    (171, "CannotIndexParallelArrays"),
    (172, "TransportSessionClosed"),
    (173, "TransportSessionNotFound"),
    (174, "TransportSessionUnknown"),
    (175, "QueryPlanKilled"),
    (176, "FileOpenFailed"),
    (177, "ZoneNotFound"),
    (178, "RangeOverlapConflict"),
    (179, "WindowsPdhError"),
    (180, "BadPerfCounterPath"),
    (181, "AmbiguousIndexKeyPattern"),
    (182, "InvalidViewDefinition"),
    (183, "ClientMetadataMissingField"),
    (184, "ClientMetadataAppNameTooLarge"),
    (185, "ClientMetadataDocumentTooLarge"),
    (186, "ClientMetadataCannotBeMutated"),
    (187, "LinearizableReadConcernError"),
    (188, "IncompatibleServerVersion"),
    (189, "PrimarySteppedDown"),
    (190, "MasterSlaveConnectionFailure"),
    (191, "OBSOLETE_BalancerLostDistributedLock"),
    (192, "FailPointEnabled"),
    (193, "OBSOLETE_NoShardingEnabled"),
    (194, "BalancerInterrupted"),
    (195, "ViewPipelineMaxSizeExceeded"),
    (197, "InvalidIndexSpecificationOption"),
    (198, "OBSOLETE_ReceivedOpReplyMessage"),
    (199, "ReplicaSetMonitorRemoved"),
    (200, "ChunkRangeCleanupPending"),
    (201, "CannotBuildIndexKeys"),
    (202, "NetworkInterfaceExceededTimeLimit"),
    (203, "ShardingStateNotInitialized"),
    (204, "TimeProofMismatch"),
    (205, "ClusterTimeFailsRateLimiter"),
    (206, "NoSuchSession"),
    (207, "InvalidUUID"),
    (208, "TooManyLocks"),
    (209, "StaleClusterTime"),
    (210, "CannotVerifyAndSignLogicalTime"),
    (211, "KeyNotFound"),
    (212, "IncompatibleRollbackAlgorithm"),
    (213, "DuplicateSession"),
    (214, "AuthenticationRestrictionUnmet"),
    (215, "DatabaseDropPending"),
    (216, "ElectionInProgress"),
    (217, "IncompleteTransactionHistory"),
    (218, "UpdateOperationFailed"),
    (219, "FTDCPathNotSet"),
    (220, "FTDCPathAlreadySet"),
    (221, "IndexModified"),
    (222, "CloseChangeStream"),
    (223, "IllegalOpMsgFlag"),
    (224, "QueryFeatureNotAllowed"),
    (225, "TransactionTooOld"),
    (226, "AtomicityFailure"),
    (227, "CannotImplicitlyCreateCollection"),
    (228, "SessionTransferIncomplete"),
    (229, "MustDowngrade"),
    (230, "DNSHostNotFound"),
    (231, "DNSProtocolError"),
    (232, "MaxSubPipelineDepthExceeded"),
    (233, "TooManyDocumentSequences"),
    (234, "RetryChangeStream"),
    (235, "InternalErrorNotSupported"),
    (236, "ForTestingErrorExtraInfo"),
    (237, "CursorKilled"),
    (238, "NotImplemented"),
    (239, "SnapshotTooOld"),
    (240, "DNSRecordTypeMismatch"),
    (241, "ConversionFailure"),
    (242, "CannotCreateCollection"),
    (243, "IncompatibleWithUpgradedServer"),
    (244, "NOT_YET_AVAILABLE_TransactionAborted"),
    (245, "BrokenPromise"),
    (246, "SnapshotUnavailable"),
    (247, "ProducerConsumerQueueBatchTooLarge"),
    (248, "ProducerConsumerQueueEndClosed"),
    (249, "StaleDbVersion"),
    (250, "StaleChunkHistory"),
    (251, "NoSuchTransaction"),
    (252, "ReentrancyNotAllowed"),
    (253, "FreeMonHttpInFlight"),
    (254, "FreeMonHttpTemporaryFailure"),
    (255, "FreeMonHttpPermanentFailure"),
    (256, "TransactionCommitted"),
    (257, "TransactionTooLarge"),
    (258, "UnknownFeatureCompatibilityVersion"),
    (259, "KeyedExecutorRetry"),
    (260, "InvalidResumeToken"),
    (261, "TooManyLogicalSessions"),
    (262, "ExceededTimeLimit"),
    (263, "OperationNotSupportedInTransaction"),
    (264, "TooManyFilesOpen"),
    (265, "OrphanedRangeCleanUpFailed"),
    (266, "FailPointSetFailed"),
    (267, "PreparedTransactionInProgress"),
    (268, "CannotBackup"),
    (269, "DataModifiedByRepair"),
    (270, "RepairedReplicaSetNode"),
    (271, "JSInterpreterFailureWithStack"),
    (272, "MigrationConflict"),
    (273, "ProducerConsumerQueueProducerQueueDepthExceeded"),
    (274, "ProducerConsumerQueueConsumed"),
    (275, "ExchangePassthrough"),
    (276, "IndexBuildAborted"),
    (277, "AlarmAlreadyFulfilled"),
    (278, "UnsatisfiableCommitQuorum"),
    (279, "ClientDisconnect"),
    (280, "ChangeStreamFatalError"),
    (281, "TransactionCoordinatorSteppingDown"),
    (282, "TransactionCoordinatorReachedAbortDecision"),
    (283, "WouldChangeOwningShard"),
    (284, "ForTestingErrorExtraInfoWithExtraInfoInNamespace"),
    (285, "IndexBuildAlreadyInProgress"),
    (286, "ChangeStreamHistoryLost"),
    (287, "TransactionCoordinatorDeadlineTaskCanceled"),
    (288, "ChecksumMismatch"),
    (289, "WaitForMajorityServiceEarlierOpTimeAvailable"),
    (290, "TransactionExceededLifetimeLimitSeconds"),
    (291, "NoQueryExecutionPlans"),
    (292, "QueryExceededMemoryLimitNoDiskUseAllowed"),
    (293, "InvalidSeedList"),
    (294, "InvalidTopologyType"),
    (295, "InvalidHeartBeatFrequency"),
    (296, "TopologySetNameRequired"),
    (297, "HierarchicalAcquisitionLevelViolation"),
    (298, "InvalidServerType"),
    (299, "OCSPCertificateStatusRevoked"),
    (
        300,
        "RangeDeletionAbandonedBecauseCollectionWithUUIDDoesNotExist",
    ),
    (301, "DataCorruptionDetected"),
    (302, "OCSPCertificateStatusUnknown"),
    (303, "SplitHorizonChange"),
    (306, "ReadThroughCacheLookupCanceled"),
    (307, "RangeDeletionAbandonedBecauseTaskDocumentDoesNotExist"),
    (308, "CurrentConfigNotCommittedYet"),
    (309, "ExhaustCommandFinished"),
    (310, "PeriodicJobIsStopped"),
    (311, "TransactionCoordinatorCanceled"),
    (312, "OperationIsKilledAndDelisted"),
    (313, "ResumableRangeDeleterDisabled"),
    (314, "ObjectIsBusy"),
    (315, "TooStaleToSyncFromSource"),
    (316, "QueryTrialRunCompleted"),
    (317, "ConnectionPoolExpired"),
    (318, "ForTestingOptionalErrorExtraInfo"),
    (319, "MovePrimaryInProgress"),
    (322, "APIVersionError"),
    (323, "APIStrictError"),
    (324, "APIDeprecationError"),
    (326, "OplogQueryMinTsMissing"),
    (330, "SkipCommandExecution"),
    (331, "FailedToRunWithReplyBuilder"),
    (332, "CannotDowngrade"),
    (333, "ServiceExecutorInShutdown"),
    (334, "MechanismUnavailable"),
    (336, "TimeseriesBucketCleared"),
    (337, "AuthenticationAbandoned"),
    (338, "ReshardCollectionInProgress"),
    (339, "NoSuchReshardCollection"),
    (340, "ReshardCollectionCommitted"),
    (341, "ReshardCollectionAborted"),
    (342, "ReshardingCriticalSectionTimeout"),
    (343, "ShardCannotRefreshDueToLocksHeld"),
    (344, "AuditingNotEnabled"),
    (345, "RuntimeAuditConfigurationNotEnabled"),
    (346, "ChangeStreamInvalidated"),
    (347, "APIMismatchError"),
    (348, "ChangeStreamTopologyChange"),
    (349, "KeyPatternShorterThanBound"),
    (350, "ReshardCollectionTruncatedError"),
    (351, "ChangeStreamStartAfterInvalidate"),
    (352, "UnsupportedOpQueryCommand"),
    (354, "LoadBalancerSupportMismatch"),
    (355, "InterruptedDueToStorageChange"),
    (356, "TxnRetryCounterTooOld"),
    (357, "InvalidBSONType"),
    (358, "InternalTransactionNotSupported"),
    (359, "CannotConvertIndexToUnique"),
    (360, "PlacementVersionRefreshCanceled"),
    (361, "CollectionUUIDMismatch"),
    (362, "FutureAlreadyRetrieved"),
    (363, "RetryableTransactionInProgress"),
    (365, "TemporarilyUnavailable"),
    (366, "WouldChangeOwningShardDeletedNoDocument"),
    (367, "FLECompactionPlaceholder"),
    (369, "FLETransactionAbort"),
    (370, "CannotDropShardKeyIndex"),
    (371, "UserWritesBlocked"),
    (372, "CloseConnectionForShutdownCommand"),
    (373, "InternalTransactionsExhaustiveFindHasMore"),
    (374, "TransactionAPIMustRetryTransaction"),
    (375, "TransactionAPIMustRetryCommit"),
    (376, "ChangeStreamNotEnabled"),
    (377, "FLEMaxTagLimitExceeded"),
    (378, "NonConformantBSON"),
    (379, "DatabaseMetadataRefreshCanceled"),
    (380, "RequestAlreadyFulfilled"),
    (
        381,
        "ReshardingCoordinatorServiceConflictingOperationInProgress",
    ),
    (382, "RemoteCommandExecutionError"),
    (383, "CollectionIsEmptyLocally"),
    (384, "ConnectionError"),
    (385, "ConflictingServerlessOperation"),
    (386, "DuplicateKeyId"),
    (387, "EncounteredFLEPayloadWhileApplyingHmac"),
    (388, "TransactionTooLargeForCache"),
    (389, "LibmongocryptError"),
    (390, "InvalidSignature"),
    (391, "ReauthenticationRequired"),
    (392, "InvalidJWT"),
    (393, "InvalidTenantId"),
    (395, "TruncatedSerialization"),
    (9001, "SocketException"),
    (9996, "OBSOLETE_RecvStaleConfig"),
    (10003, "CannotGrowDocumentInCappedNamespace"),
    (10058, "LegacyNotPrimary"),
    (10107, "NotWritablePrimary"),
    (10334, "BSONObjectTooLarge"),
    (11000, "DuplicateKey"),
    (11600, "InterruptedAtShutdown"),
    (11601, "Interrupted"),
    (11602, "InterruptedDueToReplStateChange"),
    (12586, "BackgroundOperationInProgressForDatabase"),
    (12587, "BackgroundOperationInProgressForNamespace"),
    (13104, "OBSOLETE_PrepareConfigsFailed"),
    (13113, "MergeStageNoMatchingDocument"),
    (13297, "DatabaseDifferCase"),
    (13388, "StaleConfig"),
    (13435, "NotPrimaryNoSecondaryOk"),
    (13436, "NotPrimaryOrSecondary"),
    (14031, "OutOfDiskSpace"),
    (17280, "KeyTooLong"),
    (28769, "NamespaceCannotBeSharded"),
    (31082, "SearchNotEnabled"),
    (40413, "IDLDuplicateField"),
    (40414, "IDLFailedToParse"),
    (40415, "IDLUnknownField"),
    (46841, "ClientMarkedKilled"),
    (50768, "NotARetryableWriteCommand"),
    (50915, "BackupCursorOpenConflictWithCheckpoint"),
    (56846, "ConfigServerUnreachable"),
    (57986, "RetryableInternalTransactionNotSupported"),
    (640_570, "IllegalChangeToExpectedShardVersion"),
    (640_571, "IllegalChangeToExpectedDatabaseVersion"),
    (4_662_500, "IDLUnknownFieldPossibleMongocryptd"),
];

#[cfg(test)]
mod tests;
