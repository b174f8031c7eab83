//! STAT (RFC 1939 5): count and size of the messages not marked deleted.

use super::Args;
use crate::error::Error;
use crate::reply;
use crate::session::Session;

const USAGE: &str = "STAT";

pub(crate) fn run(session: &mut Session, args: Args<'_>) -> Result<(), Error> {
    args.end(USAGE)?;
    let (count, size) = session.mailbox()?.stat();
    // RFC 1939 5: the drop listing is exactly "+OK" SP count SP octets.
    session.send(reply::ok(&format!("{count} {size}")));
    Ok(())
}
