//! The catalog: databases, collections and their options, persisted in the `catalog` keyspace
//! and held in memory. See `docs/storage.md` for the key layout.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};

use bson::{RawBsonRef, RawDocument, RawDocumentBuf, rawdoc};
use tracing::{info, warn};

use crate::error::{CommandError, ErrorCode};
use crate::storage::{Batch, GroupCommit, Keyspace, Snapshot, StorageError, record};
use crate::ttl::TtlPolicy;

const RECORD_PREFIX: u8 = 0x01;
const DROPPED_PREFIX: u8 = 0x02;
const NEXT_ID_KEY: [u8; 1] = [0x03];
/// `0x04` index id: an index being built. Its entries are written in chunks before the
/// collection record names it; if the build does not finish (an error, or a crash), the marker
/// becomes a dropped marker and the entries are removed like a dropped collection's data.
const BUILDING_PREFIX: u8 = 0x04;
/// `0x05`: the store's key format (u32, big-endian). Stores without it are format 1.
const FORMAT_KEY: [u8; 1] = [0x05];
// (`0x08`: see `EXPIRED_AT_KEY`; `0x09`: views, see `views::VIEW_PREFIX`; `0x0A`: key-format
// migration markers, `migrate`; `0x0B`: the replica set's identity, `crate::replset`; `0x0C`
// and `0x0D`: users and roles, `crate::auth::store`; `0x0E` collection id: the last expiry key
// whose deletion is logged, `crate::ttl::announce`; `0x0F`: Cosmos DB offers, see
// `offer_key`.)
// `0x06` and `0x07` belong to the disk engine: the count of compactions, written after each
// one, and the count of expired documents left for a compaction (`storage::disk`).
/// Key format 4: documents are keyed by record id (insertion order) and reached by `_id`
/// through the `_id` index's entries; secondary and expiry entries end in the record id; the
/// oplog's entries of one commit are one value (`storage::runs`). Format 3 is the same without
/// oplog runs: a value of one entry reads the same, so a format 3 store is moved by rewriting
/// its marker (and a build that reads format 3 only refuses a store that may hold runs).
/// Format 2 keyed documents by the keystring of their `_id`, and format 1 too, with decimal128
/// values keyed by their nearest double.
const KEY_FORMAT: u32 = 4;
/// The format that differs from [`KEY_FORMAT`] only by oplog runs.
const WITHOUT_RUNS: u32 = 3;
/// Index entries written per commit while an index is built over existing documents.
const BUILD_CHUNK: usize = 8192;
/// Keys removed per batch when a dropped collection's data is cleaned up.
const PURGE_BATCH: usize = 1000;
/// Longest `db.collection` name MongoDB accepts.
const MAX_NAMESPACE_LEN: usize = 255;
/// Longest database name MongoDB accepts.
const MAX_DB_NAME_LEN: usize = 63;

/// An index as the catalog keeps it: the spec `listIndexes` shows, and the parts Ebb acts on.
#[derive(Debug, Clone)]
pub struct IndexSpec {
    /// Never reused (drawn from the collection id counter); prefixes the index's entries in the
    /// `index` keyspace. `0` for an index that has no entries (the `_ts` TTL index, which is a
    /// policy, not a field index).
    pub id: u64,
    /// Whether some document has given this index more than one key (an array in a key field).
    /// Shared by every copy of the spec; set before the commit that writes such a document, and
    /// never cleared, so a reader that loads it after taking its snapshot never underestimates.
    pub multikey: Arc<AtomicBool>,
    /// How often queries used this index since it was created or the server started
    /// (`$indexStats.accesses`): shared by every copy of the spec, never persisted.
    pub accesses: Arc<IndexAccesses>,
    /// `name`.
    pub name: String,
    /// `key`: the key pattern.
    pub key: RawDocumentBuf,
    /// `expireAfterSeconds`, for TTL indexes.
    pub expire_after_seconds: Option<i64>,
    /// `partialFilterExpression`.
    pub partial_filter: Option<RawDocumentBuf>,
    /// The whole spec, as stored and listed (`{v: 2, key, name, …}`).
    pub spec: RawDocumentBuf,
}

impl PartialEq for IndexSpec {
    fn eq(&self, other: &Self) -> bool {
        self.id == other.id
            && self.is_multikey() == other.is_multikey()
            && self.name == other.name
            && self.key == other.key
            && self.expire_after_seconds == other.expire_after_seconds
            && self.partial_filter == other.partial_filter
            && self.spec == other.spec
    }
}

impl IndexSpec {
    /// Whether the index is multikey (see [`IndexSpec::multikey`]). Read it after taking the
    /// snapshot the plan will run on.
    pub fn is_multikey(&self) -> bool {
        self.multikey.load(Ordering::Acquire)
    }

    /// Whether the index has entries in the `index` keyspace (every index but the `_ts` TTL
    /// policy index).
    pub fn has_entries(&self) -> bool {
        self.id != 0
    }

    /// The parsed key pattern (empty if the stored pattern does not parse, which
    /// `createIndexes` prevents).
    pub fn key_pattern(&self) -> crate::index::KeyPattern {
        crate::index::KeyPattern::parse(&self.key)
            .unwrap_or(crate::index::KeyPattern { fields: Vec::new() })
    }

    fn flag(&self, name: &str) -> bool {
        match self.spec.get(name).ok().flatten() {
            Some(bson::RawBsonRef::Boolean(b)) => b,
            Some(bson::RawBsonRef::Int32(n)) => n != 0,
            Some(bson::RawBsonRef::Int64(n)) => n != 0,
            Some(bson::RawBsonRef::Double(d)) => d != 0.0,
            _ => false,
        }
    }

    /// `unique: true`.
    pub fn is_unique(&self) -> bool {
        self.flag("unique")
    }

    /// `sparse: true`.
    pub fn is_sparse(&self) -> bool {
        self.flag("sparse")
    }

    /// `hidden: true`: maintained, but not for queries to use.
    pub fn is_hidden(&self) -> bool {
        self.flag("hidden")
    }

    /// The `partialFilterExpression`, if any.
    pub fn partial_filter_expression(&self) -> Option<&RawDocument> {
        self.partial_filter.as_deref()
    }

    /// Whether this is the `_ts` TTL index, a policy without entries.
    fn is_ts_policy(&self) -> bool {
        self.expire_after_seconds.is_some() && crate::ttl::is_ts_key(&self.key)
    }

    /// Reads a stored spec.
    pub fn from_spec(spec: &RawDocument) -> Result<Self, StorageError> {
        Ok(IndexSpec {
            id: 0,
            multikey: Arc::default(),
            accesses: Arc::default(),
            name: spec.get_str("name").map_err(corrupt)?.to_owned(),
            key: spec.get_document("key").map_err(corrupt)?.to_owned(),
            expire_after_seconds: match spec.get("expireAfterSeconds").map_err(corrupt)? {
                Some(bson::RawBsonRef::Int32(n)) => Some(i64::from(n)),
                Some(bson::RawBsonRef::Int64(n)) => Some(n),
                #[expect(clippy::cast_possible_truncation, reason = "validated when created")]
                Some(bson::RawBsonRef::Double(d)) => Some(d as i64),
                _ => None,
            },
            partial_filter: spec
                .get_document("partialFilterExpression")
                .ok()
                .map(ToOwned::to_owned),
            spec: spec.to_owned(),
        })
    }
}

/// How often the plans queries ran used one index, and since when: mongod's index usage
/// tracker, which `$indexStats` reports as `accesses: {ops, since}`. Counted in memory only,
/// from the server's start or the index's creation.
#[derive(Debug)]
pub struct IndexAccesses {
    ops: AtomicU64,
    since_ms: i64,
}

impl Default for IndexAccesses {
    /// No use yet, counting from now (wall-clock milliseconds).
    fn default() -> Self {
        IndexAccesses {
            ops: AtomicU64::new(0),
            since_ms: bson::DateTime::now().timestamp_millis(),
        }
    }
}

impl IndexAccesses {
    /// Counts one more query whose plan used the index.
    pub fn note(&self) {
        self.ops.fetch_add(1, Ordering::Relaxed);
    }

    /// The uses counted so far.
    pub fn ops(&self) -> i64 {
        i64::try_from(self.ops.load(Ordering::Relaxed)).unwrap_or(i64::MAX)
    }

    /// When counting began (milliseconds since the epoch).
    pub fn since_ms(&self) -> i64 {
        self.since_ms
    }
}

/// The collection scans queries on a collection ran since the server started
/// (`$collStats.queryExecStats.collectionScans`).
#[derive(Debug, Default)]
pub struct ScanCounts {
    total: AtomicU64,
}

impl ScanCounts {
    /// The collection scans counted so far.
    pub fn total(&self) -> i64 {
        i64::try_from(self.total.load(Ordering::Relaxed)).unwrap_or(i64::MAX)
    }
}

/// A collection and what writers of it share.
#[derive(Debug)]
pub struct Collection {
    /// Never reused; prefixes every key of the collection's data.
    pub id: u64,
    /// Database name.
    pub db: String,
    /// Collection name.
    pub name: String,
    /// The options it was created with (`listCollections.options`).
    pub options: RawDocumentBuf,
    /// Its indexes other than `_id_`, in creation order.
    pub indexes: Vec<IndexSpec>,
    /// What its TTL indexes say about expiry.
    pub ttl: TtlPolicy,
    /// Its indexes with entries, compiled for the write path (in the order of `indexes`).
    pub field_indexes: Vec<crate::index::FieldIndex>,
    /// Serialises writers of this collection from their checks to their commit.
    write_lock: WriteLock,
    /// Set, under the write lock, when the collection is dropped or renamed away.
    retired: AtomicBool,
    /// A document key (`docs` keyspace) below which this collection holds no live document,
    /// known to its writers: a forward collection scan from the start that they run begins
    /// here, skipping the deleted documents at the front (each a tombstone a scan would step
    /// over). Set from what such a scan found; lowered by every write of a document below it.
    /// Only read and changed under the write lock.
    pub(crate) live_front: Mutex<Option<Vec<u8>>>,
    /// The uses of its `_id` index (see [`IndexAccesses`]); kept across index changes.
    pub id_accesses: Arc<IndexAccesses>,
    /// Its collection scans (see [`ScanCounts`]); kept across index changes.
    pub scans: Arc<ScanCounts>,
    /// The record id the next inserted document gets (ids grow in insertion order: see
    /// `storage::record::doc_key`); kept across index changes and renames. Taken under the
    /// write lock.
    next_rid: Arc<AtomicU64>,
    /// How many open transactions have written to it (`crate::txn`): changes to the
    /// collection itself (drop, rename, index changes) wait for them to end, as mongod's wait
    /// for the collection's exclusive lock.
    pub(crate) open_transactions: AtomicU64,
    /// The last expiry key whose document's deletion is in the oplog (`crate::ttl::announce`):
    /// expiry keys up to it are announced, later ones are the announcer's to log. Kept across
    /// index changes and renames; read and changed under the write lock.
    pub(crate) announced: Arc<Mutex<Option<Vec<u8>>>>,
}

/// A collection's write lock, counting its releases (see [`Collection::write_epoch`]).
#[derive(Debug, Default)]
struct WriteLock {
    mutex: Mutex<()>,
    epoch: AtomicU64,
}

impl WriteLock {
    fn lock(&self) -> WriteGuard<'_> {
        WriteGuard {
            _guard: self
                .mutex
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
            epoch: &self.epoch,
        }
    }
}

/// Holds a collection's write lock; releasing it counts one more write epoch.
#[derive(Debug)]
pub struct WriteGuard<'a> {
    _guard: MutexGuard<'a, ()>,
    epoch: &'a AtomicU64,
}

impl Drop for WriteGuard<'_> {
    fn drop(&mut self) {
        // Runs before the mutex guard (a field) is dropped: still under the lock.
        self.epoch.fetch_add(1, Ordering::SeqCst);
    }
}

impl Collection {
    fn new(
        id: u64,
        db: &str,
        name: &str,
        options: RawDocumentBuf,
        indexes: Vec<IndexSpec>,
    ) -> Self {
        Collection {
            id,
            db: db.to_owned(),
            name: name.to_owned(),
            options,
            ttl: TtlPolicy::from_indexes(&indexes),
            field_indexes: indexes
                .iter()
                .enumerate()
                .filter_map(|(pos, spec)| crate::index::FieldIndex::new(pos, spec))
                .collect(),
            indexes,
            write_lock: WriteLock::default(),
            retired: AtomicBool::new(false),
            live_front: Mutex::new(None),
            id_accesses: Arc::default(),
            scans: Arc::default(),
            next_rid: Arc::new(AtomicU64::new(1)),
            open_transactions: AtomicU64::new(0),
            announced: Arc::default(),
        }
    }

    /// The same collection under another record (an index change, a rename): its usage
    /// counters go on.
    fn keeping_counters(mut self, old: &Collection) -> Self {
        self.id_accesses = Arc::clone(&old.id_accesses);
        self.scans = Arc::clone(&old.scans);
        self.next_rid = Arc::clone(&old.next_rid);
        self.announced = Arc::clone(&old.announced);
        self
    }

    /// Whether the deletion of the document with expiry key `key` (of this collection) is in
    /// the oplog, or is the announcer's to log: a writer that writes an expiry key at or
    /// before the last one announced (an instant already past) logs the deletion itself.
    /// The caller holds the write lock.
    pub fn announced_through(&self, key: &[u8]) -> bool {
        self.announced
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .as_deref()
            .is_some_and(|last| key <= last)
    }

    /// A record id for a new document: above every one given before (of this process, or
    /// stored when it started). Called under the write lock, so ids follow commit order.
    pub fn new_rid(&self) -> u64 {
        self.next_rid.fetch_add(1, Ordering::Relaxed)
    }

    /// Sets where record ids go on from: after the highest stored in `snapshot`.
    fn resume_rids(&self, snapshot: &dyn Snapshot) -> Result<(), StorageError> {
        let prefix = record::collection_prefix(self.id);
        let upper = crate::storage::prefix_end(&prefix);
        let last = snapshot
            .range(
                Keyspace::Docs,
                Bound::Included(&prefix),
                upper.as_deref().map_or(Bound::Unbounded, Bound::Excluded),
                true,
            )
            .next()
            .transpose()?;
        let next = last
            .and_then(|(k, _)| record::rid_of_doc_key(&k))
            .map_or(1, |r| r.saturating_add(1));
        self.next_rid.store(next, Ordering::Relaxed);
        Ok(())
    }

    /// Counts what the plan a query runs reads, as mongod's `CollectionQueryInfo::notifyOfQuery`
    /// does once per operation: one access to the index it scans (the `_id` index included),
    /// or one collection scan.
    pub fn note_plan(&self, access: &crate::query::plan::Access) {
        use crate::query::plan::Access;
        let note = |scan: &crate::query::plan::IndexScan| match scan.index {
            None => self.id_accesses.note(),
            Some(pos) => {
                if let Some(spec) = self.indexes.get(pos) {
                    spec.accesses.note();
                }
            }
        };
        match access {
            Access::Collscan { .. } => {
                self.scans.total.fetch_add(1, Ordering::Relaxed);
            }
            Access::Index(scan) => note(scan),
            Access::Or(legs) => legs.iter().for_each(note),
        }
    }

    /// Takes the write lock. `None` if the collection was dropped or renamed meanwhile: the
    /// caller looks it up again.
    pub fn lock(&self) -> Option<WriteGuard<'_>> {
        let guard = self.write_lock.lock();
        (!self.retired.load(Ordering::SeqCst)).then_some(guard)
    }

    /// How many times the write lock has been released. A reader that took its snapshot after
    /// reading this, and finds it unchanged once it holds the lock, knows that no write to the
    /// collection committed in between.
    pub fn write_epoch(&self) -> u64 {
        self.write_lock.epoch.load(Ordering::SeqCst)
    }

    /// Adds to `batch` the removal of every index entry `doc` (stored under record id `rid`)
    /// may have, its `_id` entry included: when the document itself is removed (a purge, a
    /// policy change).
    pub fn delete_entries(&self, doc: &RawDocument, rid: u64, batch: &mut Batch) {
        if let Some(id_key) = crate::query::keystring::encode_id(doc) {
            batch.delete(
                Keyspace::Index,
                crate::index::id_entry_key(self.id, &id_key),
            );
        }
        for fi in &self.field_indexes {
            let Ok(keys) = fi.key_strings(doc) else {
                continue;
            };
            for c in &keys.components {
                if let Ok(entry) = fi.entry(c, rid) {
                    batch.delete(Keyspace::Index, entry);
                }
            }
        }
    }

    /// `db.name`.
    pub fn namespace(&self) -> String {
        format!("{}.{}", self.db, self.name)
    }

    /// Whether change streams get its documents' pre-images (and post-images): the
    /// `changeStreamPreAndPostImages: {enabled: true}` option.
    pub fn records_images(&self) -> bool {
        matches!(
            self.options.get("changeStreamPreAndPostImages"),
            Ok(Some(RawBsonRef::Document(d))) if matches!(d.get("enabled"), Ok(Some(RawBsonRef::Boolean(true))))
        )
    }

    /// Its UUID (`listCollections`' `info.uuid`, the oplog's `ui`): made of its id, which is
    /// never reused.
    pub fn uuid(&self) -> [u8; 16] {
        uuid_of(self.id)
    }
}

/// The UUID of the collection with id `id` (see [`Collection::uuid`]).
pub fn uuid_of(id: u64) -> [u8; 16] {
    let mut uuid = [0_u8; 16];
    uuid[8..].copy_from_slice(&id.to_be_bytes());
    uuid
}

type Names = BTreeMap<(String, String), Arc<Collection>>;

/// Every collection, by database and name.
pub struct Catalog {
    store: Arc<GroupCommit>,
    names: RwLock<Names>,
    /// Serialises catalog changes (create, drop, rename).
    ddl: Mutex<()>,
    /// The databases this process holds open, as mongod's `DatabaseHolder` does: those with a
    /// collection at startup and those a collection was created in since, until
    /// `dropDatabase` (dropping a database's last collection leaves it open). Their names
    /// decide `DatabaseDifferCase`; changed under `ddl`.
    open_databases: Mutex<BTreeSet<String>>,
    /// Every view, by database and name (`views.rs`); changed under `ddl`.
    views: RwLock<views::ViewNames>,
    /// The keys open transactions hold (`crate::txn`), which every writer respects.
    locks: Arc<crate::txn::LockTable>,
    /// The oplog, in replica-set mode: writers add their entries to their commits.
    oplog: std::sync::OnceLock<Arc<crate::oplog::Oplog>>,
}

impl std::fmt::Debug for Catalog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Catalog").finish_non_exhaustive()
    }
}

fn record_key(db: &str, name: &str) -> Vec<u8> {
    let mut key = Vec::with_capacity(2 + db.len() + name.len());
    key.push(RECORD_PREFIX);
    key.extend_from_slice(db.as_bytes());
    key.push(0);
    key.extend_from_slice(name.as_bytes());
    key
}

fn dropped_key(id: u64) -> Vec<u8> {
    let mut key = vec![DROPPED_PREFIX];
    key.extend_from_slice(&id.to_be_bytes());
    key
}

fn building_key(id: u64) -> Vec<u8> {
    let mut key = vec![BUILDING_PREFIX];
    key.extend_from_slice(&id.to_be_bytes());
    key
}

/// Marks the data of `collection` (its documents and expiry entries) and of each of its
/// indexes for removal in the background.
fn mark_dropped(batch: &mut Batch, collection: &Collection) {
    batch.put(Keyspace::Catalog, dropped_key(collection.id), Vec::new());
    if collection
        .announced
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .is_some()
    {
        batch.delete(Keyspace::Catalog, announced_key(collection.id));
    }
    for i in collection.indexes.iter().filter(|i| i.has_entries()) {
        batch.put(Keyspace::Catalog, dropped_key(i.id), Vec::new());
    }
}

fn corrupt(what: impl std::fmt::Display) -> StorageError {
    StorageError::Corrupt(format!("catalog: {what}"))
}

/// Refuses a store written in a later key format than this build's, and marks a new store
/// (one without a format marker and without documents) with the current one. Returns the
/// earlier format of a store to move to record ids ([`Catalog::migrate_to_record_ids`]): a
/// marker of 2, or documents and no marker (format 1); see [`KEY_FORMAT`].
fn check_format(store: &GroupCommit) -> Result<Option<u32>, StorageError> {
    let snapshot = store.storage().snapshot();
    if let Some(v) = snapshot.get(Keyspace::Catalog, &FORMAT_KEY)? {
        let format = <[u8; 4]>::try_from(&v[..])
            .map(u32::from_be_bytes)
            .map_err(corrupt)?;
        if format == KEY_FORMAT {
            return Ok(None);
        }
        if format == WITHOUT_RUNS {
            let mut batch = Batch::new();
            batch.put(
                Keyspace::Catalog,
                FORMAT_KEY.to_vec(),
                KEY_FORMAT.to_be_bytes().to_vec(),
            );
            store.commit(batch)?;
            return Ok(None);
        }
        if (1..WITHOUT_RUNS).contains(&format) {
            return Ok(Some(format));
        }
        return Err(StorageError::UnsupportedFormat(format!(
            "it is in key format {format}, and this build of Ebb reads key formats 1 to \
             {KEY_FORMAT} only"
        )));
    }
    if let Some(entry) = snapshot
        .range(Keyspace::Docs, Bound::Unbounded, Bound::Unbounded, false)
        .next()
    {
        entry?;
        return Ok(Some(1));
    }
    let mut batch = Batch::new();
    batch.put(
        Keyspace::Catalog,
        FORMAT_KEY.to_vec(),
        KEY_FORMAT.to_be_bytes().to_vec(),
    );
    store.commit(batch)?;
    Ok(None)
}

impl From<StorageError> for CommandError {
    fn from(e: StorageError) -> Self {
        tracing::error!(error = %e, "storage failure");
        CommandError::internal(e.to_string())
    }
}

/// The checks mongod's `DatabaseName` makes of every database name a command names: no `.`,
/// no NUL, at most 63 bytes, each with its own message.
fn check_db_name_form(db: &str) -> Result<(), CommandError> {
    let error = |msg: String| Err(CommandError::new(ErrorCode::InvalidNamespace, msg));
    if db.contains('.') {
        return error(format!("'.' is an invalid character in a db name: {db}"));
    }
    if db.contains('\0') {
        return error("database names cannot have embedded null characters".to_owned());
    }
    if db.len() > MAX_DB_NAME_LEN {
        return error(format!(
            "db name must be at most {MAX_DB_NAME_LEN} characters, found: {}",
            db.len()
        ));
    }
    Ok(())
}

/// Whether `db` is empty or holds a character mongod's `validDBName` refuses (besides those
/// [`check_db_name_form`] reports).
fn has_invalid_db_char(db: &str) -> bool {
    db.is_empty()
        || db
            .chars()
            .any(|c| matches!(c, '/' | '\\' | ' ' | '"' | '$'))
}

/// Checks a database name as MongoDB does.
pub fn validate_db_name(db: &str) -> Result<(), CommandError> {
    check_db_name_form(db)?;
    if has_invalid_db_char(db) {
        return Err(CommandError::new(
            ErrorCode::InvalidNamespace,
            format!("Invalid database name: '{db}'"),
        ));
    }
    Ok(())
}

/// `system.*` collections a client may create and write, as mongod's `isLegalClientSystemNS`
/// allows (the others belong to the server).
const CLIENT_SYSTEM_COLLECTIONS: &[&str] = &["system.js"];

/// Checks a namespace that a client may create or write to: a valid name, and no server-owned
/// `system.*` collection.
pub fn validate_writable(db: &str, name: &str) -> Result<(), CommandError> {
    validate_namespace(db, name)?;
    if name.starts_with("system.") && !CLIENT_SYSTEM_COLLECTIONS.contains(&name) {
        return Err(CommandError::new(
            ErrorCode::InvalidNamespace,
            format!("Invalid system namespace: {db}.{name}"),
        ));
    }
    Ok(())
}

/// Checks that `db.name` is a valid namespace (reads accept any valid one; a missing
/// collection is simply empty).
pub fn validate_namespace(db: &str, name: &str) -> Result<(), CommandError> {
    check_db_name_form(db)?;
    let ns = || format!("{db}.{name}");
    if has_invalid_db_char(db) {
        // mongod words a `$` differently from the other characters.
        let msg = if db.contains('$') {
            format!("Invalid namespace: {}", ns())
        } else {
            format!("Invalid namespace specified '{}'", ns())
        };
        return Err(CommandError::new(ErrorCode::InvalidNamespace, msg));
    }
    if db.len() + 1 + name.len() > MAX_NAMESPACE_LEN {
        let ns = ns();
        return Err(CommandError::new(
            ErrorCode::InvalidNamespace,
            format!(
                "Fully qualified namespace is too long. Namespace: {ns} Max: {MAX_NAMESPACE_LEN}"
            ),
        ));
    }
    if name.is_empty() || name.contains('$') || name.contains('\0') || name.starts_with('.') {
        return Err(CommandError::new(
            ErrorCode::InvalidNamespace,
            format!("Invalid namespace specified '{}'", ns()),
        ));
    }
    Ok(())
}

/// mongod's rule that two databases never have names that differ only in case: creating a
/// collection in `db` fails with `DatabaseDifferCase` while an open database's name equals
/// `db` ignoring ASCII case, but not exactly.
fn check_db_case(open: &BTreeSet<String>, db: &str) -> Result<(), CommandError> {
    if open.contains(db) {
        return Ok(());
    }
    match open
        .iter()
        .find(|existing| existing.eq_ignore_ascii_case(db))
    {
        None => Ok(()),
        Some(existing) => Err(CommandError::new(
            ErrorCode::DatabaseDifferCase,
            format!(
                "db already exists with different case already have: [{existing}] trying to \
                 create [{db}]"
            ),
        )),
    }
}

impl Catalog {
    /// Loads the catalog from `store`, after checking it is in a key format this build reads.
    pub fn open(store: Arc<GroupCommit>) -> Result<Self, StorageError> {
        let migrating = check_format(&store)?;
        let snapshot = store.storage().snapshot();
        let mut names = Names::new();
        let end = [RECORD_PREFIX + 1];
        for entry in snapshot.range(
            Keyspace::Catalog,
            Bound::Included(&[RECORD_PREFIX][..]),
            Bound::Excluded(&end[..]),
            false,
        ) {
            let (_, value) = entry?;
            let doc = RawDocument::from_bytes(&value).map_err(corrupt)?;
            let get_str = |k: &str| doc.get_str(k).map(str::to_owned).map_err(corrupt);
            let id = u64::try_from(doc.get_i64("id").map_err(corrupt)?).map_err(corrupt)?;
            let mut indexes = Vec::new();
            if let Ok(list) = doc.get_array("indexes") {
                for spec in list {
                    match spec.map_err(corrupt)? {
                        bson::RawBsonRef::Document(d) => indexes.push(IndexSpec::from_spec(d)?),
                        _ => return Err(corrupt("index spec is not a document")),
                    }
                }
            }
            // Index ids and multikey flags, beside the specs (records of builds before
            // secondary indexes have none: `upgrade_indexes` builds those).
            if let Ok(states) = doc.get_array("indexState") {
                for (spec, state) in indexes.iter_mut().zip(states) {
                    let bson::RawBsonRef::Document(state) = state.map_err(corrupt)? else {
                        return Err(corrupt("index state is not a document"));
                    };
                    spec.id =
                        u64::try_from(state.get_i64("id").map_err(corrupt)?).map_err(corrupt)?;
                    if state.get_bool("multikey").unwrap_or(false) {
                        spec.multikey.store(true, Ordering::Release);
                    }
                }
            }
            let collection = Collection::new(
                id,
                &get_str("db")?,
                &get_str("name")?,
                doc.get_document("options").map_err(corrupt)?.to_owned(),
                indexes,
            );
            // (A collection still in an earlier key format gets its record ids as it moves.)
            if migrating.is_none() || migrate::is_migrated(&*snapshot, id)? {
                collection.resume_rids(&*snapshot)?;
            }
            if let Some(key) = snapshot.get(Keyspace::Catalog, &announced_key(id))? {
                *collection
                    .announced
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(key.to_vec());
            }
            names.insert(
                (collection.db.clone(), collection.name.clone()),
                Arc::new(collection),
            );
        }
        info!(collections = names.len(), "catalog loaded");
        let views = views::load(&*snapshot)?;
        let open_databases = names
            .keys()
            .chain(views.keys())
            .map(|(db, _)| db.clone())
            .collect();
        let catalog = Catalog {
            store,
            names: RwLock::new(names),
            ddl: Mutex::new(()),
            open_databases: Mutex::new(open_databases),
            views: RwLock::new(views),
            locks: Arc::default(),
            oplog: std::sync::OnceLock::new(),
        };
        catalog.abandon_builds()?;
        if let Some(from) = migrating {
            catalog
                .migrate_to_record_ids(from)
                .map_err(|e| StorageError::Corrupt(format!("moving to record ids: {e}")))?;
        }
        catalog
            .upgrade_indexes()
            .map_err(|e| StorageError::Corrupt(format!("building indexes at startup: {e}")))?;
        Ok(catalog)
    }

    /// Turns the markers of index builds that never finished (the server stopped during one)
    /// into dropped markers, so that their entries are removed and never read.
    fn abandon_builds(&self) -> Result<(), StorageError> {
        let snapshot = self.snapshot();
        let end = [BUILDING_PREFIX + 1];
        let mut batch = Batch::new();
        for entry in snapshot.range(
            Keyspace::Catalog,
            Bound::Included(&[BUILDING_PREFIX][..]),
            Bound::Excluded(&end[..]),
            false,
        ) {
            let (key, _) = entry?;
            let mut dropped = key.to_vec();
            if let Some(first) = dropped.first_mut() {
                *first = DROPPED_PREFIX;
            }
            batch.put(Keyspace::Catalog, dropped, Vec::new());
            batch.delete(Keyspace::Catalog, key);
        }
        if !batch.is_empty() {
            warn!(
                builds = batch.len() / 2,
                "removing the entries of index builds that did not finish"
            );
            self.store.commit(batch)?;
        }
        Ok(())
    }

    /// Gives the indexes of records written before index entries existed (no ids) their ids
    /// and entries, as `createIndexes` would have built them.
    fn upgrade_indexes(&self) -> Result<(), CommandError> {
        let stale: Vec<Arc<Collection>> = self
            .all_collections()
            .into_iter()
            .filter(|c| c.indexes.iter().any(|i| i.id == 0 && !i.is_ts_policy()))
            .collect();
        for c in stale {
            info!(namespace = %c.namespace(), "building the entries of indexes kept before index maintenance existed");
            // Expired documents get entries too (the purge removes them with the documents):
            // no clock is at hand here, and an entry of an expired document is harmless.
            self.change_indexes(&c.db, &c.name, false, i64::MIN, |_, _| Ok(()))?;
        }
        Ok(())
    }

    /// The store behind the catalog.
    pub fn store(&self) -> &Arc<GroupCommit> {
        &self.store
    }

    /// The keys open transactions hold.
    pub fn locks(&self) -> &Arc<crate::txn::LockTable> {
        &self.locks
    }

    /// From now on every change is logged in `oplog`, in the commit that makes it (the store
    /// stamps the entries with their times). Set once, at startup in replica-set mode.
    pub fn set_oplog(&self, oplog: Arc<crate::oplog::Oplog>) {
        self.store
            .set_stamper(Arc::clone(&oplog) as Arc<dyn crate::storage::Stamper>);
        let _ = self.oplog.set(oplog);
    }

    /// The oplog, when changes are logged (replica-set mode).
    pub fn oplog(&self) -> Option<&Arc<crate::oplog::Oplog>> {
        self.oplog.get()
    }

    /// Adds to `batch` the oplog entry of the operation `op` makes, when there is an oplog.
    fn log(&self, batch: &mut Batch, op: impl FnOnce() -> RawDocumentBuf) {
        if self.oplog().is_some() {
            self.log_op(batch, &op());
        }
    }

    /// Adds to `batch` the oplog entry of `op`, when there is an oplog.
    fn log_op(&self, batch: &mut Batch, op: &RawDocument) {
        if let Some(oplog) = self.oplog() {
            batch.stamped.push(oplog.entry(op, None));
        }
    }

    /// Adds to `batch` the entries of an index list change of `old` to `new`: `createIndexes`
    /// for each new name, `dropIndexes` for each name gone, `collMod` for a changed
    /// `expireAfterSeconds` (or hidden flag), as mongod logs them.
    fn log_index_changes(&self, old: &Collection, new: &[IndexSpec], batch: &mut Batch) {
        if self.oplog().is_none() {
            return;
        }
        let (db, name, ui) = (&old.db, old.name.as_str(), old.uuid());
        for spec in new {
            match old.indexes.iter().find(|o| o.name == spec.name) {
                None => self.log(batch, || {
                    let mut o = rawdoc! { "createIndexes": name };
                    for (k, v) in spec.spec.iter().flatten() {
                        o.append(k, v);
                    }
                    crate::oplog::log::command_op(db, Some(ui), &o, None)
                }),
                Some(was) if was.spec != spec.spec => self.log(batch, || {
                    let mut index = rawdoc! { "name": spec.name.as_str() };
                    let mut old_options = RawDocumentBuf::new();
                    for field in ["expireAfterSeconds", "hidden", "prepareUnique", "unique"] {
                        let now = spec.spec.get(field).ok().flatten();
                        let then = was.spec.get(field).ok().flatten();
                        let Ok(key) = <&bson::raw::CStr>::try_from(field) else {
                            continue;
                        };
                        if now != then {
                            if let Some(v) = now {
                                index.append(key, v);
                            }
                            if let Some(v) = then {
                                old_options.append(key, v);
                            }
                        }
                    }
                    let o = rawdoc! { "collMod": name, "index": index };
                    let o2 = rawdoc! {
                        "collectionOptions_old": { "uuid": crate::oplog::log::uuid(ui) },
                        "indexOptions_old": old_options,
                    };
                    crate::oplog::log::command_op(db, Some(ui), &o, Some(&o2))
                }),
                Some(_) => {}
            }
        }
        for gone in old
            .indexes
            .iter()
            .filter(|o| !new.iter().any(|n| n.name == o.name))
        {
            self.log(batch, || {
                let o = rawdoc! { "dropIndexes": name, "index": gone.name.as_str() };
                crate::oplog::log::command_op(db, Some(ui), &o, Some(&gone.spec))
            });
        }
    }

    /// Logs a `collMod` of `db.name` that changes nothing (mongod logs it all the same, and
    /// change streams show it as `modify`). Returns the commit's ticket, if anything was logged.
    pub fn log_empty_coll_mod(&self, db: &str, name: &str) -> Result<Option<u64>, CommandError> {
        let Some(c) = self.get(db, name) else {
            return Ok(None);
        };
        let mut batch = Batch::new();
        self.log(&mut batch, || {
            let mut previous = rawdoc! { "uuid": crate::oplog::log::uuid(c.uuid()) };
            for (k, v) in c.options.iter().flatten() {
                previous.append(k, v);
            }
            crate::oplog::log::command_op(
                db,
                Some(c.uuid()),
                &rawdoc! { "collMod": name },
                Some(&rawdoc! { "collectionOptions_old": previous }),
            )
        });
        if batch.is_empty() {
            return Ok(None);
        }
        Ok(Some(self.store.commit(batch)?))
    }

    /// Logs `dropDatabase` of `db` (after its collections' drops), when there is an oplog.
    /// Returns the commit's ticket.
    pub fn log_drop_database(&self, db: &str) -> Result<Option<u64>, CommandError> {
        let mut batch = Batch::new();
        self.log(&mut batch, || {
            crate::oplog::log::command_op(db, None, &rawdoc! { "dropDatabase": 1 }, None)
        });
        if batch.is_empty() {
            return Ok(None);
        }
        Ok(Some(self.store.commit(batch)?))
    }

    /// A snapshot of the store.
    pub fn snapshot(&self) -> Box<dyn Snapshot> {
        // Under `--profile cosmos`, what a command reads counts towards its request charge.
        crate::storage::tally::counted(self.store.storage().snapshot())
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Names> {
        self.names
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Names> {
        self.names
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn ddl(&self) -> MutexGuard<'_, ()> {
        self.ddl
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn open_databases(&self) -> MutexGuard<'_, BTreeSet<String>> {
        self.open_databases
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Opens `db` for a collection about to be created in it, unless another open database's
    /// name differs from it only in case. The caller holds `ddl`; a database opened for a
    /// creation that then fails stays open, as in mongod.
    fn open_database(&self, db: &str) -> Result<(), CommandError> {
        let mut open = self.open_databases();
        check_db_case(&open, db)?;
        open.insert(db.to_owned());
        Ok(())
    }

    /// Closes `db` once `dropDatabase` has dropped its collections (unless one was created
    /// meanwhile), so that a name differing from it only in case may be used.
    pub fn close_database(&self, db: &str) {
        let _ddl = self.ddl();
        if self.collections(db).is_empty() && self.views(db).is_empty() {
            self.open_databases().remove(db);
        }
    }

    /// The collection `db.name`, if it exists.
    pub fn get(&self, db: &str, name: &str) -> Option<Arc<Collection>> {
        self.read().get(&(db.to_owned(), name.to_owned())).cloned()
    }

    /// Database names that hold at least one collection or view, sorted.
    pub fn databases(&self) -> Vec<String> {
        let mut dbs: Vec<String> = self.read().keys().map(|(db, _)| db.clone()).collect();
        dbs.extend(self.view_databases());
        dbs.sort_unstable();
        dbs.dedup();
        dbs
    }

    /// The collections of `db`, sorted by name.
    pub fn collections(&self, db: &str) -> Vec<Arc<Collection>> {
        self.read()
            .iter()
            .filter(|((d, _), _)| d == db)
            .map(|(_, c)| Arc::clone(c))
            .collect()
    }

    fn next_id(&self, batch: &mut Batch) -> Result<u64, StorageError> {
        self.next_ids(batch, 1)
    }

    /// Reserves `n` consecutive ids (the counter moves in `batch`); returns the first.
    fn next_ids(&self, batch: &mut Batch, n: u64) -> Result<u64, StorageError> {
        let current = self
            .snapshot()
            .get(Keyspace::Catalog, &NEXT_ID_KEY)?
            .map(|v| {
                <[u8; 8]>::try_from(&v[..])
                    .map(u64::from_be_bytes)
                    .map_err(corrupt)
            })
            .transpose()?
            .unwrap_or(1);
        batch.put(
            Keyspace::Catalog,
            NEXT_ID_KEY.to_vec(),
            (current + n).to_be_bytes().to_vec(),
        );
        Ok(current)
    }

    fn record(c: &Collection) -> RawDocumentBuf {
        let mut indexes = bson::RawArrayBuf::new();
        let mut states = bson::RawArrayBuf::new();
        for i in &c.indexes {
            indexes.push(i.spec.clone());
            states.push(rawdoc! {
                "id": i64::try_from(i.id).unwrap_or(i64::MAX),
                "multikey": i.is_multikey(),
            });
        }
        rawdoc! {
            "db": c.db.as_str(),
            "name": c.name.as_str(),
            "id": i64::try_from(c.id).unwrap_or(i64::MAX),
            "options": c.options.clone(),
            "indexes": indexes,
            "indexState": states,
        }
    }

    /// Adds to `batch` the write of `c`'s record as it stands (its multikey flags included).
    /// The caller holds `c`'s write lock, and `c` is the catalog's current collection.
    pub fn put_record(&self, c: &Collection, batch: &mut Batch) {
        batch.put(
            Keyspace::Catalog,
            record_key(&c.db, &c.name),
            Self::record(c).into_bytes(),
        );
    }

    /// `NamespaceExists` if a collection or view `db.name` exists. The caller holds `ddl`.
    fn check_free(&self, db: &str, name: &str) -> Result<(), CommandError> {
        if self.get(db, name).is_some() || self.is_view(db, name) {
            return Err(CommandError::new(
                ErrorCode::NamespaceExists,
                format!("Collection {db}.{name} already exists."),
            ));
        }
        Ok(())
    }

    /// Creates `db.name`. Returns the collection and the commit ticket to wait on, or
    /// `NamespaceExists` if it exists.
    pub fn create(
        &self,
        db: &str,
        name: &str,
        options: RawDocumentBuf,
    ) -> Result<(Arc<Collection>, u64), CommandError> {
        self.create_with(db, name, options, None)
    }

    /// [`Catalog::create`], writing `offer` (the Cosmos DB profile's record of the collection,
    /// see [`offer_key`]) in the same atomic commit.
    pub fn create_with(
        &self,
        db: &str,
        name: &str,
        options: RawDocumentBuf,
        offer: Option<Vec<u8>>,
    ) -> Result<(Arc<Collection>, u64), CommandError> {
        validate_writable(db, name)?;
        let _ddl = self.ddl();
        self.check_free(db, name)?;
        self.open_database(db)?;
        let mut batch = Batch::new();
        let collection = Collection::new(self.next_id(&mut batch)?, db, name, options, Vec::new());
        batch.put(
            Keyspace::Catalog,
            record_key(db, name),
            Self::record(&collection).into_bytes(),
        );
        if let Some(offer) = offer {
            batch.put(Keyspace::Catalog, offer_key(db, Some(name)), offer);
        }
        self.log(&mut batch, || {
            crate::oplog::log::create_op(db, name, collection.uuid(), &collection.options)
        });
        let ticket = self.store.commit(batch)?;
        let collection = Arc::new(collection);
        self.write()
            .insert((db.to_owned(), name.to_owned()), Arc::clone(&collection));
        info!(namespace = %collection.namespace(), id = collection.id, "created collection");
        Ok((collection, ticket))
    }

    /// A collection `db.name` for a transaction to create (MongoDB 4.4+ creates collections in
    /// transactions, explicitly or by a first insert): its id is reserved at once (committed,
    /// so never given again even if the transaction aborts), and nothing else is written or
    /// registered until [`Catalog::commit_creating`]. `NamespaceExists` if it exists.
    pub fn prepare_create(
        &self,
        db: &str,
        name: &str,
        options: RawDocumentBuf,
    ) -> Result<Collection, CommandError> {
        validate_writable(db, name)?;
        let _ddl = self.ddl();
        self.check_free(db, name)?;
        check_db_case(&self.open_databases(), db)?;
        let mut batch = Batch::new();
        let id = self.next_id(&mut batch)?;
        self.store.commit(batch)?;
        Ok(Collection::new(id, db, name, options, Vec::new()))
    }

    /// `pending` (a collection a transaction created, still empty) with its index list
    /// changed by `change` (as [`Catalog::change_indexes`] takes it): new indexes get ids,
    /// reserved at once; there is nothing to build. Returns `change`'s result and the
    /// collection as it is now, for the transaction to keep.
    pub fn change_pending_indexes<T>(
        &self,
        pending: &Collection,
        change: impl FnOnce(&Collection, &mut Vec<IndexSpec>) -> Result<T, CommandError>,
    ) -> Result<(T, Collection), CommandError> {
        let mut indexes = pending.indexes.clone();
        let result = change(pending, &mut indexes)?;
        let fresh: Vec<usize> = (0..indexes.len())
            .filter(|&p| indexes[p].id == 0 && !indexes[p].is_ts_policy())
            .collect();
        if !fresh.is_empty() {
            let _ddl = self.ddl();
            let mut batch = Batch::new();
            let first = self.next_ids(&mut batch, fresh.len() as u64)?;
            for (&p, id) in fresh.iter().zip(first..) {
                indexes[p].id = id;
                indexes[p].multikey = Arc::default();
                indexes[p].accesses = Arc::default();
            }
            self.store.commit(batch)?;
        }
        let changed = Collection::new(
            pending.id,
            &pending.db,
            &pending.name,
            pending.options.clone(),
            indexes,
        )
        .keeping_counters(pending);
        Ok((result, changed))
    }

    /// Commits `batch` (a transaction's), which writes into the collections `created` (made by
    /// [`Catalog::prepare_create`]), with their records, and registers them: all of it, or
    /// `WriteConflict` if one of their names was taken since. `lock` runs first, under the
    /// catalog's DDL lock (the transaction takes its collections' write locks there, in the
    /// order every DDL change takes them).
    pub fn commit_creating<G>(
        &self,
        created: &[Arc<Collection>],
        mut batch: Batch,
        lock: impl FnOnce() -> Result<G, CommandError>,
    ) -> Result<(u64, G), CommandError> {
        let _ddl = self.ddl();
        let guards = lock()?;
        for c in created {
            if self.get(&c.db, &c.name).is_some() || self.is_view(&c.db, &c.name) {
                return Err(crate::txn::write_conflict());
            }
            check_db_case(&self.open_databases(), &c.db)?;
        }
        for c in created {
            batch.put(
                Keyspace::Catalog,
                record_key(&c.db, &c.name),
                Self::record(c).into_bytes(),
            );
        }
        let ticket = self.store.commit(batch)?;
        for c in created {
            self.open_databases().insert(c.db.clone());
            self.write()
                .insert((c.db.clone(), c.name.clone()), Arc::clone(c));
            info!(namespace = %c.namespace(), id = c.id, "created collection (in a transaction)");
        }
        Ok((ticket, guards))
    }

    /// The collection `db.name`, created with default options if missing (writes create
    /// collections implicitly, as in MongoDB). The ticket is `Some` when it was created.
    pub fn get_or_create(
        &self,
        db: &str,
        name: &str,
    ) -> Result<(Arc<Collection>, Option<u64>), CommandError> {
        if let Some(c) = self.get(db, name) {
            return Ok((c, None));
        }
        if self.is_view(db, name) {
            return Err(views::not_a_collection(db, name));
        }
        match self.create(db, name, RawDocumentBuf::new()) {
            Ok((c, ticket)) => Ok((c, Some(ticket))),
            // Another connection created it first.
            Err(e) if e.code == ErrorCode::NamespaceExists => {
                self.get(db, name).map(|c| (c, None)).ok_or(e)
            }
            Err(e) => Err(e),
        }
    }

    /// Every collection.
    pub fn all_collections(&self) -> Vec<Arc<Collection>> {
        self.read().values().cloned().collect()
    }

    /// Changes the indexes of `db.name` (created if `create` and missing) with `change`, which
    /// sees the collection and edits its index list, or refuses with an error. When the change
    /// alters the TTL policy, every document's expiry is recomputed in the same atomic commit:
    /// a document whose instant had already passed at `now_ms` is removed rather than
    /// recomputed, so no policy change brings anything back. Returns `change`'s result, the
    /// commit ticket (none if nothing changed), and whether the collection was created.
    pub fn change_indexes<T>(
        &self,
        db: &str,
        name: &str,
        create: bool,
        now_ms: i64,
        change: impl FnOnce(&Collection, &mut Vec<IndexSpec>) -> Result<T, CommandError>,
    ) -> Result<(T, Option<u64>, bool), CommandError> {
        let (created_ticket, created) = if create {
            let (_, t) = self.get_or_create(db, name)?;
            (t, t.is_some())
        } else {
            (None, false)
        };
        let _ddl = self.ddl();
        let Some(old) = self.get(db, name) else {
            return Err(CommandError::new(
                ErrorCode::NamespaceNotFound,
                format!("ns does not exist: {db}.{name}"),
            ));
        };
        let _writers = old.write_lock.lock();
        let mut indexes = old.indexes.clone();
        let result = change(&old, &mut indexes)?;
        // New indexes with entries: they get ids and are built over the documents.
        let fresh: Vec<usize> = (0..indexes.len())
            .filter(|&p| indexes[p].id == 0 && !indexes[p].is_ts_policy())
            .collect();
        if indexes == old.indexes && fresh.is_empty() {
            return Ok((result, created_ticket, created));
        }
        let mut batch = Batch::new();
        if !fresh.is_empty() {
            let mut start = Batch::new();
            let first = self.next_ids(&mut start, fresh.len() as u64)?;
            for (&p, id) in fresh.iter().zip(first..) {
                indexes[p].id = id;
                indexes[p].multikey = Arc::default();
                indexes[p].accesses = Arc::default();
                start.put(Keyspace::Catalog, building_key(id), Vec::new());
                batch.delete(Keyspace::Catalog, building_key(id));
            }
            self.store.commit(start)?;
            if let Err(e) = self.build(old.id, &indexes, &fresh, now_ms, &old.namespace()) {
                let mut undo = Batch::new();
                for &p in &fresh {
                    undo.delete(Keyspace::Catalog, building_key(indexes[p].id));
                    undo.put(Keyspace::Catalog, dropped_key(indexes[p].id), Vec::new());
                }
                self.store.commit(undo)?;
                return Err(e);
            }
        }
        // Dropped indexes: their entries are removed in the background.
        for gone in old
            .indexes
            .iter()
            .filter(|i| i.has_entries() && !indexes.iter().any(|n| n.id == i.id))
        {
            batch.put(Keyspace::Catalog, dropped_key(gone.id), Vec::new());
        }
        self.log_index_changes(&old, &indexes, &mut batch);
        let new =
            Collection::new(old.id, db, name, old.options.clone(), indexes).keeping_counters(&old);
        if TtlPolicy::from_indexes(&old.indexes).describe() != new.ttl.describe() {
            let ops = crate::ttl::recompute(
                &*self.snapshot(),
                &new,
                now_ms,
                &mut batch,
                self.oplog().is_some(),
            )?;
            if let Some(oplog) = self.oplog()
                && !ops.is_empty()
            {
                batch.stamped.push(oplog.apply_ops_entry(&ops, None));
            }
        }
        batch.put(
            Keyspace::Catalog,
            record_key(db, name),
            Self::record(&new).into_bytes(),
        );
        let ticket = self.store.commit(batch)?;
        old.retired.store(true, Ordering::SeqCst);
        self.write()
            .insert((db.to_owned(), name.to_owned()), Arc::new(new));
        Ok((result, Some(ticket), created))
    }

    /// Sets collection option `key` of `db.name` to `value` (`collMod`'s
    /// `changeStreamPreAndPostImages`), logged as mongod logs `collMod`. Returns the commit
    /// ticket, or none when nothing changed.
    pub fn set_option(
        &self,
        db: &str,
        name: &str,
        key: &str,
        value: &RawDocument,
    ) -> Result<Option<u64>, CommandError> {
        let _ddl = self.ddl();
        let Some(old) = self.get(db, name) else {
            return Err(CommandError::new(
                ErrorCode::NamespaceNotFound,
                format!("ns does not exist: {db}.{name}"),
            ));
        };
        let _writers = old.write_lock.lock();
        let mut options = RawDocumentBuf::new();
        let mut found = false;
        let cstr = <&bson::raw::CStr>::try_from(key)
            .map_err(|_| CommandError::bad_value("an option name with a NUL byte"))?;
        for (k, v) in old.options.iter().flatten() {
            if k.as_str() == key {
                if let RawBsonRef::Document(d) = v
                    && d.as_bytes() == value.as_bytes()
                {
                    return Ok(None);
                }
                options.append(cstr, value);
                found = true;
            } else {
                options.append(k, v);
            }
        }
        if !found {
            options.append(cstr, value);
        }
        let new =
            Collection::new(old.id, db, name, options, old.indexes.clone()).keeping_counters(&old);
        let mut batch = Batch::new();
        batch.put(
            Keyspace::Catalog,
            record_key(db, name),
            Self::record(&new).into_bytes(),
        );
        self.log(&mut batch, || {
            let mut o = rawdoc! { "collMod": name };
            o.append(cstr, value);
            let mut previous = rawdoc! { "uuid": crate::oplog::log::uuid(old.uuid()) };
            for (k, v) in old.options.iter().flatten() {
                previous.append(k, v);
            }
            let o2 = rawdoc! { "collectionOptions_old": previous };
            crate::oplog::log::command_op(db, Some(old.uuid()), &o, Some(&o2))
        });
        let ticket = self.store.commit(batch)?;
        old.retired.store(true, Ordering::SeqCst);
        self.write()
            .insert((db.to_owned(), name.to_owned()), Arc::new(new));
        Ok(Some(ticket))
    }

    /// Writes the entries of `indexes[p]` for each `p` in `fresh` over the live documents of
    /// collection `collection_id`, in chunks, and checks unique ones for duplicates. The caller
    /// holds the collection's write lock, and a building marker covers each new id.
    fn build(
        &self,
        collection_id: u64,
        indexes: &[IndexSpec],
        fresh: &[usize],
        now_ms: i64,
        namespace: &str,
    ) -> Result<(), CommandError> {
        let targets: Vec<crate::index::FieldIndex> = fresh
            .iter()
            .filter_map(|&p| crate::index::FieldIndex::new(p, &indexes[p]))
            .collect();
        let snapshot = self.snapshot();
        let prefix = record::collection_prefix(collection_id);
        let mut batch = Batch::new();
        let mut documents = 0_u64;
        for entry in snapshot.prefix(Keyspace::Docs, &prefix) {
            let (key, value) = entry?;
            let rec = record::decode(&value)?;
            // An expired document holds no key (the purge removes it).
            if rec.expires_ms <= now_ms {
                continue;
            }
            let rid = record::rid_of_doc_key(&key).ok_or_else(|| corrupt("document key"))?;
            for t in &targets {
                let (entries, multikey) = t.entries(rec.doc, rid)?;
                if multikey {
                    indexes[t.pos].multikey.store(true, Ordering::Release);
                }
                for (e, v) in entries {
                    batch.put(Keyspace::Index, e, v);
                }
            }
            documents += 1;
            if batch.len() >= BUILD_CHUNK {
                self.store.commit(std::mem::take(&mut batch))?;
            }
        }
        if !batch.is_empty() {
            self.store.commit(batch)?;
        }
        let snapshot = self.snapshot();
        for t in targets.iter().filter(|t| t.unique) {
            let prefix = crate::index::index_prefix(t.id);
            let mut previous: Option<bytes::Bytes> = None;
            for entry in snapshot.prefix(Keyspace::Index, &prefix) {
                let (key, _) = entry?;
                let same = previous.as_ref().is_some_and(|p| {
                    crate::index::split_entry(p).map(|(_, c, _)| c)
                        == crate::index::split_entry(&key).map(|(_, c, _)| c)
                });
                if same && let Some((_, components, rid)) = crate::index::split_entry(&key) {
                    let doc_key = record::doc_key(collection_id, rid);
                    let doc = match snapshot.get(Keyspace::Docs, &doc_key)? {
                        Some(v) => record::decode(&v)?.doc.to_owned(),
                        None => RawDocumentBuf::new(),
                    };
                    return Err(crate::index::duplicate_key_error(
                        namespace,
                        &indexes[t.pos],
                        t,
                        &doc,
                        components,
                    ));
                }
                previous = Some(key);
            }
        }
        info!(
            namespace,
            documents,
            indexes = targets.len(),
            "built indexes"
        );
        Ok(())
    }

    /// Replaces `db.name` (created if missing) by a collection with the same options and
    /// indexes and only the documents `fill` writes, in one atomic commit: readers see the old
    /// contents until the commit and the new ones after it, never a mix (what `$out` does).
    ///
    /// `fill` gets the new collection, which nobody else sees yet, and returns the batch of its
    /// documents (a `Writer` on it computes each document's expiry from the kept TTL indexes).
    /// The old collection's data is removed in the background, as for a drop. Returns `fill`'s
    /// result and the commit ticket.
    pub fn replace_collection<T>(
        &self,
        db: &str,
        name: &str,
        fill: impl FnOnce(&Collection) -> Result<(T, Batch), CommandError>,
    ) -> Result<(T, u64), CommandError> {
        validate_writable(db, name)?;
        let _ddl = self.ddl();
        if self.is_view(db, name) {
            return Err(views::not_a_collection(db, name));
        }
        let old = self.get(db, name);
        if old.is_none() {
            self.open_database(db)?;
        }
        let _writers = old.as_ref().map(|c| c.write_lock.lock());
        let mut batch = Batch::new();
        let (options, mut indexes) = old.as_ref().map_or_else(
            || (RawDocumentBuf::new(), Vec::new()),
            |c| (c.options.clone(), c.indexes.clone()),
        );
        // New ids for the collection and its indexes: the old ones' data is dropped.
        let with_entries = indexes.iter().filter(|i| i.has_entries()).count() as u64;
        let id = self.next_ids(&mut batch, 1 + with_entries)?;
        for (spec, index_id) in indexes.iter_mut().filter(|i| i.has_entries()).zip(id + 1..) {
            spec.id = index_id;
            spec.multikey = Arc::default();
            spec.accesses = Arc::default();
        }
        let new = Collection::new(id, db, name, options, indexes);
        let (result, docs) = fill(&new)?;
        batch.ops.extend(docs.ops);
        // As mongod's `$out`: the documents go into a temporary collection, renamed over the
        // target (whose stream sees the rename; the temporary collection's inserts are logged
        // under its own name).
        if self.oplog().is_some() {
            let tmp = format!("tmp.agg_out.{}", new.id);
            self.log(&mut batch, || {
                crate::oplog::log::create_op(db, &tmp, new.uuid(), &new.options)
            });
            for entry in docs.stamped.into_values() {
                // (A new collection's options are its old one's: images or not, as before.)
                batch.stamped.push(retarget(entry, db, &tmp));
            }
            self.log(&mut batch, || {
                let mut o = rawdoc! {
                    "renameCollection": format!("{db}.{tmp}"),
                    "to": format!("{db}.{name}"),
                    "stayTemp": false,
                };
                if let Some(old) = &old {
                    o.append(
                        bson::raw::cstr!("dropTarget"),
                        crate::oplog::log::uuid(old.uuid()),
                    );
                }
                crate::oplog::log::command_op(db, Some(new.uuid()), &o, None)
            });
        }
        batch.put(
            Keyspace::Catalog,
            record_key(db, name),
            Self::record(&new).into_bytes(),
        );
        if let Some(old) = &old {
            mark_dropped(&mut batch, old);
        }
        let ticket = self.store.commit(batch)?;
        if let Some(old) = &old {
            old.retired.store(true, Ordering::SeqCst);
        }
        let new = Arc::new(new);
        self.write()
            .insert((db.to_owned(), name.to_owned()), Arc::clone(&new));
        info!(namespace = %new.namespace(), id = new.id, "replaced collection contents");
        Ok((result, ticket))
    }

    /// Drops `db.name`; `None` if it did not exist. Its data is removed in the background.
    pub fn drop_collection(&self, db: &str, name: &str) -> Result<Option<u64>, CommandError> {
        let _ddl = self.ddl();
        let Some(collection) = self.get(db, name) else {
            return Ok(None);
        };
        let _writers = collection.write_lock.lock();
        let mut batch = Batch::new();
        batch.delete(Keyspace::Catalog, record_key(db, name));
        mark_dropped(&mut batch, &collection);
        self.drop_offer(&mut batch, db, Some(name))?;
        self.log(&mut batch, || {
            crate::oplog::log::command_op(
                db,
                Some(collection.uuid()),
                &rawdoc! { "drop": name },
                None,
            )
        });
        let ticket = self.store.commit(batch)?;
        collection.retired.store(true, Ordering::SeqCst);
        self.write().remove(&(db.to_owned(), name.to_owned()));
        info!(namespace = %collection.namespace(), "dropped collection");
        Ok(Some(ticket))
    }

    /// Renames `from` to `to` (both `(db, name)`), dropping an existing target if
    /// `drop_target`. Documents keep their collection id, so nothing else moves.
    pub fn rename(
        &self,
        from: (&str, &str),
        to: (&str, &str),
        drop_target: bool,
    ) -> Result<u64, CommandError> {
        validate_writable(to.0, to.1)?;
        let _ddl = self.ddl();
        let Some(source) = self.get(from.0, from.1) else {
            return Err(CommandError::new(
                ErrorCode::NamespaceNotFound,
                "Source collection does not exist",
            ));
        };
        if self.is_view(to.0, to.1) {
            return Err(CommandError::new(
                ErrorCode::NamespaceExists,
                format!("a view already exists with that name: {}.{}", to.0, to.1),
            ));
        }
        let target = self.get(to.0, to.1);
        if target.is_some() && !drop_target {
            return Err(CommandError::new(
                ErrorCode::NamespaceExists,
                "target namespace exists",
            ));
        }
        self.open_database(to.0)?;
        let _source_writers = source.write_lock.lock();
        let _target_writers = target.as_ref().map(|t| t.write_lock.lock());
        let renamed = Collection::new(
            source.id,
            to.0,
            to.1,
            source.options.clone(),
            source.indexes.clone(),
        )
        .keeping_counters(&source);
        let mut batch = Batch::new();
        if let Some(t) = &target {
            mark_dropped(&mut batch, t);
            self.drop_offer(&mut batch, to.0, Some(to.1))?;
        }
        // The Cosmos DB profile's record goes with the collection.
        if let Some(offer) = self.offer(from.0, Some(from.1))? {
            batch.delete(Keyspace::Catalog, offer_key(from.0, Some(from.1)));
            batch.put(
                Keyspace::Catalog,
                offer_key(to.0, Some(to.1)),
                offer.to_vec(),
            );
        }
        batch.delete(Keyspace::Catalog, record_key(from.0, from.1));
        batch.put(
            Keyspace::Catalog,
            record_key(to.0, to.1),
            Self::record(&renamed).into_bytes(),
        );
        self.log(&mut batch, || {
            let mut o = rawdoc! {
                "renameCollection": format!("{}.{}", from.0, from.1),
                "to": format!("{}.{}", to.0, to.1),
                "stayTemp": false,
            };
            if let Some(t) = &target {
                o.append(
                    bson::raw::cstr!("dropTarget"),
                    crate::oplog::log::uuid(t.uuid()),
                );
            }
            crate::oplog::log::command_op(from.0, Some(source.uuid()), &o, None)
        });
        let ticket = self.store.commit(batch)?;
        source.retired.store(true, Ordering::SeqCst);
        if let Some(t) = &target {
            t.retired.store(true, Ordering::SeqCst);
        }
        let mut names = self.write();
        names.remove(&(from.0.to_owned(), from.1.to_owned()));
        names.insert((to.0.to_owned(), to.1.to_owned()), Arc::new(renamed));
        Ok(ticket)
    }
}

/// The catalog key of the Cosmos DB profile's record of database `db` (`collection` `None`) or
/// of collection `db.collection`: its provisioned throughput and shard key
/// (`crate::cosmos::offers`). `0x0F` db `0x00` collection (empty for the database: no
/// collection name is empty). Outside the profile no such key is ever written.
pub fn offer_key(db: &str, collection: Option<&str>) -> Vec<u8> {
    let name = collection.unwrap_or("");
    let mut key = Vec::with_capacity(2 + db.len() + name.len());
    key.push(0x0F);
    key.extend_from_slice(db.as_bytes());
    key.push(0);
    key.extend_from_slice(name.as_bytes());
    key
}

impl Catalog {
    /// The Cosmos DB profile's record at [`offer_key`]`(db, collection)`, if there is one.
    pub fn offer(
        &self,
        db: &str,
        collection: Option<&str>,
    ) -> Result<Option<bytes::Bytes>, StorageError> {
        self.snapshot()
            .get(Keyspace::Catalog, &offer_key(db, collection))
    }

    /// Adds to `batch` the removal of the record at [`offer_key`]`(db, collection)`, when there
    /// is one (so that a drop outside the Cosmos DB profile writes nothing more).
    fn drop_offer(
        &self,
        batch: &mut Batch,
        db: &str,
        collection: Option<&str>,
    ) -> Result<(), StorageError> {
        if self.offer(db, collection)?.is_some() {
            batch.delete(Keyspace::Catalog, offer_key(db, collection));
        }
        Ok(())
    }

    /// Changes the record at [`offer_key`]`(db, collection)` under the DDL lock: `change` gets
    /// the stored record and whether the collection exists (for a database: whether it holds
    /// a collection or a view), and returns the record to store (`None`: no change). Returns
    /// the commit's ticket, if anything was written.
    pub fn change_offer(
        &self,
        db: &str,
        collection: Option<&str>,
        change: impl FnOnce(Option<&[u8]>, bool) -> Result<Option<Vec<u8>>, CommandError>,
    ) -> Result<Option<u64>, CommandError> {
        let _ddl = self.ddl();
        let exists = match collection {
            Some(name) => self.get(db, name).is_some(),
            None => !self.collections(db).is_empty() || !self.views(db).is_empty(),
        };
        let stored = self.offer(db, collection)?;
        let Some(record) = change(stored.as_deref(), exists)? else {
            return Ok(None);
        };
        let mut batch = Batch::new();
        batch.put(Keyspace::Catalog, offer_key(db, collection), record);
        Ok(Some(self.store.commit(batch)?))
    }

    /// Removes the Cosmos DB profile's record of database `db` (`dropDatabase`, after its
    /// collections). Returns the commit's ticket, if there was one.
    pub fn drop_database_offer(&self, db: &str) -> Result<Option<u64>, CommandError> {
        let _ddl = self.ddl();
        let mut batch = Batch::new();
        self.drop_offer(&mut batch, db, None)?;
        if batch.is_empty() {
            return Ok(None);
        }
        Ok(Some(self.store.commit(batch)?))
    }
}

/// The catalog key of collection `id`'s last announced expiry key (`0x0E` id).
pub fn announced_key(id: u64) -> Vec<u8> {
    let mut key = vec![0x0E];
    key.extend_from_slice(&id.to_be_bytes());
    key
}

/// `entry` (an oplog entry to stamp) with its `ns` changed to `db.name`.
fn retarget(entry: crate::storage::Stamped, db: &str, name: &str) -> crate::storage::Stamped {
    let Ok(doc) = RawDocument::from_bytes(&entry.value) else {
        return entry;
    };
    let mut out = RawDocumentBuf::new();
    let mut ts_at = entry.ts_at;
    for (key, value) in doc.iter().flatten() {
        if key.as_str() == "ns" {
            out.append(key, format!("{db}.{name}"));
        } else {
            out.append(key, value);
        }
        if key.as_str() == "ts" {
            // Its 8 bytes end before the document's closing NUL.
            ts_at = out.as_bytes().len() - 9;
        }
    }
    crate::storage::Stamped {
        value: out.into_bytes(),
        ts_at,
        beside: entry.beside,
    }
}

/// `0x08`: the latest instant at which the purge judged documents expired (i64, big-endian):
/// the server's clock never reads earlier (`crate::clock::Clock::raise_floor`).
const EXPIRED_AT_KEY: [u8; 1] = [0x08];

impl Catalog {
    /// Adds to `batch` that the purge judged documents expired at `now_ms`.
    pub fn note_expired_at(batch: &mut Batch, now_ms: i64) {
        batch.put(
            Keyspace::Catalog,
            &EXPIRED_AT_KEY[..],
            now_ms.to_be_bytes().to_vec(),
        );
    }

    /// The latest instant at which the purge judged documents expired, if any.
    pub fn expired_at(&self) -> Result<Option<i64>, StorageError> {
        Ok(self
            .store
            .storage()
            .get(Keyspace::Catalog, &EXPIRED_AT_KEY)?
            .and_then(|v| <[u8; 8]>::try_from(&v[..]).ok())
            .map(i64::from_be_bytes))
    }
}

mod drops;
mod migrate;
mod views;
pub use drops::{PurgeCursor, purge_task};
pub use views::{MAX_VIEW_DEPTH, ResolvedView, View, not_a_collection};

#[cfg(test)]
mod tests;
