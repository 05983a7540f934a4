//! The [`Writer`]: what a write statement sees and changes in one collection. It builds the
//! batch of changes (records, expiry entries, index entries), checks `_id`s and unique indexes
//! against the snapshot and the batch itself, finds the documents a statement matches, and
//! commits.

use std::collections::{HashMap, HashSet};
use std::ops::Bound;

use bson::{RawDocument, RawDocumentBuf, rawdoc};

use super::storable::id_of;
use super::{Fail, dup_key_error};
use crate::catalog::Collection;
use crate::error::{CommandError, CommandResult};
use crate::query::filter::Filter;
use crate::query::keystring;
use crate::query::plan::Hint;
use crate::storage::{Batch, Keyspace, Snapshot, prefix_end, record};

/// What a write statement sees and changes: one collection, at one instant.
pub(crate) struct Writer<'a> {
    pub collection: &'a Collection,
    catalog: &'a crate::catalog::Catalog,
    /// The ticket of this writer's last commit.
    pub(super) ticket: Option<u64>,
    pub snapshot: Box<dyn Snapshot>,
    pub now_ms: i64,
    pub batch: Batch,
    /// `_id` keys written by this batch, which the snapshot does not see yet, with the record
    /// id and the expiry instant written for each.
    pub(super) pending: HashMap<Vec<u8>, (u64, i64)>,
    /// The same writes by record id: rid → expiry instant.
    pending_rids: HashMap<u64, i64>,
    /// What one range read of the snapshot found for a set of `_id` keys (see
    /// [`Writer::probe`]), so that checking each of them needs no point read.
    probed: Option<Probe>,
    /// Keys of unique indexes written by this batch, which the snapshot does not see:
    /// `(index id, key)` → the record id of the document holding it.
    unique_added: HashMap<(u64, Vec<u8>), u64>,
    /// Entries of unique indexes this batch removed, which the snapshot still shows.
    unique_removed: HashSet<Vec<u8>>,
    /// Whether this batch set an index's multikey flag: the collection record, which keeps
    /// the flags, is written with the batch.
    multikey_set: bool,
    /// Cancelled at shutdown: the writer's scans then fail with `InterruptedAtShutdown`.
    pub interrupt: Option<crate::interrupt::Interrupt>,
    /// The largest document this writer stores, when smaller than `maxBsonObjectSize` (the
    /// Cosmos DB profile's 2 MB, `crate::cosmos::identity`): a larger one, inserted or written
    /// over a document, fails with the account's error.
    pub(super) max_document: Option<usize>,
    /// The transaction this writer writes in (the running command's): its changes stay
    /// pending in it, and each key it changes is claimed first (see `crate::txn`).
    txn: Option<std::sync::Arc<crate::txn::Transaction>>,
    /// The collection as its owner holds it, which a transaction keeps (to commit under its
    /// lock, and to find out whether it changed since).
    pub(super) owner: Option<std::sync::Arc<Collection>>,
    /// Set (to the lock table's release count) when a change met a key an open transaction
    /// holds, outside transactions: the statement failed with `WriteConflict`, and runs again
    /// once a transaction lets go of its keys.
    pub(crate) blocked: Option<u64>,
    /// Where record values are built, on the durable engine: each is split off as a `Bytes`
    /// sharing this buffer, so a batch of documents costs one allocation instead of one per
    /// document. fjall keeps the `Bytes` as they are in its memtable and lets them go at the
    /// next flush; the memory engine keeps values for good, and one live document would keep
    /// its whole batch's buffer, so there each record gets its own allocation (`None`).
    arena: Option<bytes::BytesMut>,
    /// The oplog, in replica-set mode: each change adds its operation (see
    /// [`crate::oplog::log`]), committed with the change.
    oplog: Option<std::sync::Arc<crate::oplog::Oplog>>,
    /// The operations of the changes held, with their pre-images, for a transaction (outside
    /// one they go into the batch as entries at once).
    ops: Vec<(RawDocumentBuf, Option<RawDocumentBuf>)>,
    /// A document just written already expired, at an instant the TTL announcer has passed
    /// (`crate::ttl::announce`): its deletion is logged right after its write.
    expired_on_write: Option<RawDocumentBuf>,
}

/// Every record stored between two `_id` keys, read from the snapshot in one pass: any key in
/// that range is either among them or not stored.
struct Probe {
    /// The smallest key asked about.
    first: Vec<u8>,
    /// The largest key asked about.
    last: Vec<u8>,
    /// The `_id` keys the `_id` index holds from `first` to `last`, with the record id of each
    /// (expired or not).
    stored: HashMap<Vec<u8>, u64>,
}

/// A live document a statement matched.
pub(crate) struct Found {
    /// The keystring of its `_id`.
    pub id_key: Vec<u8>,
    /// Its record id.
    pub rid: u64,
    /// The document.
    pub doc: RawDocumentBuf,
    /// Its expiry instant as stored.
    pub expires_ms: i64,
}

impl<'a> Writer<'a> {
    pub fn new(
        collection: &'a Collection,
        catalog: &'a crate::catalog::Catalog,
        now_ms: i64,
    ) -> Self {
        let txn = crate::txn::current();
        Writer {
            collection,
            catalog,
            ticket: None,
            snapshot: txn
                .as_ref()
                .map_or_else(|| catalog.snapshot(), |t| t.view()),
            txn,
            owner: None,
            blocked: None,
            now_ms,
            batch: Batch::new(),
            pending: HashMap::new(),
            pending_rids: HashMap::new(),
            probed: None,
            unique_added: HashMap::new(),
            unique_removed: HashSet::new(),
            multikey_set: false,
            interrupt: None,
            max_document: None,
            arena: catalog
                .store()
                .storage()
                .is_durable()
                .then(bytes::BytesMut::new),
            oplog: catalog.oplog().cloned(),
            ops: Vec::new(),
            expired_on_write: None,
        }
    }

    /// Logs `op` (an oplog operation of a change this writer holds) with the pre-image of the
    /// document it changes (`before`), kept when the collection records images, when there is
    /// an oplog.
    fn log(
        &mut self,
        before: Option<&RawDocument>,
        op: impl FnOnce(&str, [u8; 16]) -> RawDocumentBuf,
    ) {
        if self.oplog.is_none() {
            return;
        }
        let (ns, ui) = (self.collection.namespace(), self.collection.uuid());
        let images = self.collection.records_images();
        self.push_op(op(&ns, ui), before.filter(|_| images));
        if let Some(written) = self.expired_on_write.take()
            && let Ok(Some(id)) = written.get("_id")
        {
            let delete = crate::oplog::log::delete_op(&ns, ui, id);
            self.push_op(delete, images.then_some(&*written));
        }
    }

    /// Adds `op` (with its pre-image) to what this writer logs: to the transaction's
    /// operations in one, else to the batch as an entry.
    fn push_op(&mut self, op: RawDocumentBuf, before: Option<&RawDocument>) {
        if self.txn.is_some() {
            self.ops.push((op, before.map(ToOwned::to_owned)));
        } else if let Some(oplog) = &self.oplog {
            self.batch.stamped.push(oplog.entry_of(op, before));
        }
    }

    /// Logs the update of `old` to `new` (both with the same `_id`) that no update engine
    /// described (`$merge`'s): the difference of the two documents as mongod computes it for
    /// pipeline updates, or the whole document when that is not smaller.
    pub(super) fn log_update(&mut self, old: &RawDocument, new: &RawDocument) {
        if self.oplog.is_none() {
            return;
        }
        let Ok(Some(id)) = new.get("_id") else { return };
        let diff = crate::oplog::compute_oplog_diff(
            old,
            new,
            crate::oplog::diff::DELTA_OPLOG_ENTRY_METADATA_SIZE,
        )
        .ok()
        .flatten();
        let o = match diff {
            Some(diff) => rawdoc! { "$v": 2, "diff": diff },
            None => new.to_owned(),
        };
        self.log(Some(old), |ns, ui| {
            crate::oplog::log::update_op(ns, ui, &o, id)
        });
    }

    /// Whether changes are logged (replica-set mode).
    pub(super) fn logs(&self) -> bool {
        self.oplog.is_some()
    }

    /// Logs the update of `old` to `new` as the update engine says it logs
    /// ([`crate::query::update::Update::apply_logged`]).
    pub(super) fn log_applied(
        &mut self,
        old: &RawDocument,
        new: &RawDocument,
        logged: &crate::query::update::Logged,
    ) {
        let Ok(Some(id)) = new.get("_id") else { return };
        let o = match logged {
            crate::query::update::Logged::Diff(o) => o.clone(),
            crate::query::update::Logged::Replacement => new.to_owned(),
        };
        self.log(Some(old), |ns, ui| {
            crate::oplog::log::update_op(ns, ui, &o, id)
        });
    }

    /// Makes room for `bytes` of documents about to be written (their records are built in one
    /// buffer; see [`Writer::put`]).
    pub fn reserve_records(&mut self, docs: usize, bytes: usize) {
        if let Some(arena) = &mut self.arena {
            arena.reserve(bytes + docs * record::HEADER_LEN);
        }
        // Their oplog entries, written one after the other into one run (`Oplog::append_insert`).
        if self.oplog.is_some() && self.txn.is_none() {
            use crate::oplog::log;
            let ns = self.collection.db.len() + self.collection.name.len() + 1;
            self.batch
                .stamped
                .reserve(bytes + docs * (log::insert_overhead(ns) + log::OBJECT_ID_KEY_LEN));
        }
    }

    /// Reads in one range scan which of `id_keys` are stored in the snapshot, so that
    /// [`Writer::insert_checked`] need not look each one up: a point read costs a memtable
    /// search and a bloom probe per table, a batch of them adds up (inserts of 1,000 documents
    /// with given `_id`s spent about a tenth of their time there). When the range between the
    /// smallest and the largest key holds many other documents (new `_id`s interleaved with
    /// stored ones), the scan gives up and each key is looked up alone; so it does on a storage
    /// error, which those lookups then report.
    pub(super) fn probe<'k>(&mut self, id_keys: impl Iterator<Item = &'k [u8]>) {
        self.probed = self.try_probe(id_keys).ok().flatten();
    }

    fn try_probe<'k>(
        &self,
        id_keys: impl Iterator<Item = &'k [u8]>,
    ) -> CommandResult<Option<Probe>> {
        const MIN_KEYS: usize = 8;
        let (mut n, mut first, mut last): (usize, Option<&[u8]>, Option<&[u8]>) = (0, None, None);
        for k in id_keys {
            n += 1;
            first = Some(first.map_or(k, |f| f.min(k)));
            last = Some(last.map_or(k, |l| l.max(k)));
        }
        let (Some(first), Some(last)) = (first, last) else {
            return Ok(None);
        };
        if n < MIN_KEYS {
            return Ok(None);
        }
        let (lower, upper) = (self.id_entry(first), self.id_entry(last));
        let budget = n * 2 + 64;
        let mut stored = HashMap::new();
        for (seen, entry) in self
            .snapshot
            .range(
                Keyspace::Index,
                Bound::Included(&lower),
                Bound::Included(&upper),
                false,
            )
            .enumerate()
        {
            if seen >= budget {
                return Ok(None);
            }
            let (key, value) = entry?;
            let id_key = key.get(8..).unwrap_or_default();
            let rid = crate::index::rid_of_value(&value)
                .ok_or_else(|| CommandError::internal("an _id index entry without a record id"))?;
            stored.insert(id_key.to_vec(), rid);
        }
        Ok(Some(Probe {
            first: first.to_vec(),
            last: last.to_vec(),
            stored,
        }))
    }

    /// The `docs` key of record `rid`.
    pub(super) fn key(&self, rid: u64) -> Vec<u8> {
        record::doc_key(self.collection.id, rid).to_vec()
    }

    /// The `_id` index entry of the `_id` keystring `id_key`.
    pub(super) fn id_entry(&self, id_key: &[u8]) -> Vec<u8> {
        crate::index::id_entry_key(self.collection.id, id_key)
    }

    /// The record id the `_id` index gives `id_key` (in this batch or the snapshot), expired
    /// or not.
    pub(super) fn stored_rid(&self, id_key: &[u8]) -> CommandResult<Option<u64>> {
        if let Some((rid, _)) = self.pending.get(id_key) {
            return Ok(Some(*rid));
        }
        if let Some(probe) = &self.probed
            && (probe.first.as_slice()..=probe.last.as_slice()).contains(&id_key)
        {
            return Ok(probe.stored.get(id_key).copied());
        }
        match self.snapshot.get(Keyspace::Index, &self.id_entry(id_key))? {
            Some(value) => Ok(Some(crate::index::rid_of_value(&value).ok_or_else(
                || CommandError::internal("an _id index entry without a record id"),
            )?)),
            None => Ok(None),
        }
    }

    /// The record id and expiry instant of the record stored under this `_id` key (in this
    /// batch or the snapshot), expired or not; `None` if there is none.
    fn stored(&self, id_key: &[u8]) -> CommandResult<Option<(u64, i64)>> {
        if let Some(found) = self.pending.get(id_key) {
            return Ok(Some(*found));
        }
        let Some(rid) = self.stored_rid(id_key)? else {
            return Ok(None);
        };
        Ok(self.rid_expiry(rid)?.map(|e| (rid, e)))
    }

    /// The expiry instant of record `rid` (in this batch or the snapshot), if it is stored.
    fn rid_expiry(&self, rid: u64) -> CommandResult<Option<i64>> {
        if let Some(expires) = self.pending_rids.get(&rid) {
            return Ok(Some(*expires));
        }
        match self.snapshot.get(Keyspace::Docs, &self.key(rid))? {
            Some(value) => Ok(Some(record::decode(&value)?.expires_ms)),
            None => Ok(None),
        }
    }

    /// Claims `key` of `ks` before changing it: in a transaction, `WriteConflict` if another
    /// transaction holds it or it changed since the transaction's snapshot; outside, when an
    /// open transaction holds it, `WriteConflict` with [`Writer::blocked`] set (the caller
    /// waits and runs the statement again).
    fn claim(&mut self, ks: Keyspace, key: &[u8]) -> Result<(), Fail> {
        if self.txn.is_none() && !self.catalog.locks().any() {
            return Ok(());
        }
        let claim = crate::txn::locks::storage_claim(ks, key);
        self.claim_with(&claim, |txn, catalog| {
            txn.changed_since_start(catalog, ks, key)
        })
    }

    /// [`Writer::claim`] of key `components` of unique index `index_id` (the keys of its
    /// entries start with them).
    fn claim_unique(&mut self, index_id: u64, components: &[u8]) -> Result<(), Fail> {
        if self.txn.is_none() && !self.catalog.locks().any() {
            return Ok(());
        }
        let claim = crate::txn::locks::unique_claim(index_id, components);
        self.claim_with(&claim, |txn, catalog| {
            let mut prefix = crate::index::index_prefix(index_id).to_vec();
            prefix.extend_from_slice(components);
            txn.prefix_changed_since_start(catalog, Keyspace::Index, &prefix)
        })
    }

    fn claim_with(
        &mut self,
        claim: &[u8],
        changed: impl FnOnce(&crate::txn::Transaction, &crate::catalog::Catalog) -> CommandResult<bool>,
    ) -> Result<(), Fail> {
        match &self.txn {
            Some(txn) => {
                if txn.claim(claim).map_err(|e| (e, None))?
                    && changed(txn, self.catalog).map_err(|e| (e, None))?
                {
                    return Err((crate::txn::write_conflict(), None));
                }
                Ok(())
            }
            None => match self.catalog.locks().blocked(claim) {
                Some(seen) => {
                    self.blocked = Some(seen);
                    Err((crate::txn::write_conflict(), None))
                }
                None => Ok(()),
            },
        }
    }

    /// Forgets what this writer holds and has not committed (a statement that must run
    /// again).
    pub(super) fn discard(&mut self) {
        self.batch = Batch::new();
        self.ops.clear();
        self.expired_on_write = None;
        self.pending.clear();
        self.pending_rids.clear();
        self.probed = None;
        self.unique_added.clear();
        self.unique_removed.clear();
        self.multikey_set = false;
    }

    /// Refuses a document over [`Writer::max_document`].
    fn check_size(&self, doc: &RawDocument) -> Result<(), Fail> {
        match self.max_document {
            Some(max) if doc.as_bytes().len() > max => {
                Err((crate::cosmos::identity::document_too_large(), None))
            }
            _ => Ok(()),
        }
    }

    /// Inserts a new document (already `_id`-first and checked), failing on a duplicate `_id`.
    pub(super) fn insert(&mut self, doc: &RawDocument) -> Result<(), Fail> {
        self.insert_checked(doc, false)
    }

    /// [`Writer::insert`]; `fresh_id` says the `_id` was just generated, so no document can
    /// hold it and the lookup is skipped.
    pub(super) fn insert_checked(&mut self, doc: &RawDocument, fresh_id: bool) -> Result<(), Fail> {
        let id = id_of(doc).map_err(|e| (e, None))?;
        self.insert_keyed(doc, keystring::to_key(id), fresh_id)
    }

    /// [`Writer::insert_checked`] with the keystring of the document's `_id` already built.
    pub(super) fn insert_keyed(
        &mut self,
        doc: &RawDocument,
        id_key: Vec<u8>,
        fresh_id: bool,
    ) -> Result<(), Fail> {
        self.check_size(doc)?;
        let stored = if fresh_id {
            None
        } else {
            self.stored(&id_key).map_err(|e| (e, None))?
        };
        // An expired document holds no `_id`: inserting it again succeeds, and replaces it in
        // its record (the purge has not reached it: it still has its `_id` entry).
        if stored.is_some_and(|(_, expires)| expires > self.now_ms) {
            let id = id_of(doc).map_err(|e| (e, None))?;
            return Err(dup_key_error(self.collection, id));
        }
        // The expired document replaced may still have index entries: read it to remove them.
        // (One written by this batch was expired when written, and so got none.)
        let old_doc = match stored {
            Some((rid, _))
                if !self.collection.field_indexes.is_empty()
                    && !self.pending.contains_key(&id_key) =>
            {
                self.snapshot
                    .get(Keyspace::Docs, &self.key(rid))
                    .map_err(|e| (e.into(), None))?
                    .map(|v| record::decode(&v).map(|r| r.doc.to_owned()))
                    .transpose()
                    .map_err(|e| (e.into(), None))?
            }
            _ => None,
        };
        // An expired document not announced yet (`crate::ttl::announce`) goes first: its
        // deletion is logged before the insert that takes its place.
        if let Some((rid, expires)) = stored
            && self.oplog.is_some()
            && expires <= self.now_ms
            && !self.pending.contains_key(&id_key)
            && !self.collection.announced_through(&crate::ttl::expiry_key(
                self.collection.id,
                expires,
                rid,
            ))
        {
            let before = match (&old_doc, self.collection.records_images()) {
                (Some(d), _) => Some(d.clone()),
                (None, true) => self
                    .snapshot
                    .get(Keyspace::Docs, &self.key(rid))
                    .map_err(|e| (e.into(), None))?
                    .map(|v| record::decode(&v).map(|r| r.doc.to_owned()))
                    .transpose()
                    .map_err(|e| (e.into(), None))?,
                (None, false) => None,
            };
            if let Ok(Some(id)) = doc.get("_id") {
                self.log(before.as_deref(), |ns, ui| {
                    crate::oplog::log::delete_op(ns, ui, id)
                });
            }
        }
        let Some((rid, expires)) = stored else {
            // A new record, at the end of the collection's natural order; its `_id` entry is
            // added once nothing refused it (a refused document leaves the batch as it was).
            let entry = self.id_entry(&id_key);
            if !fresh_id {
                self.claim(Keyspace::Index, &entry)?;
            }
            let rid = self.collection.new_rid();
            self.put_owned(rid, id_key, doc, None)?;
            self.batch.put(
                Keyspace::Index,
                entry,
                crate::index::rid_value(rid).to_vec(),
            );
            self.log_insert(doc);
            return Ok(());
        };
        self.put_owned(rid, id_key, doc, Some((expires, old_doc.as_deref())))?;
        self.log_insert(doc);
        Ok(())
    }

    fn log_insert(&mut self, doc: &RawDocument) {
        let Ok(Some(id)) = doc.get("_id") else { return };
        match &self.oplog {
            // The common case, built in one go: outside a transaction, with no deletion of an
            // expired document to log first.
            Some(oplog) if self.txn.is_none() && self.expired_on_write.is_none() => {
                let c = &self.collection;
                oplog.append_insert(&mut self.batch.stamped, (&c.db, &c.name), c.uuid(), doc, id);
            }
            _ => self.log(None, |ns, ui| crate::oplog::log::insert_op(ns, ui, doc, id)),
        }
    }

    /// Writes `doc` over the record `found` matched, replacing it (`old`: its expiry, and the
    /// document when the collection has indexes): the modification time is now, and the expiry
    /// is what the collection's TTL policy gives. Index entries change in the same batch; a
    /// unique index refusing the document fails it before anything is added to the batch.
    pub(super) fn put(
        &mut self,
        found: &Found,
        doc: &RawDocument,
        old: Option<(i64, Option<&RawDocument>)>,
    ) -> Result<(), Fail> {
        self.put_owned(found.rid, found.id_key.clone(), doc, old)
    }

    /// [`Writer::put`] of record `rid`, keeping `id_key` (for the batch's own `_id` checks)
    /// without a copy. The `_id` entry is the caller's.
    fn put_owned(
        &mut self,
        rid: u64,
        id_key: Vec<u8>,
        doc: &RawDocument,
        old: Option<(i64, Option<&RawDocument>)>,
    ) -> Result<(), Fail> {
        self.check_size(doc)?;
        let expires = self.collection.ttl.expiry(doc, self.now_ms);
        self.expired_on_write = (self.oplog.is_some()
            && expires <= self.now_ms
            && self.collection.announced_through(&crate::ttl::expiry_key(
                self.collection.id,
                expires,
                rid,
            )))
        .then(|| doc.to_owned());
        if old.is_some() && (self.txn.is_some() || self.catalog.locks().any()) {
            let key = self.key(rid);
            self.claim(Keyspace::Docs, &key)?;
        }
        if !self.collection.field_indexes.is_empty() {
            self.change_entries(rid, doc, expires, old)?;
        }
        let old_expiry = old.map(|(e, _)| e);
        let id = self.collection.id;
        // A batch never changes one key twice, so an unchanged expiry entry is left alone.
        if let Some(old) = old_expiry.filter(|&old| old != record::NEVER && old != expires) {
            self.batch.delete_once(
                Keyspace::Expiry,
                crate::ttl::expiry_key(id, old, rid).to_vec(),
            );
        }
        // Written over an expired record with the same instant (a date TTL given the same past
        // date again): the purge may already have taken that entry and left the record for the
        // compaction, and the new document needs one of its own to be purged and counted. The
        // entry is written only where there is none: an expiry key is written once between
        // removals (`Op::DeleteOnce`).
        let same_expired = old_expiry == Some(expires)
            && expires != record::NEVER
            && expires <= self.now_ms
            && self
                .snapshot
                .get(Keyspace::Expiry, &crate::ttl::expiry_key(id, expires, rid))
                .map_err(|e| (e.into(), None))?
                .is_none();
        if expires != record::NEVER && (old_expiry != Some(expires) || same_expired) {
            self.batch.put(
                Keyspace::Expiry,
                crate::ttl::expiry_key(id, expires, rid).to_vec(),
                Vec::new(),
            );
        }
        let value = match &mut self.arena {
            Some(arena) => {
                record::encode_into(arena, self.now_ms, expires, doc);
                arena.split().freeze()
            }
            None => record::encode(self.now_ms, expires, doc).into(),
        };
        let key = self.key(rid);
        {
            let mut front = self
                .collection
                .live_front
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if front.as_ref().is_some_and(|f| key < *f) {
                *front = Some(key.clone());
            }
        }
        if old.is_some() {
            self.batch.replace(Keyspace::Docs, key, value);
        } else {
            self.batch.put(Keyspace::Docs, key, value);
        }
        self.pending.insert(id_key, (rid, expires));
        self.pending_rids.insert(rid, expires);
        Ok(())
    }

    /// Adds to the batch the index entry changes of writing `doc` (expiring at `expires`) over
    /// `old`, after checking unique indexes. A live document's entries are exactly its keys, so
    /// only the difference changes; an expired one's may be fewer (it got none if it was
    /// expired when written, or when an index was built), so all of its keys are removed and
    /// all of the new ones written. A document written already expired gets no entries.
    fn change_entries(
        &mut self,
        rid: u64,
        doc: &RawDocument,
        expires: i64,
        old: Option<(i64, Option<&RawDocument>)>,
    ) -> Result<(), Fail> {
        let live = expires > self.now_ms;
        let old_live = old.is_some_and(|(e, _)| e > self.now_ms);
        let old_doc = old.and_then(|(_, d)| d);
        // (field index, entry, key components) to add and to remove; each put's value.
        let mut puts: Vec<(usize, Vec<u8>, Vec<u8>)> = Vec::new();
        let mut put_values: Vec<Vec<u8>> = Vec::new();
        // Entries this document keeps whose values change (`1` becomes `1.0`): rewritten, with
        // no uniqueness check (the document holds the key already).
        let mut rewrites: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
        let mut deletes: Vec<(usize, Vec<u8>, Vec<u8>)> = Vec::new();
        let mut now_multikey = Vec::new();
        let collection = self.collection;
        for (n, fi) in collection.field_indexes.iter().enumerate() {
            let new_keys = if live {
                fi.keys(doc).map_err(|e| (e, None))?
            } else {
                crate::index::Keys::default()
            };
            // A stored document's keys were computed when it was written: they compute again.
            let old_keys = old_doc.and_then(|d| fi.keys(d).ok()).unwrap_or_default();
            for (c, value) in new_keys.components.iter().zip(&new_keys.values) {
                if old_live && let Ok(at) = old_keys.components.binary_search(c) {
                    if old_keys.values.get(at) != Some(value) {
                        let entry = fi.entry(c, rid).map_err(|e| (e, None))?;
                        rewrites.push((entry, value.clone()));
                    }
                    continue;
                }
                let entry = fi.entry(c, rid).map_err(|e| (e, None))?;
                puts.push((n, entry, c.clone()));
                put_values.push(value.clone());
            }
            for c in &old_keys.components {
                if new_keys.components.binary_search(c).is_err() {
                    let entry = fi.entry(c, rid).map_err(|e| (e, None))?;
                    deletes.push((n, entry, c.clone()));
                }
            }
            if new_keys.multikey && !collection.indexes[fi.pos].is_multikey() {
                now_multikey.push(fi.pos);
            }
        }
        // Checks come before any change is added: a refused document leaves the batch as it
        // was. (Keys this document keeps need no check: it holds them already.)
        for (n, _, c) in puts
            .iter()
            .filter(|(n, _, _)| collection.field_indexes[*n].unique)
        {
            let fi = &collection.field_indexes[*n];
            self.claim_unique(fi.id, c)?;
            if self
                .unique_holder(fi.id, c, rid, &deletes)
                .map_err(|e| (e, None))?
            {
                let (error, dup) = crate::index::duplicate_key(
                    &collection.namespace(),
                    &collection.indexes[fi.pos],
                    fi,
                    doc,
                    c,
                );
                return Err((error, Some(dup)));
            }
        }
        for pos in now_multikey {
            // Set before the commit that writes the document: a reader loading the flag after
            // taking its snapshot never sees a multikey document under a non-multikey index.
            collection.indexes[pos]
                .multikey
                .store(true, std::sync::atomic::Ordering::Release);
            self.multikey_set = true;
        }
        for (n, entry, c) in deletes {
            if collection.field_indexes[n].unique {
                let key = (collection.field_indexes[n].id, c);
                if self
                    .unique_added
                    .get(&key)
                    .is_some_and(|holder| *holder == rid)
                {
                    self.unique_added.remove(&key);
                }
                self.unique_removed.insert(entry.clone());
            }
            self.batch.delete(Keyspace::Index, entry);
        }
        for ((n, entry, c), value) in puts.into_iter().zip(put_values) {
            if collection.field_indexes[n].unique {
                self.unique_added
                    .insert((collection.field_indexes[n].id, c), rid);
            }
            self.batch.put(Keyspace::Index, entry, value);
        }
        for (entry, value) in rewrites {
            self.batch.put(Keyspace::Index, entry, value);
        }
        Ok(())
    }

    /// Whether a live document other than record `rid` holds key `components` of unique index
    /// `index_id`, as the batch would leave it (`deleting`: entries this write removes). An
    /// expired document holds no key.
    fn unique_holder(
        &self,
        index_id: u64,
        components: &[u8],
        rid: u64,
        deleting: &[(usize, Vec<u8>, Vec<u8>)],
    ) -> CommandResult<bool> {
        if let Some(&holder) = self.unique_added.get(&(index_id, components.to_vec()))
            && holder != rid
            && self.is_live(holder)?
        {
            return Ok(true);
        }
        let mut prefix = crate::index::index_prefix(index_id).to_vec();
        prefix.extend_from_slice(components);
        let upper = prefix_end(&prefix).unwrap_or_default();
        for entry in self.snapshot.range(
            Keyspace::Index,
            Bound::Included(&prefix),
            Bound::Excluded(&upper),
            false,
        ) {
            let (key, _) = entry?;
            if self.unique_removed.contains(&key[..])
                || deleting.iter().any(|(_, e, _)| e[..] == key[..])
            {
                continue;
            }
            let Some((_, _, holder)) = crate::index::split_entry(&key) else {
                continue;
            };
            if holder != rid && self.is_live(holder)? {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Whether the document stored under record `rid` (by this batch or in the snapshot) is
    /// live.
    fn is_live(&self, rid: u64) -> CommandResult<bool> {
        Ok(self
            .rid_expiry(rid)?
            .is_some_and(|expires| expires > self.now_ms))
    }

    /// Commits what this writer holds so far and reads on from a fresh snapshot, so that the
    /// next statement of the command sees this one's writes. Returns the commit ticket.
    pub(super) fn flush(&mut self) -> CommandResult<()> {
        if self.batch.is_empty() {
            return Ok(());
        }
        if let Some(txn) = &self.txn {
            // In a transaction: pending in it (its view, which this writer reads, shows them).
            let owner = self.owner.as_ref().ok_or_else(|| {
                CommandError::internal("a transaction's writer without its collection")
            })?;
            txn.apply(
                owner,
                std::mem::take(&mut self.batch),
                self.multikey_set,
                std::mem::take(&mut self.ops),
            )?;
            self.discard();
            return Ok(());
        }
        if self.multikey_set {
            self.catalog.put_record(self.collection, &mut self.batch);
        }
        self.ticket = Some(
            self.catalog
                .store()
                .commit(std::mem::take(&mut self.batch))?,
        );
        self.snapshot = self.catalog.snapshot();
        self.pending.clear();
        self.pending_rids.clear();
        self.probed = None;
        self.unique_added.clear();
        self.unique_removed.clear();
        self.multikey_set = false;
        Ok(())
    }

    /// Deletes a live document, its expiry entry and its index entries.
    pub(super) fn delete(&mut self, found: &Found) -> Result<(), Fail> {
        let key = self.key(found.rid);
        self.claim(Keyspace::Docs, &key)?;
        for fi in &self.collection.field_indexes {
            let Ok(keys) = fi.key_strings(&found.doc) else {
                continue;
            };
            for c in keys.components {
                let Ok(entry) = fi.entry(&c, found.rid) else {
                    continue;
                };
                if fi.unique {
                    let key = (fi.id, c);
                    if self
                        .unique_added
                        .get(&key)
                        .is_some_and(|holder| *holder == found.rid)
                    {
                        self.unique_added.remove(&key);
                    }
                    self.unique_removed.insert(entry.clone());
                }
                self.batch.delete(Keyspace::Index, entry);
            }
        }
        self.batch.delete(Keyspace::Docs, self.key(found.rid));
        self.batch
            .delete(Keyspace::Index, self.id_entry(&found.id_key));
        if let Ok(Some(id)) = found.doc.get("_id") {
            self.log(Some(&found.doc), |ns, ui| {
                crate::oplog::log::delete_op(ns, ui, id)
            });
        }
        if found.expires_ms != record::NEVER {
            let key = crate::ttl::expiry_key(self.collection.id, found.expires_ms, found.rid);
            self.batch.delete_once(Keyspace::Expiry, key.to_vec());
        }
        Ok(())
    }

    /// The live documents matching `filter`, at most `limit` of them, read as the planner
    /// chooses (an `_id` lookup, an index scan or a collection scan) unless `hint` says.
    pub(super) fn matching(
        &self,
        filter: &Filter,
        limit: Option<usize>,
        hint: Option<&Hint>,
    ) -> CommandResult<Vec<Found>> {
        let mut out = Vec::new();
        if hint.is_none()
            && let Some(id) = filter.id_equality()
        {
            // mongod's `IDHACK`: a use of the `_id` index.
            self.collection.id_accesses.note();
            let id_key = keystring::to_key(id.as_raw_bson_ref());
            if let Some(rid) = self.stored_rid(&id_key)?
                && let Some(value) = self.snapshot.get(Keyspace::Docs, &self.key(rid))?
            {
                let rec = record::decode(&value)?;
                if rec.expires_ms > self.now_ms && filter.try_matches(rec.doc)? {
                    out.push(Found {
                        id_key,
                        rid,
                        doc: rec.doc.to_owned(),
                        expires_ms: rec.expires_ms,
                    });
                }
            }
            return Ok(out);
        }
        // Under the collection's write lock nothing else changes it, so a fresh snapshot
        // shows what `self.snapshot` does; the index scan owns the one it reads. (In a
        // transaction: its view.)
        let snapshot = match &self.txn {
            Some(txn) => txn.view(),
            None => self.catalog.snapshot(),
        };
        let plan = crate::query::plan::plan(
            &crate::query::plan::Query {
                filter: Some(filter),
                sort: None,
                hint,
            },
            &self.collection.indexes,
        )?;
        self.collection.note_plan(&plan.access);
        let mut source = crate::cursor::Source::open(
            self.collection.id,
            snapshot,
            &plan.access,
            Some(filter.clone()),
            self.now_ms,
        );
        // A forward scan of every document from the start skips the front no live document
        // is below; what it finds first moves that front (a match-all filter returns the
        // first live document).
        let mut front = self
            .collection
            .live_front
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        // (A transaction reads an older snapshot with its own changes: the front, which is
        // about the latest data, says nothing of it.)
        let from_start = match &mut source {
            crate::cursor::Source::Scan(scan)
                if self.txn.is_none()
                    && !scan.reverse
                    && scan.lower
                        == Bound::Included(
                            record::collection_prefix(self.collection.id).to_vec(),
                        ) =>
            {
                if let Some(f) = front.as_ref() {
                    scan.lower = Bound::Included(f.clone());
                    // It no longer steps over what lies before the live front.
                    scan.whole = None;
                }
                filter.is_match_all()
            }
            _ => false,
        };
        if let Some(token) = &self.interrupt {
            source.set_interrupt(token);
        }
        source.set_window(None, 0, limit.map(|l| u64::try_from(l).unwrap_or(u64::MAX)));
        let docs = source.drain_records()?;
        // (Writes this writer has not committed are not in the snapshot: they could lie below.)
        if from_start && self.pending.is_empty() {
            *front = match docs.first() {
                Some((rid, _, _)) => Some(self.key(*rid)),
                // No live document at all from the front on: any later write lowers it.
                None => prefix_end(&record::collection_prefix(self.collection.id)),
            };
        }
        drop(front);
        for (rid, doc, expires_ms) in docs {
            let id_key = keystring::encode_id(&doc)
                .ok_or_else(|| CommandError::internal("stored document without _id"))?;
            out.push(Found {
                id_key,
                rid,
                doc,
                expires_ms,
            });
        }
        Ok(out)
    }
}
