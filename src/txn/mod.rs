//! Multi-document transactions (`startTransaction`, `autocommit: false`, `commitTransaction`,
//! `abortTransaction`) with snapshot isolation.
//!
//! A [`Transaction`] reads the storage snapshot taken when it started, with its own changes
//! over it ([`TxnView`]), so every read path (finds, aggregations, the writers' own lookups)
//! works on it unchanged. Its writers build their batches as any writer does, and
//! [`Transaction::apply`] keeps them pending instead of committing them. Before a change joins
//! them, the writer claims its key in the [`LockTable`] ([`Transaction::claim`]): a key another
//! open transaction holds, or one committed by someone else since the snapshot, is a
//! `WriteConflict` (first writer wins; mongod answers the same, labelled
//! `TransientTransactionError`). [`Transaction::commit`] writes everything pending, with the
//! session's record, in one storage commit, under the write locks of the collections it
//! changed: all of it or none of it survives a crash.
//!
//! The command that runs in a transaction runs with it as its task's [`Active`]
//! ([`scope`]): the server's read snapshot ([`current_view`]) and every writer pick it up
//! from there.

mod history;
pub mod locks;
mod view;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Instant;

pub use history::{HISTORY_WINDOW, History};
pub use locks::LockTable;
pub use view::{Overlay, TxnView};

use crate::catalog::{Catalog, Collection};
use crate::error::{CommandError, CommandResult, ErrorCode};
use crate::sessions::SessionId;
use crate::storage::{Batch, Keyspace, Snapshot};

/// mongod's `transactionLifetimeLimitSeconds` default: an open transaction older than this is
/// aborted.
pub const LIFETIME_LIMIT: std::time::Duration = std::time::Duration::from_secs(60);

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// One open multi-document transaction.
pub struct Transaction {
    /// Its holder id in the lock table.
    pub id: u64,
    /// Its session.
    pub lsid: SessionId,
    /// Its transaction number.
    pub number: i64,
    /// When it started.
    pub started: Instant,
    base: Arc<dyn Snapshot>,
    overlay: Arc<RwLock<Overlay>>,
    locks: Arc<LockTable>,
    /// The keys it holds in `locks`.
    held: Mutex<Vec<Vec<u8>>>,
    /// The collections it changed, and whether it set an index's multikey flag in each (their
    /// records are written with the commit).
    touched: Mutex<Vec<(Arc<Collection>, bool)>>,
    /// The collections it created (explicitly or by a first insert), which only it sees
    /// until its commit writes their records and registers them.
    created: Mutex<Vec<Arc<Collection>>>,
    /// The oplog operations of its changes, in order (written as one `applyOps` entry by its
    /// commit, when there is an oplog).
    ops: Mutex<Vec<(bson::RawDocumentBuf, Option<bson::RawDocumentBuf>)>>,
    /// Set once it committed or aborted: it takes no more changes.
    ended: AtomicBool,
}

impl std::fmt::Debug for Transaction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Transaction")
            .field("id", &self.id)
            .field("number", &self.number)
            .finish_non_exhaustive()
    }
}

/// mongod's answer to a key another transaction holds, or one changed since the snapshot.
pub fn write_conflict() -> CommandError {
    CommandError::new(
        ErrorCode::WriteConflict,
        "WriteConflict error: this operation conflicted with another operation. Please retry \
         your operation or multi-document transaction.",
    )
}

impl Transaction {
    /// Starts transaction `number` of session `lsid`, reading `catalog`'s store as it is now.
    pub fn start(catalog: &Catalog, lsid: SessionId, number: i64) -> Self {
        Transaction {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            lsid,
            number,
            started: Instant::now(),
            base: Arc::from(catalog.snapshot()),
            overlay: Arc::default(),
            locks: Arc::clone(catalog.locks()),
            held: Mutex::new(Vec::new()),
            touched: Mutex::new(Vec::new()),
            created: Mutex::new(Vec::new()),
            ops: Mutex::new(Vec::new()),
            ended: AtomicBool::new(false),
        }
    }

    /// What it reads: its snapshot with its changes over it.
    pub fn view(&self) -> Box<dyn Snapshot> {
        Box::new(TxnView {
            base: Arc::clone(&self.base),
            overlay: Arc::clone(&self.overlay),
        })
    }

    /// Whether it committed or aborted.
    pub fn has_ended(&self) -> bool {
        self.ended.load(Ordering::Acquire)
    }

    fn check_open(&self) -> CommandResult<()> {
        if self.has_ended() {
            return Err(CommandError::new(
                ErrorCode::NoSuchTransaction,
                format!("Transaction {} has been aborted.", self.number),
            ));
        }
        Ok(())
    }

    /// Claims `claim` (see [`locks`]) for a change: `Ok(true)` if it is newly held, so the
    /// caller checks it was not changed since the snapshot; `WriteConflict` if another
    /// transaction holds it.
    pub fn claim(&self, claim: &[u8]) -> CommandResult<bool> {
        self.check_open()?;
        match self.locks.claim(claim, self.id) {
            locks::Claim::New => {
                self.held
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .push(claim.to_vec());
                Ok(true)
            }
            locks::Claim::Held => Ok(false),
            locks::Claim::Conflict => Err(write_conflict()),
        }
    }

    /// Whether the latest committed value of `key` differs from the one in its snapshot.
    pub fn changed_since_start(
        &self,
        catalog: &Catalog,
        ks: Keyspace,
        key: &[u8],
    ) -> CommandResult<bool> {
        let latest = catalog.store().storage().get(ks, key)?;
        Ok(latest != self.base.get(ks, key)?)
    }

    /// Whether the keys starting with `prefix` in `ks` differ between the latest committed
    /// state and its snapshot (a unique index key someone else added or removed since).
    pub fn prefix_changed_since_start(
        &self,
        catalog: &Catalog,
        ks: Keyspace,
        prefix: &[u8],
    ) -> CommandResult<bool> {
        let latest = catalog.snapshot();
        let mut now = latest.prefix(ks, prefix);
        let mut then = self.base.prefix(ks, prefix);
        loop {
            match (now.next().transpose()?, then.next().transpose()?) {
                (None, None) => return Ok(false),
                (Some(a), Some(b)) if a.0 == b.0 => {}
                _ => return Ok(true),
            }
        }
    }

    fn created_list(&self) -> std::sync::MutexGuard<'_, Vec<Arc<Collection>>> {
        self.created
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The collection `db.name` if this transaction created it.
    pub fn created(&self, db: &str, name: &str) -> Option<Arc<Collection>> {
        self.created_list()
            .iter()
            .find(|c| c.db == db && c.name == name)
            .cloned()
    }

    /// Keeps `collection` as one it created, in place of the one it created under that name
    /// before, if any (an index added to it).
    pub fn keep_created(&self, collection: Arc<Collection>) -> CommandResult<()> {
        self.check_open()?;
        let mut created = self.created_list();
        created.retain(|c| !(c.db == collection.db && c.name == collection.name));
        created.push(collection);
        Ok(())
    }

    /// Whether it has written to the collection with id `id`.
    pub fn has_written(&self, id: u64) -> bool {
        self.touched
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .iter()
            .any(|(c, _)| c.id == id)
    }

    /// Adds a writer's batch of changes to `collection` to the pending ones.
    pub fn apply(
        &self,
        collection: &Arc<Collection>,
        batch: Batch,
        multikey: bool,
        ops: Vec<(bson::RawDocumentBuf, Option<bson::RawDocumentBuf>)>,
    ) -> CommandResult<()> {
        self.check_open()?;
        self.ops
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .extend(ops);
        self.overlay
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .apply(batch);
        let mut touched = self
            .touched
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some((_, set)) = touched.iter_mut().find(|(c, _)| c.id == collection.id) {
            *set |= multikey;
        } else {
            collection.open_transactions.fetch_add(1, Ordering::AcqRel);
            touched.push((Arc::clone(collection), multikey));
        }
        Ok(())
    }

    /// Commits what is pending, with `session` (the session's record), in one storage commit.
    /// Returns the commit's ticket: none if there was nothing to write, and then the session's
    /// record is not written either. `WriteConflict` if a
    /// collection it changed was dropped or changed its indexes since (its changes could not
    /// be written as they are).
    pub fn commit(&self, catalog: &Catalog, session: Batch) -> CommandResult<Option<u64>> {
        self.check_open()?;
        let mut touched = self
            .touched
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        touched.sort_by_key(|(c, _)| c.id);
        let mut batch = self
            .overlay
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .to_batch();
        let created = self.created_list().clone();
        if batch.is_empty() && created.is_empty() {
            // Read only: nothing to write, the session's record included (as in mongod, a
            // read-only transaction leaves nothing behind a restart).
            self.end();
            return Ok(None);
        }
        let lock = || {
            let mut guards = Vec::with_capacity(touched.len());
            for (collection, _) in &touched {
                let Some(guard) = collection.lock() else {
                    return Err(write_conflict());
                };
                guards.push(guard);
            }
            Ok(guards)
        };
        for (collection, multikey) in &touched {
            // (The record of a collection it created is written with its creation.)
            if *multikey && !created.iter().any(|c| c.id == collection.id) {
                catalog.put_record(collection, &mut batch);
            }
        }
        batch.ops.extend(session.ops);
        if let Some(oplog) = catalog.oplog() {
            let mut ops: Vec<(bson::RawDocumentBuf, Option<bson::RawDocumentBuf>)> = created
                .iter()
                .map(|c| {
                    (
                        crate::oplog::log::create_op(&c.db, &c.name, c.uuid(), &c.options),
                        None,
                    )
                })
                .collect();
            ops.extend(std::mem::take(
                &mut *self
                    .ops
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner),
            ));
            if !ops.is_empty() {
                let lsid = crate::oplog::log::lsid_doc(&self.lsid);
                batch
                    .stamped
                    .push(oplog.apply_ops_entry(&ops, Some((&lsid, self.number))));
            }
        }
        let committed = if created.is_empty() {
            lock().and_then(|guards| Ok((catalog.store().commit(batch)?, guards)))
        } else {
            catalog.commit_creating(&created, batch, lock)
        };
        // Ended before the keys are let go: a writer that meets them no more finds the
        // changes committed.
        self.end();
        let (ticket, guards) = committed?;
        drop(guards);
        Ok(Some(ticket))
    }

    /// Drops what is pending and lets go of its keys.
    pub fn abort(&self) {
        self.end();
    }

    fn end(&self) {
        if !self.ended.swap(true, Ordering::AcqRel) {
            for (collection, _) in self
                .touched
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .iter()
            {
                collection.open_transactions.fetch_sub(1, Ordering::AcqRel);
            }
        }
        let held = std::mem::take(
            &mut *self
                .held
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        );
        self.locks.release(&held, self.id);
    }
}

impl Drop for Transaction {
    fn drop(&mut self) {
        self.end();
    }
}

/// The transaction a command runs in, as its task sees it.
#[derive(Debug)]
pub struct Active {
    /// The open transaction (none when the command is a commit retried after the commit).
    pub txn: Option<Arc<Transaction>>,
    /// The session's record, written with the commit (`commitTransaction` only).
    pub session_record: Mutex<Batch>,
    /// What `commitTransaction` or `abortTransaction` did.
    pub outcome: Mutex<Option<Outcome>>,
    /// Whether the commit wrote anything (and so the session's record).
    pub wrote: AtomicBool,
}

/// How a transaction ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// It committed.
    Committed,
    /// It aborted.
    Aborted,
}

impl Active {
    /// Records how the command ended the transaction.
    pub fn set_outcome(&self, outcome: Outcome) {
        *self
            .outcome
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(outcome);
    }

    /// Records whether the commit wrote anything.
    pub fn set_wrote(&self, wrote: bool) {
        self.wrote.store(wrote, Ordering::Release);
    }

    /// Whether the commit wrote anything (and so the session's record).
    pub fn wrote(&self) -> bool {
        self.wrote.load(Ordering::Acquire)
    }

    /// How the command ended the transaction, if it did.
    pub fn outcome(&self) -> Option<Outcome> {
        *self
            .outcome
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

tokio::task_local! {
    static CURRENT: Arc<Active>;
    /// The snapshot a read at a cluster time reads (see [`History`]).
    static READ_AT: Arc<dyn Snapshot>;
}

/// Runs `f` (a read at a cluster time, outside transactions) reading `snapshot`.
pub async fn read_at<F: std::future::Future>(snapshot: Box<dyn Snapshot>, f: F) -> F::Output {
    READ_AT.scope(Arc::from(snapshot), f).await
}

/// Runs `f` (a command) in `active`.
pub async fn scope<F: std::future::Future>(active: Arc<Active>, f: F) -> F::Output {
    CURRENT.scope(active, f).await
}

/// The transaction the running command is in, if any.
pub fn active() -> Option<Arc<Active>> {
    CURRENT.try_with(Arc::clone).ok()
}

/// The open transaction the running command is in, if any.
pub fn current() -> Option<Arc<Transaction>> {
    CURRENT.try_with(|a| a.txn.clone()).ok().flatten()
}

/// What the running command reads in its transaction, if it is in one, or at the cluster
/// time it reads at.
pub fn current_view() -> Option<Box<dyn Snapshot>> {
    current().map(|t| t.view()).or_else(|| {
        READ_AT
            .try_with(|s| Box::new(history::Shared(Arc::clone(s))) as Box<dyn Snapshot>)
            .ok()
    })
}

/// `f` as blocking work that stays in the running command's transaction: call on the
/// command's task, run the result anywhere (`spawn_blocking`).
pub fn carry<T>(f: impl FnOnce() -> T) -> impl FnOnce() -> T {
    let active = active();
    let read_at = READ_AT.try_with(Arc::clone).ok();
    move || match (active, read_at) {
        (Some(a), _) => CURRENT.sync_scope(a, f),
        (None, Some(s)) => READ_AT.sync_scope(s, f),
        (None, None) => f(),
    }
}
