//! The read commands: `find`, `getMore`, `killCursors`, `count`, `distinct`.

use std::sync::Arc;
use std::time::Instant;

use bson::{RawArrayBuf, RawBson, RawBsonRef, RawDocumentBuf, rawdoc};

use super::args::{
    bool_value, collection_name, doc_value, field, fields, i64_value, opt_doc, opt_i64,
    variables_of, wrong_type,
};
use super::explain::{self, Explain, Run, Stage, Verbosity};
use crate::catalog::{Collection, validate_namespace};
use crate::cursor::{
    Cursor, DEFAULT_FIRST_BATCH, INLINE_EXAMINE, MAX_BATCH_BYTES, ScanStats, SortedRead, Source,
    live_doc,
};
use crate::dispatch::Request;
use crate::error::{CommandError, CommandResult, ErrorCode};
use crate::query::filter::{Filter, FilterContext};
use crate::query::plan::{self, Access, Hint, Plan, Query};
use crate::query::projection::Projection;
use crate::query::shape::ShapeInput;
use crate::query::sort::SortSpec;
use crate::query::{Collation, keystring, path};
use crate::sorter::{Sorted, Sorter};
use crate::state::{Metrics, ServerState};
use crate::storage::{Keyspace, record};

/// A non-negative count option (`skip`, `limit`, `batchSize`), with MongoDB 7.0's IDL error.
fn non_negative(req: &Request<'_>, name: &str, _label: &str) -> CommandResult<Option<u64>> {
    non_negative_value(name, opt_i64(req, name)?)
}

/// [`non_negative`] of a value already read as an integer.
fn non_negative_value(name: &str, value: Option<i64>) -> CommandResult<Option<u64>> {
    match value {
        None => Ok(None),
        Some(n) if n < 0 => Err(CommandError::new(
            ErrorCode::Location(51024),
            format!("BSON field '{name}' value must be >= 0, actual value '{n}'"),
        )),
        Some(n) => Ok(Some(u64::try_from(n).unwrap_or(0))),
    }
}

/// The `_id` a filter of exactly `{_id: <value>}` asks for, when equality on that value is
/// exactly equality of its [`keystring`] (so one point read answers the filter with no further
/// matching): not an operator document, array, regex, decimal, NaN, null or undefined, whose
/// matching rules go beyond plain equality.
fn plain_id_equality(filter: &bson::RawDocument) -> Option<RawBsonRef<'_>> {
    let mut iter = filter.iter();
    let (key, value) = iter.next()?.ok()?;
    if key.as_str() != "_id" || iter.next().is_some() {
        return None;
    }
    match value {
        RawBsonRef::ObjectId(_)
        | RawBsonRef::String(_)
        | RawBsonRef::Int32(_)
        | RawBsonRef::Int64(_)
        | RawBsonRef::Boolean(_)
        | RawBsonRef::DateTime(_)
        | RawBsonRef::Binary(_)
        | RawBsonRef::Timestamp(_) => Some(value),
        RawBsonRef::Double(d) if !d.is_nan() => Some(value),
        _ => None,
    }
}

/// Appends `n` in decimal (an array index as a BSON key), without allocating.
fn push_decimal(buf: &mut Vec<u8>, n: usize) {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    let mut n = n;
    loop {
        at -= 1;
        if let Some(d) = digits.get_mut(at) {
            *d = b'0' + u8::try_from(n % 10).unwrap_or(0);
        }
        n /= 10;
        if n == 0 {
            break;
        }
    }
    buf.extend_from_slice(digits.get(at..).unwrap_or_default());
}

/// `{cursor: {<batch_name>: docs, id, ns}, ok: 1.0}`, written straight into one buffer: the
/// documents are copied once, not once per level of nesting.
fn cursor_reply<D: AsRef<bson::RawDocument>>(
    id: i64,
    ns: &str,
    batch_name: &'static str,
    docs: &[D],
) -> RawDocumentBuf {
    fn len_at(buf: &mut [u8], start: usize) {
        let len = i32::try_from(buf.len() - start).unwrap_or(i32::MAX);
        if let Some(slot) = buf.get_mut(start..start + 4) {
            slot.copy_from_slice(&len.to_le_bytes());
        }
    }
    let docs_len: usize = docs.iter().map(|d| d.as_ref().as_bytes().len() + 8).sum();
    let mut buf = Vec::with_capacity(docs_len + ns.len() + 64);
    buf.extend_from_slice(&[0; 4]);
    buf.push(0x03);
    buf.extend_from_slice(b"cursor\0");
    let cursor_start = buf.len();
    buf.extend_from_slice(&[0; 4]);
    buf.push(0x04);
    buf.extend_from_slice(batch_name.as_bytes());
    buf.push(0);
    let array_start = buf.len();
    buf.extend_from_slice(&[0; 4]);
    for (i, d) in docs.iter().enumerate() {
        buf.push(0x03);
        push_decimal(&mut buf, i);
        buf.push(0);
        buf.extend_from_slice(d.as_ref().as_bytes());
    }
    buf.push(0);
    len_at(&mut buf, array_start);
    buf.push(0x12);
    buf.extend_from_slice(b"id\0");
    buf.extend_from_slice(&id.to_le_bytes());
    buf.push(0x02);
    buf.extend_from_slice(b"ns\0");
    buf.extend_from_slice(
        &i32::try_from(ns.len() + 1)
            .unwrap_or(i32::MAX)
            .to_le_bytes(),
    );
    buf.extend_from_slice(ns.as_bytes());
    buf.push(0);
    buf.push(0);
    len_at(&mut buf, cursor_start);
    buf.push(0x01);
    buf.extend_from_slice(b"ok\0");
    buf.extend_from_slice(&1.0f64.to_le_bytes());
    buf.push(0);
    len_at(&mut buf, 0);
    RawDocumentBuf::from_bytes(buf).unwrap_or_else(|_| {
        // Unreachable: the layout above is well formed whatever the inputs.
        rawdoc! { "ok": 0.0, "errmsg": "internal error building a cursor reply" }
    })
}

/// Runs `source` for a first batch and registers a cursor if anything is left.
/// The session a command runs in: its `lsid`, if it carries a valid one.
pub(crate) fn lsid_of(req: &Request<'_>) -> Option<crate::sessions::SessionId> {
    req.body
        .get("lsid")
        .ok()
        .flatten()
        .and_then(crate::sessions::session_id)
}

/// The next batch of `source` (at most `max_docs`), started on the runtime and finished on a
/// thread that may block when it needs more reading ([`Source::start_batch`]).
async fn batch(
    mut source: Source,
    max_docs: usize,
    now: i64,
) -> CommandResult<(CommandResult<Vec<RawDocumentBuf>>, Source)> {
    match source.start_batch(max_docs, MAX_BATCH_BYTES, now, INLINE_EXAMINE) {
        Ok(Ok(docs)) => Ok((Ok(docs), source)),
        Ok(Err(partial)) => tokio::task::spawn_blocking(crate::storage::tally::carry(move || {
            let docs = source.finish_batch(partial, max_docs, MAX_BATCH_BYTES, now);
            (docs, source)
        }))
        .await
        .map_err(|e| CommandError::internal(e.to_string())),
        Err(e) => Ok((Err(e), source)),
    }
}

pub(crate) async fn first_batch(
    state: &ServerState,
    ns: String,
    source: Source,
    batch_size: Option<usize>,
    single_batch: bool,
    no_timeout: bool,
    lsid: Option<crate::sessions::SessionId>,
) -> CommandResult {
    let max_docs = batch_size.unwrap_or(DEFAULT_FIRST_BATCH);
    let now = state.now_ms();
    // A point read (one `_id`), a small buffered result or the first entries of a collection
    // scan are cheaper than the hand-off to a blocking thread (~15 µs and two thread
    // switches); what is left of a larger batch goes there, so that it never stalls the
    // runtime.
    let (docs, source) = batch(source, max_docs, now).await?;
    let docs = docs?;
    let id = if single_batch || source.is_exhausted() {
        0
    } else {
        state
            .cursors
            .insert(Cursor::new(ns.clone(), source, batch_size, no_timeout, now).in_session(lsid))
    };
    Ok(cursor_reply(id, &ns, "firstBatch", &docs))
}

pub(super) async fn find(req: &Request<'_>, state: &ServerState) -> CommandResult {
    find_explained(req, state, None).await
}

/// `find`, or with `explain` its explain reply.
pub(super) async fn find_explained(
    req: &Request<'_>,
    state: &ServerState,
    explain: Option<Verbosity>,
) -> CommandResult {
    // Options that change what find returns; refused rather than ignored.
    let name = collection_name(req)?;
    validate_namespace(req.db, name)?;
    Metrics::bump(&state.metrics.op_query);
    // One pass over the command for every option (a find by `_id` is mostly this parsing).
    let [
        filter,
        projection,
        sort,
        skip,
        limit,
        batch_size,
        single_batch,
        no_timeout,
        let_vars,
        collation,
        hint,
        allow_disk_use,
    ] = fields(
        req,
        [
            "filter",
            "projection",
            "sort",
            "skip",
            "limit",
            "batchSize",
            "singleBatch",
            "noCursorTimeout",
            "let",
            "collation",
            "hint",
            "allowDiskUse",
        ],
    )?;
    // One instant for `$$NOW` and for judging expiry.
    let now = state.now_ms();
    let vars = variables_of(doc_value(req, "let", let_vars)?, now)?;
    let collation_doc = match collation {
        Some(RawBsonRef::Document(d)) => Some(d),
        _ => None,
    };
    let collation = collation
        .map(|c| Collation::from_option("find.collation", c))
        .transpose()?
        .flatten();
    let filter_doc = doc_value(req, "filter", filter)?;
    let projection_doc = doc_value(req, "projection", projection)?;
    let sort_doc = doc_value(req, "sort", sort)?;
    // As mongod does, the options are checked (IDL) before the filter, projection and sort are.
    let skip = non_negative_value("skip", i64_value(req, "skip", skip)?)?.unwrap_or(0);
    let limit = non_negative_value("limit", i64_value(req, "limit", limit)?)?.filter(|&l| l > 0);
    let batch_size = non_negative_value("batchSize", i64_value(req, "batchSize", batch_size)?)?
        .map(|b| usize::try_from(b).unwrap_or(usize::MAX));
    let single_batch = bool_value(req, "singleBatch", single_batch)?.unwrap_or(false);
    let no_timeout = bool_value(req, "noCursorTimeout", no_timeout)?.unwrap_or(false);
    // mongod 7.0's `allowDiskUseByDefault` is true: only an explicit `false` forbids spilling.
    let allow_disk_use = bool_value(req, "allowDiskUse", allow_disk_use)?.unwrap_or(true);
    let hint = hint
        .map(|h| Hint::parse(h, "FindCommandRequest.hint"))
        .transpose()?
        .flatten();
    let ns = format!("{}.{name}", req.db);
    let started = Instant::now();
    // The commonest query of all, `{_id: <value>}` alone: one point read and a reply, with no
    // compiled filter, scan or cursor.
    // (A string `_id` under a collation also matches other strings.)
    if explain.is_none()
        && let Some(id) = filter_doc.and_then(plain_id_equality)
        && !(collation.is_some() && matches!(id, RawBsonRef::String(_)))
        && projection_doc.is_none()
        && sort_doc.is_none()
        && skip == 0
        && batch_size != Some(0)
        && hint.is_none()
    {
        let Some(collection) = state.collection(req.db, name) else {
            return Ok(cursor_reply::<RawDocumentBuf>(0, &ns, "firstBatch", &[]));
        };
        // mongod's `IDHACK`: a use of the `_id` index.
        collection.id_accesses.note();
        // The latest committed `_id` entry, then the latest committed record it names (a
        // snapshot of one key is that key's latest value; between the two reads the document
        // may go, which reads as it gone), written into the reply straight from the bytes
        // storage returned.
        // (In a transaction, or at a cluster time: the two reads of what the command reads.)
        let storage = state.catalog.store().storage();
        let view = crate::txn::current_view();
        let get = |ks: Keyspace, key: &[u8]| match &view {
            Some(view) => view.get(ks, key),
            None => storage.get(ks, key),
        };
        let entry = crate::index::id_entry_key(collection.id, &keystring::to_key(id));
        let value = match get(Keyspace::Index, &entry)?
            .as_deref()
            .and_then(crate::index::rid_of_value)
        {
            Some(rid) => get(Keyspace::Docs, &record::doc_key(collection.id, rid))?,
            None => None,
        };
        let live = match &value {
            Some(v) => live_doc(v, now)?,
            None => None,
        };
        return Ok(cursor_reply(0, &ns, "firstBatch", live.as_slice()));
    }
    let filter = filter_doc
        .map(|f| {
            Filter::compile_in(f, FilterContext::Query, &vars)
                .map(|f| f.with_collation(collation.clone()))
        })
        .transpose()?;
    let projection = projection_doc
        .map(|p| Projection::compile_in(p, &vars))
        .transpose()?;
    let sort = sort_doc
        .map(|s| SortSpec::compile(s).map(|s| s.with_collation(collation.clone())))
        .transpose()?;
    if explain.is_none()
        && let Some(oplog) = super::oplog_collection::oplog_of(state, req.db, name)
    {
        let find = super::oplog_collection::Find {
            ns,
            filter_doc,
            filter,
            projection,
            sort_doc,
            sort,
            skip,
            limit,
            batch_size,
            single_batch,
            no_timeout,
            allow_disk_use,
        };
        return super::oplog_collection::find(state, req, oplog, find).await;
    }
    let Some(collection) = state.collection(req.db, name) else {
        if let Some(verbosity) = explain {
            let report =
                Explain::no_collection(ns, filter_doc.map(ToOwned::to_owned), Vec::new(), started);
            return Ok(explain::reply(state, &report, verbosity, req.body));
        }
        return Ok(cursor_reply::<RawDocumentBuf>(0, &ns, "firstBatch", &[]));
    };
    // A projection after a blocking sort needs the filter too (positional `$`).
    let sort_filter = match (&sort, &projection) {
        (Some(_), Some(_)) => filter.clone().unwrap_or_else(Filter::match_all),
        _ => Filter::match_all(),
    };
    let snapshot = state.snapshot();
    let plan = plan::plan(
        &Query {
            filter: filter.as_ref(),
            sort: sort.as_ref(),
            hint: hint.as_ref(),
        },
        &collection.indexes,
    )?;
    if explain.is_none() {
        collection.note_plan(&plan.access);
    }
    let mut source = Source::open(collection.id, snapshot, &plan.access, filter, now);
    source.set_interrupt(&state.interrupt());
    // A batch limited only by its size (a `getMore` without `batchSize`) may read its two
    // halves at once (`cursor::split`). (A blocking sort reads in bounded batches: it does
    // not.)
    source.allow_split(state.config.split_scans);
    let blocking = if plan.sorted {
        None
    } else {
        sort.filter(|s| !s.is_empty())
    };
    // mongod's `_id` fast path (`IDHACK`): at most one document, so no sort, limit or skip
    // stage (a skip or hint keeps it off the path).
    let idhack =
        explain::idhack_filter(filter_doc) && skip == 0 && hint.is_none() && collation.is_none();
    let hashes = explain.map(|_| {
        explain::Hashes::of(
            &collection,
            &ShapeInput {
                filter: filter_doc,
                sort: sort_doc,
                projection: projection_doc,
                collation: collation_doc,
            },
        )
    });
    let explained = explain.map(|v| {
        let blocking_doc = blocking.as_ref().and(sort_doc);
        let stages = explain::window_stages(
            projection_doc,
            blocking_doc,
            state.config.max_blocking_sort_bytes,
            skip,
            limit,
            idhack,
        );
        (v, stages)
    });
    let source = match blocking {
        None => {
            source.set_window(projection, skip, limit);
            let mut plan = plan;
            let mut explained = explained;
            if let Some(cover) = covering(&collection, &plan, projection_doc)
                && source.cover(cover)
                && let Access::Index(ix) = &mut plan.access
            {
                ix.covered = true;
                if let Some((_, stages)) = &mut explained {
                    Stage::cover(stages);
                }
            }
            if let Some((verbosity, stages)) = explained {
                return explain_run(
                    state,
                    req,
                    ExplainInput {
                        ns,
                        filter: filter_doc,
                        plan,
                        stages,
                        verbosity,
                        started,
                        idhack,
                        hashes,
                    },
                    source,
                )
                .await;
            }
            source
        }
        Some(sort) => {
            // A blocking sort: every match is read and sorted (within the memory limit, or
            // spilling past it), then skipped and limited.
            let limits = state.config.sort_limits(allow_disk_use);
            let keep = limit.map(|l| usize::try_from(l.saturating_add(skip)).unwrap_or(usize::MAX));
            let count = explained.is_some();
            let (sorted, n, source) = tokio::task::spawn_blocking(crate::storage::tally::carry(
                move || -> CommandResult<(Source, usize, Source)> {
                    let mut sorter = Sorter::new(sort, keep, limits);
                    loop {
                        let batch = source.next_entries(SORT_READ_BATCH, usize::MAX)?;
                        if batch.is_empty() {
                            break;
                        }
                        for (doc, expires) in batch {
                            sorter.push(doc, expires)?;
                        }
                    }
                    let skip = usize::try_from(skip).unwrap_or(usize::MAX);
                    let mut out = match sorter.finish()? {
                        Sorted::Memory(all) => Source::Buffered(
                            all.into_iter()
                                .skip(skip)
                                .map(|(d, expires)| match &projection {
                                    Some(p) => {
                                        p.apply_with_filter(&d, &sort_filter).map(|d| (d, expires))
                                    }
                                    None => Ok((d, expires)),
                                })
                                .collect::<CommandResult<_>>()?,
                        ),
                        spilled @ Sorted::Merge(_) => Source::Sorted(Box::new(SortedRead::new(
                            spilled,
                            skip,
                            projection.map(|p| (p, sort_filter)),
                        )?)),
                    };
                    let n = match &mut out {
                        Source::Buffered(docs) => docs.len(),
                        other if count => other.drain()?.len(),
                        _ => 0,
                    };
                    Ok((out, n, source))
                },
            ))
            .await
            .map_err(|e| CommandError::internal(e.to_string()))?
            .map_err(|e| executor_error(e, "find"))?;
            if let Some((verbosity, stages)) = explained {
                let mut report = Explain::planned(
                    ns,
                    filter_doc.map(ToOwned::to_owned),
                    plan,
                    stages,
                    Some(Run::new(n, source.stats(), started)),
                );
                report.idhack = idhack;
                report.hashes = hashes;
                return Ok(explain::reply(state, &report, verbosity, req.body));
            }
            sorted
        }
    };
    first_batch(
        state,
        ns,
        source,
        batch_size,
        single_batch,
        no_timeout,
        lsid_of(req),
    )
    .await
    .map_err(|e| executor_error(e, "find"))
}

/// Documents read from the scan per step of a blocking sort.
const SORT_READ_BATCH: usize = 1024;

fn to_long(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// What [`explain_run`] reports on.
pub(crate) struct ExplainInput<'a> {
    pub ns: String,
    pub filter: Option<&'a bson::RawDocument>,
    pub plan: Plan,
    pub stages: Vec<Stage>,
    pub verbosity: Verbosity,
    pub started: Instant,
    /// Shown as mongod's `_id` fast path.
    pub idhack: bool,
    /// `queryHash` and `planCacheKey`.
    pub hashes: Option<explain::Hashes>,
}

/// Runs `source` to its end off the runtime (unless only the plan is asked for) and answers
/// the explain reply.
pub(crate) async fn explain_run(
    state: &ServerState,
    req: &Request<'_>,
    input: ExplainInput<'_>,
    source: Source,
) -> CommandResult {
    let run = if input.verbosity.executes() {
        let (n, read) = explain::drain(source).await?;
        Some(Run::new(n, read, input.started))
    } else {
        None
    };
    let mut report = Explain::planned(
        input.ns,
        input.filter.map(ToOwned::to_owned),
        input.plan,
        input.stages,
        run,
    );
    report.idhack = input.idhack;
    report.hashes = input.hashes;
    Ok(explain::reply(state, &report, input.verbosity, req.body))
}

/// Plans a read of `collection` and opens it on a fresh snapshot.
pub(crate) fn open_planned(
    state: &ServerState,
    collection: &Collection,
    filter: Option<Filter>,
    sort: Option<&SortSpec>,
    hint: Option<&Hint>,
) -> CommandResult<(Plan, Source)> {
    let snapshot = state.snapshot();
    let plan = plan::plan(
        &Query {
            filter: filter.as_ref(),
            sort,
            hint,
        },
        &collection.indexes,
    )?;
    let mut source = Source::open(
        collection.id,
        snapshot,
        &plan.access,
        filter,
        state.now_ms(),
    );
    source.set_interrupt(&state.interrupt());
    source.allow_split(state.config.split_scans);
    Ok((plan, source))
}

/// Makes an index plan read keys only, for a caller that needs no field of the documents it
/// reads (it counts them), when the keys give the same answer: the bounds decide the whole
/// filter, and no document of the collection can expire (a key does not tell whether its
/// document has; a collection without a TTL policy holds no document with an expiry, as
/// changing the policy removes those already expired). Returns whether it does.
pub(crate) fn keys_only(collection: &Collection, plan: &mut Plan, source: &mut Source) -> bool {
    let Access::Index(ix) = &mut plan.access else {
        return false;
    };
    if !ix.exact || !collection.ttl.is_empty() || !source.read_keys_only() {
        return false;
    }
    ix.keys_only = true;
    true
}

/// The index-only projection of a `find` read as `plan` says: per output field, its name and
/// the position of its key field in the index. Only when `projection` includes top-level
/// fields the index holds and nothing else (`_id` is excluded, or a key field), the index is
/// a secondary one and not multikey (an entry then holds each field's whole value), its
/// bounds decide the whole filter, and no document of the collection can expire (see
/// [`keys_only`]). The fields come in key pattern order, as mongod's covered projections
/// build them (a fetched document's come in its own order).
fn covering(
    collection: &Collection,
    plan: &Plan,
    projection: Option<&bson::RawDocument>,
) -> Option<Vec<(String, usize)>> {
    let Access::Index(ix) = &plan.access else {
        return None;
    };
    if ix.index.is_none() || ix.multikey || !ix.exact || !collection.ttl.is_empty() {
        return None;
    }
    let mut id = true;
    let mut names = Vec::new();
    for (k, v) in projection?.iter().map_while(Result::ok) {
        let k = k.as_str();
        if k.starts_with('$') || k.contains('.') {
            return None;
        }
        let include = match v {
            RawBsonRef::Boolean(b) => b,
            RawBsonRef::Int32(_)
            | RawBsonRef::Int64(_)
            | RawBsonRef::Double(_)
            | RawBsonRef::Decimal128(_) => crate::query::true_value(v),
            _ => return None,
        };
        if k == "_id" {
            id = include;
        } else if include {
            names.push(k);
        } else {
            return None;
        }
    }
    if names.is_empty() {
        return None;
    }
    if id {
        names.push("_id");
    }
    let mut cover = names
        .into_iter()
        .map(|name| {
            let at = ix.fields.iter().position(|(p, _)| p == name)?;
            Some((name.to_owned(), at))
        })
        .collect::<Option<Vec<_>>>()?;
    cover.sort_by_key(|(_, at)| *at);
    Some(cover)
}

/// The `hint` option of a command (`field` names it in type errors).
pub(crate) fn hint_option(req: &Request<'_>, name: &str) -> CommandResult<Option<Hint>> {
    field(req, "hint")?
        .map(|h| Hint::parse(h, name))
        .transpose()
        .map(Option::flatten)
}

/// The command's `collation` option (`None` if absent or simple).
pub(crate) fn collation_option(req: &Request<'_>) -> CommandResult<Option<Arc<Collation>>> {
    Ok(field(req, "collation")?
        .map(|c| Collation::from_option(&format!("{}.collation", req.name), c))
        .transpose()?
        .flatten())
}

/// mongod's prefix for errors raised while a query runs (not while it is parsed).
fn executor_error(e: CommandError, command: &str) -> CommandError {
    if e.code == ErrorCode::InternalError {
        return e;
    }
    CommandError::new(
        e.code,
        format!(
            "Executor error during {command} command :: caused by :: {}",
            e.errmsg
        ),
    )
}

pub(super) async fn get_more(req: &Request<'_>, state: &ServerState) -> CommandResult {
    let id = match field(req, "getMore")? {
        Some(RawBsonRef::Int64(id)) => id,
        Some(other) => return Err(wrong_type("getMore.getMore", other, " 'long'")),
        None => return Err(CommandError::bad_value("getMore requires a cursor id")),
    };
    let collection = match field(req, "collection")? {
        Some(RawBsonRef::String(c)) => c,
        Some(other) => return Err(wrong_type("getMore.collection", other, " 'string'")),
        None => {
            return Err(CommandError::missing_field("getMore.collection"));
        }
    };
    let batch_size = non_negative(req, "batchSize", "BatchSize")?
        .map(|b| usize::try_from(b).unwrap_or(usize::MAX));
    Metrics::bump(&state.metrics.op_getmore);
    let ns = format!("{}.{collection}", req.db);
    let catalog = std::sync::Arc::clone(&state.catalog);
    let mut cursor =
        state
            .cursors
            .take_bounded(id, &ns, state.now_ms(), lsid_of(req).as_ref(), &|| {
                crate::txn::current_view().unwrap_or_else(|| catalog.snapshot())
            })?;
    // An error once the cursor is checked out kills it, as in mongod.
    if let Some(mut e) = state.failpoints.on_get_more_checkout() {
        // (The cursor is out of the table: the label mongod adds to a change stream's
        // resumable errors is added here.)
        if cursor.stream.is_some()
            && crate::labels::is_resumable_change_stream_error("getMore", e.code.code())
        {
            e.info = Some(crate::error::ErrorInfo(
                rawdoc! { "errorLabels": ["ResumableChangeStreamError"] },
            ));
        }
        drop(cursor);
        return Err(e);
    }
    if cursor.stream.is_some() {
        return super::change_stream::get_more(req, state, id, ns, cursor, batch_size).await;
    }
    // Each getMore stops at its own interruption, not at the one of the command that opened
    // the cursor.
    cursor.source.set_interrupt(&state.interrupt());
    let max_docs = batch_size
        .filter(|&b| b > 0)
        .or(cursor.batch_size.filter(|&b| b > 0))
        .unwrap_or(usize::MAX);
    let now = state.now_ms();
    let started = cursor
        .source
        .start_batch(max_docs, MAX_BATCH_BYTES, now, INLINE_EXAMINE);
    let (docs, cursor) = match started {
        Ok(Ok(docs)) => (Ok(docs), cursor),
        Ok(Err(partial)) => tokio::task::spawn_blocking(crate::storage::tally::carry(move || {
            let docs = cursor
                .source
                .finish_batch(partial, max_docs, MAX_BATCH_BYTES, now);
            (docs, cursor)
        }))
        .await
        .map_err(|e| CommandError::internal(e.to_string()))?,
        Err(e) => (Err(e), cursor),
    };
    let docs = docs?;
    let id = if cursor.source.is_exhausted() {
        0
    } else {
        state.cursors.put_back(id, cursor, state.now_ms());
        id
    };
    Ok(cursor_reply(id, &ns, "nextBatch", &docs))
}

pub(super) fn kill_cursors(req: &Request<'_>, state: &ServerState) -> CommandResult {
    let name = collection_name(req)?;
    let _ = name;
    let cursors = match field(req, "cursors")? {
        Some(RawBsonRef::Array(a)) => a,
        Some(other) => return Err(wrong_type("killCursors.cursors", other, " 'array'")),
        None => {
            return Err(CommandError::missing_field("killCursors.cursors"));
        }
    };
    let (mut killed, mut not_found) = (RawArrayBuf::new(), RawArrayBuf::new());
    for id in cursors {
        match id.map_err(|e| CommandError::new(ErrorCode::InvalidBSON, e.to_string()))? {
            RawBsonRef::Int64(id) => {
                if state.cursors.kill(id) {
                    killed.push(id);
                } else {
                    not_found.push(id);
                }
            }
            other => return Err(wrong_type("killCursors.cursors.0", other, " 'long'")),
        }
    }
    Ok(rawdoc! {
        "cursorsKilled": killed,
        "cursorsNotFound": not_found,
        "cursorsAlive": RawArrayBuf::new(),
        "cursorsUnknown": RawArrayBuf::new(),
        "ok": 1.0,
    })
}

/// Reads every live document of `collection` that matches `filter`, as the planner chooses
/// (in natural order unless an index gives `sort`'s), off the runtime. Also returns the plan
/// and what it read.
pub(crate) async fn collect_planned(
    state: &ServerState,
    collection: &Collection,
    filter: Option<Filter>,
    sort: Option<&SortSpec>,
    hint: Option<&Hint>,
) -> CommandResult<(Plan, Vec<(RawDocumentBuf, i64)>, ScanStats)> {
    let (plan, mut source) = open_planned(state, collection, filter, sort, hint)?;
    collection.note_plan(&plan.access);
    let (docs, read) =
        tokio::task::spawn_blocking(crate::storage::tally::carry(move || -> CommandResult<_> {
            let docs = source.drain()?;
            Ok((docs, source.stats()))
        }))
        .await
        .map_err(|e| CommandError::internal(e.to_string()))??;
    Ok((plan, docs, read))
}

pub(super) async fn count(req: &Request<'_>, state: &ServerState) -> CommandResult {
    count_explained(req, state, None).await
}

/// `count`, or with `explain` its explain reply.
pub(super) async fn count_explained(
    req: &Request<'_>,
    state: &ServerState,
    explain: Option<Verbosity>,
) -> CommandResult {
    let started = Instant::now();
    let name = collection_name(req)?;
    validate_namespace(req.db, name)?;
    if explain.is_none() {
        Metrics::bump(&state.metrics.op_command);
    }
    let collation = collation_option(req)?;
    let simple = collation.is_none();
    let query = opt_doc(req, "query")?;
    let filter = query
        .map(|q| Filter::compile(q).map(|f| f.with_collation(collation)))
        .transpose()?;
    let skip = non_negative(req, "skip", "Skip")?.unwrap_or(0);
    // count's limit may be negative (meaning the same as positive).
    let limit = opt_i64(req, "limit")?
        .map(i64::unsigned_abs)
        .filter(|&l| l > 0);
    let hint = hint_option(req, "CountCommandRequest.hint")?;
    let ns = format!("{}.{name}", req.db);
    let count_stage = || {
        let mut fields = RawDocumentBuf::new();
        if let Some(l) = limit {
            fields.append(bson::cstr!("limitAmount"), to_long(l));
        }
        if skip > 0 {
            fields.append(bson::cstr!("skipAmount"), to_long(skip));
        }
        vec![Stage::new("COUNT", fields)]
    };
    if explain.is_none()
        && let Some(oplog) = super::oplog_collection::oplog_of(state, req.db, name)
    {
        return super::oplog_collection::count(state, oplog, query, filter, skip, limit).await;
    }
    let Some(collection) = state.collection(req.db, name) else {
        if let Some(verbosity) = explain {
            // mongod: COUNT over EOF, planned without parsing the query.
            let mut report =
                Explain::no_collection(ns, query.map(ToOwned::to_owned), count_stage(), started);
            report.canonical = false;
            return Ok(explain::reply(state, &report, verbosity, req.body));
        }
        return Ok(rawdoc! { "n": 0, "ok": 1.0 });
    };
    let idhack = explain::idhack_filter(query) && skip == 0 && hint.is_none() && simple;
    let (mut plan, mut source) = open_planned(state, &collection, filter, None, hint.as_ref())?;
    source.set_window(None, skip, limit);
    keys_only(&collection, &mut plan, &mut source);
    // mongod counts a whole collection from its record store (`RECORD_STORE_FAST_COUNT`):
    // no collection scan.
    let fast_count = query.is_none_or(bson::RawDocument::is_empty)
        && matches!(plan.access, Access::Collscan { .. });
    if explain.is_none() && !fast_count {
        collection.note_plan(&plan.access);
    }
    if let Some(verbosity) = explain {
        let hashes = explain::Hashes::of(
            &collection,
            &ShapeInput {
                filter: query,
                sort: None,
                projection: None,
                collation: opt_doc(req, "collation")?,
            },
        );
        let input = ExplainInput {
            ns,
            filter: query,
            plan,
            stages: count_stage(),
            verbosity,
            started,
            idhack,
            hashes: Some(hashes),
        };
        return explain_run(state, req, input, source).await;
    }
    let n = tokio::task::spawn_blocking(crate::storage::tally::carry(
        move || -> CommandResult<usize> { source.count_rest() },
    ))
    .await
    .map_err(|e| CommandError::internal(e.to_string()))??;
    Ok(rawdoc! { "n": i32::try_from(n).unwrap_or(i32::MAX), "ok": 1.0 })
}

pub(super) async fn distinct(req: &Request<'_>, state: &ServerState) -> CommandResult {
    distinct_explained(req, state, None).await
}

/// `distinct`, or with `explain` its explain reply.
pub(super) async fn distinct_explained(
    req: &Request<'_>,
    state: &ServerState,
    explain: Option<Verbosity>,
) -> CommandResult {
    let started = Instant::now();
    let name = collection_name(req)?;
    validate_namespace(req.db, name)?;
    let key = match field(req, "key")? {
        Some(RawBsonRef::String(k)) => k.to_owned(),
        Some(other) => return Err(wrong_type("distinct.key", other, " 'string'")),
        None => {
            return Err(CommandError::missing_field("distinct.key"));
        }
    };
    let collation = collation_option(req)?;
    let query = opt_doc(req, "query")?;
    let filter = query
        .map(|q| Filter::compile(q).map(|f| f.with_collation(collation.clone())))
        .transpose()?;
    let hint = hint_option(req, "DistinctCommandRequest.hint")?;
    let ns = format!("{}.{name}", req.db);
    let Some(collection) = state.collection(req.db, name) else {
        if let Some(verbosity) = explain {
            let report =
                Explain::no_collection(ns, query.map(ToOwned::to_owned), Vec::new(), started);
            return Ok(explain::reply(state, &report, verbosity, req.body));
        }
        return Ok(rawdoc! { "values": RawArrayBuf::new(), "ok": 1.0 });
    };
    let parts: Vec<&str> = key.split('.').collect();
    // An index on the key serves: one document per value (`DISTINCT_SCAN`).
    let snapshot = state.snapshot();
    let distinct_scan = plan::plan_distinct(
        &Query {
            filter: filter.as_ref(),
            sort: None,
            hint: hint.as_ref(),
        },
        &collection.indexes,
        &key,
    );
    let mut read = None;
    let mut values: Vec<RawBson> = if let Some(mut ix) = distinct_scan {
        ix.covered = ix.exact && collection.ttl.is_empty();
        let interrupt = state.interrupt();
        let now_ms = state.now_ms();
        let collection_id = collection.id;
        let owned: Vec<String> = parts.iter().map(|p| (*p).to_owned()).collect();
        let plan = Plan {
            access: Access::Index(ix.clone()),
            sorted: true,
        };
        if explain.is_none() {
            collection.note_plan(&plan.access);
        }
        let run = explain.is_none_or(Verbosity::executes);
        let filter = filter.clone();
        let (values, scanned) = if run {
            tokio::task::spawn_blocking(crate::storage::tally::carry(move || {
                let parts: Vec<&str> = owned.iter().map(String::as_str).collect();
                crate::cursor::distinct_values(
                    &*snapshot,
                    collection_id,
                    &ix,
                    filter.as_ref(),
                    &parts,
                    now_ms,
                    Some(&interrupt),
                )
            }))
            .await
            .map_err(|e| CommandError::internal(e.to_string()))??
        } else {
            (Vec::new(), ScanStats::default())
        };
        read = Some((plan, scanned, run));
        values
    } else {
        Vec::new()
    };
    if let Some(verbosity) = explain {
        let hashes = explain::Hashes::of(
            &collection,
            &ShapeInput {
                filter: query,
                sort: None,
                projection: None,
                collation: opt_doc(req, "collation")?,
            },
        );
        if let Some((plan, stats, ran)) = read {
            let run = ran.then(|| Run::new(values.len(), stats, started));
            let mut report =
                Explain::planned(ns, query.map(ToOwned::to_owned), plan, Vec::new(), run);
            report.hashes = Some(hashes);
            return Ok(explain::reply(state, &report, verbosity, req.body));
        }
        let (plan, source) = open_planned(state, &collection, filter, None, hint.as_ref())?;
        let input = ExplainInput {
            ns,
            filter: query,
            plan,
            stages: Vec::new(),
            verbosity,
            started,
            idhack: false,
            hashes: Some(hashes),
        };
        return explain_run(state, req, input, source).await;
    }
    if read.is_none() {
        let (_, docs, _) = collect_planned(state, &collection, filter, None, hint.as_ref()).await?;
        for (doc, _) in &docs {
            for v in path::values(doc, &parts, path::LeafArrays::ExpandOmitArray)
                .into_iter()
                .flatten()
            {
                values.push(RawBson::from(v));
            }
        }
    }
    // Values equal under the collation count once (the first met, as the sort is stable).
    let ord = |a: &RawBson, b: &RawBson| {
        crate::query::compare::compare_collated(
            a.as_raw_bson_ref(),
            b.as_raw_bson_ref(),
            collation.as_deref(),
        )
    };
    values.sort_by(|a, b| ord(a, b));
    values.dedup_by(|a, b| ord(a, b).is_eq());
    let mut out = RawArrayBuf::new();
    for v in values {
        out.push(v);
    }
    Ok(rawdoc! { "values": out, "ok": 1.0 })
}

#[cfg(test)]
mod tests {
    use bson::{RawBsonRef, RawDocumentBuf, rawdoc};

    use super::cursor_reply;

    #[test]
    fn cursor_reply_is_the_document_rawdoc_would_build() {
        for n in [0usize, 1, 2, 11, 101] {
            let docs: Vec<RawDocumentBuf> = (0..n)
                .map(|i| rawdoc! { "_id": i64::try_from(i).unwrap_or(0), "s": "x".repeat(i) })
                .collect();
            let mut batch = bson::RawArrayBuf::new();
            for d in &docs {
                batch.push(d.clone());
            }
            for (name, id) in [
                ("firstBatch", 0i64),
                ("nextBatch", -7_i64),
                ("firstBatch", i64::MAX),
            ] {
                let expected = if name == "firstBatch" {
                    rawdoc! {
                        "cursor": { "firstBatch": batch.clone(), "id": id, "ns": "db.c.d" },
                        "ok": 1.0,
                    }
                } else {
                    rawdoc! {
                        "cursor": { "nextBatch": batch.clone(), "id": id, "ns": "db.c.d" },
                        "ok": 1.0,
                    }
                };
                let got = cursor_reply(id, "db.c.d", name, &docs);
                assert_eq!(got.as_bytes(), expected.as_bytes(), "{n} docs, {name}");
                // And it reads back through the ordinary accessors.
                let cursor = got.get_document("cursor").expect("cursor");
                assert_eq!(cursor.get("id").expect("id"), Some(RawBsonRef::Int64(id)));
            }
        }
    }
}
