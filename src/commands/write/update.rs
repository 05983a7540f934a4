//! The `update` command: its statements parsed, then run in turns; `apply_update` runs one
//! statement (an upsert inserts when nothing matches), for `findAndModify` too.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use bson::raw::cstr;
use bson::{RawArrayBuf, RawBson, RawBsonRef, RawDocument, RawDocumentBuf, rawdoc};

use super::super::args::{WriteConcern, collection_name, variables, wrong_type};
use super::batch::{BatchTarget, run_batch};
use super::storable::{check_storable, id_of, with_id_first};
use super::writer::Writer;
use super::{Fail, compile_errors, creation_errors, ordered, statements, write_reply};
use crate::catalog::validate_writable;
use crate::dispatch::Request;
use crate::error::{CommandError, CommandResult, ErrorCode};
use crate::query::Collation;
use crate::query::Variables;
use crate::query::filter::{Filter, FilterContext};
use crate::query::plan::Hint;
use crate::query::sort::SortSpec;
use crate::query::update::{Update, UpdateContext, upsert_seed_with};
use crate::state::ServerState;

/// One parsed `updates` entry.
pub(super) struct UpdateStatement {
    pub(super) filter: Filter,
    pub(super) update: Update,
    pub(super) upsert: bool,
    pub(super) multi: bool,
    pub(super) hint: Option<Hint>,
}

/// Parses one `updates` entry. The outer error is structural (a bad field, a missing `q`):
/// mongod fails the whole command for it. The inner one comes from compiling the filter or
/// the update, which mongod reports for that statement alone, in `writeErrors`. The filter and
/// the update see the command's variables, then the statement's constants `c`.
fn parse_update_statement(
    stmt: &RawDocument,
    vars: &Arc<Variables>,
) -> CommandResult<CommandResult<UpdateStatement>> {
    let mut q = None;
    let mut u = None;
    let mut array_filters = None;
    let mut constants = None;
    let mut collation = None;
    let (mut upsert, mut multi) = (false, false);
    let mut hint = None;
    for elem in stmt {
        let (k, v) = elem.map_err(|e| CommandError::new(ErrorCode::InvalidBSON, e.to_string()))?;
        match (k.as_str(), v) {
            ("q", RawBsonRef::Document(d)) => q = Some(d),
            ("q", other) => return Err(wrong_type("update.updates.q", other, " 'object'")),
            ("u", v @ (RawBsonRef::Document(_) | RawBsonRef::Array(_))) => u = Some(v),
            ("u", other) => {
                return Err(wrong_type("update.updates.u", other, "s '[object, array]'"));
            }
            ("upsert", v) => upsert = super::super::args::truthy("update.updates.upsert", v)?,
            ("multi", v) => multi = super::super::args::truthy("update.updates.multi", v)?,
            ("arrayFilters", RawBsonRef::Array(filters)) => {
                for (i, f) in filters.into_iter().enumerate() {
                    match f.map_err(|e| CommandError::new(ErrorCode::InvalidBSON, e.to_string()))? {
                        RawBsonRef::Document(_) => {}
                        other => {
                            return Err(wrong_type(
                                &format!("update.updates.arrayFilters.{i}"),
                                other,
                                " 'object'",
                            ));
                        }
                    }
                }
                array_filters = Some(filters);
            }
            ("arrayFilters", other) => {
                return Err(wrong_type("update.updates.arrayFilters", other, " 'array'"));
            }
            ("c", RawBsonRef::Document(d)) => constants = Some(d),
            ("c", other) => return Err(wrong_type("update.updates.c", other, " 'object'")),
            ("collation", RawBsonRef::Document(d)) => collation = Some(d),
            ("collation", other) => {
                return Err(wrong_type("update.updates.collation", other, " 'object'"));
            }
            ("hint", h) => hint = Hint::parse(h, "update.updates.hint")?,
            // (`sort` in an update statement is a MongoDB 8.0 field: 7.0 refuses it.)
            (other, _) => {
                return Err(CommandError::unknown_field(&format!(
                    "update.updates.{other}"
                )));
            }
        }
    }
    let q = q.ok_or_else(|| CommandError::missing_field("update.updates.q"))?;
    let u = u.ok_or_else(|| CommandError::missing_field("update.updates.u"))?;
    Ok((|| {
        let collation = collation
            .map(Collation::parse)
            .transpose()?
            .flatten()
            .map(Arc::new);
        let vars = match constants {
            Some(_) if !matches!(u, RawBsonRef::Array(_)) => {
                return Err(CommandError::new(
                    ErrorCode::Location(51198),
                    "Constant values may only be specified for pipeline updates",
                ));
            }
            Some(c) => Arc::new(Variables::clone(vars).with_constants(c)?),
            None => Arc::clone(vars),
        };
        let update = Update::compile_modification_in(u, array_filters, &vars)?
            .with_collation(collation.clone());
        if multi && update.is_replacement() {
            return Err(CommandError::new(
                ErrorCode::FailedToParse,
                "multi update is not supported for replacement-style update",
            ));
        }
        Ok(UpdateStatement {
            filter: Filter::compile_in(q, FilterContext::Query, &vars)?.with_collation(collation),
            update,
            upsert,
            multi,
            hint,
        })
    })())
}

/// Outcome of one update statement.
#[derive(Default)]
pub(super) struct Updated {
    pub(super) matched: i64,
    modified: i64,
    pub(super) upserted: Option<RawBson>,
    /// The document before and after, for `findAndModify`.
    pub(super) before: Option<RawDocumentBuf>,
    pub(super) after: Option<RawDocumentBuf>,
}

/// Applies one update statement through `w`. `sort` picks the first match for single updates.
pub(super) fn apply_update(
    w: &mut Writer<'_>,
    s: &UpdateStatement,
    sort: Option<&SortSpec>,
) -> Result<Updated, Fail> {
    let limit = if s.multi || sort.is_some() {
        None
    } else {
        Some(1)
    };
    let mut matches = w
        .matching(&s.filter, limit, s.hint.as_ref())
        .map_err(|e| (e, None))?;
    if let Some(sort) = sort {
        matches.sort_by(|a, b| sort.compare(&a.doc, &b.doc));
        matches.truncate(1);
    }
    let ctx = UpdateContext {
        filter: Some(&s.filter),
        ..UpdateContext::at(w.now_ms)
    };
    let mut out = Updated::default();
    if matches.is_empty() {
        if !s.upsert {
            return Ok(out);
        }
        let seed = upsert_seed_with(&s.filter.equality_fields(), &s.update, &ctx)
            .map_err(|e| (e, None))?;
        let doc = with_id_first(&seed).map_err(|e| (e, None))?;
        check_storable(&doc, true).map_err(|e| (e, None))?;
        w.insert(&doc)?;
        out.upserted = id_of(&doc).ok().map(RawBson::from);
        out.after = Some(doc);
        return Ok(out);
    }
    for found in matches {
        out.matched += 1;
        let (doc, expires_ms) = (&found.doc, found.expires_ms);
        let (changed, logged) = if w.logs() {
            match s.update.apply_logged(doc, &ctx).map_err(|e| (e, None))? {
                Some((new_doc, logged)) => (Some(new_doc), Some(logged)),
                None => (None, None),
            }
        } else {
            (s.update.apply_with(doc, &ctx).map_err(|e| (e, None))?, None)
        };
        if let Some(new_doc) = &changed {
            check_storable(new_doc, true).map_err(|e| (e, None))?;
            w.put(&found, new_doc, Some((expires_ms, Some(doc))))?;
            if let Some(logged) = &logged {
                w.log_applied(doc, new_doc, logged);
            }
            out.modified += 1;
        } else if s.update.is_replacement() {
            // A replacement is a write even when the bytes are the same: it resets the
            // modification time (and so the TTL), though MongoDB counts nothing modified.
            w.put(&found, doc, Some((expires_ms, Some(doc))))?;
        }
        out.after = Some(changed.unwrap_or_else(|| doc.clone()));
        out.before = Some(found.doc);
    }
    Ok(out)
}

pub(in crate::commands) async fn update(req: &Request<'_>, state: &ServerState) -> CommandResult {
    let name = collection_name(req)?;
    validate_writable(req.db, name)?;
    super::super::oplog_collection::refuse_write(state, req.db, name)?;
    let raw = statements(req, "updates")?;
    let ordered = ordered(req)?;
    let concern = WriteConcern::parse(req)?;
    let vars = variables(req, state.now_ms())?;
    // mongod parses every statement before running any: one bad statement fails the command.
    let retryable_write =
        req.body.get("txnNumber").ok().flatten().is_some() && crate::txn::active().is_none();
    let parsed = raw
        .iter()
        .map(|s| {
            parse_update_statement(s, &vars).map(|s| match s {
                // A retryable write changes one document a statement (mongod refuses the
                // statement, in `writeErrors`).
                Ok(s) if retryable_write && s.multi => Err(super::not_retryable("multi=true")),
                other => other,
            })
        })
        .collect::<CommandResult<Vec<_>>>()?;
    let target = BatchTarget {
        db: req.db,
        name,
        concern,
        ordered,
    };
    let mut retry = super::retryable(req, state).await?;
    let mut retried = Vec::new();
    let indexed: Vec<_> = parsed.iter().enumerate().collect();
    let result = run_batch(
        state,
        target,
        &indexed,
        |(_, s)| s.as_ref().is_ok_and(|s| s.upsert),
        |w, (i, stmt)| {
            let stmt_id = retry.as_ref().map(|c| c.stmt_id(*i));
            if let Some((c, id)) = retry.as_ref().zip(stmt_id)
                && let Some(done) = c.executed(id)
            {
                retried.push(id);
                return Ok(Updated {
                    matched: i64::from(done.get_i32("n").unwrap_or(0)),
                    modified: i64::from(done.get_i32("nModified").unwrap_or(0)),
                    upserted: done.get("upserted").ok().flatten().map(RawBson::from),
                    before: None,
                    after: None,
                });
            }
            let s = stmt.as_ref().map_err(|e| (e.clone(), None))?;
            if retry.is_some() {
                super::transactional_write_point(state).map_err(|e| (e, None))?;
            }
            let u = apply_update(w, s, None)?;
            if let Some((c, id)) = retry.as_mut().zip(stmt_id) {
                let mut done = rawdoc! {
                    "n": i32::try_from(u.matched).unwrap_or(i32::MAX),
                    "nModified": i32::try_from(u.modified).unwrap_or(i32::MAX),
                };
                if let Some(id) = &u.upserted {
                    done.append(cstr!("upserted"), id.clone());
                }
                c.record(&mut w.batch, id, done);
            }
            Ok(u)
        },
    )
    .await;
    if let (Some(c), Ok(Some((done, _)))) = (&mut retry, &result) {
        for (i, _) in done {
            let id = c.stmt_id(*i);
            c.confirm(id);
        }
    }
    let result = match result {
        Err(e) if e.code == ErrorCode::DatabaseDifferCase => {
            let own = parsed.iter().map(|s| match s {
                Ok(s) => Ok(s.upsert),
                Err(e) => Err(e.clone()),
            });
            Some((Vec::new(), creation_errors(own, &e, ordered)))
        }
        other => other?,
    };
    // No such collection and no upsert: nothing matched; statements that did not compile are
    // still reported.
    let (n, modified, upserted, errors) = match result {
        Some((done, errors)) => {
            let (mut n, mut modified) = (0, 0);
            let mut upserted = RawArrayBuf::new();
            for (index, u) in done {
                n += u.matched;
                modified += u.modified;
                if let Some(id) = u.upserted {
                    n += 1;
                    let mut entry = rawdoc! { "index": i32::try_from(index).unwrap_or(i32::MAX) };
                    entry.append(cstr!("_id"), id);
                    upserted.push(entry);
                }
            }
            (n, modified, upserted, errors)
        }
        None => (0, 0, RawArrayBuf::new(), compile_errors(parsed, ordered)),
    };
    state
        .metrics
        .op_update
        .fetch_add(u64::try_from(raw.len()).unwrap_or(0), Ordering::Relaxed);
    Ok(write_reply(
        n,
        Some((modified, upserted)),
        &errors,
        &retried,
    ))
}
