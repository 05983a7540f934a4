//! Cursors: what `find` and `aggregate` leave open for `getMore`, and the registry that owns
//! them, expires idle ones (10 minutes, MongoDB's `cursorTimeoutMillis`) and kills them.
//!
//! A cursor over a collection holds the storage snapshot it started on, so every batch reads
//! the same consistent state, and resumes from the key after the last one it returned; after
//! [`SNAPSHOT_HISTORY_WINDOW`] it resumes in a new snapshot instead.

use std::collections::{HashMap, HashSet, VecDeque};
use std::hash::{BuildHasher, Hasher};
use std::ops::Bound;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bson::{RawDocument, RawDocumentBuf};
use bytes::Bytes;

use crate::error::{CommandError, CommandResult, ErrorCode};
use crate::index::split_entry;
use crate::query::filter::Filter;
use crate::query::keystring;
use crate::query::plan::{Access, FieldCheck, KeyRange};
use crate::query::projection::Projection;
use crate::storage::{Keyspace, Snapshot, prefix_end, record};

/// Idle time after which a cursor is closed (`cursorTimeoutMillis`).
pub const CURSOR_TIMEOUT: Duration = Duration::from_secs(600);
/// The most document bytes one reply batch carries (MongoDB's 16 MiB).
pub const MAX_BATCH_BYTES: usize = 16 * 1024 * 1024;
/// An index scan of one key value that returns at most this many documents is read on the
/// runtime rather than handed to a blocking thread (see [`Source::is_point`]).
const SMALL_INDEX_READ: u64 = 4;
/// `find`'s first batch when no `batchSize` is given.
pub const DEFAULT_FIRST_BATCH: usize = 101;
/// How long a cursor reads from the snapshot it took (mongod's default
/// `minSnapshotHistoryWindowInSeconds`): after that, its next batch comes from a new one, as
/// mongod's reads yield and go on in a newer state. A snapshot keeps every version and
/// tombstone it can read from being compacted away; an idle cursor (up to
/// [`CURSOR_TIMEOUT`]) must not hold them for longer than this.
pub const SNAPSHOT_HISTORY_WINDOW: Duration = Duration::from_secs(300);

/// A scan of one collection's documents in natural order (record ids: insertion order).
pub struct Scan {
    /// The read view every batch comes from.
    pub snapshot: Box<dyn Snapshot>,
    /// Where the next batch starts.
    pub lower: Bound<Vec<u8>>,
    /// Where the scan ends.
    pub upper: Bound<Vec<u8>>,
    /// Documents that do not match are skipped.
    pub filter: Option<Filter>,
    /// Applied to each returned document.
    pub projection: Option<Projection>,
    /// Matching documents still to skip.
    pub skip: u64,
    /// Documents still to return, if limited.
    pub remaining: Option<u64>,
    /// The instant reads are judged at (expiry).
    pub now_ms: i64,
    /// Whether the scan has reached its end.
    pub done: bool,
    /// Whether it runs from the highest key down (`$natural: -1`).
    pub reverse: bool,
    /// Documents read so far (explain's `docsExamined`).
    pub examined: u64,
    /// What stops the scan (shutdown, the command's `maxTimeMS`), checked as it reads.
    pub interrupt: Option<crate::interrupt::Interrupt>,
    /// The collection whose documents the scan reads all of, from the first key (the last,
    /// reversed), if it does: told to the store when the scan reaches the end
    /// ([`Snapshot::scanned`]: what it stepped over may make a compaction due). `None` for a
    /// scan of part of the keys.
    pub whole: Option<u64>,
    /// The keyspace it reads: [`Keyspace::Docs`] (records), or [`Keyspace::Oplog`]
    /// (`local.oplog.rs`: plain documents under their times, which never expire).
    pub keyspace: Keyspace,
    /// Whether a caller reading it to the end may read its two halves on two threads (see
    /// `cursor::split`).
    pub split: bool,
}

/// A document read from a collection: its record id, the document, its expiry instant.
pub type Record = (u64, RawDocumentBuf, i64);

/// The documents a batch started with on the runtime, for the rest of it to go on from
/// ([`Source::start_batch`], [`Source::finish_batch`]).
#[derive(Debug, Default)]
pub struct Partial(Vec<Record>);

/// How many entries a collection scan reads on the runtime before the rest of its batch is
/// handed to a thread that may block: a small collection (or the end of a large one) is
/// answered without the hand-off, which costs more than reading this many (~0.3 µs each).
pub const INLINE_EXAMINE: u64 = 64;

/// Documents with their expiry instants, their record ids left out.
fn without_rids(records: Vec<Record>) -> Vec<(RawDocumentBuf, i64)> {
    records.into_iter().map(|(_, d, e)| (d, e)).collect()
}

/// The record id of a `docs` key.
fn rid_of(key: &[u8]) -> CommandResult<u64> {
    record::rid_of_doc_key(key).ok_or_else(|| CommandError::internal("a document key too short"))
}

/// Every this many entries read, a scan checks whether shutdown has begun.
const INTERRUPT_CHECK_EVERY: u64 = 1024;

/// The command's interruption (shutdown, `maxTimeMS`), looked at every
/// [`INTERRUPT_CHECK_EVERY`] entries (`read` is how many were read so far).
fn interrupted(interrupt: Option<&crate::interrupt::Interrupt>, read: u64) -> CommandResult<()> {
    match interrupt {
        Some(i) if read.is_multiple_of(INTERRUPT_CHECK_EVERY) => i.check(),
        _ => Ok(()),
    }
}

impl Scan {
    /// Reads the next batch: at most `max_docs` documents and about `max_bytes` bytes (at least
    /// one document if any is left).
    pub fn next_batch(
        &mut self,
        max_docs: usize,
        max_bytes: usize,
    ) -> CommandResult<Vec<RawDocumentBuf>> {
        Ok(self
            .next_entries(max_docs, max_bytes)?
            .into_iter()
            .map(|(d, _)| d)
            .collect())
    }

    /// Like [`Scan::next_batch`], with each document's expiry instant.
    pub fn next_entries(
        &mut self,
        max_docs: usize,
        max_bytes: usize,
    ) -> CommandResult<Vec<(RawDocumentBuf, i64)>> {
        Ok(without_rids(self.next_records(max_docs, max_bytes)?))
    }

    /// Like [`Scan::next_entries`], with each document's record id first.
    pub fn next_records(
        &mut self,
        max_docs: usize,
        max_bytes: usize,
    ) -> CommandResult<Vec<Record>> {
        let mut out = Vec::new();
        self.fill(&mut out, max_docs, max_bytes, u64::MAX)?;
        Ok(out)
    }

    /// Goes on with the batch `out` (at most `max_docs` documents and about `max_bytes` bytes
    /// in all), reading at most `examine` entries: `true` if it stopped for that budget, with
    /// more to read toward the batch (the next call goes on where it stopped).
    ///
    /// A batch with no limit but its size and no budget (a `getMore` without `batchSize`, on a
    /// thread that may block) may be read as two halves on two threads (`cursor::split`).
    pub fn fill(
        &mut self,
        out: &mut Vec<Record>,
        max_docs: usize,
        max_bytes: usize,
        examine: u64,
    ) -> CommandResult<bool> {
        if max_docs == usize::MAX
            && examine == u64::MAX
            && let Some(more) = self.fill_split(out, max_bytes)?
        {
            return Ok(more);
        }
        self.fill_here(out, max_docs, max_bytes, examine)
    }

    /// [`Scan::fill`] on this thread alone.
    fn fill_here(
        &mut self,
        out: &mut Vec<Record>,
        max_docs: usize,
        max_bytes: usize,
        examine: u64,
    ) -> CommandResult<bool> {
        let mut bytes: usize = out.iter().map(|(_, d, _)| d.as_bytes().len()).sum();
        if self.done || out.len() >= max_docs {
            return Ok(false);
        }
        // An oplog scan resumes only after an entry (see below), never between an entry and
        // its pre-image: no budget there.
        let examine = if self.keyspace == Keyspace::Oplog {
            u64::MAX
        } else {
            examine.max(1)
        };
        // An oplog scan whose last entry was truncated (seen once its snapshot is renewed) has
        // lost its place, as in mongod's capped collections.
        if self.keyspace == Keyspace::Oplog
            && let Bound::Excluded(last) = if self.reverse {
                &self.upper
            } else {
                &self.lower
            }
            && out.is_empty()
            && self.snapshot.get(Keyspace::Oplog, last)?.is_none()
        {
            let id = <[u8; 8]>::try_from(last.as_slice()).map_or(0, i64::from_be_bytes);
            return Err(CommandError::new(
                ErrorCode::CappedPositionLost,
                format!(
                    "CollectionScan died due to position in capped collection being deleted. \
                     Last seen record id: RecordId({id})"
                ),
            ));
        }
        if let (Bound::Included(lo), Bound::Included(hi)) = (&self.lower, &self.upper)
            && lo == hi
        {
            // One key (a filter that pins `_id`): a point read, far cheaper than a range.
            self.done = true;
            let Some(value) = self.snapshot.get(self.keyspace, lo)? else {
                return Ok(false);
            };
            self.examined += 1;
            if let Some((doc, expires)) = Self::admit(
                self.filter.as_ref(),
                self.projection.as_ref(),
                &mut self.skip,
                self.now_ms,
                &value,
                self.keyspace,
            )? {
                out.push((self.rid(lo)?, doc, expires));
                if let Some(r) = &mut self.remaining {
                    *r -= 1;
                }
            }
            return Ok(false);
        }
        let lower = match &self.lower {
            Bound::Included(k) => Bound::Included(k.as_slice()),
            Bound::Excluded(k) => Bound::Excluded(k.as_slice()),
            Bound::Unbounded => Bound::Unbounded,
        };
        let upper = match &self.upper {
            Bound::Included(k) => Bound::Included(k.as_slice()),
            Bound::Excluded(k) => Bound::Excluded(k.as_slice()),
            Bound::Unbounded => Bound::Unbounded,
        };
        let mut last_key: Option<Bytes> = None;
        let mut restart_at: Option<Bytes> = None;
        let mut exhausted = true;
        let mut over_budget = false;
        let mut read = 0_u64;
        let mut entries = self
            .snapshot
            .range(self.keyspace, lower, upper, self.reverse);
        loop {
            if read >= examine {
                over_budget = true;
                exhausted = false;
                break;
            }
            let Some(entry) = entries.next() else { break };
            read += 1;
            let (key, value) = entry?;
            // (Pre-images are kept in the oplog's keyspace beside their entries.)
            if self.keyspace == Keyspace::Oplog && key.len() != 8 {
                last_key = Some(key);
                continue;
            }
            let rid = self.rid(&key)?;
            last_key = Some(key);
            self.examined += 1;
            interrupted(self.interrupt.as_ref(), self.examined)?;
            let Some((doc, expires_ms)) = Self::admit(
                self.filter.as_ref(),
                self.projection.as_ref(),
                &mut self.skip,
                self.now_ms,
                &value,
                self.keyspace,
            )?
            else {
                continue;
            };
            let size = doc.as_bytes().len();
            if !out.is_empty() && bytes + size > max_bytes {
                // This one starts the next batch: resume at it, not after it. The next batch
                // examines it again; it counts once (mongod keeps it for the next batch).
                restart_at = last_key.take();
                self.examined -= 1;
                exhausted = false;
                break;
            }
            bytes += size;
            out.push((rid, doc, expires_ms));
            if let Some(r) = &mut self.remaining {
                *r -= 1;
                if *r == 0 {
                    break;
                }
            }
            if out.len() >= max_docs {
                exhausted = false;
                break;
            }
        }
        drop(entries);
        if let Some(k) = restart_at {
            self.resume(Bound::Included(k.to_vec()));
        } else if let Some(k) = last_key {
            self.resume(Bound::Excluded(k.to_vec()));
        }
        if exhausted && let Some(id) = self.whole {
            self.snapshot.scanned(self.keyspace, id, self.examined);
        }
        if exhausted || self.remaining == Some(0) {
            self.done = true;
        }
        Ok(over_budget && !self.done)
    }
}

/// Reads one byte of each 64-byte line of `bytes` after the first, before a filter walks
/// them. The filter finds each element from the length of the one before, so on a document not
/// yet in the CPU's caches its reads wait for memory one after another; these reads do not
/// depend on each other, so the memory system fetches the lines together. On scans whose blocks
/// are in the block cache but not the CPU's caches, 6–8% faster (`benches/filter.rs`).
fn touch(bytes: &[u8]) {
    let mut seen = 0_u8;
    for line in bytes.chunks(64).skip(1) {
        seen ^= line.first().copied().unwrap_or(0);
    }
    std::hint::black_box(seen);
}

impl Scan {
    /// The record id of a key it read (an oplog entry's: its time).
    fn rid(&self, key: &[u8]) -> CommandResult<u64> {
        match self.keyspace {
            Keyspace::Oplog => crate::oplog::log::ts_of_key(key)
                .map(crate::replset::ts_to_u64)
                .ok_or_else(|| CommandError::internal("an oplog key not 8 bytes long")),
            _ => rid_of(key),
        }
    }

    /// The document a stored record shows, projected, if it is live, matches the filter and is
    /// not skipped; `None` otherwise.
    fn admit(
        filter: Option<&Filter>,
        projection: Option<&Projection>,
        skip: &mut u64,
        now_ms: i64,
        value: &[u8],
        keyspace: Keyspace,
    ) -> CommandResult<Option<(RawDocumentBuf, i64)>> {
        let rec = if keyspace == Keyspace::Oplog {
            record::Record {
                modified_ms: 0,
                doc: RawDocument::from_bytes(value)
                    .map_err(|e| CommandError::internal(format!("a corrupt oplog entry: {e}")))?,
                expires_ms: record::NEVER,
            }
        } else {
            record::decode(value)?
        };
        if rec.expires_ms <= now_ms {
            return Ok(None);
        }
        if filter.is_some() {
            touch(rec.doc.as_bytes());
        }
        if let Some(f) = filter
            && !f.try_matches(rec.doc)?
        {
            return Ok(None);
        }
        if *skip > 0 {
            *skip -= 1;
            return Ok(None);
        }
        let doc = match (projection, filter) {
            (Some(p), Some(f)) => p.apply_with_filter(rec.doc, f)?,
            (Some(p), None) => p.try_apply(rec.doc)?,
            (None, _) => rec.doc.to_owned(),
        };
        Ok(Some((doc, rec.expires_ms)))
    }

    /// Moves the bound the scan walks away from: the lower one forward, the upper one in
    /// reverse.
    fn resume(&mut self, at: Bound<Vec<u8>>) {
        if self.reverse {
            self.upper = at;
        } else {
            self.lower = at;
        }
    }
}

/// What a plan read and returned, for explain's `executionStats`.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ScanStats {
    /// Index keys read (`keysExamined`).
    pub keys_examined: u64,
    /// Documents read (`docsExamined`).
    pub docs_examined: u64,
}

/// A scan of an index's entries within bounds (see [`crate::query::plan::IndexScan`]),
/// fetching each entry's document from the same snapshot. Entries of the `_id` index hold the
/// record id in their value, those of other indexes at the end of their key.
#[expect(
    clippy::struct_excessive_bools,
    reason = "independent switches of one scan"
)]
pub struct IndexScan {
    /// The read view every batch comes from.
    pub snapshot: Box<dyn Snapshot>,
    /// The collection whose documents the entries point to.
    pub collection_id: u64,
    /// Whether the entries are those of the `_id` index.
    pub id_index: bool,
    /// Key ranges, in scan order.
    pub ranges: Vec<KeyRange>,
    /// Per key field, the byte ranges its component must lie in.
    pub checks: Vec<FieldCheck>,
    /// The range being walked.
    pub at: usize,
    /// Where the walk of `ranges[at]` resumes (the end it walks from).
    pub resume: Option<Bound<Vec<u8>>>,
    /// Record ids already read (a multikey index has several entries per document).
    pub seen: Option<HashSet<u64>>,
    /// Documents that do not match are skipped.
    pub filter: Option<Filter>,
    /// Applied to each returned document.
    pub projection: Option<Projection>,
    /// Matching documents still to skip.
    pub skip: u64,
    /// Documents still to return, if limited.
    pub remaining: Option<u64>,
    /// The instant reads are judged at (expiry).
    pub now_ms: i64,
    /// Whether the scan has reached its end.
    pub done: bool,
    /// Whether ranges are walked from their highest key down.
    pub reverse: bool,
    /// What it has read so far.
    pub stats: ScanStats,
    /// What stops the scan (shutdown, the command's `maxTimeMS`), checked as it reads.
    pub interrupt: Option<crate::interrupt::Interrupt>,
    /// The collection (`_id` index) or index whose keys the scan reads all of, if it does (one
    /// range covering every key): told to the store when the scan reaches the end, as
    /// [`Scan::whole`].
    pub whole: Option<u64>,
    /// Whether the keys alone answer (the caller only counts): each entry in bounds then
    /// stands for its document as an empty one, and no document is read. Only for bounds that
    /// decide the whole filter over a collection where no document can expire.
    pub keys_only: bool,
    /// An index-only projection (see [`IndexScan::cover`]): per output field, its name and
    /// the position of its key field. Entries without stored values (written before Ebb kept
    /// them) fall back to reading the document.
    pub cover: Option<Vec<(String, usize)>>,
    /// The scans still to run after this one's ranges (the other branches of an `$or`), which
    /// share its snapshot, window and record ids already read.
    pub legs: VecDeque<Leg>,
}

/// One index scan of an [`IndexScan`]: an `$or` branch's, or the only one.
pub struct Leg {
    /// Whether the entries are those of the `_id` index.
    id_index: bool,
    /// The prefix of its entries.
    prefix: Vec<u8>,
    /// Key ranges, in scan order.
    ranges: Vec<KeyRange>,
    /// Per key field, the byte ranges its component must lie in.
    checks: Vec<FieldCheck>,
}

impl Leg {
    /// The ranges and checks of `ix`, over collection `collection_id`.
    fn of(collection_id: u64, ix: &crate::query::plan::IndexScan) -> Leg {
        let id_index = ix.index.is_none();
        let prefix = if id_index {
            record::collection_prefix(collection_id).to_vec()
        } else {
            crate::index::index_prefix(ix.index_id).to_vec()
        };
        let (ranges, checks) = ix.key_ranges(&prefix);
        Leg {
            id_index,
            prefix,
            ranges,
            checks,
        }
    }
}

impl IndexScan {
    /// A forward scan of `leg`, fetching every entry's document, before any window is set.
    fn new(
        snapshot: Box<dyn Snapshot>,
        collection_id: u64,
        leg: Leg,
        filter: Option<Filter>,
        now_ms: i64,
    ) -> IndexScan {
        IndexScan {
            snapshot,
            collection_id,
            id_index: leg.id_index,
            ranges: leg.ranges,
            checks: leg.checks,
            at: 0,
            resume: None,
            seen: None,
            filter,
            projection: None,
            skip: 0,
            remaining: None,
            now_ms,
            done: false,
            reverse: false,
            stats: ScanStats::default(),
            interrupt: None,
            whole: None,
            keys_only: false,
            cover: None,
            legs: VecDeque::new(),
        }
    }

    /// Whether an entry's key fields lie within the bounds, and the record id it leads to;
    /// `None` if the entry is not one.
    fn admits_entry(&self, key: &[u8], value: &[u8]) -> Option<(bool, u64)> {
        let (rest, rid) = if self.id_index {
            (key.get(8..)?, crate::index::rid_of_value(value)?)
        } else {
            let (_, components, rid) = split_entry(key)?;
            (components, rid)
        };
        Some((components_admitted(&self.checks, rest)?, rid))
    }

    /// Reads the next batch, as [`Scan::next_entries`] does.
    pub fn next_entries(
        &mut self,
        max_docs: usize,
        max_bytes: usize,
    ) -> CommandResult<Vec<(RawDocumentBuf, i64)>> {
        Ok(without_rids(self.next_records(max_docs, max_bytes)?))
    }

    /// Reads the next batch, as [`Scan::next_records`] does.
    pub fn next_records(
        &mut self,
        max_docs: usize,
        max_bytes: usize,
    ) -> CommandResult<Vec<Record>> {
        let mut out = Vec::new();
        let mut bytes = 0;
        if max_docs == 0 {
            return Ok(out);
        }
        let ks = Keyspace::Index;
        while !self.done {
            let Some(range) = self.ranges.get(self.at) else {
                if let Some(leg) = self.legs.pop_front() {
                    self.id_index = leg.id_index;
                    self.ranges = leg.ranges;
                    self.checks = leg.checks;
                    self.at = 0;
                    self.resume = None;
                    continue;
                }
                self.done = true;
                if let Some(id) = self.whole {
                    self.snapshot.scanned(ks, id, self.stats.keys_examined);
                }
                break;
            };
            let mut lower = Bound::Included(range.lower.as_slice());
            let mut upper = range
                .upper
                .as_deref()
                .map_or(Bound::Unbounded, Bound::Excluded);
            if let Some(r) = &self.resume {
                let r = match r {
                    Bound::Included(k) => Bound::Included(k.as_slice()),
                    Bound::Excluded(k) => Bound::Excluded(k.as_slice()),
                    Bound::Unbounded => Bound::Unbounded,
                };
                if self.reverse {
                    upper = r;
                } else {
                    lower = r;
                }
            }
            // A point of the `_id` index: one read.
            let point =
                self.id_index && self.resume.is_none() && range.upper == prefix_end(&range.lower);
            let entries: Box<dyn Iterator<Item = _>> = if point {
                let value = self.snapshot.get(ks, &range.lower)?;
                Box::new(
                    value
                        .map(|v| Ok((Bytes::from(range.lower.clone()), v)))
                        .into_iter(),
                )
            } else {
                Box::new(self.snapshot.range(ks, lower, upper, self.reverse))
            };
            let mut stop: Option<Bound<Vec<u8>>> = None;
            for entry in entries {
                let (key, value) = entry?;
                self.stats.keys_examined += 1;
                interrupted(self.interrupt.as_ref(), self.stats.keys_examined)?;
                let Some((inside, rid)) = self.admits_entry(&key, &value) else {
                    continue;
                };
                if !inside {
                    continue;
                }
                if let Some(seen) = &mut self.seen
                    && !seen.insert(rid)
                {
                    continue;
                }
                let from_keys = if self.keys_only {
                    Some(RawDocumentBuf::new())
                } else {
                    self.cover.as_deref().and_then(|c| covered_doc(c, &value))
                };
                if let Some(doc) = from_keys {
                    if self.skip > 0 {
                        self.skip -= 1;
                        continue;
                    }
                    let size = doc.as_bytes().len();
                    if !out.is_empty() && bytes + size > max_bytes {
                        if let Some(seen) = &mut self.seen {
                            seen.remove(&rid);
                        }
                        self.resume = Some(Bound::Included(key.to_vec()));
                        return Ok(out);
                    }
                    bytes += size;
                    out.push((rid, doc, record::NEVER));
                    if let Some(r) = &mut self.remaining {
                        *r -= 1;
                        if *r == 0 {
                            self.done = true;
                            return Ok(out);
                        }
                    }
                    if out.len() >= max_docs {
                        self.resume = Some(Bound::Excluded(key.to_vec()));
                        return Ok(out);
                    }
                    continue;
                }
                let doc_key = record::doc_key(self.collection_id, rid);
                let Some(value) = self.snapshot.get(Keyspace::Docs, &doc_key)? else {
                    continue;
                };
                self.stats.docs_examined += 1;
                let Some((doc, expires_ms)) = Scan::admit(
                    self.filter.as_ref(),
                    self.projection.as_ref(),
                    &mut self.skip,
                    self.now_ms,
                    &value,
                    Keyspace::Docs,
                )?
                else {
                    continue;
                };
                let size = doc.as_bytes().len();
                if !out.is_empty() && bytes + size > max_bytes {
                    // This one starts the next batch: resume at it, and read it again then
                    // (its key and document count once, as mongod keeps it for the next batch).
                    if let Some(seen) = &mut self.seen {
                        seen.remove(&rid);
                    }
                    self.stats.keys_examined -= 1;
                    self.stats.docs_examined -= 1;
                    stop = Some(Bound::Included(key.to_vec()));
                    break;
                }
                bytes += size;
                out.push((rid, doc, expires_ms));
                if let Some(r) = &mut self.remaining {
                    *r -= 1;
                    if *r == 0 {
                        self.done = true;
                        return Ok(out);
                    }
                }
                if out.len() >= max_docs {
                    stop = Some(Bound::Excluded(key.to_vec()));
                    break;
                }
            }
            if let Some(at) = stop {
                self.resume = Some(at);
                return Ok(out);
            }
            self.at += 1;
            self.resume = None;
        }
        Ok(out)
    }
}

/// The document an index-only projection `cover` makes of an entry's `value` (see
/// `index::keys::covering_value`); `None` when the entry has no stored values.
fn covered_doc(cover: &[(String, usize)], value: &[u8]) -> Option<RawDocumentBuf> {
    if value.is_empty() {
        return None;
    }
    let stored: Vec<_> = RawDocument::from_bytes(value)
        .ok()?
        .iter()
        .collect::<Result<_, _>>()
        .ok()?;
    let mut doc = RawDocumentBuf::new();
    for (name, at) in cover {
        let (marker, v) = stored.get(*at)?;
        // `"m"`: the document lacks the field.
        if marker.as_str().is_empty()
            && let Ok(name) = <&bson::raw::CStr>::try_from(name.as_str())
        {
            doc.append(name, *v);
        }
    }
    Some(doc)
}

/// Whether each key component (in `components`, encoded) lies within its field's check;
/// `None` if they are not whole key strings.
fn components_admitted(checks: &[FieldCheck], mut rest: &[u8]) -> Option<bool> {
    for check in checks {
        let len = keystring::encoded_len(rest, check.descending)?;
        let component = rest.get(..len)?;
        if !check.admits(component) {
            return Some(false);
        }
        rest = rest.get(len..)?;
    }
    Some(true)
}

/// Where a cursor's documents come from.
pub enum Source {
    /// Results computed up front (sorted finds, aggregation output), each with the expiry
    /// instant of the stored document it shows ([`record::NEVER`] for computed documents).
    Buffered(VecDeque<(RawDocumentBuf, i64)>),
    /// A live scan over a snapshot.
    Scan(Box<Scan>),
    /// A live index scan over a snapshot.
    Index(Box<IndexScan>),
    /// A blocking sort that spilled to disk, merged as it is read.
    Sorted(Box<SortedRead>),
}

/// The results of a blocking sort that spilled, with the command's `skip` and projection
/// applied as they are read (its limit is the sort's). Dropping it removes the sort's files.
pub struct SortedRead {
    sorted: crate::sorter::Sorted,
    skip: usize,
    /// The projection and the filter its positional `$` needs.
    projection: Option<(Projection, Filter)>,
    /// The next document, read ahead so that the end is known as soon as it is reached.
    pending: Option<(RawDocumentBuf, i64)>,
    done: bool,
}

impl SortedRead {
    /// Reads `sorted`, leaving out its first `skip` documents and projecting the others.
    pub fn new(
        sorted: crate::sorter::Sorted,
        skip: usize,
        projection: Option<(Projection, Filter)>,
    ) -> CommandResult<SortedRead> {
        let mut read = SortedRead {
            sorted,
            skip,
            projection,
            pending: None,
            done: false,
        };
        read.pending = read.read()?;
        Ok(read)
    }

    fn read(&mut self) -> CommandResult<Option<(RawDocumentBuf, i64)>> {
        while self.skip > 0 {
            if self.sorted.next_entry()?.is_none() {
                self.done = true;
                return Ok(None);
            }
            self.skip -= 1;
        }
        let Some((doc, expires)) = self.sorted.next_entry()? else {
            self.done = true;
            return Ok(None);
        };
        let doc = match &self.projection {
            Some((p, filter)) => p.apply_with_filter(&doc, filter)?,
            None => doc,
        };
        Ok(Some((doc, expires)))
    }

    /// The next document, if any.
    fn next(&mut self) -> CommandResult<Option<(RawDocumentBuf, i64)>> {
        let next = self.pending.take();
        if next.is_some() {
            self.pending = self.read()?;
        }
        Ok(next)
    }

    fn peek_size(&self) -> Option<usize> {
        self.pending.as_ref().map(|(d, _)| d.as_bytes().len())
    }
}

impl Source {
    /// The next batch, judged at `now_ms`: a document whose instant has passed since the
    /// cursor opened is left out of every later batch. See [`Scan::next_batch`].
    pub fn next_batch(
        &mut self,
        max_docs: usize,
        max_bytes: usize,
        now_ms: i64,
    ) -> CommandResult<Vec<RawDocumentBuf>> {
        match self {
            Source::Scan(scan) => {
                scan.now_ms = now_ms;
                scan.next_batch(max_docs, max_bytes)
            }
            Source::Index(scan) => {
                scan.now_ms = now_ms;
                Ok(scan
                    .next_entries(max_docs, max_bytes)?
                    .into_iter()
                    .map(|(d, _)| d)
                    .collect())
            }
            Source::Sorted(read) => {
                let mut out = Vec::new();
                let mut bytes = 0;
                while out.len() < max_docs {
                    let Some(size) = read.peek_size() else { break };
                    if !out.is_empty() && bytes + size > max_bytes {
                        break;
                    }
                    let Some((doc, expires)) = read.next()? else {
                        break;
                    };
                    if expires <= now_ms {
                        continue;
                    }
                    bytes += size;
                    out.push(doc);
                }
                Ok(out)
            }
            Source::Buffered(docs) => {
                let mut out = Vec::new();
                let mut bytes = 0;
                while out.len() < max_docs {
                    let Some((next, expires)) = docs.front() else {
                        break;
                    };
                    if *expires <= now_ms {
                        docs.pop_front();
                        continue;
                    }
                    let size = next.as_bytes().len();
                    if !out.is_empty() && bytes + size > max_bytes {
                        break;
                    }
                    bytes += size;
                    if let Some((doc, _)) = docs.pop_front() {
                        out.push(doc);
                    }
                }
                Ok(out)
            }
        }
    }

    /// A live source reading collection `collection_id` from `snapshot` as `access` says,
    /// keeping the documents `filter` matches (judged at `now_ms`).
    pub fn open(
        collection_id: u64,
        snapshot: Box<dyn Snapshot>,
        access: &Access,
        filter: Option<Filter>,
        now_ms: i64,
    ) -> Source {
        let filter = filter.filter(|f| !f.is_match_all());
        match access {
            Access::Collscan { reverse } => {
                let prefix = record::collection_prefix(collection_id);
                Source::Scan(Box::new(Scan {
                    snapshot,
                    lower: Bound::Included(prefix.to_vec()),
                    upper: prefix_end(&prefix).map_or(Bound::Unbounded, Bound::Excluded),
                    filter,
                    projection: None,
                    skip: 0,
                    remaining: None,
                    now_ms,
                    done: false,
                    reverse: *reverse,
                    examined: 0,
                    interrupt: None,
                    whole: Some(collection_id),
                    keyspace: Keyspace::Docs,
                    split: false,
                }))
            }
            Access::Index(ix) => {
                let leg = Leg::of(collection_id, ix);
                let whole = match leg.ranges.as_slice() {
                    [range]
                        if range.covers_all(
                            &leg.prefix,
                            leg.checks.first().is_some_and(|c| c.descending),
                        ) =>
                    {
                        Some(if leg.id_index {
                            collection_id
                        } else {
                            ix.index_id
                        })
                    }
                    _ => None,
                };
                let mut scan = IndexScan::new(snapshot, collection_id, leg, filter, now_ms);
                scan.seen = ix.multikey.then(HashSet::new);
                scan.reverse = ix.reverse;
                scan.whole = whole;
                scan.keys_only = ix.keys_only;
                Source::Index(Box::new(scan))
            }
            Access::Or(legs) => {
                let mut legs: VecDeque<Leg> =
                    legs.iter().map(|ix| Leg::of(collection_id, ix)).collect();
                let first = legs.pop_front().unwrap_or_else(|| Leg {
                    id_index: true,
                    prefix: Vec::new(),
                    ranges: Vec::new(),
                    checks: Vec::new(),
                });
                let mut scan = IndexScan::new(snapshot, collection_id, first, filter, now_ms);
                // A document several branches match is read once.
                scan.seen = Some(HashSet::new());
                scan.legs = legs;
                Source::Index(Box::new(scan))
            }
        }
    }

    /// Makes an index scan answer with projection `cover` made from its entries (see
    /// [`IndexScan::cover`]); returns whether it is one.
    pub fn cover(&mut self, cover: Vec<(String, usize)>) -> bool {
        match self {
            Source::Index(scan) => {
                scan.cover = Some(cover);
                true
            }
            _ => false,
        }
    }

    /// Makes an index scan read keys only (see [`IndexScan::keys_only`]); returns whether it
    /// is one.
    pub fn read_keys_only(&mut self) -> bool {
        match self {
            Source::Index(scan) => {
                scan.keys_only = true;
                true
            }
            _ => false,
        }
    }

    /// Goes on reading from `snapshot` instead of the one it started on (see
    /// [`SNAPSHOT_HISTORY_WINDOW`]); live scans resume from keys, so the next batch starts
    /// where the last one ended, in the newer state. No effect on results already read.
    pub fn refresh_snapshot(&mut self, snapshot: Box<dyn Snapshot>) {
        match self {
            Source::Scan(s) => s.snapshot = snapshot,
            Source::Index(s) => s.snapshot = snapshot,
            Source::Buffered(_) | Source::Sorted(_) => {}
        }
    }

    /// Makes the scan stop as `interrupt` says (checked every [`INTERRUPT_CHECK_EVERY`]
    /// entries read).
    pub fn set_interrupt(&mut self, interrupt: &crate::interrupt::Interrupt) {
        match self {
            Source::Scan(s) => s.interrupt = Some(interrupt.clone()),
            Source::Index(s) => s.interrupt = Some(interrupt.clone()),
            // Already read (spilled runs are merged from files, not scanned).
            Source::Buffered(_) | Source::Sorted(_) => {}
        }
    }

    /// Sets what a live source returns: `projection` applied, `skip` matches left out, at most
    /// `limit` returned. No effect on buffered documents.
    pub fn set_window(&mut self, projection: Option<Projection>, skip: u64, limit: Option<u64>) {
        match self {
            Source::Scan(s) => {
                s.projection = projection;
                s.skip = skip;
                s.remaining = limit;
            }
            Source::Index(s) => {
                s.projection = projection;
                s.skip = skip;
                s.remaining = limit;
            }
            Source::Buffered(_) | Source::Sorted(_) => {}
        }
    }

    /// The start of the next batch (see [`Source::next_batch`]) read on the calling thread:
    /// a live collection scan reads at most `examine` entries toward it. `Ok(Err(partial))`
    /// when the batch needs more reading than that: [`Source::finish_batch`] goes on from
    /// `partial`, on a thread that may block. Other sources (an oplog scan among them) read the
    /// whole batch when they are cheap ([`Source::is_point`]) and nothing otherwise.
    pub fn start_batch(
        &mut self,
        max_docs: usize,
        max_bytes: usize,
        now_ms: i64,
        examine: u64,
    ) -> CommandResult<Result<Vec<RawDocumentBuf>, Partial>> {
        match self {
            // (An oplog scan has no budget: it is read on the blocking thread whole.)
            Source::Scan(scan) if scan.keyspace != Keyspace::Oplog => {
                scan.now_ms = now_ms;
                let mut out = Vec::new();
                if scan.fill(&mut out, max_docs, max_bytes, examine)? {
                    Ok(Err(Partial(out)))
                } else {
                    Ok(Ok(out.into_iter().map(|(_, d, _)| d).collect()))
                }
            }
            _ if self.is_point() => Ok(Ok(self.next_batch(max_docs, max_bytes, now_ms)?)),
            _ => Ok(Err(Partial(Vec::new()))),
        }
    }

    /// The rest of a batch [`Source::start_batch`] began.
    pub fn finish_batch(
        &mut self,
        partial: Partial,
        max_docs: usize,
        max_bytes: usize,
        now_ms: i64,
    ) -> CommandResult<Vec<RawDocumentBuf>> {
        match self {
            Source::Scan(scan) if !partial.0.is_empty() => {
                scan.now_ms = now_ms;
                let mut out = partial.0;
                scan.fill(&mut out, max_docs, max_bytes, u64::MAX)?;
                Ok(out.into_iter().map(|(_, d, _)| d).collect())
            }
            _ => self.next_batch(max_docs, max_bytes, now_ms),
        }
    }

    /// The next documents with their expiry instants (at most `max_docs`, about `max_bytes`).
    pub fn next_entries(
        &mut self,
        max_docs: usize,
        max_bytes: usize,
    ) -> CommandResult<Vec<(RawDocumentBuf, i64)>> {
        match self {
            Source::Scan(s) => s.next_entries(max_docs, max_bytes),
            Source::Index(s) => s.next_entries(max_docs, max_bytes),
            Source::Buffered(docs) => {
                let n = max_docs.min(docs.len());
                Ok(docs.drain(..n).collect())
            }
            Source::Sorted(read) => {
                let mut out = Vec::new();
                while out.len() < max_docs
                    && let Some(entry) = read.next()?
                {
                    out.push(entry);
                }
                Ok(out)
            }
        }
    }

    /// Every document left of a live scan, with its record id. Empty for other sources.
    pub fn drain_records(&mut self) -> CommandResult<Vec<Record>> {
        if let Source::Scan(s) = self
            && let Some(all) = s.drain_split()?
        {
            return Ok(all);
        }
        let mut all = Vec::new();
        loop {
            let batch = match self {
                Source::Scan(s) => s.next_records(usize::MAX, usize::MAX)?,
                Source::Index(s) => s.next_records(usize::MAX, usize::MAX)?,
                Source::Buffered(_) | Source::Sorted(_) => Vec::new(),
            };
            if batch.is_empty() {
                return Ok(all);
            }
            all.extend(batch);
        }
    }

    /// Every document left.
    pub fn drain(&mut self) -> CommandResult<Vec<(RawDocumentBuf, i64)>> {
        if let Source::Scan(s) = self
            && let Some(all) = s.drain_split()?
        {
            return Ok(without_rids(all));
        }
        let mut all = Vec::new();
        loop {
            let batch = self.next_entries(usize::MAX, usize::MAX)?;
            if batch.is_empty() {
                return Ok(all);
            }
            all.extend(batch);
        }
    }

    /// How many documents are left, read and dropped.
    pub fn count_rest(&mut self) -> CommandResult<usize> {
        if let Source::Scan(s) = self
            && let Some(n) = s.count_split()?
        {
            return Ok(n);
        }
        let mut n = 0;
        loop {
            let batch = self.next_entries(split::COUNT_BATCH, usize::MAX)?;
            if batch.is_empty() {
                return Ok(n);
            }
            n += batch.len();
        }
    }

    /// Lets a caller that reads this source to its end read a collection scan's two halves on
    /// two threads when a core is idle (see `cursor::split`).
    pub fn allow_split(&mut self, allowed: bool) {
        if let Source::Scan(s) = self {
            s.split = allowed;
        }
    }

    /// What the source has read so far.
    pub fn stats(&self) -> ScanStats {
        match self {
            Source::Scan(s) => ScanStats {
                keys_examined: 0,
                docs_examined: s.examined,
            },
            Source::Index(s) => s.stats,
            Source::Buffered(_) | Source::Sorted(_) => ScanStats::default(),
        }
    }

    /// Whether the next batch is cheap enough to read on the runtime: a scan of at most one
    /// key, or documents already in memory.
    pub fn is_point(&self) -> bool {
        match self {
            Source::Scan(scan) => matches!(
                (&scan.lower, &scan.upper),
                (Bound::Included(l), Bound::Included(u)) if l == u
            ),
            // One key of the `_id` index; or one key value of another index (every key field
            // pinned) when at most a few documents are wanted (`find_one`): a handful of
            // entries and point reads, cheaper than the hand-off.
            Source::Index(scan) => {
                let one_key = scan.legs.is_empty()
                    && scan.ranges.len() <= 1
                    && scan.ranges.iter().all(|r| r.upper == prefix_end(&r.lower));
                one_key
                    && (scan.id_index
                        || scan
                            .remaining
                            .is_some_and(|r| r <= SMALL_INDEX_READ && scan.skip == 0))
            }
            Source::Buffered(_) => true,
            // Reads its runs from disk.
            Source::Sorted(_) => false,
        }
    }

    /// Whether nothing is left.
    pub fn is_exhausted(&self) -> bool {
        match self {
            Source::Scan(scan) => scan.done,
            Source::Index(scan) => scan.done,
            Source::Buffered(docs) => docs.is_empty(),
            Source::Sorted(read) => read.done && read.pending.is_none(),
        }
    }
}

/// An open cursor.
pub struct Cursor {
    /// `db.collection` it reads.
    pub ns: String,
    /// Its documents.
    pub source: Source,
    /// `batchSize` for `getMore` when the request gives none.
    pub batch_size: Option<usize>,
    /// Exempt from the idle timeout (`noCursorTimeout`).
    pub no_timeout: bool,
    /// When it was opened or last used, by the server's clock (which tests can move).
    last_used_ms: i64,
    /// When the snapshot it reads was taken, by the server's clock.
    snapshot_ms: i64,
    /// The session of the command that opened it: `getMore`s must come in the same one, and
    /// killing the session closes it.
    pub lsid: Option<crate::sessions::SessionId>,
    /// With access control on: the user that opened it and what the opening command needed,
    /// which every `getMore` checks again.
    pub auth: Option<crate::auth::session::CursorAuth>,
    /// A change stream's state, for a cursor `$changeStream` opened (its `source` is then
    /// empty: `getMore` reads the oplog through this).
    pub stream: Option<Box<crate::changestream::reader::StreamReader>>,
}

impl Cursor {
    /// A cursor over `source`, opened at `now_ms` (the server clock).
    pub fn new(
        ns: String,
        source: Source,
        batch_size: Option<usize>,
        no_timeout: bool,
        now_ms: i64,
    ) -> Self {
        Cursor {
            ns,
            source,
            batch_size,
            no_timeout,
            last_used_ms: now_ms,
            snapshot_ms: now_ms,
            lsid: None,
            auth: None,
            stream: None,
        }
    }

    /// The same cursor, opened in session `lsid`.
    #[must_use]
    pub fn in_session(mut self, lsid: Option<crate::sessions::SessionId>) -> Self {
        self.lsid = lsid;
        self
    }

    /// Reads from a new snapshot if its own is [`SNAPSHOT_HISTORY_WINDOW`] old at `now_ms`.
    fn bound_snapshot(&mut self, now_ms: i64, snapshot: &dyn Fn() -> Box<dyn Snapshot>) {
        let window = i64::try_from(SNAPSHOT_HISTORY_WINDOW.as_millis()).unwrap_or(i64::MAX);
        if now_ms.saturating_sub(self.snapshot_ms) >= window
            && matches!(self.source, Source::Scan(_) | Source::Index(_))
        {
            self.source.refresh_snapshot(snapshot());
            self.snapshot_ms = now_ms;
        }
    }

    /// Whether, at `now_ms`, it has been idle for `timeout` or longer (and may time out).
    fn timed_out(&self, now_ms: i64, timeout: Duration) -> bool {
        let timeout_ms = i64::try_from(timeout.as_millis()).unwrap_or(i64::MAX);
        !self.no_timeout && now_ms.saturating_sub(self.last_used_ms) >= timeout_ms
    }
}

/// Every open cursor, by id.
#[derive(Default)]
pub struct Cursors {
    open: Mutex<HashMap<i64, Cursor>>,
    counter: AtomicU64,
    seed: std::collections::hash_map::RandomState,
}

impl std::fmt::Debug for Cursors {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cursors")
            .field("open", &self.len())
            .finish()
    }
}

impl Cursors {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<i64, Cursor>> {
        self.open
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Number of open cursors.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether no cursor is open.
    pub fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }

    /// Registers `cursor` and returns its id: random, positive, never 0. With access control
    /// on, the cursor keeps the running command's user and rule
    /// ([`crate::auth::session::cursor_stamp`]).
    pub fn insert(&self, mut cursor: Cursor) -> i64 {
        if cursor.auth.is_none() {
            cursor.auth = crate::auth::session::cursor_stamp();
        }
        let mut open = self.lock();
        loop {
            let mut h = self.seed.build_hasher();
            h.write_u64(self.counter.fetch_add(1, Ordering::Relaxed));
            let id = i64::try_from(h.finish() >> 1).unwrap_or(1);
            if id != 0 && !open.contains_key(&id) {
                open.insert(id, cursor);
                return id;
            }
        }
    }

    /// The owner and rule of each of `ids` that is open and has them.
    pub fn auth_of(&self, ids: &[i64]) -> Vec<(i64, crate::auth::session::CursorAuth)> {
        let open = self.lock();
        ids.iter()
            .filter_map(|id| Some((*id, open.get(id)?.auth.clone()?)))
            .collect()
    }

    /// Takes cursor `id` out for a `getMore` on `ns` at `now_ms`; the caller puts it back if it
    /// is not exhausted. MongoDB's errors for unknown ids and namespace mismatches. A cursor idle
    /// for [`CURSOR_TIMEOUT`] is closed here even if the reaper has not come round yet, so the
    /// timeout is exact.
    ///
    /// For the server's own use (a view's results read whole): a client's `getMore` goes
    /// through [`Cursors::take_bounded`], which also checks its session.
    pub fn take(&self, id: i64, ns: &str, now_ms: i64) -> CommandResult<Cursor> {
        self.take_in(id, ns, now_ms, SessionCheck::None)
    }

    /// [`Cursors::take`]; with `session` (the `lsid` of the `getMore`, if any), mongod's errors
    /// when it is not the session the cursor was opened in.
    fn take_in(
        &self,
        id: i64,
        ns: &str,
        now_ms: i64,
        session: SessionCheck<'_>,
    ) -> CommandResult<Cursor> {
        let mut open = self.lock();
        if open
            .get(&id)
            .is_some_and(|c| c.timed_out(now_ms, CURSOR_TIMEOUT))
        {
            open.remove(&id);
        }
        match open.get(&id) {
            None => Err(CommandError::new(
                ErrorCode::CursorNotFound,
                format!("cursor id {id} not found"),
            )),
            Some(c) if c.ns != ns => Err(CommandError::new(
                ErrorCode::Unauthorized,
                format!(
                    "Requested getMore on namespace '{ns}', but cursor belongs to a different namespace {}",
                    c.ns
                ),
            )),
            Some(c) => {
                if let SessionCheck::Of(now) = session {
                    session_matches(id, c.lsid.as_ref(), now)?;
                }
                open.remove(&id)
                    .ok_or_else(|| CommandError::internal("cursor vanished"))
            }
        }
    }

    /// Closes every cursor opened in a session `kill` picks; returns how many.
    pub fn kill_sessions(&self, kill: impl Fn(&crate::sessions::SessionId) -> bool) -> usize {
        let mut open = self.lock();
        let before = open.len();
        open.retain(|_, c| !c.lsid.as_ref().is_some_and(&kill));
        before - open.len()
    }

    /// [`Cursors::take`], and the cursor reads from a new snapshot (`snapshot()`) if its own is
    /// [`SNAPSHOT_HISTORY_WINDOW`] old.
    pub fn take_bounded(
        &self,
        id: i64,
        ns: &str,
        now_ms: i64,
        lsid: Option<&crate::sessions::SessionId>,
        snapshot: &dyn Fn() -> Box<dyn Snapshot>,
    ) -> CommandResult<Cursor> {
        let mut cursor = self.take_in(id, ns, now_ms, SessionCheck::Of(lsid))?;
        cursor.bound_snapshot(now_ms, snapshot);
        Ok(cursor)
    }

    /// Moves every cursor whose snapshot is [`SNAPSHOT_HISTORY_WINDOW`] old at `now_ms` to a
    /// new one, so that idle cursors do not keep old versions from compaction.
    pub fn bound_snapshots(&self, now_ms: i64, snapshot: &dyn Fn() -> Box<dyn Snapshot>) {
        for cursor in self.lock().values_mut() {
            cursor.bound_snapshot(now_ms, snapshot);
        }
    }

    /// Puts a cursor back after a `getMore` that ended at `now_ms`.
    pub fn put_back(&self, id: i64, mut cursor: Cursor, now_ms: i64) {
        cursor.last_used_ms = now_ms;
        self.lock().insert(id, cursor);
    }

    /// Kills `id`; whether it was open.
    pub fn kill(&self, id: i64) -> bool {
        self.lock().remove(&id).is_some()
    }

    /// Closes cursors idle for `timeout` or longer at `now_ms`; returns how many.
    pub fn reap(&self, now_ms: i64, timeout: Duration) -> usize {
        let mut open = self.lock();
        let before = open.len();
        open.retain(|_, c| !c.timed_out(now_ms, timeout));
        before - open.len()
    }
}

/// Whether taking a cursor checks the session it is taken in.
#[derive(Clone, Copy)]
enum SessionCheck<'a> {
    /// The server's own use: no check.
    None,
    /// A client's `getMore`, in this session (or none).
    Of(Option<&'a crate::sessions::SessionId>),
}

/// mongod's checks that a `getMore` of cursor `id`, opened in session `opened` (if any), comes
/// in the same session (`now`).
fn session_matches(
    id: i64,
    opened: Option<&crate::sessions::SessionId>,
    now: Option<&crate::sessions::SessionId>,
) -> CommandResult<()> {
    use crate::sessions::display;
    let message = match (opened, now) {
        (None, Some(now)) => (
            50736,
            format!(
                "Cannot run getMore on cursor {id}, which was not created in a session, in \
                 session {}",
                display(now)
            ),
        ),
        (Some(opened), None) => (
            50737,
            format!(
                "Cannot run getMore on cursor {id}, which was created in session {}, without an \
                 lsid",
                display(opened)
            ),
        ),
        (Some(opened), Some(now)) if opened != now => (
            50738,
            format!(
                "Cannot run getMore on cursor {id}, which was created in session {}, in session \
                 {}",
                display(opened),
                display(now)
            ),
        ),
        _ => return Ok(()),
    };
    Err(CommandError::new(ErrorCode::Location(message.0), message.1))
}

/// A document read straight from its record, for callers that already hold one.
pub fn live_doc(value: &[u8], now_ms: i64) -> CommandResult<Option<&RawDocument>> {
    let rec = record::decode(value)?;
    Ok((rec.expires_ms > now_ms).then_some(rec.doc))
}

mod distinct;
pub use distinct::distinct_values;
mod split;

#[cfg(test)]
mod index_scan_tests;

#[cfg(test)]
mod budget_tests {
    use bson::rawdoc;

    use super::*;
    use crate::storage::{Batch, MemoryStorage, Storage};

    const COLL: u64 = 4;

    /// A collection scan of `n` documents `{_id: i, even: i % 2 == 0}` (every third expired),
    /// with the filter `{even: true}`.
    fn scan(store: &MemoryStorage, max: Option<u64>) -> Scan {
        let prefix = record::collection_prefix(COLL).to_vec();
        let filter = Filter::compile(&rawdoc! { "even": true }).unwrap();
        Scan {
            snapshot: store.snapshot(),
            lower: Bound::Included(prefix.clone()),
            upper: Bound::Excluded(prefix_end(&prefix).unwrap()),
            filter: Some(filter),
            projection: None,
            skip: 1,
            remaining: max,
            now_ms: 10,
            done: false,
            reverse: false,
            examined: 0,
            interrupt: None,
            whole: None,
            keyspace: Keyspace::Docs,
            split: false,
        }
    }

    fn store(n: u64) -> MemoryStorage {
        let store = MemoryStorage::new();
        let mut batch = Batch::new();
        for rid in 1..=n {
            let id = i64::try_from(rid).unwrap();
            let expires = if rid % 3 == 0 { 5 } else { record::NEVER };
            batch.put(
                Keyspace::Docs,
                record::doc_key(COLL, rid).to_vec(),
                record::encode(0, expires, &rawdoc! { "_id": id, "even": id % 2 == 0 }),
            );
        }
        store.commit(batch).unwrap();
        store
    }

    fn ids(records: &[Record]) -> Vec<u64> {
        records.iter().map(|(rid, _, _)| *rid).collect()
    }

    /// Batches read in budgeted steps are the batches read in one go: the same documents,
    /// the same `max_docs` and byte limits, the same end, whatever the budget.
    #[test]
    fn a_batch_read_in_steps_is_the_batch_read_at_once() {
        let store = store(200);
        for limit in [None, Some(7)] {
            for (max_docs, max_bytes) in [(10, usize::MAX), (usize::MAX, 100), (25, 300)] {
                let mut whole = scan(&store, limit);
                let mut want = Vec::new();
                while !whole.done {
                    want.push(ids(&whole.next_records(max_docs, max_bytes).unwrap()));
                }
                for examine in [1, 2, 5, 64] {
                    let mut stepped = scan(&store, limit);
                    let mut got = Vec::new();
                    while !stepped.done {
                        let mut out = Vec::new();
                        while stepped
                            .fill(&mut out, max_docs, max_bytes, examine)
                            .unwrap()
                        {}
                        got.push(ids(&out));
                    }
                    // The last batch of a scan ended by a budget may come back empty once.
                    got.retain(|b| !b.is_empty());
                    want.retain(|b| !b.is_empty());
                    assert_eq!(
                        got, want,
                        "limit {limit:?}, {max_docs}/{max_bytes}, {examine}"
                    );
                    assert_eq!(stepped.examined, whole.examined);
                }
            }
        }
    }

    /// A query starts a collection scan on the runtime (all of a small one), but never an
    /// oplog scan, which has no budget.
    #[test]
    fn only_collection_scans_start_on_the_runtime() {
        let store = store(10);
        let mut small = Source::Scan(Box::new(scan(&store, None)));
        let docs = small.start_batch(101, MAX_BATCH_BYTES, 10, 64).unwrap();
        assert_eq!(docs.map(|d| d.len()).ok(), Some(3));
        let mut oplog = scan(&store, None);
        oplog.keyspace = Keyspace::Oplog;
        let mut oplog = Source::Scan(Box::new(oplog));
        let started = oplog.start_batch(101, MAX_BATCH_BYTES, 10, 64).unwrap();
        assert!(started.is_err_and(|partial| partial.0.is_empty()));
    }

    /// A scan that stops for its budget says so, and a collection read within it does not.
    #[test]
    fn the_budget_is_reported() {
        let store = store(10);
        let mut small = scan(&store, None);
        let mut out = Vec::new();
        assert!(!small.fill(&mut out, 101, MAX_BATCH_BYTES, 64).unwrap());
        assert!(small.done);
        let mut large = scan(&store, None);
        let mut out = Vec::new();
        assert!(large.fill(&mut out, 101, MAX_BATCH_BYTES, 4).unwrap());
        assert!(!large.done);
        assert!(
            large
                .fill(&mut out, 101, MAX_BATCH_BYTES, u64::MAX)
                .is_ok_and(|more| !more)
        );
        assert_eq!(ids(&out), [4, 8, 10]);
    }
}
