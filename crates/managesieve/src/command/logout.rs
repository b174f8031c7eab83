//! LOGOUT (RFC 5804 2.3): `OK`, then the server closes the connection.

use super::Args;
use crate::error::Error;
use crate::session::Session;

const USAGE: &str = "LOGOUT";

pub(crate) fn run(session: &mut Session, args: Args) -> Result<(), Error> {
    args.end(USAGE)?;
    session.send(crate::reply::ok("Logout complete"));
    session.close();
    Ok(())
}
