//! `DISTINCT_SCAN`: the distinct values of an index's first field, reading one document per
//! value and skipping the rest of its keys with one seek.

use std::ops::Bound;

use bson::{RawBson, RawDocument};

use super::{ScanStats, components_admitted, interrupted};
use crate::error::CommandResult;
use crate::index::{index_prefix, split_entry};
use crate::interrupt::Interrupt;
use crate::query::filter::Filter;
use crate::query::keystring;
use crate::query::path::{self, LeafArrays};
use crate::query::plan::IndexScan;
use crate::storage::{Keyspace, Snapshot, prefix_end, record};

/// The values of `parts` (`distinct`'s key, the first field of `ix`, which is not multikey)
/// in the documents of collection `collection_id` that match `filter`, one per distinct key of
/// that field within `ix`'s bounds, in key order: each from the first entry under that key
/// (in index order: by record id for a single-field index, by the other key fields first for a
/// compound one) whose document is live at `now_ms`, matches and has the field. Values that
/// share a key (`1`, `1.0`) compare equal, so one stands for all, as `distinct` answers
/// (which one depends on the plan, as in mongod). Also returns what it read.
///
/// With `ix.covered` (its bounds decide the filter and no document can expire), the value
/// comes from the entry itself and no document is read, but for entries written before
/// entries held values.
///
/// Errors: storage errors, a corrupt record, `interrupt`.
pub fn distinct_values(
    snapshot: &dyn Snapshot,
    collection_id: u64,
    ix: &IndexScan,
    filter: Option<&Filter>,
    parts: &[&str],
    now_ms: i64,
    interrupt: Option<&Interrupt>,
) -> CommandResult<(Vec<RawBson>, ScanStats)> {
    let prefix = index_prefix(ix.index_id);
    let (ranges, checks) = ix.key_ranges(&prefix);
    let first_descending = checks.first().is_some_and(|c| c.descending);
    let mut stats = ScanStats::default();
    let mut out = Vec::new();
    for range in &ranges {
        let upper = range.upper.as_deref();
        let mut lower = range.lower.clone();
        loop {
            let mut skip_to = None;
            let entries = snapshot.range(
                Keyspace::Index,
                Bound::Included(lower.as_slice()),
                upper.map_or(Bound::Unbounded, Bound::Excluded),
                false,
            );
            for entry in entries {
                let (key, value) = entry?;
                stats.keys_examined += 1;
                interrupted(interrupt, stats.keys_examined)?;
                let Some((_, components, rid)) = split_entry(&key) else {
                    continue;
                };
                let Some(first_len) = keystring::encoded_len(components, first_descending) else {
                    continue;
                };
                if components_admitted(&checks, components) != Some(true) {
                    continue;
                }
                // Covered: the entry holds the value (see `index::keys::covering_value`).
                if ix.covered {
                    match first_stored(&value) {
                        Stored::Value(v) => {
                            out.push(v);
                            skip_to = key.get(..8 + first_len).and_then(prefix_end);
                            break;
                        }
                        // The document lacks the field: another under this `null` key may hold
                        // `null`.
                        Stored::Missing => continue,
                        Stored::Unknown => {}
                    }
                }
                let Some(value) =
                    snapshot.get(Keyspace::Docs, &record::doc_key(collection_id, rid))?
                else {
                    continue;
                };
                stats.docs_examined += 1;
                let rec = record::decode(&value)?;
                if rec.expires_ms <= now_ms {
                    continue;
                }
                if let Some(f) = filter
                    && !f.try_matches(rec.doc)?
                {
                    continue;
                }
                let before = out.len();
                out.extend(
                    path::values(rec.doc, parts, LeafArrays::ExpandOmitArray)
                        .into_iter()
                        .flatten()
                        .map(RawBson::from),
                );
                if out.len() == before {
                    // Missing here (a `null` key): another document under it may hold `null`.
                    continue;
                }
                // The rest of this key's entries hold the same value: seek past them.
                skip_to = key.get(..8 + first_len).and_then(prefix_end);
                break;
            }
            match skip_to {
                Some(next) => lower = next,
                None => break,
            }
        }
    }
    Ok((out, stats))
}

/// What an entry holds of its first key field.
enum Stored {
    /// Its value.
    Value(RawBson),
    /// The document lacks the field.
    Missing,
    /// Nothing: an entry written before entries held values (or unreadable).
    Unknown,
}

/// The first key field's value an entry's `value` holds.
fn first_stored(value: &[u8]) -> Stored {
    let first = RawDocument::from_bytes(value)
        .ok()
        .and_then(|d| d.iter().next())
        .and_then(Result::ok);
    match first {
        Some((marker, v)) if marker.as_str().is_empty() => Stored::Value(RawBson::from(v)),
        Some(_) => Stored::Missing,
        None => Stored::Unknown,
    }
}
