//! TLS as mongod does it: `--tlsMode`, the server's key and chain from one PEM file, client
//! certificates checked against `--tlsCAFile`, TLS 1.2 and 1.3 only, and `rotateCertificates`.
//!
//! TLS and plain-text clients share one port. As mongod does, the first 16 bytes a client sends
//! decide: a MongoDB message header has `responseTo` 0 or -1 in a client's first message,
//! while a TLS `ClientHello` has the protocol version (`03 03`) there. The bytes read to decide
//! are replayed to whichever side serves the connection. With TLS disabled nothing is checked:
//! a `ClientHello` read as a message header has an unknown opcode (the bytes of its random), and
//! the connection is closed at once as for any bad header.

use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::task::{Context, Poll};

use bytes::BytesMut;
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::OwnedSemaphorePermit;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;
use tracing::info;

use super::connection;
use crate::config::TlsMode;
use crate::error::{CommandError, ErrorCode};
use crate::{Config, ServerState};

/// Bytes of a MongoDB message header: what is read before deciding TLS or plain text.
const HEADER_LEN: usize = 16;

/// Whether the first bytes of a connection (at least [`HEADER_LEN`]) are not a MongoDB
/// message header: mongod's test, a `responseTo` other than 0 and -1 in the client's first
/// message, which is where a TLS `ClientHello` carries its version.
pub(super) fn starts_tls(header: &[u8]) -> bool {
    match header.get(8..12).and_then(|b| <[u8; 4]>::try_from(b).ok()) {
        Some(bytes) => !matches!(i32::from_le_bytes(bytes), 0 | -1),
        None => false,
    }
}

/// The TLS side of a server: its mode, the files it was started with, and the acceptor built
/// from them (replaced by `rotateCertificates`).
#[derive(Debug)]
pub struct Tls {
    mode: TlsMode,
    certificate_key_file: PathBuf,
    ca_file: PathBuf,
    allow_without_certificates: bool,
    server_config: RwLock<Arc<ServerConfig>>,
    /// TLS 1.2 connections accepted (`serverStatus.transportSecurity."1.2"`).
    pub tls12: AtomicU64,
    /// TLS 1.3 connections accepted (`serverStatus.transportSecurity."1.3"`).
    pub tls13: AtomicU64,
}

impl Tls {
    /// The TLS side `config` asks for: `None` when `--tlsMode` is `disabled` (the default).
    /// Refuses, with mongod's messages, TLS files without a mode, a mode without the server's
    /// key file or a CA file, and files that cannot be read or used.
    pub fn from_config(config: &Config) -> Result<Option<Arc<Tls>>, CommandError> {
        if config.tls_mode == TlsMode::Disabled {
            if config.tls_certificate_key_file.is_some()
                || config.tls_ca_file.is_some()
                || config.tls_allow_connections_without_certificates
            {
                return Err(CommandError::bad_value(
                    "need to enable TLS via the sslMode/tlsMode flag when using TLS \
                     configuration parameters",
                ));
            }
            return Ok(None);
        }
        let Some(certificate_key_file) = config.tls_certificate_key_file.clone() else {
            return Err(CommandError::bad_value(
                "need tlsCertificateKeyFile or certificateSelector when TLS is enabled",
            ));
        };
        // mongod 7.0 (since 7.0.6) needs a chain of trust: a CA file, or the system's store
        // (`tlsUseSystemCA`, which Ebb does not have).
        let Some(ca_file) = config.tls_ca_file.clone() else {
            return Err(CommandError::bad_value(
                "The use of TLS without specifying a chain of trust is no longer supported. \
                 See https://www.mongodb.com/docs/manual/core/security-transport-encryption/ \
                 for more information",
            ));
        };
        let allow_without_certificates = config.tls_allow_connections_without_certificates;
        let server_config =
            server_config(&certificate_key_file, &ca_file, allow_without_certificates)?;
        Ok(Some(Arc::new(Tls {
            mode: config.tls_mode,
            certificate_key_file,
            ca_file,
            allow_without_certificates,
            server_config: RwLock::new(server_config),
            tls12: AtomicU64::new(0),
            tls13: AtomicU64::new(0),
        })))
    }

    /// Reads the key, chain and CA files again: new connections use what they hold, open ones
    /// keep theirs. On failure nothing changes.
    pub fn rotate(&self) -> Result<(), CommandError> {
        let fresh = server_config(
            &self.certificate_key_file,
            &self.ca_file,
            self.allow_without_certificates,
        )?;
        *self
            .server_config
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = fresh;
        Ok(())
    }

    /// The acceptor for a new connection.
    fn acceptor(&self) -> TlsAcceptor {
        TlsAcceptor::from(Arc::clone(
            &self
                .server_config
                .read()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        ))
    }

    /// The mode the server runs in.
    pub fn mode(&self) -> TlsMode {
        self.mode
    }
}

/// `InvalidSSLConfiguration` with `what` went wrong.
fn invalid(what: String) -> CommandError {
    CommandError::new(ErrorCode::InvalidSSLConfiguration, what)
}

/// A rustls configuration for TLS 1.2 and 1.3 (ring's cipher suites, which leave out everything
/// older), presenting the chain and key of `certificate_key_file` and asking clients for a
/// certificate that chains to `ca_file` (required unless `allow_without_certificates`).
fn server_config(
    certificate_key_file: &Path,
    ca_file: &Path,
    allow_without_certificates: bool,
) -> Result<Arc<ServerConfig>, CommandError> {
    let read = |path: &Path| {
        std::fs::read(path).map_err(|e| invalid(format!("cannot read {}: {e}", path.display())))
    };
    let pem = read(certificate_key_file)?;
    let chain = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| invalid(format!("Can not set up PEM key file: {e}")))?;
    if chain.is_empty() {
        return Err(invalid(
            "Can not set up PEM key file: it holds no certificate".to_owned(),
        ));
    }
    let key = PrivateKeyDer::from_pem_slice(&pem).map_err(|e| {
        invalid(format!(
            "Can not set up PEM key file: no usable private key ({e}); encrypted keys are not \
             supported"
        ))
    })?;
    let mut roots = RootCertStore::empty();
    let ca = read(ca_file)?;
    for cert in CertificateDer::pem_slice_iter(&ca) {
        let cert = cert.map_err(|e| invalid(format!("Can not set up CA file: {e}")))?;
        roots
            .add(cert)
            .map_err(|e| invalid(format!("Can not set up CA file: {e}")))?;
    }
    if roots.is_empty() {
        return Err(invalid(
            "Can not set up CA file: it holds no certificate".to_owned(),
        ));
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone());
    let verifier = if allow_without_certificates {
        verifier.allow_unauthenticated()
    } else {
        verifier
    }
    .build()
    .map_err(|e| invalid(format!("Can not set up CA file: {e}")))?;
    let config = ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .map_err(|e| invalid(e.to_string()))?
        .with_client_cert_verifier(verifier)
        .with_single_cert(chain, key)
        .map_err(|e| invalid(format!("Can not set up PEM key file: {e}")))?;
    Ok(Arc::new(config))
}

/// Serves a connection on a server with TLS on: reads the first bytes, then runs the TLS
/// handshake, or serves plain text (closing the connection instead in `requireTLS` mode).
pub(super) async fn serve(
    mut stream: TcpStream,
    peer: SocketAddr,
    state: ServerState,
    tls: Arc<Tls>,
    cancel: CancellationToken,
    permit: OwnedSemaphorePermit,
) {
    let mut head = BytesMut::with_capacity(16 * 1024);
    let read = async {
        while head.len() < HEADER_LEN {
            if stream.read_buf(&mut head).await? == 0 {
                return Ok::<bool, io::Error>(false);
            }
        }
        Ok(true)
    };
    let complete = tokio::select! {
        biased;
        () = cancel.cancelled() => return,
        read = read => read,
    };
    match complete {
        Ok(true) => {}
        Ok(false) => {
            info!(remote = %peer, "connection ended before its first message");
            return;
        }
        Err(e) => {
            info!(remote = %peer, error = %e, "connection ended before its first message");
            return;
        }
    }
    if !starts_tls(&head) {
        if tls.mode == TlsMode::RequireTls {
            info!(
                remote = %peer,
                "closing connection: The server is configured to only allow SSL connections"
            );
            return;
        }
        connection::serve(stream, head, peer, state, cancel, permit).await;
        return;
    }
    let replayed = Rewind {
        prefix: head,
        inner: stream,
    };
    let handshake = tls.acceptor().accept(replayed);
    let accepted = tokio::select! {
        biased;
        () = cancel.cancelled() => return,
        accepted = handshake => accepted,
    };
    let stream = match accepted {
        Ok(stream) => stream,
        Err(e) => {
            info!(remote = %peer, error = %e, "Error receiving request from client: SSLHandshakeFailed");
            return;
        }
    };
    match stream.get_ref().1.protocol_version() {
        Some(rustls::ProtocolVersion::TLSv1_3) => tls.tls13.fetch_add(1, Ordering::Relaxed),
        _ => tls.tls12.fetch_add(1, Ordering::Relaxed),
    };
    connection::serve(
        stream,
        BytesMut::with_capacity(16 * 1024),
        peer,
        state,
        cancel,
        permit,
    )
    .await;
}

/// A stream whose first bytes, already read, are read again before the rest.
#[derive(Debug)]
struct Rewind<S> {
    prefix: BytesMut,
    inner: S,
}

impl<S: AsyncRead + Unpin> AsyncRead for Rewind<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if !self.prefix.is_empty() {
            let n = self.prefix.len().min(buf.remaining());
            let bytes = self.prefix.split_to(n);
            buf.put_slice(&bytes);
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Rewind<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::starts_tls;

    #[test]
    fn tells_a_client_hello_from_a_message_header() {
        // A TLS 1.2/1.3 `ClientHello`: record header, handshake type and length, then 03 03.
        let hello = [
            0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc, 0x03, 0x03, 0x5a, 0x11, 0x22,
            0x33, 0x44,
        ];
        assert!(starts_tls(&hello));
        // An OP_MSG header of 278 bytes (its first byte is 0x16 too), responseTo 0.
        let mut msg = [0u8; 16];
        msg[0] = 0x16;
        msg[1] = 0x01;
        msg[4] = 7;
        msg[12..].copy_from_slice(&2013i32.to_le_bytes());
        assert!(!starts_tls(&msg));
        // responseTo -1 (some drivers' OP_QUERY), and too few bytes to tell.
        msg[8..12].copy_from_slice(&(-1i32).to_le_bytes());
        assert!(!starts_tls(&msg));
        assert!(!starts_tls(&hello[..10]));
    }
}
