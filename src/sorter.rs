//! Blocking sorts under mongod's memory limit (`internalQueryMaxBlockingSortMemoryUsageBytes`,
//! 100 MiB): a [`Sorter`] takes documents one at a time and keeps at most the limit's worth of
//! them in memory. Past the limit it either fails with mongod's
//! `QueryExceededMemoryLimitNoDiskUseAllowed` (292), when the command set `allowDiskUse: false`,
//! or writes what it holds, sorted, to a temporary file (a run) and goes on; the runs are then
//! merged as the results are read ([`Sorted`]). A sort that keeps only the first `k` documents
//! (a sort with a limit) holds about `k` documents at a time and never needs to spill.
//!
//! The order is stable: documents with equal keys come out in the order they went in, whether
//! they were spilled or not (runs are written in order, and the merge takes the earliest run
//! on ties). Run files are unnamed temporary files (`tempfile`), so they disappear when the
//! sort's results are dropped (the cursor is exhausted, killed or expires) or the process ends.

use std::cmp::Ordering;
use std::collections::VecDeque;
use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::PathBuf;

use bson::{RawBson, RawBsonRef, RawDocumentBuf};

use crate::error::{CommandError, CommandResult, ErrorCode};
use crate::query::sort::SortSpec;

/// mongod's default `internalQueryMaxBlockingSortMemoryUsageBytes` (100 MiB).
pub const DEFAULT_MAX_SORT_BYTES: usize = 100 * 1024 * 1024;

/// What a blocking sort may use.
#[derive(Debug, Clone)]
pub struct SortLimits {
    /// Bytes of documents the sort may hold in memory.
    pub max_bytes: usize,
    /// Whether it may spill to temporary files past `max_bytes` (`allowDiskUse`, true unless
    /// the command says otherwise, as mongod 7.0's `allowDiskUseByDefault`).
    pub allow_disk_use: bool,
    /// Where the temporary files go (created when first needed).
    pub temp_dir: PathBuf,
}

/// mongod's error for a sort past the limit without `allowDiskUse` (callers add the
/// "Executor error during …" prefix their command uses).
pub fn exceeded(max_bytes: usize) -> CommandError {
    CommandError::new(
        ErrorCode::QueryExceededMemoryLimitNoDiskUseAllowed,
        format!(
            "Sort exceeded memory limit of {max_bytes} bytes, but did not opt in to external \
             sorting."
        ),
    )
}

fn io_error(e: &std::io::Error) -> CommandError {
    tracing::error!(error = %e, "sort spill file failure");
    CommandError::internal(format!("sort spill file: {e}"))
}

/// A document with its expiry instant and sort key.
struct Entry {
    key: Vec<RawBson>,
    doc: RawDocumentBuf,
    expires: i64,
}

/// Per-entry bookkeeping counted on top of the document's bytes (its key and the entry).
const ENTRY_OVERHEAD: usize = 64;

impl Entry {
    fn new(spec: &SortSpec, doc: RawDocumentBuf, expires: i64) -> Entry {
        let key = spec.key(&doc).into_iter().map(RawBson::from).collect();
        Entry { key, doc, expires }
    }

    /// The memory the sort counts for it: the document's bytes, twice when its key holds
    /// strings or documents (the key copies them), roughly as mongod counts a sort's
    /// working set members.
    fn size(&self) -> usize {
        let key: usize = self.key.iter().map(raw_size).sum();
        self.doc.as_bytes().len() + key + ENTRY_OVERHEAD
    }
}

fn raw_size(v: &RawBson) -> usize {
    match v {
        RawBson::String(s) | RawBson::Symbol(s) | RawBson::JavaScriptCode(s) => s.len(),
        RawBson::Document(d) => d.as_bytes().len(),
        RawBson::Array(a) => a.as_bytes().len(),
        RawBson::Binary(b) => b.bytes.len(),
        _ => 16,
    }
}

fn compare_keys(spec: &SortSpec, a: &[RawBson], b: &[RawBson]) -> Ordering {
    let ka: Vec<RawBsonRef<'_>> = a.iter().map(RawBson::as_raw_bson_ref).collect();
    let kb: Vec<RawBsonRef<'_>> = b.iter().map(RawBson::as_raw_bson_ref).collect();
    spec.compare_keys(&ka, &kb)
}

/// Sorts documents pushed one at a time; see the module documentation.
pub struct Sorter {
    spec: SortSpec,
    /// Only the first `keep` documents of the order are wanted (skip + limit).
    keep: Option<usize>,
    limits: SortLimits,
    buffer: Vec<Entry>,
    bytes: usize,
    runs: Vec<File>,
    /// Runs kept open at once before they are merged into one ([`MAX_RUNS`]).
    max_runs: usize,
}

/// Runs a sort keeps open at once: past this many, they are merged into one, so that a small
/// limit and a large sort cannot run out of file descriptors.
const MAX_RUNS: usize = 64;

fn write_entry(out: &mut BufWriter<File>, doc: &RawDocumentBuf, expires: i64) -> CommandResult<()> {
    out.write_all(doc.as_bytes()).map_err(|e| io_error(&e))?;
    out.write_all(&expires.to_le_bytes())
        .map_err(|e| io_error(&e))
}

/// A written run, rewound for reading.
fn finish_run(out: BufWriter<File>) -> CommandResult<File> {
    let mut file = out.into_inner().map_err(|e| io_error(e.error()))?;
    file.seek(SeekFrom::Start(0)).map_err(|e| io_error(&e))?;
    Ok(file)
}

impl Sorter {
    /// A sort by `spec` of which only the first `keep` documents are wanted, if limited.
    pub fn new(spec: SortSpec, keep: Option<usize>, limits: SortLimits) -> Sorter {
        Sorter {
            spec,
            keep,
            limits,
            buffer: Vec::new(),
            bytes: 0,
            runs: Vec::new(),
            max_runs: MAX_RUNS,
        }
    }

    /// Adds a document (with its expiry instant). Fails when the documents held pass the limit
    /// and the sort may not spill, or when spilling fails.
    pub fn push(&mut self, doc: RawDocumentBuf, expires: i64) -> CommandResult<()> {
        if self.keep == Some(0) {
            return Ok(());
        }
        let entry = Entry::new(&self.spec, doc, expires);
        self.bytes += entry.size();
        self.buffer.push(entry);
        if let Some(k) = self.keep
            && self.buffer.len() >= k.saturating_mul(2).max(64)
        {
            self.truncate_to(k);
        }
        if self.bytes > self.limits.max_bytes {
            if let Some(k) = self.keep {
                self.truncate_to(k);
                if self.bytes <= self.limits.max_bytes {
                    return Ok(());
                }
            }
            if !self.limits.allow_disk_use {
                return Err(exceeded(self.limits.max_bytes));
            }
            self.spill()?;
        }
        Ok(())
    }

    /// How many runs have been written to disk so far.
    pub fn spilled_runs(&self) -> usize {
        self.runs.len()
    }

    fn sort_buffer(&mut self) {
        let spec = &self.spec;
        self.buffer
            .sort_by(|a, b| compare_keys(spec, &a.key, &b.key));
    }

    /// Keeps the first `k` documents of the buffer's order.
    fn truncate_to(&mut self, k: usize) {
        self.sort_buffer();
        self.buffer.truncate(k);
        self.bytes = self.buffer.iter().map(Entry::size).sum();
    }

    fn new_run(&self) -> CommandResult<BufWriter<File>> {
        std::fs::create_dir_all(&self.limits.temp_dir).map_err(|e| io_error(&e))?;
        let file = tempfile::tempfile_in(&self.limits.temp_dir).map_err(|e| io_error(&e))?;
        Ok(BufWriter::new(file))
    }

    /// Writes the buffer, sorted, as one more run.
    fn spill(&mut self) -> CommandResult<()> {
        self.sort_buffer();
        if let Some(k) = self.keep {
            self.buffer.truncate(k);
        }
        let mut out = self.new_run()?;
        for e in self.buffer.drain(..) {
            write_entry(&mut out, &e.doc, e.expires)?;
        }
        self.runs.push(finish_run(out)?);
        self.bytes = 0;
        tracing::debug!(
            runs = self.runs.len(),
            "blocking sort spilled a run to disk"
        );
        if self.runs.len() >= self.max_runs {
            self.compact_runs()?;
        }
        Ok(())
    }

    /// Merges every run into one (which, holding the earliest documents, stays first).
    fn compact_runs(&mut self) -> CommandResult<()> {
        let files = std::mem::take(&mut self.runs);
        let mut merge = Merge::new(self.spec.clone(), files, VecDeque::new(), self.keep)?;
        let mut out = self.new_run()?;
        while let Some((doc, expires)) = merge.next_entry()? {
            write_entry(&mut out, &doc, expires)?;
        }
        self.runs.push(finish_run(out)?);
        Ok(())
    }

    /// The documents in order (the first `keep` of them, if limited).
    pub fn finish(mut self) -> CommandResult<Sorted> {
        self.sort_buffer();
        if let Some(k) = self.keep {
            self.buffer.truncate(k);
        }
        if self.runs.is_empty() {
            return Ok(Sorted::Memory(
                self.buffer
                    .into_iter()
                    .map(|e| (e.doc, e.expires))
                    .collect(),
            ));
        }
        // The buffer goes last: it holds the latest documents, which lose ties.
        let memory = self.buffer.into();
        Ok(Sorted::Merge(Box::new(Merge::new(
            self.spec, self.runs, memory, self.keep,
        )?)))
    }
}

/// A sort's results, in order.
pub enum Sorted {
    /// Everything fit in memory.
    Memory(VecDeque<(RawDocumentBuf, i64)>),
    /// Runs on disk (and the last one in memory), merged as they are read.
    Merge(Box<Merge>),
}

impl Sorted {
    /// The next document and its expiry instant.
    pub fn next_entry(&mut self) -> CommandResult<Option<(RawDocumentBuf, i64)>> {
        match self {
            Sorted::Memory(docs) => Ok(docs.pop_front()),
            Sorted::Merge(m) => m.next_entry(),
        }
    }

    /// Everything left, in order (for callers that need it all at once).
    pub fn into_vec(mut self) -> CommandResult<Vec<(RawDocumentBuf, i64)>> {
        if let Sorted::Memory(docs) = self {
            return Ok(docs.into());
        }
        let mut out = Vec::new();
        while let Some(e) = self.next_entry()? {
            out.push(e);
        }
        Ok(out)
    }
}

enum Input {
    File(BufReader<File>),
    Memory(VecDeque<Entry>),
}

/// One sorted run and the entry at its head.
struct Run {
    input: Input,
    head: Option<Entry>,
}

impl Run {
    /// Moves the head to the run's next entry (`None` at its end).
    fn advance(&mut self, spec: &SortSpec) -> CommandResult<()> {
        self.head = match &mut self.input {
            Input::Memory(entries) => entries.pop_front(),
            Input::File(reader) => {
                read_entry(reader)?.map(|(doc, expires)| Entry::new(spec, doc, expires))
            }
        };
        Ok(())
    }
}

fn read_entry(reader: &mut BufReader<File>) -> CommandResult<Option<(RawDocumentBuf, i64)>> {
    let mut len = [0_u8; 4];
    match reader.read_exact(&mut len) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(io_error(&e)),
    }
    let size = usize::try_from(i32::from_le_bytes(len))
        .ok()
        .filter(|&n| n >= 5)
        .ok_or_else(|| CommandError::internal("sort spill file: bad document length"))?;
    let mut bytes = vec![0_u8; size];
    bytes[..4].copy_from_slice(&len);
    reader
        .read_exact(&mut bytes[4..])
        .map_err(|e| io_error(&e))?;
    let mut expires = [0_u8; 8];
    reader.read_exact(&mut expires).map_err(|e| io_error(&e))?;
    let doc = RawDocumentBuf::from_bytes(bytes)
        .map_err(|e| CommandError::internal(format!("sort spill file: {e}")))?;
    Ok(Some((doc, i64::from_le_bytes(expires))))
}

/// The merge of a sort's runs.
pub struct Merge {
    spec: SortSpec,
    runs: Vec<Run>,
    remaining: Option<usize>,
}

impl Merge {
    /// The merge of `files` (sorted runs, earliest first) and then `memory` (sorted), of which
    /// only the first `remaining` documents are wanted, if limited.
    fn new(
        spec: SortSpec,
        files: Vec<File>,
        memory: VecDeque<Entry>,
        remaining: Option<usize>,
    ) -> CommandResult<Merge> {
        let mut runs = Vec::with_capacity(files.len() + 1);
        let inputs = files
            .into_iter()
            .map(|f| Input::File(BufReader::new(f)))
            .chain(std::iter::once(Input::Memory(memory)));
        for input in inputs {
            let mut run = Run { input, head: None };
            run.advance(&spec)?;
            runs.push(run);
        }
        Ok(Merge {
            spec,
            runs,
            remaining,
        })
    }

    /// The next document in order and its expiry instant.
    pub fn next_entry(&mut self) -> CommandResult<Option<(RawDocumentBuf, i64)>> {
        if self.remaining == Some(0) {
            return Ok(None);
        }
        // The earliest run wins ties, which keeps the sort stable.
        let mut best: Option<usize> = None;
        for (i, run) in self.runs.iter().enumerate() {
            let Some(head) = &run.head else { continue };
            let better = match best.and_then(|b| self.runs[b].head.as_ref()) {
                None => true,
                Some(current) => {
                    compare_keys(&self.spec, &head.key, &current.key) == Ordering::Less
                }
            };
            if better {
                best = Some(i);
            }
        }
        let Some(i) = best else {
            return Ok(None);
        };
        let run = &mut self.runs[i];
        let entry = run.head.take();
        run.advance(&self.spec)?;
        if let Some(r) = &mut self.remaining {
            *r -= 1;
        }
        Ok(entry.map(|e| (e.doc, e.expires)))
    }
}

/// Sorted runs of `(key bytes, document)` entries on disk, for the blocking stages that spill
/// something other than documents in a [`SortSpec`] order (`$group`'s partial groups, ordered by
/// their key strings). Runs are written whole, already sorted by key; [`KeyedRuns::merge`]
/// reads them back in key order, the earliest run first on equal keys (so a group's partial
/// states come back in input order). Like [`Sorter`]'s, run files are unnamed.
pub struct KeyedRuns {
    temp_dir: PathBuf,
    runs: Vec<File>,
    max_runs: usize,
}

/// A keyed entry: the key's bytes (compared bytewise) and a document.
pub type KeyedEntry = (Vec<u8>, RawDocumentBuf);

fn write_keyed(out: &mut BufWriter<File>, key: &[u8], doc: &RawDocumentBuf) -> CommandResult<()> {
    let len =
        u32::try_from(key.len()).map_err(|_| CommandError::internal("spill file: key too long"))?;
    out.write_all(&len.to_le_bytes())
        .map_err(|e| io_error(&e))?;
    out.write_all(key).map_err(|e| io_error(&e))?;
    out.write_all(doc.as_bytes()).map_err(|e| io_error(&e))
}

fn read_keyed(reader: &mut BufReader<File>) -> CommandResult<Option<KeyedEntry>> {
    let mut len = [0_u8; 4];
    match reader.read_exact(&mut len) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(io_error(&e)),
    }
    let size = usize::try_from(u32::from_le_bytes(len))
        .map_err(|_| CommandError::internal("spill file: bad key length"))?;
    let mut key = vec![0_u8; size];
    reader.read_exact(&mut key).map_err(|e| io_error(&e))?;
    let mut doc_len = [0_u8; 4];
    reader.read_exact(&mut doc_len).map_err(|e| io_error(&e))?;
    let size = usize::try_from(i32::from_le_bytes(doc_len))
        .ok()
        .filter(|&n| n >= 5)
        .ok_or_else(|| CommandError::internal("spill file: bad document length"))?;
    let mut bytes = vec![0_u8; size];
    if let Some(head) = bytes.get_mut(..4) {
        head.copy_from_slice(&doc_len);
    }
    if let Some(rest) = bytes.get_mut(4..) {
        reader.read_exact(rest).map_err(|e| io_error(&e))?;
    }
    let doc = RawDocumentBuf::from_bytes(bytes)
        .map_err(|e| CommandError::internal(format!("spill file: {e}")))?;
    Ok(Some((key, doc)))
}

impl KeyedRuns {
    /// No runs yet; files go to `temp_dir` (created when first needed).
    pub fn new(temp_dir: PathBuf) -> KeyedRuns {
        KeyedRuns {
            temp_dir,
            runs: Vec::new(),
            max_runs: MAX_RUNS,
        }
    }

    /// How many runs are on disk.
    pub fn len(&self) -> usize {
        self.runs.len()
    }

    /// Whether nothing was written.
    pub fn is_empty(&self) -> bool {
        self.runs.is_empty()
    }

    fn new_run(&self) -> CommandResult<BufWriter<File>> {
        std::fs::create_dir_all(&self.temp_dir).map_err(|e| io_error(&e))?;
        let file = tempfile::tempfile_in(&self.temp_dir).map_err(|e| io_error(&e))?;
        Ok(BufWriter::new(file))
    }

    /// Writes `entries`, which must be sorted by key, as one more run.
    pub fn write_run(
        &mut self,
        entries: impl IntoIterator<Item = KeyedEntry>,
    ) -> CommandResult<()> {
        let mut out = self.new_run()?;
        for (key, doc) in entries {
            write_keyed(&mut out, &key, &doc)?;
        }
        self.runs.push(finish_run(out)?);
        tracing::debug!(
            runs = self.runs.len(),
            "blocking stage spilled a run to disk"
        );
        if self.runs.len() >= self.max_runs {
            // Merged into one run (order and ties kept), so descriptors stay bounded.
            let files = std::mem::take(&mut self.runs);
            let mut merge = KeyedMerge::new(files, Vec::new())?;
            let mut out = self.new_run()?;
            while let Some((key, doc)) = merge.next_entry()? {
                write_keyed(&mut out, &key, &doc)?;
            }
            self.runs.push(finish_run(out)?);
        }
        Ok(())
    }

    /// Every run's entries and then `memory`'s (sorted by key, the latest entries), in key
    /// order; equal keys come out earliest run first.
    pub fn merge(self, memory: Vec<KeyedEntry>) -> CommandResult<KeyedMerge> {
        KeyedMerge::new(self.runs, memory)
    }
}

enum KeyedInput {
    File(BufReader<File>),
    Memory(std::vec::IntoIter<KeyedEntry>),
}

struct KeyedRun {
    input: KeyedInput,
    head: Option<KeyedEntry>,
}

impl KeyedRun {
    fn advance(&mut self) -> CommandResult<()> {
        self.head = match &mut self.input {
            KeyedInput::Memory(entries) => entries.next(),
            KeyedInput::File(reader) => read_keyed(reader)?,
        };
        Ok(())
    }
}

/// The merge of [`KeyedRuns`], in key order.
pub struct KeyedMerge {
    runs: Vec<KeyedRun>,
}

impl KeyedMerge {
    fn new(files: Vec<File>, memory: Vec<KeyedEntry>) -> CommandResult<KeyedMerge> {
        let mut runs = Vec::with_capacity(files.len() + 1);
        let inputs = files
            .into_iter()
            .map(|f| KeyedInput::File(BufReader::new(f)))
            .chain(std::iter::once(KeyedInput::Memory(memory.into_iter())));
        for input in inputs {
            let mut run = KeyedRun { input, head: None };
            run.advance()?;
            runs.push(run);
        }
        Ok(KeyedMerge { runs })
    }

    /// The next entry in key order (the earliest run's on ties).
    pub fn next_entry(&mut self) -> CommandResult<Option<KeyedEntry>> {
        let mut best: Option<(usize, &[u8])> = None;
        for (i, run) in self.runs.iter().enumerate() {
            let Some((key, _)) = &run.head else { continue };
            if best.is_none_or(|(_, b)| key.as_slice() < b) {
                best = Some((i, key));
            }
        }
        let Some((i, _)) = best else {
            return Ok(None);
        };
        let Some(run) = self.runs.get_mut(i) else {
            return Ok(None);
        };
        let entry = run.head.take();
        run.advance()?;
        Ok(entry)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use bson::{RawDocumentBuf, rawdoc};

    use super::*;
    use crate::query::Collation;

    fn limits(max_bytes: usize, allow_disk_use: bool, dir: &std::path::Path) -> SortLimits {
        SortLimits {
            max_bytes,
            allow_disk_use,
            temp_dir: dir.to_path_buf(),
        }
    }

    /// Documents with many ties on `k`, strings under a collation on `s`, and an `_id` that
    /// gives the insertion order.
    fn docs(n: i32) -> Vec<RawDocumentBuf> {
        let words = ["b", "A", "a", "B", "c", "C"];
        (0..n)
            .map(|i| {
                rawdoc! {
                    "_id": i,
                    "k": (i * 7919) % 13,
                    "s": words[usize::try_from(i).unwrap() % words.len()],
                    "pad": "x".repeat(100),
                }
            })
            .collect()
    }

    fn spec(doc: &RawDocumentBuf, collation: Option<Arc<Collation>>) -> SortSpec {
        SortSpec::compile(doc).unwrap().with_collation(collation)
    }

    fn sorted(spec: &SortSpec, keep: Option<usize>, limits: SortLimits) -> (Vec<i32>, usize) {
        let mut sorter = Sorter::new(spec.clone(), keep, limits);
        for (i, d) in docs(500).into_iter().enumerate() {
            sorter.push(d, i64::try_from(i).unwrap()).unwrap();
        }
        let runs = sorter.spilled_runs();
        let out = sorter.finish().unwrap().into_vec().unwrap();
        for (d, expires) in &out {
            // The expiry instant travels with its document.
            assert_eq!(i64::from(d.get_i32("_id").unwrap()), *expires);
        }
        (
            out.iter().map(|(d, _)| d.get_i32("_id").unwrap()).collect(),
            runs,
        )
    }

    fn stable_in_memory(spec: &SortSpec) -> Vec<i32> {
        let mut all = docs(500);
        all.sort_by(|a, b| spec.compare(a, b));
        all.iter().map(|d| d.get_i32("_id").unwrap()).collect()
    }

    #[test]
    fn spilled_sorts_give_the_in_memory_order() {
        let dir = tempfile::tempdir().unwrap();
        let collation = Collation::parse(&rawdoc! { "locale": "en", "strength": 1 })
            .unwrap()
            .map(Arc::new);
        let specs = [
            spec(&rawdoc! { "k": 1 }, None),
            spec(&rawdoc! { "k": -1, "s": 1 }, None),
            spec(&rawdoc! { "s": 1 }, collation.clone()),
            spec(&rawdoc! { "s": -1, "k": 1 }, collation),
        ];
        for spec in &specs {
            let expected = stable_in_memory(spec);
            let (memory, runs) = sorted(spec, None, limits(usize::MAX, false, dir.path()));
            assert_eq!(runs, 0);
            assert_eq!(memory, expected);
            // About 200 bytes a document: a run every ~10 documents.
            let (spilled, runs) = sorted(spec, None, limits(2_000, true, dir.path()));
            assert!(runs > 20, "{runs} runs");
            assert_eq!(spilled, expected);
            // Top-k, spilled or not.
            for keep in [0, 1, 7, 300] {
                let want: Vec<i32> = expected.iter().copied().take(keep).collect();
                let (small, _) = sorted(spec, Some(keep), limits(2_000, true, dir.path()));
                assert_eq!(small, want, "keep {keep}");
            }
        }
        // Every run file is unnamed and gone with its sort.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    /// Past `max_runs`, the runs are merged into one: the order (ties included) is unchanged.
    #[test]
    fn many_runs_are_merged_into_one() {
        let dir = tempfile::tempdir().unwrap();
        let collation = Collation::parse(&rawdoc! { "locale": "en", "strength": 2 })
            .unwrap()
            .map(Arc::new);
        for spec in [
            spec(&rawdoc! { "k": 1 }, None),
            spec(&rawdoc! { "s": -1, "k": 1 }, collation),
        ] {
            let expected = stable_in_memory(&spec);
            for keep in [None, Some(45)] {
                let mut sorter = Sorter::new(spec.clone(), keep, limits(2_000, true, dir.path()));
                sorter.max_runs = 4;
                let mut most = 0;
                for d in docs(500) {
                    sorter.push(d, 0).unwrap();
                    most = most.max(sorter.spilled_runs());
                }
                assert!(most < 4, "{most} runs open at once");
                let out = sorter.finish().unwrap().into_vec().unwrap();
                let got: Vec<i32> = out.iter().map(|(d, _)| d.get_i32("_id").unwrap()).collect();
                let want: Vec<i32> = expected
                    .iter()
                    .copied()
                    .take(keep.unwrap_or(usize::MAX))
                    .collect();
                assert_eq!(got, want, "keep {keep:?}");
            }
        }
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn the_limit_without_disk_use_is_mongods_error() {
        let dir = tempfile::tempdir().unwrap();
        let spec = spec(&rawdoc! { "k": 1 }, None);
        let mut sorter = Sorter::new(spec.clone(), None, limits(2_000, false, dir.path()));
        let err = docs(500)
            .into_iter()
            .try_for_each(|d| sorter.push(d, 0))
            .unwrap_err();
        assert_eq!(err.code.code(), 292);
        assert_eq!(err.code.name(), "QueryExceededMemoryLimitNoDiskUseAllowed");
        assert_eq!(
            err.errmsg,
            "Sort exceeded memory limit of 2000 bytes, but did not opt in to external sorting."
        );
        // A top-k sort holds only k documents: no error, no spill.
        let mut top = Sorter::new(spec, Some(3), limits(2_000, false, dir.path()));
        for d in docs(500) {
            top.push(d, 0).unwrap();
        }
        assert_eq!(top.spilled_runs(), 0);
        assert_eq!(top.finish().unwrap().into_vec().unwrap().len(), 3);
    }

    /// Run files have no name from the start: nothing is left in the directory while the
    /// results are read, nor when they are dropped part-way (a cursor killed or expired), nor
    /// if the process dies (the system reclaims unnamed files).
    #[test]
    fn run_files_never_outlive_the_sort() {
        let dir = tempfile::tempdir().unwrap();
        let spec = spec(&rawdoc! { "k": 1 }, None);
        let mut sorter = Sorter::new(spec, None, limits(2_000, true, dir.path()));
        for d in docs(500) {
            sorter.push(d, 0).unwrap();
        }
        assert!(sorter.spilled_runs() > 0);
        let mut results = sorter.finish().unwrap();
        assert!(results.next_entry().unwrap().is_some());
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        drop(results);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    /// Keyed runs come back in key order, equal keys earliest run first, the memory run last;
    /// past `max_runs` they are merged into one with the same order; no file outlives them.
    #[test]
    fn keyed_runs_merge_in_key_then_run_order() {
        let dir = tempfile::tempdir().unwrap();
        let mut runs = KeyedRuns::new(dir.path().to_path_buf());
        runs.max_runs = 3;
        let entry = |k: u8, run: i32| (vec![k, 0, k], rawdoc! {"run": run, "k": i32::from(k)});
        let mut most = 0;
        for run in 0..7 {
            let keys: Vec<u8> = (0..20_u8)
                .filter(|k| (k + u8::try_from(run).unwrap()) % 3 != 0)
                .collect();
            runs.write_run(keys.into_iter().map(|k| entry(k, run)))
                .unwrap();
            most = most.max(runs.len());
        }
        assert!(most < 3, "{most} runs open");
        let memory: Vec<KeyedEntry> = (0..20_u8).step_by(2).map(|k| entry(k, 7)).collect();
        let mut merge = runs.merge(memory).unwrap();
        let mut got = Vec::new();
        while let Some((key, doc)) = merge.next_entry().unwrap() {
            assert_eq!(key[0], u8::try_from(doc.get_i32("k").unwrap()).unwrap());
            got.push((doc.get_i32("k").unwrap(), doc.get_i32("run").unwrap()));
        }
        let mut want = Vec::new();
        for k in 0..20 {
            for run in 0..8 {
                let written = if run == 7 {
                    k % 2 == 0
                } else {
                    (k + run) % 3 != 0
                };
                if written {
                    want.push((k, run));
                }
            }
        }
        assert_eq!(got, want);
        drop(merge);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}
