//! Cursors: what `find` and `aggregate` leave open for `getMore`, and the registry that owns
//! them, expires idle ones (10 minutes, MongoDB's `cursorTimeoutMillis`) and kills them.
//!
//! A cursor over a collection holds the storage snapshot it started on, so every batch reads
//! the same consistent state, and resumes from the key after the last one it returned.

use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasher, Hasher};
use std::ops::Bound;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bson::{RawDocument, RawDocumentBuf};
use bytes::Bytes;

use crate::error::{CommandError, CommandResult, ErrorCode};
use crate::query::filter::Filter;
use crate::query::projection::Projection;
use crate::storage::{Keyspace, Snapshot, record};

/// Idle time after which a cursor is closed (`cursorTimeoutMillis`).
pub const CURSOR_TIMEOUT: Duration = Duration::from_secs(600);
/// The most document bytes one reply batch carries (MongoDB's 16 MiB).
pub const MAX_BATCH_BYTES: usize = 16 * 1024 * 1024;
/// `find`'s first batch when no `batchSize` is given.
pub const DEFAULT_FIRST_BATCH: usize = 101;

/// A scan of one collection's documents in `_id` order.
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
        let mut out = Vec::new();
        let mut bytes = 0;
        if self.done || max_docs == 0 {
            return Ok(out);
        }
        if let (Bound::Included(lo), Bound::Included(hi)) = (&self.lower, &self.upper)
            && lo == hi
        {
            // One key (a filter that pins `_id`): a point read, far cheaper than a range.
            self.done = true;
            let Some(value) = self.snapshot.get(Keyspace::Docs, lo)? else {
                return Ok(out);
            };
            if let Some(entry) = Self::admit(
                self.filter.as_ref(),
                self.projection.as_ref(),
                &mut self.skip,
                self.now_ms,
                &value,
            )? {
                out.push(entry);
                if let Some(r) = &mut self.remaining {
                    *r -= 1;
                }
            }
            return Ok(out);
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
        for entry in self
            .snapshot
            .range(Keyspace::Docs, lower, upper, self.reverse)
        {
            let (key, value) = entry?;
            last_key = Some(key);
            let Some((doc, expires_ms)) = Self::admit(
                self.filter.as_ref(),
                self.projection.as_ref(),
                &mut self.skip,
                self.now_ms,
                &value,
            )?
            else {
                continue;
            };
            let size = doc.as_bytes().len();
            if !out.is_empty() && bytes + size > max_bytes {
                // This one starts the next batch: resume at it, not after it.
                restart_at = last_key.take();
                exhausted = false;
                break;
            }
            bytes += size;
            out.push((doc, expires_ms));
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
        if let Some(k) = restart_at {
            self.resume(Bound::Included(k.to_vec()));
        } else if let Some(k) = last_key {
            self.resume(Bound::Excluded(k.to_vec()));
        }
        if exhausted || self.remaining == Some(0) {
            self.done = true;
        }
        Ok(out)
    }
}

impl Scan {
    /// The document a stored record shows, projected, if it is live, matches the filter and is
    /// not skipped; `None` otherwise.
    fn admit(
        filter: Option<&Filter>,
        projection: Option<&Projection>,
        skip: &mut u64,
        now_ms: i64,
        value: &[u8],
    ) -> CommandResult<Option<(RawDocumentBuf, i64)>> {
        let rec = record::decode(value)?;
        if rec.expires_ms <= now_ms {
            return Ok(None);
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

/// Where a cursor's documents come from.
pub enum Source {
    /// Results computed up front (sorted finds, aggregation output), each with the expiry
    /// instant of the stored document it shows ([`record::NEVER`] for computed documents).
    Buffered(VecDeque<(RawDocumentBuf, i64)>),
    /// A live scan over a snapshot.
    Scan(Box<Scan>),
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

    /// Whether the next batch is cheap enough to read on the runtime: a scan of at most one
    /// key, or documents already in memory.
    pub fn is_point(&self) -> bool {
        match self {
            Source::Scan(scan) => matches!(
                (&scan.lower, &scan.upper),
                (Bound::Included(l), Bound::Included(u)) if l == u
            ),
            Source::Buffered(_) => true,
        }
    }

    /// Whether nothing is left.
    pub fn is_exhausted(&self) -> bool {
        match self {
            Source::Scan(scan) => scan.done,
            Source::Buffered(docs) => docs.is_empty(),
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

    /// Registers `cursor` and returns its id: random, positive, never 0.
    pub fn insert(&self, cursor: Cursor) -> i64 {
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

    /// Takes cursor `id` out for a `getMore` on `ns` at `now_ms`; the caller puts it back if it
    /// is not exhausted. MongoDB's errors for unknown ids and namespace mismatches. A cursor idle
    /// for [`CURSOR_TIMEOUT`] is closed here even if the reaper has not come round yet, so the
    /// timeout is exact.
    pub fn take(&self, id: i64, ns: &str, now_ms: i64) -> CommandResult<Cursor> {
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
            Some(_) => open
                .remove(&id)
                .ok_or_else(|| CommandError::internal("cursor vanished")),
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

/// A document read straight from its record, for callers that already hold one.
pub fn live_doc(value: &[u8], now_ms: i64) -> CommandResult<Option<&RawDocument>> {
    let rec = record::decode(value)?;
    Ok((rec.expires_ms > now_ms).then_some(rec.doc))
}
