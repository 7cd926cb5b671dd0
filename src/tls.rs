//! TLS client configuration (rustls with the ring provider).
//!
//! Connections drive `rustls::ClientConnection` by hand over the shard's own buffers (see
//! `net`), so this module only decides what to trust.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};

/// Why a TLS configuration could not be built.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A certificate file could not be read or holds no certificate.
    #[error("certificate file {}: {why}", .file.display())]
    CertFile {
        /// The file.
        file: PathBuf,
        /// What is wrong with it.
        #[source]
        why: CertWhy,
    },
    /// The simulator's key file could not be read.
    #[error("TLS configuration: --tls-key {}: {source}", .file.display())]
    KeyFile {
        /// The file.
        file: PathBuf,
        /// The PEM reader's error.
        source: rustls::pki_types::pem::Error,
    },
    /// rustls refused the configuration.
    #[error("TLS configuration: {0}")]
    Rustls(#[from] rustls::Error),
    /// The certificate verifier could not be built from the roots.
    #[error("TLS configuration: {0}")]
    Verifier(#[from] rustls::client::VerifierBuilderError),
    /// A host that is no name a certificate can be checked against.
    #[error("TLS configuration: invalid server name {host:?}: {source}")]
    ServerName {
        /// The host as written.
        host: String,
        /// Why it is not a name.
        source: rustls::pki_types::InvalidDnsNameError,
    },
}

/// What is wrong with a certificate file.
#[derive(Debug, thiserror::Error)]
pub enum CertWhy {
    /// It is not PEM, or cannot be read.
    #[error("{0}")]
    Pem(#[source] rustls::pki_types::pem::Error),
    /// It holds no certificate.
    #[error("no PEM certificate in the file")]
    Empty,
    /// rustls refused a certificate in it.
    #[error("{0}")]
    Refused(#[source] rustls::Error),
}

/// The error for `why` in certificate file `file`.
fn cert_file(file: &Path, why: CertWhy) -> TlsError {
    TlsError::CertFile {
        file: file.to_path_buf(),
        why,
    }
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
    let builder =
        ClientConfig::builder_with_provider(provider()).with_safe_default_protocol_versions()?;
    let mut config = if insecure {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AcceptAnything))
            .with_no_client_auth()
    } else {
        let mut roots = RootCertStore::empty();
        let mut given = Vec::new();
        match ca_file {
            Some(path) => {
                let certs = read_certs(path)?;
                for c in &certs {
                    roots
                        .add(c.clone())
                        .map_err(|e| cert_file(path, CertWhy::Refused(e)))?;
                }
                given = certs;
            }
            None => roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned()),
        }
        let web_pki = rustls::client::WebPkiServerVerifier::builder_with_provider(
            Arc::new(roots),
            provider(),
        )
        .build()?;
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(TrustGiven { web_pki, given }))
            .with_no_client_auth()
    };
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// The certificates of PEM file `file`: at least one.
fn read_certs(file: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(file)
        .and_then(|it| it.collect::<Result<_, _>>())
        .map_err(|e| cert_file(file, CertWhy::Pem(e)))?;
    if certs.is_empty() {
        return Err(cert_file(file, CertWhy::Empty));
    }
    Ok(certs)
}

/// A server configuration from PEM files (the simulator's https mode).
pub(crate) fn server_config(
    cert_file: &Path,
    key_file: &Path,
) -> Result<Arc<rustls::ServerConfig>, TlsError> {
    use rustls::pki_types::PrivateKeyDer;
    let certs = read_certs(cert_file)?;
    let key = PrivateKeyDer::from_pem_file(key_file).map_err(|source| TlsError::KeyFile {
        file: key_file.to_path_buf(),
        source,
    })?;
    let mut config = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(certs, key)?;
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
    .map_err(|source| TlsError::ServerName {
        host: host.to_string(),
        source,
    })
}

/// The web PKI's verification, plus one case it refuses and curl accepts: the server presents,
/// as its own certificate, exactly a certificate given with `--ca-cert` that is marked as a CA
/// (what `openssl req -x509` makes by default). That certificate is then trusted as it is; its
/// names must still match the server's.
#[derive(Debug)]
struct TrustGiven {
    web_pki: Arc<rustls::client::WebPkiServerVerifier>,
    given: Vec<CertificateDer<'static>>,
}

impl ServerCertVerifier for TrustGiven {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let verdict =
            self.web_pki
                .verify_server_cert(end_entity, intermediates, server_name, ocsp, now);
        match &verdict {
            Err(rustls::Error::InvalidCertificate(rustls::CertificateError::Other(other)))
                if matches!(
                    other.0.downcast_ref::<webpki::Error>(),
                    Some(webpki::Error::CaUsedAsEndEntity)
                ) && self.given.iter().any(|c| c.as_ref() == end_entity.as_ref()) =>
            {
                webpki::EndEntityCert::try_from(end_entity)
                    .and_then(|cert| cert.verify_is_valid_for_subject_name(server_name))
                    .map_err(|_| {
                        rustls::Error::InvalidCertificate(rustls::CertificateError::NotValidForName)
                    })?;
                Ok(ServerCertVerified::assertion())
            }
            _ => verdict,
        }
    }
    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.web_pki.verify_tls12_signature(message, cert, dss)
    }
    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.web_pki.verify_tls13_signature(message, cert, dss)
    }
    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.web_pki.supported_verify_schemes()
    }
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

/// What to do about a failed handshake, from rustls's error text (empty when there is no
/// advice), starting with `: `.
pub(crate) fn handshake_hint(error: &str) -> &'static str {
    if error.contains("InvalidContentType") || error.contains("corrupt message") {
        ": the server answered in plain text; is it an http:// port?"
    } else if error.contains("UnknownIssuer") || error.contains("CaUsedAsEndEntity") {
        ": pass the server's certificate or its CA with --ca-cert FILE (or --insecure to \
         trust any)"
    } else {
        ""
    }
}
