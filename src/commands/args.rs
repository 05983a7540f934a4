//! Reading typed command fields, with MongoDB's error codes and messages.

use bson::RawBsonRef;
use bson::spec::ElementType;

use crate::error::{CommandError, CommandResult};

/// MongoDB's name for a BSON type, as `$type` and error messages spell it.
pub fn type_name(t: ElementType) -> &'static str {
    match t {
        ElementType::Double => "double",
        ElementType::String => "string",
        ElementType::EmbeddedDocument => "object",
        ElementType::Array => "array",
        ElementType::Binary => "binData",
        ElementType::Undefined => "undefined",
        ElementType::ObjectId => "objectId",
        ElementType::Boolean => "bool",
        ElementType::DateTime => "date",
        ElementType::Null => "null",
        ElementType::RegularExpression => "regex",
        ElementType::DbPointer => "dbPointer",
        ElementType::JavaScriptCode => "javascript",
        ElementType::Symbol => "symbol",
        ElementType::JavaScriptCodeWithScope => "javascriptWithScope",
        ElementType::Int32 => "int",
        ElementType::Timestamp => "timestamp",
        ElementType::Int64 => "long",
        ElementType::Decimal128 => "decimal",
        ElementType::MinKey => "minKey",
        ElementType::MaxKey => "maxKey",
    }
}

/// The IDL's error for a field of the wrong type.
pub fn wrong_type(field: &str, value: RawBsonRef<'_>, expected: &str) -> CommandError {
    CommandError::type_mismatch(format!(
        "BSON field '{field}' is the wrong type '{}', expected type{expected}",
        type_name(value.element_type()),
    ))
}

/// A boolean option: MongoDB accepts `bool` and any number (non-zero is true).
pub fn truthy(field: &str, value: RawBsonRef<'_>) -> CommandResult<bool> {
    match value {
        RawBsonRef::Boolean(b) => Ok(b),
        RawBsonRef::Int32(i) => Ok(i != 0),
        RawBsonRef::Int64(i) => Ok(i != 0),
        RawBsonRef::Double(d) => Ok(d != 0.0),
        RawBsonRef::Decimal128(d) => Ok(d.to_string().parse::<f64>().is_ok_and(|f| f != 0.0)),
        other => Err(wrong_type(
            field,
            other,
            "s '[bool, long, int, decimal, double]'",
        )),
    }
}

/// A short rendering of a value for error messages.
pub fn display(value: RawBsonRef<'_>) -> String {
    match value {
        RawBsonRef::String(s) => format!("\"{s}\""),
        RawBsonRef::Int32(i) => i.to_string(),
        RawBsonRef::Int64(i) => i.to_string(),
        RawBsonRef::Double(d) => d.to_string(),
        RawBsonRef::Boolean(b) => b.to_string(),
        RawBsonRef::Null => "null".to_owned(),
        other => bson::Bson::try_from(bson::RawBson::from(other))
            .map_or_else(|_| "?".to_owned(), |b| b.to_string()),
    }
}
