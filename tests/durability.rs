//! Durability across restarts of the real `ebb` binary (docs/storage.md, "Durability: group
//! commit" and "Recovery").
//!
//! Each test runs `ebb` as a child process on a data directory of its own, drives a concurrent
//! write load through the `mongodb` driver, stops the process (SIGKILL or SIGTERM), starts it
//! again on the same directory and compares what is stored, byte for byte, with a model built
//! only from what the server acknowledged:
//!
//! - an acknowledged write must be there after the restart (an insert byte-identical, an update
//!   as its result, a delete as an absence);
//! - a write whose outcome is unknown (the driver reported an error once the stop had begun)
//!   may or may not be there, but whole: the document is absent or exactly one version of it;
//! - nothing else may be there.
//!
//! Documents are sent `_id` first, so Ebb stores exactly the bytes sent and `find` returns
//! them as they were. The model survives across rounds, so later rounds also check that what
//! earlier rounds left survives further crashes and recoveries.
//!
//! The load is random; the seed is printed, and `EBB_DURABILITY_SEED=<n>` replays it (as far as
//! thread scheduling allows).

mod common;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use common::TestResult;
use common::process::{EbbProcess, QUICK_DRAIN, data_dir, is_error};
use common::rng::Rng;
use mongodb::bson::spec::BinarySubtype;
use mongodb::bson::{Binary, RawDocumentBuf, doc, rawdoc};
use mongodb::options::{CollectionOptions, WriteConcern};
use mongodb::{Client, Collection};
use tokio::sync::mpsc;

/// Concurrent writers (one driver client each).
const WORKERS: usize = 4;
const DB: &str = "durability";
const COLL: &str = "docs";
/// Bound on the writers finishing once the server is stopped.
const WORKERS_DEADLINE: Duration = Duration::from_secs(30);

// ---------------------------------------------------------------------------------------------
// Randomness
// ---------------------------------------------------------------------------------------------

/// `EBB_DURABILITY_SEED`, or one from the clock; printed so that a failure can be replayed.
fn seeded(test: &str) -> Rng {
    let seed = std::env::var("EBB_DURABILITY_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos());
            // Only the low bits vary between runs; the truncation is the point.
            #[expect(clippy::cast_possible_truncation, reason = "low bits of the clock")]
            let low = nanos as u64;
            low ^ u64::from(std::process::id())
        });
    println!("{test}: seed {seed} (EBB_DURABILITY_SEED={seed} to replay)");
    Rng(seed)
}

fn collection(client: &Client) -> Collection<RawDocumentBuf> {
    client.database(DB).collection(COLL)
}

/// The same collection, writing with `writeConcern: {j: false}`.
fn relaxed_collection(client: &Client) -> Collection<RawDocumentBuf> {
    let concern = WriteConcern::builder().journal(false).build();
    client.database(DB).collection_with_options(
        COLL,
        CollectionOptions::builder().write_concern(concern).build(),
    )
}

// ---------------------------------------------------------------------------------------------
// The model of what must be stored
// ---------------------------------------------------------------------------------------------

/// What is known about one `_id`.
#[derive(Debug, Default)]
struct Entry {
    /// The document as the last acknowledged write left it (`None`: absent).
    acked: Option<RawDocumentBuf>,
    /// Set when the last write to this `_id` has an unknown outcome. It is always the last
    /// write: a writer stops at its first error.
    unknown: Option<Pending>,
    /// Every version ever sent, to tell a stale document from a torn one.
    versions: Vec<RawDocumentBuf>,
}

/// A write whose outcome is unknown.
#[derive(Debug)]
enum Pending {
    /// An insert or an update: the document it leaves if it took effect.
    Put(RawDocumentBuf),
    Delete,
}

impl Pending {
    /// The state this write leaves if it took effect.
    fn result(&self) -> Option<&RawDocumentBuf> {
        match self {
            Pending::Put(doc) => Some(doc),
            Pending::Delete => None,
        }
    }
}

type Model = BTreeMap<i64, Entry>;

/// A document of the load: `_id` first, so that the server stores exactly these bytes.
fn make_doc(id: i64, task: i32, generation: i32, payload: Vec<u8>) -> RawDocumentBuf {
    rawdoc! {
        "_id": id,
        "task": task,
        "gen": generation,
        "payload": Binary { subtype: BinarySubtype::Generic, bytes: payload },
    }
}

/// Counts for one round, printed and asserted on.
#[derive(Debug, Default, Clone, Copy)]
struct Counts {
    /// Acknowledged writes, by kind (insert counts documents).
    inserted: u64,
    updated: u64,
    deleted: u64,
    /// Writes (commands) whose outcome is unknown, and the documents they touched.
    unknown_ops: u64,
    unknown_docs: u64,
    /// After the restart: unknown-outcome documents found applied, and not applied.
    unknown_applied: u64,
    unknown_not_applied: u64,
    /// Acknowledged states not found after the restart (missing, stale or resurrected).
    lost: u64,
    /// Documents matching no version ever sent, or never sent at all.
    torn: u64,
}

impl Counts {
    fn acknowledged(&self) -> u64 {
        self.inserted + self.updated + self.deleted
    }

    fn add(&mut self, other: &Counts) {
        self.inserted += other.inserted;
        self.updated += other.updated;
        self.deleted += other.deleted;
        self.unknown_ops += other.unknown_ops;
        self.unknown_docs += other.unknown_docs;
        self.unknown_applied += other.unknown_applied;
        self.unknown_not_applied += other.unknown_not_applied;
        self.lost += other.lost;
        self.torn += other.torn;
    }
}

/// Reads the whole collection and checks it against `model`, then settles every unknown
/// outcome to what was found (so that the next round starts from known states). Returns the
/// verification counts and a description of each violation.
async fn verify(
    coll: &Collection<RawDocumentBuf>,
    model: &mut Model,
) -> TestResult<(Counts, Vec<String>)> {
    let mut found: HashMap<i64, RawDocumentBuf> = HashMap::new();
    let mut problems = Vec::new();
    let mut counts = Counts::default();
    let mut cursor = coll.find(doc! {}).await?;
    while cursor.advance().await? {
        let current = cursor.current();
        let Ok(id) = current.get_i64("_id") else {
            counts.torn += 1;
            problems.push(format!("a document without an int64 _id: {current:?}"));
            continue;
        };
        if found.insert(id, current.to_owned()).is_some() {
            counts.torn += 1;
            problems.push(format!("_id {id} returned twice"));
        }
    }
    for (id, entry) in model.iter_mut() {
        let observed = found.remove(id);
        if observed == entry.acked {
            if entry.unknown.is_some() {
                counts.unknown_not_applied += 1;
            }
        } else if entry
            .unknown
            .as_ref()
            .is_some_and(|p| p.result() == observed.as_ref())
        {
            counts.unknown_applied += 1;
        } else {
            let what = match (&entry.acked, &observed) {
                (Some(_), None) => "acknowledged document missing".to_owned(),
                (None, Some(_)) => {
                    "present, but absent as last acknowledged or last seen".to_owned()
                }
                (_, Some(doc)) if entry.versions.contains(doc) => {
                    let position = entry.versions.iter().position(|v| v == doc);
                    format!(
                        "stale version {position:?} of {} found instead of the acknowledged one",
                        entry.versions.len()
                    )
                }
                _ => "bytes match no version ever sent".to_owned(),
            };
            let torn = what.starts_with("bytes");
            if torn {
                counts.torn += 1;
            } else {
                counts.lost += 1;
            }
            problems.push(format!(
                "_id {id}: {what} (acknowledged: {:?}, unknown: {:?}, observed: {:?})",
                entry.acked.as_ref().map(|d| d.as_bytes().len()),
                entry
                    .unknown
                    .as_ref()
                    .map(|p| p.result().map(|d| d.as_bytes().len())),
                observed.as_ref().map(|d| d.as_bytes().len()),
            ));
        }
        // From here on the stored state is the known one.
        entry.acked = observed;
        entry.unknown = None;
    }
    for (id, doc) in found {
        counts.torn += 1;
        problems.push(format!("_id {id} was never written: {doc:?}"));
    }
    Ok((counts, problems))
}

// ---------------------------------------------------------------------------------------------
// The write load
// ---------------------------------------------------------------------------------------------

/// One write of the load.
enum Write {
    InsertOne(RawDocumentBuf),
    InsertMany(Vec<RawDocumentBuf>),
    /// `$set` of `gen` and `payload`; the document as it must be afterwards.
    Update(i64, RawDocumentBuf),
    Delete(i64),
}

/// One writer: its own client, its own `_id`s (a disjoint part of the model), sequential
/// writes.
struct Worker {
    task: i32,
    /// Fresh `_id`s are `base + n`.
    base: i64,
    next: i64,
    coll: Collection<RawDocumentBuf>,
    entries: HashMap<i64, Entry>,
    /// `_id`s whose acknowledged state is present: targets for updates and deletes.
    live: Vec<i64>,
    rng: Rng,
    counts: Counts,
    /// Time spent waiting for acknowledged writes, for the relaxed-write test.
    busy: Duration,
}

/// How a worker knows when to stop.
#[derive(Clone)]
enum Until {
    /// Keep writing until the flag is set; errors after that are unknown outcomes, errors
    /// before it are failures.
    Stopped(Arc<AtomicBool>),
    /// This many writes, all of which must succeed.
    Writes(usize),
}

impl Worker {
    fn new(
        task: i32,
        round: i64,
        coll: Collection<RawDocumentBuf>,
        entries: HashMap<i64, Entry>,
        rng: Rng,
    ) -> Worker {
        let live = entries
            .iter()
            .filter(|(_, e)| e.acked.is_some())
            .map(|(&id, _)| id)
            .collect();
        Worker {
            task,
            base: (round << 40) | (i64::from(task) << 32),
            next: 0,
            coll,
            entries,
            live,
            rng,
            counts: Counts::default(),
            busy: Duration::ZERO,
        }
    }

    fn fresh_doc(&mut self) -> RawDocumentBuf {
        self.next += 1;
        let len = self.rng.below(200);
        let payload = self.rng.bytes(len);
        make_doc(self.base + self.next, self.task, 0, payload)
    }

    fn pick(&mut self) -> Write {
        let roll = self.rng.below(100);
        if roll < 20 && !self.live.is_empty() {
            let id = self.live[self.rng.below(self.live.len())];
            let current = self.entries[&id]
                .acked
                .as_ref()
                .expect("live documents are present");
            let task = current.get_i32("task").expect("task field");
            let generation = current.get_i32("gen").expect("gen field") + 1;
            let len = self.rng.below(200);
            let payload = self.rng.bytes(len);
            return Write::Update(id, make_doc(id, task, generation, payload));
        }
        if roll < 35 && !self.live.is_empty() {
            return Write::Delete(self.live[self.rng.below(self.live.len())]);
        }
        if roll < 65 {
            let n = 2 + self.rng.below(7);
            return Write::InsertMany((0..n).map(|_| self.fresh_doc()).collect());
        }
        Write::InsertOne(self.fresh_doc())
    }

    /// Sends `write`. `Err` is a driver error (the outcome is unknown); `Ok(Err)` is an
    /// acknowledged reply that contradicts the model, which is a failure in any case.
    async fn send(&self, write: &Write) -> mongodb::error::Result<Result<(), String>> {
        Ok(match write {
            Write::InsertOne(doc) => {
                self.coll.insert_one(doc).await?;
                Ok(())
            }
            Write::InsertMany(docs) => {
                let r = self.coll.insert_many(docs).await?;
                if r.inserted_ids.len() == docs.len() {
                    Ok(())
                } else {
                    Err(format!("insert_many of {} acknowledged {r:?}", docs.len()))
                }
            }
            Write::Update(id, new) => {
                let set = doc! { "$set": {
                    "gen": new.get_i32("gen").expect("gen field"),
                    "payload": Binary {
                        subtype: BinarySubtype::Generic,
                        bytes: new.get_binary("payload").expect("payload field").bytes.to_vec(),
                    },
                }};
                let r = self.coll.update_one(doc! { "_id": id }, set).await?;
                if r.matched_count == 1 && r.modified_count == 1 {
                    Ok(())
                } else {
                    Err(format!("update of live _id {id} acknowledged {r:?}"))
                }
            }
            Write::Delete(id) => {
                let r = self.coll.delete_one(doc! { "_id": id }).await?;
                if r.deleted_count == 1 {
                    Ok(())
                } else {
                    Err(format!("delete of live _id {id} acknowledged {r:?}"))
                }
            }
        })
    }

    fn acknowledged(&mut self, write: Write) {
        match write {
            Write::InsertOne(doc) => self.inserted(doc),
            Write::InsertMany(docs) => docs.into_iter().for_each(|d| self.inserted(d)),
            Write::Update(id, new) => {
                let entry = self.entries.get_mut(&id).expect("updated a known _id");
                entry.versions.push(new.clone());
                entry.acked = Some(new);
                self.counts.updated += 1;
            }
            Write::Delete(id) => {
                self.entries
                    .get_mut(&id)
                    .expect("deleted a known _id")
                    .acked = None;
                self.live.retain(|&l| l != id);
                self.counts.deleted += 1;
            }
        }
    }

    fn inserted(&mut self, doc: RawDocumentBuf) {
        let id = doc.get_i64("_id").expect("_id");
        self.entries.insert(
            id,
            Entry {
                acked: Some(doc.clone()),
                unknown: None,
                versions: vec![doc],
            },
        );
        self.live.push(id);
        self.counts.inserted += 1;
    }

    fn unknown(&mut self, write: Write) {
        self.counts.unknown_ops += 1;
        let docs = match write {
            Write::InsertOne(doc) => vec![doc],
            Write::InsertMany(docs) => docs,
            Write::Update(id, new) => {
                let entry = self.entries.get_mut(&id).expect("updated a known _id");
                entry.versions.push(new.clone());
                entry.unknown = Some(Pending::Put(new));
                self.counts.unknown_docs += 1;
                return;
            }
            Write::Delete(id) => {
                self.entries
                    .get_mut(&id)
                    .expect("deleted a known _id")
                    .unknown = Some(Pending::Delete);
                self.counts.unknown_docs += 1;
                return;
            }
        };
        for doc in docs {
            let id = doc.get_i64("_id").expect("_id");
            self.entries.insert(
                id,
                Entry {
                    acked: None,
                    unknown: Some(Pending::Put(doc.clone())),
                    versions: vec![doc],
                },
            );
            self.counts.unknown_docs += 1;
        }
    }

    /// Writes until `until` says stop. Reports its first acknowledged write on `started`, or
    /// its failure if that comes first.
    async fn run(mut self, until: Until, started: Started) -> TestResult<Worker> {
        let mut started = Some(started);
        let outcome = self.write_loop(&until, &mut started).await;
        if let (Err(e), Some(tx)) = (&outcome, started) {
            let _ = tx.send(Err(e.to_string())).await;
        }
        outcome.map(|()| self)
    }

    async fn write_loop(&mut self, until: &Until, started: &mut Option<Started>) -> TestResult {
        let mut done = 0;
        loop {
            match until {
                Until::Stopped(flag) if flag.load(Ordering::SeqCst) => break,
                Until::Writes(n) if done == *n => break,
                _ => {}
            }
            let write = self.pick();
            let sent_at = Instant::now();
            match self.send(&write).await {
                Ok(Ok(())) => {
                    self.busy += sent_at.elapsed();
                    self.acknowledged(write);
                    done += 1;
                    if let Some(tx) = started.take() {
                        let _ = tx.send(Ok(())).await;
                    }
                }
                Ok(Err(contradiction)) => return Err(contradiction.into()),
                Err(e) => match until {
                    Until::Stopped(flag) if flag.load(Ordering::SeqCst) => {
                        // The stop has begun: this write may or may not have happened. Stop
                        // here, so that it is the last write to each _id it touched.
                        self.unknown(write);
                        break;
                    }
                    _ => return Err(format!("write failed while the server was up: {e}").into()),
                },
            }
        }
        Ok(())
    }
}

/// Where a writer reports that it got going (its first acknowledged write), or why not.
type Started = mpsc::Sender<Result<(), String>>;

/// How a round ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stop {
    Kill,
    Term,
}

/// Runs [`WORKERS`] writers against `server` (each with its own client and a disjoint part of
/// `model`), stops the server as `stop` says after a random delay with writes in flight, and
/// folds what the writers learned back into `model`.
async fn load_then_stop(
    server: &mut EbbProcess,
    model: &mut Model,
    round: i64,
    rng: &mut Rng,
    stop: Stop,
) -> TestResult<(Counts, Duration)> {
    let flag = Arc::new(AtomicBool::new(false));
    let (started_tx, mut started_rx) = mpsc::channel(WORKERS);
    let mut parts: Vec<HashMap<i64, Entry>> = (0..WORKERS).map(|_| HashMap::new()).collect();
    for (id, entry) in std::mem::take(model) {
        let part = usize::try_from(id.rem_euclid(i64::try_from(WORKERS)?))?;
        parts[part].insert(id, entry);
    }
    let mut handles = Vec::new();
    let mut clients = Vec::new();
    for (task, part) in parts.into_iter().enumerate() {
        let client = server.client().await?;
        let worker = Worker::new(
            i32::try_from(task)?,
            round,
            collection(&client),
            part,
            rng.fork(),
        );
        clients.push(client);
        handles.push(tokio::spawn(
            worker.run(Until::Stopped(Arc::clone(&flag)), started_tx.clone()),
        ));
    }
    drop(started_tx);
    // Every writer has had a write acknowledged: the load is under way.
    for _ in 0..WORKERS {
        tokio::time::timeout(WORKERS_DEADLINE, started_rx.recv())
            .await
            .map_err(|_| "writers did not get going")?
            .ok_or("a writer ended without reporting")?
            .map_err(|e| format!("a writer failed before its first acknowledged write: {e}"))?;
    }
    // A random moment within the load (not a synchronisation: where the stop lands is the
    // point of the test).
    let delay = Duration::from_millis(20 + u64::try_from(rng.below(400))?);
    tokio::time::sleep(delay).await;
    flag.store(true, Ordering::SeqCst);
    match stop {
        Stop::Kill => server.kill_9().await?,
        Stop::Term => server.terminate().await?,
    }
    let mut counts = Counts::default();
    for handle in handles {
        let worker = tokio::time::timeout(WORKERS_DEADLINE, handle)
            .await
            .map_err(|_| "a writer still running after the server stopped")???;
        counts.add(&worker.counts);
        model.extend(worker.entries);
    }
    drop(clients);
    Ok((counts, delay))
}

/// The rounds of the kill and graceful tests: start on the same directory, check everything
/// known so far, load, stop; after the last round, start once more, check and stop gracefully.
async fn rounds(test: &str, rounds: i64, stop: Stop) -> TestResult {
    let began = Instant::now();
    let mut rng = seeded(test);
    let dir = data_dir("ebb-durability-")?;
    let mut model = Model::new();
    let mut total = Counts::default();
    let mut problems = Vec::new();
    let mut alarms = Vec::new();
    let mut previous: Option<(Counts, Duration)> = None;
    for round in 0..=rounds {
        let mut server = EbbProcess::start(dir.path(), &QUICK_DRAIN).await?;
        let client = server.client().await?;
        let (checked, found) = verify(&collection(&client), &mut model).await?;
        if let Some((mut counts, delay)) = previous.take() {
            counts.add(&checked);
            println!(
                "{test}: round {}: {stop:?} after {delay:?}; acknowledged {} (inserted {}, \
                 updated {}, deleted {}), unknown {} writes / {} docs ({} applied, {} not), \
                 lost {}, torn {}; {} documents stored",
                round - 1,
                counts.acknowledged(),
                counts.inserted,
                counts.updated,
                counts.deleted,
                counts.unknown_ops,
                counts.unknown_docs,
                counts.unknown_applied,
                counts.unknown_not_applied,
                counts.lost,
                counts.torn,
                model.values().filter(|e| e.acked.is_some()).count(),
            );
            total.add(&counts);
        } else {
            total.add(&checked);
        }
        problems.extend(
            found
                .into_iter()
                .map(|p| format!("after round {}: {p}", round - 1)),
        );
        drop(client);
        if round == rounds {
            server.terminate().await?;
            alarms.extend(server.alarming_lines());
            break;
        }
        previous = Some(load_then_stop(&mut server, &mut model, round, &mut rng, stop).await?);
        if stop == Stop::Term {
            let log = server.log_lines();
            for expected in ["received SIGTERM", "shutdown complete"] {
                if !log.iter().any(|l| l.contains(expected)) {
                    problems.push(format!("round {round}: no \"{expected}\" in the log"));
                }
            }
        }
        alarms.extend(server.alarming_lines());
    }
    println!(
        "{test}: {rounds} rounds in {:?}: acknowledged {}, unknown {} writes, lost {}, torn {}",
        began.elapsed(),
        total.acknowledged(),
        total.unknown_ops,
        total.lost,
        total.torn,
    );
    for a in &alarms {
        println!("{test}: server log: {a}");
    }
    assert!(total.acknowledged() > 0, "the load acknowledged nothing");
    assert!(
        problems.is_empty(),
        "{} problems (lost {}, torn {}); first ones:\n{}",
        problems.len(),
        total.lost,
        total.torn,
        problems
            .iter()
            .take(20)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert_eq!(total.lost, 0);
    if stop == Stop::Term {
        assert!(alarms.is_empty(), "the server logged: {alarms:#?}");
    } else {
        // A kill may leave recovery something to say, but never a panic or an error.
        let bad: Vec<_> = alarms.iter().filter(|a| is_error(a)).collect();
        assert!(bad.is_empty(), "the server logged: {bad:#?}");
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// The tests
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn acknowledged_writes_survive_kill_9() -> TestResult {
    rounds("acknowledged_writes_survive_kill_9", 5, Stop::Kill).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn graceful_shutdown_keeps_everything() -> TestResult {
    rounds("graceful_shutdown_keeps_everything", 3, Stop::Term).await
}

/// Runs [`WORKERS`] writers of `writes` writes each with `writeConcern: {j: false}`; every one
/// must be acknowledged. Returns the counts and the mean time to acknowledgement.
async fn relaxed_load(
    server: &EbbProcess,
    model: &mut Model,
    round: i64,
    rng: &mut Rng,
    writes: usize,
) -> TestResult<(Counts, Duration)> {
    let (started_tx, _started_rx) = mpsc::channel(WORKERS);
    let mut parts: Vec<HashMap<i64, Entry>> = (0..WORKERS).map(|_| HashMap::new()).collect();
    for (id, entry) in std::mem::take(model) {
        let part = usize::try_from(id.rem_euclid(i64::try_from(WORKERS)?))?;
        parts[part].insert(id, entry);
    }
    let mut handles = Vec::new();
    for (task, part) in parts.into_iter().enumerate() {
        let client = server.client().await?;
        let worker = Worker::new(
            i32::try_from(task)?,
            round,
            relaxed_collection(&client),
            part,
            rng.fork(),
        );
        handles.push(tokio::spawn(
            worker.run(Until::Writes(writes), started_tx.clone()),
        ));
    }
    let mut counts = Counts::default();
    let mut busy = Duration::ZERO;
    for handle in handles {
        let worker = tokio::time::timeout(WORKERS_DEADLINE, handle)
            .await
            .map_err(|_| "a relaxed writer took too long")???;
        counts.add(&worker.counts);
        busy += worker.busy;
        model.extend(worker.entries);
    }
    let writes = u32::try_from(WORKERS * writes)?;
    Ok((counts, busy / writes.max(1)))
}

/// Inserts `_id`s `base..base + n` one after the other through `coll` (whose write concern
/// applies), records them in `model`, and returns the mean time to acknowledgement.
async fn sequential_inserts(
    coll: &Collection<RawDocumentBuf>,
    model: &mut Model,
    base: i64,
    n: i32,
) -> TestResult<Duration> {
    let began = Instant::now();
    for i in 0..n {
        let id = base + i64::from(i);
        let doc = make_doc(id, -1, 0, vec![7; 32]);
        coll.insert_one(&doc).await?;
        model.insert(
            id,
            Entry {
                acked: Some(doc.clone()),
                unknown: None,
                versions: vec![doc],
            },
        );
    }
    Ok(began.elapsed() / u32::try_from(n)?.max(1))
}

/// `writeConcern: {j: false}` writes are acknowledged without waiting for the journal sync;
/// they must nonetheless all survive:
///
/// 1. a journaled write after them, then SIGKILL: the journaled write's sync began after their
///    commits, so it covers them (the durable mark is a commit counter, docs/storage.md);
/// 2. a graceful stop right after they are acknowledged, well within the 100 ms window in
///    which the syncer would cover them anyway: shutdown syncs;
/// 3. nothing after them, then SIGKILL 200 ms later: the syncer covered them within its window.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn relaxed_writes_within_window() -> TestResult {
    const TEST: &str = "relaxed_writes_within_window";
    const WRITES: usize = 150;
    let began = Instant::now();
    let mut rng = seeded(TEST);
    let dir = data_dir("ebb-durability-")?;
    let mut model = Model::new();
    let mut problems = Vec::new();
    let mut alarms = Vec::new();

    // Phase 1: relaxed writes, one journaled write, SIGKILL.
    let mut server = EbbProcess::start(dir.path(), &QUICK_DRAIN).await?;
    let (counts, relaxed) = relaxed_load(&server, &mut model, 0, &mut rng, WRITES).await?;
    let client = server.client().await?;
    sequential_inserts(&collection(&client), &mut model, 1 << 50, 1).await?;
    drop(client);
    server.kill_9().await?;
    alarms.extend(server.alarming_lines());
    let mut server = EbbProcess::start(dir.path(), &QUICK_DRAIN).await?;
    let client = server.client().await?;
    let (checked, found) = verify(&collection(&client), &mut model).await?;
    println!(
        "{TEST}: phase 1 (relaxed writes, a journaled write, kill -9): acknowledged {} \
         (inserted {}, updated {}, deleted {}; mean ack {relaxed:?} with {WORKERS} writers); \
         lost {}, torn {}",
        counts.acknowledged(),
        counts.inserted,
        counts.updated,
        counts.deleted,
        checked.lost,
        checked.torn,
    );
    problems.extend(found.into_iter().map(|p| format!("phase 1: {p}")));

    // For comparison only (timings are not asserted: in a debug build the driver's own cost
    // dominates, and an fdatasync may be nearly free on this disk).
    let relaxed_seq = sequential_inserts(
        &relaxed_collection(&client),
        &mut model,
        (1 << 50) + 1000,
        100,
    )
    .await?;
    let journaled_seq =
        sequential_inserts(&collection(&client), &mut model, (1 << 50) + 2000, 100).await?;
    println!(
        "{TEST}: sequential inserts, mean ack: j: false {relaxed_seq:?}, journaled \
         {journaled_seq:?}"
    );
    drop(client);

    // Phase 2: relaxed writes, then at once a graceful stop.
    let (counts, relaxed) = relaxed_load(&server, &mut model, 1, &mut rng, WRITES).await?;
    server.terminate().await?;
    alarms.extend(server.alarming_lines());
    let mut server = EbbProcess::start(dir.path(), &QUICK_DRAIN).await?;
    let (checked, found) = verify(&collection(&server.client().await?), &mut model).await?;
    println!(
        "{TEST}: phase 2 (relaxed writes, SIGTERM): acknowledged {} (inserted {}, updated {}, \
         deleted {}; mean ack {relaxed:?} with {WORKERS} writers); lost {}, torn {}",
        counts.acknowledged(),
        counts.inserted,
        counts.updated,
        counts.deleted,
        checked.lost,
        checked.torn,
    );
    problems.extend(found.into_iter().map(|p| format!("phase 2: {p}")));

    // Phase 3: relaxed writes, nothing after them, SIGKILL once the journal interval (100 ms)
    // has passed twice over: the syncer must have covered them on its own.
    let (counts, relaxed) = relaxed_load(&server, &mut model, 2, &mut rng, WRITES).await?;
    tokio::time::sleep(Duration::from_millis(200)).await;
    server.kill_9().await?;
    alarms.extend(server.alarming_lines());
    let mut server = EbbProcess::start(dir.path(), &QUICK_DRAIN).await?;
    let (checked, found) = verify(&collection(&server.client().await?), &mut model).await?;
    println!(
        "{TEST}: phase 3 (relaxed writes, 200 ms idle, kill -9): acknowledged {} (inserted {}, \
         updated {}, deleted {}; mean ack {relaxed:?} with {WORKERS} writers); lost {}, torn {}",
        counts.acknowledged(),
        counts.inserted,
        counts.updated,
        counts.deleted,
        checked.lost,
        checked.torn,
    );
    problems.extend(found.into_iter().map(|p| format!("phase 3: {p}")));
    server.terminate().await?;
    alarms.extend(server.alarming_lines());
    println!("{TEST}: done in {:?}", began.elapsed());
    assert!(
        problems.is_empty(),
        "{} problems; first ones:\n{}",
        problems.len(),
        problems
            .iter()
            .take(20)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
    let bad: Vec<_> = alarms.iter().filter(|a| is_error(a)).collect();
    assert!(bad.is_empty(), "the server logged: {bad:#?}");
    Ok(())
}
