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
