//! CHECKSCRIPT (RFC 5804 2.12): compile without storing.

use super::{Args, script};
use crate::error::Error;
use crate::event::Event;
use crate::session::{Session, Waiting};

const USAGE: &str = "CHECKSCRIPT script";

pub(crate) fn run(session: &mut Session, mut args: Args) -> Result<(), Error> {
    let user = session.user()?;
    let content = args.string(USAGE)?;
    args.end(USAGE)?;
    let script = script(content)?;
    session.ask(Event::CheckScript { user, script }, Waiting::CheckScript);
    Ok(())
}
