//! PASS (RFC 1939 7): the password for the name USER gave; the shell decides.

use super::{Args, password};
use crate::error::Error;
use crate::session::{Login, Session};

const USAGE: &str = "PASS string";

pub(crate) fn run(session: &mut Session, mut args: Args<'_>) -> Result<(), Error> {
    session.auth_allowed()?;
    // RFC 1939 7: after a failed PASS the client starts over with USER, so the name is used
    // up here whatever the outcome.
    let Login::User(username) = std::mem::take(session.login()?) else {
        return Err(Error::UserFirst);
    };
    // RFC 1939 7: "a POP3 server may treat spaces in the argument as part of the password".
    let secret = password(args.remainder(USAGE)?)?;
    session.ask_auth("USER", username, secret, String::new());
    Ok(())
}
