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
//!
//! This file holds the public API, the compiled tree (`Node`, `Pred`) and the matcher. The
//! operators live by concept: `parse` (the filter document, pathless and logical operators,
//! the dispatch of the rest), `comparison` (`$eq $ne $lt $lte $gt $gte $in $nin`), `element`
//! (`$type`), `array` (`$elemMatch $all`), `evaluation` (`$mod $regex`), `bits`, `numeric`
//! (integer arguments), `walk` (path traversal with array positions) and `plan_view` (what
//! the planner reads).
//!
//! [`compare`]: super::compare::compare

use std::ops::ControlFlow;
use std::sync::Arc;

use bson::{RawBson, RawBsonRef, RawDocument};

use super::collation::Collation;
use super::expr::{Expression, Variables};
use super::path::{FieldPath, LeafArrays};
use super::regex::Regex;
use crate::error::CommandError;

mod array;
mod bits;
mod comparison;
mod element;
mod evaluation;
mod numeric;
mod parse;
mod plan_view;
#[cfg(test)]
mod tests;
mod walk;

use bits::BitTest;
use comparison::{CmpOp, InSet, cmp_matches};
use element::TypeSet;
use evaluation::mod_dividend;
use parse::parse_doc;
pub use plan_view::{PlanOp, PlanPred};

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
        // Slots on the stack for the usual handful of fields: no allocation per document.
        const ON_STACK: usize = 8;
        if self.fields.len() <= ON_STACK {
            let mut slots = [None; ON_STACK];
            let values = slots.get_mut(..self.fields.len()).unwrap_or_default();
            super::path::top_level_fields_into(doc, &self.fields, values);
            return self.root.eval(doc, values, key, coll);
        }
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

    /// The branches of the first top-level `$or`, each as the path predicates among its own
    /// top-level conjuncts (what an index scan per branch can be bounded by), or `None`
    /// without one. A branch whose other clauses are left out only gets looser bounds.
    pub fn or_branches(&self) -> Option<Vec<Vec<(&str, PlanPred<'_>)>>> {
        let branches = self.top_level().into_iter().find_map(|e| match e {
            Node::Or(v) => Some(v),
            _ => None,
        })?;
        Some(
            branches
                .iter()
                .map(|b| {
                    let mut top = Vec::new();
                    flatten_and(b, &mut top);
                    top.into_iter()
                        .filter_map(|e| match e {
                            Node::Path { path, pred, .. } => {
                                Some((path.dotted(), pred.plan_view()))
                            }
                            _ => None,
                        })
                        .collect()
                })
                .collect(),
        )
    }

    /// Whether every top-level conjunct is a predicate on a path (what
    /// [`Filter::plan_conjuncts`] returns is then the whole filter).
    pub fn paths_only(&self) -> bool {
        self.top_level()
            .into_iter()
            .all(|e| matches!(e, Node::Path { .. }))
    }

    /// The conjuncts at the top level, with nested `$and`s flattened.
    fn top_level(&self) -> Vec<&Node> {
        let mut out = Vec::new();
        flatten_and(&self.root, &mut out);
        out
    }
}

/// The conjuncts of `e`, with nested `$and`s flattened.
fn flatten_and<'e>(e: &'e Node, out: &mut Vec<&'e Node>) {
    match e {
        Node::And(v) => v.iter().for_each(|c| flatten_and(c, out)),
        other => out.push(other),
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
