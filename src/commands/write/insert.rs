//! The `insert` command.

use std::sync::atomic::Ordering;

use super::super::args::{WriteConcern, collection_name};
use super::batch::with_writer;
use super::stages::prepare_insert;
use super::storable::id_of;
use super::{WriteError, creation_errors, ordered, statements, write_reply};
use crate::catalog::validate_writable;
use crate::dispatch::Request;
use crate::error::{CommandError, CommandResult, ErrorCode};
use crate::query::keystring;
use crate::state::ServerState;

pub(in crate::commands) async fn insert(req: &Request<'_>, state: &ServerState) -> CommandResult {
    let name = collection_name(req)?;
    validate_writable(req.db, name)?;
    super::super::oplog_collection::refuse_write(state, req.db, name)?;
    let docs = statements(req, "documents")?;
    let ordered = ordered(req)?;
    let concern = WriteConcern::parse(req)?;
    let mut retry = super::retryable(req, state).await?;
    let mut retried = Vec::new();
    let mut recorded = Vec::new();
    // Statements done so far, and the write errors: kept across the writer's runs (it runs
    // again from the first statement not done when one met a key a transaction holds).
    let mut next = 0;
    let mut n = 0;
    let mut errors = Vec::new();
    let result = with_writer(state, req.db, name, concern, true, |w| {
        // Each document checked, `_id` first, with the keystring of its `_id`.
        let prepared: Vec<_> = docs
            .get(next..)
            .unwrap_or_default()
            .iter()
            .map(|doc| {
                let (doc, fresh) = prepare_insert(doc)?;
                let id_key = keystring::to_key(id_of(&doc)?);
                Ok((doc, fresh, id_key))
            })
            .collect::<Vec<CommandResult<_>>>();
        // The `_id`s given by the client may already be stored: look them all up at once.
        w.probe(prepared.iter().filter_map(|p| match p {
            Ok((_, false, id_key)) => Some(id_key.as_slice()),
            _ => None,
        }));
        w.reserve_records(
            prepared.len(),
            prepared
                .iter()
                .filter_map(|p| p.as_ref().ok())
                .map(|(d, _, _)| d.as_bytes().len())
                .sum(),
        );
        let first = next;
        for (offset, outcome) in prepared.into_iter().enumerate() {
            let index = first + offset;
            // Shutdown stops the batch between documents; those before it are committed.
            state.check_interrupt()?;
            let stmt_id = retry.as_ref().map(|c| c.stmt_id(index));
            if let Some((c, id)) = retry.as_ref().zip(stmt_id)
                && c.executed(id).is_some()
            {
                // Inserted the first time this statement ran: not again.
                retried.push(id);
                n += 1;
                next = index + 1;
                continue;
            }
            let point = if retry.is_some() {
                super::transactional_write_point(state)
            } else {
                Ok(())
            };
            let outcome = point
                .and(outcome)
                .map_err(|e| (e, None))
                .and_then(|(doc, fresh, id_key)| w.insert_keyed(&doc, id_key, fresh));
            match outcome {
                Ok(()) => {
                    n += 1;
                    if let Some((c, id)) = retry.as_mut().zip(stmt_id) {
                        c.record(&mut w.batch, id, bson::rawdoc! {});
                        recorded.push(id);
                    }
                }
                // A transaction holds its `_id`: the documents before it are committed, and
                // the writer runs again from this one once the transaction ends.
                Err(_) if w.blocked.is_some() => return Ok(()),
                Err((error, dup)) => {
                    errors.push(WriteError { index, error, dup });
                    if ordered {
                        next = docs.len();
                        break;
                    }
                }
            }
            next = index + 1;
        }
        Ok::<_, CommandError>(())
    })
    .await;
    let (n, errors) = match result {
        Err(e) if e.code == ErrorCode::DatabaseDifferCase => {
            let own = docs.iter().map(|d| prepare_insert(d).map(|_| true));
            (0, creation_errors(own, &e, ordered))
        }
        other => {
            other?.transpose()?;
            (n, errors)
        }
    };
    // The writer committed every statement it recorded (or the command failed above).
    if let Some(c) = &mut retry {
        for id in recorded {
            c.confirm(id);
        }
    }
    state
        .metrics
        .op_insert
        .fetch_add(u64::try_from(docs.len()).unwrap_or(0), Ordering::Relaxed);
    Ok(write_reply(n, None, &errors, &retried))
}
