//! LISTSCRIPTS (RFC 5804 2.7).

use super::Args;
use crate::error::Error;
use crate::event::Event;
use crate::session::{Session, Waiting};

const USAGE: &str = "LISTSCRIPTS";

pub(crate) fn run(session: &mut Session, args: Args) -> Result<(), Error> {
    let user = session.user()?;
    args.end(USAGE)?;
    session.ask(Event::ListScripts { user }, Waiting::ListScripts);
    Ok(())
}
