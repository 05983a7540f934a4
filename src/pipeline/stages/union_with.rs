//! `$unionWith`: the input, then the documents of another collection of the same database
//! (through a sub-pipeline when given), read through the command's [`Reader`].

use std::sync::Arc;

use bson::{RawBsonRef, RawDocument, RawDocumentBuf};

use crate::error::{CommandError, CommandResult, ErrorCode};
use crate::pipeline::{Context, Doc, Stage, Stages, Stream, run};
use crate::query::display::type_name;
use crate::query::{Collation, Variables};

/// `$unionWith: "<coll>"` or `{coll, pipeline?}`.
pub struct UnionWith {
    coll: String,
    stages: Stages,
}

fn invalid_bson(e: &bson::error::Error) -> CommandError {
    CommandError::new(ErrorCode::InvalidBSON, e.to_string())
}

impl UnionWith {
    pub(super) fn parse(arg: RawBsonRef<'_>, vars: &Arc<Variables>) -> CommandResult<UnionWith> {
        let spec = match arg {
            RawBsonRef::String(s) => {
                return Ok(UnionWith {
                    coll: s.to_owned(),
                    stages: Vec::new(),
                });
            }
            RawBsonRef::Document(d) => d,
            other => {
                return Err(CommandError::new(
                    ErrorCode::FailedToParse,
                    format!(
                        "the $unionWith stage specification must be an object or string, but \
                         found {}",
                        type_name(other.element_type())
                    ),
                ));
            }
        };
        let (mut coll, mut pipeline): (Option<String>, Vec<RawDocumentBuf>) = (None, Vec::new());
        for item in spec {
            let (name, value) = item.map_err(|e| invalid_bson(&e))?;
            match (name.as_str(), value) {
                ("coll", RawBsonRef::String(s)) => coll = Some(s.to_owned()),
                ("pipeline", RawBsonRef::Array(a)) => {
                    for (i, stage) in a.into_iter().enumerate() {
                        match stage.map_err(|e| invalid_bson(&e))? {
                            RawBsonRef::Document(d) => pipeline.push(d.to_owned()),
                            other => {
                                return Err(CommandError::new(
                                    ErrorCode::TypeMismatch,
                                    format!(
                                        "BSON field '$unionWith.pipeline.{i}' is the wrong type \
                                         '{}', expected type 'object'",
                                        type_name(other.element_type())
                                    ),
                                ));
                            }
                        }
                    }
                }
                (field @ ("coll" | "pipeline"), other) => {
                    let expected = if field == "coll" { "string" } else { "array" };
                    return Err(CommandError::new(
                        ErrorCode::TypeMismatch,
                        format!(
                            "BSON field '$unionWith.{field}' is the wrong type '{}', expected \
                             type '{expected}'",
                            type_name(other.element_type())
                        ),
                    ));
                }
                (other, _) => {
                    return Err(CommandError::new(
                        ErrorCode::Location(40415),
                        format!("BSON field '$unionWith.{other}' is an unknown field."),
                    ));
                }
            }
        }
        let Some(coll) = coll else {
            return Err(CommandError::new(
                ErrorCode::FailedToParse,
                "$unionWith stage without explicit collection must have a pipeline with \
                 $documents as first stage",
            ));
        };
        let refs: Vec<&RawDocument> = pipeline.iter().map(AsRef::as_ref).collect();
        let stages = super::coalesce(super::parse_sub_pipeline(&refs, vars)?);
        Ok(UnionWith { coll, stages })
    }

    fn other(&self, ctx: &Context) -> CommandResult<Vec<Doc>> {
        let Some(reader) = ctx.reader.as_deref() else {
            return Err(CommandError::internal(
                "$unionWith has no collection reader",
            ));
        };
        let docs = reader
            .read(&self.coll, None)?
            .into_iter()
            .map(|d| (d, crate::storage::record::NEVER))
            .collect();
        run(&self.stages, docs, ctx)
    }
}

impl Stage for UnionWith {
    fn run<'a>(&'a self, input: Stream<'a>, ctx: &'a Context) -> Stream<'a> {
        let rest = std::iter::once_with(move || self.other(ctx)).flat_map(|r| -> Stream<'a> {
            match r {
                Ok(docs) => Box::new(docs.into_iter().map(Ok)),
                Err(e) => Box::new(std::iter::once(Err(e))),
            }
        });
        Box::new(input.chain(rest))
    }

    fn collate(&mut self, collation: &Arc<Collation>) {
        for s in &mut self.stages {
            s.collate(collation);
        }
    }
}
