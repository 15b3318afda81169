//! `task web`: the team on a phone. The daemon serves a small site (plain HTML, CSS and a
//! script from `templates/web/`, no build step): who needs you first, the tasks, a task's
//! agents, events and progress.md, each handoff; and the answers — a permission request
//! allowed or denied, a check-in now, a message, an agent stopped — each recorded with the
//! web session that made it. Open pages follow the daemon's own changes over server-sent
//! events.
//!
//! Layers: [`auth`] (the token, login codes, sessions and CSRF: plain functions of the
//! key, and the files), [`markdown`] (agents' markdown made inert), [`pages`] (what each
//! page shows, filled into the templates), [`board`] (the picture of the supervised tasks,
//! kept fresh), [`routes`] (HTTP). Bound to loopback unless told otherwise: another
//! address needs TLS or `--insecure-listen`.

pub mod auth;
pub mod board;
pub mod markdown;
pub mod pages;
pub mod routes;
pub mod tls;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use tokio::sync::broadcast;

use crate::core::error::{Error, Result};
use crate::core::wire::Response;
use crate::ui::source::Change;

/// How the page is served.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// `host:port` to listen on (port 0: any free one).
    pub listen: String,
    /// Answers off.
    pub read_only: bool,
    /// A non-loopback address over plain HTTP, knowingly.
    pub insecure_listen: bool,
    /// HTTPS: the certificate chain and key (PEM).
    pub tls: Option<(std::path::PathBuf, std::path::PathBuf)>,
}

/// The address a request came from (the login limiter counts failures by it), for plain
/// and TLS connections alike.
#[derive(Debug, Clone, Copy)]
pub struct Peer(pub SocketAddr);

impl axum::extract::connect_info::Connected<axum::serve::IncomingStream<'_, tokio::net::TcpListener>> for Peer {
    fn connect_info(s: axum::serve::IncomingStream<'_, tokio::net::TcpListener>) -> Peer {
        Peer(*s.remote_addr())
    }
}

impl axum::extract::connect_info::Connected<axum::serve::IncomingStream<'_, tls::Listener>> for Peer {
    fn connect_info(s: axum::serve::IncomingStream<'_, tls::Listener>) -> Peer {
        Peer(*s.remote_addr())
    }
}

/// The default address: loopback only.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8470";

/// A running web page.
pub struct Server {
    /// Where it listens.
    pub addr: SocketAddr,
    /// Answers off.
    pub read_only: bool,
    /// Served over HTTPS.
    pub tls: bool,
    board: Arc<board::Board>,
    join: tokio::task::JoinHandle<()>,
}

impl Server {
    /// The address a browser on this machine uses.
    pub fn url(&self) -> String {
        format!("{}://{}", if self.tls { "https" } else { "http" }, self.addr)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.board.stop();
        self.join.abort();
    }
}

/// Whether `addr` may be served with these options, and the warning to log when it is.
pub fn check_listen(addr: &SocketAddr, insecure_listen: bool, tls: bool) -> Result<Option<String>> {
    if addr.ip().is_loopback() || tls {
        return Ok(None);
    }
    if insecure_listen {
        return Ok(Some(format!(
            "the web page is served on {addr} over plain HTTP (--insecure-listen): anyone on that network can read the traffic, session cookies included"
        )));
    }
    Err(Error::BadInput(format!(
        "refusing to serve the web page on {addr}: it is not a loopback address and the page has no TLS; \
         set [web] tls_cert and tls_key in config.toml, listen on 127.0.0.1 and reach it through an SSH tunnel \
         or Tailscale, or pass --insecure-listen"
    )))
}

/// The address `opts` names, when it may be served.
pub async fn resolve(opts: &Options) -> Result<SocketAddr> {
    let addr: SocketAddr = tokio::net::lookup_host(&opts.listen)
        .await
        .ok()
        .and_then(|mut a| a.next())
        .ok_or_else(|| Error::BadInput(format!("{:?} is not an address to listen on (host:port)", opts.listen)))?;
    if let Some(w) = check_listen(&addr, opts.insecure_listen, opts.tls.is_some())? {
        tracing::warn!("{w}");
    }
    Ok(addr)
}

/// Start serving: bind, then answer on the daemon's runtime until dropped. `changes` is
/// the daemon's stream of changes (handoffs, the task set); the page reads a task again
/// only when it is named there or its folder's watch fires.
pub async fn start(opts: &Options, mut changes: broadcast::Receiver<Response>) -> Result<Server> {
    let addr = resolve(opts).await?;
    let keys = auth::Keys::of_user()?;
    keys.token()?;
    let tls = match &opts.tls {
        Some((cert, key)) => Some(tls::acceptor(cert, key)?),
        None => None,
    };
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| Error::io("listen on", std::path::Path::new(&opts.listen), e))?;
    let addr = listener
        .local_addr()
        .map_err(|e| Error::io("read the address of", std::path::Path::new(&opts.listen), e))?;
    let board = board::Board::start();
    let b2 = board.clone();
    tokio::spawn(async move {
        loop {
            let c = match changes.recv().await {
                Ok(Response::Changed { project, task }) if task.is_empty() => {
                    let _ = project;
                    Change::Tasks
                }
                Ok(Response::Changed { project, task }) => Change::Named { project, task },
                Ok(_) => continue,
                Err(broadcast::error::RecvError::Lagged(_)) => Change::Tasks,
                Err(broadcast::error::RecvError::Closed) => return,
            };
            b2.changed(c);
        }
    });
    let app = Arc::new(routes::App {
        board: board.clone(),
        keys,
        pages: pages::Pages::new(),
        read_only: opts.read_only,
        secure: tls.is_some(),
        limiter: Mutex::new(auth::Limiter::default()),
    });
    let router = routes::router(app);
    let scheme = if tls.is_some() { "https" } else { "http" };
    let join = match tls {
        Some(acceptor) => {
            let listener = tls::Listener::new(listener, acceptor)
                .map_err(|e| Error::io("listen on", std::path::Path::new(&opts.listen), e))?;
            tokio::spawn(async move {
                let app = router.into_make_service_with_connect_info::<Peer>();
                if let Err(e) = axum::serve(listener, app).await {
                    tracing::error!(error = %e, "the web page stopped serving");
                }
            })
        }
        None => tokio::spawn(async move {
            let app = router.into_make_service_with_connect_info::<Peer>();
            if let Err(e) = axum::serve(listener, app).await {
                tracing::error!(error = %e, "the web page stopped serving");
            }
        }),
    };
    tracing::info!(url = %format!("{scheme}://{addr}"), read_only = opts.read_only, "web page served");
    Ok(Server {
        addr,
        read_only: opts.read_only,
        tls: scheme == "https",
        board,
        join,
    })
}
