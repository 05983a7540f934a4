//! `aggregate`: parses the command, pushes the leading stages a find could run into the query
//! layer, runs the rest in the pipeline layer ([`crate::pipeline`]), and answers what needs the
//! server itself: the writing stages `$out` and `$merge` ([`output`]) and collection-less
//! aggregation (`{aggregate: 1}`) from `$documents` or `$listLocalSessions` ([`sources`]).

mod output;
mod sources;
mod stats;

use std::sync::Arc;

use bson::{RawArrayBuf, RawBson, RawBsonRef, RawDocument, RawDocumentBuf};

use super::args::{WriteConcern, collection_name, field, opt_bool, opt_doc, variables, wrong_type};
use super::explain::{Explain, Run, Verbosity};
use super::read::first_batch;
use crate::catalog::{validate_db_name, validate_namespace};
use crate::cursor::Source;
use crate::dispatch::Request;
use crate::error::{CommandError, CommandResult, ErrorCode};
use crate::pipeline::{self, Kind, Stage as PipelineStage, StageStats, Stages, aggregation_error};
use crate::query::Collation;
use crate::query::Variables;
use crate::query::filter::Filter;
use crate::query::shape::ShapeInput;
use crate::query::sort::SortSpec;
use crate::sorter::Sorter;

/// Where a pipeline's documents come from.
enum Input {
    /// The collection named by the command.
    Collection,
    /// `$documents`.
    Documents(Vec<RawDocumentBuf>),
    /// `$listLocalSessions`.
    LocalSessions(sources::SessionOwners),
    /// `$listSessions` (on `config.system.sessions` only).
    Sessions(sources::SessionOwners),
}

/// What happens to a pipeline's results.
enum Output {
    /// They are the cursor's documents.
    Cursor,
    /// `$out`.
    Out(output::Target),
    /// `$merge`.
    Merge(output::Merge),
}

/// A parsed pipeline: its input, its stages, its output.
struct Pipeline {
    input: Input,
    stages: Stages,
    output: Output,
}

/// Parses the `pipeline` of an aggregate on a collection, or collection-less when
/// `collectionless` (`{aggregate: 1}`), with mongod's placement rules: `$documents` and
/// `$listLocalSessions` only first and only without a collection, `$out` and `$merge` only last.
fn parse_pipeline(
    req: &Request<'_>,
    collectionless: bool,
    vars: &Arc<Variables>,
) -> CommandResult<Pipeline> {
    let raw = match field(req, "pipeline")? {
        Some(RawBsonRef::Array(a)) => a,
        Some(other) => return Err(wrong_type("aggregate.pipeline", other, " 'array'")),
        None => {
            return Err(CommandError::missing_field("aggregate.pipeline"));
        }
    };
    // mongod refuses an over-long pipeline before parsing any stage.
    pipeline::stages::check_length(raw.into_iter().count())?;
    let mut parsed = Vec::new();
    for stage in raw {
        let stage = stage.map_err(|e| CommandError::new(ErrorCode::InvalidBSON, e.to_string()))?;
        let RawBsonRef::Document(stage) = stage else {
            return Err(CommandError::new(
                ErrorCode::TypeMismatch,
                "Each element of the 'pipeline' array must be an object",
            ));
        };
        parsed.push(parse_stage(req, stage, collectionless, vars)?);
    }
    // mongod checks the first stage against the namespace, then every stage's position.
    match parsed.first() {
        None if collectionless => {
            return Err(CommandError::new(
                ErrorCode::InvalidNamespace,
                "{aggregate: 1} is not valid for an empty pipeline.",
            ));
        }
        Some((name, Parsed::Input(input)))
            if !collectionless && !matches!(input, Input::Sessions(_)) =>
        {
            return Err(CommandError::new(
                ErrorCode::InvalidNamespace,
                format!("'{name}' can only be run with {{aggregate: 1}}"),
            ));
        }
        Some((name, Parsed::Stage(_) | Parsed::Output(_))) if collectionless => {
            return Err(CommandError::new(
                ErrorCode::InvalidNamespace,
                format!("{{aggregate: 1}} is not valid for '{name}'; a collection is required."),
            ));
        }
        _ => {}
    }
    let last = parsed.len().saturating_sub(1);
    let mut pipeline = Pipeline {
        input: Input::Collection,
        stages: Vec::new(),
        output: Output::Cursor,
    };
    for (i, (name, stage)) in parsed.into_iter().enumerate() {
        match stage {
            Parsed::Input(_) if i > 0 => {
                return Err(CommandError::new(
                    ErrorCode::Location(40602),
                    format!("{name} is only valid as the first stage in a pipeline"),
                ));
            }
            Parsed::Output(_) if i < last => {
                return Err(CommandError::new(
                    ErrorCode::Location(40601),
                    format!("{name} can only be the final stage in the pipeline"),
                ));
            }
            Parsed::Stage(stage) if i > 0 && stage.initial_source() => {
                return Err(CommandError::new(
                    ErrorCode::Location(40602),
                    format!("{name} is only valid as the first stage in a pipeline"),
                ));
            }
            Parsed::Input(input) => pipeline.input = input,
            Parsed::Stage(stage) => pipeline.stages.push(stage),
            Parsed::Output(output) => pipeline.output = output,
        }
    }
    Ok(pipeline)
}

/// One parsed stage, by role.
enum Parsed {
    Input(Input),
    Stage(Box<dyn PipelineStage>),
    Output(Output),
}

fn parse_stage(
    req: &Request<'_>,
    stage: &RawDocument,
    collectionless: bool,
    vars: &Arc<Variables>,
) -> CommandResult<(String, Parsed)> {
    let (name, arg) = pipeline::stages::stage_name_arg(stage)?;
    let parsed = match name {
        "$documents" => Parsed::Input(Input::Documents(sources::documents(arg)?)),
        "$listLocalSessions" => {
            if !collectionless {
                return Err(CommandError::new(
                    ErrorCode::InvalidNamespace,
                    "$listLocalSessions must be run against the database with {aggregate: 1}, \
                     not a collection",
                ));
            }
            Parsed::Input(Input::LocalSessions(sources::list_local_sessions(arg)?))
        }
        "$listSessions" => {
            let on_sessions = !collectionless
                && req.db == "config"
                && collection_name(req).is_ok_and(|c| c == "system.sessions");
            if !on_sessions {
                return Err(CommandError::new(
                    ErrorCode::InvalidNamespace,
                    "$listSessions must be run against the 'system.sessions' collection in the \
                     'config' database.",
                ));
            }
            Parsed::Input(Input::Sessions(sources::list_sessions(name, arg)?))
        }
        "$out" => Parsed::Output(Output::Out(output::parse_out(arg, req.db)?)),
        "$merge" => Parsed::Output(Output::Merge(output::parse_merge(arg, req.db)?)),
        "$changeStream" => return Err(change_stream_on_standalone(arg)),
        _ => Parsed::Stage(pipeline::parse_stage(stage, vars)?),
    };
    Ok((name.to_owned(), parsed))
}

/// `$changeStream` (a driver's `watch()`) as a standalone mongod answers it: the argument must
/// be a document (6188500), then the stage is refused, in any position, since change streams
/// need a replica set (40573). Drivers and libraries read that message to fall back to polling.
pub(super) fn change_stream_on_standalone(arg: RawBsonRef<'_>) -> CommandError {
    if let RawBsonRef::Document(_) = arg {
        CommandError::new(
            ErrorCode::Location(40573),
            "The $changeStream stage is only supported on replica sets",
        )
    } else {
        CommandError::new(
            ErrorCode::Location(6_188_500),
            format!(
                "$changeStream must take a nested object but found: {}",
                crate::query::display::element("$changeStream", arg)
            ),
        )
    }
}

/// The pipeline after mongod's rewrites ([`pipeline::optimize`]): its stages and their
/// documents. The given ones when nothing changes (or, never expected, a rewritten stage does
/// not parse); the stages the command layer answers (`$documents`, `$out`…) never move.
fn optimized(
    stages: Stages,
    raw: Vec<RawDocumentBuf>,
    vars: &Arc<Variables>,
) -> (Stages, Vec<RawDocumentBuf>) {
    let rewritten = pipeline::optimize::optimize(&raw);
    if rewritten == raw {
        return (stages, raw);
    }
    let mut parsed = Vec::with_capacity(rewritten.len());
    for doc in &rewritten {
        if let Ok(("$documents" | "$listLocalSessions" | "$out" | "$merge", _)) =
            pipeline::stages::stage_name_arg(doc)
        {
            continue;
        }
        match pipeline::parse_stage(doc, vars) {
            Ok(stage) => parsed.push(stage),
            Err(_) => return (stages, raw),
        }
    }
    (parsed, rewritten)
}

/// The stages with the command's collation applied where strings are compared.
fn collate(mut stages: Stages, collation: Option<&Arc<Collation>>) -> Stages {
    if let Some(c) = collation {
        for stage in &mut stages {
            stage.collate(c);
        }
    }
    stages
}

pub(super) async fn aggregate(
    req: &Request<'_>,
    state: &crate::state::ServerState,
) -> CommandResult {
    if crate::txn::active().is_some()
        && let Ok(Some(RawBsonRef::Array(stages))) = req.body.get("pipeline")
    {
        refuse_in_transaction(stages)?;
    }
    aggregate_explained(req, state, None).await
}

/// The stages a multi-document transaction cannot run, for those Ebb has, by where mongod
/// refuses them: when it first reads the pipeline (the stage's `LiteParsed` says so), when it
/// builds the stage (`$out`, `$merge`), or when it checks the stages' constraints
/// (`TransactionRequirement::kNotAllowed`).
const NOT_IN_TRANSACTION_LITE: [&str; 6] = [
    "$changeStream",
    "$collStats",
    "$currentOp",
    "$listLocalSessions",
    "$listSessions",
    "$planCacheStats",
];
const NOT_IN_TRANSACTION_BUILT: [&str; 2] = ["$out", "$merge"];
const NOT_IN_TRANSACTION: [&str; 3] = ["$unionWith", "$indexStats", "$listCatalog"];

/// `OperationNotSupportedInTransaction` for the first stage of `stages` (or of their
/// sub-pipelines: `$facet`, `$lookup`) a transaction cannot run, as mongod's pipeline
/// validation answers it.
fn refuse_in_transaction(stages: &bson::RawArray) -> CommandResult<()> {
    for stage in stages {
        let Ok(RawBsonRef::Document(stage)) = stage else {
            continue;
        };
        let Some(Ok((name, spec))) = stage.iter().next() else {
            continue;
        };
        let refused = if NOT_IN_TRANSACTION_LITE.contains(&name.as_str()) {
            Some(format!(
                "Operation not permitted in transaction :: caused by :: Aggregation stage {name} \
                 cannot run within a multi-document transaction."
            ))
        } else if NOT_IN_TRANSACTION_BUILT.contains(&name.as_str()) {
            Some(format!("{name} cannot be used in a transaction"))
        } else if NOT_IN_TRANSACTION.contains(&name.as_str()) {
            Some(format!(
                "Stage not supported inside of a multi-document transaction: {name}"
            ))
        } else {
            None
        };
        if let Some(errmsg) = refused {
            return Err(CommandError::new(
                ErrorCode::OperationNotSupportedInTransaction,
                errmsg,
            ));
        }
        match (name.as_str(), spec) {
            ("$facet", RawBsonRef::Document(facets)) => {
                for facet in facets {
                    if let Ok((_, RawBsonRef::Array(sub))) = facet {
                        refuse_in_transaction(sub)?;
                    }
                }
            }
            ("$lookup", RawBsonRef::Document(lookup)) => {
                if let Ok(Some(RawBsonRef::Array(sub))) = lookup.get("pipeline") {
                    refuse_in_transaction(sub)?;
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// `aggregate`, or its explain reply when explained (by the `explain` command, or its own
/// `explain: true`, which asks for `queryPlanner`).
pub(super) async fn aggregate_explained(
    req: &Request<'_>,
    state: &crate::state::ServerState,
    explain: Option<Verbosity>,
) -> CommandResult {
    if explain.is_none() && super::change_stream::has_change_stream(req, state.replset.is_some()) {
        return super::change_stream::open(req, state).await;
    }
    let started = std::time::Instant::now();
    // On a view: its resolved pipeline, then the request's, over the view's collection;
    // except that `$collStats` reports on the view's own namespace (mongod's run_aggregate).
    let view = if stats::starts_with_coll_stats(req) {
        None
    } else {
        super::views::resolve_aggregate(req, state)?
    };
    let view_req;
    let req = match &view {
        Some(v) => {
            view_req = Request {
                body: &v.body,
                ..*req
            };
            &view_req
        }
        None => req,
    };
    let collectionless = match field(req, "aggregate")? {
        Some(n @ (RawBsonRef::Int32(_) | RawBsonRef::Int64(_) | RawBsonRef::Double(_))) => {
            if !number_is_one(n) {
                return Err(CommandError::new(
                    ErrorCode::FailedToParse,
                    "Invalid command format: the 'aggregate' field must specify a collection \
                     name or 1",
                ));
            }
            true
        }
        _ => false,
    };
    let name = if collectionless {
        validate_db_name(req.db)?;
        None
    } else {
        let name = collection_name(req)?;
        validate_namespace(req.db, name)?;
        Some(name)
    };
    let cursor = opt_doc(req, "cursor")?;
    let explain = match field(req, "explain")? {
        None => explain,
        Some(RawBsonRef::Boolean(false)) => explain,
        Some(RawBsonRef::Boolean(true)) if explain.is_none() => Some(Verbosity::QueryPlanner),
        Some(RawBsonRef::Boolean(true)) => {
            return Err(CommandError::new(
                ErrorCode::Location(17020),
                "explain cannot be specified for an aggregate command with an explain field",
            ));
        }
        Some(other) => return Err(wrong_type("aggregate.explain", other, " 'bool'")),
    };
    let hint = super::read::hint_option(req, "aggregate.hint")?;
    // mongod 7.0's `allowDiskUseByDefault` is true: only an explicit `false` forbids spilling.
    let allow_disk_use = opt_bool(req, "allowDiskUse")?.unwrap_or(true);
    let empty = RawDocumentBuf::new();
    let cursor = match (cursor, explain) {
        (None, Some(_)) => Some(empty.as_ref()),
        (c, _) => c,
    };
    let Some(cursor) = cursor else {
        return Err(CommandError::new(
            ErrorCode::FailedToParse,
            "The 'cursor' option is required, except for aggregate with the explain argument",
        ));
    };
    let batch_size = match cursor.get("batchSize").ok().flatten() {
        None => None,
        Some(RawBsonRef::Int32(n)) if n >= 0 => Some(usize::try_from(n).unwrap_or(0)),
        Some(RawBsonRef::Int64(n)) if n >= 0 => Some(usize::try_from(n).unwrap_or(usize::MAX)),
        #[expect(
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss,
            reason = "checked non-negative and integral"
        )]
        Some(RawBsonRef::Double(d)) if d >= 0.0 && d.fract() == 0.0 => Some(d as usize),
        Some(_) => {
            return Err(CommandError::bad_value(
                "cursor.batchSize must be a non-negative number",
            ));
        }
    };
    let vars = variables(req, state.now_ms())?;
    let Pipeline {
        input,
        stages,
        output,
    } = parse_pipeline(req, collectionless, &vars)?;
    // mongod's rewrites, before the leading stages go to the planner (a `$match` moved to the
    // front may use an index there) and before explain lists the stages.
    let (stages, raw_stages) = optimized(stages, raw_pipeline(req)?, &vars);
    let collation = super::read::collation_option(req)?;
    let mut stages = collate(stages, collation.as_ref());
    // Only a pipeline that writes takes a write concern.
    let concern = match output {
        Output::Cursor => WriteConcern::Journaled,
        Output::Out(_) | Output::Merge(_) => WriteConcern::parse(req)?,
    };
    // A collection-less aggregate's cursor is on `<db>.$cmd.aggregate`, as in mongod.
    let ns = view.as_ref().map_or_else(
        || format!("{}.{}", req.db, name.unwrap_or("$cmd.aggregate")),
        |v| v.ns.clone(),
    );
    let now_ms = state.now_ms();
    // A first stage that reads the server's state rather than documents (`$collStats`…).
    let no_input = stages.first().is_some_and(|s| s.initial_source());
    let docs = match (input, name) {
        (Input::Collection, Some(_)) if no_input => Vec::new(),
        (Input::Collection, Some(name))
            if explain.is_none()
                && super::oplog_collection::oplog_of(state, req.db, name).is_some() =>
        {
            super::oplog_collection::aggregate_input(state, &raw_stages).await?
        }
        (Input::Collection, Some(name)) => {
            let ns_name = format!("{}.{name}", req.db);
            // The leading stages a find could run go to the query layer: the planner chooses
            // from the same plans (an index for the match or the order), and explain shows
            // them as a find's.
            let push = Pushdown::take(&mut stages, &raw_stages);
            let sort_limits = state.config.sort_limits(allow_disk_use);
            match state.collection(req.db, name) {
                None => {
                    if let Some(verbosity) = explain {
                        // mongod plans an `EOF` for a collection that does not exist.
                        let report = Explain::no_collection(
                            ns_name,
                            push.match_doc.clone(),
                            Vec::new(),
                            started,
                        );
                        let measured = if verbosity.executes() && raw_stages.len() > push.pushed {
                            let ctx =
                                pipeline_context(state, req, &vars, allow_disk_use, Some(name));
                            Some(measure(ctx, stages, Vec::new()).await?)
                        } else {
                            None
                        };
                        return Ok(explain_pipeline(
                            state,
                            req,
                            report,
                            verbosity,
                            &raw_stages,
                            &push,
                            measured.as_deref(),
                        ));
                    }
                    Vec::new()
                }
                Some(collection) => {
                    let (mut plan, mut source) = super::read::open_planned(
                        state,
                        &collection,
                        push.filter.clone(),
                        push.sort.as_ref(),
                        hint.as_ref(),
                    )?;
                    if explain.is_none() {
                        collection.note_plan(&plan.access);
                    }
                    let blocking = push.sort.clone().filter(|s| !s.is_empty() && !plan.sorted);
                    if blocking.is_none() {
                        source.set_window(None, push.skip, push.limit);
                        if push.projection_doc.is_none() && counts_only(raw_stages.get(push.pushed))
                        {
                            super::read::keys_only(&collection, &mut plan, &mut source);
                        }
                    }
                    if let Some(verbosity) = explain {
                        let idhack = super::explain::idhack_filter(push.match_doc.as_deref())
                            && push.skip == 0
                            && hint.is_none()
                            && collation.is_none();
                        let window = super::explain::window_stages(
                            push.projection_doc.as_deref(),
                            blocking.as_ref().and(push.sort_doc.as_deref()),
                            state.config.max_blocking_sort_bytes,
                            push.skip,
                            push.limit,
                            idhack,
                        );
                        // The executing verbosities run the whole pipeline: the query layer's
                        // part, then each stage after it, measured.
                        let (run, measured) = if verbosity.executes() {
                            let (docs, read) =
                                run_pushed(source, blocking, &push, sort_limits).await?;
                            let run = Run::new(docs.len(), read, started);
                            let measured = if raw_stages.len() > push.pushed {
                                let ctx =
                                    pipeline_context(state, req, &vars, allow_disk_use, Some(name));
                                Some(measure(ctx, stages, docs).await?)
                            } else {
                                None
                            };
                            (Some(run), measured)
                        } else {
                            (None, None)
                        };
                        let mut report =
                            Explain::planned(ns_name, push.match_doc.clone(), plan, window, run);
                        report.idhack = idhack;
                        report.hashes = Some(super::explain::Hashes::of(
                            &collection,
                            &ShapeInput {
                                filter: push.match_doc.as_deref(),
                                sort: push.sort_doc.as_deref(),
                                projection: push.projection_doc.as_deref(),
                                collation: opt_doc(req, "collation")?,
                            },
                        ));
                        return Ok(explain_pipeline(
                            state,
                            req,
                            report,
                            verbosity,
                            &raw_stages,
                            &push,
                            measured.as_deref(),
                        ));
                    }
                    run_pushed(source, blocking, &push, sort_limits).await?.0
                }
            }
        }
        (Input::Collection, None) => Vec::new(),
        (Input::Documents(docs), _) => docs
            .into_iter()
            .map(|d| (d, crate::storage::record::NEVER))
            .collect(),
        (Input::LocalSessions(owners) | Input::Sessions(owners), _) => {
            sources::session_records(&state.sessions, owners, now_ms)
                .into_iter()
                .map(|d| (d, crate::storage::record::NEVER))
                .collect()
        }
    };
    if let Some(verbosity) = explain {
        // Nothing to plan: not a collection's pipeline.
        let report = Explain::no_collection(ns.clone(), None, Vec::new(), started);
        return Ok(super::explain::reply(state, &report, verbosity, req.body));
    }
    let out = if stages.is_empty() {
        docs
    } else {
        let ctx = pipeline_context(state, req, &vars, allow_disk_use, name);
        let stages = pipeline::stages::coalesce(stages);
        // Sub-pipelines read in the command's transaction, if it runs in one.
        tokio::task::spawn_blocking(crate::storage::tally::carry(crate::txn::carry(move || {
            pipeline::run(&stages, docs, &ctx)
        })))
        .await
        .map_err(|e| CommandError::internal(e.to_string()))??
    };
    // The writing stages run to the end here, whatever the batch size: the cursor they answer
    // is empty.
    let results = match output {
        Output::Cursor => out,
        Output::Out(target) => {
            let docs = out.into_iter().map(|(d, _)| d).collect();
            output::out(state, target, concern, docs).await?;
            Vec::new()
        }
        Output::Merge(spec) => {
            let docs = out.into_iter().map(|(d, _)| d).collect();
            output::merge(state, spec, concern, docs).await?;
            Vec::new()
        }
    };
    first_batch(
        state,
        ns,
        Source::Buffered(results.into()),
        batch_size,
        false,
        false,
        super::read::lsid_of(req),
    )
    .await
}

/// What the pipeline layer runs in: the command's memory limits, and the other collections of
/// its database through the catalog.
fn pipeline_context(
    state: &crate::state::ServerState,
    req: &Request<'_>,
    vars: &Arc<Variables>,
    allow_disk_use: bool,
    collection: Option<&str>,
) -> pipeline::Context {
    let mut ctx = pipeline::Context::new(state.config.sort_limits(allow_disk_use));
    ctx.reader = Some(Arc::new(CatalogReader {
        state: state.clone(),
        db: req.db.to_owned(),
        vars: Arc::clone(vars),
        limits: state.config.sort_limits(allow_disk_use),
        depth: 0,
        collection: collection.map(ToOwned::to_owned),
    }));
    ctx
}

/// Runs the stages after the query layer's over its documents for explain: what each returned
/// and the time it took (an error fails the explain, as in mongod).
async fn measure(
    ctx: pipeline::Context,
    stages: Stages,
    docs: Vec<pipeline::Doc>,
) -> CommandResult<Vec<StageStats>> {
    let stages = pipeline::stages::coalesce(stages);
    tokio::task::spawn_blocking(crate::storage::tally::carry(crate::txn::carry(move || {
        let (out, stats) = pipeline::run_measured(&stages, docs, &ctx);
        out.map(|_| stats)
    })))
    .await
    .map_err(|e| CommandError::internal(e.to_string()))?
}

/// What `$lookup` and `$unionWith` read: another collection of the command's database,
/// through the planner (an index on the matched field is used), live documents only; a view
/// through its pipeline (the filter then applies to what the pipeline gives).
#[derive(Clone)]
struct CatalogReader {
    state: crate::state::ServerState,
    db: String,
    vars: Arc<Variables>,
    limits: crate::sorter::SortLimits,
    /// How many views this read is inside (a view's pipeline may read views again, itself
    /// among them): past `MAX_SUB_PIPELINE_DEPTH`, mongod's 232.
    depth: usize,
    /// The collection (or view) the command names, which `$collStats` and its kind report on.
    collection: Option<String>,
}

impl pipeline::Reader for CatalogReader {
    fn read(&self, coll: &str, filter: Option<&Filter>) -> CommandResult<Vec<RawDocumentBuf>> {
        validate_namespace(&self.db, coll)?;
        if let Some(view) = self.state.catalog.resolve_view(&self.db, coll)? {
            if self.depth >= pipeline::stages::MAX_SUB_PIPELINE_DEPTH {
                return Err(pipeline::stages::sub_pipeline_too_deep());
            }
            let base = self.read(&view.collection, None)?;
            let stages = pipeline::stages::coalesce(pipeline::optimize::parse_optimized(
                &view.pipeline,
                &self.vars,
            )?);
            let mut ctx = pipeline::Context::new(self.limits.clone());
            ctx.reader = Some(Arc::new(CatalogReader {
                depth: self.depth + 1,
                // The view's pipeline runs over its collection: `$indexStats`… report on it.
                collection: Some(view.collection.clone()),
                ..self.clone()
            }));
            let docs = base
                .into_iter()
                .map(|d| (d, crate::storage::record::NEVER))
                .collect();
            let out = pipeline::run(&stages, docs, &ctx)?;
            return Ok(out
                .into_iter()
                .map(|(d, _)| d)
                .filter(|d| filter.is_none_or(|f| f.matches(d)))
                .collect());
        }
        let Some(collection) = self.state.collection(&self.db, coll) else {
            return Ok(Vec::new());
        };
        let (plan, mut source) =
            super::read::open_planned(&self.state, &collection, filter.cloned(), None, None)?;
        collection.note_plan(&plan.access);
        Ok(source.drain()?.into_iter().map(|(d, _)| d).collect())
    }

    fn server_state(&self, what: &pipeline::ServerRead<'_>) -> CommandResult<Vec<RawDocumentBuf>> {
        let coll = self.collection.as_deref().unwrap_or_default();
        stats::server_state(&self.state, &self.db, coll, what)
    }
}

/// Parses a view's pipeline as `create` and `collMod` check it (`req` is an aggregate of it
/// over the view's `viewOn`); returns whether it ends in a stage that writes.
pub(super) fn parse_view_pipeline(
    req: &Request<'_>,
    state: &crate::state::ServerState,
) -> CommandResult<bool> {
    let vars = variables(req, state.now_ms())?;
    let pipeline = parse_pipeline(req, false, &vars)?;
    Ok(!matches!(pipeline.output, Output::Cursor))
}

/// The pipeline's stage documents as given.
fn raw_pipeline(req: &Request<'_>) -> CommandResult<Vec<RawDocumentBuf>> {
    Ok(match field(req, "pipeline")? {
        Some(RawBsonRef::Array(a)) => a
            .into_iter()
            .filter_map(|s| match s {
                Ok(RawBsonRef::Document(d)) => Some(d.to_owned()),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    })
}

/// The leading stages of a collection's pipeline that run in the query layer, as mongod
/// 7.0 pushes them down: a `$match`; a `$sort` (which takes the `$limit`s after it); the
/// `$skip`s and `$limit`s (composed into one skip then limit); a final inclusion or
/// exclusion `$project`.
struct Pushdown {
    filter: Option<Filter>,
    match_doc: Option<RawDocumentBuf>,
    sort: Option<SortSpec>,
    sort_doc: Option<RawDocumentBuf>,
    skip: u64,
    limit: Option<u64>,
    /// A final `$project` shown in the plan (the pipeline's own stage still applies it).
    projection_doc: Option<RawDocumentBuf>,
    /// How many of the pipeline's stages the query layer answers.
    pushed: usize,
}

impl Pushdown {
    /// Takes the pushed stages off the front of `stages` (whose documents are `raw`).
    fn take(stages: &mut Stages, raw: &[RawDocumentBuf]) -> Pushdown {
        let mut push = Pushdown {
            filter: None,
            match_doc: None,
            sort: None,
            sort_doc: None,
            skip: 0,
            limit: None,
            projection_doc: None,
            pushed: 0,
        };
        let body = |i: usize, name: &str| {
            raw.get(i)
                .and_then(|d| d.get_document(name).ok())
                .map(ToOwned::to_owned)
        };
        let mut n = 0;
        // A `$match` right after a leading `$sort` moves before it (mongod swaps them: the
        // order does not change what matches).
        let match_at = match (kind(stages, 0), kind(stages, 1)) {
            (Some(Kind::Match(_)), _) => Some(0),
            (Some(Kind::Sort(_)), Some(Kind::Match(_))) => Some(1),
            _ => None,
        };
        if let Some(at) = match_at
            && let Some(Kind::Match(f)) = kind(stages, at)
        {
            push.filter = Some(f.clone());
            stages.remove(at);
            push.match_doc = body(at, "$match");
            n += 1;
        }
        if let Some(Kind::Sort(s)) = kind(stages, 0) {
            push.sort = Some(s.clone());
            stages.remove(0);
            push.sort_doc = body(if match_at == Some(1) { 0 } else { n }, "$sort");
            n += 1;
        }
        loop {
            let as_u64 = |k: usize| u64::try_from(k).unwrap_or(u64::MAX);
            match kind(stages, 0) {
                Some(Kind::Skip(k)) => {
                    let k = as_u64(k);
                    push.skip = push.skip.saturating_add(k);
                    push.limit = push.limit.map(|l| l.saturating_sub(k));
                }
                Some(Kind::Limit(k)) => {
                    let k = as_u64(k);
                    push.limit = Some(push.limit.map_or(k, |l| l.min(k)));
                }
                _ => break,
            }
            stages.remove(0);
            n += 1;
        }
        if let (1, Some(Kind::Project)) = (stages.len(), kind(stages, 0))
            && let Some(p) = body(n, "$project")
            && simple_projection(&p)
        {
            push.projection_doc = Some(p);
            n += 1;
        }
        push.pushed = n;
        push
    }
}

/// Whether `stage` (the first one after what the query layer answers) only counts the
/// documents it is given: `$count`, or a `$group` on a constant `_id` whose accumulators all
/// `$sum` a constant number (how drivers run `countDocuments`). Such a stage gets the same
/// answer from empty documents.
fn counts_only(stage: Option<&RawDocumentBuf>) -> bool {
    let Some((name, body)) = stage.and_then(|s| s.iter().next()).and_then(Result::ok) else {
        return false;
    };
    let number = |v: RawBsonRef<'_>| {
        matches!(
            v,
            RawBsonRef::Int32(_)
                | RawBsonRef::Int64(_)
                | RawBsonRef::Double(_)
                | RawBsonRef::Decimal128(_)
        )
    };
    match (name.as_str(), body) {
        ("$count", RawBsonRef::String(_)) => true,
        ("$group", RawBsonRef::Document(group)) => group.iter().all(|e| match e {
            Ok((k, v)) if k.as_str() == "_id" => {
                number(v)
                    || matches!(v, RawBsonRef::Null | RawBsonRef::Boolean(_))
                    || matches!(v, RawBsonRef::String(s) if !s.starts_with('$'))
            }
            Ok((_, RawBsonRef::Document(acc))) => {
                let mut it = acc.iter();
                matches!(
                    (it.next(), it.next()),
                    (Some(Ok((op, v))), None) if op.as_str() == "$sum" && number(v)
                )
            }
            _ => false,
        }),
        _ => false,
    }
}

/// What the query layer may know of stage `i`.
fn kind(stages: &Stages, i: usize) -> Option<Kind<'_>> {
    stages.get(i).map(|s| s.kind())
}

/// An inclusion or exclusion of fields (no computed values): what mongod runs in the query
/// layer.
fn simple_projection(p: &RawDocument) -> bool {
    p.iter().map_while(Result::ok).all(|(k, v)| {
        !k.as_str().starts_with('$')
            && matches!(
                v,
                RawBsonRef::Boolean(_)
                    | RawBsonRef::Int32(_)
                    | RawBsonRef::Int64(_)
                    | RawBsonRef::Double(_)
                    | RawBsonRef::Decimal128(_)
            )
    })
}

/// Reads what the query layer answers: the window of a scan in order, or every match sorted
/// (held within the blocking-sort limit, spilled past it when `allowDiskUse` allows) and then
/// windowed.
async fn run_pushed(
    mut source: Source,
    blocking: Option<SortSpec>,
    push: &Pushdown,
    limits: crate::sorter::SortLimits,
) -> CommandResult<(Vec<(RawDocumentBuf, i64)>, crate::cursor::ScanStats)> {
    let (skip, limit) = (push.skip, push.limit);
    tokio::task::spawn_blocking(crate::storage::tally::carry(move || -> CommandResult<_> {
        let Some(sort) = blocking else {
            let docs = source.drain()?;
            return Ok((docs, source.stats()));
        };
        let skip = usize::try_from(skip).unwrap_or(usize::MAX);
        let keep = limit.map(|l| skip.saturating_add(usize::try_from(l).unwrap_or(usize::MAX)));
        let mut sorter = Sorter::new(sort, keep, limits);
        loop {
            let batch = source.next_entries(1024, usize::MAX)?;
            if batch.is_empty() {
                break;
            }
            for (doc, expires) in batch {
                sorter.push(doc, expires).map_err(aggregation_error)?;
            }
        }
        let results = sorter.finish()?.into_vec()?;
        let take = limit.map_or(usize::MAX, |l| usize::try_from(l).unwrap_or(usize::MAX));
        let docs = results.into_iter().skip(skip).take(take).collect();
        Ok((docs, source.stats()))
    }))
    .await
    .map_err(|e| CommandError::internal(e.to_string()))?
}

/// The explain reply of a collection's pipeline (after mongod's rewrites): with every stage
/// pushed to the query layer, mongod's find-like shape (with `optimizedPipeline: true`);
/// otherwise `stages`, the first of which is the `$cursor` the query layer answers, then the
/// rest of the pipeline (a `$match` as mongod serializes it parsed). With the executing
/// verbosities every stage, `$cursor` included, ends with its `nReturned` and
/// `executionTimeMillisEstimate` (`measured`: those of the stages after `$cursor`), as
/// mongod's `Pipeline::writeExplainOps`.
fn explain_pipeline(
    state: &crate::state::ServerState,
    req: &Request<'_>,
    mut report: Explain,
    verbosity: Verbosity,
    raw: &[RawDocumentBuf],
    push: &Pushdown,
    measured: Option<&[StageStats]>,
) -> RawDocumentBuf {
    let rest = raw.get(push.pushed..).unwrap_or_default();
    if rest.is_empty() {
        report.extra = Some(bson::rawdoc! { "optimizedPipeline": true });
        return super::explain::reply(state, &report, verbosity, req.body);
    }
    let (planner, exec) = report.sections(verbosity);
    let mut cursor_stage = bson::rawdoc! { "queryPlanner": planner };
    if let Some(e) = exec {
        cursor_stage.append(bson::cstr!("executionStats"), e);
    }
    let mut cursor = bson::rawdoc! { "$cursor": cursor_stage };
    if let (Some(_), Some(run)) = (measured, report.run) {
        cursor.append(bson::cstr!("nReturned"), long(run.returned));
        cursor.append(bson::cstr!("executionTimeMillisEstimate"), long(run.millis));
    }
    let mut stages = RawArrayBuf::new();
    stages.push(cursor);
    for s in explained_stages(rest, measured) {
        stages.push(s);
    }
    let out = bson::rawdoc! { "explainVersion": "1", "stages": stages };
    super::explain::finish(state, out, req.body)
}

/// A stage's count argument (`$limit`, `$skip`) as mongod holds it: a long.
fn stage_count(v: RawBsonRef<'_>) -> Option<i64> {
    crate::query::shape::number(v)
}

/// A count as mongod's explain reports it: a long.
fn long(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// The stage document with what running it measured appended.
fn with_stats(mut doc: RawDocumentBuf, stats: Option<StageStats>) -> RawDocumentBuf {
    if let Some(s) = stats {
        doc.append(bson::cstr!("nReturned"), long(s.returned));
        doc.append(
            bson::cstr!("executionTimeMillisEstimate"),
            long(s.micros / 1000),
        );
    }
    doc
}

/// The stages after `$cursor` as mongod's explain serializes them: a `$match` parsed (in the
/// given order), `$sort` as `{sortKey, limit?}` taking the `$limit`s right after it, `$limit`
/// and `$skip` as longs; the others as given. Stage `i` of `rest` ran with `measured[i]`.
fn explained_stages(
    rest: &[RawDocumentBuf],
    measured: Option<&[StageStats]>,
) -> Vec<RawDocumentBuf> {
    type SortLimit = (RawDocumentBuf, Option<i64>, Option<StageStats>);
    fn flush(out: &mut Vec<RawDocumentBuf>, sort: Option<SortLimit>) {
        if let Some((key, limit, stats)) = sort {
            let mut inner = bson::rawdoc! { "sortKey": key };
            if let Some(l) = limit {
                inner.append(bson::cstr!("limit"), l);
            }
            out.push(with_stats(bson::rawdoc! { "$sort": inner }, stats));
        }
    }
    let mut out: Vec<RawDocumentBuf> = Vec::with_capacity(rest.len());
    let mut sort_limit: Option<SortLimit> = None;
    for (i, s) in rest.iter().enumerate() {
        let Some(Ok((name, v))) = s.iter().next() else {
            continue;
        };
        let name = name.as_str();
        let stats = measured.and_then(|m| m.get(i)).copied();
        if name == "$limit"
            && let (Some((_, limit, sort_stats)), Some(n)) = (sort_limit.as_mut(), stage_count(v))
        {
            // The `$sort` keeps only that many: what it returns is what the `$limit` did.
            *limit = Some(limit.map_or(n, |l| l.min(n)));
            *sort_stats = stats.or(*sort_stats);
            continue;
        }
        flush(&mut out, sort_limit.take());
        let before = out.len();
        match (name, v) {
            ("$match", RawBsonRef::Document(m)) => {
                let parsed = crate::query::shape::normalize(Some(m), false);
                out.push(bson::rawdoc! { "$match": parsed });
            }
            ("$sort", RawBsonRef::Document(key)) => {
                let mut pattern = RawDocumentBuf::new();
                for (k, dir) in key.iter().map_while(Result::ok) {
                    let value = match dir {
                        RawBsonRef::Document(meta) => RawBson::Document(meta.to_owned()),
                        other => {
                            let descending = crate::query::compare::number_as_f64(other)
                                .is_some_and(|d| d < 0.0);
                            RawBson::Int32(if descending { -1 } else { 1 })
                        }
                    };
                    crate::query::plan::put(&mut pattern, k.as_str(), value);
                }
                sort_limit = Some((pattern, None, stats));
                continue;
            }
            ("$limit" | "$skip", v) => match stage_count(v) {
                Some(n) => {
                    let mut d = RawDocumentBuf::new();
                    crate::query::plan::put(&mut d, name, n);
                    out.push(d);
                }
                None => out.push(s.clone()),
            },
            _ => out.push(s.clone()),
        }
        if out.len() > before
            && let Some(last) = out.pop()
        {
            out.push(with_stats(last, stats));
        }
    }
    flush(&mut out, sort_limit);
    out
}

/// Whether a number is 1 (`{aggregate: 1}` accepts any numeric type).
fn number_is_one(n: RawBsonRef<'_>) -> bool {
    match n {
        RawBsonRef::Int32(i) => i == 1,
        RawBsonRef::Int64(i) => i == 1,
        RawBsonRef::Double(d) => d == 1.0,
        _ => false,
    }
}
