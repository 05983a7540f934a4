use std::ops::Bound;
use std::sync::Arc;

use super::*;

fn engines() -> Vec<(Arc<dyn Storage>, Option<tempfile::TempDir>)> {
    let dir = tempfile::tempdir().expect("tempdir");
    let disk = DiskStorage::open(dir.path()).expect("open");
    vec![
        (Arc::new(MemoryStorage::new()), None),
        (Arc::new(disk), Some(dir)),
    ]
}

fn keys(scan: Scan<'_>) -> Vec<Vec<u8>> {
    scan.map(|r| r.expect("scan").0.to_vec()).collect()
}

#[test]
fn batches_are_atomic_and_snapshots_repeatable() {
    for (store, _dir) in engines() {
        let mut b = Batch::new();
        b.put(Keyspace::Docs, &b"a"[..], &b"1"[..]);
        b.put(Keyspace::Index, &b"a"[..], &b"x"[..]);
        store.commit(b).unwrap();
        let before = store.snapshot();
        let mut b = Batch::new();
        b.put(Keyspace::Docs, &b"b"[..], &b"2"[..]);
        b.delete(Keyspace::Docs, &b"a"[..]);
        store.commit(b).unwrap();
        assert_eq!(
            before.get(Keyspace::Docs, b"a").unwrap().as_deref(),
            Some(&b"1"[..])
        );
        assert_eq!(before.get(Keyspace::Docs, b"b").unwrap(), None);
        let after = store.snapshot();
        assert_eq!(after.get(Keyspace::Docs, b"a").unwrap(), None);
        assert_eq!(
            after.get(Keyspace::Index, b"a").unwrap().as_deref(),
            Some(&b"x"[..])
        );
        assert_eq!(
            after.get(Keyspace::Catalog, b"a").unwrap(),
            None,
            "keyspaces are separate"
        );
    }
}

#[test]
fn ranges_in_both_directions() {
    for (store, _dir) in engines() {
        let mut b = Batch::new();
        for k in [&b"p1"[..], b"p2", b"p3", b"q1"] {
            b.put(Keyspace::Docs, k, &b""[..]);
        }
        store.commit(b).unwrap();
        let s = store.snapshot();
        let end = prefix_end(b"p").unwrap();
        let fwd = keys(s.range(
            Keyspace::Docs,
            Bound::Included(b"p"),
            Bound::Excluded(&end),
            false,
        ));
        assert_eq!(fwd, vec![b"p1".to_vec(), b"p2".to_vec(), b"p3".to_vec()]);
        let rev = keys(s.range(
            Keyspace::Docs,
            Bound::Excluded(b"p1"),
            Bound::Excluded(&end),
            true,
        ));
        assert_eq!(rev, vec![b"p3".to_vec(), b"p2".to_vec()]);
        let none = keys(s.range(
            Keyspace::Docs,
            Bound::Included(b"z"),
            Bound::Excluded(b"a"),
            false,
        ));
        assert!(none.is_empty());
    }
}

#[test]
fn prefix_end_cases() {
    assert_eq!(prefix_end(b"ab"), Some(b"ac".to_vec()));
    assert_eq!(prefix_end(&[1, 0xFF]), Some(vec![2]));
    assert_eq!(prefix_end(&[0xFF, 0xFF]), None);
}

#[test]
fn disk_survives_reopen() {
    let dir = tempfile::tempdir().unwrap();
    {
        let store = DiskStorage::open(dir.path()).unwrap();
        let mut b = Batch::new();
        b.put(Keyspace::Docs, &b"k"[..], &b"v"[..]);
        store.commit(b).unwrap();
        store.sync().unwrap();
    }
    let store = DiskStorage::open(dir.path()).unwrap();
    assert_eq!(
        store
            .snapshot()
            .get(Keyspace::Docs, b"k")
            .unwrap()
            .as_deref(),
        Some(&b"v"[..])
    );
}

#[tokio::test]
async fn group_commit_makes_writes_durable() {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn Storage> = Arc::new(DiskStorage::open(dir.path()).unwrap());
    let gc = Arc::new(GroupCommit::new(store));
    let mut tasks = Vec::new();
    for i in 0..64u32 {
        let gc = Arc::clone(&gc);
        tasks.push(tokio::spawn(async move {
            let mut b = Batch::new();
            b.put(Keyspace::Docs, i.to_be_bytes().to_vec(), vec![1]);
            let ticket = tokio::task::spawn_blocking({
                let gc = Arc::clone(&gc);
                move || gc.commit(b)
            })
            .await
            .unwrap()
            .unwrap();
            gc.durable(ticket).await.unwrap();
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let s = gc.storage().snapshot();
    assert_eq!(
        s.range(Keyspace::Docs, Bound::Unbounded, Bound::Unbounded, false)
            .count(),
        64
    );
}

/// The memory engine made to look like a disk for [`GroupCommit`]: durable when `durable`,
/// recording which thread ran each sync, and when `stall` is set, saying its commits may stall
/// and taking that long over each.
struct Probe {
    inner: MemoryStorage,
    durable: bool,
    stall: Option<std::time::Duration>,
    syncs: std::sync::Mutex<Vec<Option<String>>>,
}

impl Probe {
    fn new(durable: bool, stall: Option<std::time::Duration>) -> Self {
        Probe {
            inner: MemoryStorage::new(),
            durable,
            stall,
            syncs: std::sync::Mutex::new(Vec::new()),
        }
    }
}

impl Storage for Probe {
    fn snapshot(&self) -> Box<dyn Snapshot> {
        self.inner.snapshot()
    }
    fn commit(&self, batch: Batch) -> StorageResult<()> {
        if let Some(delay) = self.stall {
            std::thread::sleep(delay);
        }
        self.inner.commit(batch)
    }
    fn sync(&self) -> StorageResult<()> {
        let name = std::thread::current().name().map(str::to_owned);
        self.syncs.lock().unwrap().push(name);
        Ok(())
    }
    fn is_durable(&self) -> bool {
        self.durable
    }
    fn may_stall(&self, _batch: &Batch) -> bool {
        self.stall.is_some()
    }
    fn approximate_size(&self) -> u64 {
        self.inner.approximate_size()
    }
    fn compact(&self, keyspaces: &[Keyspace]) -> StorageResult<u64> {
        self.inner.compact(keyspaces)
    }
    fn ledger(&self) -> &Ledger {
        self.inner.ledger()
    }
    fn entry_count(&self, ks: Keyspace) -> u64 {
        self.inner.entry_count(ks)
    }
    fn keyspace_size(&self, ks: Keyspace) -> u64 {
        self.inner.keyspace_size(ks)
    }
}

#[test]
fn a_lone_writer_leads_its_own_sync_unless_told_not_to() {
    let recorder = Arc::new(Probe::new(true, None));
    let gc = GroupCommit::new(Arc::clone(&recorder) as Arc<dyn Storage>);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let last_sync = |key: u8| {
        let mut b = Batch::new();
        b.put(Keyspace::Docs, vec![key], vec![1]);
        let ticket = gc.commit(b).unwrap();
        runtime.block_on(gc.durable(ticket)).unwrap();
        recorder.syncs.lock().unwrap().last().cloned().flatten()
    };
    // Leading is a try: a writer hands off when the syncer thread's own pass (every 100 ms)
    // holds the sync lock at that moment, so a few writes are allowed for one to lead.
    let leads = |keys: std::ops::Range<u8>| {
        let here = std::thread::current().name().map(str::to_owned);
        keys.into_iter().any(|key| last_sync(key) == here)
    };
    // Leading (the default): the waiting writer's own thread runs the sync.
    std::thread::scope(|scope| {
        std::thread::Builder::new()
            .name("writer".into())
            .spawn_scoped(scope, || assert!(leads(1..20)))
            .unwrap();
    });
    // A writer whose commit a sync already covers does not sync again.
    let syncs = recorder.syncs.lock().unwrap().len();
    runtime.block_on(gc.durable(1)).unwrap();
    assert_eq!(recorder.syncs.lock().unwrap().len(), syncs);
    let syncer = Some("ebb-sync".to_owned());
    // Two clients taking turns: handed off to the syncer thread.
    for client in [1, 2, 1, 2] {
        gc.note_client(client);
    }
    assert_eq!(last_sync(20), syncer);
    // One client alone for LEAD_RUN requests in a row: led again, on this thread.
    for _ in 0..LEAD_RUN {
        gc.note_client(2);
    }
    assert!(leads(21..40));
    // Told not to lead: handed off.
    gc.set_lead(false);
    assert_eq!(last_sync(40), syncer);
    gc.shutdown();
}

/// A commit the engine may stall does not hold up the other tasks of its runtime worker: on a
/// runtime with one worker, a task that only needs a moment finishes while the commit sleeps.
#[test]
fn a_commit_that_may_stall_leaves_its_worker_to_other_tasks() {
    let delay = std::time::Duration::from_millis(400);
    let gc = Arc::new(GroupCommit::new(Arc::new(Probe::new(false, Some(delay)))));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let committing = tokio::spawn({
            let gc = Arc::clone(&gc);
            async move {
                let mut b = Batch::new();
                b.put(Keyspace::Docs, b"k".to_vec(), b"v".to_vec());
                gc.commit(b).unwrap();
                std::time::Instant::now()
            }
        });
        // Let the commit start on the one worker.
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        let other = tokio::spawn(async {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            std::time::Instant::now()
        });
        let other_done = other.await.unwrap();
        let commit_done = committing.await.unwrap();
        assert!(
            other_done < commit_done,
            "the other task waited for the stalled commit"
        );
    });
    gc.shutdown();
}
