//! MAIL FROM (RFC 5321 4.1.1.2) with SIZE (RFC 1870), BODY (RFC 6152, RFC 3030),
//! SMTPUTF8 (RFC 6531), RET and ENVID (RFC 3461) and AUTH= (RFC 4954 5).

use std::borrow::Cow;

use smtp_proto::{
    MAIL_BODY_8BITMIME, MAIL_BODY_BINARYMIME, MAIL_BY_NOTIFY, MAIL_BY_RETURN, MAIL_BY_TRACE,
    MAIL_CONPERM, MAIL_REQUIRETLS, MAIL_RET_FULL, MAIL_RET_HDRS, MAIL_SMTPUTF8, MailFrom,
};

use crate::command::path_is_empty;
use crate::config::Mode;
use crate::content::{Body, too_big};
use crate::event::Event;
use crate::reply::{Reply, Verdict};
use crate::session::{MailDraft, Pending, Phase, Session, Transaction};

/// Flags of extensions we parse but do not offer: REQUIRETLS (RFC 8689), CONPERM (RFC 4141),
/// DELIVERBY (RFC 2852).
const MAIL_FLAGS_UNSUPPORTED: u64 =
    MAIL_REQUIRETLS | MAIL_CONPERM | MAIL_BY_NOTIFY | MAIL_BY_RETURN | MAIL_BY_TRACE;

impl Session {
    pub(crate) fn mail(&mut self, from: MailFrom<Cow<'_, str>>, text: &str) {
        if self.greeting.is_none() {
            let reply = format!("Send {} first", self.hello_name());
            return self.error(Reply::new(503, (5, 5, 1), reply));
        }
        // RFC 5321 4.1.4: MAIL inside a transaction is out of sequence.
        if self.transaction.is_some() {
            return self.error(Reply::new(503, (5, 5, 1), "Nested MAIL command"));
        }
        // RFC 6409 4.3 and RFC 4954 6: submission needs authentication first.
        if self.config.mode == Mode::Submission
            && self.config.require_auth
            && self.authenticated.is_none()
        {
            return self.error(Reply::new(530, (5, 7, 0), "Authentication required"));
        }
        if let Some(parameter) = unsupported(&from) {
            // RFC 5321 4.1.1.11.
            let reply = format!("Unsupported parameter {parameter}");
            return self.error(Reply::new(555, (5, 5, 4), reply));
        }
        let ret_full = match (
            from.flags & MAIL_RET_FULL != 0,
            from.flags & MAIL_RET_HDRS != 0,
        ) {
            (true, true) => {
                return self.error(Reply::new(501, (5, 5, 4), "Invalid value for RET"));
            }
            (true, false) => Some(true),
            (false, true) => Some(false),
            (false, false) => None,
        };
        // The parser turns `<Postmaster>` into the null path too; as a sender it has no
        // domain and is invalid (RFC 5321 4.1.2: Mailbox needs a domain).
        if from.address.is_empty() && !path_is_empty(text) {
            return self.error(Reply::new(553, (5, 1, 7), "Bad sender address syntax"));
        }
        let smtputf8 = from.flags & MAIL_SMTPUTF8 != 0;
        // RFC 6531 3.5: UTF-8 addresses only with SMTPUTF8.
        if !smtputf8 && !from.address.is_ascii() {
            let reply = "Non-ASCII address requires SMTPUTF8";
            return self.error(Reply::new(553, (5, 6, 7), reply));
        }
        let size = u64::try_from(from.size).unwrap_or(u64::MAX);
        // RFC 1870 6.1: refuse at MAIL what would be refused after the data.
        if size > self.config.message_bytes_max {
            return self.reply(too_big(self.config.message_bytes_max));
        }
        let body = if from.flags & MAIL_BODY_BINARYMIME != 0 {
            Body::Binary
        } else {
            Body::Text
        };
        let body_8bit = body == Body::Binary || from.flags & MAIL_BODY_8BITMIME != 0;
        let transaction = Transaction {
            from: from.address.into_owned(),
            body,
            body_8bit,
            smtputf8,
            ret_full,
            envid: from.env_id.map(Cow::into_owned),
            recipients: Vec::new(),
            origin: self.route.origin.take(),
            epochs: Vec::new(),
            chunks: None,
            reservation: None,
        };
        self.event(Event::MailFrom {
            from: transaction.from.clone(),
            size: (size > 0).then_some(size),
            body_8bit,
            smtputf8,
            ret_full,
            envid: transaction.envid.clone(),
        });
        self.set_phase(Phase::Pending(Pending::Mail(Box::new(MailDraft {
            transaction,
        }))));
    }

    pub(crate) fn mail_answer(&mut self, verdict: Verdict) {
        if !matches!(self.phase, Phase::Pending(Pending::Mail(_))) {
            return;
        }
        let Phase::Pending(Pending::Mail(draft)) =
            std::mem::replace(&mut self.phase, Phase::Command)
        else {
            return;
        };
        match verdict {
            Verdict::Accept => {
                self.transaction = Some(draft.transaction);
                self.progress();
                self.reply(Reply::new(250, (2, 1, 0), "Ok"));
            }
            Verdict::Reject(reply) => self.refuse(reply),
        }
    }
}

/// The first parameter the parser understood but we do not offer.
fn unsupported(from: &MailFrom<Cow<'_, str>>) -> Option<&'static str> {
    if from.flags & MAIL_REQUIRETLS != 0 {
        Some("REQUIRETLS")
    } else if from.flags & MAIL_CONPERM != 0 {
        Some("CONPERM")
    } else if from.flags & MAIL_FLAGS_UNSUPPORTED != 0 || from.by != 0 {
        Some("BY")
    } else if from.hold_for != 0 || from.hold_until != 0 {
        Some("HOLDFOR/HOLDUNTIL")
    } else if from.mt_priority != 0 {
        Some("MT-PRIORITY")
    } else if from.trans_id.is_some() {
        Some("TRANSID")
    } else if from.solicit.is_some() {
        Some("SOLICIT")
    } else if from.mtrk.is_some() {
        Some("MTRK")
    } else {
        None
    }
}
