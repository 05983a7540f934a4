//! The oplog entry of an operator update, as mongod's update driver logs it: each leaf of the
//! update tree records what it did (mongod's `logUpdate` calls into `V2LogBuilder`), and the
//! records become a `$v: 2` diff. This is not the structural difference of the two images:
//! `{$set: {a: [1, 2, 3]}}` over `{a: [1, 2]}` logs the whole `a`, a leaf that changed nothing
//! logs nothing, `$push` to the end of an array logs only the new elements.
//!
//! What each leaf logs (mongod's `ModifierNode::logUpdate` and its overrides):
//!
//! - a created field: the field, under new documents for the path components it created
//!   (`i: {a: {b: 1}}`), or `u<index>` when it is an array element;
//! - an existing field whose value changed: its new value (`u`), `$currentDate` even when the
//!   value is the same;
//! - `$unset`: a delete (`d`), or `null` for an array element;
//! - `$push` appending to a non-empty array: one `u<index>` per new element, otherwise (a
//!   `$position` inside it, a `$sort`, a trimming `$slice`, an empty array) the whole array;
//! - `$rename`: the destination (created, or updated even to the same value) then a delete of
//!   the source.
//!
//! mongod applies leaves in the order of their path (field names compared byte by byte), so
//! records are sorted by the path of the leaf that made them before the diff is built: the order
//! of fields inside a `d`, `u` or `i` section, and of the `s<field>` sub-diffs, is that order.
//! Each path component of a record is an array index when its container in the pre-image is an
//! array (every leaf sees the pre-image: paths of two leaves never overlap).

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};

use bson::raw::CStr;
use bson::{RawArrayBuf, RawBson, RawBsonRef, RawDocument, RawDocumentBuf};

use super::Env;
use super::ops::{Op, PushResult};
use crate::query::compare::binary_equal;

/// The records of one application of an operator update.
#[derive(Debug)]
pub(super) struct Recorder<'r> {
    /// The source path of each `$rename`, by rename number.
    rename_sources: &'r [String],
    records: RefCell<Vec<Record>>,
}

#[derive(Debug)]
struct Record {
    /// The path of the leaf that made the record (the order mongod applies leaves in).
    leaf: String,
    /// The logged field's dotted path, array indexes resolved.
    path: String,
    /// How many leading components of `path` exist in the pre-image (`None`: all).
    existing: Option<usize>,
    entry: Entry,
}

#[derive(Debug)]
enum Entry {
    Update(RawBson),
    Create(RawBson),
    Delete,
}

impl<'r> Recorder<'r> {
    pub(super) fn new(rename_sources: &'r [String]) -> Self {
        Recorder {
            rename_sources,
            records: RefCell::new(Vec::new()),
        }
    }

    fn push(&self, leaf: &str, path: &str, existing: Option<usize>, entry: Entry) {
        self.records.borrow_mut().push(Record {
            leaf: leaf.to_owned(),
            path: path.to_owned(),
            existing,
            entry,
        });
    }

    /// A `$rename` that moved its source: the source's delete, after the destination's record.
    fn renamed(&self, op: &Op, leaf: &str, env: &Env<'_>) {
        if let Op::RenameTo(n) = op
            && env.renames.get(*n).is_some_and(Option::is_some)
            && let Some(from) = self.rename_sources.get(*n)
        {
            self.push(leaf, from, None, Entry::Delete);
        }
    }

    /// A leaf applied to the existing field at `path` (`in_array`: an array element), whose
    /// value went from `old` to `new` (`None`: removed).
    pub(super) fn existing(
        &self,
        op: &Op,
        old: RawBsonRef<'_>,
        path: &str,
        in_array: bool,
        new: Option<&RawBson>,
        env: &Env<'_>,
    ) {
        let changed = |new: &RawBson| !binary_equal(old, new.as_raw_bson_ref());
        match (op, new) {
            // The source of a `$rename` is logged with its destination.
            (Op::RenameFrom(_), _) => {}
            (Op::SetOnInsert(_), _) if !env.insert => {}
            (_, None) => self.push(path, path, None, Entry::Delete),
            // mongod's `$unset` of an array element sets it to null, always logged.
            (Op::Unset, Some(new)) if in_array => {
                self.push(path, path, None, Entry::Update(new.clone()));
            }
            // `$currentDate` always counts as a change.
            (Op::CurrentDate { .. }, Some(new)) => {
                self.push(path, path, None, Entry::Update(new.clone()));
            }
            (Op::Push(push), Some(new)) => {
                let (RawBsonRef::Array(before), RawBson::Array(after)) = (old, new) else {
                    return;
                };
                let len = before.into_iter().count();
                match push.result(len) {
                    PushResult::NoOp => {}
                    PushResult::Whole => {
                        self.push(path, path, None, Entry::Update(new.clone()));
                    }
                    PushResult::Append => {
                        let existing = path.split('.').count();
                        for (i, item) in after.into_iter().enumerate().skip(len) {
                            let Ok(item) = item else { continue };
                            let at = format!("{path}.{i}");
                            self.push(path, &at, Some(existing), Entry::Create(item.into()));
                        }
                    }
                }
            }
            // mongod's `$rename` sets its destination without comparing (`SetElementNode`):
            // logged even when the value is the same.
            (Op::RenameTo(n), Some(new)) => {
                if env.renames.get(*n).is_some_and(Option::is_some) {
                    self.push(path, path, None, Entry::Update(new.clone()));
                    self.renamed(op, path, env);
                }
            }
            (_, Some(new)) => {
                if changed(new) {
                    self.push(path, path, None, Entry::Update(new.clone()));
                }
            }
        }
    }

    /// A leaf that created `value` where its path did not exist: `taken` exists (`""`: the
    /// root), `to_create` are the components it created.
    pub(super) fn created(
        &self,
        op: &Op,
        taken: &str,
        to_create: &[String],
        value: &RawBson,
        env: &Env<'_>,
    ) {
        let existing = if taken.is_empty() {
            0
        } else {
            taken.split('.').count()
        };
        let mut path = taken.to_owned();
        for part in to_create {
            if !path.is_empty() {
                path.push('.');
            }
            path.push_str(part);
        }
        self.push(&path, &path, Some(existing), Entry::Create(value.clone()));
        self.renamed(op, &path, env);
    }

    /// How many records there are so far (see [`Recorder::collapse_array`]).
    pub(super) fn mark(&self) -> usize {
        self.records.borrow().len()
    }

    /// mongod's `UpdateArrayNode` (`a.$[]`, `a.$[x]`) when more than one element matched: its
    /// children log nothing, the node logs the whole new array (`array`, at `path`) when more
    /// than one element changed, the one element that changed (index `changed`) otherwise.
    /// The children's records (those since `mark`) are dropped.
    pub(super) fn collapse_array(
        &self,
        mark: usize,
        path: &str,
        array: &RawArrayBuf,
        changed: Option<usize>,
        n_changed: usize,
    ) {
        self.records.borrow_mut().truncate(mark);
        if n_changed > 1 {
            self.push(
                path,
                path,
                None,
                Entry::Update(RawBson::Array(array.clone())),
            );
        } else if let Some(i) = changed
            && let Ok(Some(element)) = array.get(i)
        {
            let at = format!("{path}.{i}");
            self.push(path, &at, None, Entry::Update(element.into()));
        }
    }

    /// The oplog entry's `o`: `{$v: 2, diff: {...}}`. `None` if the records do not make a diff
    /// mongod could have logged (never expected; the caller logs a replacement then).
    pub(super) fn finish(self, pre: &RawDocument) -> Option<RawDocumentBuf> {
        let mut records = self.records.into_inner();
        records.sort_by(|a, b| a.leaf.split('.').cmp(b.leaf.split('.')));
        let mut root = LogNode::Sub(Fields::default());
        for record in records {
            let parts: Vec<&str> = record.path.split('.').collect();
            let existing = record.existing.unwrap_or(parts.len());
            let indexes = index_components(pre, &parts, existing);
            let leaf = match record.entry {
                Entry::Update(v) => LogNode::Update(v),
                Entry::Create(v) => LogNode::Insert(v),
                Entry::Delete => LogNode::Delete,
            };
            let added = add(&mut root, &parts, &indexes, record.existing, leaf);
            debug_assert!(added.is_some(), "unloggable update record {}", record.path);
            added?;
        }
        let LogNode::Sub(children) = &root else {
            return None;
        };
        let diff = write_sub(&children.order)?;
        let mut o = RawDocumentBuf::new();
        o.append(cstr("$v")?, 2);
        o.append(cstr("diff")?, &diff);
        Some(o)
    }
}

/// Which components of `parts` are array indexes: those whose container is an array in the
/// pre-image (the first `existing` exist there; the first created one is an index when what
/// holds it is an array; those below it are field names of new documents).
fn index_components(pre: &RawDocument, parts: &[&str], existing: usize) -> Vec<bool> {
    let mut out = Vec::with_capacity(parts.len());
    let mut current = Some(RawBsonRef::Document(pre));
    for (i, part) in parts.iter().enumerate() {
        if i > existing {
            out.push(false);
            continue;
        }
        out.push(matches!(current, Some(RawBsonRef::Array(_))));
        current = match current {
            Some(RawBsonRef::Document(d)) => d.get(part).ok().flatten(),
            Some(RawBsonRef::Array(a)) => part
                .parse::<usize>()
                .ok()
                .and_then(|i| a.get(i).ok().flatten()),
            _ => None,
        };
    }
    out
}

/// mongod's `v2_log_builder` tree.
#[derive(Debug)]
enum LogNode {
    Update(RawBson),
    Insert(RawBson),
    Delete,
    /// A document that existed: a sub-diff.
    Sub(Fields),
    /// A document the update created: inserted whole.
    NewDoc(Fields),
    /// An array that existed: an array diff, children by index.
    Array(BTreeMap<usize, LogNode>),
}

/// A document node's children in the order they were logged, found by name in constant time
/// (an update may log a great many fields of one document).
#[derive(Debug, Default)]
struct Fields {
    order: Vec<(String, LogNode)>,
    index: HashMap<String, usize>,
}

impl Fields {
    /// The child `name`, added by `make` when absent; `None` if it was absent and `make` gave
    /// nothing.
    fn get_or_add(
        &mut self,
        name: &str,
        make: impl FnOnce() -> Option<LogNode>,
    ) -> Option<&mut LogNode> {
        let at = if let Some(at) = self.index.get(name) {
            *at
        } else {
            let node = make()?;
            self.order.push((name.to_owned(), node));
            self.index.insert(name.to_owned(), self.order.len() - 1);
            self.order.len() - 1
        };
        self.order.get_mut(at).map(|(_, node)| node)
    }
}

/// mongod's `addNodeAtPath`: walks (creating) internal nodes down to the parent of the last
/// component and adds `leaf` there. `None` for a path that cannot be logged.
fn add(
    root: &mut LogNode,
    parts: &[&str],
    indexes: &[bool],
    existing: Option<usize>,
    leaf: LogNode,
) -> Option<()> {
    let (last, above) = parts.split_last()?;
    let mut node = root;
    for (i, part) in above.iter().enumerate() {
        let next_is_index = *indexes.get(i + 1)?;
        let new_path = existing.is_some_and(|k| i >= k);
        node = child(node, part, || {
            if next_is_index {
                LogNode::Array(BTreeMap::new())
            } else if new_path {
                LogNode::NewDoc(Fields::default())
            } else {
                LogNode::Sub(Fields::default())
            }
        })?;
    }
    match node {
        LogNode::Sub(children) | LogNode::NewDoc(children) => {
            if children.index.contains_key(*last) {
                return None;
            }
            children.get_or_add(last, || Some(leaf))?;
        }
        LogNode::Array(children) => {
            let index = last.parse::<usize>().ok()?;
            if children.insert(index, leaf).is_some() {
                return None;
            }
        }
        LogNode::Update(_) | LogNode::Insert(_) | LogNode::Delete => return None,
    }
    Some(())
}

/// The internal child `name` of `node`, created by `make` when absent.
fn child<'n>(
    node: &'n mut LogNode,
    name: &str,
    make: impl FnOnce() -> LogNode,
) -> Option<&'n mut LogNode> {
    let found = match node {
        LogNode::Sub(children) | LogNode::NewDoc(children) => {
            children.get_or_add(name, || Some(make()))?
        }
        LogNode::Array(children) => children.entry(name.parse().ok()?).or_insert_with(make),
        LogNode::Update(_) | LogNode::Insert(_) | LogNode::Delete => return None,
    };
    matches!(
        found,
        LogNode::Sub(_) | LogNode::NewDoc(_) | LogNode::Array(_)
    )
    .then_some(found)
}

fn cstr(s: &str) -> Option<&CStr> {
    <&CStr>::try_from(s).ok()
}

/// A sub-diff: `d`, `u`, `i` sections, then `s<field>` sub-diffs, each in logged order.
fn write_sub(children: &[(String, LogNode)]) -> Option<RawDocumentBuf> {
    let mut out = RawDocumentBuf::new();
    let mut deletes = RawDocumentBuf::new();
    let mut updates = RawDocumentBuf::new();
    let mut inserts = RawDocumentBuf::new();
    for (name, child) in children {
        match child {
            LogNode::Delete => deletes.append(cstr(name)?, false),
            LogNode::Update(v) => updates.append(cstr(name)?, v.clone()),
            LogNode::Insert(v) => inserts.append(cstr(name)?, v.clone()),
            LogNode::NewDoc(c) => inserts.append(cstr(name)?, write_new_doc(&c.order)?),
            LogNode::Sub(_) | LogNode::Array(_) => {}
        }
    }
    for (section, entries) in [("d", deletes), ("u", updates), ("i", inserts)] {
        if !entries.is_empty() {
            out.append(cstr(section)?, entries);
        }
    }
    for (name, child) in children {
        let sub = match child {
            LogNode::Sub(c) => write_sub(&c.order)?,
            LogNode::Array(c) => write_array(c)?,
            _ => continue,
        };
        out.append(cstr(&format!("s{name}"))?, sub);
    }
    Some(out)
}

/// A document the update created, as inserted.
fn write_new_doc(children: &[(String, LogNode)]) -> Option<RawDocumentBuf> {
    let mut out = RawDocumentBuf::new();
    for (name, child) in children {
        match child {
            LogNode::Insert(v) => out.append(cstr(name)?, v.clone()),
            LogNode::NewDoc(c) => out.append(cstr(name)?, write_new_doc(&c.order)?),
            _ => return None,
        }
    }
    Some(out)
}

/// An array diff: `a: true`, then `u<index>` (a new value) or `s<index>` (a sub-diff).
fn write_array(children: &BTreeMap<usize, LogNode>) -> Option<RawDocumentBuf> {
    let mut out = RawDocumentBuf::new();
    out.append(cstr("a")?, true);
    for (index, child) in children {
        match child {
            LogNode::Update(v) | LogNode::Insert(v) => {
                out.append(cstr(&format!("u{index}"))?, v.clone());
            }
            LogNode::NewDoc(c) => {
                out.append(cstr(&format!("u{index}"))?, write_new_doc(&c.order)?);
            }
            LogNode::Sub(c) => out.append(cstr(&format!("s{index}"))?, write_sub(&c.order)?),
            LogNode::Array(c) => out.append(cstr(&format!("s{index}"))?, write_array(c)?),
            LogNode::Delete => return None,
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests;
