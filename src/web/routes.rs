//! The HTTP side: every route, the session and CSRF checks in front of them, the actions
//! (each recorded in the task's events.jsonl with the web session that did it), and the
//! event stream that tells open pages something changed.

use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::{ConnectInfo, Form, Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::{get, post};
use futures_util::Stream;
use serde::Deserialize;

use crate::app::settings::task_path;
use crate::core::names::AgentName;
use crate::store::events::Kind as EventKind;
use crate::store::task::Task;
use crate::ui::source::Change;

use super::auth::{self, Keys, Limiter};
use super::board::Board;
use super::pages::{self, Frame, Pages};

const COOKIE: &str = "ao_session";
const NOTE_COOKIE: &str = "ao_note";
/// The least time between two "changed" messages to one page (it fetches itself again).
const STREAM_SPACING: Duration = Duration::from_millis(200);

/// What the handlers share.
pub struct App {
    pub board: Arc<Board>,
    pub keys: Keys,
    pub pages: Pages,
    pub read_only: bool,
    /// Cookies get `Secure` (served over TLS).
    pub secure: bool,
    pub limiter: Mutex<Limiter>,
}

type Shared = Arc<App>;

/// Every route.
pub fn router(app: Shared) -> Router {
    Router::new()
        .route("/", get(home))
        .route("/login", get(login_page).post(login))
        .route("/logout", post(logout))
        .route("/events", get(events))
        .route("/seen", post(seen))
        .route("/static/app.css", get(css))
        .route("/static/app.js", get(js))
        .route("/t/{pid}/{task}", get(task_page))
        .route("/t/{pid}/{task}/h/{file}", get(handoff_page))
        .route("/t/{pid}/{task}/checkin", post(checkin))
        .route("/t/{pid}/{task}/send", post(send))
        .route("/t/{pid}/{task}/stop/{agent}", post(stop))
        .route("/t/{pid}/{task}/permit/{id}", post(permit))
        .fallback(not_found)
        .layer(axum::middleware::map_response(guard_headers))
        .with_state(app)
}

/// Headers on every answer: nothing on the page may load or run from elsewhere, no page is
/// framed or cached, and the address is not passed on.
async fn guard_headers(mut r: Response) -> Response {
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'",
        ),
    );
    h.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    h.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    if !h.contains_key(header::CACHE_CONTROL) {
        h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
    r
}

/// A request turned away, and why.
type Refused = (StatusCode, &'static str);

/// A signed-in session.
struct Session {
    sid: String,
    label: String,
    csrf: String,
}

fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .find_map(|kv| kv.trim().strip_prefix(name)?.strip_prefix('='))
}

impl App {
    fn key(&self) -> Option<Vec<u8>> {
        match self.keys.token() {
            Ok(k) => Some(k),
            Err(e) => {
                tracing::error!(error = %e, "the web token cannot be read; nobody can sign in");
                None
            }
        }
    }

    fn session(&self, headers: &HeaderMap) -> Option<Session> {
        let key = self.key()?;
        let sid = auth::check_session(&key, cookie(headers, COOKIE)?, crate::core::clock::now())?;
        Some(Session {
            label: auth::session_label(&sid),
            csrf: auth::csrf(&key, &sid),
            sid,
        })
    }

    /// The session, when the form carries its CSRF token too.
    fn acting(&self, headers: &HeaderMap, csrf: &str) -> Result<Session, Refused> {
        let Some(s) = self.session(headers) else {
            return Err((StatusCode::UNAUTHORIZED, "log in first"));
        };
        let key = self
            .key()
            .ok_or((StatusCode::INTERNAL_SERVER_ERROR, "the web token cannot be read"))?;
        if !auth::check_csrf(&key, &s.sid, csrf) {
            tracing::warn!(session = %s.label, "a form without its session's CSRF token was refused");
            return Err((
                StatusCode::FORBIDDEN,
                "this form is stale or not from this page; reload it",
            ));
        }
        if self.read_only {
            return Err((StatusCode::FORBIDDEN, "the page is read-only (task web --read-only)"));
        }
        Ok(s)
    }

    fn frame(&self, s: &Session, headers: &HeaderMap, back: &str) -> Frame {
        Frame {
            signed_in: true,
            session: s.label.clone(),
            csrf: s.csrf.clone(),
            read_only: self.read_only,
            actions: !self.read_only,
            note: if live_fetch(headers) {
                None
            } else {
                cookie(headers, NOTE_COOKIE).and_then(unhex)
            },
            back: back.to_string(),
        }
    }

    fn set_cookie(&self, name: &str, value: &str, max_age: i64) -> HeaderValue {
        let secure = if self.secure { "; Secure" } else { "" };
        HeaderValue::from_str(&format!(
            "{name}={value}; Path=/; HttpOnly; SameSite=Lax; Max-Age={max_age}{secure}"
        ))
        .expect("cookie values are ASCII")
    }
}

/// The page's own live refresh (app.js) asks for the page with this header. Such a fetch
/// must leave the one-time note alone: it only swaps #live, so a note it took would be
/// cleared without ever being shown — and the old page refreshes on the very change a
/// form made, racing the form's redirect to the page that should show it.
const LIVE_HEADER: &str = "ao-live";

fn live_fetch(headers: &HeaderMap) -> bool {
    headers.contains_key(LIVE_HEADER)
}

fn unhex(s: &str) -> Option<String> {
    if s.len() % 2 != 0 {
        return None;
    }
    let bytes: Option<Vec<u8>> = (0..s.len() / 2)
        .map(|i| u8::from_str_radix(s.get(2 * i..2 * i + 2)?, 16).ok())
        .collect();
    String::from_utf8(bytes?).ok()
}

fn to_login() -> Response {
    (StatusCode::SEE_OTHER, [(header::LOCATION, "/login")]).into_response()
}

/// Where a form comes back to: a path on this site, never elsewhere.
fn safe_back(back: &str) -> &str {
    if back.starts_with('/') && !back.starts_with("//") && !back.contains('\\') && !back.contains(['\r', '\n']) {
        back
    } else {
        "/"
    }
}

/// Back to the page, with the action's outcome shown there once.
fn done(app: &App, back: &str, note: &str) -> Response {
    let mut note = note.to_string();
    if note.len() > 600 {
        let mut end = 600;
        while !note.is_char_boundary(end) {
            end -= 1;
        }
        note.truncate(end);
    }
    let mut r = (StatusCode::SEE_OTHER, [(header::LOCATION, safe_back(back).to_string())]).into_response();
    r.headers_mut().append(
        header::SET_COOKIE,
        app.set_cookie(NOTE_COOKIE, &auth::hex(note.as_bytes()), 30),
    );
    r
}

/// A page, clearing the one-time note it showed.
fn page(app: &App, html: String, had_note: bool) -> Response {
    let mut r = Html(html).into_response();
    if had_note {
        r.headers_mut()
            .append(header::SET_COOKIE, app.set_cookie(NOTE_COOKIE, "", 0));
    }
    r
}

async fn not_found(State(app): State<Shared>, headers: HeaderMap) -> Response {
    if app.session(&headers).is_none() {
        return to_login();
    }
    (StatusCode::NOT_FOUND, "no such page").into_response()
}

async fn css() -> Response {
    (
        [(header::CONTENT_TYPE, "text/css; charset=utf-8")],
        include_str!("../../templates/web/app.css"),
    )
        .into_response()
}

async fn js() -> Response {
    (
        [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
        include_str!("../../templates/web/app.js"),
    )
        .into_response()
}

#[derive(Deserialize, Default)]
struct CodeQuery {
    #[serde(default)]
    code: String,
}

async fn login_page(State(app): State<Shared>, headers: HeaderMap, Query(q): Query<CodeQuery>) -> Response {
    if app.session(&headers).is_some() {
        return (StatusCode::SEE_OTHER, [(header::LOCATION, "/")]).into_response();
    }
    let code: String = q.code.chars().filter(|c| c.is_ascii_alphanumeric()).take(64).collect();
    Html(app.pages.render("login.html", minijinja::context! { code => code })).into_response()
}

#[derive(Deserialize)]
struct LoginForm {
    code: String,
}

async fn login(
    State(app): State<Shared>,
    ConnectInfo(super::Peer(peer)): ConnectInfo<super::Peer>,
    Form(f): Form<LoginForm>,
) -> Response {
    let now = crate::core::clock::now();
    let allowed = app
        .limiter
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .allows(peer.ip(), now);
    if !allowed {
        tracing::warn!(from = %peer.ip(), "web login refused: too many failed tries");
        let html = app.pages.render(
            "login.html",
            minijinja::context! { problem => "Too many failed tries; wait a minute." },
        );
        return (StatusCode::TOO_MANY_REQUESTS, Html(html)).into_response();
    }
    let key = match app.key() {
        Some(k) => k,
        None => return (StatusCode::INTERNAL_SERVER_ERROR, "the web token cannot be read").into_response(),
    };
    if !app.keys.redeem(&f.code, now) {
        app.limiter
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .failed(peer.ip(), now);
        tracing::warn!(from = %peer.ip(), "web login failed: unknown, used or expired code");
        let html = app.pages.render(
            "login.html",
            minijinja::context! { problem => "That code is unknown, used or expired. Get a new one with task web --url." },
        );
        return (StatusCode::UNAUTHORIZED, Html(html)).into_response();
    }
    let value = match auth::new_session(&key, now) {
        Ok(v) => v,
        Err(e) => return (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    };
    let sid = value.split_once('.').map_or("", |(s, _)| s);
    tracing::info!(from = %peer.ip(), session = %auth::session_label(sid), "web login");
    let mut r = (StatusCode::SEE_OTHER, [(header::LOCATION, "/")]).into_response();
    r.headers_mut().append(
        header::SET_COOKIE,
        app.set_cookie(COOKIE, &value, auth::SESSION_TTL.num_seconds()),
    );
    r
}

#[derive(Deserialize)]
struct Csrf {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    back: String,
}

async fn logout(State(app): State<Shared>, headers: HeaderMap, Form(f): Form<Csrf>) -> Response {
    if let Err(r) = app.acting(&headers, &f.csrf) {
        if app.session(&headers).is_some() && !app.read_only {
            return r.into_response();
        }
    }
    let mut r = to_login();
    r.headers_mut()
        .append(header::SET_COOKIE, app.set_cookie(COOKIE, "", 0));
    r
}

async fn home(State(app): State<Shared>, headers: HeaderMap) -> Response {
    let Some(s) = app.session(&headers) else {
        return to_login();
    };
    let frame = app.frame(&s, &headers, "/");
    let shown = app.board.ready().await;
    let seen = app.board.seen.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let html = app.pages.render(
        "home.html",
        pages::home(&shown, &seen, &frame, crate::core::clock::now()),
    );
    page(&app, html, frame.note.is_some())
}

async fn task_page(
    State(app): State<Shared>,
    headers: HeaderMap,
    Path((pid, name)): Path<(String, String)>,
) -> Response {
    let Some(s) = app.session(&headers) else {
        return to_login();
    };
    let shown = app.board.ready().await;
    let Some(i) = shown.find(&pid, &name) else {
        return (StatusCode::NOT_FOUND, "no such task is supervised").into_response();
    };
    let t = &shown.tasks[i];
    let frame = app.frame(&s, &headers, &task_path(&t.project.display().to_string(), &name));
    let progress = match crate::store::fsutil::read_regular(&t.dir().join("progress.md"), 2 << 20) {
        Ok(Ok(c)) => super::markdown::render(&String::from_utf8_lossy(&c.bytes)).0,
        _ => "<p>No progress.md yet.</p>".to_string(),
    };
    let seen = app.board.seen.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let html = app.pages.render(
        "task.html",
        pages::task(&shown, i, &seen, &frame, progress, crate::core::clock::now()),
    );
    page(&app, html, frame.note.is_some())
}

async fn handoff_page(
    State(app): State<Shared>,
    headers: HeaderMap,
    Path((pid, name, file)): Path<(String, String, String)>,
) -> Response {
    let Some(_) = app.session(&headers) else {
        return to_login();
    };
    let shown = app.board.ready().await;
    let Some(i) = shown.find(&pid, &name) else {
        return (StatusCode::NOT_FOUND, "no such task is supervised").into_response();
    };
    if crate::core::handoff::HandoffName::parse(&file).is_none() {
        return (StatusCode::NOT_FOUND, "not a handoff file name").into_response();
    }
    let t = &shown.tasks[i];
    let (body, cut) = match crate::store::fsutil::read_regular(&t.handoffs().join(&file), 4 << 20) {
        Ok(Ok(c)) => {
            let (html, cut) = super::markdown::render(&String::from_utf8_lossy(&c.bytes));
            (html, cut || c.truncated)
        }
        Ok(Err(skip)) => (format!("<p>Not shown: {}</p>", skip.reason()), false),
        Err(e) => (
            format!("<p>Not read: {}</p>", pages::html_escape(&e.to_string())),
            false,
        ),
    };
    let html = app.pages.render(
        "handoff.html",
        minijinja::context! {
            signed_in => true,
            file => file,
            task => name.clone(),
            link => task_path(&t.project.display().to_string(), &name),
            body => body,
            cut => cut,
        },
    );
    Html(html).into_response()
}

/// The stream open pages follow: `changed` each time the picture changes (at most one per
/// [`STREAM_SPACING`]), a comment every 20 s to keep proxies from closing it.
async fn events(State(app): State<Shared>, headers: HeaderMap) -> Response {
    if app.session(&headers).is_none() {
        return (StatusCode::UNAUTHORIZED, "log in first").into_response();
    }
    let rx = app.board.follow();
    // Told at once; the next one no sooner than STREAM_SPACING after (a busy task's many
    // changes become a few fetches).
    let stream = futures_util::stream::unfold(
        (rx, None),
        |(mut rx, last): (_, Option<tokio::time::Instant>)| async move {
            if let Some(last) = last {
                tokio::time::sleep_until(last + STREAM_SPACING).await;
            }
            rx.changed().await.ok()?;
            let v = rx.borrow_and_update().version;
            let ev = SseEvent::default().event("changed").data(v.to_string());
            Some((Ok::<_, Infallible>(ev), (rx, Some(tokio::time::Instant::now()))))
        },
    );
    sse(stream).into_response()
}

fn sse<S: Stream<Item = Result<SseEvent, Infallible>> + Send + 'static>(s: S) -> impl IntoResponse {
    Sse::new(s).keep_alive(KeepAlive::new().interval(Duration::from_secs(20)))
}

#[derive(Deserialize)]
struct SeenForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    back: String,
    key: String,
}

async fn seen(State(app): State<Shared>, headers: HeaderMap, Form(f): Form<SeenForm>) -> Response {
    let s = match app.acting(&headers, &f.csrf) {
        Ok(s) => s,
        Err(r) => return r.into_response(),
    };
    let shown = app.board.ready().await;
    // Recorded in the item's task: the key starts with the why and the task.
    let task = f.key.split('|').nth(1).unwrap_or("");
    if let Some(t) = shown.tasks.iter().find(|t| t.name.as_str() == task) {
        record(t, &s, "seen", None, serde_json::json!({"item": f.key}), "marked seen");
        app.board.changed(Change::Named {
            project: t.project.display().to_string(),
            task: task.to_string(),
        });
    }
    app.board.seen.lock().unwrap_or_else(|e| e.into_inner()).insert(f.key);
    done(&app, &f.back, "marked seen; it comes back if it changes")
}

/// Record an action in the task's events.jsonl, naming the session.
fn record(t: &Task, s: &Session, action: &str, agent: Option<&str>, mut data: serde_json::Value, outcome: &str) {
    if let Some(m) = data.as_object_mut() {
        m.insert("action".into(), action.into());
        m.insert("by".into(), s.label.clone().into());
        m.insert("outcome".into(), outcome.into());
    }
    if let Err(e) = crate::store::events::append(t, EventKind::WebAction, agent, data, crate::core::clock::now()) {
        tracing::warn!(task = %t.name, error = %e, "a web action could not be recorded");
    }
}

/// The task at `/t/<pid>/<name>` and the acting session, or the answer refusing.
async fn target(app: &App, headers: &HeaderMap, pid: &str, name: &str, csrf: &str) -> Result<(Task, Session), Refused> {
    let s = app.acting(headers, csrf)?;
    let shown = app.board.ready().await;
    let i = shown
        .find(pid, name)
        .ok_or((StatusCode::NOT_FOUND, "no such task is supervised"))?;
    Ok((shown.tasks[i].clone(), s))
}

/// Run an action as the CLI would: on a thread and a runtime of its own. The verbs ask the
/// daemon over its socket and wait (blocking); on one of the daemon's own workers that
/// wait would hold up the very work it waits for.
async fn apart<F, Fut>(f: F) -> String
where
    F: FnOnce(crate::app::session::Ctx) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = String>,
{
    let ran = tokio::task::spawn_blocking(move || {
        let ctx = crate::app::session::Ctx::from_env().map_err(|e| e.to_string())?;
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| e.to_string())?;
        Ok::<_, String>(rt.block_on(f(ctx)))
    })
    .await;
    match ran {
        Ok(Ok(note)) => note,
        Ok(Err(e)) => format!("not done: {e}"),
        Err(e) => format!("not done: the action failed ({e})"),
    }
}

fn refresh(app: &App, t: &Task) {
    app.board.changed(Change::Named {
        project: t.project.display().to_string(),
        task: t.name.to_string(),
    });
}

async fn checkin(
    State(app): State<Shared>,
    headers: HeaderMap,
    Path((pid, name)): Path<(String, String)>,
    Form(f): Form<Csrf>,
) -> Response {
    let (t, s) = match target(&app, &headers, &pid, &name, &f.csrf).await {
        Ok(x) => x,
        Err(r) => return r.into_response(),
    };
    let task = t.clone();
    let note = apart(move |c| async move { crate::ui::actions::checkin(&task, &c).await }).await;
    record(&t, &s, "checkin", None, serde_json::json!({}), &note);
    refresh(&app, &t);
    done(&app, &f.back, &note)
}

#[derive(Deserialize)]
struct SendForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    back: String,
    agent: String,
    text: String,
}

async fn send(
    State(app): State<Shared>,
    headers: HeaderMap,
    Path((pid, name)): Path<(String, String)>,
    Form(f): Form<SendForm>,
) -> Response {
    let (t, s) = match target(&app, &headers, &pid, &name, &f.csrf).await {
        Ok(x) => x,
        Err(r) => return r.into_response(),
    };
    if f.text.trim().is_empty() {
        return done(&app, &f.back, "nothing to send: the message is empty");
    }
    let (task, agent, text) = (t.clone(), f.agent.clone(), f.text.clone());
    let note = apart(move |c| async move { crate::ui::actions::send(&task, &c, &agent, &text).await }).await;
    let agent = f.agent.parse::<AgentName>().ok().map(|a| a.to_string());
    record(
        &t,
        &s,
        "send",
        agent.as_deref(),
        serde_json::json!({"chars": f.text.chars().count()}),
        &note,
    );
    refresh(&app, &t);
    done(&app, &f.back, &note)
}

async fn stop(
    State(app): State<Shared>,
    headers: HeaderMap,
    Path((pid, name, agent)): Path<(String, String, String)>,
    Form(f): Form<Csrf>,
) -> Response {
    let (t, s) = match target(&app, &headers, &pid, &name, &f.csrf).await {
        Ok(x) => x,
        Err(r) => return r.into_response(),
    };
    let Ok(agent) = agent.parse::<AgentName>() else {
        return done(&app, &f.back, "not stopped: that is not an agent name");
    };
    let (task, name, by) = (t.clone(), agent.to_string(), s.label.clone());
    let note = apart(move |c| async move { crate::ui::actions::stop_agent(&task, &c, &name, &by).await }).await;
    record(&t, &s, "stop", Some(agent.as_str()), serde_json::json!({}), &note);
    refresh(&app, &t);
    done(&app, &f.back, &note)
}

#[derive(Deserialize)]
struct PermitForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    back: String,
    decision: String,
}

async fn permit(
    State(app): State<Shared>,
    headers: HeaderMap,
    Path((pid, name, id)): Path<(String, String, String)>,
    Form(f): Form<PermitForm>,
) -> Response {
    let (t, s) = match target(&app, &headers, &pid, &name, &f.csrf).await {
        Ok(x) => x,
        Err(r) => return r.into_response(),
    };
    let (allow, always) = match f.decision.as_str() {
        "allow" => (true, false),
        "always" => (true, true),
        "deny" => (false, false),
        _ => return done(&app, &f.back, "not answered: choose allow, always or deny"),
    };
    let (task, rid, by) = (t.clone(), id.clone(), s.label.clone());
    let note = apart(move |_| async move {
        match crate::app::broker::permit(&task, &rid, allow, always, None, &by) {
            Ok((d, true)) => format!("{}/{rid}: {} (by you)", task.name, d.decision),
            Ok((d, false)) => format!("{}/{rid} was already decided: {} by {}", task.name, d.decision, d.by),
            Err(e) => format!("could not answer {}/{rid}: {e}", task.name),
        }
    })
    .await;
    record(
        &t,
        &s,
        "permit",
        None,
        serde_json::json!({"id": id, "decision": f.decision}),
        &note,
    );
    refresh(&app, &t);
    done(&app, &f.back, &note)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_form_comes_back_only_to_this_site() {
        assert_eq!(safe_back("/t/x/demo"), "/t/x/demo");
        assert_eq!(safe_back("//evil.example/"), "/");
        assert_eq!(safe_back("https://evil.example/"), "/");
        assert_eq!(safe_back("/\\evil"), "/");
        assert_eq!(safe_back("/a\r\nSet-Cookie: x"), "/");
    }

    #[test]
    fn cookies_are_found_among_others_and_notes_round_trip() {
        let mut h = HeaderMap::new();
        h.insert(
            header::COOKIE,
            HeaderValue::from_static("a=1; ao_session=abc.def; ao_note=6869"),
        );
        assert_eq!(cookie(&h, COOKIE), Some("abc.def"));
        assert_eq!(cookie(&h, NOTE_COOKIE).and_then(unhex).as_deref(), Some("hi"));
        assert_eq!(unhex(&auth::hex("é <b>".as_bytes())).as_deref(), Some("é <b>"));
        assert_eq!(unhex("zz"), None);
    }
}
