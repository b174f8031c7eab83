//! USER (RFC 1939 7): names the maildrop for the PASS that follows.

use super::{Args, name};
use crate::error::Error;
use crate::reply;
use crate::session::{Login, Session};

const USAGE: &str = "USER name";

pub(crate) fn run(session: &mut Session, mut args: Args<'_>) -> Result<(), Error> {
    session.auth_allowed()?;
    // Any USER starts the login over, whether or not it is accepted.
    *session.login()? = Login::Start;
    let username = args.required(USAGE)?;
    args.end(USAGE)?;
    let username = name(username)?;
    *session.login()? = Login::User(username);
    // RFC 1939 7 allows "-ERR never heard of mailbox name" here, but that tells a prober which
    // names exist. Every name gets the same answer; the check waits for PASS.
    session.send(reply::ok("send PASS"));
    Ok(())
}
