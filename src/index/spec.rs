//! Index specifications (one element of `createIndexes.indexes`), validated as mongod 7.0
//! validates them, in its order and with its codes and messages:
//!
//! 1. [`validate`], mongod's `index_key_validate::validateIndexSpec` and
//!    `parseAndValidateIndexSpecs`: every field against one table of allowed options
//!    ([`OPTIONS`], 197 `InvalidIndexSpecificationOption` for the rest), each option's type, the
//!    key pattern (`validateKeyPattern`: field names, values, index kinds), `v`, and the
//!    option combinations refused outright. These errors read
//!    `Error in specification { … } :: caused by :: …`; those about the `_id` index and reserved
//!    names do not.
//! 2. [`check_creatable`], mongod's `IndexCatalogImpl::_isSpecOk`: name, per-kind option rules
//!    (wildcard indexes take no `sparse`, `unique` or TTL), `partialFilterExpression`'s allowed
//!    operators and depth, `storageEngine`. A spec that passes both stages but asks for what Ebb
//!    does not implement (text, geo, hashed, wildcard and columnstore indexes, index
//!    collations, `prepareUnique`, `clustered`, `originalSpec`) is refused with `NotImplemented`
//!    (238), never built as something else.
//!
//! The spec Ebb keeps and lists is mongod's `_fixIndexSpec`: `v` (as given, or 2), `unique:
//! true` and `hidden: true` when set, `key`, `name`, then the other options as given, less
//! `ns`, `dropDups` and `_id`.

use bson::raw::{CStr, cstr};
use bson::{RawBsonRef, RawDocument, RawDocumentBuf, rawdoc};

use crate::error::{CommandError, CommandResult, ErrorCode};
use crate::query::compare::number_as_f64;
use crate::query::display;

/// At most this many indexes per collection, the `_id` index included (mongod's
/// `kMaxNumIndexesAllowed`).
pub const MAX_INDEXES: usize = 64;

/// mongod's `internalPartialFilterExpressionMaxDepth` (its default).
const PARTIAL_FILTER_MAX_DEPTH: usize = 4;

/// The largest key pattern, in bytes.
const MAX_KEY_PATTERN_BYTES: usize = 2048;

/// The fields an index specification may have (mongod's `allowedFieldNames`).
pub const OPTIONS: &[&str] = &[
    "bits",
    "max",
    "min",
    "coarsestIndexedLevel",
    "finestIndexedLevel",
    "2dsphereIndexVersion",
    "background",
    "collation",
    "default_language",
    "dropDups",
    "expireAfterSeconds",
    "hidden",
    "name",
    "v",
    "key",
    "language_override",
    "ns",
    "partialFilterExpression",
    "wildcardProjection",
    "columnstoreProjection",
    "columnstoreCompressor",
    "sparse",
    "storageEngine",
    "textIndexVersion",
    "unique",
    "weights",
    "originalSpec",
    "prepareUnique",
    "_id",
];

/// The fields of a spec with `clustered` (mongod's `allowedClusteredIndexFieldNames`).
const CLUSTERED_OPTIONS: &[&str] = &["name", "unique", "v", "key", "clustered"];

/// The fields of an `_id` index spec (mongod's `allowedIdIndexFieldNames`).
const ID_OPTIONS: &[&str] = &["collation", "name", "v", "key", "ns", "_id"];

/// Options whose value must be a bool or a number.
const BOOL_OPTIONS: &[&str] = &[
    "background",
    "unique",
    "sparse",
    "dropDups",
    "prepareUnique",
    "clustered",
];

/// Options whose value must be a number.
const NUMBER_OPTIONS: &[&str] = &[
    "2dsphereIndexVersion",
    "textIndexVersion",
    "bits",
    "min",
    "max",
    "coarsestIndexedLevel",
    "finestIndexedLevel",
];

/// The index kinds mongod 7.0 knows (`IndexNames`); `""` is the ordinary (btree) index.
const KNOWN_KINDS: &[&str] = &[
    "",
    "2d",
    "2dsphere",
    "2dsphere_bucket",
    "text",
    "hashed",
    "wildcard",
    "columnstore",
];

/// The `columnstoreCompressor` values mongod accepts.
const COLUMNSTORE_COMPRESSORS: &[&str] = &["none", "snappy", "zlib", "zstd"];

/// A spec that passed [`validate`].
#[derive(Debug, Clone)]
pub struct Validated {
    /// `name`.
    pub name: String,
    /// `key`.
    pub key: RawDocumentBuf,
    /// The index kind (mongod's plugin name): `""` for an ordinary index, else `"text"`,
    /// `"2dsphere"`, `"wildcard"`, ….
    pub kind: String,
    /// `v`: 1 or 2.
    pub version: i32,
    /// The spec as given.
    pub raw: RawDocumentBuf,
}

fn cannot_create(msg: impl Into<String>) -> CommandError {
    CommandError::new(ErrorCode::CannotCreateIndex, msg)
}

fn show(doc: &RawDocument) -> String {
    display::value(RawBsonRef::Document(doc))
}

fn type_of(v: RawBsonRef<'_>) -> &'static str {
    display::type_name(v.element_type())
}

fn is_number(v: RawBsonRef<'_>) -> bool {
    matches!(
        v,
        RawBsonRef::Int32(_)
            | RawBsonRef::Int64(_)
            | RawBsonRef::Double(_)
            | RawBsonRef::Decimal128(_)
    )
}

fn elements(doc: &RawDocument) -> CommandResult<Vec<(&str, RawBsonRef<'_>)>> {
    doc.iter()
        .map(|e| {
            e.map(|(k, v)| (k.as_str(), v))
                .map_err(|e| crate::query::invalid_bson(&e))
        })
        .collect()
}

/// Whether `field` names a wildcard key (`$**` or `path.$**`).
fn is_wildcard_field(field: &str) -> bool {
    field == "$**" || field.ends_with(".$**")
}

/// The index kind of a key pattern (mongod's `IndexNames::findPluginName`): the first string
/// value, or `wildcard` at the first wildcard field, or `""`.
pub fn kind_of(key: &RawDocument) -> String {
    for (field, value) in key.iter().map_while(Result::ok) {
        if let RawBsonRef::String(s) = value {
            return s.to_owned();
        }
        if is_wildcard_field(field.as_str()) {
            return "wildcard".to_owned();
        }
    }
    String::new()
}

/// mongod's `IndexDescriptor::isIdIndexPattern`: `{_id: <number whose int value is 1>}`.
pub fn is_id_pattern(key: &RawDocument) -> bool {
    let mut it = key.iter().map_while(Result::ok);
    let Some(("_id", value)) = it.next().map(|(k, v)| (k.as_str(), v)) else {
        return false;
    };
    #[expect(
        clippy::cast_possible_truncation,
        reason = "mongod's numberInt truncates too"
    )]
    let as_int = number_as_f64(value).map(|f| f as i64);
    as_int == Some(1) && it.next().is_none()
}

/// mongod's `validateWildcardIndex`: one wildcard field, not overlapping the other fields.
fn check_wildcard_fields(key: &RawDocument) -> CommandResult<()> {
    let mut wildcard = None;
    let mut others = Vec::new();
    for (field, _) in key.iter().map_while(Result::ok) {
        let field = field.as_str();
        if is_wildcard_field(field) {
            if wildcard.is_some() {
                return Err(CommandError::new(
                    ErrorCode::Location(7_246_201),
                    "Index Key can contain only one wildcard index field",
                ));
            }
            wildcard = Some(field);
        } else {
            others.push(field);
        }
    }
    let Some(wildcard) = wildcard else {
        return Err(CommandError::new(
            ErrorCode::Location(7_246_202),
            "No wildcard index field is specified for the wildcard index",
        ));
    };
    let prefix: Vec<&str> = wildcard.split('.').collect();
    let prefix = prefix.get(..prefix.len().saturating_sub(1)).unwrap_or(&[]);
    for field in others {
        let parts: Vec<&str> = field.split('.').collect();
        // An empty prefix (`$**`) overlaps nothing, as mongod's `FieldRef::isPrefixOf` says.
        if !prefix.is_empty() && parts.len() >= prefix.len() && parts.starts_with(prefix) {
            return Err(CommandError::new(
                ErrorCode::Location(7_246_204),
                format!(
                    "A wildcard index field should not overlap with and index key fields if \
                     wildcard projection is empty, however '{field}' is overlapping with the \
                     wildcard index field."
                ),
            ));
        }
    }
    Ok(())
}

/// mongod's `validateKeyPattern` for v:2 (which every new index is checked against).
fn check_key_pattern(key: &RawDocument) -> CommandResult<()> {
    if key.as_bytes().len() > MAX_KEY_PATTERN_BYTES {
        return Err(cannot_create("Index key pattern too large."));
    }
    let fields = elements(key)?;
    if fields.is_empty() {
        return Err(cannot_create("Index keys cannot be empty."));
    }
    let kind = kind_of(key);
    if kind == "geoHaystack" {
        return Err(cannot_create(
            "GeoHaystack indexes cannot be created in version 5.0 and above",
        ));
    }
    if !KNOWN_KINDS.contains(&kind.as_str()) {
        return Err(cannot_create(format!("Unknown index plugin '{kind}'")));
    }
    if kind == "wildcard" {
        check_wildcard_fields(key)?;
    }
    for &(field, value) in &fields {
        if let Some(n) = number_as_f64(value) {
            if n.is_nan() {
                return Err(cannot_create(
                    "Values in the index key pattern cannot be NaN.",
                ));
            }
            if n == 0.0 {
                return Err(cannot_create(
                    "Values in the index key pattern cannot be 0.",
                ));
            }
        } else if !matches!(value, RawBsonRef::String(_)) {
            return Err(cannot_create(format!(
                "Values in v:2 index key pattern cannot be of type {}. Only numbers > 0, numbers \
                 < 0, and strings are allowed.",
                type_of(value)
            )));
        }
        let text = match value {
            RawBsonRef::String(s) => Some(s),
            _ => None,
        };
        if let Some(s) = text {
            if s != kind {
                return Err(cannot_create(
                    "Can't use more than one index plugin for a single index.",
                ));
            }
            if s == "wildcard" {
                return Err(cannot_create(
                    "The key pattern value for an 'wildcard' index must be a non-zero number, \
                     not a string.",
                ));
            }
        }
        if kind == "columnstore" {
            if fields.len() != 1 {
                return Err(cannot_create(
                    "columnstore indexes do not allow compounding",
                ));
            }
            if !is_wildcard_field(field) {
                return Err(cannot_create("Invalid key name for columnstore indexes"));
            }
        }
        if field.is_empty() {
            return Err(cannot_create("Index keys cannot be an empty field."));
        }
        if field == "$**" && (text.is_none() || matches!(text, Some("text" | "columnstore"))) {
            continue;
        }
        if field == "_fts" && text != Some("text") {
            return Err(cannot_create(
                "Index key contains an illegal field name: '_fts'",
            ));
        }
        let parts: Vec<&str> = field.split('.').collect();
        for (i, part) in parts.iter().enumerate() {
            if part.is_empty() {
                return Err(cannot_create("Index keys cannot contain an empty field."));
            }
            if !part.starts_with('$') {
                continue;
            }
            let db_ref = i != 0 && matches!(*part, "$db" | "$id" | "$ref");
            let wildcard = i + 1 == parts.len()
                && *part == "$**"
                && matches!(kind.as_str(), "wildcard" | "columnstore");
            if !db_ref && !wildcard {
                return Err(cannot_create(
                    "Index key contains an illegal field name: field name starts with '$'.",
                ));
            }
        }
    }
    Ok(())
}

/// The first stage (see the module docs) for one spec, wrapped as mongod wraps it.
pub fn validate(raw: &RawDocument) -> CommandResult<Validated> {
    let wrap = |e: CommandError| CommandError {
        errmsg: format!(
            "Error in specification {} :: caused by :: {}",
            show(raw),
            e.errmsg
        ),
        ..e
    };
    let checked = validate_fields(raw).map_err(wrap)?;
    check_reserved(raw, &checked)?;
    Ok(checked)
}

/// mongod's `validateIndexSpec`.
fn validate_fields(raw: &RawDocument) -> CommandResult<Validated> {
    let fields = elements(raw)?;
    let clustered = fields.iter().any(|(k, _)| *k == "clustered");
    for &(field, _) in &fields {
        let allowed = if clustered {
            CLUSTERED_OPTIONS
        } else {
            OPTIONS
        };
        if !allowed.contains(&field) {
            let what = if clustered {
                "a clustered index"
            } else {
                "an index"
            };
            return Err(CommandError::new(
                ErrorCode::InvalidIndexSpecificationOption,
                format!(
                    "The field '{field}' is not valid for {what} specification. Specification: {}",
                    show(raw)
                ),
            ));
        }
    }
    let key_field = fields.iter().find_map(|(k, v)| match (*k, v) {
        ("key", RawBsonRef::Document(d)) => Some(*d),
        _ => None,
    });
    let mut key = None;
    let mut name = None;
    let mut version = None;
    let (mut collation, mut weights, mut unique, mut prepare_unique) = (false, false, false, false);
    for &(field, value) in &fields {
        match field {
            "key" => {
                let RawBsonRef::Document(pattern) = value else {
                    return Err(CommandError::type_mismatch(format!(
                        "The field 'key' must be an object, but got {}",
                        type_of(value)
                    )));
                };
                let mut seen = Vec::new();
                for (k, _) in elements(pattern)? {
                    if seen.contains(&k) {
                        return Err(CommandError::bad_value(format!(
                            "The field '{k}' appears multiple times in the index key pattern {}",
                            show(pattern)
                        )));
                    }
                    seen.push(k);
                }
                check_key_pattern(pattern)?;
                let kind = kind_of(pattern);
                for (k, v) in elements(pattern)? {
                    if matches!(v, RawBsonRef::String("")) {
                        return Err(cannot_create(
                            "Values in the index key pattern cannot be empty strings",
                        ));
                    }
                    if kind == "wildcard"
                        && k == "$**"
                        && seen.len() > 1
                        && !fields.iter().any(|(f, _)| *f == "wildcardProjection")
                    {
                        return Err(cannot_create(
                            "Compound wildcard indexes on all fields must also specify \
                             'wildcardProjection' option",
                        ));
                    }
                }
                key = Some(pattern);
            }
            "name" => {
                let RawBsonRef::String(n) = value else {
                    return Err(CommandError::type_mismatch(format!(
                        "The field 'name' must be a string, but got {}",
                        type_of(value)
                    )));
                };
                name = Some(n);
            }
            // mongod names the wrong field in this message.
            "hidden" if !matches!(value, RawBsonRef::Boolean(_)) => {
                return Err(CommandError::type_mismatch(format!(
                    "The field 'name' must be a bool, but got {}",
                    type_of(value)
                )));
            }
            "v" => {
                let Some(n) = number_as_f64(value) else {
                    return Err(CommandError::type_mismatch(format!(
                        "The field 'v' must be a number, but got {}",
                        type_of(value)
                    )));
                };
                if n.fract() != 0.0 || !(f64::from(i32::MIN)..=f64::from(i32::MAX)).contains(&n) {
                    return Err(CommandError::bad_value(format!(
                        "Index version must be representable as a 32-bit integer, but got {}",
                        display::value(value)
                    )));
                }
                #[expect(clippy::cast_possible_truncation, reason = "whole and in range")]
                let v = n as i32;
                if !matches!(v, 1 | 2) {
                    return Err(cannot_create(format!(
                        "Invalid index specification {}; cannot create an index with v={v}",
                        show(raw)
                    )));
                }
                version = Some(v);
            }
            "originalSpec" | "collation" => {
                let RawBsonRef::Document(d) = value else {
                    return Err(CommandError::type_mismatch(format!(
                        "The field '{field}' must be an object, but got {}",
                        type_of(value)
                    )));
                };
                if d.is_empty() {
                    return Err(CommandError::bad_value(format!(
                        "The field '{field}' cannot be an empty object."
                    )));
                }
                collation |= field == "collation";
            }
            "partialFilterExpression" => {
                let RawBsonRef::Document(filter) = value else {
                    return Err(CommandError::type_mismatch(format!(
                        "The field 'partialFilterExpression' must be an object, but got {}",
                        type_of(value)
                    )));
                };
                parse_partial_filter(filter)?;
            }
            "wildcardProjection" | "columnstoreProjection" => {
                let wildcard = field == "wildcardProjection";
                let wanted = if wildcard { "wildcard" } else { "columnstore" };
                if key_field.map(kind_of).as_deref() != Some(wanted) {
                    let code = if wildcard {
                        ErrorCode::BadValue
                    } else {
                        ErrorCode::InvalidIndexSpecificationOption
                    };
                    return Err(CommandError::new(
                        code,
                        format!("The field '{field}' is only allowed in '{wanted}' indexes"),
                    ));
                }
                let RawBsonRef::Document(projection) = value else {
                    return Err(CommandError::type_mismatch(format!(
                        "The field '{field}' must be a non-empty object, but got {}",
                        type_of(value)
                    )));
                };
                if key_field
                    .and_then(|k| k.get("$**").ok().flatten())
                    .is_none()
                {
                    return Err(CommandError::new(
                        ErrorCode::FailedToParse,
                        format!(
                            "The field '{field}' is only allowed when 'key' is {{\"$**\": ±1}} or \
                             {{\"$**\": \"columnstore\"}}"
                        ),
                    ));
                }
                if projection.is_empty() {
                    return Err(CommandError::new(
                        ErrorCode::FailedToParse,
                        format!("The '{field}' field can't be an empty object"),
                    ));
                }
            }
            "weights" => {
                if !matches!(
                    value,
                    RawBsonRef::Document(_) | RawBsonRef::Array(_) | RawBsonRef::String(_)
                ) {
                    return Err(CommandError::type_mismatch(format!(
                        "The field 'weights' must be an object, but got {}",
                        type_of(value)
                    )));
                }
                weights = true;
            }
            f if BOOL_OPTIONS.contains(&f) => {
                if !is_number(value) && !matches!(value, RawBsonRef::Boolean(_)) {
                    return Err(CommandError::type_mismatch(format!(
                        "The field '{f} has value {}, which is not convertible to bool",
                        display::element(f, value)
                    )));
                }
                let set = crate::query::true_value(value);
                unique |= f == "unique" && set;
                prepare_unique |= f == "prepareUnique" && set;
            }
            "default_language" | "language_override" if !matches!(value, RawBsonRef::String(_)) => {
                return Err(CommandError::type_mismatch(format!(
                    "The field '{field}' must be a string, but got {}",
                    type_of(value)
                )));
            }
            f if NUMBER_OPTIONS.contains(&f) && !is_number(value) => {
                return Err(CommandError::type_mismatch(format!(
                    "The field '{f}' must be a number, but got {}",
                    type_of(value)
                )));
            }
            "columnstoreCompressor" => {
                if key_field.map(kind_of).as_deref() != Some("columnstore") {
                    // mongod names the option where it means the index kind.
                    return Err(CommandError::new(
                        ErrorCode::InvalidIndexSpecificationOption,
                        "The field 'columnstoreCompressor' is only allowed in \
                         'columnstoreCompressor' indexes",
                    ));
                }
                let RawBsonRef::String(s) = value else {
                    return Err(CommandError::type_mismatch(format!(
                        "The field 'columnstoreCompressor' must be a string, but got {}",
                        type_of(value)
                    )));
                };
                if !COLUMNSTORE_COMPRESSORS.contains(&s) {
                    return Err(CommandError::new(
                        ErrorCode::InvalidIndexSpecificationOption,
                        format!("Unsupported value for columnstoreCompressor: {s}"),
                    ));
                }
            }
            _ => {}
        }
    }
    let Some(key) = key else {
        return Err(CommandError::new(
            ErrorCode::FailedToParse,
            "The 'key' field is a required property of an index specification",
        ));
    };
    if let Some(RawBsonRef::Boolean(false) | RawBsonRef::Int32(0) | RawBsonRef::Int64(0)) =
        raw.get("clustered").ok().flatten()
    {
        return Err(CommandError::new(
            ErrorCode::Location(6_492_800),
            "Value 'false' for field 'clustered' is invalid",
        ));
    }
    if clustered && !unique {
        return Err(cannot_create(
            "The 'unique' field is required when 'clustered' is specified",
        ));
    }
    let version = version.unwrap_or(2);
    if collation && version < 2 {
        return Err(cannot_create(format!(
            "Invalid index specification {}; cannot create an index with the 'collation' option \
             and v={version}",
            show(raw)
        )));
    }
    let kind = kind_of(key);
    if weights && kind != "text" {
        return Err(cannot_create(format!(
            "Invalid index specification {}; the field 'weights' can only be specified with text \
             indexes",
            show(raw)
        )));
    }
    if unique && prepare_unique {
        return Err(cannot_create(format!(
            "Invalid index specification {}; cannot create an index with the 'unique' option and \
             the 'prepareUnique' option",
            show(raw)
        )));
    }
    Ok(Validated {
        // Ebb names an unnamed index as the shell would (mongod requires the name).
        name: name.map_or_else(|| default_name(key), str::to_owned),
        key: key.to_owned(),
        kind,
        version,
        raw: raw.to_owned(),
    })
}

/// The index name MongoDB's shells generate from a key pattern: `a_1_b_-1`.
pub fn default_name(key: &RawDocument) -> String {
    let mut parts = Vec::new();
    for (k, v) in key.iter().map_while(Result::ok) {
        parts.push(k.as_str().to_owned());
        parts.push(match v {
            RawBsonRef::String(s) => s.to_owned(),
            other => display::value(other),
        });
    }
    parts.join("_")
}

/// mongod's `parseAndValidateIndexSpecs` after `validateIndexSpec`: the `_id` index's spec,
/// and the reserved names. Its errors are not wrapped.
fn check_reserved(raw: &RawDocument, spec: &Validated) -> CommandResult<()> {
    if is_id_pattern(&spec.key) {
        // mongod shows the spec as `validateIndexSpec` left it: without `ns`, `v` appended.
        let mut shown = RawDocumentBuf::new();
        for (k, v) in elements(raw)? {
            if k != "ns"
                && let Ok(k) = <&CStr>::try_from(k)
            {
                shown.append(k, v);
            }
        }
        if raw.get("v").ok().flatten().is_none() {
            shown.append(cstr!("v"), spec.version);
        }
        for (field, _) in elements(raw)? {
            if !ID_OPTIONS.contains(&field) {
                return Err(CommandError::new(
                    ErrorCode::InvalidIndexSpecificationOption,
                    format!(
                        "The field '{field}' is not valid for an _id index specification. \
                         Specification: {}",
                        show(&shown)
                    ),
                ));
            }
        }
        let same = elements(&spec.key)?
            .first()
            .is_some_and(|(_, v)| crate::query::compare::compare(*v, RawBsonRef::Int32(1)).is_eq());
        if !same {
            return Err(CommandError::bad_value(format!(
                "The field 'key' for an _id index must be {{_id: 1}}, but got {}",
                show(&spec.key)
            )));
        }
        return Ok(());
    }
    if spec.name == "_id_" {
        return Err(CommandError::bad_value(format!(
            "The index name '_id_' is reserved for the _id index, which must have key pattern \
             {{_id: 1}}, found {}",
            display::element("key", RawBsonRef::Document(&spec.key))
        )));
    }
    if spec.name == "*" {
        return Err(CommandError::bad_value("The index name '*' is not valid."));
    }
    Ok(())
}

/// The second stage (see the module docs): mongod's `_isSpecOk`, then Ebb's refusal of what it
/// does not implement. Returns the spec to keep and list.
pub fn check_creatable(spec: &Validated) -> CommandResult<RawDocumentBuf> {
    let raw = &spec.raw;
    if spec.name.contains('\0') {
        return Err(cannot_create("index name cannot contain NUL bytes"));
    }
    if spec.name.is_empty() {
        return Err(cannot_create("index name cannot be empty"));
    }
    let option = |name: &str| raw.get(name).ok().flatten();
    let set = |name: &str| option(name).is_some_and(crate::query::true_value);
    let simple_collation = matches!(
        option("collation"),
        Some(RawBsonRef::Document(c)) if c.as_bytes() == rawdoc! { "locale": "simple" }.as_bytes()
    );
    if option("collation").is_some() && !simple_collation {
        return Err(CommandError::new(
            ErrorCode::NotImplemented,
            "index collations are not supported by Ebb yet",
        ));
    }
    if spec.kind == "wildcard" {
        for refused in ["sparse", "unique"] {
            if set(refused) {
                return Err(cannot_create(format!(
                    "Index type 'wildcard' does not support the '{refused}' option"
                )));
            }
        }
        if option("expireAfterSeconds").is_some() {
            return Err(cannot_create(
                "cannot make a TTL index :: caused by :: Index type 'wildcard' does not support \
                 the 'expireAfterSeconds' option",
            ));
        }
        if spec.version < 2 {
            return Err(cannot_create(format!(
                "Index type 'wildcard' is not allowed with index version v: {}",
                spec.version
            )));
        }
    }
    if spec.kind == "columnstore" {
        return Err(CommandError::new(
            ErrorCode::NotImplemented,
            "columnstore indexes are under development and cannot be used without enabling the \
             feature flag",
        ));
    }
    if let Some(RawBsonRef::Document(filter)) = option("partialFilterExpression") {
        if set("sparse") {
            return Err(cannot_create(
                "cannot mix \"partialFilterExpression\" and \"sparse\" options",
            ));
        }
        check_partial_filter(filter)?;
    }
    if let Some(engine) = option("storageEngine") {
        check_storage_engine(engine)?;
    }
    if !spec.kind.is_empty() {
        return Err(CommandError::new(
            ErrorCode::NotImplemented,
            format!("'{}' indexes are not supported by Ebb yet", spec.kind),
        ));
    }
    for unsupported in ["prepareUnique", "clustered", "originalSpec"] {
        if option(unsupported).is_some() {
            return Err(CommandError::new(
                ErrorCode::NotImplemented,
                format!("index option '{unsupported}' is not supported by Ebb yet"),
            ));
        }
    }
    // mongod's `_fixIndexSpec`.
    let mut kept = rawdoc! { "v": spec.version };
    if set("unique") {
        kept.append(cstr!("unique"), true);
    }
    if set("hidden") {
        kept.append(cstr!("hidden"), true);
    }
    kept.append(cstr!("key"), spec.key.clone());
    kept.append(cstr!("name"), spec.name.as_str());
    for (field, value) in elements(raw)? {
        let dropped = matches!(
            field,
            "_id" | "dropDups" | "ns" | "v" | "unique" | "key" | "name" | "hidden"
        ) || (field == "collation" && simple_collation);
        if !dropped && let Ok(field) = <&CStr>::try_from(field) {
            kept.append(field, value);
        }
    }
    Ok(kept)
}

/// How `listIndexes` serializes a field of a spec (its type in `list_indexes.idl`).
#[derive(Clone, Copy)]
enum Listed {
    /// As stored (documents and strings).
    AsIs,
    /// `safeBool`: its truth value, as a bool.
    Bool,
    /// `safeInt`: an int32 (mongod's `safeNumberInt`: truncated, clamped, NaN as 0).
    Int,
    /// `safeDouble`: a double.
    Double,
}

/// `ListIndexesReplyItem`'s fields, in its order.
const LISTED_FIELDS: &[(&str, Listed)] = &[
    ("v", Listed::Int),
    ("key", Listed::AsIs),
    ("name", Listed::AsIs),
    ("background", Listed::Bool),
    ("unique", Listed::Bool),
    ("hidden", Listed::Bool),
    ("partialFilterExpression", Listed::AsIs),
    ("sparse", Listed::Bool),
    // mongod's IDL type is safeInt (listed as an int32); Ebb's TTL model lists the value as
    // given (tests/ttl.rs), which the TTL specification owns.
    ("expireAfterSeconds", Listed::AsIs),
    ("storageEngine", Listed::AsIs),
    ("weights", Listed::AsIs),
    ("default_language", Listed::AsIs),
    ("language_override", Listed::AsIs),
    ("textIndexVersion", Listed::Int),
    ("2dsphereIndexVersion", Listed::Int),
    ("bits", Listed::Int),
    ("min", Listed::Double),
    ("max", Listed::Double),
    ("bucketSize", Listed::Double),
    ("collation", Listed::AsIs),
    ("wildcardProjection", Listed::AsIs),
    ("columnstoreProjection", Listed::AsIs),
    ("coarsestIndexedLevel", Listed::Int),
    ("finestIndexedLevel", Listed::Int),
    ("dropDups", Listed::Bool),
    ("originalSpec", Listed::AsIs),
    ("clustered", Listed::Bool),
    ("prepareUnique", Listed::Bool),
];

/// A kept spec as `listIndexes` shows it: mongod parses each catalog entry into
/// `ListIndexesReplyItem` (`list_indexes.idl`) and serializes that, so the fields come in the
/// IDL's order with its types (`sparse: 1` is listed as `sparse: true`, `bits: 26.0` as the int
/// 26), and fields it does not know are left out. `expireAfterSeconds` is listed as given.
pub fn listed(spec: &RawDocument) -> RawDocumentBuf {
    let mut out = RawDocumentBuf::new();
    for &(field, how) in LISTED_FIELDS {
        let Some(value) = spec.get(field).ok().flatten() else {
            continue;
        };
        let Ok(name) = <&CStr>::try_from(field) else {
            continue;
        };
        match how {
            Listed::AsIs => out.append(name, value),
            Listed::Bool => out.append(name, crate::query::true_value(value)),
            Listed::Int => {
                let n = number_as_f64(value).unwrap_or(0.0);
                #[expect(clippy::cast_possible_truncation, reason = "clamped, as safeNumberInt")]
                let n = if n.is_nan() {
                    0
                } else {
                    n.clamp(f64::from(i32::MIN), f64::from(i32::MAX)) as i32
                };
                out.append(name, n);
            }
            Listed::Double => out.append(name, number_as_f64(value).unwrap_or(0.0)),
        }
    }
    out
}

/// `storageEngine`: a non-empty document of per-engine documents, for engines this server has
/// (mongod's `validateStorageOptions`; Ebb answers to `wiredTiger`, as drivers expect).
fn check_storage_engine(value: RawBsonRef<'_>) -> CommandResult<()> {
    let RawBsonRef::Document(engines) = value else {
        return Err(cannot_create(
            "\"storageEngine\" options must be a document if present",
        ));
    };
    if engines.is_empty() {
        return Err(cannot_create(
            "Empty \"storageEngine\" options are invalid. Please remove the field or include \
             valid options.",
        ));
    }
    for (engine, options) in elements(engines)? {
        if engine != "wiredTiger" {
            return Err(CommandError::new(
                ErrorCode::InvalidOptions,
                format!("{engine} is not a registered storage engine for this server"),
            ));
        }
        if !matches!(options, RawBsonRef::Document(_)) {
            return Err(CommandError::bad_value(format!(
                "'storageEngine.{engine}' has to be an embedded document."
            )));
        }
    }
    Ok(())
}

/// Parses a partial filter as mongod does for an index (no `$expr`, `$where`, `$text`,
/// `$jsonSchema`), with the query parser's errors.
fn parse_partial_filter(filter: &RawDocument) -> CommandResult<()> {
    banned_features(filter)?;
    crate::query::filter::Filter::compile(filter)?;
    Ok(())
}

/// The operators `MatchExpressionParser::kBanAllSpecialFeatures` refuses, where they may appear
/// (top level and inside `$and`/`$or`/`$nor`).
fn banned_features(filter: &RawDocument) -> CommandResult<()> {
    for (field, value) in elements(filter)? {
        match field {
            "$expr" => {
                return Err(CommandError::new(
                    ErrorCode::QueryFeatureNotAllowed,
                    "$expr is not allowed in this context",
                ));
            }
            "$jsonSchema" => {
                return Err(CommandError::new(
                    ErrorCode::QueryFeatureNotAllowed,
                    "$jsonSchema is not allowed in this context",
                ));
            }
            "$where" => {
                return Err(CommandError::bad_value(
                    "$where is not allowed in this context",
                ));
            }
            "$text" => {
                return Err(CommandError::bad_value(
                    "$text is not allowed in this context",
                ));
            }
            "$and" | "$or" | "$nor" => {
                if let RawBsonRef::Array(list) = value {
                    for item in list.into_iter().map_while(Result::ok) {
                        if let RawBsonRef::Document(d) = item {
                            banned_features(d)?;
                        }
                    }
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// A partial filter as mongod's parser shapes it, as far as the allowed-operator check needs.
enum Shape {
    /// `$and` (also the implicit one of several predicates).
    And(Vec<Shape>),
    /// `$or`.
    Or(Vec<Shape>),
    /// Equality, `$lt $lte $gt $gte`, `$exists: true`, `$type`, `$in`, `$geoWithin`,
    /// `$geoIntersects`.
    Allowed,
    /// Anything else, with mongod's `debugString()` of it.
    Refused(String),
}

/// mongod's `MatchExpressionParser::parse`: an implicit `$and` of the predicates, unwrapped
/// when there is one.
fn shape_of(filter: &RawDocument) -> Shape {
    let mut parts = Vec::new();
    for (field, value) in filter.iter().map_while(Result::ok) {
        let field = field.as_str();
        if let Some(op) = field.strip_prefix('$') {
            let list = || -> Vec<Shape> {
                match value {
                    RawBsonRef::Array(items) => items
                        .into_iter()
                        .map_while(Result::ok)
                        .filter_map(|i| match i {
                            RawBsonRef::Document(d) => Some(shape_of(d)),
                            _ => None,
                        })
                        .collect(),
                    _ => Vec::new(),
                }
            };
            match op {
                "and" => parts.push(Shape::And(list())),
                "or" => parts.push(Shape::Or(list())),
                "comment" => {}
                "nor" => parts.push(Shape::Refused("$nor\n".to_owned())),
                other => parts.push(Shape::Refused(format!("${other}\n"))),
            }
            continue;
        }
        match value {
            RawBsonRef::Document(ops) if is_operator_document(ops) => {
                for (op, arg) in ops.iter().map_while(Result::ok) {
                    match op.as_str() {
                        // `$regex` and `$options` are one expression.
                        "$options" if ops.get("$regex").ok().flatten().is_some() => {}
                        "$regex" | "$options" => {
                            let text = |name: &str| match ops.get(name).ok().flatten() {
                                Some(RawBsonRef::String(s)) => s.to_owned(),
                                Some(RawBsonRef::RegularExpression(re)) => {
                                    re.pattern.as_str().to_owned()
                                }
                                _ => String::new(),
                            };
                            parts.push(Shape::Refused(format!(
                                "{field} regex /{}/{}\n",
                                text("$regex"),
                                text("$options")
                            )));
                        }
                        op => parts.push(operator_shape(field, op, arg)),
                    }
                }
            }
            RawBsonRef::RegularExpression(re) => parts.push(Shape::Refused(format!(
                "{field} regex /{}/{}\n",
                re.pattern.as_str(),
                re.options.as_str()
            ))),
            _ => parts.push(Shape::Allowed),
        }
    }
    if parts.len() == 1
        && let Some(only) = parts.pop()
    {
        return only;
    }
    Shape::And(parts)
}

/// Whether `{field: doc}` is a predicate document (`{$gt: 1}`) rather than an equality to a
/// document: its first field starts with `$` and it is not a `DBRef`.
fn is_operator_document(doc: &RawDocument) -> bool {
    doc.iter()
        .next()
        .and_then(Result::ok)
        .is_some_and(|(k, _)| {
            k.as_str().starts_with('$') && !matches!(k.as_str(), "$ref" | "$id" | "$db")
        })
}

/// The shape of `{field: {op: arg}}`.
fn operator_shape(field: &str, op: &str, arg: RawBsonRef<'_>) -> Shape {
    let shown = display::value(arg);
    match op {
        "$eq" | "$lt" | "$lte" | "$gt" | "$gte" | "$type" | "$in" | "$geoWithin"
        | "$geoIntersects" => Shape::Allowed,
        "$exists" if crate::query::true_value(arg) => Shape::Allowed,
        "$exists" => Shape::Refused(format!("$not\n    {field} exists\n")),
        "$ne" => Shape::Refused(format!("$not\n    {field} $eq {shown}\n")),
        "$nin" => Shape::Refused(format!("$not\n    {field} $in [ {}]\n", in_list(arg))),
        "$not" => Shape::Refused("$not\n".to_owned()),
        "$all" => match arg {
            RawBsonRef::Array(items) => {
                let items: Vec<_> = items.into_iter().map_while(Result::ok).collect();
                if items.is_empty() {
                    return Shape::Refused("$alwaysFalse\n".to_owned());
                }
                Shape::And(
                    items
                        .into_iter()
                        .map(|item| match item {
                            RawBsonRef::RegularExpression(re) => Shape::Refused(format!(
                                "{field} regex /{}/{}\n",
                                re.pattern.as_str(),
                                re.options.as_str()
                            )),
                            RawBsonRef::Document(d)
                                if d.get("$elemMatch").ok().flatten().is_some() =>
                            {
                                Shape::Refused(format!("{field} $elemMatch\n"))
                            }
                            _ => Shape::Allowed,
                        })
                        .collect(),
                )
            }
            _ => Shape::Refused(format!("{field} $all {shown}\n")),
        },
        other => Shape::Refused(format!("{field} {other} {shown}\n")),
    }
}

/// The values of an `$in` as mongod's `InMatchExpression::debugString` writes them: sorted,
/// without duplicates, each followed by a space (regexes last).
fn in_list(arg: RawBsonRef<'_>) -> String {
    let RawBsonRef::Array(items) = arg else {
        return String::new();
    };
    let mut values: Vec<RawBsonRef<'_>> = items.into_iter().map_while(Result::ok).collect();
    let (mut regexes, mut values): (Vec<_>, Vec<_>) = values
        .drain(..)
        .partition(|v| matches!(v, RawBsonRef::RegularExpression(_)));
    values.sort_by(|a, b| crate::query::compare::compare(*a, *b));
    values.dedup_by(|a, b| crate::query::compare::compare(*a, *b).is_eq());
    values.append(&mut regexes);
    values.iter().fold(String::new(), |mut out, v| {
        out.push_str(&display::value(*v));
        out.push(' ');
        out
    })
}

/// mongod's `_checkValidFilterExpressions`: only the allowed operators, at most
/// [`PARTIAL_FILTER_MAX_DEPTH`] levels deep.
fn check_partial_filter(filter: &RawDocument) -> CommandResult<()> {
    fn walk(shape: &Shape, level: usize) -> CommandResult<()> {
        if level + 1 > PARTIAL_FILTER_MAX_DEPTH {
            return Err(cannot_create(format!(
                "partialFilterExpression depth may not exceed {PARTIAL_FILTER_MAX_DEPTH}"
            )));
        }
        match shape {
            Shape::And(children) | Shape::Or(children) => {
                children.iter().try_for_each(|c| walk(c, level + 1))
            }
            Shape::Allowed => Ok(()),
            Shape::Refused(debug) => Err(cannot_create(format!(
                "Expression not supported in partial index: {debug}"
            ))),
        }
    }
    walk(&shape_of(filter), 0)
}

#[cfg(test)]
mod tests {
    use bson::rawdoc;

    use super::*;

    fn err(spec: &RawDocumentBuf) -> CommandError {
        validate(spec)
            .and_then(|v| check_creatable(&v))
            .expect_err("refused")
    }

    fn ok(spec: &RawDocumentBuf) -> RawDocumentBuf {
        check_creatable(&validate(spec).expect("valid")).expect("creatable")
    }

    #[test]
    fn key_field_names_follow_mongod() {
        for (key, msg) in [
            (rawdoc! { "": 1 }, "Index keys cannot be an empty field."),
            (
                rawdoc! { "a..b": 1 },
                "Index keys cannot contain an empty field.",
            ),
            (
                rawdoc! { "a.": 1 },
                "Index keys cannot contain an empty field.",
            ),
            (
                rawdoc! { "$a": 1 },
                "Index key contains an illegal field name: field name starts with '$'.",
            ),
            (
                rawdoc! { "a.$b": 1 },
                "Index key contains an illegal field name: field name starts with '$'.",
            ),
            (
                rawdoc! { "_fts": 1 },
                "Index key contains an illegal field name: '_fts'",
            ),
        ] {
            let e = err(&rawdoc! { "key": key.clone(), "name": "x" });
            assert_eq!(e.code, ErrorCode::CannotCreateIndex, "{key:?}");
            assert!(
                e.errmsg.starts_with("Error in specification { key: "),
                "{}",
                e.errmsg
            );
            assert!(
                e.errmsg.ends_with(&format!(":: caused by :: {msg}")),
                "{}",
                e.errmsg
            );
        }
        // DBRef fields may be indexed below the top level.
        ok(&rawdoc! { "key": { "a.$id": 1 }, "name": "x" });
    }

    #[test]
    fn key_values_follow_mongod() {
        for (key, msg) in [
            (
                rawdoc! { "a": 0 },
                "Values in the index key pattern cannot be 0.",
            ),
            (
                rawdoc! { "a": 0.0 },
                "Values in the index key pattern cannot be 0.",
            ),
            (
                rawdoc! { "a": f64::NAN },
                "Values in the index key pattern cannot be NaN.",
            ),
            (
                rawdoc! { "a": true },
                "Values in v:2 index key pattern cannot be of type bool. Only numbers > 0, \
                 numbers < 0, and strings are allowed.",
            ),
            (
                rawdoc! { "a": { "b": 1 } },
                "Values in v:2 index key pattern cannot be of type object. Only numbers > 0, \
                 numbers < 0, and strings are allowed.",
            ),
            (rawdoc! { "a": "nope" }, "Unknown index plugin 'nope'"),
            (
                rawdoc! { "a": "geoHaystack" },
                "GeoHaystack indexes cannot be created in version 5.0 and above",
            ),
            (
                rawdoc! { "a": "text", "b": "2d" },
                "Can't use more than one index plugin for a single index.",
            ),
            (
                rawdoc! { "a": "" },
                "Values in the index key pattern cannot be empty strings",
            ),
            (rawdoc! {}, "Index keys cannot be empty."),
        ] {
            let e = err(&rawdoc! { "key": key.clone(), "name": "x" });
            assert_eq!(e.code, ErrorCode::CannotCreateIndex, "{key:?}");
            assert!(e.errmsg.ends_with(msg), "{key:?}: {}", e.errmsg);
        }
        let dup = err(&rawdoc! { "key": { "a": 1, "a": -1 }, "name": "x" });
        assert_eq!(dup.code, ErrorCode::BadValue);
    }

    #[test]
    fn unimplemented_kinds_are_not_implemented_once_valid() {
        for key in [
            rawdoc! { "a": "text" },
            rawdoc! { "a": "2dsphere" },
            rawdoc! { "a": "2d" },
            rawdoc! { "a": "hashed" },
            rawdoc! { "$**": 1 },
            rawdoc! { "attrs.$**": 1 },
            rawdoc! { "attrs.$**": -1 },
            rawdoc! { "a": 1, "b.$**": 1 },
            rawdoc! { "$**": "columnstore" },
        ] {
            let e = err(&rawdoc! { "key": key.clone(), "name": "x" });
            assert_eq!(e.code, ErrorCode::NotImplemented, "{key:?}: {}", e.errmsg);
        }
        // Invalid wildcard specs get mongod's errors, not NotImplemented.
        for (spec, code) in [
            (
                rawdoc! { "key": { "a.$**": 1 }, "name": "x", "sparse": true },
                67,
            ),
            (
                rawdoc! { "key": { "a.$**": 1 }, "name": "x", "unique": true },
                67,
            ),
            (rawdoc! { "key": { "a.$**": 1 }, "name": "x", "v": 1 }, 67),
            (rawdoc! { "key": { "a.$**": "wildcard" }, "name": "x" }, 67),
            (
                rawdoc! { "key": { "a.$**": 1, "b.$**": 1 }, "name": "x" },
                7_246_201,
            ),
            (
                rawdoc! { "key": { "a.$**": 1, "a.b": 1 }, "name": "x" },
                7_246_204,
            ),
            (rawdoc! { "key": { "$**": 1, "b": 1 }, "name": "x" }, 67),
            (
                rawdoc! { "key": { "a": 1 }, "name": "x", "wildcardProjection": { "a": 1 } },
                2,
            ),
        ] {
            assert_eq!(err(&spec).code.code(), code, "{spec:?}");
        }
    }

    #[test]
    fn versions_one_and_two_are_kept() {
        let kept = ok(&rawdoc! { "key": { "a": 1 }, "name": "a_1", "v": 1.0 });
        assert_eq!(kept, rawdoc! { "v": 1, "key": { "a": 1 }, "name": "a_1" });
        let kept = ok(&rawdoc! { "key": { "a": 1 }, "name": "a_1" });
        assert_eq!(kept, rawdoc! { "v": 2, "key": { "a": 1 }, "name": "a_1" });
        for (v, code) in [
            (bson::RawBson::Int32(0), 67),
            (bson::RawBson::Int32(3), 67),
            (bson::RawBson::Double(2.5), 2),
            (bson::RawBson::String("2".into()), 14),
        ] {
            let mut spec = rawdoc! { "key": { "a": 1 }, "name": "a_1" };
            spec.append(cstr!("v"), v.clone());
            assert_eq!(err(&spec).code.code(), code, "{v:?}");
        }
    }

    #[test]
    fn options_are_checked_against_one_table() {
        for (spec, code) in [
            (rawdoc! { "key": { "a": 1 }, "name": "x", "bogus": 1 }, 197),
            (
                rawdoc! { "key": { "a": 1 }, "name": "x", "bucketSize": 1 },
                197,
            ),
            (rawdoc! { "key": { "a": 1 }, "name": 5 }, 14),
            (
                rawdoc! { "key": { "a": 1 }, "name": "x", "unique": "yes" },
                14,
            ),
            (rawdoc! { "key": { "a": 1 }, "name": "x", "hidden": 1 }, 14),
            (rawdoc! { "key": { "a": 1 }, "name": "x", "bits": "26" }, 14),
            (
                rawdoc! { "key": { "a": 1 }, "name": "x", "default_language": 1 },
                14,
            ),
            (
                rawdoc! { "key": { "a": 1 }, "name": "x", "collation": 1 },
                14,
            ),
            (
                rawdoc! { "key": { "a": 1 }, "name": "x", "collation": {} },
                2,
            ),
            (
                rawdoc! { "key": { "a": 1 }, "name": "x", "weights": { "a": 1 } },
                67,
            ),
            (
                rawdoc! { "key": { "a": 1 }, "name": "x", "storageEngine": 1 },
                67,
            ),
            (
                rawdoc! { "key": { "a": 1 }, "name": "x", "storageEngine": { "x": {} } },
                72,
            ),
            (rawdoc! { "key": { "a": 1 }, "name": "" }, 67),
            (rawdoc! { "key": { "a": 1 }, "name": "*" }, 2),
            (rawdoc! { "key": { "a": 1 }, "name": "_id_" }, 2),
            (
                rawdoc! { "key": { "_id": 1 }, "name": "_id_", "unique": true },
                197,
            ),
            (
                rawdoc! { "key": { "a": 1 }, "name": "x", "unique": true, "prepareUnique": true },
                67,
            ),
        ] {
            assert_eq!(err(&spec).code.code(), code, "{spec:?}");
        }
        let e = err(&rawdoc! { "key": { "a": 1 }, "name": "x", "bogus": 1 });
        assert_eq!(
            e.errmsg,
            "Error in specification { key: { a: 1 }, name: \"x\", bogus: 1 } :: caused by :: The \
             field 'bogus' is not valid for an index specification. Specification: { key: { a: \
             1 }, name: \"x\", bogus: 1 }"
        );
        // Options of other index kinds mean nothing to an ordinary index, and are kept.
        let kept = ok(&rawdoc! {
            "key": { "a": 1 }, "name": "x", "unique": 1, "background": true, "bits": 26,
            "hidden": false, "ns": "db.c", "collation": { "locale": "simple" },
        });
        assert_eq!(
            kept,
            rawdoc! { "v": 2, "unique": true, "key": { "a": 1 }, "name": "x", "background": true, "bits": 26 }
        );
    }

    #[test]
    fn listed_as_list_indexes_idl_serializes() {
        let kept = ok(&rawdoc! {
            "key": { "a": 1 }, "name": "x", "unique": true, "sparse": 1, "background": 1.0,
            "expireAfterSeconds": 10_i64, "min": 5, "bits": 26.0,
        });
        // (expireAfterSeconds as given, see LISTED_FIELDS.)
        assert_eq!(
            listed(&kept),
            rawdoc! {
                "v": 2, "key": { "a": 1 }, "name": "x", "background": true, "unique": true,
                "sparse": true, "expireAfterSeconds": 10_i64, "bits": 26, "min": 5.0,
            }
        );
    }

    #[test]
    fn partial_filters_take_mongods_operators() {
        for filter in [
            rawdoc! {},
            rawdoc! { "a": 1 },
            rawdoc! { "a": { "$gt": 1, "$lte": 5 }, "b": { "$exists": true } },
            rawdoc! { "a": { "$type": "string" } },
            rawdoc! { "$or": [{ "a": 1 }, { "b": { "$in": [1, 2] } }] },
            rawdoc! { "$and": [{ "$and": [{ "$and": [{ "x": 3 }] }] }] },
            rawdoc! { "a": { "$all": [1, 2] } },
        ] {
            ok(&rawdoc! { "key": { "a": 1 }, "name": "x", "partialFilterExpression": filter });
        }
        for (filter, code, msg) in [
            (
                rawdoc! { "b": { "$ne": 1 } },
                67,
                "Expression not supported in partial index: $not\n    b $eq 1\n",
            ),
            (
                rawdoc! { "b": { "$exists": false } },
                67,
                "Expression not supported in partial index: $not\n    b exists\n",
            ),
            (
                rawdoc! { "b": { "$nin": [1] } },
                67,
                "Expression not supported in partial index: $not\n    b $in [ 1 ]\n",
            ),
            (
                rawdoc! { "b": { "$regex": "x" } },
                67,
                "Expression not supported in partial index: b regex",
            ),
            (
                rawdoc! { "b": { "$size": 1 } },
                67,
                "Expression not supported in partial index: b $size",
            ),
            (
                rawdoc! { "$nor": [{ "a": 1 }] },
                67,
                "Expression not supported in partial index: $nor",
            ),
            (
                rawdoc! { "$and": [{ "$and": [{ "$and": [{ "$and": [{ "x": 3 }] }] }] }] },
                67,
                "partialFilterExpression depth may not exceed 4",
            ),
            (
                rawdoc! { "$expr": { "$eq": ["$a", 1] } },
                224,
                "$expr is not allowed in this context",
            ),
            (
                rawdoc! { "a": { "$bogus": 1 } },
                2,
                "unknown operator: $bogus",
            ),
        ] {
            let e = err(
                &rawdoc! { "key": { "a": 1 }, "name": "x", "partialFilterExpression": filter.clone() },
            );
            assert_eq!(e.code.code(), code, "{filter:?}: {}", e.errmsg);
            assert!(e.errmsg.contains(msg), "{filter:?}: {}", e.errmsg);
        }
        let regex = err(&rawdoc! { "key": { "a": 1 }, "name": "x",
        "partialFilterExpression": { "b": { "$options": "i", "$regex": "^x" } } });
        assert_eq!(
            regex.errmsg,
            "Expression not supported in partial index: b regex /^x/i\n"
        );
        let nin = err(&rawdoc! { "key": { "a": 1 }, "name": "x",
        "partialFilterExpression": { "b": { "$nin": [2, "s", 1, 2] } } });
        assert_eq!(
            nin.errmsg,
            "Expression not supported in partial index: $not\n    b $in [ 1 2 \"s\" ]\n"
        );
        // `sparse: false` does not conflict with a partial filter.
        ok(
            &rawdoc! { "key": { "a": 1 }, "name": "x", "sparse": false, "partialFilterExpression": { "a": 1 } },
        );
        assert_eq!(
            err(&rawdoc! { "key": { "a": 1 }, "name": "x", "sparse": true, "partialFilterExpression": { "a": 1 } }).errmsg,
            "cannot mix \"partialFilterExpression\" and \"sparse\" options"
        );
    }
}
