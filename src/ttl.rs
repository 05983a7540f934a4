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

use bson::{RawBsonRef, RawDocument};
use bytes::Bytes;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use crate::catalog::{Catalog, Collection, IndexSpec};
use crate::query::filter::Filter;
use crate::query::path;
use crate::storage::{Batch, Keyspace, StorageError, prefix_end, record};

/// Documents removed per purge batch (one atomic commit, collection lock held): small enough
/// that a foreground commit queued behind one (they share the journal) waits about a tenth of a
/// millisecond.
pub const PURGE_BATCH: usize = 128;
/// While clients send requests, the purge rests after each batch twice as long as the batch
/// took (a duty cycle of a third, leaving the cores to them), up to this.
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

/// An expiry instant as an order-preserving 8-byte key part.
fn instant_key(ms: i64) -> [u8; 8] {
    (ms.cast_unsigned() ^ (1 << 63)).to_be_bytes()
}

/// The `expiry` keyspace key of a document: collection id, instant, `_id` keystring.
pub fn expiry_key(collection_id: u64, expires_ms: i64, id_key: &[u8]) -> Vec<u8> {
    let mut key = Vec::with_capacity(16 + id_key.len());
    key.extend_from_slice(&collection_id.to_be_bytes());
    key.extend_from_slice(&instant_key(expires_ms));
    key.extend_from_slice(id_key);
    key
}

/// Adds to `batch` what makes every document of `collection` carry the expiry its (new) policy
/// gives it. A document already expired at `now_ms` is removed instead: a policy change never
/// brings a document back.
pub fn recompute(
    snapshot: &dyn crate::storage::Snapshot,
    collection: &Collection,
    now_ms: i64,
    batch: &mut Batch,
) -> Result<(), StorageError> {
    let prefix = record::collection_prefix(collection.id);
    let upper = prefix_end(&prefix).unwrap_or_default();
    for entry in snapshot.range(
        Keyspace::Docs,
        Bound::Included(&prefix[..]),
        Bound::Excluded(&upper[..]),
        false,
    ) {
        let (key, value) = entry?;
        let rec = record::decode(&value)?;
        let Some(id_key) = key.get(8..) else { continue };
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
            batch.delete(
                Keyspace::Expiry,
                expiry_key(collection.id, rec.expires_ms, id_key),
            );
        }
        if is_expired {
            collection.delete_entries(rec.doc, id_key, batch);
            batch.delete(Keyspace::Docs, key);
            continue;
        }
        batch.put(
            Keyspace::Docs,
            key.clone(),
            record::encode(rec.modified_ms, expires, rec.doc),
        );
        if expires != record::NEVER {
            batch.put(
                Keyspace::Expiry,
                expiry_key(collection.id, expires, id_key),
                Vec::new(),
            );
        }
    }
    Ok(())
}

/// `serverStatus.metrics.ttl`.
#[derive(Debug, Default)]
pub struct TtlMetrics {
    /// `deletedDocuments`.
    pub deleted: AtomicU64,
    /// `passes`.
    pub passes: AtomicU64,
}

/// Removes up to [`PURGE_BATCH`] documents of `collection` that expired at or before `now_ms`,
/// oldest first, with their expiry entries, in one commit under the collection's write lock.
/// The scan starts after `start_after` (the last expiry key an earlier batch of the same pass
/// saw), so a pass never walks over what it already deleted. Returns how many documents it
/// removed, the last expiry key it looked at, and whether more are due.
pub fn purge_collection(
    catalog: &Catalog,
    collection: &Collection,
    now_ms: i64,
    start_after: Option<&[u8]>,
) -> Result<(usize, Option<Bytes>, bool), StorageError> {
    let Some(_guard) = collection.lock() else {
        return Ok((0, None, false));
    };
    let snapshot = catalog.snapshot();
    let prefix = collection.id.to_be_bytes();
    let mut upper = prefix.to_vec();
    // Everything whose instant is ≤ now: keys below (prefix, now + 1).
    upper.extend_from_slice(&instant_key(now_ms.saturating_add(1)));
    let lower = match start_after {
        Some(key) => Bound::Excluded(key),
        None => Bound::Included(&prefix[..]),
    };
    let mut batch = Batch::new();
    let mut removed = 0;
    let mut more = false;
    let mut last = None;
    for entry in snapshot.range(Keyspace::Expiry, lower, Bound::Excluded(&upper[..]), false) {
        if removed >= PURGE_BATCH {
            more = true;
            break;
        }
        let (key, _) = entry?;
        let (Some(id_key), Some(instant)) = (
            key.get(16..),
            key.get(8..16).and_then(|b| <[u8; 8]>::try_from(b).ok()),
        ) else {
            continue;
        };
        let expires = (u64::from_be_bytes(instant) ^ (1 << 63)).cast_signed();
        let doc_key = record::doc_key(collection.id, id_key);
        // The entry is current only if the document still carries this instant.
        if let Some(value) = snapshot.get(Keyspace::Docs, &doc_key)?
            && let rec = record::decode(&value)?
            && rec.expires_ms == expires
        {
            collection.delete_entries(rec.doc, id_key, &mut batch);
            batch.delete(Keyspace::Docs, doc_key);
            removed += 1;
        }
        batch.delete(Keyspace::Expiry, key.clone());
        last = Some(key);
    }
    if !batch.is_empty() {
        catalog.store().commit(batch)?;
    }
    Ok((removed, last, more))
}

/// The earliest expiry instant pending in `collection` after `start_after` (or from its
/// start), if any.
fn next_due(
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
    Ok(first.and_then(|(key, _)| {
        key.get(8..16)
            .and_then(|b| <[u8; 8]>::try_from(b).ok())
            .map(|b| (u64::from_be_bytes(b) ^ (1 << 63)).cast_signed())
    }))
}

/// What the purge remembers between passes: per collection, the last expiry key it removed.
/// Entries below it can only appear for documents that were already expired when written
/// (a date TTL on a past date), which every [`FULL_PASS_EVERY`]-th pass picks up; starting
/// there spares every pass a walk over the deletions of the previous ones.
#[derive(Debug, Default)]
pub struct PurgeMarks {
    last_removed: std::collections::HashMap<u64, Bytes>,
    passes: u64,
}

/// Every this many passes the purge scans each collection from its start.
pub const FULL_PASS_EVERY: u64 = 30;

/// One pass over every collection with a TTL policy: removes what is due, calling `progress`
/// after each batch with the number removed. Returns the next instant something falls due.
pub fn purge_pass(
    catalog: &Catalog,
    now_ms: i64,
    marks: &mut PurgeMarks,
    progress: &dyn Fn(usize),
) -> Result<Option<i64>, StorageError> {
    marks.passes += 1;
    if marks.passes.is_multiple_of(FULL_PASS_EVERY) {
        marks.last_removed.clear();
    }
    let mut next: Option<i64> = None;
    for collection in catalog.all_collections() {
        let mut cursor = marks.last_removed.get(&collection.id).cloned();
        if collection.ttl.is_empty() && next_due(catalog, &collection, cursor.as_deref())?.is_none()
        {
            continue;
        }
        loop {
            let (n, last, more) =
                purge_collection(catalog, &collection, now_ms, cursor.as_deref())?;
            progress(n);
            if last.is_some() {
                cursor = last;
            }
            if !more {
                break;
            }
        }
        if let Some(key) = &cursor {
            marks.last_removed.insert(collection.id, key.clone());
        }
        if let Some(due) = next_due(catalog, &collection, cursor.as_deref())? {
            next = Some(next.map_or(due, |n| n.min(due)));
        }
    }
    Ok(next)
}

/// The background purge: runs a pass whenever something is due (or the clock was moved),
/// counts `metrics.ttl`, and compacts after large purges so tombstones do not slow scans.
pub async fn purge_task(
    catalog: Arc<Catalog>,
    clock: Arc<crate::clock::Clock>,
    metrics: Arc<TtlMetrics>,
    requests: Arc<dyn Fn() -> u64 + Send + Sync>,
    cancel: CancellationToken,
) {
    let mut since_compaction = 0_usize;
    let mut marks = Some(PurgeMarks::default());
    loop {
        let now = clock.now_ms();
        let pass = {
            let catalog = Arc::clone(&catalog);
            let metrics = Arc::clone(&metrics);
            let mut taken = marks.take().unwrap_or_default();
            let requests = Arc::clone(&requests);
            tokio::task::spawn_blocking(move || {
                let removed = AtomicU64::new(0);
                let batch_started = std::cell::Cell::new(std::time::Instant::now());
                let requests_seen = std::cell::Cell::new(requests());
                let result = purge_pass(&catalog, now, &mut taken, &|n| {
                    // Counted per batch, so progress shows while a large purge runs.
                    metrics.deleted.fetch_add(n as u64, Ordering::Relaxed);
                    removed.fetch_add(n as u64, Ordering::Relaxed);
                    // A large purge runs batch after batch on a 2-core machine. While clients
                    // are sending requests, it rests twice as long as each batch worked: a
                    // third of its idle rate (still more than the 50k/s it must keep up with)
                    // keeps foreground p99 from doubling. With no requests it runs flat out.
                    let now_requests = requests();
                    if n > 0 && now_requests != requests_seen.get() {
                        std::thread::sleep((batch_started.get().elapsed() * 2).min(PURGE_REST_MAX));
                    }
                    requests_seen.set(requests());
                    batch_started.set(std::time::Instant::now());
                });
                (result.map(|next| (removed.into_inner(), next)), taken)
            })
            .await
        };
        let next = match pass {
            Ok((Ok((removed, next)), taken)) => {
                marks = Some(taken);
                metrics.passes.fetch_add(1, Ordering::Relaxed);
                if removed > 0 {
                    debug!(removed, "TTL purge");
                }
                since_compaction += usize::try_from(removed).unwrap_or(usize::MAX);
                next
            }
            Ok((Err(e), taken)) => {
                marks = Some(taken);
                warn!(error = %e, "TTL purge failed");
                None
            }
            Err(e) => {
                warn!(error = %e, "TTL purge task failed");
                None
            }
        };
        if since_compaction >= 100_000 {
            since_compaction = 0;
            let catalog = Arc::clone(&catalog);
            let compacted = tokio::task::spawn_blocking(move || {
                // Only the small expiry keyspace: rewriting every document (a major compaction
                // of `docs`) stalled foreground requests for tens of milliseconds, and fjall's
                // own compaction drops the documents' tombstones as it merges their tables.
                catalog.store().storage().compact(&[Keyspace::Expiry])
            })
            .await;
            match compacted {
                Ok(Ok(())) => info!("compacted after TTL purges"),
                Ok(Err(e)) => warn!(error = %e, "compaction after TTL purges failed"),
                Err(e) => warn!(error = %e, "compaction task failed"),
            }
        }
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
        let a = expiry_key(7, -5, b"x");
        let b = expiry_key(7, 0, b"a");
        let c = expiry_key(7, 10, b"a");
        assert!(a < b && b < c);
        assert!(expiry_key(7, i64::MAX - 1, b"z") < expiry_key(8, i64::MIN, b"a"));
    }
}
