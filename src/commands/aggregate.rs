//! `aggregate`, first cut: `$match`, `$sort`, `$skip`, `$limit`, `$project`, `$count`,
//! `$group` (accumulators `$sum`, `$avg`, `$min`, `$max`, `$first`, `$last`, `$push`), with the
//! engine's aggregation expressions ([`Expression`]), which see the command's `let` variables
//! and `$$NOW`; `$set`/`$addFields`, `$unset`,
//! `$replaceRoot`/`$replaceWith` (the stages pipeline-style updates share); the writing stages
//! `$out` and `$merge` ([`output`]); and collection-less aggregation (`{aggregate: 1}`) from
//! `$documents` or `$listLocalSessions` ([`sources`]). Unknown stages answer MongoDB's error.

mod output;
mod sources;

use std::sync::Arc;

use bson::raw::CStr;
use bson::{RawArrayBuf, RawBson, RawBsonRef, RawDocument, RawDocumentBuf};

use super::args::{WriteConcern, collection_name, field, opt_bool, opt_doc, variables, wrong_type};
use super::explain::{Explain, Run, Verbosity};
use super::read::first_batch;
use crate::catalog::{validate_db_name, validate_namespace};
use crate::cursor::Source;
use crate::dispatch::Request;
use crate::error::{CommandError, CommandResult, ErrorCode};
use crate::query::Collation;
use crate::query::compare::compare_collated;
use crate::query::filter::{Filter, FilterContext};
use crate::query::projection::Projection;
use crate::query::shape::ShapeInput;
use crate::query::sort::SortSpec;
use crate::query::update::Update;
use crate::query::{Expression, Variables};
use crate::sorter::{SortLimits, Sorter};

enum Stage {
    Match(Filter),
    Sort(SortSpec),
    Skip(usize),
    Limit(usize),
    Project(Projection),
    Count(String),
    Group(Group),
    /// `$set`/`$addFields`, `$unset`, `$replaceRoot`/`$replaceWith`: one pipeline-update stage,
    /// run with aggregation's rules ([`Update::run_stages`]).
    Reshape(Update),
}

/// Where a pipeline's documents come from.
enum Input {
    /// The collection named by the command.
    Collection,
    /// `$documents`.
    Documents(Vec<RawDocumentBuf>),
    /// `$listLocalSessions`.
    LocalSessions(sources::SessionOwners),
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
    stages: Vec<Stage>,
    output: Output,
}

struct Group {
    id: Expression,
    fields: Vec<(String, Acc, Expression)>,
    /// The command's collation: keys equal under it group together; `$min`/`$max` use it.
    collation: Option<Arc<Collation>>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Acc {
    Sum,
    Avg,
    Min,
    Max,
    First,
    Last,
    Push,
}

/// A malformed stage document (40323).
fn bad_stage(msg: impl Into<String>) -> CommandError {
    CommandError::new(ErrorCode::Location(40323), msg)
}

fn parse_group(spec: &RawDocument, vars: &Arc<Variables>) -> CommandResult<Group> {
    let mut id = None;
    let mut fields = Vec::new();
    for elem in spec {
        let (k, v) = elem.map_err(|e| CommandError::new(ErrorCode::InvalidBSON, e.to_string()))?;
        if k.as_str() == "_id" {
            id = Some(Expression::parse_in(v, vars)?);
            continue;
        }
        let RawBsonRef::Document(acc) = v else {
            return Err(CommandError::new(
                ErrorCode::Location(40234),
                format!("The field '{}' must be an accumulator object", k.as_str()),
            ));
        };
        let mut it = acc.iter();
        let (Some(Ok((op, arg))), None) = (it.next(), it.next()) else {
            return Err(CommandError::new(
                ErrorCode::Location(40238),
                format!("The field '{}' must specify one accumulator", k.as_str()),
            ));
        };
        let acc = match op.as_str() {
            "$sum" => Acc::Sum,
            "$avg" => Acc::Avg,
            "$min" => Acc::Min,
            "$max" => Acc::Max,
            "$first" => Acc::First,
            "$last" => Acc::Last,
            "$push" => Acc::Push,
            other => {
                return Err(CommandError::new(
                    ErrorCode::Location(15952),
                    format!("unknown group operator '{other}'"),
                ));
            }
        };
        fields.push((k.as_str().to_owned(), acc, Expression::parse_in(arg, vars)?));
    }
    let id = id.ok_or_else(|| {
        CommandError::new(
            ErrorCode::Location(15955),
            "a group specification must include an _id",
        )
    })?;
    Ok(Group {
        id,
        fields,
        collation: None,
    })
}

fn count_arg(stage: &str, v: RawBsonRef<'_>) -> CommandResult<usize> {
    let n = match v {
        RawBsonRef::Int32(n) => i64::from(n),
        RawBsonRef::Int64(n) => n,
        #[expect(clippy::cast_possible_truncation, reason = "checked to be integral")]
        RawBsonRef::Double(d) if d.fract() == 0.0 => d as i64,
        other => {
            return Err(CommandError::new(
                ErrorCode::Location(if stage == "$skip" { 15972 } else { 15957 }),
                format!(
                    "invalid argument to {stage} stage: Expected a number in: {stage}: {other:?}"
                ),
            ));
        }
    };
    match (stage, n) {
        ("$limit", n) if n <= 0 => Err(CommandError::new(
            ErrorCode::Location(15958),
            "the limit must be positive",
        )),
        ("$skip", n) if n < 0 => Err(CommandError::new(
            ErrorCode::Location(15956),
            "invalid argument to $skip stage: Expected a non-negative number in: $skip",
        )),
        _ => Ok(usize::try_from(n).unwrap_or(usize::MAX)),
    }
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
        Some((name, Parsed::Input(_))) if !collectionless => {
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
    Stage(Stage),
    Output(Output),
}

fn parse_stage(
    req: &Request<'_>,
    stage: &RawDocument,
    collectionless: bool,
    vars: &Arc<Variables>,
) -> CommandResult<(String, Parsed)> {
    let mut it = stage.iter();
    let (Some(Ok((name, arg))), None) = (it.next(), it.next()) else {
        return Err(bad_stage(
            "A pipeline stage specification object must contain exactly one field.",
        ));
    };
    let doc_arg = |what: &str| match arg {
        RawBsonRef::Document(d) => Ok(d),
        _ => Err(CommandError::new(
            ErrorCode::Location(15959),
            format!("the {what} specification must be an object"),
        )),
    };
    let parsed = match name.as_str() {
        "$match" => Parsed::Stage(Stage::Match(Filter::compile_in(
            doc_arg("match filter")?,
            FilterContext::Pipeline,
            vars,
        )?)),
        "$sort" => Parsed::Stage(Stage::Sort(SortSpec::compile_for_pipeline(doc_arg(
            "$sort key",
        )?)?)),
        "$skip" => Parsed::Stage(Stage::Skip(count_arg("$skip", arg)?)),
        "$limit" => Parsed::Stage(Stage::Limit(count_arg("$limit", arg)?)),
        "$project" => Parsed::Stage(Stage::Project(Projection::compile_for_pipeline_in(
            doc_arg("$project")?,
            vars,
        )?)),
        "$count" => match arg {
            RawBsonRef::String(s) if !s.is_empty() && !s.starts_with('$') && !s.contains('.') => {
                Parsed::Stage(Stage::Count(s.to_owned()))
            }
            _ => {
                return Err(CommandError::new(
                    ErrorCode::Location(40156),
                    "the count field must be a non-empty string",
                ));
            }
        },
        "$group" => Parsed::Stage(Stage::Group(parse_group(doc_arg("$group")?, vars)?)),
        "$set" | "$addFields" | "$unset" | "$replaceRoot" | "$replaceWith" => {
            let mut one = RawArrayBuf::new();
            one.push(stage.to_owned());
            Parsed::Stage(Stage::Reshape(Update::compile_pipeline_in(&one, vars)?))
        }
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
        "$out" => Parsed::Output(Output::Out(output::parse_out(arg, req.db)?)),
        "$merge" => Parsed::Output(Output::Merge(output::parse_merge(arg, req.db)?)),
        other => {
            return Err(CommandError::new(
                ErrorCode::Location(40324),
                format!("Unrecognized pipeline stage name: '{other}'"),
            ));
        }
    };
    Ok((name.as_str().to_owned(), parsed))
}

fn add(acc: RawBson, v: &RawBson) -> RawBson {
    match (acc, v) {
        (RawBson::Int32(a), RawBson::Int32(b)) => a
            .checked_add(*b)
            .map_or(RawBson::Int64(i64::from(a) + i64::from(*b)), RawBson::Int32),
        (RawBson::Int32(a), RawBson::Int64(b)) => a.checked_add_i64(*b),
        (RawBson::Int64(a), RawBson::Int32(b)) => RawBson::Int64(a).checked_add_i64(i64::from(*b)),
        (RawBson::Int64(a), RawBson::Int64(b)) => RawBson::Int64(a).checked_add_i64(*b),
        (a, b) => RawBson::Double(as_f64(&a).unwrap_or(0.0) + as_f64(b).unwrap_or(0.0)),
    }
}

trait CheckedAdd {
    fn checked_add_i64(self, b: i64) -> RawBson;
}

impl CheckedAdd for i32 {
    fn checked_add_i64(self, b: i64) -> RawBson {
        RawBson::Int64(i64::from(self)).checked_add_i64(b)
    }
}

impl CheckedAdd for RawBson {
    #[expect(
        clippy::cast_precision_loss,
        reason = "overflow falls back to double, as MongoDB does"
    )]
    fn checked_add_i64(self, b: i64) -> RawBson {
        match self {
            RawBson::Int64(a) => a
                .checked_add(b)
                .map_or(RawBson::Double(a as f64 + b as f64), RawBson::Int64),
            other => other,
        }
    }
}

#[expect(
    clippy::cast_precision_loss,
    reason = "averages and mixed sums are doubles"
)]
fn as_f64(v: &RawBson) -> Option<f64> {
    match v {
        RawBson::Int32(i) => Some(f64::from(*i)),
        RawBson::Int64(i) => Some(*i as f64),
        RawBson::Double(d) => Some(*d),
        RawBson::Decimal128(d) => d.to_string().parse().ok(),
        _ => None,
    }
}

struct GroupState {
    key: RawBson,
    values: Vec<RawBson>,
    counts: Vec<u64>,
}

#[expect(clippy::cast_precision_loss, reason = "averages are doubles")]
fn run_group(group: &Group, docs: &[RawDocumentBuf]) -> CommandResult<Vec<RawDocumentBuf>> {
    let mut groups: Vec<GroupState> = Vec::new();
    let mut index: std::collections::HashMap<Vec<u8>, usize> = std::collections::HashMap::new();
    for doc in docs {
        let key = group.id.evaluate(doc)?.unwrap_or(RawBson::Null);
        let ks = match &group.collation {
            Some(c) => crate::query::keystring::to_key(collation_key(&key, c).as_raw_bson_ref()),
            None => crate::query::keystring::to_key(key.as_raw_bson_ref()),
        };
        let slot = *index.entry(ks).or_insert_with(|| {
            groups.push(GroupState {
                key: key.clone(),
                values: group
                    .fields
                    .iter()
                    .map(|(_, acc, _)| match acc {
                        Acc::Sum | Acc::Avg => RawBson::Int32(0),
                        Acc::Push => RawBson::Array(RawArrayBuf::new()),
                        _ => RawBson::Null,
                    })
                    .collect(),
                counts: vec![0; group.fields.len()],
            });
            groups.len() - 1
        });
        let state = &mut groups[slot];
        for (i, (_, acc, expr)) in group.fields.iter().enumerate() {
            let v = expr.evaluate(doc)?;
            let current = std::mem::replace(&mut state.values[i], RawBson::Null);
            state.values[i] = match (acc, v) {
                (Acc::Sum | Acc::Avg, Some(v)) if as_f64(&v).is_some() => {
                    state.counts[i] += 1;
                    add(current, &v)
                }
                (Acc::Sum | Acc::Avg, _) => current,
                (Acc::Min | Acc::Max, Some(v)) if !matches!(v, RawBson::Null) => {
                    let replace = state.counts[i] == 0 || {
                        let ord = compare_collated(
                            v.as_raw_bson_ref(),
                            current.as_raw_bson_ref(),
                            group.collation.as_deref(),
                        );
                        if *acc == Acc::Min {
                            ord.is_lt()
                        } else {
                            ord.is_gt()
                        }
                    };
                    state.counts[i] += 1;
                    if replace { v } else { current }
                }
                (Acc::Min | Acc::Max, _) => current,
                (Acc::First, v) => {
                    state.counts[i] += 1;
                    if state.counts[i] == 1 {
                        v.unwrap_or(RawBson::Null)
                    } else {
                        current
                    }
                }
                (Acc::Last, v) => v.unwrap_or(RawBson::Null),
                (Acc::Push, v) => {
                    let mut arr = match current {
                        RawBson::Array(a) => a,
                        _ => RawArrayBuf::new(),
                    };
                    if let Some(v) = v {
                        arr.push(v);
                    }
                    RawBson::Array(arr)
                }
            };
        }
    }
    Ok(groups
        .into_iter()
        .map(|g| {
            let mut out = RawDocumentBuf::new();
            out.append(bson::raw::cstr!("_id"), g.key);
            for (i, ((name, acc, _), value)) in group.fields.iter().zip(g.values).enumerate() {
                let value = match acc {
                    Acc::Avg if g.counts[i] == 0 => RawBson::Null,
                    Acc::Avg => RawBson::Double(as_f64(&value).unwrap_or(0.0) / g.counts[i] as f64),
                    _ => value,
                };
                if let Ok(key) = <&CStr>::try_from(name.as_str()) {
                    out.append(key, value);
                }
            }
            out
        })
        .collect())
}

/// `v` with every string (at any depth) replaced by the hex digits of its collation sort key, so
/// that values equal under the collation have equal keystrings.
fn collation_key(v: &RawBson, c: &Collation) -> RawBson {
    use std::fmt::Write;
    match v {
        RawBson::String(s) | RawBson::Symbol(s) => {
            let mut hex = String::new();
            for b in c.sort_key(s) {
                let _ = write!(hex, "{b:02x}");
            }
            RawBson::String(hex)
        }
        RawBson::Document(d) => {
            let mut out = RawDocumentBuf::new();
            for (k, v) in d.iter().map_while(Result::ok) {
                out.append(k, collation_key(&RawBson::from(v), c));
            }
            RawBson::Document(out)
        }
        RawBson::Array(a) => {
            let mut out = RawArrayBuf::new();
            for v in a.into_iter().map_while(Result::ok) {
                out.push(collation_key(&RawBson::from(v), c));
            }
            RawBson::Array(out)
        }
        other => other.clone(),
    }
}

/// The stages with the command's collation applied where strings are compared.
fn collate(stages: Vec<Stage>, collation: Option<&Arc<Collation>>) -> Vec<Stage> {
    let Some(c) = collation else {
        return stages;
    };
    stages
        .into_iter()
        .map(|stage| match stage {
            Stage::Match(f) => Stage::Match(f.with_collation(Some(c.clone()))),
            Stage::Sort(s) => Stage::Sort(s.with_collation(Some(c.clone()))),
            Stage::Group(mut g) => {
                g.collation = Some(c.clone());
                Stage::Group(g)
            }
            other => other,
        })
        .collect()
}

/// Runs the stages over documents paired with the expiry instant of the stored document they
/// show; documents a stage computes (`$group`, `$count`) never expire.
/// A `$sort` holds at most `sort_limits.max_bytes` of documents (a `$sort` followed by `$limit`
/// only the first documents), or fails with mongod's 292 without `allowDiskUse`.
fn run_pipeline(
    stages: &[Stage],
    mut docs: Vec<(RawDocumentBuf, i64)>,
    sort_limits: &SortLimits,
) -> CommandResult<Vec<(RawDocumentBuf, i64)>> {
    let computed = |d: RawDocumentBuf| (d, crate::storage::record::NEVER);
    for (i, stage) in stages.iter().enumerate() {
        docs = match stage {
            Stage::Match(f) => {
                let mut kept = Vec::with_capacity(docs.len());
                for (d, e) in docs {
                    if f.try_matches(&d)? {
                        kept.push((d, e));
                    }
                }
                kept
            }
            Stage::Sort(s) => {
                // mongod coalesces `$sort` and a following `$limit` into a top-k sort.
                let keep = match stages.get(i + 1) {
                    Some(Stage::Limit(n)) => Some(*n),
                    _ => None,
                };
                let mut sorter = Sorter::new(s.clone(), keep, sort_limits.clone());
                for (d, e) in docs {
                    sorter.push(d, e).map_err(aggregation_error)?;
                }
                sorter.finish()?.into_vec()?
            }
            Stage::Skip(n) => docs.into_iter().skip(*n).collect(),
            Stage::Limit(n) => docs.into_iter().take(*n).collect(),
            Stage::Project(p) => docs
                .iter()
                .map(|(d, e)| p.try_apply(d).map(|d| (d, *e)))
                .collect::<CommandResult<_>>()?,
            Stage::Count(name) => {
                if docs.is_empty() {
                    Vec::new()
                } else {
                    let mut out = RawDocumentBuf::new();
                    if let Ok(key) = <&CStr>::try_from(name.as_str()) {
                        out.append(key, i32::try_from(docs.len()).unwrap_or(i32::MAX));
                    }
                    vec![computed(out)]
                }
            }
            Stage::Group(g) => {
                let plain: Vec<RawDocumentBuf> = docs.into_iter().map(|(d, _)| d).collect();
                run_group(g, &plain)?.into_iter().map(computed).collect()
            }
            Stage::Reshape(update) => {
                let mut out = Vec::with_capacity(docs.len());
                for (d, e) in docs {
                    // `$$NOW` is the command's, fixed when the stage was compiled.
                    let reshaped = update
                        .run_stages(&d)
                        .ok_or_else(|| CommandError::internal("not a pipeline stage"))??;
                    out.push((reshaped, e));
                }
                out
            }
        };
    }
    Ok(docs)
}

/// An error raised while the pipeline runs, as mongod's aggregation reports it.
fn aggregation_error(mut e: CommandError) -> CommandError {
    e.errmsg = format!(
        "PlanExecutor error during aggregation :: caused by :: {}",
        e.errmsg
    );
    e
}

pub(super) async fn aggregate(
    req: &Request<'_>,
    state: &crate::state::ServerState,
) -> CommandResult {
    aggregate_explained(req, state, None).await
}

/// `aggregate`, or its explain reply when explained (by the `explain` command, or its own
/// `explain: true`, which asks for `queryPlanner`).
pub(super) async fn aggregate_explained(
    req: &Request<'_>,
    state: &crate::state::ServerState,
    explain: Option<Verbosity>,
) -> CommandResult {
    let started = std::time::Instant::now();
    // On a view: its resolved pipeline, then the request's, over the view's collection.
    let view = super::views::resolve_aggregate(req, state)?;
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
    let raw_stages = raw_pipeline(req)?;
    let docs = match (input, name) {
        (Input::Collection, Some(name)) => {
            let ns_name = format!("{}.{name}", req.db);
            // The leading stages a find could run go to the query layer: the planner chooses
            // from the same plans (an index for the match or the order), and explain shows
            // them as a find's.
            let push = Pushdown::take(&mut stages, &raw_stages);
            let sort_limits = state.config.sort_limits(allow_disk_use);
            match state.catalog.get(req.db, name) {
                None => {
                    if let Some(verbosity) = explain {
                        // mongod plans an `EOF` for a collection that does not exist.
                        let report = Explain::no_collection(
                            ns_name,
                            push.match_doc.clone(),
                            Vec::new(),
                            started,
                        );
                        return Ok(explain_pipeline(
                            state,
                            req,
                            report,
                            verbosity,
                            &raw_stages,
                            &push,
                        ));
                    }
                    Vec::new()
                }
                Some(collection) => {
                    let (plan, mut source) = super::read::open_planned(
                        state,
                        &collection,
                        push.filter.clone(),
                        push.sort.as_ref(),
                        hint.as_ref(),
                    )?;
                    let blocking = push.sort.clone().filter(|s| !s.is_empty() && !plan.sorted);
                    if blocking.is_none() {
                        source.set_window(None, push.skip, push.limit);
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
                        let run = if verbosity.executes() {
                            let (docs, read) =
                                run_pushed(source, blocking, &push, sort_limits).await?;
                            Some(Run::new(docs.len(), read, started))
                        } else {
                            None
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
        (Input::LocalSessions(owners), _) => {
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
        let sort_limits = state.config.sort_limits(allow_disk_use);
        tokio::task::spawn_blocking(move || run_pipeline(&stages, docs, &sort_limits))
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
    )
    .await
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
    fn take(stages: &mut Vec<Stage>, raw: &[RawDocumentBuf]) -> Pushdown {
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
        let match_at = match (stages.first(), stages.get(1)) {
            (Some(Stage::Match(_)), _) => Some(0),
            (Some(Stage::Sort(_)), Some(Stage::Match(_))) => Some(1),
            _ => None,
        };
        if let Some(at) = match_at
            && let Stage::Match(f) = stages.remove(at)
        {
            push.filter = Some(f);
            push.match_doc = body(at, "$match");
            n += 1;
        }
        if let Some(Stage::Sort(_)) = stages.first()
            && let Stage::Sort(s) = stages.remove(0)
        {
            push.sort = Some(s);
            push.sort_doc = body(if match_at == Some(1) { 0 } else { n }, "$sort");
            n += 1;
        }
        loop {
            let as_u64 = |k: usize| u64::try_from(k).unwrap_or(u64::MAX);
            match stages.first() {
                Some(Stage::Skip(k)) => {
                    let k = as_u64(*k);
                    push.skip = push.skip.saturating_add(k);
                    push.limit = push.limit.map(|l| l.saturating_sub(k));
                }
                Some(Stage::Limit(k)) => {
                    let k = as_u64(*k);
                    push.limit = Some(push.limit.map_or(k, |l| l.min(k)));
                }
                _ => break,
            }
            stages.remove(0);
            n += 1;
        }
        if let (1, Some(Stage::Project(_))) = (stages.len(), stages.first())
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
    tokio::task::spawn_blocking(move || -> CommandResult<_> {
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
    })
    .await
    .map_err(|e| CommandError::internal(e.to_string()))?
}

/// The explain reply of a collection's pipeline: with every stage pushed to the query layer,
/// mongod's find-like shape (with `optimizedPipeline: true`); otherwise `stages`, the first of
/// which is the `$cursor` the query layer answers, then the rest of the pipeline (a `$match`
/// as mongod serializes it parsed).
fn explain_pipeline(
    state: &crate::state::ServerState,
    req: &Request<'_>,
    mut report: Explain,
    verbosity: Verbosity,
    raw: &[RawDocumentBuf],
    push: &Pushdown,
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
    let mut stages = RawArrayBuf::new();
    stages.push(bson::rawdoc! { "$cursor": cursor_stage });
    for s in explained_stages(rest) {
        stages.push(s);
    }
    let out = bson::rawdoc! { "explainVersion": "1", "stages": stages };
    super::explain::finish(state, out, req.body)
}

/// A stage's count argument (`$limit`, `$skip`) as mongod holds it: a long.
fn stage_count(v: RawBsonRef<'_>) -> Option<i64> {
    crate::query::shape::number(v)
}

/// The stages after `$cursor` as mongod's explain serializes them: a `$match` parsed (in the
/// given order), `$sort` as `{sortKey, limit?}` taking the `$limit`s right after it, `$limit`
/// and `$skip` as longs; the others as given.
fn explained_stages(rest: &[RawDocumentBuf]) -> Vec<RawDocumentBuf> {
    fn flush(out: &mut Vec<RawDocumentBuf>, sort: Option<(RawDocumentBuf, Option<i64>)>) {
        if let Some((key, limit)) = sort {
            let mut inner = bson::rawdoc! { "sortKey": key };
            if let Some(l) = limit {
                inner.append(bson::cstr!("limit"), l);
            }
            out.push(bson::rawdoc! { "$sort": inner });
        }
    }
    let mut out: Vec<RawDocumentBuf> = Vec::with_capacity(rest.len());
    let mut sort_limit: Option<(RawDocumentBuf, Option<i64>)> = None;
    for s in rest {
        let Some(Ok((name, v))) = s.iter().next() else {
            continue;
        };
        let name = name.as_str();
        if name == "$limit"
            && let (Some((_, limit)), Some(n)) = (sort_limit.as_mut(), stage_count(v))
        {
            *limit = Some(limit.map_or(n, |l| l.min(n)));
            continue;
        }
        flush(&mut out, sort_limit.take());
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
                sort_limit = Some((pattern, None));
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

#[cfg(test)]
mod tests {
    use bson::rawdoc;

    use super::*;

    #[test]
    fn group_sums_and_counts() {
        let docs = vec![
            rawdoc! {"k": "a", "v": 1},
            rawdoc! {"k": "a", "v": 2.5},
            rawdoc! {"k": "b", "v": 3},
        ];
        let spec = rawdoc! {"_id": "$k", "total": {"$sum": "$v"}, "n": {"$sum": 1}, "avg": {"$avg": "$v"}, "max": {"$max": "$v"}};
        let vars = Arc::new(Variables::system_clock());
        let out = run_group(&parse_group(&spec, &vars).unwrap(), &docs).unwrap();
        assert_eq!(out.len(), 2);
        assert_eq!(out[0].get_str("_id").unwrap(), "a");
        assert_eq!(out[0].get_f64("total").unwrap(), 3.5);
        assert_eq!(out[0].get_i32("n").unwrap(), 2);
        assert_eq!(out[0].get_f64("avg").unwrap(), 1.75);
        assert_eq!(out[0].get_f64("max").unwrap(), 2.5);
        assert_eq!(out[1].get_i32("total").unwrap(), 3);
    }
}
