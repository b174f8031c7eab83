//! AUTHENTICATE (RFC 5804 2.1) with the PLAIN mechanism (RFC 4616), the only one the session
//! implements: the password goes to the shell, and it needs TLS unless configured otherwise.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;

use super::Args;
use crate::error::Error;
use crate::event::Event;
use crate::session::{Session, State, Waiting};

const USAGE: &str = "AUTHENTICATE \"PLAIN\" [initial-response]";

pub(crate) fn run(session: &mut Session, mut args: Args) -> Result<(), Error> {
    // RFC 5804 2.1: auth-type is a string naming the mechanism.
    let mechanism = args.string(USAGE)?;
    let initial_response = args.optional_string(USAGE)?;
    args.end(USAGE)?;
    let mechanism = String::from_utf8(mechanism).map_err(|_| Error::Mechanism)?;
    if !session.config.offers(&mechanism) {
        return Err(Error::Mechanism);
    }
    // RFC 5804 1.3 ENCRYPT-NEEDED: PLAIN is clear text (RFC 4616 4).
    if !session.auth_allowed() {
        return Err(Error::EncryptNeeded);
    }
    match initial_response {
        // RFC 5804 2.1: the initial response is base64 in a string.
        Some(encoded) => plain(session, &decode(&encoded)?),
        None => {
            // RFC 5804 2.1: a challenge is a string of base64; PLAIN's only one is empty.
            session.state = State::NotAuthenticated { sasl: true };
            session.send(b"\"\"\r\n".to_vec());
            Ok(())
        }
    }
}

/// The client's response (a string on its own line) after the empty challenge.
pub(crate) fn response(session: &mut Session, mut args: Args) -> Result<(), Error> {
    session.state = State::NotAuthenticated { sasl: false };
    let usage = "a SASL response string";
    let response = args.string(usage)?;
    args.end(usage)?;
    // RFC 5804 2.1: "*" aborts the exchange and the server answers NO.
    if response == b"*" {
        return Err(Error::Cancelled);
    }
    plain(session, &decode(&response)?)
}

fn decode(encoded: &[u8]) -> Result<Vec<u8>, Error> {
    STANDARD.decode(encoded).map_err(|_| Error::Base64)
}

/// RFC 4616 2: `[authzid] NUL authcid NUL passwd`, authcid and passwd not empty, all UTF-8.
fn plain(session: &mut Session, message: &[u8]) -> Result<(), Error> {
    let mut parts = message.split(|&byte| byte == 0);
    let (Some(authzid), Some(authcid), Some(passwd), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(Error::Plain);
    };
    if authcid.is_empty() || passwd.is_empty() {
        return Err(Error::Plain);
    }
    let text = |bytes: &[u8]| String::from_utf8(bytes.to_vec()).map_err(|_| Error::Plain);
    let (authzid, authcid, password) = (text(authzid)?, text(authcid)?, text(passwd)?);
    // RFC 4616 2: the server decides whether authcid may act as authzid.
    if !authzid.is_empty() && authzid != authcid && !session.config.authzid_allowed {
        return Err(Error::Authzid);
    }
    session.ask(
        Event::Authenticate {
            mechanism: "PLAIN",
            authcid,
            password,
            authzid,
        },
        Waiting::Auth,
    );
    Ok(())
}
