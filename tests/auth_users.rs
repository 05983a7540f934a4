//! User and role management with access control on (`--auth`), through the `mongodb` driver:
//! the first user through the localhost exception, then every user and role command with
//! mongod 7.0's replies and errors, changes seen by a user's open connection at its next
//! command, and users and roles surviving a restart.

mod common;

use bson::{Bson, Document, doc};
use common::{TestResult, TestServer, command_error};
use mongodb::Client;

const ADMIN_PWD: &str = "admin-pwd";

/// A client of `server` logged in as `user` (of `db`), on one connection (`maxPoolSize=1`), so
/// that what it sees is what one open connection sees.
async fn login(server: &TestServer, user: &str, pwd: &str, db: &str) -> TestResult<Client> {
    let uri = format!(
        "mongodb://{user}:{pwd}@{}/?authSource={db}&directConnection=true&maxPoolSize=1\
         &serverSelectionTimeoutMS=10000",
        server.addr()
    );
    Ok(Client::with_uri_str(uri).await?)
}

/// A server with `--auth`, its first user (`admin`, role `root`) created through the localhost
/// exception, and a client logged in as that user.
async fn start() -> TestResult<(TestServer, Client)> {
    let server = TestServer::start_with(|c| c.auth = true).await?;
    let anonymous = server.client().await?;
    anonymous
        .database("admin")
        .run_command(doc! { "createUser": "admin", "pwd": ADMIN_PWD, "roles": ["root"] })
        .await?;
    // The exception ends with the first user.
    let (code, _) = error_of(
        &anonymous,
        "admin",
        doc! { "createUser": "other", "pwd": "x", "roles": [] },
    )
    .await;
    assert_eq!(code, 13);
    let admin = login(&server, "admin", ADMIN_PWD, "admin").await?;
    Ok((server, admin))
}

/// Runs `command` on `db` and returns the error's `(code, message)`, failing if it succeeds.
async fn error_of(client: &Client, db: &str, command: Document) -> (i32, String) {
    let shown = command.clone();
    match client.database(db).run_command(command).await {
        Ok(reply) => panic!("{shown} answered {reply}"),
        Err(e) => match command_error(&e) {
            Some(ce) => (ce.code, ce.message.clone()),
            None => panic!("{shown} failed without a command error: {e:?}"),
        },
    }
}

/// Asserts that `command` on `db` fails with `code` and exactly `message`.
async fn refused(client: &Client, db: &str, command: Document, code: i32, message: &str) {
    let shown = command.to_string();
    let (got_code, got_message) = error_of(client, db, command).await;
    assert_eq!((got_code, got_message.as_str()), (code, message), "{shown}");
}

fn keys(doc: &Document) -> Vec<&str> {
    doc.keys().map(String::as_str).collect()
}

fn first(reply: &Document, field: &str) -> Document {
    match reply.get_array(field).ok().and_then(|a| a.first()) {
        Some(Bson::Document(d)) => d.clone(),
        other => panic!("no {field}[0] in {reply}: {other:?}"),
    }
}

fn role_names(list: &[Bson]) -> Vec<String> {
    let mut names: Vec<String> = list
        .iter()
        .filter_map(|r| match r {
            Bson::Document(d) => Some(format!(
                "{}@{}",
                d.get_str("role").unwrap_or("?"),
                d.get_str("db").unwrap_or("?")
            )),
            _ => None,
        })
        .collect();
    names.sort();
    names
}

#[tokio::test]
async fn create_user_validates_as_mongod() -> TestResult {
    let (_server, admin) = start().await?;
    let c = &admin;
    refused(
        c,
        "app",
        doc! { "createUser": "u", "pwd": "p" },
        40414,
        "BSON field 'createUser.roles' is missing but a required field",
    )
    .await;
    refused(
        c,
        "app",
        doc! { "createUser": "u", "pwd": "p", "roles": Bson::Null },
        10065,
        "invalid parameter: expected an object (roles)",
    )
    .await;
    refused(
        c,
        "app",
        doc! { "createUser": "u", "pwd": "p", "roles": "x" },
        14,
        "BSON field 'createUser.roles' is the wrong type 'string', expected type 'array'",
    )
    .await;
    refused(
        c,
        "app",
        doc! { "createUser": "u", "pwd": true, "roles": [] },
        14,
        "BSON field 'createUser.pwd' is the wrong type 'bool', expected type 'string'",
    )
    .await;
    refused(
        c,
        "app",
        doc! { "createUser": "u", "pwd": "p", "roles": [], "bogus": 1 },
        40415,
        "BSON field 'createUser.bogus' is an unknown field.",
    )
    .await;
    refused(
        c,
        "app",
        doc! { "createUser": "u", "roles": [] },
        2,
        "Must provide a 'pwd' field for all user documents, except those with '$external' as \
         the user's source db",
    )
    .await;
    refused(
        c,
        "app",
        doc! { "createUser": "u", "pwd": "p", "roles": [], "mechanisms": [] },
        2,
        "mechanisms field must not be empty",
    )
    .await;
    refused(
        c,
        "app",
        doc! { "createUser": "u", "pwd": "p", "roles": [], "mechanisms": ["BAD"] },
        2,
        "Unknown auth mechanism 'BAD'",
    )
    .await;
    refused(
        c,
        "app",
        doc! { "createUser": "u", "pwd": "", "roles": [] },
        50687,
        "Error preflighting UTF-8 conversion: U_STRING_NOT_TERMINATED_WARNING",
    )
    .await;
    refused(
        c,
        "app",
        doc! { "createUser": "", "pwd": "p", "roles": [] },
        2,
        "User document needs 'user' field to be non-empty",
    )
    .await;
    refused(
        c,
        "local",
        doc! { "createUser": "u", "pwd": "p", "roles": [] },
        2,
        "Cannot create users in the local database",
    )
    .await;
    refused(
        c,
        "app",
        doc! { "createUser": "u", "pwd": "p", "roles": ["nope", "gone"] },
        31,
        "Could not find roles: nope@app, gone@app",
    )
    .await;
    refused(
        c,
        "app",
        doc! { "createUser": "u", "pwd": "p", "roles": [{ "role": 1, "db": "app" }] },
        2,
        "RoleName must contain a string field named: role. But, has type int",
    )
    .await;
    c.database("app")
        .run_command(doc! { "createUser": "u", "pwd": "p", "roles": [] })
        .await?;
    // mongod 7.0's typed user management commands define no help text of their own.
    let commands = c
        .database("admin")
        .run_command(doc! { "listCommands": 1 })
        .await?;
    let commands = commands.get_document("commands")?;
    for name in [
        "createUser",
        "usersInfo",
        "rolesInfo",
        "dropAllRolesFromDatabase",
    ] {
        let row = commands.get_document(name)?;
        assert_eq!(row.get_str("help")?, "no help defined", "{name}");
        assert!(!row.get_bool("adminOnly")?, "{name}");
    }
    refused(
        c,
        "app",
        doc! { "createUser": "u", "pwd": "p", "roles": [] },
        51003,
        "User \"u@app\" already exists",
    )
    .await;
    Ok(())
}

#[tokio::test]
async fn users_info_update_grant_revoke_and_drop() -> TestResult {
    let (server, admin) = start().await?;
    let app = admin.database("app");
    app.run_command(doc! {
        "createUser": "ann", "pwd": "pw1", "roles": ["read"], "customData": { "team": "x" },
    })
    .await?;
    app.run_command(doc! {
        "createUser": "bob", "pwd": "pw2", "roles": [{ "role": "readWrite", "db": "app" }],
        "mechanisms": ["SCRAM-SHA-256"],
    })
    .await?;

    // The documented shape: no credentials unless asked for.
    let reply = app.run_command(doc! { "usersInfo": "ann" }).await?;
    let ann = first(&reply, "users");
    assert_eq!(
        keys(&ann),
        [
            "_id",
            "userId",
            "user",
            "db",
            "customData",
            "roles",
            "mechanisms"
        ]
    );
    assert_eq!(ann.get_str("_id")?, "app.ann");
    assert!(matches!(ann.get("userId"), Some(Bson::Binary(b)) if b.bytes.len() == 16));
    assert_eq!(
        ann.get_array("mechanisms")?,
        &vec![Bson::from("SCRAM-SHA-1"), Bson::from("SCRAM-SHA-256")]
    );
    let reply = app
        .run_command(doc! { "usersInfo": "ann", "showCredentials": true, "showCustomData": false })
        .await?;
    let ann = first(&reply, "users");
    assert_eq!(
        keys(&ann),
        [
            "_id",
            "userId",
            "user",
            "db",
            "credentials",
            "roles",
            "mechanisms"
        ]
    );
    let sha256 = ann
        .get_document("credentials")?
        .get_document("SCRAM-SHA-256")?;
    assert_eq!(sha256.get_i32("iterationCount")?, 15000);

    // Every user of the database, sorted by name; every user anywhere; a filter.
    let reply = app.run_command(doc! { "usersInfo": 1 }).await?;
    let users: Vec<&str> = reply
        .get_array("users")?
        .iter()
        .filter_map(|u| u.as_document()?.get_str("user").ok())
        .collect();
    assert_eq!(users, ["ann", "bob"]);
    let reply = admin
        .database("admin")
        .run_command(doc! { "usersInfo": { "forAllDBs": true } })
        .await?;
    assert_eq!(reply.get_array("users")?.len(), 3);
    let reply = app
        .run_command(doc! { "usersInfo": 1, "filter": { "roles.role": "readWrite" } })
        .await?;
    assert_eq!(first(&reply, "users").get_str("user")?, "bob");
    // The manual's examples: users holding a role, users with SCRAM-SHA-1 credentials.
    let reply = admin
        .database("admin")
        .run_command(
            doc! { "usersInfo": 1, "filter": { "roles": { "role": "root", "db": "admin" } } },
        )
        .await?;
    assert_eq!(first(&reply, "users").get_str("user")?, "admin");
    let reply = admin
        .database("admin")
        .run_command(
            doc! { "usersInfo": { "forAllDBs": true }, "filter": { "mechanisms": "SCRAM-SHA-1" } },
        )
        .await?;
    let users: Vec<&str> = reply
        .get_array("users")?
        .iter()
        .filter_map(|u| u.as_document()?.get_str("user").ok())
        .collect();
    assert_eq!(users, ["admin", "ann"]);
    let reply = app
        .run_command(doc! { "usersInfo": [{ "user": "bob", "db": "app" }, "ann", "nobody"] })
        .await?;
    assert_eq!(reply.get_array("users")?.len(), 2);

    // Privileges: exact names only.
    let reply = app
        .run_command(doc! { "usersInfo": "ann", "showPrivileges": true })
        .await?;
    let ann = first(&reply, "users");
    assert_eq!(role_names(ann.get_array("inheritedRoles")?), ["read@app"]);
    assert!(!ann.get_array("inheritedPrivileges")?.is_empty());
    assert!(ann.contains_key("inheritedAuthenticationRestrictions"));
    refused(
        &admin,
        "app",
        doc! { "usersInfo": 1, "showPrivileges": true },
        20,
        "Privilege or restriction details require exact-match usersInfo queries",
    )
    .await;
    refused(
        &admin,
        "app",
        doc! { "usersInfo": true },
        2,
        "UserName must be either a string or an object",
    )
    .await;
    refused(
        &admin,
        "app",
        doc! { "usersInfo": { "foo": "bar" } },
        2,
        "UserName contains an unknown field named: 'foo",
    )
    .await;

    refused(
        &admin,
        "app",
        doc! { "usersInfo": "ann", "authenticatedMechanism": "BAD" },
        2,
        "Unknown authentication mechanism 'BAD'. Supported mechanisms: MONGODB-X509, PLAIN, \
         GSSAPI, SCRAM-SHA-1, SCRAM-SHA-256, MONGODB-AWS, MONGODB-OIDC",
    )
    .await;
    app.run_command(doc! { "usersInfo": "ann", "authenticatedMechanism": "SCRAM-SHA-256" })
        .await?;

    // updateUser.
    refused(
        &admin,
        "app",
        doc! { "updateUser": "ann" },
        2,
        "Must specify at least one field to update in updateUser",
    )
    .await;
    refused(
        &admin,
        "app",
        doc! { "updateUser": "nobody", "pwd": "x" },
        11,
        "User nobody@app not found",
    )
    .await;
    app.run_command(doc! { "updateUser": "ann", "customData": { "team": "y" } })
        .await?;
    app.run_command(doc! { "updateUser": "ann", "mechanisms": ["SCRAM-SHA-256"] })
        .await?;
    let ann = first(
        &app.run_command(doc! { "usersInfo": "ann" }).await?,
        "users",
    );
    assert_eq!(ann.get_document("customData")?, &doc! { "team": "y" });
    assert_eq!(
        ann.get_array("mechanisms")?,
        &vec![Bson::from("SCRAM-SHA-256")]
    );
    refused(
        &admin,
        "app",
        doc! { "updateUser": "ann", "mechanisms": ["SCRAM-SHA-1"] },
        2,
        "mechanisms field must be a subset of previously set mechanisms",
    )
    .await;
    // A new password: the old one no longer logs in, the new one does.
    app.run_command(doc! { "updateUser": "ann", "pwd": "pw-new" })
        .await?;
    let new_login = login(&server, "ann", "pw-new", "app").await?;
    new_login
        .database("app")
        .run_command(doc! { "ping": 1 })
        .await?;
    let old_login = login(&server, "ann", "pw1", "app").await?;
    let e = old_login
        .database("app")
        .run_command(doc! { "ping": 1 })
        .await
        .unwrap_err();
    assert!(e.to_string().contains("Authentication failed"), "{e}");

    // grantRolesToUser / revokeRolesFromUser.
    refused(
        &admin,
        "app",
        doc! { "grantRolesToUser": "ann", "roles": [] },
        2,
        "grantRolesToUser command requires a non-empty \"roles\" array",
    )
    .await;
    refused(
        &admin,
        "app",
        doc! { "grantRolesToUser": "nobody", "roles": ["read"] },
        11,
        "Could not find user \"nobody\" for db \"app\"",
    )
    .await;
    refused(
        &admin,
        "app",
        doc! { "grantRolesToUser": "ann", "roles": ["nope"] },
        31,
        "Could not find role: nope@app",
    )
    .await;
    app.run_command(doc! {
        "grantRolesToUser": "ann", "roles": ["readWrite", { "role": "read", "db": "other" }],
    })
    .await?;
    let ann = first(
        &app.run_command(doc! { "usersInfo": "ann" }).await?,
        "users",
    );
    assert_eq!(
        role_names(ann.get_array("roles")?),
        ["read@app", "read@other", "readWrite@app"]
    );
    app.run_command(doc! { "revokeRolesFromUser": "ann", "roles": ["read", "readWrite"] })
        .await?;
    let ann = first(
        &app.run_command(doc! { "usersInfo": "ann" }).await?,
        "users",
    );
    assert_eq!(role_names(ann.get_array("roles")?), ["read@other"]);

    // dropUser / dropAllUsersFromDatabase.
    refused(
        &admin,
        "app",
        doc! { "dropUser": "nobody" },
        11,
        "User 'nobody@app' not found",
    )
    .await;
    app.run_command(doc! { "dropUser": "ann" }).await?;
    assert!(
        app.run_command(doc! { "usersInfo": "ann" })
            .await?
            .get_array("users")?
            .is_empty()
    );
    let reply = app
        .run_command(doc! { "dropAllUsersFromDatabase": 1 })
        .await?;
    assert_eq!(reply.get_i32("n")?, 1);
    assert_eq!(
        app.run_command(doc! { "dropAllUsersFromDatabase": 1 })
            .await?
            .get_i32("n")?,
        0
    );
    Ok(())
}

#[tokio::test]
async fn role_commands_as_mongod_answers() -> TestResult {
    let (_server, admin) = start().await?;
    let app = admin.database("app");
    let find_c = doc! { "resource": { "db": "app", "collection": "c" }, "actions": ["find"] };
    refused(
        &admin,
        "app",
        doc! { "createRole": "read", "privileges": [], "roles": [] },
        2,
        "Cannot create roles with the same name as a built-in role",
    )
    .await;
    refused(
        &admin,
        "app",
        doc! { "createRole": "r", "roles": [] },
        40414,
        "BSON field 'createRole.privileges' is missing but a required field",
    )
    .await;
    refused(
        &admin,
        "app",
        doc! {
            "createRole": "r", "roles": [],
            "privileges": [{ "resource": { "cluster": true }, "actions": ["serverStatus"] }],
        },
        49,
        "Roles on the 'app' database cannot be granted privileges that target other databases \
         or the cluster",
    )
    .await;
    refused(
        &admin,
        "app",
        doc! { "createRole": "r", "privileges": [], "roles": [{ "role": "read", "db": "x" }] },
        49,
        "Roles on the 'app' database cannot be granted roles from other databases",
    )
    .await;
    refused(
        &admin,
        "app",
        doc! { "createRole": "r", "privileges": [], "roles": ["nope"] },
        31,
        "Cannot grant roles to 'r@app': Could not find role: nope@app",
    )
    .await;
    refused(
        &admin,
        "local",
        doc! { "createRole": "r", "privileges": [], "roles": [] },
        2,
        "Cannot create roles in the local database",
    )
    .await;
    app.run_command(doc! { "createRole": "base", "privileges": [find_c.clone()], "roles": [] })
        .await?;
    app.run_command(doc! { "createRole": "top", "privileges": [], "roles": ["base", "read"] })
        .await?;
    refused(
        &admin,
        "app",
        doc! { "createRole": "base", "privileges": [], "roles": [] },
        51002,
        "Role \"base@app\" already exists",
    )
    .await;

    // rolesInfo: a user-defined role, a built-in one, all of a database, a user fragment.
    let top = first(
        &app.run_command(doc! { "rolesInfo": "top" }).await?,
        "roles",
    );
    assert_eq!(
        keys(&top),
        ["_id", "role", "db", "roles", "inheritedRoles", "isBuiltin"]
    );
    assert_eq!(top.get_str("_id")?, "app.top");
    assert_eq!(
        role_names(top.get_array("inheritedRoles")?),
        ["base@app", "read@app"]
    );
    assert!(!top.get_bool("isBuiltin")?);
    let top = first(
        &app.run_command(doc! { "rolesInfo": "top", "showPrivileges": true })
            .await?,
        "roles",
    );
    assert!(top.get_array("privileges")?.is_empty());
    assert!(
        top.get_array("inheritedPrivileges")?
            .contains(&Bson::Document(find_c.clone()))
    );
    let read = first(
        &app.run_command(doc! { "rolesInfo": { "role": "read", "db": "app" } })
            .await?,
        "roles",
    );
    assert_eq!(
        keys(&read),
        ["db", "role", "roles", "inheritedRoles", "isBuiltin"]
    );
    assert!(read.get_bool("isBuiltin")?);
    let all = app.run_command(doc! { "rolesInfo": 1 }).await?;
    assert_eq!(role_names(all.get_array("roles")?), ["base@app", "top@app"]);
    let first_all = first(&all, "roles");
    assert_eq!(
        keys(&first_all),
        ["_id", "role", "db", "roles", "isBuiltin", "inheritedRoles"]
    );
    let with_builtins = app
        .run_command(doc! { "rolesInfo": 1, "showBuiltinRoles": true })
        .await?;
    // The manual's example output for built-in roles.
    let read_write = with_builtins
        .get_array("roles")?
        .iter()
        .filter_map(Bson::as_document)
        .find(|r| r.get_str("role").is_ok_and(|n| n == "readWrite"))
        .cloned()
        .unwrap_or_default();
    assert_eq!(
        read_write,
        doc! { "role": "readWrite", "db": "app", "isBuiltin": true, "roles": [], "inheritedRoles": [] }
    );
    assert!(role_names(with_builtins.get_array("roles")?).contains(&"readWrite@app".to_owned()));
    let fragment = app
        .run_command(doc! { "rolesInfo": ["top"], "showPrivileges": "asUserFragment" })
        .await?;
    let fragment = fragment.get_document("userFragment")?;
    assert_eq!(
        keys(fragment),
        ["roles", "inheritedRoles", "inheritedPrivileges"]
    );
    assert_eq!(
        role_names(fragment.get_array("inheritedRoles")?),
        ["base@app", "read@app", "top@app"]
    );
    refused(
        &admin,
        "app",
        doc! { "rolesInfo": 1, "showPrivileges": "asUserFragment" },
        20,
        "Cannot get user fragment for all roles in a database",
    )
    .await;
    assert!(
        app.run_command(doc! { "rolesInfo": "missing" })
            .await?
            .get_array("roles")?
            .is_empty()
    );

    // The manual's example: a role with a privilege of its own and `readWrite`, listed with
    // `rolesInfo: 1, showPrivileges: true`.
    let products = admin.database("products");
    let bypass = doc! {
        "resource": { "db": "products", "collection": "" },
        "actions": ["bypassDocumentValidation"],
    };
    products
        .run_command(doc! {
            "createRole": "associate", "privileges": [bypass.clone()], "roles": ["readWrite"],
        })
        .await?;
    let associate = first(
        &products
            .run_command(doc! { "rolesInfo": 1, "showPrivileges": true })
            .await?,
        "roles",
    );
    assert_eq!(
        keys(&associate),
        [
            "_id",
            "role",
            "db",
            "privileges",
            "roles",
            "isBuiltin",
            "inheritedRoles",
            "inheritedPrivileges"
        ]
    );
    assert_eq!(associate.get_str("_id")?, "products.associate");
    assert_eq!(
        role_names(associate.get_array("inheritedRoles")?),
        ["readWrite@products"]
    );
    let inherited = associate.get_array("inheritedPrivileges")?;
    assert_eq!(inherited.first(), Some(&Bson::Document(bypass)));
    let read_write_privilege = inherited
        .get(1)
        .and_then(Bson::as_document)
        .cloned()
        .unwrap_or_default();
    assert_eq!(
        read_write_privilege.get_document("resource")?,
        &doc! { "db": "products", "collection": "" }
    );
    assert!(
        read_write_privilege
            .get_array("actions")?
            .contains(&Bson::from("changeStream"))
    );

    // updateRole, privileges and roles granted and revoked.
    refused(
        &admin,
        "app",
        doc! { "updateRole": "top" },
        2,
        "Must specify at least one field to update in updateRole",
    )
    .await;
    refused(
        &admin,
        "app",
        doc! { "updateRole": "nope", "roles": [] },
        31,
        "Could not find role: nope@app",
    )
    .await;
    refused(
        &admin,
        "app",
        doc! { "updateRole": "read", "roles": [] },
        31,
        "Role read@app not found",
    )
    .await;
    refused(
        &admin,
        "app",
        doc! { "grantPrivilegesToRole": "read", "privileges": [find_c.clone()] },
        2,
        "read@app is a built-in role and cannot be modified",
    )
    .await;
    refused(
        &admin,
        "app",
        doc! { "grantPrivilegesToRole": "base", "privileges": [] },
        2,
        "grantPrivilegesToRole command requires a non-empty \"privileges\" array",
    )
    .await;
    refused(
        &admin,
        "app",
        doc! { "grantPrivilegesToRole": "nope", "privileges": [find_c.clone()] },
        31,
        "Role nope@app not found",
    )
    .await;
    refused(
        &admin,
        "app",
        doc! { "grantRolesToRole": "base", "roles": ["top"] },
        49,
        "Granting roles to base@app would introduce a cycle in the role graph",
    )
    .await;
    refused(
        &admin,
        "app",
        doc! { "grantRolesToRole": "base", "roles": ["base"] },
        49,
        "Cannot grant role base@app to itself.",
    )
    .await;
    app.run_command(doc! {
        "grantPrivilegesToRole": "base",
        "privileges": [{ "resource": { "db": "app", "collection": "c" }, "actions": ["insert"] }],
    })
    .await?;
    let base = first(
        &app.run_command(doc! { "rolesInfo": "base", "showPrivileges": true })
            .await?,
        "roles",
    );
    assert_eq!(base.get_array("privileges")?.len(), 1, "{base}");
    app.run_command(doc! {
        "revokePrivilegesFromRole": "base",
        "privileges": [{ "resource": { "db": "app", "collection": "c" }, "actions": ["find", "insert"] }],
    })
    .await?;
    let base = first(
        &app.run_command(doc! { "rolesInfo": "base", "showPrivileges": true })
            .await?,
        "roles",
    );
    assert!(base.get_array("privileges")?.is_empty(), "{base}");
    app.run_command(doc! { "revokeRolesFromRole": "top", "roles": ["read"] })
        .await?;
    app.run_command(doc! { "grantRolesToRole": "top", "roles": ["readWrite"] })
        .await?;
    let top = first(
        &app.run_command(doc! { "rolesInfo": "top" }).await?,
        "roles",
    );
    assert_eq!(
        role_names(top.get_array("roles")?),
        ["base@app", "readWrite@app"]
    );
    app.run_command(doc! {
        "updateRole": "top", "roles": [], "privileges": [find_c.clone()],
    })
    .await?;
    let top = first(
        &app.run_command(doc! { "rolesInfo": "top", "showPrivileges": true })
            .await?,
        "roles",
    );
    assert!(top.get_array("roles")?.is_empty());
    assert_eq!(
        top.get_array("privileges")?,
        &vec![Bson::Document(find_c.clone())]
    );

    // dropRole takes the role away from users and roles; dropAllRolesFromDatabase.
    app.run_command(doc! { "grantRolesToRole": "top", "roles": ["base"] })
        .await?;
    app.run_command(doc! { "createUser": "cy", "pwd": "pw", "roles": ["base", "read"] })
        .await?;
    refused(
        &admin,
        "app",
        doc! { "dropRole": "read" },
        2,
        "read@app is a built-in role and cannot be modified",
    )
    .await;
    refused(
        &admin,
        "app",
        doc! { "dropRole": "nope" },
        31,
        "Could not find role: nope@app",
    )
    .await;
    app.run_command(doc! { "dropRole": "base" }).await?;
    let cy = first(&app.run_command(doc! { "usersInfo": "cy" }).await?, "users");
    assert_eq!(role_names(cy.get_array("roles")?), ["read@app"]);
    let top = first(
        &app.run_command(doc! { "rolesInfo": "top" }).await?,
        "roles",
    );
    assert!(top.get_array("roles")?.is_empty());
    let reply = app
        .run_command(doc! { "dropAllRolesFromDatabase": 1 })
        .await?;
    assert_eq!(reply.get_i32("n")?, 1);
    Ok(())
}

/// `find` on `app.c` through `client`: `Ok` or the error code.
async fn find_code(client: &Client) -> Result<(), i32> {
    match client
        .database("app")
        .run_command(doc! { "find": "c", "filter": {} })
        .await
    {
        Ok(_) => Ok(()),
        Err(e) => Err(command_error(&e).map_or(-1, |c| c.code)),
    }
}

#[tokio::test]
async fn open_connections_see_changes_at_their_next_command() -> TestResult {
    let (server, admin) = start().await?;
    let app = admin.database("app");
    app.run_command(doc! { "createUser": "dee", "pwd": "pw", "roles": [] })
        .await?;
    let dee = login(&server, "dee", "pw", "app").await?;
    assert_eq!(find_code(&dee).await, Err(13));

    // A role granted and revoked on another connection.
    app.run_command(doc! { "grantRolesToUser": "dee", "roles": ["read"] })
        .await?;
    assert_eq!(find_code(&dee).await, Ok(()));
    app.run_command(doc! { "revokeRolesFromUser": "dee", "roles": ["read"] })
        .await?;
    assert_eq!(find_code(&dee).await, Err(13));

    // A user-defined role whose privileges change.
    app.run_command(doc! {
        "createRole": "finder", "roles": [],
        "privileges": [{ "resource": { "db": "app", "collection": "c" }, "actions": ["find"] }],
    })
    .await?;
    app.run_command(doc! { "grantRolesToUser": "dee", "roles": ["finder"] })
        .await?;
    assert_eq!(find_code(&dee).await, Ok(()));
    app.run_command(doc! {
        "revokePrivilegesFromRole": "finder",
        "privileges": [{ "resource": { "db": "app", "collection": "c" }, "actions": ["find"] }],
    })
    .await?;
    assert_eq!(find_code(&dee).await, Err(13));

    // A user may look at itself, not at others.
    dee.database("app")
        .run_command(doc! { "usersInfo": "dee" })
        .await?;
    let (code, _) = error_of(&dee, "app", doc! { "usersInfo": "admin" }).await;
    assert_eq!(code, 13);

    // Without the privileges, user and role management is refused.
    for command in [
        doc! { "createUser": "x", "pwd": "p", "roles": [] },
        doc! { "dropUser": "admin" },
        doc! { "createRole": "x", "privileges": [], "roles": [] },
        doc! { "rolesInfo": 1 },
        doc! { "grantRolesToUser": "dee", "roles": ["readWrite"] },
    ] {
        let shown = command.to_string();
        let (code, _) = error_of(&dee, "app", command).await;
        assert_eq!(code, 13, "{shown}");
    }
    // A role one holds may be looked at.
    dee.database("app")
        .run_command(doc! { "rolesInfo": "finder" })
        .await?;
    // changeOwnPassword / changeOwnCustomData: one's own, not another's.
    app.run_command(doc! {
        "createRole": "self", "roles": [],
        "privileges": [{
            "resource": { "db": "app", "collection": "" },
            "actions": ["changeOwnPassword", "changeOwnCustomData"],
        }],
    })
    .await?;
    app.run_command(doc! { "createUser": "fay", "pwd": "pw", "roles": [] })
        .await?;
    app.run_command(doc! { "grantRolesToUser": "dee", "roles": ["self"] })
        .await?;
    dee.database("app")
        .run_command(doc! { "updateUser": "dee", "pwd": "pw2", "customData": { "k": 1 } })
        .await?;
    let (code, _) = error_of(&dee, "app", doc! { "updateUser": "fay", "pwd": "x" }).await;
    assert_eq!(code, 13);
    // The changed password does not end the open session; a new login needs the new one.
    dee.database("app")
        .run_command(doc! { "usersInfo": "dee" })
        .await?;
    let again = login(&server, "dee", "pw2", "app").await?;
    again
        .database("app")
        .run_command(doc! { "ping": 1 })
        .await?;

    // Dropped: the open connection is logged out.
    app.run_command(doc! { "dropUser": "dee" }).await?;
    let status = dee
        .database("app")
        .run_command(doc! { "connectionStatus": 1 })
        .await?;
    assert!(
        status
            .get_document("authInfo")?
            .get_array("authenticatedUsers")?
            .is_empty(),
        "{status}"
    );
    assert_eq!(find_code(&dee).await, Err(13));
    Ok(())
}

#[tokio::test]
async fn users_and_roles_survive_a_restart() -> TestResult {
    let dir = std::env::temp_dir().join(format!("ebb-auth-users-{}", std::process::id()));
    if dir.exists() {
        std::fs::remove_dir_all(&dir)?;
    }
    std::fs::create_dir_all(&dir)?;
    {
        let server = TestServer::start_durable(&dir, |c| c.auth = true).await?;
        let anonymous = server.client().await?;
        anonymous
            .database("admin")
            .run_command(doc! { "createUser": "admin", "pwd": ADMIN_PWD, "roles": ["root"] })
            .await?;
        let admin = login(&server, "admin", ADMIN_PWD, "admin").await?;
        let app = admin.database("app");
        app.run_command(doc! {
            "createRole": "finder", "roles": ["read"],
            "privileges": [{ "resource": { "db": "app", "collection": "c" }, "actions": ["insert"] }],
        })
        .await?;
        app.run_command(doc! { "createUser": "eve", "pwd": "pw", "roles": ["finder"] })
            .await?;
        drop(admin);
        drop(anonymous);
        server.stop().await?;
    }
    let server = TestServer::start_durable(&dir, |c| c.auth = true).await?;
    let eve = login(&server, "eve", "pw", "app").await?;
    assert_eq!(find_code(&eve).await, Ok(()));
    let admin = login(&server, "admin", ADMIN_PWD, "admin").await?;
    let app = admin.database("app");
    let user = first(
        &app.run_command(doc! { "usersInfo": "eve" }).await?,
        "users",
    );
    assert_eq!(role_names(user.get_array("roles")?), ["finder@app"]);
    let role = first(
        &app.run_command(doc! { "rolesInfo": "finder", "showPrivileges": true })
            .await?,
        "roles",
    );
    assert_eq!(role.get_array("privileges")?.len(), 1);
    drop(eve);
    drop(admin);
    server.stop().await?;
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}

#[tokio::test]
async fn dropping_every_user_does_not_reopen_the_localhost_exception() -> TestResult {
    let (server, admin) = start().await?;
    let reply = admin
        .database("admin")
        .run_command(doc! { "dropAllUsersFromDatabase": 1 })
        .await?;
    assert_eq!(reply.get_i32("n")?, 1);
    // As mongod (`hasAnyPrivilegeDocuments` stays set until a restart): still refused.
    let anonymous = server.client().await?;
    let (code, _) = error_of(
        &anonymous,
        "admin",
        doc! { "createUser": "again", "pwd": "p", "roles": ["root"] },
    )
    .await;
    assert_eq!(code, 13);
    Ok(())
}

/// Users and roles a command acknowledged survive `kill -9` right after the reply (their
/// change is durable before it is answered), and the first user created through the localhost
/// exception closes it after the restart too.
#[tokio::test]
async fn users_and_roles_survive_kill_9() -> TestResult {
    use common::process::{EbbProcess, data_dir};
    let dir = data_dir("ebb-auth-kill-")?;
    let mut server = EbbProcess::start(dir.path(), &["--auth"]).await?;
    let open = server.client().await?;
    open.database("admin")
        .run_command(doc! { "createUser": "admin", "pwd": "pw-admin", "roles": ["root"] })
        .await?;
    let uri = |addr: std::net::SocketAddr, user: &str, pwd: &str, db: &str| {
        format!("mongodb://{user}:{pwd}@{addr}/?authSource={db}&directConnection=true")
    };
    let admin = Client::with_uri_str(uri(server.addr(), "admin", "pw-admin", "admin")).await?;
    let app = admin.database("app");
    app.run_command(doc! {
        "createRole": "writer",
        "privileges": [{ "resource": { "db": "app", "collection": "c" }, "actions": ["insert"] }],
        "roles": [],
    })
    .await?;
    app.run_command(doc! { "createUser": "ann", "pwd": "pw-ann", "roles": ["writer"] })
        .await?;
    server.kill_9().await?;

    let server = EbbProcess::start(dir.path(), &["--auth"]).await?;
    let ann = Client::with_uri_str(uri(server.addr(), "ann", "pw-ann", "app")).await?;
    ann.database("app")
        .collection::<Document>("c")
        .insert_one(doc! { "x": 1 })
        .await?;
    let status = ann
        .database("app")
        .run_command(doc! { "connectionStatus": 1 })
        .await?;
    let users = status
        .get_document("authInfo")?
        .get_array("authenticatedUsers")?;
    assert_eq!(users.len(), 1, "{status}");
    // No localhost exception after the restart: users exist.
    let anonymous = server.client().await?;
    let e = anonymous
        .database("admin")
        .run_command(doc! { "createUser": "late", "pwd": "pw", "roles": [] })
        .await
        .expect_err("the localhost exception is closed once a user exists");
    assert_eq!(command_error(&e).map(|c| c.code), Some(13), "{e}");
    Ok(())
}
