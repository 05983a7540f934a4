//! Comparing answers: the collection under test, the test's state (tallies and failures),
//! reading plans from explain, and showing differences.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use bson::{Bson, Document, doc};
use mongodb::Database;

use crate::common::rng::Rng;
use crate::generate::random_doc;

// ---------------------------------------------------------------------------------------------
// Comparing answers
// ---------------------------------------------------------------------------------------------

/// An answer: a value, or an error's code.
pub(crate) type Answer<T> = Result<T, String>;

pub(crate) fn error_text(e: &mongodb::error::Error) -> String {
    match &*e.kind {
        mongodb::error::ErrorKind::Command(c) => format!("error {} ({})", c.code, c.code_name),
        other => format!("error {other:?}"),
    }
}

/// The bytes of a value (so that `-0.0` and `0.0`, or two NaNs, compare as stored).
pub(crate) fn bytes_of(v: &Bson) -> Vec<u8> {
    doc! { "": v.clone() }.to_vec().unwrap_or_default()
}

/// A document with its top-level fields sorted by name.
fn by_name(d: &Document) -> Document {
    let mut fields: Vec<(&String, &Bson)> = d.iter().collect();
    fields.sort_by(|a, b| a.0.cmp(b.0));
    fields
        .into_iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// What the test tallies: which plans ran (with a non-empty answer) and how many comparisons.
#[derive(Default)]
pub(crate) struct Tally(BTreeMap<String, usize>);

impl Tally {
    pub(crate) fn add(&mut self, what: String) {
        *self.0.entry(what).or_default() += 1;
    }

    /// How many of `what`, over every phase.
    pub(crate) fn of(&self, what: &str) -> usize {
        self.0
            .iter()
            .filter(|(k, _)| k.ends_with(what))
            .map(|(_, n)| n)
            .sum()
    }
}

/// A collection under test.
pub(crate) struct Coll {
    pub(crate) db: Database,
    pub(crate) name: String,
    /// Fields that may hold arrays.
    pub(crate) arrays: Vec<&'static str>,
    /// The specs of its secondary indexes.
    pub(crate) indexes: Vec<Document>,
    pub(crate) next_id: i32,
    /// Whether it has a TTL index (documents may expire): no index-only plan may run.
    pub(crate) ttl: bool,
    /// The TTL index's spec while it exists.
    pub(crate) extra: Option<Document>,
    /// What its documents get besides `random_doc`'s fields (expiry fields).
    pub(crate) decorate: fn(&mut Rng, &mut Document),
}

impl Coll {
    pub(crate) fn new_doc(&self, rng: &mut Rng, id: i32) -> Document {
        let mut d = random_doc(rng, id, &self.arrays);
        (self.decorate)(rng, &mut d);
        d
    }

    pub(crate) fn focus(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for spec in &self.indexes {
            if let Ok(key) = spec.get_document("key") {
                for k in key.keys() {
                    if k != "_id" && !k.starts_with('_') && !out.contains(k) {
                        out.push(k.clone());
                    }
                }
            }
        }
        out
    }

    /// The key fields of each index, in order.
    pub(crate) fn keys(&self) -> Vec<Vec<String>> {
        self.indexes
            .iter()
            .filter_map(|s| s.get_document("key").ok())
            .map(|k| k.keys().cloned().collect())
            .collect()
    }

    pub(crate) fn partials(&self) -> Vec<Document> {
        self.indexes
            .iter()
            .filter_map(|s| s.get_document("partialFilterExpression").ok().cloned())
            .collect()
    }

    pub(crate) fn describe(&self) -> String {
        let specs: Vec<String> = self.indexes.iter().map(ToString::to_string).collect();
        let extra = self
            .extra
            .as_ref()
            .map(|e| format!(" and TTL index {e}"))
            .unwrap_or_default();
        format!(
            "collection {} indexes [{}]{extra}",
            self.name,
            specs.join(", ")
        )
    }
}

/// The test's state: the generator, tallies and failures.
pub(crate) struct Check {
    pub(crate) seed: u64,
    pub(crate) rng: Rng,
    pub(crate) tally: Tally,
    /// What the tallies are counted under.
    pub(crate) phase: String,
    pub(crate) failures: Vec<String>,
    /// Differences of a known issue, reported rather than failed.
    pub(crate) known: Vec<String>,
}

impl Check {
    pub(crate) fn new(seed: u64) -> Check {
        Check {
            seed,
            rng: Rng(seed),
            tally: Tally::default(),
            phase: String::new(),
            failures: Vec::new(),
            known: Vec::new(),
        }
    }

    pub(crate) fn note(&mut self, what: &str) {
        let key = format!("{}{what}", self.phase);
        self.tally.add(key);
    }

    /// Notes that an index-only plan ran: a failure where documents may expire (a TTL index),
    /// since keys do not tell whether their documents have.
    pub(crate) fn index_only(&mut self, coll: &Coll, what: &str, cmd: &Document) {
        if coll.ttl {
            let msg = format!(
                "MISMATCH (seed {}) index-only plan ({what}) with a TTL index\n  {}\n  command {cmd}",
                self.seed,
                coll.describe()
            );
            eprintln!("{msg}");
            self.failures.push(msg);
        } else {
            self.note(what);
        }
    }

    pub(crate) async fn fail(
        &mut self,
        coll: &Coll,
        what: &str,
        cmd: &Document,
        got: String,
        want: String,
        explain: Option<Document>,
    ) {
        let mut msg = format!(
            "MISMATCH (seed {}) {what}\n  {}\n  command {cmd}\n  planned:   {got}\n  collscan:  {want}",
            self.seed,
            coll.describe()
        );
        let plan = match explain {
            Some(e) => e,
            None => planner_explain(&coll.db, cmd).await,
        };
        if let Some(w) = find_doc(&plan, "winningPlan") {
            let _ = write!(msg, "\n  plan: {w}");
        }
        eprintln!("{msg}");
        self.failures.push(msg);
    }
}

/// The first document under `key` anywhere in `d`.
pub(crate) fn find_doc<'a>(d: &'a Document, key: &str) -> Option<&'a Document> {
    if let Ok(w) = d.get_document(key) {
        return Some(w);
    }
    for (_, v) in d {
        let found = match v {
            Bson::Document(s) => find_doc(s, key),
            Bson::Array(a) => a
                .iter()
                .filter_map(Bson::as_document)
                .find_map(|s| find_doc(s, key)),
            _ => None,
        };
        if found.is_some() {
            return found;
        }
    }
    None
}

/// The first stage named `name` in a plan tree.
pub(crate) fn stage_named<'a>(plan: &'a Document, name: &str) -> Option<&'a Document> {
    if plan.get_str("stage").ok() == Some(name) {
        return Some(plan);
    }
    if let Ok(i) = plan.get_document("inputStage") {
        return stage_named(i, name);
    }
    plan.get_array("inputStages")
        .ok()?
        .iter()
        .filter_map(Bson::as_document)
        .find_map(|s| stage_named(s, name))
}

/// The stage names of a plan tree, depth first.
fn stages(plan: &Document, out: &mut Vec<String>) {
    if let Ok(s) = plan.get_str("stage") {
        out.push(s.to_owned());
    }
    if let Ok(i) = plan.get_document("inputStage") {
        stages(i, out);
    }
    if let Ok(a) = plan.get_array("inputStages") {
        for s in a.iter().filter_map(Bson::as_document) {
            stages(s, out);
        }
    }
}

pub(crate) fn plan_stages(explain: &Document) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(w) = find_doc(explain, "winningPlan") {
        stages(w, &mut out);
    }
    out
}

/// The name of the index the plan scans (the first one met).
pub(crate) fn plan_index(plan: &Document) -> Option<String> {
    if let Ok(n) = plan.get_str("indexName") {
        return Some(n.to_owned());
    }
    if let Ok(i) = plan.get_document("inputStage") {
        return plan_index(i);
    }
    None
}

pub(crate) fn num(d: &Document, key: &str) -> Option<i64> {
    match d.get(key) {
        Some(Bson::Int32(n)) => Some(i64::from(*n)),
        Some(Bson::Int64(n)) => Some(*n),
        _ => None,
    }
}

pub(crate) async fn command(db: &Database, cmd: Document) -> Answer<Document> {
    db.run_command(cmd).await.map_err(|e| error_text(&e))
}

/// `cmd`'s `queryPlanner` explain (empty if it fails).
pub(crate) async fn planner_explain(db: &Database, cmd: &Document) -> Document {
    command(
        db,
        doc! { "explain": cmd.clone(), "verbosity": "queryPlanner" },
    )
    .await
    .unwrap_or_default()
}

pub(crate) async fn cursor(db: &Database, cmd: Document) -> Answer<Vec<Document>> {
    let mut c = db
        .run_cursor_command(cmd)
        .await
        .map_err(|e| error_text(&e))?;
    let mut out = Vec::new();
    loop {
        match c.advance().await {
            Ok(true) => out.push(
                c.deserialize_current()
                    .map_err(|e| format!("undecodable: {e}"))?,
            ),
            Ok(false) => return Ok(out),
            Err(e) => return Err(error_text(&e)),
        }
    }
}

/// Documents in a comparable order (by their bytes: `_id` first for whole documents), with
/// their fields sorted by name when `sort_fields`.
pub(crate) fn canonical(docs: &Answer<Vec<Document>>, sort_fields: bool) -> Answer<Vec<Vec<u8>>> {
    let docs = docs.as_ref().map_err(Clone::clone)?;
    let mut out: Vec<Vec<u8>> = docs
        .iter()
        .map(|d| {
            let d = if sort_fields { by_name(d) } else { d.clone() };
            d.to_vec().unwrap_or_default()
        })
        .collect();
    out.sort();
    Ok(out)
}

pub(crate) fn show_docs(docs: &Answer<Vec<Document>>) -> String {
    match docs {
        Ok(d) => {
            let mut sorted: Vec<String> = d.iter().map(|d| show_doc(&by_name(d))).collect();
            sorted.sort();
            format!("{} docs {}", sorted.len(), sorted.join(" "))
        }
        Err(e) => e.clone(),
    }
}

/// The documents one side has and the other lacks, for a short mismatch message.
pub(crate) fn docs_diff(
    got: &Answer<Vec<Document>>,
    want: &Answer<Vec<Document>>,
) -> (String, String) {
    match (got, want) {
        (Ok(g), Ok(w)) => {
            let key = |d: &Document| by_name(d).to_vec().unwrap_or_default();
            let wk: Vec<Vec<u8>> = w.iter().map(key).collect();
            let gk: Vec<Vec<u8>> = g.iter().map(key).collect();
            let only_g: Vec<String> = g
                .iter()
                .filter(|d| !wk.contains(&key(d)))
                .map(show_doc)
                .collect();
            let only_w: Vec<String> = w
                .iter()
                .filter(|d| !gk.contains(&key(d)))
                .map(show_doc)
                .collect();
            (
                format!("{} docs, only here: {}", g.len(), only_g.join(" ")),
                format!("{} docs, only here: {}", w.len(), only_w.join(" ")),
            )
        }
        _ => (show_docs(got), show_docs(want)),
    }
}

/// A value as the mismatch messages show it: decimals as strings, doubles with their sign.
pub(crate) fn show(v: &Bson) -> String {
    match v {
        Bson::Decimal128(d) => format!("Decimal128(\"{d}\")"),
        Bson::Double(f) => format!("Double({f:?})"),
        Bson::Array(a) => format!("[{}]", a.iter().map(show).collect::<Vec<_>>().join(", ")),
        Bson::Document(d) => show_doc(d),
        other => format!("{other:?}"),
    }
}

fn show_doc(d: &Document) -> String {
    let fields: Vec<String> = d.iter().map(|(k, v)| format!("{k}: {}", show(v))).collect();
    format!("{{{}}}", fields.join(", "))
}

pub(crate) fn show_values(values: &Answer<Vec<Bson>>) -> String {
    match values {
        Ok(v) => format!("[{}]", v.iter().map(show).collect::<Vec<_>>().join(", ")),
        Err(e) => e.clone(),
    }
}

/// Where two `distinct` answers differ: values that compare equal but differ in type (or
/// bits), or values one side lacks.
pub(crate) fn values_diff(got: &[Bson], want: &[Bson]) -> String {
    let mut out = String::new();
    let gk: Vec<Vec<u8>> = got.iter().map(bytes_of).collect();
    let wk: Vec<Vec<u8>> = want.iter().map(bytes_of).collect();
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        if bytes_of(g) != bytes_of(w) {
            let _ = write!(out, " at {i}: planned {}, collscan {};", show(g), show(w));
            break;
        }
    }
    let only_g: Vec<String> = got
        .iter()
        .filter(|v| !wk.contains(&bytes_of(v)))
        .map(show)
        .collect();
    let only_w: Vec<String> = want
        .iter()
        .filter(|v| !gk.contains(&bytes_of(v)))
        .map(show)
        .collect();
    let _ = write!(
        out,
        " only planned: [{}]; only collscan: [{}]",
        only_g.join(", "),
        only_w.join(", ")
    );
    out
}

pub(crate) fn report(check: &Check, what: &str) {
    eprintln!(
        "{what}: seed {} (EBB_INDEX_ONLY_SEED replays it)",
        check.seed
    );
    for (k, v) in &check.tally.0 {
        eprintln!("  {k}: {v}");
    }
    eprintln!("  mismatches: {}", check.failures.len());
    for k in check.known.iter().take(3) {
        eprintln!("  known issue: {k}");
    }
}

pub(crate) fn assert_no_failures(check: &Check) {
    assert!(
        check.failures.is_empty(),
        "{} mismatches (seed {}), the first:\n{}",
        check.failures.len(),
        check.seed,
        check
            .failures
            .iter()
            .take(5)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
}
