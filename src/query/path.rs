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
pub fn top_level_fields<'a, S: AsRef<str>>(
    doc: &'a RawDocument,
    fields: &[S],
) -> Vec<Option<RawBsonRef<'a>>> {
    let mut values: Vec<Option<RawBsonRef<'a>>> = vec![None; fields.len()];
    let mut missing = fields.len();
    if missing == 0 {
        return values;
    }
    for elem in doc.iter_elements() {
        let Ok(elem) = elem else { break };
        let k = elem.key().as_str();
        let Some(i) = fields.iter().position(|f| f.as_ref() == k) else {
            continue;
        };
        if values[i].is_none() {
            values[i] = elem.value().ok();
            missing -= 1;
            if missing == 0 {
                break;
            }
        }
    }
    values
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
