//! The write commands: `insert`, `update`, `delete`, `findAndModify`.
//!
//! Each statement runs under its collection's write lock, from the `_id` checks to the commit,
//! so checks and writes of concurrent clients cannot interleave. Documents are stored as the
//! raw bytes received (with `_id` generated and placed first when needed).

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::ops::Bound;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use bson::raw::cstr;
use bson::{RawArrayBuf, RawBson, RawBsonRef, RawDocument, RawDocumentBuf, rawdoc};

use super::args::{WriteConcern, collection_name, field, opt_bool, opt_doc, variables, wrong_type};
use crate::catalog::{Collection, validate_writable};
use crate::dispatch::Request;
use crate::error::{CommandError, CommandResult, ErrorCode};
use crate::query::Collation;
use crate::query::Variables;
use crate::query::filter::{Filter, FilterContext};
use crate::query::keystring;
use crate::query::plan::Hint;
use crate::query::projection::Projection;
use crate::query::sort::SortSpec;
use crate::query::update::{Update, UpdateContext, upsert_seed_with};
use crate::state::{Metrics, ServerState};
use crate::storage::{Batch, Keyspace, Snapshot, prefix_end, record};

/// `maxWriteBatchSize`.
const MAX_WRITE_BATCH: usize = 100_000;
/// `maxBsonObjectSize`: the largest document that may be stored.
const MAX_DOC: usize = ebb_wire::MAX_BSON_OBJECT_SIZE;

/// A failed write of one document: the error, and `keyPattern` and `keyValue` of a duplicate
/// key.
type Fail = (CommandError, Option<(RawDocumentBuf, RawDocumentBuf)>);

/// A per-statement failure, reported in `writeErrors`.
struct WriteError {
    index: usize,
    error: CommandError,
    /// `keyPattern` and `keyValue` of a duplicate key.
    dup: Option<(RawDocumentBuf, RawDocumentBuf)>,
}

impl WriteError {
    fn to_document(&self) -> RawDocumentBuf {
        let mut d = rawdoc! {
            "index": i32::try_from(self.index).unwrap_or(i32::MAX),
            "code": self.error.code.code(),
        };
        if let Some((pattern, value)) = &self.dup {
            d.append(cstr!("keyPattern"), pattern.clone());
            d.append(cstr!("keyValue"), value.clone());
        }
        d.append(cstr!("errmsg"), self.error.errmsg.as_str());
        d
    }
}

fn dup_key_error(
    collection: &Collection,
    id: RawBsonRef<'_>,
) -> (CommandError, Option<(RawDocumentBuf, RawDocumentBuf)>) {
    let mut value = RawDocumentBuf::new();
    value.append(cstr!("_id"), id);
    let shown = format!("{{ {} }}", crate::query::display::element("_id", id));
    (
        CommandError::new(
            ErrorCode::DuplicateKey,
            format!(
                "E11000 duplicate key error collection: {} index: _id_ dup key: {shown}",
                collection.namespace()
            ),
        ),
        Some((rawdoc! { "_id": 1 }, value)),
    )
}

/// The documents of a write command: the kind-1 sequence `name`, or the body's array.
fn statements<'a>(req: &Request<'a>, name: &str) -> CommandResult<Vec<&'a RawDocument>> {
    let from_sequence = req.sequences.iter().find(|s| s.identifier == name);
    let from_body = field(req, name)?;
    let docs: Vec<&RawDocument> = match (from_sequence, from_body) {
        (Some(_), Some(_)) => {
            return Err(CommandError::new(
                ErrorCode::Location(40433),
                format!("Duplicate field between body and document sequence {name}"),
            ));
        }
        (Some(seq), None) => seq.documents.iter().map(AsRef::as_ref).collect(),
        (None, Some(RawBsonRef::Array(items))) => {
            let mut out = Vec::new();
            for (i, item) in items.into_iter().enumerate() {
                match item.map_err(|e| CommandError::new(ErrorCode::InvalidBSON, e.to_string()))? {
                    RawBsonRef::Document(d) => out.push(d),
                    other => {
                        return Err(wrong_type(
                            &format!("{}.{name}.{i}", req.name),
                            other,
                            " 'object'",
                        ));
                    }
                }
            }
            out
        }
        (None, Some(other)) => {
            return Err(wrong_type(
                &format!("{}.{name}", req.name),
                other,
                " 'array'",
            ));
        }
        (None, None) => {
            return Err(CommandError::missing_field(&format!("{}.{name}", req.name)));
        }
    };
    // `stmtIds` (array<int>) and `stmtId` (int) of WriteCommandRequestBase: their types are
    // checked when the command is parsed, their agreement with the batch after its size
    // (`checkOpCountForCommand` in mongod's write_ops.cpp).
    let stmt_ids = match field(req, "stmtIds")? {
        None => None,
        Some(v @ RawBsonRef::Array(items)) => {
            for (i, item) in items.into_iter().enumerate() {
                match item.map_err(|e| CommandError::new(ErrorCode::InvalidBSON, e.to_string()))? {
                    RawBsonRef::Int32(_) => {}
                    other => {
                        return Err(wrong_type(
                            &format!("{}.stmtIds.{i}", req.name),
                            other,
                            " 'int'",
                        ));
                    }
                }
            }
            Some((v, items.into_iter().count()))
        }
        Some(other) => {
            return Err(wrong_type(
                &format!("{}.stmtIds", req.name),
                other,
                " 'array'",
            ));
        }
    };
    let stmt_id = match field(req, "stmtId")? {
        None => None,
        Some(v @ RawBsonRef::Int32(_)) => Some(v),
        Some(other) => {
            return Err(wrong_type(&format!("{}.stmtId", req.name), other, " 'int'"));
        }
    };
    if docs.is_empty() || docs.len() > MAX_WRITE_BATCH {
        return Err(CommandError::new(
            ErrorCode::InvalidLength,
            format!(
                "Write batch sizes must be between 1 and {MAX_WRITE_BATCH}. Got {} operations.",
                docs.len()
            ),
        ));
    }
    if let Some((ids, count)) = stmt_ids {
        let shown_ids = crate::query::display::element("stmtIds", ids);
        let command = crate::query::display::value(RawBsonRef::Document(req.body));
        if count != docs.len() {
            return Err(CommandError::new(
                ErrorCode::InvalidLength,
                format!(
                    "Number of statement ids must match the number of batch entries. Got {count} \
                     statement ids but {} operations. Statement ids: {{ {shown_ids} }}. Write \
                     command: {command}",
                    docs.len()
                ),
            ));
        }
        if let Some(id) = stmt_id {
            return Err(CommandError::new(
                ErrorCode::InvalidOptions,
                format!(
                    "May not specify both stmtId and stmtIds in write command. Got {{ {}, \
                     {shown_ids} }}. Write command: {command}",
                    crate::query::display::element("stmtId", id)
                ),
            ));
        }
    }
    Ok(docs)
}

/// Checks a document about to be stored: size, `_id` type, top-level field names.
fn check_storable(doc: &RawDocument, updated: bool) -> Result<(), CommandError> {
    let size = doc.as_bytes().len();
    if size > MAX_DOC {
        // mongod's two messages: one for inserted documents, one for update results.
        return Err(if updated {
            CommandError::new(
                ErrorCode::BSONObjectTooLarge,
                format!("Resulting document after update is larger than {MAX_DOC}"),
            )
        } else {
            CommandError::bad_value(format!(
                "object to insert too large. size in bytes: {size}, max size: {MAX_DOC}"
            ))
        });
    }
    for elem in doc.iter_elements() {
        let elem = elem.map_err(|e| CommandError::new(ErrorCode::InvalidBSON, e.to_string()))?;
        let key = elem.key().as_str();
        if key == "_id" {
            match elem.element_type() {
                bson::spec::ElementType::Array => {
                    return Err(CommandError::new(
                        ErrorCode::InvalidIdField,
                        "The '_id' value cannot be of type array",
                    ));
                }
                bson::spec::ElementType::RegularExpression => {
                    return Err(CommandError::new(
                        ErrorCode::InvalidIdField,
                        "can't use a regex for _id",
                    ));
                }
                bson::spec::ElementType::Undefined => {
                    return Err(CommandError::new(
                        ErrorCode::InvalidIdField,
                        "can't use a undefined for _id",
                    ));
                }
                bson::spec::ElementType::EmbeddedDocument => check_id_document(&elem)?,
                _ => {}
            }
        }
        // Since MongoDB 5.0, other `$`-prefixed field names are stored as given.
    }
    Ok(())
}

/// An `_id` that is a document may hold no `$`-prefixed field, at any depth.
fn check_id_document(elem: &bson::raw::RawElement<'_>) -> Result<(), CommandError> {
    fn walk(d: &RawDocument) -> Result<(), CommandError> {
        for entry in d {
            let (k, v) =
                entry.map_err(|e| CommandError::new(ErrorCode::InvalidBSON, e.to_string()))?;
            if k.as_str().starts_with('$') {
                return Err(CommandError::new(
                    ErrorCode::DollarPrefixedFieldName,
                    format!(
                        "_id fields may not contain '$'-prefixed fields: {} is not valid for storage.",
                        k.as_str()
                    ),
                ));
            }
            if let RawBsonRef::Document(inner) = v {
                walk(inner)?;
            }
        }
        Ok(())
    }
    match elem.value() {
        Ok(RawBsonRef::Document(d)) => walk(d),
        Ok(_) => Ok(()),
        Err(e) => Err(CommandError::new(ErrorCode::InvalidBSON, e.to_string())),
    }
}

/// The document as stored: `_id` first, generated as an ObjectId when missing. Returns the
/// input bytes untouched when `_id` already leads.
fn with_id_first(doc: &RawDocument) -> CommandResult<RawDocumentBuf> {
    with_id_first_fresh(doc).map(|(d, _)| d.into_owned())
}

/// [`with_id_first`], also saying whether the `_id` was generated here (a fresh ObjectId can
/// collide with nothing, so the insert skips the duplicate check).
fn with_id_first_fresh(doc: &RawDocument) -> CommandResult<(Cow<'_, RawDocument>, bool)> {
    if let Some(Ok(e)) = doc.iter_elements().next()
        && e.key().as_str() == "_id"
    {
        return Ok((Cow::Borrowed(doc), false));
    }
    let mut out = RawDocumentBuf::new();
    let given = doc
        .get("_id")
        .map_err(|e| CommandError::new(ErrorCode::InvalidBSON, e.to_string()))?;
    let fresh = given.is_none();
    if let Some(id) = given {
        out.append(cstr!("_id"), id);
    } else {
        out.append(cstr!("_id"), bson::oid::ObjectId::new());
    }
    for elem in doc.iter_elements() {
        let elem = elem.map_err(|e| CommandError::new(ErrorCode::InvalidBSON, e.to_string()))?;
        if elem.key().as_str() != "_id" {
            let value = elem
                .value()
                .map_err(|e| CommandError::new(ErrorCode::InvalidBSON, e.to_string()))?;
            out.append(elem.key(), value);
        }
    }
    Ok((Cow::Owned(out), fresh))
}

fn id_of(doc: &RawDocument) -> CommandResult<RawBsonRef<'_>> {
    doc.get("_id")
        .ok()
        .flatten()
        .ok_or_else(|| CommandError::internal("document without _id"))
}

/// What a write statement sees and changes: one collection, at one instant.
pub(crate) struct Writer<'a> {
    pub collection: &'a Collection,
    catalog: &'a crate::catalog::Catalog,
    /// The ticket of this writer's last commit.
    ticket: Option<u64>,
    pub snapshot: Box<dyn Snapshot>,
    pub now_ms: i64,
    pub batch: Batch,
    /// `_id` keys written by this batch, which the snapshot does not see yet, with the expiry
    /// instant written for each.
    pending: HashMap<Vec<u8>, i64>,
    /// What one range read of the snapshot found for a set of `_id` keys (see
    /// [`Writer::probe`]), so that checking each of them needs no point read.
    probed: Option<Probe>,
    /// Keys of unique indexes written by this batch, which the snapshot does not see:
    /// `(index id, key)` → the `_id` key of the document holding it.
    unique_added: HashMap<(u64, Vec<u8>), Vec<u8>>,
    /// Entries of unique indexes this batch removed, which the snapshot still shows.
    unique_removed: HashSet<Vec<u8>>,
    /// Whether this batch set an index's multikey flag: the collection record, which keeps
    /// the flags, is written with the batch.
    multikey_set: bool,
    /// Cancelled at shutdown: the writer's scans then fail with `InterruptedAtShutdown`.
    pub interrupt: Option<crate::interrupt::Interrupt>,
    /// Where record values are built, on the durable engine: each is split off as a `Bytes`
    /// sharing this buffer, so a batch of documents costs one allocation instead of one per
    /// document. fjall keeps the `Bytes` as they are in its memtable and lets them go at the
    /// next flush; the memory engine keeps values for good, and one live document would keep
    /// its whole batch's buffer, so there each record gets its own allocation (`None`).
    arena: Option<bytes::BytesMut>,
}

/// Every record stored between two `_id` keys, read from the snapshot in one pass: any key in
/// that range is either among them or not stored.
struct Probe {
    /// The smallest key asked about.
    first: Vec<u8>,
    /// The largest key asked about.
    last: Vec<u8>,
    /// The `_id` keys stored from `first` to `last`, with the expiry instant of each (expired
    /// or not).
    stored: HashMap<Vec<u8>, i64>,
}

/// A live document a statement matched.
pub(crate) struct Found {
    /// The keystring of its `_id`.
    pub id_key: Vec<u8>,
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
        Writer {
            collection,
            catalog,
            ticket: None,
            snapshot: catalog.snapshot(),
            now_ms,
            batch: Batch::new(),
            pending: HashMap::new(),
            probed: None,
            unique_added: HashMap::new(),
            unique_removed: HashSet::new(),
            multikey_set: false,
            interrupt: None,
            arena: catalog
                .store()
                .storage()
                .is_durable()
                .then(bytes::BytesMut::new),
        }
    }

    /// Makes room for `bytes` of documents about to be written (their records are built in one
    /// buffer; see [`Writer::put`]).
    pub fn reserve_records(&mut self, docs: usize, bytes: usize) {
        if let Some(arena) = &mut self.arena {
            arena.reserve(bytes + docs * record::HEADER_LEN);
        }
    }

    /// Reads in one range scan which of `id_keys` are stored in the snapshot, so that
    /// [`Writer::insert_checked`] need not look each one up: a point read costs a memtable
    /// search and a bloom probe per table, a batch of them adds up (inserts of 1,000 documents
    /// with given `_id`s spent about a tenth of their time there). When the range between the
    /// smallest and the largest key holds many other documents (new `_id`s interleaved with
    /// stored ones), the scan gives up and each key is looked up alone; so it does on a storage
    /// error, which those lookups then report.
    fn probe<'k>(&mut self, id_keys: impl Iterator<Item = &'k [u8]>) {
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
        let (lower, upper) = (self.key(first), self.key(last));
        let budget = n * 2 + 64;
        let mut stored = HashMap::new();
        for (seen, entry) in self
            .snapshot
            .range(
                Keyspace::Docs,
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
            stored.insert(id_key.to_vec(), record::decode(&value)?.expires_ms);
        }
        Ok(Some(Probe {
            first: first.to_vec(),
            last: last.to_vec(),
            stored,
        }))
    }

    fn key(&self, id_key: &[u8]) -> Vec<u8> {
        record::doc_key(self.collection.id, id_key)
    }

    /// The expiry instant of the record stored under this `_id` key (in this batch or the
    /// snapshot), expired or not; `None` if there is none.
    fn stored_expiry(&self, id_key: &[u8]) -> CommandResult<Option<i64>> {
        if let Some(expires) = self.pending.get(id_key) {
            return Ok(Some(*expires));
        }
        if let Some(probe) = &self.probed
            && (probe.first.as_slice()..=probe.last.as_slice()).contains(&id_key)
        {
            return Ok(probe.stored.get(id_key).copied());
        }
        match self.snapshot.get(Keyspace::Docs, &self.key(id_key))? {
            Some(value) => Ok(Some(record::decode(&value)?.expires_ms)),
            None => Ok(None),
        }
    }

    /// Inserts a new document (already `_id`-first and checked), failing on a duplicate `_id`.
    fn insert(&mut self, doc: &RawDocument) -> Result<(), Fail> {
        self.insert_checked(doc, false)
    }

    /// [`Writer::insert`]; `fresh_id` says the `_id` was just generated, so no document can
    /// hold it and the lookup is skipped.
    fn insert_checked(&mut self, doc: &RawDocument, fresh_id: bool) -> Result<(), Fail> {
        let id = id_of(doc).map_err(|e| (e, None))?;
        self.insert_keyed(doc, keystring::to_key(id), fresh_id)
    }

    /// [`Writer::insert_checked`] with the keystring of the document's `_id` already built.
    fn insert_keyed(
        &mut self,
        doc: &RawDocument,
        id_key: Vec<u8>,
        fresh_id: bool,
    ) -> Result<(), Fail> {
        let stored = if fresh_id {
            None
        } else {
            self.stored_expiry(&id_key).map_err(|e| (e, None))?
        };
        // An expired document holds no `_id`: inserting it again succeeds (and replaces it).
        if stored.is_some_and(|expires| expires > self.now_ms) {
            let id = id_of(doc).map_err(|e| (e, None))?;
            return Err(dup_key_error(self.collection, id));
        }
        // The expired document replaced may still have index entries: read it to remove them.
        // (One written by this batch was expired when written, and so got none.)
        let old_doc = match stored {
            Some(_)
                if !self.collection.field_indexes.is_empty()
                    && !self.pending.contains_key(&id_key) =>
            {
                self.snapshot
                    .get(Keyspace::Docs, &self.key(&id_key))
                    .map_err(|e| (e.into(), None))?
                    .map(|v| record::decode(&v).map(|r| r.doc.to_owned()))
                    .transpose()
                    .map_err(|e| (e.into(), None))?
            }
            _ => None,
        };
        self.put_owned(id_key, doc, stored.map(|e| (e, old_doc.as_deref())))
    }

    /// Writes `doc` under `id_key`, replacing the record there (`old`: its expiry, and the
    /// document when the collection has indexes): the modification time is now, and the expiry
    /// is what the collection's TTL policy gives. Index entries change in the same batch; a
    /// unique index refusing the document fails it before anything is added to the batch.
    fn put(
        &mut self,
        id_key: &[u8],
        doc: &RawDocument,
        old: Option<(i64, Option<&RawDocument>)>,
    ) -> Result<(), Fail> {
        self.put_owned(id_key.to_vec(), doc, old)
    }

    /// [`Writer::put`], keeping `id_key` (for the batch's own `_id` checks) without a copy.
    fn put_owned(
        &mut self,
        id_key: Vec<u8>,
        doc: &RawDocument,
        old: Option<(i64, Option<&RawDocument>)>,
    ) -> Result<(), Fail> {
        let expires = self.collection.ttl.expiry(doc, self.now_ms);
        if !self.collection.field_indexes.is_empty() {
            self.change_entries(&id_key, doc, expires, old)?;
        }
        let old_expiry = old.map(|(e, _)| e);
        let id = self.collection.id;
        // A batch never changes one key twice, so an unchanged expiry entry is left alone.
        if let Some(old) = old_expiry.filter(|&old| old != record::NEVER && old != expires) {
            self.batch
                .delete(Keyspace::Expiry, crate::ttl::expiry_key(id, old, &id_key));
        }
        if expires != record::NEVER && old_expiry != Some(expires) {
            self.batch.put(
                Keyspace::Expiry,
                crate::ttl::expiry_key(id, expires, &id_key),
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
        let key = self.key(&id_key);
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
        self.pending.insert(id_key, expires);
        Ok(())
    }

    /// Adds to the batch the index entry changes of writing `doc` (expiring at `expires`) over
    /// `old`, after checking unique indexes. A live document's entries are exactly its keys, so
    /// only the difference changes; an expired one's may be fewer (it got none if it was
    /// expired when written, or when an index was built), so all of its keys are removed and
    /// all of the new ones written. A document written already expired gets no entries.
    fn change_entries(
        &mut self,
        id_key: &[u8],
        doc: &RawDocument,
        expires: i64,
        old: Option<(i64, Option<&RawDocument>)>,
    ) -> Result<(), Fail> {
        let live = expires > self.now_ms;
        let old_live = old.is_some_and(|(e, _)| e > self.now_ms);
        let old_doc = old.and_then(|(_, d)| d);
        // (field index, entry, key components) to add and to remove.
        let mut puts: Vec<(usize, Vec<u8>, Vec<u8>)> = Vec::new();
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
            for c in &new_keys.components {
                if old_live && old_keys.components.binary_search(c).is_ok() {
                    continue;
                }
                let entry = fi.entry(c, id_key).map_err(|e| (e, None))?;
                puts.push((n, entry, c.clone()));
            }
            for c in &old_keys.components {
                if new_keys.components.binary_search(c).is_err() {
                    let entry = fi.entry(c, id_key).map_err(|e| (e, None))?;
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
            if self
                .unique_holder(fi.id, c, id_key, &deletes)
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
                    .is_some_and(|holder| holder == id_key)
                {
                    self.unique_added.remove(&key);
                }
                self.unique_removed.insert(entry.clone());
            }
            self.batch.delete(Keyspace::Index, entry);
        }
        for (n, entry, c) in puts {
            if collection.field_indexes[n].unique {
                self.unique_added
                    .insert((collection.field_indexes[n].id, c), id_key.to_vec());
            }
            self.batch.put(Keyspace::Index, entry, Vec::new());
        }
        Ok(())
    }

    /// Whether a live document other than `id_key` holds key `components` of unique index
    /// `index_id`, as the batch would leave it (`deleting`: entries this write removes). An
    /// expired document holds no key.
    fn unique_holder(
        &self,
        index_id: u64,
        components: &[u8],
        id_key: &[u8],
        deleting: &[(usize, Vec<u8>, Vec<u8>)],
    ) -> CommandResult<bool> {
        if let Some(holder) = self.unique_added.get(&(index_id, components.to_vec()))
            && holder != id_key
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
            if holder != id_key && self.is_live(holder)? {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Whether the document stored under `id_key` (by this batch or in the snapshot) is live.
    fn is_live(&self, id_key: &[u8]) -> CommandResult<bool> {
        Ok(self
            .stored_expiry(id_key)?
            .is_some_and(|expires| expires > self.now_ms))
    }

    /// Commits what this writer holds so far and reads on from a fresh snapshot, so that the
    /// next statement of the command sees this one's writes. Returns the commit ticket.
    fn flush(&mut self) -> CommandResult<()> {
        if self.batch.is_empty() {
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
        self.probed = None;
        self.unique_added.clear();
        self.unique_removed.clear();
        self.multikey_set = false;
        Ok(())
    }

    /// Deletes a live document, its expiry entry and its index entries.
    fn delete(&mut self, found: &Found) {
        for fi in &self.collection.field_indexes {
            let Ok(keys) = fi.keys(&found.doc) else {
                continue;
            };
            for c in keys.components {
                let Ok(entry) = fi.entry(&c, &found.id_key) else {
                    continue;
                };
                if fi.unique {
                    let key = (fi.id, c);
                    if self
                        .unique_added
                        .get(&key)
                        .is_some_and(|holder| *holder == found.id_key)
                    {
                        self.unique_added.remove(&key);
                    }
                    self.unique_removed.insert(entry.clone());
                }
                self.batch.delete(Keyspace::Index, entry);
            }
        }
        self.batch.delete(Keyspace::Docs, self.key(&found.id_key));
        if found.expires_ms != record::NEVER {
            let key = crate::ttl::expiry_key(self.collection.id, found.expires_ms, &found.id_key);
            self.batch.delete(Keyspace::Expiry, key);
        }
    }

    /// The live documents matching `filter`, at most `limit` of them, read as the planner
    /// chooses (an `_id` lookup, an index scan or a collection scan) unless `hint` says.
    fn matching(
        &self,
        filter: &Filter,
        limit: Option<usize>,
        hint: Option<&Hint>,
    ) -> CommandResult<Vec<Found>> {
        let mut out = Vec::new();
        if hint.is_none()
            && let Some(id) = filter.id_equality()
        {
            let id_key = keystring::to_key(id.as_raw_bson_ref());
            if let Some(value) = self.snapshot.get(Keyspace::Docs, &self.key(&id_key))? {
                let rec = record::decode(&value)?;
                if rec.expires_ms > self.now_ms && filter.try_matches(rec.doc)? {
                    out.push(Found {
                        id_key,
                        doc: rec.doc.to_owned(),
                        expires_ms: rec.expires_ms,
                    });
                }
            }
            return Ok(out);
        }
        // Under the collection's write lock nothing else changes it, so a fresh snapshot
        // shows what `self.snapshot` does; the index scan owns the one it reads.
        let snapshot = self.catalog.snapshot();
        let plan = crate::query::plan::plan(
            &crate::query::plan::Query {
                filter: Some(filter),
                sort: None,
                hint,
            },
            &self.collection.indexes,
        )?;
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
        let from_start = match &mut source {
            crate::cursor::Source::Scan(scan)
                if !scan.reverse
                    && scan.lower
                        == Bound::Included(
                            record::collection_prefix(self.collection.id).to_vec(),
                        ) =>
            {
                if let Some(f) = front.as_ref() {
                    scan.lower = Bound::Included(f.clone());
                }
                filter.is_match_all()
            }
            _ => false,
        };
        if let Some(token) = &self.interrupt {
            source.set_interrupt(token);
        }
        source.set_window(None, 0, limit.map(|l| u64::try_from(l).unwrap_or(u64::MAX)));
        let docs = source.drain()?;
        // (Writes this writer has not committed are not in the snapshot: they could lie below.)
        if from_start && self.pending.is_empty() {
            *front = match docs.first() {
                Some((doc, _)) => keystring::encode_id(doc).map(|id_key| self.key(&id_key)),
                // No live document at all from the front on: any later write lowers it.
                None => prefix_end(&record::collection_prefix(self.collection.id)),
            };
        }
        drop(front);
        for (doc, expires_ms) in docs {
            let id_key = keystring::encode_id(&doc)
                .ok_or_else(|| CommandError::internal("stored document without _id"))?;
            out.push(Found {
                id_key,
                doc,
                expires_ms,
            });
        }
        Ok(out)
    }
}

/// Runs `f` with the collection `db.name` (created if missing) locked and a fresh snapshot,
/// then commits what it wrote and waits as the write concern asks.
pub(crate) async fn with_writer<T>(
    state: &ServerState,
    db: &str,
    name: &str,
    concern: WriteConcern,
    create: bool,
    f: impl FnOnce(&mut Writer<'_>) -> T,
) -> CommandResult<Option<T>> {
    let Some((result, ticket)) = locked(state, db, name, create, f)? else {
        return Ok(None);
    };
    concern.wait(state, ticket).await?;
    Ok(Some(result))
}

/// [`with_writer`] without the wait: runs `f` under the lock, commits, and returns its result
/// with the ticket to wait for (of the last commit, or of the collection's creation).
fn locked<T>(
    state: &ServerState,
    db: &str,
    name: &str,
    create: bool,
    f: impl FnOnce(&mut Writer<'_>) -> T,
) -> CommandResult<Option<(T, Option<u64>)>> {
    let (result, ticket, created) = loop {
        let (collection, created) = if create {
            state.catalog.get_or_create(db, name)?
        } else {
            match state.catalog.get(db, name) {
                Some(c) => (c, None),
                None => return Ok(None),
            }
        };
        let Some(_guard) = collection.lock() else {
            continue;
        };
        let mut writer = Writer::new(&collection, &state.catalog, state.now_ms());
        writer.interrupt = Some(state.interrupt());
        let result = f(&mut writer);
        writer.flush()?;
        break (result, writer.ticket, created);
    };
    Ok(Some((result, ticket.or(created))))
}

/// How long one turn of a write batch may hold its collection's lock and its runtime worker
/// before it lets other clients run (mongod also yields between the statements of a batch).
const BATCH_TURN: std::time::Duration = std::time::Duration::from_millis(2);

/// Where a write batch goes and how it runs.
#[derive(Clone, Copy)]
struct BatchTarget<'a> {
    db: &'a str,
    name: &'a str,
    concern: WriteConcern,
    ordered: bool,
}

/// Runs the statements of a write batch in turns of about [`BATCH_TURN`], each under the
/// collection's lock with a writer of its own, yielding to the runtime between turns; stops
/// at the first error when `ordered`, and with `InterruptedAtShutdown` once shutdown begins.
/// `run(w, i)` runs statement `i`. `None` if the collection does not exist (and none is
/// created) when the batch starts. Waits once, at the end, as `concern` asks.
async fn run_batch<S, R>(
    state: &ServerState,
    target: BatchTarget<'_>,
    statements: &[S],
    creates: impl Fn(&S) -> bool,
    mut run: impl FnMut(&mut Writer<'_>, &S) -> Result<R, Fail>,
) -> CommandResult<Option<(Vec<(usize, R)>, Vec<WriteError>)>> {
    let BatchTarget {
        db,
        name,
        concern,
        ordered,
    } = target;
    let (mut done, mut errors) = (Vec::new(), Vec::new());
    let mut next = 0;
    let mut last_ticket = None;
    // Whether a turn may create the collection: some statement from it on upserts (found once,
    // not per turn, which would cost O(N²) over a long batch).
    let last_creating = statements.iter().rposition(&creates);
    while next < statements.len() {
        // Shutdown or `maxTimeMS` stops the batch between statements; what ran is committed
        // (and durable before the process exits), and the command fails as a whole, as in
        // mongod.
        let interrupt = state.interrupt();
        interrupt.check()?;
        let rest = statements.get(next..).unwrap_or_default();
        let create = last_creating.is_some_and(|last| last >= next);
        let turn = locked(state, db, name, create, |w| {
            let started = std::time::Instant::now();
            let mut ran = 0;
            let mut stop = false;
            for (i, stmt) in rest.iter().enumerate() {
                if i > 0 && (started.elapsed() >= BATCH_TURN || interrupt.is_due()) {
                    break;
                }
                ran = i + 1;
                // Each statement sees the ones before it.
                match run(w, stmt).and_then(|r| w.flush().map(|()| r).map_err(|e| (e, None))) {
                    Ok(r) => done.push((next + i, r)),
                    Err((error, dup)) => {
                        errors.push(WriteError {
                            index: next + i,
                            error,
                            dup,
                        });
                        if ordered {
                            stop = true;
                            break;
                        }
                    }
                }
            }
            (ran, stop)
        })?;
        let Some(((ran, stop), ticket)) = turn else {
            if next == 0 {
                return Ok(None);
            }
            // Dropped in the middle of the batch: the rest matches nothing.
            break;
        };
        last_ticket = ticket.or(last_ticket);
        next += ran.max(1);
        if stop {
            break;
        }
        tokio::task::yield_now().await;
    }
    concern.wait(state, last_ticket).await?;
    Ok(Some((done, errors)))
}

/// The write errors of statements that did not compile, for when nothing else ran.
fn compile_errors<T>(parsed: Vec<CommandResult<T>>, ordered: bool) -> Vec<WriteError> {
    parsed
        .into_iter()
        .enumerate()
        .filter_map(|(index, p)| {
            p.err().map(|error| WriteError {
                index,
                error,
                dup: None,
            })
        })
        .take(if ordered { 1 } else { usize::MAX })
        .collect()
}

/// The write errors when the collection could not be created because another database's name
/// differs from this one's only in case (`creation`): mongod creates the collection for the
/// statements that need it, each in turn, so each of those fails with that error, and the
/// others with their own (`own[i]`: `Err` for a statement's own error, `Ok(true)` for one that
/// needs the collection, `Ok(false)` for one that does not). Only the first error when ordered.
fn creation_errors(
    own: impl Iterator<Item = CommandResult<bool>>,
    creation: &CommandError,
    ordered: bool,
) -> Vec<WriteError> {
    let mut errors = Vec::new();
    for (index, outcome) in own.enumerate() {
        let error = match outcome {
            Ok(false) => continue,
            Ok(true) => creation.clone(),
            Err(e) => e,
        };
        errors.push(WriteError {
            index,
            error,
            dup: None,
        });
        if ordered {
            break;
        }
    }
    errors
}

fn ordered(req: &Request<'_>) -> CommandResult<bool> {
    Ok(opt_bool(req, "ordered")?.unwrap_or(true))
}

fn write_reply(n: i64, extra: Option<(i64, RawArrayBuf)>, errors: &[WriteError]) -> RawDocumentBuf {
    let mut reply = rawdoc! { "n": i32::try_from(n).unwrap_or(i32::MAX) };
    if let Some((modified, upserted)) = extra {
        reply.append(
            cstr!("nModified"),
            i32::try_from(modified).unwrap_or(i32::MAX),
        );
        if !upserted.is_empty() {
            reply.append(cstr!("upserted"), upserted);
        }
    }
    if !errors.is_empty() {
        let mut list = RawArrayBuf::new();
        for e in errors {
            list.push(e.to_document());
        }
        reply.append(cstr!("writeErrors"), list);
    }
    reply.append(cstr!("ok"), 1.0);
    reply
}

pub(super) async fn insert(req: &Request<'_>, state: &ServerState) -> CommandResult {
    let name = collection_name(req)?;
    validate_writable(req.db, name)?;
    let docs = statements(req, "documents")?;
    let ordered = ordered(req)?;
    let concern = WriteConcern::parse(req)?;
    let result = with_writer(state, req.db, name, concern, true, |w| {
        let mut n = 0;
        let mut errors = Vec::new();
        // Each document checked, `_id` first, with the keystring of its `_id`.
        let prepared: Vec<_> = docs
            .iter()
            .map(|doc| {
                let (doc, fresh) = prepare_insert(doc)?;
                let id_key = keystring::to_key(id_of(&doc)?);
                Ok((doc, fresh, id_key))
            })
            .collect::<Vec<CommandResult<_>>>();
        // The `_id`s given by the client may already be stored: look them all up at once.
        w.probe(prepared.iter().filter_map(|p| match p {
            Ok((_, false, id_key)) => Some(id_key.as_slice()),
            _ => None,
        }));
        w.reserve_records(
            prepared.len(),
            prepared
                .iter()
                .filter_map(|p| p.as_ref().ok())
                .map(|(d, _, _)| d.as_bytes().len())
                .sum(),
        );
        for (index, outcome) in prepared.into_iter().enumerate() {
            // Shutdown stops the batch between documents; those before it are committed.
            state.check_interrupt()?;
            let outcome = outcome
                .map_err(|e| (e, None))
                .and_then(|(doc, fresh, id_key)| w.insert_keyed(&doc, id_key, fresh));
            match outcome {
                Ok(()) => n += 1,
                Err((error, dup)) => {
                    errors.push(WriteError { index, error, dup });
                    if ordered {
                        break;
                    }
                }
            }
        }
        Ok::<_, CommandError>((n, errors))
    })
    .await;
    let result = match result {
        Err(e) if e.code == ErrorCode::DatabaseDifferCase => {
            let own = docs.iter().map(|d| prepare_insert(d).map(|_| true));
            Some((0, creation_errors(own, &e, ordered)))
        }
        other => other?.transpose()?,
    };
    let (n, errors) = result.unwrap_or_default();
    state
        .metrics
        .op_insert
        .fetch_add(u64::try_from(docs.len()).unwrap_or(0), Ordering::Relaxed);
    Ok(write_reply(n, None, &errors))
}

/// One parsed `updates` entry.
struct UpdateStatement {
    filter: Filter,
    update: Update,
    upsert: bool,
    multi: bool,
    hint: Option<Hint>,
}

/// Parses one `updates` entry. The outer error is structural (a bad field, a missing `q`):
/// mongod fails the whole command for it. The inner one comes from compiling the filter or
/// the update, which mongod reports for that statement alone, in `writeErrors`. The filter and
/// the update see the command's variables, then the statement's constants `c`.
fn parse_update_statement(
    stmt: &RawDocument,
    vars: &Arc<Variables>,
) -> CommandResult<CommandResult<UpdateStatement>> {
    let mut q = None;
    let mut u = None;
    let mut array_filters = None;
    let mut constants = None;
    let mut collation = None;
    let (mut upsert, mut multi) = (false, false);
    let mut hint = None;
    for elem in stmt {
        let (k, v) = elem.map_err(|e| CommandError::new(ErrorCode::InvalidBSON, e.to_string()))?;
        match (k.as_str(), v) {
            ("q", RawBsonRef::Document(d)) => q = Some(d),
            ("q", other) => return Err(wrong_type("update.updates.q", other, " 'object'")),
            ("u", v @ (RawBsonRef::Document(_) | RawBsonRef::Array(_))) => u = Some(v),
            ("u", other) => {
                return Err(wrong_type("update.updates.u", other, "s '[object, array]'"));
            }
            ("upsert", v) => upsert = super::args::truthy("update.updates.upsert", v)?,
            ("multi", v) => multi = super::args::truthy("update.updates.multi", v)?,
            ("arrayFilters", RawBsonRef::Array(filters)) => {
                for (i, f) in filters.into_iter().enumerate() {
                    match f.map_err(|e| CommandError::new(ErrorCode::InvalidBSON, e.to_string()))? {
                        RawBsonRef::Document(_) => {}
                        other => {
                            return Err(wrong_type(
                                &format!("update.updates.arrayFilters.{i}"),
                                other,
                                " 'object'",
                            ));
                        }
                    }
                }
                array_filters = Some(filters);
            }
            ("arrayFilters", other) => {
                return Err(wrong_type("update.updates.arrayFilters", other, " 'array'"));
            }
            ("c", RawBsonRef::Document(d)) => constants = Some(d),
            ("c", other) => return Err(wrong_type("update.updates.c", other, " 'object'")),
            ("collation", RawBsonRef::Document(d)) => collation = Some(d),
            ("collation", other) => {
                return Err(wrong_type("update.updates.collation", other, " 'object'"));
            }
            ("hint", h) => hint = Hint::parse(h, "update.updates.hint")?,
            // (`sort` in an update statement is a MongoDB 8.0 field: 7.0 refuses it.)
            (other, _) => {
                return Err(CommandError::unknown_field(&format!(
                    "update.updates.{other}"
                )));
            }
        }
    }
    let q = q.ok_or_else(|| CommandError::missing_field("update.updates.q"))?;
    let u = u.ok_or_else(|| CommandError::missing_field("update.updates.u"))?;
    Ok((|| {
        let collation = collation
            .map(Collation::parse)
            .transpose()?
            .flatten()
            .map(Arc::new);
        let vars = match constants {
            Some(_) if !matches!(u, RawBsonRef::Array(_)) => {
                return Err(CommandError::new(
                    ErrorCode::Location(51198),
                    "Constant values may only be specified for pipeline updates",
                ));
            }
            Some(c) => Arc::new(Variables::clone(vars).with_constants(c)?),
            None => Arc::clone(vars),
        };
        let update = Update::compile_modification_in(u, array_filters, &vars)?
            .with_collation(collation.clone());
        if multi && update.is_replacement() {
            return Err(CommandError::new(
                ErrorCode::FailedToParse,
                "multi update is not supported for replacement-style update",
            ));
        }
        Ok(UpdateStatement {
            filter: Filter::compile_in(q, FilterContext::Query, &vars)?.with_collation(collation),
            update,
            upsert,
            multi,
            hint,
        })
    })())
}

/// Outcome of one update statement.
#[derive(Default)]
struct Updated {
    matched: i64,
    modified: i64,
    upserted: Option<RawBson>,
    /// The document before and after, for `findAndModify`.
    before: Option<RawDocumentBuf>,
    after: Option<RawDocumentBuf>,
}

/// Applies one update statement through `w`. `sort` picks the first match for single updates.
fn apply_update(
    w: &mut Writer<'_>,
    s: &UpdateStatement,
    sort: Option<&SortSpec>,
) -> Result<Updated, Fail> {
    let limit = if s.multi || sort.is_some() {
        None
    } else {
        Some(1)
    };
    let mut matches = w
        .matching(&s.filter, limit, s.hint.as_ref())
        .map_err(|e| (e, None))?;
    if let Some(sort) = sort {
        matches.sort_by(|a, b| sort.compare(&a.doc, &b.doc));
        matches.truncate(1);
    }
    let ctx = UpdateContext {
        filter: Some(&s.filter),
        ..UpdateContext::at(w.now_ms)
    };
    let mut out = Updated::default();
    if matches.is_empty() {
        if !s.upsert {
            return Ok(out);
        }
        let seed = upsert_seed_with(&s.filter.equality_fields(), &s.update, &ctx)
            .map_err(|e| (e, None))?;
        let doc = with_id_first(&seed).map_err(|e| (e, None))?;
        check_storable(&doc, true).map_err(|e| (e, None))?;
        w.insert(&doc)?;
        out.upserted = id_of(&doc).ok().map(RawBson::from);
        out.after = Some(doc);
        return Ok(out);
    }
    for Found {
        id_key,
        doc,
        expires_ms,
    } in matches
    {
        out.matched += 1;
        let changed = s.update.apply_with(&doc, &ctx).map_err(|e| (e, None))?;
        if let Some(new_doc) = &changed {
            check_storable(new_doc, true).map_err(|e| (e, None))?;
            w.put(&id_key, new_doc, Some((expires_ms, Some(&doc))))?;
            out.modified += 1;
        } else if s.update.is_replacement() {
            // A replacement is a write even when the bytes are the same: it resets the
            // modification time (and so the TTL), though MongoDB counts nothing modified.
            w.put(&id_key, &doc, Some((expires_ms, Some(&doc))))?;
        }
        out.after = Some(changed.unwrap_or_else(|| doc.clone()));
        out.before = Some(doc);
    }
    Ok(out)
}

pub(super) async fn update(req: &Request<'_>, state: &ServerState) -> CommandResult {
    let name = collection_name(req)?;
    validate_writable(req.db, name)?;
    let raw = statements(req, "updates")?;
    let ordered = ordered(req)?;
    let concern = WriteConcern::parse(req)?;
    let vars = variables(req, state.now_ms())?;
    // mongod parses every statement before running any: one bad statement fails the command.
    let parsed = raw
        .iter()
        .map(|s| parse_update_statement(s, &vars))
        .collect::<CommandResult<Vec<_>>>()?;
    let target = BatchTarget {
        db: req.db,
        name,
        concern,
        ordered,
    };
    let result = run_batch(
        state,
        target,
        &parsed,
        |s| s.as_ref().is_ok_and(|s| s.upsert),
        |w, stmt| {
            stmt.as_ref()
                .map_err(|e| (e.clone(), None))
                .and_then(|s| apply_update(w, s, None))
        },
    )
    .await;
    let result = match result {
        Err(e) if e.code == ErrorCode::DatabaseDifferCase => {
            let own = parsed.iter().map(|s| match s {
                Ok(s) => Ok(s.upsert),
                Err(e) => Err(e.clone()),
            });
            Some((Vec::new(), creation_errors(own, &e, ordered)))
        }
        other => other?,
    };
    // No such collection and no upsert: nothing matched; statements that did not compile are
    // still reported.
    let (n, modified, upserted, errors) = match result {
        Some((done, errors)) => {
            let (mut n, mut modified) = (0, 0);
            let mut upserted = RawArrayBuf::new();
            for (index, u) in done {
                n += u.matched;
                modified += u.modified;
                if let Some(id) = u.upserted {
                    n += 1;
                    let mut entry = rawdoc! { "index": i32::try_from(index).unwrap_or(i32::MAX) };
                    entry.append(cstr!("_id"), id);
                    upserted.push(entry);
                }
            }
            (n, modified, upserted, errors)
        }
        None => (0, 0, RawArrayBuf::new(), compile_errors(parsed, ordered)),
    };
    state
        .metrics
        .op_update
        .fetch_add(u64::try_from(raw.len()).unwrap_or(0), Ordering::Relaxed);
    Ok(write_reply(n, Some((modified, upserted)), &errors))
}

struct DeleteStatement {
    filter: Filter,
    limit_one: bool,
    hint: Option<Hint>,
}

fn parse_delete_statement(
    stmt: &RawDocument,
    vars: &Arc<Variables>,
) -> CommandResult<CommandResult<DeleteStatement>> {
    let mut q = None;
    let mut limit = None;
    let mut collation = None;
    let mut hint = None;
    for elem in stmt {
        let (k, v) = elem.map_err(|e| CommandError::new(ErrorCode::InvalidBSON, e.to_string()))?;
        match (k.as_str(), v) {
            ("q", RawBsonRef::Document(d)) => q = Some(d),
            ("q", other) => return Err(wrong_type("delete.deletes.q", other, " 'object'")),
            ("limit", RawBsonRef::Int32(n)) => limit = Some(i64::from(n)),
            ("limit", RawBsonRef::Int64(n)) => limit = Some(n),
            #[expect(clippy::cast_possible_truncation, reason = "compared exactly below")]
            ("limit", RawBsonRef::Double(d)) => {
                limit = Some(if d.fract() == 0.0 { d as i64 } else { -1 });
            }
            ("limit", other) => {
                return Err(wrong_type(
                    "delete.deletes.limit",
                    other,
                    "s '[long, int, decimal, double]'",
                ));
            }
            ("collation", RawBsonRef::Document(d)) => collation = Some(d),
            ("collation", other) => {
                return Err(wrong_type("delete.deletes.collation", other, " 'object'"));
            }
            ("hint", h) => hint = Hint::parse(h, "delete.deletes.hint")?,
            (other, _) => {
                return Err(CommandError::unknown_field(&format!(
                    "delete.deletes.{other}"
                )));
            }
        }
    }
    let q = q.ok_or_else(|| CommandError::missing_field("delete.deletes.q"))?;
    let limit = limit.ok_or_else(|| CommandError::missing_field("delete.deletes.limit"))?;
    if limit != 0 && limit != 1 {
        return Err(CommandError::new(
            ErrorCode::FailedToParse,
            format!("The limit field in delete objects must be 0 or 1. Got {limit}"),
        ));
    }
    // As for updates, a filter (or collation) that does not compile fails only its statement.
    Ok((|| {
        let collation = collation.map(Collation::parse).transpose()?.flatten();
        Ok(DeleteStatement {
            filter: Filter::compile_in(q, FilterContext::Query, vars)?
                .with_collation(collation.map(Arc::new)),
            limit_one: limit == 1,
            hint,
        })
    })())
}

pub(super) async fn delete(req: &Request<'_>, state: &ServerState) -> CommandResult {
    let name = collection_name(req)?;
    validate_writable(req.db, name)?;
    let raw = statements(req, "deletes")?;
    let ordered = ordered(req)?;
    let concern = WriteConcern::parse(req)?;
    let vars = variables(req, state.now_ms())?;
    let parsed = raw
        .iter()
        .map(|s| parse_delete_statement(s, &vars))
        .collect::<CommandResult<Vec<_>>>()?;
    let target = BatchTarget {
        db: req.db,
        name,
        concern,
        ordered,
    };
    let result = run_batch(
        state,
        target,
        &parsed,
        |_| false,
        |w, stmt| {
            let stmt = stmt.as_ref().map_err(|e| (e.clone(), None))?;
            let found = w
                .matching(
                    &stmt.filter,
                    stmt.limit_one.then_some(1),
                    stmt.hint.as_ref(),
                )
                .map_err(|e| (e, None))?;
            for f in &found {
                w.delete(f);
            }
            Ok(found.len())
        },
    )
    .await?;
    let (n, errors) = match result {
        Some((done, errors)) => (
            done.iter()
                .map(|(_, k)| i64::try_from(*k).unwrap_or(0))
                .sum(),
            errors,
        ),
        None => (0, compile_errors(parsed, ordered)),
    };
    state
        .metrics
        .op_delete
        .fetch_add(u64::try_from(raw.len()).unwrap_or(0), Ordering::Relaxed);
    Ok(write_reply(n, None, &errors))
}

pub(super) async fn find_and_modify(req: &Request<'_>, state: &ServerState) -> CommandResult {
    let name = collection_name(req)?;
    validate_writable(req.db, name)?;
    let vars = variables(req, state.now_ms())?;
    let query = opt_doc(req, "query")?;
    let collation = super::read::collation_option(req)?;
    let sort = opt_doc(req, "sort")?
        .map(|s| SortSpec::compile(s).map(|s| s.with_collation(collation.clone())))
        .transpose()?;
    let fields = opt_doc(req, "fields")?
        .map(|f| Projection::compile_in(f, &vars))
        .transpose()?;
    let remove = opt_bool(req, "remove")?.unwrap_or(false);
    let new = opt_bool(req, "new")?.unwrap_or(false);
    let upsert = opt_bool(req, "upsert")?.unwrap_or(false);
    let array_filters = match field(req, "arrayFilters")? {
        None => None,
        Some(RawBsonRef::Array(a)) => Some(a),
        Some(other) => return Err(wrong_type("findAndModify.arrayFilters", other, " 'array'")),
    };
    let update = match field(req, "update")? {
        None => None,
        Some(u @ (RawBsonRef::Document(_) | RawBsonRef::Array(_))) => Some(
            Update::compile_modification_in(u, array_filters, &vars)?
                .with_collation(collation.clone()),
        ),
        Some(other) => {
            return Err(wrong_type(
                "findAndModify.update",
                other,
                "s '[object, array]'",
            ));
        }
    };
    let parse_error = |msg: &str| Err(CommandError::new(ErrorCode::FailedToParse, msg));
    match (remove, &update) {
        (true, Some(_)) => return parse_error("Cannot specify both an update and remove=true"),
        (false, None) => return parse_error("Either an update or remove=true must be specified"),
        (true, None) if new => {
            return parse_error(
                "Cannot specify both new=true and remove=true; 'remove' always returns the deleted document",
            );
        }
        (true, None) if upsert => {
            return parse_error("Cannot specify both upsert=true and remove=true ");
        }
        _ => {}
    }
    let filter = match query {
        Some(q) => Filter::compile_in(q, FilterContext::Query, &vars)?.with_collation(collation),
        None => Filter::match_all(),
    };
    let fields_filter = filter.clone();
    let hint = super::read::hint_option(req, "findAndModify.hint")?;
    let concern = WriteConcern::parse(req)?;
    let result = with_writer(
        state,
        req.db,
        name,
        concern,
        upsert,
        |w| -> CommandResult<_> {
            if remove {
                let mut found = w.matching(
                    &filter,
                    if sort.is_some() { None } else { Some(1) },
                    hint.as_ref(),
                )?;
                if let Some(sort) = &sort {
                    found.sort_by(|a, b| sort.compare(&a.doc, &b.doc));
                }
                let Some(first) = found.into_iter().next() else {
                    return Ok((0, false, None, None));
                };
                w.delete(&first);
                return Ok((1, false, None, Some(first.doc)));
            }
            let Some(update) = update else {
                return Ok((0, false, None, None));
            };
            let stmt = UpdateStatement {
                filter,
                update,
                upsert,
                multi: false,
                hint,
            };
            let u =
                apply_update(w, &stmt, sort.as_ref()).map_err(|(e, dup)| with_dup_info(e, dup))?;
            let updated_existing = u.matched > 0;
            let value = if new { u.after } else { u.before };
            Ok((
                u.matched.max(i64::from(u.upserted.is_some())),
                updated_existing,
                u.upserted,
                value,
            ))
        },
    )
    .await?;
    let (n, updated_existing, upserted, value) =
        result.transpose()?.unwrap_or((0, false, None, None));
    let metric = if remove {
        &state.metrics.op_delete
    } else {
        &state.metrics.op_update
    };
    Metrics::bump(metric);
    let mut last = rawdoc! { "n": i32::try_from(n).unwrap_or(i32::MAX) };
    if !remove {
        last.append(cstr!("updatedExisting"), updated_existing);
    }
    if let Some(id) = upserted {
        last.append(cstr!("upserted"), id);
    }
    let mut reply = rawdoc! { "lastErrorObject": last };
    match value {
        Some(doc) => {
            let doc = match &fields {
                Some(p) => p.apply_with_filter(&doc, &fields_filter)?,
                None => doc,
            };
            reply.append(cstr!("value"), doc);
        }
        None => reply.append(cstr!("value"), RawBson::Null),
    }
    reply.append(cstr!("ok"), 1.0);
    Ok(reply)
}

// ---- Hooks for the aggregation stages that write (`$out`, `$merge`) ----
//
// They store documents through the same `Writer` as the write commands, so that `_id` rules,
// size checks, duplicate detection and TTL expiry (`Writer::put`) are the same for every write.

/// A duplicate `_id` as a command error: mongod's message, with `keyPattern` and `keyValue`.
pub(crate) fn duplicate_key(collection: &Collection, id: RawBsonRef<'_>) -> CommandError {
    let (error, dup) = dup_key_error(collection, id);
    with_dup_info(error, dup)
}

fn with_dup_info(
    error: CommandError,
    dup: Option<(RawDocumentBuf, RawDocumentBuf)>,
) -> CommandError {
    match dup {
        Some((pattern, value)) => {
            error.with_info(rawdoc! { "keyPattern": pattern, "keyValue": value })
        }
        None => error,
    }
}

/// A pipeline's output document made ready to insert, as `insert` does: checked for storage,
/// `_id` first (generated when missing). The flag says the `_id` was generated.
pub(crate) fn prepare_insert(doc: &RawDocument) -> CommandResult<(Cow<'_, RawDocument>, bool)> {
    check_storable(doc, false)?;
    with_id_first_fresh(doc)
}

impl Writer<'_> {
    /// Inserts a document made by [`prepare_insert`]; a live document with its `_id` is a
    /// `DuplicateKey` error carrying `keyPattern` and `keyValue`.
    pub(crate) fn insert_prepared(
        &mut self,
        doc: &RawDocument,
        fresh_id: bool,
    ) -> CommandResult<()> {
        self.insert_checked(doc, fresh_id)
            .map_err(|(error, dup)| with_dup_info(error, dup))
    }

    /// The live document stored under `id_key`, if any. A key this writer has already written
    /// is committed first, so that the answer includes that write.
    pub(crate) fn live_by_id(&mut self, id_key: &[u8]) -> CommandResult<Option<Found>> {
        if self.pending.contains_key(id_key) {
            self.flush()?;
        }
        let Some(value) = self.snapshot.get(Keyspace::Docs, &self.key(id_key))? else {
            return Ok(None);
        };
        let rec = record::decode(&value)?;
        Ok((rec.expires_ms > self.now_ms).then(|| Found {
            id_key: id_key.to_vec(),
            doc: rec.doc.to_owned(),
            expires_ms: rec.expires_ms,
        }))
    }

    /// Replaces the document `found` with `doc` (checked for storage as an update result): a
    /// write like an update's, which resets the modification time and so the TTL.
    pub(crate) fn replace_found(&mut self, found: &Found, doc: &RawDocument) -> CommandResult<()> {
        check_storable(doc, true)?;
        self.put(
            &found.id_key,
            doc,
            Some((found.expires_ms, Some(&found.doc))),
        )
        .map_err(|(error, dup)| with_dup_info(error, dup))
    }

    /// Commits what this writer holds so far (statements after it see it).
    pub(crate) fn commit_pending(&mut self) -> CommandResult<()> {
        self.flush()
    }

    /// Number of document writes this writer holds uncommitted.
    pub(crate) fn pending_writes(&self) -> usize {
        self.pending.len()
    }
}
