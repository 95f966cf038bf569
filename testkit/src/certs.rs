//! A private CA and a server certificate for 127.0.0.1/localhost. rustls refuses a
//! self-signed certificate used directly as the server's, so tests use a CA and a leaf.

use std::path::{Path, PathBuf};

use anyhow::Result;
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair, KeyUsagePurpose,
};

pub struct TestCa {
    pub ca_pem: PathBuf,
    pub cert_pem: PathBuf,
    pub key_pem: PathBuf,
}

impl TestCa {
    /// Writes `ca.pem`, `server.pem` and `server.key` into `dir`.
    pub fn generate(dir: &Path) -> Result<TestCa> {
        let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(DnType::CommonName, "mailbroker test CA");
        ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate()?)?;

        let mut leaf_params =
            CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()])?;
        leaf_params.is_ca = IsCa::ExplicitNoCa;
        leaf_params
            .distinguished_name
            .push(DnType::CommonName, "localhost");
        let leaf_key = KeyPair::generate()?;
        let leaf = leaf_params.signed_by(&leaf_key, &ca)?;

        let out = TestCa {
            ca_pem: dir.join("ca.pem"),
            cert_pem: dir.join("server.pem"),
            key_pem: dir.join("server.key"),
        };
        std::fs::write(&out.ca_pem, ca.pem())?;
        std::fs::write(&out.cert_pem, leaf.pem())?;
        std::fs::write(&out.key_pem, leaf_key.serialize_pem())?;
        Ok(out)
    }
}
