//! `local.oplog.rs` as a replica set member shows it: a read-only capped collection over the
//! oplog ([`crate::oplog::log`]), whose entries are stored under their times. `find` (with
//! `getMore`), `count`, `aggregate`, `listCollections`, `listDatabases`, `collStats` and
//! `$collStats` read it; a filter on `ts` seeks to the range it allows instead of scanning the
//! whole oplog, and every scan starts at the oldest entry kept (the deleted ones' tombstones lie
//! before it). Writes are refused as mongod refuses them. `replSetResizeOplog` changes its
//! bounds ([`crate::oplog::retention`]). A standalone server has no oplog: its `local.oplog.rs`
//! is whatever the catalog holds (nothing, unless a client made it).

use std::ops::Bound;
use std::sync::Arc;

use bson::raw::cstr;
use bson::{RawArrayBuf, RawBsonRef, RawDocument, RawDocumentBuf, Timestamp, rawdoc};

use crate::cursor::{Scan, SortedRead, Source};
use crate::dispatch::Request;
use crate::error::{CommandError, CommandResult, ErrorCode};
use crate::oplog::Oplog;
use crate::oplog::retention::MB;
use crate::pipeline::stages::CollStatsSpec;
use crate::query::filter::Filter;
use crate::query::projection::Projection;
use crate::query::sort::SortSpec;
use crate::replset::ts_to_u64;
use crate::sorter::{Sorted, Sorter};
use crate::state::ServerState;
use crate::storage::Keyspace;

/// The oplog's database.
pub(crate) const DB: &str = "local";
/// The oplog's collection.
pub(crate) const NAME: &str = "oplog.rs";
/// Entries read per step of a blocking sort or a count.
const READ_BATCH: usize = 1024;

/// The oplog, when `db.name` is `local.oplog.rs` on a replica set member.
pub(crate) fn oplog_of<'a>(state: &'a ServerState, db: &str, name: &str) -> Option<&'a Arc<Oplog>> {
    if db == DB && name == NAME {
        state.catalog.oplog()
    } else {
        None
    }
}

/// The times a filter's top-level conditions on `ts` allow (those under a top-level `$and`
/// too), as inclusive bounds of [`ts_to_u64`]; `None` when they allow none. Other conditions
/// are left to the filter, which every entry read still goes through.
fn ts_bounds(filter: Option<&RawDocument>) -> Option<(u64, u64)> {
    let mut bounds = (0_u64, u64::MAX);
    if let Some(filter) = filter {
        narrow(filter, &mut bounds, 0);
    }
    (bounds.0 <= bounds.1).then_some(bounds)
}

fn narrow(filter: &RawDocument, bounds: &mut (u64, u64), depth: usize) {
    for (key, value) in filter.iter().flatten() {
        match (key.as_str(), value) {
            ("ts", RawBsonRef::Timestamp(ts)) => apply("$eq", ts, bounds),
            ("ts", RawBsonRef::Document(ops)) => {
                for (op, operand) in ops.iter().flatten() {
                    if let RawBsonRef::Timestamp(ts) = operand {
                        apply(op.as_str(), ts, bounds);
                    }
                }
            }
            ("$and", RawBsonRef::Array(all)) if depth < 8 => {
                for clause in all.into_iter().flatten() {
                    if let RawBsonRef::Document(clause) = clause {
                        narrow(clause, bounds, depth + 1);
                    }
                }
            }
            _ => {}
        }
    }
}

fn apply(op: &str, ts: Timestamp, bounds: &mut (u64, u64)) {
    let t = ts_to_u64(ts);
    match op {
        "$eq" => {
            bounds.0 = bounds.0.max(t);
            bounds.1 = bounds.1.min(t);
        }
        "$gte" => bounds.0 = bounds.0.max(t),
        "$gt" => match t.checked_add(1) {
            Some(next) => bounds.0 = bounds.0.max(next),
            None => *bounds = (1, 0),
        },
        "$lte" => bounds.1 = bounds.1.min(t),
        "$lt" => match t.checked_sub(1) {
            Some(prev) => bounds.1 = bounds.1.min(prev),
            None => *bounds = (1, 0),
        },
        _ => {}
    }
}

/// A live scan of the entries `filter` may match (seeking to its `ts` range, from the oldest
/// entry kept), forward or in `reverse`.
fn open(
    state: &ServerState,
    oplog: &Oplog,
    filter_doc: Option<&RawDocument>,
    filter: Option<Filter>,
    reverse: bool,
) -> Source {
    let Some((lo, hi)) = ts_bounds(filter_doc) else {
        return Source::Buffered(std::collections::VecDeque::new());
    };
    let lo = lo.max(oplog.oldest());
    if lo > hi {
        return Source::Buffered(std::collections::VecDeque::new());
    }
    let mut source = Source::Scan(Box::new(Scan {
        snapshot: state.snapshot(),
        lower: Bound::Included(lo.to_be_bytes().to_vec()),
        upper: Bound::Included(hi.to_be_bytes().to_vec()),
        filter: filter.filter(|f| !f.is_match_all()),
        projection: None,
        skip: 0,
        remaining: None,
        now_ms: state.now_ms(),
        done: false,
        reverse,
        examined: 0,
        interrupt: None,
        whole: None,
        keyspace: Keyspace::Oplog,
        split: false,
    }));
    source.set_interrupt(&state.interrupt());
    source
}

/// The scan direction a sort asks for, if it is the scan order: `{$natural: ±1}`, or `{ts:
/// ±1}` (the entries are stored in `ts` order); `None` for a sort done in memory.
fn scan_order(sort: Option<&SortSpec>, sort_doc: Option<&RawDocument>) -> Option<bool> {
    if let Some(n) = sort.and_then(SortSpec::natural) {
        return Some(n < 0);
    }
    if sort.is_none_or(SortSpec::is_empty) {
        return Some(false);
    }
    let mut keys = sort_doc?.iter().flatten();
    let (key, value) = keys.next()?;
    if key.as_str() != "ts" || keys.next().is_some() {
        return None;
    }
    let direction = match value {
        RawBsonRef::Int32(n) => f64::from(n),
        RawBsonRef::Int64(n) => {
            if n < 0 {
                -1.0
            } else {
                1.0
            }
        }
        RawBsonRef::Double(d) => d,
        _ => return None,
    };
    Some(direction < 0.0)
}

/// What `find` asked of `local.oplog.rs`, checked and compiled.
pub(crate) struct Find<'a> {
    pub ns: String,
    pub filter_doc: Option<&'a RawDocument>,
    pub filter: Option<Filter>,
    pub projection: Option<Projection>,
    pub sort_doc: Option<&'a RawDocument>,
    pub sort: Option<SortSpec>,
    pub skip: u64,
    pub limit: Option<u64>,
    pub batch_size: Option<usize>,
    pub single_batch: bool,
    pub no_timeout: bool,
    pub allow_disk_use: bool,
}

/// `find` on the oplog: a scan in time order (either way), or a sort in memory.
pub(crate) async fn find(
    state: &ServerState,
    req: &Request<'_>,
    oplog: &Oplog,
    find: Find<'_>,
) -> CommandResult {
    let order = scan_order(find.sort.as_ref(), find.sort_doc);
    let mut source = open(
        state,
        oplog,
        find.filter_doc,
        find.filter.clone(),
        order.unwrap_or(false),
    );
    let source = match (order, find.sort) {
        (Some(_), _) | (None, None) => {
            source.set_window(find.projection, find.skip, find.limit);
            source
        }
        (None, Some(sort)) => {
            let limits = state.config.sort_limits(find.allow_disk_use);
            let keep = find
                .limit
                .map(|l| usize::try_from(l.saturating_add(find.skip)).unwrap_or(usize::MAX));
            let skip = usize::try_from(find.skip).unwrap_or(usize::MAX);
            let projection = find.projection;
            let filter = find.filter.unwrap_or_else(Filter::match_all);
            tokio::task::spawn_blocking(move || -> CommandResult<Source> {
                let mut sorter = Sorter::new(sort, keep, limits);
                loop {
                    let batch = source.next_entries(READ_BATCH, usize::MAX)?;
                    if batch.is_empty() {
                        break;
                    }
                    for (doc, expires) in batch {
                        sorter.push(doc, expires)?;
                    }
                }
                Ok(match sorter.finish()? {
                    Sorted::Memory(all) => Source::Buffered(
                        all.into_iter()
                            .skip(skip)
                            .map(|(d, e)| match &projection {
                                Some(p) => p.apply_with_filter(&d, &filter).map(|d| (d, e)),
                                None => Ok((d, e)),
                            })
                            .collect::<CommandResult<_>>()?,
                    ),
                    spilled @ Sorted::Merge(_) => Source::Sorted(Box::new(SortedRead::new(
                        spilled,
                        skip,
                        projection.map(|p| (p, filter)),
                    )?)),
                })
            })
            .await
            .map_err(|e| CommandError::internal(e.to_string()))??
        }
    };
    super::read::first_batch(
        state,
        find.ns,
        source,
        find.batch_size,
        find.single_batch,
        find.no_timeout,
        super::read::lsid_of(req),
    )
    .await
}

/// `count` on the oplog: from the running figures for no query, else by a scan.
pub(crate) async fn count(
    state: &ServerState,
    oplog: &Arc<Oplog>,
    query: Option<&RawDocument>,
    filter: Option<Filter>,
    skip: u64,
    limit: Option<u64>,
) -> CommandResult {
    let n = if query.is_none_or(RawDocument::is_empty) {
        let (_, count) = figures(state, oplog).await?;
        let left = count.saturating_sub(skip);
        limit.map_or(left, |l| left.min(l))
    } else {
        let mut source = open(state, oplog, query, filter, false);
        source.set_window(None, skip, limit);
        tokio::task::spawn_blocking(move || -> CommandResult<u64> {
            let mut n = 0;
            loop {
                let batch = source.next_entries(READ_BATCH, usize::MAX)?;
                if batch.is_empty() {
                    return Ok(n);
                }
                n += batch.len() as u64;
            }
        })
        .await
        .map_err(|e| CommandError::internal(e.to_string()))??
    };
    Ok(rawdoc! { "n": i32::try_from(n).unwrap_or(i32::MAX), "ok": 1.0 })
}

/// The documents an aggregate on the oplog starts from: the entries a leading `$match` keeps,
/// read from its `ts` range (the match still runs, with the other stages, over them).
pub(crate) async fn aggregate_input(
    state: &ServerState,
    raw_stages: &[RawDocumentBuf],
) -> CommandResult<Vec<(RawDocumentBuf, i64)>> {
    let Some(oplog) = state.catalog.oplog() else {
        return Ok(Vec::new());
    };
    let leading_match = raw_stages
        .first()
        .and_then(|s| s.get_document("$match").ok())
        .map(ToOwned::to_owned);
    // The match itself is applied as the entries are read, so that only those it keeps are
    // held (it runs again as the pipeline's first stage; one it cannot take as a query
    // filter is left to that stage alone).
    let filter = leading_match
        .as_deref()
        .and_then(|m| Filter::compile(m).ok());
    let mut source = open(state, oplog, leading_match.as_deref(), filter, false);
    tokio::task::spawn_blocking(move || source.drain())
        .await
        .map_err(|e| CommandError::internal(e.to_string()))?
}

/// The bytes and number of the entries kept, counted up to now.
async fn figures(state: &ServerState, oplog: &Arc<Oplog>) -> CommandResult<(u64, u64)> {
    let oplog = Arc::clone(oplog);
    let catalog = Arc::clone(&state.catalog);
    tokio::task::spawn_blocking(move || -> CommandResult<(u64, u64)> {
        oplog.retention().observe(&*catalog.snapshot())?;
        Ok(oplog.retention().figures())
    })
    .await
    .map_err(|e| CommandError::internal(e.to_string()))?
}

/// As [`figures`], on the calling thread (for the pipeline's `$collStats`, already off the
/// runtime).
fn figures_now(state: &ServerState, oplog: &Oplog) -> CommandResult<(u64, u64)> {
    oplog.retention().observe(&*state.catalog.snapshot())?;
    Ok(oplog.retention().figures())
}

fn long(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// The oplog's UUID (`info.uuid`): made of the replica set's id, so it stays across restarts.
fn uuid(state: &ServerState) -> bson::Binary {
    let mut bytes = [0_u8; 16];
    if let Some(rs) = &state.replset {
        bytes[..12].copy_from_slice(&rs.replica_set_id.bytes());
    }
    bytes[12..].copy_from_slice(b"oplg");
    crate::oplog::log::uuid(bytes)
}

/// `listCollections`' entries for `local.oplog.rs` on database `db`: the entry to list and the
/// full one the filter sees (none off `local` or on a standalone).
pub(crate) fn list_entries(
    state: &ServerState,
    db: &str,
    name_only: bool,
) -> Option<(RawDocumentBuf, RawDocumentBuf)> {
    let oplog = oplog_of(state, db, NAME)?;
    let full = rawdoc! {
        "name": NAME,
        "type": "collection",
        "options": {
            "capped": true,
            "size": long(oplog.retention().max_bytes()),
            "autoIndexId": false,
        },
        "info": { "readOnly": false, "uuid": uuid(state) },
    };
    let entry = if name_only {
        rawdoc! { "name": NAME, "type": "collection" }
    } else {
        full.clone()
    };
    Some((entry, full))
}

/// Adds the oplog's bytes to `local` in `listDatabases`' sizes (listing `local` if nothing
/// else is in it).
pub(crate) fn add_local_size(state: &ServerState, sizes: &mut Vec<(String, i64)>) {
    let Some(oplog) = state.catalog.oplog() else {
        return;
    };
    let (bytes, _) = oplog.retention().figures();
    let bytes = long(bytes);
    if let Some((_, size)) = sizes.iter_mut().find(|(name, _)| name == DB) {
        *size = size.saturating_add(bytes);
    } else {
        let at = sizes.partition_point(|(name, _)| name.as_str() < DB);
        sizes.insert(at, (DB.to_owned(), bytes));
    }
}

/// `collStats` on the oplog, in the shape Ebb answers for a collection, capped.
pub(crate) async fn coll_stats(state: &ServerState, oplog: &Arc<Oplog>) -> CommandResult {
    let (size, count) = figures(state, oplog).await?;
    let (size, count) = (long(size), long(count));
    let mut reply = rawdoc! { "ns": format!("{DB}.{NAME}"), "size": size, "count": count };
    if let Some(avg) = size.checked_div(count) {
        reply.append(cstr!("avgObjSize"), avg);
    }
    reply.append(cstr!("storageSize"), size);
    reply.append(cstr!("capped"), true);
    reply.append(cstr!("maxSize"), long(oplog.retention().max_bytes()));
    reply.append(cstr!("nindexes"), 0);
    reply.append(cstr!("indexSizes"), RawDocumentBuf::new());
    reply.append(cstr!("totalIndexSize"), 0_i64);
    reply.append(cstr!("totalSize"), size);
    reply.append(cstr!("scaleFactor"), 1);
    reply.append(cstr!("ok"), 1.0);
    Ok(reply)
}

/// `$collStats` on the oplog: the sections `spec` asks for after `out`'s `ns`, `host`,
/// `localTime` (and `latencyStats`).
pub(crate) fn coll_stats_stage(
    state: &ServerState,
    oplog: &Oplog,
    spec: &CollStatsSpec,
    mut out: RawDocumentBuf,
) -> CommandResult<RawDocumentBuf> {
    let (size, count) = figures_now(state, oplog)?;
    if let Some(scale) = spec.storage_stats {
        let scale = u64::try_from(scale.max(1)).unwrap_or(1);
        let scaled = long(size / scale);
        let mut section = rawdoc! { "size": scaled, "count": long(count) };
        if let Some(avg) = size.checked_div(count) {
            section.append(cstr!("avgObjSize"), i32::try_from(avg).unwrap_or(i32::MAX));
        }
        section.append(cstr!("numOrphanDocs"), 0);
        section.append(cstr!("storageSize"), scaled);
        section.append(cstr!("freeStorageSize"), 0);
        section.append(cstr!("capped"), true);
        section.append(
            cstr!("maxSize"),
            long(oplog.retention().max_bytes() / scale),
        );
        section.append(cstr!("nindexes"), 0);
        section.append(cstr!("indexDetails"), RawDocumentBuf::new());
        section.append(cstr!("indexBuilds"), RawArrayBuf::new());
        section.append(cstr!("totalIndexSize"), 0);
        section.append(cstr!("indexSizes"), RawDocumentBuf::new());
        section.append(cstr!("totalSize"), scaled);
        section.append(
            cstr!("scaleFactor"),
            i32::try_from(scale).unwrap_or(i32::MAX),
        );
        out.append(cstr!("storageStats"), section);
    }
    if spec.count {
        out.append(cstr!("count"), long(count));
    }
    if spec.query_exec_stats {
        out.append(
            cstr!("queryExecStats"),
            rawdoc! { "collectionScans": { "total": 0_i64, "nonTailable": 0_i64 } },
        );
    }
    Ok(out)
}

/// mongod's refusal of a client's `insert`, `update`, `delete` or `findAndModify` on the oplog
/// of a replica set member (`userAllowedWriteNS`).
pub(crate) fn refuse_write(state: &ServerState, db: &str, name: &str) -> CommandResult<()> {
    match oplog_of(state, db, name) {
        Some(_) => Err(CommandError::new(
            ErrorCode::InvalidNamespace,
            format!("cannot write to '{DB}.{NAME}'"),
        )),
        None => Ok(()),
    }
}

/// mongod's refusal to `drop` the oplog of a replica set member.
pub(crate) fn refuse_drop(state: &ServerState, db: &str, name: &str) -> CommandResult<()> {
    match oplog_of(state, db, name) {
        Some(_) => Err(CommandError::new(
            ErrorCode::IllegalOperation,
            "can't drop live oplog while replicating",
        )),
        None => Ok(()),
    }
}

/// mongod's refusal of `createIndexes` on the oplog (`IndexCatalog`'s spec check).
pub(crate) fn refuse_indexes(state: &ServerState, db: &str, name: &str) -> CommandResult<()> {
    match oplog_of(state, db, name) {
        Some(_) => Err(CommandError::new(
            ErrorCode::CannotCreateIndex,
            "cannot create indexes on the oplog",
        )),
        None => Ok(()),
    }
}

/// mongod's refusal to drop the `local` database of a replica set member.
pub(crate) fn refuse_drop_database(state: &ServerState, db: &str) -> CommandResult<()> {
    if db == DB && state.catalog.oplog().is_some() {
        return Err(CommandError::new(
            ErrorCode::IllegalOperation,
            "Cannot drop 'local' database while replication is active",
        ));
    }
    Ok(())
}

/// A `replSetResizeOplog` field (`size` in MB, `minRetentionHours`), checked as mongod's IDL
/// does: a double (mongosh must send `Double(…)`, as the manual says since 5.0), at least
/// `min` (and at most `max`).
fn resize_field(
    req: &Request<'_>,
    name: &str,
    min: f64,
    max: Option<f64>,
) -> CommandResult<Option<f64>> {
    let n = match req.body.get(name) {
        Ok(None) => return Ok(None),
        Ok(Some(RawBsonRef::Double(d))) => d,
        Ok(Some(other)) => {
            return Err(super::args::wrong_type(
                &format!("replSetResizeOplog.{name}"),
                other,
                " 'double'",
            ));
        }
        Err(e) => return Err(CommandError::new(ErrorCode::InvalidBSON, e.to_string())),
    };
    let shown = |x: f64| {
        if x.fract() == 0.0 && x.abs() < 1e15 {
            format!("{x:.0}")
        } else {
            x.to_string()
        }
    };
    if n.is_nan() || n < min {
        return Err(CommandError::new(
            ErrorCode::Location(51024),
            format!(
                "BSON field 'replSetResizeOplog.{name}' value must be >= {}, actual value '{}'",
                shown(min),
                shown(n)
            ),
        ));
    }
    if let Some(max) = max
        && n > max
    {
        return Err(CommandError::new(
            ErrorCode::Location(51024),
            format!(
                "BSON field 'replSetResizeOplog.{name}' value must be <= {}, actual value '{}'",
                shown(max),
                shown(n)
            ),
        ));
    }
    Ok(Some(n))
}

/// `replSetResizeOplog {size: <MB>, minRetentionHours: <hours>}`: sets the oplog's size (990
/// MB to 1 PB), its minimum retention, or both; the retention task applies them at once.
pub(crate) fn repl_set_resize_oplog(req: &Request<'_>, state: &ServerState) -> CommandResult {
    let size = resize_field(req, "size", 990.0, Some(1_073_741_824.0))?;
    let hours = resize_field(req, "minRetentionHours", 0.0, None)?;
    let Some(oplog) = state.catalog.oplog() else {
        return Err(CommandError::new(
            ErrorCode::NamespaceNotFound,
            "oplog does not exist",
        ));
    };
    #[expect(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        reason = "checked between 990 and 2^30 MB"
    )]
    let bytes = size.map(|mb| (mb as u64).saturating_mul(MB));
    oplog.retention().resize(bytes, hours);
    tracing::info!(
        size = oplog.retention().max_bytes(),
        min_retention_hours = oplog.retention().min_hours(),
        "replSetResizeOplog success"
    );
    Ok(rawdoc! { "ok": 1.0 })
}

/// `serverStatus.oplogTruncation` (replica set members): mongod's fields, processing by
/// scanning (Ebb reads the kept entries once after a start), the minimum retention when set.
pub(crate) fn oplog_truncation(state: &ServerState) -> Option<RawDocumentBuf> {
    let retention = state.catalog.oplog()?.retention();
    let mut out = rawdoc! {
        "totalTimeProcessingMicros": long(retention.processing_micros()),
        "processingMethod": "scanning",
    };
    let hours = retention.min_hours();
    if hours != 0.0 {
        out.append(cstr!("oplogMinRetentionHours"), hours);
    }
    out.append(
        cstr!("totalTimeTruncatingMicros"),
        long(retention.truncating_micros()),
    );
    out.append(cstr!("truncateCount"), long(retention.truncations()));
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ts(time: u32, increment: u32) -> Timestamp {
        Timestamp { time, increment }
    }

    fn key(time: u32, increment: u32) -> u64 {
        ts_to_u64(ts(time, increment))
    }

    #[test]
    fn ts_conditions_become_a_range() {
        assert_eq!(ts_bounds(None), Some((0, u64::MAX)));
        let f = rawdoc! { "ts": { "$gt": ts(5, 1) } };
        assert_eq!(ts_bounds(Some(&f)), Some((key(5, 2), u64::MAX)));
        let f = rawdoc! { "ts": { "$gte": ts(5, 1), "$lt": ts(9, 0) }, "op": "i" };
        assert_eq!(ts_bounds(Some(&f)), Some((key(5, 1), key(9, 0) - 1)));
        let f = rawdoc! { "$and": [ { "ts": { "$lte": ts(9, 0) } }, { "ts": ts(7, 3) } ] };
        assert_eq!(ts_bounds(Some(&f)), Some((key(7, 3), key(7, 3))));
        let f = rawdoc! { "ts": { "$gt": ts(9, 0), "$lt": ts(5, 0) } };
        assert_eq!(ts_bounds(Some(&f)), None);
        // Conditions on other types, or other operators, leave it to the filter.
        let f = rawdoc! { "ts": { "$gt": 5, "$ne": ts(1, 1) } };
        assert_eq!(ts_bounds(Some(&f)), Some((0, u64::MAX)));
        let f = rawdoc! { "$or": [ { "ts": ts(1, 1) } ] };
        assert_eq!(ts_bounds(Some(&f)), Some((0, u64::MAX)));
    }

    #[test]
    fn natural_and_ts_sorts_are_the_scan_order() {
        let order = |s: RawDocumentBuf| {
            let spec = SortSpec::compile(&s).unwrap();
            scan_order(Some(&spec), Some(&s))
        };
        assert_eq!(scan_order(None, None), Some(false));
        assert_eq!(order(rawdoc! { "$natural": -1 }), Some(true));
        assert_eq!(order(rawdoc! { "$natural": 1 }), Some(false));
        assert_eq!(order(rawdoc! { "ts": -1 }), Some(true));
        assert_eq!(order(rawdoc! { "ts": 1.0 }), Some(false));
        assert_eq!(order(rawdoc! { "wall": -1 }), None);
        assert_eq!(order(rawdoc! { "ts": 1, "op": 1 }), None);
    }
}
