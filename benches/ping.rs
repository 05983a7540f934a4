//! How close is Ebb's `ping` round trip to the cost of the network itself?
//!
//! One process, three parts:
//!
//! * Ebb, started with [`ebb::run`] on `127.0.0.1:0` in a multi-threaded tokio runtime on its
//!   own thread (2 workers, as `#[tokio::main]` gives on the 2-core target machine).
//! * A bare tokio "echo" server in the same kind of runtime: per connection it cuts
//!   length-prefixed frames off a buffer and answers each with the exact bytes Ebb sent for the
//!   same ping (captured once at start, `responseTo` patched). Both servers read the same request
//!   bytes and write the same reply bytes, so the difference is Ebb's decode + dispatch + encode
//!   (and its per-request bookkeeping).
//! * Blocking `std::net::TcpStream` clients (`TCP_NODELAY`) sending a raw `OP_MSG`
//!   `{ping: 1, $db: "admin"}` built with `ebb_wire::Message::encode`.
//!
//! Two measurements, each in rounds after a warm-up. Within a round the servers take turns in
//! blocks of requests (who goes first flips every block), so machine noise hits both alike; the
//! per-round ratios, their median and a warning when they disagree show how noisy the run was:
//!
//! * sequential round trips on one connection: p50/p99/mean latency and throughput;
//! * 8 connections on 8 client threads, a fixed number of requests each: throughput (and
//!   latency as each client saw it).
//!
//! The goal, "Ebb within 1.3× of echo", is reported as PASS or MISS and never changes the exit
//! status: this is a measurement, not a test. It fails (non-zero) only if a server cannot be
//! started or answers wrongly.
//!
//! `EBB_BENCH_REQUESTS` sets the sequential requests per server per round (default 20000); the
//! concurrent phase sends twice that per server per round, split over the 8 connections.
//!
//! By default no tracing subscriber is installed, so Ebb's log macros cost what they cost with
//! logging off. `EBB_BENCH_LOG=info` (any `EnvFilter` directive) installs a text subscriber, as
//! the `ebb` binary does, writing to a sink: that adds the cost of logging as deployed.

use std::future::Future;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::{Arc, Barrier, mpsc};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use bson::rawdoc;
use bytes::{Buf, BytesMut};
use ebb_wire::{Body, Frame, MAX_MESSAGE_SIZE, Message, OpMsg};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::oneshot;

/// Server runtime workers: what `#[tokio::main]` gives on the 2-core machine this targets.
const SERVER_WORKERS: usize = 2;
/// Interleaved rounds of the sequential phase.
const ROUNDS: usize = 5;
/// Interleaved rounds of the concurrent phase.
const CONCURRENT_ROUNDS: usize = 3;
/// Sequential requests sent to one server before switching to the other.
const BLOCK: usize = 1_000;
/// Requests per connection sent to one server before switching, in the concurrent phase.
const CONCURRENT_BLOCK: usize = 1_000;
/// Client connections (and threads) of the concurrent phase.
const CONNECTIONS: usize = 8;
/// Default sequential requests per server per round.
const DEFAULT_REQUESTS: usize = 20_000;
/// The goal: Ebb within this factor of the bare echo server.
const GOAL: f64 = 1.3;
/// Per-round ratios further apart than this (largest / smallest) mean the machine was noisy.
const NOISY_SPREAD: f64 = 1.25;
/// Bytes of a message header.
const HEADER_LEN: usize = 16;

fn main() {
    if let Err(e) = bench() {
        eprintln!("ping bench failed: {e}");
        std::process::exit(1);
    }
}

fn bench() -> io::Result<()> {
    let requests = requests_per_round();
    let logging = std::env::var("EBB_BENCH_LOG").ok();
    if let Some(directives) = &logging {
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new(directives))
            .with_writer(io::sink)
            .init();
    }
    let warmup = (requests / 10).clamp(100, 2_000);

    let request = ping_request()?;
    let ebb = Server::start("ebb", |listener, stop| {
        let config = ebb::Config {
            port: 0,
            // Ping touches no storage; memory keeps the run from creating ./data.
            in_memory: true,
            shutdown_timeout_secs: 1,
            ..ebb::Config::default()
        };
        ebb::run(listener, config, stop)
    })?;

    // Ebb's real reply, which the echo server will send back byte for byte.
    let mut ebb_client = Client::connect(ebb.addr, &request)?;
    let reply: Arc<[u8]> = ebb_client.round_trip()?.into();
    check_ping_reply(&reply)?;

    let echo_reply = Arc::clone(&reply);
    let echo = Server::start("echo", move |listener, stop| {
        echo_serve(listener, echo_reply, stop)
    })?;
    let mut echo_client = Client::connect(echo.addr, &request)?;
    let echoed = echo_client.round_trip()?;
    if echoed.get(..8) != reply.get(..8) || echoed.get(12..) != reply.get(12..) {
        return Err(io::Error::other(
            "the echo server's reply differs from Ebb's",
        ));
    }

    println!();
    println!(
        "Ebb ping vs bare tokio echo on 127.0.0.1 ({} build, {} CPUs, {SERVER_WORKERS} workers per \
         server runtime)",
        if cfg!(debug_assertions) {
            "DEBUG"
        } else {
            "release"
        },
        thread::available_parallelism().map_or(0, std::num::NonZero::get),
    );
    if let Ok(load) = std::fs::read_to_string("/proc/loadavg") {
        println!(
            "load average before the run: {} (other busy processes skew both servers)",
            load.split_whitespace()
                .take(3)
                .collect::<Vec<_>>()
                .join(" ")
        );
    }
    match &logging {
        Some(directives) => println!("logging: text subscriber at {directives:?}, to a sink"),
        None => println!("logging: off (no subscriber; EBB_BENCH_LOG=info to include it)"),
    }
    println!(
        "request {} B OP_MSG {{ping: 1, $db: \"admin\"}}; reply {} B (Ebb's own reply, replayed by \
         echo)",
        request.len(),
        reply.len()
    );

    let seq = sequential_phase(&mut ebb_client, &mut echo_client, requests, warmup)?;
    let mut ebb_clients = connect_all(ebb.addr, &request)?;
    let mut echo_clients = connect_all(echo.addr, &request)?;
    let con = concurrent_phase(&mut ebb_clients, &mut echo_clients, requests, warmup)?;
    report_goal(&seq, &con);

    // Close the clients first so Ebb's shutdown has nothing to drain.
    drop((ebb_client, echo_client, ebb_clients, echo_clients));
    ebb.stop()?;
    echo.stop()?;
    Ok(())
}

/// One connection per server, round trips one after another, in interleaved rounds.
fn sequential_phase(
    ebb: &mut Client,
    echo: &mut Client,
    requests: usize,
    warmup: usize,
) -> io::Result<Comparison> {
    for _ in 0..warmup {
        ebb.round_trip()?;
        echo.round_trip()?;
    }
    println!();
    println!(
        "sequential: 1 connection, {ROUNDS} rounds x {requests} requests per server, alternating \
         in blocks of {BLOCK} (warm-up {warmup})"
    );
    println!(
        "  {:<7} {:>12} {:>12} {:>8}",
        "round", "ebb p50 us", "echo p50 us", "ratio"
    );
    let mut all_ebb = Samples::default();
    let mut all_echo = Samples::default();
    let mut round_ratios = Vec::new();
    for round in 0..ROUNDS {
        let mut ebb_round = Samples::default();
        let mut echo_round = Samples::default();
        interleave(round, requests, BLOCK, |is_ebb, n| {
            if is_ebb {
                sequential(ebb, n, &mut ebb_round)
            } else {
                sequential(echo, n, &mut echo_round)
            }
        })?;
        let (e, o) = (ebb_round.summary(), echo_round.summary());
        round_ratios.push(e.p50_us / o.p50_us);
        println!(
            "  {:<7} {:>12.2} {:>12.2} {:>7.3}x",
            round + 1,
            e.p50_us,
            o.p50_us,
            e.p50_us / o.p50_us
        );
        all_ebb.extend(ebb_round);
        all_echo.extend(echo_round);
    }
    let comparison = Comparison {
        ebb: all_ebb.summary(),
        echo: all_echo.summary(),
        round_ratios,
    };
    comparison.print();
    Ok(comparison)
}

/// [`CONNECTIONS`] clients per server on their own threads, a fixed number of requests each,
/// in interleaved rounds.
fn concurrent_phase(
    ebb: &mut [Client],
    echo: &mut [Client],
    requests: usize,
    warmup: usize,
) -> io::Result<Comparison> {
    let per_client = (2 * requests).div_ceil(CONNECTIONS);
    let block = per_client.min(CONCURRENT_BLOCK);
    concurrent(ebb, warmup.div_ceil(CONNECTIONS), &mut Samples::default())?;
    concurrent(echo, warmup.div_ceil(CONNECTIONS), &mut Samples::default())?;
    println!();
    println!(
        "concurrent: {CONNECTIONS} connections on {CONNECTIONS} client threads, \
         {CONCURRENT_ROUNDS} rounds x {} requests per server, alternating in blocks of {}",
        per_client * CONNECTIONS,
        block * CONNECTIONS
    );
    println!(
        "  {:<7} {:>12} {:>12} {:>8}",
        "round", "ebb req/s", "echo req/s", "ratio"
    );
    let mut all_ebb = Samples::default();
    let mut all_echo = Samples::default();
    let mut round_ratios = Vec::new();
    for round in 0..CONCURRENT_ROUNDS {
        let mut ebb_round = Samples::default();
        let mut echo_round = Samples::default();
        interleave(round, per_client, block, |is_ebb, n| {
            if is_ebb {
                concurrent(ebb, n, &mut ebb_round)
            } else {
                concurrent(echo, n, &mut echo_round)
            }
        })?;
        let (e, o) = (ebb_round.summary(), echo_round.summary());
        round_ratios.push(o.throughput / e.throughput);
        println!(
            "  {:<7} {:>12.0} {:>12.0} {:>7.3}x",
            round + 1,
            e.throughput,
            o.throughput,
            e.throughput / o.throughput
        );
        all_ebb.extend(ebb_round);
        all_echo.extend(echo_round);
    }
    let comparison = Comparison {
        ebb: all_ebb.summary(),
        echo: all_echo.summary(),
        round_ratios,
    };
    comparison.print();
    Ok(comparison)
}

/// Runs `total` requests on each server in blocks of `block`, alternating servers block by block
/// and flipping which goes first every block, so a burst of machine noise lands on both.
/// `run(is_ebb, n)` sends `n` requests to one server.
fn interleave(
    round: usize,
    total: usize,
    block: usize,
    mut run: impl FnMut(bool, usize) -> io::Result<()>,
) -> io::Result<()> {
    let mut done = 0;
    let mut ebb_first = round.is_multiple_of(2);
    while done < total {
        let n = block.min(total - done);
        run(ebb_first, n)?;
        run(!ebb_first, n)?;
        ebb_first = !ebb_first;
        done += n;
    }
    Ok(())
}

/// The 1.3x goal, per measure and overall. Throughput is shown as echo/ebb so that every line
/// reads "how many times slower is Ebb".
fn report_goal(seq: &Comparison, con: &Comparison) {
    println!();
    println!("goal: Ebb within {GOAL}x of bare echo (informational, never fails the run)");
    let verdicts = [
        ("sequential p50 latency", "ebb/echo", seq.p50_ratio()),
        (
            "  median of the rounds",
            "ebb/echo",
            seq.median_round_ratio(),
        ),
        ("sequential mean latency", "ebb/echo", seq.mean_ratio()),
        (
            "sequential throughput",
            "echo/ebb",
            seq.throughput_slowdown(),
        ),
        (
            "concurrent throughput",
            "echo/ebb",
            con.throughput_slowdown(),
        ),
        (
            "  median of the rounds",
            "echo/ebb",
            con.median_round_ratio(),
        ),
    ];
    for (what, how, ratio) in verdicts {
        println!("  {what:<24} {how:<9} {ratio:>7.3}x  {}", verdict(ratio));
    }
    let worst = verdicts.iter().map(|(_, _, r)| *r).fold(0.0, f64::max);
    println!(
        "  {:<34} {worst:>7.3}x  {}",
        "overall (worst)",
        verdict(worst)
    );
    for (what, c) in [("sequential", seq), ("concurrent", con)] {
        if c.spread() > NOISY_SPREAD {
            println!(
                "  warning: {what} rounds disagree (ratios from {:.3}x to {:.3}x): the machine was \
                 noisy; rerun it quiet",
                c.round_ratios.iter().copied().fold(f64::MAX, f64::min),
                c.round_ratios.iter().copied().fold(f64::MIN, f64::max),
            );
        }
    }
    println!();
}

/// `EBB_BENCH_REQUESTS`, or the default.
fn requests_per_round() -> usize {
    match std::env::var("EBB_BENCH_REQUESTS") {
        Ok(v) => match v.trim().parse::<usize>() {
            Ok(n) if n >= 100 => n,
            _ => {
                eprintln!(
                    "EBB_BENCH_REQUESTS={v:?} is not a number >= 100; using {DEFAULT_REQUESTS}"
                );
                DEFAULT_REQUESTS
            }
        },
        Err(_) => DEFAULT_REQUESTS,
    }
}

fn verdict(ratio: f64) -> &'static str {
    if ratio <= GOAL { "PASS" } else { "MISS" }
}

/// `{ping: 1, $db: "admin"}` as an `OP_MSG`, encoded by Ebb's own codec.
fn ping_request() -> io::Result<Vec<u8>> {
    let message = Message {
        request_id: 1,
        response_to: 0,
        body: Body::Msg(OpMsg::new(rawdoc! { "ping": 1, "$db": "admin" })),
        compressor: None,
    };
    let mut out = BytesMut::new();
    message.encode(None, &mut out).map_err(io::Error::other)?;
    Ok(out.to_vec())
}

/// Checks that Ebb answered the ping with an `OP_MSG` `{ok: 1}`.
fn check_ping_reply(reply: &[u8]) -> io::Result<()> {
    let mut buf = BytesMut::from(reply);
    let frame = Frame::split(&mut buf, MAX_MESSAGE_SIZE)
        .map_err(io::Error::other)?
        .ok_or_else(|| io::Error::other("incomplete reply"))?;
    let message = Message::decode(&frame, MAX_MESSAGE_SIZE).map_err(io::Error::other)?;
    let Body::Msg(msg) = message.body else {
        return Err(io::Error::other("ping reply is not an OP_MSG"));
    };
    let ok = msg.body.get_f64("ok").unwrap_or(0.0);
    if ok.to_bits() == 1.0_f64.to_bits() {
        Ok(())
    } else {
        Err(io::Error::other(format!(
            "ping was not ok: {:?}",
            bson::Document::try_from(msg.body.as_ref())
        )))
    }
}

/// A server on its own thread with its own multi-threaded runtime.
struct Server {
    addr: SocketAddr,
    stop: oneshot::Sender<()>,
    thread: JoinHandle<io::Result<()>>,
}

impl Server {
    /// Binds `127.0.0.1:0` inside a fresh runtime on a new thread and runs `serve` there until
    /// [`Server::stop`].
    fn start<F, Fut>(name: &str, serve: F) -> io::Result<Server>
    where
        F: FnOnce(TcpListener, StopSignal) -> Fut + Send + 'static,
        Fut: Future<Output = io::Result<()>>,
    {
        let (addr_tx, addr_rx) = mpsc::channel();
        let (stop, stop_rx) = oneshot::channel();
        let worker_name = format!("{name}-worker");
        let thread = thread::Builder::new()
            .name(format!("{name}-server"))
            .spawn(move || {
                let runtime = tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(SERVER_WORKERS)
                    .thread_name(worker_name)
                    .enable_all()
                    .build()?;
                runtime.block_on(async move {
                    let listener = TcpListener::bind("127.0.0.1:0").await?;
                    // The receiver only goes away if the bench already failed.
                    let _ = addr_tx.send(listener.local_addr()?);
                    serve(listener, StopSignal(stop_rx)).await
                })
            })?;
        match addr_rx.recv() {
            Ok(addr) => Ok(Server { addr, stop, thread }),
            Err(_) => Err(match thread.join() {
                Ok(Err(e)) => e,
                _ => io::Error::other(format!("the {name} server thread died before listening")),
            }),
        }
    }

    fn stop(self) -> io::Result<()> {
        // An error means the server already returned; join reports why.
        let _ = self.stop.send(());
        self.thread
            .join()
            .map_err(|_| io::Error::other("server thread panicked"))?
    }
}

/// Completes when [`Server::stop`] is called (or the handle is dropped).
struct StopSignal(oneshot::Receiver<()>);

impl Future for StopSignal {
    type Output = ();

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<()> {
        std::pin::Pin::new(&mut self.0).poll(cx).map(|_| ())
    }
}

/// The bare echo server: accept, set `TCP_NODELAY` (as Ebb does), one task per connection.
async fn echo_serve(listener: TcpListener, reply: Arc<[u8]>, stop: StopSignal) -> io::Result<()> {
    let accept = async {
        loop {
            let (stream, _) = listener.accept().await?;
            stream.set_nodelay(true)?;
            tokio::spawn(echo_connection(stream, Arc::clone(&reply)));
        }
    };
    tokio::select! {
        result = accept => result,
        () = stop => Ok(()),
    }
}

/// Reads frames as Ebb does (one growing buffer, `read_buf`) and answers each with `reply`,
/// its `responseTo` set to the request's `requestID`. Ends on EOF or a bad length.
async fn echo_connection(mut stream: tokio::net::TcpStream, reply: Arc<[u8]>) -> io::Result<()> {
    let mut input = BytesMut::with_capacity(16 * 1024);
    let mut output = reply.to_vec();
    loop {
        if let Some(head) = input.get(..HEADER_LEN) {
            let mut len = [0; 4];
            len.copy_from_slice(&head[..4]);
            let len = usize::try_from(i32::from_le_bytes(len)).unwrap_or(0);
            if !(HEADER_LEN..=MAX_MESSAGE_SIZE).contains(&len) {
                return Err(io::Error::other("bad messageLength"));
            }
            if input.len() >= len {
                output[8..12].copy_from_slice(&head[4..8]);
                input.advance(len);
                stream.write_all(&output).await?;
                continue;
            }
        }
        if stream.read_buf(&mut input).await? == 0 {
            return Ok(());
        }
    }
}

/// One blocking client connection.
struct Client {
    stream: TcpStream,
    request: Vec<u8>,
    reply: Vec<u8>,
    next_id: i32,
}

impl Client {
    fn connect(addr: SocketAddr, request: &[u8]) -> io::Result<Client> {
        let stream = TcpStream::connect(addr)?;
        stream.set_nodelay(true)?;
        Ok(Client {
            stream,
            request: request.to_vec(),
            reply: vec![0; 64 * 1024],
            next_id: 0,
        })
    }

    /// Sends the ping with a fresh `requestID` and reads the whole reply, which must answer it.
    fn round_trip(&mut self) -> io::Result<&[u8]> {
        self.next_id = self.next_id.checked_add(1).unwrap_or(1);
        let id = self.next_id.to_le_bytes();
        self.request[4..8].copy_from_slice(&id);
        self.stream.write_all(&self.request)?;
        let mut have = 0;
        let len = loop {
            let n = self.stream.read(&mut self.reply[have..])?;
            if n == 0 {
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
            have += n;
            if have >= 4 {
                let mut len = [0; 4];
                len.copy_from_slice(&self.reply[..4]);
                let len = usize::try_from(i32::from_le_bytes(len)).unwrap_or(0);
                if !(HEADER_LEN..=self.reply.len()).contains(&len) || have > len {
                    return Err(io::Error::other(format!(
                        "bad reply: messageLength {len}, {have} bytes read"
                    )));
                }
                if have == len {
                    break len;
                }
            }
        };
        if self.reply[8..12] != id {
            return Err(io::Error::other("reply answers another request"));
        }
        Ok(&self.reply[..len])
    }
}

fn connect_all(addr: SocketAddr, request: &[u8]) -> io::Result<Vec<Client>> {
    (0..CONNECTIONS)
        .map(|_| Client::connect(addr, request))
        .collect()
}

/// Latencies in nanoseconds, and the wall time they were measured over.
#[derive(Default)]
struct Samples {
    nanos: Vec<u64>,
    wall: Duration,
}

impl Samples {
    fn extend(&mut self, other: Samples) {
        self.nanos.extend(other.nanos);
        self.wall += other.wall;
    }

    fn summary(&self) -> Summary {
        let mut sorted = self.nanos.clone();
        sorted.sort_unstable();
        let n = sorted.len();
        // Nearest rank: the smallest value with at least `permille` of the samples at or below it.
        let pct = |permille: usize| {
            let rank = (n * permille).div_ceil(1000).max(1);
            sorted.get(rank - 1).copied().map_or(0.0, micros)
        };
        let total: u64 = sorted.iter().sum();
        Summary {
            p50_us: pct(500),
            p99_us: pct(990),
            mean_us: micros(total) / count(n),
            throughput: count(n) / self.wall.as_secs_f64(),
        }
    }
}

#[allow(
    clippy::cast_precision_loss,
    reason = "nanosecond totals and request counts are far below 2^52"
)]
fn micros(nanos: u64) -> f64 {
    nanos as f64 / 1_000.0
}

#[allow(
    clippy::cast_precision_loss,
    reason = "request counts are far below 2^52"
)]
fn count(n: usize) -> f64 {
    n as f64
}

fn elapsed_nanos(since: Instant) -> u64 {
    u64::try_from(since.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

/// `n` sequential round trips on `client`.
fn sequential(client: &mut Client, n: usize, samples: &mut Samples) -> io::Result<()> {
    samples.nanos.reserve(n);
    let start = Instant::now();
    for _ in 0..n {
        let t = Instant::now();
        client.round_trip()?;
        samples.nanos.push(elapsed_nanos(t));
    }
    samples.wall += start.elapsed();
    Ok(())
}

/// `per_client` round trips on every client at once, one thread each, started together; adds
/// the latencies and the wall time to `samples`.
fn concurrent(clients: &mut [Client], per_client: usize, samples: &mut Samples) -> io::Result<()> {
    let barrier = Barrier::new(clients.len() + 1);
    thread::scope(|s| {
        let workers: Vec<_> = clients
            .iter_mut()
            .map(|client| {
                let barrier = &barrier;
                s.spawn(move || {
                    let mut mine = Samples::default();
                    barrier.wait();
                    sequential(client, per_client, &mut mine).map(|()| mine.nanos)
                })
            })
            .collect();
        barrier.wait();
        let start = Instant::now();
        let mut result = Ok(());
        for worker in workers {
            match worker.join() {
                Ok(Ok(nanos)) => samples.nanos.extend(nanos),
                Ok(Err(e)) => result = Err(e),
                Err(_) => result = Err(io::Error::other("client thread panicked")),
            }
        }
        samples.wall += start.elapsed();
        result
    })
}

#[derive(Clone, Copy)]
struct Summary {
    p50_us: f64,
    p99_us: f64,
    mean_us: f64,
    throughput: f64,
}

struct Comparison {
    ebb: Summary,
    echo: Summary,
    /// Ebb's slowdown in each round (p50 latency, or throughput), to judge the noise.
    round_ratios: Vec<f64>,
}

impl Comparison {
    /// The median per-round slowdown: robust when a few rounds were disturbed.
    fn median_round_ratio(&self) -> f64 {
        let mut sorted = self.round_ratios.clone();
        sorted.sort_by(f64::total_cmp);
        sorted.get(sorted.len() / 2).copied().unwrap_or(f64::NAN)
    }

    /// Largest over smallest per-round slowdown: near 1 when the rounds agree.
    fn spread(&self) -> f64 {
        let max = self.round_ratios.iter().copied().fold(f64::MIN, f64::max);
        let min = self.round_ratios.iter().copied().fold(f64::MAX, f64::min);
        max / min
    }

    fn p50_ratio(&self) -> f64 {
        self.ebb.p50_us / self.echo.p50_us
    }

    fn mean_ratio(&self) -> f64 {
        self.ebb.mean_us / self.echo.mean_us
    }

    fn throughput_ratio(&self) -> f64 {
        self.ebb.throughput / self.echo.throughput
    }

    /// How many times slower Ebb is by throughput (echo/ebb), comparable with latency ratios.
    fn throughput_slowdown(&self) -> f64 {
        self.echo.throughput / self.ebb.throughput
    }

    fn print(&self) {
        println!(
            "  {:<16} {:>9} {:>9} {:>9} {:>11}",
            "server", "p50 us", "p99 us", "mean us", "req/s"
        );
        for (name, s) in [("ebb", self.ebb), ("echo", self.echo)] {
            println!(
                "  {name:<16} {:>9.2} {:>9.2} {:>9.2} {:>11.0}",
                s.p50_us, s.p99_us, s.mean_us, s.throughput
            );
        }
        println!(
            "  {:<16} {:>8.3}x {:>8.3}x {:>8.3}x {:>10.3}x",
            "ratio ebb/echo",
            self.p50_ratio(),
            self.ebb.p99_us / self.echo.p99_us,
            self.mean_ratio(),
            self.throughput_ratio()
        );
        println!(
            "  Ebb's extra cost: {:+.2} us per request on the mean",
            self.ebb.mean_us - self.echo.mean_us
        );
    }
}
