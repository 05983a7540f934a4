//! What a transaction reads: the snapshot it started on, with its own pending changes over it.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::{Arc, RwLock};

use bytes::Bytes;

use crate::storage::{Batch, Entry, Keyspace, Op, Scan, Snapshot, StorageResult};

/// How a pending removal is to be written (see [`Op`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Removal {
    Delete,
    DeleteOnce,
    Expire,
}

/// One key's pending change.
#[derive(Debug, Clone)]
struct Pending {
    /// The value, or `None` for a removal.
    value: Option<Bytes>,
    /// The first change of the key was a put of a key not stored (so a removal after it
    /// leaves nothing to write).
    fresh: bool,
    removal: Removal,
}

/// A transaction's changes not committed yet, by keyspace and key.
#[derive(Debug, Default)]
pub struct Overlay {
    keys: [BTreeMap<Bytes, Pending>; Keyspace::COUNT],
    /// How many changes it holds.
    len: usize,
}

fn slot(ks: Keyspace) -> usize {
    Keyspace::ALL.iter().position(|k| *k == ks).unwrap_or(0)
}

impl Overlay {
    /// Adds the changes of `batch` (a statement's, in order).
    pub fn apply(&mut self, batch: Batch) {
        for op in batch.ops {
            let (ks, key, value, put, removal) = match op {
                Op::Put(ks, k, v) => (ks, k, Some(v), true, Removal::Delete),
                Op::Replace(ks, k, v) => (ks, k, Some(v), false, Removal::Delete),
                Op::Delete(ks, k) => (ks, k, None, false, Removal::Delete),
                Op::DeleteOnce(ks, k) => (ks, k, None, false, Removal::DeleteOnce),
                Op::Expire(ks, k) => (ks, k, None, false, Removal::Expire),
            };
            let map = &mut self.keys[slot(ks)];
            if let Some(p) = map.get_mut(&key) {
                p.value = value;
                if p.value.is_none() {
                    p.removal = removal;
                }
            } else {
                self.len += 1;
                map.insert(
                    key,
                    Pending {
                        value,
                        fresh: put,
                        removal,
                    },
                );
            }
        }
    }

    /// Whether it holds no change.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The pending change of `key`, if it has one (its value is `None` for a removal).
    fn get(&self, ks: Keyspace, key: &[u8]) -> Option<&Pending> {
        self.keys[slot(ks)].get(key)
    }

    /// The changes in `(lower, upper)`, in key order or reversed.
    fn range(
        &self,
        ks: Keyspace,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        reverse: bool,
    ) -> Vec<(Bytes, Option<Bytes>)> {
        let map = &self.keys[slot(ks)];
        if map.is_empty() {
            return Vec::new();
        }
        if let (Bound::Included(l) | Bound::Excluded(l), Bound::Included(u) | Bound::Excluded(u)) =
            (lower, upper)
            && l > u
        {
            return Vec::new();
        }
        let range = map.range::<[u8], _>((lower, upper));
        let pick = |(k, p): (&Bytes, &Pending)| (k.clone(), p.value.clone());
        if reverse {
            range.rev().map(pick).collect()
        } else {
            range.map(pick).collect()
        }
    }

    /// The batch that commits these changes.
    pub fn to_batch(&self) -> Batch {
        let mut batch = Batch::new();
        for ks in Keyspace::ALL {
            for (key, p) in &self.keys[slot(ks)] {
                match (&p.value, p.fresh) {
                    (Some(v), true) => batch.put(ks, key.clone(), v.clone()),
                    (Some(v), false) => batch.replace(ks, key.clone(), v.clone()),
                    // Written and removed again: nothing was ever stored.
                    (None, true) => {}
                    (None, false) => match p.removal {
                        Removal::Delete => batch.delete(ks, key.clone()),
                        Removal::DeleteOnce => batch.delete_once(ks, key.clone()),
                        Removal::Expire => batch.expire(ks, key.clone()),
                    },
                }
            }
        }
        batch
    }
}

/// A transaction's read view: `base` with `overlay` over it. Reads see the overlay as it is
/// when they run (a cursor of the transaction sees its later writes too).
pub struct TxnView {
    pub(super) base: Arc<dyn Snapshot>,
    pub(super) overlay: Arc<RwLock<Overlay>>,
}

impl TxnView {
    fn overlay(&self) -> std::sync::RwLockReadGuard<'_, Overlay> {
        self.overlay
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl Snapshot for TxnView {
    fn get(&self, ks: Keyspace, key: &[u8]) -> StorageResult<Option<Bytes>> {
        if let Some(pending) = self.overlay().get(ks, key) {
            return Ok(pending.value.clone());
        }
        self.base.get(ks, key)
    }

    fn range(
        &self,
        ks: Keyspace,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        reverse: bool,
    ) -> Scan<'_> {
        let pending = self.overlay().range(ks, lower, upper, reverse);
        let base = self.base.range(ks, lower, upper, reverse);
        if pending.is_empty() {
            return base;
        }
        Box::new(Merge {
            base: base.peekable(),
            pending: pending.into_iter().peekable(),
            reverse,
        })
    }

    fn scanned(&self, ks: Keyspace, id: u64, returned: u64) {
        self.base.scanned(ks, id, returned);
    }

    fn stored_get(&self, ks: Keyspace, key: &[u8]) -> StorageResult<Option<Bytes>> {
        // (A transaction's own writes never touch the oplog: what is stored is the base's.)
        if ks.holds_runs() {
            return self.base.stored_get(ks, key);
        }
        self.get(ks, key)
    }

    fn stored_range(
        &self,
        ks: Keyspace,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        reverse: bool,
    ) -> Scan<'_> {
        if ks.holds_runs() {
            return self.base.stored_range(ks, lower, upper, reverse);
        }
        self.range(ks, lower, upper, reverse)
    }
}

/// The base's entries with the pending changes merged in: a pending value replaces the
/// base's, a pending removal hides it.
struct Merge<'a> {
    base: std::iter::Peekable<Scan<'a>>,
    pending: std::iter::Peekable<std::vec::IntoIter<(Bytes, Option<Bytes>)>>,
    reverse: bool,
}

impl Iterator for Merge<'_> {
    type Item = StorageResult<Entry>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            let order = match (self.base.peek(), self.pending.peek()) {
                (None, None) => return None,
                (Some(Err(_) | Ok(_)), None) => return self.base.next(),
                (Some(Err(_)), Some(_)) => return self.base.next(),
                (None, Some(_)) => std::cmp::Ordering::Greater,
                (Some(Ok((b, _))), Some((p, _))) => {
                    let o = b.cmp(p);
                    if self.reverse { o.reverse() } else { o }
                }
            };
            match order {
                std::cmp::Ordering::Less => return self.base.next(),
                std::cmp::Ordering::Equal => {
                    self.base.next();
                }
                std::cmp::Ordering::Greater => {}
            }
            if let Some((key, Some(value))) = self.pending.next() {
                return Some(Ok((key, value)));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::{MemoryStorage, Storage};

    fn keys(scan: Scan<'_>) -> Vec<(Vec<u8>, Vec<u8>)> {
        scan.map(|e| {
            let (k, v) = e.unwrap();
            (k.to_vec(), v.to_vec())
        })
        .collect()
    }

    #[test]
    fn the_view_shows_pending_changes_over_the_snapshot() {
        let storage = MemoryStorage::new();
        let mut batch = Batch::new();
        for k in [b"a", b"c", b"e"] {
            batch.put(Keyspace::Docs, k.to_vec(), b"base".to_vec());
        }
        storage.commit(batch).unwrap();
        let mut overlay = Overlay::default();
        let mut changes = Batch::new();
        changes.put(Keyspace::Docs, b"b".to_vec(), b"new".to_vec());
        changes.replace(Keyspace::Docs, b"c".to_vec(), b"changed".to_vec());
        changes.delete(Keyspace::Docs, b"e".to_vec());
        changes.put(Keyspace::Docs, b"f".to_vec(), b"gone".to_vec());
        changes.delete(Keyspace::Docs, b"f".to_vec());
        overlay.apply(changes);
        let view = TxnView {
            base: Arc::from(storage.snapshot()),
            overlay: Arc::new(RwLock::new(overlay)),
        };
        let all = keys(view.range(Keyspace::Docs, Bound::Unbounded, Bound::Unbounded, false));
        let want = vec![
            (b"a".to_vec(), b"base".to_vec()),
            (b"b".to_vec(), b"new".to_vec()),
            (b"c".to_vec(), b"changed".to_vec()),
        ];
        assert_eq!(all, want);
        let back = keys(view.range(Keyspace::Docs, Bound::Unbounded, Bound::Unbounded, true));
        assert_eq!(back, want.into_iter().rev().collect::<Vec<_>>());
        assert_eq!(view.get(Keyspace::Docs, b"e").unwrap(), None);
        assert_eq!(
            &view.get(Keyspace::Docs, b"a").unwrap().unwrap()[..],
            b"base"
        );
        // Another keyspace has no changes: the base as it is.
        assert!(
            keys(view.range(Keyspace::Index, Bound::Unbounded, Bound::Unbounded, false)).is_empty()
        );
        // The commit: a put, a replace, a delete; nothing for the key put and removed again.
        let batch = view.overlay().to_batch();
        assert_eq!(batch.len(), 3);
        assert!(matches!(&batch.ops[0], Op::Put(_, k, _) if &k[..] == b"b"));
        assert!(matches!(&batch.ops[1], Op::Replace(_, k, _) if &k[..] == b"c"));
        assert!(matches!(&batch.ops[2], Op::Delete(_, k) if &k[..] == b"e"));
    }
}
