//! Time to live: the expiry policy a collection's TTL indexes define, the expiry instant of
//! each document, and the background purge. The specification is the project's `ttl.md`;
//! in short:
//!
//! - a `{_ts: 1}` (or `{_ts: -1}`) index with `expireAfterSeconds` is Cosmos DB's collection
//!   default: `-1` (live forever unless a document says otherwise) or `n ≥ 1` seconds after the
//!   document's last modification; while it exists, a document's root `ttl` field, when it is a
//!   valid int32 value, overrides it (`-1` never, `n ≥ 1` seconds);
//! - any other single-field index with `expireAfterSeconds` is MongoDB's TTL index on a date
//!   field: the document expires that many seconds after the (earliest) date in the field;
//! - a document's expiry is the earliest instant any rule gives it; from that millisecond on it
//!   is gone for every command, and the purge removes its bytes later.
//!
//! Expiry instants are computed when a document is written and stored beside it (the record
//! header and the `expiry` keyspace), never in it.

use std::ops::Bound;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bson::{RawBsonRef, RawDocument, RawDocumentBuf};
use bytes::Bytes;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use crate::catalog::{Catalog, Collection, IndexSpec};
use crate::query::filter::Filter;
use crate::query::path;
use crate::storage::{Batch, Keyspace, StorageError, prefix_end, record};

pub mod announce;

/// Documents removed per purge batch (one atomic commit, collection lock held). A commit holds
/// the journal that every foreground write shares while it applies its changes: at 32
/// documents (64 changes or more) a write queued behind it waits some 40 µs. Batches of 128
/// made a foreground commit's p99 wait 250-370 µs; the scan and snapshot a batch starts with
/// cost little.
pub const PURGE_BATCH: usize = 32;
/// While clients send requests, the purge rests after each batch as long as the batch took
/// (a duty cycle of a half), up to this. The purge thread already runs only on CPU the
/// foreground leaves idle ([`crate::background`]); the rest spaces out what it writes to the
/// shared journal, which every foreground commit waits behind and every foreground sync
/// carries to disk.
const PURGE_REST_MAX: Duration = Duration::from_millis(4);
/// The longest the purge sleeps when nothing is due.
const PURGE_IDLE: Duration = Duration::from_secs(1);

/// One MongoDB-style TTL rule: a date field plus a number of seconds.
#[derive(Debug)]
pub struct DateRule {
    path: Vec<String>,
    seconds: i64,
    partial: Option<Filter>,
}

/// What a collection's TTL indexes say about expiry.
#[derive(Debug, Default)]
pub struct TtlPolicy {
    /// The Cosmos default from the `_ts` TTL index: `Some(-1)` or `Some(n ≥ 1)`; `None` when
    /// there is no such index (then document `ttl` fields are not interpreted either).
    pub cosmos_default: Option<i64>,
    /// The `_ts` TTL index's `partialFilterExpression`: documents it does not match are outside
    /// the Cosmos rules.
    pub cosmos_partial: Option<Filter>,
    /// Date-field TTL indexes.
    pub dates: Vec<DateRule>,
}

/// Whether `key` is a single-field key on `_ts` (any direction): the index whose
/// `expireAfterSeconds` carries Cosmos DB's collection default.
pub fn is_ts_key(key: &RawDocument) -> bool {
    let mut it = key.iter();
    matches!(
        (it.next(), it.next()),
        (Some(Ok((name, RawBsonRef::Int32(_) | RawBsonRef::Int64(_) | RawBsonRef::Double(_) | RawBsonRef::Decimal128(_)))), None)
            if name.as_str() == "_ts"
    )
}

impl TtlPolicy {
    /// The policy of an index list.
    pub fn from_indexes(indexes: &[IndexSpec]) -> Self {
        let mut policy = TtlPolicy::default();
        for spec in indexes {
            let Some(seconds) = spec.expire_after_seconds else {
                continue;
            };
            let partial = match &spec.partial_filter {
                Some(p) => match Filter::compile(p) {
                    Ok(f) => Some(f),
                    Err(e) => {
                        warn!(index = %spec.name, error = %e.errmsg, "ignoring a TTL index whose partial filter does not compile");
                        continue;
                    }
                },
                None => None,
            };
            if is_ts_key(&spec.key) {
                policy.cosmos_default = Some(seconds);
                policy.cosmos_partial = partial;
                continue;
            }
            let Some(Ok((field, _))) = spec.key.iter().next() else {
                continue;
            };
            policy.dates.push(DateRule {
                path: field.as_str().split('.').map(str::to_owned).collect(),
                seconds,
                partial,
            });
        }
        policy
    }

    /// A comparable summary of the rules (the defaults and each index's field, seconds and
    /// partial filter), to tell whether an index change alters expiry.
    pub fn describe(&self) -> String {
        use std::fmt::Write as _;
        let mut out = format!(
            "{:?}:{:?}",
            self.cosmos_default,
            self.cosmos_partial.is_some()
        );
        for r in &self.dates {
            let _ = write!(
                out,
                "|{}:{}:{:?}",
                r.path.join("."),
                r.seconds,
                r.partial.is_some()
            );
        }
        out
    }

    /// Whether no document of the collection can expire.
    pub fn is_empty(&self) -> bool {
        self.cosmos_default.is_none() && self.dates.is_empty()
    }

    /// The expiry instant (ms since the epoch) of `doc`, last modified at `modified_ms`;
    /// [`record::NEVER`] when no rule applies.
    pub fn expiry(&self, doc: &RawDocument, modified_ms: i64) -> i64 {
        let mut at = record::NEVER;
        if let Some(default) = self
            .cosmos_default
            .filter(|_| self.cosmos_partial.as_ref().is_none_or(|f| f.matches(doc)))
        {
            let seconds = match document_ttl(doc) {
                Some(-1) => None,
                Some(n) if n >= 1 => Some(n),
                // Not a TTL (absent, invalid, 0 or below -1): the default applies.
                _ => (default >= 1).then_some(default),
            };
            if let Some(s) = seconds {
                at = at.min(modified_ms.saturating_add(s.saturating_mul(1000)));
            }
        }
        for rule in &self.dates {
            if rule.partial.as_ref().is_some_and(|f| !f.matches(doc)) {
                continue;
            }
            // The earliest date the field holds (directly or in an array) counts.
            let earliest = path::values(doc, &rule.path, path::LeafArrays::ExpandOmitArray)
                .into_iter()
                .flatten()
                .filter_map(|v| match v {
                    RawBsonRef::DateTime(d) => Some(d.timestamp_millis()),
                    _ => None,
                })
                .min();
            if let Some(date) = earliest {
                at = at.min(date.saturating_add(rule.seconds.saturating_mul(1000)));
            }
        }
        at
    }
}

/// The document's own `ttl`, when it is valid: an int32, an int64 within int32's range, or a
/// double with no fractional part within int32's range. Everything else is not a TTL.
pub fn document_ttl(doc: &RawDocument) -> Option<i64> {
    let value = doc.get("ttl").ok().flatten()?;
    let in_range = |n: i64| (i64::from(i32::MIN)..=i64::from(i32::MAX)).contains(&n);
    match value {
        RawBsonRef::Int32(n) => Some(i64::from(n)),
        RawBsonRef::Int64(n) if in_range(n) => Some(n),
        #[expect(
            clippy::cast_possible_truncation,
            reason = "integral and within int32's range"
        )]
        RawBsonRef::Double(d)
            if d.is_finite()
                && d.fract() == 0.0
                && d >= f64::from(i32::MIN)
                && d <= f64::from(i32::MAX) =>
        {
            Some(d as i64)
        }
        _ => None,
    }
}

use crate::storage::record::instant_key;
pub use crate::storage::record::{expiry_key, instant_of};

/// Adds to `batch` what makes every document of `collection` carry the expiry its (new) policy
/// gives it. A document already expired at `now_ms` is removed instead: a policy change never
/// brings a document back. When `log`, returns the oplog operations of those removals.
pub fn recompute(
    snapshot: &dyn crate::storage::Snapshot,
    collection: &Collection,
    now_ms: i64,
    batch: &mut Batch,
    log: bool,
) -> Result<Vec<(RawDocumentBuf, Option<RawDocumentBuf>)>, StorageError> {
    let mut ops = Vec::new();
    let prefix = record::collection_prefix(collection.id);
    for entry in snapshot.prefix(Keyspace::Docs, &prefix) {
        let (key, value) = entry?;
        let rec = record::decode(&value)?;
        let Some(rid) = record::rid_of_doc_key(&key) else {
            continue;
        };
        // (A batch never touches one key twice: the order of two changes to one key within a
        // batch is not something to rely on.)
        let is_expired = rec.expires_ms <= now_ms;
        let expires = if is_expired {
            rec.expires_ms
        } else {
            collection.ttl.expiry(rec.doc, rec.modified_ms)
        };
        if expires == rec.expires_ms && !is_expired {
            continue;
        }
        if rec.expires_ms != record::NEVER {
            batch.delete_once(
                Keyspace::Expiry,
                expiry_key(collection.id, rec.expires_ms, rid).to_vec(),
            );
        }
        if is_expired {
            collection.delete_entries(rec.doc, rid, batch);
            batch.delete(Keyspace::Docs, key);
            // Logged here unless it is announced already (see `announce`).
            if log && !collection.announced_through(&expiry_key(collection.id, rec.expires_ms, rid))
            {
                log_delete(collection, rec.doc, &mut ops);
            }
            continue;
        }
        // Expired by the new policy at an instant the announcer has gone past: logged here.
        if log
            && expires <= now_ms
            && collection.announced_through(&expiry_key(collection.id, expires, rid))
        {
            log_delete(collection, rec.doc, &mut ops);
        }
        batch.replace(
            Keyspace::Docs,
            key.clone(),
            record::encode(rec.modified_ms, expires, rec.doc),
        );
        if expires != record::NEVER {
            batch.put(
                Keyspace::Expiry,
                expiry_key(collection.id, expires, rid).to_vec(),
                Vec::new(),
            );
        }
    }
    Ok(ops)
}

/// Adds the oplog operation of the removal of `doc` (expired) to `ops`.
fn log_delete(
    collection: &Collection,
    doc: &RawDocument,
    ops: &mut Vec<(RawDocumentBuf, Option<RawDocumentBuf>)>,
) {
    if let Ok(Some(id)) = doc.get("_id") {
        ops.push((
            crate::oplog::log::delete_op(&collection.namespace(), collection.uuid(), id),
            collection.records_images().then(|| doc.to_owned()),
        ));
    }
}

/// `serverStatus.metrics.ttl`.
#[derive(Debug, Default)]
pub struct TtlMetrics {
    /// `deletedDocuments`.
    pub deleted: AtomicU64,
    /// `passes`.
    pub passes: AtomicU64,
}

/// What one purge batch found due in a snapshot: the expiry keys it looked at and the changes
/// that remove them, which hold as long as no write to the collection commits before them.
#[derive(Debug)]
pub struct Due {
    /// [`Collection::write_epoch`] before the snapshot was taken.
    epoch: u64,
    /// The instant the documents were judged expired at.
    now_ms: i64,
    /// The expiry keys scanned, in order.
    keys: Vec<Bytes>,
    /// Their removal (with their documents and index entries) as the snapshot saw them.
    batch: Batch,
    removed: usize,
    /// The last expiry key looked at, where the next batch of the pass starts.
    pub last: Option<Bytes>,
    /// Whether more are due after it.
    pub more: bool,
}

/// Adds to `batch` the removal of the expiry entry `key` and, if its document still carries
/// that instant (otherwise the entry is stale), of the document and its index entries.
/// Returns whether a document goes.
fn remove_due(
    snapshot: &dyn crate::storage::Snapshot,
    collection: &Collection,
    key: &Bytes,
    batch: &mut Batch,
) -> Result<bool, StorageError> {
    let (Some(rid), Some(expires)) = (record::rid_of_expiry_key(key), instant_of(key)) else {
        return Ok(false);
    };
    let doc_key = record::doc_key(collection.id, rid);
    let mut removed = false;
    if let Some(value) = snapshot.get(Keyspace::Docs, &doc_key)?
        && let rec = record::decode(&value)?
        && rec.expires_ms == expires
    {
        collection.delete_entries(rec.doc, rid, batch);
        // No tombstone where the engine's compactions drop what the purge is done with.
        batch.expire(Keyspace::Docs, doc_key.to_vec());
        removed = true;
    }
    batch.delete_once(Keyspace::Expiry, key.clone());
    Ok(removed)
}

/// Finds up to [`PURGE_BATCH`] documents of `collection` that expired at or before `now_ms`,
/// oldest first, in a snapshot and without the collection's lock: this is the purge's reading,
/// done at background priority. The scan starts after `start_after` (the last expiry key an
/// earlier batch of the same pass saw), so a pass never walks over what it already deleted.
pub fn find_due(
    catalog: &Catalog,
    collection: &Collection,
    now_ms: i64,
    start_after: Option<&[u8]>,
) -> Result<Due, StorageError> {
    let epoch = collection.write_epoch();
    let snapshot = catalog.snapshot();
    let prefix = collection.id.to_be_bytes();
    let mut upper = prefix.to_vec();
    // Everything whose instant is ≤ now: keys below (prefix, now + 1).
    upper.extend_from_slice(&instant_key(now_ms.saturating_add(1)));
    // With an oplog, only what is announced (see `announce`): keys up to the last announced.
    if catalog.oplog().is_some() {
        let announced = collection
            .announced
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        let mut through = announced.unwrap_or_else(|| prefix.to_vec());
        through.push(0);
        if through < upper {
            upper = through;
        }
    }
    let lower = match start_after {
        Some(key) => Bound::Excluded(key),
        None => Bound::Included(&prefix[..]),
    };
    let mut due = Due {
        epoch,
        now_ms,
        keys: Vec::new(),
        batch: Batch::new(),
        removed: 0,
        last: None,
        more: false,
    };
    for entry in snapshot.range(Keyspace::Expiry, lower, Bound::Excluded(&upper[..]), false) {
        if due.removed >= PURGE_BATCH {
            due.more = true;
            break;
        }
        let (key, _) = entry?;
        if remove_due(&*snapshot, collection, &key, &mut due.batch)? {
            due.removed += 1;
        }
        due.keys.push(key.clone());
        due.last = Some(key);
    }
    Ok(due)
}

/// Commits what [`find_due`] found, under the collection's write lock: as found if no write to
/// the collection committed since its snapshot, otherwise after checking each entry again
/// against the current data. Returns how many documents it removed. This holds the lock and the
/// journal, so it runs at normal priority.
pub fn remove_found(
    catalog: &Catalog,
    collection: &Collection,
    due: Due,
) -> Result<usize, StorageError> {
    let Some(_guard) = collection.lock() else {
        return Ok(0);
    };
    // A document an open transaction changed is left to a later pass: the transaction's
    // commit writes it whole (see `crate::txn`).
    let locks = catalog.locks();
    let (batch, removed) = if collection.write_epoch() == due.epoch && !locks.any() {
        (due.batch, due.removed)
    } else {
        let snapshot = catalog.snapshot();
        let mut batch = Batch::new();
        let mut removed = 0;
        for key in &due.keys {
            if locks.any()
                && let Some(rid) = record::rid_of_expiry_key(key)
                && locks
                    .blocked(&crate::txn::locks::storage_claim(
                        Keyspace::Docs,
                        &record::doc_key(collection.id, rid),
                    ))
                    .is_some()
            {
                continue;
            }
            if remove_due(&*snapshot, collection, key, &mut batch)? {
                removed += 1;
            }
        }
        (batch, removed)
    };
    if !batch.is_empty() {
        let mut batch = batch;
        // (With an oplog, what is removed here was announced: see `announce`.)
        if removed > 0 {
            // The records stay until a compaction drops them: the clock must never again read
            // an instant at which they were live (see `crate::clock`).
            Catalog::note_expired_at(&mut batch, due.now_ms);
        }
        catalog.store().commit(batch)?;
    }
    Ok(removed)
}

/// Commits a [`Due`] batch: [`remove_found`], wherever the caller runs it.
pub type Remover<'a> = &'a dyn Fn(&Arc<Collection>, Due) -> Result<usize, StorageError>;

/// The earliest expiry instant pending in `collection` after `start_after` (or from its
/// start), if any.
pub(crate) fn next_due(
    catalog: &Catalog,
    collection: &Collection,
    start_after: Option<&[u8]>,
) -> Result<Option<i64>, StorageError> {
    let prefix = collection.id.to_be_bytes();
    let upper = prefix_end(&prefix).unwrap_or_default();
    let lower = match start_after {
        Some(key) => Bound::Excluded(key),
        None => Bound::Included(&prefix[..]),
    };
    let snapshot = catalog.snapshot();
    let first = snapshot
        .range(Keyspace::Expiry, lower, Bound::Excluded(&upper[..]), false)
        .next()
        .transpose()?;
    Ok(first.and_then(|(key, _)| instant_of(&key)))
}

/// What the purge remembers between passes: per collection, the last expiry key it removed.
/// Entries below it can only appear for documents that were already expired when written
/// (a date TTL on a past date), which every [`FULL_PASS_EVERY`]-th pass picks up; starting
/// there spares every pass a walk over the deletions of the previous ones.
#[derive(Debug, Default)]
pub struct PurgeMarks {
    last_removed: std::collections::HashMap<u64, Bytes>,
    passes: u64,
    /// The last call stopped part-way (its caller said stop): the next one continues the pass.
    unfinished: bool,
}

/// Every this many passes the purge scans each collection from its start.
pub const FULL_PASS_EVERY: u64 = 30;

/// How a call to [`purge_pass`] ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PassEnd {
    /// The next instant something falls due (now, when the pass is unfinished).
    pub next: Option<i64>,
    /// Whether the pass went over every collection; `false` when `progress` asked it to stop,
    /// and the next call picks up where it stopped.
    pub finished: bool,
}

/// One pass over every collection with a TTL policy: finds what is due batch by batch
/// ([`find_due`]), hands each batch to `remove` to commit ([`remove_found`]), and calls
/// `progress` with the number removed; it stops part-way when `progress` returns false.
pub fn purge_pass(
    catalog: &Catalog,
    now_ms: i64,
    marks: &mut PurgeMarks,
    remove: Remover<'_>,
    progress: &dyn Fn(usize) -> bool,
) -> Result<PassEnd, StorageError> {
    if !std::mem::take(&mut marks.unfinished) {
        marks.passes += 1;
        if marks.passes.is_multiple_of(FULL_PASS_EVERY) {
            marks.last_removed.clear();
        }
    }
    let mut next: Option<i64> = None;
    for collection in catalog.all_collections() {
        let mut cursor = marks.last_removed.get(&collection.id).cloned();
        if collection.ttl.is_empty() && next_due(catalog, &collection, cursor.as_deref())?.is_none()
        {
            continue;
        }
        let stop = loop {
            let due = find_due(catalog, &collection, now_ms, cursor.as_deref())?;
            let (last, more) = (due.last.clone(), due.more);
            let n = remove(&collection, due)?;
            let stop = !progress(n);
            if last.is_some() {
                cursor = last;
            }
            if !more || stop {
                break stop;
            }
        };
        if let Some(key) = &cursor {
            marks.last_removed.insert(collection.id, key.clone());
        }
        if stop {
            marks.unfinished = true;
            return Ok(PassEnd {
                next: Some(now_ms),
                finished: false,
            });
        }
        if let Some(due) = next_due(catalog, &collection, cursor.as_deref())? {
            next = Some(next.map_or(due, |n| n.min(due)));
        }
    }
    Ok(PassEnd {
        next,
        finished: true,
    })
}

/// The longest the purge works on its background thread before it looks at its own progress.
const PURGE_SLICE: Duration = Duration::from_secs(1);
/// A slice that removed fewer documents per second than this, with more still due, was
/// starved of CPU (the background thread runs only on idle cores, and a saturated machine has
/// none): the next slice runs at normal priority, the one after that back in the background.
const STARVED_RATE: f64 = 10_000.0;

/// The background purge: runs a pass whenever something is due (or the clock was moved),
/// and counts `metrics.ttl`. The tombstones it writes are counted as garbage, and compacted away
/// by `crate::compactor` once they are many.
pub async fn purge_task(
    catalog: Arc<Catalog>,
    clock: Arc<crate::clock::Clock>,
    metrics: Arc<TtlMetrics>,
    requests: Arc<dyn Fn() -> u64 + Send + Sync>,
    cancel: CancellationToken,
) {
    let worker = crate::background::Worker::start("ebb-ttl");
    let runtime = tokio::runtime::Handle::current();
    let mut marks = Some(PurgeMarks::default());
    let mut on_normal_priority = false;
    loop {
        let now = clock.now_ms();
        let started = std::time::Instant::now();
        let job = {
            let catalog = Arc::clone(&catalog);
            let metrics = Arc::clone(&metrics);
            let mut taken = marks.take().unwrap_or_default();
            let requests = Arc::clone(&requests);
            let runtime = runtime.clone();
            let in_background = !on_normal_priority;
            move || {
                // The background thread reads; the commit, which holds the collection's lock
                // and the journal every writer waits for, runs on a normal-priority thread, so
                // that a starved background thread never holds up a writer.
                let remove = |collection: &Arc<Collection>, due: Due| {
                    if !in_background {
                        return remove_found(&catalog, collection, due);
                    }
                    let (tx, rx) = std::sync::mpsc::sync_channel(1);
                    let catalog = Arc::clone(&catalog);
                    let collection = Arc::clone(collection);
                    runtime.spawn_blocking(move || {
                        let _ = tx.send(remove_found(&catalog, &collection, due));
                    });
                    rx.recv().unwrap_or_else(|_| {
                        Err(StorageError::Engine("the server is shutting down".into()))
                    })
                };
                let removed = AtomicU64::new(0);
                let batch_started = std::cell::Cell::new(std::time::Instant::now());
                let requests_seen = std::cell::Cell::new(requests());
                let result = purge_pass(&catalog, now, &mut taken, &remove, &|n| {
                    // Counted per batch, so progress shows while a large purge runs.
                    metrics.deleted.fetch_add(n as u64, Ordering::Relaxed);
                    removed.fetch_add(n as u64, Ordering::Relaxed);
                    // While clients are sending requests, the purge rests as long as each batch
                    // worked: about half its idle rate (still above the 50k/s it must keep up
                    // with), and half as many journal writes for foreground syncs to carry.
                    // With no requests it runs flat out.
                    let now_requests = requests();
                    if n > 0 && now_requests != requests_seen.get() {
                        std::thread::sleep(batch_started.get().elapsed().min(PURGE_REST_MAX));
                    }
                    requests_seen.set(requests());
                    batch_started.set(std::time::Instant::now());
                    started.elapsed() < PURGE_SLICE
                });
                (result.map(|end| (removed.into_inner(), end)), taken)
            }
        };
        let pass = if on_normal_priority {
            tokio::task::spawn_blocking(job).await.ok()
        } else {
            worker.run(job).await
        };
        let next = match pass {
            Some((Ok((removed, end)), taken)) => {
                marks = Some(taken);
                if end.finished {
                    metrics.passes.fetch_add(1, Ordering::Relaxed);
                }
                // While more is due, the compactor waits for the end of the mass removal.
                catalog.store().storage().ledger().defer(!end.finished);
                if removed > 0 {
                    debug!(removed, finished = end.finished, "TTL purge");
                    // Also kept in the catalog with each batch, for restarts.
                    clock.raise_floor(now);
                }
                #[expect(clippy::cast_precision_loss, reason = "a rate")]
                let rate = removed as f64 / started.elapsed().as_secs_f64();
                on_normal_priority = !end.finished && !on_normal_priority && rate < STARVED_RATE;
                if on_normal_priority {
                    info!(
                        removed,
                        "TTL purge starved of idle CPU: its next slice runs at normal priority"
                    );
                }
                end.next
            }
            Some((Err(e), taken)) => {
                marks = Some(taken);
                warn!(error = %e, "TTL purge failed");
                None
            }
            None => {
                warn!("TTL purge pass panicked");
                None
            }
        };
        let wait = next.map_or(PURGE_IDLE, |due| {
            let ms = due.saturating_sub(clock.now_ms()).clamp(0, 1000);
            Duration::from_millis(ms.cast_unsigned())
        });
        tokio::select! {
            () = cancel.cancelled() => return,
            () = tokio::time::sleep(wait) => {}
            () = clock.changed() => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use bson::rawdoc;

    use super::*;

    #[test]
    fn document_ttl_validation() {
        let cases: Vec<(bson::RawDocumentBuf, Option<i64>)> = vec![
            (rawdoc! { "ttl": 20 }, Some(20)),
            (rawdoc! { "ttl": 20_i64 }, Some(20)),
            (rawdoc! { "ttl": 20.0 }, Some(20)),
            (rawdoc! { "ttl": 20.5 }, None),
            (rawdoc! { "ttl": 2_147_483_649_i64 }, None),
            (rawdoc! { "ttl": 2_147_483_647_i64 }, Some(2_147_483_647)),
            (rawdoc! { "ttl": 2_147_483_648.0 }, None),
            (rawdoc! { "ttl": -1 }, Some(-1)),
            (rawdoc! { "ttl": -0.0 }, Some(0)),
            (rawdoc! { "ttl": f64::NAN }, None),
            (rawdoc! { "ttl": f64::INFINITY }, None),
            (rawdoc! { "ttl": "20" }, None),
            (rawdoc! { "ttl": bson::RawBson::Null }, None),
            (rawdoc! { "TTL": 20 }, None),
            (rawdoc! { "a": { "ttl": 20 } }, None),
        ];
        for (doc, expected) in cases {
            assert_eq!(document_ttl(&doc), expected, "{doc:?}");
        }
    }

    fn cosmos(default: i64) -> TtlPolicy {
        TtlPolicy {
            cosmos_default: Some(default),
            cosmos_partial: None,
            dates: Vec::new(),
        }
    }

    #[test]
    fn the_matrix() {
        let none = TtlPolicy::default();
        let t0 = 1_000_000;
        let doc_none = rawdoc! { "a": 1 };
        let doc_never = rawdoc! { "ttl": -1 };
        let doc_m = rawdoc! { "ttl": 20 };
        // no _ts TTL index: nothing expires, ttl ignored
        for d in [&doc_none, &doc_never, &doc_m] {
            assert_eq!(none.expiry(d, t0), record::NEVER);
        }
        // default -1
        assert_eq!(cosmos(-1).expiry(&doc_none, t0), record::NEVER);
        assert_eq!(cosmos(-1).expiry(&doc_never, t0), record::NEVER);
        assert_eq!(cosmos(-1).expiry(&doc_m, t0), t0 + 20_000);
        // default n
        assert_eq!(cosmos(10).expiry(&doc_none, t0), t0 + 10_000);
        assert_eq!(cosmos(10).expiry(&doc_never, t0), record::NEVER);
        assert_eq!(cosmos(10).expiry(&doc_m, t0), t0 + 20_000);
        // invalid ttl values fall back to the default
        assert_eq!(cosmos(10).expiry(&rawdoc! { "ttl": 20.5 }, t0), t0 + 10_000);
        assert_eq!(cosmos(10).expiry(&rawdoc! { "ttl": 0 }, t0), t0 + 10_000);
        assert_eq!(cosmos(10).expiry(&rawdoc! { "ttl": -2 }, t0), t0 + 10_000);
        assert_eq!(cosmos(-1).expiry(&rawdoc! { "ttl": 0 }, t0), record::NEVER);
    }

    #[test]
    fn date_rules_take_the_earliest_date() {
        let policy = TtlPolicy {
            cosmos_default: None,
            cosmos_partial: None,
            dates: vec![DateRule {
                path: vec!["at".into()],
                seconds: 5,
                partial: None,
            }],
        };
        let d = |ms| bson::DateTime::from_millis(ms);
        assert_eq!(policy.expiry(&rawdoc! { "at": d(100_000) }, 0), 105_000);
        assert_eq!(
            policy.expiry(&rawdoc! { "at": [d(300_000), d(100_000), 7] }, 0),
            105_000
        );
        assert_eq!(
            policy.expiry(&rawdoc! { "at": "yesterday" }, 0),
            record::NEVER
        );
        assert_eq!(policy.expiry(&rawdoc! { "b": 1 }, 0), record::NEVER);
    }

    #[test]
    fn expiry_keys_order_by_instant() {
        let a = expiry_key(7, -5, 9);
        let b = expiry_key(7, 0, 1);
        let c = expiry_key(7, 10, 1);
        assert!(a < b && b < c);
        assert!(expiry_key(7, i64::MAX - 1, 9) < expiry_key(8, i64::MIN, 1));
    }

    // -- the purge's two halves: finding (no lock) and removing (under the lock) --

    fn setup() -> (Arc<crate::storage::GroupCommit>, Catalog, Arc<Collection>) {
        let store = Arc::new(crate::storage::GroupCommit::new(Arc::new(
            crate::storage::MemoryStorage::new(),
        )));
        let catalog = Catalog::open(Arc::clone(&store)).unwrap();
        let (c, _) = catalog
            .create("db", "c", bson::RawDocumentBuf::new())
            .unwrap();
        (store, catalog, c)
    }

    /// The record id the tests store document `id` under.
    fn rid(id: i32) -> u64 {
        u64::try_from(id).unwrap() + 1
    }

    /// Writes document `id` expiring at `expires`, with its expiry entry, dropping the entry of
    /// `previous` (its old instant) if given: what a write does.
    fn write(
        store: &crate::storage::GroupCommit,
        c: &Collection,
        id: i32,
        previous: Option<i64>,
        expires: i64,
    ) {
        let mut batch = Batch::new();
        if let Some(old) = previous {
            batch.delete(Keyspace::Expiry, expiry_key(c.id, old, rid(id)).to_vec());
        }
        batch.put(
            Keyspace::Docs,
            record::doc_key(c.id, rid(id)).to_vec(),
            record::encode(0, expires, &rawdoc! { "_id": id }),
        );
        batch.put(
            Keyspace::Expiry,
            expiry_key(c.id, expires, rid(id)).to_vec(),
            Vec::new(),
        );
        store.commit(batch).unwrap();
    }

    fn keys(store: &crate::storage::GroupCommit, ks: Keyspace) -> Vec<Bytes> {
        store
            .storage()
            .snapshot()
            .range(ks, Bound::Unbounded, Bound::Unbounded, false)
            .map(|e| e.unwrap().0)
            .collect()
    }

    #[test]
    fn what_was_found_is_removed_when_nothing_was_written_since() {
        let (store, catalog, c) = setup();
        for id in 1..=3 {
            write(&store, &c, id, None, 1_000);
        }
        write(&store, &c, 4, None, 9_000);
        let due = find_due(&catalog, &c, 5_000, None).unwrap();
        assert_eq!((due.removed, due.keys.len(), due.more), (3, 3, false));
        assert_eq!(remove_found(&catalog, &c, due).unwrap(), 3);
        assert_eq!(keys(&store, Keyspace::Docs).len(), 1);
        assert_eq!(
            keys(&store, Keyspace::Expiry),
            vec![Bytes::from(expiry_key(c.id, 9_000, rid(4)).to_vec())]
        );
    }

    #[test]
    fn a_write_between_finding_and_removing_is_respected() {
        let (store, catalog, c) = setup();
        for id in 1..=3 {
            write(&store, &c, id, None, 1_000);
        }
        // Document 4's entry at 1 000 is stale when the purge looks: the document says 9 000.
        write(&store, &c, 4, None, 9_000);
        let mut batch = Batch::new();
        batch.put(
            Keyspace::Expiry,
            expiry_key(c.id, 1_000, rid(4)).to_vec(),
            Vec::new(),
        );
        store.commit(batch).unwrap();

        let due = find_due(&catalog, &c, 5_000, None).unwrap();
        assert_eq!((due.removed, due.keys.len()), (3, 4));
        {
            // Writers, under the lock: document 2 gets a later instant, and document 4 is
            // rewritten to expire at 1 000 after all (its entry is current again).
            let _writer = c.lock().unwrap();
            write(&store, &c, 2, Some(1_000), 8_000);
            write(&store, &c, 4, Some(9_000), 1_000);
        }
        // Checked again: 1 and 3 go as found, 2 stays, 4 goes although the snapshot had it live.
        assert_eq!(remove_found(&catalog, &c, due).unwrap(), 3);
        let docs = keys(&store, Keyspace::Docs);
        assert_eq!(
            docs,
            vec![Bytes::from(record::doc_key(c.id, rid(2)).to_vec())]
        );
        assert_eq!(
            keys(&store, Keyspace::Expiry),
            vec![Bytes::from(expiry_key(c.id, 8_000, rid(2)).to_vec())]
        );
    }

    #[test]
    fn a_pass_stopped_part_way_resumes_where_it_stopped() {
        let (store, catalog, c) = setup();
        let total = i32::try_from(PURGE_BATCH * 3).unwrap();
        for id in 0..total {
            write(&store, &c, id, None, 1_000 + i64::from(id));
        }
        let remove: Remover<'_> = &|c, due| remove_found(&catalog, c, due);
        let mut marks = PurgeMarks::default();
        // Stop after the first batch.
        let end = purge_pass(&catalog, 1_000_000, &mut marks, remove, &|_| false).unwrap();
        assert_eq!(
            end,
            PassEnd {
                next: Some(1_000_000),
                finished: false
            }
        );
        assert_eq!(keys(&store, Keyspace::Docs).len(), PURGE_BATCH * 2);
        // The next call goes on from there and finishes.
        let counted = std::cell::Cell::new(0);
        let end = purge_pass(&catalog, 1_000_000, &mut marks, remove, &|n| {
            counted.set(counted.get() + n);
            true
        })
        .unwrap();
        assert!(end.finished);
        assert_eq!(counted.get(), PURGE_BATCH * 2);
        assert!(keys(&store, Keyspace::Docs).is_empty());
        assert!(keys(&store, Keyspace::Expiry).is_empty());
        assert_eq!(marks.passes, 1, "a resumed pass is still one pass");
    }
}
