//! Array operators: `$elemMatch` (value and document forms) and `$all`. (`$size` is a single
//! integer, read in [`parse`](super::parse).)

use bson::RawBsonRef;

use super::comparison::leaf_eq;
use super::parse::{
    bad_value, is_operator_doc, is_path_keyword, is_pathless, parse_doc, parse_ops,
};
use super::{Filter, Item, Level, Parse, Pred};
use crate::error::CommandError;
use crate::query::invalid_bson;
use crate::query::regex::Regex;

/// `$elemMatch`: the value form when the argument is an operator document whose first
/// operator is not a top-level one, otherwise a filter on document elements.
pub(super) fn parse_elem_match(value: RawBsonRef<'_>, p: Parse<'_>) -> Result<Item, CommandError> {
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

pub(super) fn parse_all(
    path: &str,
    value: RawBsonRef<'_>,
    p: Parse<'_>,
) -> Result<Item, CommandError> {
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
