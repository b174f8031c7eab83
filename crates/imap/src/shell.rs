//! What the shell calls: a session takes the bytes the shell reads ([`Session::feed`]),
//! answers with events ([`Session::poll`]), and is given what each decision needs: the
//! directory's verdict on a login, the compression slot, and, for every step that reads or
//! changes mail, the store and the time ([`Session::run`]). It keeps no store and reads no
//! clock between steps.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use limits::{Deadline, Deadlines};

use crate::backend::Backend;
use crate::config::{Config, LOGIN_TIMEOUT};
use crate::event::{AuthResult, Event};
use crate::framer::{Frame, Framer, Limit};
use crate::parse::parse;
use crate::session::{Enabled, Session, State, StorageStep, Waiting, one_line};

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
            storage: None,
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

    /// The next thing for the shell to do: replies to write, a decision to answer, or
    /// [`Event::Storage`], the request to call [`Session::run`]. `None` when the session
    /// needs input (or, in IDLE, news of a change: [`Session::mail_changed`]). Runs what
    /// needs no store on the way: framing, and commands that read or change no mail.
    pub fn poll(&mut self) -> Option<Event> {
        self.advance(None);
        if let Some(event) = self.events.pop_front() {
            if self.events.is_empty() {
                // Decisions are rare; a session waiting for its client (thousands may, in
                // IDLE) keeps no room for them.
                self.events = VecDeque::new();
            }
            return Some(event);
        }
        if let Some(reply) = self.take_reply() {
            return Some(reply);
        }
        (self.storage.is_some() && !self.closed).then_some(Event::Storage)
    }

    /// The shell's answer to [`Event::Storage`]: runs the step that asked for the store
    /// against `backend`, on a thread that may block on it, then whatever else the input
    /// already holds, until a chunk of output is ready (`output_chunk_bytes`), a decision
    /// waits, or the input runs out. `now` is the time, in seconds since the Unix epoch (the
    /// INTERNALDATE of an APPEND that gives none, RFC 9051 6.3.12). What it wrote comes from
    /// the next [`Session::poll`].
    pub fn run(&mut self, backend: &Backend<'_>, now: i64) {
        self.advance(Some((backend, now)));
    }

    /// The user's mail may have changed (the shell heard from the store): a session in IDLE
    /// with a folder selected asks for [`Event::Storage`] to tell its client (RFC 2177);
    /// otherwise changes wait for the client's next command (RFC 9051 5.3).
    pub fn mail_changed(&mut self) {
        if self.is_idle() && self.selected.is_some() && self.storage.is_none() && !self.closed {
            self.storage = Some(StorageStep::IdleUpdates);
        }
    }

    /// Whether the shell should read more input now.
    pub fn wants_input(&self) -> bool {
        !self.closed
            && !matches!(
                self.waiting,
                Some(Waiting::Auth { .. } | Waiting::Compress { .. })
            )
            && self.storage.is_none()
            && self.framer.buffered() < self.framer.line_max().saturating_mul(4)
    }

    /// In IDLE: the shell should also wake when the user's mail changes.
    pub fn is_idle(&self) -> bool {
        matches!(self.waiting, Some(Waiting::Idle { .. }))
    }

    pub fn is_closed(&self) -> bool {
        self.closed
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

    /// The mailbox is being moved to another node (docs/cluster.md, "Moving a user"): the
    /// client should come back (RFC 5530 3: UNAVAILABLE, a temporary failure).
    pub fn moving(&mut self) {
        self.bye("BYE [UNAVAILABLE] Mailbox moving, reconnect");
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
        self.events.push_back(Event::Reply(out));
        self.events.push_back(Event::Deflate);
        self.compressed = true;
    }

    /// The shell's answer to [`Event::Auth`]. A success asks for [`Event::Storage`] next:
    /// the user's default folders are made before the login is answered.
    pub fn auth_result(&mut self, result: AuthResult) {
        let Some(Waiting::Auth { tag }) = self.waiting.take() else {
            return;
        };
        match result {
            AuthResult::Success { user } => {
                self.user = Some(user);
                self.state = State::Authenticated;
                self.framer.logged_in();
                self.storage = Some(StorageStep::Login { tag });
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
        self.storage = None;
        self.out.clear();
        self.events.clear();
        Some((tag, unread))
    }

    /// Frames input and runs commands until output fills a chunk, a decision or the client
    /// is awaited, or a step needs the store and `store` (with the time) is not given.
    fn advance(&mut self, store: Option<(&Backend<'_>, i64)>) {
        loop {
            if self.closed
                || !self.events.is_empty()
                || self.out.len() >= self.config.output_chunk_bytes
                || matches!(
                    self.waiting,
                    Some(Waiting::Auth { .. } | Waiting::Compress { .. })
                )
            {
                return;
            }
            if let Some(step) = self.storage.take() {
                let Some((backend, now)) = store else {
                    self.storage = Some(step);
                    return;
                };
                self.storage_step(step, backend, now);
                continue;
            }
            match self.framer.next() {
                Some(frame) => self.frame(frame),
                None => return,
            }
        }
    }

    fn storage_step(&mut self, step: StorageStep, backend: &Backend<'_>, now: i64) {
        match step {
            StorageStep::Login { tag } => self.logged_in(&tag, backend),
            StorageStep::Command { tag, request } => {
                crate::command::run_with_store(self, &tag, request, backend, now)
            }
            StorageStep::Fetch(work) => self.fetch_continue(work, backend),
            StorageStep::IdleUpdates => self.sync(backend, true),
            StorageStep::IdleDone { tag } => self.done(&tag, "OK IDLE terminated", backend, true),
        }
    }

    fn take_reply(&mut self) -> Option<Event> {
        (!self.out.is_empty()).then(|| Event::Reply(std::mem::take(&mut self.out)))
    }

    fn frame(&mut self, frame: Frame) {
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
                Some(Waiting::Idle { tag }) => self.idle_line(tag, &bytes),
                Some(Waiting::SaslResponse { tag }) => self.sasl_response(&tag, &bytes),
                other => {
                    self.waiting = other;
                    self.command(&bytes)
                }
            },
        }
    }

    /// A command line (and its literals): run here if it touches no mail, else kept for the
    /// next storage step.
    fn command(&mut self, bytes: &[u8]) {
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
        if let Some(request) = crate::command::run(self, &tag, request) {
            self.storage = Some(StorageStep::Command { tag, request });
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

    fn idle_line(&mut self, tag: String, line: &[u8]) {
        // RFC 2177 3: the only thing a client may send in IDLE.
        if line.trim_ascii().eq_ignore_ascii_case(b"DONE") {
            self.storage = Some(StorageStep::IdleDone { tag });
        } else {
            self.tagged(&tag, "BAD Expected DONE");
            self.error();
        }
    }
}
