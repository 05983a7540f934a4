//! Replica-set mode (`--replSet NAME`): Ebb is the primary of a set of one member, initiated on
//! its own, and keeps what a replica set's member reports — its name, `setVersion`, the
//! replica set id, the term and the election id, the member's host — and the logical clock that
//! stamps replies with `$clusterTime` and `operationTime`.
//!
//! Also here, for standalone and replica set alike: the topology version (`processId` and
//! `counter`) that awaitable `hello` waits on.
//!
//! The clock follows mongod's: a `Timestamp(seconds, increment)` that only moves forward, where
//! every write takes a new tick ([`ClusterClock::tick`], after its commit) and times gossiped
//! by clients (`$clusterTime`) move it forward without a write. On one member everything
//! committed is majority-committed, so the last write is also the majority write.

use std::sync::Mutex;

use bson::oid::ObjectId;
use bson::{Timestamp, rawdoc};
use tokio::sync::watch;

use crate::storage::{Batch, GroupCommit, Keyspace, StorageError};

/// The replica set's configuration version (`setVersion`): a set of one is never reconfigured.
pub const SET_VERSION: i32 = 1;

/// What a one-member replica set knows about itself.
#[derive(Debug)]
pub struct ReplSet {
    /// `setName`.
    pub name: String,
    /// The member's `host:port` (`me`, `primary`, `hosts`).
    pub host: String,
    /// `settings.replicaSetId`: made once, kept across restarts (see [`load_identity`]).
    pub replica_set_id: ObjectId,
    /// The election term: one more at each start, as each start elects the member again.
    pub term: i64,
    /// When this member became primary (its start).
    pub election_date: bson::DateTime,
    /// The optime of the election (the first tick of the clock).
    pub election_time: Timestamp,
    /// The logical clock (shared with the oplog, which times its entries with it).
    pub clock: std::sync::Arc<ClusterClock>,
    /// The oplog.
    pub oplog: std::sync::Arc<crate::oplog::Oplog>,
    /// The commit that persisted the identity, to be made durable before serving.
    pub identity_ticket: Option<u64>,
}

impl ReplSet {
    /// The set named `name`, whose member is `host`, with its identity from `store` (made and
    /// written there on the first start, its term moved on at every start).
    pub fn open(name: &str, host: String, store: &GroupCommit) -> Result<Self, StorageError> {
        let identity = load_identity(store, name)?;
        let now_ms = bson::DateTime::now().timestamp_millis();
        let last = crate::oplog::log::last_ts(&*store.storage().snapshot())?;
        let clock = std::sync::Arc::new(ClusterClock::new_after(now_ms, last));
        let election_time = clock.last_write().0;
        let oplog = std::sync::Arc::new(crate::oplog::Oplog::new(
            std::sync::Arc::clone(&clock),
            identity.term,
            last,
        ));
        oplog.set_waits_for_sync(store.storage().is_durable());
        Ok(ReplSet {
            name: name.to_owned(),
            host,
            replica_set_id: identity.replica_set_id,
            term: identity.term,
            election_date: bson::DateTime::from_millis(now_ms),
            election_time,
            clock,
            oplog,
            identity_ticket: identity.ticket,
        })
    }

    /// `electionId`: `7fffffff` followed by the term as 8 big-endian bytes, as mongod makes it
    /// in protocol version 1.
    pub fn election_id(&self) -> ObjectId {
        election_id(self.term)
    }

    /// The optime of `ts` in this term: `{ts, t}`.
    pub fn op_time(&self, ts: Timestamp) -> bson::RawDocumentBuf {
        rawdoc! { "ts": ts, "t": self.term }
    }
}

/// `electionId` of `term`.
pub fn election_id(term: i64) -> ObjectId {
    let mut bytes = [0_u8; 12];
    bytes[..4].copy_from_slice(&[0x7f, 0xff, 0xff, 0xff]);
    bytes[4..].copy_from_slice(&term.to_be_bytes());
    ObjectId::from_bytes(bytes)
}

// ---------------------------------------------------------------------------------------------
// The logical clock
// ---------------------------------------------------------------------------------------------

/// A timestamp as an ordered pair.
fn key(ts: Timestamp) -> (u32, u32) {
    (ts.time, ts.increment)
}

/// The later of two timestamps.
pub fn later(a: Timestamp, b: Timestamp) -> Timestamp {
    if key(a) >= key(b) { a } else { b }
}

/// Whether `a` comes before `b`.
pub fn before(a: Timestamp, b: Timestamp) -> bool {
    key(a) < key(b)
}

/// The cluster time and the last write, which only move forward.
#[derive(Debug)]
pub struct ClusterClock {
    state: Mutex<ClockState>,
    /// Held while a write takes its times and commits (see [`ClusterClock::stamp`]), so that
    /// writes become visible in the order of their times.
    sequence: Mutex<()>,
}

#[derive(Debug, Clone, Copy)]
struct ClockState {
    /// `$clusterTime.clusterTime`: at least `last_write`, further on when gossip moved it.
    cluster_time: Timestamp,
    /// The optime of the last write (`lastWrite.opTime`, `operationTime`).
    last_write: Timestamp,
    /// Its wall-clock time (`lastWrite.lastWriteDate`).
    last_write_wall: bson::DateTime,
}

/// Whole seconds since the epoch of `ms`, as a timestamp's seconds.
fn seconds(ms: i64) -> u32 {
    u32::try_from(ms.div_euclid(1000)).unwrap_or(if ms < 0 { 0 } else { u32::MAX })
}

/// `ts` as one ordered number: seconds in the high half, increment in the low (the oplog's
/// key).
pub fn ts_to_u64(ts: Timestamp) -> u64 {
    (u64::from(ts.time) << 32) | u64::from(ts.increment)
}

/// The timestamp of [`ts_to_u64`]'s number.
pub fn ts_from_u64(n: u64) -> Timestamp {
    Timestamp {
        time: (n >> 32) as u32,
        increment: (n & 0xFFFF_FFFF) as u32,
    }
}

impl ClusterClock {
    /// A clock whose first tick, at `now_ms`, stands for the election (mongod writes a "new
    /// primary" entry when it steps up).
    pub fn new(now_ms: i64) -> Self {
        Self::new_after(now_ms, None)
    }

    /// [`ClusterClock::new`], its first tick later than `last` (the last time written before
    /// a restart, whatever the wall clock says now).
    pub fn new_after(now_ms: i64, last: Option<Timestamp>) -> Self {
        let mut first = Timestamp {
            time: seconds(now_ms),
            increment: 1,
        };
        if let Some(last) = last
            && !before(last, first)
        {
            first = ts_from_u64(ts_to_u64(last).saturating_add(1));
        }
        ClusterClock {
            state: Mutex::new(ClockState {
                cluster_time: first,
                last_write: first,
                last_write_wall: bson::DateTime::from_millis(now_ms),
            }),
            sequence: Mutex::new(()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, ClockState> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn sequenced(&self) -> std::sync::MutexGuard<'_, ()> {
        self.sequence
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The cluster time now.
    pub fn cluster_time(&self) -> Timestamp {
        self.lock().cluster_time
    }

    /// The last write's optime and wall-clock time.
    pub fn last_write(&self) -> (Timestamp, bson::DateTime) {
        let s = self.lock();
        (s.last_write, s.last_write_wall)
    }

    /// The next `n` times after every time handed out, at `now_ms`: the seconds follow the
    /// wall clock while it is ahead, otherwise the increment grows (into the next second when
    /// it runs out). Moves the cluster time to the last of them.
    fn reserve(&self, n: u64, now_ms: i64) -> (Timestamp, Timestamp) {
        let mut s = self.lock();
        let wall = seconds(now_ms);
        let current = s.cluster_time;
        let first = if wall > current.time {
            Timestamp {
                time: wall,
                increment: 1,
            }
        } else {
            ts_from_u64(ts_to_u64(current).saturating_add(1))
        };
        let last = ts_from_u64(ts_to_u64(first).saturating_add(n.saturating_sub(1)));
        s.cluster_time = last;
        (first, last)
    }

    fn wrote(&self, last: Timestamp, now_ms: i64) {
        let mut s = self.lock();
        s.last_write = last;
        s.last_write_wall = bson::DateTime::from_millis(now_ms);
    }

    /// A write committed at `now_ms` with no oplog entry: the clock moves to a new time, later
    /// than every time handed out, and returns it (the write's optime).
    pub fn tick(&self, now_ms: i64) -> Timestamp {
        let _sequence = self.sequenced();
        let (_, last) = self.reserve(1, now_ms);
        self.wrote(last, now_ms);
        last
    }

    /// A write of `n ≥ 1` oplog entries at `now_ms`: `apply` commits them, given the first of
    /// their `n` consecutive times (as [`ts_to_u64`] numbers); no other write takes times or
    /// commits meanwhile, so that writes become visible in time order, and the last write is
    /// the last of them once `apply` succeeded. Returns the last time.
    pub fn stamp<E>(
        &self,
        n: u64,
        now_ms: i64,
        apply: impl FnOnce(u64) -> Result<(), E>,
    ) -> Result<Timestamp, E> {
        let _sequence = self.sequenced();
        let (first, last) = self.reserve(n.max(1), now_ms);
        apply(ts_to_u64(first))?;
        self.wrote(last, now_ms);
        Ok(last)
    }

    /// A client gossiped `ts` (`$clusterTime`): the cluster time moves forward to it.
    pub fn advance(&self, ts: Timestamp) {
        let mut s = self.lock();
        s.cluster_time = later(s.cluster_time, ts);
    }
}

// ---------------------------------------------------------------------------------------------
// The topology version (standalone too)
// ---------------------------------------------------------------------------------------------

/// `topologyVersion`: the process id and a counter that moves when what `hello` reports
/// changes, which awaitable `hello` waits on.
#[derive(Debug)]
pub struct Topology {
    /// `processId`: fixed for the life of the process.
    pub process_id: ObjectId,
    counter: watch::Sender<i64>,
}

impl Topology {
    /// The topology of a process whose id is `process_id`, at counter 0.
    pub fn new(process_id: ObjectId) -> Self {
        Topology {
            process_id,
            counter: watch::Sender::new(0),
        }
    }

    /// The counter now.
    pub fn counter(&self) -> i64 {
        *self.counter.borrow()
    }

    /// `{processId, counter}`.
    pub fn version(&self) -> bson::RawDocumentBuf {
        rawdoc! { "processId": self.process_id, "counter": self.counter() }
    }

    /// A receiver that sees the counter move.
    pub fn subscribe(&self) -> watch::Receiver<i64> {
        self.counter.subscribe()
    }

    /// What `hello` reports changed: the counter moves and waiting `hello`s answer.
    pub fn changed(&self) {
        self.counter.send_modify(|c| *c = c.saturating_add(1));
    }
}

// ---------------------------------------------------------------------------------------------
// Persistence
// ---------------------------------------------------------------------------------------------

/// `0x0B` in the catalog keyspace: the replica set's identity, a BSON document
/// `{setName, replicaSetId, term}`.
const IDENTITY_KEY: [u8; 1] = [0x0B];

/// What [`load_identity`] found or made.
#[derive(Debug, Clone, Copy)]
pub struct Identity {
    /// `settings.replicaSetId`.
    pub replica_set_id: ObjectId,
    /// The term of this start.
    pub term: i64,
    /// The commit that wrote it.
    pub ticket: Option<u64>,
}

/// The identity of the set `name` in `store`: the stored one with its term moved on by one, or,
/// on a first start (or a store last used by a set of another name), a new replica set id at
/// term 1. Written back before it is returned, so that a restart finds it.
pub fn load_identity(store: &GroupCommit, name: &str) -> Result<Identity, StorageError> {
    let stored = store
        .storage()
        .get(Keyspace::Catalog, &IDENTITY_KEY)?
        .and_then(|bytes| bson::RawDocumentBuf::from_bytes(bytes.to_vec()).ok())
        .and_then(|doc| {
            let same_set = doc.get_str("setName").ok() == Some(name);
            let id = doc.get_object_id("replicaSetId").ok()?;
            let term = doc.get_i64("term").ok()?;
            same_set.then_some((id, term))
        });
    let (replica_set_id, term) = match stored {
        Some((id, term)) => (id, term.saturating_add(1).max(1)),
        None => (ObjectId::new(), 1),
    };
    let doc = rawdoc! { "setName": name, "replicaSetId": replica_set_id, "term": term };
    let mut batch = Batch::new();
    batch.put(Keyspace::Catalog, IDENTITY_KEY.to_vec(), doc.into_bytes());
    let ticket = store.commit(batch)?;
    Ok(Identity {
        replica_set_id,
        term,
        ticket: Some(ticket),
    })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use bson::Timestamp;

    use super::*;
    use crate::storage::MemoryStorage;

    fn ts(time: u32, increment: u32) -> Timestamp {
        Timestamp { time, increment }
    }

    #[test]
    fn election_id_is_7fffffff_and_the_term() {
        assert_eq!(election_id(1).to_hex(), "7fffffff0000000000000001");
        assert_eq!(election_id(300).to_hex(), "7fffffff000000000000012c");
    }

    #[test]
    fn ticks_are_monotonic_and_follow_the_wall_clock() {
        let clock = ClusterClock::new(10_500);
        assert_eq!(clock.cluster_time(), ts(10, 1));
        assert_eq!(clock.tick(10_900), ts(10, 2));
        assert_eq!(clock.tick(10_999), ts(10, 3));
        assert_eq!(clock.tick(12_000), ts(12, 1));
        // The wall clock going back does not move the clock back.
        assert_eq!(clock.tick(5_000), ts(12, 2));
        assert_eq!(clock.last_write().0, ts(12, 2));
        assert_eq!(clock.last_write().1.timestamp_millis(), 5_000);
    }

    #[test]
    fn gossip_moves_the_cluster_time_not_the_last_write() {
        let clock = ClusterClock::new(10_000);
        clock.advance(ts(50, 7));
        assert_eq!(clock.cluster_time(), ts(50, 7));
        assert_eq!(clock.last_write().0, ts(10, 1));
        // An older gossiped time changes nothing.
        clock.advance(ts(20, 1));
        assert_eq!(clock.cluster_time(), ts(50, 7));
        // The next write comes after the gossiped time.
        assert_eq!(clock.tick(11_000), ts(50, 8));
    }

    #[test]
    fn the_clock_never_overflows() {
        let clock = ClusterClock::new(0);
        clock.advance(ts(u32::MAX, u32::MAX));
        // At the very end of time the clock stays there: it never wraps nor goes back.
        assert_eq!(clock.tick(0), ts(u32::MAX, u32::MAX));
        clock.advance(ts(7, u32::MAX));
        assert!(!before(clock.tick(0), ts(u32::MAX, 1)));
        let clock = ClusterClock::new(i64::MIN);
        assert_eq!(clock.cluster_time(), ts(0, 1));
        let clock = ClusterClock::new(i64::MAX);
        assert_eq!(clock.cluster_time().time, u32::MAX);
    }

    #[test]
    fn the_identity_survives_and_the_term_moves_on() {
        let store = GroupCommit::new(Arc::new(MemoryStorage::new()));
        let first = load_identity(&store, "rs0").unwrap();
        assert_eq!(first.term, 1);
        let second = load_identity(&store, "rs0").unwrap();
        assert_eq!(second.replica_set_id, first.replica_set_id);
        assert_eq!(second.term, 2);
        // Another set's name: a new set.
        let other = load_identity(&store, "other").unwrap();
        assert_ne!(other.replica_set_id, first.replica_set_id);
        assert_eq!(other.term, 1);
        store.shutdown();
    }

    #[test]
    fn topology_counter_moves_and_wakes() {
        let topology = Topology::new(ObjectId::new());
        let rx = topology.subscribe();
        assert_eq!(topology.counter(), 0);
        topology.changed();
        assert_eq!(topology.counter(), 1);
        assert!(rx.has_changed().unwrap());
    }
}
