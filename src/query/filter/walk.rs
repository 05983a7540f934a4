//! Implicit array traversal that also reports where in the first array a value was reached,
//! for [`Filter::matched_array_index`]. It yields exactly the values
//! [`path::for_each_value_at`] yields (tested below), each
//! with mongod's `arrayOffset`: the index in the outermost array traversed, or for a leaf
//! array's elements their own index.
//!
//! [`Filter::matched_array_index`]: super::Filter::matched_array_index
//! [`path::for_each_value_at`]: crate::query::path::for_each_value_at

use std::ops::ControlFlow;

use bson::{RawArray, RawBsonRef, RawDocument};

use crate::query::path::{LeafArrays, array_index};

pub(super) type Visit<'f, 'a> =
    dyn FnMut(Option<RawBsonRef<'a>>, Option<usize>) -> ControlFlow<()> + 'f;

/// The values under `first` (the value of the path's first component) for `rest`.
pub(super) fn at<'a, S: AsRef<str>>(
    first: Option<RawBsonRef<'a>>,
    rest: &[S],
    leaf: LeafArrays,
    offset: Option<usize>,
    f: &mut Visit<'_, 'a>,
) -> ControlFlow<()> {
    let Some(v) = first else {
        return f(None, offset);
    };
    if rest.is_empty() {
        return emit_leaf(v, leaf, offset, f);
    }
    match v {
        RawBsonRef::Document(d) => walk_doc(d, rest, leaf, offset, f),
        RawBsonRef::Array(a) => walk_array(a, rest, leaf, offset, f),
        _ => f(None, offset),
    }
}

fn walk_doc<'a, S: AsRef<str>>(
    doc: &'a RawDocument,
    path: &[S],
    leaf: LeafArrays,
    offset: Option<usize>,
    f: &mut Visit<'_, 'a>,
) -> ControlFlow<()> {
    let mut cur = doc;
    for (i, part) in path.iter().enumerate() {
        let Some(v) = cur.get(part.as_ref()).ok().flatten() else {
            return f(None, offset);
        };
        let rest = &path[i + 1..];
        if rest.is_empty() {
            return emit_leaf(v, leaf, offset, f);
        }
        match v {
            RawBsonRef::Document(d) => cur = d,
            RawBsonRef::Array(a) => return walk_array(a, rest, leaf, offset, f),
            _ => return f(None, offset),
        }
    }
    ControlFlow::Continue(())
}

fn emit_leaf<'a>(
    v: RawBsonRef<'a>,
    leaf: LeafArrays,
    offset: Option<usize>,
    f: &mut Visit<'_, 'a>,
) -> ControlFlow<()> {
    let RawBsonRef::Array(a) = v else {
        return f(Some(v), offset);
    };
    if leaf != LeafArrays::NoExpand {
        for (i, e) in a.into_iter().map_while(Result::ok).enumerate() {
            f(Some(e), offset.or(Some(i)))?;
        }
    }
    if leaf == LeafArrays::ExpandOmitArray {
        ControlFlow::Continue(())
    } else {
        f(Some(v), offset)
    }
}

fn walk_array<'a, S: AsRef<str>>(
    a: &'a RawArray,
    rest: &[S],
    leaf: LeafArrays,
    offset: Option<usize>,
    f: &mut Visit<'_, 'a>,
) -> ControlFlow<()> {
    let index = array_index(rest[0].as_ref());
    let after_index = &rest[1..];
    for (i, e) in a.into_iter().map_while(Result::ok).enumerate() {
        let here = offset.or(Some(i));
        if let RawBsonRef::Document(d) = e {
            walk_doc(d, rest, leaf, here, f)?;
        }
        if index != Some(i) {
            continue;
        }
        if after_index.is_empty() {
            f(Some(e), here)?;
            continue;
        }
        match e {
            RawBsonRef::Document(d) => walk_doc(d, after_index, leaf, here, f)?,
            RawBsonRef::Array(inner) => walk_array(inner, after_index, leaf, here, f)?,
            _ => {}
        }
    }
    ControlFlow::Continue(())
}

#[cfg(test)]
mod tests {
    use std::ops::ControlFlow;

    use bson::rawdoc;

    use crate::query::path::LeafArrays;

    /// The offset-tracking traversal yields exactly what `path` yields.
    #[test]
    fn walk_agrees_with_path() {
        let docs = vec![
            rawdoc! {"a": 1},
            rawdoc! {},
            rawdoc! {"a": [1, 2, [3]]},
            rawdoc! {"a": [{"b": 1}, {"c": 2}, 3, [{"b": 4}]]},
            rawdoc! {"a": [{"b": [1, {"c": 2}]}, {"b": {"c": 3}}]},
            rawdoc! {"a": [{"0": "x"}, 7, [8, 9]]},
            rawdoc! {"a": {"b": [[1], 2]}},
        ];
        let paths = [
            "a", "a.b", "a.0", "a.1", "a.b.c", "a.3.b", "a.2.1", "a.b.0", "x",
        ];
        for doc in &docs {
            for p in paths {
                let parts: Vec<&str> = p.split('.').collect();
                for leaf in [
                    LeafArrays::Expand,
                    LeafArrays::NoExpand,
                    LeafArrays::ExpandOmitArray,
                ] {
                    let want = crate::query::path::values(doc, &parts, leaf);
                    let mut got = Vec::new();
                    let first = doc.get(parts[0]).ok().flatten();
                    let _ = super::at(first, &parts[1..], leaf, None, &mut |v, _| {
                        got.push(v);
                        ControlFlow::Continue(())
                    });
                    assert_eq!(got, want, "{doc:?} {p} {leaf:?}");
                }
            }
        }
    }
}
