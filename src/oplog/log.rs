//! The oplog a replica set member keeps (`local.oplog.rs`): one entry per change, in mongod
//! 7.0's shape, written in the same atomic commit as the change and keyed by its cluster time
//! ([`Keyspace::Oplog`], 8 big-endian bytes of [`ts_to_u64`]), so that no entry exists without
//! its change or the other way round, whatever a crash interrupts.
//!
//! Writers describe each change as an operation (`{op, ns, ui, o, o2}`, see [`insert_op`] and
//! its siblings); [`Oplog::entry`] wraps one into an entry (`ts`, `t`, `v`, `wall` added) and a
//! transaction's operations go into one `applyOps` entry ([`Oplog::apply_ops_entry`]). The
//! entry's `ts` is left for the commit to fill: [`GroupCommit`](crate::storage::GroupCommit)
//! asks the [`Oplog`] (its [`Stamper`]) for the times, under the clock's sequence lock, so
//! entries become visible in time order (a reader that saw time `T` will never see an entry
//! before `T` appear later).

use std::sync::Arc;

use bson::spec::BinarySubtype;
use bson::{Binary, RawBsonRef, RawDocument, RawDocumentBuf, Timestamp, rawdoc};
use tokio::sync::watch;

use crate::replset::{ClusterClock, ts_from_u64, ts_to_u64};
use crate::storage::runs::Stamps;
use crate::storage::{Keyspace, Snapshot, Stamped, Stamper, StorageResult};

/// The oplog format version mongod 7.0 writes (`v`).
const VERSION: i64 = 2;

/// The oplog of this member: the clock that times its entries, the term they are written in,
/// and the time of the last entry committed, which waiting readers watch.
#[derive(Debug)]
pub struct Oplog {
    clock: Arc<ClusterClock>,
    term: i64,
    latest: watch::Sender<u64>,
    /// The time of the last entry made durable.
    durable: watch::Sender<u64>,
    waits_for_sync: std::sync::atomic::AtomicBool,
    /// Its bounds and what it holds (see [`super::retention`]).
    retention: super::retention::Retention,
}

fn now_ms() -> i64 {
    bson::DateTime::now().timestamp_millis()
}

impl Oplog {
    /// The oplog timed by `clock` in `term`, whose last entry (if any) is at `last`.
    pub fn new(clock: Arc<ClusterClock>, term: i64, last: Option<Timestamp>) -> Self {
        Oplog {
            clock,
            term,
            latest: watch::Sender::new(last.map_or(0, ts_to_u64)),
            durable: watch::Sender::new(last.map_or(0, ts_to_u64)),
            waits_for_sync: std::sync::atomic::AtomicBool::new(false),
            retention: super::retention::Retention::default(),
        }
    }

    /// From now on readers see only entries made durable (on a durable store): a crash never
    /// takes back an entry a change stream has shown.
    pub fn set_waits_for_sync(&self, waits: bool) {
        self.waits_for_sync
            .store(waits, std::sync::atomic::Ordering::Release);
    }

    fn waits_for_sync(&self) -> bool {
        self.waits_for_sync
            .load(std::sync::atomic::Ordering::Acquire)
    }

    /// The time of the last entry readers may see: the last durable one (or, on a store that
    /// keeps nothing across restarts, the last committed).
    pub fn visible(&self) -> u64 {
        if self.waits_for_sync() {
            *self.durable.borrow()
        } else {
            self.latest()
        }
    }

    /// A receiver that sees [`Oplog::visible`] move.
    pub fn subscribe_visible(&self) -> watch::Receiver<u64> {
        if self.waits_for_sync() {
            self.durable.subscribe()
        } else {
            self.latest.subscribe()
        }
    }

    /// Its bounds and running figures (size, minimum retention, the oldest entry kept).
    pub fn retention(&self) -> &super::retention::Retention {
        &self.retention
    }

    /// The time ([`ts_to_u64`]) of the oldest entry kept (0 before the retention task first
    /// looked): a change stream cannot resume before it (`ChangeStreamHistoryLost`).
    pub fn oldest(&self) -> u64 {
        self.retention.oldest()
    }

    /// The time of the last entry committed ([`ts_to_u64`]; 0 when there is none).
    pub fn latest(&self) -> u64 {
        *self.latest.borrow()
    }

    /// A receiver that sees [`Oplog::latest`] move.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.latest.subscribe()
    }

    /// The term entries are written in.
    pub fn term(&self) -> i64 {
        self.term
    }

    /// [`Oplog::entry`] of an operation given by value: its fields are not copied again.
    pub fn entry_of(&self, op: RawDocumentBuf, pre_image: Option<&RawDocument>) -> Stamped {
        let mut entry = self.finish(op, false);
        if let Some(pre) = pre_image {
            entry.beside.push((0, pre.as_bytes().to_vec()));
        }
        entry
    }

    /// Appends to `stamps` the entry of an [`insert_op`] of `doc` (whose `_id` is `id`) into
    /// the collection `coll` of `db`, written straight into their buffer: the hot path of every
    /// insert (a batch of inserts makes one entry a document, as mongod's does, and they are
    /// written one after the other into the run they are stored as, `storage::runs`).
    pub fn append_insert(
        &self,
        stamps: &mut Stamps,
        (db, coll): (&str, &str),
        ui: [u8; 16],
        doc: &RawDocument,
        id: RawBsonRef<'_>,
    ) {
        // `{_id}` from the document's own first element when it is `_id` (as stored documents
        // have it), without building it.
        let first_id = first_id_element(doc);
        let built = first_id.is_none().then(|| document_key(id));
        let o2_len = match (first_id, &built) {
            (Some(element), _) => element.len() + 5,
            (None, Some(key)) => key.as_bytes().len(),
            (None, None) => 0,
        };
        let capacity = doc.as_bytes().len() + o2_len + insert_overhead(db.len() + coll.len() + 1);
        stamps.append_with(capacity, |buf| {
            let mut e = EntryWriter::start(buf);
            e.string("op", &["i"]);
            e.string("ns", &[db, ".", coll]);
            e.uuid("ui", ui);
            e.document("o", doc.as_bytes());
            match (first_id, &built) {
                (Some(element), _) => e.document_of("o2", element),
                (None, Some(key)) => e.document("o2", key.as_bytes()),
                (None, None) => {}
            }
            let ts_at = e.timestamp("ts");
            e.int64("t", self.term);
            e.int64("v", VERSION);
            e.date_time("wall", now_ms());
            e.finish();
            ts_at
        });
    }

    /// The entry of one operation (`{op, ns, ui?, o, o2?}`), its time left for the commit,
    /// with the pre-image of the document it changes when change streams want it
    /// ([`pre_image`] reads it back).
    pub fn entry(&self, op: &RawDocument, pre_image: Option<&RawDocument>) -> Stamped {
        let mut doc = RawDocumentBuf::new();
        for (key, value) in op.iter().flatten() {
            doc.append(key, value);
        }
        let mut entry = self.finish(doc, false);
        if let Some(pre) = pre_image {
            entry.beside.push((0, pre.as_bytes().to_vec()));
        }
        entry
    }

    /// The one entry of a transaction's operations (`lsid` and `txnNumber` given) or of a batch
    /// of writes done together outside one (neither: mongod's batched deletes): `{op: "c", ns:
    /// "admin.$cmd", o: {applyOps: [...]}}`.
    pub fn apply_ops_entry(
        &self,
        ops: &[(RawDocumentBuf, Option<RawDocumentBuf>)],
        session: Option<(&RawDocument, i64)>,
    ) -> Stamped {
        let mut doc = RawDocumentBuf::new();
        if let Some((lsid, txn_number)) = session {
            doc.append(bson::raw::cstr!("lsid"), lsid);
            doc.append(bson::raw::cstr!("txnNumber"), txn_number);
        }
        doc.append(bson::raw::cstr!("op"), "c");
        doc.append(bson::raw::cstr!("ns"), "admin.$cmd");
        let mut list = bson::RawArrayBuf::new();
        let mut beside = Vec::new();
        for (n, (op, pre)) in (0_u32..).zip(ops) {
            list.push(op.as_ref());
            if let Some(pre) = pre {
                beside.push((n, pre.as_bytes().to_vec()));
            }
        }
        doc.append(bson::raw::cstr!("o"), rawdoc! { "applyOps": list });
        let mut entry = self.finish(doc, session.is_some());
        entry.beside = beside;
        entry
    }

    /// Appends `ts` (to be stamped), `t`, `v`, `wall` (and `prevOpTime`, for a transaction).
    fn finish(&self, mut doc: RawDocumentBuf, prev_op_time: bool) -> Stamped {
        doc.append(
            bson::raw::cstr!("ts"),
            Timestamp {
                time: 0,
                increment: 0,
            },
        );
        // The timestamp's 8 bytes end right before the document's closing byte.
        let ts_at = doc.as_bytes().len() - 1 - 8;
        doc.append(bson::raw::cstr!("t"), self.term);
        doc.append(bson::raw::cstr!("v"), VERSION);
        doc.append(
            bson::raw::cstr!("wall"),
            bson::DateTime::from_millis(now_ms()),
        );
        if prev_op_time {
            doc.append(
                bson::raw::cstr!("prevOpTime"),
                rawdoc! { "ts": Timestamp { time: 0, increment: 0 }, "t": -1_i64 },
            );
        }
        Stamped {
            value: doc.into_bytes(),
            ts_at,
            beside: Vec::new(),
        }
    }
}

impl Stamper for Oplog {
    fn stamp(&self, n: u64, apply: &mut dyn FnMut(u64) -> StorageResult<()>) -> StorageResult<u64> {
        let last = ts_to_u64(self.clock.stamp(n, now_ms(), apply)?);
        self.latest.send_if_modified(|latest| {
            let moved = last > *latest;
            if moved {
                *latest = last;
            }
            moved
        });
        Ok(last)
    }

    fn mark(&self) -> u64 {
        self.latest()
    }

    fn committed(&self, first: u64, sizes: &[(u64, u64)]) {
        self.retention.record(first, sizes, now_ms());
    }

    fn synced(&self, mark: u64) {
        self.durable.send_if_modified(|durable| {
            let moved = mark > *durable;
            if moved {
                *durable = mark;
            }
            moved
        });
    }
}

/// The bytes an insert's entry ([`Oplog::append_insert`]) adds to its document and `{_id}`, for
/// a namespace of `ns` bytes.
pub fn insert_overhead(ns: usize) -> usize {
    // The document's length and closing NUL (5), then each field's type, name and value: `op`
    // (10), `ns` (9 and the namespace), `ui` (25), `o` (3 and the document), `o2` (4 and
    // `{_id}`), `ts` (12), `t` (11), `v` (11), `wall` (14).
    ns + 104
}

/// The size of `{_id: <ObjectId>}`, the usual `o2`.
pub const OBJECT_ID_KEY_LEN: usize = 22;

/// The bytes of `doc`'s first element (type, key, value) if its key is `_id`.
fn first_id_element(doc: &RawDocument) -> Option<&[u8]> {
    let first = doc.iter_elements().next()?.ok()?;
    if first.key().as_str() != "_id" {
        return None;
    }
    // Type byte, "_id" and its NUL, then the value.
    doc.as_bytes().get(4..4 + 5 + first.size())
}

/// A BSON document written element by element at the end of a buffer
/// ([`Oplog::append_insert`]): the same bytes `rawdoc!` gives, without its growth and
/// per-append checks. Keys are this module's own constants (no NUL inside).
struct EntryWriter<'a> {
    buf: &'a mut Vec<u8>,
    start: usize,
}

impl<'a> EntryWriter<'a> {
    fn start(buf: &'a mut Vec<u8>) -> Self {
        let start = buf.len();
        buf.extend_from_slice(&[0; 4]);
        EntryWriter { buf, start }
    }

    fn key(&mut self, kind: u8, key: &str) {
        self.buf.push(kind);
        self.buf.extend_from_slice(key.as_bytes());
        self.buf.push(0);
    }

    /// A string, given in parts.
    fn string(&mut self, key: &str, parts: &[&str]) {
        self.key(0x02, key);
        let len: usize = parts.iter().map(|p| p.len()).sum();
        let len = i32::try_from(len + 1).unwrap_or(i32::MAX);
        self.buf.extend_from_slice(&len.to_le_bytes());
        for part in parts {
            self.buf.extend_from_slice(part.as_bytes());
        }
        self.buf.push(0);
    }

    fn uuid(&mut self, key: &str, bytes: [u8; 16]) {
        self.key(0x05, key);
        self.buf.extend_from_slice(&16_i32.to_le_bytes());
        self.buf.push(0x04);
        self.buf.extend_from_slice(&bytes);
    }

    /// An embedded document, given as its (valid) bytes.
    fn document(&mut self, key: &str, bytes: &[u8]) {
        self.key(0x03, key);
        self.buf.extend_from_slice(bytes);
    }

    /// An embedded document of one element, given as its (valid) bytes.
    fn document_of(&mut self, key: &str, element: &[u8]) {
        self.key(0x03, key);
        let len = i32::try_from(element.len() + 5).unwrap_or(i32::MAX);
        self.buf.extend_from_slice(&len.to_le_bytes());
        self.buf.extend_from_slice(element);
        self.buf.push(0);
    }

    /// A zero timestamp; returns where its 8 bytes start, counted from the document's start.
    fn timestamp(&mut self, key: &str) -> usize {
        self.key(0x11, key);
        let at = self.buf.len() - self.start;
        self.buf.extend_from_slice(&[0; 8]);
        at
    }

    fn int64(&mut self, key: &str, value: i64) {
        self.key(0x12, key);
        self.buf.extend_from_slice(&value.to_le_bytes());
    }

    fn date_time(&mut self, key: &str, ms: i64) {
        self.key(0x09, key);
        self.buf.extend_from_slice(&ms.to_le_bytes());
    }

    fn finish(self) {
        self.buf.push(0);
        let len = i32::try_from(self.buf.len() - self.start).unwrap_or(i32::MAX);
        if let Some(head) = self.buf.get_mut(self.start..self.start + 4) {
            head.copy_from_slice(&len.to_le_bytes());
        }
    }
}

/// The key of the entry at `ts`.
pub fn key(ts: Timestamp) -> [u8; 8] {
    ts_to_u64(ts).to_be_bytes()
}

/// The pre-image kept with the entry at `ts` for its operation `n` (0 for an entry of one
/// operation; the index in `applyOps` otherwise), if any.
pub fn pre_image(
    snapshot: &dyn Snapshot,
    ts: Timestamp,
    n: u32,
) -> StorageResult<Option<RawDocumentBuf>> {
    let mut k = key(ts).to_vec();
    k.extend_from_slice(&n.to_be_bytes());
    match snapshot.get(Keyspace::Oplog, &k)? {
        Some(v) => RawDocumentBuf::from_bytes(v.to_vec())
            .map(Some)
            .map_err(|e| crate::storage::StorageError::Corrupt(format!("a pre-image: {e}"))),
        None => Ok(None),
    }
}

/// The time of the entry under `key`: `None` for other keys (pre-images kept beside entries).
pub fn ts_of_key(key: &[u8]) -> Option<Timestamp> {
    <[u8; 8]>::try_from(key)
        .ok()
        .map(|k| ts_from_u64(u64::from_be_bytes(k)))
}

/// The time of the last entry in `snapshot`, if any.
pub fn last_ts(snapshot: &dyn Snapshot) -> StorageResult<Option<Timestamp>> {
    match snapshot
        .range(
            Keyspace::Oplog,
            std::ops::Bound::Unbounded,
            std::ops::Bound::Unbounded,
            true,
        )
        .next()
        .transpose()?
    {
        Some((key, _)) => Ok(key.get(..8).and_then(ts_of_key)),
        None => Ok(None),
    }
}

/// A collection's `ui`: the UUID `listCollections` shows for it.
pub fn uuid(bytes: [u8; 16]) -> Binary {
    Binary {
        subtype: BinarySubtype::Uuid,
        bytes: bytes.to_vec(),
    }
}

fn op_head(op: &str, ns: &str, ui: Option<[u8; 16]>) -> RawDocumentBuf {
    let mut doc = rawdoc! { "op": op, "ns": ns };
    if let Some(ui) = ui {
        doc.append(bson::raw::cstr!("ui"), uuid(ui));
    }
    doc
}

/// `{_id: id}`: a document key.
pub fn document_key(id: RawBsonRef<'_>) -> RawDocumentBuf {
    let mut key = RawDocumentBuf::new();
    key.append(bson::raw::cstr!("_id"), id);
    key
}

/// The insert of `doc` (whose `_id` is `id`) into `ns`.
pub fn insert_op(ns: &str, ui: [u8; 16], doc: &RawDocument, id: RawBsonRef<'_>) -> RawDocumentBuf {
    let mut op = op_head("i", ns, Some(ui));
    op.append(bson::raw::cstr!("o"), doc);
    op.append(bson::raw::cstr!("o2"), document_key(id));
    op
}

/// An update of the document `id` of `ns`: `o` is `{$v: 2, diff}`, or the whole new document
/// for a replacement.
pub fn update_op(ns: &str, ui: [u8; 16], o: &RawDocument, id: RawBsonRef<'_>) -> RawDocumentBuf {
    let mut op = op_head("u", ns, Some(ui));
    op.append(bson::raw::cstr!("o"), o);
    op.append(bson::raw::cstr!("o2"), document_key(id));
    op
}

/// The delete of the document `id` of `ns`.
pub fn delete_op(ns: &str, ui: [u8; 16], id: RawBsonRef<'_>) -> RawDocumentBuf {
    let mut op = op_head("d", ns, Some(ui));
    op.append(bson::raw::cstr!("o"), document_key(id));
    op
}

/// A command on database `db` (`ns` is `db.$cmd`), of the collection `ui` if it is about one.
pub fn command_op(
    db: &str,
    ui: Option<[u8; 16]>,
    o: &RawDocument,
    o2: Option<&RawDocument>,
) -> RawDocumentBuf {
    let mut op = op_head("c", &format!("{db}.$cmd"), ui);
    op.append(bson::raw::cstr!("o"), o);
    if let Some(o2) = o2 {
        op.append(bson::raw::cstr!("o2"), o2);
    }
    op
}

/// The `create` of collection `db.name` (`ui`) with `options`: `{create, …options, idIndex}`.
pub fn create_op(db: &str, name: &str, ui: [u8; 16], options: &RawDocument) -> RawDocumentBuf {
    let mut o = rawdoc! { "create": name };
    for (key, value) in options.iter().flatten() {
        o.append(key, value);
    }
    o.append(
        bson::raw::cstr!("idIndex"),
        rawdoc! { "v": 2, "key": { "_id": 1 }, "name": "_id_" },
    );
    command_op(db, Some(ui), &o, None)
}

/// A session's `lsid` as the oplog records it: `{id, uid}`, `uid` the SHA-256 of the user
/// name (empty: no user).
pub fn lsid_doc(id: &crate::sessions::SessionId) -> RawDocumentBuf {
    use sha2::Digest as _;
    let uid = sha2::Sha256::digest(b"");
    rawdoc! {
        "id": uuid(*id),
        "uid": Binary { subtype: BinarySubtype::Generic, bytes: uid.to_vec() },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::{Batch, GroupCommit, MemoryStorage};

    fn oplog() -> (Arc<GroupCommit>, Arc<Oplog>) {
        let store = Arc::new(GroupCommit::new(Arc::new(MemoryStorage::new())));
        let clock = Arc::new(ClusterClock::new(now_ms()));
        let log = Arc::new(Oplog::new(clock, 3, None));
        store.set_stamper(Arc::clone(&log) as Arc<dyn Stamper>);
        (store, log)
    }

    #[test]
    fn entries_get_increasing_times_in_their_values_and_keys() {
        let (store, log) = oplog();
        let mut batch = Batch::new();
        for i in 0..3 {
            let doc = rawdoc! { "_id": i, "x": "y" };
            let op = insert_op("db.c", [7; 16], &doc, RawBsonRef::Int32(i));
            batch.stamped.push(log.entry(&op, None));
        }
        let (_, last) = store.commit_stamped(batch).unwrap();
        let snap = store.storage().snapshot();
        let entries: Vec<_> = snap
            .range(
                Keyspace::Oplog,
                std::ops::Bound::Unbounded,
                std::ops::Bound::Unbounded,
                false,
            )
            .map(Result::unwrap)
            .collect();
        assert_eq!(entries.len(), 3);
        let mut prev = 0;
        for (n, (key, value)) in (0_i32..).zip(entries.iter()) {
            let doc = RawDocument::from_bytes(value).unwrap();
            let ts = doc.get_timestamp("ts").unwrap();
            assert_eq!(ts_of_key(key), Some(ts));
            assert!(ts_to_u64(ts) > prev);
            prev = ts_to_u64(ts);
            assert_eq!(doc.get_str("op").unwrap(), "i");
            assert_eq!(doc.get_document("o").unwrap().get_i32("_id").unwrap(), n);
            assert_eq!(doc.get_i64("t").unwrap(), 3);
            assert_eq!(doc.get_i64("v").unwrap(), 2);
            let keys: Vec<&str> = doc.iter().map(|e| e.unwrap().0.as_str()).collect();
            assert_eq!(keys, ["op", "ns", "ui", "o", "o2", "ts", "t", "v", "wall"]);
        }
        assert_eq!(last, Some(prev));
        assert_eq!(log.latest(), prev);
        assert_eq!(last_ts(&*snap).unwrap().map(ts_to_u64), Some(prev));
    }

    #[test]
    fn an_insert_entry_written_directly_is_the_generic_one() {
        let (_, log) = oplog();
        for doc in [
            rawdoc! { "_id": 1, "x": "y" },
            rawdoc! { "_id": { "a": [1, 2] }, "s": "é", "n": null },
            rawdoc! { "_id": "k" },
            // `_id` not first: its key is built.
            rawdoc! { "a": 1, "_id": 2.5 },
        ] {
            let id = doc.get("_id").unwrap().unwrap();
            let mut stamps = Stamps::default();
            // After another entry: written at the end of the run.
            stamps.push(log.entry_of(insert_op("db.other", [1; 16], &doc, id), None));
            log.append_insert(&mut stamps, ("db", "coll"), [9; 16], &doc, id);
            let direct = stamps.into_values().pop().unwrap();
            let generic = log.entry_of(insert_op("db.coll", [9; 16], &doc, id), None);
            assert_eq!(direct.ts_at, generic.ts_at);
            // Equal but for the wall clock, read twice.
            let wall = |v: &[u8]| {
                RawDocument::from_bytes(v)
                    .unwrap()
                    .get_datetime("wall")
                    .unwrap()
                    .timestamp_millis()
            };
            let (mut a, mut b) = (direct.value.clone(), generic.value.clone());
            assert!(wall(&b) - wall(&a) < 1_000);
            let tail = a.len() - 9;
            a[tail..tail + 8].fill(0);
            b[tail..tail + 8].fill(0);
            assert_eq!(a, b);
        }
    }

    #[test]
    fn without_a_stamper_nothing_is_logged() {
        let store = GroupCommit::new(Arc::new(MemoryStorage::new()));
        let clock = Arc::new(ClusterClock::new(now_ms()));
        let log = Oplog::new(clock, 1, None);
        let mut batch = Batch::new();
        batch.put(Keyspace::Docs, &b"k"[..], &b"v"[..]);
        batch
            .stamped
            .push(log.entry(&delete_op("a.b", [0; 16], RawBsonRef::Int32(1)), None));
        let (_, last) = store.commit_stamped(batch).unwrap();
        assert_eq!(last, None);
        let snap = store.storage().snapshot();
        assert!(last_ts(&*snap).unwrap().is_none());
        assert!(snap.get(Keyspace::Docs, b"k").unwrap().is_some());
    }

    #[test]
    fn a_transaction_is_one_apply_ops_entry() {
        let (store, log) = oplog();
        let ops = vec![
            (delete_op("a.b", [1; 16], RawBsonRef::Int32(1)), None),
            (
                delete_op("a.b", [1; 16], RawBsonRef::Int32(2)),
                Some(rawdoc! { "_id": 2, "was": "here" }),
            ),
        ];
        let lsid = rawdoc! { "id": uuid([9; 16]) };
        let mut batch = Batch::new();
        batch
            .stamped
            .push(log.apply_ops_entry(&ops, Some((&lsid, 5))));
        store.commit(batch).unwrap();
        let snap = store.storage().snapshot();
        let (_, value) = snap.prefix(Keyspace::Oplog, &[]).next().unwrap().unwrap();
        let doc = RawDocument::from_bytes(&value).unwrap();
        let keys: Vec<&str> = doc.iter().map(|e| e.unwrap().0.as_str()).collect();
        assert_eq!(
            keys,
            [
                "lsid",
                "txnNumber",
                "op",
                "ns",
                "o",
                "ts",
                "t",
                "v",
                "wall",
                "prevOpTime"
            ]
        );
        let inner = doc
            .get_document("o")
            .unwrap()
            .get_array("applyOps")
            .unwrap();
        assert_eq!(inner.into_iter().count(), 2);
        assert_ne!(doc.get_timestamp("ts").unwrap().time, 0);
    }

    #[test]
    fn concurrent_stamped_commits_become_visible_in_time_order() {
        let (store, log) = oplog();
        let mut rx = log.subscribe();
        let writers: Vec<_> = (0..4)
            .map(|w| {
                let store = Arc::clone(&store);
                let log = Arc::clone(&log);
                std::thread::spawn(move || {
                    for i in 0..200 {
                        let mut batch = Batch::new();
                        let op = delete_op("a.b", [1; 16], RawBsonRef::Int32(w * 1000 + i));
                        batch.stamped.push(log.entry(&op, None));
                        store.commit(batch).unwrap();
                    }
                })
            })
            .collect();
        // Every snapshot taken meanwhile shows a prefix of the final oplog: no entry ever
        // appears before one already seen.
        let keys = |snap: &dyn Snapshot| -> Vec<u64> {
            snap.prefix(Keyspace::Oplog, &[])
                .map(|e| u64::from_be_bytes(e.unwrap().0[..].try_into().unwrap()))
                .collect()
        };
        let mut seen = Vec::new();
        while !writers.iter().all(std::thread::JoinHandle::is_finished) {
            seen.push(keys(&*store.storage().snapshot()));
        }
        for w in writers {
            w.join().unwrap();
        }
        let snap = store.storage().snapshot();
        let all = keys(&*snap);
        for observed in &seen {
            assert_eq!(observed[..], all[..observed.len()]);
        }
        assert_eq!(*rx.borrow_and_update(), *all.last().unwrap());
        assert_eq!(snap.prefix(Keyspace::Oplog, &[]).count(), 800);
    }
}
