//! Shared by the integration tests: an in-process server on `127.0.0.1:0`, a `mongodb` client
//! for it, and raw-byte helpers for what the driver never sends (OP_QUERY, `moreToCome`,
//! malformed frames); in [`process`], the real `ebb` binary as a child process, for the tests
//! that kill and restart it; in [`garbage`], what the tests of removed data share.
//!
//! Replies read by [`RawConn`] are parsed here by hand, independently of the server's codec, so
//! that a bug shared by the server's encoder and decoder cannot hide. Only decompression goes
//! through `ebb_wire::Compressor` (the compression libraries are not dependencies of `ebb`); the
//! driver tests in `handshake.rs` exercise compression against an independent implementation.

#![allow(
    dead_code,
    reason = "each test binary uses a different subset of these helpers"
)]

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use bson::{Bson, Document, doc};
use ebb::Config;
use mongodb::Client;
use mongodb::options::{ClientOptions, Compressor};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

pub mod certs;
pub mod garbage;
pub mod process;
pub mod rng;
pub mod scram;

/// What tests return, so that IO and driver errors propagate with `?`.
pub type TestResult<T = ()> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// `OP_REPLY`.
pub const OP_REPLY: i32 = 1;
/// `OP_QUERY`.
pub const OP_QUERY: i32 = 2004;
/// `OP_COMPRESSED`.
pub const OP_COMPRESSED: i32 = 2012;
/// `OP_MSG`.
pub const OP_MSG: i32 = 2013;

/// `OP_MSG` `checksumPresent`.
pub const CHECKSUM_PRESENT: u32 = 1;
/// `OP_MSG` `moreToCome`.
pub const MORE_TO_COME: u32 = 1 << 1;
/// `OP_REPLY` `QueryFailure`.
pub const QUERY_FAILURE: u32 = 1 << 1;

/// `OP_COMPRESSED` compressor ids.
pub const NOOP: u8 = 0;
/// snappy.
pub const SNAPPY: u8 = 1;
/// zlib.
pub const ZLIB: u8 = 2;
/// zstd.
pub const ZSTD: u8 = 3;

/// The server's `maxMessageSizeBytes`.
pub const MAX_MESSAGE_SIZE: i32 = 48_000_000;

/// How long any single network step may take before the test fails instead of hanging. This is
/// a guard against a server that never answers, not a performance expectation.
pub const IO_TIMEOUT: Duration = Duration::from_secs(10);

/// Awaits `fut`, failing with `TimedOut` after [`IO_TIMEOUT`].
pub async fn within<T>(what: &str, fut: impl Future<Output = io::Result<T>>) -> io::Result<T> {
    match tokio::time::timeout(IO_TIMEOUT, fut).await {
        Ok(result) => result,
        Err(_) => Err(io::Error::new(
            io::ErrorKind::TimedOut,
            format!("{what}: nothing after {IO_TIMEOUT:?}"),
        )),
    }
}

// ---------------------------------------------------------------------------------------------
// The server
// ---------------------------------------------------------------------------------------------

/// A server running in-process on the test's runtime.
pub struct TestServer {
    addr: SocketAddr,
    config: Config,
    shutdown: Option<oneshot::Sender<()>>,
    handle: Option<JoinHandle<io::Result<()>>>,
    data_dir: PathBuf,
    /// Whether the data directory is this server's own, removed when it is dropped (not one a
    /// test passed in to reuse across restarts).
    owns_data_dir: bool,
}

/// A directory of its own for each server, so that no test writes into the working tree or
/// sees another test's data.
fn fresh_data_dir() -> io::Result<PathBuf> {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let dir = std::env::temp_dir().join(format!(
        "ebb-it-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    // Left over from an earlier process with the same pid.
    if dir.exists() {
        std::fs::remove_dir_all(&dir)?;
    }
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

impl TestServer {
    /// Starts a server with the default configuration.
    pub async fn start() -> io::Result<TestServer> {
        Self::start_with(|_| {}).await
    }

    /// Starts a server after `configure` has adjusted its configuration. The listener is bound
    /// before `ebb::run` is called, so the port is known and connections are accepted (queued
    /// by the kernel) as soon as this returns.
    pub async fn start_with(configure: impl FnOnce(&mut Config)) -> io::Result<TestServer> {
        Self::launch(fresh_data_dir()?, true, configure).await
    }

    /// Starts a server with test-only commands enabled (`ebbAdvanceClock`, see
    /// [`advance_clock`]), in memory.
    pub async fn start_with_test_clock() -> io::Result<TestServer> {
        Self::start_with(|c| c.enable_test_commands = true).await
    }

    /// Starts a server with the durable store (`in_memory: false`) in `data_dir`, which the
    /// caller owns: it is left in place when the server stops, so that another server can be
    /// started on it. `configure` adjusts the rest of the configuration.
    pub async fn start_durable(
        data_dir: &Path,
        configure: impl FnOnce(&mut Config),
    ) -> io::Result<TestServer> {
        Self::launch(data_dir.to_path_buf(), false, |config| {
            config.in_memory = false;
            configure(config);
        })
        .await
    }

    async fn launch(
        data_dir: PathBuf,
        owns_data_dir: bool,
        configure: impl FnOnce(&mut Config),
    ) -> io::Result<TestServer> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let mut config = Config {
            bind: "127.0.0.1".into(),
            port: addr.port(),
            data_dir: data_dir.clone(),
            argv: vec!["ebb".into(), "--port".into(), addr.port().to_string()],
            ..Config::default()
        };
        configure(&mut config);
        // As `ebb::run` does (idempotent): the test then knows the Cosmos DB profile's key and
        // CA file.
        config.resolve_profile()?;
        let (tx, rx) = oneshot::channel::<()>();
        let handle = tokio::spawn(ebb::run(listener, config.clone(), async move {
            // A dropped sender means the test is over: shut down too.
            let _ = rx.await;
        }));
        Ok(TestServer {
            addr,
            config,
            shutdown: Some(tx),
            handle: Some(handle),
            data_dir,
            owns_data_dir,
        })
    }

    /// The address the server listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The configuration the server was started with.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Completes the server's shutdown future. Idempotent.
    pub fn trigger_shutdown(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
    }

    /// Waits for `ebb::run` to return. `None` if it was already awaited.
    pub async fn join(&mut self) -> Option<io::Result<()>> {
        let handle = self.handle.take()?;
        Some(match handle.await {
            Ok(result) => result,
            Err(e) => Err(io::Error::other(format!("server task failed: {e}"))),
        })
    }

    /// Shuts down and waits for the server to finish, failing after [`IO_TIMEOUT`].
    pub async fn stop(mut self) -> io::Result<()> {
        self.trigger_shutdown();
        within("server shutdown", async {
            self.join().await.unwrap_or(Ok(()))
        })
        .await
    }

    /// A driver client for this server (`directConnection=true`), without compression.
    pub async fn client(&self) -> mongodb::error::Result<Client> {
        self.client_with(None).await
    }

    /// A driver client for this server (`directConnection=true`) offering `compressors`.
    pub async fn client_with(
        &self,
        compressors: Option<Vec<Compressor>>,
    ) -> mongodb::error::Result<Client> {
        let uri = format!(
            "mongodb://{}{}/?directConnection=true&serverSelectionTimeoutMS={}&connectTimeoutMS={}{}",
            self.cosmos_credentials(),
            self.addr,
            IO_TIMEOUT.as_millis(),
            IO_TIMEOUT.as_millis(),
            self.cosmos_options(),
        );
        let mut options = ClientOptions::parse(uri).await?;
        options.compressors = compressors;
        options.app_name = Some("ebb-integration-tests".into());
        Client::with_options(options)
    }

    /// Starts an in-memory server that is the primary of the replica set `name`
    /// (`--replSet name`).
    pub async fn start_replset(name: &str) -> io::Result<TestServer> {
        Self::start_with(|c| c.repl_set = Some(name.to_owned())).await
    }

    /// A driver client that discovers the server through `options` (a URI query string without
    /// `?`, such as `replicaSet=rs0` or `directConnection=false`) rather than connecting to it
    /// directly.
    pub async fn client_discovering(&self, options: &str) -> mongodb::error::Result<Client> {
        let uri = format!(
            "mongodb://{}/?{options}&serverSelectionTimeoutMS={}&connectTimeoutMS={}",
            self.addr,
            IO_TIMEOUT.as_millis(),
            IO_TIMEOUT.as_millis(),
        );
        let mut options = ClientOptions::parse(uri).await?;
        options.app_name = Some("ebb-integration-tests".into());
        Client::with_options(options)
    }

    /// `ACCOUNT:KEY@` for a server with the Cosmos DB profile (TLS and the account user), else
    /// nothing.
    pub fn cosmos_credentials(&self) -> String {
        match (&self.config.profile, &self.config.cosmos_key) {
            (ebb::config::Profile::Cosmos, Some(key)) if !self.config.cosmos_plain => format!(
                "{}:{}@",
                self.config.cosmos_account,
                key.replace('+', "%2B")
                    .replace('/', "%2F")
                    .replace('=', "%3D")
            ),
            _ => String::new(),
        }
    }

    /// The URI options a Cosmos DB profile server needs (TLS, trusting its CA file), else
    /// nothing.
    pub fn cosmos_options(&self) -> String {
        match (&self.config.profile, &self.config.tls_ca_file) {
            (ebb::config::Profile::Cosmos, Some(ca)) if !self.config.cosmos_plain => {
                format!("&tls=true&tlsCAFile={}&retryWrites=false", ca.display())
            }
            _ => String::new(),
        }
    }

    /// A new raw TCP connection.
    pub async fn raw(&self) -> io::Result<RawConn> {
        RawConn::connect(self.addr).await
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.trigger_shutdown();
        if self.owns_data_dir {
            let _ = std::fs::remove_dir_all(&self.data_dir);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Frame builders
// ---------------------------------------------------------------------------------------------

/// The BSON bytes of `doc`.
pub fn bson_bytes(doc: &Document) -> Vec<u8> {
    doc.to_vec().expect("test documents serialize")
}

/// Prepends a standard header (`messageLength` counting the header) to `body`.
pub fn frame(request_id: i32, response_to: i32, op_code: i32, body: &[u8]) -> Vec<u8> {
    let len = i32::try_from(16 + body.len()).expect("test frame fits an i32");
    let mut out = Vec::with_capacity(16 + body.len());
    for field in [len, request_id, response_to, op_code] {
        out.extend_from_slice(&field.to_le_bytes());
    }
    out.extend_from_slice(body);
    out
}

/// A header alone, with any `messageLength` and opcode.
pub fn header(message_length: i32, request_id: i32, op_code: i32) -> Vec<u8> {
    let mut out = Vec::with_capacity(16);
    for field in [message_length, request_id, 0, op_code] {
        out.extend_from_slice(&field.to_le_bytes());
    }
    out
}

/// A kind-0 section holding raw document bytes.
pub fn kind0(doc: &[u8]) -> Vec<u8> {
    let mut out = vec![0];
    out.extend_from_slice(doc);
    out
}

/// A kind-1 section: `size`, identifier, documents.
pub fn kind1(identifier: &str, docs: &[Document]) -> Vec<u8> {
    let docs: Vec<u8> = docs.iter().flat_map(bson_bytes).collect();
    let size = i32::try_from(4 + identifier.len() + 1 + docs.len()).expect("section fits");
    let mut out = vec![1];
    out.extend_from_slice(&size.to_le_bytes());
    out.extend_from_slice(identifier.as_bytes());
    out.push(0);
    out.extend_from_slice(&docs);
    out
}

/// An `OP_MSG` from raw sections. When `flags` has `checksumPresent`, the CRC-32C of the whole
/// message (header included) is appended and counted in `messageLength`.
pub fn op_msg_sections(request_id: i32, flags: u32, sections: &[Vec<u8>]) -> Vec<u8> {
    let mut body = flags.to_le_bytes().to_vec();
    for s in sections {
        body.extend_from_slice(s);
    }
    let msg = frame(request_id, 0, OP_MSG, &body);
    if flags & CHECKSUM_PRESENT == 0 {
        msg
    } else {
        append_checksum(msg)
    }
}

/// An `OP_MSG` with `body` as its kind-0 section and no sequences.
pub fn op_msg(request_id: i32, flags: u32, body: &Document) -> Vec<u8> {
    op_msg_sections(request_id, flags, &[kind0(&bson_bytes(body))])
}

/// Grows `messageLength` by four and appends the CRC-32C of the result.
pub fn append_checksum(mut msg: Vec<u8>) -> Vec<u8> {
    let len = read_i32(&msg, 0) + 4;
    msg[..4].copy_from_slice(&len.to_le_bytes());
    let crc = crc32c(&msg);
    msg.extend_from_slice(&crc.to_le_bytes());
    msg
}

/// A legacy `OP_QUERY`.
pub fn op_query(
    request_id: i32,
    flags: i32,
    full_collection_name: &str,
    number_to_return: i32,
    query: &Document,
) -> Vec<u8> {
    let mut body = flags.to_le_bytes().to_vec();
    body.extend_from_slice(full_collection_name.as_bytes());
    body.push(0);
    body.extend_from_slice(&0_i32.to_le_bytes()); // numberToSkip
    body.extend_from_slice(&number_to_return.to_le_bytes());
    body.extend_from_slice(&bson_bytes(query));
    frame(request_id, 0, OP_QUERY, &body)
}

/// Wraps a complete message in `OP_COMPRESSED` with compressor `id`, keeping its request id.
pub fn op_compressed(message: &[u8], id: u8) -> Vec<u8> {
    let compressor = ebb_wire::Compressor::from_id(id).expect("known compressor id");
    let data = compressor
        .compress(&message[16..])
        .expect("compression succeeds");
    let size = i32::try_from(message.len() - 16).expect("fits");
    op_compressed_raw(read_i32(message, 4), read_i32(message, 12), size, id, &data)
}

/// An `OP_COMPRESSED` with every field given, true or not.
pub fn op_compressed_raw(
    request_id: i32,
    original_op_code: i32,
    uncompressed_size: i32,
    compressor_id: u8,
    data: &[u8],
) -> Vec<u8> {
    let mut body = original_op_code.to_le_bytes().to_vec();
    body.extend_from_slice(&uncompressed_size.to_le_bytes());
    body.push(compressor_id);
    body.extend_from_slice(data);
    frame(request_id, 0, OP_COMPRESSED, &body)
}

/// Reads a little-endian `i32` at `at`.
pub fn read_i32(bytes: &[u8], at: usize) -> i32 {
    i32::from_le_bytes(bytes[at..at + 4].try_into().expect("four bytes"))
}

/// CRC-32C (Castagnoli, reflected polynomial `0x82F63B78`), computed bit by bit: slow, short,
/// and independent of the server's implementation.
pub fn crc32c(bytes: &[u8]) -> u32 {
    let mut crc = !0_u32;
    for &b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ 0x82F6_3B78
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

// ---------------------------------------------------------------------------------------------
// Reply parsing
// ---------------------------------------------------------------------------------------------

/// The standard message header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// `messageLength`.
    pub message_length: i32,
    /// `requestID`.
    pub request_id: i32,
    /// `responseTo`.
    pub response_to: i32,
    /// `opCode` as received (2012 for a compressed reply).
    pub op_code: i32,
}

/// A reply read off the wire.
#[derive(Debug, Clone)]
pub struct Reply {
    /// The header as received.
    pub header: Header,
    /// The compressor id, when the reply came in `OP_COMPRESSED`.
    pub compressor_id: Option<u8>,
    /// The opcode of the (decompressed) message: `OP_MSG` or `OP_REPLY`.
    pub op_code: i32,
    /// `OP_MSG` `flagBits` or `OP_REPLY` `responseFlags`.
    pub flags: u32,
    /// The checksum, when `checksumPresent` was set (already verified).
    pub checksum: Option<u32>,
    /// The `OP_MSG` kind-0 body, or the first `OP_REPLY` document.
    pub body: Document,
    /// `OP_REPLY` only: `cursorID`.
    pub cursor_id: i64,
    /// `OP_REPLY` only: every document returned.
    pub documents: Vec<Document>,
}

fn bad(msg: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg.into())
}

fn read_document(bytes: &[u8]) -> io::Result<(Document, &[u8])> {
    if bytes.len() < 5 {
        return Err(bad("document shorter than 5 bytes"));
    }
    let len = usize::try_from(read_i32(bytes, 0)).map_err(|_| bad("negative document length"))?;
    if len < 5 || len > bytes.len() {
        return Err(bad(format!(
            "document length {len} does not fit {}",
            bytes.len()
        )));
    }
    let doc = Document::from_reader(&bytes[..len]).map_err(|e| bad(e.to_string()))?;
    Ok((doc, &bytes[len..]))
}

/// Parses one whole message (header included).
pub fn parse_message(bytes: &[u8]) -> io::Result<Reply> {
    if bytes.len() < 16 {
        return Err(bad("message shorter than its header"));
    }
    let header = Header {
        message_length: read_i32(bytes, 0),
        request_id: read_i32(bytes, 4),
        response_to: read_i32(bytes, 8),
        op_code: read_i32(bytes, 12),
    };
    if usize::try_from(header.message_length).ok() != Some(bytes.len()) {
        return Err(bad(format!(
            "messageLength {} but {} bytes",
            header.message_length,
            bytes.len()
        )));
    }
    if header.op_code == OP_COMPRESSED {
        if bytes.len() < 25 {
            return Err(bad("OP_COMPRESSED too short"));
        }
        let original = read_i32(bytes, 16);
        let size = usize::try_from(read_i32(bytes, 20)).map_err(|_| bad("negative size"))?;
        let id = bytes[24];
        let compressor = ebb_wire::Compressor::from_id(id).map_err(|e| bad(e.to_string()))?;
        let inner = compressor
            .decompress(&bytes[25..], size)
            .map_err(|e| bad(e.to_string()))?;
        let length = i32::try_from(16 + size).map_err(|_| bad("size"))?;
        let mut whole = Vec::with_capacity(16 + size);
        for field in [length, header.request_id, header.response_to, original] {
            whole.extend_from_slice(&field.to_le_bytes());
        }
        whole.extend_from_slice(&inner);
        let mut reply = parse_message(&whole)?;
        reply.header = header;
        reply.compressor_id = Some(id);
        return Ok(reply);
    }
    match header.op_code {
        OP_MSG => parse_op_msg(header, bytes),
        OP_REPLY => parse_op_reply(header, &bytes[16..]),
        other => Err(bad(format!("reply with opcode {other}"))),
    }
}

/// An `OP_MSG` reply; `bytes` is the whole message, which the checksum covers.
fn parse_op_msg(header: Header, bytes: &[u8]) -> io::Result<Reply> {
    let rest = &bytes[16..];
    if rest.len() < 4 {
        return Err(bad("OP_MSG without flagBits"));
    }
    let flags = u32::from_le_bytes(rest[..4].try_into().expect("four bytes"));
    let mut sections = &rest[4..];
    let mut checksum = None;
    if flags & CHECKSUM_PRESENT != 0 {
        if bytes.len() < 24 {
            return Err(bad("checksum missing"));
        }
        let (covered, tail) = bytes.split_at(bytes.len() - 4);
        let carried = u32::from_le_bytes(tail.try_into().expect("four bytes"));
        let computed = crc32c(covered);
        if carried != computed {
            return Err(bad(format!(
                "reply checksum {carried:#010x}, computed {computed:#010x}"
            )));
        }
        checksum = Some(carried);
        sections = &sections[..sections.len() - 4];
    }
    let mut body = None;
    while let Some((&kind, after)) = sections.split_first() {
        match kind {
            0 => {
                let (doc, after) = read_document(after)?;
                if body.replace(doc).is_some() {
                    return Err(bad("reply with two kind-0 sections"));
                }
                sections = after;
            }
            1 => {
                if after.len() < 4 {
                    return Err(bad("sequence size cut short"));
                }
                let size = usize::try_from(read_i32(after, 0))
                    .map_err(|_| bad("negative section size"))?;
                if size > after.len() {
                    return Err(bad("sequence overruns the reply"));
                }
                sections = &after[size..];
            }
            other => return Err(bad(format!("reply section kind {other}"))),
        }
    }
    Ok(Reply {
        header,
        compressor_id: None,
        op_code: OP_MSG,
        flags,
        checksum,
        body: body.ok_or_else(|| bad("reply without a body"))?,
        cursor_id: 0,
        documents: Vec::new(),
    })
}

/// An `OP_REPLY`; `rest` is what follows the header.
fn parse_op_reply(header: Header, rest: &[u8]) -> io::Result<Reply> {
    if rest.len() < 20 {
        return Err(bad("OP_REPLY too short"));
    }
    let flags = u32::from_le_bytes(rest[..4].try_into().expect("four bytes"));
    let cursor_id = i64::from_le_bytes(rest[4..12].try_into().expect("eight bytes"));
    let number_returned = read_i32(rest, 16);
    let mut docs_bytes = &rest[20..];
    let mut documents = Vec::new();
    while !docs_bytes.is_empty() {
        let (doc, after) = read_document(docs_bytes)?;
        documents.push(doc);
        docs_bytes = after;
    }
    if usize::try_from(number_returned).ok() != Some(documents.len()) {
        return Err(bad(format!(
            "numberReturned {number_returned} but {} documents",
            documents.len()
        )));
    }
    Ok(Reply {
        header,
        compressor_id: None,
        op_code: OP_REPLY,
        flags,
        checksum: None,
        body: documents.first().cloned().unwrap_or_default(),
        cursor_id,
        documents,
    })
}

// ---------------------------------------------------------------------------------------------
// Raw connections
// ---------------------------------------------------------------------------------------------

/// A TCP connection that speaks bytes.
pub struct RawConn {
    stream: TcpStream,
    next_request_id: i32,
}

impl RawConn {
    /// Connects to `addr`.
    pub async fn connect(addr: SocketAddr) -> io::Result<RawConn> {
        let stream = within("connect", TcpStream::connect(addr)).await?;
        stream.set_nodelay(true)?;
        Ok(RawConn {
            stream,
            next_request_id: 100,
        })
    }

    /// This end's address (what `whatsmyuri` should report).
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.stream.local_addr()
    }

    /// A request id not used before on this connection.
    pub fn next_request_id(&mut self) -> i32 {
        self.next_request_id += 1;
        self.next_request_id
    }

    /// Writes `bytes` as they are.
    pub async fn send_raw(&mut self, bytes: &[u8]) -> io::Result<()> {
        within("write", async {
            self.stream.write_all(bytes).await?;
            self.stream.flush().await
        })
        .await
    }

    /// Closes the write side (the server sees end of stream).
    pub async fn shutdown_write(&mut self) -> io::Result<()> {
        self.stream.shutdown().await
    }

    /// Reads exactly one message and parses it. End of stream is `UnexpectedEof`.
    pub async fn read_reply(&mut self) -> io::Result<Reply> {
        within("read reply", async {
            let mut head = [0_u8; 16];
            self.stream.read_exact(&mut head).await?;
            let len = read_i32(&head, 0);
            if !(16..=MAX_MESSAGE_SIZE).contains(&len) {
                return Err(bad(format!("reply messageLength {len}")));
            }
            let len = usize::try_from(len).map_err(|_| bad("length"))?;
            let mut whole = vec![0_u8; len];
            whole[..16].copy_from_slice(&head);
            self.stream.read_exact(&mut whole[16..]).await?;
            parse_message(&whole)
        })
        .await
    }

    /// Expects the server to close the connection: the next read sees end of stream or a
    /// reset. A reply, or silence for [`IO_TIMEOUT`], is an error.
    pub async fn expect_closed(&mut self) -> io::Result<()> {
        let mut buf = [0_u8; 4096];
        match tokio::time::timeout(IO_TIMEOUT, self.stream.read(&mut buf)).await {
            Err(_) => Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("connection still open after {IO_TIMEOUT:?}"),
            )),
            Ok(Ok(0)) => Ok(()),
            Ok(Ok(n)) => Err(bad(format!(
                "expected the connection to be closed, got {n} bytes: {:?}",
                parse_message(&buf[..n]).map(|r| r.body)
            ))),
            Ok(Err(e))
                if matches!(
                    e.kind(),
                    io::ErrorKind::ConnectionReset
                        | io::ErrorKind::ConnectionAborted
                        | io::ErrorKind::BrokenPipe
                ) =>
            {
                Ok(())
            }
            Ok(Err(e)) => Err(e),
        }
    }

    /// Sends `frame` (whose request id is `request_id`) and reads the reply to it, checking
    /// `responseTo`.
    pub async fn round_trip(&mut self, request_id: i32, frame: &[u8]) -> io::Result<Reply> {
        self.send_raw(frame).await?;
        let reply = self.read_reply().await?;
        if reply.header.response_to != request_id {
            return Err(bad(format!(
                "responseTo {} for request {request_id}",
                reply.header.response_to
            )));
        }
        Ok(reply)
    }

    /// Runs `command` against `db` in an `OP_MSG` and returns the reply body, whatever its `ok`.
    pub async fn command(&mut self, db: &str, command: Document) -> io::Result<Document> {
        let mut body = command;
        body.insert("$db", db);
        let id = self.next_request_id();
        let reply = self.round_trip(id, &op_msg(id, 0, &body)).await?;
        if reply.op_code != OP_MSG || reply.compressor_id.is_some() {
            return Err(bad(format!(
                "OP_MSG answered with opcode {} compressor {:?}",
                reply.op_code, reply.compressor_id
            )));
        }
        Ok(reply.body)
    }

    /// `ping` on `admin`, which must answer `ok: 1`.
    pub async fn ping(&mut self) -> io::Result<()> {
        let reply = self.command("admin", doc! { "ping": 1 }).await?;
        if is_ok(&reply) {
            Ok(())
        } else {
            Err(bad(format!("ping answered {reply}")))
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Reply inspection
// ---------------------------------------------------------------------------------------------

/// A number of any BSON numeric type, as `f64`.
#[expect(clippy::cast_precision_loss, reason = "test counters are small")]
pub fn number(value: Option<&Bson>) -> Option<f64> {
    match value? {
        Bson::Int32(i) => Some(f64::from(*i)),
        Bson::Int64(i) => Some(*i as f64),
        Bson::Double(d) => Some(*d),
        _ => None,
    }
}

/// An integer of either BSON integer type.
pub fn integer(value: Option<&Bson>) -> Option<i64> {
    match value? {
        Bson::Int32(i) => Some(i64::from(*i)),
        Bson::Int64(i) => Some(*i),
        _ => None,
    }
}

/// Whether `reply.ok` is a number equal to 1.
pub fn is_ok(reply: &Document) -> bool {
    number(reply.get("ok")) == Some(1.0)
}

/// Checks that `reply` is `{ok: 0, code, codeName, errmsg}` with this `code`.
pub fn assert_error(reply: &Document, code: i32, code_name: &str) {
    assert_eq!(number(reply.get("ok")), Some(0.0), "not an error: {reply}");
    assert_eq!(reply.get_i32("code").ok(), Some(code), "code in {reply}");
    assert_eq!(
        reply.get_str("codeName").ok(),
        Some(code_name),
        "codeName in {reply}"
    );
    assert!(
        reply.get_str("errmsg").is_ok_and(|m| !m.is_empty()),
        "errmsg in {reply}"
    );
}

// ---------------------------------------------------------------------------------------------
// Driver helpers
// ---------------------------------------------------------------------------------------------

/// Runs `command` on `db` through the driver and returns the reply of a command that succeeded
/// (`ok: 1`, which may still carry `writeErrors`).
pub async fn run_command(client: &Client, db: &str, command: Document) -> TestResult<Document> {
    Ok(client.database(db).run_command(command).await?)
}

/// The collection names of `db`.
pub async fn collection_names(
    client: &Client,
    db: &str,
) -> TestResult<std::collections::BTreeSet<String>> {
    Ok(client
        .database(db)
        .list_collection_names()
        .await?
        .into_iter()
        .collect())
}

/// Runs `command` on `db` through the driver; it must fail with a command error (`ok: 0`), which
/// is returned.
pub async fn run_command_err(
    client: &Client,
    db: &str,
    command: Document,
) -> TestResult<mongodb::error::CommandError> {
    match client.database(db).run_command(command.clone()).await {
        Ok(reply) => Err(format!("{command} succeeded: {reply}").into()),
        Err(e) => match command_error(&e) {
            Some(ce) => Ok(ce.clone()),
            None => Err(format!("{command} failed without a command error: {e}").into()),
        },
    }
}

/// The server's command error (`ok: 0`) inside a driver error, if that is what it is.
pub fn command_error(err: &mongodb::error::Error) -> Option<&mongodb::error::CommandError> {
    match &*err.kind {
        mongodb::error::ErrorKind::Command(ce) => Some(ce),
        _ => None,
    }
}

/// The write error (`writeErrors[0]`) inside a driver error from a single-statement write, if
/// that is what it is.
pub fn write_error(err: &mongodb::error::Error) -> Option<&mongodb::error::WriteError> {
    match &*err.kind {
        mongodb::error::ErrorKind::Write(mongodb::error::WriteFailure::WriteError(we)) => Some(we),
        _ => None,
    }
}

/// Checks a command error's `code` and `codeName`, and that it carries a message.
pub fn assert_command_error(err: &mongodb::error::CommandError, code: i32, code_name: &str) {
    assert_eq!(err.code, code, "code of {err:?}");
    assert_eq!(err.code_name, code_name, "codeName of {err:?}");
    assert!(!err.message.is_empty(), "message of {err:?}");
}

/// The `writeErrors` of a write command's reply (empty when there are none).
pub fn write_errors(reply: &Document) -> Vec<Document> {
    reply
        .get_array("writeErrors")
        .map(|errors| {
            errors
                .iter()
                .map(|e| {
                    e.as_document()
                        .cloned()
                        .unwrap_or_else(|| panic!("write error {e} is not a document"))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The keys of `doc`, in order.
pub fn raw_keys(doc: &bson::RawDocument) -> Vec<String> {
    doc.iter_elements()
        .map(|e| {
            e.expect("stored documents are valid BSON")
                .key()
                .as_str()
                .to_owned()
        })
        .collect()
}

/// Every document of a driver cursor, in the order the server returned them.
pub async fn drain(mut cursor: mongodb::Cursor<Document>) -> TestResult<Vec<Document>> {
    let mut out = Vec::new();
    while cursor.advance().await? {
        out.push(cursor.deserialize_current()?);
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// The test clock
// ---------------------------------------------------------------------------------------------

/// Freezes the server's clock (if it runs) and moves it forward by `ms` with the test-only
/// `{ebbAdvanceClock: ms, freeze: true}` on `admin`; returns the server's instant afterwards.
/// The server must run with test commands enabled ([`TestServer::start_with_test_clock`]).
/// Frozen, the clock stands still between calls, so instants are exact to the millisecond.
pub async fn advance_clock(client: &Client, ms: i64) -> TestResult<bson::DateTime> {
    let reply = run_command(
        client,
        "admin",
        doc! { "ebbAdvanceClock": ms, "freeze": true },
    )
    .await?;
    if reply.get_bool("frozen").ok() != Some(true) {
        return Err(format!("ebbAdvanceClock did not freeze the clock: {reply}").into());
    }
    Ok(*reply.get_datetime("now")?)
}
