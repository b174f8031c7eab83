//! DELETESCRIPT (RFC 5804 2.10): the active script cannot be deleted (`NO (ACTIVE)`, which
//! the shell answers since only it knows which script is active).

use super::{Args, script_name};
use crate::error::Error;
use crate::event::Event;
use crate::session::{Session, Waiting};

const USAGE: &str = "DELETESCRIPT name";

pub(crate) fn run(session: &mut Session, mut args: Args) -> Result<(), Error> {
    let user = session.user()?;
    let name = args.string(USAGE)?;
    args.end(USAGE)?;
    let name = script_name(session, name)?;
    session.ask(Event::DeleteScript { user, name }, Waiting::DeleteScript);
    Ok(())
}
