//! What the shell calls: a session takes the bytes the shell reads ([`Session::feed`]),
//! answers with events ([`Session::poll`]: replies, and decisions the shell answers with the
//! `*_result` calls), and is told of timeouts, deadlines, TLS and the shutdown. The input loop
//! frames lines, message data and chunks, and hands each to its command (`command/`). The
//! session reads no clock: the shell keeps the timers.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use crate::config::{Config, Mode, Peer};
use crate::event::Event;
use crate::line::{self, Framed, LineFault};
use crate::reply::{AuthResult, Reply, Verdict};
use crate::session::{Pending, Phase, Refusal, Session, Stage};
use limits::{Deadline, Deadlines};

/// RFC 5321 4.5.3.2.7: "at least 5 minutes while it is awaiting the next command".
const COMMAND_TIMEOUT: Duration = Duration::from_secs(5 * 60);
/// RFC 5321 4.5.3.2.5: the client waits 3 minutes per data block it sends; we allow the same
/// between reads of message content.
const DATA_BLOCK_TIMEOUT: Duration = Duration::from_secs(3 * 60);
/// RFC 5321 4.5.3.2.6: the client waits 10 minutes for the reply to the final dot; that is
/// the shell's budget for making the message durable.
const FINAL_REPLY_TIMEOUT: Duration = Duration::from_secs(10 * 60);

impl Session {
    /// A session for a new connection; its first event is the 220 greeting (RFC 5321 4.2,
    /// 3.1).
    pub fn new(config: Arc<Config>, peer: Peer) -> Session {
        let mut session = Session {
            config,
            peer,
            phase: Phase::Command,
            input: Vec::new(),
            discarding_line: false,
            output: VecDeque::new(),
            greeting: None,
            authenticated: None,
            transaction: None,
            errors: 0,
            commands_without_progress: 0,
            lines: 0,
            transfers: 0,
            stage: Stage::Connect,
            refused_from: None,
            refused_to: None,
            refusals: VecDeque::new(),
            route: Default::default(),
        };
        if session.config.decide_connect {
            session.phase = Phase::Pending(Pending::Connect);
            session.output.push_back(Event::Connect);
        } else {
            session.greet();
        }
        session
    }

    /// RFC 5321 4.2, 3.1: the 220 greeting.
    fn greet(&mut self) {
        let protocol = match self.config.mode {
            Mode::Lmtp => "LMTP",
            Mode::Mx | Mode::Submission => "ESMTP",
        };
        let text = format!("{} {protocol} ready", self.config.hostname);
        self.reply(Reply::plain(220, text));
    }

    /// The answer to `Event::Connect`: the greeting, or the refusal and Close (RFC 5321
    /// 3.1 lets a server refuse a connection with 554 in place of the greeting; we do not
    /// wait for the QUIT it would then owe us: a refused client gets nothing more). A
    /// refusal must be 4xx or 5xx (anything else is sent as 451). Ignored when no connect
    /// decision is pending.
    pub fn connect_result(&mut self, result: Verdict) {
        if !matches!(self.phase, Phase::Pending(Pending::Connect)) {
            return;
        }
        self.phase = Phase::Command;
        match result {
            Verdict::Accept => self.greet(),
            Verdict::Reject(reply) => {
                let reply = Session::refusal(reply);
                self.goodbye(reply);
            }
        }
        self.advance();
    }

    /// The answer to `Event::Hello`: the EHLO/HELO/LHLO reply, or the refusal (the client
    /// has then still not greeted, so MAIL is refused until a greeting is accepted).
    /// Ignored when no greeting decision is pending.
    pub fn hello_result(&mut self, result: Verdict) {
        if !matches!(self.phase, Phase::Pending(Pending::Hello(..))) {
            return;
        }
        let Phase::Pending(Pending::Hello(hello, name)) =
            std::mem::replace(&mut self.phase, Phase::Command)
        else {
            return;
        };
        match result {
            Verdict::Accept => self.greeted(hello, name),
            Verdict::Reject(reply) => self.refuse(reply),
        }
        self.advance();
    }

    /// Bytes read from the socket, split anywhere. Processed at once as far as possible;
    /// while a decision is pending they are only buffered. Ignored after `Event::Close`, and
    /// discarded between `Event::StartTls` and `tls_started`.
    pub fn feed(&mut self, input: &[u8]) {
        if matches!(self.phase, Phase::Closed | Phase::AwaitingTls) {
            return;
        }
        self.input.extend_from_slice(input);
        self.advance();
    }

    /// The next event, or `None` when the session needs more input or an answer.
    /// Consecutive replies come as one `Event::Reply` (RFC 2920 3.2: batch pipelined replies).
    pub fn poll(&mut self) -> Option<Event> {
        let mut event = self.output.pop_front()?;
        if let Event::Reply(bytes) = &mut event {
            while let Some(Event::Reply(more)) = self.output.front() {
                bytes.extend_from_slice(more);
                self.output.pop_front();
            }
        }
        Some(event)
    }

    /// Whether the shell should read from the socket: not while a decision or the TLS
    /// handshake is pending, after Close, or when `Config::input_buffer_max` bytes wait.
    /// The buffer then holds at most `input_buffer_max` plus the shell's last read.
    pub fn wants_input(&self) -> bool {
        let reading = matches!(
            self.phase,
            Phase::Command | Phase::Sasl(_) | Phase::Data(_) | Phase::Bdat(_)
        );
        reading && self.input.len() < self.config.input_buffer_max
    }

    /// How long the shell waits for input in the current phase before calling `timed_out`
    /// (RFC 5321 4.5.3.2): 5 minutes for a command, 3 minutes between reads of message
    /// content, and while the shell itself owes the answer after the data, the 10 minutes the
    /// client waits for it.
    pub fn timeout(&self) -> Duration {
        match self.phase {
            Phase::Data(_) | Phase::Bdat(_) => DATA_BLOCK_TIMEOUT,
            Phase::Pending(Pending::Message) => FINAL_REPLY_TIMEOUT,
            _ => COMMAND_TIMEOUT,
        }
    }

    /// The timeout expired: 421 4.4.2 (RFC 5321 3.8, RFC 3463 X.4.2) and Close.
    pub fn timed_out(&mut self) {
        self.goodbye(Reply::new(
            421,
            (4, 4, 2),
            format!("{} Error: timeout exceeded", self.config.hostname),
        ));
    }

    /// What bounds the time of the current step, whatever trickles in (see
    /// [`limits::Deadline`]): the login on a submission port, the message transfer, the
    /// command line being received.
    pub fn deadlines(&self) -> Deadlines {
        let config = &self.config;
        let mut deadlines = Deadlines::default();
        if matches!(self.phase, Phase::Closed) {
            return deadlines;
        }
        if config.mode == Mode::Submission && config.require_auth && self.authenticated.is_none() {
            deadlines.phase = Some(Deadline {
                step: 0,
                within: config.login_deadline,
            });
        }
        let transfer = |bytes: u64| {
            Some(Deadline {
                step: self.transfers,
                within: Deadline::transfer(
                    config.transfer_deadline,
                    bytes,
                    config.transfer_rate_min,
                    config.transfer_deadline_max,
                ),
            })
        };
        let chunked = self
            .transaction
            .as_ref()
            .and_then(|transaction| transaction.chunks.as_ref())
            .map(|chunks| chunks.size());
        match &self.phase {
            Phase::Command | Phase::Sasl(_) => {
                if !self.input.is_empty() || self.discarding_line {
                    deadlines.request = Some(Deadline {
                        step: self.lines,
                        within: config.command_deadline,
                    });
                }
                // Between the chunks of a BDAT transaction, the transfer's clock runs on.
                if let Some(bytes) = chunked {
                    deadlines.transfer = transfer(bytes);
                }
            }
            Phase::Data(content) => deadlines.transfer = transfer(content.size()),
            Phase::Bdat(chunk) => {
                deadlines.transfer = transfer(chunked.unwrap_or_else(|| chunk.read()))
            }
            Phase::Pending(_) | Phase::AwaitingTls | Phase::Closed => {}
        }
        deadlines
    }

    /// A deadline from [`Session::deadlines`] passed: 421 4.4.2 and Close.
    pub fn deadline_passed(&mut self) {
        self.goodbye(Reply::new(
            421,
            (4, 4, 2),
            format!("{} Error: too slow, closing", self.config.hostname),
        ));
    }

    /// The server is shutting down: 421 4.3.2 (RFC 5321 3.8: a server that must shut down
    /// may close with 421) and Close.
    pub fn shutting_down(&mut self) {
        self.goodbye(Reply::new(
            421,
            (4, 3, 2),
            format!("{} shutting down", self.config.hostname),
        ));
    }

    /// The authenticated account was deleted: 421 4.7.0 and Close.
    pub fn revoked(&mut self) {
        self.goodbye(Reply::new(
            421,
            (4, 7, 0),
            format!("{} account removed, closing", self.config.hostname),
        ));
    }

    fn goodbye(&mut self, reply: Reply) {
        if matches!(self.phase, Phase::Closed) {
            return;
        }
        self.reply(reply);
        self.close();
    }

    /// The TLS handshake after `Event::StartTls` succeeded. RFC 3207 4.2: forget everything
    /// learnt in plaintext (EHLO, AUTH, the transaction); the client starts with EHLO again,
    /// and no new greeting is sent.
    pub fn tls_started(&mut self) {
        if !matches!(self.phase, Phase::AwaitingTls) {
            return;
        }
        self.peer.tls = true;
        self.greeting = None;
        self.authenticated = None;
        self.transaction = None;
        self.input.clear();
        self.discarding_line = false;
        self.phase = Phase::Command;
        self.progress();
    }

    /// The answer to `Event::Auth`. Ignored when no AUTH is pending.
    pub fn auth_result(&mut self, result: AuthResult) {
        self.auth_answer(result);
        self.advance();
    }

    /// The answer to `Event::MailFrom`. Ignored when no MAIL is pending.
    pub fn mail_result(&mut self, result: Verdict) {
        self.mail_answer(result);
        self.advance();
    }

    /// The answer to `Event::RcptTo`. Ignored when no RCPT is pending.
    pub fn rcpt_result(&mut self, result: Verdict) {
        self.rcpt_answer(result);
        self.advance();
    }

    /// The answer to `Event::Message`: one verdict in SMTP, one per accepted recipient in
    /// order in LMTP (RFC 2033 4.2). A missing verdict is sent as 451 4.3.0, never as
    /// success; extra ones are ignored. Ignored when no message is pending.
    pub fn message_result(&mut self, results: Vec<Verdict>) {
        self.message_answer(results);
        self.advance();
    }

    /// The failure replies (4xx, 5xx) sent since the last call, with the step each answered:
    /// what the shell logs as rejections. Only the last 64 are kept for a shell that never
    /// asks.
    pub fn take_refusals(&mut self) -> Vec<Refusal> {
        self.refusals.drain(..).collect()
    }

    /// Bytes received and not processed yet (for tests and metrics).
    pub fn buffered_len(&self) -> usize {
        self.input.len()
    }

    /// `Event::Close` has been queued.
    pub fn is_closed(&self) -> bool {
        matches!(self.phase, Phase::Closed)
    }

    /// Processes buffered input until it runs out, a decision is pending, or the session ends.
    fn advance(&mut self) {
        let input = std::mem::take(&mut self.input);
        let mut position = 0;
        loop {
            let rest = input.get(position..).unwrap_or_default();
            self.cover_content(rest.len());
            // Every step consumes input or changes the phase, so this loop ends.
            let consumed = match &self.phase {
                Phase::Command | Phase::Sasl(_) => self.line_step(rest),
                Phase::Data(_) => self.data_step(rest),
                Phase::Bdat(_) => self.chunk_step(rest),
                Phase::Pending(_) | Phase::AwaitingTls | Phase::Closed => None,
            };
            match consumed {
                Some(consumed) => position = position.saturating_add(consumed),
                None => break,
            }
        }
        // After STARTTLS, input that came with it is dropped unseen: it was sent in plaintext
        // and would otherwise be executed inside TLS (CVE-2011-0411).
        if !matches!(self.phase, Phase::AwaitingTls | Phase::Closed) {
            let mut input = input;
            input.drain(..position.min(input.len()));
            self.input = input;
        }
    }

    /// Keeps `Config::inflight` covering the memory of the message being received, before
    /// the next `incoming` bytes can make it grow. When the budget cannot cover it, the
    /// content is shed: the rest of the message is only counted, and its end answered with
    /// 452 4.3.1.
    fn cover_content(&mut self, incoming: usize) {
        let Some(budget) = &self.config.inflight else {
            return;
        };
        let Some(transaction) = &mut self.transaction else {
            return;
        };
        let content = match &mut self.phase {
            Phase::Data(content) => &mut **content,
            Phase::Bdat(_) => match &mut transaction.chunks {
                Some(chunks) => chunks.content_mut(),
                None => return,
            },
            _ => return,
        };
        if content.is_too_big() || content.has_no_room() {
            return;
        }
        let reservation = transaction
            .reservation
            .get_or_insert_with(|| budget.reservation());
        let needed = limits::rounded_up(content.capacity_for(incoming));
        if reservation.grow_to(needed) {
            content.make_room(incoming);
        } else {
            content.shed();
            reservation.release();
        }
    }

    /// One command or SASL line.
    fn line_step(&mut self, rest: &[u8]) -> Option<usize> {
        let framed = self.frame_line(rest);
        if framed.is_some() && !self.discarding_line {
            self.lines = self.lines.wrapping_add(1);
        }
        framed
    }

    fn frame_line(&mut self, rest: &[u8]) -> Option<usize> {
        match line::frame(rest, self.config.line_max(), &mut self.discarding_line) {
            Framed::NeedMore => None,
            Framed::Skipped { consumed } => Some(consumed),
            Framed::TooLong { consumed } => {
                self.line_too_long();
                Some(consumed)
            }
            Framed::Line(length) => {
                let line = rest.get(..length).unwrap_or_default();
                if matches!(self.phase, Phase::Sasl(_)) {
                    self.sasl_line(line);
                } else if self.begin_command() {
                    match line::check(line) {
                        Ok(text) => self.command(line, text),
                        Err(fault) => self.line_fault(fault),
                    }
                }
                Some(length)
            }
        }
    }

    fn line_too_long(&mut self) {
        if matches!(self.phase, Phase::Sasl(_)) {
            // RFC 4954 4.
            self.phase = Phase::Command;
            self.error(Reply::new(
                500,
                (5, 5, 6),
                "Authentication Exchange line is too long",
            ));
        } else if self.begin_command() {
            self.stage = Stage::Command;
            // RFC 5321 4.5.3.1.4 and 4.5.3.1.9: "500 Line too long".
            self.error(Reply::new(500, (5, 5, 6), "Line too long"));
        }
    }

    fn line_fault(&mut self, fault: LineFault) {
        self.stage = Stage::Command;
        let text = match fault {
            // RFC 5321 2.3.8; Postfix refuses these too.
            LineFault::BareNewline => "Bare CR or LF in command (RFC 5321 2.3.8)",
            LineFault::Nul => "NUL byte in command",
            LineFault::NotUtf8 => "Command is not UTF-8",
        };
        self.error(Reply::new(500, (5, 5, 2), text));
    }

    /// Counts a command against `commands_without_progress_max`; past it, 421 and Close
    /// instead of an answer. Returns whether to go on with the command.
    fn begin_command(&mut self) -> bool {
        self.commands_without_progress = self.commands_without_progress.saturating_add(1);
        if self.commands_without_progress > self.config.commands_without_progress_max {
            let text = format!(
                "{} Error: too many commands without progress",
                self.config.hostname
            );
            self.reply(Reply::new(421, (4, 7, 0), text));
            self.close();
            return false;
        }
        true
    }
}
