//! `validate`: compares every index of a collection with its documents, as MongoDB's
//! `validate` does, and reports each difference.
//!
//! Every live document's keys are computed again and looked up among the stored entries; every
//! stored entry must belong to a live document that gives that key. Documents that have expired
//! but are not purged yet may or may not still have their entries (one expired when written, or
//! when an index was built, has none): their entries are neither extra nor missing, and are
//! reported as warnings, pending the purge. Expired documents the purge is done with (their
//! expiry entry and index entries are gone; a compaction drops their bytes, see
//! `storage::expired`) are skipped. Unique indexes must hold each key at most once among
//! live documents, and an index holding a multikey document must be flagged multikey. The `_id`
//! index is checked the same way: one entry per live document, naming its record.

use std::collections::{HashMap, HashSet};

use bson::raw::cstr;
use bson::{RawArrayBuf, RawDocumentBuf, rawdoc};

use super::args::collection_name;
use crate::catalog::{Collection, validate_namespace};
use crate::dispatch::Request;
use crate::error::{CommandError, CommandResult, ErrorCode};
use crate::index::split_entry;
use crate::state::ServerState;
use crate::storage::{Keyspace, Snapshot, record};

/// At most this many extra and this many missing entries are listed (all are counted).
const MAX_LISTED: usize = 100;

pub(super) async fn validate(req: &Request<'_>, state: &ServerState) -> CommandResult {
    let name = collection_name(req)?;
    validate_namespace(req.db, name)?;
    for entry in req.body {
        let (k, v) = entry.map_err(|e| CommandError::new(ErrorCode::InvalidBSON, e.to_string()))?;
        match (k.as_str(), v) {
            (k, _) if k == req.name || super::spec::is_generic(k) => {}
            // Booleans in mongod's IDL; Ebb's check is always full and never in the background.
            // `scandata` is a legacy flag mongod still takes (PyMongo's `validate_collection`
            // sends it).
            (
                flag @ ("full"
                | "background"
                | "enforceFastCount"
                | "checkBSONConformance"
                | "scandata"),
                v,
            ) => {
                super::args::truthy(&format!("validate.{flag}"), v)?;
            }
            ("repair", v) if !super::args::truthy("validate.repair", v)? => {}
            ("repair", _) => {
                return Err(CommandError::new(
                    ErrorCode::NotImplemented,
                    "validate with repair is not supported by Ebb",
                ));
            }
            (other, _) => return Err(CommandError::unknown_field(&format!("validate.{other}"))),
        }
    }
    let Some(collection) = state.catalog.get(req.db, name) else {
        return Err(CommandError::new(
            ErrorCode::NamespaceNotFound,
            format!("Collection '{}.{name}' does not exist to validate.", req.db),
        ));
    };
    let snapshot = state.catalog.snapshot();
    let now_ms = state.now_ms();
    tokio::task::spawn_blocking(move || check(&collection, &*snapshot, now_ms))
        .await
        .map_err(|e| CommandError::internal(e.to_string()))?
}

/// What one index's check found.
#[derive(Default)]
struct IndexCheck {
    /// Entries of live documents found.
    keys: i64,
    /// Entries live documents should have, not found yet.
    expected: HashSet<Vec<u8>>,
    /// Entries expired documents may have.
    optional: HashSet<Vec<u8>>,
    /// The value each expected secondary entry should hold (its key fields' values).
    values: HashMap<Vec<u8>, Vec<u8>>,
    /// Entries found whose value differs from their document's (an empty value, written
    /// before entries held values or for a multikey document, differs from nothing).
    wrong_values: usize,
    /// Whether some live document is multikey for it.
    multikey: bool,
    errors: Vec<String>,
}

fn check(collection: &Collection, snapshot: &dyn Snapshot, now_ms: i64) -> CommandResult {
    let ns = collection.namespace();
    let mut checks: Vec<IndexCheck> = collection
        .field_indexes
        .iter()
        .map(|_| IndexCheck::default())
        .collect();
    let mut errors: Vec<String> = Vec::new();
    let mut warnings: Vec<String> = Vec::new();
    let mut missing = RawArrayBuf::new();
    let mut extra = RawArrayBuf::new();
    let (mut nrecords, mut expired, mut invalid) = (0_i64, 0_i64, 0_i64);
    // The `_id` of each document, by record id, for reports of missing entries.
    let mut ids: HashMap<u64, bson::RawBson> = HashMap::new();
    // The `_id` index's entries, each as its key followed by its value (the record id).
    let mut id_check = IndexCheck::default();
    let prefix = record::collection_prefix(collection.id);
    for entry in snapshot.prefix(Keyspace::Docs, &prefix) {
        let (key, value) = entry?;
        let Some(rid) = record::rid_of_doc_key(&key) else {
            invalid += 1;
            errors.push("a document key without a record id".to_owned());
            continue;
        };
        let rec = match record::decode(&value) {
            Ok(r) => r,
            Err(e) => {
                invalid += 1;
                errors.push(format!("corrupt record: {e}"));
                continue;
            }
        };
        let live = rec.expires_ms > now_ms;
        if live {
            nrecords += 1;
        } else if snapshot
            .get(
                Keyspace::Expiry,
                &record::expiry_key(collection.id, rec.expires_ms, rid),
            )?
            .is_some()
        {
            expired += 1;
        } else {
            // The purge is done with it (its entries are gone); a compaction drops its bytes.
            continue;
        }
        if let Some(id_key) = crate::query::keystring::encode_id(rec.doc) {
            let mut entry = crate::index::id_entry_key(collection.id, &id_key);
            entry.extend_from_slice(&crate::index::rid_value(rid));
            if live {
                id_check.expected.insert(entry);
            } else {
                id_check.optional.insert(entry);
            }
        } else {
            invalid += 1;
            errors.push("a document without _id".to_owned());
        }
        for (fi, c) in collection.field_indexes.iter().zip(&mut checks) {
            let keys = match fi.keys(rec.doc) {
                Ok(k) => k,
                Err(e) => {
                    invalid += 1;
                    errors.push(format!(
                        "a document's keys for index '{}' do not compute: {}",
                        collection.indexes[fi.pos].name, e.errmsg
                    ));
                    continue;
                }
            };
            if live && keys.multikey {
                c.multikey = true;
            }
            for (k, value) in keys.components.iter().zip(&keys.values) {
                let Ok(entry) = fi.entry(k, rid) else {
                    continue;
                };
                if live {
                    c.values.insert(entry.clone(), value.clone());
                    c.expected.insert(entry);
                } else {
                    c.optional.insert(entry);
                }
            }
            if live
                && !keys.components.is_empty()
                && let Ok(Some(id)) = rec.doc.get("_id")
            {
                ids.insert(rid, bson::RawBson::from(id));
            }
        }
    }
    let mut keys_per_index = RawDocumentBuf::new();
    let mut details = RawDocumentBuf::new();
    let (mut n_extra, mut n_missing, mut pending_purge) = (0_usize, 0_usize, 0_usize);
    {
        let mut extra_here = 0_usize;
        for entry in snapshot.prefix(Keyspace::Index, &prefix) {
            let (key, value) = entry?;
            let mut both = key.to_vec();
            both.extend_from_slice(&value);
            if id_check.expected.remove(&both) {
                id_check.keys += 1;
            } else if id_check.optional.contains(&both) {
                pending_purge += 1;
            } else {
                extra_here += 1;
                if extra_here <= MAX_LISTED {
                    extra.push(rawdoc! { "indexName": "_id_", "entry": hex(&both) });
                }
            }
        }
        let leftover = id_check.expected.len();
        for entry in id_check.expected.iter().take(MAX_LISTED) {
            missing.push(rawdoc! { "indexName": "_id_", "entry": hex(entry) });
        }
        n_extra += extra_here;
        n_missing += leftover;
        if leftover > 0 {
            id_check.errors.push(format!(
                "index '_id_' is missing {leftover} entries of live documents"
            ));
        }
        if extra_here > 0 {
            id_check
                .errors
                .push("index '_id_' has entries of no live document".to_owned());
        }
        keys_per_index.append(cstr!("_id_"), number(id_check.keys));
        details.append(
            cstr!("_id_"),
            rawdoc! { "valid": id_check.errors.is_empty() },
        );
        errors.extend(std::mem::take(&mut id_check.errors));
    }
    for (fi, mut c) in collection.field_indexes.iter().zip(checks) {
        let spec = &collection.indexes[fi.pos];
        let prefix = crate::index::index_prefix(fi.id);
        let mut previous_live: Option<Vec<u8>> = None;
        let mut extra_here = 0_usize;
        for entry in snapshot.prefix(Keyspace::Index, &prefix) {
            let (key, value) = entry?;
            if c.expected.remove(&key[..]) {
                c.keys += 1;
                if !value.is_empty()
                    && c.values
                        .get(&key[..])
                        .is_some_and(|v| !v.is_empty() && v[..] != value[..])
                {
                    c.wrong_values += 1;
                }
                if fi.unique
                    && let Some((_, components, _)) = split_entry(&key)
                {
                    if previous_live.as_deref() == Some(components) {
                        c.errors.push(format!(
                            "unique index '{}' holds a key twice among live documents",
                            spec.name
                        ));
                    }
                    previous_live = Some(components.to_vec());
                }
            } else if c.optional.contains(&key[..]) {
                pending_purge += 1;
            } else {
                extra_here += 1;
                if n_extra + extra_here <= MAX_LISTED {
                    extra.push(rawdoc! {
                        "indexName": spec.name.as_str(),
                        "entry": hex(&key),
                    });
                }
            }
        }
        if c.wrong_values > 0 {
            c.errors.push(format!(
                "index '{}' has {} entries whose values differ from their documents'",
                spec.name, c.wrong_values
            ));
        }
        let mut leftover: Vec<Vec<u8>> = c.expected.drain().collect();
        leftover.sort();
        for entry in &leftover {
            n_missing += 1;
            if n_missing <= MAX_LISTED
                && let Some((_, _, rid)) = split_entry(entry)
            {
                let mut report = rawdoc! { "indexName": spec.name.as_str() };
                if let Some(id) = ids.get(&rid) {
                    report.append(cstr!("_id"), id.clone());
                }
                report.append(cstr!("entry"), hex(entry));
                missing.push(report);
            }
        }
        n_extra += extra_here;
        if !leftover.is_empty() {
            c.errors.push(format!(
                "index '{}' is missing {} entries of live documents",
                spec.name,
                leftover.len()
            ));
        }
        if extra_here > 0 {
            c.errors.push(format!(
                "index '{}' has entries of no live document",
                spec.name
            ));
        }
        if c.multikey && !spec.is_multikey() {
            c.errors.push(format!(
                "index '{}' is not flagged multikey but a document gives it several keys",
                spec.name
            ));
        }
        if let Ok(name) = <&bson::raw::CStr>::try_from(spec.name.as_str()) {
            keys_per_index.append(name, number(c.keys));
            details.append(name, rawdoc! { "valid": c.errors.is_empty() });
        }
        errors.extend(c.errors);
    }
    // Indexes without entries (the `_ts` TTL policy) are whole by construction.
    for spec in collection.indexes.iter().filter(|i| !i.has_entries()) {
        if let Ok(name) = <&bson::raw::CStr>::try_from(spec.name.as_str()) {
            keys_per_index.append(name, number(nrecords));
            details.append(name, rawdoc! { "valid": true });
        }
    }
    if n_extra > 0 {
        errors.push(format!(
            "{n_extra} index entries belong to no live document"
        ));
    }
    if n_missing > 0 {
        errors.push(format!(
            "{n_missing} index entries of live documents are missing"
        ));
    }
    if expired > 0 {
        warnings.push(format!(
            "{expired} expired documents and {pending_purge} of their index entries are not \
             purged yet"
        ));
    }
    let valid = errors.is_empty();
    let mut warning_list = RawArrayBuf::new();
    for w in &warnings {
        warning_list.push(w.as_str());
    }
    let mut error_list = RawArrayBuf::new();
    for e in &errors {
        error_list.push(e.as_str());
    }
    let mut reply = rawdoc! {
        "ns": ns,
        "nInvalidDocuments": number(invalid),
        "nNonCompliantDocuments": 0,
        "nrecords": number(nrecords),
        "nIndexes": number(i64::try_from(collection.indexes.len() + 1).unwrap_or(i64::MAX)),
        "keysPerIndex": keys_per_index,
        "indexDetails": details,
        "valid": valid,
        "repaired": false,
        "warnings": warning_list,
        "errors": error_list,
        "extraIndexEntries": extra,
        "missingIndexEntries": missing,
        "corruptRecords": RawArrayBuf::new(),
    };
    reply.append(cstr!("ok"), 1.0);
    Ok(reply)
}

/// A count as mongod appends it (`appendNumber`): an int32 when it fits, else an int64.
fn number(n: i64) -> bson::RawBson {
    i32::try_from(n).map_or(bson::RawBson::Int64(n), bson::RawBson::Int32)
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}
