//! RETR msg (RFC 1939 5): the whole message; the shell reads it, the session stuffs it.

use super::{Args, message_number};
use crate::error::Error;
use crate::session::Session;

const USAGE: &str = "RETR msg";

pub(crate) fn run(session: &mut Session, mut args: Args<'_>) -> Result<(), Error> {
    let number = message_number(args.required(USAGE)?)?;
    args.end(USAGE)?;
    let uid = session.mailbox()?.get(number)?.uid;
    session.ask_retrieve(number, uid, None);
    Ok(())
}
