//! What the benches share: an in-process Ebb on a durable temporary store, the driver client,
//! latency samples and the `EBB_BENCH_SCALE` knob. Included with `#[path]` by each bench that
//! uses it (benches are separate crates), so not every bench uses every item.
#![allow(dead_code, reason = "each bench uses a different part")]

use std::io;
use std::net::SocketAddr;
use std::thread::{self, JoinHandle};
use std::time::Duration;

use bson::{Bson, Document, RawDocumentBuf, doc};
use mongodb::options::{ClientOptions, IndexOptions};
use mongodb::{Client, Collection, IndexModel};
use tokio::sync::oneshot;

pub type BenchResult<T = ()> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// Server runtime workers: what `#[tokio::main]` gives on the 2-core target machine.
pub const SERVER_WORKERS: usize = 2;
/// Client runtime workers.
pub const CLIENT_WORKERS: usize = 2;

/// Ebb on a durable store in a fresh temporary directory, test commands on, in its own 2-worker
/// runtime on its own thread (as a separate process would be on the 2-core target).
pub struct Server {
    pub addr: SocketAddr,
    dir: tempfile::TempDir,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<io::Result<()>>>,
}

impl Server {
    pub fn start() -> io::Result<Server> {
        Server::start_with(|_| {})
    }

    /// [`Server::start`], with `configure` applied to the configuration first (a lowered
    /// blocking-sort limit, say).
    pub fn start_with(
        configure: impl FnOnce(&mut ebb::Config) + Send + 'static,
    ) -> io::Result<Server> {
        let dir = tempfile::tempdir()?;
        let data_dir = dir.path().to_path_buf();
        let std_listener = std::net::TcpListener::bind("127.0.0.1:0")?;
        std_listener.set_nonblocking(true)?;
        let addr = std_listener.local_addr()?;
        let (stop, stopped) = oneshot::channel::<()>();
        let thread = thread::Builder::new()
            .name("ebb-server".into())
            .spawn(move || {
                let runtime = tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(SERVER_WORKERS)
                    .thread_name("ebb-worker")
                    .enable_all()
                    .build()?;
                runtime.block_on(async move {
                    let listener = tokio::net::TcpListener::from_std(std_listener)?;
                    let mut config = ebb::Config {
                        port: addr.port(),
                        data_dir,
                        in_memory: false,
                        enable_test_commands: true,
                        shutdown_timeout_secs: 1,
                        ..ebb::Config::default()
                    };
                    configure(&mut config);
                    ebb::run(listener, config, async move {
                        let _ = stopped.await;
                    })
                    .await
                })
            })?;
        Ok(Server {
            addr,
            dir,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    pub fn data_dir(&self) -> &std::path::Path {
        self.dir.path()
    }

    pub fn stop(mut self) -> BenchResult {
        self.shut_down()
    }

    fn shut_down(&mut self) -> BenchResult {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        match self.thread.take().map(JoinHandle::join) {
            Some(Ok(result)) => Ok(result?),
            Some(Err(_)) => Err("the Ebb server thread panicked".into()),
            None => Ok(()),
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.shut_down();
    }
}

/// A driver client for `addr`, at most `pool` connections (driver default when `None`).
pub async fn connect(addr: SocketAddr, app: &str, pool: Option<u32>) -> BenchResult<Client> {
    let mut options = ClientOptions::parse(format!(
        "mongodb://{addr}/?directConnection=true&serverSelectionTimeoutMS=10000"
    ))
    .await?;
    options.app_name = Some(app.into());
    options.max_pool_size = pool;
    Ok(Client::with_options(options)?)
}

/// Runs `bench` as a task on a [`CLIENT_WORKERS`]-worker runtime and exits non-zero on error.
pub fn run_bench<F>(name: &str, bench: F)
where
    F: std::future::Future<Output = BenchResult> + Send + 'static,
{
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(CLIENT_WORKERS)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("{name} bench: cannot build the client runtime: {e}");
            std::process::exit(1);
        }
    };
    let result = runtime.block_on(async {
        tokio::spawn(bench)
            .await
            .unwrap_or_else(|e| Err(format!("the bench task failed: {e}").into()))
    });
    if let Err(e) = result {
        eprintln!("{name} bench failed: {e}");
        std::process::exit(1);
    }
}

/// Latency samples, in nanoseconds.
#[derive(Debug, Default, Clone)]
pub struct Samples(pub Vec<u64>);

impl Samples {
    pub fn push(&mut self, d: Duration) {
        self.0.push(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The `q` quantile in microseconds (nearest rank on the sorted samples).
    pub fn quantile_us(&self, q: f64) -> f64 {
        let mut sorted = self.0.clone();
        sorted.sort_unstable();
        let Some(last) = sorted.len().checked_sub(1) else {
            return 0.0;
        };
        #[expect(
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss,
            reason = "an index into the sorted samples, in range by construction"
        )]
        let index = ((to_f64(last) * q).round() as usize).min(last);
        sorted
            .get(index)
            .map_or(0.0, |&ns| to_f64_u64(ns) / 1_000.0)
    }
}

/// A small deterministic generator (xorshift64), so every run asks for the same keys.
pub struct XorShift(pub u64);

impl XorShift {
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    /// A number in `0..n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }
}

pub fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    if n == 0 {
        return 0.0;
    }
    let mid = sorted.get(n / 2).copied().unwrap_or(0.0);
    if n % 2 == 1 {
        mid
    } else {
        f64::midpoint(sorted.get(n / 2 - 1).copied().unwrap_or(0.0), mid)
    }
}

/// Prints the load average before a run: other busy processes skew every number.
pub fn print_load_average() {
    if let Ok(load) = std::fs::read_to_string("/proc/loadavg") {
        println!(
            "load average before the run: {} (other busy processes skew every number)",
            load.split_whitespace()
                .take(3)
                .collect::<Vec<_>>()
                .join(" ")
        );
    }
}

pub fn verdict(pass: bool) -> &'static str {
    if pass { "PASS" } else { "MISS" }
}

/// `EBB_BENCH_SCALE`, or 1.
pub fn scale() -> f64 {
    match std::env::var("EBB_BENCH_SCALE") {
        Ok(v) => match v.trim().parse::<f64>() {
            Ok(s) if s.is_finite() && s > 0.0 => s,
            _ => {
                eprintln!("EBB_BENCH_SCALE={v:?} is not a positive number; using 1.0");
                1.0
            }
        },
        Err(_) => 1.0,
    }
}

/// `base * scale`, rounded, at least 1.
pub fn scaled(base: f64, scale: f64) -> usize {
    #[expect(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        reason = "a small positive count"
    )]
    let n = (base * scale).round().clamp(1.0, 1e9) as usize;
    n
}

#[expect(clippy::cast_precision_loss, reason = "counts far below 2^52")]
pub fn to_f64(n: usize) -> f64 {
    n as f64
}

#[expect(
    clippy::cast_precision_loss,
    reason = "nanosecond totals far below 2^52"
)]
pub fn to_f64_u64(n: u64) -> f64 {
    n as f64
}

pub fn per_second(n: usize, took: Duration) -> f64 {
    to_f64(n) / took.as_secs_f64().max(1e-9)
}

/// Whether a command reply says `ok: 1`.
pub fn ok(reply: &Document) -> bool {
    match reply.get("ok") {
        Some(Bson::Double(v)) => *v == 1.0,
        Some(Bson::Int32(v)) => *v == 1,
        Some(Bson::Int64(v)) => *v == 1,
        _ => false,
    }
}

/// An integer field (int32 or int64) of a reply.
pub fn integer(doc: &Document, field: &str) -> BenchResult<i64> {
    match doc.get(field) {
        Some(Bson::Int64(v)) => Ok(*v),
        Some(Bson::Int32(v)) => Ok(i64::from(*v)),
        other => Err(format!("{field} is not an integer: {other:?}").into()),
    }
}

/// Creates the Cosmos default TTL, `{_ts: 1}` with `expireAfterSeconds: seconds`.
pub async fn create_ts_ttl_index(coll: &Collection<RawDocumentBuf>, seconds: u64) -> BenchResult {
    let options = IndexOptions::builder()
        .expire_after(Duration::from_secs(seconds))
        .build();
    let model = IndexModel::builder()
        .keys(doc! { "_ts": 1 })
        .options(options)
        .build();
    coll.create_index(model).await?;
    Ok(())
}

/// Inserts `make(0..n)` with `insert_many`, `batch` documents at a time, checking each reply's
/// count; returns how long it took.
pub async fn insert_batches(
    coll: &Collection<RawDocumentBuf>,
    n: usize,
    batch: usize,
    make: impl Fn(usize) -> RawDocumentBuf,
) -> BenchResult<Duration> {
    let start = std::time::Instant::now();
    let mut done = 0;
    while done < n {
        let k = batch.min(n - done);
        let docs: Vec<RawDocumentBuf> = (done..done + k).map(&make).collect();
        let reply = coll.insert_many(docs).await?;
        if reply.inserted_ids.len() != k {
            return Err(format!(
                "insert_many of {k} documents reported {} inserted",
                reply.inserted_ids.len()
            )
            .into());
        }
        done += k;
    }
    Ok(start.elapsed())
}

/// `base` scaled by `scale`, at least `floor`.
pub fn scaled_duration(base: Duration, scale: f64, floor: Duration) -> Duration {
    base.mul_f64(scale).max(floor)
}

/// A duration in microseconds.
pub fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// CPU time the process used, in clock ticks of `/proc` (`USER_HZ`, 100 a second on Linux):
/// all of it, and the client runtime's threads' (tokio's default names, `tokio-rt-worker` or,
/// before tokio 1.50, `tokio-runtime-w…`; the server's are `ebb-…` or the store's own).
#[derive(Debug, Clone, Copy, Default)]
pub struct Cpu {
    pub total: u64,
    pub client: u64,
}

/// `/proc`'s clock ticks a second.
pub const USER_HZ: f64 = 100.0;

impl Cpu {
    /// Now, or zeros where `/proc` cannot tell.
    pub fn now() -> Cpu {
        let total = std::fs::read_to_string("/proc/self/stat")
            .ok()
            .and_then(|s| stat_ticks(&s))
            .unwrap_or(0);
        let mut client = 0;
        if let Ok(tasks) = std::fs::read_dir("/proc/self/task") {
            for task in tasks.flatten() {
                let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
                if comm.starts_with("tokio-r") {
                    client += std::fs::read_to_string(task.path().join("stat"))
                        .ok()
                        .and_then(|s| stat_ticks(&s))
                        .unwrap_or(0);
                }
            }
        }
        Cpu { total, client }
    }

    pub fn since(self, earlier: Cpu) -> Cpu {
        Cpu {
            total: self.total.saturating_sub(earlier.total),
            client: self.client.saturating_sub(earlier.client),
        }
    }

    pub fn add(&mut self, other: Cpu) {
        self.total += other.total;
        self.client += other.client;
    }

    /// Server (everything but the client runtime) and client CPU microseconds per operation.
    pub fn per_op_us(self, ops: usize) -> (f64, f64) {
        let per = |ticks: u64| to_f64_u64(ticks) / USER_HZ * 1e6 / to_f64(ops.max(1));
        (
            per(self.total.saturating_sub(self.client)),
            per(self.client),
        )
    }
}

/// `utime + stime` of a `/proc/.../stat` line.
pub fn stat_ticks(stat: &str) -> Option<u64> {
    // The command name, in parentheses, may hold spaces: count fields after its end.
    let rest = stat.get(stat.rfind(')')? + 1..)?;
    let mut fields = rest.split_whitespace().skip(11);
    let utime: u64 = fields.next()?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some(utime + stime)
}

/// The release `ebb` binary in a process of its own (`--port 0`, a durable store in a fresh
/// temporary directory, logging at `info`), with `env` set: for measuring the server alone
/// (its CPU time and memory, apart from the client's).
pub struct EbbProcess {
    pub child: std::process::Child,
    pub addr: SocketAddr,
    /// Its "waiting for connections" log line.
    pub start_line: String,
    _dir: tempfile::TempDir,
}

impl EbbProcess {
    pub fn start(env: &[(&str, &str)]) -> BenchResult<EbbProcess> {
        use std::io::{BufRead, BufReader};
        let dir = tempfile::tempdir()?;
        let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_ebb"));
        command
            .args(["--port", "0", "--data-dir"])
            .arg(dir.path())
            .env("EBB_LOG", "info")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped());
        for (name, value) in env {
            command.env(name, value);
        }
        let mut child = command.spawn()?;
        let stderr = child.stderr.take().ok_or("no stderr")?;
        let (tx, rx) = std::sync::mpsc::channel();
        thread::spawn(move || {
            let mut tx = Some(tx);
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if line.contains("waiting for connections")
                    && let Some(tx) = tx.take()
                {
                    let _ = tx.send(line);
                }
            }
        });
        let Ok(start_line) = rx.recv_timeout(Duration::from_secs(30)) else {
            let _ = child.kill();
            let _ = child.wait();
            return Err("ebb did not start".into());
        };
        let addr = start_line
            .split("address=")
            .nth(1)
            .and_then(|rest| rest.split_whitespace().next())
            .ok_or("no address in the start line")?
            .parse()?;
        Ok(EbbProcess {
            child,
            addr,
            start_line,
            _dir: dir,
        })
    }

    /// CPU clock ticks (`utime + stime`) it used so far.
    pub fn ticks(&self) -> u64 {
        std::fs::read_to_string(format!("/proc/{}/stat", self.child.id()))
            .ok()
            .and_then(|s| stat_ticks(&s))
            .unwrap_or(0)
    }

    /// Its resident memory (`VmRSS`), in KB.
    pub fn rss_kb(&self) -> f64 {
        std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .unwrap_or_default()
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|kb| kb.parse::<f64>().ok())
            .unwrap_or(0.0)
    }
}

impl Drop for EbbProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
