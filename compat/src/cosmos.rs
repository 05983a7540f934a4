//! Cosmos DB profile cases: `compat/cosmos/*.json`, each run on its own fresh in-process server
//! with `--profile cosmos` (and test commands, for the clock), three times: through the
//! `mongodb` crate, mongosh and pymongo.
//!
//! A case file has the TTL cases' format and rules (see [`crate::ttl`]): `source` (the page
//! the case comes from), `description`, `db`, `collection` and `steps` (commands with the reply
//! they expect, clock moves, `_id`/count checks), the first step freezing the clock. An error
//! is expected like any reply, as a subset of `{ok: 0, code, codeName, errmsg}`, e.g.
//! `{"ok": 0, "code": 115, "codeName": "CommandNotSupported"}`.
//!
//! The three clients compare alike: an object matches a document holding at least its keys;
//! an array matches item by item, same length; a plain JSON number matches any numeric BSON
//! type of that value (int32, int64, double, decimal128), so `{"n": 2}` holds whatever type
//! a client decodes; a type wrapper (`{"$numberLong": "20"}`, `{"$numberDouble": "20.0"}`,
//! `{"$date": …}`) matches only that BSON type and value. Each interpreter keeps the types
//! apart: the `mongodb` crate reads `Bson` values, mongosh runs with `promoteValues: false`,
//! pymongo reads int32 as `int`, int64 as `Int64` and dates as `DatetimeMS`. Case JSON becomes
//! BSON the same way in all three: a plain integral number is an int32 (an int64 beyond its
//! range), any other number a double.
//!
//! Every client reaches the server through [`uri`], the one place that knows how: when the
//! profile serves TLS and the account's user, [`Access`] carries them.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

/// What a client needs to reach a profile server besides its port: the account's user and
/// key (SCRAM), and the CA that signed the server's certificate (TLS). `None` for each while
/// the profile serves neither.
#[derive(Debug, Clone, Default)]
pub struct Access {
    /// The account (user name) and its key (password).
    pub user: Option<(String, String)>,
    /// The CA file clients trust.
    pub ca_file: Option<PathBuf>,
}

/// The connection string every client of a profile case uses. With the account's user, it is
/// Cosmos DB's own (as Azure's portal gives it, with only the host changed): `ssl=true`,
/// `replicaSet=globaldb` (clients discover the member from `hello`), `retrywrites=false`,
/// `maxIdleTimeMS=120000`, `appName=@ACCOUNT@` (its `@` written `%40`, as the Node driver
/// wants), plus the CA file to trust.
pub fn uri(port: u16, access: &Access) -> String {
    let Some((user, key)) = &access.user else {
        return format!(
            "mongodb://127.0.0.1:{port}/?directConnection=true&serverSelectionTimeoutMS=5000"
        );
    };
    let mut uri = format!(
        "mongodb://{}:{}@localhost:{port}/?ssl=true&replicaSet=globaldb&retrywrites=false\
         &maxIdleTimeMS=120000&appName=%40{}%40&serverSelectionTimeoutMS=5000",
        percent_encode(user),
        percent_encode(key),
        percent_encode(user),
    );
    if let Some(ca) = &access.ca_file {
        uri.push_str("&tlsCAFile=");
        uri.push_str(&percent_encode(&ca.display().to_string()));
    }
    uri
}

/// `text` with every byte outside RFC 3986's unreserved set percent-encoded, as a connection
/// string's user, password and option values need (a Cosmos DB key holds `+`, `/` and `=`).
fn percent_encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(byte));
        } else {
            let _ = write!(out, "%{byte:02X}");
        }
    }
    out
}

/// Checks a case file (the TTL cases' checks).
pub fn load(path: &Path) -> Result<crate::ttl::TtlCase> {
    crate::ttl::load(path).context("invalid case file")
}

/// Replays a case through the `mongodb` crate against the server at `uri`.
pub async fn run_with_driver(case: &crate::ttl::TtlCase, uri: &str) -> Result<()> {
    crate::ttl::run_with_driver(case, uri).await
}

/// Marks the line `run_case.py` prints when every step held.
pub const PYTHON_PASS: &str = "ebb-cosmos-case: PASS";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_case_file_loads() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("cosmos");
        let mut n = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().and_then(|e| e.to_str()) == Some("json") {
                load(&path).unwrap_or_else(|e| panic!("{}: {e:#}", path.display()));
                n += 1;
            }
        }
        assert!(n > 0, "no cases under {}", dir.display());
    }

    #[test]
    fn the_uri_carries_what_access_gives() {
        assert_eq!(
            uri(10255, &Access::default()),
            "mongodb://127.0.0.1:10255/?directConnection=true&serverSelectionTimeoutMS=5000"
        );
        let access = Access {
            user: Some(("localhost".into(), "a+b/c==".into())),
            ca_file: Some(PathBuf::from("/data/ca.pem")),
        };
        assert_eq!(
            uri(10255, &access),
            "mongodb://localhost:a%2Bb%2Fc%3D%3D@localhost:10255/?ssl=true&replicaSet=globaldb\
             &retrywrites=false&maxIdleTimeMS=120000&appName=%40localhost%40\
             &serverSelectionTimeoutMS=5000&tlsCAFile=%2Fdata%2Fca.pem"
        );
    }
}
