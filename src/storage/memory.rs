//! The in-memory engine: one persistent ordered map per keyspace. Snapshots are O(1) clones
//! that share structure with the live maps.

use std::ops::Bound;
use std::sync::RwLock;

use bytes::Bytes;
use imbl::OrdMap;

use super::{Batch, Keyspace, Ledger, Op, Scan, Snapshot, Storage, StorageResult, runs};

type Maps = [OrdMap<Bytes, Bytes>; Keyspace::COUNT];

/// Keeps everything in memory; nothing survives the process.
#[derive(Debug, Default)]
pub struct MemoryStorage {
    maps: RwLock<Maps>,
    ledger: Ledger,
}

impl MemoryStorage {
    /// An empty store.
    pub fn new() -> Self {
        MemoryStorage::default()
    }

    fn read(&self) -> Maps {
        match self.maps.read() {
            Ok(m) => m.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }
}

struct MemorySnapshot {
    maps: Maps,
}

fn bounds(lower: Bound<&[u8]>, upper: Bound<&[u8]>) -> (Bound<Bytes>, Bound<Bytes>) {
    let own = |b: Bound<&[u8]>| match b {
        Bound::Included(k) => Bound::Included(Bytes::copy_from_slice(k)),
        Bound::Excluded(k) => Bound::Excluded(Bytes::copy_from_slice(k)),
        Bound::Unbounded => Bound::Unbounded,
    };
    (own(lower), own(upper))
}

impl Snapshot for MemorySnapshot {
    fn get(&self, ks: Keyspace, key: &[u8]) -> StorageResult<Option<Bytes>> {
        runs::get(self, ks, key)
    }

    fn share(&self) -> Option<Box<dyn Snapshot>> {
        Some(Box::new(MemorySnapshot {
            maps: self.maps.clone(),
        }))
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
        Ok(self.maps[ks.slot()].get(key).cloned())
    }

    fn stored_range(
        &self,
        ks: Keyspace,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        reverse: bool,
    ) -> Scan<'_> {
        let map = &self.maps[ks.slot()];
        // An empty or inverted range yields nothing (imbl panics on inverted bounds).
        let inverted = match (lower, upper) {
            (Bound::Included(l), Bound::Included(u)) => l > u,
            (Bound::Included(l) | Bound::Excluded(l), Bound::Excluded(u))
            | (Bound::Excluded(l), Bound::Included(u)) => l >= u,
            _ => false,
        };
        if inverted {
            return Box::new(std::iter::empty());
        }
        let range = map
            .range(bounds(lower, upper))
            .map(|(k, v)| Ok((k.clone(), v.clone())));
        if reverse {
            Box::new(range.rev())
        } else {
            Box::new(range)
        }
    }
}

impl Storage for MemoryStorage {
    fn snapshot(&self) -> Box<dyn Snapshot> {
        Box::new(MemorySnapshot { maps: self.read() })
    }

    fn commit(&self, batch: Batch) -> StorageResult<()> {
        self.ledger.record(&batch);
        let mut maps = match self.maps.write() {
            Ok(m) => m,
            Err(poisoned) => poisoned.into_inner(),
        };
        for op in batch.ops {
            match op {
                Op::Put(ks, k, v) | Op::Replace(ks, k, v) => {
                    maps[ks.slot()].insert(k, v);
                }
                Op::Delete(ks, k) | Op::DeleteOnce(ks, k) | Op::Expire(ks, k) => {
                    maps[ks.slot()].remove(&k);
                }
            }
        }
        Ok(())
    }

    fn sync(&self) -> StorageResult<()> {
        Ok(())
    }

    fn is_durable(&self) -> bool {
        false
    }

    fn compact(&self, keyspaces: &[Keyspace]) -> StorageResult<u64> {
        // Deleted entries leave nothing behind in memory.
        for ks in keyspaces {
            self.ledger.compaction_started(*ks);
        }
        self.ledger.compaction_finished(0);
        Ok(0)
    }

    fn ledger(&self) -> &Ledger {
        &self.ledger
    }

    fn keyspace_size(&self, ks: Keyspace) -> u64 {
        let maps = match self.maps.read() {
            Ok(m) => m,
            Err(poisoned) => poisoned.into_inner(),
        };
        maps[ks.slot()]
            .iter()
            .map(|(k, v)| (k.len() + v.len()) as u64)
            .sum()
    }

    fn entry_count(&self, ks: Keyspace) -> u64 {
        let maps = match self.maps.read() {
            Ok(m) => m,
            Err(poisoned) => poisoned.into_inner(),
        };
        maps[ks.slot()].len() as u64
    }

    fn approximate_size(&self) -> u64 {
        let maps = self.read();
        maps.iter()
            .flat_map(|m| m.iter())
            .map(|(k, v)| (k.len() + v.len()) as u64)
            .sum()
    }
}
