//! What does TLS add to a `ping` round trip?
//!
//! One Ebb server with `--tlsMode preferTLS` (a throwaway CA and certificate made by `rcgen`),
//! which serves TLS and plain-text clients on the same port, so that the transport is the only
//! difference. Two blocking clients (`TCP_NODELAY`) send the raw `OP_MSG`
//! `{ping: 1, $db: "admin"}`: one over plain TCP, one over rustls (TLS 1.3, ring, as the
//! server). Sequential round trips, in rounds after a warm-up; within a round the clients take
//! turns in blocks (who goes first flips every block) so machine noise hits both alike.
//!
//! The goal from issue 14, "a TLS ping within 1.3× of the plain one", is reported as PASS or
//! MISS and never changes the exit status: this is a measurement, not a test. It fails
//! (non-zero) only if the server cannot be started or a reply is not a whole message.
//!
//! `EBB_BENCH_REQUESTS` sets the requests per client per round (default 20000).

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::{Arc, mpsc};
use std::thread;
use std::time::{Duration, Instant};

use bson::rawdoc;
use bytes::BytesMut;
use ebb_wire::{Body, Message, OpMsg};

/// Server runtime workers: what `#[tokio::main]` gives on the 2-core machine this targets.
const SERVER_WORKERS: usize = 2;
/// Interleaved rounds.
const ROUNDS: usize = 5;
/// Requests sent by one client before switching to the other.
const BLOCK: usize = 1_000;
/// Default requests per client per round.
const DEFAULT_REQUESTS: usize = 20_000;
/// The goal: TLS within this factor of plain text.
const GOAL: f64 = 1.3;

fn main() {
    if let Err(e) = bench() {
        eprintln!("tls bench failed: {e}");
        std::process::exit(1);
    }
}

fn bench() -> Result<(), Box<dyn std::error::Error>> {
    let requests = std::env::var("EBB_BENCH_REQUESTS")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .filter(|&n| n > 0)
        .unwrap_or(DEFAULT_REQUESTS);
    let dir = tempfile::tempdir()?;
    let (ca_pem, server_pem) = certificates()?;
    std::fs::write(dir.path().join("ca.pem"), &ca_pem)?;
    std::fs::write(dir.path().join("server.pem"), &server_pem)?;
    let config = ebb::Config {
        port: 0,
        in_memory: true,
        shutdown_timeout_secs: 1,
        tls_mode: ebb::config::TlsMode::PreferTls,
        tls_certificate_key_file: Some(dir.path().join("server.pem")),
        tls_ca_file: Some(dir.path().join("ca.pem")),
        tls_allow_connections_without_certificates: true,
        ..ebb::Config::default()
    };
    let (addr, stop) = start_server(config)?;

    let request = ping_request()?;
    let mut plain = Client::new(Box::new(plain_stream(addr)?), &request);
    let mut tls = Client::new(Box::new(tls_stream(addr, &ca_pem)?), &request);
    plain.round_trip()?;
    tls.round_trip()?;

    println!();
    println!(
        "Ebb ping over TLS 1.3 vs plain TCP, one preferTLS server on 127.0.0.1 ({} build, {} \
         CPUs, {SERVER_WORKERS} server workers)",
        if cfg!(debug_assertions) {
            "DEBUG"
        } else {
            "release"
        },
        thread::available_parallelism().map_or(0, std::num::NonZero::get),
    );
    let warmup = (requests / 10).clamp(100, 2_000);
    for _ in 0..warmup {
        plain.round_trip()?;
        tls.round_trip()?;
    }
    let mut ratios = Vec::new();
    let (mut all_plain, mut all_tls) = (Vec::new(), Vec::new());
    for round in 0..ROUNDS {
        let (mut p, mut t) = (Vec::with_capacity(requests), Vec::with_capacity(requests));
        let mut block = 0;
        while p.len() < requests {
            let n = BLOCK.min(requests - p.len());
            if (round + block) % 2 == 0 {
                plain.time(n, &mut p)?;
                tls.time(n, &mut t)?;
            } else {
                tls.time(n, &mut t)?;
                plain.time(n, &mut p)?;
            }
            block += 1;
        }
        let ratio = mean(&t) / mean(&p);
        println!(
            "round {}: plain mean {:>7.1} µs, TLS mean {:>7.1} µs, ratio {ratio:.3}",
            round + 1,
            mean(&p),
            mean(&t)
        );
        ratios.push(ratio);
        all_plain.extend(p);
        all_tls.extend(t);
    }
    ratios.sort_by(f64::total_cmp);
    let median = ratios.get(ratios.len() / 2).copied().unwrap_or(f64::NAN);
    for (name, samples) in [("plain", &mut all_plain), ("TLS", &mut all_tls)] {
        samples.sort_by(f64::total_cmp);
        println!(
            "{name:>5}: p50 {:>7.1} µs  p99 {:>7.1} µs  mean {:>7.1} µs  ({} round trips)",
            percentile(samples, 0.50),
            percentile(samples, 0.99),
            mean(samples),
            samples.len()
        );
    }
    println!(
        "TLS / plain, median of {ROUNDS} rounds: {median:.3} (goal ≤ {GOAL}): {}",
        if median <= GOAL { "PASS" } else { "MISS" }
    );
    drop(plain);
    drop(tls);
    let _ = stop.send(());
    Ok(())
}

/// A CA's PEM, and a server certificate for `localhost` and 127.0.0.1 with its key.
fn certificates() -> Result<(String, String), rcgen::Error> {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
    let ca_key = KeyPair::generate()?;
    let mut ca = CertificateParams::new(Vec::<String>::new())?;
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_pem = ca.self_signed(&ca_key)?.pem();
    let key = KeyPair::generate()?;
    let server = CertificateParams::new(vec!["localhost".to_owned(), "127.0.0.1".to_owned()])?
        .signed_by(&key, &Issuer::from_params(&ca, &ca_key))?;
    Ok((ca_pem, format!("{}{}", server.pem(), key.serialize_pem())))
}

/// Starts Ebb on its own thread and runtime; returns its address and what stops it.
fn start_server(
    config: ebb::Config,
) -> Result<(SocketAddr, tokio::sync::oneshot::Sender<()>), Box<dyn std::error::Error>> {
    let (addr_tx, addr_rx) = mpsc::channel();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    thread::spawn(move || {
        let runtime = match tokio::runtime::Builder::new_multi_thread()
            .worker_threads(SERVER_WORKERS)
            .enable_all()
            .build()
        {
            Ok(runtime) => runtime,
            Err(e) => {
                let _ = addr_tx.send(Err(e.to_string()));
                return;
            }
        };
        runtime.block_on(async move {
            let listener = match tokio::net::TcpListener::bind("127.0.0.1:0").await {
                Ok(l) => l,
                Err(e) => {
                    let _ = addr_tx.send(Err(e.to_string()));
                    return;
                }
            };
            let _ = addr_tx.send(listener.local_addr().map_err(|e| e.to_string()));
            if let Err(e) = ebb::run(listener, config, async {
                let _ = stop_rx.await;
            })
            .await
            {
                eprintln!("server stopped: {e}");
            }
        });
    });
    let addr = addr_rx.recv_timeout(Duration::from_secs(10))??;
    Ok((addr, stop_tx))
}

fn plain_stream(addr: SocketAddr) -> io::Result<TcpStream> {
    let stream = TcpStream::connect(addr)?;
    stream.set_nodelay(true)?;
    Ok(stream)
}

/// A rustls (TLS 1.3, ring) client connection that trusts `ca_pem`.
fn tls_stream(
    addr: SocketAddr,
    ca_pem: &str,
) -> Result<rustls::StreamOwned<rustls::ClientConnection, TcpStream>, Box<dyn std::error::Error>> {
    use rustls_pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls_pki_types::CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots.add(cert?)?;
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_protocol_versions(&[&rustls::version::TLS13])?
    .with_root_certificates(roots)
    .with_no_client_auth();
    let name = rustls_pki_types::ServerName::try_from("localhost")?;
    let connection = rustls::ClientConnection::new(Arc::new(config), name)?;
    Ok(rustls::StreamOwned::new(connection, plain_stream(addr)?))
}

/// The request, built with Ebb's own encoder.
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

/// Something to read from and write to.
trait Stream: Read + Write {}
impl<T: Read + Write> Stream for T {}

/// A blocking client sending one request at a time.
struct Client {
    stream: Box<dyn Stream>,
    request: Vec<u8>,
    reply: Vec<u8>,
}

impl Client {
    fn new(stream: Box<dyn Stream>, request: &[u8]) -> Client {
        Client {
            stream,
            request: request.to_vec(),
            reply: vec![0; 64 * 1024],
        }
    }

    /// One round trip; checks that the reply is a whole message of `ok: 1`.
    fn round_trip(&mut self) -> io::Result<()> {
        self.stream.write_all(&self.request)?;
        self.stream.flush()?;
        let mut len = [0u8; 4];
        self.stream.read_exact(&mut len)?;
        let len = usize::try_from(i32::from_le_bytes(len)).unwrap_or(0);
        let Some(rest) = self.reply.get_mut(..len.saturating_sub(4)) else {
            return Err(io::Error::other(format!("reply of {len} bytes")));
        };
        self.stream.read_exact(rest)?;
        if len < 16 {
            return Err(io::Error::other(format!("reply of {len} bytes")));
        }
        Ok(())
    }

    /// `n` round trips, each one's time (µs) pushed to `out`.
    fn time(&mut self, n: usize, out: &mut Vec<f64>) -> io::Result<()> {
        for _ in 0..n {
            let start = Instant::now();
            self.round_trip()?;
            out.push(start.elapsed().as_secs_f64() * 1e6);
        }
        Ok(())
    }
}

#[expect(clippy::cast_precision_loss, reason = "sample counts are small")]
fn mean(samples: &[f64]) -> f64 {
    samples.iter().sum::<f64>() / samples.len().max(1) as f64
}

#[expect(
    clippy::cast_precision_loss,
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    reason = "an index into a sorted sample"
)]
fn percentile(sorted: &[f64], p: f64) -> f64 {
    let at = ((sorted.len().saturating_sub(1)) as f64 * p).round() as usize;
    sorted.get(at).copied().unwrap_or(f64::NAN)
}
