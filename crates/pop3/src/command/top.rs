//! TOP msg n (RFC 1939 7): the header, the blank line, and n lines of body.

use super::{Args, line_count, message_number};
use crate::error::Error;
use crate::session::Session;

const USAGE: &str = "TOP msg n";

pub(crate) fn run(session: &mut Session, mut args: Args<'_>) -> Result<(), Error> {
    let number = message_number(args.required(USAGE)?)?;
    let lines = line_count(args.required(USAGE)?, USAGE)?;
    args.end(USAGE)?;
    let uid = session.mailbox()?.get(number)?.uid;
    session.ask_retrieve(number, uid, Some(lines));
    Ok(())
}
