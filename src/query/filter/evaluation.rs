//! Evaluation operators on a path: `$mod` and `$regex`/`$options`. (`$expr`, `$where`,
//! `$text`, `$jsonSchema` and `$sampleRate` take no path: see [`parse`](super::parse).)

use bson::{RawBsonRef, RawDocument};

use super::numeric::{TWO_63, exact_i64};
use super::parse::bad_value;
use super::{Item, Pred};
use crate::error::{CommandError, ErrorCode};
use crate::query::compare::number_as_f64;
use crate::query::invalid_bson;
use crate::query::regex::Regex;

/// `$mod`'s dividend: integers as they are, doubles and decimals truncated when they fit in
/// 64 bits (mongod's `ModMatchExpression`: NaN, infinities and out-of-range values never
/// match).
pub(super) fn mod_dividend(v: RawBsonRef<'_>) -> Option<i64> {
    match v {
        RawBsonRef::Int32(i) => Some(i64::from(i)),
        RawBsonRef::Int64(i) => Some(i),
        RawBsonRef::Double(_) | RawBsonRef::Decimal128(_) => exact_i64(number_as_f64(v)?.trunc()),
        _ => None,
    }
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

pub(super) fn parse_mod(value: RawBsonRef<'_>) -> Result<Item, CommandError> {
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

/// `{$regex: …, $options: …}`: mongod's `parseRegexDocument` over the whole operator document.
pub(super) fn parse_regex_doc(context: &RawDocument) -> Result<Item, CommandError> {
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
