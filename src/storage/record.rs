//! The value stored for a document: a fixed header (format, last-modified, expiry) followed by
//! the document's raw BSON, exactly as received. See `docs/storage.md`.

use bson::RawDocument;

use super::{StorageError, StorageResult};

/// Format byte of the current header.
const FORMAT: u8 = 1;
/// Header size: format byte, modified ms (i64 LE), expiry ms (i64 LE).
pub const HEADER_LEN: usize = 17;
/// The expiry of a document that never expires.
pub const NEVER: i64 = i64::MAX;

/// A decoded record, borrowing the stored bytes.
#[derive(Debug, Clone, Copy)]
pub struct Record<'a> {
    /// Last modification, ms since the epoch.
    pub modified_ms: i64,
    /// Expiry instant, ms since the epoch ([`NEVER`] when it never expires).
    pub expires_ms: i64,
    /// The document.
    pub doc: &'a RawDocument,
}

/// Builds a record value.
pub fn encode(modified_ms: i64, expires_ms: i64, doc: &RawDocument) -> Vec<u8> {
    let bytes = doc.as_bytes();
    let mut out = Vec::with_capacity(HEADER_LEN + bytes.len());
    out.extend_from_slice(&header(modified_ms, expires_ms));
    out.extend_from_slice(bytes);
    out
}

/// The fixed header of a record.
fn header(modified_ms: i64, expires_ms: i64) -> [u8; HEADER_LEN] {
    let mut h = [0; HEADER_LEN];
    h[0] = FORMAT;
    h[1..9].copy_from_slice(&modified_ms.to_le_bytes());
    h[9..].copy_from_slice(&expires_ms.to_le_bytes());
    h
}

/// Appends a record value to `out` (see [`encode`]): callers writing many records build them
/// in one buffer and split each off, one allocation for all of them.
pub fn encode_into(
    out: &mut bytes::BytesMut,
    modified_ms: i64,
    expires_ms: i64,
    doc: &RawDocument,
) {
    let bytes = doc.as_bytes();
    out.reserve(HEADER_LEN + bytes.len());
    out.extend_from_slice(&header(modified_ms, expires_ms));
    out.extend_from_slice(bytes);
}

/// Reads a record value.
pub fn decode(value: &[u8]) -> StorageResult<Record<'_>> {
    let corrupt = |what: &str| StorageError::Corrupt(format!("document record: {what}"));
    let (head, body) = value
        .split_at_checked(HEADER_LEN)
        .ok_or_else(|| corrupt("too short"))?;
    let [format, rest @ ..] = head else {
        return Err(corrupt("too short"));
    };
    if *format != FORMAT {
        return Err(corrupt("unknown format"));
    }
    let (m, e) = rest.split_at(8);
    let modified_ms = i64::from_le_bytes(m.try_into().map_err(|_| corrupt("header"))?);
    let expires_ms = i64::from_le_bytes(e.try_into().map_err(|_| corrupt("header"))?);
    let doc = RawDocument::from_bytes(body).map_err(|e| corrupt(&e.to_string()))?;
    Ok(Record {
        modified_ms,
        expires_ms,
        doc,
    })
}

/// The expiry instant in a record's header, without decoding the document; none if the value
/// is not a record.
pub fn header_expiry(value: &[u8]) -> Option<i64> {
    if value.first() != Some(&FORMAT) {
        return None;
    }
    let bytes = <[u8; 8]>::try_from(value.get(9..HEADER_LEN)?).ok()?;
    Some(i64::from_le_bytes(bytes))
}

/// An expiry instant as an order-preserving 8-byte key part.
pub fn instant_key(ms: i64) -> [u8; 8] {
    (ms.cast_unsigned() ^ (1 << 63)).to_be_bytes()
}

/// The instant of an `expiry` keyspace key (the inverse of [`instant_key`]).
pub fn instant_of(expiry_key: &[u8]) -> Option<i64> {
    let bytes = <[u8; 8]>::try_from(expiry_key.get(8..16)?).ok()?;
    Some((u64::from_be_bytes(bytes) ^ (1 << 63)).cast_signed())
}

/// The `expiry` keyspace key of a document: collection id, instant, record id.
pub fn expiry_key(collection_id: u64, expires_ms: i64, rid: u64) -> [u8; 24] {
    let mut key = [0; 24];
    key[..8].copy_from_slice(&collection_id.to_be_bytes());
    key[8..16].copy_from_slice(&instant_key(expires_ms));
    key[16..].copy_from_slice(&rid.to_be_bytes());
    key
}

/// The record id at the end of an `expiry` keyspace key.
pub fn rid_of_expiry_key(key: &[u8]) -> Option<u64> {
    Some(u64::from_be_bytes(key.get(16..24)?.try_into().ok()?))
}

/// The key prefix of a collection's documents.
pub fn collection_prefix(collection_id: u64) -> [u8; 8] {
    collection_id.to_be_bytes()
}

/// The key of a document: collection id, then its record id. Record ids are given in insertion
/// order, so a scan of a collection's keys returns its documents in insertion order (mongod's
/// natural order).
pub fn doc_key(collection_id: u64, rid: u64) -> [u8; 16] {
    let mut key = [0; 16];
    key[..8].copy_from_slice(&collection_id.to_be_bytes());
    key[8..].copy_from_slice(&rid.to_be_bytes());
    key
}

/// The record id of a `docs` keyspace key.
pub fn rid_of_doc_key(key: &[u8]) -> Option<u64> {
    Some(u64::from_be_bytes(key.get(8..16)?.try_into().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roundtrip_and_corruption() {
        let doc = bson::rawdoc! { "_id": 1, "a": "x" };
        let value = encode(5, NEVER, &doc);
        let r = decode(&value).unwrap();
        assert_eq!((r.modified_ms, r.expires_ms), (5, NEVER));
        assert_eq!(r.doc.as_bytes(), doc.as_bytes());
        assert!(decode(&value[..10]).is_err());
        assert_eq!(header_expiry(&encode(5, 77, &doc)), Some(77));
        assert_eq!(header_expiry(&value[..10]), None);
        let key = expiry_key(3, -5, 9);
        assert_eq!(instant_of(&key), Some(-5));
        assert_eq!(rid_of_expiry_key(&key), Some(9));
        assert!(expiry_key(3, -5, 9) < expiry_key(3, 4, 1));
        assert_eq!(rid_of_doc_key(&doc_key(3, 7)), Some(7));
        assert!(doc_key(3, 255) < doc_key(3, 256));
        let mut bad = value.clone();
        bad[0] = 9;
        assert!(decode(&bad).is_err());
    }
}
