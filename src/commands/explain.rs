//! `explain`: how a `find`, `count`, `distinct`, `aggregate`, `update`, `delete` or
//! `findAndModify` would run (`queryPlanner`), and with `executionStats` /
//! `allPlansExecution` how it ran, in mongod 7.0's classic-engine reply shape. Explaining a
//! write reports what it would match and never writes.
//!
//! The commands do the work: each takes an `Option<Verbosity>` and, when explaining, answers
//! an [`Explain`] rendered here instead of its usual reply.

use std::time::Instant;

use bson::{RawArrayBuf, RawBson, RawBsonRef, RawDocument, RawDocumentBuf, rawdoc};

use super::args::{field, wrong_type};
use crate::catalog::Collection;
use crate::cursor::ScanStats;
use crate::dispatch::Request;
use crate::error::{CommandError, CommandResult, ErrorCode};
use crate::query::plan::{Access, Hint, Plan, put};
use crate::query::shape::{ShapeInput, hex_hash, shape_key};
use crate::state::ServerState;

/// How much `explain` reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Verbosity {
    /// The chosen plan only; nothing runs.
    QueryPlanner,
    /// The plan and what running it read and returned.
    ExecutionStats,
    /// As `ExecutionStats` (Ebb considers one plan, so there are no others to run).
    AllPlansExecution,
}

impl Verbosity {
    fn parse(v: Option<RawBsonRef<'_>>) -> CommandResult<Verbosity> {
        match v {
            None => Ok(Verbosity::AllPlansExecution),
            Some(RawBsonRef::String("queryPlanner")) => Ok(Verbosity::QueryPlanner),
            Some(RawBsonRef::String("executionStats")) => Ok(Verbosity::ExecutionStats),
            Some(RawBsonRef::String("allPlansExecution")) => Ok(Verbosity::AllPlansExecution),
            Some(RawBsonRef::String(s)) => Err(CommandError::bad_value(format!(
                "Enumeration value '{s}' for field 'verbosity' is not a valid value."
            ))),
            Some(other) => Err(wrong_type("explain.verbosity", other, " 'string'")),
        }
    }

    /// Whether the plan runs (and `executionStats` is reported).
    pub(crate) fn executes(self) -> bool {
        self != Verbosity::QueryPlanner
    }
}

/// A stage above the access path (`SORT`, `LIMIT`, `PROJECTION_DEFAULT`, `COUNT`, …), with
/// its own fields.
pub(crate) struct Stage {
    name: &'static str,
    fields: RawDocumentBuf,
}

impl Stage {
    pub(crate) fn new(name: &'static str, fields: RawDocumentBuf) -> Stage {
        Stage { name, fields }
    }

    /// Shows a projection stage as made from index entries (`PROJECTION_COVERED`).
    pub(crate) fn cover(stages: &mut [Stage]) {
        if let Some(p) = stages.iter_mut().find(|s| s.name.starts_with("PROJECTION")) {
            p.name = "PROJECTION_COVERED";
        }
    }
}

/// The stages mongod puts over the access path of a find-like query, outermost first: the
/// projection; then a blocking `SORT` (with `limitAmount` = skip + limit) under a `SKIP`, or
/// a `LIMIT` over a `SKIP`. The `_id` fast path returns one document at most: it takes no
/// sort, skip or limit stage. `mem_limit` is the blocking-sort limit the `SORT` reports.
pub(crate) fn window_stages(
    projection: Option<&RawDocument>,
    blocking_sort: Option<&RawDocument>,
    mem_limit: usize,
    skip: u64,
    limit: Option<u64>,
    idhack: bool,
) -> Vec<Stage> {
    let as_long = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
    let mut stages = Vec::new();
    if let Some(p) = projection {
        stages.push(projection_stage(p));
    }
    if idhack {
        return stages;
    }
    if let Some(sort) = blocking_sort {
        if skip > 0 {
            stages.push(Stage::new("SKIP", rawdoc! { "skipAmount": as_long(skip) }));
        }
        let mut fields = rawdoc! {
            "sortPattern": sort.to_owned(),
            "memLimit": i32::try_from(mem_limit).map_or(RawBson::Int64(i64::try_from(mem_limit).unwrap_or(i64::MAX)), RawBson::Int32),
        };
        if let Some(l) = limit {
            fields.append(bson::cstr!("limitAmount"), as_long(l.saturating_add(skip)));
        }
        fields.append(bson::cstr!("type"), "simple");
        stages.push(Stage::new("SORT", fields));
    } else {
        if let Some(l) = limit {
            stages.push(Stage::new("LIMIT", rawdoc! { "limitAmount": as_long(l) }));
        }
        if skip > 0 {
            stages.push(Stage::new("SKIP", rawdoc! { "skipAmount": as_long(skip) }));
        }
    }
    stages
}

/// What a command tells `explain` about one query.
pub(crate) struct Explain {
    /// `db.collection`.
    pub ns: String,
    /// The filter as given (rendered as `parsedQuery`).
    pub filter: Option<RawDocumentBuf>,
    /// The plan (`None`: the collection does not exist, or an `_id` lookup: see `idhack`).
    pub plan: Option<Plan>,
    /// A lookup by `_id` alone (`IDHACK`).
    pub idhack: bool,
    /// Stages above the access path, outermost first.
    pub stages: Vec<Stage>,
    /// What running it read, when it ran.
    pub run: Option<Run>,
    /// `queryHash` and `planCacheKey` (mongod shows them for a query on a collection that
    /// exists, except the `_id` fast path of writes).
    pub hashes: Option<Hashes>,
    /// Whether mongod parsed the filter into a canonical query, shown as `parsedQuery` (not
    /// for writes by `_id` or on a missing collection, nor for a count on one).
    pub canonical: bool,
    /// Fields appended to `queryPlanner` after the hashes (`optimizedPipeline`).
    pub extra: Option<RawDocumentBuf>,
}

/// `queryHash` and `planCacheKey`, as mongod renders them (eight uppercase hex digits).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Hashes {
    /// The query's shape (same for queries differing only in constants).
    pub query_hash: String,
    /// The shape and the indexes the planner could use.
    pub plan_cache_key: String,
}

impl Hashes {
    /// The hashes of a query on `collection`.
    pub(crate) fn of(collection: &Collection, shape: &ShapeInput<'_>) -> Hashes {
        let key = shape_key(shape);
        let query_hash = hex_hash(&key);
        let mut cache_key = key;
        for ix in &collection.indexes {
            if ix
                .spec
                .get("hidden")
                .ok()
                .flatten()
                .is_some_and(crate::query::true_value)
            {
                continue;
            }
            cache_key.push(b'|');
            cache_key.extend_from_slice(ix.name.as_bytes());
            cache_key.push(0);
            cache_key.extend_from_slice(ix.key.as_bytes());
            if let Some(p) = &ix.partial_filter {
                cache_key.extend_from_slice(p.as_bytes());
            }
        }
        Hashes {
            query_hash,
            plan_cache_key: hex_hash(&cache_key),
        }
    }
}

/// Whether mongod answers a query with this filter by the `_id` fast path (`IDHACK`): the
/// filter is `{_id: v}` alone, `v` a value whose index bounds are exact (a number, string,
/// boolean, date, timestamp, `ObjectId`, `binData`, code, `MinKey`, `MaxKey`, or a document not
/// starting with an operator). The caller checks the rest (no `hint`, no `skip`, the
/// collection's collation).
pub(crate) fn idhack_filter(filter: Option<&RawDocument>) -> bool {
    let Some(filter) = filter else {
        return false;
    };
    let mut iter = filter.iter();
    let Some(Ok((key, value))) = iter.next() else {
        return false;
    };
    if key.as_str() != "_id" || iter.next().is_some() {
        return false;
    }
    match value {
        RawBsonRef::Document(d) => !d
            .iter()
            .next()
            .and_then(Result::ok)
            .is_some_and(|(k, _)| k.as_str().starts_with('$')),
        RawBsonRef::Int32(_)
        | RawBsonRef::Int64(_)
        | RawBsonRef::Double(_)
        | RawBsonRef::Decimal128(_)
        | RawBsonRef::String(_)
        | RawBsonRef::Boolean(_)
        | RawBsonRef::DateTime(_)
        | RawBsonRef::Timestamp(_)
        | RawBsonRef::ObjectId(_)
        | RawBsonRef::Binary(_)
        | RawBsonRef::JavaScriptCode(_)
        | RawBsonRef::JavaScriptCodeWithScope(_)
        | RawBsonRef::MinKey
        | RawBsonRef::MaxKey => true,
        _ => false,
    }
}

/// The projection stage mongod puts over a plan: `PROJECTION_SIMPLE` for an inclusion or
/// exclusion of top-level fields only, `PROJECTION_DEFAULT` otherwise.
pub(crate) fn projection_stage(projection: &RawDocument) -> Stage {
    let mut inclusion = None;
    let mut simple = true;
    for (k, v) in projection.iter().map_while(Result::ok) {
        let k = k.as_str();
        if k.contains('.') || k.starts_with('$') {
            simple = false;
            break;
        }
        let include = match v {
            RawBsonRef::Boolean(b) => b,
            RawBsonRef::Int32(_)
            | RawBsonRef::Int64(_)
            | RawBsonRef::Double(_)
            | RawBsonRef::Decimal128(_) => crate::query::true_value(v),
            _ => {
                simple = false;
                break;
            }
        };
        if k == "_id" {
            continue;
        }
        if inclusion.is_some_and(|i| i != include) {
            simple = false;
            break;
        }
        inclusion = Some(include);
    }
    let name = if simple {
        "PROJECTION_SIMPLE"
    } else {
        "PROJECTION_DEFAULT"
    };
    Stage::new(name, rawdoc! { "transformBy": projection.to_owned() })
}

/// What running a plan read and returned.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Run {
    /// Documents the command would return (or write).
    pub returned: u64,
    /// Keys and documents read.
    pub stats: ScanStats,
    /// Since the command started.
    pub millis: u64,
}

/// Runs `source` to its end off the runtime (what the executing verbosities measure): how many
/// documents it returned, and what it read.
pub(crate) async fn drain(mut source: crate::cursor::Source) -> CommandResult<(usize, ScanStats)> {
    tokio::task::spawn_blocking(crate::storage::tally::carry(move || -> CommandResult<_> {
        let n = source.drain()?.len();
        Ok((n, source.stats()))
    }))
    .await
    .map_err(|e| CommandError::internal(e.to_string()))?
}

impl Run {
    pub(crate) fn new(returned: usize, stats: ScanStats, started: Instant) -> Run {
        Run {
            returned: u64::try_from(returned).unwrap_or(u64::MAX),
            stats,
            millis: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
        }
    }
}

/// A count as mongod appends it (`appendNumber`): an int32 when it fits, else an int64.
fn long(n: u64) -> bson::RawBson {
    i32::try_from(n).map_or_else(
        |_| bson::RawBson::Int64(i64::try_from(n).unwrap_or(i64::MAX)),
        bson::RawBson::Int32,
    )
}

/// mongod's `parsedQuery`: the filter as its parsed, normalized and sorted `MatchExpression`
/// serializes.
pub(crate) fn parsed_query(filter: Option<&RawDocument>) -> RawDocumentBuf {
    crate::query::shape::normalize(filter, true)
}

/// An index scan's stage as explain shows it, up to its `direction` (the caller adds its
/// bounds and counts): `IXSCAN`, or `DISTINCT_SCAN`.
fn index_scan(ix: &crate::query::plan::IndexScan) -> RawDocumentBuf {
    let mut scan = rawdoc! {
        "stage": if ix.distinct { "DISTINCT_SCAN" } else { "IXSCAN" },
        "keyPattern": ix.key_pattern.clone(),
        "indexName": ix.name.as_str(),
        "isMultiKey": ix.multikey,
    };
    // Ebb records multikeyness per index, not per path: when multikey, every key path may
    // hold arrays.
    let mut paths = RawDocumentBuf::new();
    for (p, _) in &ix.fields {
        let mut arr = RawArrayBuf::new();
        if ix.multikey {
            arr.push(p.as_str());
        }
        put(&mut paths, p, arr);
    }
    scan.append(bson::cstr!("multiKeyPaths"), paths);
    scan.append(bson::cstr!("isUnique"), ix.unique);
    scan.append(bson::cstr!("isSparse"), ix.sparse);
    scan.append(bson::cstr!("isPartial"), ix.partial);
    scan.append(bson::cstr!("indexVersion"), 2);
    scan.append(
        bson::cstr!("direction"),
        if ix.reverse { "backward" } else { "forward" },
    );
    scan
}

impl Explain {
    /// The report on a collection that does not exist: nothing planned, nothing read.
    pub(crate) fn no_collection(
        ns: String,
        filter: Option<RawDocumentBuf>,
        stages: Vec<Stage>,
        started: Instant,
    ) -> Explain {
        Explain {
            ns,
            filter,
            plan: None,
            idhack: false,
            stages,
            run: Some(Run::new(0, ScanStats::default(), started)),
            hashes: None,
            canonical: true,
            extra: None,
        }
    }

    /// A report on a plan that ran (`run`) or was only planned.
    pub(crate) fn planned(
        ns: String,
        filter: Option<RawDocumentBuf>,
        plan: Plan,
        stages: Vec<Stage>,
        run: Option<Run>,
    ) -> Explain {
        Explain {
            ns,
            filter,
            plan: Some(plan),
            idhack: false,
            stages,
            run,
            hashes: None,
            canonical: true,
            extra: None,
        }
    }

    /// The plan tree, with per-stage counts when it ran.
    fn tree(&self, parsed: &RawDocument) -> RawDocumentBuf {
        let run = self.run;
        let with_stats = |d: &mut RawDocumentBuf, returned: u64| {
            if let Some(r) = run {
                d.append(bson::cstr!("nReturned"), long(returned));
                d.append(bson::cstr!("executionTimeMillisEstimate"), long(r.millis));
            }
        };
        let returned = run.map_or(0, |r| r.returned);
        let docs = run.map_or(0, |r| r.stats.docs_examined);
        let keys = run.map_or(0, |r| r.stats.keys_examined);
        let mut inner = match (&self.plan, self.idhack) {
            (_, true) => {
                // One point lookup: a key and its document when the `_id` is there.
                let mut d = rawdoc! { "stage": "IDHACK" };
                with_stats(&mut d, docs);
                if run.is_some() {
                    d.append(bson::cstr!("keysExamined"), long(docs));
                    d.append(bson::cstr!("docsExamined"), long(docs));
                }
                d
            }
            (Some(plan), false) => match &plan.access {
                Access::Collscan { reverse } => {
                    let mut d = rawdoc! { "stage": "COLLSCAN" };
                    if !parsed.is_empty() {
                        d.append(bson::cstr!("filter"), parsed.to_owned());
                    }
                    d.append(
                        bson::cstr!("direction"),
                        if *reverse { "backward" } else { "forward" },
                    );
                    with_stats(&mut d, returned);
                    if run.is_some() {
                        d.append(bson::cstr!("docsExamined"), long(docs));
                    }
                    d
                }
                Access::Index(ix) => {
                    let mut scan = index_scan(ix);
                    // A count read from the keys alone: mongod's `COUNT_SCAN` for one range
                    // of keys, else an `IXSCAN` with nothing above it to fetch.
                    let count_scan = ix
                        .keys_only
                        .then(|| ix.count_bounds())
                        .flatten()
                        .filter(|_| self.stages.first().is_some_and(|s| s.name == "COUNT"));
                    if let Some(bounds) = count_scan {
                        let mut renamed = rawdoc! { "stage": "COUNT_SCAN" };
                        for (k, v) in scan.iter().skip(1).map_while(Result::ok) {
                            if k != "direction" {
                                put(&mut renamed, k.as_str(), RawBson::from(v));
                            }
                        }
                        scan = renamed;
                        scan.append(bson::cstr!("indexBounds"), bounds);
                    } else {
                        scan.append(bson::cstr!("indexBounds"), ix.bounds_doc());
                    }
                    with_stats(
                        &mut scan,
                        if ix.keys_only || ix.covered {
                            returned
                        } else {
                            docs
                        },
                    );
                    if run.is_some() {
                        scan.append(bson::cstr!("keysExamined"), long(keys));
                        if ix.keys_only {
                            scan.append(bson::cstr!("docsExamined"), long(0));
                        }
                    }
                    if ix.distinct && ix.covered {
                        // `distinct` made from the entries.
                        let mut transform = RawDocumentBuf::new();
                        transform.append(bson::cstr!("_id"), 0);
                        if let Some((field, _)) = ix.fields.first() {
                            put(&mut transform, field, 1);
                        }
                        let mut projection = rawdoc! {
                            "stage": "PROJECTION_COVERED",
                            "transformBy": transform,
                        };
                        with_stats(&mut projection, returned);
                        projection.append(bson::cstr!("inputStage"), scan);
                        projection
                    } else if ix.keys_only || ix.covered {
                        scan
                    } else {
                        let mut fetch = rawdoc! { "stage": "FETCH" };
                        if !ix.exact && !parsed.is_empty() {
                            fetch.append(bson::cstr!("filter"), parsed.to_owned());
                        }
                        with_stats(&mut fetch, returned);
                        if run.is_some() {
                            fetch.append(bson::cstr!("docsExamined"), long(docs));
                        }
                        fetch.append(bson::cstr!("inputStage"), scan);
                        fetch
                    }
                }
                Access::Or(legs) => {
                    // Per-branch counts are not kept: the totals are in `executionStats`.
                    let mut inputs = RawArrayBuf::new();
                    for leg in legs {
                        let mut scan = index_scan(leg);
                        scan.append(bson::cstr!("indexBounds"), leg.bounds_doc());
                        inputs.push(scan);
                    }
                    let mut or = rawdoc! { "stage": "OR" };
                    with_stats(&mut or, docs);
                    or.append(bson::cstr!("inputStages"), inputs);
                    let mut fetch = rawdoc! { "stage": "FETCH" };
                    if !parsed.is_empty() {
                        fetch.append(bson::cstr!("filter"), parsed.to_owned());
                    }
                    with_stats(&mut fetch, returned);
                    if run.is_some() {
                        fetch.append(bson::cstr!("docsExamined"), long(docs));
                    }
                    fetch.append(bson::cstr!("inputStage"), or);
                    // A query that is one `$or` is planned branch by branch (mongod's SUBPLAN).
                    let mut top = parsed.iter().map_while(Result::ok);
                    if let (Some(("$or", _)), None) =
                        (top.next().map(|(k, v)| (k.as_str(), v)), top.next())
                    {
                        let mut sub = rawdoc! { "stage": "SUBPLAN" };
                        with_stats(&mut sub, returned);
                        sub.append(bson::cstr!("inputStage"), fetch);
                        sub
                    } else {
                        fetch
                    }
                }
            },
            (None, false) => {
                // No collection: mongod shows an EOF stage.
                let mut d = rawdoc! { "stage": "EOF" };
                with_stats(&mut d, 0);
                d
            }
        };
        for stage in self.stages.iter().rev() {
            let mut d = rawdoc! { "stage": stage.name };
            for (k, v) in stage.fields.iter().map_while(Result::ok) {
                put(&mut d, k.as_str(), RawBson::from(v));
            }
            if stage.name == "COUNT" {
                // mongod's COUNT returns no document: it counts them.
                with_stats(&mut d, 0);
                if run.is_some() {
                    d.append(bson::cstr!("nCounted"), long(returned));
                }
                d.append(bson::cstr!("inputStage"), inner);
                inner = d;
                continue;
            }
            with_stats(&mut d, returned);
            d.append(bson::cstr!("inputStage"), inner);
            inner = d;
        }
        inner
    }

    /// `queryPlanner` and (when it ran) `executionStats` of the explain reply.
    pub(crate) fn sections(
        &self,
        verbosity: Verbosity,
    ) -> (RawDocumentBuf, Option<RawDocumentBuf>) {
        let parsed = parsed_query(self.filter.as_deref());
        let tree = self.tree(&parsed);
        let planner_tree = Explain {
            ns: String::new(),
            filter: None,
            plan: self.plan.clone(),
            idhack: self.idhack,
            stages: self
                .stages
                .iter()
                .map(|s| Stage::new(s.name, s.fields.clone()))
                .collect(),
            run: None,
            hashes: None,
            canonical: self.canonical,
            extra: None,
        }
        .tree(&parsed);
        let mut planner = rawdoc! {
            "namespace": self.ns.as_str(),
            "indexFilterSet": false,
        };
        if self.canonical {
            planner.append(bson::cstr!("parsedQuery"), parsed);
        }
        if let Some(h) = &self.hashes {
            planner.append(bson::cstr!("queryHash"), h.query_hash.as_str());
            planner.append(bson::cstr!("planCacheKey"), h.plan_cache_key.as_str());
        }
        if let Some(extra) = &self.extra {
            for (k, v) in extra.iter().map_while(Result::ok) {
                put(&mut planner, k.as_str(), RawBson::from(v));
            }
        }
        planner.append(bson::cstr!("maxIndexedOrSolutionsReached"), false);
        planner.append(bson::cstr!("maxIndexedAndSolutionsReached"), false);
        planner.append(bson::cstr!("maxScansToExplodeReached"), false);
        planner.append(bson::cstr!("winningPlan"), planner_tree);
        planner.append(bson::cstr!("rejectedPlans"), RawArrayBuf::new());
        let exec = match (self.run, verbosity.executes()) {
            (Some(r), true) => {
                let mut d = rawdoc! {
                    "executionSuccess": true,
                    "nReturned": long(r.returned),
                    "executionTimeMillis": long(r.millis),
                    "totalKeysExamined": long(r.stats.keys_examined),
                    "totalDocsExamined": long(r.stats.docs_examined),
                    "executionStages": tree,
                };
                if verbosity == Verbosity::AllPlansExecution {
                    d.append(bson::cstr!("allPlansExecution"), RawArrayBuf::new());
                }
                Some(d)
            }
            _ => None,
        };
        (planner, exec)
    }
}

/// `serverInfo`, as mongod reports it.
fn server_info(state: &ServerState) -> RawDocumentBuf {
    rawdoc! {
        "host": super::admin::hostname(),
        "port": i32::from(state.local_addr.port()),
        "version": crate::MONGODB_VERSION,
        "gitVersion": format!("ebb-{}", crate::EBB_VERSION),
    }
}

/// `serverParameters`: the limits mongod's plans are bound by (of which Ebb enforces the
/// blocking-sort limit).
fn server_parameters(state: &ServerState) -> RawDocumentBuf {
    let sort_limit = i32::try_from(state.config.max_blocking_sort_bytes).unwrap_or(i32::MAX);
    rawdoc! {
        "internalQueryFacetBufferSizeBytes": 104_857_600,
        "internalQueryFacetMaxOutputDocSizeBytes": 104_857_600,
        "internalLookupStageIntermediateDocumentMaxSizeBytes": 104_857_600,
        "internalDocumentSourceGroupMaxMemoryBytes": 104_857_600,
        "internalQueryMaxBlockingSortMemoryUsageBytes": sort_limit,
        "internalQueryProhibitBlockingMergeOnMongoS": 0,
        "internalQueryMaxAddToSetBytes": 104_857_600,
        "internalDocumentSourceSetWindowFieldsMaxMemoryBytes": 104_857_600,
        "internalQueryFrameworkControl": "trySbeRestricted",
    }
}

/// The whole explain reply for one query.
pub(crate) fn reply(
    state: &ServerState,
    explain: &Explain,
    verbosity: Verbosity,
    command: &RawDocument,
) -> RawDocumentBuf {
    let (planner, exec) = explain.sections(verbosity);
    let mut out = rawdoc! { "explainVersion": "1", "queryPlanner": planner };
    if let Some(e) = exec {
        out.append(bson::cstr!("executionStats"), e);
    }
    finish(state, out, command)
}

/// Appends `command`, `serverInfo`, `serverParameters` and `ok`.
pub(crate) fn finish(
    state: &ServerState,
    mut out: RawDocumentBuf,
    command: &RawDocument,
) -> RawDocumentBuf {
    out.append(bson::cstr!("command"), command.to_owned());
    out.append(bson::cstr!("serverInfo"), server_info(state));
    out.append(bson::cstr!("serverParameters"), server_parameters(state));
    out.append(bson::cstr!("ok"), 1.0);
    out
}

/// The commands `explain` runs.
const EXPLAINABLE: &[&str] = &[
    "find",
    "count",
    "distinct",
    "aggregate",
    "update",
    "delete",
    "findAndModify",
    "findandmodify",
];

/// The `explain` command.
pub(super) async fn explain(req: &Request<'_>, state: &ServerState) -> CommandResult {
    let inner = match field(req, "explain")? {
        Some(RawBsonRef::Document(d)) => d,
        Some(other) => return Err(wrong_type("explain.explain", other, " 'object'")),
        None => return Err(CommandError::missing_field("explain.explain")),
    };
    let verbosity = Verbosity::parse(field(req, "verbosity")?)?;
    let Some(Ok((name, _))) = inner.iter().next() else {
        return Err(CommandError::new(
            ErrorCode::FailedToParse,
            "explain command requires a nested object",
        ));
    };
    // The explained command runs against the explain's database: an inner `$db` must name it.
    match inner.get("$db") {
        Ok(Some(RawBsonRef::String(db))) if db != req.db => {
            return Err(CommandError::new(
                ErrorCode::InvalidNamespace,
                format!(
                    "Mismatched $db in explain command. Expected {} but got {db}",
                    req.db
                ),
            ));
        }
        Ok(Some(RawBsonRef::String(_)) | None) => {}
        Ok(Some(other)) => return Err(wrong_type("$db", other, " 'string'")),
        Err(e) => return Err(CommandError::new(ErrorCode::InvalidBSON, e.to_string())),
    }
    let mut body = RawDocumentBuf::new();
    for (k, v) in inner.iter().map_while(Result::ok) {
        if k.as_str() != "$db" {
            put(&mut body, k.as_str(), RawBson::from(v));
        }
    }
    // The inner command's own fields are checked as if it ran alone.
    let stripped = match super::lookup(name.as_str()) {
        Some(spec) if EXPLAINABLE.contains(&name.as_str()) => {
            if super::spec::check(spec.args, spec.name, &body, &[])? {
                Some(super::spec::without_nulls(spec.args, &body)?)
            } else {
                None
            }
        }
        _ => None,
    };
    let body = stripped.unwrap_or(body);
    let sub = Request {
        name: name.as_str(),
        db: req.db,
        body: &body,
        sequences: &[],
    };
    match name.as_str() {
        "find" | "count" | "distinct" if super::views::named_view(&sub, state).is_some() => {
            super::views::run_as_aggregate(&sub, state, Some(verbosity)).await
        }
        "update" | "delete" | "findAndModify" | "findandmodify"
            if let Some(view) = super::views::named_view(&sub, state) =>
        {
            Err(super::views::not_a_collection(req.db, view))
        }
        "find" => super::read::find_explained(&sub, state, Some(verbosity)).await,
        "count" => super::read::count_explained(&sub, state, Some(verbosity)).await,
        "distinct" => super::read::distinct_explained(&sub, state, Some(verbosity)).await,
        "aggregate" => super::aggregate::aggregate_explained(&sub, state, Some(verbosity)).await,
        "update" | "delete" | "findAndModify" | "findandmodify" => {
            explain_write(&sub, state, verbosity).await
        }
        other => Err(CommandError::new(
            ErrorCode::CommandNotFound,
            format!("Explain failed due to unknown command: {other}"),
        )),
    }
}

/// The explain reply of an `update`, `delete` or `findAndModify`: the plan that finds the
/// documents it would change, run without writing.
async fn explain_write(
    req: &Request<'_>,
    state: &ServerState,
    verbosity: Verbosity,
) -> CommandResult {
    let started = Instant::now();
    let name = super::args::collection_name(req)?;
    crate::catalog::validate_namespace(req.db, name)?;
    let vars = super::args::variables(req, state.now_ms())?;
    let one_statement = |field_name: &str| -> CommandResult<RawDocumentBuf> {
        let docs: Vec<RawDocumentBuf> = match field(req, field_name)? {
            Some(RawBsonRef::Array(a)) => a
                .into_iter()
                .filter_map(|d| match d {
                    Ok(RawBsonRef::Document(d)) => Some(d.to_owned()),
                    _ => None,
                })
                .collect(),
            Some(other) => {
                return Err(wrong_type(
                    &format!("{}.{field_name}", req.name),
                    other,
                    " 'array'",
                ));
            }
            None => {
                return Err(CommandError::missing_field(&format!(
                    "{}.{field_name}",
                    req.name
                )));
            }
        };
        match <[RawDocumentBuf; 1]>::try_from(docs) {
            Ok([d]) => Ok(d),
            Err(_) => Err(CommandError::new(
                ErrorCode::InvalidLength,
                "explained write batches must be of size 1",
            )),
        }
    };
    let get_doc = |d: &RawDocument, k: &str| d.get_document(k).ok().map(ToOwned::to_owned);
    let get_hint = |v: Option<RawBsonRef<'_>>, label: &str| -> CommandResult<Option<Hint>> {
        v.map(|h| Hint::parse(h, label))
            .transpose()
            .map(Option::flatten)
    };
    // Whether the update needs the match's details (a positional `$`), which keeps mongod
    // off its `_id` fast path.
    let positional = |u: Option<RawBsonRef<'_>>| match u {
        Some(RawBsonRef::Document(d)) => d.iter().map_while(Result::ok).any(|(op, v)| {
            op.as_str().starts_with('$')
                && matches!(v, RawBsonRef::Document(f) if f
                    .iter()
                    .map_while(Result::ok)
                    .any(|(path, _)| path.as_str().split('.').any(|p| p == "$")))
        }),
        _ => false,
    };
    // (filter, sort, hint, collation, single document, stage name, positional update)
    let (query, sort, hint, collation, single, write_stage, needs_details) = match req.name {
        "update" => {
            let st = one_statement("updates")?;
            let multi = st
                .get("multi")
                .ok()
                .flatten()
                .is_some_and(crate::query::true_value);
            (
                get_doc(&st, "q"),
                None,
                get_hint(st.get("hint").ok().flatten(), "update.updates.hint")?,
                get_doc(&st, "collation"),
                !multi,
                "UPDATE",
                positional(st.get("u").ok().flatten()),
            )
        }
        "delete" => {
            let st = one_statement("deletes")?;
            let limit_one = match st.get("limit").ok().flatten() {
                Some(RawBsonRef::Int32(n)) => n == 1,
                Some(RawBsonRef::Int64(n)) => n == 1,
                Some(RawBsonRef::Double(d)) => d == 1.0,
                _ => false,
            };
            (
                get_doc(&st, "q"),
                None,
                get_hint(st.get("hint").ok().flatten(), "delete.deletes.hint")?,
                get_doc(&st, "collation"),
                limit_one,
                "DELETE",
                false,
            )
        }
        _ => {
            let remove = super::args::opt_bool(req, "remove")?.unwrap_or(false);
            (
                super::args::opt_doc(req, "query")?.map(ToOwned::to_owned),
                super::args::opt_doc(req, "sort")?.map(ToOwned::to_owned),
                get_hint(field(req, "hint")?, "findAndModify.hint")?,
                super::args::opt_doc(req, "collation")?.map(ToOwned::to_owned),
                true,
                if remove { "DELETE" } else { "UPDATE" },
                positional(field(req, "update")?),
            )
        }
    };
    let collation = collation
        .as_deref()
        .map(crate::query::Collation::parse)
        .transpose()?
        .flatten()
        .map(std::sync::Arc::new);
    let filter = query
        .as_deref()
        .map(|q| {
            crate::query::filter::Filter::compile_in(
                q,
                crate::query::filter::FilterContext::Query,
                &vars,
            )
            .map(|f| f.with_collation(collation.clone()))
        })
        .transpose()?;
    let sort_spec = sort
        .as_deref()
        .map(|s| {
            crate::query::sort::SortSpec::compile(s).map(|s| s.with_collation(collation.clone()))
        })
        .transpose()?;
    let ns = format!("{}.{name}", req.db);
    let mut stages = vec![Stage::new(write_stage, RawDocumentBuf::new())];
    let Some(collection) = state.catalog.get(req.db, name) else {
        // mongod plans nothing for a write on a missing collection: an `EOF` stage alone,
        // with no parsed query.
        let mut report = Explain::no_collection(ns, query, Vec::new(), started);
        report.canonical = false;
        return Ok(reply(state, &report, verbosity, req.body));
    };
    // A write by `_id` alone skips mongod's query parsing: `IDHACK`, no `parsedQuery` and no
    // hashes.
    let idhack =
        idhack_filter(query.as_deref()) && hint.is_none() && collation.is_none() && !needs_details;
    let hashes = (!idhack).then(|| {
        Hashes::of(
            &collection,
            &ShapeInput {
                filter: query.as_deref(),
                sort: sort.as_deref(),
                projection: None,
                collation: None,
            },
        )
    });
    let (plan, mut source) = super::read::open_planned(
        state,
        &collection,
        filter,
        sort_spec.as_ref(),
        hint.as_ref(),
    )?;
    let blocking_sort = sort.filter(|s| !s.is_empty() && !plan.sorted && !idhack);
    // A single-document write stops at its first match unless a blocking sort must see all.
    let limit = (single && blocking_sort.is_none()).then_some(1);
    source.set_window(None, 0, limit);
    if let Some(s) = blocking_sort {
        stages.push(Stage::new(
            "SORT",
            rawdoc! { "sortPattern": s, "memLimit": 104_857_600, "type": "simple" },
        ));
    }
    let run = if verbosity.executes() {
        let (n, read) = drain(source).await?;
        Some(Run::new(if single { n.min(1) } else { n }, read, started))
    } else {
        None
    };
    let mut report = Explain::planned(ns, query, plan, stages, run);
    report.idhack = idhack;
    report.canonical = !idhack;
    report.hashes = hashes;
    Ok(reply(state, &report, verbosity, req.body))
}
