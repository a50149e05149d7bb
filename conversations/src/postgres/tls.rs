//! TLS for the PostgreSQL store through rustls (with ring, as the rest of the workspace):
//! the client configuration for each [`PostgresTls`] mode. `require` encrypts without
//! checking the certificate, as libpq's `sslmode=require` does; `verify-full` checks the
//! chain against the given CA file (or the public web roots) and the host name.

use std::path::PathBuf;
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{ring, CryptoProvider};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
use tokio_postgres::config::SslMode;
use tokio_postgres_rustls::MakeRustlsConnect;

/// How the connection to the server is protected.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum PostgresTls {
    /// Plain TCP (a server on the same machine or a private network).
    #[default]
    Disable,
    /// TLS, without checking the server's certificate: protects against eavesdropping, not
    /// against a server that impersonates the database (libpq's `sslmode=require`).
    Require,
    /// TLS with the certificate checked against `ca_file` (PEM), or the public web roots
    /// when `None`, and the host name checked too (libpq's `sslmode=verify-full`).
    VerifyFull {
        /// The CA certificates to trust, e.g. a cloud provider's bundle.
        ca_file: Option<PathBuf>,
    },
}

/// Why the TLS configuration cannot be made.
#[derive(Debug, thiserror::Error)]
pub(crate) enum TlsError {
    #[error("cannot read the CA file '{path}'")]
    CaFile {
        path: String,
        #[source]
        source: rustls::pki_types::pem::Error,
    },
    #[error("the CA file '{path}' holds no usable certificate")]
    NoCertificate { path: String },
    #[error("cannot set up TLS")]
    Rustls(#[from] rustls::Error),
}

/// What tokio-postgres asks the server for: nothing, or TLS (refusing a server without it).
pub(crate) fn ssl_mode(tls: &PostgresTls) -> SslMode {
    match tls {
        PostgresTls::Disable => SslMode::Disable,
        PostgresTls::Require | PostgresTls::VerifyFull { .. } => SslMode::Require,
    }
}

/// The connector for `tls`; with [`PostgresTls::Disable`] it is never used.
pub(crate) fn connector(tls: &PostgresTls) -> Result<MakeRustlsConnect, TlsError> {
    let provider = Arc::new(ring::default_provider());
    let builder = ClientConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()?;
    let config = match tls {
        PostgresTls::Disable | PostgresTls::Require => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AnyCertificate { provider }))
            .with_no_client_auth(),
        PostgresTls::VerifyFull { ca_file } => builder
            .with_root_certificates(roots(ca_file.as_deref())?)
            .with_no_client_auth(),
    };
    Ok(MakeRustlsConnect::new(config))
}

/// The CA certificates in `ca_file`, or the public web roots.
fn roots(ca_file: Option<&std::path::Path>) -> Result<RootCertStore, TlsError> {
    let Some(path) = ca_file else {
        return Ok(RootCertStore::from_iter(
            webpki_roots::TLS_SERVER_ROOTS.iter().cloned(),
        ));
    };
    let shown = || path.display().to_string();
    let certificates = CertificateDer::pem_file_iter(path)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .map_err(|source| TlsError::CaFile {
            path: shown(),
            source,
        })?;
    let mut store = RootCertStore::empty();
    let (added, _ignored) = store.add_parsable_certificates(certificates);
    if added == 0 {
        return Err(TlsError::NoCertificate { path: shown() });
    }
    Ok(store)
}

/// `require`: accepts any certificate, but still checks the handshake's signatures so the
/// session is really encrypted to the key the server presented.
#[derive(Debug)]
struct AnyCertificate {
    provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}
