//! One module per stage, and the parser that picks the module by the stage's name.

mod bucket;
mod bucket_auto;
mod coll_stats;
mod count;
mod densify;
mod facet;
mod fill;
mod granularity;
mod graph_lookup;
mod group;
mod limit_skip;
mod lookup;
mod match_;
mod project;
mod redact;
mod reshape;
mod sample;
mod sort;
mod sort_by_count;
mod union_with;
mod unwind;
mod window;

use std::sync::Arc;

use bson::{RawBsonRef, RawDocument};

use super::{Kind, Stage, Stages};
use crate::error::{CommandError, CommandResult, ErrorCode};
use crate::query::Variables;

pub use self::coll_stats::CollStatsSpec;
pub use self::group::Group;
pub(crate) use self::group::collation_key;

/// A malformed stage document (40323).
fn bad_stage(msg: impl Into<String>) -> CommandError {
    CommandError::new(ErrorCode::Location(40323), msg)
}

/// The stage's argument as an object, or mongod's 15959.
pub(crate) fn doc_arg<'a>(arg: RawBsonRef<'a>, what: &str) -> CommandResult<&'a RawDocument> {
    match arg {
        RawBsonRef::Document(d) => Ok(d),
        _ => Err(CommandError::new(
            ErrorCode::Location(15959),
            format!("the {what} specification must be an object"),
        )),
    }
}

/// The one field of a stage document: its name and argument.
pub fn stage_name_arg(stage: &RawDocument) -> CommandResult<(&str, RawBsonRef<'_>)> {
    let mut it = stage.iter();
    let (Some(Ok((name, arg))), None) = (it.next(), it.next()) else {
        return Err(bad_stage(
            "A pipeline stage specification object must contain exactly one field.",
        ));
    };
    Ok((name.as_str(), arg))
}

/// Parses one stage the pipeline layer runs; an unknown name answers mongod's 40324.
pub fn parse_stage(stage: &RawDocument, vars: &Arc<Variables>) -> CommandResult<Box<dyn Stage>> {
    let (name, arg) = stage_name_arg(stage)?;
    Ok(match name {
        "$match" => Box::new(match_::Match::parse(arg, vars)?),
        "$sort" => Box::new(sort::Sort::parse(arg)?),
        "$skip" => Box::new(limit_skip::Skip::parse(arg)?),
        "$limit" => Box::new(limit_skip::Limit::parse(arg)?),
        "$project" => Box::new(project::Project::parse(arg, vars)?),
        "$count" => Box::new(count::Count::parse(arg)?),
        "$group" => Box::new(group::Group::parse(doc_arg(arg, "$group")?, vars)?),
        "$unwind" => Box::new(unwind::Unwind::parse(arg)?),
        "$sortByCount" => Box::new(sort_by_count::SortByCount::parse(arg, vars)?),
        "$bucket" => Box::new(bucket::Bucket::parse(arg, vars)?),
        "$bucketAuto" => Box::new(bucket_auto::BucketAuto::parse(arg, vars)?),
        "$facet" => Box::new(facet::Facet::parse(arg, vars)?),
        "$sample" => Box::new(sample::Sample::parse(arg)?),
        "$redact" => Box::new(redact::Redact::parse(arg, vars)?),
        "$lookup" => Box::new(lookup::Lookup::parse(arg, vars)?),
        "$graphLookup" => Box::new(graph_lookup::GraphLookup::parse(arg, vars)?),
        "$densify" => Box::new(densify::Densify::parse(arg, vars)?),
        "$fill" => Box::new(fill::Fill::parse(arg, vars)?),
        "$unionWith" => Box::new(union_with::UnionWith::parse(arg, vars)?),
        "$setWindowFields" => Box::new(window::SetWindowFields::parse(arg, vars)?),
        "$collStats" => Box::new(coll_stats::CollStats::parse(arg)?),
        "$indexStats" => Box::new(coll_stats::IndexStats::parse(arg)?),
        "$geoNear" => Box::new(coll_stats::GeoNear::parse(arg)?),
        "$search" | "$searchMeta" | "$vectorSearch" => {
            return Err(coll_stats::search_not_enabled());
        }
        "$set" | "$addFields" | "$unset" | "$replaceRoot" | "$replaceWith" => {
            Box::new(reshape::Reshape::parse(stage, vars)?)
        }
        other => {
            return Err(CommandError::new(
                ErrorCode::Location(40324),
                format!("Unrecognized pipeline stage name: '{other}'"),
            ));
        }
    })
}

/// Parses a whole pipeline the pipeline layer runs (each element a stage document).
pub fn parse_pipeline(stages: &[&RawDocument], vars: &Arc<Variables>) -> CommandResult<Stages> {
    // Checked before parsing, as mongod does, so a huge pipeline is not parsed at all.
    check_length(stages.len())?;
    stages.iter().map(|s| parse_stage(s, vars)).collect()
}

/// mongod's refusal (`Location7749501`) of a pipeline of `len` stages, past
/// [`MAX_PIPELINE_LENGTH`].
pub(crate) fn check_length(len: usize) -> CommandResult<()> {
    if len > MAX_PIPELINE_LENGTH {
        return Err(CommandError::new(
            ErrorCode::Location(7_749_501),
            format!("Pipeline length must be no longer than {MAX_PIPELINE_LENGTH} stages."),
        ));
    }
    Ok(())
}

/// mongod's `internalPipelineLengthLimit`: the most stages a pipeline (or a sub-pipeline of
/// `$facet`, `$lookup`, `$unionWith`) may have.
pub const MAX_PIPELINE_LENGTH: usize = 1000;

/// mongod's `internalMaxSubPipelineViewDepth`: how deep sub-pipelines (`$lookup`,
/// `$unionWith`) and the views they read may nest.
pub const MAX_SUB_PIPELINE_DEPTH: usize = 20;

/// mongod's error past [`MAX_SUB_PIPELINE_DEPTH`].
pub fn sub_pipeline_too_deep() -> CommandError {
    CommandError::new(
        ErrorCode::MaxSubPipelineDepthExceeded,
        format!(
            "Maximum number of nested sub-pipelines exceeded. Limit is {MAX_SUB_PIPELINE_DEPTH}"
        ),
    )
}

thread_local! {
    /// How many sub-pipelines enclose the one being parsed on this thread (parsing is
    /// synchronous and recursive).
    static SUB_PIPELINE_DEPTH: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Parses a stage's sub-pipeline (`$lookup`, `$unionWith`), one level deeper: past
/// [`MAX_SUB_PIPELINE_DEPTH`] levels, mongod's `MaxSubPipelineDepthExceeded` (232), so that no
/// input nests the parser (and the run) deeper than that.
pub(crate) fn parse_sub_pipeline(
    stages: &[&RawDocument],
    vars: &Arc<Variables>,
) -> CommandResult<Stages> {
    let depth = SUB_PIPELINE_DEPTH.get();
    if depth >= MAX_SUB_PIPELINE_DEPTH {
        return Err(sub_pipeline_too_deep());
    }
    SUB_PIPELINE_DEPTH.set(depth + 1);
    let parsed = parse_pipeline(stages, vars);
    SUB_PIPELINE_DEPTH.set(depth);
    let parsed = parsed?;
    // A stage reading the server's state about its collection would be answered about the
    // command's collection, not the sub-pipeline's: refused rather than wrong.
    for (i, stage) in parsed.iter().enumerate() {
        if stage.initial_source() {
            let name = stages
                .get(i)
                .and_then(|s| stage_name_arg(s).ok())
                .map_or("", |(n, _)| n);
            return Err(CommandError::new(
                ErrorCode::NotImplemented,
                format!("Ebb does not run {name} inside a $lookup or $unionWith sub-pipeline"),
            ));
        }
    }
    Ok(parsed)
}

/// Prepares parsed stages to run: a `$sort` right before a `$limit` keeps only that many
/// documents (mongod coalesces them into a top-k sort).
pub fn coalesce(mut stages: Stages) -> Stages {
    for i in 0..stages.len().saturating_sub(1) {
        let keep = match (stages[i].kind(), stages[i + 1].kind()) {
            (Kind::Sort(spec), Kind::Limit(n)) => Some(sort::Sort::new(spec.clone(), Some(n))),
            _ => None,
        };
        if let Some(top_k) = keep {
            stages[i] = Box::new(top_k);
        }
    }
    stages
}

#[cfg(test)]
pub(crate) mod tests;
