//! Element operators: `$type` (mongod's `MatcherTypeSet`). `$exists` needs no more than
//! [`Pred::Exists`](super::Pred::Exists).

use bson::RawBsonRef;
use bson::spec::ElementType;

use super::numeric::parse_int;
use super::parse::{bad_value, failed_to_parse};
use crate::error::CommandError;
use crate::query::compare::number_as_f64;
use crate::query::{display, invalid_bson};

/// `$type`'s set of BSON types.
#[derive(Debug, Clone, Default)]
pub(super) struct TypeSet {
    all_numbers: bool,
    types: Vec<ElementType>,
}

impl TypeSet {
    pub(super) fn contains(&self, v: RawBsonRef<'_>) -> bool {
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

/// mongod's `MatcherTypeSet::parse`.
pub(super) fn parse_type(path: &str, value: RawBsonRef<'_>) -> Result<TypeSet, CommandError> {
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
            crate::query::expr::format_g6(number_as_f64(v).unwrap_or(f64::NAN))
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
