//! What the query planner reads of a filter ([`Filter::plan_conjuncts`]).
//!
//! [`Filter::plan_conjuncts`]: super::Filter::plan_conjuncts

use bson::{RawBson, RawBsonRef};

use super::Pred;
use super::comparison::CmpOp;
use crate::query::regex::Regex;

/// A comparison operator, as [`PlanPred::Cmp`] reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlanOp {
    /// `$eq` or implicit equality.
    Eq,
    /// `$lt`.
    Lt,
    /// `$lte`.
    Lte,
    /// `$gt`.
    Gt,
    /// `$gte`.
    Gte,
}

/// One predicate of a filter's top-level conjunction, for the query planner
/// ([`Filter::plan_conjuncts`](super::Filter::plan_conjuncts)).
#[derive(Debug, Clone, Copy)]
pub enum PlanPred<'f> {
    /// Some value the path reaches compares so with the operand (with mongod's type
    /// bracketing, see [`compare`](crate::query::compare::compare)).
    Cmp(PlanOp, RawBsonRef<'f>),
    /// `$in`: the values (sorted by [`compare`](crate::query::compare::compare),
    /// deduplicated) and the regexes.
    In(&'f [RawBson], &'f [Regex]),
    /// `$regex` (or a regex value).
    Regex(&'f Regex),
    /// `$exists: true`.
    Exists,
    /// Anything else (`$type`, `$elemMatch`, `$size`, `$mod`, …): it constrains the path in a
    /// way the planner does not turn into bounds.
    Other,
}

impl Pred {
    pub(super) fn plan_view(&self) -> PlanPred<'_> {
        match self {
            Pred::Cmp(op, v) => PlanPred::Cmp(
                match op {
                    CmpOp::Eq => PlanOp::Eq,
                    CmpOp::Lt => PlanOp::Lt,
                    CmpOp::Lte => PlanOp::Lte,
                    CmpOp::Gt => PlanOp::Gt,
                    CmpOp::Gte => PlanOp::Gte,
                },
                v.as_raw_bson_ref(),
            ),
            Pred::In(set) => PlanPred::In(&set.sorted, &set.regexes),
            Pred::Regex(re) => PlanPred::Regex(re),
            Pred::Exists => PlanPred::Exists,
            _ => PlanPred::Other,
        }
    }
}
