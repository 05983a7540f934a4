//! `$redact`: keeps, prunes or descends into each (sub)document by an expression answering
//! `$$KEEP`, `$$PRUNE` or `$$DESCEND`.
//!
//! The three variables are defined for the stage's expression only, as mongod's
//! `DocumentSourceRedact` defines them (with the values "keep", "prune" and "descend"). At
//! each level the expression sees the subdocument as `$$CURRENT` (and, in Ebb, as `$$ROOT`
//! too: mongod keeps `$$ROOT` the top-level document).

use std::sync::Arc;

use bson::{RawArrayBuf, RawBson, RawBsonRef, RawDocument, RawDocumentBuf, rawdoc};

use crate::error::{CommandError, CommandResult, ErrorCode};
use crate::pipeline::{Context, Stage, Stream, aggregation_error};
use crate::query::{Expression, Variables, display};

/// `$redact: <expression>`.
pub struct Redact(Expression);

/// How deep `$$DESCEND` may go (documents are at most 100 levels deep in BSON mongod accepts).
const MAX_DEPTH: usize = 200;

enum Verdict {
    Keep,
    Prune,
    Descend,
}

impl Redact {
    pub(super) fn parse(arg: RawBsonRef<'_>, vars: &Arc<Variables>) -> CommandResult<Redact> {
        let vars =
            Arc::new(Variables::clone(vars).with_constants(
                &rawdoc! {"DESCEND": "descend", "PRUNE": "prune", "KEEP": "keep"},
            )?);
        Ok(Redact(Expression::parse_in(arg, &vars)?))
    }

    fn verdict(&self, doc: &RawDocument) -> CommandResult<Verdict> {
        let v = self.0.evaluate(doc)?;
        match v.as_ref() {
            Some(RawBson::String(s)) if s == "keep" => Ok(Verdict::Keep),
            Some(RawBson::String(s)) if s == "prune" => Ok(Verdict::Prune),
            Some(RawBson::String(s)) if s == "descend" => Ok(Verdict::Descend),
            other => Err(CommandError::new(
                ErrorCode::Location(17053),
                format!(
                    "$redact's expression should not return anything aside from the variables \
                     $$KEEP, $$DESCEND, and $$PRUNE, but returned {}",
                    other.map_or_else(
                        || "MISSING".to_owned(),
                        |v| display::value(v.as_raw_bson_ref())
                    )
                ),
            )),
        }
    }

    /// `doc` redacted, `None` when pruned.
    fn redact(&self, doc: &RawDocument, depth: usize) -> CommandResult<Option<RawDocumentBuf>> {
        match self.verdict(doc)? {
            Verdict::Keep => Ok(Some(doc.to_owned())),
            Verdict::Prune => Ok(None),
            Verdict::Descend => {
                let mut out = RawDocumentBuf::new();
                for item in doc {
                    let (k, v) =
                        item.map_err(|e| CommandError::new(ErrorCode::InvalidBSON, e.to_string()))?;
                    if let Some(v) = self.redact_value(v, depth + 1)? {
                        out.append(k, v);
                    }
                }
                Ok(Some(out))
            }
        }
    }

    fn redact_value(&self, v: RawBsonRef<'_>, depth: usize) -> CommandResult<Option<RawBson>> {
        if depth > MAX_DEPTH {
            return Err(CommandError::new(
                ErrorCode::Overflow,
                "$redact exceeded the maximum nesting depth",
            ));
        }
        Ok(match v {
            RawBsonRef::Document(d) => self.redact(d, depth)?.map(RawBson::Document),
            RawBsonRef::Array(items) => {
                let mut out = RawArrayBuf::new();
                for item in items {
                    let item =
                        item.map_err(|e| CommandError::new(ErrorCode::InvalidBSON, e.to_string()))?;
                    if let Some(kept) = self.redact_value(item, depth + 1)? {
                        out.push(kept);
                    }
                }
                Some(RawBson::Array(out))
            }
            other => Some(RawBson::from(other)),
        })
    }
}

impl Stage for Redact {
    fn run<'a>(&'a self, input: Stream<'a>, _ctx: &'a Context) -> Stream<'a> {
        Box::new(input.filter_map(|r| match r {
            Ok((d, e)) => match self.redact(&d, 0) {
                Ok(Some(d)) => Some(Ok((d, e))),
                Ok(None) => None,
                Err(err) => Some(Err(aggregation_error(err))),
            },
            Err(err) => Some(Err(err)),
        }))
    }
}

#[cfg(test)]
mod tests {
    use bson::doc;

    use super::*;

    #[test]
    fn manual_example_forecasts() {
        let spec = rawdoc! {"$cond": {
            "if": {"$in": ["G", {"$ifNull": ["$tags", []]}]},
            "then": "$$DESCEND",
            "else": "$$PRUNE"
        }};
        let vars = Arc::new(Variables::system_clock());
        let r = Redact::parse(RawBsonRef::Document(&spec), &vars).unwrap();
        let d = rawdoc! {
            "_id": 1, "tags": ["G", "STLW"],
            "subsections": [
                {"subtitle": "A", "tags": ["SI", "G"], "content": "x"},
                {"subtitle": "B", "tags": ["STLW"], "content": "y"},
                {"subtitle": "C", "tags": ["SI", "G"], "content": {"text": "z", "tags": ["TK"]}},
            ]
        };
        let out = r
            .redact(&d, 0)
            .unwrap()
            .unwrap()
            .try_into()
            .map(|d: bson::Document| d)
            .unwrap();
        assert_eq!(
            out,
            doc! {
                "_id": 1, "tags": ["G", "STLW"],
                "subsections": [
                    {"subtitle": "A", "tags": ["SI", "G"], "content": "x"},
                    {"subtitle": "C", "tags": ["SI", "G"]},
                ]
            }
        );
        let keep = rawdoc! {"$literal": "x"};
        let bad = Redact::parse(RawBsonRef::Document(&keep), &vars).unwrap();
        assert_eq!(bad.redact(&d, 0).unwrap_err().code.code(), 17053);
        let keep = Redact::parse(RawBsonRef::String("$$KEEP"), &vars).unwrap();
        assert_eq!(keep.redact(&d, 0).unwrap().unwrap(), d);
        let prune = Redact::parse(RawBsonRef::String("$$PRUNE"), &vars).unwrap();
        assert!(prune.redact(&d, 0).unwrap().is_none());
    }
}
