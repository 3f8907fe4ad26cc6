//! TLS for the API: rustls with the RustCrypto provider (no C code), a
//! certificate and key from PEM files, or a self-signed ECDSA P-256
//! certificate made at start (its SHA-256 fingerprint printed, so a client
//! can pin it).

use rustls::ServerConfig;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use sha2::{Digest, Sha256};
use std::path::PathBuf;
use std::sync::Arc;

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("{path}: {what}")]
    File { path: String, what: String },
    #[error("making the self-signed certificate: {0}")]
    Generate(String),
    #[error("TLS set-up: {0}")]
    Rustls(#[from] rustls::Error),
}

/// Where the server's certificate comes from.
#[derive(Debug, Clone)]
pub enum Identity {
    /// Made at start for these names (DNS names or IP addresses).
    SelfSigned { names: Vec<String> },
    /// PEM files: the certificate chain and its private key.
    Files { cert: PathBuf, key: PathBuf },
}

/// The server's TLS configuration, its certificate (PEM) and that
/// certificate's SHA-256 fingerprint.
#[derive(Debug)]
pub struct Tls {
    pub config: Arc<ServerConfig>,
    pub cert_pem: String,
    pub fingerprint: String,
}

pub fn server(identity: &Identity) -> Result<Tls, TlsError> {
    let (chain, key, pem) = match identity {
        Identity::SelfSigned { names } => self_signed(names)?,
        Identity::Files { cert, key } => {
            let file_err = |p: &PathBuf, what: String| TlsError::File {
                path: p.display().to_string(),
                what,
            };
            let chain = CertificateDer::pem_file_iter(cert)
                .map_err(|e| file_err(cert, e.to_string()))?
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| file_err(cert, e.to_string()))?;
            if chain.is_empty() {
                return Err(file_err(cert, "no CERTIFICATE in it".into()));
            }
            let k = PrivateKeyDer::from_pem_file(key).map_err(|e| file_err(key, e.to_string()))?;
            let pem = std::fs::read_to_string(cert).map_err(|e| file_err(cert, e.to_string()))?;
            (chain, k, pem)
        }
    };
    let fingerprint = Sha256::digest(chain[0].as_ref())
        .iter()
        .map(|b| format!("{b:02X}"))
        .collect::<Vec<_>>()
        .join(":");
    let provider = Arc::new(rustls_rustcrypto::provider());
    let config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(chain, key)?;
    Ok(Tls {
        config: Arc::new(config),
        cert_pem: pem,
        fingerprint,
    })
}

/// An ECDSA P-256 key signing for rcgen (which signs with ring or
/// aws-lc otherwise).
struct P256Key {
    key: p256::ecdsa::SigningKey,
    public: Vec<u8>,
}

impl rcgen::PublicKeyData for P256Key {
    fn der_bytes(&self) -> &[u8] {
        &self.public
    }

    fn algorithm(&self) -> &'static rcgen::SignatureAlgorithm {
        &rcgen::PKCS_ECDSA_P256_SHA256
    }
}

impl rcgen::SigningKey for P256Key {
    fn sign(&self, msg: &[u8]) -> Result<Vec<u8>, rcgen::Error> {
        use p256::ecdsa::signature::Signer;
        let sig: p256::ecdsa::Signature = self.key.sign(msg);
        Ok(sig.to_der().as_bytes().to_vec())
    }
}

type Identity3 = (Vec<CertificateDer<'static>>, PrivateKeyDer<'static>, String);

fn self_signed(names: &[String]) -> Result<Identity3, TlsError> {
    use p256::pkcs8::EncodePrivateKey;
    let gen_err = |e: &dyn std::fmt::Display| TlsError::Generate(e.to_string());
    let key = p256::ecdsa::SigningKey::random(&mut rand_core::OsRng);
    let public = key
        .verifying_key()
        .to_encoded_point(false)
        .as_bytes()
        .to_vec();
    let signer = P256Key { key, public };
    let mut params = rcgen::CertificateParams::new(names.to_vec()).map_err(|e| gen_err(&e))?;
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "linerate agent");
    // A random positive serial (rcgen makes one only with its own crypto).
    let mut serial = [0u8; 16];
    rand_core::RngCore::fill_bytes(&mut rand_core::OsRng, &mut serial);
    serial[0] &= 0x7f;
    params.serial_number = Some(rcgen::SerialNumber::from_slice(&serial));
    let cert = params.self_signed(&signer).map_err(|e| gen_err(&e))?;
    let pkcs8 = signer.key.to_pkcs8_der().map_err(|e| gen_err(&e))?;
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(pkcs8.as_bytes().to_vec()));
    Ok((vec![cert.der().clone()], key, cert.pem()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_self_signed_identity_makes_a_server_config() {
        let t = server(&Identity::SelfSigned {
            names: vec!["localhost".into(), "127.0.0.1".into()],
        })
        .unwrap();
        assert!(t.cert_pem.starts_with("-----BEGIN CERTIFICATE-----"));
        assert_eq!(t.fingerprint.len(), 32 * 3 - 1);
    }

    #[test]
    fn missing_files_are_named() {
        let e = server(&Identity::Files {
            cert: "/nonexistent/c.pem".into(),
            key: "/nonexistent/k.pem".into(),
        })
        .unwrap_err();
        assert!(e.to_string().contains("/nonexistent/c.pem"), "{e}");
    }
}
