//! Aggregation examples: the manual's example for each stage, expression operator family,
//! accumulator and window operator, as data (`compat/aggregation/<family>/<name>.json`), each
//! run on a fresh server through the `mongodb` crate and through mongosh.
//!
//! A file is one JSON object (extended JSON v2, canonical or relaxed, read by the `bson`
//! crate: a plain integral number is an int32, or an int64 beyond int32's range; a number
//! written with a fraction or exponent, `2.0` included, is a double; `{"$numberLong": "2"}`,
//! `{"$numberDecimal": "2.5"}`, `{"$date": "2014-01-01T08:00:00Z"}`, `{"$oid": "…"}` and the
//! other wrappers give their types). Keys:
//!
//! - `source` (required): the https URL of the manual page or section the example comes from.
//! - `description`: what it shows, and anything changed from the manual (e.g. made
//!   deterministic, or a numeric type the manual's shell output leaves open).
//! - `collection` (required): the collection aggregated, or `null` for a database-level
//!   aggregate (`db.aggregate([...])`, e.g. `$documents`).
//! - `docs`: the documents inserted into `collection` first (in order).
//! - `collections`: more collections the example reads, `{"name": [documents]}` (`$lookup`…).
//! - `indexes`: `[{"collection"?, "key", "name"?, …options}]`, created after the inserts, by
//!   `createIndexes` (`collection` defaults to the case's; `name` to mongod's `a_1_b_-1`).
//! - `pipeline` (required): the stages.
//! - `options`: more aggregate options (`let`, `collation`, `allowDiskUse`…), camelCase.
//! - `expected` with `ordered` (both required together): the output documents, compared with
//!   exact BSON types and field order; `ordered: false` compares them as a multiset (the
//!   manual's outputs of `$group` and friends come in no set order).
//! - `resultCollection`: for `$out`/`$merge`: `expected` is then what `find({})` sorted by
//!   `_id` returns from that collection after the pipeline ran.
//! - `expectError`: `{"code": n, "codeName"?: "…"}` instead of `expected`: the aggregate must
//!   fail with that error.
//!
//! Every case runs in the database `compat_agg` of its own fresh server. The mongosh run is a
//! generated script: the case as canonical extended JSON, then `aggregation/run_case.js`,
//! which prints the outcome as canonical extended JSON; the runner compares it here with the
//! same rules as the driver's, so both clients are judged alike.
//!
//! `compat/aggregation/pending.txt` lists the examples Ebb does not pass yet, one a line:
//! `<path under aggregation/>  # reason` (a path may end in ` via mongosh` or
//! ` via mongodb-crate` to name one client). A listed example that fails is reported as
//! pending; a listed example that passes fails the run ("now passes: remove it from
//! pending.txt"), so the list stays true.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result, bail};
use bson::{Bson, Document, doc};
use serde_json::Value;

/// The database every example runs in.
pub const DB: &str = "compat_agg";

/// Marks the line the mongosh script prints its outcome on.
pub const MONGOSH_TAG: &str = "ebb-agg-case: ";

/// The mongosh half of the generated script.
const RUN_CASE_JS: &str = include_str!("../aggregation/run_case.js");

/// One example file.
#[derive(Debug)]
pub struct AggCase {
    /// `None` for a database-level aggregate.
    pub collection: Option<String>,
    /// Every collection to fill, the case's own first, with its documents.
    pub collections: Vec<(String, Vec<Document>)>,
    /// `(collection, createIndexes entry)`.
    pub indexes: Vec<(String, Document)>,
    pub pipeline: Vec<Document>,
    pub options: Document,
    pub result_collection: Option<String>,
    pub expect: Expect,
}

#[derive(Debug)]
pub enum Expect {
    Docs {
        docs: Vec<Document>,
        ordered: bool,
    },
    Error {
        code: i32,
        code_name: Option<String>,
    },
}

/// What a client saw: the output documents, or the server's error.
#[derive(Debug)]
pub enum Outcome {
    Docs(Vec<Document>),
    Error {
        code: i32,
        code_name: String,
        errmsg: String,
    },
}

/// Reads and checks an example file.
pub fn load(path: &Path) -> Result<AggCase> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let value: Value =
        serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
    parse(value)
}

/// The keys an example file may have.
const KEYS: &[&str] = &[
    "source",
    "description",
    "collection",
    "docs",
    "collections",
    "indexes",
    "pipeline",
    "options",
    "expected",
    "ordered",
    "resultCollection",
    "expectError",
];

fn parse(value: Value) -> Result<AggCase> {
    let Value::Object(mut top) = value else {
        bail!("an example is a JSON object");
    };
    if let Some(k) = top.keys().find(|k| !KEYS.contains(&k.as_str())) {
        bail!("unknown key `{k}` (allowed: {})", KEYS.join(", "));
    }
    match top.get("source") {
        Some(Value::String(s)) if s.starts_with("https://") => {}
        _ => bail!("`source` must be the https URL of the manual's page"),
    }
    if !matches!(top.get("description"), None | Some(Value::String(_))) {
        bail!("`description` must be a string");
    }
    let collection = match top.remove("collection") {
        Some(Value::String(s)) if !s.is_empty() => Some(s),
        Some(Value::Null) => None,
        _ => bail!("`collection` must be a collection name, or null for db.aggregate()"),
    };
    let mut collections = Vec::new();
    if let Some(name) = &collection {
        collections.push((name.clone(), documents(top.remove("docs"), "docs")?));
    } else if top.contains_key("docs") {
        bail!("`docs` needs a `collection`");
    }
    match top.remove("collections") {
        None => {}
        Some(Value::Object(more)) => {
            for (name, docs) in more {
                if collections.iter().any(|(n, _)| *n == name) {
                    bail!("collection `{name}` is given twice");
                }
                let docs = documents(Some(docs), &format!("collections.{name}"))?;
                collections.push((name, docs));
            }
        }
        Some(_) => bail!("`collections` must be an object: {{\"name\": [documents]}}"),
    }
    let mut indexes = Vec::new();
    for (i, spec) in documents(top.remove("indexes"), "indexes")?
        .into_iter()
        .enumerate()
    {
        indexes.push(index(spec, collection.as_deref()).with_context(|| format!("indexes.{i}"))?);
    }
    let pipeline = documents(top.remove("pipeline"), "pipeline")?;
    let options = match top.remove("options") {
        None => Document::new(),
        Some(v) => match Bson::try_from(v).context("options")? {
            Bson::Document(d) => d,
            _ => bail!("`options` must be an object"),
        },
    };
    let result_collection = match top.remove("resultCollection") {
        None => None,
        Some(Value::String(s)) if !s.is_empty() => Some(s),
        Some(_) => bail!("`resultCollection` must be a collection name"),
    };
    let expect = match (
        top.remove("expected"),
        top.remove("ordered"),
        top.remove("expectError"),
    ) {
        (Some(expected), Some(Value::Bool(ordered)), None) => Expect::Docs {
            docs: documents(Some(expected), "expected")?,
            ordered,
        },
        (None, None, Some(Value::Object(error))) => {
            if let Some(k) = error.keys().find(|k| *k != "code" && *k != "codeName") {
                bail!("expectError: unknown key `{k}` (allowed: code, codeName)");
            }
            let code = error
                .get("code")
                .and_then(Value::as_i64)
                .and_then(|c| i32::try_from(c).ok())
                .context("expectError.code must be an error code")?;
            let code_name = match error.get("codeName") {
                None => None,
                Some(Value::String(s)) => Some(s.clone()),
                Some(_) => bail!("expectError.codeName must be a string"),
            };
            Expect::Error { code, code_name }
        }
        _ => bail!(
            "give `expected` (an array) with `ordered` (true or false), or `expectError` \
             ({{\"code\": n}}), not both"
        ),
    };
    Ok(AggCase {
        collection,
        collections,
        indexes,
        pipeline,
        options,
        result_collection,
        expect,
    })
}

/// An array of objects (extended JSON) as documents; absent is empty.
fn documents(value: Option<Value>, what: &str) -> Result<Vec<Document>> {
    let Some(value) = value else {
        return Ok(Vec::new());
    };
    let Value::Array(items) = value else {
        bail!("`{what}` must be an array of objects");
    };
    items
        .into_iter()
        .enumerate()
        .map(|(i, item)| match Bson::try_from(item) {
            Ok(Bson::Document(d)) => Ok(d),
            Ok(other) => bail!("{what}.{i}: expected an object, got {other}"),
            Err(e) => bail!("{what}.{i}: {e}"),
        })
        .collect()
}

/// An `indexes` entry as `(collection, createIndexes entry)`, named as mongod would.
fn index(mut spec: Document, default: Option<&str>) -> Result<(String, Document)> {
    let collection = match spec.remove("collection") {
        Some(Bson::String(s)) => s,
        None => default
            .context("`collection` is needed for a database-level aggregate")?
            .to_owned(),
        Some(_) => bail!("`collection` must be a string"),
    };
    let key = spec
        .get_document("key")
        .context("`key` must be an object")?;
    if !spec.contains_key("name") {
        let name: Vec<String> = key
            .iter()
            .map(|(k, v)| {
                let v = match v {
                    Bson::String(s) => s.clone(),
                    Bson::Int32(n) => n.to_string(),
                    Bson::Int64(n) => n.to_string(),
                    Bson::Double(d) => d.to_string(),
                    other => other.to_string(),
                };
                format!("{k}_{v}")
            })
            .collect();
        spec.insert("name", name.join("_"));
    }
    Ok((collection, spec))
}

/// Whether `outcome` is what `case` expects; the error says how it differs.
pub fn judge(case: &AggCase, outcome: &Outcome) -> Result<()> {
    match (&case.expect, outcome) {
        (Expect::Docs { docs, ordered }, Outcome::Docs(got)) => {
            if *ordered {
                compare_ordered(docs, got)
            } else {
                compare_unordered(docs, got)
            }
        }
        (
            Expect::Docs { .. },
            Outcome::Error {
                code,
                code_name,
                errmsg,
            },
        ) => bail!("expected documents, got error {code} ({code_name}): {errmsg}"),
        (Expect::Error { code, code_name }, Outcome::Docs(got)) => bail!(
            "expected error {code}{}, got {} documents: {}",
            code_name
                .as_deref()
                .map(|n| format!(" ({n})"))
                .unwrap_or_default(),
            got.len(),
            shorten(&show_docs(got))
        ),
        (
            Expect::Error { code, code_name },
            Outcome::Error {
                code: got,
                code_name: got_name,
                errmsg,
            },
        ) => {
            if code != got || code_name.as_ref().is_some_and(|n| n != got_name) {
                bail!(
                    "expected error {code}{}, got {got} ({got_name}): {errmsg}",
                    code_name
                        .as_deref()
                        .map(|n| format!(" ({n})"))
                        .unwrap_or_default()
                );
            }
            Ok(())
        }
    }
}

fn compare_ordered(expected: &[Document], got: &[Document]) -> Result<()> {
    for (i, (e, g)) in expected.iter().zip(got).enumerate() {
        if !same_doc(e, g) {
            bail!(
                "document {i}: expected {}, got {}",
                show(&Bson::Document(e.clone())),
                show(&Bson::Document(g.clone()))
            );
        }
    }
    if expected.len() != got.len() {
        bail!(
            "expected {} documents, got {}: {}",
            expected.len(),
            got.len(),
            shorten(&show_docs(got))
        );
    }
    Ok(())
}

fn compare_unordered(expected: &[Document], got: &[Document]) -> Result<()> {
    let mut unused: Vec<&Document> = got.iter().collect();
    let mut missing = Vec::new();
    for e in expected {
        match unused.iter().position(|g| same_doc(e, g)) {
            Some(at) => {
                unused.swap_remove(at);
            }
            None => missing.push(e.clone()),
        }
    }
    if missing.is_empty() && unused.is_empty() {
        return Ok(());
    }
    let unexpected: Vec<Document> = unused.into_iter().cloned().collect();
    bail!(
        "(in any order) missing {}; unexpected {}",
        shorten(&show_docs(&missing)),
        shorten(&show_docs(&unexpected))
    )
}

/// Exact equality: same types (int32, int64, double and decimal are all different), same
/// values (NaN equals NaN; 0.0 and -0.0 differ), documents with the same fields in the same
/// order.
fn same(a: &Bson, b: &Bson) -> bool {
    match (a, b) {
        (Bson::Double(x), Bson::Double(y)) => {
            (x.is_nan() && y.is_nan()) || x.to_bits() == y.to_bits()
        }
        (Bson::Document(x), Bson::Document(y)) => same_doc(x, y),
        (Bson::Array(x), Bson::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| same(a, b))
        }
        (a, b) => a == b,
    }
}

fn same_doc(a: &Document, b: &Document) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|((ka, va), (kb, vb))| ka == kb && same(va, vb))
}

/// A value as canonical extended JSON (every type marked), as failures show it.
fn show(value: &Bson) -> String {
    value.clone().into_canonical_extjson().to_string()
}

fn show_docs(docs: &[Document]) -> String {
    show(&Bson::Array(
        docs.iter().cloned().map(Bson::Document).collect(),
    ))
}

/// At most 600 characters.
fn shorten(text: &str) -> String {
    match text.char_indices().nth(600) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}

/// Runs `case` through the `mongodb` crate against the server at `uri`.
pub async fn run_with_driver(case: &AggCase, uri: &str) -> Result<Outcome> {
    let client = mongodb::Client::with_uri_str(uri)
        .await
        .context("connecting")?;
    let result = drive(case, &client).await;
    client.shutdown().await;
    result
}

async fn drive(case: &AggCase, client: &mongodb::Client) -> Result<Outcome> {
    let db = client.database(DB);
    for (name, docs) in &case.collections {
        if docs.is_empty() {
            db.create_collection(name)
                .await
                .with_context(|| format!("creating {name}"))?;
        } else {
            db.collection::<Document>(name)
                .insert_many(docs)
                .await
                .with_context(|| format!("inserting into {name}"))?;
        }
    }
    for (name, spec) in &case.indexes {
        db.run_command(doc! { "createIndexes": name, "indexes": [spec.clone()] })
            .await
            .with_context(|| format!("createIndexes on {name}"))?;
    }
    let options: mongodb::options::AggregateOptions =
        bson::deserialize_from_document(case.options.clone())
            .context("`options` are not aggregate options the driver knows")?;
    let pipeline = case.pipeline.clone();
    let cursor = match &case.collection {
        Some(name) => {
            db.collection::<Document>(name)
                .aggregate(pipeline)
                .with_options(options)
                .await
        }
        None => db.aggregate(pipeline).with_options(options).await,
    };
    let docs = match cursor {
        Ok(cursor) => collect(cursor).await,
        Err(e) => Err(e),
    };
    let docs = match docs {
        Ok(docs) => docs,
        Err(e) => return server_error(e),
    };
    let Some(out) = &case.result_collection else {
        return Ok(Outcome::Docs(docs));
    };
    let cursor = db
        .collection::<Document>(out)
        .find(doc! {})
        .sort(doc! { "_id": 1 })
        .await
        .with_context(|| format!("find in {out}"))?;
    Ok(Outcome::Docs(
        collect(cursor)
            .await
            .with_context(|| format!("find in {out}"))?,
    ))
}

async fn collect(mut cursor: mongodb::Cursor<Document>) -> mongodb::error::Result<Vec<Document>> {
    let mut docs = Vec::new();
    while cursor.advance().await? {
        docs.push(cursor.deserialize_current()?);
    }
    Ok(docs)
}

fn server_error(e: mongodb::error::Error) -> Result<Outcome> {
    match *e.kind {
        mongodb::error::ErrorKind::Command(c) => Ok(Outcome::Error {
            code: c.code,
            code_name: c.code_name,
            errmsg: c.message,
        }),
        other => bail!("aggregate failed: {other}"),
    }
}

/// The mongosh script for `case`: the case as canonical extended JSON, then `run_case.js`.
pub fn mongosh_script(case: &AggCase) -> String {
    let array = |docs: &[Document]| Bson::Array(docs.iter().cloned().map(Bson::Document).collect());
    let collections: Vec<Bson> = case
        .collections
        .iter()
        .map(|(name, docs)| Bson::Document(doc! { "name": name, "docs": array(docs) }))
        .collect();
    let indexes: Vec<Bson> = case
        .indexes
        .iter()
        .map(|(name, spec)| Bson::Document(doc! { "collection": name, "spec": spec.clone() }))
        .collect();
    let spec = doc! {
        "db": DB,
        "collection": case.collection.clone().map_or(Bson::Null, Bson::String),
        "collections": collections,
        "indexes": indexes,
        "pipeline": array(&case.pipeline),
        "options": case.options.clone(),
        "resultCollection": case.result_collection.clone().map_or(Bson::Null, Bson::String),
    };
    let text = Bson::Document(spec).into_canonical_extjson().to_string();
    format!(
        "const CASE = EJSON.parse({}, {{ relaxed: false }});\n{RUN_CASE_JS}",
        Value::String(text)
    )
}

/// Reads the outcome the mongosh script printed.
pub fn mongosh_outcome(output: &str) -> Result<Outcome> {
    let Some(line) = output.lines().find_map(|l| l.strip_prefix(MONGOSH_TAG)) else {
        bail!("mongosh printed no outcome:\n{output}");
    };
    let value: Value = serde_json::from_str(line).context("mongosh's outcome")?;
    let Bson::Document(mut outcome) = Bson::try_from(value).context("mongosh's outcome")? else {
        bail!("mongosh's outcome is not an object");
    };
    if let Some(Bson::Array(items)) = outcome.remove("ok") {
        let docs = items
            .into_iter()
            .map(|d| match d {
                Bson::Document(d) => Ok(d),
                other => bail!("an output item is not a document: {other}"),
            })
            .collect::<Result<_>>()?;
        return Ok(Outcome::Docs(docs));
    }
    let error = outcome
        .get_document("error")
        .context("mongosh's outcome has neither `ok` nor `error`")?;
    let code = match error.get("code") {
        Some(Bson::Int32(n)) => *n,
        Some(Bson::Double(d)) if d.fract() == 0.0 && d.abs() < 1e9 => {
            #[expect(clippy::cast_possible_truncation, reason = "integral and in range")]
            let n = *d as i32;
            n
        }
        other => bail!("mongosh's error code is {other:?}"),
    };
    Ok(Outcome::Error {
        code,
        code_name: error.get_str("codeName").unwrap_or("").to_owned(),
        errmsg: error.get_str("errmsg").unwrap_or("").to_owned(),
    })
}

/// The pending list: entry (a path under `aggregation/`, maybe with ` via <client>`) → reason.
pub fn load_pending(path: &Path) -> Result<BTreeMap<String, String>> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(BTreeMap::new()),
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    };
    let mut pending = BTreeMap::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let Some((entry, reason)) = line.split_once('#') else {
            bail!("{}:{}: `<path>  # reason` expected", path.display(), i + 1);
        };
        let (entry, reason) = (entry.trim(), reason.trim());
        if entry.is_empty() || reason.is_empty() {
            bail!(
                "{}:{}: a path and a reason are needed",
                path.display(),
                i + 1
            );
        }
        if pending
            .insert(entry.to_owned(), reason.to_owned())
            .is_some()
        {
            bail!("{}:{}: `{entry}` is listed twice", path.display(), i + 1);
        }
    }
    Ok(pending)
}

/// Checks a value parses as extended JSON (used by tests).
#[cfg(test)]
fn bson(value: Value) -> Bson {
    Bson::try_from(value).unwrap()
}

#[cfg(test)]
mod tests {
    use serde_json::{Map, json};

    use super::*;

    fn case(extra: &Value) -> Result<AggCase> {
        let mut base: Map<String, Value> = json!({
            "source": "https://www.mongodb.com/docs/manual/",
            "collection": "c",
            "docs": [{"_id": 1}],
            "pipeline": [{"$match": {}}],
        })
        .as_object()
        .cloned()
        .unwrap();
        for (k, v) in extra.as_object().unwrap() {
            base.insert(k.clone(), v.clone());
        }
        parse(Value::Object(base))
    }

    #[test]
    fn numbers_keep_their_types() {
        assert_eq!(bson(json!(2)), Bson::Int32(2));
        assert_eq!(bson(json!(3_000_000_000_i64)), Bson::Int64(3_000_000_000));
        assert_eq!(bson(json!(2.0)), Bson::Double(2.0));
        assert_eq!(bson(json!({"$numberLong": "2"})), Bson::Int64(2));
        // Doubles with 17 significant digits are read exactly (serde_json's float_roundtrip).
        let text: Value = serde_json::from_str("9.450000000000001").unwrap();
        assert_eq!(bson(text), Bson::Double(10.5 * 0.9));
        assert!(!same(&Bson::Int32(2), &Bson::Int64(2)));
        assert!(!same(&Bson::Int32(2), &Bson::Double(2.0)));
        assert!(!same(&Bson::Double(0.0), &Bson::Double(-0.0)));
        assert!(same(&Bson::Double(f64::NAN), &Bson::Double(f64::NAN)));
    }

    #[test]
    fn field_order_and_multisets() {
        let a = doc! { "x": 1, "y": 2 };
        let b = doc! { "y": 2, "x": 1 };
        assert!(!same_doc(&a, &b));
        let c = doc! { "x": 1 };
        assert!(compare_unordered(&[a.clone(), c.clone()], &[c.clone(), a.clone()]).is_ok());
        assert!(compare_unordered(&[a.clone(), a.clone()], &[a.clone(), c.clone()]).is_err());
        assert!(compare_ordered(&[a.clone(), c.clone()], &[c.clone(), a.clone()]).is_err());
        assert!(compare_ordered(std::slice::from_ref(&a), &[a.clone(), c]).is_err());
        assert!(compare_ordered(std::slice::from_ref(&a), std::slice::from_ref(&a)).is_ok());
    }

    #[test]
    fn judging_errors() {
        let c = case(&json!({"expectError": {"code": 40324, "codeName": "UnknownStage"}})).unwrap();
        let err = |code, name: &str| Outcome::Error {
            code,
            code_name: name.into(),
            errmsg: String::new(),
        };
        assert!(judge(&c, &err(40324, "UnknownStage")).is_ok());
        assert!(judge(&c, &err(40324, "Other")).is_err());
        assert!(judge(&c, &err(2, "BadValue")).is_err());
        assert!(judge(&c, &Outcome::Docs(vec![])).is_err());
    }

    #[test]
    fn malformed_cases_are_refused() {
        assert!(case(&json!({"expected": [], "ordered": true})).is_ok());
        assert!(
            case(&json!({"expected": []})).is_err(),
            "ordered is required"
        );
        assert!(
            case(&json!({"expected": [], "ordered": true, "expectError": {"code": 2}})).is_err()
        );
        assert!(case(&json!({"expected": [], "ordered": true, "bogus": 1})).is_err());
        assert!(case(&json!({"source": "x", "expected": [], "ordered": true})).is_err());
        assert!(
            case(&json!({"collection": null, "expected": [], "ordered": true})).is_err(),
            "docs need a collection"
        );
    }

    #[test]
    fn indexes_are_named_as_mongod_does() {
        let c = case(&json!({
            "indexes": [{"key": {"a": 1, "b": -1}}, {"collection": "o", "key": {"t": "text"}, "name": "t"}],
            "expected": [], "ordered": true,
        }))
        .unwrap();
        assert_eq!(c.indexes[0].0, "c");
        assert_eq!(c.indexes[0].1.get_str("name").unwrap(), "a_1_b_-1");
        assert_eq!(c.indexes[1].0, "o");
        assert_eq!(c.indexes[1].1.get_str("name").unwrap(), "t");
    }

    #[test]
    fn mongosh_outcomes_parse_with_exact_types() {
        let out = format!(
            "noise\n{MONGOSH_TAG}{}\n",
            r#"{"ok":[{"_id":{"$numberInt":"1"},"n":{"$numberLong":"2"},"d":{"$numberDouble":"2.0"}}]}"#
        );
        let Outcome::Docs(docs) = mongosh_outcome(&out).unwrap() else {
            panic!("documents expected");
        };
        assert!(same_doc(&docs[0], &doc! { "_id": 1, "n": 2_i64, "d": 2.0 }));
        let out = format!(
            "{MONGOSH_TAG}{}",
            r#"{"error":{"code":{"$numberInt":"40324"},"codeName":"UnknownStage","errmsg":"x"}}"#
        );
        assert!(matches!(
            mongosh_outcome(&out).unwrap(),
            Outcome::Error { code: 40324, .. }
        ));
        assert!(mongosh_outcome("nothing").is_err());
    }

    #[test]
    fn every_example_loads_and_pending_names_real_files() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("aggregation");
        let mut n = 0;
        let mut paths = Vec::new();
        for family in std::fs::read_dir(&root).unwrap() {
            let family = family.unwrap().path();
            if !family.is_dir() {
                continue;
            }
            for file in std::fs::read_dir(&family).unwrap() {
                let path = file.unwrap().path();
                if path.extension().and_then(|e| e.to_str()) == Some("json") {
                    load(&path).unwrap_or_else(|e| panic!("{}: {e:#}", path.display()));
                    paths.push(path.strip_prefix(&root).unwrap().display().to_string());
                    n += 1;
                }
            }
        }
        assert!(n > 0, "no examples under {}", root.display());
        for entry in load_pending(&root.join("pending.txt")).unwrap().keys() {
            let path = entry
                .strip_suffix(" via mongosh")
                .or_else(|| entry.strip_suffix(" via mongodb-crate"))
                .unwrap_or(entry);
            assert!(
                paths.iter().any(|p| p == path),
                "pending.txt: no file {path}"
            );
        }
    }
}
