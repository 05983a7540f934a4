//! The on-disk engine on fjall: one database (one journal) holding a keyspace per
//! [`Keyspace`], so a batch across keyspaces is atomic.

use std::ops::Bound;
use std::path::Path;

use bytes::Bytes;
use fjall::{Database, KeyspaceCreateOptions, PersistMode, Readable};

use super::{Batch, Keyspace, Op, Scan, Snapshot, Storage, StorageError, StorageResult};

/// fjall-backed durable storage.
pub struct DiskStorage {
    db: Database,
    keyspaces: [fjall::Keyspace; 4],
}

impl std::fmt::Debug for DiskStorage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DiskStorage").finish_non_exhaustive()
    }
}

fn engine(e: fjall::Error) -> StorageError {
    match e {
        fjall::Error::Poisoned => StorageError::Poisoned,
        other => StorageError::Engine(other.to_string()),
    }
}

impl DiskStorage {
    /// Opens (recovering) or creates the store in `dir`.
    pub fn open(dir: &Path) -> StorageResult<Self> {
        std::fs::create_dir_all(dir)
            .map_err(|e| StorageError::Engine(format!("cannot create {}: {e}", dir.display())))?;
        let db = Database::builder(dir)
            .manual_journal_persist(true)
            .open()
            .map_err(engine)?;
        let open = |ks: Keyspace| {
            db.keyspace(ks.name(), KeyspaceCreateOptions::default)
                .map_err(engine)
        };
        let keyspaces = [
            open(Keyspace::Catalog)?,
            open(Keyspace::Docs)?,
            open(Keyspace::Expiry)?,
            open(Keyspace::Index)?,
        ];
        Ok(DiskStorage { db, keyspaces })
    }

    fn ks(&self, ks: Keyspace) -> &fjall::Keyspace {
        &self.keyspaces[ks.slot()]
    }
}

struct DiskSnapshot {
    snapshot: fjall::Snapshot,
    keyspaces: [fjall::Keyspace; 4],
}

impl Snapshot for DiskSnapshot {
    fn get(&self, ks: Keyspace, key: &[u8]) -> StorageResult<Option<Bytes>> {
        self.snapshot
            .get(&self.keyspaces[ks.slot()], key)
            .map(|v| v.map(Bytes::from))
            .map_err(engine)
    }

    fn range(
        &self,
        ks: Keyspace,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        reverse: bool,
    ) -> Scan<'_> {
        let iter = self
            .snapshot
            .range::<&[u8], _>(&self.keyspaces[ks.slot()], (lower, upper));
        let map = |g: fjall::Guard| {
            g.into_inner()
                .map(|(k, v)| (Bytes::from(k), Bytes::from(v)))
                .map_err(engine)
        };
        if reverse {
            Box::new(iter.rev().map(map))
        } else {
            Box::new(iter.map(map))
        }
    }
}

impl Storage for DiskStorage {
    fn get(&self, ks: Keyspace, key: &[u8]) -> StorageResult<Option<Bytes>> {
        self.ks(ks)
            .get(key)
            .map(|v| v.map(Bytes::from))
            .map_err(engine)
    }

    fn snapshot(&self) -> Box<dyn Snapshot> {
        Box::new(DiskSnapshot {
            snapshot: self.db.snapshot(),
            keyspaces: self.keyspaces.clone(),
        })
    }

    fn commit(&self, batch: Batch) -> StorageResult<()> {
        let mut wb = self.db.batch();
        for op in batch.ops {
            match op {
                Op::Put(ks, k, v) => wb.insert(self.ks(ks), k, v),
                Op::Delete(ks, k) => wb.remove(self.ks(ks), k),
            }
        }
        wb.commit().map_err(engine)
    }

    fn sync(&self) -> StorageResult<()> {
        self.db.persist(PersistMode::SyncData).map_err(engine)
    }

    fn is_durable(&self) -> bool {
        true
    }

    fn compact(&self, keyspaces: &[Keyspace]) -> StorageResult<()> {
        for ks in keyspaces {
            self.ks(*ks).major_compact().map_err(engine)?;
        }
        Ok(())
    }

    fn approximate_size(&self) -> u64 {
        self.db.disk_space().unwrap_or(0)
    }
}
