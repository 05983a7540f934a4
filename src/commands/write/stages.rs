//! Hooks for the aggregation stages that write (`$out`, `$merge`).
//!
//! They store documents through the same `Writer` as the write commands, so that `_id` rules,
//! size checks, duplicate detection and TTL expiry (`Writer::put`) are the same for every write.

use std::borrow::Cow;

use bson::{RawBsonRef, RawDocument};

use super::storable::{check_storable, with_id_first_fresh};
use super::writer::{Found, Writer};
use super::{dup_key_error, with_dup_info};
use crate::catalog::Collection;
use crate::error::{CommandError, CommandResult};
use crate::storage::{Keyspace, record};

/// A duplicate `_id` as a command error: mongod's message, with `keyPattern` and `keyValue`.
pub(crate) fn duplicate_key(collection: &Collection, id: RawBsonRef<'_>) -> CommandError {
    let (error, dup) = dup_key_error(collection, id);
    with_dup_info(error, dup)
}

/// A pipeline's output document made ready to insert, as `insert` does: checked for storage,
/// `_id` first (generated when missing). The flag says the `_id` was generated.
pub(crate) fn prepare_insert(doc: &RawDocument) -> CommandResult<(Cow<'_, RawDocument>, bool)> {
    check_storable(doc, false)?;
    with_id_first_fresh(doc)
}

impl Writer<'_> {
    /// Inserts a document made by [`prepare_insert`]; a live document with its `_id` is a
    /// `DuplicateKey` error carrying `keyPattern` and `keyValue`.
    pub(crate) fn insert_prepared(
        &mut self,
        doc: &RawDocument,
        fresh_id: bool,
    ) -> CommandResult<()> {
        self.insert_checked(doc, fresh_id)
            .map_err(|(error, dup)| with_dup_info(error, dup))
    }

    /// The live document stored under `id_key`, if any. A key this writer has already written
    /// is committed first, so that the answer includes that write.
    pub(crate) fn live_by_id(&mut self, id_key: &[u8]) -> CommandResult<Option<Found>> {
        if self.pending.contains_key(id_key) {
            self.flush()?;
        }
        let Some(rid) = self.stored_rid(id_key)? else {
            return Ok(None);
        };
        let Some(value) = self.snapshot.get(Keyspace::Docs, &self.key(rid))? else {
            return Ok(None);
        };
        let rec = record::decode(&value)?;
        Ok((rec.expires_ms > self.now_ms).then(|| Found {
            id_key: id_key.to_vec(),
            rid,
            doc: rec.doc.to_owned(),
            expires_ms: rec.expires_ms,
        }))
    }

    /// Replaces the document `found` with `doc` (checked for storage as an update result): a
    /// write like an update's, which resets the modification time and so the TTL.
    pub(crate) fn replace_found(&mut self, found: &Found, doc: &RawDocument) -> CommandResult<()> {
        check_storable(doc, true)?;
        self.put(found, doc, Some((found.expires_ms, Some(&found.doc))))
            .map_err(|(error, dup)| with_dup_info(error, dup))?;
        if found.doc.as_bytes() != doc.as_bytes() {
            self.log_update(&found.doc, doc);
        }
        Ok(())
    }

    /// Commits what this writer holds so far (statements after it see it).
    pub(crate) fn commit_pending(&mut self) -> CommandResult<()> {
        self.flush()
    }

    /// Number of document writes this writer holds uncommitted.
    pub(crate) fn pending_writes(&self) -> usize {
        self.pending.len()
    }
}
