//! `ebb-wire`: the `MongoDB` wire protocol as a pure, synchronous codec.
//!
//! No sockets and no server types live here. The connection owns its buffers and calls:
//!
//! 1. [`Frame::split`] to cut one length-checked frame off a `BytesMut` (or `Ok(None)` while the
//!    frame is incomplete). The header's `messageLength` is checked against the limit *before*
//!    any memory is reserved for the body.
//! 2. [`Message::decode`] to parse the frame's body with `nom`: `OP_MSG`, `OP_QUERY`,
//!    `OP_REPLY`, or `OP_COMPRESSED` wrapping one of them. Every received document is checked
//!    in full by [`validate`], without recursion and with a nesting limit.
//! 3. [`Message::encode`] to write a reply, optionally compressed.
//!
//! Errors say whether they are connection-fatal ([`Error::is_connection_fatal`]); the others are
//! answered with a command error on the same `responseTo`, as `mongod` does.
//!
//! Tests: byte-literal fixtures in each module's `tests`, property tests in `props.rs` (shared
//! fixtures and the `roundtrip!` macro in `testutil.rs`), and the cargo-fuzz target `decode`
//! in `wire/fuzz` (`wire/fuzz/run.sh`, `FUZZ_SECONDS=60` by default).

mod bson_check;
mod codec;
mod error;
mod header;
mod op_compressed;
mod op_msg;
mod op_query;
mod op_reply;
#[cfg(test)]
mod props;
#[cfg(test)]
mod testutil;

pub use codec::{Body, Frame, Message};
pub use error::Error;
pub use header::{HEADER_LEN, MAX_MESSAGE_SIZE, MsgHeader, OpCode};
pub use op_compressed::Compressor;
pub use op_msg::{DocumentSequence, MessageFlags, OpMsg, validate};
#[doc(hidden)]
pub use op_msg::{validate_with_bson_crate, validators_agree};
pub use op_query::OpQuery;
pub use op_reply::OpReply;

/// `maxBsonObjectSize`: the largest BSON document a client may send (16 MiB).
pub const MAX_BSON_OBJECT_SIZE: usize = 16 * 1024 * 1024;
