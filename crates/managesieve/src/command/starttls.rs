//! STARTTLS (RFC 5804 2.2): only before login, only once.

use super::Args;
use crate::error::Error;
use crate::session::Session;

const USAGE: &str = "STARTTLS";

pub(crate) fn run(session: &mut Session, args: Args) -> Result<(), Error> {
    args.end(USAGE)?;
    if session.tls {
        return Err(Error::TlsActive);
    }
    if !session.config.tls_available {
        return Err(Error::TlsUnavailable);
    }
    session.start_tls();
    Ok(())
}
