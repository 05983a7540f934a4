//! `$project`: inclusion, exclusion and computed fields.

use std::sync::Arc;

use bson::RawBsonRef;

use super::doc_arg;
use crate::error::CommandResult;
use crate::pipeline::{Context, Kind, Stage, Stream};
use crate::query::Variables;
use crate::query::projection::Projection;

/// `$project: <spec>`.
pub struct Project(Projection);

impl Project {
    pub(super) fn parse(arg: RawBsonRef<'_>, vars: &Arc<Variables>) -> CommandResult<Project> {
        Ok(Project(Projection::compile_for_pipeline_in(
            doc_arg(arg, "$project")?,
            vars,
        )?))
    }
}

impl Stage for Project {
    fn run<'a>(&'a self, input: Stream<'a>, _ctx: &'a Context) -> Stream<'a> {
        Box::new(input.map(|r| r.and_then(|(d, e)| Ok((self.0.try_apply(&d)?, e)))))
    }

    fn kind(&self) -> Kind<'_> {
        Kind::Project
    }
}
