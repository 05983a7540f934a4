//! Property tests: `compare` is a total order, key strings sort exactly as `compare` does, and
//! equality filters agree with `compare`.

use std::cmp::Ordering;
use std::str::FromStr;

use bson::oid::ObjectId;
use bson::spec::BinarySubtype;
use bson::{Binary, Decimal128, RawArrayBuf, RawBson, RawDocumentBuf};
use proptest::prelude::*;

use super::compare::compare;
use super::filter::Filter;
use super::keystring::to_key;
use super::testutil::regex;

/// Numbers around the edges where cross-type comparison is hard.
fn arbitrary_number() -> impl Strategy<Value = RawBson> {
    let two53 = 1_i64 << 53;
    let edge_ints = prop::sample::select(vec![
        0,
        1,
        -1,
        i64::MIN,
        i64::MIN + 1,
        i64::MAX,
        i64::MAX - 1,
        two53 - 1,
        two53,
        two53 + 1,
        -two53 - 1,
        -two53,
        i64::from(i32::MAX),
        i64::from(i32::MIN),
        i64::from(i32::MAX) + 1,
    ]);
    let int = prop_oneof![edge_ints, any::<i64>(), -5_i64..5];
    let edge_doubles = prop::sample::select(vec![
        0.0,
        -0.0,
        f64::NAN,
        -f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::MAX,
        f64::MIN,
        f64::MIN_POSITIVE,
        5e-324,
        -5e-324,
        0.5,
        -1.5,
        9_007_199_254_740_992.0,
        9_007_199_254_740_994.0,
        9_223_372_036_854_775_808.0,
        -9_223_372_036_854_775_808.0,
    ]);
    let decimals = prop::sample::select(vec![
        "0",
        "-0",
        "1",
        "1.0",
        "2.5",
        "-7",
        "NaN",
        "Infinity",
        "-Infinity",
        "1E+3",
        "0.1",
        "9223372036854775807",
    ]);
    prop_oneof![
        int.clone()
            .prop_map(|i| i32::try_from(i).map_or(RawBson::Int64(i), RawBson::Int32)),
        int.clone().prop_map(RawBson::Int64),
        #[expect(clippy::cast_precision_loss, reason = "nearby doubles are the point")]
        int.prop_map(|i| RawBson::Double(i as f64)),
        edge_doubles.prop_map(RawBson::Double),
        any::<f64>().prop_map(RawBson::Double),
        decimals.prop_map(|s| RawBson::Decimal128(Decimal128::from_str(s).unwrap())),
    ]
}

fn arbitrary_leaf() -> impl Strategy<Value = RawBson> {
    let strings = prop::sample::select(vec!["", "a", "b", "ab", "a\0", "\0", "é", "B"]);
    prop_oneof![
        Just(RawBson::MinKey),
        Just(RawBson::MaxKey),
        Just(RawBson::Null),
        Just(RawBson::Undefined),
        arbitrary_number(),
        arbitrary_number(),
        strings.clone().prop_map(|s| RawBson::String(s.to_owned())),
        strings.prop_map(|s| RawBson::Symbol(s.to_owned())),
        any::<bool>().prop_map(RawBson::Boolean),
        prop_oneof![Just(i64::MIN), Just(i64::MAX), -3_i64..3]
            .prop_map(|ms| RawBson::DateTime(bson::DateTime::from_millis(ms))),
        (0_u32..3, prop_oneof![Just(u32::MAX), 0_u32..3]).prop_map(|(time, increment)| {
            RawBson::Timestamp(bson::Timestamp { time, increment })
        }),
        (0_u8..3).prop_map(|b| RawBson::ObjectId(ObjectId::from_bytes([b; 12]))),
        (
            prop::sample::select(vec![0_u8, 2, 5]),
            prop::collection::vec(0_u8..3, 0..3)
        )
            .prop_map(|(subtype, bytes)| RawBson::Binary(Binary {
                subtype: BinarySubtype::from(subtype),
                bytes,
            })),
        (
            prop::sample::select(vec!["a", "ab", ""]),
            prop::sample::select(vec!["", "i", "im"])
        )
            .prop_map(|(p, o)| regex(p, o)),
        prop::sample::select(vec!["", "x"]).prop_map(|c| RawBson::JavaScriptCode(c.to_owned())),
    ]
}

/// Any BSON value, nested up to a few levels.
pub(crate) fn arbitrary_bson() -> impl Strategy<Value = RawBson> {
    arbitrary_leaf().prop_recursive(3, 24, 4, |inner| {
        let keys = prop::sample::select(vec!["", "a", "b", "a\u{1}"]);
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(|items| {
                let mut a = RawArrayBuf::new();
                for item in items {
                    a.push(item);
                }
                RawBson::Array(a)
            }),
            prop::collection::vec((keys, inner), 0..4).prop_map(|fields| {
                let mut d = RawDocumentBuf::new();
                for (k, v) in fields {
                    d.append(bson::raw::CString::try_from(k).unwrap(), v);
                }
                RawBson::Document(d)
            }),
        ]
    })
}

/// A leaf usable as `{x: <value>}` with plain equality semantics: not an array (element-wise),
/// null (also matches missing and undefined), undefined (rejected) or a regex (a pattern match).
fn equality_operand() -> impl Strategy<Value = RawBson> {
    arbitrary_leaf().prop_map(|v| match v {
        RawBson::Undefined | RawBson::Null | RawBson::RegularExpression(_) => RawBson::Int32(0),
        other => other,
    })
}

fn cmp(a: &RawBson, b: &RawBson) -> Ordering {
    compare(a.as_raw_bson_ref(), b.as_raw_bson_ref())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn compare_is_a_total_order(a in arbitrary_bson(), b in arbitrary_bson(), c in arbitrary_bson()) {
        // Reflexive and antisymmetric.
        prop_assert_eq!(cmp(&a, &a), Ordering::Equal);
        prop_assert_eq!(cmp(&a, &b), cmp(&b, &a).reverse());
        // Transitive.
        if cmp(&a, &b) != Ordering::Greater && cmp(&b, &c) != Ordering::Greater {
            prop_assert_ne!(cmp(&a, &c), Ordering::Greater);
        }
        // Equal values are interchangeable.
        if cmp(&a, &b) == Ordering::Equal {
            prop_assert_eq!(cmp(&a, &c), cmp(&b, &c));
        }
    }

    #[test]
    fn numbers_are_totally_ordered(a in arbitrary_number(), b in arbitrary_number(), c in arbitrary_number()) {
        prop_assert_eq!(cmp(&a, &b), cmp(&b, &a).reverse());
        if cmp(&a, &b) != Ordering::Greater && cmp(&b, &c) != Ordering::Greater {
            prop_assert_ne!(cmp(&a, &c), Ordering::Greater);
        }
        prop_assert_eq!(to_key(a.as_raw_bson_ref()).cmp(&to_key(b.as_raw_bson_ref())), cmp(&a, &b));
    }

    #[test]
    fn key_order_is_compare_order(a in arbitrary_bson(), b in arbitrary_bson()) {
        let (ka, kb) = (to_key(a.as_raw_bson_ref()), to_key(b.as_raw_bson_ref()));
        prop_assert_eq!(ka.cmp(&kb), cmp(&a, &b), "{:?} vs {:?}", a, b);
        prop_assert_eq!(ka == kb, cmp(&a, &b) == Ordering::Equal);
    }

    #[test]
    fn equality_filter_agrees_with_compare(a in equality_operand(), b in arbitrary_leaf()) {
        let mut query = RawDocumentBuf::new();
        query.append(bson::raw::cstr!("x"), a.clone());
        let mut doc = RawDocumentBuf::new();
        doc.append(bson::raw::cstr!("x"), b.clone());
        let filter = Filter::compile(&query).unwrap();
        prop_assert_eq!(filter.matches(&doc), cmp(&a, &b) == Ordering::Equal);
    }
}
