//! Request units: what a command is charged, estimated from the work it did
//! (`docs/cosmos-request-units.md` gives the formula and where its constants come from).
//!
//! [`run`] gives a command a [`Tally`] for as long as it runs; the storage reads and writes it
//! makes add to it: reads through snapshots that [`counted`] wraps (the catalog's snapshots,
//! taken while a tally is set), writes through [`note_batch`] at the one place every commit
//! passes. Blocking work a command hands to another thread takes the tally with it through
//! [`carry`]. Outside the profile no tally is ever set: snapshots are not wrapped, and the
//! cost is one failed task-local lookup per snapshot and per commit.

use std::cell::RefCell;
use std::future::Future;
use std::ops::Bound;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::storage::{Batch, Keyspace, Op, Scan, Snapshot, StorageResult};

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
}

/// The constants of the charge formula (`docs/cosmos-request-units.md`), settable with
/// `--cosmos-ru NAME=VALUE`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rates {
    /// A point read of a document of up to 1 KB (Microsoft: 1 RU).
    pub point_read: f64,
    /// Each KB read beyond the first of a point read, and each KB a query reads (Microsoft:
    /// 100 KB cost 10 RU, so 9 RU for 99 KB).
    pub read_kb: f64,
    /// A query's fixed cost (not published: what small queries are seen to cost).
    pub query: f64,
    /// Each document a query loads (not published).
    pub query_doc: f64,
    /// Each index entry a query reads (not published).
    pub index_read: f64,
    /// A write (insert, replace, delete) of a document of up to 1 KB (Microsoft: 5 RU).
    pub write: f64,
    /// Each KB written beyond the first of a document (Microsoft: 100 KB cost 50 RU, so 45 RU
    /// for 99 KB).
    pub write_kb: f64,
    /// Each index entry written beyond one per document (the `_id` one, in the write's cost).
    pub index_write: f64,
}

impl Default for Rates {
    fn default() -> Self {
        Rates {
            point_read: 1.0,
            read_kb: 9.0 / 99.0,
            query: 2.0,
            query_doc: 0.1,
            index_read: 0.01,
            write: 5.0,
            write_kb: 45.0 / 99.0,
            index_write: 0.5,
        }
    }
}

/// The names of the [`Rates`], as `--cosmos-ru` takes them.
pub const RATE_NAMES: [&str; 8] = [
    "point_read",
    "read_kb",
    "query",
    "query_doc",
    "index_read",
    "write",
    "write_kb",
    "index_write",
];

impl Rates {
    /// Sets the rate named `name` (one of [`RATE_NAMES`]).
    pub fn set(&mut self, name: &str, value: f64) -> Result<(), String> {
        if !value.is_finite() || value < 0.0 {
            return Err(format!(
                "'{value}' is not a number of request units (0 or more)"
            ));
        }
        let slot = match name {
            "point_read" => &mut self.point_read,
            "read_kb" => &mut self.read_kb,
            "query" => &mut self.query,
            "query_doc" => &mut self.query_doc,
            "index_read" => &mut self.index_read,
            "write" => &mut self.write,
            "write_kb" => &mut self.write_kb,
            "index_write" => &mut self.index_write,
            _ => {
                return Err(format!(
                    "'{name}' is not a request-unit rate (one of {})",
                    RATE_NAMES.join(", ")
                ));
            }
        };
        *slot = value;
        Ok(())
    }

    /// The rates `settings` (`NAME=VALUE` pairs, later ones winning) make of the defaults.
    pub fn from_settings(settings: &[(String, f64)]) -> Result<Rates, String> {
        let mut rates = Rates::default();
        for (name, value) in settings {
            rates.set(name, *value)?;
        }
        Ok(rates)
    }

    /// The request units `work` costs, rounded to hundredths as Cosmos DB reports them.
    pub fn charge(&self, work: &Work) -> f64 {
        #[expect(
            clippy::cast_precision_loss,
            reason = "counts far below 2^52; an estimate"
        )]
        let f = |n: u64| n as f64;
        let kb = |bytes: u64| f(bytes) / 1024.0;
        let read = if work.docs_read == 0 && work.index_read == 0 && work.doc_scans == 0 {
            0.0
        } else if work.doc_scans == 0 && work.docs_read <= 1 && work.index_read <= 1 {
            // A point read: one key looked up, one document fetched.
            self.point_read + self.read_kb * (kb(work.bytes_read) - 1.0).max(0.0)
        } else {
            self.query
                + self.query_doc * f(work.docs_read)
                + self.read_kb * kb(work.bytes_read)
                + self.index_read * f(work.index_read)
        };
        let docs = work.docs_written.saturating_add(work.docs_deleted);
        let extra_kb = (kb(work.bytes_written) - f(work.docs_written)).max(0.0);
        let extra_index = work.index_written.saturating_sub(docs);
        let write =
            self.write * f(docs) + self.write_kb * extra_kb + self.index_write * f(extra_index);
        ((read + write) * 100.0).round() / 100.0
    }
}

impl Rates {
    /// [`Rates::charge`] for a command on a collection: at least a point read, which is what
    /// looking a key up costs even when nothing is found.
    pub fn charge_on_collection(&self, work: &Work) -> f64 {
        self.charge(work).max(self.point_read)
    }
}

/// Parses `--cosmos-ru NAME=VALUE`.
pub fn parse_setting(value: &str) -> Result<(String, f64), String> {
    let (name, number) = value
        .split_once('=')
        .ok_or_else(|| format!("'{value}' is not NAME=VALUE"))?;
    let number: f64 = number
        .trim()
        .parse()
        .map_err(|_| format!("'{number}' is not a number"))?;
    Rates::default().set(name.trim(), number)?;
    Ok((name.trim().to_owned(), number))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rates() -> Rates {
        Rates::default()
    }

    /// Microsoft's published figures: a point read of 1 KB costs 1 RU and of 100 KB 10 RU; a
    /// write of 1 KB costs 5 RU and of 100 KB 50 RU.
    #[test]
    fn anchors_on_microsofts_figures() {
        let point = |bytes| Work {
            docs_read: 1,
            bytes_read: bytes,
            index_read: 1,
            ..Work::default()
        };
        assert!((rates().charge(&point(1024)) - 1.0).abs() < 1e-9);
        assert!((rates().charge(&point(100 * 1024)) - 10.0).abs() < 1e-9);
        assert!((rates().charge(&point(200)) - 1.0).abs() < 1e-9);
        let insert = |bytes| Work {
            docs_written: 1,
            bytes_written: bytes,
            index_written: 1,
            ..Work::default()
        };
        assert!((rates().charge(&insert(1024)) - 5.0).abs() < 1e-9);
        assert!((rates().charge(&insert(100 * 1024)) - 50.0).abs() < 1e-9);
        assert!((rates().charge(&insert(100)) - 5.0).abs() < 1e-9);
    }

    #[test]
    fn scans_cost_more_than_point_reads() {
        let scan = Work {
            docs_read: 100,
            bytes_read: 100 * 1024,
            doc_scans: 1,
            ..Work::default()
        };
        // 2 + 100 × 0.1 + 100 KB × 9/99 = 21.09
        assert!((rates().charge(&scan) - 21.09).abs() < 1e-9);
        // A query that finds nothing still costs its fixed part.
        let empty = Work {
            doc_scans: 1,
            ..Work::default()
        };
        assert!((rates().charge(&empty) - 2.0).abs() < 1e-9);
        // A command that read and wrote nothing costs nothing, unless it is on a collection:
        // then at least a point read (a lookup by `_id` that finds nothing).
        assert!(rates().charge(&Work::default()).abs() < 1e-9);
        assert!((rates().charge_on_collection(&Work::default()) - 1.0).abs() < 1e-9);
        assert!((rates().charge_on_collection(&scan) - 21.09).abs() < 1e-9);
    }

    #[test]
    fn secondary_index_entries_and_deletes_are_charged() {
        // An insert of a 1 KB document into a collection with two secondary indexes.
        let insert = Work {
            docs_written: 1,
            bytes_written: 1024,
            index_written: 3,
            ..Work::default()
        };
        assert!((rates().charge(&insert) - 6.0).abs() < 1e-9);
        // A delete by `_id`: a point read, then the document and its one index entry removed.
        let delete = Work {
            docs_read: 1,
            bytes_read: 1024,
            index_read: 1,
            docs_deleted: 1,
            index_written: 1,
            ..Work::default()
        };
        assert!((rates().charge(&delete) - 6.0).abs() < 1e-9);
    }

    #[test]
    fn rates_are_settable_by_name() {
        let r = Rates::from_settings(&[("write".into(), 10.0), ("query".into(), 3.0)]).unwrap();
        assert!((r.write - 10.0).abs() < 1e-9 && (r.query - 3.0).abs() < 1e-9);
        assert_eq!(parse_setting("write_kb=0.5"), Ok(("write_kb".into(), 0.5)));
        assert!(parse_setting("nope=1").is_err());
        assert!(parse_setting("write=-1").is_err());
        assert!(parse_setting("write=NaN").is_err());
        assert!(parse_setting("write").is_err());
    }

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
