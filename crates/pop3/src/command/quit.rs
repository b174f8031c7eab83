//! QUIT: in AUTHORIZATION it only signs off (RFC 1939 4); in TRANSACTION it enters UPDATE
//! (RFC 1939 6), the only way marked messages are ever removed.

use super::Args;
use crate::error::Error;
use crate::session::{Phase, Session};

const USAGE: &str = "QUIT";

pub(crate) fn run(session: &mut Session, args: Args<'_>) -> Result<(), Error> {
    args.end(USAGE)?;
    if session.phase() == Some(Phase::Authorization) {
        session.quit(None);
        return Ok(());
    }
    let mailbox = session.mailbox()?;
    let expunge = mailbox.deleted_uids();
    let (messages_left, _) = mailbox.stat();
    if expunge.is_empty() {
        // Nothing to remove: no need to ask the shell.
        session.quit(Some(messages_left));
    } else {
        session.enter_update(expunge, messages_left);
    }
    Ok(())
}
