//! mongod's `$v: 2` ("delta") update format: compute the diff between two images of a document
//! (mongod's `doc_diff::computeOplogDiff`) and apply a diff to a pre-image
//! (`doc_diff::applyDiff`).
//!
//! A document diff has up to four sections, always in this order: `d` (deleted fields, each
//! `false`), `u` (fields whose value changed in place), `i` (fields appended at the end, in the
//! post-image's order), then one `s<field>` per sub-document or array diffed recursively. An
//! array diff is `{a: true, l: <new length>?, u<index>: value | s<index>: subdiff, ...}`, indexes
//! ascending. A sub-diff that would be larger than the post-image's value is replaced by an
//! update of the whole value, and the whole diff by a replacement when it is not smaller than the
//! post-image (the sizes are mongod's approximations, kept so that the same updates fall back).
//!
//! Documents stay raw: each level is walked once with the element bytes compared directly.

use std::collections::{BTreeSet, HashMap, HashSet};

use bson::raw::CStr;
use bson::{RawArray, RawArrayBuf, RawBsonRef, RawDocument, RawDocumentBuf};

/// Deepest nesting walked (mongod's `BSONDepth::kDefaultMaxAllowableDepth`); deeper input is an
/// error, never a stack overflow.
pub const MAX_DEPTH: usize = 200;

/// Bytes mongod adds to the diff's size for the oplog entry's `{$v: 2, diff: ...}` wrapping
/// (`update_oplog_entry::kSizeOfDeltaOplogEntryMetadata`); the padding to pass to
/// [`compute_oplog_diff`].
pub const DELTA_OPLOG_ENTRY_METADATA_SIZE: usize = 15;

/// Largest document [`apply_diff`] builds (mongod's internal limit, 16 MiB + 16 KiB).
pub const MAX_OUTPUT_SIZE: usize = 16 * 1024 * 1024 + 16 * 1024;

// mongod's size constants (`document_diff_serialization.h`).
const EMPTY_DOCUMENT_DIFF_SIZE: usize = 5;
const EMPTY_ARRAY_DIFF_SIZE: usize = 9;
const SECTION_WRAPPING_SIZE: usize = 8;
const RESIZE_ENTRY_SIZE: usize = 7;

/// What can go wrong reading documents or a diff.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DiffError {
    /// The bytes of a document are not valid BSON.
    #[error("invalid BSON: {0}")]
    InvalidBson(String),
    /// Documents or diffs nest deeper than [`MAX_DEPTH`].
    #[error("document nests deeper than {MAX_DEPTH} levels")]
    TooDeep,
    /// Applying the diff would build a document larger than [`MAX_OUTPUT_SIZE`].
    #[error("the document built by the diff is too large")]
    TooLarge,
    /// The diff does not follow the `$v: 2` format; `code` is mongod's assertion code.
    #[error("{message}")]
    Malformed {
        /// mongod's location code for the same check (e.g. 4770503 for an unknown section).
        code: i32,
        /// mongod's message.
        message: String,
    },
}

impl From<bson::error::Error> for DiffError {
    fn from(e: bson::error::Error) -> Self {
        DiffError::InvalidBson(e.to_string())
    }
}

fn malformed(code: i32, message: impl Into<String>) -> DiffError {
    DiffError::Malformed {
        code,
        message: message.into(),
    }
}

fn cstr(s: &str) -> Result<&CStr, DiffError> {
    <&CStr>::try_from(s).map_err(DiffError::from)
}

// ---------------------------------------------------------------------------------------------
// Raw element walking.

/// One element of a raw document: its key, value, the bytes of the whole element (type, key,
/// value) for mongod's `binaryEqual`, and the size of its value (mongod's `valuesize()`).
#[derive(Clone, Copy)]
pub(crate) struct Elem<'a> {
    pub key: &'a CStr,
    pub value: RawBsonRef<'a>,
    pub bytes: &'a [u8],
    pub value_size: usize,
}

/// Iterates a document's elements, tracking each element's byte range.
pub(crate) struct Elems<'a> {
    doc: &'a RawDocument,
    iter: bson::raw::RawIter<'a>,
    offset: usize,
}

pub(crate) fn elems(doc: &RawDocument) -> Elems<'_> {
    Elems {
        doc,
        iter: doc.iter_elements(),
        offset: 4,
    }
}

impl<'a> Iterator for Elems<'a> {
    type Item = Result<Elem<'a>, DiffError>;

    fn next(&mut self) -> Option<Self::Item> {
        let element = match self.iter.next()? {
            Ok(e) => e,
            Err(e) => return Some(Err(e.into())),
        };
        let start = self.offset;
        let end = start
            .checked_add(2 + element.key().len())
            .and_then(|v| v.checked_add(element.size()));
        let Some(bytes) = end.and_then(|end| self.doc.as_bytes().get(start..end)) else {
            return Some(Err(DiffError::InvalidBson(
                "element overruns its document".into(),
            )));
        };
        self.offset = start + bytes.len();
        Some(element.value().map_err(DiffError::from).map(|value| Elem {
            key: element.key(),
            value,
            bytes,
            value_size: element.size(),
        }))
    }
}

// ---------------------------------------------------------------------------------------------
// The diff tree, with mongod's running size estimate.

enum SubDiff<'a> {
    Doc(DocNode<'a>),
    Array(ArrayNode<'a>),
}

impl SubDiff<'_> {
    fn size(&self) -> usize {
        match self {
            SubDiff::Doc(d) => d.size,
            SubDiff::Array(a) => a.size,
        }
    }
}

struct DocNode<'a> {
    size: usize,
    deletes: Vec<&'a CStr>,
    updates: Vec<(&'a CStr, RawBsonRef<'a>)>,
    inserts: Vec<(&'a CStr, RawBsonRef<'a>)>,
    subs: Vec<(&'a CStr, SubDiff<'a>)>,
}

impl<'a> DocNode<'a> {
    fn new(padding: usize) -> Self {
        DocNode {
            size: EMPTY_DOCUMENT_DIFF_SIZE.saturating_add(padding),
            deletes: Vec::new(),
            updates: Vec::new(),
            inserts: Vec::new(),
            subs: Vec::new(),
        }
    }

    fn add_entry(&mut self, key: &CStr, value_size: usize, first_in_section: bool) {
        self.size += key.len() + 2 + value_size;
        if first_in_section {
            self.size += SECTION_WRAPPING_SIZE;
        }
    }

    fn add_update(&mut self, e: &Elem<'a>) {
        self.add_entry(e.key, e.value_size, self.updates.is_empty());
        self.updates.push((e.key, e.value));
    }

    fn add_insert(&mut self, e: &Elem<'a>) {
        self.add_entry(e.key, e.value_size, self.inserts.is_empty());
        self.inserts.push((e.key, e.value));
    }

    fn add_delete(&mut self, key: &'a CStr) {
        self.add_entry(key, 1, self.deletes.is_empty());
        self.deletes.push(key);
    }

    fn add_sub(&mut self, key: &'a CStr, sub: SubDiff<'a>) {
        // Key, type byte and terminator, the sub-diff, and the `s` prefix.
        self.size += key.len() + 2 + sub.size() + 1;
        self.subs.push((key, sub));
    }
}

enum ArrayEntry<'a> {
    Update(RawBsonRef<'a>),
    Sub(SubDiff<'a>),
}

struct ArrayNode<'a> {
    size: usize,
    resize: Option<usize>,
    entries: Vec<(usize, ArrayEntry<'a>)>,
}

fn decimal_digits(mut n: usize) -> usize {
    let mut digits = 1;
    while n >= 10 {
        n /= 10;
        digits += 1;
    }
    digits
}

impl<'a> ArrayNode<'a> {
    fn new() -> Self {
        ArrayNode {
            size: EMPTY_ARRAY_DIFF_SIZE,
            resize: None,
            entries: Vec::new(),
        }
    }

    fn add(&mut self, index: usize, value_size: usize, entry: ArrayEntry<'a>) {
        // `u`/`s` and the digits, type byte and terminator, the value.
        self.size += 1 + decimal_digits(index) + 2 + value_size;
        self.entries.push((index, entry));
    }

    fn add_update(&mut self, index: usize, e: &Elem<'a>) {
        self.add(index, e.value_size, ArrayEntry::Update(e.value));
    }

    fn set_resize(&mut self, len: usize) {
        self.resize = Some(len);
        self.size += RESIZE_ENTRY_SIZE;
    }
}

/// Where a sub-diff goes in its parent.
trait Parent<'a> {
    type Id: Copy;
    fn update(&mut self, id: Self::Id, e: &Elem<'a>);
    fn sub(&mut self, id: Self::Id, sub: SubDiff<'a>);
}

impl<'a> Parent<'a> for DocNode<'a> {
    type Id = &'a CStr;
    fn update(&mut self, _id: &'a CStr, e: &Elem<'a>) {
        self.add_update(e);
    }
    fn sub(&mut self, id: &'a CStr, sub: SubDiff<'a>) {
        self.add_sub(id, sub);
    }
}

impl<'a> Parent<'a> for ArrayNode<'a> {
    type Id = usize;
    fn update(&mut self, id: usize, e: &Elem<'a>) {
        self.add_update(id, e);
    }
    fn sub(&mut self, id: usize, sub: SubDiff<'a>) {
        let size = sub.size();
        self.add(id, size, ArrayEntry::Sub(sub));
    }
}

fn both_containers_of_same_type(pre: &Elem<'_>, post: &Elem<'_>) -> bool {
    matches!(
        (pre.value, post.value),
        (RawBsonRef::Document(_), RawBsonRef::Document(_))
            | (RawBsonRef::Array(_), RawBsonRef::Array(_))
    )
}

/// mongod's `calculateSubDiffHelper`: diff two objects or two arrays, or record the post value
/// as an update when the sub-diff is not worth it.
fn sub_diff<'a, P: Parent<'a>>(
    pre: &Elem<'a>,
    post: &Elem<'a>,
    id: P::Id,
    parent: &mut P,
    ignore_size_limit: bool,
    depth: usize,
) -> Result<(), DiffError> {
    let sub = match (pre.value, post.value) {
        (RawBsonRef::Document(a), RawBsonRef::Document(b)) => {
            doc_diff(a, b, ignore_size_limit, 0, depth + 1)?.map(SubDiff::Doc)
        }
        (RawBsonRef::Array(a), RawBsonRef::Array(b)) => {
            array_diff(a, b, ignore_size_limit, depth + 1)?.map(SubDiff::Array)
        }
        _ => None,
    };
    match sub {
        Some(sub) => parent.sub(id, sub),
        None => parent.update(id, post),
    }
    Ok(())
}

/// mongod's `computeArrayDiff`: `None` when the diff would not be smaller than `post`.
fn array_diff<'a>(
    pre: &'a RawArray,
    post: &'a RawArray,
    ignore_size_limit: bool,
    depth: usize,
) -> Result<Option<ArrayNode<'a>>, DiffError> {
    if depth > MAX_DEPTH {
        return Err(DiffError::TooDeep);
    }
    let post_size = post.as_bytes().len();
    let mut node = ArrayNode::new();
    let mut pre_it = elems(RawDocument::from_bytes(pre.as_bytes())?).peekable();
    let mut post_it = elems(RawDocument::from_bytes(post.as_bytes())?).peekable();
    let mut index = 0usize;
    while pre_it.peek().is_some() && post_it.peek().is_some() {
        if !ignore_size_limit && post_size < node.size {
            return Ok(None);
        }
        let (Some(pre_e), Some(post_e)) = (pre_it.next(), post_it.next()) else {
            break;
        };
        let (pre_e, post_e) = (pre_e?, post_e?);
        if pre_e.bytes != post_e.bytes {
            if both_containers_of_same_type(&pre_e, &post_e) {
                sub_diff(&pre_e, &post_e, index, &mut node, ignore_size_limit, depth)?;
            } else {
                node.add_update(index, &post_e);
            }
        }
        index += 1;
    }
    for post_e in post_it {
        node.add_update(index, &post_e?);
        index += 1;
    }
    if pre_it.next().transpose()?.is_some() {
        node.set_resize(index);
    }
    Ok((ignore_size_limit || post_size > node.size).then_some(node))
}

/// mongod's `computeDocDiff`: `None` when the diff would not be smaller than `post`.
fn doc_diff<'a>(
    pre: &'a RawDocument,
    post: &'a RawDocument,
    ignore_size_limit: bool,
    padding: usize,
    depth: usize,
) -> Result<Option<DocNode<'a>>, DiffError> {
    if depth > MAX_DEPTH {
        return Err(DiffError::TooDeep);
    }
    let post_size = post.as_bytes().len();
    let mut node = DocNode::new(padding);
    let mut pre_it = elems(pre).peekable();
    let mut post_it = elems(post).peekable();
    // Fields of `pre` skipped while looking for the current field of `post`: deleted unless they
    // turn up later in `post`. Sorted by bytes, as mongod's `std::set<StringData>`.
    let mut deletes: BTreeSet<&'a CStr> = BTreeSet::new();
    while pre_it.peek().is_some() && post_it.peek().is_some() {
        if !ignore_size_limit && post_size < node.size {
            return Ok(None);
        }
        let Some(pre_e) = pre_it.next() else { break };
        let pre_e = pre_e?;
        let post_e = match post_it.peek() {
            Some(Ok(e)) => *e,
            Some(Err(e)) => return Err(e.clone()),
            None => break,
        };
        if pre_e.bytes == post_e.bytes {
            post_it.next();
            continue;
        }
        if pre_e.key == post_e.key {
            if both_containers_of_same_type(&pre_e, &post_e) {
                sub_diff(
                    &pre_e,
                    &post_e,
                    pre_e.key,
                    &mut node,
                    ignore_size_limit,
                    depth,
                )?;
            } else {
                node.add_update(&post_e);
            }
            post_it.next();
        } else {
            deletes.insert(pre_e.key);
        }
    }
    for pre_e in pre_it {
        node.add_delete(pre_e?.key);
    }
    for post_e in post_it {
        let post_e = post_e?;
        node.add_insert(&post_e);
        deletes.remove(post_e.key);
    }
    for key in deletes {
        node.add_delete(key);
    }
    Ok((ignore_size_limit || post_size > node.size).then_some(node))
}

// ---------------------------------------------------------------------------------------------
// Serialization.

fn write_doc_node(node: &DocNode<'_>) -> Result<RawDocumentBuf, DiffError> {
    let mut out = RawDocumentBuf::new();
    if !node.deletes.is_empty() {
        let mut section = RawDocumentBuf::new();
        for key in &node.deletes {
            section.append(*key, false);
        }
        out.append(cstr("d")?, &section);
    }
    for (name, entries) in [("u", &node.updates), ("i", &node.inserts)] {
        if !entries.is_empty() {
            let mut section = RawDocumentBuf::new();
            for (key, value) in entries {
                section.append(*key, *value);
            }
            out.append(cstr(name)?, &section);
        }
    }
    for (key, sub) in &node.subs {
        let name = format!("s{}", key.as_str());
        out.append(cstr(&name)?, &write_sub(sub)?);
    }
    Ok(out)
}

fn write_sub(sub: &SubDiff<'_>) -> Result<RawDocumentBuf, DiffError> {
    match sub {
        SubDiff::Doc(d) => write_doc_node(d),
        SubDiff::Array(a) => {
            let mut out = RawDocumentBuf::new();
            out.append(cstr("a")?, true);
            if let Some(len) = a.resize {
                let len = i32::try_from(len)
                    .map_err(|_| DiffError::InvalidBson("array too long".into()))?;
                out.append(cstr("l")?, len);
            }
            for (index, entry) in &a.entries {
                match entry {
                    ArrayEntry::Update(value) => {
                        out.append(cstr(&format!("u{index}"))?, *value);
                    }
                    ArrayEntry::Sub(sub) => {
                        out.append(cstr(&format!("s{index}"))?, &write_sub(sub)?);
                    }
                }
            }
            Ok(out)
        }
    }
}

/// mongod's `computeOplogDiff`: the `$v: 2` diff turning `pre` into `post`, or `None` when
/// mongod would log a replacement instead (the diff, counted with `padding` — pass
/// [`DELTA_OPLOG_ENTRY_METADATA_SIZE`] as mongod does — is not smaller than `post`).
///
/// # Errors
/// Invalid BSON, or nesting deeper than [`MAX_DEPTH`].
pub fn compute_oplog_diff(
    pre: &RawDocument,
    post: &RawDocument,
    padding: usize,
) -> Result<Option<RawDocumentBuf>, DiffError> {
    let Some(node) = doc_diff(pre, post, false, padding, 0)? else {
        return Ok(None);
    };
    let diff = write_doc_node(&node)?;
    Ok((diff.as_bytes().len() < post.as_bytes().len()).then_some(diff))
}

/// The full diff with no size limit (mongod's `computeOplogDiff_forTest`): sub-documents and
/// arrays are always diffed, never replaced whole.
///
/// # Errors
/// Invalid BSON, or nesting deeper than [`MAX_DEPTH`].
pub fn compute_full_diff(
    pre: &RawDocument,
    post: &RawDocument,
) -> Result<RawDocumentBuf, DiffError> {
    match doc_diff(pre, post, true, 0, 0)? {
        Some(node) => write_doc_node(&node),
        None => Err(malformed(7_639_006, "diffNode should always have a value")),
    }
}

// ---------------------------------------------------------------------------------------------
// Reading diffs (mongod's `DocumentDiffReader` / `ArrayDiffReader` checks).

/// The sections of a document diff.
#[derive(Default)]
pub(crate) struct DocDiffView<'a> {
    pub deletes: Option<&'a RawDocument>,
    pub updates: Option<&'a RawDocument>,
    pub inserts: Option<&'a RawDocument>,
    /// `(field, sub-diff)`, the field without its `s` prefix.
    pub subs: Vec<(&'a str, &'a RawDocument)>,
}

/// An array diff: its new length and its `(index, modification)` entries, indexes ascending.
pub(crate) struct ArrayDiffView<'a> {
    pub resize: Option<i32>,
    pub entries: Vec<(usize, ArrayMod<'a>)>,
}

/// One entry of an array diff.
pub(crate) enum ArrayMod<'a> {
    Update(RawBsonRef<'a>),
    Sub(&'a RawDocument),
}

pub(crate) fn doc_view(diff: &RawDocument) -> Result<DocDiffView<'_>, DiffError> {
    let mut out = DocDiffView::default();
    let mut prev = 0;
    let mut any = false;
    for e in elems(diff) {
        let e = e?;
        any = true;
        let key = e.key.as_str();
        let Some(section) = key.chars().next() else {
            return Err(malformed(
                4_770_505,
                "Expected sections field names in diff to be non-empty ",
            ));
        };
        let order = match section {
            'd' => 1,
            'u' => 2,
            'i' => 3,
            's' => 5,
            _ => 0,
        };
        if prev == 5 && order != 5 {
            return Err(malformed(
                4_770_514,
                format!("Did not expect more sections in diff but found one: {key}"),
            ));
        }
        if order == 0 || (order <= prev && order != 5) {
            return Err(malformed(
                4_770_503,
                format!("Unexpected section: {section} in document diff"),
            ));
        }
        let RawBsonRef::Document(body) = e.value else {
            if order == 5 && prev == 5 {
                return Err(malformed(
                    470_510,
                    format!("Subdiffs should be objects, got {key}"),
                ));
            }
            return Err(malformed(
                4_770_507,
                format!("Expected {section} section to be type object"),
            ));
        };
        match order {
            1 => out.deletes = Some(body),
            2 => out.updates = Some(body),
            3 => out.inserts = Some(body),
            _ => out.subs.push((key.get(1..).unwrap_or_default(), body)),
        }
        prev = order;
    }
    if any {
        Ok(out)
    } else {
        Err(malformed(4_770_500, "Expected diff to be non-empty"))
    }
}

pub(crate) fn array_view(diff: &RawDocument) -> Result<ArrayDiffView<'_>, DiffError> {
    let mut it = elems(diff).peekable();
    let Some(header) = it.next().transpose()? else {
        return Err(malformed(4_770_500, "Expected diff to be non-empty"));
    };
    if header.key.as_str() != "a" {
        return Err(malformed(
            4_770_504,
            format!(
                "Expected first field to be array header a but found {}",
                header.key.as_str()
            ),
        ));
    }
    match header.value {
        RawBsonRef::Boolean(true) => {}
        RawBsonRef::Boolean(false) => {
            return Err(malformed(
                4_770_520,
                "Expected array header to be value true",
            ));
        }
        _ => return Err(malformed(4_770_519, "Expected array header to be bool")),
    }
    let mut resize = None;
    if let Some(Ok(e)) = it.peek()
        && e.key.as_str() == "l"
    {
        let RawBsonRef::Int32(len) = e.value else {
            return Err(malformed(4_770_507, "Expected l section to be type int"));
        };
        resize = Some(len);
        it.next();
    }
    let mut entries: Vec<(usize, ArrayMod<'_>)> = Vec::new();
    for e in it {
        let e = e?;
        let key = e.key.as_str();
        if key.len() < 2 {
            return Err(malformed(
                4_770_521,
                format!("expected field name to be at least two characters long, but found: {key}"),
            ));
        }
        let digits = key.get(1..).unwrap_or_default();
        let index = digits
            .bytes()
            .all(|b| b.is_ascii_digit())
            .then(|| digits.parse::<usize>().ok())
            .flatten()
            .ok_or_else(|| malformed(4_770_512, format!("Expected integer but got {digits}")))?;
        // mongod applies entries in ascending order only; out of order, its applier would
        // never finish, so such a diff is refused here.
        if entries.last().is_some_and(|(last, _)| *last >= index) {
            return Err(malformed(
                4_770_512,
                format!("Expected array diff indexes in ascending order, got {index}"),
            ));
        }
        let m = if key.starts_with('u') {
            ArrayMod::Update(e.value)
        } else if key.starts_with('s') {
            let RawBsonRef::Document(sub) = e.value else {
                return Err(malformed(
                    4_770_501,
                    format!("expected sub diff at index {index} but got {key}"),
                ));
            };
            ArrayMod::Sub(sub)
        } else {
            return Err(malformed(
                4_770_502,
                format!(
                    "Expected either 'u' (update) or 's' (sub diff) at index {index} but got {key}"
                ),
            ));
        };
        entries.push((index, m));
    }
    Ok(ArrayDiffView { resize, entries })
}

// ---------------------------------------------------------------------------------------------
// Applying diffs.

fn check_size(len: usize) -> Result<(), DiffError> {
    if len > MAX_OUTPUT_SIZE {
        Err(DiffError::TooLarge)
    } else {
        Ok(())
    }
}

fn put<'a>(
    table: &mut HashMap<&'a str, FieldMod<'a>>,
    key: &'a str,
    m: FieldMod<'a>,
) -> Result<(), DiffError> {
    if table.insert(key, m).is_some() {
        return Err(malformed(
            4_728_000,
            format!("duplicate field name in diff: {key}"),
        ));
    }
    Ok(())
}

enum FieldMod<'a> {
    Delete,
    Update,
    Insert,
    Sub(&'a RawDocument),
}

fn apply_to_object(
    pre: &RawDocument,
    diff: &RawDocument,
    depth: usize,
) -> Result<RawDocumentBuf, DiffError> {
    if depth > MAX_DEPTH {
        return Err(DiffError::TooDeep);
    }
    let view = doc_view(diff)?;
    let mut table: HashMap<&str, FieldMod<'_>> = HashMap::new();
    let mut to_insert: Vec<Elem<'_>> = Vec::new();
    if let Some(d) = view.deletes {
        for e in elems(d) {
            put(&mut table, e?.key.as_str(), FieldMod::Delete)?;
        }
    }
    if let Some(u) = view.updates {
        for e in elems(u) {
            let e = e?;
            put(&mut table, e.key.as_str(), FieldMod::Update)?;
            to_insert.push(e);
        }
    }
    if let Some(i) = view.inserts {
        for e in elems(i) {
            let e = e?;
            put(&mut table, e.key.as_str(), FieldMod::Insert)?;
            to_insert.push(e);
        }
    }
    for (key, sub) in &view.subs {
        put(&mut table, key, FieldMod::Sub(sub))?;
    }
    let updated: HashMap<&str, RawBsonRef<'_>> = to_insert
        .iter()
        .map(|e| (e.key.as_str(), e.value))
        .collect();
    let mut done: HashSet<&str> = HashSet::new();
    let mut out = RawDocumentBuf::new();
    for e in elems(pre) {
        let e = e?;
        let key = e.key.as_str();
        match table.get(key) {
            None => out.append(e.key, e.value),
            Some(FieldMod::Delete | FieldMod::Insert) => {}
            Some(FieldMod::Update) => {
                if let Some(v) = updated.get(key) {
                    out.append(e.key, *v);
                }
                done.insert(key);
            }
            Some(FieldMod::Sub(sub)) => match (e.value, view_kind(sub)?) {
                (RawBsonRef::Document(d), false) => {
                    out.append(e.key, &apply_to_object(d, sub, depth + 1)?);
                }
                (RawBsonRef::Array(a), true) => {
                    out.append(e.key, &apply_to_array(a, sub, depth + 1)?);
                }
                // The pre-image's type changed since the diff was taken: mongod writes null and
                // expects a later entry to overwrite it.
                _ => out.append(e.key, RawBsonRef::Null),
            },
        }
        check_size(out.as_bytes().len())?;
    }
    for e in &to_insert {
        if !done.contains(e.key.as_str()) {
            out.append(e.key, e.value);
            check_size(out.as_bytes().len())?;
        }
    }
    Ok(out)
}

/// `true` for an array diff (its first field is `a`), `false` for a document diff.
pub(crate) fn view_kind(diff: &RawDocument) -> Result<bool, DiffError> {
    match diff.iter_elements().next().transpose()? {
        None => Err(malformed(4_770_500, "Expected diff to be non-empty")),
        Some(e) => Ok(e.key().as_str() == "a"),
    }
}

fn apply_array_mod(
    pre: Option<RawBsonRef<'_>>,
    m: &ArrayMod<'_>,
    out: &mut RawArrayBuf,
    depth: usize,
) -> Result<(), DiffError> {
    match m {
        ArrayMod::Update(v) => out.push(*v),
        ArrayMod::Sub(sub) => match (pre, view_kind(sub)?) {
            (Some(RawBsonRef::Document(d)), false) => out.push(&apply_to_object(d, sub, depth)?),
            (Some(RawBsonRef::Array(a)), true) => out.push(&apply_to_array(a, sub, depth)?),
            // Missing or of another type: null, to be overwritten by a later entry.
            _ => out.push(RawBsonRef::Null),
        },
    }
    Ok(())
}

fn apply_to_array(
    pre: &RawArray,
    diff: &RawDocument,
    depth: usize,
) -> Result<RawArrayBuf, DiffError> {
    if depth > MAX_DEPTH {
        return Err(DiffError::TooDeep);
    }
    let view = array_view(diff)?;
    // A negative length reads as 0 elements kept.
    let resize = view.resize.map(|l| usize::try_from(l).unwrap_or(0));
    let mut mods = view.entries.iter().peekable();
    let mut out = RawArrayBuf::new();
    let mut index = 0usize;
    for e in elems(RawDocument::from_bytes(pre.as_bytes())?) {
        if resize.is_some_and(|r| index >= r) {
            break;
        }
        let e = e?;
        match mods.next_if(|(i, _)| *i == index) {
            Some((_, m)) => apply_array_mod(Some(e.value), m, &mut out, depth + 1)?,
            None => out.push(e.value),
        }
        check_size(out.as_bytes().len())?;
        index += 1;
    }
    while resize.is_some_and(|r| index < r) || mods.peek().is_some() {
        match mods.next_if(|(i, _)| *i == index) {
            Some((_, m)) => apply_array_mod(None, m, &mut out, depth + 1)?,
            // Not in the diff: padded with null.
            None => out.push(RawBsonRef::Null),
        }
        check_size(out.as_bytes().len())?;
        index += 1;
    }
    Ok(out)
}

/// mongod's `doc_diff::applyDiff`: the post-image from `pre` and a `$v: 2` diff (the `diff`
/// field of the oplog entry's `o`).
///
/// # Errors
/// Invalid BSON, a diff not in the `$v: 2` format (mongod's codes), nesting deeper than
/// [`MAX_DEPTH`], or a result larger than [`MAX_OUTPUT_SIZE`].
pub fn apply_diff(pre: &RawDocument, diff: &RawDocument) -> Result<RawDocumentBuf, DiffError> {
    apply_to_object(pre, diff, 0)
}

#[cfg(test)]
mod tests;
