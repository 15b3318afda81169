//! "Through the daemon, or here": the one place that decides where a verb runs.
//!
//! When a daemon answers on the socket, spawn, send and stop run inside it (so they are
//! serialised with its check-ins and lane settling); without one they run in this
//! process. Both paths make the same library call, so the two modes behave alike, and
//! both fail alike: a refusal by the protocol comes back as a [`Refusal`] either way.

use std::future::Future;

use crate::core::error::{Error, Exit};
use crate::core::protocol::lane::Reason;
use crate::core::report::Report;
use crate::core::report::{SpawnReport, Stopped};
use crate::core::wire::{Refusal, Request, Response, Supervised};
use crate::io::control;
use crate::store::task::Task;

/// How the daemon names a task in its requests and its registry.
pub(crate) fn supervised(t: &Task) -> Supervised {
    Supervised {
        project: t.project.display().to_string(),
        task: t.name.to_string(),
    }
}

/// A verb's report, taken from the daemon's answer to that verb.
pub(crate) trait Answer: Sized {
    /// The report in `r`, or `r` back when it answers another verb.
    fn from_response(r: Response) -> Result<Self, Response>;
}

impl Answer for SpawnReport {
    fn from_response(r: Response) -> Result<Self, Response> {
        match r {
            Response::Spawned { report } => Ok(*report),
            other => Err(other),
        }
    }
}

impl Answer for Report {
    fn from_response(r: Response) -> Result<Self, Response> {
        match r {
            Response::Sent { report } => Ok(report),
            other => Err(other),
        }
    }
}

impl Answer for Stopped {
    fn from_response(r: Response) -> Result<Self, Response> {
        match r {
            Response::Stopped { stopped } => Ok(stopped),
            other => Err(other),
        }
    }
}

/// Ask the daemon to run a verb; `Ok(None)` when no daemon is running (the caller then
/// runs it in this process). A refusal comes back as a [`Refusal`]; other errors keep
/// the exit code the daemon sent; `what` names the report should the answer be another.
pub(crate) fn via_daemon<T: Answer>(req: &Request, what: &'static str) -> anyhow::Result<Option<T>> {
    let Some(resp) = control::request(req)? else {
        return Ok(None);
    };
    match T::from_response(resp) {
        Ok(report) => Ok(Some(report)),
        Err(Response::Refused { refusal }) => Err(refusal.into()),
        Err(Response::Error { message, code }) => Err(Exit::new(code, message).into()),
        Err(other) => Err(anyhow::Error::new(Error::Environment(format!(
            "unexpected answer from the daemon: {other:?}; is it the same version? (`task shutdown`, then retry)"
        )))
        .context(what)),
    }
}

/// Run `req` in the daemon when one is running, else await `here` in this process;
/// `what` names the daemon's report should it be another verb's.
pub(crate) async fn daemon_or_here<T, F>(req: &Request, what: &'static str, here: F) -> anyhow::Result<T>
where
    T: Answer,
    F: Future<Output = anyhow::Result<T>>,
{
    match via_daemon(req, what)? {
        Some(report) => Ok(report),
        None => here.await.map_err(typed_refusal),
    }
}

/// A refusal by this process's lanes, as the [`Refusal`] the daemon would have answered.
fn typed_refusal(e: anyhow::Error) -> anyhow::Error {
    match e.downcast_ref::<Error>() {
        Some(Error::Refused(r)) => r.clone().into(),
        _ => e,
    }
}

/// Why the protocol refused, when `e` is a refusal (from the lanes, the gate or the daemon).
pub(crate) fn refusal_reason(e: &anyhow::Error) -> Option<Reason> {
    e.chain()
        .find_map(|c| match (c.downcast_ref::<Refusal>(), c.downcast_ref::<Error>()) {
            (Some(r), _) | (_, Some(Error::Refused(r))) => Some(r.reason),
            _ => None,
        })
}

impl Answer for crate::core::rotation::Rotated {
    fn from_response(r: Response) -> Result<Self, Response> {
        match r {
            Response::Rotated { rotated } => Ok(*rotated),
            other => Err(other),
        }
    }
}
