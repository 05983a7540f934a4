//! `hello` and its legacy spellings `isMaster`/`ismaster`: the first command of every
//! connection, where limits are announced and compression is negotiated.

use bson::{RawArrayBuf, RawBsonRef, rawdoc};
use ebb_wire::{Compressor, MAX_BSON_OBJECT_SIZE, MAX_MESSAGE_SIZE};
use tracing::info;

use super::args::wrong_type;
use crate::dispatch::{ConnCtx, Request};
use crate::error::{CommandError, CommandResult, ErrorCode};
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

pub(super) fn hello(
    req: &Request<'_>,
    ctx: &mut ConnCtx,
    state: &ServerState,
    flavor: Flavor,
) -> CommandResult {
    let mut hello_ok = false;
    let mut compression = None;
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
            _ => {}
        }
    }

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

    let mut reply = match flavor {
        Flavor::Hello => rawdoc! { "isWritablePrimary": true },
        Flavor::IsMaster => rawdoc! { "ismaster": true },
    };
    if hello_ok {
        reply.append(bson::raw::cstr!("helloOk"), true);
    }
    reply.append(
        bson::raw::cstr!("maxBsonObjectSize"),
        crate::commands::limit_i32(MAX_BSON_OBJECT_SIZE),
    );
    reply.append(
        bson::raw::cstr!("maxMessageSizeBytes"),
        crate::commands::limit_i32(MAX_MESSAGE_SIZE),
    );
    reply.append(bson::raw::cstr!("maxWriteBatchSize"), MAX_WRITE_BATCH_SIZE);
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
    reply.append(bson::raw::cstr!("maxWireVersion"), crate::MAX_WIRE_VERSION);
    reply.append(bson::raw::cstr!("readOnly"), false);
    if !ctx.compressors.is_empty() {
        let mut names = RawArrayBuf::new();
        for c in &ctx.compressors {
            names.push(c.name());
        }
        reply.append(bson::raw::cstr!("compression"), names);
    }
    let _ = state;
    reply.append(bson::raw::cstr!("ok"), 1.0);
    Ok(reply)
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
