//! How long the oplog keeps its entries: as mongod's, bounded by size (`--oplogSizeMB`, or 5% of
//! the data directory's free disk space, within 990 MB and 50 GB; for `--in-memory` 5% of the
//! physical memory, within 50 MB and 50 GB) and by `oplogMinRetentionHours` (entries younger
//! than that stay, whatever the size). Both change with `replSetResizeOplog`.
//!
//! As mongod's truncate markers, the oplog is seen as chunks of consecutive entries, each of
//! about a tenth to a hundredth of the maximum size ([`chunk_bytes`]), whose bytes, entry counts
//! and last wall times are kept as entries come ([`Retention::observe`] reads only what came
//! after the last entry it saw). While the oplog is over its size, the oldest whole chunk goes
//! ([`Retention::truncate`]): the tables lying wholly inside it dropped
//! ([`Storage::drop_range`]), the rest deleted by key in its own range. Nothing ever scans from
//! the start of the oplog but the first observation after a start (which rebuilds the chunks):
//! the deleted keys' tombstones lie there, and an engine steps over each (see
//! `crate::storage`). Readers start at [`Retention::oldest`] for the same reason.
//!
//! [`Storage::drop_range`]: crate::storage::Storage::drop_range

use std::collections::VecDeque;
use std::ops::Bound;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use bson::RawDocument;
use tokio_util::sync::CancellationToken;

use crate::storage::{Batch, GroupCommit, Keyspace, Snapshot, StorageResult, runs};

/// One MiB.
pub const MB: u64 = 1024 * 1024;
/// The least size mongod's `replSetResizeOplog` takes, and its default's floor on disk.
pub const MIN_DISK_DEFAULT: u64 = 990 * MB;
/// The default's floor in memory.
pub const MIN_MEMORY_DEFAULT: u64 = 50 * MB;
/// The default's ceiling.
pub const MAX_DEFAULT: u64 = 50 * 1024 * MB;
/// mongod's `BSONObjMaxInternalSize`, which sizes its truncate markers.
const MAX_INTERNAL_BSON: u64 = 16 * MB + 16 * 1024;
/// Keys deleted per commit when a chunk goes.
const DELETES_PER_COMMIT: usize = 4096;

/// mongod's default oplog size: 5% of `available` (the free bytes of the data directory's
/// volume, or the physical memory when `in_memory`), within its floor and 50 GB.
pub fn default_size(available: u64, in_memory: bool) -> u64 {
    let floor = if in_memory {
        MIN_MEMORY_DEFAULT
    } else {
        MIN_DISK_DEFAULT
    };
    (available / 20).clamp(floor, MAX_DEFAULT)
}

/// The size `config` gives the oplog: `--oplogSizeMB`, or mongod's default ([`default_size`]
/// of the data directory's free space, or of the physical memory for `--in-memory`).
pub fn configured_size(config: &crate::config::Config) -> u64 {
    if let Some(mb) = config.oplog_size_mb {
        return mb.saturating_mul(MB);
    }
    let available = if config.in_memory {
        crate::config::physical_memory()
    } else {
        free_space(&config.data_dir)
    };
    default_size(available, config.in_memory)
}

/// The bytes free for an unprivileged user on the volume of `dir`, 0 when unknown.
fn free_space(dir: &std::path::Path) -> u64 {
    rustix::fs::statvfs(dir).map_or(0, |s| s.f_bavail.saturating_mul(s.f_frsize))
}

/// The bytes a chunk holds before the next begins, for an oplog of `max` bytes: as mongod's
/// markers, `max` split in as many parts as 16 MB documents fit in it, at least 10 and at most
/// 100.
pub fn chunk_bytes(max: u64) -> u64 {
    let parts = (max / MAX_INTERNAL_BSON).clamp(10, 100);
    (max / parts).max(1)
}

/// A run of consecutive entries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Chunk {
    /// The key ([`crate::replset::ts_to_u64`]) of its first entry.
    first: u64,
    /// The key of its last entry.
    last: u64,
    /// The BSON bytes of its entries.
    bytes: u64,
    /// How many entries it holds.
    count: u64,
    /// The `wall` time of its last entry (ms).
    last_wall_ms: i64,
}

#[derive(Debug, Default)]
struct Chunks {
    /// Full chunks, oldest first.
    sealed: VecDeque<Chunk>,
    /// The chunk entries go to now.
    open: Option<Chunk>,
    /// The key of the last entry observed.
    last_seen: Option<u64>,
    /// The bytes and entries of every chunk.
    bytes: u64,
    count: u64,
    /// Whether the oplog was observed once since the start (the chunks rebuilt).
    observed: bool,
    /// Entries committed before that, in commit order: `(key, entry bytes, bytes beside it,
    /// wall ms)`.
    pending: Vec<(u64, u64, u64, i64, bool)>,
}

impl Chunks {
    /// Counts the entry under `key` of `bytes` (its pre-images' `beside`), written at `wall`.
    /// Counts the entry `key`; `ends_run`: the last of its commit's run (`storage::runs`),
    /// after which a chunk may end (a chunk holds whole runs, as truncation removes them).
    fn add(
        &mut self,
        key: u64,
        bytes: u64,
        beside: u64,
        wall: i64,
        chunk_size: u64,
        ends_run: bool,
    ) {
        self.last_seen = Some(key);
        self.bytes += bytes + beside;
        self.count += 1;
        let open = self.open.get_or_insert(Chunk {
            first: key,
            last: key,
            bytes: 0,
            count: 0,
            last_wall_ms: wall,
        });
        open.last = key;
        open.bytes += bytes + beside;
        open.count += 1;
        open.last_wall_ms = wall;
        if ends_run
            && open.bytes >= chunk_size
            && let Some(full) = self.open.take()
        {
            self.sealed.push_back(full);
        }
    }
}

/// The oplog's bounds and the running figures of what it holds.
#[derive(Debug)]
pub struct Retention {
    max_bytes: AtomicU64,
    /// `oplogMinRetentionHours`, as the bits of an `f64`.
    min_hours: AtomicU64,
    chunks: Mutex<Chunks>,
    /// The key of the oldest entry kept (0: none seen yet).
    oldest: AtomicU64,
    /// Chunks truncated so far.
    truncations: AtomicU64,
    /// Time spent truncating them (µs).
    truncating_micros: AtomicU64,
    /// Time the first observation took (µs): the rebuild of the chunks after a start.
    processing_micros: AtomicU64,
    /// Woken when the bounds change.
    wake: tokio::sync::Notify,
}

impl Default for Retention {
    fn default() -> Self {
        Retention::new(MIN_DISK_DEFAULT, 0.0)
    }
}

impl Retention {
    /// An oplog of at most `max_bytes` that keeps entries for at least `min_hours`.
    pub fn new(max_bytes: u64, min_hours: f64) -> Self {
        Retention {
            max_bytes: AtomicU64::new(max_bytes.max(1)),
            min_hours: AtomicU64::new(min_hours.to_bits()),
            chunks: Mutex::new(Chunks::default()),
            oldest: AtomicU64::new(0),
            truncations: AtomicU64::new(0),
            truncating_micros: AtomicU64::new(0),
            processing_micros: AtomicU64::new(0),
            wake: tokio::sync::Notify::new(),
        }
    }

    fn chunks(&self) -> std::sync::MutexGuard<'_, Chunks> {
        self.chunks.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The most bytes the oplog keeps (`maxSize`).
    pub fn max_bytes(&self) -> u64 {
        self.max_bytes.load(Ordering::Relaxed)
    }

    /// `oplogMinRetentionHours` (0: none).
    pub fn min_hours(&self) -> f64 {
        f64::from_bits(self.min_hours.load(Ordering::Relaxed))
    }

    /// Sets the size, the minimum retention, or both (`replSetResizeOplog`); the retention task
    /// applies them at once.
    pub fn resize(&self, max_bytes: Option<u64>, min_hours: Option<f64>) {
        if let Some(max) = max_bytes {
            self.max_bytes.store(max.max(1), Ordering::Relaxed);
        }
        if let Some(hours) = min_hours {
            self.min_hours.store(hours.to_bits(), Ordering::Relaxed);
        }
        self.wake.notify_one();
    }

    /// The key ([`crate::replset::ts_to_u64`]) of the oldest entry kept, as far as this knows:
    /// 0 until the oplog was first observed. Entries older than it are gone (a change stream
    /// cannot resume before it); readers may start their scans there.
    pub fn oldest(&self) -> u64 {
        self.oldest.load(Ordering::Acquire)
    }

    /// The bytes and the number of the entries kept, as of the last observation.
    pub fn figures(&self) -> (u64, u64) {
        let chunks = self.chunks();
        (chunks.bytes, chunks.count)
    }

    /// Chunks truncated since the start.
    pub fn truncations(&self) -> u64 {
        self.truncations.load(Ordering::Relaxed)
    }

    /// Microseconds spent truncating since the start.
    pub fn truncating_micros(&self) -> u64 {
        self.truncating_micros.load(Ordering::Relaxed)
    }

    /// Microseconds the rebuild of the chunks after the start took (mongod's
    /// `totalTimeProcessingMicros`, of its markers' creation).
    pub fn processing_micros(&self) -> u64 {
        self.processing_micros.load(Ordering::Relaxed)
    }

    /// Records the first entry `snapshot` holds as the oldest kept, before the first
    /// [`Retention::observe`] (at a start, so that [`Retention::oldest`] is right from the
    /// first command on). One seek from the start of the oplog.
    pub fn seed_oldest(&self, snapshot: &dyn Snapshot) -> StorageResult<()> {
        let first = snapshot
            .range(Keyspace::Oplog, Bound::Unbounded, Bound::Unbounded, false)
            .next()
            .transpose()?;
        if let Some(key) = first.and_then(|(k, _)| <[u8; 8]>::try_from(&k[..]).ok()) {
            self.oldest
                .fetch_max(u64::from_be_bytes(key), Ordering::AcqRel);
        }
        Ok(())
    }

    /// Counts entries as their commit tells them (`sizes`: each entry's bytes and those kept
    /// beside it, under consecutive keys from `first`), so that [`Retention::observe`] need not
    /// read them back. Entries it already counted are skipped; before its first call (the
    /// rebuild after a start), they wait for it.
    pub fn record(&self, first: u64, sizes: &[(u64, u64)], wall_ms: i64) {
        let chunk_size = chunk_bytes(self.max_bytes());
        let mut chunks = self.chunks();
        for (i, (key, &(bytes, beside))) in (first..).zip(sizes).enumerate() {
            let ends_run = i + 1 == sizes.len();
            if !chunks.observed {
                chunks.pending.push((key, bytes, beside, wall_ms, ends_run));
            } else if chunks.last_seen.is_none_or(|seen| key > seen) {
                chunks.add(key, bytes, beside, wall_ms, chunk_size, ends_run);
            }
        }
    }

    /// Counts the entries committed since the last call (all of them the first time) that
    /// [`Retention::record`] was not told of.
    pub fn observe(&self, snapshot: &dyn Snapshot) -> StorageResult<()> {
        let started = std::time::Instant::now();
        let mut chunks = self.chunks();
        let first = !chunks.observed;
        // After the last entry seen and what is kept beside it (its key followed by more bytes).
        let after = chunks
            .last_seen
            .map(|k| k.checked_add(1).map(u64::to_be_bytes));
        let lower = match &after {
            Some(Some(k)) => Bound::Included(&k[..]),
            Some(None) => return Ok(()),
            None => Bound::Unbounded,
        };
        let chunk_size = chunk_bytes(self.max_bytes());
        // Runs as stored: a chunk ends only where one does.
        for entry in snapshot.stored_range(Keyspace::Oplog, lower, Bound::Unbounded, false) {
            let (key, value) = entry?;
            let Ok(key) = <[u8; 8]>::try_from(&key[..]) else {
                // A pre-image kept beside its entry: its bytes count, in its entry's chunk.
                chunks.bytes += value.len() as u64;
                continue;
            };
            let items = runs::items(&value);
            let n = items.len();
            for (i, (key, item)) in (u64::from_be_bytes(key)..).zip(items).enumerate() {
                let item = value.get(item).unwrap_or_default();
                let wall = RawDocument::from_bytes(item)
                    .ok()
                    .and_then(|d| d.get_datetime("wall").ok())
                    .map_or(0, bson::DateTime::timestamp_millis);
                chunks.add(key, item.len() as u64, 0, wall, chunk_size, i + 1 == n);
            }
        }
        if !chunks.observed {
            chunks.observed = true;
            for (key, bytes, beside, wall, ends_run) in std::mem::take(&mut chunks.pending) {
                if chunks.last_seen.is_none_or(|seen| key > seen) {
                    chunks.add(key, bytes, beside, wall, chunk_size, ends_run);
                }
            }
        }
        let first_key = chunks
            .sealed
            .front()
            .or(chunks.open.as_ref())
            .map(|c| c.first);
        if let Some(first) = first_key {
            self.oldest.fetch_max(first, Ordering::AcqRel);
        }
        if first {
            let micros = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
            self.processing_micros.fetch_add(micros, Ordering::Relaxed);
        }
        Ok(())
    }

    /// Removes the oldest whole chunks while the oplog is over its size, keeping those with an
    /// entry younger than the minimum retention at `now_ms`. Returns how many entries went.
    pub fn truncate(&self, store: &GroupCommit, now_ms: i64) -> StorageResult<u64> {
        let mut removed = 0;
        loop {
            let chunk = {
                let mut chunks = self.chunks();
                if chunks.bytes <= self.max_bytes() {
                    break;
                }
                let Some(front) = chunks.sealed.front().copied() else {
                    break;
                };
                let hours = self.min_hours();
                if hours > 0.0 {
                    #[expect(
                        clippy::cast_possible_truncation,
                        reason = "hours are checked non-negative; the product saturates"
                    )]
                    let keep_ms = (hours * 3_600_000.0) as i64;
                    if front.last_wall_ms > now_ms.saturating_sub(keep_ms) {
                        break;
                    }
                }
                chunks.sealed.pop_front();
                chunks.bytes = chunks.bytes.saturating_sub(front.bytes);
                chunks.count = chunks.count.saturating_sub(front.count);
                let next = chunks
                    .sealed
                    .front()
                    .or(chunks.open.as_ref())
                    .map_or(front.last.saturating_add(1), |c| c.first);
                // Readers stop looking before it from now on.
                self.oldest.fetch_max(next, Ordering::AcqRel);
                front
            };
            let started = std::time::Instant::now();
            remove_chunk(store, chunk.first, chunk.last)?;
            removed += chunk.count;
            let micros = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
            self.truncating_micros.fetch_add(micros, Ordering::Relaxed);
            self.truncations.fetch_add(1, Ordering::Relaxed);
        }
        Ok(removed)
    }
}

/// Removes the entries with keys in `[first, last]`: the tables wholly inside, then the rest
/// one by one, each step resuming after the last key it deleted.
fn remove_chunk(store: &GroupCommit, first: u64, last: u64) -> StorageResult<()> {
    let lower = first.to_be_bytes();
    let end = last.checked_add(1).map(u64::to_be_bytes);
    store
        .storage()
        .drop_range(Keyspace::Oplog, &lower, end.as_ref().map(|e| &e[..]))?;
    // (Up to the next time: the last entry's pre-images, kept beside it, go with it.)
    let upper = match &end {
        Some(e) => Bound::Excluded(&e[..]),
        None => Bound::Unbounded,
    };
    let mut from = lower.to_vec();
    let mut included = true;
    loop {
        let snapshot = store.storage().snapshot();
        let mut batch = Batch::new();
        let start = if included {
            Bound::Included(&from[..])
        } else {
            Bound::Excluded(&from[..])
        };
        let mut last_key = None;
        // Whole runs, as stored (a chunk holds whole runs).
        for entry in snapshot
            .stored_range(Keyspace::Oplog, start, upper, false)
            .take(DELETES_PER_COMMIT)
        {
            let (key, _) = entry?;
            batch.delete_once(Keyspace::Oplog, key.clone());
            last_key = Some(key);
        }
        let Some(key) = last_key else {
            return Ok(());
        };
        let n = batch.len();
        store.commit(batch)?;
        if n < DELETES_PER_COMMIT {
            return Ok(());
        }
        from = key.to_vec();
        included = false;
    }
}

/// The least time between two looks at the new entries.
const OBSERVE_INTERVAL: Duration = Duration::from_millis(250);

/// The retention task: after new entries (at most every [`OBSERVE_INTERVAL`]), each resize,
/// and once a minute, counts what came and truncates what is over the bounds, until `cancel`.
pub async fn retention_task(
    store: Arc<GroupCommit>,
    oplog: Arc<super::Oplog>,
    now_ms: Arc<dyn Fn() -> i64 + Send + Sync>,
    cancel: CancellationToken,
) {
    let mut latest = oplog.subscribe();
    loop {
        let run = {
            let store = Arc::clone(&store);
            let oplog = Arc::clone(&oplog);
            let now_ms = Arc::clone(&now_ms);
            tokio::task::spawn_blocking(move || -> StorageResult<u64> {
                let retention = oplog.retention();
                retention.observe(&*store.storage().snapshot())?;
                retention.truncate(&store, now_ms())
            })
        };
        match run.await {
            Ok(Ok(0)) => {}
            Ok(Ok(n)) => tracing::debug!(entries = n, "oplog: truncated"),
            Ok(Err(e)) => tracing::warn!(error = %e, "oplog: truncation failed"),
            Err(e) => tracing::warn!(error = %e, "oplog: truncation task failed"),
        }
        // Entries are looked at in bunches, not one wake-up per write (each look reads the new
        // entries again); a resize or a shutdown does not wait.
        tokio::select! {
            () = cancel.cancelled() => return,
            () = oplog.retention().wake.notified() => continue,
            () = tokio::time::sleep(OBSERVE_INTERVAL) => {}
        }
        tokio::select! {
            () = cancel.cancelled() => return,
            changed = latest.changed() => {
                if changed.is_err() {
                    return;
                }
            }
            () = oplog.retention().wake.notified() => {}
            () = tokio::time::sleep(Duration::from_secs(60)) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::{MemoryStorage, Storage};
    use bson::rawdoc;

    fn store() -> GroupCommit {
        GroupCommit::new(Arc::new(MemoryStorage::new()))
    }

    /// Writes entries with keys `keys`, each of about `size` bytes, at wall time `wall`.
    fn write(store: &GroupCommit, keys: std::ops::Range<u64>, size: usize, wall: i64) {
        let mut batch = Batch::new();
        for k in keys {
            let doc = rawdoc! {
                "op": "n",
                "pad": "x".repeat(size),
                "wall": bson::DateTime::from_millis(wall),
            };
            batch.put(Keyspace::Oplog, k.to_be_bytes().to_vec(), doc.into_bytes());
        }
        store.commit(batch).unwrap();
    }

    fn keys(store: &GroupCommit) -> Vec<u64> {
        store
            .storage()
            .snapshot()
            .prefix(Keyspace::Oplog, &[])
            .map(|e| u64::from_be_bytes(e.unwrap().0[..].try_into().unwrap()))
            .collect()
    }

    #[test]
    fn default_sizes_follow_mongod() {
        assert_eq!(default_size(0, false), 990 * MB);
        assert_eq!(default_size(100_000 * MB, false), 5000 * MB);
        assert_eq!(default_size(u64::MAX, false), 50 * 1024 * MB);
        assert_eq!(default_size(0, true), 50 * MB);
        assert_eq!(default_size(16_000 * MB, true), 800 * MB);
        assert_eq!(chunk_bytes(MB), MB / 10);
        assert_eq!(chunk_bytes(990 * MB), 990 * MB / 61);
        assert_eq!(chunk_bytes(50 * 1024 * MB), 512 * MB);
    }

    #[test]
    fn commits_told_are_counted_once_without_reading_them_back() {
        let store = store();
        let retention = Retention::new(1_000_000, 0.0);
        write(&store, 1..11, 100, 0);
        // Told before the rebuild: 9 and 10 are also in the snapshot it reads, 11 and 12 not.
        retention.record(9, &[(1, 0), (1, 0), (50, 7), (50, 0)], 5);
        let size_of_one = {
            let snap = store.storage().snapshot();
            let (_, v) = snap.prefix(Keyspace::Oplog, &[]).next().unwrap().unwrap();
            v.len() as u64
        };
        retention.observe(&*store.storage().snapshot()).unwrap();
        assert_eq!(retention.figures(), (10 * size_of_one + 107, 12));
        // After it: counted as told, once; what was seen already is skipped.
        retention.record(13, &[(10, 0)], 6);
        retention.record(12, &[(10, 0)], 6);
        assert_eq!(retention.figures(), (10 * size_of_one + 117, 13));
        // A later look finds nothing new (no read of what was told, nor of what lies beside
        // the last entry).
        retention.observe(&*store.storage().snapshot()).unwrap();
        assert_eq!(retention.figures(), (10 * size_of_one + 117, 13));
    }

    /// Writes `runs` runs of `per_run` entries (as a commit of several stamped values stores
    /// them, `storage::runs`) from key `first`, each entry of about `size` bytes.
    fn write_runs(store: &GroupCommit, first: u64, runs: u64, per_run: u64, size: usize) {
        for r in 0..runs {
            let start = first + r * per_run;
            let mut run = Vec::new();
            for _ in 0..per_run {
                let doc = rawdoc! {
                    "op": "n",
                    "pad": "x".repeat(size),
                    "wall": bson::DateTime::from_millis(0),
                };
                run.extend_from_slice(doc.as_bytes());
            }
            let mut batch = Batch::new();
            batch.put(Keyspace::Oplog, start.to_be_bytes().to_vec(), run);
            store.commit(batch).unwrap();
        }
    }

    #[test]
    fn truncation_removes_whole_runs_and_leaves_no_hole() {
        let store = store();
        // 10 KB limit: chunks of 1 KB; runs of 7 entries of about 120 bytes (840 bytes a run),
        // so no chunk boundary falls where a run ends by chance alone.
        let retention = Retention::new(10_000, 0.0);
        write_runs(&store, 1, 40, 7, 100);
        retention.observe(&*store.storage().snapshot()).unwrap();
        assert_eq!(retention.figures().1, 280);
        let removed = retention.truncate(&store, 0).unwrap();
        assert!(removed > 100);
        assert_eq!(removed % 7, 0, "whole runs went");
        let snap = store.storage().snapshot();
        let stored: Vec<u64> = snap
            .stored_range(Keyspace::Oplog, Bound::Unbounded, Bound::Unbounded, false)
            .map(|e| u64::from_be_bytes(e.unwrap().0[..].try_into().unwrap()))
            .collect();
        assert!(stored.iter().all(|k| (k - 1) % 7 == 0), "{stored:?}");
        // What readers see starts at the oldest entry kept and has no gap to the last.
        let seen = keys(&store);
        assert_eq!(seen.first().copied(), Some(retention.oldest()));
        assert_eq!(seen, (retention.oldest()..281).collect::<Vec<_>>());
        assert_eq!(retention.figures().1, 280 - removed);
        // Told of runs by their commits, chunks end where runs do too.
        let told = Retention::new(10_000, 0.0);
        told.observe(&*MemoryStorage::new().snapshot()).unwrap();
        for r in 0..40_u64 {
            told.record(1 + r * 7, &[(120, 0); 7], 0);
        }
        let chunks = told.chunks();
        assert!(chunks.sealed.len() > 5);
        assert!(
            chunks
                .sealed
                .iter()
                .all(|c| (c.last % 7) == 0 && (c.first - 1) % 7 == 0)
        );
    }

    #[test]
    fn truncates_oldest_whole_chunks_and_keeps_the_newest() {
        let store = store();
        // 10 KB limit: chunks of 1 KB; entries of about 120 bytes.
        let retention = Retention::new(10_000, 0.0);
        write(&store, 1..201, 100, 0);
        retention.observe(&*store.storage().snapshot()).unwrap();
        let (bytes, count) = retention.figures();
        assert_eq!(count, 200);
        assert!(bytes > 20_000);
        let removed = retention.truncate(&store, 0).unwrap();
        assert!(removed > 100);
        let left = keys(&store);
        let (bytes, count) = retention.figures();
        assert_eq!(count, left.len() as u64);
        assert!(bytes <= 10_000, "{bytes}");
        // The newest entries stay, in one run up to the last.
        assert_eq!(*left.last().unwrap(), 200);
        assert_eq!(left.len() as u64, 201 - left[0]);
        assert_eq!(retention.oldest(), left[0]);
        // More entries: only the new ones are read, and the oplog stays within its size.
        write(&store, 201..401, 100, 0);
        retention.observe(&*store.storage().snapshot()).unwrap();
        retention.truncate(&store, 0).unwrap();
        let left = keys(&store);
        assert_eq!(*left.last().unwrap(), 400);
        assert!(retention.figures().0 <= 10_000);
        assert_eq!(retention.figures().1, left.len() as u64);
        assert!(retention.truncations() > 0);
    }

    #[test]
    fn a_chunk_larger_than_a_delete_commit_goes_whole() {
        let store = store();
        let retention = Retention::new(2_000_000, 0.0);
        // One chunk of 200 KB of small entries, more than a commit's deletes.
        write(&store, 1..10_001, 1, 0);
        write(&store, 10_001..40_001, 200, 0);
        retention.observe(&*store.storage().snapshot()).unwrap();
        retention.truncate(&store, 0).unwrap();
        let left = keys(&store);
        assert_eq!(*left.last().unwrap(), 40_000);
        assert_eq!(left.len() as u64, 40_001 - left[0]);
        assert!(retention.figures().0 <= 2_000_000);
    }

    #[test]
    fn min_retention_keeps_young_entries_whatever_the_size() {
        let store = store();
        let hour = 3_600_000;
        let retention = Retention::new(10_000, 1.0);
        write(&store, 1..101, 100, 10 * hour);
        write(&store, 101..201, 100, 12 * hour);
        retention.observe(&*store.storage().snapshot()).unwrap();
        // At 12h30 the entries of 10h may go, those of 12h stay.
        retention.truncate(&store, 12 * hour + hour / 2).unwrap();
        let left = keys(&store);
        assert!(left[0] > 1 && left[0] <= 101, "{}", left[0]);
        assert_eq!(left.len(), 201 - usize::try_from(left[0]).unwrap());
        // With the minimum lifted, the size rules again.
        retention.resize(None, Some(0.0));
        retention.truncate(&store, 12 * hour).unwrap();
        assert!(retention.figures().0 <= 10_000);
        assert_eq!(*keys(&store).last().unwrap(), 200);
    }

    #[test]
    fn a_restart_rebuilds_the_figures() {
        let store = store();
        write(&store, 1..301, 100, 0);
        let first = Retention::new(10_000, 0.0);
        first.observe(&*store.storage().snapshot()).unwrap();
        first.truncate(&store, 0).unwrap();
        let again = Retention::new(10_000, 0.0);
        again.seed_oldest(&*store.storage().snapshot()).unwrap();
        assert_eq!(again.oldest(), first.oldest());
        again.observe(&*store.storage().snapshot()).unwrap();
        assert_eq!(again.figures(), first.figures());
        assert_eq!(again.oldest(), first.oldest());
    }
}
