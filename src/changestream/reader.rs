//! A change stream's cursor: where it is in the oplog, and the reading of the next batch of
//! events (oplog entries → [`events`] → images looked up → the user's stages).
//!
//! Entries become visible in time order (see `crate::oplog::log`), so a stream that has read
//! every visible entry up to time `T` never misses one: it goes on from `T + 1`. Its
//! `postBatchResumeToken` is the last event's token, or, when the batch is empty, a
//! high-water mark at the next time it will read, which resumes without repeating anything.

use std::collections::VecDeque;
use std::ops::Bound;

use bson::{RawBsonRef, RawDocument, RawDocumentBuf, Timestamp, Uuid};

use super::event::{Event, Images, events};
use super::resume::{Resume, Step};
use super::spec::{Scope, Spec};
use super::split::{MAX_EVENT_SIZE, Splitter};
use super::token::ResumeTokenData;
use crate::catalog::Catalog;
use crate::error::{CommandError, CommandResult, ErrorCode};
use crate::pipeline::Stage;
use crate::replset::{ts_from_u64, ts_to_u64};
use crate::storage::{Keyspace, Snapshot, record};

/// At most this many oplog entries are read by one call of [`StreamReader::read`] (a
/// `getMore` answers with what it found by then, and the next one goes on).
const MAX_ENTRIES_PER_READ: usize = 10_000;

/// A change stream's state between batches.
pub struct StreamReader {
    /// What it watches.
    pub scope: Scope,
    /// Its `$changeStream` options.
    pub spec: Spec,
    /// The stages after `$changeStream`.
    stages: Vec<Box<dyn Stage>>,
    /// The first oplog time not read yet.
    next: u64,
    /// Until the stream passed its resume token (`resumeAfter`, `startAfter`): the check that
    /// skips the events up to it and fails when the token's event is not found.
    resume: Option<Resume>,
    /// `$changeStreamSplitLargeEvent`, when the pipeline ends with it.
    splitter: Option<Splitter>,
    /// Events made but not returned yet (a batch filled up in the middle of an entry).
    pending: VecDeque<(ResumeTokenData, RawDocumentBuf, bool)>,
    /// The token of the last event returned.
    last_token: Option<ResumeTokenData>,
    /// An `invalidate` was returned: the stream is over.
    pub invalidated: bool,
}

impl std::fmt::Debug for StreamReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StreamReader")
            .field("scope", &self.scope)
            .field("next", &self.next)
            .finish_non_exhaustive()
    }
}

impl StreamReader {
    /// A stream of `scope` with `spec` and the stages after `$changeStream`, starting where
    /// `spec` says: after its resume token, at its `startAtOperationTime`, or after `latest`
    /// (the last oplog time when it opens).
    pub fn new(
        scope: Scope,
        spec: Spec,
        stages: Vec<Box<dyn Stage>>,
        split: bool,
        latest: u64,
    ) -> Self {
        let resume = Resume::new(&spec);
        let next = match (&resume, spec.start_at_operation_time) {
            (Some(resume), _) => ts_to_u64(resume.start_time()),
            (None, Some(at)) => ts_to_u64(at),
            (None, None) => latest.saturating_add(1),
        };
        StreamReader {
            splitter: split.then(|| Splitter::new(&spec)),
            scope,
            spec,
            stages,
            next,
            resume,
            pending: VecDeque::new(),
            last_token: None,
            invalidated: false,
        }
    }

    /// The first time the stream has not read yet.
    pub fn next_time(&self) -> Timestamp {
        ts_from_u64(self.next)
    }

    /// [`StreamReader::next_time`] as an oplog key's number.
    pub fn next_time_u64(&self) -> u64 {
        self.next
    }

    /// `postBatchResumeToken`: the last event's token when nothing was read after its entry
    /// (or events wait, or it was the `invalidate`), else a high-water mark at the next time to
    /// read.
    pub fn post_batch_resume_token(&self) -> RawDocumentBuf {
        if let Some(token) = &self.last_token
            && (self.invalidated
                || !self.pending.is_empty()
                || ts_to_u64(token.cluster_time).saturating_add(1) >= self.next)
        {
            return token.to_document();
        }
        ResumeTokenData::high_water_mark(ts_from_u64(self.next)).to_document()
    }

    /// Reads the next events visible in `catalog`'s store, judging expiry at `now_ms`: at most
    /// `max_docs`, stopping before `max_bytes` (at least one event is returned when there is
    /// one). `oldest` is the oplog's oldest entry kept (a stream behind it lost history:
    /// `ChangeStreamHistoryLost`), `visible` the last one readers may see (the last durable).
    ///
    /// # Errors
    /// Storage errors, an entry that does not decode, the events' own errors (a `required`
    /// image missing), the user's stages' errors, and `ChangeStreamFatalError` when a stage
    /// changed an event's `_id`.
    pub fn read(
        &mut self,
        catalog: &Catalog,
        now_ms: i64,
        (oldest, visible): (u64, u64),
        max_docs: usize,
        max_bytes: usize,
    ) -> CommandResult<Vec<RawDocumentBuf>> {
        let mut out = Vec::new();
        let mut bytes = 0;
        if self.drain(&mut out, &mut bytes, max_docs, max_bytes) {
            return Ok(out);
        }
        // The oplog's retention went past where the stream reads (or it starts before the
        // oplog's history: mongod's `OplogQueryMinTsMissing`): events are lost.
        if self.next < oldest {
            return Err(super::resume::history_lost());
        }
        let snapshot = catalog.snapshot();
        let images = CatalogImages {
            catalog,
            snapshot: &*snapshot,
            now_ms,
        };
        // Only what readers may see: entries up to `visible` (the durable ones).
        if self.next > visible {
            return Ok(out);
        }
        let from = self.next.to_be_bytes();
        let until = visible.checked_add(1).map(u64::to_be_bytes);
        let scan = snapshot.range(
            Keyspace::Oplog,
            Bound::Included(&from[..]),
            until
                .as_ref()
                .map_or(Bound::Unbounded, |u| Bound::Excluded(&u[..])),
            false,
        );
        for entry in scan.take(MAX_ENTRIES_PER_READ) {
            let (key, value) = entry?;
            // (Longer keys are pre-images kept beside their entries.)
            let Ok(ts) = <[u8; 8]>::try_from(&key[..]).map(u64::from_be_bytes) else {
                continue;
            };
            self.next = ts.saturating_add(1);
            let entry = RawDocument::from_bytes(&value)
                .map_err(|e| CommandError::internal(format!("a corrupt oplog entry: {e}")))?;
            let made = events(entry, &self.scope, &self.spec)?;
            self.queue(made, &images)?;
            if self.drain(&mut out, &mut bytes, max_docs, max_bytes) {
                break;
            }
        }
        Ok(out)
    }

    /// Moves pending events to `out` while they fit; true when the batch is done (full, or
    /// an `invalidate` ended the stream).
    fn drain(
        &mut self,
        out: &mut Vec<RawDocumentBuf>,
        bytes: &mut usize,
        max_docs: usize,
        max_bytes: usize,
    ) -> bool {
        while let Some((token, doc, invalidate)) = self.pending.pop_front() {
            let len = doc.as_bytes().len();
            if out.len() >= max_docs || (!out.is_empty() && *bytes + len > max_bytes) {
                self.pending.push_front((token, doc, invalidate));
                return true;
            }
            *bytes += len;
            out.push(doc);
            self.last_token = Some(token);
            if invalidate {
                self.invalidated = true;
                self.pending.clear();
                return true;
            }
        }
        self.invalidated || out.len() >= max_docs
    }

    /// Makes the documents of `made` (one entry's events) and queues them, leaving out those at
    /// or before the resume point and those the user's stages filter out.
    fn queue(&mut self, made: Vec<Event>, images: &dyn Images) -> CommandResult<()> {
        for event in made {
            if let Some(resume) = &mut self.resume {
                match resume.check(&event.token)? {
                    Step::Skip => continue,
                    Step::Deliver | Step::Split => self.resume = None,
                }
            }
            let doc = event.document(&self.spec, images)?;
            let docs = if self.stages.is_empty() {
                vec![doc]
            } else {
                // (The stages a change stream may have stream: no sort, nothing to spill.)
                let ctx = crate::pipeline::Context::new(crate::sorter::SortLimits {
                    max_bytes: crate::sorter::DEFAULT_MAX_SORT_BYTES,
                    allow_disk_use: false,
                    temp_dir: std::env::temp_dir(),
                });
                crate::pipeline::run(&self.stages, vec![(doc, record::NEVER)], &ctx)?
                    .into_iter()
                    .map(|(d, _)| d)
                    .collect()
            };
            let expected = event.token.to_document();
            for doc in docs {
                check_id(&doc, &expected)?;
                if let Some(splitter) = &mut self.splitter {
                    for (token, fragment) in splitter.process(&event.token, doc)? {
                        self.pending.push_back((token, fragment, event.invalidate));
                    }
                    continue;
                }
                let size = doc.as_bytes().len();
                if size > MAX_EVENT_SIZE {
                    return Err(CommandError::new(
                        ErrorCode::BSONObjectTooLarge,
                        format!(
                            "BSONObj size: {size} (0x{size:X}) is invalid. Size must be between \
                             0 and 16793600(16MB) First element: _id: {}",
                            super::token::document_to_string(&expected)
                        ),
                    ));
                }
                self.pending
                    .push_back((event.token.clone(), doc, event.invalidate));
            }
            if event.invalidate {
                // Nothing after an invalidate, whatever the stages did with it.
                if self.pending.is_empty() {
                    self.invalidated = true;
                } else if let Some(last) = self.pending.back_mut() {
                    last.2 = true;
                }
                break;
            }
        }
        Ok(())
    }
}

/// mongod's check that the user's stages kept each event's `_id` (its resume token).
fn check_id(doc: &RawDocument, expected: &RawDocument) -> CommandResult<()> {
    match doc.get("_id") {
        Ok(Some(RawBsonRef::Document(id))) if id.as_bytes() == expected.as_bytes() => Ok(()),
        found => Err(CommandError::new(
            ErrorCode::ChangeStreamFatalError,
            format!(
                "Encountered an event whose _id field, which contains the resume token, was \
                 modified by the pipeline. Modifying the _id field of an event makes it \
                 impossible to resume the stream from that point. Only transformations that \
                 retain the unmodified _id field are allowed. Expected: {} Found: {}",
                super::token::document_to_string(expected),
                match found {
                    Ok(Some(v)) => super::token::value_to_string(v),
                    _ => "missing".to_owned(),
                }
            ),
        )),
    }
}

/// The documents events look up, from the store as it is when the batch is read.
struct CatalogImages<'a> {
    catalog: &'a Catalog,
    snapshot: &'a dyn Snapshot,
    now_ms: i64,
}

impl Images for CatalogImages<'_> {
    fn current(
        &self,
        ns: &str,
        uuid: &Uuid,
        document_key: &RawDocument,
    ) -> Result<Option<RawDocumentBuf>, CommandError> {
        let Some((db, name)) = ns.split_once('.') else {
            return Ok(None);
        };
        let Some(collection) = self.catalog.get(db, name) else {
            return Ok(None);
        };
        if collection.uuid() != uuid.bytes() {
            return Ok(None);
        }
        let Ok(Some(id)) = document_key.get("_id") else {
            return Ok(None);
        };
        let id_key = crate::query::keystring::to_key(id);
        let entry = crate::index::id_entry_key(collection.id, &id_key);
        let Some(value) = self.snapshot.get(Keyspace::Index, &entry)? else {
            return Ok(None);
        };
        let Some(rid) = crate::index::rid_of_value(&value) else {
            return Ok(None);
        };
        let Some(stored) = self
            .snapshot
            .get(Keyspace::Docs, &record::doc_key(collection.id, rid))?
        else {
            return Ok(None);
        };
        let rec = record::decode(&stored)?;
        if rec.expires_ms <= self.now_ms {
            return Ok(None);
        }
        Ok(Some(rec.doc.to_owned()))
    }

    fn pre_image(
        &self,
        _uuid: &Uuid,
        ts: Timestamp,
        apply_ops_index: u32,
    ) -> Result<Option<RawDocumentBuf>, CommandError> {
        Ok(crate::oplog::log::pre_image(
            self.snapshot,
            ts,
            apply_ops_index,
        )?)
    }
}
