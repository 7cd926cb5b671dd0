//! TLS client configuration (rustls with the ring provider).
//!
//! Connections drive `rustls::ClientConnection` by hand over the shard's own buffers (see
//! `net`), so this module only decides what to trust.

use std::path::Path;
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};

/// Why a TLS configuration could not be built.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A certificate file could not be read or holds no certificate.
    #[error("certificate file {0}: {1}")]
    CaFile(String, String),
    /// rustls refused the configuration.
    #[error("TLS configuration: {0}")]
    Config(String),
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// A client configuration trusting `ca_file` (PEM) or the web PKI roots; `insecure` trusts any
/// certificate.
pub(crate) fn client_config(
    ca_file: Option<&Path>,
    insecure: bool,
) -> Result<Arc<ClientConfig>, TlsError> {
    let builder = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError::Config(e.to_string()))?;
    let mut config = if insecure {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AcceptAnything))
            .with_no_client_auth()
    } else {
        let mut roots = RootCertStore::empty();
        match ca_file {
            Some(path) => {
                let shown = path.display().to_string();
                let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(path)
                    .map_err(|e| TlsError::CaFile(shown.clone(), e.to_string()))?
                    .collect::<Result<_, _>>()
                    .map_err(|e| TlsError::CaFile(shown.clone(), e.to_string()))?;
                if certs.is_empty() {
                    return Err(TlsError::CaFile(
                        shown,
                        "no PEM certificate in the file".into(),
                    ));
                }
                for c in certs {
                    roots
                        .add(c)
                        .map_err(|e| TlsError::CaFile(shown.clone(), e.to_string()))?;
                }
            }
            None => roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned()),
        }
        builder.with_root_certificates(roots).with_no_client_auth()
    };
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// A server configuration from PEM files (the simulator's https mode).
pub(crate) fn server_config(
    cert_file: &Path,
    key_file: &Path,
) -> Result<Arc<rustls::ServerConfig>, TlsError> {
    use rustls::pki_types::PrivateKeyDer;
    let shown = cert_file.display().to_string();
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert_file)
        .and_then(|it| it.collect::<Result<_, _>>())
        .map_err(|e| TlsError::CaFile(shown.clone(), e.to_string()))?;
    if certs.is_empty() {
        return Err(TlsError::CaFile(
            shown,
            "no PEM certificate in the file".into(),
        ));
    }
    let key = PrivateKeyDer::from_pem_file(key_file)
        .map_err(|e| TlsError::Config(format!("--tls-key {}: {e}", key_file.display())))?;
    let mut config = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError::Config(e.to_string()))?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| TlsError::Config(e.to_string()))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// The server name to send in SNI and to verify.
pub(crate) fn server_name(host: &str) -> Result<ServerName<'static>, TlsError> {
    ServerName::try_from(
        host.trim_start_matches('[')
            .trim_end_matches(']')
            .to_string(),
    )
    .map_err(|e| TlsError::Config(format!("invalid server name {host:?}: {e}")))
}

#[derive(Debug)]
struct AcceptAnything;

impl ServerCertVerifier for AcceptAnything {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }
    fn verify_tls12_signature(
        &self,
        _message: &[u8],
        _cert: &CertificateDer<'_>,
        _dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        Ok(HandshakeSignatureValid::assertion())
    }
    fn verify_tls13_signature(
        &self,
        _message: &[u8],
        _cert: &CertificateDer<'_>,
        _dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        Ok(HandshakeSignatureValid::assertion())
    }
    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        provider()
            .signature_verification_algorithms
            .supported_schemes()
    }
}
