//! Removing what `drop`, `dropDatabase`, `dropIndexes` and failed index builds leave: the keys
//! of ids whose catalog entry is gone and whose "dropped" marker remains (docs/storage.md,
//! "Dropping").

use std::ops::Bound;
use std::sync::Arc;

use tracing::warn;

use super::{Catalog, DROPPED_PREFIX, PURGE_BATCH, corrupt};
use crate::storage::{Batch, Keyspace, StorageError, record};

impl Catalog {
    /// Removes the data of dropped collections and indexes, in bounded batches. Returns how many keys it
    /// removed; call again, with the same `cursor`, until it returns 0.
    ///
    /// Each batch goes on from the last key the one before it removed (`cursor`): a scan from
    /// the id's first key would step over every tombstone the earlier batches left, which made
    /// removing N keys cost O(N²). A fresh cursor (after a restart) starts at the first key.
    pub fn purge_dropped(&self, cursor: &mut PurgeCursor) -> Result<usize, StorageError> {
        let snapshot = self.snapshot();
        let end = [DROPPED_PREFIX + 1];
        let Some(entry) = snapshot
            .range(
                Keyspace::Catalog,
                Bound::Included(&[DROPPED_PREFIX][..]),
                Bound::Excluded(&end[..]),
                false,
            )
            .next()
        else {
            return Ok(0);
        };
        let (marker, _) = entry?;
        let id = marker
            .get(1..9)
            .and_then(|b| <[u8; 8]>::try_from(b).ok())
            .map(u64::from_be_bytes)
            .ok_or_else(|| corrupt("dropped marker"))?;
        let prefix = record::collection_prefix(id);
        let prefix_end = crate::storage::prefix_end(&prefix);
        if cursor.id != Some(id) {
            // First the tables that hold nothing but this id's keys go whole (no tombstones,
            // their space back once no snapshot reads them); the keys left (in memtables and in
            // tables shared with other ids) are removed one by one below.
            let mut tables_dropped = false;
            for ks in PURGED_KEYSPACES {
                tables_dropped |=
                    self.store
                        .storage()
                        .drop_range(ks, &prefix, prefix_end.as_deref())?;
            }
            *cursor = PurgeCursor {
                id: Some(id),
                after: Default::default(),
                removed: 0,
                tables_dropped,
            };
        }
        let upper = prefix_end
            .as_deref()
            .map_or(Bound::Unbounded, Bound::Excluded);
        let mut batch = Batch::new();
        let mut after = cursor.after.clone();
        // The id is a collection's (documents, expiry entries) or an index's (entries): ids
        // are never shared, so scanning all three keyspaces removes exactly its data.
        for (slot, ks) in PURGED_KEYSPACES.into_iter().enumerate() {
            let lower = match cursor.after.get(slot).and_then(Option::as_deref) {
                Some(last) => Bound::Excluded(last),
                None => Bound::Included(&prefix[..]),
            };
            let mut last = None;
            for entry in snapshot.range(ks, lower, upper, false).take(PURGE_BATCH) {
                let key = entry?.0;
                last = Some(key.clone());
                batch.delete(ks, key);
            }
            if let (Some(last), Some(slot)) = (last, after.get_mut(slot)) {
                *slot = Some(last.to_vec());
            }
        }
        let removed = batch.len();
        if removed == 0 {
            batch.delete(Keyspace::Catalog, marker);
        }
        self.store.commit(batch)?;
        // Only once the batch is committed: a failed one is read again next time.
        cursor.after = after;
        cursor.removed += removed;
        if removed == 0 {
            let storage = self.store.storage();
            storage.ledger().forget(id);
            // Lets go of dropped tables (their files go once no snapshot reads them), and writes
            // the tombstones of a large removal out for the compactor. Not after every small
            // drop: a test suite drops thousands of collections, each a table flush.
            if cursor.tables_dropped || cursor.removed >= FLUSH_AFTER_REMOVING {
                storage.flush(&PURGED_KEYSPACES)?;
            }
            *cursor = PurgeCursor::default();
        }
        Ok(removed.max(1))
    }

    /// Dropped collections and indexes whose data is still being removed.
    pub fn drops_pending(&self) -> Result<u64, StorageError> {
        let end = [DROPPED_PREFIX + 1];
        let mut n = 0;
        for entry in self.snapshot().range(
            Keyspace::Catalog,
            Bound::Included(&[DROPPED_PREFIX][..]),
            Bound::Excluded(&end[..]),
            false,
        ) {
            entry?;
            n += 1;
        }
        Ok(n)
    }
}

/// The keyspaces a collection's or an index's id keys data in.
const PURGED_KEYSPACES: [Keyspace; 3] = [Keyspace::Docs, Keyspace::Expiry, Keyspace::Index];

/// Where [`Catalog::purge_dropped`] has got to in the dropped id it is removing: per keyspace
/// (documents, expiry entries, index entries), the last key it removed.
#[derive(Debug, Default)]
pub struct PurgeCursor {
    pub(super) id: Option<u64>,
    after: [Option<Vec<u8>>; 3],
    /// Keys removed one by one so far.
    removed: usize,
    /// Whether whole tables of the id were dropped.
    tables_dropped: bool,
}

/// Keys removed one by one from a dropped id after which the memtables are written out.
const FLUSH_AFTER_REMOVING: usize = 100_000;

/// Runs [`Catalog::purge_dropped`] until nothing is left, now and then again whenever woken.
pub async fn purge_task(
    catalog: Arc<Catalog>,
    wake: Arc<tokio::sync::Notify>,
    cancel: tokio_util::sync::CancellationToken,
) {
    let mut cursor = PurgeCursor::default();
    loop {
        loop {
            let catalog = Arc::clone(&catalog);
            let mut step_cursor = std::mem::take(&mut cursor);
            // At normal priority: each step commits (holding the journal every writer waits
            // for), which must not happen on a background thread the scheduler may starve.
            let step = tokio::task::spawn_blocking(move || {
                let removed = catalog.purge_dropped(&mut step_cursor);
                (removed, step_cursor)
            })
            .await
            .map(|(removed, next)| {
                cursor = next;
                removed
            });
            match step {
                Ok(Ok(0)) => break,
                Ok(Ok(_)) => {}
                Ok(Err(e)) => {
                    warn!(error = %e, "could not remove a dropped collection's data");
                    break;
                }
                Err(e) => {
                    warn!(error = %e, "purge task failed");
                    break;
                }
            }
            if cancel.is_cancelled() {
                return;
            }
        }
        tokio::select! {
            () = cancel.cancelled() => return,
            () = wake.notified() => {}
            () = tokio::time::sleep(std::time::Duration::from_secs(60)) => {}
        }
    }
}
