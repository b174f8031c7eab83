//! CAPABILITY (RFC 5804 2.4): the capability response (1.7) and `OK`.

use super::Args;
use crate::error::Error;
use crate::session::Session;

const USAGE: &str = "CAPABILITY";

pub(crate) fn run(session: &mut Session, args: Args) -> Result<(), Error> {
    args.end(USAGE)?;
    session.capabilities("Capability completed");
    Ok(())
}
