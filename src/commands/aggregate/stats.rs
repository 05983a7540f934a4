//! What the stages that read the server's own state about the pipeline's collection answer
//! (`$collStats`, `$indexStats`, `$geoNear`), as mongod 7.0 answers them on a single server
//! (`document_source_coll_stats.cpp`, `stats/storage_stats.cpp`,
//! `process_interface/common_mongod_process_interface.cpp`, `pipeline_d.cpp`).

use bson::raw::cstr;
use bson::{RawArrayBuf, RawBsonRef, RawDocumentBuf, rawdoc};

use super::super::collection::{StorageFigures, storage_figures};
use crate::dispatch::Request;
use crate::error::{CommandError, CommandResult, ErrorCode};
use crate::pipeline::stages::CollStatsSpec;
use crate::pipeline::{ServerRead, aggregation_error};
use crate::state::ServerState;

/// Whether the request's pipeline starts with `$collStats`, which mongod runs on a view's
/// own namespace rather than resolving the view.
pub(super) fn starts_with_coll_stats(req: &Request<'_>) -> bool {
    let Ok(Some(RawBsonRef::Array(stages))) = req.body.get("pipeline") else {
        return false;
    };
    match stages.into_iter().next() {
        Some(Ok(RawBsonRef::Document(first))) => {
            matches!(first.iter().next(), Some(Ok((name, _))) if name.as_str() == "$collStats")
        }
        _ => false,
    }
}

/// `host`: the server's host name and port, as mongod's `getHostNameCachedAndPort`.
fn host(state: &ServerState) -> String {
    format!(
        "{}:{}",
        super::super::admin::hostname(),
        state.local_addr.port()
    )
}

/// mongod's `BSONObjBuilder::appendNumber` of a count: an int while it is below 2^30, a long
/// past that.
fn number(n: i64) -> bson::RawBson {
    match i32::try_from(n) {
        Ok(small) if n.abs() < (1 << 30) => bson::RawBson::Int32(small),
        _ => bson::RawBson::Int64(n),
    }
}

/// A section mongod fails to read, as `uassertStatusOKWithContext` words it, raised while
/// the pipeline runs.
fn section_error(section: &str, code: ErrorCode, reason: &str) -> CommandError {
    aggregation_error(CommandError::new(
        code,
        format!("Unable to retrieve {section} in $collStats stage :: caused by :: {reason}"),
    ))
}

/// Answers `what` for `db.coll`.
pub(super) fn server_state(
    state: &ServerState,
    db: &str,
    coll: &str,
    what: &ServerRead<'_>,
) -> CommandResult<Vec<RawDocumentBuf>> {
    match what {
        ServerRead::CollStats(spec) => coll_stats(state, db, coll, spec).map(|d| vec![d]),
        ServerRead::IndexStats => Ok(index_stats(state, db, coll)),
        ServerRead::GeoNear => Err(match state.collection(db, coll) {
            None => CommandError::new(
                ErrorCode::NamespaceNotFound,
                format!("$geoNear requires a geo index to run, but {db}.{coll} does not exist"),
            ),
            // Ebb builds no 2d or 2dsphere index (`createIndexes` refuses them).
            Some(_) => CommandError::new(
                ErrorCode::IndexNotFound,
                "$geoNear requires a 2d or 2dsphere index, but none were found",
            ),
        }),
    }
}

/// `$collStats`: `ns`, `host`, `localTime`, then each requested section in mongod's order.
fn coll_stats(
    state: &ServerState,
    db: &str,
    coll: &str,
    spec: &CollStatsSpec,
) -> CommandResult<RawDocumentBuf> {
    let ns = format!("{db}.{coll}");
    let mut out = rawdoc! {
        "ns": ns.as_str(),
        "host": host(state),
        "localTime": bson::DateTime::now(),
    };
    if let Some(histograms) = spec.latency_stats {
        out.append(
            cstr!("latencyStats"),
            state.top.latency_stats(db, coll, histograms),
        );
    }
    // The sections that read the collection take it as mongod's `AutoGetCollection` does,
    // which refuses a view outright (no section context).
    let needs_collection = spec.storage_stats.is_some() || spec.count || spec.query_exec_stats;
    if needs_collection && state.catalog.is_view(db, coll) {
        return Err(aggregation_error(CommandError::new(
            ErrorCode::CommandNotSupportedOnView,
            format!("Namespace {ns} is a view, not a collection"),
        )));
    }
    if let Some(oplog) = super::super::oplog_collection::oplog_of(state, db, coll) {
        return super::super::oplog_collection::coll_stats_stage(state, oplog, spec, out);
    }
    let collection = state.collection(db, coll);
    let not_found = || format!("Collection [{ns}] not found.");
    let figures = match &collection {
        Some(c) if spec.storage_stats.is_some() || spec.count => Some(storage_figures(state, c)?),
        _ => None,
    };
    if let Some(scale) = spec.storage_stats {
        let Some(f) = &figures else {
            return Err(section_error(
                "storageStats",
                ErrorCode::NamespaceNotFound,
                &not_found(),
            ));
        };
        out.append(cstr!("storageStats"), storage_stats(f, scale));
    }
    if spec.count {
        let Some(f) = &figures else {
            return Err(section_error(
                "count",
                ErrorCode::NamespaceNotFound,
                &not_found(),
            ));
        };
        out.append(cstr!("count"), number(f.count));
    }
    if spec.query_exec_stats {
        let Some(c) = &collection else {
            return Err(section_error(
                "queryExecStats",
                ErrorCode::NamespaceNotFound,
                &not_found(),
            ));
        };
        // Ebb has no tailable cursors: every collection scan is a non-tailable one.
        let scans = c.scans.total();
        out.append(
            cstr!("queryExecStats"),
            rawdoc! { "collectionScans": { "total": scans, "nonTailable": scans } },
        );
    }
    Ok(out)
}

/// `storageStats` in mongod 7.0's shape and types, sizes divided by `scale`. Ebb's store
/// shares its tables between collections and keeps no per-index sizes: `storageSize` is the
/// documents' bytes, and the free and index sizes are 0.
fn storage_stats(f: &StorageFigures, scale: i32) -> RawDocumentBuf {
    let scale = i64::from(scale.max(1));
    let size = f.size / scale;
    let mut out = rawdoc! { "size": number(size), "count": number(f.count) };
    if f.count > 0 {
        out.append(
            cstr!("avgObjSize"),
            i32::try_from(f.size / f.count).unwrap_or(i32::MAX),
        );
    }
    out.append(cstr!("numOrphanDocs"), 0);
    out.append(cstr!("storageSize"), number(size));
    out.append(cstr!("freeStorageSize"), 0);
    out.append(cstr!("capped"), false);
    out.append(
        cstr!("nindexes"),
        i32::try_from(f.indexes.len()).unwrap_or(i32::MAX),
    );
    let mut details = RawDocumentBuf::new();
    let mut sizes = RawDocumentBuf::new();
    for name in &f.indexes {
        crate::query::plan::put(&mut details, name, RawDocumentBuf::new());
        crate::query::plan::put(&mut sizes, name, 0);
    }
    out.append(cstr!("indexDetails"), details);
    out.append(cstr!("indexBuilds"), RawArrayBuf::new());
    out.append(cstr!("totalIndexSize"), 0);
    out.append(cstr!("indexSizes"), sizes);
    out.append(cstr!("totalSize"), number(size));
    out.append(
        cstr!("scaleFactor"),
        i32::try_from(scale).unwrap_or(i32::MAX),
    );
    out
}

/// `$indexStats`: one document per index (`_id_` first, then in creation order), none for a
/// collection that does not exist. Ebb builds an index before any query sees it, so no
/// document carries `building`.
fn index_stats(state: &ServerState, db: &str, coll: &str) -> Vec<RawDocumentBuf> {
    let Some(collection) = state.collection(db, coll) else {
        return Vec::new();
    };
    let host = host(state);
    let entry = |name: &str,
                 key: RawDocumentBuf,
                 accesses: &crate::catalog::IndexAccesses,
                 spec: RawDocumentBuf| {
        rawdoc! {
            "name": name,
            "key": key,
            "host": host.as_str(),
            "accesses": {
                "ops": accesses.ops(),
                "since": bson::DateTime::from_millis(accesses.since_ms()),
            },
            "spec": spec,
        }
    };
    let mut out = vec![entry(
        "_id_",
        rawdoc! { "_id": 1 },
        &collection.id_accesses,
        rawdoc! { "v": 2, "key": { "_id": 1 }, "name": "_id_" },
    )];
    for index in &collection.indexes {
        out.push(entry(
            &index.name,
            index.key.clone(),
            &index.accesses,
            index.spec.clone(),
        ));
    }
    out
}
