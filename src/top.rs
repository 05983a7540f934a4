//! Per-collection operation latencies, as mongod's `Top` keeps them for `$collStats`'s
//! `latencyStats`: for each namespace, the reads, writes and other commands run on it since the
//! server started (or the collection was dropped), their total latency in microseconds, and a
//! histogram of latencies in mongod's buckets (powers of two, with half steps from 2,048 µs to
//! about 1 s; `src/mongo/db/stats/operation_latency_histogram.cpp`).

use std::collections::HashMap;
use std::sync::Mutex;

use bson::{RawArrayBuf, RawDocumentBuf, rawdoc};

/// How many buckets a histogram has.
const BUCKETS: usize = 51;

/// What kind of operation a command is, for its namespace's latencies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpKind {
    /// `find`, `getMore`, `aggregate`, `count`, `distinct`.
    Read,
    /// `insert`, `update`, `delete`, `findAndModify`.
    Write,
    /// Other commands on a collection (index commands, `collMod`, `validate`…).
    Command,
}

#[derive(Debug, Clone)]
struct Histogram {
    buckets: [u64; BUCKETS],
    sum: u64,
    ops: u64,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            buckets: [0; BUCKETS],
            sum: 0,
            ops: 0,
        }
    }
}

/// The bucket a latency (µs) falls in.
fn bucket(micros: u64) -> usize {
    if micros == 0 {
        return 0;
    }
    let log2 = 63 - micros.leading_zeros() as usize;
    let index = if log2 < 11 {
        log2
    } else if log2 < 21 {
        // Half steps: one bucket from 2^n, another from 2^n + 2^(n-1).
        let half = (3_u64 << (log2 - 1)) <= micros;
        2 * log2 - 11 + usize::from(half)
    } else {
        log2 + 10
    };
    index.min(BUCKETS - 1)
}

/// A bucket's lower bound (µs).
fn lower_bound(index: usize) -> u64 {
    match index {
        0 => 0,
        1..=10 => 1 << index,
        11..=30 => {
            let k = index - 11;
            let log2 = 11 + k / 2;
            if k.is_multiple_of(2) {
                1 << log2
            } else {
                3 << (log2 - 1)
            }
        }
        _ => 1 << (index - 10),
    }
}

impl Histogram {
    fn record(&mut self, micros: u64) {
        if let Some(b) = self.buckets.get_mut(bucket(micros)) {
            *b = b.saturating_add(1);
        }
        self.sum = self.sum.saturating_add(micros);
        self.ops = self.ops.saturating_add(1);
    }

    fn to_document(&self, histograms: bool) -> RawDocumentBuf {
        let long = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
        let mut out = RawDocumentBuf::new();
        if histograms {
            let mut list = RawArrayBuf::new();
            for (i, &count) in self.buckets.iter().enumerate() {
                if count > 0 {
                    list.push(rawdoc! { "micros": long(lower_bound(i)), "count": long(count) });
                }
            }
            out.append(bson::cstr!("histogram"), list);
        }
        out.append(bson::cstr!("latency"), long(self.sum));
        out.append(bson::cstr!("ops"), long(self.ops));
        // Ebb has no Queryable Encryption: none of the time is spent in it.
        out.append(bson::cstr!("queryableEncryptionLatencyMicros"), 0_i64);
        out
    }
}

#[derive(Debug, Clone, Default)]
struct Latencies {
    reads: Histogram,
    writes: Histogram,
    commands: Histogram,
    transactions: Histogram,
}

/// Latencies by collection name, in one database.
type Collections = HashMap<String, Latencies>;

/// The latencies of every namespace commands have run on, by database and collection (looked
/// up without building the namespace string).
#[derive(Debug, Default)]
pub struct Top {
    by_db: Mutex<HashMap<String, Collections>>,
}

impl Top {
    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<String, Collections>> {
        self.by_db
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Records one operation of `kind` on `db.coll` that took `micros`.
    pub fn record(&self, db: &str, coll: &str, kind: OpKind, micros: u64) {
        let mut map = self.map();
        let colls = match map.get_mut(db) {
            Some(c) => c,
            None => map.entry(db.to_owned()).or_default(),
        };
        let entry = match colls.get_mut(coll) {
            Some(e) => e,
            None => colls.entry(coll.to_owned()).or_default(),
        };
        match kind {
            OpKind::Read => entry.reads.record(micros),
            OpKind::Write => entry.writes.record(micros),
            OpKind::Command => entry.commands.record(micros),
        }
    }

    /// Forgets `db.coll` (the collection was dropped), as mongod's `Top::collectionDropped`
    /// does.
    pub fn forget(&self, db: &str, coll: &str) {
        if let Some(colls) = self.map().get_mut(db) {
            colls.remove(coll);
        }
    }

    /// `latencyStats` for `db.coll` (zeros for a namespace nothing ran on), with the
    /// histograms when asked.
    pub fn latency_stats(&self, db: &str, coll: &str, histograms: bool) -> RawDocumentBuf {
        let l = self
            .map()
            .get(db)
            .and_then(|c| c.get(coll))
            .cloned()
            .unwrap_or_default();
        rawdoc! {
            "reads": l.reads.to_document(histograms),
            "writes": l.writes.to_document(histograms),
            "commands": l.commands.to_document(histograms),
            "transactions": l.transactions.to_document(histograms),
        }
    }
}

/// The kind of a command on a collection, and the collection's name, for the commands whose
/// latency mongod records per namespace.
pub fn classify<'a>(name: &str, body: &'a bson::RawDocument) -> Option<(OpKind, &'a str)> {
    let kind = match name {
        "find" | "aggregate" | "count" | "distinct" => OpKind::Read,
        "getMore" => {
            return body
                .get_str("collection")
                .ok()
                .map(|coll| (OpKind::Read, coll));
        }
        "insert" | "update" | "delete" | "findAndModify" | "findandmodify" => OpKind::Write,
        "createIndexes" | "listIndexes" | "dropIndexes" | "collMod" | "validate" | "compact" => {
            OpKind::Command
        }
        _ => return None,
    };
    match body.iter().next() {
        Some(Ok((_, bson::RawBsonRef::String(coll)))) => Some((kind, coll)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_follow_mongods_bounds() {
        let bounds = [
            0_u64, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 3072, 4096, 6144, 8192, 12288,
            16384, 24576, 32768, 49152, 65536, 98304, 131_072, 196_608, 262_144, 393_216, 524_288,
            786_432, 1_048_576, 1_572_864, 2_097_152, 4_194_304,
        ];
        for (i, &b) in bounds.iter().enumerate() {
            assert_eq!(lower_bound(i), b, "bound {i}");
            assert_eq!(bucket(b), i, "bucket of {b}");
            if b > 0 {
                assert_eq!(bucket(b - 1), i - 1, "below {b}");
            }
        }
        assert_eq!(bucket(1), 0);
        assert_eq!(lower_bound(50), 1 << 40);
        assert_eq!(bucket(u64::MAX), 50);
    }

    #[test]
    fn records_by_namespace_and_kind() {
        let top = Top::default();
        top.record("d", "c", OpKind::Read, 5);
        top.record("d", "c", OpKind::Read, 3000);
        top.record("d", "c", OpKind::Write, 7);
        let s = top.latency_stats("d", "c", true);
        let reads = s.get_document("reads").unwrap();
        assert_eq!(reads.get_i64("latency").unwrap(), 3005);
        assert_eq!(reads.get_i64("ops").unwrap(), 2);
        let hist: Vec<_> = reads.get_array("histogram").unwrap().into_iter().collect();
        assert_eq!(hist.len(), 2);
        assert_eq!(s.get_document("writes").unwrap().get_i64("ops").unwrap(), 1);
        let none = top.latency_stats("d", "other", false);
        assert!(
            none.get_document("reads")
                .unwrap()
                .get("histogram")
                .unwrap()
                .is_none()
        );
        top.forget("d", "c");
        assert_eq!(
            top.latency_stats("d", "c", false)
                .get_document("reads")
                .unwrap()
                .get_i64("ops")
                .unwrap(),
            0
        );
    }
}
