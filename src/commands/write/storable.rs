//! The checks a document passes before it is stored (size, `_id` type), and the document as
//! stored: `_id` first, generated when missing.

use std::borrow::Cow;

use bson::raw::cstr;
use bson::{RawBsonRef, RawDocument, RawDocumentBuf};

use crate::error::{CommandError, CommandResult, ErrorCode};

/// `maxBsonObjectSize`: the largest document that may be stored.
const MAX_DOC: usize = ebb_wire::MAX_BSON_OBJECT_SIZE;

/// Checks a document about to be stored: size, `_id` type, top-level field names.
pub(super) fn check_storable(doc: &RawDocument, updated: bool) -> Result<(), CommandError> {
    let size = doc.as_bytes().len();
    if size > MAX_DOC {
        // mongod's two messages: one for inserted documents, one for update results.
        return Err(if updated {
            CommandError::new(
                ErrorCode::BSONObjectTooLarge,
                format!("Resulting document after update is larger than {MAX_DOC}"),
            )
        } else {
            CommandError::bad_value(format!(
                "object to insert too large. size in bytes: {size}, max size: {MAX_DOC}"
            ))
        });
    }
    for elem in doc.iter_elements() {
        let elem = elem.map_err(|e| CommandError::new(ErrorCode::InvalidBSON, e.to_string()))?;
        let key = elem.key().as_str();
        if key == "_id" {
            match elem.element_type() {
                bson::spec::ElementType::Array => {
                    return Err(CommandError::new(
                        ErrorCode::InvalidIdField,
                        "The '_id' value cannot be of type array",
                    ));
                }
                bson::spec::ElementType::RegularExpression => {
                    return Err(CommandError::new(
                        ErrorCode::InvalidIdField,
                        "can't use a regex for _id",
                    ));
                }
                bson::spec::ElementType::Undefined => {
                    return Err(CommandError::new(
                        ErrorCode::InvalidIdField,
                        "can't use a undefined for _id",
                    ));
                }
                bson::spec::ElementType::EmbeddedDocument => check_id_document(&elem)?,
                _ => {}
            }
        }
        // Since MongoDB 5.0, other `$`-prefixed field names are stored as given.
    }
    Ok(())
}

/// An `_id` that is a document may hold no `$`-prefixed field, at any depth.
fn check_id_document(elem: &bson::raw::RawElement<'_>) -> Result<(), CommandError> {
    fn walk(d: &RawDocument) -> Result<(), CommandError> {
        for entry in d {
            let (k, v) =
                entry.map_err(|e| CommandError::new(ErrorCode::InvalidBSON, e.to_string()))?;
            if k.as_str().starts_with('$') {
                return Err(CommandError::new(
                    ErrorCode::DollarPrefixedFieldName,
                    format!(
                        "_id fields may not contain '$'-prefixed fields: {} is not valid for storage.",
                        k.as_str()
                    ),
                ));
            }
            if let RawBsonRef::Document(inner) = v {
                walk(inner)?;
            }
        }
        Ok(())
    }
    match elem.value() {
        Ok(RawBsonRef::Document(d)) => walk(d),
        Ok(_) => Ok(()),
        Err(e) => Err(CommandError::new(ErrorCode::InvalidBSON, e.to_string())),
    }
}

/// The document as stored: `_id` first, generated as an ObjectId when missing. Returns the
/// input bytes untouched when `_id` already leads.
pub(super) fn with_id_first(doc: &RawDocument) -> CommandResult<RawDocumentBuf> {
    with_id_first_fresh(doc).map(|(d, _)| d.into_owned())
}

/// [`with_id_first`], also saying whether the `_id` was generated here (a fresh ObjectId can
/// collide with nothing, so the insert skips the duplicate check).
pub(super) fn with_id_first_fresh(
    doc: &RawDocument,
) -> CommandResult<(Cow<'_, RawDocument>, bool)> {
    if let Some(Ok(e)) = doc.iter_elements().next()
        && e.key().as_str() == "_id"
    {
        return Ok((Cow::Borrowed(doc), false));
    }
    let mut out = RawDocumentBuf::new();
    let given = doc
        .get("_id")
        .map_err(|e| CommandError::new(ErrorCode::InvalidBSON, e.to_string()))?;
    let fresh = given.is_none();
    if let Some(id) = given {
        out.append(cstr!("_id"), id);
    } else {
        out.append(cstr!("_id"), bson::oid::ObjectId::new());
    }
    for elem in doc.iter_elements() {
        let elem = elem.map_err(|e| CommandError::new(ErrorCode::InvalidBSON, e.to_string()))?;
        if elem.key().as_str() != "_id" {
            let value = elem
                .value()
                .map_err(|e| CommandError::new(ErrorCode::InvalidBSON, e.to_string()))?;
            out.append(elem.key(), value);
        }
    }
    Ok((Cow::Owned(out), fresh))
}

pub(super) fn id_of(doc: &RawDocument) -> CommandResult<RawBsonRef<'_>> {
    doc.get("_id")
        .ok()
        .flatten()
        .ok_or_else(|| CommandError::internal("document without _id"))
}
