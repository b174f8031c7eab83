//! DATA (RFC 5321 4.1.1.4, 3.3) and what happens after any message's last byte, shared with
//! BDAT LAST: the faults of the content, the `Message` event, and the replies once the shell
//! has answered (one per recipient in LMTP, RFC 2033 4.2).

use crate::config::Mode;
use crate::content::{Body, Content, Framing};
use crate::event::{Envelope, Event};
use crate::reply::{Reply, Verdict};
use crate::session::{Hello, Pending, Phase, Session};

impl Session {
    pub(crate) fn data(&mut self) {
        let Some(transaction) = &self.transaction else {
            return self.error(Reply::new(503, (5, 5, 1), "Need MAIL command"));
        };
        // RFC 3030 2: a transaction uses DATA or BDAT, not both.
        if transaction.chunks.is_some() {
            return self.error(Reply::new(503, (5, 5, 1), "DATA not allowed after BDAT"));
        }
        // RFC 3030 3: BINARYMIME content must come with BDAT.
        if transaction.body == Body::Binary {
            return self.error(Reply::new(503, (5, 5, 1), "BINARYMIME requires BDAT"));
        }
        if transaction.recipients.is_empty() {
            return self.reply(self.no_valid_recipients());
        }
        let content = Content::new(
            Framing::Data,
            Body::Text,
            self.config.message_bytes_max,
            self.config.text_line_max,
        );
        self.reply(Reply::plain(354, "End data with <CR><LF>.<CR><LF>"));
        self.transfers = self.transfers.wrapping_add(1);
        self.set_phase(Phase::Data(Box::new(content)));
    }

    /// Message content after DATA, up to the final dot.
    pub(crate) fn data_step(&mut self, rest: &[u8]) -> Option<usize> {
        if rest.is_empty() {
            return None;
        }
        let Phase::Data(content) = &mut self.phase else {
            return None;
        };
        let ingested = content.ingest(rest);
        if ingested.ended {
            let Phase::Data(content) = std::mem::replace(&mut self.phase, Phase::Command) else {
                return Some(ingested.consumed);
            };
            self.complete_message(*content);
        }
        Some(ingested.consumed)
    }

    /// The message is complete: refuse it for its faults, or hand it to the shell.
    pub(crate) fn complete_message(&mut self, content: Content) {
        if let Some(reply) = content.fault() {
            self.message_refused(reply, content.is_protocol_error());
            return;
        }
        let Some(envelope) = self.envelope() else {
            return;
        };
        self.event(Event::Message {
            envelope,
            content: content.into_bytes(),
        });
        self.set_phase(Phase::Pending(Pending::Message));
    }

    /// Refuses the whole message with one reply, repeated per recipient in LMTP (RFC 2033
    /// 4.2: the client reads one reply per accepted recipient after the data, whatever
    /// happened), and ends the transaction (RFC 5321 4.1.1.4).
    pub(crate) fn message_refused(&mut self, reply: Reply, is_protocol_error: bool) {
        let replies = self.replies_after_data();
        self.transaction = None;
        self.set_phase(Phase::Command);
        for _ in 0..replies {
            self.reply(reply.clone());
        }
        if is_protocol_error {
            self.count_error();
        }
    }

    pub(crate) fn message_answer(&mut self, results: Vec<Verdict>) {
        if !matches!(self.phase, Phase::Pending(Pending::Message)) {
            return;
        }
        self.phase = Phase::Command;
        let recipients = self
            .transaction
            .take()
            .map(|transaction| transaction.recipients)
            .unwrap_or_default();
        let mut results = results.into_iter();
        let mut accepted = false;
        let mut replies = Vec::new();
        let mut answer = |result: Option<Verdict>, accept: Reply| match result {
            Some(Verdict::Accept) => {
                accepted = true;
                accept
            }
            Some(Verdict::Reject(reply)) => Session::refusal(reply),
            None => Reply::temporary_failure(),
        };
        if self.config.mode == Mode::Lmtp {
            // RFC 2033 4.2: one reply per accepted recipient, in RCPT order.
            for recipient in &recipients {
                let delivered = Reply::new(250, (2, 0, 0), format!("<{recipient}> Delivered"));
                replies.push(answer(results.next(), delivered));
            }
        } else {
            replies.push(answer(
                results.next(),
                Reply::new(250, (2, 0, 0), "Ok: queued"),
            ));
        }
        // RFC 5321 3.8: a 421 closes the transmission channel.
        let closing = replies.iter().any(|reply| reply.code == 421);
        for reply in replies {
            self.reply(reply);
        }
        if accepted {
            self.progress();
        }
        if closing {
            self.close();
        }
    }

    /// DATA or BDAT without an accepted recipient. RFC 5321 3.3: 554; RFC 2033 4.2: 503 in
    /// LMTP. Not counted as an error: with pipelining (RFC 2920 3.1) the client sends DATA
    /// before it knows.
    pub(crate) fn no_valid_recipients(&self) -> Reply {
        let code = match self.config.mode {
            Mode::Lmtp => 503,
            Mode::Mx | Mode::Submission => 554,
        };
        Reply::new(code, (5, 5, 1), "No valid recipients")
    }

    /// How many replies the client reads after the end of the data.
    fn replies_after_data(&self) -> usize {
        match (&self.config.mode, &self.transaction) {
            (Mode::Lmtp, Some(transaction)) => transaction.recipients.len().max(1),
            _ => 1,
        }
    }

    fn envelope(&self) -> Option<Envelope> {
        let transaction = self.transaction.as_ref()?;
        let greeting = self.greeting.as_ref()?;
        Some(Envelope {
            helo: greeting.name.clone(),
            from: transaction.from.clone(),
            recipients: transaction.recipients.clone(),
            authenticated: self.authenticated.clone(),
            peer: self.peer,
            tls: self.peer.tls,
            protocol: protocol(greeting.hello, self.peer.tls, self.authenticated.is_some()),
            body_8bit: transaction.body_8bit,
            smtputf8: transaction.smtputf8,
            ret_full: transaction.ret_full,
            envid: transaction.envid.clone(),
            origin: transaction.origin.clone(),
            epochs: transaction.epochs.clone(),
        })
    }
}

/// The WITH keyword of the Received header (RFC 3848, RFC 2033 4.1 for LMTP).
fn protocol(hello: Hello, tls: bool, authenticated: bool) -> &'static str {
    match (hello, tls, authenticated) {
        (Hello::Helo, _, _) => "SMTP",
        (Hello::Ehlo, false, false) => "ESMTP",
        (Hello::Ehlo, true, false) => "ESMTPS",
        (Hello::Ehlo, false, true) => "ESMTPA",
        (Hello::Ehlo, true, true) => "ESMTPSA",
        (Hello::Lhlo, false, false) => "LMTP",
        (Hello::Lhlo, true, false) => "LMTPS",
        (Hello::Lhlo, false, true) => "LMTPA",
        (Hello::Lhlo, true, true) => "LMTPSA",
    }
}
