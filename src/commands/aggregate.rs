//! `aggregate`, first cut: `$match`, `$sort`, `$skip`, `$limit`, `$project`, `$count`,
//! `$group` (accumulators `$sum`, `$avg`, `$min`, `$max`, `$first`, `$last`, `$push`), with the
//! engine's aggregation expressions ([`Expression`]), which see the command's `let` variables
//! and `$$NOW`. Unknown stages answer MongoDB's error.

use std::collections::VecDeque;
use std::sync::Arc;

use bson::raw::CStr;
use bson::{RawArrayBuf, RawBson, RawBsonRef, RawDocument, RawDocumentBuf};

use super::args::{collection_name, field, opt_doc, variables, wrong_type};
use super::read::{collect, first_batch};
use crate::catalog::validate_namespace;
use crate::cursor::Source;
use crate::dispatch::Request;
use crate::error::{CommandError, CommandResult, ErrorCode};
use crate::query::compare::compare;
use crate::query::filter::{Filter, FilterContext};
use crate::query::projection::Projection;
use crate::query::sort::SortSpec;
use crate::query::{Expression, Variables};

enum Stage {
    Match(Filter),
    Sort(SortSpec),
    Skip(usize),
    Limit(usize),
    Project(Projection),
    Count(String),
    Group(Group),
}

struct Group {
    id: Expression,
    fields: Vec<(String, Acc, Expression)>,
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
    Ok(Group { id, fields })
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

fn parse_pipeline(req: &Request<'_>, vars: &Arc<Variables>) -> CommandResult<Vec<Stage>> {
    let stages = match field(req, "pipeline")? {
        Some(RawBsonRef::Array(a)) => a,
        Some(other) => return Err(wrong_type("aggregate.pipeline", other, " 'array'")),
        None => {
            return Err(CommandError::missing_field("aggregate.pipeline"));
        }
    };
    let mut out = Vec::new();
    for stage in stages {
        let stage = stage.map_err(|e| CommandError::new(ErrorCode::InvalidBSON, e.to_string()))?;
        let RawBsonRef::Document(stage) = stage else {
            return Err(CommandError::new(
                ErrorCode::TypeMismatch,
                "Each element of the 'pipeline' array must be an object",
            ));
        };
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
        out.push(match name.as_str() {
            "$match" => Stage::Match(Filter::compile_in(
                doc_arg("match filter")?,
                FilterContext::Pipeline,
                vars,
            )?),
            "$sort" => Stage::Sort(SortSpec::compile_for_pipeline(doc_arg("$sort key")?)?),
            "$skip" => Stage::Skip(count_arg("$skip", arg)?),
            "$limit" => Stage::Limit(count_arg("$limit", arg)?),
            "$project" => Stage::Project(Projection::compile_for_pipeline_in(
                doc_arg("$project")?,
                vars,
            )?),
            "$count" => match arg {
                RawBsonRef::String(s)
                    if !s.is_empty() && !s.starts_with('$') && !s.contains('.') =>
                {
                    Stage::Count(s.to_owned())
                }
                _ => {
                    return Err(CommandError::new(
                        ErrorCode::Location(40156),
                        "the count field must be a non-empty string",
                    ));
                }
            },
            "$group" => Stage::Group(parse_group(doc_arg("$group")?, vars)?),
            other => {
                return Err(CommandError::new(
                    ErrorCode::Location(40324),
                    format!("Unrecognized pipeline stage name: '{other}'"),
                ));
            }
        });
    }
    Ok(out)
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
        let ks = crate::query::keystring::to_key(key.as_raw_bson_ref());
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
                        let ord = compare(v.as_raw_bson_ref(), current.as_raw_bson_ref());
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

/// Runs the stages over documents paired with the expiry instant of the stored document they
/// show; documents a stage computes (`$group`, `$count`) never expire.
fn run_pipeline(
    stages: &[Stage],
    mut docs: Vec<(RawDocumentBuf, i64)>,
) -> CommandResult<Vec<(RawDocumentBuf, i64)>> {
    let computed = |d: RawDocumentBuf| (d, crate::storage::record::NEVER);
    for stage in stages {
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
                super::read::sort_entries(s, &mut docs);
                docs
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
        };
    }
    Ok(docs)
}

pub(super) async fn aggregate(
    req: &Request<'_>,
    state: &crate::state::ServerState,
) -> CommandResult {
    let target = field(req, "aggregate")?;
    let name = match target {
        Some(RawBsonRef::Int32(1)) => {
            return Err(CommandError::new(
                ErrorCode::NotImplemented,
                "collection-less aggregation ({aggregate: 1}) is not supported by Ebb yet",
            ));
        }
        _ => collection_name(req)?,
    };
    validate_namespace(req.db, name)?;
    let cursor = opt_doc(req, "cursor")?;
    if field(req, "explain")?.is_some() {
        return Err(CommandError::new(
            ErrorCode::NotImplemented,
            "explain is not supported by Ebb yet",
        ));
    }
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
    let mut stages = parse_pipeline(req, &vars)?;
    let ns = format!("{}.{name}", req.db);
    let Some(collection) = state.catalog.get(req.db, name) else {
        return first_batch(
            state,
            ns,
            Source::Buffered(VecDeque::new()),
            batch_size,
            false,
            false,
        )
        .await;
    };
    // A leading $match narrows the collection scan itself.
    let leading = match stages.first() {
        Some(Stage::Match(_)) => match stages.remove(0) {
            Stage::Match(f) => Some(f),
            _ => None,
        },
        _ => None,
    };
    let docs = collect(state, collection, leading).await?;
    let out = tokio::task::spawn_blocking(move || run_pipeline(&stages, docs))
        .await
        .map_err(|e| CommandError::internal(e.to_string()))??;
    first_batch(
        state,
        ns,
        Source::Buffered(out.into()),
        batch_size,
        false,
        false,
    )
    .await
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
