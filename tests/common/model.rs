//! A scripted stand-in for the model APIs behind the agent CLIs, so real Claude Code,
//! Codex CLI and Gemini CLI run offline. The script (who says what) is here and reads the
//! Anthropic Messages shape; the other wire formats are translated to it and back, one
//! module each: [`openai`] (Responses, Codex) and [`gemini`] (Gemini API, Gemini CLI).
//!
//! The model behind Claude Code is the only part of a test that is not real. This server
//! answers `POST /v1/messages` (streaming SSE and plain JSON) and Claude Code's side
//! calls (titles, quota probes, anything without tools) from nothing but what Claude Code
//! sent it: a spawn preamble becomes a `task handoff` tool call, the PM's preamble and
//! check-ins become `task handoff` then `task spawn`, tool results become short replies.
//! Every request is recorded with the time it arrived, so tests can count deliveries and
//! the benchmark can time a handoff to the check-in reaching the model.
//!
//! Tests steer it per agent: hold an answer (a PM that is mid-turn when a check-in lands),
//! answer with the subscription usage-limit 429 (Claude Code's "You've hit your session
//! limit" screen), or ask for a command first that no rule allows (a permission prompt).

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

mod gemini;
mod openai;

/// The order the scripted PM delegates in: the example task's route.
pub const ROUTE: [&str; 4] = ["explore", "plan", "dev", "review"];

/// One request as it arrived.
#[derive(Debug, Clone)]
pub struct Seen {
    /// When it arrived.
    pub at: SystemTime,
    /// A main-loop request (it offered tools); false for side calls such as titles.
    pub main: bool,
    /// The agent, from the `# Agent: <name>` line of the first prompt.
    pub agent: Option<String>,
    /// The text of the turn this request carries (every message after the conversation's
    /// last assistant message, tool results included), system reminders taken out.
    pub last_user: String,
    /// What the user said in that turn: the typed, pasted or queued text only, without
    /// tool results and without the `<system-reminder>` blocks Claude Code adds. Read it
    /// through [`ModelServer::turns_saying`] / [`ModelServer::reached`].
    pub said: String,
    /// Where that turn starts in the conversation (its first message's index): a request
    /// retried after an API error carries the same turn at the same place.
    pub turn_at: usize,
    /// The turn was opened by text typed or pasted into the agent, not by a tool result.
    pub new_turn: bool,
    /// What the server answered, in a few words (`tool: task spawn …`, `text: …`, `429`).
    pub answer: String,
    /// How long the answer was held back (the agent was busy all that time).
    pub held: Option<Duration>,
    /// Every message of the conversation so far that the agent was given as the user's:
    /// prompts typed or pasted, and messages queued while busy that Claude Code put into
    /// the running turn (see [`INJECTED`]).
    pub prompts: Vec<String>,
    /// The conversation as sent (the Messages shape), for the helpers that read it.
    pub messages: Vec<Value>,
}

/// How Claude Code 2.1 hands the model a message that was queued while a turn ran and is
/// taken at the turn's next tool call: a `system` message starting with this.
pub const INJECTED: &str = "The user sent a new message while you were working:";

/// A condition an answer waits for.
type Until = Arc<dyn Fn() -> bool + Send + Sync>;

#[derive(Default)]
struct Steer {
    /// Agent → how long to hold its next main answers, and how many.
    hold: BTreeMap<String, (Duration, usize)>,
    /// Agent → hold its answer that starts with this prefix until the condition holds.
    hold_until: BTreeMap<String, (String, Until)>,
    /// Agent → the reset time for a usage-limit answer to its next main request.
    limit: BTreeMap<String, SystemTime>,
    /// Agent → a command to run before its handoff (once).
    ask_first: BTreeMap<String, String>,
    /// Agent → the lines of the handoff bodies it writes long, as taught: first to a file
    /// with the Write tool, then `task handoff … --body-file <file>`.
    long_body: BTreeMap<String, usize>,
    /// Agents that delegate in one compound command, as models do whatever the preamble
    /// says: `h=$(task handoff …) && task spawn … --handoff "$h"`.
    compound: std::collections::BTreeSet<String>,
    /// The PM leaves the permission requests its check-ins name unanswered.
    silent_on_permits: bool,
    /// Agent → the usage its main answers report (default [`DEFAULT_USAGE`]).
    usage: BTreeMap<String, Usage>,
    /// Agent → input tokens per message of the conversation: usage that grows with the
    /// conversation, as a real one's does (for context fills and rotation).
    per_message: BTreeMap<String, u64>,
    /// Agent → the input tokens of every answer in its first conversation, which also does
    /// not hand off by itself (it reads first): a spoke whose context is full, continued
    /// by the supervisor in a fresh conversation (which reports the default usage).
    full_first: BTreeMap<String, u64>,
    /// How many of the review's verdicts are still to be REJECTED (a review loop).
    rejections: usize,
    /// Agents that do not write the checkpoint they are asked for.
    no_checkpoint: std::collections::BTreeSet<String>,
    /// Agent → IN_PROGRESS reports it writes before each final handoff.
    progress: BTreeMap<String, usize>,
    /// The model every answer names (default: the model asked for).
    model: Option<String>,
    /// Streamed tool calls start with this text block (two content blocks in one answer:
    /// Claude Code writes a transcript line for each, with the same message id).
    preface: Option<String>,
}

/// Token usage one answer reports: input, output, cache creation, cache read.
pub type Usage = [u64; 4];

/// What every answer reports unless steered.
pub const DEFAULT_USAGE: Usage = [100, 20, 0, 0];

#[derive(Default)]
struct Inner {
    seen: Vec<Seen>,
    steer: Steer,
}

/// The running server; stops when dropped.
pub struct ModelServer {
    server: Arc<tiny_http::Server>,
    inner: Arc<Mutex<Inner>>,
    port: u16,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl ModelServer {
    /// Listen on a free loopback port.
    pub fn start() -> ModelServer {
        let server = Arc::new(tiny_http::Server::http("127.0.0.1:0").expect("bind the model server"));
        let port = server.server_addr().to_ip().expect("an IP listener").port();
        let inner = Arc::new(Mutex::new(Inner::default()));
        let (s, i) = (server.clone(), inner.clone());
        let thread = std::thread::spawn(move || {
            for req in s.incoming_requests() {
                let i = i.clone();
                // One thread per request: a held answer must not hold up the others.
                std::thread::spawn(move || handle(req, &i));
            }
        });
        ModelServer {
            server,
            inner,
            port,
            thread: Some(thread),
        }
    }

    /// `ANTHROPIC_BASE_URL` for Claude Code.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Every request so far.
    pub fn seen(&self) -> Vec<Seen> {
        self.inner.lock().unwrap().seen.clone()
    }

    /// The new turns `agent`'s model was given (its prompt, check-ins, messages), in order,
    /// each once: a turn retried after an API error is the same turn at the same place in
    /// the conversation, and counts at its first arrival.
    pub fn turns(&self, agent: &str) -> Vec<Seen> {
        let mut out: Vec<Seen> = Vec::new();
        for s in self.seen() {
            if !(s.main && s.new_turn && s.agent.as_deref() == Some(agent)) {
                continue;
            }
            if !out.iter().any(|o| o.turn_at == s.turn_at && o.said == s.said) {
                out.push(s);
            }
        }
        out
    }

    /// The new turns of `agent` in which the user said `text` (see [`Seen::said`]): the
    /// one way tests ask "did this text reach the model as a turn of its own", robust to
    /// system reminders before or after it, a turn split over several messages or text
    /// blocks, and retries.
    pub fn turns_saying(&self, agent: &str, text: &str) -> Vec<Seen> {
        self.turns(agent)
            .into_iter()
            .filter(|t| t.said.contains(text))
            .collect()
    }

    /// Whether `text` reached `agent`'s model as something the user said: a turn of its
    /// own, or a message Claude Code put into a running turn.
    pub fn reached(&self, agent: &str, text: &str) -> bool {
        self.seen()
            .iter()
            .any(|s| s.main && s.agent.as_deref() == Some(agent) && s.said.contains(text))
    }

    /// The messages `agent`'s model was given as the user's, over all its conversations
    /// (a rotated or restarted PM has several): each conversation as its latest main
    /// request carried it, so a retried request or a resumed conversation counts nothing
    /// twice. Prompts of their own and messages queued while a turn ran that Claude Code
    /// put into it at a tool call ([`INJECTED`]) alike: both reached the model.
    pub fn given(&self, agent: &str) -> Vec<String> {
        latest_per_conversation(&self.seen(), agent)
            .into_iter()
            .flat_map(|s| s.prompts)
            .collect()
    }

    /// How many messages of `agent`'s conversation, as its latest main request carried it,
    /// gave it `text` as the user's (a prompt of its own, or one put into a running turn).
    pub fn received(&self, agent: &str, text: &str) -> usize {
        self.seen()
            .iter()
            .rev()
            .find(|s| s.main && s.agent.as_deref() == Some(agent))
            .map_or(0, |s| s.prompts.iter().filter(|p| p.contains(text)).count())
    }

    /// Hold the next `count` main answers to `agent` for `d` (the agent stays busy).
    pub fn hold(&self, agent: &str, d: Duration, count: usize) {
        self.inner.lock().unwrap().steer.hold.insert(agent.into(), (d, count));
    }

    /// Hold `agent`'s answer that starts with `prefix` (as in [`Seen::answer`]) until `until`
    /// returns true (at most 3 min): the agent is provably busy until something has happened.
    pub fn hold_until(&self, agent: &str, prefix: &str, until: impl Fn() -> bool + Send + Sync + 'static) {
        self.inner
            .lock()
            .unwrap()
            .steer
            .hold_until
            .insert(agent.into(), (prefix.into(), Arc::new(until)));
    }

    /// Whether the hold set by [`ModelServer::hold_until`] for `agent` has been taken: an
    /// answer of the agent's is being held now (or was).
    pub fn hold_taken(&self, agent: &str) -> bool {
        !self.inner.lock().unwrap().steer.hold_until.contains_key(agent)
    }

    /// Answer `agent`'s next main request with the subscription usage limit, resetting at `reset`.
    pub fn limit_next(&self, agent: &str, reset: SystemTime) {
        self.inner.lock().unwrap().steer.limit.insert(agent.into(), reset);
    }

    /// Report `usage` in every main answer to `agent` (known numbers for cost tests).
    pub fn usage_for(&self, agent: &str, usage: Usage) {
        self.inner.lock().unwrap().steer.usage.insert(agent.into(), usage);
    }

    /// Report `per_message` input tokens for every message of `agent`'s conversation in
    /// each main answer: its context fills as the conversation grows.
    pub fn usage_grows(&self, agent: &str, per_message: u64) {
        self.inner
            .lock()
            .unwrap()
            .steer
            .per_message
            .insert(agent.into(), per_message);
    }

    /// `agent`'s first conversation reports `tokens` of input in every answer and does not
    /// hand off by itself; a conversation continued from a checkpoint is an ordinary one.
    pub fn full_first(&self, agent: &str, tokens: u64) {
        self.inner.lock().unwrap().steer.full_first.insert(agent.into(), tokens);
    }

    /// The review rejects the work `n` times before it approves: the PM sends dev back
    /// each time (a long run's loop).
    pub fn reject_reviews(&self, n: usize) {
        self.inner.lock().unwrap().steer.rejections = n;
    }

    /// Have `agent` report progress `n` times (IN_PROGRESS handoffs) before each final
    /// handoff, as a spoke on a long step does.
    pub fn progress_reports(&self, agent: &str, n: usize) {
        self.inner.lock().unwrap().steer.progress.insert(agent.into(), n);
    }

    /// `agent` answers a checkpoint request without writing one.
    pub fn no_checkpoint(&self, agent: &str) {
        self.inner.lock().unwrap().steer.no_checkpoint.insert(agent.into());
    }

    /// Name `model` in every answer, whatever model was asked for.
    pub fn answer_as(&self, model: &str) {
        self.inner.lock().unwrap().steer.model = Some(model.into());
    }

    /// Start every streamed tool call with a text block saying `text`.
    pub fn preface_tools(&self, text: &str) {
        self.inner.lock().unwrap().steer.preface = Some(text.into());
    }

    /// Have `agent` write its handoff bodies `lines` long, the way the preambles teach for
    /// a long body: with Claude Code's Write tool into its scratchpad, then a short
    /// `task handoff … --body-file <file>`.
    pub fn long_bodies(&self, agent: &str, lines: usize) {
        self.inner.lock().unwrap().steer.long_body.insert(agent.into(), lines);
    }

    /// Have `agent` delegate in one compound command (`h=$(task handoff …) && task spawn …
    /// --handoff "$h"`), which Claude Code cannot analyse.
    pub fn compound_delegation(&self, agent: &str) {
        self.inner.lock().unwrap().steer.compound.insert(agent.into());
    }

    /// Have the PM leave permission requests unanswered (by default it allows each one its
    /// check-in names, with `task permit … allow`).
    pub fn silent_on_permits(&self) {
        self.inner.lock().unwrap().steer.silent_on_permits = true;
    }

    /// Have `agent` run `command` (one Bash call) before it hands off.
    pub fn ask_first(&self, agent: &str, command: &str) {
        self.inner
            .lock()
            .unwrap()
            .steer
            .ask_first
            .insert(agent.into(), command.into());
    }
}

impl Drop for ModelServer {
    fn drop(&mut self) {
        self.server.unblock();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The wire format a request arrived in, told by its path.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Wire {
    /// Anthropic Messages (`POST /v1/messages`): Claude Code.
    Anthropic,
    /// OpenAI Responses (`POST /v1/responses`): Codex CLI.
    OpenAi,
    /// Gemini API (`POST /v1beta/models/<model>:streamGenerateContent?alt=sse` or
    /// `:generateContent`): Gemini CLI.
    Gemini,
}

fn handle(mut req: tiny_http::Request, inner: &Mutex<Inner>) {
    let mut body = String::new();
    let _ = std::io::Read::read_to_string(req.as_reader(), &mut body);
    let path = req.url().to_string();
    let post = req.method() == &tiny_http::Method::Post;
    let wire = if post && path.starts_with("/v1/messages") {
        Wire::Anthropic
    } else if post && path.starts_with("/v1/responses") {
        Wire::OpenAi
    } else if post && (path.contains("generateContent") || path.contains("GenerateContent")) {
        Wire::Gemini
    } else if path.contains("/models") {
        // Codex lists the provider's models at start: none beyond the configured one.
        let _ = req.respond(json_response(200, &json!({"object": "list", "data": []})));
        return;
    } else {
        // Health checks and anything else the programs probe: an empty JSON object.
        let _ = req.respond(json_response(200, &json!({})));
        return;
    };
    let Ok(v) = serde_json::from_str::<Value>(&body) else {
        let _ = req.respond(json_response(
            400,
            &json!({"type": "error", "error": {"type": "invalid_request_error", "message": "not JSON"}}),
        ));
        return;
    };
    if path.starts_with("/v1/messages/count_tokens") {
        let _ = req.respond(json_response(200, &json!({"input_tokens": 100})));
        return;
    }
    // Every wire format is read into the Messages shape the script reads.
    let (v, stream) = match wire {
        Wire::Anthropic => {
            let stream = v["stream"].as_bool().unwrap_or(false);
            (v, stream)
        }
        Wire::OpenAi => (openai::to_messages(&v), true),
        Wire::Gemini => (gemini::to_messages(&v), path.contains("alt=sse")),
    };
    let main = v["tools"].as_array().is_some_and(|t| !t.is_empty());
    let msgs = v["messages"].as_array().cloned().unwrap_or_default();
    let agent = agent_of(&msgs);
    let turn = turn_of(&msgs);
    let prompts = prompts(&msgs);
    let arrived = SystemTime::now();
    let mut held = None;
    let mut until: Option<Until> = None;
    let mut limited = None;
    let reply = if main {
        let mut g = inner.lock().unwrap();
        if let Some(a) = &agent {
            if let Some((d, n)) = g.steer.hold.get_mut(a) {
                if *n > 0 {
                    *n -= 1;
                    held = Some(*d);
                }
            }
            limited = g.steer.limit.remove(a);
        }
        let ask = agent.as_ref().and_then(|a| g.steer.ask_first.get(a).cloned());
        let style = Style {
            ask_first: ask.as_deref(),
            long_body: agent.as_ref().and_then(|a| g.steer.long_body.get(a).copied()),
            compound: agent.as_ref().is_some_and(|a| g.steer.compound.contains(a)),
            permits: if g.steer.silent_on_permits { None } else { Some("allow") },
            progress: agent
                .as_ref()
                .and_then(|a| g.steer.progress.get(a).copied())
                .unwrap_or(0),
        };
        let reply = script(&msgs, &style).unwrap_or_else(|| Reply::Text("Understood.".into()));
        // A first conversation that is full reads rather than hands off.
        let first_full = agent.as_ref().is_some_and(|a| g.steer.full_first.contains_key(a)) && !continued(&msgs);
        match reply {
            Reply::Tool(c) if first_full && c.contains("task handoff") && !c.contains("IN_PROGRESS") => {
                Reply::Text("Reading the code first; I will hand off when done.".into())
            }
            Reply::Tool(c)
                if c.contains("--status IN_PROGRESS")
                    && agent
                        .as_ref()
                        .is_some_and(|a| g.steer.no_checkpoint.contains(a) && c.contains(&format!("--from {a} "))) =>
            {
                Reply::Text("The error path in writer.rs still leaks a handle; I am on it.".into())
            }
            Reply::Tool(c) if g.steer.rejections > 0 && c.contains("--from review") && c.contains("APPROVED") => {
                g.steer.rejections -= 1;
                Reply::Tool(
                    c.replace("**Verdict:** APPROVED", "**Verdict:** REJECTED")
                        .replace("The review step is done.", "Rejected: the fix misses the error path."),
                )
            }
            r => r,
        }
    } else {
        Reply::Text(match wire {
            // Gemini CLI's side calls (next speaker, routing) ask for JSON with these fields.
            Wire::Gemini => {
                "{\"reasoning\": \"scripted\", \"next_speaker\": \"user\", \"model_choice\": \"flash\"}".into()
            }
            Wire::OpenAi => "Scripted session".into(),
            Wire::Anthropic => "{\"title\": \"Scripted session\"}".into(),
        })
    };
    let answer = match (&limited, &reply) {
        (Some(_), _) => "429 usage limit".to_string(),
        (None, Reply::Tool(c)) => format!("tool: {}", c.lines().next().unwrap_or("")),
        (None, Reply::Text(t)) => format!("text: {t}"),
        (None, Reply::Write { path, .. }) => format!("write: {path}"),
        (None, Reply::Read { path }) => format!("read: {path}"),
    };
    if let Some(a) = agent.as_ref().filter(|_| main && limited.is_none()) {
        let mut g = inner.lock().unwrap();
        if g.steer
            .hold_until
            .get(a)
            .is_some_and(|(p, _)| answer.starts_with(p.as_str()))
        {
            until = g.steer.hold_until.remove(a).map(|(_, f)| f);
        }
    }
    if let Some(f) = until {
        let deadline = std::time::Instant::now() + Duration::from_secs(180);
        while !f() && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        held = Some(arrived.elapsed().unwrap_or_default());
    }
    inner.lock().unwrap().seen.push(Seen {
        at: arrived,
        main,
        agent: agent.clone(),
        last_user: turn.text,
        said: turn.said,
        turn_at: turn.at,
        new_turn: !turn.tool,
        answer,
        held,
        prompts,
        messages: msgs.clone(),
    });
    if let Some(reset) = limited {
        let _ = req.respond(usage_limit(reset));
        return;
    }
    if let Some(d) = held {
        std::thread::sleep(d);
    }
    let (model, usage, preface) = {
        let g = inner.lock().unwrap();
        let model = g.steer.model.clone();
        let preface = g.steer.preface.clone();
        let usage = agent
            .as_ref()
            .filter(|_| main)
            .and_then(|a| {
                g.steer
                    .per_message
                    .get(a)
                    .map(|k| [k * msgs.len() as u64, 20, 0, 0])
                    .or_else(|| {
                        g.steer
                            .full_first
                            .get(a)
                            .filter(|_| !continued(&msgs))
                            .map(|t| [*t, 20, 0, 0])
                    })
                    .or_else(|| g.steer.usage.get(a).copied())
            })
            .unwrap_or(DEFAULT_USAGE);
        (model, usage, preface)
    };
    let model = model.unwrap_or_else(|| v["model"].as_str().unwrap_or("claude-scripted").to_string());
    let _ = match wire {
        Wire::OpenAi => req.respond(openai::sse_response(&model, &reply)),
        Wire::Gemini if stream => req.respond(gemini::sse_response(&reply)),
        Wire::Gemini => req.respond(json_response(200, &gemini::response_json(&reply))),
        Wire::Anthropic if stream => req.respond(sse_response(&model, &reply, usage, preface.as_deref())),
        Wire::Anthropic => req.respond(json_response(200, &message_json(&model, &reply, usage))),
    };
}

/// What the scripted model says.
#[derive(Debug, Clone, PartialEq)]
enum Reply {
    Text(String),
    /// One Bash tool call with this command.
    Tool(String),
    /// One call of Claude Code's Write tool (a file written with the client's own file tool).
    Write {
        path: String,
        content: String,
    },
    /// One call of Claude Code's Read tool (a first prompt saved to a file).
    Read {
        path: String,
    },
}

impl Reply {
    /// The reply for a client whose only tool is a shell (Codex, Gemini): a Write becomes
    /// the shell command that writes the same file.
    fn shell(&self) -> Reply {
        match self {
            Reply::Write { path, content } => Reply::Tool(format!("cat > {path} <<'EOF'\n{content}EOF")),
            Reply::Read { path } => Reply::Tool(format!("cat {path}")),
            r => r.clone(),
        }
    }
}

/// The text of a message's content (string, or the text and tool_result blocks).
fn text_of(m: &Value) -> (String, bool) {
    match &m["content"] {
        Value::String(s) => (s.clone(), false),
        Value::Array(blocks) => {
            let mut out = String::new();
            let mut tool = false;
            for b in blocks {
                match b["type"].as_str() {
                    Some("text") => out.push_str(b["text"].as_str().unwrap_or("")),
                    Some("tool_result") => {
                        tool = true;
                        match &b["content"] {
                            Value::String(s) => out.push_str(s),
                            Value::Array(parts) => {
                                for p in parts {
                                    out.push_str(p["text"].as_str().unwrap_or(""));
                                }
                            }
                            _ => {}
                        }
                    }
                    _ => {}
                }
                out.push('\n');
            }
            (out, tool)
        }
        _ => (String::new(), false),
    }
}

fn users(msgs: &[Value]) -> impl Iterator<Item = (String, bool)> + '_ {
    msgs.iter().filter(|m| m["role"] == "user").map(text_of)
}

/// `agent`'s latest main request in each of its conversations (told apart by their first
/// message), in the order the conversations began.
fn latest_per_conversation(seen: &[Seen], agent: &str) -> Vec<Seen> {
    let mut out: Vec<(String, Seen)> = Vec::new();
    for s in seen.iter().filter(|s| s.main && s.agent.as_deref() == Some(agent)) {
        let first = s.messages.first().map(|m| text_of(m).0).unwrap_or_default();
        match out.iter_mut().find(|(f, _)| *f == first) {
            Some((_, latest)) => *latest = s.clone(),
            None => out.push((first, s.clone())),
        }
    }
    out.into_iter().map(|(_, s)| s).collect()
}

fn prompts(msgs: &[Value]) -> Vec<String> {
    msgs.iter()
        .filter_map(|m| {
            let (text, tool) = text_of(m);
            match m["role"].as_str() {
                Some("user") if !tool => Some(text),
                // Claude Code 2.1.332 hands a queued message over beside a tool's result,
                // in the same user message.
                Some("user") => injected(&text),
                Some("system") if text.trim_start().starts_with(INJECTED) => Some(text),
                _ => None,
            }
        })
        .collect()
}

/// The message queued while a turn ran that `text` hands over ([`INJECTED`] to the end of
/// its reminder block), if any.
fn injected(text: &str) -> Option<String> {
    let from = &text[text.find(INJECTED)?..];
    let end = from.find("</system-reminder>").unwrap_or(from.len());
    Some(from[..end].to_string())
}

fn agent_of(msgs: &[Value]) -> Option<String> {
    users(msgs).find_map(|(t, _)| field(&t, "# Agent: "))
}

/// The turn a request carries, as [`Seen`] records it.
#[derive(Debug, Default, PartialEq)]
struct Turn {
    text: String,
    said: String,
    at: usize,
    tool: bool,
}

/// Read the turn a request carries: every message after the conversation's last assistant
/// message. Claude Code does not always send a turn as one user message with one text
/// block: it adds `<system-reminder>` blocks (the date, context) before or after what was
/// typed, in the same message or in one of their own, and a message typed after a failed
/// request joins the user message that failed.
fn turn_of(msgs: &[Value]) -> Turn {
    let at = msgs.iter().rposition(|m| m["role"] == "assistant").map_or(0, |i| i + 1);
    let mut turn = Turn { at, ..Turn::default() };
    for m in &msgs[at..] {
        let (text, tool) = text_of(m);
        turn.tool |= tool;
        turn.text.push_str(&without_reminders(&text));
        match m["role"].as_str() {
            Some("user") => {
                for b in user_texts(m) {
                    turn.said.push_str(&without_reminders(&b));
                    turn.said.push('\n');
                }
            }
            Some("system") if text.trim_start().starts_with(INJECTED) => turn.said.push_str(&text),
            _ => {}
        }
    }
    turn
}

/// The text a user message carries as text (a string, or its text blocks), tool results left out.
fn user_texts(m: &Value) -> Vec<String> {
    match &m["content"] {
        Value::String(s) => vec![s.clone()],
        Value::Array(blocks) => blocks
            .iter()
            .filter(|b| b["type"] == "text")
            .filter_map(|b| b["text"].as_str().map(str::to_string))
            .collect(),
        _ => Vec::new(),
    }
}

/// `text` with every `<system-reminder>…</system-reminder>` block taken out, except one
/// that hands over a message queued while a turn ran (see [`INJECTED`]): that is the user's.
fn without_reminders(text: &str) -> String {
    const OPEN: &str = "<system-reminder>";
    const CLOSE: &str = "</system-reminder>";
    let mut out = String::new();
    let mut rest = text;
    while let Some(i) = rest.find(OPEN) {
        out.push_str(&rest[..i]);
        let block = &rest[i..];
        let end = block.find(CLOSE).map_or(block.len(), |j| j + CLOSE.len());
        if block[..end].contains(INJECTED) {
            out.push_str(&block[..end]);
        }
        rest = &block[end..];
    }
    out.push_str(rest);
    out
}

/// The rest of the first line starting with `prefix` (anywhere in `text`, a file as
/// Claude Code's Read tool shows it included).
fn field(text: &str, prefix: &str) -> Option<String> {
    text.lines()
        .find_map(|l| unnumbered(l).trim_start().strip_prefix(prefix))
        .map(|v| v.trim().to_string())
}

/// A line of a file as Claude Code's Read tool shows it (`     7\t…` or `     7→…`),
/// without its number.
fn unnumbered(line: &str) -> &str {
    let t = line.trim_start();
    let rest = t.trim_start_matches(|c: char| c.is_ascii_digit());
    if rest.len() == t.len() {
        return line;
    }
    rest.strip_prefix('\t')
        .or_else(|| rest.strip_prefix('→'))
        .unwrap_or(line)
}

/// The file a long first prompt was saved to, when the agent was told to read it
/// (the runtime's `file_prompt`: "Read the file <path> now and follow…").
fn file_prompt(text: &str) -> Option<String> {
    let text = without_reminders(text);
    let path = text.trim().strip_prefix("Read the file ")?.split_whitespace().next()?;
    Some(path.to_string())
}

/// The user messages with a file prompt taken as the file it names: a prompt followed by
/// the Read tool's result becomes that file's text (the result is consumed), so a preamble
/// read from a file is an instruction like one given inline. `Err(path)`: the file was not
/// read yet.
fn with_files_read(us: Vec<(String, bool)>) -> Result<Vec<(String, bool)>, String> {
    let mut out: Vec<(String, bool)> = Vec::new();
    let mut it = us.into_iter().peekable();
    while let Some((t, tool)) = it.next() {
        match file_prompt(&t).filter(|_| !tool) {
            Some(path) => match it.next_if(|(_, tool)| *tool) {
                Some((file, _)) => {
                    let text: Vec<&str> = file.lines().map(unnumbered).collect();
                    out.push((text.join("\n"), false));
                }
                None if it.peek().is_none() => return Err(path),
                None => out.push((t, tool)),
            },
            None => out.push((t, tool)),
        }
    }
    Ok(out)
}

/// Whether a conversation was started by the supervisor to continue a spoke's work.
fn continued(msgs: &[Value]) -> bool {
    let all = serde_json::to_string(msgs).unwrap_or_default();
    all.contains("## Continue from your checkpoint") || all.contains("## Continue where your previous session stopped")
}

/// What the agent has been asked to do: the last preamble or check-in it was given.
#[derive(Debug, Clone, PartialEq)]
enum Intent {
    /// The PM delegates to this agent, or (None) declares the task complete.
    Delegate { task: String, to: Option<String> },
    /// The PM has nothing to act on.
    Wait,
    /// A spoke hands off.
    HandOff { task: String, agent: String },
    /// A spoke asked for a checkpoint writes one (IN_PROGRESS).
    Checkpoint { task: String, agent: String },
}

fn intent_of(text: &str, task_hint: &str) -> Option<Intent> {
    if text.contains("write a checkpoint handoff now") {
        let task = text
            .split("task handoff ")
            .nth(1)?
            .split_whitespace()
            .next()?
            .to_string();
        let agent = text.split("--from ").nth(1)?.split_whitespace().next()?.to_string();
        return Some(Intent::Checkpoint { task, agent });
    }
    if text.contains("Check-in for task") {
        let task = text
            .split("Check-in for task ")
            .nth(1)
            .and_then(|r| r.split_whitespace().next())
            .unwrap_or(task_hint)
            .to_string();
        // The furthest spoke along the route that reported in this check-in.
        // A checkpoint (IN_PROGRESS) is not a finished step.
        let reported: Vec<&str> = text
            .lines()
            .filter_map(|l| l.trim_start().strip_prefix("- "))
            .filter(|l| !l.contains(".md: IN_PROGRESS"))
            .filter_map(|l| l.split_once(".md: ").map(|(f, _)| f))
            .filter_map(handoff_agent)
            .collect();
        let last = ROUTE.iter().rposition(|r| reported.contains(r));
        // A spoke that died is started again with the same step.
        let died = text
            .lines()
            .filter_map(|l| l.trim_start().strip_prefix("- blocked: "))
            .find_map(|l| l.split_once(" — agent died").map(|(a, _)| a.to_string()));
        if let Some(agent) = died {
            return Some(Intent::Delegate { task, to: Some(agent) });
        }
        // A rejected review sends the work back to dev.
        if text.contains("review rejected") {
            return Some(Intent::Delegate {
                task,
                to: Some("dev".into()),
            });
        }
        return Some(match last {
            None => Intent::Wait,
            Some(i) => Intent::Delegate {
                task,
                to: ROUTE.get(i + 1).map(|s| s.to_string()),
            },
        });
    }
    let agent = field(text, "# Agent: ")?;
    let task = field(text, "**Task:** ")?;
    // A PM taking over from a rotated conversation goes on from the last handoffs listed.
    if agent == "pm" && text.contains("## You are taking over") {
        let listed = text
            .split("### Each agent's last handoff")
            .nth(1)
            .and_then(|r| r.split("\n### ").next())
            .unwrap_or("");
        let reported: Vec<&str> = listed
            .lines()
            .filter_map(|l| l.trim_start().strip_prefix("- "))
            .filter_map(|l| l.split_once(": ").map(|(a, _)| a))
            .collect();
        let rejected = listed
            .lines()
            .any(|l| l.contains("- review:") && l.contains("Rejected:"));
        let next = match ROUTE.iter().rposition(|r| reported.contains(r)) {
            None => Some(ROUTE[0].to_string()),
            Some(_) if rejected => Some("dev".to_string()),
            Some(i) => ROUTE.get(i + 1).map(|s| s.to_string()),
        };
        // While any spoke is still running its step, the last handoffs listed are not the
        // whole story: that spoke's handoff will decide what comes next, so the PM waits for
        // it (acting now on an older rejection would start dev beside a running review).
        let running = ROUTE.iter().any(|a| text.contains(&format!("- {a}: running since")));
        return Some(if running {
            Intent::Wait
        } else {
            Intent::Delegate { task, to: next }
        });
    }
    Some(if agent == "pm" {
        Intent::Delegate {
            task,
            to: Some(ROUTE[0].into()),
        }
    } else {
        Intent::HandOff { task, agent }
    })
}

/// The task folder, from the first path in the conversation that names it (the preambles
/// give it: `<dir>/tasks/<task>/task.md`).
fn task_dir_of(us: &[(String, bool)], task: &str) -> Option<String> {
    let needle = format!("/tasks/{task}/");
    us.iter().find_map(|(t, _)| {
        t.split(|c: char| c.is_whitespace() || c == '`')
            .find_map(|w| w.find(&needle).map(|i| w[..i + needle.len() - 1].to_string()))
            .filter(|d| d.starts_with('/'))
    })
}

/// The agent of a handoff file stem (`<agent>-<YYYYMMDD>-<HHMMSS>[-N]`).
fn handoff_agent(stem: &str) -> Option<&str> {
    let at = stem.match_indices('-').map(|(i, _)| i).find(|&i| {
        stem[i + 1..]
            .split('-')
            .next()
            .is_some_and(|d| d.len() == 8 && d.bytes().all(|b| b.is_ascii_digit()))
    })?;
    Some(&stem[..at])
}

/// Decide the next answer from the conversation alone.
/// The ids of the permission requests a check-in names (`request p-1a2b3c4d:`).
fn permit_ids(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for (i, _) in text.match_indices("request p-") {
        let id: String = text[i + "request ".len()..].chars().take(10).collect();
        if id.len() == 10 && id[2..].chars().all(|c| c.is_ascii_hexdigit()) && !out.contains(&id) {
            out.push(id);
        }
    }
    out
}

/// How one agent's answers are steered (see the [`ModelServer`] methods that set each).
#[derive(Debug, Clone, Copy)]
struct Style<'a> {
    /// A command to run before the handoff.
    ask_first: Option<&'a str>,
    /// Handoff bodies this many lines long, written to a file first.
    long_body: Option<usize>,
    /// Delegate in one compound command.
    compound: bool,
    /// The answer given to the permission requests a check-in names (None: left unanswered).
    permits: Option<&'a str>,
    /// IN_PROGRESS reports written before a spoke's final handoff, in the same turn.
    progress: usize,
}

impl Default for Style<'_> {
    fn default() -> Self {
        Style {
            ask_first: None,
            long_body: None,
            compound: false,
            permits: Some("allow"),
            progress: 0,
        }
    }
}

fn script(msgs: &[Value], style: &Style) -> Option<Reply> {
    let Style {
        ask_first,
        long_body,
        compound,
        permits,
        progress,
    } = *style;
    let us = match with_files_read(users(msgs).collect()) {
        Ok(us) => us,
        Err(path) => return Some(Reply::Read { path }),
    };
    let task_hint = us.iter().find_map(|(t, _)| field(t, "**Task:** ")).unwrap_or_default();
    // The last instruction, and the tool results that came after it.
    let at = us
        .iter()
        .rposition(|(t, tool)| !tool && intent_of(t, &task_hint).is_some())?;
    let intent = intent_of(&us[at].0, &task_hint)?;
    let results: Vec<&String> = us[at + 1..].iter().filter(|(_, tool)| *tool).map(|(t, _)| t).collect();
    let mut steps: Vec<Step> = Vec::new();
    if let Some(c) = ask_first {
        steps.push(Step::Run(c.to_string()));
    }
    // A check-in naming permission requests: the PM allows each first (unless steered not to).
    if let (Some(answer), Intent::Delegate { .. } | Intent::Wait) = (permits, &intent) {
        for id in permit_ids(&us[at].0) {
            steps.push(Step::Run(format!("task permit {task_hint} {id} {answer}")));
        }
    }
    match &intent {
        Intent::Checkpoint { task, agent } => {
            steps.push(Step::Run(format!(
                "task handoff {task} --from {agent} --status IN_PROGRESS --body-file - <<'EOF'\n## Completed Work\nRead the code; the fix is half written.\n## Next Steps\nFinish the fix, then hand off for review.\nEOF"
            )));
            steps.push(Step::Say("Checkpoint written.".into()));
        }
        Intent::Wait => steps.push(Step::Say(
            "Nothing to act on yet; waiting for the next check-in.".into(),
        )),
        Intent::HandOff { task, agent } => {
            for i in 1..=progress {
                steps.push(Step::Run(format!(
                    "task handoff {task} --from {agent} --status IN_PROGRESS --body-file - <<'EOF'\n## Completed Work\nPart {i} of the {agent} step is done.\n## Next Steps\nThe rest of the step.\nEOF"
                )));
            }
            let (mut status, next, mut body) = spoke_report(agent);
            // Told that its first command was denied and to hand off BLOCKED: it does.
            let denied = ask_first
                .and(results.first())
                .filter(|r| r.contains("hand off BLOCKED"));
            if let Some(why) = denied {
                status = "BLOCKED";
                body = format!(
                    "## Blockers\nMy command was refused: {}\n",
                    why.lines().next().unwrap_or("")
                );
            }
            let next = next.map(|n| format!(" --next {n}")).unwrap_or_default();
            steps.push(Step::Run(format!(
                "task handoff {task} --from {agent} --status {status}{next} --body-file - <<'EOF'\n{body}EOF"
            )));
            steps.push(Step::Say(format!("Handed off ({status}).")));
        }
        Intent::Delegate { task, to: Some(to) } => {
            let body = format!(
                "## Instructions\nDo the {to} step of the task.\n## Success Criteria\nA handoff that says what was done.\n"
            );
            let head = format!("task handoff {task} --from pm --target {to} --status IN_PROGRESS --body-file");
            match (long_body, task_dir_of(&us, task)) {
                _ if compound => {
                    steps.push(Step::Run(format!(
                        "h=$({head} - <<'EOF'\n{body}EOF\n) && task spawn {task} {to} --handoff \"$h\""
                    )));
                    steps.push(Step::Say(format!("Started {to}; waiting for its handoff.")));
                }
                (Some(lines), Some(dir)) => {
                    let path = format!("{dir}/scratchpad/pm/{to}-instructions.md");
                    let detail: String = (1..=lines)
                        .map(|i| {
                            format!(
                                "- detail {i}: check `src/{to}.rs` line {i}, keep \"quotes\" and $VARS as they are\n"
                            )
                        })
                        .collect();
                    steps.push(Step::Write {
                        path: path.clone(),
                        content: format!("{body}## Context\n{detail}"),
                    });
                    steps.push(Step::Run(format!("{head} {path}")));
                }
                _ => steps.push(Step::Run(format!("{head} - <<'EOF'\n{body}EOF"))),
            }
            if !compound {
                steps.push(Step::Spawn {
                    task: task.clone(),
                    to: to.clone(),
                });
                steps.push(Step::Say(format!("Started {to}; waiting for its handoff.")));
            }
        }
        Intent::Delegate { task, to: None } => {
            steps.push(Step::Run(format!(
                "task handoff {task} --from pm --status COMPLETE --body-file - <<'EOF'\n## Completed Work\nEvery success criterion is met: explore, plan, dev and review all reported.\nEOF"
            )));
            steps.push(Step::Say("The task is complete.".into()));
        }
    }
    let step = steps.get(results.len()).or(steps.last())?;
    Some(match step {
        Step::Run(c) => Reply::Tool(c.clone()),
        Step::Write { path, content } => Reply::Write {
            path: path.clone(),
            content: content.clone(),
        },
        Step::Say(t) => Reply::Text(t.clone()),
        Step::Spawn { task, to } => {
            let printed = results.last()?;
            let path = printed
                .split_whitespace()
                .find(|w| w.contains("/handoffs/pm-") && w.ends_with(".md"))?;
            Reply::Tool(format!("task spawn {task} {to} --handoff {path}"))
        }
    })
}

enum Step {
    Run(String),
    Write { path: String, content: String },
    Spawn { task: String, to: String },
    Say(String),
}

/// A spoke's report: status, recommended next, body.
fn spoke_report(agent: &str) -> (&'static str, Option<&'static str>, String) {
    let next = ROUTE
        .iter()
        .position(|r| *r == agent)
        .and_then(|i| ROUTE.get(i + 1).copied());
    let status = if agent == "dev" { "NEEDS_REVIEW" } else { "COMPLETE" };
    let verdict = if agent == "review" {
        "**Verdict:** APPROVED\n"
    } else {
        ""
    };
    let body = format!(
        "{verdict}## Completed Work\nThe {agent} step is done.\n## Artifacts Generated\nNone\n## Blockers\nNone\n"
    );
    (status, next, body)
}

fn now_secs() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs()
}

fn json_response(code: u16, v: &Value) -> tiny_http::Response<std::io::Cursor<Vec<u8>>> {
    tiny_http::Response::from_data(v.to_string().into_bytes())
        .with_status_code(code)
        .with_header(header("content-type", "application/json"))
        .with_header(header("request-id", &format!("req_{}", now_secs())))
}

fn header(k: &str, v: &str) -> tiny_http::Header {
    tiny_http::Header::from_bytes(k.as_bytes(), v.as_bytes()).expect("a valid header")
}

/// The API's answer when a subscription's usage limit is reached (the unified rate-limit
/// headers are what make Claude Code show "You've hit your session limit · resets …").
fn usage_limit(reset: SystemTime) -> tiny_http::Response<std::io::Cursor<Vec<u8>>> {
    let reset = reset.duration_since(UNIX_EPOCH).unwrap().as_secs().to_string();
    json_response(
        429,
        &json!({"type": "error", "error": {"type": "rate_limit_error", "message": "Usage limit reached."}}),
    )
    .with_header(header("x-should-retry", "false"))
    .with_header(header("anthropic-ratelimit-unified-status", "rejected"))
    .with_header(header("anthropic-ratelimit-unified-reset", &reset))
    .with_header(header("anthropic-ratelimit-unified-representative-claim", "five_hour"))
    .with_header(header("anthropic-ratelimit-unified-5h-status", "rejected"))
    .with_header(header("anthropic-ratelimit-unified-5h-reset", &reset))
}

fn content(reply: &Reply) -> Value {
    match reply {
        Reply::Text(t) => json!([{"type": "text", "text": t}]),
        Reply::Tool(c) => json!([{
            "type": "tool_use",
            "id": format!("toolu_{}", uuid_ish()),
            "name": "Bash",
            "input": {"command": c, "description": "Run the protocol command"},
        }]),
        Reply::Write { path, content } => json!([{
            "type": "tool_use",
            "id": format!("toolu_{}", uuid_ish()),
            "name": "Write",
            "input": {"file_path": path, "content": content},
        }]),
        Reply::Read { path } => json!([{
            "type": "tool_use",
            "id": format!("toolu_{}", uuid_ish()),
            "name": "Read",
            "input": {"file_path": path},
        }]),
    }
}

fn stop_reason(reply: &Reply) -> &'static str {
    match reply {
        Reply::Text(_) => "end_turn",
        Reply::Tool(_) | Reply::Write { .. } | Reply::Read { .. } => "tool_use",
    }
}

fn uuid_ish() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(1);
    format!("{:016x}{:08x}", now_secs(), N.fetch_add(1, Ordering::Relaxed))
}

/// Input and output tokens reported for every answer.
fn usage_tokens() -> (u64, u64) {
    (100, 20)
}

/// The usage as the API reports it; `output` is what message_start says (the API sends 1
/// there, and the final count in message_delta).
fn usage(u: Usage, output: u64) -> Value {
    json!({"input_tokens": u[0], "output_tokens": output, "cache_creation_input_tokens": u[2], "cache_read_input_tokens": u[3]})
}

fn message_json(model: &str, reply: &Reply, u: Usage) -> Value {
    json!({
        "id": format!("msg_{}", uuid_ish()),
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content(reply),
        "stop_reason": stop_reason(reply),
        "stop_sequence": null,
        "usage": usage(u, u[1]),
    })
}

fn sse_response(
    model: &str,
    reply: &Reply,
    u: Usage,
    preface: Option<&str>,
) -> tiny_http::Response<std::io::Cursor<Vec<u8>>> {
    let mut out = String::new();
    let mut ev = |name: &str, data: Value| {
        out.push_str(&format!("event: {name}\ndata: {data}\n\n"));
    };
    ev(
        "message_start",
        json!({"type": "message_start", "message": {
            "id": format!("msg_{}", uuid_ish()), "type": "message", "role": "assistant", "model": model,
            "content": [], "stop_reason": null, "stop_sequence": null, "usage": usage(u, 1)}}),
    );
    match reply {
        Reply::Text(t) => {
            ev(
                "content_block_start",
                json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
            );
            ev(
                "content_block_delta",
                json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": t}}),
            );
        }
        Reply::Tool(_) | Reply::Write { .. } | Reply::Read { .. } => {
            let mut index = 0;
            if let Some(t) = preface {
                ev(
                    "content_block_start",
                    json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
                );
                ev(
                    "content_block_delta",
                    json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": t}}),
                );
                ev("content_block_stop", json!({"type": "content_block_stop", "index": 0}));
                index = 1;
            }
            let block = &content(reply)[0];
            ev(
                "content_block_start",
                json!({"type": "content_block_start", "index": index, "content_block": {
                    "type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}}),
            );
            ev(
                "content_block_delta",
                json!({"type": "content_block_delta", "index": index, "delta": {
                    "type": "input_json_delta", "partial_json": block["input"].to_string()}}),
            );
            ev(
                "content_block_stop",
                json!({"type": "content_block_stop", "index": index}),
            );
        }
    }
    if matches!(reply, Reply::Text(_)) {
        ev("content_block_stop", json!({"type": "content_block_stop", "index": 0}));
    }
    ev(
        "message_delta",
        json!({"type": "message_delta", "delta": {"stop_reason": stop_reason(reply), "stop_sequence": null}, "usage": {"output_tokens": u[1]}}),
    );
    ev("message_stop", json!({"type": "message_stop"}));
    tiny_http::Response::from_data(out.into_bytes())
        .with_header(header("content-type", "text/event-stream"))
        .with_header(header("cache-control", "no-cache"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(t: &str) -> Value {
        json!({"role": "user", "content": [{"type": "text", "text": t}]})
    }
    fn result(t: &str) -> Value {
        json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "x", "content": t}]})
    }
    fn assistant() -> Value {
        json!({"role": "assistant", "content": [{"type": "text", "text": "ok"}]})
    }

    #[test]
    fn the_pm_delegates_along_the_route_then_completes() {
        let pre = user("# Agent: pm\n**Task:** t1\n...");
        let r = script(std::slice::from_ref(&pre), &Style::default()).unwrap();
        assert!(matches!(&r, Reply::Tool(c) if c.starts_with("task handoff t1 --from pm --target explore")));
        let msgs = [
            pre.clone(),
            assistant(),
            result("/p/tasks/t1/handoffs/pm-20251127-090000.md\n"),
        ];
        assert_eq!(
            script(&msgs, &Style::default()).unwrap(),
            Reply::Tool("task spawn t1 explore --handoff /p/tasks/t1/handoffs/pm-20251127-090000.md".into())
        );
        let ci = user(
            "Check-in for task t1 (09:10) — phase EXPLORING.\nNew handoffs (1):\n- explore-20251127-091000.md: COMPLETE — done (recommends plan)\n",
        );
        let msgs = [pre.clone(), assistant(), ci];
        assert!(matches!(script(&msgs, &Style::default()).unwrap(), Reply::Tool(c) if c.contains("--target plan")));
        let ci = user(
            "Check-in for task t1 (09:10) — phase REVIEW.\nNew handoffs (1):\n- review-20251127-091000-2.md: COMPLETE — ok\n",
        );
        assert!(
            matches!(script(&[pre, assistant(), ci], &Style::default()).unwrap(), Reply::Tool(c) if c.contains("--status COMPLETE"))
        );
    }

    #[test]
    fn a_pm_taking_over_waits_while_any_spoke_runs_then_acts_on_the_last_handoffs() {
        let takeover = |agents_now: &str| {
            format!(
                "# Agent: pm\n**Task:** t1\n\n## You are taking over\nPhase: REVIEW\n\n### Agents now\n{agents_now}\n\n### Each agent's last handoff\n- dev: dev-20251127-090000.md COMPLETE, next: review — done\n- review: review-20251127-085000.md COMPLETE — Rejected: the tests fail\n\n### Waiting on you or a human\n- none\n"
            )
        };
        // The told rejection is older than the review now running: its handoff decides.
        let r = intent_of(
            &takeover("- review: running since 09:01 on pm-20251127-090100.md"),
            "t1",
        );
        assert_eq!(r, Some(Intent::Wait));
        // Nothing running: the rejection sends dev again.
        let r = intent_of(&takeover("- none"), "t1");
        assert_eq!(
            r,
            Some(Intent::Delegate {
                task: "t1".into(),
                to: Some("dev".into())
            })
        );
    }

    #[test]
    fn a_spoke_hands_off_once_and_a_late_message_changes_nothing() {
        let pre = user("# Agent: dev\n**Task:** t1\n");
        let asking = Style {
            ask_first: Some("sh -c true"),
            ..Style::default()
        };
        let r = script(std::slice::from_ref(&pre), &asking).unwrap();
        assert_eq!(r, Reply::Tool("sh -c true".into()));
        let msgs = [pre.clone(), assistant(), result("")];
        assert!(
            matches!(script(&msgs, &asking).unwrap(), Reply::Tool(c) if c.contains("--status NEEDS_REVIEW --next review"))
        );
        assert_eq!(handoff_agent("review-20251127-091000-2"), Some("review"));
        assert_eq!(handoff_agent("my-agent-20251127-091000"), Some("my-agent"));
        let msgs = [pre, assistant(), result("/x.md"), assistant(), user("continue")];
        assert!(matches!(script(&msgs, &Style::default()).unwrap(), Reply::Text(_)));
    }

    #[test]
    fn a_spoke_reports_progress_first_and_a_dead_spoke_is_sent_again() {
        let pre = user("# Agent: dev\n**Task:** t1\n");
        let twice = Style {
            progress: 2,
            ..Style::default()
        };
        let mut msgs = vec![pre];
        for status in ["IN_PROGRESS", "IN_PROGRESS", "NEEDS_REVIEW"] {
            let r = script(&msgs, &twice).unwrap();
            assert!(
                matches!(&r, Reply::Tool(c) if c.contains(&format!("--status {status}"))),
                "{r:?}"
            );
            msgs.extend([assistant(), result("/p/tasks/t1/handoffs/dev-20251127-090000.md")]);
        }
        let pm = user("# Agent: pm\n**Task:** t1\n");
        let ci = user(
            "Check-in for task t1 (09:10) — phase DEV.\nSignals:\n- blocked: dev — agent died: it was killed by signal 9; restart it with `task spawn` or reassign the work\n",
        );
        assert!(
            matches!(script(&[pm, assistant(), ci], &Style::default()).unwrap(), Reply::Tool(c) if c.contains("--target dev"))
        );
    }

    const DATE: &str = "<system-reminder>\n# currentDate\nToday's date is 2026-11-26.\n</system-reminder>\n";

    #[test]
    fn what_the_user_said_survives_reminders_split_turns_and_tool_results() {
        let pre = "# Agent: explore\n**Task:** t1\n";
        let cont = "The usage limit has reset: continue where you left off.";
        // As Claude Code 2.1.197 sent the resume after a 429: one user message, a reminder
        // block first, the failed prompt, then the typed text.
        let merged = json!({"role": "user", "content": [
            {"type": "text", "text": DATE}, {"type": "text", "text": pre}, {"type": "text", "text": cont}]});
        let t = turn_of(std::slice::from_ref(&merged));
        assert!(t.said.contains(cont) && t.said.contains("# Agent: explore"), "{t:?}");
        assert!(!t.said.contains("currentDate") && !t.tool && t.at == 0, "{t:?}");
        // The reminder after the text, in a message of its own, and a plain string content.
        let msgs = [
            user(pre),
            assistant(),
            json!({"role": "user", "content": cont}),
            user(DATE),
        ];
        let t = turn_of(&msgs);
        assert_eq!((t.said.trim(), t.at, t.tool), (cont, 2, false));
        // A reminder inside the text block, before and after.
        let t = turn_of(&[user(&format!("{DATE}{cont}\n{DATE}"))]);
        assert_eq!(t.said.trim(), cont);
        // A tool result is not something the user said, but it is the turn's text.
        let t = turn_of(&[user(pre), assistant(), result("SPAWN_OK"), user(DATE)]);
        assert!(
            t.tool && t.said.trim().is_empty() && t.text.contains("SPAWN_OK"),
            "{t:?}"
        );
        // A message queued while busy comes as a reminder of its own: kept.
        let queued = format!("<system-reminder>{INJECTED} hello</system-reminder>");
        let t = turn_of(&[user(pre), assistant(), result("ok"), user(&queued)]);
        assert!(t.said.contains("hello"), "{t:?}");
        // Beside a tool's result (Claude Code 2.1.332): a prompt of its own, the result not in it.
        let beside = json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t1", "content": "SPAWN_OK"},
            {"type": "text", "text": queued},
        ]});
        let p = prompts(&[user(pre), assistant(), beside, assistant()]);
        assert_eq!(p.len(), 2, "{p:?}");
        assert!(p[1].contains("hello") && !p[1].contains("SPAWN_OK"), "{p:?}");
        assert!(prompts(&[user(pre), assistant(), result("ok")]).len() == 1);
        // An unclosed reminder hides the rest rather than leaking it.
        assert_eq!(without_reminders("a<system-reminder>b"), "a");
    }

    /// What a long run counts a check-in by: it reached the model once whether it came as
    /// a turn of its own or was put into a running turn at a tool call (no new turn then),
    /// a retried request adds nothing, and a rotated PM's new conversation is counted too.
    #[test]
    fn what_the_model_was_given_counts_queued_messages_once_over_every_conversation() {
        let seen = |msgs: Vec<Value>| Seen {
            at: SystemTime::now(),
            main: true,
            agent: Some("pm".into()),
            last_user: String::new(),
            said: String::new(),
            turn_at: 0,
            new_turn: false,
            answer: String::new(),
            held: None,
            prompts: prompts(&msgs),
            messages: msgs,
        };
        let pre = "# Agent: pm\nfirst conversation";
        let queued = format!("<system-reminder>{INJECTED} Check-in for task t: dev-1.md</system-reminder>");
        let first = vec![user(pre), assistant(), result("SPAWN_OK")];
        let injected = vec![user(pre), assistant(), result("SPAWN_OK"), user(&queued)];
        let later = vec![
            user(pre),
            assistant(),
            result("SPAWN_OK"),
            user(&queued),
            assistant(),
            user("Check-in for task t: dev-2.md"),
        ];
        let rotated = vec![
            user("# Agent: pm\nresumed"),
            assistant(),
            user("Check-in for task t: dev-3.md"),
        ];
        let all = [first, injected.clone(), injected, later, rotated].map(seen);
        let given: Vec<String> = latest_per_conversation(&all, "pm")
            .into_iter()
            .flat_map(|s| s.prompts)
            .collect();
        for (file, n) in [("dev-1.md", 1), ("dev-2.md", 1), ("dev-3.md", 1), ("dev-4.md", 0)] {
            assert_eq!(
                given.iter().filter(|p| p.contains(file)).count(),
                n,
                "{file}: {given:?}"
            );
        }
        assert!(latest_per_conversation(&all, "dev").is_empty());
    }

    #[test]
    fn a_first_prompt_saved_to_a_file_is_read_then_followed() {
        let prompt = user(&format!(
            "{DATE}Read the file /t/tasks/t1/scratchpad/dev/preamble.md now and follow the instructions in it exactly."
        ));
        let r = script(std::slice::from_ref(&prompt), &Style::default()).unwrap();
        assert_eq!(
            r,
            Reply::Read {
                path: "/t/tasks/t1/scratchpad/dev/preamble.md".into()
            }
        );
        // As Claude Code's Read tool shows the file: numbered lines.
        let file = result("     1\t# Agent: dev\n     2\t**Task:** t1\n     3\t\n");
        let msgs = [prompt, assistant(), file];
        assert_eq!(agent_of(&msgs).as_deref(), Some("dev"));
        assert!(
            matches!(script(&msgs, &Style::default()).unwrap(), Reply::Tool(c) if c.starts_with("task handoff t1 --from dev"))
        );
        assert_eq!(unnumbered("    12→text"), "text");
        assert_eq!(unnumbered("2026 is a year"), "2026 is a year");
    }
}
