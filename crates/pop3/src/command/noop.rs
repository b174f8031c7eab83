//! NOOP (RFC 1939 5): does nothing but answer.

use super::Args;
use crate::error::Error;
use crate::reply;
use crate::session::Session;

const USAGE: &str = "NOOP";

pub(crate) fn run(session: &mut Session, args: Args<'_>) -> Result<(), Error> {
    args.end(USAGE)?;
    session.send(reply::ok(""));
    Ok(())
}
