//! The query planner: which keys of which index a query reads, and in which order.
//!
//! Given a compiled filter, an optional sort, a `hint` and the collection's indexes, [`plan`]
//! picks one access path:
//!
//! - a **collection scan** (`COLLSCAN`) of the `docs` keyspace in natural (insertion) order,
//!   forwards or backwards (`$natural`);
//! - an **index scan** (`IXSCAN`) over a list of intervals per key field ([`Interval`], what
//!   mongod's explain shows as `indexBounds`), of a secondary index or of the `_id` index
//!   (whose entries lead from `_id` keystrings to record ids).
//!
//! Bounds are only ever a superset of the keys of matching documents: whoever runs the plan
//! applies the whole filter to every document it fetches. A predicate the planner does not
//! understand leaves its field unbounded (`[MinKey, MaxKey]`).
//!
//! Choosing (mongod races candidate plans; Ebb uses a deterministic heuristic instead): among
//! the usable indexes (not hidden, with entries, sparse only when the filter excludes documents
//! missing every key field, partial only when the filter implies the partial filter), prefer the
//! most leading key fields bound to a single value, then a bounded field after them, then an
//! index that gives the sort order; ties go to the index created first (`_id_` before all). An
//! index with no bounded leading field is used only for its order. No candidate: a collection
//! scan.
//!
//! Collation: index keys order strings binarily, so under a non-simple collation a field whose
//! bounds would start or end at a string, document or array is left unbounded, and no index
//! gives a sort order.

use std::cmp::Ordering;

use bson::{RawBson, RawBsonRef, RawDocument, RawDocumentBuf};

use super::compare::{canonical_type, compare, compare_docs, is_nan, rank};
use super::display;
use super::filter::{Filter, PlanOp, PlanPred};
use super::regex::Regex;
use super::sort::SortSpec;
use crate::catalog::IndexSpec;
use crate::error::{CommandError, CommandResult, ErrorCode};
use crate::index::{Direction, KeyPattern, encode_component};
use crate::storage::prefix_end;

/// One interval of key values, in ascending value order (mongod's `Interval`).
#[derive(Debug, Clone, PartialEq)]
pub struct Interval {
    /// Lower end.
    pub lo: RawBson,
    /// Whether `lo` itself is in.
    pub lo_incl: bool,
    /// Upper end.
    pub hi: RawBson,
    /// Whether `hi` itself is in.
    pub hi_incl: bool,
}

fn cmp(a: &RawBson, b: &RawBson) -> Ordering {
    compare(a.as_raw_bson_ref(), b.as_raw_bson_ref())
}

impl Interval {
    /// `[v, v]`.
    pub fn point(v: RawBson) -> Interval {
        Interval {
            lo: v.clone(),
            lo_incl: true,
            hi: v,
            hi_incl: true,
        }
    }

    /// `[MinKey, MaxKey]`.
    pub fn full() -> Interval {
        Interval {
            lo: RawBson::MinKey,
            lo_incl: true,
            hi: RawBson::MaxKey,
            hi_incl: true,
        }
    }

    fn new(lo: RawBson, lo_incl: bool, hi: RawBson, hi_incl: bool) -> Interval {
        Interval {
            lo,
            lo_incl,
            hi,
            hi_incl,
        }
    }

    /// Whether it is one value.
    pub fn is_point(&self) -> bool {
        self.lo_incl && self.hi_incl && cmp(&self.lo, &self.hi) == Ordering::Equal
    }

    fn is_full(&self) -> bool {
        self.lo_incl
            && self.hi_incl
            && matches!(self.lo, RawBson::MinKey)
            && matches!(self.hi, RawBson::MaxKey)
    }

    fn is_empty(&self) -> bool {
        match cmp(&self.lo, &self.hi) {
            Ordering::Greater => true,
            Ordering::Equal => !(self.lo_incl && self.hi_incl),
            Ordering::Less => false,
        }
    }

    fn contains_value(&self, v: &RawBson) -> bool {
        let lo = cmp(&self.lo, v);
        let hi = cmp(v, &self.hi);
        (lo == Ordering::Less || (lo == Ordering::Equal && self.lo_incl))
            && (hi == Ordering::Less || (hi == Ordering::Equal && self.hi_incl))
    }

    /// As mongod's explain prints it (`"[1, 1]"`, `"(5, inf.0]"`), read in `reversed` order
    /// when the scan walks this field from high to low.
    pub fn display(&self, reversed: bool) -> String {
        let (open, a, b, close) = if reversed {
            (self.hi_incl, &self.hi, &self.lo, self.lo_incl)
        } else {
            (self.lo_incl, &self.lo, &self.hi, self.hi_incl)
        };
        format!(
            "{}{}, {}{}",
            if open { '[' } else { '(' },
            display::value(a.as_raw_bson_ref()),
            display::value(b.as_raw_bson_ref()),
            if close { ']' } else { ')' }
        )
    }
}

/// Lower ends ordered: a smaller value first; at one value, an inclusive end first.
fn cmp_lo(a: &Interval, b: &Interval) -> Ordering {
    cmp(&a.lo, &b.lo).then_with(|| b.lo_incl.cmp(&a.lo_incl))
}

/// Upper ends ordered: a smaller value first; at one value, an exclusive end first.
fn cmp_hi(a: &Interval, b: &Interval) -> Ordering {
    cmp(&a.hi, &b.hi).then_with(|| a.hi_incl.cmp(&b.hi_incl))
}

/// Sorts intervals and merges those that overlap or touch: an ordered list of disjoint ones.
pub fn union(mut list: Vec<Interval>) -> Vec<Interval> {
    list.retain(|i| !i.is_empty());
    list.sort_by(cmp_lo);
    let mut out: Vec<Interval> = Vec::with_capacity(list.len());
    for i in list {
        if let Some(last) = out.last_mut() {
            let touch = match cmp(&i.lo, &last.hi) {
                Ordering::Less => true,
                Ordering::Equal => i.lo_incl || last.hi_incl,
                Ordering::Greater => false,
            };
            if touch {
                if cmp_hi(&i, last) == Ordering::Greater {
                    last.hi = i.hi;
                    last.hi_incl = i.hi_incl;
                }
                continue;
            }
        }
        out.push(i);
    }
    out
}

/// The values in both ordered lists.
pub fn intersect(a: &[Interval], b: &[Interval]) -> Vec<Interval> {
    let mut out = Vec::new();
    for x in a {
        for y in b {
            let lo = if cmp_lo(x, y) == Ordering::Less { y } else { x };
            let hi = if cmp_hi(x, y) == Ordering::Less { x } else { y };
            let i = Interval::new(lo.lo.clone(), lo.lo_incl, hi.hi.clone(), hi.hi_incl);
            if !i.is_empty() {
                out.push(i);
            }
        }
    }
    union(out)
}

/// Whether every value of `inner` is in `outer` (both ordered and disjoint).
fn covers(outer: &[Interval], inner: &[Interval]) -> bool {
    inner.iter().all(|i| {
        outer
            .iter()
            .any(|o| cmp_lo(o, i) != Ordering::Greater && cmp_hi(o, i) != Ordering::Less)
    })
}

fn excludes_missing(list: &[Interval]) -> bool {
    !list
        .iter()
        .any(|i| i.contains_value(&RawBson::Null) || i.contains_value(&RawBson::Undefined))
}

/// The bounds of one type's values, for a range that stays within its type (mongod's type
/// bracketing: `{$gt: 5}` reads numbers only): `(lowest, inclusive, highest, inclusive)`.
fn type_bracket(r: u8) -> Option<(RawBson, bool, RawBson, bool)> {
    let doc = || RawBson::Document(RawDocumentBuf::new());
    Some(match r {
        rank::NUMBER => (
            RawBson::Double(f64::NEG_INFINITY),
            true,
            RawBson::Double(f64::INFINITY),
            true,
        ),
        rank::STRING => (RawBson::String(String::new()), true, doc(), false),
        rank::OBJECT => (doc(), true, RawBson::Array(bson::RawArrayBuf::new()), false),
        rank::BINARY => (
            RawBson::Binary(bson::Binary {
                subtype: bson::spec::BinarySubtype::Generic,
                bytes: Vec::new(),
            }),
            true,
            RawBson::ObjectId(bson::oid::ObjectId::from_bytes([0; 12])),
            false,
        ),
        rank::OBJECT_ID => (
            RawBson::ObjectId(bson::oid::ObjectId::from_bytes([0; 12])),
            true,
            RawBson::ObjectId(bson::oid::ObjectId::from_bytes([0xFF; 12])),
            true,
        ),
        rank::BOOLEAN => (RawBson::Boolean(false), true, RawBson::Boolean(true), true),
        rank::DATE => (
            RawBson::DateTime(bson::DateTime::from_millis(i64::MIN)),
            true,
            RawBson::DateTime(bson::DateTime::from_millis(i64::MAX)),
            true,
        ),
        rank::TIMESTAMP => (
            RawBson::Timestamp(bson::Timestamp {
                time: 0,
                increment: 0,
            }),
            true,
            RawBson::Timestamp(bson::Timestamp {
                time: u32::MAX,
                increment: u32::MAX,
            }),
            true,
        ),
        _ => return None,
    })
}

/// `null` equality also matches missing fields and `undefined`.
fn null_points() -> Vec<Interval> {
    vec![
        Interval::point(RawBson::Undefined),
        Interval::point(RawBson::Null),
    ]
}

/// Bounds of one predicate: the intervals (ordered) and whether they are exact (every key in
/// them belongs to a matching value, so explain need not show the predicate as a filter).
pub fn pred_bounds(pred: &PlanPred<'_>) -> (Vec<Interval>, bool) {
    match pred {
        PlanPred::Cmp(op, v) => cmp_bounds(*op, *v),
        PlanPred::In(values, regexes) => {
            let mut out = Vec::new();
            let mut exact = regexes.is_empty();
            for v in *values {
                let (b, e) = cmp_bounds(PlanOp::Eq, v.as_raw_bson_ref());
                exact &= e;
                out.extend(b);
            }
            for re in *regexes {
                out.extend(regex_bounds(re));
            }
            (union(out), exact)
        }
        PlanPred::Regex(re) => (union(regex_bounds(re)), false),
        PlanPred::Exists | PlanPred::Other => (vec![Interval::full()], false),
    }
}

fn cmp_bounds(op: PlanOp, v: RawBsonRef<'_>) -> (Vec<Interval>, bool) {
    let full = (vec![Interval::full()], false);
    let owned = RawBson::from(v);
    match v {
        // An array operand also matches the whole array, which no key holds.
        RawBsonRef::Array(_) => return full,
        RawBsonRef::MinKey | RawBsonRef::MaxKey => {
            let min = matches!(v, RawBsonRef::MinKey);
            let list = match (op, min) {
                (PlanOp::Eq, _) => vec![Interval::point(owned)],
                (PlanOp::Gte, true) | (PlanOp::Lte, false) => vec![Interval::full()],
                (PlanOp::Gt, true) => {
                    vec![Interval::new(RawBson::MinKey, false, RawBson::MaxKey, true)]
                }
                (PlanOp::Lt, false) => {
                    vec![Interval::new(RawBson::MinKey, true, RawBson::MaxKey, false)]
                }
                (PlanOp::Lte, true) => vec![Interval::point(RawBson::MinKey)],
                (PlanOp::Gte, false) => vec![Interval::point(RawBson::MaxKey)],
                (PlanOp::Lt, true) | (PlanOp::Gt, false) => Vec::new(),
            };
            return (list, true);
        }
        RawBsonRef::Null => {
            return match op {
                PlanOp::Eq | PlanOp::Lte | PlanOp::Gte => (null_points(), false),
                PlanOp::Lt | PlanOp::Gt => (Vec::new(), true),
            };
        }
        _ => {}
    }
    if is_nan(v) {
        return match op {
            PlanOp::Eq | PlanOp::Lte | PlanOp::Gte => (vec![Interval::point(owned)], true),
            PlanOp::Lt | PlanOp::Gt => (Vec::new(), true),
        };
    }
    if op == PlanOp::Eq {
        let exact = !matches!(v, RawBsonRef::Document(_));
        return (vec![Interval::point(owned)], exact);
    }
    let Some((min, min_incl, max, max_incl)) = type_bracket(canonical_type(v)) else {
        return full;
    };
    let i = match op {
        PlanOp::Lt | PlanOp::Lte => Interval::new(min, min_incl, owned, op == PlanOp::Lte),
        PlanOp::Gt | PlanOp::Gte => Interval::new(owned, op == PlanOp::Gte, max, max_incl),
        PlanOp::Eq => Interval::point(owned),
    };
    (union(vec![i]), true)
}

/// A regex reads strings (all, or those with its literal prefix when it is anchored and
/// case-sensitive) and regex values equal to itself.
fn regex_bounds(re: &Regex) -> Vec<Interval> {
    let mut out = Vec::new();
    if let (Ok(pattern), Ok(options)) = (
        bson::raw::CString::try_from(re.pattern()),
        bson::raw::CString::try_from(re.options()),
    ) {
        out.push(Interval::point(RawBson::RegularExpression(bson::Regex {
            pattern,
            options,
        })));
    }
    let strings = type_bracket(rank::STRING).map(|(a, ai, b, bi)| Interval::new(a, ai, b, bi));
    match regex_prefix(re.pattern(), re.options()) {
        Some(prefix) if !prefix.is_empty() => {
            let mut chars: Vec<char> = prefix.chars().collect();
            let next = chars
                .pop()
                .and_then(|c| (u32::from(c) + 1..=0x10_FFFF).find_map(char::from_u32));
            match next {
                Some(n) => {
                    chars.push(n);
                    out.push(Interval::new(
                        RawBson::String(prefix),
                        true,
                        RawBson::String(chars.into_iter().collect()),
                        false,
                    ));
                }
                None => out.extend(strings),
            }
        }
        _ => out.extend(strings),
    }
    out
}

/// The literal prefix every match of an anchored regex starts with: `^abc` → `abc`. `None`
/// when the pattern is not anchored at the start of the string, has an alternation, or has
/// options that change what `^` or letters mean.
pub fn regex_prefix(pattern: &str, options: &str) -> Option<String> {
    if options.contains(['i', 'm', 'x']) || pattern.contains('|') {
        return None;
    }
    let rest = pattern
        .strip_prefix('^')
        .or_else(|| pattern.strip_prefix("\\A"))?;
    let mut out = String::new();
    let mut chars = rest.chars().peekable();
    while let Some(c) = chars.next() {
        let literal = if c == '\\' {
            match chars.peek() {
                Some(&e) if e.is_ascii_punctuation() => {
                    chars.next();
                    e
                }
                _ => break,
            }
        } else if c.is_alphanumeric()
            || (c.is_ascii_punctuation() && !".*+?()[]{}|^$".contains(c))
            || c == ' '
        {
            c
        } else {
            if matches!(c, '*' | '?' | '{') {
                // The last literal is optional.
                out.pop();
            }
            break;
        };
        if matches!(chars.peek(), Some('*' | '?' | '{')) {
            break;
        }
        out.push(literal);
    }
    Some(out)
}

/// A `hint`: an index by name or key pattern, or `$natural` (a collection scan).
#[derive(Debug, Clone, PartialEq)]
pub enum Hint {
    /// `{$natural: 1}` or `{$natural: -1}`.
    Natural(bool),
    /// An index name.
    Name(String),
    /// An index key pattern.
    Key(RawDocumentBuf),
}

impl Hint {
    /// Reads a `hint` option: a string or a document (an empty one is no hint, as in mongod).
    /// `field` names the option for the type error.
    pub fn parse(v: RawBsonRef<'_>, field: &str) -> CommandResult<Option<Hint>> {
        match v {
            RawBsonRef::String(s) => Ok(Some(Hint::Name(s.to_owned()))),
            RawBsonRef::Document(d) => {
                let mut iter = d.iter();
                let first = iter
                    .next()
                    .transpose()
                    .map_err(|e| CommandError::new(ErrorCode::InvalidBSON, e.to_string()))?;
                match first {
                    None => Ok(None),
                    Some((k, n)) if k.as_str() == "$natural" => {
                        let dir = super::compare::number_as_f64(n).unwrap_or(0.0);
                        if dir == 0.0 || iter.next().is_some() {
                            return Err(CommandError::bad_value("$natural hint must be 1 or -1"));
                        }
                        Ok(Some(Hint::Natural(dir < 0.0)))
                    }
                    Some(_) => Ok(Some(Hint::Key(d.to_owned()))),
                }
            }
            other => Err(CommandError::new(
                ErrorCode::TypeMismatch,
                format!(
                    "BSON field '{field}' is the wrong type '{}', expected types '[string, object']",
                    crate::commands::type_name(other.element_type())
                ),
            )),
        }
    }

    /// The document form mongod's explain echoes.
    pub fn to_bson(&self) -> RawBson {
        match self {
            Hint::Natural(rev) => {
                let mut d = RawDocumentBuf::new();
                d.append(bson::cstr!("$natural"), if *rev { -1 } else { 1 });
                RawBson::Document(d)
            }
            Hint::Name(n) => RawBson::String(n.clone()),
            Hint::Key(k) => RawBson::Document(k.clone()),
        }
    }
}

/// What [`plan`] plans for.
#[derive(Default)]
pub struct Query<'a> {
    /// The compiled filter (`None`: every document).
    pub filter: Option<&'a Filter>,
    /// The sort, if any.
    pub sort: Option<&'a SortSpec>,
    /// The `hint`, if any.
    pub hint: Option<&'a Hint>,
}

/// An index scan: which index, over which intervals, in which direction.
#[derive(Debug, Clone)]
#[expect(clippy::struct_excessive_bools, reason = "explain reports each flag")]
pub struct IndexScan {
    /// Position in `Collection::indexes`, or `None` for the `_id` index.
    pub index: Option<usize>,
    /// The index id prefixing its entries (for `_id`, the collection's id is).
    pub index_id: u64,
    /// `name`.
    pub name: String,
    /// `key`.
    pub key_pattern: RawDocumentBuf,
    /// The key fields.
    pub fields: Vec<(String, Direction)>,
    /// Per key field, the ordered, disjoint intervals its value must lie in.
    pub bounds: Vec<Vec<Interval>>,
    /// Whether the scan runs from the highest key down.
    pub reverse: bool,
    /// Whether the index was multikey when planned (the scan then drops repeated `_id`s).
    pub multikey: bool,
    /// `unique`.
    pub unique: bool,
    /// `sparse`.
    pub sparse: bool,
    /// Whether it has a `partialFilterExpression`.
    pub partial: bool,
    /// Whether the bounds alone decide the whole filter (explain then shows no `FETCH` filter).
    pub exact: bool,
    /// Whether the scan reads keys only, fetching no document (set by the command when its
    /// answer needs no field and the keys decide it: see `commands::read::keys_only`).
    pub keys_only: bool,
    /// Whether it is a `DISTINCT_SCAN` ([`plan_distinct`]).
    pub distinct: bool,
    /// Whether a projection is made from its entries, fetching no document (set by `find`:
    /// see `commands::read::covering`).
    pub covered: bool,
}

/// How documents are read.
#[derive(Debug, Clone)]
pub enum Access {
    /// Every document, in natural (insertion) order (backwards when `reverse`).
    Collscan {
        /// `$natural: -1`.
        reverse: bool,
    },
    /// An index's entries within bounds.
    Index(IndexScan),
    /// The union of index scans, one per branch of a top-level `$or`, each document once (in
    /// no particular order), filtered by the whole query.
    Or(Vec<IndexScan>),
}

/// A chosen plan.
#[derive(Debug, Clone)]
pub struct Plan {
    /// How documents are read.
    pub access: Access,
    /// Whether they come in the requested sort order (no blocking sort needed).
    pub sorted: bool,
}

fn no_such_index() -> CommandError {
    CommandError::bad_value("hint provided does not correspond to an existing index")
}

fn spec_flag(spec: &RawDocument, name: &str) -> bool {
    spec.get(name)
        .ok()
        .flatten()
        .is_some_and(crate::query::true_value)
}

/// A candidate index as the planner reads it.
struct Candidate {
    index: Option<usize>,
    id: u64,
    name: String,
    key: RawDocumentBuf,
    pattern: KeyPattern,
    multikey: bool,
    unique: bool,
    sparse: bool,
    partial: Option<RawDocumentBuf>,
}

fn id_candidate() -> Candidate {
    let mut key = RawDocumentBuf::new();
    key.append(bson::cstr!("_id"), 1);
    Candidate {
        index: None,
        id: 0,
        name: "_id_".to_owned(),
        key,
        pattern: KeyPattern {
            fields: vec![("_id".to_owned(), Direction::Ascending)],
        },
        multikey: false,
        unique: true,
        sparse: false,
        partial: None,
    }
}

/// The `_id` index and every index with entries, in creation order, with whether each is
/// hidden. Reads `multikey` now: call after taking the snapshot the plan runs on.
fn candidates(indexes: &[IndexSpec]) -> Vec<(Candidate, bool)> {
    let mut out = vec![(id_candidate(), false)];
    for (i, spec) in indexes.iter().enumerate() {
        if spec.id == 0 {
            continue;
        }
        let Ok(pattern) = KeyPattern::parse(&spec.key) else {
            continue;
        };
        out.push((
            Candidate {
                index: Some(i),
                id: spec.id,
                name: spec.name.clone(),
                key: spec.key.clone(),
                pattern,
                multikey: spec.is_multikey(),
                unique: spec_flag(&spec.spec, "unique"),
                sparse: spec_flag(&spec.spec, "sparse"),
                partial: spec.partial_filter.clone(),
            },
            spec_flag(&spec.spec, "hidden"),
        ));
    }
    out
}

/// Under a collation, bounds that start or end inside strings, documents or arrays are not
/// safe over binary keys.
fn collation_safe(list: &[Interval]) -> bool {
    list.iter().all(|i| {
        [&i.lo, &i.hi].into_iter().all(|v| {
            !matches!(
                canonical_type(v.as_raw_bson_ref()),
                rank::STRING | rank::OBJECT | rank::ARRAY
            )
        })
    })
}

/// Per key field: the intervals, whether a conjunct on it excludes documents missing it,
/// and whether the bounds decide every predicate exactly.
struct FieldBounds {
    bounds: Vec<Vec<Interval>>,
    requires_field: bool,
    exact: bool,
}

fn field_bounds(c: &Candidate, conjuncts: &[(&str, PlanPred<'_>)], collated: bool) -> FieldBounds {
    let first_part = |p: &str| p.split('.').next().unwrap_or("").to_owned();
    let mut used_prefixes: Vec<String> = Vec::new();
    let mut bounds = Vec::with_capacity(c.pattern.fields.len());
    let mut requires_field = false;
    // Conjuncts on a path that is not a key field (or not bounded) leave work for the filter.
    let mut exact = !c.multikey;
    let mut consumed = vec![false; conjuncts.len()];
    for (path, _) in &c.pattern.fields {
        // A multikey compound index: two key fields under one top-level field may take their
        // keys from different array elements, so only the first of them is bounded.
        let prefix = first_part(path);
        let shared = c.multikey && used_prefixes.contains(&prefix);
        used_prefixes.push(prefix);
        let mut list = vec![Interval::full()];
        let mut single: Option<Vec<Interval>> = None;
        for (n, (p, pred)) in conjuncts.iter().enumerate() {
            if p != path {
                continue;
            }
            let (b, e) = pred_bounds(pred);
            if matches!(pred, PlanPred::Exists) || excludes_missing(&b) {
                requires_field = true;
            }
            if shared || (collated && !collation_safe(&b)) {
                continue;
            }
            if c.multikey {
                // Two ranges on one multikey field may be met by different elements: use one
                // predicate, preferring a point list.
                let points = b.iter().all(Interval::is_point);
                let better = match &single {
                    None => !b.iter().any(Interval::is_full),
                    Some(s) => points && !s.iter().all(Interval::is_point),
                };
                if better {
                    single = Some(b);
                }
            } else {
                list = intersect(&list, &b);
                consumed[n] = e;
            }
        }
        if let Some(s) = single {
            list = s;
        }
        bounds.push(list);
    }
    if consumed.iter().any(|c| !c) {
        exact = false;
    }
    FieldBounds {
        bounds,
        requires_field,
        exact,
    }
}

/// Whether the filter's conjuncts imply the partial filter expression: every conjunct of the
/// latter is a comparison, `$in` or `$exists: true` whose set of values contains that of some
/// conjunct of the query on the same path (under a query's collation, `collated`, one whose
/// bounds compare no strings, documents or arrays).
fn implies_partial(
    conjuncts: &[(&str, PlanPred<'_>)],
    partial: &RawDocument,
    collated: bool,
) -> bool {
    let Ok(pf) = Filter::compile(partial) else {
        return false;
    };
    let wanted = pf.plan_conjuncts();
    wanted.iter().all(|(path, want)| {
        let (want_bounds, exact) = pred_bounds(want);
        let exists = matches!(want, PlanPred::Exists);
        if !exists && !exact {
            return false;
        }
        conjuncts.iter().any(|(p, have)| {
            if p != path {
                return false;
            }
            let (have_bounds, _) = pred_bounds(have);
            if exists {
                matches!(have, PlanPred::Exists) || excludes_missing(&have_bounds)
            } else {
                // The partial filter compares binarily: under the query's collation, a
                // predicate on strings (documents, arrays) may match values it excludes.
                (!collated || collation_safe(&have_bounds)) && covers(&want_bounds, &have_bounds)
            }
        })
    })
}

/// Whether a scan of `c` within `bounds` returns documents in `sort`'s order, and then
/// forwards (`Some(false)`) or backwards (`Some(true)`).
fn sort_direction(
    c: &Candidate,
    bounds: &[Vec<Interval>],
    sort: &[(String, bool)],
) -> Option<bool> {
    if c.multikey || sort.is_empty() {
        return None;
    }
    let point = |i: usize| {
        bounds
            .get(i)
            .is_some_and(|b| b.len() == 1 && b[0].is_point())
    };
    // Sort keys on fields pinned to one value do not change the order.
    let mut rest: Vec<&(String, bool)> = sort
        .iter()
        .filter(|(p, _)| {
            !c.pattern
                .fields
                .iter()
                .enumerate()
                .any(|(i, (f, _))| f == p && point(i))
        })
        .collect();
    if rest.is_empty() {
        return Some(false);
    }
    let mut reverse = None;
    for (i, (field, dir)) in c.pattern.fields.iter().enumerate() {
        let Some((path, asc)) = rest.first().map(|k| (&k.0, k.1)) else {
            break;
        };
        if field == path {
            let backwards = asc != (*dir == Direction::Ascending);
            if reverse.is_some_and(|r| r != backwards) {
                return None;
            }
            reverse = Some(backwards);
            rest.remove(0);
        } else if !point(i) {
            return None;
        }
    }
    if rest.is_empty() { reverse } else { None }
}

/// A candidate with its score, bounds and sort direction.
type Scored<'c> = (
    (usize, bool, bool),
    &'c Candidate,
    FieldBounds,
    Option<bool>,
);

/// Chooses how to read a collection for `query`. `indexes` are the collection's (in creation
/// order); their multikey flags are read here, so plan after taking the snapshot to scan.
/// Errors: a hint that names no usable index.
pub fn plan(query: &Query<'_>, indexes: &[IndexSpec]) -> CommandResult<Plan> {
    let natural = query.sort.and_then(SortSpec::natural);
    let sort_keys = query
        .sort
        .filter(|s| !s.is_collated())
        .map(SortSpec::plan_keys)
        .unwrap_or_default();
    let wants_sort = query.sort.is_some_and(|s| !s.is_empty());
    let collscan = |reverse: bool| Plan {
        access: Access::Collscan { reverse },
        sorted: !wants_sort,
    };
    if let Some(Hint::Natural(reverse)) = query.hint {
        return Ok(collscan(*reverse));
    }
    let conjuncts = query.filter.map(Filter::plan_conjuncts).unwrap_or_default();
    let collated = query.filter.is_some_and(|f| f.collation().is_some());
    // Bounds only come from path predicates: any other top-level clause (`$or`, `$expr`…)
    // is left to the filter.
    let paths_only = query.filter.is_none_or(Filter::paths_only);
    let all = candidates(indexes);
    let build = |c: &Candidate, fb: FieldBounds, reverse: bool| IndexScan {
        index: c.index,
        index_id: c.id,
        name: c.name.clone(),
        key_pattern: c.key.clone(),
        fields: c.pattern.fields.clone(),
        bounds: fb.bounds,
        reverse,
        multikey: c.multikey,
        unique: c.unique,
        sparse: c.sparse,
        partial: c.partial.is_some(),
        exact: fb.exact && paths_only,
        keys_only: false,
        distinct: false,
        covered: false,
    };
    if let Some(hint) = query.hint {
        let found = all.iter().find(|(c, _)| match hint {
            Hint::Name(n) => &c.name == n,
            Hint::Key(k) => compare_docs(&c.key, k) == Ordering::Equal,
            Hint::Natural(_) => false,
        });
        let Some((c, hidden)) = found else {
            return Err(no_such_index());
        };
        if *hidden
            || c.partial
                .as_ref()
                .is_some_and(|p| !implies_partial(&conjuncts, p, collated))
        {
            return Err(no_such_index());
        }
        let fb = field_bounds(c, &conjuncts, collated);
        let dir = sort_direction(c, &fb.bounds, &sort_keys);
        return Ok(Plan {
            sorted: !wants_sort || dir.is_some(),
            access: Access::Index(build(c, fb, dir.unwrap_or(false))),
        });
    }
    if natural.is_some() {
        return Ok(collscan(natural == Some(-1)));
    }
    if let Some((c, fb, dir)) = best_index(&all, &conjuncts, collated, &sort_keys, wants_sort) {
        return Ok(Plan {
            sorted: !wants_sort || dir.is_some(),
            access: Access::Index(build(c, fb, dir.unwrap_or(false))),
        });
    }
    // No index bounds the whole filter: a top-level `$or` whose every branch an index
    // bounds (with the conjuncts beside the `$or`) is read as the union of those scans.
    if let Some(branches) = query.filter.and_then(Filter::or_branches) {
        let mut legs = Vec::with_capacity(branches.len());
        for branch in branches {
            let mut both = branch;
            both.extend(conjuncts.iter().copied());
            let Some((c, fb, _)) = best_index(&all, &both, collated, &[], false) else {
                return Ok(collscan(false));
            };
            let mut leg = build(c, fb, false);
            // The whole filter is applied to what the legs fetch.
            leg.exact = false;
            legs.push(leg);
        }
        if !legs.is_empty() {
            return Ok(Plan {
                sorted: !wants_sort,
                access: Access::Or(legs),
            });
        }
    }
    Ok(collscan(false))
}

/// The best visible index to read for `conjuncts`: its bounds, and the direction that gives
/// `sort_keys`' order if one does. Scored by how many leading fields are pinned to points,
/// then whether a bounded field follows them, then whether it gives the order. `None` when
/// no index bounds its first field (nor gives the order).
fn best_index<'c>(
    all: &'c [(Candidate, bool)],
    conjuncts: &[(&str, PlanPred<'_>)],
    collated: bool,
    sort_keys: &[(String, bool)],
    wants_sort: bool,
) -> Option<(&'c Candidate, FieldBounds, Option<bool>)> {
    let mut best: Option<Scored<'_>> = None;
    for (c, hidden) in all {
        if *hidden {
            continue;
        }
        if c.partial
            .as_ref()
            .is_some_and(|p| !implies_partial(conjuncts, p, collated))
        {
            continue;
        }
        let fb = field_bounds(c, conjuncts, collated);
        if c.sparse && !fb.requires_field {
            continue;
        }
        let points = fb
            .bounds
            .iter()
            .take_while(|b| !b.is_empty() && b.iter().all(Interval::is_point))
            .count();
        let ranged = fb
            .bounds
            .get(points)
            .is_some_and(|b| !b.iter().any(Interval::is_full));
        let dir = sort_direction(c, &fb.bounds, sort_keys).filter(|_| wants_sort);
        let leading = fb
            .bounds
            .first()
            .is_some_and(|b| !b.iter().any(Interval::is_full));
        if !leading && dir.is_none() {
            continue;
        }
        // An `_id` pinned to one value is at most one document: nothing beats it.
        if c.index.is_none()
            && fb
                .bounds
                .first()
                .is_some_and(|b| b.len() == 1 && b[0].is_point())
        {
            return Some((c, fb, dir));
        }
        let score = (points, ranged, dir.is_some());
        if best.as_ref().is_none_or(|(s, ..)| score > *s) {
            best = Some((score, c, fb, dir));
        }
    }
    best.map(|(_, c, fb, dir)| (c, fb, dir))
}

/// A `DISTINCT_SCAN` for `distinct` on `key` (a dotted path): a visible index that is not
/// multikey, whose first field is `key`, within the bounds `query`'s filter gives it. The
/// scan reads one document per distinct first component and skips the rest of its keys.
/// `None` when no index serves, or the query has a hint or a collation (values equal under
/// it may have several keys: the ordinary plan then finds them all).
pub fn plan_distinct(query: &Query<'_>, indexes: &[IndexSpec], key: &str) -> Option<IndexScan> {
    if query.hint.is_some() || query.filter.is_some_and(|f| f.collation().is_some()) {
        return None;
    }
    let conjuncts = query.filter.map(Filter::plan_conjuncts).unwrap_or_default();
    let paths_only = query.filter.is_none_or(Filter::paths_only);
    let all = candidates(indexes);
    // The fewest key fields first: the fewest keys per document value.
    let (c, fb) = all
        .iter()
        .filter(|(c, hidden)| {
            !*hidden
                && c.index.is_some()
                && !c.multikey
                && c.pattern.fields.first().is_some_and(|(p, _)| p == key)
                && c.partial
                    .as_ref()
                    .is_none_or(|p| implies_partial(&conjuncts, p, false))
        })
        .map(|(c, _)| (c, field_bounds(c, &conjuncts, false)))
        .min_by_key(|(c, _)| c.pattern.fields.len())?;
    Some(IndexScan {
        index: c.index,
        index_id: c.id,
        name: c.name.clone(),
        key_pattern: c.key.clone(),
        fields: c.pattern.fields.clone(),
        bounds: fb.bounds,
        reverse: false,
        multikey: false,
        unique: c.unique,
        sparse: c.sparse,
        partial: c.partial.is_some(),
        exact: fb.exact && paths_only,
        keys_only: false,
        distinct: true,
        covered: false,
    })
}

/// A half-open range of keys: from `lower` (inclusive) to `upper` (exclusive; `None`: to the
/// end of the index).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyRange {
    /// First key in.
    pub lower: Vec<u8>,
    /// First key out.
    pub upper: Option<Vec<u8>>,
}

impl KeyRange {
    /// Whether the range holds every key under `prefix` (an index id, or the collection prefix
    /// of `_id` keys) whose first field is stored `descending` or not: it begins at or below
    /// that field's lowest encoded component (`MinKey` ascending, `MaxKey` descending) and
    /// ends above its highest.
    pub fn covers_all(&self, prefix: &[u8], descending: bool) -> bool {
        let with = |component: &[u8]| {
            let mut k = prefix.to_vec();
            k.extend_from_slice(component);
            k
        };
        let (lowest, highest) = if descending {
            (
                encode(&RawBson::MaxKey, Direction::Descending),
                encode(&RawBson::MinKey, Direction::Descending),
            )
        } else {
            (
                encode(&RawBson::MinKey, Direction::Ascending),
                encode(&RawBson::MaxKey, Direction::Ascending),
            )
        };
        let Some(above) = prefix_end(&highest) else {
            return false;
        };
        self.lower <= with(&lowest) && self.upper.as_ref().is_none_or(|u| *u >= with(&above))
    }
}

/// One key field's intervals as byte ranges of its encoded component ([`KeyRange`]s relative
/// to the component, ordered).
#[derive(Debug, Clone)]
pub struct FieldCheck {
    /// Whether the component is stored complemented.
    pub descending: bool,
    /// Ordered byte ranges of the component.
    pub ranges: Vec<KeyRange>,
}

impl FieldCheck {
    /// Whether an encoded component lies in one of the ranges.
    pub fn admits(&self, component: &[u8]) -> bool {
        self.ranges.iter().any(|r| {
            component >= r.lower.as_slice() && r.upper.as_deref().is_none_or(|u| component < u)
        })
    }
}

fn encode(v: &RawBson, dir: Direction) -> Vec<u8> {
    let mut out = Vec::new();
    encode_component(v.as_raw_bson_ref(), dir, &mut out);
    out
}

/// The byte ranges of a field's intervals (component bytes), in ascending byte order.
fn field_check(list: &[Interval], dir: Direction) -> FieldCheck {
    let mut ranges: Vec<KeyRange> = list
        .iter()
        .map(|i| {
            let (lo, lo_incl, hi, hi_incl) = match dir {
                Direction::Ascending => (&i.lo, i.lo_incl, &i.hi, i.hi_incl),
                Direction::Descending => (&i.hi, i.hi_incl, &i.lo, i.lo_incl),
            };
            let (lo, hi) = (encode(lo, dir), encode(hi, dir));
            // A component equal to a value starts with (is) its encoding.
            let lower = if lo_incl {
                lo
            } else {
                prefix_end(&lo).unwrap_or_else(|| vec![0xFF; lo.len() + 1])
            };
            let upper = if hi_incl { prefix_end(&hi) } else { Some(hi) };
            KeyRange { lower, upper }
        })
        .collect();
    ranges.sort_by(|a, b| a.lower.cmp(&b.lower));
    FieldCheck {
        descending: dir == Direction::Descending,
        ranges,
    }
}

/// The most explicit ranges a scan builds before checking later fields entry by entry.
const MAX_RANGES: usize = 1024;

impl IndexScan {
    /// The key ranges to walk (in scan order: reversed when the scan is) under `prefix` (the
    /// index id, or the collection prefix for `_id`), and a check per key field. Fields pinned
    /// to points lead explicit ranges (their product, while it stays small); the next field's
    /// intervals end them; later fields are checked per entry.
    pub fn key_ranges(&self, prefix: &[u8]) -> (Vec<KeyRange>, Vec<FieldCheck>) {
        let checks: Vec<FieldCheck> = self
            .fields
            .iter()
            .zip(&self.bounds)
            .map(|((_, dir), list)| field_check(list, *dir))
            .collect();
        let mut ranges = vec![KeyRange {
            lower: prefix.to_vec(),
            upper: prefix_end(prefix),
        }];
        for (check, list) in checks.iter().zip(&self.bounds) {
            if ranges.len() * check.ranges.len() > MAX_RANGES {
                break;
            }
            // Judged on the intervals: a byte range may look like one key's (`[x, x+1)`)
            // without being one, as a descending field's range of strings between `"a"` and
            // `"b"` does (both ends cut inside the strings).
            let all_points = list.iter().all(Interval::is_point);
            let mut next = Vec::with_capacity(ranges.len() * check.ranges.len());
            for p in &ranges {
                for r in &check.ranges {
                    let mut lower = p.lower.clone();
                    lower.extend_from_slice(&r.lower);
                    let upper = match &r.upper {
                        Some(u) => {
                            let mut k = p.lower.clone();
                            k.extend_from_slice(u);
                            Some(k)
                        }
                        None => prefix_end(&p.lower).or_else(|| p.upper.clone()),
                    };
                    next.push(KeyRange { lower, upper });
                }
            }
            ranges = next;
            if !all_points || ranges.is_empty() {
                break;
            }
        }
        if self.reverse {
            ranges.reverse();
        }
        (ranges, checks)
    }

    /// `indexBounds` as explain shows it: per key field, its intervals as strings, in the
    /// order the scan meets them.
    pub fn bounds_doc(&self) -> RawDocumentBuf {
        let mut doc = RawDocumentBuf::new();
        for ((path, dir), list) in self.fields.iter().zip(&self.bounds) {
            let reversed = (*dir == Direction::Descending) != self.reverse;
            let mut arr = bson::RawArrayBuf::new();
            let items: Vec<String> = if reversed {
                list.iter().rev().map(|i| i.display(true)).collect()
            } else {
                list.iter().map(|i| i.display(false)).collect()
            };
            for s in items {
                arr.push(s);
            }
            put(&mut doc, path, arr);
        }
        doc
    }
}

impl IndexScan {
    /// `COUNT_SCAN`'s `indexBounds` (`startKey`, `startKeyInclusive`, `endKey`,
    /// `endKeyInclusive`) when the bounds are one range of keys: fields pinned to one value,
    /// then at most one bounded by a single interval, then fields left whole. `None` otherwise
    /// (explain then shows the scan as an `IXSCAN`).
    pub fn count_bounds(&self) -> Option<RawDocumentBuf> {
        let mut start = RawDocumentBuf::new();
        let mut end = RawDocumentBuf::new();
        // Inclusive ends of the range so far (all points: both).
        let (mut start_incl, mut end_incl) = (true, true);
        let mut ranged = false;
        for ((path, dir), list) in self.fields.iter().zip(&self.bounds) {
            let [i] = list.as_slice() else {
                return None;
            };
            let desc = *dir == Direction::Descending;
            if ranged {
                if !i.is_full() {
                    return None;
                }
                // After the bounded field, each field runs over its keys in index order,
                // from the end that keeps the range's inclusiveness.
                let (lo, hi) = if desc {
                    (RawBson::MaxKey, RawBson::MinKey)
                } else {
                    (RawBson::MinKey, RawBson::MaxKey)
                };
                put(
                    &mut start,
                    path,
                    if start_incl { lo.clone() } else { hi.clone() },
                );
                put(&mut end, path, if end_incl { hi } else { lo });
                continue;
            }
            let (from, from_incl, to, to_incl) = if desc {
                (&i.hi, i.hi_incl, &i.lo, i.lo_incl)
            } else {
                (&i.lo, i.lo_incl, &i.hi, i.hi_incl)
            };
            put(&mut start, path, from.clone());
            put(&mut end, path, to.clone());
            if !i.is_point() {
                ranged = true;
                start_incl = from_incl;
                end_incl = to_incl;
            }
        }
        let mut doc = RawDocumentBuf::new();
        doc.append(bson::cstr!("startKey"), start);
        doc.append(bson::cstr!("startKeyInclusive"), start_incl);
        doc.append(bson::cstr!("endKey"), end);
        doc.append(bson::cstr!("endKeyInclusive"), end_incl);
        Some(doc)
    }
}

/// Appends `key: value` (a key holding NUL, which no stored name does, is left out).
pub fn put(doc: &mut RawDocumentBuf, key: &str, value: impl Into<RawBson>) {
    if let Ok(k) = bson::raw::CString::try_from(key) {
        doc.append(k, value.into());
    }
}

#[cfg(test)]
mod tests;
