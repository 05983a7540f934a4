//! Users and user-defined roles, kept in the store as mongod keeps them in
//! `admin.system.users` and `admin.system.roles`: one document each, in mongod's shape
//! (`{_id: "db.user", userId, user, db, credentials, roles, customData}`,
//! `{_id: "db.role", role, db, privileges, roles}`).
//!
//! Each is a record in the `catalog` keyspace ([`USER_PREFIX`] or [`ROLE_PREFIX`], then
//! `db \0 name`), written in one commit (so a `kill -9` keeps it or not, never half), and held
//! in memory: logins and every command's authorization read the memory copy. Every change
//! bumps [`AuthStore::generation`], which tells open connections to look their user up again
//! (a changed password, role or privilege takes effect on their next command, as in mongod).

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use bson::{Bson, Document, RawDocument, doc};
use tracing::info;

use super::privileges::{Privilege, PrivilegeSet, UserName, parse_privilege};
use super::roles::{Resolved, RoleDef, RoleGraph, RoleName};
use super::scram::{Mechanism, ScramCredential};
use crate::error::{CommandError, ErrorCode};
use crate::storage::{Batch, GroupCommit, Keyspace, StorageError};

/// `0x0C` db `\0` user: a user's document.
const USER_PREFIX: u8 = 0x0C;
/// `0x0D` db `\0` role: a user-defined role's document.
const ROLE_PREFIX: u8 = 0x0D;

fn record_key(prefix: u8, db: &str, name: &str) -> Vec<u8> {
    let mut key = Vec::with_capacity(2 + db.len() + name.len());
    key.push(prefix);
    key.extend_from_slice(db.as_bytes());
    key.push(0);
    key.extend_from_slice(name.as_bytes());
    key
}

fn encode(doc: &Document) -> Result<Vec<u8>, CommandError> {
    bson::RawDocumentBuf::try_from(doc)
        .map(bson::RawDocumentBuf::into_bytes)
        .map_err(|e| CommandError::new(ErrorCode::InternalError, e.to_string()))
}

fn corrupt(what: impl std::fmt::Display) -> StorageError {
    StorageError::Corrupt(format!("user or role record: {what}"))
}

/// A user, as stored.
#[derive(Clone, PartialEq)]
pub struct User {
    /// Its name and database.
    pub name: UserName,
    /// The stored document, in mongod's `admin.system.users` shape.
    pub doc: Document,
}

impl std::fmt::Debug for User {
    /// The name only: the document holds credentials, which no log shows.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("User")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl User {
    /// A new user's document: a fresh `userId`, the credentials, roles and custom data given.
    pub fn new(
        name: UserName,
        credentials: Document,
        roles: &[RoleName],
        custom_data: Option<Document>,
    ) -> Result<Self, CommandError> {
        let mut id = [0u8; 16];
        getrandom::fill(&mut id).map_err(|e| {
            CommandError::new(ErrorCode::InternalError, format!("no random bytes: {e}"))
        })?;
        // A version 4 UUID, as mongod's `UUID::gen()`.
        id[6] = (id[6] & 0x0f) | 0x40;
        id[8] = (id[8] & 0x3f) | 0x80;
        let mut doc = doc! {
            "_id": format!("{}.{}", name.db, name.user),
            "userId": Bson::Binary(bson::Binary {
                subtype: bson::spec::BinarySubtype::Uuid,
                bytes: id.to_vec(),
            }),
            "user": name.user.as_str(),
            "db": name.db.as_str(),
            "credentials": credentials,
        };
        // mongod's field order: `customData` before `roles` (what `usersInfo` shows).
        if let Some(data) = custom_data {
            doc.insert("customData", data);
        }
        doc.insert("roles", roles_array(roles));
        Ok(User { name, doc })
    }

    fn from_document(doc: Document) -> Result<Self, StorageError> {
        let user = doc.get_str("user").map_err(corrupt)?.to_owned();
        let db = doc.get_str("db").map_err(corrupt)?.to_owned();
        let user = User {
            name: UserName { user, db },
            doc,
        };
        user.roles().map_err(|e| corrupt(e.errmsg))?;
        Ok(user)
    }

    /// The roles granted to the user directly.
    pub fn roles(&self) -> Result<Vec<RoleName>, CommandError> {
        match self.doc.get("roles") {
            Some(Bson::Array(list)) => list.iter().map(parse_role_name).collect(),
            _ => Ok(Vec::new()),
        }
    }

    /// Replaces the user's roles.
    pub fn set_roles(&mut self, roles: &[RoleName]) {
        self.doc.insert("roles", roles_array(roles));
    }

    /// Replaces the user's `credentials` document (a new password).
    pub fn set_credentials(&mut self, credentials: Document) {
        self.doc.insert("credentials", credentials);
    }

    /// Replaces the user's `customData`.
    pub fn set_custom_data(&mut self, data: Document) {
        self.doc.insert("customData", data);
    }

    /// The stored credential for `mechanism`, if the user has one.
    pub fn credential(&self, mechanism: Mechanism) -> Option<ScramCredential> {
        let credentials = self.doc.get_document("credentials").ok()?;
        let stored = credentials.get_document(mechanism.name()).ok()?;
        ScramCredential::from_document(stored).ok()
    }

    /// The mechanisms the user can log in with (`usersInfo.mechanisms`).
    pub fn mechanisms(&self) -> Vec<Mechanism> {
        Mechanism::ALL
            .into_iter()
            .filter(|m| {
                self.doc
                    .get_document("credentials")
                    .is_ok_and(|c| c.contains_key(m.name()))
            })
            .collect()
    }

    /// Whether the user authenticates outside Ebb (`$external`: X.509).
    pub fn is_external(&self) -> bool {
        self.doc
            .get_document("credentials")
            .is_ok_and(|c| c.get_bool("external").unwrap_or(false))
    }
}

/// `[{role, db}, …]`.
pub fn roles_array(roles: &[RoleName]) -> Bson {
    Bson::Array(
        roles
            .iter()
            .map(|r| Bson::Document(doc! { "role": r.role.as_str(), "db": r.db.as_str() }))
            .collect(),
    )
}

fn parse_role_name(value: &Bson) -> Result<RoleName, CommandError> {
    match value {
        Bson::Document(d) => match (d.get_str("role"), d.get_str("db")) {
            (Ok(role), Ok(db)) => Ok(RoleName::new(role, db)),
            _ => Err(CommandError::bad_value("a role must name a role and a db")),
        },
        _ => Err(CommandError::bad_value("a role must be a document")),
    }
}

/// A user-defined role as a stored document.
pub fn role_document(def: &RoleDef) -> Document {
    let roles: Vec<RoleName> = def.roles.clone();
    doc! {
        "_id": format!("{}.{}", def.name.db, def.name.role),
        "role": def.name.role.as_str(),
        "db": def.name.db.as_str(),
        "privileges": Bson::Array(
            def.privileges.iter().map(|p| Bson::Document(p.to_document())).collect()
        ),
        "roles": roles_array(&roles),
    }
}

fn role_from_document(doc: &Document) -> Result<RoleDef, StorageError> {
    let role = doc.get_str("role").map_err(corrupt)?;
    let db = doc.get_str("db").map_err(corrupt)?;
    let mut privileges = Vec::new();
    if let Ok(list) = doc.get_array("privileges") {
        for p in list {
            let Bson::Document(p) = p else {
                return Err(corrupt("privilege is not a document"));
            };
            let raw = bson::RawDocumentBuf::try_from(p).map_err(corrupt)?;
            privileges.push(parse_privilege(&raw).map_err(|e| corrupt(e.errmsg))?);
        }
    }
    let roles = match doc.get("roles") {
        Some(Bson::Array(list)) => list
            .iter()
            .map(parse_role_name)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| corrupt(e.errmsg))?,
        _ => Vec::new(),
    };
    Ok(RoleDef {
        name: RoleName::new(role, db),
        roles,
        privileges,
    })
}

#[derive(Debug, Default)]
struct Inner {
    users: BTreeMap<UserName, Arc<User>>,
    roles: RoleGraph,
}

/// The users and roles of the server.
#[derive(Debug)]
pub struct AuthStore {
    store: Option<Arc<GroupCommit>>,
    inner: RwLock<Inner>,
    /// Serializes changes: each reads the current state, checks, commits and publishes.
    changes: Mutex<()>,
    generation: AtomicU64,
    /// Whether a user or a role has existed since the store was opened: mongod's
    /// `_hasAnyPrivilegeDocuments`, which once set stays set (dropping every user does not
    /// bring the localhost exception back before a restart).
    had_any: AtomicBool,
    /// The ticket of the latest commit (see [`AuthStore::last_ticket`]).
    last_ticket: AtomicU64,
}

impl AuthStore {
    /// Loads the users and roles kept in `store`.
    pub fn open(store: Arc<GroupCommit>) -> Result<Self, StorageError> {
        let snapshot = store.storage().snapshot();
        let mut users = BTreeMap::new();
        let mut defs = Vec::new();
        for (prefix, is_user) in [(USER_PREFIX, true), (ROLE_PREFIX, false)] {
            let end = [prefix + 1];
            for entry in snapshot.range(
                Keyspace::Catalog,
                Bound::Included(&[prefix][..]),
                Bound::Excluded(&end[..]),
                false,
            ) {
                let (_, value) = entry?;
                let doc = Document::try_from(RawDocument::from_bytes(&value).map_err(corrupt)?)
                    .map_err(corrupt)?;
                if is_user {
                    let user = User::from_document(doc)?;
                    users.insert(user.name.clone(), Arc::new(user));
                } else {
                    defs.push(role_from_document(&doc)?);
                }
            }
        }
        let roles = RoleGraph::from_defs(defs).map_err(|e| corrupt(e.errmsg))?;
        info!(users = users.len(), "users and roles loaded");
        let had_any = AtomicBool::new(!users.is_empty() || !roles.is_empty());
        Ok(AuthStore {
            store: Some(store),
            inner: RwLock::new(Inner { users, roles }),
            changes: Mutex::new(()),
            generation: AtomicU64::new(1),
            had_any,
            last_ticket: AtomicU64::new(0),
        })
    }

    /// A store that keeps nothing (unit tests).
    pub fn in_memory() -> Self {
        AuthStore {
            store: None,
            inner: RwLock::default(),
            changes: Mutex::new(()),
            generation: AtomicU64::new(1),
            had_any: AtomicBool::new(false),
            last_ticket: AtomicU64::new(0),
        }
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Inner> {
        self.inner
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Inner> {
        self.inner
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Counts every change to users and roles: a connection whose user was looked up at an
    /// older generation looks it up again.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// Whether no user and no user-defined role exists, nor has since the store was opened (the
    /// localhost exception's condition, as mongod's `hasAnyPrivilegeDocuments` caches it).
    pub fn is_empty(&self) -> bool {
        if self.had_any.load(Ordering::Acquire) {
            return false;
        }
        let inner = self.read();
        inner.users.is_empty() && inner.roles.is_empty()
    }

    /// The user `name`.
    pub fn user(&self, name: &UserName) -> Option<Arc<User>> {
        self.read().users.get(name).cloned()
    }

    /// Every user, in `(db, user)` order; only those of `db` when given.
    pub fn users(&self, db: Option<&str>) -> Vec<Arc<User>> {
        self.read()
            .users
            .values()
            .filter(|u| db.is_none_or(|d| u.name.db == d))
            .cloned()
            .collect()
    }

    /// A copy of the role graph (user-defined roles; built-in ones implied).
    pub fn roles(&self) -> RoleGraph {
        self.read().roles.clone()
    }

    /// `roles` with everything they grant.
    pub fn resolve(&self, roles: &[RoleName]) -> Result<Resolved, CommandError> {
        self.read().roles.resolve(roles)
    }

    /// The user `name` with its roles resolved (`None` if there is no such user). A role it
    /// was granted that no longer exists is skipped, as mongod skips it.
    pub fn resolve_user(&self, name: &UserName) -> Option<(Arc<User>, Resolved)> {
        let inner = self.read();
        let user = inner.users.get(name)?.clone();
        let roles = user.roles().unwrap_or_default();
        let mut resolved = Resolved::default();
        for role in roles {
            if let Ok(r) = inner.roles.resolve(std::slice::from_ref(&role)) {
                resolved.roles.extend(r.roles);
                resolved.privileges.extend(&r.privileges);
            }
        }
        Some((user, resolved))
    }

    fn commit(&self, batch: Batch) -> Result<(), CommandError> {
        if let Some(store) = &self.store {
            let ticket = store.commit(batch)?;
            self.last_ticket.fetch_max(ticket, Ordering::AcqRel);
        }
        Ok(())
    }

    /// The ticket of the latest change's commit (0: none yet): a command that changed users
    /// or roles waits for it to be durable before it answers (its write concern permitting).
    pub fn last_ticket(&self) -> Option<u64> {
        Some(self.last_ticket.load(Ordering::Acquire)).filter(|t| *t > 0)
    }

    fn changes(&self) -> std::sync::MutexGuard<'_, ()> {
        self.changes
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn bump(&self) {
        self.generation.fetch_add(1, Ordering::AcqRel);
    }

    /// Creates `user`: mongod's 51003 "User "u@db" already exists" if it does. Every role it
    /// is granted must exist.
    pub fn create_user(&self, user: User) -> Result<(), CommandError> {
        let _guard = self.changes();
        if self.read().users.contains_key(&user.name) {
            return Err(CommandError::new(
                ErrorCode::Location(51003),
                format!(
                    "User \"{}@{}\" already exists",
                    user.name.user, user.name.db
                ),
            ));
        }
        self.check_roles_exist(&user.roles()?)?;
        self.put_user(user, "created user")
    }

    /// Changes the user `name` with `change` (its document, which must keep its name):
    /// `UserNotFound` if there is no such user.
    pub fn update_user(
        &self,
        name: &UserName,
        change: impl FnOnce(&mut User) -> Result<(), CommandError>,
    ) -> Result<(), CommandError> {
        let _guard = self.changes();
        let Some(current) = self.user(name) else {
            return Err(user_not_found(name));
        };
        let mut user = (*current).clone();
        change(&mut user)?;
        self.check_roles_exist(&user.roles()?)?;
        self.put_user(user, "updated user")
    }

    /// mongod's `rolesExist`: every role of `roles` is built in or defined, or `RoleNotFound`
    /// naming those that are not ("Could not find role: a@db", "Could not find roles: a@db,
    /// b@db").
    pub fn roles_exist(&self, roles: &[RoleName]) -> Result<(), CommandError> {
        let inner = self.read();
        let mut missing: Vec<&RoleName> = Vec::new();
        for role in roles {
            if !inner.roles.exists(role) && !missing.contains(&role) {
                missing.push(role);
            }
        }
        if missing.is_empty() {
            return Ok(());
        }
        let names: Vec<String> = missing.iter().map(ToString::to_string).collect();
        Err(CommandError::new(
            ErrorCode::RoleNotFound,
            format!(
                "Could not find role{}: {}",
                if names.len() > 1 { "s" } else { "" },
                names.join(", ")
            ),
        ))
    }

    fn check_roles_exist(&self, roles: &[RoleName]) -> Result<(), CommandError> {
        let inner = self.read();
        for role in roles {
            if !inner.roles.exists(role) {
                return Err(CommandError::new(
                    ErrorCode::RoleNotFound,
                    format!("Could not find role: {role}"),
                ));
            }
        }
        Ok(())
    }

    fn put_user(&self, user: User, what: &'static str) -> Result<(), CommandError> {
        let mut batch = Batch::new();
        let bytes = encode(&user.doc)?;
        batch.put(
            Keyspace::Catalog,
            record_key(USER_PREFIX, &user.name.db, &user.name.user),
            bytes,
        );
        self.commit(batch)?;
        info!(user = %user.name.user, db = %user.name.db, "{what}");
        self.write().users.insert(user.name.clone(), Arc::new(user));
        self.had_any.store(true, Ordering::Release);
        self.bump();
        Ok(())
    }

    /// Removes the user `name`: `UserNotFound` if there is none.
    pub fn drop_user(&self, name: &UserName) -> Result<(), CommandError> {
        let _guard = self.changes();
        if !self.read().users.contains_key(name) {
            return Err(user_not_found(name));
        }
        let mut batch = Batch::new();
        batch.delete(
            Keyspace::Catalog,
            record_key(USER_PREFIX, &name.db, &name.user),
        );
        self.commit(batch)?;
        info!(user = %name.user, db = %name.db, "dropped user");
        self.write().users.remove(name);
        self.bump();
        Ok(())
    }

    /// Removes every user of `db` in one commit; how many there were.
    pub fn drop_users_in(&self, db: &str) -> Result<usize, CommandError> {
        let _guard = self.changes();
        let names: Vec<UserName> = self
            .users(Some(db))
            .iter()
            .map(|u| u.name.clone())
            .collect();
        if names.is_empty() {
            return Ok(0);
        }
        let mut batch = Batch::new();
        for name in &names {
            batch.delete(
                Keyspace::Catalog,
                record_key(USER_PREFIX, &name.db, &name.user),
            );
        }
        self.commit(batch)?;
        let mut inner = self.write();
        for name in &names {
            inner.users.remove(name);
        }
        drop(inner);
        info!(db, users = names.len(), "dropped all users of a database");
        self.bump();
        Ok(names.len())
    }

    /// Creates the user-defined role `def`: mongod's 51002 `Role "r@db" already exists` if it
    /// does (built in or defined); the roles it grants must exist and form no cycle.
    pub fn create_role(&self, def: &RoleDef) -> Result<(), CommandError> {
        let _guard = self.changes();
        let mut graph = self.roles();
        if graph.exists(&def.name) {
            return Err(CommandError::new(
                ErrorCode::Location(51002),
                format!("Role \"{}\" already exists", def.name),
            ));
        }
        graph.upsert(def.clone())?;
        self.put_role(def, graph, "created role")
    }

    /// Changes the user-defined role `name` with `change`: `RoleNotFound` if there is none,
    /// `InvalidRoleModification` for a built-in role.
    pub fn update_role(
        &self,
        name: &RoleName,
        change: impl FnOnce(&mut RoleDef) -> Result<(), CommandError>,
    ) -> Result<(), CommandError> {
        let _guard = self.changes();
        let mut graph = self.roles();
        if super::roles::is_builtin(name) {
            return Err(CommandError::new(
                ErrorCode::InvalidRoleModification,
                format!("Cannot modify built-in role: {name}"),
            ));
        }
        let Some(current) = graph.get(name) else {
            return Err(CommandError::new(
                ErrorCode::RoleNotFound,
                format!("Role {name} does not exist"),
            ));
        };
        let mut def = current.clone();
        change(&mut def)?;
        graph.upsert(def.clone())?;
        self.put_role(&def, graph, "updated role")
    }

    fn put_role(&self, def: &RoleDef, graph: RoleGraph, what: &str) -> Result<(), CommandError> {
        let mut batch = Batch::new();
        let bytes = encode(&role_document(def))?;
        batch.put(
            Keyspace::Catalog,
            record_key(ROLE_PREFIX, &def.name.db, &def.name.role),
            bytes,
        );
        self.commit(batch)?;
        info!(role = %def.name, "{what}");
        self.write().roles = graph;
        self.had_any.store(true, Ordering::Release);
        self.bump();
        Ok(())
    }

    /// Removes user-defined roles (`dropRole`, `dropAllRolesFromDatabase`) and every grant of
    /// them, to users and to other roles, in one commit. Returns how many were removed.
    pub fn drop_roles(&self, names: &[RoleName]) -> Result<usize, CommandError> {
        let _guard = self.changes();
        let mut graph = self.roles();
        for name in names {
            graph.remove(name)?;
        }
        if names.is_empty() {
            return Ok(0);
        }
        let mut batch = Batch::new();
        for name in names {
            batch.delete(
                Keyspace::Catalog,
                record_key(ROLE_PREFIX, &name.db, &name.role),
            );
        }
        // Roles that granted a dropped role are rewritten without it.
        let mut changed_roles = Vec::new();
        for def in graph.defs() {
            let before = self.read().roles.get(&def.name).map(|d| d.roles.len());
            if before != Some(def.roles.len()) {
                changed_roles.push(def.clone());
            }
        }
        for def in &changed_roles {
            let bytes = encode(&role_document(def))?;
            batch.put(
                Keyspace::Catalog,
                record_key(ROLE_PREFIX, &def.name.db, &def.name.role),
                bytes,
            );
        }
        // Users granted a dropped role lose it.
        let mut changed_users = Vec::new();
        for user in self.users(None) {
            let roles = user.roles().unwrap_or_default();
            let kept: Vec<RoleName> = roles
                .iter()
                .filter(|r| !names.contains(r))
                .cloned()
                .collect();
            if kept.len() != roles.len() {
                let mut user = (*user).clone();
                user.set_roles(&kept);
                let bytes = encode(&user.doc)?;
                batch.put(
                    Keyspace::Catalog,
                    record_key(USER_PREFIX, &user.name.db, &user.name.user),
                    bytes,
                );
                changed_users.push(user);
            }
        }
        self.commit(batch)?;
        let mut inner = self.write();
        inner.roles = graph;
        for user in changed_users {
            inner.users.insert(user.name.clone(), Arc::new(user));
        }
        drop(inner);
        info!(roles = names.len(), "dropped roles");
        self.bump();
        Ok(names.len())
    }

    /// The privileges the roles `roles` hold, resolved.
    pub fn privileges_of(&self, roles: &[RoleName]) -> Result<PrivilegeSet, CommandError> {
        Ok(self.resolve(roles)?.privileges)
    }
}

/// mongod's `UserNotFound` for `name`.
pub fn user_not_found(name: &UserName) -> CommandError {
    CommandError::new(
        ErrorCode::UserNotFound,
        format!(
            "Could not find user \"{}\" for db \"{}\"",
            name.user, name.db
        ),
    )
}

/// The privileges of a user-defined role's definition, as documents.
pub fn privilege_documents(privileges: &[Privilege]) -> Bson {
    Bson::Array(
        privileges
            .iter()
            .map(|p| Bson::Document(p.to_document()))
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::MemoryStorage;

    fn name(user: &str, db: &str) -> UserName {
        UserName {
            user: user.into(),
            db: db.into(),
        }
    }

    fn open_memory() -> (Arc<GroupCommit>, AuthStore) {
        let store = Arc::new(GroupCommit::new(Arc::new(MemoryStorage::default())));
        let auth = AuthStore::open(Arc::clone(&store)).unwrap();
        (store, auth)
    }

    #[test]
    fn users_and_roles_survive_reopening() {
        let (store, auth) = open_memory();
        assert!(auth.is_empty());
        let g0 = auth.generation();
        let def = RoleDef {
            name: RoleName::new("reporter", "app"),
            roles: vec![RoleName::new("read", "app")],
            privileges: vec![],
        };
        auth.create_role(&def).unwrap();
        let user = User::new(
            name("ann", "app"),
            doc! {},
            &[RoleName::new("reporter", "app")],
            Some(doc! { "team": 1 }),
        )
        .unwrap();
        auth.create_user(user).unwrap();
        assert!(auth.generation() > g0);
        assert!(!auth.is_empty());
        let reopened = AuthStore::open(store).unwrap();
        let (user, resolved) = reopened.resolve_user(&name("ann", "app")).unwrap();
        assert_eq!(user.doc.get_str("_id").unwrap(), "app.ann");
        assert!(resolved.roles.contains(&RoleName::new("read", "app")));
        assert!(reopened.roles().exists(&RoleName::new("reporter", "app")));
    }

    #[test]
    fn duplicates_and_unknown_roles_are_refused() {
        let (_, auth) = open_memory();
        let make = |roles: &[RoleName]| User::new(name("bo", "db"), doc! {}, roles, None).unwrap();
        let e = auth
            .create_user(make(&[RoleName::new("nope", "db")]))
            .unwrap_err();
        assert_eq!(e.code, ErrorCode::RoleNotFound);
        auth.create_user(make(&[])).unwrap();
        let e = auth.create_user(make(&[])).unwrap_err();
        assert_eq!(e.code.code(), 51003);
        assert_eq!(
            auth.drop_user(&name("x", "db")).unwrap_err().code,
            ErrorCode::UserNotFound
        );
    }

    #[test]
    fn dropping_a_role_removes_its_grants() {
        let (store, auth) = open_memory();
        let r = RoleName::new("r", "db");
        auth.create_role(&RoleDef {
            name: r.clone(),
            roles: vec![],
            privileges: vec![],
        })
        .unwrap();
        auth.create_role(&RoleDef {
            name: RoleName::new("s", "db"),
            roles: vec![r.clone()],
            privileges: vec![],
        })
        .unwrap();
        auth.create_user(
            User::new(name("u", "db"), doc! {}, std::slice::from_ref(&r), None).unwrap(),
        )
        .unwrap();
        auth.drop_roles(std::slice::from_ref(&r)).unwrap();
        let reopened = AuthStore::open(store).unwrap();
        assert!(
            reopened
                .user(&name("u", "db"))
                .unwrap()
                .roles()
                .unwrap()
                .is_empty()
        );
        let s = reopened.roles();
        assert!(s.get(&RoleName::new("s", "db")).unwrap().roles.is_empty());
        assert_eq!(auth.drop_users_in("db").unwrap(), 1);
    }

    #[test]
    fn once_a_user_existed_the_store_is_not_empty_until_reopened() {
        let (store, auth) = open_memory();
        assert!(auth.is_empty());
        auth.create_user(User::new(name("u", "admin"), doc! {}, &[], None).unwrap())
            .unwrap();
        auth.drop_user(&name("u", "admin")).unwrap();
        assert!(auth.users(None).is_empty());
        assert!(
            !auth.is_empty(),
            "mongod's hasAnyPrivilegeDocuments stays set"
        );
        assert!(AuthStore::open(store).unwrap().is_empty());
    }
}
