//! Updates: `Update::compile(&u)?` once, then `update.apply(&doc)?` per matched document.
//!
//! A document whose first field starts with `$` is an operator update; any other document
//! (including `{}`) is a replacement. Supported operators: `$set`, `$unset`, `$inc`, `$mul`,
//! `$min`, `$max` and `$setOnInsert` (which only acts in [`upsert_seed`]). The other MongoDB
//! operators (`$rename`, `$currentDate`, `$push`, `$addToSet`, `$pop`, `$pull`, `$pullAll`,
//! `$bit`), positional paths (`a.$`, `a.$[]`, `a.$[x]`), pipeline updates and decimal128
//! arithmetic are rejected with `NotImplemented`.
//!
//! As in mongod, operator paths form one tree built at compile time, which is where
//! `ConflictingUpdateOperators` is detected; applying walks the document once along that tree,
//! copying untouched fields as raw bytes. Existing fields keep their position; created fields
//! are appended in field-name order; dotted paths create intermediate documents; numeric
//! components index arrays (padding with nulls); a path through a scalar or a non-numeric
//! component into an array is `PathNotViable`. `apply` returns `None` when the result is
//! byte-for-byte the original (an update that modified nothing, for `nModified`).

use std::cmp::Ordering;

use bson::raw::CString;
use bson::{RawArrayBuf, RawBson, RawBsonRef, RawDocument, RawDocumentBuf};

use super::compare::{binary_equal, compare};
use super::display::type_name;
use super::{display, invalid_bson, not_implemented};
use crate::error::{CommandError, ErrorCode};

/// How far `$set: {"a.N": …}` may pad an array with nulls (mongod's `kMaxPaddingAllowed`).
const MAX_PADDING: usize = 1_500_000;

/// A compiled update: a replacement document or a tree of operators.
#[derive(Debug, Clone)]
pub struct Update {
    kind: Kind,
}

#[derive(Debug, Clone)]
enum Kind {
    Replacement(RawDocumentBuf),
    Operators(ObjectNode),
}

/// Children sorted by field name (mongod keeps them in a `std::map`).
#[derive(Debug, Clone, Default)]
struct ObjectNode {
    children: Vec<(String, UpdateNode)>,
}

#[derive(Debug, Clone)]
enum UpdateNode {
    Object(ObjectNode),
    Leaf(Leaf),
}

#[derive(Debug, Clone)]
struct Leaf {
    op: Op,
    /// The full dotted path, for messages.
    path: String,
}

#[derive(Debug, Clone)]
enum Op {
    Set(RawBson),
    SetOnInsert(RawBson),
    Unset,
    Inc(RawBson),
    Mul(RawBson),
    Min(RawBson),
    Max(RawBson),
}

/// Per-application state.
#[derive(Clone, Copy)]
struct Ctx<'a> {
    /// The document's `_id`, for messages.
    id: Option<RawBsonRef<'a>>,
    /// Building an upsert's new document (`$setOnInsert` applies).
    insert: bool,
}

impl Update {
    /// Compiles an update document, with mongod's parse errors.
    pub fn compile(update: &RawDocument) -> Result<Update, CommandError> {
        let first = match update.iter().next() {
            None => None,
            Some(item) => Some(item.map_err(|e| invalid_bson(&e))?.0.as_str()),
        };
        if !first.is_some_and(|k| k.starts_with('$')) {
            check_replacement(update)?;
            return Ok(Update {
                kind: Kind::Replacement(update.to_owned()),
            });
        }
        let mut root = ObjectNode::default();
        for item in update {
            let (name, value) = item.map_err(|e| invalid_bson(&e))?;
            let name = name.as_str();
            let make: fn(RawBson) -> Op = match name {
                "$set" => Op::Set,
                "$setOnInsert" => Op::SetOnInsert,
                "$unset" => |_| Op::Unset,
                "$inc" => Op::Inc,
                "$mul" => Op::Mul,
                "$min" => Op::Min,
                "$max" => Op::Max,
                "$rename" | "$currentDate" | "$push" | "$addToSet" | "$pop" | "$pull"
                | "$pullAll" | "$bit" => {
                    return Err(not_implemented(&format!("the {name} update operator")));
                }
                _ => {
                    return Err(CommandError::new(
                        ErrorCode::FailedToParse,
                        format!(
                            "Unknown modifier: {name}. Expected a valid update modifier or \
                             pipeline-style update specified as an array"
                        ),
                    ));
                }
            };
            let RawBsonRef::Document(fields) = value else {
                return Err(CommandError::new(
                    ErrorCode::FailedToParse,
                    format!(
                        "Modifiers operate on fields but we found type {} instead. For example: \
                         {{$mod: {{<field>: ...}}}} not {{{name}: {}}}",
                        type_name(value.element_type()),
                        display::value(value)
                    ),
                ));
            };
            for item in fields {
                let (path, arg) = item.map_err(|e| invalid_bson(&e))?;
                let path = path.as_str();
                check_update_path(path)?;
                check_argument(name, path, arg)?;
                root.insert(path, make(arg.into()))?;
            }
        }
        Ok(Update {
            kind: Kind::Operators(root),
        })
    }

    /// Whether this is a replacement document rather than operators.
    pub fn is_replacement(&self) -> bool {
        matches!(self.kind, Kind::Replacement(_))
    }

    /// Applies the update to a stored document: `Some(new)` if anything changed, `None` if the
    /// result is identical. Errors are per-document write errors (`ImmutableField`,
    /// `PathNotViable`, `TypeMismatch`, …).
    pub fn apply(&self, doc: &RawDocument) -> Result<Option<RawDocumentBuf>, CommandError> {
        self.apply_with(doc, false)
    }

    fn apply_with(
        &self,
        doc: &RawDocument,
        insert: bool,
    ) -> Result<Option<RawDocumentBuf>, CommandError> {
        let out = match &self.kind {
            Kind::Replacement(r) => replace(doc, r)?,
            Kind::Operators(root) => {
                let ctx = Ctx {
                    id: doc.get("_id").ok().flatten(),
                    insert,
                };
                let out = root.apply_to_doc(doc, true, ctx)?;
                // Only an insert can create `_id`, and only a `$`-prefixed top-level path can
                // create a `$` field; otherwise the stored document already passed these checks.
                if insert || root.children.iter().any(|(k, _)| k.starts_with('$')) {
                    check_for_storage(&out)?;
                }
                out
            }
        };
        Ok((out.as_bytes() != doc.as_bytes()).then_some(out))
    }
}

/// The document an upsert inserts when nothing matched: the filter's equality fields
/// (`Filter::equality_fields`), then the update applied with `$setOnInsert` active. For a
/// replacement, only the filter's `_id` is kept. `_id` is moved first when present; the caller
/// generates one when it is absent.
pub fn upsert_seed(
    filter_equalities: &[(String, RawBson)],
    update: &Update,
) -> Result<RawDocumentBuf, CommandError> {
    let mut seed = RawDocumentBuf::new();
    match &update.kind {
        Kind::Operators(_) => {
            // mongod keeps the equalities in a map ordered by path.
            let mut sorted: Vec<&(String, RawBson)> = Vec::new();
            for eq in filter_equalities {
                check_equality_conflict(&sorted, &eq.0)?;
                let pos = sorted.partition_point(|e| e.0 < eq.0);
                sorted.insert(pos, eq);
            }
            for (path, value) in sorted {
                let mut node = ObjectNode::default();
                node.insert(path, Op::Set(value.clone()))?;
                let ctx = Ctx {
                    id: None,
                    insert: true,
                };
                seed = node.apply_to_doc(&seed, false, ctx)?;
            }
        }
        Kind::Replacement(_) => {
            for (path, value) in filter_equalities {
                if path == "_id" {
                    seed = RawDocumentBuf::new();
                    seed.append(bson::raw::cstr!("_id"), value.clone());
                } else if path.starts_with("_id.") {
                    return Err(CommandError::new(
                        ErrorCode::NotExactValueField,
                        format!(
                            "field at '_id' must be exactly specified, field at sub-path \
                             '{path}'found"
                        ),
                    ));
                }
            }
        }
    }
    let out = update.apply_with(&seed, true)?.unwrap_or(seed);
    let out = id_first(&out)?;
    check_for_storage(&out)?;
    Ok(out)
}

/// mongod's `checkEqualityConflicts`: a path equal to, or below, one already seeded.
fn check_equality_conflict(seen: &[&(String, RawBson)], path: &str) -> Result<(), CommandError> {
    let parts: Vec<&str> = path.split('.').collect();
    for i in (1..=parts.len()).rev() {
        let prefix = parts[..i].join(".");
        if seen.iter().any(|e| e.0 == prefix) {
            let msg = if i < parts.len() {
                format!(
                    "cannot infer query fields to set, both paths '{path}' and '{prefix}' are \
                     matched"
                )
            } else {
                format!("cannot infer query fields to set, path '{path}' is matched twice")
            };
            return Err(CommandError::new(ErrorCode::NotSingleValueField, msg));
        }
    }
    Ok(())
}

/// Moves `_id` to the front.
fn id_first(doc: &RawDocument) -> Result<RawDocumentBuf, CommandError> {
    let mut out = RawDocumentBuf::new();
    if let Some(id) = doc.get("_id").map_err(|e| invalid_bson(&e))? {
        out.append(bson::raw::cstr!("_id"), id);
    }
    for item in doc {
        let (k, v) = item.map_err(|e| invalid_bson(&e))?;
        if k.as_str() != "_id" {
            out.append(k, v);
        }
    }
    Ok(out)
}

fn dollar_prefixed(name: &str) -> CommandError {
    CommandError::new(
        ErrorCode::DollarPrefixedFieldName,
        format!(
            "The dollar ($) prefixed field '{name}' in '{name}' is not allowed in the context of \
             an update's replacement document. Consider using an aggregation pipeline with \
             $replaceWith."
        ),
    )
}

/// A replacement may not have `$`-prefixed top-level fields (its first field has none, or it
/// would be an operator update).
fn check_replacement(r: &RawDocument) -> Result<(), CommandError> {
    for item in r {
        let (k, _) = item.map_err(|e| invalid_bson(&e))?;
        if k.as_str().starts_with('$') {
            return Err(dollar_prefixed(k.as_str()));
        }
    }
    Ok(())
}

/// The storage checks mongod runs on an updated document: no `$`-prefixed top-level field and
/// an `_id` of a storable type.
fn check_for_storage(doc: &RawDocument) -> Result<(), CommandError> {
    for item in doc {
        let (k, v) = item.map_err(|e| invalid_bson(&e))?;
        if k.as_str().starts_with('$') {
            return Err(dollar_prefixed(k.as_str()));
        }
        if k.as_str() == "_id"
            && matches!(
                v,
                RawBsonRef::RegularExpression(_) | RawBsonRef::Array(_) | RawBsonRef::Undefined
            )
        {
            return Err(CommandError::new(
                ErrorCode::InvalidIdField,
                format!(
                    "The '_id' value cannot be of type {}",
                    type_name(v.element_type())
                ),
            ));
        }
    }
    Ok(())
}

/// A replacement keeps the original `_id` (first), which it may repeat but not change.
fn replace(doc: &RawDocument, r: &RawDocument) -> Result<RawDocumentBuf, CommandError> {
    let old_id = doc.get("_id").map_err(|e| invalid_bson(&e))?;
    let new_id = r.get("_id").map_err(|e| invalid_bson(&e))?;
    if let (Some(old), Some(new)) = (old_id, new_id)
        && compare(old, new) != Ordering::Equal
    {
        return Err(CommandError::new(
            ErrorCode::ImmutableField,
            format!(
                "After applying the update, the (immutable) field '_id' was found to have been \
                 altered to {}",
                display::element("_id", new)
            ),
        ));
    }
    let mut out = RawDocumentBuf::new();
    if let Some(id) = old_id.or(new_id) {
        out.append(bson::raw::cstr!("_id"), id);
    }
    for item in r {
        let (k, v) = item.map_err(|e| invalid_bson(&e))?;
        if k.as_str() != "_id" {
            out.append(k, v);
        }
    }
    check_for_storage(&out)?;
    Ok(out)
}

/// mongod's `fieldchecker::isUpdatable`, plus positional paths, which Ebb does not support yet.
fn check_update_path(path: &str) -> Result<(), CommandError> {
    if path.is_empty() {
        return Err(CommandError::new(
            ErrorCode::EmptyFieldName,
            "An empty update path is not valid.",
        ));
    }
    if path.split('.').any(str::is_empty) {
        return Err(CommandError::new(
            ErrorCode::EmptyFieldName,
            format!("The update path '{path}' contains an empty field name, which is not allowed."),
        ));
    }
    if path
        .split('.')
        .any(|p| p == "$" || (p.starts_with("$[") && p.ends_with(']')))
    {
        return Err(not_implemented("positional update operators"));
    }
    Ok(())
}

/// Per-operator argument checks made at parse time.
fn check_argument(op: &str, path: &str, arg: RawBsonRef<'_>) -> Result<(), CommandError> {
    let verb = match op {
        "$inc" => "increment",
        "$mul" => "multiply",
        _ => return Ok(()),
    };
    match arg {
        RawBsonRef::Int32(_) | RawBsonRef::Int64(_) | RawBsonRef::Double(_) => Ok(()),
        RawBsonRef::Decimal128(_) => Err(not_implemented("decimal128 arithmetic")),
        _ => Err(CommandError::type_mismatch(format!(
            "Cannot {verb} with non-numeric argument: {{{}}}",
            display::element(path, arg)
        ))),
    }
}

impl ObjectNode {
    fn position(&self, name: &str) -> Result<usize, usize> {
        self.children
            .binary_search_by(|(k, _)| k.as_str().cmp(name))
    }

    /// mongod's `UpdateObjectNode::parseAndMerge`: adds a leaf at `path`, rejecting paths that
    /// overlap one already present.
    fn insert(&mut self, path: &str, op: Op) -> Result<(), CommandError> {
        let conflict = |at: &str| {
            CommandError::new(
                ErrorCode::ConflictingUpdateOperators,
                format!("Updating the path '{path}' would create a conflict at '{at}'"),
            )
        };
        let parts: Vec<&str> = path.split('.').collect();
        let mut node = self;
        for (i, part) in parts.iter().enumerate() {
            let last = i + 1 == parts.len();
            match node.position(part) {
                Ok(_) if last => return Err(conflict(path)),
                Ok(idx) => match &mut node.children[idx].1 {
                    UpdateNode::Object(next) => node = next,
                    UpdateNode::Leaf(_) => return Err(conflict(&parts[..=i].join("."))),
                },
                Err(idx) if last => {
                    let leaf = Leaf {
                        op,
                        path: path.to_owned(),
                    };
                    node.children
                        .insert(idx, ((*part).to_owned(), UpdateNode::Leaf(leaf)));
                    return Ok(());
                }
                Err(idx) => {
                    node.children.insert(
                        idx,
                        (
                            (*part).to_owned(),
                            UpdateNode::Object(ObjectNode::default()),
                        ),
                    );
                    let UpdateNode::Object(next) = &mut node.children[idx].1 else {
                        unreachable!("just inserted an object node");
                    };
                    node = next;
                }
            }
        }
        Ok(())
    }

    /// Applies the children to a document. `top` marks the root (where `_id` is immutable).
    fn apply_to_doc(
        &self,
        doc: &RawDocument,
        top: bool,
        ctx: Ctx<'_>,
    ) -> Result<RawDocumentBuf, CommandError> {
        let mut out = RawDocumentBuf::new();
        let mut present = vec![false; self.children.len()];
        for item in doc {
            let (k, v) = item.map_err(|e| invalid_bson(&e))?;
            let Ok(idx) = self.position(k.as_str()) else {
                out.append(k, v);
                continue;
            };
            present[idx] = true;
            let child = &self.children[idx].1;
            let new = child.apply_existing(v, k.as_str(), false, ctx)?;
            if top
                && k.as_str() == "_id"
                && !new
                    .as_ref()
                    .is_some_and(|n| binary_equal(v, n.as_raw_bson_ref()))
            {
                return Err(CommandError::new(
                    ErrorCode::ImmutableField,
                    format!(
                        "Performing an update on the path '{}' would modify the immutable field \
                         '_id'",
                        child.first_path()
                    ),
                ));
            }
            if let Some(new) = new {
                out.append(k, new);
            }
        }
        for ((name, child), seen) in self.children.iter().zip(present) {
            if seen {
                continue;
            }
            if let Some(new) = child.create(ctx)? {
                out.append(cstring(name)?, new);
            }
        }
        Ok(out)
    }

    /// Applies the children to an array: numeric names index it.
    fn apply_to_array(
        &self,
        name: &str,
        arr: &bson::RawArray,
        ctx: Ctx<'_>,
    ) -> Result<RawArrayBuf, CommandError> {
        let mut items: Vec<RawBson> = Vec::new();
        for item in arr {
            items.push(item.map_err(|e| invalid_bson(&e))?.into());
        }
        for (key, child) in &self.children {
            let Some(idx) = numeric(key) else {
                if child.creates(ctx) {
                    return Err(cannot_create(key, name, RawBsonRef::Array(arr)));
                }
                continue;
            };
            if let Some(existing) = items.get(idx) {
                let new = child.apply_existing(existing.as_raw_bson_ref(), key, true, ctx)?;
                items[idx] = new.unwrap_or(RawBson::Null);
            } else if let Some(new) = child.create(ctx)? {
                if idx - items.len() > MAX_PADDING {
                    return Err(CommandError::new(
                        ErrorCode::CannotBackfillArray,
                        format!("can't backfill more than {MAX_PADDING} elements"),
                    ));
                }
                items.resize(idx, RawBson::Null);
                items.push(new);
            }
        }
        let mut out = RawArrayBuf::new();
        for item in items {
            out.push(item);
        }
        Ok(out)
    }

    /// The first child (in apply order) that would create a field, if any.
    fn first_creating(&self, ctx: Ctx<'_>) -> Option<&str> {
        self.children
            .iter()
            .find(|(_, c)| c.creates(ctx))
            .map(|(k, _)| k.as_str())
    }
}

impl UpdateNode {
    /// The new value for an existing field `name` (`None`: remove it).
    fn apply_existing(
        &self,
        v: RawBsonRef<'_>,
        name: &str,
        in_array: bool,
        ctx: Ctx<'_>,
    ) -> Result<Option<RawBson>, CommandError> {
        match self {
            UpdateNode::Leaf(leaf) => leaf.apply_existing(v, name, in_array, ctx),
            UpdateNode::Object(node) => match v {
                RawBsonRef::Document(d) => {
                    Ok(Some(RawBson::Document(node.apply_to_doc(d, false, ctx)?)))
                }
                RawBsonRef::Array(a) => {
                    Ok(Some(RawBson::Array(node.apply_to_array(name, a, ctx)?)))
                }
                scalar => match node.first_creating(ctx) {
                    Some(part) => Err(cannot_create(part, name, scalar)),
                    None => Ok(Some(scalar.into())),
                },
            },
        }
    }

    /// The value for a field that does not exist yet (`None`: leave it absent).
    fn create(&self, ctx: Ctx<'_>) -> Result<Option<RawBson>, CommandError> {
        match self {
            UpdateNode::Leaf(leaf) => Ok(leaf.create(ctx)),
            UpdateNode::Object(node) => {
                let mut out = RawDocumentBuf::new();
                let mut any = false;
                for (name, child) in &node.children {
                    if let Some(v) = child.create(ctx)? {
                        out.append(cstring(name)?, v);
                        any = true;
                    }
                }
                Ok(any.then_some(RawBson::Document(out)))
            }
        }
    }

    /// Whether applying to a missing field would create it.
    fn creates(&self, ctx: Ctx<'_>) -> bool {
        match self {
            UpdateNode::Leaf(leaf) => match leaf.op {
                Op::Unset => false,
                Op::SetOnInsert(_) => ctx.insert,
                _ => true,
            },
            UpdateNode::Object(node) => node.first_creating(ctx).is_some(),
        }
    }

    /// The path of the first leaf below, for messages.
    fn first_path(&self) -> &str {
        match self {
            UpdateNode::Leaf(leaf) => &leaf.path,
            UpdateNode::Object(node) => node.children.first().map_or("", |(_, c)| c.first_path()),
        }
    }
}

impl Leaf {
    fn apply_existing(
        &self,
        v: RawBsonRef<'_>,
        name: &str,
        in_array: bool,
        ctx: Ctx<'_>,
    ) -> Result<Option<RawBson>, CommandError> {
        Ok(Some(match &self.op {
            Op::Set(new) => new.clone(),
            Op::SetOnInsert(new) if ctx.insert => new.clone(),
            Op::Unset if in_array => RawBson::Null,
            Op::Unset => return Ok(None),
            Op::Inc(by) => arithmetic(v, by.as_raw_bson_ref(), name, Arith::Add, ctx)?,
            Op::Mul(by) => arithmetic(v, by.as_raw_bson_ref(), name, Arith::Mul, ctx)?,
            Op::Min(x) if compare(x.as_raw_bson_ref(), v) == Ordering::Less => x.clone(),
            Op::Max(x) if compare(x.as_raw_bson_ref(), v) == Ordering::Greater => x.clone(),
            Op::SetOnInsert(_) | Op::Min(_) | Op::Max(_) => v.into(),
        }))
    }

    fn create(&self, ctx: Ctx<'_>) -> Option<RawBson> {
        match &self.op {
            Op::Set(v) | Op::Inc(v) | Op::Min(v) | Op::Max(v) => Some(v.clone()),
            Op::SetOnInsert(v) => ctx.insert.then(|| v.clone()),
            Op::Unset => None,
            // mongod multiplies the argument by 0, keeping its type.
            Op::Mul(v) => Some(match v {
                RawBson::Int32(_) => RawBson::Int32(0),
                RawBson::Int64(_) => RawBson::Int64(0),
                _ => RawBson::Double(0.0),
            }),
        }
    }
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
    ctx: Ctx<'_>,
) -> Result<RawBson, CommandError> {
    let (op_name, i32_op, i64_op, f64_op): ArithOps = match op {
        Arith::Add => ("$inc", |a, b| a + b, i64::checked_add, |a, b| a + b),
        Arith::Mul => ("$mul", |a, b| a * b, i64::checked_mul, |a, b| a * b),
    };
    let id = || {
        ctx.id
            .map_or_else(|| "no id".to_owned(), |id| display::element("_id", id))
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
                        id()
                    )));
                }
            },
            _ => match (
                super::compare::number_as_f64(v),
                super::compare::number_as_f64(by),
            ) {
                (Some(a), Some(b)) => RawBson::Double(f64_op(a, b)),
                _ => {
                    return Err(CommandError::type_mismatch(format!(
                        "Cannot apply {op_name} to a value of non-numeric type. {{{}}} has the \
                         field '{name}' of non-numeric type {}",
                        id(),
                        type_name(v.element_type())
                    )));
                }
            },
        },
    };
    Ok(result)
}

/// mongod's `createPathAt` error for a path that cannot continue below `name: value`.
fn cannot_create(part: &str, name: &str, value: RawBsonRef<'_>) -> CommandError {
    CommandError::new(
        ErrorCode::PathNotViable,
        format!(
            "Cannot create field '{part}' in element {{{}}}",
            display::element(name, value)
        ),
    )
}

/// An array index in an update path: decimal digits (mongod's `isNumeric`).
fn numeric(part: &str) -> Option<usize> {
    if !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit()) {
        part.parse().ok()
    } else {
        None
    }
}

fn cstring(name: &str) -> Result<CString, CommandError> {
    CString::try_from(name).map_err(|e| invalid_bson(&e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::rawdoc;

    fn apply(
        update: &RawDocumentBuf,
        doc: &RawDocumentBuf,
    ) -> Result<Option<RawDocumentBuf>, CommandError> {
        Update::compile(update)?.apply(doc)
    }

    #[test]
    #[expect(clippy::too_many_lines, reason = "one table")]
    fn operator_table() -> Result<(), CommandError> {
        let cases: Vec<(RawDocumentBuf, RawDocumentBuf, Option<RawDocumentBuf>)> = vec![
            (
                rawdoc! {"$set": {"a": 2}},
                rawdoc! {"_id": 1, "a": 1},
                Some(rawdoc! {"_id": 1, "a": 2}),
            ),
            (rawdoc! {"$set": {"a": 1}}, rawdoc! {"_id": 1, "a": 1}, None),
            (
                rawdoc! {"$set": {"a": 1.0}},
                rawdoc! {"_id": 1, "a": 1},
                Some(rawdoc! {"_id": 1, "a": 1.0}),
            ),
            (rawdoc! {"$set": {}}, rawdoc! {"_id": 1}, None),
            (
                rawdoc! {"$set": {"b": 1, "a": 2}},
                rawdoc! {"_id": 1, "z": 0},
                Some(rawdoc! {"_id": 1, "z": 0, "a": 2, "b": 1}),
            ),
            (
                rawdoc! {"$set": {"a.b.c": 1}},
                rawdoc! {"_id": 1},
                Some(rawdoc! {"_id": 1, "a": {"b": {"c": 1}}}),
            ),
            (
                rawdoc! {"$set": {"a.b": 1}},
                rawdoc! {"_id": 1, "a": {"c": 0}},
                Some(rawdoc! {"_id": 1, "a": {"c": 0, "b": 1}}),
            ),
            (
                rawdoc! {"$set": {"a.1": 9}},
                rawdoc! {"_id": 1, "a": [1, 2, 3]},
                Some(rawdoc! {"_id": 1, "a": [1, 9, 3]}),
            ),
            (
                rawdoc! {"$set": {"a.3": 9}},
                rawdoc! {"_id": 1, "a": [1]},
                Some(rawdoc! {"_id": 1, "a": [1, null, null, 9]}),
            ),
            (
                rawdoc! {"$set": {"a.0.b": 9}},
                rawdoc! {"_id": 1, "a": [{"b": 1}]},
                Some(rawdoc! {"_id": 1, "a": [{"b": 9}]}),
            ),
            (
                rawdoc! {"$set": {"a.0": 9}},
                rawdoc! {"_id": 1},
                Some(rawdoc! {"_id": 1, "a": {"0": 9}}),
            ),
            (
                rawdoc! {"$set": {"a.0": 9}},
                rawdoc! {"_id": 1, "a": {"0": 1}},
                Some(rawdoc! {"_id": 1, "a": {"0": 9}}),
            ),
            (rawdoc! {"$set": {"_id": 1}}, rawdoc! {"_id": 1}, None),
            (
                rawdoc! {"$unset": {"a": ""}},
                rawdoc! {"_id": 1, "a": 1, "b": 2},
                Some(rawdoc! {"_id": 1, "b": 2}),
            ),
            (
                rawdoc! {"$unset": {"x": 1}},
                rawdoc! {"_id": 1, "a": 1},
                None,
            ),
            (
                rawdoc! {"$unset": {"a.b": 1}},
                rawdoc! {"_id": 1, "a": 1},
                None,
            ),
            (
                rawdoc! {"$unset": {"a.b": 1}},
                rawdoc! {"_id": 1, "a": [1]},
                None,
            ),
            (
                rawdoc! {"$unset": {"a.0": 1}},
                rawdoc! {"_id": 1, "a": [1, 2]},
                Some(rawdoc! {"_id": 1, "a": [null, 2]}),
            ),
            (
                rawdoc! {"$unset": {"a.b": 1}},
                rawdoc! {"_id": 1, "a": {"b": 1, "c": 1}},
                Some(rawdoc! {"_id": 1, "a": {"c": 1}}),
            ),
            (
                rawdoc! {"$inc": {"a": 1}},
                rawdoc! {"_id": 1, "a": 1},
                Some(rawdoc! {"_id": 1, "a": 2}),
            ),
            (
                rawdoc! {"$inc": {"a": 1}},
                rawdoc! {"_id": 1},
                Some(rawdoc! {"_id": 1, "a": 1}),
            ),
            (rawdoc! {"$inc": {"a": 0}}, rawdoc! {"_id": 1, "a": 5}, None),
            (
                rawdoc! {"$inc": {"a": 1}},
                rawdoc! {"_id": 1, "a": i32::MAX},
                Some(rawdoc! {"_id": 1, "a": 2_147_483_648_i64}),
            ),
            (
                rawdoc! {"$inc": {"a": 1_i64}},
                rawdoc! {"_id": 1, "a": 1},
                Some(rawdoc! {"_id": 1, "a": 2_i64}),
            ),
            (
                rawdoc! {"$inc": {"a": 0.5}},
                rawdoc! {"_id": 1, "a": 1},
                Some(rawdoc! {"_id": 1, "a": 1.5}),
            ),
            (
                rawdoc! {"$inc": {"a": 1}},
                rawdoc! {"_id": 1, "a": 1.5},
                Some(rawdoc! {"_id": 1, "a": 2.5}),
            ),
            (
                rawdoc! {"$inc": {"a.b": 2, "c": 1}},
                rawdoc! {"_id": 1, "a": {"b": 1}},
                Some(rawdoc! {"_id": 1, "a": {"b": 3}, "c": 1}),
            ),
            (
                rawdoc! {"$inc": {"a.1": 2}},
                rawdoc! {"_id": 1, "a": [1, 1]},
                Some(rawdoc! {"_id": 1, "a": [1, 3]}),
            ),
            (
                rawdoc! {"$mul": {"a": 3}},
                rawdoc! {"_id": 1, "a": 2},
                Some(rawdoc! {"_id": 1, "a": 6}),
            ),
            (
                rawdoc! {"$mul": {"a": 3_i64}},
                rawdoc! {"_id": 1},
                Some(rawdoc! {"_id": 1, "a": 0_i64}),
            ),
            (
                rawdoc! {"$min": {"a": 1}},
                rawdoc! {"_id": 1, "a": 2},
                Some(rawdoc! {"_id": 1, "a": 1}),
            ),
            (rawdoc! {"$min": {"a": 3}}, rawdoc! {"_id": 1, "a": 2}, None),
            (
                rawdoc! {"$max": {"a": "x"}},
                rawdoc! {"_id": 1, "a": 2},
                Some(rawdoc! {"_id": 1, "a": "x"}),
            ),
            (rawdoc! {"$setOnInsert": {"a": 1}}, rawdoc! {"_id": 1}, None),
            (
                rawdoc! {"$set": {"a": 1}, "$unset": {"b": 1}},
                rawdoc! {"_id": 1, "b": 0},
                Some(rawdoc! {"_id": 1, "a": 1}),
            ),
            (
                rawdoc! {"$set": {"a.$x": 1}},
                rawdoc! {"_id": 1},
                Some(rawdoc! {"_id": 1, "a": {"$x": 1}}),
            ),
        ];
        for (update, doc, want) in cases {
            assert_eq!(apply(&update, &doc)?, want, "{update:?} on {doc:?}");
        }
        Ok(())
    }

    #[test]
    fn replacement_table() -> Result<(), CommandError> {
        let cases: Vec<(RawDocumentBuf, RawDocumentBuf, Option<RawDocumentBuf>)> = vec![
            (
                rawdoc! {"b": 2},
                rawdoc! {"_id": 1, "a": 1},
                Some(rawdoc! {"_id": 1, "b": 2}),
            ),
            (
                rawdoc! {},
                rawdoc! {"_id": 1, "a": 1},
                Some(rawdoc! {"_id": 1}),
            ),
            (
                rawdoc! {"b": 2, "_id": 1},
                rawdoc! {"_id": 1, "a": 1},
                Some(rawdoc! {"_id": 1, "b": 2}),
            ),
            (
                rawdoc! {"b": 2, "_id": 1.0},
                rawdoc! {"_id": 1, "b": 2},
                None,
            ),
            (rawdoc! {"a": 1}, rawdoc! {"_id": 1, "a": 1}, None),
        ];
        for (update, doc, want) in cases {
            assert_eq!(apply(&update, &doc)?, want, "{update:?} on {doc:?}");
        }
        assert!(Update::compile(&rawdoc! {"a": 1})?.is_replacement());
        assert!(!Update::compile(&rawdoc! {"$set": {"a": 1}})?.is_replacement());
        Ok(())
    }

    #[test]
    #[expect(clippy::too_many_lines, reason = "one table")]
    fn errors() {
        let cases: Vec<(RawDocumentBuf, RawDocumentBuf, ErrorCode, &str)> = vec![
            (
                rawdoc! {"$set": 1},
                rawdoc! {},
                ErrorCode::FailedToParse,
                "Modifiers operate on fields but we found type int instead. For example: {$mod: {<field>: ...}} not {$set: 1}",
            ),
            (
                rawdoc! {"$set": "s"},
                rawdoc! {},
                ErrorCode::FailedToParse,
                "Modifiers operate on fields but we found type string instead. For example: {$mod: {<field>: ...}} not {$set: \"s\"}",
            ),
            (
                rawdoc! {"$set": []},
                rawdoc! {},
                ErrorCode::FailedToParse,
                "Modifiers operate on fields but we found type array instead. For example: {$mod: {<field>: ...}} not {$set: []}",
            ),
            (
                rawdoc! {"$foo": {"a": 1}},
                rawdoc! {},
                ErrorCode::FailedToParse,
                "Unknown modifier: $foo. Expected a valid update modifier or pipeline-style update specified as an array",
            ),
            (
                rawdoc! {"$set": {"a": 1}, "b": 1},
                rawdoc! {},
                ErrorCode::FailedToParse,
                "Unknown modifier: b. Expected a valid update modifier or pipeline-style update specified as an array",
            ),
            (
                rawdoc! {"b": 1, "$set": {"a": 1}},
                rawdoc! {},
                ErrorCode::DollarPrefixedFieldName,
                "The dollar ($) prefixed field '$set' in '$set' is not allowed in the context of an update's replacement document. Consider using an aggregation pipeline with $replaceWith.",
            ),
            (
                rawdoc! {"$set": {"a": 1, "a.b": 1}},
                rawdoc! {},
                ErrorCode::ConflictingUpdateOperators,
                "Updating the path 'a.b' would create a conflict at 'a'",
            ),
            (
                rawdoc! {"$set": {"a.b": 1}, "$inc": {"a": 1}},
                rawdoc! {},
                ErrorCode::ConflictingUpdateOperators,
                "Updating the path 'a' would create a conflict at 'a'",
            ),
            (
                rawdoc! {"$set": {"a": 1}, "$unset": {"a": 1}},
                rawdoc! {},
                ErrorCode::ConflictingUpdateOperators,
                "Updating the path 'a' would create a conflict at 'a'",
            ),
            (
                rawdoc! {"$set": {"": 1}},
                rawdoc! {},
                ErrorCode::EmptyFieldName,
                "An empty update path is not valid.",
            ),
            (
                rawdoc! {"$set": {"a..b": 1}},
                rawdoc! {},
                ErrorCode::EmptyFieldName,
                "The update path 'a..b' contains an empty field name, which is not allowed.",
            ),
            (
                rawdoc! {"$inc": {"a": "x"}},
                rawdoc! {},
                ErrorCode::TypeMismatch,
                "Cannot increment with non-numeric argument: {a: \"x\"}",
            ),
            (
                rawdoc! {"$mul": {"a": null}},
                rawdoc! {},
                ErrorCode::TypeMismatch,
                "Cannot multiply with non-numeric argument: {a: null}",
            ),
            (
                rawdoc! {"$set": {"_id": 2}},
                rawdoc! {"_id": 1},
                ErrorCode::ImmutableField,
                "Performing an update on the path '_id' would modify the immutable field '_id'",
            ),
            (
                rawdoc! {"$set": {"_id": 1.0}},
                rawdoc! {"_id": 1},
                ErrorCode::ImmutableField,
                "Performing an update on the path '_id' would modify the immutable field '_id'",
            ),
            (
                rawdoc! {"$unset": {"_id": 1}},
                rawdoc! {"_id": 1},
                ErrorCode::ImmutableField,
                "Performing an update on the path '_id' would modify the immutable field '_id'",
            ),
            (
                rawdoc! {"$set": {"_id.x": 2}},
                rawdoc! {"_id": {"x": 1}},
                ErrorCode::ImmutableField,
                "Performing an update on the path '_id.x' would modify the immutable field '_id'",
            ),
            (
                rawdoc! {"$inc": {"a": 1}},
                rawdoc! {"_id": 1, "a": "x"},
                ErrorCode::TypeMismatch,
                "Cannot apply $inc to a value of non-numeric type. {_id: 1} has the field 'a' of non-numeric type string",
            ),
            (
                rawdoc! {"$inc": {"a.0.b": 1}},
                rawdoc! {"_id": "i", "a": [{"b": null}]},
                ErrorCode::TypeMismatch,
                "Cannot apply $inc to a value of non-numeric type. {_id: \"i\"} has the field 'b' of non-numeric type null",
            ),
            (
                rawdoc! {"$inc": {"a": 1}},
                rawdoc! {"_id": 1, "a": i64::MAX},
                ErrorCode::BadValue,
                "Failed to apply $inc operations to current value ((NumberLong)9223372036854775807) for document {_id: 1}",
            ),
            (
                rawdoc! {"$inc": {"a": i64::MAX}},
                rawdoc! {"_id": 1, "a": 42},
                ErrorCode::BadValue,
                "Failed to apply $inc operations to current value ((NumberInt)42) for document {_id: 1}",
            ),
            (
                rawdoc! {"$set": {"a.b": 1}},
                rawdoc! {"_id": 1, "a": 5},
                ErrorCode::PathNotViable,
                "Cannot create field 'b' in element {a: 5}",
            ),
            (
                rawdoc! {"$set": {"a.b": 1}},
                rawdoc! {"_id": 1, "a": [{"b": 0}]},
                ErrorCode::PathNotViable,
                "Cannot create field 'b' in element {a: [ { b: 0 } ]}",
            ),
            (
                rawdoc! {"$set": {"a.b.c": 1}},
                rawdoc! {"_id": 1, "a": {"b": "x"}},
                ErrorCode::PathNotViable,
                "Cannot create field 'c' in element {b: \"x\"}",
            ),
            (
                rawdoc! {"$set": {"$x": 1}},
                rawdoc! {"_id": 1},
                ErrorCode::DollarPrefixedFieldName,
                "The dollar ($) prefixed field '$x' in '$x' is not allowed in the context of an update's replacement document. Consider using an aggregation pipeline with $replaceWith.",
            ),
            (
                rawdoc! {"_id": 2},
                rawdoc! {"_id": 1},
                ErrorCode::ImmutableField,
                "After applying the update, the (immutable) field '_id' was found to have been altered to _id: 2",
            ),
            (
                rawdoc! {"$set": {"a.2000000": 1}},
                rawdoc! {"_id": 1, "a": []},
                ErrorCode::CannotBackfillArray,
                "can't backfill more than 1500000 elements",
            ),
            (
                rawdoc! {"$set": {"a.$": 1}},
                rawdoc! {},
                ErrorCode::NotImplemented,
                "positional update operators is not supported by Ebb yet",
            ),
            (
                rawdoc! {"$push": {"a": 1}},
                rawdoc! {},
                ErrorCode::NotImplemented,
                "the $push update operator is not supported by Ebb yet",
            ),
        ];
        for (update, doc, code, msg) in cases {
            let err = apply(&update, &doc).unwrap_err();
            assert_eq!((err.code, err.errmsg.as_str()), (code, msg), "{update:?}");
        }
    }

    #[test]
    fn upserts() -> Result<(), CommandError> {
        let eq = |pairs: &[(&str, RawBson)]| -> Vec<(String, RawBson)> {
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), v.clone()))
                .collect()
        };
        let set = Update::compile(&rawdoc! {"$set": {"c": 1}, "$setOnInsert": {"d": 2}})?;
        assert_eq!(
            upsert_seed(
                &eq(&[
                    ("b", RawBson::Int32(1)),
                    ("_id", RawBson::Int32(7)),
                    ("a.x", RawBson::Int32(2))
                ]),
                &set
            )?,
            rawdoc! {"_id": 7, "a": {"x": 2}, "b": 1, "c": 1, "d": 2}
        );
        let inc = Update::compile(&rawdoc! {"$inc": {"n": 1}})?;
        assert_eq!(
            upsert_seed(&eq(&[("n", RawBson::Int32(5))]), &inc)?,
            rawdoc! {"n": 6}
        );
        let id_set = Update::compile(&rawdoc! {"$set": {"_id": 3}})?;
        assert_eq!(upsert_seed(&[], &id_set)?, rawdoc! {"_id": 3});
        let err = upsert_seed(&eq(&[("_id", RawBson::Int32(1))]), &id_set).unwrap_err();
        assert_eq!(err.code, ErrorCode::ImmutableField);
        let err = upsert_seed(
            &eq(&[("a", RawBson::Int32(1)), ("a.b", RawBson::Int32(1))]),
            &set,
        )
        .unwrap_err();
        assert_eq!(
            (err.code, err.errmsg.as_str()),
            (
                ErrorCode::NotSingleValueField,
                "cannot infer query fields to set, both paths 'a.b' and 'a' are matched"
            )
        );
        let err = upsert_seed(
            &eq(&[("a", RawBson::Int32(1)), ("a", RawBson::Int32(2))]),
            &set,
        )
        .unwrap_err();
        assert_eq!(
            err.errmsg,
            "cannot infer query fields to set, path 'a' is matched twice"
        );

        let repl = Update::compile(&rawdoc! {"x": 1})?;
        assert_eq!(
            upsert_seed(
                &eq(&[("a", RawBson::Int32(1)), ("_id", RawBson::Int32(9))]),
                &repl
            )?,
            rawdoc! {"_id": 9, "x": 1}
        );
        assert_eq!(
            upsert_seed(&eq(&[("a", RawBson::Int32(1))]), &repl)?,
            rawdoc! {"x": 1}
        );
        let err = upsert_seed(&eq(&[("_id.k", RawBson::Int32(1))]), &repl).unwrap_err();
        assert_eq!(err.code, ErrorCode::NotExactValueField);
        let repl_id = Update::compile(&rawdoc! {"x": 1, "_id": 2})?;
        assert_eq!(upsert_seed(&[], &repl_id)?, rawdoc! {"_id": 2, "x": 1});
        let bad_id = Update::compile(&rawdoc! {"_id": [1]})?;
        assert_eq!(
            upsert_seed(&[], &bad_id).unwrap_err().code,
            ErrorCode::InvalidIdField
        );
        Ok(())
    }
}
