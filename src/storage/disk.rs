//! The on-disk engine on fjall: one database (one journal) holding a keyspace per
//! [`Keyspace`], so a batch across keyspaces is atomic.

use std::ops::Bound;
use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;
use fjall::{AbstractTree, Database, KeyspaceCreateOptions, Readable};

use super::expired::{Clock, ExpiredRecords, ExpiredRecordsFactory};
use super::hot::{HOT_WRITES, HotKeys, MAX_VERSION_CHAIN, VersionChains, split_range};
use super::journal::JournalSync;
use super::{
    Batch, CacheStatus, Keyspace, Ledger, Op, Scan, Snapshot, Storage, StorageError, StorageResult,
    runs,
};

/// fjall-backed durable storage.
pub struct DiskStorage {
    db: Database,
    keyspaces: [fjall::Keyspace; Keyspace::COUNT],
    /// Per keyspace, how many versions its active memtable holds of each key (approximately).
    chains: [VersionChains; Keyspace::COUNT],
    /// Per keyspace, the keys whose versions scans step around (see `storage::hot`).
    hot: Arc<[HotKeys; Keyspace::COUNT]>,
    ledger: Arc<Ledger>,
    /// The compaction filter of `docs` (see `storage::expired`).
    expired: Arc<ExpiredRecords>,
    /// Does the rotations commits ask for (see [`DiskStorage::rotate_long_chains`]).
    rotator: Rotator,
    /// Syncs the journal outside the engine's lock (see `storage::journal`).
    journal: JournalSync,
}

/// A thread of its own that rotates memtables when a commit finds a long version chain: a
/// rotation also lets go of every keyspace's old versions, and dropping a flushed 64 MiB
/// memtable takes milliseconds, which a committing writer (holding its collection's lock and,
/// with an oplog, the clock's) must not wait for.
struct Rotator {
    /// Where rotations are asked for: a keyspace's slot. `None` once the store is dropped.
    asks: Option<std::sync::mpsc::Sender<usize>>,
    /// Per keyspace, whether a rotation was asked for and not done yet.
    pending: Arc<[std::sync::atomic::AtomicBool; Keyspace::COUNT]>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Rotator {
    fn start(keyspaces: [fjall::Keyspace; Keyspace::COUNT]) -> StorageResult<Self> {
        let (asks, asked) = std::sync::mpsc::channel::<usize>();
        let pending: Arc<[std::sync::atomic::AtomicBool; Keyspace::COUNT]> = Arc::default();
        let done = Arc::clone(&pending);
        let thread = std::thread::Builder::new()
            .name("ebb-rotate".into())
            .spawn(move || {
                for slot in asked {
                    let (Some(keyspace), Some(flag)) = (keyspaces.get(slot), done.get(slot)) else {
                        continue;
                    };
                    // A rotation whose flush is still pending: rotating again would gain
                    // nothing (scans read sealed memtables too) and could stall writers
                    // (fjall halts them at four sealed memtables).
                    if keyspace.sealed_memtable_count() == 0
                        && let Err(e) = keyspace.rotate_memtable()
                    {
                        // Only an optimisation: an IO failure behind it poisons the store for
                        // the next write, which reports it.
                        let name = Keyspace::ALL.get(slot).map_or("?", |k| k.name());
                        tracing::warn!(keyspace = name, error = %e, "memtable rotation failed");
                    }
                    flag.store(false, std::sync::atomic::Ordering::Release);
                }
            })
            .map_err(|e| StorageError::Engine(format!("cannot start the rotation thread: {e}")))?;
        Ok(Rotator {
            asks: Some(asks),
            pending,
            thread: Some(thread),
        })
    }

    /// Asks for a rotation of the keyspace in `slot`; `false` if one is pending already.
    fn ask(&self, slot: usize) -> bool {
        let Some(flag) = self.pending.get(slot) else {
            return false;
        };
        if flag.swap(true, std::sync::atomic::Ordering::AcqRel) {
            return false;
        }
        match &self.asks {
            Some(asks) if asks.send(slot).is_ok() => true,
            _ => {
                flag.store(false, std::sync::atomic::Ordering::Release);
                false
            }
        }
    }

    /// Lets the thread finish what was asked and end (before the store closes).
    fn stop(&mut self) {
        self.asks = None;
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The catalog key [`DiskStorage::release`] writes.
const COMPACTIONS_KEY: [u8; 1] = [0x06];

/// The catalog key under which the count of expired documents left in `docs` for a compaction
/// (the ledger's debt) is kept, so that a restart does not forget them (u64).
const EXPIRED_LEFT_KEY: [u8; 1] = [0x07];

/// The key [`DiskStorage::release`] deletes in the other keyspaces: above every id's keys (ids
/// are counted up from 1 and never reach `u64::MAX`), and never written, so no scan sees it.
const RELEASE_KEY: [u8; 9] = [0xFF; 9];

impl Drop for DiskStorage {
    fn drop(&mut self) {
        self.rotator.stop();
        self.expired.clear_expiry();
    }
}

impl std::fmt::Debug for DiskStorage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DiskStorage").finish_non_exhaustive()
    }
}

pub(super) fn engine(e: fjall::Error) -> StorageError {
    match e {
        fjall::Error::Poisoned => StorageError::Poisoned,
        other => StorageError::Engine(other.to_string()),
    }
}

/// The data block size of the keyspaces read mostly by scans, documents and the oplog: 32 KiB,
/// `WiredTiger`'s largest leaf page. A warm filtered scan of 100k ~1 KB documents went from
/// 570 to 320 ns a document against the engine's default of 4 KiB, a cold one from 100–230
/// ms to 60–70 ms (fewer block-cache lookups, block reads and block iterators per document),
/// for about 0.3 µs more per point read (`benches/filter.rs`, `benches/crud.rs`). The index
/// keyspace, read mostly by point lookups, keeps 4 KiB. A keyspace keeps the size it was
/// created with: stores created before this keep 4 KiB.
const SCAN_BLOCK_BYTES: u32 = 32 * 1024;

/// Sealed memtables in one keyspace from which fjall makes a commit wait for flushes.
const STALL_SEALED_MEMTABLES: usize = 4;
/// Runs in level 0 of one keyspace from which fjall slows commits down.
const STALL_L0_RUNS: usize = 20;

fn keyspace_options(ks: Keyspace) -> KeyspaceCreateOptions {
    let options = KeyspaceCreateOptions::default();
    match ks {
        Keyspace::Docs | Keyspace::Oplog => {
            options.data_block_size_policy(fjall::config::BlockSizePolicy::all(SCAN_BLOCK_BYTES))
        }
        _ => options,
    }
}

impl DiskStorage {
    /// Opens (recovering) or creates the store in `dir`, with the engine's default block cache
    /// (32 MiB).
    pub fn open(dir: &Path) -> StorageResult<Self> {
        Self::open_with_cache(dir, None)
    }

    /// Opens (recovering) or creates the store in `dir`, its block cache holding at most
    /// `cache_bytes` (the engine's default when `None`).
    pub fn open_with_cache(dir: &Path, cache_bytes: Option<u64>) -> StorageResult<Self> {
        std::fs::create_dir_all(dir)
            .map_err(|e| StorageError::Engine(format!("cannot create {}: {e}", dir.display())))?;
        let expired = Arc::new(ExpiredRecords::default());
        let factory: Arc<dyn fjall::compaction::filter::Factory> =
            Arc::new(ExpiredRecordsFactory(Arc::clone(&expired)));
        let mut builder = Database::builder(dir);
        if let Some(bytes) = cache_bytes {
            builder = builder.cache_size(bytes);
        }
        let db = builder
            .manual_journal_persist(true)
            .with_compaction_filter_factories(Arc::new(move |name: &str| {
                (name == Keyspace::Docs.name()).then(|| Arc::clone(&factory))
            }))
            .open()
            .map_err(engine)?;
        let open = |ks: Keyspace| {
            db.keyspace(ks.name(), || keyspace_options(ks))
                .map_err(engine)
        };
        let keyspaces = [
            open(Keyspace::Catalog)?,
            open(Keyspace::Docs)?,
            open(Keyspace::Expiry)?,
            open(Keyspace::Index)?,
            open(Keyspace::Sessions)?,
            open(Keyspace::Oplog)?,
        ];
        expired.set_expiry(keyspaces[Keyspace::Expiry.slot()].clone());
        let ledger = Ledger::default();
        if let Some(left) = keyspaces[Keyspace::Catalog.slot()]
            .get(EXPIRED_LEFT_KEY)
            .map_err(engine)?
            .and_then(|v| <[u8; 8]>::try_from(&v[..]).ok())
        {
            ledger.restore_expired(Keyspace::Docs, u64::from_be_bytes(left));
        }
        let rotator = Rotator::start(keyspaces.clone())?;
        Ok(DiskStorage {
            db,
            keyspaces,
            rotator,
            journal: JournalSync::new(dir),
            chains: std::array::from_fn(|_| VersionChains::new()),
            hot: Arc::default(),
            ledger: Arc::new(ledger),
            expired,
        })
    }

    /// Has the active memtable of `ks` rotated (by the [`Rotator`]'s thread, not the
    /// committing one) so that its flush (in fjall's background) keeps only the versions an
    /// open snapshot can still read. Skipped while an earlier rotation's flush is pending:
    /// rotating faster than flushes finish would stall writers (fjall halts writes at four
    /// sealed memtables) and gain nothing, as scans read the sealed ones too.
    fn rotate_long_chains(&self, ks: Keyspace) {
        if self.ks(ks).sealed_memtable_count() > 0 {
            return;
        }
        if self.rotator.ask(ks.slot()) {
            self.chains[ks.slot()].reset();
        }
    }

    /// Lets go of what no reader needs: tables replaced by a compaction or dropped by a range
    /// drop stay on disk while a version of the tree names them, and journals stay while a
    /// keyspace that has writes in them has not flushed a table newer than them. fjall lets go
    /// of old versions when it rotates a memtable (only one that held something), and of a
    /// journal only once every keyspace written in it has a table with a newer write: a
    /// compaction that removed all of a keyspace's recent writes (or all its tables) leaves
    /// none, and the journals would stay until new writes there are flushed. So this writes the
    /// count of compactions under the catalog key `0x06`, a tombstone of [`RELEASE_KEY`] (a key
    /// no id reaches) in each of `keyspaces`, and rotates their memtables.
    fn release(&self, keyspaces: &[Keyspace]) -> StorageResult<()> {
        let compactions = self.ledger.status().compactions;
        let catalog = self.ks(Keyspace::Catalog);
        catalog
            .insert(COMPACTIONS_KEY, compactions.to_be_bytes())
            .map_err(engine)?;
        for ks in keyspaces.iter().filter(|ks| **ks != Keyspace::Catalog) {
            self.ks(*ks).remove(RELEASE_KEY).map_err(engine)?;
            self.ks(*ks).rotate_memtable().map_err(engine)?;
        }
        catalog.rotate_memtable().map_err(engine)?;
        self.ledger.set_release_pending(true);
        Ok(())
    }

    fn ks(&self, ks: Keyspace) -> &fjall::Keyspace {
        &self.keyspaces[ks.slot()]
    }

    /// The journal's syncer.
    #[cfg(test)]
    pub(super) fn journal(&self) -> &JournalSync {
        &self.journal
    }
}

struct DiskSnapshot {
    snapshot: fjall::Snapshot,
    keyspaces: [fjall::Keyspace; Keyspace::COUNT],
    hot: Arc<[HotKeys; Keyspace::COUNT]>,
    ledger: Arc<Ledger>,
}

impl Snapshot for DiskSnapshot {
    fn get(&self, ks: Keyspace, key: &[u8]) -> StorageResult<Option<Bytes>> {
        runs::get(self, ks, key)
    }

    fn range(
        &self,
        ks: Keyspace,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        reverse: bool,
    ) -> Scan<'_> {
        runs::range(self, ks, lower, upper, reverse)
    }

    fn stored_get(&self, ks: Keyspace, key: &[u8]) -> StorageResult<Option<Bytes>> {
        self.snapshot
            .get(&self.keyspaces[ks.slot()], key)
            .map(|v| v.map(Bytes::from))
            .map_err(engine)
    }

    fn stored_range(
        &self,
        ks: Keyspace,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        reverse: bool,
    ) -> Scan<'_> {
        split_range(
            &self.snapshot,
            &self.keyspaces[ks.slot()],
            &self.hot[ks.slot()],
            lower,
            upper,
            reverse,
        )
    }

    fn scanned(&self, ks: Keyspace, id: u64, returned: u64) {
        self.ledger.scanned(ks, id, returned);
    }

    fn share(&self) -> Option<Box<dyn Snapshot>> {
        Some(Box::new(DiskSnapshot {
            snapshot: self.snapshot.clone(),
            keyspaces: self.keyspaces.clone(),
            hot: Arc::clone(&self.hot),
            ledger: Arc::clone(&self.ledger),
        }))
    }
}

impl Storage for DiskStorage {
    fn get(&self, ks: Keyspace, key: &[u8]) -> StorageResult<Option<Bytes>> {
        if ks.holds_runs() {
            return self.snapshot().get(ks, key);
        }
        self.ks(ks)
            .get(key)
            .map(|v| v.map(Bytes::from))
            .map_err(engine)
    }

    fn snapshot(&self) -> Box<dyn Snapshot> {
        Box::new(DiskSnapshot {
            snapshot: self.db.snapshot(),
            keyspaces: self.keyspaces.clone(),
            hot: Arc::clone(&self.hot),
            ledger: Arc::clone(&self.ledger),
        })
    }

    fn commit(&self, batch: Batch) -> StorageResult<()> {
        let left = self.ledger.record(&batch);
        let mut wb = self.db.batch();
        if left.expired > 0 && self.expired.active() {
            // Kept with the batch that leaves them (concurrent commits may write it out of
            // order: it is a hint for the compactor, not an exact count).
            let left = self.ledger.debt(Keyspace::Docs).expired;
            wb.insert(
                self.ks(Keyspace::Catalog),
                EXPIRED_LEFT_KEY,
                left.to_be_bytes(),
            );
        }
        let mut long = [false; Keyspace::COUNT];
        for op in batch.ops {
            let (ks, key) = match &op {
                // Left for the compaction filter, when there is one (see `storage::expired`).
                Op::Expire(..) if self.expired.active() => continue,
                Op::Put(ks, k, _)
                | Op::Replace(ks, k, _)
                | Op::Delete(ks, k)
                | Op::DeleteOnce(ks, k)
                | Op::Expire(ks, k) => (*ks, k),
            };
            let writes = self.chains[ks.slot()].record(key);
            if writes >= MAX_VERSION_CHAIN {
                long[ks.slot()] = true;
            }
            if writes >= HOT_WRITES && writes.is_multiple_of(HOT_WRITES) {
                let memtable = self.ks(ks).tree.active_memtable().id();
                self.hot[ks.slot()].mark(key, memtable);
            }
            match op {
                Op::Put(ks, k, v) | Op::Replace(ks, k, v) => wb.insert(self.ks(ks), k, v),
                Op::Delete(ks, k) | Op::Expire(ks, k) => wb.remove(self.ks(ks), k),
                Op::DeleteOnce(ks, k) => wb.remove_weak(self.ks(ks), k),
            }
        }
        wb.commit().map_err(engine)?;
        for ks in Keyspace::ALL {
            if long[ks.slot()] {
                self.rotate_long_chains(ks);
            }
        }
        Ok(())
    }

    fn sync(&self) -> StorageResult<()> {
        self.journal.sync(&self.db)
    }

    fn is_durable(&self) -> bool {
        true
    }

    fn compact(&self, keyspaces: &[Keyspace]) -> StorageResult<u64> {
        let before = self.db.disk_space().unwrap_or(0);
        for ks in keyspaces {
            let keyspace = self.ks(*ks);
            self.ledger.compaction_started(*ks);
            // Tombstones and versions still in memtables are out of a major compaction's reach:
            // write them to a table first. The rotation also moves fjall's garbage-collection
            // watermark up to the oldest open snapshot (otherwise that happens only on a rotation
            // or every 10,000 snapshots closed): a compaction keeps every tombstone over a write
            // newer than the watermark, and a stale one left 400k deletes' tombstones in place. A
            // rotation happens only if the memtable holds something: the tombstone of the
            // never-written release key makes sure it does.
            keyspace.remove(RELEASE_KEY).map_err(engine)?;
            keyspace.rotate_memtable_and_wait().map_err(engine)?;
            keyspace.major_compact().map_err(engine)?;
        }
        if keyspaces.contains(&Keyspace::Docs) {
            // What the compaction dropped is no longer owed; what the purge left since is.
            let left = self.ledger.debt(Keyspace::Docs).expired;
            self.ks(Keyspace::Catalog)
                .insert(EXPIRED_LEFT_KEY, left.to_be_bytes())
                .map_err(engine)?;
        }
        self.release(keyspaces)?;
        let freed = before.saturating_sub(self.db.disk_space().unwrap_or(0));
        self.ledger.compaction_finished(freed);
        Ok(freed)
    }

    fn ledger(&self) -> &Ledger {
        &self.ledger
    }

    fn drops_expired(&self) -> bool {
        self.expired.active()
    }

    fn set_expiry_clock(&self, now_ms: Clock) {
        self.expired.set_clock(now_ms);
    }

    fn expired_dropped(&self) -> u64 {
        self.expired.dropped()
    }

    fn entry_count(&self, ks: Keyspace) -> u64 {
        self.ks(ks).approximate_len() as u64
    }

    fn keyspace_size(&self, ks: Keyspace) -> u64 {
        self.ks(ks).disk_space()
    }

    fn drop_range(&self, ks: Keyspace, lower: &[u8], upper: Option<&[u8]>) -> StorageResult<bool> {
        let tree = &self.ks(ks).tree;
        // A drop of no table still writes a new version of the tree's manifest: skip it.
        let inside = |min: &[u8], max: &[u8]| min >= lower && upper.is_none_or(|u| max < u);
        let tables = tree
            .current_version()
            .iter_tables()
            .filter(|t| inside(t.metadata.key_range.min(), t.metadata.key_range.max()))
            .count();
        if tables == 0 {
            return Ok(false);
        }
        let upper = upper.map_or(Bound::Unbounded, Bound::Excluded);
        tree.drop_range::<&[u8], _>((Bound::Included(lower), upper))
            .map_err(|e| engine(e.into()))?;
        Ok(true)
    }

    fn flush(&self, keyspaces: &[Keyspace]) -> StorageResult<()> {
        self.release(keyspaces)
    }

    fn holds_released(&self) -> bool {
        self.keyspaces
            .iter()
            .any(|ks| ks.tree.version_free_list_len() > 0)
    }

    fn approximate_size(&self) -> u64 {
        self.db.disk_space().unwrap_or(0)
    }

    fn may_stall(&self, batch: &Batch) -> bool {
        // fjall's own thresholds (`Keyspace::local_backpressure`, for each keyspace a batch
        // writes): at 4 sealed memtables a writer sleeps 100 ms at a time until a flush catches
        // up; from 20 runs in level 0 it spins, and from 30 sleeps 10 ms at a time.
        let mut written = [false; Keyspace::COUNT];
        for op in &batch.ops {
            let (Op::Put(ks, ..)
            | Op::Replace(ks, ..)
            | Op::Delete(ks, _)
            | Op::DeleteOnce(ks, _)
            | Op::Expire(ks, _)) = op;
            if let Some(w) = written.get_mut(ks.slot()) {
                *w = true;
            }
        }
        if !batch.stamped.is_empty()
            && let Some(w) = written.get_mut(Keyspace::Oplog.slot())
        {
            *w = true;
        }
        self.keyspaces
            .iter()
            .zip(written)
            .filter(|(_, w)| *w)
            .any(|(ks, _)| {
                ks.tree.sealed_memtable_count() >= STALL_SEALED_MEMTABLES
                    || ks.tree.l0_run_count() >= STALL_L0_RUNS
            })
    }

    fn cache(&self) -> Option<CacheStatus> {
        let mut status = CacheStatus {
            capacity: self.db.cache_capacity(),
            used: self.db.cache_size(),
            unflushed: self.db.write_buffer_size(),
            ..CacheStatus::default()
        };
        for ks in &self.keyspaces {
            status.read_in += ks.metrics().block_load_io_count() as u64;
        }
        Some(status)
    }
}

#[cfg(test)]
mod tests {
    use super::{DiskStorage, Keyspace, MAX_VERSION_CHAIN};
    use crate::storage::{Batch, Storage};
    use std::ops::Bound;

    fn keyed(id: u64, i: u32) -> Vec<u8> {
        let mut k = id.to_be_bytes().to_vec();
        k.extend_from_slice(&i.to_be_bytes());
        k
    }

    /// A range drop removes the tables wholly inside the range, not a key outside it; a snapshot
    /// taken before still reads the dropped keys; a compaction gives the space back and resets the
    /// debt the ledger counted.
    #[test]
    fn range_drops_and_compactions() -> Result<(), Box<dyn std::error::Error>> {
        use std::ops::Bound;
        let dir = tempfile::tempdir()?;
        let store = DiskStorage::open(dir.path())?;
        let docs = store.ks(Keyspace::Docs);
        for id in [1_u64, 2, 3] {
            let mut batch = Batch::new();
            for i in 0..1_000 {
                batch.put(Keyspace::Docs, keyed(id, i), vec![0_u8; 100]);
            }
            store.commit(batch)?;
            // One table per id.
            docs.rotate_memtable_and_wait()?;
        }
        // Id 2 has keys in the memtable too.
        let mut batch = Batch::new();
        batch.put(Keyspace::Docs, keyed(2, 5_000), &b"late"[..]);
        store.commit(batch)?;
        let before = store.snapshot();
        let lower = 2_u64.to_be_bytes();
        let upper = 3_u64.to_be_bytes();
        assert!(store.drop_range(Keyspace::Docs, &lower, Some(&upper))?);
        // Nothing left to drop whole: no table is wholly inside any more.
        assert!(!store.drop_range(Keyspace::Docs, &lower, Some(&upper))?);
        let after = store.snapshot();
        let count = |snap: &dyn crate::storage::Snapshot, id: u64| {
            snap.prefix(Keyspace::Docs, &id.to_be_bytes()).count()
        };
        assert_eq!(count(before.as_ref(), 2), 1_001);
        assert_eq!(
            count(after.as_ref(), 2),
            1,
            "only the memtable's key is left"
        );
        assert_eq!(count(after.as_ref(), 1), 1_000);
        assert_eq!(count(after.as_ref(), 3), 1_000);
        assert!(
            after
                .range(Keyspace::Docs, Bound::Unbounded, Bound::Unbounded, false)
                .all(|e| e.is_ok())
        );
        drop(before);

        // Deleting id 1's keys leaves debt; a compaction clears it.
        let mut batch = Batch::new();
        for i in 0..1_000 {
            batch.delete(Keyspace::Docs, keyed(1, i));
        }
        store.commit(batch)?;
        assert_eq!(store.ledger().debt(Keyspace::Docs).tombstones, 1_000);
        assert_eq!(store.ledger().id_debt(Keyspace::Docs, 1).tombstones, 1_000);
        store.compact(&[Keyspace::Docs])?;
        assert_eq!(store.ledger().debt(Keyspace::Docs).total(), 0);
        assert_eq!(store.ledger().status().compactions, 1);
        assert_eq!(count(store.snapshot().as_ref(), 1), 0);
        assert_eq!(count(store.snapshot().as_ref(), 3), 1_000);
        // Only id 2's late key and id 3 are left, and the one tombstone `release` writes: the
        // thousand tombstones are gone.
        assert_eq!(store.entry_count(Keyspace::Docs), 1_002);
        Ok(())
    }

    /// The compaction filter drops expired records the purge is done with (expiry entry gone),
    /// and only those: not a live one, not an expired one the purge has not reached, and an
    /// older version of a dropped record does not come back. The count of records left for it
    /// survives a reopen.
    #[test]
    fn compactions_drop_expired_records_the_purge_is_done_with()
    -> Result<(), Box<dyn std::error::Error>> {
        use crate::storage::record;
        let dir = tempfile::tempdir()?;
        let doc = bson::rawdoc! { "a": 1 };
        let now = 1_000;
        let key = |i: u32| record::doc_key(1, u64::from(i)).to_vec();
        {
            let store = DiskStorage::open(dir.path())?;
            store.set_expiry_clock(std::sync::Arc::new(move || now));
            assert!(store.drops_expired());
            // 0: written live forever, then (in a newer table) expired and purged.
            let mut batch = Batch::new();
            batch.put(
                Keyspace::Docs,
                key(0),
                record::encode(0, record::NEVER, &doc),
            );
            store.commit(batch)?;
            store.ks(Keyspace::Docs).rotate_memtable_and_wait()?;
            let mut batch = Batch::new();
            for (i, expires) in [(0, 500), (1, 500), (2, 500), (3, 5_000), (4, record::NEVER)] {
                batch.put(Keyspace::Docs, key(i), record::encode(0, expires, &doc));
                if expires != record::NEVER {
                    batch.put(
                        Keyspace::Expiry,
                        record::expiry_key(1, expires, u64::from(i)).to_vec(),
                        Vec::new(),
                    );
                }
            }
            store.commit(batch)?;
            // The purge is done with 0 and 1; 2 is expired but not purged yet.
            let mut batch = Batch::new();
            for i in [0, 1] {
                batch.delete(
                    Keyspace::Expiry,
                    record::expiry_key(1, 500, u64::from(i)).to_vec(),
                );
                batch.expire(Keyspace::Docs, key(i));
            }
            store.commit(batch)?;
            assert_eq!(store.ledger().debt(Keyspace::Docs).expired, 2);
        }
        let store = DiskStorage::open(dir.path())?;
        assert_eq!(
            store.ledger().debt(Keyspace::Docs).expired,
            2,
            "kept across a reopen"
        );
        store.set_expiry_clock(std::sync::Arc::new(move || now));
        // Before the compaction the records are all there (readers judge them by the header).
        assert!(store.get(Keyspace::Docs, &key(1))?.is_some());
        store.compact(&[Keyspace::Expiry, Keyspace::Docs])?;
        for (i, kept) in [(0, false), (1, false), (2, true), (3, true), (4, true)] {
            assert_eq!(
                store.get(Keyspace::Docs, &key(i))?.is_some(),
                kept,
                "record {i}"
            );
        }
        assert_eq!(store.expired_dropped(), 2);
        assert_eq!(store.ledger().debt(Keyspace::Docs).expired, 0);
        drop(store);
        let store = DiskStorage::open(dir.path())?;
        assert_eq!(store.ledger().debt(Keyspace::Docs).expired, 0);
        Ok(())
    }

    /// A key written once between removals and removed with `delete_once` reads as absent,
    /// written again reads as present, and nothing comes back through compactions (the weak
    /// tombstone and its one write cancel out).
    #[test]
    fn keys_written_once_are_removed_with_weak_tombstones() -> Result<(), Box<dyn std::error::Error>>
    {
        let dir = tempfile::tempdir()?;
        let store = DiskStorage::open(dir.path())?;
        let expiry = store.ks(Keyspace::Expiry);
        let step = |put: bool| -> Result<(), Box<dyn std::error::Error>> {
            let mut batch = Batch::new();
            if put {
                batch.put(Keyspace::Expiry, keyed(1, 7), Vec::new());
            } else {
                batch.delete_once(Keyspace::Expiry, keyed(1, 7));
            }
            store.commit(batch)?;
            expiry.rotate_memtable_and_wait()?;
            Ok(())
        };
        for round in 0..3 {
            step(true)?;
            assert!(
                store.get(Keyspace::Expiry, &keyed(1, 7))?.is_some(),
                "round {round}"
            );
            step(false)?;
            assert!(
                store.get(Keyspace::Expiry, &keyed(1, 7))?.is_none(),
                "round {round}"
            );
        }
        assert_eq!(store.ledger().debt(Keyspace::Expiry).tombstones, 3);
        store.compact(&[Keyspace::Expiry])?;
        assert!(store.get(Keyspace::Expiry, &keyed(1, 7))?.is_none());
        // The three writes and their weak tombstones are all gone (the release key's tombstone
        // may be left).
        assert!(store.entry_count(Keyspace::Expiry) <= 1);
        Ok(())
    }

    /// Rewriting one key many times rotates the memtable, and the flush leaves a table: no
    /// version chain outgrows the limit by much. Without the rotation, a few thousand small
    /// writes stay in the memtable (fjall rotates at 64 MiB) and no table is ever written.
    #[test]
    fn rewriting_one_key_rotates_the_memtable() -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let store = DiskStorage::open(dir.path())?;
        for i in 0..4 * MAX_VERSION_CHAIN {
            let mut batch = Batch::new();
            batch.put(Keyspace::Docs, &b"hot"[..], i.to_be_bytes().to_vec());
            store.commit(batch)?;
        }
        let docs = store.ks(Keyspace::Docs);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while docs.table_count() == 0 {
            assert!(
                std::time::Instant::now() < deadline,
                "no flush after {} writes of one key",
                4 * MAX_VERSION_CHAIN
            );
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        // The other keyspaces were not touched.
        assert_eq!(store.ks(Keyspace::Index).table_count(), 0);
        let value = store.get(Keyspace::Docs, b"hot")?.ok_or("hot key lost")?;
        assert_eq!(&value[..], &(4 * MAX_VERSION_CHAIN - 1).to_be_bytes()[..]);
        Ok(())
    }

    /// Scans split around a hot key answer exactly what an unsplit scan does, in both
    /// directions and with the hot key on either bound, and as of their snapshot.
    #[test]
    fn scans_around_a_hot_key_see_what_their_snapshot_holds()
    -> Result<(), Box<dyn std::error::Error>> {
        type Case<'k> = (
            Bound<&'k [u8]>,
            Bound<&'k [u8]>,
            std::ops::RangeInclusive<u8>,
        );
        use crate::storage::Snapshot;
        let dir = tempfile::tempdir()?;
        let store = DiskStorage::open(dir.path())?;
        let key = |i: u8| vec![b'k', i];
        for i in 0..10 {
            let mut batch = Batch::new();
            batch.put(Keyspace::Docs, key(i), vec![i]);
            store.commit(batch)?;
        }
        let write_hot = |from: u32| -> Result<(), Box<dyn std::error::Error>> {
            for n in from..from + 100 {
                for hot in [3, 9] {
                    let mut batch = Batch::new();
                    batch.put(Keyspace::Docs, key(hot), n.to_be_bytes().to_vec());
                    store.commit(batch)?;
                }
            }
            Ok(())
        };
        write_hot(0)?;
        let before = store.snapshot();
        write_hot(100)?;
        let mut batch = Batch::new();
        batch.delete(Keyspace::Docs, key(5));
        store.commit(batch)?;
        let after = store.snapshot();
        assert!(
            !store.hot[Keyspace::Docs.slot()]
                .within(Bound::Unbounded, Bound::Unbounded, || (1, 0))
                .is_empty()
        );
        let scan = |snap: &dyn Snapshot, lo: Bound<&[u8]>, hi: Bound<&[u8]>, rev: bool| {
            snap.range(Keyspace::Docs, lo, hi, rev)
                .map(|e| e.map(|(k, v)| (k[1], v.to_vec())))
                .collect::<Result<Vec<_>, _>>()
        };
        let value = |i: u8, last: u32| {
            if i == 3 || i == 9 {
                last.to_be_bytes().to_vec()
            } else {
                vec![i]
            }
        };
        let (k3, k9, k0) = (key(3), key(9), key(0));
        let cases: [Case; 5] = [
            (Bound::Unbounded, Bound::Unbounded, 0..=9),
            (Bound::Included(&k3), Bound::Included(&k9), 3..=9),
            (Bound::Excluded(&k3), Bound::Excluded(&k9), 4..=8),
            (Bound::Included(&k0), Bound::Excluded(&k3), 0..=2),
            (Bound::Included(&k9), Bound::Included(&k9), 9..=9),
        ];
        for (lo, hi, want) in cases {
            for (snap, last, gone) in [(&before, 99, None), (&after, 199, Some(5))] {
                let mut expected: Vec<(u8, Vec<u8>)> = want
                    .clone()
                    .filter(|i| Some(*i) != gone)
                    .map(|i| (i, value(i, last)))
                    .collect();
                assert_eq!(scan(snap.as_ref(), lo, hi, false)?, expected);
                expected.reverse();
                assert_eq!(scan(snap.as_ref(), lo, hi, true)?, expected);
            }
        }
        Ok(())
    }
}
