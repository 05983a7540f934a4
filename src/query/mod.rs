//! The query engine: pure functions over raw BSON, no IO and no async.
//!
//! One comparison order ([`compare`]) serves filters, sorts and the order-preserving key
//! encoding ([`keystring`]). Filters, projections, sorts and updates compile once from the
//! command's documents and then run against stored documents without converting them to
//! `bson::Document`:
//!
//! ```text
//! path        dotted paths with MongoDB's implicit array traversal
//! compare     canonical type ranks and the BSON total order (strings binary, or collated)
//! collation   the `collation` option: Collation::parse(&spec)?, ICU4X string comparison
//! keystring   byte encoding whose order is `compare`'s (storage keys, indexes)
//! filter      Filter::compile(&query)?.matches(&doc)
//! expr        Expression::parse_in(v, &vars)?.evaluate(&doc): $expr, projections, stages
//! regex       $regex: PCRE syntax on the `regex` crate
//! projection  Projection::compile(&spec)?.apply(&doc)
//! sort        SortSpec::compile(&spec)?.compare(&a, &b)
//! update      Update::compile(&update)?.apply(&doc) → Some(new doc) or None (unchanged)
//! display     values printed as mongod prints them in error messages
//! shape       filters as mongod serializes them parsed; query shapes and their hashes
//! ```

pub mod collation;
pub mod compare;
pub mod decimal;
pub mod display;
pub mod expr;
pub mod filter;
pub mod keystring;
pub mod path;
pub mod plan;
pub mod projection;
#[cfg(test)]
mod props;
pub mod regex;
pub mod shape;
pub mod sort;
pub mod update;

pub use collation::Collation;
pub use compare::{canonical_type, compare, compare_docs};
pub use expr::{Expression, Variables};
pub use filter::{Filter, FilterContext};
pub use projection::Projection;
pub use sort::SortSpec;
pub use update::{Update, upsert_seed};

use bson::RawBsonRef;

use crate::error::{CommandError, ErrorCode};

/// `NotImplemented` (238) for a MongoDB feature Ebb does not support yet.
pub(crate) fn not_implemented(what: &str) -> CommandError {
    CommandError::new(
        ErrorCode::NotImplemented,
        format!("{what} is not supported by Ebb yet"),
    )
}

/// A malformed BSON element met while reading a document.
pub(crate) fn invalid_bson(e: &bson::error::Error) -> CommandError {
    CommandError::new(ErrorCode::InvalidBSON, format!("invalid BSON: {e}"))
}

/// A uniformly random draw in `[0, 1)` (`$rand`, `$sampleRate`).
pub(crate) fn random_unit() -> f64 {
    use std::hash::BuildHasher;
    // Each `RandomState` has fresh random keys; hashing a constant draws a random u64.
    let bits = std::collections::hash_map::RandomState::new().hash_one(0_u8) >> 11;
    #[expect(
        clippy::cast_precision_loss,
        reason = "53-bit values are exact doubles"
    )]
    let draw = bits as f64 / (1_u64 << 53) as f64;
    draw
}

/// MongoDB's "truthiness" of a projection or `$exists` value: false for `false`, zero, null,
/// undefined and missing; true otherwise.
pub(crate) fn true_value(v: RawBsonRef<'_>) -> bool {
    match v {
        RawBsonRef::Boolean(b) => b,
        RawBsonRef::Int32(i) => i != 0,
        RawBsonRef::Int64(i) => i != 0,
        RawBsonRef::Double(d) => d != 0.0,
        // Exactly: 1E-6176 is not zero, although its nearest double is.
        RawBsonRef::Decimal128(d) => {
            !matches!(compare::Dec::of(d), compare::Dec::Finite { coeff: 0, .. })
        }
        RawBsonRef::Null | RawBsonRef::Undefined => false,
        _ => true,
    }
}

/// The checks mongod's `FieldPath` applies to projection and sort paths.
pub(crate) fn check_field_path(path: &str) -> Result<(), CommandError> {
    if path.is_empty() {
        return Err(CommandError::new(
            ErrorCode::Location(40352),
            "FieldPath cannot be constructed with empty string",
        ));
    }
    for part in path.split('.') {
        if part.is_empty() {
            return Err(CommandError::new(
                ErrorCode::Location(15998),
                "FieldPath field names may not be empty strings.",
            ));
        }
        if part.starts_with('$') {
            return Err(CommandError::new(
                ErrorCode::Location(16410),
                "FieldPath field names may not start with '$'. Consider using $getField or \
                 $setField.",
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
pub(crate) mod testutil {
    use bson::RawBson;
    use bson::raw::CString;

    /// A regex value (the bson crate has no public constructor from strings).
    pub(crate) fn regex(pattern: &str, options: &str) -> RawBson {
        RawBson::RegularExpression(bson::Regex {
            pattern: CString::try_from(pattern).unwrap(),
            options: CString::try_from(options).unwrap(),
        })
    }
}
