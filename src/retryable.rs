//! Retryable writes: a write command carrying `lsid` and `txnNumber` (without `autocommit`)
//! runs each of its statements at most once for that session and transaction number. A
//! statement retried (the same `stmtId`, by a driver that lost the reply) is not executed
//! again: it answers what it answered the first time.
//!
//! What each executed statement answered is stored in the `sessions` keyspace, in the commit
//! that makes its write, so the two survive a crash together:
//!
//! ```text
//! lsid (16) · 0x00                                   → the session's transaction number (i64 BE) [· stmtId (i32 BE) · its result (BSON)]
//! lsid (16) · 0x01 · txnNumber (i64 BE, sign flipped) · stmtId (i32 BE, sign flipped) → result (BSON)
//! lsid (16) · 0x02                                   → the transaction number of the session's last committed transaction (i64 BE)
//! lsid (16) · 0x03                                   → the session's last use at the last clean shutdown (ms, i64 BE: `crate::sessions`)
//! ```
//!
//! A session's transaction number is also the number of its multi-document transactions
//! (`crate::txn`): a number is either a retryable write's or a transaction's, never both.
//! [`RetryableWrites::checkout_txn`] holds the session for a command of a transaction,
//! starting it or going on with it, with mongod's answers for numbers that do not match.
//!
//! A newer transaction number forgets the older one's statements: its first commit deletes
//! them and moves the session's number. That commit's first statement is recorded in the
//! number's own record, the others (and those of later commits) under keys of their own: a
//! single-statement retryable write (`insertOne`, `updateOne`, `findOneAndUpdate`…, each at a
//! new number) writes one record, which the next one replaces, and deletes nothing. An older one is refused (`TransactionTooOld`). A
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
    /// Statement ids stored under `stored_txn` when it is older than `txn`, under keys of
    /// their own: deleted by the newer one's first commit.
    stale: Vec<i32>,
    /// The statement of `stored_txn` recorded in the session's number record, not under a key
    /// of its own.
    stored_inline: Option<i32>,
    /// Where the multi-document transaction numbered `txn` stands, when `txn` is one's.
    transaction: Option<TxnPhase>,
}

/// Where a session's multi-document transaction stands.
#[derive(Debug, Clone)]
pub enum TxnPhase {
    /// Open.
    InProgress(Arc<crate::txn::Transaction>),
    /// Committed (a retried `commitTransaction` answers as the first did).
    Committed,
    /// Aborted: by `abortTransaction`, an error, another transaction, or its age.
    Aborted,
}

impl SessionWrites {
    /// Aborts the open transaction, if there is one.
    fn abort_open(&mut self) {
        if let Some(TxnPhase::InProgress(txn)) = &self.transaction {
            txn.abort();
            self.transaction = Some(TxnPhase::Aborted);
        }
    }

    /// Moves the session to transaction number `txn` (newer than its own): the older
    /// number's executed statements are forgotten (deleted by the first commit after).
    fn renumber(&mut self, txn: i64) {
        self.abort_open();
        self.transaction = None;
        let executed = std::mem::take(&mut self.executed);
        if self.stored_txn == self.txn {
            let inline = self.stored_inline;
            self.stale = executed
                .into_keys()
                .filter(|s| Some(*s) != inline)
                .collect();
        }
        self.txn = Some(txn);
    }

    fn kind(&self) -> &'static str {
        if self.transaction.is_some() {
            "transaction"
        } else {
            "retryable write"
        }
    }
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
    /// The statement recorded with the number, by the batch that moves it.
    inline: Option<i32>,
}

fn head_key(lsid: &SessionId) -> Vec<u8> {
    let mut key = lsid.to_vec();
    key.push(0);
    key
}

fn committed_key(lsid: &SessionId) -> Vec<u8> {
    let mut key = lsid.to_vec();
    key.push(2);
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
    /// Holds session `lsid` (waiting for a command of the same session to end), read from
    /// storage (`snapshot`) at its first use since the server started.
    async fn hold(
        &self,
        lsid: SessionId,
        snapshot: impl FnOnce() -> Box<dyn Snapshot>,
    ) -> CommandResult<tokio::sync::OwnedMutexGuard<SessionWrites>> {
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
        Ok(writes)
    }

    /// Holds session `lsid` for a command at transaction number `txn` (waiting for a command
    /// of the same session to end): `TransactionTooOld` if the session has seen a newer one.
    pub async fn checkout(
        &self,
        snapshot: impl FnOnce() -> Box<dyn Snapshot>,
        lsid: SessionId,
        txn: i64,
        stmt_ids: StmtIds,
    ) -> CommandResult<Checkout> {
        let mut writes = self.hold(lsid, snapshot).await?;
        match writes.txn {
            Some(current) if txn < current => {
                return Err(CommandError::new(
                    ErrorCode::TransactionTooOld,
                    format!(
                        "Retryable write with txnNumber {txn} is prohibited on session {} because \
                         a newer {} with txnNumber {current} has already started on this session.",
                        crate::sessions::display(&lsid),
                        writes.kind()
                    ),
                ));
            }
            Some(current) if txn == current => {
                if writes.transaction.is_some() {
                    return Err(CommandError::new(
                        ErrorCode::IncompleteTransactionHistory,
                        "Cannot retry a retryable write that has been converted into a \
                         transaction",
                    ));
                }
            }
            _ => writes.renumber(txn),
        }
        Ok(Checkout {
            lsid,
            txn,
            stmt_ids,
            writes,
            recorded: HashMap::new(),
            moved: false,
            inline: None,
        })
    }

    /// Holds session `lsid` for a command of transaction `txn` (waiting for a command of the
    /// same session to end): starting it (`start`, aborting an open older one) or going on
    /// with it. `command` is the command's name: only `commitTransaction` goes on with a
    /// committed transaction (a retried commit), and only it and `abortTransaction` find out
    /// how one ended. A new transaction reads `catalog`'s store as it is now.
    pub async fn checkout_txn(
        &self,
        catalog: &crate::catalog::Catalog,
        lsid: SessionId,
        txn: i64,
        start: bool,
        command: &str,
    ) -> CommandResult<TxnCheckout> {
        let mut writes = self.hold(lsid, || catalog.snapshot()).await?;
        let active = writes.txn;
        if let Some(current) = active
            && txn < current
        {
            return Err(CommandError::new(
                ErrorCode::TransactionTooOld,
                format!(
                    "Cannot start transaction with {{ txnNumber: {txn}, txnRetryCounter: 0 }} on \
                     session {} because a newer {} with txnNumberAndRetryCounter {{ txnNumber: \
                     {current}, txnRetryCounter: 0 }} has already started on this session.",
                    crate::sessions::display(&lsid),
                    writes.kind()
                ),
            ));
        }
        if start {
            if active == Some(txn) {
                return Err(CommandError::new(
                    ErrorCode::ConflictingOperationInProgress,
                    "Only servers in a sharded cluster can start a new transaction at the active \
                     transaction number",
                ));
            }
            writes.renumber(txn);
            writes.transaction = Some(TxnPhase::InProgress(Arc::new(
                crate::txn::Transaction::start(catalog, lsid, txn),
            )));
        } else {
            if active != Some(txn) || writes.transaction.is_none() {
                return Err(CommandError::new(
                    ErrorCode::NoSuchTransaction,
                    format!(
                        "Given transaction number {txn} does not match any in-progress \
                         transactions. The active transaction number is {}",
                        active.unwrap_or(-1)
                    ),
                ));
            }
            match &writes.transaction {
                Some(TxnPhase::Aborted) => {
                    return Err(CommandError::new(
                        ErrorCode::NoSuchTransaction,
                        format!("Transaction {txn} has been aborted."),
                    ));
                }
                Some(TxnPhase::Committed) if command != "commitTransaction" => {
                    return Err(CommandError::new(
                        ErrorCode::TransactionCommitted,
                        format!("Transaction {txn} has been committed."),
                    ));
                }
                Some(TxnPhase::InProgress(t)) if t.has_ended() => {
                    // Aborted while no command held the session (its age, a kill).
                    writes.transaction = Some(TxnPhase::Aborted);
                    return Err(CommandError::new(
                        ErrorCode::NoSuchTransaction,
                        format!("Transaction {txn} has been aborted."),
                    ));
                }
                _ => {}
            }
        }
        Ok(TxnCheckout { lsid, txn, writes })
    }

    /// Aborts the open transactions that started more than `limit` ago
    /// (`transactionLifetimeLimitSeconds`), of sessions no command holds. Returns how many.
    pub fn abort_expired(&self, limit: std::time::Duration) -> usize {
        let sessions: Vec<_> = self
            .sessions
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .values()
            .cloned()
            .collect();
        let mut aborted = 0;
        for session in sessions {
            let Ok(mut writes) = session.try_lock() else {
                continue;
            };
            if let Some(TxnPhase::InProgress(t)) = &writes.transaction
                && t.started.elapsed() >= limit
            {
                writes.abort_open();
                aborted += 1;
            }
        }
        aborted
    }

    /// Aborts the open transaction of each session `which` picks (killed sessions). A session
    /// a command holds right now keeps its transaction (which the lifetime limit still ends).
    pub fn abort_sessions(&self, which: impl Fn(&SessionId) -> bool) {
        let sessions: Vec<_> = self
            .sessions
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .iter()
            .filter(|(id, _)| which(id))
            .map(|(_, s)| Arc::clone(s))
            .collect();
        for session in sessions {
            if let Ok(mut writes) = session.try_lock() {
                writes.abort_open();
            }
        }
    }

    /// Adds to `batch` the removal of everything session `lsid` holds, and forgets it
    /// (`endSessions`: a driver ends a session only when it will not use it again). Its open
    /// transaction is aborted.
    pub fn end(
        &self,
        snapshot: &dyn Snapshot,
        lsid: &SessionId,
        batch: &mut Batch,
    ) -> CommandResult<()> {
        let session = self
            .sessions
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(lsid);
        if let Some(session) = session
            && let Ok(mut writes) = session.try_lock()
        {
            writes.abort_open();
        }
        for entry in snapshot.prefix(Keyspace::Sessions, lsid) {
            batch.delete(Keyspace::Sessions, entry?.0);
        }
        Ok(())
    }
}

/// Sessions held for their expiry (see [`RetryableWrites::hold_expiring`]): commands of
/// these sessions wait until they are forgotten or let go.
pub struct Expiring {
    held: Vec<(SessionId, tokio::sync::OwnedMutexGuard<SessionWrites>)>,
}

impl Expiring {
    /// The sessions held.
    pub fn ids(&self) -> impl Iterator<Item = &SessionId> {
        self.held.iter().map(|(id, _)| id)
    }

    /// Whether no session is held.
    pub fn is_empty(&self) -> bool {
        self.held.is_empty()
    }

    /// Adds to `batch` the removal of every record the held sessions have on disk.
    pub fn delete_records(&self, snapshot: &dyn Snapshot, batch: &mut Batch) -> CommandResult<()> {
        for (id, _) in &self.held {
            for entry in snapshot.prefix(Keyspace::Sessions, id) {
                batch.delete(Keyspace::Sessions, entry?.0);
            }
        }
        Ok(())
    }
}

impl RetryableWrites {
    /// Holds those of `ids` that no command holds and that are `still_idle` once held, and
    /// aborts their open transactions: the first step of their expiry. A command of one of
    /// them arriving now waits; what it then finds depends on [`RetryableWrites::forget`]
    /// (the records gone) or on the [`Expiring`] being dropped (nothing changed).
    pub fn hold_expiring(
        &self,
        ids: &[SessionId],
        still_idle: impl Fn(&SessionId) -> bool,
    ) -> Expiring {
        let sessions: Vec<_> = {
            let mut map = self
                .sessions
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            // A session without an entry gets one, so that a command arriving meanwhile waits
            // for the expiry instead of reading records about to be deleted.
            ids.iter()
                .map(|id| (*id, Arc::clone(map.entry(*id).or_default())))
                .collect()
        };
        let mut held = Vec::new();
        for (id, session) in sessions {
            let Ok(mut writes) = session.try_lock_owned() else {
                continue;
            };
            if still_idle(&id) {
                writes.abort_open();
                held.push((id, writes));
            }
        }
        Expiring { held }
    }

    /// Forgets the held sessions once the removal of their records has committed: each is
    /// left as a session never used, so a command that waited for it reads storage afresh.
    pub fn forget(&self, expiring: Expiring) {
        let mut map = self
            .sessions
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for (id, mut writes) in expiring.held {
            *writes = SessionWrites::default();
            drop(writes);
            // Only the map holds it now: no command waits for it.
            if map.get(&id).is_some_and(|s| Arc::strong_count(s) == 1) {
                map.remove(&id);
            }
        }
    }

    /// How many sessions have an entry (tests).
    #[cfg(test)]
    fn len(&self) -> usize {
        self.sessions
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .len()
    }
}

fn last_use_key(lsid: &SessionId) -> Vec<u8> {
    let mut key = lsid.to_vec();
    key.push(3);
    key
}

/// Adds to `batch` the last use of each of `sessions` that has records in storage (at
/// shutdown: see `crate::sessions`). Returns how many.
pub fn record_last_use(
    snapshot: &dyn Snapshot,
    sessions: &[(SessionId, i64)],
    batch: &mut Batch,
) -> CommandResult<usize> {
    let mut recorded = 0;
    for (id, last) in sessions {
        if snapshot
            .prefix(Keyspace::Sessions, id)
            .next()
            .transpose()?
            .is_some()
        {
            batch.replace(
                Keyspace::Sessions,
                last_use_key(id),
                last.to_be_bytes().to_vec(),
            );
            recorded += 1;
        }
    }
    Ok(recorded)
}

/// The sessions that have records in storage, each with its last use if one was recorded
/// (read at startup: see `crate::sessions`). Two seeks per session, however many statements
/// each recorded.
pub fn stored_sessions(snapshot: &dyn Snapshot) -> CommandResult<Vec<(SessionId, Option<i64>)>> {
    let mut ids = Vec::new();
    let mut from: Vec<u8> = Vec::new();
    loop {
        let next = snapshot
            .range(
                Keyspace::Sessions,
                std::ops::Bound::Included(&from),
                std::ops::Bound::Unbounded,
                false,
            )
            .next()
            .transpose()?;
        let Some((key, _)) = next else {
            return Ok(ids);
        };
        let Some(id) = key.get(..16).and_then(|b| SessionId::try_from(b).ok()) else {
            // Not a record of this layout: step over it.
            from = key.to_vec();
            from.push(0);
            continue;
        };
        let last_use = snapshot
            .get(Keyspace::Sessions, &last_use_key(&id))?
            .and_then(|v| <[u8; 8]>::try_from(&v[..]).ok())
            .map(i64::from_be_bytes);
        ids.push((id, last_use));
        match crate::storage::prefix_end(&id) {
            Some(end) => from = end,
            None => return Ok(ids),
        }
    }
}

/// Reads what storage holds of session `lsid`.
fn load(
    writes: &mut SessionWrites,
    snapshot: &dyn Snapshot,
    lsid: &SessionId,
) -> CommandResult<()> {
    let head = snapshot.get(Keyspace::Sessions, &head_key(lsid))?;
    let stored = head
        .as_deref()
        .map(|v| {
            v.get(..8)
                .and_then(|b| <[u8; 8]>::try_from(b).ok())
                .map(i64::from_be_bytes)
                .ok_or_else(corrupt)
        })
        .transpose()?;
    // The first statement of the number's first commit, kept with the number.
    if let Some(rest) = head
        .as_deref()
        .and_then(|v| v.get(8..))
        .filter(|r| !r.is_empty())
    {
        let stmt = rest
            .get(..4)
            .and_then(|b| <[u8; 4]>::try_from(b).ok())
            .map(i32::from_be_bytes)
            .ok_or_else(corrupt)?;
        let doc = RawDocumentBuf::from_bytes(rest.get(4..).unwrap_or_default().to_vec())
            .map_err(|_| corrupt())?;
        writes.executed.insert(stmt, doc);
        writes.stored_inline = Some(stmt);
    }
    let committed = snapshot
        .get(Keyspace::Sessions, &committed_key(lsid))?
        .map(|v| <[u8; 8]>::try_from(&v[..]).map(i64::from_be_bytes))
        .transpose()
        .map_err(|_| corrupt())?;
    if stored.is_some() && committed == stored {
        writes.transaction = Some(TxnPhase::Committed);
    }
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
            let mut head = Vec::with_capacity(12 + result.as_bytes().len());
            head.extend_from_slice(&self.txn.to_be_bytes());
            head.extend_from_slice(&stmt.to_be_bytes());
            head.extend_from_slice(result.as_bytes());
            batch.replace(Keyspace::Sessions, head_key(&self.lsid), head);
            self.moved = true;
            self.inline = Some(stmt);
        } else {
            batch.put(
                Keyspace::Sessions,
                statement_key(&self.lsid, self.txn, stmt),
                result.as_bytes().to_vec(),
            );
        }
        self.recorded.insert(stmt, result);
    }

    /// Statement `stmt`'s record was committed (its write succeeded).
    pub fn confirm(&mut self, stmt: i32) {
        if let Some(result) = self.recorded.remove(&stmt) {
            self.writes.executed.insert(stmt, result);
            if self.moved {
                self.writes.stored_txn = Some(self.txn);
                self.writes.stale.clear();
                self.writes.stored_inline = self.inline;
            }
        }
    }
}

/// A session held by one command of a multi-document transaction.
pub struct TxnCheckout {
    lsid: SessionId,
    txn: i64,
    writes: tokio::sync::OwnedMutexGuard<SessionWrites>,
}

impl TxnCheckout {
    /// The open transaction (none when it has committed: a retried commit).
    pub fn transaction(&self) -> Option<Arc<crate::txn::Transaction>> {
        match &self.writes.transaction {
            Some(TxnPhase::InProgress(t)) => Some(Arc::clone(t)),
            _ => None,
        }
    }

    /// What its commit writes for the session: the session's transaction number, the mark
    /// of its last committed transaction, and the removal of an older number's statements.
    pub fn session_record(&self) -> Batch {
        let mut batch = Batch::new();
        if self.writes.stored_txn != Some(self.txn) {
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
        }
        batch.replace(
            Keyspace::Sessions,
            committed_key(&self.lsid),
            self.txn.to_be_bytes().to_vec(),
        );
        batch
    }

    /// The transaction committed: with [`TxnCheckout::session_record`] when it wrote
    /// anything (`wrote`), else (read only) with nothing written.
    pub fn committed(&mut self, wrote: bool) {
        if wrote {
            self.writes.stored_txn = Some(self.txn);
            self.writes.stale.clear();
            self.writes.stored_inline = None;
        }
        self.writes.transaction = Some(TxnPhase::Committed);
    }

    /// The transaction aborted (if it was open).
    pub fn aborted(&mut self) {
        self.writes.abort_open();
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
        assert_eq!(
            keys, 1,
            "the number's record alone, which holds number 6's one statement (number 5's \
             second statement, under a key of its own, is deleted)"
        );
        let reread = RetryableWrites::default();
        let c = reread
            .checkout(snap, lsid, 6, StmtIds::From(0))
            .await
            .unwrap();
        assert_eq!(c.executed(0).unwrap().get_i32("n").unwrap(), 3);
        drop(c);
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

    /// Records statement 0 of number `txn` for session `lsid`, committed.
    async fn write_one(writes: &RetryableWrites, storage: &Arc<MemoryStorage>, lsid: SessionId) {
        let mut c = writes
            .checkout(|| storage.snapshot(), lsid, 1, StmtIds::From(0))
            .await
            .unwrap();
        let mut batch = Batch::new();
        c.record(&mut batch, 0, bson::rawdoc! { "n": 1 });
        storage.commit(batch).unwrap();
        c.confirm(0);
    }

    #[tokio::test]
    async fn expiry_deletes_records_and_skips_held_and_used_sessions() {
        let storage = Arc::new(MemoryStorage::new());
        let writes = RetryableWrites::default();
        let (a, b, c, d) = ([1; 16], [2; 16], [3; 16], [4; 16]);
        for lsid in [a, b, c] {
            write_one(&writes, &storage, lsid).await;
        }
        let mut stored = stored_sessions(&*storage.snapshot()).unwrap();
        stored.sort_unstable();
        assert_eq!(stored, vec![(a, None), (b, None), (c, None)]);
        // `b` is held by a command; `c` was used again after it was picked; `d` has no entry.
        let busy = writes
            .checkout(|| storage.snapshot(), b, 1, StmtIds::From(0))
            .await
            .unwrap();
        let expiring = writes.hold_expiring(&[a, b, c, d], |id| *id != c);
        let mut held: Vec<_> = expiring.ids().copied().collect();
        held.sort_unstable();
        assert_eq!(held, vec![a, d]);
        let mut batch = Batch::new();
        expiring
            .delete_records(&*storage.snapshot(), &mut batch)
            .unwrap();
        storage.commit(batch).unwrap();
        writes.forget(expiring);
        drop(busy);
        let mut stored = stored_sessions(&*storage.snapshot()).unwrap();
        stored.sort_unstable();
        assert_eq!(stored, vec![(b, None), (c, None)]);
        assert_eq!(writes.len(), 2, "a and d are forgotten");
        // Number 1 of `a` runs again; `b`'s is still recorded.
        let again = writes
            .checkout(|| storage.snapshot(), a, 1, StmtIds::From(0))
            .await
            .unwrap();
        assert!(again.executed(0).is_none());
        let kept = writes
            .checkout(|| storage.snapshot(), b, 1, StmtIds::From(0))
            .await
            .unwrap();
        assert!(kept.executed(0).is_some());
    }

    #[tokio::test]
    async fn last_uses_recorded_at_shutdown_are_read_at_startup() {
        let storage = Arc::new(MemoryStorage::new());
        let writes = RetryableWrites::default();
        let (a, b) = ([1; 16], [2; 16]);
        write_one(&writes, &storage, a).await;
        // `b` has no records: nothing is written for it.
        let mut batch = Batch::new();
        let recorded =
            record_last_use(&*storage.snapshot(), &[(a, 1_234), (b, 5_678)], &mut batch).unwrap();
        assert_eq!(recorded, 1);
        storage.commit(batch).unwrap();
        assert_eq!(
            stored_sessions(&*storage.snapshot()).unwrap(),
            vec![(a, Some(1_234))]
        );
        // The record does not disturb what the session executed.
        let restarted = RetryableWrites::default();
        let c = restarted
            .checkout(|| storage.snapshot(), a, 1, StmtIds::From(0))
            .await
            .unwrap();
        assert!(c.executed(0).is_some());
        drop(c);
        // Expiry removes it with the rest.
        let expiring = restarted.hold_expiring(&[a], |_| true);
        let mut batch = Batch::new();
        expiring
            .delete_records(&*storage.snapshot(), &mut batch)
            .unwrap();
        storage.commit(batch).unwrap();
        restarted.forget(expiring);
        assert!(stored_sessions(&*storage.snapshot()).unwrap().is_empty());
    }

    #[tokio::test]
    async fn a_command_waiting_for_an_expiring_session_reads_it_afresh() {
        let storage = Arc::new(MemoryStorage::new());
        let writes = Arc::new(RetryableWrites::default());
        let lsid = [5; 16];
        write_one(&writes, &storage, lsid).await;
        let expiring = writes.hold_expiring(&[lsid], |_| true);
        let waiting = {
            let (writes, storage) = (Arc::clone(&writes), Arc::clone(&storage));
            tokio::spawn(async move {
                let c = writes
                    .checkout(|| storage.snapshot(), lsid, 1, StmtIds::From(0))
                    .await
                    .unwrap();
                c.executed(0).is_some()
            })
        };
        // Let the command reach the session's lock.
        while writes.len() == 1
            && Arc::strong_count(writes.sessions.lock().unwrap().get(&lsid).unwrap()) < 3
        {
            tokio::task::yield_now().await;
        }
        let mut batch = Batch::new();
        expiring
            .delete_records(&*storage.snapshot(), &mut batch)
            .unwrap();
        storage.commit(batch).unwrap();
        writes.forget(expiring);
        assert!(!waiting.await.unwrap(), "the record is gone");
        assert_eq!(writes.len(), 1, "the waiting command's entry stays");
    }

    #[tokio::test]
    async fn expiry_aborts_the_open_transaction() {
        let store = Arc::new(crate::storage::GroupCommit::new(Arc::new(
            MemoryStorage::new(),
        )));
        let catalog = crate::catalog::Catalog::open(store).unwrap();
        let writes = RetryableWrites::default();
        let lsid = [6; 16];
        let checkout = writes
            .checkout_txn(&catalog, lsid, 1, true, "insert")
            .await
            .unwrap();
        let txn = checkout.transaction().unwrap();
        drop(checkout);
        let expiring = writes.hold_expiring(&[lsid], |_| true);
        assert!(txn.has_ended());
        writes.forget(expiring);
        assert_eq!(writes.len(), 0);
        let err = writes
            .checkout_txn(&catalog, lsid, 1, false, "insert")
            .await
            .err()
            .unwrap();
        assert_eq!(err.code, ErrorCode::NoSuchTransaction);
    }

    #[test]
    fn statement_ids_come_from_stmt_ids_or_stmt_id() {
        assert_eq!(StmtIds::of(&bson::rawdoc! {}).at(3), 3);
        assert_eq!(StmtIds::of(&bson::rawdoc! { "stmtId": 10 }).at(2), 12);
        assert_eq!(StmtIds::of(&bson::rawdoc! { "stmtIds": [4, 9] }).at(1), 9);
    }
}
