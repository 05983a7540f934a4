//! MongoDB's total order over BSON values ("Comparison/Sort Order" in the manual).
//!
//! Values are ordered first by a canonical type rank ([`canonical_type`]), then within a rank:
//!
//! - numbers (int32, int64, double, decimal128) by exact numeric value across types, as mongod's
//!   `compare_numbers.h` does: `1`, `1L`, `1.0` and `NumberDecimal("1.00")` are equal, int64
//!   against double is exact beyond 2^53, the double `0.1` (0.1000000000000000055…) is above
//!   `NumberDecimal("0.1")`, `-0.0 == 0.0`, infinities of both types are equal, and NaN (double
//!   or decimal) equals NaN and sorts below every other number (also below `-inf`);
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
//! Mixed-type numbers compare through [`NumKey`], the exact form that
//! [`keystring`](super::keystring) encodes, so key order and this order are one.
//!
//! Documents are assumed to be well-formed BSON (they are validated where they enter the
//! server); a malformed element ends the iteration as if the document ended there.

use std::cmp::{Ordering, Reverse};

use bson::raw::{RawDbPointerRef, RawJavaScriptCodeWithScopeRef};
use bson::spec::BinarySubtype;
use bson::{RawArray, RawBinaryRef, RawBsonRef, RawDocument, RawDocumentBuf, RawRegexRef};

use num_bigint::BigUint;

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
        (RawBsonRef::Decimal128(x), RawBsonRef::Decimal128(y)) => compare_decimals(x, y),
        _ if ra == rank::NUMBER => compare_mixed_numbers(a, b),
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

/// An exact, order-preserving form of any number, also the payload of its
/// [`keystring`](super::keystring). A finite non-zero value `v` lies in the binade
/// `2^E <= |v| < 2^(E+1)`; its key holds `E` (biased) and a 64-bit mantissa field whose top bit
/// stands for `2^E`:
///
/// - a value with at most `P` significant bits has the field `bits << (64 - P)` and no tail,
///   where `P` is 63 in the binades of 2^53..2^63 (where int64s have more bits than doubles) and
///   53 elsewhere. Every int32, int64 and double is such a value, so numerically equal values of
///   any type have equal keys;
/// - any other value (only decimals are: `0.1` has no finite binary form, `2^64 + 4` has 63
///   bits where P is 53) has the field `(its first P bits) << (64 - P) | 1`, which sorts strictly
///   between the P-bit values just below and just above it, and a tail that orders such values
///   among themselves: the decimal exponent and 34-digit coefficient of its normalised form
///   (`c * 10^x`, `10^33 <= c < 10^34`), unique per value. Decimals below 2^-1099 (below every
///   double; decimal128 reaches 10^-6176) all have exponent 0 and field `1`, ordered by the tail.
///
/// Negative values store the bitwise complement of every field so that larger magnitudes sort
/// first. Variant order is numeric order; the derived order is exact numeric order (a field
/// with bit 0 set is never equal to one without, so tails only meet tails).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum NumKey {
    NaN,
    NegInf,
    Neg(u16, u64, Option<(u16, u128)>),
    Zero,
    Pos(u16, u64, Option<(u16, u128)>),
    PosInf,
}

/// Added to the binary exponent. Doubles reach down to 2^-1074 and up to 2^1023, decimals up
/// to 2^20414 (10^6145); decimals below 2^-1099 take exponent 0 (see [`NumKey`]).
const EXP_BIAS: i32 = 1100;
/// Added to a normalised decimal exponent (`exponent - 33` is at least -6209) in key tails.
const DEC_EXP_BIAS: i32 = 6209;

impl NumKey {
    /// The key of a numeric value; non-numbers map to NaN (callers check the rank first).
    pub(crate) fn of(v: RawBsonRef<'_>) -> NumKey {
        match v {
            RawBsonRef::Int32(i) => NumKey::from_i64(i64::from(i)),
            RawBsonRef::Int64(i) => NumKey::from_i64(i),
            RawBsonRef::Double(d) => NumKey::from_f64(d),
            RawBsonRef::Decimal128(d) => NumKey::from_decimal(Dec::of(d)),
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
        NumKey::finite(v < 0, 63 - lz.cast_signed(), mag << lz, None)
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
        NumKey::finite(x < 0.0, e + 63 - lz.cast_signed(), m << lz, None)
    }

    fn from_decimal(d: Dec) -> NumKey {
        match d {
            Dec::NaN => NumKey::NaN,
            Dec::Inf { neg: false } => NumKey::PosInf,
            Dec::Inf { neg: true } => NumKey::NegInf,
            Dec::Finite { coeff: 0, .. } => NumKey::Zero,
            Dec::Finite { neg, coeff, exp } => {
                let (binade, field) = binary_prefix(coeff, exp);
                let tail = (field & 1 == 1).then(|| {
                    let (x, c) = normalise(coeff, exp);
                    (u16::try_from(x + DEC_EXP_BIAS).unwrap_or(0), c)
                });
                NumKey::finite(neg, binade, field, tail)
            }
        }
    }

    fn finite(negative: bool, exp: i32, mant: u64, tail: Option<(u16, u128)>) -> NumKey {
        let e = u16::try_from(exp + EXP_BIAS).unwrap_or(0);
        if negative {
            NumKey::Neg(!e, !mant, tail.map(|(x, c)| (!x, !c)))
        } else {
            NumKey::Pos(e, mant, tail)
        }
    }
}

/// The lowest binade with a key exponent of its own (see [`NumKey`]).
const MIN_BINADE: i32 = 1 - EXP_BIAS;

/// The binade `E` of `coeff * 10^exp` (`coeff > 0`) and its [`NumKey`] mantissa field: exact
/// when the value has at most `P` significant bits, else its first `P` bits and bit 0 set.
/// Decimals below 2^-1099 give `(MIN_BINADE - 1, 1)`, which their key turns into exponent 0.
fn binary_prefix(coeff: u128, exp: i32) -> (i32, u64) {
    let ten = BigUint::from(10_u8).pow(exp.unsigned_abs());
    let (num, den) = if exp >= 0 {
        (BigUint::from(coeff) * ten, BigUint::from(1_u8))
    } else {
        (BigUint::from(coeff), ten)
    };
    let bits = |n: &BigUint| i64::try_from(n.bits()).unwrap_or(i64::MAX);
    // 2^(a-1) < num/den < 2^(a+1), so E is a or a - 1.
    let a = bits(&num) - bits(&den);
    let shift = |n: &BigUint, s: i64| n << u64::try_from(s).unwrap_or(0);
    let at_least = if a >= 0 {
        num >= shift(&den, a)
    } else {
        shift(&num, -a) >= den
    };
    let binade = if at_least { a } else { a - 1 };
    let Ok(binade) = i32::try_from(binade) else {
        return (MIN_BINADE - 1, 1);
    };
    if binade < MIN_BINADE {
        return (MIN_BINADE - 1, 1);
    }
    let precision: i32 = if (53..=62).contains(&binade) { 63 } else { 53 };
    // floor(v * 2^s) has exactly `precision` bits.
    let s = i64::from(precision - 1 - binade);
    let (num, den) = if s >= 0 {
        (shift(&num, s), den)
    } else {
        (num, shift(&den, -s))
    };
    let top = &num / &den;
    let exact = &top * &den == num;
    let top = u64::try_from(&top).unwrap_or(u64::MAX >> 1);
    let field = top << (64 - precision);
    (binade, if exact { field } else { field | 1 })
}

/// `10^n` for `n <= 34`.
fn pow10(n: u32) -> u128 {
    10_u128.pow(n)
}

/// The normalised form `(x, c)` of `coeff * 10^exp` (`coeff` non-zero): `c * 10^x` with
/// `10^33 <= c < 10^34`. Equal values have equal forms, and for positive values the order of
/// `(x, c)` is numeric order.
fn normalise(coeff: u128, exp: i32) -> (i32, u128) {
    let digits = (1..=34).find(|&d| coeff < pow10(d)).unwrap_or(34);
    let pad = 34 - digits;
    (exp - pad.cast_signed(), coeff * pow10(pad))
}

/// The largest decimal128 coefficient, 10^34 - 1; larger encodings are non-canonical and read
/// as zero (IEEE 754-2008).
const MAX_COEFF: u128 = 9_999_999_999_999_999_999_999_999_999_999_999;

/// A decimal128's value, decoded from its BID encoding (the little-endian bytes of BSON).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dec {
    /// Any NaN, quiet or signalling, of either sign.
    NaN,
    /// An infinity.
    Inf { neg: bool },
    /// `(-1)^neg * coeff * 10^exp`; `coeff` is 0 for every zero.
    Finite { neg: bool, coeff: u128, exp: i32 },
}

impl Dec {
    pub(crate) fn of(d: bson::Decimal128) -> Dec {
        let bits = u128::from_le_bytes(d.bytes());
        let neg = bits >> 127 == 1;
        match (bits >> 122) & 0x1f {
            0x1f => return Dec::NaN,
            0x1e => return Dec::Inf { neg },
            _ => {}
        }
        // The 14-bit exponent follows the sign, unless the two bits after the sign are `11`:
        // then it follows those, and the coefficient (`100` then 111 bits) is over 10^34.
        let (biased, coeff) = if (bits >> 125) & 0b11 == 0b11 {
            ((bits >> 111) & 0x3fff, 0)
        } else {
            ((bits >> 113) & 0x3fff, bits & ((1 << 113) - 1))
        };
        let coeff = if coeff > MAX_COEFF { 0 } else { coeff };
        let exp = i32::try_from(biased).unwrap_or(0) - 6176;
        Dec::Finite { neg, coeff, exp }
    }

    /// A key whose derived order is numeric order, for comparing two decimals without
    /// [`NumKey`]'s binary expansion.
    fn order(self) -> DecOrder {
        match self {
            Dec::NaN => DecOrder::NaN,
            Dec::Inf { neg: true } => DecOrder::NegInf,
            Dec::Inf { neg: false } => DecOrder::PosInf,
            Dec::Finite { coeff: 0, .. } => DecOrder::Zero,
            Dec::Finite {
                neg: true,
                coeff,
                exp,
            } => DecOrder::Neg(Reverse(normalise(coeff, exp))),
            Dec::Finite { coeff, exp, .. } => DecOrder::Pos(normalise(coeff, exp)),
        }
    }
}

#[derive(PartialEq, Eq, PartialOrd, Ord)]
enum DecOrder {
    NaN,
    NegInf,
    Neg(Reverse<(i32, u128)>),
    Zero,
    Pos((i32, u128)),
    PosInf,
}

/// Two numbers of different types (at most one a decimal) by exact value.
fn compare_mixed_numbers(a: RawBsonRef<'_>, b: RawBsonRef<'_>) -> Ordering {
    let with_decimal = |d: bson::Decimal128, other: RawBsonRef<'_>| {
        let (d, other) = (Dec::of(d), NumKey::of(other));
        compare_far_decimal(d, other).unwrap_or_else(|| NumKey::from_decimal(d).cmp(&other))
    };
    match (a, b) {
        (RawBsonRef::Decimal128(d), other) => with_decimal(d, other),
        (other, RawBsonRef::Decimal128(d)) => with_decimal(d, other).reverse(),
        _ => NumKey::of(a).cmp(&NumKey::of(b)),
    }
}

/// A decimal beyond the range of doubles (magnitude at least 10^309, or below 10^-330, under
/// the smallest double 4.9e-324) against the key of an int or double: their signs and classes
/// decide, with no big-integer expansion of the decimal (which for 10^6144 has 20,000 bits).
/// `None` for any other decimal.
fn compare_far_decimal(d: Dec, other: NumKey) -> Option<Ordering> {
    let Dec::Finite { neg, coeff, exp } = d else {
        return None;
    };
    if coeff == 0 {
        return None;
    }
    // 10^(x + 33) <= |d| < 10^(x + 34).
    let (x, _) = normalise(coeff, exp);
    let huge = x + 33 > 308;
    if !huge && x + 33 >= -330 {
        return None;
    }
    let other_below = match (neg, huge) {
        // Above every finite number.
        (false, true) => !matches!(other, NumKey::PosInf),
        // Above NaN and -inf only.
        (true, true) => matches!(other, NumKey::NaN | NumKey::NegInf),
        // Between zero and the smallest positive double.
        (false, false) => !matches!(other, NumKey::Pos(..) | NumKey::PosInf),
        // Between the largest negative double and zero.
        (true, false) => matches!(other, NumKey::NaN | NumKey::NegInf | NumKey::Neg(..)),
    };
    Some(if other_below {
        Ordering::Greater
    } else {
        Ordering::Less
    })
}

/// Two decimals in MongoDB's order: exact value, NaN equal to NaN and below everything.
fn compare_decimals(a: bson::Decimal128, b: bson::Decimal128) -> Ordering {
    Dec::of(a).order().cmp(&Dec::of(b).order())
}

/// The nearest `f64` to a decimal128 (through its string form, which `f64` parsing rounds
/// correctly), for arithmetic and conversions; never for comparisons, which are exact.
/// Unparseable forms are treated as NaN.
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
        RawBsonRef::Decimal128(d) => Dec::of(d) == Dec::NaN,
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

    fn dec(s: &str) -> RawBson {
        RawBson::Decimal128(Decimal128::from_str(s).unwrap())
    }

    #[test]
    fn decimals_compare_exactly_with_every_number() {
        use Ordering::{Equal, Greater, Less};
        let two64 = 2f64.powi(64);
        let cases: Vec<(RawBson, RawBson, Ordering)> = vec![
            // The double 0.1 is 0.1000000000000000055511151231257827021181583404541015625.
            (dec("0.1"), RawBson::Double(0.1), Less),
            (
                dec("0.1000000000000000055511151231257827"),
                RawBson::Double(0.1),
                Less,
            ),
            (
                dec("0.1000000000000000055511151231257828"),
                RawBson::Double(0.1),
                Greater,
            ),
            (dec("-0.1"), RawBson::Double(-0.1), Greater),
            (dec("0.1"), dec("0.10"), Equal),
            (dec("0.1"), dec("1E-1"), Equal),
            (dec("1.00"), RawBson::Int32(1), Equal),
            (
                dec("1.000000000000000000000000000000001"),
                RawBson::Int32(1),
                Greater,
            ),
            (
                dec("0.999999999999999999999999999999999"),
                RawBson::Double(1.0),
                Less,
            ),
            (dec("0.5"), RawBson::Double(0.5), Equal),
            (dec("-2.5"), RawBson::Double(-2.5), Equal),
            (dec("-0"), RawBson::Int32(0), Equal),
            (dec("-0E+30"), RawBson::Double(-0.0), Equal),
            // Around 2^53 and 2^63, where int64s have more bits than doubles.
            (
                dec("9007199254740993"),
                RawBson::Int64((1 << 53) + 1),
                Equal,
            ),
            (
                dec("9007199254740993"),
                RawBson::Double(9_007_199_254_740_992.0),
                Greater,
            ),
            (
                dec("9007199254740992.5"),
                RawBson::Int64((1 << 53) + 1),
                Less,
            ),
            (dec("9007199254740992.5"), RawBson::Int64(1 << 53), Greater),
            (dec("9223372036854775807"), RawBson::Int64(i64::MAX), Equal),
            (
                dec("9223372036854775806.5"),
                RawBson::Int64(i64::MAX - 1),
                Greater,
            ),
            (
                dec("9223372036854775807.5"),
                RawBson::Int64(i64::MAX),
                Greater,
            ),
            (
                dec("9223372036854775807.5"),
                RawBson::Double(2f64.powi(63)),
                Less,
            ),
            (
                dec("9223372036854775808"),
                RawBson::Double(2f64.powi(63)),
                Equal,
            ),
            (dec("-9223372036854775808"), RawBson::Int64(i64::MIN), Equal),
            (dec("-9223372036854775809"), RawBson::Int64(i64::MIN), Less),
            // 2^64 + 4 has 63 significant bits, more than any double there.
            (dec("18446744073709551620"), RawBson::Double(two64), Greater),
            (
                dec("18446744073709551620"),
                dec("18446744073709551620.5"),
                Less,
            ),
            (dec("18446744073709551616"), RawBson::Double(two64), Equal),
            // Beyond the range of doubles.
            (dec("1E-6176"), RawBson::Int32(0), Greater),
            (dec("1E-6176"), RawBson::Double(5e-324), Less),
            (dec("-1E-6176"), RawBson::Double(-0.0), Less),
            (dec("-1E-6176"), RawBson::Double(-5e-324), Greater),
            (dec("1E-6176"), dec("2E-6176"), Less),
            (dec("1E+6144"), RawBson::Double(f64::MAX), Greater),
            (dec("1E+6144"), RawBson::Double(f64::INFINITY), Less),
            (dec("-1E+6144"), RawBson::Double(f64::NEG_INFINITY), Greater),
            (dec("Infinity"), RawBson::Double(f64::INFINITY), Equal),
            (dec("-Infinity"), RawBson::Double(f64::NEG_INFINITY), Equal),
            (dec("-Infinity"), dec("-1E+6144"), Less),
            (dec("NaN"), dec("-NaN"), Equal),
            (dec("NaN"), dec("-Infinity"), Less),
            (dec("NaN"), RawBson::Int64(i64::MIN), Less),
            (dec("-NaN"), RawBson::Double(f64::NAN), Equal),
        ];
        for (a, b, want) in cases {
            assert_eq!(ord(&a, &b), want, "{a:?} vs {b:?}");
            assert_eq!(ord(&b, &a), want.reverse(), "{b:?} vs {a:?}");
        }
    }

    #[test]
    fn decimal_truthiness_is_exact() {
        let truth = |s: &str| crate::query::true_value(dec(s).as_raw_bson_ref());
        assert!(truth("1E-6176"));
        assert!(truth("-1E-6176"));
        assert!(truth("NaN"));
        assert!(truth("-Infinity"));
        assert!(!truth("0"));
        assert!(!truth("-0E+300"));
    }

    #[test]
    fn non_canonical_decimals_are_zero() {
        // `11` after the sign: a coefficient of `100` then 111 bits, over 10^34.
        let big = Decimal128::from_bytes((0b011_u128 << 125).to_le_bytes());
        // A 113-bit coefficient over 10^34 - 1.
        let over = Decimal128::from_bytes((((1_u128 << 113) - 1) | (6176 << 113)).to_le_bytes());
        for d in [big, over] {
            assert!(matches!(Dec::of(d), Dec::Finite { coeff: 0, .. }), "{d:?}");
            assert_eq!(
                ord(&RawBson::Decimal128(d), &RawBson::Int32(0)),
                Ordering::Equal
            );
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
