//! Views at the command layer: `create` and `collMod` of a view, what `listCollections` shows
//! of one, the refusals of commands that need a collection, and `find`, `count` and
//! `distinct` on a view, which run as an aggregation over it (as mongod's `find_cmd.cpp`,
//! `count_cmd.cpp` and `distinct.cpp` do). An `aggregate` on a view runs the view's resolved
//! pipeline followed by its own over the view's collection ([`resolve_aggregate`]).

use bson::raw::cstr;
use bson::{RawArrayBuf, RawBson, RawBsonRef, RawDocument, RawDocumentBuf, rawdoc};

use super::args::{
    WriteConcern, bool_value, collection_name, doc_value, field, fields, i64_value, opt_bool,
    wrong_type,
};
use super::explain::Verbosity;
use crate::catalog::{View, validate_writable};
use crate::dispatch::Request;
use crate::error::{CommandError, CommandResult, ErrorCode};
use crate::query::path;
use crate::state::ServerState;

/// What a command does when the namespace it names is a view (the `on_view` column of
/// [`super::COMMANDS`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnView {
    /// The handler deals with views itself (or names no collection).
    Own,
    /// Refused: `CommandNotSupportedOnView`.
    Refuse,
    /// Each statement of the batch (in the named array field) fails with
    /// `CommandNotSupportedOnView`, in `writeErrors`; only the first when ordered.
    RefuseStatements(&'static str),
    /// Runs as an aggregation over the view (`find`, `count`, `distinct`).
    Aggregate,
}

/// The view named by the command's first field in the request's database, if it names one.
pub(super) fn named_view<'a>(req: &Request<'a>, state: &ServerState) -> Option<&'a str> {
    let Ok(Some(RawBsonRef::String(name))) = req.body.get(req.name) else {
        return None;
    };
    state.catalog.is_view(req.db, name).then_some(name)
}

pub(super) use crate::catalog::not_a_collection;

/// The reply of a write to a view: every statement (the first alone when ordered) fails with
/// `CommandNotSupportedOnView`. `None` for an empty batch, which the handler refuses itself.
pub(super) fn refused_statements(
    req: &Request<'_>,
    array: &str,
    name: &str,
) -> CommandResult<Option<RawDocumentBuf>> {
    let mut statements = match req.body.get(array) {
        Ok(Some(RawBsonRef::Array(a))) => a.into_iter().count(),
        _ => 0,
    };
    statements += req
        .sequences
        .iter()
        .filter(|s| s.identifier == array)
        .map(|s| s.documents.len())
        .sum::<usize>();
    if statements == 0 {
        return Ok(None);
    }
    let ordered = opt_bool(req, "ordered")?.unwrap_or(true);
    let refused = not_a_collection(req.db, name);
    Ok(Some(crate::commands::every_statement_refused(
        &refused,
        statements,
        ordered,
        array == "updates",
    )))
}

/// An aggregate on a view, rewritten to run over the view's collection.
#[derive(Debug)]
pub(super) struct ViewAggregate {
    /// The request with the view's collection in `aggregate` and the view's resolved stages
    /// before its own in `pipeline`.
    pub body: RawDocumentBuf,
    /// The view's namespace, which the reply (and its cursor) carry.
    pub ns: String,
}

/// `Some` when the `aggregate` names a view: the request rewritten over its collection.
pub(super) fn resolve_aggregate(
    req: &Request<'_>,
    state: &ServerState,
) -> CommandResult<Option<ViewAggregate>> {
    let Ok(Some(RawBsonRef::String(name))) = req.body.get("aggregate") else {
        return Ok(None);
    };
    let Some(resolved) = state.catalog.resolve_view(req.db, name)? else {
        return Ok(None);
    };
    // An operation on a view runs under the view's collation; mongod refuses any other.
    let asked = match req.body.get("collation") {
        Ok(Some(c)) => crate::query::Collation::from_option("aggregate.collation", c)?
            .map(|c| c.spec().to_owned()),
        _ => resolved.collation.clone(),
    };
    if asked != resolved.collation {
        return Err(CommandError::new(
            ErrorCode::OptionNotSupportedOnView,
            "Cannot override a view's default collation",
        ));
    }
    let mut body = RawDocumentBuf::new();
    for elem in req.body {
        let (key, value) =
            elem.map_err(|e| CommandError::new(ErrorCode::InvalidBSON, e.to_string()))?;
        match (key.as_str(), value) {
            ("aggregate", _) => body.append(key, resolved.collection.as_str()),
            ("pipeline", RawBsonRef::Array(own)) => {
                let mut stages = RawArrayBuf::new();
                for stage in &resolved.pipeline {
                    stages.push(stage.clone());
                }
                for stage in own {
                    stages.push(RawBson::from(stage.map_err(|e| {
                        CommandError::new(ErrorCode::InvalidBSON, e.to_string())
                    })?));
                }
                body.append(key, stages);
            }
            ("collation", _) => {}
            _ => body.append(key, value),
        }
    }
    if let Some(c) = resolved.collation {
        body.append(cstr!("collation"), c);
    }
    Ok(Some(ViewAggregate {
        body,
        ns: format!("{}.{name}", req.db),
    }))
}

/// A view's `pipeline` as given to `create` or `collMod` (`command`): an array of documents.
fn stages_of(command: &str, value: RawBsonRef<'_>) -> CommandResult<Vec<RawDocumentBuf>> {
    let RawBsonRef::Array(a) = value else {
        return Err(wrong_type(
            &format!("{command}.pipeline"),
            value,
            " 'array'",
        ));
    };
    let mut stages = Vec::new();
    for (i, stage) in a.into_iter().enumerate() {
        match stage.map_err(|e| CommandError::new(ErrorCode::InvalidBSON, e.to_string()))? {
            RawBsonRef::Document(d) => stages.push(d.to_owned()),
            other => {
                return Err(wrong_type(
                    &format!("{command}.pipeline.{i}"),
                    other,
                    " 'object'",
                ));
            }
        }
    }
    Ok(stages)
}

/// A `viewOn` as given: a non-empty string.
fn view_on_of(command: &str, value: RawBsonRef<'_>) -> CommandResult<String> {
    match value {
        RawBsonRef::String("") => Err(CommandError::bad_value("'viewOn' cannot be empty")),
        RawBsonRef::String(s) => Ok(s.to_owned()),
        other => Err(wrong_type(&format!("{command}.viewOn"), other, " 'string'")),
    }
}

/// Checks a view's definition as mongod's `createView` and `validatePipeline` do: `viewOn` is
/// a valid collection name, the pipeline parses as an aggregate's over it, and writes nowhere.
fn check_definition(state: &ServerState, view: &View) -> CommandResult<()> {
    // mongod's `NamespaceString::validCollectionName`.
    if view.view_on.contains(['$', '\0']) {
        return Err(CommandError::new(
            ErrorCode::InvalidNamespace,
            format!("invalid name for 'viewOn': {}", view.view_on),
        ));
    }
    let body = rawdoc! {
        "aggregate": view.view_on.as_str(),
        "pipeline": view.pipeline_array(),
        "cursor": {},
    };
    let req = Request {
        name: "aggregate",
        db: &view.db,
        body: &body,
        sequences: &[],
    };
    if super::aggregate::parse_view_pipeline(&req, state)? {
        let ns = format!("{}.{}", view.db, view.name);
        let (location, writer) = view
            .pipeline
            .iter()
            .enumerate()
            .find_map(|(i, s)| {
                let name = s.iter().next()?.ok()?.0.as_str().to_owned();
                matches!(name.as_str(), "$out" | "$merge").then_some((i, name))
            })
            .unwrap_or((view.pipeline.len().saturating_sub(1), "$out".to_owned()));
        return Err(CommandError::new(
            ErrorCode::OptionNotSupportedOnView,
            format!(
                "Invalid pipeline for view {ns} :: caused by :: The aggregation stage {writer} in \
                 location {location} of the pipeline cannot be used in the view definition of \
                 {ns} because it writes to disk"
            ),
        ));
    }
    Ok(())
}

/// `create` with `viewOn`: creates a view.
pub(super) async fn create(req: &Request<'_>, state: &ServerState) -> CommandResult {
    let name = collection_name(req)?;
    validate_writable(req.db, name)?;
    let view_on = match field(req, "viewOn")? {
        Some(v) => view_on_of("create", v)?,
        None => return Err(CommandError::missing_field("create.viewOn")),
    };
    let pipeline = match field(req, "pipeline")? {
        Some(v) => stages_of("create", v)?,
        None => Vec::new(),
    };
    if let Some(id_index) = field(req, "idIndex")? {
        return Err(CommandError::new(
            ErrorCode::InvalidOptions,
            format!(
                "'idIndex' is not allowed with 'viewOn': {}",
                crate::query::display::value(id_index)
            ),
        ));
    }
    let collation = match field(req, "collation")? {
        Some(c) => crate::query::Collation::from_option("create.collation", c)?
            .map(|c| c.spec().to_owned()),
        None => None,
    };
    let concern = WriteConcern::parse(req)?;
    let view = View {
        db: req.db.to_owned(),
        name: name.to_owned(),
        view_on,
        pipeline,
        collation,
    };
    let ns = format!("{}.{name}", req.db);
    if let Some(existing) = state.catalog.view(req.db, name) {
        // As for a collection, creating it again with the same definition succeeds.
        if existing.view_on != view.view_on {
            return Err(CommandError::new(
                ErrorCode::NamespaceExists,
                format!(
                    "namespace {ns} already exists, but is a view on {}.{} rather than {}.{}",
                    req.db, existing.view_on, req.db, view.view_on
                ),
            ));
        }
        if existing.pipeline != view.pipeline {
            let mut old = RawDocumentBuf::new();
            for (i, stage) in existing.pipeline.iter().enumerate() {
                old.append(
                    bson::raw::CString::try_from(i.to_string())
                        .map_err(|e| CommandError::internal(e.to_string()))?,
                    stage.clone(),
                );
            }
            return Err(CommandError::new(
                ErrorCode::NamespaceExists,
                format!(
                    "namespace {ns} already exists, but with pipeline {} rather than {}",
                    crate::query::display::value(RawBsonRef::Document(&old)),
                    crate::query::display::value(RawBsonRef::Array(&view.pipeline_array())),
                ),
            ));
        }
        if existing.collation != view.collation {
            let shown = |c: &Option<RawDocumentBuf>| {
                c.as_ref().map_or_else(
                    || "{}".to_owned(),
                    |c| crate::query::display::value(RawBsonRef::Document(c)),
                )
            };
            return Err(CommandError::new(
                ErrorCode::NamespaceExists,
                format!(
                    "namespace {ns} already exists, but with collation: {} rather than {}",
                    shown(&existing.collation),
                    field(req, "collation")?
                        .map_or_else(|| "{}".to_owned(), crate::query::display::value),
                ),
            ));
        }
        return Ok(rawdoc! { "ok": 1.0 });
    }
    if state.catalog.get(req.db, name).is_some() {
        return Err(CommandError::new(
            ErrorCode::NamespaceExists,
            format!("Collection {ns} already exists."),
        ));
    }
    check_definition(state, &view)?;
    let ticket = state.catalog.create_view(view)?;
    concern.wait(state, Some(ticket)).await?;
    Ok(rawdoc! { "ok": 1.0 })
}

/// `collMod` options a view refuses, in the order mongod's `parseCollModRequest` checks them.
const NOT_ON_A_VIEW: &[&str] = &[
    "index",
    "validator",
    "validationLevel",
    "validationAction",
    "recordPreImages",
    "changeStreamPreAndPostImages",
    "expireAfterSeconds",
    "timeseries",
    "cappedSize",
    "cappedMax",
];

/// `collMod` of a collection that names `pipeline` or `viewOn`: mongod's refusal.
pub(super) fn only_on_a_view(req: &Request<'_>) -> CommandError {
    let option = if matches!(req.body.get("pipeline"), Ok(Some(_))) {
        "pipeline"
    } else {
        "viewOn"
    };
    CommandError::new(
        ErrorCode::InvalidOptions,
        format!("option only supported on a view: {option}"),
    )
}

/// `collMod` of a view: a new `viewOn`, a new `pipeline`, or both.
pub(super) async fn coll_mod(req: &Request<'_>, state: &ServerState, name: &str) -> CommandResult {
    for option in NOT_ON_A_VIEW {
        if matches!(req.body.get(option), Ok(Some(_))) {
            return Err(CommandError::new(
                ErrorCode::InvalidOptions,
                format!("option not supported on a view: {option}"),
            ));
        }
    }
    let pipeline = field(req, "pipeline")?
        .map(|v| stages_of("collMod", v))
        .transpose()?;
    let view_on = field(req, "viewOn")?
        .map(|v| view_on_of("collMod", v))
        .transpose()?;
    let concern = WriteConcern::parse(req)?;
    let Some(old) = state.catalog.view(req.db, name) else {
        return Err(CommandError::new(
            ErrorCode::NamespaceNotFound,
            "ns does not exist",
        ));
    };
    let mut new = (*old).clone();
    if let Some(v) = &view_on {
        new.view_on.clone_from(v);
    }
    if let Some(p) = &pipeline {
        new.pipeline.clone_from(p);
    }
    check_definition(state, &new)?;
    let ticket = state.catalog.modify_view(req.db, name, view_on, pipeline)?;
    concern.wait(state, Some(ticket)).await?;
    Ok(rawdoc! { "ok": 1.0 })
}

/// A view's `listCollections` entry.
pub(super) fn list_entry(view: &View, name_only: bool) -> RawDocumentBuf {
    if name_only {
        return rawdoc! { "name": view.name.as_str(), "type": "view" };
    }
    rawdoc! {
        "name": view.name.as_str(),
        "type": "view",
        "options": view.options(),
        "info": { "readOnly": true },
    }
}

/// `find`, `count` or `distinct` on the view `name`, as the aggregation mongod turns it into.
pub(super) async fn run_as_aggregate(
    req: &Request<'_>,
    state: &ServerState,
    explain: Option<Verbosity>,
) -> CommandResult {
    match req.name {
        "find" => find(req, state, explain).await,
        "count" => count(req, state, explain).await,
        _ => distinct(req, state, explain).await,
    }
}

/// Runs `{aggregate: <view>, pipeline, cursor, …}` (the `extra` fields copied from the request
/// when given).
async fn aggregate(
    req: &Request<'_>,
    state: &ServerState,
    pipeline: RawArrayBuf,
    cursor: RawDocumentBuf,
    extra: &[&str],
    explain: Option<Verbosity>,
) -> CommandResult {
    let name = collection_name(req)?;
    let mut body = rawdoc! { "aggregate": name, "pipeline": pipeline, "cursor": cursor };
    // The session goes with it: the cursor is the client's, opened in its session.
    for key in extra.iter().chain(&["lsid"]) {
        if let Some(v) = field(req, key)? {
            body.append(
                bson::raw::CString::try_from(*key)
                    .map_err(|e| CommandError::internal(e.to_string()))?,
                v,
            );
        }
    }
    let agg = Request {
        name: "aggregate",
        db: req.db,
        body: &body,
        sequences: &[],
    };
    super::aggregate::aggregate_explained(&agg, state, explain).await
}

/// mongod's refusal of a find option an aggregation lacks.
fn not_in_aggregation(option: &str) -> CommandError {
    CommandError::new(
        ErrorCode::InvalidPipelineOperator,
        format!("Option {option} not supported in aggregation."),
    )
}

/// A `skip` or `limit` of `find`/`count`, checked as their handlers check it.
fn count_option(req: &Request<'_>, name: &str, v: Option<RawBsonRef<'_>>) -> CommandResult<i64> {
    let n = i64_value(req, name, v)?.unwrap_or(0);
    if n < 0 && req.name == "find" {
        return Err(CommandError::new(
            ErrorCode::Location(51024),
            format!("BSON field '{name}' value must be >= 0, actual value '{n}'"),
        ));
    }
    Ok(n)
}

async fn find(req: &Request<'_>, state: &ServerState, explain: Option<Verbosity>) -> CommandResult {
    let [
        filter,
        projection,
        sort,
        skip,
        limit,
        batch_size,
        single_batch,
        no_timeout,
        partial,
        read_once,
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
            "allowPartialResults",
            "readOnce",
        ],
    )?;
    let filter = doc_value(req, "filter", filter)?;
    let projection = doc_value(req, "projection", projection)?;
    let sort = doc_value(req, "sort", sort)?;
    let skip = count_option(req, "skip", skip)?;
    let limit = count_option(req, "limit", limit)?;
    let batch_size = count_option(req, "batchSize", batch_size)?;
    if bool_value(req, "noCursorTimeout", no_timeout)?.unwrap_or(false) {
        return Err(not_in_aggregation("noCursorTimeout"));
    }
    if bool_value(req, "allowPartialResults", partial)?.unwrap_or(false) {
        return Err(not_in_aggregation("allowPartialResults"));
    }
    if sort.is_some_and(|s| matches!(s.get("$natural"), Ok(Some(_)))) {
        return Err(CommandError::new(
            ErrorCode::InvalidPipelineOperator,
            "Sort option $natural not supported in aggregation.",
        ));
    }
    // An aggregation has no `singleBatch`, except with `limit: 1`, where it changes nothing.
    if bool_value(req, "singleBatch", single_batch)?.unwrap_or(false) && limit != 1 {
        return Err(not_in_aggregation("singleBatch"));
    }
    if bool_value(req, "readOnce", read_once)?.unwrap_or(false) {
        return Err(not_in_aggregation("readOnce"));
    }
    let mut pipeline = RawArrayBuf::new();
    if let Some(f) = filter.filter(|f| !f.is_empty()) {
        pipeline.push(rawdoc! { "$match": f.to_owned() });
    }
    if let Some(s) = sort.filter(|s| !s.is_empty()) {
        pipeline.push(rawdoc! { "$sort": s.to_owned() });
    }
    if skip > 0 {
        pipeline.push(rawdoc! { "$skip": skip });
    }
    if limit > 0 {
        pipeline.push(rawdoc! { "$limit": limit });
    }
    if let Some(p) = projection.filter(|p| !p.is_empty()) {
        pipeline.push(rawdoc! { "$project": p.to_owned() });
    }
    let cursor = if matches!(req.body.get("batchSize"), Ok(Some(_))) {
        rawdoc! { "batchSize": batch_size }
    } else {
        RawDocumentBuf::new()
    };
    let extra = ["collation", "hint", "let", "allowDiskUse"];
    aggregate(req, state, pipeline, cursor, &extra, explain).await
}

async fn count(
    req: &Request<'_>,
    state: &ServerState,
    explain: Option<Verbosity>,
) -> CommandResult {
    let [query, skip, limit] = fields(req, ["query", "skip", "limit"])?;
    let query = doc_value(req, "query", query)?;
    let skip = count_option(req, "skip", skip)?;
    if skip < 0 {
        return Err(CommandError::new(
            ErrorCode::Location(51024),
            format!("BSON field 'skip' value must be >= 0, actual value '{skip}'"),
        ));
    }
    // count's limit may be negative, meaning the same as positive.
    let limit = count_option(req, "limit", limit)?.unsigned_abs();
    let mut pipeline = RawArrayBuf::new();
    if let Some(q) = query.filter(|q| !q.is_empty()) {
        pipeline.push(rawdoc! { "$match": q.to_owned() });
    }
    if skip > 0 {
        pipeline.push(rawdoc! { "$skip": skip });
    }
    if limit > 0 {
        pipeline.push(rawdoc! { "$limit": i64::try_from(limit).unwrap_or(i64::MAX) });
    }
    pipeline.push(rawdoc! { "$count": "count" });
    let reply = aggregate(
        req,
        state,
        pipeline,
        RawDocumentBuf::new(),
        &["collation", "hint"],
        explain,
    )
    .await?;
    if explain.is_some() {
        return Ok(reply);
    }
    let (docs, _) = all_documents(state, &reply).await?;
    let n = docs
        .first()
        .and_then(|d| match d.get("count").ok().flatten() {
            Some(RawBsonRef::Int32(n)) => Some(i64::from(n)),
            Some(RawBsonRef::Int64(n)) => Some(n),
            _ => None,
        })
        .unwrap_or(0);
    // mongod's reply for a view (`ViewResponseFormatter`).
    Ok(rawdoc! { "n": i32::try_from(n).unwrap_or(i32::MAX), "ok": 1 })
}

async fn distinct(
    req: &Request<'_>,
    state: &ServerState,
    explain: Option<Verbosity>,
) -> CommandResult {
    let key = match field(req, "key")? {
        Some(RawBsonRef::String(k)) => k.to_owned(),
        Some(other) => return Err(wrong_type("distinct.key", other, " 'string'")),
        None => return Err(CommandError::missing_field("distinct.key")),
    };
    let query = doc_value(req, "query", field(req, "query")?)?;
    let mut pipeline = RawArrayBuf::new();
    if let Some(q) = query.filter(|q| !q.is_empty()) {
        pipeline.push(rawdoc! { "$match": q.to_owned() });
    }
    let reply = aggregate(
        req,
        state,
        pipeline,
        RawDocumentBuf::new(),
        &["collation", "hint"],
        explain,
    )
    .await?;
    if explain.is_some() {
        return Ok(reply);
    }
    let (docs, _) = all_documents(state, &reply).await?;
    let parts: Vec<&str> = key.split('.').collect();
    let mut values: Vec<RawBson> = Vec::new();
    for doc in &docs {
        for v in path::values(doc, &parts, path::LeafArrays::ExpandOmitArray)
            .into_iter()
            .flatten()
        {
            values.push(RawBson::from(v));
        }
    }
    // Values equal under the view's collation count once.
    let collation = state
        .catalog
        .resolve_view(req.db, collection_name(req)?)?
        .and_then(|r| r.collation)
        .map(|c| crate::query::Collation::parse(&c))
        .transpose()?
        .flatten();
    let ord = |a: &RawBson, b: &RawBson| {
        crate::query::compare::compare_collated(
            a.as_raw_bson_ref(),
            b.as_raw_bson_ref(),
            collation.as_ref(),
        )
    };
    values.sort_by(|a, b| ord(a, b));
    values.dedup_by(|a, b| ord(a, b).is_eq());
    let mut out = RawArrayBuf::new();
    for v in values {
        out.push(v);
    }
    // mongod's reply for a view (`ViewResponseFormatter`).
    Ok(rawdoc! { "values": out, "ok": 1 })
}

/// Every document of an aggregate's reply: its first batch, and the rest of its cursor (which
/// is closed). Also returns the cursor's namespace.
async fn all_documents(
    state: &ServerState,
    reply: &RawDocument,
) -> CommandResult<(Vec<RawDocumentBuf>, String)> {
    let malformed = || CommandError::internal("an aggregate's reply has no cursor");
    let cursor = reply.get_document("cursor").map_err(|_| malformed())?;
    let ns = cursor.get_str("ns").map_err(|_| malformed())?.to_owned();
    let mut docs = Vec::new();
    for d in cursor.get_array("firstBatch").map_err(|_| malformed())? {
        if let Ok(RawBsonRef::Document(d)) = d {
            docs.push(d.to_owned());
        }
    }
    let id = cursor.get_i64("id").unwrap_or(0);
    if id != 0 {
        let mut open = state.cursors.take(id, &ns, state.now_ms())?;
        let rest = tokio::task::spawn_blocking(move || open.source.drain())
            .await
            .map_err(|e| CommandError::internal(e.to_string()))??;
        docs.extend(rest.into_iter().map(|(d, _)| d));
    }
    Ok((docs, ns))
}
