//! Ebb: a document database server that speaks the MongoDB wire protocol.
//!
//! Data flow, one way only:
//!
//! ```text
//! server::listener  accept loop, connection limit, shutdown
//!   └─ server::connection  one task per connection: frame → decode → dispatch → encode → write
//!        └─ dispatch  command document + sequences → handler; errors → {ok: 0, …} replies
//!             └─ commands::*  one module per family (handshake, admin)
//!                  └─ state  counters and configuration shared by all connections
//!                       └─ replset  replica-set mode: the set's identity, the cluster clock
//! ```
//!
//! The wire codec lives in the `ebb-wire` crate and never sees sockets or server types.

/// The process's memory allocator (crate `ebb-alloc`: mimalloc, or the system's with
/// `EBB_ALLOCATOR=system`), for every binary built on this library: the server, its tests and
/// its benches.
#[global_allocator]
static ALLOCATOR: ebb_alloc::Allocator = ebb_alloc::Allocator;

pub mod auth;
pub mod background;
pub mod catalog;
pub mod changestream;
pub mod clock;
pub mod commands;
pub mod compactor;
pub mod config;
pub mod cosmos;
pub mod cursor;
pub mod dispatch;
pub mod error;
pub mod failpoint;
pub mod index;
pub mod interrupt;
pub mod labels;
pub mod oplog;
pub mod pipeline;
pub mod query;
pub mod replset;
pub mod retryable;
pub mod server;
pub mod sessions;
pub mod sorter;
pub mod state;
pub mod storage;
pub mod top;
pub mod ttl;
pub mod txn;

pub use config::Config;
pub use error::{CommandError, ErrorCode};
pub use server::run;
pub use state::ServerState;

/// The MongoDB release whose behaviour Ebb reproduces (reported by `buildInfo`).
pub const MONGODB_VERSION: &str = "7.0.0";
/// `maxWireVersion` for [`MONGODB_VERSION`].
pub const MAX_WIRE_VERSION: i32 = 21;
/// Ebb's own version.
pub const EBB_VERSION: &str = env!("CARGO_PKG_VERSION");
