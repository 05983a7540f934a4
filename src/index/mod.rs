//! Indexes: key patterns, the bytes of index entries, and (in submodules) the keys a document
//! produces and their maintenance. See `docs/storage.md` for where entries live.
//!
//! Documents are stored under record ids (`storage::record::doc_key`); index entries lead to
//! them. A secondary index's entry is one key of the `index` keyspace, with an empty value:
//!
//! ```text
//! index id (u64 BE) · component 1 · … · component n · record id (u64 BE)
//! ```
//!
//! Each component is the [`keystring`] of one key field's value; for a descending field every
//! byte is complemented. Key strings are self-delimiting (no encoding is a proper prefix of
//! another), so the complement of one reverses its order against any other, and a
//! concatenation orders component by component. A range scan over an index therefore returns
//! entries in the index's order, ties broken by record id (insertion order), as mongod's are.
//!
//! The `_id` index has one entry per document, under the collection's own id (ids are never
//! shared between collections and indexes): `collection id · keystring(_id)`, whose value is
//! the record id, so that finding a document by `_id` is one point read ([`id_entry_key`]).

pub mod keys;
mod maintain;
pub mod spec;

use bson::{RawBsonRef, RawDocument};

pub use keys::{Keys, document_keys};
pub use maintain::FieldIndex;

use crate::error::{CommandError, CommandResult, ErrorCode};
use crate::query::keystring;

/// The order of one key field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// `1` (any positive number).
    Ascending,
    /// `-1` (any negative number).
    Descending,
}

impl Direction {
    /// `1` or `-1`, as explain shows it.
    pub fn sign(self) -> i32 {
        match self {
            Direction::Ascending => 1,
            Direction::Descending => -1,
        }
    }
}

/// A parsed key pattern: the dotted paths of the key fields, in order, with their directions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyPattern {
    /// `(path, direction)` per key field.
    pub fields: Vec<(String, Direction)>,
}

impl KeyPattern {
    /// Reads a key pattern already validated by `createIndexes` (every value a non-zero
    /// number). A value of any other kind is an error.
    pub fn parse(key: &RawDocument) -> CommandResult<Self> {
        let mut fields = Vec::new();
        for entry in key {
            let (name, value) =
                entry.map_err(|e| CommandError::new(ErrorCode::InvalidBSON, e.to_string()))?;
            let negative = match value {
                RawBsonRef::Int32(n) => n < 0,
                RawBsonRef::Int64(n) => n < 0,
                RawBsonRef::Double(d) => d < 0.0,
                RawBsonRef::Decimal128(d) => d.to_string().starts_with('-'),
                _ => {
                    return Err(CommandError::new(
                        ErrorCode::CannotCreateIndex,
                        format!("unsupported key pattern value for '{}'", name.as_str()),
                    ));
                }
            };
            let direction = if negative {
                Direction::Descending
            } else {
                Direction::Ascending
            };
            fields.push((name.as_str().to_owned(), direction));
        }
        Ok(KeyPattern { fields })
    }
}

/// Appends one key component: the keystring of `value`, complemented when descending.
pub fn encode_component(value: RawBsonRef<'_>, direction: Direction, out: &mut Vec<u8>) {
    let start = out.len();
    keystring::encode(value, out);
    if direction == Direction::Descending
        && let Some(written) = out.get_mut(start..)
    {
        for b in written {
            *b = !*b;
        }
    }
}

/// The key prefix of every entry of index `index_id`.
pub fn index_prefix(index_id: u64) -> [u8; 8] {
    index_id.to_be_bytes()
}

/// The entry of index `index_id` for the encoded key `components` (see [`encode_component`])
/// of the document stored under record id `rid`. `None` when the entry would be longer than
/// the storage engine's key limit (64 KiB).
pub fn entry_key(index_id: u64, components: &[u8], rid: u64) -> Option<Vec<u8>> {
    let total = 16 + components.len();
    if total > MAX_ENTRY_LEN {
        return None;
    }
    let mut key = Vec::with_capacity(total);
    key.extend_from_slice(&index_id.to_be_bytes());
    key.extend_from_slice(components);
    key.extend_from_slice(&rid.to_be_bytes());
    Some(key)
}

/// The longest entry key: fjall's key limit is 65,535 bytes (u16 length).
pub const MAX_ENTRY_LEN: usize = 65_535;

/// A secondary entry key's parts: the index id, the encoded components and the record id.
/// `None` for bytes that are not an entry.
pub fn split_entry(key: &[u8]) -> Option<(u64, &[u8], u64)> {
    let id = u64::from_be_bytes(key.get(..8)?.try_into().ok()?);
    let rid_at = key.len().checked_sub(8)?;
    if rid_at < 8 {
        return None;
    }
    let rid = u64::from_be_bytes(key.get(rid_at..)?.try_into().ok()?);
    Some((id, key.get(8..rid_at)?, rid))
}

/// The `_id` index entry of the document whose `_id` keystring is `id_key`, in collection
/// `collection_id`; its value is the record id ([`rid_value`]).
pub fn id_entry_key(collection_id: u64, id_key: &[u8]) -> Vec<u8> {
    let mut key = Vec::with_capacity(8 + id_key.len());
    key.extend_from_slice(&collection_id.to_be_bytes());
    key.extend_from_slice(id_key);
    key
}

/// The value of an `_id` index entry: the record id.
pub fn rid_value(rid: u64) -> [u8; 8] {
    rid.to_be_bytes()
}

/// The record id an `_id` index entry's value holds.
pub fn rid_of_value(value: &[u8]) -> Option<u64> {
    Some(u64::from_be_bytes(value.try_into().ok()?))
}

/// mongod's `DuplicateKey` error for key `components` of index `spec` (compiled as `index`),
/// held by `doc`: the message, and `keyPattern` and `keyValue`.
pub fn duplicate_key(
    namespace: &str,
    spec: &crate::catalog::IndexSpec,
    index: &FieldIndex,
    doc: &RawDocument,
    components: &[u8],
) -> (CommandError, (bson::RawDocumentBuf, bson::RawDocumentBuf)) {
    let values = keys::key_values(&index.pattern, doc, index.sparse, components);
    let mut value = bson::RawDocumentBuf::new();
    let mut shown = Vec::new();
    for (name, v) in &values {
        shown.push(crate::query::display::element(name, v.as_raw_bson_ref()));
        if let Ok(key) = <&bson::raw::CStr>::try_from(name.as_str()) {
            value.append(key, v.clone());
        }
    }
    let error = CommandError::new(
        ErrorCode::DuplicateKey,
        format!(
            "E11000 duplicate key error collection: {namespace} index: {} dup key: {{ {} }}",
            spec.name,
            shown.join(", ")
        ),
    );
    (error, (spec.key.clone(), value))
}

/// [`duplicate_key`] as a command error carrying `keyPattern` and `keyValue`.
pub fn duplicate_key_error(
    namespace: &str,
    spec: &crate::catalog::IndexSpec,
    index: &FieldIndex,
    doc: &RawDocument,
    components: &[u8],
) -> CommandError {
    let (error, (pattern, value)) = duplicate_key(namespace, spec, index, doc, components);
    error.with_info(bson::rawdoc! { "keyPattern": pattern, "keyValue": value })
}

#[cfg(test)]
mod tests {
    use bson::{Bson, RawBson, rawdoc};

    use super::*;

    fn component(v: Bson, d: Direction) -> Vec<u8> {
        let raw = RawBson::try_from(v).expect("converts");
        let mut out = Vec::new();
        encode_component(raw.as_raw_bson_ref(), d, &mut out);
        out
    }

    #[test]
    fn descending_components_reverse_the_order() {
        let values = [
            Bson::Null,
            Bson::Int32(-3),
            Bson::Int32(2),
            Bson::Double(2.5),
            Bson::String("a".into()),
            Bson::String("ab".into()),
            Bson::String("b".into()),
            Bson::Boolean(false),
        ];
        for (i, a) in values.iter().enumerate() {
            for b in values.iter().skip(i + 1) {
                let (aa, ba) = (
                    component(a.clone(), Direction::Ascending),
                    component(b.clone(), Direction::Ascending),
                );
                let (ad, bd) = (
                    component(a.clone(), Direction::Descending),
                    component(b.clone(), Direction::Descending),
                );
                assert!(aa < ba, "{a} < {b} ascending");
                assert!(ad > bd, "{a} > {b} descending");
            }
        }
    }

    #[test]
    fn compound_keys_order_field_by_field() {
        // {a: 1, b: -1}: ("a", 5) < ("a", 1) < ("ab", 9).
        let key = |a: &str, b: i32| {
            let mut out = component(Bson::String(a.into()), Direction::Ascending);
            out.extend(component(Bson::Int32(b), Direction::Descending));
            entry_key(3, &out, 1).expect("fits")
        };
        assert!(key("a", 5) < key("a", 1));
        assert!(key("a", 1) < key("ab", 9));
    }

    #[test]
    fn entries_split_back_into_their_parts() {
        let mut components = Vec::new();
        encode_component(
            RawBsonRef::String("x"),
            Direction::Descending,
            &mut components,
        );
        let key = entry_key(9, &components, 42).expect("fits");
        assert_eq!(split_entry(&key), Some((9, components.as_slice(), 42)));
        assert!(entry_key(9, &components, 255) < entry_key(9, &components, 256));
        assert_eq!(split_entry(&[1, 2, 3]), None);
    }

    #[test]
    fn key_patterns_parse_directions() {
        let p = KeyPattern::parse(&rawdoc! { "a.b": 1, "c": -1.0, "d": 2_i64 }).expect("parses");
        assert_eq!(
            p.fields,
            vec![
                ("a.b".to_owned(), Direction::Ascending),
                ("c".to_owned(), Direction::Descending),
                ("d".to_owned(), Direction::Ascending),
            ]
        );
    }
}
