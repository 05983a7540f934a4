//! `arrayFilters`: one query per identifier, matched against array elements for `$[<id>]`.
//!
//! As in mongod (`ExpressionWithPlaceholder`), each filter's paths must all start with one
//! top-level name, the identifier: `{x: {$gt: 5}}`, `{"x.a": 1, "x.b": 2}`,
//! `{$or: [{"x.a": 1}, {"x.b": 2}]}`. An element matches when `{<id>: element}` matches the
//! filter, so `x.a` looks inside document elements and array elements are traversed as usual.

use bson::{RawArray, RawBsonRef, RawDocument, RawDocumentBuf};

use crate::error::{CommandError, ErrorCode};
use crate::query::display::type_name;
use crate::query::filter::Filter;
use crate::query::invalid_bson;

/// Parsed array filters, sorted by identifier.
#[derive(Debug, Clone, Default)]
pub(super) struct ArrayFilters {
    filters: Vec<(String, Filter)>,
}

#[expect(clippy::needless_pass_by_value, reason = "used with map_err")]
fn context(e: CommandError) -> CommandError {
    CommandError::new(
        e.code,
        format!("Error parsing array filter :: caused by :: {}", e.errmsg),
    )
}

impl ArrayFilters {
    /// Parses the `arrayFilters` option (mongod's `parseArrayFilters`).
    pub(super) fn parse(array: &RawArray) -> Result<ArrayFilters, CommandError> {
        let mut filters: Vec<(String, Filter)> = Vec::new();
        for (i, item) in array.into_iter().enumerate() {
            let value = item.map_err(|e| invalid_bson(&e))?;
            let RawBsonRef::Document(spec) = value else {
                return Err(CommandError::type_mismatch(format!(
                    "BSON field 'arrayFilters.{i}' is the wrong type '{}', expected type 'object'",
                    type_name(value.element_type())
                )));
            };
            let filter = Filter::compile(spec).map_err(context)?;
            let Some(identifier) = placeholder(spec).map_err(context)? else {
                return Err(CommandError::new(
                    ErrorCode::FailedToParse,
                    "Cannot use an expression without a top-level field name in arrayFilters",
                ));
            };
            match filters.binary_search_by(|(k, _)| k.as_str().cmp(&identifier)) {
                Ok(_) => {
                    return Err(CommandError::new(
                        ErrorCode::FailedToParse,
                        format!(
                            "Found multiple array filters with the same top-level field name \
                             {identifier}"
                        ),
                    ));
                }
                Err(pos) => filters.insert(pos, (identifier, filter)),
            }
        }
        Ok(ArrayFilters { filters })
    }

    /// The filters with strings compared by `c` (the statement's collation).
    pub(super) fn collate(&mut self, c: &std::sync::Arc<crate::query::collation::Collation>) {
        for (_, f) in &mut self.filters {
            *f = std::mem::replace(f, Filter::match_all()).with_collation(Some(c.clone()));
        }
    }

    pub(super) fn contains(&self, identifier: &str) -> bool {
        self.get(identifier).is_some()
    }

    /// The identifiers, in sorted order.
    pub(super) fn identifiers(&self) -> impl Iterator<Item = &str> {
        self.filters.iter().map(|(k, _)| k.as_str())
    }

    fn get(&self, identifier: &str) -> Option<&Filter> {
        self.filters
            .binary_search_by(|(k, _)| k.as_str().cmp(identifier))
            .ok()
            .map(|i| &self.filters[i].1)
    }

    /// Whether `element` satisfies the filter for `identifier` (false if there is none).
    pub(super) fn matches(&self, identifier: &str, element: RawBsonRef<'_>) -> bool {
        let Some(filter) = self.get(identifier) else {
            return false;
        };
        let mut doc = RawDocumentBuf::new();
        match bson::raw::CString::try_from(identifier) {
            Ok(name) => doc.append(name, element),
            Err(_) => return false,
        }
        filter.matches(&doc)
    }
}

/// The identifier a filter's paths share (mongod's `parseTopLevelFieldName`): `None` when no
/// path names one (`{}`, `{$expr: …}`).
fn placeholder(spec: &RawDocument) -> Result<Option<String>, CommandError> {
    let mut found: Option<String> = None;
    collect(spec, &mut found)?;
    if let Some(name) = &found {
        let mut bytes = name.bytes();
        let valid = bytes.next().is_some_and(|b| b.is_ascii_lowercase())
            && bytes.all(|b| b.is_ascii_alphanumeric());
        if !valid {
            return Err(CommandError::bad_value(format!(
                "The top-level field name must be an alphanumeric string beginning with a \
                 lowercase letter, found '{name}'"
            )));
        }
    }
    Ok(found)
}

fn collect(spec: &RawDocument, found: &mut Option<String>) -> Result<(), CommandError> {
    for item in spec {
        let (key, value) = item.map_err(|e| invalid_bson(&e))?;
        let key = key.as_str();
        let name = match key {
            "$and" | "$or" | "$nor" => {
                if let RawBsonRef::Array(children) = value {
                    for child in children {
                        if let RawBsonRef::Document(d) = child.map_err(|e| invalid_bson(&e))? {
                            collect(d, found)?;
                        }
                    }
                }
                continue;
            }
            _ if key.starts_with('$') || key.is_empty() => continue,
            _ => key.split('.').next().unwrap_or(key),
        };
        match found {
            None => *found = Some(name.to_owned()),
            Some(existing) if existing == name => {}
            Some(existing) => {
                return Err(CommandError::new(
                    ErrorCode::FailedToParse,
                    format!(
                        "Expected a single top-level field name, found '{existing}' and '{name}'"
                    ),
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::{rawbson, rawdoc};

    fn parse(filters: &bson::RawArrayBuf) -> Result<ArrayFilters, CommandError> {
        ArrayFilters::parse(filters)
    }

    fn arr(v: bson::RawBson) -> bson::RawArrayBuf {
        match v {
            bson::RawBson::Array(a) => a,
            other => panic!("not an array: {other:?}"),
        }
    }

    #[test]
    fn parse_errors() {
        let cases: Vec<(bson::RawArrayBuf, ErrorCode, &str)> = vec![
            (
                arr(rawbson!([{"i": 0, "j": 0}])),
                ErrorCode::FailedToParse,
                "Error parsing array filter :: caused by :: Expected a single top-level field \
                 name, found 'i' and 'j'",
            ),
            (
                arr(rawbson!([{"i": 0}, {"j": 0}, {"i": 1}])),
                ErrorCode::FailedToParse,
                "Found multiple array filters with the same top-level field name i",
            ),
            (
                arr(rawbson!([{}])),
                ErrorCode::FailedToParse,
                "Cannot use an expression without a top-level field name in arrayFilters",
            ),
            (
                arr(rawbson!([{"X": 1}])),
                ErrorCode::BadValue,
                "Error parsing array filter :: caused by :: The top-level field name must be an \
                 alphanumeric string beginning with a lowercase letter, found 'X'",
            ),
            (
                arr(rawbson!([{"$or": [{"a.x": 1}, {"b.x": 2}]}])),
                ErrorCode::FailedToParse,
                "Error parsing array filter :: caused by :: Expected a single top-level field \
                 name, found 'a' and 'b'",
            ),
            (
                arr(rawbson!([{"i": {"$foo": 1}}])),
                ErrorCode::BadValue,
                "Error parsing array filter :: caused by :: unknown operator: $foo",
            ),
            (
                arr(rawbson!(["bad"])),
                ErrorCode::TypeMismatch,
                "BSON field 'arrayFilters.0' is the wrong type 'string', expected type 'object'",
            ),
        ];
        for (filters, code, msg) in cases {
            let err = parse(&filters).unwrap_err();
            assert_eq!((err.code, err.errmsg.as_str()), (code, msg), "{filters:?}");
        }
    }

    #[test]
    fn matching() -> Result<(), CommandError> {
        let f = parse(&arr(rawbson!([
            {"x": {"$gte": 2}},
            {"e.a": 1, "e.b": {"$exists": true}},
            {"$or": [{"o": 1}, {"o": 3}]}
        ])))?;
        assert_eq!(f.identifiers().collect::<Vec<_>>(), vec!["e", "o", "x"]);
        assert!(f.matches("x", RawBsonRef::Int32(2)));
        assert!(!f.matches("x", RawBsonRef::Int32(1)));
        assert!(f.matches("x", rawbson!([0, 5]).as_raw_bson_ref()));
        let d = rawdoc! {"a": 1, "b": null};
        assert!(f.matches("e", RawBsonRef::Document(&d)));
        let d = rawdoc! {"a": 1};
        assert!(!f.matches("e", RawBsonRef::Document(&d)));
        assert!(f.matches("o", RawBsonRef::Int32(3)));
        assert!(!f.matches("o", RawBsonRef::Int32(2)));
        assert!(!f.matches("zz", RawBsonRef::Int32(2)));
        Ok(())
    }
}
