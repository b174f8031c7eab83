//! UNAUTHENTICATE (RFC 5804 2.14): back to the non-authenticated state; TLS stays.

use super::Args;
use crate::error::Error;
use crate::session::Session;

const USAGE: &str = "UNAUTHENTICATE";

pub(crate) fn run(session: &mut Session, args: Args) -> Result<(), Error> {
    args.end(USAGE)?;
    session.unauthenticate();
    session.send(crate::reply::ok("Unauthenticate completed"));
    Ok(())
}
