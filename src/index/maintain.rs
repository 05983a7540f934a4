//! An index as the write path maintains it: its key pattern and options compiled once per
//! catalog change, and the entries a document gives it.

use bson::RawDocument;
use tracing::warn;

use super::keys::{Keys, document_keys};
use super::{KeyPattern, entry_key};
use crate::catalog::IndexSpec;
use crate::error::{CommandError, CommandResult, ErrorCode};
use crate::query::filter::Filter;

/// An index entry: its key, and its value (see `keys::covering_value`).
pub type Entry = (Vec<u8>, Vec<u8>);

/// An index with entries (every index but the `_ts` TTL policy), compiled.
#[derive(Debug)]
pub struct FieldIndex {
    /// Its position in `Collection::indexes`.
    pub pos: usize,
    /// Its id: the prefix of its entries.
    pub id: u64,
    /// The parsed key pattern.
    pub pattern: KeyPattern,
    /// `sparse: true`.
    pub sparse: bool,
    /// `unique: true`.
    pub unique: bool,
    /// The compiled `partialFilterExpression`.
    pub partial: Option<Filter>,
}

impl FieldIndex {
    /// The compiled form of `spec`, at position `pos`; `None` for an index without entries.
    pub fn new(pos: usize, spec: &IndexSpec) -> Option<Self> {
        if spec.id == 0 {
            return None;
        }
        let pattern = match KeyPattern::parse(&spec.key) {
            Ok(p) => p,
            Err(e) => {
                warn!(index = %spec.name, error = %e.errmsg, "index key pattern does not parse");
                return None;
            }
        };
        let partial = match &spec.partial_filter {
            Some(f) => match Filter::compile(f) {
                Ok(f) => Some(f),
                Err(e) => {
                    warn!(index = %spec.name, error = %e.errmsg, "partial filter does not compile");
                    return None;
                }
            },
            None => None,
        };
        Some(FieldIndex {
            pos,
            id: spec.id,
            pattern,
            sparse: spec.is_sparse(),
            unique: spec.is_unique(),
            partial,
        })
    }

    /// The keys `doc` gives this index: none when a partial filter excludes it.
    pub fn keys(&self, doc: &RawDocument) -> CommandResult<Keys> {
        if let Some(f) = &self.partial
            && !f.try_matches(doc)?
        {
            return Ok(Keys::default());
        }
        document_keys(&self.pattern, doc, self.sparse)
    }

    /// [`FieldIndex::keys`] without the entries' values: enough to find or remove entries.
    pub fn key_strings(&self, doc: &RawDocument) -> CommandResult<Keys> {
        if let Some(f) = &self.partial
            && !f.try_matches(doc)?
        {
            return Ok(Keys::default());
        }
        super::keys::key_strings(&self.pattern, doc, self.sparse)
    }

    /// The entry of key `components` for the document stored under record id `rid`.
    pub fn entry(&self, components: &[u8], rid: u64) -> CommandResult<Vec<u8>> {
        entry_key(self.id, components, rid).ok_or_else(|| {
            CommandError::new(
                ErrorCode::KeyTooLong,
                format!(
                    "index key too large to store: {} bytes, Ebb's limit is {} bytes",
                    16 + components.len(),
                    super::MAX_ENTRY_LEN
                ),
            )
        })
    }

    /// Every entry `doc` (stored under record id `rid`) gives this index, with its value, and
    /// whether its keys are multikey.
    pub fn entries(&self, doc: &RawDocument, rid: u64) -> CommandResult<(Vec<Entry>, bool)> {
        let keys = self.keys(doc)?;
        let entries = keys
            .components
            .iter()
            .zip(keys.values)
            .map(|(c, v)| Ok((self.entry(c, rid)?, v)))
            .collect::<CommandResult<_>>()?;
        Ok((entries, keys.multikey))
    }
}
