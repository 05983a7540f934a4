//! How much memory does the server hold? Issue #17: "RSS: idle server, and with 1,000 idle
//! connections (≤ 64 KB each), printed by a bench".
//!
//! The real release `ebb` binary (its default allocator, a durable store in a temporary
//! directory, `--port 0`) is started alone; its resident memory (`VmRSS` of
//! `/proc/<pid>/status`) is read once it answers, then after [`CONNECTIONS`] connections have
//! each run a `hello` and a `ping` and stay open, idle; then again once they are closed. The
//! cost of a connection is the difference over their number, set against the 64 KB goal. Each
//! reading is the largest of a few taken [`SETTLE`] apart, so a connection's buffers are counted
//! once they are all made. `EBB_BENCH_SCALE` scales the number of connections.
//!
//! The goal is printed as PASS or MISS and never changes the exit status; the run fails only if
//! the server cannot start or a connection is not answered.

#[path = "common/mod.rs"]
mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use bson::rawdoc;
use bytes::BytesMut;
use common::{BenchResult, EbbProcess, scale, scaled, verdict};
use ebb_wire::{Body, Message, OpMsg};

/// Idle connections held open (scaled).
const CONNECTIONS: f64 = 1_000.0;
/// The most a connection may cost, in KB.
const GOAL_KB: f64 = 64.0;
/// Time between readings of the resident memory.
const SETTLE: Duration = Duration::from_millis(300);

type Result<T = ()> = BenchResult<T>;

fn main() {
    if let Err(e) = bench() {
        eprintln!("memory bench failed: {e}");
        std::process::exit(1);
    }
}

/// The largest of three readings, [`SETTLE`] apart.
fn settled_rss_kb(server: &EbbProcess) -> f64 {
    let mut most: f64 = 0.0;
    for _ in 0..3 {
        std::thread::sleep(SETTLE);
        most = most.max(server.rss_kb());
    }
    most
}

fn request(id: i32, body: bson::RawDocumentBuf) -> Result<Vec<u8>> {
    let message = Message {
        request_id: id,
        response_to: 0,
        body: Body::Msg(OpMsg::new(body)),
        compressor: None,
    };
    let mut out = BytesMut::new();
    message.encode(None, &mut out)?;
    Ok(out.to_vec())
}

/// Sends `bytes` and reads one whole reply.
fn round_trip(stream: &mut TcpStream, bytes: &[u8]) -> Result {
    stream.write_all(bytes)?;
    let mut head = [0_u8; 4];
    stream.read_exact(&mut head)?;
    let len = usize::try_from(i32::from_le_bytes(head))?;
    let mut rest = vec![0_u8; len.saturating_sub(4)];
    stream.read_exact(&mut rest)?;
    Ok(())
}

fn bench() -> Result {
    let connections = scaled(CONNECTIONS, scale());
    println!(
        "\nEbb memory: resident memory of the release server (its default allocator, durable \
         store), idle and with {connections} idle connections"
    );
    let server = EbbProcess::start(&[])?;
    let hello = request(1, rawdoc! { "hello": 1, "$db": "admin" })?;
    let ping = request(2, rawdoc! { "ping": 1, "$db": "admin" })?;
    // One connection first, so that what the first one alone makes is in the idle figure.
    {
        let mut first = TcpStream::connect(server.addr)?;
        round_trip(&mut first, &hello)?;
    }
    let idle = settled_rss_kb(&server);
    let mut open = Vec::with_capacity(connections);
    for _ in 0..connections {
        let mut stream = TcpStream::connect(server.addr)?;
        stream.set_read_timeout(Some(Duration::from_secs(10)))?;
        round_trip(&mut stream, &hello)?;
        round_trip(&mut stream, &ping)?;
        open.push(stream);
    }
    let loaded = settled_rss_kb(&server);
    drop(open);
    let closed = settled_rss_kb(&server);
    let per = (loaded - idle) / common::to_f64(connections.max(1));
    println!("  resident memory (MB)");
    for (what, kb) in [
        ("idle, after start".to_owned(), idle),
        (format!("with {connections} idle connections"), loaded),
        ("after they closed".to_owned(), closed),
    ] {
        println!("    {what:<34} {:>8.1}", kb / 1024.0);
    }
    println!("  per idle connection: {per:.1} KB");
    println!("\ngoals (informational, never fail the run):");
    println!(
        "  an idle connection costs <= {GOAL_KB:.0} KB: {per:.1} KB  {}",
        verdict(per <= GOAL_KB)
    );
    Ok(())
}
