use bson::rawdoc;

use super::*;
use ActionType as A;

/// A caller holding `privileges`, logged in as `user` (if any), owning the cursors it names
/// when `owns`.
pub(crate) struct TestCaller {
    pub privileges: PrivilegeSet,
    pub user: Option<UserName>,
    pub owns: bool,
    pub roles: Vec<RoleName>,
    pub localhost: bool,
}

impl TestCaller {
    pub fn with(privileges: PrivilegeSet) -> Self {
        TestCaller {
            privileges,
            user: Some(UserName {
                user: "u".into(),
                db: "test".into(),
            }),
            owns: false,
            roles: Vec::new(),
            localhost: false,
        }
    }

    pub fn nobody(privileges: PrivilegeSet) -> Self {
        TestCaller {
            user: None,
            ..TestCaller::with(privileges)
        }
    }
}

impl Caller for TestCaller {
    fn privileges(&self) -> &PrivilegeSet {
        &self.privileges
    }
    fn is_authenticated(&self) -> bool {
        self.user.is_some()
    }
    fn is_user(&self, user: &UserName) -> bool {
        self.user.as_ref() == Some(user)
    }
    fn owns_cursors(&self) -> bool {
        self.owns
    }
    fn holds_cursor_privileges(&self) -> bool {
        true
    }
    fn has_role(&self, role: &RoleName) -> bool {
        self.roles.contains(role)
    }
    fn localhost_exception(&self) -> bool {
        self.localhost
    }
}

/// `{name: value}`.
fn named(name: &str, value: impl Into<bson::Bson>) -> bson::RawDocumentBuf {
    bson::RawDocumentBuf::try_from(&bson::doc! { name: value.into() }).unwrap()
}

fn set(privileges: &[Privilege]) -> PrivilegeSet {
    privileges.iter().cloned().collect()
}

fn ns(db: &str, coll: &str) -> Resource {
    Resource::namespace(db, coll)
}

fn req(command: &str, db: &str, body: &bson::RawDocumentBuf) -> Required {
    required(command, db, body).unwrap()
}

fn allowed(command: &str, db: &str, body: &bson::RawDocumentBuf, privileges: &[Privilege]) -> bool {
    req(command, db, body).allows(&TestCaller::with(set(privileges)))
}

#[test]
fn action_names_round_trip() {
    for &a in ActionType::ALL {
        assert_eq!(ActionType::from_name(a.name()), Some(a));
    }
    assert_eq!(
        ActionType::from_name("renameCollectionSameDB"),
        Some(A::RenameCollectionSameDb)
    );
    assert_eq!(ActionType::from_name("frobnicate"), None);
}

#[test]
fn action_sets() {
    let mut s = ActionSet::of(&[A::Find, A::Insert]);
    assert!(s.contains(A::Find) && !s.contains(A::Remove));
    s.remove_all(ActionSet::of(&[A::Find]));
    assert!(!s.contains(A::Find));
    assert_eq!(s.names(), vec!["insert"]);
    // anyAction grants everything.
    let any = ActionSet::of(&[A::AnyAction]);
    assert!(any.contains(A::Shutdown) && any.contains_all(ActionSet::all()));
    assert!(ActionSet::all().contains(A::ViewRole));
    assert!(ActionSet::EMPTY.is_empty());
}

#[test]
fn database_pattern_covers_normal_collections_only() {
    let p = set(&[Privilege::new(Resource::database("test"), &[A::Find])]);
    assert!(p.allows_action(A::Find, &ns("test", "c")));
    assert!(p.allows_action(A::Find, &Resource::database("test")));
    assert!(!p.allows_action(A::Find, &ns("test", "system.users")));
    assert!(!p.allows_action(A::Find, &ns("test", "system.js")));
    assert!(!p.allows_action(A::Find, &ns("other", "c")));
    assert!(!p.allows_action(A::Insert, &ns("test", "c")));
    // `replset.*` in `local` is not normal either.
    let local = set(&[Privilege::new(Resource::database("local"), &[A::Find])]);
    assert!(local.allows_action(A::Find, &ns("local", "oplog.rs")));
    assert!(!local.allows_action(A::Find, &ns("local", "replset.minvalid")));
}

#[test]
fn any_normal_skips_system_collections_local_and_config() {
    let p = set(&[Privilege::new(Resource::AnyNormal, &[A::Find])]);
    assert!(p.allows_action(A::Find, &ns("anything", "c")));
    assert!(p.allows_action(A::Find, &Resource::database("anything")));
    assert!(!p.allows_action(A::Find, &ns("admin", "system.users")));
    assert!(!p.allows_action(A::Find, &ns("local", "c")));
    assert!(!p.allows_action(A::Find, &ns("config", "c")));
    assert!(!p.allows_action(A::Find, &Resource::database("local")));
    assert!(!p.allows_action(A::Find, &Resource::Cluster));
}

#[test]
fn collection_any_resource_and_cluster_patterns() {
    let c = set(&[Privilege::new(
        Resource::Collection("system.users".into()),
        &[A::Find],
    )]);
    assert!(c.allows_action(A::Find, &ns("admin", "system.users")));
    assert!(c.allows_action(A::Find, &ns("x", "system.users")));
    assert!(!c.allows_action(A::Find, &ns("x", "users")));
    let any = set(&[Privilege::new(Resource::AnyResource, &[A::Find])]);
    assert!(any.allows_action(A::Find, &ns("admin", "system.users")));
    assert!(any.allows_action(A::Find, &ns("local", "replset.election")));
    assert!(any.allows_action(A::Find, &Resource::Cluster));
    let cluster = set(&[Privilege::new(Resource::Cluster, &[A::ServerStatus])]);
    assert!(cluster.allows_action(A::ServerStatus, &Resource::Cluster));
    assert!(!cluster.allows_action(A::ServerStatus, &ns("a", "b")));
    // Buckets patterns match buckets collections only.
    let buckets = set(&[Privilege::new(Resource::AnySystemBuckets, &[A::Find])]);
    assert!(buckets.allows_action(A::Find, &ns("db", "system.buckets.weather")));
    assert!(!buckets.allows_action(A::Find, &ns("db", "weather")));
    assert!(!buckets.allows_action(A::Find, &ns("db", "system.buckets.")));
}

#[test]
fn actions_combine_across_patterns() {
    // `find` through the database pattern and `insert` through the exact one.
    let p = set(&[
        Privilege::new(Resource::database("test"), &[A::Find]),
        Privilege::new(ns("test", "c"), &[A::Insert]),
    ]);
    assert!(p.allows(&Privilege::new(ns("test", "c"), &[A::Find, A::Insert])));
    assert!(!p.allows(&Privilege::new(ns("test", "d"), &[A::Find, A::Insert])));
}

#[test]
fn any_action_in_db() {
    let p = set(&[Privilege::new(ns("a", "c"), &[A::Find])]);
    assert!(p.any_action_in_db("a"));
    assert!(!p.any_action_in_db("b"));
    let normal = set(&[Privilege::new(Resource::AnyNormal, &[A::Find])]);
    assert!(normal.any_action_in_db("b"));
    assert!(!normal.any_action_in_db("local"));
    let coll = set(&[Privilege::new(Resource::Collection("x".into()), &[A::Find])]);
    assert!(coll.any_action_in_db("whatever"));
    assert!(!PrivilegeSet::new().any_action_in_db("a"));
}

#[test]
fn resource_documents() {
    assert_eq!(
        Resource::from_db_collection("", ""),
        Resource::AnyNormal,
        "{{db: '', collection: ''}} is every normal collection"
    );
    assert_eq!(
        Resource::from_db_collection("d", ""),
        Resource::database("d")
    );
    assert_eq!(
        Resource::from_db_collection("", "c"),
        Resource::Collection("c".into())
    );
    for r in [
        Resource::AnyResource,
        Resource::Cluster,
        Resource::AnyNormal,
        Resource::database("d"),
        Resource::Collection("c".into()),
        ns("d", "c"),
        Resource::AnySystemBuckets,
        Resource::SystemBuckets {
            db: "d".into(),
            collection: "w".into(),
        },
    ] {
        let doc = bson::RawDocumentBuf::try_from(&r.to_document()).unwrap();
        assert_eq!(parse_resource(&doc).unwrap(), r);
    }
    let bad = rawdoc! { "cluster": true, "db": "x" };
    assert_eq!(parse_resource(&bad).unwrap_err().code, ErrorCode::BadValue);
}

#[test]
fn privilege_documents() {
    let p = parse_privilege(&rawdoc! {
        "resource": { "db": "test", "collection": "" },
        "actions": ["find", "insert"],
    })
    .unwrap();
    assert_eq!(
        p,
        Privilege::new(Resource::database("test"), &[A::Find, A::Insert])
    );
    let doc = p.to_document();
    assert_eq!(
        doc.get_array("actions").unwrap(),
        &vec![bson::Bson::from("find"), bson::Bson::from("insert")]
    );
    let e = parse_privilege(&rawdoc! {
        "resource": { "cluster": true }, "actions": ["fly"],
    })
    .unwrap_err();
    assert_eq!(e.code, ErrorCode::FailedToParse);
    assert_eq!(e.errmsg, "Unrecognized action privilege string: fly");
}

#[test]
fn reads_need_find_on_the_namespace() {
    let find = [Privilege::new(ns("test", "c"), &[A::Find])];
    for cmd in ["find", "count", "distinct"] {
        let body = named(cmd, "c");
        assert!(allowed(cmd, "test", &body, &find), "{cmd}");
        assert!(!allowed(cmd, "test", &named(cmd, "d"), &find), "{cmd}");
        assert!(!allowed(cmd, "other", &body, &find), "{cmd}");
    }
    let e = required("find", "test", &rawdoc! { "find": 1 }).unwrap_err();
    assert_eq!(e.code, ErrorCode::InvalidNamespace);
}

#[test]
fn writes_need_their_actions() {
    let insert = [Privilege::new(ns("test", "c"), &[A::Insert])];
    let body = rawdoc! { "insert": "c", "documents": [{}] };
    assert!(allowed("insert", "test", &body, &insert));
    // bypassDocumentValidation needs its own action.
    let bypass = rawdoc! { "insert": "c", "documents": [{}], "bypassDocumentValidation": true };
    assert!(!allowed("insert", "test", &bypass, &insert));
    let update = [Privilege::new(ns("test", "c"), &[A::Update])];
    let plain = rawdoc! { "update": "c", "updates": [{ "q": {}, "u": {} }] };
    let upsert = rawdoc! {
        "update": "c", "updates": [{ "q": {}, "u": {} }, { "q": {}, "u": {}, "upsert": true }],
    };
    assert!(allowed("update", "test", &plain, &update));
    assert!(
        !allowed("update", "test", &upsert, &update),
        "an upsert also inserts"
    );
    let delete = rawdoc! { "delete": "c", "deletes": [] };
    assert!(!allowed("delete", "test", &delete, &update));
    assert!(allowed(
        "delete",
        "test",
        &delete,
        &[Privilege::new(ns("test", "c"), &[A::Remove])]
    ));
}

#[test]
fn find_and_modify_actions() {
    let need = |body: bson::RawDocumentBuf| {
        let mut v: Vec<&str> = req("findAndModify", "test", &body)
            .rule
            .privileges()
            .iter()
            .flat_map(|p| p.actions.names())
            .collect();
        v.sort_unstable();
        v
    };
    assert_eq!(
        need(rawdoc! { "findAndModify": "c", "update": { "$set": { "a": 1 } } }),
        ["find", "update"]
    );
    assert_eq!(
        need(rawdoc! { "findAndModify": "c", "update": {}, "upsert": true }),
        ["find", "insert", "update"]
    );
    assert_eq!(
        need(rawdoc! { "findAndModify": "c", "remove": true }),
        ["find", "remove"]
    );
}

#[test]
fn aggregate_stages_add_their_namespaces() {
    let body = rawdoc! {
        "aggregate": "c",
        "pipeline": [{ "$match": {} }, { "$out": "target" }],
        "cursor": {},
    };
    let read = Privilege::new(ns("test", "c"), &[A::Find]);
    let write = Privilege::new(ns("test", "target"), &[A::Insert, A::Remove]);
    assert!(!allowed(
        "aggregate",
        "test",
        &body,
        std::slice::from_ref(&read)
    ));
    assert!(allowed("aggregate", "test", &body, &[read.clone(), write]));
    // $out to another database.
    let other = rawdoc! {
        "aggregate": "c", "pipeline": [{ "$out": { "db": "o", "coll": "t" } }], "cursor": {},
    };
    assert!(!allowed(
        "aggregate",
        "test",
        &other,
        &[
            read.clone(),
            Privilege::new(ns("test", "t"), &[A::Insert, A::Remove])
        ]
    ));
    assert!(allowed(
        "aggregate",
        "test",
        &other,
        &[
            read.clone(),
            Privilege::new(ns("o", "t"), &[A::Insert, A::Remove])
        ]
    ));
    // $lookup reads the foreign collection, and its sub-pipeline's.
    let lookup = rawdoc! {
        "aggregate": "c",
        "pipeline": [{ "$lookup": {
            "from": "f", "as": "x",
            "pipeline": [{ "$unionWith": "u" }],
        } }],
        "cursor": {},
    };
    let f = Privilege::new(ns("test", "f"), &[A::Find]);
    let u = Privilege::new(ns("test", "u"), &[A::Find]);
    assert!(!allowed(
        "aggregate",
        "test",
        &lookup,
        &[read.clone(), f.clone()]
    ));
    assert!(allowed(
        "aggregate",
        "test",
        &lookup,
        &[read.clone(), f.clone(), u]
    ));
    // A $lookup sub-pipeline starting with $documents does not read `from`.
    let docs = rawdoc! {
        "aggregate": "c",
        "pipeline": [{ "$lookup": { "as": "x", "pipeline": [{ "$documents": [{}] }] } }],
        "cursor": {},
    };
    assert!(allowed(
        "aggregate",
        "test",
        &docs,
        std::slice::from_ref(&read)
    ));
    // $facet's pipelines, and $graphLookup's `from`.
    let facet = rawdoc! {
        "aggregate": "c",
        "pipeline": [{ "$facet": { "a": [{ "$graphLookup": {
            "from": "f", "startWith": "$x", "connectFromField": "a",
            "connectToField": "b", "as": "y",
        } }] } }],
        "cursor": {},
    };
    assert!(!allowed(
        "aggregate",
        "test",
        &facet,
        std::slice::from_ref(&read)
    ));
    assert!(allowed("aggregate", "test", &facet, &[read.clone(), f]));
}

#[test]
fn aggregate_initial_sources_do_not_read_the_collection() {
    let stats = rawdoc! {
        "aggregate": "c", "pipeline": [{ "$collStats": { "count": {} } }], "cursor": {},
    };
    let coll_stats = Privilege::new(ns("test", "c"), &[A::CollStats]);
    assert!(allowed(
        "aggregate",
        "test",
        &stats,
        std::slice::from_ref(&coll_stats)
    ));
    assert!(!allowed(
        "aggregate",
        "test",
        &stats,
        &[Privilege::new(ns("test", "c"), &[A::Find])]
    ));
    let docs =
        rawdoc! { "aggregate": 1, "pipeline": [{ "$documents": [{ "a": 1 }] }], "cursor": {} };
    assert!(allowed("aggregate", "test", &docs, &[]));
    // An empty pipeline reads the collection.
    let empty = rawdoc! { "aggregate": "c", "pipeline": [], "cursor": {} };
    assert!(!allowed("aggregate", "test", &empty, &[]));
    // $listLocalSessions of all users needs listSessions on the cluster.
    let all = rawdoc! {
        "aggregate": 1, "pipeline": [{ "$listLocalSessions": { "allUsers": true } }], "cursor": {},
    };
    assert!(!allowed("aggregate", "admin", &all, &[]));
    assert!(allowed(
        "aggregate",
        "admin",
        &all,
        &[Privilege::new(Resource::Cluster, &[A::ListSessions])]
    ));
    let mine = rawdoc! {
        "aggregate": 1,
        "pipeline": [{ "$listLocalSessions": { "users": [{ "user": "u", "db": "test" }] } }],
        "cursor": {},
    };
    assert!(allowed("aggregate", "admin", &mine, &[]));
}

#[test]
fn merge_modes() {
    let actions = |spec: bson::RawDocumentBuf| {
        let body = rawdoc! { "aggregate": "c", "pipeline": [{ "$merge": spec }], "cursor": {} };
        let mut v: Vec<&str> = req("aggregate", "test", &body)
            .rule
            .privileges()
            .iter()
            .filter(|p| p.resource == ns("test", "t"))
            .flat_map(|p| p.actions.names())
            .collect();
        v.sort_unstable();
        v
    };
    assert_eq!(actions(rawdoc! { "into": "t" }), ["insert", "update"]);
    assert_eq!(
        actions(rawdoc! { "into": "t", "whenMatched": "fail" }),
        ["insert"]
    );
    assert_eq!(
        actions(rawdoc! { "into": "t", "whenNotMatched": "discard" }),
        ["update"]
    );
    assert_eq!(
        actions(rawdoc! { "into": { "db": "test", "coll": "t" }, "whenMatched": [{ "$set": {} }] }),
        ["insert", "update"]
    );
}

#[test]
fn create_takes_create_collection_or_insert() {
    let body = rawdoc! { "create": "c" };
    assert!(allowed(
        "create",
        "test",
        &body,
        &[Privilege::new(ns("test", "c"), &[A::Insert])]
    ));
    assert!(allowed(
        "create",
        "test",
        &body,
        &[Privilege::new(
            Resource::database("test"),
            &[A::CreateCollection]
        )]
    ));
    assert!(!allowed("create", "test", &body, &[]));
    // A capped collection needs convertToCapped too.
    let capped = rawdoc! { "create": "c", "capped": true, "size": 100 };
    assert!(!allowed(
        "create",
        "test",
        &capped,
        &[Privilege::new(ns("test", "c"), &[A::Insert])]
    ));
    // A view needs createCollection itself, and (when the caller can read the view) what its
    // pipeline reads.
    let view = rawdoc! { "create": "v", "viewOn": "c", "pipeline": [] };
    assert!(!allowed(
        "create",
        "test",
        &view,
        &[Privilege::new(ns("test", "v"), &[A::Insert])]
    ));
    assert!(allowed(
        "create",
        "test",
        &view,
        &[Privilege::new(ns("test", "v"), &[A::CreateCollection])]
    ));
    assert!(!allowed(
        "create",
        "test",
        &view,
        &[Privilege::new(
            ns("test", "v"),
            &[A::CreateCollection, A::Find]
        )]
    ));
    assert!(allowed(
        "create",
        "test",
        &view,
        &[
            Privilege::new(ns("test", "v"), &[A::CreateCollection, A::Find]),
            Privilege::new(ns("test", "c"), &[A::Find]),
        ]
    ));
}

#[test]
fn coll_mod_of_a_view_needs_both_fields() {
    let e = required(
        "collMod",
        "test",
        &rawdoc! { "collMod": "v", "viewOn": "c" },
    )
    .unwrap_err();
    assert_eq!(e.code, ErrorCode::InvalidOptions);
    let ok = rawdoc! { "collMod": "c", "validator": {} };
    assert!(allowed(
        "collMod",
        "test",
        &ok,
        &[Privilege::new(ns("test", "c"), &[A::CollMod])]
    ));
}

#[test]
fn rename_collection() {
    let body = rawdoc! { "renameCollection": "test.a", "to": "test.b" };
    let same_db = Privilege::new(Resource::database("test"), &[A::RenameCollectionSameDb]);
    // renameCollectionSameDB alone: allowed when the caller can read neither.
    assert!(allowed(
        "renameCollection",
        "admin",
        &body,
        std::slice::from_ref(&same_db)
    ));
    // ...but not when it could read the target and not the source.
    assert!(!allowed(
        "renameCollection",
        "admin",
        &body,
        &[same_db.clone(), Privilege::new(ns("test", "b"), &[A::Find])]
    ));
    // Across databases: find and dropCollection on the source, insert and createIndex on the
    // target.
    let across = rawdoc! { "renameCollection": "test.a", "to": "other.b" };
    assert!(!allowed("renameCollection", "admin", &across, &[same_db]));
    assert!(allowed(
        "renameCollection",
        "admin",
        &across,
        &[
            Privilege::new(ns("test", "a"), &[A::Find, A::DropCollection]),
            Privilege::new(ns("other", "b"), &[A::Insert, A::CreateIndex]),
        ]
    ));
}

#[test]
fn list_collections_with_authorized_collections() {
    let plain = rawdoc! { "listCollections": 1 };
    let own = rawdoc! { "listCollections": 1, "authorizedCollections": true, "nameOnly": true };
    let some = [Privilege::new(ns("test", "c"), &[A::Find])];
    assert!(!allowed("listCollections", "test", &plain, &some));
    assert!(allowed("listCollections", "test", &own, &some));
    assert!(!allowed("listCollections", "other", &own, &some));
    assert!(allowed(
        "listCollections",
        "test",
        &plain,
        &[Privilege::new(
            Resource::database("test"),
            &[A::ListCollections]
        )]
    ));
}

#[test]
fn cursors() {
    let get_more = rawdoc! { "getMore": 1_i64, "collection": "c" };
    let mut caller = TestCaller::with(PrivilegeSet::new());
    assert!(!req("getMore", "test", &get_more).allows(&caller));
    caller.owns = true;
    assert!(req("getMore", "test", &get_more).allows(&caller));
    caller.user = None;
    assert!(!req("getMore", "test", &get_more).allows(&caller));

    let kill = rawdoc! { "killCursors": "c", "cursors": [1_i64] };
    let mut caller = TestCaller::with(PrivilegeSet::new());
    assert!(!req("killCursors", "test", &kill).allows(&caller));
    caller.owns = true;
    assert!(req("killCursors", "test", &kill).allows(&caller));
    for p in [
        Privilege::new(Resource::Cluster, &[A::KillAnyCursor]),
        Privilege::new(ns("test", "c"), &[A::KillAnyCursor]),
    ] {
        assert!(req("killCursors", "test", &kill).allows(&TestCaller::with(set(&[p]))));
    }
}

#[test]
fn explain_needs_what_the_explained_command_needs() {
    let body = rawdoc! { "explain": { "find": "c" }, "verbosity": "queryPlanner" };
    assert!(allowed(
        "explain",
        "test",
        &body,
        &[Privilege::new(ns("test", "c"), &[A::Find])]
    ));
    assert!(!allowed("explain", "test", &body, &[]));
    let write =
        rawdoc! { "explain": { "update": "c", "updates": [{ "q": {}, "u": {}, "upsert": true }] } };
    assert!(!allowed(
        "explain",
        "test",
        &write,
        &[Privilege::new(ns("test", "c"), &[A::Update])]
    ));
    assert!(allowed(
        "explain",
        "test",
        &write,
        &[Privilege::new(ns("test", "c"), &[A::Update, A::Insert])]
    ));
    let twice = rawdoc! { "explain": { "explain": { "find": "c" } } };
    let e = required("explain", "test", &twice).unwrap_err();
    assert_eq!(e.code, ErrorCode::CommandNotFound);
    assert_eq!(e.errmsg, "Explain failed due to unknown command: explain");
}

#[test]
fn open_and_authenticated_commands() {
    let nobody = TestCaller::nobody(PrivilegeSet::new());
    for cmd in [
        "hello",
        "isMaster",
        "ping",
        "buildInfo",
        "saslStart",
        "saslContinue",
        "logout",
    ] {
        let r = req(cmd, "admin", &named(cmd, 1));
        assert!(!r.requires_auth && r.allows(&nobody), "{cmd}");
    }
    for cmd in [
        "endSessions",
        "startSession",
        "commitTransaction",
        "whatsmyuri",
        "listDatabases",
    ] {
        let r = req(cmd, "admin", &named(cmd, 1));
        assert!(r.requires_auth && !r.allows(&nobody), "{cmd}");
        assert!(r.allows(&TestCaller::with(PrivilegeSet::new())), "{cmd}");
    }
    assert_eq!(
        required("frobnicate", "test", &rawdoc! { "frobnicate": 1 })
            .unwrap_err()
            .code,
        ErrorCode::CommandNotFound
    );
}

#[test]
fn localhost_exception_creates_the_first_user_only() {
    let caller = TestCaller {
        localhost: true,
        ..TestCaller::nobody(localhost_exception())
    };
    let create = rawdoc! { "createUser": "admin", "pwd": "x", "roles": ["root"] };
    assert!(req("createUser", "admin", &create).allows_bypass(&caller));
    let elsewhere = rawdoc! { "createUser": "u", "pwd": "x", "roles": ["read"] };
    assert!(!req("createUser", "test", &elsewhere).allows_bypass(&caller));
    assert!(!req("find", "admin", &rawdoc! { "find": "c" }).allows_bypass(&caller));
    assert!(!req("insert", "admin", &rawdoc! { "insert": "c" }).allows_bypass(&caller));
    // A role only when the (externally authenticated) user already holds it.
    let role = rawdoc! { "createRole": "r", "roles": [], "privileges": [] };
    assert!(!req("createRole", "admin", &role).allows_bypass(&caller));
    let mut holder = TestCaller {
        localhost: true,
        ..TestCaller::with(localhost_exception())
    };
    holder.roles.push(RoleName::new("r", "admin"));
    assert!(req("createRole", "admin", &role).allows_bypass(&holder));
}

#[test]
fn user_and_role_commands() {
    // createUser on test with a role from another database needs grantRole there too.
    let body =
        rawdoc! { "createUser": "u", "pwd": "p", "roles": ["read", { "role": "read", "db": "b" }] };
    let create = Privilege::new(Resource::database("test"), &[A::CreateUser, A::GrantRole]);
    assert!(!allowed(
        "createUser",
        "test",
        &body,
        std::slice::from_ref(&create)
    ));
    assert!(allowed(
        "createUser",
        "test",
        &body,
        &[
            create,
            Privilege::new(Resource::database("b"), &[A::GrantRole])
        ]
    ));
    // A user may change its own password with changeOwnPassword.
    let own = rawdoc! { "updateUser": "u", "pwd": "new" };
    let change_own = Privilege::new(Resource::database("test"), &[A::ChangeOwnPassword]);
    assert!(allowed(
        "updateUser",
        "test",
        &own,
        std::slice::from_ref(&change_own)
    ));
    let other = rawdoc! { "updateUser": "v", "pwd": "new" };
    assert!(!allowed("updateUser", "test", &other, &[change_own]));
    // usersInfo about oneself needs nothing.
    assert!(allowed(
        "usersInfo",
        "test",
        &rawdoc! { "usersInfo": "u" },
        &[]
    ));
    assert!(!allowed(
        "usersInfo",
        "test",
        &rawdoc! { "usersInfo": "v" },
        &[]
    ));
    // Privileges on several databases or the cluster need grantRole on admin.
    let role = rawdoc! {
        "createRole": "r", "roles": [],
        "privileges": [{ "resource": { "cluster": true }, "actions": ["serverStatus"] }],
    };
    let local = Privilege::new(Resource::database("test"), &[A::CreateRole, A::GrantRole]);
    assert!(!allowed(
        "createRole",
        "test",
        &role,
        std::slice::from_ref(&local)
    ));
    assert!(allowed(
        "createRole",
        "test",
        &role,
        &[
            local,
            Privilege::new(Resource::database("admin"), &[A::GrantRole])
        ]
    ));
}

#[test]
fn users_info_and_roles_info() {
    assert!(!allowed(
        "usersInfo",
        "test",
        &rawdoc! { "usersInfo": 1 },
        &[]
    ));
    let view_users = Privilege::new(Resource::database("test"), &[A::ViewUser]);
    assert!(allowed(
        "usersInfo",
        "test",
        &rawdoc! { "usersInfo": 1 },
        std::slice::from_ref(&view_users)
    ));
    let all = rawdoc! { "usersInfo": { "forAllDBs": true } };
    assert!(!allowed("usersInfo", "test", &all, &[view_users]));
    assert!(allowed(
        "usersInfo",
        "test",
        &all,
        &[Privilege::new(Resource::Cluster, &[A::ViewUser])]
    ));
    // A user may look at the roles it was granted, and no others without viewRole.
    let mut caller = TestCaller::with(PrivilegeSet::new());
    caller.roles.push(RoleName::new("app", "test"));
    let own = rawdoc! { "rolesInfo": "app" };
    let other = rawdoc! { "rolesInfo": [{ "role": "app", "db": "test" }, "other"] };
    assert!(req("rolesInfo", "test", &own).allows(&caller));
    assert!(!req("rolesInfo", "test", &other).allows(&caller));
    caller.privileges = set(&[Privilege::new(Resource::database("test"), &[A::ViewRole])]);
    assert!(req("rolesInfo", "test", &other).allows(&caller));
}

#[test]
fn restrictions_and_mechanisms() {
    let create = Privilege::new(Resource::database("test"), &[A::CreateUser]);
    let body = rawdoc! {
        "createUser": "u", "pwd": "p", "roles": [],
        "authenticationRestrictions": [{ "clientSource": ["127.0.0.1"] }],
    };
    assert!(!allowed(
        "createUser",
        "test",
        &body,
        std::slice::from_ref(&create)
    ));
    assert!(allowed(
        "createUser",
        "test",
        &body,
        &[
            create,
            Privilege::new(
                Resource::database("test"),
                &[A::SetAuthenticationRestriction]
            ),
        ]
    ));
    let mechanisms = rawdoc! { "updateUser": "v", "mechanisms": ["SCRAM-SHA-256"] };
    assert!(!allowed("updateUser", "test", &mechanisms, &[]));
    assert!(allowed(
        "updateUser",
        "test",
        &mechanisms,
        &[Privilege::new(
            Resource::database("test"),
            &[A::ChangePassword]
        )]
    ));
}

#[test]
fn unauthorized_shows_the_command_without_secrets() {
    let e = unauthorized(
        "createUser",
        "test",
        &rawdoc! { "createUser": "u", "pwd": "secret", "roles": [], "$db": "test" },
    );
    assert_eq!(e.code, ErrorCode::Unauthorized);
    assert_eq!(
        e.errmsg,
        "not authorized on test to execute command \
         { createUser: \"u\", pwd: \"xxx\", roles: [], $db: \"test\" }"
    );
    let e = unauthorized("find", "test", &rawdoc! { "find": "c", "limit": 1.0 });
    assert_eq!(
        e.errmsg,
        "not authorized on test to execute command { find: \"c\", limit: 1.0 }"
    );
}

#[test]
fn list_databases_scope() {
    let none = PrivilegeSet::new();
    let all = set(&[Privilege::new(Resource::Cluster, &[A::ListDatabases])]);
    let plain = rawdoc! { "listDatabases": 1 };
    assert!(list_databases_filtered(&plain, &none).unwrap());
    assert!(!list_databases_filtered(&plain, &all).unwrap());
    let every = rawdoc! { "listDatabases": 1, "authorizedDatabases": false };
    let e = list_databases_filtered(&every, &none).unwrap_err();
    assert_eq!(e.code, ErrorCode::Unauthorized);
    assert_eq!(e.errmsg, "Insufficient permissions to list all databases");
    assert!(!list_databases_filtered(&every, &all).unwrap());
    let own = rawdoc! { "listDatabases": 1, "authorizedDatabases": true };
    assert!(list_databases_filtered(&own, &all).unwrap());
}

#[test]
fn error_messages() {
    assert_eq!(
        requires_authentication("find").errmsg,
        "command find requires authentication"
    );
    let e = not_authorized("test", "{ find: \"c\" }");
    assert_eq!(e.code, ErrorCode::Unauthorized);
    assert_eq!(
        e.errmsg,
        "not authorized on test to execute command { find: \"c\" }"
    );
}

/// A body that names a collection, for every command of the table.
fn sample_body(name: &str) -> bson::RawDocumentBuf {
    match name {
        "renameCollection" => {
            bson::RawDocumentBuf::try_from(&bson::doc! { name: "test.a", "to": "test.b" }).unwrap()
        }
        "explain" => rawdoc! { "explain": { "find": "c" } },
        _ => named(name, "c"),
    }
}

/// Every command Ebb answers has a row here: a new command cannot slip through unchecked.
#[test]
fn every_command_has_a_row() {
    for spec in crate::commands::COMMANDS {
        let body = sample_body(spec.name);
        let r = required(spec.name, "admin", &body)
            .unwrap_or_else(|e| panic!("{} has no row: {e}", spec.name));
        // Where Ebb's table and mongod's requiresAuth() disagree, mongod wins: whatsmyuri
        // is for "any authenticated user" in mongod.
        if spec.name != "whatsmyuri" {
            assert_eq!(
                r.requires_auth, spec.requires_auth,
                "{}: requires_auth differs from the command table",
                spec.name
            );
        }
    }
}

/// No command but those mongod runs unauthenticated lets an unauthenticated caller in, even
/// one holding every privilege.
#[test]
fn only_open_commands_run_unauthenticated() {
    let nobody = TestCaller {
        owns: true,
        ..TestCaller::nobody(set(&[Privilege {
            resource: Resource::AnyResource,
            actions: ActionSet::all(),
        }]))
    };
    for spec in crate::commands::COMMANDS {
        let r = required(spec.name, "admin", &sample_body(spec.name)).unwrap();
        assert_eq!(
            r.allows(&nobody),
            OPEN_COMMANDS.contains(&spec.name),
            "{}",
            spec.name
        );
    }
}
