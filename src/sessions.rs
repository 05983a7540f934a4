//! The logical sessions the server knows of, as `$listLocalSessions` lists them.
//!
//! Here a session is only an id and the last time a command used it (what its retryable writes
//! executed is kept by `crate::retryable`, durably). A command that carries an `lsid` records
//! its session (mongod's logical session cache does the same), `endSessions` forgets sessions,
//! and a session unused for `logicalSessionTimeoutMinutes` is forgotten too.

use std::collections::HashMap;
use std::sync::Mutex;

use bson::RawBsonRef;

/// `logicalSessionTimeoutMinutes` in milliseconds: sessions idle longer are forgotten.
pub const SESSION_TIMEOUT_MS: i64 = 30 * 60 * 1000;
/// Past this many sessions, recording a new one first forgets the idle ones.
const PRUNE_ABOVE: usize = 10_000;

/// A session id: the 16 bytes of `lsid.id` (a UUID).
pub type SessionId = [u8; 16];

/// The known sessions and when each was last used (ms since the epoch).
#[derive(Debug, Default)]
pub struct Sessions {
    last_use: Mutex<HashMap<SessionId, i64>>,
}

/// `uid` of every session when authentication is off: the SHA-256 of no user names, in base64,
/// as mongod shows it.
const NO_USER_UID: &str = "47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=";

/// A session as mongod writes one in messages: `<id as a UUID> - <uid in base64> -  - ` (the
/// empty parts are the transaction fields of internal sessions).
pub fn display(id: &SessionId) -> String {
    let hex = id.iter().fold(String::with_capacity(32), |mut hex, b| {
        use std::fmt::Write as _;
        let _ = write!(hex, "{b:02x}");
        hex
    });
    let part = |r: std::ops::Range<usize>| hex.get(r).unwrap_or_default();
    format!(
        "{}-{}-{}-{}-{} - {NO_USER_UID} -  - ",
        part(0..8),
        part(8..12),
        part(12..16),
        part(16..20),
        part(20..32)
    )
}

/// The session id of an `lsid` value (`{id: UUID, …}`), if it holds one.
pub fn session_id(lsid: RawBsonRef<'_>) -> Option<SessionId> {
    let RawBsonRef::Document(lsid) = lsid else {
        return None;
    };
    match lsid.get("id").ok().flatten()? {
        RawBsonRef::Binary(b) if b.subtype == bson::spec::BinarySubtype::Uuid => {
            SessionId::try_from(b.bytes).ok()
        }
        _ => None,
    }
}

impl Sessions {
    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<SessionId, i64>> {
        self.last_use
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Records that a command used session `id` at `now_ms`.
    pub fn touch(&self, id: SessionId, now_ms: i64) {
        let mut map = self.map();
        if map.len() >= PRUNE_ABOVE && !map.contains_key(&id) {
            map.retain(|_, last| now_ms.saturating_sub(*last) < SESSION_TIMEOUT_MS);
        }
        map.insert(id, now_ms);
    }

    /// Forgets session `id` (`endSessions`).
    pub fn end(&self, id: &SessionId) {
        self.map().remove(id);
    }

    /// The sessions used within the timeout before `now_ms`, with their last use, sorted by
    /// id.
    pub fn list(&self, now_ms: i64) -> Vec<(SessionId, i64)> {
        let mut map = self.map();
        map.retain(|_, last| now_ms.saturating_sub(*last) < SESSION_TIMEOUT_MS);
        let mut out: Vec<(SessionId, i64)> = map.iter().map(|(id, last)| (*id, *last)).collect();
        out.sort_unstable();
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn touch_end_and_timeout() {
        let sessions = Sessions::default();
        sessions.touch([1; 16], 1_000);
        sessions.touch([2; 16], 2_000);
        sessions.touch([1; 16], 3_000);
        assert_eq!(
            sessions.list(3_000),
            vec![([1; 16], 3_000), ([2; 16], 2_000)]
        );
        sessions.end(&[2; 16]);
        assert_eq!(sessions.list(3_000), vec![([1; 16], 3_000)]);
        assert!(sessions.list(3_000 + SESSION_TIMEOUT_MS).is_empty());
    }

    #[test]
    fn session_id_reads_uuid_ids_only() {
        let uuid = bson::Binary {
            subtype: bson::spec::BinarySubtype::Uuid,
            bytes: vec![7; 16],
        };
        let lsid = bson::rawdoc! { "id": uuid };
        assert_eq!(session_id(RawBsonRef::Document(&lsid)), Some([7; 16]));
        let not_uuid = bson::rawdoc! { "id": 5 };
        assert_eq!(session_id(RawBsonRef::Document(&not_uuid)), None);
        assert_eq!(session_id(RawBsonRef::Int32(1)), None);
    }
}
