//! The stages that write a pipeline's results to a collection: `$out` (replaces the
//! collection's contents, atomically, when the pipeline is done) and `$merge` (folds each
//! result into the collection as `whenMatched`/`whenNotMatched` say). Each must be the last
//! stage; the aggregate then answers an empty cursor.
//!
//! Documents are stored through the write commands' `Writer`, so `_id` rules, size limits,
//! duplicate detection and TTL expiry are those of any insert or update.

use std::sync::Arc;

use bson::{RawArrayBuf, RawBsonRef, RawDocument, RawDocumentBuf, rawdoc};

use super::super::args::{WriteConcern, wrong_type};
use super::super::write::{Writer, duplicate_key, prepare_insert, with_writer};
use crate::error::{CommandError, CommandResult, ErrorCode};
use crate::query::display::type_name;
use crate::query::expr::{Expression, Variables};
use crate::query::keystring;
use crate::query::update::{Update, UpdateContext};
use crate::state::ServerState;

/// Databases whose collections belong to the server (mongod's "internal databases").
const INTERNAL_DATABASES: &[&str] = &["admin", "config", "local"];
/// Writes a `$merge` holds before committing them (it is not atomic, as in mongod).
const MERGE_BATCH: usize = 1000;

fn invalid_bson(e: &bson::error::Error) -> CommandError {
    CommandError::new(ErrorCode::InvalidBSON, e.to_string())
}

/// A target collection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Target {
    /// Database name.
    pub db: String,
    /// Collection name.
    pub coll: String,
}

impl Target {
    fn namespace(&self) -> String {
        format!("{}.{}", self.db, self.coll)
    }

    /// The checks mongod makes of a `$out`/`$merge` target, with its codes for each stage.
    fn check(&self, stage: Stage) -> CommandResult<()> {
        let ns = self.namespace();
        if crate::catalog::validate_namespace(&self.db, &self.coll).is_err() {
            return Err(CommandError::new(
                ErrorCode::InvalidNamespace,
                match stage {
                    Stage::Out => format!("Invalid $out target namespace, {ns}"),
                    Stage::Merge => format!("Invalid $merge target namespace: '{ns}'"),
                },
            ));
        }
        if self.coll.starts_with("system.") {
            return Err(match stage {
                Stage::Out => CommandError::new(
                    ErrorCode::Location(17385),
                    format!("Can't $out to special collection: {}", self.coll),
                ),
                Stage::Merge => CommandError::new(
                    ErrorCode::Location(31319),
                    format!("Cannot $merge to special collection: {}", self.coll),
                ),
            });
        }
        if INTERNAL_DATABASES.contains(&self.db.as_str()) {
            return Err(match stage {
                Stage::Out => CommandError::new(
                    ErrorCode::Location(31321),
                    format!("Can't $out to internal database: {}", self.db),
                ),
                Stage::Merge => CommandError::new(
                    ErrorCode::Location(31320),
                    format!("Cannot $merge to internal database: {}", self.db),
                ),
            });
        }
        Ok(())
    }
}

#[derive(Debug, Clone, Copy)]
enum Stage {
    Out,
    Merge,
}

/// Reads a `{db, coll}` namespace document; `what` names it in errors (`$out`, `into`).
fn namespace_spec(
    what: &str,
    spec: &RawDocument,
    db_required: bool,
) -> CommandResult<(Option<String>, Option<String>)> {
    let mut db = None;
    let mut coll = None;
    for elem in spec {
        let (k, v) = elem.map_err(|e| invalid_bson(&e))?;
        let slot = match k.as_str() {
            "db" => &mut db,
            "coll" => &mut coll,
            "timeseries" if what == "$out" => {
                return Err(CommandError::new(
                    ErrorCode::NotImplemented,
                    "$out to a time-series collection is not supported by Ebb yet",
                ));
            }
            other => return Err(CommandError::unknown_field(&format!("{what}.{other}"))),
        };
        match v {
            RawBsonRef::String(s) => *slot = Some(s.to_owned()),
            other => {
                return Err(wrong_type(
                    &format!("{what}.{}", k.as_str()),
                    other,
                    " 'string'",
                ));
            }
        }
    }
    if db_required && db.is_none() {
        return Err(CommandError::missing_field(&format!("{what}.db")));
    }
    Ok((db, coll))
}

/// Parses `$out: "coll"` or `$out: {db, coll}`, with `db` the aggregate's database.
pub(super) fn parse_out(arg: RawBsonRef<'_>, db: &str) -> CommandResult<Target> {
    let target = match arg {
        RawBsonRef::String(coll) => Target {
            db: db.to_owned(),
            coll: coll.to_owned(),
        },
        RawBsonRef::Document(spec) => {
            let (db, coll) = namespace_spec("$out", spec, true)?;
            Target {
                db: db.unwrap_or_default(),
                coll: coll.ok_or_else(|| CommandError::missing_field("$out.coll"))?,
            }
        }
        other => {
            return Err(CommandError::new(
                ErrorCode::Location(16990),
                format!(
                    "$out only supports a string or object argument, but found {}",
                    type_name(other.element_type())
                ),
            ));
        }
    };
    target.check(Stage::Out)?;
    Ok(target)
}

/// `$merge`'s `whenMatched`.
#[derive(Debug, Clone)]
pub(super) enum WhenMatched {
    Replace,
    KeepExisting,
    Merge,
    Fail,
    /// A pipeline-style update of the existing document, with `$$new` (and `let`'s variables).
    /// Kept raw: expressions bind their variables when compiled, and `$$new` differs for each
    /// document, so it is compiled for each one (and once at parse time, for its errors).
    Pipeline(RawArrayBuf),
}

impl WhenMatched {
    fn name(&self) -> &'static str {
        match self {
            WhenMatched::Replace => "replace",
            WhenMatched::KeepExisting => "keepExisting",
            WhenMatched::Merge => "merge",
            WhenMatched::Fail => "fail",
            WhenMatched::Pipeline(_) => "pipeline",
        }
    }
}

/// `$merge`'s `whenNotMatched`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum WhenNotMatched {
    Insert,
    Discard,
    Fail,
}

impl WhenNotMatched {
    fn name(self) -> &'static str {
        match self {
            WhenNotMatched::Insert => "insert",
            WhenNotMatched::Discard => "discard",
            WhenNotMatched::Fail => "fail",
        }
    }
}

/// A parsed `$merge`. Documents are matched on `_id`: other `on` fields need a unique index,
/// which Ebb does not have yet.
#[derive(Debug, Clone)]
pub(super) struct Merge {
    pub target: Target,
    when_matched: WhenMatched,
    when_not_matched: WhenNotMatched,
    /// `let`: variables for the `whenMatched` pipeline, evaluated against each new document.
    /// `new` (the new document) is always among them.
    variables: Vec<(String, Expression)>,
}

fn bad_enum(field: &str, value: &str) -> CommandError {
    CommandError::bad_value(format!(
        "Enumeration value '{value}' for field '{field}' is not a valid value."
    ))
}

/// Parses `$merge: "coll"` or `$merge: {into, on, let, whenMatched, whenNotMatched}`, with `db`
/// the aggregate's database.
pub(super) fn parse_merge(arg: RawBsonRef<'_>, db: &str) -> CommandResult<Merge> {
    let spec = match arg {
        RawBsonRef::String(coll) => {
            let target = Target {
                db: db.to_owned(),
                coll: coll.to_owned(),
            };
            target.check(Stage::Merge)?;
            return Ok(Merge {
                target,
                when_matched: WhenMatched::Merge,
                when_not_matched: WhenNotMatched::Insert,
                variables: Vec::new(),
            });
        }
        RawBsonRef::Document(spec) => spec,
        other => {
            return Err(CommandError::type_mismatch(format!(
                "$merge requires a string or object argument, but found {}",
                type_name(other.element_type())
            )));
        }
    };
    let mut target = None;
    let mut on = None;
    let mut let_vars = None;
    let mut when_matched = WhenMatched::Merge;
    let mut when_not_matched = WhenNotMatched::Insert;
    for elem in spec {
        let (k, v) = elem.map_err(|e| invalid_bson(&e))?;
        match k.as_str() {
            "into" => target = Some(parse_into(v, db)?),
            "on" => on = Some(parse_on(v)?),
            "let" => match v {
                RawBsonRef::Document(d) => let_vars = Some(d),
                other => return Err(wrong_type("$merge.let", other, " 'object'")),
            },
            "whenMatched" => when_matched = parse_when_matched(v)?,
            "whenNotMatched" => {
                when_not_matched = match v {
                    RawBsonRef::String("insert") => WhenNotMatched::Insert,
                    RawBsonRef::String("discard") => WhenNotMatched::Discard,
                    RawBsonRef::String("fail") => WhenNotMatched::Fail,
                    RawBsonRef::String(other) => {
                        return Err(bad_enum("$merge.whenNotMatched", other));
                    }
                    other => {
                        return Err(wrong_type("$merge.whenNotMatched", other, " 'string'"));
                    }
                };
            }
            other => return Err(CommandError::unknown_field(&format!("$merge.{other}"))),
        }
    }
    let target = target.ok_or_else(|| CommandError::missing_field("$merge.into"))?;
    target.check(Stage::Merge)?;
    let supported = matches!(
        (&when_matched, when_not_matched),
        (
            WhenMatched::Replace | WhenMatched::Merge | WhenMatched::Pipeline(_),
            _
        ) | (
            WhenMatched::KeepExisting | WhenMatched::Fail,
            WhenNotMatched::Insert
        )
    );
    if !supported {
        return Err(CommandError::new(
            ErrorCode::Location(51181),
            format!(
                "Combination of $merge modes 'whenMatched: {}' and 'whenNotMatched: {}' is not \
                 supported",
                when_matched.name(),
                when_not_matched.name()
            ),
        ));
    }
    if on.is_some_and(|fields: Vec<String>| fields != ["_id"]) {
        return Err(CommandError::new(
            ErrorCode::Location(51183),
            "Cannot find index to verify that join fields will be unique",
        ));
    }
    let variables = if let WhenMatched::Pipeline(stages) = &when_matched {
        let variables = parse_let(let_vars)?;
        // Compiled once here, with every variable null, so that its errors come at parse time.
        let mut placeholders = RawDocumentBuf::new();
        for (name, _) in &variables {
            if let Ok(key) = <&bson::raw::CStr>::try_from(name.as_str()) {
                placeholders.append(key, bson::RawBson::Null);
            }
        }
        let vars = Arc::new(Variables::system_clock().with_constants(&placeholders)?);
        Update::compile_pipeline_in(stages, &vars)?;
        variables
    } else {
        if let_vars.is_some() {
            return Err(CommandError::new(
                ErrorCode::Location(51199),
                format!(
                    "Cannot use 'let' variables with 'whenMatched: {}' mode",
                    when_matched.name()
                ),
            ));
        }
        Vec::new()
    };
    Ok(Merge {
        target,
        when_matched,
        when_not_matched,
        variables,
    })
}

fn parse_into(v: RawBsonRef<'_>, db: &str) -> CommandResult<Target> {
    match v {
        RawBsonRef::String("") => Err(CommandError::new(
            ErrorCode::Location(5_786_800),
            "$merge 'into' field cannot be an empty string",
        )),
        RawBsonRef::String(coll) => Ok(Target {
            db: db.to_owned(),
            coll: coll.to_owned(),
        }),
        RawBsonRef::Document(spec) => {
            let (into_db, coll) = namespace_spec("into", spec, false)?;
            let coll = coll.filter(|c| !c.is_empty()).ok_or_else(|| {
                CommandError::new(
                    ErrorCode::Location(5_786_801),
                    "$merge 'into' field must specify a 'coll' that is not empty, null or \
                     undefined",
                )
            })?;
            Ok(Target {
                db: into_db
                    .filter(|d| !d.is_empty())
                    .unwrap_or_else(|| db.to_owned()),
                coll,
            })
        }
        other => Err(CommandError::new(
            ErrorCode::Location(51178),
            format!(
                "$merge 'into' field  must be either a string or an object, but found {}",
                type_name(other.element_type())
            ),
        )),
    }
}

fn parse_on(v: RawBsonRef<'_>) -> CommandResult<Vec<String>> {
    let mut fields = Vec::new();
    match v {
        RawBsonRef::String(s) => fields.push(s.to_owned()),
        RawBsonRef::Array(items) => {
            for item in items {
                match item.map_err(|e| invalid_bson(&e))? {
                    RawBsonRef::String(s) => fields.push(s.to_owned()),
                    other => {
                        return Err(CommandError::new(
                            ErrorCode::Location(51134),
                            format!(
                                "$merge 'on' array elements must be strings, but found {}",
                                type_name(other.element_type())
                            ),
                        ));
                    }
                }
            }
        }
        other => {
            return Err(CommandError::new(
                ErrorCode::Location(51186),
                format!(
                    "$merge 'on' field  must be either a string or an array of strings, but \
                     found {}",
                    type_name(other.element_type())
                ),
            ));
        }
    }
    if fields.is_empty() {
        return Err(CommandError::new(
            ErrorCode::Location(51187),
            "If explicitly specifying $merge 'on', must include at least one field",
        ));
    }
    let mut seen = std::collections::BTreeSet::new();
    for f in &fields {
        if !seen.insert(f.as_str()) {
            return Err(CommandError::new(
                ErrorCode::Location(31465),
                format!("Found a duplicate field '{f}'"),
            ));
        }
    }
    Ok(fields)
}

fn parse_when_matched(v: RawBsonRef<'_>) -> CommandResult<WhenMatched> {
    match v {
        RawBsonRef::String("replace") => Ok(WhenMatched::Replace),
        RawBsonRef::String("keepExisting") => Ok(WhenMatched::KeepExisting),
        RawBsonRef::String("merge") => Ok(WhenMatched::Merge),
        RawBsonRef::String("fail") => Ok(WhenMatched::Fail),
        // "pipeline" is a mode only a pipeline gives, never a name.
        RawBsonRef::String(other) => Err(bad_enum("whenMatched", other)),
        RawBsonRef::Array(stages) => Ok(WhenMatched::Pipeline(stages.to_owned())),
        other => Err(CommandError::new(
            ErrorCode::Location(51191),
            format!(
                "$merge 'whenMatched' field  must be either a string or an array, but found {}",
                type_name(other.element_type())
            ),
        )),
    }
}

/// `let` for a `whenMatched` pipeline: `new` may only be `"$$ROOT"`, and is always defined.
fn parse_let(spec: Option<&RawDocument>) -> CommandResult<Vec<(String, Expression)>> {
    let root = Expression::parse(RawBsonRef::String("$$ROOT"))?;
    let Some(spec) = spec else {
        return Ok(vec![("new".to_owned(), root)]);
    };
    let mut out = Vec::new();
    let mut has_new = false;
    for elem in spec {
        let (k, v) = elem.map_err(|e| invalid_bson(&e))?;
        if k.as_str() == "new" {
            if !matches!(v, RawBsonRef::String("$$ROOT")) {
                return Err(CommandError::new(
                    ErrorCode::Location(51273),
                    "'let' may not define a value for the reserved 'new' variable other than \
                     '$$ROOT'",
                ));
            }
            has_new = true;
        }
        out.push((k.as_str().to_owned(), Expression::parse(v)?));
    }
    if !has_new {
        out.push(("new".to_owned(), root));
    }
    Ok(out)
}

/// Replaces the contents of `target` with `docs` (created if missing, keeping its options and
/// indexes, so that its TTL policy applies to them), in one atomic commit, then waits as the
/// write concern asks.
pub(super) async fn out(
    state: &ServerState,
    target: Target,
    concern: WriteConcern,
    docs: Vec<RawDocumentBuf>,
) -> CommandResult<()> {
    let catalog = std::sync::Arc::clone(&state.catalog);
    let now_ms = state.now_ms();
    let ticket = tokio::task::spawn_blocking(crate::storage::tally::carry(move || {
        let ((), ticket) = catalog.replace_collection(&target.db, &target.coll, |collection| {
            let mut w = Writer::new(collection, &catalog, now_ms);
            for doc in &docs {
                let (doc, fresh) = prepare_insert(doc)?;
                w.insert_prepared(&doc, fresh)?;
            }
            Ok(((), std::mem::take(&mut w.batch)))
        })?;
        Ok::<_, CommandError>(ticket)
    }))
    .await
    .map_err(|e| CommandError::internal(e.to_string()))??;
    state.purge_wake.notify_one();
    concern.wait(state, Some(ticket)).await
}

/// Folds `docs` into the `$merge` target, in order, committing every [`MERGE_BATCH`] writes. An
/// error stops it; what was written before stays, as in mongod.
pub(super) async fn merge(
    state: &ServerState,
    spec: Merge,
    concern: WriteConcern,
    docs: Vec<RawDocumentBuf>,
) -> CommandResult<()> {
    if docs.is_empty() {
        return Ok(());
    }
    // Only inserts create the collection; updates of a missing one find nothing.
    let create = spec.when_not_matched == WhenNotMatched::Insert;
    let mut next = 0;
    let outcome = with_writer(
        state,
        &spec.target.db,
        &spec.target.coll,
        concern,
        create,
        |w| -> CommandResult<()> {
            // From the first document not merged yet: the writer runs again from there when
            // one met a key a transaction holds.
            while let Some(doc) = docs.get(next) {
                match merge_one(w, &spec, doc) {
                    Err(_) if w.blocked.is_some() => return Ok(()),
                    outcome => outcome?,
                }
                next += 1;
                if w.pending_writes() >= MERGE_BATCH {
                    w.commit_pending()?;
                }
            }
            Ok(())
        },
    )
    .await?;
    match outcome {
        Some(result) => result,
        // No collection: nothing matches.
        None if spec.when_not_matched == WhenNotMatched::Fail => Err(no_match()),
        None => Ok(()),
    }
}

fn no_match() -> CommandError {
    CommandError::new(
        ErrorCode::MergeStageNoMatchingDocument,
        "$merge could not find a matching document in the target collection for at least one \
         document in the source collection",
    )
}

fn merge_one(w: &mut Writer<'_>, spec: &Merge, doc: &RawDocument) -> CommandResult<()> {
    let on_error = || {
        CommandError::new(
            ErrorCode::Location(51132),
            "$merge write error: 'on' field cannot be missing, null, undefined or an array",
        )
    };
    match doc.get("_id").map_err(|e| invalid_bson(&e))? {
        Some(RawBsonRef::Null | RawBsonRef::Undefined) => return Err(on_error()),
        Some(RawBsonRef::Array(_)) => {
            return Err(CommandError::new(
                ErrorCode::Location(51185),
                on_error().errmsg,
            ));
        }
        _ => {}
    }
    // A document without `_id` gets one, as an insert would give it.
    let (doc, fresh) = prepare_insert(doc)?;
    let doc = doc.into_owned();
    let id = doc
        .get("_id")
        .ok()
        .flatten()
        .ok_or_else(|| CommandError::internal("document without _id"))?;
    let found = if fresh {
        None
    } else {
        w.live_by_id(&keystring::to_key(id))?
    };
    let Some(found) = found else {
        return match spec.when_not_matched {
            WhenNotMatched::Insert => w.insert_prepared(&doc, fresh),
            WhenNotMatched::Discard => Ok(()),
            WhenNotMatched::Fail => Err(no_match()),
        };
    };
    let ctx = UpdateContext::at(w.now_ms);
    let updated = match &spec.when_matched {
        WhenMatched::KeepExisting => None,
        WhenMatched::Fail => return Err(duplicate_key(w.collection, id)),
        WhenMatched::Replace => Some(doc.clone()),
        WhenMatched::Merge => {
            // `{$set: <the new document's fields>}` on the existing one (`_id` is the same).
            let mut fields = RawDocumentBuf::new();
            for elem in doc.iter_elements() {
                let elem = elem.map_err(|e| invalid_bson(&e))?;
                if elem.key().as_str() != "_id" {
                    fields.append(elem.key(), elem.value().map_err(|e| invalid_bson(&e))?);
                }
            }
            if fields.is_empty() {
                None
            } else {
                Update::compile(&rawdoc! { "$set": fields })?.apply_with(&found.doc, &ctx)?
            }
        }
        WhenMatched::Pipeline(stages) => {
            let mut variables = RawDocumentBuf::new();
            for (name, expr) in &spec.variables {
                if let Ok(key) = <&bson::raw::CStr>::try_from(name.as_str()) {
                    variables.append(key, expr.evaluate(&doc)?.unwrap_or(bson::RawBson::Null));
                }
            }
            let vars = Arc::new(Variables::system_clock().with_constants(&variables)?);
            Update::compile_pipeline_in(stages, &vars)?.apply_with(&found.doc, &ctx)?
        }
    };
    match updated {
        Some(new_doc) => w.replace_found(&found, &new_doc),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use bson::rawbson;

    use super::*;

    fn merge_err(spec: &RawDocumentBuf) -> CommandError {
        parse_merge(RawBsonRef::Document(spec), "db").unwrap_err()
    }

    #[test]
    fn out_targets_and_their_errors() {
        let t = parse_out(RawBsonRef::String("c"), "db").unwrap();
        assert_eq!(t.namespace(), "db.c");
        let spec = rawdoc! { "db": "other", "coll": "c" };
        let t = parse_out(RawBsonRef::Document(&spec), "db").unwrap();
        assert_eq!(t.namespace(), "other.c");
        let code = |arg: RawBsonRef<'_>| parse_out(arg, "db").unwrap_err().code;
        assert_eq!(code(RawBsonRef::Int32(1)), ErrorCode::Location(16990));
        assert_eq!(code(RawBsonRef::String("")), ErrorCode::InvalidNamespace);
        assert_eq!(
            code(RawBsonRef::String("system.x")),
            ErrorCode::Location(17385)
        );
        assert_eq!(
            parse_out(RawBsonRef::String("c"), "admin")
                .unwrap_err()
                .code,
            ErrorCode::Location(31321)
        );
        let missing = rawdoc! { "coll": "c" };
        assert_eq!(
            code(RawBsonRef::Document(&missing)),
            ErrorCode::IDLFailedToParse
        );
        let unknown = rawdoc! { "db": "d", "coll": "c", "x": 1 };
        assert_eq!(
            code(RawBsonRef::Document(&unknown)),
            ErrorCode::IDLUnknownField
        );
    }

    #[test]
    fn merge_specs_and_their_errors() {
        let m = parse_merge(RawBsonRef::String("c"), "db").unwrap();
        assert_eq!(m.target.namespace(), "db.c");
        let spec = rawdoc! { "into": { "db": "o", "coll": "c" }, "on": ["_id"], "whenMatched": "replace", "whenNotMatched": "discard" };
        let m = parse_merge(RawBsonRef::Document(&spec), "db").unwrap();
        assert_eq!(m.target.namespace(), "o.c");
        assert_eq!(m.when_not_matched, WhenNotMatched::Discard);
        assert_eq!(
            merge_err(&rawdoc! { "into": "c", "on": "x" }).code,
            ErrorCode::Location(51183)
        );
        assert_eq!(
            merge_err(&rawdoc! { "into": "c", "whenMatched": "fail", "whenNotMatched": "discard" })
                .code,
            ErrorCode::Location(51181)
        );
        assert_eq!(
            merge_err(&rawdoc! { "into": "c", "whenMatched": "pipeline" }).code,
            ErrorCode::BadValue
        );
        assert_eq!(
            merge_err(&rawdoc! { "into": "c", "let": { "a": 1 } }).code,
            ErrorCode::Location(51199)
        );
        assert_eq!(
            merge_err(&rawdoc! { "into": "c", "let": { "new": 1 }, "whenMatched": [{ "$set": { "a": 1 } }] })
                .code,
            ErrorCode::Location(51273)
        );
        assert_eq!(
            merge_err(&rawdoc! { "into": 1 }).code,
            ErrorCode::Location(51178)
        );
        assert_eq!(
            merge_err(&rawdoc! { "into": "" }).code,
            ErrorCode::Location(5_786_800)
        );
        assert_eq!(
            merge_err(&rawdoc! { "into": "c", "on": [] }).code,
            ErrorCode::Location(51187)
        );
        assert_eq!(
            merge_err(&rawdoc! { "on": "_id" }).code,
            ErrorCode::IDLFailedToParse
        );
        assert_eq!(
            merge_err(&rawdoc! { "into": "c", "x": 1 }).code,
            ErrorCode::IDLUnknownField
        );
        assert_eq!(
            merge_err(&rawdoc! { "into": "system.x" }).code,
            ErrorCode::Location(31319)
        );
        assert_eq!(
            parse_merge(rawbson!(1).as_raw_bson_ref(), "db")
                .unwrap_err()
                .code,
            ErrorCode::TypeMismatch
        );
    }
}
