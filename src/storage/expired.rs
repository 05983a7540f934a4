//! The compaction filter that drops expired document records (see `docs/storage.md`, "Expiry
//! without tombstones").
//!
//! The TTL purge removes an expired document's expiry entry and index entries in one commit,
//! and leaves the record itself ([`super::Op::Expire`]): it is invisible already (its header's
//! instant has passed, and reads judge every record by it), and writing a tombstone for it
//! would cost one more entry per document, to be compacted away later. When a compaction of the
//! `docs` keyspace rewrites a record, this filter drops it if both hold:
//!
//! - its header's expiry instant is at or before now, by the server's clock (the one reads
//!   judge by, so nothing a reader could see is dropped), and
//! - its expiry entry (collection id · that instant · `_id`) is gone: the purge is done with
//!   it, so its index entries are gone too and it has been counted (`metrics.ttl`) once.
//!
//! A record whose expiry moved (an update, `collMod`) carries the new instant, whose entry
//! exists until that instant comes and the purge takes it: it is kept. An older version of a
//! document carries an older instant whose entry is gone: it is dropped, which changes nothing,
//! as the newer version hides it. Dropping means replacing the record with a tombstone in the
//! compaction's output ([`Verdict::Remove`]), which hides any older version of the key in lower
//! levels, and which the compaction into the last level drops.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use fjall::compaction::filter::{CompactionFilter, Context, Factory, ItemAccessor, Verdict};

use super::record;

/// The server's clock, as the filter reads it.
pub type Clock = Arc<dyn Fn() -> i64 + Send + Sync>;

/// What the filters of every compaction share.
#[derive(Default)]
pub struct ExpiredRecords {
    /// The clock expiry is judged by; none (the default) drops nothing.
    clock: RwLock<Option<Clock>>,
    /// The `expiry` keyspace, where the purge's progress is read.
    expiry: RwLock<Option<fjall::Keyspace>>,
    /// Records dropped so far.
    dropped: AtomicU64,
    /// Whether a clock was given (read by every commit: an atomic, not the lock).
    active: AtomicBool,
}

impl ExpiredRecords {
    /// Sets the clock; from then on compactions drop what the purge is done with.
    pub fn set_clock(&self, clock: Clock) {
        *self
            .clock
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(clock);
        self.active.store(true, Ordering::Release);
    }

    /// Sets the keyspace expiry entries are read from.
    pub fn set_expiry(&self, expiry: fjall::Keyspace) {
        *self
            .expiry
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(expiry);
    }

    /// Lets go of the `expiry` keyspace: the filter holding it, held by the database, would keep
    /// the database (and its lock file) alive when the store is dropped.
    pub fn clear_expiry(&self) {
        *self
            .expiry
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = None;
    }

    /// Whether compactions drop expired records (a clock was given).
    pub fn active(&self) -> bool {
        self.active.load(Ordering::Acquire)
    }

    /// Records dropped by compactions so far.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }
}

/// The factory fjall asks for a filter at each compaction of `docs`.
pub struct ExpiredRecordsFactory(pub Arc<ExpiredRecords>);

impl Factory for ExpiredRecordsFactory {
    fn name(&self) -> &'static str {
        "ebb-expired-records"
    }

    fn make_filter(&self, _ctx: &Context) -> Box<dyn CompactionFilter> {
        // The instant is taken once per compaction: a record expiring during it is kept.
        let now_ms = self
            .0
            .clock
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .as_ref()
            .map(|clock| clock());
        let expiry = self
            .0
            .expiry
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        Box::new(ExpiredFilter {
            now_ms,
            expiry,
            shared: Arc::clone(&self.0),
            dropped: 0,
        })
    }
}

struct ExpiredFilter {
    now_ms: Option<i64>,
    expiry: Option<fjall::Keyspace>,
    shared: Arc<ExpiredRecords>,
    dropped: u64,
}

impl ExpiredFilter {
    /// Whether the record at `key` with value `value` may go (see the module's rules).
    fn done_with(&self, key: &[u8], value: &[u8]) -> bool {
        let (Some(now_ms), Some(expiry)) = (self.now_ms, &self.expiry) else {
            return false;
        };
        let Some(expires) = record::header_expiry(value) else {
            return false;
        };
        if expires == record::NEVER || expires > now_ms {
            return false;
        }
        let (Some(id), Some(rid)) = (key.get(..8), record::rid_of_doc_key(key)) else {
            return false;
        };
        let Ok(id) = <[u8; 8]>::try_from(id).map(u64::from_be_bytes) else {
            return false;
        };
        // A failed read keeps the record: dropping it is only ever an optimisation.
        matches!(
            expiry.contains_key(record::expiry_key(id, expires, rid)),
            Ok(false)
        )
    }
}

impl CompactionFilter for ExpiredFilter {
    fn filter_item(
        &mut self,
        item: ItemAccessor<'_>,
        _ctx: &Context,
    ) -> fjall::compaction::filter::CompactionFilterResult {
        let Ok(value) = item.value() else {
            return Ok(Verdict::Keep);
        };
        if self.done_with(item.key(), &value) {
            self.dropped += 1;
            Ok(Verdict::Remove)
        } else {
            Ok(Verdict::Keep)
        }
    }

    fn finish(self: Box<Self>) {
        self.shared
            .dropped
            .fetch_add(self.dropped, Ordering::Relaxed);
    }
}
