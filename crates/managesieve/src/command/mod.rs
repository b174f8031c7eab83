//! Command syntax (RFC 5804 2, 4), the table of commands and the states they are valid in,
//! and argument parsing. One file per command.

mod authenticate;
mod capability;
mod checkscript;
mod deletescript;
mod getscript;
mod havespace;
mod listscripts;
mod logout;
mod noop;
mod putscript;
mod renamescript;
mod setactive;
mod starttls;
mod unauthenticate;

use unicode_normalization::is_nfc;

use crate::error::Error;
use crate::input::Token;
use crate::session::{Session, State};

type Run = fn(&mut Session, Args) -> Result<(), Error>;

/// Where a command may run (RFC 5804 2: AUTHENTICATE and STARTTLS before login, the script
/// commands after, the rest in both states).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Valid {
    NotAuthenticated,
    Authenticated,
    Both,
}

struct Command {
    keyword: &'static [u8],
    valid: Valid,
    run: Run,
}

/// RFC 5804 2.1 to 2.14.
const COMMANDS: &[Command] = &[
    Command {
        keyword: b"AUTHENTICATE",
        valid: Valid::NotAuthenticated,
        run: authenticate::run,
    },
    Command {
        keyword: b"STARTTLS",
        valid: Valid::NotAuthenticated,
        run: starttls::run,
    },
    Command {
        keyword: b"LOGOUT",
        valid: Valid::Both,
        run: logout::run,
    },
    Command {
        keyword: b"CAPABILITY",
        valid: Valid::Both,
        run: capability::run,
    },
    Command {
        keyword: b"HAVESPACE",
        valid: Valid::Authenticated,
        run: havespace::run,
    },
    Command {
        keyword: b"PUTSCRIPT",
        valid: Valid::Authenticated,
        run: putscript::run,
    },
    Command {
        keyword: b"LISTSCRIPTS",
        valid: Valid::Authenticated,
        run: listscripts::run,
    },
    Command {
        keyword: b"SETACTIVE",
        valid: Valid::Authenticated,
        run: setactive::run,
    },
    Command {
        keyword: b"GETSCRIPT",
        valid: Valid::Authenticated,
        run: getscript::run,
    },
    Command {
        keyword: b"DELETESCRIPT",
        valid: Valid::Authenticated,
        run: deletescript::run,
    },
    Command {
        keyword: b"RENAMESCRIPT",
        valid: Valid::Authenticated,
        run: renamescript::run,
    },
    Command {
        keyword: b"CHECKSCRIPT",
        valid: Valid::Authenticated,
        run: checkscript::run,
    },
    Command {
        keyword: b"NOOP",
        valid: Valid::Both,
        run: noop::run,
    },
    Command {
        keyword: b"UNAUTHENTICATE",
        valid: Valid::Authenticated,
        run: unauthenticate::run,
    },
];

/// Runs one framed command.
pub(crate) fn dispatch(session: &mut Session, tokens: Vec<Token>) -> Result<(), Error> {
    let mut tokens = tokens.into_iter();
    // RFC 5804 4: a command name is an atom, case-insensitive.
    let Some(Token::Atom(keyword)) = tokens.next() else {
        return Err(Error::UnknownCommand);
    };
    let command = COMMANDS
        .iter()
        .find(|command| keyword.eq_ignore_ascii_case(command.keyword))
        .ok_or(Error::UnknownCommand)?;
    let authenticated = matches!(session.state, State::Authenticated { .. });
    match (command.valid, authenticated) {
        (Valid::NotAuthenticated, true) => return Err(Error::AlreadyAuthenticated),
        (Valid::Authenticated, false) => return Err(Error::NotAuthenticated),
        _ => {}
    }
    (command.run)(session, Args { tokens })
}

/// Runs the client's SASL response line (RFC 5804 2.1) after a challenge.
pub(crate) fn sasl_response(session: &mut Session, tokens: Vec<Token>) -> Result<(), Error> {
    authenticate::response(
        session,
        Args {
            tokens: tokens.into_iter(),
        },
    )
}

/// The arguments after the command name. `usage` goes into the syntax error.
pub(crate) struct Args {
    tokens: std::vec::IntoIter<Token>,
}

impl Args {
    /// The next argument, a string (quoted or literal), or `None` when there are no more.
    pub(crate) fn optional_string(
        &mut self,
        usage: &'static str,
    ) -> Result<Option<Vec<u8>>, Error> {
        match self.tokens.next() {
            None => Ok(None),
            Some(Token::String(bytes)) => Ok(Some(bytes)),
            Some(Token::Atom(_)) => Err(Error::Syntax { usage }),
        }
    }

    pub(crate) fn string(&mut self, usage: &'static str) -> Result<Vec<u8>, Error> {
        self.optional_string(usage)?.ok_or(Error::Syntax { usage })
    }

    /// RFC 5804 4: `number`, 1*DIGIT, at most 4294967295.
    pub(crate) fn number(&mut self, usage: &'static str) -> Result<u32, Error> {
        let Some(Token::Atom(digits)) = self.tokens.next() else {
            return Err(Error::Syntax { usage });
        };
        if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
            return Err(Error::Syntax { usage });
        }
        digits
            .iter()
            .try_fold(0u32, |value, &digit| {
                value.checked_mul(10)?.checked_add(u32::from(digit - b'0'))
            })
            .ok_or(Error::Syntax { usage })
    }

    pub(crate) fn end(mut self, usage: &'static str) -> Result<(), Error> {
        match self.tokens.next() {
            None => Ok(()),
            Some(_) => Err(Error::Syntax { usage }),
        }
    }
}

/// RFC 5804 1.6: a script name is a non-empty UTF-8 string in Unicode Normalization Form C
/// (RFC 5198 Net-Unicode) without the control characters U+0000 to U+001F, U+007F to
/// U+009F, and without U+2028 and U+2029; its length is bounded by
/// `Config::script_name_bytes_max`.
pub(crate) fn script_name(session: &Session, bytes: Vec<u8>) -> Result<String, Error> {
    if bytes.is_empty() {
        return Err(Error::ScriptName { reason: "empty" });
    }
    if bytes.len() > session.config.script_name_bytes_max {
        return Err(Error::ScriptName { reason: "too long" });
    }
    let name = String::from_utf8(bytes).map_err(|_| Error::ScriptName {
        reason: "not UTF-8",
    })?;
    let forbidden = |c: char| c.is_control() || matches!(c, '\u{2028}' | '\u{2029}');
    if name.chars().any(forbidden) {
        return Err(Error::ScriptName {
            reason: "control character",
        });
    }
    if !is_nfc(&name) {
        return Err(Error::ScriptName {
            reason: "not in Unicode NFC",
        });
    }
    Ok(name)
}

/// RFC 5228 2.1: a script is UTF-8.
pub(crate) fn script(bytes: Vec<u8>) -> Result<String, Error> {
    String::from_utf8(bytes).map_err(|_| Error::ScriptNotUtf8)
}
