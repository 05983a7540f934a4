//! Pipeline-style updates (`u: [stage, …]`): the stages MongoDB allows in an update —
//! `$set`/`$addFields`, `$unset`, `$project`, `$replaceRoot`/`$replaceWith` — run on the
//! matched document in order; the result replaces it (keeping its `_id`).
//!
//! Expressions are a minimal private evaluator until the aggregation expression module lands
//! (unify then): literals, field paths (`"$a.b"`, through arrays of documents), variables
//! (`$$ROOT`, `$$CURRENT`, `$$REMOVE`, `$$NOW`, `$$CLUSTER_TIME`, and the statement's `c`/`let`
//! constants), expression objects and arrays, and `$literal`. Any other operator
//! (`{$add: …}`) is rejected with `NotImplemented` at compile time.

use bson::raw::CString;
use bson::{RawArray, RawBson, RawBsonRef, RawDocument, RawDocumentBuf};

use super::UpdateContext;
use crate::error::{CommandError, ErrorCode};
use crate::query::display::{self, type_name};
use crate::query::{check_field_path, invalid_bson, not_implemented, true_value};

/// A compiled update pipeline.
#[derive(Debug, Clone, Default)]
pub(super) struct Pipeline {
    stages: Vec<Stage>,
}

#[derive(Debug, Clone)]
enum Stage {
    /// `$set`/`$addFields`: only `Compute` and `Nested` fields.
    AddFields(Spec),
    /// `$project` (and `$unset`, an exclusion).
    Project { inclusion: bool, spec: Spec },
    /// `$replaceRoot` (`with: false`) or `$replaceWith`.
    ReplaceRoot { expr: Expr, with: bool },
}

/// A field tree, in specification order.
#[derive(Debug, Clone, Default)]
struct Spec {
    fields: Vec<(String, Field)>,
}

#[derive(Debug, Clone)]
enum Field {
    Include,
    Exclude,
    Compute(Expr),
    Nested(Spec),
}

#[derive(Debug, Clone)]
enum Expr {
    Const(RawBson),
    /// `"$a.b"`: a path in the current document.
    Path(Vec<String>),
    /// `"$$name.a.b"`.
    Var(String, Vec<String>),
    Object(Vec<(String, Expr)>),
    Array(Vec<Expr>),
}

fn location(code: i32, msg: impl Into<String>) -> CommandError {
    CommandError::new(ErrorCode::Location(code), msg)
}

fn cstring(name: &str) -> Result<CString, CommandError> {
    CString::try_from(name).map_err(|e| invalid_bson(&e))
}

/// Stages that exist but may not be used in an update.
const OTHER_STAGES: &[&str] = &[
    "$bucket",
    "$bucketAuto",
    "$changeStream",
    "$collStats",
    "$count",
    "$currentOp",
    "$densify",
    "$documents",
    "$facet",
    "$fill",
    "$geoNear",
    "$graphLookup",
    "$group",
    "$indexStats",
    "$limit",
    "$listLocalSessions",
    "$listSessions",
    "$lookup",
    "$match",
    "$merge",
    "$out",
    "$planCacheStats",
    "$redact",
    "$sample",
    "$search",
    "$searchMeta",
    "$setWindowFields",
    "$skip",
    "$sort",
    "$sortByCount",
    "$unionWith",
    "$unwind",
];

impl Pipeline {
    /// Parses an update pipeline.
    pub(super) fn parse(pipeline: &RawArray) -> Result<Pipeline, CommandError> {
        let mut stages = Vec::new();
        for item in pipeline {
            let item = item.map_err(|e| invalid_bson(&e))?;
            let RawBsonRef::Document(stage) = item else {
                return Err(CommandError::type_mismatch(
                    "Each element of the 'pipeline' array must be an object",
                ));
            };
            let mut fields = stage.iter();
            let (Some(first), None) = (fields.next(), fields.next()) else {
                return Err(location(
                    40323,
                    "A pipeline stage specification object must contain exactly one field.",
                ));
            };
            let (name, spec) = first.map_err(|e| invalid_bson(&e))?;
            let name = name.as_str();
            stages.push(match name {
                "$set" | "$addFields" => Stage::AddFields(parse_add_fields(name, spec)?),
                "$project" => parse_project(spec)?,
                "$unset" => parse_unset(spec)?,
                "$replaceRoot" => parse_replace_root(spec)?,
                "$replaceWith" => Stage::ReplaceRoot {
                    expr: parse_operand(spec)?,
                    with: true,
                },
                _ if OTHER_STAGES.contains(&name) => {
                    return Err(CommandError::new(
                        ErrorCode::InvalidOptions,
                        format!("{name} is not allowed to be used within an update"),
                    ));
                }
                _ => {
                    return Err(location(
                        40324,
                        format!("Unrecognized pipeline stage name: '{name}'"),
                    ));
                }
            });
        }
        Ok(Pipeline { stages })
    }

    /// Runs the stages on `doc`.
    pub(super) fn apply(
        &self,
        doc: &RawDocument,
        ctx: &UpdateContext<'_>,
    ) -> Result<RawDocumentBuf, CommandError> {
        let mut cur = doc.to_owned();
        for stage in &self.stages {
            let root = Root { doc: &cur, ctx };
            let next = match stage {
                Stage::AddFields(spec) => add_to_doc(spec, &cur, &root)?,
                Stage::Project {
                    inclusion: false,
                    spec,
                } => exclude_doc(spec, &cur)?,
                Stage::Project {
                    inclusion: true,
                    spec,
                } => include_doc(spec, &cur, &root)?,
                Stage::ReplaceRoot { expr, with } => match root.eval(expr)? {
                    Some(RawBson::Document(d)) => d,
                    other => {
                        let (shown, kind) = match &other {
                            Some(v) => {
                                (agg_value(v.as_raw_bson_ref()), type_name(v.element_type()))
                            }
                            None => ("MISSING".to_owned(), "missing"),
                        };
                        let what = if *with {
                            "'replacement document'"
                        } else {
                            "'newRoot' expression"
                        };
                        return Err(location(
                            40228,
                            format!(
                                "{what} must evaluate to an object, but resulting value was: \
                                 {shown}. Type of resulting value: '{kind}'. Input document: {}",
                                agg_value(RawBsonRef::Document(&cur))
                            ),
                        ));
                    }
                },
            };
            cur = next;
        }
        Ok(cur)
    }
}

// ---- parsing ----

fn not_an_object(what: &str, v: RawBsonRef<'_>) -> CommandError {
    location(
        40272,
        format!(
            "{what} specification stage must be an object, got {}",
            type_name(v.element_type())
        ),
    )
}

/// Prefixes a stage's parse error as mongod does (`Invalid $set :: caused by :: …`).
fn invalid(stage: &str) -> impl Fn(CommandError) -> CommandError + '_ {
    move |e| {
        CommandError::new(
            e.code,
            format!("Invalid {stage} :: caused by :: {}", e.errmsg),
        )
    }
}

fn parse_add_fields(stage: &str, spec: RawBsonRef<'_>) -> Result<Spec, CommandError> {
    let RawBsonRef::Document(spec) = spec else {
        return Err(not_an_object(stage, spec));
    };
    (|| {
        if spec.is_empty() {
            return Err(location(
                40177,
                "specification must have at least one field",
            ));
        }
        let mut out = Spec::default();
        for item in spec {
            let (name, value) = item.map_err(|e| invalid_bson(&e))?;
            let name = name.as_str();
            check_field_path(name)?;
            let field = match value {
                RawBsonRef::Document(d) if first_key_is_operator(d)? => {
                    Field::Compute(parse_operand(value)?)
                }
                RawBsonRef::Document(d) => Field::Nested(parse_nested_add(d, name)?),
                other => Field::Compute(parse_operand(other)?),
            };
            out.insert(name, field, spec)?;
        }
        Ok(out)
    })()
    .map_err(invalid(stage))
}

/// A sub-object of `$addFields`: its fields are paths below `prefix`.
fn parse_nested_add(d: &RawDocument, prefix: &str) -> Result<Spec, CommandError> {
    if d.is_empty() {
        return Err(location(
            40180,
            format!("an empty object is not a valid value. Found empty object at path {prefix}"),
        ));
    }
    let mut out = Spec::default();
    for item in d {
        let (name, value) = item.map_err(|e| invalid_bson(&e))?;
        let name = name.as_str();
        check_sub_field(name, d)?;
        let field = match value {
            RawBsonRef::Document(sub) if first_key_is_operator(sub)? => {
                Field::Compute(parse_operand(value)?)
            }
            RawBsonRef::Document(sub) => {
                Field::Nested(parse_nested_add(sub, &format!("{prefix}.{name}"))?)
            }
            other => Field::Compute(parse_operand(other)?),
        };
        out.fields.push((name.to_owned(), field));
    }
    Ok(out)
}

fn check_sub_field(name: &str, parent: &RawDocument) -> Result<(), CommandError> {
    check_field_path(name)?;
    if name.contains('.') {
        return Err(location(
            40183,
            format!(
                "cannot use dotted field name '{name}' in a sub object: {}",
                display::value(RawBsonRef::Document(parent))
            ),
        ));
    }
    Ok(())
}

fn first_key_is_operator(d: &RawDocument) -> Result<bool, CommandError> {
    Ok(match d.iter().next() {
        Some(item) => item
            .map_err(|e| invalid_bson(&e))?
            .0
            .as_str()
            .starts_with('$'),
        None => false,
    })
}

impl Spec {
    fn find(&self, name: &str) -> Option<usize> {
        self.fields.iter().position(|(k, _)| k == name)
    }

    /// Adds `field` at dotted `path`, creating nested specs; two paths where one is a prefix
    /// of the other conflict (mongod's 40176).
    fn insert(
        &mut self,
        path: &str,
        field: Field,
        whole: &RawDocument,
    ) -> Result<(), CommandError> {
        let conflict = |existing: &str| {
            location(
                40176,
                format!(
                    "specification contains two conflicting paths. Cannot specify both '{path}' \
                     and '{existing}': {}",
                    display::value(RawBsonRef::Document(whole))
                ),
            )
        };
        let parts: Vec<&str> = path.split('.').collect();
        let mut node = self;
        for (i, part) in parts.iter().enumerate() {
            let last = i + 1 == parts.len();
            let existing = node.find(part);
            if last {
                if let Some(i) = existing {
                    return Err(conflict(&match &node.fields[i].1 {
                        Field::Nested(sub) => format!("{path}.{}", sub.first_leaf()),
                        _ => path.to_owned(),
                    }));
                }
                node.fields.push(((*part).to_owned(), field));
                return Ok(());
            }
            let idx = existing.unwrap_or_else(|| {
                node.fields
                    .push(((*part).to_owned(), Field::Nested(Spec::default())));
                node.fields.len() - 1
            });
            match &mut node.fields[idx].1 {
                Field::Nested(next) => node = next,
                _ => return Err(conflict(&parts[..=i].join("."))),
            }
        }
        Ok(())
    }

    /// The dotted path of the first leaf below (for messages).
    fn first_leaf(&self) -> String {
        match self.fields.first() {
            Some((k, Field::Nested(sub))) if !sub.fields.is_empty() => {
                format!("{k}.{}", sub.first_leaf())
            }
            Some((k, _)) => k.clone(),
            None => String::new(),
        }
    }

    fn has_computed(&self) -> bool {
        self.fields.iter().any(|(_, f)| match f {
            Field::Compute(_) => true,
            Field::Nested(s) => s.has_computed(),
            Field::Include | Field::Exclude => false,
        })
    }
}

/// `$project`'s inclusion/exclusion bookkeeping (mongod's projection AST rules).
#[derive(Default)]
struct ProjectCtx {
    inclusion: Option<bool>,
    id_excluded: bool,
    id_specified: bool,
}

fn parse_project(spec: RawBsonRef<'_>) -> Result<Stage, CommandError> {
    let RawBsonRef::Document(spec) = spec else {
        return Err(location(15969, "$project specification must be an object"));
    };
    (|| {
        if spec.is_empty() {
            return Err(location(
                51272,
                "projection specification must have at least one field",
            ));
        }
        let mut ctx = ProjectCtx::default();
        let mut root = Spec::default();
        for item in spec {
            let (name, value) = item.map_err(|e| invalid_bson(&e))?;
            let name = name.as_str();
            check_field_path(name)?;
            ctx.id_specified |= name == "_id" || name.starts_with("_id.");
            let field = project_field(&mut ctx, name, value, true)?;
            root.insert(name, field, spec)
                .map_err(|_| location(31250, format!("Path collision at {name}")))?;
        }
        let inclusion = ctx.inclusion.unwrap_or(!ctx.id_excluded);
        if inclusion && !ctx.id_specified {
            root.fields.insert(0, ("_id".to_owned(), Field::Include));
        }
        if !inclusion {
            // `_id: 1` in an exclusion keeps `_id`, as it would be anyway.
            root.fields
                .retain(|(k, f)| !(k == "_id" && matches!(f, Field::Include)));
        }
        Ok(Stage::Project {
            inclusion,
            spec: root,
        })
    })()
    .map_err(invalid("$project"))
}

fn project_field(
    ctx: &mut ProjectCtx,
    name: &str,
    value: RawBsonRef<'_>,
    top: bool,
) -> Result<Field, CommandError> {
    let is_id = top && name == "_id";
    let decide = |ctx: &mut ProjectCtx, include: bool| -> Result<(), CommandError> {
        match ctx.inclusion {
            Some(true) if !include => Err(location(
                31254,
                format!("Cannot do exclusion on field {name} in inclusion projection"),
            )),
            Some(false) if include => Err(location(
                31253,
                format!("Cannot do inclusion on field {name} in exclusion projection"),
            )),
            _ => {
                ctx.inclusion = Some(include);
                Ok(())
            }
        }
    };
    match value {
        RawBsonRef::Document(d) if !first_key_is_operator(d)? => {
            if d.is_empty() {
                return Err(location(
                    51270,
                    "An empty sub-projection is not a valid value. Found empty object at path",
                ));
            }
            let mut nested = Spec::default();
            for item in d {
                let (k, v) = item.map_err(|e| invalid_bson(&e))?;
                let k = k.as_str();
                check_field_path(k)?;
                let field = project_field(ctx, &format!("{name}.{k}"), v, false)?;
                nested.insert(k, field, d)?;
            }
            Ok(Field::Nested(nested))
        }
        RawBsonRef::Boolean(_)
        | RawBsonRef::Int32(_)
        | RawBsonRef::Int64(_)
        | RawBsonRef::Double(_)
        | RawBsonRef::Decimal128(_) => {
            let include = true_value(value);
            if is_id {
                ctx.id_excluded = !include;
                return Ok(if include {
                    Field::Include
                } else {
                    Field::Exclude
                });
            }
            decide(ctx, include)?;
            Ok(if include {
                Field::Include
            } else {
                Field::Exclude
            })
        }
        _ => {
            if ctx.inclusion == Some(false) {
                return Err(location(
                    31310,
                    format!(
                        "Cannot use an expression {} in an exclusion projection",
                        display::element(name, value)
                    ),
                ));
            }
            if !is_id {
                ctx.inclusion = Some(true);
            }
            Ok(Field::Compute(parse_operand(value)?))
        }
    }
}

fn parse_unset(spec: RawBsonRef<'_>) -> Result<Stage, CommandError> {
    let mut paths = Vec::new();
    match spec {
        RawBsonRef::String(s) => paths.push(s.to_owned()),
        RawBsonRef::Array(items) => {
            for item in items {
                match item.map_err(|e| invalid_bson(&e))? {
                    RawBsonRef::String(s) => paths.push(s.to_owned()),
                    _ => {
                        return Err(location(
                            31120,
                            "$unset specification must be a string or an array containing only \
                             string values",
                        ));
                    }
                }
            }
            if paths.is_empty() {
                return Err(location(
                    31119,
                    "$unset specification must be a string or an array with at least one field",
                ));
            }
        }
        _ => {
            return Err(location(
                31002,
                "$unset specification must be a string or an array",
            ));
        }
    }
    let mut root = Spec::default();
    let whole = RawDocumentBuf::new();
    for path in &paths {
        check_field_path(path).map_err(invalid("$unset"))?;
        root.insert(path, Field::Exclude, &whole)
            .map_err(|_| location(31250, format!("Path collision at {path}")))
            .map_err(invalid("$unset"))?;
    }
    Ok(Stage::Project {
        inclusion: false,
        spec: root,
    })
}

fn parse_replace_root(spec: RawBsonRef<'_>) -> Result<Stage, CommandError> {
    let RawBsonRef::Document(spec) = spec else {
        return Err(CommandError::type_mismatch(format!(
            "BSON field '$replaceRoot' is the wrong type '{}', expected type 'object'",
            type_name(spec.element_type())
        )));
    };
    let mut new_root = None;
    for item in spec {
        let (k, v) = item.map_err(|e| invalid_bson(&e))?;
        if k.as_str() == "newRoot" {
            new_root = Some(v);
        } else {
            return Err(CommandError::new(
                ErrorCode::IDLUnknownField,
                format!(
                    "BSON field '$replaceRoot.{}' is an unknown field.",
                    k.as_str()
                ),
            ));
        }
    }
    let Some(new_root) = new_root else {
        return Err(CommandError::new(
            ErrorCode::IDLFailedToParse,
            "BSON field '$replaceRoot.newRoot' is missing but a required field",
        ));
    };
    Ok(Stage::ReplaceRoot {
        expr: parse_operand(new_root)?,
        with: false,
    })
}

/// mongod's `Expression::parseOperand`: `"$path"`, `"$$var"`, an object, an array or a
/// constant.
fn parse_operand(v: RawBsonRef<'_>) -> Result<Expr, CommandError> {
    match v {
        RawBsonRef::String(s) if s.starts_with("$$") => {
            let mut parts = s[2..].split('.');
            let name = parts.next().unwrap_or_default();
            if name.is_empty() {
                return Err(location(16869, "empty variable names are not allowed"));
            }
            let rest: Vec<String> = parts.map(str::to_owned).collect();
            if rest.iter().any(String::is_empty) {
                return Err(location(
                    15998,
                    "FieldPath field names may not be empty strings.",
                ));
            }
            Ok(Expr::Var(name.to_owned(), rest))
        }
        RawBsonRef::String(s) if s.starts_with('$') => {
            if s == "$" {
                return Err(location(16872, "'$' by itself is not a valid FieldPath"));
            }
            check_field_path(&s[1..])?;
            Ok(Expr::Path(s[1..].split('.').map(str::to_owned).collect()))
        }
        RawBsonRef::Document(d) => parse_object(d),
        RawBsonRef::Array(items) => {
            let mut out = Vec::new();
            for item in items {
                out.push(parse_operand(item.map_err(|e| invalid_bson(&e))?)?);
            }
            Ok(Expr::Array(out))
        }
        other => Ok(Expr::Const(other.into())),
    }
}

/// An expression object (`{a: "$x"}`) or an operator (`{$literal: …}`).
fn parse_object(d: &RawDocument) -> Result<Expr, CommandError> {
    if first_key_is_operator(d)? {
        let mut it = d.iter();
        let (op, arg) = match (it.next(), it.next()) {
            (Some(first), None) => first.map_err(|e| invalid_bson(&e))?,
            _ => {
                return Err(location(
                    15983,
                    format!(
                        "An object representing an expression must have exactly one field: {}",
                        display::value(RawBsonRef::Document(d))
                    ),
                ));
            }
        };
        return match op.as_str() {
            "$literal" => Ok(Expr::Const(arg.into())),
            other => Err(not_implemented(&format!(
                "the {other} aggregation expression"
            ))),
        };
    }
    let mut fields = Vec::new();
    for item in d {
        let (k, v) = item.map_err(|e| invalid_bson(&e))?;
        let k = k.as_str();
        check_field_path(k)?;
        if k.contains('.') {
            return Err(location(
                16412,
                format!(
                    "FieldPath field names may not contain '.'. Consider using $getField or $setField. Found: {k}"
                ),
            ));
        }
        fields.push((k.to_owned(), parse_operand(v)?));
    }
    Ok(Expr::Object(fields))
}

// ---- evaluation ----

/// What expressions are evaluated against: the stage's input document.
struct Root<'r> {
    doc: &'r RawDocument,
    ctx: &'r UpdateContext<'r>,
}

impl Root<'_> {
    /// Evaluates `expr`; `None` is "missing".
    fn eval(&self, expr: &Expr) -> Result<Option<RawBson>, CommandError> {
        Ok(match expr {
            Expr::Const(v) => Some(v.clone()),
            Expr::Path(parts) => doc_path(self.doc, parts)?,
            Expr::Var(name, rest) => {
                let value: RawBson = match name.as_str() {
                    "ROOT" | "CURRENT" => RawBson::Document(self.doc.to_owned()),
                    "REMOVE" => return Ok(None),
                    "NOW" => RawBson::DateTime(self.ctx.now),
                    "CLUSTER_TIME" => RawBson::Timestamp(self.ctx.timestamp),
                    user => match self
                        .ctx
                        .variables
                        .map(|vars| vars.get(user))
                        .transpose()
                        .map_err(|e| invalid_bson(&e))?
                        .flatten()
                    {
                        Some(v) => v.into(),
                        None => {
                            return Err(location(
                                17276,
                                format!("Use of undefined variable: {user}"),
                            ));
                        }
                    },
                };
                value_path(value.as_raw_bson_ref(), rest)?
            }
            Expr::Object(fields) => {
                let mut out = RawDocumentBuf::new();
                for (k, e) in fields {
                    if let Some(v) = self.eval(e)? {
                        out.append(cstring(k)?, v);
                    }
                }
                Some(RawBson::Document(out))
            }
            Expr::Array(items) => {
                let mut out = bson::RawArrayBuf::new();
                for e in items {
                    out.push(self.eval(e)?.unwrap_or(RawBson::Null));
                }
                Some(RawBson::Array(out))
            }
        })
    }
}

/// mongod's `ExpressionFieldPath::evaluatePath` from a value.
fn value_path(v: RawBsonRef<'_>, parts: &[String]) -> Result<Option<RawBson>, CommandError> {
    if parts.is_empty() {
        return Ok(Some(v.into()));
    }
    match v {
        RawBsonRef::Document(d) => doc_path(d, parts),
        RawBsonRef::Array(a) => Ok(Some(array_path(a, parts)?)),
        _ => Ok(None),
    }
}

fn doc_path(d: &RawDocument, parts: &[String]) -> Result<Option<RawBson>, CommandError> {
    let Some((first, rest)) = parts.split_first() else {
        return Ok(Some(RawBson::Document(d.to_owned())));
    };
    let Some(v) = d.get(first).map_err(|e| invalid_bson(&e))? else {
        return Ok(None);
    };
    if rest.is_empty() {
        return Ok(Some(v.into()));
    }
    match v {
        RawBsonRef::Document(sub) => doc_path(sub, rest),
        RawBsonRef::Array(a) => Ok(Some(array_path(a, rest)?)),
        _ => Ok(None),
    }
}

/// A path through an array: the values found in its document elements (others are skipped).
fn array_path(a: &RawArray, parts: &[String]) -> Result<RawBson, CommandError> {
    let mut out = bson::RawArrayBuf::new();
    for item in a {
        if let RawBsonRef::Document(d) = item.map_err(|e| invalid_bson(&e))?
            && let Some(v) = doc_path(d, parts)?
        {
            out.push(v);
        }
    }
    Ok(RawBson::Array(out))
}

/// `$addFields` on a document: computed fields replace existing ones in place, new ones are
/// appended in specification order; a missing result removes the field.
fn add_to_doc(
    spec: &Spec,
    doc: &RawDocument,
    root: &Root<'_>,
) -> Result<RawDocumentBuf, CommandError> {
    let mut out = RawDocumentBuf::new();
    let mut done = vec![false; spec.fields.len()];
    for item in doc {
        let (k, v) = item.map_err(|e| invalid_bson(&e))?;
        let Some(i) = spec.find(k.as_str()) else {
            out.append(k, v);
            continue;
        };
        if done[i] {
            continue;
        }
        done[i] = true;
        if let Some(new) = add_field(&spec.fields[i].1, Some(v), root)? {
            out.append(k, new);
        }
    }
    for ((name, field), seen) in spec.fields.iter().zip(done) {
        if !seen && let Some(new) = add_field(field, None, root)? {
            out.append(cstring(name)?, new);
        }
    }
    Ok(out)
}

fn add_field(
    field: &Field,
    existing: Option<RawBsonRef<'_>>,
    root: &Root<'_>,
) -> Result<Option<RawBson>, CommandError> {
    match field {
        Field::Compute(e) => root.eval(e),
        Field::Nested(sub) => add_to_value(sub, existing, root),
        // `$project` inclusions reach here for values already projected: keep them.
        Field::Include | Field::Exclude => Ok(existing.map(Into::into)),
    }
}

/// mongod's `ProjectionNode::applyExpressionsToValue`: documents get the fields, arrays have
/// each element treated, and anything else is replaced by a document of the computed fields.
fn add_to_value(
    spec: &Spec,
    v: Option<RawBsonRef<'_>>,
    root: &Root<'_>,
) -> Result<Option<RawBson>, CommandError> {
    match v {
        Some(RawBsonRef::Document(d)) => Ok(Some(RawBson::Document(add_to_doc(spec, d, root)?))),
        Some(RawBsonRef::Array(a)) => {
            let mut out = bson::RawArrayBuf::new();
            for item in a {
                let item = item.map_err(|e| invalid_bson(&e))?;
                if let Some(new) = add_to_value(spec, Some(item), root)? {
                    out.push(new);
                }
            }
            Ok(Some(RawBson::Array(out)))
        }
        other if spec.has_computed() => {
            let empty = RawDocumentBuf::new();
            let _ = other;
            Ok(Some(RawBson::Document(add_to_doc(spec, &empty, root)?)))
        }
        other => Ok(other.map(Into::into)),
    }
}

/// An exclusion projection: named paths go, through arrays of documents.
fn exclude_doc(spec: &Spec, doc: &RawDocument) -> Result<RawDocumentBuf, CommandError> {
    let mut out = RawDocumentBuf::new();
    for item in doc {
        let (k, v) = item.map_err(|e| invalid_bson(&e))?;
        match spec.find(k.as_str()).map(|i| &spec.fields[i].1) {
            Some(Field::Exclude) => {}
            Some(Field::Nested(sub)) => out.append(k, exclude_value(sub, v)?),
            _ => out.append(k, v),
        }
    }
    Ok(out)
}

fn exclude_value(spec: &Spec, v: RawBsonRef<'_>) -> Result<RawBson, CommandError> {
    Ok(match v {
        RawBsonRef::Document(d) => RawBson::Document(exclude_doc(spec, d)?),
        RawBsonRef::Array(a) => {
            let mut out = bson::RawArrayBuf::new();
            for item in a {
                out.push(exclude_value(spec, item.map_err(|e| invalid_bson(&e))?)?);
            }
            RawBson::Array(out)
        }
        other => other.into(),
    })
}

/// An inclusion projection: included paths in document order (scalars inside projected
/// arrays go), then computed fields in specification order.
fn include_doc(
    spec: &Spec,
    doc: &RawDocument,
    root: &Root<'_>,
) -> Result<RawDocumentBuf, CommandError> {
    let projected = project_doc(spec, doc)?;
    if !spec.has_computed() {
        return Ok(projected);
    }
    add_to_doc(&computed_only(spec), &projected, root)
}

fn project_doc(spec: &Spec, doc: &RawDocument) -> Result<RawDocumentBuf, CommandError> {
    let mut out = RawDocumentBuf::new();
    for item in doc {
        let (k, v) = item.map_err(|e| invalid_bson(&e))?;
        match spec.find(k.as_str()).map(|i| &spec.fields[i].1) {
            Some(Field::Include) => out.append(k, v),
            Some(Field::Nested(sub)) => {
                if let Some(new) = project_value(sub, v)? {
                    out.append(k, new);
                }
            }
            _ => {}
        }
    }
    Ok(out)
}

fn project_value(spec: &Spec, v: RawBsonRef<'_>) -> Result<Option<RawBson>, CommandError> {
    Ok(match v {
        RawBsonRef::Document(d) => Some(RawBson::Document(project_doc(spec, d)?)),
        RawBsonRef::Array(a) => {
            let mut out = bson::RawArrayBuf::new();
            for item in a {
                if let Some(new) = project_value(spec, item.map_err(|e| invalid_bson(&e))?)? {
                    out.push(new);
                }
            }
            Some(RawBson::Array(out))
        }
        _ => None,
    })
}

/// The computed part of an inclusion spec, applied `$addFields`-style after projecting.
fn computed_only(spec: &Spec) -> Spec {
    Spec {
        fields: spec
            .fields
            .iter()
            .filter_map(|(k, f)| match f {
                Field::Compute(e) => Some((k.clone(), Field::Compute(e.clone()))),
                Field::Nested(s) if s.has_computed() => {
                    Some((k.clone(), Field::Nested(computed_only(s))))
                }
                _ => None,
            })
            .collect(),
    }
}

/// A value as mongod's aggregation `Value::toString` prints it (`{a: 1, b: "x"}`, `[1, 2]`).
fn agg_value(v: RawBsonRef<'_>) -> String {
    match v {
        RawBsonRef::Document(d) => {
            let fields: Vec<String> = d
                .iter()
                .map_while(Result::ok)
                .map(|(k, v)| format!("{}: {}", k.as_str(), agg_value(v)))
                .collect();
            format!("{{{}}}", fields.join(", "))
        }
        RawBsonRef::Array(a) => {
            let items: Vec<String> = a.into_iter().map_while(Result::ok).map(agg_value).collect();
            format!("[{}]", items.join(", "))
        }
        #[expect(clippy::cast_possible_truncation, reason = "integral and small")]
        RawBsonRef::Double(d) if d.fract() == 0.0 && d.abs() < 1e15 => format!("{}", d as i64),
        RawBsonRef::Double(d) => format!("{d}"),
        other => display::value(other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::{rawbson, rawdoc};

    fn run(pipeline: RawBson, doc: &RawDocumentBuf) -> Result<RawDocumentBuf, CommandError> {
        let RawBson::Array(stages) = pipeline else {
            panic!("not an array");
        };
        let vars = rawdoc! {"x": 5};
        let ctx = UpdateContext {
            variables: Some(&vars),
            ..UpdateContext::at(1_000)
        };
        Pipeline::parse(&stages)?.apply(doc, &ctx)
    }

    #[test]
    fn stages_table() -> Result<(), CommandError> {
        let doc = rawdoc! {"_id": 1, "a": 1, "b": {"c": 2, "d": 3}, "e": [{"f": 1}, {"f": 2}, 7]};
        let cases: Vec<(RawBson, RawDocumentBuf)> = vec![
            (
                rawbson!([{"$set": {"a": 2, "z": "$b.c"}}]),
                rawdoc! {"_id": 1, "a": 2, "b": {"c": 2, "d": 3}, "e": [{"f": 1}, {"f": 2}, 7], "z": 2},
            ),
            (
                rawbson!([{"$addFields": {"b.x": "$a", "a": "$$REMOVE"}}]),
                rawdoc! {"_id": 1, "b": {"c": 2, "d": 3, "x": 1}, "e": [{"f": 1}, {"f": 2}, 7]},
            ),
            (
                rawbson!([{"$set": {"e.g": 0}}]),
                rawdoc! {"_id": 1, "a": 1, "b": {"c": 2, "d": 3}, "e": [{"f": 1, "g": 0}, {"f": 2, "g": 0}, {"g": 0}]},
            ),
            (
                rawbson!([{"$set": {"a.q": 1}}]),
                rawdoc! {"_id": 1, "a": {"q": 1}, "b": {"c": 2, "d": 3}, "e": [{"f": 1}, {"f": 2}, 7]},
            ),
            (
                rawbson!([{"$set": {"fs": "$e.f", "lit": {"$literal": "$a"}, "v": "$$x", "o": {"p": ["$a", "$nope"]}}}]),
                rawdoc! {"_id": 1, "a": 1, "b": {"c": 2, "d": 3}, "e": [{"f": 1}, {"f": 2}, 7], "fs": [1, 2], "lit": "$a", "v": 5, "o": {"p": [1, null]}},
            ),
            (
                rawbson!([{"$unset": ["a", "b.c", "e.f"]}]),
                rawdoc! {"_id": 1, "b": {"d": 3}, "e": [{}, {}, 7]},
            ),
            (
                rawbson!([{"$unset": "_id"}]),
                rawdoc! {"a": 1, "b": {"c": 2, "d": 3}, "e": [{"f": 1}, {"f": 2}, 7]},
            ),
            (
                rawbson!([{"$project": {"b.d": 1, "a": 1}}]),
                rawdoc! {"_id": 1, "a": 1, "b": {"d": 3}},
            ),
            (
                rawbson!([{"$project": {"_id": 0, "e.f": 1, "n": "$b.c"}}]),
                rawdoc! {"e": [{"f": 1}, {"f": 2}], "n": 2},
            ),
            (
                rawbson!([{"$project": {"a": 0, "e": false}}]),
                rawdoc! {"_id": 1, "b": {"c": 2, "d": 3}},
            ),
            (
                rawbson!([{"$replaceRoot": {"newRoot": "$b"}}]),
                rawdoc! {"c": 2, "d": 3},
            ),
            (
                rawbson!([{"$replaceWith": {"_id": "$_id", "s": "$$ROOT.a"}}, {"$set": {"t": "$s"}}]),
                rawdoc! {"_id": 1, "s": 1, "t": 1},
            ),
            (
                rawbson!([{"$set": {"now": "$$NOW"}}, {"$project": {"now": 1, "_id": 0}}]),
                rawdoc! {"now": bson::DateTime::from_millis(1_000)},
            ),
        ];
        for (pipeline, want) in cases {
            assert_eq!(run(pipeline.clone(), &doc)?, want, "{pipeline:?}");
        }
        Ok(())
    }

    #[test]
    fn errors_table() {
        let doc = rawdoc! {"_id": 1, "a": {"b": 10}};
        let cases: Vec<(RawBson, ErrorCode, &str)> = vec![
            (
                rawbson!([{"$match": {"a": 1}}]),
                ErrorCode::InvalidOptions,
                "$match is not allowed to be used within an update",
            ),
            (
                rawbson!([{"$foo": {}}]),
                ErrorCode::Location(40324),
                "Unrecognized pipeline stage name: '$foo'",
            ),
            (
                rawbson!([{"$set": {"a": 1}, "$unset": "b"}]),
                ErrorCode::Location(40323),
                "A pipeline stage specification object must contain exactly one field.",
            ),
            (
                rawbson!([{"$replaceRoot": {"newRoot": "$a.b"}}]),
                ErrorCode::Location(40228),
                "'newRoot' expression must evaluate to an object, but resulting value was: 10. Type of resulting value: 'int'. Input document: {_id: 1, a: {b: 10}}",
            ),
            (
                rawbson!([{"$replaceWith": "$nope"}]),
                ErrorCode::Location(40228),
                "'replacement document' must evaluate to an object, but resulting value was: MISSING. Type of resulting value: 'missing'. Input document: {_id: 1, a: {b: 10}}",
            ),
            (
                rawbson!([{"$set": {"$x": 1}}]),
                ErrorCode::Location(16410),
                "Invalid $set :: caused by :: FieldPath field names may not start with '$'. Consider using $getField or $setField.",
            ),
            (
                rawbson!([{"$project": {"a": 1, "b": 0}}]),
                ErrorCode::Location(31254),
                "Invalid $project :: caused by :: Cannot do exclusion on field b in inclusion projection",
            ),
            (
                rawbson!([{"$unset": 1}]),
                ErrorCode::Location(31002),
                "$unset specification must be a string or an array",
            ),
            (
                rawbson!([{"$set": {"a": {"$add": [1, 2]}}}]),
                ErrorCode::NotImplemented,
                "Invalid $set :: caused by :: the $add aggregation expression is not supported by Ebb yet",
            ),
            (
                rawbson!([{"$set": {"a": "$$nope"}}]),
                ErrorCode::Location(17276),
                "Use of undefined variable: nope",
            ),
            (
                rawbson!([{"$set": {"a": 1, "a.b": 2}}]),
                ErrorCode::Location(40176),
                "Invalid $set :: caused by :: specification contains two conflicting paths. Cannot specify both 'a.b' and 'a': { a: 1, a.b: 2 }",
            ),
        ];
        for (pipeline, code, msg) in cases {
            let err = run(pipeline.clone(), &doc).unwrap_err();
            assert_eq!((err.code, err.errmsg.as_str()), (code, msg), "{pipeline:?}");
        }
    }
}
