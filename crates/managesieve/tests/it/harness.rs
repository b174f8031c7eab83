//! The transcript runner. A script is what a test expects to see, one step per line
//! (indentation, blank lines and `#` comments ignored):
//!
//! ```text
//! C: NOOP                client sends the text and CRLF (one feed)
//! C| NOOP\r\nLOGOUT\r\n  client sends exactly these bytes, escapes allowed (one feed)
//! S: OK "Done"           a reply line the session wrote (CRLF removed, escaped)
//! E: ListScripts { .. }  a non-reply event, in Debug form (Authenticate shows the password)
//! > list a b*            the shell answers (see `drive`)
//! ```
//!
//! The runner executes the `C`/`>` lines, renders what the session produced in the same form,
//! and compares the whole transcript with the script. Every script runs twice, fed as written
//! and fed one byte at a time, and both runs must give the same transcript.

use std::sync::Arc;

use managesieve::{AuthResult, Config, Event, Failure, Quota, ScriptInfo, Session};

/// Plaintext logins allowed: most command tests need a login and nothing about TLS.
pub(crate) fn plain() -> Config {
    Config {
        sieve_extensions: vec!["fileinto".to_owned(), "vacation".to_owned()],
        plaintext_auth: true,
        ..Config::default()
    }
}

/// The production defaults, with STARTTLS offered.
pub(crate) fn strict() -> Config {
    Config {
        sieve_extensions: vec!["fileinto".to_owned(), "vacation".to_owned()],
        tls_available: true,
        ..Config::default()
    }
}

/// The greeting of `plain()`.
pub(crate) const GREETING: &str = r#"
    S: "IMPLEMENTATION" "mailstow"
    S: "SASL" "PLAIN"
    S: "SIEVE" "fileinto vacation"
    S: "UNAUTHENTICATE"
    S: "VERSION" "1.0"
    S: OK "ManageSieve ready"
"#;

/// `GREETING` and a PLAIN login of alice.
pub(crate) fn login() -> String {
    format!(
        r#"{GREETING}
        C: AUTHENTICATE "PLAIN" "AGFsaWNlAHNlY3JldA=="
        E: Authenticate {{ mechanism: "PLAIN", authcid: "alice", password: "secret", authzid: "" }}
        > auth ok alice
        S: OK "Logged in"
        "#
    )
}

/// Checks `script` on a plaintext session with `plain()`, after `login()`.
pub(crate) fn check_authenticated(script: &str) {
    check(plain(), false, &format!("{}{script}", login()));
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
            Event::Authenticate {
                mechanism,
                authcid,
                password,
                authzid,
            } => transcript.push(format!(
                "E: Authenticate {{ mechanism: {mechanism:?}, authcid: {authcid:?}, password: {password:?}, authzid: {authzid:?} }}"
            )),
            // Debug shows a script's size only; the transcript shows it.
            Event::PutScript { user, name, script } => transcript.push(format!(
                "E: PutScript {{ user: {user:?}, name: {name:?}, script: {script:?} }}"
            )),
            Event::CheckScript { user, script } => transcript.push(format!(
                "E: CheckScript {{ user: {user:?}, script: {script:?} }}"
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

/// `nonexistent`, `exists`, `active`, `quota`, `quota-scripts`, `quota-size`,
/// `invalid <escaped text>`, `unavailable <text>`.
pub(crate) fn failure(spec: &str) -> Failure {
    let (kind, text) = spec.split_once(' ').unwrap_or((spec, ""));
    match kind {
        "nonexistent" => Failure::NonExistent,
        "exists" => Failure::AlreadyExists,
        "active" => Failure::Active,
        "quota" => Failure::Quota(Quota::Other),
        "quota-scripts" => Failure::Quota(Quota::MaxScripts),
        "quota-size" => Failure::Quota(Quota::MaxSize),
        "invalid" => Failure::Invalid(String::from_utf8(unescape(text)).unwrap()),
        "unavailable" => Failure::Unavailable(String::from_utf8(unescape(text)).unwrap()),
        _ => panic!("unknown failure: {spec}"),
    }
}

/// `ok`, or `error <failure>`.
fn unit(rest: &str) -> Result<(), Failure> {
    match rest.strip_prefix("error ") {
        Some(spec) => Err(failure(spec)),
        None if rest == "ok" => Ok(()),
        None => panic!("ok | error <failure>: {rest}"),
    }
}

/// `ok`, `warn <text>`, or `error <failure>`.
fn compiled(rest: &str) -> Result<Option<String>, Failure> {
    if let Some(text) = rest.strip_prefix("warn ") {
        return Ok(Some(String::from_utf8(unescape(text)).unwrap()));
    }
    unit(rest).map(|()| None)
}

/// Shell steps:
/// `auth ok <user> | bad | weak | transition | referral <url> | unavailable <text>`, `tls`,
/// `list [name | name*]... | list error <failure>`, `get <escaped content> | get error <f>`,
/// `put ok | warn <text> | error <f>`, `check ...` (like put), `space|active|delete|rename
/// ok | error <f>`, `timeout`, `deadline`, `shutdown`, `revoked`, `moving`, `wants-input`, `buffered`
/// (the last two print "= <value>").
fn drive(session: &mut Session, command: &str) -> Option<String> {
    let (verb, rest) = command.split_once(' ').unwrap_or((command, ""));
    match verb {
        "auth" => {
            let (kind, detail) = rest.split_once(' ').unwrap_or((rest, ""));
            session.authenticated(match kind {
                "ok" => AuthResult::Success {
                    user: detail.to_owned(),
                },
                "bad" => AuthResult::BadCredentials,
                "weak" => AuthResult::TooWeak,
                "transition" => AuthResult::TransitionNeeded,
                "referral" => AuthResult::Referral(detail.to_owned()),
                "unavailable" => AuthResult::Unavailable(detail.to_owned()),
                _ => panic!("unknown auth answer: {command}"),
            });
        }
        "tls" => session.tls_started(),
        "list" => session.scripts_listed(match rest.strip_prefix("error ") {
            Some(spec) => Err(failure(spec)),
            None => Ok(rest
                .split_whitespace()
                .map(|name| ScriptInfo {
                    name: name.trim_end_matches('*').to_owned(),
                    active: name.ends_with('*'),
                })
                .collect()),
        }),
        "get" => session.script_got(match rest.strip_prefix("error ") {
            Some(spec) => Err(failure(spec)),
            None => Ok(unescape(rest)),
        }),
        "put" => session.script_put(compiled(rest)),
        "check" => session.script_checked(compiled(rest)),
        "space" => session.space_checked(unit(rest)),
        "active" => session.active_set(unit(rest)),
        "delete" => session.script_deleted(unit(rest)),
        "rename" => session.script_renamed(unit(rest)),
        "timeout" => session.timed_out(),
        "deadline" => session.deadline_passed(),
        "shutdown" => session.shutting_down(),
        "revoked" => session.revoked(),
        "moving" => session.moving(),
        "wants-input" => return Some(session.wants_input().to_string()),
        "buffered" => return Some(session.buffered_len().to_string()),
        _ => panic!("unknown shell step: {command}"),
    }
    None
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
