//! The serving certificate: read from PEM files (as cert-manager or the chart mounts them) and swapped in place when
//! the files change, so new handshakes use the new certificate while open connections carry on.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use rustls::ServerConfig;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

use crate::metrics::Metrics;

/// Why the certificate could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A file could not be read.
    #[error("cannot read {path}: {error}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        error: std::io::Error,
    },
    /// A file holds no usable PEM block of the expected type.
    #[error("{path}: {message}")]
    Pem {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// The key does not fit the certificate or is of an unsupported type.
    #[error("certificate {cert} with key {key}: {error}")]
    Key {
        /// The certificate file.
        cert: PathBuf,
        /// The key file.
        key: PathBuf,
        /// rustls' reason.
        error: rustls::Error,
    },
}

/// The ring crypto provider (no cmake or aws-lc build needed).
pub fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// A certificate and key read from files, reloadable.
pub struct ReloadingCert {
    cert_path: PathBuf,
    key_path: PathBuf,
    provider: Arc<CryptoProvider>,
    current: RwLock<Arc<CertifiedKey>>,
    /// The bytes last loaded, to notice changes.
    loaded: Mutex<(Vec<u8>, Vec<u8>)>,
}

impl fmt::Debug for ReloadingCert {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReloadingCert")
            .field("cert_path", &self.cert_path)
            .field("key_path", &self.key_path)
            .finish_non_exhaustive()
    }
}

fn read(path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|error| TlsError::Read {
        path: path.to_owned(),
        error,
    })
}

impl ReloadingCert {
    /// Loads the certificate chain from `cert` and the private key from `key` (PEM).
    pub fn load(cert: &Path, key: &Path) -> Result<Arc<Self>, TlsError> {
        let provider = provider();
        let cert_pem = read(cert)?;
        let key_pem = read(key)?;
        let certified = certified_key(cert, key, &cert_pem, &key_pem, &provider)?;
        Ok(Arc::new(Self {
            cert_path: cert.to_owned(),
            key_path: key.to_owned(),
            provider,
            current: RwLock::new(Arc::new(certified)),
            loaded: Mutex::new((cert_pem, key_pem)),
        }))
    }

    /// Rereads the files and swaps the certificate in when they changed: `Ok(true)` when swapped. A pair that does
    /// not load (e.g. caught between the writes of the certificate and of the key) leaves the current one in place.
    pub fn reload_if_changed(&self) -> Result<bool, TlsError> {
        let cert_pem = read(&self.cert_path)?;
        let key_pem = read(&self.key_path)?;
        let mut loaded = self.loaded.lock().unwrap_or_else(|e| e.into_inner());
        if loaded.0 == cert_pem && loaded.1 == key_pem {
            return Ok(false);
        }
        let certified = certified_key(
            &self.cert_path,
            &self.key_path,
            &cert_pem,
            &key_pem,
            &self.provider,
        )?;
        *self.current.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(certified);
        *loaded = (cert_pem, key_pem);
        Ok(true)
    }

    /// A rustls server configuration resolving to this certificate, offering HTTP/2 and HTTP/1.1.
    pub fn server_config(self: &Arc<Self>) -> Result<Arc<ServerConfig>, rustls::Error> {
        let mut config = ServerConfig::builder_with_provider(self.provider.clone())
            .with_safe_default_protocol_versions()?
            .with_no_client_auth()
            .with_cert_resolver(self.clone());
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(Arc::new(config))
    }

    /// Polls the files every `interval` on the current Tokio runtime, reloading when they change.
    pub fn watch(self: Arc<Self>, interval: Duration, metrics: Arc<Metrics>) {
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(interval);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                let me = self.clone();
                let outcome = tokio::task::spawn_blocking(move || me.reload_if_changed()).await;
                match outcome {
                    Ok(Ok(true)) => {
                        metrics.reload(true);
                        tracing::info!(cert = %self.cert_path.display(), "serving certificate reloaded");
                    }
                    Ok(Ok(false)) => {}
                    Ok(Err(e)) => {
                        metrics.reload(false);
                        tracing::warn!(error = %e, "serving certificate not reloaded; keeping the current one");
                    }
                    Err(e) => tracing::warn!(error = %e, "certificate reload task failed"),
                }
            }
        });
    }
}

impl ResolvesServerCert for ReloadingCert {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(
            self.current
                .read()
                .unwrap_or_else(|e| e.into_inner())
                .clone(),
        )
    }
}

fn certified_key(
    cert_path: &Path,
    key_path: &Path,
    cert_pem: &[u8],
    key_pem: &[u8],
    provider: &CryptoProvider,
) -> Result<CertifiedKey, TlsError> {
    let chain = CertificateDer::pem_slice_iter(cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| TlsError::Pem {
            path: cert_path.to_owned(),
            message: e.to_string(),
        })?;
    if chain.is_empty() {
        return Err(TlsError::Pem {
            path: cert_path.to_owned(),
            message: "no CERTIFICATE block".to_owned(),
        });
    }
    let key = PrivateKeyDer::from_pem_slice(key_pem).map_err(|e| TlsError::Pem {
        path: key_path.to_owned(),
        message: format!("no usable private key: {e}"),
    })?;
    CertifiedKey::from_der(chain, key, provider).map_err(|error| TlsError::Key {
        cert: cert_path.to_owned(),
        key: key_path.to_owned(),
        error,
    })
}
