//! The session: states (RFC 9051 3), the command loop, and the untagged updates other
//! sessions' changes cause.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use limits::{Deadline, Deadlines};

use crate::config::{Config, LOGIN_TIMEOUT};
use crate::event::{AuthResult, Event};
use crate::framer::{Frame, Framer, Limit};
use crate::parse::parse;
use crate::selected::Selected;

/// Where subscriptions live (RFC 9051 6.3.7): outside the store, in the directory.
pub trait Subscriptions: Send + Sync {
    /// The user's subscribed names.
    fn list(&self, user: &str) -> Result<Vec<String>, String>;
    fn set(&self, user: &str, mailbox: &str, subscribed: bool) -> Result<(), String>;
}

/// Where the special-use attributes a client gave its folders live (RFC 6154 3,
/// CREATE-SPECIAL-USE): outside the store, in the directory.
pub trait SpecialUses: Send + Sync {
    /// (folder, attribute) for each attribute a folder of the user was given.
    fn list(&self, user: &str) -> Result<Vec<(String, String)>, String>;
    /// Gives `mailbox` exactly `attributes` (none: forgets it).
    fn set(&self, user: &str, mailbox: &str, attributes: &[String]) -> Result<(), String>;
    /// The folder `from` and its children are now under `to`.
    fn renamed(&self, user: &str, from: &str, to: &str) -> Result<(), String>;
}

/// Where a user's limits live (RFC 9208): outside the store, in the directory. Asked at every
/// addition, so a limit changed while a session is open applies to its next APPEND.
pub trait Quotas: Send + Sync {
    /// The user's limits; unlimited when it has none.
    fn quota(&self, user: &str) -> mail_model::Quota;

    /// An addition of `added` was refused `NO [OVERQUOTA]`: for the shell's mail log.
    fn refused(&self, _user: &str, _added: mail_model::Usage, _why: mail_model::OverQuota) {}
}

/// What a session works on while it runs a command.
pub struct Backend<'a> {
    pub store: &'a dyn mail_model::Mailstore,
    pub subscriptions: &'a dyn Subscriptions,
    pub special_uses: &'a dyn SpecialUses,
    pub quotas: &'a dyn Quotas,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum State {
    NotAuthenticated,
    Authenticated,
    Selected,
    Logout,
}

/// Extensions a client turned on with ENABLE (RFC 5161) or implicitly.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Enabled {
    /// RFC 7162 3.1: MODSEQ in every FETCH of flags from then on.
    pub(crate) condstore: bool,
    pub(crate) rev2: bool,
    /// RFC 6855 3: mailbox names in UTF-8 both ways, and APPEND's UTF8 data.
    pub(crate) utf8: bool,
    /// RFC 7162 3.2: SELECT (QRESYNC ...), FETCH (VANISHED), and expunges reported as
    /// VANISHED instead of EXPUNGE.
    pub(crate) qresync: bool,
}

impl Enabled {
    /// RFC 7162 3.1: a CONDSTORE-enabling command (FETCH or SEARCH with MODSEQ, STORE with
    /// UNCHANGEDSINCE) in a selected mailbox enables CONDSTORE; the first time, the server
    /// sends `OK [HIGHESTMODSEQ]` before the command's tagged answer (written to `out` here,
    /// ahead of the command's own responses).
    pub(crate) fn condstore_by_command(&mut self, highest_modseq: u64, out: &mut Vec<u8>) {
        if self.condstore {
            return;
        }
        self.condstore = true;
        out.extend_from_slice(
            format!("* OK [HIGHESTMODSEQ {highest_modseq}] Highest\r\n").as_bytes(),
        );
    }
}

/// A command that is waiting for something other than the next command line.
#[derive(Debug)]
pub(crate) enum Waiting {
    /// For the shell's `auth_result`.
    Auth { tag: String },
    /// For the client's SASL response line (RFC 9051 6.2.2).
    SaslResponse { tag: String },
    /// In IDLE until `DONE` (RFC 2177, RFC 9051 6.3.13).
    Idle { tag: String },
    /// For the shell's `compress_result` (RFC 4978).
    Compress { tag: String },
}

/// A FETCH that yields to the shell every `output_chunk_bytes`.
pub(crate) struct FetchWork {
    pub(crate) tag: String,
    pub(crate) plan: crate::command::fetch::Plan,
    pub(crate) indexes: Vec<usize>,
    pub(crate) next: usize,
    pub(crate) uid: bool,
}

pub struct Session {
    pub(crate) config: Arc<Config>,
    pub(crate) tls: bool,
    /// RFC 4978 COMPRESS=DEFLATE is on.
    pub(crate) compressed: bool,
    pub(crate) state: State,
    pub(crate) user: Option<String>,
    pub(crate) selected: Option<Selected>,
    pub(crate) enabled: Enabled,
    pub(crate) framer: Framer,
    pub(crate) out: Vec<u8>,
    pub(crate) events: VecDeque<Event>,
    pub(crate) waiting: Option<Waiting>,
    pub(crate) work: Option<FetchWork>,
    /// A login the shell accepted; answered on the next poll, after the default folders
    /// exist.
    pub(crate) pending_login: Option<String>,
    pub(crate) errors: u32,
    pub(crate) closed: bool,
    /// IDLE commands entered: numbers the one in progress, for its deadline.
    pub(crate) idles: u64,
}

impl Session {
    /// A new session; the greeting is queued (RFC 9051 7.1.1).
    pub fn new(config: Arc<Config>, tls: bool) -> Session {
        let framer = Framer::new(&config);
        let mut s = Session {
            config,
            tls,
            compressed: false,
            state: State::NotAuthenticated,
            user: None,
            selected: None,
            enabled: Enabled::default(),
            framer,
            out: Vec::new(),
            events: VecDeque::new(),
            waiting: None,
            work: None,
            pending_login: None,
            errors: 0,
            closed: false,
            idles: 0,
        };
        let caps = s.capabilities();
        s.untagged(&format!(
            "OK [CAPABILITY {caps}] {} IMAP ready",
            s.config.hostname
        ));
        s
    }

    /// Bytes read from the client.
    pub fn feed(&mut self, bytes: &[u8]) {
        if !self.closed {
            self.framer.feed(bytes);
        }
    }

    /// Whether the shell should read more input now.
    pub fn wants_input(&self) -> bool {
        !self.closed
            && !matches!(
                self.waiting,
                Some(Waiting::Auth { .. } | Waiting::Compress { .. })
            )
            && self.work.is_none()
            && self.framer.buffered() < self.framer.line_max().saturating_mul(4)
    }

    /// In IDLE: the shell should also wake when the user's mail changes.
    pub fn is_idle(&self) -> bool {
        matches!(self.waiting, Some(Waiting::Idle { .. }))
    }

    pub fn is_closed(&self) -> bool {
        self.closed
    }

    /// The store's (UTF-8) name for a mailbox name as this client sends it: UTF-8 from an
    /// IMAP4rev2 client or one that enabled UTF8=ACCEPT (RFC 9051 5.1, RFC 6855 3), modified
    /// UTF-7 from any other (RFC 3501 5.1.3). `Err` is the tagged answer for a name that is
    /// not valid in the client's encoding.
    pub(crate) fn name_from_client(&self, wire: &str) -> Result<String, &'static str> {
        if self.enabled.rev2 || self.enabled.utf8 || wire.eq_ignore_ascii_case("INBOX") {
            return Ok(wire.to_string());
        }
        mail_model::mutf7::decode_strict(wire)
            .ok_or("NO [CANNOT] Mailbox name is not valid modified UTF-7")
    }

    /// A store name as this client reads it (see [`Session::name_from_client`]).
    pub(crate) fn name_to_client<'n>(&self, name: &'n str) -> std::borrow::Cow<'n, str> {
        if self.enabled.rev2 || self.enabled.utf8 {
            std::borrow::Cow::Borrowed(name)
        } else {
            std::borrow::Cow::Owned(mail_model::mutf7::encode(name, &[]))
        }
    }

    /// The logged-in store user.
    pub fn user(&self) -> Option<&str> {
        self.user.as_deref()
    }

    /// How long the shell waits for input before calling `timed_out`.
    pub fn timeout(&self) -> Duration {
        if self.state == State::NotAuthenticated {
            LOGIN_TIMEOUT.min(self.config.autologout)
        } else {
            self.config.autologout
        }
    }

    /// What bounds the time of the current step, whatever trickles in (see
    /// [`limits::Deadline`]): all of the time before login, one IDLE, and the command being
    /// received (its line and literals, earning time at `transfer_rate_min`).
    pub fn deadlines(&self) -> Deadlines {
        let mut deadlines = Deadlines::default();
        if self.closed {
            return deadlines;
        }
        let config = &self.config;
        if self.state == State::NotAuthenticated {
            deadlines.phase = Some(Deadline {
                step: 0,
                within: config.login_deadline,
            });
        } else if self.is_idle() {
            deadlines.phase = Some(Deadline {
                step: self.idles,
                within: config.idle_deadline,
            });
        }
        if self.framer.in_command() {
            deadlines.request = Some(Deadline {
                step: self.framer.command_number(),
                within: Deadline::transfer(
                    config.command_deadline,
                    self.framer.literal_received(),
                    config.transfer_rate_min,
                    config.command_deadline_max,
                ),
            });
        }
        deadlines
    }

    /// RFC 9051 5.4: the autologout timer ran out.
    pub fn timed_out(&mut self) {
        self.bye("BYE Autologout; idle for too long");
    }

    /// A deadline from [`Session::deadlines`] passed: before login, in IDLE (RFC 9051
    /// 6.3.13: the client should have re-issued it), or a command that took too long to
    /// arrive.
    pub fn deadline_passed(&mut self) {
        if self.is_idle() && !self.framer.in_command() {
            self.bye("BYE Autologout; IDLE for too long, re-issue it more often");
        } else {
            self.bye("BYE Too slow; closing");
        }
    }

    /// The server is shutting down.
    pub fn shutting_down(&mut self) {
        self.bye("BYE Server shutting down");
    }

    /// The logged-in account was deleted.
    pub fn revoked(&mut self) {
        self.bye("BYE Account removed");
    }

    fn bye(&mut self, text: &str) {
        if !self.closed {
            self.untagged(text);
            self.close();
        }
    }

    /// The TLS handshake after STARTTLS succeeded.
    pub fn tls_started(&mut self) {
        self.tls = true;
    }

    /// The shell's answer to [`Event::Compress`]: whether it can compress this connection
    /// (it bounds how many are). Granted: the `OK` is written, then [`Event::Deflate`] tells
    /// the shell to switch; refused: `NO [LIMIT]`.
    pub fn compress_result(&mut self, granted: bool) {
        let Some(Waiting::Compress { tag }) = self.waiting.take() else {
            return;
        };
        if !granted {
            self.tagged(
                &tag,
                "NO [LIMIT] Too many compressed connections, try later",
            );
            return;
        }
        self.tagged(&tag, "OK DEFLATE active");
        let out = std::mem::take(&mut self.out);
        self.events.push_back(Event::Write(out));
        self.events.push_back(Event::Deflate);
        self.compressed = true;
    }

    pub fn auth_result(&mut self, result: AuthResult) {
        let Some(Waiting::Auth { tag }) = self.waiting.take() else {
            return;
        };
        match result {
            AuthResult::Success { user } => {
                self.user = Some(user);
                self.state = State::Authenticated;
                self.framer.logged_in();
                self.pending_login = Some(tag);
            }
            AuthResult::BadCredentials => {
                self.tagged(&tag, "NO [AUTHENTICATIONFAILED] Authentication failed")
            }
            AuthResult::TooManySessions => {
                self.tagged(&tag, "NO [LIMIT] Too many sessions for this user")
            }
            AuthResult::Temporary(text) => {
                let text = one_line(&text);
                self.tagged(&tag, &format!("NO [UNAVAILABLE] {text}"))
            }
        }
    }

    /// The tag of the login command waiting for [`Session::auth_result`].
    pub fn auth_tag(&self) -> Option<&str> {
        match &self.waiting {
            Some(Waiting::Auth { tag }) => Some(tag),
            _ => None,
        }
    }

    /// Instead of [`Session::auth_result`]: the shell has checked the credentials and hands
    /// the rest of the connection to the server that holds the user's mail (a cluster
    /// proxy), which answers the login command itself. Returns that command's tag and the
    /// input received after it; the session is over and writes nothing more (no `Close`
    /// event either: the shell owns the connection now). `None` when no login is waiting.
    pub fn hand_over(&mut self) -> Option<(String, Vec<u8>)> {
        let Some(Waiting::Auth { tag }) = self.waiting.take() else {
            return None;
        };
        let unread = self.framer.take_unread();
        self.state = State::Logout;
        self.closed = true;
        self.work = None;
        self.out.clear();
        self.events.clear();
        Some((tag, unread))
    }

    /// Runs what can run: frames input, executes commands against `backend`, and returns
    /// the next thing for the shell to do, or `None` when it needs input (or a change, in
    /// IDLE).
    pub fn poll(&mut self, backend: &Backend<'_>) -> Option<Event> {
        loop {
            if let Some(event) = self.events.pop_front() {
                if self.events.is_empty() {
                    // Decisions are rare; a session waiting for its client (thousands may,
                    // in IDLE) keeps no room for them.
                    self.events = VecDeque::new();
                }
                return Some(event);
            }
            if self.closed
                || matches!(
                    self.waiting,
                    Some(Waiting::Auth { .. } | Waiting::Compress { .. })
                )
            {
                return self.take_write();
            }
            if let Some(tag) = self.pending_login.take() {
                self.logged_in(&tag, backend);
                continue;
            }
            if self.out.len() >= self.config.output_chunk_bytes {
                return self.take_write();
            }
            if let Some(work) = self.work.take() {
                self.fetch_continue(work, backend);
                continue;
            }
            match self.framer.next() {
                Some(frame) => self.frame(frame, backend),
                None => {
                    if self.is_idle() {
                        self.sync(backend, true);
                    }
                    return self.take_write();
                }
            }
        }
    }

    fn take_write(&mut self) -> Option<Event> {
        (!self.out.is_empty()).then(|| Event::Write(std::mem::take(&mut self.out)))
    }

    fn frame(&mut self, frame: Frame, backend: &Backend<'_>) {
        match frame {
            Frame::Continue => self.out.extend_from_slice(b"+ Ready for literal data\r\n"),
            Frame::Dropped { tag, limit } => {
                let text = limit.text();
                let tag = tag.unwrap_or_else(|| "*".into());
                let response = match limit {
                    // RFC 9051 7.1: LIMIT, a server limit, not the client's error.
                    Limit::Budget => format!("NO [LIMIT] {text}"),
                    // RFC 4469 and RFC 7888 4's TOOBIG.
                    Limit::Literal(_) => format!("BAD [TOOBIG] {text}"),
                    _ => format!("BAD {text}"),
                };
                if tag == "*" {
                    self.untagged(&response);
                } else {
                    self.tagged(&tag, &response);
                }
                if limit != Limit::Budget {
                    self.error();
                }
            }
            Frame::Closing { tag, limit } => {
                let response = format!("BAD [TOOBIG] {}", limit.text());
                match tag {
                    Some(tag) => self.tagged(&tag, &response),
                    None => self.untagged(&response),
                }
                self.bye("BYE Literal too large before login");
            }
            Frame::Command(bytes) => match self.waiting.take() {
                Some(Waiting::Idle { tag }) => self.idle_line(&tag, &bytes, backend),
                Some(Waiting::SaslResponse { tag }) => self.sasl_response(&tag, &bytes),
                other => {
                    self.waiting = other;
                    self.command(&bytes, backend)
                }
            },
        }
    }

    fn command(&mut self, bytes: &[u8], backend: &Backend<'_>) {
        // RFC 5182: `$` is the saved search result, outside any folder an empty one.
        let (saved, messages) = match &self.selected {
            Some(sel) => (&sel.saved[..], &sel.messages[..]),
            None => (&[][..], &[][..]),
        };
        let expanded = crate::command::searchres::expand(bytes, saved, messages);
        let bytes = match &expanded {
            crate::command::searchres::Expanded::Unchanged => bytes,
            crate::command::searchres::Expanded::Rewritten(rewritten) => &rewritten[..],
            crate::command::searchres::Expanded::NoMessages { tag, answer } => {
                self.errors = 0;
                self.tagged(tag, answer);
                return;
            }
        };
        let (tag, request) = match parse(bytes) {
            Ok(parsed) => parsed,
            Err((tag, text)) => {
                // RFC 5182 2.1: a SEARCH that was to SAVE and failed leaves `$` empty.
                if let Some(sel) = self.selected.as_mut()
                    && crate::command::searchres::saves(bytes)
                {
                    sel.saved.clear();
                }
                match tag {
                    Some(tag) => self.tagged(&tag, &format!("BAD {text}")),
                    None => self.untagged(&format!("BAD {text}")),
                }
                self.error();
                return;
            }
        };
        self.errors = 0;
        crate::command::run(self, &tag, request, backend);
    }

    /// Counts a BAD; too many in a row end the session (a client that is not speaking IMAP).
    pub(crate) fn error(&mut self) {
        self.errors += 1;
        if self.errors >= self.config.errors_max {
            self.untagged("BYE Too many invalid commands");
            self.close();
        }
    }

    pub(crate) fn close(&mut self) {
        self.state = State::Logout;
        self.closed = true;
        self.work = None;
        if !self.out.is_empty() {
            self.events
                .push_back(Event::Write(std::mem::take(&mut self.out)));
        }
        self.events.push_back(Event::Close);
    }

    pub(crate) fn untagged(&mut self, text: &str) {
        if self.closed {
            return;
        }
        self.out.extend_from_slice(b"* ");
        self.out.extend_from_slice(text.as_bytes());
        self.out.extend_from_slice(b"\r\n");
    }

    pub(crate) fn tagged(&mut self, tag: &str, text: &str) {
        if self.closed {
            return;
        }
        self.out.extend_from_slice(tag.as_bytes());
        self.out.push(b' ');
        self.out.extend_from_slice(text.as_bytes());
        self.out.extend_from_slice(b"\r\n");
    }

    /// A tagged OK, after the updates the command may carry (RFC 9051 7.5.1: no EXPUNGE
    /// during FETCH, STORE or SEARCH, whose sequence numbers the client is reading).
    pub(crate) fn done(&mut self, tag: &str, text: &str, backend: &Backend<'_>, expunge: bool) {
        self.sync(backend, expunge);
        self.tagged(tag, text);
    }

    pub(crate) fn capabilities(&self) -> String {
        let mut caps = String::from("IMAP4rev1 IMAP4rev2");
        if self.state == State::NotAuthenticated {
            if !self.tls && self.config.starttls {
                caps.push_str(" STARTTLS");
            }
            if self.tls || self.config.plaintext_auth {
                caps.push_str(" AUTH=PLAIN SASL-IR");
            } else {
                caps.push_str(" LOGINDISABLED");
            }
        }
        // RFC 7888: before login only LITERAL- (non-synchronising literals up to 4096
        // octets); after it, LITERAL+.
        caps.push_str(if self.state == State::NotAuthenticated {
            " LITERAL-"
        } else {
            " LITERAL+"
        });
        caps.push_str(
            " ENABLE IDLE ID NAMESPACE UNSELECT UIDPLUS MOVE CHILDREN SPECIAL-USE \
             LIST-EXTENDED LIST-STATUS ESEARCH MULTIAPPEND BINARY CONDSTORE STATUS=SIZE \
             SORT SORT=DISPLAY THREAD=ORDEREDSUBJECT THREAD=REFERENCES QRESYNC UTF8=ACCEPT SEARCHRES ESORT \
             CONTEXT=SEARCH CREATE-SPECIAL-USE",
        );
        caps.push_str(&format!(" APPENDLIMIT={}", self.config.literal_bytes_max));
        if self.state != State::NotAuthenticated {
            // RFC 9208 3.2, 5.1, 5.2: the resources GETQUOTA and GETQUOTAROOT report.
            caps.push_str(" QUOTA QUOTA=RES-STORAGE QUOTA=RES-MESSAGE");
            // RFC 4978: after login only (compression before it would only help guessers).
            caps.push_str(" COMPRESS=DEFLATE");
        }
        caps
    }

    /// Brings the selected folder's view up to date and writes the untagged responses
    /// for what changed (RFC 9051 7.3.1 EXISTS, 7.5.1 EXPUNGE, 7.5.2 FETCH FLAGS).
    pub(crate) fn sync(&mut self, backend: &Backend<'_>, expunge: bool) {
        let (Some(user), Some(selected)) = (self.user.as_deref(), self.selected.as_mut()) else {
            return;
        };
        match selected.sync(
            backend.store,
            user,
            expunge,
            (self.enabled.condstore, self.enabled.qresync),
            &mut self.out,
        ) {
            Ok(()) => crate::command::context::after_sync(self, backend),
            Err(e) if e.is_not_found() => {
                // RFC 9051 7.1: the folder was deleted under us.
                self.selected = None;
                self.state = State::Authenticated;
                self.untagged("BYE Selected mailbox was deleted");
                self.close();
            }
            // The next command that touches the store reports the failure.
            Err(_) => {}
        }
    }

    fn logged_in(&mut self, tag: &str, backend: &Backend<'_>) {
        if let Some(user) = self.user.clone() {
            crate::command::special_use::utf8_names(backend.store, &user);
            crate::command::special_use::ensure_defaults(backend.store, &user);
        }
        let caps = self.capabilities();
        self.tagged(tag, &format!("OK [CAPABILITY {caps}] Logged in"));
    }

    fn idle_line(&mut self, tag: &str, line: &[u8], backend: &Backend<'_>) {
        // RFC 2177 3: the only thing a client may send in IDLE.
        if line.trim_ascii().eq_ignore_ascii_case(b"DONE") {
            self.done(tag, "OK IDLE terminated", backend, true);
        } else {
            self.tagged(tag, "BAD Expected DONE");
            self.error();
        }
    }
}

/// Text handed in by the shell, cut to one printable line.
pub(crate) fn one_line(text: &str) -> String {
    text.chars()
        .take_while(|c| *c != '\r' && *c != '\n')
        .filter(|c| !c.is_control())
        .take(200)
        .collect()
}
