//! Dotted field paths with MongoDB's implicit array traversal, as query predicates see them.
//!
//! [`for_each_value`] yields every value a path reaches in a document, following mongod's
//! `BSONElementIterator`:
//!
//! - documents are descended field by field;
//! - an array in the middle of a path is traversed: for `a.b` and `a: [{b: 1}, {b: 2}]` both `1`
//!   and `2` are reached. Each element that is a document is looked up with the rest of the path;
//!   if the next component is a number (`a.0.b`), the element at that index is also followed;
//!   scalars and nested arrays are skipped (unless reached by index);
//! - an array at the end of a path yields each element and then the array itself
//!   ([`LeafArrays::Expand`]), so `{a: 1}` and `{a: [1, 2]}` both match `{a: [1, 2]}`;
//!   nested arrays are not flattened further;
//! - a path that is missing yields [`None`] ("missing", which `$eq: null` and `$exists` see):
//!   a missing field, a path through a scalar, or a missing field in a document inside an array.
//!   Arrays whose elements cannot continue the path yield nothing at all.
//!
//! Field names containing dots cannot be addressed (as in MongoDB).

use std::ops::ControlFlow;

use bson::{RawArray, RawBsonRef, RawDocument};

/// A dotted field path, split once.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FieldPath {
    dotted: String,
    parts: Vec<String>,
}

impl FieldPath {
    /// Splits `dotted` on `.`; empty components are kept (callers validate where MongoDB does).
    pub fn new(dotted: &str) -> FieldPath {
        FieldPath {
            dotted: dotted.to_owned(),
            parts: dotted.split('.').map(str::to_owned).collect(),
        }
    }

    /// The path as written, e.g. `a.b.0`.
    pub fn dotted(&self) -> &str {
        &self.dotted
    }

    /// The components.
    pub fn parts(&self) -> &[String] {
        &self.parts
    }
}

/// What a path that ends at an array yields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeafArrays {
    /// Each element, then the array itself (equality, comparisons, `$exists`, `$in`).
    Expand,
    /// Each element only (sort keys).
    ExpandOmitArray,
    /// The array itself only (`$size`).
    NoExpand,
}

/// Calls `f` with every value `path` reaches in `doc` (`None` for "missing"), stopping early
/// when `f` returns [`ControlFlow::Break`], which is then returned.
pub fn for_each_value<'a, S: AsRef<str>>(
    doc: &'a RawDocument,
    path: &[S],
    leaf: LeafArrays,
    f: &mut dyn FnMut(Option<RawBsonRef<'a>>) -> ControlFlow<()>,
) -> ControlFlow<()> {
    if path.is_empty() {
        return f(Some(RawBsonRef::Document(doc)));
    }
    walk_doc(doc, path, leaf, f)
}

/// Like [`for_each_value`], for a path whose first component was already looked up: `first` is
/// that field's value (`None` if missing) and `rest` the remaining components. Callers that
/// evaluate several paths fetch all first components in one pass over the document.
pub fn for_each_value_at<'a, S: AsRef<str>>(
    first: Option<RawBsonRef<'a>>,
    rest: &[S],
    leaf: LeafArrays,
    f: &mut dyn FnMut(Option<RawBsonRef<'a>>) -> ControlFlow<()>,
) -> ControlFlow<()> {
    let Some(v) = first else {
        return f(None);
    };
    if rest.is_empty() {
        return emit_leaf(v, leaf, f);
    }
    match v {
        RawBsonRef::Document(d) => walk_doc(d, rest, leaf, f),
        RawBsonRef::Array(a) => walk_array(a, rest, leaf, f),
        _ => f(None),
    }
}

/// Every value `path` reaches in `doc`, in traversal order (`None` for "missing").
pub fn values<'a, S: AsRef<str>>(
    doc: &'a RawDocument,
    path: &[S],
    leaf: LeafArrays,
) -> Vec<Option<RawBsonRef<'a>>> {
    let mut out = Vec::new();
    let _ = for_each_value(doc, path, leaf, &mut |v| {
        out.push(v);
        ControlFlow::Continue(())
    });
    out
}

/// Whether any value `path` reaches in `doc` satisfies `pred`.
pub fn any<'a, S: AsRef<str>>(
    doc: &'a RawDocument,
    path: &[S],
    leaf: LeafArrays,
    mut pred: impl FnMut(Option<RawBsonRef<'a>>) -> bool,
) -> bool {
    for_each_value(doc, path, leaf, &mut |v| {
        if pred(v) {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    })
    .is_break()
}

/// [`any`] for a path whose first component was already looked up (see [`for_each_value_at`]).
pub fn any_at<'a, S: AsRef<str>>(
    first: Option<RawBsonRef<'a>>,
    rest: &[S],
    leaf: LeafArrays,
    mut pred: impl FnMut(Option<RawBsonRef<'a>>) -> bool,
) -> bool {
    for_each_value_at(first, rest, leaf, &mut |v| {
        if pred(v) {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    })
    .is_break()
}

/// The single value at `path` without array traversal, except that numeric components index
/// into arrays (`a.0.b`); `None` if any step is missing.
pub fn lookup<'a, S: AsRef<str>>(doc: &'a RawDocument, path: &[S]) -> Option<RawBsonRef<'a>> {
    let mut cur = RawBsonRef::Document(doc);
    for part in path {
        let part = part.as_ref();
        cur = match cur {
            RawBsonRef::Document(d) => d.get(part).ok().flatten()?,
            RawBsonRef::Array(a) => a.get(array_index(part)?).ok().flatten()?,
            _ => return None,
        };
    }
    Some(cur)
}

/// The array index a path component names: decimal digits without a leading zero (mongod
/// matches the component against the element's field name, `"0"`, `"1"`, …).
pub fn array_index(part: &str) -> Option<usize> {
    let bytes = part.as_bytes();
    let ok = !bytes.is_empty()
        && bytes.iter().all(u8::is_ascii_digit)
        && (bytes.len() == 1 || bytes[0] != b'0');
    if ok { part.parse().ok() } else { None }
}

/// Descends through documents until the path ends, goes missing, or meets an array.
fn walk_doc<'a, S: AsRef<str>>(
    doc: &'a RawDocument,
    path: &[S],
    leaf: LeafArrays,
    f: &mut dyn FnMut(Option<RawBsonRef<'a>>) -> ControlFlow<()>,
) -> ControlFlow<()> {
    let mut cur = doc;
    for (i, part) in path.iter().enumerate() {
        let Some(v) = cur.get(part.as_ref()).ok().flatten() else {
            return f(None);
        };
        let rest = &path[i + 1..];
        if rest.is_empty() {
            return emit_leaf(v, leaf, f);
        }
        match v {
            RawBsonRef::Document(d) => cur = d,
            RawBsonRef::Array(a) => return walk_array(a, rest, leaf, f),
            // A path through a scalar is missing.
            _ => return f(None),
        }
    }
    // `path` is never empty here.
    ControlFlow::Continue(())
}

fn emit_leaf<'a>(
    v: RawBsonRef<'a>,
    leaf: LeafArrays,
    f: &mut dyn FnMut(Option<RawBsonRef<'a>>) -> ControlFlow<()>,
) -> ControlFlow<()> {
    let RawBsonRef::Array(a) = v else {
        return f(Some(v));
    };
    if leaf != LeafArrays::NoExpand {
        for e in a.into_iter().map_while(Result::ok) {
            f(Some(e))?;
        }
    }
    if leaf == LeafArrays::ExpandOmitArray {
        ControlFlow::Continue(())
    } else {
        f(Some(v))
    }
}

/// An array in the middle of a path; `rest` is not empty.
fn walk_array<'a, S: AsRef<str>>(
    a: &'a RawArray,
    rest: &[S],
    leaf: LeafArrays,
    f: &mut dyn FnMut(Option<RawBsonRef<'a>>) -> ControlFlow<()>,
) -> ControlFlow<()> {
    let index = array_index(rest[0].as_ref());
    let after_index = &rest[1..];
    for (i, e) in a.into_iter().map_while(Result::ok).enumerate() {
        let offset_match = index == Some(i);
        if let RawBsonRef::Document(d) = e {
            // The element's own fields (a numeric component is also a field name here).
            walk_doc(d, rest, leaf, f)?;
        }
        if !offset_match {
            continue;
        }
        if after_index.is_empty() {
            // `a.0` names the element itself; it is not expanded even if it is an array.
            f(Some(e))?;
            continue;
        }
        match e {
            RawBsonRef::Document(d) => walk_doc(d, after_index, leaf, f)?,
            RawBsonRef::Array(inner) => walk_array(inner, after_index, leaf, f)?,
            _ => {}
        }
    }
    ControlFlow::Continue(())
}

/// The values of several top-level fields of `doc`, found in one pass (the first occurrence of
/// each, as `RawDocument::get` would); `None` where a field is missing.
///
/// The pass reads element headers straight from the bytes (type, key, value length): a key is
/// compared as bytes, never checked as UTF-8 or turned into a `CStr`, and a value is looked at
/// only when its key is wanted. A collection scan runs this on every stored document, most of
/// whose elements no predicate reads. A document the walk cannot follow ends it, as a malformed
/// one ends `RawDocument::iter_elements`.
pub fn top_level_fields<'a, S: AsRef<str>>(
    doc: &'a RawDocument,
    fields: &[S],
) -> Vec<Option<RawBsonRef<'a>>> {
    let mut values: Vec<Option<RawBsonRef<'a>>> = vec![None; fields.len()];
    top_level_fields_into(doc, fields, &mut values);
    values
}

/// [`top_level_fields`] into `values` (one slot per field, all `None` on entry), for callers
/// that keep the slots on the stack.
pub fn top_level_fields_into<'a, S: AsRef<str>>(
    doc: &'a RawDocument,
    fields: &[S],
    values: &mut [Option<RawBsonRef<'a>>],
) {
    let mut missing = fields.len().min(values.len());
    if missing == 0 {
        return;
    }
    for (kind, key, value) in Elements::of(doc) {
        let Some(i) = fields.iter().position(|f| f.as_ref().as_bytes() == key) else {
            continue;
        };
        if let Some(slot) = values.get_mut(i)
            && slot.is_none()
        {
            *slot = value_of(doc, kind, key, value);
            missing -= 1;
            if missing == 0 {
                break;
            }
        }
    }
}

/// The top-level elements of a document as `(type, key, value bytes)`, read from their
/// headers without validating keys or values; ends at the terminator or at the first element
/// it cannot follow.
struct Elements<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Elements<'a> {
    fn of(doc: &'a RawDocument) -> Self {
        Elements {
            bytes: doc.as_bytes(),
            at: 4,
        }
    }
}

/// The little-endian `i32` at `at`, as a length (`None` if out of bounds or negative).
fn length_at(bytes: &[u8], at: usize) -> Option<usize> {
    let raw = bytes.get(at..at.checked_add(4)?)?;
    usize::try_from(i32::from_le_bytes(raw.try_into().ok()?)).ok()
}

/// Where the NUL ending the C string at `at` is.
fn cstring_end(bytes: &[u8], at: usize) -> Option<usize> {
    Some(at + bytes.get(at..)?.iter().position(|&b| b == 0)?)
}

impl<'a> Iterator for Elements<'a> {
    type Item = (u8, &'a [u8], &'a [u8]);

    fn next(&mut self) -> Option<Self::Item> {
        let bytes = self.bytes;
        let kind = *bytes.get(self.at)?;
        if kind == 0 {
            return None;
        }
        let key_end = cstring_end(bytes, self.at + 1)?;
        let key = bytes.get(self.at + 1..key_end)?;
        let start = key_end + 1;
        let size = match kind {
            0x06 | 0x0A | 0x7F | 0xFF => 0,
            0x08 => 1,
            0x10 => 4,
            0x01 | 0x09 | 0x11 | 0x12 => 8,
            0x07 => 12,
            0x13 => 16,
            // string, JavaScript code, symbol: length, bytes, NUL
            0x02 | 0x0D | 0x0E => 4 + length_at(bytes, start)?,
            // document, array, code with scope: their length includes itself
            0x03 | 0x04 | 0x0F => length_at(bytes, start)?,
            // binary: length, subtype, bytes
            0x05 => 5 + length_at(bytes, start)?,
            // regular expression: pattern and options, two C strings
            0x0B => cstring_end(bytes, cstring_end(bytes, start)? + 1)? + 1 - start,
            // DBPointer: a string, then an ObjectId
            0x0C => 4 + length_at(bytes, start)? + 12,
            _ => {
                self.at = bytes.len();
                return None;
            }
        };
        let end = start.checked_add(size)?;
        let value = bytes.get(start..end)?;
        self.at = end;
        Some((kind, key, value))
    }
}

/// The value of the element of type `kind` whose value bytes are `value`, in `doc` under
/// `key`. Types whose reference cannot be made from the bytes alone (arrays, `DBPointer`s, code
/// with scope) are read through `RawDocument::get`, as is anything malformed.
fn value_of<'a>(
    doc: &'a RawDocument,
    kind: u8,
    key: &[u8],
    value: &'a [u8],
) -> Option<RawBsonRef<'a>> {
    let fixed = |n: usize| value.get(..n);
    let text = |v: &'a [u8]| -> Option<&'a str> {
        // length, bytes, NUL
        std::str::from_utf8(v.get(4..v.len().checked_sub(1)?)?).ok()
    };
    let direct = match kind {
        0x01 => fixed(8)
            .and_then(|b| b.try_into().ok())
            .map(|b| RawBsonRef::Double(f64::from_le_bytes(b))),
        0x02 => text(value).map(RawBsonRef::String),
        0x03 => RawDocument::from_bytes(value)
            .ok()
            .map(RawBsonRef::Document),
        0x08 => match value.first() {
            Some(0) => Some(RawBsonRef::Boolean(false)),
            Some(1) => Some(RawBsonRef::Boolean(true)),
            _ => None,
        },
        0x09 => fixed(8)
            .and_then(|b| b.try_into().ok())
            .map(|b| RawBsonRef::DateTime(bson::DateTime::from_millis(i64::from_le_bytes(b)))),
        0x0A => Some(RawBsonRef::Null),
        0x10 => fixed(4)
            .and_then(|b| b.try_into().ok())
            .map(|b| RawBsonRef::Int32(i32::from_le_bytes(b))),
        0x12 => fixed(8)
            .and_then(|b| b.try_into().ok())
            .map(|b| RawBsonRef::Int64(i64::from_le_bytes(b))),
        0x07 => fixed(12)
            .and_then(|b| <[u8; 12]>::try_from(b).ok())
            .map(|b| RawBsonRef::ObjectId(bson::oid::ObjectId::from_bytes(b))),
        0x11 => fixed(8).and_then(|b| b.try_into().ok()).map(|b: [u8; 8]| {
            let [i0, i1, i2, i3, t0, t1, t2, t3] = b;
            RawBsonRef::Timestamp(bson::Timestamp {
                increment: u32::from_le_bytes([i0, i1, i2, i3]),
                time: u32::from_le_bytes([t0, t1, t2, t3]),
            })
        }),
        0x13 => fixed(16)
            .and_then(|b| <[u8; 16]>::try_from(b).ok())
            .map(|b| RawBsonRef::Decimal128(bson::Decimal128::from_bytes(b))),
        0x06 => Some(RawBsonRef::Undefined),
        0x7F => Some(RawBsonRef::MaxKey),
        0xFF => Some(RawBsonRef::MinKey),
        _ => None,
    };
    direct.or_else(|| {
        let key = std::str::from_utf8(key).ok()?;
        doc.get(key).ok().flatten()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::{RawBson, rawbson, rawdoc};

    /// The values reached, rendered for comparison (`missing` for `None`).
    fn reached(doc: &RawDocument, path: &str, leaf: LeafArrays) -> Vec<String> {
        let p = FieldPath::new(path);
        values(doc, p.parts(), leaf)
            .into_iter()
            .map(|v| v.map_or_else(|| "missing".to_owned(), |v| show(v)))
            .collect()
    }

    fn show(v: RawBsonRef<'_>) -> String {
        bson::Bson::try_from(RawBson::from(v)).map_or_else(|_| "?".into(), |b| b.to_string())
    }

    /// The header walk finds what `RawDocument::get` finds, for every BSON type, the first of
    /// duplicated keys, and nothing in a document cut short.
    #[test]
    fn top_level_fields_agree_with_get() {
        use bson::spec::BinarySubtype;
        use bson::{Binary, Bson, JavaScriptCodeWithScope, Regex, Timestamp, doc};
        let oid = bson::oid::ObjectId::from_bytes([7; 12]);
        let full = doc! {
            "d": 1.5, "s": "text", "o": { "x": 1 }, "a": [1, "two"],
            "bin": Binary { subtype: BinarySubtype::Generic, bytes: vec![1, 2, 3] },
            "u": Bson::Undefined, "id": oid, "t": true, "f": false,
            "dt": bson::DateTime::from_millis(1_700_000_000_000), "n": Bson::Null,
            "re": Regex { pattern: "^a".try_into().unwrap(), options: "i".try_into().unwrap() },
            "js": Bson::JavaScriptCode("f()".into()),
            "sym": Bson::Symbol("sy".into()),
            "jss": JavaScriptCodeWithScope { code: "g()".into(), scope: doc! { "v": 2 } },
            "i": 42_i32, "ts": Timestamp { time: 9, increment: 3 }, "l": 1_i64 << 40,
            "dec": "1.25".parse::<bson::Decimal128>().unwrap(),
            "max": Bson::MaxKey, "min": Bson::MinKey,
            "é": "accented key",
        };
        // A DBPointer (no constructor but from bytes) before the last two fields: type, key,
        // namespace as a string, ObjectId.
        let built = bson::RawDocumentBuf::try_from(&full).unwrap();
        let mut bytes = built.as_bytes()[..built.as_bytes().len() - 1].to_vec();
        bytes.extend_from_slice(b"\x0cptr\x00\x05\x00\x00\x00db.c\x00");
        bytes.extend_from_slice(&[7; 12]);
        // A second `i`: the first one is the value.
        bytes.extend_from_slice(b"\x10i\x00\x07\x00\x00\x00");
        bytes.push(0);
        let len = i32::try_from(bytes.len()).unwrap().to_le_bytes();
        bytes[..4].copy_from_slice(&len);
        let raw = bson::RawDocumentBuf::from_bytes(bytes).unwrap();
        assert!(matches!(raw.get("ptr"), Ok(Some(RawBsonRef::DbPointer(_)))));
        assert_eq!(raw.get("i").unwrap(), Some(RawBsonRef::Int32(42)));
        let mut keys: Vec<String> = full.keys().cloned().collect();
        keys.push("ptr".into());
        keys.push("missing".into());
        keys.reverse();
        let got = top_level_fields(&raw, &keys);
        for (key, value) in keys.iter().zip(got) {
            assert_eq!(value, raw.get(key).unwrap(), "field {key}");
            assert_eq!(value.is_some(), key != "missing");
        }
        // Cut short: the walk stops where the bytes do, as `iter_elements` does.
        let bytes = raw.as_bytes();
        for cut in [5, 9, 20, bytes.len() / 2] {
            let mut short = bytes[..cut].to_vec();
            short.push(0);
            let len = i32::try_from(short.len()).unwrap().to_le_bytes();
            short[..4].copy_from_slice(&len);
            if let Ok(doc) = RawDocument::from_bytes(&short) {
                let walked = top_level_fields(doc, &keys);
                for (key, value) in keys.iter().zip(walked) {
                    if let Some(v) = value {
                        assert_eq!(Some(v), raw.get(key).unwrap(), "field {key} at cut {cut}");
                    }
                }
            }
        }
    }

    #[test]
    fn traversal_table() {
        use LeafArrays::{Expand, ExpandOmitArray, NoExpand};
        let cases: Vec<(bson::RawDocumentBuf, &str, LeafArrays, Vec<&str>)> = vec![
            (rawdoc! {"a": 1}, "a", Expand, vec!["1"]),
            (rawdoc! {}, "a", Expand, vec!["missing"]),
            (rawdoc! {"a": 1}, "a.b", Expand, vec!["missing"]),
            (rawdoc! {"a": {"b": 2}}, "a.b", Expand, vec!["2"]),
            (rawdoc! {"a": [1, 2]}, "a", Expand, vec!["1", "2", "[1, 2]"]),
            (rawdoc! {"a": [1, 2]}, "a", ExpandOmitArray, vec!["1", "2"]),
            (rawdoc! {"a": [1, 2]}, "a", NoExpand, vec!["[1, 2]"]),
            (rawdoc! {"a": [[1]]}, "a", Expand, vec!["[1]", "[[1]]"]),
            (rawdoc! {"a": []}, "a", Expand, vec!["[]"]),
            (
                rawdoc! {"a": [{"b": 1}, {"b": 2}]},
                "a.b",
                Expand,
                vec!["1", "2"],
            ),
            (
                rawdoc! {"a": [{"b": 1}, {"c": 2}]},
                "a.b",
                Expand,
                vec!["1", "missing"],
            ),
            (rawdoc! {"a": [1, 2]}, "a.b", Expand, vec![]),
            (rawdoc! {"a": []}, "a.b", Expand, vec![]),
            (rawdoc! {"a": [[{"b": 1}]]}, "a.b", Expand, vec![]),
            (
                rawdoc! {"a": [{"b": [1, 2]}]},
                "a.b",
                Expand,
                vec!["1", "2", "[1, 2]"],
            ),
            (rawdoc! {"a": [5, 6]}, "a.1", Expand, vec!["6"]),
            (rawdoc! {"a": [[5], 6]}, "a.0", Expand, vec!["[5]"]),
            // Each document element is also searched for a field named "1" (missing here).
            (
                rawdoc! {"a": [{"b": 1}, {"b": 2}]},
                "a.1.b",
                Expand,
                vec!["missing", "missing", "2"],
            ),
            // A numeric component is a field name of embedded documents too.
            (
                rawdoc! {"a": [{"0": "x"}, 7]},
                "a.0",
                Expand,
                vec!["\"x\"", "{ \"0\": \"x\" }"],
            ),
            (rawdoc! {"a": {"0": 3}}, "a.0", Expand, vec!["3"]),
            (
                rawdoc! {"a": [[{"b": 1}], [{"b": 2}]]},
                "a.1.b",
                Expand,
                vec!["2"],
            ),
            (rawdoc! {"a": [1, 2]}, "a.01", Expand, vec![]),
            (rawdoc! {"a": [1]}, "a.5", Expand, vec![]),
            (
                rawdoc! {"a": [{"b": [{"c": 1}, {"c": 2}]}, {"b": {"c": 3}}]},
                "a.b.c",
                Expand,
                vec!["1", "2", "3"],
            ),
        ];
        for (doc, path, leaf, want) in cases {
            assert_eq!(reached(&doc, path, leaf), want, "{doc:?} {path} {leaf:?}");
        }
    }

    #[test]
    fn stops_early() {
        let doc = rawdoc! {"a": [1, 2, 3]};
        let mut seen = 0;
        let flow = for_each_value(&doc, &["a"], LeafArrays::Expand, &mut |_| {
            seen += 1;
            if seen == 2 {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        });
        assert!(flow.is_break());
        assert_eq!(seen, 2);
    }

    #[test]
    fn lookup_and_index() {
        let doc = rawdoc! {"a": [{"b": 1}, {"b": [7, 8]}], "c": {"d": true}};
        assert_eq!(
            lookup(&doc, &["a", "1", "b", "0"]),
            Some(RawBsonRef::Int32(7))
        );
        assert_eq!(lookup(&doc, &["c", "d"]), Some(RawBsonRef::Boolean(true)));
        assert_eq!(lookup(&doc, &["a", "b"]), None);
        assert_eq!(lookup(&doc, &["x"]), None);
        assert_eq!(array_index("0"), Some(0));
        assert_eq!(array_index("12"), Some(12));
        assert_eq!(array_index("01"), None);
        assert_eq!(array_index(""), None);
        assert_eq!(array_index("-1"), None);
        let _ = rawbson!(1);
    }
}
