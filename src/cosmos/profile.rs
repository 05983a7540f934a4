//! Resolving `--profile cosmos` into the server settings it implies, before the server starts:
//! what makes a client see, at connection time, a Cosmos DB for MongoDB (RU) account.
//!
//! - a replica set named `globaldb` (unless `--replSet` names another), as in every Cosmos DB
//!   connection string (`replicaSet=globaldb`);
//! - access control, with one user: the account (`--cosmos-account`, default `localhost`),
//!   whose password is the account key (`--cosmos-key`, default [`DEFAULT_KEY`]), with the
//!   built-in `root` role (an account key is the read-write key: it may do everything);
//! - TLS required (`requireTLS`), clients without certificates allowed, with a self-signed
//!   certificate made on first start ([`super::cert`]) in the data directory's
//!   [`CERT_DIR`] (for `--in-memory`, a directory of the system's temporary directory);
//! - port [`DEFAULT_PORT`] (10255) when `--port` was not given (decided by `main`, which alone
//!   knows; a server given its listener keeps it).
//!
//! [`Config::resolve_profile`] does it; `main` and [`crate::server::run`] both call it, and a
//! second call changes nothing.

use std::io;
use std::path::PathBuf;

use crate::auth::privileges::UserName;
use crate::auth::roles::RoleName;
use crate::auth::scram::{Mechanism, SaltSource, make_credential};
use crate::auth::store::{AuthStore, User};
use crate::config::{Config, Profile, TlsMode};
use crate::error::CommandError;

/// The port of Cosmos DB for MongoDB accounts (their connection strings' `:10255`).
pub const DEFAULT_PORT: u16 = 10255;

/// The replica set an account reports (`replicaSet=globaldb`).
pub const SET_NAME: &str = "globaldb";

/// The database the account user is defined in (`authSource` defaults to `admin`).
pub const ACCOUNT_DB: &str = "admin";

/// The development key, used when `--cosmos-key` is not given: the well-known key of
/// Microsoft's Azure Cosmos DB emulator (published in its documentation, "Authenticate
/// requests"), 88 base64 characters as every Cosmos DB account key, so that code and tools set
/// up for the emulator connect unchanged. Never a secret: it is printed at start.
pub const DEFAULT_KEY: &str =
    "C2y6yDjf5/R+ob0N8A7Cgv30VRDJIWEHLM+4QDU5DE2nQ9nDuVTqobD4b8mGGyPMbIZnqyMsEcaGQy67XIw/Jw==";

/// Where the certificate lives in a data directory.
pub const CERT_DIR: &str = "cosmos-tls";

/// What resolving the profile decided, for `main` to print and `run` to log.
#[derive(Debug, Clone)]
pub struct Resolved {
    /// The certificate authority clients may trust (`tlsCAFile`).
    pub ca_file: PathBuf,
    /// Whether the certificate was made now (`false`: reused, or the user's own files).
    pub cert_created: bool,
    /// Whether the key is the development key ([`DEFAULT_KEY`]).
    pub default_key: bool,
}

impl Config {
    /// Applies `--profile cosmos` (see the module's documentation): the replica set, access
    /// control, TLS with the profile's certificate (made now when missing), and the account key.
    /// Nothing outside the profile (`None`); settings already resolved are kept, so a second
    /// call changes nothing. Fails when the certificate cannot be written or read.
    pub fn resolve_profile(&mut self) -> io::Result<Option<Resolved>> {
        if self.profile != Profile::Cosmos {
            return Ok(None);
        }
        if self.repl_set.is_none() {
            self.repl_set = Some(SET_NAME.to_owned());
        }
        if self.cosmos_plain {
            return Ok(None);
        }
        self.auth = true;
        let key = self
            .cosmos_key
            .get_or_insert_with(|| DEFAULT_KEY.to_owned());
        let default_key = *key == DEFAULT_KEY;
        if self.tls_mode == TlsMode::Disabled {
            self.tls_mode = TlsMode::RequireTls;
            self.tls_allow_connections_without_certificates = true;
        }
        let given = self.tls_certificate_key_file.is_some() && self.tls_ca_file.is_some();
        let (ca_file, cert_created) = if let (true, Some(ca)) = (given, &self.tls_ca_file) {
            (ca.clone(), false)
        } else {
            let files = super::cert::ensure(&self.cert_dir(), &self.cert_hosts())?;
            self.tls_certificate_key_file = Some(files.server);
            self.tls_ca_file = Some(files.ca.clone());
            (files.ca, files.created)
        };
        Ok(Some(Resolved {
            ca_file,
            cert_created,
            default_key,
        }))
    }

    /// The directory of the profile's certificate: [`CERT_DIR`] in the data directory, or, for
    /// an in-memory server, one of the system's temporary directory per user (shared by such
    /// servers, made by the first one).
    fn cert_dir(&self) -> PathBuf {
        if self.in_memory {
            std::env::temp_dir().join(format!(
                "ebb-{CERT_DIR}-{}",
                rustix::process::getuid().as_raw()
            ))
        } else {
            self.data_dir.join(CERT_DIR)
        }
    }

    /// The names the certificate is made for besides the loopback ones: the address listened
    /// on and the host of `--advertise-host`.
    fn cert_hosts(&self) -> Vec<String> {
        let mut hosts = vec![self.bind.clone()];
        if let Some(advertised) = &self.advertise_host
            && let Some((host, _)) = advertised.rsplit_once(':')
        {
            hosts.push(host.to_owned());
        }
        hosts
    }

    /// The connection string of the account served on `port`, as Cosmos DB's portal writes it
    /// (host `localhost` instead of `ACCOUNT.mongo.cosmos.azure.com`); the key appears
    /// percent-encoded, as a URI needs (`+`, `/`, `=`).
    pub fn cosmos_connection_string(&self, port: u16) -> String {
        let key = self.cosmos_key.as_deref().unwrap_or(DEFAULT_KEY);
        format!(
            "mongodb://{}:{}@localhost:{port}/?ssl=true&replicaSet={}&retrywrites=false&\
             maxIdleTimeMS=120000&appName=@{}@",
            percent_encode(&self.cosmos_account),
            percent_encode(key),
            self.repl_set.as_deref().unwrap_or(SET_NAME),
            self.cosmos_account,
        )
    }
}

/// `text` with every byte but the URI's unreserved characters percent-encoded.
fn percent_encode(text: &str) -> String {
    use std::fmt::Write;
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

/// Makes sure the account user exists with `key` as its password and the `root` role: created
/// when missing (directly in the store, not through the localhost exception, which never
/// opens), its credentials replaced when the key changed since the last start. Returns the
/// ticket of the change to wait for, if one was made.
pub fn ensure_account(
    auth: &AuthStore,
    account: &str,
    key: &str,
) -> Result<Option<u64>, CommandError> {
    let name = UserName {
        user: account.to_owned(),
        db: ACCOUNT_DB.to_owned(),
    };
    let root = [RoleName::new("root", "admin")];
    match auth.user(&name) {
        None => {
            auth.create_user(User::new(name, credentials(account, key)?, &root, None)?)?;
        }
        Some(user) if key_matches(&user, account, key) && user.roles()? == root => {
            return Ok(None);
        }
        Some(_) => {
            let credentials = credentials(account, key)?;
            auth.update_user(&name, |user| {
                user.set_credentials(credentials);
                user.set_roles(&root);
                Ok(())
            })?;
        }
    }
    Ok(auth.last_ticket())
}

/// SCRAM-SHA-1 and SCRAM-SHA-256 credentials for `key`, as `createUser` makes them.
fn credentials(account: &str, key: &str) -> Result<bson::Document, CommandError> {
    let mut doc = bson::Document::new();
    for m in Mechanism::ALL {
        let credential = make_credential(
            m,
            account,
            key,
            m.default_iteration_count(),
            SaltSource::Random,
        )
        .map_err(|e| CommandError::new(e.code, e.message))?;
        doc.insert(m.name(), credential.to_document());
    }
    Ok(doc)
}

/// Whether `user`'s stored credentials, for both mechanisms, are those of `key`.
fn key_matches(user: &User, account: &str, key: &str) -> bool {
    use base64::Engine;
    Mechanism::ALL.into_iter().all(|m| {
        let Some(stored) = user.credential(m) else {
            return false;
        };
        let Ok(salt) = base64::engine::general_purpose::STANDARD.decode(&stored.salt) else {
            return false;
        };
        make_credential(
            m,
            account,
            key,
            stored.iteration_count,
            SaltSource::Fixed(salt),
        )
        .is_ok_and(|fresh| fresh == stored)
    })
}

/// The error when the account user cannot be made.
pub fn account_error(e: &CommandError) -> io::Error {
    io::Error::other(format!(
        "cannot set up the Cosmos DB account user: {} ({})",
        e.errmsg,
        e.code.name()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_key_is_shaped_like_an_account_key() {
        use base64::Engine;
        assert_eq!(DEFAULT_KEY.len(), 88);
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(DEFAULT_KEY)
            .unwrap();
        assert_eq!(bytes.len(), 64);
    }

    #[test]
    fn resolution_is_idempotent_and_only_for_the_profile() {
        let mut plain = Config::default();
        assert!(plain.resolve_profile().unwrap().is_none());
        assert_eq!(plain.repl_set, None);
        assert!(!plain.auth);
        assert_eq!(plain.tls_mode, TlsMode::Disabled);

        let dir = tempfile::tempdir().unwrap();
        let mut config = Config {
            profile: Profile::Cosmos,
            in_memory: false,
            data_dir: dir.path().to_owned(),
            ..Config::default()
        };
        let first = config.resolve_profile().unwrap().unwrap();
        assert!(first.cert_created && first.default_key);
        assert_eq!(config.repl_set.as_deref(), Some("globaldb"));
        assert!(config.auth);
        assert_eq!(config.tls_mode, TlsMode::RequireTls);
        assert!(config.tls_allow_connections_without_certificates);
        assert_eq!(config.cosmos_key.as_deref(), Some(DEFAULT_KEY));
        assert_eq!(first.ca_file, dir.path().join(CERT_DIR).join("ca.pem"));
        let before = config.clone();
        let second = config.resolve_profile().unwrap().unwrap();
        assert!(!second.cert_created);
        assert_eq!(format!("{before:?}"), format!("{config:?}"));
    }

    #[test]
    fn connection_string_encodes_the_key() {
        let config = Config {
            profile: Profile::Cosmos,
            cosmos_account: "dev".into(),
            cosmos_key: Some("a+b/c==".into()),
            ..Config::default()
        };
        assert_eq!(
            config.cosmos_connection_string(10255),
            "mongodb://dev:a%2Bb%2Fc%3D%3D@localhost:10255/?ssl=true&replicaSet=globaldb&\
             retrywrites=false&maxIdleTimeMS=120000&appName=@dev@"
        );
    }

    #[test]
    fn account_user_follows_the_key() {
        let auth = AuthStore::in_memory();
        let name = UserName {
            user: "acct".into(),
            db: "admin".into(),
        };
        assert!(ensure_account(&auth, "acct", "k1").is_ok());
        let first = auth.user(&name).unwrap();
        assert_eq!(first.roles().unwrap(), vec![RoleName::new("root", "admin")]);
        assert!(key_matches(&first, "acct", "k1"));
        assert!(!key_matches(&first, "acct", "k2"));
        // The same key: nothing changes.
        ensure_account(&auth, "acct", "k1").unwrap();
        assert_eq!(*auth.user(&name).unwrap(), *first);
        // Another key: the credentials follow.
        ensure_account(&auth, "acct", "k2").unwrap();
        assert!(key_matches(&auth.user(&name).unwrap(), "acct", "k2"));
    }
}
