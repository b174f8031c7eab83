//! What the shell calls: a session takes the bytes the shell reads ([`Session::feed`]),
//! answers with events ([`Session::poll`]: replies, and decisions the shell answers with the
//! answer calls below), and is told of timeouts, deadlines, TLS and the shutdown. The input
//! loop runs each framed command through the command table (`command/`). The session reads
//! no clock: the shell keeps the timers.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use crate::command;
use crate::config::{Config, REPLY_QUEUE_MAX};
use crate::error::Error;
use crate::event::{AuthResult, Event, Failure, Quota, ScriptInfo};
use crate::input::{Frame, FrameError, Input};
use crate::reply::{self, Code, Status};
use crate::session::{Session, State, Waiting};
use limits::{Deadline, Deadlines};

impl Session {
    /// A session for a new connection (`tls`: already TLS), with the greeting queued: the
    /// capability response, then `OK` (RFC 5804 1.7, 1.8).
    pub fn new(config: Arc<Config>, tls: bool) -> Session {
        let mut session = Session {
            config,
            tls,
            state: State::NotAuthenticated { sasl: false },
            waiting: None,
            input: Input::default(),
            events: VecDeque::new(),
            queued_bytes: 0,
            errors: 0,
            auth_failures: 0,
            commands_before_login: 0,
            logins: 0,
        };
        session.capabilities("ManageSieve ready");
        session
    }

    /// Bytes read from the client. Commands run at once unless a decision is outstanding or
    /// many replies wait to be polled; the rest waits in the input buffer (at most
    /// `Config::input_buffer_max` bytes; past it `BYE`). Input after LOGOUT, after `Close`,
    /// or between `StartTls` and `tls_started` is discarded.
    pub fn feed(&mut self, data: &[u8]) {
        let pending_max = self.config.pending_max();
        let mut rest = data;
        while self.reads_input() && !rest.is_empty() {
            let taken = self.input.push(rest, pending_max);
            rest = &rest[taken..];
            let before = self.input.pending_len();
            self.advance();
            if taken == 0 && self.input.pending_len() >= before {
                // Nothing taken and nothing run: the shell fed more than the buffer holds
                // while the session could not make progress.
                self.bye(None, "Input buffer full");
            }
        }
    }

    /// The next thing for the shell to do, or `None` when the session needs input or an
    /// answer. Consecutive replies come as one `Reply`.
    pub fn poll(&mut self) -> Option<Event> {
        if self.events.is_empty() {
            self.advance();
        }
        let mut event = self.events.pop_front()?;
        if let Event::Reply(bytes) = &mut event {
            while let Some(Event::Reply(next)) = self.events.front_mut() {
                bytes.append(next);
                self.events.pop_front();
            }
            self.queued_bytes = self.queued_bytes.saturating_sub(bytes.len());
        }
        Some(event)
    }

    /// Whether the shell should read from the client now: no decision is outstanding, every
    /// event has been polled, and no unread input waits. False after `Close`.
    pub fn wants_input(&self) -> bool {
        self.reads_input()
            && self.waiting.is_none()
            && self.events.is_empty()
            && self.input.pending_len() == 0
    }

    /// How long the shell waits for client input before calling `timed_out`
    /// (`Config::idle_timeout`). The timer runs only while the session waits for input, not
    /// while the shell works on a decision.
    pub fn timeout(&self) -> Duration {
        self.config.idle_timeout
    }

    /// No input for `timeout()`: `BYE` and close.
    pub fn timed_out(&mut self) {
        self.bye(None, "Disconnected for inactivity");
    }

    /// What bounds the time of the current step (see [`limits::Deadline`]): `phase`, the
    /// whole non-authenticated state (`Config::login_deadline`, a new step after each
    /// UNAUTHENTICATE); `request`, the command line being received
    /// (`Config::command_deadline`, a new step for each line, the part after a literal
    /// included); `transfer`, the literal being received (`Config::literal_deadline`, growing
    /// with the bytes received at `literal_rate_min` up to `literal_deadline_max`). Request
    /// and transfer deadlines do not run while the shell owes an answer.
    pub fn deadlines(&self) -> Deadlines {
        let mut deadlines = Deadlines::default();
        if !self.reads_input() {
            return deadlines;
        }
        if matches!(self.state, State::NotAuthenticated { .. }) {
            deadlines.phase = Some(Deadline {
                step: self.logins,
                within: self.config.login_deadline,
            });
        }
        if self.waiting.is_some() {
            return deadlines;
        }
        if let Some((step, received)) = self.input.literal() {
            deadlines.transfer = Some(Deadline {
                step,
                within: Deadline::transfer(
                    self.config.literal_deadline,
                    received,
                    self.config.literal_rate_min,
                    self.config.literal_deadline_max,
                ),
            });
        } else if let Some(step) = self.input.line() {
            deadlines.request = Some(Deadline {
                step,
                within: self.config.command_deadline,
            });
        }
        deadlines
    }

    /// A deadline from [`Session::deadlines`] passed: `BYE` and close.
    pub fn deadline_passed(&mut self) {
        self.bye(None, "Too slow, closing");
    }

    /// The server is shutting down (RFC 5804 1.3: TRYLATER, the client may come back).
    pub fn shutting_down(&mut self) {
        self.bye(Some(Code::TryLater), "Server shutting down");
    }

    /// The logged-in account was deleted or disabled.
    pub fn revoked(&mut self) {
        self.bye(None, "Account removed");
    }

    /// The user's mailbox is being moved to another node (RFC 5804 1.3: TRYLATER, the
    /// client may come back).
    pub fn moving(&mut self) {
        self.bye(Some(Code::TryLater), "Mailbox moving, reconnect");
    }

    /// The TLS handshake after `Event::StartTls` succeeded (if it failed, the shell just drops
    /// the connection). RFC 5804 2.2: the server re-issues the capability response, then
    /// `OK`; the SASL list may now name PLAIN.
    pub fn tls_started(&mut self) {
        if !self.answer(Waiting::StartTls) {
            return;
        }
        self.tls = true;
        self.input.clear();
        self.state = State::NotAuthenticated { sasl: false };
        self.capabilities("TLS negotiation successful");
    }

    /// The shell's answer to `Event::Authenticate`.
    pub fn authenticated(&mut self, result: AuthResult) {
        if !self.answer(Waiting::Auth) {
            return;
        }
        match result {
            AuthResult::Success { user } => {
                self.state = State::Authenticated { user };
                self.send(reply::ok("Logged in"));
            }
            // The same reply whether the user is unknown or the password wrong.
            AuthResult::BadCredentials => self.fail(Error::AuthFailed),
            AuthResult::TooWeak => self.respond(
                Status::No,
                Some(Code::AuthTooWeak),
                "Mechanism too weak for this user",
            ),
            AuthResult::TransitionNeeded => self.respond(
                Status::No,
                Some(Code::TransitionNeeded),
                "Log in with PLAIN once to upgrade the stored credentials",
            ),
            AuthResult::Referral(url) => {
                let url = reply::one_line(&url, "");
                self.respond(
                    Status::No,
                    Some(Code::Referral(url)),
                    "Your scripts are on another server",
                );
            }
            AuthResult::Unavailable(text) => self.refuse(Failure::Unavailable(text)),
        }
    }

    /// The shell's answer to `Event::ListScripts`: the scripts, at most one of them active.
    /// RFC 5804 2.7: one name per line, `ACTIVE` after the active one's, then `OK`.
    pub fn scripts_listed(&mut self, result: Result<Vec<ScriptInfo>, Failure>) {
        if !self.answer(Waiting::ListScripts) {
            return;
        }
        match result {
            Ok(scripts) => {
                let mut out = Vec::new();
                for script in scripts {
                    reply::string(&mut out, script.name.as_bytes());
                    if script.active {
                        out.extend_from_slice(b" ACTIVE");
                    }
                    out.extend_from_slice(b"\r\n");
                }
                out.extend_from_slice(&reply::ok("Listscripts completed"));
                self.send(out);
            }
            Err(failure) => self.refuse(failure),
        }
    }

    /// The shell's answer to `Event::GetScript`: the script's content. RFC 5804 2.9: sent as
    /// a literal, then `OK`.
    pub fn script_got(&mut self, result: Result<Vec<u8>, Failure>) {
        if !self.answer(Waiting::GetScript) {
            return;
        }
        match result {
            Ok(content) => {
                let mut out = format!("{{{}}}\r\n", content.len()).into_bytes();
                out.extend_from_slice(&content);
                out.extend_from_slice(b"\r\n");
                out.extend_from_slice(&reply::ok("Getscript completed"));
                self.send(out);
            }
            Err(failure) => self.refuse(failure),
        }
    }

    /// The shell's answer to `Event::PutScript`: stored (with the interpreter's warnings, if
    /// any: RFC 5804 1.3 `OK (WARNINGS)`), or why not (`Failure::Invalid` carries the
    /// compile error).
    pub fn script_put(&mut self, result: Result<Option<String>, Failure>) {
        if self.answer(Waiting::PutScript) {
            self.compiled(result, "Putscript completed");
        }
    }

    /// The shell's answer to `Event::CheckScript`, like `script_put`'s.
    pub fn script_checked(&mut self, result: Result<Option<String>, Failure>) {
        if self.answer(Waiting::CheckScript) {
            self.compiled(result, "Checkscript completed");
        }
    }

    fn compiled(&mut self, result: Result<Option<String>, Failure>, done: &str) {
        match result {
            Ok(None) => self.send(reply::ok(done)),
            Ok(Some(warnings)) => {
                let warnings = reply::shell_text(&warnings, done);
                self.respond(Status::Ok, Some(Code::Warnings), &warnings);
            }
            Err(failure) => self.refuse(failure),
        }
    }

    /// The shell's answer to `Event::HaveSpace`: `Ok` if the script would fit, else
    /// `Failure::Quota`.
    pub fn space_checked(&mut self, result: Result<(), Failure>) {
        if self.answer(Waiting::HaveSpace) {
            self.done(result, "Putscript would succeed");
        }
    }

    /// The shell's answer to `Event::SetActive`.
    pub fn active_set(&mut self, result: Result<(), Failure>) {
        if self.answer(Waiting::SetActive) {
            self.done(result, "Setactive completed");
        }
    }

    /// The shell's answer to `Event::DeleteScript` (`Failure::Active` for the active one).
    pub fn script_deleted(&mut self, result: Result<(), Failure>) {
        if self.answer(Waiting::DeleteScript) {
            self.done(result, "Deletescript completed");
        }
    }

    /// The shell's answer to `Event::RenameScript`.
    pub fn script_renamed(&mut self, result: Result<(), Failure>) {
        if self.answer(Waiting::RenameScript) {
            self.done(result, "Renamescript completed");
        }
    }

    fn done(&mut self, result: Result<(), Failure>, text: &str) {
        match result {
            Ok(()) => self.send(reply::ok(text)),
            Err(failure) => self.refuse(failure),
        }
    }

    /// Input bytes held (unread input plus the command being framed). At most
    /// [`Config::input_bound`].
    pub fn buffered_len(&self) -> usize {
        self.input.held()
    }

    /// Whether the session has emitted (or queued) `Event::Close`.
    pub fn is_closed(&self) -> bool {
        matches!(self.state, State::Closed)
    }

    /// Instead of [`Session::authenticated`]: the shell has checked the credentials and hands
    /// the rest of the connection to the server that holds the user's scripts (a cluster
    /// proxy), which answers the login itself. Returns the input received after the
    /// AUTHENTICATE command; the session is over and writes nothing more (no `Close` event
    /// either: the shell owns the connection now). `None` when no login is waiting.
    pub fn hand_over(&mut self) -> Option<Vec<u8>> {
        if self.waiting != Some(Waiting::Auth) || self.is_closed() {
            return None;
        }
        self.waiting = None;
        let unread = self.input.take();
        self.state = State::Closed;
        self.events.clear();
        self.queued_bytes = 0;
        Some(unread)
    }

    /// Runs framed commands until a decision is outstanding, enough replies are queued, or
    /// no complete command is left.
    fn advance(&mut self) {
        while self.reads_input() && self.waiting.is_none() && self.queued_bytes < REPLY_QUEUE_MAX {
            let Some(frame) = self.input.next_frame(&self.config) else {
                break;
            };
            match frame {
                Ok(frame) => self.execute(frame),
                // RFC 5804 4: a literal length beyond a 32-bit number; its octets cannot be
                // told from commands, so the connection cannot go on.
                Err(_) => self.bye(None, "Literal length too large"),
            }
        }
    }

    fn execute(&mut self, frame: Frame) {
        let sasl = matches!(self.state, State::NotAuthenticated { sasl: true });
        if let State::NotAuthenticated { .. } = self.state {
            self.commands_before_login += 1;
            if self.commands_before_login > self.config.commands_before_login_max {
                return self.bye(None, "Too many commands before login");
            }
        }
        if sasl && matches!(frame, Frame::Refused(_)) {
            // The response is lost, so the exchange is over.
            self.state = State::NotAuthenticated { sasl: false };
        }
        let result = match frame {
            // RFC 5804 1.3: a quota refusal, not a client error.
            Frame::Refused(FrameError::ScriptTooLarge) => {
                self.refuse(Failure::Quota(Quota::MaxSize));
                Ok(())
            }
            Frame::Refused(error) => Err(match error {
                FrameError::Syntax => Error::Syntax {
                    usage: "tokens separated by single spaces",
                },
                FrameError::Empty => Error::Empty,
                // ScriptTooLarge is answered above.
                FrameError::LineTooLong | FrameError::ScriptTooLarge => Error::LineTooLong,
                FrameError::TooManyArguments => Error::TooManyArguments,
            }),
            Frame::Command(tokens) if sasl => command::sasl_response(self, tokens),
            Frame::Command(tokens) => command::dispatch(self, tokens),
        };
        if let Err(error) = result {
            self.fail(error);
        }
    }
}
