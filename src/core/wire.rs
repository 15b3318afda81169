//! The control-socket protocol: one JSON object per line each way, versioned.
//!
//! Kept apart from the server so the CLI (client) and the daemon share one
//! definition, as pueue does with its Request/Response enums.

use serde::{Deserialize, Serialize};

use crate::core::error::Error;
use crate::core::names::{AgentName, TaskName};
pub use crate::core::protocol::reason::Refusal;

/// Protocol version; a request with another version gets an error response.
pub const PROTOCOL_VERSION: u32 = 1;

/// How often the daemon sends a blank line on a connection whose request it is still
/// carrying out, so the client can tell a long request from a daemon that went away.
pub const KEEPALIVE: std::time::Duration = std::time::Duration::from_secs(2);

/// Longest request line accepted (bytes); longer lines get an error and the connection is closed.
pub const MAX_REQUEST: usize = 1024 * 1024;

/// A request from the CLI.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "cmd", rename_all = "snake_case")]
pub enum Request {
    /// Is the daemon alive? Answered with [`Response::Pong`].
    Ping,
    /// Supervise a task (after `task start`).
    Register { project: String, task: String },
    /// Run a check-in now; answered with [`Response::Checkin`].
    Checkin { project: String, task: String },
    /// Replace the PM's conversation by a fresh one now (`task rotate`); answered with
    /// [`Response::Rotated`].
    Rotate { project: String, task: String },
    /// The supervised tasks; answered with [`Response::Tasks`].
    Tasks,
    /// Stop the daemon cleanly (agents keep running).
    Shutdown,
    /// Start an agent (`task spawn`); answered with [`Response::Spawned`] (or [`Response::Refused`]).
    Spawn(SpawnRequest),
    /// Type a message into an agent (`task send`); answered with [`Response::Sent`].
    Send(SendRequest),
    /// Follow the supervised tasks (`task ui`): answered at once with [`Response::Tasks`],
    /// then one [`Response::Changed`] line per change, for as long as the client reads.
    Subscribe,
    /// End a task's sessions and stop supervising it (`task stop`); answered with [`Response::Stopped`].
    Stop(StopRequest),
    /// Serve the web page (`task web`), or say where it is served; answered with
    /// [`Response::Web`].
    Web(WebRequest),
}

/// `task spawn`, as the CLI asks it and the daemon (or the CLI itself) serves it. The
/// caller is not part of it: whoever serves a request finds the caller itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpawnRequest {
    /// Project folder.
    pub project: String,
    /// Task name.
    pub task: TaskName,
    /// Agent name.
    pub agent: AgentName,
    /// The PM's handoff, resolved to an absolute path by the CLI.
    pub handoff: String,
    /// Runtime override.
    pub runtime: Option<String>,
    /// Hold the spawn in the agent's lane when it is busy (`--queue`).
    #[serde(default)]
    pub queue: bool,
    /// `--worktree[=KIND]` (older clients send none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worktree: Option<crate::core::worktree::Isolation>,
    /// `--over-budget`: start even though a budget is used up. Honoured only when the
    /// caller the server finds is a human (older clients never send it).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub over_budget: bool,
    /// The tmux server and session prefix the CLI was asked to use (`app::session::Ctx::id`).
    pub tmux: String,
}

/// `task send`: a message for a running agent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SendRequest {
    /// Project folder.
    pub project: String,
    /// Task name.
    pub task: TaskName,
    /// Agent name.
    pub agent: AgentName,
    /// The message.
    pub text: String,
    /// As for [`SpawnRequest::tmux`].
    pub tmux: String,
}

/// `task stop`: end a task's sessions.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StopRequest {
    /// Project folder.
    pub project: String,
    /// Task name.
    pub task: TaskName,
    /// As for [`SpawnRequest::tmux`].
    pub tmux: String,
}

/// `task web`: the page the daemon serves.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WebRequest {
    /// Start it when it is not served (otherwise only say where it is).
    pub start: bool,
    /// `host:port`; `None`: as served now, else config.toml's `[web] listen`, else loopback.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub listen: Option<String>,
    /// Answers off; `None`: as served now, else config.toml's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_only: Option<bool>,
    /// A non-loopback address over plain HTTP, knowingly.
    #[serde(default)]
    pub insecure_listen: bool,
}

impl Request {
    /// The task a verb request is about, as the daemon's registry names it.
    pub fn supervised(&self) -> Option<Supervised> {
        let (project, task) = match self {
            Request::Spawn(r) => (&r.project, &r.task),
            Request::Send(r) => (&r.project, &r.task),
            Request::Stop(r) => (&r.project, &r.task),
            _ => return None,
        };
        Some(Supervised {
            project: project.clone(),
            task: task.to_string(),
        })
    }
}

/// An envelope carrying the version.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Envelope<T> {
    /// Protocol version.
    pub v: u32,
    /// The payload.
    #[serde(flatten)]
    pub body: T,
}

/// One supervised task, as the daemon sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Supervised {
    /// Project folder.
    pub project: String,
    /// Task name.
    pub task: String,
}

/// A response from the daemon: one variant per verb's report, a refusal with its reason,
/// or an error with the exit code the CLI should use.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Response {
    /// Alive ([`Request::Ping`]), with what the daemon's process memos hold (name →
    /// entries: `store::memo`'s census; older daemons send none).
    Pong {
        pid: u32,
        version: String,
        #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
        memos: std::collections::BTreeMap<String, usize>,
    },
    /// Done, nothing to report ([`Request::Register`], [`Request::Shutdown`]).
    Ok,
    /// The tasks supervised ([`Request::Tasks`]).
    Tasks { tasks: Vec<Supervised> },
    /// A check-in's report, as `task checkin --json` prints it ([`Request::Checkin`]).
    Checkin {
        report: Box<crate::core::report::CheckinReport>,
    },
    /// What a rotation did ([`Request::Rotate`]).
    Rotated {
        rotated: Box<crate::core::rotation::Rotated>,
    },
    /// What a spawn did, as `task spawn --json` prints it ([`Request::Spawn`]).
    Spawned {
        report: Box<crate::core::report::SpawnReport>,
    },
    /// The delivery report of a message ([`Request::Send`]).
    Sent { report: crate::core::report::Report },
    /// The sessions a stop ended ([`Request::Stop`]).
    Stopped { stopped: crate::core::report::Stopped },
    /// Where the web page is served ([`Request::Web`]); `url` is `None` when it is not.
    Web { url: Option<String>, read_only: bool },
    /// A streamed change ([`Request::Subscribe`]): a handoff of this task is final, or
    /// (`task` empty) the set of supervised tasks changed.
    Changed { project: String, task: String },
    /// The protocol refused the request (exit 6); `reason` says why.
    Refused {
        #[serde(flatten)]
        refusal: Refusal,
    },
    /// The request failed; the daemon keeps serving. `code` is the exit code the CLI should use.
    Error {
        message: String,
        #[serde(default = "default_code")]
        code: i32,
    },
}

fn default_code() -> i32 {
    crate::core::error::EXIT_FAILURE
}

impl Response {
    /// The answer to a failed request: a refusal with its reason, or an error carrying the
    /// library error's exit code.
    pub fn error(e: &Error) -> Response {
        match e {
            Error::Refused(refusal) => Response::Refused {
                refusal: refusal.clone(),
            },
            _ => Response::Error {
                message: e.to_string(),
                code: e.exit_code(),
            },
        }
    }

    /// An error answer for a failure of the daemon itself.
    pub fn failure(message: impl Into<String>) -> Response {
        Response::Error {
            message: message.into(),
            code: crate::core::error::EXIT_FAILURE,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::protocol::reason::Reason;

    fn round_trip(r: &Response) -> serde_json::Value {
        let line = serde_json::to_string(&Envelope {
            v: PROTOCOL_VERSION,
            body: r.clone(),
        })
        .unwrap();
        let back: Envelope<Response> = serde_json::from_str(&line).unwrap();
        assert_eq!(
            serde_json::to_string(&Envelope {
                v: PROTOCOL_VERSION,
                body: back.body
            })
            .unwrap(),
            line
        );
        serde_json::from_str(&line).unwrap()
    }

    #[test]
    fn a_verb_request_keeps_its_flat_shape_and_its_names_are_checked_when_read() {
        let line = r#"{"v":1,"cmd":"send","project":"/p","task":"t1","agent":"dev","text":"hi","tmux":"x"}"#;
        let req: Envelope<Request> = serde_json::from_str(line).unwrap();
        let Request::Send(s) = &req.body else {
            panic!("{:?}", req.body)
        };
        assert_eq!((s.task.as_str(), s.agent.as_str()), ("t1", "dev"));
        assert_eq!(
            serde_json::to_string(&req).unwrap(),
            line,
            "the same bytes as before the types"
        );
        assert_eq!(req.body.supervised().unwrap().task, "t1");
        let forged = line.replace("\"dev\"", "\"../pm\"");
        let e = serde_json::from_str::<Envelope<Request>>(&forged).unwrap_err();
        assert!(e.to_string().contains("lower-case"), "{e}");
    }

    #[test]
    fn a_raw_ping_is_answered_with_a_pid() {
        let req: Envelope<Request> = serde_json::from_str(r#"{"v":1,"cmd":"ping"}"#).unwrap();
        assert_eq!(req.body, Request::Ping);
        let v = round_trip(&Response::Pong {
            pid: 42,
            version: "0".into(),
            memos: Default::default(),
        });
        assert_eq!((v["kind"].as_str(), v["pid"].as_u64()), (Some("pong"), Some(42)));
    }

    #[test]
    fn a_refusal_crosses_the_socket_with_its_reason_as_a_value() {
        let e = Error::Refused(Refusal::new(Reason::SpawnRejectActiveLane, "dev's lane is busy"));
        let r = Response::error(&e);
        let v = round_trip(&r);
        assert_eq!(v["kind"], "refused");
        assert_eq!(v["reason"], "SPAWN_REJECT_ACTIVE_LANE");
        match r {
            Response::Refused { refusal } => {
                assert_eq!(refusal.reason, Reason::SpawnRejectActiveLane);
                assert_eq!(refusal.to_string(), e.to_string(), "the words are unchanged");
            }
            other => panic!("{other:?}"),
        }
        // Anything else keeps its exit code.
        let v = round_trip(&Response::error(&Error::BadInput("no".into())));
        assert_eq!((v["kind"].as_str(), v["code"].as_i64()), (Some("error"), Some(2)));
        let v = round_trip(&Response::error(&Error::Remote("host down".into())));
        assert_eq!(v["code"], 1);
    }

    #[test]
    fn each_verb_has_its_report() {
        let v = round_trip(&Response::Stopped {
            stopped: crate::core::report::Stopped {
                ended: vec!["ao-t1-pm".into()],
                ..Default::default()
            },
        });
        assert_eq!(v["kind"], "stopped");
        assert_eq!(v["stopped"]["ended"][0], "ao-t1-pm");
        let req: Envelope<Request> = serde_json::from_str(r#"{"v":1,"cmd":"subscribe"}"#).unwrap();
        assert_eq!(req.body, Request::Subscribe);
        let v = round_trip(&Response::Changed {
            project: "/p".into(),
            task: "t1".into(),
        });
        assert_eq!((v["kind"].as_str(), v["task"].as_str()), (Some("changed"), Some("t1")));
        let v = round_trip(&Response::Sent {
            report: crate::core::report::Report {
                outcome: crate::core::report::Outcome::Delivered,
                reason: "submitted".into(),
                enters: 1,
                bytes: 5,
            },
        });
        assert_eq!(
            (v["kind"].as_str(), v["report"]["outcome"].as_str()),
            (Some("sent"), Some("delivered"))
        );
    }
}
