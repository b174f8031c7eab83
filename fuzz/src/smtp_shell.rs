//! A shell for `smtp::Session` that answers every decision at once, like
//! crates/smtp/tests/it/shell.rs, and checks the session's invariants as it goes.

use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;

use smtp::{AuthResult, Config, Event, Mode, Peer, Reply, Session, Verdict};

use crate::{Split, assert_crlf_lines, flights, lines};

/// Everything a run produced: reply bytes and every other event, in order.
#[derive(Debug, PartialEq, Eq)]
pub struct Transcript {
    pub output: Vec<u8>,
    pub events: Vec<Event>,
}

/// The listener configuration chosen by the input's first byte.
pub fn config(mode: Mode, selector: u8) -> (Config, Peer) {
    let mut config = Config {
        hostname: "mx.example".to_string(),
        mode,
        tls_available: selector & 0x08 != 0,
        auth_without_tls: selector & 0x10 != 0,
        require_auth: selector & 0x20 != 0,
        // The shell decides on the connection and the greeting (a filter's questions).
        decide_connect: selector & 0x80 != 0,
        decide_hello: selector & 0x80 != 0,
        ..Config::default()
    };
    if selector & 0x40 != 0 {
        // Small limits, so that a short input reaches every limit's path.
        config.command_line_max = 80;
        config.text_line_max = 100;
        config.message_bytes_max = 300;
        config.recipients_max = 3;
        config.errors_max = 4;
        config.commands_without_progress_max = 6;
        config.input_buffer_max = 256;
        config.inflight = Some(limits::ByteBudget::new(200));
    }
    let peer = Peer {
        ip: IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1)),
        tls: selector & 0x04 != 0,
    };
    (config, peer)
}

/// The shell's answers: the n-th decision of each kind alternates between yes and the kinds
/// of no, so every answer path is taken.
#[derive(Default)]
struct Answers {
    decisions: usize,
}

impl Answers {
    fn next(&mut self) -> usize {
        self.decisions += 1;
        self.decisions
    }

    fn verdict(&mut self) -> Verdict {
        match self.next() % 4 {
            0 => Verdict::Reject(Reply::new(550, (5, 1, 1), "no such user")),
            1 => Verdict::Reject(Reply::new(451, (4, 3, 0), "try later\nreally")),
            // A reply that is not a failure: the session must still refuse (451).
            2 => Verdict::Reject(Reply::plain(250, "not a refusal\r\n")),
            _ => Verdict::Accept,
        }
    }
}

/// Runs one session over `input` (after the selector bytes) split as `split`.
pub fn run(config: &Config, peer: Peer, input: &[u8], split: Split) -> Transcript {
    let line_max = config.command_line_max.min(config.input_buffer_max).max(1);
    // A budget is shared by all sessions of a server; each run gets its own, so that the
    // three runs of one input see the same one.
    let mut config = config.clone();
    if let Some(budget) = &config.inflight {
        config.inflight = Some(limits::ByteBudget::new(budget.bytes_max()));
    }
    let mut session = Session::new(Arc::new(config), peer);
    let mut answers = Answers::default();
    let mut transcript = Transcript {
        output: Vec::new(),
        events: Vec::new(),
    };
    let mut closed = false;
    let mut tls_pending = false;
    drain(
        &mut session,
        &mut answers,
        &mut transcript,
        &mut closed,
        &mut tls_pending,
        line_max,
    );
    for flight in flights(input) {
        for piece in split.pieces(flight) {
            if closed {
                break;
            }
            assert!(session.wants_input(), "the shell reads only when asked");
            session.feed(piece);
            drain(
                &mut session,
                &mut answers,
                &mut transcript,
                &mut closed,
                &mut tls_pending,
                line_max,
            );
            if tls_pending {
                // The handshake consumes the rest of what the client sent in this flight.
                tls_pending = false;
                session.tls_started();
                drain(
                    &mut session,
                    &mut answers,
                    &mut transcript,
                    &mut closed,
                    &mut tls_pending,
                    line_max,
                );
                break;
            }
        }
    }
    if closed {
        // After Close, input is ignored and nothing more comes out.
        session.feed(b"QUIT\r\nNOOP\r\n");
        assert!(session.poll().is_none(), "an event after Close");
        assert!(session.is_closed());
    }
    for line in lines(&transcript.output) {
        let ok = line.len() >= 4
            && line[..3].iter().all(u8::is_ascii_digit)
            && (line[3] == b' ' || line[3] == b'-');
        assert!(
            ok,
            "reply line {:?} is not `ddd text`",
            String::from_utf8_lossy(line)
        );
    }
    transcript
}

fn drain(
    session: &mut Session,
    answers: &mut Answers,
    transcript: &mut Transcript,
    closed: &mut bool,
    tls_pending: &mut bool,
    line_max: usize,
) {
    while let Some(event) = session.poll() {
        assert!(!*closed, "event after Close: {event:?}");
        match &event {
            Event::Reply(bytes) => {
                assert_crlf_lines("SMTP reply", bytes);
                transcript.output.extend_from_slice(bytes);
                continue;
            }
            Event::StartTls => *tls_pending = true,
            Event::Connect => {
                let verdict = answers.verdict();
                session.connect_result(verdict);
            }
            Event::Hello { .. } => {
                let verdict = answers.verdict();
                session.hello_result(verdict);
            }
            Event::Auth { username, .. } => {
                let result = match answers.next() % 3 {
                    0 => AuthResult::Failed,
                    1 => AuthResult::Success {
                        user: username.clone(),
                    },
                    _ => AuthResult::TemporaryFailure,
                };
                session.auth_result(result);
            }
            Event::MailFrom { .. } => {
                let verdict = answers.verdict();
                session.mail_result(verdict);
            }
            Event::RcptTo { .. } => {
                let verdict = answers.verdict();
                session.rcpt_result(verdict);
            }
            Event::Message { envelope, .. } => {
                assert!(
                    !envelope.recipients.is_empty(),
                    "a message without recipients"
                );
                // One verdict per recipient, sometimes one short (sent as 451), sometimes
                // one extra (ignored).
                let n = envelope.recipients.len();
                let count = match answers.next() % 5 {
                    0 => n.saturating_sub(1),
                    1 => n + 1,
                    _ => n,
                };
                let verdicts = (0..count).map(|_| answers.verdict()).collect();
                session.message_result(verdicts);
            }
            Event::Close => *closed = true,
        }
        transcript.events.push(event);
    }
    assert!(
        *closed || *tls_pending || session.wants_input(),
        "a shell that answers at once never sees a stuck session"
    );
    if !*closed && !*tls_pending {
        // With every decision answered, only a partial command line can be left over.
        assert!(
            session.buffered_len() < line_max,
            "buffered {} bytes, line limit {line_max}",
            session.buffered_len()
        );
    }
}

/// The whole target: three runs of the input (whole flights, byte by byte, chunks of the
/// size the second byte picks) must produce the same replies and events.
pub fn fuzz(mode: Mode, data: &[u8]) {
    let [selector, chunk, input @ ..] = data else {
        return;
    };
    let mode = match (mode, selector & 1) {
        (Mode::Lmtp, _) => Mode::Lmtp,
        (_, 0) => Mode::Mx,
        _ => Mode::Submission,
    };
    let (config, peer) = config(mode, *selector);
    let whole = run(&config, peer, input, Split::Whole);
    let bytes = run(&config, peer, input, Split::Bytes);
    assert_eq!(
        String::from_utf8_lossy(&whole.output),
        String::from_utf8_lossy(&bytes.output),
        "output differs between whole and byte-by-byte feeding"
    );
    assert_eq!(whole.events, bytes.events, "events differ");
    let chunked = run(
        &config,
        peer,
        input,
        Split::Chunks(usize::from(*chunk % 64) + 2),
    );
    assert_eq!(whole, chunked, "chunked feeding differs");
}
