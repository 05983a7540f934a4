//! Hot keys: keys rewritten so often that their superseded versions pile up in the memtables.
//!
//! fjall's scans step through every version of a key still held in a memtable (a read of the
//! newest version drains the older ones behind it); point reads seek straight to the newest
//! visible version. Two things bound what a scan pays for a key rewritten thousands of times
//! (an `$inc` loop on one document):
//! - [`VersionChains`] counts the writes each key takes in the active memtable; past
//!   [`MAX_VERSION_CHAIN`] the storage rotates the memtable, so that its flush keeps only the
//!   versions a snapshot can still read. A rotation waits for the previous flush, and flushes
//!   queue behind the engine's compactions: a chain still grows to thousands of versions while
//!   one is pending, and whatever the last burst left stays until the next rotation.
//! - [`HotKeys`] remembers the keys written at least [`HOT_WRITES`] times since a rotation, up to
//!   [`MAX_HOT_KEYS`] a keyspace, until the memtables holding those writes are flushed. A scan
//!   whose range holds one splits around it ([`split_range`]): the range up to the key, a point
//!   read of the key, the range after it. The two ranges stop before and start after all of the
//!   key's versions (a seek each), so the scan never walks them. A key wrongly taken for hot
//!   costs one extra seek; the answer is the same either way (one snapshot).

use std::collections::BTreeMap;
use std::hash::{BuildHasher, BuildHasherDefault, DefaultHasher};
use std::ops::Bound;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};

use bytes::Bytes;
use fjall::{AbstractTree, Readable};

use super::{Scan, StorageError, StorageResult};

/// Writes a key may take in the active memtable before the memtable is rotated, so that its
/// flush drops the superseded versions (see `docs/storage.md`, "Version chains").
pub const MAX_VERSION_CHAIN: u32 = 256;

/// Writes of one key since the last rotation that make it hot: a walk over this many versions
/// costs about what a split costs (a seek into each memtable and table, and a point read).
pub const HOT_WRITES: u32 = 32;

/// Hot keys remembered per keyspace; past this, the one marked longest ago is forgotten.
pub const MAX_HOT_KEYS: usize = 64;

/// Counters of writes per key, hashed into a fixed number of buckets: a bucket's count is at
/// least the number of versions of any key that falls into it, so a key whose chain reaches
/// [`MAX_VERSION_CHAIN`] is never missed; collisions only make a rotation come earlier. With
/// 65,536 buckets, distinct keys need about 16M writes to fill one, more than a memtable holds.
pub struct VersionChains {
    buckets: Box<[AtomicU32]>,
}

const CHAIN_BUCKETS: usize = 1 << 16;

impl VersionChains {
    pub fn new() -> Self {
        VersionChains {
            buckets: (0..CHAIN_BUCKETS).map(|_| AtomicU32::new(0)).collect(),
        }
    }

    /// Counts one write of `key`: the count of its bucket since the last reset, this one
    /// included.
    pub fn record(&self, key: &[u8]) -> u32 {
        let hash = BuildHasherDefault::<DefaultHasher>::default().hash_one(key);
        #[expect(
            clippy::cast_possible_truncation,
            reason = "masked to the bucket count"
        )]
        let slot = (hash as usize) & (CHAIN_BUCKETS - 1);
        self.buckets
            .get(slot)
            .map_or(0, |b| b.fetch_add(1, Ordering::Relaxed).saturating_add(1))
    }

    pub fn reset(&self) {
        for b in &self.buckets {
            b.store(0, Ordering::Relaxed);
        }
    }
}

/// The hot keys of one keyspace, each with the id of the active memtable when it was last
/// marked: its versions are all flushed once no sealed memtable is left and the active one is
/// newer.
#[derive(Default)]
pub struct HotKeys {
    keys: Mutex<BTreeMap<Bytes, u64>>,
    /// `keys.len()`, read without the lock by every scan.
    len: AtomicUsize,
}

impl HotKeys {
    /// Marks `key` hot, written into the memtable `memtable`.
    pub fn mark(&self, key: &Bytes, memtable: u64) {
        let Ok(mut keys) = self.keys.lock() else {
            return;
        };
        if !keys.contains_key(key) && keys.len() >= MAX_HOT_KEYS {
            let oldest = keys
                .iter()
                .min_by_key(|(_, id)| **id)
                .map(|(k, _)| k.clone());
            if let Some(oldest) = oldest {
                keys.remove(&oldest);
            }
        }
        keys.insert(key.clone(), memtable);
        self.len.store(keys.len(), Ordering::Relaxed);
    }

    /// The hot keys inside `(lower, upper)`, in key order, forgetting those whose memtables are
    /// all flushed (`sealed` memtables pending, `active` the active memtable's id).
    pub(super) fn within(
        &self,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        tree: impl FnOnce() -> (usize, u64),
    ) -> Vec<Bytes> {
        if self.len.load(Ordering::Relaxed) == 0 {
            return Vec::new();
        }
        let Ok(mut keys) = self.keys.lock() else {
            return Vec::new();
        };
        let (sealed, active) = tree();
        if sealed == 0 {
            keys.retain(|_, id| *id >= active);
            self.len.store(keys.len(), Ordering::Relaxed);
        }
        keys.keys()
            .filter(|k| above(lower, k) && below(upper, k))
            .cloned()
            .collect()
    }
}

fn above(lower: Bound<&[u8]>, key: &[u8]) -> bool {
    match lower {
        Bound::Included(l) => key >= l,
        Bound::Excluded(l) => key > l,
        Bound::Unbounded => true,
    }
}

fn below(upper: Bound<&[u8]>, key: &[u8]) -> bool {
    match upper {
        Bound::Included(u) => key <= u,
        Bound::Excluded(u) => key < u,
        Bound::Unbounded => true,
    }
}

/// Whether `(lower, upper)` holds no key at all.
fn is_empty(lower: &Bound<Bytes>, upper: &Bound<Bytes>) -> bool {
    match (lower, upper) {
        (Bound::Included(l), Bound::Included(u)) => l > u,
        (Bound::Included(l) | Bound::Excluded(l), Bound::Excluded(u) | Bound::Included(u)) => {
            l >= u
        }
        _ => false,
    }
}

fn owned(b: Bound<&[u8]>) -> Bound<Bytes> {
    b.map(Bytes::copy_from_slice)
}

/// A piece of a split scan.
enum Segment {
    Range(Bound<Bytes>, Bound<Bytes>),
    Point(Bytes),
}

/// The entries of `keyspace` in `(lower, upper)` as `snapshot` sees them, in key order (or
/// reversed), split around the keyspace's hot keys (see the module's documentation).
pub fn split_range<'a>(
    snapshot: &'a fjall::Snapshot,
    keyspace: &'a fjall::Keyspace,
    hot: &HotKeys,
    lower: Bound<&[u8]>,
    upper: Bound<&[u8]>,
    reverse: bool,
) -> Scan<'a> {
    let keys = hot.within(lower, upper, || {
        (
            keyspace.sealed_memtable_count(),
            keyspace.tree.active_memtable().id(),
        )
    });
    if keys.is_empty() {
        return plain_range(snapshot, keyspace, owned(lower), owned(upper), reverse);
    }
    let mut segments = Vec::with_capacity(2 * keys.len() + 1);
    let mut from = owned(lower);
    for key in keys {
        let to = Bound::Excluded(key.clone());
        if !is_empty(&from, &to) {
            segments.push(Segment::Range(from, to));
        }
        from = Bound::Excluded(key.clone());
        segments.push(Segment::Point(key));
    }
    let upper = owned(upper);
    if !is_empty(&from, &upper) {
        segments.push(Segment::Range(from, upper));
    }
    // Taken from the back.
    if !reverse {
        segments.reverse();
    }
    Box::new(SplitScan {
        snapshot,
        keyspace,
        segments,
        current: None,
        reverse,
    })
}

/// One range of the engine, without splitting.
fn plain_range<'a>(
    snapshot: &'a fjall::Snapshot,
    keyspace: &'a fjall::Keyspace,
    lower: Bound<Bytes>,
    upper: Bound<Bytes>,
    reverse: bool,
) -> Scan<'a> {
    let iter = snapshot.range::<Bytes, _>(keyspace, (lower, upper));
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

fn engine(e: fjall::Error) -> StorageError {
    super::disk::engine(e)
}

struct SplitScan<'a> {
    snapshot: &'a fjall::Snapshot,
    keyspace: &'a fjall::Keyspace,
    /// What is left, the next piece last.
    segments: Vec<Segment>,
    current: Option<Scan<'a>>,
    reverse: bool,
}

impl Iterator for SplitScan<'_> {
    type Item = StorageResult<(Bytes, Bytes)>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(entry) = self.current.as_mut().and_then(Iterator::next) {
                return Some(entry);
            }
            self.current = None;
            match self.segments.pop()? {
                Segment::Range(lower, upper) => {
                    self.current = Some(plain_range(
                        self.snapshot,
                        self.keyspace,
                        lower,
                        upper,
                        self.reverse,
                    ));
                }
                Segment::Point(key) => match self.snapshot.get(self.keyspace, &key) {
                    Ok(Some(value)) => return Some(Ok((key, Bytes::from(value)))),
                    Ok(None) => {}
                    Err(e) => return Some(Err(engine(e))),
                },
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{HotKeys, MAX_HOT_KEYS, VersionChains};
    use bytes::Bytes;
    use std::ops::Bound;

    #[test]
    fn chains_count_writes_until_reset() {
        let chains = VersionChains::new();
        for i in 1..=10 {
            assert_eq!(chains.record(b"hot"), i);
        }
        chains.reset();
        assert_eq!(chains.record(b"hot"), 1);
    }

    #[test]
    fn hot_keys_are_bounded_and_forgotten_once_flushed() {
        let hot = HotKeys::default();
        for i in 0..MAX_HOT_KEYS + 10 {
            let id = u64::try_from(i).unwrap_or(u64::MAX);
            hot.mark(&Bytes::from(i.to_be_bytes().to_vec()), id);
        }
        let all = hot.within(Bound::Unbounded, Bound::Unbounded, || (1, 0));
        assert_eq!(all.len(), MAX_HOT_KEYS);
        // The oldest marks were forgotten first.
        assert_eq!(all[0], Bytes::from(10_usize.to_be_bytes().to_vec()));
        // A pending flush keeps them all; without one, those older than the active memtable go.
        assert_eq!(
            hot.within(Bound::Unbounded, Bound::Unbounded, || (0, 70))
                .len(),
            MAX_HOT_KEYS + 10 - 70
        );
        assert!(
            hot.within(Bound::Unbounded, Bound::Unbounded, || (0, 1000))
                .is_empty()
        );
    }

    #[test]
    fn hot_keys_within_bounds() {
        let hot = HotKeys::default();
        for k in [&b"a"[..], b"b", b"c"] {
            hot.mark(&Bytes::from_static(k), 5);
        }
        let within = |lo: Bound<&[u8]>, hi: Bound<&[u8]>| {
            hot.within(lo, hi, || (1, 0))
                .into_iter()
                .map(|k| k.to_vec())
                .collect::<Vec<_>>()
        };
        assert_eq!(
            within(Bound::Included(b"a"), Bound::Excluded(b"c")),
            vec![b"a".to_vec(), b"b".to_vec()]
        );
        assert_eq!(
            within(Bound::Excluded(b"a"), Bound::Included(b"c")),
            vec![b"b".to_vec(), b"c".to_vec()]
        );
        // An inverted range holds none.
        assert!(within(Bound::Included(b"c"), Bound::Excluded(b"a")).is_empty());
    }
}
