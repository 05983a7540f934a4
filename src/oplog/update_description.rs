//! The `updateDescription` of an `update` change event, read from the event's `$v: 2` diff as
//! MongoDB 7.0 shows it (mongod's `change_stream_document_diff_parser::parseDiff`):
//!
//! - `updatedFields`: `{<dotted path>: value}` for every `u` and `i` entry of a document diff
//!   (updates first, then inserts) and every `u<index>` of an array diff;
//! - `removedFields`: the dotted paths of the `d` entries;
//! - `truncatedArrays`: `{field, newSize}` for every array diff with a new length `l`;
//! - `disambiguatedPaths` (only with `showExpandedEvents`): for each of those paths that a dotted
//!   string cannot name unambiguously — a field name containing a dot, or a numeric field name
//!   below the top level — the path as an array of its parts, array indexes as integers. Once a
//!   path is ambiguous, every path below it is too.
//!
//! A level's own entries come before those of its sub-diffs, which follow in the diff's order.

use bson::{RawArrayBuf, RawBsonRef, RawDocument, RawDocumentBuf};

use super::diff::{
    ArrayDiffView, ArrayMod, DiffError, MAX_DEPTH, array_view, doc_view, elems, view_kind,
};

/// The parts of an `updateDescription`.
#[derive(Debug, Clone, PartialEq)]
pub struct UpdateDescription {
    /// `updatedFields`: dotted path to new value, in the diff's order.
    pub updated_fields: RawDocumentBuf,
    /// `removedFields`: dotted paths.
    pub removed_fields: Vec<String>,
    /// `truncatedArrays`: `(field, newSize)`.
    pub truncated_arrays: Vec<(String, i32)>,
    /// `disambiguatedPaths`: dotted path to its parts, for the ambiguous paths above.
    pub disambiguated_paths: RawDocumentBuf,
}

impl UpdateDescription {
    /// The event's `updateDescription` document; `disambiguatedPaths` only with
    /// `showExpandedEvents`, as mongod 7.0 emits it.
    ///
    /// # Errors
    /// A path containing a NUL byte (impossible for paths read from BSON).
    pub fn to_document(&self, show_expanded_events: bool) -> Result<RawDocumentBuf, DiffError> {
        let mut out = RawDocumentBuf::new();
        out.append(key("updatedFields")?, &self.updated_fields);
        let mut removed = RawArrayBuf::new();
        for path in &self.removed_fields {
            removed.push(path.as_str());
        }
        out.append(key("removedFields")?, &removed);
        let mut truncated = RawArrayBuf::new();
        for (field, new_size) in &self.truncated_arrays {
            let mut entry = RawDocumentBuf::new();
            entry.append(key("field")?, field.as_str());
            entry.append(key("newSize")?, *new_size);
            truncated.push(&entry);
        }
        out.append(key("truncatedArrays")?, &truncated);
        if show_expanded_events {
            out.append(key("disambiguatedPaths")?, &self.disambiguated_paths);
        }
        Ok(out)
    }
}

fn key(s: &str) -> Result<&bson::raw::CStr, DiffError> {
    <&bson::raw::CStr>::try_from(s).map_err(DiffError::from)
}

/// One part of the current path.
struct Part {
    name: String,
    /// An array index (shown as an integer in `disambiguatedPaths`).
    index: bool,
    /// The path up to and including this part is ambiguous.
    ambiguous: bool,
}

/// mongod's `FieldRef::isNumericPathComponentStrict`: digits, no leading zero.
fn is_numeric_strict(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) && !(s.len() > 1 && s.starts_with('0'))
}

struct Builder {
    path: Vec<Part>,
    updated: RawDocumentBuf,
    removed: Vec<String>,
    truncated: Vec<(String, i32)>,
    disambiguated: RawDocumentBuf,
}

impl Builder {
    fn push_field(&mut self, name: &str) {
        let inherited = self.path.last().is_some_and(|p| p.ambiguous);
        let numeric = !self.path.is_empty() && is_numeric_strict(name);
        let dotted = name.contains('.');
        self.path.push(Part {
            name: name.to_owned(),
            index: false,
            ambiguous: inherited || numeric || dotted,
        });
    }

    fn push_index(&mut self, index: usize) {
        let inherited = self.path.last().is_some_and(|p| p.ambiguous);
        self.path.push(Part {
            name: index.to_string(),
            index: true,
            ambiguous: inherited,
        });
    }

    fn dotted(&self) -> String {
        let mut out = String::new();
        for (i, p) in self.path.iter().enumerate() {
            if i > 0 {
                out.push('.');
            }
            out.push_str(&p.name);
        }
        out
    }

    /// Records the current path in `disambiguatedPaths` when it is ambiguous.
    fn disambiguate(&mut self, dotted: &str) -> Result<(), DiffError> {
        if !self.path.last().is_some_and(|p| p.ambiguous) {
            return Ok(());
        }
        let mut parts = RawArrayBuf::new();
        for p in &self.path {
            if p.index {
                match p.name.parse::<i32>() {
                    Ok(i) => parts.push(i),
                    Err(_) => parts.push(p.name.parse::<i64>().unwrap_or(i64::MAX)),
                }
            } else {
                parts.push(p.name.as_str());
            }
        }
        self.disambiguated.append(key(dotted)?, &parts);
        Ok(())
    }

    fn updated(&mut self, value: RawBsonRef<'_>) -> Result<(), DiffError> {
        let dotted = self.dotted();
        self.updated.append(key(&dotted)?, value);
        self.disambiguate(&dotted)
    }

    fn removed(&mut self) -> Result<(), DiffError> {
        let dotted = self.dotted();
        self.disambiguate(&dotted)?;
        self.removed.push(dotted);
        Ok(())
    }

    fn truncated(&mut self, new_size: i32) -> Result<(), DiffError> {
        let dotted = self.dotted();
        self.disambiguate(&dotted)?;
        self.truncated.push((dotted, new_size));
        Ok(())
    }

    fn document(&mut self, diff: &RawDocument, depth: usize) -> Result<(), DiffError> {
        if depth > MAX_DEPTH {
            return Err(DiffError::TooDeep);
        }
        let v = doc_view(diff)?;
        for section in [v.updates, v.inserts].into_iter().flatten() {
            for e in elems(section) {
                let e = e?;
                self.push_field(e.key.as_str());
                let r = self.updated(e.value);
                self.path.pop();
                r?;
            }
        }
        if let Some(deletes) = v.deletes {
            for e in elems(deletes) {
                self.push_field(e?.key.as_str());
                let r = self.removed();
                self.path.pop();
                r?;
            }
        }
        for (field, sub) in v.subs {
            self.push_field(field);
            let r = self.sub(sub, depth + 1);
            self.path.pop();
            r?;
        }
        Ok(())
    }

    fn sub(&mut self, diff: &RawDocument, depth: usize) -> Result<(), DiffError> {
        if view_kind(diff)? {
            self.array(&array_view(diff)?, depth)
        } else {
            self.document(diff, depth)
        }
    }

    fn array(&mut self, a: &ArrayDiffView<'_>, depth: usize) -> Result<(), DiffError> {
        if depth > MAX_DEPTH {
            return Err(DiffError::TooDeep);
        }
        if let Some(new_size) = a.resize {
            self.truncated(new_size)?;
        }
        for (index, m) in &a.entries {
            self.push_index(*index);
            let r = match m {
                ArrayMod::Update(value) => self.updated(*value),
                ArrayMod::Sub(sub) => self.sub(sub, depth + 1),
            };
            self.path.pop();
            r?;
        }
        Ok(())
    }
}

/// The `updateDescription` of an update whose oplog entry carries the `$v: 2` diff `diff`.
///
/// # Errors
/// Invalid BSON, a diff not in the `$v: 2` format (mongod's codes), or nesting deeper than
/// [`MAX_DEPTH`].
pub fn update_description(diff: &RawDocument) -> Result<UpdateDescription, DiffError> {
    let mut b = Builder {
        path: Vec::new(),
        updated: RawDocumentBuf::new(),
        removed: Vec::new(),
        truncated: Vec::new(),
        disambiguated: RawDocumentBuf::new(),
    };
    b.document(diff, 0)?;
    Ok(UpdateDescription {
        updated_fields: b.updated,
        removed_fields: b.removed,
        truncated_arrays: b.truncated,
        disambiguated_paths: b.disambiguated,
    })
}

#[cfg(test)]
mod tests;
