//! Group commit: many writers, one `fdatasync` at a time covering all of them.
//!
//! A sync runs on the syncer thread, or on the waiting writer's own thread when that writer is
//! the only one waiting, no sync is running and one client has had the server to itself for its
//! last [`LEAD_RUN`] requests (the leader path of [`GroupCommit::durable`]): a lone writer then
//! pays for the `fdatasync` alone, without the two thread wake-ups (the syncer's, then its own)
//! the hand-off costs. The leader blocks its runtime worker for the sync, and with it that
//! worker's share of polling for I/O: a request from another client arriving meanwhile would
//! wait for the disk too. Hence the condition on clients: as soon as a second one is active,
//! syncs go back to the syncer thread.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::Duration;

use tokio::sync::watch;
use tracing::error;

use super::{Batch, Keyspace, Op, Storage, StorageError, StorageResult};

/// Assigns the stamps (cluster times) of [`Batch::stamped`] values, and orders their commits:
/// the oplog's clock (`crate::oplog`).
pub trait Stamper: Send + Sync {
    /// Runs `apply` with the first of `n` consecutive stamps, each one more than the last,
    /// later than every stamp given before, with no other stamped commit running meanwhile: a
    /// commit with later stamps becomes visible after one with earlier stamps. Returns the last
    /// stamp.
    fn stamp(&self, n: u64, apply: &mut dyn FnMut(u64) -> StorageResult<()>) -> StorageResult<u64>;

    /// The last stamp committed (every earlier one is committed too): read before a sync.
    fn mark(&self) -> u64;

    /// A sync that started after `mark` was read succeeded: every stamp up to it is durable.
    fn synced(&self, mark: u64);

    /// The values stamped `first`, `first + 1`… were committed, with these sizes (each value's
    /// bytes, and those of the values kept beside it). Called in stamp order, inside
    /// [`Stamper::stamp`].
    fn committed(&self, first: u64, sizes: &[(u64, u64)]) {
        let _ = (first, sizes);
    }
}

/// Requests in a row from one client (see [`GroupCommit::note_client`]) before its writers may
/// lead their own syncs.
pub const LEAD_RUN: u64 = 8;

/// How long a relaxed (`j: false`) write may stay unsynced: MongoDB's journal interval.
pub const RELAXED_SYNC_INTERVAL: Duration = Duration::from_millis(100);

/// Wraps a [`Storage`]: commits are counted, a syncer thread makes them durable in groups, and
/// writers wait for the durable mark to pass their commit.
pub struct GroupCommit {
    storage: Arc<dyn Storage>,
    shared: Arc<Shared>,
    durable: watch::Receiver<u64>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
}

struct Shared {
    /// Number of commits applied so far; a commit's ticket is the value after it.
    committed: AtomicU64,
    /// Wakes the syncer when there is something to sync.
    pending: Mutex<bool>,
    wake: Condvar,
    /// Held for each sync (by the syncer thread or a leading writer): the commits it covered.
    syncing: Mutex<u64>,
    /// The durable mark: every commit up to it is durable.
    durable: watch::Sender<u64>,
    /// Writers waiting in [`GroupCommit::durable`].
    waiting: AtomicU64,
    /// Whether a lone waiting writer may sync on its own thread.
    lead: AtomicBool,
    /// The client the last request came from ([`GroupCommit::note_client`]; 0: none yet), and
    /// how many requests in a row came from it since.
    last_client: AtomicU64,
    client_run: AtomicU64,
    stop: AtomicBool,
    failed: Mutex<Option<StorageError>>,
    /// Stamps [`Batch::stamped`] values, and learns which are durable.
    stamper: OnceLock<Arc<dyn Stamper>>,
}

impl std::fmt::Debug for GroupCommit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GroupCommit")
            .field("durable", &*self.durable.borrow())
            .finish_non_exhaustive()
    }
}

impl GroupCommit {
    /// Starts the syncer thread for `storage`.
    pub fn new(storage: Arc<dyn Storage>) -> Self {
        let (tx, rx) = watch::channel(0);
        let shared = Arc::new(Shared {
            committed: AtomicU64::new(0),
            pending: Mutex::new(false),
            wake: Condvar::new(),
            syncing: Mutex::new(0),
            durable: tx,
            waiting: AtomicU64::new(0),
            lead: AtomicBool::new(true),
            last_client: AtomicU64::new(0),
            client_run: AtomicU64::new(0),
            stop: AtomicBool::new(false),
            failed: Mutex::new(None),
            stamper: OnceLock::new(),
        });
        let thread = {
            let storage = Arc::clone(&storage);
            let shared = Arc::clone(&shared);
            std::thread::Builder::new()
                .name("ebb-sync".into())
                .spawn(move || syncer(&*storage, &shared))
                .ok()
        };
        GroupCommit {
            storage,
            shared,
            durable: rx,
            thread: Mutex::new(thread),
        }
    }

    /// The engine, for reads.
    pub fn storage(&self) -> &Arc<dyn Storage> {
        &self.storage
    }

    /// From now on, [`Batch::stamped`] values are written under stamps `stamper` gives (before,
    /// they were dropped). Set once; a second call changes nothing.
    pub fn set_stamper(&self, stamper: Arc<dyn Stamper>) {
        let _ = self.shared.stamper.set(stamper);
    }

    /// Whether stamped values are written (an oplog is kept).
    pub fn stamps(&self) -> bool {
        self.shared.stamper.get().is_some()
    }

    /// Applies `batch` (blocking) and returns its ticket for [`GroupCommit::durable`].
    pub fn commit(&self, batch: Batch) -> StorageResult<u64> {
        self.commit_stamped(batch).map(|(ticket, _)| ticket)
    }

    /// [`GroupCommit::commit`], also returning the last stamp its stamped values got, if any.
    ///
    /// When the engine would likely make the commit wait ([`Storage::may_stall`]: flushes or
    /// compactions behind, for up to 100 ms at a time), and the caller is a worker of a
    /// multi-threaded async runtime, the worker's other tasks move to another thread first
    /// (`block_in_place`), so that the other connections it serves do not wait with it. Not
    /// always: that hand-over costs a thread wake-up, which every commit would pay.
    pub fn commit_stamped(&self, batch: Batch) -> StorageResult<(u64, Option<u64>)> {
        if let Some(e) = self.failure() {
            return Err(e);
        }
        if self.storage.may_stall(&batch) && on_multi_thread_runtime() {
            #[expect(
                clippy::disallowed_methods,
                reason = "the commit is synchronous (its callers hold locks across it) and blocks \
                          anyway: block_in_place hands the worker's other tasks to another thread \
                          for it, only when a stall is likely, only on a multi-threaded runtime"
            )]
            tokio::task::block_in_place(|| self.apply(batch))
        } else {
            self.apply(batch)
        }
    }

    fn apply(&self, mut batch: Batch) -> StorageResult<(u64, Option<u64>)> {
        // What the running command writes counts in its tally, if it has one (`storage::tally`).
        super::tally::note_batch(&batch);
        let values = std::mem::take(&mut batch.stamped);
        let last = match self.shared.stamper.get() {
            Some(stamper) if !values.is_empty() => {
                let n = values.len() as u64;
                // The values are one run (`storage::runs`), stored under the first stamp: only
                // the stamps are written under the clock's lock.
                let sizes = values.sizes();
                let mut pending = Some((batch, values.into_parts()));
                let storage = &self.storage;
                Some(stamper.stamp(n, &mut |first| {
                    let Some((mut batch, mut run)) = pending.take() else {
                        return Err(StorageError::Engine("a stamped commit ran twice".into()));
                    };
                    for (stamp, &at) in (first..).zip(&run.ts_at) {
                        if let Some(at) = run.bytes.get_mut(at..at + 8) {
                            at.copy_from_slice(&stamp.to_le_bytes());
                        }
                    }
                    let stored = run.runs();
                    batch.ops.reserve(stored.len() + run.beside.len());
                    if let [(_, whole)] = &stored[..]
                        && whole.len() == run.bytes.len()
                    {
                        batch.ops.push(Op::Put(
                            Keyspace::Oplog,
                            first.to_be_bytes().to_vec().into(),
                            std::mem::take(&mut run.bytes).into(),
                        ));
                    } else {
                        for (i, bytes) in stored {
                            let key = first.saturating_add(i).to_be_bytes().to_vec();
                            let value = run.bytes.get(bytes).unwrap_or_default().to_vec();
                            batch
                                .ops
                                .push(Op::Put(Keyspace::Oplog, key.into(), value.into()));
                        }
                    }
                    for (i, n, value) in run.beside {
                        let mut key = first.saturating_add(i).to_be_bytes().to_vec();
                        key.extend_from_slice(&n.to_be_bytes());
                        batch
                            .ops
                            .push(Op::Put(Keyspace::Oplog, key.into(), value.into()));
                    }
                    storage.commit(batch)?;
                    stamper.committed(first, &sizes);
                    Ok(())
                })?)
            }
            _ => {
                self.storage.commit(batch)?;
                None
            }
        };
        let ticket = self.shared.committed.fetch_add(1, Ordering::SeqCst) + 1;
        Ok((ticket, last))
    }

    /// Whether a lone waiting writer may run the sync on its own thread (the default) rather
    /// than always handing it to the syncer thread: for measuring one against the other.
    pub fn set_lead(&self, lead: bool) {
        self.shared.lead.store(lead, Ordering::Relaxed);
    }

    /// The server received a request from client `id` (a connection; not 0). Writers lead their
    /// own syncs only after [`LEAD_RUN`] requests in a row from one client; until the first
    /// call (the engine used without a server), always.
    pub fn note_client(&self, id: u64) {
        let shared = &self.shared;
        if shared.last_client.load(Ordering::Relaxed) == id {
            shared.client_run.fetch_add(1, Ordering::Relaxed);
        } else {
            shared.last_client.store(id, Ordering::Relaxed);
            shared.client_run.store(0, Ordering::Relaxed);
        }
    }

    /// Whether a lone waiting writer may lead its own sync now.
    fn may_lead(&self) -> bool {
        let shared = &self.shared;
        shared.lead.load(Ordering::Relaxed)
            && (shared.last_client.load(Ordering::Relaxed) == 0
                || shared.client_run.load(Ordering::Relaxed) >= LEAD_RUN)
    }

    /// Waits until the commit with `ticket` is durable. Relaxed writers skip this; the syncer
    /// still covers them within [`RELAXED_SYNC_INTERVAL`].
    ///
    /// A writer that finds itself the only one waiting, with no sync running, while one client
    /// has the server to itself, runs the sync itself, blocking its thread for one `fdatasync`
    /// (see the module's documentation).
    pub async fn durable(&self, ticket: u64) -> StorageResult<()> {
        if !self.storage.is_durable() {
            return Ok(());
        }
        let waiting = Waiting::enter(&self.shared);
        if *self.durable.borrow() < ticket
            && waiting.alone
            && self.may_lead()
            && let Ok(mut synced) = self.shared.syncing.try_lock()
        {
            // A sync that ran since the check above may already cover the ticket.
            if *synced < ticket {
                sync_once(&*self.storage, &self.shared, &mut synced);
            }
        }
        if *self.durable.borrow() < ticket {
            {
                let mut pending = self
                    .shared
                    .pending
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                *pending = true;
            }
            // Notified after the lock is released, so that the syncer does not wake only to
            // wait for it.
            self.shared.wake.notify_one();
        }
        let mut rx = self.durable.clone();
        let reached = rx.wait_for(|&d| d >= ticket).await;
        match (reached, self.failure()) {
            (_, Some(e)) => Err(e),
            (Ok(_), None) => Ok(()),
            (Err(_), None) => Err(StorageError::Engine("the sync thread stopped".into())),
        }
    }

    fn failure(&self) -> Option<StorageError> {
        self.shared
            .failed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Syncs what is left and stops the syncer.
    pub fn shutdown(&self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        self.shared.wake.notify_one();
        let handle = self
            .thread
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        if let Some(h) = handle {
            let _ = h.join();
        }
    }
}

impl Drop for GroupCommit {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Whether this thread runs inside a multi-threaded tokio runtime, where `block_in_place` may
/// be called (it panics inside a current-thread runtime).
fn on_multi_thread_runtime() -> bool {
    tokio::runtime::Handle::try_current()
        .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread)
}

/// Counts a writer in [`GroupCommit::durable`] while it waits.
struct Waiting<'a> {
    shared: &'a Shared,
    /// Whether no other writer was waiting when this one came.
    alone: bool,
}

impl<'a> Waiting<'a> {
    fn enter(shared: &'a Shared) -> Self {
        let before = shared.waiting.fetch_add(1, Ordering::SeqCst);
        Waiting {
            shared,
            alone: before == 0,
        }
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.shared.waiting.fetch_sub(1, Ordering::SeqCst);
    }
}

/// One sync, by whoever holds `syncing` (its guarded value is `synced`): makes every commit
/// counted so far durable and publishes the new mark. `false` if the sync failed, which stops
/// every later write.
fn sync_once(storage: &dyn Storage, shared: &Shared, synced: &mut u64) -> bool {
    if shared
        .failed
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .is_some()
    {
        return false;
    }
    let target = shared.committed.load(Ordering::SeqCst);
    if target <= *synced {
        return true;
    }
    // Read before the sync: every stamp up to it is in what the sync makes durable.
    let mark = shared.stamper.get().map(|s| (s, s.mark()));
    if let Err(e) = storage.sync() {
        error!(error = %e, "journal sync failed: refusing further writes");
        *shared
            .failed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(e);
        // Wake every waiter so that each sees the failure.
        shared.durable.send_replace(u64::MAX);
        return false;
    }
    *synced = target;
    if let Some((stamper, mark)) = mark {
        stamper.synced(mark);
    }
    shared.durable.send_replace(target);
    true
}

fn syncer(storage: &dyn Storage, shared: &Shared) {
    loop {
        {
            let pending = shared
                .pending
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            // Sleep until a writer waits, or the relaxed interval passes with unsynced commits.
            let (mut pending, _) = shared
                .wake
                .wait_timeout_while(pending, RELAXED_SYNC_INTERVAL, |p| {
                    !*p && !shared.stop.load(Ordering::SeqCst)
                })
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            *pending = false;
        }
        let mut synced = shared
            .syncing
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if !sync_once(storage, shared, &mut synced) {
            return;
        }
        if shared.stop.load(Ordering::SeqCst) && shared.committed.load(Ordering::SeqCst) == *synced
        {
            return;
        }
    }
}
