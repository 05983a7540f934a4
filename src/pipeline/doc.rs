//! Field paths in documents as aggregation stages see them (mongod's `Document` navigation):
//! a path descends through embedded documents only, never into arrays.

use bson::raw::CStr;
use bson::{RawBson, RawBsonRef, RawDocument, RawDocumentBuf};

/// The value at `path` (through embedded documents only).
pub fn get<'a, S: AsRef<str>>(doc: &'a RawDocument, path: &[S]) -> Option<RawBsonRef<'a>> {
    let (first, rest) = path.split_first()?;
    let v = doc.get(first.as_ref()).ok().flatten()?;
    if rest.is_empty() {
        return Some(v);
    }
    match v {
        RawBsonRef::Document(d) => get(d, rest),
        _ => None,
    }
}

/// `doc` with the value at `path` replaced by `value` (removed when `None`), in place when the
/// field exists, appended otherwise; missing or non-document parents become documents.
pub fn set<S: AsRef<str>>(doc: &RawDocument, path: &[S], value: Option<RawBson>) -> RawDocumentBuf {
    let Some((first, rest)) = path.split_first() else {
        return doc.to_owned();
    };
    let first = first.as_ref();
    let mut out = RawDocumentBuf::new();
    let mut value = Some(value);
    for (k, v) in doc.iter().map_while(Result::ok) {
        if k.as_str() != first {
            out.append(k, RawBson::from(v));
            continue;
        }
        let Some(value) = value.take() else {
            // A repeated name: keep only the first.
            continue;
        };
        let new = if rest.is_empty() {
            value
        } else {
            let empty = RawDocumentBuf::new();
            let child = match v {
                RawBsonRef::Document(d) => d,
                _ => &empty,
            };
            Some(RawBson::Document(set(child, rest, value)))
        };
        if let Some(new) = new {
            out.append(k, new);
        }
    }
    if let Some(value) = value
        && let Ok(key) = <&CStr>::try_from(first)
    {
        let new = if rest.is_empty() {
            value
        } else {
            value.map(|v| RawBson::Document(set(&RawDocumentBuf::new(), rest, Some(v))))
        };
        if let Some(new) = new {
            out.append(key, new);
        }
    }
    out
}

/// The values of `path` in `doc` as a query reads them (`$lookup`'s `localField`,
/// `$graphLookup`'s `connectFromField`): through arrays of documents, and each element of an
/// array at the end.
pub fn query_values(doc: &RawDocument, path: &[String], out: &mut Vec<RawBson>) {
    let Some((first, rest)) = path.split_first() else {
        return;
    };
    let Ok(Some(v)) = doc.get(first) else {
        return;
    };
    match (v, rest.is_empty()) {
        (RawBsonRef::Array(a), true) => {
            out.extend(a.into_iter().map_while(Result::ok).map(RawBson::from));
        }
        (v, true) => out.push(v.into()),
        (RawBsonRef::Document(d), false) => query_values(d, rest, out),
        (RawBsonRef::Array(a), false) => {
            for e in a.into_iter().map_while(Result::ok) {
                if let RawBsonRef::Document(d) = e {
                    query_values(d, rest, out);
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use bson::rawdoc;

    use super::*;

    #[test]
    fn get_and_set_paths() {
        let d = rawdoc! {"a": {"b": 1, "c": 2}, "x": [ {"b": 1} ]};
        assert_eq!(get(&d, &["a", "b"]), Some(RawBsonRef::Int32(1)));
        assert_eq!(get(&d, &["x", "b"]), None);
        assert_eq!(
            set(&d, &["a", "b"], Some(RawBson::Int32(5))),
            rawdoc! {"a": {"b": 5, "c": 2}, "x": [ {"b": 1} ]}
        );
        assert_eq!(
            set(&d, &["a", "b"], None),
            rawdoc! {"a": {"c": 2}, "x": [ {"b": 1} ]}
        );
        assert_eq!(
            set(&d, &["n", "m"], Some(RawBson::Int32(1))),
            rawdoc! {"a": {"b": 1, "c": 2}, "x": [ {"b": 1} ], "n": {"m": 1}}
        );
    }
}
