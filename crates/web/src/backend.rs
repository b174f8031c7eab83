//! What the web view needs from the mail server: the one boundary it crosses. The server
//! crate implements it over the directory and the store (and, in a cluster, the owner node);
//! the web crate's own tests implement it in memory.
//!
//! Every method but [`Backend::login`] may block (the store reads files): the web view calls
//! them on tokio's blocking pool.

use std::future::Future;
use std::net::IpAddr;

/// A folder in the folder list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FolderInfo {
    pub name: String,
    pub total: u64,
    pub unseen: u64,
}

/// One page of a folder's message list, newest first, from the stored summaries only.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FolderPage {
    pub total: u64,
    pub unseen: u64,
    /// Changes whenever the folder does (new, changed or removed messages): its highest
    /// MODSEQ. The live list compares it to find changes made before its stream opened.
    pub version: u64,
    pub messages: Vec<Listed>,
}

/// A message as the list shows it: the compact summary (JMAP's Email properties, RFC 8621
/// 4.1, where it has them: `receivedAt`, `size`, `from`, `to`, `subject`, `sentAt`,
/// `hasAttachment`, `preview`, and two keywords).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    pub uid: u32,
    /// Unix seconds.
    pub received_at: i64,
    pub size: u64,
    pub from: String,
    pub to: String,
    pub subject: String,
    /// The Date: field as written, or empty.
    pub sent_at: String,
    pub has_attachment: bool,
    pub preview: String,
    pub seen: bool,
    pub flagged: bool,
}

/// A message's content and the flags the page shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stored {
    pub content: Vec<u8>,
    pub seen: bool,
    pub flagged: bool,
}

/// A flag the reader can switch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flag {
    Seen,
    Flagged,
}

/// Why a login did not succeed. The page says the same for a wrong password and an unknown
/// address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LoginError {
    BadCredentials,
    /// Throttled, the directory unavailable, the user's node down: try again later.
    Temporary(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BackendError {
    /// No such folder or message for this user (never "it exists but is not yours").
    NotFound,
    /// The user's mailbox cannot be reached now (its node is down, it is being moved).
    Unavailable(String),
    Failed(String),
}

pub trait Backend: Send + Sync + 'static {
    /// Checks a password, throttled and logged like an IMAP login; the user's address.
    fn login(
        &self,
        username: &str,
        password: &str,
        client: IpAddr,
    ) -> impl Future<Output = Result<String, LoginError>> + Send;

    /// A session ended (logged out or expired).
    fn logout(&self, user: &str, client: IpAddr);

    /// The account page's figures.
    fn account(&self, user: &str) -> impl Future<Output = Result<Account, BackendError>> + Send;

    /// Checks `current` (throttled like a login), then sets `new`.
    fn change_password(
        &self,
        user: &str,
        current: &str,
        new: &str,
        client: IpAddr,
    ) -> impl Future<Output = Result<(), PasswordError>> + Send;

    /// The user's folders with their counts, INBOX first.
    fn folders(&self, user: &str) -> Result<Vec<FolderInfo>, BackendError>;

    /// Newest first: at most `count` messages with a UID below `before` (the newest when
    /// `None`).
    fn page(
        &self,
        user: &str,
        folder: &str,
        before: Option<u32>,
        count: usize,
    ) -> Result<FolderPage, BackendError>;

    /// A whole message, as stored, with its flags.
    fn message(&self, user: &str, folder: &str, uid: u32) -> Result<Stored, BackendError>;

    fn set_flag(
        &self,
        user: &str,
        folder: &str,
        uid: u32,
        flag: Flag,
        on: bool,
    ) -> Result<(), BackendError>;

    /// Moves a message to another of the user's folders (created first when it is
    /// [`TRASH`]).
    fn move_to(&self, user: &str, folder: &str, uid: u32, dest: &str) -> Result<(), BackendError>;

    /// Submits a message the user wrote (`message`: the whole RFC 5322 message, From: the
    /// user) to `recipients`, as the submission service would (the same checks, DKIM
    /// signature, queue and log line), and keeps a copy in the user's Sent folder.
    fn send(
        &self,
        user: &str,
        recipients: &[String],
        message: Vec<u8>,
        client: IpAddr,
    ) -> impl Future<Output = Result<(), SendError>> + Send;

    /// Follows the user's mailbox (`/events`).
    fn changes(&self, user: &str) -> Result<Changes, BackendError>;

    /// Removes a message for good.
    fn expunge(&self, user: &str, folder: &str, uid: u32) -> Result<(), BackendError>;

    /// Removes every message of a folder for good.
    fn expunge_all(&self, user: &str, folder: &str) -> Result<(), BackendError>;

    /// Newest first, at most `count` messages of the folder whose sender, subject or text
    /// contains `query` (case-insensitive), looking at no more than `examined_max` messages;
    /// the page, and whether the search stopped at `examined_max`.
    fn search(
        &self,
        user: &str,
        folder: &str,
        query: &str,
        count: usize,
        examined_max: usize,
    ) -> Result<(FolderPage, bool), BackendError>;

    /// Whether the user still exists (asked at every request, from memory: a deleted or
    /// renamed user's browser sessions end at their next request).
    fn is_user(&self, user: &str) -> bool;

    /// Whether the user may use the admin pages, now (asked at every admin request, so a
    /// right taken away ends at the next one).
    /// Whether `domain` is one of ours (the autoconfiguration documents and the MTA-STS
    /// policy answer only for those). From memory: no I/O.
    fn serves_domain(&self, domain: &str) -> bool;

    fn is_admin(&self, user: &str) -> bool;

    /// The user's Sieve scripts (their rules), sorted by name, at most one active.
    fn sieve_scripts(
        &self,
        user: &str,
    ) -> impl Future<Output = Result<Vec<ScriptInfo>, BackendError>> + Send;

    /// One script's source (`NotFound`: no such script).
    fn sieve_script(
        &self,
        user: &str,
        name: &str,
    ) -> impl Future<Output = Result<String, BackendError>> + Send;

    /// Checks `source` with the Sieve interpreter (the server's limits), then stores it as
    /// `name` (created or replaced) and, with `activate`, makes it the active script.
    fn sieve_save(
        &self,
        user: &str,
        name: &str,
        source: &str,
        activate: bool,
    ) -> impl Future<Output = Result<(), ScriptError>> + Send;

    /// Makes `name` the active script, or none with `None`.
    fn sieve_activate(
        &self,
        user: &str,
        name: Option<&str>,
    ) -> impl Future<Output = Result<(), ScriptError>> + Send;

    /// Deletes a script that is not active.
    fn sieve_delete(
        &self,
        user: &str,
        name: &str,
    ) -> impl Future<Output = Result<(), ScriptError>> + Send;

    /// What the admin pages show: the server's (this node's) state; see [`AdminData`].
    fn admin_data(
        &self,
        what: AdminView,
    ) -> impl Future<Output = Result<AdminData, BackendError>> + Send;

    /// Carries out an admin's action and logs it (who, from where, what, the outcome):
    /// `Ok(what was done)` or `Err(why not)`, one sentence each.
    fn admin_act(
        &self,
        admin: &str,
        client: IpAddr,
        action: AdminAction,
    ) -> impl Future<Output = Result<String, String>> + Send;
}

/// Which admin page's data to fetch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AdminView {
    Overview,
    Domains,
    /// The users whose address contains the text (all when empty), at most
    /// [`ADMIN_USERS_SHOWN_MAX`], in address order.
    Users(String),
    Aliases,
    Queue,
    /// One queued message (its id).
    Queued(u64),
    Counters,
    /// The TLS-RPT and DMARC aggregate reports received and sent, and the certificate.
    Reports,
    /// One received report (its id).
    Report(i64),
}

/// An admin page's data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AdminData {
    Overview {
        /// This node's name (a single server: its host name).
        node: String,
        domains: usize,
        users: usize,
        aliases: usize,
        queued: usize,
    },
    Domains(Vec<String>),
    /// The users shown, and how many matched in all.
    Users(Vec<AdminUser>, usize),
    /// (source, destination), sorted.
    Aliases(Vec<(String, String)>),
    Queue(Vec<Queued>),
    /// `mailstow queue show`'s text.
    Queued(String),
    /// (metric with its labels, value), as the Prometheus endpoint gives them.
    Counters(Vec<(String, String)>),
    Reports(AdminReports),
    /// `mailstow report show`'s text.
    Report(String),
}

/// Users one admin page lists at most (a search narrows the rest down).
pub const ADMIN_USERS_SHOWN_MAX: usize = 500;

/// Reports the reports page lists at most of each list, received and sent (the CLI's
/// `mailstow report list` shows the rest).
pub const ADMIN_REPORTS_SHOWN_MAX: usize = 100;

/// Which aggregate report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AdminReportKind {
    /// SMTP TLS Reporting (RFC 8460).
    TlsRpt,
    /// DMARC aggregate (RFC 7489 7.2).
    Dmarc,
}

/// What the reports page shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdminReports {
    /// Reports other organizations sent about our domains, newest first, at most
    /// [`ADMIN_REPORTS_SHOWN_MAX`].
    pub received: Vec<AdminReceivedReport>,
    /// Whether more were received than are listed.
    pub received_more: bool,
    /// The reports we sent, newest day first, at most [`ADMIN_REPORTS_SHOWN_MAX`].
    pub sent: Vec<AdminSentReport>,
    pub sent_more: bool,
    pub certificate: AdminCertificate,
}

/// A received report as the reports page lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdminReceivedReport {
    pub id: i64,
    pub kind: AdminReportKind,
    /// The organization that sent it, as it wrote its name.
    pub org: String,
    pub report_id: String,
    pub domain: String,
    /// The period it covers, Unix seconds.
    pub begin: i64,
    pub end: i64,
    /// TLS-RPT: sessions; DMARC: messages.
    pub total: u64,
    /// TLS-RPT: failed sessions; DMARC: messages that failed DMARC.
    pub failed: u64,
}

/// A report we sent (or the record that a domain asks for none).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdminSentReport {
    pub kind: AdminReportKind,
    pub domain: String,
    /// The UTC day it covers: Unix seconds of its start.
    pub day: i64,
    /// The addresses it went to; empty when the domain asks for no report.
    pub recipients: Vec<String>,
    /// Unix seconds.
    pub sent_at: i64,
}

/// The server's certificate as the reports page shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AdminCertificate {
    /// Kept by ACME in the data directory (`mailstow acme status`'s facts).
    Acme {
        /// The names it covers; empty when none has been obtained yet.
        names: Vec<String>,
        /// Unix seconds.
        not_after: Option<i64>,
        /// Whole days until `not_after`, negative once it has passed.
        days_left: Option<i64>,
        last_error: Option<String>,
        consecutive_failures: u32,
        /// Unix seconds.
        next_attempt: Option<i64>,
        /// Whether this server renews it (`[acme]` is configured).
        renewing: bool,
    },
    /// No ACME directory: the configured certificate, or the self-signed one.
    Configured,
    /// The ACME directory could not be read: why.
    Unreadable(String),
}

/// A user as the admin pages list it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdminUser {
    pub address: String,
    pub quota_bytes: Option<u64>,
    /// `None`: not known here (the mailbox is on another node).
    pub used_bytes: Option<u64>,
    pub messages: Option<u64>,
    pub last_login_at: Option<i64>,
    pub admin: bool,
    /// The cluster node holding the mailbox.
    pub node: Option<String>,
}

/// A message in this node's outgoing queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Queued {
    pub id: u64,
    pub sender: String,
    /// Recipients still to deliver.
    pub recipients: Vec<String>,
    pub size: u64,
    /// Unix seconds.
    pub queued_at: i64,
    /// Deliveries tried so far, for the recipient tried most.
    pub attempts: u32,
    /// The last delivery error, if any.
    pub last_error: Option<String>,
}

/// What an admin asks the server to do. Passwords are never logged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AdminAction {
    AddDomain(String),
    DeleteDomain(String),
    AddUser {
        address: String,
        password: String,
        quota_bytes: Option<u64>,
        admin: bool,
    },
    DeleteUser(String),
    SetQuota {
        address: String,
        quota_bytes: Option<u64>,
    },
    ResetPassword {
        address: String,
        password: String,
    },
    SetAdmin {
        address: String,
        on: bool,
    },
    AddAlias {
        source: String,
        destination: String,
    },
    DeleteAlias {
        source: String,
        destination: String,
    },
    Retry(u64),
    Remove(u64),
}

impl AdminAction {
    /// The action for the log (no password).
    pub fn describe(&self) -> String {
        match self {
            AdminAction::AddDomain(d) => format!("domain add {d}"),
            AdminAction::DeleteDomain(d) => format!("domain del {d}"),
            AdminAction::AddUser {
                address,
                quota_bytes,
                admin,
                ..
            } => format!(
                "user add {address} quota={} admin={admin}",
                quota_bytes.map_or("none".to_string(), |q| q.to_string())
            ),
            AdminAction::DeleteUser(a) => format!("user del {a}"),
            AdminAction::SetQuota {
                address,
                quota_bytes,
            } => format!(
                "user quota {address} {}",
                quota_bytes.map_or("none".to_string(), |q| q.to_string())
            ),
            AdminAction::ResetPassword { address, .. } => format!("user passwd {address}"),
            AdminAction::SetAdmin { address, on } => {
                format!("user admin {address} {}", if *on { "on" } else { "off" })
            }
            AdminAction::AddAlias {
                source,
                destination,
            } => format!("alias add {source} {destination}"),
            AdminAction::DeleteAlias {
                source,
                destination,
            } => format!("alias del {source} {destination}"),
            AdminAction::Retry(id) => format!("queue retry {id}"),
            AdminAction::Remove(id) => format!("queue remove {id}"),
        }
    }
}

/// One row of the account page's login history.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoginRow {
    pub client: String,
    pub protocol: String,
    /// `ok`, `failed` (wrong password) or `throttled`.
    pub result: String,
    pub attempts: u64,
    /// Unix seconds.
    pub first_at: i64,
    pub last_at: i64,
}

/// What the account page shows.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Account {
    pub address: String,
    pub used_bytes: u64,
    pub used_messages: u64,
    /// `None`: no limit.
    pub quota_bytes: Option<u64>,
    pub quota_messages: Option<u64>,
    /// Unix seconds of the last login before this one (any protocol), when recorded.
    pub last_login_at: Option<i64>,
    /// The recent logins, failed attempts included, the most recent first.
    pub logins: Vec<LoginRow>,
}

/// Why a password was not changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PasswordError {
    /// The current password given was wrong.
    WrongPassword,
    /// The new one is not acceptable (empty, too long, ...): the reason.
    Refused(String),
    Temporary(String),
}

/// Why a message was not sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SendError {
    /// A recipient the server refuses (unknown local user, bad address): which and why.
    Recipient(String),
    /// Too large, too many recipients, over quota: why.
    Refused(String),
    Temporary(String),
}

/// A logged-in browser's view of its user's mailbox changing: what feeds the live list.
pub struct Changes {
    /// Bumped after every committed change to the user's folders (the same signal that wakes
    /// IMAP IDLE).
    pub changed: tokio::sync::watch::Receiver<u64>,
    /// Turns true when the user is deleted or renamed: the stream ends.
    pub ended: tokio::sync::watch::Receiver<bool>,
    /// Held while the stream runs (the server counts it among the user's sessions).
    pub guard: Box<dyn Send + Sync>,
}

/// Where a deleted message goes (RFC 6154 `\Trash`); deleting there removes it for good.
pub const TRASH: &str = "Trash";

/// A user's Sieve script as listed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScriptInfo {
    pub name: String,
    pub active: bool,
    pub bytes: usize,
}

/// Why a script was not stored, activated or deleted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScriptError {
    /// The interpreter refused it: where (1-based) and why.
    Invalid {
        line: u32,
        column: u32,
        message: String,
    },
    /// A rule of the directory's: a bad name, a limit (`sieve_scripts_max`, the script's
    /// size), an active script that cannot be deleted: one sentence.
    Refused(String),
    Backend(BackendError),
}

impl From<BackendError> for ScriptError {
    fn from(e: BackendError) -> ScriptError {
        ScriptError::Backend(e)
    }
}
