//! The index-scan executor over hand-written entries (what key generation will write).
#![expect(
    clippy::needless_pass_by_value,
    reason = "table helpers take owned cases"
)]

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use bson::{RawBsonRef, RawDocumentBuf, rawdoc};

use super::*;
use crate::catalog::IndexSpec;
use crate::index::{KeyPattern, encode_component, entry_key};
use crate::query::plan::{self, Hint, Query};
use crate::query::sort::SortSpec;
use crate::storage::{Batch, MemoryStorage, Storage};

const COLL: u64 = 3;
const INDEX: u64 = 11;

/// A collection of `docs` with an index on `key` (entries written as key generation would:
/// one per array element, null for a missing field), and `expired` ids already expired.
fn store(
    docs: &[RawDocumentBuf],
    key: &RawDocumentBuf,
    expired: &[i32],
) -> (MemoryStorage, IndexSpec) {
    let storage = MemoryStorage::new();
    let pattern = KeyPattern::parse(key).expect("pattern");
    let mut batch = Batch::new();
    let mut multikey = false;
    for (rid, d) in (1..).zip(docs) {
        let id = d.get("_id").expect("bson").expect("_id");
        let id_key = keystring::to_key(id);
        batch.put(
            Keyspace::Index,
            crate::index::id_entry_key(COLL, &id_key),
            crate::index::rid_value(rid).to_vec(),
        );
        let expiry = match id {
            RawBsonRef::Int32(n) if expired.contains(&n) => 5,
            _ => record::NEVER,
        };
        batch.put(
            Keyspace::Docs,
            record::doc_key(COLL, rid).to_vec(),
            record::encode(0, expiry, d),
        );
        // Single-field keys only here: one entry per value (array elements expanded).
        let (path, dir) = &pattern.fields[0];
        let values: Vec<RawBsonRef<'_>> = match d.get(path).expect("bson") {
            None => vec![RawBsonRef::Null],
            Some(RawBsonRef::Array(a)) => {
                multikey = true;
                a.into_iter().map(|v| v.expect("elem")).collect()
            }
            Some(v) => vec![v],
        };
        for v in values {
            let mut c = Vec::new();
            encode_component(v, *dir, &mut c);
            batch.put(
                Keyspace::Index,
                entry_key(INDEX, &c, rid).expect("fits"),
                Vec::new(),
            );
        }
    }
    storage.commit(batch).expect("commit");
    let mut spec =
        IndexSpec::from_spec(&rawdoc! { "v": 2, "key": key.clone(), "name": "ix" }).expect("spec");
    spec.id = INDEX;
    spec.multikey = Arc::new(AtomicBool::new(multikey));
    (storage, spec)
}

fn ids(docs: &[(RawDocumentBuf, i64)]) -> Vec<i32> {
    docs.iter()
        .map(|(d, _)| d.get_i32("_id").expect("_id"))
        .collect()
}

/// Runs `filter` (and `sort`) through the planner and executor, in batches of `batch`.
fn run(
    storage: &MemoryStorage,
    spec: &IndexSpec,
    filter: RawDocumentBuf,
    sort: Option<RawDocumentBuf>,
    hint: Option<Hint>,
    batch: usize,
) -> (Vec<i32>, ScanStats, bool) {
    let f = Filter::compile(&filter).expect("filter");
    let s = sort.map(|s| SortSpec::compile(&s).expect("sort"));
    let p = plan::plan(
        &Query {
            filter: Some(&f),
            sort: s.as_ref(),
            hint: hint.as_ref(),
        },
        std::slice::from_ref(spec),
    )
    .expect("plan");
    let used_index = matches!(p.access, Access::Index(_));
    let mut source = Source::open(COLL, storage.snapshot(), &p.access, Some(f), 10);
    let mut out = Vec::new();
    loop {
        let b = source.next_entries(batch, usize::MAX).expect("batch");
        if b.is_empty() {
            break;
        }
        out.extend(b);
    }
    (ids(&out), source.stats(), used_index)
}

#[test]
fn index_scans_agree_with_collection_scans() {
    let docs = vec![
        rawdoc! { "_id": 1, "a": 1 },
        rawdoc! { "_id": 2, "a": 5 },
        rawdoc! { "_id": 3, "a": [2, 7, 7] },
        rawdoc! { "_id": 4 },
        rawdoc! { "_id": 5, "a": null },
        rawdoc! { "_id": 6, "a": "x" },
        rawdoc! { "_id": 7, "a": 3.5 },
        rawdoc! { "_id": 8, "a": [] },
        rawdoc! { "_id": 9, "a": { "b": 1 } },
        rawdoc! { "_id": 10, "a": 5 },
    ];
    for key in [rawdoc! { "a": 1 }, rawdoc! { "a": -1 }] {
        let (storage, spec) = store(&docs, &key, &[10]);
        for filter in [
            rawdoc! { "a": 5 },
            rawdoc! { "a": 7 },
            rawdoc! { "a": { "$gt": 2 } },
            rawdoc! { "a": { "$gte": 2, "$lt": 6 } },
            rawdoc! { "a": { "$in": [1, "x", 7] } },
            rawdoc! { "a": null },
            rawdoc! { "a": { "b": 1 } },
            rawdoc! { "a": { "$lt": "z" } },
            rawdoc! { "a": { "$regex": "^x" } },
        ] {
            for batch in [1, 2, 100] {
                let (got, _, used) = run(&storage, &spec, filter.clone(), None, None, batch);
                let (mut want, _, _) = run(
                    &storage,
                    &spec,
                    filter.clone(),
                    None,
                    Some(Hint::Natural(false)),
                    batch,
                );
                assert!(used, "{filter:?} uses the index");
                let mut got_sorted = got.clone();
                got_sorted.sort_unstable();
                want.sort_unstable();
                assert_eq!(got_sorted, want, "{key:?} {filter:?} batch {batch}");
                assert_eq!(got.len(), got_sorted.len());
            }
        }
    }
}

#[test]
fn sorted_by_the_index_reads_only_what_it_returns() {
    let docs: Vec<RawDocumentBuf> = (0..200)
        .map(|i| rawdoc! { "_id": i, "a": (i * 7) % 200 })
        .collect();
    let (storage, spec) = store(&docs, &rawdoc! { "a": 1 }, &[]);
    let f = Filter::compile(&rawdoc! {}).expect("filter");
    let s = SortSpec::compile(&rawdoc! { "a": -1 }).expect("sort");
    let p = plan::plan(
        &Query {
            filter: Some(&f),
            sort: Some(&s),
            hint: None,
        },
        std::slice::from_ref(&spec),
    )
    .expect("plan");
    assert!(p.sorted);
    let mut source = Source::open(COLL, storage.snapshot(), &p.access, Some(f), 10);
    source.set_window(None, 2, Some(5));
    let got = source.drain().expect("drain");
    let a: Vec<i32> = got
        .iter()
        .map(|(d, _)| d.get_i32("a").expect("a"))
        .collect();
    assert_eq!(a, vec![197, 196, 195, 194, 193]);
    assert_eq!(source.stats().keys_examined, 7);
    assert_eq!(source.stats().docs_examined, 7);
}

#[test]
fn selective_queries_examine_few_keys() {
    let docs: Vec<RawDocumentBuf> = (0..1000)
        .map(|i| rawdoc! { "_id": i, "a": i % 100 })
        .collect();
    let (storage, spec) = store(&docs, &rawdoc! { "a": 1 }, &[]);
    let (got, stats, used) = run(&storage, &spec, rawdoc! { "a": 42 }, None, None, 3);
    assert!(used);
    assert_eq!(got.len(), 10);
    assert_eq!(stats.docs_examined, 10);
    assert!(stats.keys_examined <= 11, "{stats:?}");
    let (_, stats, _) = run(
        &storage,
        &spec,
        rawdoc! { "a": 42 },
        None,
        Some(Hint::Natural(false)),
        3,
    );
    assert_eq!(stats.docs_examined, 1000);
}

/// A scan stops with `InterruptedAtShutdown` once its token is cancelled (looked at every
/// [`INTERRUPT_CHECK_EVERY`] entries), and runs to the end while it is not.
#[test]
fn a_cancelled_scan_fails_with_interrupted_at_shutdown() {
    let docs: Vec<RawDocumentBuf> = (0..3_000).map(|i| rawdoc! { "_id": i, "a": i }).collect();
    let (storage, _) = store(&docs, &rawdoc! { "a": 1 }, &[]);
    let token = tokio_util::sync::CancellationToken::new();
    let interrupt = crate::interrupt::Interrupt::new(token.clone(), None);
    let access = Access::Collscan { reverse: false };
    let mut source = Source::open(COLL, storage.snapshot(), &access, None, 10);
    source.set_interrupt(&interrupt);
    assert_eq!(source.drain().expect("not cancelled").len(), 3_000);

    // A deadline that has passed stops it with `MaxTimeMSExpired`.
    let past = std::time::Instant::now()
        .checked_sub(std::time::Duration::from_millis(1))
        .expect("a past instant");
    let mut source = Source::open(COLL, storage.snapshot(), &access, None, 10);
    source.set_interrupt(&crate::interrupt::Interrupt::new(token.clone(), Some(past)));
    let error = source.drain().expect_err("expired");
    assert_eq!(error.code, ErrorCode::MaxTimeMSExpired);

    let mut source = Source::open(COLL, storage.snapshot(), &access, None, 10);
    source.set_interrupt(&interrupt);
    token.cancel();
    let error = source.drain().expect_err("cancelled");
    assert_eq!(error.code, ErrorCode::InterruptedAtShutdown);
    assert_eq!(error.errmsg, "interrupted at shutdown");
}

/// A covered scan makes each document from its entry's stored values; an entry written
/// before Ebb stored them (an empty value) reads its document instead, with the same result.
#[test]
fn covered_scans_read_documents_only_for_entries_without_values() {
    let docs: Vec<RawDocumentBuf> = (0..40)
        .map(|i| match i % 4 {
            0 => rawdoc! { "_id": i, "a": i },
            1 => rawdoc! { "_id": i, "a": f64::from(i) },
            2 => rawdoc! { "_id": i, "a": i64::from(i) },
            _ => rawdoc! { "_id": i },
        })
        .collect();
    let (storage, spec) = store(&docs, &rawdoc! { "a": 1 }, &[]);
    // Entries of even record ids get their values (as key generation now writes them).
    let pattern = KeyPattern::parse(&rawdoc! { "a": 1 }).expect("pattern");
    let mut batch = Batch::new();
    for (rid, d) in (1_u64..).zip(&docs) {
        if rid % 2 == 0 {
            let keys = crate::index::keys::document_keys(&pattern, d, false).expect("keys");
            for (c, v) in keys.components.iter().zip(keys.values) {
                batch.put(Keyspace::Index, entry_key(INDEX, c, rid).expect("fits"), v);
            }
        }
    }
    storage.commit(batch).expect("commit");
    let filter = Filter::compile(&rawdoc! { "a": { "$gte": 0 } }).expect("filter");
    let p = plan::plan(
        &Query {
            filter: Some(&filter),
            sort: None,
            hint: None,
        },
        std::slice::from_ref(&spec),
    )
    .expect("plan");
    let projection = Projection::compile(&rawdoc! { "a": 1, "_id": 0 }).expect("projection");
    let mut source = Source::open(COLL, storage.snapshot(), &p.access, Some(filter), 10);
    source.set_window(Some(projection), 0, None);
    assert!(source.cover(vec![("a".to_owned(), 0)]));
    let mut got = Vec::new();
    loop {
        let b = source.next_entries(7, usize::MAX).expect("batch");
        if b.is_empty() {
            break;
        }
        got.extend(b.into_iter().map(|(d, _)| d));
    }
    let mut want: Vec<RawDocumentBuf> = docs
        .iter()
        .filter_map(|d| d.get("a").ok().flatten().map(|a| (d, a)))
        .map(|(_, a)| {
            let mut out = RawDocumentBuf::new();
            out.append(bson::cstr!("a"), a);
            out
        })
        .collect();
    let key =
        |d: &RawDocumentBuf| format!("{:?}", bson::Document::try_from(d.as_ref()).expect("doc"));
    got.sort_by_key(key);
    want.sort_by_key(key);
    assert_eq!(got, want);
    // Those with `a` under odd record ids (entries without values) are read.
    let old_entries = (1_u64..)
        .zip(&docs)
        .filter(|(rid, d)| rid % 2 == 1 && d.get("a").ok().flatten().is_some())
        .count();
    assert_eq!(old_entries, 20);
    assert_eq!(source.stats().docs_examined, 20);
}

/// Batches cut by their size (a document that does not fit starts the next one) count each
/// key and document once, through an index and through a collection scan alike.
#[test]
fn batches_cut_by_size_count_each_document_once() {
    let docs: Vec<RawDocumentBuf> = (0..1000)
        .map(|i| rawdoc! { "_id": i, "a": i % 100 })
        .collect();
    let (storage, spec) = store(&docs, &rawdoc! { "a": 1 }, &[]);
    for hint in [None, Some(Hint::Natural(false))] {
        let f = Filter::compile(&rawdoc! { "a": { "$lt": 50 } }).expect("filter");
        let p = plan::plan(
            &Query {
                filter: Some(&f),
                sort: None,
                hint: hint.as_ref(),
            },
            std::slice::from_ref(&spec),
        )
        .expect("plan");
        let mut source = Source::open(COLL, storage.snapshot(), &p.access, Some(f), 10);
        let (mut n, mut batches) = (0, 0);
        loop {
            // About 20 of these 24-byte documents a batch: most batches end on one that
            // does not fit.
            let b = source.next_entries(usize::MAX, 500).expect("batch");
            if b.is_empty() {
                break;
            }
            n += b.len();
            batches += 1;
        }
        assert_eq!(n, 500);
        assert!(batches > 20, "{batches}");
        let stats = source.stats();
        if hint.is_none() {
            assert_eq!((stats.keys_examined, stats.docs_examined), (500, 500));
        } else {
            assert_eq!(stats.docs_examined, 1000);
        }
    }
}
