//! The rewrites mongod applies to a pipeline before it runs it (`Pipeline::optimizePipeline` and
//! each stage's `doOptimizeAt`), where they change the cost and not the results:
//!
//! - a `$match` moves ahead of a `$sort`, and ahead of `$project`, `$addFields`/`$set`,
//!   `$unset`, `$unwind` and `$lookup` as far as it does not read what they modify; a `$match`
//!   on an `$and` of conditions is split, the conditions that may move go, the others stay
//!   (mongod's `splitSourceBy`);
//! - adjacent `$match`es merge into one `$and`;
//! - a `$sort` takes the `$limit`s that follow it, through `$skip`s (the limit grows by what
//!   they skip) and one-to-one stages, as a top-k (`DocumentSourceSort::extractLimitForPushdown`);
//! - a `$skip` moves ahead of `$project`, `$addFields`/`$set` and `$unset`;
//! - `$skip`+`$skip` add up, `$limit`+`$limit` keep the smaller.
//!
//! The pass is pure and works on the stage documents themselves, in mongod's own serialization
//! (a top-k is `{$sort}` then `{$limit}`), so that the command layer parses the result, pushes
//! its leading `$match`/`$sort` into the planner (where an index may now serve a `$match` that
//! moved to the front) and explains it stage by stage.
//!
//! Dependencies are tracked by top-level field, which is stricter than mongod's dotted paths:
//! a `$match` on `a.b` does not move ahead of `{$set: {"a.c": …}}` (which may replace a
//! scalar `a`, or an array's scalar elements, and so change what `a.b` matches).

use bson::{RawArrayBuf, RawBson, RawBsonRef, RawDocument, RawDocumentBuf};

use std::sync::Arc;

use super::Stages;
use crate::error::CommandResult;
use crate::query::Variables;
use crate::query::plan::put;

/// The pipeline `stages` as mongod runs it after its rewrites.
pub fn optimize(stages: &[RawDocumentBuf]) -> Vec<RawDocumentBuf> {
    let mut out = stages.to_vec();
    // The work grows with the square of the length: past mongod's own bound on a pipeline's
    // length (`internalPipelineLengthLimit`), the pipeline runs as given.
    if out.len() > MAX_STAGES {
        return out;
    }
    // Every rewrite merges stages or moves a stage towards the front, so the passes end; the
    // bound is a guard.
    for _ in 0..MAX_STAGES {
        let before = out.clone();
        rewrite(&mut out);
        if out == before {
            break;
        }
    }
    out
}

/// The longest pipeline rewritten (mongod 7.0's `internalPipelineLengthLimit`).
const MAX_STAGES: usize = super::stages::MAX_PIPELINE_LENGTH;

/// Parses `stages` (answering the given pipeline's errors), then runs what the rewrites make
/// of it (the given stages should a rewritten one not parse).
pub fn parse_optimized(stages: &[RawDocumentBuf], vars: &Arc<Variables>) -> CommandResult<Stages> {
    let refs: Vec<&RawDocument> = stages.iter().map(AsRef::as_ref).collect();
    let given = super::parse_pipeline(&refs, vars)?;
    let rewritten = optimize(stages);
    if rewritten == stages {
        return Ok(given);
    }
    let refs: Vec<&RawDocument> = rewritten.iter().map(AsRef::as_ref).collect();
    Ok(super::parse_pipeline(&refs, vars).unwrap_or(given))
}

/// One pass of every rewrite over the stages, front to back.
fn rewrite(stages: &mut Vec<RawDocumentBuf>) {
    let mut i = 0;
    while i < stages.len() {
        match name(&stages[i]) {
            Some("$match") if i > 0 => {
                if let Some(moved) = move_match(&stages[i - 1], &stages[i]) {
                    stages.splice(i - 1..=i, moved);
                    // What moved (or merged) is at `i - 1` now: on towards the front.
                    i -= 1;
                    continue;
                }
            }
            Some("$sort") => absorb_limits(stages, i),
            Some("$skip")
                if i > 0
                    && matches!(
                        name(&stages[i - 1]),
                        Some("$project" | "$addFields" | "$set" | "$unset")
                    ) =>
            {
                // A one-to-one stage changes no document's position: skip before it.
                stages.swap(i - 1, i);
            }
            Some("$skip") => {
                if let (Some(a), Some(b)) =
                    (count(&stages[i], "$skip"), next_count(stages, i, "$skip"))
                    && let Some(sum) = a.checked_add(b)
                {
                    stages.splice(i..=i + 1, [stage("$skip", RawBson::Int64(sum))]);
                    continue;
                }
            }
            Some("$limit") => {
                if let (Some(a), Some(b)) =
                    (count(&stages[i], "$limit"), next_count(stages, i, "$limit"))
                {
                    stages.splice(i..=i + 1, [stage("$limit", RawBson::Int64(a.min(b)))]);
                    continue;
                }
            }
            _ => {}
        }
        i += 1;
    }
}

/// A stage document's name.
fn name(stage: &RawDocument) -> Option<&str> {
    match stage.iter().next() {
        Some(Ok((k, _))) => Some(k.as_str()),
        _ => None,
    }
}

/// A stage document's argument.
fn arg(stage: &RawDocument) -> Option<RawBsonRef<'_>> {
    match stage.iter().next() {
        Some(Ok((_, v))) => Some(v),
        _ => None,
    }
}

/// `{<name>: <value>}`.
fn stage(name: &str, value: impl Into<RawBson>) -> RawDocumentBuf {
    let mut d = RawDocumentBuf::new();
    put(&mut d, name, value);
    d
}

/// The count of a `$skip` or `$limit` stage named `want`.
fn count(stage: &RawDocument, want: &str) -> Option<i64> {
    if name(stage) != Some(want) {
        return None;
    }
    crate::query::shape::number(arg(stage)?).filter(|n| *n >= 0)
}

/// The count of stage `i + 1` when it is a `want`.
fn next_count(stages: &[RawDocumentBuf], i: usize, want: &str) -> Option<i64> {
    stages.get(i + 1).and_then(|s| count(s, want))
}

/// mongod's `extractLimitForPushdown`: the `$limit`s after the `$sort` at `i`, through `$skip`s
/// (which raise them) and one-to-one stages, leave their place and become one `$limit` right
/// after the `$sort` (which keeps only that many).
fn absorb_limits(stages: &mut Vec<RawDocumentBuf>, i: usize) {
    let mut skipped: i64 = 0;
    let mut min: Option<i64> = None;
    let mut j = i + 1;
    while let Some(s) = stages.get(j) {
        if let Some(n) = count(s, "$skip")
            && let Some(sum) = skipped.checked_add(n)
        {
            skipped = sum;
            j += 1;
        } else if let Some(n) = count(s, "$limit")
            && let Some(sum) = n.checked_add(skipped)
        {
            min = Some(min.map_or(sum, |m| m.min(sum)));
            stages.remove(j);
        } else if matches!(name(s), Some("$project" | "$addFields" | "$set" | "$unset")) {
            j += 1;
        } else {
            break;
        }
    }
    if let Some(k) = min {
        stages.insert(i + 1, stage("$limit", RawBson::Int64(k)));
    }
}

/// The top-level fields a stage may change, as mongod's `getModifiedPaths` (by top-level field).
enum Modifies {
    /// These fields (none for `$sort`).
    Fields(Vec<String>),
    /// Every field but these (an inclusion `$project`).
    AllExcept(Vec<String>),
    /// Anything: no `$match` moves ahead of the stage.
    All,
}

/// The top-level field of a dotted path.
fn top(path: &str) -> String {
    path.split('.').next().unwrap_or(path).to_owned()
}

fn modifies(stage: &RawDocument) -> Modifies {
    let (Some(name), Some(arg)) = (name(stage), arg(stage)) else {
        return Modifies::All;
    };
    match (name, arg) {
        ("$sort", _) => Modifies::Fields(Vec::new()),
        ("$addFields" | "$set", RawBsonRef::Document(spec)) => Modifies::Fields(
            spec.iter()
                .map_while(Result::ok)
                .map(|(k, _)| top(k.as_str()))
                .collect(),
        ),
        ("$unset", RawBsonRef::String(f)) => Modifies::Fields(vec![top(f)]),
        ("$unset", RawBsonRef::Array(fs)) => {
            let mut fields = Vec::new();
            for f in fs {
                match f {
                    Ok(RawBsonRef::String(f)) => fields.push(top(f)),
                    _ => return Modifies::All,
                }
            }
            Modifies::Fields(fields)
        }
        ("$project", RawBsonRef::Document(spec)) => project_modifies(spec),
        ("$unwind", RawBsonRef::String(path)) => {
            Modifies::Fields(vec![top(path.strip_prefix('$').unwrap_or(path))])
        }
        ("$unwind", RawBsonRef::Document(spec)) => {
            let mut fields = Vec::new();
            match spec.get("path") {
                Ok(Some(RawBsonRef::String(p))) => {
                    fields.push(top(p.strip_prefix('$').unwrap_or(p)));
                }
                _ => return Modifies::All,
            }
            match spec.get("includeArrayIndex") {
                Ok(None) => {}
                Ok(Some(RawBsonRef::String(p))) => fields.push(top(p)),
                _ => return Modifies::All,
            }
            Modifies::Fields(fields)
        }
        ("$lookup", RawBsonRef::Document(spec)) => match spec.get("as") {
            Ok(Some(RawBsonRef::String(p))) => Modifies::Fields(vec![top(p)]),
            _ => Modifies::All,
        },
        _ => Modifies::All,
    }
}

/// What a `$project` changes: the excluded fields of an exclusion; every field but the plainly
/// included top-level ones (and `_id` unless excluded) of an inclusion.
fn project_modifies(spec: &RawDocument) -> Modifies {
    let mut included = Vec::new();
    let mut excluded = Vec::new();
    let mut computed = false;
    let mut id_kept = true;
    for (k, v) in spec.iter().map_while(Result::ok) {
        let k = k.as_str();
        let flag = match v {
            RawBsonRef::Boolean(b) => Some(b),
            RawBsonRef::Int32(n) => Some(n != 0),
            RawBsonRef::Int64(n) => Some(n != 0),
            RawBsonRef::Double(d) => Some(d != 0.0),
            _ => None,
        };
        match flag {
            Some(true) if !k.contains('.') => included.push(k.to_owned()),
            Some(false) => {
                if k == "_id" {
                    id_kept = false;
                } else {
                    excluded.push(top(k));
                }
            }
            // A dotted inclusion or a computed field: the field changes.
            _ => {
                if k == "_id" || top(k) == "_id" {
                    id_kept = false;
                }
                computed = true;
            }
        }
    }
    if included.is_empty() && !computed {
        if !id_kept {
            excluded.push("_id".to_owned());
        }
        return Modifies::Fields(excluded);
    }
    if !excluded.is_empty() {
        // Mixed inclusion and exclusion is an error at parse time; never move across it.
        return Modifies::All;
    }
    if id_kept && !included.iter().any(|f| f == "_id") {
        included.push("_id".to_owned());
    }
    Modifies::AllExcept(included)
}

/// The top-level fields a condition of a filter reads; `None` when it may read anything.
fn condition_reads(key: &str, value: RawBsonRef<'_>, out: &mut Vec<String>) -> Option<()> {
    match key {
        "$and" | "$or" | "$nor" => {
            let RawBsonRef::Array(items) = value else {
                return None;
            };
            for item in items {
                let RawBsonRef::Document(d) = item.ok()? else {
                    return None;
                };
                for item in d {
                    let (k, v) = item.ok()?;
                    condition_reads(k.as_str(), v, out)?;
                }
            }
            Some(())
        }
        "$alwaysTrue" | "$alwaysFalse" | "$comment" => Some(()),
        "$expr" => expression_reads(value, out, 0),
        k if k.starts_with('$') => None,
        k => {
            out.push(top(k));
            Some(())
        }
    }
}

/// The top-level fields an aggregation expression reads (`"$a.b"`); `None` for `$$ROOT`,
/// `$$CURRENT` or an expression nested too deep to look at.
fn expression_reads(e: RawBsonRef<'_>, out: &mut Vec<String>, depth: usize) -> Option<()> {
    if depth > 64 {
        return None;
    }
    match e {
        RawBsonRef::String(s) if s.starts_with("$$") => {
            let var = s.trim_start_matches("$$");
            let var = var.split('.').next().unwrap_or(var);
            // Other variables ($$NOW, a `let`'s, `$map`'s `this`…) are not the document's fields;
            // the fields their values come from are read elsewhere in the expression.
            (var != "ROOT" && var != "CURRENT").then_some(())
        }
        RawBsonRef::String(s) if s.starts_with('$') => {
            out.push(top(&s[1..]));
            Some(())
        }
        RawBsonRef::Document(d) => {
            for item in d {
                let (_, v) = item.ok()?;
                expression_reads(v, out, depth + 1)?;
            }
            Some(())
        }
        RawBsonRef::Array(a) => {
            for v in a {
                expression_reads(v.ok()?, out, depth + 1)?;
            }
            Some(())
        }
        _ => Some(()),
    }
}

/// The conditions of a filter, its `$and`s flattened: each a `(key, value)`.
fn conditions(filter: &RawDocument, out: &mut Vec<(String, RawBson)>) -> Option<()> {
    for item in filter {
        let (k, v) = item.ok()?;
        if k.as_str() == "$and"
            && let RawBsonRef::Array(items) = v
            && !items.is_empty()
        {
            for d in items {
                let RawBsonRef::Document(d) = d.ok()? else {
                    return None;
                };
                conditions(d, out)?;
            }
        } else {
            out.push((k.as_str().to_owned(), RawBson::from(v)));
        }
    }
    Some(())
}

/// A filter of these conditions: one document when their keys differ, else an `$and`.
fn filter_of(conds: &[(String, RawBson)]) -> RawDocumentBuf {
    let mut keys: Vec<&str> = conds.iter().map(|(k, _)| k.as_str()).collect();
    keys.sort_unstable();
    keys.dedup();
    if keys.len() == conds.len() {
        let mut d = RawDocumentBuf::new();
        for (k, v) in conds {
            put(&mut d, k, v.clone());
        }
        return d;
    }
    let mut all = RawArrayBuf::new();
    for (k, v) in conds {
        all.push(stage(k, v.clone()));
    }
    stage("$and", all)
}

/// Whether a condition reading `fields` is unaffected by what the stage modifies.
fn independent(reads: &[String], modifies: &Modifies) -> bool {
    match modifies {
        Modifies::All => false,
        Modifies::Fields(m) => reads.iter().all(|r| !m.contains(r)),
        Modifies::AllExcept(kept) => reads.iter().all(|r| kept.contains(r)),
    }
}

/// `prev` then the `$match` `m`, rewritten: merged into one `$match` when `prev` is one too;
/// else the conditions of `m` that do not read what `prev` modifies, moved ahead of it.
/// `None` when nothing changes.
fn move_match(prev: &RawDocument, m: &RawDocument) -> Option<Vec<RawDocumentBuf>> {
    let Some(RawBsonRef::Document(filter)) = arg(m) else {
        return None;
    };
    if name(prev) == Some("$match") {
        let Some(RawBsonRef::Document(first)) = arg(prev) else {
            return None;
        };
        let mut both = RawArrayBuf::new();
        match (first.iter().count(), first.get_array("$and")) {
            (1, Ok(items)) => {
                for item in items {
                    both.push(RawBson::from(item.ok()?));
                }
            }
            _ => both.push(first.to_owned()),
        }
        both.push(filter.to_owned());
        return Some(vec![stage("$match", stage("$and", both))]);
    }
    let modified = modifies(prev);
    if matches!(modified, Modifies::All) {
        return None;
    }
    let mut conds = Vec::new();
    conditions(filter, &mut conds)?;
    let (mut moving, mut staying) = (Vec::new(), Vec::new());
    for (k, v) in conds {
        let mut reads = Vec::new();
        let movable = condition_reads(&k, v.as_raw_bson_ref(), &mut reads).is_some()
            && independent(&reads, &modified);
        if movable {
            moving.push((k, v));
        } else {
            staying.push((k, v));
        }
    }
    if moving.is_empty() {
        return None;
    }
    if staying.is_empty() {
        // The whole `$match` moves, as given.
        return Some(vec![m.to_owned(), prev.to_owned()]);
    }
    Some(vec![
        stage("$match", filter_of(&moving)),
        prev.to_owned(),
        stage("$match", filter_of(&staying)),
    ])
}

#[cfg(test)]
mod tests;
