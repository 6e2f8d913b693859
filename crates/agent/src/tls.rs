//! TLS for controller channels (`tls:` and `ptls:` targets), on rustls
//! with the ring provider.
//!
//! Both directions authenticate both ends, as OpenFlow deployments do
//! (`ovs-vsctl set-ssl KEY CERT CA`): the switch presents its certificate
//! chain and accepts only peers whose certificate chains to one of the
//! configured CA certificates. As a client (`tls:HOST:PORT`) the switch
//! also checks that the controller's certificate names HOST.

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::server::WebPkiClientVerifier;
use rustls::{ClientConfig, RootCertStore, ServerConfig};
use std::io;
use std::path::Path;
use std::sync::Arc;

/// The switch's certificate, key and trusted CAs.
#[derive(Debug)]
pub struct TlsSettings {
    /// The switch's certificate chain, leaf first.
    pub certs: Vec<CertificateDer<'static>>,
    /// The switch's private key.
    pub key: PrivateKeyDer<'static>,
    /// CA certificates a peer's chain must end in.
    pub ca: Vec<CertificateDer<'static>>,
}

impl Clone for TlsSettings {
    fn clone(&self) -> Self {
        TlsSettings {
            certs: self.certs.clone(),
            key: self.key.clone_key(),
            ca: self.ca.clone(),
        }
    }
}

fn invalid(what: &str, e: impl std::fmt::Display) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("{what}: {e}"))
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn read_certs(pem: &[u8], what: &str) -> io::Result<Vec<CertificateDer<'static>>> {
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| invalid(what, e))?;
    if certs.is_empty() {
        return Err(invalid(what, "no PEM certificate found"));
    }
    Ok(certs)
}

impl TlsSettings {
    /// Parses PEM text: a certificate chain, a private key (PKCS#8, PKCS#1
    /// or SEC1) and one or more CA certificates.
    pub fn from_pem(cert: &[u8], key: &[u8], ca: &[u8]) -> io::Result<Self> {
        let key = PrivateKeyDer::from_pem_slice(key).map_err(|e| invalid("private key", e))?;
        Ok(TlsSettings {
            certs: read_certs(cert, "certificate")?,
            key,
            ca: read_certs(ca, "CA certificate")?,
        })
    }

    /// Reads the three PEM files; errors name the file.
    pub fn from_pem_files(cert: &Path, key: &Path, ca: &Path) -> io::Result<Self> {
        let read = |p: &Path| {
            std::fs::read(p).map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", p.display())))
        };
        Self::from_pem(&read(cert)?, &read(key)?, &read(ca)?)
    }

    fn roots(&self) -> io::Result<Arc<RootCertStore>> {
        let mut roots = RootCertStore::empty();
        for c in &self.ca {
            roots
                .add(c.clone())
                .map_err(|e| invalid("CA certificate", e))?;
        }
        Ok(Arc::new(roots))
    }

    /// Configuration for `ptls:` listeners: client certificates required
    /// and checked against the CAs.
    pub fn server_config(&self) -> io::Result<Arc<ServerConfig>> {
        let verifier = WebPkiClientVerifier::builder_with_provider(self.roots()?, provider())
            .build()
            .map_err(|e| invalid("client verifier", e))?;
        let config = ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| invalid("TLS versions", e))?
            .with_client_cert_verifier(verifier)
            .with_single_cert(self.certs.clone(), self.key.clone_key())
            .map_err(|e| invalid("certificate/key", e))?;
        Ok(Arc::new(config))
    }

    /// Configuration for `tls:` connections: the controller's certificate
    /// is checked against the CAs; ours is presented.
    pub fn client_config(&self) -> io::Result<Arc<ClientConfig>> {
        let config = ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| invalid("TLS versions", e))?
            .with_root_certificates(self.roots()?)
            .with_client_auth_cert(self.certs.clone(), self.key.clone_key())
            .map_err(|e| invalid("certificate/key", e))?;
        Ok(Arc::new(config))
    }
}

/// The name a `tls:HOST:PORT` connection checks the certificate against.
pub fn server_name(host: &str) -> io::Result<ServerName<'static>> {
    ServerName::try_from(host.to_string()).map_err(|e| invalid("TLS server name", e))
}
