//! `LIST [msg]` (RFC 1939 5): scan listings, "msg octets".

use std::fmt::Write as _;

use super::{Args, message_number};
use crate::error::Error;
use crate::reply::{self, MultiLine};
use crate::session::Session;

const USAGE: &str = "LIST [msg]";

pub(crate) fn run(session: &mut Session, mut args: Args<'_>) -> Result<(), Error> {
    let number = args.next(USAGE)?.map(message_number).transpose()?;
    args.end(USAGE)?;
    let mailbox = session.mailbox()?;
    let reply = match number {
        Some(number) => {
            let message = mailbox.get(number)?;
            reply::ok(&format!("{number} {}", message.size))
        }
        None => {
            // RFC 1939 5: messages marked deleted are not listed.
            let (count, size) = mailbox.stat();
            let count = reply::messages(count);
            let mut listing = MultiLine::new(&format!("{count} ({size} octets)"));
            let mut line = String::with_capacity(32);
            for (number, message) in mailbox.live() {
                line.clear();
                let _ = write!(line, "{number} {}", message.size);
                listing.line(line.as_bytes());
            }
            listing.finish()
        }
    };
    session.send(reply);
    Ok(())
}
