//! How long does a fresh `--profile cosmos` server take to answer its first `ping`?
//!
//! Each start is timed from binding the listener to the first `ping` answered, on a new data
//! directory (durable storage): for the profile, that includes resolving it (making the
//! certificate authority and server certificate, ECDSA P-256), opening the store, creating the
//! account user (SCRAM-SHA-1 and SCRAM-SHA-256 credentials, written durably), and a client
//! connecting with Cosmos DB's connection string: TLS (`tlsAllowInvalidCertificates`, as the
//! CA file does not exist before the server starts), replica set `globaldb`, the account's
//! credentials (a SCRAM-SHA-256 conversation). The baseline is a plain start (no profile:
//! plain TCP, no user) on a new data directory, the client connecting directly. The two take
//! turns, `EBB_BENCH_STARTS` times each (default 20); the medians, their ratio, and the goal
//! of issue 16 (a profile start under 200 ms) as PASS or MISS are printed. Shutdown is not
//! timed. The exit status never depends on the goal: it is non-zero only if a server cannot
//! be started or does not answer.

use std::time::{Duration, Instant};

use bson::doc;
use ebb::config::Profile;
use ebb::cosmos::profile::DEFAULT_KEY;
use mongodb::Client;

/// Default starts of each kind.
const DEFAULT_STARTS: usize = 20;
/// The goal: a fresh profile server answers its first ping within this.
const GOAL: Duration = Duration::from_millis(200);
/// How long a client waits for a server.
const WAIT_MS: u64 = 10_000;

fn main() {
    if let Err(e) = bench() {
        eprintln!("cosmos_start bench failed: {e}");
        std::process::exit(1);
    }
}

fn bench() -> Result<(), Box<dyn std::error::Error>> {
    let starts = std::env::var("EBB_BENCH_STARTS")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .filter(|&n| n > 0)
        .unwrap_or(DEFAULT_STARTS);
    // The server's and the client's runtime: what `#[tokio::main]` gives on 2 cores.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let mut cosmos = Vec::with_capacity(starts);
    let mut plain = Vec::with_capacity(starts);
    runtime.block_on(async {
        // One of each first, not counted: the binary's pages and the runtime warm up.
        start_to_ping(true).await?;
        start_to_ping(false).await?;
        for i in 0..starts {
            // Who goes first flips every start, so that drift hits both alike.
            if i % 2 == 0 {
                cosmos.push(start_to_ping(true).await?);
                plain.push(start_to_ping(false).await?);
            } else {
                plain.push(start_to_ping(false).await?);
                cosmos.push(start_to_ping(true).await?);
            }
        }
        Ok::<(), Box<dyn std::error::Error>>(())
    })?;
    let cosmos_median = median(&mut cosmos);
    let plain_median = median(&mut plain);
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!();
    println!(
        "Fresh start to first answered ping, new data directory each time ({} build, {} CPUs, \
         {starts} starts each, taking turns)",
        if cfg!(debug_assertions) {
            "DEBUG"
        } else {
            "release"
        },
        std::thread::available_parallelism().map_or(0, std::num::NonZero::get),
    );
    println!(
        "  --profile cosmos (certificate, account user, TLS + SCRAM-SHA-256, replicaSet=globaldb): \
         median {:8.2} ms (min {:.2}, max {:.2})",
        ms(cosmos_median),
        ms(cosmos[0]),
        ms(cosmos[cosmos.len() - 1]),
    );
    println!(
        "  plain (no profile, plain TCP, directConnection):                                   \
         median {:8.2} ms (min {:.2}, max {:.2})",
        ms(plain_median),
        ms(plain[0]),
        ms(plain[plain.len() - 1]),
    );
    println!(
        "  ratio cosmos / plain: {:.2}x",
        cosmos_median.as_secs_f64() / plain_median.as_secs_f64().max(f64::MIN_POSITIVE)
    );
    println!(
        "  goal (issue 16): a fresh --profile cosmos server answers its first ping in under \
         {} ms: {}",
        GOAL.as_millis(),
        if cosmos_median < GOAL { "PASS" } else { "MISS" }
    );
    Ok(())
}

/// The median of `times` (sorted in place).
fn median(times: &mut [Duration]) -> Duration {
    times.sort();
    times.get(times.len() / 2).copied().unwrap_or_default()
}

/// Starts a server on a new data directory (with the profile or not), and returns the time
/// from binding its listener to a client's first `ping` answered; then stops it.
async fn start_to_ping(profile: bool) -> Result<Duration, Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let config = ebb::Config {
        port: 0,
        in_memory: false,
        data_dir: dir.path().to_owned(),
        shutdown_timeout_secs: 1,
        profile: if profile {
            Profile::Cosmos
        } else {
            Profile::MongoDb
        },
        ..ebb::Config::default()
    };
    let started = Instant::now();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(ebb::run(listener, config, async {
        let _ = stop_rx.await;
    }));
    let uri = if profile {
        format!(
            "mongodb://localhost:{}@{addr}/?ssl=true&replicaSet=globaldb&retrywrites=false&\
             maxIdleTimeMS=120000&appName=@localhost@&tlsAllowInvalidCertificates=true&\
             serverSelectionTimeoutMS={WAIT_MS}",
            DEFAULT_KEY
                .replace('+', "%2B")
                .replace('/', "%2F")
                .replace('=', "%3D"),
        )
    } else {
        format!("mongodb://{addr}/?directConnection=true&serverSelectionTimeoutMS={WAIT_MS}")
    };
    let client = Client::with_uri_str(uri).await?;
    client
        .database("admin")
        .run_command(doc! { "ping": 1 })
        .await?;
    let elapsed = started.elapsed();
    client.shutdown().await;
    let _ = stop_tx.send(());
    server.await??;
    Ok(elapsed)
}
