//! What does logging in add to a new connection?
//!
//! One Ebb server with access control on (`--auth`) and one user with SCRAM-SHA-1 and
//! SCRAM-SHA-256 credentials. Each measured connection does what a driver does for a new
//! pooled connection, then one `ping`, then closes:
//!
//! - **plain**: `hello` with the driver's client metadata, then `ping` (open to anyone), no
//!   login: the in-run baseline;
//! - **SCRAM-SHA-256** / **SCRAM-SHA-1**: the same `hello` carrying `speculativeAuthenticate`
//!   (the `saslStart` with the client-first message and `skipEmptyExchange`, as drivers send
//!   it), then one `saslContinue` with the proof, checked against the server's signature, then
//!   `ping`. The client keeps the salted password per (password, salt, iterations), as drivers
//!   do, so the client's PBKDF2 runs once per mechanism, not per connection; the server keeps
//!   only the stored and server keys and runs none.
//!
//! Blocking clients with `TCP_NODELAY`, one connection at a time, in rounds; within a round
//! the three kinds take turns in blocks (the order rotates every block) so machine noise hits
//! them alike. Reported: connections per second of each kind, and each login's cost as a ratio
//! to plain. This is a measurement, not a test: no timed assertion; it fails (non-zero) only
//! if the server cannot be started or an answer is wrong.
//!
//! `EBB_BENCH_CONNECTIONS` sets the connections per kind per round (default 600; kept small
//! because every closed connection leaves a `TIME_WAIT` socket on an ephemeral port).

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use bson::{RawDocument, RawDocumentBuf, rawdoc};
use bytes::BytesMut;
use ebb_wire::{Body, Message, OpMsg};
use hmac::digest::Digest as _;
use hmac::{EagerHash, Hmac, KeyInit, Mac};

/// Server runtime workers: what `#[tokio::main]` gives on the 2-core machine this targets.
const SERVER_WORKERS: usize = 2;
/// Interleaved rounds.
const ROUNDS: usize = 5;
/// Connections of one kind before the next kind's turn.
const BLOCK: usize = 50;
/// Default connections per kind per round.
const DEFAULT_CONNECTIONS: usize = 600;
const USER: &str = "bench";
const PASSWORD: &str = "bench-password";

fn main() {
    if let Err(e) = bench() {
        eprintln!("auth bench failed: {e}");
        std::process::exit(1);
    }
}

/// What a measured connection does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Plain,
    Sha256,
    Sha1,
}

impl Kind {
    const ALL: [Kind; 3] = [Kind::Plain, Kind::Sha256, Kind::Sha1];

    fn label(self) -> &'static str {
        match self {
            Kind::Plain => "plain",
            Kind::Sha256 => "SCRAM-SHA-256",
            Kind::Sha1 => "SCRAM-SHA-1",
        }
    }
}

fn bench() -> Result<(), Box<dyn std::error::Error>> {
    let connections = std::env::var("EBB_BENCH_CONNECTIONS")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .filter(|&n| n > 0)
        .unwrap_or(DEFAULT_CONNECTIONS);
    let config = ebb::Config {
        port: 0,
        in_memory: true,
        shutdown_timeout_secs: 1,
        auth: true,
        ..ebb::Config::default()
    };
    let (addr, stop) = start_server(config)?;
    create_user(addr)?;

    let mut client = Client::default();
    for kind in Kind::ALL {
        client.connection(addr, kind)?;
    }
    println!();
    println!(
        "Ebb new connections (hello [+ speculative SCRAM login] + ping), one --auth server on \
         127.0.0.1 ({} build, {} CPUs, {SERVER_WORKERS} server workers)",
        if cfg!(debug_assertions) {
            "DEBUG"
        } else {
            "release"
        },
        thread::available_parallelism().map_or(0, std::num::NonZero::get),
    );
    let warmup = (connections / 10).clamp(10, 100);
    for _ in 0..warmup {
        for kind in Kind::ALL {
            client.connection(addr, kind)?;
        }
    }
    let mut per_kind: [Vec<f64>; 3] = Default::default();
    let mut ratios: [Vec<f64>; 3] = Default::default();
    for round in 0..ROUNDS {
        let mut times = [Duration::ZERO; 3];
        let mut done = 0;
        let mut block = 0;
        while done < connections {
            let n = BLOCK.min(connections - done);
            for turn in 0..Kind::ALL.len() {
                let i = (turn + block + round) % Kind::ALL.len();
                let start = Instant::now();
                for _ in 0..n {
                    client.connection(addr, Kind::ALL[i])?;
                }
                times[i] += start.elapsed();
            }
            done += n;
            block += 1;
        }
        let rates = times.map(|t| per_second(connections, t));
        println!(
            "round {}: {}",
            round + 1,
            Kind::ALL
                .iter()
                .zip(rates)
                .map(|(k, r)| format!("{} {r:>7.0}/s", k.label()))
                .collect::<Vec<_>>()
                .join(", ")
        );
        for i in 0..Kind::ALL.len() {
            per_kind[i].push(rates[i]);
            ratios[i].push(times[i].as_secs_f64() / times[0].as_secs_f64());
        }
    }
    for (i, kind) in Kind::ALL.iter().enumerate() {
        let rate = median(&mut per_kind[i]);
        let ratio = median(&mut ratios[i]);
        println!(
            "{:>13}: median {rate:>7.0} connections/s, {:>6.1} µs each, time per connection \
             {ratio:.2}× plain",
            kind.label(),
            1e6 / rate
        );
    }
    let _ = stop.send(());
    Ok(())
}

#[expect(clippy::cast_precision_loss, reason = "connection counts are small")]
fn per_second(n: usize, elapsed: Duration) -> f64 {
    n as f64 / elapsed.as_secs_f64().max(1e-9)
}

fn median(samples: &mut [f64]) -> f64 {
    samples.sort_by(f64::total_cmp);
    samples.get(samples.len() / 2).copied().unwrap_or(f64::NAN)
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

/// Creates the user through the localhost exception (the first user, so it may).
fn create_user(addr: SocketAddr) -> Result<(), Box<dyn std::error::Error>> {
    let mut stream = connect(addr)?;
    let mut buf = Vec::new();
    let reply = round_trip(
        &mut stream,
        rawdoc! {
            "createUser": USER, "pwd": PASSWORD,
            "roles": [{ "role": "readAnyDatabase", "db": "admin" }],
            "$db": "admin",
        },
        &mut buf,
    )?;
    check_ok(reply, "createUser")
}

fn connect(addr: SocketAddr) -> io::Result<TcpStream> {
    let stream = TcpStream::connect(addr)?;
    stream.set_nodelay(true)?;
    Ok(stream)
}

/// Sends `body` as an `OP_MSG` (built with Ebb's own encoder) and returns the reply's body,
/// read into `buf`.
fn round_trip<'a>(
    stream: &mut TcpStream,
    body: RawDocumentBuf,
    buf: &'a mut Vec<u8>,
) -> io::Result<&'a RawDocument> {
    let message = Message {
        request_id: 1,
        response_to: 0,
        body: Body::Msg(OpMsg::new(body)),
        compressor: None,
    };
    let mut out = BytesMut::new();
    message.encode(None, &mut out).map_err(io::Error::other)?;
    stream.write_all(&out)?;
    let mut len = [0u8; 4];
    stream.read_exact(&mut len)?;
    let len = usize::try_from(i32::from_le_bytes(len)).unwrap_or(0);
    // header (16) + flagBits (4) + section kind (1), then the body.
    if len < 21 {
        return Err(io::Error::other(format!("reply of {len} bytes")));
    }
    buf.clear();
    buf.resize(len - 4, 0);
    stream.read_exact(buf)?;
    let body = buf
        .get(17..)
        .ok_or_else(|| io::Error::other("short reply"))?;
    RawDocument::from_bytes(body).map_err(io::Error::other)
}

fn check_ok(reply: &RawDocument, what: &str) -> Result<(), Box<dyn std::error::Error>> {
    if reply.get_f64("ok").ok() == Some(1.0) {
        Ok(())
    } else {
        Err(format!("{what}: {reply:?}").into())
    }
}

fn payload(reply: &RawDocument) -> Result<&[u8], Box<dyn std::error::Error>> {
    Ok(reply.get_binary("payload")?.bytes)
}

/// The client side: reply buffer and the salted-password cache drivers keep.
#[derive(Default)]
struct Client {
    buf: Vec<u8>,
    salted: HashMap<(bool, Vec<u8>, u32), Vec<u8>>,
}

impl Client {
    /// One connection of `kind`: handshake, login when asked, `ping`, close.
    fn connection(
        &mut self,
        addr: SocketAddr,
        kind: Kind,
    ) -> Result<(), Box<dyn std::error::Error>> {
        let mut stream = connect(addr)?;
        let mut hello = rawdoc! {
            "hello": 1,
            "helloOk": true,
            "client": {
                "driver": { "name": "ebb-bench", "version": "1" },
                "os": { "type": std::env::consts::OS },
                "platform": "rust",
            },
            "compression": [],
        };
        let mech = match kind {
            Kind::Plain => None,
            Kind::Sha256 => Some(Mech::Sha256),
            Kind::Sha1 => Some(Mech::Sha1),
        };
        let mut nonce = [0u8; 24];
        let first_bare = if let Some(mech) = mech {
            getrandom::fill(&mut nonce).map_err(|e| e.to_string())?;
            let bare = format!("n={USER},r={}", BASE64.encode(nonce));
            hello.append(
                bson::raw::cstr!("speculativeAuthenticate"),
                rawdoc! {
                    "saslStart": 1,
                    "mechanism": mech.name(),
                    "payload": bson::Binary {
                        subtype: bson::spec::BinarySubtype::Generic,
                        bytes: format!("n,,{bare}").into_bytes(),
                    },
                    "options": { "skipEmptyExchange": true },
                    "db": "admin",
                },
            );
            Some(bare)
        } else {
            None
        };
        hello.append(bson::raw::cstr!("$db"), "admin");
        let reply = round_trip(&mut stream, hello, &mut self.buf)?;
        check_ok(reply, "hello")?;
        if let (Some(mech), Some(bare)) = (mech, first_bare) {
            let spec = reply.get_document("speculativeAuthenticate")?;
            let server_first = String::from_utf8(payload(spec)?.to_vec())?;
            let (last, signature) = self.client_final(mech, &bare, &server_first)?;
            let reply = round_trip(
                &mut stream,
                rawdoc! {
                    "saslContinue": 1,
                    "conversationId": 1,
                    "payload": bson::Binary {
                        subtype: bson::spec::BinarySubtype::Generic,
                        bytes: last,
                    },
                    "$db": "admin",
                },
                &mut self.buf,
            )?;
            check_ok(reply, "saslContinue")?;
            if !reply.get_bool("done")? || payload(reply)? != signature.as_slice() {
                return Err(format!("login did not finish: {reply:?}").into());
            }
        }
        let reply = round_trip(
            &mut stream,
            rawdoc! { "ping": 1, "$db": "admin" },
            &mut self.buf,
        )?;
        check_ok(reply, "ping")
    }

    /// The client-final message for `server_first`, and the server-final message expected.
    fn client_final(
        &mut self,
        mech: Mech,
        bare: &str,
        server_first: &str,
    ) -> Result<(Vec<u8>, Vec<u8>), Box<dyn std::error::Error>> {
        let field = |key: &str| {
            server_first
                .split(',')
                .find_map(|f| f.strip_prefix(key))
                .ok_or_else(|| format!("no {key} in {server_first}"))
        };
        let nonce = field("r=")?;
        let salt = BASE64.decode(field("s=")?)?;
        let iterations: u32 = field("i=")?.parse()?;
        let salted = self
            .salted
            .entry((mech == Mech::Sha1, salt.clone(), iterations))
            .or_insert_with(|| mech.salted(&salt, iterations))
            .clone();
        let client_key = mech.hmac(&salted, b"Client Key");
        let stored_key = mech.hash(&client_key);
        let without_proof = format!("c=biws,r={nonce}");
        let auth_message = format!("{bare},{server_first},{without_proof}");
        let signature = mech.hmac(&stored_key, auth_message.as_bytes());
        let proof: Vec<u8> = client_key
            .iter()
            .zip(&signature)
            .map(|(k, s)| k ^ s)
            .collect();
        let server_key = mech.hmac(&salted, b"Server Key");
        let server_signature = mech.hmac(&server_key, auth_message.as_bytes());
        Ok((
            format!("{without_proof},p={}", BASE64.encode(proof)).into_bytes(),
            format!("v={}", BASE64.encode(server_signature)).into_bytes(),
        ))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mech {
    Sha1,
    Sha256,
}

impl Mech {
    fn name(self) -> &'static str {
        match self {
            Mech::Sha1 => "SCRAM-SHA-1",
            Mech::Sha256 => "SCRAM-SHA-256",
        }
    }

    fn hmac(self, key: &[u8], data: &[u8]) -> Vec<u8> {
        fn with<D>(key: &[u8], data: &[u8]) -> Vec<u8>
        where
            D: EagerHash,
            Hmac<D>: KeyInit + Mac,
        {
            let Ok(mut mac) = <Hmac<D> as KeyInit>::new_from_slice(key) else {
                return Vec::new();
            };
            Mac::update(&mut mac, data);
            mac.finalize().into_bytes().to_vec()
        }
        match self {
            Mech::Sha1 => with::<sha1::Sha1>(key, data),
            Mech::Sha256 => with::<sha2::Sha256>(key, data),
        }
    }

    fn hash(self, data: &[u8]) -> Vec<u8> {
        match self {
            Mech::Sha1 => sha1::Sha1::digest(data).to_vec(),
            Mech::Sha256 => sha2::Sha256::digest(data).to_vec(),
        }
    }

    /// `Hi(password, salt, i)` for [`PASSWORD`]: SCRAM-SHA-1 salts mongod's digest of it.
    fn salted(self, salt: &[u8], iterations: u32) -> Vec<u8> {
        match self {
            Mech::Sha1 => {
                let digest = ebb::auth::scram::mongo_password_digest(USER, PASSWORD);
                let mut out = vec![0; 20];
                pbkdf2::pbkdf2_hmac::<sha1::Sha1>(digest.as_bytes(), salt, iterations, &mut out);
                out
            }
            Mech::Sha256 => {
                let mut out = vec![0; 32];
                pbkdf2::pbkdf2_hmac::<sha2::Sha256>(
                    PASSWORD.as_bytes(),
                    salt,
                    iterations,
                    &mut out,
                );
                out
            }
        }
    }
}
