//! TTL cases: the documented expiry examples as data (`compat/ttl/*.json`), replayed step by
//! step against a server whose clock the case freezes and moves (`ebbAdvanceClock`), so "1 ms
//! before the expiry instant" is exact.
//!
//! A case file holds `source` (the documentation page), `description`, `db`, `collection` (the
//! collection under test) and `steps`, each one of:
//!
//! - `{"command": {…}, "db": "…", "expect": {…}}`: run a command (extended JSON v2, so
//!   `{"$numberLong": "20"}` is an int64 and `{"$numberDouble": "20.5"}` a double); `db`
//!   defaults to the case's. The reply, or `{ok: 0, code, codeName, errmsg}` for a command
//!   error, must match `expect` (see [`check`]).
//! - `{"advanceMs": n}`: move the frozen clock forward by `n` ms.
//! - `{"expectIds": [...], "expectCount": n}` (either or both): the `_id`s `find({})` returns
//!   in the collection under test, as a set, and what `countDocuments({})` says.
//!
//! Every step may carry a `note`, quoted when it fails. `{"$clockPlusMs": k}` anywhere in a
//! command stands for the date `k` ms after the clock's current (frozen) instant. The first
//! step must freeze the clock. `compat/ttl/run_case.js` replays the same files in mongosh with
//! the same rules.

use std::cmp::Ordering;
use std::path::Path;
use std::str::FromStr;

use anyhow::{Context, Result, bail};
use mongodb::bson::{Bson, DateTime, Decimal128, Document, doc, oid::ObjectId};
use serde_json::{Map, Value};

/// Marks the line `run_case.js` prints when every step held.
pub const MONGOSH_PASS: &str = "ebb-ttl-case: PASS";

/// Extended JSON type wrappers the cases may use, plus the clock placeholder.
const WRAPPERS: &[&str] = &[
    "$numberInt",
    "$numberLong",
    "$numberDouble",
    "$numberDecimal",
    "$date",
    "$oid",
    "$clockPlusMs",
];

/// One case file.
#[derive(Debug)]
pub struct TtlCase {
    pub db: String,
    pub collection: String,
    pub steps: Vec<Step>,
}

#[derive(Debug)]
pub struct Step {
    note: Option<String>,
    action: Action,
}

#[derive(Debug)]
enum Action {
    Command {
        db: String,
        command: Value,
        expect: Value,
    },
    Advance(i64),
    Expect {
        ids: Option<Vec<Value>>,
        count: Option<u64>,
    },
}

impl Step {
    fn describe(&self, index: usize) -> String {
        let what = match &self.action {
            Action::Command { command, .. } => {
                format!("command {}", command_name(command).unwrap_or("?"))
            }
            Action::Advance(ms) => format!("advanceMs {ms}"),
            Action::Expect { .. } => "expect".to_owned(),
        };
        match &self.note {
            Some(note) => format!("step {} ({what}; {note})", index + 1),
            None => format!("step {} ({what})", index + 1),
        }
    }
}

/// Reads and checks a case file: known keys only, valid extended JSON, a freezing first step.
pub fn load(path: &Path) -> Result<TtlCase> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let value: Value =
        serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
    let top = value.as_object().context("a case is a JSON object")?;
    only_keys(
        top,
        &["source", "description", "db", "collection", "steps"],
        "case",
    )?;
    let text_field = |key: &str| -> Result<String> {
        match top.get(key) {
            Some(Value::String(s)) if !s.is_empty() => Ok(s.clone()),
            _ => bail!("case: `{key}` must be a non-empty string"),
        }
    };
    let source = text_field("source")?;
    if !source.starts_with("https://") {
        bail!("case: `source` must be the https URL of the documentation page");
    }
    text_field("description")?;
    let db = text_field("db")?;
    let collection = text_field("collection")?;
    let Some(Value::Array(raw_steps)) = top.get("steps") else {
        bail!("case: `steps` must be an array");
    };
    let mut steps = Vec::with_capacity(raw_steps.len());
    for (i, raw) in raw_steps.iter().enumerate() {
        steps.push(parse_step(raw, &db).with_context(|| format!("step {}", i + 1))?);
    }
    match steps.first().map(|s| &s.action) {
        Some(Action::Command { db, command, .. })
            if db == "admin"
                && command_name(command) == Some("ebbAdvanceClock")
                && command.get("freeze") == Some(&Value::Bool(true)) => {}
        _ => bail!(
            "the first step must freeze the clock: \
             {{\"command\": {{\"ebbAdvanceClock\": 0, \"freeze\": true}}, \"db\": \"admin\", …}}"
        ),
    }
    Ok(TtlCase {
        db,
        collection,
        steps,
    })
}

/// A command's name: its first key.
fn command_name(command: &Value) -> Option<&str> {
    command
        .as_object()
        .and_then(|o| o.keys().next())
        .map(String::as_str)
}

fn only_keys(object: &Map<String, Value>, allowed: &[&str], what: &str) -> Result<()> {
    if let Some(k) = object.keys().find(|k| !allowed.contains(&k.as_str())) {
        bail!(
            "{what}: unknown key `{k}` (allowed: {})",
            allowed.join(", ")
        );
    }
    Ok(())
}

fn parse_step(raw: &Value, case_db: &str) -> Result<Step> {
    let step = raw.as_object().context("a step is a JSON object")?;
    let note = match step.get("note") {
        None => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => bail!("`note` must be a string"),
    };
    let action = if let Some(command) = step.get("command") {
        only_keys(step, &["command", "db", "expect", "note"], "command step")?;
        if !command.is_object() || command.as_object().is_some_and(Map::is_empty) {
            bail!("`command` must be a non-empty object");
        }
        // Catch malformed extended JSON now rather than halfway through a run.
        to_bson(command, Some(0))?;
        let db = match step.get("db") {
            None => case_db.to_owned(),
            Some(Value::String(s)) if !s.is_empty() => s.clone(),
            Some(_) => bail!("`db` must be a non-empty string"),
        };
        let Some(expect) = step.get("expect").filter(|e| e.is_object()) else {
            bail!(
                "a command step needs an `expect` object, e.g. {{\"ok\": 1}} or {{\"code\": 67}}"
            );
        };
        check_expectation(expect)?;
        Action::Command {
            db,
            command: command.clone(),
            expect: expect.clone(),
        }
    } else if let Some(ms) = step.get("advanceMs") {
        only_keys(step, &["advanceMs", "note"], "advanceMs step")?;
        match ms.as_i64() {
            Some(ms) if ms >= 0 => Action::Advance(ms),
            _ => bail!("`advanceMs` must be a non-negative integer"),
        }
    } else if step.contains_key("expectIds") || step.contains_key("expectCount") {
        only_keys(
            step,
            &["expectIds", "expectCount", "note"],
            "expectation step",
        )?;
        let ids = match step.get("expectIds") {
            None => None,
            Some(Value::Array(ids)) => {
                for id in ids {
                    to_bson(id, Some(0))?;
                }
                Some(ids.clone())
            }
            Some(_) => bail!("`expectIds` must be an array"),
        };
        let count = match step.get("expectCount") {
            None => None,
            Some(n) => Some(
                n.as_u64()
                    .context("`expectCount` must be a non-negative integer")?,
            ),
        };
        Action::Expect { ids, count }
    } else {
        bail!("a step has `command`, `advanceMs`, or `expectIds`/`expectCount`");
    };
    Ok(Step { note, action })
}

/// Checks that an expectation is well-formed (its typed values parse).
fn check_expectation(expect: &Value) -> Result<()> {
    match expect {
        Value::Object(o) if is_wrapper(o) => to_bson(expect, Some(0)).map(|_| ()),
        Value::Object(o) => o.values().try_for_each(check_expectation),
        Value::Array(a) => a.iter().try_for_each(check_expectation),
        _ => Ok(()),
    }
}

fn is_wrapper(object: &Map<String, Value>) -> bool {
    object.len() == 1 && object.keys().all(|k| WRAPPERS.contains(&k.as_str()))
}

/// Converts a case value to BSON, as mongosh's `EJSON.parse(text, {relaxed: false})` does:
/// type wrappers become their types, a plain integral number an int32 (or an int64 beyond
/// int32's range), any other number a double; `{"$clockPlusMs": k}` becomes the date `now + k`.
pub fn to_bson(value: &Value, now: Option<i64>) -> Result<Bson> {
    Ok(match value {
        Value::Null => Bson::Null,
        Value::Bool(b) => Bson::Boolean(*b),
        Value::String(s) => Bson::String(s.clone()),
        Value::Number(n) => plain_number(n),
        Value::Array(items) => Bson::Array(
            items
                .iter()
                .map(|v| to_bson(v, now))
                .collect::<Result<_>>()?,
        ),
        Value::Object(object) if is_wrapper(object) => {
            let (key, inner) = object.iter().next().context("a wrapper has one key")?;
            wrapper(key, inner, now).with_context(|| format!("bad {key}: {inner}"))?
        }
        Value::Object(object) => {
            if let Some(k) = object.keys().find(|k| WRAPPERS.contains(&k.as_str())) {
                bail!("`{k}` must be the only key of its object");
            }
            let mut doc = Document::new();
            for (k, v) in object {
                doc.insert(k.clone(), to_bson(v, now)?);
            }
            Bson::Document(doc)
        }
    })
}

fn plain_number(n: &serde_json::Number) -> Bson {
    /// 2^63: the first double beyond int64's range.
    const TWO_POW_63: f64 = 9_223_372_036_854_775_808.0;
    if let Some(i) = n.as_i64() {
        return i32::try_from(i).map_or(Bson::Int64(i), Bson::Int32);
    }
    let f = n.as_f64().unwrap_or(f64::NAN);
    let integral = f.is_finite() && f.fract() == 0.0 && !(f == 0.0 && f.is_sign_negative());
    #[expect(
        clippy::cast_possible_truncation,
        reason = "integral and range-checked first, as js-bson does"
    )]
    if integral && (f64::from(i32::MIN)..=f64::from(i32::MAX)).contains(&f) {
        Bson::Int32(f as i32)
    } else if integral && (-TWO_POW_63..TWO_POW_63).contains(&f) {
        Bson::Int64(f as i64)
    } else {
        Bson::Double(f)
    }
}

fn wrapper(key: &str, inner: &Value, now: Option<i64>) -> Result<Bson> {
    let text = || inner.as_str().context("expected a string");
    Ok(match key {
        "$numberInt" => Bson::Int32(text()?.parse()?),
        "$numberLong" => Bson::Int64(text()?.parse()?),
        "$numberDouble" => Bson::Double(match text()? {
            "NaN" => f64::NAN,
            "Infinity" => f64::INFINITY,
            "-Infinity" => f64::NEG_INFINITY,
            other => other.parse()?,
        }),
        "$numberDecimal" => Bson::Decimal128(Decimal128::from_str(text()?)?),
        "$oid" => Bson::ObjectId(ObjectId::parse_str(text()?)?),
        "$date" => Bson::DateTime(match inner {
            Value::String(s) => DateTime::parse_rfc3339_str(s)?,
            Value::Number(n) => DateTime::from_millis(n.as_i64().context("whole ms")?),
            Value::Object(o) if o.len() == 1 && o.contains_key("$numberLong") => {
                DateTime::from_millis(text_of(o.get("$numberLong"))?.parse()?)
            }
            _ => bail!("expected an ISO-8601 string or {{\"$numberLong\": …}}"),
        }),
        "$clockPlusMs" => {
            let offset = inner.as_i64().context("expected whole milliseconds")?;
            let now = now.context("the clock's instant is not known yet")?;
            Bson::DateTime(DateTime::from_millis(now.saturating_add(offset)))
        }
        other => bail!("unknown wrapper {other}"),
    })
}

fn text_of(value: Option<&Value>) -> Result<&str> {
    value.and_then(Value::as_str).context("expected a string")
}

/// Whether `actual` matches `expected`: an object matches a document holding at least its
/// keys with matching values; an array matches an array of the same length, item by item; a
/// plain number matches any numeric type of that value; a type wrapper (`$numberLong`,
/// `$numberDouble`, `$date`, `$clockPlusMs`…) matches only that type and value; strings,
/// booleans and null match themselves. Returns where and how they differ.
pub fn check(expected: &Value, actual: Option<&Bson>, now: Option<i64>, path: &str) -> Result<()> {
    let here = if path.is_empty() { "reply" } else { path };
    let Some(actual) = actual else {
        bail!("{here}: expected {expected}, got nothing");
    };
    let differ = || anyhow::anyhow!("{here}: expected {expected}, got {}", ejson(actual));
    match expected {
        Value::Object(object) if is_wrapper(object) => {
            let want = to_bson(expected, now)?;
            let same = match (&want, actual) {
                (Bson::Double(a), Bson::Double(b)) => a == b || (a.is_nan() && b.is_nan()),
                (a, b) => a == b,
            };
            if !same {
                return Err(differ());
            }
        }
        Value::Object(object) => {
            let Bson::Document(doc) = actual else {
                return Err(differ());
            };
            for (k, v) in object {
                let sub = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                check(v, doc.get(k), now, &sub)?;
            }
        }
        Value::Array(items) => {
            let Bson::Array(got) = actual else {
                return Err(differ());
            };
            if got.len() != items.len() {
                return Err(differ());
            }
            for (i, (e, a)) in items.iter().zip(got).enumerate() {
                check(e, Some(a), now, &format!("{here}.{i}"))?;
            }
        }
        Value::Number(n) => {
            if numeric(actual) != n.as_f64() {
                return Err(differ());
            }
        }
        Value::String(s) => {
            if !matches!(actual, Bson::String(a) if a == s) {
                return Err(differ());
            }
        }
        Value::Bool(b) => {
            if !matches!(actual, Bson::Boolean(a) if a == b) {
                return Err(differ());
            }
        }
        Value::Null => {
            if !matches!(actual, Bson::Null) {
                return Err(differ());
            }
        }
    }
    Ok(())
}

#[expect(
    clippy::cast_precision_loss,
    reason = "case values are small; exact types are checked with type wrappers"
)]
fn numeric(value: &Bson) -> Option<f64> {
    match value {
        Bson::Int32(n) => Some(f64::from(*n)),
        Bson::Int64(n) => Some(*n as f64),
        Bson::Double(d) => Some(*d),
        Bson::Decimal128(d) => d.to_string().parse().ok(),
        _ => None,
    }
}

/// The order `_id` lists are compared in: numbers by value, then strings, then the rest by
/// their text (`run_case.js` sorts the same way).
fn id_order(a: &Bson, b: &Bson) -> Ordering {
    let rank = |v: &Bson| match v {
        v if numeric(v).is_some() => 0,
        Bson::String(_) => 1,
        _ => 2,
    };
    rank(a).cmp(&rank(b)).then_with(|| match (a, b) {
        (Bson::String(x), Bson::String(y)) => x.cmp(y),
        _ => match (numeric(a), numeric(b)) {
            (Some(x), Some(y)) => x.total_cmp(&y),
            _ => a.to_string().cmp(&b.to_string()),
        },
    })
}

/// A reply as failure messages quote it: at most 500 characters.
fn shorten(text: &str) -> String {
    match text.char_indices().nth(500) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}

fn show_ids(ids: &[Bson]) -> String {
    ejson(&Bson::Array(ids.to_vec()))
}

/// A value as canonical extended JSON, the way mongosh's `EJSON.stringify(v, {relaxed: false})`
/// shows it, so both clients report a difference in the same words.
fn ejson(value: &Bson) -> String {
    let quote = |s: &str| Value::String(s.to_owned()).to_string();
    let wrap = |key: &str, text: &str| format!("{{{}:{}}}", quote(key), quote(text));
    match value {
        Bson::Int32(n) => wrap("$numberInt", &n.to_string()),
        Bson::Int64(n) => wrap("$numberLong", &n.to_string()),
        Bson::Double(d) if d.is_nan() => wrap("$numberDouble", "NaN"),
        Bson::Double(d) if d.is_infinite() => wrap(
            "$numberDouble",
            if *d > 0.0 { "Infinity" } else { "-Infinity" },
        ),
        Bson::Double(d) => wrap("$numberDouble", &format!("{d:?}")),
        Bson::Decimal128(d) => wrap("$numberDecimal", &d.to_string()),
        Bson::DateTime(d) => format!(
            "{{\"$date\":{}}}",
            wrap("$numberLong", &d.timestamp_millis().to_string())
        ),
        Bson::ObjectId(id) => wrap("$oid", &id.to_hex()),
        Bson::String(s) => quote(s),
        Bson::Boolean(b) => b.to_string(),
        Bson::Null => "null".to_owned(),
        Bson::Array(items) => {
            let items: Vec<String> = items.iter().map(ejson).collect();
            format!("[{}]", items.join(","))
        }
        Bson::Document(doc) => {
            let fields: Vec<String> = doc
                .iter()
                .map(|(k, v)| format!("{}:{}", quote(k), ejson(v)))
                .collect();
            format!("{{{}}}", fields.join(","))
        }
        other => other.to_string(),
    }
}

/// Replays `case` through the `mongodb` crate against the server at `uri`. The error names the
/// failing step and what differed.
pub async fn run_with_driver(case: &TtlCase, uri: &str) -> Result<()> {
    let client = mongodb::Client::with_uri_str(uri)
        .await
        .context("connecting")?;
    let result = replay(case, &client).await;
    client.shutdown().await;
    result
}

async fn replay(case: &TtlCase, client: &mongodb::Client) -> Result<()> {
    let collection = client
        .database(&case.db)
        .collection::<Document>(&case.collection);
    let mut now: Option<i64> = None;
    for (i, step) in case.steps.iter().enumerate() {
        let outcome: Result<()> = async {
            match &step.action {
                Action::Command {
                    db,
                    command,
                    expect,
                } => {
                    let Bson::Document(cmd) = to_bson(command, now)? else {
                        bail!("a command is a document");
                    };
                    let reply = run_command(client, db, cmd).await?;
                    if command_name(command) == Some("ebbAdvanceClock")
                        && let Ok(at) = reply.get_datetime("now")
                    {
                        now = Some(at.timestamp_millis());
                    }
                    let reply = Bson::Document(reply);
                    check(expect, Some(&reply), now, "")
                        .map_err(|e| anyhow::anyhow!("{e} (reply: {})", shorten(&ejson(&reply))))
                }
                Action::Advance(ms) => {
                    let reply =
                        run_command(client, "admin", doc! { "ebbAdvanceClock": *ms }).await?;
                    let shown = ejson(&Bson::Document(reply.clone()));
                    if !matches!(reply.get_bool("frozen"), Ok(true)) {
                        bail!("the clock is not frozen: {shown}");
                    }
                    let at = reply
                        .get_datetime("now")
                        .with_context(|| format!("ebbAdvanceClock answered {shown}"))?;
                    now = Some(at.timestamp_millis());
                    Ok(())
                }
                Action::Expect { ids, count } => {
                    if let Some(expected) = ids {
                        let mut want = expected
                            .iter()
                            .map(|v| to_bson(v, now))
                            .collect::<Result<Vec<_>>>()?;
                        let mut cursor = collection.find(doc! {}).await?;
                        let mut got = Vec::new();
                        while cursor.advance().await? {
                            let d = cursor.deserialize_current()?;
                            got.push(d.get("_id").cloned().unwrap_or(Bson::Null));
                        }
                        want.sort_by(id_order);
                        got.sort_by(id_order);
                        let same = want.len() == got.len()
                            && want.iter().zip(&got).all(|(w, g)| id_order(w, g).is_eq());
                        if !same {
                            bail!(
                                "find({{}}) _ids: expected {}, got {}",
                                show_ids(&want),
                                show_ids(&got)
                            );
                        }
                    }
                    if let Some(n) = count {
                        let got = collection.count_documents(doc! {}).await?;
                        if got != *n {
                            bail!("countDocuments({{}}): expected {n}, got {got}");
                        }
                    }
                    Ok(())
                }
            }
        }
        .await;
        outcome.with_context(|| step.describe(i))?;
    }
    Ok(())
}

/// Runs a command; a command error becomes the `{ok: 0, code, codeName, errmsg}` reply the
/// server sent, so cases can expect it like any other reply.
async fn run_command(client: &mongodb::Client, db: &str, cmd: Document) -> Result<Document> {
    match client.database(db).run_command(cmd).await {
        Ok(reply) => Ok(reply),
        Err(e) => match *e.kind {
            mongodb::error::ErrorKind::Command(c) => Ok(doc! {
                "ok": 0.0,
                "code": c.code,
                "codeName": c.code_name,
                "errmsg": c.message,
            }),
            other => bail!("command failed: {other}"),
        },
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn plain_numbers_convert_as_mongosh_does() {
        let cases = [
            (json!(20), Bson::Int32(20)),
            (json!(20.0), Bson::Int32(20)),
            (json!(3_000_000_000_i64), Bson::Int64(3_000_000_000)),
            (json!(20.5), Bson::Double(20.5)),
            (json!(-0.0), Bson::Double(-0.0)),
        ];
        for (value, want) in cases {
            assert_eq!(to_bson(&value, None).unwrap(), want, "{value}");
        }
    }

    #[test]
    fn wrappers_and_the_clock_placeholder() {
        let value = json!({
            "i": {"$numberInt": "20"},
            "l": {"$numberLong": "2147483649"},
            "d": {"$numberDouble": "20.0"},
            "n": {"$numberDouble": "NaN"},
            "at": {"$clockPlusMs": -5000},
            "date": {"$date": "2013-07-22T14:00:00Z"},
            "set": {"$set": {"ttl": -1}},
        });
        let Bson::Document(doc) = to_bson(&value, Some(1_000_000)).unwrap() else {
            panic!("a document");
        };
        assert_eq!(doc.get("i"), Some(&Bson::Int32(20)));
        assert_eq!(doc.get("l"), Some(&Bson::Int64(2_147_483_649)));
        assert_eq!(doc.get("d"), Some(&Bson::Double(20.0)));
        assert!(matches!(doc.get("n"), Some(Bson::Double(d)) if d.is_nan()));
        assert_eq!(
            doc.get("at"),
            Some(&Bson::DateTime(DateTime::from_millis(995_000)))
        );
        assert_eq!(
            doc.get("date"),
            Some(&Bson::DateTime(DateTime::from_millis(1_374_501_600_000)))
        );
        let set = doc
            .get_document("set")
            .unwrap()
            .get_document("$set")
            .unwrap();
        assert_eq!(set.get_i32("ttl").unwrap(), -1);
        // The placeholder needs a frozen clock; a wrapper must stand alone.
        assert!(to_bson(&json!({"$clockPlusMs": 0}), None).is_err());
        assert!(to_bson(&json!({"$numberLong": "1", "x": 1}), None).is_err());
        assert!(to_bson(&json!({"$numberInt": "2147483648"}), None).is_err());
    }

    #[test]
    fn expectations_are_subsets_with_exact_types_only_when_asked() {
        let reply = Bson::Document(doc! {
            "ok": 1.0,
            "n": 2,
            "cursor": { "firstBatch": [ { "_id": 1, "ttl": 20.0, "x": "y" } ] },
        });
        let holds = |e: Value| check(&e, Some(&reply), None, "").is_ok();
        assert!(holds(json!({"ok": 1})));
        assert!(holds(json!({"ok": 1, "n": 2})));
        assert!(holds(
            json!({"cursor": {"firstBatch": [{"_id": 1, "ttl": 20}]}})
        ));
        assert!(holds(
            json!({"cursor": {"firstBatch": [{"ttl": {"$numberDouble": "20.0"}}]}})
        ));
        assert!(!holds(
            json!({"cursor": {"firstBatch": [{"ttl": {"$numberInt": "20"}}]}})
        ));
        assert!(!holds(json!({"cursor": {"firstBatch": []}})));
        assert!(!holds(json!({"ok": 0})));
        assert!(!holds(json!({"code": 67})));
        let err = check(&json!({"n": 3}), Some(&reply), None, "").unwrap_err();
        assert_eq!(err.to_string(), r#"n: expected 3, got {"$numberInt":"2"}"#);
        assert_eq!(
            ejson(&reply),
            r#"{"ok":{"$numberDouble":"1.0"},"n":{"$numberInt":"2"},"cursor":{"firstBatch":[{"_id":{"$numberInt":"1"},"ttl":{"$numberDouble":"20.0"},"x":"y"}]}}"#
        );
    }

    #[test]
    fn id_lists_compare_as_sets() {
        let mut a = vec![Bson::String("b".into()), Bson::Int64(2), Bson::Int32(1)];
        a.sort_by(id_order);
        assert_eq!(
            a,
            vec![Bson::Int32(1), Bson::Int64(2), Bson::String("b".into())]
        );
        assert!(id_order(&Bson::Int32(1), &Bson::Double(1.0)).is_eq());
    }

    #[test]
    fn every_case_file_loads() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("ttl");
        let mut n = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().and_then(|e| e.to_str()) == Some("json") {
                load(&path).unwrap_or_else(|e| panic!("{}: {e:#}", path.display()));
                n += 1;
            }
        }
        assert!(n > 0, "no cases under {}", dir.display());
    }

    #[test]
    fn a_case_must_freeze_the_clock_first() {
        let dir = std::env::temp_dir().join(format!("ebb-compat-ttl-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("case.json");
        let case = json!({
            "source": "https://example.org/", "description": "d", "db": "d", "collection": "c",
            "steps": [{"advanceMs": 1}],
        });
        std::fs::write(&path, case.to_string()).unwrap();
        let err = load(&path).unwrap_err();
        assert!(err.to_string().contains("freeze"), "{err:#}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
