//! The real `ebb` binary as a child process on a data directory of its own, for the tests that
//! stop it (SIGKILL, SIGTERM) and start it again on the same directory: durability, shutdown,
//! and the removal of deleted data (`garbage*.rs`).
//!
//! The server listens on a port the kernel picks, learned from its log line announcing it; its
//! log (stderr) is collected for the test to search and to show when something fails.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use bson::doc;
use mongodb::Client;
use mongodb::options::ClientOptions;

use super::TestResult;

/// Bound on the server starting up (recovery, a long journal replay included) and answering a
/// ping.
pub const STARTUP_DEADLINE: Duration = Duration::from_secs(60);
/// Bound on a graceful stop (see [`QUICK_DRAIN`]).
pub const EXIT_DEADLINE: Duration = Duration::from_secs(20);
/// `SIGKILL`.
pub const SIGKILL: i32 = 9;
/// Arguments that make a graceful stop give up on running requests after 5 s (the default is
/// 10 s).
pub const QUICK_DRAIN: [&str; 2] = ["--shutdown-timeout-secs", "5"];

/// A data directory of its own under the target directory, removed at the end of the test.
pub fn data_dir(prefix: &str) -> TestResult<tempfile::TempDir> {
    Ok(tempfile::Builder::new()
        .prefix(prefix)
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))?)
}

/// A running `ebb` binary with its stderr (the log) collected. Dropped while running, it is
/// killed: a failed test leaves no server behind.
pub struct EbbProcess {
    child: Option<Child>,
    pid: u32,
    addr: SocketAddr,
    log: Arc<Mutex<Vec<String>>>,
    reader: Option<std::thread::JoinHandle<()>>,
}

/// The address in the listener's "waiting for connections address=…" line.
fn listening_address(line: &str) -> Option<SocketAddr> {
    if !line.contains("waiting for connections") {
        return None;
    }
    let rest = &line[line.find("address=")? + "address=".len()..];
    rest.split_whitespace().next()?.parse().ok()
}

/// Whether a log line is an error or a panic.
pub fn is_error(line: &str) -> bool {
    line.contains(" ERROR ") || line.contains("panicked")
}

/// Whether a log line deserves attention: a warning, an error or a panic.
pub fn is_alarming(line: &str) -> bool {
    line.contains(" WARN ") || is_error(line)
}

impl EbbProcess {
    /// Starts `ebb --port 0 --data-dir <data_dir> <args>` (logging at `info`) and returns once
    /// it answers a ping. Everything is bounded by [`STARTUP_DEADLINE`].
    pub async fn start(data_dir: &Path, args: &[&str]) -> TestResult<EbbProcess> {
        let began = Instant::now();
        let deadline = began + STARTUP_DEADLINE;
        let mut child = Command::new(env!("CARGO_BIN_EXE_ebb"))
            .arg("--port")
            .arg("0")
            .arg("--data-dir")
            .arg(data_dir)
            .args(args)
            .env("EBB_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()?;
        let pid = child.id();
        let stderr = child.stderr.take().ok_or("child without stderr")?;
        let log = Arc::new(Mutex::new(Vec::new()));
        let (addr_tx, addr_rx) = tokio::sync::oneshot::channel();
        let reader = std::thread::spawn({
            let log = Arc::clone(&log);
            move || {
                let mut addr_tx = Some(addr_tx);
                for line in BufReader::new(stderr).lines() {
                    let Ok(line) = line else { break };
                    if let Some(addr) = listening_address(&line)
                        && let Some(tx) = addr_tx.take()
                    {
                        let _ = tx.send(addr);
                    }
                    log.lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .push(line);
                }
            }
        });
        let mut server = EbbProcess {
            child: Some(child),
            pid,
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            log,
            reader: Some(reader),
        };
        server.addr = match tokio::time::timeout_at(deadline.into(), addr_rx).await {
            Ok(Ok(addr)) => addr,
            Ok(Err(_)) => {
                // The log ended without the line: the process is gone.
                let status = server.wait_exit(EXIT_DEADLINE).await?;
                return Err(format!(
                    "ebb exited ({status}) before listening; log:\n{}",
                    server.log_text()
                )
                .into());
            }
            Err(_) => {
                return Err(format!(
                    "ebb did not announce its address within {STARTUP_DEADLINE:?}; log:\n{}",
                    server.log_text()
                )
                .into());
            }
        };
        server.wait_until_serving(deadline).await?;
        println!(
            "  ebb pid {} serving on {} after {:?}",
            server.pid,
            server.addr,
            began.elapsed()
        );
        Ok(server)
    }

    /// Polls until a ping is answered, or `deadline`.
    async fn wait_until_serving(&self, deadline: Instant) -> TestResult {
        let mut backoff = Duration::from_millis(5);
        loop {
            let attempt = async {
                let client = self.client().await?;
                client
                    .database("admin")
                    .run_command(doc! { "ping": 1 })
                    .await?;
                TestResult::Ok(())
            };
            let error = match tokio::time::timeout_at(deadline.into(), attempt).await {
                Ok(Ok(())) => return Ok(()),
                Ok(Err(e)) => e.to_string(),
                Err(_) => "timed out".to_owned(),
            };
            if Instant::now() + backoff >= deadline {
                return Err(format!(
                    "ebb at {} not serving within {STARTUP_DEADLINE:?} ({error}); log:\n{}",
                    self.addr,
                    self.log_text()
                )
                .into());
            }
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(Duration::from_millis(200));
        }
    }

    /// The address the server listens on.
    #[allow(dead_code, reason = "not every test binary asks")]
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// A driver client: direct connection, nothing retried behind the test's back (an error
    /// during a stop must mean "unknown outcome", never "retried"), bounded selection and
    /// connection times.
    pub async fn client(&self) -> mongodb::error::Result<Client> {
        let mut options =
            ClientOptions::parse(format!("mongodb://{}/?directConnection=true", self.addr)).await?;
        options.retry_writes = Some(false);
        options.retry_reads = Some(false);
        options.server_selection_timeout = Some(Duration::from_secs(10));
        options.connect_timeout = Some(Duration::from_secs(10));
        options.app_name = Some("ebb-process-tests".into());
        Client::with_options(options)
    }

    pub fn log_lines(&self) -> Vec<String> {
        self.log
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    pub fn log_text(&self) -> String {
        self.log_lines().join("\n")
    }

    /// The log's errors and panics (a kill may leave recovery a warning to give).
    pub fn errors(&self) -> Vec<String> {
        self.log_lines()
            .into_iter()
            .filter(|l| is_error(l))
            .collect()
    }

    /// The log's warnings, errors and panics.
    pub fn alarming_lines(&self) -> Vec<String> {
        self.log_lines()
            .into_iter()
            .filter(|l| is_alarming(l))
            .collect()
    }

    /// Reaps the process (bounded by `deadline`, then SIGKILL and fail) and collects the rest
    /// of its log.
    async fn wait_exit(&mut self, deadline: Duration) -> TestResult<ExitStatus> {
        let mut child = self.child.take().ok_or("the server was already stopped")?;
        let waiter = tokio::task::spawn_blocking(move || child.wait());
        let status = if let Ok(joined) = tokio::time::timeout(deadline, waiter).await {
            joined??
        } else {
            // Still running: kill it so that nothing is left behind, then fail.
            let _ = Command::new("kill")
                .arg("-KILL")
                .arg(self.pid.to_string())
                .status();
            return Err(format!(
                "ebb (pid {}) still running {deadline:?} after being asked to stop; log:\n{}",
                self.pid,
                self.log_text()
            )
            .into());
        };
        if let Some(reader) = self.reader.take() {
            // The pipe reaches end of file once the process is gone.
            tokio::task::spawn_blocking(move || reader.join())
                .await?
                .map_err(|_| "log reader panicked")?;
        }
        Ok(status)
    }

    /// SIGKILL (what `Child::kill` sends on Unix), then reap. Fails unless the signal is what
    /// ended the process: a server that had already crashed is a failure, not a kill.
    pub async fn kill_9(&mut self) -> TestResult {
        self.child
            .as_mut()
            .ok_or("the server was already stopped")?
            .kill()?;
        let status = self.wait_exit(EXIT_DEADLINE).await?;
        if status.signal() != Some(SIGKILL) {
            return Err(format!(
                "ebb ended with {status} before SIGKILL; log:\n{}",
                self.log_text()
            )
            .into());
        }
        Ok(())
    }

    /// SIGTERM, then wait for the exit at most `deadline` (then SIGKILL and fail). Returns the
    /// status and how long the exit took.
    pub async fn terminate_within(
        &mut self,
        deadline: Duration,
    ) -> TestResult<(ExitStatus, Duration)> {
        let sent = Command::new("kill")
            .arg("-TERM")
            .arg(self.pid.to_string())
            .status()?;
        if !sent.success() {
            return Err(format!("kill -TERM {} failed: {sent}", self.pid).into());
        }
        let began = Instant::now();
        let status = self.wait_exit(deadline).await?;
        Ok((status, began.elapsed()))
    }

    /// SIGTERM, then a clean exit within [`EXIT_DEADLINE`].
    pub async fn terminate(&mut self) -> TestResult {
        let (status, _) = self.terminate_within(EXIT_DEADLINE).await?;
        if !status.success() {
            return Err(format!(
                "ebb exited with {status} after SIGTERM; log:\n{}",
                self.log_text()
            )
            .into());
        }
        Ok(())
    }
}

impl Drop for EbbProcess {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
