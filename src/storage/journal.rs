//! Making the journal durable without holding the engine's journal lock for the sync.
//!
//! fjall's `persist(SyncData)` writes its journal buffer out and runs `fdatasync` while holding
//! the journal writer's lock, so every commit that arrives during a sync (about 100 µs here)
//! waits for it, on a runtime worker. [`JournalSync`] splits the two: `persist(Buffer)` writes
//! the buffer out under the lock (microseconds), and the `fdatasync` runs after, on a
//! descriptor of its own for the active journal file, while commits go on appending.
//!
//! Why that covers every commit made before it: a commit returns once its entry is in the
//! journal writer (its buffer or its file); the write-out moves everything buffered into the
//! file that is active at that moment. fjall rotates to a new journal file (`N + 1`, named
//! `{id}.jnl` in the store's directory, created preallocated) only after a full `fsync` of the
//! old one, so an entry written to an older file is already durable; the entries the sync must
//! cover are in the file active at the write-out, or (if a rotation came after it) in a file
//! that rotation made durable. So the sync looks for the newest journal file after the
//! write-out, and syncs that one.
//!
//! If the store's directory holds no journal file by that name (another engine version laying
//! out its files differently), it falls back to fjall's own `persist(SyncData)`, with a warning.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use fjall::{Database, PersistMode};

use super::disk::engine;
use super::{StorageError, StorageResult};

/// The journal of a store, synced outside the engine's lock.
#[derive(Debug)]
pub(super) struct JournalSync {
    dir: PathBuf,
    /// The newest journal file seen: its id and a descriptor for it.
    active: Mutex<Option<(u64, File)>>,
}

/// The id of a journal file's name (`{id}.jnl`).
fn journal_id(name: &str) -> Option<u64> {
    name.strip_suffix(".jnl")?.parse().ok()
}

/// The newest journal file in `dir`: its id.
fn newest(dir: &Path) -> std::io::Result<Option<u64>> {
    let mut best = None;
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        if let Some(id) = entry.file_name().to_str().and_then(journal_id) {
            best = best.max(Some(id));
        }
    }
    Ok(best)
}

fn io(e: &std::io::Error) -> StorageError {
    StorageError::Engine(format!("journal sync: {e}"))
}

impl JournalSync {
    pub(super) fn new(dir: &Path) -> Self {
        JournalSync {
            dir: dir.to_path_buf(),
            active: Mutex::new(None),
        }
    }

    fn path(&self, id: u64) -> PathBuf {
        self.dir.join(format!("{id}.jnl"))
    }

    /// Makes every commit made before the call durable.
    pub(super) fn sync(&self, db: &Database) -> StorageResult<()> {
        db.persist(PersistMode::Buffer).map_err(engine)?;
        let mut active = self
            .active
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if !self.follow(&mut active)? {
            tracing::warn!(
                dir = %self.dir.display(),
                "no journal file found: syncing through the engine"
            );
            return db.persist(PersistMode::SyncData).map_err(engine);
        }
        match active.as_ref() {
            Some((_, file)) => file.sync_data().map_err(|e| io(&e)),
            None => db.persist(PersistMode::SyncData).map_err(engine),
        }
    }

    /// Points `active` at the newest journal file (the one active now, or a newer one: a
    /// rotation since the last sync made the older ones durable); `false` if there is none.
    fn follow(&self, active: &mut Option<(u64, File)>) -> StorageResult<bool> {
        let id = match active.as_ref() {
            Some((id, _)) => {
                let mut id = *id;
                while self.path(id + 1).try_exists().map_err(|e| io(&e))? {
                    id += 1;
                }
                Some(id)
            }
            None => newest(&self.dir).map_err(|e| io(&e))?,
        };
        let Some(id) = id else {
            return Ok(false);
        };
        if active.as_ref().is_none_or(|(held, _)| *held != id) {
            let file = File::options()
                .read(true)
                .open(self.path(id))
                .map_err(|e| io(&e))?;
            *active = Some((id, file));
        }
        Ok(true)
    }

    /// The id of the journal file the last sync covered.
    #[cfg(test)]
    pub(super) fn active_id(&self) -> Option<u64> {
        self.active
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .as_ref()
            .map(|(id, _)| *id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::{Batch, DiskStorage, Keyspace, Storage};

    /// The sync writes to the store's journal file, and what it synced reads back after a
    /// reopen.
    #[test]
    fn the_sync_finds_the_journal() -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        {
            let store = DiskStorage::open(dir.path())?;
            let mut batch = Batch::new();
            batch.put(Keyspace::Docs, &b"a"[..], &b"1"[..]);
            store.commit(batch)?;
            store.sync()?;
            let active = store.journal().active_id().ok_or("no journal synced")?;
            assert_eq!(newest(dir.path())?, Some(active));
        }
        let store = DiskStorage::open(dir.path())?;
        assert_eq!(store.get(Keyspace::Docs, b"a")?.as_deref(), Some(&b"1"[..]));
        Ok(())
    }

    /// After a rotation the sync moves to the newest journal file, past any number of them.
    #[test]
    fn the_sync_follows_rotations() -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let journal = JournalSync::new(dir.path());
        let mut active = None;
        assert!(!journal.follow(&mut active)?);
        std::fs::write(dir.path().join("3.jnl"), b"")?;
        std::fs::write(dir.path().join("version"), b"")?;
        assert!(journal.follow(&mut active)?);
        assert_eq!(active.as_ref().map(|(id, _)| *id), Some(3));
        std::fs::write(dir.path().join("4.jnl"), b"")?;
        std::fs::write(dir.path().join("5.jnl"), b"")?;
        assert!(journal.follow(&mut active)?);
        assert_eq!(active.as_ref().map(|(id, _)| *id), Some(5));
        // An older file removed (fjall deletes journals once flushed) changes nothing.
        std::fs::remove_file(dir.path().join("3.jnl"))?;
        assert!(journal.follow(&mut active)?);
        assert_eq!(active.as_ref().map(|(id, _)| *id), Some(5));
        Ok(())
    }

    #[test]
    fn journal_names() {
        assert_eq!(journal_id("0.jnl"), Some(0));
        assert_eq!(journal_id("17.jnl"), Some(17));
        assert_eq!(journal_id("17.jnl.tmp"), None);
        assert_eq!(journal_id("version"), None);
    }
}
