//! RFC 5182 SEARCHRES: `$`, the result a `SEARCH RETURN (SAVE)` kept, as a sequence set.
//!
//! imap-codec does not know `$`, so a command that uses it is rewritten before it is parsed:
//! each `$` where a sequence set may stand becomes the saved messages, as UIDs in a UID
//! command and in SEARCH (`UID <set>`), as message numbers in FETCH, STORE, COPY and MOVE
//! (which must keep their numbering and their ban on EXPUNGE responses, RFC 9051 7.5.1).
//! A `$` that is a search key's argument (`SUBJECT $`), in a quoted string or in a literal is
//! left alone.

use mail_model::MessageInfo;

use crate::response::uid_set;

/// A UID no message has (UIDs stop below it, RFC 9051 2.3.1.1): stands for an empty `$` in
/// a UID command, which then names no message.
const NO_UID: &str = "4294967295";

/// What to do with a command after `$` is looked for.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Expanded {
    /// No `$` in it: parse it as it is.
    Unchanged,
    /// Parse this instead.
    Rewritten(Vec<u8>),
    /// A FETCH, STORE, COPY or MOVE by message number of an empty `$`: it names no message
    /// (RFC 5182 2.1), so its answer is this tagged OK without doing anything.
    NoMessages { tag: String, answer: String },
}

/// Search keys followed by arguments, and how many (`$` there is an argument, not a set).
fn arguments_of(key: &[u8]) -> usize {
    const ONE: [&str; 19] = [
        "BCC",
        "BODY",
        "CC",
        "FROM",
        "KEYWORD",
        "UNKEYWORD",
        "SUBJECT",
        "TEXT",
        "TO",
        "LARGER",
        "SMALLER",
        "BEFORE",
        "ON",
        "SINCE",
        "SENTBEFORE",
        "SENTON",
        "SENTSINCE",
        "OLDER",
        "YOUNGER",
    ];
    if key.eq_ignore_ascii_case(b"HEADER") {
        2
    } else if key.eq_ignore_ascii_case(b"CHARSET")
        || key.eq_ignore_ascii_case(b"MODSEQ")
        || ONE.iter().any(|k| key.eq_ignore_ascii_case(k.as_bytes()))
    {
        1
    } else {
        0
    }
}

/// One token of a command line: its bounds, and whether it is a plain atom (not a string,
/// literal or parenthesis).
struct Token {
    start: usize,
    end: usize,
    atom: bool,
}

/// Splits a command into tokens; `None` if a literal's length is unreadable (the parser will
/// say BAD).
fn tokens(cmd: &[u8]) -> Option<Vec<Token>> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < cmd.len() {
        match cmd[i] {
            b' ' | b'\r' | b'\n' => i += 1,
            b'(' | b')' => {
                out.push(Token {
                    start: i,
                    end: i + 1,
                    atom: false,
                });
                i += 1;
            }
            b'"' => {
                let start = i;
                i += 1;
                while i < cmd.len() && cmd[i] != b'"' {
                    i += if cmd[i] == b'\\' { 2 } else { 1 };
                }
                i = (i + 1).min(cmd.len());
                out.push(Token {
                    start,
                    end: i,
                    atom: false,
                });
            }
            c if c == b'{' || (c == b'~' && cmd.get(i + 1) == Some(&b'{')) => {
                let start = i;
                let close = i + cmd[i..].iter().position(|&b| b == b'}')?;
                let digits = cmd[i..close]
                    .iter()
                    .filter(|b| b.is_ascii_digit())
                    .map(|&b| b as char)
                    .collect::<String>();
                let len: usize = digits.parse().ok()?;
                // `}` CRLF, then the literal's bytes.
                i = (close + 3).saturating_add(len).min(cmd.len());
                out.push(Token {
                    start,
                    end: i,
                    atom: false,
                });
            }
            _ => {
                let start = i;
                while i < cmd.len() && !b" ()\r\n".contains(&cmd[i]) {
                    i += 1;
                }
                out.push(Token {
                    start,
                    end: i,
                    atom: true,
                });
            }
        }
    }
    Some(out)
}

/// Rewrites `$` in `cmd` (a whole command) for a session whose selected folder holds
/// `messages` and whose saved result is `saved` (UIDs, ascending).
pub(crate) fn expand(cmd: &[u8], saved: &[u32], messages: &[MessageInfo]) -> Expanded {
    // Only these commands take a set; the name is looked at first so an APPEND's literal,
    // a LOGIN or anything before login is never scanned for `$`.
    const TAKE_SETS: [&[u8]; 8] = [
        b"FETCH", b"STORE", b"COPY", b"MOVE", b"EXPUNGE", b"SEARCH", b"SORT", b"THREAD",
    ];
    let mut words = cmd
        .split(|&b| b == b' ' || b == b'\r' || b == b'\n')
        .skip(1);
    let name = match words.next() {
        Some(w) if w.eq_ignore_ascii_case(b"UID") => words.next(),
        other => other,
    };
    let takes_sets = name.is_some_and(|n| TAKE_SETS.iter().any(|t| n.eq_ignore_ascii_case(t)));
    if !takes_sets || !cmd.contains(&b'$') {
        return Expanded::Unchanged;
    }
    let Some(tokens) = tokens(cmd) else {
        return Expanded::Unchanged;
    };
    let word = |t: &Token| &cmd[t.start..t.end];
    let is_dollar = |t: &Token| t.atom && word(t) == b"$";
    let (Some(tag), Some(first)) = (tokens.first(), tokens.get(1)) else {
        return Expanded::Unchanged;
    };
    let uid = word(first).eq_ignore_ascii_case(b"UID");
    let name_at = usize::from(uid) + 1;
    let Some(name) = tokens.get(name_at).map(word) else {
        return Expanded::Unchanged;
    };
    let name = String::from_utf8_lossy(name).to_ascii_uppercase();
    let present: Vec<u32> = saved
        .iter()
        .filter(|&&u| messages.binary_search_by_key(&u, |m| m.uid).is_ok())
        .copied()
        .collect();
    let uids = if present.is_empty() {
        NO_UID.to_string()
    } else {
        uid_set(&present)
    };
    // (start, end, replacement) for each `$` to replace.
    let mut edits: Vec<(usize, usize, String)> = Vec::new();
    match name.as_str() {
        "FETCH" | "STORE" | "COPY" | "MOVE" | "EXPUNGE" => {
            let Some(set) = tokens.get(name_at + 1).filter(|t| is_dollar(t)) else {
                return Expanded::Unchanged;
            };
            let replacement = if uid {
                uids
            } else {
                let numbers: Vec<u32> = present
                    .iter()
                    .filter_map(|&u| messages.binary_search_by_key(&u, |m| m.uid).ok())
                    .map(|i| i as u32 + 1)
                    .collect();
                if numbers.is_empty() {
                    return Expanded::NoMessages {
                        tag: String::from_utf8_lossy(word(tag)).into_owned(),
                        answer: format!("OK {name} completed"),
                    };
                }
                uid_set(&numbers)
            };
            edits.push((set.start, set.end, replacement));
        }
        "SEARCH" | "SORT" | "THREAD" => {
            let mut pending_arguments = 0;
            let mut after_uid = false;
            for t in &tokens[name_at + 1..] {
                if pending_arguments > 0 {
                    pending_arguments -= 1;
                    continue;
                }
                if is_dollar(t) {
                    let set = if after_uid {
                        uids.clone()
                    } else {
                        format!("UID {uids}")
                    };
                    edits.push((t.start, t.end, set));
                }
                after_uid = t.atom && word(t).eq_ignore_ascii_case(b"UID");
                if t.atom {
                    pending_arguments = arguments_of(word(t));
                }
            }
        }
        _ => {}
    }
    if edits.is_empty() {
        return Expanded::Unchanged;
    }
    let mut out = Vec::with_capacity(cmd.len() + 16);
    let mut at = 0;
    for (start, end, replacement) in edits {
        out.extend_from_slice(&cmd[at..start]);
        out.extend_from_slice(replacement.as_bytes());
        at = end;
    }
    out.extend_from_slice(&cmd[at..]);
    Expanded::Rewritten(out)
}

/// Whether a command (one that failed to parse) is a SEARCH with a SAVE return option.
pub(crate) fn saves(cmd: &[u8]) -> bool {
    let Some(tokens) = tokens(cmd) else {
        return false;
    };
    let words: Vec<String> = tokens
        .iter()
        .skip(1)
        .take(12)
        .map(|t| String::from_utf8_lossy(&cmd[t.start..t.end]).to_ascii_uppercase())
        .collect();
    let at = usize::from(words.first().is_some_and(|w| w == "UID"));
    words.get(at).is_some_and(|w| w == "SEARCH")
        && words.get(at + 1).is_some_and(|w| w == "RETURN")
        && words[at + 1..]
            .iter()
            .take_while(|w| *w != ")")
            .any(|w| w == "SAVE")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn messages(uids: &[u32]) -> Vec<MessageInfo> {
        uids.iter()
            .map(|&uid| MessageInfo {
                uid,
                size: 1,
                flags: mail_model::Flags::EMPTY,
                keywords: Vec::new(),
                modseq: 1,
                internal_date: 0,
            })
            .collect()
    }

    fn text(e: Expanded) -> String {
        match e {
            Expanded::Rewritten(b) => String::from_utf8(b).unwrap(),
            other => format!("{other:?}"),
        }
    }

    #[test]
    fn dollar_becomes_uids_or_numbers_where_a_set_may_stand() {
        let view = messages(&[3, 5, 7, 9]);
        let saved = [5, 6, 7, 9];
        let x = |c: &str| text(expand(c.as_bytes(), &saved, &view));
        assert_eq!(
            x("a UID FETCH $ (FLAGS)\r\n"),
            "a UID FETCH 5,7,9 (FLAGS)\r\n"
        );
        assert_eq!(x("a FETCH $ (FLAGS)\r\n"), "a FETCH 2:4 (FLAGS)\r\n");
        assert_eq!(
            x("a STORE $ +FLAGS (\\Seen)\r\n"),
            "a STORE 2:4 +FLAGS (\\Seen)\r\n"
        );
        assert_eq!(x("a UID MOVE $ Trash\r\n"), "a UID MOVE 5,7,9 Trash\r\n");
        assert_eq!(x("a UID EXPUNGE $\r\n"), "a UID EXPUNGE 5,7,9\r\n");
        assert_eq!(
            x("a SEARCH $ SUBJECT $ OR UID $ (HEADER $ $ $)\r\n"),
            "a SEARCH UID 5,7,9 SUBJECT $ OR UID 5,7,9 (HEADER $ $ UID 5,7,9)\r\n"
        );
        assert_eq!(
            x("a SEARCH SUBJECT {1+}\r\n$ $\r\n"),
            "a SEARCH SUBJECT {1+}\r\n$ UID 5,7,9\r\n"
        );
        assert_eq!(x("a SEARCH SUBJECT \"$\"\r\n"), "Unchanged");
        assert_eq!(x("a FETCH 1 (FLAGS)\r\n"), "Unchanged");
        assert_eq!(x("a COPY 1 $\r\n"), "Unchanged", "a mailbox named $");
        assert_eq!(x("a APPEND $ {1+}\r\n$\r\n"), "Unchanged");
        assert_eq!(x("a LOGIN $ $\r\n"), "Unchanged");
    }

    #[test]
    fn an_empty_result_names_no_message() {
        let view = messages(&[3]);
        assert_eq!(
            expand(b"t FETCH $ FLAGS\r\n", &[4], &view),
            Expanded::NoMessages {
                tag: "t".into(),
                answer: "OK FETCH completed".into()
            }
        );
        assert_eq!(
            text(expand(b"t UID FETCH $ FLAGS\r\n", &[], &view)),
            "t UID FETCH 4294967295 FLAGS\r\n"
        );
        assert_eq!(
            text(expand(b"t SEARCH $\r\n", &[], &view)),
            "t SEARCH UID 4294967295\r\n"
        );
    }
}
