//! `$lookup`: joins each document with the matching documents of another collection of the
//! same database, in one of three forms: equality (`localField`/`foreignField`), a
//! sub-pipeline with `let` variables, or both (the equality first, then the sub-pipeline over
//! what it matched). The other collection is read through the command's [`Reader`], so the
//! planner chooses an index on `foreignField` and expired documents stay invisible.

use std::sync::{Arc, OnceLock};

use bson::{RawArrayBuf, RawBson, RawBsonRef, RawDocument, RawDocumentBuf, rawdoc};

use crate::error::{CommandError, CommandResult, ErrorCode};
use crate::pipeline::{Context, Doc, Reader, Stage, Stream, doc, run};
use crate::query::display::type_name;
use crate::query::expr::Expression;
use crate::query::filter::{Filter, FilterContext};
use crate::query::{Collation, Variables};

/// The largest document mongod builds (16 MiB and the 16 KiB it allows for overhead).
const MAX_BSON_BYTES: usize = 16 * 1024 * 1024 + 16 * 1024;

fn failed(msg: impl Into<String>) -> CommandError {
    CommandError::new(ErrorCode::FailedToParse, msg)
}

fn invalid_bson(e: &bson::error::Error) -> CommandError {
    CommandError::new(ErrorCode::InvalidBSON, e.to_string())
}

/// `$lookup: {from, as, localField?, foreignField?, let?, pipeline?}`.
pub struct Lookup {
    from: String,
    as_path: Vec<String>,
    /// `(localField, foreignField)`, the equality form.
    fields: Option<(Vec<String>, String)>,
    /// The `let` variables: names and their expressions over the input document.
    lets: Vec<(String, Expression)>,
    /// The sub-pipeline, as given (parsed again per document when it has `let` variables).
    pipeline: Option<Vec<RawDocumentBuf>>,
    vars: Arc<Variables>,
    collation: Option<Arc<Collation>>,
    /// The results of a sub-pipeline that depends on nothing in the input document (no
    /// equality, no `let`): computed once.
    uncorrelated: OnceLock<Vec<RawDocumentBuf>>,
}

impl Lookup {
    pub(super) fn parse(arg: RawBsonRef<'_>, vars: &Arc<Variables>) -> CommandResult<Lookup> {
        let RawBsonRef::Document(spec) = arg else {
            return Err(failed("the $lookup specification must be an Object"));
        };
        let (mut from, mut as_field, mut local, mut foreign) = (None, None, None, None);
        let (mut lets, mut pipeline) = (None, None);
        for item in spec {
            let (name, value) = item.map_err(|e| invalid_bson(&e))?;
            match (name.as_str(), value) {
                ("pipeline", RawBsonRef::Array(stages)) => {
                    let mut list = Vec::new();
                    for stage in stages {
                        match stage.map_err(|e| invalid_bson(&e))? {
                            RawBsonRef::Document(d) => list.push(d.to_owned()),
                            other => {
                                return Err(CommandError::new(
                                    ErrorCode::TypeMismatch,
                                    format!(
                                        "Each element of the 'pipeline' array must be an object, \
                                         but found {}",
                                        type_name(other.element_type())
                                    ),
                                ));
                            }
                        }
                    }
                    pipeline = Some(list);
                }
                ("pipeline", other) => {
                    return Err(CommandError::new(
                        ErrorCode::TypeMismatch,
                        format!(
                            "'pipeline' option must be specified as an array, but found {}",
                            type_name(other.element_type())
                        ),
                    ));
                }
                ("let", RawBsonRef::Document(d)) => lets = Some(d.to_owned()),
                ("let", other) => {
                    return Err(failed(format!(
                        "$lookup argument 'let' must be an object, is type {}",
                        type_name(other.element_type())
                    )));
                }
                ("from", RawBsonRef::String(s)) => from = Some(s.to_owned()),
                ("from", RawBsonRef::Document(_)) => {
                    return Err(failed(
                        "$lookup with syntax {from: {db:<>, coll:<>},..} is not supported for \
                         this namespace",
                    ));
                }
                ("from", other) => {
                    return Err(failed(format!(
                        "$lookup 'from' field must be a string or an object, but found {}",
                        type_name(other.element_type())
                    )));
                }
                (name, RawBsonRef::String(s)) => match name {
                    "as" => as_field = Some(s.to_owned()),
                    "localField" => local = Some(s.to_owned()),
                    "foreignField" => foreign = Some(s.to_owned()),
                    other => {
                        return Err(failed(format!("unknown argument to $lookup: {other}")));
                    }
                },
                (name, other) => {
                    return Err(failed(format!(
                        "$lookup argument '{name}' must be a string, found {name}: {}",
                        type_name(other.element_type())
                    )));
                }
            }
        }
        let Some(from) = from else {
            return Err(failed(
                "$lookup stage without explicit collection must have a pipeline with \
                 $documents as first stage",
            ));
        };
        let as_field = as_field
            .filter(|a| !a.is_empty())
            .ok_or_else(|| failed("must specify 'as' field for a $lookup"))?;
        let fields = match (local, foreign, &pipeline) {
            (Some(l), Some(f), _) if !l.is_empty() && !f.is_empty() => Some((l, f)),
            (None, None, Some(_)) => None,
            (_, _, Some(_)) => {
                return Err(failed(
                    "$lookup requires both or neither of 'localField' and 'foreignField' to be \
                     specified",
                ));
            }
            (_, _, None) => {
                return Err(failed(
                    "$lookup requires either 'pipeline' or both 'localField' and \
                     'foreignField' to be specified",
                ));
            }
        };
        if pipeline.is_none() && lets.is_some() {
            return Err(failed(
                "$lookup with a 'let' argument must also specify 'pipeline'",
            ));
        }
        let mut parsed_lets = Vec::new();
        let mut declared = (**vars).clone();
        if let Some(spec) = &lets {
            for item in spec {
                let (name, value) = item.map_err(|e| invalid_bson(&e))?;
                crate::query::expr::check_let_name(name.as_str())?;
                parsed_lets.push((name.as_str().to_owned(), Expression::parse_in(value, vars)?));
                declared = declared.with_value(name.as_str(), None);
            }
        }
        if let Some(stages) = &pipeline {
            // Parsed once now for its errors, with the `let` names declared.
            let refs: Vec<&RawDocument> = stages.iter().map(AsRef::as_ref).collect();
            super::parse_sub_pipeline(&refs, &Arc::new(declared))?;
        }
        Ok(Lookup {
            from,
            as_path: as_field.split('.').map(str::to_owned).collect(),
            fields: fields.map(|(l, f)| (l.split('.').map(str::to_owned).collect(), f)),
            lets: parsed_lets,
            pipeline,
            vars: Arc::clone(vars),
            collation: None,
            uncorrelated: OnceLock::new(),
        })
    }

    /// The foreign documents `doc` joins with.
    fn joined(
        &self,
        doc: &RawDocument,
        reader: &dyn Reader,
        ctx: &Context,
    ) -> CommandResult<Vec<RawDocumentBuf>> {
        if self.fields.is_none()
            && self.lets.is_empty()
            && let Some(done) = self.uncorrelated.get()
        {
            return Ok(done.clone());
        }
        let matched = match &self.fields {
            Some((local, foreign)) => {
                let mut values = RawArrayBuf::new();
                let mut found = Vec::new();
                doc::query_values(doc, local, &mut found);
                if found.is_empty() {
                    // A missing local field matches as null (and so, missing foreign fields).
                    found.push(RawBson::Null);
                }
                for v in found {
                    values.push(v);
                }
                let mut query = RawDocumentBuf::new();
                query.append(
                    bson::raw::CString::try_from(foreign.as_str())
                        .map_err(|e| failed(e.to_string()))?,
                    rawdoc! { "$in": values },
                );
                let filter = Filter::compile_in(&query, FilterContext::Pipeline, &self.vars)?
                    .with_collation(self.collation.clone());
                reader.read(&self.from, Some(&filter))?
            }
            None => reader.read(&self.from, None)?,
        };
        let Some(stages) = &self.pipeline else {
            return Ok(matched);
        };
        let mut vars = (*self.vars).clone();
        for (name, expr) in &self.lets {
            vars = vars.with_value(name, expr.evaluate(doc)?);
        }
        let refs: Vec<&RawDocument> = stages.iter().map(AsRef::as_ref).collect();
        let mut parsed = super::parse_sub_pipeline(&refs, &Arc::new(vars))?;
        if let Some(c) = &self.collation {
            for s in &mut parsed {
                s.collate(c);
            }
        }
        let parsed = super::coalesce(parsed);
        let input: Vec<Doc> = matched
            .into_iter()
            .map(|d| (d, crate::storage::record::NEVER))
            .collect();
        let out: Vec<RawDocumentBuf> = run(&parsed, input, ctx)?
            .into_iter()
            .map(|(d, _)| d)
            .collect();
        if self.fields.is_none() && self.lets.is_empty() {
            let _ = self.uncorrelated.set(out.clone());
        }
        Ok(out)
    }

    fn apply(&self, doc: &RawDocument, ctx: &Context) -> CommandResult<RawDocumentBuf> {
        let Some(reader) = ctx.reader.as_deref() else {
            return Err(CommandError::internal("$lookup has no collection reader"));
        };
        let joined = self.joined(doc, reader, ctx)?;
        let mut array = RawArrayBuf::new();
        let mut bytes = 0_usize;
        for d in joined {
            bytes = bytes.saturating_add(d.as_bytes().len());
            if bytes > MAX_BSON_BYTES {
                return Err(CommandError::new(
                    ErrorCode::Location(4568),
                    format!(
                        "Total size of documents in {} matching pipeline's $lookup stage exceeds \
                         {MAX_BSON_BYTES} bytes",
                        self.from
                    ),
                ));
            }
            array.push(d);
        }
        Ok(doc::set(doc, &self.as_path, Some(RawBson::Array(array))))
    }
}

impl Stage for Lookup {
    fn run<'a>(&'a self, input: Stream<'a>, ctx: &'a Context) -> Stream<'a> {
        Box::new(input.map(move |r| r.and_then(|(d, e)| Ok((self.apply(&d, ctx)?, e)))))
    }

    fn collate(&mut self, collation: &Arc<Collation>) {
        self.collation = Some(Arc::clone(collation));
    }
}
