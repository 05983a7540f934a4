//! Ebb's compatibility runner: every case under `compat/cases/` runs through a real client
//! against a fresh in-process Ebb, and the run ends with `N passed, N failed`.
//!
//! Case kinds, by directory and extension:
//! - `cases/mongosh/*.js`: a mongosh script (`mongosh <uri> --quiet --file case.js`).
//! - `cases/mongosh/*.eval`: lines typed into an interactive mongosh (shell syntax such as
//!   `show dbs` works there), one statement a line.
//! - `cases/pymongo/*.py`: a Python script using pymongo; `EBB_URI` names the server.
//!
//! A case passes when its client exits 0 within the time limit and its output contains every
//! `expect: <text>` line written in the case's comments (`// expect: …` or `# expect: …`).
//!
//! Clients are found through `EBB_MONGOSH` and `EBB_PYTHON` (scripts/test sets both). A missing
//! client fails the run unless `--allow-missing` is given; nothing is skipped silently.

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
}

struct Case {
    path: PathBuf,
    kind: Kind,
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let allow_missing = args.iter().any(|a| a == "--allow-missing");
    let filter: Vec<&String> = args.iter().filter(|a| !a.starts_with("--")).collect();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("cases");
    let mut cases = discover(&root)?;
    cases.retain(|c| {
        filter.is_empty()
            || filter
                .iter()
                .any(|f| c.path.to_string_lossy().contains(f.as_str()))
    });
    if cases.is_empty() {
        bail!("no compat cases matched under {}", root.display());
    }

    let mongosh = std::env::var("EBB_MONGOSH").ok();
    let python = std::env::var("EBB_PYTHON").ok();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;

    let (mut passed, mut failed, mut missing) = (0, 0, 0);
    for case in &cases {
        let name = case
            .path
            .strip_prefix(&root)
            .unwrap_or(&case.path)
            .display()
            .to_string();
        let client = match case.kind {
            Kind::MongoshScript | Kind::MongoshEval => mongosh.as_deref(),
            Kind::Python => python.as_deref(),
        };
        let Some(client) = client else {
            missing += 1;
            println!(
                "MISSING {name}: client not configured (set EBB_MONGOSH / EBB_PYTHON, or run scripts/test)"
            );
            continue;
        };
        let started = Instant::now();
        match run_case(&runtime, case, client) {
            Ok(()) => {
                passed += 1;
                println!("PASS {name} ({} ms)", started.elapsed().as_millis());
            }
            Err(e) => {
                failed += 1;
                println!("FAIL {name}: {e:#}");
            }
        }
    }
    if missing > 0 && !allow_missing {
        failed += missing;
    }
    println!("{passed} passed, {failed} failed");
    if failed > 0 {
        std::process::exit(1);
    }
    Ok(())
}

fn discover(root: &Path) -> Result<Vec<Case>> {
    let mut cases = Vec::new();
    for (dir, kinds) in [
        (
            "mongosh",
            &[("js", Kind::MongoshScript), ("eval", Kind::MongoshEval)][..],
        ),
        ("pymongo", &[("py", Kind::Python)][..]),
    ] {
        let dir = root.join(dir);
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries {
            let path = entry?.path();
            let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
            if let Some((_, kind)) = kinds.iter().find(|(e, _)| *e == ext) {
                cases.push(Case { path, kind: *kind });
            }
        }
    }
    cases.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(cases)
}

/// Starts a fresh server, runs the case's client against it, checks exit status and output.
fn run_case(runtime: &tokio::runtime::Runtime, case: &Case, client: &str) -> Result<()> {
    let listener = runtime.block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))?;
    let port = listener.local_addr()?.port();
    let config = ebb::Config {
        port,
        argv: vec!["ebb-compat".into()],
        ..ebb::Config::default()
    };
    let stop = tokio_util::sync::CancellationToken::new();
    let server = runtime.spawn(ebb::run(listener, config, stop.clone().cancelled_owned()));
    let uri =
        format!("mongodb://127.0.0.1:{port}/?directConnection=true&serverSelectionTimeoutMS=5000");

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
        Kind::Python => {
            let mut c = Command::new(client);
            c.arg(&case.path);
            c
        }
    };
    let input = (case.kind == Kind::MongoshEval).then_some(text.as_str());
    cmd.env("EBB_URI", &uri)
        .env("MONGOSH_NO_TELEMETRY", "1")
        .env("DO_NOT_TRACK", "1")
        .stdin(if input.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let result = run_with_timeout(cmd, input, CASE_TIMEOUT);
    stop.cancel();
    runtime.block_on(server).context("server task")??;
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
