//! Query filters: `Filter::compile(&query)?` once, then `filter.matches(&doc)` per document.
//!
//! Supported: implicit equality (`{a: 1}`, dotted paths, arrays matched element-wise and as a
//! whole), `$eq $ne $gt $gte $lt $lte $in $nin $exists $not` on fields, `$and $or $nor` and
//! `$comment` at the top level, and `$alwaysTrue`/`$alwaysFalse`. Comparisons use
//! [`compare`] with MongoDB's type bracketing: `$gt: 5` only matches numbers, except that
//! `null` matches missing and `undefined` fields and MinKey/MaxKey bound every type.
//!
//! Other MongoDB operators (`$regex`, `$elemMatch`, `$size`, `$type`, `$all`, `$mod`, `$expr`,
//! `$where`, `$text`, geo, bitwise, `$jsonSchema`) are recognised and rejected with
//! `NotImplemented`; names MongoDB does not know get MongoDB's `BadValue`.

use std::cmp::Ordering;

use bson::{RawArray, RawBson, RawBsonRef, RawDocument};

use super::compare::{canonical_type, compare, is_nan, rank};
use super::path::{self, FieldPath, LeafArrays};
use super::{invalid_bson, not_implemented, true_value};
use crate::error::CommandError;

/// A compiled query filter.
#[derive(Debug, Clone)]
pub struct Filter {
    root: Expr,
    /// The distinct first components of the paths in `root`, fetched in one pass per document.
    fields: Vec<String>,
}

#[derive(Debug, Clone)]
enum Expr {
    And(Vec<Expr>),
    Or(Vec<Expr>),
    Nor(Vec<Expr>),
    Not(Box<Expr>),
    Const(bool),
    Path {
        path: FieldPath,
        /// Index of the path's first component in `Filter::fields`.
        field: usize,
        pred: Pred,
    },
}

#[derive(Debug, Clone)]
enum Pred {
    Cmp(CmpOp, RawBson),
    In(InSet),
    Exists,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CmpOp {
    Eq,
    Lt,
    Lte,
    Gt,
    Gte,
}

/// `$in`'s values, sorted by [`compare`] for binary search.
#[derive(Debug, Clone)]
struct InSet {
    sorted: Vec<RawBson>,
    has_null: bool,
}

impl Filter {
    /// Compiles a filter document, with MongoDB's errors for malformed ones.
    pub fn compile(query: &RawDocument) -> Result<Filter, CommandError> {
        let mut root = parse_doc(query)?;
        let mut fields = Vec::new();
        root.assign_fields(&mut fields);
        Ok(Filter { root, fields })
    }

    /// A filter that matches every document (`{}`).
    pub fn match_all() -> Filter {
        Filter {
            root: Expr::And(Vec::new()),
            fields: Vec::new(),
        }
    }

    /// Whether `doc` satisfies the filter.
    pub fn matches(&self, doc: &RawDocument) -> bool {
        // One pass over the document fetches every top-level field the filter reads (the first
        // occurrence of each, as `RawDocument::get` would), instead of one scan per predicate.
        let mut values: Vec<Option<RawBsonRef<'_>>> = vec![None; self.fields.len()];
        let mut missing = self.fields.len();
        if missing > 0 {
            for elem in doc.iter_elements() {
                let Ok(elem) = elem else { break };
                let key = elem.key().as_str();
                let Some(i) = self.fields.iter().position(|f| f == key) else {
                    continue;
                };
                if values[i].is_none() {
                    values[i] = elem.value().ok();
                    missing -= 1;
                    if missing == 0 {
                        break;
                    }
                }
            }
        }
        self.root.matches(&values)
    }

    /// Whether the filter is `{}` (or reduces to an empty conjunction).
    pub fn is_match_all(&self) -> bool {
        matches!(&self.root, Expr::And(v) if v.is_empty())
    }

    /// The `_id` value every matching document must have, when the filter's top-level
    /// conjunction contains an equality on `_id` (`{_id: v}` or `{_id: {$eq: v}}`) with a value
    /// that is not an array, document or regex. Commands can then fetch the single document
    /// keyed by this value (see [`keystring`](super::keystring)) instead of scanning; if the
    /// filter has other conditions (`{_id: 1, a: 2}`), they must still call [`matches`] on it.
    ///
    /// [`matches`]: Filter::matches
    pub fn id_equality(&self) -> Option<RawBson> {
        self.top_level().into_iter().find_map(|e| match e {
            Expr::Path {
                path,
                pred: Pred::Cmp(CmpOp::Eq, v),
                ..
            } if path.dotted() == "_id"
                && !matches!(
                    v,
                    RawBson::Array(_) | RawBson::Document(_) | RawBson::RegularExpression(_)
                ) =>
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

    /// The conjuncts at the top level, with nested `$and`s flattened.
    fn top_level(&self) -> Vec<&Expr> {
        fn flatten<'e>(e: &'e Expr, out: &mut Vec<&'e Expr>) {
            match e {
                Expr::And(v) => v.iter().for_each(|c| flatten(c, out)),
                other => out.push(other),
            }
        }
        let mut out = Vec::new();
        flatten(&self.root, &mut out);
        out
    }
}

fn collect_equalities(e: &Expr, out: &mut Vec<(String, RawBson)>) {
    match e {
        Expr::And(v) => v.iter().for_each(|c| collect_equalities(c, out)),
        Expr::Path {
            path,
            pred: Pred::Cmp(CmpOp::Eq, v),
            ..
        } => out.push((path.dotted().to_owned(), v.clone())),
        _ => {}
    }
}

impl Expr {
    /// `fields` holds the document's value for each of `Filter::fields`.
    fn matches(&self, fields: &[Option<RawBsonRef<'_>>]) -> bool {
        match self {
            Expr::And(v) => v.iter().all(|e| e.matches(fields)),
            Expr::Or(v) => v.iter().any(|e| e.matches(fields)),
            Expr::Nor(v) => !v.iter().any(|e| e.matches(fields)),
            Expr::Not(e) => !e.matches(fields),
            Expr::Const(b) => *b,
            Expr::Path { path, field, pred } => {
                let first = fields.get(*field).copied().flatten();
                let rest = path.parts().get(1..).unwrap_or_default();
                path::any_at(first, rest, LeafArrays::Expand, |v| pred.matches_one(v))
            }
        }
    }

    /// Numbers each path by its first component, collecting the distinct components.
    fn assign_fields(&mut self, fields: &mut Vec<String>) {
        match self {
            Expr::And(v) | Expr::Or(v) | Expr::Nor(v) => {
                for e in v {
                    e.assign_fields(fields);
                }
            }
            Expr::Not(e) => e.assign_fields(fields),
            Expr::Const(_) => {}
            Expr::Path { path, field, .. } => {
                let first = path.parts().first().map_or("", String::as_str);
                *field = fields.iter().position(|f| f == first).unwrap_or_else(|| {
                    fields.push(first.to_owned());
                    fields.len() - 1
                });
            }
        }
    }

    /// An `$and` of `children`, or the single child itself.
    fn and(mut children: Vec<Expr>) -> Expr {
        if children.len() == 1 {
            children.pop().unwrap_or(Expr::Const(true))
        } else {
            Expr::And(children)
        }
    }
}

impl Pred {
    /// Whether one value reached by the path (`None`: missing) satisfies the predicate.
    fn matches_one(&self, v: Option<RawBsonRef<'_>>) -> bool {
        match self {
            Pred::Exists => v.is_some(),
            Pred::Cmp(op, rhs) => cmp_matches(*op, v, rhs.as_raw_bson_ref()),
            Pred::In(set) => set.contains(v),
        }
    }
}

/// mongod's `ComparisonMatchExpression::matchesSingleElement`.
fn cmp_matches(op: CmpOp, v: Option<RawBsonRef<'_>>, rhs: RawBsonRef<'_>) -> bool {
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
    let ord = compare(v, rhs);
    match op {
        CmpOp::Eq => ord == Ordering::Equal,
        CmpOp::Lt => ord == Ordering::Less,
        CmpOp::Lte => ord != Ordering::Greater,
        CmpOp::Gt => ord == Ordering::Greater,
        CmpOp::Gte => ord != Ordering::Less,
    }
}

impl InSet {
    fn contains(&self, v: Option<RawBsonRef<'_>>) -> bool {
        let Some(v) = v else {
            return self.has_null;
        };
        if self.has_null && matches!(v, RawBsonRef::Undefined) {
            return true;
        }
        self.sorted
            .binary_search_by(|x| compare(x.as_raw_bson_ref(), v))
            .is_ok()
    }
}

fn bad_value(msg: impl Into<String>) -> CommandError {
    CommandError::bad_value(msg)
}

/// Parses a filter document (the top level, or an entry of `$and`/`$or`/`$nor`).
fn parse_doc(doc: &RawDocument) -> Result<Expr, CommandError> {
    let mut children = Vec::new();
    for item in doc {
        let (key, value) = item.map_err(|e| invalid_bson(&e))?;
        let key = key.as_str();
        if let Some(op) = key.strip_prefix('$') {
            match op {
                "and" | "or" | "nor" => children.push(parse_tree(key, value)?),
                "comment" => {}
                "alwaysTrue" | "alwaysFalse" => {
                    if !is_integer_one(value) {
                        return Err(CommandError::new(
                            crate::error::ErrorCode::FailedToParse,
                            format!("{key} must be an integer value of 1"),
                        ));
                    }
                    children.push(Expr::Const(op == "alwaysTrue"));
                }
                // DBRef fields are matched as plain fields.
                "id" | "ref" | "db" => children.push(leaf_eq(key, value)?),
                "where" | "expr" | "text" | "jsonSchema" | "sampleRate" => {
                    return Err(not_implemented(&format!("the {key} query operator")));
                }
                _ => return Err(bad_value(format!("unknown top level operator: {key}"))),
            }
            continue;
        }
        match value {
            RawBsonRef::Document(sub) if is_operator_doc(sub) => {
                parse_operators(key, sub, &mut children)?;
            }
            RawBsonRef::RegularExpression(_) => {
                return Err(not_implemented("regular expression matching"));
            }
            _ => children.push(leaf_eq(key, value)?),
        }
    }
    Ok(Expr::and(children))
}

/// `{$id: …}` etc.: whether a document is an operator document (`{$gt: 1}`) rather than a value
/// to compare with. As in mongod, a document whose first field starts with `$` is one, unless it
/// is a `DBRef` (`$ref` and `$id`).
fn is_operator_doc(sub: &RawDocument) -> bool {
    let Some(Ok((first, _))) = sub.iter().next() else {
        return false;
    };
    if !first.as_str().starts_with('$') {
        return false;
    }
    let mut has_ref = false;
    let mut has_id = false;
    for (k, _) in sub.iter().map_while(Result::ok) {
        has_ref |= k.as_str() == "$ref";
        has_id |= k.as_str() == "$id";
    }
    !(has_ref && has_id)
}

fn is_integer_one(v: RawBsonRef<'_>) -> bool {
    match v {
        RawBsonRef::Int32(i) => i == 1,
        RawBsonRef::Int64(i) => i == 1,
        #[expect(clippy::float_cmp, reason = "exactly 1, as mongod requires")]
        RawBsonRef::Double(d) => d == 1.0,
        _ => false,
    }
}

/// `$and`, `$or`, `$nor`: a non-empty array of filter documents.
fn parse_tree(key: &str, value: RawBsonRef<'_>) -> Result<Expr, CommandError> {
    let RawBsonRef::Array(arr) = value else {
        return Err(bad_value(format!("{key} must be an array")));
    };
    let mut children = Vec::new();
    for item in arr {
        match item.map_err(|e| invalid_bson(&e))? {
            RawBsonRef::Document(d) => children.push(parse_doc(d)?),
            _ => {
                return Err(bad_value("$or/$and/$nor entries need to be full objects"));
            }
        }
    }
    if children.is_empty() {
        return Err(bad_value("$and/$or/$nor must be a nonempty array"));
    }
    Ok(match key {
        "$and" => Expr::And(children),
        "$or" => Expr::Or(children),
        _ => Expr::Nor(children),
    })
}

fn leaf(path: &str, pred: Pred) -> Expr {
    Expr::Path {
        path: FieldPath::new(path),
        field: 0,
        pred,
    }
}

/// Equality with `value` (implicit or `$eq`).
fn leaf_eq(path: &str, value: RawBsonRef<'_>) -> Result<Expr, CommandError> {
    comparison(path, CmpOp::Eq, value)
}

fn comparison(path: &str, op: CmpOp, value: RawBsonRef<'_>) -> Result<Expr, CommandError> {
    if matches!(value, RawBsonRef::Undefined) {
        return Err(bad_value("cannot compare to undefined"));
    }
    if op != CmpOp::Eq && matches!(value, RawBsonRef::RegularExpression(_)) {
        return Err(bad_value(format!(
            "Can't have RegEx as arg to predicate over field '{path}'."
        )));
    }
    Ok(leaf(path, Pred::Cmp(op, value.into())))
}

/// The operators of `{path: {$op: …, …}}`, appended to `out` (they are AND-ed).
fn parse_operators(path: &str, ops: &RawDocument, out: &mut Vec<Expr>) -> Result<(), CommandError> {
    for item in ops {
        let (op, value) = item.map_err(|e| invalid_bson(&e))?;
        let op = op.as_str();
        let expr = match op {
            "$eq" => leaf_eq(path, value)?,
            "$ne" => {
                if matches!(value, RawBsonRef::RegularExpression(_)) {
                    return Err(bad_value("Can't have regex as arg to $ne."));
                }
                Expr::Not(Box::new(leaf_eq(path, value)?))
            }
            "$lt" => comparison(path, CmpOp::Lt, value)?,
            "$lte" => comparison(path, CmpOp::Lte, value)?,
            "$gt" => comparison(path, CmpOp::Gt, value)?,
            "$gte" => comparison(path, CmpOp::Gte, value)?,
            "$in" => {
                let RawBsonRef::Array(arr) = value else {
                    return Err(bad_value("$in needs an array"));
                };
                leaf(path, Pred::In(parse_in(arr)?))
            }
            "$nin" => {
                let RawBsonRef::Array(arr) = value else {
                    return Err(bad_value("$nin needs an array"));
                };
                Expr::Not(Box::new(leaf(path, Pred::In(parse_in(arr)?))))
            }
            "$exists" => {
                let exists = leaf(path, Pred::Exists);
                if true_value(value) {
                    exists
                } else {
                    Expr::Not(Box::new(exists))
                }
            }
            "$not" => match value {
                RawBsonRef::RegularExpression(_) => {
                    return Err(not_implemented("regular expression matching"));
                }
                RawBsonRef::Document(sub) => {
                    if sub.is_empty() {
                        return Err(bad_value("$not cannot be empty"));
                    }
                    let mut inner = Vec::new();
                    parse_operators(path, sub, &mut inner)?;
                    Expr::Not(Box::new(Expr::and(inner)))
                }
                _ => return Err(bad_value("$not needs a regex or a document")),
            },
            "$regex" | "$options" | "$elemMatch" | "$all" | "$size" | "$type" | "$mod"
            | "$bitsAllSet" | "$bitsAllClear" | "$bitsAnySet" | "$bitsAnyClear" | "$geoWithin"
            | "$geoIntersects" | "$within" | "$near" | "$nearSphere" | "$geoNear" => {
                return Err(not_implemented(&format!("the {op} query operator")));
            }
            "$where" => return Err(bad_value("$where cannot be applied to a field")),
            _ => return Err(bad_value(format!("unknown operator: {op}"))),
        };
        out.push(expr);
    }
    Ok(())
}

/// `$in`/`$nin` values: plain values only (no operator documents, no undefined).
fn parse_in(arr: &RawArray) -> Result<InSet, CommandError> {
    let mut sorted = Vec::new();
    let mut has_null = false;
    for item in arr {
        let v = item.map_err(|e| invalid_bson(&e))?;
        match v {
            RawBsonRef::Document(d) if is_operator_doc(d) => {
                return Err(bad_value("cannot nest $ under $in"));
            }
            RawBsonRef::RegularExpression(_) => {
                return Err(not_implemented("regular expressions in $in"));
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
    Ok(InSet { sorted, has_null })
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
    #[expect(clippy::too_many_lines, reason = "one table")]
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
                "unknown top level operator: $foo",
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
                rawdoc! {"a": regex("x", "")},
                ErrorCode::NotImplemented,
                "regular expression matching is not supported by Ebb yet",
            ),
            (
                rawdoc! {"a": {"$size": 1}},
                ErrorCode::NotImplemented,
                "the $size query operator is not supported by Ebb yet",
            ),
            (
                rawdoc! {"$where": "1"},
                ErrorCode::NotImplemented,
                "the $where query operator is not supported by Ebb yet",
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
}
