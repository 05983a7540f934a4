//! Change events from oplog entries, in MongoDB 7.0's shape (mongod's
//! `ChangeStreamDefaultEventTransformation`, with the stages around it: the oplog filter of
//! `change_stream_filter_helpers`, the transaction unwinding of
//! `DocumentSourceChangeStreamUnwindTransaction`, the invalidation of
//! `DocumentSourceChangeStreamCheckInvalidate`, the classic-events filter, and the image stages
//! `DocumentSourceChangeStreamAddPreImage` / `AddPostImage`).
//!
//! [`events`] turns one oplog entry into the events a stream of a [`Scope`] sees, each with its
//! resume token; [`Event::document`] then builds the event document, looking up what it needs
//! through [`Images`]. Tokens come first so that the caller can skip the events up to a resume
//! point without looking anything up, as mongod does (its resumability check runs before the
//! image stages).
//!
//! Field order is mongod's: `to` (rename), `txnNumber`, `lsid` (transaction writes), `_id`,
//! `operationType`, `clusterTime`, `collectionUUID` (expanded), `wallTime`, `fullDocument`,
//! `ns`, `documentKey`, `operationDescription` (expanded), `updateDescription`,
//! `stateBeforeChange`, `fullDocumentBeforeChange`. (mongod adds `to`, `txnNumber` and `lsid`
//! before `_id`; its `document_source_change_stream_test.cpp` expects them there.)

use bson::{
    Binary, DateTime, RawArrayBuf, RawBson, RawBsonRef, RawDocument, RawDocumentBuf, Timestamp,
    Uuid, spec::BinarySubtype,
};

use super::spec::{FullDocument, FullDocumentBeforeChange, Scope, Spec};
use super::token::{ResumeTokenData, document_to_string};
use crate::error::{CommandError, ErrorCode};
use crate::oplog::{DiffError, apply_diff, update_description};
use crate::query::display::type_name;

/// Where the lead's storage gives an event the documents it looks up.
pub trait Images {
    /// The current version of the document `document_key` of the collection `ns` (`db.coll`)
    /// whose UUID is `uuid` (`fullDocument: "updateLookup"`), or `None` when it is gone.
    fn current(
        &self,
        ns: &str,
        uuid: &Uuid,
        document_key: &RawDocument,
    ) -> Result<Option<RawDocumentBuf>, CommandError>;

    /// The pre-image recorded for the write at `ts` (the oplog entry's, or for a transaction
    /// the `applyOps` entry's) and `apply_ops_index` (its index in `applyOps`, 0 otherwise) of
    /// the collection `uuid` (mongod's `ChangeStreamPreImageId`), or `None`.
    fn pre_image(
        &self,
        uuid: &Uuid,
        ts: Timestamp,
        apply_ops_index: u32,
    ) -> Result<Option<RawDocumentBuf>, CommandError>;
}

/// One change event.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    /// The event's resume token (its `_id`).
    pub token: ResumeTokenData,
    /// The `invalidate` event: the stream ends after it (mongod closes the cursor once the
    /// batch holding it is returned).
    pub invalidate: bool,
    draft: Draft,
}

/// The fields of an event before its images are looked up.
#[derive(Debug, Clone, PartialEq, Default)]
struct Draft {
    to: Option<RawDocumentBuf>,
    txn_number: Option<i64>,
    lsid: Option<RawDocumentBuf>,
    operation_type: &'static str,
    cluster_time: Option<Timestamp>,
    collection_uuid: Option<Uuid>,
    wall_time: Option<DateTime>,
    full_document: Option<RawBson>,
    /// `db` and `coll` of `ns` (`coll` absent for `dropDatabase`).
    ns: Option<(String, Option<String>)>,
    document_key: Option<RawDocumentBuf>,
    operation_description: Option<RawDocumentBuf>,
    update_description: Option<(&'static str, RawDocumentBuf)>,
    state_before_change: Option<RawDocumentBuf>,
    /// What to look up.
    pre_image: Option<PreImageId>,
    post_image: Option<PostImage>,
}

#[derive(Debug, Clone, PartialEq)]
struct PreImageId {
    uuid: Uuid,
    ts: Timestamp,
    apply_ops_index: u32,
}

#[derive(Debug, Clone, PartialEq)]
enum PostImage {
    /// `updateLookup`: the current document.
    Lookup { uuid: Uuid },
    /// `whenAvailable` / `required`: the pre-image with this diff applied.
    Computed { diff: RawDocumentBuf },
}

impl Event {
    /// Whether [`Event::document`] will call `images`.
    pub fn needs_images(&self) -> bool {
        self.draft.pre_image.is_some() || self.draft.post_image.is_some()
    }

    /// The event document, with its images looked up (mongod's errors `NoMatchingDocument`
    /// when `required` finds none).
    pub fn document(
        &self,
        spec: &Spec,
        images: &dyn Images,
    ) -> Result<RawDocumentBuf, CommandError> {
        let d = &self.draft;
        // The pre-image stage runs first.
        let pre_image = match &d.pre_image {
            Some(id) if spec.full_document_before_change != FullDocumentBeforeChange::Off => {
                let found = images.pre_image(&id.uuid, id.ts, id.apply_ops_index)?;
                if found.is_none()
                    && spec.full_document_before_change == FullDocumentBeforeChange::Required
                {
                    return Err(CommandError::new(
                        ErrorCode::NoMatchingDocument,
                        format!(
                            "Change stream was configured to require a pre-image for all update, \
                             delete and replace events, but the pre-image was not found for \
                             event: {}",
                            self.not_found_description()
                        ),
                    ));
                }
                Some(found)
            }
            _ => None,
        };
        let full_document = match &d.post_image {
            None => d.full_document.clone(),
            Some(post) => {
                let found = match post {
                    PostImage::Lookup { uuid } => {
                        let (db, coll) = d.ns.clone().unwrap_or_default();
                        let ns = format!("{db}.{}", coll.unwrap_or_default());
                        let key = d.document_key.clone().unwrap_or_default();
                        images.current(&ns, uuid, &key)?
                    }
                    PostImage::Computed { diff } => {
                        let pre = match &pre_image {
                            Some(looked_up) => looked_up.clone(),
                            None => match &d.pre_image {
                                Some(id) => {
                                    images.pre_image(&id.uuid, id.ts, id.apply_ops_index)?
                                }
                                None => None,
                            },
                        };
                        match pre {
                            Some(pre) => Some(apply_diff(&pre, diff).map_err(diff_error)?),
                            None => None,
                        }
                    }
                };
                if found.is_none() && spec.full_document == FullDocument::Required {
                    return Err(CommandError::new(
                        ErrorCode::NoMatchingDocument,
                        format!(
                            "Change stream was configured to require a post-image for all update \
                             events, but the post-image was not found for event: {}",
                            self.not_found_description()
                        ),
                    ));
                }
                Some(found.map_or(RawBson::Null, RawBson::Document))
            }
        };
        let mut out = RawDocumentBuf::new();
        if let Some(to) = &d.to {
            out.append(bson::raw::cstr!("to"), to.clone());
        }
        if let Some(n) = d.txn_number {
            out.append(bson::raw::cstr!("txnNumber"), n);
        }
        if let Some(lsid) = &d.lsid {
            out.append(bson::raw::cstr!("lsid"), lsid.clone());
        }
        out.append(bson::raw::cstr!("_id"), self.token.to_document());
        out.append(bson::raw::cstr!("operationType"), d.operation_type);
        if let Some(ts) = d.cluster_time {
            out.append(bson::raw::cstr!("clusterTime"), ts);
        }
        if let Some(uuid) = d.collection_uuid {
            out.append(bson::raw::cstr!("collectionUUID"), uuid_bson(uuid));
        }
        if let Some(wall) = d.wall_time {
            out.append(bson::raw::cstr!("wallTime"), wall);
        }
        if let Some(doc) = full_document {
            out.append(bson::raw::cstr!("fullDocument"), doc);
        }
        if let Some((db, coll)) = &d.ns {
            out.append(bson::raw::cstr!("ns"), ns_document(db, coll.as_deref()));
        }
        if let Some(key) = &d.document_key {
            out.append(bson::raw::cstr!("documentKey"), key.clone());
        }
        if let Some(desc) = &d.operation_description {
            out.append(bson::raw::cstr!("operationDescription"), desc.clone());
        }
        if let Some((name, desc)) = &d.update_description {
            let name = if *name == "rawUpdateDescription" {
                bson::raw::cstr!("rawUpdateDescription")
            } else {
                bson::raw::cstr!("updateDescription")
            };
            out.append(name, desc.clone());
        }
        if let Some(state) = &d.state_before_change {
            out.append(bson::raw::cstr!("stateBeforeChange"), state.clone());
        }
        if let Some(pre) = pre_image {
            out.append(
                bson::raw::cstr!("fullDocumentBeforeChange"),
                pre.map_or(RawBson::Null, RawBson::Document),
            );
        }
        Ok(out)
    }

    /// mongod's `makePreImageNotFoundErrorMsg`: `{operationType, ns, clusterTime, txnNumber}`.
    fn not_found_description(&self) -> String {
        let d = &self.draft;
        let mut doc = RawDocumentBuf::new();
        doc.append(bson::raw::cstr!("operationType"), d.operation_type);
        if let Some((db, coll)) = &d.ns {
            doc.append(bson::raw::cstr!("ns"), ns_document(db, coll.as_deref()));
        }
        if let Some(ts) = d.cluster_time {
            doc.append(bson::raw::cstr!("clusterTime"), ts);
        }
        if let Some(n) = d.txn_number {
            doc.append(bson::raw::cstr!("txnNumber"), n);
        }
        document_to_string(&doc)
    }
}

/// The events a stream of `scope` sees for one oplog entry, in order: none for an entry it does
/// not watch, one for a write, the event then an `invalidate` for a command that ends the stream
/// (a collection stream: `drop` or `rename` of, or onto, its collection; a database stream:
/// `dropDatabase`), one per relevant operation of a transaction's or a batch's `applyOps`
/// (each with its `txnOpIndex`, and `lsid` / `txnNumber` when the entry has them). Without
/// `showExpandedEvents`, only mongod's classic events.
pub fn events(entry: &RawDocument, scope: &Scope, spec: &Spec) -> Result<Vec<Event>, CommandError> {
    let op = get_str(entry, "op")?;
    if matches!(
        entry.get("fromMigrate"),
        Ok(Some(RawBsonRef::Boolean(true)))
    ) {
        return Ok(Vec::new());
    }
    if op == "c" {
        let o = get_doc(entry, "o")?;
        if let Ok(Some(RawBsonRef::Array(ops))) = o.get("applyOps") {
            return unwind(entry, o, ops, scope, spec);
        }
    }
    let view = is_view_event(entry, scope, spec);
    if !view && !relevant(entry, scope, spec) {
        return Ok(Vec::new());
    }
    let ts = get_ts(entry)?;
    let wall = get_wall(entry)?;
    let ctx = Context {
        ts,
        wall,
        txn: None,
    };
    let mut out = Vec::new();
    if view {
        view_transform(entry, &ctx, &mut out)?;
    } else {
        transform(entry, &ctx, scope, spec, &mut out)?;
    }
    Ok(out)
}

/// A write to a database's `system.views` seen by a database or cluster stream with
/// `showExpandedEvents` (mongod's `buildViewDefinitionEventFilter`, whose events are only
/// expanded ones here).
fn is_view_event(op: &RawDocument, scope: &Scope, spec: &Spec) -> bool {
    if !spec.show_expanded_events {
        return false;
    }
    let (Ok(Some(RawBsonRef::String(kind))), Ok(Some(RawBsonRef::String(ns)))) =
        (op.get("op"), op.get("ns"))
    else {
        return false;
    };
    let (db, coll) = split_ns(ns);
    matches!(kind, "i" | "u" | "d")
        && coll == "system.views"
        && match scope {
            Scope::Collection { .. } => false,
            Scope::Database { db: want } => db == want,
            Scope::Cluster => db_is_watched(db),
        }
}

/// mongod's `ChangeStreamViewDefinitionEventTransformation`: an insert into `system.views` is
/// the view's `create`, a replacement its `modify`, a delete its `drop`; `ns` is the view's
/// (the record's `_id`), `operationDescription` the definition without `_id`.
fn view_transform(
    op: &RawDocument,
    ctx: &Context,
    out: &mut Vec<Event>,
) -> Result<(), CommandError> {
    let kind = get_str(op, "op")?;
    let o = get_doc(op, "o")?;
    let view_ns = match o.get("_id") {
        Ok(Some(RawBsonRef::String(s))) => s,
        Ok(other) => return Err(wrong_entry_type("o._id", "string", other)),
        Err(e) => return Err(invalid(&e)),
    };
    let (operation_type, description) = match kind {
        "i" => ("create", Some(without(o, &["_id"]))),
        "u" => ("modify", Some(without(o, &["_id"]))),
        _ => ("drop", None),
    };
    let uuid = match op.get("ui") {
        Ok(Some(RawBsonRef::Binary(b))) if b.subtype == BinarySubtype::Uuid => {
            <[u8; 16]>::try_from(b.bytes).ok().map(Uuid::from_bytes)
        }
        _ => None,
    };
    let mut identifier = RawDocumentBuf::new();
    identifier.append(bson::raw::cstr!("operationType"), operation_type);
    if let Some(desc) = &description {
        identifier.append(bson::raw::cstr!("operationDescription"), desc.clone());
    }
    let txn_op_index = ctx.txn.as_ref().map_or(0, |t| t.op_index);
    let (db, coll) = split_ns(view_ns);
    out.push(Event {
        token: ResumeTokenData::event(ctx.ts, txn_op_index, uuid, identifier),
        invalidate: false,
        draft: Draft {
            operation_type,
            cluster_time: Some(ctx.ts),
            wall_time: Some(ctx.wall),
            ns: Some((db.to_owned(), Some(coll.to_owned()))),
            operation_description: description,
            ..Draft::default()
        },
    });
    Ok(())
}

/// What the unwinding adds to each operation of an `applyOps` (mongod's
/// `_addRequiredTransactionFields`).
struct Unwound {
    op_index: u64,
    apply_ops_index: u32,
    lsid: Option<RawDocumentBuf>,
    number: Option<i64>,
}

struct Context {
    ts: Timestamp,
    wall: DateTime,
    txn: Option<Unwound>,
}

fn unwind(
    entry: &RawDocument,
    o: &RawDocument,
    ops: &bson::RawArray,
    scope: &Scope,
    spec: &Spec,
) -> Result<Vec<Event>, CommandError> {
    // Entries of a transaction not yet committed (mongod's transaction filter).
    for flag in ["prepare", "partialTxn"] {
        if matches!(o.get(flag), Ok(Some(RawBsonRef::Boolean(true)))) {
            return Ok(Vec::new());
        }
    }
    let ts = get_ts(entry)?;
    let wall = get_wall(entry)?;
    let lsid = match entry.get("lsid") {
        Ok(None) => None,
        Ok(Some(RawBsonRef::Document(d))) => Some(d.to_owned()),
        Ok(Some(other)) => return Err(wrong_entry_type("lsid", "object", Some(other))),
        Err(e) => return Err(invalid(&e)),
    };
    let txn_number = match entry.get("txnNumber") {
        Ok(None) => None,
        Ok(Some(RawBsonRef::Int64(n))) => Some(n),
        Ok(Some(other)) => return Err(wrong_entry_type("txnNumber", "long", Some(other))),
        Err(e) => return Err(invalid(&e)),
    };
    let mut out = Vec::new();
    for (index, op) in ops.into_iter().enumerate() {
        let op = op.map_err(|e| invalid(&e))?;
        let RawBsonRef::Document(op) = op else {
            return Err(wrong_entry_type("applyOps", "object", Some(op)));
        };
        let view = is_view_event(op, scope, spec);
        if !view && !relevant(op, scope, spec) {
            continue;
        }
        let ctx = Context {
            ts,
            wall,
            txn: Some(Unwound {
                op_index: u64::try_from(index).unwrap_or(u64::MAX),
                apply_ops_index: u32::try_from(index).unwrap_or(u32::MAX),
                lsid: lsid.clone(),
                number: txn_number,
            }),
        };
        if view {
            view_transform(op, &ctx, &mut out)?;
        } else {
            transform(op, &ctx, scope, spec, &mut out)?;
        }
    }
    Ok(out)
}

/// The classic events (those a stream shows without `showExpandedEvents`).
const CLASSIC: &[&str] = &[
    "insert",
    "update",
    "replace",
    "delete",
    "drop",
    "rename",
    "dropDatabase",
    "invalidate",
];

fn transform(
    op: &RawDocument,
    ctx: &Context,
    scope: &Scope,
    spec: &Spec,
    out: &mut Vec<Event>,
) -> Result<(), CommandError> {
    let op_type = get_str(op, "op")?;
    let ns = get_str(op, "ns")?;
    let (db, coll) = split_ns(ns);
    let mut ns_db = db.to_owned();
    let mut ns_coll = Some(coll.to_owned());
    let uuid = match op.get("ui") {
        Ok(Some(RawBsonRef::Binary(b))) if b.subtype == BinarySubtype::Uuid => {
            let bytes: [u8; 16] = b
                .bytes
                .try_into()
                .map_err(|_| wrong_entry_type("ui", "UUID", None))?;
            Some(Uuid::from_bytes(bytes))
        }
        _ => None,
    };
    let mut d = Draft {
        cluster_time: Some(ctx.ts),
        wall_time: Some(ctx.wall),
        ..Draft::default()
    };
    let o = get_doc(op, "o")?;
    let mut is_update = false;
    let mut diff = None;
    match op_type {
        "i" => {
            d.operation_type = "insert";
            d.full_document = Some(RawBson::Document(o.to_owned()));
            d.document_key = Some(match op.get("o2") {
                Ok(Some(RawBsonRef::Document(k))) => k.to_owned(),
                _ => id_key(o),
            });
        }
        "d" => {
            d.operation_type = "delete";
            d.document_key = Some(o.to_owned());
        }
        "u" => {
            let version = o.get("$v").ok().flatten();
            match version {
                Some(RawBsonRef::Int32(2)) => {
                    d.operation_type = "update";
                    is_update = true;
                    let delta = match o.get("diff") {
                        Ok(Some(RawBsonRef::Document(x))) => x,
                        Ok(other) => return Err(wrong_entry_type("o.diff", "object", other)),
                        Err(e) => return Err(invalid(&e)),
                    };
                    diff = Some(delta.to_owned());
                    d.update_description = Some(if spec.show_raw_update_description {
                        ("rawUpdateDescription", o.to_owned())
                    } else {
                        let desc = update_description(delta).map_err(diff_error)?;
                        (
                            "updateDescription",
                            desc.to_document(spec.show_expanded_events)
                                .map_err(diff_error)?,
                        )
                    });
                }
                None if matches!(o.get("_id"), Ok(Some(_))) => {
                    d.operation_type = "replace";
                    d.full_document = Some(RawBson::Document(o.to_owned()));
                }
                other => {
                    return Err(CommandError::new(
                        ErrorCode::Location(6_741_200),
                        format!(
                            "Unsupported or missing oplog version, $v: {}",
                            other.map(crate::query::display::value).unwrap_or_default()
                        ),
                    ));
                }
            }
            d.document_key = Some(get_doc(op, "o2")?.to_owned());
        }
        "c" => {
            command(op, o, &mut d, &mut ns_db, &mut ns_coll)?;
        }
        other => {
            return Err(CommandError::internal(format!(
                "unexpected oplog entry op '{other}' for a change stream"
            )));
        }
    }
    if uuid.is_none() && !matches!(d.operation_type, "dropDatabase") {
        return Err(CommandError::internal("Saw a CRUD op without a UUID"));
    }
    let txn_op_index = ctx.txn.as_ref().map_or(0, |t| t.op_index);
    if let Some(txn) = &ctx.txn {
        d.txn_number = txn.number;
        d.lsid.clone_from(&txn.lsid);
    }
    // The resume token's event identifier (version 2).
    let mut identifier = RawDocumentBuf::new();
    identifier.append(bson::raw::cstr!("operationType"), d.operation_type);
    if let Some(key) = &d.document_key {
        identifier.append(bson::raw::cstr!("documentKey"), key.clone());
    } else if let Some(desc) = &d.operation_description {
        identifier.append(bson::raw::cstr!("operationDescription"), desc.clone());
    }
    let token = ResumeTokenData::event(ctx.ts, txn_op_index, uuid, identifier);
    if spec.show_expanded_events {
        d.collection_uuid = uuid;
    } else {
        d.operation_description = None;
        d.state_before_change = None;
    }
    // What the image stages will need.
    let apply_ops_index = ctx.txn.as_ref().map_or(0, |t| t.apply_ops_index);
    if let Some(uuid) = uuid {
        let pre_requested = spec.full_document_before_change != FullDocumentBeforeChange::Off;
        let post_computed = matches!(
            spec.full_document,
            FullDocument::WhenAvailable | FullDocument::Required
        );
        if (pre_requested && matches!(d.operation_type, "update" | "replace" | "delete"))
            || (post_computed && is_update)
        {
            d.pre_image = Some(PreImageId {
                uuid,
                ts: ctx.ts,
                apply_ops_index,
            });
        }
        if is_update {
            d.post_image = match spec.full_document {
                FullDocument::Default => None,
                FullDocument::UpdateLookup => Some(PostImage::Lookup { uuid }),
                FullDocument::WhenAvailable | FullDocument::Required => {
                    diff.take().map(|diff| PostImage::Computed { diff })
                }
            };
        }
    }
    d.ns = Some((ns_db, ns_coll));
    let invalidates = match scope {
        Scope::Collection { .. } => {
            matches!(d.operation_type, "drop" | "rename" | "dropDatabase")
        }
        Scope::Database { .. } => d.operation_type == "dropDatabase",
        Scope::Cluster => false,
    };
    let classic = CLASSIC.contains(&d.operation_type);
    let invalidate = invalidates.then(|| {
        let mut token = token.clone();
        token.from_invalidate = true;
        Event {
            token,
            invalidate: true,
            draft: Draft {
                operation_type: "invalidate",
                cluster_time: Some(ctx.ts),
                wall_time: Some(ctx.wall),
                ..Draft::default()
            },
        }
    });
    if spec.show_expanded_events || classic {
        out.push(Event {
            token,
            invalidate: false,
            draft: d,
        });
    }
    out.extend(invalidate);
    Ok(())
}

/// A command entry's event (`o` one of mongod's commands a stream shows).
fn command(
    op: &RawDocument,
    o: &RawDocument,
    d: &mut Draft,
    ns_db: &mut String,
    ns_coll: &mut Option<String>,
) -> Result<(), CommandError> {
    let first = o
        .iter()
        .next()
        .and_then(Result::ok)
        .map(|(k, v)| (k.as_str(), v));
    let Some((name, value)) = first else {
        return Err(CommandError::internal("empty command oplog entry"));
    };
    let coll_of = |v: RawBsonRef<'_>| match v {
        RawBsonRef::String(s) => Ok(s.to_owned()),
        other => Err(wrong_entry_type(
            &format!("o.{name}"),
            "string",
            Some(other),
        )),
    };
    match name {
        "drop" => {
            d.operation_type = "drop";
            *ns_coll = Some(coll_of(value)?);
        }
        "renameCollection" => {
            d.operation_type = "rename";
            let from = coll_of(value)?;
            let (from_db, from_coll) = split_ns(&from);
            from_db.clone_into(ns_db);
            *ns_coll = Some(from_coll.to_owned());
            let to = match o.get("to") {
                Ok(Some(RawBsonRef::String(s))) => s,
                Ok(other) => return Err(wrong_entry_type("o.to", "string", other)),
                Err(e) => return Err(invalid(&e)),
            };
            let (to_db, to_coll) = split_ns(to);
            let target = ns_document(to_db, Some(to_coll));
            let mut desc = RawDocumentBuf::new();
            for (k, v) in o.iter().map_while(Result::ok) {
                match k.as_str() {
                    "renameCollection" | "stayTemp" => {}
                    "to" => desc.append(k, target.clone()),
                    _ => desc.append(k, v),
                }
            }
            d.to = Some(target);
            d.operation_description = Some(desc);
        }
        "dropDatabase" => {
            d.operation_type = "dropDatabase";
            *ns_coll = None;
        }
        "create" => {
            d.operation_type = "create";
            *ns_coll = Some(coll_of(value)?);
            d.operation_description = Some(without(o, &["create"]));
        }
        "createIndexes" => {
            d.operation_type = "createIndexes";
            *ns_coll = Some(coll_of(value)?);
            let mut indexes = RawArrayBuf::new();
            indexes.push(without(o, &["createIndexes"]));
            let mut desc = RawDocumentBuf::new();
            desc.append(bson::raw::cstr!("indexes"), indexes);
            d.operation_description = Some(desc);
        }
        "commitIndexBuild" => {
            d.operation_type = "createIndexes";
            *ns_coll = Some(coll_of(value)?);
            let mut desc = RawDocumentBuf::new();
            if let Ok(Some(indexes)) = o.get("indexes") {
                desc.append(bson::raw::cstr!("indexes"), indexes);
            }
            d.operation_description = Some(desc);
        }
        "dropIndexes" => {
            d.operation_type = "dropIndexes";
            *ns_coll = Some(coll_of(value)?);
            let o2 = get_doc(op, "o2")?;
            let mut indexes = RawArrayBuf::new();
            indexes.push(without(o2, &["dropIndexes"]));
            let mut desc = RawDocumentBuf::new();
            desc.append(bson::raw::cstr!("indexes"), indexes);
            d.operation_description = Some(desc);
        }
        "collMod" => {
            d.operation_type = "modify";
            *ns_coll = Some(coll_of(value)?);
            d.operation_description = Some(without(o, &["collMod"]));
            let o2 = get_doc(op, "o2")?;
            let mut state = RawDocumentBuf::new();
            if let Ok(Some(v)) = o2.get("collectionOptions_old") {
                state.append(bson::raw::cstr!("collectionOptions"), v);
            }
            if let Ok(Some(v)) = o2.get("indexOptions_old") {
                state.append(bson::raw::cstr!("indexOptions"), v);
            }
            d.state_before_change = Some(state);
        }
        other => {
            return Err(CommandError::internal(format!(
                "unexpected command '{other}' in the oplog for a change stream"
            )));
        }
    }
    Ok(())
}

/// Whether a stream of `scope` sees this oplog entry (or `applyOps` operation): mongod's
/// `buildOperationFilter`.
fn relevant(op: &RawDocument, scope: &Scope, spec: &Spec) -> bool {
    let Ok(Some(RawBsonRef::String(kind))) = op.get("op") else {
        return false;
    };
    let Ok(Some(RawBsonRef::String(ns))) = op.get("ns") else {
        return false;
    };
    match kind {
        "i" | "u" | "d" => ns_matches(ns, scope, spec),
        "c" => {
            let (db, coll) = split_ns(ns);
            let cmd_ns_ok = coll == "$cmd"
                && match scope {
                    Scope::Collection { db: want, .. } | Scope::Database { db: want } => db == want,
                    Scope::Cluster => db_is_watched(db),
                };
            if !cmd_ns_ok {
                return false;
            }
            let Ok(Some(RawBsonRef::Document(o))) = op.get("o") else {
                return false;
            };
            let str_field = |name: &str| match o.get(name) {
                Ok(Some(RawBsonRef::String(s))) => Some(s),
                _ => None,
            };
            if let Some(c) = str_field("drop") {
                return coll_matches(c, scope, spec);
            }
            if let Ok(Some(from)) = o.get("renameCollection") {
                let from_ok = matches!(from, RawBsonRef::String(s) if ns_matches(s, scope, spec));
                let to_ok = str_field("to").is_some_and(|s| ns_matches(s, scope, spec));
                return from_ok || to_ok;
            }
            for name in [
                "create",
                "createIndexes",
                "commitIndexBuild",
                "dropIndexes",
                "collMod",
            ] {
                if let Some(c) = str_field(name) {
                    return coll_matches(c, scope, spec);
                }
            }
            matches!(o.get("dropDatabase"), Ok(Some(_)))
                && !matches!(scope, Scope::Collection { .. })
        }
        _ => false,
    }
}

/// mongod's `getNsRegexForChangeStream`.
fn ns_matches(ns: &str, scope: &Scope, spec: &Spec) -> bool {
    let (db, coll) = split_ns(ns);
    if !ns.contains('.') {
        return false;
    }
    match scope {
        Scope::Collection { db: d, coll: c } => db == d && coll == c,
        Scope::Database { db: d } => db == d && any_coll_matches(coll, spec),
        Scope::Cluster => db_is_watched(db) && any_coll_matches(coll, spec),
    }
}

/// mongod's `getCollRegexForChangeStream`.
fn coll_matches(coll: &str, scope: &Scope, spec: &Spec) -> bool {
    match scope {
        Scope::Collection { coll: c, .. } => coll == c,
        Scope::Database { .. } | Scope::Cluster => any_coll_matches(coll, spec),
    }
}

/// mongod's `kRegexAllCollections`: no `$` names and no `system.` collections, but with
/// `showSystemEvents` `system.js`, `system.resharding.*` and `system.buckets.*`.
fn any_coll_matches(coll: &str, spec: &Spec) -> bool {
    if coll.starts_with('$') {
        return false;
    }
    match coll.strip_prefix("system.") {
        None => true,
        Some(rest) => {
            spec.show_system_events
                && (rest == "js" || rest.starts_with("resharding.") || rest.starts_with("buckets."))
        }
    }
}

/// mongod's `kRegexAllDBs`: any database but `admin`, `config` and `local`.
fn db_is_watched(db: &str) -> bool {
    !db.is_empty() && !matches!(db, "admin" | "config" | "local")
}

fn split_ns(ns: &str) -> (&str, &str) {
    ns.split_once('.').unwrap_or((ns, ""))
}

fn ns_document(db: &str, coll: Option<&str>) -> RawDocumentBuf {
    let mut doc = RawDocumentBuf::new();
    doc.append(bson::raw::cstr!("db"), db);
    if let Some(c) = coll {
        doc.append(bson::raw::cstr!("coll"), c);
    }
    doc
}

fn without(doc: &RawDocument, names: &[&str]) -> RawDocumentBuf {
    let mut out = RawDocumentBuf::new();
    for (k, v) in doc.iter().map_while(Result::ok) {
        if !names.contains(&k.as_str()) {
            out.append(k, v);
        }
    }
    out
}

fn id_key(o: &RawDocument) -> RawDocumentBuf {
    let mut key = RawDocumentBuf::new();
    if let Ok(Some(id)) = o.get("_id") {
        key.append(bson::raw::cstr!("_id"), id);
    }
    key
}

fn uuid_bson(uuid: Uuid) -> Binary {
    Binary {
        subtype: BinarySubtype::Uuid,
        bytes: uuid.bytes().to_vec(),
    }
}

fn diff_error(e: DiffError) -> CommandError {
    match e {
        DiffError::Malformed { code, message } => {
            CommandError::new(ErrorCode::from_code(code), message)
        }
        other => CommandError::internal(other.to_string()),
    }
}

fn invalid(e: &bson::error::Error) -> CommandError {
    CommandError::new(ErrorCode::InvalidBSON, e.to_string())
}

/// mongod's `checkValueType` (40532).
fn wrong_entry_type(field: &str, expected: &str, found: Option<RawBsonRef<'_>>) -> CommandError {
    let found = found.map_or("missing", |v| type_name(v.element_type()));
    CommandError::new(
        ErrorCode::Location(40532),
        format!("Entry field \"{field}\" should be {expected}, found: {found}"),
    )
}

fn get_str<'a>(doc: &'a RawDocument, field: &str) -> Result<&'a str, CommandError> {
    match doc.get(field) {
        Ok(Some(RawBsonRef::String(s))) => Ok(s),
        Ok(other) => Err(wrong_entry_type(field, "string", other)),
        Err(e) => Err(invalid(&e)),
    }
}

fn get_doc<'a>(doc: &'a RawDocument, field: &str) -> Result<&'a RawDocument, CommandError> {
    match doc.get(field) {
        Ok(Some(RawBsonRef::Document(d))) => Ok(d),
        Ok(other) => Err(wrong_entry_type(field, "object", other)),
        Err(e) => Err(invalid(&e)),
    }
}

fn get_ts(doc: &RawDocument) -> Result<Timestamp, CommandError> {
    match doc.get("ts") {
        Ok(Some(RawBsonRef::Timestamp(ts))) => Ok(ts),
        Ok(other) => Err(wrong_entry_type("ts", "timestamp", other)),
        Err(e) => Err(invalid(&e)),
    }
}

fn get_wall(doc: &RawDocument) -> Result<DateTime, CommandError> {
    match doc.get("wall") {
        Ok(Some(RawBsonRef::DateTime(w))) => Ok(w),
        Ok(other) => Err(wrong_entry_type("wall", "date", other)),
        Err(e) => Err(invalid(&e)),
    }
}

#[cfg(test)]
mod tests;
