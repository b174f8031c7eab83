//! HAVESPACE (RFC 5804 2.5): would a script of this name and size fit?

use super::{Args, script_name};
use crate::error::Error;
use crate::event::{Event, Failure, Quota};
use crate::session::{Session, Waiting};

const USAGE: &str = "HAVESPACE name size";

pub(crate) fn run(session: &mut Session, mut args: Args) -> Result<(), Error> {
    let user = session.user()?;
    let name = args.string(USAGE)?;
    let size = args.number(USAGE)?;
    args.end(USAGE)?;
    let name = script_name(session, name)?;
    // RFC 5804 2.5: a size no PUTSCRIPT could store gets QUOTA/MAXSIZE without asking.
    if size as usize > session.config.script_bytes_max {
        session.refuse(Failure::Quota(Quota::MaxSize));
        return Ok(());
    }
    session.ask(Event::HaveSpace { user, name, size }, Waiting::HaveSpace);
    Ok(())
}
