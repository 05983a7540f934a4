//! The one table of authorization: what each command needs of its caller ([`required`]),
//! derived from the request as each command's `checkAuthForOperation` /
//! `doCheckAuthorization` does in mongod.

#[allow(
    clippy::wildcard_imports,
    reason = "the table is written in its parent's vocabulary"
)]
use super::*;

/// The commands mongod runs for a caller that is not logged in (`requiresAuth()` false).
pub const OPEN_COMMANDS: &[&str] = &[
    "authenticate",
    "buildInfo",
    "buildinfo",
    "configureFailPoint",
    "connectionStatus",
    "hello",
    "isMaster",
    "ismaster",
    "listCommands",
    "logout",
    "ping",
    "saslContinue",
    "saslStart",
];

/// What `command` (run on database `db` with document `body`) needs of its caller: the one
/// table of authorization. A command not in the table answers `CommandNotFound`.
///
/// `body` is the command document as dispatch checked it (its namespace fields valid).
pub fn required(command: &str, db: &str, body: &RawDocument) -> Result<Required, CommandError> {
    required_at(command, db, body, 0)
}

fn required_at(
    command: &str,
    db: &str,
    body: &RawDocument,
    depth: usize,
) -> Result<Required, CommandError> {
    use ActionType as A;
    let db_res = || Resource::database(db);
    let on_ns = |actions: &[ActionType]| -> Result<Required, CommandError> {
        Ok(Required::rule(Rule::has(namespace(db, body)?, actions)))
    };
    let on_db = |actions: &[ActionType]| Ok(Required::rule(Rule::has(db_res(), actions)));
    let on_cluster =
        |actions: &[ActionType]| Ok(Required::rule(Rule::has(Resource::Cluster, actions)));
    let bypass = truthy(body, "bypassDocumentValidation");
    match command {
        c if OPEN_COMMANDS.contains(&c) => Ok(Required::open()),

        // Reads.
        "find" | "count" | "distinct" => on_ns(&[A::Find]),
        "aggregate" => Ok(Required::rule(aggregate(db, body, bypass, depth)?)),
        // mongod checks only that a user is logged in here; the cursor's owner and its
        // privileges are checked once the cursor is found (after `CursorNotFound`), each with
        // its own message: [`cursor_not_owned`], [`get_more_not_authorized`].
        "getMore" => Ok(Required::rule(Rule::All(vec![
            Rule::Authenticated,
            Rule::OwnsCursors,
            Rule::HoldsCursorPrivileges,
        ]))),
        "killCursors" => {
            let ns = namespace(db, body)?;
            let target = match &ns {
                Resource::Namespace { collection, .. } if collection == "$cmd.listCollections" => {
                    db_res()
                }
                _ => ns,
            };
            Ok(Required::rule(Rule::Any(vec![
                Rule::has(Resource::Cluster, &[A::KillAnyCursor]),
                Rule::OwnsCursors,
                Rule::has(target, &[A::KillAnyCursor]),
            ])))
        }
        "explain" => {
            let Ok(Some(RawBsonRef::Document(inner))) = body.get("explain") else {
                return Ok(Required::authenticated());
            };
            let Some(Ok((name, _))) = inner.iter().next() else {
                return Ok(Required::authenticated());
            };
            // The commands Ebb explains; any other answers as Ebb's `explain` answers it
            // (which mongod does before its authorization check, when it parses the request).
            if depth > 0
                || !matches!(
                    name.as_str(),
                    "find"
                        | "count"
                        | "distinct"
                        | "aggregate"
                        | "update"
                        | "delete"
                        | "findAndModify"
                        | "findandmodify"
                )
            {
                return Err(CommandError::new(
                    ErrorCode::CommandNotFound,
                    format!("Explain failed due to unknown command: {name}"),
                ));
            }
            let inner_required = required_at(name.as_str(), db, inner, depth + 1)?;
            Ok(Required {
                requires_auth: true,
                ..inner_required
            })
        }

        // Writes: every statement of one namespace, so the union of their actions.
        "insert" => on_ns(&with_bypass(&[A::Insert], bypass)),
        "delete" => on_ns(&[A::Remove]),
        "update" => {
            let mut actions = vec![A::Update];
            if statements(body, "updates").any(|s| truthy(s, "upsert")) {
                actions.push(A::Insert);
            }
            on_ns(&with_bypass(&actions, bypass))
        }
        "findAndModify" | "findandmodify" => {
            let mut actions = vec![A::Find];
            if present(body, "update") {
                actions.push(A::Update);
            }
            if truthy(body, "upsert") {
                actions.push(A::Insert);
            }
            if truthy(body, "remove") {
                actions.push(A::Remove);
            }
            on_ns(&with_bypass(&actions, bypass))
        }

        // Collections and indexes.
        "create" => create(db, body),
        "drop" => on_ns(&[A::DropCollection]),
        "dropDatabase" => on_db(&[A::DropDatabase]),
        "createIndexes" => on_ns(&[A::CreateIndex]),
        "dropIndexes" | "deleteIndexes" => on_ns(&[A::DropIndex]),
        "listIndexes" => on_ns(&[A::ListIndexes]),
        "listCollections" => {
            let mut ways = vec![Rule::has(db_res(), &[A::ListCollections])];
            if truthy(body, "authorizedCollections") && truthy(body, "nameOnly") {
                ways.push(Rule::AnyActionInDb(db.to_owned()));
            }
            Ok(Required::rule(Rule::Any(ways)))
        }
        "listDatabases" => {
            // Any user may list the databases it can act on; `authorizedDatabases: false`
            // asks for all of them, which needs `listDatabases` on the cluster
            // ("Insufficient permissions to list all databases", checked when it runs).
            Ok(Required::authenticated())
        }
        "collMod" => coll_mod(db, body),
        "renameCollection" => rename_collection(body),
        "collStats" => on_ns(&[A::CollStats]),
        "dbStats" | "dbstats" => on_db(&[A::DbStats]),
        "validate" => on_ns(&[A::Validate]),
        "compact" => on_ns(&[A::Compact]),

        // Sessions and transactions: any logged-in user, for its own sessions.
        "startSession" | "endSessions" | "refreshSessions" | "killSessions"
        | "commitTransaction" | "abortTransaction" => Ok(Required::authenticated()),
        // (`killAllSessionsByPattern` with `users` or `roles` in a pattern also needs
        // `impersonate` on the cluster, checked when it runs: "Not authorized to impersonate in
        // killAllSessionsByPattern".)
        "killAllSessions" | "killAllSessionsByPattern" => on_cluster(&[A::KillAnySession]),

        // Server administration and diagnostics.
        "serverStatus" => on_cluster(&[A::ServerStatus]),
        "hostInfo" => on_cluster(&[A::HostInfo]),
        "getCmdLineOpts" => on_cluster(&[A::GetCmdLineOpts]),
        "getLog" => on_cluster(&[A::GetLog]),
        "getParameter" => on_cluster(&[A::GetParameter]),
        "setParameter" => on_cluster(&[A::SetParameter]),
        "shutdown" => on_cluster(&[A::Shutdown]),
        "rotateCertificates" => on_cluster(&[A::RotateCertificates]),
        "currentOp" => {
            if truthy(body, "$ownOps") {
                Ok(Required::authenticated())
            } else {
                on_cluster(&[A::Inprog])
            }
        }
        "killOp" => on_cluster(&[A::Killop]),
        "top" => on_cluster(&[A::Top]),
        "replSetGetStatus" => on_cluster(&[A::ReplSetGetStatus]),
        "replSetGetConfig" => on_cluster(&[A::ReplSetGetConfig]),
        "replSetResizeOplog" => on_cluster(&[A::ReplSetResizeOplog]),
        "replSetInitiate" | "replSetReconfig" => on_cluster(&[A::ReplSetConfigure]),
        // Any logged-in user ("No explicit privileges required").
        "whatsmyuri" => Ok(Required::authenticated()),
        // Ebb's test-only clock, enabled like `configureFailPoint` by a command-line flag.
        "ebbAdvanceClock" => Ok(Required::authenticated()),
        // Azure Cosmos DB's extension commands (`--profile cosmos` only): any logged-in user
        // (the profile's one account user).
        "customAction" | "getLastRequestStatistics" => Ok(Required::authenticated()),

        // Users and roles (`user_management_commands_common.cpp`).
        "createUser" => Ok(Required::rule(
            Rule::has(db_res(), &[A::CreateUser])
                .and(grant_roles(db, body, "roles")?)
                .and(restrictions(db, body)),
        )),
        "updateUser" => update_user(db, body),
        "dropUser" | "dropAllUsersFromDatabase" => on_db(&[A::DropUser]),
        "usersInfo" => Ok(users_info(db, body)),
        "grantRolesToUser" | "grantRolesToRole" => {
            Ok(Required::rule(grant_roles(db, body, "roles")?))
        }
        "revokeRolesFromUser" | "revokeRolesFromRole" => {
            Ok(Required::rule(revoke_roles(db, body, "roles")?))
        }
        "createRole" => {
            // `isAuthorizedToCreateRole`: createRole on the database, or under the localhost
            // exception a role the user already holds (granted by an external mechanism).
            let mut ways = vec![Rule::has(db_res(), &[A::CreateRole])];
            if let Some(Ok((_, RawBsonRef::String(name)))) = body.iter().next() {
                ways.push(Rule::All(vec![
                    Rule::LocalhostException,
                    Rule::HasRole(RoleName::new(name, db)),
                ]));
            }
            Ok(Required::rule(
                Rule::Any(ways)
                    .and(grant_roles(db, body, "roles")?)
                    .and(grant_privileges(body, A::GrantRole)?)
                    .and(restrictions(db, body)),
            ))
        }
        "updateRole" => Ok(Required::rule(
            Rule::has(Resource::AnyNormal, &[A::RevokeRole])
                .and(grant_roles(db, body, "roles")?)
                .and(grant_privileges(body, A::GrantRole)?)
                .and(restrictions(db, body)),
        )),
        "dropRole" | "dropAllRolesFromDatabase" => on_db(&[A::DropRole]),
        "grantPrivilegesToRole" => Ok(Required::rule(grant_privileges(body, A::GrantRole)?)),
        "revokePrivilegesFromRole" => Ok(Required::rule(grant_privileges(body, A::RevokeRole)?)),
        "rolesInfo" => roles_info(db, body),

        other => Err(CommandError::command_not_found(other)),
    }
}

/// `actions`, plus `bypassDocumentValidation` when the request sets it.
fn with_bypass(actions: &[ActionType], bypass: bool) -> Vec<ActionType> {
    let mut out = actions.to_vec();
    if bypass {
        out.push(ActionType::BypassDocumentValidation);
    }
    out
}

/// Whether `field` is present and true by BSON truthiness (mongod's `trueValue()`).
fn truthy(doc: &RawDocument, field: &str) -> bool {
    matches!(doc.get(field), Ok(Some(v)) if crate::query::true_value(v))
}

/// Whether `field` is present and not null.
fn present(doc: &RawDocument, field: &str) -> bool {
    matches!(doc.get(field), Ok(Some(v)) if !matches!(v, RawBsonRef::Null | RawBsonRef::Undefined))
}

/// The documents of array `field` (the statements of a write command).
fn statements<'a>(body: &'a RawDocument, field: &str) -> impl Iterator<Item = &'a RawDocument> {
    let array = match body.get(field) {
        Ok(Some(RawBsonRef::Array(a))) => Some(a),
        _ => None,
    };
    array.into_iter().flatten().filter_map(|v| match v {
        Ok(RawBsonRef::Document(d)) => Some(d),
        _ => None,
    })
}

/// The namespace the command's first field names in `db`, as mongod's
/// `parseNsCollectionRequired` reads it.
fn namespace(db: &str, body: &RawDocument) -> Result<Resource, CommandError> {
    match body.iter().next() {
        Some(Ok((_, RawBsonRef::String(coll)))) => Ok(Resource::namespace(db, coll)),
        Some(Ok((_, other))) => Err(CommandError::new(
            ErrorCode::InvalidNamespace,
            format!(
                "collection name has invalid type {}",
                crate::commands::type_name(other.element_type())
            ),
        )),
        _ => Err(CommandError::new(
            ErrorCode::InvalidNamespace,
            "collection name has invalid type missing",
        )),
    }
}

/// A full `db.collection` name (`renameCollection`'s fields).
fn full_namespace(body: &RawDocument, field: &str) -> Result<Resource, CommandError> {
    match body.get(field) {
        Ok(Some(RawBsonRef::String(ns))) => match ns.split_once('.') {
            Some((db, coll)) if !db.is_empty() && !coll.is_empty() => {
                Ok(Resource::namespace(db, coll))
            }
            _ => Err(CommandError::new(
                ErrorCode::InvalidNamespace,
                format!("Invalid namespace specified '{ns}'"),
            )),
        },
        _ => Err(CommandError::new(
            ErrorCode::InvalidNamespace,
            format!("Invalid namespace specified for '{field}'"),
        )),
    }
}

/// `create` (`checkAuthForCreate`): `createCollection` or `insert` on the namespace; a capped
/// collection also needs `convertToCapped`; a view needs `createCollection` itself, and (when
/// the caller may read the view) what its pipeline needs on what it is a view on.
fn create(db: &str, body: &RawDocument) -> Result<Required, CommandError> {
    use ActionType as A;
    let ns = namespace(db, body)?;
    let mut rule = Rule::Allow;
    if truthy(body, "capped") {
        rule = rule.and(Rule::has(ns.clone(), &[A::ConvertToCapped]));
    }
    if let Ok(Some(RawBsonRef::String(view_on))) = body.get("viewOn") {
        rule = rule
            .and(Rule::has(ns.clone(), &[A::CreateCollection]))
            .and(view_pipeline(db, &ns, view_on, body)?);
    } else {
        rule = rule.and(Rule::Any(vec![
            Rule::has(ns.clone(), &[A::CreateCollection]),
            Rule::has(ns, &[A::Insert]),
        ]));
    }
    Ok(Required::rule(rule))
}

/// `collMod` (`checkAuthForCollMod`): `collMod` on the namespace, and for a view's new
/// definition the same as `create` asks of a view.
fn coll_mod(db: &str, body: &RawDocument) -> Result<Required, CommandError> {
    let ns = namespace(db, body)?;
    let has_view_on = present(body, "viewOn");
    if has_view_on != present(body, "pipeline") {
        return Err(CommandError::new(
            ErrorCode::InvalidOptions,
            "Must specify both 'viewOn' and 'pipeline' when modifying a view and auth is enabled",
        ));
    }
    let mut rule = Rule::has(ns.clone(), &[ActionType::CollMod]);
    if let Ok(Some(RawBsonRef::String(view_on))) = body.get("viewOn") {
        rule = rule.and(view_pipeline(db, &ns, view_on, body)?);
    }
    Ok(Required::rule(rule))
}

/// mongod's `checkAuthForCreateOrModifyView`: a caller who cannot `find` on the view may define
/// it freely; one who can must hold what the view's aggregation needs.
fn view_pipeline(
    db: &str,
    view: &Resource,
    view_on: &str,
    body: &RawDocument,
) -> Result<Rule, CommandError> {
    let stages = pipeline_stages(body, "pipeline");
    let needs = pipeline_rule(db, view_on, &stages, false, 0)?;
    Ok(Rule::Any(vec![
        Rule::Lacks(Privilege::new(view.clone(), &[ActionType::Find])),
        needs,
    ]))
}

/// `renameCollection` (`rename_collection_common.cpp`).
fn rename_collection(body: &RawDocument) -> Result<Required, CommandError> {
    use ActionType as A;
    let source = full_namespace(body, "renameCollection")?;
    let target = full_namespace(body, "to")?;
    let drop_target = truthy(body, "dropTarget");
    let mut ways = Vec::new();
    if let (
        Resource::Namespace {
            db: sdb,
            collection: scoll,
        },
        Resource::Namespace {
            db: tdb,
            collection: tcoll,
        },
    ) = (&source, &target)
        && sdb == tdb
        && is_normal_collection(sdb, scoll)
        && is_normal_collection(tdb, tcoll)
    {
        // Within a database: renameCollectionSameDB, and either read access to the source or
        // none to the target (so a rename cannot expose data).
        let mut same_db = vec![Rule::has(
            Resource::database(sdb),
            &[A::RenameCollectionSameDb],
        )];
        if drop_target {
            same_db.push(Rule::has(target.clone(), &[A::DropCollection]));
        }
        same_db.push(Rule::Any(vec![
            Rule::has(source.clone(), &[A::Find]),
            Rule::Lacks(Privilege::new(target.clone(), &[A::Find])),
        ]));
        ways.push(Rule::All(same_db));
    }
    let mut target_actions = vec![A::Insert, A::CreateIndex];
    if drop_target {
        target_actions.push(A::DropCollection);
    }
    ways.push(Rule::All(vec![
        Rule::has(source, &[A::Find, A::DropCollection]),
        Rule::has(target, &target_actions),
    ]));
    Ok(Required::rule(Rule::Any(ways)))
}

/// The documents of pipeline array `field`.
fn pipeline_stages<'a>(body: &'a RawDocument, field: &str) -> Vec<&'a RawDocument> {
    statements(body, field).collect()
}

/// The stages that produce documents themselves: a pipeline that starts with one does not read
/// its collection (mongod's `isInitialSource`).
const INITIAL_SOURCES: &[&str] = &[
    "$changeStream",
    "$collStats",
    "$currentOp",
    "$documents",
    "$indexStats",
    "$listCatalog",
    "$listLocalSessions",
    "$listSearchIndexes",
    "$listSessions",
    "$planCacheStats",
    "$queue",
];

fn stage_name(stage: &RawDocument) -> Option<&str> {
    match stage.iter().next() {
        Some(Ok((name, _))) => Some(name.as_str()),
        _ => None,
    }
}

fn starts_with_initial_source(stages: &[&RawDocument]) -> bool {
    stages
        .first()
        .and_then(|s| stage_name(s))
        .is_some_and(|n| INITIAL_SOURCES.contains(&n))
}

/// `aggregate` (`getPrivilegesForAggregate`): `find` on the collection unless the pipeline
/// starts with a stage that makes its own documents, then each stage's own needs.
fn aggregate(
    db: &str,
    body: &RawDocument,
    bypass: bool,
    depth: usize,
) -> Result<Rule, CommandError> {
    let coll = match body.iter().next() {
        Some(Ok((_, RawBsonRef::String(c)))) => c.to_owned(),
        // `{aggregate: 1}` runs on the database's `$cmd.aggregate` namespace.
        _ => "$cmd.aggregate".to_owned(),
    };
    let stages = pipeline_stages(body, "pipeline");
    pipeline_rule(db, &coll, &stages, bypass, depth)
}

/// What a pipeline on `db.coll` needs: `find` on it unless it starts with an initial source
/// (an empty pipeline reads it), and what each stage needs.
fn pipeline_rule(
    db: &str,
    coll: &str,
    stages: &[&RawDocument],
    bypass: bool,
    depth: usize,
) -> Result<Rule, CommandError> {
    let mut rule = Rule::Allow;
    if !starts_with_initial_source(stages) {
        rule = rule.and(Rule::has(
            Resource::namespace(db, coll),
            &[ActionType::Find],
        ));
    }
    for stage in stages {
        rule = rule.and(stage_rule(db, coll, stage, bypass, depth)?);
    }
    Ok(rule)
}

/// A sub-pipeline's needs (`$lookup`, `$unionWith`): `find` on its collection unless it starts
/// with an initial source, and its stages' needs.
fn sub_pipeline(
    db: &str,
    coll: &str,
    stages: &[&RawDocument],
    bypass: bool,
    depth: usize,
) -> Result<Rule, CommandError> {
    if depth >= crate::pipeline::stages::MAX_SUB_PIPELINE_DEPTH {
        return Err(crate::pipeline::stages::sub_pipeline_too_deep());
    }
    pipeline_rule(db, coll, stages, bypass, depth + 1)
}

/// A `{db, coll}` or plain string target of `$out`, `$merge`, `$lookup`.
fn target(db: &str, spec: RawBsonRef<'_>, coll_field: &str) -> Option<(String, String)> {
    match spec {
        RawBsonRef::String(c) => Some((db.to_owned(), c.to_owned())),
        RawBsonRef::Document(d) => {
            let tdb = d.get_str("db").unwrap_or(db);
            let coll = d.get_str(coll_field).ok()?;
            Some((tdb.to_owned(), coll.to_owned()))
        }
        _ => None,
    }
}

/// What one stage needs (its `LiteParsed::requiredPrivileges`).
fn stage_rule(
    db: &str,
    coll: &str,
    stage: &RawDocument,
    bypass: bool,
    depth: usize,
) -> Result<Rule, CommandError> {
    use ActionType as A;
    let Some(Ok((name, arg))) = stage.iter().next() else {
        return Ok(Rule::Allow);
    };
    let here = || Resource::namespace(db, coll);
    Ok(match name.as_str() {
        "$out" => match arg {
            RawBsonRef::String(c) => Rule::has(
                Resource::namespace(db, c),
                &with_bypass(&[A::Insert, A::Remove], bypass),
            ),
            RawBsonRef::Document(_) => match target(db, arg, "coll") {
                Some((tdb, tcoll)) => Rule::has(
                    Resource::namespace(&tdb, &tcoll),
                    &with_bypass(&[A::Insert, A::Remove], bypass),
                ),
                None => Rule::Allow,
            },
            _ => Rule::Allow,
        },
        "$merge" => {
            let (into, when_matched, when_not_matched) = match arg {
                RawBsonRef::String(c) => (Some((db.to_owned(), c.to_owned())), None, None),
                RawBsonRef::Document(d) => (
                    d.get("into")
                        .ok()
                        .flatten()
                        .and_then(|i| target(db, i, "coll")),
                    d.get("whenMatched").ok().flatten(),
                    d.get_str("whenNotMatched").ok(),
                ),
                _ => (None, None, None),
            };
            let Some((tdb, tcoll)) = into else {
                return Ok(Rule::Allow);
            };
            // mongod's merge strategy descriptors: `update` unless whenMatched is "fail",
            // `insert` when whenNotMatched is "insert" (the default).
            let mut actions = Vec::new();
            if !matches!(when_matched, Some(RawBsonRef::String("fail"))) {
                actions.push(A::Update);
            }
            if when_not_matched.is_none_or(|w| w == "insert") {
                actions.push(A::Insert);
            }
            Rule::has(
                Resource::namespace(&tdb, &tcoll),
                &with_bypass(&actions, bypass),
            )
        }
        "$lookup" => {
            let RawBsonRef::Document(spec) = arg else {
                return Ok(Rule::Allow);
            };
            let foreign = spec
                .get("from")
                .ok()
                .flatten()
                .and_then(|f| target(db, f, "coll"))
                .unwrap_or_else(|| (db.to_owned(), "$cmd.aggregate".to_owned()));
            let stages = pipeline_stages(spec, "pipeline");
            sub_pipeline(&foreign.0, &foreign.1, &stages, bypass, depth)?
        }
        "$unionWith" => {
            let (foreign, stages) = match arg {
                RawBsonRef::String(c) => (c.to_owned(), Vec::new()),
                RawBsonRef::Document(spec) => (
                    spec.get_str("coll").unwrap_or("$cmd.aggregate").to_owned(),
                    pipeline_stages(spec, "pipeline"),
                ),
                _ => return Ok(Rule::Allow),
            };
            sub_pipeline(db, &foreign, &stages, bypass, depth)?
        }
        "$graphLookup" => match arg {
            RawBsonRef::Document(spec) => match spec.get_str("from") {
                Ok(from) => Rule::has(Resource::namespace(db, from), &[A::Find]),
                Err(_) => Rule::Allow,
            },
            _ => Rule::Allow,
        },
        "$facet" => {
            let RawBsonRef::Document(spec) = arg else {
                return Ok(Rule::Allow);
            };
            let mut rule = Rule::Allow;
            for (_, pipeline) in spec.iter().filter_map(Result::ok) {
                if let RawBsonRef::Array(a) = pipeline {
                    for s in a.into_iter().filter_map(Result::ok) {
                        if let RawBsonRef::Document(s) = s {
                            rule = rule.and(stage_rule(db, coll, s, bypass, depth)?);
                        }
                    }
                }
            }
            rule
        }
        "$collStats" => Rule::has(here(), &[A::CollStats]),
        "$indexStats" => Rule::has(here(), &[A::IndexStats]),
        "$planCacheStats" => Rule::has(here(), &[A::PlanCacheRead]),
        "$changeStream" => Rule::has(here(), &[A::ChangeStream, A::Find]),
        "$currentOp" => match arg {
            RawBsonRef::Document(spec) if truthy(spec, "allUsers") => {
                Rule::has(Resource::Cluster, &[A::Inprog])
            }
            _ => Rule::Authenticated,
        },
        "$listLocalSessions" | "$listSessions" => match arg {
            RawBsonRef::Document(spec) if truthy(spec, "allUsers") => {
                Rule::has(Resource::Cluster, &[A::ListSessions])
            }
            RawBsonRef::Document(spec) => {
                let users: Vec<UserName> = statements(spec, "users")
                    .filter_map(|u| {
                        Some(UserName {
                            user: u.get_str("user").ok()?.to_owned(),
                            db: u.get_str("db").ok()?.to_owned(),
                        })
                    })
                    .collect();
                if users.is_empty() {
                    Rule::Allow
                } else {
                    Rule::Any(vec![
                        Rule::has(Resource::Cluster, &[A::ListSessions]),
                        Rule::IsUsers(users),
                    ])
                }
            }
            _ => Rule::Allow,
        },
        _ => Rule::Allow,
    })
}

/// A role named in a users/roles command: `"name"` (in `db`) or `{role, db}`.
fn role_dbs(db: &str, body: &RawDocument, field: &str) -> Result<Vec<String>, CommandError> {
    let Ok(Some(RawBsonRef::Array(array))) = body.get(field) else {
        return Ok(Vec::new());
    };
    let mut dbs = Vec::new();
    for role in array {
        // (A malformed name answers the command's own parse error, as mongod parses the
        // request before it checks the caller.)
        let role = role.map_err(|e| CommandError::new(ErrorCode::InvalidBSON, e.to_string()))?;
        dbs.push(crate::auth::roles::parse_role_name(db, role)?.db);
    }
    dbs.sort_unstable();
    dbs.dedup();
    Ok(dbs)
}

/// `grantRole` on the database of every role `field` names (`checkAuthorizedToGrantRoles`).
fn grant_roles(db: &str, body: &RawDocument, field: &str) -> Result<Rule, CommandError> {
    Ok(role_dbs(db, body, field)?
        .into_iter()
        .fold(Rule::Allow, |rule, rdb| {
            rule.and(Rule::has(Resource::Database(rdb), &[ActionType::GrantRole]))
        }))
}

/// `revokeRole` on the database of every role `field` names.
fn revoke_roles(db: &str, body: &RawDocument, field: &str) -> Result<Rule, CommandError> {
    Ok(role_dbs(db, body, field)?
        .into_iter()
        .fold(Rule::Allow, |rule, rdb| {
            rule.and(Rule::has(
                Resource::Database(rdb),
                &[ActionType::RevokeRole],
            ))
        }))
}

/// Granting (or revoking) privileges (`checkAuthorizedToGrantPrivilege`): `action` on the
/// database of a database or namespace privilege, and on `admin` for any wider one.
fn grant_privileges(body: &RawDocument, action: ActionType) -> Result<Rule, CommandError> {
    let mut dbs: Vec<String> = Vec::new();
    for p in statements(body, "privileges") {
        let resource = match p.get_document("resource") {
            Ok(r) => parse_resource(r)?,
            Err(_) => {
                return Err(CommandError::new(
                    ErrorCode::Location(40414),
                    "BSON field 'resource' is missing but a required field",
                ));
            }
        };
        dbs.push(match resource {
            Resource::Database(db) | Resource::Namespace { db, .. } => db,
            _ => "admin".to_owned(),
        });
    }
    dbs.sort_unstable();
    dbs.dedup();
    Ok(dbs.into_iter().fold(Rule::Allow, |rule, db| {
        rule.and(Rule::has(Resource::Database(db), &[action]))
    }))
}

/// `updateUser` (`checkAuthForUpdateUserCommand`): a new password needs `changePassword` on the
/// user's database, or for one's own, `changeOwnPassword`; custom data likewise; a new role
/// list needs `revokeRole` on every normal resource (the roles it replaces are unknown) and
/// `grantRole` for the new ones.
fn update_user(db: &str, body: &RawDocument) -> Result<Required, CommandError> {
    use ActionType as A;
    let user = match body.iter().next() {
        Some(Ok((_, RawBsonRef::String(u)))) => UserName {
            user: u.to_owned(),
            db: db.to_owned(),
        },
        _ => {
            return Ok(Required::rule(Rule::has(
                Resource::database(db),
                &[A::ChangePassword],
            )));
        }
    };
    let own_or = |other: ActionType, own: ActionType| {
        Rule::Any(vec![
            Rule::has(Resource::database(db), &[other]),
            Rule::All(vec![
                Rule::IsUsers(vec![user.clone()]),
                Rule::has(Resource::database(db), &[own]),
            ]),
        ])
    };
    let mut rule = Rule::Allow;
    // A new password or new mechanisms both need the right to change the password.
    if present(body, "pwd") || present(body, "mechanisms") {
        rule = rule.and(own_or(A::ChangePassword, A::ChangeOwnPassword));
    }
    if present(body, "customData") {
        rule = rule.and(own_or(A::ChangeCustomData, A::ChangeOwnCustomData));
    }
    if present(body, "roles") {
        rule = rule
            .and(Rule::has(Resource::AnyNormal, &[A::RevokeRole]))
            .and(grant_roles(db, body, "roles")?);
    }
    Ok(Required::rule(rule.and(restrictions(db, body))))
}

/// `setAuthenticationRestriction` on `db` when the request sets `authenticationRestrictions`.
fn restrictions(db: &str, body: &RawDocument) -> Rule {
    if present(body, "authenticationRestrictions") {
        Rule::has(
            Resource::database(db),
            &[ActionType::SetAuthenticationRestriction],
        )
    } else {
        Rule::Allow
    }
}

/// `usersInfo`: `viewUser` on the database of each user asked about (on the cluster for
/// `forAllDBs`), except that a user may always look at itself.
fn users_info(db: &str, body: &RawDocument) -> Required {
    let view = |resource: Resource| Rule::has(resource, &[ActionType::ViewUser]);
    let user_rule = |u: UserName| {
        let resource = Resource::database(&u.db);
        Rule::Any(vec![Rule::IsUsers(vec![u]), view(resource)])
    };
    let rule = match body.iter().next() {
        Some(Ok((_, RawBsonRef::String(u)))) => user_rule(UserName {
            user: u.to_owned(),
            db: db.to_owned(),
        }),
        Some(Ok((_, RawBsonRef::Document(d)))) if truthy(d, "forAllDBs") => view(Resource::Cluster),
        Some(Ok((_, RawBsonRef::Document(d)))) => match (d.get_str("user"), d.get_str("db")) {
            (Ok(u), Ok(udb)) => user_rule(UserName {
                user: u.to_owned(),
                db: udb.to_owned(),
            }),
            _ => view(Resource::database(db)),
        },
        Some(Ok((_, RawBsonRef::Array(a)))) => {
            let mut rule = Rule::Allow;
            for u in a.into_iter().filter_map(Result::ok) {
                let name = match u {
                    RawBsonRef::String(u) => Some(UserName {
                        user: u.to_owned(),
                        db: db.to_owned(),
                    }),
                    RawBsonRef::Document(d) => match (d.get_str("user"), d.get_str("db")) {
                        (Ok(u), Ok(udb)) => Some(UserName {
                            user: u.to_owned(),
                            db: udb.to_owned(),
                        }),
                        _ => None,
                    },
                    _ => None,
                };
                if let Some(name) = name {
                    rule = rule.and(user_rule(name));
                }
            }
            rule
        }
        _ => view(Resource::database(db)),
    };
    Required::rule(rule)
}

/// `rolesInfo`: `viewRole` on the database (`rolesInfo: 1`), or on the database of each role
/// asked about, except the roles the user was granted.
fn roles_info(db: &str, body: &RawDocument) -> Result<Required, CommandError> {
    let role_rule = |name: RoleName| {
        let view = Rule::has(Resource::database(&name.db), &[ActionType::ViewRole]);
        Rule::Any(vec![Rule::HasRole(name), view])
    };
    let named = |v: RawBsonRef<'_>| -> Result<Option<RoleName>, CommandError> {
        Ok(match v {
            RawBsonRef::String(_) | RawBsonRef::Document(_) => {
                Some(crate::auth::roles::parse_role_name(db, v)?)
            }
            _ => None,
        })
    };
    let rule = match body.iter().next() {
        Some(Ok((_, RawBsonRef::Array(a)))) => {
            let mut rule = Rule::Allow;
            for v in a.into_iter().filter_map(Result::ok) {
                if let Some(name) = named(v)? {
                    rule = rule.and(role_rule(name));
                }
            }
            rule
        }
        Some(Ok((_, v @ (RawBsonRef::String(_) | RawBsonRef::Document(_))))) => {
            named(v)?.map_or(Rule::Allow, role_rule)
        }
        _ => Rule::has(Resource::database(db), &[ActionType::ViewRole]),
    };
    Ok(Required::rule(rule))
}
