//! From a decoded frame to a reply: turns OP_MSG and OP_QUERY into one command request, runs
//! it, and encodes the reply (or error) on the request's `responseTo`.

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::time::Instant;

use bson::{RawDocument, RawDocumentBuf};
use bytes::BytesMut;
use ebb_wire::{
    Body, Compressor, DocumentSequence, Frame, MAX_MESSAGE_SIZE, Message, MessageFlags, OpCode,
    OpMsg, OpQuery, OpReply,
};
use tracing::{debug, info, warn};

use crate::commands;
use crate::error::{CommandError, ErrorCode};
use crate::state::{Metrics, ServerState};

/// What a connection knows about itself.
#[derive(Debug)]
pub struct ConnCtx {
    /// `hello.connectionId`.
    pub id: i64,
    /// The client's address (`whatsmyuri`).
    pub peer: SocketAddr,
    /// Compressors negotiated by the first `hello`.
    pub compressors: Vec<Compressor>,
    /// The `client` metadata document of the first `hello`.
    pub client_metadata: Option<RawDocumentBuf>,
    /// Whether a `hello`/`isMaster` has been answered on this connection.
    pub handshake_done: bool,
    /// Set by the `shutdown` command: its reply is not sent, and the connection closes, as
    /// with mongod, whose clients see the connection end.
    pub closing: bool,
    /// An awaitable `hello` streamed with `moreToCome` (the exhaust protocol): the connection
    /// answers it again, without a request, until a reply goes without the flag.
    pub exhaust: Option<Exhaust>,
    /// The `requestID` of the last reply that had one of its own (exhaust replies).
    last_reply_id: i32,
    /// Who is logged in, and a login in progress.
    pub auth: crate::auth::session::AuthSession,
    /// What the Cosmos DB profile keeps for the connection.
    pub cosmos: crate::cosmos::ConnState,
}

/// The request an exhaust stream answers again (mongod's "next invocation").
#[derive(Debug)]
pub struct Exhaust {
    /// The `hello` command, its `topologyVersion` the one last answered.
    body: RawDocumentBuf,
    /// The compressor of the request.
    compressor: Option<Compressor>,
    /// Whether the request was checksummed.
    checksum: bool,
    /// The `requestID` of the reply the next one follows.
    response_to: i32,
}

impl ConnCtx {
    /// A fresh connection.
    pub fn new(id: i64, peer: SocketAddr) -> Self {
        ConnCtx {
            id,
            peer,
            compressors: Vec::new(),
            client_metadata: None,
            handshake_done: false,
            closing: false,
            exhaust: None,
            last_reply_id: 0,
            auth: crate::auth::session::AuthSession::new(peer.ip().is_loopback()),
            cosmos: crate::cosmos::ConnState::default(),
        }
    }

    /// A `requestID` for a reply another reply will answer to.
    fn next_reply_id(&mut self) -> i32 {
        self.last_reply_id = self.last_reply_id.checked_add(1).unwrap_or(1);
        self.last_reply_id
    }
}

/// One command as handlers see it, whichever opcode carried it.
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    /// The command name: the body's first key.
    pub name: &'a str,
    /// The database it runs against (`$db`, or the OP_QUERY namespace's database).
    pub db: &'a str,
    /// The command document.
    pub body: &'a RawDocument,
    /// OP_MSG kind-1 sections, which stand for array fields of the body.
    pub sequences: &'a [DocumentSequence],
}

/// Handles one frame, appending any reply to `out`. An `Err` is connection-fatal: the caller
/// writes what is in `out` (nothing, today) and closes.
pub async fn handle(
    frame: &Frame,
    ctx: &mut ConnCtx,
    state: &ServerState,
    out: &mut BytesMut,
) -> Result<(), ebb_wire::Error> {
    let request_id = frame.header.request_id;
    let message = match Message::decode(frame, MAX_MESSAGE_SIZE) {
        Ok(m) => m,
        Err(e) if e.is_connection_fatal() => return Err(e),
        Err(e) => {
            // mongod answers these parse errors and reads on, except that a request marked
            // moreToCome is never answered.
            let (op, flags) = original_op_and_flags(&frame.bytes);
            if op == OpCode::Msg.as_i32()
                && MessageFlags(flags).contains(MessageFlags::MORE_TO_COME)
            {
                info!(error = %e, "invalid moreToCome message dropped");
                return Ok(());
            }
            info!(error = %e, "invalid message answered with an error");
            let reply = CommandError::from(e).to_document();
            let body = if op == OpCode::Query.as_i32() {
                Body::Reply(OpReply::single(reply))
            } else {
                Body::Msg(OpMsg::new(reply))
            };
            return reply_to(request_id, body).encode(None, out);
        }
    };
    if let Some(c) = message.compressor {
        let counters = &state.metrics.compression[usize::from(c.id())];
        counters
            .decompressor_in
            .fetch_add(frame.bytes.len() as u64, Ordering::Relaxed);
        counters
            .decompressor_out
            .fetch_add(original_len(&frame.bytes), Ordering::Relaxed);
    }
    // A reply goes back under the request's compressor.
    let compressor = message.compressor.filter(|c| *c != Compressor::Noop);
    let Some(body) = run(message.body, ctx, state).await? else {
        return Ok(());
    };
    if ctx.closing {
        return Ok(());
    }
    let mut reply = reply_to(request_id, body);
    if let Some(exhaust) = &mut ctx.exhaust {
        // The first reply of a stream: the next one answers to it.
        exhaust.compressor = compressor;
        reply.request_id = exhaust.response_to;
    }
    encode_counted(&reply, compressor, state, out)
}

/// Encodes `reply` into `out` under `compressor`, counting the compression.
fn encode_counted(
    reply: &Message,
    compressor: Option<Compressor>,
    state: &ServerState,
    out: &mut BytesMut,
) -> Result<(), ebb_wire::Error> {
    let start = out.len();
    reply.encode(compressor, out)?;
    if let (Some(c), Some(sent)) = (compressor, out.get(start..)) {
        let counters = &state.metrics.compression[usize::from(c.id())];
        counters
            .compressor_in
            .fetch_add(original_len(sent), Ordering::Relaxed);
        counters
            .compressor_out
            .fetch_add(sent.len() as u64, Ordering::Relaxed);
    }
    Ok(())
}

fn reply_to(request_id: i32, body: Body) -> Message {
    Message {
        request_id: 0,
        response_to: request_id,
        body,
        compressor: None,
    }
}

/// The opcode a message carries (seen through an OP_COMPRESSED envelope) and, for OP_MSG
/// sent uncompressed, its flag bits; read straight from the frame for messages that did not
/// parse.
fn original_op_and_flags(message: &[u8]) -> (i32, u32) {
    let word = |at: usize| {
        message
            .get(at..at + 4)
            .and_then(|b| <[u8; 4]>::try_from(b).ok())
    };
    let op = word(12).map_or(0, i32::from_le_bytes);
    if op == OpCode::Compressed.as_i32() {
        return (word(16).map_or(0, i32::from_le_bytes), 0);
    }
    (op, word(16).map_or(0, u32::from_le_bytes))
}

/// The size an OP_COMPRESSED message had before compression (header included), read from its
/// `uncompressedSize` field.
fn original_len(message: &[u8]) -> u64 {
    message
        .get(20..24)
        .and_then(|b| <[u8; 4]>::try_from(b).ok())
        .map_or(0, |b| {
            u64::try_from(i32::from_le_bytes(b)).unwrap_or(0) + 16
        })
}

/// Runs a request; `None` when no reply is to be sent (`moreToCome`).
async fn run(
    body: Body,
    ctx: &mut ConnCtx,
    state: &ServerState,
) -> Result<Option<Body>, ebb_wire::Error> {
    match body {
        Body::Msg(msg) => {
            let mut reply = run_op_msg(&msg, ctx, state).await;
            if msg.flags.contains(MessageFlags::MORE_TO_COME) {
                // The client reads no reply; errors are dropped, as the OP_MSG spec says.
                return Ok(None);
            }
            // A checksummed request gets a checksummed reply.
            let checksum = msg.flags.contains(MessageFlags::CHECKSUM_PRESENT);
            let mut flags = if checksum {
                MessageFlags::CHECKSUM_PRESENT
            } else {
                MessageFlags::default()
            };
            if msg.flags.contains(MessageFlags::EXHAUST_ALLOWED) {
                match exhaust_next(msg.body.as_ref(), &reply, state) {
                    Ok(Some(body)) => {
                        flags = flags.with(MessageFlags::MORE_TO_COME);
                        let response_to = ctx.next_reply_id();
                        ctx.exhaust = Some(Exhaust {
                            body,
                            compressor: None,
                            checksum,
                            response_to,
                        });
                    }
                    Ok(None) => {}
                    Err(e) => reply = e.to_document(),
                }
            }
            Ok(Some(Body::Msg(OpMsg {
                flags,
                body: reply,
                sequences: Vec::new(),
            })))
        }
        Body::Query(query) => Ok(Some(Body::Reply(run_op_query(&query, ctx, state).await))),
        Body::Reply(_) => {
            warn!("client sent an OP_REPLY");
            Err(ebb_wire::Error::UnknownOpCode(OpCode::Reply.as_i32()))
        }
    }
}

/// For a request marked `exhaustAllowed` that was answered `reply`: the command to answer
/// again without a request (the exhaust protocol), when it is an awaitable `hello` that
/// succeeded, with its `topologyVersion` made the one just answered so that the next answer
/// waits for a change. Other commands stream nothing (Ebb's cursors do not stream `getMore`);
/// a `hello` without `maxAwaitTimeMS` is mongod's error 51756.
fn exhaust_next(
    request: &RawDocument,
    reply: &RawDocument,
    state: &ServerState,
) -> Result<Option<RawDocumentBuf>, CommandError> {
    if !matches!(
        command_name(request),
        Some("hello" | "isMaster" | "ismaster")
    ) {
        return Ok(None);
    }
    let ok = matches!(reply.get("ok"), Ok(Some(bson::RawBsonRef::Double(d))) if d == 1.0);
    if !ok {
        return Ok(None);
    }
    if !matches!(request.get("maxAwaitTimeMS"), Ok(Some(_))) {
        return Err(CommandError::new(
            ErrorCode::Location(51756),
            "An isMaster or hello request with exhaust must specify 'maxAwaitTimeMS'",
        ));
    }
    let mut next = RawDocumentBuf::new();
    for elem in request.iter_elements() {
        let elem = elem.map_err(|e| CommandError::new(ErrorCode::InvalidBSON, e.to_string()))?;
        match elem.key().as_str() {
            "topologyVersion" => next.append(elem.key(), state.topology.version()),
            // Sent once per connection, and never in an awaitable hello by drivers.
            "client" => {}
            _ => {
                let value = elem
                    .value()
                    .map_err(|e| CommandError::new(ErrorCode::InvalidBSON, e.to_string()))?;
                next.append(elem.key(), value);
            }
        }
    }
    Ok(Some(next))
}

/// Answers the awaitable `hello` of an exhaust stream again (it waits for a topology change,
/// its `maxAwaitTimeMS` or shutdown), appending the reply to `out`: with `moreToCome` while
/// it succeeds, and the stream ends with the first reply without it.
pub async fn continue_exhaust(
    ctx: &mut ConnCtx,
    state: &ServerState,
    out: &mut BytesMut,
) -> Result<(), ebb_wire::Error> {
    let Some(exhaust) = ctx.exhaust.take() else {
        return Ok(());
    };
    let msg = OpMsg {
        flags: MessageFlags::EXHAUST_ALLOWED,
        body: exhaust.body,
        sequences: Vec::new(),
    };
    let mut reply = run_op_msg(&msg, ctx, state).await;
    let mut flags = if exhaust.checksum {
        MessageFlags::CHECKSUM_PRESENT
    } else {
        MessageFlags::default()
    };
    let request_id = ctx.next_reply_id();
    match exhaust_next(msg.body.as_ref(), &reply, state) {
        Ok(Some(body)) if !state.shutdown.is_cancelled() => {
            flags = flags.with(MessageFlags::MORE_TO_COME);
            ctx.exhaust = Some(Exhaust {
                body,
                compressor: exhaust.compressor,
                checksum: exhaust.checksum,
                response_to: request_id,
            });
        }
        Ok(_) => {}
        Err(e) => reply = e.to_document(),
    }
    let message = Message {
        request_id,
        response_to: exhaust.response_to,
        body: Body::Msg(OpMsg {
            flags,
            body: reply,
            sequences: Vec::new(),
        }),
        compressor: None,
    };
    encode_counted(&message, exhaust.compressor, state, out)
}

/// Runs an OP_MSG command and returns the reply document, `{ok: 0, …}` on error.
async fn run_op_msg(msg: &OpMsg, ctx: &mut ConnCtx, state: &ServerState) -> RawDocumentBuf {
    let body = msg.body.as_ref();
    // One pass over the body finds the command name (first key) and `$db` (usually last).
    let mut name = None;
    let mut db = None;
    let mut lsid = None;
    for elem in body.iter_elements().map_while(Result::ok) {
        let key = elem.key().as_str();
        if name.is_none() {
            name = Some(key);
        }
        match key {
            "$db" => db = Some(elem.value()),
            "lsid" => lsid = elem.value().ok(),
            _ => {}
        }
    }
    // The session is in use from the start of its command, as in mongod's session cache.
    if let Some(id) = lsid.and_then(crate::sessions::session_id) {
        state.sessions.touch(id, state.now_ms());
    }
    let result = match (db, name) {
        (Some(Ok(bson::RawBsonRef::String(db))), Some(name)) => {
            let req = Request {
                name,
                db,
                body,
                sequences: &msg.sequences,
            };
            run_command(&req, ctx, state).await
        }
        (Some(_), _) => Err(CommandError::type_mismatch(
            "BSON field '$db' is the wrong type, expected type 'string'",
        )),
        (None, _) => Err(CommandError::new(
            ErrorCode::Location(40571),
            "OP_MSG requests require a $db argument",
        )),
    };
    result.unwrap_or_else(|e| e.to_document())
}

/// OP_QUERY is served only for the handshake, as MongoDB 6.0 and later do: `hello`/`isMaster`
/// against `<db>.$cmd`. Anything else gets mongod's errors.
async fn run_op_query(query: &OpQuery, ctx: &mut ConnCtx, state: &ServerState) -> OpReply {
    let failure = |code: ErrorCode, msg: String| OpReply {
        response_flags: OpReply::QUERY_FAILURE | OpReply::AWAIT_CAPABLE,
        cursor_id: 0,
        starting_from: 0,
        documents: vec![bson::rawdoc! { "$err": msg, "code": code.code(), "ok": 0.0 }],
    };
    let Some(db) = query.full_collection_name.strip_suffix(".$cmd") else {
        Metrics::bump(&state.metrics.op_query);
        return failure(
            ErrorCode::Location(5_739_101),
            "OP_QUERY is no longer supported. The client driver may require an upgrade. For more \
             details see https://dochub.mongodb.org/core/legacy-opcode-removal"
                .to_owned(),
        );
    };
    // Drivers may wrap the command as {$query: {...}, $readPreference: ...}.
    let wrapped = query
        .query
        .get_document("$query")
        .or_else(|_| query.query.get_document("query"));
    let body = match (command_name(&query.query), wrapped) {
        (Some("$query" | "query"), Ok(inner)) => inner,
        _ => query.query.as_ref(),
    };
    let reply = match command_name(body) {
        Some(name @ ("hello" | "isMaster" | "ismaster")) => {
            let req = Request {
                name,
                db,
                body,
                sequences: &[],
            };
            run_command(&req, ctx, state)
                .await
                .unwrap_or_else(|e| e.to_document())
        }
        other => CommandError::new(
            ErrorCode::UnsupportedOpQueryCommand,
            format!(
                "Unsupported OP_QUERY command: {}. The client driver may require an upgrade. For \
                 more details see https://dochub.mongodb.org/core/legacy-opcode-removal",
                other.unwrap_or("")
            ),
        )
        .to_document(),
    };
    OpReply::single(reply)
}

/// The error reply of `e`, with the labels mongod adds (a retryable write's
/// `RetryableWriteError` for a retryable code: `crate::labels`).
fn labelled(req: &Request<'_>, e: &CommandError, change_stream: bool) -> RawDocumentBuf {
    let mut reply = e.to_document();
    let mut labels = crate::labels::default_labels(req.name, req.body, Some(e.code.code()), None);
    if change_stream && crate::labels::is_resumable_change_stream_error(req.name, e.code.code()) {
        labels.push("ResumableChangeStreamError");
    }
    if !labels.is_empty() {
        let mut list = bson::RawArrayBuf::new();
        for label in labels {
            list.push(label);
        }
        reply.append(bson::raw::cstr!("errorLabels"), list);
    }
    reply
}

async fn run_command(
    req: &Request<'_>,
    ctx: &mut ConnCtx,
    state: &ServerState,
) -> Result<RawDocumentBuf, CommandError> {
    let Some(rs) = &state.replset else {
        return run_timed(req, ctx, state).await;
    };
    // Replica-set mode: gossip in, run, and stamp the reply (an error too) with the cluster
    // time, as mongod does on every reply.
    let result = match commands::cluster_time::gossip_in(rs, req.body) {
        Ok(()) => run_timed(req, ctx, state).await,
        Err(e) => Err(e),
    };
    let wrote = result.is_ok() && commands::writes(req.name, req.body);
    let operation_time = commands::cluster_time::operation_time(rs, wrote);
    let reply =
        result.unwrap_or_else(|e| labelled(req, &e, commands::is_change_stream_request(req)));
    Ok(commands::cluster_time::append(rs, reply, operation_time))
}

async fn run_timed(
    req: &Request<'_>,
    ctx: &mut ConnCtx,
    state: &ServerState,
) -> Result<RawDocumentBuf, CommandError> {
    Metrics::bump(&state.metrics.op_command);
    tracing::trace!(
        command = req.name,
        body = %bson::Document::try_from(&*crate::auth::privileges::redacted(req.name, req.body))
            .map(|d| d.to_string())
            .unwrap_or_default(),
        "running"
    );
    // Commands on a collection are timed for its `latencyStats` (mongod's `Top`); others
    // only when they will be logged (timing costs more than a ping on some machines).
    let on_collection = crate::top::classify(req.name, req.body);
    if on_collection.is_none() && !tracing::enabled!(tracing::Level::DEBUG) {
        return run_one(req, ctx, state).await;
    }
    let started = Instant::now();
    let result = run_one(req, ctx, state).await;
    let micros = started.elapsed().as_micros();
    if let Some((kind, coll)) = on_collection {
        let micros = u64::try_from(micros).unwrap_or(u64::MAX);
        state.top.record(req.db, coll, kind, micros);
    }
    if !tracing::enabled!(tracing::Level::DEBUG) {
        return result;
    }
    match &result {
        Ok(_) => debug!(command = req.name, db = req.db, micros, "command"),
        Err(e) => debug!(
            command = req.name,
            db = req.db,
            micros,
            code = e.code.code(),
            error = %e.errmsg,
            "command failed"
        ),
    }
    result
}

/// Runs `req` through the Cosmos DB profile's hook when the server has the profile.
async fn run_one(
    req: &Request<'_>,
    ctx: &mut ConnCtx,
    state: &ServerState,
) -> Result<RawDocumentBuf, CommandError> {
    match &state.cosmos {
        Some(cosmos) => Box::pin(crate::cosmos::run(cosmos, req, ctx, state)).await,
        None => commands::run(req, ctx, state).await,
    }
}

/// The first key of a command document.
fn command_name(body: &RawDocument) -> Option<&str> {
    body.iter_elements()
        .next()
        .and_then(Result::ok)
        .map(|e| e.key().as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A retryable write failing with a retryable code carries `RetryableWriteError`; the same
    /// error without `txnNumber`, or a code that is not retryable, carries no label.
    #[test]
    fn error_replies_carry_mongods_labels() {
        let body = bson::rawdoc! { "insert": "c", "txnNumber": 1_i64, "lsid": { "id": 1 } };
        let req = Request {
            name: "insert",
            db: "db",
            body: &body,
            sequences: &[],
        };
        let shutdown = CommandError::new(ErrorCode::InterruptedAtShutdown, "shutting down");
        let reply = labelled(&req, &shutdown, false);
        let labels = reply.get_array("errorLabels").expect("labels");
        assert_eq!(
            labels
                .into_iter()
                .map(|l| l.expect("label").as_str())
                .collect::<Vec<_>>(),
            vec![Some("RetryableWriteError")]
        );
        let bad = CommandError::bad_value("no");
        assert!(
            labelled(&req, &bad, false)
                .get("errorLabels")
                .expect("bson")
                .is_none()
        );
        let plain = bson::rawdoc! { "insert": "c" };
        let req = Request {
            body: &plain,
            ..req
        };
        assert!(
            labelled(&req, &shutdown, false)
                .get("errorLabels")
                .expect("bson")
                .is_none()
        );
    }
}
