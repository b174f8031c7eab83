//! Commands that only reply: RSET, NOOP, QUIT, VRFY, HELP, and those not offered.

use crate::reply::Reply;
use crate::session::Session;

impl Session {
    /// RFC 5321 4.1.1.5: ends the transaction, keeps EHLO and AUTH.
    pub(crate) fn rset(&mut self) {
        self.transaction = None;
        self.reply(Reply::new(250, (2, 0, 0), "Ok"));
    }

    /// RFC 5321 4.1.1.9.
    pub(crate) fn noop(&mut self) {
        self.reply(Reply::new(250, (2, 0, 0), "Ok"));
    }

    /// RFC 5321 4.1.1.10: 221, then the server closes.
    pub(crate) fn quit(&mut self) {
        let text = format!("{} closing connection", self.config.hostname);
        self.reply(Reply::new(221, (2, 0, 0), text));
        self.close();
    }

    /// RFC 5321 3.5.3 and 7.3: 252, so that VRFY never tells which users exist.
    pub(crate) fn vrfy(&mut self) {
        let text = "Cannot VRFY user, but will accept message and attempt delivery";
        self.reply(Reply::new(252, (2, 5, 2), text));
    }

    /// RFC 5321 4.1.1.8.
    pub(crate) fn help(&mut self) {
        let text = "Commands: EHLO HELO LHLO MAIL RCPT DATA BDAT RSET NOOP QUIT VRFY HELP \
                    STARTTLS AUTH";
        self.reply(Reply::new(214, (2, 0, 0), text));
    }

    /// RFC 5321 4.2.4: 502 for a command we know but do not offer.
    pub(crate) fn not_implemented(&mut self) {
        self.error(Reply::new(502, (5, 5, 1), "Command not implemented"));
    }
}
