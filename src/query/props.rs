//! Property tests: `compare` is a total order, key strings sort exactly as `compare` does, sort
//! specs order as `compare` does, and filters (equality, comparisons, `$in`, `$expr`, the
//! positional match index) agree with `compare`.

use std::cmp::Ordering;
use std::str::FromStr;

use bson::oid::ObjectId;
use bson::spec::BinarySubtype;
use bson::{Binary, Decimal128, RawArrayBuf, RawBson, RawDocumentBuf};
use proptest::prelude::*;

use super::compare::compare;
use super::filter::Filter;
use super::keystring::to_key;
use super::sort::SortSpec;
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
    prop_oneof![
        int.clone()
            .prop_map(|i| i32::try_from(i).map_or(RawBson::Int64(i), RawBson::Int32)),
        int.clone().prop_map(RawBson::Int64),
        #[expect(clippy::cast_precision_loss, reason = "nearby doubles are the point")]
        int.prop_map(|i| RawBson::Double(i as f64)),
        edge_doubles.prop_map(RawBson::Double),
        any::<f64>().prop_map(RawBson::Double),
        arbitrary_decimal(),
        arbitrary_decimal(),
    ]
}

/// Decimals at the edges and next to ints and doubles: equal to them, a digit away, or their
/// shortest and 34-digit decimal forms (which are rarely their exact value).
fn arbitrary_decimal() -> impl Strategy<Value = RawBson> {
    let edges = prop::sample::select(vec![
        "0",
        "-0",
        "0E+300",
        "1",
        "1.0",
        "2.5",
        "-7",
        "NaN",
        "-NaN",
        "Infinity",
        "-Infinity",
        "1E+3",
        "0.1",
        "0.10",
        "-0.1",
        "0.1000000000000000055511151231257827",
        "0.1000000000000000055511151231257828",
        "9007199254740991",
        "9007199254740992",
        "9007199254740992.5",
        "9007199254740993",
        "-9007199254740993",
        "9223372036854775806.5",
        "9223372036854775807",
        "9223372036854775807.5",
        "9223372036854775808",
        "-9223372036854775808",
        "-9223372036854775809",
        "18446744073709551616",
        "18446744073709551620",
        "18446744073709551620.5",
        "1E-6176",
        "-1E-6176",
        "2E-6176",
        "4.940656458412465441765687928682213E-324",
        "4.940656458412465441765687928682214E-324",
        "1.797693134862315708145274237317044E+308",
        "1.797693134862315708145274237317043E+308",
        "9.999999999999999999999999999999999E+6144",
        "-9.999999999999999999999999999999999E+6144",
    ]);
    let near_double = (any::<f64>(), 0_usize..4, -2_i32..=2).prop_map(|(d, form, nudge)| {
        let text = match form {
            0 => format!("{d:e}"),
            1 => format!("{d:.33e}"),
            2 => format!("{d:.20e}"),
            _ => format!("{d:.16e}"),
        };
        nudged(&text, nudge)
    });
    let near_int = (
        any::<i64>(),
        prop::sample::select(vec!["", ".0", ".5", ".0000000001"]),
    )
        .prop_map(|(i, frac)| format!("{i}{frac}"));
    let small = (any::<i64>(), -40_i32..40).prop_map(|(c, e)| format!("{c}E{e}"));
    let wide = (any::<u64>(), -6176_i32..6112).prop_map(|(c, e)| format!("{c}E{e}"));
    prop_oneof![
        edges.prop_map(str::to_owned),
        near_double,
        near_int,
        small,
        wide,
    ]
    .prop_map(|s| RawBson::Decimal128(Decimal128::from_str(&s).unwrap()))
}

/// `text` (a decimal in `{:e}` form) with `nudge` added to its last coefficient digit's place.
fn nudged(text: &str, nudge: i32) -> String {
    if nudge == 0 || !text.contains('e') || text.contains("inf") || text.contains("NaN") {
        return text.to_owned();
    }
    let (mantissa, exp) = text.split_once('e').unwrap();
    let (sign, digits) = mantissa
        .strip_prefix('-')
        .map_or(("", mantissa), |d| ("-", d));
    let frac_len = digits.split_once('.').map_or(0, |(_, f)| f.len());
    let coeff: num_bigint::BigInt = digits.replace('.', "").parse().unwrap();
    let coeff = if sign == "-" { -coeff } else { coeff } + nudge;
    let exp: i64 = exp.parse().unwrap();
    format!("{coeff}E{}", exp - i64::try_from(frac_len).unwrap())
}

/// A number's exact value for [`exact_cmp`]: NaN, an infinity, or `num / den`.
enum Exact {
    NaN,
    Inf(bool),
    Ratio(num_bigint::BigInt, num_bigint::BigInt),
}

/// The exact value of a number, computed independently of `compare`: a double from its bits, a
/// decimal from its string form.
fn exact(v: &RawBson) -> Exact {
    use num_bigint::BigInt;
    let pow = |base: u32, e: u32| BigInt::from(base).pow(e);
    match v {
        RawBson::Int32(i) => Exact::Ratio(BigInt::from(*i), BigInt::from(1)),
        RawBson::Int64(i) => Exact::Ratio(BigInt::from(*i), BigInt::from(1)),
        RawBson::Double(d) if d.is_nan() => Exact::NaN,
        RawBson::Double(d) if d.is_infinite() => Exact::Inf(*d > 0.0),
        RawBson::Double(d) => {
            let bits = d.to_bits();
            let biased = u32::try_from((bits >> 52) & 0x7ff).unwrap();
            let frac = bits & ((1 << 52) - 1);
            let (m, e) = if biased == 0 {
                (frac, -1074)
            } else {
                (frac | (1 << 52), i32::try_from(biased).unwrap() - 1075)
            };
            let m = if *d < 0.0 {
                -BigInt::from(m)
            } else {
                BigInt::from(m)
            };
            if e >= 0 {
                Exact::Ratio(m * pow(2, e.unsigned_abs()), BigInt::from(1))
            } else {
                Exact::Ratio(m, pow(2, e.unsigned_abs()))
            }
        }
        RawBson::Decimal128(d) => {
            let text = d.to_string();
            let (neg, rest) = text
                .strip_prefix('-')
                .map_or((false, &*text), |r| (true, r));
            match rest {
                "NaN" => return Exact::NaN,
                "Infinity" => return Exact::Inf(!neg),
                _ => {}
            }
            let (mantissa, exp) = rest.split_once('E').unwrap_or((rest, "0"));
            let frac_len = mantissa.split_once('.').map_or(0, |(_, f)| f.len());
            let coeff: BigInt = mantissa.replace('.', "").parse().unwrap();
            let coeff = if neg { -coeff } else { coeff };
            let e = exp.parse::<i32>().unwrap() - i32::try_from(frac_len).unwrap();
            if e >= 0 {
                Exact::Ratio(coeff * pow(10, e.unsigned_abs()), BigInt::from(1))
            } else {
                Exact::Ratio(coeff, pow(10, e.unsigned_abs()))
            }
        }
        other => panic!("not a number: {other:?}"),
    }
}

/// Numeric order by exact value (NaN lowest and equal to itself), the oracle of `compare`.
fn exact_cmp(a: &RawBson, b: &RawBson) -> Ordering {
    let rank = |x: &Exact| match x {
        Exact::NaN => 0,
        Exact::Inf(false) => 1,
        Exact::Ratio(..) => 2,
        Exact::Inf(true) => 3,
    };
    match (exact(a), exact(b)) {
        (Exact::Ratio(an, ad), Exact::Ratio(bn, bd)) => (an * bd).cmp(&(bn * ad)),
        (x, y) => rank(&x).cmp(&rank(&y)),
    }
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
    fn numbers_compare_by_exact_value(a in arbitrary_number(), b in arbitrary_number()) {
        prop_assert_eq!(cmp(&a, &b), exact_cmp(&a, &b), "{:?} vs {:?}", a, b);
        let (ka, kb) = (to_key(a.as_raw_bson_ref()), to_key(b.as_raw_bson_ref()));
        prop_assert_eq!(ka.cmp(&kb), exact_cmp(&a, &b), "keys of {:?} vs {:?}", a, b);
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

    #[test]
    fn sort_agrees_with_compare(a in non_array(), b in non_array()) {
        // (Arrays sort by their smallest or largest element instead.)
        let da = doc_with("x", a.clone());
        let db = doc_with("x", b.clone());
        let asc = SortSpec::compile(&bson::rawdoc! {"x": 1}).unwrap();
        let desc = SortSpec::compile(&bson::rawdoc! {"x": -1}).unwrap();
        prop_assert_eq!(asc.compare(&da, &db), cmp(&a, &b));
        prop_assert_eq!(desc.compare(&da, &db), cmp(&a, &b).reverse());
    }

    #[test]
    fn sort_is_a_total_order(a in arbitrary_bson(), b in arbitrary_bson(), c in arbitrary_bson()) {
        let spec = SortSpec::compile(&bson::rawdoc! {"x": 1, "y.z": -1}).unwrap();
        let docs: Vec<RawDocumentBuf> = [&a, &b, &c]
            .iter()
            .map(|v| {
                let mut d = doc_with("x", (*v).clone());
                d.append(bson::raw::cstr!("y"), (*v).clone());
                d
            })
            .collect();
        let o = |i: usize, j: usize| spec.compare(&docs[i], &docs[j]);
        prop_assert_eq!(o(0, 0), Ordering::Equal);
        prop_assert_eq!(o(0, 1), o(1, 0).reverse());
        if o(0, 1) != Ordering::Greater && o(1, 2) != Ordering::Greater {
            prop_assert_ne!(o(0, 2), Ordering::Greater);
        }
    }

    #[test]
    fn comparison_filters_agree_with_compare((a, b) in same_rank_pair()) {
        // Within one canonical type (and away from NaN), $gt/$lt are compare's order.
        prop_assume!(!super::compare::is_nan(a.as_raw_bson_ref())
            && !super::compare::is_nan(b.as_raw_bson_ref()));
        let doc = doc_with("x", b.clone());
        for (op, want) in [
            ("$gt", Ordering::Greater),
            ("$lt", Ordering::Less),
        ] {
            let mut inner = RawDocumentBuf::new();
            inner.append(bson::raw::CString::try_from(op).unwrap(), a.clone());
            let filter = Filter::compile(&doc_with("x", RawBson::Document(inner))).unwrap();
            prop_assert_eq!(filter.matches(&doc), cmp(&b, &a) == want, "{} {:?} {:?}", op, a, b);
        }
    }

    #[test]
    fn in_is_a_disjunction_of_equalities(a in equality_operand(), c in equality_operand(), b in arbitrary_leaf()) {
        let mut set = RawArrayBuf::new();
        set.push(a.clone());
        set.push(c.clone());
        let mut inner = RawDocumentBuf::new();
        inner.append(bson::raw::cstr!("$in"), set);
        let f_in = Filter::compile(&doc_with("x", RawBson::Document(inner))).unwrap();
        let f_a = Filter::compile(&doc_with("x", a)).unwrap();
        let f_c = Filter::compile(&doc_with("x", c)).unwrap();
        let doc = doc_with("x", b);
        prop_assert_eq!(f_in.matches(&doc), f_a.matches(&doc) || f_c.matches(&doc));
    }

    #[test]
    fn expr_eq_agrees_with_compare(a in arbitrary_bson(), b in arbitrary_bson()) {
        let query = bson::rawdoc! {"$expr": {"$eq": ["$x", {"$literal": a.clone()}]}};
        let filter = Filter::compile(&query).unwrap();
        prop_assert_eq!(filter.try_matches(&doc_with("x", b.clone())).unwrap(), cmp(&a, &b) == Ordering::Equal);
    }

    #[test]
    fn matched_index_points_at_a_matching_element(a in equality_operand(), items in prop::collection::vec(arbitrary_leaf(), 0..5)) {
        let mut arr = RawArrayBuf::new();
        for item in &items {
            arr.push(item.clone());
        }
        let doc = doc_with("x", RawBson::Array(arr));
        let filter = Filter::compile(&doc_with("x", a.clone())).unwrap();
        match filter.matched_array_index(&doc) {
            Some(i) => prop_assert_eq!(cmp(&items[i], &a), Ordering::Equal),
            None => prop_assert!(!items.iter().any(|v| cmp(v, &a) == Ordering::Equal)),
        }
    }
}

fn doc_with(key: &str, v: RawBson) -> RawDocumentBuf {
    let mut d = RawDocumentBuf::new();
    d.append(bson::raw::CString::try_from(key).unwrap(), v);
    d
}

/// Any value but an array.
fn non_array() -> impl Strategy<Value = RawBson> {
    arbitrary_bson().prop_map(|v| match v {
        RawBson::Array(_) => RawBson::Null,
        other => other,
    })
}

/// Two values of one canonical type (numbers, strings, documents, dates).
fn same_rank_pair() -> impl Strategy<Value = (RawBson, RawBson)> {
    let strings = prop::sample::select(vec!["", "a", "b", "ab", "a\0", "é", "B"]);
    let string = strings.prop_map(|s| RawBson::String(s.to_owned()));
    let date = (-3_i64..3).prop_map(|ms| RawBson::DateTime(bson::DateTime::from_millis(ms)));
    let doc = || arbitrary_bson().prop_map(|v| RawBson::Document(doc_with("k", v)));
    prop_oneof![
        (arbitrary_number(), arbitrary_number()),
        (string.clone(), string),
        (date.clone(), date),
        (doc(), doc()),
    ]
}
