//! Reads at a cluster time (`readConcern: {level: "snapshot", atClusterTime}`): the storage
//! snapshots that snapshot reads were given, kept by the cluster time they stand for, so that
//! a later read of the same snapshot session (which names that time) reads the same data.
//!
//! A snapshot read without `atClusterTime` reads the data as it is, at the last write's time
//! `T` (every write before `T` is committed on one member), and its snapshot is kept under `T`
//! for [`HISTORY_WINDOW`] (mongod's `minSnapshotHistoryWindowInSeconds`). A read at `T` gets
//! that snapshot; at a time no snapshot was kept for, the current data when nothing was written
//! since that time, else `SnapshotTooOld`: Ebb keeps no other history.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bson::Timestamp;
use bytes::Bytes;

use crate::error::{CommandError, CommandResult, ErrorCode};
use crate::storage::{Keyspace, Scan, Snapshot, StorageResult};

/// How long a snapshot read's snapshot stays readable at its time (mongod's default
/// `minSnapshotHistoryWindowInSeconds`: 5 minutes).
pub const HISTORY_WINDOW: Duration = Duration::from_secs(300);

/// At most this many kept snapshots: past it, the oldest go first.
const MAX_KEPT: usize = 1_000;

fn key(ts: Timestamp) -> u64 {
    (u64::from(ts.time) << 32) | u64::from(ts.increment)
}

/// Kept snapshots by cluster time, with when each was last read.
type Kept = BTreeMap<u64, (Arc<dyn Snapshot>, Instant)>;

/// The snapshots kept for reads at a cluster time.
#[derive(Default)]
pub struct History {
    kept: Mutex<Kept>,
}

impl std::fmt::Debug for History {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("History").finish_non_exhaustive()
    }
}

impl History {
    fn kept(&self) -> std::sync::MutexGuard<'_, Kept> {
        self.kept
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The snapshot of a read at the last write's time `last_write` (`take` takes one of the
    /// data as it is now), kept under that time.
    pub fn now(
        &self,
        last_write: Timestamp,
        take: impl FnOnce() -> Box<dyn Snapshot>,
    ) -> Box<dyn Snapshot> {
        let mut kept = self.kept();
        prune(&mut kept);
        let entry = kept
            .entry(key(last_write))
            .or_insert_with(|| (Arc::from(take()), Instant::now()));
        entry.1 = Instant::now();
        Box::new(Shared(Arc::clone(&entry.0)))
    }

    /// The snapshot of a read at `at`: the one kept under `at`, else (nothing written since
    /// `at`, whose time is `last_write`) the data as it is now, else `SnapshotTooOld`.
    pub fn at(
        &self,
        at: Timestamp,
        last_write: Timestamp,
        take: impl FnOnce() -> Box<dyn Snapshot>,
    ) -> CommandResult<Box<dyn Snapshot>> {
        {
            let mut kept = self.kept();
            prune(&mut kept);
            if let Some(entry) = kept.get_mut(&key(at)) {
                entry.1 = Instant::now();
                return Ok(Box::new(Shared(Arc::clone(&entry.0))));
            }
        }
        if key(at) >= key(last_write) {
            return Ok(self.now(at, take));
        }
        Err(CommandError::new(
            ErrorCode::SnapshotTooOld,
            format!(
                "Read timestamp Timestamp({}, {}) is older than the oldest available timestamp.",
                at.time, at.increment
            ),
        ))
    }
}

/// Lets go of snapshots unread for longer than the window, and of the oldest past the cap.
fn prune(kept: &mut Kept) {
    kept.retain(|_, (_, used)| used.elapsed() < HISTORY_WINDOW);
    while kept.len() >= MAX_KEPT {
        kept.pop_first();
    }
}

/// A snapshot shared by several reads (those at one cluster time; those of one command).
pub(super) struct Shared(pub(super) Arc<dyn Snapshot>);

impl Snapshot for Shared {
    fn get(&self, ks: Keyspace, key: &[u8]) -> StorageResult<Option<Bytes>> {
        self.0.get(ks, key)
    }

    fn range(
        &self,
        ks: Keyspace,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        reverse: bool,
    ) -> Scan<'_> {
        self.0.range(ks, lower, upper, reverse)
    }

    fn share(&self) -> Option<Box<dyn Snapshot>> {
        Some(Box::new(Shared(Arc::clone(&self.0))))
    }

    fn scanned(&self, ks: Keyspace, id: u64, returned: u64) {
        self.0.scanned(ks, id, returned);
    }

    fn stored_get(&self, ks: Keyspace, key: &[u8]) -> StorageResult<Option<Bytes>> {
        self.0.stored_get(ks, key)
    }

    fn stored_range(
        &self,
        ks: Keyspace,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        reverse: bool,
    ) -> Scan<'_> {
        self.0.stored_range(ks, lower, upper, reverse)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::{Batch, MemoryStorage, Storage};

    #[test]
    fn a_read_at_a_kept_time_reads_what_the_first_read_did() {
        let storage = MemoryStorage::new();
        let put = |v: &[u8]| {
            let mut b = Batch::new();
            b.put(Keyspace::Docs, b"k".to_vec(), v.to_vec());
            storage.commit(b).unwrap();
        };
        put(b"1");
        let history = History::default();
        let t1 = Timestamp {
            time: 10,
            increment: 1,
        };
        let first = history.now(t1, || storage.snapshot());
        assert_eq!(&first.get(Keyspace::Docs, b"k").unwrap().unwrap()[..], b"1");
        put(b"2");
        let t2 = Timestamp {
            time: 10,
            increment: 2,
        };
        let again = history.at(t1, t2, || storage.snapshot()).unwrap();
        assert_eq!(&again.get(Keyspace::Docs, b"k").unwrap().unwrap()[..], b"1");
        // At the last write's time, or later: the data as it is.
        let latest = history.at(t2, t2, || storage.snapshot()).unwrap();
        assert_eq!(
            &latest.get(Keyspace::Docs, b"k").unwrap().unwrap()[..],
            b"2"
        );
        // Before it, at a time no read was given: too old.
        let err = history
            .at(
                Timestamp {
                    time: 9,
                    increment: 1,
                },
                t2,
                || storage.snapshot(),
            )
            .err()
            .unwrap();
        assert_eq!(err.code, ErrorCode::SnapshotTooOld);
    }
}
