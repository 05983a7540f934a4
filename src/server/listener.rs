//! The accept loop: connection limit, accept back-off, graceful shutdown.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{error, info, warn};

use super::connection;
use crate::catalog::{self, Catalog};
use crate::cursor::CURSOR_TIMEOUT;
use crate::storage::{DiskStorage, GroupCommit, MemoryStorage, Storage};
use crate::{Config, ServerState};

/// Serves `listener` until `shutdown` completes (or a client runs the `shutdown` command), then
/// stops accepting, interrupts running commands at their next safe point, lets every connection
/// finish the request it is running (for at most `config.shutdown_timeout_secs`), makes every
/// commit durable, and returns.
pub async fn run(
    listener: TcpListener,
    config: Config,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    let local_addr = listener.local_addr()?;
    // `--profile cosmos` implies a replica set, access control and TLS (see
    // `crate::cosmos::profile`); `main` has already applied it, and applying it again changes
    // nothing.
    let mut config = config;
    if let Some(resolved) = config.resolve_profile()? {
        info!(
            account = %config.cosmos_account,
            version = config.cosmos_server_version.name(),
            ca_file = %resolved.ca_file.display(),
            certificate_created = resolved.cert_created,
            development_key = resolved.default_key,
            "Cosmos DB profile: TLS required, clients trust the CA file (or allow invalid certificates)"
        );
    }
    let tls = super::Tls::from_config(&config).map_err(|e| std::io::Error::other(e.errmsg))?;
    let timeout = Duration::from_secs(config.shutdown_timeout_secs);
    let limit = Arc::new(Semaphore::new(config.max_connections));
    let store = open_store(&config).await?;
    let catalog = Arc::new(
        Catalog::open(Arc::clone(&store)).map_err(|e| std::io::Error::other(e.to_string()))?,
    );
    let replset = match &config.repl_set {
        Some(name) => {
            let replset =
                crate::replset::ReplSet::open(name, member_host(&config, local_addr), &store)
                    .map_err(|e| std::io::Error::other(e.to_string()))?;
            if let Some(ticket) = replset.identity_ticket {
                store
                    .durable(ticket)
                    .await
                    .map_err(|e| std::io::Error::other(e.to_string()))?;
            }
            // (A benchmark's baseline runs the same set without logging changes.)
            if !config.bench_without_oplog {
                catalog.set_oplog(Arc::clone(&replset.oplog));
                // mongod logs a no-op at each election ("new primary"): the oplog's history
                // then starts no later than any time a client is handed.
                let mut batch = crate::storage::Batch::new();
                batch.stamped.push(replset.oplog.entry(
                    &bson::rawdoc! { "op": "n", "ns": "", "o": { "msg": "new primary" } },
                    None,
                ));
                let ticket = store
                    .commit(batch)
                    .map_err(|e| std::io::Error::other(e.to_string()))?;
                store
                    .durable(ticket)
                    .await
                    .map_err(|e| std::io::Error::other(e.to_string()))?;
            }
            replset.oplog.retention().resize(
                Some(crate::oplog::retention::configured_size(&config)),
                config.oplog_min_retention_hours,
            );
            replset
                .oplog
                .retention()
                .seed_oldest(&*store.storage().snapshot())
                .map_err(|e| std::io::Error::other(e.to_string()))?;
            info!(set = %name, host = %replset.host, term = replset.term, "primary of a replica set of one");
            Some(replset)
        }
        None => None,
    };
    let auth = Arc::new(
        crate::auth::store::AuthStore::open(Arc::clone(&store))
            .map_err(|e| std::io::Error::other(e.to_string()))?,
    );
    // The account user exists, durably, before the first connection is accepted.
    if config.profile == crate::config::Profile::Cosmos
        && let Some(key) = config.cosmos_key.as_deref()
    {
        let ticket = crate::cosmos::profile::ensure_account(&auth, &config.cosmos_account, key)
            .map_err(|e| crate::cosmos::profile::account_error(&e))?;
        if let Some(ticket) = ticket {
            store
                .durable(ticket)
                .await
                .map_err(|e| std::io::Error::other(e.to_string()))?;
        }
    }
    let state = ServerState::new(config, local_addr, Arc::clone(&catalog), replset, tls, auth);
    // Sessions with records on disk were last used when the last clean shutdown says, or now
    // (see `crate::sessions`).
    let stored = crate::retryable::stored_sessions(&*catalog.snapshot())
        .map_err(|e| std::io::Error::other(e.to_string()))?;
    if !stored.is_empty() {
        info!(
            sessions = stored.len(),
            "sessions with retryable-write records on disk"
        );
    }
    let now = state.now_ms();
    state.sessions.add_dormant(
        stored
            .into_iter()
            .map(|(id, last)| (id, last.map_or(now, |last| last.min(now)))),
    );
    {
        // Compactions drop expired records the purge is done with, judged by the clock reads
        // judge by (which tests can move).
        let clock = Arc::clone(&state.clock);
        // Records the purge left for the compaction must stay expired, whatever the wall clock.
        if let Some(at) = state
            .catalog
            .expired_at()
            .map_err(|e| std::io::Error::other(e.to_string()))?
        {
            clock.raise_floor(at);
        }
        store
            .storage()
            .set_expiry_clock(Arc::new(move || clock.now_ms()));
    }
    // One token for all of it: the accept loop, idle connections, background tasks, and the
    // commands running (which check it between statements and scan batches).
    let cancel = state.shutdown.clone();
    let tracker = TaskTracker::new();
    let background = TaskTracker::new();
    background.spawn(catalog::purge_task(
        catalog,
        Arc::clone(&state.purge_wake),
        cancel.clone(),
    ));
    background.spawn(reap_cursors(state.clone(), cancel.clone()));
    background.spawn(reap_transactions(state.clone(), cancel.clone()));
    background.spawn(reap_sessions(state.clone(), cancel.clone()));
    background.spawn(crate::compactor::compact_task(
        Arc::clone(state.catalog.store().storage()),
        cancel.clone(),
    ));
    let requests = {
        let state = state.clone();
        Arc::new(move || {
            state
                .metrics
                .requests
                .load(std::sync::atomic::Ordering::Relaxed)
        })
    };
    background.spawn(crate::ttl::purge_task(
        Arc::clone(&state.catalog),
        Arc::clone(&state.clock),
        Arc::clone(&state.ttl_metrics),
        requests,
        cancel.clone(),
    ));
    if let Some(oplog) = state.catalog.oplog() {
        background.spawn(crate::ttl::announce::announce_task(
            Arc::clone(&state.catalog),
            Arc::clone(&state.clock),
            cancel.clone(),
        ));
        let clock = Arc::clone(&state.clock);
        background.spawn(crate::oplog::retention::retention_task(
            Arc::clone(state.catalog.store()),
            Arc::clone(oplog),
            Arc::new(move || clock.now_ms()),
            cancel.clone(),
        ));
    }
    info!(
        address = %local_addr,
        version = crate::EBB_VERSION,
        allocator = ebb_alloc::Allocator::name(),
        "waiting for connections"
    );

    tokio::select! {
        () = accept_loop(&listener, &state, &limit, &cancel, &tracker) => {}
        () = shutdown => info!("shutdown requested: no new connections, draining requests"),
        () = cancel.cancelled() => info!("shutdown command: no new connections, draining requests"),
    }
    drop(listener);
    cancel.cancel();
    tracker.close();
    if tokio::time::timeout(timeout, tracker.wait()).await.is_err() {
        warn!(
            connections = tracker.len(),
            "shutdown timeout reached with requests still running; closing them"
        );
    }
    background.close();
    background.wait().await;
    record_last_use(&state);
    // Everything acknowledged is already durable; this syncs relaxed (j: false) writes too.
    tokio::task::spawn_blocking(move || store.shutdown())
        .await
        .map_err(std::io::Error::other)?;
    info!("shutdown complete");
    Ok(())
}

/// The `host:port` a replica set member is known by: `--advertise-host`, else the address it
/// listens on (with the real port when 0 was asked for); an unspecified address (`0.0.0.0`)
/// is reported as `localhost`.
fn member_host(config: &Config, local_addr: std::net::SocketAddr) -> String {
    if let Some(host) = &config.advertise_host {
        return host.clone();
    }
    if local_addr.ip().is_unspecified() {
        return format!("localhost:{}", local_addr.port());
    }
    local_addr.to_string()
}

/// Closes cursors left idle longer than [`CURSOR_TIMEOUT`], once a minute.
async fn reap_cursors(state: ServerState, cancel: CancellationToken) {
    loop {
        tokio::select! {
            () = cancel.cancelled() => return,
            () = tokio::time::sleep(Duration::from_secs(30)) => {}
        }
        let closed = state.cursors.reap(state.now_ms(), CURSOR_TIMEOUT);
        state
            .cursors
            .bound_snapshots(state.now_ms(), &|| state.catalog.snapshot());
        if closed > 0 {
            info!(closed, "closed idle cursors");
        }
    }
}

/// Aborts transactions open longer than `transactionLifetimeLimitSeconds`, checking every
/// second (as often as mongod's periodic transaction reaper runs by default).
async fn reap_transactions(state: ServerState, cancel: CancellationToken) {
    loop {
        tokio::select! {
            () = cancel.cancelled() => return,
            () = tokio::time::sleep(Duration::from_secs(1)) => {}
        }
        let aborted = state.retryable.abort_expired(crate::txn::LIFETIME_LIMIT);
        if aborted > 0 {
            info!(aborted, "aborted transactions past their lifetime limit");
        }
    }
}

/// How often the session reaper looks for idle sessions (mongod's session cache refreshes
/// every `logicalSessionRefreshMillis`, 5 minutes; looking more often costs one pass over the
/// sessions in memory).
const SESSION_REAP_INTERVAL: Duration = Duration::from_secs(60);

/// Expires sessions unused for `logicalSessionTimeoutMinutes`, every
/// [`SESSION_REAP_INTERVAL`] and whenever the clock is moved (test commands only).
async fn reap_sessions(state: ServerState, cancel: CancellationToken) {
    loop {
        tokio::select! {
            () = cancel.cancelled() => return,
            () = tokio::time::sleep(SESSION_REAP_INTERVAL) => {}
            () = state.clock.changed() => {}
        }
        match expire_sessions(&state, state.now_ms()) {
            Ok(0) => {}
            Ok(expired) => info!(expired, "expired idle sessions"),
            Err(e) => warn!(error = %e.errmsg, "could not expire idle sessions; will try again"),
        }
    }
}

/// Expires the sessions idle at `now_ms` that no command holds: aborts their open
/// transactions, kills their cursors, deletes their records on disk (in one commit) and
/// forgets them. Returns how many.
fn expire_sessions(state: &ServerState, now_ms: i64) -> Result<usize, crate::CommandError> {
    let idle = state.sessions.idle(now_ms);
    if idle.is_empty() {
        return Ok(0);
    }
    let expiring = state
        .retryable
        .hold_expiring(&idle, |id| state.sessions.is_idle(id, now_ms));
    if expiring.is_empty() {
        return Ok(0);
    }
    let mut batch = crate::storage::Batch::new();
    expiring.delete_records(&*state.catalog.snapshot(), &mut batch)?;
    if !batch.is_empty() {
        state.catalog.store().commit(batch)?;
    }
    let ids: std::collections::HashSet<_> = expiring.ids().copied().collect();
    state.cursors.kill_sessions(|id| ids.contains(id));
    state.sessions.forget_idle(&ids, now_ms);
    state.retryable.forget(expiring);
    Ok(ids.len())
}

/// Writes the last use of every session with records on disk, so that they expire on time
/// after a restart (see `crate::sessions`).
fn record_last_use(state: &ServerState) {
    if state.config.in_memory {
        return;
    }
    let mut batch = crate::storage::Batch::new();
    let recorded = crate::retryable::record_last_use(
        &*state.catalog.snapshot(),
        &state.sessions.all(),
        &mut batch,
    )
    .and_then(|n| {
        if n > 0 {
            state.catalog.store().commit(batch)?;
        }
        Ok(n)
    });
    match recorded {
        Ok(0) => {}
        Ok(sessions) => info!(sessions, "recorded the last use of sessions"),
        Err(e) => warn!(error = %e.errmsg, "could not record the last use of sessions"),
    }
}

/// Opens the configured engine (recovering an on-disk store) behind group commit.
async fn open_store(config: &Config) -> std::io::Result<Arc<GroupCommit>> {
    let storage: Arc<dyn Storage> = if config.in_memory {
        info!("storage: in memory (nothing survives a restart)");
        Arc::new(MemoryStorage::new())
    } else {
        let dir = config.data_dir.clone();
        let cache = config.cache_bytes(crate::config::physical_memory());
        info!(data_dir = %dir.display(), cache_mb = cache >> 20, "storage: opening");
        let disk =
            tokio::task::spawn_blocking(move || DiskStorage::open_with_cache(&dir, Some(cache)))
                .await
                .map_err(std::io::Error::other)?
                .map_err(|e| std::io::Error::other(e.to_string()))?;
        Arc::new(disk)
    };
    let store = GroupCommit::new(storage);
    store.set_lead(config.leader_sync);
    Ok(Arc::new(store))
}

/// Accepts forever. Accept errors (out of file descriptors, say) back off and retry rather than
/// stop the server.
async fn accept_loop(
    listener: &TcpListener,
    state: &ServerState,
    limit: &Arc<Semaphore>,
    cancel: &CancellationToken,
    tracker: &TaskTracker,
) {
    let mut backoff = Duration::from_millis(1);
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(accepted) => {
                backoff = Duration::from_millis(1);
                accepted
            }
            Err(e) => {
                error!(error = %e, backoff_ms = backoff.as_millis(), "accept failed");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(1));
                continue;
            }
        };
        // Past the limit the socket is accepted and closed at once, as mongod does past
        // maxIncomingConnections: the client sees a prompt failure, not a silent hang.
        let Ok(permit) = Arc::clone(limit).try_acquire_owned() else {
            state
                .metrics
                .connections_rejected
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            info!(remote = %peer, "connection refused because too many open connections");
            drop(stream);
            continue;
        };
        if let Err(e) = stream.set_nodelay(true) {
            info!(remote = %peer, error = %e, "could not set TCP_NODELAY");
        }
        // Without TLS (the default) a connection goes straight to its task; with TLS its first
        // bytes decide between a handshake and plain text.
        match &state.tls {
            None => tracker.spawn(connection::serve(
                stream,
                BytesMut::with_capacity(16 * 1024),
                peer,
                state.clone(),
                cancel.clone(),
                permit,
            )),
            Some(tls) => tracker.spawn(super::tls::serve(
                stream,
                peer,
                state.clone(),
                Arc::clone(tls),
                cancel.clone(),
                permit,
            )),
        };
    }
}
