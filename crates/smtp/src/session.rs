//! A session's state: the phase it is in, the transaction, what waits for the shell, and
//! the primitives commands answer with (replies, errors, events, close). What the shell calls
//! (feed, poll, the answers to decisions) and the input loop are in `shell.rs`; the commands
//! in `command/`.

use std::collections::VecDeque;
use std::sync::Arc;

use crate::config::{Config, Mode, Peer};
use crate::content::{Body, Content};
use crate::event::Event;
use crate::reply::Reply;
use limits::Reservation;

/// One SMTP, submission or LMTP connection, without I/O. See the crate documentation.
#[derive(Debug)]
pub struct Session {
    pub(crate) config: Arc<Config>,
    pub(crate) peer: Peer,
    pub(crate) phase: Phase,
    /// Received bytes not processed yet: a partial line, or pipelined input waiting behind a
    /// decision.
    pub(crate) input: Vec<u8>,
    /// An over-long command line was reported; drop input through its LF.
    pub(crate) discarding_line: bool,
    pub(crate) output: VecDeque<Event>,
    pub(crate) greeting: Option<Greeting>,
    /// The user of a successful AUTH.
    pub(crate) authenticated: Option<String>,
    pub(crate) transaction: Option<Transaction>,
    pub(crate) errors: usize,
    pub(crate) commands_without_progress: usize,
    /// Command and SASL lines completed (or dropped whole): the step of the command
    /// deadline.
    pub(crate) lines: u64,
    /// Message transfers started: the step of the transfer deadline.
    pub(crate) transfers: u64,
    /// The step of the protocol the session is in, for `refusals`.
    pub(crate) stage: Stage,
    /// The envelope as the command being answered left it, for `refusals`: the sender, and
    /// RCPT's recipient (or, for the data, every accepted recipient).
    pub(crate) refused_from: Option<String>,
    pub(crate) refused_to: Option<String>,
    /// Failure replies sent and not yet taken by the shell (at most `REFUSALS_KEPT`).
    pub(crate) refusals: VecDeque<Refusal>,
    /// The cluster parameters taken off the MAIL or RCPT line being answered
    /// (`command/cluster.rs`).
    pub(crate) route: RouteParams,
}

/// Failure replies kept for a shell that does not take them.
const REFUSALS_KEPT: usize = 64;

/// The step of the protocol a reply answered, for the shell's mail log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// Before any command: the greeting, or the connection itself.
    Connect,
    /// EHLO, HELO, LHLO.
    Helo,
    Starttls,
    Auth,
    Mail,
    Rcpt,
    /// DATA or BDAT, and the end of the message.
    Data,
    /// Anything else: RSET, NOOP, VRFY, an unknown command, a line that broke a rule.
    Command,
}

impl Stage {
    pub fn name(self) -> &'static str {
        match self {
            Stage::Connect => "connect",
            Stage::Helo => "helo",
            Stage::Starttls => "starttls",
            Stage::Auth => "auth",
            Stage::Mail => "mail",
            Stage::Rcpt => "rcpt",
            Stage::Data => "data",
            Stage::Command => "command",
        }
    }
}

/// A 4xx or 5xx reply the session sent, the step it answered, and the envelope so far.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub stage: Stage,
    pub reply: Reply,
    /// The sender: MAIL's address, or the open transaction's.
    pub from: Option<String>,
    /// The recipient a refused RCPT named; for a refused message, its accepted recipients
    /// (comma-separated).
    pub to: Option<String>,
}

/// What the session is doing with the next input.
#[derive(Debug)]
pub(crate) enum Phase {
    /// Reading command lines.
    Command,
    /// Reading a SASL response line of AUTH (RFC 4954 4).
    Sasl(SaslStep),
    /// Reading message content after DATA's 354.
    Data(Box<Content>),
    /// Reading the bytes of one BDAT chunk.
    Bdat(Chunk),
    /// Waiting for the shell; input is buffered, not processed.
    Pending(Pending),
    /// STARTTLS was accepted; waiting for `tls_started`. Input is discarded.
    AwaitingTls,
    /// `Event::Close` was queued; nothing more happens.
    Closed,
}

/// The decision the shell owes.
#[derive(Debug)]
pub(crate) enum Pending {
    /// The connection itself, before the greeting (`Config::decide_connect`).
    Connect,
    /// EHLO, HELO or LHLO and the name it gave (`Config::decide_hello`).
    Hello(Hello, String),
    Auth,
    Mail(Box<MailDraft>),
    /// A recipient waiting for `rcpt_result`.
    Rcpt(String),
    Message,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Hello {
    Helo,
    Ehlo,
    Lhlo,
}

#[derive(Debug)]
pub(crate) struct Greeting {
    pub(crate) hello: Hello,
    pub(crate) name: String,
}

/// A mail transaction: from an accepted MAIL to the reply after the data, or RSET.
#[derive(Debug)]
pub(crate) struct Transaction {
    pub(crate) from: String,
    pub(crate) body: Body,
    pub(crate) body_8bit: bool,
    pub(crate) smtputf8: bool,
    pub(crate) ret_full: Option<bool>,
    pub(crate) envid: Option<String>,
    pub(crate) recipients: Vec<String>,
    /// `XORIGIN=` and each recipient's `XEPOCH=` (cluster peers only, `command/cluster.rs`).
    pub(crate) origin: Option<String>,
    pub(crate) epochs: Vec<Option<u64>>,
    /// Set by the first BDAT; from then on DATA and RCPT are out of sequence (RFC 3030 2).
    pub(crate) chunks: Option<Chunks>,
    /// This message's share of `Config::inflight`, held until the transaction ends (the
    /// shell's answer to `Message`, a refusal, RSET), so it also covers the copy the shell
    /// hands to the queue.
    pub(crate) reservation: Option<Reservation>,
}

/// The SASL response the session waits for.
#[derive(Debug)]
pub(crate) enum SaslStep {
    /// PLAIN without initial response; we sent an empty challenge.
    Plain,
    /// LOGIN; we asked for the user name.
    LoginUsername,
    /// LOGIN; we asked for the password.
    LoginPassword { username: String },
}

/// The chunks of a transaction so far.
#[derive(Debug)]
pub(crate) struct Chunks {
    pub(crate) content: Content,
    /// The transaction failed (message too big); every further chunk gets this reply and is
    /// discarded, until LAST or RSET (RFC 3030 2: pipelined chunks may already be on the way).
    pub(crate) failed: Option<Reply>,
}

impl Chunks {
    /// Content bytes received in the transaction's chunks so far.
    pub(crate) fn size(&self) -> u64 {
        self.content.size()
    }

    pub(crate) fn content_mut(&mut self) -> &mut Content {
        &mut self.content
    }
}

/// The chunk being read.
#[derive(Debug)]
pub(crate) struct Chunk {
    /// Bytes of the chunk not read yet.
    pub(crate) remaining: u64,
    /// The size from the command, for the reply.
    pub(crate) size: u64,
    pub(crate) last: bool,
    pub(crate) disposition: Disposition,
}

impl Chunk {
    /// Bytes of this chunk read so far.
    pub(crate) fn read(&self) -> u64 {
        self.size.saturating_sub(self.remaining)
    }
}

/// What becomes of a chunk's bytes (BDAT, RFC 3030 2).
#[derive(Debug)]
pub(crate) enum Disposition {
    /// Append to the transaction's content.
    Take,
    /// Discard, then send this reply; `is_error` counts it against `errors_max`.
    Refuse { reply: Reply, is_error: bool },
    /// Discard; the transaction has already failed.
    Failed,
}

/// A transaction waiting for the shell's verdict on its sender.
#[derive(Debug)]
pub(crate) struct MailDraft {
    pub(crate) transaction: Transaction,
}

/// The cluster parameters of the MAIL or RCPT being answered (`command/cluster.rs`).
#[derive(Debug, Default)]
pub(crate) struct RouteParams {
    pub(crate) origin: Option<String>,
    pub(crate) epoch: Option<u64>,
}

impl Session {
    /// The transaction moved forward: MAIL or RCPT accepted, a chunk taken, a message
    /// accepted, AUTH succeeded, TLS started.
    pub(crate) fn progress(&mut self) {
        self.commands_without_progress = 0;
    }

    pub(crate) fn reply(&mut self, reply: Reply) {
        if matches!(self.phase, Phase::Closed) {
            return;
        }
        self.output.push_back(Event::Reply(reply.to_bytes()));
        if reply.is_failure() {
            if self.refusals.len() == REFUSALS_KEPT {
                self.refusals.pop_front();
            }
            self.refusals.push_back(Refusal {
                stage: self.stage,
                reply,
                from: self.refused_from.clone(),
                to: self.refused_to.clone(),
            });
        }
    }

    /// A reply to a protocol error; the `errors_max`th is followed by 421 and Close.
    pub(crate) fn error(&mut self, reply: Reply) {
        self.reply(reply);
        self.count_error();
    }

    pub(crate) fn count_error(&mut self) {
        if matches!(self.phase, Phase::Closed) {
            return;
        }
        self.errors = self.errors.saturating_add(1);
        if self.errors >= self.config.errors_max {
            let text = format!("{} Error: too many errors", self.config.hostname);
            self.reply(Reply::new(421, (4, 7, 0), text));
            self.close();
        }
    }

    pub(crate) fn event(&mut self, event: Event) {
        if !matches!(self.phase, Phase::Closed) {
            self.output.push_back(event);
        }
    }

    /// Queues Close; from here on input is ignored and answers to decisions too.
    pub(crate) fn close(&mut self) {
        if matches!(self.phase, Phase::Closed) {
            return;
        }
        self.output.push_back(Event::Close);
        self.phase = Phase::Closed;
        self.transaction = None;
        self.input.clear();
    }

    /// Sets the phase unless the session is closed (an error may have closed it).
    pub(crate) fn set_phase(&mut self, phase: Phase) {
        if !matches!(self.phase, Phase::Closed) {
            self.phase = phase;
        }
    }

    /// Sends the shell's refusal; a 421 also ends the session (RFC 5321 3.8: 421 means the
    /// server is closing the transmission channel).
    pub(crate) fn refuse(&mut self, reply: Reply) {
        let reply = Session::refusal(reply);
        let closing = reply.code == 421;
        self.reply(reply);
        if closing {
            self.close();
        }
    }

    /// A refusal from the shell, made safe: it must be 4xx or 5xx.
    pub(crate) fn refusal(reply: Reply) -> Reply {
        if reply.is_failure() {
            reply
        } else {
            Reply {
                code: 451,
                enhanced: Some((4, 3, 0)),
                text: reply.text,
            }
        }
    }

    /// The command name expected to open the session, for "send EHLO first" replies.
    pub(crate) fn hello_name(&self) -> &'static str {
        match self.config.mode {
            Mode::Lmtp => "LHLO",
            Mode::Mx | Mode::Submission => "EHLO/HELO",
        }
    }
}
