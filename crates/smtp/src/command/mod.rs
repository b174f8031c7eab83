//! One file per command. `Session::command` parses a checked line with `smtp_proto` and hands
//! it to the command's handler; handlers check state, then syntax details and limits, and
//! either reply or ask the shell.

pub(crate) mod auth;
pub(crate) mod bdat;
pub(crate) mod cluster;
pub(crate) mod data;
pub(crate) mod ehlo;
pub(crate) mod mail;
pub(crate) mod rcpt;
pub(crate) mod simple;
pub(crate) mod starttls;

use smtp_proto::{Error as ParseError, Request};

use crate::reply::Reply;
use crate::session::{Hello, Session, Stage};

impl Session {
    /// A complete command line: `line` as received (CRLF included), `text` without CRLF.
    pub(crate) fn command(&mut self, line: &[u8], text: &str) {
        let stripped;
        let (line, text) = match self.take_route_params(text) {
            Ok(None) => (line, text),
            Ok(Some(rest)) => {
                stripped = rest;
                (stripped.0.as_slice(), stripped.1.as_str())
            }
            Err(reply) => {
                self.stage = Stage::Command;
                (self.refused_from, self.refused_to) = (None, None);
                return self.error(reply);
            }
        };
        let request = match Request::parse(&mut line.iter()) {
            Ok(request) => request,
            Err(error) => {
                self.stage = Stage::Command;
                (self.refused_from, self.refused_to) = (None, None);
                return self.parse_error(error);
            }
        };
        self.stage = match &request {
            Request::Ehlo { .. } | Request::Helo { .. } | Request::Lhlo { .. } => Stage::Helo,
            Request::Mail { .. } => Stage::Mail,
            Request::Rcpt { .. } => Stage::Rcpt,
            Request::Data | Request::Bdat { .. } => Stage::Data,
            Request::Auth { .. } => Stage::Auth,
            Request::StartTls => Stage::Starttls,
            _ => Stage::Command,
        };
        // What a refusal of this command is logged with.
        let sender = self.transaction.as_ref().map(|t| t.from.clone());
        (self.refused_from, self.refused_to) = match &request {
            Request::Mail { from } => (Some(from.address.to_string()), None),
            Request::Rcpt { to } if to.address.is_empty() => {
                (sender, Some("postmaster".to_string()))
            }
            Request::Rcpt { to } => (sender, Some(to.address.to_string())),
            Request::Data | Request::Bdat { .. } => (
                sender,
                self.transaction.as_ref().map(|t| t.recipients.join(",")),
            ),
            _ => (None, None),
        };
        match request {
            Request::Ehlo { host } => self.hello(Hello::Ehlo, &host),
            Request::Helo { host } => self.hello(Hello::Helo, &host),
            Request::Lhlo { host } => self.hello(Hello::Lhlo, &host),
            Request::Mail { from } => self.mail(from, text),
            Request::Rcpt { to } => self.rcpt(to, text),
            Request::Data => self.data(),
            Request::Bdat {
                chunk_size,
                is_last,
            } => self.bdat(chunk_size, is_last),
            Request::Auth {
                mechanism,
                initial_response,
            } => self.auth(mechanism, &initial_response),
            Request::StartTls => self.starttls(text),
            Request::Rset => self.rset(),
            Request::Noop { .. } => self.noop(),
            Request::Quit => self.quit(),
            Request::Vrfy { .. } => self.vrfy(),
            Request::Help { .. } => self.help(),
            // RFC 5321 7.3 (EXPN may be disabled), RFC 1985 (ETRN), RFC 2645 (ATRN),
            // RFC 4468 (BURL): none is offered.
            Request::Expn { .. }
            | Request::Etrn { .. }
            | Request::Atrn { .. }
            | Request::Burl { .. } => self.not_implemented(),
        }
    }

    fn parse_error(&mut self, error: ParseError) {
        let reply = match error {
            // RFC 5321 4.2.4.
            ParseError::UnknownCommand => Reply::new(500, (5, 5, 1), "Command unrecognized"),
            // RFC 3463 X.1.7 and X.1.3: bad sender / recipient address syntax.
            ParseError::InvalidSenderAddress => {
                Reply::new(553, (5, 1, 7), "Bad sender address syntax")
            }
            ParseError::InvalidRecipientAddress => {
                Reply::new(553, (5, 1, 3), "Bad recipient address syntax")
            }
            ParseError::SyntaxError { syntax } => {
                Reply::new(501, (5, 5, 4), format!("Syntax: {syntax}"))
            }
            ParseError::InvalidParameter { param } => {
                Reply::new(501, (5, 5, 4), format!("Invalid value for {param}"))
            }
            // RFC 5321 4.1.1.11: 555 for MAIL/RCPT parameters not recognized.
            ParseError::UnsupportedParameter { param } => {
                Reply::new(555, (5, 5, 4), format!("Unsupported parameter {param}"))
            }
            ParseError::NeedsMoreData { .. }
            | ParseError::ResponseTooLong
            | ParseError::InvalidResponse { .. } => Reply::new(501, (5, 5, 2), "Syntax error"),
        };
        self.error(reply);
    }
}

/// Whether the path between `<` and `>` of a MAIL or RCPT line is empty. The parser returns
/// an empty address both for `<>` and for `<Postmaster>`; this tells them apart.
pub(crate) fn path_is_empty(text: &str) -> bool {
    text.split_once('<')
        .is_some_and(|(_, rest)| rest.trim_start().starts_with('>'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_path() {
        assert!(path_is_empty("MAIL FROM:<>"));
        assert!(path_is_empty("MAIL FROM:< > SIZE=1"));
        assert!(!path_is_empty("RCPT TO:<Postmaster>"));
        assert!(!path_is_empty("RCPT TO:"));
    }
}
