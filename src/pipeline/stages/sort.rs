//! `$sort`: a blocking sort held within the blocking-sort memory limit (spilling past it when
//! `allowDiskUse` allows, else mongod's 292).

use std::sync::Arc;

use bson::RawBsonRef;

use super::doc_arg;
use crate::error::CommandResult;
use crate::pipeline::{Context, Kind, Stage, Stream, aggregation_error, blocking};
use crate::query::Collation;
use crate::query::sort::SortSpec;
use crate::sorter::Sorter;

/// `$sort: <spec>`, keeping only the first `keep` documents when a `$limit` follows.
pub struct Sort {
    spec: SortSpec,
    keep: Option<usize>,
}

impl Sort {
    pub(super) fn new(spec: SortSpec, keep: Option<usize>) -> Sort {
        Sort { spec, keep }
    }

    pub(super) fn parse(arg: RawBsonRef<'_>) -> CommandResult<Sort> {
        Ok(Sort::new(
            SortSpec::compile_for_pipeline(doc_arg(arg, "$sort key")?)?,
            None,
        ))
    }
}

impl Stage for Sort {
    fn run<'a>(&'a self, input: Stream<'a>, ctx: &'a Context) -> Stream<'a> {
        blocking(move || {
            let mut sorter = Sorter::new(self.spec.clone(), self.keep, ctx.limits.clone());
            for item in input {
                let (d, e) = item?;
                sorter.push(d, e).map_err(aggregation_error)?;
            }
            sorter.finish()?.into_vec()
        })
    }

    fn kind(&self) -> Kind<'_> {
        Kind::Sort(&self.spec)
    }

    fn collate(&mut self, collation: &Arc<Collation>) {
        self.spec = std::mem::take(&mut self.spec).with_collation(Some(collation.clone()));
    }
}
