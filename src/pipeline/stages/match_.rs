//! `$match`: the documents a query filter matches.

use std::sync::Arc;

use bson::RawBsonRef;

use super::doc_arg;
use crate::error::CommandResult;
use crate::pipeline::{Context, Kind, Stage, Stream};
use crate::query::filter::{Filter, FilterContext};
use crate::query::{Collation, Variables};

/// `$match: <filter>`.
pub struct Match(Filter);

impl Match {
    pub(super) fn parse(arg: RawBsonRef<'_>, vars: &Arc<Variables>) -> CommandResult<Match> {
        Ok(Match(Filter::compile_in(
            doc_arg(arg, "match filter")?,
            FilterContext::Pipeline,
            vars,
        )?))
    }
}

impl Stage for Match {
    fn run<'a>(&'a self, input: Stream<'a>, _ctx: &'a Context) -> Stream<'a> {
        Box::new(input.filter_map(|r| match r {
            Ok((d, e)) => match self.0.try_matches(&d) {
                Ok(true) => Some(Ok((d, e))),
                Ok(false) => None,
                Err(err) => Some(Err(err)),
            },
            Err(err) => Some(Err(err)),
        }))
    }

    fn kind(&self) -> Kind<'_> {
        Kind::Match(&self.0)
    }

    fn collate(&mut self, collation: &Arc<Collation>) {
        let f = std::mem::replace(&mut self.0, Filter::match_all());
        self.0 = f.with_collation(Some(collation.clone()));
    }
}
