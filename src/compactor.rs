//! The compactor: rewrites a keyspace once the garbage written into it (tombstones of deletes,
//! expiries and drops; versions replaced by updates) is a large share of what it holds, so that
//! scans stop stepping over it and its disk space comes back (see `docs/storage.md`, "Garbage
//! and compaction"). The `compact` command runs the same compaction on demand.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::storage::{Keyspace, Storage};

/// How often the compactor looks at the ledger.
const TICK: Duration = Duration::from_millis(500);

/// The longest wait between two tries at letting go of tables a snapshot held.
const MAX_RELEASE_WAIT: Duration = Duration::from_secs(30);

/// The keyspaces garbage is written to (the catalog is small, and rewritten by the engine), in
/// the order they are compacted: `expiry` first, as the compaction of `docs` looks up an
/// expiry entry for each expired record (`storage::expired`), and those lookups are cheap in
/// a compacted `expiry` (10 µs each among a mass expiry's tombstones, a compaction of a
/// million expired records took 11.7 s; after, 1-2 s).
pub const KEYSPACES: [Keyspace; 3] = [Keyspace::Expiry, Keyspace::Docs, Keyspace::Index];

/// Compacts every keyspace whose debt is due ([`crate::storage::Ledger::due`]), now and then
/// until cancelled.
pub async fn compact_task(storage: Arc<dyn Storage>, cancel: CancellationToken) {
    // Retries of letting go of replaced tables, backing off while a snapshot holds them.
    let mut release_wait = TICK;
    let mut since_release = Duration::ZERO;
    loop {
        tokio::select! {
            () = cancel.cancelled() => return,
            () = tokio::time::sleep(TICK) => {}
        }
        let due: Vec<Keyspace> = KEYSPACES
            .into_iter()
            .filter(|ks| storage.ledger().due(*ks, storage.entry_count(*ks)))
            .collect();
        if due.is_empty() {
            since_release += TICK;
            let ledger = storage.ledger();
            if !ledger.release_pending() {
                continue;
            }
            if !storage.holds_released() {
                ledger.set_release_pending(false);
                release_wait = TICK;
            } else if since_release >= release_wait {
                since_release = Duration::ZERO;
                release_wait = (release_wait * 2).min(MAX_RELEASE_WAIT);
                let store = Arc::clone(&storage);
                if let Ok(Err(e)) = tokio::task::spawn_blocking(move || store.flush(&[])).await {
                    warn!(error = %e, "releasing replaced tables failed");
                }
            }
            continue;
        }
        let debt: u64 = due
            .iter()
            .map(|ks| storage.ledger().debt(*ks).total())
            .sum();
        let store = Arc::clone(&storage);
        let started = std::time::Instant::now();
        // At normal priority: a major compaction holds the tree's compaction lock, and starved
        // on a background thread it would hold up the engine's own compactions.
        let compacted = tokio::task::spawn_blocking(move || store.compact(&due)).await;
        match compacted {
            Ok(Ok(freed)) => info!(
                garbage = debt,
                bytes_freed = freed,
                ms = started.elapsed().as_millis(),
                "compacted"
            ),
            Ok(Err(e)) => warn!(error = %e, "compaction failed"),
            Err(e) => warn!(error = %e, "compaction task failed"),
        }
    }
}
