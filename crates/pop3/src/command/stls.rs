//! STLS (RFC 2595 4): starts TLS; valid only in AUTHORIZATION and only once.

use super::Args;
use crate::error::Error;
use crate::session::Session;

const USAGE: &str = "STLS";

pub(crate) fn run(session: &mut Session, args: Args<'_>) -> Result<(), Error> {
    args.end(USAGE)?;
    if session.tls() {
        return Err(Error::TlsActive);
    }
    if !session.config().tls_available {
        return Err(Error::TlsUnavailable);
    }
    session.start_tls();
    Ok(())
}
