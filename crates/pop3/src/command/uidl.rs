//! `UIDL [msg]` (RFC 1939 7): unique-id listings, "msg unique-id".

use std::fmt::Write as _;

use super::{Args, message_number};
use crate::error::Error;
use crate::reply::{self, MultiLine};
use crate::session::Session;

const USAGE: &str = "UIDL [msg]";

pub(crate) fn run(session: &mut Session, mut args: Args<'_>) -> Result<(), Error> {
    let number = args.next(USAGE)?.map(message_number).transpose()?;
    args.end(USAGE)?;
    let mailbox = session.mailbox()?;
    let reply = match number {
        Some(number) => {
            let message = mailbox.get(number)?;
            reply::ok(&format!("{number} {}", mailbox.unique_id(message)))
        }
        None => {
            // RFC 1939 7: messages marked deleted are not listed.
            // One buffer for every line: an 80,000-message maildrop lists in one pass.
            let mut listing = MultiLine::new("");
            let mut line = String::with_capacity(32);
            for (number, message) in mailbox.live() {
                line.clear();
                let _ = write!(line, "{number} ");
                mailbox.write_unique_id(message, &mut line);
                listing.line(line.as_bytes());
            }
            listing.finish()
        }
    };
    session.send(reply);
    Ok(())
}
