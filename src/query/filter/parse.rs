//! Parsing a filter document, as mongod's `MatchExpressionParser`: the document and its
//! top-level (pathless) operators, the logical operators, and the dispatch of each operator
//! after a path to the file of its concept.

use bson::{RawBsonRef, RawDocument};

use super::array::{parse_all, parse_elem_match};
use super::bits::parse_bits;
use super::comparison::{CmpOp, comparison, leaf_eq, parse_in};
use super::element::parse_type;
use super::evaluation::{parse_mod, parse_regex_doc};
use super::numeric::{non_negative, parse_int, parse_long};
use super::{FilterContext, Item, Level, Node, Parse, Pred};
use crate::error::{CommandError, ErrorCode};
use crate::query::compare::number_as_f64;
use crate::query::expr::Expression;
use crate::query::regex::Regex;
use crate::query::{invalid_bson, not_implemented, true_value};

pub(super) fn bad_value(msg: impl Into<String>) -> CommandError {
    CommandError::bad_value(msg)
}

pub(super) fn failed_to_parse(msg: impl Into<String>) -> CommandError {
    CommandError::new(ErrorCode::FailedToParse, msg)
}

/// The operators mongod parses without a path (`retrievePathlessParser`).
pub(super) fn is_pathless(name: &str) -> bool {
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
pub(super) fn is_path_keyword(name: &str) -> bool {
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
pub(super) fn parse_doc(doc: &RawDocument, p: Parse<'_>) -> Result<Node, CommandError> {
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
pub(super) fn is_operator_doc(sub: &RawDocument, incomplete_dbref: bool) -> bool {
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

/// The operators of `{path: {$op: …, …}}` (they are AND-ed).
pub(super) fn parse_ops(
    path: &str,
    ops: &RawDocument,
    p: Parse<'_>,
) -> Result<Vec<Item>, CommandError> {
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
