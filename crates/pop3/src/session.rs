//! A session's state: the RFC 1939 state it is in, the decision it waits for, its input and
//! queued events; and the primitives commands answer with (replies, errors, decisions, close).
//! What the shell calls (feed, poll, the answers to decisions) and the input loop are in
//! `shell.rs`; the commands in `command/`.

use std::collections::VecDeque;
use std::sync::Arc;

use crate::config::Config;
use crate::error::Error;
use crate::event::Event;
use crate::input::Input;
use crate::mailbox::Mailbox;
use crate::reply;

/// One POP3 connection, without the connection. See the crate docs for the protocol.
#[derive(Debug)]
pub struct Session {
    pub(crate) config: Arc<Config>,
    /// The configured host name, made safe for a reply line once.
    pub(crate) hostname: String,
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
}

/// RFC 1939 3: AUTHORIZATION, TRANSACTION, UPDATE; then the connection is closed.
#[derive(Debug)]
pub(crate) enum State {
    Authorization(Login),
    Transaction(Mailbox),
    /// Waiting for the shell's expunge; `messages_left` is for the sign-off.
    Update {
        messages_left: usize,
    },
    Closed,
}

/// Progress through AUTHORIZATION.
#[derive(Debug, Default)]
pub(crate) enum Login {
    #[default]
    Start,
    /// RFC 1939 7: USER was accepted; PASS may follow.
    User(String),
    /// RFC 5034 4: "+ " was sent; the next line is the client's PLAIN response.
    PlainResponse,
}

/// The state a command runs in, for the command table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
    Authorization,
    Transaction,
}

/// The decision the shell owes; no command runs until it is answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Waiting {
    StartTls,
    Auth,
    Retrieve {
        number: usize,
        top_lines: Option<u32>,
    },
    Update,
}

impl Session {
    /// Whether input is read at all: not in UPDATE, after Close, or between `StartTls` and
    /// `tls_started`.
    pub(crate) fn reads_input(&self) -> bool {
        let reading_state = matches!(self.state, State::Authorization(_) | State::Transaction(_));
        reading_state && self.waiting != Some(Waiting::StartTls)
    }

    pub(crate) fn config(&self) -> &Config {
        &self.config
    }

    pub(crate) fn tls(&self) -> bool {
        self.tls
    }

    pub(crate) fn phase(&self) -> Option<Phase> {
        match self.state {
            State::Authorization(_) => Some(Phase::Authorization),
            State::Transaction(_) => Some(Phase::Transaction),
            State::Update { .. } | State::Closed => None,
        }
    }

    /// RFC 2595 2.3: passwords only over TLS unless the configuration allows plaintext.
    pub(crate) fn auth_allowed(&self) -> Result<(), Error> {
        if self.tls || self.config.plaintext_auth {
            Ok(())
        } else {
            Err(Error::PlaintextDisallowed)
        }
    }

    pub(crate) fn login(&mut self) -> Result<&mut Login, Error> {
        match &mut self.state {
            State::Authorization(login) => Ok(login),
            _ => Err(Error::WrongState),
        }
    }

    pub(crate) fn mailbox(&mut self) -> Result<&mut Mailbox, Error> {
        match &mut self.state {
            State::Transaction(mailbox) => Ok(mailbox),
            _ => Err(Error::WrongState),
        }
    }

    /// Queues a reply.
    pub(crate) fn send(&mut self, reply: Vec<u8>) {
        if self.is_closed() {
            return;
        }
        self.queued_bytes += reply.len();
        self.events.push_back(Event::Reply(reply));
    }

    /// Answers `-ERR` for a client error and counts it; at `errors_max` the session gives up
    /// on the client, which is probably not speaking POP3 (or guessing passwords).
    pub(crate) fn fail(&mut self, error: Error) {
        self.send(reply::err(&error.to_string()));
        self.errors += 1;
        if self.errors >= self.config.errors_max {
            self.send(reply::err("too many errors"));
            self.close();
        }
    }

    pub(crate) fn ask_auth(
        &mut self,
        mechanism: &'static str,
        username: String,
        password: String,
        authzid: String,
    ) {
        self.events.push_back(Event::Auth {
            mechanism,
            username,
            password,
            authzid,
        });
        self.waiting = Some(Waiting::Auth);
    }

    pub(crate) fn ask_retrieve(&mut self, number: usize, uid: u32, top_lines: Option<u32>) {
        self.events.push_back(Event::Retrieve { uid, top_lines });
        self.waiting = Some(Waiting::Retrieve { number, top_lines });
    }

    /// RFC 2595 4: reply, then the handshake. Whatever the client sent after STLS was sent
    /// in plaintext and must not be run as if it came over TLS (CVE-2011-0411), so it goes.
    pub(crate) fn start_tls(&mut self) {
        self.send(reply::ok("Begin TLS negotiation"));
        self.events.push_back(Event::StartTls);
        self.waiting = Some(Waiting::StartTls);
        self.input.clear();
    }

    /// RFC 1939 6: QUIT in TRANSACTION with messages marked enters UPDATE.
    pub(crate) fn enter_update(&mut self, expunge: Vec<u32>, messages_left: usize) {
        self.state = State::Update { messages_left };
        self.events.push_back(Event::Update { expunge });
        self.waiting = Some(Waiting::Update);
        self.input.clear();
    }

    /// Signs off and closes: QUIT in AUTHORIZATION (`None`), or in TRANSACTION with nothing
    /// to expunge.
    pub(crate) fn quit(&mut self, messages_left: Option<usize>) {
        self.send(reply::ok(&self.farewell(messages_left)));
        self.close();
    }

    /// RFC 1939 6's sign-off, with the RFC's "(maildrop empty)" / "(n messages left)".
    pub(crate) fn farewell(&self, messages_left: Option<usize>) -> String {
        let hostname = &self.hostname;
        match messages_left {
            None => format!("{hostname} POP3 server signing off"),
            Some(0) => format!("{hostname} POP3 server signing off (maildrop empty)"),
            Some(count) => {
                let count = reply::messages(count);
                format!("{hostname} POP3 server signing off ({count} left)")
            }
        }
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
}
