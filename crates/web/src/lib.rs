//! The web view (issue 21): read mail in a browser, from the compact summaries the store
//! keeps with every message. Pages are rendered on the server with askama's compiled,
//! auto-escaping templates and work without JavaScript.
//!
//! The crate knows nothing of the store, the directory or the cluster: it asks a
//! [`Backend`], which the server implements. What it owns is HTTP: the routes, sessions
//! (`sessions.rs`), CSRF tokens, security headers and message rendering (`render.rs`).
//!
//! Security, every page: a session is a random token in an `HttpOnly; SameSite=Strict`
//! cookie (`Secure` when served over TLS); every state-changing form carries the session's
//! CSRF token, checked before anything is done; a message or folder is looked up under the
//! session's user only, so another user's id is a 404 like a missing one; every response has
//! a strict Content-Security-Policy (no script at all, images from this origin or inline
//! data only, no framing), `nosniff` and `no-referrer`; request bodies are bounded.

mod admin_pages;
mod app;
mod backend;
mod compose;
mod public;
mod published;
mod render;
pub mod rules;
mod rules_pages;
mod sessions;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use askama::Template;
use axum::Router;
use axum::extract::{ConnectInfo, DefaultBodyLimit, Form, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use serde::Deserialize;

pub use app::Config;
pub use backend::{
    ADMIN_REPORTS_SHOWN_MAX, ADMIN_USERS_SHOWN_MAX, Account, AdminAction, AdminCertificate,
    AdminData, AdminReceivedReport, AdminReportKind, AdminReports, AdminSentReport, AdminUser,
    AdminView, Backend, BackendError, Changes, Flag, FolderInfo, FolderPage, Listed, LoginError,
    LoginRow, PasswordError, Queued, ScriptError, ScriptInfo, SendError, Stored, TRASH,
};
pub use published::{Http01Answers, Published};

use app::{
    App, CREDENTIAL_BYTES_MAX, WHOLE_MESSAGES_MAX, backend_problem, blocking, not_found, problem,
    render_page, size, when,
};
use sessions::{Session, Sessions};

/// Every page: no script, nothing remote, no framing (the HTML of a message is cleaned as
/// well: `render.rs`).
const CSP: &str = "default-src 'none'; script-src 'self'; connect-src 'self'; \
                   style-src 'self'; img-src 'self' data:; form-action 'self'; \
                   frame-ancestors 'none'; base-uri 'none'";
/// A comment line on an idle event stream this often, so proxies keep it open.
const EVENTS_KEEP_ALIVE: Duration = Duration::from_secs(25);
/// Longest search text.
const QUERY_BYTES_MAX: usize = 256;
/// Messages a search looks at, newest first, before it stops and says so.
const SEARCH_EXAMINED_MAX: usize = 5000;

/// The web view's routes over `backend`. Each request needs a `ConnectInfo<SocketAddr>`
/// extension (axum's `into_make_service_with_connect_info`, or the server's own connection
/// loop): logins are throttled by address.
pub fn router<B: Backend>(backend: Arc<B>, config: Config) -> Router {
    let app = app(backend, &config);
    public::routes(Router::new())
        .route("/account/mobileconfig", get(public::mobileconfig::<B>))
        .route("/", get(index::<B>))
        .route("/login", get(login_form).post(login::<B>))
        .route("/logout", post(logout::<B>))
        .route("/mail", get(list::<B>))
        .route("/message", get(message::<B>))
        .route("/message/part", get(part::<B>))
        .route("/message/flag", post(flag::<B>))
        .route("/message/move", post(move_message::<B>))
        .route("/message/delete", post(delete::<B>))
        .route("/folder/empty", post(empty::<B>))
        .route("/search", get(search::<B>))
        .route(
            "/compose",
            get(compose::form::<B>)
                .post(compose::send::<B>)
                .layer(DefaultBodyLimit::max(
                    // The files and text, and the form's own framing.
                    config.message_bytes_max.saturating_add(64 << 10),
                )),
        )
        .route("/account", get(account::<B>))
        .route("/account/password", post(change_password::<B>))
        .route("/rules", get(rules_pages::list::<B>))
        .route(
            "/rules/rule",
            get(rules_pages::rule_form::<B>).post(rules_pages::rule_save::<B>),
        )
        .route("/rules/order", post(rules_pages::reorder::<B>))
        .route("/rules/delete", post(rules_pages::delete::<B>))
        .route("/rules/vacation", post(rules_pages::vacation::<B>))
        .route(
            "/rules/script",
            get(rules_pages::script_form::<B>)
                .post(rules_pages::script_save::<B>)
                .layer(DefaultBodyLimit::max(
                    // Percent-encoded, a script's bytes may triple; and the form's framing.
                    config
                        .script_bytes_max
                        .saturating_mul(3)
                        .saturating_add(16 << 10)
                        .max(config.request_bytes_max),
                )),
        )
        .route("/rules/activate", post(rules_pages::activate::<B>))
        .route("/rules/script/delete", post(rules_pages::remove::<B>))
        .route("/style.css", get(style))
        .route("/live.js", get(live_script))
        .route("/events", get(events::<B>))
        .route("/admin", get(admin_pages::overview::<B>))
        .route("/admin/queue/show", get(admin_pages::queued::<B>))
        .route("/admin/reports/show", get(admin_pages::report::<B>))
        .route("/admin/{section}", get(admin_pages::section::<B>))
        .route("/admin/{section}/{verb}", post(admin_pages::act::<B>))
        .fallback(not_found)
        .layer(axum::middleware::map_response(security_headers))
        .layer(DefaultBodyLimit::max(config.request_bytes_max))
        .layer(tower_http::timeout::TimeoutLayer::with_status_code(
            StatusCode::REQUEST_TIMEOUT,
            config.request_timeout,
        ))
        .with_state(app)
}

fn app<B: Backend>(backend: Arc<B>, config: &Config) -> Arc<App<B>> {
    Arc::new(App {
        backend,
        sessions: Sessions::new(
            config.sessions_max,
            config.session_idle,
            config.session_lifetime,
        ),
        config: config.clone(),
        whole_messages: tokio::sync::Semaphore::new(WHOLE_MESSAGES_MAX),
    })
}

/// The plain HTTP listener (port 80): ACME's HTTP-01 challenges (RFC 8555 8.3, answered by
/// `answers`), the autoconfiguration documents Thunderbird may fetch without TLS, and a
/// permanent redirect to HTTPS for everything else, with the view's headers, body bound and
/// deadline.
pub fn plain_router<B: Backend>(backend: Arc<B>, config: Config, answers: Http01Answers) -> Router {
    let app = app(backend, &config);
    let plain = Arc::new(public::Plain {
        app: app.clone(),
        answers,
    });
    let challenges = Router::new()
        .route(
            "/.well-known/acme-challenge/{token}",
            get(public::acme_challenge::<B>),
        )
        .fallback(public::to_https::<B>)
        .with_state(plain);
    public::routes(Router::new())
        .with_state(app)
        .fallback_service(challenges)
        .layer(axum::middleware::map_response(security_headers))
        .layer(DefaultBodyLimit::max(config.request_bytes_max))
        .layer(tower_http::timeout::TimeoutLayer::with_status_code(
            StatusCode::REQUEST_TIMEOUT,
            config.request_timeout,
        ))
}

/// A failure page with this view's security headers, for answers made outside its router
/// (the server's cluster forwarding: `503` when a user's node is down).
pub fn problem_response(status: StatusCode, title: &str, detail: &str) -> Response {
    with_security_headers(problem(status, title, detail))
}

async fn security_headers(response: Response) -> Response {
    with_security_headers(response)
}

fn with_security_headers(mut response: Response) -> Response {
    let h = response.headers_mut();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.entry(header::CACHE_CONTROL)
        .or_insert(HeaderValue::from_static("no-store"));
    response
}

async fn index<B: Backend>(
    State(app): State<Arc<App<B>>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
) -> Response {
    match app.session(&headers, peer.ip()) {
        Ok(_) => Redirect::to("/mail").into_response(),
        Err(denied) => denied.into_response(),
    }
}

#[derive(Template)]
#[template(path = "login.html")]
struct LoginPage {
    problem: Option<String>,
    username: String,
}

async fn login_form() -> Response {
    render_page(&LoginPage {
        problem: None,
        username: String::new(),
    })
}

#[derive(Deserialize)]
struct LoginForm {
    username: String,
    password: String,
}

async fn login<B: Backend>(
    State(app): State<Arc<App<B>>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    Form(form): Form<LoginForm>,
) -> Response {
    let again = |status: StatusCode, problem: &str, username: &str| {
        let mut r = render_page(&LoginPage {
            problem: Some(problem.to_string()),
            username: username.to_string(),
        });
        *r.status_mut() = status;
        r
    };
    if form.username.len() > CREDENTIAL_BYTES_MAX || form.password.len() > CREDENTIAL_BYTES_MAX {
        return again(StatusCode::UNAUTHORIZED, "Wrong address or password.", "");
    }
    let user = match app
        .backend
        .login(&form.username, &form.password, peer.ip())
        .await
    {
        Ok(user) => user,
        Err(LoginError::BadCredentials) => {
            return again(
                StatusCode::UNAUTHORIZED,
                "Wrong address or password.",
                &form.username,
            );
        }
        Err(LoginError::Temporary(why)) => {
            return again(
                StatusCode::SERVICE_UNAVAILABLE,
                &format!("Cannot log in right now ({why}). Try again shortly."),
                &form.username,
            );
        }
    };
    let (started, ended) = app.sessions.start(&user);
    for user in ended {
        app.backend.logout(&user, peer.ip());
    }
    let Some((token, _)) = started else {
        return again(
            StatusCode::SERVICE_UNAVAILABLE,
            "Too many people are logged in right now. Try again shortly.",
            &form.username,
        );
    };
    let mut r = Redirect::to("/mail").into_response();
    r.headers_mut().insert(
        header::SET_COOKIE,
        app.cookie(&token, Some(app.config.session_lifetime.as_secs())),
    );
    r
}

/// A form's CSRF token: absent reads as empty, and is refused like a wrong one (403).
#[derive(Deserialize)]
struct CsrfForm {
    #[serde(default)]
    csrf: String,
}

async fn logout<B: Backend>(
    State(app): State<Arc<App<B>>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Form(form): Form<CsrfForm>,
) -> Response {
    let (token, session) = match app.form_session(&headers, peer.ip(), &form.csrf) {
        Ok(s) => s,
        Err(denied) => return denied.into_response(),
    };
    app.sessions.end(&token);
    app.backend.logout(&session.user, peer.ip());
    let mut r = Redirect::to("/login").into_response();
    r.headers_mut()
        .insert(header::SET_COOKIE, app.cookie("", Some(0)));
    r
}

/// A list row as the template shows it.
struct Row {
    uid: u32,
    from: String,
    subject: String,
    preview: String,
    received: String,
    size: String,
    seen: bool,
    flagged: bool,
    has_attachment: bool,
}

#[derive(Template)]
#[template(path = "list.html")]
struct ListPage {
    user: String,
    csrf: String,
    folders: Vec<FolderInfo>,
    folder: String,
    total: u64,
    unseen: u64,
    messages: Vec<Row>,
    newest_link: Option<String>,
    older_link: Option<String>,
    /// A search's text, when this is its result.
    query: Option<String>,
    /// The search stopped before the oldest message.
    partial: bool,
    is_trash: bool,
    /// The folder's version this page shows (`FolderPage::version`), for the live script.
    version: u64,
}

fn rows(messages: Vec<Listed>) -> Vec<Row> {
    messages
        .into_iter()
        .map(|m| Row {
            uid: m.uid,
            from: m.from,
            subject: m.subject,
            preview: m.preview,
            received: when(m.received_at),
            size: size(m.size),
            seen: m.seen,
            flagged: m.flagged,
            has_attachment: m.has_attachment,
        })
        .collect()
}

#[derive(Deserialize)]
struct ListQuery {
    folder: Option<String>,
    before: Option<u32>,
}

fn folder_link(folder: &str) -> String {
    let mut out = String::from("/mail?folder=");
    for b in folder.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

async fn list<B: Backend>(
    State(app): State<Arc<App<B>>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Query(q): Query<ListQuery>,
) -> Response {
    let (_, session) = match app.session(&headers, peer.ip()) {
        Ok(s) => s,
        Err(denied) => return denied.into_response(),
    };
    let folder = q.folder.unwrap_or_else(|| "INBOX".to_string());
    let count = app.config.page_size;
    let (user, f) = (session.user.clone(), folder.clone());
    let fetched = blocking(&app, move |b| {
        Ok((b.folders(&user)?, b.page(&user, &f, q.before, count)?))
    })
    .await;
    let (folders, page) = match fetched {
        Ok(x) => x,
        Err(e) => return backend_problem(e),
    };
    let older_link = (page.messages.len() == count)
        .then(|| page.messages.last().map(|m| m.uid))
        .flatten()
        .map(|uid| format!("{}&before={uid}", folder_link(&folder)));
    let newest_link = q.before.map(|_| folder_link(&folder));
    render_page(&ListPage {
        user: session.user,
        csrf: session.csrf,
        folders,
        total: page.total,
        unseen: page.unseen,
        version: page.version,
        messages: rows(page.messages),
        is_trash: folder == TRASH,
        folder,
        newest_link,
        older_link,
        query: None,
        partial: false,
    })
}

#[derive(Deserialize)]
struct SearchQuery {
    folder: Option<String>,
    #[serde(default)]
    q: String,
}

async fn search<B: Backend>(
    State(app): State<Arc<App<B>>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Query(q): Query<SearchQuery>,
) -> Response {
    let (_, session) = match app.session(&headers, peer.ip()) {
        Ok(s) => s,
        Err(denied) => return denied.into_response(),
    };
    let folder = q.folder.unwrap_or_else(|| "INBOX".to_string());
    let query = q.q.trim().to_string();
    if query.is_empty() || query.len() > QUERY_BYTES_MAX {
        return Redirect::to(&folder_link(&folder)).into_response();
    }
    let count = app.config.page_size;
    let _turn = app.whole_messages.acquire().await;
    let (user, f, needle) = (session.user.clone(), folder.clone(), query.clone());
    let fetched = blocking(&app, move |b| {
        Ok((
            b.folders(&user)?,
            b.search(&user, &f, &needle, count, SEARCH_EXAMINED_MAX)?,
        ))
    })
    .await;
    let (folders, (page, partial)) = match fetched {
        Ok(x) => x,
        Err(e) => return backend_problem(e),
    };
    render_page(&ListPage {
        user: session.user,
        csrf: session.csrf,
        folders,
        total: page.total,
        unseen: page.unseen,
        version: page.version,
        messages: rows(page.messages),
        is_trash: folder == TRASH,
        folder,
        newest_link: None,
        older_link: None,
        query: Some(query),
        partial,
    })
}

#[derive(Deserialize)]
struct MessageForm {
    #[serde(default)]
    csrf: String,
    folder: String,
    uid: u32,
    #[serde(default)]
    dest: String,
}

async fn move_message<B: Backend>(
    State(app): State<Arc<App<B>>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Form(form): Form<MessageForm>,
) -> Response {
    let (_, session) = match app.form_session(&headers, peer.ip(), &form.csrf) {
        Ok(s) => s,
        Err(denied) => return denied.into_response(),
    };
    let (user, folder, uid, dest) = (session.user, form.folder.clone(), form.uid, form.dest);
    if let Err(e) = blocking(&app, move |b| b.move_to(&user, &folder, uid, &dest)).await {
        return backend_problem(e);
    }
    Redirect::to(&folder_link(&form.folder)).into_response()
}

/// Delete: to the Trash, or for good when it is in the Trash already.
async fn delete<B: Backend>(
    State(app): State<Arc<App<B>>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Form(form): Form<MessageForm>,
) -> Response {
    let (_, session) = match app.form_session(&headers, peer.ip(), &form.csrf) {
        Ok(s) => s,
        Err(denied) => return denied.into_response(),
    };
    let (user, folder, uid) = (session.user, form.folder.clone(), form.uid);
    let done = blocking(&app, move |b| {
        if folder == TRASH {
            b.expunge(&user, &folder, uid)
        } else {
            b.move_to(&user, &folder, uid, TRASH)
        }
    })
    .await;
    if let Err(e) = done {
        return backend_problem(e);
    }
    Redirect::to(&folder_link(&form.folder)).into_response()
}

#[derive(Deserialize)]
struct FolderForm {
    #[serde(default)]
    csrf: String,
    folder: String,
}

/// Empties the Trash (no other folder: one click must not wipe an inbox).
async fn empty<B: Backend>(
    State(app): State<Arc<App<B>>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Form(form): Form<FolderForm>,
) -> Response {
    let (_, session) = match app.form_session(&headers, peer.ip(), &form.csrf) {
        Ok(s) => s,
        Err(denied) => return denied.into_response(),
    };
    if form.folder != TRASH {
        return problem(
            StatusCode::BAD_REQUEST,
            "Refused",
            "Only the Trash can be emptied.",
        );
    }
    let user = session.user;
    if let Err(e) = blocking(&app, move |b| b.expunge_all(&user, TRASH)).await {
        return backend_problem(e);
    }
    Redirect::to(&folder_link(TRASH)).into_response()
}

#[derive(Template)]
#[template(path = "message.html")]
struct MessagePage {
    user: String,
    csrf: String,
    folders: Vec<FolderInfo>,
    folder: String,
    uid: u32,
    flagged: bool,
    m: render::Rendered,
}

#[derive(Deserialize)]
struct MessageQuery {
    folder: String,
    uid: u32,
}

async fn message<B: Backend>(
    State(app): State<Arc<App<B>>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Query(q): Query<MessageQuery>,
) -> Response {
    let (_, session) = match app.session(&headers, peer.ip()) {
        Ok(s) => s,
        Err(denied) => return denied.into_response(),
    };
    let _turn = app.whole_messages.acquire().await;
    let (user, folder, uid) = (session.user.clone(), q.folder.clone(), q.uid);
    let fetched = blocking(&app, move |b| {
        let stored = b.message(&user, &folder, uid)?;
        // Opening a message reads it, as in every mail client.
        if !stored.seen {
            b.set_flag(&user, &folder, uid, Flag::Seen, true)?;
        }
        Ok((b.folders(&user)?, stored))
    })
    .await;
    let (folders, stored) = match fetched {
        Ok(x) => x,
        Err(e) => return backend_problem(e),
    };
    let rendered = tokio::task::spawn_blocking(move || render::render(&stored.content))
        .await
        .unwrap_or_default();
    render_page(&MessagePage {
        user: session.user,
        csrf: session.csrf,
        folders,
        folder: q.folder,
        uid: q.uid,
        flagged: stored.flagged,
        m: rendered,
    })
}

#[derive(Deserialize)]
struct PartQuery {
    folder: String,
    uid: u32,
    part: usize,
}

/// RFC 6266 4.3 / RFC 8187: the file name as `filename*=UTF-8''...`, with an ASCII
/// `filename` beside it for old clients.
fn content_disposition(name: &str) -> String {
    let ascii: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_graphic() && c != '"' && c != '\\' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let mut encoded = String::new();
    for b in name.bytes() {
        if b.is_ascii_alphanumeric() || b"!#$&+-.^_`|~".contains(&b) {
            encoded.push(b as char);
        } else {
            encoded.push_str(&format!("%{b:02X}"));
        }
    }
    format!("attachment; filename=\"{ascii}\"; filename*=UTF-8''{encoded}")
}

async fn part<B: Backend>(
    State(app): State<Arc<App<B>>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Query(q): Query<PartQuery>,
) -> Response {
    let (_, session) = match app.session(&headers, peer.ip()) {
        Ok(s) => s,
        Err(denied) => return denied.into_response(),
    };
    let _turn = app.whole_messages.acquire().await;
    let (user, folder, uid) = (session.user, q.folder, q.uid);
    let stored = match blocking(&app, move |b| b.message(&user, &folder, uid)).await {
        Ok(s) => s,
        Err(e) => return backend_problem(e),
    };
    let found = tokio::task::spawn_blocking(move || render::attachment(&stored.content, q.part))
        .await
        .ok()
        .flatten();
    let Some((name, bytes)) = found else {
        return backend_problem(BackendError::NotFound);
    };
    let mut r = bytes.into_response();
    let h = r.headers_mut();
    // Always a download, never rendered here: an attachment is the sender's content.
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/octet-stream"),
    );
    if let Ok(v) = HeaderValue::from_str(&content_disposition(&name)) {
        h.insert(header::CONTENT_DISPOSITION, v);
    }
    r
}

#[derive(Deserialize)]
struct FlagForm {
    #[serde(default)]
    csrf: String,
    folder: String,
    uid: u32,
    flag: String,
    on: u8,
}

async fn flag<B: Backend>(
    State(app): State<Arc<App<B>>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Form(form): Form<FlagForm>,
) -> Response {
    let (_, session) = match app.form_session(&headers, peer.ip(), &form.csrf) {
        Ok(s) => s,
        Err(denied) => return denied.into_response(),
    };
    let which = match form.flag.as_str() {
        "seen" => Flag::Seen,
        "flagged" => Flag::Flagged,
        _ => return problem(StatusCode::BAD_REQUEST, "Bad request", "No such flag."),
    };
    let (user, folder, uid, on) = (session.user, form.folder.clone(), form.uid, form.on != 0);
    if let Err(e) = blocking(&app, move |b| b.set_flag(&user, &folder, uid, which, on)).await {
        return backend_problem(e);
    }
    // Marked unread: back to the list, as a client does; otherwise back to the message.
    if which == Flag::Seen && !on {
        Redirect::to(&folder_link(&form.folder)).into_response()
    } else {
        Redirect::to(&format!(
            "/message?{}&uid={}",
            folder_link(&form.folder).trim_start_matches("/mail?"),
            form.uid
        ))
        .into_response()
    }
}

/// Server-sent events (HTML Living Standard 9.2): `changed` after every committed change to
/// the session's mailbox, fed by the store's observer through the backend. The page's script
/// (`live.js`) reloads the list when one comes. Ends when the session or the user does.
/// `/events?folder=F&since=V`: the list page's folder and version (both or neither).
#[derive(Deserialize)]
struct EventsQuery {
    folder: Option<String>,
    since: Option<u64>,
}

async fn events<B: Backend>(
    State(app): State<Arc<App<B>>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Query(q): Query<EventsQuery>,
) -> Response {
    use axum::response::sse::{Event, KeepAlive, Sse};
    let (token, session) = match app.session(&headers, peer.ip()) {
        Ok(s) => s,
        Err(denied) => return denied.into_response(),
    };
    let user = session.user.clone();
    // Follow first, then compare: a change after the comparison is then heard on the stream.
    let (changes, behind) = match blocking(&app, move |b| {
        let changes = b.changes(&user)?;
        let behind = match (q.folder, q.since) {
            (Some(folder), Some(since)) => match b.page(&user, &folder, None, 0) {
                Ok(page) => page.version != since,
                // Gone meanwhile: the page is out of date.
                Err(BackendError::NotFound) => true,
                Err(e) => return Err(e),
            },
            _ => false,
        };
        Ok((changes, behind))
    })
    .await
    {
        Ok(c) => c,
        Err(e) => return backend_problem(e),
    };
    struct Follow<B> {
        changes: Changes,
        app: Arc<App<B>>,
        token: String,
        /// The page was out of date when the stream began: say so first.
        behind: bool,
    }
    let stream = futures_util::stream::unfold(
        Follow {
            changes,
            app: app.clone(),
            token,
            behind,
        },
        |mut f| async move {
            enum Next {
                Changed,
                Over,
            }
            if std::mem::take(&mut f.behind) {
                let event = Event::default().event("changed").data("mailbox");
                return Some((Ok::<_, std::convert::Infallible>(event), f));
            }
            let next = tokio::select! {
                changed = f.changes.changed.changed() => {
                    if changed.is_ok() { Next::Changed } else { Next::Over }
                }
                _ = f.changes.ended.wait_for(|ended| *ended) => Next::Over,
            };
            // A session that ended (logged out, expired) stops following as well.
            if matches!(next, Next::Over) || !matches!(f.app.sessions.get(&f.token), Ok(Some(_))) {
                return None;
            }
            let event = Event::default().event("changed").data("mailbox");
            Some((Ok::<_, std::convert::Infallible>(event), f))
        },
    );
    let mut r = Sse::new(stream)
        .keep_alive(KeepAlive::new().interval(EVENTS_KEEP_ALIVE))
        .into_response();
    r.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}

async fn live_script() -> Response {
    let mut r = include_str!("../templates/live.js").into_response();
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/javascript; charset=utf-8"),
    );
    r.headers_mut().insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("max-age=3600"),
    );
    r
}

#[derive(Template)]
#[template(path = "account.html")]
struct AccountPage {
    user: String,
    csrf: String,
    folders: Vec<FolderInfo>,
    folder: String,
    used: String,
    quota: String,
    messages: String,
    last_login: String,
    logins: Vec<LoginShown>,
    admin: bool,
    notice: Option<String>,
    problem: Option<String>,
}

/// A login history row as the account page shows it.
struct LoginShown {
    client: String,
    protocol: String,
    result: String,
    attempts: u64,
    first: String,
    last: String,
}

async fn account_page<B: Backend>(
    app: &Arc<App<B>>,
    session: Session,
    notice: Option<String>,
    problem: Option<String>,
    status: StatusCode,
) -> Response {
    let account = match app.backend.account(&session.user).await {
        Ok(a) => a,
        Err(e) => return backend_problem(e),
    };
    let u = session.user.clone();
    let folders = match blocking(app, move |b| b.folders(&u)).await {
        Ok(f) => f,
        Err(e) => return backend_problem(e),
    };
    let admin = app.backend.is_admin(&session.user);
    let mut r = render_page(&AccountPage {
        user: session.user,
        csrf: session.csrf,
        folders,
        folder: String::new(),
        used: size(account.used_bytes),
        quota: account.quota_bytes.map_or("no limit".to_string(), |q| {
            format!(
                "{} ({}% used)",
                size(q),
                account.used_bytes.saturating_mul(100) / q.max(1)
            )
        }),
        messages: match account.quota_messages {
            Some(q) => format!("{} of {q}", account.used_messages),
            None => account.used_messages.to_string(),
        },
        last_login: account
            .last_login_at
            .map_or("not recorded".to_string(), |t| format!("{} UTC", when(t))),
        logins: account
            .logins
            .into_iter()
            .map(|l| LoginShown {
                client: l.client,
                protocol: l.protocol,
                result: l.result,
                attempts: l.attempts,
                first: when(l.first_at),
                last: when(l.last_at),
            })
            .collect(),
        admin,
        notice,
        problem,
    });
    *r.status_mut() = status;
    r
}

async fn account<B: Backend>(
    State(app): State<Arc<App<B>>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
) -> Response {
    match app.session(&headers, peer.ip()) {
        Ok((_, session)) => account_page(&app, session, None, None, StatusCode::OK).await,
        Err(denied) => denied.into_response(),
    }
}

#[derive(Deserialize)]
struct PasswordForm {
    #[serde(default)]
    csrf: String,
    current: String,
    new: String,
    again: String,
}

/// Changes the password; the user's other browser sessions end (this one stays).
async fn change_password<B: Backend>(
    State(app): State<Arc<App<B>>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Form(form): Form<PasswordForm>,
) -> Response {
    let (token, session) = match app.form_session(&headers, peer.ip(), &form.csrf) {
        Ok(s) => s,
        Err(denied) => return denied.into_response(),
    };
    let refused = if form.new != form.again {
        Some((
            "The new passwords differ.".to_string(),
            StatusCode::BAD_REQUEST,
        ))
    } else if form.current.len() > CREDENTIAL_BYTES_MAX || form.new.len() > CREDENTIAL_BYTES_MAX {
        Some((
            "The password is too long.".to_string(),
            StatusCode::BAD_REQUEST,
        ))
    } else {
        match app
            .backend
            .change_password(&session.user, &form.current, &form.new, peer.ip())
            .await
        {
            Ok(()) => None,
            Err(PasswordError::WrongPassword) => Some((
                "The current password is wrong.".to_string(),
                StatusCode::FORBIDDEN,
            )),
            Err(PasswordError::Refused(why)) => Some((
                format!("That password cannot be used: {why}."),
                StatusCode::BAD_REQUEST,
            )),
            Err(PasswordError::Temporary(why)) => Some((
                format!("Cannot change it right now ({why}). Try again shortly."),
                StatusCode::SERVICE_UNAVAILABLE,
            )),
        }
    };
    match refused {
        Some((why, status)) => account_page(&app, session, None, Some(why), status).await,
        None => {
            let ended = app.sessions.end_user(&session.user, &token);
            tracing::info!(event = "password_changed", proto = "web", user = %session.user, client = %peer.ip(), sessions_ended = ended);
            account_page(
                &app,
                session,
                Some("Your password was changed. Your other web sessions have ended.".into()),
                None,
                StatusCode::OK,
            )
            .await
        }
    }
}

async fn style() -> Response {
    let mut r = include_str!("../templates/style.css").into_response();
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/css; charset=utf-8"),
    );
    r.headers_mut().insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("max-age=3600"),
    );
    r
}

#[cfg(test)]
mod tests;
