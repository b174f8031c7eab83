//! AUTH (RFC 5034 4) with the PLAIN mechanism (RFC 4616), the only one offered: the password
//! goes to the shell as with PASS, and it needs TLS like PASS does.

use base64::Engine as _;
use base64::alphabet;
use base64::engine::DecodePaddingMode;
use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig};

use super::Args;
use crate::error::Error;
use crate::reply::MultiLine;
use crate::session::{Login, Session};

const USAGE: &str = "AUTH [mechanism [initial-response]]";

/// RFC 4648 4 base64. Padding is optional on input: it carries no information and some
/// clients leave it off.
const BASE64: GeneralPurpose = GeneralPurpose::new(
    &alphabet::STANDARD,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

pub(crate) fn run(session: &mut Session, mut args: Args<'_>) -> Result<(), Error> {
    session.auth_allowed()?;
    *session.login()? = Login::Start;
    let Some(mechanism) = args.next(USAGE)? else {
        // Not in RFC 5034, but the RFC 1734 drafts listed the mechanisms for a bare AUTH and
        // clients still probe with it.
        let mut mechanisms = MultiLine::new("");
        mechanisms.line(b"PLAIN");
        session.send(mechanisms.finish());
        return Ok(());
    };
    if !mechanism.eq_ignore_ascii_case(b"PLAIN") {
        return Err(Error::Mechanism);
    }
    let initial_response = args.next(USAGE)?;
    args.end(USAGE)?;
    match initial_response {
        // RFC 5034 4: "=" is a zero-length initial response.
        Some(b"=") => plain(session, b""),
        Some(encoded) => plain(session, &decode(encoded)?),
        None => {
            // RFC 5034 4: the challenge is "+ " and base64; PLAIN's first one is empty.
            *session.login()? = Login::PlainResponse;
            session.send(b"+ \r\n".to_vec());
            Ok(())
        }
    }
}

/// The client's line after the "+ " challenge.
pub(crate) fn response(session: &mut Session, line: &[u8]) -> Result<(), Error> {
    *session.login()? = Login::Start;
    // RFC 5034 4: "*" cancels, and the server "MUST reject the AUTH command" with -ERR.
    if line == b"*" {
        return Err(Error::Cancelled);
    }
    plain(session, &decode(line)?)
}

/// RFC 5034 4: a response that is not base64 rejects the AUTH command.
fn decode(encoded: &[u8]) -> Result<Vec<u8>, Error> {
    BASE64.decode(encoded).map_err(|_| Error::Base64)
}

/// RFC 4616 2: `[authzid] NUL authcid NUL passwd`, authcid and passwd not empty, all UTF-8.
fn plain(session: &mut Session, message: &[u8]) -> Result<(), Error> {
    let mut parts = message.split(|&byte| byte == 0);
    let (Some(authzid), Some(authcid), Some(passwd), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(Error::Plain);
    };
    if authcid.is_empty() || passwd.is_empty() {
        return Err(Error::Plain);
    }
    let text = |bytes: &[u8]| String::from_utf8(bytes.to_vec()).map_err(|_| Error::Plain);
    let (authzid, username, password) = (text(authzid)?, text(authcid)?, text(passwd)?);
    session.ask_auth("PLAIN", username, password, authzid);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::BASE64;
    use base64::Engine as _;

    #[test]
    fn padding_is_optional() {
        assert_eq!(BASE64.decode(b"AGEAYg==").unwrap(), b"\0a\0b");
        assert_eq!(BASE64.decode(b"AGEAYg").unwrap(), b"\0a\0b");
        assert!(BASE64.decode(b"AGE AYg").is_err());
    }
}
