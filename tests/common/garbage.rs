//! What the tests of removed data share (`garbage.rs`, `garbage_crash.rs`; issue #21): the
//! server they start, the data they write, how they read and compare it, and the background
//! work they set off and wait for.
//!
//! The tests bring the data they remove into fjall's tables, not only its memtables: a memtable
//! holds 64 MiB, about as much as these tests write at most, and removing keys that were never
//! flushed exercises no table-level work (dropping tables, compaction filters). They use what
//! `docs/storage.md` ("Version chains") documents: a key written 256 times rotates its
//! keyspace's memtable, whose flush writes a table ([`flush`]).
//!
//! Data sizes follow the build: a debug server replays its journal at some 40,000 entries a
//! second after a kill, so debug runs use [`BIG`] = 20,000 documents where a release run uses
//! 200,000.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use bson::{Bson, Document, RawBsonRef, RawDocumentBuf, doc, rawdoc};
use mongodb::options::Hint;
use mongodb::{Client, Collection};

use super::process::{EbbProcess, QUICK_DRAIN};
use super::{TestResult, integer};

/// The database of the collections whose data is removed, and of a neighbour of theirs.
pub const DB: &str = "garbage";
/// Where [`flush`] writes.
pub const AUX_DB: &str = "garbage_aux";
/// The name of the collections that lose most of their documents.
pub const THIN: &str = "thin";
/// Documents of the collections whose data is removed.
pub const BIG: i64 = if cfg!(debug_assertions) {
    20_000
} else {
    200_000
};
/// Filler of the big collections' documents.
const PAD: &str = "0123456789abcdef0123456789abcdef";
/// Bound on background work (removal of dropped data, the purge) finishing.
pub const SETTLE_DEADLINE: Duration = Duration::from_secs(60);

// ---------------------------------------------------------------------------------------------
// Servers and their logs
// ---------------------------------------------------------------------------------------------

/// A test's `ebb` (the real binary) on a data directory of its own, and a client of it, across
/// kills and restarts. The errors and panics of each process's log are collected as it ends (a
/// kill may leave recovery a warning to give, never an error).
pub struct Server {
    /// A client of the running process (after a kill, of the dead one until the restart).
    client: Client,
    process: EbbProcess,
    up: bool,
    test_commands: bool,
    errors: Vec<String>,
    /// Last: removed once the process is gone.
    dir: tempfile::TempDir,
}

impl Server {
    /// Starts `ebb` on a new data directory (with the test-only commands, the test clock among
    /// them, when `test_commands`).
    pub async fn start(test_commands: bool) -> TestResult<Server> {
        let dir = super::process::data_dir("ebb-garbage-")?;
        let process = Self::spawn(dir.path(), test_commands).await?;
        Ok(Server {
            client: process.client().await?,
            process,
            up: true,
            test_commands,
            errors: Vec::new(),
            dir,
        })
    }

    async fn spawn(dir: &Path, test_commands: bool) -> TestResult<EbbProcess> {
        let mut args = QUICK_DRAIN.to_vec();
        if test_commands {
            args.push("--enable-test-commands");
        }
        EbbProcess::start(dir, &args).await
    }

    /// A client of the running process.
    pub fn client(&self) -> Client {
        self.client.clone()
    }

    /// The data directory.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// SIGKILL. The server stays down until [`Server::restart`].
    pub async fn kill_9(&mut self) -> TestResult {
        self.up = false;
        self.process.kill_9().await?;
        self.errors.extend(self.process.errors());
        Ok(())
    }

    /// Starts the server again, on the same directory; returns a client of it.
    pub async fn restart(&mut self) -> TestResult<Client> {
        if self.up {
            return Err("restart of a running server".into());
        }
        self.process = Self::spawn(self.dir.path(), self.test_commands).await?;
        self.client = self.process.client().await?;
        self.up = true;
        Ok(self.client())
    }

    /// SIGKILL, then [`Server::restart`].
    pub async fn kill_and_restart(&mut self) -> TestResult<Client> {
        self.kill_9().await?;
        self.restart().await
    }

    /// SIGTERM and a clean exit, then [`Server::restart`].
    pub async fn terminate_and_restart(&mut self) -> TestResult<Client> {
        self.up = false;
        self.process.terminate().await?;
        self.errors.extend(self.process.errors());
        self.restart().await
    }

    /// SIGTERM and a clean exit; returns the errors and panics every process logged.
    pub async fn finish(self) -> TestResult<Vec<String>> {
        let Server {
            client,
            mut process,
            mut errors,
            ..
        } = self;
        drop(client);
        process.terminate().await?;
        errors.extend(process.errors());
        Ok(errors)
    }
}

/// Fails if any server logged an error or panicked.
pub fn assert_no_errors(test: &str, errors: &[String]) {
    assert!(errors.is_empty(), "{test}: the server logged: {errors:#?}");
}

// ---------------------------------------------------------------------------------------------
// Reading and comparing
// ---------------------------------------------------------------------------------------------

pub fn raw(client: &Client, db: &str, name: &str) -> Collection<RawDocumentBuf> {
    client.database(db).collection(name)
}

pub async fn command(client: &Client, db: &str, body: Document) -> TestResult<Document> {
    Ok(client.database(db).run_command(body).await?)
}

/// Every document of `db.name`, read by a collection scan (the scan whose steps over garbage
/// the server counts) and put in `_id` order here, as the server returns its bytes.
pub async fn docs_of(client: &Client, db: &str, name: &str) -> TestResult<Vec<RawDocumentBuf>> {
    let mut cursor = raw(client, db, name).find(doc! {}).await?;
    let mut out = Vec::new();
    while cursor.advance().await? {
        out.push(cursor.current().to_owned());
    }
    out.sort_by_key(id_key);
    Ok(out)
}

/// The documents of `db.name` matching `filter`, read through the index `hint`, in `_id` order.
pub async fn docs_by_index(
    client: &Client,
    db: &str,
    name: &str,
    filter: Document,
    hint: &str,
) -> TestResult<Vec<RawDocumentBuf>> {
    let mut cursor = raw(client, db, name)
        .find(filter)
        .hint(Hint::Name(hint.to_owned()))
        .await?;
    let mut out = Vec::new();
    while cursor.advance().await? {
        out.push(cursor.current().to_owned());
    }
    out.sort_by_key(id_key);
    Ok(out)
}

/// A document's `_id`, as a sortable key (the tests' `_id`s are int64s or strings).
fn id_key(doc: &RawDocumentBuf) -> String {
    match doc.get("_id") {
        Ok(Some(RawBsonRef::Int64(i))) => format!("i{i:020}"),
        Ok(Some(RawBsonRef::String(s))) => format!("s{s}"),
        Ok(Some(other)) => format!("?{other:?}"),
        _ => "(no _id)".to_owned(),
    }
}

/// Describes how `found` differs from `expected` (both of distinct `_id`s): missing, changed
/// and unexpected documents, a few of each. Empty when they are equal.
fn differences(what: &str, expected: &[RawDocumentBuf], found: &[RawDocumentBuf]) -> Vec<String> {
    let want: BTreeMap<String, &RawDocumentBuf> = expected.iter().map(|d| (id_key(d), d)).collect();
    let got: BTreeMap<String, &RawDocumentBuf> = found.iter().map(|d| (id_key(d), d)).collect();
    let mut problems = Vec::new();
    if got.len() != found.len() {
        problems.push(format!(
            "{what}: {} documents returned, {} distinct _ids",
            found.len(),
            got.len()
        ));
    }
    let missing: Vec<&String> = want.keys().filter(|k| !got.contains_key(*k)).collect();
    let extra: Vec<&String> = got.keys().filter(|k| !want.contains_key(*k)).collect();
    let changed: Vec<&String> = want
        .iter()
        .filter(|(k, d)| got.get(*k).is_some_and(|g| g.as_bytes() != d.as_bytes()))
        .map(|(k, _)| k)
        .collect();
    for (label, keys) in [
        ("missing (lost)", &missing),
        ("not byte-equal", &changed),
        ("unexpected (came back?)", &extra),
    ] {
        if !keys.is_empty() {
            problems.push(format!(
                "{what}: {} documents {label}, first: {:?}",
                keys.len(),
                keys.iter().take(5).collect::<Vec<_>>()
            ));
        }
    }
    if let Some(k) = extra.first() {
        problems.push(format!("{what}: e.g. {k} is {:?}", got[*k]));
    }
    problems
}

pub fn check_same(what: &str, expected: &[RawDocumentBuf], found: &[RawDocumentBuf]) {
    let problems = differences(what, expected, found);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// `{count: name}`'s `n`.
pub async fn count(client: &Client, db: &str, name: &str) -> TestResult<i64> {
    let reply = command(client, db, doc! { "count": name }).await?;
    Ok(integer(reply.get("n")).ok_or_else(|| format!("count answered {reply}"))?)
}

/// `validate` of `db.name`, which must find the collection whole: `valid`, no extra or missing
/// index entries, `nrecords` (live documents) as expected, and every index with an entry per
/// live document for `full_indexes`. Returns the reply.
pub async fn validate(
    client: &Client,
    db: &str,
    name: &str,
    nrecords: i64,
    full_indexes: &[&str],
) -> TestResult<Document> {
    let reply = command(client, db, doc! { "validate": name }).await?;
    let shown = || format!("validate {db}.{name}: {reply}");
    assert_eq!(reply.get_bool("valid").ok(), Some(true), "{}", shown());
    for list in ["errors", "extraIndexEntries", "missingIndexEntries"] {
        assert!(
            reply.get_array(list).is_ok_and(Vec::is_empty),
            "{list}: {}",
            shown()
        );
    }
    assert_eq!(
        integer(reply.get("nrecords")),
        Some(nrecords),
        "{}",
        shown()
    );
    let keys = reply.get_document("keysPerIndex")?;
    for index in full_indexes {
        assert_eq!(
            integer(keys.get(*index)),
            Some(nrecords),
            "keys of {index}: {}",
            shown()
        );
    }
    Ok(reply)
}

/// Whether `validate` reports expired documents the purge has not removed yet.
pub fn expired_pending(validate_reply: &Document) -> bool {
    validate_reply
        .get_array("warnings")
        .is_ok_and(|w| !w.is_empty())
}

// ---------------------------------------------------------------------------------------------
// Background work: flushes, compaction, the purge
// ---------------------------------------------------------------------------------------------

/// Statements of [`flush`]: enough for a key to reach the 256 writes that rotate its memtable
/// even if one rotation is skipped because an earlier flush is still pending.
pub const FLUSH_WRITES: usize = 600;

/// Brings what is in the memtables of the `docs` and `index` keyspaces into tables: one
/// `update` of [`FLUSH_WRITES`] statements on one document of an indexed collection of its
/// own, alternating its indexed field between two values, so that the document's key and the
/// index entry of one value are each written past the rotation threshold.
pub async fn flush(client: &Client) -> TestResult {
    let updates: Vec<Document> = (0..FLUSH_WRITES)
        .map(|i| {
            doc! {
                "q": { "_id": 0 },
                "u": { "$set": { "f": i64::try_from(i % 2).unwrap_or(0) }, "$inc": { "n": 1 } },
                "upsert": true,
            }
        })
        .collect();
    let reply = command(
        client,
        AUX_DB,
        doc! { "update": "flush", "updates": updates },
    )
    .await?;
    assert_eq!(
        integer(reply.get("n")),
        Some(i64::try_from(FLUSH_WRITES)?),
        "flush: {reply}"
    );
    Ok(())
}

/// Creates [`flush`]'s collection (before the others, so that its id is the smallest).
pub async fn create_flush_collection(client: &Client) -> TestResult {
    create_index(client, AUX_DB, "flush", doc! { "f": 1 }, None).await
}

/// `createIndexes` of one index (named by default, or `name`).
pub async fn create_index(
    client: &Client,
    db: &str,
    coll: &str,
    key: Document,
    options: Option<Document>,
) -> TestResult {
    let mut spec = options.unwrap_or_default();
    spec.insert("key", key.clone());
    if !spec.contains_key("name") {
        let name: Vec<String> = key.iter().map(|(k, v)| format!("{k}_{v}")).collect();
        spec.insert("name", name.join("_"));
    }
    command(
        client,
        db,
        doc! { "createIndexes": coll, "indexes": [spec] },
    )
    .await?;
    Ok(())
}

/// `serverStatus`.
pub async fn server_status(client: &Client) -> TestResult<Document> {
    command(client, "admin", doc! { "serverStatus": 1 }).await
}

/// `serverStatus.ebb.storage`.
pub async fn storage_status(client: &Client) -> TestResult<Document> {
    Ok(server_status(client)
        .await?
        .get_document("ebb")?
        .get_document("storage")?
        .clone())
}

/// `serverStatus.ebb.storage`'s int64 `field`.
pub fn storage_counter(storage: &Document, field: &str) -> TestResult<i64> {
    match storage.get(field) {
        Some(Bson::Int64(n)) => Ok(*n),
        other => Err(format!("ebb.storage.{field} is {other:?} in {storage}").into()),
    }
}

/// `serverStatus.metrics.ttl`: `(deletedDocuments, passes)`.
pub async fn ttl_metrics(client: &Client) -> TestResult<(i64, i64)> {
    let status = server_status(client).await?;
    let ttl = status.get_document("metrics")?.get_document("ttl")?;
    Ok((
        integer(ttl.get("deletedDocuments")).ok_or("deletedDocuments is not a number")?,
        integer(ttl.get("passes")).ok_or("passes is not a number")?,
    ))
}

/// `{compact: name}` on `db`: its `bytesFreed`, checked to be an int64 ≥ 0 in a reply of
/// `bytesFreed` and `ok: 1` only.
pub async fn compact(client: &Client, db: &str, name: &str) -> TestResult<i64> {
    let reply = command(client, db, doc! { "compact": name }).await?;
    assert_eq!(
        super::number(reply.get("ok")),
        Some(1.0),
        "compact: {reply}"
    );
    assert_eq!(reply.len(), 2, "compact: {reply}");
    match reply.get("bytesFreed") {
        Some(Bson::Int64(n)) if *n >= 0 => Ok(*n),
        other => Err(format!("compact: bytesFreed {other:?} in {reply}").into()),
    }
}

// ---------------------------------------------------------------------------------------------
// The data
// ---------------------------------------------------------------------------------------------

/// Document `i` of a big collection: `k` (977 values) and `s` (13 values) for indexes, `g` (10
/// values) to choose what to keep, `ttl` when given.
pub fn big_doc(i: i64, ttl: Option<i32>) -> RawDocumentBuf {
    let mut doc = rawdoc! {
        "_id": i,
        "k": i % 977,
        "s": format!("s{}", i % 13),
        "g": i % 10,
        "pad": PAD,
    };
    if let Some(ttl) = ttl {
        doc.append(bson::raw::cstr!("ttl"), ttl);
    }
    doc
}

/// Inserts `docs` into `db.name` (the driver splits them into batches).
pub async fn insert(client: &Client, db: &str, name: &str, docs: &[RawDocumentBuf]) -> TestResult {
    for chunk in docs.chunks(10_000) {
        raw(client, db, name).insert_many(chunk).await?;
    }
    Ok(())
}
