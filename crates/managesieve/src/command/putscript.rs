//! PUTSCRIPT (RFC 5804 2.6): compile, then store under a name (replacing a script of that
//! name). The script's size is bounded while it is framed (`Config::script_bytes_max`,
//! `NO (QUOTA/MAXSIZE)`).

use super::{Args, script, script_name};
use crate::error::Error;
use crate::event::Event;
use crate::session::{Session, Waiting};

const USAGE: &str = "PUTSCRIPT name script";

pub(crate) fn run(session: &mut Session, mut args: Args) -> Result<(), Error> {
    let user = session.user()?;
    let name = args.string(USAGE)?;
    let content = args.string(USAGE)?;
    args.end(USAGE)?;
    let name = script_name(session, name)?;
    let script = script(content)?;
    session.ask(Event::PutScript { user, name, script }, Waiting::PutScript);
    Ok(())
}
