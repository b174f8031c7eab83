//! What every page shares: the router's state ([`App`], built from [`Config`]), the session
//! a request carries (from its cookie, CSRF-checked for forms), problem pages, template
//! rendering, backend calls on the blocking pool, and the list's date and size formats.
//!
//! The handlers (`lib.rs`'s mail pages, `compose.rs`, `admin_pages.rs`) use these; this
//! module uses none of them.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use askama::Template;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{Html, IntoResponse, Redirect, Response};

use crate::backend::{Backend, BackendError};
use crate::sessions::{Session, Sessions, same_token};

/// The cookie that names a session.
pub(crate) const COOKIE: &str = "mailstow_session";
/// Longest address and password a login form may carry (the directory bounds the password
/// again).
pub(crate) const CREDENTIAL_BYTES_MAX: usize = 1024;

/// The web view's limits.
#[derive(Debug, Clone)]
pub struct Config {
    /// Set `Secure` on the session cookie (the view is served over TLS).
    pub secure_cookie: bool,
    /// `web_sessions_max`: logged-in browser sessions at once.
    pub sessions_max: usize,
    /// A session ends after this long without a request...
    pub session_idle: Duration,
    /// ...and after this long in any case.
    pub session_lifetime: Duration,
    /// Messages per list page.
    pub page_size: usize,
    /// `web_request_bytes_max`: the largest request body.
    pub request_bytes_max: usize,
    /// A request (its body read and its answer made) is cut off after this: 408.
    pub request_timeout: Duration,
    /// `message_bytes_max`: what a written message may carry (its text and files); the
    /// compose form's request may be this large.
    pub message_bytes_max: usize,
    /// The server's `inflight_bytes_max` budget, which a written message's bytes are counted
    /// against while it is read and sent, as SMTP's are (`None`: not counted).
    pub inflight: Option<Arc<limits::ByteBudget>>,
    /// `sieve_script_bytes_max`: the largest script the rules pages store (the text editor's
    /// request may carry it, encoded).
    pub script_bytes_max: usize,
    /// What the autoconfiguration documents and the MTA-STS policy describe (`None`: they
    /// are not served).
    pub published: Option<Arc<crate::published::Published>>,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            secure_cookie: false,
            sessions_max: 10_000,
            session_idle: Duration::from_secs(30 * 60),
            session_lifetime: Duration::from_secs(12 * 3600),
            page_size: 50,
            request_bytes_max: 64 << 10,
            request_timeout: Duration::from_secs(30),
            message_bytes_max: 50 << 20,
            inflight: None,
            script_bytes_max: 64 << 10,
            published: None,
        }
    }
}

/// What every handler of the router shares.
pub(crate) struct App<B> {
    pub(crate) backend: Arc<B>,
    pub(crate) sessions: Sessions,
    pub(crate) config: Config,
    /// Requests that hold whole messages (open, download, forward, search) at once: each may
    /// hold `message_bytes_max` and its decoded copies, so memory stays bounded however many
    /// connections ask; the rest wait their turn.
    pub(crate) whole_messages: tokio::sync::Semaphore,
}

/// Requests holding whole messages at once (see `App::whole_messages`).
pub(crate) const WHOLE_MESSAGES_MAX: usize = 2;

/// A page for a failure: the status and one sentence.
pub(crate) fn problem(status: StatusCode, title: &str, detail: &str) -> Response {
    #[derive(Template)]
    #[template(path = "problem.html")]
    struct Problem<'a> {
        title: &'a str,
        detail: &'a str,
    }
    let page = Problem { title, detail };
    match page.render() {
        Ok(html) => (status, Html(html)).into_response(),
        Err(_) => status.into_response(),
    }
}

pub(crate) async fn not_found() -> Response {
    problem(StatusCode::NOT_FOUND, "Not found", "There is nothing here.")
}

pub(crate) fn backend_problem(e: BackendError) -> Response {
    match e {
        BackendError::NotFound => problem(
            StatusCode::NOT_FOUND,
            "Not found",
            "No such folder or message.",
        ),
        BackendError::Unavailable(why) => problem(
            StatusCode::SERVICE_UNAVAILABLE,
            "Temporarily unavailable",
            &format!("Your mailbox cannot be reached right now ({why}). Try again shortly."),
        ),
        BackendError::Failed(why) => {
            tracing::warn!(event = "web_error", error = %why);
            problem(
                StatusCode::INTERNAL_SERVER_ERROR,
                "Something went wrong",
                "The server could not do that. Try again later.",
            )
        }
    }
}

pub(crate) fn render_page(page: &impl Template) -> Response {
    match page.render() {
        Ok(html) => Html(html).into_response(),
        Err(e) => backend_problem(BackendError::Failed(format!("template: {e}"))),
    }
}

/// Runs a blocking backend call on tokio's blocking pool.
pub(crate) async fn blocking<B: Backend, T: Send + 'static>(
    app: &Arc<App<B>>,
    f: impl FnOnce(&B) -> Result<T, BackendError> + Send + 'static,
) -> Result<T, BackendError> {
    let backend = app.backend.clone();
    tokio::task::spawn_blocking(move || f(&backend))
        .await
        .unwrap_or_else(|e| Err(BackendError::Failed(format!("task: {e}"))))
}

fn cookie_token(headers: &HeaderMap) -> Option<&str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .find_map(|c| c.trim().strip_prefix(COOKIE)?.strip_prefix('='))
}

/// Why a request gets no session.
pub(crate) enum Denied {
    /// No live session: log in.
    Login,
    /// A form without its session's CSRF token.
    Forged,
}

impl IntoResponse for Denied {
    fn into_response(self) -> Response {
        match self {
            Denied::Login => Redirect::to("/login").into_response(),
            Denied::Forged => problem(
                StatusCode::FORBIDDEN,
                "Refused",
                "This form is out of date or did not come from this site. Go back, reload and try again.",
            ),
        }
    }
}

impl<B: Backend> App<B> {
    /// The request's live session (and its cookie token).
    pub(crate) fn session(
        &self,
        headers: &HeaderMap,
        client: IpAddr,
    ) -> Result<(String, Session), Denied> {
        let token = cookie_token(headers).ok_or(Denied::Login)?;
        match self.sessions.get(token) {
            Ok(Some(session)) if !self.backend.is_user(&session.user) => {
                // Deleted or renamed since the login.
                self.sessions.end(token);
                self.backend.logout(&session.user, client);
                Err(Denied::Login)
            }
            Ok(Some(session)) => Ok((token.to_string(), session)),
            Ok(None) => Err(Denied::Login),
            Err(user) => {
                self.backend.logout(&user, client);
                Err(Denied::Login)
            }
        }
    }

    /// The session of a state-changing form: refused (403) unless it carries the session's
    /// CSRF token.
    pub(crate) fn form_session(
        &self,
        headers: &HeaderMap,
        client: IpAddr,
        csrf: &str,
    ) -> Result<(String, Session), Denied> {
        let (token, session) = self.session(headers, client)?;
        if !same_token(csrf, &session.csrf) {
            return Err(Denied::Forged);
        }
        Ok((token, session))
    }

    pub(crate) fn cookie(&self, value: &str, max_age: Option<u64>) -> HeaderValue {
        let secure = if self.config.secure_cookie {
            "; Secure"
        } else {
            ""
        };
        let age = max_age.map_or(String::new(), |s| format!("; Max-Age={s}"));
        HeaderValue::from_str(&format!(
            "{COOKIE}={value}; Path=/; HttpOnly; SameSite=Strict{secure}{age}"
        ))
        .unwrap_or_else(|_| HeaderValue::from_static(""))
    }
}

/// Unix seconds as `YYYY-MM-DD HH:MM` UTC (the list's column; the message shows its Date:).
pub(crate) fn when(unix: i64) -> String {
    let days = unix.div_euclid(86_400);
    let secs = unix.rem_euclid(86_400);
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}",
        secs / 3600,
        secs % 3600 / 60
    )
}

pub(crate) fn size(bytes: u64) -> String {
    match bytes {
        b if b < 1024 => format!("{b} B"),
        b if b < 1 << 20 => format!("{} KiB", b.div_ceil(1024)),
        b => format!("{:.1} MiB", b as f64 / f64::from(1 << 20)),
    }
}
