//! Moving a store of key format 1 or 2 to record ids (key format 3, which format 4 extends), at startup.
//!
//! Formats 1 and 2 stored a document under `collection id · keystring(_id)`, so natural order
//! was `_id` order, and index and expiry entries ended in that keystring. Format 3 stores it
//! under a record id given in insertion order, with an `_id` index leading to it (see
//! `docs/storage.md`). Each collection is copied, in `_id` order (the only order the old store
//! knows), to a new collection id with new index ids, all of its keys written anew from the
//! documents; one commit then makes the copy the collection and marks the old ids dropped, for
//! the background cleanup to remove as it does a dropped collection's keys.
//!
//! A crash at any point loses nothing: the new ids are marked dropped before anything is
//! written under them, so a copy cut short is cleaned up like a dropped collection and made
//! again at the next start; a collection whose copy was committed carries a marker (`0x0A` ·
//! its new id) that says so; the store is marked with format 3, and the markers removed, only
//! once every collection is done.
//!
//! An expired document the purge is done with (its expiry entry gone, its record left for a
//! compaction) is not copied. One the purge has not reached is copied with its expiry entry and
//! all of its index entries, which the purge then removes with it.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use tracing::info;

use super::{
    BUILD_CHUNK, Catalog, Collection, FORMAT_KEY, KEY_FORMAT, corrupt, dropped_key, mark_dropped,
};
use crate::error::CommandError;
use crate::query::keystring;
use crate::storage::{Batch, Keyspace, Snapshot, StorageError, record};

/// Catalog key prefix of the markers of collections already copied by an unfinished move:
/// `0x0A` · the collection's new id (u64).
const MIGRATED_PREFIX: u8 = 0x0A;

fn migrated_key(id: u64) -> [u8; 9] {
    let mut key = [MIGRATED_PREFIX; 9];
    key[1..].copy_from_slice(&id.to_be_bytes());
    key
}

/// Whether the collection with id `id` was already copied by an unfinished move.
pub(super) fn is_migrated(snapshot: &dyn Snapshot, id: u64) -> Result<bool, StorageError> {
    Ok(snapshot
        .get(Keyspace::Catalog, &migrated_key(id))?
        .is_some())
}

impl Catalog {
    /// Moves every collection of a store in key format `from` (1 or 2) to record ids, then
    /// marks the store with the current format.
    pub(super) fn migrate_to_record_ids(&self, from: u32) -> Result<(), CommandError> {
        info!(from, to = KEY_FORMAT, "moving the store to record ids");
        let mut migrated = Vec::new();
        for c in self.all_collections() {
            if is_migrated(&*self.snapshot(), c.id)? {
                migrated.push(c.id);
                continue;
            }
            let copy = self.copy_to_record_ids(&c)?;
            migrated.push(copy.id);
            self.write()
                .insert((copy.db.clone(), copy.name.clone()), Arc::new(copy));
        }
        let mut batch = Batch::new();
        batch.put(
            Keyspace::Catalog,
            FORMAT_KEY.to_vec(),
            KEY_FORMAT.to_be_bytes().to_vec(),
        );
        for id in migrated {
            batch.delete(Keyspace::Catalog, migrated_key(id).to_vec());
        }
        self.store.commit(batch)?;
        info!(
            format = KEY_FORMAT,
            "the store is in the current key format"
        );
        Ok(())
    }

    /// Copies `old`'s documents, in the order of their old keys, to a new collection id with
    /// new index ids, and makes the copy the collection in one commit. Returns the copy.
    fn copy_to_record_ids(&self, old: &Collection) -> Result<Collection, CommandError> {
        let mut indexes = old.indexes.clone();
        let mut batch = Batch::new();
        let fresh = indexes
            .iter()
            .filter(|i| i.has_entries() || !i.is_ts_policy())
            .count();
        let first = self.next_ids(&mut batch, 1 + u64::try_from(fresh).unwrap_or(u64::MAX))?;
        let mut next = first + 1;
        for spec in indexes
            .iter_mut()
            .filter(|i| i.has_entries() || !i.is_ts_policy())
        {
            spec.id = next;
            spec.multikey = Arc::default();
            next += 1;
        }
        // Anything written under the new ids is a dropped collection's until the last commit.
        for id in first..next {
            batch.put(Keyspace::Catalog, dropped_key(id), Vec::new());
        }
        self.store.commit(batch)?;
        let copy = Collection::new(first, &old.db, &old.name, old.options.clone(), indexes);
        let snapshot = self.snapshot();
        let mut batch = Batch::new();
        let mut rid = 0_u64;
        for entry in snapshot.prefix(Keyspace::Docs, &record::collection_prefix(old.id)) {
            let (key, value) = entry?;
            let rec = record::decode(&value)?;
            if rec.expires_ms != record::NEVER {
                // The old expiry key: collection id · instant · the old key's `_id` part.
                let mut old_expiry = key.get(..8).unwrap_or_default().to_vec();
                old_expiry.extend_from_slice(&record::instant_key(rec.expires_ms));
                old_expiry.extend_from_slice(key.get(8..).unwrap_or_default());
                if snapshot.get(Keyspace::Expiry, &old_expiry)?.is_none() {
                    continue;
                }
            }
            let id_key = keystring::encode_id(rec.doc)
                .ok_or_else(|| corrupt(format!("a document of {} has no _id", old.namespace())))?;
            rid += 1;
            batch.put(
                Keyspace::Docs,
                record::doc_key(copy.id, rid).to_vec(),
                value.clone(),
            );
            batch.put(
                Keyspace::Index,
                crate::index::id_entry_key(copy.id, &id_key),
                crate::index::rid_value(rid).to_vec(),
            );
            if rec.expires_ms != record::NEVER {
                batch.put(
                    Keyspace::Expiry,
                    record::expiry_key(copy.id, rec.expires_ms, rid).to_vec(),
                    Vec::new(),
                );
            }
            for fi in &copy.field_indexes {
                let (entries, multikey) = fi.entries(rec.doc, rid)?;
                if multikey {
                    copy.indexes[fi.pos].multikey.store(true, Ordering::Release);
                }
                for (e, v) in entries {
                    batch.put(Keyspace::Index, e, v);
                }
            }
            if batch.len() >= BUILD_CHUNK {
                self.store.commit(std::mem::take(&mut batch))?;
            }
        }
        copy.next_rid.store(rid + 1, Ordering::Relaxed);
        self.put_record(&copy, &mut batch);
        for id in first..next {
            batch.delete(Keyspace::Catalog, dropped_key(id));
        }
        mark_dropped(&mut batch, old);
        batch.put(
            Keyspace::Catalog,
            migrated_key(copy.id).to_vec(),
            Vec::new(),
        );
        self.store.commit(batch)?;
        info!(namespace = %copy.namespace(), documents = rid, "moved to record ids");
        Ok(copy)
    }
}

#[cfg(test)]
mod tests {
    use std::ops::Bound::Unbounded;

    use bson::rawdoc;

    use super::*;
    use crate::storage::{GroupCommit, MemoryStorage};

    /// A store as key format 2 left it: collection 5 (`db.c`, an index on `a`, id 6) with
    /// documents stored under their `_id` keystrings (given out of order), one expiring later,
    /// one expired and purged (no expiry entry), and the marker of format 2.
    fn format_2_store() -> Arc<GroupCommit> {
        let store = Arc::new(GroupCommit::new(Arc::new(MemoryStorage::new())));
        let record = rawdoc! {
            "db": "db", "name": "c", "id": 5_i64, "options": {},
            "indexes": [{ "v": 2, "key": { "a": 1 }, "name": "a_1" }],
            "indexState": [{ "id": 6_i64, "multikey": false }],
        };
        let mut batch = Batch::new();
        batch.put(
            Keyspace::Catalog,
            super::super::record_key("db", "c"),
            record.into_bytes(),
        );
        batch.put(
            Keyspace::Catalog,
            super::super::NEXT_ID_KEY.to_vec(),
            7_u64.to_be_bytes().to_vec(),
        );
        batch.put(Keyspace::Catalog, FORMAT_KEY.to_vec(), vec![0, 0, 0, 2]);
        for (id, a, expires) in [
            (3, 30, record::NEVER),
            (1, 10, 9_000_000_000_000),
            (2, 20, 5),
            (4, 40, record::NEVER),
        ] {
            let doc = rawdoc! { "_id": id, "a": [a, a + 1] };
            let id_key = keystring::to_key(bson::RawBsonRef::Int32(id));
            let mut key = 5_u64.to_be_bytes().to_vec();
            key.extend_from_slice(&id_key);
            batch.put(Keyspace::Docs, key, record::encode(0, expires, &doc));
            if expires == 9_000_000_000_000 {
                let mut e = 5_u64.to_be_bytes().to_vec();
                e.extend_from_slice(&record::instant_key(expires));
                e.extend_from_slice(&id_key);
                batch.put(Keyspace::Expiry, e, Vec::new());
            }
        }
        store.commit(batch).expect("commit");
        store
    }

    fn keys(store: &GroupCommit, ks: Keyspace) -> Vec<Vec<u8>> {
        store
            .storage()
            .snapshot()
            .range(ks, Unbounded, Unbounded, false)
            .map(|e| e.expect("read").0.to_vec())
            .collect()
    }

    #[test]
    fn a_format_2_store_moves_to_record_ids_in_id_order() {
        let store = format_2_store();
        let catalog = Catalog::open(Arc::clone(&store)).expect("opens");
        let c = catalog.get("db", "c").expect("collection");
        assert_eq!((c.id, c.indexes[0].id), (7, 8));
        assert!(c.indexes[0].is_multikey());
        let snapshot = store.storage().snapshot();
        // Documents 1, 3, 4 (2 was expired and purged), in `_id` order, under record ids 1–3.
        let docs: Vec<(Vec<u8>, i32)> = snapshot
            .prefix(Keyspace::Docs, &record::collection_prefix(7))
            .map(|e| {
                let (k, v) = e.expect("read");
                let id = record::decode(&v).expect("record").doc.get_i32("_id");
                (k.to_vec(), id.expect("_id"))
            })
            .collect();
        let expected: Vec<(Vec<u8>, i32)> = [1, 3, 4]
            .into_iter()
            .zip(1..)
            .map(|(id, rid)| (record::doc_key(7, rid).to_vec(), id))
            .collect();
        assert_eq!(docs, expected);
        for (id, rid) in [(1, 1), (3, 2), (4, 3)] {
            let entry =
                crate::index::id_entry_key(7, &keystring::to_key(bson::RawBsonRef::Int32(id)));
            let value = snapshot.get(Keyspace::Index, &entry).expect("read");
            assert_eq!(
                value.as_deref(),
                Some(&crate::index::rid_value(rid)[..]),
                "_id {id}"
            );
        }
        // Two keys a document on `a`, for three documents; the expiry entry of document 1.
        assert_eq!(
            snapshot
                .prefix(Keyspace::Index, &8_u64.to_be_bytes())
                .count(),
            6
        );
        assert_eq!(
            snapshot
                .prefix(Keyspace::Expiry, &7_u64.to_be_bytes())
                .map(|e| e.expect("read").0.to_vec())
                .collect::<Vec<_>>(),
            vec![record::expiry_key(7, 9_000_000_000_000, 1).to_vec()]
        );
        // The old ids are dropped (their keys go in the background); the store is in format 3.
        for id in [5, 6] {
            assert!(
                snapshot
                    .get(Keyspace::Catalog, &dropped_key(id))
                    .expect("read")
                    .is_some()
            );
        }
        for id in [7, 8] {
            assert!(
                snapshot
                    .get(Keyspace::Catalog, &dropped_key(id))
                    .expect("read")
                    .is_none()
            );
        }
        assert_eq!(
            snapshot
                .get(Keyspace::Catalog, &FORMAT_KEY)
                .expect("read")
                .as_deref(),
            Some(&KEY_FORMAT.to_be_bytes()[..])
        );
        assert!(
            !keys(&store, Keyspace::Catalog)
                .iter()
                .any(|k| k[0] == MIGRATED_PREFIX)
        );
        // New documents go on after the copied ones; a second open changes nothing.
        assert_eq!(c.new_rid(), 4);
        drop(catalog);
        let before = keys(&store, Keyspace::Docs);
        let catalog = Catalog::open(Arc::clone(&store)).expect("opens again");
        assert_eq!(catalog.get("db", "c").expect("collection").id, 7);
        assert_eq!(keys(&store, Keyspace::Docs), before);
    }

    /// A move cut short after some collections were copied goes on with the others at the
    /// next start, and leaves the copied ones as they are.
    #[test]
    fn a_move_cut_short_goes_on() {
        let store = format_2_store();
        let catalog = Catalog::open(Arc::clone(&store)).expect("opens");
        drop(catalog);
        // As if the crash came before the last commit: format 2 again, the marker of the copy
        // still there.
        let mut batch = Batch::new();
        batch.put(Keyspace::Catalog, FORMAT_KEY.to_vec(), vec![0, 0, 0, 2]);
        batch.put(Keyspace::Catalog, migrated_key(7).to_vec(), Vec::new());
        store.commit(batch).expect("commit");
        let catalog = Catalog::open(Arc::clone(&store)).expect("opens");
        let c = catalog.get("db", "c").expect("collection");
        assert_eq!(c.id, 7, "not copied twice");
        assert_eq!(c.new_rid(), 4, "record ids go on after the stored ones");
        assert!(
            !keys(&store, Keyspace::Catalog)
                .iter()
                .any(|k| k[0] == MIGRATED_PREFIX)
        );
    }
}
