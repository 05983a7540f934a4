//! The rest of a large collection scan read as two halves on two threads, when a second core
//! is idle: for callers that read a scan to its end (counts, aggregation input, `distinct`,
//! explain), and for batches limited only by their size (a `getMore` without `batchSize`).
//! Measured by `benches/filter.rs` part 3: 1.7–1.9× faster on this 2-core machine when idle,
//! at the same CPU; nothing gained when the cores are busy, hence the check. Through the wire
//! (`benches/scan.rs`, a 1% filter over 100k documents): 1.5× faster.

use std::ops::Bound;
use std::sync::atomic::{AtomicBool, Ordering};

use super::{Record, Scan, rid_of};
use crate::error::{CommandError, CommandResult};
use crate::storage::{Keyspace, record};

/// Fewest records (as a span of record ids) a scan must have left to be split: below it the
/// second thread costs more than it saves.
const SPLIT_MIN: u64 = 32_768;

/// Whether a core is idle now: fewer threads runnable on the machine (`procs_running` in
/// `/proc/stat`, the caller's included) than it has cores. Never elsewhere than Linux.
fn idle_core() -> bool {
    #[cfg(test)]
    if tests::FORCE.with(std::cell::Cell::get) {
        return true;
    }
    let cores = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
    if cores < 2 {
        return false;
    }
    let Ok(stat) = std::fs::read_to_string("/proc/stat") else {
        return false;
    };
    stat.lines()
        .find_map(|l| l.strip_prefix("procs_running "))
        .and_then(|n| n.trim().parse::<usize>().ok())
        .is_some_and(|running| running < cores)
}

fn bound(b: &Bound<Vec<u8>>) -> Bound<&[u8]> {
    match b {
        Bound::Included(k) => Bound::Included(k.as_slice()),
        Bound::Excluded(k) => Bound::Excluded(k.as_slice()),
        Bound::Unbounded => Bound::Unbounded,
    }
}

impl Scan {
    /// Hands the upper half of what is left to a new scan over another handle on the same
    /// snapshot, and keeps the lower half. Only for a forward scan of documents with no skip
    /// or limit (whose halves' results, concatenated, are its own), allowed to split, with at
    /// least [`SPLIT_MIN`] records left, and a core idle.
    fn split(&mut self) -> CommandResult<Option<Scan>> {
        if !self.split || self.keyspace != Keyspace::Docs || self.reverse || self.done {
            return Ok(None);
        }
        if self.skip > 0 || self.remaining.is_some() {
            return Ok(None);
        }
        let ends = |reverse: bool| -> CommandResult<Option<Vec<u8>>> {
            let mut entries = self.snapshot.range(
                Keyspace::Docs,
                bound(&self.lower),
                bound(&self.upper),
                reverse,
            );
            Ok(match entries.next() {
                Some(entry) => Some(entry?.0.to_vec()),
                None => None,
            })
        };
        let (Some(first), Some(last)) = (ends(false)?, ends(true)?) else {
            return Ok(None);
        };
        let (lo, hi) = (rid_of(&first)?, rid_of(&last)?);
        if hi.saturating_sub(lo) < SPLIT_MIN || !idle_core() {
            return Ok(None);
        }
        let Some(snapshot) = self.snapshot.share() else {
            return Ok(None);
        };
        let prefix = first
            .get(..first.len().saturating_sub(8))
            .ok_or_else(|| CommandError::internal("a document key too short"))?;
        let mut middle = prefix.to_vec();
        middle.extend_from_slice(&(lo + (hi - lo) / 2).to_be_bytes());
        debug_assert_eq!(record::rid_of_doc_key(&middle), Some(lo + (hi - lo) / 2));
        let upper = std::mem::replace(&mut self.upper, Bound::Excluded(middle.clone()));
        Ok(Some(Scan {
            snapshot,
            lower: Bound::Included(middle),
            upper,
            filter: self.filter.clone(),
            projection: self.projection.clone(),
            skip: 0,
            remaining: None,
            now_ms: self.now_ms,
            done: false,
            reverse: false,
            examined: 0,
            interrupt: self.interrupt.clone(),
            whole: None,
            keyspace: self.keyspace,
            split: false,
        }))
    }

    /// Runs `each` over the rest of the scan, on two threads over its two halves when it
    /// splits (see [`Scan::split`]); `None` when it does not (nothing read then).
    fn on_halves<T: Send>(
        &mut self,
        each: impl Fn(&mut Scan) -> CommandResult<T> + Sync,
    ) -> CommandResult<Option<(T, T)>> {
        let Some(mut upper) = self.split()? else {
            return Ok(None);
        };
        // The halves are one scan of the whole: the store hears of it once, at the end.
        let whole = self.whole.take();
        let each = &each;
        let (lower, higher) = side_by_side(|| each(self), || each(&mut upper));
        let (lower, higher) = (lower?, higher?);
        self.examined += upper.examined;
        if let Some(id) = whole {
            self.snapshot.scanned(self.keyspace, id, self.examined);
        }
        self.done = true;
        Ok(Some((lower, higher)))
    }

    /// Every record left, in order (two halves read at once when it splits); `None` when it
    /// does not split.
    pub(super) fn drain_split(&mut self) -> CommandResult<Option<Vec<Record>>> {
        Ok(self
            .on_halves(|s| {
                let mut all = Vec::new();
                loop {
                    let batch = s.next_records(usize::MAX, usize::MAX)?;
                    if batch.is_empty() {
                        return Ok(all);
                    }
                    all.extend(batch);
                }
            })?
            .map(|(mut lower, higher)| {
                lower.extend(higher);
                lower
            }))
    }

    /// How many records are left (two halves counted at once when it splits); `None` when it
    /// does not split.
    pub(super) fn count_split(&mut self) -> CommandResult<Option<usize>> {
        Ok(self
            .on_halves(|s| {
                let mut n = 0;
                loop {
                    let batch = s.next_records(COUNT_BATCH, usize::MAX)?;
                    if batch.is_empty() {
                        return Ok(n);
                    }
                    n += batch.len();
                }
            })?
            .map(|(a, b)| a + b))
    }
}

/// Entries the upper half of a split batch reads between looks at whether the lower half
/// still needs it.
const UPPER_CHUNK: u64 = 4_096;

impl Scan {
    /// A batch limited only by its size (`max_bytes`), read as two halves on two threads when
    /// the scan splits (see [`Scan::split`]): a `getMore` without `batchSize` over a large
    /// collection scan. `None` when it does not split (nothing read then); otherwise whether it
    /// stopped for a budget, which it never does (`Some(false)`).
    ///
    /// The lower half fills the batch on this thread while another reads the upper half
    /// (each document read once, by one of them). When the lower half reads to its end and the
    /// upper half's documents fit in what is left of the batch, the batch is both, and the scan
    /// goes on where the upper half stopped; otherwise the upper half's documents are dropped
    /// (read again by the next batch) and the scan goes on where the lower half stopped. The
    /// upper thread stops early (within [`UPPER_CHUNK`] entries) once the lower half has
    /// filled the batch.
    pub(super) fn fill_split(
        &mut self,
        out: &mut Vec<Record>,
        max_bytes: usize,
    ) -> CommandResult<Option<bool>> {
        let whole_upper = self.upper.clone();
        let Some(mut upper) = self.split()? else {
            return Ok(None);
        };
        #[cfg(test)]
        tests::BATCH_SPLITS.with(|n| n.set(n.get() + 1));
        let Bound::Included(middle) = upper.lower.clone() else {
            return Err(CommandError::internal(
                "a split scan's upper half has no start",
            ));
        };
        // The halves are one scan of the whole: the store hears of it once, at the end.
        let whole = self.whole.take();
        let stop = AtomicBool::new(false);
        let (lower, higher) = side_by_side(
            || {
                let lower = self.fill_here(out, usize::MAX, max_bytes, u64::MAX);
                if !self.done {
                    stop.store(true, Ordering::Relaxed);
                }
                lower
            },
            || {
                let mut got = Vec::new();
                // In chunks: between them, a look at whether the lower half still needs it.
                loop {
                    if stop.load(Ordering::Relaxed)
                        || !upper.fill_here(&mut got, usize::MAX, max_bytes, UPPER_CHUNK)?
                    {
                        return Ok(got);
                    }
                }
            },
        );
        let higher = match (lower, higher) {
            (Ok(_), Ok(higher)) => higher,
            (Err(e), _) | (_, Err(e)) => {
                self.upper = whole_upper;
                self.whole = whole;
                return Err(e);
            }
        };
        let size = |records: &[Record]| -> usize {
            records.iter().map(|(_, d, _)| d.as_bytes().len()).sum()
        };
        if self.done && (out.is_empty() || size(out) + size(&higher) <= max_bytes) {
            // The lower half is read to the middle, and the upper half's documents fit.
            out.extend(higher);
            self.lower = upper.lower;
            self.upper = upper.upper;
            self.done = upper.done;
            self.examined += upper.examined;
        } else {
            if self.done {
                // The lower half is read to the middle, but both do not fit.
                self.lower = Bound::Included(middle);
                self.done = false;
            }
            // (Otherwise the batch filled before the middle.)
            self.upper = whole_upper;
        }
        if self.done {
            if let Some(id) = whole {
                self.snapshot.scanned(self.keyspace, id, self.examined);
            }
        } else {
            self.whole = whole;
        }
        Ok(Some(false))
    }
}

/// Runs `here` on this thread and `there` on a new one at the same time, and returns both
/// results (an error for `there` if its thread could not start or panicked).
fn side_by_side<A, B: Send>(
    here: impl FnOnce() -> CommandResult<A>,
    there: impl FnOnce() -> CommandResult<B> + Send,
) -> (CommandResult<A>, CommandResult<B>) {
    std::thread::scope(|scope| {
        let handle = std::thread::Builder::new()
            .name("ebb-scan".into())
            .spawn_scoped(scope, crate::storage::tally::carry(there));
        let here = here();
        let there = match handle {
            Ok(h) => h
                .join()
                .unwrap_or_else(|_| Err(CommandError::internal("a scan thread panicked"))),
            Err(e) => Err(CommandError::internal(format!("no scan thread: {e}"))),
        };
        (here, there)
    })
}

/// Records a count reads at a time.
pub(super) const COUNT_BATCH: usize = 10_000;

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use bson::rawdoc;

    use super::*;
    use crate::cursor::Source;
    use crate::query::filter::Filter;
    use crate::query::plan::Access;
    use crate::storage::{Batch, MemoryStorage, Storage};

    thread_local! {
        /// Splits whether or not a core is idle (on this thread).
        pub(super) static FORCE: Cell<bool> = const { Cell::new(false) };
        /// Batches read as two halves ([`Scan::fill_split`]) on this thread.
        pub(super) static BATCH_SPLITS: Cell<u64> = const { Cell::new(0) };
    }

    const COLL: u64 = 5;

    /// `n` documents `{_id: i, k: i % 100}` (every seventh expired at 10), with a gap of
    /// record ids in the middle.
    fn store(n: u64) -> MemoryStorage {
        let storage = MemoryStorage::new();
        let mut batch = Batch::new();
        for i in 0..n {
            let rid = if i < n / 2 { i + 1 } else { i + 1000 };
            let expires = if i % 7 == 0 { 10 } else { record::NEVER };
            let doc = rawdoc! { "_id": i64::try_from(i).unwrap_or(0), "k": i64::try_from(i % 100).unwrap_or(0) };
            batch.put(
                Keyspace::Docs,
                record::doc_key(COLL, rid).to_vec(),
                record::encode(0, expires, &doc),
            );
        }
        storage.commit(batch).expect("commit");
        storage
    }

    fn source(storage: &MemoryStorage, split: bool) -> Source {
        let filter = Filter::compile(&rawdoc! { "k": { "$lt": 30 } }).expect("filter");
        let mut s = Source::open(
            COLL,
            storage.snapshot(),
            &Access::Collscan { reverse: false },
            Some(filter),
            20,
        );
        s.allow_split(split);
        s
    }

    /// Read on two threads, a scan returns what it returns on one, in the same order, and
    /// counts the same; it reads on one when it is too small, not allowed, limited or skipped.
    #[test]
    fn halves_read_at_once_equal_the_whole() {
        FORCE.with(|f| f.set(true));
        let storage = store(80_000);
        let want = source(&storage, false).drain_records().expect("whole");
        assert!(want.len() > 20_000);
        let mut split = source(&storage, true);
        let Source::Scan(scan) = &mut split else {
            panic!("a collection scan");
        };
        let mut probe = Scan {
            snapshot: storage.snapshot(),
            lower: scan.lower.clone(),
            upper: scan.upper.clone(),
            filter: None,
            projection: None,
            skip: 0,
            remaining: None,
            now_ms: 20,
            done: false,
            reverse: false,
            examined: 0,
            interrupt: None,
            whole: None,
            keyspace: Keyspace::Docs,
            split: true,
        };
        assert!(probe.split().expect("split").is_some(), "it splits");
        let got = split.drain_records().expect("halves");
        assert_eq!(got, want);
        assert_eq!(split.stats().docs_examined, 80_000);
        assert_eq!(
            source(&storage, true).count_rest().expect("count"),
            want.len()
        );
        let docs = source(&storage, true).drain().expect("drain");
        assert_eq!(docs.len(), want.len());

        // Not split: limited, skipped, not allowed, too small.
        let mut limited = source(&storage, true);
        limited.set_window(None, 0, Some(5));
        assert_eq!(limited.drain_records().expect("limited").len(), 5);
        let mut skipped = source(&storage, true);
        skipped.set_window(None, 3, None);
        assert_eq!(
            skipped.drain_records().expect("skipped"),
            want.get(3..).expect("more than 3")
        );
        let small = store(1_000);
        let Source::Scan(mut scan) = source(&small, true) else {
            panic!("a collection scan");
        };
        assert!(scan.split().expect("split").is_none());
        FORCE.with(|f| f.set(false));
    }

    /// The batches a cursor reads (a first one of 101, then `getMore`s without `batchSize`),
    /// with their halves read at once, hold what they hold read on one thread, in the same
    /// order, whether the upper half's documents join the batch, are dropped because the lower
    /// half filled it, or are dropped because both do not fit.
    #[test]
    fn batches_read_as_halves_equal_the_whole() {
        FORCE.with(|f| f.set(true));
        let storage = store(80_000);
        let read = |split: bool, max_bytes: usize| -> (Vec<Record>, usize, u64) {
            let Source::Scan(mut scan) = source(&storage, split) else {
                panic!("a collection scan");
            };
            let mut all = Vec::new();
            let mut batches = 0;
            let mut out = Vec::new();
            scan.fill(&mut out, 101, max_bytes, u64::MAX)
                .expect("first batch");
            all.extend(out);
            while !scan.done {
                let mut out = Vec::new();
                scan.fill(&mut out, usize::MAX, max_bytes, u64::MAX)
                    .expect("getMore");
                assert!(
                    out.len() <= 1
                        || out
                            .iter()
                            .map(|(_, d, _)| d.as_bytes().len())
                            .sum::<usize>()
                            <= max_bytes,
                    "a batch over its size"
                );
                all.extend(out);
                batches += 1;
            }
            (all, batches, scan.examined)
        };
        let (want, _, examined) = read(false, usize::MAX);
        assert!(want.len() > 20_000);
        assert_eq!(examined, 80_000);
        // ~20,000 matches of 28 bytes: everything in one batch; the lower half fills the batch
        // before the middle; the lower half reaches the middle but both do not fit.
        for max_bytes in [usize::MAX, 50_000, 400_000] {
            BATCH_SPLITS.with(|n| n.set(0));
            let (got, batches, examined) = read(true, max_bytes);
            assert!(
                BATCH_SPLITS.with(Cell::get) > 0,
                "{max_bytes}: no batch split"
            );
            assert_eq!(got, want, "{max_bytes}: {batches} batches");
            assert_eq!(examined, 80_000, "{max_bytes}: each document counted once");
            let (_, unsplit, _) = read(false, max_bytes);
            if max_bytes == usize::MAX {
                assert_eq!((batches, unsplit), (1, 1));
            }
        }
        FORCE.with(|f| f.set(false));
    }
}
