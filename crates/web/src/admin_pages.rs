//! The admin pages (`/admin/...`): domains, users, aliases, the queue, the counters, and the
//! TLS-RPT and DMARC reports with the certificate (read-only), for users the directory marks
//! admin (`mailstow user add --admin`, `user admin ADDRESS on`).
//!
//! Every request checks the session, then [`Backend::is_admin`] at that moment (a non-admin
//! gets 403, the same for every admin URL, so nothing is learnt by trying them), and every
//! action form its CSRF token. The backend carries the action out and logs it. An admin
//! cannot delete themself or take away their own right here: that is left to the CLI, so a
//! slip of the mouse never locks the last admin out.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use askama::Template;
use axum::extract::{ConnectInfo, Form, Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use crate::app::{
    App, CREDENTIAL_BYTES_MAX, Denied, backend_problem, not_found, problem, render_page, size, when,
};
use crate::backend::{
    ADMIN_REPORTS_SHOWN_MAX, AdminAction, AdminCertificate, AdminData, AdminReportKind,
    AdminReports, AdminView, Backend,
};
use crate::sessions::Session;

/// Longest field an admin form may carry (addresses, domains, quotas; passwords have
/// [`CREDENTIAL_BYTES_MAX`]).
const FIELD_BYTES_MAX: usize = 512;

/// A user row as the template shows it.
struct UserRow {
    address: String,
    quota: String,
    used: String,
    messages: String,
    last_login: String,
    admin: bool,
    node: String,
}

/// A queue row as the template shows it.
struct QueueRow {
    id: u64,
    sender: String,
    recipients: String,
    size: String,
    queued: String,
    attempts: u32,
    last_error: String,
}

/// A received report's row as the template shows it.
struct ReceivedRow {
    id: i64,
    kind: &'static str,
    org: String,
    domain: String,
    period: String,
    summary: String,
    report_id: String,
}

/// A sent report's row as the template shows it.
struct SentRow {
    kind: &'static str,
    domain: String,
    day: String,
    recipients: String,
    sent: String,
}

#[derive(Template)]
#[template(path = "admin.html")]
struct AdminPage {
    user: String,
    csrf: String,
    /// Which tab: `overview`, `users`, `domains`, `aliases`, `queue`, `queued`, `counters`,
    /// `reports`, `report`.
    tab: &'static str,
    notice: Option<String>,
    problem: Option<String>,
    overview: Vec<(&'static str, String)>,
    domains: Vec<String>,
    users: Vec<UserRow>,
    /// The users page's search text, and how many users matched it.
    filter: String,
    matched: usize,
    aliases: Vec<(String, String)>,
    queue: Vec<QueueRow>,
    queued: String,
    queued_id: u64,
    counters: Vec<(String, String)>,
    received: Vec<ReceivedRow>,
    received_more: bool,
    sent: Vec<SentRow>,
    sent_more: bool,
    /// The certificate's facts, (name, value).
    certificate: Vec<(&'static str, String)>,
    /// Lists are cut at this many rows.
    shown_max: usize,
    report: String,
    report_id: i64,
}

impl AdminPage {
    fn new(session: Session, tab: &'static str) -> AdminPage {
        AdminPage {
            user: session.user,
            csrf: session.csrf,
            tab,
            notice: None,
            problem: None,
            overview: Vec::new(),
            domains: Vec::new(),
            users: Vec::new(),
            filter: String::new(),
            matched: 0,
            aliases: Vec::new(),
            queue: Vec::new(),
            queued: String::new(),
            queued_id: 0,
            counters: Vec::new(),
            received: Vec::new(),
            received_more: false,
            sent: Vec::new(),
            sent_more: false,
            certificate: Vec::new(),
            shown_max: ADMIN_REPORTS_SHOWN_MAX,
            report: String::new(),
            report_id: 0,
        }
    }

    fn set_reports(&mut self, reports: AdminReports) {
        self.received_more = reports.received_more;
        self.received = reports
            .received
            .into_iter()
            .take(ADMIN_REPORTS_SHOWN_MAX)
            .map(|r| {
                let (what, failed) = match r.kind {
                    AdminReportKind::TlsRpt => ("sessions", "failed"),
                    AdminReportKind::Dmarc => ("messages", "failed DMARC"),
                };
                ReceivedRow {
                    id: r.id,
                    kind: kind_name(r.kind),
                    org: r.org,
                    domain: r.domain,
                    period: format!("{} – {}", when(r.begin), when(r.end)),
                    summary: format!("{} {what}, {} {failed}", r.total, r.failed),
                    report_id: r.report_id,
                }
            })
            .collect();
        self.sent_more = reports.sent_more;
        self.sent = reports
            .sent
            .into_iter()
            .take(ADMIN_REPORTS_SHOWN_MAX)
            .map(|r| SentRow {
                kind: kind_name(r.kind),
                domain: r.domain,
                day: date(r.day),
                recipients: if r.recipients.is_empty() {
                    "none (the domain asks for no report)".into()
                } else {
                    r.recipients.join(", ")
                },
                sent: when(r.sent_at),
            })
            .collect();
        self.certificate = certificate_facts(reports.certificate);
    }
}

fn kind_name(kind: AdminReportKind) -> &'static str {
    match kind {
        AdminReportKind::TlsRpt => "TLS-RPT",
        AdminReportKind::Dmarc => "DMARC",
    }
}

/// The day of a Unix time, `YYYY-MM-DD`.
fn date(unix: i64) -> String {
    let mut text = when(unix);
    text.truncate(text.find(' ').unwrap_or(text.len()));
    text
}

/// The certificate as (name, value) lines, like `mailstow acme status`.
fn certificate_facts(certificate: AdminCertificate) -> Vec<(&'static str, String)> {
    match certificate {
        AdminCertificate::Configured => vec![(
            "Certificate",
            "self-signed or configured (no ACME directory)".into(),
        )],
        AdminCertificate::Unreadable(why) => {
            vec![("Certificate", format!("ACME directory unreadable: {why}"))]
        }
        AdminCertificate::Acme {
            names,
            not_after,
            days_left,
            last_error,
            consecutive_failures,
            next_attempt,
            renewing,
        } => {
            let names = if names.is_empty() {
                "none obtained yet".to_string()
            } else {
                names.join(", ")
            };
            let not_after = match (not_after, days_left) {
                (Some(t), Some(days)) if days < 0 => format!("{} (expired)", when(t)),
                (Some(t), Some(1)) => format!("{} (1 day left)", when(t)),
                (Some(t), Some(days)) => format!("{} ({days} days left)", when(t)),
                (Some(t), None) => when(t),
                (None, _) => "–".into(),
            };
            let renewal = if renewing {
                "by this server ([acme])"
            } else {
                "off (no [acme] in the configuration)"
            };
            vec![
                ("Certificate", "ACME".to_string()),
                ("Names", names),
                ("Valid until", not_after),
                ("Renewal", renewal.to_string()),
                (
                    "Last error",
                    last_error.map_or("none".into(), |e| {
                        format!("{e} ({consecutive_failures} failures in a row)")
                    }),
                ),
                ("Next attempt", next_attempt.map_or("–".into(), when)),
            ]
        }
    }
}

/// Why an admin request is not served.
enum NotAdmin {
    /// No session (log in) or a forged form.
    Session(Denied),
    /// The user is not an admin: 403.
    Forbidden,
}

impl IntoResponse for NotAdmin {
    fn into_response(self) -> Response {
        match self {
            NotAdmin::Session(denied) => denied.into_response(),
            NotAdmin::Forbidden => problem(
                StatusCode::FORBIDDEN,
                "Forbidden",
                "These pages are for administrators.",
            ),
        }
    }
}

impl<B: Backend> App<B> {
    /// The session of an admin request, if its user is an admin now.
    fn admin_session(&self, headers: &HeaderMap, client: IpAddr) -> Result<Session, NotAdmin> {
        let (_, session) = self.session(headers, client).map_err(NotAdmin::Session)?;
        if !self.backend.is_admin(&session.user) {
            tracing::info!(event = "admin_refused", user = %session.user, client = %client);
            return Err(NotAdmin::Forbidden);
        }
        Ok(session)
    }
}

/// Fills `page` with the data of its tab.
async fn fill<B: Backend>(app: &Arc<App<B>>, page: &mut AdminPage) -> Result<(), Response> {
    let view = match page.tab {
        "users" => AdminView::Users(page.filter.clone()),
        "domains" => AdminView::Domains,
        "aliases" => AdminView::Aliases,
        "queue" => AdminView::Queue,
        "queued" => AdminView::Queued(page.queued_id),
        "counters" => AdminView::Counters,
        "reports" => AdminView::Reports,
        "report" => AdminView::Report(page.report_id),
        _ => AdminView::Overview,
    };
    let data = app
        .backend
        .admin_data(view)
        .await
        .map_err(backend_problem)?;
    match data {
        AdminData::Overview {
            node,
            domains,
            users,
            aliases,
            queued,
        } => {
            page.overview = vec![
                ("Node", node),
                ("Domains", domains.to_string()),
                ("Users", users.to_string()),
                ("Aliases", aliases.to_string()),
                ("Messages in this node's queue", queued.to_string()),
            ];
        }
        AdminData::Domains(d) => page.domains = d,
        AdminData::Users(users, matched) => {
            page.matched = matched;
            page.users = users
                .into_iter()
                .map(|u| UserRow {
                    quota: u.quota_bytes.map_or("no limit".into(), size),
                    used: u.used_bytes.map_or("–".into(), size),
                    messages: u.messages.map_or("–".into(), |m| m.to_string()),
                    last_login: u.last_login_at.map_or("never".into(), when),
                    admin: u.admin,
                    node: u.node.unwrap_or_default(),
                    address: u.address,
                })
                .collect();
        }
        AdminData::Aliases(a) => page.aliases = a,
        AdminData::Queue(q) => {
            page.queue = q
                .into_iter()
                .map(|m| QueueRow {
                    id: m.id,
                    sender: if m.sender.is_empty() {
                        "<>".into()
                    } else {
                        m.sender
                    },
                    recipients: m.recipients.join(", "),
                    size: size(m.size),
                    queued: when(m.queued_at),
                    attempts: m.attempts,
                    last_error: m.last_error.unwrap_or_default(),
                })
                .collect();
        }
        AdminData::Queued(text) => page.queued = text,
        AdminData::Counters(c) => page.counters = c,
        AdminData::Reports(reports) => page.set_reports(reports),
        AdminData::Report(text) => page.report = text,
    }
    Ok(())
}

async fn show<B: Backend>(app: &Arc<App<B>>, mut page: AdminPage, status: StatusCode) -> Response {
    if let Err(r) = fill(app, &mut page).await {
        return r;
    }
    let mut r = render_page(&page);
    *r.status_mut() = status;
    r
}

fn tab_of(section: &str) -> Option<&'static str> {
    Some(match section {
        "users" => "users",
        "domains" => "domains",
        "aliases" => "aliases",
        "queue" => "queue",
        "counters" => "counters",
        "reports" => "reports",
        _ => return None,
    })
}

pub(crate) async fn overview<B: Backend>(
    State(app): State<Arc<App<B>>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
) -> Response {
    match app.admin_session(&headers, peer.ip()) {
        Ok(session) => show(&app, AdminPage::new(session, "overview"), StatusCode::OK).await,
        Err(denied) => denied.into_response(),
    }
}

/// `/admin/users?q=TEXT`: the users whose address contains TEXT.
#[derive(Deserialize)]
pub(crate) struct SectionQuery {
    #[serde(default)]
    q: String,
}

pub(crate) async fn section<B: Backend>(
    State(app): State<Arc<App<B>>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    Path(section): Path<String>,
    Query(query): Query<SectionQuery>,
    headers: HeaderMap,
) -> Response {
    let session = match app.admin_session(&headers, peer.ip()) {
        Ok(s) => s,
        Err(denied) => return denied.into_response(),
    };
    match tab_of(&section) {
        Some(tab) => {
            let mut page = AdminPage::new(session, tab);
            if query.q.len() <= FIELD_BYTES_MAX {
                page.filter = query.q.trim().to_ascii_lowercase();
            }
            show(&app, page, StatusCode::OK).await
        }
        None => not_found().await,
    }
}

#[derive(Deserialize)]
pub(crate) struct QueuedQuery {
    id: u64,
}

pub(crate) async fn queued<B: Backend>(
    State(app): State<Arc<App<B>>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    Query(q): Query<QueuedQuery>,
    headers: HeaderMap,
) -> Response {
    let session = match app.admin_session(&headers, peer.ip()) {
        Ok(s) => s,
        Err(denied) => return denied.into_response(),
    };
    let mut page = AdminPage::new(session, "queued");
    page.queued_id = q.id;
    show(&app, page, StatusCode::OK).await
}

#[derive(Deserialize)]
pub(crate) struct ReportQuery {
    id: i64,
}

/// `/admin/reports/show?id=N`: one received report's text.
pub(crate) async fn report<B: Backend>(
    State(app): State<Arc<App<B>>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    Query(q): Query<ReportQuery>,
    headers: HeaderMap,
) -> Response {
    let session = match app.admin_session(&headers, peer.ip()) {
        Ok(s) => s,
        Err(denied) => return denied.into_response(),
    };
    let mut page = AdminPage::new(session, "report");
    page.report_id = q.id;
    show(&app, page, StatusCode::OK).await
}

/// Every admin form's fields; each action reads the ones it needs.
#[derive(Deserialize, Default)]
pub(crate) struct ActionForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    name: String,
    #[serde(default)]
    address: String,
    #[serde(default)]
    password: String,
    #[serde(default)]
    quota: String,
    /// A checkbox: present (any value) = on.
    admin: Option<String>,
    #[serde(default)]
    on: String,
    #[serde(default)]
    source: String,
    #[serde(default)]
    destination: String,
    #[serde(default)]
    id: String,
}

/// A quota as the forms take it, like `mailstow user quota`: empty or `none` = no limit, a
/// number of bytes with an optional `K`, `M`, `G` or `T` (binary units).
pub(crate) fn parse_quota(text: &str) -> Result<Option<u64>, String> {
    let t = text.trim();
    if t.is_empty() || t.eq_ignore_ascii_case("none") {
        return Ok(None);
    }
    let (digits, shift) = match t.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => {
            let shift = match c.to_ascii_uppercase() {
                'B' => 0,
                'K' => 10,
                'M' => 20,
                'G' => 30,
                'T' => 40,
                _ => return Err(format!("“{t}” is not a size (like 500M or 2G)")),
            };
            (&t[..i], shift)
        }
        _ => (t, 0),
    };
    let n: u64 = digits
        .trim()
        .parse()
        .map_err(|_| format!("“{t}” is not a size (like 500M or 2G)"))?;
    n.checked_mul(1u64 << shift)
        .filter(|&b| i64::try_from(b).is_ok())
        .map(Some)
        .ok_or_else(|| format!("{t} is too large"))
}

/// The action a form asks for, and the tab to show after it.
fn action_of(
    section: &str,
    verb: &str,
    f: ActionForm,
) -> Option<(&'static str, Result<AdminAction, String>)> {
    let id = |text: &str| {
        text.trim()
            .parse::<u64>()
            .map_err(|_| "That is not a queue id.".to_string())
    };
    let quota = parse_quota(&f.quota);
    Some(match (section, verb) {
        ("domains", "add") => ("domains", Ok(AdminAction::AddDomain(f.name))),
        ("domains", "delete") => ("domains", Ok(AdminAction::DeleteDomain(f.name))),
        ("users", "add") => (
            "users",
            quota.map(|quota_bytes| AdminAction::AddUser {
                address: f.address,
                password: f.password,
                quota_bytes,
                admin: f.admin.is_some(),
            }),
        ),
        ("users", "delete") => ("users", Ok(AdminAction::DeleteUser(f.address))),
        ("users", "quota") => (
            "users",
            quota.map(|quota_bytes| AdminAction::SetQuota {
                address: f.address,
                quota_bytes,
            }),
        ),
        ("users", "password") => (
            "users",
            Ok(AdminAction::ResetPassword {
                address: f.address,
                password: f.password,
            }),
        ),
        ("users", "admin") => (
            "users",
            Ok(AdminAction::SetAdmin {
                address: f.address,
                on: f.on == "on",
            }),
        ),
        ("aliases", "add") => (
            "aliases",
            Ok(AdminAction::AddAlias {
                source: f.source,
                destination: f.destination,
            }),
        ),
        ("aliases", "delete") => (
            "aliases",
            Ok(AdminAction::DeleteAlias {
                source: f.source,
                destination: f.destination,
            }),
        ),
        ("queue", "retry") => ("queue", id(&f.id).map(AdminAction::Retry)),
        ("queue", "remove") => ("queue", id(&f.id).map(AdminAction::Remove)),
        _ => return None,
    })
}

/// Refuses what must not be done from here (see the module documentation).
fn refuse_self(admin: &str, action: &AdminAction) -> Option<&'static str> {
    let same = |a: &str| a.trim().eq_ignore_ascii_case(admin);
    match action {
        AdminAction::DeleteUser(a) if same(a) => {
            Some("You cannot delete your own account here (use `mailstow user del`).")
        }
        AdminAction::SetAdmin { address, on: false } if same(address) => {
            Some("You cannot take away your own admin right here (use `mailstow user admin`).")
        }
        _ => None,
    }
}

pub(crate) async fn act<B: Backend>(
    State(app): State<Arc<App<B>>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    Path((section, verb)): Path<(String, String)>,
    headers: HeaderMap,
    Form(form): Form<ActionForm>,
) -> Response {
    // The right first (403 for every non-admin, forged or not), then the token.
    let session = match app.admin_session(&headers, peer.ip()) {
        Ok(s) => s,
        Err(denied) => return denied.into_response(),
    };
    if let Err(denied) = app.form_session(&headers, peer.ip(), &form.csrf) {
        return denied.into_response();
    }
    let too_long = [
        &form.name,
        &form.address,
        &form.quota,
        &form.source,
        &form.destination,
        &form.id,
    ]
    .iter()
    .any(|f| f.len() > FIELD_BYTES_MAX)
        || form.password.len() > CREDENTIAL_BYTES_MAX;
    let Some((tab, action)) = action_of(&section, &verb, form) else {
        return not_found().await;
    };
    let admin = session.user.clone();
    let mut page = AdminPage::new(session, tab);
    let outcome = match action {
        _ if too_long => Err("A field is too long.".to_string()),
        Err(why) => Err(why),
        Ok(action) => match refuse_self(&admin, &action) {
            Some(why) => Err(why.to_string()),
            None => app.backend.admin_act(&admin, peer.ip(), action).await,
        },
    };
    let status = match outcome {
        Ok(done) => {
            page.notice = Some(done);
            StatusCode::OK
        }
        Err(why) => {
            page.problem = Some(why);
            StatusCode::BAD_REQUEST
        }
    };
    show(&app, page, status).await
}

#[cfg(test)]
mod tests {
    use super::parse_quota;

    #[test]
    fn quotas_parse_like_the_cli() {
        assert_eq!(parse_quota(""), Ok(None));
        assert_eq!(parse_quota("none"), Ok(None));
        assert_eq!(parse_quota("512"), Ok(Some(512)));
        assert_eq!(parse_quota("500M"), Ok(Some(500 << 20)));
        assert_eq!(parse_quota("2g"), Ok(Some(2 << 30)));
        assert!(parse_quota("2X").is_err());
        assert!(parse_quota("99999999T").is_err());
        assert!(parse_quota("-1").is_err());
    }
}
