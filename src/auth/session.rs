//! One connection's side of authentication and authorization (mongod's
//! `AuthorizationSession`): the user logged in on it, a SASL conversation in progress, and the
//! check every command passes before it runs ([`authorize`]).

use std::sync::{Arc, LazyLock};

use bson::RawDocument;

use super::privileges::{
    Caller, PrivilegeSet, Rule, UserName, cursor_not_owned, get_more_not_authorized,
    localhost_exception, required, requires_authentication, unauthorized,
};
use super::roles::{Resolved, RoleName};
use super::scram::ScramServer;
use super::store::{AuthStore, User};
use crate::error::{CommandError, ErrorCode};

static NO_PRIVILEGES: LazyLock<PrivilegeSet> = LazyLock::new(PrivilegeSet::new);
static LOCALHOST: LazyLock<PrivilegeSet> = LazyLock::new(localhost_exception);

/// The user logged in on a connection, with its roles resolved when it logged in or when the
/// users and roles last changed.
#[derive(Debug, Clone)]
pub struct LoggedIn {
    /// Who.
    pub user: Arc<User>,
    /// Its roles, direct and inherited, and their privileges.
    pub resolved: Resolved,
    /// The privileges, shared with the commands it runs.
    privileges: Arc<PrivilegeSet>,
    /// [`AuthStore::generation`] when `resolved` was computed.
    generation: u64,
}

impl LoggedIn {
    fn new(user: Arc<User>, resolved: Resolved, generation: u64) -> Self {
        LoggedIn {
            privileges: Arc::new(resolved.privileges.clone()),
            user,
            resolved,
            generation,
        }
    }

    /// The user's name.
    pub fn name(&self) -> &UserName {
        &self.user.name
    }
}

/// A SASL conversation in progress on a connection.
#[derive(Debug)]
pub struct Conversation {
    /// `conversationId` (always 1 in mongod: one conversation at a time per connection).
    pub id: i32,
    /// The database the user is looked up in.
    pub db: String,
    /// The mechanism's state.
    pub server: ScramServer,
}

/// A connection's authentication state.
#[derive(Debug, Default)]
pub struct AuthSession {
    /// The logged-in user.
    pub user: Option<LoggedIn>,
    /// A `saslStart` … `saslContinue` conversation in progress.
    pub conversation: Option<Conversation>,
    /// Whether the client connected over the loopback interface (the localhost exception).
    pub loopback: bool,
    /// The subject of the client's certificate, when it presented one over TLS
    /// (`MONGODB-X509`), in RFC 2253 form.
    pub certificate_subject: Option<String>,
}

impl AuthSession {
    /// A connection from a loopback address or not.
    pub fn new(loopback: bool) -> Self {
        AuthSession {
            loopback,
            ..AuthSession::default()
        }
    }

    /// Logs `name` in (a conversation succeeded). mongod's rules for a connection already
    /// logged in: the same user again is allowed; another user of the same database is
    /// 5626701, of another database 5626702.
    pub fn login(&mut self, store: &AuthStore, name: &UserName) -> Result<(), CommandError> {
        if let Some(current) = &self.user {
            let previous = current.name();
            if previous == name {
                tracing::warn!(user = %name.user, db = %name.db, "client has attempted to reauthenticate as a single user");
                return Ok(());
            }
            let shown = format!("{}@{}", previous.user, previous.db);
            return Err(if previous.db == name.db {
                CommandError::new(
                    ErrorCode::Location(5_626_701),
                    format!(
                        "Each client connection may only be authenticated once. Previously \
                         authenticated as: {shown}"
                    ),
                )
            } else {
                CommandError::new(
                    ErrorCode::Location(5_626_702),
                    format!(
                        "Client has attempted to authenticate on multiple databases.Already \
                         authenticated as: {shown}"
                    ),
                )
            });
        }
        let generation = store.generation();
        let Some((user, resolved)) = store.resolve_user(name) else {
            return Err(super::scram::authentication_failed());
        };
        self.user = Some(LoggedIn::new(user, resolved, generation));
        Ok(())
    }

    /// Logs the user out (`logout`).
    pub fn logout(&mut self) {
        self.user = None;
        self.conversation = None;
    }

    /// Looks the user up again when users or roles changed since it was resolved: new roles and
    /// privileges apply from the next command, and a dropped user is logged out (mongod's
    /// `_refreshUserInfoAsNeeded`).
    pub fn refresh(&mut self, store: &AuthStore) {
        let generation = store.generation();
        let Some(current) = &self.user else {
            return;
        };
        if current.generation == generation {
            return;
        }
        let name = current.name().clone();
        self.user = store
            .resolve_user(&name)
            .map(|(user, resolved)| LoggedIn::new(user, resolved, generation));
        if self.user.is_none() {
            tracing::info!(user = %name.user, db = %name.db, "logged out: the user no longer exists");
        }
    }

    /// The logged-in user's name.
    pub fn user_name(&self) -> Option<&UserName> {
        self.user.as_ref().map(LoggedIn::name)
    }

    /// Whether the localhost exception is in force (`store` has no user and no role, and the
    /// client is on the loopback interface).
    pub fn localhost_exception(&self, store: &AuthStore) -> bool {
        self.loopback && self.user.is_none() && store.is_empty()
    }
}

/// The owner and the opening command's rule of a cursor a `getMore` or `killCursors` names.
#[derive(Debug, Clone)]
pub struct CursorAuth {
    /// The user that opened it (`None`: nobody was logged in).
    pub owner: Option<UserName>,
    /// What the command that opened it needed.
    pub rule: Rule,
}

/// The connection as the rules see it, for one request.
struct Check<'a> {
    session: &'a AuthSession,
    localhost: bool,
    cursors: &'a [(i64, CursorAuth)],
    /// Evaluating a cursor's rule: the cursor checks themselves hold.
    inner: bool,
}

impl Caller for Check<'_> {
    fn privileges(&self) -> &PrivilegeSet {
        match &self.session.user {
            Some(user) => &user.resolved.privileges,
            None if self.localhost => &LOCALHOST,
            None => &NO_PRIVILEGES,
        }
    }

    fn is_authenticated(&self) -> bool {
        self.session.user.is_some()
    }

    fn is_user(&self, user: &UserName) -> bool {
        self.session.user_name() == Some(user)
    }

    fn owns_cursors(&self) -> bool {
        self.inner
            || self
                .cursors
                .iter()
                .all(|(_, c)| c.owner.as_ref() == self.session.user_name())
    }

    fn holds_cursor_privileges(&self) -> bool {
        self.inner
            || self.cursors.iter().all(|(_, c)| {
                c.rule.allows(&Check {
                    inner: true,
                    ..*self
                })
            })
    }

    fn has_role(&self, role: &RoleName) -> bool {
        self.session
            .user
            .as_ref()
            .is_some_and(|u| u.user.roles().unwrap_or_default().contains(role))
    }

    fn localhost_exception(&self) -> bool {
        self.localhost
    }
}

/// Whether the connection may run `command` on `db` (with access control on): mongod's
/// `checkAuthorization`. `cursors` are the cursors the request names that exist (for
/// `getMore` and `killCursors`). Returns the rule checked, which a cursor the command opens
/// keeps for its `getMore`s.
pub fn authorize(
    session: &AuthSession,
    store: &AuthStore,
    command: &str,
    db: &str,
    body: &RawDocument,
    cursors: &[(i64, CursorAuth)],
) -> Result<Rule, CommandError> {
    let required = required(command, db, body)?;
    let localhost = session.localhost_exception(store);
    let check = Check {
        session,
        localhost,
        cursors,
        inner: false,
    };
    if required.requires_auth && session.user.is_none() && !localhost {
        return Err(requires_authentication(command));
    }
    if command == "getMore" {
        // mongod's `checkAuthForGetMore` wants a logged-in user (the localhost exception does
        // not do), then checks the owner, then the privileges, each with its own message.
        if session.user.is_none() {
            return Err(unauthorized(command, db, body));
        }
        if let Some((id, _)) = cursors.first() {
            if !check.owns_cursors() {
                return Err(cursor_not_owned(*id));
            }
            if !check.holds_cursor_privileges() {
                return Err(get_more_not_authorized(*id));
            }
        }
        return Ok(required.rule);
    }
    let allowed = if localhost && session.user.is_none() {
        required.allows_bypass(&check)
    } else {
        required.allows(&check)
    };
    if allowed {
        Ok(required.rule)
    } else {
        Err(unauthorized(command, db, body))
    }
}

/// The privileges a connection holds (`connectionStatus` with `showPrivileges`); the
/// localhost exception's only when access control is on (`enabled`), as in mongod.
pub fn privileges(session: &AuthSession, store: &AuthStore, enabled: bool) -> PrivilegeSet {
    match &session.user {
        Some(user) => user.resolved.privileges.clone(),
        None if enabled && session.localhost_exception(store) => localhost_exception(),
        None => PrivilegeSet::new(),
    }
}

/// What the running command knows of its caller, with access control on.
#[derive(Debug)]
pub struct Stamp {
    user: Option<UserName>,
    rule: Rule,
    privileges: Arc<PrivilegeSet>,
}

impl Stamp {
    /// The caller on `session`, authorized by `rule`.
    pub fn new(session: &AuthSession, store: &AuthStore, rule: Rule) -> Self {
        let privileges = match &session.user {
            Some(user) => Arc::clone(&user.privileges),
            None => Arc::new(privileges(session, store, true)),
        };
        Stamp {
            user: session.user_name().cloned(),
            rule,
            privileges,
        }
    }
}

tokio::task_local! {
    static STAMP: Stamp;
}

/// Runs `fut` with the caller at hand: the cursors it opens keep its user and rule ([`cursor_stamp`]), and commands whose
/// answer depends on the caller's privileges read them ([`caller_privileges`]).
pub async fn with_stamp<F: std::future::Future>(stamp: Stamp, fut: F) -> F::Output {
    STAMP.scope(stamp, fut).await
}

/// The user and rule of the running command, when access control is on.
pub fn cursor_stamp() -> Option<CursorAuth> {
    STAMP
        .try_with(|s| CursorAuth {
            owner: s.user.clone(),
            rule: s.rule.clone(),
        })
        .ok()
}

/// The privileges of the running command's caller, when access control is on (`None`: it is
/// off, and every caller may do everything).
pub fn caller_privileges() -> Option<Arc<PrivilegeSet>> {
    STAMP.try_with(|s| Arc::clone(&s.privileges)).ok()
}
