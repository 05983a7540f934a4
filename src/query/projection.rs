//! find projections: `Projection::compile(&spec)?` once, then `projection.apply(&doc)`.
//!
//! Supported: inclusion (`{a: 1}`) and exclusion (`{a: 0}`) projections with truthy values
//! (`true`, non-zero numbers) and falsy ones (`false`, `0`); `_id` is included unless `_id: 0`;
//! dotted paths and sub-objects (`{"a.b": 1}` = `{a: {b: 1}}`), applied through arrays of
//! documents; literal values (`{a: "x"}`, `{a: null}`), which make an inclusion projection.
//! Inclusion keeps the document's field order and drops scalars inside arrays it descends;
//! exclusion keeps everything it does not name.
//!
//! Errors follow mongod's projection parser (codes 31249, 31250, 31253, 31254, 31310, 51270 and
//! the `FieldPath` checks). `$slice`, `$elemMatch`, `$meta`, positional `a.$`, `$`-field-path
//! strings and other aggregation expressions are rejected with `NotImplemented`.

use bson::raw::CString;
use bson::{RawArray, RawArrayBuf, RawBson, RawBsonRef, RawDocument, RawDocumentBuf};

use super::{check_field_path, display, invalid_bson, not_implemented, true_value};
use crate::error::{CommandError, ErrorCode};

/// A compiled projection.
#[derive(Debug, Clone)]
pub struct Projection {
    inclusion: bool,
    root: Node,
}

#[derive(Debug, Clone, Default)]
struct Node {
    children: Vec<(CString, Child)>,
}

#[derive(Debug, Clone)]
enum Child {
    Include,
    Exclude,
    Literal(RawBson),
    Node(Node),
}

#[derive(Default)]
struct Ctx {
    /// `Some(true)` for inclusion, `Some(false)` for exclusion, once a field decides it.
    inclusion: Option<bool>,
    id_specified: bool,
    id_included: bool,
}

fn location(code: i32, msg: impl Into<String>) -> CommandError {
    CommandError::new(ErrorCode::Location(code), msg)
}

impl Projection {
    /// Compiles a projection document.
    pub fn compile(spec: &RawDocument) -> Result<Projection, CommandError> {
        let mut ctx = Ctx::default();
        let mut root = Node::default();
        for item in spec {
            let (name, value) = item.map_err(|e| invalid_bson(&e))?;
            let name = name.as_str();
            ctx.id_specified |= name == "_id" || name.starts_with("_id.");
            parse_element(&mut ctx, name, value, &mut root, true)?;
        }
        let inclusion = ctx.inclusion.unwrap_or(ctx.id_included);
        if inclusion && !ctx.id_specified {
            root.add_at_path(&["_id"], "_id", Child::Include)?;
        }
        if !inclusion && ctx.id_included {
            // `{_id: 1, a: 0}` is an exclusion; `_id` is kept by default anyway.
            root.children.retain(|(k, _)| k.as_str() != "_id");
        }
        Ok(Projection { inclusion, root })
    }

    /// Whether this is an inclusion projection (otherwise an exclusion, possibly empty).
    pub fn is_inclusion(&self) -> bool {
        self.inclusion
    }

    /// Projects `doc`.
    pub fn apply(&self, doc: &RawDocument) -> RawDocumentBuf {
        if self.inclusion {
            include_doc(&self.root, doc)
        } else {
            exclude_doc(&self.root, doc)
        }
    }
}

fn parse_element(
    ctx: &mut Ctx,
    name: &str,
    value: RawBsonRef<'_>,
    parent: &mut Node,
    is_root: bool,
) -> Result<(), CommandError> {
    if name == "$" || name.ends_with(".$") || name.contains(".$.") {
        return Err(not_implemented("the positional projection operator"));
    }
    check_field_path(name)?;
    let parts: Vec<&str> = name.split('.').collect();
    let top_level_id = is_root && name == "_id";
    match value {
        RawBsonRef::Document(sub) => {
            let mut it = sub.iter();
            if let Some(first) = it.next() {
                let (k, _) = first.map_err(|e| invalid_bson(&e))?;
                if k.as_str().starts_with('$') && it.next().is_none() {
                    return Err(not_implemented(&format!(
                        "the {} projection operator",
                        k.as_str()
                    )));
                }
            } else {
                return Err(location(
                    51270,
                    "An empty sub-projection is not a valid value. Found empty object at path",
                ));
            }
            let node = parent.node_at_path(&parts, name)?;
            for item in sub {
                let (k, v) = item.map_err(|e| invalid_bson(&e))?;
                parse_element(ctx, k.as_str(), v, node, false)?;
            }
        }
        RawBsonRef::Boolean(_)
        | RawBsonRef::Int32(_)
        | RawBsonRef::Int64(_)
        | RawBsonRef::Double(_)
        | RawBsonRef::Decimal128(_) => {
            if true_value(value) {
                parent.add_at_path(&parts, name, Child::Include)?;
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
        }
        RawBsonRef::String(s) if s.starts_with('$') => {
            return Err(not_implemented("field path expressions in projections"));
        }
        RawBsonRef::Array(_) => {
            return Err(not_implemented("array expressions in projections"));
        }
        literal => {
            parent.add_at_path(&parts, name, Child::Literal(literal.into()))?;
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
        }
    }
    Ok(())
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

    fn has_literals(&self) -> bool {
        self.children.iter().any(|(_, c)| match c {
            Child::Literal(_) => true,
            Child::Node(n) => n.has_literals(),
            Child::Include | Child::Exclude => false,
        })
    }
}

fn include_doc(node: &Node, doc: &RawDocument) -> RawDocumentBuf {
    let mut out = RawDocumentBuf::new();
    let mut present = vec![false; node.children.len()];
    for (k, v) in doc.iter().map_while(Result::ok) {
        let Some(idx) = node.position(k.as_str()) else {
            continue;
        };
        present[idx] = true;
        match (&node.children[idx].1, v) {
            (Child::Include, _) => out.append(k, v),
            (Child::Node(sub), RawBsonRef::Document(d)) => out.append(k, include_doc(sub, d)),
            (Child::Node(sub), RawBsonRef::Array(a)) => out.append(k, include_array(sub, a)),
            (Child::Node(sub), _) if sub.has_literals() => {
                out.append(k, include_doc(sub, &RawDocumentBuf::new()));
            }
            _ => {}
        }
    }
    // Computed fields come after the document's own, in projection order.
    for ((k, child), seen) in node.children.iter().zip(present) {
        match child {
            Child::Literal(v) => out.append(k, v.clone()),
            Child::Node(sub) if !seen && sub.has_literals() => {
                out.append(k, include_doc(sub, &RawDocumentBuf::new()));
            }
            _ => {}
        }
    }
    out
}

fn include_array(node: &Node, a: &RawArray) -> RawArrayBuf {
    let mut out = RawArrayBuf::new();
    for e in a.into_iter().map_while(Result::ok) {
        match e {
            RawBsonRef::Document(d) => out.push(include_doc(node, d)),
            RawBsonRef::Array(inner) => out.push(include_array(node, inner)),
            _ => {}
        }
    }
    out
}

fn exclude_doc(node: &Node, doc: &RawDocument) -> RawDocumentBuf {
    let mut out = RawDocumentBuf::new();
    for (k, v) in doc.iter().map_while(Result::ok) {
        match (node.get(k.as_str()), v) {
            (Some(Child::Exclude), _) => {}
            (Some(Child::Node(sub)), RawBsonRef::Document(d)) => out.append(k, exclude_doc(sub, d)),
            (Some(Child::Node(sub)), RawBsonRef::Array(a)) => out.append(k, exclude_array(sub, a)),
            _ => out.append(k, v),
        }
    }
    out
}

fn exclude_array(node: &Node, a: &RawArray) -> RawArrayBuf {
    let mut out = RawArrayBuf::new();
    for e in a.into_iter().map_while(Result::ok) {
        match e {
            RawBsonRef::Document(d) => out.push(exclude_doc(node, d)),
            RawBsonRef::Array(inner) => out.push(exclude_array(node, inner)),
            other => out.push(other),
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
                rawdoc! {"a": {"$slice": 1}},
                ErrorCode::NotImplemented,
                "the $slice projection operator is not supported by Ebb yet",
            ),
            (
                rawdoc! {"a.$": 1},
                ErrorCode::NotImplemented,
                "the positional projection operator is not supported by Ebb yet",
            ),
            (
                rawdoc! {"a": "$b"},
                ErrorCode::NotImplemented,
                "field path expressions in projections is not supported by Ebb yet",
            ),
        ];
        for (spec, code, msg) in cases {
            let err = Projection::compile(&spec).unwrap_err();
            assert_eq!((err.code, err.errmsg.as_str()), (code, msg), "{spec:?}");
        }
    }
}
