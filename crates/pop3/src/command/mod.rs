//! Command syntax (RFC 1939 3), the table of commands and the states they are valid in, and
//! argument parsing. One file per command.

mod auth;
mod capa;
mod dele;
mod list;
mod noop;
mod pass;
mod quit;
mod retr;
mod rset;
mod stat;
mod stls;
mod top;
mod uidl;
mod user;

pub(crate) use auth::response as sasl_response;

use crate::error::Error;
use crate::session::{Phase, Session};

type Run = fn(&mut Session, Args<'_>) -> Result<(), Error>;

struct Command {
    keyword: &'static [u8],
    valid_in: &'static [Phase],
    run: Run,
}

const AUTHORIZATION: &[Phase] = &[Phase::Authorization];
const TRANSACTION: &[Phase] = &[Phase::Transaction];
const BOTH: &[Phase] = &[Phase::Authorization, Phase::Transaction];

/// RFC 1939 9 (command summary), RFC 2449 5 (CAPA), RFC 2595 4 (STLS), RFC 5034 4 (AUTH).
const COMMANDS: &[Command] = &[
    Command {
        keyword: b"USER",
        valid_in: AUTHORIZATION,
        run: user::run,
    },
    Command {
        keyword: b"PASS",
        valid_in: AUTHORIZATION,
        run: pass::run,
    },
    Command {
        keyword: b"AUTH",
        valid_in: AUTHORIZATION,
        run: auth::run,
    },
    Command {
        keyword: b"STLS",
        valid_in: AUTHORIZATION,
        run: stls::run,
    },
    Command {
        keyword: b"STAT",
        valid_in: TRANSACTION,
        run: stat::run,
    },
    Command {
        keyword: b"LIST",
        valid_in: TRANSACTION,
        run: list::run,
    },
    Command {
        keyword: b"UIDL",
        valid_in: TRANSACTION,
        run: uidl::run,
    },
    Command {
        keyword: b"RETR",
        valid_in: TRANSACTION,
        run: retr::run,
    },
    Command {
        keyword: b"TOP",
        valid_in: TRANSACTION,
        run: top::run,
    },
    Command {
        keyword: b"DELE",
        valid_in: TRANSACTION,
        run: dele::run,
    },
    Command {
        keyword: b"RSET",
        valid_in: TRANSACTION,
        run: rset::run,
    },
    Command {
        keyword: b"NOOP",
        valid_in: TRANSACTION,
        run: noop::run,
    },
    Command {
        keyword: b"CAPA",
        valid_in: BOTH,
        run: capa::run,
    },
    Command {
        keyword: b"QUIT",
        valid_in: BOTH,
        run: quit::run,
    },
];

/// Runs one command line (line ending removed).
pub(crate) fn dispatch(session: &mut Session, line: &[u8]) -> Result<(), Error> {
    // RFC 1939 3: a case-insensitive keyword, then arguments, each after a single space.
    let (keyword, arguments) = match line.iter().position(|&byte| byte == b' ') {
        Some(space) => (&line[..space], Some(&line[space + 1..])),
        None => (line, None),
    };
    let command = COMMANDS
        .iter()
        .find(|command| keyword.eq_ignore_ascii_case(command.keyword))
        .ok_or(Error::UnknownCommand)?;
    let phase = session.phase().ok_or(Error::WrongState)?;
    if !command.valid_in.contains(&phase) {
        return Err(Error::WrongState);
    }
    (command.run)(session, Args { rest: arguments })
}

/// The arguments after the keyword. `usage` goes into the syntax error.
pub(crate) struct Args<'a> {
    rest: Option<&'a [u8]>,
}

impl<'a> Args<'a> {
    /// The next argument, or `None` when there are no more. RFC 1939 3: arguments are separated
    /// by a single space, so an empty one (two spaces, a trailing space) is a syntax error.
    pub(crate) fn next(&mut self, usage: &'static str) -> Result<Option<&'a [u8]>, Error> {
        let Some(rest) = self.rest else {
            return Ok(None);
        };
        let (argument, after) = match rest.iter().position(|&byte| byte == b' ') {
            Some(space) => (&rest[..space], Some(&rest[space + 1..])),
            None => (rest, None),
        };
        if argument.is_empty() {
            return Err(Error::Syntax { usage });
        }
        self.rest = after;
        Ok(Some(argument))
    }

    pub(crate) fn required(&mut self, usage: &'static str) -> Result<&'a [u8], Error> {
        self.next(usage)?.ok_or(Error::Syntax { usage })
    }

    /// Everything left, spaces included, as one argument.
    pub(crate) fn remainder(&mut self, usage: &'static str) -> Result<&'a [u8], Error> {
        self.rest
            .take()
            .filter(|rest| !rest.is_empty())
            .ok_or(Error::Syntax { usage })
    }

    pub(crate) fn end(&self, usage: &'static str) -> Result<(), Error> {
        match self.rest {
            None => Ok(()),
            Some(_) => Err(Error::Syntax { usage }),
        }
    }
}

/// RFC 1939 3: a message number is a decimal number. One too large for any maildrop reads as
/// `usize::MAX`, which no maildrop holds, so it gets "no such message".
pub(crate) fn message_number(argument: &[u8]) -> Result<usize, Error> {
    decimal(argument).ok_or(Error::InvalidNumber)
}

/// RFC 1939 7 (TOP): a non-negative number of lines; more than `u32::MAX` means all of them.
pub(crate) fn line_count(argument: &[u8], usage: &'static str) -> Result<u32, Error> {
    let lines = decimal(argument).ok_or(Error::Syntax { usage })?;
    Ok(u32::try_from(lines).unwrap_or(u32::MAX))
}

/// Digits only (no sign, no space), saturating.
fn decimal(argument: &[u8]) -> Option<usize> {
    if argument.is_empty() || !argument.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(argument.iter().fold(0usize, |value, &digit| {
        value
            .saturating_mul(10)
            .saturating_add(usize::from(digit - b'0'))
    }))
}

/// A user name: UTF-8 without control characters, so it can be logged and looked up safely.
pub(crate) fn name(argument: &[u8]) -> Result<String, Error> {
    let name = std::str::from_utf8(argument).map_err(|_| Error::Text)?;
    if name.chars().any(char::is_control) {
        return Err(Error::Text);
    }
    Ok(name.to_owned())
}

/// A password: UTF-8 without NUL (which AUTH PLAIN cannot carry either, RFC 4616 2).
pub(crate) fn password(argument: &[u8]) -> Result<String, Error> {
    let password = std::str::from_utf8(argument).map_err(|_| Error::Text)?;
    if password.contains('\0') {
        return Err(Error::Text);
    }
    Ok(password.to_owned())
}
