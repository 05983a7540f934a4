//! `$sortByCount`: `{$group: {_id: <expression>, count: {$sum: 1}}}` then `{$sort: {count: -1}}`.

use std::sync::Arc;

use bson::{RawBsonRef, rawdoc};

use super::group::Group;
use crate::error::{CommandError, CommandResult, ErrorCode};
use crate::pipeline::accumulators::Accumulator;
use crate::pipeline::{Context, Stage, Stream, blocking, computed};
use crate::query::{Collation, Expression, Variables};

/// `$sortByCount: <expression>`.
pub struct SortByCount(Group);

const MESSAGE: &str =
    "the sortByCount field must be defined as a $-prefixed path or an expression inside an object";

impl SortByCount {
    pub(super) fn parse(arg: RawBsonRef<'_>, vars: &Arc<Variables>) -> CommandResult<SortByCount> {
        match arg {
            RawBsonRef::Document(d) => {
                let first = d.iter().next().and_then(Result::ok);
                if !first.is_some_and(|(k, _)| k.as_str().starts_with('$')) {
                    return Err(CommandError::new(ErrorCode::Location(40147), MESSAGE));
                }
            }
            RawBsonRef::String(s) => {
                if !s.starts_with('$') {
                    return Err(CommandError::new(ErrorCode::Location(40148), MESSAGE));
                }
            }
            _ => {
                return Err(CommandError::new(
                    ErrorCode::Location(40149),
                    "the sortByCount field must be specified as a string or as an object",
                ));
            }
        }
        let count = rawdoc! {"$sum": 1};
        let count = Accumulator::parse("count", RawBsonRef::Document(&count), vars)?;
        Ok(SortByCount(Group::new(
            Expression::parse_in(arg, vars)?,
            vec![("count".to_owned(), count)],
        )))
    }
}

impl Stage for SortByCount {
    fn run<'a>(&'a self, input: Stream<'a>, ctx: &'a Context) -> Stream<'a> {
        blocking(move || {
            let mut groups = self.0.group(input, ctx)?;
            let count = |d: &bson::RawDocumentBuf| match d.get("count") {
                Ok(Some(RawBsonRef::Int32(n))) => i64::from(n),
                Ok(Some(RawBsonRef::Int64(n))) => n,
                _ => 0,
            };
            groups.sort_by_key(|d| std::cmp::Reverse(count(d)));
            Ok(groups.into_iter().map(computed).collect())
        })
    }

    fn collate(&mut self, collation: &Arc<Collation>) {
        self.0.collate(collation);
    }
}
