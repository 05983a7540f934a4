//! Sort specifications: `SortSpec::compile(&{a: 1, "b.c": -1})?`, then `spec.compare(&x, &y)`.
//!
//! Each key is a dotted path, ascending (`1`) or descending (`-1`). A document's sort key for a
//! path is, as in MongoDB, the smallest value the path reaches (ascending) or the largest
//! (descending), in [`compare`]'s order: arrays contribute their elements (an empty array sorts
//! below null, as `undefined`), a missing field sorts as `null`, and array elements that cannot
//! continue the path count as `null`.
//!
//! Strings sort in binary order, or by a collation given with [`SortSpec::with_collation`].
//!
//! `{$natural: 1}` / `{$natural: -1}` (find only) is not a key: it asks for the scan order,
//! which [`SortSpec::natural`] reports for the command to honour; it cannot be combined with
//! other keys. `{$meta: …}` keys are rejected with `NotImplemented` (Ebb has no text or search
//! scores), after mongod's checks of the `$meta` argument.
//!
//! Known gap: each key is computed independently, whereas mongod derives compound sort keys
//! from one index-key expansion (which only differs when several keys traverse the same array).

use std::cmp::Ordering;
use std::sync::Arc;

use bson::{RawArray, RawBsonRef, RawDocument};

use super::collation::Collation;
use super::compare::compare_collated;
use super::path::array_index;
use super::{check_field_path, display, invalid_bson, not_implemented};
use crate::error::{CommandError, ErrorCode};

/// A compiled sort specification.
#[derive(Debug, Clone, Default)]
pub struct SortSpec {
    keys: Vec<SortKeyPart>,
    /// `{$natural: 1}` or `{$natural: -1}`.
    natural: Option<i32>,
    /// The distinct first components of the key paths, fetched in one pass per document.
    fields: Vec<String>,
    /// The collation strings sort by (`None`: binary), see [`SortSpec::with_collation`].
    collation: Option<Arc<Collation>>,
}

#[derive(Debug, Clone)]
struct SortKeyPart {
    path: Vec<String>,
    /// Index of `path[0]` in `SortSpec::fields`.
    field: usize,
    ascending: bool,
}

fn location(code: i32, msg: impl Into<String>) -> CommandError {
    CommandError::new(ErrorCode::Location(code), msg)
}

impl SortSpec {
    /// Compiles a find sort document. An empty document is a valid "no sort".
    pub fn compile(spec: &RawDocument) -> Result<SortSpec, CommandError> {
        SortSpec::compile_inner(spec, false)
    }

    /// Compiles an aggregation `$sort` specification, where `$natural` is not a key (it fails
    /// mongod's `FieldPath` check).
    pub fn compile_for_pipeline(spec: &RawDocument) -> Result<SortSpec, CommandError> {
        SortSpec::compile_inner(spec, true)
    }

    fn compile_inner(spec: &RawDocument, pipeline: bool) -> Result<SortSpec, CommandError> {
        let mut keys: Vec<SortKeyPart> = Vec::new();
        let mut fields: Vec<String> = Vec::new();
        if !pipeline && let Some(natural) = natural_param(spec)? {
            return Ok(SortSpec {
                keys,
                natural: Some(natural),
                fields,
                collation: None,
            });
        }
        for item in spec {
            let (name, value) = item.map_err(|e| invalid_bson(&e))?;
            let name = name.as_str();
            let direction = match value {
                RawBsonRef::Document(d) => {
                    let mut it = d.iter();
                    let first = it.next().and_then(Result::ok);
                    let Some(("$meta", arg)) = first.map(|(k, v)| (k.as_str(), v)) else {
                        return Err(location(
                            17312,
                            "$meta is the only expression supported by $sort right now",
                        ));
                    };
                    if it.next().is_some() {
                        return Err(CommandError::new(
                            ErrorCode::FailedToParse,
                            "Cannot have additional keys in a $meta sort specification",
                        ));
                    }
                    let RawBsonRef::String(kind) = arg else {
                        return Err(location(17307, "$meta only supports string arguments"));
                    };
                    if !META_NAMES.contains(&kind) {
                        return Err(location(
                            17308,
                            format!("Unsupported argument to $meta: {kind}"),
                        ));
                    }
                    return Err(not_implemented("$meta sort keys"));
                }
                RawBsonRef::Int32(i) => i64::from(i),
                RawBsonRef::Int64(i) => i,
                #[expect(clippy::cast_possible_truncation, reason = "safeNumberLong truncates")]
                RawBsonRef::Double(d) => d as i64,
                #[expect(clippy::cast_possible_truncation, reason = "safeNumberLong truncates")]
                RawBsonRef::Decimal128(d) => super::compare::decimal_to_f64(d) as i64,
                other => {
                    return Err(location(
                        15974,
                        format!(
                            "Illegal key in $sort specification: {}",
                            display::element(name, other)
                        ),
                    ));
                }
            };
            if direction != 1 && direction != -1 {
                return Err(location(
                    15975,
                    "$sort key ordering must be 1 (for ascending) or -1 (for descending)",
                ));
            }
            check_field_path(name)?;
            let path: Vec<String> = name.split('.').map(str::to_owned).collect();
            if keys.iter().any(|k| k.path == path) {
                return Err(location(
                    7_472_500,
                    format!("$sort key must not contain duplicate keys (duplicate: '{name}')"),
                ));
            }
            let field = fields
                .iter()
                .position(|f| *f == path[0])
                .unwrap_or_else(|| {
                    fields.push(path[0].clone());
                    fields.len() - 1
                });
            keys.push(SortKeyPart {
                path,
                field,
                ascending: direction == 1,
            });
        }
        Ok(SortSpec {
            keys,
            natural: None,
            fields,
            collation: None,
        })
    }

    /// This specification with strings (also inside documents and arrays) ordered by
    /// `collation`; `None` keeps binary order.
    #[must_use]
    pub fn with_collation(mut self, collation: Option<Arc<Collation>>) -> SortSpec {
        self.collation = collation;
        self
    }

    /// `Some(1)` or `Some(-1)` for a `{$natural: ±1}` sort: the documents in scan (`_id`) order,
    /// forwards or backwards. Such a spec has no keys ([`SortSpec::is_empty`] is true), so a
    /// command that ignores this returns forward order.
    pub fn natural(&self) -> Option<i32> {
        self.natural
    }

    /// The keys as `(dotted path, ascending)`, for the query planner to match against index
    /// key patterns.
    pub fn plan_keys(&self) -> Vec<(String, bool)> {
        self.keys
            .iter()
            .map(|k| (k.path.join("."), k.ascending))
            .collect()
    }

    /// Whether strings sort by a collation (an index, in binary order, cannot give the order).
    pub fn is_collated(&self) -> bool {
        self.collation.is_some()
    }

    /// Whether there is nothing to sort by.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// The sort key of `doc`: one value per key part, borrowed from `doc`. Sorting many
    /// documents should compute keys once and compare them with [`SortSpec::compare_keys`].
    pub fn key<'a>(&self, doc: &'a RawDocument) -> Vec<RawBsonRef<'a>> {
        let coll = self.collation.as_deref();
        // One pass fetches every top-level field the keys read (first occurrence of each).
        let values = super::path::top_level_fields(doc, &self.fields);
        self.keys
            .iter()
            .map(|k| {
                let mut best: Option<RawBsonRef<'a>> = None;
                let first = values.get(k.field).copied().flatten();
                let mut consider = |v: RawBsonRef<'a>| {
                    let better = best.is_none_or(|b| {
                        let ord = compare_collated(v, b, coll);
                        if k.ascending {
                            ord.is_lt()
                        } else {
                            ord.is_gt()
                        }
                    });
                    if better {
                        best = Some(v);
                    }
                };
                match first {
                    Some(v) => key_values(v, &k.path[1..], &mut consider),
                    None => consider(RawBsonRef::Null),
                }
                best.unwrap_or(RawBsonRef::Null)
            })
            .collect()
    }

    /// Compares two keys produced by [`SortSpec::key`].
    pub fn compare_keys(&self, a: &[RawBsonRef<'_>], b: &[RawBsonRef<'_>]) -> Ordering {
        for ((k, x), y) in self.keys.iter().zip(a).zip(b) {
            let ord = compare_collated(*x, *y, self.collation.as_deref());
            let ord = if k.ascending { ord } else { ord.reverse() };
            if ord != Ordering::Equal {
                return ord;
            }
        }
        Ordering::Equal
    }

    /// Compares two documents by this specification.
    pub fn compare(&self, a: &RawDocument, b: &RawDocument) -> Ordering {
        self.compare_keys(&self.key(a), &self.key(b))
    }
}

/// The `$meta` arguments mongod 7.0 knows.
const META_NAMES: &[&str] = &[
    "textScore",
    "randVal",
    "searchScore",
    "searchHighlights",
    "geoNearDistance",
    "geoNearPoint",
    "recordId",
    "indexKey",
    "sortKey",
    "searchScoreDetails",
    "searchSortValues",
    "timeseriesBucketMinTime",
    "timeseriesBucketMaxTime",
    "vectorSearchScore",
];

/// mongod's `hasInvalidNaturalParam` for find: `$natural` must be alone and `1` or `-1`.
fn natural_param(spec: &RawDocument) -> Result<Option<i32>, CommandError> {
    let mut natural = None;
    let mut fields = 0;
    for item in spec {
        let (k, v) = item.map_err(|e| invalid_bson(&e))?;
        fields += 1;
        if k.as_str() == "$natural" && natural.is_none() {
            natural = Some(v);
        }
    }
    let Some(v) = natural else {
        return Ok(None);
    };
    #[expect(clippy::cast_possible_truncation, reason = "numberInt truncates")]
    let n = match v {
        RawBsonRef::Int32(i) => Some(i64::from(i)),
        RawBsonRef::Int64(i) => Some(i),
        RawBsonRef::Double(d) => Some(d as i64),
        RawBsonRef::Decimal128(d) => Some(super::compare::decimal_to_f64(d) as i64),
        _ => None,
    };
    match n {
        Some(n @ (1 | -1)) if fields == 1 => Ok(Some(if n == 1 { 1 } else { -1 })),
        _ => Err(CommandError::bad_value(
            "$natural sort cannot be set to a value other than -1 or 1.",
        )),
    }
}

/// Calls `f` with each sort-key candidate `path` yields under `v` (index-key semantics: arrays
/// anywhere expand, missing is null, an empty array at the end is undefined).
fn key_values<'a>(v: RawBsonRef<'a>, path: &[String], f: &mut dyn FnMut(RawBsonRef<'a>)) {
    let Some((part, rest)) = path.split_first() else {
        match v {
            RawBsonRef::Array(a) if a.is_empty() => f(RawBsonRef::Undefined),
            RawBsonRef::Array(a) => {
                for e in a.into_iter().map_while(Result::ok) {
                    f(e);
                }
            }
            other => f(other),
        }
        return;
    };
    match v {
        RawBsonRef::Document(d) => match d.get(part).ok().flatten() {
            Some(next) => key_values(next, rest, f),
            None => f(RawBsonRef::Null),
        },
        RawBsonRef::Array(a) => array_key_values(a, part, rest, f),
        _ => f(RawBsonRef::Null),
    }
}

fn array_key_values<'a>(
    a: &'a RawArray,
    part: &str,
    rest: &[String],
    f: &mut dyn FnMut(RawBsonRef<'a>),
) {
    // A numeric component selects that element (mongod's positional key path).
    if let Some(e) = array_index(part).and_then(|i| a.get(i).ok().flatten()) {
        return key_values(e, rest, f);
    }
    let mut any = false;
    for e in a.into_iter().map_while(Result::ok) {
        any = true;
        match e {
            RawBsonRef::Document(d) => match d.get(part).ok().flatten() {
                Some(next) => key_values(next, rest, f),
                None => f(RawBsonRef::Null),
            },
            _ => f(RawBsonRef::Null),
        }
    }
    if !any {
        f(RawBsonRef::Null);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::{RawDocumentBuf, rawdoc};

    fn sorted(spec: &RawDocumentBuf, docs: &[RawDocumentBuf]) -> Vec<i32> {
        let s = SortSpec::compile(spec).unwrap();
        let mut docs: Vec<&RawDocumentBuf> = docs.iter().collect();
        docs.sort_by(|a, b| s.compare(a, b));
        docs.iter().map(|d| d.get_i32("_id").unwrap()).collect()
    }

    #[test]
    fn collated_sort() {
        let docs = [
            rawdoc! {"_id": 1, "a": "b"},
            rawdoc! {"_id": 2, "a": "A"},
            rawdoc! {"_id": 3, "a": "a"},
            rawdoc! {"_id": 4, "a": "B"},
            rawdoc! {"_id": 5, "a": ["c", "Z"]},
            rawdoc! {"_id": 6, "a": {"x": "C"}},
            rawdoc! {"_id": 7, "a": "10"},
            rawdoc! {"_id": 8, "a": "9"},
        ];
        let order = |spec: RawDocumentBuf, coll: RawDocumentBuf| {
            let c = crate::query::Collation::parse(&coll).unwrap().map(Arc::new);
            let s = SortSpec::compile(&spec).unwrap().with_collation(c);
            let mut docs: Vec<&RawDocumentBuf> = docs.iter().collect();
            docs.sort_by(|a, b| s.compare(a, b));
            docs.iter()
                .map(|d| d.get_i32("_id").unwrap())
                .collect::<Vec<_>>()
        };
        // Binary: digits, then upper case, then lower case ([c, Z] sorts by "Z").
        assert_eq!(
            order(rawdoc! {"a": 1}, rawdoc! {"locale": "simple"}),
            vec![7, 8, 2, 4, 5, 3, 1, 6]
        );
        // Strength 2: case ties (stable order), "Z" is the largest of [c, Z] descending.
        assert_eq!(
            order(rawdoc! {"a": 1}, rawdoc! {"locale": "en", "strength": 2}),
            vec![7, 8, 2, 3, 1, 4, 5, 6]
        );
        assert_eq!(
            order(rawdoc! {"a": -1}, rawdoc! {"locale": "en", "strength": 2}),
            vec![6, 5, 1, 4, 2, 3, 8, 7]
        );
        // Tertiary, upper case first; numeric ordering puts "9" before "10".
        assert_eq!(
            order(
                rawdoc! {"a": 1},
                rawdoc! {"locale": "en", "caseFirst": "upper", "numericOrdering": true}
            ),
            vec![8, 7, 2, 3, 4, 1, 5, 6]
        );
    }

    #[test]
    fn sort_table() {
        let docs = vec![
            rawdoc! {"_id": 1, "a": 3},
            rawdoc! {"_id": 2, "a": "x"},
            rawdoc! {"_id": 3},
            rawdoc! {"_id": 4, "a": [5, 0]},
            rawdoc! {"_id": 5, "a": []},
            rawdoc! {"_id": 6, "a": null},
            rawdoc! {"_id": 7, "a": 2.5},
        ];
        // Stable sort: equal keys keep input order (3 missing == 6 null).
        assert_eq!(sorted(&rawdoc! {"a": 1}, &docs), vec![5, 3, 6, 4, 7, 1, 2]);
        assert_eq!(sorted(&rawdoc! {"a": -1}, &docs), vec![2, 4, 1, 7, 3, 6, 5]);
        assert_eq!(sorted(&rawdoc! {}, &docs), vec![1, 2, 3, 4, 5, 6, 7]);

        let docs = vec![
            rawdoc! {"_id": 1, "a": {"b": 2}, "c": 1},
            rawdoc! {"_id": 2, "a": [{"b": 9}, {"b": 1}], "c": 1},
            rawdoc! {"_id": 3, "a": {"b": 2}, "c": 0},
            rawdoc! {"_id": 4, "a": [{"x": 1}, {"b": 5}], "c": 0},
        ];
        assert_eq!(sorted(&rawdoc! {"a.b": 1, "c": 1}, &docs), vec![4, 2, 3, 1]);
        assert_eq!(
            sorted(&rawdoc! {"a.b": -1, "c": -1}, &docs),
            vec![2, 4, 1, 3]
        );
        assert_eq!(
            sorted(&rawdoc! {"c": 1.0, "_id": -1}, &docs),
            vec![4, 3, 2, 1]
        );
        assert_eq!(sorted(&rawdoc! {"a.1.b": 1}, &docs), vec![1, 3, 2, 4]);
    }

    #[test]
    fn compile_errors() {
        let cases: Vec<(RawDocumentBuf, ErrorCode, &str)> = vec![
            (
                rawdoc! {"a": 2},
                ErrorCode::Location(15975),
                "$sort key ordering must be 1 (for ascending) or -1 (for descending)",
            ),
            (
                rawdoc! {"a": 0},
                ErrorCode::Location(15975),
                "$sort key ordering must be 1 (for ascending) or -1 (for descending)",
            ),
            (
                rawdoc! {"a": "x"},
                ErrorCode::Location(15974),
                "Illegal key in $sort specification: a: \"x\"",
            ),
            (
                rawdoc! {"a": {"b": 1}},
                ErrorCode::Location(17312),
                "$meta is the only expression supported by $sort right now",
            ),
            (
                rawdoc! {"a": 1, "a": -1},
                ErrorCode::Location(7_472_500),
                "$sort key must not contain duplicate keys (duplicate: 'a')",
            ),
            (
                rawdoc! {"$a": 1},
                ErrorCode::Location(16410),
                "FieldPath field names may not start with '$'. Consider using $getField or $setField.",
            ),
            (
                rawdoc! {"a": {"$meta": "textScore"}},
                ErrorCode::NotImplemented,
                "$meta sort keys is not supported by Ebb yet",
            ),
        ];
        for (spec, code, msg) in cases {
            let err = SortSpec::compile(&spec).unwrap_err();
            assert_eq!((err.code, err.errmsg.as_str()), (code, msg), "{spec:?}");
        }
        assert!(SortSpec::compile(&rawdoc! {"a": 1.5}).is_ok());
        assert!(SortSpec::compile(&rawdoc! {}).unwrap().is_empty());
    }

    #[test]
    fn natural_and_meta() {
        let n = |spec: RawDocumentBuf| SortSpec::compile(&spec).map(|s| s.natural());
        assert_eq!(n(rawdoc! {"$natural": 1}).unwrap(), Some(1));
        assert_eq!(n(rawdoc! {"$natural": -1_i64}).unwrap(), Some(-1));
        assert_eq!(n(rawdoc! {"$natural": -1.0}).unwrap(), Some(-1));
        assert_eq!(n(rawdoc! {"a": 1}).unwrap(), None);
        assert!(
            SortSpec::compile(&rawdoc! {"$natural": 1})
                .unwrap()
                .is_empty()
        );
        for bad in [
            rawdoc! {"$natural": 2},
            rawdoc! {"$natural": "x"},
            rawdoc! {"$natural": 1, "a": 1},
            rawdoc! {"a": 1, "$natural": -1},
        ] {
            let err = SortSpec::compile(&bad).unwrap_err();
            assert_eq!(
                (err.code, err.errmsg.as_str()),
                (
                    ErrorCode::BadValue,
                    "$natural sort cannot be set to a value other than -1 or 1."
                ),
                "{bad:?}"
            );
        }
        let err = SortSpec::compile_for_pipeline(&rawdoc! {"$natural": 1}).unwrap_err();
        assert_eq!(err.code, ErrorCode::Location(16410));
        let cases: Vec<(RawDocumentBuf, ErrorCode, &str)> = vec![
            (
                rawdoc! {"a": {"$meta": "textScore", "b": 1}},
                ErrorCode::FailedToParse,
                "Cannot have additional keys in a $meta sort specification",
            ),
            (
                rawdoc! {"a": {"$meta": 1}},
                ErrorCode::Location(17307),
                "$meta only supports string arguments",
            ),
            (
                rawdoc! {"a": {"$meta": "foo"}},
                ErrorCode::Location(17308),
                "Unsupported argument to $meta: foo",
            ),
            (
                rawdoc! {"a": {"$meta": "randVal"}},
                ErrorCode::NotImplemented,
                "$meta sort keys is not supported by Ebb yet",
            ),
        ];
        for (spec, code, msg) in cases {
            let err = SortSpec::compile(&spec).unwrap_err();
            assert_eq!((err.code, err.errmsg.as_str()), (code, msg), "{spec:?}");
        }
    }

    #[test]
    fn mixed_types_and_arrays() {
        let docs = vec![
            rawdoc! {"_id": 1, "a": true},
            rawdoc! {"_id": 2, "a": "b"},
            rawdoc! {"_id": 3, "a": {"x": 1}},
            rawdoc! {"_id": 4, "a": 2_i64},
            rawdoc! {"_id": 5, "a": bson::RawBson::MinKey},
            rawdoc! {"_id": 6, "a": [3, "z"]},
            rawdoc! {"_id": 7, "a": 1.5},
            rawdoc! {"_id": 8, "a": [[0]]},
        ];
        // [[0]] sorts by its element [0] (an array, above documents); [3, "z"] by 3 ascending
        // and by "z" descending.
        assert_eq!(
            sorted(&rawdoc! {"a": 1}, &docs),
            vec![5, 7, 4, 6, 2, 3, 8, 1]
        );
        assert_eq!(
            sorted(&rawdoc! {"a": -1}, &docs),
            vec![1, 8, 3, 6, 2, 4, 7, 5]
        );
        let docs = vec![
            rawdoc! {"_id": 1, "a": 1, "b": 2},
            rawdoc! {"_id": 2, "a": 1, "b": 1},
            rawdoc! {"_id": 3, "a": 0, "b": 3},
        ];
        assert_eq!(sorted(&rawdoc! {"a": -1, "b": 1}, &docs), vec![2, 1, 3]);
    }
}
