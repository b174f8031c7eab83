//! SETACTIVE (RFC 5804 2.8): activate a script, or with the empty name deactivate.

use super::{Args, script_name};
use crate::error::Error;
use crate::event::Event;
use crate::session::{Session, Waiting};

const USAGE: &str = "SETACTIVE name";

pub(crate) fn run(session: &mut Session, mut args: Args) -> Result<(), Error> {
    let user = session.user()?;
    let name = args.string(USAGE)?;
    args.end(USAGE)?;
    // RFC 5804 2.8: "If the script name is the empty string, the server MUST make any
    // currently active script inactive."
    let name = if name.is_empty() {
        None
    } else {
        Some(script_name(session, name)?)
    };
    session.ask(Event::SetActive { user, name }, Waiting::SetActive);
    Ok(())
}
