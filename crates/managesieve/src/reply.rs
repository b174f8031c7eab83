//! Response encoding (RFC 5804 1.2, 4): `OK`, `NO` and `BYE` with a response code and a
//! human-readable string, and strings as quoted strings or literals.

use crate::config::SHELL_TEXT_MAX;
use crate::event::Quota;

/// RFC 5804 4: "quoted" holds at most 1024 octets; longer text goes as a literal.
const QUOTED_MAX: usize = 1024;

/// RFC 5804 1.2: the three status responses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Status {
    Ok,
    No,
    Bye,
}

/// RFC 5804 1.3 response codes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Code {
    AuthTooWeak,
    EncryptNeeded,
    Quota(Quota),
    Referral(String),
    TransitionNeeded,
    TryLater,
    Active,
    NonExistent,
    AlreadyExists,
    /// NOOP's tag (RFC 5804 2.13), echoed.
    Tag(Vec<u8>),
    Warnings,
}

/// `OK`/`NO`/`BYE [SP "(" code ")"] [SP string] CRLF`.
pub(crate) fn response(status: Status, code: Option<&Code>, text: Option<&str>) -> Vec<u8> {
    let mut out = Vec::with_capacity(32 + text.map_or(0, str::len));
    out.extend_from_slice(match status {
        Status::Ok => b"OK",
        Status::No => b"NO",
        Status::Bye => b"BYE",
    });
    if let Some(code) = code {
        out.extend_from_slice(b" (");
        match code {
            Code::AuthTooWeak => out.extend_from_slice(b"AUTH-TOO-WEAK"),
            Code::EncryptNeeded => out.extend_from_slice(b"ENCRYPT-NEEDED"),
            Code::Quota(Quota::Other) => out.extend_from_slice(b"QUOTA"),
            Code::Quota(Quota::MaxScripts) => out.extend_from_slice(b"QUOTA/MAXSCRIPTS"),
            Code::Quota(Quota::MaxSize) => out.extend_from_slice(b"QUOTA/MAXSIZE"),
            Code::Referral(url) => {
                out.extend_from_slice(b"REFERRAL ");
                string(&mut out, url.as_bytes());
            }
            Code::TransitionNeeded => out.extend_from_slice(b"TRANSITION-NEEDED"),
            Code::TryLater => out.extend_from_slice(b"TRYLATER"),
            Code::Active => out.extend_from_slice(b"ACTIVE"),
            Code::NonExistent => out.extend_from_slice(b"NONEXISTENT"),
            Code::AlreadyExists => out.extend_from_slice(b"ALREADYEXISTS"),
            Code::Tag(tag) => {
                out.extend_from_slice(b"TAG ");
                string(&mut out, tag);
            }
            Code::Warnings => out.extend_from_slice(b"WARNINGS"),
        }
        out.push(b')');
    }
    if let Some(text) = text {
        out.push(b' ');
        string(&mut out, text.as_bytes());
    }
    out.extend_from_slice(b"\r\n");
    out
}

pub(crate) fn ok(text: &str) -> Vec<u8> {
    response(Status::Ok, None, Some(text))
}

/// Appends a string (RFC 5804 4): quoted when it can be (at most 1024 octets, no CR, LF or
/// NUL), with `"` and `\` escaped; otherwise a server literal `{n}` CRLF and the octets.
pub(crate) fn string(out: &mut Vec<u8>, bytes: &[u8]) {
    let quotable =
        bytes.len() <= QUOTED_MAX && !bytes.iter().any(|&b| matches!(b, b'\r' | b'\n' | 0));
    if quotable {
        out.push(b'"');
        for &byte in bytes {
            if matches!(byte, b'"' | b'\\') {
                out.push(b'\\');
            }
            out.push(byte);
        }
        out.push(b'"');
    } else {
        out.extend_from_slice(format!("{{{}}}\r\n", bytes.len()).as_bytes());
        out.extend_from_slice(bytes);
    }
}

/// One capability line (RFC 5804 1.7): `"NAME"` or `"NAME" "value"`.
pub(crate) fn capability(out: &mut Vec<u8>, name: &str, value: Option<&str>) {
    string(out, name.as_bytes());
    if let Some(value) = value {
        out.push(b' ');
        string(out, value.as_bytes());
    }
    out.extend_from_slice(b"\r\n");
}

/// Text from the shell (a compile error, a temporary failure) made safe for the wire: cut to
/// `SHELL_TEXT_MAX` bytes on a character boundary, control characters other than line feeds
/// turned into spaces, trimmed; `fallback` when nothing is left.
pub(crate) fn shell_text(text: &str, fallback: &str) -> String {
    let mut end = text.len().min(SHELL_TEXT_MAX);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let cleaned: String = text[..end]
        .chars()
        .map(|c| if c.is_control() && c != '\n' { ' ' } else { c })
        .collect();
    let trimmed = cleaned.trim();
    if trimmed.is_empty() {
        fallback.to_owned()
    } else {
        trimmed.to_owned()
    }
}

/// `shell_text` on one line: line feeds become spaces too.
pub(crate) fn one_line(text: &str, fallback: &str) -> String {
    shell_text(text, fallback).replace('\n', " ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_are_quoted_or_literal() {
        let mut out = Vec::new();
        string(&mut out, br#"a "b" \c"#);
        assert_eq!(out, br#""a \"b\" \\c""#);
        out.clear();
        string(&mut out, b"line 1\nline 2");
        assert_eq!(out, b"{13}\r\nline 1\nline 2");
        out.clear();
        string(&mut out, &[b'x'; 1025]);
        assert!(out.starts_with(b"{1025}\r\n"));
    }

    #[test]
    fn responses_carry_codes() {
        assert_eq!(
            response(
                Status::No,
                Some(&Code::Quota(Quota::MaxSize)),
                Some("too big")
            ),
            b"NO (QUOTA/MAXSIZE) \"too big\"\r\n"
        );
        assert_eq!(
            response(Status::Ok, Some(&Code::Tag(b"t\"1".to_vec())), Some("Done")),
            b"OK (TAG \"t\\\"1\") \"Done\"\r\n"
        );
        assert_eq!(response(Status::Ok, None, None), b"OK\r\n");
    }

    #[test]
    fn shell_text_is_cut_and_cleaned() {
        assert_eq!(shell_text(" a\r\nb\0 ", "x"), "a \nb");
        assert_eq!(shell_text("\r\n", "fallback"), "fallback");
        let long = "é".repeat(SHELL_TEXT_MAX);
        assert!(shell_text(&long, "x").len() <= SHELL_TEXT_MAX);
    }
}
