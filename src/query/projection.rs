//! find projections: `Projection::compile(&spec)?` once, then `projection.apply(&doc)`.
//!
//! Supported, with mongod 7.0's parser rules and errors (codes 31249-31395, 51270 and the
//! `FieldPath` checks):
//!
//! - inclusion (`{a: 1}`) and exclusion (`{a: 0}`) with truthy (`true`, non-zero numbers) and
//!   falsy values; `_id` is included unless `_id: 0`; dotted paths and sub-objects
//!   (`{"a.b": 1}` = `{a: {b: 1}}`), applied through arrays of documents. Inclusion keeps the
//!   document's field order and drops scalars inside arrays it descends; exclusion keeps
//!   everything it does not name;
//! - computed fields: literals (`{a: "x"}`), field paths (`{a: "$b"}`) and aggregation
//!   expressions (`{a: {$add: ["$b", 1]}}`, see [`Expression`]), which make an inclusion
//!   projection and come after the document's own fields, in projection order;
//! - `$slice` (`n`, `-n`, `[skip, n]`), `$elemMatch` (top-level fields), and the positional
//!   `a.$`, whose element comes from the query's match ([`Projection::apply_with_filter`]).
//!   As in mongod 4.4+, `$slice` and `$elemMatch` results follow the included fields in an
//!   inclusion projection and stay in place in an exclusion projection.
//!
//! Not supported: `$meta` (`NotImplemented`: Ebb has no text search or search scores).
//! In an aggregation `$project` ([`Projection::compile_for_pipeline`]) the positional
//! projection is mongod's error, and `$slice`/`$elemMatch` are expressions.

use std::sync::Arc;

use bson::raw::CString;
use bson::{RawArray, RawArrayBuf, RawBson, RawBsonRef, RawDocument, RawDocumentBuf};

use super::expr::{self, Expression, Variables};
use super::filter::{Filter, FilterContext};
use super::{check_field_path, display, invalid_bson, not_implemented, true_value};
use crate::error::{CommandError, ErrorCode};

/// A compiled projection.
#[derive(Debug, Clone)]
pub struct Projection {
    inclusion: bool,
    root: Node,
    /// The path of a positional projection `path.$`, without the `.$`.
    positional: Option<Vec<String>>,
}

#[derive(Debug, Clone, Default)]
struct Node {
    children: Vec<(CString, Child)>,
}

#[derive(Debug, Clone)]
enum Child {
    Include,
    Exclude,
    /// A literal or an expression, evaluated against the whole document.
    Computed(Box<Expression>),
    Node(Node),
    /// find's `$slice`: `skip` is `None` for the `{$slice: n}` form.
    Slice {
        skip: Option<i32>,
        limit: i32,
    },
    /// find's `$elemMatch` on a top-level field: the filter `{field: {$elemMatch: …}}`.
    ElemMatch(Box<Filter>),
    /// `path.$`: included, then narrowed to the query's matching element.
    Positional,
}

#[expect(
    clippy::struct_excessive_bools,
    reason = "independent facts about one projection"
)]
struct Ctx {
    /// The command's variables, which expressions (and `$elemMatch`'s `$expr`) see.
    vars: Arc<Variables>,
    /// `Some(true)` for inclusion, `Some(false)` for exclusion, once a field decides it.
    inclusion: Option<bool>,
    id_specified: bool,
    id_included: bool,
    has_slice: bool,
    has_elem_match: bool,
    positional: Option<Vec<String>>,
    /// An aggregation `$project` rather than a find projection.
    pipeline: bool,
}

fn location(code: i32, msg: impl Into<String>) -> CommandError {
    CommandError::new(ErrorCode::Location(code), msg)
}

impl Projection {
    /// Compiles a find (or findAndModify `fields`) projection.
    pub fn compile(spec: &RawDocument) -> Result<Projection, CommandError> {
        Projection::compile_in(spec, &Arc::new(Variables::system_clock()))
    }

    /// [`Projection::compile`] with expressions that see the command's variables (`$$NOW`,
    /// `let`).
    pub fn compile_in(
        spec: &RawDocument,
        vars: &Arc<Variables>,
    ) -> Result<Projection, CommandError> {
        Projection::compile_inner(spec, false, vars)
    }

    /// Compiles an aggregation `$project` specification: no positional projection, and
    /// `$slice`/`$elemMatch` are read as aggregation expressions.
    pub fn compile_for_pipeline(spec: &RawDocument) -> Result<Projection, CommandError> {
        Projection::compile_for_pipeline_in(spec, &Arc::new(Variables::system_clock()))
    }

    /// [`Projection::compile_for_pipeline`] with the command's variables.
    pub fn compile_for_pipeline_in(
        spec: &RawDocument,
        vars: &Arc<Variables>,
    ) -> Result<Projection, CommandError> {
        Projection::compile_inner(spec, true, vars)
    }

    fn compile_inner(
        spec: &RawDocument,
        pipeline: bool,
        vars: &Arc<Variables>,
    ) -> Result<Projection, CommandError> {
        let mut ctx = Ctx {
            vars: Arc::clone(vars),
            inclusion: None,
            id_specified: false,
            id_included: false,
            has_slice: false,
            has_elem_match: false,
            positional: None,
            pipeline,
        };
        let mut root = Node::default();
        for item in spec {
            let (name, value) = item.map_err(|e| invalid_bson(&e))?;
            let name = name.as_str();
            ctx.id_specified |= name == "_id" || name.starts_with("_id.");
            parse_element(&mut ctx, name, value, &mut root, &[])?;
        }
        // find()'s defaults when no field decided: {_id: 1} includes, then $slice excludes,
        // then $elemMatch includes.
        let inclusion = ctx.inclusion.unwrap_or(if ctx.id_included {
            true
        } else if ctx.has_slice {
            false
        } else {
            ctx.has_elem_match
        });
        if inclusion && !ctx.id_specified {
            root.add_at_path(&["_id"], "_id", Child::Include)?;
        }
        if !inclusion && ctx.id_included {
            // `{_id: 1, a: 0}` is an exclusion; `_id` is kept by default anyway.
            root.children.retain(|(k, _)| k.as_str() != "_id");
        }
        Ok(Projection {
            inclusion,
            root,
            positional: ctx.positional,
        })
    }

    /// Whether this is an inclusion projection (otherwise an exclusion, possibly empty).
    pub fn is_inclusion(&self) -> bool {
        self.inclusion
    }

    /// Whether the projection has a positional `a.$`, which needs the query filter
    /// ([`Projection::apply_with_filter`]).
    pub fn is_positional(&self) -> bool {
        self.positional.is_some()
    }

    /// Projects `doc`. Computed fields whose expression fails are left out, and a positional
    /// `a.$` keeps the whole array: callers with a query use
    /// [`Projection::apply_with_filter`], others [`Projection::try_apply`].
    pub fn apply(&self, doc: &RawDocument) -> RawDocumentBuf {
        self.project(doc, false).unwrap_or_default()
    }

    /// Projects `doc`, failing as mongod does when an expression fails to evaluate. A
    /// positional projection behaves as with an empty query: it fails on reaching an array.
    pub fn try_apply(&self, doc: &RawDocument) -> Result<RawDocumentBuf, CommandError> {
        self.apply_with_filter(doc, &Filter::match_all())
    }

    /// Projects `doc`, a document that matched `filter`: the positional `a.$` keeps the array
    /// element at the position the filter matched (mongod's errors 51246 when the query
    /// recorded none, 51247 when the array is shorter). mongod's `find` prefixes these
    /// runtime errors with "Executor error during find command :: caused by :: ".
    pub fn apply_with_filter(
        &self,
        doc: &RawDocument,
        filter: &Filter,
    ) -> Result<RawDocumentBuf, CommandError> {
        let out = self.project(doc, true)?;
        match &self.positional {
            Some(path) => apply_positional(out, path, filter.matched_array_index(doc)),
            None => Ok(out),
        }
    }

    fn project(&self, doc: &RawDocument, strict: bool) -> Result<RawDocumentBuf, CommandError> {
        let cx = Apply { root: doc, strict };
        if self.inclusion {
            include_doc(&cx, &self.root, doc)
        } else {
            exclude_doc(&cx, &self.root, doc)
        }
    }
}

fn parse_element(
    ctx: &mut Ctx,
    name: &str,
    value: RawBsonRef<'_>,
    parent: &mut Node,
    prefix: &[String],
) -> Result<(), CommandError> {
    let positional = name.ends_with(".$");
    if positional && ctx.pipeline {
        return Err(location(
            31324,
            "Cannot use positional projection in aggregation projection",
        ));
    }
    if name.contains(".$.") {
        return Err(location(
            31394,
            "As of 4.4, it's illegal to specify positional operator in the middle of a path.\
             Positional projection may only be used at the end, for example: a.b.$. If the \
             query previously used a form like a.b.$.d, remove the parts following the '$' \
             and the results will be equivalent.",
        ));
    }
    let is_root = prefix.is_empty();
    match value {
        RawBsonRef::Document(sub) => {
            if positional {
                return Err(location(
                    31271,
                    "positional projection cannot be used with an expression or sub object",
                ));
            }
            parse_sub_object(ctx, name, sub, parent, prefix)
        }
        RawBsonRef::Boolean(_)
        | RawBsonRef::Int32(_)
        | RawBsonRef::Int64(_)
        | RawBsonRef::Double(_)
        | RawBsonRef::Decimal128(_) => {
            let top_level_id = is_root && name == "_id";
            if true_value(value) {
                parse_inclusion(ctx, name, parent, prefix, positional)?;
                if top_level_id {
                    ctx.id_included = true;
                } else {
                    if ctx.inclusion == Some(false) {
                        return Err(location(
                            31253,
                            format!("Cannot do inclusion on field {name} in exclusion projection"),
                        ));
                    }
                    ctx.inclusion = Some(true);
                }
            } else {
                check_field_path(name)?;
                let parts: Vec<&str> = name.split('.').collect();
                parent.add_at_path(&parts, name, Child::Exclude)?;
                if !top_level_id {
                    if ctx.inclusion == Some(true) {
                        return Err(location(
                            31254,
                            format!("Cannot do exclusion on field {name} in inclusion projection"),
                        ));
                    }
                    ctx.inclusion = Some(false);
                }
            }
            Ok(())
        }
        literal => {
            if positional {
                return Err(location(
                    31308,
                    "positional projection cannot be used with a literal",
                ));
            }
            check_field_path(name)?;
            let parts: Vec<&str> = name.split('.').collect();
            let expr = Expression::parse_in(literal, &ctx.vars)?;
            parent.add_at_path(&parts, name, Child::Computed(Box::new(expr)))?;
            if ctx.inclusion == Some(false) {
                return Err(location(
                    31310,
                    format!(
                        "Cannot use an expression {} in an exclusion projection",
                        display::element(name, literal)
                    ),
                ));
            }
            ctx.inclusion = Some(true);
            Ok(())
        }
    }
}

fn parse_inclusion(
    ctx: &mut Ctx,
    name: &str,
    parent: &mut Node,
    prefix: &[String],
    positional: bool,
) -> Result<(), CommandError> {
    if !positional {
        check_field_path(name)?;
        let parts: Vec<&str> = name.split('.').collect();
        return parent.add_at_path(&parts, name, Child::Include);
    }
    if ctx.positional.is_some() {
        return Err(location(
            31276,
            "Cannot specify more than one positional projection per query.",
        ));
    }
    if ctx.has_elem_match {
        return Err(location(
            31256,
            "Cannot specify positional operator and $elemMatch.",
        ));
    }
    if name == ".$" {
        return Err(location(
            5_392_900,
            format!("Projection on field {name} is invalid"),
        ));
    }
    let path = &name[..name.len() - 2];
    check_field_path(path)?;
    let parts: Vec<&str> = path.split('.').collect();
    parent.add_at_path(&parts, path, Child::Positional)?;
    let mut full: Vec<String> = prefix.to_vec();
    full.extend(parts.iter().map(|p| (*p).to_owned()));
    ctx.positional = Some(full);
    Ok(())
}

fn parse_sub_object(
    ctx: &mut Ctx,
    name: &str,
    sub: &RawDocument,
    parent: &mut Node,
    prefix: &[String],
) -> Result<(), CommandError> {
    let mut items = Vec::new();
    for item in sub {
        items.push(item.map_err(|e| invalid_bson(&e))?);
    }
    if items.is_empty() {
        return Err(location(
            51270,
            "An empty sub-projection is not a valid value. Found empty object at path",
        ));
    }
    check_field_path(name)?;
    let parts: Vec<&str> = name.split('.').collect();
    if let [(key, arg)] = items.as_slice()
        && let Some(op) = key.as_str().strip_prefix('$')
    {
        let child = parse_operator(ctx, name, op, *arg, sub, &parts, prefix)?;
        return parent.add_at_path(&parts, name, child);
    }
    let mut full: Vec<String> = prefix.to_vec();
    full.extend(parts.iter().map(|p| (*p).to_owned()));
    let node = parent.node_at_path(&parts, name)?;
    for (k, v) in items {
        parse_element(ctx, k.as_str(), v, node, &full)?;
    }
    Ok(())
}

/// `{name: {$op: arg}}`: find's `$slice`/`$elemMatch`, `$meta`, or an expression.
fn parse_operator(
    ctx: &mut Ctx,
    name: &str,
    op: &str,
    arg: RawBsonRef<'_>,
    sub: &RawDocument,
    parts: &[&str],
    prefix: &[String],
) -> Result<Child, CommandError> {
    match op {
        "slice" if !ctx.pipeline => {
            let child = parse_find_slice(arg)?;
            ctx.has_slice = true;
            Ok(child)
        }
        "elemMatch" if !ctx.pipeline => {
            let RawBsonRef::Document(_) = arg else {
                return Err(location(
                    31274,
                    format!(
                        "elemMatch: Invalid argument, object required, but got {}",
                        display::type_name(arg.element_type())
                    ),
                ));
            };
            if ctx.positional.is_some() {
                return Err(location(
                    31255,
                    "Cannot specify positional operator and $elemMatch.",
                ));
            }
            if parts.len() != 1 || !prefix.is_empty() {
                return Err(location(
                    31275,
                    "Cannot use $elemMatch projection on a nested field.",
                ));
            }
            let mut query = RawDocumentBuf::new();
            let key = CString::try_from(name).map_err(|e| invalid_bson(&e))?;
            query.append(key, RawBsonRef::Document(sub));
            let filter = Filter::compile_in(&query, FilterContext::Query, &ctx.vars)?;
            ctx.has_elem_match = true;
            Ok(Child::ElemMatch(Box::new(filter)))
        }
        "meta" => Err(not_implemented("$meta projections")),
        op if expr::is_expression_name(op) => {
            if ctx.inclusion == Some(false) {
                return Err(location(
                    31252,
                    "Cannot use expression other than $meta in exclusion projection",
                ));
            }
            ctx.inclusion = Some(true);
            Ok(Child::Computed(Box::new(Expression::parse_in(
                RawBsonRef::Document(sub),
                &ctx.vars,
            )?)))
        }
        op => Err(location(31325, format!("Unknown expression ${op}"))),
    }
}

/// mongod's `safeNumberInt`: numbers saturate to the 32-bit range, NaN is 0.
#[expect(
    clippy::cast_possible_truncation,
    reason = "saturating conversion, as mongod"
)]
fn safe_int(v: RawBsonRef<'_>) -> i32 {
    match v {
        RawBsonRef::Int32(i) => i,
        RawBsonRef::Int64(i) => i32::try_from(i).unwrap_or(if i < 0 { i32::MIN } else { i32::MAX }),
        other => super::compare::number_as_f64(other).map_or(0, |d| d as i32),
    }
}

fn parse_find_slice(arg: RawBsonRef<'_>) -> Result<Child, CommandError> {
    let is_number = |v: RawBsonRef<'_>| super::compare::number_as_f64(v).is_some();
    if is_number(arg) {
        return Ok(Child::Slice {
            skip: None,
            limit: safe_int(arg),
        });
    }
    let RawBsonRef::Array(arr) = arg else {
        return Err(location(
            31273,
            "$slice only supports numbers and [skip, limit] arrays",
        ));
    };
    let items: Vec<RawBsonRef<'_>> = arr
        .into_iter()
        .collect::<Result<_, _>>()
        .map_err(|e| invalid_bson(&e))?;
    let [skip, limit] = items.as_slice() else {
        return Err(location(
            31272,
            "$slice array argument should be of form [skip, limit]",
        ));
    };
    if !is_number(*skip) {
        return Err(location(
            31257,
            format!(
                "$slice expects the skip argument to be a number, got {}",
                display::type_name(skip.element_type())
            ),
        ));
    }
    if !is_number(*limit) {
        return Err(location(
            31258,
            format!(
                "$slice expects the limit argument to be a number, got {}",
                display::type_name(limit.element_type())
            ),
        ));
    }
    let limit = safe_int(*limit);
    if limit <= 0 {
        return Err(location(
            31259,
            format!("$slice limit must be positive, got {limit}"),
        ));
    }
    Ok(Child::Slice {
        skip: Some(safe_int(*skip)),
        limit,
    })
}

impl Node {
    fn position(&self, name: &str) -> Option<usize> {
        self.children.iter().position(|(k, _)| k.as_str() == name)
    }

    fn get(&self, name: &str) -> Option<&Child> {
        self.children
            .iter()
            .find(|(k, _)| k.as_str() == name)
            .map(|(_, c)| c)
    }

    fn push(&mut self, name: &str, child: Child) -> Result<usize, CommandError> {
        let key = CString::try_from(name).map_err(|e| invalid_bson(&e))?;
        self.children.push((key, child));
        Ok(self.children.len() - 1)
    }

    /// mongod's `addNodeAtPath`: adds `leaf` at `parts`, creating inner nodes.
    fn add_at_path(&mut self, parts: &[&str], full: &str, leaf: Child) -> Result<(), CommandError> {
        let mut node = self;
        for (i, part) in parts.iter().enumerate() {
            let last = i + 1 == parts.len();
            let idx = match node.position(part) {
                Some(_) if last => {
                    return Err(location(31250, format!("Path collision at {full}")));
                }
                Some(idx) => idx,
                None if last => {
                    node.push(part, leaf)?;
                    return Ok(());
                }
                None => node.push(part, Child::Node(Node::default()))?,
            };
            let Child::Node(next) = &mut node.children[idx].1 else {
                return Err(location(
                    31249,
                    format!(
                        "Path collision at {full} remaining portion {}",
                        parts[1..].join(".")
                    ),
                ));
            };
            node = next;
        }
        Ok(())
    }

    /// The inner node at `parts` (for a sub-object), created if needed.
    fn node_at_path(&mut self, parts: &[&str], full: &str) -> Result<&mut Node, CommandError> {
        let mut node = self;
        for part in parts {
            let idx = match node.position(part) {
                Some(idx) => idx,
                None => node.push(part, Child::Node(Node::default()))?,
            };
            let Child::Node(next) = &mut node.children[idx].1 else {
                return Err(location(31250, format!("Path collision at {full}")));
            };
            node = next;
        }
        Ok(node)
    }

    /// Whether the subtree adds computed fields (which create missing parents).
    fn has_computed(&self) -> bool {
        self.children.iter().any(|(_, c)| match c {
            Child::Computed(_) => true,
            Child::Node(n) => n.has_computed(),
            _ => false,
        })
    }
}

/// What applying a projection needs besides the node and the current (sub)document.
struct Apply<'a> {
    /// The whole input document, which expressions and `$elemMatch` read.
    root: &'a RawDocument,
    /// Whether expression errors fail the projection (otherwise the field is left out).
    strict: bool,
}

impl Apply<'_> {
    fn eval(&self, e: &Expression) -> Result<Option<RawBson>, CommandError> {
        match e.evaluate(self.root) {
            Ok(v) => Ok(v),
            Err(err) if self.strict => Err(err),
            Err(_) => Ok(None),
        }
    }
}

fn include_doc(
    cx: &Apply<'_>,
    node: &Node,
    doc: &RawDocument,
) -> Result<RawDocumentBuf, CommandError> {
    let mut out = RawDocumentBuf::new();
    let mut present = vec![false; node.children.len()];
    for (k, v) in doc.iter().map_while(Result::ok) {
        let Some(idx) = node.position(k.as_str()) else {
            continue;
        };
        present[idx] = true;
        match (&node.children[idx].1, v) {
            (Child::Include | Child::Positional, _) => out.append(k, v),
            (Child::Node(sub), RawBsonRef::Document(d)) => out.append(k, include_doc(cx, sub, d)?),
            (Child::Node(sub), RawBsonRef::Array(a)) => out.append(k, include_array(cx, sub, a)?),
            (Child::Node(sub), _) if sub.has_computed() => {
                out.append(k, include_doc(cx, sub, &RawDocumentBuf::new())?);
            }
            _ => {}
        }
    }
    // Computed fields come after the document's own, in projection order.
    for ((k, child), seen) in node.children.iter().zip(present) {
        match child {
            Child::Computed(e) => {
                if let Some(v) = cx.eval(e)? {
                    out.append(k, v);
                }
            }
            Child::Node(sub) if !seen && sub.has_computed() => {
                out.append(k, include_doc(cx, sub, &RawDocumentBuf::new())?);
            }
            Child::Slice { skip, limit } => {
                if let Some(v) = doc.get(k.as_str()).ok().flatten() {
                    out.append(k, slice(v, *skip, *limit));
                }
            }
            Child::ElemMatch(filter) => {
                if let Some(v) = elem_match(filter, cx.root, k.as_str()) {
                    out.append(k, v);
                }
            }
            _ => {}
        }
    }
    Ok(out)
}

fn include_array(cx: &Apply<'_>, node: &Node, a: &RawArray) -> Result<RawArrayBuf, CommandError> {
    let mut out = RawArrayBuf::new();
    for e in a.into_iter().map_while(Result::ok) {
        match e {
            RawBsonRef::Document(d) => out.push(include_doc(cx, node, d)?),
            RawBsonRef::Array(inner) => out.push(include_array(cx, node, inner)?),
            _ => {}
        }
    }
    Ok(out)
}

fn exclude_doc(
    cx: &Apply<'_>,
    node: &Node,
    doc: &RawDocument,
) -> Result<RawDocumentBuf, CommandError> {
    let mut out = RawDocumentBuf::new();
    for (k, v) in doc.iter().map_while(Result::ok) {
        match (node.get(k.as_str()), v) {
            (Some(Child::Exclude), _) => {}
            (Some(Child::Node(sub)), RawBsonRef::Document(d)) => {
                out.append(k, exclude_doc(cx, sub, d)?);
            }
            (Some(Child::Node(sub)), RawBsonRef::Array(a)) => {
                out.append(k, exclude_array(cx, sub, a)?);
            }
            (Some(Child::Slice { skip, limit }), v) => out.append(k, slice(v, *skip, *limit)),
            (Some(Child::ElemMatch(filter)), _) => {
                if let Some(v) = elem_match(filter, cx.root, k.as_str()) {
                    out.append(k, v);
                }
            }
            _ => out.append(k, v),
        }
    }
    Ok(out)
}

fn exclude_array(cx: &Apply<'_>, node: &Node, a: &RawArray) -> Result<RawArrayBuf, CommandError> {
    let mut out = RawArrayBuf::new();
    for e in a.into_iter().map_while(Result::ok) {
        match e {
            RawBsonRef::Document(d) => out.push(exclude_doc(cx, node, d)?),
            RawBsonRef::Array(inner) => out.push(exclude_array(cx, node, inner)?),
            other => out.push(other),
        }
    }
    Ok(out)
}

/// find's `$slice` of a value: arrays are cut, other values are kept as they are.
fn slice(v: RawBsonRef<'_>, skip: Option<i32>, limit: i32) -> RawBson {
    let RawBsonRef::Array(a) = v else {
        return v.into();
    };
    let items: Vec<RawBsonRef<'_>> = a.into_iter().map_while(Result::ok).collect();
    let len = i64::try_from(items.len()).unwrap_or(i64::MAX);
    let (start, count) = match skip {
        None if limit >= 0 => (0, i64::from(limit)),
        None => ((len + i64::from(limit)).max(0), -i64::from(limit)),
        Some(s) if s < 0 => ((len + i64::from(s)).max(0), i64::from(limit)),
        Some(s) => (i64::from(s).min(len), i64::from(limit)),
    };
    let end = start.saturating_add(count).min(len);
    let mut out = RawArrayBuf::new();
    let (start, end) = (
        usize::try_from(start).unwrap_or(0),
        usize::try_from(end).unwrap_or(0),
    );
    for item in items.get(start..end).unwrap_or_default() {
        out.push(*item);
    }
    RawBson::Array(out)
}

/// find's `$elemMatch` projection of the top-level `field`: `[first matching element]`.
fn elem_match(filter: &Filter, root: &RawDocument, field: &str) -> Option<RawBson> {
    let index = filter.matched_array_index(root)?;
    let RawBsonRef::Array(a) = root.get(field).ok().flatten()? else {
        return None;
    };
    let elem = a.get(index).ok().flatten()?;
    let mut out = RawArrayBuf::new();
    out.push(elem);
    Some(RawBson::Array(out))
}

/// mongod's `applyFindPositionalProjection`: at the first array on `path`, keep only the
/// element the query matched.
fn apply_positional(
    out: RawDocumentBuf,
    path: &[String],
    index: Option<usize>,
) -> Result<RawDocumentBuf, CommandError> {
    let mut cur: &RawDocument = &out;
    for (i, part) in path.iter().enumerate() {
        match cur.get(part).ok().flatten() {
            Some(RawBsonRef::Array(a)) => {
                let index = index.ok_or_else(|| {
                    location(
                        51246,
                        "positional operator '.$' couldn't find a matching element in the array",
                    )
                })?;
                let elem =
                    a.get(index).ok().flatten().ok_or_else(|| {
                        location(51247, "positional operator '.$' element mismatch")
                    })?;
                let mut one = RawArrayBuf::new();
                one.push(elem);
                return Ok(replace_at(&out, &path[..=i], RawBson::Array(one)));
            }
            Some(RawBsonRef::Document(d)) => cur = d,
            _ => break,
        }
    }
    Ok(out)
}

/// `doc` with the value at `path` (through documents) replaced by `value`.
fn replace_at(doc: &RawDocument, path: &[String], value: RawBson) -> RawDocumentBuf {
    let mut out = RawDocumentBuf::new();
    let mut value = Some(value);
    for (k, v) in doc.iter().map_while(Result::ok) {
        if k.as_str() != path[0] || value.is_none() {
            out.append(k, v);
            continue;
        }
        match (path.len(), v) {
            (1, _) => out.append(k, value.take().unwrap_or(RawBson::Null)),
            (_, RawBsonRef::Document(d)) => {
                out.append(
                    k,
                    replace_at(d, &path[1..], value.take().unwrap_or(RawBson::Null)),
                );
            }
            _ => out.append(k, v),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::rawdoc;

    #[test]
    fn projection_table() {
        let doc = rawdoc! {
            "_id": 1,
            "a": 1,
            "b": {"c": 2, "d": 3},
            "e": [{"c": 4, "d": 5}, 6, [{"c": 7, "x": 0}]],
            "f": "x",
        };
        let cases: Vec<(RawDocumentBuf, RawDocumentBuf)> = vec![
            (rawdoc! {}, doc.clone()),
            (rawdoc! {"a": 1}, rawdoc! {"_id": 1, "a": 1}),
            (rawdoc! {"a": true, "_id": 0}, rawdoc! {"a": 1}),
            (
                rawdoc! {"f": 1, "a": 1},
                rawdoc! {"_id": 1, "a": 1, "f": "x"},
            ),
            (
                rawdoc! {"a": 0},
                rawdoc! {"_id": 1, "b": {"c": 2, "d": 3}, "e": [{"c": 4, "d": 5}, 6, [{"c": 7, "x": 0}]], "f": "x"},
            ),
            (
                rawdoc! {"_id": 0},
                rawdoc! {"a": 1, "b": {"c": 2, "d": 3}, "e": [{"c": 4, "d": 5}, 6, [{"c": 7, "x": 0}]], "f": "x"},
            ),
            (rawdoc! {"_id": 1}, rawdoc! {"_id": 1}),
            (
                rawdoc! {"_id": 1, "a": 0, "f": 0},
                rawdoc! {"_id": 1, "b": {"c": 2, "d": 3}, "e": [{"c": 4, "d": 5}, 6, [{"c": 7, "x": 0}]]},
            ),
            (rawdoc! {"b.c": 1}, rawdoc! {"_id": 1, "b": {"c": 2}}),
            (rawdoc! {"b": {"c": 1}}, rawdoc! {"_id": 1, "b": {"c": 2}}),
            (rawdoc! {"b.z": 1}, rawdoc! {"_id": 1, "b": {}}),
            (
                rawdoc! {"e.c": 1, "_id": 0},
                rawdoc! {"e": [{"c": 4}, [{"c": 7}]]},
            ),
            (
                rawdoc! {"e.c": 0, "b.d": 0, "_id": 0, "a": 0, "f": 0},
                rawdoc! {"b": {"c": 2}, "e": [{"d": 5}, 6, [{"x": 0}]]},
            ),
            (rawdoc! {"a.b": 1, "_id": 0}, rawdoc! {}),
            (rawdoc! {"a": 2.5, "z": -1}, rawdoc! {"_id": 1, "a": 1}),
            (rawdoc! {"a": "lit", "_id": 0}, rawdoc! {"a": "lit"}),
            (
                rawdoc! {"z": null, "a": 1},
                rawdoc! {"_id": 1, "a": 1, "z": null},
            ),
            (rawdoc! {"q.r": "v", "_id": 0}, rawdoc! {"q": {"r": "v"}}),
            (rawdoc! {"_id.x": 1}, rawdoc! {}),
        ];
        for (spec, want) in cases {
            let p = Projection::compile(&spec).unwrap();
            assert_eq!(p.apply(&doc), want, "{spec:?}");
        }
        let id_doc = rawdoc! {"_id": {"x": 1, "y": 2}, "a": 1};
        let p = Projection::compile(&rawdoc! {"_id.x": 1}).unwrap();
        assert_eq!(p.apply(&id_doc), rawdoc! {"_id": {"x": 1}});
        let p = Projection::compile(&rawdoc! {"_id.x": 0}).unwrap();
        assert_eq!(p.apply(&id_doc), rawdoc! {"_id": {"y": 2}, "a": 1});
    }

    #[test]
    fn compile_errors() {
        let cases: Vec<(RawDocumentBuf, ErrorCode, &str)> = vec![
            (
                rawdoc! {"a": 1, "b": 0},
                ErrorCode::Location(31254),
                "Cannot do exclusion on field b in inclusion projection",
            ),
            (
                rawdoc! {"a": 0, "b": 1},
                ErrorCode::Location(31253),
                "Cannot do inclusion on field b in exclusion projection",
            ),
            (
                rawdoc! {"a": 0, "b": {"c": 1}},
                ErrorCode::Location(31253),
                "Cannot do inclusion on field c in exclusion projection",
            ),
            (
                rawdoc! {"a.b": 1, "a": 1},
                ErrorCode::Location(31250),
                "Path collision at a",
            ),
            (
                rawdoc! {"a": 1, "a.b": 1},
                ErrorCode::Location(31249),
                "Path collision at a.b remaining portion b",
            ),
            (
                rawdoc! {"a": 0, "b": "x"},
                ErrorCode::Location(31310),
                "Cannot use an expression b: \"x\" in an exclusion projection",
            ),
            (
                rawdoc! {"a": {}},
                ErrorCode::Location(51270),
                "An empty sub-projection is not a valid value. Found empty object at path",
            ),
            (
                rawdoc! {"$a": 1},
                ErrorCode::Location(16410),
                "FieldPath field names may not start with '$'. Consider using $getField or $setField.",
            ),
            (
                rawdoc! {"a..b": 1},
                ErrorCode::Location(15998),
                "FieldPath field names may not be empty strings.",
            ),
            (
                rawdoc! {"": 1},
                ErrorCode::Location(40352),
                "FieldPath cannot be constructed with empty string",
            ),
            (
                rawdoc! {"a": {"$meta": "textScore"}},
                ErrorCode::NotImplemented,
                "$meta projections is not supported by Ebb yet",
            ),
            (
                rawdoc! {"a": {"$slice": "x"}},
                ErrorCode::Location(31273),
                "$slice only supports numbers and [skip, limit] arrays",
            ),
            (
                rawdoc! {"a": {"$slice": [1]}},
                ErrorCode::Location(31272),
                "$slice array argument should be of form [skip, limit]",
            ),
            (
                rawdoc! {"a": {"$slice": ["x", 1]}},
                ErrorCode::Location(31257),
                "$slice expects the skip argument to be a number, got string",
            ),
            (
                rawdoc! {"a": {"$slice": [1, null]}},
                ErrorCode::Location(31258),
                "$slice expects the limit argument to be a number, got null",
            ),
            (
                rawdoc! {"a": {"$slice": [1, 0]}},
                ErrorCode::Location(31259),
                "$slice limit must be positive, got 0",
            ),
            (
                rawdoc! {"a": {"$elemMatch": 1}},
                ErrorCode::Location(31274),
                "elemMatch: Invalid argument, object required, but got int",
            ),
            (
                rawdoc! {"a.b": {"$elemMatch": {"c": 1}}},
                ErrorCode::Location(31275),
                "Cannot use $elemMatch projection on a nested field.",
            ),
            (
                rawdoc! {"a": {"b": {"$elemMatch": {"c": 1}}}},
                ErrorCode::Location(31275),
                "Cannot use $elemMatch projection on a nested field.",
            ),
            (
                rawdoc! {"a.$": 1, "b": {"$elemMatch": {"c": 1}}},
                ErrorCode::Location(31255),
                "Cannot specify positional operator and $elemMatch.",
            ),
            (
                rawdoc! {"b": {"$elemMatch": {"c": 1}}, "a.$": 1},
                ErrorCode::Location(31256),
                "Cannot specify positional operator and $elemMatch.",
            ),
            (
                rawdoc! {"a.$": 1, "b.$": 1},
                ErrorCode::Location(31276),
                "Cannot specify more than one positional projection per query.",
            ),
            (
                rawdoc! {"a.$": {"b": 1}},
                ErrorCode::Location(31271),
                "positional projection cannot be used with an expression or sub object",
            ),
            (
                rawdoc! {"a.$": "x"},
                ErrorCode::Location(31308),
                "positional projection cannot be used with a literal",
            ),
            (
                rawdoc! {"a.$.b": 1},
                ErrorCode::Location(31394),
                "As of 4.4, it's illegal to specify positional operator in the middle of a \
                 path.Positional projection may only be used at the end, for example: a.b.$. \
                 If the query previously used a form like a.b.$.d, remove the parts following \
                 the '$' and the results will be equivalent.",
            ),
            (
                rawdoc! {".$": 1},
                ErrorCode::Location(5_392_900),
                "Projection on field .$ is invalid",
            ),
            (
                rawdoc! {"a.$": 0},
                ErrorCode::Location(16410),
                "FieldPath field names may not start with '$'. Consider using $getField or $setField.",
            ),
            (
                rawdoc! {"a.b": 1, "a.b.$": 1},
                ErrorCode::Location(31250),
                "Path collision at a.b",
            ),
            (
                rawdoc! {"a": 0, "b": {"$add": [1, 2]}},
                ErrorCode::Location(31252),
                "Cannot use expression other than $meta in exclusion projection",
            ),
            (
                rawdoc! {"a": 0, "b": "$c"},
                ErrorCode::Location(31310),
                "Cannot use an expression b: \"$c\" in an exclusion projection",
            ),
            (
                rawdoc! {"a": {"$foo": 1}},
                ErrorCode::Location(31325),
                "Unknown expression $foo",
            ),
            (
                rawdoc! {"a": {"$gt": 1, "$lt": 2}},
                ErrorCode::Location(16410),
                "FieldPath field names may not start with '$'. Consider using $getField or $setField.",
            ),
        ];
        for (spec, code, msg) in cases {
            let err = Projection::compile(&spec).unwrap_err();
            assert_eq!((err.code, err.errmsg.as_str()), (code, msg), "{spec:?}");
        }
    }

    fn show(d: &RawDocumentBuf) -> String {
        bson::Document::try_from(d.as_ref()).map_or_else(|_| "?".into(), |d| d.to_string())
    }

    #[test]
    fn find_operators_table() {
        let doc = rawdoc! {
            "_id": 1,
            "a": [1, 2, 3, 4, 5],
            "b": [{"x": 1, "y": 1}, {"x": 2, "y": 2}, {"x": 2, "y": 3}],
            "c": "scalar",
            "n": {"arr": [1, 2, 3], "k": 1},
        };
        let cases: Vec<(RawDocumentBuf, RawDocumentBuf)> = vec![
            (
                rawdoc! {"a": {"$slice": 2}},
                rawdoc! {"_id": 1, "a": [1, 2], "b": [{"x": 1, "y": 1}, {"x": 2, "y": 2}, {"x": 2, "y": 3}], "c": "scalar", "n": {"arr": [1, 2, 3], "k": 1}},
            ),
            (
                rawdoc! {"a": {"$slice": -2}, "_id": 0, "b": 0, "c": 0, "n": 0},
                rawdoc! {"a": [4, 5]},
            ),
            (
                rawdoc! {"a": {"$slice": [1, 2]}, "_id": 0, "b": 0, "c": 0, "n": 0},
                rawdoc! {"a": [2, 3]},
            ),
            (
                rawdoc! {"a": {"$slice": [-2, 5]}, "_id": 0, "b": 0, "c": 0, "n": 0},
                rawdoc! {"a": [4, 5]},
            ),
            (
                rawdoc! {"a": {"$slice": [-9, 2]}, "_id": 0, "b": 0, "c": 0, "n": 0},
                rawdoc! {"a": [1, 2]},
            ),
            (
                rawdoc! {"a": {"$slice": [9, 2]}, "_id": 0, "b": 0, "c": 0, "n": 0},
                rawdoc! {"a": []},
            ),
            (
                rawdoc! {"a": {"$slice": 0}, "_id": 0, "b": 0, "c": 0, "n": 0},
                rawdoc! {"a": []},
            ),
            (
                rawdoc! {"c": {"$slice": 1}, "_id": 0, "a": 0, "b": 0, "n": 0},
                rawdoc! {"c": "scalar"},
            ),
            // In an inclusion projection the slice follows the included fields.
            (
                rawdoc! {"a": {"$slice": 1}, "c": 1},
                rawdoc! {"_id": 1, "c": "scalar", "a": [1]},
            ),
            (
                rawdoc! {"n.arr": {"$slice": 1}, "c": 1, "_id": 0},
                rawdoc! {"c": "scalar", "n": {"arr": [1]}},
            ),
            (
                rawdoc! {"b": {"$elemMatch": {"x": 2}}},
                rawdoc! {"_id": 1, "b": [{"x": 2, "y": 2}]},
            ),
            (rawdoc! {"b": {"$elemMatch": {"x": 9}}}, rawdoc! {"_id": 1}),
            (
                rawdoc! {"a": {"$elemMatch": {"$gt": 3}}, "_id": 0},
                rawdoc! {"a": [4]},
            ),
            (
                rawdoc! {"c": {"$elemMatch": {"$gt": 3}}, "_id": 0},
                rawdoc! {},
            ),
            (
                rawdoc! {"b": {"$elemMatch": {"x": 2}}, "c": 1},
                rawdoc! {"_id": 1, "c": "scalar", "b": [{"x": 2, "y": 2}]},
            ),
            (
                rawdoc! {"b": {"$elemMatch": {"x": 2}}, "a": 0, "n": 0},
                rawdoc! {"_id": 1, "b": [{"x": 2, "y": 2}], "c": "scalar"},
            ),
            (rawdoc! {"s": "$c", "_id": 0}, rawdoc! {"s": "scalar"}),
            (
                rawdoc! {"s": {"$size": "$a"}, "c": 1},
                rawdoc! {"_id": 1, "c": "scalar", "s": 5},
            ),
            (
                rawdoc! {"s": ["$c", 1], "_id": 0},
                rawdoc! {"s": ["scalar", 1]},
            ),
            (rawdoc! {"s": "$missing", "_id": 0}, rawdoc! {}),
            (
                rawdoc! {"b.z": "$c", "_id": 0},
                rawdoc! {"b": [{"z": "scalar"}, {"z": "scalar"}, {"z": "scalar"}]},
            ),
        ];
        for (spec, want) in cases {
            let p = Projection::compile(&spec).unwrap_or_else(|e| panic!("{spec:?}: {e:?}"));
            let got = p.try_apply(&doc).unwrap();
            assert_eq!(show(&got), show(&want), "{}", show(&spec));
        }
        assert!(
            !Projection::compile(&rawdoc! {"a": {"$slice": 1}})
                .unwrap()
                .is_inclusion()
        );
        assert!(
            Projection::compile(&rawdoc! {"b": {"$elemMatch": {"x": 1}}})
                .unwrap()
                .is_inclusion()
        );
        assert!(
            Projection::compile(&rawdoc! {"a.$": 1})
                .unwrap()
                .is_positional()
        );
    }

    #[test]
    fn positional_table() {
        let doc = rawdoc! {
            "_id": 1,
            "a": [1, 2, 3],
            "b": [{"x": 1, "y": [7]}, {"x": 2, "y": [8]}],
            "n": {"m": [5, 6]},
            "s": 3,
        };
        let cases: Vec<(RawDocumentBuf, RawDocumentBuf, RawDocumentBuf)> = vec![
            (
                rawdoc! {"a": 2},
                rawdoc! {"a.$": 1},
                rawdoc! {"_id": 1, "a": [2]},
            ),
            (
                rawdoc! {"a": {"$gte": 2}},
                rawdoc! {"a.$": 1, "_id": 0},
                rawdoc! {"a": [2]},
            ),
            (
                rawdoc! {"b.x": 2},
                rawdoc! {"b.$": 1, "_id": 0},
                rawdoc! {"b": [{"x": 2, "y": [8]}]},
            ),
            (
                rawdoc! {"b.x": 2},
                rawdoc! {"b.y.$": 1, "_id": 0},
                rawdoc! {"b": [{"y": [8]}]},
            ),
            (
                rawdoc! {"b": {"$elemMatch": {"x": 1}}},
                rawdoc! {"b.$": 1, "_id": 0},
                rawdoc! {"b": [{"x": 1, "y": [7]}]},
            ),
            (
                rawdoc! {"n.m": 6},
                rawdoc! {"n.m.$": 1, "_id": 0},
                rawdoc! {"n": {"m": [6]}},
            ),
            (
                rawdoc! {"s": 3},
                rawdoc! {"s.$": 1, "_id": 0},
                rawdoc! {"s": 3},
            ),
            (
                rawdoc! {"a": 3, "s": 3},
                rawdoc! {"a.$": 1, "s": 1, "_id": 0},
                rawdoc! {"a": [3], "s": 3},
            ),
        ];
        for (query, spec, want) in cases {
            let f = Filter::compile(&query).unwrap();
            let p = Projection::compile(&spec).unwrap();
            let got = p.apply_with_filter(&doc, &f).unwrap();
            assert_eq!(show(&got), show(&want), "{} {}", show(&query), show(&spec));
        }
        let p = Projection::compile(&rawdoc! {"a.$": 1}).unwrap();
        let err = p.apply_with_filter(&doc, &Filter::match_all()).unwrap_err();
        assert_eq!(err.code, ErrorCode::Location(51246));
        assert_eq!(
            err.errmsg,
            "positional operator '.$' couldn't find a matching element in the array"
        );
        // The query matched at position 1 of `b`, which `a.$` reads too (3 elements).
        let f = Filter::compile(&rawdoc! {"b.x": 2}).unwrap();
        let got = p.apply_with_filter(&doc, &f).unwrap();
        assert_eq!(show(&got), show(&rawdoc! {"_id": 1, "a": [2]}));
        let short = rawdoc! {"_id": 1, "a": [1], "b": [{"x": 1}, {"x": 2}]};
        let err = p.apply_with_filter(&short, &f).unwrap_err();
        assert_eq!(
            (err.code, err.errmsg.as_str()),
            (
                ErrorCode::Location(51247),
                "positional operator '.$' element mismatch"
            )
        );
        // Without the filter, `apply` leaves the array whole.
        assert_eq!(
            show(&p.apply(&doc)),
            show(&rawdoc! {"_id": 1, "a": [1, 2, 3]})
        );
        let err = Projection::compile_for_pipeline(&rawdoc! {"a.$": 1}).unwrap_err();
        assert_eq!(err.code, ErrorCode::Location(31324));
        let err = Projection::compile_for_pipeline(&rawdoc! {"a": {"$elemMatch": {}}}).unwrap_err();
        assert_eq!(err.code, ErrorCode::Location(31325));
    }

    #[test]
    fn expression_errors() {
        let p = Projection::compile(&rawdoc! {"x": {"$add": ["$c", 1]}}).unwrap();
        let doc = rawdoc! {"_id": 1, "c": "s"};
        assert_eq!(
            p.try_apply(&doc).unwrap_err().code,
            ErrorCode::Location(16554)
        );
        assert_eq!(show(&p.apply(&doc)), show(&rawdoc! {"_id": 1}));
    }
}
