//! The transcript runner. A script is what a test expects to see, one step per line
//! (indentation, blank lines and `#` comments ignored):
//!
//! ```text
//! C: USER alice          client sends the text and CRLF (one feed)
//! C| STAT\r\nLIST\r\n    client sends exactly these bytes, escapes allowed (one feed)
//! S: +OK send PASS       a reply line the session wrote (CRLF removed, escaped)
//! E: Auth { .. }         a non-reply event, in Debug form
//! > auth ok 7 3:120      the shell answers: auth ok <uidvalidity> <uid>:<size>...,
//!                        auth bad | in-use | temp <text>, message <escaped content>,
//!                        message-error <text>, update ok | error <text>, tls, timeout,
//!                        wants-input, buffered (the last two print "= <value>")
//! ```
//!
//! The runner executes the `C`/`>` lines, renders what the session produced in the same form,
//! and compares the whole transcript with the script. Every script runs twice, fed as written
//! and fed one byte at a time, and both runs must give the same transcript.

use std::sync::Arc;

use pop3::{AuthResult, Config, Event, Maildrop, Session};

pub(crate) const HOST: &str = "pop.example.org";

/// Plaintext logins allowed: most command tests need a login and nothing about TLS.
pub(crate) fn plain() -> Config {
    Config {
        hostname: HOST.to_owned(),
        plaintext_auth: true,
        ..Config::default()
    }
}

/// The production defaults, with STLS offered.
pub(crate) fn strict() -> Config {
    Config {
        hostname: HOST.to_owned(),
        tls_available: true,
        ..Config::default()
    }
}

/// Greeting and a USER/PASS login into maildrop UIDVALIDITY 7 with UIDs 3, 5, 9.
pub(crate) const LOGIN: &str = r#"
    S: +OK pop.example.org POP3 server ready
    C: USER alice
    S: +OK send PASS
    C: PASS secret
    E: Auth { mechanism: "USER", username: "alice", password: "secret", authzid: "" }
    > auth ok 7 3:120 5:200 9:30
    S: +OK maildrop has 3 messages (350 octets)
"#;

/// Checks `script` on a plaintext session with `plain()`, after `LOGIN`.
pub(crate) fn check_transaction(script: &str) {
    check(plain(), false, &format!("{LOGIN}{script}"));
}

pub(crate) fn check(config: Config, tls: bool, script: &str) {
    let config = Arc::new(config);
    let expected = steps(script).collect::<Vec<_>>().join("\n");
    let whole = run(&config, tls, script, false);
    assert!(
        whole == expected,
        "transcript differs\n--- expected\n{expected}\n--- actual\n{whole}\n"
    );
    let bytewise = run(&config, tls, script, true);
    assert!(
        bytewise == expected,
        "byte-by-byte transcript differs\n--- expected\n{expected}\n--- actual\n{bytewise}\n"
    );
}

fn steps(script: &str) -> impl Iterator<Item = &str> {
    script
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
}

fn run(config: &Arc<Config>, tls: bool, script: &str, bytewise: bool) -> String {
    let mut session = Session::new(config.clone(), tls);
    let mut transcript = Vec::new();
    drain(&mut session, &mut transcript);
    for step in steps(script) {
        let input = if let Some(text) = step.strip_prefix("C:") {
            let mut bytes = unescape(text.strip_prefix(' ').unwrap_or(text));
            bytes.extend_from_slice(b"\r\n");
            Some(bytes)
        } else if let Some(text) = step.strip_prefix("C|") {
            Some(unescape(text.strip_prefix(' ').unwrap_or(text)))
        } else if let Some(command) = step.strip_prefix("> ") {
            transcript.push(step.to_owned());
            if let Some(value) = drive(&mut session, command) {
                transcript.push(format!("= {value}"));
            }
            drain(&mut session, &mut transcript);
            None
        } else if step.starts_with("S:") || step.starts_with("E:") || step.starts_with("= ") {
            continue;
        } else {
            panic!("unknown script step: {step}");
        };
        if let Some(bytes) = input {
            transcript.push(step.to_owned());
            if bytewise {
                for byte in bytes {
                    session.feed(&[byte]);
                    drain(&mut session, &mut transcript);
                }
            } else {
                session.feed(&bytes);
                drain(&mut session, &mut transcript);
            }
        }
    }
    transcript.join("\n")
}

/// Polls until the session has nothing more, rendering each reply line and event.
fn drain(session: &mut Session, transcript: &mut Vec<String>) {
    while let Some(event) = session.poll() {
        match event {
            Event::Reply(bytes) => render_reply(&bytes, transcript),
            // Debug hides the password; the transcript shows it.
            Event::Auth {
                mechanism,
                username,
                password,
                authzid,
            } => transcript.push(format!(
                "E: Auth {{ mechanism: {mechanism:?}, username: {username:?}, password: {password:?}, authzid: {authzid:?} }}"
            )),
            other => transcript.push(format!("E: {other:?}")),
        }
    }
}

fn render_reply(mut bytes: &[u8], transcript: &mut Vec<String>) {
    while !bytes.is_empty() {
        match bytes.windows(2).position(|pair| pair == b"\r\n") {
            Some(end) => {
                let line = escape(&bytes[..end]);
                transcript.push(if line.is_empty() {
                    "S:".to_owned()
                } else {
                    format!("S: {line}")
                });
                bytes = &bytes[end + 2..];
            }
            None => {
                // A reply must be whole CRLF lines; show a violation instead of hiding it.
                transcript.push(format!("S| {}", escape(bytes)));
                return;
            }
        }
    }
}

fn drive(session: &mut Session, command: &str) -> Option<String> {
    let (verb, rest) = command.split_once(' ').unwrap_or((command, ""));
    match (verb, rest) {
        ("auth", rest) => {
            let (kind, detail) = rest.split_once(' ').unwrap_or((rest, ""));
            let result = match kind {
                "ok" => AuthResult::Success {
                    maildrop: maildrop(detail),
                },
                "bad" => AuthResult::BadCredentials,
                "in-use" => AuthResult::InUse,
                "temp" => AuthResult::Temporary(String::from_utf8(unescape(detail)).unwrap()),
                _ => panic!("unknown auth answer: {command}"),
            };
            session.auth_result(result);
        }
        ("message", content) => session.retrieve_result(Ok(unescape(content))),
        ("message-error", text) => session.retrieve_result(Err(text.to_owned())),
        ("update", "ok") => session.update_result(Ok(())),
        ("update", rest) => {
            let text = rest
                .strip_prefix("error ")
                .expect("update ok | update error <text>");
            session.update_result(Err(text.to_owned()));
        }
        ("tls", "") => session.tls_started(),
        ("timeout", "") => session.timed_out(),
        ("wants-input", "") => return Some(session.wants_input().to_string()),
        ("buffered", "") => return Some(session.buffered_len().to_string()),
        _ => panic!("unknown shell step: {command}"),
    }
    None
}

/// `7 3:120 5:200`: UIDVALIDITY, then UID:size pairs.
pub(crate) fn maildrop(spec: &str) -> Maildrop {
    let mut words = spec.split_whitespace();
    let uidvalidity = words.next().expect("uidvalidity").parse().unwrap();
    let messages = words
        .map(|pair| {
            let (uid, size) = pair.split_once(':').expect("uid:size");
            (uid.parse().unwrap(), size.parse().unwrap())
        })
        .collect();
    Maildrop {
        uidvalidity,
        messages,
    }
}

/// `\r \n \t \0 \\ \xNN`; anything else is literal.
pub(crate) fn unescape(text: &str) -> Vec<u8> {
    let mut bytes = Vec::new();
    let mut rest = text.as_bytes();
    while let Some((&first, after)) = rest.split_first() {
        rest = after;
        if first != b'\\' {
            bytes.push(first);
            continue;
        }
        let (&kind, after) = rest.split_first().expect("escape at end of line");
        rest = after;
        match kind {
            b'r' => bytes.push(b'\r'),
            b'n' => bytes.push(b'\n'),
            b't' => bytes.push(b'\t'),
            b'0' => bytes.push(0),
            b'\\' => bytes.push(b'\\'),
            b'x' => {
                let hex = std::str::from_utf8(&rest[..2]).unwrap();
                bytes.push(u8::from_str_radix(hex, 16).unwrap());
                rest = &rest[2..];
            }
            other => panic!("unknown escape \\{}", other as char),
        }
    }
    bytes
}

/// The inverse of `unescape` for reply lines; a trailing space is escaped so it survives the
/// script's trimming.
fn escape(bytes: &[u8]) -> String {
    let mut text = String::new();
    for (index, &byte) in bytes.iter().enumerate() {
        match byte {
            b'\\' => text.push_str("\\\\"),
            b'\r' => text.push_str("\\r"),
            b'\n' => text.push_str("\\n"),
            b' ' if index + 1 == bytes.len() => text.push_str("\\x20"),
            0x20..=0x7e => text.push(byte as char),
            _ => text.push_str(&format!("\\x{byte:02x}")),
        }
    }
    text
}
