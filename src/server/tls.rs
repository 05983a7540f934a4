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
    server_config: RwLock<Loaded>,
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
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .config,
        ))
    }

    /// The subject of the server's certificate (rendered as [`subject_name`] renders a
    /// client's), `None` when it cannot be rendered: what tells a cluster member's certificate
    /// (`MONGODB-X509`).
    pub fn server_subject(&self) -> Option<String> {
        self.server_config
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .subject
            .clone()
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

/// What the key, chain and CA files give.
#[derive(Debug)]
struct Loaded {
    /// The rustls configuration.
    config: Arc<ServerConfig>,
    /// The subject of the server's certificate, as [`subject_name`] renders it.
    subject: Option<String>,
}

/// A rustls configuration for TLS 1.2 and 1.3 (ring's cipher suites, which leave out everything
/// older), presenting the chain and key of `certificate_key_file` and asking clients for a
/// certificate that chains to `ca_file` (required unless `allow_without_certificates`).
fn server_config(
    certificate_key_file: &Path,
    ca_file: &Path,
    allow_without_certificates: bool,
) -> Result<Loaded, CommandError> {
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
    let subject = chain.first().and_then(|der| subject_name(der).ok());
    let config = ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .map_err(|e| invalid(e.to_string()))?
        .with_client_cert_verifier(verifier)
        .with_single_cert(chain, key)
        .map_err(|e| invalid(format!("Can not set up PEM key file: {e}")))?;
    Ok(Loaded {
        config: Arc::new(config),
        subject,
    })
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
    let session = stream.get_ref().1;
    match session.protocol_version() {
        Some(rustls::ProtocolVersion::TLSv1_3) => tls.tls13.fetch_add(1, Ordering::Relaxed),
        _ => tls.tls12.fetch_add(1, Ordering::Relaxed),
    };
    // rustls hands over the client's chain only once it verified it against the CA file: the
    // first certificate is the client's own, whose subject `MONGODB-X509` logs in as.
    let subject = session
        .peer_certificates()
        .and_then(<[CertificateDer<'_>]>::first)
        .and_then(|der| match subject_name(der) {
            Ok(subject) => {
                info!(remote = %peer, subject = %subject, "client certificate");
                Some(subject)
            }
            Err(e) => {
                info!(remote = %peer, error = %e, "client certificate subject unusable for MONGODB-X509");
                None
            }
        });
    connection::serve_tls(
        stream,
        BytesMut::with_capacity(16 * 1024),
        peer,
        subject,
        state,
        cancel,
        permit,
    )
    .await;
}

/// The subject of a certificate (DER) as mongod renders it for `MONGODB-X509`
/// (`SSLX509Name::toString` of `ssl_manager.cpp`, from `convertX509ToSSLX509Name`): RFC 2253
/// order, the last relative distinguished name first and, within a multi-valued one, the last
/// attribute first; OpenSSL's short names for the attribute types it knows (`CN`, `OU`, `DC`,
/// `emailAddress`…), the dotted OID otherwise; `,` between names, `+` between attributes.
/// String values are decoded to UTF-8 and prepared as RFC 4518 says (mongod's
/// `normalizeStrings`, with ICU's LDAP profile); then every value is escaped
/// ([`escape_rfc2253`]).
///
/// # Errors
///
/// A certificate that does not parse, or a string value that is not valid in its encoding or
/// that string preparation refuses (mongod fails the same certificate).
pub fn subject_name(der: &[u8]) -> Result<String, String> {
    let (_, cert) = x509_parser::parse_x509_certificate(der).map_err(|e| e.to_string())?;
    render_name(cert.subject())
}

/// [`subject_name`]'s rendering of a parsed name.
fn render_name(name: &x509_parser::x509::X509Name<'_>) -> Result<String, String> {
    let mut out = String::new();
    for (i, rdn) in name
        .iter()
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .enumerate()
    {
        if i > 0 {
            out.push(',');
        }
        for (j, attribute) in rdn.iter().collect::<Vec<_>>().into_iter().rev().enumerate() {
            if j > 0 {
                out.push('+');
            }
            let oid = attribute.attr_type().to_id_string();
            out.push_str(short_name(&oid).unwrap_or(&oid));
            out.push('=');
            let value = attribute_value(attribute.attr_value())?;
            escape_rfc2253(&value, &mut out);
        }
    }
    Ok(out)
}

/// OpenSSL's short name (`OBJ_nid2sn`) of a distinguished name's attribute type.
fn short_name(oid: &str) -> Option<&'static str> {
    Some(match oid {
        "2.5.4.3" => "CN",
        "2.5.4.4" => "SN",
        "2.5.4.5" => "serialNumber",
        "2.5.4.6" => "C",
        "2.5.4.7" => "L",
        "2.5.4.8" => "ST",
        "2.5.4.9" => "street",
        "2.5.4.10" => "O",
        "2.5.4.11" => "OU",
        "2.5.4.12" => "title",
        "2.5.4.13" => "description",
        "2.5.4.15" => "businessCategory",
        "2.5.4.16" => "postalAddress",
        "2.5.4.17" => "postalCode",
        "2.5.4.18" => "postOfficeBox",
        "2.5.4.20" => "telephoneNumber",
        "2.5.4.41" => "name",
        "2.5.4.42" => "GN",
        "2.5.4.43" => "initials",
        "2.5.4.44" => "generationQualifier",
        "2.5.4.45" => "x500UniqueIdentifier",
        "2.5.4.46" => "dnQualifier",
        "2.5.4.65" => "pseudonym",
        "2.5.4.72" => "role",
        "2.5.4.97" => "organizationIdentifier",
        "0.9.2342.19200300.100.1.1" => "UID",
        "0.9.2342.19200300.100.1.25" => "DC",
        "1.2.840.113549.1.9.1" => "emailAddress",
        "1.3.6.1.4.1.311.60.2.1.1" => "jurisdictionL",
        "1.3.6.1.4.1.311.60.2.1.2" => "jurisdictionST",
        "1.3.6.1.4.1.311.60.2.1.3" => "jurisdictionC",
        _ => return None,
    })
}

/// The bytes of an attribute value as mongod keeps them: the string types of a
/// `DirectoryString` (and `IA5String`, `OCTET STRING`) decoded to UTF-8 and prepared (RFC 4518;
/// an empty value stays empty), any other type as its raw contents.
fn attribute_value(value: &x509_parser::asn1_rs::Any<'_>) -> Result<Vec<u8>, String> {
    use x509_parser::asn1_rs::{Class, Tag};
    let data = value.data;
    if value.class() != Class::Universal {
        return Ok(data.to_vec());
    }
    let text = match value.tag() {
        Tag::Utf8String
        | Tag::PrintableString
        | Tag::TeletexString
        | Tag::Ia5String
        | Tag::OctetString => std::str::from_utf8(data)
            .map_err(|_| "a subject value is not valid UTF-8".to_owned())?
            .to_owned(),
        Tag::BmpString => {
            let units: Vec<u16> = data
                .chunks(2)
                .map(|pair| match pair {
                    [hi, lo] => Ok(u16::from_be_bytes([*hi, *lo])),
                    _ => Err("a BMPString subject value has an odd length".to_owned()),
                })
                .collect::<Result<_, _>>()?;
            String::from_utf16(&units)
                .map_err(|_| "a BMPString subject value is not valid UTF-16".to_owned())?
        }
        Tag::UniversalString => data
            .chunks(4)
            .map(|quad| {
                <[u8; 4]>::try_from(quad)
                    .ok()
                    .and_then(|b| char::from_u32(u32::from_be_bytes(b)))
                    .ok_or_else(|| "a UniversalString subject value is not valid".to_owned())
            })
            .collect::<Result<String, _>>()?,
        _ => return Ok(data.to_vec()),
    };
    if text.is_empty() {
        return Ok(Vec::new());
    }
    let prepared = stringprep::x520prep(&text, false)
        .map_err(|e| format!("a subject value fails string preparation: {e}"))?;
    Ok(prepared.as_bytes().to_vec())
}

/// Appends `value` escaped as mongod's `escapeRfc2253` does: a backslash before `,` `+` `"`
/// `\` `<` `>` `;`, before a leading space or `#` and before a trailing space (of a value of
/// more than two characters once escaped), and every byte of 0x80 and above as `\` and two
/// upper-case hex digits.
fn escape_rfc2253(value: &[u8], out: &mut String) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    let start = out.len();
    let rest = match value.split_first() {
        Some((b' ', rest)) => {
            out.push_str("\\ ");
            rest
        }
        Some((b'#', rest)) => {
            out.push_str("\\#");
            rest
        }
        _ => value,
    };
    for &byte in rest {
        if byte >= 0x80 {
            out.push('\\');
            out.push(char::from(HEX[usize::from(byte >> 4)]));
            out.push(char::from(HEX[usize::from(byte & 0x0f)]));
        } else {
            if matches!(byte, b',' | b'+' | b'"' | b'\\' | b'<' | b'>' | b';') {
                out.push('\\');
            }
            out.push(char::from(byte));
        }
    }
    if out.len() - start > 2 && out.ends_with(' ') {
        out.pop();
        out.push_str("\\ ");
    }
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
    use super::{render_name, starts_tls, subject_name};
    use rcgen::{CertificateParams, DistinguishedName, DnType, DnValue, KeyPair};
    use x509_parser::prelude::FromDer;

    /// The DER of a self-signed certificate whose subject has `entries`, in that order.
    fn certificate(entries: Vec<(DnType, DnValue)>) -> Vec<u8> {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        let mut name = DistinguishedName::new();
        for (ty, value) in entries {
            name.push(ty, value);
        }
        params.distinguished_name = name;
        let key = KeyPair::generate().unwrap();
        params.self_signed(&key).unwrap().der().to_vec()
    }

    #[test]
    fn subjects_render_last_name_first() {
        // Written C first, as `openssl req -subj /C=US/.../CN=client` does: mongod's jstests
        // client certificate, whose user is `CN=client,OU=KernelUser,...,C=US`.
        let der = certificate(vec![
            (DnType::CountryName, "US".into()),
            (DnType::StateOrProvinceName, "New York".into()),
            (DnType::LocalityName, "New York City".into()),
            (DnType::OrganizationName, "MongoDB".into()),
            (DnType::OrganizationalUnitName, "KernelUser".into()),
            (DnType::CommonName, "client".into()),
        ]);
        assert_eq!(
            subject_name(&der).unwrap(),
            "CN=client,OU=KernelUser,O=MongoDB,L=New York City,ST=New York,C=US"
        );
        // Written CN first (PyMongo's test certificate): C comes first.
        let der = certificate(vec![
            (DnType::CommonName, "client".into()),
            (DnType::OrganizationalUnitName, "Drivers".into()),
            (DnType::OrganizationName, "MDB".into()),
            (DnType::LocalityName, "New York City".into()),
            (DnType::StateOrProvinceName, "New York".into()),
            (DnType::CountryName, "US".into()),
        ]);
        assert_eq!(
            subject_name(&der).unwrap(),
            "C=US,ST=New York,L=New York City,O=MDB,OU=Drivers,CN=client"
        );
    }

    #[test]
    fn attribute_types_use_openssl_short_names_or_the_oid() {
        let der = certificate(vec![
            (
                DnType::CustomDnType(vec![0, 9, 2342, 19_200_300, 100, 1, 25]),
                "example".into(),
            ),
            (
                DnType::CustomDnType(vec![1, 2, 840, 113_549, 1, 9, 1]),
                DnValue::Ia5String("a@b.c".try_into().unwrap()),
            ),
            (DnType::CustomDnType(vec![1, 2, 3, 4]), "x".into()),
            (DnType::CommonName, "n".into()),
        ]);
        assert_eq!(
            subject_name(&der).unwrap(),
            "CN=n,1.2.3.4=x,emailAddress=a@b.c,DC=example"
        );
    }

    #[test]
    fn values_are_escaped_as_mongod_does() {
        let one = |value: DnValue| {
            let rendered = subject_name(&certificate(vec![(DnType::CommonName, value)])).unwrap();
            rendered.strip_prefix("CN=").unwrap().to_owned()
        };
        assert_eq!(one("Smith, John+Jr".into()), "Smith\\, John\\+Jr");
        assert_eq!(one("a\"b\\c<d>e;f=g".into()), "a\\\"b\\\\c\\<d\\>e\\;f=g");
        assert_eq!(one("#tag #x".into()), "\\#tag #x");
        assert_eq!(one(" lead".into()), "\\ lead");
        assert_eq!(one("trail ".into()), "trail\\ ");
        // The trailing space of a value of two characters or fewer, escaped, stays as it is.
        assert_eq!(one("a ".into()), "a ");
        assert_eq!(one("  ".into()), "\\ \\ ");
        // Bytes of 0x80 and above, as upper-case hex: é is C3 A9 in UTF-8.
        assert_eq!(one("café".into()), "caf\\C3\\A9");
        // Other encodings are read as the characters they hold.
        assert_eq!(
            one(DnValue::BmpString("café".try_into().unwrap())),
            "caf\\C3\\A9"
        );
        assert_eq!(
            one(DnValue::UniversalString("café".try_into().unwrap())),
            "caf\\C3\\A9"
        );
        assert_eq!(
            one(DnValue::PrintableString("Plain".try_into().unwrap())),
            "Plain"
        );
        assert_eq!(
            one(DnValue::TeletexString("tele".try_into().unwrap())),
            "tele"
        );
        // String preparation (RFC 4518): compatibility characters are normalized (NFKC) and
        // soft hyphens mapped to nothing.
        assert_eq!(one("ﬁle\u{ad}x".into()), "filex");
    }

    #[test]
    fn multi_valued_names_render_their_last_attribute_first() {
        // Name ::= SEQUENCE { SET { CN=a, O=b } }, then SET { C=US }.
        let der = [
            0x30, 0x21, // SEQUENCE
            0x31, 0x14, // SET
            0x30, 0x08, 0x06, 0x03, 0x55, 0x04, 0x03, 0x0c, 0x01, b'a', // CN=a
            0x30, 0x08, 0x06, 0x03, 0x55, 0x04, 0x0a, 0x0c, 0x01, b'b', // O=b
            0x31, 0x09, // SET
            0x30, 0x07, 0x06, 0x03, 0x55, 0x04, 0x06, 0x13, 0x00, // C="" (empty)
        ];
        let (_, name) = x509_parser::x509::X509Name::from_der(&der).unwrap();
        assert_eq!(render_name(&name).unwrap(), "C=,O=b+CN=a");
    }

    #[test]
    fn unusable_subjects_are_refused() {
        assert!(subject_name(b"not a certificate").is_err());
        // A UTF8String that is not UTF-8.
        let der = [
            0x30, 0x0b, 0x31, 0x09, 0x30, 0x07, 0x06, 0x03, 0x55, 0x04, 0x03, 0x0c, 0x00,
        ];
        let (_, name) = x509_parser::x509::X509Name::from_der(&der).unwrap();
        assert_eq!(render_name(&name).unwrap(), "CN=");
        let der = [
            0x30, 0x0c, 0x31, 0x0a, 0x30, 0x08, 0x06, 0x03, 0x55, 0x04, 0x03, 0x0c, 0x01, 0xff,
        ];
        let (_, name) = x509_parser::x509::X509Name::from_der(&der).unwrap();
        assert!(render_name(&name).is_err());
    }

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
