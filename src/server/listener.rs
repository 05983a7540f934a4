//! The accept loop: connection limit, accept back-off, graceful shutdown.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{error, info, warn};

use super::connection;
use crate::{Config, ServerState};

/// Serves `listener` until `shutdown` completes, then stops accepting, lets every connection
/// finish the request it is running (for at most `config.shutdown_timeout_secs`), and returns.
pub async fn run(
    listener: TcpListener,
    config: Config,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    let local_addr = listener.local_addr()?;
    let timeout = Duration::from_secs(config.shutdown_timeout_secs);
    let limit = Arc::new(Semaphore::new(config.max_connections));
    let state = ServerState::new(config, local_addr);
    let cancel = CancellationToken::new();
    let tracker = TaskTracker::new();
    info!(address = %local_addr, version = crate::EBB_VERSION, "waiting for connections");

    tokio::select! {
        () = accept_loop(&listener, &state, &limit, &cancel, &tracker) => {}
        () = shutdown => info!("shutdown requested: no new connections, draining requests"),
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
    info!("shutdown complete");
    Ok(())
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
        tracker.spawn(connection::serve(
            stream,
            peer,
            state.clone(),
            cancel.clone(),
            permit,
        ));
    }
}
