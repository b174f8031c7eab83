//! What the shell calls: a session takes the bytes the shell reads ([`Session::feed`]),
//! answers with events ([`Session::poll`]: replies, and decisions the shell answers with the
//! `*_result` calls), and is told of timeouts, deadlines, TLS and the shutdown. The input loop
//! runs each complete line through the command table (`command/`). The session reads no
//! clock: the shell keeps the timers.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use crate::command;
use crate::config::{AUTOLOGOUT, Config, REPLY_QUEUE_MAX};
use crate::error::Error;
use crate::event::{AuthResult, Event};
use crate::input::{Input, Line};
use crate::mailbox::Mailbox;
use crate::reply;
use crate::session::{Login, Session, State, Waiting};
use limits::{Deadline, Deadlines};

impl Session {
    /// A session for a new connection (`tls`: already TLS, as on port 995), with the greeting
    /// queued (RFC 1939 4).
    pub fn new(config: Arc<Config>, tls: bool) -> Session {
        let hostname = reply::one_line(&config.hostname, "localhost");
        let mut session = Session {
            config,
            hostname,
            tls,
            state: State::Authorization(Login::Start),
            waiting: None,
            input: Input::default(),
            events: VecDeque::new(),
            queued_bytes: 0,
            errors: 0,
        };
        let greeting = format!("{} POP3 server ready", session.hostname);
        session.send(reply::ok(&greeting));
        session
    }

    /// Bytes read from the client. Lines are run at once unless a decision is outstanding or
    /// many replies wait to be polled; the rest waits in the input buffer. Input that arrives
    /// after `QUIT`, after `Close`, or between `StartTls` and `tls_started` is discarded.
    pub fn feed(&mut self, input: &[u8]) {
        let line_max = self.config.line_max;
        let bound = self.config.input_bound();
        let mut rest = input;
        while self.reads_input() && !rest.is_empty() {
            let taken = self.input.push(rest, line_max, bound);
            rest = &rest[taken..];
            let held_before = self.input.held();
            self.advance();
            if taken == 0 && self.input.held() >= held_before {
                // Nothing taken and nothing run: the shell fed more than the buffer holds
                // while the session could not make progress.
                self.send(reply::err("input buffer full"));
                self.close();
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
    /// event has been polled, and no complete line waits. False after `Close`.
    pub fn wants_input(&self) -> bool {
        self.reads_input()
            && self.waiting.is_none()
            && self.events.is_empty()
            && !self.input.has_line()
    }

    /// How long the shell waits for client input before calling `timed_out`. RFC 1939 3: at
    /// least 10 minutes. The timer runs only while the session waits for input, not while the
    /// shell works on a decision.
    pub fn timeout(&self) -> Duration {
        AUTOLOGOUT
    }

    /// The autologout timer expired. RFC 1939 3: the session does not enter UPDATE (marked
    /// messages stay) and sends no response; it only closes.
    pub fn timed_out(&mut self) {
        self.close();
    }

    /// What bounds the time of the current step (see [`limits::Deadline`]): all of
    /// AUTHORIZATION, and the command line being received.
    pub fn deadlines(&self) -> Deadlines {
        let mut deadlines = Deadlines::default();
        if !self.reads_input() {
            return deadlines;
        }
        if matches!(self.state, State::Authorization(_)) {
            deadlines.phase = Some(Deadline {
                step: 0,
                within: self.config.login_deadline,
            });
        }
        if self.input.has_partial() {
            deadlines.request = Some(Deadline {
                step: self.input.lines_ended(),
                within: self.config.command_deadline,
            });
        }
        deadlines
    }

    /// A deadline from [`Session::deadlines`] passed. Like an autologout (RFC 1939 3), nothing
    /// marked is removed; the client is told why before the close.
    pub fn deadline_passed(&mut self) {
        self.goodbye("[SYS/TEMP] too slow, closing");
    }

    /// The server is shutting down. Not QUIT: nothing marked is removed (RFC 1939 6).
    pub fn shutting_down(&mut self) {
        self.goodbye("[SYS/TEMP] server shutting down");
    }

    /// The logged-in account was deleted.
    pub fn revoked(&mut self) {
        self.goodbye("[AUTH] account removed");
    }

    /// The mailbox is being moved to another node: a temporary failure (RFC 3206 4), the
    /// client should come back. Not QUIT: nothing marked is removed.
    pub fn moving(&mut self) {
        self.goodbye("[SYS/TEMP] mailbox moving, reconnect");
    }

    fn goodbye(&mut self, text: &str) {
        if self.is_closed() {
            return;
        }
        // The answer to a decision in flight is void now.
        self.waiting = None;
        self.send(reply::err(text));
        self.close();
    }

    /// The TLS handshake after `Event::StartTls` succeeded (if it failed, the shell just drops
    /// the connection). RFC 2595 4: the session stays in AUTHORIZATION and sends no new
    /// greeting; like RFC 3207 4.2 asks of SMTP, it forgets what the client said before TLS (a
    /// pending USER).
    pub fn tls_started(&mut self) {
        if self.waiting != Some(Waiting::StartTls) {
            return;
        }
        self.waiting = None;
        self.tls = true;
        self.input.clear();
        self.state = State::Authorization(Login::Start);
    }

    /// The shell's answer to `Event::Auth`.
    pub fn auth_result(&mut self, result: AuthResult) {
        if self.waiting != Some(Waiting::Auth) {
            return;
        }
        self.waiting = None;
        match result {
            AuthResult::Success { maildrop } => {
                let mailbox = Mailbox::new(maildrop);
                let (count, size) = mailbox.stat();
                // RFC 1939 7: "+OK maildrop locked and ready"; the counts save a STAT.
                let count = reply::messages(count);
                self.send(reply::ok(&format!("maildrop has {count} ({size} octets)")));
                self.state = State::Transaction(mailbox);
            }
            // The same reply whether the user is unknown or the password wrong.
            AuthResult::BadCredentials => self.fail(Error::AuthFailed),
            // RFC 2449 8.1.2: not the client's fault, so not counted.
            AuthResult::InUse => {
                self.send(reply::err("[IN-USE] maildrop locked by another session"));
            }
            // RFC 3206 4: a temporary failure; trying again later may work.
            AuthResult::Temporary(text) => {
                let text = reply::one_line(&text, "temporary failure, try again later");
                self.send(reply::err(&format!("[SYS/TEMP] {text}")));
            }
        }
    }

    /// The shell's answer to `Event::Retrieve`: the message content, or why it could not be
    /// read. The session cuts `TOP` lines and byte-stuffs.
    pub fn retrieve_result(&mut self, result: Result<Vec<u8>, String>) {
        let Some(Waiting::Retrieve { number, top_lines }) = self.waiting else {
            return;
        };
        self.waiting = None;
        let content = match result {
            Ok(content) => content,
            Err(text) => {
                let text = reply::one_line(&text, "message unavailable, try again later");
                self.send(reply::err(&format!("[SYS/TEMP] {text}")));
                return;
            }
        };
        let status = match (top_lines, &self.state) {
            (Some(_), _) => "top of message follows".to_owned(),
            // RFC 1939 5 (RETR): the size LIST reported, so the two always agree.
            (None, State::Transaction(mailbox)) => match mailbox.get(number) {
                Ok(message) => format!("{} octets", message.size),
                Err(_) => "message follows".to_owned(),
            },
            (None, _) => "message follows".to_owned(),
        };
        self.send(reply::message(&status, &content, top_lines));
    }

    /// The shell's answer to `Event::Update`. RFC 1939 6: then the session closes either way.
    /// The shell logs the error text; the client gets the RFC's fixed reply.
    pub fn update_result(&mut self, result: Result<(), String>) {
        if self.waiting != Some(Waiting::Update) {
            return;
        }
        self.waiting = None;
        let messages_left = match self.state {
            State::Update { messages_left } => messages_left,
            _ => 0,
        };
        match result {
            Ok(()) => self.send(reply::ok(&self.farewell(Some(messages_left)))),
            Err(_) => self.send(reply::err("some deleted messages not removed")),
        }
        self.close();
    }

    /// Input bytes held (complete lines not yet run, plus the partial line). At most
    /// `input_buffer_max + line_max`.
    pub fn buffered_len(&self) -> usize {
        self.input.held()
    }

    /// Whether the session has emitted (or queued) `Event::Close`.
    pub fn is_closed(&self) -> bool {
        matches!(self.state, State::Closed)
    }

    /// Instead of [`Session::auth_result`]: the shell has checked the credentials and hands
    /// the rest of the connection to the server that holds the user's mail (a cluster
    /// proxy), which answers the login itself. Returns the input received after the login;
    /// the session is over and writes nothing more (no `Close` event either: the shell owns
    /// the connection now). `None` when no login is waiting.
    pub fn hand_over(&mut self) -> Option<Vec<u8>> {
        if self.waiting != Some(Waiting::Auth) {
            return None;
        }
        self.waiting = None;
        let unread = self.input.take();
        self.state = State::Closed;
        self.events.clear();
        self.queued_bytes = 0;
        Some(unread)
    }

    /// Runs buffered lines until a decision is outstanding, enough replies are queued, or no
    /// complete line is left.
    fn advance(&mut self) {
        while self.reads_input() && self.waiting.is_none() && self.queued_bytes < REPLY_QUEUE_MAX {
            let Some(line) = self.input.next_line(self.config.line_max) else {
                break;
            };
            self.execute(line);
        }
    }

    fn execute(&mut self, line: Line) {
        let sasl_response = matches!(self.state, State::Authorization(Login::PlainResponse));
        let result = match line {
            Line::TooLong => {
                if sasl_response {
                    // The response is lost, so the exchange is over.
                    self.state = State::Authorization(Login::Start);
                }
                Err(Error::LineTooLong)
            }
            Line::Text(text) if sasl_response => command::sasl_response(self, &text),
            Line::Text(text) => command::dispatch(self, &text),
        };
        if let Err(error) = result {
            self.fail(error);
        }
    }
}
