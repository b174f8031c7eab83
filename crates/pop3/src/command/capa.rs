//! CAPA (RFC 2449 5): the capabilities, one per line.

use super::Args;
use crate::error::Error;
use crate::reply::MultiLine;
use crate::session::Session;

const USAGE: &str = "CAPA";

pub(crate) fn run(session: &mut Session, args: Args<'_>) -> Result<(), Error> {
    args.end(USAGE)?;
    // RFC 2449 5: "Capabilities available in the AUTHORIZATION state MUST be announced in both
    // states", so the list depends on TLS and the configuration, never on the state.
    let mut capabilities = MultiLine::new("Capability list follows");
    capabilities.line(b"TOP"); // RFC 2449 6.1
    capabilities.line(b"UIDL"); // RFC 2449 6.8
    capabilities.line(b"RESP-CODES"); // RFC 2449 6.4
    capabilities.line(b"AUTH-RESP-CODE"); // RFC 3206 6
    capabilities.line(b"PIPELINING"); // RFC 2449 6.6
    // RFC 2595 2.3: no way to send a password is announced until it may be used.
    if session.auth_allowed().is_ok() {
        capabilities.line(b"USER"); // RFC 2449 6.2
        capabilities.line(b"SASL PLAIN"); // RFC 2449 6.3, RFC 5034 4
    }
    if session.config().tls_available && !session.tls() {
        capabilities.line(b"STLS"); // RFC 2595 4
    }
    capabilities.line(b"IMPLEMENTATION mailstow"); // RFC 2449 6.9
    session.send(capabilities.finish());
    Ok(())
}
