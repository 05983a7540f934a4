//! Query filters: `Filter::compile(&query)?` once, then `filter.matches(&doc)` per document.
//!
//! The whole MongoDB 7.0 query language, parsed as mongod's `MatchExpressionParser` does and
//! with its error codes and messages:
//!
//! - implicit equality (`{a: 1}`), `$eq $ne $gt $gte $lt $lte $in $nin` with BSON type
//!   bracketing ([`compare`]'s order; numbers compare by value across int32/int64/double/
//!   decimal128; `null` also matches missing and undefined; MinKey/MaxKey bound every type);
//! - `$and $or $nor` (any level), `$not` (a regex or an operator document), `$comment`,
//!   `$alwaysTrue`, `$alwaysFalse`;
//! - `$exists`, `$type` (names, numbers, `"number"`, arrays of them);
//! - `$regex`/`$options` and regex values (`{a: /x/i}`, also inside `$in`, `$nin`, `$all`,
//!   `$not`), through [`Regex`] (PCRE syntax, see `query::regex` for what differs);
//! - `$mod`, `$all` (values, regexes, or all `$elemMatch`), `$elemMatch` (value form
//!   `{$elemMatch: {$gt: 1}}` and document form `{$elemMatch: {b: 1}}`), `$size`;
//! - `$bitsAllSet $bitsAnySet $bitsAllClear $bitsAnyClear` (bitmask number, bit positions,
//!   `BinData`; numbers test as sign-extended 64-bit integers, `BinData` as little-endian bytes);
//! - `$expr` with the aggregation expressions of [`Expression`]; its evaluation errors fail the
//!   query ([`Filter::try_matches`]);
//! - `$sampleRate` (a random sample, as mongod's `$rand` rewrite).
//!
//! Strings compare as bytes, or by the command's collation ([`Filter::with_collation`]; not
//! in `$regex`, and not yet in `$expr`).
//!
//! Paths are dotted, traverse arrays implicitly, and index arrays with numeric components
//! (`a.0.b`), as in [`path`](super::path). Operators that look at arrays as a whole (`$size`, `$elemMatch`)
//! do not expand a leaf array.
//!
//! Not supported: `$where` (Ebb runs no JavaScript: mongod's error for a server without a
//! script engine), `$text`, geo operators and `$jsonSchema` (`NotImplemented`). Unknown
//! operators answer mongod's `BadValue`.
//!
//! [`Filter::matched_array_index`] reports the array position a match was found at (mongod's
//! `elemMatchKey`), which the positional projection `a.$` and positional updates need.

use std::cmp::Ordering;
use std::ops::ControlFlow;
use std::sync::Arc;

use bson::spec::ElementType;
use bson::{RawArray, RawBson, RawBsonRef, RawDocument};

use super::collation::Collation;
use super::compare::{canonical_type, compare, compare_collated, is_nan, number_as_f64, rank};
use super::display;
use super::expr::{Expression, Variables};
use super::path::{FieldPath, LeafArrays, array_index};
use super::regex::Regex;
use super::{invalid_bson, not_implemented, true_value};
use crate::error::{CommandError, ErrorCode};

/// Where a filter is used, which decides the special operators it may contain (mongod's
/// `AllowedFeatures`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FilterContext {
    /// `find`, `count`, `distinct`, `delete`, `update`, `findAndModify`: everything.
    #[default]
    Query,
    /// An aggregation `$match`: no `$where`.
    Pipeline,
}

/// A compiled query filter.
#[derive(Debug, Clone)]
pub struct Filter {
    root: Node,
    /// The distinct first components of the paths in `root`, fetched in one pass per document.
    fields: Vec<String>,
    /// The collation strings compare with (`None`: binary), see [`Filter::with_collation`].
    collation: Option<Arc<Collation>>,
}

#[derive(Debug, Clone)]
enum Node {
    And(Vec<Node>),
    Or(Vec<Node>),
    Nor(Vec<Node>),
    Not(Box<Node>),
    Const(bool),
    Path {
        path: FieldPath,
        /// Index of the path's first component in `Filter::fields`.
        field: usize,
        pred: Pred,
    },
    /// `$expr`.
    Expr(Box<Expression>),
    /// `$sampleRate`: matches with this probability.
    Sample(f64),
}

/// A predicate on one value a path reaches (mongod's `matchesSingleElement`).
#[derive(Debug, Clone)]
enum Pred {
    Cmp(CmpOp, RawBson),
    In(InSet),
    Exists,
    Regex(Box<Regex>),
    Type(TypeSet),
    Mod {
        divisor: i64,
        remainder: i64,
    },
    Size(i64),
    Bits(BitTest),
    /// `$elemMatch: {b: 1}`: some element, a document (or array), matches the sub-filter.
    ElemMatchObject(Box<Filter>),
    /// `$elemMatch: {$gt: 1}`: some element satisfies every predicate.
    ElemMatchValue(Vec<Pred>),
    /// Only inside `$elemMatch` value form, where `$not`/`$ne`/`$nin`/`$all` apply per element.
    And(Vec<Pred>),
    Not(Box<Pred>),
    Const(bool),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CmpOp {
    Eq,
    Lt,
    Lte,
    Gt,
    Gte,
}

/// `$in`'s values, sorted by [`compare`] for binary search, and its regexes.
#[derive(Debug, Clone)]
struct InSet {
    sorted: Vec<RawBson>,
    has_null: bool,
    regexes: Vec<Regex>,
}

/// `$type`'s set of BSON types.
#[derive(Debug, Clone, Default)]
struct TypeSet {
    all_numbers: bool,
    types: Vec<ElementType>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BitOp {
    AllSet,
    AllClear,
    AnySet,
    AnyClear,
}

#[derive(Debug, Clone)]
struct BitTest {
    op: BitOp,
    positions: Vec<u32>,
}

/// A parse result before it is attached to a path: a predicate, or `$not`/`$all` around some.
enum Item {
    Leaf(Pred),
    Not(Vec<Item>),
    And(Vec<Item>),
    Const(bool),
}

/// mongod's `DocumentParseLevel`, as far as it matters: whether predicates see the whole
/// document (`$expr`, `$where`, `$text` are allowed) or an array element (`$elemMatch`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Level {
    Top,
    Sub,
}

#[derive(Clone, Copy)]
struct Parse<'v> {
    level: Level,
    context: FilterContext,
    /// The command's variables, which `$expr` sees.
    vars: &'v Arc<Variables>,
}

/// The array position recorded by a match (mongod's `MatchDetails::elemMatchKey`).
struct Key {
    want: bool,
    value: Option<usize>,
}

impl Key {
    fn ignore() -> Key {
        Key {
            want: false,
            value: None,
        }
    }
}

impl Filter {
    /// Compiles a filter document, with MongoDB's errors for malformed ones.
    pub fn compile(query: &RawDocument) -> Result<Filter, CommandError> {
        Filter::compile_with(query, FilterContext::Query)
    }

    /// Compiles a filter for `context` (an aggregation `$match` rejects `$where`).
    pub fn compile_with(
        query: &RawDocument,
        context: FilterContext,
    ) -> Result<Filter, CommandError> {
        Filter::compile_in(query, context, &Arc::new(Variables::system_clock()))
    }

    /// Compiles a filter for `context` whose `$expr`s see the command's variables (`$$NOW`
    /// and `let`).
    pub fn compile_in(
        query: &RawDocument,
        context: FilterContext,
        vars: &Arc<Variables>,
    ) -> Result<Filter, CommandError> {
        Ok(Filter::from_root(parse_doc(
            query,
            Parse {
                level: Level::Top,
                context,
                vars,
            },
        )?))
    }

    fn from_root(mut root: Node) -> Filter {
        let mut fields = Vec::new();
        root.assign_fields(&mut fields);
        Filter {
            root,
            fields,
            collation: None,
        }
    }

    /// This filter with strings compared by `collation` (the command's `collation` option):
    /// equality, ranges, `$in`/`$nin`, `$all` and `$elemMatch` use it; `$regex`, `$type`,
    /// `$exists` and field names do not, as in mongod. `None` keeps binary comparison.
    #[must_use]
    pub fn with_collation(mut self, collation: Option<Arc<Collation>>) -> Filter {
        if let Some(c) = &collation {
            self.root.collate(c);
        }
        self.collation = collation;
        self
    }

    /// The collation this filter compares strings with, if not the simple one.
    pub fn collation(&self) -> Option<&Arc<Collation>> {
        self.collation.as_ref()
    }

    /// A filter that matches every document (`{}`).
    pub fn match_all() -> Filter {
        Filter {
            root: Node::And(Vec::new()),
            fields: Vec::new(),
            collation: None,
        }
    }

    /// Whether `doc` satisfies the filter. An `$expr` that fails to evaluate counts as no match;
    /// use [`Filter::try_matches`] to report the error as mongod does.
    pub fn matches(&self, doc: &RawDocument) -> bool {
        self.try_matches(doc).unwrap_or(false)
    }

    /// Whether `doc` satisfies the filter, or the error an `$expr` raised while evaluating
    /// (mongod fails the whole operation with it).
    pub fn try_matches(&self, doc: &RawDocument) -> Result<bool, CommandError> {
        self.eval(doc, &mut Key::ignore())
    }

    /// When `doc` matches, the position in the first array on a matching path at which the
    /// match was found (mongod's `elemMatchKey`): `{a: 2}` on `{a: [1, 2]}` gives `Some(1)`.
    /// `None` if the document does not match or no predicate matched inside an array. As in
    /// mongod, within `$and` the last predicate that records a position wins, and `$or`,
    /// `$nor` and `$not` record none.
    pub fn matched_array_index(&self, doc: &RawDocument) -> Option<usize> {
        let mut key = Key {
            want: true,
            value: None,
        };
        match self.eval(doc, &mut key) {
            Ok(true) => key.value,
            _ => None,
        }
    }

    fn eval(&self, doc: &RawDocument, key: &mut Key) -> Result<bool, CommandError> {
        self.eval_collated(doc, key, self.collation.as_deref())
    }

    /// [`Filter::eval`] with `collation` rather than this filter's own (an `$elemMatch`
    /// sub-filter compares as the filter around it).
    fn eval_collated(
        &self,
        doc: &RawDocument,
        key: &mut Key,
        coll: Option<&Collation>,
    ) -> Result<bool, CommandError> {
        // One pass over the document fetches every top-level field the filter reads (the first
        // occurrence of each, as `RawDocument::get` would), instead of one scan per predicate.
        let values = super::path::top_level_fields(doc, &self.fields);
        self.root.eval(doc, &values, key, coll)
    }

    /// Whether the filter is `{}` (or reduces to an empty conjunction).
    pub fn is_match_all(&self) -> bool {
        matches!(&self.root, Node::And(v) if v.is_empty())
    }

    /// The `_id` value every matching document must have, when the filter's top-level
    /// conjunction contains an equality on `_id` (`{_id: v}` or `{_id: {$eq: v}}`) with a value
    /// that is not an array, document or regex. Commands can then fetch the single document
    /// keyed by this value (see [`keystring`](super::keystring)) instead of scanning; if the
    /// filter has other conditions (`{_id: 1, a: 2}`), they must still call [`matches`] on it.
    ///
    /// [`matches`]: Filter::matches
    ///
    /// With a collation, an `_id` string matches other strings than itself (`"a"` and `"A"` at
    /// strength 2), so no value is reported for one.
    pub fn id_equality(&self) -> Option<RawBson> {
        let collated = self.collation.is_some();
        self.top_level().into_iter().find_map(|e| match e {
            Node::Path {
                path,
                pred: Pred::Cmp(CmpOp::Eq, v),
                ..
            } if path.dotted() == "_id"
                && !matches!(
                    v,
                    RawBson::Array(_) | RawBson::Document(_) | RawBson::RegularExpression(_)
                )
                && !(collated && matches!(v, RawBson::String(_) | RawBson::Symbol(_))) =>
            {
                Some(v.clone())
            }
            _ => None,
        })
    }

    /// The equalities of the top-level conjunction (including nested `$and` and `$eq`), in
    /// filter order, as `(dotted path, value)`: the fields an upsert seeds its new document
    /// with (see [`upsert_seed`](super::update::upsert_seed)).
    pub fn equality_fields(&self) -> Vec<(String, RawBson)> {
        let mut out = Vec::new();
        collect_equalities(&self.root, &mut out);
        out
    }

    /// The top-level conjunction (nested `$and`s flattened) as the query planner sees it: one
    /// `(dotted path, predicate)` per conjunct on a path. Conjuncts that are not on one path
    /// (`$or`, `$nor`, `$not`, `$expr`, …) are left out: a plan built from the rest reads a
    /// superset of the matches, and the whole filter is applied to every document it reads.
    pub fn plan_conjuncts(&self) -> Vec<(&str, PlanPred<'_>)> {
        self.top_level()
            .into_iter()
            .filter_map(|e| match e {
                Node::Path { path, pred, .. } => Some((path.dotted(), pred.plan_view())),
                _ => None,
            })
            .collect()
    }

    /// The conjuncts at the top level, with nested `$and`s flattened.
    fn top_level(&self) -> Vec<&Node> {
        fn flatten<'e>(e: &'e Node, out: &mut Vec<&'e Node>) {
            match e {
                Node::And(v) => v.iter().for_each(|c| flatten(c, out)),
                other => out.push(other),
            }
        }
        let mut out = Vec::new();
        flatten(&self.root, &mut out);
        out
    }
}

fn collect_equalities(e: &Node, out: &mut Vec<(String, RawBson)>) {
    match e {
        Node::And(v) => v.iter().for_each(|c| collect_equalities(c, out)),
        Node::Path {
            path,
            pred: Pred::Cmp(CmpOp::Eq, v),
            ..
        } => out.push((path.dotted().to_owned(), v.clone())),
        _ => {}
    }
}

impl Node {
    /// `fields` holds the document's value for each of `Filter::fields`.
    fn eval(
        &self,
        doc: &RawDocument,
        fields: &[Option<RawBsonRef<'_>>],
        key: &mut Key,
        coll: Option<&Collation>,
    ) -> Result<bool, CommandError> {
        Ok(match self {
            Node::And(v) => {
                for e in v {
                    if !e.eval(doc, fields, key, coll)? {
                        key.value = None;
                        return Ok(false);
                    }
                }
                true
            }
            Node::Or(v) => {
                for e in v {
                    if e.eval(doc, fields, &mut Key::ignore(), coll)? {
                        return Ok(true);
                    }
                }
                false
            }
            Node::Nor(v) => {
                for e in v {
                    if e.eval(doc, fields, &mut Key::ignore(), coll)? {
                        return Ok(false);
                    }
                }
                true
            }
            Node::Not(e) => !e.eval(doc, fields, &mut Key::ignore(), coll)?,
            Node::Const(b) => *b,
            Node::Expr(e) => e.evaluate_bool(doc)?,
            Node::Sample(rate) => sample(*rate),
            Node::Path { path, field, pred } => {
                let first = fields.get(*field).copied().flatten();
                let rest = path.parts().get(1..).unwrap_or_default();
                let mut found = None;
                let _ = walk::at(first, rest, pred.leaf(), None, &mut |v, offset| {
                    let mut inner = None;
                    if pred.matches_one(v, &mut inner, coll) {
                        found = Some(offset.or(inner));
                        ControlFlow::Break(())
                    } else {
                        ControlFlow::Continue(())
                    }
                });
                match found {
                    Some(position) => {
                        if key.want && position.is_some() {
                            key.value = position;
                        }
                        true
                    }
                    None => false,
                }
            }
        })
    }

    /// Numbers each path by its first component, collecting the distinct components.
    fn assign_fields(&mut self, fields: &mut Vec<String>) {
        match self {
            Node::And(v) | Node::Or(v) | Node::Nor(v) => {
                for e in v {
                    e.assign_fields(fields);
                }
            }
            Node::Not(e) => e.assign_fields(fields),
            Node::Const(_) | Node::Expr(_) | Node::Sample(_) => {}
            Node::Path { path, field, .. } => {
                let first = path.parts().first().map_or("", String::as_str);
                *field = fields.iter().position(|f| f == first).unwrap_or_else(|| {
                    fields.push(first.to_owned());
                    fields.len() - 1
                });
            }
        }
    }

    /// Prepares the predicates for comparing strings with `c` (sorts `$in` sets).
    fn collate(&mut self, c: &Collation) {
        match self {
            Node::And(v) | Node::Or(v) | Node::Nor(v) => v.iter_mut().for_each(|e| e.collate(c)),
            Node::Not(e) => e.collate(c),
            Node::Path { pred, .. } => pred.collate(c),
            Node::Const(_) | Node::Expr(_) | Node::Sample(_) => {}
        }
    }

    /// An `$and` of `children`, or the single child itself.
    fn and(mut children: Vec<Node>) -> Node {
        if children.len() == 1 {
            children.pop().unwrap_or(Node::Const(true))
        } else {
            Node::And(children)
        }
    }

    fn from_item(path: &str, item: Item) -> Node {
        match item {
            Item::Leaf(pred) => Node::Path {
                path: FieldPath::new(path),
                field: 0,
                pred,
            },
            Item::Not(items) => Node::Not(Box::new(Node::and(
                items
                    .into_iter()
                    .map(|i| Node::from_item(path, i))
                    .collect(),
            ))),
            Item::And(items) => Node::And(
                items
                    .into_iter()
                    .map(|i| Node::from_item(path, i))
                    .collect(),
            ),
            Item::Const(b) => Node::Const(b),
        }
    }
}

/// A uniformly random draw in `[0, 1)` below `rate` (mongod's `{$lt: [{$rand: {}}, rate]}`).
fn sample(rate: f64) -> bool {
    super::random_unit() < rate
}

impl Item {
    fn into_pred(self) -> Pred {
        match self {
            Item::Leaf(p) => p,
            Item::Not(items) => Pred::Not(Box::new(Pred::and(
                items.into_iter().map(Item::into_pred).collect(),
            ))),
            Item::And(items) => Pred::And(items.into_iter().map(Item::into_pred).collect()),
            Item::Const(b) => Pred::Const(b),
        }
    }
}

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
/// ([`Filter::plan_conjuncts`]).
#[derive(Debug)]
pub enum PlanPred<'f> {
    /// Some value the path reaches compares so with the operand (with mongod's type
    /// bracketing, see [`compare`]).
    Cmp(PlanOp, RawBsonRef<'f>),
    /// `$in`: the values (sorted by [`compare`], deduplicated) and the regexes.
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
    fn plan_view(&self) -> PlanPred<'_> {
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

impl Pred {
    fn and(mut preds: Vec<Pred>) -> Pred {
        if preds.len() == 1 {
            preds.pop().unwrap_or(Pred::Const(true))
        } else {
            Pred::And(preds)
        }
    }

    /// See [`Node::collate`].
    fn collate(&mut self, c: &Collation) {
        match self {
            Pred::In(set) => set.collate(c),
            Pred::ElemMatchObject(f) => f.root.collate(c),
            Pred::ElemMatchValue(v) | Pred::And(v) => v.iter_mut().for_each(|p| p.collate(c)),
            Pred::Not(p) => p.collate(c),
            Pred::Cmp(..)
            | Pred::Exists
            | Pred::Regex(_)
            | Pred::Type(_)
            | Pred::Mod { .. }
            | Pred::Size(_)
            | Pred::Bits(_)
            | Pred::Const(_) => {}
        }
    }

    /// How a path ending at an array is expanded for this predicate.
    fn leaf(&self) -> LeafArrays {
        match self {
            Pred::Size(_) | Pred::ElemMatchObject(_) | Pred::ElemMatchValue(_) => {
                LeafArrays::NoExpand
            }
            _ => LeafArrays::Expand,
        }
    }

    /// Whether one value reached by the path (`None`: missing) satisfies the predicate;
    /// `$elemMatch` records the matching element's index in `key`.
    fn matches_one(
        &self,
        v: Option<RawBsonRef<'_>>,
        key: &mut Option<usize>,
        coll: Option<&Collation>,
    ) -> bool {
        match self {
            Pred::Exists => v.is_some(),
            Pred::Cmp(op, rhs) => cmp_matches(*op, v, rhs.as_raw_bson_ref(), coll),
            Pred::In(set) => set.contains(v, coll),
            Pred::Regex(re) => v.is_some_and(|v| re.matches_value(v)),
            Pred::Type(types) => v.is_some_and(|v| types.contains(v)),
            Pred::Mod { divisor, remainder } => v
                .and_then(mod_dividend)
                .is_some_and(|d| d.checked_rem(*divisor).unwrap_or(0) == *remainder),
            Pred::Size(n) => match v {
                Some(RawBsonRef::Array(a)) => {
                    i64::try_from(a.into_iter().count()).is_ok_and(|len| len == *n)
                }
                _ => false,
            },
            Pred::Bits(test) => v.is_some_and(|v| test.matches(v)),
            Pred::ElemMatchObject(sub) => {
                let Some(RawBsonRef::Array(a)) = v else {
                    return false;
                };
                for (i, e) in a.into_iter().map_while(Result::ok).enumerate() {
                    let doc = match e {
                        RawBsonRef::Document(d) => d,
                        // An array element is matched as the document `{"0": …, "1": …}`.
                        RawBsonRef::Array(inner) => match RawDocument::from_bytes(inner.as_bytes())
                        {
                            Ok(d) => d,
                            Err(_) => continue,
                        },
                        _ => continue,
                    };
                    if sub
                        .eval_collated(doc, &mut Key::ignore(), coll)
                        .unwrap_or(false)
                    {
                        *key = Some(i);
                        return true;
                    }
                }
                false
            }
            Pred::ElemMatchValue(preds) => {
                let Some(RawBsonRef::Array(a)) = v else {
                    return false;
                };
                for (i, e) in a.into_iter().map_while(Result::ok).enumerate() {
                    if preds
                        .iter()
                        .all(|p| p.matches_one(Some(e), &mut None, coll))
                    {
                        *key = Some(i);
                        return true;
                    }
                }
                false
            }
            Pred::And(preds) => preds.iter().all(|p| p.matches_one(v, &mut None, coll)),
            Pred::Not(p) => !p.matches_one(v, &mut None, coll),
            Pred::Const(b) => *b,
        }
    }
}

/// mongod's `ComparisonMatchExpression::matchesSingleElement`.
fn cmp_matches(
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
    fn collate(&mut self, collation: &Collation) {
        let c = Some(collation);
        self.sorted
            .sort_by(|a, b| compare_collated(a.as_raw_bson_ref(), b.as_raw_bson_ref(), c));
        self.sorted.dedup_by(|a, b| {
            compare_collated(a.as_raw_bson_ref(), b.as_raw_bson_ref(), c) == Ordering::Equal
        });
    }

    /// Whether `v` is in the set; `coll` must be the collation the set was sorted for.
    fn contains(&self, v: Option<RawBsonRef<'_>>, coll: Option<&Collation>) -> bool {
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

impl TypeSet {
    fn contains(&self, v: RawBsonRef<'_>) -> bool {
        let t = v.element_type();
        (self.all_numbers
            && matches!(
                t,
                ElementType::Int32
                    | ElementType::Int64
                    | ElementType::Double
                    | ElementType::Decimal128
            ))
            || self.types.contains(&t)
    }
}

/// 2^63, the first double above `i64::MAX`.
const TWO_63: f64 = 9_223_372_036_854_775_808.0;

/// A whole double as an `i64`, if it is one (no NaN, infinity, fraction or overflow).
#[expect(clippy::cast_possible_truncation, reason = "range checked first")]
fn exact_i64(d: f64) -> Option<i64> {
    if !d.is_finite() || !(-TWO_63..TWO_63).contains(&d) {
        return None;
    }
    let i = d as i64;
    #[expect(clippy::cast_precision_loss, reason = "comparing the round trip")]
    let back = i as f64;
    (back == d).then_some(i)
}

/// `$mod`'s dividend: integers as they are, doubles and decimals truncated when they fit in
/// 64 bits (mongod's `ModMatchExpression`: NaN, infinities and out-of-range values never
/// match).
fn mod_dividend(v: RawBsonRef<'_>) -> Option<i64> {
    match v {
        RawBsonRef::Int32(i) => Some(i64::from(i)),
        RawBsonRef::Int64(i) => Some(i),
        RawBsonRef::Double(_) | RawBsonRef::Decimal128(_) => exact_i64(number_as_f64(v)?.trunc()),
        _ => None,
    }
}

impl BitTest {
    /// mongod's `BitTestMatchExpression::matchesSingleElement`.
    fn matches(&self, v: RawBsonRef<'_>) -> bool {
        let is_set: Box<dyn Fn(u32) -> bool + '_> = match v {
            RawBsonRef::Binary(b) => Box::new(move |p: u32| {
                let byte = usize::try_from(p / 8).ok().and_then(|i| b.bytes.get(i));
                byte.is_some_and(|byte| (byte >> (p % 8)) & 1 == 1)
            }),
            RawBsonRef::Int32(_)
            | RawBsonRef::Int64(_)
            | RawBsonRef::Double(_)
            | RawBsonRef::Decimal128(_) => {
                let n = match v {
                    RawBsonRef::Int32(i) => i64::from(i),
                    RawBsonRef::Int64(i) => i,
                    // Non-integral or out-of-range doubles never match.
                    _ => match number_as_f64(v).and_then(exact_i64) {
                        Some(i) => i,
                        None => return false,
                    },
                };
                // Positions past 63 read the sign, as in two's complement sign extension.
                Box::new(move |p: u32| if p >= 64 { n < 0 } else { (n >> p) & 1 == 1 })
            }
            _ => return false,
        };
        match self.op {
            BitOp::AllSet => self.positions.iter().all(|&p| is_set(p)),
            BitOp::AllClear => self.positions.iter().all(|&p| !is_set(p)),
            BitOp::AnySet => self.positions.iter().any(|&p| is_set(p)),
            BitOp::AnyClear => self.positions.iter().any(|&p| !is_set(p)),
        }
    }
}

/// Implicit array traversal that also reports where in the first array a value was reached,
/// for [`Filter::matched_array_index`]. It yields exactly the values
/// [`path::for_each_value_at`](super::path::for_each_value_at) yields (tested below), each
/// with mongod's `arrayOffset`: the index in the outermost array traversed, or for a leaf
/// array's elements their own index.
mod walk {
    use std::ops::ControlFlow;

    use bson::{RawArray, RawBsonRef, RawDocument};

    use super::{LeafArrays, array_index};

    pub(super) type Visit<'f, 'a> =
        dyn FnMut(Option<RawBsonRef<'a>>, Option<usize>) -> ControlFlow<()> + 'f;

    /// The values under `first` (the value of the path's first component) for `rest`.
    pub(super) fn at<'a, S: AsRef<str>>(
        first: Option<RawBsonRef<'a>>,
        rest: &[S],
        leaf: LeafArrays,
        offset: Option<usize>,
        f: &mut Visit<'_, 'a>,
    ) -> ControlFlow<()> {
        let Some(v) = first else {
            return f(None, offset);
        };
        if rest.is_empty() {
            return emit_leaf(v, leaf, offset, f);
        }
        match v {
            RawBsonRef::Document(d) => walk_doc(d, rest, leaf, offset, f),
            RawBsonRef::Array(a) => walk_array(a, rest, leaf, offset, f),
            _ => f(None, offset),
        }
    }

    fn walk_doc<'a, S: AsRef<str>>(
        doc: &'a RawDocument,
        path: &[S],
        leaf: LeafArrays,
        offset: Option<usize>,
        f: &mut Visit<'_, 'a>,
    ) -> ControlFlow<()> {
        let mut cur = doc;
        for (i, part) in path.iter().enumerate() {
            let Some(v) = cur.get(part.as_ref()).ok().flatten() else {
                return f(None, offset);
            };
            let rest = &path[i + 1..];
            if rest.is_empty() {
                return emit_leaf(v, leaf, offset, f);
            }
            match v {
                RawBsonRef::Document(d) => cur = d,
                RawBsonRef::Array(a) => return walk_array(a, rest, leaf, offset, f),
                _ => return f(None, offset),
            }
        }
        ControlFlow::Continue(())
    }

    fn emit_leaf<'a>(
        v: RawBsonRef<'a>,
        leaf: LeafArrays,
        offset: Option<usize>,
        f: &mut Visit<'_, 'a>,
    ) -> ControlFlow<()> {
        let RawBsonRef::Array(a) = v else {
            return f(Some(v), offset);
        };
        if leaf != LeafArrays::NoExpand {
            for (i, e) in a.into_iter().map_while(Result::ok).enumerate() {
                f(Some(e), offset.or(Some(i)))?;
            }
        }
        if leaf == LeafArrays::ExpandOmitArray {
            ControlFlow::Continue(())
        } else {
            f(Some(v), offset)
        }
    }

    fn walk_array<'a, S: AsRef<str>>(
        a: &'a RawArray,
        rest: &[S],
        leaf: LeafArrays,
        offset: Option<usize>,
        f: &mut Visit<'_, 'a>,
    ) -> ControlFlow<()> {
        let index = array_index(rest[0].as_ref());
        let after_index = &rest[1..];
        for (i, e) in a.into_iter().map_while(Result::ok).enumerate() {
            let here = offset.or(Some(i));
            if let RawBsonRef::Document(d) = e {
                walk_doc(d, rest, leaf, here, f)?;
            }
            if index != Some(i) {
                continue;
            }
            if after_index.is_empty() {
                f(Some(e), here)?;
                continue;
            }
            match e {
                RawBsonRef::Document(d) => walk_doc(d, after_index, leaf, here, f)?,
                RawBsonRef::Array(inner) => walk_array(inner, after_index, leaf, here, f)?,
                _ => {}
            }
        }
        ControlFlow::Continue(())
    }
}

// ---------------------------------------------------------------------------------------------
// Parsing

fn bad_value(msg: impl Into<String>) -> CommandError {
    CommandError::bad_value(msg)
}

fn failed_to_parse(msg: impl Into<String>) -> CommandError {
    CommandError::new(ErrorCode::FailedToParse, msg)
}

/// The operators mongod parses without a path (`retrievePathlessParser`).
fn is_pathless(name: &str) -> bool {
    matches!(
        name,
        "and"
            | "or"
            | "nor"
            | "comment"
            | "alwaysTrue"
            | "alwaysFalse"
            | "expr"
            | "where"
            | "text"
            | "jsonSchema"
            | "sampleRate"
            | "id"
            | "ref"
            | "db"
    ) || name.starts_with("_internalSchema")
        || name == "_internalBucketGeoWithin"
}

/// The operators mongod accepts after a path (`parsePathAcceptingKeyword`), without `$`.
fn is_path_keyword(name: &str) -> bool {
    matches!(
        name,
        "all"
            | "bitsAllClear"
            | "bitsAllSet"
            | "bitsAnyClear"
            | "bitsAnySet"
            | "elemMatch"
            | "eq"
            | "exists"
            | "geoIntersects"
            | "geoNear"
            | "geoWithin"
            | "gt"
            | "gte"
            | "in"
            | "lt"
            | "lte"
            | "mod"
            | "ne"
            | "near"
            | "nearSphere"
            | "nin"
            | "options"
            | "regex"
            | "size"
            | "type"
            | "within"
    )
}

/// Parses a filter document (the top level, an entry of `$and`/`$or`/`$nor`, or an
/// `$elemMatch` document).
fn parse_doc(doc: &RawDocument, p: Parse<'_>) -> Result<Node, CommandError> {
    let mut children = Vec::new();
    for item in doc {
        let (key, value) = item.map_err(|e| invalid_bson(&e))?;
        let key = key.as_str();
        if let Some(op) = key.strip_prefix('$') {
            if let Some(node) = parse_pathless(key, op, value, p)? {
                children.push(node);
            }
            continue;
        }
        match value {
            RawBsonRef::Document(sub) if is_operator_doc(sub, false) => {
                for item in parse_ops(key, sub, p)? {
                    children.push(Node::from_item(key, item));
                }
            }
            RawBsonRef::RegularExpression(re) => children.push(Node::from_item(
                key,
                Item::Leaf(Pred::Regex(Box::new(Regex::compile(
                    re.pattern.as_str(),
                    re.options.as_str(),
                )?))),
            )),
            _ => children.push(Node::from_item(key, leaf_eq(key, value)?)),
        }
    }
    Ok(Node::and(children))
}

/// A top-level `$operator` (`$and`, `$expr`, …); `None` for `$comment`.
fn parse_pathless(
    key: &str,
    op: &str,
    value: RawBsonRef<'_>,
    p: Parse<'_>,
) -> Result<Option<Node>, CommandError> {
    let top_only = |what: &str| {
        if p.level == Level::Sub {
            Err(bad_value(format!(
                "{what} can only be applied to the top-level document"
            )))
        } else {
            Ok(())
        }
    };
    Ok(Some(match op {
        "and" | "or" | "nor" => parse_tree(key, value, p)?,
        "comment" => return Ok(None),
        "alwaysTrue" | "alwaysFalse" => {
            let n = parse_long(key, value)?;
            if n != 1 {
                return Err(failed_to_parse(format!(
                    "{key} must be an integer value of 1"
                )));
            }
            Node::Const(op == "alwaysTrue")
        }
        // DBRef fields are matched as plain fields.
        "id" | "ref" | "db" => Node::from_item(key, leaf_eq(key, value)?),
        "expr" => {
            top_only("$expr")?;
            Node::Expr(Box::new(Expression::parse_in(value, p.vars)?))
        }
        "where" => {
            if p.context == FilterContext::Pipeline {
                return Err(bad_value("$where is not allowed in this context"));
            }
            top_only("$where")?;
            // mongod without a JavaScript engine (Ebb has none).
            return Err(CommandError::new(
                ErrorCode::Location(6_108_304),
                "no globalScriptEngine in $where parsing",
            ));
        }
        "text" => {
            top_only("$text")?;
            return Err(not_implemented("the $text query operator"));
        }
        "jsonSchema" => {
            if !matches!(value, RawBsonRef::Document(_)) {
                return Err(CommandError::type_mismatch("$jsonSchema must be an object"));
            }
            return Err(not_implemented("the $jsonSchema query operator"));
        }
        "sampleRate" => {
            top_only("$sampleRate")?;
            let Some(rate) = number_as_f64(value) else {
                return Err(bad_value("argument to $sampleRate must be a numeric type"));
            };
            if !(0.0..=1.0).contains(&rate) {
                return Err(bad_value(
                    "numeric argument to $sampleRate must be in [0, 1]",
                ));
            }
            if rate == 0.0 || rate == 1.0 {
                Node::Const(rate == 1.0)
            } else {
                Node::Sample(rate)
            }
        }
        _ => {
            let hint = if op == "not" {
                ". If you are trying to negate an entire expression, use $nor."
            } else {
                ". If you have a field name that starts with a '$' symbol, consider using \
                 $getField or $setField."
            };
            return Err(bad_value(format!(
                "unknown top level operator: {key}{hint}"
            )));
        }
    }))
}

/// mongod's `isExpressionDocument`: whether a document is an operator document (`{$gt: 1}`)
/// rather than a value to compare with. Its first field starts with `$`, and it is not a `DBRef`
/// (`$ref` and `$id`; with `incomplete_dbref`, any of `$ref`, `$id`, `$db`).
fn is_operator_doc(sub: &RawDocument, incomplete_dbref: bool) -> bool {
    let Some(Ok((first, _))) = sub.iter().next() else {
        return false;
    };
    if !first.as_str().starts_with('$') {
        return false;
    }
    let (mut has_ref, mut has_id, mut has_db) = (false, false, false);
    for (k, _) in sub.iter().map_while(Result::ok) {
        match k.as_str() {
            "$ref" => has_ref = true,
            "$id" => has_id = true,
            "$db" => has_db = true,
            _ => {}
        }
    }
    let dbref = if incomplete_dbref {
        has_ref || has_id || has_db
    } else {
        has_ref && has_id
    };
    !dbref
}

/// `$and`, `$or`, `$nor`: a non-empty array of filter documents.
fn parse_tree(key: &str, value: RawBsonRef<'_>, p: Parse<'_>) -> Result<Node, CommandError> {
    let RawBsonRef::Array(arr) = value else {
        return Err(bad_value(format!("{key} must be an array")));
    };
    let mut children = Vec::new();
    for item in arr {
        match item.map_err(|e| invalid_bson(&e))? {
            RawBsonRef::Document(d) => children.push(parse_doc(d, p)?),
            _ => {
                return Err(bad_value("$or/$and/$nor entries need to be full objects"));
            }
        }
    }
    if children.is_empty() {
        return Err(bad_value("$and/$or/$nor must be a nonempty array"));
    }
    Ok(match key {
        "$and" => Node::And(children),
        "$or" => Node::Or(children),
        _ => Node::Nor(children),
    })
}

/// Equality with `value` (implicit or `$eq`).
fn leaf_eq(path: &str, value: RawBsonRef<'_>) -> Result<Item, CommandError> {
    comparison(path, CmpOp::Eq, value)
}

fn comparison(path: &str, op: CmpOp, value: RawBsonRef<'_>) -> Result<Item, CommandError> {
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

/// The operators of `{path: {$op: …, …}}` (they are AND-ed).
fn parse_ops(path: &str, ops: &RawDocument, p: Parse<'_>) -> Result<Vec<Item>, CommandError> {
    let mut out = Vec::new();
    for item in ops {
        let (op, value) = item.map_err(|e| invalid_bson(&e))?;
        if let Some(item) = parse_op(path, op.as_str(), value, ops, p)? {
            out.push(item);
        }
    }
    Ok(out)
}

/// One operator of an operator document `context`; `None` for `$options` (read by `$regex`).
fn parse_op(
    path: &str,
    op: &str,
    value: RawBsonRef<'_>,
    context: &RawDocument,
    p: Parse<'_>,
) -> Result<Option<Item>, CommandError> {
    let item = match op {
        "$not" => parse_not(path, value, p)?,
        "$eq" => leaf_eq(path, value)?,
        "$ne" => {
            if matches!(value, RawBsonRef::RegularExpression(_)) {
                return Err(bad_value("Can't have regex as arg to $ne."));
            }
            Item::Not(vec![leaf_eq(path, value)?])
        }
        "$lt" => comparison(path, CmpOp::Lt, value)?,
        "$lte" => comparison(path, CmpOp::Lte, value)?,
        "$gt" => comparison(path, CmpOp::Gt, value)?,
        "$gte" => comparison(path, CmpOp::Gte, value)?,
        "$in" | "$nin" => {
            let RawBsonRef::Array(arr) = value else {
                return Err(bad_value(format!("{op} needs an array")));
            };
            let set = Item::Leaf(Pred::In(parse_in(arr)?));
            if op == "$in" {
                set
            } else {
                Item::Not(vec![set])
            }
        }
        "$exists" => {
            let exists = Item::Leaf(Pred::Exists);
            if true_value(value) {
                exists
            } else {
                Item::Not(vec![exists])
            }
        }
        "$type" => Item::Leaf(Pred::Type(parse_type(path, value)?)),
        "$mod" => parse_mod(value)?,
        "$options" => {
            let has_regex = context
                .iter()
                .map_while(Result::ok)
                .any(|(k, _)| k.as_str() == "$regex");
            if has_regex {
                return Ok(None);
            }
            return Err(bad_value("$options needs a $regex"));
        }
        "$regex" => parse_regex_doc(context)?,
        "$elemMatch" => parse_elem_match(value, p)?,
        "$all" => parse_all(path, value, p)?,
        "$size" => {
            let n = parse_int(op, value)
                .and_then(|n| non_negative(op, value, i64::from(n)))
                .map_err(|e| bad_value(format!("Failed to parse $size. {}", e.errmsg)))?;
            Item::Leaf(Pred::Size(n))
        }
        "$bitsAllSet" | "$bitsAllClear" | "$bitsAnySet" | "$bitsAnyClear" => {
            parse_bits(path, op, value)?
        }
        "$geoWithin" | "$within" | "$geoIntersects" | "$near" | "$nearSphere" | "$geoNear" => {
            return Err(not_implemented(&format!("the {op} query operator")));
        }
        "$where" => return Err(bad_value("$where cannot be applied to a field")),
        _ => return Err(bad_value(format!("unknown operator: {op}"))),
    };
    Ok(Some(item))
}

fn parse_not(path: &str, value: RawBsonRef<'_>, p: Parse<'_>) -> Result<Item, CommandError> {
    match value {
        RawBsonRef::RegularExpression(re) => Ok(Item::Not(vec![Item::Leaf(Pred::Regex(
            Box::new(Regex::compile(re.pattern.as_str(), re.options.as_str())?),
        ))])),
        RawBsonRef::Document(sub) => {
            if sub.is_empty() {
                return Err(bad_value("$not cannot be empty"));
            }
            Ok(Item::Not(parse_ops(path, sub, p)?))
        }
        _ => Err(bad_value("$not needs a regex or a document")),
    }
}

/// `$in`/`$nin` values: plain values and regexes (no operator documents, no undefined).
fn parse_in(arr: &RawArray) -> Result<InSet, CommandError> {
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

/// `{$regex: …, $options: …}`: mongod's `parseRegexDocument` over the whole operator document.
fn parse_regex_doc(context: &RawDocument) -> Result<Item, CommandError> {
    let mut pattern = String::new();
    let mut options = String::new();
    for item in context {
        let (k, v) = item.map_err(|e| invalid_bson(&e))?;
        match (k.as_str(), v) {
            ("$regex", RawBsonRef::String(s)) => s.clone_into(&mut pattern),
            ("$regex", RawBsonRef::RegularExpression(re)) => {
                re.pattern.as_str().clone_into(&mut pattern);
                if !re.options.as_str().is_empty() {
                    if !options.is_empty() {
                        return Err(CommandError::new(
                            ErrorCode::Location(51074),
                            "options set in both $regex and $options",
                        ));
                    }
                    re.options.as_str().clone_into(&mut options);
                }
            }
            ("$regex", _) => return Err(bad_value("$regex has to be a string")),
            ("$options", RawBsonRef::String(s)) => {
                if !options.is_empty() {
                    return Err(CommandError::new(
                        ErrorCode::Location(51075),
                        "options set in both $regex and $options",
                    ));
                }
                s.clone_into(&mut options);
            }
            ("$options", _) => return Err(bad_value("$options has to be a string")),
            _ => {}
        }
    }
    Ok(Item::Leaf(Pred::Regex(Box::new(Regex::compile(
        &pattern, &options,
    )?))))
}

/// `$elemMatch`: the value form when the argument is an operator document whose first
/// operator is not a top-level one, otherwise a filter on document elements.
fn parse_elem_match(value: RawBsonRef<'_>, p: Parse<'_>) -> Result<Item, CommandError> {
    let RawBsonRef::Document(obj) = value else {
        return Err(bad_value("$elemMatch needs an Object"));
    };
    let sub = Parse {
        level: Level::Sub,
        ..p
    };
    let first_is_pathless = obj
        .iter()
        .next()
        .and_then(Result::ok)
        .is_some_and(|(k, _)| k.as_str().strip_prefix('$').is_some_and(is_pathless));
    if is_operator_doc(obj, true) && !first_is_pathless {
        let preds = parse_ops("", obj, sub)?
            .into_iter()
            .map(Item::into_pred)
            .collect();
        return Ok(Item::Leaf(Pred::ElemMatchValue(preds)));
    }
    let filter = Filter::from_root(parse_doc(obj, sub)?);
    Ok(Item::Leaf(Pred::ElemMatchObject(Box::new(filter))))
}

/// The first field of a document value.
fn first_key(v: RawBsonRef<'_>) -> Option<(String, RawBsonRef<'_>)> {
    match v {
        RawBsonRef::Document(d) => d
            .iter()
            .next()
            .and_then(Result::ok)
            .map(|(k, v)| (k.as_str().to_owned(), v)),
        _ => None,
    }
}

fn parse_all(path: &str, value: RawBsonRef<'_>, p: Parse<'_>) -> Result<Item, CommandError> {
    let RawBsonRef::Array(arr) = value else {
        return Err(bad_value("$all needs an array"));
    };
    let elems: Vec<RawBsonRef<'_>> = arr
        .into_iter()
        .collect::<Result<_, _>>()
        .map_err(|e| invalid_bson(&e))?;
    let starts_with_elem_match = elems
        .first()
        .and_then(|&v| first_key(v))
        .is_some_and(|(k, _)| k == "$elemMatch");
    let mut items = Vec::new();
    if starts_with_elem_match {
        for &e in &elems {
            match first_key(e) {
                Some((k, v)) if k == "$elemMatch" => items.push(parse_elem_match(v, p)?),
                _ => return Err(bad_value("$all/$elemMatch has to be consistent")),
            }
        }
        return Ok(Item::And(items));
    }
    for &e in &elems {
        match e {
            RawBsonRef::RegularExpression(re) => items.push(Item::Leaf(Pred::Regex(Box::new(
                Regex::compile(re.pattern.as_str(), re.options.as_str())?,
            )))),
            RawBsonRef::Document(_)
                if first_key(e)
                    .is_some_and(|(k, _)| k.strip_prefix('$').is_some_and(is_path_keyword)) =>
            {
                return Err(bad_value("no $ expressions in $all"));
            }
            _ => items.push(leaf_eq(path, e)?),
        }
    }
    if items.is_empty() {
        return Ok(Item::Const(false));
    }
    Ok(Item::And(items))
}

/// mongod's `MatcherTypeSet::parse`.
fn parse_type(path: &str, value: RawBsonRef<'_>) -> Result<TypeSet, CommandError> {
    let mut set = TypeSet::default();
    let type_error =
        || CommandError::type_mismatch("type must be represented as a number or a string");
    match value {
        RawBsonRef::Array(arr) => {
            for item in arr {
                let v = item.map_err(|e| invalid_bson(&e))?;
                if !matches!(v, RawBsonRef::String(_)) && number_as_f64(v).is_none() {
                    return Err(type_error());
                }
                add_type(&mut set, v)?;
            }
        }
        RawBsonRef::String(_) => add_type(&mut set, value)?,
        v if number_as_f64(v).is_some() => add_type(&mut set, value)?,
        _ => return Err(type_error()),
    }
    if !set.all_numbers && set.types.is_empty() {
        return Err(failed_to_parse(format!(
            "{path} must match at least one type"
        )));
    }
    Ok(set)
}

fn add_type(set: &mut TypeSet, v: RawBsonRef<'_>) -> Result<(), CommandError> {
    if let RawBsonRef::String(alias) = v {
        if alias == "number" {
            set.all_numbers = true;
            return Ok(());
        }
        let t = type_by_alias(alias)
            .ok_or_else(|| bad_value(format!("Unknown type name alias: {alias}")))?;
        set.types.push(t);
        return Ok(());
    }
    let code = parse_int("", v).map_err(|_| {
        bad_value(format!(
            "Invalid numerical type code: {}",
            super::expr::format_g6(number_as_f64(v).unwrap_or(f64::NAN))
        ))
    })?;
    let t = type_by_code(code)
        .ok_or_else(|| bad_value(format!("Invalid numerical type code: {code}")))?;
    set.types.push(t);
    Ok(())
}

const ALL_TYPES: [ElementType; 21] = [
    ElementType::Double,
    ElementType::String,
    ElementType::EmbeddedDocument,
    ElementType::Array,
    ElementType::Binary,
    ElementType::Undefined,
    ElementType::ObjectId,
    ElementType::Boolean,
    ElementType::DateTime,
    ElementType::Null,
    ElementType::RegularExpression,
    ElementType::DbPointer,
    ElementType::JavaScriptCode,
    ElementType::Symbol,
    ElementType::JavaScriptCodeWithScope,
    ElementType::Int32,
    ElementType::Timestamp,
    ElementType::Int64,
    ElementType::Decimal128,
    ElementType::MinKey,
    ElementType::MaxKey,
];

fn type_by_alias(alias: &str) -> Option<ElementType> {
    ALL_TYPES
        .into_iter()
        .find(|&t| display::type_name(t) == alias)
}

fn type_by_code(code: i32) -> Option<ElementType> {
    let byte = match code {
        -1 => 0xFF,
        1..=19 | 127 => u8::try_from(code).ok()?,
        _ => return None,
    };
    ALL_TYPES.into_iter().find(|&t| t as u8 == byte)
}

/// mongod's `parseIntegerElementToLong` on the element `name: v` (`FailedToParse`).
fn parse_long(name: &str, v: RawBsonRef<'_>) -> Result<i64, CommandError> {
    let shown = || display::element(name, v);
    match v {
        RawBsonRef::Int32(i) => Ok(i64::from(i)),
        RawBsonRef::Int64(i) => Ok(i),
        RawBsonRef::Double(d) => {
            if d.is_nan() {
                return Err(failed_to_parse(format!(
                    "Expected an integer, but found NaN in: {}",
                    shown()
                )));
            }
            if !(-TWO_63..TWO_63).contains(&d) {
                return Err(failed_to_parse(format!(
                    "Cannot represent as a 64-bit integer: {}",
                    shown()
                )));
            }
            exact_i64(d).ok_or_else(|| failed_to_parse(format!("Expected an integer: {}", shown())))
        }
        RawBsonRef::Decimal128(_) => number_as_f64(v).and_then(exact_i64).ok_or_else(|| {
            failed_to_parse(format!("Cannot represent as a 64-bit integer: {}", shown()))
        }),
        _ => Err(failed_to_parse(format!(
            "Expected a number in: {}",
            shown()
        ))),
    }
}

/// mongod's `parseIntegerElementToInt`.
fn parse_int(name: &str, v: RawBsonRef<'_>) -> Result<i32, CommandError> {
    let n = parse_long(name, v)?;
    i32::try_from(n).map_err(|_| {
        failed_to_parse(format!(
            "Cannot represent {} in an int",
            display::element(name, v)
        ))
    })
}

fn non_negative(name: &str, v: RawBsonRef<'_>, n: i64) -> Result<i64, CommandError> {
    if n < 0 {
        return Err(failed_to_parse(format!(
            "Expected a non-negative number in: {}",
            display::element(name, v)
        )));
    }
    Ok(n)
}

/// mongod's `BSONElement::tryCoerce<long long>` for `$mod`'s arguments.
fn coerce_long(v: RawBsonRef<'_>) -> Result<i64, &'static str> {
    match v {
        RawBsonRef::Int32(i) => Ok(i64::from(i)),
        RawBsonRef::Int64(i) => Ok(i),
        _ => {
            let d = number_as_f64(v).unwrap_or(f64::NAN);
            if !d.is_finite() {
                return Err("Unable to coerce NaN/Inf to integral type");
            }
            let t = d.trunc();
            // mongod compares against LLONG_MAX converted to double (2^63), so 2^63 itself
            // passes and converts like x86's `cvttsd2si` (to i64::MIN).
            if !(-TWO_63..=TWO_63).contains(&t) {
                return Err("Out of bounds coercing to integral value");
            }
            Ok(exact_i64(t).unwrap_or(i64::MIN))
        }
    }
}

fn parse_mod(value: RawBsonRef<'_>) -> Result<Item, CommandError> {
    let RawBsonRef::Array(arr) = value else {
        return Err(bad_value("malformed mod, needs to be an array"));
    };
    let mut it = arr.into_iter();
    let mut next = || it.next().transpose().map_err(|e| invalid_bson(&e));
    let Some(divisor) = next()? else {
        return Err(bad_value("malformed mod, not enough elements"));
    };
    if number_as_f64(divisor).is_none() {
        return Err(bad_value("malformed mod, divisor not a number"));
    }
    let Some(remainder) = next()? else {
        return Err(bad_value("malformed mod, not enough elements"));
    };
    if number_as_f64(remainder).is_none() {
        return Err(bad_value("malformed mod, remainder not a number"));
    }
    if next()?.is_some() {
        return Err(bad_value("malformed mod, too many elements"));
    }
    let divisor = coerce_long(divisor).map_err(|e| {
        bad_value(format!(
            "malformed mod, divisor value is invalid :: caused by :: {e}"
        ))
    })?;
    let remainder = coerce_long(remainder).map_err(|e| {
        bad_value(format!(
            "malformed mod, remainder value is invalid :: caused by :: {e}"
        ))
    })?;
    if divisor == 0 {
        return Err(bad_value("divisor cannot be 0"));
    }
    Ok(Item::Leaf(Pred::Mod { divisor, remainder }))
}

fn parse_bits(path: &str, op: &str, value: RawBsonRef<'_>) -> Result<Item, CommandError> {
    let op_kind = match op {
        "$bitsAllSet" => BitOp::AllSet,
        "$bitsAllClear" => BitOp::AllClear,
        "$bitsAnySet" => BitOp::AnySet,
        _ => BitOp::AnyClear,
    };
    let mut positions = Vec::new();
    match value {
        RawBsonRef::Array(arr) => {
            for (i, item) in arr.into_iter().enumerate() {
                let v = item.map_err(|e| invalid_bson(&e))?;
                let name = i.to_string();
                let n = parse_int(&name, v)
                    .and_then(|n| non_negative(&name, v, i64::from(n)))
                    .map_err(|e| {
                        bad_value(format!("Failed to parse bit position. {}", e.errmsg))
                    })?;
                positions.push(u32::try_from(n).unwrap_or(u32::MAX));
            }
        }
        RawBsonRef::Binary(b) => {
            for (i, byte) in b.bytes.iter().enumerate() {
                for bit in 0..8 {
                    if (byte >> bit) & 1 == 1 {
                        positions.push(u32::try_from(i * 8).unwrap_or(u32::MAX - 8) + bit);
                    }
                }
            }
        }
        v if number_as_f64(v).is_some() => {
            let mask = non_negative(op, v, parse_long(op, v)?)?;
            positions.extend((0..63).filter(|bit| (mask >> bit) & 1 == 1));
        }
        other => {
            return Err(bad_value(format!(
                "{path} takes an Array, a number, or a BinData but received: {}",
                display::element(op, other)
            )));
        }
    }
    Ok(Item::Leaf(Pred::Bits(BitTest {
        op: op_kind,
        positions,
    })))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorCode;
    use crate::query::testutil::regex;
    use bson::{RawDocumentBuf, rawdoc};

    fn matches(filter: &RawDocumentBuf, doc: &RawDocumentBuf) -> bool {
        Filter::compile(filter).unwrap().matches(doc)
    }

    fn collation(spec: &RawDocumentBuf) -> Option<Arc<Collation>> {
        Collation::parse(spec).unwrap().map(Arc::new)
    }

    #[test]
    fn collation_table() {
        let en1 = rawdoc! {"locale": "en", "strength": 1};
        let en2 = rawdoc! {"locale": "en", "strength": 2};
        let en3 = rawdoc! {"locale": "en", "strength": 3};
        let num = rawdoc! {"locale": "en", "numericOrdering": true};
        let simple = rawdoc! {"locale": "simple"};
        let cases: Vec<(&RawDocumentBuf, RawDocumentBuf, RawDocumentBuf, bool)> = vec![
            (&en2, rawdoc! {"a": "cat"}, rawdoc! {"a": "CAT"}, true),
            (&en3, rawdoc! {"a": "cat"}, rawdoc! {"a": "CAT"}, false),
            (&simple, rawdoc! {"a": "cat"}, rawdoc! {"a": "CAT"}, false),
            (&en2, rawdoc! {"a": "cafe"}, rawdoc! {"a": "café"}, false),
            (&en1, rawdoc! {"a": "cafe"}, rawdoc! {"a": "CAFÉ"}, true),
            (
                &en2,
                rawdoc! {"a": {"$ne": "cat"}},
                rawdoc! {"a": "Cat"},
                false,
            ),
            // Ranges compare in the locale's order: "B" > "a" there, not in binary.
            (&en2, rawdoc! {"a": {"$gt": "a"}}, rawdoc! {"a": "B"}, true),
            (
                &simple,
                rawdoc! {"a": {"$gt": "a"}},
                rawdoc! {"a": "B"},
                false,
            ),
            (&en2, rawdoc! {"a": {"$lte": "b"}}, rawdoc! {"a": "B"}, true),
            (&num, rawdoc! {"a": {"$gt": "9"}}, rawdoc! {"a": "10"}, true),
            (
                &en3,
                rawdoc! {"a": {"$gt": "9"}},
                rawdoc! {"a": "10"},
                false,
            ),
            // Type bracketing still holds: strings never equal numbers.
            (&en1, rawdoc! {"a": {"$gte": ""}}, rawdoc! {"a": 5}, false),
            // $in / $nin, with more values than one so that the set is searched.
            (
                &en2,
                rawdoc! {"a": {"$in": ["x", "DOG", 3]}},
                rawdoc! {"a": "dog"},
                true,
            ),
            (
                &en3,
                rawdoc! {"a": {"$in": ["x", "DOG", 3]}},
                rawdoc! {"a": "dog"},
                false,
            ),
            (
                &en2,
                rawdoc! {"a": {"$nin": ["x", "DOG"]}},
                rawdoc! {"a": "Dog"},
                false,
            ),
            // Arrays, nested documents and arrays of them.
            (&en2, rawdoc! {"a": "x"}, rawdoc! {"a": ["y", "X"]}, true),
            (
                &en2,
                rawdoc! {"a": {"b": "Q"}},
                rawdoc! {"a": {"b": "q"}},
                true,
            ),
            (
                &en2,
                rawdoc! {"a": ["P", "q"]},
                rawdoc! {"a": ["p", "Q"]},
                true,
            ),
            // Field names stay binary.
            (
                &en2,
                rawdoc! {"a": {"B": 1}},
                rawdoc! {"a": {"b": 1}},
                false,
            ),
            (
                &en2,
                rawdoc! {"a": {"$all": ["X", "y"]}},
                rawdoc! {"a": ["x", "Y"]},
                true,
            ),
            (
                &en2,
                rawdoc! {"a": {"$elemMatch": {"$eq": "X"}}},
                rawdoc! {"a": ["x"]},
                true,
            ),
            (
                &en2,
                rawdoc! {"a": {"$elemMatch": {"b": {"$in": ["X", "z"]}}}},
                rawdoc! {"a": [{"b": "x"}]},
                true,
            ),
            (
                &en2,
                rawdoc! {"$or": [{"a": "no"}, {"a": "YES"}]},
                rawdoc! {"a": "yes"},
                true,
            ),
            // $regex is not collated.
            (
                &en2,
                rawdoc! {"a": {"$regex": "^X"}},
                rawdoc! {"a": "x"},
                false,
            ),
        ];
        for (spec, filter, doc, want) in cases {
            let f = Filter::compile(&filter)
                .unwrap()
                .with_collation(collation(spec));
            assert_eq!(f.matches(&doc), want, "{spec:?} {filter:?} on {doc:?}");
        }
    }

    #[test]
    fn collated_id_equality_is_not_a_point_read() {
        let en2 = collation(&rawdoc! {"locale": "en", "strength": 2});
        let f = |q: RawDocumentBuf| Filter::compile(&q).unwrap().with_collation(en2.clone());
        assert_eq!(f(rawdoc! {"_id": "a"}).id_equality(), None);
        assert_eq!(f(rawdoc! {"_id": {"$eq": "a"}, "b": 1}).id_equality(), None);
        assert_eq!(f(rawdoc! {"_id": 5}).id_equality(), Some(RawBson::Int32(5)));
        let plain = Filter::compile(&rawdoc! {"_id": "a"}).unwrap();
        assert_eq!(plain.id_equality(), Some(RawBson::String("a".into())));
    }

    #[test]
    fn equality_table() {
        let cases: Vec<(RawDocumentBuf, RawDocumentBuf, bool)> = vec![
            (rawdoc! {}, rawdoc! {"a": 1}, true),
            (rawdoc! {"a": 1}, rawdoc! {"a": 1}, true),
            (rawdoc! {"a": 1}, rawdoc! {"a": 1.0}, true),
            (rawdoc! {"a": 1}, rawdoc! {"a": 2}, false),
            (rawdoc! {"a": 1}, rawdoc! {"a": "1"}, false),
            (rawdoc! {"a": 1}, rawdoc! {"a": [1, 2]}, true),
            (rawdoc! {"a": [1, 2]}, rawdoc! {"a": [1, 2]}, true),
            (rawdoc! {"a": [1, 2]}, rawdoc! {"a": [2, 1]}, false),
            (rawdoc! {"a": [1]}, rawdoc! {"a": [[1], 2]}, true),
            (rawdoc! {"a": 1}, rawdoc! {"a": [[1]]}, false),
            (rawdoc! {"a": null}, rawdoc! {}, true),
            (rawdoc! {"a": null}, rawdoc! {"a": null}, true),
            (
                rawdoc! {"a": null},
                rawdoc! {"a": bson::RawBson::Undefined},
                true,
            ),
            (rawdoc! {"a": null}, rawdoc! {"a": 0}, false),
            (rawdoc! {"a": null}, rawdoc! {"a": [1, null]}, true),
            (rawdoc! {"a": null}, rawdoc! {"a": []}, false),
            (rawdoc! {"a.b": null}, rawdoc! {"a": 1}, true),
            (
                rawdoc! {"a.b": null},
                rawdoc! {"a": [{"b": 1}, {"c": 1}]},
                true,
            ),
            (rawdoc! {"a.b": null}, rawdoc! {"a": [1, 2]}, false),
            (
                rawdoc! {"a.b": 2},
                rawdoc! {"a": [{"b": 1}, {"b": 2}]},
                true,
            ),
            (rawdoc! {"a.b": 2}, rawdoc! {"a": {"b": [1, 2]}}, true),
            (rawdoc! {"a.1": 2}, rawdoc! {"a": [1, 2]}, true),
            (rawdoc! {"a.0.b": 1}, rawdoc! {"a": [{"b": 1}]}, true),
            (rawdoc! {"a": {"b": 1}}, rawdoc! {"a": {"b": 1}}, true),
            (
                rawdoc! {"a": {"b": 1}},
                rawdoc! {"a": {"b": 1, "c": 2}},
                false,
            ),
            (
                rawdoc! {"a": {"b": 1, "c": 2}},
                rawdoc! {"a": {"c": 2, "b": 1}},
                false,
            ),
            (rawdoc! {"a": {"b": 1}}, rawdoc! {"a": [{"b": 1}]}, true),
            (rawdoc! {"a": 1, "b": 2}, rawdoc! {"a": 1, "b": 2}, true),
            (rawdoc! {"a": 1, "b": 2}, rawdoc! {"a": 1, "b": 3}, false),
            (rawdoc! {"a": f64::NAN}, rawdoc! {"a": f64::NAN}, true),
            (rawdoc! {"a": {"$eq": [1]}}, rawdoc! {"a": [1]}, true),
            (
                rawdoc! {"a": {"$ref": "c", "$id": 1}},
                rawdoc! {"a": {"$ref": "c", "$id": 1}},
                true,
            ),
            (
                rawdoc! {"a": {"$eq": regex("x", "")}},
                rawdoc! {"a": regex("x", "")},
                true,
            ),
        ];
        for (filter, doc, want) in cases {
            assert_eq!(matches(&filter, &doc), want, "{filter:?} on {doc:?}");
        }
    }

    #[test]
    fn comparison_table() {
        let cases: Vec<(RawDocumentBuf, RawDocumentBuf, bool)> = vec![
            (rawdoc! {"a": {"$gt": 5}}, rawdoc! {"a": 6}, true),
            (rawdoc! {"a": {"$gt": 5}}, rawdoc! {"a": 5.5}, true),
            (rawdoc! {"a": {"$gt": 5}}, rawdoc! {"a": 5}, false),
            (rawdoc! {"a": {"$gt": 5}}, rawdoc! {"a": "6"}, false),
            (rawdoc! {"a": {"$gt": 5}}, rawdoc! {}, false),
            (rawdoc! {"a": {"$gt": 5}}, rawdoc! {"a": [1, 7]}, true),
            (rawdoc! {"a": {"$lt": 5}}, rawdoc! {"a": [6, 7]}, false),
            (
                rawdoc! {"a": {"$gte": 5, "$lte": 5}},
                rawdoc! {"a": 5.0},
                true,
            ),
            (
                rawdoc! {"a": {"$gt": 1, "$lt": 3}},
                rawdoc! {"a": [0, 4]},
                true,
            ),
            (rawdoc! {"a": {"$lt": "b"}}, rawdoc! {"a": "a"}, true),
            (rawdoc! {"a": {"$lt": "b"}}, rawdoc! {"a": 1}, false),
            (rawdoc! {"a": {"$gte": null}}, rawdoc! {}, true),
            (rawdoc! {"a": {"$lte": null}}, rawdoc! {"a": null}, true),
            (rawdoc! {"a": {"$gt": null}}, rawdoc! {"a": null}, false),
            (rawdoc! {"a": {"$lt": null}}, rawdoc! {"a": 1}, false),
            (
                rawdoc! {"a": {"$lt": bson::RawBson::MaxKey}},
                rawdoc! {"a": "x"},
                true,
            ),
            (
                rawdoc! {"a": {"$lt": bson::RawBson::MaxKey}},
                rawdoc! {},
                true,
            ),
            (
                rawdoc! {"a": {"$gt": bson::RawBson::MinKey}},
                rawdoc! {"a": true},
                true,
            ),
            (
                rawdoc! {"a": {"$gt": bson::RawBson::MinKey}},
                rawdoc! {"a": bson::RawBson::MinKey},
                false,
            ),
            (
                rawdoc! {"a": {"$lt": bson::RawBson::MinKey}},
                rawdoc! {"a": 1},
                false,
            ),
            (rawdoc! {"a": {"$lt": 5}}, rawdoc! {"a": f64::NAN}, false),
            (rawdoc! {"a": {"$gt": f64::NAN}}, rawdoc! {"a": 1}, false),
            (
                rawdoc! {"a": {"$gte": f64::NAN}},
                rawdoc! {"a": f64::NAN},
                true,
            ),
            (
                rawdoc! {"a": {"$gt": f64::NAN}},
                rawdoc! {"a": f64::NAN},
                false,
            ),
            (rawdoc! {"a": {"$gt": [1]}}, rawdoc! {"a": [2]}, true),
            (rawdoc! {"a": {"$gt": [1]}}, rawdoc! {"a": [[2]]}, true),
            (
                rawdoc! {"a": {"$gt": {"b": 1}}},
                rawdoc! {"a": {"b": 2}},
                true,
            ),
            (
                rawdoc! {"a": {"$gt": 9_007_199_254_740_992_i64}},
                rawdoc! {"a": 9_007_199_254_740_992.0},
                false,
            ),
            (
                rawdoc! {"a": {"$gt": 9_007_199_254_740_992.0}},
                rawdoc! {"a": 9_007_199_254_740_993_i64},
                true,
            ),
        ];
        for (filter, doc, want) in cases {
            assert_eq!(matches(&filter, &doc), want, "{filter:?} on {doc:?}");
        }
    }

    #[test]
    fn set_and_logical_table() {
        let cases: Vec<(RawDocumentBuf, RawDocumentBuf, bool)> = vec![
            (rawdoc! {"a": {"$ne": 1}}, rawdoc! {"a": 2}, true),
            (rawdoc! {"a": {"$ne": 1}}, rawdoc! {"a": [1, 2]}, false),
            (rawdoc! {"a": {"$ne": 1}}, rawdoc! {}, true),
            (rawdoc! {"a": {"$ne": null}}, rawdoc! {}, false),
            (rawdoc! {"a": {"$ne": null}}, rawdoc! {"a": 0}, true),
            (rawdoc! {"a": {"$in": [1, 2]}}, rawdoc! {"a": 2.0}, true),
            (rawdoc! {"a": {"$in": [1, 2]}}, rawdoc! {"a": [3, 1]}, true),
            (rawdoc! {"a": {"$in": [1, 2]}}, rawdoc! {"a": 3}, false),
            (
                rawdoc! {"a": {"$in": [[1, 2]]}},
                rawdoc! {"a": [1, 2]},
                true,
            ),
            (rawdoc! {"a": {"$in": []}}, rawdoc! {"a": 1}, false),
            (rawdoc! {"a": {"$in": [null]}}, rawdoc! {}, true),
            (
                rawdoc! {"a": {"$in": [null]}},
                rawdoc! {"a": bson::RawBson::Undefined},
                true,
            ),
            (rawdoc! {"a": {"$nin": [1, 2]}}, rawdoc! {"a": 3}, true),
            (rawdoc! {"a": {"$nin": [1, 2]}}, rawdoc! {}, true),
            (rawdoc! {"a": {"$nin": [null]}}, rawdoc! {}, false),
            (rawdoc! {"a": {"$nin": []}}, rawdoc! {"a": 1}, true),
            (rawdoc! {"a": {"$exists": true}}, rawdoc! {"a": null}, true),
            (rawdoc! {"a": {"$exists": true}}, rawdoc! {}, false),
            (rawdoc! {"a": {"$exists": 0}}, rawdoc! {}, true),
            (
                rawdoc! {"a.b": {"$exists": true}},
                rawdoc! {"a": [{"b": 1}]},
                true,
            ),
            (
                rawdoc! {"a.b": {"$exists": false}},
                rawdoc! {"a": [1]},
                true,
            ),
            (rawdoc! {"a": {"$exists": true}}, rawdoc! {"a": []}, true),
            (rawdoc! {"a": {"$not": {"$gt": 5}}}, rawdoc! {"a": 3}, true),
            (rawdoc! {"a": {"$not": {"$gt": 5}}}, rawdoc! {"a": 7}, false),
            (
                rawdoc! {"a": {"$not": {"$gt": 5}}},
                rawdoc! {"a": "x"},
                true,
            ),
            (
                rawdoc! {"a": {"$not": {"$gt": 1, "$lt": 5}}},
                rawdoc! {"a": 3},
                false,
            ),
            (
                rawdoc! {"$and": [{"a": 1}, {"b": 2}]},
                rawdoc! {"a": 1, "b": 2},
                true,
            ),
            (
                rawdoc! {"$and": [{"a": 1}, {"b": 2}]},
                rawdoc! {"a": 1},
                false,
            ),
            (
                rawdoc! {"$or": [{"a": 1}, {"b": 2}]},
                rawdoc! {"b": 2},
                true,
            ),
            (
                rawdoc! {"$or": [{"a": 1}, {"b": 2}]},
                rawdoc! {"c": 2},
                false,
            ),
            (
                rawdoc! {"$nor": [{"a": 1}, {"b": 2}]},
                rawdoc! {"c": 2},
                true,
            ),
            (
                rawdoc! {"$nor": [{"a": 1}, {"b": 2}]},
                rawdoc! {"a": 1},
                false,
            ),
            (rawdoc! {"$comment": "x", "a": 1}, rawdoc! {"a": 1}, true),
            (rawdoc! {"$alwaysFalse": 1}, rawdoc! {"a": 1}, false),
            (rawdoc! {"$alwaysTrue": 1}, rawdoc! {}, true),
        ];
        for (filter, doc, want) in cases {
            assert_eq!(matches(&filter, &doc), want, "{filter:?} on {doc:?}");
        }
    }

    #[test]
    fn compile_errors() {
        let cases: Vec<(RawDocumentBuf, ErrorCode, &str)> = vec![
            (
                rawdoc! {"a": {"$foo": 1}},
                ErrorCode::BadValue,
                "unknown operator: $foo",
            ),
            (
                rawdoc! {"$foo": 1},
                ErrorCode::BadValue,
                "unknown top level operator: $foo. If you have a field name that starts with a \
                 '$' symbol, consider using $getField or $setField.",
            ),
            (
                rawdoc! {"$and": []},
                ErrorCode::BadValue,
                "$and/$or/$nor must be a nonempty array",
            ),
            (
                rawdoc! {"$or": 1},
                ErrorCode::BadValue,
                "$or must be an array",
            ),
            (
                rawdoc! {"$nor": [1]},
                ErrorCode::BadValue,
                "$or/$and/$nor entries need to be full objects",
            ),
            (
                rawdoc! {"a": {"$in": 1}},
                ErrorCode::BadValue,
                "$in needs an array",
            ),
            (
                rawdoc! {"a": {"$nin": {}}},
                ErrorCode::BadValue,
                "$nin needs an array",
            ),
            (
                rawdoc! {"a": {"$in": [{"$gt": 1}]}},
                ErrorCode::BadValue,
                "cannot nest $ under $in",
            ),
            (
                rawdoc! {"a": {"$gt": 1, "b": 1}},
                ErrorCode::BadValue,
                "unknown operator: b",
            ),
            (
                rawdoc! {"a": {"$not": 1}},
                ErrorCode::BadValue,
                "$not needs a regex or a document",
            ),
            (
                rawdoc! {"a": {"$not": {}}},
                ErrorCode::BadValue,
                "$not cannot be empty",
            ),
            (
                rawdoc! {"a": bson::RawBson::Undefined},
                ErrorCode::BadValue,
                "cannot compare to undefined",
            ),
            (
                rawdoc! {"a": {"$gt": regex("x", "")}},
                ErrorCode::BadValue,
                "Can't have RegEx as arg to predicate over field 'a'.",
            ),
            (
                rawdoc! {"a": {"$ne": regex("x", "")}},
                ErrorCode::BadValue,
                "Can't have regex as arg to $ne.",
            ),
            (
                rawdoc! {"a": {"$where": "x"}},
                ErrorCode::BadValue,
                "$where cannot be applied to a field",
            ),
            (
                rawdoc! {"$alwaysTrue": 2},
                ErrorCode::FailedToParse,
                "$alwaysTrue must be an integer value of 1",
            ),
            (
                rawdoc! {"$where": "1"},
                ErrorCode::Location(6_108_304),
                "no globalScriptEngine in $where parsing",
            ),
        ];
        for (filter, code, msg) in cases {
            let err = Filter::compile(&filter).unwrap_err();
            assert_eq!((err.code, err.errmsg.as_str()), (code, msg), "{filter:?}");
        }
    }

    #[test]
    fn id_equality_and_equality_fields() {
        let id = |f: RawDocumentBuf| Filter::compile(&f).unwrap().id_equality();
        assert_eq!(id(rawdoc! {"_id": 5}), Some(bson::RawBson::Int32(5)));
        assert_eq!(
            id(rawdoc! {"_id": {"$eq": "x"}}),
            Some(bson::RawBson::String("x".into()))
        );
        assert_eq!(
            id(rawdoc! {"_id": 5, "a": 1}),
            Some(bson::RawBson::Int32(5))
        );
        assert_eq!(
            id(rawdoc! {"$and": [{"a": 1}, {"_id": 5}]}),
            Some(bson::RawBson::Int32(5))
        );
        assert_eq!(id(rawdoc! {"_id": [5]}), None);
        assert_eq!(id(rawdoc! {"_id": {"a": 1}}), None);
        assert_eq!(id(rawdoc! {"_id": {"$gt": 5}}), None);
        assert_eq!(id(rawdoc! {"$or": [{"_id": 5}]}), None);

        let f = Filter::compile(&rawdoc! {
            "a": 1, "b": {"$eq": 2, "$gt": 0}, "$and": [{"c.d": 3}, {"$or": [{"e": 4}]}], "f": {"$in": [5]}
        })
        .unwrap();
        let got: Vec<(String, bson::RawBson)> = f.equality_fields();
        assert_eq!(
            got,
            vec![
                ("a".to_owned(), bson::RawBson::Int32(1)),
                ("b".to_owned(), bson::RawBson::Int32(2)),
                ("c.d".to_owned(), bson::RawBson::Int32(3)),
            ]
        );
        assert!(Filter::compile(&rawdoc! {}).unwrap().is_match_all());
        assert!(Filter::match_all().matches(&rawdoc! {"a": 1}));
    }

    fn check(cases: &[(RawDocumentBuf, RawDocumentBuf, bool)]) {
        for (filter, doc, want) in cases {
            let f = Filter::compile(filter).unwrap_or_else(|e| panic!("{filter:?}: {e:?}"));
            assert_eq!(f.matches(doc), *want, "{filter:?} on {doc:?}");
        }
    }

    fn bin(bytes: &[u8]) -> RawBson {
        RawBson::Binary(bson::Binary {
            subtype: bson::spec::BinarySubtype::Generic,
            bytes: bytes.to_vec(),
        })
    }

    fn dec(s: &str) -> RawBson {
        RawBson::Decimal128(s.parse().unwrap())
    }

    #[test]
    fn regex_table() {
        check(&[
            (rawdoc! {"a": regex("^ab", "")}, rawdoc! {"a": "abc"}, true),
            (rawdoc! {"a": regex("^ab", "")}, rawdoc! {"a": "xab"}, false),
            (rawdoc! {"a": regex("^AB", "i")}, rawdoc! {"a": "abc"}, true),
            (
                rawdoc! {"a": regex("b", "")},
                rawdoc! {"a": ["x", "abc"]},
                true,
            ),
            (rawdoc! {"a": regex("b", "")}, rawdoc! {"a": 1}, false),
            (rawdoc! {"a": regex("b", "")}, rawdoc! {}, false),
            (
                rawdoc! {"a": regex("b", "")},
                rawdoc! {"a": RawBson::Symbol("abc".into())},
                true,
            ),
            (
                rawdoc! {"a": regex("b", "")},
                rawdoc! {"a": regex("b", "")},
                true,
            ),
            (
                rawdoc! {"a": regex("b", "")},
                rawdoc! {"a": regex("b", "i")},
                false,
            ),
            (
                rawdoc! {"a": {"$regex": "^a", "$options": "i"}},
                rawdoc! {"a": "ABC"},
                true,
            ),
            (
                rawdoc! {"a": {"$options": "i", "$regex": "^a"}},
                rawdoc! {"a": "ABC"},
                true,
            ),
            (
                rawdoc! {"a": {"$regex": regex("^a", "i")}},
                rawdoc! {"a": "ABC"},
                true,
            ),
            (
                rawdoc! {"a": {"$regex": regex("^a", ""), "$options": "i"}},
                rawdoc! {"a": "A"},
                true,
            ),
            (
                rawdoc! {"a": {"$regex": "^a$", "$options": "m"}},
                rawdoc! {"a": "x\na"},
                true,
            ),
            (
                rawdoc! {"a": {"$regex": "a.b", "$options": "s"}},
                rawdoc! {"a": "a\nb"},
                true,
            ),
            (
                rawdoc! {"a": {"$regex": "a b", "$options": "x"}},
                rawdoc! {"a": "ab"},
                true,
            ),
            (
                rawdoc! {"a": {"$regex": "b", "$gt": "a"}},
                rawdoc! {"a": "b"},
                true,
            ),
            (
                rawdoc! {"a": {"$regex": "b", "$gt": "c"}},
                rawdoc! {"a": "b"},
                false,
            ),
            (
                rawdoc! {"a": {"$not": regex("^a", "")}},
                rawdoc! {"a": "b"},
                true,
            ),
            (
                rawdoc! {"a": {"$not": regex("^a", "")}},
                rawdoc! {"a": ["b", "a"]},
                false,
            ),
            (rawdoc! {"a": {"$not": regex("^a", "")}}, rawdoc! {}, true),
            (
                rawdoc! {"a": {"$not": {"$regex": "^a"}}},
                rawdoc! {"a": "b"},
                true,
            ),
            (
                rawdoc! {"a": {"$in": [regex("^a", ""), 5]}},
                rawdoc! {"a": "ab"},
                true,
            ),
            (
                rawdoc! {"a": {"$in": [regex("^a", ""), 5]}},
                rawdoc! {"a": 5},
                true,
            ),
            (
                rawdoc! {"a": {"$in": [regex("^a", ""), 5]}},
                rawdoc! {"a": "b"},
                false,
            ),
            (
                rawdoc! {"a": {"$nin": [regex("^a", "")]}},
                rawdoc! {"a": "b"},
                true,
            ),
            (
                rawdoc! {"a": {"$nin": [regex("^a", "")]}},
                rawdoc! {"a": "a"},
                false,
            ),
            (
                rawdoc! {"a.b": regex("x", "")},
                rawdoc! {"a": [{"b": "y"}, {"b": "x"}]},
                true,
            ),
        ]);
    }

    #[test]
    fn type_table() {
        check(&[
            (rawdoc! {"a": {"$type": "string"}}, rawdoc! {"a": "x"}, true),
            (rawdoc! {"a": {"$type": 2}}, rawdoc! {"a": "x"}, true),
            (rawdoc! {"a": {"$type": 2.0}}, rawdoc! {"a": "x"}, true),
            (rawdoc! {"a": {"$type": "int"}}, rawdoc! {"a": 1.0}, false),
            (rawdoc! {"a": {"$type": "double"}}, rawdoc! {"a": 1.0}, true),
            (
                rawdoc! {"a": {"$type": "number"}},
                rawdoc! {"a": 1_i64},
                true,
            ),
            (
                rawdoc! {"a": {"$type": "number"}},
                rawdoc! {"a": dec("1.5")},
                true,
            ),
            (
                rawdoc! {"a": {"$type": "number"}},
                rawdoc! {"a": "1"},
                false,
            ),
            (
                rawdoc! {"a": {"$type": ["string", "bool"]}},
                rawdoc! {"a": true},
                true,
            ),
            (rawdoc! {"a": {"$type": "array"}}, rawdoc! {"a": []}, true),
            (
                rawdoc! {"a": {"$type": "array"}},
                rawdoc! {"a": [[1]]},
                true,
            ),
            (rawdoc! {"a": {"$type": "array"}}, rawdoc! {"a": 1}, false),
            (
                rawdoc! {"a": {"$type": "int"}},
                rawdoc! {"a": ["x", 1]},
                true,
            ),
            (rawdoc! {"a": {"$type": "null"}}, rawdoc! {"a": null}, true),
            (rawdoc! {"a": {"$type": "null"}}, rawdoc! {}, false),
            (
                rawdoc! {"a": {"$type": "undefined"}},
                rawdoc! {"a": RawBson::Undefined},
                true,
            ),
            (
                rawdoc! {"a": {"$type": "minKey"}},
                rawdoc! {"a": RawBson::MinKey},
                true,
            ),
            (
                rawdoc! {"a": {"$type": -1}},
                rawdoc! {"a": RawBson::MinKey},
                true,
            ),
            (
                rawdoc! {"a": {"$type": 127}},
                rawdoc! {"a": RawBson::MaxKey},
                true,
            ),
            (
                rawdoc! {"a": {"$type": "objectId"}},
                rawdoc! {"a": bson::oid::ObjectId::new()},
                true,
            ),
            (
                rawdoc! {"a": {"$type": "object"}},
                rawdoc! {"a": {"b": 1}},
                true,
            ),
            (
                rawdoc! {"a": {"$type": "binData"}},
                rawdoc! {"a": bin(&[1])},
                true,
            ),
            (
                rawdoc! {"a": {"$type": "regex"}},
                rawdoc! {"a": regex("x", "")},
                true,
            ),
            (
                rawdoc! {"a": {"$type": "date"}},
                rawdoc! {"a": bson::DateTime::from_millis(0)},
                true,
            ),
            (rawdoc! {"a": {"$type": "long"}}, rawdoc! {"a": 5_i64}, true),
            (
                rawdoc! {"a": {"$type": "decimal"}},
                rawdoc! {"a": dec("1")},
                true,
            ),
            (
                rawdoc! {"a.b": {"$type": "int"}},
                rawdoc! {"a": [{"b": 1}]},
                true,
            ),
        ]);
    }

    #[test]
    fn mod_size_all_table() {
        check(&[
            (rawdoc! {"a": {"$mod": [4, 0]}}, rawdoc! {"a": 8}, true),
            (rawdoc! {"a": {"$mod": [4, 0]}}, rawdoc! {"a": 9}, false),
            (rawdoc! {"a": {"$mod": [4, 1]}}, rawdoc! {"a": 9.9}, true),
            (rawdoc! {"a": {"$mod": [4, 1]}}, rawdoc! {"a": [2, 5]}, true),
            (rawdoc! {"a": {"$mod": [4, 0]}}, rawdoc! {"a": "8"}, false),
            (rawdoc! {"a": {"$mod": [4, 0]}}, rawdoc! {}, false),
            (
                rawdoc! {"a": {"$mod": [4000, 80]}},
                rawdoc! {"a": 4080},
                true,
            ),
            (
                rawdoc! {"a": {"$mod": [1_048_500.444, 60]}},
                rawdoc! {"a": 1_048_560},
                true,
            ),
            (
                rawdoc! {"a": {"$mod": [268_435_000, 440.555]}},
                rawdoc! {"a": 268_435_440},
                true,
            ),
            (
                rawdoc! {"a": {"$mod": [-100, 89]}},
                rawdoc! {"a": 123_456_789},
                true,
            ),
            (
                rawdoc! {"a": {"$mod": [100, -89]}},
                rawdoc! {"a": -123_456_789},
                true,
            ),
            (
                rawdoc! {"a": {"$mod": [i64::MAX, 0]}},
                rawdoc! {"a": i64::MAX},
                true,
            ),
            (
                rawdoc! {"a": {"$mod": [i64::MAX, 0]}},
                rawdoc! {"a": 9.223_372_036_854_776e18},
                false,
            ),
            (
                rawdoc! {"a": {"$mod": [9.223_372_036_854_776e18, 0]}},
                rawdoc! {"a": i64::MIN},
                true,
            ),
            (
                rawdoc! {"a": {"$mod": [-1, 0]}},
                rawdoc! {"a": i64::MIN},
                true,
            ),
            (
                rawdoc! {"a": {"$mod": [23_456_789, 5e-324]}},
                rawdoc! {"a": 5e-324},
                true,
            ),
            (
                rawdoc! {"a": {"$mod": [2, 0]}},
                rawdoc! {"a": f64::NAN},
                false,
            ),
            (
                rawdoc! {"a": {"$mod": [2, 0]}},
                rawdoc! {"a": dec("4")},
                true,
            ),
            (rawdoc! {"a": {"$size": 2}}, rawdoc! {"a": [1, 2]}, true),
            (rawdoc! {"a": {"$size": 2}}, rawdoc! {"a": [1]}, false),
            (rawdoc! {"a": {"$size": 0}}, rawdoc! {"a": []}, true),
            (rawdoc! {"a": {"$size": 0}}, rawdoc! {}, false),
            (rawdoc! {"a": {"$size": 1}}, rawdoc! {"a": [[1, 2]]}, true),
            (rawdoc! {"a": {"$size": 2}}, rawdoc! {"a": [[1, 2]]}, false),
            (rawdoc! {"a": {"$size": 1.0}}, rawdoc! {"a": [1]}, true),
            (
                rawdoc! {"a.b": {"$size": 1}},
                rawdoc! {"a": [{"b": [1]}, {"b": 2}]},
                true,
            ),
            (
                rawdoc! {"a": {"$not": {"$size": 1}}},
                rawdoc! {"a": [1, 2]},
                true,
            ),
            (
                rawdoc! {"a": {"$all": [1, 2]}},
                rawdoc! {"a": [2, 3, 1]},
                true,
            ),
            (
                rawdoc! {"a": {"$all": [1, 2]}},
                rawdoc! {"a": [2, 3]},
                false,
            ),
            (rawdoc! {"a": {"$all": [1]}}, rawdoc! {"a": 1}, true),
            (rawdoc! {"a": {"$all": []}}, rawdoc! {"a": [1]}, false),
            (
                rawdoc! {"a": {"$all": [[1, 2]]}},
                rawdoc! {"a": [1, 2]},
                true,
            ),
            (
                rawdoc! {"a": {"$all": [[1, 2]]}},
                rawdoc! {"a": [[1, 2], 3]},
                true,
            ),
            (
                rawdoc! {"a": {"$all": [regex("^x", ""), "yy"]}},
                rawdoc! {"a": ["xa", "yy"]},
                true,
            ),
            (rawdoc! {"a": {"$all": [null]}}, rawdoc! {}, true),
            (
                rawdoc! {"a": {"$all": [{"b": 1}]}},
                rawdoc! {"a": [{"b": 1}]},
                true,
            ),
            (
                rawdoc! {"a": {"$all": [{"$elemMatch": {"b": 1}}, {"$elemMatch": {"c": 2}}]}},
                rawdoc! {"a": [{"b": 1}, {"c": 2}]},
                true,
            ),
            (
                rawdoc! {"a": {"$all": [{"$elemMatch": {"b": 1}}, {"$elemMatch": {"c": 2}}]}},
                rawdoc! {"a": [{"b": 1}]},
                false,
            ),
            (
                rawdoc! {"a.b": {"$all": [1, 2]}},
                rawdoc! {"a": [{"b": 1}, {"b": 2}]},
                true,
            ),
        ]);
    }

    #[test]
    fn elem_match_table() {
        check(&[
            (
                rawdoc! {"a": {"$elemMatch": {"$gt": 1, "$lt": 5}}},
                rawdoc! {"a": [0, 3]},
                true,
            ),
            (
                rawdoc! {"a": {"$elemMatch": {"$gt": 1, "$lt": 5}}},
                rawdoc! {"a": [0, 6]},
                false,
            ),
            (
                rawdoc! {"a": {"$gt": 1, "$lt": 5}},
                rawdoc! {"a": [0, 6]},
                true,
            ),
            (
                rawdoc! {"a": {"$elemMatch": {"$gt": 1}}},
                rawdoc! {"a": 3},
                false,
            ),
            (
                rawdoc! {"a": {"$elemMatch": {"$eq": 1}}},
                rawdoc! {"a": [[1]]},
                false,
            ),
            (
                rawdoc! {"a": {"$elemMatch": {"$ne": 1}}},
                rawdoc! {"a": [1, 2]},
                true,
            ),
            (
                rawdoc! {"a": {"$elemMatch": {"$ne": 1}}},
                rawdoc! {"a": [1, 1]},
                false,
            ),
            (
                rawdoc! {"a": {"$elemMatch": {"$not": {"$gt": 3}}}},
                rawdoc! {"a": [5, 2]},
                true,
            ),
            (
                rawdoc! {"a": {"$elemMatch": {"$in": [2, 3]}}},
                rawdoc! {"a": [1, 3]},
                true,
            ),
            (
                rawdoc! {"a": {"$elemMatch": {"$nin": [1]}}},
                rawdoc! {"a": [1]},
                false,
            ),
            (
                rawdoc! {"a": {"$elemMatch": {"$exists": true}}},
                rawdoc! {"a": [1]},
                true,
            ),
            (
                rawdoc! {"a": {"$elemMatch": {"$exists": false}}},
                rawdoc! {"a": [1]},
                false,
            ),
            (
                rawdoc! {"a": {"$elemMatch": {"$type": "string"}}},
                rawdoc! {"a": [1, "x"]},
                true,
            ),
            (
                rawdoc! {"a": {"$elemMatch": {"$size": 2}}},
                rawdoc! {"a": [[1, 2]]},
                true,
            ),
            (
                rawdoc! {"a": {"$elemMatch": {"$regex": "^x"}}},
                rawdoc! {"a": ["ax", "xa"]},
                true,
            ),
            (
                rawdoc! {"a": {"$elemMatch": {"$elemMatch": {"$gt": 1}}}},
                rawdoc! {"a": [[0, 2]]},
                true,
            ),
            (
                rawdoc! {"a": {"$elemMatch": {"b": 1, "c": 2}}},
                rawdoc! {"a": [{"b": 1}, {"c": 2}]},
                false,
            ),
            (
                rawdoc! {"a": {"$elemMatch": {"b": 1, "c": 2}}},
                rawdoc! {"a": [{"b": 1, "c": 2}]},
                true,
            ),
            (
                rawdoc! {"a": {"b": 1, "c": 2}},
                rawdoc! {"a": [{"b": 1, "c": 2}]},
                true,
            ),
            (
                rawdoc! {"a.b": 1, "a.c": 2},
                rawdoc! {"a": [{"b": 1}, {"c": 2}]},
                true,
            ),
            (
                rawdoc! {"a": {"$elemMatch": {"b": {"$gt": 1}}}},
                rawdoc! {"a": [{"b": 0}, {"b": [0, 5]}]},
                true,
            ),
            (
                rawdoc! {"a": {"$elemMatch": {"$or": [{"b": 1}, {"c": 1}]}}},
                rawdoc! {"a": [{"c": 1}]},
                true,
            ),
            (
                rawdoc! {"a": {"$elemMatch": {}}},
                rawdoc! {"a": [1, {"x": 1}]},
                true,
            ),
            (
                rawdoc! {"a": {"$elemMatch": {}}},
                rawdoc! {"a": [1, 2]},
                false,
            ),
            (
                rawdoc! {"a": {"$elemMatch": {"0": 5}}},
                rawdoc! {"a": [[5, 6]]},
                true,
            ),
            (
                rawdoc! {"a": {"$elemMatch": {"b": null}}},
                rawdoc! {"a": [{"c": 1}]},
                true,
            ),
            (
                rawdoc! {"a.b": {"$elemMatch": {"c": 1}}},
                rawdoc! {"a": [{"b": [{"c": 2}]}, {"b": [{"c": 1}]}]},
                true,
            ),
            (
                rawdoc! {"a": {"$not": {"$elemMatch": {"$gt": 1}}}},
                rawdoc! {"a": [0, 1]},
                true,
            ),
            (
                rawdoc! {"a": {"$elemMatch": {"$id": 1, "$ref": "c"}}},
                rawdoc! {"a": [{"$ref": "c", "$id": 1}]},
                true,
            ),
        ]);
    }

    #[test]
    fn bits_table() {
        check(&[
            (rawdoc! {"a": {"$bitsAllSet": 5}}, rawdoc! {"a": 7}, true),
            (rawdoc! {"a": {"$bitsAllSet": 5}}, rawdoc! {"a": 6}, false),
            (
                rawdoc! {"a": {"$bitsAllSet": [0, 2]}},
                rawdoc! {"a": 5},
                true,
            ),
            (rawdoc! {"a": {"$bitsAllSet": [1]}}, rawdoc! {"a": 5}, false),
            (rawdoc! {"a": {"$bitsAllSet": []}}, rawdoc! {"a": 5}, true),
            (rawdoc! {"a": {"$bitsAnySet": []}}, rawdoc! {"a": 5}, false),
            (
                rawdoc! {"a": {"$bitsAnySet": [1, 2]}},
                rawdoc! {"a": 4},
                true,
            ),
            (
                rawdoc! {"a": {"$bitsAllClear": [1, 3]}},
                rawdoc! {"a": 5},
                true,
            ),
            (rawdoc! {"a": {"$bitsAllClear": 1}}, rawdoc! {"a": 5}, false),
            (
                rawdoc! {"a": {"$bitsAnyClear": [0, 1]}},
                rawdoc! {"a": 5},
                true,
            ),
            (
                rawdoc! {"a": {"$bitsAnyClear": [0, 2]}},
                rawdoc! {"a": 5},
                false,
            ),
            (
                rawdoc! {"a": {"$bitsAllSet": [100]}},
                rawdoc! {"a": -1},
                true,
            ),
            (
                rawdoc! {"a": {"$bitsAllSet": [100]}},
                rawdoc! {"a": 1},
                false,
            ),
            (
                rawdoc! {"a": {"$bitsAllSet": [63]}},
                rawdoc! {"a": i64::MIN},
                true,
            ),
            (rawdoc! {"a": {"$bitsAllSet": 1}}, rawdoc! {"a": 3.0}, true),
            (rawdoc! {"a": {"$bitsAllSet": 1}}, rawdoc! {"a": 3.5}, false),
            (
                rawdoc! {"a": {"$bitsAllClear": 1}},
                rawdoc! {"a": f64::NAN},
                false,
            ),
            (rawdoc! {"a": {"$bitsAllSet": 1}}, rawdoc! {"a": "1"}, false),
            (
                rawdoc! {"a": {"$bitsAllSet": 1}},
                rawdoc! {"a": [2, 3]},
                true,
            ),
            (
                rawdoc! {"a": {"$bitsAllSet": bin(&[0b101])}},
                rawdoc! {"a": 5},
                true,
            ),
            (
                rawdoc! {"a": {"$bitsAllSet": [0, 9]}},
                rawdoc! {"a": bin(&[1, 2])},
                true,
            ),
            (
                rawdoc! {"a": {"$bitsAllSet": [0, 16]}},
                rawdoc! {"a": bin(&[1, 2])},
                false,
            ),
            (
                rawdoc! {"a": {"$bitsAllClear": [16]}},
                rawdoc! {"a": bin(&[1, 2])},
                true,
            ),
            (
                rawdoc! {"a": {"$bitsAnySet": bin(&[0, 2])}},
                rawdoc! {"a": bin(&[0, 2])},
                true,
            ),
        ]);
    }

    #[test]
    fn expr_and_misc_table() {
        check(&[
            (
                rawdoc! {"$expr": {"$gt": ["$a", "$b"]}},
                rawdoc! {"a": 3, "b": 2},
                true,
            ),
            (
                rawdoc! {"$expr": {"$gt": ["$a", "$b"]}},
                rawdoc! {"a": 1, "b": 2},
                false,
            ),
            (rawdoc! {"$expr": {"$eq": ["$a", null]}}, rawdoc! {}, false),
            (rawdoc! {"$expr": "$a"}, rawdoc! {"a": 0}, false),
            (rawdoc! {"$expr": "$a"}, rawdoc! {"a": 2}, true),
            (rawdoc! {"$expr": true, "a": 1}, rawdoc! {"a": 1}, true),
            (
                rawdoc! {"$or": [{"$expr": {"$eq": ["$a", 1]}}, {"b": 1}]},
                rawdoc! {"a": 1},
                true,
            ),
            (rawdoc! {"$sampleRate": 1}, rawdoc! {}, true),
            (rawdoc! {"$sampleRate": 0.0}, rawdoc! {}, false),
            (rawdoc! {"$id": 5}, rawdoc! {"$id": 5}, true),
            (
                rawdoc! {"a": {"$exists": true, "$ne": null}},
                rawdoc! {"a": null},
                false,
            ),
            (rawdoc! {"a": {"$eq": null}}, rawdoc! {"a": [1]}, false),
            (
                rawdoc! {"a.b": {"$exists": false}},
                rawdoc! {"a": [{"b": 1}, {}]},
                false,
            ),
            (rawdoc! {"a.1": {"$gt": 1}}, rawdoc! {"a": [1, 2]}, true),
            (
                rawdoc! {"a.1.b": 2},
                rawdoc! {"a": [{"b": 1}, {"b": 2}]},
                true,
            ),
            (rawdoc! {"": 1}, rawdoc! {"": 1}, true),
            (rawdoc! {"a": dec("1.0")}, rawdoc! {"a": 1_i64}, true),
            (rawdoc! {"a": {"$in": [dec("2")]}}, rawdoc! {"a": 2.0}, true),
            (rawdoc! {"a": {"$lt": dec("2.5")}}, rawdoc! {"a": 2}, true),
        ]);
        let f = Filter::compile(&rawdoc! {"$expr": {"$add": ["$a", 1]}}).unwrap();
        let err = f.try_matches(&rawdoc! {"a": "x"}).unwrap_err();
        assert_eq!(err.code, ErrorCode::Location(16554));
        assert!(!f.matches(&rawdoc! {"a": "x"}));
        let mut hits = 0;
        let f = Filter::compile(&rawdoc! {"$sampleRate": 0.5}).unwrap();
        for _ in 0..1000 {
            hits += usize::from(f.matches(&rawdoc! {}));
        }
        assert!((300..700).contains(&hits), "{hits}");
    }

    #[test]
    fn new_operator_errors() {
        let cases: Vec<(RawDocumentBuf, ErrorCode, &str)> = vec![
            (
                rawdoc! {"$not": {"a": 1}},
                ErrorCode::BadValue,
                "unknown top level operator: $not. If you are trying to negate an entire \
                 expression, use $nor.",
            ),
            (
                rawdoc! {"a": {"$type": "foo"}},
                ErrorCode::BadValue,
                "Unknown type name alias: foo",
            ),
            (
                rawdoc! {"a": {"$type": 100}},
                ErrorCode::BadValue,
                "Invalid numerical type code: 100",
            ),
            (
                rawdoc! {"a": {"$type": 1.5}},
                ErrorCode::BadValue,
                "Invalid numerical type code: 1.5",
            ),
            (
                rawdoc! {"a": {"$type": 0}},
                ErrorCode::BadValue,
                "Invalid numerical type code: 0",
            ),
            (
                rawdoc! {"a": {"$type": {}}},
                ErrorCode::TypeMismatch,
                "type must be represented as a number or a string",
            ),
            (
                rawdoc! {"a": {"$type": [null]}},
                ErrorCode::TypeMismatch,
                "type must be represented as a number or a string",
            ),
            (
                rawdoc! {"a": {"$type": []}},
                ErrorCode::FailedToParse,
                "a must match at least one type",
            ),
            (
                rawdoc! {"a": {"$mod": 1}},
                ErrorCode::BadValue,
                "malformed mod, needs to be an array",
            ),
            (
                rawdoc! {"a": {"$mod": []}},
                ErrorCode::BadValue,
                "malformed mod, not enough elements",
            ),
            (
                rawdoc! {"a": {"$mod": [1]}},
                ErrorCode::BadValue,
                "malformed mod, not enough elements",
            ),
            (
                rawdoc! {"a": {"$mod": [1, 2, 3]}},
                ErrorCode::BadValue,
                "malformed mod, too many elements",
            ),
            (
                rawdoc! {"a": {"$mod": ["1", 2]}},
                ErrorCode::BadValue,
                "malformed mod, divisor not a number",
            ),
            (
                rawdoc! {"a": {"$mod": [1, null]}},
                ErrorCode::BadValue,
                "malformed mod, remainder not a number",
            ),
            (
                rawdoc! {"a": {"$mod": [0, 1]}},
                ErrorCode::BadValue,
                "divisor cannot be 0",
            ),
            (
                rawdoc! {"a": {"$mod": [5e-324, 1]}},
                ErrorCode::BadValue,
                "divisor cannot be 0",
            ),
            (
                rawdoc! {"a": {"$mod": [f64::NAN, 1]}},
                ErrorCode::BadValue,
                "malformed mod, divisor value is invalid :: caused by :: Unable to coerce \
                 NaN/Inf to integral type",
            ),
            (
                rawdoc! {"a": {"$mod": [1, f64::NEG_INFINITY]}},
                ErrorCode::BadValue,
                "malformed mod, remainder value is invalid :: caused by :: Unable to coerce \
                 NaN/Inf to integral type",
            ),
            (
                rawdoc! {"a": {"$mod": [1.797_69e307, 0]}},
                ErrorCode::BadValue,
                "malformed mod, divisor value is invalid :: caused by :: Out of bounds \
                 coercing to integral value",
            ),
            (
                rawdoc! {"a": {"$size": "1"}},
                ErrorCode::BadValue,
                "Failed to parse $size. Expected a number in: $size: \"1\"",
            ),
            (
                rawdoc! {"a": {"$size": -1}},
                ErrorCode::BadValue,
                "Failed to parse $size. Expected a non-negative number in: $size: -1",
            ),
            (
                rawdoc! {"a": {"$size": 1.5}},
                ErrorCode::BadValue,
                "Failed to parse $size. Expected an integer: $size: 1.5",
            ),
            (
                rawdoc! {"a": {"$size": 3_000_000_000_i64}},
                ErrorCode::BadValue,
                "Failed to parse $size. Cannot represent $size: 3000000000 in an int",
            ),
            (
                rawdoc! {"a": {"$all": 1}},
                ErrorCode::BadValue,
                "$all needs an array",
            ),
            (
                rawdoc! {"a": {"$all": [{"$gt": 1}]}},
                ErrorCode::BadValue,
                "no $ expressions in $all",
            ),
            (
                rawdoc! {"a": {"$all": [{"$elemMatch": {"b": 1}}, 5]}},
                ErrorCode::BadValue,
                "$all/$elemMatch has to be consistent",
            ),
            (
                rawdoc! {"a": {"$elemMatch": 1}},
                ErrorCode::BadValue,
                "$elemMatch needs an Object",
            ),
            (
                rawdoc! {"a": {"$elemMatch": {"$expr": {"$eq": [1, 1]}}}},
                ErrorCode::BadValue,
                "$expr can only be applied to the top-level document",
            ),
            (
                rawdoc! {"a": {"$elemMatch": {"$where": "1"}}},
                ErrorCode::BadValue,
                "$where can only be applied to the top-level document",
            ),
            (
                rawdoc! {"a": {"$elemMatch": {"$gt": 1, "b": 1}}},
                ErrorCode::BadValue,
                "unknown operator: b",
            ),
            (
                rawdoc! {"a": {"$bitsAllSet": "x"}},
                ErrorCode::BadValue,
                "a takes an Array, a number, or a BinData but received: $bitsAllSet: \"x\"",
            ),
            (
                rawdoc! {"a": {"$bitsAllSet": -1}},
                ErrorCode::FailedToParse,
                "Expected a non-negative number in: $bitsAllSet: -1",
            ),
            (
                rawdoc! {"a": {"$bitsAnySet": 1.5}},
                ErrorCode::FailedToParse,
                "Expected an integer: $bitsAnySet: 1.5",
            ),
            (
                rawdoc! {"a": {"$bitsAllClear": [1, -1]}},
                ErrorCode::BadValue,
                "Failed to parse bit position. Expected a non-negative number in: 1: -1",
            ),
            (
                rawdoc! {"a": {"$bitsAnyClear": ["a"]}},
                ErrorCode::BadValue,
                "Failed to parse bit position. Expected a number in: 0: \"a\"",
            ),
            (
                rawdoc! {"a": {"$regex": 1}},
                ErrorCode::BadValue,
                "$regex has to be a string",
            ),
            (
                rawdoc! {"a": {"$regex": "x", "$options": 1}},
                ErrorCode::BadValue,
                "$options has to be a string",
            ),
            (
                rawdoc! {"a": {"$options": "i"}},
                ErrorCode::BadValue,
                "$options needs a $regex",
            ),
            (
                rawdoc! {"a": {"$regex": regex("x", "i"), "$options": "m"}},
                ErrorCode::Location(51075),
                "options set in both $regex and $options",
            ),
            (
                rawdoc! {"a": {"$options": "m", "$regex": regex("x", "i")}},
                ErrorCode::Location(51074),
                "options set in both $regex and $options",
            ),
            (
                rawdoc! {"a": {"$regex": "x", "$options": "g"}},
                ErrorCode::Location(51108),
                " invalid flag in regex options: g",
            ),
            (
                rawdoc! {"a": {"$regex": "(?=x)"}},
                ErrorCode::Location(51091),
                "Regular expression is invalid: lookahead and lookbehind assertions are not \
                 supported by Ebb (its regex engine never backtracks)",
            ),
            (
                rawdoc! {"a": {"$in": [regex("(", "")]}},
                ErrorCode::Location(51091),
                "Regular expression is invalid: unclosed group",
            ),
            (
                rawdoc! {"a": {"$not": regex("x", "q")}},
                ErrorCode::Location(51108),
                " invalid flag in regex options: q",
            ),
            (
                rawdoc! {"$expr": {"$foo": 1}},
                ErrorCode::InvalidPipelineOperator,
                "Unrecognized expression '$foo'",
            ),
            (
                rawdoc! {"$expr": {"$function": {"body": "1", "args": [], "lang": "js"}}},
                ErrorCode::Location(31264),
                "Cannot run server-side javascript without the javascript engine enabled",
            ),
            (
                rawdoc! {"$text": {"$search": "x"}},
                ErrorCode::NotImplemented,
                "the $text query operator is not supported by Ebb yet",
            ),
            (
                rawdoc! {"a": {"$near": [0, 0]}},
                ErrorCode::NotImplemented,
                "the $near query operator is not supported by Ebb yet",
            ),
            (
                rawdoc! {"a": {"$geoWithin": {}}},
                ErrorCode::NotImplemented,
                "the $geoWithin query operator is not supported by Ebb yet",
            ),
            (
                rawdoc! {"$jsonSchema": 1},
                ErrorCode::TypeMismatch,
                "$jsonSchema must be an object",
            ),
            (
                rawdoc! {"$jsonSchema": {}},
                ErrorCode::NotImplemented,
                "the $jsonSchema query operator is not supported by Ebb yet",
            ),
            (
                rawdoc! {"$sampleRate": 2},
                ErrorCode::BadValue,
                "numeric argument to $sampleRate must be in [0, 1]",
            ),
            (
                rawdoc! {"$sampleRate": "x"},
                ErrorCode::BadValue,
                "argument to $sampleRate must be a numeric type",
            ),
            (
                rawdoc! {"$alwaysTrue": "x"},
                ErrorCode::FailedToParse,
                "Expected a number in: $alwaysTrue: \"x\"",
            ),
            (
                rawdoc! {"a": {"$in": [1, RawBson::Undefined]}},
                ErrorCode::BadValue,
                "InMatchExpression equality cannot be undefined",
            ),
            (
                rawdoc! {"a": {"$expr": 1}},
                ErrorCode::BadValue,
                "unknown operator: $expr",
            ),
        ];
        for (filter, code, msg) in cases {
            let err = Filter::compile(&filter).unwrap_err();
            assert_eq!((err.code, err.errmsg.as_str()), (code, msg), "{filter:?}");
        }
        let err =
            Filter::compile_with(&rawdoc! {"$where": "1"}, FilterContext::Pipeline).unwrap_err();
        assert_eq!(
            (err.code, err.errmsg.as_str()),
            (ErrorCode::BadValue, "$where is not allowed in this context")
        );
    }

    #[test]
    fn matched_array_index_table() {
        let cases: Vec<(RawDocumentBuf, RawDocumentBuf, Option<usize>)> = vec![
            (rawdoc! {"a": 2}, rawdoc! {"a": [1, 2, 3]}, Some(1)),
            (rawdoc! {"a": {"$gt": 1}}, rawdoc! {"a": [1, 2, 3]}, Some(1)),
            (rawdoc! {"a": 1}, rawdoc! {"a": 1}, None),
            (rawdoc! {"a": [1, 2]}, rawdoc! {"a": [1, 2]}, None),
            (
                rawdoc! {"a.b": 5},
                rawdoc! {"a": [{"b": 1}, {"b": 5}]},
                Some(1),
            ),
            (
                rawdoc! {"a.b": 5},
                rawdoc! {"a": [{"b": [4]}, {"b": [4, 5]}]},
                Some(1),
            ),
            (
                rawdoc! {"a": {"$elemMatch": {"b": 2}}},
                rawdoc! {"a": [{"b": 1}, {"b": 2}]},
                Some(1),
            ),
            (
                rawdoc! {"a": {"$elemMatch": {"$gt": 2}}},
                rawdoc! {"a": [1, 5]},
                Some(1),
            ),
            (
                rawdoc! {"a": 2, "b": 7},
                rawdoc! {"a": [1, 2], "b": [7]},
                Some(0),
            ),
            (
                rawdoc! {"a": 2, "b": 7},
                rawdoc! {"a": [1, 2], "b": 7},
                Some(1),
            ),
            (rawdoc! {"$or": [{"a": 2}]}, rawdoc! {"a": [1, 2]}, None),
            (rawdoc! {"a": 9}, rawdoc! {"a": [1, 2]}, None),
            (rawdoc! {"a.1": 2}, rawdoc! {"a": [1, 2]}, Some(1)),
        ];
        for (filter, doc, want) in cases {
            let f = Filter::compile(&filter).unwrap();
            assert_eq!(f.matched_array_index(&doc), want, "{filter:?} on {doc:?}");
        }
    }

    /// The offset-tracking traversal yields exactly what `path` yields.
    #[test]
    fn walk_agrees_with_path() {
        let docs = vec![
            rawdoc! {"a": 1},
            rawdoc! {},
            rawdoc! {"a": [1, 2, [3]]},
            rawdoc! {"a": [{"b": 1}, {"c": 2}, 3, [{"b": 4}]]},
            rawdoc! {"a": [{"b": [1, {"c": 2}]}, {"b": {"c": 3}}]},
            rawdoc! {"a": [{"0": "x"}, 7, [8, 9]]},
            rawdoc! {"a": {"b": [[1], 2]}},
        ];
        let paths = [
            "a", "a.b", "a.0", "a.1", "a.b.c", "a.3.b", "a.2.1", "a.b.0", "x",
        ];
        for doc in &docs {
            for p in paths {
                let parts: Vec<&str> = p.split('.').collect();
                for leaf in [
                    LeafArrays::Expand,
                    LeafArrays::NoExpand,
                    LeafArrays::ExpandOmitArray,
                ] {
                    let want = super::super::path::values(doc, &parts, leaf);
                    let mut got = Vec::new();
                    let first = doc.get(parts[0]).ok().flatten();
                    let _ = walk::at(first, &parts[1..], leaf, None, &mut |v, _| {
                        got.push(v);
                        ControlFlow::Continue(())
                    });
                    assert_eq!(got, want, "{doc:?} {p} {leaf:?}");
                }
            }
        }
    }
}
