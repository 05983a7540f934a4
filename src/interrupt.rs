//! When a running command must stop: at shutdown (`InterruptedAtShutdown`, 11600), or once its
//! `maxTimeMS` has passed (`MaxTimeMSExpired`, 50). Long work checks at safe points: between
//! the statements of a write batch and every so many entries of a scan; what ran before the
//! check stays committed, and the command fails as a whole, as in mongod.
//!
//! The deadline belongs to the command's task ([`with_deadline`]); an [`Interrupt`] taken on
//! that task ([`Interrupt::current`]) carries it into blocking work such as a scan.

use std::future::Future;
use std::time::Instant;

use tokio_util::sync::CancellationToken;

use crate::error::{CommandError, CommandResult, ErrorCode};

tokio::task_local! {
    static DEADLINE: Option<Instant>;
}

/// Runs `f` (a command) with `deadline` as its `maxTimeMS` limit.
pub async fn with_deadline<F: Future>(deadline: Option<Instant>, f: F) -> F::Output {
    DEADLINE.scope(deadline, f).await
}

/// What stops one command: the server's shutdown and the command's deadline.
#[derive(Debug, Clone)]
pub struct Interrupt {
    shutdown: CancellationToken,
    deadline: Option<Instant>,
}

impl Interrupt {
    /// Stops at `shutdown` or at `deadline`.
    pub fn new(shutdown: CancellationToken, deadline: Option<Instant>) -> Self {
        Interrupt { shutdown, deadline }
    }

    /// The running command's: `shutdown`, and the deadline of the task it runs on, if any.
    pub fn current(shutdown: &CancellationToken) -> Self {
        let deadline = DEADLINE.try_with(|d| *d).ok().flatten();
        Interrupt::new(shutdown.clone(), deadline)
    }

    /// The command's deadline, if it has one.
    pub fn deadline(&self) -> Option<Instant> {
        self.deadline
    }

    /// Whether the command must stop now.
    pub fn is_due(&self) -> bool {
        self.shutdown.is_cancelled() || self.deadline.is_some_and(|d| Instant::now() >= d)
    }

    /// The error the command stops with, if it must stop now.
    pub fn check(&self) -> CommandResult<()> {
        if self.shutdown.is_cancelled() {
            return Err(CommandError::interrupted_at_shutdown());
        }
        if self.deadline.is_some_and(|d| Instant::now() >= d) {
            return Err(max_time_expired());
        }
        Ok(())
    }
}

/// `MaxTimeMSExpired` (50), as mongod words it.
pub fn max_time_expired() -> CommandError {
    CommandError::new(ErrorCode::MaxTimeMSExpired, "operation exceeded time limit")
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use tokio_util::sync::CancellationToken;

    use super::{Interrupt, with_deadline};

    #[tokio::test]
    async fn the_deadline_is_the_tasks_and_shutdown_comes_first() {
        let token = CancellationToken::new();
        assert!(Interrupt::current(&token).check().is_ok());
        let past = Some(
            Instant::now()
                .checked_sub(Duration::from_millis(1))
                .unwrap(),
        );
        let code = with_deadline(past, async {
            Interrupt::current(&token).check().unwrap_err().code.code()
        })
        .await;
        assert_eq!(code, 50);
        let later = Some(Instant::now() + Duration::from_secs(60));
        with_deadline(later, async {
            assert!(Interrupt::current(&token).check().is_ok());
        })
        .await;
        token.cancel();
        let code = with_deadline(past, async {
            Interrupt::current(&token).check().unwrap_err().code.code()
        })
        .await;
        assert_eq!(code, 11600);
    }
}
