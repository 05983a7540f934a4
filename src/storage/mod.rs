//! Storage: an ordered key-value store with atomic multi-keyspace batches and snapshots.
//!
//! Layout, atomicity and durability are described in `docs/storage.md`. Two engines implement
//! [`Storage`]: [`DiskStorage`] on fjall (the default) and [`MemoryStorage`] (tests and
//! `--in-memory`). [`GroupCommit`] turns their `sync` into group commit.

mod commit;
mod disk;
mod expired;
pub mod garbage;
mod hot;
mod journal;
mod memory;
pub mod record;
pub mod runs;
pub mod tally;

use std::ops::Bound;

use bytes::Bytes;

pub use commit::{GroupCommit, LEAD_RUN, Stamper};
pub use disk::DiskStorage;
pub use garbage::Ledger;
pub use memory::MemoryStorage;

/// The keyspaces (column families) of the store; each is an ordered map of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Keyspace {
    /// Collection records, dropped-collection markers, the id counter.
    Catalog,
    /// Documents by collection id and `_id`.
    Docs,
    /// Expiry order (TTL).
    Expiry,
    /// Index entries (the `_id` index and secondary indexes).
    Index,
    /// What logical sessions keep: retryable writes' executed statements (`crate::retryable`).
    Sessions,
    /// The oplog (`crate::oplog`): entries keyed by their cluster time, in commit order.
    Oplog,
}

impl Keyspace {
    /// How many keyspaces there are.
    pub const COUNT: usize = 6;

    /// Every keyspace.
    pub const ALL: [Keyspace; Keyspace::COUNT] = [
        Keyspace::Catalog,
        Keyspace::Docs,
        Keyspace::Expiry,
        Keyspace::Index,
        Keyspace::Sessions,
        Keyspace::Oplog,
    ];

    /// The on-disk name.
    pub fn name(self) -> &'static str {
        match self {
            Keyspace::Catalog => "catalog",
            Keyspace::Docs => "docs",
            Keyspace::Expiry => "expiry",
            Keyspace::Index => "index",
            Keyspace::Sessions => "sessions",
            Keyspace::Oplog => "oplog",
        }
    }

    /// Whether a commit's values under consecutive keys are stored as one run
    /// ([`runs`]): the oplog's entries.
    pub fn holds_runs(self) -> bool {
        self == Keyspace::Oplog
    }

    fn slot(self) -> usize {
        match self {
            Keyspace::Catalog => 0,
            Keyspace::Docs => 1,
            Keyspace::Expiry => 2,
            Keyspace::Index => 3,
            Keyspace::Sessions => 4,
            Keyspace::Oplog => 5,
        }
    }
}

/// One change in a [`Batch`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    /// Set `key` to `value`.
    Put(Keyspace, Bytes, Bytes),
    /// Set `key`, replacing a value stored there: the same as a put, but the replaced version
    /// is counted as garbage ([`garbage::Ledger`]).
    Replace(Keyspace, Bytes, Bytes),
    /// Remove `key`.
    Delete(Keyspace, Bytes),
    /// Remove `key`, which was written once since it was last removed (or created): the engine
    /// may leave a tombstone that vanishes with the one write it meets in a compaction, instead
    /// of one that lasts until the last level (fjall's weak tombstone). For expiry entries,
    /// whose key holds the instant and `_id`, so a write never replaces one.
    DeleteOnce(Keyspace, Bytes),
    /// The document record at `key` has expired and the purge is done with it (its expiry and
    /// index entries are deleted in the same batch): an engine that drops expired records as it
    /// compacts ([`Storage::drops_expired`]) writes nothing and leaves it to the compaction;
    /// another deletes it. Either way no reader sees it (its header's instant has passed).
    Expire(Keyspace, Bytes),
}

/// Changes applied atomically by [`Storage::commit`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Batch {
    /// The changes, applied in order.
    pub ops: Vec<Op>,
    /// Values to put in [`Keyspace::Oplog`] under stamps [`GroupCommit`] assigns at the commit,
    /// in commit order (see [`Stamper`]), as the one run they are stored as ([`runs`]);
    /// dropped when no stamper is set (no oplog).
    pub stamped: runs::Stamps,
}

/// A value whose key is the stamp (a cluster time) its commit gets: the stamp is also written
/// into the value, as 8 little-endian bytes at `ts_at` (a BSON timestamp's encoding).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stamped {
    /// The value, with room for the stamp at `ts_at`.
    pub value: Vec<u8>,
    /// Where the stamp goes.
    pub ts_at: usize,
    /// Values kept beside it, each under its stamp followed by a 4-byte big-endian number
    /// (which sorts them after it and before the next stamp): the oplog's pre-images.
    pub beside: Vec<(u32, Vec<u8>)>,
}

impl Batch {
    /// An empty batch.
    pub fn new() -> Self {
        Batch::default()
    }

    /// Adds a put.
    pub fn put(&mut self, ks: Keyspace, key: impl Into<Bytes>, value: impl Into<Bytes>) {
        self.ops.push(Op::Put(ks, key.into(), value.into()));
    }

    /// Adds a put over a stored value (see [`Op::Replace`]).
    pub fn replace(&mut self, ks: Keyspace, key: impl Into<Bytes>, value: impl Into<Bytes>) {
        self.ops.push(Op::Replace(ks, key.into(), value.into()));
    }

    /// Adds the removal of a key written once (see [`Op::DeleteOnce`]).
    pub fn delete_once(&mut self, ks: Keyspace, key: impl Into<Bytes>) {
        self.ops.push(Op::DeleteOnce(ks, key.into()));
    }

    /// Adds an expired record's removal (see [`Op::Expire`]).
    pub fn expire(&mut self, ks: Keyspace, key: impl Into<Bytes>) {
        self.ops.push(Op::Expire(ks, key.into()));
    }

    /// Adds a delete.
    pub fn delete(&mut self, ks: Keyspace, key: impl Into<Bytes>) {
        self.ops.push(Op::Delete(ks, key.into()));
    }

    /// Whether there is nothing to apply.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty() && self.stamped.is_empty()
    }

    /// Number of changes.
    pub fn len(&self) -> usize {
        self.ops.len()
    }
}

/// The block cache of an engine that keeps one ([`Storage::cache`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheStatus {
    /// The most it may hold, in bytes.
    pub capacity: u64,
    /// What it holds, in bytes.
    pub used: u64,
    /// Blocks read from files into the cache since the start (it did not hold them).
    pub read_in: u64,
    /// Bytes written but not yet in tables (the memtables), which reads find in memory.
    pub unflushed: u64,
}

/// A storage failure. After an IO error the disk engine refuses all further writes.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum StorageError {
    /// The engine reported an IO or corruption error.
    #[error("storage engine error: {0}")]
    Engine(String),
    /// An earlier failure made the store refuse writes.
    #[error("storage is read-only after an earlier write failure")]
    Poisoned,
    /// Stored bytes did not decode.
    #[error("corrupt stored data: {0}")]
    Corrupt(String),
    /// The store was written in a key format this build does not read.
    #[error("unsupported data directory: {0}")]
    UnsupportedFormat(String),
}

/// The result of storage calls.
pub type StorageResult<T> = Result<T, StorageError>;

/// A key-value pair read from storage.
pub type Entry = (Bytes, Bytes);

/// An ordered scan.
pub type Scan<'a> = Box<dyn Iterator<Item = StorageResult<Entry>> + Send + 'a>;

/// A consistent, repeatable read view of every keyspace.
pub trait Snapshot: Send + Sync {
    /// The value at `key`, if any.
    fn get(&self, ks: Keyspace, key: &[u8]) -> StorageResult<Option<Bytes>>;

    /// Entries with keys in `(lower, upper)`, in key order (or reversed).
    fn range(
        &self,
        ks: Keyspace,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        reverse: bool,
    ) -> Scan<'_>;

    /// A scan of all of one collection's or index's keys in `ks` (`id`), from the first to the
    /// last in either direction and possibly in several [`Snapshot::range`] calls, reached the
    /// end having read `returned` entries: the store may count what it stepped over on the way
    /// ([`Ledger::scanned`]). Scans of part of an id's keys do not call this.
    fn scanned(&self, _ks: Keyspace, _id: u64, _returned: u64) {}

    /// Another handle on this same read view, for a second thread to read part of a scan
    /// (see `cursor::Scan::split`); `None` where there is none to give.
    fn share(&self) -> Option<Box<dyn Snapshot>> {
        None
    }

    /// [`Snapshot::get`] of what is stored, runs unsplit ([`runs`]); the engines keep it, views
    /// over them show [`Snapshot::get`].
    fn stored_get(&self, ks: Keyspace, key: &[u8]) -> StorageResult<Option<Bytes>> {
        self.get(ks, key)
    }

    /// [`Snapshot::range`] of what is stored: a run ([`runs`]) is one entry under the key of
    /// its first item. For code that removes whole runs.
    fn stored_range(
        &self,
        ks: Keyspace,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        reverse: bool,
    ) -> Scan<'_> {
        self.range(ks, lower, upper, reverse)
    }

    /// Entries whose keys start with `prefix`, in key order.
    fn prefix(&self, ks: Keyspace, prefix: &[u8]) -> Scan<'_> {
        let end = prefix_end(prefix);
        let upper = end.as_deref().map_or(Bound::Unbounded, Bound::Excluded);
        self.range(ks, Bound::Included(prefix), upper, false)
    }
}

/// An ordered key-value engine.
pub trait Storage: Send + Sync + 'static {
    /// A read view of everything committed so far.
    fn snapshot(&self) -> Box<dyn Snapshot>;

    /// The latest committed value at `key`, without taking a snapshot: for single-key reads,
    /// whose one key is a consistent view by itself.
    fn get(&self, ks: Keyspace, key: &[u8]) -> StorageResult<Option<Bytes>> {
        self.snapshot().get(ks, key)
    }

    /// Applies `batch` atomically; visible to later snapshots at once, durable after the next
    /// [`Storage::sync`].
    fn commit(&self, batch: Batch) -> StorageResult<()>;

    /// Makes every commit so far durable.
    fn sync(&self) -> StorageResult<()>;

    /// Whether commits survive a restart at all (false for the memory engine).
    fn is_durable(&self) -> bool;

    /// Bytes used on disk (or in memory), for `dbStats`/`listDatabases`.
    fn approximate_size(&self) -> u64;

    /// What the engine's block cache holds and serves (`None` for an engine without one).
    fn cache(&self) -> Option<CacheStatus> {
        None
    }

    /// Rewrites `keyspaces` to drop deleted entries and superseded versions (tombstones slow
    /// scans until then), first writing out what memory holds. Returns the bytes of disk it gave
    /// back. Recorded in the [`Ledger`].
    fn compact(&self, keyspaces: &[Keyspace]) -> StorageResult<u64>;

    /// The garbage counts of this store.
    fn ledger(&self) -> &Ledger;

    /// Whether committing `batch` now would likely wait for the engine to catch up (its write
    /// backpressure: flushes or compactions behind), so that a caller on an async runtime
    /// should move its other work elsewhere first.
    fn may_stall(&self, batch: &Batch) -> bool {
        let _ = batch;
        false
    }

    /// Whether compactions drop expired document records the purge is done with, so that
    /// [`Op::Expire`] writes nothing.
    fn drops_expired(&self) -> bool {
        false
    }

    /// Gives the engine the clock expiry is judged by: from then on, if it can, its compactions
    /// drop document records that have expired and whose expiry entry is gone (the purge is done
    /// with them). Until then they drop none.
    fn set_expiry_clock(&self, _now_ms: std::sync::Arc<dyn Fn() -> i64 + Send + Sync>) {}

    /// Expired document records compactions have dropped so far.
    fn expired_dropped(&self) -> u64 {
        0
    }

    /// About how many entries `ks` holds: live ones, superseded versions and tombstones.
    fn entry_count(&self, ks: Keyspace) -> u64;

    /// About how many bytes `ks` holds (on disk: its tables, not the shared journal).
    fn keyspace_size(&self, ks: Keyspace) -> u64;

    /// Removes whatever part of the keys in `[lower, upper)` (`upper` none: to the end) can go
    /// without writing a tombstone per key: on the disk engine, the tables that lie wholly
    /// inside the range. Keys outside such tables stay: callers delete them one by one after.
    /// Only for ranges no reader will look at again (a dropped id's keys): snapshots taken
    /// before keep seeing the keys, later ones may see some and not others. Returns whether it
    /// removed anything.
    fn drop_range(
        &self,
        _ks: Keyspace,
        _lower: &[u8],
        _upper: Option<&[u8]>,
    ) -> StorageResult<bool> {
        Ok(false)
    }

    /// Writes what memory holds of `keyspaces` out, and lets go of tables no reader needs any
    /// more (their files are removed): after a range drop, that is when the space comes back.
    fn flush(&self, _keyspaces: &[Keyspace]) -> StorageResult<()> {
        Ok(())
    }

    /// Whether tables or journals no current reader needs may still be on disk, because a
    /// snapshot was open when they were replaced: [`Storage::flush`] of no keyspace lets go of
    /// them once it has closed.
    fn holds_released(&self) -> bool {
        false
    }
}

/// The smallest key greater than every key starting with `prefix`, or `None` if there is none
/// (all `0xFF`).
pub fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xFF {
            end.push(last + 1);
            return Some(end);
        }
    }
    None
}

#[cfg(test)]
mod tests;
