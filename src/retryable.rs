//! Retryable writes: a write command carrying `lsid` and `txnNumber` (without `autocommit`)
//! runs each of its statements at most once for that session and transaction number. A
//! statement retried (the same `stmtId`, by a driver that lost the reply) is not executed
//! again: it answers what it answered the first time.
//!
//! What each executed statement answered is stored in the `sessions` keyspace, in the commit
//! that makes its write, so the two survive a crash together:
//!
//! ```text
//! lsid (16) · 0x00                                   → the session's transaction number (i64 BE)
//! lsid (16) · 0x01 · txnNumber (i64 BE, sign flipped) · stmtId (i32 BE, sign flipped) → result (BSON)
//! ```
//!
//! A newer transaction number forgets the older one's statements: its first commit deletes
//! them and moves the session's number. An older one is refused (`TransactionTooOld`). A
//! command holds its session for its whole run (mongod's session checkout), so two commands
//! of one session never interleave. What a session holds is read from storage at its first
//! use after a start, and kept in memory after.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use bson::{RawDocument, RawDocumentBuf};

use crate::error::{CommandError, CommandResult, ErrorCode};
use crate::sessions::SessionId;
use crate::storage::{Batch, Keyspace, Snapshot};

/// What one session's retryable writes have executed.
#[derive(Debug, Default)]
struct SessionWrites {
    /// Whether it was read from storage since the server started.
    loaded: bool,
    /// The session's transaction number: the newest seen.
    txn: Option<i64>,
    /// The one stored as the session's number (older than `txn` until the first commit of a
    /// newer one).
    stored_txn: Option<i64>,
    /// Statements executed under `txn`, with what each answered.
    executed: HashMap<i32, RawDocumentBuf>,
    /// Statement ids stored under `stored_txn` when it is older than `txn`: deleted by the
    /// newer one's first commit.
    stale: Vec<i32>,
}

/// Every session's retryable writes (sessions are added as they are used).
#[derive(Debug, Default)]
pub struct RetryableWrites {
    sessions: Mutex<HashMap<SessionId, Arc<tokio::sync::Mutex<SessionWrites>>>>,
}

/// A session held by one command, at one transaction number.
pub struct Checkout {
    lsid: SessionId,
    txn: i64,
    /// The command's statement ids.
    stmt_ids: StmtIds,
    writes: tokio::sync::OwnedMutexGuard<SessionWrites>,
    /// Results recorded in batches not confirmed committed yet, by statement id.
    recorded: HashMap<i32, RawDocumentBuf>,
    /// Whether a batch of this command already moves the session's number.
    moved: bool,
}

fn head_key(lsid: &SessionId) -> Vec<u8> {
    let mut key = lsid.to_vec();
    key.push(0);
    key
}

fn txn_prefix(lsid: &SessionId, txn: i64) -> Vec<u8> {
    let mut key = lsid.to_vec();
    key.push(1);
    key.extend_from_slice(&(txn.cast_unsigned() ^ (1 << 63)).to_be_bytes());
    key
}

fn statement_key(lsid: &SessionId, txn: i64, stmt: i32) -> Vec<u8> {
    let mut key = txn_prefix(lsid, txn);
    key.extend_from_slice(&(stmt.cast_unsigned() ^ (1 << 31)).to_be_bytes());
    key
}

fn corrupt() -> CommandError {
    CommandError::internal("a retryable write record does not decode")
}

impl RetryableWrites {
    /// Holds session `lsid` for a command at transaction number `txn` (waiting for a command
    /// of the same session to end): `TransactionTooOld` if the session has seen a newer one.
    pub async fn checkout(
        &self,
        snapshot: impl FnOnce() -> Box<dyn Snapshot>,
        lsid: SessionId,
        txn: i64,
        stmt_ids: StmtIds,
    ) -> CommandResult<Checkout> {
        let session = {
            let mut map = self
                .sessions
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            Arc::clone(map.entry(lsid).or_default())
        };
        let mut writes = session.lock_owned().await;
        if !writes.loaded {
            load(&mut writes, &*snapshot(), &lsid)?;
        }
        match writes.txn {
            Some(current) if txn < current => {
                return Err(CommandError::new(
                    ErrorCode::TransactionTooOld,
                    format!(
                        "Retryable write with txnNumber {txn} is prohibited on session {} because \
                         a newer retryable write with txnNumber {current} has already started on \
                         this session.",
                        crate::sessions::display(&lsid)
                    ),
                ));
            }
            Some(current) if txn == current => {}
            _ => {
                let executed = std::mem::take(&mut writes.executed);
                if writes.stored_txn == writes.txn {
                    writes.stale = executed.into_keys().collect();
                }
                writes.txn = Some(txn);
            }
        }
        Ok(Checkout {
            lsid,
            txn,
            stmt_ids,
            writes,
            recorded: HashMap::new(),
            moved: false,
        })
    }

    /// Adds to `batch` the removal of everything session `lsid` holds, and forgets it
    /// (`endSessions`: a driver ends a session only when it will not use it again).
    pub fn end(
        &self,
        snapshot: &dyn Snapshot,
        lsid: &SessionId,
        batch: &mut Batch,
    ) -> CommandResult<()> {
        self.sessions
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(lsid);
        for entry in snapshot.prefix(Keyspace::Sessions, lsid) {
            batch.delete(Keyspace::Sessions, entry?.0);
        }
        Ok(())
    }
}

/// Reads what storage holds of session `lsid`.
fn load(
    writes: &mut SessionWrites,
    snapshot: &dyn Snapshot,
    lsid: &SessionId,
) -> CommandResult<()> {
    let stored = snapshot
        .get(Keyspace::Sessions, &head_key(lsid))?
        .map(|v| <[u8; 8]>::try_from(&v[..]).map(i64::from_be_bytes))
        .transpose()
        .map_err(|_| corrupt())?;
    if let Some(txn) = stored {
        for entry in snapshot.prefix(Keyspace::Sessions, &txn_prefix(lsid, txn)) {
            let (key, value) = entry?;
            let stmt = key
                .get(key.len().saturating_sub(4)..)
                .and_then(|b| <[u8; 4]>::try_from(b).ok())
                .map(|b| (u32::from_be_bytes(b) ^ (1 << 31)).cast_signed())
                .ok_or_else(corrupt)?;
            let doc = RawDocumentBuf::from_bytes(value.to_vec()).map_err(|_| corrupt())?;
            writes.executed.insert(stmt, doc);
        }
    }
    writes.txn = stored;
    writes.stored_txn = stored;
    writes.loaded = true;
    Ok(())
}

impl Checkout {
    /// The statement id of the command's `index`-th statement.
    pub fn stmt_id(&self, index: usize) -> i32 {
        self.stmt_ids.at(index)
    }

    /// What statement `stmt` answered, if it was executed at this transaction number.
    pub fn executed(&self, stmt: i32) -> Option<&RawDocument> {
        self.writes
            .executed
            .get(&stmt)
            .or_else(|| self.recorded.get(&stmt))
            .map(AsRef::as_ref)
    }

    /// Adds to `batch` (the one that writes statement `stmt`) the record of what it answered;
    /// the first such batch of a newer transaction number also moves the session's number and
    /// deletes the older number's records.
    pub fn record(&mut self, batch: &mut Batch, stmt: i32, result: RawDocumentBuf) {
        if !self.moved && self.writes.stored_txn != Some(self.txn) {
            if let Some(old) = self.writes.stored_txn {
                for s in &self.writes.stale {
                    batch.delete(Keyspace::Sessions, statement_key(&self.lsid, old, *s));
                }
            }
            batch.replace(
                Keyspace::Sessions,
                head_key(&self.lsid),
                self.txn.to_be_bytes().to_vec(),
            );
            self.moved = true;
        }
        batch.put(
            Keyspace::Sessions,
            statement_key(&self.lsid, self.txn, stmt),
            result.as_bytes().to_vec(),
        );
        self.recorded.insert(stmt, result);
    }

    /// Statement `stmt`'s record was committed (its write succeeded).
    pub fn confirm(&mut self, stmt: i32) {
        if let Some(result) = self.recorded.remove(&stmt) {
            self.writes.executed.insert(stmt, result);
            if self.moved {
                self.writes.stored_txn = Some(self.txn);
                self.writes.stale.clear();
            }
        }
    }
}

/// A write command's statement ids, read once from its body (whose `stmtIds`/`stmtId` the
/// command's parsing has checked): `stmtIds[index]`, or `stmtId + index` (mongod's
/// `getStmtIdForWriteAt`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StmtIds {
    /// `stmtId` (0 when absent): the first statement's, the others following.
    From(i32),
    /// `stmtIds`: one a statement.
    List(Vec<i32>),
}

impl StmtIds {
    /// The ids `body` gives its statements.
    pub fn of(body: &RawDocument) -> Self {
        if let Ok(Some(bson::RawBsonRef::Array(ids))) = body.get("stmtIds") {
            return StmtIds::List(
                ids.into_iter()
                    .map(|id| match id {
                        Ok(bson::RawBsonRef::Int32(id)) => id,
                        _ => 0,
                    })
                    .collect(),
            );
        }
        match body.get("stmtId") {
            Ok(Some(bson::RawBsonRef::Int32(id))) => StmtIds::From(id),
            _ => StmtIds::From(0),
        }
    }

    /// The id of the `index`-th statement.
    pub fn at(&self, index: usize) -> i32 {
        let offset = i32::try_from(index).unwrap_or(i32::MAX);
        match self {
            StmtIds::List(ids) => ids.get(index).copied().unwrap_or(offset),
            StmtIds::From(first) => first.saturating_add(offset),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::{MemoryStorage, Storage};

    #[tokio::test]
    async fn statements_run_once_a_number_and_newer_numbers_forget_older_ones() {
        let storage = Arc::new(MemoryStorage::new());
        let snap = || storage.snapshot();
        let writes = RetryableWrites::default();
        let lsid = [7; 16];
        let mut c = writes
            .checkout(snap, lsid, 5, StmtIds::From(0))
            .await
            .unwrap();
        assert!(c.executed(0).is_none());
        let mut batch = Batch::new();
        c.record(&mut batch, 0, bson::rawdoc! { "n": 1 });
        c.record(&mut batch, 1, bson::rawdoc! { "n": 2 });
        storage.commit(batch).unwrap();
        c.confirm(0);
        c.confirm(1);
        drop(c);
        // A retry of number 5 finds both; a restart (a new registry) reads them back.
        let c = writes
            .checkout(snap, lsid, 5, StmtIds::From(0))
            .await
            .unwrap();
        assert_eq!(c.executed(1).unwrap().get_i32("n").unwrap(), 2);
        drop(c);
        let restarted = RetryableWrites::default();
        let c = restarted
            .checkout(snap, lsid, 5, StmtIds::From(0))
            .await
            .unwrap();
        assert_eq!(c.executed(0).unwrap().get_i32("n").unwrap(), 1);
        drop(c);
        // Number 6 starts afresh, and its first commit deletes number 5's records.
        let mut c = restarted
            .checkout(snap, lsid, 6, StmtIds::From(0))
            .await
            .unwrap();
        assert!(c.executed(0).is_none());
        let mut batch = Batch::new();
        c.record(&mut batch, 0, bson::rawdoc! { "n": 3 });
        storage.commit(batch).unwrap();
        c.confirm(0);
        drop(c);
        let keys = storage.snapshot().prefix(Keyspace::Sessions, &lsid).count();
        assert_eq!(keys, 2, "the head and number 6's one statement");
        // Number 5 is too old now.
        let err = restarted
            .checkout(snap, lsid, 5, StmtIds::From(0))
            .await
            .err()
            .unwrap();
        assert_eq!(err.code, ErrorCode::TransactionTooOld);
        let again = RetryableWrites::default();
        assert!(
            again
                .checkout(snap, lsid, 5, StmtIds::From(0))
                .await
                .is_err(),
            "after a restart too"
        );
    }

    #[test]
    fn statement_ids_come_from_stmt_ids_or_stmt_id() {
        assert_eq!(StmtIds::of(&bson::rawdoc! {}).at(3), 3);
        assert_eq!(StmtIds::of(&bson::rawdoc! { "stmtId": 10 }).at(2), 12);
        assert_eq!(StmtIds::of(&bson::rawdoc! { "stmtIds": [4, 9] }).at(1), 9);
    }
}
