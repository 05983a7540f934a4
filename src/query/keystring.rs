//! An order-preserving byte encoding of BSON values ("key strings").
//!
//! For all values `a` and `b`, `encode(a).cmp(&encode(b)) == compare(a, b)` (byte-wise,
//! lexicographic), so storage can keep documents in a sorted map keyed by `_id` and, later,
//! secondary indexes. Values that compare equal encode to the same bytes: `_id: 1`, `_id: 1L`
//! and `_id: 1.0` are one key, as in MongoDB.
//!
//! Layout: one canonical type byte ([`rank`]) followed by a payload that is self-delimiting, so
//! that concatenations (document elements, array elements, compound keys) still order
//! element by element:
//!
//! | rank | payload |
//! | --- | --- |
//! | `MinKey`, undefined, null, `MaxKey` | none |
//! | number | class byte; finite non-zero numbers add a 2-byte exponent and 8-byte mantissa field, and when that field is odd (decimals only) an 18-byte tail: 2-byte decimal exponent, 16-byte coefficient; all complemented when negative (see `NumKey`) |
//! | string, symbol, javascript | escaped bytes, then `00 00` |
//! | object | per element: type byte, escaped field name + `00 00`, payload; then `00` |
//! | array | per element: type byte, payload; then `00` |
//! | binData | u32 length, subtype, bytes |
//! | ObjectId | 12 bytes |
//! | bool | `00` or `01` |
//! | date | i64 millis with the sign bit flipped, big-endian |
//! | timestamp | u64 big-endian |
//! | regex | escaped pattern + `00 00`, escaped options + `00 00` |
//! | dbPointer | u32 namespace length, namespace, 12 id bytes |
//! | javascriptWithScope | escaped code + `00 00`, then the scope as an object |
//!
//! Escaping writes a NUL byte as `00 FF`, so a string's terminator `00 00` sorts below any
//! continuation and a string sorts before its extensions. Type bytes are never 0, so an object
//! or array's `00` end marker sorts before any further element.
//!
//! Numbers are encoded exactly, decimal128 included: a decimal gets the key of the int or
//! double of equal value when there is one, and otherwise a key of its own in its exact place
//! (the layout of `NumKey`). Keys of int32, int64 and double values are the same bytes as in
//! key format 1; decimal keys changed in format 2 (see `docs/storage.md`).
//!
//! [`compare`]: super::compare::compare

use bson::{RawArray, RawBsonRef, RawDocument};

use super::compare::{NumKey, binary_len, canonical_type, db_pointer_parts, rank};

/// Appends the key string of `v` to `out`.
pub fn encode(v: RawBsonRef<'_>, out: &mut Vec<u8>) {
    out.push(canonical_type(v));
    encode_payload(v, out);
}

/// The key string of `v`.
pub fn to_key(v: RawBsonRef<'_>) -> Vec<u8> {
    let mut out = Vec::new();
    encode(v, &mut out);
    out
}

/// The key string of a document's `_id`, or `None` if it has none.
pub fn encode_id(doc: &RawDocument) -> Option<Vec<u8>> {
    doc.get("_id").ok().flatten().map(to_key)
}

/// The length of the key string at the start of `bytes` (which may continue with more), or
/// `None` if they do not start with a whole key string. With `complemented`, every byte is
/// read inverted (a descending index component, see `index::encode_component`).
pub fn encoded_len(bytes: &[u8], complemented: bool) -> Option<usize> {
    let mut r = Reader {
        bytes,
        at: 0,
        mask: if complemented { 0xFF } else { 0 },
    };
    let t = r.byte()?;
    r.payload(t)?;
    Some(r.at)
}

/// Walks a key string without decoding it, for [`encoded_len`].
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
    mask: u8,
}

impl Reader<'_> {
    fn byte(&mut self) -> Option<u8> {
        let b = self.bytes.get(self.at)? ^ self.mask;
        self.at += 1;
        Some(b)
    }

    fn skip(&mut self, n: usize) -> Option<()> {
        let end = self.at.checked_add(n)?;
        (end <= self.bytes.len()).then(|| self.at = end)
    }

    fn u32(&mut self) -> Option<usize> {
        let mut n = 0u32;
        for _ in 0..4 {
            n = (n << 8) | u32::from(self.byte()?);
        }
        usize::try_from(n).ok()
    }

    /// Escaped bytes up to and including the `00 00` terminator.
    fn escaped(&mut self) -> Option<()> {
        loop {
            if self.byte()? == 0 && self.byte()? == 0 {
                return Some(());
            }
        }
    }

    fn payload(&mut self, t: u8) -> Option<()> {
        match t {
            rank::MIN_KEY | rank::UNDEFINED | rank::NULL | rank::MAX_KEY => Some(()),
            rank::NUMBER => match self.byte()? {
                class @ (NUM_NEG | NUM_POS) => {
                    self.skip(9)?;
                    // The mantissa field's last byte: bit 0 set (clear when negative, which
                    // is complemented) means a decimal's tail follows.
                    let last = self.byte()?;
                    if (last & 1 == 1) == (class == NUM_POS) {
                        self.skip(NUM_TAIL_LEN)
                    } else {
                        Some(())
                    }
                }
                _ => Some(()),
            },
            rank::STRING | rank::JAVASCRIPT => self.escaped(),
            rank::OBJECT => loop {
                let t = self.byte()?;
                if t == 0 {
                    return Some(());
                }
                self.escaped()?;
                self.payload(t)?;
            },
            rank::ARRAY => loop {
                let t = self.byte()?;
                if t == 0 {
                    return Some(());
                }
                self.payload(t)?;
            },
            rank::BINARY => {
                let len = self.u32()?;
                self.skip(len.checked_add(1)?)
            }
            rank::OBJECT_ID => self.skip(12),
            rank::BOOLEAN => self.skip(1),
            rank::DATE | rank::TIMESTAMP => self.skip(8),
            rank::REGEX => {
                self.escaped()?;
                self.escaped()
            }
            rank::DB_POINTER => {
                let len = self.u32()?;
                self.skip(len.checked_add(12)?)
            }
            rank::JAVASCRIPT_WITH_SCOPE => {
                self.escaped()?;
                self.payload(rank::OBJECT)
            }
            _ => None,
        }
    }
}

fn encode_payload(v: RawBsonRef<'_>, out: &mut Vec<u8>) {
    match v {
        RawBsonRef::MinKey | RawBsonRef::MaxKey | RawBsonRef::Null | RawBsonRef::Undefined => {}
        RawBsonRef::Int32(_)
        | RawBsonRef::Int64(_)
        | RawBsonRef::Double(_)
        | RawBsonRef::Decimal128(_) => encode_number(NumKey::of(v), out),
        RawBsonRef::String(s) | RawBsonRef::Symbol(s) | RawBsonRef::JavaScriptCode(s) => {
            encode_bytes(s.as_bytes(), out);
        }
        RawBsonRef::Document(d) => encode_document(d, out),
        RawBsonRef::Array(a) => encode_array(a, out),
        RawBsonRef::Binary(b) => {
            out.extend_from_slice(
                &u32::try_from(binary_len(b))
                    .unwrap_or(u32::MAX)
                    .to_be_bytes(),
            );
            out.push(u8::from(b.subtype));
            out.extend_from_slice(b.bytes);
        }
        RawBsonRef::ObjectId(id) => out.extend_from_slice(&id.bytes()),
        RawBsonRef::Boolean(b) => out.push(u8::from(b)),
        RawBsonRef::DateTime(d) => {
            let flipped = d.timestamp_millis().cast_unsigned() ^ (1 << 63);
            out.extend_from_slice(&flipped.to_be_bytes());
        }
        RawBsonRef::Timestamp(t) => {
            out.extend_from_slice(&t.time.to_be_bytes());
            out.extend_from_slice(&t.increment.to_be_bytes());
        }
        RawBsonRef::RegularExpression(re) => {
            encode_bytes(re.pattern.as_str().as_bytes(), out);
            encode_bytes(re.options.as_str().as_bytes(), out);
        }
        RawBsonRef::DbPointer(p) => {
            let (ns, id) = db_pointer_parts(p);
            out.extend_from_slice(&u32::try_from(ns.len()).unwrap_or(u32::MAX).to_be_bytes());
            out.extend_from_slice(&ns);
            out.extend_from_slice(&id);
        }
        RawBsonRef::JavaScriptCodeWithScope(c) => {
            encode_bytes(c.code.as_bytes(), out);
            encode_document(c.scope, out);
        }
    }
}

/// Number classes, in numeric order.
const NUM_NAN: u8 = 0x01;
const NUM_NEG_INF: u8 = 0x02;
const NUM_NEG: u8 = 0x03;
const NUM_ZERO: u8 = 0x04;
const NUM_POS: u8 = 0x05;
const NUM_POS_INF: u8 = 0x06;
/// Bytes of a decimal's tail after the mantissa field: exponent (u16), coefficient (u128).
const NUM_TAIL_LEN: usize = 18;

fn encode_number(k: NumKey, out: &mut Vec<u8>) {
    match k {
        NumKey::NaN => out.push(NUM_NAN),
        NumKey::NegInf => out.push(NUM_NEG_INF),
        NumKey::Zero => out.push(NUM_ZERO),
        NumKey::PosInf => out.push(NUM_POS_INF),
        NumKey::Neg(e, m, tail) | NumKey::Pos(e, m, tail) => {
            out.push(if matches!(k, NumKey::Neg(..)) {
                NUM_NEG
            } else {
                NUM_POS
            });
            out.extend_from_slice(&e.to_be_bytes());
            out.extend_from_slice(&m.to_be_bytes());
            if let Some((x, c)) = tail {
                out.extend_from_slice(&x.to_be_bytes());
                out.extend_from_slice(&c.to_be_bytes());
            }
        }
    }
}

/// Writes `bytes` with each NUL escaped as `00 FF`, then the terminator `00 00`.
fn encode_bytes(bytes: &[u8], out: &mut Vec<u8>) {
    let mut parts = bytes.split(|&b| b == 0);
    if let Some(first) = parts.next() {
        out.extend_from_slice(first);
    }
    for part in parts {
        out.extend_from_slice(&[0, 0xFF]);
        out.extend_from_slice(part);
    }
    out.extend_from_slice(&[0, 0]);
}

fn encode_document(d: &RawDocument, out: &mut Vec<u8>) {
    for (k, v) in d.iter().map_while(Result::ok) {
        out.push(canonical_type(v));
        encode_bytes(k.as_str().as_bytes(), out);
        encode_payload(v, out);
    }
    out.push(0);
}

fn encode_array(a: &RawArray, out: &mut Vec<u8>) {
    for v in a.into_iter().map_while(Result::ok) {
        encode(v, out);
    }
    out.push(0);
}

// Every rank byte must be non-zero for the end markers above to work.
const _: () = assert!(rank::MIN_KEY > 0);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::query::compare::compare;
    use crate::query::testutil::regex;
    use bson::{RawBson, rawbson, rawdoc};
    use std::cmp::Ordering;

    fn key(v: &RawBson) -> Vec<u8> {
        to_key(v.as_raw_bson_ref())
    }

    fn dec(s: &str) -> RawBson {
        RawBson::Decimal128(s.parse().unwrap())
    }

    #[test]
    fn encoded_len_finds_where_each_key_string_ends() {
        let values = vec![
            RawBson::MinKey,
            RawBson::Undefined,
            RawBson::Null,
            RawBson::Double(f64::NAN),
            RawBson::Int32(0),
            RawBson::Int64(-7),
            RawBson::Double(2.5e300),
            RawBson::Double(f64::INFINITY),
            dec("0.1"),
            dec("-0.1"),
            dec("1E-6176"),
            dec("-1E-6176"),
            dec("-2.5"),
            dec("-1E+6144"),
            rawbson!([dec("0.3"), dec("-0.3")]),
            rawbson!("a\u{0}b"),
            RawBson::Symbol("s".into()),
            rawbson!({"a": 1, "b": {"c": [1, "x", null]}, "": ""}),
            rawbson!([[], {}, "", 3.5]),
            RawBson::Binary(bson::Binary {
                subtype: bson::spec::BinarySubtype::Generic,
                bytes: vec![0, 0, 0xFF],
            }),
            RawBson::ObjectId(bson::oid::ObjectId::from_bytes([7; 12])),
            RawBson::Boolean(true),
            RawBson::DateTime(bson::DateTime::from_millis(-5)),
            RawBson::Timestamp(bson::Timestamp {
                time: 1,
                increment: 2,
            }),
            regex("^a\\0", "i"),
            RawBson::JavaScriptCode("f()".into()),
            RawBson::MaxKey,
        ];
        for v in &values {
            for complemented in [false, true] {
                let mut k = key(v);
                let len = k.len();
                if complemented {
                    for b in &mut k {
                        *b = !*b;
                    }
                }
                k.extend_from_slice(&[0, 1, 0xFF]);
                assert_eq!(encoded_len(&k, complemented), Some(len), "{v:?}");
                assert_eq!(encoded_len(&k[..len - 1], complemented), None, "{v:?} cut");
            }
        }
    }

    #[test]
    fn equal_numbers_share_a_key() {
        let one = key(&RawBson::Int32(1));
        assert_eq!(one, key(&RawBson::Int64(1)));
        assert_eq!(one, key(&RawBson::Double(1.0)));
        assert_eq!(key(&RawBson::Double(0.0)), key(&RawBson::Double(-0.0)));
        assert_eq!(
            key(&RawBson::Double(f64::NAN)),
            key(&RawBson::Double(-f64::NAN))
        );
        assert_eq!(key(&rawbson!({"a": 1})), key(&rawbson!({"a": 1.0})));
        assert_eq!(key(&rawbson!("x")), key(&RawBson::Symbol("x".into())));
        assert_eq!(one, key(&dec("1.000")));
        assert_eq!(key(&dec("0.1")), key(&dec("0.100")));
        assert_eq!(key(&dec("-0")), key(&RawBson::Int32(0)));
        assert_eq!(key(&dec("-2.5")), key(&RawBson::Double(-2.5)));
        assert_eq!(key(&dec("NaN")), key(&RawBson::Double(f64::NAN)));
        assert_eq!(
            key(&dec("-Infinity")),
            key(&RawBson::Double(f64::NEG_INFINITY))
        );
        assert_eq!(
            key(&dec("9223372036854775807")),
            key(&RawBson::Int64(i64::MAX))
        );
        assert_ne!(key(&dec("0.1")), key(&RawBson::Double(0.1)));
        assert_ne!(
            key(&dec("9223372036854775807.5")),
            key(&RawBson::Int64(i64::MAX))
        );
    }

    /// Keys of int32, int64 and double values are persisted (key format 1 and 2 alike): these
    /// bytes must never change.
    #[test]
    fn non_decimal_number_keys_are_format_1() {
        let cases: Vec<(RawBson, Vec<u8>)> = vec![
            (RawBson::Int32(0), vec![0x0A, 0x04]),
            (
                RawBson::Int32(1),
                vec![0x0A, 0x05, 0x04, 0x4C, 0x80, 0, 0, 0, 0, 0, 0, 0],
            ),
            // -2.5: exponent 1 + 1100 and mantissa 0b101 << 61, both complemented.
            (
                RawBson::Double(-2.5),
                vec![
                    0x0A, 0x03, 0xFB, 0xB2, 0x5F, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF,
                ],
            ),
            (
                RawBson::Int64(i64::MAX),
                vec![
                    0x0A, 0x05, 0x04, 0x8A, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFE,
                ],
            ),
            (RawBson::Double(f64::NAN), vec![0x0A, 0x01]),
            (RawBson::Double(f64::NEG_INFINITY), vec![0x0A, 0x02]),
            (RawBson::Double(f64::INFINITY), vec![0x0A, 0x06]),
        ];
        for (v, want) in cases {
            assert_eq!(key(&v), want, "{v:?}");
        }
    }

    #[test]
    fn order_matches_compare() {
        let values: Vec<RawBson> = vec![
            RawBson::MinKey,
            RawBson::Undefined,
            RawBson::Null,
            RawBson::Double(f64::NAN),
            RawBson::Double(f64::NEG_INFINITY),
            dec("-1E+6144"),
            RawBson::Double(f64::MIN),
            dec("-9223372036854775808.5"),
            RawBson::Int64(i64::MIN),
            RawBson::Int32(-1),
            dec("-0.1000000000000000055511151231257828"),
            RawBson::Double(-0.1),
            dec("-0.1"),
            RawBson::Double(-1e-300),
            dec("-1E-6175"),
            dec("-1E-6176"),
            RawBson::Int32(0),
            dec("1E-6176"),
            dec("2E-6176"),
            RawBson::Double(5e-324),
            dec("0.1"),
            RawBson::Double(0.1),
            dec("0.1000000000000000055511151231257828"),
            RawBson::Double(0.5),
            dec("0.5000000000000000000000000000000001"),
            RawBson::Int64(1),
            RawBson::Int64(1 << 53),
            dec("9007199254740992.5"),
            RawBson::Int64((1 << 53) + 1),
            RawBson::Int64(i64::MAX),
            dec("9223372036854775807.5"),
            RawBson::Double(2f64.powi(63)),
            dec("18446744073709551620"),
            dec("18446744073709551620.5"),
            RawBson::Double(f64::MAX),
            dec("1E+6144"),
            RawBson::Double(f64::INFINITY),
            rawbson!(""),
            rawbson!("\0"),
            rawbson!("\0\0"),
            rawbson!("\0a"),
            rawbson!("a"),
            rawbson!("a\0"),
            rawbson!("a\u{1}"),
            rawbson!("ab"),
            rawbson!({}),
            // Type rank comes before the field name.
            RawBson::Document(rawdoc! {"a": RawBson::MinKey}),
            rawbson!({"": 1}),
            rawbson!({"a": 1}),
            rawbson!({"a": 1, "b": 1}),
            rawbson!({"a": 2}),
            rawbson!({"b": 0}),
            rawbson!({"a": "x"}),
            rawbson!([]),
            rawbson!([1]),
            rawbson!([1, 2]),
            rawbson!([2]),
            rawbson!(["a"]),
            RawBson::Boolean(false),
            RawBson::Boolean(true),
            RawBson::DateTime(bson::DateTime::from_millis(i64::MIN)),
            RawBson::DateTime(bson::DateTime::from_millis(-1)),
            RawBson::DateTime(bson::DateTime::from_millis(0)),
            RawBson::Timestamp(bson::Timestamp {
                time: 0,
                increment: 1,
            }),
            RawBson::Timestamp(bson::Timestamp {
                time: 1,
                increment: 0,
            }),
            regex("a", ""),
            regex("a", "i"),
            regex("ab", ""),
            RawBson::JavaScriptCode(String::new()),
            RawBson::MaxKey,
        ];
        for a in &values {
            for b in &values {
                let by_key = key(a).cmp(&key(b));
                let by_compare = compare(a.as_raw_bson_ref(), b.as_raw_bson_ref());
                assert_eq!(by_key, by_compare, "{a:?} vs {b:?}");
            }
        }
        for w in values.windows(2) {
            let [a, b] = w else { unreachable!() };
            assert_eq!(
                compare(a.as_raw_bson_ref(), b.as_raw_bson_ref()),
                Ordering::Less,
                "{a:?} < {b:?}"
            );
        }
    }

    #[test]
    fn encode_id_reads_the_id() {
        let doc = rawdoc! { "x": 1, "_id": 7 };
        assert_eq!(encode_id(&doc), Some(key(&RawBson::Double(7.0))));
        assert_eq!(encode_id(&rawdoc! { "x": 1 }), None);
    }
}
