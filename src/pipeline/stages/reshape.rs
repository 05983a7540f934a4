//! `$set`/`$addFields`, `$unset`, `$replaceRoot`/`$replaceWith`: the stages pipeline-style
//! updates share, run with aggregation's rules ([`Update::run_stages`]).

use std::sync::Arc;

use bson::{RawArrayBuf, RawDocument};

use crate::error::{CommandError, CommandResult};
use crate::pipeline::{Context, Stage, Stream};
use crate::query::Variables;
use crate::query::update::Update;

/// One pipeline-update stage.
pub struct Reshape(Update);

impl Reshape {
    pub(super) fn parse(stage: &RawDocument, vars: &Arc<Variables>) -> CommandResult<Reshape> {
        let mut one = RawArrayBuf::new();
        one.push(stage.to_owned());
        Ok(Reshape(Update::compile_pipeline_in(&one, vars)?))
    }
}

impl Stage for Reshape {
    fn run<'a>(&'a self, input: Stream<'a>, _ctx: &'a Context) -> Stream<'a> {
        Box::new(input.map(|r| {
            r.and_then(|(d, e)| {
                // `$$NOW` is the command's, fixed when the stage was compiled.
                let reshaped = self
                    .0
                    .run_stages(&d)
                    .ok_or_else(|| CommandError::internal("not a pipeline stage"))??;
                Ok((reshaped, e))
            })
        }))
    }
}
