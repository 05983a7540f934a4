//! The logical sessions the server knows of, as `$listLocalSessions` lists them.
//!
//! Here a session is only an id and the last time a command used it (what its retryable writes
//! and transactions executed is kept by `crate::retryable`, durably). A command that carries an
//! `lsid` records its session (mongod's logical session cache does the same), `endSessions`
//! forgets sessions, and a session unused for `logicalSessionTimeoutMinutes` expires: the
//! server's session reaper (`crate::server`) aborts its open transaction, kills its cursors,
//! deletes its durable records and forgets it, as mongod's session cache refresh and
//! transaction reaper do together.
//!
//! A session whose records were found on disk at startup is known here too, as *dormant*, and
//! expires `logicalSessionTimeoutMinutes` after its last use unless a command uses it again.
//! Its last use is on disk when the server last shut down cleanly (written then, for every
//! session with records: recording it at each use would cost retryable writes a write each);
//! after a crash it counts as used at startup. mongod keeps `lastUse` in
//! `config.system.sessions`, written by its periodic refresh, instead; a server that crashes
//! more often than the timeout keeps such records longer here (each session keeps only its
//! last transaction number's). Dormant sessions are not listed: after a restart mongod's local
//! cache does not list them either.

use std::collections::HashMap;
use std::sync::Mutex;

use bson::RawBsonRef;

/// `logicalSessionTimeoutMinutes` in milliseconds: sessions idle longer are forgotten.
pub const SESSION_TIMEOUT_MS: i64 = 30 * 60 * 1000;

/// A session id: the 16 bytes of `lsid.id` (a UUID).
pub type SessionId = [u8; 16];

/// The known sessions and when each was last used (ms since the epoch).
#[derive(Debug, Default)]
pub struct Sessions {
    known: Mutex<Known>,
}

#[derive(Debug, Default)]
struct Known {
    /// Sessions commands used in this run, with their last use.
    last_use: HashMap<SessionId, i64>,
    /// Sessions known only from their records on disk, with the instant they count as last
    /// used (the startup).
    dormant: HashMap<SessionId, i64>,
}

fn is_idle(last_use: i64, now_ms: i64) -> bool {
    now_ms.saturating_sub(last_use) >= SESSION_TIMEOUT_MS
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
    fn known(&self) -> std::sync::MutexGuard<'_, Known> {
        self.known
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Records that a command used session `id` at `now_ms`.
    pub fn touch(&self, id: SessionId, now_ms: i64) {
        let mut known = self.known();
        if !known.dormant.is_empty() {
            known.dormant.remove(&id);
        }
        known.last_use.insert(id, now_ms);
    }

    /// Forgets session `id` (`endSessions`).
    pub fn end(&self, id: &SessionId) {
        let mut known = self.known();
        known.last_use.remove(id);
        known.dormant.remove(id);
    }

    /// The sessions used within the timeout before `now_ms`, with their last use, sorted by
    /// id.
    pub fn list(&self, now_ms: i64) -> Vec<(SessionId, i64)> {
        let known = self.known();
        let mut out: Vec<(SessionId, i64)> = known
            .last_use
            .iter()
            .filter(|(_, last)| !is_idle(**last, now_ms))
            .map(|(id, last)| (*id, *last))
            .collect();
        out.sort_unstable();
        out
    }

    /// Adds sessions whose records were found on disk as dormant, each with the instant it
    /// counts as last used (those a command has used meanwhile are known already).
    pub fn add_dormant(&self, sessions: impl IntoIterator<Item = (SessionId, i64)>) {
        let mut known = self.known();
        for (id, at_ms) in sessions {
            if !known.last_use.contains_key(&id) {
                known.dormant.entry(id).or_insert(at_ms);
            }
        }
    }

    /// Every session known, live or dormant, with its last use (written to disk at shutdown).
    pub fn all(&self) -> Vec<(SessionId, i64)> {
        let known = self.known();
        known
            .last_use
            .iter()
            .chain(&known.dormant)
            .map(|(id, last)| (*id, *last))
            .collect()
    }

    /// The sessions, live or dormant, unused for the timeout at `now_ms`.
    pub fn idle(&self, now_ms: i64) -> Vec<SessionId> {
        let known = self.known();
        known
            .last_use
            .iter()
            .chain(&known.dormant)
            .filter(|(_, last)| is_idle(**last, now_ms))
            .map(|(id, _)| *id)
            .collect()
    }

    /// Whether session `id` is unknown or unused for the timeout at `now_ms`.
    pub fn is_idle(&self, id: &SessionId, now_ms: i64) -> bool {
        let known = self.known();
        known
            .last_use
            .get(id)
            .or_else(|| known.dormant.get(id))
            .is_none_or(|last| is_idle(*last, now_ms))
    }

    /// Forgets those of `ids` still unused for the timeout at `now_ms` (a command may have
    /// used one since they were picked).
    pub fn forget_idle<'a>(&self, ids: impl IntoIterator<Item = &'a SessionId>, now_ms: i64) {
        let mut known = self.known();
        for id in ids {
            if known
                .last_use
                .get(id)
                .is_some_and(|last| is_idle(*last, now_ms))
            {
                known.last_use.remove(id);
            }
            if known
                .dormant
                .get(id)
                .is_some_and(|last| is_idle(*last, now_ms))
            {
                known.dormant.remove(id);
            }
        }
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
        // Listing forgets nothing: the reaper still finds the session to expire.
        assert_eq!(sessions.idle(3_000 + SESSION_TIMEOUT_MS), vec![[1; 16]]);
    }

    #[test]
    fn idle_sessions_expire_at_the_timeout_unless_used_again() {
        let sessions = Sessions::default();
        let t = 1_000_000;
        sessions.touch([1; 16], t);
        sessions.touch([2; 16], t + 10);
        assert!(sessions.idle(t + SESSION_TIMEOUT_MS - 1).is_empty());
        assert_eq!(sessions.idle(t + SESSION_TIMEOUT_MS), vec![[1; 16]]);
        assert!(sessions.is_idle(&[1; 16], t + SESSION_TIMEOUT_MS));
        assert!(!sessions.is_idle(&[2; 16], t + SESSION_TIMEOUT_MS));
        assert!(sessions.is_idle(&[3; 16], t), "an unknown session");
        // Picked as idle, then used before the reaper forgets it: it stays.
        let picked = sessions.idle(t + SESSION_TIMEOUT_MS + 10);
        assert_eq!(picked.len(), 2);
        sessions.touch([2; 16], t + SESSION_TIMEOUT_MS + 10);
        sessions.forget_idle(&picked, t + SESSION_TIMEOUT_MS + 10);
        assert_eq!(
            sessions.list(t + SESSION_TIMEOUT_MS + 10),
            vec![([2; 16], t + SESSION_TIMEOUT_MS + 10)]
        );
        assert!(sessions.idle(t + SESSION_TIMEOUT_MS + 10).is_empty());
    }

    #[test]
    fn dormant_sessions_count_as_used_at_startup_and_are_not_listed() {
        let sessions = Sessions::default();
        let start = 5_000_000;
        sessions.touch([1; 16], start - 1);
        sessions.add_dormant([([1; 16], start), ([2; 16], start), ([3; 16], start)]);
        assert_eq!(sessions.list(start), vec![([1; 16], start - 1)]);
        // A command uses one of them: it is live from then on.
        sessions.touch([3; 16], start + 100);
        assert_eq!(sessions.list(start + 100).len(), 2);
        let mut idle = sessions.idle(start + SESSION_TIMEOUT_MS);
        idle.sort_unstable();
        assert_eq!(idle, vec![[1; 16], [2; 16]]);
        sessions.forget_idle(&idle, start + SESSION_TIMEOUT_MS);
        assert!(
            sessions
                .idle(start + SESSION_TIMEOUT_MS + 100)
                .contains(&[3; 16])
        );
        sessions.forget_idle(&[[3; 16]], start + SESSION_TIMEOUT_MS + 100);
        assert!(sessions.idle(i64::MAX).is_empty());
        // endSessions forgets a dormant session too.
        sessions.add_dormant([([4; 16], start)]);
        assert_eq!(sessions.all(), vec![([4; 16], start)]);
        sessions.end(&[4; 16]);
        assert!(sessions.idle(i64::MAX).is_empty());
        assert!(sessions.all().is_empty());
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
