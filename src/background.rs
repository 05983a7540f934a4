//! Background work (the TTL purge's reading) on threads of their own at the lowest CPU
//! priority, so that it runs on whatever the foreground leaves idle and gives the core back the
//! moment a request's thread wakes up. Nothing that holds a lock a writer may wait for (the
//! collection's write lock, the journal) may run here: a starved thread holding one stalls
//! every writer behind it (up to 2 s, measured on a saturated machine).
//!
//! On a 2-core machine a purge at normal priority competes for the cores with the connection
//! tasks and the sync thread: a foreground write whose sync thread woke while the purge held a
//! core waited for the scheduler to hand the core back (its wait for the sync to start: p99
//! 60-80 µs without a purge, 730 µs with one). Under Linux's `SCHED_IDLE` a waking normal thread
//! preempts the background thread at once, and that wait was back to 45-60 µs; nice 19 alone did
//! not do it, because the scheduler still lets the running thread finish its slice.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::mpsc;

use tracing::{debug, warn};

type Job = Box<dyn FnOnce() + Send>;

/// One low-priority thread that runs the jobs it is given, one after another.
#[derive(Debug)]
pub struct Worker {
    /// `None` when the thread could not be started: jobs then go to tokio's blocking pool.
    jobs: Option<mpsc::Sender<Job>>,
}

impl Worker {
    /// Starts the thread, named `name`. If the system refuses a thread, jobs run on tokio's
    /// blocking pool at normal priority instead.
    pub fn start(name: &str) -> Self {
        let (jobs, queue) = mpsc::channel::<Job>();
        let thread_name = name.to_owned();
        let spawned = std::thread::Builder::new()
            .name(name.to_owned())
            .spawn(move || {
                lower_priority(&thread_name);
                while let Ok(job) = queue.recv() {
                    // A panicking job loses its own result (its caller sees `None`), not the
                    // worker.
                    if catch_unwind(AssertUnwindSafe(job)).is_err() {
                        warn!(thread = %thread_name, "a background job panicked");
                    }
                }
            });
        match spawned {
            Ok(_) => Worker { jobs: Some(jobs) },
            Err(e) => {
                warn!(thread = %name, error = %e, "no background thread: its work runs at normal priority");
                Worker { jobs: None }
            }
        }
    }

    /// Runs `f` on the worker and waits for its result; `None` if it panicked or the worker is
    /// gone.
    pub async fn run<T: Send + 'static>(
        &self,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> Option<T> {
        let Some(jobs) = &self.jobs else {
            return tokio::task::spawn_blocking(f).await.ok();
        };
        let (tx, rx) = tokio::sync::oneshot::channel();
        let job: Job = Box::new(move || {
            let _ = tx.send(f());
        });
        jobs.send(job).ok()?;
        rx.await.ok()
    }
}

/// Puts the calling thread on the lowest CPU priority the system offers without privileges:
/// Linux's `SCHED_IDLE` (it runs only when no normal thread wants the core, and a normal thread
/// that wakes takes the core from it at once); elsewhere, the lowest nice value of its policy.
/// If refused, the thread keeps its priority.
#[cfg(unix)]
fn lower_priority(name: &str) {
    use thread_priority::{
        NormalThreadSchedulePolicy, ThreadPriority, ThreadSchedulePolicy,
        set_thread_priority_and_policy, thread_native_id,
    };
    let policy = if cfg!(target_os = "linux") {
        NormalThreadSchedulePolicy::Idle
    } else {
        NormalThreadSchedulePolicy::Other
    };
    match set_thread_priority_and_policy(
        thread_native_id(),
        ThreadPriority::Min,
        ThreadSchedulePolicy::Normal(policy),
    ) {
        Ok(()) => debug!(thread = %name, ?policy, "background thread priority lowered"),
        Err(e) => {
            warn!(thread = %name, error = ?e, "could not lower a background thread's priority");
        }
    }
}

#[cfg(not(unix))]
fn lower_priority(name: &str) {
    debug!(thread = %name, "background thread runs at normal priority on this system");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn jobs_run_on_a_background_thread_that_survives_a_panic() {
        let worker = Worker::start("ebb-test-bg");
        let name = worker
            .run(|| std::thread::current().name().map(str::to_owned))
            .await;
        assert_eq!(name, Some(Some("ebb-test-bg".to_owned())));
        let panicked: Option<()> = worker.run(|| panic!("a job that fails")).await;
        assert_eq!(panicked, None);
        assert_eq!(worker.run(|| 7).await, Some(7));
    }

    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn the_thread_runs_under_sched_idle() {
        use thread_priority::{NormalThreadSchedulePolicy, ThreadSchedulePolicy};
        let worker = Worker::start("ebb-test-idle");
        let policy = worker.run(thread_priority::thread_schedule_policy).await;
        assert_eq!(
            policy.map(Result::ok),
            Some(Some(ThreadSchedulePolicy::Normal(
                NormalThreadSchedulePolicy::Idle
            )))
        );
        // The caller's own thread is untouched.
        assert_ne!(
            thread_priority::thread_schedule_policy().ok(),
            Some(ThreadSchedulePolicy::Normal(
                NormalThreadSchedulePolicy::Idle
            ))
        );
    }
}
