//! The commands of a multi-document transaction: how each runs in its session's transaction
//! ([`run_in`]), `commitTransaction` and `abortTransaction`. The transaction itself is
//! `crate::txn`; the session's state (which number, open, committed or aborted) is
//! `crate::retryable`.

use std::future::Future;
use std::sync::{Arc, Mutex};

use bson::{RawBsonRef, RawDocumentBuf, rawdoc};

use super::args::WriteConcern;
use crate::dispatch::Request;
use crate::error::{CommandError, CommandResult, ErrorCode, ErrorInfo};
use crate::state::ServerState;
use crate::txn::{Active, Outcome};

/// Runs `run`, a command with `autocommit: false` (checked by the generic arguments: it has
/// an `lsid`, a `txnNumber`, and is one a transaction may run), in its session's transaction:
/// starting it (`startTransaction`) or going on with it. The session is held until it ends.
/// A command that fails aborts the transaction, as in mongod; so does a write error, which
/// in a transaction fails the command (mongod stops at the first and answers it as the
/// command's error).
pub(super) async fn run_in<F: Future<Output = CommandResult>>(
    req: &Request<'_>,
    state: &ServerState,
    run: F,
) -> CommandResult {
    let (Some(lsid), Ok(Some(RawBsonRef::Int64(number)))) =
        (super::read::lsid_of(req), req.body.get("txnNumber"))
    else {
        return Err(CommandError::internal(
            "a transaction's command without its session",
        ));
    };
    let start = matches!(
        req.body.get("startTransaction"),
        Ok(Some(RawBsonRef::Boolean(true)))
    );
    let mut checkout = state
        .retryable
        .checkout_txn(&state.catalog, lsid, number, start, req.name)
        .await?;
    if !start && req.body.get("readConcern").ok().flatten().is_some() {
        return Err(CommandError::new(
            ErrorCode::InvalidOptions,
            "Only the first command in a transaction may specify a readConcern",
        ));
    }
    let session_record = if req.name == "commitTransaction" {
        checkout.session_record()
    } else {
        crate::storage::Batch::new()
    };
    let active = Arc::new(Active {
        txn: checkout.transaction(),
        session_record: Mutex::new(session_record),
        outcome: Mutex::new(None),
        wrote: std::sync::atomic::AtomicBool::new(false),
    });
    let result = crate::txn::scope(Arc::clone(&active), run)
        .await
        .and_then(first_write_error);
    match (active.outcome(), &result) {
        // Committed, even if waiting for its write concern failed after: a retried commit
        // answers ok.
        (Some(Outcome::Committed), _) => checkout.committed(active.wrote()),
        (Some(Outcome::Aborted), _) | (None, Err(_)) => checkout.aborted(),
        (None, Ok(_)) => {}
    }
    result
}

/// A write command's reply in a transaction: its first write error as the command's error.
fn first_write_error(reply: RawDocumentBuf) -> CommandResult {
    let Ok(Some(RawBsonRef::Array(errors))) = reply.get("writeErrors") else {
        return Ok(reply);
    };
    let Some(Ok(RawBsonRef::Document(first))) = errors.into_iter().next() else {
        return Ok(reply);
    };
    let code = first.get_i32("code").unwrap_or(1);
    let errmsg = first.get_str("errmsg").unwrap_or_default();
    let mut error = CommandError::new(ErrorCode::from_code(code), errmsg);
    if let (Ok(pattern), Ok(value)) = (
        first.get_document("keyPattern"),
        first.get_document("keyValue"),
    ) {
        error.info = Some(ErrorInfo(
            rawdoc! { "keyPattern": pattern.to_owned(), "keyValue": value.to_owned() },
        ));
    }
    Err(error)
}

fn not_in_transaction(command: &str) -> CommandError {
    CommandError::new(
        ErrorCode::CommandFailed,
        format!("{command} must be run within a transaction"),
    )
}

/// `commitTransaction`: everything the transaction wrote, in one commit, then the wait its
/// write concern asks. A retry after the commit answers as the commit did.
pub(super) async fn commit(req: &Request<'_>, state: &ServerState) -> CommandResult {
    let active = crate::txn::active().ok_or_else(|| not_in_transaction("commitTransaction"))?;
    let concern = WriteConcern::parse(req)?;
    let ticket = match &active.txn {
        Some(txn) => {
            let record = std::mem::take(
                &mut *active
                    .session_record
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner),
            );
            let ticket = txn.commit(&state.catalog, record)?;
            active.set_outcome(Outcome::Committed);
            active.set_wrote(ticket.is_some());
            ticket
        }
        None => None,
    };
    concern.wait(state, ticket).await?;
    Ok(rawdoc! { "ok": 1.0 })
}

/// `abortTransaction`: what the transaction wrote is dropped, and its keys let go.
pub(super) fn abort() -> CommandResult {
    let active = crate::txn::active().ok_or_else(|| not_in_transaction("abortTransaction"))?;
    if let Some(txn) = &active.txn {
        txn.abort();
    }
    active.set_outcome(Outcome::Aborted);
    Ok(rawdoc! { "ok": 1.0 })
}
