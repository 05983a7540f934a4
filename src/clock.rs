//! The server's one clock. Every expiry decision reads it; tests move it with the test-only
//! `ebbAdvanceClock` command (refused unless the server runs with `--enable-test-commands`),
//! so a 20-second TTL is tested in milliseconds. A test may also freeze it, so that "one
//! millisecond before the instant" is exact however long the test itself takes.

use std::sync::atomic::{AtomicI64, Ordering};

use tokio::sync::Notify;

/// Marks a clock that follows real time.
const RUNNING: i64 = i64::MIN;

/// Wall-clock time plus an offset that only moves forward, or a frozen instant; never below
/// its floor.
#[derive(Debug)]
pub struct Clock {
    offset_ms: AtomicI64,
    frozen_at: AtomicI64,
    /// The latest instant at which the purge judged documents expired and left them for the
    /// compaction (kept across restarts by the catalog): the clock never reads earlier, so
    /// a wall clock set back (or a restart after a test moved the clock) brings none of them
    /// back.
    floor_ms: AtomicI64,
    changed: Notify,
}

impl Default for Clock {
    fn default() -> Self {
        Clock {
            offset_ms: AtomicI64::new(0),
            frozen_at: AtomicI64::new(RUNNING),
            floor_ms: AtomicI64::new(i64::MIN),
            changed: Notify::new(),
        }
    }
}

impl Clock {
    /// Milliseconds since the epoch.
    pub fn now_ms(&self) -> i64 {
        let now = match self.frozen_at.load(Ordering::SeqCst) {
            RUNNING => bson::DateTime::now()
                .timestamp_millis()
                .saturating_add(self.offset_ms.load(Ordering::SeqCst)),
            frozen => frozen,
        };
        now.max(self.floor_ms.load(Ordering::SeqCst))
    }

    /// Makes sure the clock never reads earlier than `ms` from now on.
    pub fn raise_floor(&self, ms: i64) {
        self.floor_ms.fetch_max(ms, Ordering::SeqCst);
    }

    /// Moves the clock forward by `ms` and wakes whoever waits on [`Clock::changed`].
    pub fn advance(&self, ms: i64) {
        let ms = ms.max(0);
        if self.frozen_at.load(Ordering::SeqCst) == RUNNING {
            self.offset_ms.fetch_add(ms, Ordering::SeqCst);
        } else {
            self.frozen_at.fetch_add(ms, Ordering::SeqCst);
        }
        self.changed.notify_waiters();
    }

    /// Stops the clock at its current instant (`true`) or lets it run on from there (`false`).
    pub fn freeze(&self, frozen: bool) {
        let now = self.now_ms();
        if frozen {
            self.frozen_at.store(now, Ordering::SeqCst);
        } else if self.frozen_at.load(Ordering::SeqCst) != RUNNING {
            let real = bson::DateTime::now().timestamp_millis();
            self.offset_ms.store(
                now.saturating_sub(real)
                    .max(self.offset_ms.load(Ordering::SeqCst)),
                Ordering::SeqCst,
            );
            self.frozen_at.store(RUNNING, Ordering::SeqCst);
        }
        self.changed.notify_waiters();
    }

    /// Whether the clock is frozen.
    pub fn is_frozen(&self) -> bool {
        self.frozen_at.load(Ordering::SeqCst) != RUNNING
    }

    /// Completes when the clock is next moved.
    pub async fn changed(&self) {
        self.changed.notified().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frozen_clock_moves_only_when_advanced() {
        let clock = Clock::default();
        clock.freeze(true);
        let t = clock.now_ms();
        std::thread::sleep(std::time::Duration::from_millis(5));
        assert_eq!(clock.now_ms(), t);
        clock.advance(1000);
        assert_eq!(clock.now_ms(), t + 1000);
        clock.freeze(false);
        assert!(clock.now_ms() >= t + 1000);
        assert!(!clock.is_frozen());
    }

    #[test]
    fn the_clock_never_reads_below_its_floor() {
        let clock = Clock::default();
        let t = clock.now_ms();
        clock.raise_floor(t + 60_000);
        assert!(clock.now_ms() >= t + 60_000);
        clock.freeze(true);
        assert!(clock.now_ms() >= t + 60_000);
        clock.raise_floor(t);
        assert!(clock.now_ms() >= t + 60_000, "a floor is never lowered");
    }

    #[test]
    fn running_clock_never_goes_back() {
        let clock = Clock::default();
        let t = clock.now_ms();
        clock.advance(-50);
        assert!(clock.now_ms() >= t);
        clock.advance(60_000);
        assert!(clock.now_ms() >= t + 60_000);
    }
}
