//! The leaf operators of an update tree: argument parsing (mongod's `UpdateLeafNode::init`
//! checks, made at compile time) and the value each one gives an existing or a missing field.

use std::cmp::Ordering;
use std::sync::Arc;

use bson::{RawArray, RawArrayBuf, RawBson, RawBsonRef, RawDocument, RawDocumentBuf};

use super::Env;
use crate::error::{CommandError, ErrorCode};
use crate::query::collation::Collation;
use crate::query::compare::{compare_collated, number_as_f64};
use crate::query::display::{self, type_name};
use crate::query::filter::Filter;
use crate::query::{invalid_bson, not_implemented, path};

/// One operator applied at one path.
#[derive(Debug, Clone)]
pub(super) enum Op {
    Set(RawBson),
    SetOnInsert(RawBson),
    Unset,
    Inc(RawBson),
    Mul(RawBson),
    Min(RawBson),
    Max(RawBson),
    CurrentDate {
        timestamp: bool,
    },
    Push(Box<Push>),
    AddToSet(Vec<RawBson>),
    Pop {
        front: bool,
    },
    Pull(Box<PullMatcher>),
    PullAll(Vec<RawBson>),
    Bit(Vec<(BitOp, RawBson)>),
    /// The source of `$rename` number `n` (removed when the source exists).
    RenameFrom(usize),
    /// The destination of `$rename` number `n` (set to the source's value).
    RenameTo(usize),
}

/// `$push` with its modifiers.
#[derive(Debug, Clone)]
pub(super) struct Push {
    values: Vec<RawBson>,
    slice: Option<i64>,
    sort: Option<PushSort>,
    position: Option<i64>,
}

#[derive(Debug, Clone)]
enum PushSort {
    /// `$sort: 1` or `-1`: whole elements.
    Whole { descending: bool },
    /// `$sort: {field: ±1, …}`: dotted fields of the elements.
    Fields(Vec<(Vec<String>, bool)>),
}

/// How `$pull` decides which elements go (mongod's `PullNode` matchers).
#[derive(Debug, Clone)]
pub(super) enum PullMatcher {
    /// `{$pull: {a: {b: 1}}}`: documents matching the condition as a query.
    Object(Filter),
    /// `{$pull: {a: {$gt: 1}}}` or a regex: the element wrapped as `{"": element}`, matched
    /// against `{"": condition}`.
    Wrapped(Filter),
    /// Any other value: elements equal to it.
    Equal(RawBson),
}

#[derive(Debug, Clone, Copy)]
pub(super) enum BitOp {
    And,
    Or,
    Xor,
}

/// Whether a leaf creates its field when the path is missing, checks that the path could be
/// created ("viability") without creating it, or silently does nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Absence {
    Create,
    CheckViability,
    Ignore,
}

impl Op {
    /// Parses the argument of `operator` for `path`, with mongod's `init` errors.
    pub(super) fn parse(
        operator: &str,
        path: &str,
        arg: RawBsonRef<'_>,
    ) -> Result<Op, CommandError> {
        Ok(match operator {
            "$set" => Op::Set(arg.into()),
            "$setOnInsert" => Op::SetOnInsert(arg.into()),
            "$unset" => Op::Unset,
            "$inc" => Op::Inc(arithmetic_argument("increment", path, arg)?),
            "$mul" => Op::Mul(arithmetic_argument("multiply", path, arg)?),
            "$min" => Op::Min(arg.into()),
            "$max" => Op::Max(arg.into()),
            "$currentDate" => parse_current_date(arg)?,
            "$push" => Op::Push(Box::new(parse_push(arg)?)),
            "$addToSet" => Op::AddToSet(parse_add_to_set(arg)?),
            "$pop" => parse_pop(path, arg)?,
            "$pull" => Op::Pull(Box::new(parse_pull(arg)?)),
            "$pullAll" => match arg {
                RawBsonRef::Array(a) => Op::PullAll(array_values(a)?),
                other => {
                    return Err(CommandError::bad_value(format!(
                        "$pullAll requires an array argument but was given a {}",
                        type_name(other.element_type())
                    )));
                }
            },
            "$bit" => Op::Bit(parse_bit(arg)?),
            _ => return Err(CommandError::internal(format!("no leaf for {operator}"))),
        })
    }

    /// Prepares the operator for the statement's collation: `$pull` conditions compile with
    /// it (the other comparing operators read it from `Env` as they apply).
    pub(super) fn collate(&mut self, c: &Arc<Collation>) {
        match self {
            Op::Pull(matcher) => matcher.collate(c),
            // Values equal under the collation are added once (the first of them).
            Op::AddToSet(values) => {
                let mut deduped: Vec<RawBson> = Vec::with_capacity(values.len());
                for v in values.drain(..) {
                    let seen = deduped.iter().any(|d| {
                        compare_collated(d.as_raw_bson_ref(), v.as_raw_bson_ref(), Some(c)).is_eq()
                    });
                    if !seen {
                        deduped.push(v);
                    }
                }
                *values = deduped;
            }
            _ => {}
        }
    }

    /// What the operator does where its path does not exist.
    pub(super) fn absence(&self, env: &Env<'_>) -> Absence {
        match self {
            Op::Set(_)
            | Op::Inc(_)
            | Op::Mul(_)
            | Op::Min(_)
            | Op::Max(_)
            | Op::CurrentDate { .. }
            | Op::Push(_)
            | Op::AddToSet(_)
            | Op::Bit(_) => Absence::Create,
            Op::SetOnInsert(_) if env.insert => Absence::Create,
            Op::RenameTo(n) if env.renames.get(*n).is_some_and(Option::is_some) => Absence::Create,
            Op::Pop { .. } | Op::Pull(_) | Op::PullAll(_) => Absence::CheckViability,
            Op::SetOnInsert(_) | Op::Unset | Op::RenameFrom(_) | Op::RenameTo(_) => Absence::Ignore,
        }
    }

    /// The value of a field this operator creates (only called when `absence` is `Create`).
    pub(super) fn create(&self, env: &Env<'_>) -> Result<Option<RawBson>, CommandError> {
        Ok(Some(match self {
            Op::Set(v) | Op::SetOnInsert(v) | Op::Inc(v) | Op::Min(v) | Op::Max(v) => v.clone(),
            // mongod multiplies the argument by 0, keeping its type.
            Op::Mul(v) => match v {
                RawBson::Int32(_) => RawBson::Int32(0),
                RawBson::Int64(_) => RawBson::Int64(0),
                _ => RawBson::Double(0.0),
            },
            Op::CurrentDate { timestamp } => current_date(*timestamp, env),
            Op::Push(push) => RawBson::Array(push.apply(Vec::new(), env.collation)),
            Op::AddToSet(values) => RawBson::Array(values.iter().cloned().collect()),
            Op::Bit(ops) => apply_bits(RawBson::Int32(0), ops),
            Op::RenameTo(n) => match env.renames.get(*n) {
                Some(Some(v)) => v.clone(),
                _ => return Ok(None),
            },
            Op::Unset | Op::Pop { .. } | Op::Pull(_) | Op::PullAll(_) | Op::RenameFrom(_) => {
                return Ok(None);
            }
        }))
    }

    /// The new value of an existing field `name` at dotted `path` (`None`: remove it).
    /// `in_array`: the field is an array element (`$unset` then writes null).
    pub(super) fn apply_existing(
        &self,
        v: RawBsonRef<'_>,
        name: &str,
        path: &str,
        in_array: bool,
        env: &Env<'_>,
    ) -> Result<Option<RawBson>, CommandError> {
        Ok(Some(match self {
            Op::Set(new) => new.clone(),
            Op::SetOnInsert(new) if env.insert => new.clone(),
            Op::SetOnInsert(_) => v.into(),
            Op::Unset if in_array => RawBson::Null,
            Op::Unset => return Ok(None),
            Op::RenameFrom(n) => {
                if env.renames.get(*n).is_some_and(Option::is_some) {
                    return Ok(None);
                }
                v.into()
            }
            Op::RenameTo(n) => match env.renames.get(*n) {
                Some(Some(source)) => source.clone(),
                _ => v.into(),
            },
            Op::Inc(by) => arithmetic(v, by.as_raw_bson_ref(), name, Arith::Add, env)?,
            Op::Mul(by) => arithmetic(v, by.as_raw_bson_ref(), name, Arith::Mul, env)?,
            Op::Min(x) if compare_collated(x.as_raw_bson_ref(), v, env.collation).is_lt() => {
                x.clone()
            }
            Op::Max(x) if compare_collated(x.as_raw_bson_ref(), v, env.collation).is_gt() => {
                x.clone()
            }
            Op::Min(_) | Op::Max(_) => v.into(),
            Op::CurrentDate { timestamp } => current_date(*timestamp, env),
            Op::Push(push) => {
                let RawBsonRef::Array(arr) = v else {
                    return Err(CommandError::bad_value(format!(
                        "The field '{path}' must be an array but is of type {} in document {{{}}}",
                        type_name(v.element_type()),
                        id_or_no_id(env)
                    )));
                };
                RawBson::Array(push.apply(array_values(arr)?, env.collation))
            }
            Op::AddToSet(values) => {
                let RawBsonRef::Array(arr) = v else {
                    return Err(CommandError::bad_value(format!(
                        "Cannot apply $addToSet to non-array field. Field named '{name}' has \
                         non-array type {}",
                        type_name(v.element_type())
                    )));
                };
                let mut items = array_values(arr)?;
                let existing = items.len();
                for value in values {
                    let present = items[..existing].iter().any(|e| {
                        compare_collated(
                            e.as_raw_bson_ref(),
                            value.as_raw_bson_ref(),
                            env.collation,
                        )
                        .is_eq()
                    });
                    if !present {
                        items.push(value.clone());
                    }
                }
                RawBson::Array(items.into_iter().collect())
            }
            Op::Pop { front } => {
                let RawBsonRef::Array(arr) = v else {
                    return Err(CommandError::type_mismatch(format!(
                        "Path '{path}' contains an element of non-array type '{}'",
                        type_name(v.element_type())
                    )));
                };
                let mut items = array_values(arr)?;
                if *front && !items.is_empty() {
                    items.remove(0);
                } else {
                    items.pop();
                }
                RawBson::Array(items.into_iter().collect())
            }
            Op::Pull(matcher) => {
                let items = pull_array(v)?;
                let mut kept = Vec::with_capacity(items.len());
                for item in items {
                    if !matcher.matches(item.as_raw_bson_ref(), env.collation) {
                        kept.push(item);
                    }
                }
                RawBson::Array(kept.into_iter().collect())
            }
            Op::PullAll(values) => {
                let items = pull_array(v)?;
                RawBson::Array(
                    items
                        .into_iter()
                        .filter(|e| {
                            !values.iter().any(|x| {
                                compare_collated(
                                    e.as_raw_bson_ref(),
                                    x.as_raw_bson_ref(),
                                    env.collation,
                                )
                                .is_eq()
                            })
                        })
                        .collect(),
                )
            }
            Op::Bit(ops) => {
                if !matches!(v, RawBsonRef::Int32(_) | RawBsonRef::Int64(_)) {
                    // mongod prints the `_id` element right after the period.
                    let id = env.id.map_or_else(
                        || "INVALID-MUTABLE-ELEMENT".to_owned(),
                        |id| display::element("_id", id),
                    );
                    return Err(CommandError::bad_value(format!(
                        "Cannot apply $bit to a value of non-integral type.{id} has the field \
                         {name} of non-integer type {}",
                        type_name(v.element_type())
                    )));
                }
                apply_bits(v.into(), ops)
            }
        }))
    }
}

fn id_or_no_id(env: &Env<'_>) -> String {
    env.id
        .map_or_else(|| "no id".to_owned(), |id| display::element("_id", id))
}

fn pull_array(v: RawBsonRef<'_>) -> Result<Vec<RawBson>, CommandError> {
    match v {
        RawBsonRef::Array(arr) => array_values(arr),
        _ => Err(CommandError::bad_value(
            "Cannot apply $pull to a non-array value",
        )),
    }
}

fn current_date(timestamp: bool, env: &Env<'_>) -> RawBson {
    if timestamp {
        RawBson::Timestamp(env.timestamp)
    } else {
        RawBson::DateTime(env.now)
    }
}

/// The elements of an array, owned.
pub(super) fn array_values(arr: &RawArray) -> Result<Vec<RawBson>, CommandError> {
    let mut out = Vec::new();
    for item in arr {
        out.push(item.map_err(|e| invalid_bson(&e))?.into());
    }
    Ok(out)
}

/// `$inc`/`$mul` arguments must be numbers.
fn arithmetic_argument(
    verb: &str,
    path: &str,
    arg: RawBsonRef<'_>,
) -> Result<RawBson, CommandError> {
    match arg {
        RawBsonRef::Int32(_) | RawBsonRef::Int64(_) | RawBsonRef::Double(_) => Ok(arg.into()),
        RawBsonRef::Decimal128(_) => Err(not_implemented("decimal128 arithmetic")),
        _ => Err(CommandError::type_mismatch(format!(
            "Cannot {verb} with non-numeric argument: {{{}}}",
            display::element(path, arg)
        ))),
    }
}

fn parse_current_date(arg: RawBsonRef<'_>) -> Result<Op, CommandError> {
    match arg {
        RawBsonRef::Boolean(_) => Ok(Op::CurrentDate { timestamp: false }),
        RawBsonRef::Document(spec) => {
            let mut found = None;
            for item in spec {
                let (k, v) = item.map_err(|e| invalid_bson(&e))?;
                if k.as_str() != "$type" {
                    return Err(CommandError::bad_value(format!(
                        "Unrecognized $currentDate option: {}",
                        k.as_str()
                    )));
                }
                match v {
                    RawBsonRef::String("date") => found = Some(false),
                    RawBsonRef::String("timestamp") => found = Some(true),
                    _ => {}
                }
            }
            found
                .map(|timestamp| Op::CurrentDate { timestamp })
                .ok_or_else(|| {
                    CommandError::bad_value(
                        "The '$type' string field is required to be 'date' or 'timestamp': \
                         {$currentDate: {field : {$type: 'date'}}}",
                    )
                })
        }
        other => Err(CommandError::bad_value(format!(
            "{} is not valid type for $currentDate. Please use a boolean ('true') or a $type \
             expression ({{$type: 'timestamp/date'}}).",
            type_name(other.element_type())
        ))),
    }
}

/// mongod's `parseIntegerElementToLong`: an integral number, with `FailedToParse` otherwise.
/// `shown` is the element as mongod prints it in the message (`name: value`).
pub(super) fn integer_argument(shown: &str, v: RawBsonRef<'_>) -> Result<i64, CommandError> {
    let failed = |msg: String| CommandError::new(ErrorCode::FailedToParse, msg);
    match v {
        RawBsonRef::Int32(i) => Ok(i64::from(i)),
        RawBsonRef::Int64(i) => Ok(i),
        RawBsonRef::Double(_) | RawBsonRef::Decimal128(_) => {
            let d = number_as_f64(v).unwrap_or(f64::NAN);
            if d.is_nan() {
                return Err(failed(format!(
                    "Expected an integer, but found NaN in: {shown}"
                )));
            }
            #[expect(clippy::cast_precision_loss, reason = "the bound mongod uses: 2^63")]
            let limit = i64::MAX as f64;
            if d >= limit || d < -limit {
                return Err(failed(format!(
                    "Cannot represent as a 64-bit integer: {shown}"
                )));
            }
            if d.fract() != 0.0 {
                return Err(failed(format!("Expected an integer: {shown}")));
            }
            #[expect(clippy::cast_possible_truncation, reason = "integral and in range")]
            Ok(d as i64)
        }
        _ => Err(failed(format!("Expected a number in: {shown}"))),
    }
}

fn parse_pop(path: &str, arg: RawBsonRef<'_>) -> Result<Op, CommandError> {
    let n = integer_argument(&display::element(path, arg), arg)?;
    if n != 1 && n != -1 {
        return Err(CommandError::new(
            ErrorCode::FailedToParse,
            format!("$pop expects 1 or -1, found: {n}"),
        ));
    }
    Ok(Op::Pop { front: n == -1 })
}

fn parse_push(arg: RawBsonRef<'_>) -> Result<Push, CommandError> {
    let mut push = Push {
        values: Vec::new(),
        slice: None,
        sort: None,
        position: None,
    };
    let RawBsonRef::Document(spec) = arg else {
        push.values.push(arg.into());
        return Ok(push);
    };
    if spec.get("$each").map_err(|e| invalid_bson(&e))?.is_none() {
        push.values.push(arg.into());
        return Ok(push);
    }
    let mut seen: Vec<&str> = Vec::new();
    for item in spec {
        let (k, _) = item.map_err(|e| invalid_bson(&e))?;
        let k = k.as_str();
        if !matches!(k, "$each" | "$slice" | "$sort" | "$position") {
            return Err(CommandError::bad_value(format!(
                "Unrecognized clause in $push: {k}"
            )));
        }
        if seen.contains(&k) {
            return Err(CommandError::bad_value(format!(
                "Only one {k} is supported."
            )));
        }
        seen.push(k);
    }
    let clause = |name: &str| spec.get(name).map_err(|e| invalid_bson(&e));
    match clause("$each")? {
        Some(RawBsonRef::Array(a)) => push.values = array_values(a)?,
        Some(other) => {
            return Err(CommandError::bad_value(format!(
                "The argument to $each in $push must be an array but it was of type: {}",
                type_name(other.element_type())
            )));
        }
        None => {}
    }
    if let Some(v) = clause("$slice")? {
        push.slice = Some(
            integer_argument(&display::element("$slice", v), v).map_err(|_| {
                CommandError::bad_value(format!(
                    "The value for $slice must be an integer value but was given type: {}",
                    type_name(v.element_type())
                ))
            })?,
        );
    }
    if let Some(v) = clause("$sort")? {
        push.sort = Some(parse_push_sort(v)?);
    }
    if let Some(v) = clause("$position")? {
        push.position = Some(
            integer_argument(&display::element("$position", v), v).map_err(|_| {
                CommandError::bad_value(format!(
                    "The value for $position must be an integer value, not of type: {}",
                    type_name(v.element_type())
                ))
            })?,
        );
    }
    Ok(push)
}

fn parse_push_sort(v: RawBsonRef<'_>) -> Result<PushSort, CommandError> {
    let direction = |v: RawBsonRef<'_>| match number_as_f64(v) {
        Some(1.0) => Some(false),
        Some(-1.0) => Some(true),
        _ => None,
    };
    match v {
        RawBsonRef::Document(spec) => {
            // mongod's `pattern_cmp::checkSortClause`.
            if spec.is_empty() {
                return Err(CommandError::bad_value(
                    "The sort pattern is empty when it should be a set of fields.",
                ));
            }
            let mut fields = Vec::new();
            for item in spec {
                let (k, v) = item.map_err(|e| invalid_bson(&e))?;
                let Some(descending) = direction(v) else {
                    return Err(CommandError::bad_value(
                        "The sort element value must be either 1 or -1",
                    ));
                };
                let k = k.as_str();
                if k.is_empty() {
                    return Err(CommandError::bad_value("The sort field cannot be empty"));
                }
                if k.split('.').any(str::is_empty) {
                    return Err(CommandError::bad_value(format!(
                        "The sort field is a dotted field but has an empty part: {k}"
                    )));
                }
                fields.push((k.split('.').map(str::to_owned).collect(), descending));
            }
            Ok(PushSort::Fields(fields))
        }
        _ if number_as_f64(v).is_some() => match direction(v) {
            Some(descending) => Ok(PushSort::Whole { descending }),
            None => Err(CommandError::bad_value(
                "The $sort element value must be either 1 or -1",
            )),
        },
        _ => Err(CommandError::bad_value(
            "The $sort is invalid: use 1/-1 to sort the whole element, or {field:1/-1} to sort \
             embedded fields",
        )),
    }
}

/// What mongod's `$push` did to an existing array (its `ModifyResult`), which decides what it
/// logs: nothing, the appended elements alone, or the whole array.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum PushResult {
    NoOp,
    Append,
    Whole,
}

impl Push {
    /// mongod's `PushNode::performPush` result for an existing array of `len` elements: no
    /// values is a no-op; values at the end of a non-empty array (no `$position`, or one past
    /// the end) an append; anything else, a `$sort`, or a `$slice` that trims, the whole array.
    pub(super) fn result(&self, len: usize) -> PushResult {
        let mut result = if self.values.is_empty() {
            PushResult::NoOp
        } else if len == 0 {
            PushResult::Whole
        } else {
            match self.position {
                None => PushResult::Append,
                Some(p) if i64::try_from(len).is_ok_and(|l| p > l) => PushResult::Append,
                Some(_) => PushResult::Whole,
            }
        };
        if self.sort.is_some() {
            result = PushResult::Whole;
        }
        if let Some(slice) = self.slice {
            let count = u64::try_from(len.saturating_add(self.values.len())).unwrap_or(u64::MAX);
            if count > slice.unsigned_abs() {
                result = PushResult::Whole;
            }
        }
        result
    }

    /// mongod's `PushNode::performPush` on the elements of an existing (or new, empty) array.
    fn apply(&self, mut items: Vec<RawBson>, coll: Option<&Collation>) -> RawArrayBuf {
        let len = i64::try_from(items.len()).unwrap_or(i64::MAX);
        let at = match self.position {
            _ if items.is_empty() => items.len(),
            None => items.len(),
            Some(p) if p > len => items.len(),
            Some(p) if p >= 0 => usize::try_from(p).unwrap_or(items.len()),
            // `-p` cannot overflow: `p > i64::MIN` is checked first.
            Some(p) if p > i64::MIN && -p < len => usize::try_from(len + p).unwrap_or(0),
            Some(_) => 0,
        };
        items.splice(at..at, self.values.iter().cloned());
        if let Some(sort) = &self.sort {
            items.sort_by(|a, b| sort.compare(a.as_raw_bson_ref(), b.as_raw_bson_ref(), coll));
        }
        if let Some(slice) = self.slice {
            let keep = usize::try_from(slice.unsigned_abs()).unwrap_or(usize::MAX);
            if items.len() > keep {
                if slice >= 0 {
                    items.truncate(keep);
                } else {
                    items.drain(..items.len() - keep);
                }
            }
        }
        items.into_iter().collect()
    }
}

impl PushSort {
    /// mongod's `PatternElementCmp`.
    fn compare(&self, a: RawBsonRef<'_>, b: RawBsonRef<'_>, coll: Option<&Collation>) -> Ordering {
        match self {
            PushSort::Whole { descending } => {
                let ord = compare_collated(a, b, coll);
                if *descending { ord.reverse() } else { ord }
            }
            PushSort::Fields(fields) => {
                let (wa, wb) = (wrap(a), wrap(b));
                let (da, db) = (wa.as_ref(), wb.as_ref());
                for (parts, descending) in fields {
                    let ka = path::lookup(da, parts).unwrap_or(RawBsonRef::Null);
                    let kb = path::lookup(db, parts).unwrap_or(RawBsonRef::Null);
                    let ord = compare_collated(ka, kb, coll);
                    let ord = if *descending { ord.reverse() } else { ord };
                    if ord.is_ne() {
                        return ord;
                    }
                }
                Ordering::Equal
            }
        }
    }
}

/// A document as itself; any other value as `{"": value}` (so field patterns find nothing).
fn wrap(v: RawBsonRef<'_>) -> std::borrow::Cow<'_, RawDocument> {
    match v {
        RawBsonRef::Document(d) => std::borrow::Cow::Borrowed(d),
        other => {
            let mut d = RawDocumentBuf::new();
            d.append(bson::raw::cstr!(""), other);
            std::borrow::Cow::Owned(d)
        }
    }
}

fn parse_add_to_set(arg: RawBsonRef<'_>) -> Result<Vec<RawBson>, CommandError> {
    let mut values = Vec::new();
    match arg {
        RawBsonRef::Document(spec) => match spec.iter().next() {
            Some(first) => {
                let (k, v) = first.map_err(|e| invalid_bson(&e))?;
                if k.as_str() == "$each" {
                    let RawBsonRef::Array(each) = v else {
                        return Err(CommandError::type_mismatch(format!(
                            "The argument to $each in $addToSet must be an array but it was of \
                             type {}",
                            type_name(v.element_type())
                        )));
                    };
                    if spec.iter().count() > 1 {
                        return Err(CommandError::bad_value(format!(
                            "Found unexpected fields after $each in $addToSet: {}",
                            display::value(arg)
                        )));
                    }
                    values = array_values(each)?;
                } else {
                    values.push(arg.into());
                }
            }
            None => values.push(arg.into()),
        },
        _ => values.push(arg.into()),
    }
    // Keep the first of equal values, in order.
    let mut deduped: Vec<RawBson> = Vec::with_capacity(values.len());
    for v in values {
        if !deduped
            .iter()
            .any(|d| compare_collated(d.as_raw_bson_ref(), v.as_raw_bson_ref(), None).is_eq())
        {
            deduped.push(v);
        }
    }
    Ok(deduped)
}

/// The query operators mongod's `parsePathAcceptingKeyword` recognises: a `$pull` condition
/// starting with one of them is matched against each element itself.
fn is_path_accepting_keyword(name: &str) -> bool {
    matches!(
        name,
        "$eq"
            | "$ne"
            | "$gt"
            | "$gte"
            | "$lt"
            | "$lte"
            | "$in"
            | "$nin"
            | "$exists"
            | "$type"
            | "$size"
            | "$all"
            | "$elemMatch"
            | "$mod"
            | "$regex"
            | "$options"
            | "$not"
            | "$bitsAllSet"
            | "$bitsAllClear"
            | "$bitsAnySet"
            | "$bitsAnyClear"
            | "$geoWithin"
            | "$within"
            | "$geoIntersects"
            | "$near"
            | "$nearSphere"
            | "$geoNear"
            | "$maxDistance"
            | "$minDistance"
    )
}

fn parse_pull(arg: RawBsonRef<'_>) -> Result<PullMatcher, CommandError> {
    match arg {
        RawBsonRef::Document(cond) => {
            let first = match cond.iter().next() {
                Some(item) => Some(item.map_err(|e| invalid_bson(&e))?.0.as_str()),
                None => None,
            };
            if first.is_some_and(is_path_accepting_keyword) {
                Ok(PullMatcher::Wrapped(wrapped_filter(arg)?))
            } else {
                Ok(PullMatcher::Object(Filter::compile(cond)?))
            }
        }
        RawBsonRef::RegularExpression(_) => Ok(PullMatcher::Wrapped(wrapped_filter(arg)?)),
        other => Ok(PullMatcher::Equal(other.into())),
    }
}

fn wrapped_filter(cond: RawBsonRef<'_>) -> Result<Filter, CommandError> {
    let mut spec = RawDocumentBuf::new();
    spec.append(bson::raw::cstr!(""), cond);
    Filter::compile(&spec)
}

impl PullMatcher {
    /// Compares strings with `c` (see [`Op::collate`]).
    fn collate(&mut self, c: &Arc<Collation>) {
        if let PullMatcher::Object(f) | PullMatcher::Wrapped(f) = self {
            *f = std::mem::replace(f, Filter::match_all()).with_collation(Some(c.clone()));
        }
    }

    /// Whether `element` goes; `coll` is the update's collation (its filters hold it too).
    fn matches(&self, element: RawBsonRef<'_>, coll: Option<&Collation>) -> bool {
        match self {
            PullMatcher::Object(filter) => match element {
                RawBsonRef::Document(d) => filter.matches(d),
                _ => false,
            },
            PullMatcher::Wrapped(filter) => {
                let mut doc = RawDocumentBuf::new();
                doc.append(bson::raw::cstr!(""), element);
                filter.matches(&doc)
            }
            PullMatcher::Equal(v) => compare_collated(element, v.as_raw_bson_ref(), coll).is_eq(),
        }
    }
}

fn parse_bit(arg: RawBsonRef<'_>) -> Result<Vec<(BitOp, RawBson)>, CommandError> {
    let RawBsonRef::Document(spec) = arg else {
        return Err(CommandError::bad_value(format!(
            "The $bit modifier is not compatible with a {}. You must pass in an embedded \
             document: {{$bit: {{field: {{and/or/xor: #}}}}",
            type_name(arg.element_type())
        )));
    };
    let mut ops = Vec::new();
    for item in spec {
        let (k, v) = item.map_err(|e| invalid_bson(&e))?;
        let op = match k.as_str() {
            "and" => BitOp::And,
            "or" => BitOp::Or,
            "xor" => BitOp::Xor,
            other => {
                return Err(CommandError::bad_value(format!(
                    "The $bit modifier only supports 'and', 'or', and 'xor', not '{other}' which \
                     is an unknown operator: {{{}}}",
                    display::element(other, v)
                )));
            }
        };
        if !matches!(v, RawBsonRef::Int32(_) | RawBsonRef::Int64(_)) {
            return Err(CommandError::bad_value(format!(
                "The $bit modifier field must be an Integer(32/64 bit); a '{}' is not supported \
                 here: {{{}}}",
                type_name(v.element_type()),
                display::element(k.as_str(), v)
            )));
        }
        ops.push((op, v.into()));
    }
    if ops.is_empty() {
        return Err(CommandError::bad_value(
            "You must pass in at least one bitwise operation. The format is: {$bit: {field: \
             {and/or/xor: #}}",
        ));
    }
    Ok(ops)
}

/// mongod's `SafeNum` bitwise operations: int32 with int32 stays int32, anything with an int64
/// becomes int64.
fn apply_bits(mut value: RawBson, ops: &[(BitOp, RawBson)]) -> RawBson {
    for (op, operand) in ops {
        let f = |a: i64, b: i64| match op {
            BitOp::And => a & b,
            BitOp::Or => a | b,
            BitOp::Xor => a ^ b,
        };
        value = match (&value, operand) {
            (RawBson::Int32(a), RawBson::Int32(b)) => {
                let r = f(i64::from(*a), i64::from(*b));
                // Bitwise results of two int32s fit in an int32.
                RawBson::Int32(i32::try_from(r).unwrap_or_default())
            }
            (a, b) => {
                let int = |x: &RawBson| match x {
                    RawBson::Int32(i) => i64::from(*i),
                    RawBson::Int64(i) => *i,
                    _ => 0,
                };
                RawBson::Int64(f(int(a), int(b)))
            }
        };
    }
    value
}

#[derive(Clone, Copy)]
enum Arith {
    Add,
    Mul,
}

/// An operator's name and its int32 (computed in 64 bits), int64 (checked) and double forms.
type ArithOps = (
    &'static str,
    fn(i64, i64) -> i64,
    fn(i64, i64) -> Option<i64>,
    fn(f64, f64) -> f64,
);

/// mongod's `SafeNum` arithmetic: int32 results that overflow widen to int64; int64 overflow is
/// an error; any double makes a double.
fn arithmetic(
    v: RawBsonRef<'_>,
    by: RawBsonRef<'_>,
    name: &str,
    op: Arith,
    env: &Env<'_>,
) -> Result<RawBson, CommandError> {
    let (op_name, i32_op, i64_op, f64_op): ArithOps = match op {
        Arith::Add => ("$inc", |a, b| a + b, i64::checked_add, |a, b| a + b),
        Arith::Mul => ("$mul", |a, b| a * b, i64::checked_mul, |a, b| a * b),
    };
    let int = |x: RawBsonRef<'_>| match x {
        RawBsonRef::Int32(i) => Some(i64::from(i)),
        RawBsonRef::Int64(i) => Some(i),
        _ => None,
    };
    let result = match (v, by) {
        (RawBsonRef::Decimal128(_), _) | (_, RawBsonRef::Decimal128(_)) => {
            return Err(not_implemented("decimal128 arithmetic"));
        }
        (RawBsonRef::Int32(a), RawBsonRef::Int32(b)) => {
            let r = i32_op(i64::from(a), i64::from(b));
            i32::try_from(r).map_or(RawBson::Int64(r), RawBson::Int32)
        }
        _ => match (int(v), int(by)) {
            (Some(a), Some(b)) => match i64_op(a, b) {
                Some(r) => RawBson::Int64(r),
                None => {
                    return Err(CommandError::bad_value(format!(
                        "Failed to apply {op_name} operations to current value ({}) for \
                         document {{{}}}",
                        display::safe_num(v),
                        id_or_no_id(env)
                    )));
                }
            },
            _ => match (number_as_f64(v), number_as_f64(by)) {
                (Some(a), Some(b)) => RawBson::Double(f64_op(a, b)),
                _ => {
                    return Err(CommandError::type_mismatch(format!(
                        "Cannot apply {op_name} to a value of non-numeric type. {{{}}} has the \
                         field '{name}' of non-numeric type {}",
                        id_or_no_id(env),
                        type_name(v.element_type())
                    )));
                }
            },
        },
    };
    Ok(result)
}
