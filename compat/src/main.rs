//! Ebb's compatibility runner: every case runs through a real client against a fresh
//! in-process Ebb, and the run ends with `N passed, N failed`.
//!
//! Case kinds, by directory and extension:
//! - `cases/mongosh/*.js`: a mongosh script (`mongosh <uri> --quiet --file case.js`).
//! - `cases/mongosh/*.eval`: lines typed into an interactive mongosh (shell syntax such as
//!   `show dbs` works there), one statement a line.
//! - `cases/pymongo/*.py`: a Python script using pymongo; `EBB_URI` names the server.
//! - `ttl/*.json`: a TTL example as data (see [`ttl`]), run twice, each time on its own fresh
//!   server with test commands enabled: through the `mongodb` crate (`… via mongodb-crate`), and
//!   through mongosh by the generic interpreter `ttl/run_case.js` (`… via mongosh`).
//!
//! A script case passes when its client exits 0 within the time limit and its output contains
//! every `expect: <text>` line written in the case's comments (`// expect: …` or `# expect: …`).
//! A TTL case passes for a client when every step's expectation holds; a failure names the step.
//!
//! - `aggregation/<family>/*.json`: the manual's aggregation examples as data (see
//!   [`aggregation`]: input documents, pipeline, expected output with exact types), each run
//!   twice on its own fresh server: through the `mongodb` crate and through a generated mongosh
//!   script. Examples listed in `aggregation/pending.txt` (with the reason) are reported as
//!   `PENDING` when they fail, and fail the run when they pass, so the list stays true; the
//!   run prints their count on an `aggregation:` line before the summary.
//! - `cosmos/*.json`: a Cosmos DB profile case (see [`cosmos`]: the TTL cases' format), run
//!   three times, each on its own fresh server with `--profile cosmos` and test commands:
//!   through the `mongodb` crate (`… via mongodb-crate`), through mongosh by `ttl/run_case.js`
//!   (`… via mongosh`), and through pymongo by `cosmos/run_case.py` (`… via pymongo`).
//! - `conformance/*.json`: the rules of one command (see `conformance/run_case.py`), each a
//!   command sent through pymongo with the exact reply fields or error code mongod gives; the
//!   file passes when every rule holds, and a failure lists the rules that did not.
//!
//! Clients are found through `EBB_MONGOSH` and `EBB_PYTHON` (scripts/test sets both). A missing
//! client fails the run unless `--allow-missing` is given; nothing is skipped silently.
//! Arguments that are not flags select the cases whose name or path contains one of them;
//! `--jobs=N` runs N cases at a time (default: the number of CPUs), each on its own server.

mod aggregation;
mod cosmos;
mod ttl;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

const CASE_TIMEOUT: Duration = Duration::from_secs(90);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    MongoshScript,
    MongoshEval,
    Python,
    /// A `ttl/*.json` case replayed through the `mongodb` crate.
    TtlDriver,
    /// A `ttl/*.json` case replayed in mongosh by `ttl/run_case.js`.
    TtlMongosh,
    /// A `conformance/*.json` file run through pymongo by `conformance/run_case.py`.
    Conformance,
    /// An `aggregation/*/*.json` example run through the `mongodb` crate.
    AggDriver,
    /// An `aggregation/*/*.json` example run by a generated mongosh script.
    AggMongosh,
    /// A `cosmos/*.json` case replayed through the `mongodb` crate on a profile server.
    CosmosDriver,
    /// A `cosmos/*.json` case replayed in mongosh by `ttl/run_case.js` on a profile server.
    CosmosMongosh,
    /// A `cosmos/*.json` case replayed through pymongo by `cosmos/run_case.py`.
    CosmosPython,
}

struct Case {
    /// What the run reports, and what filters match.
    name: String,
    path: PathBuf,
    kind: Kind,
    /// For an aggregation example listed in `aggregation/pending.txt`: the entry and reason.
    pending: Option<(String, String)>,
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let allow_missing = args.iter().any(|a| a == "--allow-missing");
    let jobs = match args.iter().find_map(|a| a.strip_prefix("--jobs=")) {
        Some(n) => n
            .parse::<usize>()
            .ok()
            .filter(|n| *n > 0)
            .context("--jobs=N takes a positive number")?,
        None => std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get),
    };
    let filter: Vec<&String> = args.iter().filter(|a| !a.starts_with("--")).collect();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut cases = discover(root)?;
    cases.retain(|c| {
        filter.is_empty()
            || filter.iter().any(|f| {
                c.name.contains(f.as_str()) || c.path.to_string_lossy().contains(f.as_str())
            })
    });
    if cases.is_empty() {
        bail!("no compat cases matched under {}", root.display());
    }

    let clients = Clients {
        mongosh: std::env::var("EBB_MONGOSH").ok(),
        python: std::env::var("EBB_PYTHON").ok(),
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;

    // Cases run `jobs` at a time (each on its own server); results print in case order.
    let run_started = Instant::now();
    let (mut passed, mut failed, mut missing) = (0, 0, 0);
    // Aggregation example runs: passed, pending, failed.
    let mut agg = (0, 0, 0);
    let next = std::sync::atomic::AtomicUsize::new(0);
    let (tx, rx) = std::sync::mpsc::channel::<(usize, Outcome)>();
    std::thread::scope(|scope| {
        for _ in 0..jobs.min(cases.len()) {
            let tx = tx.clone();
            let (next, cases, clients, runtime) = (&next, &cases, &clients, &runtime);
            scope.spawn(move || {
                loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    let Some(case) = cases.get(i) else { break };
                    if tx.send((i, run_one(runtime, case, clients))).is_err() {
                        break;
                    }
                }
            });
        }
        drop(tx);
        let mut done = std::collections::BTreeMap::new();
        let mut printed = 0;
        for (i, outcome) in rx {
            done.insert(i, outcome);
            while let Some(outcome) = done.remove(&printed) {
                let name = &cases[printed].name;
                let is_agg = matches!(cases[printed].kind, Kind::AggDriver | Kind::AggMongosh);
                match outcome {
                    Outcome::Pass(elapsed) => {
                        passed += 1;
                        agg.0 += usize::from(is_agg);
                        println!("PASS {name} ({} ms)", elapsed.as_millis());
                    }
                    Outcome::Pending(reason, e) => {
                        agg.1 += 1;
                        let first = format!("{e:#}");
                        let first = first.lines().next().unwrap_or_default().to_owned();
                        println!("PENDING {name}: {reason} (now: {first})");
                    }
                    Outcome::Fail(e) => {
                        failed += 1;
                        agg.2 += usize::from(is_agg);
                        println!("FAIL {name}: {e:#}");
                    }
                    Outcome::Missing => {
                        missing += 1;
                        println!(
                            "MISSING {name}: client not configured (set EBB_MONGOSH / EBB_PYTHON, or run scripts/test)"
                        );
                    }
                }
                printed += 1;
            }
        }
    });
    if missing > 0 && !allow_missing {
        failed += missing;
    }
    println!(
        "{} case runs in {:.1} s ({jobs} at a time)",
        cases.len(),
        run_started.elapsed().as_secs_f64()
    );
    let examples: std::collections::BTreeSet<&PathBuf> = cases
        .iter()
        .filter(|c| matches!(c.kind, Kind::AggDriver | Kind::AggMongosh))
        .map(|c| &c.path)
        .collect();
    if !examples.is_empty() {
        println!(
            "aggregation: {} examples, {} runs: {} passed, {} pending, {} failed",
            examples.len(),
            agg.0 + agg.1 + agg.2,
            agg.0,
            agg.1,
            agg.2
        );
    }
    println!("{passed} passed, {failed} failed");
    if failed > 0 {
        std::process::exit(1);
    }
    Ok(())
}

struct Clients {
    mongosh: Option<String>,
    python: Option<String>,
}

enum Outcome {
    Pass(Duration),
    Fail(anyhow::Error),
    /// A listed pending example that still fails: its reason, and how it fails now.
    Pending(String, anyhow::Error),
    Missing,
}

fn run_one(runtime: &tokio::runtime::Runtime, case: &Case, clients: &Clients) -> Outcome {
    let client = match case.kind {
        Kind::MongoshScript
        | Kind::MongoshEval
        | Kind::TtlMongosh
        | Kind::AggMongosh
        | Kind::CosmosMongosh => clients.mongosh.as_deref(),
        Kind::Python | Kind::Conformance | Kind::CosmosPython => clients.python.as_deref(),
        Kind::TtlDriver | Kind::AggDriver | Kind::CosmosDriver => Some("mongodb crate"),
    };
    let Some(client) = client else {
        return Outcome::Missing;
    };
    let started = Instant::now();
    let result = match case.kind {
        Kind::TtlDriver => run_ttl_driver(runtime, case),
        Kind::TtlMongosh => run_ttl_mongosh(runtime, case, client),
        Kind::Conformance => run_conformance(runtime, case, client),
        Kind::AggDriver => run_agg_driver(runtime, case),
        Kind::AggMongosh => run_agg_mongosh(runtime, case, client),
        Kind::CosmosDriver => run_cosmos_driver(runtime, case),
        Kind::CosmosMongosh => run_cosmos_mongosh(runtime, case, client),
        Kind::CosmosPython => run_cosmos_python(runtime, case, client),
        Kind::MongoshScript | Kind::MongoshEval | Kind::Python => run_case(runtime, case, client),
    };
    match (result, &case.pending) {
        (Ok(()), None) => Outcome::Pass(started.elapsed()),
        (Err(e), None) => Outcome::Fail(e),
        (Ok(()), Some((entry, _))) => Outcome::Fail(anyhow::anyhow!(
            "now passes: remove `{entry}` from aggregation/pending.txt"
        )),
        (Err(e), Some((_, reason))) => Outcome::Pending(reason.clone(), e),
    }
}

fn discover(root: &Path) -> Result<Vec<Case>> {
    let mut cases = Vec::new();
    let cases_root = root.join("cases");
    for (dir, kinds) in [
        (
            "mongosh",
            &[("js", Kind::MongoshScript), ("eval", Kind::MongoshEval)][..],
        ),
        ("pymongo", &[("py", Kind::Python)][..]),
    ] {
        let dir = cases_root.join(dir);
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries {
            let path = entry?.path();
            let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
            if let Some((_, kind)) = kinds.iter().find(|(e, _)| *e == ext) {
                cases.push(Case {
                    name: relative(&cases_root, &path),
                    path,
                    kind: *kind,
                    pending: None,
                });
            }
        }
    }
    for path in json_files(&root.join("ttl"))? {
        let base = relative(root, &path);
        for (kind, via) in [
            (Kind::TtlDriver, "mongodb-crate"),
            (Kind::TtlMongosh, "mongosh"),
        ] {
            cases.push(Case {
                name: format!("{base} via {via}"),
                path: path.clone(),
                kind,
                pending: None,
            });
        }
    }
    for path in json_files(&root.join("cosmos"))? {
        let base = relative(root, &path);
        for (kind, via) in [
            (Kind::CosmosDriver, "mongodb-crate"),
            (Kind::CosmosMongosh, "mongosh"),
            (Kind::CosmosPython, "pymongo"),
        ] {
            cases.push(Case {
                name: format!("{base} via {via}"),
                path: path.clone(),
                kind,
                pending: None,
            });
        }
    }
    for path in json_files(&root.join("conformance"))? {
        cases.push(Case {
            name: relative(root, &path),
            path,
            kind: Kind::Conformance,
            pending: None,
        });
    }
    let agg_root = root.join("aggregation");
    let mut pending = aggregation::load_pending(&agg_root.join("pending.txt"))?;
    let mut families: Vec<PathBuf> = match std::fs::read_dir(&agg_root) {
        Ok(entries) => entries
            .map(|e| e.map(|e| e.path()))
            .collect::<std::io::Result<_>>()?,
        Err(_) => Vec::new(),
    };
    families.retain(|p| p.is_dir());
    for family in families {
        for path in json_files(&family)? {
            let rel = relative(&agg_root, &path);
            for (kind, via) in [
                (Kind::AggDriver, "mongodb-crate"),
                (Kind::AggMongosh, "mongosh"),
            ] {
                let entry = format!("{rel} via {via}");
                let listed = pending
                    .get(&entry)
                    .map(|r| (entry.clone(), r.clone()))
                    .or_else(|| pending.get(&rel).map(|r| (rel.clone(), r.clone())));
                cases.push(Case {
                    name: format!("aggregation/{entry}"),
                    path: path.clone(),
                    kind,
                    pending: listed,
                });
                pending.remove(&entry);
            }
            pending.remove(&rel);
        }
    }
    if let Some(entry) = pending.keys().next() {
        bail!("aggregation/pending.txt lists `{entry}`, which is not an example");
    }
    cases.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(cases)
}

/// The `.json` files directly in `dir` (none if it does not exist).
fn json_files(dir: &Path) -> Result<Vec<PathBuf>> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Ok(Vec::new());
    };
    let mut files = Vec::new();
    for entry in entries {
        let path = entry?.path();
        if path.extension().and_then(|e| e.to_str()) == Some("json") {
            files.push(path);
        }
    }
    Ok(files)
}

/// `path` as the run names it: relative to the suite's root.
fn relative(root: &Path, path: &Path) -> String {
    path.strip_prefix(root)
        .unwrap_or(path)
        .display()
        .to_string()
}

/// A server running in the runner's runtime; [`Server::stop`] shuts it down and waits.
struct Server {
    uri: String,
    stop: tokio_util::sync::CancellationToken,
    task: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl Server {
    fn start(runtime: &tokio::runtime::Runtime, enable_test_commands: bool) -> Result<Server> {
        Self::start_with(
            runtime,
            |config| config.enable_test_commands = enable_test_commands,
            |port, _| {
                format!(
                    "mongodb://127.0.0.1:{port}/?directConnection=true&serverSelectionTimeoutMS=5000"
                )
            },
        )
    }

    /// A fresh server with the Cosmos DB profile (and test commands, for the clock), which
    /// clients reach through [`cosmos::uri`].
    /// Throttling is on only for the rate-limiting cases (`cosmos/ratelimit_*.json`): the
    /// others are functional, and a 400 RU/s budget would only slow them down.
    fn start_cosmos(runtime: &tokio::runtime::Runtime, case: &Case) -> Result<Server> {
        let throttle = case
            .path
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with("ratelimit_"));
        Self::start_with(
            runtime,
            |config| {
                config.profile = ebb::config::Profile::Cosmos;
                config.enable_test_commands = true;
                if !throttle {
                    config.cosmos_throttle = ebb::config::Switch::Off;
                }
            },
            // The account's user and the generated CA, as a Cosmos DB connection string gives
            // them (the profile requires TLS and a login).
            |port, config| {
                cosmos::uri(
                    port,
                    &cosmos::Access {
                        user: config
                            .cosmos_key
                            .clone()
                            .map(|key| (config.cosmos_account.clone(), key)),
                        ca_file: config.tls_ca_file.clone(),
                    },
                )
            },
        )
    }

    fn start_with(
        runtime: &tokio::runtime::Runtime,
        configure: impl FnOnce(&mut ebb::Config),
        uri: impl FnOnce(u16, &ebb::Config) -> String,
    ) -> Result<Server> {
        let listener = runtime.block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))?;
        let port = listener.local_addr()?.port();
        let mut config = ebb::Config {
            port,
            argv: vec!["ebb-compat".into()],
            ..ebb::Config::default()
        };
        configure(&mut config);
        // As `ebb::run` does (idempotent), so that the URI knows a profile's key and CA.
        config.resolve_profile()?;
        let uri = uri(port, &config);
        let stop = tokio_util::sync::CancellationToken::new();
        let task = runtime.spawn(ebb::run(listener, config, stop.clone().cancelled_owned()));
        Ok(Server { uri, stop, task })
    }

    fn stop(self, runtime: &tokio::runtime::Runtime) -> Result<()> {
        self.stop.cancel();
        runtime.block_on(self.task).context("server task")??;
        Ok(())
    }
}

/// Starts a fresh server, runs the case's client against it, checks exit status and output.
fn run_case(runtime: &tokio::runtime::Runtime, case: &Case, client: &str) -> Result<()> {
    let server = Server::start(runtime, false)?;
    let uri = server.uri.clone();
    let text = std::fs::read_to_string(&case.path)
        .with_context(|| format!("reading {}", case.path.display()))?;
    let mut cmd = match case.kind {
        Kind::MongoshScript => {
            let mut c = Command::new(client);
            c.arg(&uri)
                .arg("--quiet")
                .arg("--norc")
                .arg("--file")
                .arg(&case.path);
            c
        }
        Kind::MongoshEval => {
            let mut c = Command::new(client);
            c.arg(&uri).arg("--quiet").arg("--norc");
            c
        }
        Kind::Python
        | Kind::TtlDriver
        | Kind::TtlMongosh
        | Kind::Conformance
        | Kind::AggDriver
        | Kind::AggMongosh
        | Kind::CosmosDriver
        | Kind::CosmosMongosh
        | Kind::CosmosPython => {
            let mut c = Command::new(client);
            c.arg(&case.path);
            c
        }
    };
    let input = (case.kind == Kind::MongoshEval).then_some(text.as_str());
    client_env(&mut cmd, &uri, input.is_some());
    let result = run_with_timeout(cmd, input, CASE_TIMEOUT);
    server.stop(runtime)?;
    let (ok, output) = result?;
    if !ok {
        bail!("client failed:\n{}", indent(&output));
    }
    for line in text.lines() {
        let line = line.trim_start_matches(['/', '#', ' ']);
        if let Some(expected) = line.strip_prefix("expect:") {
            let expected = expected.trim();
            if !output.contains(expected) {
                bail!("output lacks {expected:?}:\n{}", indent(&output));
            }
        }
    }
    Ok(())
}

fn client_env(cmd: &mut Command, uri: &str, piped_input: bool) {
    cmd.env("EBB_URI", uri)
        .env("MONGOSH_NO_TELEMETRY", "1")
        .env("DO_NOT_TRACK", "1")
        .stdin(if piped_input {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
}

/// Replays a TTL case through the `mongodb` crate on a fresh server.
fn run_ttl_driver(runtime: &tokio::runtime::Runtime, case: &Case) -> Result<()> {
    let ttl_case = ttl::load(&case.path).context("invalid case file")?;
    let server = Server::start(runtime, true)?;
    let result = runtime.block_on(async {
        tokio::time::timeout(CASE_TIMEOUT, ttl::run_with_driver(&ttl_case, &server.uri))
            .await
            .unwrap_or_else(|_| bail!("timed out after {} s", CASE_TIMEOUT.as_secs()))
    });
    server.stop(runtime)?;
    result
}

/// Replays a TTL case in mongosh (`ttl/run_case.js`, which reads the file named by
/// `EBB_TTL_CASE`) on a fresh server.
fn run_ttl_mongosh(runtime: &tokio::runtime::Runtime, case: &Case, client: &str) -> Result<()> {
    // The same checks as for the driver run, so a malformed file fails alike for both.
    ttl::load(&case.path).context("invalid case file")?;
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("ttl/run_case.js");
    let server = Server::start(runtime, true)?;
    let mut cmd = Command::new(client);
    cmd.arg(&server.uri)
        .arg("--quiet")
        .arg("--norc")
        .arg("--file")
        .arg(&script)
        .env("EBB_TTL_CASE", &case.path);
    client_env(&mut cmd, &server.uri, false);
    let result = run_with_timeout(cmd, None, CASE_TIMEOUT);
    server.stop(runtime)?;
    let (ok, output) = result?;
    if ok && output.lines().any(|l| l.trim() == ttl::MONGOSH_PASS) {
        return Ok(());
    }
    // run_case.js names the failing step on a line of its own; show that first.
    match output.lines().find(|l| l.starts_with("ebb-ttl-case: FAIL")) {
        Some(line) => bail!("{}", line.trim_start_matches("ebb-ttl-case: FAIL").trim()),
        None => bail!("mongosh failed:\n{}", indent(&output)),
    }
}

/// Replays a Cosmos DB profile case through the `mongodb` crate on a fresh profile server.
fn run_cosmos_driver(runtime: &tokio::runtime::Runtime, case: &Case) -> Result<()> {
    let cosmos_case = cosmos::load(&case.path)?;
    let server = Server::start_cosmos(runtime, case)?;
    let result = runtime.block_on(async {
        tokio::time::timeout(
            CASE_TIMEOUT,
            cosmos::run_with_driver(&cosmos_case, &server.uri),
        )
        .await
        .unwrap_or_else(|_| bail!("timed out after {} s", CASE_TIMEOUT.as_secs()))
    });
    server.stop(runtime)?;
    result
}

/// Replays a Cosmos DB profile case in mongosh on a fresh profile server, with the TTL cases'
/// interpreter (`ttl/run_case.js`: the format is theirs).
fn run_cosmos_mongosh(runtime: &tokio::runtime::Runtime, case: &Case, client: &str) -> Result<()> {
    cosmos::load(&case.path)?;
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("ttl/run_case.js");
    let server = Server::start_cosmos(runtime, case)?;
    let mut cmd = Command::new(client);
    cmd.arg(&server.uri)
        .arg("--quiet")
        .arg("--norc")
        .arg("--file")
        .arg(&script)
        .env("EBB_TTL_CASE", &case.path);
    client_env(&mut cmd, &server.uri, false);
    let result = run_with_timeout(cmd, None, CASE_TIMEOUT);
    server.stop(runtime)?;
    let (ok, output) = result?;
    if ok && output.lines().any(|l| l.trim() == ttl::MONGOSH_PASS) {
        return Ok(());
    }
    match output.lines().find(|l| l.starts_with("ebb-ttl-case: FAIL")) {
        Some(line) => bail!("{}", line.trim_start_matches("ebb-ttl-case: FAIL").trim()),
        None => bail!("mongosh failed:\n{}", indent(&output)),
    }
}

/// Replays a Cosmos DB profile case through pymongo (`cosmos/run_case.py`, which reads the file
/// named by `EBB_COSMOS_CASE` and the server from `EBB_URI`) on a fresh profile server.
fn run_cosmos_python(runtime: &tokio::runtime::Runtime, case: &Case, client: &str) -> Result<()> {
    cosmos::load(&case.path)?;
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("cosmos/run_case.py");
    let server = Server::start_cosmos(runtime, case)?;
    let mut cmd = Command::new(client);
    cmd.arg(&script).env("EBB_COSMOS_CASE", &case.path);
    client_env(&mut cmd, &server.uri, false);
    let result = run_with_timeout(cmd, None, CASE_TIMEOUT);
    server.stop(runtime)?;
    let (ok, output) = result?;
    if ok && output.lines().any(|l| l.trim() == cosmos::PYTHON_PASS) {
        return Ok(());
    }
    match output
        .lines()
        .find(|l| l.starts_with("ebb-cosmos-case: FAIL"))
    {
        Some(line) => bail!(
            "{}",
            line.trim_start_matches("ebb-cosmos-case: FAIL").trim()
        ),
        None => bail!("pymongo failed:\n{}", indent(&output)),
    }
}

/// Runs an aggregation example through the `mongodb` crate on a fresh server.
fn run_agg_driver(runtime: &tokio::runtime::Runtime, case: &Case) -> Result<()> {
    let example = aggregation::load(&case.path).context("invalid example file")?;
    let server = Server::start(runtime, false)?;
    let outcome = runtime.block_on(async {
        tokio::time::timeout(
            CASE_TIMEOUT,
            aggregation::run_with_driver(&example, &server.uri),
        )
        .await
        .unwrap_or_else(|_| bail!("timed out after {} s", CASE_TIMEOUT.as_secs()))
    });
    server.stop(runtime)?;
    aggregation::judge(&example, &outcome?)
}

/// Runs an aggregation example through mongosh (a generated script) on a fresh server.
fn run_agg_mongosh(runtime: &tokio::runtime::Runtime, case: &Case, client: &str) -> Result<()> {
    let example = aggregation::load(&case.path).context("invalid example file")?;
    let script = std::env::temp_dir().join(format!(
        "ebb-compat-agg-{}-{}.js",
        std::process::id(),
        SCRIPTS.fetch_add(1, std::sync::atomic::Ordering::SeqCst)
    ));
    std::fs::write(&script, aggregation::mongosh_script(&example))
        .with_context(|| format!("writing {}", script.display()))?;
    let server = Server::start(runtime, false)?;
    let mut cmd = Command::new(client);
    cmd.arg(&server.uri)
        .arg("--quiet")
        .arg("--norc")
        .arg("--file")
        .arg(&script);
    client_env(&mut cmd, &server.uri, false);
    let result = run_with_timeout(cmd, None, CASE_TIMEOUT);
    server.stop(runtime)?;
    let _ = std::fs::remove_file(&script);
    let (ok, output) = result?;
    if !ok {
        bail!("mongosh failed:\n{}", indent(&output));
    }
    aggregation::judge(&example, &aggregation::mongosh_outcome(&output)?)
}

/// Numbers the generated mongosh scripts of one run.
static SCRIPTS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Runs a conformance file through pymongo (`conformance/run_case.py`) on a fresh server.
fn run_conformance(runtime: &tokio::runtime::Runtime, case: &Case, client: &str) -> Result<()> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("conformance/run_case.py");
    let server = Server::start(runtime, false)?;
    let mut cmd = Command::new(client);
    cmd.arg(&script).env("EBB_CONFORMANCE_CASE", &case.path);
    client_env(&mut cmd, &server.uri, false);
    let result = run_with_timeout(cmd, None, CASE_TIMEOUT);
    server.stop(runtime)?;
    let (ok, output) = result?;
    if ok {
        return Ok(());
    }
    let failures: Vec<&str> = output
        .lines()
        .filter(|l| l.starts_with("FAIL") || l.starts_with("      "))
        .collect();
    if failures.is_empty() {
        bail!("pymongo failed:\n{}", indent(&output));
    }
    bail!("\n{}", indent(&failures.join("\n")))
}

fn run_with_timeout(
    mut cmd: Command,
    input: Option<&str>,
    timeout: Duration,
) -> Result<(bool, String)> {
    let mut child = cmd.spawn().with_context(|| format!("starting {cmd:?}"))?;
    if let (Some(text), Some(mut stdin)) = (input, child.stdin.take()) {
        std::io::Write::write_all(&mut stdin, text.as_bytes())?;
        // Dropping stdin closes it: the shell exits after the last line.
    }
    let stdout = child.stdout.take();
    let stderr = child.stderr.take();
    let read = |pipe: Option<Box<dyn std::io::Read + Send>>| {
        std::thread::spawn(move || {
            let mut s = String::new();
            if let Some(mut p) = pipe {
                let _ = std::io::Read::read_to_string(&mut p, &mut s);
            }
            s
        })
    };
    let out = read(stdout.map(|p| Box::new(p) as Box<dyn std::io::Read + Send>));
    let err = read(stderr.map(|p| Box::new(p) as Box<dyn std::io::Read + Send>));
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break Some(status);
        }
        if started.elapsed() > timeout {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let output = format!(
        "{}{}",
        out.join().unwrap_or_default(),
        err.join().unwrap_or_default()
    );
    match status {
        Some(s) => Ok((s.success(), output)),
        None => bail!(
            "timed out after {} s:\n{}",
            timeout.as_secs(),
            indent(&output)
        ),
    }
}

fn indent(text: &str) -> String {
    let mut out = String::new();
    for line in text.lines() {
        out.push_str("    ");
        out.push_str(line);
        out.push('\n');
    }
    out
}
