//! NOOP (RFC 5804 2.13): `OK`, with the client's tag echoed in a `TAG` response code.

use super::Args;
use crate::error::Error;
use crate::reply::{Code, Status};
use crate::session::Session;

const USAGE: &str = "NOOP [tag]";

pub(crate) fn run(session: &mut Session, mut args: Args) -> Result<(), Error> {
    let tag = args.optional_string(USAGE)?;
    args.end(USAGE)?;
    session.respond(Status::Ok, tag.map(Code::Tag), "Done");
    Ok(())
}
