//! Collection and database commands: `create`, `drop`, `dropDatabase`, `listCollections`,
//! `listDatabases`, `renameCollection`, `collStats`, `dbStats`, `compact`.

use bson::raw::cstr;
use bson::{RawArrayBuf, RawBsonRef, RawDocumentBuf, rawdoc};

use super::args::{WriteConcern, collection_name, field, opt_bool, opt_doc, wrong_type};
use crate::catalog::{Collection, validate_db_name, validate_writable};
use crate::dispatch::Request;
use crate::error::{CommandError, CommandResult, ErrorCode};
use crate::query::filter::Filter;
use crate::state::ServerState;
use crate::storage::{Keyspace, Snapshot, record};

/// Options of `create` that Ebb stores and honours (or that are harmless to accept).
const CREATE_OPTIONS: &[&str] = &[
    "autoIndexId",
    "changeStreamPreAndPostImages",
    "idIndex",
    "indexOptionDefaults",
    "storageEngine",
];

/// Reads `changeStreamPreAndPostImages: {enabled: <bool>}` of command `command` as mongod's
/// IDL does: a document whose one field, `enabled`, is required and boolean.
pub(super) fn pre_and_post_images(command: &str, value: RawBsonRef<'_>) -> CommandResult<bool> {
    let path = format!("{command}.changeStreamPreAndPostImages");
    let RawBsonRef::Document(doc) = value else {
        return Err(super::args::wrong_type(&path, value, " 'object'"));
    };
    let mut enabled = None;
    for elem in doc {
        let (k, v) = elem.map_err(|e| CommandError::new(ErrorCode::InvalidBSON, e.to_string()))?;
        match (k.as_str(), v) {
            ("enabled", RawBsonRef::Boolean(b)) => enabled = Some(b),
            ("enabled", other) => {
                return Err(super::args::wrong_type(
                    &format!("{path}.enabled"),
                    other,
                    " 'bool'",
                ));
            }
            (other, _) => {
                return Err(CommandError::unknown_field(&format!("{path}.{other}")));
            }
        }
    }
    enabled.ok_or_else(|| CommandError::missing_field(&format!("{path}.enabled")))
}

/// Counts and sizes one collection's live documents.
pub(crate) fn data_size(
    snapshot: &dyn Snapshot,
    collection: &Collection,
    now_ms: i64,
) -> CommandResult<(i64, i64)> {
    let prefix = record::collection_prefix(collection.id);
    let (mut count, mut size) = (0_i64, 0_i64);
    for entry in snapshot.prefix(Keyspace::Docs, &prefix) {
        let (_, value) = entry?;
        // Expired documents are gone, whether or not the purge has removed their bytes yet.
        if record::decode(&value)?.expires_ms <= now_ms {
            continue;
        }
        count += 1;
        size += i64::try_from(value.len().saturating_sub(record::HEADER_LEN)).unwrap_or(0);
    }
    Ok((count, size))
}

pub(super) async fn create(req: &Request<'_>, state: &ServerState) -> CommandResult {
    let name = collection_name(req)?;
    if field(req, "viewOn")?.is_some() {
        return super::views::create(req, state).await;
    }
    if field(req, "pipeline")?.is_some() {
        return Err(CommandError::new(
            ErrorCode::InvalidOptions,
            "'pipeline' requires 'viewOn' to also be specified",
        ));
    }
    // Only views take a collation so far.
    if field(req, "collation")?.is_some() {
        return Err(CommandError::new(
            ErrorCode::NotImplemented,
            "create option 'collation' is not supported by Ebb yet",
        ));
    }
    let mut options = RawDocumentBuf::new();
    for elem in req.body.iter_elements() {
        let elem = elem.map_err(|e| CommandError::new(ErrorCode::InvalidBSON, e.to_string()))?;
        let key = elem.key().as_str();
        if key == req.name || super::spec::is_generic(key) {
            continue;
        }
        // The command table refused unknown fields and the options Ebb lacks; these are
        // the ones it keeps.
        if !CREATE_OPTIONS.contains(&key) {
            continue;
        }
        let value = elem
            .value()
            .map_err(|e| CommandError::new(ErrorCode::InvalidBSON, e.to_string()))?;
        if key == "changeStreamPreAndPostImages" {
            let enabled = pre_and_post_images("create", value)?;
            options.append(elem.key(), rawdoc! { "enabled": enabled });
            continue;
        }
        options.append(elem.key(), value);
    }
    let concern = WriteConcern::parse(req)?;
    if let Some(txn) = crate::txn::current() {
        // In a transaction (MongoDB 4.4+): only it sees the collection until it commits.
        if state.collection(req.db, name).is_some() || state.catalog.is_view(req.db, name) {
            return Err(CommandError::new(
                ErrorCode::NamespaceExists,
                format!("Collection {}.{name} already exists.", req.db),
            ));
        }
        let created = state.catalog.prepare_create(req.db, name, options)?;
        txn.keep_created(std::sync::Arc::new(created))?;
        return Ok(rawdoc! { "ok": 1.0 });
    }
    if state.catalog.is_view(req.db, name) {
        return Err(CommandError::new(
            ErrorCode::NamespaceExists,
            format!("Collection {}.{name} already exists.", req.db),
        ));
    }
    if let Some(existing) = state.catalog.get(req.db, name) {
        // MongoDB treats re-creating with identical options as success.
        if existing.options == options {
            return Ok(rawdoc! { "ok": 1.0 });
        }
        return Err(CommandError::new(
            ErrorCode::NamespaceExists,
            format!("Collection {}.{name} already exists.", req.db),
        ));
    }
    let (_, ticket) = state.catalog.create(req.db, name, options)?;
    concern.wait(state, Some(ticket)).await?;
    Ok(rawdoc! { "ok": 1.0 })
}

pub(super) async fn drop(req: &Request<'_>, state: &ServerState) -> CommandResult {
    let name = collection_name(req)?;
    validate_db_name(req.db)?;
    super::oplog_collection::refuse_drop(state, req.db, name)?;
    let concern = WriteConcern::parse(req)?;
    if let Some(ticket) = state.catalog.drop_view(req.db, name)? {
        // A view has no indexes to count.
        concern.wait(state, Some(ticket)).await?;
        return Ok(rawdoc! { "ns": format!("{}.{name}", req.db), "ok": 1.0 });
    }
    match state.catalog.drop_collection(req.db, name)? {
        Some(ticket) => {
            state.top.forget(req.db, name);
            state.purge_wake.notify_one();
            concern.wait(state, Some(ticket)).await?;
            Ok(rawdoc! { "nIndexesWas": 1, "ns": format!("{}.{name}", req.db), "ok": 1.0 })
        }
        // MongoDB 7.0 answers success for a collection that does not exist.
        None => Ok(rawdoc! { "ok": 1.0 }),
    }
}

pub(super) async fn drop_database(req: &Request<'_>, state: &ServerState) -> CommandResult {
    validate_db_name(req.db)?;
    super::oplog_collection::refuse_drop_database(state, req.db)?;
    let concern = WriteConcern::parse(req)?;
    let mut last = None;
    for c in state.catalog.collections(req.db) {
        if let Some(t) = state.catalog.drop_collection(&c.db, &c.name)? {
            state.top.forget(&c.db, &c.name);
            last = Some(t);
        }
    }
    if let Some(t) = state.catalog.drop_views(req.db)? {
        last = last.max(Some(t));
    }
    // (The Cosmos DB profile's database record: its shared throughput.)
    if let Some(t) = state.catalog.drop_database_offer(req.db)? {
        last = last.max(Some(t));
    }
    if last.is_some()
        && let Some(t) = state.catalog.log_drop_database(req.db)?
    {
        last = Some(t);
    }
    state.catalog.close_database(req.db);
    if last.is_some() {
        state.purge_wake.notify_one();
    }
    concern.wait(state, last).await?;
    Ok(rawdoc! { "dropped": req.db, "ok": 1.0 })
}

fn collection_entry(c: &Collection, name_only: bool) -> RawDocumentBuf {
    if name_only {
        return rawdoc! { "name": c.name.as_str(), "type": "collection" };
    }
    let uuid = c.uuid();
    rawdoc! {
        "name": c.name.as_str(),
        "type": "collection",
        "options": c.options.clone(),
        "info": {
            "readOnly": false,
            "uuid": bson::Binary { subtype: bson::spec::BinarySubtype::Uuid, bytes: uuid.to_vec() },
        },
        "idIndex": { "v": 2, "key": { "_id": 1 }, "name": "_id_" },
    }
}

pub(super) fn list_collections(req: &Request<'_>, state: &ServerState) -> CommandResult {
    validate_db_name(req.db)?;
    let name_only = opt_bool(req, "nameOnly")?.unwrap_or(false);
    let filter = opt_doc(req, "filter")?.map(Filter::compile).transpose()?;
    // With access control on, `authorizedCollections` (with `nameOnly`) lists only the
    // collections and views the caller holds some privilege on.
    let authorized = opt_bool(req, "authorizedCollections")?.unwrap_or(false) && name_only;
    let privileges = crate::auth::session::caller_privileges().filter(|_| authorized);
    let visible = |name: &str| {
        privileges.as_ref().is_none_or(|p| {
            p.any_action_on(&crate::auth::privileges::Resource::namespace(req.db, name))
        })
    };
    let mut batch = RawArrayBuf::new();
    for c in state.catalog.collections(req.db) {
        if !visible(&c.name) {
            continue;
        }
        let entry = collection_entry(&c, name_only);
        // The filter sees the full entry even when only names are returned.
        let full = collection_entry(&c, false);
        if filter.as_ref().is_none_or(|f| f.matches(&full)) {
            batch.push(entry);
        }
    }
    if let Some((entry, full)) = super::oplog_collection::list_entries(state, req.db, name_only)
        && visible(super::oplog_collection::NAME)
        && filter.as_ref().is_none_or(|f| f.matches(&full))
    {
        batch.push(entry);
    }
    for v in state.catalog.views(req.db) {
        if !visible(&v.name) {
            continue;
        }
        let full = super::views::list_entry(&v, false);
        if filter.as_ref().is_none_or(|f| f.matches(&full)) {
            batch.push(super::views::list_entry(&v, name_only));
        }
    }
    Ok(rawdoc! {
        "cursor": { "id": 0_i64, "ns": format!("{}.$cmd.listCollections", req.db), "firstBatch": batch },
        "ok": 1.0,
    })
}

pub(super) async fn list_databases(req: &Request<'_>, state: &ServerState) -> CommandResult {
    let name_only = opt_bool(req, "nameOnly")?.unwrap_or(false);
    let filter = opt_doc(req, "filter")?.map(Filter::compile).transpose()?;
    let catalog = std::sync::Arc::clone(&state.catalog);
    let now = state.now_ms();
    let sizes = tokio::task::spawn_blocking(move || -> CommandResult<Vec<(String, i64)>> {
        let snapshot = catalog.snapshot();
        let mut out = Vec::new();
        for db in catalog.databases() {
            let mut size = 0;
            for c in catalog.collections(&db) {
                size += data_size(&*snapshot, &c, now)?.1;
            }
            out.push((db, size));
        }
        Ok(out)
    })
    .await
    .map_err(|e| CommandError::internal(e.to_string()))??;
    let mut sizes = sizes;
    super::oplog_collection::add_local_size(state, &mut sizes);
    // With access control on, a caller that may not list every database sees those it may
    // act on (mongod's `authorizedDatabases`).
    let visible: Option<std::sync::Arc<crate::auth::privileges::PrivilegeSet>> =
        match crate::auth::session::caller_privileges() {
            Some(privileges)
                if crate::auth::privileges::list_databases_filtered(req.body, &privileges)? =>
            {
                Some(privileges)
            }
            _ => None,
        };
    let mut databases = RawArrayBuf::new();
    let mut total = 0_i64;
    for (name, size) in sizes {
        if visible.as_ref().is_some_and(|p| !p.any_action_in_db(&name)) {
            continue;
        }
        let entry = rawdoc! { "name": name.as_str(), "sizeOnDisk": size, "empty": false };
        if filter.as_ref().is_some_and(|f| !f.matches(&entry)) {
            continue;
        }
        total += size;
        if name_only {
            databases.push(rawdoc! { "name": name });
        } else {
            databases.push(entry);
        }
    }
    if name_only {
        return Ok(rawdoc! { "databases": databases, "ok": 1.0 });
    }
    Ok(rawdoc! {
        "databases": databases,
        "totalSize": total,
        "totalSizeMb": total / (1024 * 1024),
        "ok": 1.0,
    })
}

fn split_namespace(
    field_name: &str,
    value: Option<RawBsonRef<'_>>,
) -> CommandResult<(String, String)> {
    let ns = match value {
        Some(RawBsonRef::String(s)) => s,
        Some(other) => return Err(wrong_type(field_name, other, " 'string'")),
        None => {
            return Err(CommandError::missing_field(&format!(
                "renameCollection.{field_name}"
            )));
        }
    };
    match ns.split_once('.') {
        Some((db, coll)) if !db.is_empty() && !coll.is_empty() => {
            Ok((db.to_owned(), coll.to_owned()))
        }
        _ => Err(CommandError::new(
            ErrorCode::InvalidNamespace,
            format!("Invalid namespace specified '{ns}'"),
        )),
    }
}

pub(super) async fn rename_collection(req: &Request<'_>, state: &ServerState) -> CommandResult {
    let from = split_namespace("renameCollection", field(req, "renameCollection")?)?;
    let to = split_namespace("to", field(req, "to")?)?;
    let drop_target = opt_bool(req, "dropTarget")?.unwrap_or(false);
    let concern = WriteConcern::parse(req)?;
    validate_writable(&to.0, &to.1)?;
    if from == to {
        return Err(CommandError::new(
            ErrorCode::IllegalOperation,
            "Can't rename a collection to itself",
        ));
    }
    if state.catalog.is_view(&from.0, &from.1) {
        return Err(CommandError::new(
            ErrorCode::CommandNotSupportedOnView,
            format!("cannot rename view: {}.{}", from.0, from.1),
        ));
    }
    if state.catalog.get(&from.0, &from.1).is_none() {
        return Err(CommandError::new(
            ErrorCode::NamespaceNotFound,
            format!("Source collection {}.{} does not exist", from.0, from.1),
        ));
    }
    let ticket = state
        .catalog
        .rename((&from.0, &from.1), (&to.0, &to.1), drop_target)?;
    if drop_target {
        state.purge_wake.notify_one();
    }
    concern.wait(state, Some(ticket)).await?;
    Ok(rawdoc! { "ok": 1.0 })
}

/// What `collStats` and `$collStats`'s `storageStats` report of a collection's storage: its
/// live documents, their bytes, and its indexes' names (`_id_` first). Ebb's store keeps no
/// separate per-index or free-space figures, so those read 0.
pub(crate) struct StorageFigures {
    /// Live documents.
    pub count: i64,
    /// Their BSON bytes.
    pub size: i64,
    /// Every index's name, `_id_` first, then in creation order.
    pub indexes: Vec<String>,
}

/// The [`StorageFigures`] of `collection` as of now (reads every document: call it off the
/// runtime).
pub(crate) fn storage_figures(
    state: &ServerState,
    collection: &Collection,
) -> CommandResult<StorageFigures> {
    let (count, size) = data_size(&*state.catalog.snapshot(), collection, state.now_ms())?;
    let indexes = std::iter::once("_id_".to_owned())
        .chain(collection.indexes.iter().map(|i| i.name.clone()))
        .collect();
    Ok(StorageFigures {
        count,
        size,
        indexes,
    })
}

pub(super) async fn coll_stats(req: &Request<'_>, state: &ServerState) -> CommandResult {
    let name = collection_name(req)?;
    if let Some(oplog) = super::oplog_collection::oplog_of(state, req.db, name) {
        return super::oplog_collection::coll_stats(state, oplog).await;
    }
    let ns = format!("{}.{name}", req.db);
    // MongoDB 7.0 answers a missing collection with zeros.
    let figures = match state.catalog.get(req.db, name) {
        None => StorageFigures {
            count: 0,
            size: 0,
            indexes: Vec::new(),
        },
        Some(collection) => {
            let state = state.clone();
            tokio::task::spawn_blocking(move || storage_figures(&state, &collection))
                .await
                .map_err(|e| CommandError::internal(e.to_string()))??
        }
    };
    let (count, size) = (figures.count, figures.size);
    let mut reply = rawdoc! {
        "ns": ns,
        "size": size,
        "count": count,
    };
    if count > 0 {
        reply.append(cstr!("avgObjSize"), size / count);
    }
    reply.append(cstr!("storageSize"), size);
    reply.append(cstr!("capped"), false);
    reply.append(
        cstr!("nindexes"),
        i32::try_from(figures.indexes.len()).unwrap_or(i32::MAX),
    );
    let mut index_sizes = RawDocumentBuf::new();
    for index in &figures.indexes {
        crate::query::plan::put(&mut index_sizes, index, 0_i64);
    }
    reply.append(cstr!("indexSizes"), index_sizes);
    reply.append(cstr!("totalIndexSize"), 0_i64);
    reply.append(cstr!("totalSize"), size);
    reply.append(cstr!("scaleFactor"), 1);
    if let Some(collection) = state.catalog.get(req.db, name) {
        // Ebb's own: what deletes and updates left in storage since its last compaction.
        let debt = collection_debt(state.catalog.store().storage().as_ref(), &collection);
        reply.append(
            cstr!("ebb"),
            rawdoc! {
                "garbage": {
                    "tombstones": i64::try_from(debt.tombstones).unwrap_or(i64::MAX),
                    "supersededVersions": i64::try_from(debt.superseded).unwrap_or(i64::MAX),
                    "expiredDocuments": i64::try_from(debt.expired).unwrap_or(i64::MAX),
                },
            },
        );
    }
    reply.append(cstr!("ok"), 1.0);
    Ok(reply)
}

/// `compact`: rewrites the keyspaces that hold the collection (they are shared with every other
/// collection: a compaction of one compacts them all), dropping tombstones and superseded
/// versions, and answers the disk bytes given back. `dryRun` compacts nothing and answers
/// `estimatedBytesFreed`: the collection's garbage entries the ledger counts, times the average
/// bytes per entry of the keyspaces' tables. `force` (for replica-set primaries) and `freeSpaceTargetMB` (a
/// `WiredTiger` threshold) change nothing here.
pub(super) async fn compact(req: &Request<'_>, state: &ServerState) -> CommandResult {
    let name = collection_name(req)?;
    crate::catalog::validate_namespace(req.db, name)?;
    if name.starts_with("system.") {
        return Err(CommandError::new(
            ErrorCode::InvalidNamespace,
            "can't compact a system namespace",
        ));
    }
    let Some(collection) = state.catalog.get(req.db, name) else {
        return Err(CommandError::new(
            ErrorCode::NamespaceNotFound,
            "collection does not exist",
        ));
    };
    let dry_run = opt_bool(req, "dryRun")?.unwrap_or(false);
    let storage = std::sync::Arc::clone(state.catalog.store().storage());
    if dry_run {
        let debt = collection_debt(storage.as_ref(), &collection).total();
        let (entries, bytes) = crate::compactor::KEYSPACES
            .iter()
            .map(|ks| (storage.entry_count(*ks), storage.keyspace_size(*ks)))
            .fold((0, 0), |(n, b), (en, eb)| (n + en, b + eb));
        let per_entry = bytes / entries.max(1);
        return Ok(rawdoc! {
            "estimatedBytesFreed": i64::try_from(debt.saturating_mul(per_entry)).unwrap_or(i64::MAX),
            "ok": 1.0,
        });
    }
    let freed = tokio::task::spawn_blocking(move || storage.compact(&crate::compactor::KEYSPACES))
        .await
        .map_err(|e| CommandError::internal(e.to_string()))??;
    Ok(rawdoc! {
        "bytesFreed": i64::try_from(freed).unwrap_or(i64::MAX),
        "ok": 1.0,
    })
}

/// The garbage the ledger counts for a collection: its documents' (and expiry entries') and its
/// indexes' entries', since the keyspaces were last compacted.
fn collection_debt(
    storage: &dyn crate::storage::Storage,
    collection: &Collection,
) -> crate::storage::garbage::Debt {
    let ledger = storage.ledger();
    let mut debt = ledger.id_debt(Keyspace::Docs, collection.id);
    for ks in [Keyspace::Expiry, Keyspace::Index] {
        debt.add(ledger.id_debt(ks, collection.id));
    }
    for index in &collection.field_indexes {
        debt.add(ledger.id_debt(Keyspace::Index, index.id));
    }
    debt
}

#[expect(
    clippy::cast_precision_loss,
    reason = "dbStats reports sizes as doubles, as mongod does"
)]
pub(super) async fn db_stats(req: &Request<'_>, state: &ServerState) -> CommandResult {
    validate_db_name(req.db)?;
    let catalog = std::sync::Arc::clone(&state.catalog);
    let now = state.now_ms();
    let db = req.db.to_owned();
    let (collections, objects, size) =
        tokio::task::spawn_blocking(move || -> CommandResult<(i64, i64, i64)> {
            let snapshot = catalog.snapshot();
            let (mut n, mut objects, mut size) = (0, 0, 0);
            for c in catalog.collections(&db) {
                let (count, bytes) = data_size(&*snapshot, &c, now)?;
                n += 1;
                objects += count;
                size += bytes;
            }
            Ok((n, objects, size))
        })
        .await
        .map_err(|e| CommandError::internal(e.to_string()))??;
    Ok(rawdoc! {
        "db": req.db,
        "collections": collections,
        "views": i64::try_from(state.catalog.views(req.db).len()).unwrap_or(i64::MAX),
        "objects": objects,
        "avgObjSize": if objects > 0 { size as f64 / objects as f64 } else { 0.0 },
        "dataSize": size as f64,
        "storageSize": size as f64,
        "indexes": collections,
        "indexSize": 0.0,
        "totalSize": size as f64,
        "scaleFactor": 1_i64,
        "ok": 1.0,
    })
}
