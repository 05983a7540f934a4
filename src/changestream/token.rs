//! Resume tokens: `{_data: <hex string>}`, opaque to clients.
//!
//! mongod encodes a token's fields as a `KeyString`. Ebb uses a simpler order-preserving binary
//! encoding of the same fields, in the same order, written as upper-case hex (as mongod's
//! `hexblob::encode`), so that the hex strings of a stream's tokens sort in event order:
//!
//! | bytes | field |
//! | --- | --- |
//! | 1 | format marker `0x82` (the `KeyString` type byte of a Timestamp, so tokens look like mongod's) |
//! | 4 + 4 | `clusterTime`: seconds then increment, big-endian |
//! | 1 | `version` (always 2 for the tokens Ebb makes; 0–2 accepted) |
//! | 1 | `tokenType`: 0 high-water mark, 128 event (mongod's values) |
//! | 8 | `txnOpIndex`, big-endian |
//! | 1 | `fromInvalidate` (0 or 1) |
//! | 1 (+ 16) | `uuid`: 0 for none, 1 then the 16 bytes |
//! | 1 (+ n) | `eventIdentifier`: 0 for none, 1 then the document's BSON bytes |
//! | (1 + 4) | `fragmentNum`: absent, or 1 then the number big-endian |
//!
//! So tokens order by cluster time, then high-water marks before events of the same time, then
//! `txnOpIndex`, then an event before the `invalidate` it causes, then the event's identity
//! (byte order of its BSON, not BSON's comparison order: within one replica set two events share
//! a time and `txnOpIndex` only as an event and its invalidate, or as fragments of one event,
//! which sort by `fragmentNum` after the unsplit event's own token).

use std::cmp::Ordering;

use bson::{RawBsonRef, RawDocument, RawDocumentBuf, Timestamp, Uuid, rawdoc};

use crate::error::{CommandError, ErrorCode};

/// The token version Ebb produces (mongod 7.0's default).
pub const TOKEN_VERSION: u8 = 2;

const FORMAT_MARKER: u8 = 0x82;

/// A token's kind (mongod's `ResumeTokenData::TokenType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum TokenType {
    /// A point in time with no event (`postBatchResumeToken` of an empty batch).
    HighWaterMark,
    /// An event's `_id`.
    Event,
}

impl TokenType {
    fn byte(self) -> u8 {
        match self {
            TokenType::HighWaterMark => 0,
            TokenType::Event => 128,
        }
    }
}

/// The content of a resume token (mongod's `ResumeTokenData`).
#[derive(Debug, Clone, PartialEq)]
pub struct ResumeTokenData {
    /// The oplog entry's `ts`.
    pub cluster_time: Timestamp,
    /// The token format version (0, 1 or 2).
    pub version: u8,
    /// Event or high-water mark.
    pub token_type: TokenType,
    /// The index of the operation within its transaction's (or batch's) `applyOps`; 0 otherwise.
    pub txn_op_index: u64,
    /// The token of an `invalidate` event.
    pub from_invalidate: bool,
    /// The collection's UUID, where the event has one.
    pub uuid: Option<Uuid>,
    /// `{operationType, documentKey}` or `{operationType, operationDescription}` (version 2).
    pub event_identifier: Option<RawDocumentBuf>,
    /// The fragment number of a split event (`$changeStreamSplitLargeEvent`).
    pub fragment_num: Option<u32>,
}

impl ResumeTokenData {
    /// An event token of version 2.
    pub fn event(
        cluster_time: Timestamp,
        txn_op_index: u64,
        uuid: Option<Uuid>,
        event_identifier: RawDocumentBuf,
    ) -> Self {
        ResumeTokenData {
            cluster_time,
            version: TOKEN_VERSION,
            token_type: TokenType::Event,
            txn_op_index,
            from_invalidate: false,
            uuid,
            event_identifier: Some(event_identifier),
            fragment_num: None,
        }
    }

    /// The high-water-mark token of `cluster_time` (sorts before every event of that time).
    pub fn high_water_mark(cluster_time: Timestamp) -> Self {
        ResumeTokenData {
            cluster_time,
            version: TOKEN_VERSION,
            token_type: TokenType::HighWaterMark,
            txn_op_index: 0,
            from_invalidate: false,
            uuid: None,
            event_identifier: None,
            fragment_num: None,
        }
    }

    /// Whether this is a high-water-mark token (mongod's `isHighWaterMarkToken`).
    pub fn is_high_water_mark(&self) -> bool {
        *self == Self::high_water_mark_of_version(self.cluster_time, self.version)
    }

    fn high_water_mark_of_version(cluster_time: Timestamp, version: u8) -> Self {
        ResumeTokenData {
            version,
            ..Self::high_water_mark(cluster_time)
        }
    }

    /// The encoded bytes (see the module documentation).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(64);
        out.push(FORMAT_MARKER);
        out.extend_from_slice(&self.cluster_time.time.to_be_bytes());
        out.extend_from_slice(&self.cluster_time.increment.to_be_bytes());
        out.push(self.version);
        out.push(self.token_type.byte());
        out.extend_from_slice(&self.txn_op_index.to_be_bytes());
        out.push(u8::from(self.from_invalidate));
        match self.uuid {
            Some(uuid) => {
                out.push(1);
                out.extend_from_slice(&uuid.bytes());
            }
            None => out.push(0),
        }
        match &self.event_identifier {
            Some(doc) => {
                out.push(1);
                out.extend_from_slice(doc.as_bytes());
            }
            None => out.push(0),
        }
        if let Some(n) = self.fragment_num {
            out.push(1);
            out.extend_from_slice(&n.to_be_bytes());
        }
        out
    }

    /// The `_data` string: the encoded bytes as upper-case hex.
    pub fn to_hex(&self) -> String {
        const DIGITS: &[u8; 16] = b"0123456789ABCDEF";
        let bytes = self.to_bytes();
        let mut s = String::with_capacity(bytes.len() * 2);
        for b in bytes {
            s.push(char::from(DIGITS[usize::from(b >> 4)]));
            s.push(char::from(DIGITS[usize::from(b & 0xf)]));
        }
        s
    }

    /// The token document a client sees: `{_data: "<hex>"}`.
    pub fn to_document(&self) -> RawDocumentBuf {
        rawdoc! { "_data": self.to_hex() }
    }

    /// Decodes a `_data` string, with mongod's errors for a malformed token.
    pub fn from_hex(hex: &str) -> Result<Self, CommandError> {
        let bytes = decode_hex(hex).ok_or_else(|| {
            CommandError::new(
                ErrorCode::FailedToParse,
                "resume token string was not a valid hex string",
            )
        })?;
        Self::from_bytes(&bytes)
    }

    /// Decodes the encoded bytes.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, CommandError> {
        let mut r = Reader { bytes, pos: 0 };
        if bytes.is_empty() {
            return Err(loc(40649, "invalid empty resume token"));
        }
        if r.u8() != Some(FORMAT_MARKER) {
            return Err(loc(
                ErrorCode::FailedToParse.code(),
                "resume token string was not a valid hex string",
            ));
        }
        let time = r
            .u32()
            .ok_or_else(|| loc(40649, "invalid empty resume token"))?;
        let increment = r
            .u32()
            .ok_or_else(|| loc(40649, "invalid empty resume token"))?;
        let version = r
            .u8()
            .ok_or_else(|| loc(50796, "Resume Token does not contain version"))?;
        if version > 2 {
            return Err(loc(
                50795,
                "Invalid Resume Token: only supports version 0, 1 and 2",
            ));
        }
        let token_type = match r
            .u8()
            .ok_or_else(|| loc(51055, "Resume Token does not contain tokenType"))?
        {
            0 => TokenType::HighWaterMark,
            128 => TokenType::Event,
            n => return Err(loc(51057, format!("Token type {n} not recognized"))),
        };
        let txn_op_index = r
            .u64()
            .ok_or_else(|| loc(50793, "Resume Token does not contain txnOpIndex"))?;
        if i32::try_from(txn_op_index).is_err() {
            return Err(loc(
                50794,
                "Invalid Resume Token: txnOpIndex should be non-negative",
            ));
        }
        let from_invalidate = match r
            .u8()
            .ok_or_else(|| loc(50872, "Resume Token does not contain fromInvalidate"))?
        {
            0 => false,
            1 => true,
            _ => return Err(loc(50870, "Resume Token fromInvalidate is not a boolean.")),
        };
        let uuid = match r.u8() {
            None | Some(0) => None,
            Some(1) => {
                let b = r
                    .take(16)
                    .ok_or_else(|| loc(6_189_500, "Expected UUID or null"))?;
                let mut a = [0u8; 16];
                a.copy_from_slice(b);
                Some(Uuid::from_bytes(a))
            }
            Some(_) => return Err(loc(6_189_500, "Expected UUID or null")),
        };
        let event_identifier = match r.u8() {
            None | Some(0) => None,
            Some(1) => {
                let len_bytes = r.peek(4).ok_or_else(bad_identifier)?;
                let len =
                    i32::from_le_bytes([len_bytes[0], len_bytes[1], len_bytes[2], len_bytes[3]]);
                let len = usize::try_from(len).map_err(|_| bad_identifier())?;
                let doc = r.take(len).ok_or_else(bad_identifier)?;
                let doc = RawDocumentBuf::from_bytes(doc.to_vec()).map_err(|_| bad_identifier())?;
                if doc.iter().any(|e| e.is_err()) {
                    return Err(bad_identifier());
                }
                Some(doc)
            }
            Some(_) => return Err(bad_identifier()),
        };
        if token_type == TokenType::HighWaterMark
            && (txn_op_index > 0 || from_invalidate || uuid.is_some() || event_identifier.is_some())
        {
            return Err(loc(6_189_504, "Invalid high water mark token"));
        }
        if token_type == TokenType::Event && event_identifier.is_none() && version >= 2 {
            return Err(loc(
                6_189_501,
                "Expected an eventIdentifier for an event resume token",
            ));
        }
        let fragment_num = match r.u8() {
            None => None,
            Some(1) if version >= 2 => {
                let n = r.u32().ok_or_else(bad_fragment)?;
                if i32::try_from(n).is_err() {
                    return Err(bad_fragment());
                }
                Some(n)
            }
            Some(_) => return Err(loc(40646, "invalid oversized resume token")),
        };
        if r.pos != bytes.len() {
            return Err(loc(40646, "invalid oversized resume token"));
        }
        Ok(ResumeTokenData {
            cluster_time: Timestamp { time, increment },
            version,
            token_type,
            txn_op_index,
            from_invalidate,
            uuid,
            event_identifier,
            fragment_num,
        })
    }

    /// Reads a token document `{_data: <string>, _typeBits?: <BinData>}` as mongod's
    /// `ResumeToken::parse` then `getData` do.
    pub fn parse(doc: &RawDocument) -> Result<Self, CommandError> {
        let data = doc.get("_data").ok().flatten();
        let Some(RawBsonRef::String(hex)) = data else {
            return Err(loc(
                40647,
                format!(
                    "Bad resume token: _data of missing or of wrong type. Expected string, got {}",
                    document_to_string(doc)
                ),
            ));
        };
        match doc.get("_typeBits").ok().flatten() {
            None => {}
            Some(RawBsonRef::Binary(b)) if b.subtype == bson::spec::BinarySubtype::Generic => {}
            Some(_) => {
                return Err(loc(
                    40648,
                    format!(
                        "Bad resume token: _typeBits of wrong type {}",
                        document_to_string(doc)
                    ),
                ));
            }
        }
        Self::from_hex(hex)
    }

    /// The same token without its fragment number (the token of the whole event).
    #[must_use]
    pub fn without_fragment(&self) -> Self {
        ResumeTokenData {
            fragment_num: None,
            ..self.clone()
        }
    }
}

// Equality compares the fields, each of which the encoding holds byte for byte.
impl Eq for ResumeTokenData {}

impl PartialOrd for ResumeTokenData {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for ResumeTokenData {
    /// The order of the `_data` strings.
    fn cmp(&self, other: &Self) -> Ordering {
        self.to_bytes().cmp(&other.to_bytes())
    }
}

fn bad_identifier() -> CommandError {
    loc(6_189_503, "Resume Token eventIdentifier is not an object")
}

fn bad_fragment() -> CommandError {
    loc(
        7_182_501,
        "Resume token 'fragmentNum' must be a non-negative integer.",
    )
}

fn loc(code: i32, msg: impl Into<String>) -> CommandError {
    CommandError::new(ErrorCode::from_code(code), msg)
}

fn decode_hex(s: &str) -> Option<Vec<u8>> {
    fn nibble(c: u8) -> Option<u8> {
        match c {
            b'0'..=b'9' => Some(c - b'0'),
            b'a'..=b'f' => Some(c - b'a' + 10),
            b'A'..=b'F' => Some(c - b'A' + 10),
            _ => None,
        }
    }
    let b = s.as_bytes();
    if !b.len().is_multiple_of(2) {
        return None;
    }
    b.chunks_exact(2)
        .map(|p| Some((nibble(p[0])? << 4) | nibble(p[1])?))
        .collect()
}

struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let end = self.pos.checked_add(n)?;
        let s = self.bytes.get(self.pos..end)?;
        self.pos = end;
        Some(s)
    }
    fn peek(&self, n: usize) -> Option<&'a [u8]> {
        self.bytes.get(self.pos..self.pos.checked_add(n)?)
    }
    fn u8(&mut self) -> Option<u8> {
        self.take(1).map(|b| b[0])
    }
    fn u32(&mut self) -> Option<u32> {
        let b = self.take(4)?;
        Some(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn u64(&mut self) -> Option<u64> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Some(u64::from_be_bytes(a))
    }
}

/// A document as mongod's `Document::toString` prints it: `{a: 1, b: "x"}`.
pub fn document_to_string(doc: &RawDocument) -> String {
    let mut out = String::from("{");
    let mut first = true;
    for (k, v) in doc.iter().map_while(Result::ok) {
        if !first {
            out.push_str(", ");
        }
        first = false;
        out.push_str(k.as_str());
        out.push_str(": ");
        out.push_str(&value_to_string(v));
    }
    out.push('}');
    out
}

/// A value as mongod's `Value::toString` prints it.
pub fn value_to_string(v: RawBsonRef<'_>) -> String {
    match v {
        RawBsonRef::Document(d) => document_to_string(d),
        RawBsonRef::Timestamp(ts) => format!("Timestamp({}, {})", ts.time, ts.increment),
        RawBsonRef::String(s) => format!("\"{s}\""),
        RawBsonRef::Int64(n) => n.to_string(),
        RawBsonRef::Int32(n) => n.to_string(),
        other => crate::query::display::value(other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ts(time: u32, increment: u32) -> Timestamp {
        Timestamp { time, increment }
    }

    fn ident(op: &str, id: i32) -> RawDocumentBuf {
        rawdoc! { "operationType": op, "documentKey": { "_id": id } }
    }

    #[test]
    fn round_trip() {
        let uuid = Uuid::from_bytes([7; 16]);
        let mut t = ResumeTokenData::event(ts(10, 3), 5, Some(uuid), ident("insert", 1));
        assert_eq!(ResumeTokenData::from_hex(&t.to_hex()).unwrap(), t);
        t.from_invalidate = true;
        assert_eq!(ResumeTokenData::from_hex(&t.to_hex()).unwrap(), t);
        t.fragment_num = Some(3);
        let doc = t.to_document();
        assert_eq!(ResumeTokenData::parse(&doc).unwrap(), t);
        let hwm = ResumeTokenData::high_water_mark(ts(4, 4));
        let back = ResumeTokenData::from_hex(&hwm.to_hex()).unwrap();
        assert!(back.is_high_water_mark());
        assert_eq!(back, hwm);
        // Lower-case hex is accepted too; the token made is upper-case.
        assert_eq!(
            ResumeTokenData::from_hex(&hwm.to_hex().to_lowercase()).unwrap(),
            hwm
        );
        assert!(hwm.to_hex().chars().all(|c| !c.is_ascii_lowercase()));
        assert!(hwm.to_hex().starts_with("82"));
    }

    #[test]
    fn hex_strings_sort_in_event_order() {
        let u = Some(Uuid::from_bytes([1; 16]));
        let tokens = [
            ResumeTokenData::high_water_mark(ts(1, 1)),
            ResumeTokenData::event(ts(1, 1), 0, u, ident("insert", 9)),
            {
                let mut t = ResumeTokenData::event(ts(1, 1), 0, u, ident("insert", 9));
                t.fragment_num = Some(0);
                t
            },
            {
                let mut t = ResumeTokenData::event(ts(1, 1), 0, u, ident("insert", 9));
                t.fragment_num = Some(1);
                t
            },
            {
                let mut t = ResumeTokenData::event(ts(1, 1), 0, u, ident("insert", 9));
                t.from_invalidate = true;
                t
            },
            ResumeTokenData::event(ts(1, 2), 0, u, ident("update", 1)),
            ResumeTokenData::event(ts(1, 2), 1, u, ident("delete", 0)),
            ResumeTokenData::event(ts(1, 2), 300, u, ident("delete", 0)),
            ResumeTokenData::high_water_mark(ts(2, 0)),
            ResumeTokenData::event(ts(2, 0), 0, None, ident("dropDatabase", 0)),
            ResumeTokenData::event(ts(0x100, 0), 0, u, ident("insert", 0)),
        ];
        for pair in tokens.windows(2) {
            assert!(pair[0].to_hex() < pair[1].to_hex(), "{pair:?}");
            assert!(pair[0] < pair[1]);
        }
    }

    fn arb_token() -> impl proptest::strategy::Strategy<Value = ResumeTokenData> {
        use proptest::prelude::*;
        (
            any::<(u32, u32)>(),
            0u64..4,
            any::<bool>(),
            proptest::option::of(any::<[u8; 16]>()),
            proptest::option::of(-3i32..3),
            proptest::option::of(0u32..3),
            any::<bool>(),
        )
            .prop_map(|((time, increment), index, inv, uuid, id, frag, hwm)| {
                if hwm {
                    return ResumeTokenData::high_water_mark(ts(time, increment));
                }
                let mut t = ResumeTokenData::event(
                    ts(time, increment),
                    index,
                    uuid.map(Uuid::from_bytes),
                    ident("insert", id.unwrap_or(0)),
                );
                t.from_invalidate = inv;
                t.fragment_num = frag;
                t
            })
    }

    /// The fields in mongod's comparison order, as a tuple.
    #[expect(clippy::type_complexity, reason = "the fields of a token, in order")]
    fn key(
        t: &ResumeTokenData,
    ) -> (
        u32,
        u32,
        u8,
        u8,
        u64,
        bool,
        Option<[u8; 16]>,
        Vec<u8>,
        Option<u32>,
    ) {
        (
            t.cluster_time.time,
            t.cluster_time.increment,
            t.version,
            t.token_type.byte(),
            t.txn_op_index,
            t.from_invalidate,
            t.uuid.map(Uuid::bytes),
            t.event_identifier
                .as_ref()
                .map(|d| d.as_bytes().to_vec())
                .unwrap_or_default(),
            t.fragment_num,
        )
    }

    proptest::proptest! {
        #[test]
        fn round_trips_and_hex_order_is_field_order(a in arb_token(), b in arb_token()) {
            proptest::prop_assert_eq!(&ResumeTokenData::from_hex(&a.to_hex()).unwrap(), &a);
            proptest::prop_assert_eq!(a.to_hex().cmp(&b.to_hex()), key(&a).cmp(&key(&b)));
            proptest::prop_assert_eq!(a.cmp(&b), key(&a).cmp(&key(&b)));
        }

        #[test]
        fn any_bytes_decode_without_panic(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..80)) {
            let _ = ResumeTokenData::from_bytes(&bytes);
            let mut marked = vec![FORMAT_MARKER];
            marked.extend_from_slice(&bytes);
            let _ = ResumeTokenData::from_bytes(&marked);
        }
    }

    #[test]
    fn malformed_tokens() {
        let err = |doc: RawDocumentBuf| ResumeTokenData::parse(&doc).unwrap_err();
        let e = err(rawdoc! { "x": 1 });
        assert_eq!(e.code.code(), 40647);
        assert_eq!(
            e.errmsg,
            "Bad resume token: _data of missing or of wrong type. Expected string, got {x: 1}"
        );
        assert_eq!(err(rawdoc! { "_data": 1 }).code.code(), 40647);
        let e = err(rawdoc! { "_data": "zz" });
        assert_eq!(e.code, ErrorCode::FailedToParse);
        assert_eq!(e.errmsg, "resume token string was not a valid hex string");
        assert_eq!(
            err(rawdoc! { "_data": "abc" }).code,
            ErrorCode::FailedToParse
        );
        assert_eq!(err(rawdoc! { "_data": "" }).code.code(), 40649);
        assert_eq!(
            err(rawdoc! { "_data": "82", "_typeBits": 1 }).code.code(),
            40648
        );
        // Truncated and extended tokens.
        let good = ResumeTokenData::event(ts(1, 1), 0, None, ident("insert", 1)).to_hex();
        for cut in (2..good.len()).step_by(2) {
            assert!(ResumeTokenData::from_hex(&good[..cut]).is_err(), "{cut}");
        }
        let e = ResumeTokenData::from_hex(&format!("{good}00")).unwrap_err();
        assert_eq!(e.code.code(), 40646);
        // A version mongod does not know.
        let mut bytes = ResumeTokenData::high_water_mark(ts(1, 1)).to_bytes();
        bytes[9] = 3;
        assert_eq!(
            ResumeTokenData::from_bytes(&bytes).unwrap_err().code.code(),
            50795
        );
        bytes[9] = 2;
        bytes[10] = 7;
        let e = ResumeTokenData::from_bytes(&bytes).unwrap_err();
        assert_eq!(e.code.code(), 51057);
        assert_eq!(e.errmsg, "Token type 7 not recognized");
    }
}
