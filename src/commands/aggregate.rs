//! `aggregate`, first cut: `$match`, `$sort`, `$skip`, `$limit`, `$project`, `$count`,
//! `$group` (accumulators `$sum`, `$avg`, `$min`, `$max`, `$first`, `$last`, `$push`), with
//! expressions limited to field paths and constants. Unknown stages answer MongoDB's error.
//! The full expression language belongs to the query-language work.

use std::collections::VecDeque;
use std::sync::Arc;

use bson::raw::CStr;
use bson::{RawArrayBuf, RawBson, RawBsonRef, RawDocument, RawDocumentBuf};

use super::args::{collection_name, field, opt_doc, wrong_type};
use super::read::{collect, first_batch};
use crate::catalog::validate_namespace;
use crate::cursor::Source;
use crate::dispatch::Request;
use crate::error::{CommandError, CommandResult, ErrorCode};
use crate::query::Collation;
use crate::query::compare::compare_collated;
use crate::query::filter::Filter;
use crate::query::path;
use crate::query::projection::Projection;
use crate::query::sort::SortSpec;

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
    id: Expr,
    fields: Vec<(String, Acc, Expr)>,
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

/// An aggregation expression: a field path (`"$a.b"`), a constant, or a document of them.
enum Expr {
    Path(Vec<String>),
    Const(RawBson),
    Doc(Vec<(String, Expr)>),
}

fn bad_stage(msg: impl Into<String>) -> CommandError {
    CommandError::new(ErrorCode::Location(40323), msg)
}

impl Expr {
    fn parse(v: RawBsonRef<'_>) -> CommandResult<Expr> {
        match v {
            RawBsonRef::String(s) if s.starts_with("$$") => Err(CommandError::new(
                ErrorCode::NotImplemented,
                format!("aggregation variables ({s}) are not supported by Ebb yet"),
            )),
            RawBsonRef::String(s) if s.starts_with('$') => {
                Ok(Expr::Path(s[1..].split('.').map(str::to_owned).collect()))
            }
            RawBsonRef::Document(d) => {
                let mut fields = Vec::new();
                for elem in d {
                    let (k, v) =
                        elem.map_err(|e| CommandError::new(ErrorCode::InvalidBSON, e.to_string()))?;
                    if k.as_str() == "$literal" {
                        return Ok(Expr::Const(RawBson::from(v)));
                    }
                    if k.as_str().starts_with('$') {
                        return Err(CommandError::new(
                            ErrorCode::NotImplemented,
                            format!(
                                "expression operator {} is not supported by Ebb yet",
                                k.as_str()
                            ),
                        ));
                    }
                    fields.push((k.as_str().to_owned(), Expr::parse(v)?));
                }
                Ok(Expr::Doc(fields))
            }
            other => Ok(Expr::Const(RawBson::from(other))),
        }
    }

    /// The value, or `None` when a path is missing.
    fn eval(&self, doc: &RawDocument) -> Option<RawBson> {
        match self {
            Expr::Path(parts) => path::lookup(doc, parts).map(RawBson::from),
            Expr::Const(v) => Some(v.clone()),
            Expr::Doc(fields) => {
                let mut out = RawDocumentBuf::new();
                for (k, e) in fields {
                    if let (Some(v), Ok(key)) = (e.eval(doc), <&CStr>::try_from(k.as_str())) {
                        out.append(key, v);
                    }
                }
                Some(RawBson::Document(out))
            }
        }
    }
}

fn parse_group(spec: &RawDocument) -> CommandResult<Group> {
    let mut id = None;
    let mut fields = Vec::new();
    for elem in spec {
        let (k, v) = elem.map_err(|e| CommandError::new(ErrorCode::InvalidBSON, e.to_string()))?;
        if k.as_str() == "_id" {
            id = Some(Expr::parse(v)?);
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
        fields.push((k.as_str().to_owned(), acc, Expr::parse(arg)?));
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

fn parse_pipeline(req: &Request<'_>) -> CommandResult<Vec<Stage>> {
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
            "$match" => Stage::Match(Filter::compile_with(
                doc_arg("match filter")?,
                crate::query::FilterContext::Pipeline,
            )?),
            "$sort" => Stage::Sort(SortSpec::compile_for_pipeline(doc_arg("$sort key")?)?),
            "$skip" => Stage::Skip(count_arg("$skip", arg)?),
            "$limit" => Stage::Limit(count_arg("$limit", arg)?),
            "$project" => Stage::Project(Projection::compile_for_pipeline(doc_arg("$project")?)?),
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
            "$group" => Stage::Group(parse_group(doc_arg("$group")?)?),
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
fn run_group(group: &Group, docs: &[RawDocumentBuf]) -> Vec<RawDocumentBuf> {
    let mut groups: Vec<GroupState> = Vec::new();
    let mut index: std::collections::HashMap<Vec<u8>, usize> = std::collections::HashMap::new();
    for doc in docs {
        let key = group.id.eval(doc).unwrap_or(RawBson::Null);
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
            let v = expr.eval(doc);
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
    groups
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
        .collect()
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
                run_group(g, &plain).into_iter().map(computed).collect()
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
    let collation = super::read::collation_option(req)?;
    let mut stages = collate(parse_pipeline(req)?, collation.as_ref());
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
        let out = run_group(&parse_group(&spec).unwrap(), &docs);
        assert_eq!(out.len(), 2);
        assert_eq!(out[0].get_str("_id").unwrap(), "a");
        assert_eq!(out[0].get_f64("total").unwrap(), 3.5);
        assert_eq!(out[0].get_i32("n").unwrap(), 2);
        assert_eq!(out[0].get_f64("avg").unwrap(), 1.75);
        assert_eq!(out[0].get_f64("max").unwrap(), 2.5);
        assert_eq!(out[1].get_i32("total").unwrap(), 3);
    }
}
