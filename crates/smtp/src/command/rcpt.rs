//! RCPT TO (RFC 5321 4.1.1.3) with NOTIFY and ORCPT (RFC 3461 4.1, 4.2).

use std::borrow::Cow;

use smtp_proto::{
    RCPT_CONNEG, RCPT_NOTIFY_DELAY, RCPT_NOTIFY_FAILURE, RCPT_NOTIFY_NEVER, RCPT_NOTIFY_SUCCESS,
    RCPT_RRVS_CONTINUE, RCPT_RRVS_REJECT, RcptTo,
};

use crate::command::path_is_empty;
use crate::event::Event;
use crate::reply::{Reply, Verdict};
use crate::session::{Pending, Phase, Session};

impl Session {
    pub(crate) fn rcpt(&mut self, to: RcptTo<Cow<'_, str>>, text: &str) {
        let Some(transaction) = &self.transaction else {
            return self.error(Reply::new(503, (5, 5, 1), "Need MAIL command"));
        };
        // RFC 3030 2: the envelope is complete once the first chunk arrived.
        if transaction.chunks.is_some() {
            return self.error(Reply::new(503, (5, 5, 1), "RCPT not allowed after BDAT"));
        }
        let smtputf8 = transaction.smtputf8;
        let accepted = transaction.recipients.len();
        // RRVS (RFC 7293) and CONNEG (RFC 4141) are parsed but not offered.
        if to.flags & (RCPT_RRVS_REJECT | RCPT_RRVS_CONTINUE | RCPT_CONNEG) != 0 {
            return self.error(Reply::new(555, (5, 5, 4), "Unsupported parameter"));
        }
        // RFC 3461 4.1: NEVER stands alone (the parser only checks what comes before it).
        let notify_any = RCPT_NOTIFY_SUCCESS | RCPT_NOTIFY_FAILURE | RCPT_NOTIFY_DELAY;
        if to.flags & RCPT_NOTIFY_NEVER != 0 && to.flags & notify_any != 0 {
            return self.error(Reply::new(501, (5, 5, 4), "Invalid value for NOTIFY"));
        }
        let address = if !to.address.is_empty() {
            to.address.into_owned()
        } else if path_is_empty(text) {
            return self.error(Reply::new(553, (5, 1, 3), "Bad recipient address syntax"));
        } else {
            // RFC 5321 4.5.1: `<Postmaster>` without a domain must be accepted.
            "postmaster".to_string()
        };
        // RFC 6531 3.5.
        if !smtputf8 && !address.is_ascii() {
            let reply = "Non-ASCII address requires SMTPUTF8";
            return self.error(Reply::new(553, (5, 6, 7), reply));
        }
        // RFC 5321 4.5.3.1.10: 452 for too many recipients; the client sends the rest later.
        if accepted >= self.config.recipients_max {
            return self.reply(Reply::new(452, (4, 5, 3), "Too many recipients"));
        }
        self.event(Event::RcptTo {
            to: address.clone(),
            notify: notify(to.flags),
            orcpt: to.orcpt.map(|orcpt| format!("rfc822;{orcpt}")),
        });
        self.set_phase(Phase::Pending(Pending::Rcpt(address)));
    }

    pub(crate) fn rcpt_answer(&mut self, verdict: Verdict) {
        if !matches!(self.phase, Phase::Pending(Pending::Rcpt(_))) {
            return;
        }
        let Phase::Pending(Pending::Rcpt(address)) =
            std::mem::replace(&mut self.phase, Phase::Command)
        else {
            return;
        };
        match verdict {
            Verdict::Accept => {
                let epoch = self.route.epoch.take();
                if let Some(transaction) = &mut self.transaction {
                    transaction.recipients.push(address);
                    transaction.epochs.push(epoch);
                }
                self.progress();
                self.reply(Reply::new(250, (2, 1, 5), "Ok"));
            }
            Verdict::Reject(reply) => self.refuse(reply),
        }
    }
}

/// NOTIFY= as RFC 3461 4.1 spells it.
fn notify(flags: u64) -> Option<String> {
    if flags & RCPT_NOTIFY_NEVER != 0 {
        return Some("NEVER".to_string());
    }
    let names: Vec<&str> = [
        (RCPT_NOTIFY_SUCCESS, "SUCCESS"),
        (RCPT_NOTIFY_FAILURE, "FAILURE"),
        (RCPT_NOTIFY_DELAY, "DELAY"),
    ]
    .into_iter()
    .filter(|(flag, _)| flags & flag != 0)
    .map(|(_, name)| name)
    .collect();
    (!names.is_empty()).then(|| names.join(","))
}
