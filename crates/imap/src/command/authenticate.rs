//! RFC 9051 6.2.2 AUTHENTICATE (PLAIN, RFC 4616; SASL-IR, RFC 4959) and 6.2.3 LOGIN.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use imap_codec::imap_types::auth::AuthMechanism;

use crate::event::Event;
use crate::session::{Session, Waiting};

/// RFC 4616 2: at most 255 octets each for authzid, authcid and password.
const SASL_FIELD_BYTES_MAX: usize = 255;

fn plaintext_refused(s: &mut Session, tag: &str) -> bool {
    if s.tls || s.config.plaintext_auth {
        return false;
    }
    // RFC 9051 6.2.3 / RFC 5530: LOGINDISABLED was advertised.
    s.tagged(tag, "NO [PRIVACYREQUIRED] Use STARTTLS first");
    true
}

pub(crate) fn login(s: &mut Session, tag: &str, username: &[u8], password: &[u8]) {
    if plaintext_refused(s, tag) {
        return;
    }
    let (Ok(username), Ok(password)) =
        (std::str::from_utf8(username), std::str::from_utf8(password))
    else {
        s.tagged(tag, "NO [AUTHENTICATIONFAILED] Authentication failed");
        return;
    };
    ask(s, tag, "LOGIN", username, password, "");
}

pub(crate) fn authenticate(
    s: &mut Session,
    tag: &str,
    mechanism: &AuthMechanism<'_>,
    initial: Option<Vec<u8>>,
) {
    if *mechanism != AuthMechanism::Plain {
        s.tagged(tag, "NO [CANNOT] Unsupported authentication mechanism");
        return;
    }
    if plaintext_refused(s, tag) {
        return;
    }
    match initial {
        Some(response) => plain(s, tag, &response),
        None => {
            s.out.extend_from_slice(b"+ \r\n");
            s.waiting = Some(Waiting::SaslResponse {
                tag: tag.to_string(),
            });
        }
    }
}

impl Session {
    /// The client's answer to the `+` of AUTHENTICATE: base64, or `*` to cancel.
    pub(crate) fn sasl_response(&mut self, tag: &str, line: &[u8]) {
        let line = line.trim_ascii_end();
        if line == b"*" {
            self.tagged(tag, "BAD Authentication cancelled");
            return;
        }
        match STANDARD.decode(line) {
            Ok(response) => plain(self, tag, &response),
            Err(_) => {
                self.tagged(tag, "BAD Invalid base64");
                self.error();
            }
        }
    }
}

/// RFC 4616 2: `[authzid] NUL authcid NUL passwd`.
fn plain(s: &mut Session, tag: &str, response: &[u8]) {
    let fields: Vec<&[u8]> = response.split(|&b| b == 0).collect();
    let valid = fields.len() == 3
        && fields.iter().all(|f| f.len() <= SASL_FIELD_BYTES_MAX)
        && !fields[1].is_empty();
    let decoded = valid
        .then(|| {
            Some((
                std::str::from_utf8(fields[0]).ok()?,
                std::str::from_utf8(fields[1]).ok()?,
                std::str::from_utf8(fields[2]).ok()?,
            ))
        })
        .flatten();
    match decoded {
        Some((authzid, authcid, password)) => ask(s, tag, "PLAIN", authcid, password, authzid),
        None => {
            s.tagged(tag, "BAD Malformed PLAIN response");
            s.error();
        }
    }
}

fn ask(
    s: &mut Session,
    tag: &str,
    mechanism: &'static str,
    username: &str,
    password: &str,
    authzid: &str,
) {
    s.waiting = Some(Waiting::Auth {
        tag: tag.to_string(),
    });
    let out = std::mem::take(&mut s.out);
    if !out.is_empty() {
        s.events.push_back(Event::Reply(out));
    }
    s.events.push_back(Event::Auth {
        mechanism,
        username: username.to_string(),
        password: password.to_string(),
        authzid: authzid.to_string(),
    });
}
