//! Work accounting: what the running command read and wrote, counted as it goes, for those
//! who charge for it (the Cosmos DB profile's request units, `crate::cosmos::ru`).
//!
//! [`run`] gives a command a [`Tally`] for as long as it runs; the storage reads and writes it
//! makes add to it: reads through snapshots that [`counted`] wraps (the catalog's snapshots,
//! taken while a tally is set), writes through [`note_batch`] at the one place every commit
//! passes. Blocking work a command hands to another thread takes the tally with it through
//! [`carry`]. When no tally is set (always, outside the profile), snapshots are not wrapped,
//! and the cost is one failed task-local lookup per snapshot and per commit.

use std::cell::RefCell;
use std::future::Future;
use std::ops::Bound;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use super::{Batch, Keyspace, Op, Scan, Snapshot, StorageResult};

/// The work a command did, counted as it goes (shared with the threads it reads on).
#[derive(Debug, Default)]
pub struct Tally {
    docs_read: AtomicU64,
    bytes_read: AtomicU64,
    index_read: AtomicU64,
    doc_scans: AtomicU64,
    docs_written: AtomicU64,
    bytes_written: AtomicU64,
    docs_deleted: AtomicU64,
    index_written: AtomicU64,
}

/// What a [`Tally`] counted, read once the command is done.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Work {
    /// Document records read (fetched by key or met by a scan).
    pub docs_read: u64,
    /// Bytes of the document records read.
    pub bytes_read: u64,
    /// Index entries read (index scans and lookups, the `_id` index included).
    pub index_read: u64,
    /// Scans over a collection's records (collection scans; a point read has none).
    pub doc_scans: u64,
    /// Document records written (inserted or replaced).
    pub docs_written: u64,
    /// Bytes of the document records written.
    pub bytes_written: u64,
    /// Document records deleted.
    pub docs_deleted: u64,
    /// Index entries written or deleted.
    pub index_written: u64,
}

impl Tally {
    /// What was counted so far.
    pub fn work(&self) -> Work {
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        Work {
            docs_read: get(&self.docs_read),
            bytes_read: get(&self.bytes_read),
            index_read: get(&self.index_read),
            doc_scans: get(&self.doc_scans),
            docs_written: get(&self.docs_written),
            bytes_written: get(&self.bytes_written),
            docs_deleted: get(&self.docs_deleted),
            index_written: get(&self.index_written),
        }
    }

    fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    /// One entry of `ks` read, `len` bytes long.
    fn read(&self, ks: Keyspace, len: usize) {
        match ks {
            Keyspace::Docs => {
                Tally::add(&self.docs_read, 1);
                Tally::add(&self.bytes_read, len as u64);
            }
            Keyspace::Index => Tally::add(&self.index_read, 1),
            Keyspace::Catalog | Keyspace::Expiry | Keyspace::Sessions | Keyspace::Oplog => {}
        }
    }
}

tokio::task_local! {
    /// The running command's tally (set by [`run`]).
    static TALLY: Arc<Tally>;
}

thread_local! {
    /// The tally of the command whose blocking work runs on this thread (set by [`carry`]).
    static BLOCKING: RefCell<Option<Arc<Tally>>> = const { RefCell::new(None) };
}

/// Runs `f` (a command) counting its work in `tally`.
pub async fn run<F: Future>(tally: Arc<Tally>, f: F) -> F::Output {
    TALLY.scope(tally, f).await
}

/// The tally of the command running here, if any.
fn current() -> Option<Arc<Tally>> {
    TALLY
        .try_with(Arc::clone)
        .ok()
        .or_else(|| BLOCKING.with(|b| b.borrow().clone()))
}

/// Calls `f` with the current tally, if there is one.
fn with_current(f: impl Fn(&Tally)) {
    if TALLY.try_with(|t| f(t)).is_err() {
        BLOCKING.with(|b| {
            if let Some(t) = &*b.borrow() {
                f(t);
            }
        });
    }
}

/// `f` as blocking work that counts in the running command's tally: call on the command's
/// task, run the result anywhere (`spawn_blocking`).
pub fn carry<T>(f: impl FnOnce() -> T) -> impl FnOnce() -> T {
    let tally = current();
    move || match tally {
        None => f(),
        Some(t) => {
            let before = BLOCKING.with(|b| b.replace(Some(t)));
            let out = f();
            BLOCKING.with(|b| *b.borrow_mut() = before);
            out
        }
    }
}

/// `snapshot`, counting what is read through it in whichever command reads it, when taken
/// while a command's work is counted; else `snapshot` itself.
pub fn counted(snapshot: Box<dyn Snapshot>) -> Box<dyn Snapshot> {
    if TALLY.try_with(|_| ()).is_err() && BLOCKING.with(|b| b.borrow().is_none()) {
        return snapshot;
    }
    Box::new(Counted(snapshot))
}

/// Counts a commit's document and index changes in the running command's tally.
pub fn note_batch(batch: &Batch) {
    with_current(|t| {
        for op in &batch.ops {
            match op {
                Op::Put(Keyspace::Docs, _, v) | Op::Replace(Keyspace::Docs, _, v) => {
                    Tally::add(&t.docs_written, 1);
                    Tally::add(&t.bytes_written, v.len() as u64);
                }
                Op::Delete(Keyspace::Docs, _)
                | Op::DeleteOnce(Keyspace::Docs, _)
                | Op::Expire(Keyspace::Docs, _) => Tally::add(&t.docs_deleted, 1),
                Op::Put(Keyspace::Index, ..)
                | Op::Replace(Keyspace::Index, ..)
                | Op::Delete(Keyspace::Index, _)
                | Op::DeleteOnce(Keyspace::Index, _)
                | Op::Expire(Keyspace::Index, _) => Tally::add(&t.index_written, 1),
                Op::Put(..) | Op::Replace(..) | Op::Delete(..) | Op::DeleteOnce(..) => {}
                Op::Expire(..) => {}
            }
        }
    });
}

/// A snapshot that counts what is read through it (see [`counted`]).
struct Counted(Box<dyn Snapshot>);

impl Snapshot for Counted {
    fn share(&self) -> Option<Box<dyn Snapshot>> {
        // Counted in the tally of whichever thread reads (see [`carry`]).
        Some(Box::new(Counted(self.0.share()?)))
    }

    fn get(&self, ks: Keyspace, key: &[u8]) -> StorageResult<Option<bytes::Bytes>> {
        let value = self.0.get(ks, key)?;
        if let Some(v) = &value {
            with_current(|t| t.read(ks, v.len()));
        }
        Ok(value)
    }

    fn range(
        &self,
        ks: Keyspace,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        reverse: bool,
    ) -> Scan<'_> {
        let inner = self.0.range(ks, lower, upper, reverse);
        match ks {
            Keyspace::Docs | Keyspace::Index => {
                if ks == Keyspace::Docs {
                    with_current(|t| Tally::add(&t.doc_scans, 1));
                }
                Box::new(inner.inspect(move |entry| {
                    if let Ok((_, v)) = entry {
                        with_current(|t| t.read(ks, v.len()));
                    }
                }))
            }
            Keyspace::Catalog | Keyspace::Expiry | Keyspace::Sessions | Keyspace::Oplog => inner,
        }
    }

    fn scanned(&self, ks: Keyspace, id: u64, returned: u64) {
        self.0.scanned(ks, id, returned);
    }

    fn stored_get(&self, ks: Keyspace, key: &[u8]) -> StorageResult<Option<bytes::Bytes>> {
        self.0.stored_get(ks, key)
    }

    fn stored_range(
        &self,
        ks: Keyspace,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        reverse: bool,
    ) -> Scan<'_> {
        self.0.stored_range(ks, lower, upper, reverse)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reads through a counted snapshot and writes noted in a batch land in the running
    /// command's tally, on its task and on a thread it carries the tally to; nothing is
    /// counted without one.
    #[tokio::test]
    async fn counts_reads_and_writes_of_the_running_command() {
        let store = crate::storage::MemoryStorage::new();
        let mut batch = Batch::new();
        batch.put(Keyspace::Docs, &b"a"[..], vec![0_u8; 10]);
        batch.put(Keyspace::Docs, &b"b"[..], vec![0_u8; 20]);
        batch.put(Keyspace::Index, &b"a"[..], Vec::new());
        crate::storage::Storage::commit(&store, batch.clone()).unwrap();
        let tally = Arc::new(Tally::default());
        let work = run(Arc::clone(&tally), async {
            let snap = counted(crate::storage::Storage::snapshot(&store));
            assert!(snap.get(Keyspace::Docs, b"a").unwrap().is_some());
            let blocking = carry(move || {
                let n = snap
                    .range(Keyspace::Docs, Bound::Unbounded, Bound::Unbounded, false)
                    .count();
                let _ = snap.get(Keyspace::Index, b"a");
                n
            });
            assert_eq!(tokio::task::spawn_blocking(blocking).await.unwrap(), 2);
            note_batch(&batch);
            tally.work()
        })
        .await;
        assert_eq!(
            work,
            Work {
                docs_read: 3,
                bytes_read: 40,
                index_read: 1,
                doc_scans: 1,
                docs_written: 2,
                bytes_written: 30,
                docs_deleted: 0,
                index_written: 1,
            }
        );
        // Outside a command nothing is counted.
        note_batch(&batch);
        assert_eq!(tally.work().docs_written, 2);
    }
}
