//! The `delete` command: its statements parsed, then run in turns.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use bson::{RawBsonRef, RawDocument};

use super::super::args::{WriteConcern, collection_name, variables, wrong_type};
use super::batch::{BatchTarget, run_batch};
use super::{compile_errors, not_retryable, ordered, retryable, statements, write_reply};
use crate::catalog::validate_writable;
use crate::dispatch::Request;
use crate::error::{CommandError, CommandResult, ErrorCode};
use crate::query::Collation;
use crate::query::Variables;
use crate::query::filter::{Filter, FilterContext};
use crate::query::plan::Hint;
use crate::state::ServerState;

struct DeleteStatement {
    filter: Filter,
    limit_one: bool,
    hint: Option<Hint>,
}

fn parse_delete_statement(
    stmt: &RawDocument,
    vars: &Arc<Variables>,
) -> CommandResult<CommandResult<DeleteStatement>> {
    let mut q = None;
    let mut limit = None;
    let mut collation = None;
    let mut hint = None;
    for elem in stmt {
        let (k, v) = elem.map_err(|e| CommandError::new(ErrorCode::InvalidBSON, e.to_string()))?;
        match (k.as_str(), v) {
            ("q", RawBsonRef::Document(d)) => q = Some(d),
            ("q", other) => return Err(wrong_type("delete.deletes.q", other, " 'object'")),
            ("limit", RawBsonRef::Int32(n)) => limit = Some(i64::from(n)),
            ("limit", RawBsonRef::Int64(n)) => limit = Some(n),
            #[expect(clippy::cast_possible_truncation, reason = "compared exactly below")]
            ("limit", RawBsonRef::Double(d)) => {
                limit = Some(if d.fract() == 0.0 { d as i64 } else { -1 });
            }
            ("limit", other) => {
                return Err(wrong_type(
                    "delete.deletes.limit",
                    other,
                    "s '[long, int, decimal, double]'",
                ));
            }
            ("collation", RawBsonRef::Document(d)) => collation = Some(d),
            ("collation", other) => {
                return Err(wrong_type("delete.deletes.collation", other, " 'object'"));
            }
            ("hint", h) => hint = Hint::parse(h, "delete.deletes.hint")?,
            (other, _) => {
                return Err(CommandError::unknown_field(&format!(
                    "delete.deletes.{other}"
                )));
            }
        }
    }
    let q = q.ok_or_else(|| CommandError::missing_field("delete.deletes.q"))?;
    let limit = limit.ok_or_else(|| CommandError::missing_field("delete.deletes.limit"))?;
    if limit != 0 && limit != 1 {
        return Err(CommandError::new(
            ErrorCode::FailedToParse,
            format!("The limit field in delete objects must be 0 or 1. Got {limit}"),
        ));
    }
    // As for updates, a filter (or collation) that does not compile fails only its statement.
    Ok((|| {
        let collation = collation.map(Collation::parse).transpose()?.flatten();
        Ok(DeleteStatement {
            filter: Filter::compile_in(q, FilterContext::Query, vars)?
                .with_collation(collation.map(Arc::new)),
            limit_one: limit == 1,
            hint,
        })
    })())
}

pub(in crate::commands) async fn delete(req: &Request<'_>, state: &ServerState) -> CommandResult {
    let name = collection_name(req)?;
    validate_writable(req.db, name)?;
    super::super::oplog_collection::refuse_write(state, req.db, name)?;
    let raw = statements(req, "deletes")?;
    let ordered = ordered(req)?;
    let concern = WriteConcern::parse(req)?;
    let vars = variables(req, state.now_ms())?;
    let retryable_write =
        req.body.get("txnNumber").ok().flatten().is_some() && crate::txn::active().is_none();
    let parsed = raw
        .iter()
        .map(|s| {
            parse_delete_statement(s, &vars).map(|s| match s {
                // A retryable write changes one document a statement (mongod refuses the
                // statement, in `writeErrors`).
                Ok(s) if retryable_write && !s.limit_one => Err(not_retryable("limit=0")),
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
    let mut retry = retryable(req, state).await?;
    let mut retried = Vec::new();
    let indexed: Vec<_> = parsed.iter().enumerate().collect();
    let result = run_batch(
        state,
        target,
        &indexed,
        |_| false,
        |w, (i, stmt)| {
            let stmt_id = retry.as_ref().map(|c| c.stmt_id(*i));
            if let Some((c, id)) = retry.as_ref().zip(stmt_id)
                && let Some(done) = c.executed(id)
            {
                retried.push(id);
                return Ok(usize::try_from(done.get_i32("n").unwrap_or(0)).unwrap_or(0));
            }
            let stmt = stmt.as_ref().map_err(|e| (e.clone(), None))?;
            if retry.is_some() {
                super::transactional_write_point(state).map_err(|e| (e, None))?;
            }
            let found = w
                .matching(
                    &stmt.filter,
                    stmt.limit_one.then_some(1),
                    stmt.hint.as_ref(),
                )
                .map_err(|e| (e, None))?;
            for f in &found {
                w.delete(f)?;
            }
            if let Some((c, id)) = retry.as_mut().zip(stmt_id) {
                let n = i32::try_from(found.len()).unwrap_or(i32::MAX);
                c.record(&mut w.batch, id, bson::rawdoc! { "n": n });
            }
            Ok(found.len())
        },
    )
    .await?;
    if let (Some(c), Some((done, _))) = (&mut retry, &result) {
        for (i, _) in done {
            let id = c.stmt_id(*i);
            c.confirm(id);
        }
    }
    let (n, errors) = match result {
        Some((done, errors)) => (
            done.iter()
                .map(|(_, k)| i64::try_from(*k).unwrap_or(0))
                .sum(),
            errors,
        ),
        None => (0, compile_errors(parsed, ordered)),
    };
    state
        .metrics
        .op_delete
        .fetch_add(u64::try_from(raw.len()).unwrap_or(0), Ordering::Relaxed);
    Ok(write_reply(n, None, &errors, &retried))
}
