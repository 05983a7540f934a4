//! Garbage accounting: what deletes and overwrites leave behind in the store, and when it is
//! worth a compaction to remove it (see `docs/storage.md`, "Garbage and compaction").
//!
//! Every commit counts its tombstones (deletes) and the versions it supersedes (a put flagged as
//! replacing a stored value), per keyspace and per collection or index id (the first eight
//! bytes of every document, expiry and index key). The counts since the last compaction of a
//! keyspace are its *debt*: entries a scan may step over that hold nothing live. The compactor
//! rewrites a keyspace when its debt is a large part of all it holds, so the rewriting costs a
//! bounded number of entries per entry of garbage written (amortised O(1)).

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use super::{Batch, Keyspace, Op};

/// Debt below which no keyspace is compacted by itself: small deletes are left to the engine's
/// own compactions.
pub const MIN_DEBT: u64 = 20_000;

/// A keyspace is compacted once its debt reaches this fraction (1/n) of its entries.
pub const DEBT_SHARE: u64 = 4;

/// A scan that ran through one collection's or index's keys "stepped over" that id's
/// tombstones and expired records (its removable debt). It counts as wasted when it stepped over
/// at least this many...
pub const SCAN_MIN_HIDDEN: u64 = 1_000;

/// ...and at least this many times as many entries as it returned.
pub const SCAN_HIDDEN_RATIO: u64 = 4;

/// What a compaction costs per entry it rewrites, in the steps a scan takes over a hidden entry:
/// once scans have wasted that many steps per entry of a keyspace, compacting it would have
/// cost no more than they did (measured on 2 cores: a compaction of a million expired records
/// took 1-2 s, a scan over a million tombstones 0.6 s).
pub const COMPACTION_COST_IN_STEPS: u64 = 2;

/// Garbage counts of one keyspace or one id.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Debt {
    /// Deletes (each leaves a tombstone until a compaction reaches the last level).
    pub tombstones: u64,
    /// Overwrites (each leaves the version it replaced until a flush or compaction drops it).
    pub superseded: u64,
    /// Expired documents the purge is done with, left in place for a compaction to drop.
    pub expired: u64,
}

impl Debt {
    /// Entries of garbage in all.
    pub fn total(self) -> u64 {
        self.tombstones
            .saturating_add(self.superseded)
            .saturating_add(self.expired)
    }

    /// Entries that make a compaction due: tombstones and expired documents.
    pub fn removable(self) -> u64 {
        self.tombstones.saturating_add(self.expired)
    }

    /// Adds `other`'s counts.
    pub fn add(&mut self, other: Debt) {
        self.tombstones = self.tombstones.saturating_add(other.tombstones);
        self.superseded = self.superseded.saturating_add(other.superseded);
        self.expired = self.expired.saturating_add(other.expired);
    }
}

#[derive(Debug, Default)]
struct Counters {
    tombstones: AtomicU64,
    superseded: AtomicU64,
    expired: AtomicU64,
}

impl Counters {
    fn add(&self, debt: Debt) {
        self.tombstones
            .fetch_add(debt.tombstones, Ordering::Relaxed);
        self.superseded
            .fetch_add(debt.superseded, Ordering::Relaxed);
        self.expired.fetch_add(debt.expired, Ordering::Relaxed);
    }

    fn read(&self) -> Debt {
        Debt {
            tombstones: self.tombstones.load(Ordering::Relaxed),
            superseded: self.superseded.load(Ordering::Relaxed),
            expired: self.expired.load(Ordering::Relaxed),
        }
    }

    fn take(&self) -> Debt {
        Debt {
            tombstones: self.tombstones.swap(0, Ordering::Relaxed),
            superseded: self.superseded.swap(0, Ordering::Relaxed),
            expired: self.expired.swap(0, Ordering::Relaxed),
        }
    }
}

/// Garbage written per keyspace and per id, and the compactions that removed it.
#[derive(Debug, Default)]
pub struct Ledger {
    /// Per keyspace (by slot), written since the server started.
    written: [Counters; Keyspace::COUNT],
    /// Per keyspace, written since its last compaction began.
    debt: [Counters; Keyspace::COUNT],
    /// Per (keyspace slot, id), written since the keyspace's last compaction began.
    by_id: Mutex<HashMap<(usize, u64), Debt>>,
    /// Per keyspace, hidden entries that scans stepped over since its last compaction began.
    scan_waste: [AtomicU64; Keyspace::COUNT],
    compactions: AtomicU64,
    bytes_freed: AtomicU64,
    /// Set while a mass removal (a TTL purge with more due) is under way.
    deferred: std::sync::atomic::AtomicBool,
    /// Set when a compaction or a range drop replaced tables, until they are let go of.
    release_pending: std::sync::atomic::AtomicBool,
}

/// What [`Ledger::status`] reports.
#[derive(Debug, Clone, Default)]
pub struct LedgerStatus {
    /// Per keyspace: garbage written since start, and the debt (since its last compaction).
    pub keyspaces: Vec<(Keyspace, Debt, Debt)>,
    /// Compactions run (by the compactor or the `compact` command).
    pub compactions: u64,
    /// Bytes on disk the compactions gave back.
    pub bytes_freed: u64,
    /// Per keyspace: hidden entries scans stepped over since its last compaction began.
    pub scan_waste: Vec<(Keyspace, u64)>,
}

impl Ledger {
    /// Counts the garbage `batch` leaves: call once per commit. Returns what it leaves in
    /// `docs`.
    pub fn record(&self, batch: &Batch) -> Debt {
        // Commits mostly touch one or two ids: a short list beats a map here.
        let mut seen: Vec<((usize, u64), Debt)> = Vec::new();
        for op in &batch.ops {
            let (ks, key, debt) = match op {
                Op::Put(..) => continue,
                Op::Replace(ks, key, _) => (
                    *ks,
                    key,
                    Debt {
                        superseded: 1,
                        ..Debt::default()
                    },
                ),
                Op::Delete(ks, key) | Op::DeleteOnce(ks, key) => (
                    *ks,
                    key,
                    Debt {
                        tombstones: 1,
                        ..Debt::default()
                    },
                ),
                Op::Expire(ks, key) => (
                    *ks,
                    key,
                    Debt {
                        expired: 1,
                        ..Debt::default()
                    },
                ),
            };
            let Some(id) = key_id(ks, key) else {
                continue;
            };
            let slot = (ks.slot(), id);
            match seen.iter_mut().find(|(s, _)| *s == slot) {
                Some((_, d)) => d.add(debt),
                None => seen.push((slot, debt)),
            }
        }
        let mut docs = Debt::default();
        if seen.is_empty() {
            return docs;
        }
        for ((slot, _), debt) in &seen {
            if let (Some(w), Some(d)) = (self.written.get(*slot), self.debt.get(*slot)) {
                w.add(*debt);
                d.add(*debt);
            }
            if *slot == Keyspace::Docs.slot() {
                docs.add(*debt);
            }
        }
        let mut by_id = self
            .by_id
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for (slot, debt) in seen {
            by_id.entry(slot).or_default().add(debt);
        }
        docs
    }

    /// The debt of `ks`: garbage written since its last compaction began.
    pub fn debt(&self, ks: Keyspace) -> Debt {
        self.debt[ks.slot()].read()
    }

    /// The debt of one collection's documents or one index's entries (`id` is the collection's
    /// or the index's), in `ks`.
    pub fn id_debt(&self, ks: Keyspace, id: u64) -> Debt {
        self.by_id
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(&(ks.slot(), id))
            .copied()
            .unwrap_or_default()
    }

    /// Whether `ks`, holding about `entries` entries (live, superseded and tombstones), is worth
    /// compacting. Either of:
    /// - its tombstones and expired documents are a quarter of its entries (at least
    ///   [`MIN_DEBT`]), or, while a mass removal is under way, as many as all of them (each
    ///   compaction rewrites what is still live: one after the removal rewrites less than several
    ///   during it);
    /// - scans paid for them: the hidden entries scans stepped over since the last compaction
    ///   (see [`Ledger::scanned`]) add up to what rewriting the keyspace costs
    ///   ([`COMPACTION_COST_IN_STEPS`] per entry). This is what compacts a small collection's
    ///   garbage in a large store, or fewer tombstones than [`MIN_DEBT`], once it is read
    ///   often enough to matter, and never when it is not read.
    ///
    /// Replaced versions are counted but do not make a compaction due: most never reach a
    /// table (a memtable's flush keeps only the newest version of a key, and long chains rotate
    /// it, see `storage::disk`), and the engine's own compactions merge the few that do;
    /// compacting on them rewrote the store every 20,000 updates of one document and tripled the
    /// cost of a batch of 100,000 such updates.
    pub fn due(&self, ks: Keyspace, entries: u64) -> bool {
        let debt = self.debt(ks).removable();
        let share = if self.deferred.load(Ordering::Relaxed) {
            1
        } else {
            DEBT_SHARE
        };
        if debt >= MIN_DEBT && debt.saturating_mul(share) >= entries {
            return true;
        }
        let waste = self.scan_waste[ks.slot()].load(Ordering::Relaxed);
        debt > 0 && waste >= entries.saturating_mul(COMPACTION_COST_IN_STEPS).max(1)
    }

    /// A scan of `ks` ran through all the keys of one collection or index (`id`) and returned
    /// `returned` entries. The engine does not say how many hidden entries it stepped over; the
    /// ledger knows how many it wrote there since the last compaction (the id's tombstones and
    /// expired records), an upper bound, as the engine's own compactions may have removed some.
    /// When that is many more than the scan returned, the steps are counted as wasted, towards
    /// a compaction ([`Ledger::due`]). Cheap when there is little garbage: three atomic loads.
    pub fn scanned(&self, ks: Keyspace, id: u64, returned: u64) {
        let Some(debt) = self.debt.get(ks.slot()) else {
            return;
        };
        let whole = debt.read().removable();
        if whole < SCAN_MIN_HIDDEN {
            return;
        }
        let hidden = self.id_debt(ks, id).removable();
        if hidden >= SCAN_MIN_HIDDEN && hidden >= returned.saturating_mul(SCAN_HIDDEN_RATIO) {
            self.scan_waste[ks.slot()].fetch_add(hidden, Ordering::Relaxed);
        }
    }

    /// Notes whether tables replaced by a compaction or a range drop may still be on disk.
    pub fn set_release_pending(&self, pending: bool) {
        self.release_pending.store(pending, Ordering::Relaxed);
    }

    /// Whether tables replaced by a compaction or a range drop may still be on disk.
    pub fn release_pending(&self) -> bool {
        self.release_pending.load(Ordering::Relaxed)
    }

    /// Says whether a mass removal is under way (see [`Ledger::due`]).
    pub fn defer(&self, under_way: bool) {
        self.deferred.store(under_way, Ordering::Relaxed);
    }

    /// Sets the count of expired documents left in `ks` for a compaction (after a restart: the
    /// count the store kept, see `storage::disk`).
    pub fn restore_expired(&self, ks: Keyspace, expired: u64) {
        self.debt[ks.slot()]
            .expired
            .store(expired, Ordering::Relaxed);
    }

    /// A compaction of `ks` begins: what was written so far is what it can remove.
    pub fn compaction_started(&self, ks: Keyspace) {
        self.debt[ks.slot()].take();
        self.scan_waste[ks.slot()].store(0, Ordering::Relaxed);
        self.by_id
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .retain(|(slot, _), _| *slot != ks.slot());
    }

    /// A compaction finished, giving back `bytes_freed` bytes of disk.
    pub fn compaction_finished(&self, bytes_freed: u64) {
        self.compactions.fetch_add(1, Ordering::Relaxed);
        self.bytes_freed.fetch_add(bytes_freed, Ordering::Relaxed);
    }

    /// Forgets the debts of a dropped id (its keys are gone or going).
    pub fn forget(&self, id: u64) {
        self.by_id
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .retain(|(_, i), _| *i != id);
    }

    /// Counters for `serverStatus`.
    pub fn status(&self) -> LedgerStatus {
        LedgerStatus {
            keyspaces: [Keyspace::Docs, Keyspace::Expiry, Keyspace::Index]
                .into_iter()
                .map(|ks| (ks, self.written[ks.slot()].read(), self.debt(ks)))
                .collect(),
            compactions: self.compactions.load(Ordering::Relaxed),
            bytes_freed: self.bytes_freed.load(Ordering::Relaxed),
            scan_waste: [Keyspace::Docs, Keyspace::Expiry, Keyspace::Index]
                .into_iter()
                .map(|ks| (ks, self.scan_waste[ks.slot()].load(Ordering::Relaxed)))
                .collect(),
        }
    }
}

/// The collection or index id a key of `ks` belongs to (its first eight bytes); none for the
/// catalog.
fn key_id(ks: Keyspace, key: &[u8]) -> Option<u64> {
    if ks == Keyspace::Catalog {
        return None;
    }
    key.get(..8)
        .and_then(|b| <[u8; 8]>::try_from(b).ok())
        .map(u64::from_be_bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(id: u64, rest: &[u8]) -> Vec<u8> {
        let mut k = id.to_be_bytes().to_vec();
        k.extend_from_slice(rest);
        k
    }

    #[test]
    fn deletes_and_replacements_are_counted_per_keyspace_and_id() {
        let ledger = Ledger::default();
        let mut batch = Batch::new();
        batch.put(Keyspace::Docs, key(7, b"a"), &b"v"[..]);
        batch.replace(Keyspace::Docs, key(7, b"b"), &b"v"[..]);
        batch.delete(Keyspace::Docs, key(7, b"c"));
        batch.delete(Keyspace::Docs, key(8, b"c"));
        batch.delete(Keyspace::Index, key(9, b"k"));
        batch.delete(Keyspace::Catalog, &b"x"[..]);
        ledger.record(&batch);
        assert_eq!(
            ledger.debt(Keyspace::Docs),
            Debt {
                tombstones: 2,
                superseded: 1,
                expired: 0,
            }
        );
        assert_eq!(ledger.id_debt(Keyspace::Docs, 7).total(), 2);
        assert_eq!(ledger.id_debt(Keyspace::Docs, 8).tombstones, 1);
        assert_eq!(ledger.id_debt(Keyspace::Index, 9).tombstones, 1);
        assert_eq!(ledger.debt(Keyspace::Expiry).total(), 0);

        ledger.compaction_started(Keyspace::Docs);
        assert_eq!(ledger.debt(Keyspace::Docs).total(), 0);
        assert_eq!(ledger.id_debt(Keyspace::Docs, 7).total(), 0);
        assert_eq!(ledger.id_debt(Keyspace::Index, 9).tombstones, 1);
        // What was written since start is kept.
        let status = ledger.status();
        assert_eq!(status.keyspaces[0].1.total(), 3);
        ledger.forget(9);
        assert_eq!(ledger.id_debt(Keyspace::Index, 9).total(), 0);
    }

    #[test]
    fn a_keyspace_is_due_when_its_debt_is_a_large_share_of_it() {
        let ledger = Ledger::default();
        let mut batch = Batch::new();
        for i in 0..MIN_DEBT {
            batch.delete(Keyspace::Docs, key(1, &i.to_be_bytes()));
        }
        ledger.record(&batch);
        assert!(ledger.due(Keyspace::Docs, MIN_DEBT * DEBT_SHARE));
        assert!(!ledger.due(Keyspace::Docs, MIN_DEBT * DEBT_SHARE + 1));
        assert!(!ledger.due(Keyspace::Index, 0));
        ledger.defer(true);
        assert!(!ledger.due(Keyspace::Docs, MIN_DEBT * DEBT_SHARE));
        assert!(ledger.due(Keyspace::Docs, MIN_DEBT));
    }

    #[test]
    fn scans_that_step_over_much_more_than_they_return_make_a_compaction_due() {
        let ledger = Ledger::default();
        let mut batch = Batch::new();
        for i in 0..5_000_u64 {
            batch.delete(Keyspace::Docs, key(1, &i.to_be_bytes()));
        }
        ledger.record(&batch);
        // 5,000 tombstones in a keyspace of 100,000 entries: below the share rule.
        let entries = 100_000;
        assert!(!ledger.due(Keyspace::Docs, entries));
        // A scan that returned as much as it stepped over is not wasted; nor is one of an id
        // without garbage.
        ledger.scanned(Keyspace::Docs, 1, 2_000);
        ledger.scanned(Keyspace::Docs, 2, 0);
        assert_eq!(ledger.status().scan_waste[0].1, 0);
        // Scans returning 10 documents over 5,000 tombstones: 40 of them pay for a compaction
        // of 200,000 scan steps.
        for _ in 0..39 {
            ledger.scanned(Keyspace::Docs, 1, 10);
        }
        assert!(!ledger.due(Keyspace::Docs, entries));
        ledger.scanned(Keyspace::Docs, 1, 10);
        assert!(ledger.due(Keyspace::Docs, entries));
        assert!(!ledger.due(Keyspace::Index, entries));
        ledger.compaction_started(Keyspace::Docs);
        assert!(!ledger.due(Keyspace::Docs, entries));
        assert_eq!(ledger.status().scan_waste[0].1, 0);
        // Fewer than SCAN_MIN_HIDDEN hidden entries are never counted.
        let mut batch = Batch::new();
        for i in 0..SCAN_MIN_HIDDEN - 1 {
            batch.delete(Keyspace::Docs, key(1, &i.to_be_bytes()));
        }
        ledger.record(&batch);
        ledger.scanned(Keyspace::Docs, 1, 0);
        assert_eq!(ledger.status().scan_waste[0].1, 0);
    }
}
