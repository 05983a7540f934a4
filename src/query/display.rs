//! Values rendered as mongod renders them in error messages (`BSONElement::toString`), for
//! messages that must match mongod's:
//! `{ a: 1, b: "x" }`, `[ 1, 2 ]`, `1.0` for whole doubles, `ObjectId('…')`, `new Date(…)`.

use std::fmt::Write;

use bson::spec::ElementType;
use bson::{RawBsonRef, RawDocument};

use super::compare::{db_pointer_parts, decimal_to_f64};

/// MongoDB's name for a BSON type (`$type` aliases, error messages). Kept here rather than
/// imported from `commands::args` so that `query` does not depend on `commands`.
pub fn type_name(t: ElementType) -> &'static str {
    match t {
        ElementType::Double => "double",
        ElementType::String => "string",
        ElementType::EmbeddedDocument => "object",
        ElementType::Array => "array",
        ElementType::Binary => "binData",
        ElementType::Undefined => "undefined",
        ElementType::ObjectId => "objectId",
        ElementType::Boolean => "bool",
        ElementType::DateTime => "date",
        ElementType::Null => "null",
        ElementType::RegularExpression => "regex",
        ElementType::DbPointer => "dbPointer",
        ElementType::JavaScriptCode => "javascript",
        ElementType::Symbol => "symbol",
        ElementType::JavaScriptCodeWithScope => "javascriptWithScope",
        ElementType::Int32 => "int",
        ElementType::Timestamp => "timestamp",
        ElementType::Int64 => "long",
        ElementType::Decimal128 => "decimal",
        ElementType::MinKey => "minKey",
        ElementType::MaxKey => "maxKey",
    }
}

/// `name: value`, as mongod prints an element.
pub fn element(name: &str, v: RawBsonRef<'_>) -> String {
    let mut out = String::new();
    out.push_str(name);
    out.push_str(": ");
    write_value(&mut out, v);
    out
}

/// A value, as mongod prints it.
pub fn value(v: RawBsonRef<'_>) -> String {
    let mut out = String::new();
    write_value(&mut out, v);
    out
}

fn write_document(out: &mut String, d: &RawDocument) {
    let mut first = true;
    for (k, v) in d.iter().map_while(Result::ok) {
        out.push_str(if first { "{ " } else { ", " });
        first = false;
        out.push_str(k.as_str());
        out.push_str(": ");
        write_value(out, v);
    }
    out.push_str(if first { "{}" } else { " }" });
}

fn write_value(out: &mut String, v: RawBsonRef<'_>) {
    match v {
        RawBsonRef::Double(d) => out.push_str(&double(d)),
        RawBsonRef::String(s) | RawBsonRef::Symbol(s) => {
            let _ = write!(out, "\"{s}\"");
        }
        RawBsonRef::Document(d) => write_document(out, d),
        RawBsonRef::Array(a) => {
            let mut first = true;
            for e in a.into_iter().map_while(Result::ok) {
                out.push_str(if first { "[ " } else { ", " });
                first = false;
                write_value(out, e);
            }
            out.push_str(if first { "[]" } else { " ]" });
        }
        RawBsonRef::Binary(b) => {
            let _ = write!(out, "BinData({}, ", u8::from(b.subtype));
            for byte in b.bytes {
                let _ = write!(out, "{byte:02X}");
            }
            out.push(')');
        }
        RawBsonRef::Undefined => out.push_str("undefined"),
        RawBsonRef::ObjectId(id) => {
            let _ = write!(out, "ObjectId('{id}')");
        }
        RawBsonRef::Boolean(b) => {
            let _ = write!(out, "{b}");
        }
        RawBsonRef::DateTime(d) => {
            let _ = write!(out, "new Date({})", d.timestamp_millis());
        }
        RawBsonRef::Null => out.push_str("null"),
        RawBsonRef::RegularExpression(re) => {
            let _ = write!(out, "/{}/{}", re.pattern.as_str(), re.options.as_str());
        }
        RawBsonRef::DbPointer(p) => {
            let (ns, id) = db_pointer_parts(p);
            let _ = write!(out, "DBRef('{}',", String::from_utf8_lossy(&ns));
            for byte in id {
                let _ = write!(out, "{byte:02x}");
            }
            out.push(')');
        }
        RawBsonRef::JavaScriptCode(c) => out.push_str(c),
        RawBsonRef::JavaScriptCodeWithScope(c) => {
            let _ = write!(out, "CodeWScope( {}, ", c.code);
            write_document(out, c.scope);
            out.push(')');
        }
        RawBsonRef::Int32(i) => {
            let _ = write!(out, "{i}");
        }
        RawBsonRef::Timestamp(t) => {
            let _ = write!(out, "Timestamp({}, {})", t.time, t.increment);
        }
        RawBsonRef::Int64(i) => {
            let _ = write!(out, "{i}");
        }
        RawBsonRef::Decimal128(d) => {
            let _ = write!(out, "NumberDecimal(\"{d}\")");
        }
        RawBsonRef::MinKey => out.push_str("MinKey"),
        RawBsonRef::MaxKey => out.push_str("MaxKey"),
    }
}

/// A double as mongod prints it: C's `%.16g`, with `.0` appended when the result has no `.`,
/// `E` or `N` (so `1.0`, `42.12345`, `1e+20.0`, `inf.0`).
pub fn double(d: f64) -> String {
    let mut s = format_g(d, 16);
    if !s.contains(['.', 'E', 'N']) {
        s.push_str(".0");
    }
    s
}

/// C's `printf("%.<precision>g", d)` (`precision` ≥ 1 significant digits): what mongod's
/// messages show of a double (16 digits in BSON renderings, 6 in C++ stream output).
pub(crate) fn format_g(d: f64, precision: usize) -> String {
    if d.is_nan() {
        return "nan".to_owned();
    }
    if d.is_infinite() {
        return if d > 0.0 { "inf" } else { "-inf" }.to_owned();
    }
    if d == 0.0 {
        return if d.is_sign_negative() { "-0" } else { "0" }.to_owned();
    }
    let digits = precision.max(1) - 1;
    // `precision` significant digits in scientific form: "d.ddde±x".
    let sci = format!("{d:.digits$e}");
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let top = i32::try_from(precision).unwrap_or(i32::MAX);
    if (-4..top).contains(&exp) {
        // Fixed notation with precision - 1 - exp decimals, trailing zeros removed.
        let decimals = usize::try_from(top - 1 - exp).unwrap_or(0);
        trim_zeros(&format!("{d:.decimals$}"))
    } else {
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{}e{sign}{:02}", trim_zeros(mantissa), exp.abs())
    }
}

fn trim_zeros(s: &str) -> String {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_owned()
    } else {
        s.to_owned()
    }
}

/// mongod's `SafeNum::debugString` of a number, e.g. `(NumberLong)9223372036854775807`.
pub fn safe_num(v: RawBsonRef<'_>) -> String {
    match v {
        RawBsonRef::Int32(i) => format!("(NumberInt){i}"),
        RawBsonRef::Int64(i) => format!("(NumberLong){i}"),
        RawBsonRef::Double(d) => format!("(NumberDouble){}", format_g(d, 16)),
        RawBsonRef::Decimal128(d) => format!("(NumberDecimal){}", decimal_to_f64(d)),
        other => value(other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::{RawBson, rawbson, rawdoc};

    #[test]
    fn doubles_print_like_mongod() {
        let cases = [
            (1.0, "1.0"),
            (42.123_45, "42.12345"),
            (-2.5, "-2.5"),
            (0.1, "0.1"),
            (1e20, "1e+20.0"),
            (1.5e-7, "1.5e-07"),
            (0.0001, "0.0001"),
            (123_456_789_012_345_680.0, "1.234567890123457e+17"),
            (f64::INFINITY, "inf.0"),
            (f64::NAN, "nan.0"),
            (0.1 + 0.2, "0.3"),
        ];
        for (d, want) in cases {
            assert_eq!(double(d), want, "{d}");
        }
    }

    #[test]
    fn values_print_like_mongod() {
        let cases: Vec<(RawBson, &str)> = vec![
            (rawbson!(5), "5"),
            (rawbson!("x"), "\"x\""),
            (rawbson!([]), "[]"),
            (rawbson!([1, "a"]), "[ 1, \"a\" ]"),
            (rawbson!({}), "{}"),
            (
                rawbson!({"foo": [{"bar": "hello"}]}),
                "{ foo: [ { bar: \"hello\" } ] }",
            ),
            (rawbson!(null), "null"),
            (rawbson!(true), "true"),
            (RawBson::Int64(-3), "-3"),
        ];
        for (v, want) in cases {
            assert_eq!(value(v.as_raw_bson_ref()), want);
        }
        assert_eq!(element("a", RawBsonRef::Int32(1)), "a: 1");
        assert_eq!(
            value(RawBsonRef::Document(&rawdoc! {"a": 1.0})),
            "{ a: 1.0 }"
        );
        assert_eq!(
            safe_num(RawBsonRef::Int64(i64::MAX)),
            "(NumberLong)9223372036854775807"
        );
    }
}
