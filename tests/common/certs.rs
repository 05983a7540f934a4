//! Certificates made at test time with `rcgen`: a certificate authority that signs server and
//! client certificates (the TLS and X.509 tests).

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose,
};

use super::TestResult;

/// A certificate authority, and the PEM text of its certificate.
pub struct Ca {
    params: CertificateParams,
    key: KeyPair,
    /// The PEM text of its certificate.
    pub pem: String,
}

impl Ca {
    pub fn new(name: &str) -> TestResult<Ca> {
        let key = KeyPair::generate()?;
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let pem = params.self_signed(&key)?.pem();
        Ok(Ca { params, key, pem })
    }

    /// A certificate and its key, in one PEM text, with the subject `names` (written in that
    /// order), for a server (`localhost`, `127.0.0.1`) or a client.
    pub fn issue(&self, names: &[(DnType, &str)], server: bool) -> TestResult<String> {
        let key = KeyPair::generate()?;
        let hosts = if server {
            vec!["localhost".to_owned(), "127.0.0.1".to_owned()]
        } else {
            Vec::new()
        };
        let mut params = CertificateParams::new(hosts)?;
        // (Not rcgen's default name, whose common name would come first.)
        params.distinguished_name = DistinguishedName::new();
        for (ty, value) in names {
            params.distinguished_name.push(ty.clone(), *value);
        }
        params.extended_key_usages = vec![if server {
            ExtendedKeyUsagePurpose::ServerAuth
        } else {
            ExtendedKeyUsagePurpose::ClientAuth
        }];
        let cert = params.signed_by(&key, &Issuer::from_params(&self.params, &self.key))?;
        Ok(format!("{}{}", cert.pem(), key.serialize_pem()))
    }
}
