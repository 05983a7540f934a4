//! Updates: compile once, then apply to each matched document.
//!
//! ```text
//! Update::compile(&u)?                                   operators or a replacement document
//! Update::compile_with_array_filters(&u, Some(&filters))? with `arrayFilters`
//! Update::compile_pipeline(&stages)?                     `u: [stage, …]`
//! Update::compile_modification(u, array_filters)?        any of these, from the command's `u`
//! Update::compile_modification_in(u, af, &variables)?    … whose pipeline sees `let` and `c`
//! update.apply(&doc)?                                    Some(new doc) or None (unchanged)
//! update.apply_with(&doc, &UpdateContext { filter: Some(&filter), .. })?
//! update.apply_logged(&doc, &ctx)?                       also what the oplog entry's `o` holds
//! upsert_seed(&filter.equality_fields(), &update)?       the document an upsert inserts
//! ```
//!
//! A document whose first field starts with `$` is an operator update; any other document
//! (including `{}`) is a replacement; an array is a pipeline. Operators: `$set`, `$unset`,
//! `$inc`, `$mul`, `$min`, `$max`, `$rename`, `$currentDate`, `$setOnInsert` (only acts when
//! inserting), `$push` (`$each`, `$slice`, `$sort`, `$position`), `$addToSet` (`$each`), `$pop`,
//! `$pull` (a value, or a condition matched by the filter engine), `$pullAll` and `$bit`; paths
//! may hold the positional `$` (the array index the statement's filter matched, from
//! [`Filter::matched_array_index`]), `$[]` (every element) and `$[<id>]` (elements matching
//! `arrayFilters`). Pipelines run `$set`/`$addFields`, `$unset`, `$project` and
//! `$replaceRoot`/`$replaceWith` with the engine's aggregation expressions (see `pipeline`). Not
//! supported: decimal128 arithmetic (`$inc`/`$mul` reject it with `NotImplemented`),
//! collations in pipelines, and the aggregation operators [`Expression`](super::Expression)
//! lacks. [`Update::with_collation`] gives operator updates the statement's collation.
//!
//! As in mongod, operator paths form one tree built at compile time (see `tree`), which is
//! where `ConflictingUpdateOperators` is detected; applying walks the document once along that
//! tree, copying untouched fields as raw bytes. Existing fields keep their position; created
//! fields are appended in field-name order; dotted paths create intermediate documents; numeric
//! components index arrays (padding with nulls); a path through a scalar or a non-numeric
//! component into an array is `PathNotViable`. `apply` returns `None` when the result is
//! byte-for-byte the original (an update that modified nothing, for `nModified`).

mod array_filters;
mod log;
mod ops;
mod pipeline;
mod tree;

use std::cmp::Ordering;
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use bson::{RawArray, RawBson, RawBsonRef, RawDocument, RawDocumentBuf};

use self::array_filters::ArrayFilters;
use self::log::Recorder;
use self::ops::Op;
use self::pipeline::Pipeline;
use self::tree::{At, Leaf, Node, is_array_filter_identifier};
use super::collation::Collation;
use super::compare::compare;
use super::display::{self, type_name};
use super::expr::Variables;
use super::filter::Filter;
use super::invalid_bson;
use crate::error::{CommandError, ErrorCode};
use crate::oplog::diff::{DELTA_OPLOG_ENTRY_METADATA_SIZE, compute_oplog_diff};

/// A compiled update: a replacement document, a tree of operators, or a pipeline.
#[derive(Debug, Clone)]
pub struct Update {
    kind: Kind,
}

#[derive(Debug, Clone)]
enum Kind {
    Replacement(RawDocumentBuf),
    Operators(Operators),
    Pipeline(Pipeline),
}

#[derive(Debug, Clone)]
struct Operators {
    root: Node,
    /// `$rename` sources, by rename number.
    renames: Vec<String>,
    filters: ArrayFilters,
    /// Whether a path holds the positional `$`.
    positional: bool,
    /// The statement's collation, see [`Update::with_collation`].
    collation: Option<Arc<Collation>>,
}

/// What an applied update logs in the oplog entry's `o` (see [`Update::apply_logged`]).
#[derive(Debug, Clone, PartialEq)]
pub enum Logged {
    /// `{$v: 2, diff: {...}}`, mongod's delta format (see [`crate::oplog::diff`]).
    Diff(RawDocumentBuf),
    /// The whole new document (no `$v`).
    Replacement,
}

/// What applying an update may need besides the document.
#[derive(Debug, Clone, Copy)]
pub struct UpdateContext<'a> {
    /// The statement's filter, whose matched array index the positional `$` stands for (only
    /// needed when [`Update::is_positional`]). Without it, or when the filter matched no array
    /// element, a positional update fails as in mongod: "The positional operator did not find
    /// the match needed from the query."
    pub filter: Option<&'a Filter>,
    /// The time `$currentDate` gives. (A pipeline's `$$NOW` comes from the [`Variables`] it
    /// was compiled with.)
    pub now: bson::DateTime,
    /// The timestamp `$currentDate: {$type: "timestamp"}` gives.
    pub timestamp: bson::Timestamp,
}

impl<'a> UpdateContext<'a> {
    /// A context at `now_ms` (milliseconds since the epoch), with the timestamp
    /// `Timestamp(now_ms / 1000, 1)` and no filter.
    pub fn at(now_ms: i64) -> UpdateContext<'a> {
        UpdateContext {
            filter: None,
            now: bson::DateTime::from_millis(now_ms),
            timestamp: bson::Timestamp {
                time: u32::try_from(now_ms.div_euclid(1000).max(0)).unwrap_or(u32::MAX),
                increment: 1,
            },
        }
    }

    /// A context at the system clock's current time.
    pub fn now() -> UpdateContext<'a> {
        let ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
        UpdateContext::at(ms)
    }
}

/// Per-application state shared by the tree walk.
#[derive(Clone, Copy)]
struct Env<'a> {
    /// The document's `_id`, for messages.
    id: Option<RawBsonRef<'a>>,
    /// Building an upsert's new document (`$setOnInsert` applies).
    insert: bool,
    /// The positional `$`'s array index.
    matched: Option<&'a str>,
    filters: &'a ArrayFilters,
    now: bson::DateTime,
    timestamp: bson::Timestamp,
    /// The value each `$rename` moves (`None`: its source does not exist).
    renames: &'a [Option<RawBson>],
    /// The statement's collation (`$min`, `$max`, `$addToSet`, `$pull`, `$pullAll`, `$push`'s
    /// `$sort` compare strings with it).
    collation: Option<&'a Collation>,
    /// Where leaves record what they log, when the oplog entry is wanted (see `log`).
    log: Option<&'a Recorder<'a>>,
}

const OPERATORS: &[&str] = &[
    "$set",
    "$setOnInsert",
    "$unset",
    "$inc",
    "$mul",
    "$min",
    "$max",
    "$rename",
    "$currentDate",
    "$push",
    "$addToSet",
    "$pop",
    "$pull",
    "$pullAll",
    "$bit",
];

impl Update {
    /// This update with strings compared by `collation` (the statement's `collation` option):
    /// in `arrayFilters`, `$pull` conditions, and the comparisons of `$min`, `$max`,
    /// `$addToSet`, `$pullAll` and `$push`'s `$sort`, as in mongod. Pipeline updates keep
    /// binary comparison. `None` changes nothing.
    #[must_use]
    pub fn with_collation(mut self, collation: Option<Arc<Collation>>) -> Update {
        if let (Kind::Operators(ops), Some(c)) = (&mut self.kind, collation) {
            ops.root.collate(&c);
            ops.filters.collate(&c);
            ops.collation = Some(c);
        }
        self
    }

    /// Compiles an update document (operators or a replacement), with mongod's parse errors.
    pub fn compile(update: &RawDocument) -> Result<Update, CommandError> {
        Update::compile_with_array_filters(update, None)
    }

    /// Compiles an update document with the statement's `arrayFilters`: every `$[<id>]` must
    /// have a filter (`BadValue`) and every filter must be used (`FailedToParse`).
    pub fn compile_with_array_filters(
        update: &RawDocument,
        array_filters: Option<&RawArray>,
    ) -> Result<Update, CommandError> {
        let filters = match array_filters {
            Some(a) => ArrayFilters::parse(a)?,
            None => ArrayFilters::default(),
        };
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
        let mut ops = Operators {
            root: Node::default(),
            renames: Vec::new(),
            filters,
            positional: false,
            collation: None,
        };
        let mut found = BTreeSet::new();
        for item in update {
            let (name, value) = item.map_err(|e| invalid_bson(&e))?;
            let name = name.as_str();
            if !OPERATORS.contains(&name) {
                return Err(CommandError::new(
                    ErrorCode::FailedToParse,
                    format!(
                        "Unknown modifier: {name}. Expected a valid update modifier or \
                         pipeline-style update specified as an array"
                    ),
                ));
            }
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
                if name == "$rename" {
                    ops.add_rename(path, arg, &mut found)?;
                    continue;
                }
                ops.positional |= check_update_path(path)?;
                let op = Op::parse(name, path, arg)?;
                let leaf = Leaf {
                    op,
                    path: path.to_owned(),
                };
                ops.root.insert(leaf, &ops.filters, &mut found)?;
            }
        }
        if let Some(unused) = ops.filters.identifiers().find(|id| !found.contains(*id)) {
            return Err(CommandError::new(
                ErrorCode::FailedToParse,
                format!(
                    "The array filter for identifier '{unused}' was not used in the update {}",
                    display::value(RawBsonRef::Document(update))
                ),
            ));
        }
        Ok(Update {
            kind: Kind::Operators(ops),
        })
    }

    /// Compiles a pipeline-style update (`u: [stage, …]`) with no user variables and `$$NOW`
    /// at the system clock's time.
    pub fn compile_pipeline(pipeline: &RawArray) -> Result<Update, CommandError> {
        Update::compile_pipeline_in(pipeline, &Arc::new(Variables::system_clock()))
    }

    /// Compiles a pipeline-style update whose expressions see `vars`.
    pub fn compile_pipeline_in(
        pipeline: &RawArray,
        vars: &Arc<Variables>,
    ) -> Result<Update, CommandError> {
        Ok(Update {
            kind: Kind::Pipeline(Pipeline::parse(pipeline, vars)?),
        })
    }

    /// Compiles the command's `u`/`update` value: a document (operators or replacement) or an
    /// array (a pipeline, which may not have `arrayFilters`). Other types are the caller's
    /// `TypeMismatch` to report; here they are `FailedToParse`.
    pub fn compile_modification(
        update: RawBsonRef<'_>,
        array_filters: Option<&RawArray>,
    ) -> Result<Update, CommandError> {
        Update::compile_modification_in(update, array_filters, &Arc::new(Variables::system_clock()))
    }

    /// [`Update::compile_modification`] where a pipeline's expressions see `vars` (the
    /// command's `$$NOW` and `let`, and the statement's `c`).
    pub fn compile_modification_in(
        update: RawBsonRef<'_>,
        array_filters: Option<&RawArray>,
        vars: &Arc<Variables>,
    ) -> Result<Update, CommandError> {
        match update {
            RawBsonRef::Document(d) => Update::compile_with_array_filters(d, array_filters),
            RawBsonRef::Array(stages) => {
                if array_filters.is_some() {
                    return Err(CommandError::new(
                        ErrorCode::FailedToParse,
                        "arrayFilters may not be specified for pipeline-style updates",
                    ));
                }
                Update::compile_pipeline_in(stages, vars)
            }
            other => Err(CommandError::new(
                ErrorCode::FailedToParse,
                format!(
                    "Update argument must be either an object or an array, not {}",
                    type_name(other.element_type())
                ),
            )),
        }
    }

    /// Whether this is a replacement document rather than operators or a pipeline.
    pub fn is_replacement(&self) -> bool {
        matches!(self.kind, Kind::Replacement(_))
    }

    /// Whether this is a pipeline-style update.
    pub fn is_pipeline(&self) -> bool {
        matches!(self.kind, Kind::Pipeline(_))
    }

    /// Runs a pipeline-style update's stages on `doc` as aggregation stages run them: the result
    /// is what the stages produce, with none of an update's `_id` rules. `None` when this is not
    /// a pipeline. (Aggregation's `$set`/`$addFields`, `$unset`, `$replaceRoot` and
    /// `$replaceWith` are these stages.)
    pub fn run_stages(&self, doc: &RawDocument) -> Option<Result<RawDocumentBuf, CommandError>> {
        match &self.kind {
            Kind::Pipeline(p) => Some(p.apply(doc)),
            Kind::Replacement(_) | Kind::Operators(_) => None,
        }
    }

    /// Whether a path uses the positional `$`, so that applying needs the statement's filter
    /// ([`UpdateContext::filter`]).
    pub fn is_positional(&self) -> bool {
        matches!(&self.kind, Kind::Operators(ops) if ops.positional)
    }

    /// Applies the update to a stored document at the system clock's time, without a filter
    /// (see [`apply_with`](Update::apply_with)).
    pub fn apply(&self, doc: &RawDocument) -> Result<Option<RawDocumentBuf>, CommandError> {
        self.apply_with(doc, &UpdateContext::now())
    }

    /// Applies the update to a stored document: `Some(new)` if anything changed, `None` if the
    /// result is identical. Errors are per-document write errors (`ImmutableField`,
    /// `PathNotViable`, `TypeMismatch`, …).
    pub fn apply_with(
        &self,
        doc: &RawDocument,
        ctx: &UpdateContext<'_>,
    ) -> Result<Option<RawDocumentBuf>, CommandError> {
        let out = self.apply_inner(doc, ctx, false, None)?;
        Ok((out.as_bytes() != doc.as_bytes()).then_some(out))
    }

    /// [`apply_with`](Update::apply_with), also giving what mongod logs in the oplog entry's `o`
    /// for it: `None` exactly when `apply_with` gives `None`. Operator updates log the `$v: 2`
    /// diff mongod's update driver builds from what each operator did (see `log`), pipelines the
    /// diff of the two images (`computeOplogDiff`) unless it is not smaller than the new
    /// document, replacements (and those pipelines) the new document.
    pub fn apply_logged(
        &self,
        doc: &RawDocument,
        ctx: &UpdateContext<'_>,
    ) -> Result<Option<(RawDocumentBuf, Logged)>, CommandError> {
        let (out, logged) = match &self.kind {
            Kind::Operators(ops) => {
                let recorder = Recorder::new(&ops.renames);
                let out = self.apply_inner(doc, ctx, false, Some(&recorder))?;
                if out.as_bytes() == doc.as_bytes() {
                    return Ok(None);
                }
                let logged = recorder
                    .finish(doc)
                    .map_or(Logged::Replacement, Logged::Diff);
                (out, logged)
            }
            Kind::Pipeline(_) => {
                let out = self.apply_inner(doc, ctx, false, None)?;
                if out.as_bytes() == doc.as_bytes() {
                    return Ok(None);
                }
                // A diff that cannot be computed (nesting deeper than mongod allows) is logged
                // as the replacement it falls back to.
                let logged = match compute_oplog_diff(doc, &out, DELTA_OPLOG_ENTRY_METADATA_SIZE) {
                    Ok(Some(diff)) => {
                        let mut o = RawDocumentBuf::new();
                        o.append(bson::raw::cstr!("$v"), 2);
                        o.append(bson::raw::cstr!("diff"), &diff);
                        Logged::Diff(o)
                    }
                    Ok(None) | Err(_) => Logged::Replacement,
                };
                (out, logged)
            }
            Kind::Replacement(_) => {
                let out = self.apply_inner(doc, ctx, false, None)?;
                if out.as_bytes() == doc.as_bytes() {
                    return Ok(None);
                }
                (out, Logged::Replacement)
            }
        };
        Ok(Some((out, logged)))
    }

    fn apply_inner(
        &self,
        doc: &RawDocument,
        ctx: &UpdateContext<'_>,
        insert: bool,
        log: Option<&Recorder<'_>>,
    ) -> Result<RawDocumentBuf, CommandError> {
        match &self.kind {
            Kind::Replacement(r) => replace(doc, r, false),
            Kind::Operators(ops) => {
                let id = doc.get("_id").ok().flatten();
                let matched = match ctx.filter {
                    Some(filter) if ops.positional && !insert => {
                        filter.matched_array_index(doc).map(|i| i.to_string())
                    }
                    _ => None,
                };
                let mut env = Env {
                    id,
                    insert,
                    matched: matched.as_deref(),
                    filters: &ops.filters,
                    now: ctx.now,
                    timestamp: ctx.timestamp,
                    renames: &[],
                    collation: ops.collation.as_deref(),
                    log,
                };
                let mut sources = Vec::with_capacity(ops.renames.len());
                for from in &ops.renames {
                    sources.push(tree::rename_source(doc, from, &env)?);
                }
                env.renames = &sources;
                let out = ops.root.apply_to_doc(doc, At::root(), &env)?;
                // Only an insert can create `_id`, and only a `$`-prefixed top-level path can
                // create a `$` field; otherwise the stored document already passed these checks.
                if insert || ops.root.has_dollar_child() {
                    check_for_storage(&out, false)?;
                }
                Ok(out)
            }
            Kind::Pipeline(p) => {
                let out = p.apply(doc)?;
                replace(doc, &out, true)
            }
        }
    }
}

impl Operators {
    /// `{$rename: {from: "to"}}`: a placeholder leaf at `from` (so that other operators on it
    /// conflict), the checks mongod's `RenameNode::init` makes, then the leaf at `to`.
    fn add_rename(
        &mut self,
        from: &str,
        to: RawBsonRef<'_>,
        found: &mut BTreeSet<String>,
    ) -> Result<(), CommandError> {
        let n = self.renames.len();
        check_update_path(from)?;
        let placeholder = Leaf {
            op: Op::RenameFrom(n),
            path: from.to_owned(),
        };
        self.root.insert(placeholder, &self.filters, found)?;
        let RawBsonRef::String(to_path) = to else {
            return Err(CommandError::bad_value(format!(
                "The 'to' field for $rename must be a string: {}",
                display::element(from, to)
            )));
        };
        check_update_path(to_path)?;
        if to_path.contains('\0') {
            return Err(CommandError::bad_value(
                "The 'to' field for $rename cannot contain an embedded null byte",
            ));
        }
        let shown = display::element(from, to);
        if from == to_path {
            return Err(CommandError::bad_value(format!(
                "The source and target field for $rename must differ: {shown}"
            )));
        }
        let is_prefix = |a: &str, b: &str| b.strip_prefix(a).is_some_and(|r| r.starts_with('.'));
        if is_prefix(from, to_path) || is_prefix(to_path, from) {
            return Err(CommandError::bad_value(format!(
                "The source and target field for $rename must not be on the same path: {shown}"
            )));
        }
        let dynamic = |p: &str| {
            p.split('.')
                .any(|part| part == "$" || is_array_filter_identifier(part))
        };
        if dynamic(from) {
            return Err(CommandError::bad_value(format!(
                "The source field for $rename may not be dynamic: {from}"
            )));
        }
        if dynamic(to_path) {
            return Err(CommandError::bad_value(format!(
                "The destination field for $rename may not be dynamic: {to_path}"
            )));
        }
        let leaf = Leaf {
            op: Op::RenameTo(n),
            path: to_path.to_owned(),
        };
        self.root.insert(leaf, &self.filters, found)?;
        self.renames.push(from.to_owned());
        Ok(())
    }
}

/// The document an upsert inserts when nothing matched: the filter's equality fields
/// (`Filter::equality_fields`, except paths with a `$` or `$[…]` component), then the update
/// applied with `$setOnInsert` active (operators and pipelines alike). For a replacement, only
/// the filter's `_id` is kept. `_id` is moved first when present; the caller
/// generates one when it is absent. Uses the system clock (see [`upsert_seed_with`]).
pub fn upsert_seed(
    filter_equalities: &[(String, RawBson)],
    update: &Update,
) -> Result<RawDocumentBuf, CommandError> {
    upsert_seed_with(filter_equalities, update, &UpdateContext::now())
}

/// [`upsert_seed`] with an explicit context (`$currentDate`'s time). The filter is not used:
/// an insert has no matched array index, so a positional `$` fails as in mongod.
pub fn upsert_seed_with(
    filter_equalities: &[(String, RawBson)],
    update: &Update,
    ctx: &UpdateContext<'_>,
) -> Result<RawDocumentBuf, CommandError> {
    let mut seed = RawDocumentBuf::new();
    match &update.kind {
        Kind::Operators(_) | Kind::Pipeline(_) => {
            // mongod keeps the equalities in a map ordered by path.
            let mut sorted: Vec<&(String, RawBson)> = Vec::new();
            // A query path with a positional-looking component (`a.$`, `a.$[]`) names nothing
            // an insert can create: it does not seed the document.
            let seedable = |path: &str| {
                !path
                    .split('.')
                    .any(|p| p == "$" || is_array_filter_identifier(p))
            };
            for eq in filter_equalities.iter().filter(|eq| seedable(&eq.0)) {
                check_equality_conflict(&sorted, &eq.0)?;
                let pos = sorted.partition_point(|e| e.0 < eq.0);
                sorted.insert(pos, eq);
            }
            let filters = ArrayFilters::default();
            let env = Env {
                id: None,
                insert: true,
                matched: None,
                filters: &filters,
                now: ctx.now,
                timestamp: ctx.timestamp,
                renames: &[],
                collation: None,
                log: None,
            };
            for (path, value) in sorted {
                let mut node = Node::default();
                let leaf = Leaf {
                    op: Op::Set(value.clone()),
                    path: path.clone(),
                };
                node.insert(leaf, &filters, &mut BTreeSet::new())?;
                seed = node.apply_to_doc(&seed, At::root(), &env)?;
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
    let out = update.apply_inner(&seed, ctx, true, None)?;
    let out = id_first(&out)?;
    check_for_storage(&out, update.is_pipeline())?;
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

/// The storage checks mongod runs on an updated document: no `$`-prefixed top-level field
/// (pipelines may create them) and an `_id` of a storable type.
fn check_for_storage(doc: &RawDocument, allow_dollar: bool) -> Result<(), CommandError> {
    for item in doc {
        let (k, v) = item.map_err(|e| invalid_bson(&e))?;
        if !allow_dollar && k.as_str().starts_with('$') {
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

/// A replacement (or a pipeline's result) keeps the original `_id` (first), which it may
/// repeat but not change.
fn replace(
    doc: &RawDocument,
    r: &RawDocument,
    allow_dollar: bool,
) -> Result<RawDocumentBuf, CommandError> {
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
    check_for_storage(&out, allow_dollar)?;
    Ok(out)
}

/// mongod's `fieldchecker::isUpdatable` and the positional checks of `parseAndMerge`; returns
/// whether the path holds the positional `$`.
fn check_update_path(path: &str) -> Result<bool, CommandError> {
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
    let positions: Vec<usize> = path
        .split('.')
        .enumerate()
        .filter(|(_, p)| *p == "$")
        .map(|(i, _)| i)
        .collect();
    if positions.len() > 1 {
        return Err(CommandError::bad_value(format!(
            "Too many positional (i.e. '$') elements found in path '{path}'"
        )));
    }
    if positions.first() == Some(&0) {
        return Err(CommandError::bad_value(format!(
            "Cannot have positional (i.e. '$') element in the first position in path '{path}'"
        )));
    }
    Ok(!positions.is_empty())
}

#[cfg(test)]
mod tests;
