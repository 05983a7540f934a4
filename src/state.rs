//! State shared by every connection: configuration, counters, and the startup instant.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::Instant;

use bson::oid::ObjectId;
use tokio_util::sync::CancellationToken;

use crate::Config;
use crate::catalog::Catalog;
use crate::clock::Clock;
use crate::cursor::Cursors;
use crate::sessions::Sessions;
use crate::ttl::TtlMetrics;

/// Cheap to clone; every connection task holds one.
#[derive(Clone, Debug)]
pub struct ServerState(Arc<Inner>);

/// What [`ServerState`] shares.
#[derive(Debug)]
pub struct Inner {
    /// The configuration the server was started with.
    pub config: Config,
    /// When the server started.
    pub started: Instant,
    /// Wall-clock start, for `serverStatus.localTime` arithmetic and logs.
    pub started_at: bson::DateTime,
    /// Identifies this process (`topologyVersion.processId`, `serverStatus`).
    pub process_id: ObjectId,
    /// Connection and traffic counters.
    pub metrics: Metrics,
    /// The address actually bound (with the real port when 0 was asked for).
    pub local_addr: std::net::SocketAddr,
    /// Lines shown by `getLog: "startupWarnings"`.
    pub startup_warnings: Vec<String>,
    /// Databases and collections, and through it the store.
    pub catalog: Arc<Catalog>,
    /// Open cursors.
    pub cursors: Cursors,
    /// The clock every expiry decision reads.
    pub clock: Arc<Clock>,
    /// `serverStatus.metrics.ttl`.
    pub ttl_metrics: Arc<TtlMetrics>,
    /// Wakes the task that removes dropped collections' data.
    pub purge_wake: Arc<tokio::sync::Notify>,
    /// The logical sessions commands have used (`$listLocalSessions`).
    pub sessions: Sessions,
    /// What retryable writes have executed, per session (`crate::retryable`).
    pub retryable: crate::retryable::RetryableWrites,
    /// Per-collection operation latencies (`$collStats.latencyStats`).
    pub top: crate::top::Top,
    /// The replica set this server is the primary of (`--replSet`), or `None` for a
    /// standalone.
    pub replset: Option<crate::replset::ReplSet>,
    /// `topologyVersion`, which awaitable `hello` waits on.
    pub topology: crate::replset::Topology,
    /// Snapshots kept for reads at a cluster time (`crate::txn::History`).
    pub history: crate::txn::History,
    /// Fail points set by `configureFailPoint` (test commands only).
    pub failpoints: crate::failpoint::FailPoints,
    /// Cancelled when the server begins to shut down (a signal or the `shutdown` command):
    /// connections close between requests, and running commands stop at their next safe
    /// point (see [`ServerState::check_interrupt`]).
    pub shutdown: CancellationToken,
    /// The TLS side, when `--tlsMode` is not `disabled` (`rotateCertificates`, `serverStatus`).
    pub tls: Option<Arc<crate::server::Tls>>,
    /// Users and roles.
    pub auth: Arc<crate::auth::store::AuthStore>,
    /// The Cosmos DB profile (`--profile cosmos`), `None` for a MongoDB server.
    pub cosmos: Option<Arc<crate::cosmos::Cosmos>>,
}

/// Counters reported by `serverStatus`.
#[derive(Debug, Default)]
pub struct Metrics {
    /// Connections open now.
    pub connections_current: AtomicI64,
    /// Connections accepted since start.
    pub connections_total: AtomicU64,
    /// Connections refused because of the limit.
    pub connections_rejected: AtomicU64,
    /// Connections handling a request right now.
    pub connections_active: AtomicI64,
    /// Last connection id handed out.
    pub last_connection_id: AtomicI64,
    /// `network.bytesIn`.
    pub bytes_in: AtomicU64,
    /// `network.bytesOut`.
    pub bytes_out: AtomicU64,
    /// `network.numRequests`.
    pub requests: AtomicU64,
    /// `opcounters.insert`.
    pub op_insert: AtomicU64,
    /// `opcounters.query`.
    pub op_query: AtomicU64,
    /// `opcounters.update`.
    pub op_update: AtomicU64,
    /// `opcounters.delete`.
    pub op_delete: AtomicU64,
    /// `opcounters.getmore`.
    pub op_getmore: AtomicU64,
    /// `opcounters.command`.
    pub op_command: AtomicU64,
    /// `network.compression`, by compressor id (0 noop … 3 zstd).
    pub compression: [CompressionCounters; 4],
}

/// One compressor's `network.compression.<name>` counters.
#[derive(Debug, Default)]
pub struct CompressionCounters {
    /// `compressor.bytesIn`: uncompressed bytes given to the compressor.
    pub compressor_in: AtomicU64,
    /// `compressor.bytesOut`: compressed bytes it produced.
    pub compressor_out: AtomicU64,
    /// `decompressor.bytesIn`: compressed bytes received.
    pub decompressor_in: AtomicU64,
    /// `decompressor.bytesOut`: bytes they expanded to.
    pub decompressor_out: AtomicU64,
}

impl Metrics {
    /// Adds one to a counter.
    pub fn bump(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// Reads a counter as the `int64` that `serverStatus` reports.
    pub fn read(counter: &AtomicU64) -> i64 {
        i64::try_from(counter.load(Ordering::Relaxed)).unwrap_or(i64::MAX)
    }
}

impl ServerState {
    /// State for a server bound to `local_addr`, the primary of `replset` when there is one.
    pub fn new(
        config: Config,
        local_addr: std::net::SocketAddr,
        catalog: Arc<Catalog>,
        replset: Option<crate::replset::ReplSet>,
        tls: Option<Arc<crate::server::Tls>>,
        auth: Arc<crate::auth::store::AuthStore>,
    ) -> Self {
        let process_id = ObjectId::new();
        let mut startup_warnings = Vec::new();
        if !config.auth {
            startup_warnings.push(
                "Access control is not enabled for the database. Read and write access to data \
                 and configuration is unrestricted"
                    .to_owned(),
            );
        }
        if !config.auth && !local_addr.ip().is_loopback() {
            startup_warnings.push(format!(
                "This server is bound to {}. Remote systems will be able to connect to this \
                 server without authentication.",
                local_addr.ip()
            ));
        }
        let cosmos = crate::cosmos::Cosmos::from_config(&config, &catalog).map(Arc::new);
        ServerState(Arc::new(Inner {
            started: Instant::now(),
            started_at: bson::DateTime::now(),
            process_id,
            metrics: Metrics::default(),
            local_addr,
            startup_warnings,
            catalog,
            purge_wake: Arc::new(tokio::sync::Notify::new()),
            cursors: Cursors::default(),
            clock: Arc::new(Clock::default()),
            ttl_metrics: Arc::new(TtlMetrics::default()),
            sessions: Sessions::default(),
            retryable: crate::retryable::RetryableWrites::default(),
            top: crate::top::Top::default(),
            replset,
            topology: crate::replset::Topology::new(process_id),
            history: crate::txn::History::default(),
            failpoints: crate::failpoint::FailPoints::default(),
            shutdown: CancellationToken::new(),
            cosmos,
            config,
            tls,
            auth,
        }))
    }

    /// What the running command reads: its transaction's view when it runs in one (see
    /// `crate::txn`), else a fresh snapshot of the store.
    pub fn snapshot(&self) -> Box<dyn crate::storage::Snapshot> {
        crate::txn::current_view().unwrap_or_else(|| self.catalog.snapshot())
    }

    /// The collection `db.name` as the running command sees it: one its transaction created
    /// (see `crate::txn`), else the catalog's.
    pub fn collection(&self, db: &str, name: &str) -> Option<Arc<crate::catalog::Collection>> {
        crate::txn::current()
            .and_then(|t| t.created(db, name))
            .or_else(|| self.catalog.get(db, name))
    }

    /// The server's clock, in milliseconds since the epoch. Every expiry decision reads it.
    pub fn now_ms(&self) -> i64 {
        self.clock.now_ms()
    }

    /// What stops the running command: shutdown, and its `maxTimeMS` deadline (see
    /// [`crate::interrupt`]).
    pub fn interrupt(&self) -> crate::interrupt::Interrupt {
        crate::interrupt::Interrupt::current(&self.shutdown)
    }

    /// `InterruptedAtShutdown` once shutdown has begun, `MaxTimeMSExpired` once the running
    /// command's time is up. Long commands call it at safe points: between the statements of
    /// a write batch, between the batches of a scan.
    pub fn check_interrupt(&self) -> Result<(), crate::CommandError> {
        self.interrupt().check()
    }

    /// Hands out the next connection id (`hello.connectionId`), starting at 1.
    pub fn next_connection_id(&self) -> i64 {
        self.0
            .metrics
            .last_connection_id
            .fetch_add(1, Ordering::Relaxed)
            + 1
    }
}

impl std::ops::Deref for ServerState {
    type Target = Inner;
    fn deref(&self) -> &Inner {
        &self.0
    }
}
