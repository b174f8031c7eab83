//! A session's state: the RFC 5804 state it is in, the decision it waits for, its input and
//! queued events; and the primitives commands answer with (replies, errors, decisions,
//! capabilities, close). What the shell calls and the input loop are in `shell.rs`; the
//! commands in `command/`.

use std::collections::VecDeque;
use std::sync::Arc;

use crate::config::Config;
use crate::error::Error;
use crate::event::{Event, Failure, Quota};
use crate::input::Input;
use crate::reply::{self, Code, Status};

/// One ManageSieve connection, without the connection. See the crate docs for the protocol.
#[derive(Debug)]
pub struct Session {
    pub(crate) config: Arc<Config>,
    pub(crate) tls: bool,
    pub(crate) state: State,
    /// The decision the shell owes; no command runs until it is answered.
    pub(crate) waiting: Option<Waiting>,
    pub(crate) input: Input,
    pub(crate) events: VecDeque<Event>,
    /// Bytes of the `Reply` events in `events`.
    pub(crate) queued_bytes: usize,
    /// Client errors so far, against `Config::errors_max`.
    pub(crate) errors: usize,
    /// Failed logins so far, against `Config::auth_failures_max`.
    pub(crate) auth_failures: usize,
    /// Commands run in this non-authenticated state, against
    /// `Config::commands_before_login_max`.
    pub(crate) commands_before_login: usize,
    /// Non-authenticated states entered (the greeting, each UNAUTHENTICATE): the step of the
    /// login deadline.
    pub(crate) logins: u64,
}

/// RFC 5804 2: non-authenticated (after the greeting or UNAUTHENTICATE), authenticated;
/// then the connection is closed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum State {
    /// `sasl`: the empty PLAIN challenge was sent; the next command is the client's
    /// response (RFC 5804 2.1).
    NotAuthenticated {
        sasl: bool,
    },
    Authenticated {
        user: String,
    },
    Closed,
}

/// The decision the shell owes; its answer must be the matching call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Waiting {
    StartTls,
    Auth,
    ListScripts,
    GetScript,
    PutScript,
    CheckScript,
    HaveSpace,
    SetActive,
    DeleteScript,
    RenameScript,
}

impl Session {
    /// Whether input is read at all: not after Close, nor between `StartTls` and
    /// `tls_started`.
    pub(crate) fn reads_input(&self) -> bool {
        !self.is_closed() && self.waiting != Some(Waiting::StartTls)
    }

    /// RFC 5804 2.1, RFC 4616 4: PLAIN only over TLS unless the configuration allows it.
    pub(crate) fn auth_allowed(&self) -> bool {
        self.tls || self.config.plaintext_auth
    }

    /// The logged-in user, for a command valid only when authenticated.
    pub(crate) fn user(&self) -> Result<String, Error> {
        match &self.state {
            State::Authenticated { user } => Ok(user.clone()),
            _ => Err(Error::NotAuthenticated),
        }
    }

    /// Queues reply bytes.
    pub(crate) fn send(&mut self, reply: Vec<u8>) {
        if self.is_closed() {
            return;
        }
        self.queued_bytes += reply.len();
        self.events.push_back(Event::Reply(reply));
    }

    pub(crate) fn respond(&mut self, status: Status, code: Option<Code>, text: &str) {
        self.send(reply::response(status, code.as_ref(), Some(text)));
    }

    /// Answers `NO` for a client error and counts it; at `auth_failures_max` failed logins or
    /// `errors_max` errors the session says `BYE` and closes.
    pub(crate) fn fail(&mut self, error: Error) {
        self.respond(Status::No, error.code(), &error.to_string());
        self.errors = self.errors.saturating_add(1);
        if error.is_auth_failure() {
            self.auth_failures = self.auth_failures.saturating_add(1);
            if self.auth_failures >= self.config.auth_failures_max {
                return self.bye(None, "Too many authentication failures");
            }
        }
        if self.errors >= self.config.errors_max {
            self.bye(None, "Too many errors");
        }
    }

    /// Answers `NO` for what the shell could not do (RFC 5804 1.3 codes). Never counted.
    pub(crate) fn refuse(&mut self, failure: Failure) {
        let (code, text) = match failure {
            Failure::NonExistent => (Some(Code::NonExistent), "No such script".to_owned()),
            Failure::AlreadyExists => (
                Some(Code::AlreadyExists),
                "A script of that name exists".to_owned(),
            ),
            Failure::Active => (
                Some(Code::Active),
                "The active script cannot be deleted".to_owned(),
            ),
            Failure::Quota(quota) => (Some(Code::Quota(quota)), quota_text(quota).to_owned()),
            Failure::Invalid(text) => (None, reply::shell_text(&text, "Invalid script")),
            Failure::Unavailable(text) => (
                Some(Code::TryLater),
                reply::one_line(&text, "Temporary failure, try again later"),
            ),
        };
        self.respond(Status::No, code, &text);
    }

    /// Asks the shell; no command runs until it answers.
    pub(crate) fn ask(&mut self, event: Event, waiting: Waiting) {
        if self.is_closed() {
            return;
        }
        self.events.push_back(event);
        self.waiting = Some(waiting);
    }

    /// RFC 5804 1.7: the capability response, then `OK`.
    pub(crate) fn capabilities(&mut self, ok_text: &str) {
        let config = Arc::clone(&self.config);
        let mut out = Vec::new();
        reply::capability(&mut out, "IMPLEMENTATION", Some(&config.implementation));
        // An empty SASL list when no mechanism may be used now (before TLS without
        // plaintext_auth, or after login), as LOGINDISABLED does for IMAP.
        let not_authenticated = matches!(self.state, State::NotAuthenticated { .. });
        let mechanisms = if not_authenticated && self.auth_allowed() {
            let offered: Vec<&str> = config
                .sasl_mechanisms
                .iter()
                .map(String::as_str)
                .filter(|mechanism| config.offers(mechanism))
                .collect();
            offered.join(" ")
        } else {
            String::new()
        };
        reply::capability(&mut out, "SASL", Some(&mechanisms));
        reply::capability(&mut out, "SIEVE", Some(&config.sieve_extensions.join(" ")));
        // RFC 5804 2.2: STARTTLS only where it can be used.
        if config.tls_available && !self.tls && not_authenticated {
            reply::capability(&mut out, "STARTTLS", None);
        }
        if !config.notify_methods.is_empty() {
            reply::capability(&mut out, "NOTIFY", Some(&config.notify_methods.join(" ")));
        }
        if let Some(redirects) = config.max_redirects {
            reply::capability(&mut out, "MAXREDIRECTS", Some(&redirects.to_string()));
        }
        // RFC 5804 1.7: OWNER is the authorization identity, only when authenticated.
        if let State::Authenticated { user } = &self.state {
            reply::capability(&mut out, "OWNER", Some(user));
        }
        // RFC 5804 2.14.
        reply::capability(&mut out, "UNAUTHENTICATE", None);
        reply::capability(&mut out, "VERSION", Some("1.0"));
        out.extend_from_slice(&reply::ok(ok_text));
        self.send(out);
    }

    /// RFC 5804 2.2: `OK`, then the handshake. Whatever the client sent after STARTTLS was
    /// sent in plaintext and must not be run as if it came over TLS (CVE-2011-0411), so it
    /// goes.
    pub(crate) fn start_tls(&mut self) {
        self.send(reply::ok("Begin TLS negotiation now"));
        self.ask(Event::StartTls, Waiting::StartTls);
        self.input.clear();
    }

    /// Back to the non-authenticated state (UNAUTHENTICATE, RFC 5804 2.14): a new login
    /// deadline and a new count of commands before login.
    pub(crate) fn unauthenticate(&mut self) {
        self.state = State::NotAuthenticated { sasl: false };
        self.logins += 1;
        self.commands_before_login = 0;
    }

    /// `BYE` (RFC 5804 1.2: the server is closing the connection) and Close.
    pub(crate) fn bye(&mut self, code: Option<Code>, text: &str) {
        if self.is_closed() {
            return;
        }
        // The answer to a decision in flight is void now.
        self.waiting = None;
        self.respond(Status::Bye, code, text);
        self.close();
    }

    /// Ends the session once: `Close` is the last event, and everything after it is ignored.
    pub(crate) fn close(&mut self) {
        if self.is_closed() {
            return;
        }
        self.state = State::Closed;
        self.waiting = None;
        self.input.clear();
        self.events.push_back(Event::Close);
    }

    /// Takes the outstanding decision if it is `waiting`.
    pub(crate) fn answer(&mut self, waiting: Waiting) -> bool {
        if self.waiting != Some(waiting) || self.is_closed() {
            return false;
        }
        self.waiting = None;
        true
    }
}

fn quota_text(quota: Quota) -> &'static str {
    match quota {
        Quota::Other => "Quota exceeded",
        Quota::MaxScripts => "Too many scripts",
        Quota::MaxSize => "Script too large",
    }
}
