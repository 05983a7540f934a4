//! `$unwind`: one document per element of an array field (mongod's `Unwinder`).

use bson::{RawBson, RawBsonRef};

use crate::error::{CommandError, CommandResult, ErrorCode};
use crate::pipeline::doc::{get, set};
use crate::pipeline::{Context, Doc, Stage, Stream};
use crate::query::display::type_name;

/// `$unwind: "$path"` or `{path, includeArrayIndex?, preserveNullAndEmptyArrays?}`.
pub struct Unwind {
    path: Vec<String>,
    index: Option<Vec<String>>,
    preserve: bool,
}

fn loc(code: i32, msg: impl Into<String>) -> CommandError {
    CommandError::new(ErrorCode::Location(code), msg)
}

impl Unwind {
    pub(super) fn parse(arg: RawBsonRef<'_>) -> CommandResult<Unwind> {
        let mut path = String::new();
        let mut index = None;
        let mut preserve = false;
        match arg {
            RawBsonRef::String(s) => s.clone_into(&mut path),
            RawBsonRef::Document(spec) => {
                for item in spec {
                    let (k, v) =
                        item.map_err(|e| CommandError::new(ErrorCode::InvalidBSON, e.to_string()))?;
                    match (k.as_str(), v) {
                        ("path", RawBsonRef::String(s)) => s.clone_into(&mut path),
                        ("path", other) => {
                            return Err(loc(
                                28808,
                                format!(
                                    "expected a string as the path for $unwind stage, got {}",
                                    type_name(other.element_type())
                                ),
                            ));
                        }
                        ("preserveNullAndEmptyArrays", RawBsonRef::Boolean(b)) => preserve = b,
                        ("preserveNullAndEmptyArrays", other) => {
                            return Err(loc(
                                28809,
                                format!(
                                    "expected a boolean for the preserveNullAndEmptyArrays option \
                                     to $unwind stage, got {}",
                                    type_name(other.element_type())
                                ),
                            ));
                        }
                        ("includeArrayIndex", RawBsonRef::String(s)) if !s.is_empty() => {
                            if s.starts_with('$') {
                                return Err(loc(
                                    28822,
                                    format!(
                                        "includeArrayIndex option to $unwind stage should not be \
                                         prefixed with a '$': {s}"
                                    ),
                                ));
                            }
                            index = Some(field_path(s)?);
                        }
                        ("includeArrayIndex", other) => {
                            // mongod's message, doubled space included.
                            return Err(loc(
                                28810,
                                format!(
                                    "expected a non-empty string for the includeArrayIndex  \
                                     option to $unwind stage, got {}",
                                    type_name(other.element_type())
                                ),
                            ));
                        }
                        (other, _) => {
                            return Err(loc(
                                28811,
                                format!("unrecognized option to $unwind stage: {other}"),
                            ));
                        }
                    }
                }
            }
            other => {
                return Err(loc(
                    15981,
                    format!(
                        "expected either a string or an object as specification for $unwind \
                         stage, got {}",
                        type_name(other.element_type())
                    ),
                ));
            }
        }
        if path.is_empty() {
            return Err(loc(28812, "no path specified to $unwind stage"));
        }
        let Some(stripped) = path.strip_prefix('$') else {
            return Err(loc(
                28818,
                format!("path option to $unwind stage should be prefixed with a '$': {path}"),
            ));
        };
        Ok(Unwind {
            path: field_path(stripped)?,
            index,
            preserve,
        })
    }

    /// The documents `doc` unwinds to.
    fn unwind(&self, (doc, expires): Doc) -> Vec<Doc> {
        let index_null = |d: bson::RawDocumentBuf| match &self.index {
            Some(ix) => set(&d, ix, Some(RawBson::Null)),
            None => d,
        };
        match get(&doc, &self.path) {
            Some(RawBsonRef::Array(items)) => {
                let mut out = Vec::new();
                for (i, item) in items.into_iter().map_while(Result::ok).enumerate() {
                    let mut d = set(&doc, &self.path, Some(RawBson::from(item)));
                    if let Some(ix) = &self.index {
                        d = set(
                            &d,
                            ix,
                            Some(RawBson::Int64(i64::try_from(i).unwrap_or(i64::MAX))),
                        );
                    }
                    out.push((d, expires));
                }
                if out.is_empty() && self.preserve {
                    out.push((index_null(set(&doc, &self.path, None)), expires));
                }
                out
            }
            None | Some(RawBsonRef::Null | RawBsonRef::Undefined) => {
                if self.preserve {
                    vec![(index_null(doc), expires)]
                } else {
                    Vec::new()
                }
            }
            Some(_) => vec![(index_null(doc), expires)],
        }
    }
}

/// The most components a field path may have.
const MAX_PATH_PARTS: usize = 200;

/// A field path's components, with mongod's checks on each.
pub(crate) fn field_path(path: &str) -> CommandResult<Vec<String>> {
    if path.is_empty() {
        return Err(loc(
            40352,
            "FieldPath cannot be constructed with empty string",
        ));
    }
    if path.ends_with('.') {
        return Err(loc(40353, "FieldPath must not end with a '.'."));
    }
    // mongod's bound (`BSONDepth::getMaxAllowableDepth`), which also bounds the recursion of
    // reading and writing such a path.
    if path.split('.').count() > MAX_PATH_PARTS {
        return Err(CommandError::new(
            ErrorCode::Overflow,
            "FieldPath is too long",
        ));
    }
    path.split('.')
        .map(|part| {
            if part.is_empty() {
                Err(loc(
                    15998,
                    "FieldPath field names may not be empty strings.",
                ))
            } else if part.starts_with('$') {
                Err(loc(
                    16410,
                    "FieldPath field names may not start with '$'. Consider using $getField or \
                     $setField.",
                ))
            } else {
                Ok(part.to_owned())
            }
        })
        .collect()
}

impl Stage for Unwind {
    fn run<'a>(&'a self, input: Stream<'a>, _ctx: &'a Context) -> Stream<'a> {
        Box::new(input.flat_map(move |r| -> Vec<CommandResult<Doc>> {
            match r {
                Ok(doc) => self.unwind(doc).into_iter().map(Ok).collect(),
                Err(e) => vec![Err(e)],
            }
        }))
    }
}

#[cfg(test)]
mod tests {
    use bson::{doc, rawdoc};

    use super::*;
    use crate::pipeline::computed;

    fn run(
        spec: bson::Bson,
        docs: Vec<bson::RawDocumentBuf>,
    ) -> CommandResult<Vec<bson::Document>> {
        let spec =
            bson::RawBson::try_from(spec).map_err(|e| CommandError::internal(e.to_string()))?;
        let stage = Unwind::parse(spec.as_raw_bson_ref())?;
        Ok(docs
            .into_iter()
            .flat_map(|d| stage.unwind(computed(d)))
            .map(|(d, _)| d.try_into().map(|d: bson::Document| d).unwrap())
            .collect())
    }

    fn inventory() -> Vec<bson::RawDocumentBuf> {
        vec![
            rawdoc! {"_id": 1, "item": "ABC", "price": 0, "sizes": ["S", "M", "L"]},
            rawdoc! {"_id": 2, "item": "EFG", "price": 1, "sizes": []},
            rawdoc! {"_id": 3, "item": "IJK", "price": 2, "sizes": "M"},
            rawdoc! {"_id": 4, "item": "LMN", "price": 3},
            rawdoc! {"_id": 5, "item": "XYZ", "price": 4, "sizes": null},
        ]
    }

    #[test]
    fn string_form_skips_empty_null_and_missing() {
        let out = run("$sizes".into(), inventory()).unwrap();
        assert_eq!(
            out,
            vec![
                doc! {"_id": 1, "item": "ABC", "price": 0, "sizes": "S"},
                doc! {"_id": 1, "item": "ABC", "price": 0, "sizes": "M"},
                doc! {"_id": 1, "item": "ABC", "price": 0, "sizes": "L"},
                doc! {"_id": 3, "item": "IJK", "price": 2, "sizes": "M"},
            ]
        );
    }

    #[test]
    fn preserve_and_index() {
        let out = run(
            doc! {"path": "$sizes", "preserveNullAndEmptyArrays": true, "includeArrayIndex": "arrayIndex"}
                .into(),
            inventory(),
        )
        .unwrap();
        assert_eq!(
            out,
            vec![
                doc! {"_id": 1, "item": "ABC", "price": 0, "sizes": "S", "arrayIndex": 0_i64},
                doc! {"_id": 1, "item": "ABC", "price": 0, "sizes": "M", "arrayIndex": 1_i64},
                doc! {"_id": 1, "item": "ABC", "price": 0, "sizes": "L", "arrayIndex": 2_i64},
                doc! {"_id": 2, "item": "EFG", "price": 1, "arrayIndex": null},
                doc! {"_id": 3, "item": "IJK", "price": 2, "sizes": "M", "arrayIndex": null},
                doc! {"_id": 4, "item": "LMN", "price": 3, "arrayIndex": null},
                doc! {"_id": 5, "item": "XYZ", "price": 4, "sizes": null, "arrayIndex": null},
            ]
        );
    }

    #[test]
    fn nested_path() {
        let out = run("$a.b".into(), vec![rawdoc! {"a": {"b": [1, 2], "c": 0}}]).unwrap();
        assert_eq!(
            out,
            vec![doc! {"a": {"b": 1, "c": 0}}, doc! {"a": {"b": 2, "c": 0}}]
        );
    }

    #[test]
    fn errors() {
        let code = |spec: bson::Bson| run(spec, Vec::new()).unwrap_err().code.code();
        assert_eq!(code(1.into()), 15981);
        assert_eq!(code("sizes".into()), 28818);
        assert_eq!(code("".into()), 28812);
        assert_eq!(code(doc! {}.into()), 28812);
        assert_eq!(code(doc! {"path": 1}.into()), 28808);
        assert_eq!(
            code(doc! {"path": "$a", "preserveNullAndEmptyArrays": 1}.into()),
            28809
        );
        assert_eq!(
            code(doc! {"path": "$a", "includeArrayIndex": ""}.into()),
            28810
        );
        assert_eq!(
            code(doc! {"path": "$a", "includeArrayIndex": "$i"}.into()),
            28822
        );
        assert_eq!(code(doc! {"path": "$a", "foo": 1}.into()), 28811);
        let deep = format!("${}", vec!["a"; 201].join("."));
        assert_eq!(code(deep.into()), 15);
        let deep_index = vec!["i"; 5000].join(".");
        assert_eq!(
            code(doc! {"path": "$a", "includeArrayIndex": deep_index}.into()),
            15
        );
    }
}
