//! What an Azure Cosmos DB for MongoDB (RU) account refuses, for the API version it serves.
//!
//! [`UNSUPPORTED`] is Microsoft's pages "Azure Cosmos DB for MongoDB (RU) 4.2 / 5.0 / 6.0 / 7.0
//! server version: supported features and syntax" as data: one row for every command, stage,
//! operator, expression, index kind and index property they mark "No" (or, for `$lookup` and
//! partial indexes, "Partial" with the rule stated beside it), with the versions whose page
//! marks it and the page's section. (The four pages, as read for this table, mark the same
//! features: a version's row list differs only if a page does.) [`check`] walks a request for
//! them, before the command runs, and answers what Cosmos DB answers.
//!
//! The answer is `115 CommandNotSupported`. Its wording comes from what users report of real
//! accounts, not from Microsoft's pages, which give no error text:
//! - a command: `Command collMod not supported.` (liquibase/liquibase-mongodb#235);
//! - an operator: `'text' is not supported`, for the `$text` query operator
//!   (automatiko-io/automatiko-engine#222) and for a text index in `createIndexes`
//!   (Squidex/squidex#278). The same form, the name without its `$`, is used for every
//!   operator, stage, expression, index kind and index option: a guess for all but `text`.
//!
//! A feature Ebb does not implement at all (`$where`, `$text`, `$jsonSchema`, `$meta`, the
//! legacy geo shapes, text/2d/hashed indexes, index collations, and the commands Ebb has no
//! handler for) keeps the answer it has without the profile (`NotImplemented`,
//! `CommandNotFound`…): its row says [`Ebb::Lacks`] and [`check`] passes it by.

use bson::{RawArray, RawBsonRef, RawDocument};

use crate::config::CosmosVersion;
use crate::dispatch::Request;
use crate::error::{CommandError, ErrorCode};

/// What a row names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A command, by its name (the body's first key).
    Command,
    /// An aggregation stage (`$graphLookup`).
    Stage,
    /// A field of `$lookup` (`let`, `pipeline`: the page's "uncorrelated subqueries").
    LookupField,
    /// A query operator (`$bitsAllSet`), in a filter or a `$match`.
    QueryOperator,
    /// An aggregation expression operator (`$meta`).
    Expression,
    /// A projection operator (`$meta` in a `find` projection).
    ProjectionOperator,
    /// An index kind: the value of a field in an index key (`"text"`, `"2d"`).
    IndexKind,
    /// An index option (`sparse`); `partialFilterExpression` is refused only without
    /// `unique: true` (the pages: "Partial is supported only for unique indexes").
    IndexOption,
}

/// Whether Ebb implements the feature outside the profile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ebb {
    /// Ebb runs it: the profile refuses it as Cosmos DB does.
    Implements,
    /// Ebb refuses it already (`NotImplemented`, `CommandNotFound`…): the profile leaves that
    /// answer as it is.
    Lacks,
}

/// One unsupported feature.
#[derive(Debug, Clone, Copy)]
pub struct Row {
    /// What it is.
    pub kind: Kind,
    /// Its name as a request spells it (`collMod`, `$graphLookup`, `sparse`, `2d`).
    pub name: &'static str,
    /// The API versions whose page marks it unsupported.
    pub versions: &'static [CosmosVersion],
    /// The section of the page that marks it (the page's anchor): see [`Row::page`].
    pub page: &'static str,
    /// Whether Ebb implements it.
    pub ebb: Ebb,
}

impl Row {
    /// The page (URL, with the section's anchor) that marks the row unsupported for `version`.
    pub fn page(&self, version: CosmosVersion) -> String {
        let file = match version {
            CosmosVersion::V4_2 => "42",
            CosmosVersion::V5_0 => "50",
            CosmosVersion::V6_0 => "60",
            CosmosVersion::V7_0 => "70",
        };
        format!(
            "https://learn.microsoft.com/en-us/azure/cosmos-db/mongodb/feature-support-{file}#{}",
            self.page
        )
    }

    /// The error Cosmos DB answers for it.
    pub fn error(&self) -> CommandError {
        let errmsg = match self.kind {
            Kind::Command => format!("Command {} not supported.", self.name),
            _ => format!("'{}' is not supported", self.name.trim_start_matches('$')),
        };
        CommandError::new(ErrorCode::CommandNotSupported, errmsg)
    }
}

/// Every API version the profile serves.
const ALL: &[CosmosVersion] = &[
    CosmosVersion::V4_2,
    CosmosVersion::V5_0,
    CosmosVersion::V6_0,
    CosmosVersion::V7_0,
];

const fn row(kind: Kind, name: &'static str, page: &'static str, ebb: Ebb) -> Row {
    Row {
        kind,
        name,
        versions: ALL,
        page,
        ebb,
    }
}

use Ebb::{Implements, Lacks};
use Kind::{
    Command, Expression, IndexKind, IndexOption, LookupField, ProjectionOperator, QueryOperator,
    Stage,
};

/// The features the pages mark unsupported (feature-support-42, -50, -60 and -70 on
/// learn.microsoft.com, as of their 2024–2025 revisions), in the pages' order.
pub static UNSUPPORTED: &[Row] = &[
    // Query and write operation commands.
    row(Command, "eval", "query-and-write-operation-commands", Lacks),
    row(
        Command,
        "getPrevError",
        "query-and-write-operation-commands",
        Lacks,
    ),
    row(
        Command,
        "parallelCollectionScan",
        "query-and-write-operation-commands",
        Lacks,
    ),
    row(
        Command,
        "resetError",
        "query-and-write-operation-commands",
        Lacks,
    ),
    // Administration commands.
    row(
        Command,
        "cloneCollectionAsCapped",
        "administration-commands",
        Lacks,
    ),
    row(Command, "collMod", "administration-commands", Implements),
    row(
        Command,
        "connectionStatus",
        "administration-commands",
        Implements,
    ),
    row(Command, "convertToCapped", "administration-commands", Lacks),
    row(Command, "copydb", "administration-commands", Lacks),
    row(Command, "killOp", "administration-commands", Lacks),
    row(
        Command,
        "renameCollection",
        "administration-commands",
        Implements,
    ),
    // Diagnostics commands (`connectionStatus` is listed in both sections; `profiler` is the
    // `profile` command).
    row(Command, "connPoolStats", "diagnostics-commands", Lacks),
    row(Command, "dataSize", "diagnostics-commands", Lacks),
    row(Command, "dbHash", "diagnostics-commands", Lacks),
    row(Command, "features", "diagnostics-commands", Lacks),
    row(Command, "listCommands", "diagnostics-commands", Implements),
    row(Command, "profile", "diagnostics-commands", Lacks),
    // `serverStatus` is marked unsupported too, but stays: issue #16 has the profile report
    // request units consumed and throttled there (`serverStatus.cosmos`).
    row(Command, "top", "diagnostics-commands", Lacks),
    // Aggregation commands.
    row(Command, "mapReduce", "aggregation-commands", Lacks),
    // Aggregation stages.
    row(Stage, "$bucket", "aggregation-stages", Implements),
    row(Stage, "$bucketAuto", "aggregation-stages", Implements),
    row(Stage, "$collStats", "aggregation-stages", Implements),
    row(Stage, "$currentOp", "aggregation-stages", Implements),
    row(Stage, "$graphLookup", "aggregation-stages", Implements),
    row(Stage, "$indexStats", "aggregation-stages", Implements),
    row(
        Stage,
        "$listLocalSessions",
        "aggregation-stages",
        Implements,
    ),
    row(Stage, "$listSessions", "aggregation-stages", Implements),
    // `$lookup` is "Partial": "If you attempt to use the $lookup operator with the let and
    // pipeline fields, an error message that indicates that let isn't supported appears."
    row(LookupField, "let", "aggregation-stages", Implements),
    row(LookupField, "pipeline", "aggregation-stages", Implements),
    // Text search operator (aggregation).
    row(Expression, "$meta", "text-search-operator", Lacks),
    // Indexes.
    row(IndexKind, "text", "indexes", Lacks),
    row(IndexKind, "2d", "indexes", Lacks),
    row(IndexKind, "hashed", "indexes", Lacks),
    // Index properties: "Case Insensitive" is an index with a collation; "Partial" is
    // supported only for unique indexes.
    row(
        IndexOption,
        "partialFilterExpression",
        "index-properties",
        Implements,
    ),
    row(IndexOption, "collation", "index-properties", Lacks),
    row(IndexOption, "sparse", "index-properties", Implements),
    // Evaluation query operators.
    row(
        QueryOperator,
        "$jsonSchema",
        "evaluation-query-operators",
        Lacks,
    ),
    row(QueryOperator, "$text", "evaluation-query-operators", Lacks),
    row(QueryOperator, "$where", "evaluation-query-operators", Lacks),
    // Projection operators.
    row(ProjectionOperator, "$meta", "projection-operators", Lacks),
    // The bit query operators, which the pages list under "Bitwise update operator".
    row(
        QueryOperator,
        "$bitsAllSet",
        "bitwise-update-operator",
        Implements,
    ),
    row(
        QueryOperator,
        "$bitsAnySet",
        "bitwise-update-operator",
        Implements,
    ),
    row(
        QueryOperator,
        "$bitsAllClear",
        "bitwise-update-operator",
        Implements,
    ),
    row(
        QueryOperator,
        "$bitsAnyClear",
        "bitwise-update-operator",
        Implements,
    ),
    // Geospatial operators.
    row(QueryOperator, "$center", "geospatial-operators", Lacks),
    row(
        QueryOperator,
        "$centerSphere",
        "geospatial-operators",
        Lacks,
    ),
    row(QueryOperator, "$box", "geospatial-operators", Lacks),
    row(QueryOperator, "$polygon", "geospatial-operators", Lacks),
];

/// How deep the walk follows nested documents and arrays; deeper parts are left to the
/// command's own parser (which bounds nesting as mongod does).
const MAX_DEPTH: usize = 200;

/// The row that refuses `name` of one of `kinds` for `version`, if any.
fn refused(version: CosmosVersion, kinds: &[Kind], name: &str) -> Option<&'static Row> {
    UNSUPPORTED.iter().find(|r| {
        r.ebb == Ebb::Implements
            && r.name == name
            && kinds.contains(&r.kind)
            && r.versions.contains(&version)
    })
}

fn refuse(version: CosmosVersion, kinds: &[Kind], name: &str) -> Result<(), CommandError> {
    match refused(version, kinds, name) {
        Some(row) => Err(row.error()),
        None => Ok(()),
    }
}

/// Refuses `req` with Cosmos DB's error when it asks for a feature the account's API version
/// does not support (see the module's documentation); `Ok` otherwise, including for requests
/// too malformed to walk, which the command's own parser answers.
pub fn check(version: CosmosVersion, req: &Request<'_>) -> Result<(), CommandError> {
    Walker { version }.command(req.name, req.body, Some(req), 0)
}

struct Walker {
    version: CosmosVersion,
}

impl Walker {
    /// A command document: its name, then the parts of it that hold filters, pipelines and
    /// index specs. `req` gives the OP_MSG document sequences of the outermost command.
    fn command(
        &self,
        name: &str,
        body: &RawDocument,
        req: Option<&Request<'_>>,
        depth: usize,
    ) -> Result<(), CommandError> {
        refuse(self.version, &[Kind::Command], name)?;
        let field = |key: &str| body.get(key).ok().flatten();
        match name {
            "find" => {
                self.operators(field("filter"), depth)?;
            }
            "count" | "distinct" => self.operators(field("query"), depth)?,
            "findAndModify" | "findandmodify" => {
                self.operators(field("query"), depth)?;
                if let Some(RawBsonRef::Array(pipeline)) = field("update") {
                    self.operators_in_array(pipeline, depth)?;
                }
            }
            "aggregate" | "create" => self.operators(field("pipeline"), depth)?,
            "delete" => {
                for statement in array_documents(body, req, "deletes") {
                    self.operators(statement.get("q").ok().flatten(), depth)?;
                }
            }
            "update" => {
                for statement in array_documents(body, req, "updates") {
                    self.operators(statement.get("q").ok().flatten(), depth)?;
                    // An update pipeline; an update document holds no refused operator, and
                    // its values are data.
                    if let Ok(Some(RawBsonRef::Array(pipeline))) = statement.get("u") {
                        self.operators_in_array(pipeline, depth)?;
                    }
                }
            }
            "createIndexes" => {
                for spec in array_documents(body, req, "indexes") {
                    self.index(spec, depth)?;
                }
            }
            "explain" => {
                if let Some(RawBsonRef::Document(inner)) = field("explain")
                    && let Some(Ok((inner_name, _))) = inner.into_iter().next()
                    && depth < MAX_DEPTH
                {
                    self.command(inner_name.as_str(), inner, None, depth + 1)?;
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// An index spec: its key's kinds and its options.
    fn index(&self, spec: &RawDocument, depth: usize) -> Result<(), CommandError> {
        if let Ok(Some(RawBsonRef::Document(key))) = spec.get("key") {
            for (_, kind) in key.into_iter().flatten() {
                if let RawBsonRef::String(kind) = kind {
                    refuse(self.version, &[Kind::IndexKind], kind)?;
                }
            }
        }
        let unique = spec.get("unique").ok().flatten().is_some_and(truthy);
        for (option, value) in spec.into_iter().flatten() {
            let option = option.as_str();
            let applies = match option {
                "partialFilterExpression" => !unique,
                // `sparse: false` asks for nothing Cosmos DB lacks.
                "sparse" => truthy(value),
                _ => true,
            };
            if applies {
                refuse(self.version, &[Kind::IndexOption], option)?;
            }
        }
        self.operators(spec.get("partialFilterExpression").ok().flatten(), depth)
    }

    /// Any part of a filter or pipeline: every `$`-name in it, at any depth.
    fn operators(&self, value: Option<RawBsonRef<'_>>, depth: usize) -> Result<(), CommandError> {
        match value {
            Some(RawBsonRef::Document(doc)) => self.operators_in_document(doc, depth),
            Some(RawBsonRef::Array(items)) => self.operators_in_array(items, depth),
            _ => Ok(()),
        }
    }

    fn operators_in_array(&self, items: &RawArray, depth: usize) -> Result<(), CommandError> {
        if depth >= MAX_DEPTH {
            return Ok(());
        }
        for item in items.into_iter().flatten() {
            self.operators(Some(item), depth + 1)?;
        }
        Ok(())
    }

    fn operators_in_document(&self, doc: &RawDocument, depth: usize) -> Result<(), CommandError> {
        if depth >= MAX_DEPTH {
            return Ok(());
        }
        for (key, value) in doc.into_iter().flatten() {
            let key = key.as_str();
            if key.starts_with('$') {
                refuse(
                    self.version,
                    &[Kind::Stage, Kind::QueryOperator, Kind::Expression],
                    key,
                )?;
                match (key, value) {
                    // A literal's value is data, not operators.
                    ("$literal", _) => continue,
                    ("$lookup", RawBsonRef::Document(lookup)) => {
                        for (field, _) in lookup.into_iter().flatten() {
                            refuse(self.version, &[Kind::LookupField], field.as_str())?;
                        }
                    }
                    _ => {}
                }
            }
            self.operators(Some(value), depth + 1)?;
        }
        Ok(())
    }
}

/// The documents of the array field `key` of a command: the body's array, or the OP_MSG
/// document sequence standing for it. Anything else yields nothing (the command's parser
/// answers it).
fn array_documents<'a>(
    body: &'a RawDocument,
    req: Option<&'a Request<'_>>,
    key: &str,
) -> Vec<&'a RawDocument> {
    let mut out = Vec::new();
    if let Ok(Some(RawBsonRef::Array(items))) = body.get(key) {
        out.extend(items.into_iter().filter_map(|item| match item {
            Ok(RawBsonRef::Document(doc)) => Some(doc),
            _ => None,
        }));
    }
    if let Some(req) = req {
        for sequence in req.sequences.iter().filter(|s| s.identifier == key) {
            out.extend(sequence.documents.iter().map(|d| &**d));
        }
    }
    out
}

/// Whether an option's value is true as mongod reads a boolean option (`trueValue()`).
fn truthy(value: RawBsonRef<'_>) -> bool {
    match value {
        RawBsonRef::Boolean(b) => b,
        RawBsonRef::Int32(n) => n != 0,
        RawBsonRef::Int64(n) => n != 0,
        RawBsonRef::Double(d) => d != 0.0,
        RawBsonRef::Null | RawBsonRef::Undefined => false,
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use bson::{RawDocumentBuf, rawdoc};
    use ebb_wire::DocumentSequence;

    use super::*;

    fn run(version: CosmosVersion, body: &RawDocumentBuf) -> Result<(), CommandError> {
        run_with(version, body, &[])
    }

    fn run_with(
        version: CosmosVersion,
        body: &RawDocumentBuf,
        sequences: &[DocumentSequence],
    ) -> Result<(), CommandError> {
        let name = body.into_iter().next().unwrap().unwrap().0.as_str();
        let req = Request {
            name,
            db: "test",
            body,
            sequences,
        };
        check(version, &req)
    }

    fn refused_with(body: &RawDocumentBuf, errmsg: &str) {
        for &version in ALL {
            let err = run(version, body).expect_err(&format!("{version:?} refuses {body:?}"));
            assert_eq!(err.code, ErrorCode::CommandNotSupported, "{body:?}");
            assert_eq!(err.errmsg, errmsg, "{body:?}");
        }
    }

    fn accepted(body: &RawDocumentBuf) {
        for &version in ALL {
            assert!(run(version, body).is_ok(), "{version:?} accepts {body:?}");
        }
    }

    #[test]
    fn rows_are_unique_and_cite_every_version() {
        for (i, a) in UNSUPPORTED.iter().enumerate() {
            assert!(!a.versions.is_empty());
            assert!(!a.page.is_empty() && !a.page.contains('#'), "{a:?}");
            for b in &UNSUPPORTED[i + 1..] {
                assert!(a.kind != b.kind || a.name != b.name, "duplicate row {a:?}");
            }
        }
        let row = refused(CosmosVersion::V4_2, &[Kind::Command], "collMod").unwrap();
        assert_eq!(
            row.page(CosmosVersion::V4_2),
            "https://learn.microsoft.com/en-us/azure/cosmos-db/mongodb/feature-support-42\
             #administration-commands"
        );
    }

    #[test]
    fn command_rows_say_whether_ebb_has_the_command() {
        for row in UNSUPPORTED.iter().filter(|r| r.kind == Kind::Command) {
            let has = crate::commands::lookup(row.name).is_some();
            assert_eq!(row.ebb == Ebb::Implements, has, "{row:?}");
        }
    }

    #[test]
    fn commands() {
        refused_with(
            &rawdoc! {"collMod": "c", "validator": {}},
            "Command collMod not supported.",
        );
        refused_with(
            &rawdoc! {"renameCollection": "a.b", "to": "a.c"},
            "Command renameCollection not supported.",
        );
        // Kept for its request-unit section, though the pages mark it unsupported.
        accepted(&rawdoc! {"serverStatus": 1});
        // Commands Ebb has no handler for keep their CommandNotFound.
        accepted(&rawdoc! {"mapReduce": "c"});
        accepted(&rawdoc! {"eval": "1"});
        accepted(&rawdoc! {"find": "c", "filter": {"a": {"$regex": "^x"}}});
        accepted(&rawdoc! {"hello": 1});
    }

    #[test]
    fn stages_anywhere_in_a_pipeline() {
        let graph = rawdoc! {"$graphLookup": {"from": "c", "startWith": "$a",
        "connectFromField": "a", "connectToField": "b", "as": "g"}};
        refused_with(
            &rawdoc! {"aggregate": "c", "pipeline": [graph.clone()], "cursor": {}},
            "'graphLookup' is not supported",
        );
        refused_with(
            &rawdoc! {"aggregate": "c", "pipeline": [{"$facet": {"x": [graph]}}], "cursor": {}},
            "'graphLookup' is not supported",
        );
        refused_with(
            &rawdoc! {"aggregate": "c", "cursor": {}, "pipeline": [
                {"$unionWith": {"coll": "d", "pipeline": [{"$bucketAuto": {"groupBy": "$a", "buckets": 2}}]}}
            ]},
            "'bucketAuto' is not supported",
        );
        refused_with(
            &rawdoc! {"explain": {"aggregate": "c", "pipeline": [{"$collStats": {}}], "cursor": {}}},
            "'collStats' is not supported",
        );
        refused_with(
            &rawdoc! {"create": "v", "viewOn": "c", "pipeline": [{"$bucket": {"groupBy": "$a", "boundaries": [0, 1]}}]},
            "'bucket' is not supported",
        );
        accepted(&rawdoc! {"aggregate": "c", "cursor": {}, "pipeline": [
            {"$match": {"a": 1}}, {"$group": {"_id": "$a", "n": {"$sum": 1}}},
            {"$lookup": {"from": "d", "localField": "a", "foreignField": "b", "as": "j"}},
            {"$project": {"x": {"$literal": {"$graphLookup": 1}}}},
        ]});
    }

    #[test]
    fn lookup_subqueries() {
        refused_with(
            &rawdoc! {"aggregate": "c", "cursor": {}, "pipeline": [
                {"$lookup": {"from": "d", "let": {"x": "$a"}, "pipeline": [], "as": "j"}}
            ]},
            "'let' is not supported",
        );
        refused_with(
            &rawdoc! {"aggregate": "c", "cursor": {}, "pipeline": [
                {"$lookup": {"from": "d", "pipeline": [{"$match": {}}], "as": "j"}}
            ]},
            "'pipeline' is not supported",
        );
    }

    #[test]
    fn query_operators_in_every_filter() {
        let filter = rawdoc! {"$or": [{"a": 1}, {"b": {"$bitsAllSet": 5}}]};
        let msg = "'bitsAllSet' is not supported";
        refused_with(&rawdoc! {"find": "c", "filter": filter.clone()}, msg);
        refused_with(&rawdoc! {"count": "c", "query": filter.clone()}, msg);
        refused_with(
            &rawdoc! {"distinct": "c", "key": "a", "query": filter.clone()},
            msg,
        );
        refused_with(
            &rawdoc! {"findAndModify": "c", "query": filter.clone(), "remove": true},
            msg,
        );
        refused_with(
            &rawdoc! {"delete": "c", "deletes": [{"q": filter.clone(), "limit": 0}]},
            msg,
        );
        refused_with(
            &rawdoc! {"update": "c", "updates": [{"q": filter.clone(), "u": {"$set": {"x": 1}}}]},
            msg,
        );
        refused_with(
            &rawdoc! {"aggregate": "c", "pipeline": [{"$match": filter.clone()}], "cursor": {}},
            msg,
        );
        refused_with(
            &rawdoc! {"find": "c", "filter": {"a": {"$elemMatch": {"$bitsAnyClear": [1]}}}},
            "'bitsAnyClear' is not supported",
        );
        // Not implemented by Ebb: its own answer stays.
        accepted(&rawdoc! {"find": "c", "filter": {"$where": "true"}});
        accepted(&rawdoc! {"find": "c", "filter": {"$text": {"$search": "x"}}});
        // Update documents are data; insert documents are not walked.
        accepted(
            &rawdoc! {"update": "c", "updates": [{"q": {}, "u": {"$set": {"a.$bitsAllSet": 1}}}]},
        );
        accepted(&rawdoc! {"insert": "c", "documents": [{"a": {"$bitsAllSet": 1}}]});
    }

    #[test]
    fn document_sequences_are_walked() {
        let body = rawdoc! {"delete": "c"};
        let sequences = [DocumentSequence {
            identifier: "deletes".into(),
            documents: vec![rawdoc! {"q": {"a": {"$bitsAnySet": 1}}, "limit": 0}],
        }];
        let err = run_with(CosmosVersion::V7_0, &body, &sequences).unwrap_err();
        assert_eq!(err.errmsg, "'bitsAnySet' is not supported");
    }

    #[test]
    fn index_specs() {
        let create = |spec: RawDocumentBuf| rawdoc! {"createIndexes": "c", "indexes": [spec]};
        refused_with(
            &create(rawdoc! {"key": {"a": 1}, "name": "a_1", "sparse": true}),
            "'sparse' is not supported",
        );
        refused_with(
            &create(rawdoc! {"key": {"a": 1}, "name": "a_1",
            "partialFilterExpression": {"a": {"$exists": true}}}),
            "'partialFilterExpression' is not supported",
        );
        refused_with(
            &create(rawdoc! {"key": {"a": 1}, "name": "a_1", "unique": true,
            "partialFilterExpression": {"a": {"$bitsAllClear": 1}}}),
            "'bitsAllClear' is not supported",
        );
        accepted(&create(
            rawdoc! {"key": {"a": 1}, "name": "a_1", "unique": true,
            "partialFilterExpression": {"a": {"$exists": true}}},
        ));
        accepted(&create(
            rawdoc! {"key": {"a": 1}, "name": "a_1", "sparse": false},
        ));
        accepted(&create(
            rawdoc! {"key": {"_ts": 1}, "name": "_ts_1", "expireAfterSeconds": 10},
        ));
        // Not implemented by Ebb: NotImplemented stays.
        accepted(&create(rawdoc! {"key": {"a": "text"}, "name": "a_text"}));
        accepted(&create(rawdoc! {"key": {"a": "2d"}, "name": "a_2d"}));
    }

    #[test]
    fn deep_nesting_is_bounded() {
        let mut filter = rawdoc! {"a": {"$bitsAllSet": 1}};
        for _ in 0..(MAX_DEPTH + 10) {
            filter = rawdoc! {"$and": [filter]};
        }
        // Past the bound the walk stops: no refusal, no overflow.
        assert!(
            run(
                CosmosVersion::V7_0,
                &rawdoc! {"find": "c", "filter": filter}
            )
            .is_ok()
        );
    }
}
