//! Pipeline-style updates (`u: [stage, …]`): the stages MongoDB allows in an update —
//! `$set`/`$addFields`, `$unset`, `$project`, `$replaceRoot`/`$replaceWith` — run on the
//! matched document in order; the result replaces it (keeping its `_id`).
//!
//! Expressions are the engine's aggregation expressions ([`Expression`]), parsed with the
//! statement's variables: `$$NOW` and the command's `let`, then the statement's constants `c`.
//! Computed values are stored as they come, so a pipeline may create field names holding `.`
//! or starting with `$` (`$setField`, `$literal`), as MongoDB 5.0+ allows.

use std::sync::Arc;

use bson::raw::CString;
use bson::{RawArray, RawBson, RawBsonRef, RawDocument, RawDocumentBuf};

use crate::error::{CommandError, ErrorCode};
use crate::query::display::{self, type_name};
use crate::query::expr::{Expression, Variables};
use crate::query::{check_field_path, invalid_bson, true_value};

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
    ReplaceRoot { expr: Expression, with: bool },
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
    Compute(Expression),
    Nested(Spec),
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
    /// Parses an update pipeline whose expressions see `vars`.
    pub(super) fn parse(
        pipeline: &RawArray,
        vars: &Arc<Variables>,
    ) -> Result<Pipeline, CommandError> {
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
                "$set" | "$addFields" => Stage::AddFields(parse_add_fields(name, spec, vars)?),
                "$project" => parse_project(spec, vars)?,
                "$unset" => parse_unset(spec)?,
                "$replaceRoot" => parse_replace_root(spec, vars)?,
                "$replaceWith" => Stage::ReplaceRoot {
                    expr: Expression::parse_in(spec, vars)?,
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

    /// Runs the stages on `doc`; each stage's expressions see that stage's input document.
    pub(super) fn apply(&self, doc: &RawDocument) -> Result<RawDocumentBuf, CommandError> {
        let mut cur = doc.to_owned();
        for stage in &self.stages {
            let root: &RawDocument = &cur;
            let next = match stage {
                Stage::AddFields(spec) => add_to_doc(spec, &cur, root)?,
                Stage::Project {
                    inclusion: false,
                    spec,
                } => exclude_doc(spec, &cur)?,
                Stage::Project {
                    inclusion: true,
                    spec,
                } => include_doc(spec, &cur, root)?,
                Stage::ReplaceRoot { expr, with } => match expr.evaluate(root)? {
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

fn parse_add_fields(
    stage: &str,
    spec: RawBsonRef<'_>,
    vars: &Arc<Variables>,
) -> Result<Spec, CommandError> {
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
                    Field::Compute(Expression::parse_in(value, vars)?)
                }
                RawBsonRef::Document(d) => Field::Nested(parse_nested_add(d, name, vars)?),
                other => Field::Compute(Expression::parse_in(other, vars)?),
            };
            out.insert(name, field, spec)?;
        }
        Ok(out)
    })()
    .map_err(invalid(stage))
}

/// A sub-object of `$addFields`: its fields are paths below `prefix`.
fn parse_nested_add(
    d: &RawDocument,
    prefix: &str,
    vars: &Arc<Variables>,
) -> Result<Spec, CommandError> {
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
                Field::Compute(Expression::parse_in(value, vars)?)
            }
            RawBsonRef::Document(sub) => {
                Field::Nested(parse_nested_add(sub, &format!("{prefix}.{name}"), vars)?)
            }
            other => Field::Compute(Expression::parse_in(other, vars)?),
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

fn parse_project(spec: RawBsonRef<'_>, vars: &Arc<Variables>) -> Result<Stage, CommandError> {
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
            let field = project_field(&mut ctx, name, value, true, vars)?;
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
    vars: &Arc<Variables>,
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
                let field = project_field(ctx, &format!("{name}.{k}"), v, false, vars)?;
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
            Ok(Field::Compute(Expression::parse_in(value, vars)?))
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

fn parse_replace_root(spec: RawBsonRef<'_>, vars: &Arc<Variables>) -> Result<Stage, CommandError> {
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
        expr: Expression::parse_in(new_root, vars)?,
        with: false,
    })
}

/// `$addFields` on a document: computed fields replace existing ones in place, new ones are
/// appended in specification order; a missing result removes the field.
fn add_to_doc(
    spec: &Spec,
    doc: &RawDocument,
    root: &RawDocument,
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
    root: &RawDocument,
) -> Result<Option<RawBson>, CommandError> {
    match field {
        Field::Compute(e) => e.evaluate(root),
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
    root: &RawDocument,
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
    root: &RawDocument,
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
        let vars =
            Variables::new(bson::DateTime::from_millis(1_000)).with_constants(&rawdoc! {"x": 5})?;
        Pipeline::parse(&stages, &Arc::new(vars))?.apply(doc)
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
            // Computed values may create names holding `.` or starting with `$`.
            (
                rawbson!([{"$replaceWith": {"$setField": {"field": {"$literal": "$x"}, "value": "$$x", "input": "$$ROOT"}}}, {"$project": {"a": 0, "b": 0, "e": 0}}]),
                rawdoc! {"_id": 1, "$x": 5},
            ),
            (
                rawbson!([{"$set": {"b": {"$setField": {"field": "c.d", "value": {"$add": ["$a", 1]}, "input": "$b"}}}}, {"$project": {"b": 1}}]),
                rawdoc! {"_id": 1, "b": {"c": 2, "d": 3, "c.d": 2}},
            ),
            (
                rawbson!([{"$project": {"_id": 0, "lit": {"$literal": {"$k": 1, "a.b": 2}}}}]),
                rawdoc! {"lit": {"$k": 1, "a.b": 2}},
            ),
            (
                rawbson!([{"$set": {"n": {"$let": {"vars": {"y": 2}, "in": {"$multiply": ["$$x", "$$y"]}}}}}, {"$project": {"n": 1, "_id": 0}}]),
                rawdoc! {"n": 10},
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
                rawbson!([{"$set": {"a": {"$toHashedIndexKey": 1}}}]),
                ErrorCode::NotImplemented,
                "Invalid $set :: caused by :: the $toHashedIndexKey expression is not supported by Ebb yet",
            ),
            (
                rawbson!([{"$set": {"a": "$$nope"}}]),
                ErrorCode::Location(17276),
                "Invalid $set :: caused by :: Use of undefined variable: nope",
            ),
            (
                rawbson!([{"$replaceWith": {"$setField": {"field": "$f", "input": "$$ROOT", "value": 1}}}]),
                ErrorCode::Location(4_161_108),
                "'$CURRENT.f' is a field path reference which is not allowed in this context. Did you mean {$literal: '$CURRENT.f'}?",
            ),
            (
                rawbson!([{"$set": {"n": "$$CLUSTER_TIME"}}]),
                ErrorCode::Location(51144),
                "Builtin variable '$$CLUSTER_TIME' is not available",
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
