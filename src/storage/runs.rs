//! Runs: the values of one commit's consecutive keys, stored as one engine value.
//!
//! A keyspace that holds runs ([`Keyspace::holds_runs`]: the oplog) keys its values by 8
//! big-endian bytes, and a commit that writes `n` values under the consecutive keys `k`,
//! `k + 1`… `k + n - 1` stores them as one value under `k`: the values one after the other, each
//! starting with its own length (4 little-endian bytes that count themselves, as a BSON
//! document does). One engine write instead of `n`, one memtable node, one journal item, one key
//! to flush and compact: a batch of 100 inserts logs 100 oplog entries, and this is most of what
//! they cost the engine.
//!
//! Readers never see a run: [`range`] and [`get`] show each value under its own key, as if it
//! had been written alone. A value that does not split exactly into such items is one item (so
//! a run of one is the value itself, and a store written before runs reads as it was). Keys of
//! other lengths (the oplog's pre-images: an entry's key followed by 4 more bytes) are kept as
//! they are, and [`range`] places them among a run's items in key order.
//!
//! Only [`Snapshot::stored_range`] shows what is stored: for code that must remove whole runs
//! (the oplog's truncation).

use std::collections::VecDeque;
use std::ops::{Bound, Range};

use bytes::Bytes;

use super::{Entry, Keyspace, Scan, Snapshot, Stamped, StorageResult};

/// The items of a stored value: each starts with its length (4 little-endian bytes, counted),
/// and together they fill it exactly; otherwise the whole value is one item.
pub fn items(value: &[u8]) -> Vec<Range<usize>> {
    #[expect(
        clippy::single_range_in_vec_init,
        reason = "one item: the range of the whole value"
    )]
    let whole = || vec![0..value.len()];
    let mut out = Vec::new();
    let mut at = 0;
    while at < value.len() {
        let Some(head) = value.get(at..at + 4) else {
            return whole();
        };
        let mut len = [0; 4];
        len.copy_from_slice(head);
        let len = u32::from_le_bytes(len) as usize;
        if len < 4 || len > value.len() - at {
            return whole();
        }
        out.push(at..at + len);
        at += len;
    }
    if out.is_empty() {
        return whole();
    }
    out
}

/// The values a batch puts in a keyspace of runs under the stamps its commit gets
/// ([`super::Stamper`]), in order, kept as the run they will be stored as: one buffer that
/// writers append to (a batch of inserts writes its entries straight into it), so that the
/// commit has nothing to copy.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stamps {
    bytes: Vec<u8>,
    values: Vec<StampedAt>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct StampedAt {
    /// Where the value starts in the buffer.
    start: usize,
    /// Where its stamp goes in the buffer.
    ts_at: usize,
    /// What is kept beside it (see [`Stamped::beside`]).
    beside: Vec<(u32, Vec<u8>)>,
}

/// What a commit stores of its [`Stamps`]: the run, where each stamp goes in it, and what is
/// kept beside each value (its index, its number, the bytes).
pub struct RunParts {
    pub bytes: Vec<u8>,
    /// Where each value starts in `bytes`.
    pub starts: Vec<usize>,
    pub ts_at: Vec<usize>,
    pub beside: Vec<(u64, u32, Vec<u8>)>,
}

/// The most bytes one stored run holds: a commit's values past it are stored as several runs
/// (the engine takes values under 4 GiB; a `$out` commits its whole output at once).
pub const MAX_RUN_BYTES: usize = 16 << 20;

impl RunParts {
    /// The runs to store: for each, the index of its first value (its key is that value's
    /// stamp) and its bytes. One run unless the values pass [`MAX_RUN_BYTES`] together.
    pub fn runs(&self) -> Vec<(u64, Range<usize>)> {
        let mut out: Vec<(u64, Range<usize>)> = Vec::new();
        let ends = self
            .starts
            .iter()
            .skip(1)
            .copied()
            .chain([self.bytes.len()]);
        for (i, (&start, end)) in (0_u64..).zip(self.starts.iter().zip(ends)) {
            match out.last_mut() {
                Some((_, run)) if end - run.start <= MAX_RUN_BYTES => run.end = end,
                _ => out.push((i, start..end)),
            }
        }
        if out.is_empty() {
            out.push((0, 0..self.bytes.len()));
        }
        out
    }
}

impl Stamps {
    /// Adds `value`, after those added before.
    pub fn push(&mut self, value: Stamped) {
        let start = self.bytes.len();
        if start == 0 && self.bytes.capacity() < value.value.len() {
            // The first value becomes the buffer: a run of one is not copied.
            self.bytes = value.value;
        } else {
            self.bytes.extend_from_slice(&value.value);
        }
        self.values.push(StampedAt {
            start,
            ts_at: start + value.ts_at,
            beside: value.beside,
        });
    }

    /// Adds a value that `write` appends to the buffer it is given (about `capacity` bytes,
    /// starting with its length as BSON does), returning where its stamp goes, counted from
    /// the value's start.
    pub fn append_with(&mut self, capacity: usize, write: impl FnOnce(&mut Vec<u8>) -> usize) {
        let start = self.bytes.len();
        if self.bytes.capacity() - start < capacity {
            // Room for this value and as much again: a batch's run grows a few times, not at
            // every value.
            self.bytes.reserve(capacity.max(start));
        }
        let ts_at = write(&mut self.bytes);
        self.values.push(StampedAt {
            start,
            ts_at: start + ts_at,
            beside: Vec::new(),
        });
    }

    /// Makes room for `bytes` more.
    pub fn reserve(&mut self, bytes: usize) {
        self.bytes.reserve(bytes);
    }

    /// How many values there are.
    pub fn len(&self) -> usize {
        self.values.len()
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// Each value's size and the size of what is kept beside it, in order.
    pub fn sizes(&self) -> Vec<(u64, u64)> {
        let ends = self
            .values
            .iter()
            .skip(1)
            .map(|v| v.start)
            .chain([self.bytes.len()]);
        self.values
            .iter()
            .zip(ends)
            .map(|(v, end)| {
                let beside: usize = v.beside.iter().map(|(_, b)| b.len()).sum();
                ((end - v.start) as u64, beside as u64)
            })
            .collect()
    }

    /// The values one by one, as they were added.
    pub fn into_values(self) -> Vec<Stamped> {
        let ends: Vec<usize> = self
            .values
            .iter()
            .skip(1)
            .map(|v| v.start)
            .chain([self.bytes.len()])
            .collect();
        self.values
            .into_iter()
            .zip(ends)
            .map(|(v, end)| Stamped {
                value: self.bytes.get(v.start..end).unwrap_or_default().to_vec(),
                ts_at: v.ts_at - v.start,
                beside: v.beside,
            })
            .collect()
    }

    /// The run to store and where its stamps go.
    pub fn into_parts(self) -> RunParts {
        let mut parts = RunParts {
            bytes: self.bytes,
            starts: Vec::with_capacity(self.values.len()),
            ts_at: Vec::with_capacity(self.values.len()),
            beside: Vec::new(),
        };
        for (i, v) in (0..).zip(self.values) {
            parts.starts.push(v.start);
            parts.ts_at.push(v.ts_at);
            parts
                .beside
                .extend(v.beside.into_iter().map(|(n, b)| (i, n, b)));
        }
        parts
    }
}

fn key_of(key: &[u8]) -> Option<u64> {
    <[u8; 8]>::try_from(key).ok().map(u64::from_be_bytes)
}

/// The value at `key` in `ks` of `snapshot`, whose [`Snapshot::stored_range`] and
/// [`Snapshot::stored_get`] show what is stored: an item of a run is found in its run (the
/// engines' [`Snapshot::get`]; a keyspace without runs is read as stored).
pub fn get(snapshot: &dyn Snapshot, ks: Keyspace, key: &[u8]) -> StorageResult<Option<Bytes>> {
    if !ks.holds_runs() {
        return snapshot.stored_get(ks, key);
    }
    if let Some(value) = snapshot.stored_get(ks, key)? {
        if key.len() != 8 {
            return Ok(Some(value));
        }
        return Ok(Some(match items(&value).first() {
            Some(first) if first.len() != value.len() => value.slice(first.clone()),
            _ => value,
        }));
    }
    let Some(wanted) = key_of(key) else {
        return Ok(None);
    };
    match run_holding(snapshot, ks, key)? {
        Some((start, value)) => {
            let at = usize::try_from(wanted - start).unwrap_or(usize::MAX);
            Ok(items(&value).get(at).map(|r| value.slice(r.clone())))
        }
        None => Ok(None),
    }
}

/// The run stored under `key` or the last key before it (8 bytes, or longer: its first 8
/// count) whose items reach it, with that key.
fn run_holding(
    snapshot: &dyn Snapshot,
    ks: Keyspace,
    key: &[u8],
) -> StorageResult<Option<(u64, Bytes)>> {
    let Some(wanted) = key.get(..8).and_then(key_of) else {
        return Ok(None);
    };
    for entry in snapshot.stored_range(ks, Bound::Unbounded, Bound::Included(key), true) {
        let (k, value) = entry?;
        // (Longer keys are kept beside items: the run is before them.)
        let Some(start) = key_of(&k) else {
            continue;
        };
        let n = items(&value).len() as u64;
        return Ok((start.saturating_add(n) > wanted).then_some((start, value)));
    }
    Ok(None)
}

/// The entries of `ks` in `snapshot` with keys in `(lower, upper)`, in key order (or reversed),
/// each item of a run under its own key (the engines' [`Snapshot::range`]; a keyspace without
/// runs is read as stored).
pub fn range<'a>(
    snapshot: &'a dyn Snapshot,
    ks: Keyspace,
    lower: Bound<&[u8]>,
    upper: Bound<&[u8]>,
    reverse: bool,
) -> Scan<'a> {
    if !ks.holds_runs() {
        return snapshot.stored_range(ks, lower, upper, reverse);
    }
    // A run that starts before the lower bound may hold items after it: read from its key.
    let from = match lower {
        Bound::Included(k) | Bound::Excluded(k) => match run_holding(snapshot, ks, k) {
            Ok(Some((start, _))) => Some(start.to_be_bytes()),
            Ok(None) => None,
            Err(e) => return Box::new(std::iter::once(Err(e))),
        },
        Bound::Unbounded => None,
    };
    let stored_lower = match &from {
        Some(start) => Bound::Included(&start[..]),
        None => lower,
    };
    let own = |b: Bound<&[u8]>| match b {
        Bound::Included(k) => Bound::Included(k.to_vec()),
        Bound::Excluded(k) => Bound::Excluded(k.to_vec()),
        Bound::Unbounded => Bound::Unbounded,
    };
    Box::new(Expand {
        stored: snapshot
            .stored_range(ks, stored_lower, upper, reverse)
            .peekable(),
        lower: own(lower),
        upper: own(upper),
        reverse,
        out: VecDeque::new(),
        done: false,
    })
}

struct Expand<'a> {
    stored: std::iter::Peekable<Scan<'a>>,
    lower: Bound<Vec<u8>>,
    upper: Bound<Vec<u8>>,
    reverse: bool,
    /// Entries made from what was read, in the order to give them.
    out: VecDeque<Entry>,
    done: bool,
}

fn above(bound: &Bound<Vec<u8>>, key: &[u8]) -> bool {
    match bound {
        Bound::Included(l) => key >= l.as_slice(),
        Bound::Excluded(l) => key > l.as_slice(),
        Bound::Unbounded => true,
    }
}

fn below(bound: &Bound<Vec<u8>>, key: &[u8]) -> bool {
    match bound {
        Bound::Included(u) => key <= u.as_slice(),
        Bound::Excluded(u) => key < u.as_slice(),
        Bound::Unbounded => true,
    }
}

/// The items of the run `value` stored under `start`, each under its own key.
fn split(start: u64, value: &Bytes) -> Vec<Entry> {
    let ranges = items(value);
    if ranges.len() == 1 {
        return vec![(Bytes::copy_from_slice(&start.to_be_bytes()), value.clone())];
    }
    (start..)
        .zip(ranges)
        .map(|(k, r)| (Bytes::copy_from_slice(&k.to_be_bytes()), value.slice(r)))
        .collect()
}

/// Merges two lists sorted the same way (ascending, or descending when `reverse`).
fn merge(a: Vec<Entry>, b: Vec<Entry>, reverse: bool, out: &mut VecDeque<Entry>) {
    let mut a = a.into_iter().peekable();
    let mut b = b.into_iter().peekable();
    loop {
        let take_a = match (a.peek(), b.peek()) {
            (Some(x), Some(y)) => (x.0 < y.0) != reverse,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (None, None) => return,
        };
        let next = if take_a { a.next() } else { b.next() };
        out.extend(next);
    }
}

impl Expand<'_> {
    /// Reads the next run (with what is kept beside its items) into `out`. False at the end.
    fn fill(&mut self) -> StorageResult<bool> {
        let mut beside = Vec::new();
        loop {
            let Some(entry) = self.stored.next() else {
                // Entries kept beside a run that the range does not reach.
                self.out.extend(beside);
                return Ok(!self.out.is_empty());
            };
            let (key, value) = entry?;
            let Some(start) = key_of(&key) else {
                if self.reverse {
                    // Before its run in this order: kept until the run comes.
                    beside.push((key, value));
                    continue;
                }
                self.out.push_back((key, value));
                return Ok(true);
            };
            let mut run = split(start, &value);
            if self.reverse {
                run.reverse();
            } else {
                // What follows it, up to the next run, is kept beside its items.
                while let Some(Ok((k, _))) = self.stored.peek()
                    && key_of(k).is_none()
                {
                    if let Some(Ok(entry)) = self.stored.next() {
                        beside.push(entry);
                    }
                }
            }
            merge(run, beside, self.reverse, &mut self.out);
            return Ok(true);
        }
    }
}

impl Iterator for Expand<'_> {
    type Item = StorageResult<Entry>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some((key, value)) = self.out.pop_front() {
                let (before, after) = (!above(&self.lower, &key), !below(&self.upper, &key));
                let (skip, end) = if self.reverse {
                    (after, before)
                } else {
                    (before, after)
                };
                if end {
                    self.done = true;
                    self.out.clear();
                    return None;
                }
                if skip {
                    continue;
                }
                return Some(Ok((key, value)));
            }
            if self.done {
                return None;
            }
            match self.fill() {
                Ok(true) => {}
                Ok(false) => {
                    self.done = true;
                    return None;
                }
                Err(e) => {
                    self.done = true;
                    return Some(Err(e));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::{Batch, MemoryStorage, Storage};

    fn item(tag: u8, len: usize) -> Vec<u8> {
        let mut v = vec![tag; len];
        v[..4].copy_from_slice(&u32::try_from(len).unwrap().to_le_bytes());
        v
    }

    fn join(values: &[Vec<u8>]) -> Vec<u8> {
        values.concat()
    }

    fn k(n: u64) -> Vec<u8> {
        n.to_be_bytes().to_vec()
    }

    fn beside(n: u64, i: u32) -> Vec<u8> {
        let mut key = k(n);
        key.extend_from_slice(&i.to_be_bytes());
        key
    }

    /// Runs 10..13 (with a pre-image beside 11), 13 alone, 20..22, as the oplog holds them.
    fn store() -> MemoryStorage {
        let s = MemoryStorage::new();
        let mut b = Batch::new();
        b.put(
            Keyspace::Oplog,
            k(10),
            join(&[item(10, 6), item(11, 5), item(12, 9)]),
        );
        b.put(Keyspace::Oplog, beside(11, 0), b"pre-11".to_vec());
        b.put(Keyspace::Oplog, k(13), item(13, 7));
        b.put(Keyspace::Oplog, k(20), join(&[item(20, 4), item(21, 8)]));
        b.put(Keyspace::Oplog, beside(21, 3), b"pre-21".to_vec());
        s.commit(b).unwrap();
        s
    }

    fn keys(scan: Scan<'_>) -> Vec<Vec<u8>> {
        scan.map(|e| e.unwrap().0.to_vec()).collect()
    }

    #[test]
    fn items_split_exactly_or_not_at_all() {
        let run = join(&[item(1, 5), item(2, 4), item(3, 12)]);
        assert_eq!(items(&run), vec![0..5, 5..9, 9..21]);
        assert_eq!(items(&item(1, 30)), vec![0..30]);
        // A value that is not a run: one item.
        assert_eq!(items(b"plain value"), vec![0..11]);
        assert_eq!(items(&[9, 0, 0, 0, 1, 2]), vec![0..6]);
        assert_eq!(items(b""), vec![0..0]);
        let mut short = run.clone();
        short.pop();
        assert_eq!(items(&short), vec![0..short.len()]);
    }

    #[test]
    fn every_item_reads_under_its_own_key_in_order_either_way() {
        let s = store();
        let snap = s.snapshot();
        let all = vec![
            k(10),
            k(11),
            beside(11, 0),
            k(12),
            k(13),
            k(20),
            k(21),
            beside(21, 3),
        ];
        assert_eq!(
            keys(snap.range(Keyspace::Oplog, Bound::Unbounded, Bound::Unbounded, false)),
            all
        );
        let mut rev = all.clone();
        rev.reverse();
        assert_eq!(
            keys(snap.range(Keyspace::Oplog, Bound::Unbounded, Bound::Unbounded, true)),
            rev
        );
        let values: Vec<_> = snap
            .prefix(Keyspace::Oplog, &[])
            .map(|e| e.unwrap().1.to_vec())
            .collect();
        assert_eq!(values[1], item(11, 5));
        assert_eq!(values[2], b"pre-11".to_vec());
        assert_eq!(values[3], item(12, 9));
        // What is stored: three runs and two pre-images.
        assert_eq!(
            keys(snap.stored_range(Keyspace::Oplog, Bound::Unbounded, Bound::Unbounded, false)),
            vec![k(10), beside(11, 0), k(13), k(20), beside(21, 3)]
        );
    }

    #[test]
    fn bounds_inside_a_run_cut_it() {
        let s = store();
        let snap = s.snapshot();
        let (l, u) = (k(11), k(21));
        assert_eq!(
            keys(snap.range(
                Keyspace::Oplog,
                Bound::Included(&l),
                Bound::Excluded(&u),
                false
            )),
            vec![k(11), beside(11, 0), k(12), k(13), k(20)]
        );
        assert_eq!(
            keys(snap.range(
                Keyspace::Oplog,
                Bound::Excluded(&l),
                Bound::Included(&u),
                true
            )),
            vec![k(21), k(20), k(13), k(12), beside(11, 0)]
        );
        let (l, u) = (k(12), k(12));
        assert_eq!(
            keys(snap.range(
                Keyspace::Oplog,
                Bound::Included(&l),
                Bound::Included(&u),
                false
            )),
            vec![k(12)]
        );
        // After a run's first item.
        let (l, u) = (k(10), k(14));
        assert_eq!(
            keys(snap.range(
                Keyspace::Oplog,
                Bound::Excluded(&l),
                Bound::Excluded(&u),
                false
            )),
            vec![k(11), beside(11, 0), k(12), k(13)]
        );
        // From a pre-image's key (a reader resuming after it).
        let l = beside(11, 0);
        assert_eq!(
            keys(snap.range(
                Keyspace::Oplog,
                Bound::Excluded(&l),
                Bound::Unbounded,
                false
            )),
            vec![k(12), k(13), k(20), k(21), beside(21, 3)]
        );
        let (l, u) = (k(14), k(19));
        assert!(
            keys(snap.range(
                Keyspace::Oplog,
                Bound::Included(&l),
                Bound::Included(&u),
                false
            ))
            .is_empty()
        );
    }

    #[test]
    fn point_reads_find_items_in_their_runs() {
        let s = store();
        let snap = s.snapshot();
        let get = |key: &[u8]| snap.get(Keyspace::Oplog, key).unwrap().map(|v| v.to_vec());
        assert_eq!(get(&k(10)), Some(item(10, 6)));
        assert_eq!(get(&k(12)), Some(item(12, 9)));
        assert_eq!(get(&k(13)), Some(item(13, 7)));
        assert_eq!(get(&k(21)), Some(item(21, 8)));
        assert_eq!(get(&beside(21, 3)), Some(b"pre-21".to_vec()));
        assert_eq!(get(&k(14)), None);
        assert_eq!(get(&k(22)), None);
        assert_eq!(get(&k(9)), None);
        assert_eq!(get(&beside(12, 0)), None);
        assert_eq!(
            s.get(Keyspace::Oplog, &k(11)).unwrap().map(|v| v.to_vec()),
            Some(item(11, 5))
        );
    }

    #[test]
    fn stamps_keep_their_values_in_one_run() {
        let mut stamps = Stamps::default();
        stamps.push(Stamped {
            value: item(1, 10),
            ts_at: 4,
            beside: vec![(0, b"pre".to_vec())],
        });
        stamps.append_with(6, |buf| {
            buf.extend_from_slice(&item(2, 7));
            5
        });
        stamps.push(Stamped {
            value: item(3, 9),
            ts_at: 6,
            beside: Vec::new(),
        });
        assert_eq!(stamps.len(), 3);
        assert_eq!(stamps.sizes(), vec![(10, 3), (7, 0), (9, 0)]);
        let values = stamps.clone().into_values();
        assert_eq!(values[1].value, item(2, 7));
        assert_eq!(values[1].ts_at, 5);
        assert_eq!(values[2].ts_at, 6);
        assert_eq!(values[0].beside, vec![(0, b"pre".to_vec())]);
        let parts = stamps.into_parts();
        assert_eq!(parts.bytes, join(&[item(1, 10), item(2, 7), item(3, 9)]));
        assert_eq!(parts.ts_at, vec![4, 15, 23]);
        assert_eq!(parts.beside, vec![(0, 0, b"pre".to_vec())]);
        assert_eq!(items(&parts.bytes).len(), 3);
    }

    #[test]
    fn a_commit_past_the_most_a_run_holds_is_stored_as_several() {
        let mut stamps = Stamps::default();
        let big = MAX_RUN_BYTES / 3 + 1;
        for tag in 0..7 {
            stamps.push(Stamped {
                value: item(tag, big),
                ts_at: 4,
                beside: Vec::new(),
            });
        }
        let parts = stamps.into_parts();
        let runs = parts.runs();
        // Two values a run (three would pass the most), each run starting at a value.
        let firsts: Vec<u64> = runs.iter().map(|(i, _)| *i).collect();
        assert_eq!(firsts, vec![0, 2, 4, 6]);
        assert!(runs.iter().all(|(_, r)| r.len() <= MAX_RUN_BYTES));
        assert_eq!(runs.last().map(|(_, r)| r.end), Some(parts.bytes.len()));
        // Small commits are one run.
        let mut small = Stamps::default();
        small.push(Stamped {
            value: item(1, 10),
            ts_at: 4,
            beside: Vec::new(),
        });
        small.push(Stamped {
            value: item(2, 10),
            ts_at: 4,
            beside: Vec::new(),
        });
        assert_eq!(small.into_parts().runs(), vec![(0, 0..20)]);
    }

    #[test]
    fn other_keyspaces_are_read_as_stored() {
        let s = MemoryStorage::new();
        let mut b = Batch::new();
        b.put(Keyspace::Docs, k(1), join(&[item(1, 5), item(2, 5)]));
        s.commit(b).unwrap();
        let snap = s.snapshot();
        assert_eq!(
            keys(snap.prefix(Keyspace::Docs, &[])),
            vec![k(1)],
            "only the oplog's keyspace holds runs"
        );
        assert_eq!(snap.get(Keyspace::Docs, &k(2)).unwrap(), None);
    }
}
