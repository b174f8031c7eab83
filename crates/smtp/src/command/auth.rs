//! AUTH (RFC 4954) with the PLAIN (RFC 4616) and LOGIN mechanisms. The session runs the
//! SASL exchange and decodes base64; the shell only checks the credentials.

use base64::Engine as _;
use base64::alphabet;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use smtp_proto::{AUTH_LOGIN, AUTH_PLAIN};

use crate::config::Mode;
use crate::event::Event;
use crate::line;
use crate::reply::{AuthResult, Reply};
use crate::session::{Hello, Pending, Phase, SaslStep, Session};

/// Standard base64; padding optional, since some clients leave it out.
const BASE64: GeneralPurpose = GeneralPurpose::new(
    &alphabet::STANDARD,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

impl Session {
    pub(crate) fn auth(&mut self, mechanism: u64, initial_response: &str) {
        if self.config.mode == Mode::Lmtp {
            return self.error(Reply::new(502, (5, 5, 1), "Command not implemented"));
        }
        // RFC 4954 4: AUTH is an EHLO extension; not twice; not inside a transaction.
        if !matches!(&self.greeting, Some(greeting) if greeting.hello == Hello::Ehlo) {
            return self.error(Reply::new(503, (5, 5, 1), "Send EHLO first"));
        }
        if self.authenticated.is_some() {
            return self.error(Reply::new(503, (5, 5, 1), "Already authenticated"));
        }
        if self.transaction.is_some() {
            let text = "AUTH not allowed during a mail transaction";
            return self.error(Reply::new(503, (5, 5, 1), text));
        }
        // RFC 4954 6: 538 when the mechanism needs an encrypted connection.
        if !self.peer.tls && !self.config.auth_without_tls {
            let text = "Encryption required for requested authentication mechanism";
            return self.error(Reply::new(538, (5, 7, 11), text));
        }
        // RFC 4954 4: 504 for a mechanism we do not support.
        if mechanism != AUTH_PLAIN && mechanism != AUTH_LOGIN {
            return self.error(Reply::new(
                504,
                (5, 5, 4),
                "Unrecognized authentication type",
            ));
        }
        // RFC 4954 4: an empty initial response is sent as "=".
        let initial = match initial_response {
            "" => None,
            "=" => Some(Vec::new()),
            encoded => match BASE64.decode(encoded) {
                Ok(decoded) => Some(decoded),
                Err(_) => return self.base64_error(),
            },
        };
        match (mechanism, initial) {
            (AUTH_PLAIN, Some(response)) => self.plain(&response),
            (AUTH_PLAIN, None) => {
                self.reply(Reply::plain(334, ""));
                self.set_phase(Phase::Sasl(SaslStep::Plain));
            }
            // The LOGIN draft (draft-murchison-sasl-login) lets the initial response carry
            // the user name.
            (_, Some(response)) => self.login_username(response),
            (_, None) => {
                self.reply(Reply::plain(334, "VXNlcm5hbWU6")); // "Username:"
                self.set_phase(Phase::Sasl(SaslStep::LoginUsername));
            }
        }
    }

    /// A response line during the exchange.
    pub(crate) fn sasl_line(&mut self, line: &[u8]) {
        let Phase::Sasl(step) = std::mem::replace(&mut self.phase, Phase::Command) else {
            return;
        };
        let text = match line::check(line) {
            Ok(text) => text,
            Err(_) => return self.base64_error(),
        };
        // RFC 4954 4: "*" cancels, answered with 501.
        if text == "*" {
            return self.reply(Reply::new(501, (5, 0, 0), "Authentication canceled"));
        }
        let Ok(response) = BASE64.decode(text) else {
            return self.base64_error();
        };
        match step {
            SaslStep::Plain => self.plain(&response),
            SaslStep::LoginUsername => self.login_username(response),
            SaslStep::LoginPassword { username } => match String::from_utf8(response) {
                Ok(password) => self.ask_shell("LOGIN", String::new(), username, password),
                Err(_) => self.base64_error(),
            },
        }
    }

    /// RFC 4616 2: `[authzid] NUL authcid NUL passwd`, UTF-8.
    fn plain(&mut self, response: &[u8]) {
        let mut parts = response.split(|&byte| byte == 0).map(std::str::from_utf8);
        match (parts.next(), parts.next(), parts.next(), parts.next()) {
            (Some(Ok(authzid)), Some(Ok(username)), Some(Ok(password)), None) => {
                let (authzid, username) = (authzid.to_string(), username.to_string());
                self.ask_shell("PLAIN", authzid, username, password.to_string());
            }
            _ => self.error(Reply::new(501, (5, 5, 2), "Invalid PLAIN response")),
        }
    }

    fn login_username(&mut self, response: Vec<u8>) {
        match String::from_utf8(response) {
            Ok(username) => {
                self.reply(Reply::plain(334, "UGFzc3dvcmQ6")); // "Password:"
                self.set_phase(Phase::Sasl(SaslStep::LoginPassword { username }));
            }
            Err(_) => self.base64_error(),
        }
    }

    fn ask_shell(
        &mut self,
        mechanism: &'static str,
        authzid: String,
        username: String,
        password: String,
    ) {
        self.event(Event::Auth {
            mechanism,
            username,
            password,
            authzid,
        });
        self.set_phase(Phase::Pending(Pending::Auth));
    }

    /// RFC 4954 4: a response that cannot be decoded is answered with 501.
    fn base64_error(&mut self) {
        self.set_phase(Phase::Command);
        self.error(Reply::new(501, (5, 5, 2), "Invalid base64 data"));
    }

    pub(crate) fn auth_answer(&mut self, result: AuthResult) {
        if !matches!(self.phase, Phase::Pending(Pending::Auth)) {
            return;
        }
        self.phase = Phase::Command;
        match result {
            // RFC 4954 6.
            AuthResult::Success { user } => {
                self.authenticated = Some(user);
                self.progress();
                self.reply(Reply::new(235, (2, 7, 0), "Authentication successful"));
            }
            // Counted as an error, so a password guesser is cut off after `errors_max`.
            AuthResult::Failed => self.error(Reply::new(
                535,
                (5, 7, 8),
                "Authentication credentials invalid",
            )),
            AuthResult::TemporaryFailure => self.reply(Reply::new(
                454,
                (4, 7, 0),
                "Temporary authentication failure",
            )),
        }
    }
}
