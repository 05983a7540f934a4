//! A query's filter as mongod serializes its parsed, optimized `MatchExpression` (what
//! `explain` shows as `parsedQuery`, a stage's `filter` and a `$match` stage), and the query's
//! shape: the same query with every constant left out, hashed into mongod's `queryHash` and
//! `planCacheKey` (eight uppercase hex digits).
//!
//! Normalization, as mongod 7.0 does it: implicit equality becomes `$eq`; each operator of a
//! field is its own predicate; the conjunction of a document's predicates is one `$and`
//! (nested `$and`s, and nested `$or`s under an `$or`, are flattened; a one-child `$and` or
//! `$or` is its child); `$ne`, `$nin` and `$exists: false` are `$not` of `$eq`, `$in` and
//! `$exists: true`; `$in` lists its values in BSON order without repeats (regexes last), and a
//! one-value `$in` is `$eq` (or `$regex`); `$all` is an `$and` of `$eq`s; `$comment` is
//! dropped. A query's canonical form (not a pipeline's `$match`) also orders every list of
//! children as mongod's `sortTree` does: by kind of predicate, then path, then children.
//!
//! Predicates this module does not model (`$expr`, `$where`, `$elemMatch`, geo, text, …) are
//! shown as given.

use std::cmp::Ordering;

use bson::{RawArrayBuf, RawBson, RawBsonRef, RawDocument, RawDocumentBuf};

use super::compare::compare;
use super::plan::put;

/// mongod's `MatchExpression::MatchType` order, which `sortTree` sorts by first.
mod kind {
    pub const AND: u8 = 0;
    pub const OR: u8 = 1;
    pub const ELEM_MATCH_OBJECT: u8 = 2;
    pub const ELEM_MATCH_VALUE: u8 = 3;
    pub const SIZE: u8 = 4;
    pub const EQ: u8 = 5;
    pub const LTE: u8 = 6;
    pub const LT: u8 = 7;
    pub const GT: u8 = 8;
    pub const GTE: u8 = 9;
    pub const REGEX: u8 = 10;
    pub const MOD: u8 = 11;
    pub const EXISTS: u8 = 12;
    pub const IN: u8 = 13;
    pub const BITS_ALL_SET: u8 = 14;
    pub const BITS_ALL_CLEAR: u8 = 15;
    pub const BITS_ANY_SET: u8 = 16;
    pub const BITS_ANY_CLEAR: u8 = 17;
    pub const NOT: u8 = 19;
    pub const NOR: u8 = 20;
    pub const TYPE: u8 = 21;
    pub const GEO: u8 = 22;
    pub const WHERE: u8 = 23;
    pub const EXPR: u8 = 24;
    pub const ALWAYS_FALSE: u8 = 25;
    pub const ALWAYS_TRUE: u8 = 26;
    pub const OTHER: u8 = 27;
}

/// One node of the parsed filter.
#[derive(Debug, Clone)]
enum Node {
    /// `$and`, `$or`, `$nor` (by `kind`).
    List(u8, Vec<Node>),
    /// `$not` of a predicate on `path`.
    Not(String, Box<Node>),
    /// `{path: {op: value}}` (`rhs` is the operator document, kept whole for `$regex`).
    Leaf {
        kind: u8,
        path: String,
        rhs: RawDocumentBuf,
    },
    /// `{path: {$elemMatch: <sub-filter>}}` (an element that is a document matching it).
    ElemMatch(String, Box<Node>),
    /// A top-level element shown as given (`$expr`, `$where`, `$alwaysTrue`, …).
    Raw { kind: u8, element: RawDocumentBuf },
}

impl Node {
    fn kind(&self) -> u8 {
        match self {
            Node::List(k, _) | Node::Leaf { kind: k, .. } | Node::Raw { kind: k, .. } => *k,
            Node::Not(..) => kind::NOT,
            Node::ElemMatch(..) => kind::ELEM_MATCH_OBJECT,
        }
    }

    /// mongod's `path()`: empty for logical nodes.
    fn path(&self) -> &str {
        match self {
            Node::Leaf { path, .. } | Node::ElemMatch(path, _) => path,
            _ => "",
        }
    }

    fn children(&self) -> &[Node] {
        match self {
            Node::List(_, c) => c,
            Node::Not(_, c) | Node::ElemMatch(_, c) => std::slice::from_ref(c),
            _ => &[],
        }
    }
}

/// mongod's `matchExpressionComparator`: kind, then path, then number of children, then the
/// children in order.
fn cmp_nodes(a: &Node, b: &Node) -> Ordering {
    a.kind()
        .cmp(&b.kind())
        .then_with(|| a.path().cmp(b.path()))
        .then_with(|| a.children().len().cmp(&b.children().len()))
        .then_with(|| {
            a.children()
                .iter()
                .zip(b.children())
                .map(|(x, y)| cmp_nodes(x, y))
                .find(|o| o.is_ne())
                .unwrap_or(Ordering::Equal)
        })
}

fn sort_tree(node: &mut Node) {
    match node {
        Node::List(_, children) => {
            for c in children.iter_mut() {
                sort_tree(c);
            }
            children.sort_by(cmp_nodes);
        }
        Node::Not(_, child) | Node::ElemMatch(_, child) => sort_tree(child),
        Node::Leaf { .. } | Node::Raw { .. } => {}
    }
}

fn leaf(kind: u8, path: &str, op: &str, v: RawBson) -> Node {
    let mut rhs = RawDocumentBuf::new();
    put(&mut rhs, op, v);
    Node::Leaf {
        kind,
        path: path.to_owned(),
        rhs,
    }
}

fn regex_leaf(path: &str, pattern: &str, options: &str) -> Node {
    let mut rhs = RawDocumentBuf::new();
    put(&mut rhs, "$regex", pattern);
    if !options.is_empty() {
        put(&mut rhs, "$options", options);
    }
    Node::Leaf {
        kind: kind::REGEX,
        path: path.to_owned(),
        rhs,
    }
}

fn raw(kind: u8, key: &str, v: RawBsonRef<'_>) -> Node {
    let mut element = RawDocumentBuf::new();
    put(&mut element, key, RawBson::from(v));
    Node::Raw { kind, element }
}

/// A conjunction: flattened, and a single predicate stands alone.
fn and(mut children: Vec<Node>) -> Node {
    if children.len() == 1 {
        return children.pop().unwrap_or(Node::List(kind::AND, Vec::new()));
    }
    Node::List(kind::AND, children)
}

fn list(k: u8, items: RawBsonRef<'_>) -> Node {
    let mut children = Vec::new();
    if let RawBsonRef::Array(a) = items {
        for item in a.into_iter().map_while(Result::ok) {
            if let RawBsonRef::Document(d) = item {
                let child = and(parse_doc(d));
                // `$and` of `$and`, `$or` of `$or`: one list.
                match child {
                    Node::List(ck, grand) if ck == k && k != kind::NOR => children.extend(grand),
                    other => children.push(other),
                }
            }
        }
    }
    if children.len() == 1 && k != kind::NOR {
        return children.pop().unwrap_or(Node::List(k, Vec::new()));
    }
    Node::List(k, children)
}

/// The predicates of one filter document (its implicit conjunction, flattened).
fn parse_doc(doc: &RawDocument) -> Vec<Node> {
    let mut out = Vec::new();
    for (k, v) in doc.iter().map_while(Result::ok) {
        let k = k.as_str();
        match k {
            "$comment" => {}
            "$and" => match list(kind::AND, v) {
                Node::List(kind::AND, c) => out.extend(c),
                other => out.push(other),
            },
            "$or" => out.push(list(kind::OR, v)),
            "$nor" => out.push(list(kind::NOR, v)),
            "$expr" => out.push(raw(kind::EXPR, k, v)),
            "$where" => out.push(raw(kind::WHERE, k, v)),
            "$alwaysTrue" => out.push(raw(kind::ALWAYS_TRUE, k, v)),
            "$alwaysFalse" => out.push(raw(kind::ALWAYS_FALSE, k, v)),
            _ if k.starts_with('$') => out.push(raw(kind::OTHER, k, v)),
            path => field(&mut out, path, v),
        }
    }
    out
}

/// The predicates `{path: v}` stands for.
fn field(out: &mut Vec<Node>, path: &str, v: RawBsonRef<'_>) {
    match v {
        RawBsonRef::RegularExpression(re) => {
            out.push(regex_leaf(path, re.pattern.as_str(), re.options.as_str()));
        }
        RawBsonRef::Document(ops)
            if ops
                .iter()
                .next()
                .and_then(Result::ok)
                .is_some_and(|(o, _)| o.as_str().starts_with('$')) =>
        {
            operators(out, path, ops);
        }
        other => out.push(leaf(kind::EQ, path, "$eq", RawBson::from(other))),
    }
}

fn regex_options(ops: &RawDocument) -> &str {
    match ops.get("$options").ok().flatten() {
        Some(RawBsonRef::String(s)) => s,
        _ => "",
    }
}

/// The predicates of an operator document on `path`.
fn operators(out: &mut Vec<Node>, path: &str, ops: &RawDocument) {
    for (op, v) in ops.iter().map_while(Result::ok) {
        let op = op.as_str();
        if let Some(node) = operator(path, op, v, ops) {
            match node {
                // `$all` is a conjunction of its own.
                Node::List(kind::AND, c) => out.extend(c),
                other => out.push(other),
            }
        }
    }
}

fn operator(path: &str, op: &str, v: RawBsonRef<'_>, ops: &RawDocument) -> Option<Node> {
    let own = |v: RawBsonRef<'_>| RawBson::from(v);
    Some(match op {
        "$eq" => leaf(kind::EQ, path, op, own(v)),
        "$lt" => leaf(kind::LT, path, op, own(v)),
        "$lte" => leaf(kind::LTE, path, op, own(v)),
        "$gt" => leaf(kind::GT, path, op, own(v)),
        "$gte" => leaf(kind::GTE, path, op, own(v)),
        "$ne" => Node::Not(
            path.to_owned(),
            Box::new(leaf(kind::EQ, path, "$eq", own(v))),
        ),
        "$in" => in_list(path, v),
        "$nin" => Node::Not(path.to_owned(), Box::new(in_list(path, v))),
        "$exists" => {
            let yes = leaf(kind::EXISTS, path, "$exists", RawBson::Boolean(true));
            if super::true_value(v) {
                yes
            } else {
                Node::Not(path.to_owned(), Box::new(yes))
            }
        }
        "$regex" => match v {
            RawBsonRef::RegularExpression(re) => {
                let given = regex_options(ops);
                let flags = if given.is_empty() {
                    re.options.as_str()
                } else {
                    given
                };
                regex_leaf(path, re.pattern.as_str(), flags)
            }
            RawBsonRef::String(s) => regex_leaf(path, s, regex_options(ops)),
            other => leaf(kind::REGEX, path, op, own(other)),
        },
        "$options" => return None,
        "$size" => match number(v) {
            // mongod holds the size as an int.
            Some(n) if i32::try_from(n).is_ok() => leaf(
                kind::SIZE,
                path,
                op,
                RawBson::Int32(i32::try_from(n).unwrap_or(0)),
            ),
            _ => leaf(kind::SIZE, path, op, own(v)),
        },
        "$mod" => leaf(kind::MOD, path, op, mod_args(v)),
        "$type" => leaf(kind::TYPE, path, op, type_set(v)),
        "$bitsAllSet" => leaf(kind::BITS_ALL_SET, path, op, own(v)),
        "$bitsAllClear" => leaf(kind::BITS_ALL_CLEAR, path, op, own(v)),
        "$bitsAnySet" => leaf(kind::BITS_ANY_SET, path, op, own(v)),
        "$bitsAnyClear" => leaf(kind::BITS_ANY_CLEAR, path, op, own(v)),
        "$elemMatch" => {
            let value_form = match v {
                RawBsonRef::Document(d) => {
                    d.iter().next().and_then(Result::ok).is_some_and(|(k, _)| {
                        k.as_str().starts_with('$')
                            && !matches!(k.as_str(), "$and" | "$or" | "$nor" | "$expr" | "$where")
                    })
                }
                _ => false,
            };
            match v {
                RawBsonRef::Document(d) if value_form => {
                    // The element's predicates, each operator's right-hand side in one
                    // document.
                    let mut preds = Vec::new();
                    operators(&mut preds, path, d);
                    let mut rhs = RawDocumentBuf::new();
                    for p in &preds {
                        let mut one = RawDocumentBuf::new();
                        serialize_into(&mut one, p);
                        if let Ok(Some(RawBsonRef::Document(inner))) = one.get(path) {
                            for (k, x) in inner.iter().map_while(Result::ok) {
                                put(&mut rhs, k.as_str(), RawBson::from(x));
                            }
                        }
                    }
                    leaf(kind::ELEM_MATCH_VALUE, path, op, RawBson::Document(rhs))
                }
                RawBsonRef::Document(d) => {
                    let inner = parse_doc(d);
                    Node::ElemMatch(path.to_owned(), Box::new(and(inner)))
                }
                other => leaf(kind::ELEM_MATCH_OBJECT, path, op, own(other)),
            }
        }
        "$all" => match v {
            RawBsonRef::Array(a) => {
                let mut items = Vec::new();
                for item in a.into_iter().map_while(Result::ok) {
                    match item {
                        RawBsonRef::RegularExpression(re) => {
                            items.push(regex_leaf(path, re.pattern.as_str(), re.options.as_str()));
                        }
                        RawBsonRef::Document(d) if d.get("$elemMatch").ok().flatten().is_some() => {
                            operators(&mut items, path, d);
                        }
                        other => items.push(leaf(kind::EQ, path, "$eq", own(other))),
                    }
                }
                and(items)
            }
            other => leaf(kind::OTHER, path, op, own(other)),
        },
        "$not" => {
            let mut inner = Vec::new();
            match v {
                RawBsonRef::Document(d) => operators(&mut inner, path, d),
                RawBsonRef::RegularExpression(re) => {
                    inner.push(regex_leaf(path, re.pattern.as_str(), re.options.as_str()));
                }
                other => inner.push(leaf(kind::OTHER, path, op, own(other))),
            }
            Node::Not(path.to_owned(), Box::new(and(inner)))
        }
        "$geoWithin" | "$geoIntersects" | "$near" | "$nearSphere" | "$within" => {
            leaf(kind::GEO, path, op, own(v))
        }
        _ => leaf(kind::OTHER, path, op, own(v)),
    })
}

/// A whole number (of any numeric type); `$limit` and `$skip` arguments are read the same way.
pub(crate) fn number(v: RawBsonRef<'_>) -> Option<i64> {
    match v {
        RawBsonRef::Int32(n) => Some(i64::from(n)),
        RawBsonRef::Int64(n) => Some(n),
        #[expect(
            clippy::cast_possible_truncation,
            reason = "checked to be integral and in range"
        )]
        RawBsonRef::Double(d) if d.fract() == 0.0 && d.abs() < 9.2e18 => Some(d as i64),
        _ => None,
    }
}

/// `$mod`'s `[divisor, remainder]` as mongod holds them: longs (fractions truncated).
fn mod_args(v: RawBsonRef<'_>) -> RawBson {
    let truncated = |x: RawBsonRef<'_>| match x {
        #[expect(
            clippy::cast_possible_truncation,
            reason = "mongod truncates toward zero"
        )]
        RawBsonRef::Double(d) if d.is_finite() && d.abs() < 9.2e18 => Some(d.trunc() as i64),
        other => number(other),
    };
    if let RawBsonRef::Array(a) = v {
        let items: Vec<Option<i64>> = a.into_iter().map_while(Result::ok).map(truncated).collect();
        if let [Some(d), Some(r)] = items.as_slice() {
            let mut arr = RawArrayBuf::new();
            arr.push(*d);
            arr.push(*r);
            return RawBson::Array(arr);
        }
    }
    RawBson::from(v)
}

/// `$type`'s set as mongod serializes it: `"number"` first when given, then the type codes
/// in ascending order, without repeats.
fn type_set(v: RawBsonRef<'_>) -> RawBson {
    fn code(alias: &str) -> Option<i32> {
        Some(match alias {
            "double" => 1,
            "string" => 2,
            "object" => 3,
            "array" => 4,
            "binData" => 5,
            "undefined" => 6,
            "objectId" => 7,
            "bool" => 8,
            "date" => 9,
            "null" => 10,
            "regex" => 11,
            "dbPointer" => 12,
            "javascript" => 13,
            "symbol" => 14,
            "javascriptWithScope" => 15,
            "int" => 16,
            "timestamp" => 17,
            "long" => 18,
            "decimal" => 19,
            "minKey" => -1,
            "maxKey" => 127,
            _ => return None,
        })
    }
    let items: Vec<RawBsonRef<'_>> = match v {
        RawBsonRef::Array(a) => a.into_iter().map_while(Result::ok).collect(),
        other => vec![other],
    };
    let mut all_numbers = false;
    let mut codes = Vec::new();
    for item in items {
        match item {
            RawBsonRef::String("number") => all_numbers = true,
            RawBsonRef::String(s) => match code(s) {
                Some(c) => codes.push(c),
                None => return RawBson::from(v),
            },
            other => match number(other).and_then(|n| i32::try_from(n).ok()) {
                Some(c) => codes.push(c),
                None => return RawBson::from(v),
            },
        }
    }
    codes.sort_unstable();
    codes.dedup();
    let mut arr = RawArrayBuf::new();
    if all_numbers {
        arr.push("number");
    }
    for c in codes {
        arr.push(c);
    }
    RawBson::Array(arr)
}

/// `$in`: values in BSON order without repeats, regexes after them; one value alone is `$eq`
/// (one regex alone, `$regex`).
fn in_list(path: &str, v: RawBsonRef<'_>) -> Node {
    let RawBsonRef::Array(a) = v else {
        return leaf(kind::IN, path, "$in", RawBson::from(v));
    };
    let mut values: Vec<RawBsonRef<'_>> = Vec::new();
    let mut regexes: Vec<RawBsonRef<'_>> = Vec::new();
    for item in a.into_iter().map_while(Result::ok) {
        match item {
            RawBsonRef::RegularExpression(_) => regexes.push(item),
            other => values.push(other),
        }
    }
    values.sort_by(|x, y| compare(*x, *y));
    values.dedup_by(|x, y| compare(*x, *y) == Ordering::Equal);
    match (values.as_slice(), regexes.as_slice()) {
        ([one], []) => return leaf(kind::EQ, path, "$eq", RawBson::from(*one)),
        ([], [RawBsonRef::RegularExpression(re)]) => {
            return regex_leaf(path, re.pattern.as_str(), re.options.as_str());
        }
        _ => {}
    }
    let mut arr = RawArrayBuf::new();
    for x in values.into_iter().chain(regexes) {
        arr.push(RawBson::from(x));
    }
    leaf(kind::IN, path, "$in", RawBson::Array(arr))
}

/// Writes `node` into `out` as one element (`path: rhs`, or `$and: [...]`).
fn serialize_into(out: &mut RawDocumentBuf, node: &Node) {
    match node {
        Node::List(k, children) => {
            let name = match *k {
                kind::AND => "$and",
                kind::OR => "$or",
                _ => "$nor",
            };
            let mut arr = RawArrayBuf::new();
            for c in children {
                arr.push(serialize(c));
            }
            put(out, name, arr);
        }
        Node::Not(path, child) => {
            // A negated predicate on one field reads `{path: {$not: rhs}}`; anything else
            // is `$nor` of it.
            match child.as_ref() {
                Node::Leaf { rhs, .. } => {
                    let mut not = RawDocumentBuf::new();
                    put(&mut not, "$not", rhs.clone());
                    put(out, path, not);
                }
                other => {
                    let mut arr = RawArrayBuf::new();
                    arr.push(serialize(other));
                    put(out, "$nor", arr);
                }
            }
        }
        Node::Leaf { path, rhs, .. } => put(out, path, rhs.clone()),
        Node::ElemMatch(path, child) => {
            let mut rhs = RawDocumentBuf::new();
            put(&mut rhs, "$elemMatch", serialize(child));
            put(out, path, rhs);
        }
        Node::Raw { element, .. } => {
            for (k, v) in element.iter().map_while(Result::ok) {
                put(out, k.as_str(), RawBson::from(v));
            }
        }
    }
}

fn serialize(node: &Node) -> RawDocumentBuf {
    let mut out = RawDocumentBuf::new();
    serialize_into(&mut out, node);
    out
}

fn parse_root(filter: Option<&RawDocument>, sorted: bool) -> Option<Node> {
    let nodes = parse_doc(filter?);
    if nodes.is_empty() {
        return None;
    }
    let mut node = and(nodes);
    if sorted {
        sort_tree(&mut node);
    }
    Some(node)
}

/// The filter as mongod shows a query's parsed, normalized filter (`parsedQuery`): sorted
/// when `sorted` (a query's canonical form), in the given order otherwise (a pipeline's
/// `$match`). No filter, or an empty one: `{}`.
pub fn normalize(filter: Option<&RawDocument>, sorted: bool) -> RawDocumentBuf {
    parse_root(filter, sorted).map_or_else(RawDocumentBuf::new, |n| serialize(&n))
}

/// Appends the shape of `node` (kinds, paths and operators, no constants) to `out`.
fn encode_shape(node: &Node, out: &mut Vec<u8>) {
    out.push(node.kind());
    match node {
        Node::List(_, children) => {
            out.push(b'[');
            for c in children {
                encode_shape(c, out);
            }
            out.push(b']');
        }
        Node::Not(path, child) => {
            out.extend_from_slice(path.as_bytes());
            out.push(0);
            encode_shape(child, out);
        }
        Node::ElemMatch(path, child) => {
            out.extend_from_slice(path.as_bytes());
            out.push(0);
            encode_shape(child, out);
        }
        Node::Leaf { path, rhs, .. } => {
            out.extend_from_slice(path.as_bytes());
            out.push(0);
            for (op, _) in rhs.iter().map_while(Result::ok) {
                out.extend_from_slice(op.as_str().as_bytes());
                out.push(0);
            }
        }
        Node::Raw { element, .. } => {
            for (k, _) in element.iter().map_while(Result::ok) {
                out.extend_from_slice(k.as_str().as_bytes());
                out.push(0);
            }
        }
    }
}

/// What makes two queries the same shape: the filter's predicates without their constants,
/// and the sort, projection and collation (`None` where absent).
pub struct ShapeInput<'a> {
    /// The filter.
    pub filter: Option<&'a RawDocument>,
    /// The sort.
    pub sort: Option<&'a RawDocument>,
    /// The projection.
    pub projection: Option<&'a RawDocument>,
    /// The collation (its locale and options are part of the shape).
    pub collation: Option<&'a RawDocument>,
}

/// The query's shape as bytes (equal for queries that differ only in constants).
pub fn shape_key(input: &ShapeInput<'_>) -> Vec<u8> {
    let mut out = Vec::new();
    if let Some(node) = parse_root(input.filter, true) {
        encode_shape(&node, &mut out);
    }
    for (tag, doc) in [
        (b's', input.sort),
        (b'p', input.projection),
        (b'c', input.collation),
    ] {
        out.push(b'|');
        out.push(tag);
        if let Some(d) = doc.filter(|d| !d.is_empty()) {
            out.extend_from_slice(d.as_bytes());
        }
    }
    out
}

/// mongod's rendering of a plan-cache hash: eight uppercase hex digits.
pub fn hex_hash(bytes: &[u8]) -> String {
    format!("{:08X}", crc32c::crc32c(bytes))
}

#[cfg(test)]
mod tests {
    use bson::rawdoc;

    use super::*;

    fn norm(d: &RawDocument, sorted: bool) -> RawDocumentBuf {
        normalize(Some(d), sorted)
    }

    #[test]
    fn normalizes_like_mongod() {
        let cases: Vec<(RawDocumentBuf, RawDocumentBuf)> = vec![
            (rawdoc! {}, rawdoc! {}),
            (rawdoc! {"a": 1}, rawdoc! {"a": {"$eq": 1}}),
            (
                rawdoc! {"b": 1, "a": {"$gt": 2}},
                rawdoc! {"$and": [{"b": {"$eq": 1}}, {"a": {"$gt": 2}}]},
            ),
            (
                rawdoc! {"b": 1, "a": 2},
                rawdoc! {"$and": [{"a": {"$eq": 2}}, {"b": {"$eq": 1}}]},
            ),
            (
                rawdoc! {"$and": [{"$and": [{"x": 1}]}, {"y": {"$lt": 3}}]},
                rawdoc! {"$and": [{"x": {"$eq": 1}}, {"y": {"$lt": 3}}]},
            ),
            (rawdoc! {"$and": [{"x": 1}]}, rawdoc! {"x": {"$eq": 1}}),
            (
                rawdoc! {"a": {"$ne": 1}},
                rawdoc! {"a": {"$not": {"$eq": 1}}},
            ),
            (
                rawdoc! {"a": {"$in": [3, 1, 3, 2]}},
                rawdoc! {"a": {"$in": [1, 2, 3]}},
            ),
            (rawdoc! {"a": {"$in": [7]}}, rawdoc! {"a": {"$eq": 7}}),
            (
                rawdoc! {"a": {"$exists": 0}},
                rawdoc! {"a": {"$not": {"$exists": true}}},
            ),
            (
                rawdoc! {"a": {"$regex": "^x", "$options": "i"}},
                rawdoc! {"a": {"$regex": "^x", "$options": "i"}},
            ),
            (
                rawdoc! {"$or": [{"a": 1}, {"$or": [{"b": 2}]}], "$comment": "c"},
                rawdoc! {"$or": [{"a": {"$eq": 1}}, {"b": {"$eq": 2}}]},
            ),
            (
                rawdoc! {"a": {"$all": [1, 2]}},
                rawdoc! {"$and": [{"a": {"$eq": 1}}, {"a": {"$eq": 2}}]},
            ),
            (
                rawdoc! {"a": {"$type": ["string", 1, "number", 2]}},
                rawdoc! {"a": {"$type": ["number", 1, 2]}},
            ),
            (
                rawdoc! {"a": {"$type": "bool"}},
                rawdoc! {"a": {"$type": [8]}},
            ),
            (rawdoc! {"a": {"$size": 2.0}}, rawdoc! {"a": {"$size": 2}}),
            (
                rawdoc! {"a": {"$mod": [4, 1.5]}},
                rawdoc! {"a": {"$mod": [4_i64, 1_i64]}},
            ),
            (
                rawdoc! {"a": {"$elemMatch": {"c": 1, "b": {"$gt": 2}}}},
                rawdoc! {"a": {"$elemMatch": {"$and": [{"c": {"$eq": 1}}, {"b": {"$gt": 2}}]}}},
            ),
            (
                rawdoc! {"a": {"$elemMatch": {"$gt": 1, "$ne": 5}}},
                rawdoc! {"a": {"$elemMatch": {"$gt": 1, "$not": {"$eq": 5}}}},
            ),
        ];
        for (input, want) in cases {
            assert_eq!(norm(&input, true), want, "{input:?}");
        }
        // A pipeline's `$match` keeps the given order.
        assert_eq!(
            norm(&rawdoc! {"b": 1, "a": 2}, false),
            rawdoc! {"$and": [{"b": {"$eq": 1}}, {"a": {"$eq": 2}}]}
        );
    }

    proptest::proptest! {
        /// Any filter-like document (operators and values of any type, at any depth) is
        /// normalized and hashed without panicking.
        #[test]
        fn any_filter_normalizes(
            ops in proptest::collection::vec(
                (
                    proptest::sample::select(vec![
                        "a", "b.c", "$and", "$or", "$nor", "$eq", "$ne", "$in", "$nin",
                        "$type", "$size", "$mod", "$elemMatch", "$all", "$not", "$exists",
                        "$regex", "$options", "$expr", "$comment",
                    ]),
                    crate::query::props::arbitrary_bson(),
                ),
                0..6,
            ),
            wrap in proptest::sample::select(vec!["a", "$and", "$or", "$not", "$elemMatch"]),
        ) {
            let mut inner = RawDocumentBuf::new();
            for (k, v) in &ops {
                put(&mut inner, k, v.clone());
            }
            let mut outer = RawDocumentBuf::new();
            let mut wrapped = RawDocumentBuf::new();
            put(&mut wrapped, wrap, inner.clone());
            put(&mut outer, "x", wrapped);
            for doc in [&inner, &outer] {
                let _ = normalize(Some(doc), true);
                let _ = normalize(Some(doc), false);
                let key = shape_key(&ShapeInput {
                    filter: Some(doc),
                    sort: None,
                    projection: None,
                    collation: None,
                });
                proptest::prop_assert_eq!(hex_hash(&key).len(), 8);
            }
        }
    }

    #[test]
    fn shapes_ignore_constants() {
        let key = |f: &RawDocument, s: Option<&RawDocument>| {
            hex_hash(&shape_key(&ShapeInput {
                filter: Some(f),
                sort: s,
                projection: None,
                collation: None,
            }))
        };
        let a = key(&rawdoc! {"a": 1, "b": {"$gt": 5}}, None);
        assert_eq!(a.len(), 8);
        assert!(
            a.chars()
                .all(|c| c.is_ascii_digit() || c.is_ascii_uppercase())
        );
        assert_eq!(a, key(&rawdoc! {"b": {"$gt": "x"}, "a": 99}, None));
        assert_ne!(a, key(&rawdoc! {"a": 1, "b": {"$lt": 5}}, None));
        assert_ne!(a, key(&rawdoc! {"a": 1, "c": {"$gt": 5}}, None));
        let sort = rawdoc! {"a": 1};
        assert_ne!(a, key(&rawdoc! {"a": 1, "b": {"$gt": 5}}, Some(&sort)));
        // Stable across runs and builds.
        assert_eq!(hex_hash(b""), "00000000");
        assert_eq!(hex_hash(b"123456789"), "E3069283");
    }
}
