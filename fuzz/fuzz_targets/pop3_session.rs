//! `pop3::Session` (docs/fuzzing.md) with a maildrop of four messages answered from memory.
//!
//! Input: a selector byte (bit 0 connection on TLS, 1 STLS offered, 2 plaintext logins
//! allowed, 3 small limits), a chunk-size byte, then client bytes with flights separated by
//! `\xff\xfe`. Every decision is answered at once, cycling through the answers; the same
//! input fed whole, byte by byte and in chunks must give the same transcript.
#![no_main]

use std::sync::Arc;

use libfuzzer_sys::fuzz_target;
use mailstow_fuzz::{Split, assert_crlf_lines, flights};
use pop3::{AuthResult, Config, Event, Maildrop, Session};

/// The maildrop's messages by UID: CRLF mail, a line that needs byte-stuffing, bare LF line
/// ends, a last line without a line ending, and an empty message.
const MESSAGES: [(u32, &[u8]); 4] = [
    (
        3,
        b"From: a@example.org\r\nSubject: one\r\n\r\nbody\r\n.\r\n..two dots\r\n",
    ),
    (5, b"Subject: bare\n\nline one\nline two"),
    (9, b""),
    (12, b"Subject: top\r\n\r\n1\r\n2\r\n3\r\n4\r\n.\r\n"),
];

fn maildrop() -> Maildrop {
    Maildrop {
        uidvalidity: 7,
        messages: MESSAGES
            .iter()
            .map(|(uid, content)| (*uid, content.len() as u64))
            .collect(),
    }
}

fn config(selector: u8) -> Config {
    let mut config = Config {
        hostname: "pop.example.org".to_owned(),
        tls_available: selector & 0x02 != 0,
        plaintext_auth: selector & 0x04 != 0,
        ..Config::default()
    };
    if selector & 0x08 != 0 {
        config.line_max = 40;
        config.errors_max = 3;
        config.input_buffer_max = 100;
    }
    config
}

#[derive(Debug, PartialEq, Eq)]
struct Transcript {
    output: Vec<u8>,
    events: Vec<String>,
}

fn run(config: &Arc<Config>, tls: bool, input: &[u8], split: Split) -> Transcript {
    let mut shell = Shell {
        session: Session::new(config.clone(), tls),
        decisions: 0,
        closed: false,
        tls_pending: false,
        transcript: Transcript {
            output: Vec::new(),
            events: Vec::new(),
        },
    };
    shell.drain();
    // A shell reads at most input_buffer_max per feed (pop3::Config says so).
    let read_max = config.input_buffer_max.max(1);
    'flights: for flight in flights(input) {
        for piece in split.pieces(flight) {
            for piece in piece.chunks(read_max) {
                if shell.closed {
                    break 'flights;
                }
                assert!(
                    shell.session.wants_input(),
                    "the shell reads only when asked"
                );
                shell.session.feed(piece);
                assert!(
                    shell.session.buffered_len() <= config.input_buffer_max + config.line_max,
                    "buffered {} bytes",
                    shell.session.buffered_len()
                );
                shell.drain();
                if shell.tls_pending {
                    // The handshake consumes the rest of the flight.
                    shell.tls_pending = false;
                    shell.session.tls_started();
                    shell.drain();
                    continue 'flights;
                }
            }
        }
    }
    if shell.closed {
        shell.session.feed(b"QUIT\r\n");
        assert!(shell.session.poll().is_none(), "an event after Close");
    }
    shell.transcript
}

struct Shell {
    session: Session,
    decisions: usize,
    closed: bool,
    tls_pending: bool,
    transcript: Transcript,
}

impl Shell {
    fn next(&mut self) -> usize {
        self.decisions += 1;
        self.decisions
    }

    fn drain(&mut self) {
        while let Some(event) = self.session.poll() {
            assert!(!self.closed, "event after Close: {event:?}");
            match &event {
                Event::Reply(bytes) => {
                    assert_crlf_lines("POP3 reply", bytes);
                    self.transcript.output.extend_from_slice(bytes);
                    continue;
                }
                Event::StartTls => self.tls_pending = true,
                Event::Auth { .. } => {
                    let result = match self.next() % 4 {
                        0 => AuthResult::BadCredentials,
                        1 => AuthResult::Success {
                            maildrop: maildrop(),
                        },
                        2 => AuthResult::InUse,
                        _ => AuthResult::Temporary("directory\r\ndown".to_owned()),
                    };
                    self.session.auth_result(result);
                }
                Event::Retrieve { uid, .. } => {
                    let content = MESSAGES.iter().find(|(u, _)| u == uid);
                    assert!(
                        content.is_some(),
                        "Retrieve of UID {uid}, not in the maildrop"
                    );
                    let result = match (self.next() % 3, content) {
                        (0, _) | (_, None) => Err("store\nunavailable".to_owned()),
                        (_, Some((_, content))) => Ok(content.to_vec()),
                    };
                    self.session.retrieve_result(result);
                }
                Event::Update { expunge } => {
                    assert!(!expunge.is_empty(), "Update with nothing to expunge");
                    assert!(
                        expunge.is_sorted(),
                        "Update UIDs not ascending: {expunge:?}"
                    );
                    let result = if self.next().is_multiple_of(2) {
                        Ok(())
                    } else {
                        Err("disk full".to_owned())
                    };
                    self.session.update_result(result);
                }
                Event::Close => self.closed = true,
            }
            self.transcript.events.push(format!("{event:?}"));
        }
        assert!(
            self.closed || self.tls_pending || self.session.wants_input(),
            "a shell that answers at once never sees a stuck session"
        );
    }
}

fuzz_target!(|data: &[u8]| {
    let [selector, chunk, input @ ..] = data else {
        return;
    };
    let config = Arc::new(config(*selector));
    let tls = selector & 0x01 != 0;
    let whole = run(&config, tls, input, Split::Whole);
    let bytes = run(&config, tls, input, Split::Bytes);
    assert_eq!(
        String::from_utf8_lossy(&whole.output),
        String::from_utf8_lossy(&bytes.output),
        "output differs between whole and byte-by-byte feeding"
    );
    assert_eq!(whole.events, bytes.events, "events differ");
    let chunked = run(
        &config,
        tls,
        input,
        Split::Chunks(usize::from(*chunk % 64) + 2),
    );
    assert_eq!(whole, chunked, "chunked feeding differs");
});
