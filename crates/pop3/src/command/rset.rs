//! RSET (RFC 1939 5): unmarks every message marked deleted.

use super::Args;
use crate::error::Error;
use crate::reply;
use crate::session::Session;

const USAGE: &str = "RSET";

pub(crate) fn run(session: &mut Session, args: Args<'_>) -> Result<(), Error> {
    args.end(USAGE)?;
    let mailbox = session.mailbox()?;
    mailbox.reset();
    let (count, size) = mailbox.stat();
    let count = reply::messages(count);
    session.send(reply::ok(&format!("maildrop has {count} ({size} octets)")));
    Ok(())
}
