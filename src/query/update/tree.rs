//! The update tree (mongod's `UpdateObjectNode`, `UpdateArrayNode` and leaves): built once at
//! compile time, where `ConflictingUpdateOperators` is detected, then walked along each
//! document, copying untouched fields as raw bytes.
//!
//! - An object node holds children by field name (kept sorted, the order mongod applies them
//!   in) and at most one positional child (`a.$`), which is applied under the query's matched
//!   array index, merged with a named child of the same name if there is one.
//! - An array node (`a.$[]`, `a.$[x]`) holds children by array filter identifier (`""` for
//!   `$[]`); each element gets the merge of the children whose filter it matches.
//! - Merging two leaves (`a.$[i]` and `a.$[j]` on one element) is the run-time conflict
//!   "Update created a conflict at 'a.0'".
//!
//! Existing fields keep their position; created fields are appended in field-name order.

use std::borrow::Cow;
use std::collections::BTreeSet;

use std::sync::Arc;

use bson::raw::CString;
use bson::{RawArray, RawArrayBuf, RawBson, RawBsonRef, RawDocument, RawDocumentBuf};

use super::Env;
use super::array_filters::ArrayFilters;
use super::log::Recorder;
use super::ops::{Absence, Op, array_values};
use crate::error::{CommandError, ErrorCode};
use crate::query::collation::Collation;
use crate::query::compare::binary_equal;
use crate::query::{display, invalid_bson};

/// How far `$set: {"a.N": …}` may pad an array with nulls (mongod's `kMaxPaddingAllowed`).
const MAX_PADDING: usize = 1_500_000;

/// An internal node's children.
#[derive(Debug, Clone, Default)]
pub(super) struct Node {
    /// Sorted by name (mongod keeps them in a `std::map`).
    children: Vec<(String, UpdateNode)>,
    /// The `$` child of an object node.
    positional: Option<Box<UpdateNode>>,
}

#[derive(Debug, Clone)]
pub(super) enum UpdateNode {
    Object(Node),
    Array(Node),
    Leaf(Leaf),
}

#[derive(Debug, Clone)]
pub(super) struct Leaf {
    pub(super) op: Op,
    /// The full dotted path as written, for messages.
    pub(super) path: String,
}

/// Where an existing element sits, for messages and for `$rename`'s array checks.
#[derive(Debug, Clone, Copy)]
pub(super) struct At<'p> {
    /// Its dotted path with array indexes resolved (`""` for the root document).
    pub(super) path: &'p str,
    /// Its field name (an index inside arrays).
    pub(super) name: &'p str,
    /// Whether it is an array element.
    pub(super) in_array: bool,
    /// The field name of the nearest enclosing array, if any.
    pub(super) array_above: Option<&'p str>,
    /// Whether it is the root document (where `_id` is immutable).
    pub(super) top: bool,
}

impl At<'static> {
    pub(super) fn root() -> Self {
        At {
            path: "",
            name: "",
            in_array: false,
            array_above: None,
            top: true,
        }
    }
}

/// A path that does not exist: mongod's `pathTaken` (the existing part) and `pathToCreate`.
#[derive(Debug, Clone)]
struct Absent<'p> {
    /// The deepest existing element when it cannot hold the path (a scalar, or an array reached
    /// with a field name); `None` when the path can be created there.
    blocker: Option<(&'p str, RawBsonRef<'p>)>,
    taken: &'p str,
    to_create: Vec<String>,
    /// The nearest array at or above the deepest existing element.
    array: Option<&'p str>,
}

impl Absent<'_> {
    fn full_path(&self) -> String {
        let mut out = self.taken.to_owned();
        for part in &self.to_create {
            if !out.is_empty() {
                out.push('.');
            }
            out.push_str(part);
        }
        out
    }

    fn child(&self, name: &str) -> Self {
        let mut next = self.clone();
        next.to_create.push(name.to_owned());
        next
    }
}

/// `a.$[]` or `a.$[x]` components (mongod's `isArrayFilterIdentifier`).
pub(super) fn is_array_filter_identifier(part: &str) -> bool {
    part.len() >= 3 && part.starts_with("$[") && part.ends_with(']')
}

pub(super) fn join(path: &str, name: &str) -> String {
    if path.is_empty() {
        name.to_owned()
    } else {
        format!("{path}.{name}")
    }
}

fn cstring(name: &str) -> Result<CString, CommandError> {
    CString::try_from(name).map_err(|e| invalid_bson(&e))
}

/// An array index in an update path: decimal digits (mongod's `isNumeric`).
fn numeric(part: &str) -> Option<usize> {
    if !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit()) {
        part.parse().ok()
    } else {
        None
    }
}

fn conflict_at(at: &str) -> CommandError {
    CommandError::new(
        ErrorCode::ConflictingUpdateOperators,
        format!("Update created a conflict at '{at}'"),
    )
}

fn cannot_create(part: &str, name: &str, value: RawBsonRef<'_>) -> CommandError {
    CommandError::new(
        ErrorCode::PathNotViable,
        format!(
            "Cannot create field '{part}' in element {{{}}}",
            display::element(name, value)
        ),
    )
}

/// The child name a path component gets: an array filter identifier (`$[x]` → `x`, and the
/// empty string for `$[]`), which must have a filter, or the component itself.
fn child_name(
    part: &str,
    position: usize,
    path: &str,
    filters: &ArrayFilters,
    found: &mut BTreeSet<String>,
) -> Result<String, CommandError> {
    if !is_array_filter_identifier(part) {
        return Ok(part.to_owned());
    }
    if position == 0 {
        return Err(CommandError::bad_value(format!(
            "Cannot have array filter identifier (i.e. '$[<id>]') element in the first position \
             in path '{path}'"
        )));
    }
    let identifier = &part[2..part.len() - 1];
    if !identifier.is_empty() {
        if !filters.contains(identifier) {
            return Err(CommandError::bad_value(format!(
                "No array filter found for identifier '{identifier}' in path '{path}'"
            )));
        }
        found.insert(identifier.to_owned());
    }
    Ok(identifier.to_owned())
}

impl Node {
    /// Prepares every operator below for comparing strings with `c` (see `Op::collate`).
    pub(super) fn collate(&mut self, c: &Arc<Collation>) {
        let nodes = self
            .children
            .iter_mut()
            .map(|(_, n)| n)
            .chain(self.positional.as_deref_mut());
        for node in nodes {
            match node {
                UpdateNode::Object(n) | UpdateNode::Array(n) => n.collate(c),
                UpdateNode::Leaf(leaf) => leaf.op.collate(c),
            }
        }
    }

    fn position(&self, name: &str) -> Result<usize, usize> {
        self.children
            .binary_search_by(|(k, _)| k.as_str().cmp(name))
    }

    fn get(&self, name: &str, object: bool) -> Option<&UpdateNode> {
        if object && name == "$" {
            return self.positional.as_deref();
        }
        self.position(name).ok().map(|i| &self.children[i].1)
    }

    fn get_mut(&mut self, name: &str, object: bool) -> Option<&mut UpdateNode> {
        if object && name == "$" {
            return self.positional.as_deref_mut();
        }
        match self.position(name) {
            Ok(i) => Some(&mut self.children[i].1),
            Err(_) => None,
        }
    }

    fn set(&mut self, name: String, child: UpdateNode, object: bool) {
        if object && name == "$" {
            self.positional = Some(Box::new(child));
        } else if let Err(i) = self.position(&name) {
            self.children.insert(i, (name, child));
        }
    }

    /// Whether a top-level child is `$`-prefixed (such a field needs the storage checks).
    pub(super) fn has_dollar_child(&self) -> bool {
        self.children.iter().any(|(k, _)| k.starts_with('$'))
    }

    /// mongod's `UpdateObjectNode::parseAndMerge` below this (object) root: adds `leaf` at its
    /// path, creating object nodes (array nodes before `$[…]` components), rejecting paths that
    /// overlap one already present. Records the array filter identifiers used in `found`.
    pub(super) fn insert(
        &mut self,
        leaf: Leaf,
        filters: &ArrayFilters,
        found: &mut BTreeSet<String>,
    ) -> Result<(), CommandError> {
        let path = leaf.path.clone();
        let parts: Vec<&str> = path.split('.').collect();
        let conflict = |at: &str| {
            CommandError::new(
                ErrorCode::ConflictingUpdateOperators,
                format!("Updating the path '{path}' would create a conflict at '{at}'"),
            )
        };
        let mut node = self;
        let mut object = true;
        let last = parts.len() - 1;
        for i in 0..last {
            let name = child_name(parts[i], i, &path, filters, found)?;
            let want_array = is_array_filter_identifier(parts[i + 1]);
            if node.get(&name, object).is_none() {
                let child = if want_array {
                    UpdateNode::Array(Node::default())
                } else {
                    UpdateNode::Object(Node::default())
                };
                node.set(name.clone(), child, object);
            }
            match node.get_mut(&name, object) {
                Some(UpdateNode::Object(next)) if !want_array => {
                    node = next;
                    object = true;
                }
                Some(UpdateNode::Array(next)) if want_array => {
                    node = next;
                    object = false;
                }
                _ => return Err(conflict(&parts[..=i].join("."))),
            }
        }
        let name = child_name(parts[last], last, &path, filters, found)?;
        if node.get(&name, object).is_some() {
            return Err(conflict(&path));
        }
        node.set(name, UpdateNode::Leaf(leaf), object);
        Ok(())
    }

    /// The children to apply: with the positional child merged in under the matched index.
    fn effective(
        &self,
        env: &Env<'_>,
        path: &str,
    ) -> Result<Cow<'_, [(String, UpdateNode)]>, CommandError> {
        let Some(positional) = &self.positional else {
            return Ok(Cow::Borrowed(&self.children));
        };
        let Some(matched) = env.matched else {
            return Err(CommandError::bad_value(
                "The positional operator did not find the match needed from the query.",
            ));
        };
        let mut children = self.children.clone();
        match self.position(matched) {
            Ok(i) => {
                let merged = merge(positional, &children[i].1, &join(path, matched))?;
                children[i].1 = merged;
            }
            Err(i) => children.insert(i, (matched.to_owned(), (**positional).clone())),
        }
        Ok(Cow::Owned(children))
    }

    /// Applies this object node to a document at `at`.
    pub(super) fn apply_to_doc(
        &self,
        doc: &RawDocument,
        at: At<'_>,
        env: &Env<'_>,
    ) -> Result<RawDocumentBuf, CommandError> {
        let children = self.effective(env, at.path)?;
        let mut out = RawDocumentBuf::new();
        let mut present = vec![false; children.len()];
        for item in doc {
            let (k, v) = item.map_err(|e| invalid_bson(&e))?;
            let Ok(idx) = children.binary_search_by(|(n, _)| n.as_str().cmp(k.as_str())) else {
                out.append(k, v);
                continue;
            };
            present[idx] = true;
            let child = &children[idx].1;
            let path = join(at.path, k.as_str());
            let child_at = At {
                path: &path,
                name: k.as_str(),
                in_array: false,
                array_above: at.array_above,
                top: false,
            };
            let new = child.apply_existing(v, child_at, env)?;
            if at.top
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
        for ((name, child), seen) in children.iter().zip(present) {
            if seen {
                continue;
            }
            let absent = Absent {
                blocker: None,
                taken: at.path,
                to_create: vec![name.clone()],
                array: at.array_above,
            };
            if let Some(new) = child.apply_absent(&absent, env)? {
                out.append(cstring(name)?, new);
            }
        }
        Ok(out)
    }

    /// Applies this object node to an array at `at`: numeric names index it.
    fn apply_to_array(
        &self,
        arr: &RawArray,
        at: At<'_>,
        env: &Env<'_>,
    ) -> Result<RawArrayBuf, CommandError> {
        let children = self.effective(env, at.path)?;
        let mut items = array_values(arr)?;
        for (key, child) in children.iter() {
            let Some(idx) = numeric(key) else {
                let absent = Absent {
                    blocker: Some((at.name, RawBsonRef::Array(arr))),
                    taken: at.path,
                    to_create: vec![key.clone()],
                    array: Some(at.name),
                };
                child.apply_absent(&absent, env)?;
                continue;
            };
            if idx < items.len() {
                let path = join(at.path, key);
                let child_at = At {
                    path: &path,
                    name: key,
                    in_array: true,
                    array_above: Some(at.name),
                    top: false,
                };
                let new = child.apply_existing(items[idx].as_raw_bson_ref(), child_at, env)?;
                items[idx] = new.unwrap_or(RawBson::Null);
                continue;
            }
            let absent = Absent {
                blocker: None,
                taken: at.path,
                to_create: vec![key.clone()],
                array: Some(at.name),
            };
            if let Some(new) = child.apply_absent(&absent, env)? {
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
        Ok(items.into_iter().collect())
    }

    /// Applies this array node (`$[]`, `$[x]`) to the elements of an array at `at`.
    fn apply_to_elements(
        &self,
        arr: &RawArray,
        at: At<'_>,
        env: &Env<'_>,
    ) -> Result<RawArrayBuf, CommandError> {
        let mut out = RawArrayBuf::new();
        // For the oplog entry: where this node's records start, how many elements matched,
        // which changed (an element changed when its children recorded something).
        let log_mark = env.log.map(Recorder::mark);
        let (mut matched, mut n_changed, mut changed) = (0usize, 0usize, None);
        for (i, item) in arr.into_iter().enumerate() {
            let v = item.map_err(|e| invalid_bson(&e))?;
            let mut applicable: Vec<&UpdateNode> = Vec::new();
            for (identifier, child) in &self.children {
                if identifier.is_empty() || env.filters.matches(identifier, v) {
                    applicable.push(child);
                }
            }
            let Some((first, rest)) = applicable.split_first() else {
                out.push(v);
                continue;
            };
            matched += 1;
            let element_mark = env.log.map(Recorder::mark);
            let key = i.to_string();
            let path = join(at.path, &key);
            let merged;
            let node = if rest.is_empty() {
                *first
            } else {
                let mut m = (*first).clone();
                for other in rest {
                    m = merge(&m, other, &path)?;
                }
                merged = m;
                &merged
            };
            let child_at = At {
                path: &path,
                name: &key,
                in_array: true,
                array_above: Some(at.name),
                top: false,
            };
            out.push(
                node.apply_existing(v, child_at, env)?
                    .unwrap_or(RawBson::Null),
            );
            if let (Some(log), Some(element_mark)) = (env.log, element_mark)
                && log.mark() > element_mark
            {
                n_changed += 1;
                changed = Some(i);
            }
        }
        if let (Some(log), Some(log_mark)) = (env.log, log_mark)
            && matched > 1
        {
            log.collapse_array(log_mark, at.path, &out, changed, n_changed);
        }
        Ok(out)
    }

    /// Applies an object node's children where its own path is `absent`; returns the document
    /// they create, if any.
    fn apply_absent_children(
        &self,
        absent: &Absent<'_>,
        env: &Env<'_>,
    ) -> Result<Option<RawBson>, CommandError> {
        let children = self.effective(env, &absent.full_path())?;
        let mut out = RawDocumentBuf::new();
        let mut any = false;
        for (name, child) in children.iter() {
            if let Some(v) = child.apply_absent(&absent.child(name), env)? {
                out.append(cstring(name)?, v);
                any = true;
            }
        }
        Ok(any.then_some(RawBson::Document(out)))
    }
}

/// mongod's `UpdateNode::createUpdateNodeByMerging`: two object nodes or two array nodes merge
/// child by child; anything else is a conflict at `path`.
fn merge(left: &UpdateNode, right: &UpdateNode, path: &str) -> Result<UpdateNode, CommandError> {
    let merge_children = |l: &Node, r: &Node, wrap: bool| -> Result<Node, CommandError> {
        let mut out = Node {
            children: l.children.clone(),
            positional: None,
        };
        for (name, rc) in &r.children {
            match out.position(name) {
                Ok(i) => {
                    let shown = if wrap {
                        format!("$[{name}]")
                    } else {
                        name.clone()
                    };
                    out.children[i].1 = merge(&out.children[i].1, rc, &join(path, &shown))?;
                }
                Err(i) => out.children.insert(i, (name.clone(), rc.clone())),
            }
        }
        out.positional = match (&l.positional, &r.positional) {
            (Some(a), Some(b)) => Some(Box::new(merge(a, b, &join(path, "$"))?)),
            (Some(p), None) | (None, Some(p)) => Some(p.clone()),
            (None, None) => None,
        };
        Ok(out)
    };
    match (left, right) {
        (UpdateNode::Object(l), UpdateNode::Object(r)) => {
            Ok(UpdateNode::Object(merge_children(l, r, false)?))
        }
        (UpdateNode::Array(l), UpdateNode::Array(r)) => {
            Ok(UpdateNode::Array(merge_children(l, r, true)?))
        }
        _ => Err(conflict_at(path)),
    }
}

impl UpdateNode {
    /// The new value of the existing element at `at` (`None`: remove it).
    fn apply_existing(
        &self,
        v: RawBsonRef<'_>,
        at: At<'_>,
        env: &Env<'_>,
    ) -> Result<Option<RawBson>, CommandError> {
        match self {
            UpdateNode::Leaf(leaf) => leaf.apply_existing(v, at, env),
            UpdateNode::Object(node) => match v {
                RawBsonRef::Document(d) => {
                    Ok(Some(RawBson::Document(node.apply_to_doc(d, at, env)?)))
                }
                RawBsonRef::Array(a) => Ok(Some(RawBson::Array(node.apply_to_array(a, at, env)?))),
                scalar => {
                    // Nothing below a scalar exists: creating there fails, other leaves
                    // ignore it or check it could be created.
                    let absent = Absent {
                        blocker: Some((at.name, scalar)),
                        taken: at.path,
                        to_create: Vec::new(),
                        array: at.array_above,
                    };
                    node.apply_absent_children(&absent, env)?;
                    Ok(Some(scalar.into()))
                }
            },
            UpdateNode::Array(node) => match v {
                RawBsonRef::Array(a) => {
                    Ok(Some(RawBson::Array(node.apply_to_elements(a, at, env)?)))
                }
                other => Err(CommandError::bad_value(format!(
                    "Cannot apply array updates to non-array element {}",
                    display::element(at.name, other)
                ))),
            },
        }
    }

    /// The value to create where this node's path does not exist (`None`: leave it absent).
    fn apply_absent(
        &self,
        absent: &Absent<'_>,
        env: &Env<'_>,
    ) -> Result<Option<RawBson>, CommandError> {
        match self {
            UpdateNode::Leaf(leaf) => leaf.apply_absent(absent, env),
            UpdateNode::Object(node) => node.apply_absent_children(absent, env),
            UpdateNode::Array(_) => Err(CommandError::bad_value(format!(
                "The path '{}' must exist in the document in order to apply array updates.",
                absent.full_path()
            ))),
        }
    }

    /// The path of the first leaf below, for messages.
    fn first_path(&self) -> &str {
        match self {
            UpdateNode::Leaf(leaf) => &leaf.path,
            UpdateNode::Object(node) | UpdateNode::Array(node) => node
                .children
                .first()
                .map(|(_, c)| c)
                .or(node.positional.as_deref())
                .map_or("", UpdateNode::first_path),
        }
    }
}

impl Leaf {
    fn apply_existing(
        &self,
        v: RawBsonRef<'_>,
        at: At<'_>,
        env: &Env<'_>,
    ) -> Result<Option<RawBson>, CommandError> {
        if let Op::RenameTo(n) = self.op
            && env.renames.get(n).is_some_and(Option::is_some)
            && let Some(array) = at.array_above
        {
            return Err(rename_through_array("destination", &self.path, array, env));
        }
        let new = self
            .op
            .apply_existing(v, at.name, at.path, at.in_array, env)?;
        if let Some(log) = env.log {
            log.existing(&self.op, v, at.path, at.in_array, new.as_ref(), env);
        }
        Ok(new)
    }

    fn apply_absent(
        &self,
        absent: &Absent<'_>,
        env: &Env<'_>,
    ) -> Result<Option<RawBson>, CommandError> {
        match self.op.absence(env) {
            Absence::Ignore => Ok(None),
            Absence::CheckViability => match absent.blocker {
                None => Ok(None),
                Some((name, value)) => Err(CommandError::new(
                    ErrorCode::PathNotViable,
                    format!(
                        "Cannot use the part ({}) of ({}) to traverse the element ({{{}}})",
                        absent.to_create.first().map_or("", String::as_str),
                        absent.full_path(),
                        display::element(name, value)
                    ),
                )),
            },
            Absence::Create => {
                if let Op::RenameTo(_) = self.op
                    && let Some(array) = absent.array
                {
                    return Err(rename_through_array("destination", &self.path, array, env));
                }
                if let Some((name, value)) = absent.blocker {
                    return Err(cannot_create(
                        absent.to_create.first().map_or("", String::as_str),
                        name,
                        value,
                    ));
                }
                let created = self.op.create(env)?;
                if let (Some(log), Some(value)) = (env.log, &created) {
                    log.created(&self.op, absent.taken, &absent.to_create, value, env);
                }
                Ok(created)
            }
        }
    }
}

/// `$rename`'s refusal to move a field out of, or into, an array element.
fn rename_through_array(which: &str, path: &str, array: &str, env: &Env<'_>) -> CommandError {
    let id = env
        .id
        .map_or_else(|| "no id".to_owned(), |id| display::element("_id", id));
    CommandError::bad_value(format!(
        "The {which} field cannot be an array element, '{path}' in doc with {id} has an array \
         field called '{array}'"
    ))
}

/// The value `$rename` moves from `from` (`None`: the source does not exist, a no-op), with
/// mongod's `findLongestPrefix` error for a path through a scalar or through an array by name.
pub(super) fn rename_source(
    doc: &RawDocument,
    from: &str,
    env: &Env<'_>,
) -> Result<Option<RawBson>, CommandError> {
    let mut cur = RawBsonRef::Document(doc);
    let mut cur_name = "";
    let mut nearest_array: Option<&str> = None;
    for part in from.split('.') {
        let next = match cur {
            RawBsonRef::Document(d) => d.get(part).map_err(|e| invalid_bson(&e))?,
            RawBsonRef::Array(a) if numeric(part).is_some() => a
                .get(numeric(part).unwrap_or_default())
                .map_err(|e| invalid_bson(&e))?,
            _ => {
                return Err(CommandError::new(
                    ErrorCode::PathNotViable,
                    format!(
                        "cannot use the part ({cur_name} of {from}) to traverse the element \
                         ({{{}}})",
                        display::element(cur_name, cur)
                    ),
                ));
            }
        };
        let Some(next) = next else {
            return Ok(None);
        };
        if matches!(cur, RawBsonRef::Array(_)) {
            nearest_array = Some(cur_name);
        }
        cur_name = part;
        cur = next;
    }
    if let Some(array) = nearest_array {
        return Err(rename_through_array("source", from, array, env));
    }
    Ok(Some(cur.into()))
}
