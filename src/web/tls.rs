//! HTTPS for a page served beyond loopback: the certificate chain and key are PEM files
//! named in config.toml (`[web] tls_cert`, `tls_key`; e.g. from `tailscale cert`). Each
//! handshake runs in a task of its own, bounded by [`HANDSHAKE_TIMEOUT`], and only finished
//! ones reach the server, so one slow or silent client holds up nobody else.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

use crate::core::error::{Error, Result};

/// How long a client may take over its handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The server's TLS settings from the two PEM files.
pub fn acceptor(cert: &Path, key: &Path) -> Result<TlsAcceptor> {
    let bad = |what: &str, p: &Path, e: String| {
        Error::BadInput(format!(
            "config.toml [web] {what} {}: {e}; give a PEM file (e.g. from `tailscale cert`)",
            p.display()
        ))
    };
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .map_err(|e| bad("tls_cert", cert, e.to_string()))?
        .collect::<std::result::Result<_, _>>()
        .map_err(|e| bad("tls_cert", cert, e.to_string()))?;
    if chain.is_empty() {
        return Err(bad("tls_cert", cert, "no certificate in it".into()));
    }
    let key = PrivateKeyDer::from_pem_file(key).map_err(|e| bad("tls_key", key, e.to_string()))?;
    let provider = Arc::new(tokio_rustls::rustls::crypto::ring::default_provider());
    let config = tokio_rustls::rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::Environment(format!("TLS: {e}")))?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(|e| {
            Error::BadInput(format!(
                "config.toml [web] tls_cert and tls_key do not make a pair: {e}"
            ))
        })?;
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// A listener whose connections have finished their TLS handshake.
pub struct Listener {
    ready: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
    addr: SocketAddr,
    accepting: tokio::task::JoinHandle<()>,
}

impl Listener {
    /// Accept on `tcp`, handshaking with `tls`.
    pub fn new(tcp: TcpListener, tls: TlsAcceptor) -> std::io::Result<Listener> {
        let addr = tcp.local_addr()?;
        let (tx, ready) = mpsc::channel(64);
        let accepting = tokio::spawn(async move {
            loop {
                let (stream, peer) = match tcp.accept().await {
                    Ok(x) => x,
                    Err(e) => {
                        tracing::warn!(error = %e, "web: accept failed");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                };
                let (tls, tx) = (tls.clone(), tx.clone());
                tokio::spawn(async move {
                    match tokio::time::timeout(HANDSHAKE_TIMEOUT, tls.accept(stream)).await {
                        Ok(Ok(s)) => {
                            let _ = tx.send((s, peer)).await;
                        }
                        Ok(Err(e)) => tracing::debug!(from = %peer, error = %e, "web: TLS handshake failed"),
                        Err(_) => tracing::debug!(from = %peer, "web: TLS handshake timed out"),
                    }
                });
            }
        });
        Ok(Listener { ready, addr, accepting })
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        self.accepting.abort();
    }
}

impl axum::serve::Listener for Listener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.ready.recv().await {
            Some(x) => x,
            // The accepting task never ends while the listener lives.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<SocketAddr> {
        Ok(self.addr)
    }
}
