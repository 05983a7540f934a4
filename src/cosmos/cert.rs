//! The Cosmos DB profile's TLS certificate: a self-signed certificate authority and a server
//! certificate it signs, made on first start and reused afterwards.
//!
//! Cosmos DB accounts are reached over TLS only; a local account needs a certificate that
//! clients can be told to trust (`tlsCAFile=<dir>/ca.pem`) or told to ignore
//! (`tlsAllowInvalidCertificates=true`). Two files are written:
//!
//! - `ca.pem`: the authority's certificate, what clients pass as their CA file;
//! - `server.pem`: the server's certificate (for `localhost`, the loopback addresses and the
//!   address the server listens on) followed by its private key, what the server presents.
//!
//! Keys are ECDSA P-256: making one takes well under a millisecond, where an RSA key takes
//! tens (start-up of a fresh server must stay under 200 ms). A server certificate separate
//! from the authority is needed because TLS clients refuse a CA certificate presented as a
//! server's (webpki's `CaUsedAsEndEntity`).

use std::io;
use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SanType,
};
use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject;

/// The authority's certificate file, in the certificate directory.
pub const CA_FILE: &str = "ca.pem";
/// The server's certificate and key file, in the certificate directory.
pub const SERVER_FILE: &str = "server.pem";

/// The certificate files of a directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertFiles {
    /// The authority's certificate (clients' `tlsCAFile`).
    pub ca: PathBuf,
    /// The server's certificate and private key (`tlsCertificateKeyFile`).
    pub server: PathBuf,
    /// Whether they were made now (`false`: found and reused).
    pub created: bool,
}

/// The certificate files in `dir`: those already there when both can be read as PEM
/// certificates, else new ones for `hosts` (DNS names or IP addresses). Servers starting
/// together on one directory (in-memory servers share one) take turns on a lock file, so that
/// the two files always come from the same run; each is written to a temporary file renamed
/// into place, so that no reader sees half a file.
pub fn ensure(dir: &Path, hosts: &[String]) -> io::Result<CertFiles> {
    let ca = dir.join(CA_FILE);
    let server = dir.join(SERVER_FILE);
    let found = |ca: PathBuf, server: PathBuf| CertFiles {
        ca,
        server,
        created: false,
    };
    if usable(&ca) && usable(&server) {
        return Ok(found(ca, server));
    }
    std::fs::create_dir_all(dir)?;
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(dir.join(".lock"))?;
    rustix::fs::flock(&lock, rustix::fs::FlockOperation::LockExclusive)?;
    // Another server may have made them while this one waited.
    if usable(&ca) && usable(&server) {
        return Ok(found(ca, server));
    }
    let (ca_pem, server_pem) = generate(hosts).map_err(io::Error::other)?;
    write_atomically(dir, &server, server_pem.as_bytes())?;
    write_atomically(dir, &ca, ca_pem.as_bytes())?;
    Ok(CertFiles {
        ca,
        server,
        created: true,
    })
}

/// Whether `path` holds at least one PEM certificate.
fn usable(path: &Path) -> bool {
    std::fs::read(path).is_ok_and(|pem| {
        CertificateDer::pem_slice_iter(&pem)
            .next()
            .is_some_and(|c| c.is_ok())
    })
}

/// Writes `bytes` to `path` through a temporary file in `dir` (readable by the owner only: the
/// server's file holds its private key).
fn write_atomically(dir: &Path, path: &Path, bytes: &[u8]) -> io::Result<()> {
    use std::io::Write;
    let mut file = tempfile::NamedTempFile::new_in(dir)?;
    file.write_all(bytes)?;
    file.as_file().sync_all()?;
    file.persist(path).map_err(|e| e.error)?;
    Ok(())
}

/// A new authority (PEM certificate) and server certificate for `hosts` signed by it (PEM
/// certificate, then PEM private key).
fn generate(hosts: &[String]) -> Result<(String, String), rcgen::Error> {
    let ca_key = KeyPair::generate()?;
    let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "Ebb Cosmos DB profile local CA");
    ca_params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca_cert = ca_params.self_signed(&ca_key)?;

    let key = KeyPair::generate()?;
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    params.subject_alt_names = subject_alt_names(hosts)?;
    params
        .distinguished_name
        .push(DnType::CommonName, "localhost");
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    let cert = params.signed_by(&key, &Issuer::from_params(&ca_params, &ca_key))?;
    Ok((
        ca_cert.pem(),
        format!("{}{}", cert.pem(), key.serialize_pem()),
    ))
}

/// `localhost`, the loopback addresses and `hosts`, each once: IP addresses as such, the rest
/// as DNS names.
fn subject_alt_names(hosts: &[String]) -> Result<Vec<SanType>, rcgen::Error> {
    let mut names: Vec<String> = vec!["localhost".into(), "127.0.0.1".into(), "::1".into()];
    for host in hosts {
        let host = host.trim_start_matches('[').trim_end_matches(']');
        if !host.is_empty() && !names.iter().any(|n| n == host) {
            names.push(host.to_owned());
        }
    }
    names
        .into_iter()
        .filter(|n| {
            !n.parse::<std::net::IpAddr>()
                .is_ok_and(|ip| ip.is_unspecified())
        })
        .map(|n| match n.parse::<std::net::IpAddr>() {
            Ok(ip) => Ok(SanType::IpAddress(ip)),
            Err(_) => Ok(SanType::DnsName(n.try_into()?)),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn made_once_then_reused() {
        let dir = tempfile::tempdir().unwrap();
        let first = ensure(dir.path(), &["db.example".into(), "0.0.0.0".into()]).unwrap();
        assert!(first.created);
        let ca = std::fs::read(&first.ca).unwrap();
        let server = std::fs::read_to_string(&first.server).unwrap();
        assert!(server.contains("BEGIN CERTIFICATE") && server.contains("PRIVATE KEY"));
        let again = ensure(dir.path(), &[]).unwrap();
        assert!(!again.created);
        assert_eq!(std::fs::read(&again.ca).unwrap(), ca);
        // A damaged file is made again.
        std::fs::write(&first.ca, b"nothing").unwrap();
        assert!(ensure(dir.path(), &[]).unwrap().created);
    }

    #[test]
    fn names_cover_loopback_and_hosts() {
        let names =
            subject_alt_names(&["[::1]".into(), "db.example".into(), "0.0.0.0".into()]).unwrap();
        assert_eq!(names.len(), 4, "{names:?}");
        assert!(names.contains(&SanType::DnsName("db.example".try_into().unwrap())));
    }
}
