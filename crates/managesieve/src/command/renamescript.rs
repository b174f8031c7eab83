//! RENAMESCRIPT (RFC 5804 2.11).

use super::{Args, script_name};
use crate::error::Error;
use crate::event::Event;
use crate::session::{Session, Waiting};

const USAGE: &str = "RENAMESCRIPT old-name new-name";

pub(crate) fn run(session: &mut Session, mut args: Args) -> Result<(), Error> {
    let user = session.user()?;
    let from = args.string(USAGE)?;
    let to = args.string(USAGE)?;
    args.end(USAGE)?;
    let from = script_name(session, from)?;
    let to = script_name(session, to)?;
    session.ask(
        Event::RenameScript { user, from, to },
        Waiting::RenameScript,
    );
    Ok(())
}
