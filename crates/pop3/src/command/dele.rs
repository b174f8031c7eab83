//! DELE msg (RFC 1939 5): marks a message deleted; UPDATE removes it.

use super::{Args, message_number};
use crate::error::Error;
use crate::reply;
use crate::session::Session;

const USAGE: &str = "DELE msg";

pub(crate) fn run(session: &mut Session, mut args: Args<'_>) -> Result<(), Error> {
    let number = message_number(args.required(USAGE)?)?;
    args.end(USAGE)?;
    // RFC 1939 5: a message already marked gets "-ERR message n already deleted".
    session.mailbox()?.delete(number)?;
    session.send(reply::ok(&format!("message {number} deleted")));
    Ok(())
}
