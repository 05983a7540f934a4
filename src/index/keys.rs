//! The keys a document gives an index, by MongoDB's rules for ascending/descending (B-tree)
//! indexes:
//!
//! - a missing key field gives `null`; a sparse index skips a key whose fields are all missing
//!   (so a document missing every key field has no keys);
//! - an array met along a key path gives one key per element (the index is then multikey);
//!   arrays of documents are walked through (`a.b` over `a: [{b: 1}, {b: 2}]` gives 1 and 2),
//!   but an array directly inside another is not (as `find` does not): it is a key itself at
//!   the end of a path, and gives `null` in the middle of one;
//! - an empty array at the end of a path gives `undefined`; in the middle of one, `null`;
//! - a numeric path component (`a.0`) over an array selects that element;
//! - the key fields of a compound index may walk through the same array (`a.b` and `a.c` over
//!   `a: [{b, c}, …]` pair each element's `b` with its `c`), but not through two different
//!   ones: that is `CannotIndexParallelArrays` (171).
//!
//! Ebb's multikey flag is conservative: any array met along a key path sets it, even one of a
//! single element (mongod leaves the index non-multikey for `[x]`). The planner may then skip a
//! few optimisations it could have made, never make a wrong one.

use std::collections::BTreeMap;

use bson::{RawArray, RawBsonRef, RawDocument};

use super::{KeyPattern, encode_component};
use crate::error::{CommandError, CommandResult, ErrorCode};

/// The keys of one document for one index.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Keys {
    /// The encoded keys (every component, see [`super::encode_component`]), sorted and without
    /// duplicates.
    pub components: Vec<Vec<u8>>,
    /// For each key, its entry's value: the key fields' values as stored (see
    /// [`covering_value`]).
    pub values: Vec<Vec<u8>>,
    /// Whether an array was met along a key path.
    pub multikey: bool,
}

/// The keys `doc` gives an index with key pattern `pattern` (partial filters are the caller's
/// business). Errors: `CannotIndexParallelArrays` (171).
pub fn document_keys(pattern: &KeyPattern, doc: &RawDocument, sparse: bool) -> CommandResult<Keys> {
    keys_of(pattern, doc, sparse, true)
}

/// [`document_keys`] without the entries' values (left empty): for callers that only find
/// or remove entries.
pub fn key_strings(pattern: &KeyPattern, doc: &RawDocument, sparse: bool) -> CommandResult<Keys> {
    keys_of(pattern, doc, sparse, false)
}

fn keys_of(
    pattern: &KeyPattern,
    doc: &RawDocument,
    sparse: bool,
    with_values: bool,
) -> CommandResult<Keys> {
    let mut out = BTreeMap::new();
    let multikey = generate(pattern, doc, sparse, &mut |values| {
        let mut key = Vec::new();
        for (value, (_, direction)) in values.iter().zip(&pattern.fields) {
            encode_component(value.as_bson(), *direction, &mut key);
        }
        // Of values with one key (`1` and `1.0` in one array), the first met.
        out.entry(key).or_insert_with(|| {
            if with_values {
                covering_value(values)
            } else {
                Vec::new()
            }
        });
        false
    })?;
    let (components, mut values): (Vec<_>, Vec<_>) = out.into_iter().unzip();
    if multikey {
        // No index-only read goes through a multikey index: its entries' values would never
        // be read (and an entry of an array element holds the element, not the field).
        values.iter_mut().for_each(Vec::clear);
    }
    Ok(Keys {
        components,
        values,
        multikey,
    })
}

/// An index entry's value: a BSON document of the key fields' values in key pattern order,
/// each under the name `""`, or under `"m"` (as `null`) when the document lacks the field.
/// A key string does not keep a value's type (`1`, `1L` and `1.0` share one) nor whether a
/// `null` key was a `null` or nothing, so an index-only read takes the values from here.
/// (Entries written before these values existed, and those of multikey documents, have an
/// empty value: a reader then reads the document.)
fn covering_value(values: &[Val<'_>]) -> Vec<u8> {
    let mut doc = bson::RawDocumentBuf::new();
    for v in values {
        match v {
            Val::Missing => doc.append(bson::cstr!("m"), bson::RawBson::Null),
            Val::Undefined => doc.append(bson::cstr!(""), bson::RawBson::Undefined),
            Val::Found(v) => doc.append(bson::cstr!(""), *v),
        }
    }
    doc.into_bytes()
}

/// The values of the key of `doc` whose encoding is `components`, as `(field, value)` pairs
/// (a missing field is `null`): the `keyValue` of a duplicate key error.
pub fn key_values(
    pattern: &KeyPattern,
    doc: &RawDocument,
    sparse: bool,
    components: &[u8],
) -> Vec<(String, bson::RawBson)> {
    let mut found = None;
    let _ = generate(pattern, doc, sparse, &mut |values| {
        let mut key = Vec::new();
        for (value, (_, direction)) in values.iter().zip(&pattern.fields) {
            encode_component(value.as_bson(), *direction, &mut key);
        }
        if key == components {
            found = Some(
                values
                    .iter()
                    .zip(&pattern.fields)
                    .map(|(v, (name, _))| (name.clone(), bson::RawBson::from(v.as_bson())))
                    .collect(),
            );
            return true;
        }
        false
    });
    found.unwrap_or_default()
}

/// A key field's value in one key.
#[derive(Debug, Clone, Copy)]
enum Val<'a> {
    /// Not there: `null` in the key, and "missing" for sparse indexes.
    Missing,
    /// An empty array at the end of the path.
    Undefined,
    /// The value found.
    Found(RawBsonRef<'a>),
}

impl<'a> Val<'a> {
    fn as_bson(self) -> RawBsonRef<'a> {
        match self {
            Val::Missing => RawBsonRef::Null,
            Val::Undefined => RawBsonRef::Undefined,
            Val::Found(v) => v,
        }
    }
}

/// Where a key field's walk stands.
#[derive(Debug, Clone, Copy)]
enum Pos<'a> {
    /// Resolved to a value.
    Done(Val<'a>),
    /// At an array element, with the path from component `next` still to walk.
    At(RawBsonRef<'a>, usize),
}

/// What walking a path down from a value gave.
enum Walk<'a> {
    Value(Val<'a>),
    /// An array to expand: the array, the index of the path component to apply to each element
    /// (the path's length when the array ends it), and the name of the field holding it.
    Array(&'a RawArray, usize, &'a str),
}

/// A path component that selects an array element by position (`0`, `12`; not `01`).
fn position(component: &str) -> Option<usize> {
    let digits = !component.is_empty() && component.bytes().all(|b| b.is_ascii_digit());
    if !digits || (component.len() > 1 && component.starts_with('0')) {
        return None;
    }
    component.parse().ok()
}

struct Generator<'p, 'f> {
    paths: Vec<Vec<&'p str>>,
    sparse: bool,
    multikey: bool,
    emit: &'f mut dyn FnMut(&[Val<'_>]) -> bool,
    stop: bool,
}

/// Calls `emit` with the values of every key of `doc` (not deduplicated) until it returns
/// true. Returns whether the keys are multikey.
fn generate(
    pattern: &KeyPattern,
    doc: &RawDocument,
    sparse: bool,
    emit: &mut dyn FnMut(&[Val<'_>]) -> bool,
) -> CommandResult<bool> {
    let mut g = Generator {
        paths: pattern
            .fields
            .iter()
            .map(|(p, _)| p.split('.').collect())
            .collect(),
        sparse,
        multikey: false,
        emit,
        stop: false,
    };
    let root = RawBsonRef::Document(doc);
    let start: Vec<Pos<'_>> = g.paths.iter().map(|_| Pos::At(root, 0)).collect();
    g.step(&start)?;
    Ok(g.multikey)
}

impl<'p> Generator<'p, '_> {
    /// Walks `path` from component `next` down from `value`, through documents and positional
    /// components, until the value or an array to expand. `element` says `value` is an array
    /// element, whose own array is not walked through (an array in an array).
    fn walk<'a>(path: &[&'p str], value: RawBsonRef<'a>, next: usize, element: bool) -> Walk<'a>
    where
        'p: 'a,
    {
        let mut cur = value;
        let mut i = next;
        let mut first = element;
        loop {
            let Some(component) = path.get(i).copied() else {
                return match cur {
                    RawBsonRef::Array(a) if !first => {
                        Walk::Array(a, i, path.get(i.wrapping_sub(1)).copied().unwrap_or(""))
                    }
                    v => Walk::Value(Val::Found(v)),
                };
            };
            match cur {
                RawBsonRef::Document(d) => match d.get(component) {
                    Ok(Some(v)) => cur = v,
                    _ => return Walk::Value(Val::Missing),
                },
                RawBsonRef::Array(a) => match position(component) {
                    Some(n) => match a.get(n) {
                        Ok(Some(v)) => cur = v,
                        _ => return Walk::Value(Val::Missing),
                    },
                    None if first => return Walk::Value(Val::Missing),
                    None => {
                        return Walk::Array(
                            a,
                            i,
                            path.get(i.wrapping_sub(1)).copied().unwrap_or(""),
                        );
                    }
                },
                _ => return Walk::Value(Val::Missing),
            }
            i += 1;
            first = false;
        }
    }

    fn step(&mut self, positions: &[Pos<'_>]) -> CommandResult<()> {
        if self.stop {
            return Ok(());
        }
        let mut values = Vec::with_capacity(positions.len());
        // The array to expand, the key fields walking through it (with the component each
        // applies to the elements), and its field name.
        let mut array: Option<(&RawArray, &str)> = None;
        let mut through: Vec<(usize, usize)> = Vec::new();
        for (field, pos) in positions.iter().enumerate() {
            let walked = match *pos {
                Pos::Done(v) => Walk::Value(v),
                Pos::At(value, next) => Self::walk(&self.paths[field], value, next, next > 0),
            };
            match walked {
                Walk::Value(v) => values.push(v),
                Walk::Array(a, next, name) => {
                    values.push(Val::Missing);
                    match array {
                        None => array = Some((a, name)),
                        Some((seen, seen_name)) if !std::ptr::eq(seen.as_bytes(), a.as_bytes()) => {
                            return Err(CommandError::new(
                                ErrorCode::CannotIndexParallelArrays,
                                format!("cannot index parallel arrays [{name}] [{seen_name}]"),
                            ));
                        }
                        Some(_) => {}
                    }
                    through.push((field, next));
                }
            }
        }
        let Some((array, _)) = array else {
            if self.sparse && values.iter().all(|v| matches!(v, Val::Missing)) {
                return Ok(());
            }
            self.stop = (self.emit)(&values);
            return Ok(());
        };
        self.multikey = true;
        let mut next_positions: Vec<Pos<'_>> = values.iter().map(|v| Pos::Done(*v)).collect();
        let mut empty = true;
        for element in array {
            empty = false;
            let element =
                element.map_err(|e| CommandError::new(ErrorCode::InvalidBSON, e.to_string()))?;
            for &(field, next) in &through {
                next_positions[field] = if next == self.paths[field].len() {
                    Pos::Done(Val::Found(element))
                } else {
                    Pos::At(element, next)
                };
            }
            self.step(&next_positions)?;
            if self.stop {
                return Ok(());
            }
        }
        if empty {
            for &(field, next) in &through {
                next_positions[field] = Pos::Done(if next == self.paths[field].len() {
                    Val::Undefined
                } else {
                    Val::Missing
                });
            }
            self.step(&next_positions)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use bson::{Bson, RawBson, RawDocumentBuf, rawdoc};

    use super::*;

    fn pattern(spec: &RawDocumentBuf) -> KeyPattern {
        KeyPattern::parse(spec).expect("valid pattern")
    }

    /// The keys as tuples of encoded values, to compare with expectations written as values.
    fn encoded(p: &KeyPattern, tuples: &[&[Bson]]) -> Vec<Vec<u8>> {
        let mut out: Vec<Vec<u8>> = tuples
            .iter()
            .map(|t| {
                let mut key = Vec::new();
                for (v, (_, d)) in t.iter().zip(&p.fields) {
                    let raw = RawBson::try_from(v.clone()).expect("converts");
                    encode_component(raw.as_raw_bson_ref(), *d, &mut key);
                }
                key
            })
            .collect();
        out.sort();
        out.dedup();
        out
    }

    #[expect(
        clippy::needless_pass_by_value,
        reason = "the tables read better with documents built in place"
    )]
    fn check(spec: RawDocumentBuf, doc: RawDocumentBuf, sparse: bool, want: &[&[Bson]], mk: bool) {
        let p = pattern(&spec);
        let keys = document_keys(&p, &doc, sparse).expect("keys");
        assert_eq!(keys.components, encoded(&p, want), "{spec:?} over {doc:?}");
        assert_eq!(keys.multikey, mk, "multikey of {spec:?} over {doc:?}");
    }

    #[test]
    fn scalars_missing_and_null() {
        check(
            rawdoc! {"a": 1},
            rawdoc! {"a": 5},
            false,
            &[&[Bson::Int32(5)]],
            false,
        );
        check(
            rawdoc! {"a": 1},
            rawdoc! {"b": 5},
            false,
            &[&[Bson::Null]],
            false,
        );
        check(
            rawdoc! {"a": 1},
            rawdoc! {"a": null},
            false,
            &[&[Bson::Null]],
            false,
        );
        // Sparse: a missing field gives no key, an explicit null does.
        check(rawdoc! {"a": 1}, rawdoc! {"b": 5}, true, &[], false);
        check(
            rawdoc! {"a": 1},
            rawdoc! {"a": null},
            true,
            &[&[Bson::Null]],
            false,
        );
        // Sparse compound: skipped only when every field is missing.
        check(
            rawdoc! {"a": 1, "b": 1},
            rawdoc! {"b": 2},
            true,
            &[&[Bson::Null, Bson::Int32(2)]],
            false,
        );
        check(rawdoc! {"a": 1, "b": 1}, rawdoc! {"c": 2}, true, &[], false);
        // Numbers that compare equal are one key.
        check(
            rawdoc! {"a": 1},
            rawdoc! {"a": 1.0},
            false,
            &[&[Bson::Int64(1)]],
            false,
        );
        // Dotted paths through documents; through a scalar is missing.
        check(
            rawdoc! {"a.b": 1},
            rawdoc! {"a": {"b": "x"}},
            false,
            &[&[Bson::String("x".into())]],
            false,
        );
        check(
            rawdoc! {"a.b": 1},
            rawdoc! {"a": 3},
            false,
            &[&[Bson::Null]],
            false,
        );
        // A whole document is a key.
        check(
            rawdoc! {"a": 1},
            rawdoc! {"a": {"x": 1}},
            false,
            &[&[Bson::Document(bson::doc! {"x": 1})]],
            false,
        );
    }

    #[test]
    fn arrays_give_one_key_per_element() {
        check(
            rawdoc! {"a": 1},
            rawdoc! {"a": [3, 1, 3, 2]},
            false,
            &[&[Bson::Int32(1)], &[Bson::Int32(2)], &[Bson::Int32(3)]],
            true,
        );
        // A single element still counts as multikey here (conservative).
        check(
            rawdoc! {"a": 1},
            rawdoc! {"a": [7]},
            false,
            &[&[Bson::Int32(7)]],
            true,
        );
        // Empty array at the end of the path: undefined; in the middle: null.
        check(
            rawdoc! {"a": 1},
            rawdoc! {"a": []},
            false,
            &[&[Bson::Undefined]],
            true,
        );
        check(
            rawdoc! {"a": 1},
            rawdoc! {"a": []},
            true,
            &[&[Bson::Undefined]],
            true,
        );
        check(
            rawdoc! {"a.b": 1},
            rawdoc! {"a": []},
            false,
            &[&[Bson::Null]],
            true,
        );
        // A nested array at the end of the path is one key.
        check(
            rawdoc! {"a": 1},
            rawdoc! {"a": [[1, 2], 3]},
            false,
            &[
                &[Bson::Array(vec![Bson::Int32(1), Bson::Int32(2)])],
                &[Bson::Int32(3)],
            ],
            true,
        );
    }

    #[test]
    fn arrays_of_documents_expand_along_dotted_paths() {
        check(
            rawdoc! {"a.b": 1},
            rawdoc! {"a": [{"b": 1}, {"b": 2}, {"c": 3}]},
            false,
            &[&[Bson::Int32(1)], &[Bson::Int32(2)], &[Bson::Null]],
            true,
        );
        // Sparse: the element without `b` gives nothing.
        check(
            rawdoc! {"a.b": 1},
            rawdoc! {"a": [{"b": 1}, {"c": 3}]},
            true,
            &[&[Bson::Int32(1)]],
            true,
        );
        // Two levels of arrays.
        check(
            rawdoc! {"a.b.c": 1},
            rawdoc! {"a": [{"b": [{"c": 1}, {"c": 2}]}, {"b": {"c": 3}}]},
            false,
            &[&[Bson::Int32(1)], &[Bson::Int32(2)], &[Bson::Int32(3)]],
            true,
        );
        // An array directly in an array is not walked through.
        check(
            rawdoc! {"a.b": 1},
            rawdoc! {"a": [[{"b": 1}]]},
            false,
            &[&[Bson::Null]],
            true,
        );
        // Leaf arrays inside elements expand too.
        check(
            rawdoc! {"a.b": 1},
            rawdoc! {"a": [{"b": [1, 2]}, {"b": 3}]},
            false,
            &[&[Bson::Int32(1)], &[Bson::Int32(2)], &[Bson::Int32(3)]],
            true,
        );
    }

    #[test]
    fn positional_components_select_one_element() {
        check(
            rawdoc! {"a.0": 1},
            rawdoc! {"a": [5, 6]},
            false,
            &[&[Bson::Int32(5)]],
            false,
        );
        check(
            rawdoc! {"a.1.b": 1},
            rawdoc! {"a": [{"b": 1}, {"b": 2}]},
            false,
            &[&[Bson::Int32(2)]],
            false,
        );
        check(
            rawdoc! {"a.3": 1},
            rawdoc! {"a": [5]},
            false,
            &[&[Bson::Null]],
            false,
        );
        // On a document, a numeric component is a field name.
        check(
            rawdoc! {"a.0": 1},
            rawdoc! {"a": {"0": "z"}},
            false,
            &[&[Bson::String("z".into())]],
            false,
        );
        // The selected element may itself be an array.
        check(
            rawdoc! {"a.0": 1},
            rawdoc! {"a": [[1, 2]]},
            false,
            &[&[Bson::Int32(1)], &[Bson::Int32(2)]],
            true,
        );
    }

    #[test]
    fn compound_keys_pair_fields() {
        // One array: crossed with the scalar field.
        check(
            rawdoc! {"a": 1, "b": -1},
            rawdoc! {"a": [1, 2], "b": "x"},
            false,
            &[
                &[Bson::Int32(1), Bson::String("x".into())],
                &[Bson::Int32(2), Bson::String("x".into())],
            ],
            true,
        );
        // Two fields through the same array: element by element, not crossed.
        check(
            rawdoc! {"a.b": 1, "a.c": 1},
            rawdoc! {"a": [{"b": 1, "c": 10}, {"b": 2, "c": 20}]},
            false,
            &[
                &[Bson::Int32(1), Bson::Int32(10)],
                &[Bson::Int32(2), Bson::Int32(20)],
            ],
            true,
        );
        // Nested arrays under the shared one belong to a single field: allowed.
        check(
            rawdoc! {"a.b": 1, "a.c": 1},
            rawdoc! {"a": [{"b": [1, 2], "c": 10}]},
            false,
            &[
                &[Bson::Int32(1), Bson::Int32(10)],
                &[Bson::Int32(2), Bson::Int32(10)],
            ],
            true,
        );
    }

    #[test]
    fn parallel_arrays_are_refused() {
        let p = pattern(&rawdoc! {"a": 1, "b": 1});
        let err = document_keys(&p, &rawdoc! {"a": [1, 2], "b": [1, 2]}, false).unwrap_err();
        assert_eq!(err.code, ErrorCode::CannotIndexParallelArrays);
        assert_eq!(err.errmsg, "cannot index parallel arrays [b] [a]");
        // Empty arrays count too.
        assert!(document_keys(&p, &rawdoc! {"a": [], "b": [1]}, false).is_err());
        // One array is fine.
        assert!(document_keys(&p, &rawdoc! {"a": [1, 2], "b": 1}, false).is_ok());
        // Different arrays inside one element of a shared array.
        let p = pattern(&rawdoc! {"a.b": 1, "a.c": 1});
        let err = document_keys(&p, &rawdoc! {"a": [{"b": [1], "c": [2]}]}, false).unwrap_err();
        assert_eq!(err.errmsg, "cannot index parallel arrays [c] [b]");
    }

    #[test]
    fn key_values_recover_the_values_of_a_key() {
        let p = pattern(&rawdoc! {"a": 1, "b": -1});
        let doc = rawdoc! {"a": [1, 2], "b": "x"};
        let keys = document_keys(&p, &doc, false).expect("keys");
        let values = key_values(&p, &doc, false, &keys.components[1]);
        assert_eq!(
            values,
            vec![
                ("a".to_owned(), RawBson::Int32(2)),
                ("b".to_owned(), RawBson::String("x".into())),
            ]
        );
        let doc = rawdoc! {"c": 1};
        let keys = document_keys(&p, &doc, false).expect("keys");
        assert_eq!(
            key_values(&p, &doc, false, &keys.components[0]),
            vec![
                ("a".to_owned(), RawBson::Null),
                ("b".to_owned(), RawBson::Null)
            ]
        );
    }
}
