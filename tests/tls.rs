//! TLS: `--tlsMode`, `--tlsCertificateKeyFile`, `--tlsCAFile`,
//! `--tlsAllowConnectionsWithoutCertificates` and `rotateCertificates`, through the `mongodb`
//! driver (rustls) and raw sockets. Certificate authorities and certificates are made for each
//! test with `rcgen`, in a directory of their own.

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use bson::{Document, doc};
use common::certs::Ca;
use common::{RawConn, TestResult, TestServer, assert_command_error, command_error, op_msg};
use ebb::config::TlsMode;
use mongodb::Client;
use rcgen::DnType;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// How long a client that must succeed waits for a server (`common::IO_TIMEOUT`).
const WAIT_MS: u64 = 10_000;

/// How long a client that must fail waits for a server before giving up.
const REFUSED_WITHIN_MS: u64 = 1500;

/// The files of a test: `ca.pem`, `server.pem` (signed by the CA), `client.pem` (signed by the
/// CA) and `stranger.pem` (a client certificate from another CA).
struct Pki {
    dir: tempfile::TempDir,
}

impl Pki {
    fn new() -> TestResult<Pki> {
        let pki = Pki {
            dir: tempfile::tempdir()?,
        };
        pki.write_set("ca.pem", "server.pem", "client.pem", "Ebb test CA")?;
        let stranger = Ca::new("Some other CA")?;
        std::fs::write(
            pki.path("stranger.pem"),
            stranger.issue(&[(DnType::CommonName, "stranger")], false)?,
        )?;
        Ok(pki)
    }

    /// Writes a fresh CA and the server and client certificates it signs.
    fn write_set(&self, ca: &str, server: &str, client: &str, name: &str) -> TestResult {
        let authority = Ca::new(name)?;
        std::fs::write(self.path(ca), &authority.pem)?;
        std::fs::write(
            self.path(server),
            authority.issue(&[(DnType::CommonName, "localhost")], true)?,
        )?;
        std::fs::write(
            self.path(client),
            authority.issue(&[(DnType::CommonName, "client")], false)?,
        )?;
        Ok(())
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Sets `mode` with this directory's server key file and CA.
    fn configure(&self, config: &mut ebb::Config, mode: TlsMode) {
        config.tls_mode = mode;
        config.tls_certificate_key_file = Some(self.path("server.pem"));
        config.tls_ca_file = Some(self.path("ca.pem"));
    }
}

/// A client of `server` with the URI options `options` (`tls=true&…`, or none), that waits
/// `wait_ms` for the server.
async fn client(server: &TestServer, options: &str, wait_ms: u64) -> TestResult<Client> {
    let uri = format!(
        "mongodb://{}/?directConnection=true&serverSelectionTimeoutMS={wait_ms}\
         &connectTimeoutMS={wait_ms}{}{options}",
        server.addr(),
        if options.is_empty() { "" } else { "&" },
    );
    Ok(Client::with_uri_str(uri).await?)
}

/// The URI options of a TLS client that trusts `ca` and presents `certificate` (if any).
fn tls_options(ca: &Path, certificate: Option<&Path>) -> String {
    let mut options = format!("tls=true&tlsCAFile={}", ca.display());
    if let Some(cert) = certificate {
        options = format!("{options}&tlsCertificateKeyFile={}", cert.display());
    }
    options
}

/// `ping` through a new client with `options`.
async fn ping(server: &TestServer, options: &str) -> TestResult<Document> {
    let client = client(server, options, WAIT_MS).await?;
    Ok(client
        .database("admin")
        .run_command(doc! { "ping": 1 })
        .await?)
}

/// Asserts that a new client with `options` cannot run `ping` (the server refuses it).
async fn refused(server: &TestServer, options: &str) -> TestResult {
    let client = client(server, options, REFUSED_WITHIN_MS).await?;
    let outcome = client
        .database("admin")
        .run_command(doc! { "ping": 1 })
        .await;
    assert!(outcome.is_err(), "{options}: ping answered {outcome:?}");
    Ok(())
}

/// A plain-text `hello`, as a driver's first message.
fn plain_hello() -> Vec<u8> {
    op_msg(1, 0, &doc! { "hello": 1, "$db": "admin" })
}

/// Asserts that the server closes a raw connection that sends `bytes`, within a second (not at
/// a client's timeout).
async fn closed_at_once(server: &TestServer, bytes: &[u8]) -> TestResult {
    let mut raw = RawConn::connect(server.addr()).await?;
    let start = Instant::now();
    raw.send_raw(bytes).await?;
    raw.expect_closed().await?;
    assert!(
        start.elapsed() < Duration::from_secs(1),
        "closed after {:?}",
        start.elapsed()
    );
    Ok(())
}

/// A rustls client configuration trusting the CA in `ca` (no client certificate), for
/// `versions`.
fn rustls_client(
    ca: &Path,
    versions: &[&'static rustls::SupportedProtocolVersion],
) -> TestResult<tokio_rustls::TlsConnector> {
    use rustls_pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls_pki_types::CertificateDer::pem_file_iter(ca)? {
        roots.add(cert?)?;
    }
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(versions)?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(tokio_rustls::TlsConnector::from(std::sync::Arc::new(
        config,
    )))
}

/// A first plain-text message whose first byte is 0x16, as a TLS record's: a `ping` padded
/// (in `comment`) to a length whose low byte is 0x16.
fn plain_ping_starting_like_tls() -> Vec<u8> {
    let mut pad = String::new();
    loop {
        let message = op_msg(1, 0, &doc! { "ping": 1, "comment": &pad, "$db": "admin" });
        if message.first() == Some(&0x16) {
            return message;
        }
        pad.push('x');
    }
}

#[tokio::test]
async fn require_tls_serves_tls_clients_and_closes_plain_ones() -> TestResult {
    let pki = Pki::new()?;
    let server = TestServer::start_with(|c| pki.configure(c, TlsMode::RequireTls)).await?;
    let tls = tls_options(&pki.path("ca.pem"), Some(&pki.path("client.pem")));
    let client = client(&server, &tls, WAIT_MS).await?;
    let coll = client.database("db").collection::<Document>("c");
    coll.insert_one(doc! { "_id": 1, "x": "over TLS" }).await?;
    let found = coll.find_one(doc! { "_id": 1 }).await?;
    assert_eq!(found, Some(doc! { "_id": 1, "x": "over TLS" }));
    // A message larger than a TLS record (16 KiB) goes through whole.
    let big = "x".repeat(200_000);
    coll.insert_one(doc! { "_id": 2, "big": &big }).await?;
    let found = coll.find_one(doc! { "_id": 2 }).await?.unwrap_or_default();
    assert_eq!(found.get_str("big")?.len(), big.len());

    // A plain-text client is closed at its first message, and a driver gives up.
    closed_at_once(&server, &plain_hello()).await?;
    refused(&server, "").await?;
    // A TLS client without a certificate is refused: the CA file asks for one.
    refused(&server, &tls_options(&pki.path("ca.pem"), None)).await?;
    // The TLS connection is still fine.
    assert_eq!(coll.count_documents(doc! {}).await?, 2);
    // serverStatus counts TLS connections by version (the driver's are TLS 1.3; the refused
    // one, whose handshake failed, is not counted).
    let status = client
        .database("admin")
        .run_command(doc! { "serverStatus": 1 })
        .await?;
    let by_version = status.get_document("transportSecurity")?;
    assert_eq!(by_version.get_i64("1.0")?, 0);
    assert_eq!(by_version.get_i64("1.2")?, 0);
    assert!(by_version.get_i64("1.3")? >= 2, "{by_version}");
    Ok(())
}

#[tokio::test]
async fn disabled_closes_tls_clients_at_once() -> TestResult {
    let pki = Pki::new()?;
    let server = TestServer::start().await?;
    // A real handshake fails at once: its `ClientHello` is not taken for a message header
    // announcing ~33 MB to wait for.
    let connector = rustls_client(&pki.path("ca.pem"), rustls::ALL_VERSIONS)?;
    let started = Instant::now();
    let tcp = tokio::net::TcpStream::connect(server.addr()).await?;
    let name = rustls_pki_types::ServerName::try_from("localhost")?;
    let handshake = tokio::time::timeout(common::IO_TIMEOUT, connector.connect(name, tcp)).await?;
    assert!(
        handshake.is_err(),
        "a TLS handshake with a server without TLS"
    );
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "{:?}",
        started.elapsed()
    );
    let started = Instant::now();
    refused(
        &server,
        &tls_options(&pki.path("ca.pem"), Some(&pki.path("client.pem"))),
    )
    .await?;
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(common::is_ok(&ping(&server, "").await?));
    Ok(())
}

#[tokio::test]
async fn allow_and_prefer_serve_tls_and_plain_on_one_port() -> TestResult {
    let pki = Pki::new()?;
    for mode in [TlsMode::AllowTls, TlsMode::PreferTls] {
        let server = TestServer::start_with(|c| pki.configure(c, mode)).await?;
        let tls = tls_options(&pki.path("ca.pem"), Some(&pki.path("client.pem")));
        let over_tls = client(&server, &tls, WAIT_MS).await?;
        let plain = client(&server, "", WAIT_MS).await?;
        over_tls
            .database("db")
            .collection::<Document>("c")
            .insert_one(doc! { "_id": "tls" })
            .await?;
        plain
            .database("db")
            .collection::<Document>("c")
            .insert_one(doc! { "_id": "plain" })
            .await?;
        for client in [&over_tls, &plain] {
            let n = client
                .database("db")
                .collection::<Document>("c")
                .count_documents(doc! {})
                .await?;
            assert_eq!(n, 2, "{mode:?}");
        }
        // A raw plain-text client too (its bytes read to decide are replayed to it), including
        // one whose first byte is a TLS record's: only the header's responseTo tells them apart.
        let mut raw = RawConn::connect(server.addr()).await?;
        raw.ping().await?;
        let mut raw = RawConn::connect(server.addr()).await?;
        raw.send_raw(&plain_ping_starting_like_tls()).await?;
        let reply = raw.read_reply().await?;
        assert!(common::is_ok(&reply.body), "{}", reply.body);
        // Certificates are still checked on TLS connections.
        refused(
            &server,
            &tls_options(&pki.path("ca.pem"), Some(&pki.path("stranger.pem"))),
        )
        .await?;
    }
    Ok(())
}

#[tokio::test]
async fn client_certificates_are_checked_against_the_ca_file() -> TestResult {
    let pki = Pki::new()?;
    let ca = pki.path("ca.pem");
    let server = TestServer::start_with(|c| pki.configure(c, TlsMode::RequireTls)).await?;
    assert!(common::is_ok(
        &ping(&server, &tls_options(&ca, Some(&pki.path("client.pem")))).await?
    ));
    refused(&server, &tls_options(&ca, None)).await?;
    refused(&server, &tls_options(&ca, Some(&pki.path("stranger.pem")))).await?;
    // A client that does not trust the server's CA gives up too.
    refused(
        &server,
        &tls_options(&pki.path("stranger.pem"), Some(&pki.path("client.pem"))),
    )
    .await?;
    server.stop().await?;

    // --tlsAllowConnectionsWithoutCertificates: no certificate is fine, a bad one is not.
    let server = TestServer::start_with(|c| {
        pki.configure(c, TlsMode::RequireTls);
        c.tls_allow_connections_without_certificates = true;
    })
    .await?;
    assert!(common::is_ok(
        &ping(&server, &tls_options(&ca, None)).await?
    ));
    assert!(common::is_ok(
        &ping(&server, &tls_options(&ca, Some(&pki.path("client.pem")))).await?
    ));
    refused(&server, &tls_options(&ca, Some(&pki.path("stranger.pem")))).await?;
    Ok(())
}

#[tokio::test]
async fn rotate_certificates_serves_new_files_to_new_connections() -> TestResult {
    let pki = Pki::new()?;
    let server = TestServer::start_with(|c| pki.configure(c, TlsMode::RequireTls)).await?;
    // The first CA, kept for the clients that trust it.
    std::fs::copy(pki.path("ca.pem"), pki.path("old-ca.pem"))?;
    std::fs::copy(pki.path("client.pem"), pki.path("old-client.pem"))?;
    let old = tls_options(&pki.path("old-ca.pem"), Some(&pki.path("old-client.pem")));
    let open = client(&server, &old, WAIT_MS).await?;
    let admin = open.database("admin");
    admin.run_command(doc! { "ping": 1 }).await?;

    // A file that cannot be used: the rotation fails and nothing changes.
    std::fs::write(pki.path("server.pem"), "not a PEM file")?;
    let err = admin
        .run_command(doc! { "rotateCertificates": 1 })
        .await
        .expect_err("rotation with a broken key file");
    let err = command_error(&err).expect("a command error");
    assert_command_error(err, 140, "InvalidSSLConfiguration");
    assert!(common::is_ok(&ping(&server, &old).await?));

    // A new CA, server and client certificate in the same files.
    pki.write_set("ca.pem", "server.pem", "client.pem", "Ebb rotated CA")?;
    // Until the rotation, the server still presents the old chain.
    assert!(common::is_ok(&ping(&server, &old).await?));
    let reply = admin
        .run_command(doc! { "rotateCertificates": 1, "message": "new CA" })
        .await?;
    assert_eq!(reply, doc! { "ok": 1.0 });
    // New connections get the new chain and need the new CA's client certificates.
    let new = tls_options(&pki.path("ca.pem"), Some(&pki.path("client.pem")));
    assert!(common::is_ok(&ping(&server, &new).await?));
    refused(&server, &old).await?;
    refused(
        &server,
        &tls_options(&pki.path("ca.pem"), Some(&pki.path("old-client.pem"))),
    )
    .await?;
    // The connection opened before keeps working.
    admin.run_command(doc! { "ping": 1 }).await?;

    // Its arguments are checked, and it runs on admin only.
    let err = admin
        .run_command(doc! { "rotateCertificates": 1, "message": 1 })
        .await
        .expect_err("a message that is not a string");
    assert_eq!(command_error(&err).map(|e| e.code), Some(14));
    let err = open
        .database("db")
        .run_command(doc! { "rotateCertificates": 1 })
        .await
        .expect_err("rotateCertificates on another database");
    assert_eq!(command_error(&err).map(|e| e.code), Some(13));
    Ok(())
}

#[tokio::test]
async fn rotate_certificates_without_tls_does_nothing() -> TestResult {
    let server = TestServer::start().await?;
    let client = server.client().await?;
    let reply = client
        .database("admin")
        .run_command(doc! { "rotateCertificates": 1 })
        .await?;
    assert_eq!(reply, doc! { "ok": 1.0 });
    Ok(())
}

#[tokio::test]
async fn get_cmd_line_opts_shows_the_tls_options() -> TestResult {
    let pki = Pki::new()?;
    let server = TestServer::start_with(|c| {
        pki.configure(c, TlsMode::PreferTls);
        c.tls_allow_connections_without_certificates = true;
    })
    .await?;
    let client = client(&server, "", WAIT_MS).await?;
    let reply = client
        .database("admin")
        .run_command(doc! { "getCmdLineOpts": 1 })
        .await?;
    let tls = reply
        .get_document("parsed")?
        .get_document("net")?
        .get_document("tls")?;
    let ca = pki.path("ca.pem").display().to_string();
    let key = pki.path("server.pem").display().to_string();
    assert_eq!(
        tls,
        &doc! {
            "CAFile": ca,
            "allowConnectionsWithoutCertificates": true,
            "certificateKeyFile": key,
            "mode": "preferTLS",
        }
    );
    // Without TLS, no `net.tls`.
    let plain = TestServer::start().await?;
    let reply = plain
        .client()
        .await?
        .database("admin")
        .run_command(doc! { "getCmdLineOpts": 1 })
        .await?;
    assert!(
        !reply
            .get_document("parsed")?
            .get_document("net")?
            .contains_key("tls")
    );
    Ok(())
}

/// Starts a server with `configure` and returns the error `ebb::run` stops with.
async fn startup_error(configure: impl FnOnce(&mut ebb::Config)) -> TestResult<String> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let mut config = ebb::Config {
        port: listener.local_addr()?.port(),
        ..ebb::Config::default()
    };
    configure(&mut config);
    let outcome = tokio::time::timeout(
        common::IO_TIMEOUT,
        ebb::run(listener, config, std::future::pending()),
    )
    .await?;
    match outcome {
        Ok(()) => Err("the server started".into()),
        Err(e) => Ok(e.to_string()),
    }
}

#[tokio::test]
async fn bad_tls_options_stop_the_server_at_startup() -> TestResult {
    let pki = Pki::new()?;
    let msg = startup_error(|c| c.tls_mode = TlsMode::RequireTls).await?;
    assert_eq!(
        msg,
        "need tlsCertificateKeyFile or certificateSelector when TLS is enabled"
    );
    let msg = startup_error(|c| {
        pki.configure(c, TlsMode::RequireTls);
        c.tls_ca_file = None;
    })
    .await?;
    assert!(
        msg.starts_with(
            "The use of TLS without specifying a chain of trust is no longer supported"
        ),
        "{msg}"
    );
    let msg = startup_error(|c| {
        pki.configure(c, TlsMode::Disabled);
    })
    .await?;
    assert_eq!(
        msg,
        "need to enable TLS via the sslMode/tlsMode flag when using TLS configuration parameters"
    );
    // A key file without a key, a CA file without certificates, a missing file.
    std::fs::write(pki.path("cert-only.pem"), {
        let text = std::fs::read_to_string(pki.path("server.pem"))?;
        let end = text.find("-----BEGIN PRIVATE KEY").unwrap_or(text.len());
        text[..end].to_owned()
    })?;
    let msg = startup_error(|c| {
        pki.configure(c, TlsMode::RequireTls);
        c.tls_certificate_key_file = Some(pki.path("cert-only.pem"));
    })
    .await?;
    assert!(msg.starts_with("Can not set up PEM key file"), "{msg}");
    std::fs::write(pki.path("empty.pem"), "")?;
    let msg = startup_error(|c| {
        pki.configure(c, TlsMode::RequireTls);
        c.tls_ca_file = Some(pki.path("empty.pem"));
    })
    .await?;
    assert!(msg.starts_with("Can not set up CA file"), "{msg}");
    let msg = startup_error(|c| {
        pki.configure(c, TlsMode::RequireTls);
        c.tls_certificate_key_file = Some(pki.path("missing.pem"));
    })
    .await?;
    assert!(msg.starts_with("cannot read"), "{msg}");
    Ok(())
}

#[test]
fn tls_flags_parse_as_mongod_spells_them() -> TestResult {
    use clap::Parser;
    let config = ebb::Config::try_parse_from([
        "ebb",
        "--tlsMode",
        "requireTLS",
        "--tlsCertificateKeyFile",
        "/k.pem",
        "--tlsCAFile=/ca.pem",
        "--tlsAllowConnectionsWithoutCertificates",
    ])?;
    assert_eq!(config.tls_mode, TlsMode::RequireTls);
    assert_eq!(
        config.tls_certificate_key_file,
        Some(PathBuf::from("/k.pem"))
    );
    assert_eq!(config.tls_ca_file, Some(PathBuf::from("/ca.pem")));
    assert!(config.tls_allow_connections_without_certificates);
    for (arg, mode) in [
        ("disabled", TlsMode::Disabled),
        ("allowTLS", TlsMode::AllowTls),
        ("preferTLS", TlsMode::PreferTls),
    ] {
        let config = ebb::Config::try_parse_from(["ebb", "--tlsMode", arg])?;
        assert_eq!(config.tls_mode, mode);
    }
    assert!(ebb::Config::try_parse_from(["ebb", "--tlsMode", "requireSSL"]).is_err());
    assert_eq!(
        ebb::Config::try_parse_from(["ebb"])?.tls_mode,
        TlsMode::Disabled
    );
    Ok(())
}

/// A TLS handshake by hand, to see the protocol the server agrees to.
#[tokio::test]
async fn tls_1_2_and_1_3_are_served() -> TestResult {
    use rustls_pki_types::ServerName;
    let pki = Pki::new()?;
    let server = TestServer::start_with(|c| {
        pki.configure(c, TlsMode::RequireTls);
        c.tls_allow_connections_without_certificates = true;
    })
    .await?;
    for version in [&rustls::version::TLS12, &rustls::version::TLS13] {
        let connector = rustls_client(&pki.path("ca.pem"), &[version])?;
        let tcp = tokio::net::TcpStream::connect(server.addr()).await?;
        let mut tls = connector
            .connect(ServerName::try_from("localhost")?, tcp)
            .await?;
        assert_eq!(tls.get_ref().1.protocol_version(), Some(version.version));
        tls.write_all(&plain_hello()).await?;
        tls.flush().await?;
        let mut len = [0u8; 4];
        tls.read_exact(&mut len).await?;
        let len = usize::try_from(i32::from_le_bytes(len))?;
        let mut rest = vec![0u8; len - 4];
        tls.read_exact(&mut rest).await?;
        let mut reply = len.to_le_bytes()[..4].to_vec();
        reply.extend_from_slice(&rest);
        let reply = common::parse_message(&reply)?;
        assert!(common::is_ok(&reply.body), "{}", reply.body);
        assert!(reply.body.get_bool("isWritablePrimary")?);
    }
    Ok(())
}
