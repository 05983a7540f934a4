//! Reading typed command fields, with MongoDB's error codes and messages.

use std::sync::Arc;

use bson::RawBsonRef;

use crate::error::{CommandError, CommandResult};
use crate::query::Variables;

/// MongoDB's name for a BSON type, as `$type` and error messages spell it.
pub use crate::query::display::type_name;

/// The IDL's error for a field of the wrong type. `expected` is `" 'object'"` for one type or
/// `"s '[a, b]'"` for several, which is written as mongod writes it: `'[a, b']`.
pub fn wrong_type(field: &str, value: RawBsonRef<'_>, expected: &str) -> CommandError {
    let expected = match expected.strip_suffix("]'") {
        Some(list) if expected.starts_with("s '[") => format!("{list}']"),
        _ => expected.to_owned(),
    };
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

/// The collection named by the command's first field (`{find: "coll"}`).
pub fn collection_name<'a>(req: &crate::dispatch::Request<'a>) -> CommandResult<&'a str> {
    match req.body.get(req.name).ok().flatten() {
        Some(RawBsonRef::String(name)) => Ok(name),
        Some(other) => Err(CommandError::new(
            crate::error::ErrorCode::InvalidNamespace,
            format!(
                "collection name has invalid type {}",
                type_name(other.element_type())
            ),
        )),
        None => Err(CommandError::bad_value(format!(
            "{} requires a collection name",
            req.name
        ))),
    }
}

/// A field of the command document, if present.
pub fn field<'a>(
    req: &crate::dispatch::Request<'a>,
    name: &str,
) -> CommandResult<Option<RawBsonRef<'a>>> {
    req.body
        .get(name)
        .map_err(|e| CommandError::new(crate::error::ErrorCode::InvalidBSON, e.to_string()))
}

/// Several fields of the command document in one pass over it: `out[i]` is the first field
/// named `names[i]`, if any (as [`field`] finds it).
pub fn fields<'a, const N: usize>(
    req: &crate::dispatch::Request<'a>,
    names: [&str; N],
) -> CommandResult<[Option<RawBsonRef<'a>>; N]> {
    let mut out = [None; N];
    for elem in req.body {
        let (key, value) = elem
            .map_err(|e| CommandError::new(crate::error::ErrorCode::InvalidBSON, e.to_string()))?;
        if let Some(i) = names.iter().position(|n| *n == key.as_str())
            && let Some(slot) = out.get_mut(i)
            && slot.is_none()
        {
            *slot = Some(value);
        }
    }
    Ok(out)
}

/// An optional boolean option (`bool` or number).
pub fn opt_bool(req: &crate::dispatch::Request<'_>, name: &str) -> CommandResult<Option<bool>> {
    bool_value(req, name, field(req, name)?)
}

/// [`opt_bool`] of a value already read.
pub fn bool_value(
    req: &crate::dispatch::Request<'_>,
    name: &str,
    value: Option<RawBsonRef<'_>>,
) -> CommandResult<Option<bool>> {
    match value {
        None => Ok(None),
        Some(RawBsonRef::Boolean(b)) => Ok(Some(b)),
        Some(v) => truthy(&format!("{}.{name}", req.name), v).map(Some),
    }
}

/// An optional document option.
pub fn opt_doc<'a>(
    req: &crate::dispatch::Request<'a>,
    name: &str,
) -> CommandResult<Option<&'a bson::RawDocument>> {
    doc_value(req, name, field(req, name)?)
}

/// [`opt_doc`] of a value already read.
pub fn doc_value<'a>(
    req: &crate::dispatch::Request<'_>,
    name: &str,
    value: Option<RawBsonRef<'a>>,
) -> CommandResult<Option<&'a bson::RawDocument>> {
    match value {
        None => Ok(None),
        Some(RawBsonRef::Document(d)) => Ok(Some(d)),
        Some(other) => Err(wrong_type(
            &format!("{}.{name}", req.name),
            other,
            " 'object'",
        )),
    }
}

/// The variables of one command's expressions: `$$NOW` at `now_ms`, and the command's `let`
/// option (a document, `TypeMismatch` otherwise), evaluated once, before the command runs.
pub fn variables(req: &crate::dispatch::Request<'_>, now_ms: i64) -> CommandResult<Arc<Variables>> {
    variables_of(opt_doc(req, "let")?, now_ms)
}

/// [`variables`] from a `let` document already read.
pub fn variables_of(
    let_spec: Option<&bson::RawDocument>,
    now_ms: i64,
) -> CommandResult<Arc<Variables>> {
    let vars = Variables::new(bson::DateTime::from_millis(now_ms));
    Ok(Arc::new(match let_spec {
        Some(spec) => vars.with_let(spec)?,
        None => vars,
    }))
}

/// An optional integer option: int32, int64, or a double with no fractional part.
pub fn opt_i64(req: &crate::dispatch::Request<'_>, name: &str) -> CommandResult<Option<i64>> {
    i64_value(req, name, field(req, name)?)
}

/// [`opt_i64`] of a value already read.
pub fn i64_value(
    req: &crate::dispatch::Request<'_>,
    name: &str,
    value: Option<RawBsonRef<'_>>,
) -> CommandResult<Option<i64>> {
    match value {
        None => Ok(None),
        Some(RawBsonRef::Int32(i)) => Ok(Some(i64::from(i))),
        Some(RawBsonRef::Int64(i)) => Ok(Some(i)),
        #[expect(
            clippy::cast_possible_truncation,
            reason = "checked to be integral and in range"
        )]
        Some(RawBsonRef::Double(d)) if d.fract() == 0.0 && d.abs() < 9.2e18 => Ok(Some(d as i64)),
        Some(other) => Err(wrong_type(
            &format!("{}.{name}", req.name),
            other,
            "s '[long, int, decimal, double]'",
        )),
    }
}

/// How long a write waits before it is acknowledged (`writeConcern`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteConcern {
    /// Wait until the write is durable (the default: `j` unset or true).
    Journaled,
    /// Acknowledge once applied; the journal syncs it within 100 ms (`j: false` or `w: 0`).
    Relaxed,
}

impl WriteConcern {
    /// Reads the command's `writeConcern` (checked as [`super::generic`] checks it).
    pub fn parse(req: &crate::dispatch::Request<'_>) -> CommandResult<Self> {
        let Some(wc) = field(req, "writeConcern")? else {
            return Ok(WriteConcern::Journaled);
        };
        let args = super::generic::WriteConcernArgs::parse(wc)?;
        let unacknowledged = args.w == Some(super::generic::W::Nodes(0));
        Ok(if args.j == Some(false) || unacknowledged {
            WriteConcern::Relaxed
        } else {
            WriteConcern::Journaled
        })
    }

    /// Waits, as this concern asks, for the commit with `ticket` to be durable.
    pub async fn wait(
        self,
        state: &crate::state::ServerState,
        ticket: Option<u64>,
    ) -> CommandResult<()> {
        match (self, ticket) {
            (WriteConcern::Journaled, Some(t)) => Ok(state.catalog.store().durable(t).await?),
            _ => Ok(()),
        }
    }
}
