//! The `$changeStream` stage's specification (mongod's `DocumentSourceChangeStreamSpec`), the
//! scope it watches, and the checks mongod makes on the stage and the rest of the pipeline.

use bson::{RawBsonRef, RawDocument, Timestamp};

use super::token::ResumeTokenData;
use crate::error::{CommandError, ErrorCode};
use crate::query::display::type_name;

/// `fullDocument` (mongod's `FullDocumentMode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FullDocument {
    /// No `fullDocument` for updates.
    #[default]
    Default,
    /// The document as it is when the event is read (null when gone).
    UpdateLookup,
    /// The post-image (pre-image plus the update's diff) when there is a pre-image; else null.
    WhenAvailable,
    /// The post-image, or an error when it cannot be computed.
    Required,
}

/// `fullDocumentBeforeChange` (mongod's `FullDocumentBeforeChangeMode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FullDocumentBeforeChange {
    /// No pre-images.
    #[default]
    Off,
    /// The pre-image when recorded; else null.
    WhenAvailable,
    /// The pre-image, or an error.
    Required,
}

/// The parsed `$changeStream` stage.
#[expect(
    clippy::struct_excessive_bools,
    reason = "one per flag of mongod's IDL"
)]
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Spec {
    /// `resumeAfter`, decoded.
    pub resume_after: Option<ResumeTokenData>,
    /// `startAfter`, decoded.
    pub start_after: Option<ResumeTokenData>,
    /// `startAtOperationTime`.
    pub start_at_operation_time: Option<Timestamp>,
    /// `fullDocument`.
    pub full_document: FullDocument,
    /// `fullDocumentBeforeChange`.
    pub full_document_before_change: FullDocumentBeforeChange,
    /// `allChangesForCluster`.
    pub all_changes_for_cluster: bool,
    /// `showMigrationEvents` (no effect on a replica set).
    pub show_migration_events: bool,
    /// `showSystemEvents`: also `system.js`, `system.resharding.*`, `system.buckets.*`.
    pub show_system_events: bool,
    /// `allowToRunOnConfigDB`.
    pub allow_to_run_on_config_db: bool,
    /// `allowToRunOnSystemNS`.
    pub allow_to_run_on_system_ns: bool,
    /// `showExpandedEvents`.
    pub show_expanded_events: bool,
    /// `showRawUpdateDescription`: `rawUpdateDescription` (the oplog's `o`) for updates.
    pub show_raw_update_description: bool,
}

impl Spec {
    /// The token the stream resumes from (`resumeAfter` or `startAfter`).
    pub fn resume_token(&self) -> Option<&ResumeTokenData> {
        self.resume_after.as_ref().or(self.start_after.as_ref())
    }

    /// Parses the value of the `$changeStream` field, with mongod's IDL errors (type 14, bad
    /// enum value 2, unknown field 40415, duplicate field 40413) and its token errors. The
    /// conflicts between options are checked by [`scope`], in mongod's order.
    pub fn parse(stage: RawBsonRef<'_>) -> Result<Spec, CommandError> {
        let RawBsonRef::Document(doc) = stage else {
            return Err(CommandError::new(
                ErrorCode::Location(50808),
                "$changeStream stage expects a document as argument",
            ));
        };
        let mut spec = Spec::default();
        let mut seen: Vec<&str> = Vec::new();
        // mongod decodes the tokens after the IDL parse, in assertIsLegalSpecification.
        let mut resume_after = None;
        let mut start_after = None;
        for elem in doc {
            let (key, value) =
                elem.map_err(|e| CommandError::new(ErrorCode::InvalidBSON, e.to_string()))?;
            let key = key.as_str();
            let path = format!("$changeStream.{key}");
            if seen.contains(&key) {
                return Err(CommandError::new(
                    ErrorCode::IDLDuplicateField,
                    format!("BSON field '{path}' is a duplicate field"),
                ));
            }
            match key {
                "resumeAfter" => resume_after = Some(object(&path, value)?),
                "startAfter" => start_after = Some(object(&path, value)?),
                "startAtOperationTime" => match value {
                    RawBsonRef::Timestamp(ts) => spec.start_at_operation_time = Some(ts),
                    other => return Err(wrong_type(&path, other, "timestamp")),
                },
                "fullDocument" => {
                    spec.full_document = match string(&path, value)? {
                        "default" => FullDocument::Default,
                        "updateLookup" => FullDocument::UpdateLookup,
                        "whenAvailable" => FullDocument::WhenAvailable,
                        "required" => FullDocument::Required,
                        other => return Err(bad_enum(&path, other)),
                    };
                }
                "fullDocumentBeforeChange" => {
                    spec.full_document_before_change = match string(&path, value)? {
                        "off" => FullDocumentBeforeChange::Off,
                        "whenAvailable" => FullDocumentBeforeChange::WhenAvailable,
                        "required" => FullDocumentBeforeChange::Required,
                        other => return Err(bad_enum(&path, other)),
                    };
                }
                "allChangesForCluster" => spec.all_changes_for_cluster = boolean(&path, value)?,
                "showMigrationEvents" => spec.show_migration_events = boolean(&path, value)?,
                "showSystemEvents" => spec.show_system_events = boolean(&path, value)?,
                "allowToRunOnConfigDB" => spec.allow_to_run_on_config_db = boolean(&path, value)?,
                "allowToRunOnSystemNS" => spec.allow_to_run_on_system_ns = boolean(&path, value)?,
                "showExpandedEvents" => spec.show_expanded_events = boolean(&path, value)?,
                "showRawUpdateDescription" => {
                    spec.show_raw_update_description = boolean(&path, value)?;
                }
                // Internal (mongos → shards); Ebb always makes version 2 tokens.
                "$_generateV2ResumeTokens" => {
                    boolean(&path, value)?;
                }
                _ => return Err(CommandError::unknown_field(&path)),
            }
            seen.push(key);
        }
        spec.resume_after = resume_after.map(ResumeTokenData::parse).transpose()?;
        spec.start_after = start_after.map(ResumeTokenData::parse).transpose()?;
        Ok(spec)
    }
}

/// What a stream watches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    /// `db.coll.watch()`: one collection.
    Collection {
        /// Database name.
        db: String,
        /// Collection name.
        coll: String,
    },
    /// `db.watch()` (`{aggregate: 1}` on a database): its collections.
    Database {
        /// Database name.
        db: String,
    },
    /// `client.watch()` (`{aggregate: 1}` on `admin` with `allChangesForCluster`): every
    /// database but `admin`, `config` and `local`.
    Cluster,
}

/// The scope of a `$changeStream` run by `aggregate` on `db` (`coll` `None` for
/// `{aggregate: 1}`), with mongod's checks (`assertIsLegalSpecification`, after its replica-set
/// check 40573 which is the caller's): `allChangesForCluster` only on `admin` with
/// `{aggregate: 1}`, no stream on `admin` otherwise, nor on `local`, `config` (unless
/// `allowToRunOnConfigDB`) or a `system.*` collection (unless `allowToRunOnSystemNS`), at most
/// one of `resumeAfter`/`startAfter`/`startAtOperationTime`, no `resumeAfter` an invalidate, and a
/// collection stream's event token must carry a UUID.
pub fn scope(db: &str, coll: Option<&str>, spec: &Spec) -> Result<Scope, CommandError> {
    let ns = match coll {
        Some(c) => format!("{db}.{c}"),
        None => format!("{db}.$cmd.aggregate"),
    };
    if spec.all_changes_for_cluster && !(db == "admin" && coll.is_none()) {
        return Err(CommandError::new(
            ErrorCode::InvalidOptions,
            format!(
                "A $changeStream with 'allChangesForCluster:true' may only be opened on the \
                 'admin' database, and with no collection name; found {ns}"
            ),
        ));
    }
    let allowed_db = if db == "admin" {
        spec.all_changes_for_cluster
    } else {
        db != "local" && (db != "config" || spec.allow_to_run_on_config_db)
    };
    if !allowed_db {
        return Err(CommandError::new(
            ErrorCode::InvalidNamespace,
            format!("$changeStream may not be opened on the internal {db} database"),
        ));
    }
    if let Some(c) = coll
        && c.starts_with("system.")
        && !spec.allow_to_run_on_system_ns
    {
        return Err(CommandError::new(
            ErrorCode::InvalidNamespace,
            format!("$changeStream may not be opened on the internal {ns} collection"),
        ));
    }
    if spec.resume_after.is_some() && spec.start_after.is_some() {
        return Err(CommandError::new(
            ErrorCode::Location(50865),
            "Do not specify both 'resumeAfter' and 'startAfter' in a $changeStream stage",
        ));
    }
    let token = spec.resume_token();
    if spec.start_at_operation_time.is_some() && token.is_some() {
        return Err(CommandError::new(
            ErrorCode::Location(40674),
            "Only one type of resume option is allowed, but multiple were found",
        ));
    }
    if spec
        .resume_after
        .as_ref()
        .is_some_and(|t| t.from_invalidate)
    {
        return Err(CommandError::new(
            ErrorCode::InvalidResumeToken,
            "Attempting to resume a change stream using 'resumeAfter' is not allowed from an \
             invalidate notification",
        ));
    }
    if coll.is_some() && token.is_some_and(|t| t.uuid.is_none() && !t.is_high_water_mark()) {
        return Err(CommandError::new(
            ErrorCode::InvalidResumeToken,
            "Attempted to resume a single-collection stream, but the resume token does not \
             include a UUID",
        ));
    }
    Ok(match coll {
        Some(c) => Scope::Collection {
            db: db.to_owned(),
            coll: c.to_owned(),
        },
        None if db == "admin" => Scope::Cluster,
        None => Scope::Database { db: db.to_owned() },
    })
}

/// Stages a `$changeStream` pipeline may contain after the `$changeStream` (mongod's
/// `isAllowedInChangeStream`).
pub const ALLOWED_STAGES: &[&str] = &[
    "$match",
    "$project",
    "$addFields",
    "$set",
    "$unset",
    "$replaceRoot",
    "$replaceWith",
    "$redact",
    "$changeStreamSplitLargeEvent",
];

/// Name of the split stage.
pub const SPLIT_STAGE: &str = "$changeStreamSplitLargeEvent";

/// Checks a whole pipeline whose first stage is `$changeStream`, as mongod does once every
/// stage has parsed (the caller parses the other stages first, so an unknown stage answers
/// mongod's parse error before these): each stage allowed in a change stream (`IllegalOperation`
/// 20), a split event resumed only with the split stage (`ChangeStreamFatalError` 280), then
/// positions: `$changeStream` only first (40602), `$changeStreamSplitLargeEvent` only last
/// (7182802) and once (7183900), its argument `{}` (7182800). Returns whether the split stage is
/// present.
pub fn validate_pipeline(stages: &[&RawDocument], spec: &Spec) -> Result<bool, CommandError> {
    let names: Vec<&str> = stages
        .iter()
        .map(|s| {
            s.iter()
                .next()
                .and_then(Result::ok)
                .map_or("", |(k, _)| k.as_str())
        })
        .collect();
    // The split stage's own parse check comes first (createFromBson).
    for stage in stages {
        if let Some(Ok((k, v))) = stage.iter().next()
            && k.as_str() == SPLIT_STAGE
        {
            let empty = matches!(v, RawBsonRef::Document(d) if d.as_bytes().len() == 5);
            if !empty {
                return Err(CommandError::new(
                    ErrorCode::Location(7_182_800),
                    "$changeStreamSplitLargeEvent spec should be an empty object",
                ));
            }
        }
    }
    for name in &names {
        if *name != "$changeStream" && !ALLOWED_STAGES.contains(name) {
            return Err(CommandError::new(
                ErrorCode::IllegalOperation,
                format!("{name} is not permitted in a $changeStream pipeline"),
            ));
        }
    }
    let has_split = names.contains(&SPLIT_STAGE);
    if spec
        .resume_token()
        .is_some_and(|t| t.fragment_num.is_some())
        && !has_split
    {
        return Err(CommandError::new(
            ErrorCode::ChangeStreamFatalError,
            "To resume from a split event, the $changeStream pipeline must include a \
             $changeStreamSplitLargeEvent stage",
        ));
    }
    let mut split_seen = false;
    for (i, name) in names.iter().enumerate() {
        if *name == "$changeStream" && i != 0 {
            return Err(CommandError::new(
                ErrorCode::Location(40602),
                "$changeStream is only valid as the first stage in a pipeline",
            ));
        }
        if *name == SPLIT_STAGE {
            if i + 1 != names.len() {
                return Err(CommandError::new(
                    ErrorCode::Location(7_182_802),
                    "$changeStreamSplitLargeEvent must be the last stage in the pipeline",
                ));
            }
            if split_seen {
                return Err(CommandError::new(
                    ErrorCode::Location(7_183_900),
                    "$changeStreamSplitLargeEvent can only be used once in the pipeline",
                ));
            }
            split_seen = true;
        }
    }
    Ok(has_split)
}

fn wrong_type(path: &str, value: RawBsonRef<'_>, expected: &str) -> CommandError {
    CommandError::type_mismatch(format!(
        "BSON field '{path}' is the wrong type '{}', expected type '{expected}'",
        type_name(value.element_type())
    ))
}

fn bad_enum(path: &str, value: &str) -> CommandError {
    CommandError::bad_value(format!(
        "Enumeration value '{value}' for field '{path}' is not a valid value."
    ))
}

fn object<'a>(path: &str, value: RawBsonRef<'a>) -> Result<&'a RawDocument, CommandError> {
    match value {
        RawBsonRef::Document(d) => Ok(d),
        other => Err(wrong_type(path, other, "object")),
    }
}

fn string<'a>(path: &str, value: RawBsonRef<'a>) -> Result<&'a str, CommandError> {
    match value {
        RawBsonRef::String(s) => Ok(s),
        other => Err(wrong_type(path, other, "string")),
    }
}

fn boolean(path: &str, value: RawBsonRef<'_>) -> Result<bool, CommandError> {
    match value {
        RawBsonRef::Boolean(b) => Ok(b),
        other => Err(wrong_type(path, other, "bool")),
    }
}

#[cfg(test)]
mod tests {
    use bson::{RawBson, RawDocumentBuf, Uuid, rawdoc};

    use super::*;

    fn parse(doc: impl AsRef<RawDocument>) -> Result<Spec, CommandError> {
        Spec::parse(RawBsonRef::Document(doc.as_ref()))
    }

    fn event_token(uuid: Option<Uuid>) -> ResumeTokenData {
        ResumeTokenData::event(
            Timestamp {
                time: 5,
                increment: 1,
            },
            0,
            uuid,
            rawdoc! { "operationType": "insert", "documentKey": { "_id": 1 } },
        )
    }

    #[test]
    fn parses_every_option() {
        let token = event_token(Some(Uuid::from_bytes([3; 16])));
        let spec = parse(rawdoc! {
            "resumeAfter": token.to_document(),
            "fullDocument": "updateLookup",
            "fullDocumentBeforeChange": "whenAvailable",
            "showExpandedEvents": true,
            "showSystemEvents": true,
            "showMigrationEvents": false,
            "allChangesForCluster": false,
        })
        .unwrap();
        assert_eq!(spec.resume_after.as_ref(), Some(&token));
        assert_eq!(spec.resume_token(), Some(&token));
        assert_eq!(spec.full_document, FullDocument::UpdateLookup);
        assert_eq!(
            spec.full_document_before_change,
            FullDocumentBeforeChange::WhenAvailable
        );
        assert!(spec.show_expanded_events && spec.show_system_events);
        let spec = parse(rawdoc! {}).unwrap();
        assert_eq!(spec, Spec::default());
        let spec = parse(rawdoc! { "fullDocument": "required", "startAtOperationTime": Timestamp { time: 1, increment: 2 } }).unwrap();
        assert_eq!(spec.full_document, FullDocument::Required);
        assert_eq!(
            spec.start_at_operation_time,
            Some(Timestamp {
                time: 1,
                increment: 2
            })
        );
    }

    #[test]
    fn idl_errors() {
        let e = Spec::parse(RawBsonRef::Int32(1)).unwrap_err();
        assert_eq!(e.code.code(), 50808);
        assert_eq!(
            e.errmsg,
            "$changeStream stage expects a document as argument"
        );
        let e = parse(rawdoc! { "foo": 1 }).unwrap_err();
        assert_eq!(e.code, ErrorCode::IDLUnknownField);
        assert_eq!(
            e.errmsg,
            "BSON field '$changeStream.foo' is an unknown field."
        );
        let e = parse(rawdoc! { "fullDocument": 1 }).unwrap_err();
        assert_eq!(e.code, ErrorCode::TypeMismatch);
        assert_eq!(
            e.errmsg,
            "BSON field '$changeStream.fullDocument' is the wrong type 'int', expected type 'string'"
        );
        let e = parse(rawdoc! { "fullDocument": "always" }).unwrap_err();
        assert_eq!(e.code, ErrorCode::BadValue);
        assert_eq!(
            e.errmsg,
            "Enumeration value 'always' for field '$changeStream.fullDocument' is not a valid value."
        );
        let e = parse(rawdoc! { "fullDocumentBeforeChange": "updateLookup" }).unwrap_err();
        assert_eq!(e.code, ErrorCode::BadValue);
        let e = parse(rawdoc! { "showExpandedEvents": 1 }).unwrap_err();
        assert_eq!(
            e.errmsg,
            "BSON field '$changeStream.showExpandedEvents' is the wrong type 'int', expected type 'bool'"
        );
        let e =
            parse(rawdoc! { "startAtOperationTime": bson::DateTime::from_millis(0) }).unwrap_err();
        assert_eq!(
            e.errmsg,
            "BSON field '$changeStream.startAtOperationTime' is the wrong type 'date', expected type 'timestamp'"
        );
        let e = parse(rawdoc! { "resumeAfter": "abc" }).unwrap_err();
        assert_eq!(e.code, ErrorCode::TypeMismatch);
        let e = parse(rawdoc! { "resumeAfter": { "x": 1 } }).unwrap_err();
        assert_eq!(e.code.code(), 40647);
        let e = parse(rawdoc! { "startAfter": { "_data": "xyz" } }).unwrap_err();
        assert_eq!(e.code, ErrorCode::FailedToParse);
        let mut dup = RawDocumentBuf::new();
        dup.append(bson::raw::cstr!("showExpandedEvents"), true);
        dup.append(
            bson::raw::cstr!("showExpandedEvents"),
            RawBson::Boolean(false),
        );
        let e = parse(dup).unwrap_err();
        assert_eq!(e.code, ErrorCode::IDLDuplicateField);
    }

    #[test]
    fn scopes_and_their_errors() {
        let plain = Spec::default();
        assert_eq!(
            scope("test", Some("c"), &plain).unwrap(),
            Scope::Collection {
                db: "test".into(),
                coll: "c".into()
            }
        );
        assert_eq!(
            scope("test", None, &plain).unwrap(),
            Scope::Database { db: "test".into() }
        );
        let cluster = Spec {
            all_changes_for_cluster: true,
            ..Spec::default()
        };
        assert_eq!(scope("admin", None, &cluster).unwrap(), Scope::Cluster);
        let e = scope("test", None, &cluster).unwrap_err();
        assert_eq!(e.code, ErrorCode::InvalidOptions);
        assert_eq!(
            e.errmsg,
            "A $changeStream with 'allChangesForCluster:true' may only be opened on the 'admin' \
             database, and with no collection name; found test.$cmd.aggregate"
        );
        let e = scope("admin", Some("c"), &cluster).unwrap_err();
        assert!(e.errmsg.ends_with("found admin.c"), "{}", e.errmsg);
        let e = scope("admin", None, &plain).unwrap_err();
        assert_eq!(e.code, ErrorCode::InvalidNamespace);
        assert_eq!(
            e.errmsg,
            "$changeStream may not be opened on the internal admin database"
        );
        assert_eq!(
            scope("local", Some("x"), &plain).unwrap_err().errmsg,
            "$changeStream may not be opened on the internal local database"
        );
        assert!(scope("config", None, &plain).is_err());
        let e = scope("test", Some("system.views"), &plain).unwrap_err();
        assert_eq!(
            e.errmsg,
            "$changeStream may not be opened on the internal test.system.views collection"
        );
        let token = event_token(Some(Uuid::from_bytes([1; 16])));
        let both = Spec {
            resume_after: Some(token.clone()),
            start_after: Some(token.clone()),
            ..Spec::default()
        };
        assert_eq!(
            scope("test", Some("c"), &both).unwrap_err().code.code(),
            50865
        );
        let with_time = Spec {
            start_after: Some(token.clone()),
            start_at_operation_time: Some(Timestamp {
                time: 1,
                increment: 1,
            }),
            ..Spec::default()
        };
        assert_eq!(
            scope("test", Some("c"), &with_time)
                .unwrap_err()
                .code
                .code(),
            40674
        );
        let mut invalidate = token.clone();
        invalidate.from_invalidate = true;
        let resume_invalidate = Spec {
            resume_after: Some(invalidate.clone()),
            ..Spec::default()
        };
        let e = scope("test", Some("c"), &resume_invalidate).unwrap_err();
        assert_eq!(e.code, ErrorCode::InvalidResumeToken);
        assert_eq!(e.code.code(), 260);
        let start_after_invalidate = Spec {
            start_after: Some(invalidate),
            ..Spec::default()
        };
        assert!(scope("test", Some("c"), &start_after_invalidate).is_ok());
        let no_uuid = Spec {
            resume_after: Some(event_token(None)),
            ..Spec::default()
        };
        let e = scope("test", Some("c"), &no_uuid).unwrap_err();
        assert_eq!(
            e.errmsg,
            "Attempted to resume a single-collection stream, but the resume token does not \
             include a UUID"
        );
        assert!(scope("test", None, &no_uuid).is_ok());
    }

    #[test]
    fn pipeline_checks() {
        let cs = rawdoc! { "$changeStream": {} };
        let m = rawdoc! { "$match": { "operationType": "insert" } };
        let split = rawdoc! { "$changeStreamSplitLargeEvent": {} };
        let group = rawdoc! { "$group": { "_id": null } };
        let spec = Spec::default();
        assert!(!validate_pipeline(&[&cs, &m], &spec).unwrap());
        assert!(validate_pipeline(&[&cs, &m, &split], &spec).unwrap());
        let e = validate_pipeline(&[&cs, &group], &spec).unwrap_err();
        assert_eq!(e.code, ErrorCode::IllegalOperation);
        assert_eq!(
            e.errmsg,
            "$group is not permitted in a $changeStream pipeline"
        );
        let e = validate_pipeline(&[&cs, &m, &cs], &spec).unwrap_err();
        assert_eq!(e.code.code(), 40602);
        let e = validate_pipeline(&[&cs, &split, &m], &spec).unwrap_err();
        assert_eq!(e.code.code(), 7_182_802);
        assert_eq!(
            e.errmsg,
            "$changeStreamSplitLargeEvent must be the last stage in the pipeline"
        );
        let e = validate_pipeline(&[&cs, &split, &split], &spec).unwrap_err();
        assert_eq!(e.code.code(), 7_182_802);
        let bad_split = rawdoc! { "$changeStreamSplitLargeEvent": { "a": 1 } };
        assert_eq!(
            validate_pipeline(&[&cs, &bad_split], &spec)
                .unwrap_err()
                .code
                .code(),
            7_182_800
        );
        let mut token = event_token(Some(Uuid::from_bytes([1; 16])));
        token.fragment_num = Some(1);
        let resume_fragment = Spec {
            resume_after: Some(token),
            ..Spec::default()
        };
        let e = validate_pipeline(&[&cs, &m], &resume_fragment).unwrap_err();
        assert_eq!(e.code, ErrorCode::ChangeStreamFatalError);
        assert!(validate_pipeline(&[&cs, &split], &resume_fragment).is_ok());
    }
}
