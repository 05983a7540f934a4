//! `$facet`: runs several sub-pipelines over the same input, answering one document with each
//! sub-pipeline's results as an array.

use std::sync::Arc;

use bson::raw::CStr;
use bson::{RawArrayBuf, RawBsonRef, RawDocumentBuf};

use super::{parse_stage, stage_name_arg};
use crate::error::{CommandError, CommandResult, ErrorCode};
use crate::pipeline::{Context, Doc, Stage, Stages, Stream, blocking, computed, run_stream};
use crate::query::display::{self, type_name};
use crate::query::{Collation, Variables};

/// `$facet: {<name>: [<stage>, …], …}`.
pub struct Facet(Vec<(String, Stages)>);

/// mongod's `internalQueryFacetMaxOutputDocSizeBytes`: what the facets' results may add up to.
const MAX_DOC_BYTES: usize = 100 * 1024 * 1024;

/// The largest document mongod hands on (16 MiB and the 16 KiB it allows for overhead).
const MAX_BSON_BYTES: usize = 16 * 1024 * 1024 + 16 * 1024;

/// Stages mongod refuses inside a `$facet` (40600).
const NOT_IN_FACET: &[&str] = &[
    "$out",
    "$merge",
    "$facet",
    "$collStats",
    "$indexStats",
    "$geoNear",
    "$changeStream",
    "$changeStreamSplitLargeEvent",
    "$search",
    "$searchMeta",
    "$vectorSearch",
    "$documents",
    "$listLocalSessions",
    "$listSessions",
    "$currentOp",
    "$planCacheStats",
    "$listSearchIndexes",
];

fn loc(code: i32, msg: impl Into<String>) -> CommandError {
    CommandError::new(ErrorCode::Location(code), msg)
}

fn invalid_bson(e: &bson::error::Error) -> CommandError {
    CommandError::new(ErrorCode::InvalidBSON, e.to_string())
}

/// mongod's `FieldPath::validateFieldName` for a facet's name.
fn check_name(name: &str) -> CommandResult<()> {
    let problem = if name.is_empty() {
        Some((15998, "FieldPath field names may not be empty strings."))
    } else if name.starts_with('$') {
        Some((
            16410,
            "FieldPath field names may not start with '$'. Consider using $getField or $setField.",
        ))
    } else if name.contains('.') {
        Some((
            16412,
            "FieldPath field names may not contain '.'. Consider using $getField or $setField.",
        ))
    } else {
        None
    };
    match problem {
        Some((code, msg)) => Err(loc(
            code,
            format!(
                "$facet pipeline names must follow the naming rules of field path expressions. \
                 :: caused by :: {msg}"
            ),
        )),
        None => Ok(()),
    }
}

impl Facet {
    pub(super) fn parse(arg: RawBsonRef<'_>, vars: &Arc<Variables>) -> CommandResult<Facet> {
        let spec = match arg {
            RawBsonRef::Document(d) if !d.is_empty() => d,
            other => {
                return Err(loc(
                    40169,
                    format!(
                        "the $facet specification must be a non-empty object, but found: $facet: {}",
                        display::value(other)
                    ),
                ));
            }
        };
        // mongod reads every facet's shape first, then parses each.
        let mut raw = Vec::new();
        for item in spec {
            let (name, v) = item.map_err(|e| invalid_bson(&e))?;
            let name = name.as_str();
            check_name(name)?;
            let RawBsonRef::Array(stages) = v else {
                return Err(loc(
                    40170,
                    format!(
                        "arguments to $facet must be arrays, {name} is type {}",
                        type_name(v.element_type())
                    ),
                ));
            };
            let mut docs = Vec::new();
            for s in stages {
                let s = s.map_err(|e| invalid_bson(&e))?;
                let RawBsonRef::Document(d) = s else {
                    return Err(loc(
                        40171,
                        format!(
                            "elements of arrays in $facet spec must be non-empty objects, {name} \
                             argument contained an element of type {}: {}",
                            type_name(s.element_type()),
                            display::value(s)
                        ),
                    ));
                };
                docs.push(d);
            }
            raw.push((name.to_owned(), docs));
        }
        let mut facets = Vec::new();
        for (name, docs) in raw {
            super::check_length(docs.len())?;
            let mut stages: Stages = Vec::new();
            let mut refused = None;
            for d in docs {
                let (stage, _) = stage_name_arg(d)?;
                if NOT_IN_FACET.contains(&stage) {
                    refused.get_or_insert_with(|| stage.to_owned());
                    continue;
                }
                stages.push(parse_stage(d, vars)?);
            }
            if let Some(stage) = refused {
                return Err(loc(
                    40600,
                    format!("{stage} is not allowed to be used within a $facet stage"),
                ));
            }
            if stages.is_empty() {
                return Err(CommandError::bad_value(
                    "sub-pipeline in $facet stage cannot be empty",
                ));
            }
            facets.push((name, super::coalesce(stages)));
        }
        Ok(Facet(facets))
    }

    fn facet(&self, input: &[Doc], ctx: &Context) -> CommandResult<RawDocumentBuf> {
        let mut out = RawDocumentBuf::new();
        for (name, stages) in &self.0 {
            let docs: Stream<'_> = Box::new(input.iter().cloned().map(Ok));
            let mut results = RawArrayBuf::new();
            for item in run_stream(stages, docs, ctx) {
                let (d, _) = item?;
                results.push(d);
                if results
                    .as_bytes()
                    .len()
                    .saturating_add(out.as_bytes().len())
                    > MAX_DOC_BYTES
                {
                    return Err(crate::pipeline::aggregation_error(loc(
                        4_031_700,
                        format!(
                            "document constructed by $facet is {} bytes, which exceeds the limit \
                             of {MAX_DOC_BYTES} bytes",
                            results
                                .as_bytes()
                                .len()
                                .saturating_add(out.as_bytes().len())
                        ),
                    )));
                }
            }
            if let Ok(key) = <&CStr>::try_from(name.as_str()) {
                out.append(key, results);
            }
        }
        let size = out.as_bytes().len();
        if size > MAX_BSON_BYTES {
            return Err(crate::pipeline::aggregation_error(CommandError::new(
                ErrorCode::BSONObjectTooLarge,
                format!(
                    "BSONObj size: {size} (0x{size:X}) is invalid. Size must be between 0 and \
                     {MAX_BSON_BYTES}(16MB)"
                ),
            )));
        }
        Ok(out)
    }
}

impl Stage for Facet {
    fn run<'a>(&'a self, input: Stream<'a>, ctx: &'a Context) -> Stream<'a> {
        blocking(move || {
            let input = input.collect::<CommandResult<Vec<Doc>>>()?;
            Ok(vec![computed(self.facet(&input, ctx)?)])
        })
    }

    fn collate(&mut self, collation: &Arc<Collation>) {
        for (_, stages) in &mut self.0 {
            for stage in stages {
                stage.collate(collation);
            }
        }
    }
}
