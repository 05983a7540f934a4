//! Expiry as change events, on time: in replica-set mode, the deletion of every expired
//! document is written to the oplog (a `delete`, with its pre-image when the collection keeps
//! them) within moments of its instant, in expiry order, ahead of the physical purge and
//! whatever backlog it has. The purge then removes only documents already announced.
//!
//! Each collection keeps the last expiry key announced ([`Collection::announced`], persisted
//! under `0x0E` in the catalog with each batch): expiry keys up to it are in the oplog, later
//! ones are the announcer's. A writer that writes an expiry key at or before it (a document
//! written already expired, or made expired by a policy change) logs the deletion itself
//! (see [`Collection::announced_through`]); a writer that replaces an expired document not
//! announced yet logs its deletion first. So every expiry is logged exactly once, in the same
//! commit as the state change it stands for, and a restart loses none.
//!
//! Batches are logged as mongod logs its TTL monitor's batched deletes: one `applyOps` entry
//! without a session, whose operations change streams show as separate `delete` events.

use std::ops::Bound;
use std::sync::Arc;
use std::time::Duration;

use bson::RawDocumentBuf;
use tokio_util::sync::CancellationToken;
use tracing::{debug, warn};

use crate::catalog::{Catalog, Collection, announced_key};
use crate::storage::{Batch, Keyspace, StorageError, record};

/// Deletions logged per commit (one `applyOps` entry). Each is an `_id` (and, when the
/// collection keeps them, a pre-image): a thousand make an entry of some tens of kilobytes.
pub const ANNOUNCE_BATCH: usize = 1_000;

/// The longest the announcer sleeps when nothing is due.
const ANNOUNCE_IDLE: Duration = Duration::from_secs(1);

/// What one announcing step did for a collection.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Step {
    /// Deletions logged.
    pub announced: usize,
    /// Whether more are due (the batch filled up).
    pub more: bool,
    /// The commit's ticket, when it logged something.
    pub ticket: Option<u64>,
}

/// Logs the deletion of up to [`ANNOUNCE_BATCH`] documents of `collection` expired at or before
/// `now_ms`, after the last announced, oldest first, in one commit under the collection's
/// write lock. A document a transaction holds stops the batch there: it is looked at again
/// once the transaction ends.
pub fn announce_step(
    catalog: &Catalog,
    collection: &Collection,
    now_ms: i64,
) -> Result<Step, StorageError> {
    let Some(oplog) = catalog.oplog() else {
        return Ok(Step::default());
    };
    let Some(_guard) = collection.lock() else {
        return Ok(Step::default());
    };
    let last = collection
        .announced
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone();
    let prefix = collection.id.to_be_bytes();
    let mut upper = prefix.to_vec();
    upper.extend_from_slice(&record::instant_key(now_ms.saturating_add(1)));
    let lower = match &last {
        Some(key) => Bound::Excluded(&key[..]),
        None => Bound::Included(&prefix[..]),
    };
    let snapshot = catalog.snapshot();
    let locks = catalog.locks();
    let mut ops: Vec<(RawDocumentBuf, Option<RawDocumentBuf>)> = Vec::new();
    let mut through: Option<Vec<u8>> = None;
    let mut more = false;
    for entry in snapshot.range(Keyspace::Expiry, lower, Bound::Excluded(&upper[..]), false) {
        if ops.len() >= ANNOUNCE_BATCH {
            more = true;
            break;
        }
        let (key, _) = entry?;
        let (Some(rid), Some(expires)) = (
            record::rid_of_expiry_key(&key),
            crate::ttl::instant_of(&key),
        ) else {
            through = Some(key.to_vec());
            continue;
        };
        let doc_key = record::doc_key(collection.id, rid);
        if locks.any()
            && locks
                .blocked(&crate::txn::locks::storage_claim(Keyspace::Docs, &doc_key))
                .is_some()
        {
            break;
        }
        // A stale entry (its document was written again with another instant, or is gone)
        // announces nothing.
        if let Some(value) = snapshot.get(Keyspace::Docs, &doc_key)?
            && let rec = record::decode(&value)?
            && rec.expires_ms == expires
            && let Ok(Some(id)) = rec.doc.get("_id")
        {
            ops.push((
                crate::oplog::log::delete_op(&collection.namespace(), collection.uuid(), id),
                collection.records_images().then(|| rec.doc.to_owned()),
            ));
        }
        through = Some(key.to_vec());
    }
    let Some(through) = through else {
        return Ok(Step::default());
    };
    let mut batch = Batch::new();
    batch.put(
        Keyspace::Catalog,
        announced_key(collection.id),
        through.clone(),
    );
    let announced = ops.len();
    if !ops.is_empty() {
        batch.stamped.push(oplog.apply_ops_entry(&ops, None));
        // Announced as deleted: the clock must never again read an instant at which they
        // were live (see `crate::clock`).
        Catalog::note_expired_at(&mut batch, now_ms);
    }
    let ticket = catalog.store().commit(batch)?;
    *collection
        .announced
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(through);
    Ok(Step {
        announced,
        more,
        ticket: (announced > 0).then_some(ticket),
    })
}

/// The earliest expiry instant after the last announced of `collection`, if any.
fn next_due(catalog: &Catalog, collection: &Collection) -> Result<Option<i64>, StorageError> {
    let last = collection
        .announced
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone();
    super::next_due(catalog, collection, last.as_deref())
}

/// What one [`announce_pass`] did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Pass {
    /// Deletions logged.
    pub announced: usize,
    /// The next instant something falls due.
    pub next: Option<i64>,
    /// The ticket of its last commit that logged something.
    pub ticket: Option<u64>,
}

/// One pass over every collection: announces everything due at `now_ms`.
pub fn announce_pass(catalog: &Catalog, now_ms: i64) -> Result<Pass, StorageError> {
    let mut total = 0;
    let mut next: Option<i64> = None;
    let mut ticket = None;
    for collection in catalog.all_collections() {
        loop {
            let step = announce_step(catalog, &collection, now_ms)?;
            total += step.announced;
            ticket = step.ticket.or(ticket);
            if !step.more {
                break;
            }
        }
        if let Some(due) = next_due(catalog, &collection)? {
            next = Some(next.map_or(due, |n| n.min(due)));
        }
    }
    Ok(Pass {
        announced: total,
        next,
        ticket,
    })
}

/// The announcer: a pass whenever something falls due (or the clock was moved), at normal
/// priority, since its work is what change streams wait for.
pub async fn announce_task(
    catalog: Arc<Catalog>,
    clock: Arc<crate::clock::Clock>,
    cancel: CancellationToken,
) {
    loop {
        let now = clock.now_ms();
        let pass = {
            let catalog = Arc::clone(&catalog);
            tokio::task::spawn_blocking(move || announce_pass(&catalog, now)).await
        };
        let next = match pass {
            Ok(Ok(pass)) => {
                if pass.announced > 0 {
                    debug!(announced = pass.announced, "TTL deletions logged");
                    clock.raise_floor(now);
                }
                // Change streams show durable entries only: the sync is asked for now, not
                // left to the journal interval.
                if let Some(ticket) = pass.ticket
                    && let Err(e) = catalog.store().durable(ticket).await
                {
                    warn!(error = %e, "syncing logged TTL deletions failed");
                }
                pass.next
            }
            Ok(Err(e)) => {
                warn!(error = %e, "logging TTL deletions failed");
                None
            }
            Err(_) => {
                warn!("the TTL announcer panicked");
                None
            }
        };
        let wait = next.map_or(ANNOUNCE_IDLE, |due| {
            let ms = due.saturating_sub(clock.now_ms()).clamp(0, 1000);
            Duration::from_millis(ms.cast_unsigned())
        });
        // (Something due and not announced is held by a transaction: looked at again soon.)
        tokio::select! {
            () = cancel.cancelled() => return,
            () = tokio::time::sleep(wait.max(Duration::from_millis(10))) => {}
            () = clock.changed() => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use bson::{RawBsonRef, RawDocument, rawdoc};

    use super::*;
    use crate::replset::ClusterClock;
    use crate::storage::{GroupCommit, MemoryStorage};
    use crate::ttl::expiry_key;

    fn setup() -> (Arc<GroupCommit>, Catalog, Arc<Collection>) {
        let store = Arc::new(GroupCommit::new(Arc::new(MemoryStorage::new())));
        let catalog = Catalog::open(Arc::clone(&store)).unwrap();
        let clock = Arc::new(ClusterClock::new(0));
        catalog.set_oplog(Arc::new(crate::oplog::Oplog::new(clock, 1, None)));
        let (c, _) = catalog.create("db", "c", RawDocumentBuf::new()).unwrap();
        (store, catalog, c)
    }

    fn write(store: &GroupCommit, c: &Collection, id: i32, expires: i64) {
        let rid = u64::try_from(id).unwrap() + 1;
        let mut batch = Batch::new();
        batch.put(
            Keyspace::Docs,
            record::doc_key(c.id, rid).to_vec(),
            record::encode(0, expires, &rawdoc! { "_id": id }),
        );
        batch.put(
            Keyspace::Expiry,
            expiry_key(c.id, expires, rid).to_vec(),
            Vec::new(),
        );
        store.commit(batch).unwrap();
    }

    /// The `_id`s of the deletions logged, entry by entry.
    fn logged(store: &GroupCommit) -> Vec<Vec<i32>> {
        let snap = store.storage().snapshot();
        let mut out = Vec::new();
        for entry in snap.prefix(Keyspace::Oplog, &[]) {
            let (key, value) = entry.unwrap();
            if key.len() != 8 {
                continue;
            }
            let doc = RawDocument::from_bytes(&value).unwrap();
            let Ok(ops) = doc.get_document("o").and_then(|o| o.get_array("applyOps")) else {
                continue;
            };
            out.push(
                ops.into_iter()
                    .map(|op| {
                        let RawBsonRef::Document(op) = op.unwrap() else {
                            panic!("an op that is not a document")
                        };
                        assert_eq!(op.get_str("op").unwrap(), "d");
                        op.get_document("o").unwrap().get_i32("_id").unwrap()
                    })
                    .collect(),
            );
        }
        out
    }

    #[test]
    fn expiries_are_logged_once_in_expiry_order_and_only_when_due() {
        let (store, catalog, c) = setup();
        for (id, at) in [(1, 300), (2, 100), (3, 200), (4, 10_000)] {
            write(&store, &c, id, at);
        }
        let pass = announce_pass(&catalog, 50).unwrap();
        assert_eq!(
            (pass.announced, pass.next, pass.ticket),
            (0, Some(100), None)
        );
        assert!(logged(&store).is_empty());
        let pass = announce_pass(&catalog, 300).unwrap();
        assert_eq!((pass.announced, pass.next), (3, Some(10_000)));
        assert!(pass.ticket.is_some());
        assert_eq!(logged(&store), [vec![2, 3, 1]]);
        // Nothing twice.
        assert_eq!(announce_pass(&catalog, 400).unwrap().announced, 0);
        assert_eq!(logged(&store).len(), 1);
        // The mark is stored with the batch.
        let stored = store
            .storage()
            .get(Keyspace::Catalog, &announced_key(c.id))
            .unwrap()
            .unwrap();
        assert_eq!(&stored[..], &expiry_key(c.id, 300, 2)[..]);
        assert!(c.announced_through(&expiry_key(c.id, 300, 2)));
        assert!(!c.announced_through(&expiry_key(c.id, 10_000, 5)));
    }

    #[test]
    fn the_purge_removes_only_what_is_announced() {
        let (store, catalog, c) = setup();
        for id in 0..5 {
            write(&store, &c, id, 100 + i64::from(id));
        }
        // Announced up to 102: documents 0, 1, 2.
        announce_pass(&catalog, 102).unwrap();
        let due = crate::ttl::find_due(&catalog, &c, 1_000, None).unwrap();
        let removed = crate::ttl::remove_found(&catalog, &c, due).unwrap();
        assert_eq!(removed, 3);
        announce_pass(&catalog, 1_000).unwrap();
        assert_eq!(logged(&store), [vec![0, 1, 2], vec![3, 4]]);
        let due = crate::ttl::find_due(&catalog, &c, 1_000, None).unwrap();
        assert_eq!(crate::ttl::remove_found(&catalog, &c, due).unwrap(), 2);
    }

    #[test]
    fn large_backlogs_go_in_batches() {
        let (store, catalog, c) = setup();
        let n = i32::try_from(ANNOUNCE_BATCH).unwrap() * 2 + 5;
        for id in 0..n {
            write(&store, &c, id, 100);
        }
        let pass = announce_pass(&catalog, 100).unwrap();
        assert_eq!(pass.announced, usize::try_from(n).unwrap());
        let batches = logged(&store);
        assert_eq!(
            batches.iter().map(Vec::len).collect::<Vec<_>>(),
            [ANNOUNCE_BATCH, ANNOUNCE_BATCH, 5]
        );
    }

    #[test]
    fn the_mark_survives_a_restart() {
        let (store, catalog, c) = setup();
        write(&store, &c, 1, 100);
        write(&store, &c, 2, 200);
        announce_pass(&catalog, 150).unwrap();
        drop(catalog);
        let reopened = Catalog::open(Arc::clone(&store)).unwrap();
        let last = crate::oplog::log::last_ts(&*store.storage().snapshot()).unwrap();
        let clock = Arc::new(ClusterClock::new_after(0, last));
        reopened.set_oplog(Arc::new(crate::oplog::Oplog::new(clock, 2, last)));
        let c = reopened.get("db", "c").unwrap();
        assert!(c.announced_through(&expiry_key(c.id, 100, 2)));
        assert_eq!(announce_pass(&reopened, 250).unwrap().announced, 1);
        assert_eq!(logged(&store), [vec![1], vec![2]]);
    }
}
