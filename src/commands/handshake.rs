//! `hello` and its legacy spellings `isMaster`/`ismaster`: the first command of every
//! connection, where limits are announced and compression is negotiated.

use std::time::Duration;

use bson::oid::ObjectId;
use bson::{RawArrayBuf, RawBsonRef, RawDocumentBuf, rawdoc};
use ebb_wire::{Compressor, MAX_BSON_OBJECT_SIZE, MAX_MESSAGE_SIZE};
use tracing::info;

use super::args::wrong_type;
use crate::dispatch::{ConnCtx, Request};
use crate::error::{CommandError, CommandResult, ErrorCode};
use crate::replset::ReplSet;
use crate::state::ServerState;

/// Which spelling was used: `hello` answers `isWritablePrimary`, the legacy ones `ismaster`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavor {
    /// `hello`.
    Hello,
    /// `isMaster` / `ismaster`.
    IsMaster,
}

/// `maxWriteBatchSize`.
pub const MAX_WRITE_BATCH_SIZE: i32 = 100_000;
/// `logicalSessionTimeoutMinutes`.
pub const LOGICAL_SESSION_TIMEOUT_MINUTES: i32 = 30;

pub(super) async fn hello(
    req: &Request<'_>,
    ctx: &mut ConnCtx,
    state: &ServerState,
    flavor: Flavor,
) -> CommandResult {
    let mut hello_ok = false;
    let mut compression = None;
    let mut topology_version = None;
    let mut max_await_ms = None;
    for elem in req.body.iter_elements() {
        let elem = elem.map_err(|e| CommandError::new(ErrorCode::InvalidBSON, e.to_string()))?;
        let value = elem
            .value()
            .map_err(|e| CommandError::new(ErrorCode::InvalidBSON, e.to_string()))?;
        match elem.key().as_str() {
            "helloOk" => hello_ok = super::args::truthy("helloOk", value)?,
            "compression" => match value {
                RawBsonRef::Array(list) => compression = Some(list),
                other => return Err(wrong_type("compression", other, " 'array'")),
            },
            "client" => match value {
                RawBsonRef::Document(client) => {
                    // mongod: the metadata may only be sent once, in the first hello.
                    if ctx.client_metadata.is_some() {
                        return Err(CommandError::new(
                            ErrorCode::ClientMetadataCannotBeMutated,
                            "The client metadata document may only be sent in the first hello",
                        ));
                    }
                    log_client(ctx, client);
                    ctx.client_metadata = Some(client.to_owned());
                }
                other => return Err(wrong_type("client", other, " 'object'")),
            },
            "topologyVersion" => match value {
                RawBsonRef::Document(tv) => topology_version = Some(parse_topology_version(tv)?),
                other => {
                    return Err(wrong_type("hello.topologyVersion", other, " 'object'"));
                }
            },
            "maxAwaitTimeMS" => max_await_ms = Some(parse_max_await_time_ms(value)?),
            _ => {}
        }
    }
    // The awaitable hello protocol: both fields or neither (mongod's 31368).
    let awaitable = match (topology_version, max_await_ms) {
        (Some(tv), Some(ms)) => {
            if tv.counter < 0 {
                return Err(CommandError::new(
                    ErrorCode::Location(31372),
                    "topologyVersion must have a non-negative counter",
                ));
            }
            Some((tv, ms))
        }
        (Some(_), None) => {
            return Err(CommandError::new(
                ErrorCode::Location(31368),
                "A request with a 'topologyVersion' must include 'maxAwaitTimeMS'",
            ));
        }
        (None, Some(_)) => {
            return Err(CommandError::new(
                ErrorCode::Location(31368),
                "A request with 'maxAwaitTimeMS' must include a 'topologyVersion'",
            ));
        }
        (None, None) => None,
    };

    // Compression is negotiated once, by the connection's first hello.
    if let (false, Some(list)) = (ctx.handshake_done, compression) {
        {
            for name in list {
                if let Ok(RawBsonRef::String(name)) = name {
                    match Compressor::from_name(name) {
                        Some(c) if c != Compressor::Noop && !ctx.compressors.contains(&c) => {
                            ctx.compressors.push(c);
                        }
                        _ => {}
                    }
                }
            }
        }
    }
    ctx.handshake_done = true;

    if let Some((tv, ms)) = awaitable {
        await_topology_change(state, tv, ms).await?;
    }

    // mongod's order: the negotiated compressors, helloOk, the replication fields, the limits.
    let mut reply = RawDocumentBuf::new();
    if !ctx.compressors.is_empty() {
        let mut names = RawArrayBuf::new();
        for c in &ctx.compressors {
            names.push(c.name());
        }
        reply.append(bson::raw::cstr!("compression"), names);
    }
    if hello_ok {
        reply.append(bson::raw::cstr!("helloOk"), true);
    }
    let primary = match flavor {
        Flavor::Hello => bson::raw::cstr!("isWritablePrimary"),
        Flavor::IsMaster => bson::raw::cstr!("ismaster"),
    };
    if let Some(rs) = &state.replset {
        append_replset_info(&mut reply, rs, state, primary);
    } else {
        reply.append(primary, true);
        reply.append(
            bson::raw::cstr!("topologyVersion"),
            state.topology.version(),
        );
    }
    // A Cosmos DB account announces its own limits and the wire version of the API it serves
    // (`crate::cosmos::identity`).
    let (max_bson, max_message, max_batch, max_wire) = match &state.cosmos {
        Some(cosmos) => (
            crate::cosmos::identity::MAX_BSON_OBJECT_SIZE,
            // (Not the 4 MiB an account reports: drivers refuse replies larger than this, and
            // Ebb's cursor batches are not cut at 4 MB as an account's are.)
            crate::commands::limit_i32(MAX_MESSAGE_SIZE),
            crate::cosmos::identity::MAX_WRITE_BATCH_SIZE,
            cosmos.identity.max_wire_version,
        ),
        None => (
            crate::commands::limit_i32(MAX_BSON_OBJECT_SIZE),
            crate::commands::limit_i32(MAX_MESSAGE_SIZE),
            MAX_WRITE_BATCH_SIZE,
            crate::MAX_WIRE_VERSION,
        ),
    };
    reply.append(bson::raw::cstr!("maxBsonObjectSize"), max_bson);
    reply.append(bson::raw::cstr!("maxMessageSizeBytes"), max_message);
    reply.append(bson::raw::cstr!("maxWriteBatchSize"), max_batch);
    reply.append(bson::raw::cstr!("localTime"), bson::DateTime::now());
    reply.append(
        bson::raw::cstr!("logicalSessionTimeoutMinutes"),
        LOGICAL_SESSION_TIMEOUT_MINUTES,
    );
    reply.append(
        bson::raw::cstr!("connectionId"),
        i32::try_from(ctx.id).unwrap_or(i32::MAX),
    );
    reply.append(bson::raw::cstr!("minWireVersion"), 0);
    reply.append(bson::raw::cstr!("maxWireVersion"), max_wire);
    reply.append(bson::raw::cstr!("readOnly"), false);
    super::auth::hello_fields(req, ctx, state, &mut reply)?;
    reply.append(bson::raw::cstr!("ok"), 1.0);
    Ok(reply)
}

/// What a replica set member's `hello` reports, in mongod's order (`HelloResponse::addToBSON`):
/// `topologyVersion`, `hosts`, `setName`, `setVersion`, the primary flag, `secondary`,
/// `primary`, `me`, `electionId`, `lastWrite`.
pub(super) fn append_replset_info(
    reply: &mut RawDocumentBuf,
    rs: &ReplSet,
    state: &ServerState,
    primary: &bson::raw::CStr,
) {
    reply.append(
        bson::raw::cstr!("topologyVersion"),
        state.topology.version(),
    );
    let mut hosts = RawArrayBuf::new();
    hosts.push(rs.host.as_str());
    reply.append(bson::raw::cstr!("hosts"), hosts);
    reply.append(bson::raw::cstr!("setName"), rs.name.as_str());
    reply.append(bson::raw::cstr!("setVersion"), crate::replset::SET_VERSION);
    reply.append(primary, true);
    reply.append(bson::raw::cstr!("secondary"), false);
    reply.append(bson::raw::cstr!("primary"), rs.host.as_str());
    reply.append(bson::raw::cstr!("me"), rs.host.as_str());
    reply.append(bson::raw::cstr!("electionId"), rs.election_id());
    let (ts, wall) = rs.clock.last_write();
    // Whole seconds, as mongod's `appendTimeT`.
    let date = bson::DateTime::from_millis(wall.timestamp_millis().div_euclid(1000) * 1000);
    reply.append(
        bson::raw::cstr!("lastWrite"),
        rawdoc! {
            "opTime": rs.op_time(ts),
            "lastWriteDate": date,
            "majorityOpTime": rs.op_time(ts),
            "majorityWriteDate": date,
        },
    );
}

/// A client's `topologyVersion` (IDL `TopologyVersion`: `processId` objectid, `counter` long,
/// both required, nothing else).
#[derive(Debug, Clone, Copy)]
struct ClientTopologyVersion {
    process_id: ObjectId,
    counter: i64,
}

fn parse_topology_version(tv: &bson::RawDocument) -> CommandResult<ClientTopologyVersion> {
    let mut process_id = None;
    let mut counter = None;
    for elem in tv {
        let (key, value) =
            elem.map_err(|e| CommandError::new(ErrorCode::InvalidBSON, e.to_string()))?;
        match key.as_str() {
            "processId" => match value {
                RawBsonRef::ObjectId(id) => process_id = Some(id),
                other => {
                    return Err(wrong_type(
                        "hello.topologyVersion.processId",
                        other,
                        " 'objectId'",
                    ));
                }
            },
            "counter" => match value {
                RawBsonRef::Int64(n) => counter = Some(n),
                other => {
                    return Err(wrong_type(
                        "hello.topologyVersion.counter",
                        other,
                        " 'long'",
                    ));
                }
            },
            other => {
                return Err(CommandError::unknown_field(&format!(
                    "hello.topologyVersion.{other}"
                )));
            }
        }
    }
    let process_id =
        process_id.ok_or_else(|| CommandError::missing_field("hello.topologyVersion.processId"))?;
    let counter =
        counter.ok_or_else(|| CommandError::missing_field("hello.topologyVersion.counter"))?;
    Ok(ClientTopologyVersion {
        process_id,
        counter,
    })
}

/// `maxAwaitTimeMS` (IDL `safeInt64`, at least 0).
fn parse_max_await_time_ms(value: RawBsonRef<'_>) -> CommandResult<i64> {
    #[expect(
        clippy::cast_possible_truncation,
        reason = "saturating, as mongod's safeNumberLong"
    )]
    let ms = match value {
        RawBsonRef::Int32(n) => i64::from(n),
        RawBsonRef::Int64(n) => n,
        RawBsonRef::Double(d) => {
            if d.is_nan() {
                0
            } else {
                d as i64
            }
        }
        RawBsonRef::Decimal128(d) => d
            .to_string()
            .parse::<f64>()
            .ok()
            .filter(|f| !f.is_nan())
            .map_or(0, |f| f as i64),
        other => {
            return Err(wrong_type(
                "hello.maxAwaitTimeMS",
                other,
                "s '[long, int, decimal, double']",
            ));
        }
    };
    if ms < 0 {
        return Err(CommandError::bad_value(format!(
            "BSON field 'maxAwaitTimeMS' value must be >= 0, actual value '{ms}'"
        )));
    }
    Ok(ms)
}

/// The awaitable `hello`: answers at once when the client's topology version is not the
/// current one, else when the topology changes, `max_await_ms` passes, or the server shuts
/// down (with mongod's error: a replica set member in quiesce mode answers
/// `ShutdownInProgress`; a standalone's sleep is interrupted).
async fn await_topology_change(
    state: &ServerState,
    theirs: ClientTopologyVersion,
    max_await_ms: i64,
) -> CommandResult<()> {
    let topology = &state.topology;
    let mut changes = topology.subscribe();
    let current = topology.counter();
    if theirs.process_id != topology.process_id {
        return Ok(());
    }
    let replset = state.replset.is_some();
    if replset {
        if theirs.counter > current {
            return Err(CommandError::new(
                ErrorCode::Location(31382),
                format!(
                    "Received a topology version with counter: {} which is greater than the \
                     server topology version counter: {current}",
                    theirs.counter
                ),
            ));
        }
        if theirs.counter < current {
            return Ok(());
        }
    } else if theirs.counter != current {
        // A standalone's topology never changes: any other counter is refused.
        return Err(CommandError::new(
            ErrorCode::Location(51764),
            format!(
                "Received a topology version with counter: {} which is greater than the server \
                 topology version counter: {current}",
                theirs.counter
            ),
        ));
    }
    let wait = Duration::from_millis(u64::try_from(max_await_ms).unwrap_or(0));
    tokio::select! {
        () = state.shutdown.cancelled() => Err(if replset {
            CommandError::new(
                ErrorCode::ShutdownInProgress,
                "The server is in quiesce mode and will shut down",
            )
        } else {
            CommandError::interrupted_at_shutdown()
        }),
        _ = changes.changed() => Ok(()),
        () = tokio::time::sleep(wait) => Ok(()),
    }
}

fn log_client(ctx: &ConnCtx, client: &bson::RawDocument) {
    let field = |doc: &str, key: &str| {
        client
            .get_document(doc)
            .ok()
            .and_then(|d| d.get_str(key).ok())
            .unwrap_or("")
            .to_owned()
    };
    let app = client
        .get_document("application")
        .ok()
        .and_then(|d| d.get_str("name").ok())
        .unwrap_or("");
    info!(
        remote = %ctx.peer,
        driver = %field("driver", "name"),
        driver_version = %field("driver", "version"),
        application = app,
        "client metadata"
    );
}
