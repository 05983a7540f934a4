//! Which open transaction holds which key.
//!
//! A transaction claims every key it writes before the write joins its pending changes: the
//! record of each document it changes or deletes, the `_id` entry of each document it inserts,
//! and each key of a unique index it adds (a key of its own, not a stored one: two documents
//! holding one unique key have different entries). The claims last until the transaction
//! commits or aborts. A second transaction claiming a held key gets `WriteConflict`; a write
//! outside transactions that meets one waits for the holder to end and runs again, as mongod's
//! writes retry on a write conflict.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::sync::watch;

use crate::storage::Keyspace;

/// The first byte of the claim on a unique index key (storage keys start with their
/// keyspace's number, all lower).
const UNIQUE_KEY: u8 = 0xFF;

/// The claim on `key` of `ks`.
pub fn storage_claim(ks: Keyspace, key: &[u8]) -> Vec<u8> {
    let mut claim = Vec::with_capacity(1 + key.len());
    let slot = Keyspace::ALL.iter().position(|k| *k == ks).unwrap_or(0);
    claim.push(u8::try_from(slot).unwrap_or(u8::MAX - 1));
    claim.extend_from_slice(key);
    claim
}

/// The claim on key `components` of unique index `index_id`.
pub fn unique_claim(index_id: u64, components: &[u8]) -> Vec<u8> {
    let mut claim = Vec::with_capacity(9 + components.len());
    claim.push(UNIQUE_KEY);
    claim.extend_from_slice(&index_id.to_be_bytes());
    claim.extend_from_slice(components);
    claim
}

/// The keys open transactions hold.
#[derive(Debug)]
pub struct LockTable {
    held: Mutex<HashMap<Vec<u8>, u64>>,
    /// How many keys are held: writes outside transactions look no further while it is 0.
    count: AtomicUsize,
    /// Counts releases: a blocked writer waits for it to move past what it saw.
    released: watch::Sender<u64>,
}

impl Default for LockTable {
    fn default() -> Self {
        LockTable {
            held: Mutex::new(HashMap::new()),
            count: AtomicUsize::new(0),
            released: watch::channel(0).0,
        }
    }
}

/// What claiming a key found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Claim {
    /// The key is now held by the claimant, and was not before.
    New,
    /// The claimant held it already.
    Held,
    /// Another transaction holds it.
    Conflict,
}

impl LockTable {
    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<Vec<u8>, u64>> {
        self.held
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Whether any key is held at all.
    pub fn any(&self) -> bool {
        self.count.load(Ordering::Acquire) > 0
    }

    /// Transaction `txn` claims `claim`.
    pub fn claim(&self, claim: &[u8], txn: u64) -> Claim {
        let mut map = self.map();
        match map.get(claim) {
            Some(&holder) if holder == txn => Claim::Held,
            Some(_) => Claim::Conflict,
            None => {
                map.insert(claim.to_vec(), txn);
                self.count.fetch_add(1, Ordering::AcqRel);
                Claim::New
            }
        }
    }

    /// If a transaction holds `claim`: the release count to wait past (see
    /// [`LockTable::wait_release`]) before trying again.
    pub fn blocked(&self, claim: &[u8]) -> Option<u64> {
        if !self.any() {
            return None;
        }
        let map = self.map();
        // Read under the map's lock: a release after this moves the count past it.
        map.contains_key(claim).then(|| *self.released.borrow())
    }

    /// Transaction `txn` lets go of `claims`.
    pub fn release(&self, claims: &[Vec<u8>], txn: u64) {
        if claims.is_empty() {
            return;
        }
        {
            let mut map = self.map();
            for claim in claims {
                if map.get(claim) == Some(&txn) {
                    map.remove(claim);
                    self.count.fetch_sub(1, Ordering::AcqRel);
                }
            }
            self.released.send_modify(|n| *n = n.wrapping_add(1));
        }
    }

    /// Waits until some transaction has released its keys since the release count was `seen`.
    pub async fn wait_release(&self, seen: u64) {
        let mut rx = self.released.subscribe();
        let _ = rx.wait_for(|n| *n != seen).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_has_one_holder_until_it_lets_go() {
        let table = LockTable::default();
        let key = storage_claim(Keyspace::Docs, b"k");
        assert!(!table.any());
        assert_eq!(table.blocked(&key), None);
        assert_eq!(table.claim(&key, 1), Claim::New);
        assert_eq!(table.claim(&key, 1), Claim::Held);
        assert_eq!(table.claim(&key, 2), Claim::Conflict);
        let seen = table.blocked(&key).unwrap();
        // Another transaction's release of keys it does not hold leaves the key held.
        table.release(std::slice::from_ref(&key), 2);
        assert_eq!(table.claim(&key, 2), Claim::Conflict);
        table.release(std::slice::from_ref(&key), 1);
        assert!(!table.any());
        assert_eq!(table.claim(&key, 2), Claim::New);
        // The waiter for the first holder is woken by a release after what it saw.
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(table.wait_release(seen));
        assert_ne!(unique_claim(1, b"a"), storage_claim(Keyspace::Index, b"a"));
    }
}
