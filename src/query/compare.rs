//! MongoDB's total order over BSON values ("Comparison/Sort Order" in the manual).
//!
//! Values are ordered first by a canonical type rank ([`canonical_type`]), then within a rank:
//!
//! - numbers (int32, int64, double, decimal128) by exact numeric value across types: `1`, `1L` and
//!   `1.0` are equal, int64 against double is exact beyond 2^53, `-0.0 == 0.0`, and NaN equals
//!   NaN and sorts below every other number (also below `-inf`);
//! - strings and symbols by their UTF-8 bytes (the "simple" collation), or with a
//!   [`Collation`] by its locale's rules ([`compare_collated`]; field names stay binary, as in
//!   mongod);
//! - documents element by element: canonical type, then field name, then value; a document that
//!   is a prefix of another is smaller;
//! - arrays element by element (canonical type, then value), shorter prefix first;
//! - binData by length, then subtype, then bytes;
//! - ObjectId by its 12 bytes; booleans `false < true`; dates as signed milliseconds;
//!   timestamps as unsigned 64-bit `(time, increment)`; regexes by pattern, then options;
//!   `DBPointer`s by namespace length, namespace, then id; JavaScript by code, then scope.
//!
//! As in mongod, `undefined` ranks just below `null` (mongod's `canonicalizeBSONType` gives
//! undefined 0 and null 5); the manual's list omits undefined because it is deprecated. Query
//! predicates treat the two as equal where MongoDB does (see `filter`).
//!
//! Known limitation: decimal128 values are compared through their nearest `f64`, so two decimals
//! that differ beyond double precision compare equal, and a decimal equal to a double's
//! approximation compares equal to that double. The same approximation is used by
//! [`keystring`](super::keystring), so the two stay consistent.
//!
//! Documents are assumed to be well-formed BSON (they are validated where they enter the
//! server); a malformed element ends the iteration as if the document ended there.

use std::cmp::Ordering;

use bson::raw::{RawDbPointerRef, RawJavaScriptCodeWithScopeRef};
use bson::spec::BinarySubtype;
use bson::{RawArray, RawBinaryRef, RawBsonRef, RawDocument, RawDocumentBuf, RawRegexRef};

use super::collation::Collation;

/// Canonical type ranks, in MongoDB's order. The numbers are Ebb's own (they appear in
/// [`keystring`](super::keystring) encodings) and are all non-zero, so 0 can end a sequence.
pub mod rank {
    /// `MinKey`, below everything.
    pub const MIN_KEY: u8 = 1;
    /// undefined (deprecated), just below null.
    pub const UNDEFINED: u8 = 2;
    /// null; a missing field sorts as null.
    pub const NULL: u8 = 5;
    /// int32, int64, double and decimal128.
    pub const NUMBER: u8 = 10;
    /// string and symbol.
    pub const STRING: u8 = 15;
    /// embedded document.
    pub const OBJECT: u8 = 20;
    /// array.
    pub const ARRAY: u8 = 25;
    /// binData.
    pub const BINARY: u8 = 30;
    /// ObjectId.
    pub const OBJECT_ID: u8 = 35;
    /// bool.
    pub const BOOLEAN: u8 = 40;
    /// date.
    pub const DATE: u8 = 45;
    /// timestamp.
    pub const TIMESTAMP: u8 = 47;
    /// regex.
    pub const REGEX: u8 = 50;
    /// dbPointer (deprecated).
    pub const DB_POINTER: u8 = 55;
    /// javascript.
    pub const JAVASCRIPT: u8 = 60;
    /// javascriptWithScope (deprecated).
    pub const JAVASCRIPT_WITH_SCOPE: u8 = 65;
    /// `MaxKey`, above everything.
    pub const MAX_KEY: u8 = 127;
}

/// The canonical type rank of a value (see [`rank`]): values of different ranks compare by rank,
/// values of one rank by value.
pub fn canonical_type(v: RawBsonRef<'_>) -> u8 {
    match v {
        RawBsonRef::MinKey => rank::MIN_KEY,
        RawBsonRef::Undefined => rank::UNDEFINED,
        RawBsonRef::Null => rank::NULL,
        RawBsonRef::Int32(_)
        | RawBsonRef::Int64(_)
        | RawBsonRef::Double(_)
        | RawBsonRef::Decimal128(_) => rank::NUMBER,
        RawBsonRef::String(_) | RawBsonRef::Symbol(_) => rank::STRING,
        RawBsonRef::Document(_) => rank::OBJECT,
        RawBsonRef::Array(_) => rank::ARRAY,
        RawBsonRef::Binary(_) => rank::BINARY,
        RawBsonRef::ObjectId(_) => rank::OBJECT_ID,
        RawBsonRef::Boolean(_) => rank::BOOLEAN,
        RawBsonRef::DateTime(_) => rank::DATE,
        RawBsonRef::Timestamp(_) => rank::TIMESTAMP,
        RawBsonRef::RegularExpression(_) => rank::REGEX,
        RawBsonRef::DbPointer(_) => rank::DB_POINTER,
        RawBsonRef::JavaScriptCode(_) => rank::JAVASCRIPT,
        RawBsonRef::JavaScriptCodeWithScope(_) => rank::JAVASCRIPT_WITH_SCOPE,
        RawBsonRef::MaxKey => rank::MAX_KEY,
    }
}

/// Compares two values in MongoDB's order.
pub fn compare(a: RawBsonRef<'_>, b: RawBsonRef<'_>) -> Ordering {
    compare_collated(a, b, None)
}

/// [`compare`], with strings (also inside documents and arrays) compared by `collation` when
/// there is one.
pub fn compare_collated(
    a: RawBsonRef<'_>,
    b: RawBsonRef<'_>,
    collation: Option<&Collation>,
) -> Ordering {
    let (ra, rb) = (canonical_type(a), canonical_type(b));
    if ra != rb {
        return ra.cmp(&rb);
    }
    match (a, b) {
        (RawBsonRef::Int32(x), RawBsonRef::Int32(y)) => x.cmp(&y),
        (RawBsonRef::Int32(x), RawBsonRef::Int64(y)) => i64::from(x).cmp(&y),
        (RawBsonRef::Int64(x), RawBsonRef::Int32(y)) => x.cmp(&i64::from(y)),
        (RawBsonRef::Int64(x), RawBsonRef::Int64(y)) => x.cmp(&y),
        (RawBsonRef::Double(x), RawBsonRef::Double(y)) => compare_f64(x, y),
        _ if ra == rank::NUMBER => NumKey::of(a).cmp(&NumKey::of(b)),
        (RawBsonRef::Document(x), RawBsonRef::Document(y)) => {
            compare_docs_collated(x, y, collation)
        }
        (RawBsonRef::Array(x), RawBsonRef::Array(y)) => compare_arrays_collated(x, y, collation),
        (RawBsonRef::Binary(x), RawBsonRef::Binary(y)) => compare_binary(x, y),
        (RawBsonRef::ObjectId(x), RawBsonRef::ObjectId(y)) => x.bytes().cmp(&y.bytes()),
        (RawBsonRef::Boolean(x), RawBsonRef::Boolean(y)) => x.cmp(&y),
        (RawBsonRef::DateTime(x), RawBsonRef::DateTime(y)) => {
            x.timestamp_millis().cmp(&y.timestamp_millis())
        }
        (RawBsonRef::Timestamp(x), RawBsonRef::Timestamp(y)) => {
            (x.time, x.increment).cmp(&(y.time, y.increment))
        }
        (RawBsonRef::RegularExpression(x), RawBsonRef::RegularExpression(y)) => compare_regex(x, y),
        (RawBsonRef::DbPointer(x), RawBsonRef::DbPointer(y)) => {
            let (xn, xi) = db_pointer_parts(x);
            let (yn, yi) = db_pointer_parts(y);
            (xn.len(), xn, xi).cmp(&(yn.len(), yn, yi))
        }
        (RawBsonRef::JavaScriptCode(x), RawBsonRef::JavaScriptCode(y)) => {
            x.as_bytes().cmp(y.as_bytes())
        }
        (RawBsonRef::JavaScriptCodeWithScope(x), RawBsonRef::JavaScriptCodeWithScope(y)) => {
            compare_code_with_scope(x, y)
        }
        _ => match (string_value(a), string_value(b)) {
            (Some(x), Some(y)) => match collation {
                Some(c) => c.compare(x, y),
                None => x.as_bytes().cmp(y.as_bytes()),
            },
            // MinKey, MaxKey, null, undefined: one value per rank.
            _ => Ordering::Equal,
        },
    }
}

/// Compares two documents element by element: canonical type, field name, value; a prefix is
/// smaller.
pub fn compare_docs(a: &RawDocument, b: &RawDocument) -> Ordering {
    compare_docs_collated(a, b, None)
}

fn compare_docs_collated(
    a: &RawDocument,
    b: &RawDocument,
    collation: Option<&Collation>,
) -> Ordering {
    let mut ia = a.iter();
    let mut ib = b.iter();
    loop {
        match (
            ia.next().and_then(Result::ok),
            ib.next().and_then(Result::ok),
        ) {
            (None, None) => return Ordering::Equal,
            (None, Some(_)) => return Ordering::Less,
            (Some(_), None) => return Ordering::Greater,
            (Some((ka, va)), Some((kb, vb))) => {
                let ord = canonical_type(va)
                    .cmp(&canonical_type(vb))
                    .then_with(|| ka.as_str().as_bytes().cmp(kb.as_str().as_bytes()))
                    .then_with(|| compare_collated(va, vb, collation));
                if ord != Ordering::Equal {
                    return ord;
                }
            }
        }
    }
}

/// Compares two arrays element by element; a prefix is smaller.
pub fn compare_arrays(a: &RawArray, b: &RawArray) -> Ordering {
    compare_arrays_collated(a, b, None)
}

fn compare_arrays_collated(a: &RawArray, b: &RawArray, collation: Option<&Collation>) -> Ordering {
    let mut ia = a.into_iter();
    let mut ib = b.into_iter();
    loop {
        match (
            ia.next().and_then(Result::ok),
            ib.next().and_then(Result::ok),
        ) {
            (None, None) => return Ordering::Equal,
            (None, Some(_)) => return Ordering::Less,
            (Some(_), None) => return Ordering::Greater,
            (Some(va), Some(vb)) => {
                let ord = compare_collated(va, vb, collation);
                if ord != Ordering::Equal {
                    return ord;
                }
            }
        }
    }
}

/// Doubles in MongoDB's order: NaN equals NaN and is below every other number.
fn compare_f64(x: f64, y: f64) -> Ordering {
    match (x.is_nan(), y.is_nan()) {
        (true, true) => Ordering::Equal,
        (true, false) => Ordering::Less,
        (false, true) => Ordering::Greater,
        // Neither is NaN, so this is total; it also makes -0.0 == 0.0.
        (false, false) => x.partial_cmp(&y).unwrap_or(Ordering::Equal),
    }
}

fn string_value(v: RawBsonRef<'_>) -> Option<&str> {
    match v {
        RawBsonRef::String(s) | RawBsonRef::Symbol(s) => Some(s),
        _ => None,
    }
}

/// binData compares by mongod's stored length (which for the old subtype 2 includes its inner
/// length prefix), then subtype, then bytes. With equal lengths and subtypes, the inner prefixes
/// of two subtype-2 values are equal, so comparing the payloads suffices.
fn compare_binary(x: RawBinaryRef<'_>, y: RawBinaryRef<'_>) -> Ordering {
    binary_len(x)
        .cmp(&binary_len(y))
        .then_with(|| u8::from(x.subtype).cmp(&u8::from(y.subtype)))
        .then_with(|| x.bytes.cmp(y.bytes))
}

/// The binData length as stored in BSON.
pub(crate) fn binary_len(b: RawBinaryRef<'_>) -> usize {
    match b.subtype {
        BinarySubtype::BinaryOld => b.bytes.len() + 4,
        _ => b.bytes.len(),
    }
}

fn compare_regex(x: RawRegexRef<'_>, y: RawRegexRef<'_>) -> Ordering {
    x.pattern
        .as_str()
        .as_bytes()
        .cmp(y.pattern.as_str().as_bytes())
        .then_with(|| {
            x.options
                .as_str()
                .as_bytes()
                .cmp(y.options.as_str().as_bytes())
        })
}

fn compare_code_with_scope(
    x: RawJavaScriptCodeWithScopeRef<'_>,
    y: RawJavaScriptCodeWithScopeRef<'_>,
) -> Ordering {
    x.code
        .as_bytes()
        .cmp(y.code.as_bytes())
        .then_with(|| compare_docs(x.scope, y.scope))
}

/// The namespace bytes and id of a `DBPointer`. The `bson` crate keeps both fields private, so
/// they are read back from the value's BSON encoding (a rare, deprecated type).
pub(crate) fn db_pointer_parts(p: RawDbPointerRef<'_>) -> (Vec<u8>, [u8; 12]) {
    let mut doc = RawDocumentBuf::new();
    doc.append(bson::raw::cstr!(""), RawBsonRef::DbPointer(p));
    // Layout: int32 doc length, type byte, empty key (one NUL), int32 string length (with its
    // NUL), the namespace, NUL, 12 id bytes, the document's closing NUL.
    let bytes = doc.as_bytes();
    let len = bytes
        .get(6..10)
        .and_then(|s| <[u8; 4]>::try_from(s).ok())
        .map_or(0, |s| usize::try_from(i32::from_le_bytes(s)).unwrap_or(0));
    let ns_end = 10 + len.saturating_sub(1);
    let ns = bytes.get(10..ns_end).unwrap_or_default().to_vec();
    let id = bytes
        .get(ns_end + 1..ns_end + 13)
        .and_then(|s| <[u8; 12]>::try_from(s).ok())
        .unwrap_or_default();
    (ns, id)
}

/// An exact, order-preserving form of any number: `|v| = mant * 2^(exp - 63)` with the top bit
/// of `mant` set, so every int32, int64 and double has exactly one form and numerically equal
/// values (of any type) have equal forms. Negative values store the bitwise complement of
/// `(exp, mant)` so that larger magnitudes sort first. Variant order is numeric order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum NumKey {
    NaN,
    NegInf,
    Neg(u16, u64),
    Zero,
    Pos(u16, u64),
    PosInf,
}

/// Added to the binary exponent (at least -1074 for subnormal doubles, at most 1023).
const EXP_BIAS: i32 = 1100;

impl NumKey {
    /// The key of a numeric value; non-numbers map to NaN (callers check the rank first).
    pub(crate) fn of(v: RawBsonRef<'_>) -> NumKey {
        match v {
            RawBsonRef::Int32(i) => NumKey::from_i64(i64::from(i)),
            RawBsonRef::Int64(i) => NumKey::from_i64(i),
            RawBsonRef::Double(d) => NumKey::from_f64(d),
            RawBsonRef::Decimal128(d) => NumKey::from_f64(decimal_to_f64(d)),
            _ => NumKey::NaN,
        }
    }

    fn from_i64(v: i64) -> NumKey {
        if v == 0 {
            return NumKey::Zero;
        }
        let mag = v.unsigned_abs();
        let lz = mag.leading_zeros();
        // lz <= 63 because mag != 0.
        NumKey::finite(v < 0, 63 - lz.cast_signed(), mag << lz)
    }

    fn from_f64(x: f64) -> NumKey {
        if x.is_nan() {
            return NumKey::NaN;
        }
        if x.is_infinite() {
            return if x > 0.0 {
                NumKey::PosInf
            } else {
                NumKey::NegInf
            };
        }
        if x == 0.0 {
            return NumKey::Zero;
        }
        let bits = x.to_bits();
        let biased = i32::try_from((bits >> 52) & 0x7ff).unwrap_or(0);
        let frac = bits & ((1 << 52) - 1);
        let (m, e) = if biased == 0 {
            (frac, -1074)
        } else {
            (frac | (1 << 52), biased - 1075)
        };
        let lz = m.leading_zeros();
        NumKey::finite(x < 0.0, e + 63 - lz.cast_signed(), m << lz)
    }

    fn finite(negative: bool, exp: i32, mant: u64) -> NumKey {
        let e = u16::try_from(exp + EXP_BIAS).unwrap_or(0);
        if negative {
            NumKey::Neg(!e, !mant)
        } else {
            NumKey::Pos(e, mant)
        }
    }
}

/// The nearest `f64` to a decimal128 (through its string form, which `f64` parsing rounds
/// correctly). Unparseable forms are treated as NaN.
pub(crate) fn decimal_to_f64(d: bson::Decimal128) -> f64 {
    d.to_string().parse::<f64>().unwrap_or(f64::NAN)
}

/// The value of any numeric as `f64` (int64 beyond 2^53 rounds); `None` for non-numbers.
pub(crate) fn number_as_f64(v: RawBsonRef<'_>) -> Option<f64> {
    match v {
        RawBsonRef::Int32(i) => Some(f64::from(i)),
        #[expect(
            clippy::cast_precision_loss,
            reason = "documented rounding to nearest double"
        )]
        RawBsonRef::Int64(i) => Some(i as f64),
        RawBsonRef::Double(d) => Some(d),
        RawBsonRef::Decimal128(d) => Some(decimal_to_f64(d)),
        _ => None,
    }
}

/// Whether a value is NaN (double or decimal).
pub(crate) fn is_nan(v: RawBsonRef<'_>) -> bool {
    match v {
        RawBsonRef::Double(d) => d.is_nan(),
        RawBsonRef::Decimal128(d) => decimal_to_f64(d).is_nan(),
        _ => false,
    }
}

/// Exact binary equality of two values (same type and same bytes), as mongod uses to detect
/// no-op updates: `1` and `1.0` differ here although [`compare`] finds them equal.
pub(crate) fn binary_equal(a: RawBsonRef<'_>, b: RawBsonRef<'_>) -> bool {
    if a.element_type() != b.element_type() {
        return false;
    }
    match (a, b) {
        (RawBsonRef::Double(x), RawBsonRef::Double(y)) => x.to_bits() == y.to_bits(),
        (RawBsonRef::Document(x), RawBsonRef::Document(y)) => x.as_bytes() == y.as_bytes(),
        (RawBsonRef::Array(x), RawBsonRef::Array(y)) => x.as_bytes() == y.as_bytes(),
        (RawBsonRef::JavaScriptCodeWithScope(x), RawBsonRef::JavaScriptCodeWithScope(y)) => {
            x.code == y.code && x.scope.as_bytes() == y.scope.as_bytes()
        }
        _ => a == b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::query::testutil::regex;
    use bson::oid::ObjectId;
    use bson::{Binary, Decimal128, RawBson, rawbson, rawdoc};
    use std::str::FromStr;

    fn ord(a: &RawBson, b: &RawBson) -> Ordering {
        compare(a.as_raw_bson_ref(), b.as_raw_bson_ref())
    }

    #[test]
    fn numbers_compare_by_value_across_types() {
        use Ordering::{Equal, Greater, Less};
        let two53 = 1_i64 << 53;
        #[expect(clippy::cast_precision_loss, reason = "2^53 is exact")]
        let two53f = two53 as f64;
        let cases: Vec<(RawBson, RawBson, Ordering)> = vec![
            (RawBson::Int32(1), RawBson::Int64(1), Equal),
            (RawBson::Int32(1), RawBson::Double(1.0), Equal),
            (RawBson::Int64(1), RawBson::Double(1.5), Less),
            (RawBson::Double(-0.0), RawBson::Double(0.0), Equal),
            (RawBson::Double(-0.0), RawBson::Int32(0), Equal),
            (RawBson::Double(f64::NAN), RawBson::Double(f64::NAN), Equal),
            (
                RawBson::Double(f64::NAN),
                RawBson::Double(f64::NEG_INFINITY),
                Less,
            ),
            (RawBson::Double(f64::NAN), RawBson::Int64(i64::MIN), Less),
            (
                RawBson::Double(f64::NEG_INFINITY),
                RawBson::Int64(i64::MIN),
                Less,
            ),
            (
                RawBson::Double(f64::INFINITY),
                RawBson::Int64(i64::MAX),
                Greater,
            ),
            // 2^53 + 1 is not a double; the nearest double is 2^53.
            (RawBson::Int64(two53 + 1), RawBson::Double(two53f), Greater),
            (RawBson::Int64(two53 - 1), RawBson::Double(two53f), Less),
            (RawBson::Int64(two53), RawBson::Double(two53f), Equal),
            // i64::MAX rounds up to 2^63 as a double; exact comparison keeps them apart.
            (
                RawBson::Int64(i64::MAX),
                RawBson::Double(2f64.powi(63)),
                Less,
            ),
            (
                RawBson::Int64(i64::MIN),
                RawBson::Double(-(2f64.powi(63))),
                Equal,
            ),
            (RawBson::Int32(-5), RawBson::Int64(3), Less),
            (RawBson::Double(1e-320), RawBson::Int32(0), Greater),
            (
                RawBson::Decimal128(Decimal128::from_str("2.5").unwrap()),
                RawBson::Double(2.5),
                Equal,
            ),
            (
                RawBson::Decimal128(Decimal128::from_str("NaN").unwrap()),
                RawBson::Double(f64::NAN),
                Equal,
            ),
        ];
        for (a, b, want) in cases {
            assert_eq!(ord(&a, &b), want, "{a:?} vs {b:?}");
            assert_eq!(ord(&b, &a), want.reverse(), "{b:?} vs {a:?}");
        }
    }

    #[test]
    fn type_order_follows_the_manual() {
        let ordered: Vec<RawBson> = vec![
            RawBson::MinKey,
            RawBson::Undefined,
            RawBson::Null,
            RawBson::Double(f64::NAN),
            RawBson::Int32(5),
            rawbson!("a"),
            RawBson::Document(rawdoc! {}),
            RawBson::Array(bson::RawArrayBuf::new()),
            RawBson::Binary(Binary {
                subtype: BinarySubtype::Generic,
                bytes: vec![],
            }),
            RawBson::ObjectId(ObjectId::from_bytes([0; 12])),
            RawBson::Boolean(false),
            RawBson::DateTime(bson::DateTime::from_millis(-1)),
            RawBson::Timestamp(bson::Timestamp {
                time: 0,
                increment: 0,
            }),
            regex("a", ""),
            RawBson::JavaScriptCode("x".into()),
            RawBson::MaxKey,
        ];
        for (i, a) in ordered.iter().enumerate() {
            for (j, b) in ordered.iter().enumerate() {
                assert_eq!(ord(a, b), i.cmp(&j), "{a:?} vs {b:?}");
            }
        }
    }

    #[test]
    fn strings_documents_arrays() {
        use Ordering::{Equal, Greater, Less};
        let cases: Vec<(RawBson, RawBson, Ordering)> = vec![
            (rawbson!("a"), rawbson!("b"), Less),
            (rawbson!("a"), rawbson!("ab"), Less),
            (rawbson!("B"), rawbson!("a"), Less),
            (rawbson!("a"), RawBson::Symbol("a".into()), Equal),
            (rawbson!("a\0"), rawbson!("a"), Greater),
            (rawbson!({}), rawbson!({"a": 1}), Less),
            (rawbson!({"a": 1}), rawbson!({"a": 1.0}), Equal),
            (rawbson!({"a": 1}), rawbson!({"b": 0}), Less),
            // Type rank comes before the field name.
            (rawbson!({"b": 1}), rawbson!({"a": "x"}), Less),
            (rawbson!({"a": 1, "b": 1}), rawbson!({"a": 1}), Greater),
            (rawbson!([1, 2]), rawbson!([1, 3]), Less),
            (rawbson!([1, 2]), rawbson!([1]), Greater),
            (rawbson!([]), rawbson!([null]), Less),
            (rawbson!([[1]]), rawbson!([2]), Greater),
        ];
        for (a, b, want) in cases {
            assert_eq!(ord(&a, &b), want, "{a:?} vs {b:?}");
            assert_eq!(ord(&b, &a), want.reverse(), "{b:?} vs {a:?}");
        }
    }

    #[test]
    fn binary_dates_timestamps_regex() {
        use Ordering::{Greater, Less};
        let bin = |subtype: u8, bytes: &[u8]| {
            RawBson::Binary(Binary {
                subtype: BinarySubtype::from(subtype),
                bytes: bytes.to_vec(),
            })
        };
        let ts = |time, increment| RawBson::Timestamp(bson::Timestamp { time, increment });
        let cases: Vec<(RawBson, RawBson, Ordering)> = vec![
            (bin(0, &[9]), bin(0, &[1, 1]), Less),
            (bin(5, &[1]), bin(0, &[2]), Greater),
            (bin(0, &[1, 2]), bin(0, &[1, 3]), Less),
            // Subtype 2 counts its inner length prefix.
            (bin(2, &[]), bin(0, &[1, 2, 3]), Greater),
            (
                RawBson::DateTime(bson::DateTime::from_millis(-5)),
                RawBson::DateTime(bson::DateTime::from_millis(3)),
                Less,
            ),
            (ts(1, u32::MAX), ts(2, 0), Less),
            (ts(u32::MAX, 0), ts(1, 0), Greater),
            (regex("a", "i"), regex("a", "m"), Less),
            (RawBson::Boolean(false), RawBson::Boolean(true), Less),
        ];
        for (a, b, want) in cases {
            assert_eq!(ord(&a, &b), want, "{a:?} vs {b:?}");
            assert_eq!(ord(&b, &a), want.reverse(), "{b:?} vs {a:?}");
        }
    }

    #[test]
    fn collated_strings_inside_documents_and_arrays() {
        use Ordering::{Equal, Greater, Less};
        let en2 = Collation::parse(&rawdoc! {"locale": "en", "strength": 2})
            .unwrap()
            .unwrap();
        let cases: Vec<(RawBson, RawBson, Ordering)> = vec![
            (rawbson!("a"), rawbson!("A"), Equal),
            (rawbson!("a"), RawBson::Symbol("A".into()), Equal),
            (rawbson!("B"), rawbson!("a"), Greater),
            (rawbson!({"k": "X"}), rawbson!({"k": "x"}), Equal),
            // Field names are compared as bytes.
            (rawbson!({"K": "x"}), rawbson!({"k": "x"}), Less),
            (
                rawbson!(["a", {"b": ["C"]}]),
                rawbson!(["A", {"b": ["c"]}]),
                Equal,
            ),
            (rawbson!(["a", "b"]), rawbson!(["A", "C"]), Less),
            // Other types are unaffected.
            (rawbson!(1), rawbson!("a"), Less),
            (regex("A", ""), regex("a", ""), Less),
        ];
        for (a, b, want) in cases {
            let got = compare_collated(a.as_raw_bson_ref(), b.as_raw_bson_ref(), Some(&en2));
            assert_eq!(got, want, "{a:?} vs {b:?}");
        }
    }

    #[test]
    fn db_pointer_parts_read_back() {
        // {"": DBPointer("db.c", 0x01..0x0c)} built by hand: the bson crate cannot build one.
        let mut bytes = vec![0, 0, 0, 0, 0x0c, 0];
        bytes.extend_from_slice(&5_i32.to_le_bytes());
        bytes.extend_from_slice(b"db.c\0");
        bytes.extend(1..=12_u8);
        bytes.push(0);
        let len = i32::try_from(bytes.len()).unwrap();
        bytes[..4].copy_from_slice(&len.to_le_bytes());
        let doc = RawDocument::from_bytes(&bytes).unwrap();
        let Some(RawBsonRef::DbPointer(p)) = doc.get("").unwrap() else {
            panic!("not a DBPointer");
        };
        let (ns, id) = db_pointer_parts(p);
        assert_eq!(ns, b"db.c");
        assert_eq!(id.to_vec(), (1..=12).collect::<Vec<u8>>());
        assert_eq!(
            compare(RawBsonRef::DbPointer(p), RawBsonRef::DbPointer(p)),
            Ordering::Equal
        );
    }
}
