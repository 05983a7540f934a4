//! `$changeStream`: an `aggregate` whose first stage is `$changeStream` opens a cursor on the
//! oplog ([`crate::changestream::reader`]); each `getMore` reads on, waiting up to its
//! `maxTimeMS` (the driver's `maxAwaitTimeMS`; one second when absent) and answering the
//! moment an event arrives. Replies carry `postBatchResumeToken`, as mongod's.

use std::time::{Duration, Instant};

use bson::{RawArrayBuf, RawBsonRef, RawDocument, RawDocumentBuf, rawdoc};

use super::args::{collection_name, field, variables, wrong_type};
use crate::changestream::reader::StreamReader;
use crate::changestream::spec::SPLIT_STAGE;
use crate::changestream::{Spec, scope, validate_pipeline};
use crate::cursor::{Cursor, Source};
use crate::dispatch::Request;
use crate::error::{CommandError, CommandResult, ErrorCode};
use crate::replset::ts_to_u64;
use crate::state::ServerState;

/// How long a `getMore` waits for events when it gives no `maxTimeMS` (mongod's default for
/// awaitable cursors).
const DEFAULT_AWAIT: Duration = Duration::from_secs(1);

/// Largest batch of events, in bytes (mongod's 16 MiB reply limit, less room for the rest).
const MAX_BATCH_BYTES: usize = 16 * 1024 * 1024 - 16 * 1024;

/// Whether `req` (an `aggregate`) is [`open`]'s: its first stage is `$changeStream`, or, on a
/// replica set (`anywhere`), any stage is (`open` answers mongod's error for it elsewhere; a
/// standalone's pipeline parser refuses the stage wherever it stands).
pub(super) fn has_change_stream(req: &Request<'_>, anywhere: bool) -> bool {
    let Ok(Some(RawBsonRef::Array(stages))) = req.body.get("pipeline") else {
        return false;
    };
    let is_change_stream = |stage: Result<RawBsonRef<'_>, _>| {
        matches!(
            stage,
            Ok(RawBsonRef::Document(d)) if matches!(stage_of(d), Some(("$changeStream", _)))
        )
    };
    let mut stages = stages.into_iter();
    if anywhere {
        stages.any(is_change_stream)
    } else {
        stages.next().is_some_and(is_change_stream)
    }
}

/// Whether `stage` is one the pipeline parser does not know: `$changeStream` and its split
/// stage (this module's), and those the aggregate command answers (`$out` and the like).
fn is_command_layer_stage(stage: &RawDocument) -> bool {
    matches!(
        stage_of(stage),
        Some((
            "$changeStream"
                | SPLIT_STAGE
                | "$out"
                | "$merge"
                | "$documents"
                | "$listLocalSessions"
                | "$listSessions",
            _
        ))
    )
}

/// The name and argument of a pipeline stage.
fn stage_of(stage: &RawDocument) -> Option<(&str, RawBsonRef<'_>)> {
    stage
        .iter()
        .next()
        .and_then(Result::ok)
        .map(|(k, v)| (k.as_str(), v))
}

/// `aggregate` with `$changeStream` first: opens the stream.
pub(super) async fn open(req: &Request<'_>, state: &ServerState) -> CommandResult {
    let stages = match field(req, "pipeline")? {
        Some(RawBsonRef::Array(a)) => a,
        Some(other) => return Err(wrong_type("aggregate.pipeline", other, " 'array'")),
        None => return Err(CommandError::missing_field("aggregate.pipeline")),
    };
    let mut docs: Vec<&RawDocument> = Vec::new();
    for stage in stages {
        match stage.map_err(|e| CommandError::new(ErrorCode::InvalidBSON, e.to_string()))? {
            RawBsonRef::Document(d) => docs.push(d),
            _ => {
                return Err(CommandError::new(
                    ErrorCode::TypeMismatch,
                    "Each element of the 'pipeline' array must be an object",
                ));
            }
        }
    }
    let Some((first, rest)) = docs.split_first() else {
        return Err(CommandError::internal("an empty change stream pipeline"));
    };
    let Some(("$changeStream", arg)) = stage_of(first) else {
        // mongod parses every stage before it checks where `$changeStream` stands.
        let vars = variables(req, state.now_ms())?;
        for stage in &docs {
            if !is_command_layer_stage(stage) {
                crate::pipeline::parse_stage(stage, &vars)?;
            }
        }
        return Err(CommandError::new(
            ErrorCode::Location(40602),
            "$changeStream is only valid as the first stage in a pipeline",
        ));
    };
    let (Some(_), Some(oplog)) = (&state.replset, state.catalog.oplog()) else {
        return Err(super::aggregate::change_stream_on_standalone(arg));
    };
    // Change streams read at majority: another level named explicitly is refused.
    if let Ok(Some(RawBsonRef::Document(rc))) = req.body.get("readConcern")
        && let Ok(Some(RawBsonRef::String(level))) = rc.get("level")
        && level != "majority"
    {
        return Err(CommandError::new(
            ErrorCode::InvalidOptions,
            "Change streams may only use 'majority' readConcern",
        ));
    }
    let spec = Spec::parse(arg)?;
    let collectionless = matches!(
        req.body.get("aggregate"),
        Ok(Some(
            RawBsonRef::Int32(_) | RawBsonRef::Int64(_) | RawBsonRef::Double(_)
        ))
    );
    let coll = if collectionless {
        crate::catalog::validate_db_name(req.db)?;
        None
    } else {
        let name = collection_name(req)?;
        crate::catalog::validate_namespace(req.db, name)?;
        if state.catalog.is_view(req.db, name) {
            return Err(CommandError::new(
                ErrorCode::CommandNotSupportedOnView,
                format!("Namespace {}.{name} is a view, not a collection", req.db),
            ));
        }
        Some(name)
    };
    let scope = scope(req.db, coll, &spec)?;
    // mongod parses every stage, then checks which may follow `$changeStream` and where.
    let vars = variables(req, state.now_ms())?;
    let mut user_stages = Vec::new();
    for stage in rest {
        // (Stages the command layer answers, `$out` and the like, are for the check below to
        // refuse.)
        if is_command_layer_stage(stage) {
            continue;
        }
        user_stages.push(crate::pipeline::parse_stage(stage, &vars)?);
    }
    let split = validate_pipeline(&docs, &spec)?;
    let batch_size = match req.body.get("cursor") {
        Ok(Some(RawBsonRef::Document(c))) => match c.get("batchSize") {
            Ok(Some(RawBsonRef::Int32(n))) => usize::try_from(n).ok(),
            Ok(Some(RawBsonRef::Int64(n))) => usize::try_from(n).ok(),
            #[expect(
                clippy::cast_possible_truncation,
                clippy::cast_sign_loss,
                reason = "a batch size"
            )]
            Ok(Some(RawBsonRef::Double(n))) if n >= 0.0 => Some(n as usize),
            _ => None,
        },
        _ => None,
    };
    let ns = match coll {
        Some(c) => format!("{}.{c}", req.db),
        None => format!("{}.$cmd.aggregate", req.db),
    };
    let mut reader = StreamReader::new(scope, spec, user_stages, split, oplog.latest());
    // A start before the oldest entry kept: what happened in between may be gone.
    let oldest = oplog.oldest();
    if ts_to_u64(reader.next_time()) < oldest {
        return Err(crate::changestream::history_lost());
    }
    let visible = oplog.visible();
    let catalog = std::sync::Arc::clone(&state.catalog);
    let now = state.now_ms();
    let max_docs = batch_size.unwrap_or(usize::MAX);
    let start = ts_to_u64(reader.next_time());
    let (docs, reader) = tokio::task::spawn_blocking(move || {
        let docs = reader.read(&catalog, now, (oldest, visible), max_docs, MAX_BATCH_BYTES);
        (docs, reader)
    })
    .await
    .map_err(|e| CommandError::internal(e.to_string()))?;
    let docs = docs.map_err(|e| {
        // The retention may have removed the token's entry after `oldest` was read: its
        // event is then not found because the history before it is gone.
        if e.code == ErrorCode::ChangeStreamFatalError && start < oplog.oldest() {
            crate::changestream::history_lost()
        } else {
            e
        }
    })?;
    let token = reader.post_batch_resume_token();
    let id = if reader.invalidated {
        0
    } else {
        let mut cursor = Cursor::new(
            ns.clone(),
            Source::Buffered(std::collections::VecDeque::new()),
            batch_size,
            false,
            now,
        )
        .in_session(super::read::lsid_of(req));
        cursor.stream = Some(Box::new(reader));
        state.cursors.insert(cursor)
    };
    Ok(reply(id, &ns, "firstBatch", docs, token))
}

/// `getMore` of a change stream's cursor (taken from the table by the caller): reads on,
/// waiting for events until `maxTimeMS` (or a second) has passed.
pub(super) async fn get_more(
    req: &Request<'_>,
    state: &ServerState,
    id: i64,
    ns: String,
    mut cursor: Cursor,
    batch_size: Option<usize>,
) -> CommandResult {
    let started = Instant::now();
    let wait = match req.body.get("maxTimeMS") {
        Ok(Some(RawBsonRef::Int32(n))) => Duration::from_millis(u64::try_from(n).unwrap_or(0)),
        Ok(Some(RawBsonRef::Int64(n))) => Duration::from_millis(u64::try_from(n).unwrap_or(0)),
        #[expect(
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss,
            reason = "milliseconds"
        )]
        Ok(Some(RawBsonRef::Double(n))) if n >= 0.0 => Duration::from_millis(n as u64),
        _ => DEFAULT_AWAIT,
    };
    let deadline = started + wait;
    let Some(oplog) = state.catalog.oplog() else {
        return Err(CommandError::internal("a change stream without an oplog"));
    };
    let mut changes = oplog.subscribe_visible();
    let max_docs = batch_size
        .filter(|&b| b > 0)
        .or(cursor.batch_size.filter(|&b| b > 0))
        .unwrap_or(usize::MAX);
    let catalog = std::sync::Arc::clone(&state.catalog);
    let mut reader = cursor
        .stream
        .take()
        .ok_or_else(|| CommandError::internal("not a change stream cursor"))?;
    let docs = loop {
        changes.borrow_and_update();
        let now = state.now_ms();
        let (oldest, visible) = (oplog.oldest(), oplog.visible());
        let catalog = std::sync::Arc::clone(&catalog);
        let (docs, back) = tokio::task::spawn_blocking(move || {
            let docs = reader.read(&catalog, now, (oldest, visible), max_docs, MAX_BATCH_BYTES);
            (docs, reader)
        })
        .await
        .map_err(|e| CommandError::internal(e.to_string()))?;
        reader = back;
        let docs = docs?;
        if !docs.is_empty() || reader.invalidated || Instant::now() >= deadline {
            break docs;
        }
        // A read stops after so many entries: what is left is read at once, not after the
        // next write. (Between reads, shutdown and the deadline are looked at.)
        if reader.next_time_u64() <= visible {
            if state.shutdown.is_cancelled() {
                break docs;
            }
            continue;
        }
        tokio::select! {
            moved = changes.changed() => {
                if moved.is_err() {
                    break docs;
                }
            }
            () = tokio::time::sleep_until(deadline.into()) => {}
            () = state.shutdown.cancelled() => break docs,
        }
    };
    let token = reader.post_batch_resume_token();
    let id = if reader.invalidated {
        0
    } else {
        cursor.stream = Some(reader);
        state.cursors.put_back(id, cursor, state.now_ms());
        id
    };
    Ok(reply(id, &ns, "nextBatch", docs, token))
}

/// `{cursor: {<batch>: docs, postBatchResumeToken, id, ns}, ok: 1}`.
fn reply(
    id: i64,
    ns: &str,
    batch_name: &str,
    docs: Vec<RawDocumentBuf>,
    token: RawDocumentBuf,
) -> RawDocumentBuf {
    let mut batch = RawArrayBuf::new();
    for doc in docs {
        batch.push(doc);
    }
    let mut cursor = RawDocumentBuf::new();
    if let Ok(name) = <&bson::raw::CStr>::try_from(batch_name) {
        cursor.append(name, batch);
    }
    cursor.append(bson::raw::cstr!("postBatchResumeToken"), token);
    cursor.append(bson::raw::cstr!("id"), id);
    cursor.append(bson::raw::cstr!("ns"), ns);
    rawdoc! { "cursor": cursor, "ok": 1.0 }
}
