//! Provisioned throughput enforced: each budget ([`Scope`]) may spend its request units a
//! second; a request that arrives when its budget for the current second is spent is
//! throttled (`docs/cosmos-request-units.md`).
//!
//! As Cosmos DB does, a request is charged what it consumed, after it ran: one admitted with
//! a little budget left may overdraw it, and the overdraft is paid from the seconds after (a
//! request waits until it is paid). Budgets are kept in whole seconds of a monotonic clock.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::time::Instant;

use super::offers::{Budget, Scope};

/// One budget's account for the current second.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Window {
    /// The second (of the throttle's clock) the account is for.
    second: u64,
    /// Request units spent and not yet paid by the seconds gone by (may exceed the budget).
    spent: f64,
    /// Request units consumed in the current second (without an overdraft carried in).
    consumed: f64,
    /// Request units consumed in the second before.
    previous: f64,
}

impl Window {
    /// Moves the account to second `now_s`: each second gone by pays `per_second` of what was
    /// spent.
    fn advance(&mut self, now_s: u64, per_second: f64) {
        if now_s <= self.second {
            return;
        }
        let gone = now_s - self.second;
        #[expect(clippy::cast_precision_loss, reason = "seconds since start")]
        let paid = per_second * gone as f64;
        self.spent = (self.spent - paid).max(0.0);
        self.previous = if gone == 1 { self.consumed } else { 0.0 };
        self.consumed = 0.0;
        self.second = now_s;
    }

    /// Whether a request arriving at `now_ms` may run on a budget of `per_second`; if not, the
    /// milliseconds until it may (`RetryAfterMs`, at least 1).
    pub fn admit(&mut self, now_ms: u64, per_second: f64) -> Result<(), u64> {
        let per_second = per_second.max(1.0);
        self.advance(now_ms / 1000, per_second);
        if self.spent < per_second {
            return Ok(());
        }
        // After n more seconds, `spent - n × per_second` is left: below the budget once
        // n > spent / per_second - 1.
        #[expect(
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss,
            reason = "a positive, bounded number of seconds"
        )]
        let seconds = ((self.spent - per_second) / per_second).floor().min(1e9) as u64 + 1;
        let until = self.second.saturating_add(seconds).saturating_mul(1000);
        Err(until.saturating_sub(now_ms).max(1))
    }

    /// Charges `ru` consumed by a request that ended at `now_ms`.
    pub fn charge(&mut self, now_ms: u64, per_second: f64, ru: f64) {
        self.advance(now_ms / 1000, per_second.max(1.0));
        self.spent += ru;
        self.consumed += ru;
    }

    /// The throughput an autoscale budget of at most `max` runs at now: what the last second
    /// consumed, between 10% and 100% of `max` (Cosmos DB scales instantly within that range,
    /// so only `max` throttles).
    pub fn autoscaled(&self, max: f64) -> f64 {
        self.previous.max(self.consumed).clamp(max * 0.1, max)
    }
}

/// What was charged and throttled on one collection.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Usage {
    /// Requests charged.
    pub requests: u64,
    /// Request units charged.
    pub request_units: f64,
    /// Requests answered with a rate-limiting error (each attempt, as Cosmos DB's metrics
    /// count them, server-side retries included).
    pub throttled: u64,
}

/// The budgets in force and what they were charged.
#[derive(Debug)]
pub struct Throttle {
    start: Instant,
    windows: Mutex<HashMap<Scope, Window>>,
    usage: Mutex<BTreeMap<(String, String), Usage>>,
}

impl Default for Throttle {
    fn default() -> Self {
        Throttle {
            start: Instant::now(),
            windows: Mutex::new(HashMap::new()),
            usage: Mutex::new(BTreeMap::new()),
        }
    }
}

fn per_second(budget: &Budget) -> f64 {
    f64::from(budget.ru_per_second)
}

impl Throttle {
    /// Milliseconds on the throttle's clock.
    pub fn now_ms(&self) -> u64 {
        u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    fn windows(&self) -> std::sync::MutexGuard<'_, HashMap<Scope, Window>> {
        self.windows
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn usage(&self) -> std::sync::MutexGuard<'_, BTreeMap<(String, String), Usage>> {
        self.usage
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Whether a request on `budget` may run now; if not, `RetryAfterMs`.
    pub fn admit(&self, budget: &Budget) -> Result<(), u64> {
        let now = self.now_ms();
        let rate = per_second(budget);
        self.windows()
            .entry(budget.scope.clone())
            .or_default()
            .admit(now, rate)
    }

    /// Charges `ru` to `budget`, and to `db.coll`'s usage.
    pub fn charge(&self, budget: &Budget, db: &str, coll: &str, ru: f64) {
        let now = self.now_ms();
        let rate = per_second(budget);
        self.windows()
            .entry(budget.scope.clone())
            .or_default()
            .charge(now, rate, ru);
        let mut usage = self.usage();
        let u = usage.entry((db.to_owned(), coll.to_owned())).or_default();
        u.requests += 1;
        u.request_units += ru;
    }

    /// Counts a throttled request on `db.coll`.
    pub fn note_throttled(&self, db: &str, coll: &str) {
        let mut usage = self.usage();
        usage
            .entry((db.to_owned(), coll.to_owned()))
            .or_default()
            .throttled += 1;
    }

    /// What each collection was charged and throttled, by database and collection.
    pub fn usage_by_collection(&self) -> Vec<((String, String), Usage)> {
        self.usage().iter().map(|(k, v)| (k.clone(), *v)).collect()
    }

    /// The throughput `budget` runs at now (autoscale: see [`Window::autoscaled`]).
    pub fn current_throughput(&self, budget: &Budget) -> f64 {
        let rate = per_second(budget);
        if !budget.autoscale {
            return rate;
        }
        let now = self.now_ms();
        let mut windows = self.windows();
        let window = windows.entry(budget.scope.clone()).or_default();
        window.advance(now / 1000, rate);
        window.autoscaled(rate)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_budget_is_spent_then_paid_by_the_next_second() {
        let mut w = Window::default();
        // 400 RU/s: 39 requests of 10 RU pass, the 40th brings it to 400.
        for _ in 0..40 {
            assert_eq!(w.admit(100, 400.0), Ok(()));
            w.charge(100, 400.0, 10.0);
        }
        // Spent: throttled until the next second.
        assert_eq!(w.admit(250, 400.0), Err(750));
        assert_eq!(w.admit(999, 400.0), Err(1));
        assert_eq!(w.admit(1000, 400.0), Ok(()));
    }

    #[test]
    fn an_overdraft_is_paid_by_the_seconds_after() {
        let mut w = Window::default();
        assert_eq!(w.admit(0, 400.0), Ok(()));
        // One request of 1,000 RU: 600 over; paid by second 1 (400) and 2 (200 of 400).
        w.charge(10, 400.0, 1000.0);
        assert_eq!(w.admit(500, 400.0), Err(1500));
        assert_eq!(w.admit(1500, 400.0), Err(500));
        assert_eq!(w.admit(2000, 400.0), Ok(()));
        w.charge(2000, 400.0, 150.0);
        // 200 left over + 150 = 350 < 400: still admitted.
        assert_eq!(w.admit(2001, 400.0), Ok(()));
        // Seconds with no request pay too, but never below nothing.
        assert_eq!(w.admit(60_000, 400.0), Ok(()));
        assert!(w.spent.abs() < 1e-9);
    }

    #[test]
    fn over_a_run_the_accepted_rate_is_the_budget() {
        // Requests of 7 RU every 5 ms (1,400 RU/s offered) against 400 RU/s for 20 s: what
        // is accepted stays within one request of the budget each second.
        let mut w = Window::default();
        let mut accepted = 0.0;
        for t in (0..20_000).step_by(5) {
            if w.admit(t, 400.0).is_ok() {
                w.charge(t, 400.0, 7.0);
                accepted += 7.0;
            }
        }
        let rate = accepted / 20.0;
        assert!((400.0..=407.0).contains(&rate), "{rate}");
    }

    #[test]
    fn a_zero_budget_never_divides_by_zero() {
        let mut w = Window::default();
        assert_eq!(w.admit(0, 0.0), Ok(()));
        w.charge(0, 0.0, 5.0);
        assert_eq!(w.admit(0, 0.0), Err(5000));
    }

    #[test]
    fn autoscale_runs_between_a_tenth_and_all_of_its_maximum() {
        let mut w = Window::default();
        assert!((w.autoscaled(4000.0) - 400.0).abs() < 1e-9);
        w.charge(0, 4000.0, 1000.0);
        assert!((w.autoscaled(4000.0) - 1000.0).abs() < 1e-9);
        w.advance(1, 4000.0);
        assert!((w.autoscaled(4000.0) - 1000.0).abs() < 1e-9);
        w.charge(1500, 4000.0, 9000.0);
        assert!((w.autoscaled(4000.0) - 4000.0).abs() < 1e-9);
        w.advance(5, 4000.0);
        assert!((w.autoscaled(4000.0) - 400.0).abs() < 1e-9);
    }

    #[test]
    fn throttle_keeps_usage_per_collection_and_budgets_per_scope() {
        let t = Throttle::default();
        let budget = Budget {
            scope: Scope::Collection("db".into(), "c".into()),
            ru_per_second: 400,
            autoscale: false,
        };
        assert_eq!(t.admit(&budget), Ok(()));
        t.charge(&budget, "db", "c", 500.0);
        assert!(t.admit(&budget).is_err());
        t.note_throttled("db", "c");
        let other = Budget {
            scope: Scope::Collection("db".into(), "d".into()),
            ..budget.clone()
        };
        assert_eq!(t.admit(&other), Ok(()));
        let usage = t.usage_by_collection();
        assert_eq!(
            usage,
            vec![(
                ("db".into(), "c".into()),
                Usage {
                    requests: 1,
                    request_units: 500.0,
                    throttled: 1
                }
            )]
        );
    }
}
