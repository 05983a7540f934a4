//! The write commands: `insert`, `update`, `delete`, `findAndModify`.
//!
//! Each statement runs under its collection's write lock, from the `_id` checks to the commit,
//! so checks and writes of concurrent clients cannot interleave. Documents are stored as the
//! raw bytes received (with `_id` generated and placed first when needed).
//!
//! What lives where:
//! - here: what the commands share: the statements of a command and its `ordered` flag, the
//!   per-statement write errors, and the reply that reports them;
//! - [`storable`]: the checks a document passes before it is stored, and its `_id` placed
//!   first (generated when missing);
//! - [`writer`]: the [`Writer`], which builds the batch of one collection's changes: `_id`
//!   checks, record puts and deletes, expiry entries, index entry changes and unique index
//!   checks, and the reads that find the documents a statement matches;
//! - [`batch`]: running a writer under the collection's lock ([`with_writer`]), and the
//!   statements of an `update` or `delete` in turns (`run_batch`);
//! - [`insert`](mod@insert), [`update`](mod@update) (with upserts, and `apply_update`, which
//!   `findAndModify` shares), [`delete`](mod@delete), [`find_and_modify`](mod@find_and_modify):
//!   the commands;
//! - [`stages`]: the hooks through which the aggregation stages `$out` and `$merge` write.

mod batch;
mod delete;
mod find_and_modify;
mod insert;
mod stages;
mod storable;
mod update;
mod writer;

use bson::raw::cstr;
use bson::{RawArrayBuf, RawBsonRef, RawDocument, RawDocumentBuf, rawdoc};

use super::args::{field, opt_bool, wrong_type};
use crate::catalog::Collection;
use crate::dispatch::Request;
use crate::error::{CommandError, CommandResult, ErrorCode};

pub(crate) use batch::with_writer;
pub(super) use delete::delete;
pub(super) use find_and_modify::find_and_modify;
pub(super) use insert::insert;
pub(crate) use stages::{duplicate_key, prepare_insert};
pub(super) use update::update;
pub(crate) use writer::Writer;

/// `maxWriteBatchSize`.
const MAX_WRITE_BATCH: usize = 100_000;

/// A failed write of one document: the error, and `keyPattern` and `keyValue` of a duplicate
/// key.
type Fail = (CommandError, Option<(RawDocumentBuf, RawDocumentBuf)>);

/// A per-statement failure, reported in `writeErrors`.
struct WriteError {
    index: usize,
    error: CommandError,
    /// `keyPattern` and `keyValue` of a duplicate key.
    dup: Option<(RawDocumentBuf, RawDocumentBuf)>,
}

impl WriteError {
    fn to_document(&self) -> RawDocumentBuf {
        let mut d = rawdoc! {
            "index": i32::try_from(self.index).unwrap_or(i32::MAX),
            "code": self.error.code.code(),
        };
        if let Some((pattern, value)) = &self.dup {
            d.append(cstr!("keyPattern"), pattern.clone());
            d.append(cstr!("keyValue"), value.clone());
        }
        d.append(cstr!("errmsg"), self.error.errmsg.as_str());
        d
    }
}

fn dup_key_error(
    collection: &Collection,
    id: RawBsonRef<'_>,
) -> (CommandError, Option<(RawDocumentBuf, RawDocumentBuf)>) {
    let mut value = RawDocumentBuf::new();
    value.append(cstr!("_id"), id);
    let shown = format!("{{ {} }}", crate::query::display::element("_id", id));
    (
        CommandError::new(
            ErrorCode::DuplicateKey,
            format!(
                "E11000 duplicate key error collection: {} index: _id_ dup key: {shown}",
                collection.namespace()
            ),
        ),
        Some((rawdoc! { "_id": 1 }, value)),
    )
}

/// The documents of a write command: the kind-1 sequence `name`, or the body's array.
fn statements<'a>(req: &Request<'a>, name: &str) -> CommandResult<Vec<&'a RawDocument>> {
    let from_sequence = req.sequences.iter().find(|s| s.identifier == name);
    let from_body = field(req, name)?;
    let docs: Vec<&RawDocument> = match (from_sequence, from_body) {
        (Some(_), Some(_)) => {
            return Err(CommandError::new(
                ErrorCode::Location(40433),
                format!("Duplicate field between body and document sequence {name}"),
            ));
        }
        (Some(seq), None) => seq.documents.iter().map(AsRef::as_ref).collect(),
        (None, Some(RawBsonRef::Array(items))) => {
            let mut out = Vec::new();
            for (i, item) in items.into_iter().enumerate() {
                match item.map_err(|e| CommandError::new(ErrorCode::InvalidBSON, e.to_string()))? {
                    RawBsonRef::Document(d) => out.push(d),
                    other => {
                        return Err(wrong_type(
                            &format!("{}.{name}.{i}", req.name),
                            other,
                            " 'object'",
                        ));
                    }
                }
            }
            out
        }
        (None, Some(other)) => {
            return Err(wrong_type(
                &format!("{}.{name}", req.name),
                other,
                " 'array'",
            ));
        }
        (None, None) => {
            return Err(CommandError::missing_field(&format!("{}.{name}", req.name)));
        }
    };
    // `stmtIds` (array<int>) and `stmtId` (int) of WriteCommandRequestBase: their types are
    // checked when the command is parsed, their agreement with the batch after its size
    // (`checkOpCountForCommand` in mongod's write_ops.cpp).
    let stmt_ids = match field(req, "stmtIds")? {
        None => None,
        Some(v @ RawBsonRef::Array(items)) => {
            for (i, item) in items.into_iter().enumerate() {
                match item.map_err(|e| CommandError::new(ErrorCode::InvalidBSON, e.to_string()))? {
                    RawBsonRef::Int32(_) => {}
                    other => {
                        return Err(wrong_type(
                            &format!("{}.stmtIds.{i}", req.name),
                            other,
                            " 'int'",
                        ));
                    }
                }
            }
            Some((v, items.into_iter().count()))
        }
        Some(other) => {
            return Err(wrong_type(
                &format!("{}.stmtIds", req.name),
                other,
                " 'array'",
            ));
        }
    };
    let stmt_id = match field(req, "stmtId")? {
        None => None,
        Some(v @ RawBsonRef::Int32(_)) => Some(v),
        Some(other) => {
            return Err(wrong_type(&format!("{}.stmtId", req.name), other, " 'int'"));
        }
    };
    if docs.is_empty() || docs.len() > MAX_WRITE_BATCH {
        return Err(CommandError::new(
            ErrorCode::InvalidLength,
            format!(
                "Write batch sizes must be between 1 and {MAX_WRITE_BATCH}. Got {} operations.",
                docs.len()
            ),
        ));
    }
    if let Some((ids, count)) = stmt_ids {
        let shown_ids = crate::query::display::element("stmtIds", ids);
        let command = crate::query::display::value(RawBsonRef::Document(req.body));
        if count != docs.len() {
            return Err(CommandError::new(
                ErrorCode::InvalidLength,
                format!(
                    "Number of statement ids must match the number of batch entries. Got {count} \
                     statement ids but {} operations. Statement ids: {{ {shown_ids} }}. Write \
                     command: {command}",
                    docs.len()
                ),
            ));
        }
        if let Some(id) = stmt_id {
            return Err(CommandError::new(
                ErrorCode::InvalidOptions,
                format!(
                    "May not specify both stmtId and stmtIds in write command. Got {{ {}, \
                     {shown_ids} }}. Write command: {command}",
                    crate::query::display::element("stmtId", id)
                ),
            ));
        }
    }
    Ok(docs)
}

/// The write errors of statements that did not compile, for when nothing else ran.
fn compile_errors<T>(parsed: Vec<CommandResult<T>>, ordered: bool) -> Vec<WriteError> {
    parsed
        .into_iter()
        .enumerate()
        .filter_map(|(index, p)| {
            p.err().map(|error| WriteError {
                index,
                error,
                dup: None,
            })
        })
        .take(if ordered { 1 } else { usize::MAX })
        .collect()
}

/// The write errors when the collection could not be created because another database's name
/// differs from this one's only in case (`creation`): mongod creates the collection for the
/// statements that need it, each in turn, so each of those fails with that error, and the
/// others with their own (`own[i]`: `Err` for a statement's own error, `Ok(true)` for one that
/// needs the collection, `Ok(false)` for one that does not). Only the first error when ordered.
fn creation_errors(
    own: impl Iterator<Item = CommandResult<bool>>,
    creation: &CommandError,
    ordered: bool,
) -> Vec<WriteError> {
    let mut errors = Vec::new();
    for (index, outcome) in own.enumerate() {
        let error = match outcome {
            Ok(false) => continue,
            Ok(true) => creation.clone(),
            Err(e) => e,
        };
        errors.push(WriteError {
            index,
            error,
            dup: None,
        });
        if ordered {
            break;
        }
    }
    errors
}

fn ordered(req: &Request<'_>) -> CommandResult<bool> {
    Ok(opt_bool(req, "ordered")?.unwrap_or(true))
}

/// The session a retryable write holds, if the command is one: `lsid` and `txnNumber`, not
/// in a transaction (the generic checks let `txnNumber` through only on a replica set member,
/// and only for the retryable write commands or in a transaction). Held until the command
/// ends.
async fn retryable(
    req: &Request<'_>,
    state: &crate::state::ServerState,
) -> CommandResult<Option<crate::retryable::Checkout>> {
    let Ok(Some(RawBsonRef::Int64(txn))) = req.body.get("txnNumber") else {
        return Ok(None);
    };
    // A statement of a multi-document transaction: its session is held by the transaction
    // (`super::transactions::run_in`), and what it writes commits with it.
    if crate::txn::active().is_some() {
        return Ok(None);
    }
    // A Cosmos DB account without the retryable-writes capability refuses them.
    if state.cosmos.is_some() {
        return Err(crate::cosmos::identity::retryable_writes_refused());
    }
    let Some(lsid) = super::read::lsid_of(req) else {
        return Ok(None);
    };
    let catalog = std::sync::Arc::clone(&state.catalog);
    state
        .retryable
        .checkout(
            || catalog.snapshot(),
            lsid,
            txn,
            crate::retryable::StmtIds::of(req.body),
        )
        .await
        .map(Some)
}

/// The `onPrimaryTransactionalWrite` fail point (test commands only) at a retryable write's
/// statement about to run: it may ask to close the connection (the statement still runs and
/// commits), or fail the statement before its commit (here: before it runs, which no client
/// can tell apart).
fn transactional_write_point(state: &crate::state::ServerState) -> CommandResult<()> {
    let Some(point) = state.failpoints.on_transactional_write() else {
        return Ok(());
    };
    if point.close {
        crate::failpoint::close_after();
    }
    match point.fail_code {
        Some(code) if code != 0 => Err(CommandError::new(
            ErrorCode::Location(code),
            "Failing write for test due to failBeforeCommitExceptionCode",
        )),
        _ => Ok(()),
    }
}

/// mongod's refusal of a statement that changes many documents in a retryable write.
fn not_retryable(what: &str) -> CommandError {
    CommandError::new(
        ErrorCode::InvalidOptions,
        format!("Cannot use (or request) retryable writes with {what}"),
    )
}

fn write_reply(
    n: i64,
    extra: Option<(i64, RawArrayBuf)>,
    errors: &[WriteError],
    retried: &[i32],
) -> RawDocumentBuf {
    let mut reply = rawdoc! { "n": i32::try_from(n).unwrap_or(i32::MAX) };
    if let Some((modified, upserted)) = extra {
        reply.append(
            cstr!("nModified"),
            i32::try_from(modified).unwrap_or(i32::MAX),
        );
        if !upserted.is_empty() {
            reply.append(cstr!("upserted"), upserted);
        }
    }
    if !errors.is_empty() {
        let mut list = RawArrayBuf::new();
        for e in errors {
            list.push(e.to_document());
        }
        reply.append(cstr!("writeErrors"), list);
    }
    if !retried.is_empty() {
        let mut list = RawArrayBuf::new();
        for id in retried {
            list.push(*id);
        }
        reply.append(cstr!("retriedStmtIds"), list);
    }
    reply.append(cstr!("ok"), 1.0);
    reply
}

fn with_dup_info(
    error: CommandError,
    dup: Option<(RawDocumentBuf, RawDocumentBuf)>,
) -> CommandError {
    match dup {
        Some((pattern, value)) => {
            error.with_info(rawdoc! { "keyPattern": pattern, "keyValue": value })
        }
        None => error,
    }
}

/// The reply of a write command none of whose statements ran, each refused with `error` (the
/// first alone when `ordered`, as an ordered batch stops there): `{n: 0, nModified: 0 (for
/// updates), writeErrors, ok: 1}`.
pub fn every_statement_refused(
    error: &CommandError,
    statements: usize,
    ordered: bool,
    updates: bool,
) -> RawDocumentBuf {
    let mut errors = RawArrayBuf::new();
    for index in 0..if ordered { 1 } else { statements } {
        errors.push(rawdoc! {
            "index": i32::try_from(index).unwrap_or(i32::MAX),
            "code": error.code.code(),
            "errmsg": error.errmsg.as_str(),
        });
    }
    let mut reply = rawdoc! { "n": 0 };
    if updates {
        reply.append(cstr!("nModified"), 0);
    }
    reply.append(cstr!("writeErrors"), errors);
    reply.append(cstr!("ok"), 1.0);
    reply
}
