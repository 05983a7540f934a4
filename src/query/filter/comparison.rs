//! Comparison operators: equality (implicit and `$eq`), `$ne`, `$lt $lte $gt $gte` with
//! mongod's type bracketing, and the sets of `$in`/`$nin`.

use std::cmp::Ordering;

use bson::{RawArray, RawBson, RawBsonRef};

use super::parse::{bad_value, is_operator_doc};
use super::{Item, Pred};
use crate::error::CommandError;
use crate::query::collation::Collation;
use crate::query::compare::{canonical_type, compare, compare_collated, is_nan, rank};
use crate::query::invalid_bson;
use crate::query::regex::Regex;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum CmpOp {
    Eq,
    Lt,
    Lte,
    Gt,
    Gte,
}

/// `$in`'s values, sorted by [`compare`] for binary search, and its regexes.
#[derive(Debug, Clone)]
pub(super) struct InSet {
    pub(super) sorted: Vec<RawBson>,
    has_null: bool,
    pub(super) regexes: Vec<Regex>,
}

/// mongod's `ComparisonMatchExpression::matchesSingleElement`.
pub(super) fn cmp_matches(
    op: CmpOp,
    v: Option<RawBsonRef<'_>>,
    rhs: RawBsonRef<'_>,
    coll: Option<&Collation>,
) -> bool {
    // A missing field ranks with undefined, as mongod's EOO does.
    let lr = v.map_or(rank::UNDEFINED, canonical_type);
    let rr = canonical_type(rhs);
    if lr != rr {
        // null and undefined/missing are the same for comparisons.
        let nullish = |r| r == rank::NULL || r == rank::UNDEFINED;
        if nullish(lr) && nullish(rr) {
            return matches!(op, CmpOp::Eq | CmpOp::Lte | CmpOp::Gte);
        }
        return match rhs {
            RawBsonRef::MaxKey => matches!(op, CmpOp::Lt | CmpOp::Lte),
            RawBsonRef::MinKey => matches!(op, CmpOp::Gt | CmpOp::Gte),
            _ => false,
        };
    }
    // Same rank; `rhs` is never undefined (rejected at compile time), so `v` is present.
    let Some(v) = v else { return false };
    if op != CmpOp::Eq {
        // NaN equals NaN but is neither above nor below anything.
        let (ln, rn) = (is_nan(v), is_nan(rhs));
        if ln || rn {
            return ln && rn && matches!(op, CmpOp::Lte | CmpOp::Gte);
        }
    }
    let ord = compare_collated(v, rhs, coll);
    match op {
        CmpOp::Eq => ord == Ordering::Equal,
        CmpOp::Lt => ord == Ordering::Less,
        CmpOp::Lte => ord != Ordering::Greater,
        CmpOp::Gt => ord == Ordering::Greater,
        CmpOp::Gte => ord != Ordering::Less,
    }
}

impl InSet {
    /// Sorts (and deduplicates) the values in `collation`'s order, for
    /// [`InSet::contains`] with that collation.
    pub(super) fn collate(&mut self, collation: &Collation) {
        let c = Some(collation);
        self.sorted
            .sort_by(|a, b| compare_collated(a.as_raw_bson_ref(), b.as_raw_bson_ref(), c));
        self.sorted.dedup_by(|a, b| {
            compare_collated(a.as_raw_bson_ref(), b.as_raw_bson_ref(), c) == Ordering::Equal
        });
    }

    /// Whether `v` is in the set; `coll` must be the collation the set was sorted for.
    pub(super) fn contains(&self, v: Option<RawBsonRef<'_>>, coll: Option<&Collation>) -> bool {
        let Some(v) = v else {
            return self.has_null;
        };
        if self.has_null && matches!(v, RawBsonRef::Undefined) {
            return true;
        }
        self.sorted
            .binary_search_by(|x| compare_collated(x.as_raw_bson_ref(), v, coll))
            .is_ok()
            || self.regexes.iter().any(|re| re.matches_value(v))
    }
}

/// Equality with `value` (implicit or `$eq`).
pub(super) fn leaf_eq(path: &str, value: RawBsonRef<'_>) -> Result<Item, CommandError> {
    comparison(path, CmpOp::Eq, value)
}

pub(super) fn comparison(
    path: &str,
    op: CmpOp,
    value: RawBsonRef<'_>,
) -> Result<Item, CommandError> {
    if matches!(value, RawBsonRef::Undefined) {
        return Err(bad_value("cannot compare to undefined"));
    }
    if op != CmpOp::Eq && matches!(value, RawBsonRef::RegularExpression(_)) {
        return Err(bad_value(format!(
            "Can't have RegEx as arg to predicate over field '{path}'."
        )));
    }
    Ok(Item::Leaf(Pred::Cmp(op, value.into())))
}

/// `$in`/`$nin` values: plain values and regexes (no operator documents, no undefined).
pub(super) fn parse_in(arr: &RawArray) -> Result<InSet, CommandError> {
    let mut sorted = Vec::new();
    let mut has_null = false;
    let mut regexes = Vec::new();
    for item in arr {
        let v = item.map_err(|e| invalid_bson(&e))?;
        match v {
            RawBsonRef::Document(d) if is_operator_doc(d, false) => {
                return Err(bad_value("cannot nest $ under $in"));
            }
            RawBsonRef::RegularExpression(re) => {
                regexes.push(Regex::compile(re.pattern.as_str(), re.options.as_str())?);
                continue;
            }
            RawBsonRef::Undefined => {
                return Err(bad_value("InMatchExpression equality cannot be undefined"));
            }
            RawBsonRef::Null => has_null = true,
            _ => {}
        }
        sorted.push(RawBson::from(v));
    }
    sorted.sort_by(|a, b| compare(a.as_raw_bson_ref(), b.as_raw_bson_ref()));
    sorted.dedup_by(|a, b| compare(a.as_raw_bson_ref(), b.as_raw_bson_ref()) == Ordering::Equal);
    Ok(InSet {
        sorted,
        has_null,
        regexes,
    })
}
