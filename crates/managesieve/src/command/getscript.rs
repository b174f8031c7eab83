//! GETSCRIPT (RFC 5804 2.9).

use super::{Args, script_name};
use crate::error::Error;
use crate::event::Event;
use crate::session::{Session, Waiting};

const USAGE: &str = "GETSCRIPT name";

pub(crate) fn run(session: &mut Session, mut args: Args) -> Result<(), Error> {
    let user = session.user()?;
    let name = args.string(USAGE)?;
    args.end(USAGE)?;
    let name = script_name(session, name)?;
    session.ask(Event::GetScript { user, name }, Waiting::GetScript);
    Ok(())
}
