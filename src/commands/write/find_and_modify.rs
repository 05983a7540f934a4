//! The `findAndModify` command: one document removed, or updated (or upserted) through the
//! update command's `apply_update`, and returned as it was before or after.

use bson::raw::cstr;
use bson::{RawBson, RawBsonRef, rawdoc};

use super::super::args::{
    WriteConcern, collection_name, field, opt_bool, opt_doc, variables, wrong_type,
};
use super::batch::with_writer;
use super::update::{UpdateStatement, apply_update};
use super::with_dup_info;
use crate::catalog::validate_writable;
use crate::dispatch::Request;
use crate::error::{CommandError, CommandResult, ErrorCode};
use crate::query::filter::{Filter, FilterContext};
use crate::query::projection::Projection;
use crate::query::sort::SortSpec;
use crate::query::update::Update;
use crate::state::{Metrics, ServerState};

pub(in crate::commands) async fn find_and_modify(
    req: &Request<'_>,
    state: &ServerState,
) -> CommandResult {
    let name = collection_name(req)?;
    validate_writable(req.db, name)?;
    super::super::oplog_collection::refuse_write(state, req.db, name)?;
    let vars = variables(req, state.now_ms())?;
    let query = opt_doc(req, "query")?;
    let collation = super::super::read::collation_option(req)?;
    let sort = opt_doc(req, "sort")?
        .map(|s| SortSpec::compile(s).map(|s| s.with_collation(collation.clone())))
        .transpose()?;
    let fields = opt_doc(req, "fields")?
        .map(|f| Projection::compile_in(f, &vars))
        .transpose()?;
    let remove = opt_bool(req, "remove")?.unwrap_or(false);
    let new = opt_bool(req, "new")?.unwrap_or(false);
    let upsert = opt_bool(req, "upsert")?.unwrap_or(false);
    let array_filters = match field(req, "arrayFilters")? {
        None => None,
        Some(RawBsonRef::Array(a)) => Some(a),
        Some(other) => return Err(wrong_type("findAndModify.arrayFilters", other, " 'array'")),
    };
    let update = match field(req, "update")? {
        None => None,
        Some(u @ (RawBsonRef::Document(_) | RawBsonRef::Array(_))) => Some(
            Update::compile_modification_in(u, array_filters, &vars)?
                .with_collation(collation.clone()),
        ),
        Some(other) => {
            return Err(wrong_type(
                "findAndModify.update",
                other,
                "s '[object, array]'",
            ));
        }
    };
    let parse_error = |msg: &str| Err(CommandError::new(ErrorCode::FailedToParse, msg));
    match (remove, &update) {
        (true, Some(_)) => return parse_error("Cannot specify both an update and remove=true"),
        (false, None) => return parse_error("Either an update or remove=true must be specified"),
        (true, None) if new => {
            return parse_error(
                "Cannot specify both new=true and remove=true; 'remove' always returns the deleted document",
            );
        }
        (true, None) if upsert => {
            return parse_error("Cannot specify both upsert=true and remove=true ");
        }
        _ => {}
    }
    let filter = match query {
        Some(q) => Filter::compile_in(q, FilterContext::Query, &vars)?.with_collation(collation),
        None => Filter::match_all(),
    };
    let fields_filter = filter.clone();
    let hint = super::super::read::hint_option(req, "findAndModify.hint")?;
    let concern = WriteConcern::parse(req)?;
    let mut retry = super::retryable(req, state).await?;
    let stmt_id = retry.as_ref().map_or(0, |c| c.stmt_id(0));
    let retried = retry
        .as_ref()
        .and_then(|c| c.executed(stmt_id))
        .map(|done| {
            (
                i64::from(done.get_i32("n").unwrap_or(0)),
                done.get_bool("updatedExisting").unwrap_or(false),
                done.get("upserted").ok().flatten().map(RawBson::from),
                done.get_document("value").ok().map(ToOwned::to_owned),
            )
        });
    let was_retried = retried.is_some();
    if retry.is_some() && !was_retried {
        super::transactional_write_point(state)?;
    }
    let result = if let Some(done) = retried {
        Ok(Some(Ok(done)))
    } else {
        with_writer(state, req.db, name, concern, upsert, |w| {
            // Run again from the start when it met a key a transaction holds.
            let outcome = run_once(
                w,
                remove,
                update.clone(),
                filter.clone(),
                upsert,
                sort.as_ref(),
                hint.clone(),
                new,
            );
            if let (Ok((n, updated_existing, upserted, value)), Some(c)) = (&outcome, &mut retry) {
                let mut done = rawdoc! {
                    "n": i32::try_from(*n).unwrap_or(i32::MAX),
                    "updatedExisting": *updated_existing,
                };
                if let Some(id) = upserted {
                    done.append(cstr!("upserted"), id.clone());
                }
                if let Some(v) = value {
                    done.append(cstr!("value"), v.clone());
                }
                c.record(&mut w.batch, stmt_id, done);
            }
            outcome
        })
        .await
    };
    if !was_retried && let (Some(c), Ok(Some(Ok(_)))) = (&mut retry, &result) {
        c.confirm(stmt_id);
    }
    let result = result?;
    let (n, updated_existing, upserted, value) =
        result.transpose()?.unwrap_or((0, false, None, None));
    let metric = if remove {
        &state.metrics.op_delete
    } else {
        &state.metrics.op_update
    };
    Metrics::bump(metric);
    let mut last = rawdoc! { "n": i32::try_from(n).unwrap_or(i32::MAX) };
    if !remove {
        last.append(cstr!("updatedExisting"), updated_existing);
    }
    if let Some(id) = upserted {
        last.append(cstr!("upserted"), id);
    }
    let mut reply = rawdoc! { "lastErrorObject": last };
    match value {
        Some(doc) => {
            let doc = match &fields {
                Some(p) => p.apply_with_filter(&doc, &fields_filter)?,
                None => doc,
            };
            reply.append(cstr!("value"), doc);
        }
        None => reply.append(cstr!("value"), RawBson::Null),
    }
    if was_retried {
        reply.append(cstr!("retriedStmtId"), stmt_id);
    }
    reply.append(cstr!("ok"), 1.0);
    Ok(reply)
}

/// What one `findAndModify` does: `(n, updatedExisting, upserted _id, the document to
/// answer)`.
#[expect(clippy::too_many_arguments, reason = "the command's parsed parts")]
fn run_once(
    w: &mut super::Writer<'_>,
    remove: bool,
    update: Option<crate::query::update::Update>,
    filter: Filter,
    upsert: bool,
    sort: Option<&crate::query::sort::SortSpec>,
    hint: Option<crate::query::plan::Hint>,
    new: bool,
) -> CommandResult<(i64, bool, Option<RawBson>, Option<bson::RawDocumentBuf>)> {
    if remove {
        let mut found = w.matching(
            &filter,
            if sort.is_some() { None } else { Some(1) },
            hint.as_ref(),
        )?;
        if let Some(sort) = sort {
            found.sort_by(|a, b| sort.compare(&a.doc, &b.doc));
        }
        let Some(first) = found.into_iter().next() else {
            return Ok((0, false, None, None));
        };
        w.delete(&first).map_err(|(e, dup)| with_dup_info(e, dup))?;
        return Ok((1, false, None, Some(first.doc)));
    }
    let Some(update) = update else {
        return Ok((0, false, None, None));
    };
    let stmt = UpdateStatement {
        filter,
        update,
        upsert,
        multi: false,
        hint,
    };
    let u = apply_update(w, &stmt, sort).map_err(|(e, dup)| with_dup_info(e, dup))?;
    let updated_existing = u.matched > 0;
    let value = if new { u.after } else { u.before };
    Ok((
        u.matched.max(i64::from(u.upserted.is_some())),
        updated_existing,
        u.upserted,
        value,
    ))
}
