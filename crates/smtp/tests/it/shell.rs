//! A scripted shell: feeds client bytes, answers decisions from queues (default: accept),
//! and checks `C:`/`S:` transcripts. Every transcript runs twice, fed line by line and byte by
//! byte, and both runs must give the same bytes and the same events.

use std::collections::VecDeque;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;

use smtp::{AuthResult, Config, Event, Mode, Peer, Reply, Session, Verdict};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Split {
    /// Each run of `C:` lines in one `feed`.
    Lines,
    /// One byte per `feed`.
    Bytes,
}

/// The decisions a test scripts; anything not scripted is accepted.
#[derive(Debug, Clone, Default)]
pub(crate) struct Answers {
    pub(crate) connect: VecDeque<Verdict>,
    pub(crate) hello: VecDeque<Verdict>,
    pub(crate) auth: VecDeque<AuthResult>,
    pub(crate) mail: VecDeque<Verdict>,
    pub(crate) rcpt: VecDeque<Verdict>,
    pub(crate) message: VecDeque<Vec<Verdict>>,
}

pub(crate) struct Shell {
    pub(crate) session: Session,
    pub(crate) answers: Answers,
    /// Every reply byte so far.
    pub(crate) output: Vec<u8>,
    /// Every other event, in order.
    pub(crate) events: Vec<Event>,
    pub(crate) closed: bool,
    /// Largest `buffered_len` seen after a feed.
    pub(crate) buffered_max: usize,
    tls_pending: bool,
    /// The effective command line limit: nothing more may stay buffered after a drain.
    line_max: usize,
}

impl Shell {
    pub(crate) fn new(config: Config, peer: Peer, answers: Answers) -> Shell {
        let line_max = config.command_line_max.min(config.input_buffer_max).max(1);
        let mut shell = Shell {
            line_max,
            session: Session::new(Arc::new(config), peer),
            answers,
            output: Vec::new(),
            events: Vec::new(),
            closed: false,
            buffered_max: 0,
            tls_pending: false,
        };
        shell.drain();
        shell
    }

    /// Feeds `bytes` in pieces. After STARTTLS the rest of what the client sent is dropped,
    /// as the TLS handshake would consume it, and the handshake "succeeds".
    pub(crate) fn feed(&mut self, bytes: &[u8], split: Split) {
        let pieces: Vec<&[u8]> = match split {
            Split::Lines => vec![bytes],
            Split::Bytes => bytes.chunks(1).collect(),
        };
        for piece in pieces {
            assert!(
                self.closed || self.session.wants_input(),
                "the shell reads only when asked"
            );
            self.session.feed(piece);
            self.buffered_max = self.buffered_max.max(self.session.buffered_len());
            self.drain();
            if self.tls_pending {
                self.tls_pending = false;
                self.session.tls_started();
                self.drain();
                return;
            }
        }
    }

    /// Polls until `None`, answering decisions.
    pub(crate) fn drain(&mut self) {
        while let Some(event) = self.session.poll() {
            assert!(!self.closed, "event after Close: {event:?}");
            match &event {
                Event::Reply(bytes) => {
                    self.output.extend_from_slice(bytes);
                    continue;
                }
                Event::StartTls => self.tls_pending = true,
                Event::Connect => {
                    let verdict = self.answers.connect.pop_front().unwrap_or(Verdict::Accept);
                    self.session.connect_result(verdict);
                }
                Event::Hello { .. } => {
                    let verdict = self.answers.hello.pop_front().unwrap_or(Verdict::Accept);
                    self.session.hello_result(verdict);
                }
                Event::Auth { username, .. } => {
                    let user = username.clone();
                    let result = self
                        .answers
                        .auth
                        .pop_front()
                        .unwrap_or(AuthResult::Success { user });
                    self.session.auth_result(result);
                }
                Event::MailFrom { .. } => {
                    let verdict = self.answers.mail.pop_front().unwrap_or(Verdict::Accept);
                    self.session.mail_result(verdict);
                }
                Event::RcptTo { .. } => {
                    let verdict = self.answers.rcpt.pop_front().unwrap_or(Verdict::Accept);
                    self.session.rcpt_result(verdict);
                }
                Event::Message { envelope, .. } => {
                    let all = vec![Verdict::Accept; envelope.recipients.len()];
                    let verdicts = self.answers.message.pop_front().unwrap_or(all);
                    self.session.message_result(verdicts);
                }
                Event::Close => self.closed = true,
            }
            self.events.push(event);
        }
        assert!(
            self.closed || self.tls_pending || self.session.wants_input(),
            "a shell that answers at once never sees a stuck session"
        );
        // With every decision answered, only a partial command line can be left over.
        assert!(
            self.session.buffered_len() < self.line_max,
            "buffered {} bytes",
            self.session.buffered_len()
        );
    }

    pub(crate) fn messages(&self) -> Vec<(&smtp::Envelope, &[u8])> {
        self.events
            .iter()
            .filter_map(|event| match event {
                Event::Message { envelope, content } => Some((envelope, content.as_slice())),
                _ => None,
            })
            .collect()
    }
}

/// A test: configuration, peer and scripted answers, then `run` a transcript.
pub(crate) struct Test {
    pub(crate) config: Config,
    pub(crate) peer: Peer,
    pub(crate) answers: Answers,
}

pub(crate) fn mx() -> Test {
    Test::new(Config {
        hostname: "mx.example".to_string(),
        ..Config::default()
    })
}

pub(crate) fn submission() -> Test {
    Test::new(Config {
        hostname: "mx.example".to_string(),
        mode: Mode::Submission,
        ..Config::default()
    })
    .tls()
}

pub(crate) fn lmtp() -> Test {
    Test::new(Config {
        hostname: "lmtp.example".to_string(),
        mode: Mode::Lmtp,
        ..Config::default()
    })
}

pub(crate) fn reject(code: u16, enhanced: (u8, u16, u16), text: &str) -> Verdict {
    Verdict::Reject(Reply::new(code, enhanced, text))
}

impl Test {
    pub(crate) fn new(config: Config) -> Test {
        Test {
            config,
            peer: Peer {
                ip: IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1)),
                tls: false,
            },
            answers: Answers::default(),
        }
    }

    pub(crate) fn config(mut self, change: impl FnOnce(&mut Config)) -> Test {
        change(&mut self.config);
        self
    }

    pub(crate) fn tls(mut self) -> Test {
        self.peer.tls = true;
        self
    }

    pub(crate) fn mail(mut self, verdict: Verdict) -> Test {
        self.answers.mail.push_back(verdict);
        self
    }

    pub(crate) fn rcpt(mut self, verdict: Verdict) -> Test {
        self.answers.rcpt.push_back(verdict);
        self
    }

    pub(crate) fn message(mut self, verdicts: Vec<Verdict>) -> Test {
        self.answers.message.push_back(verdicts);
        self
    }

    pub(crate) fn auth(mut self, result: AuthResult) -> Test {
        self.answers.auth.push_back(result);
        self
    }

    pub(crate) fn shell(&self) -> Shell {
        Shell::new(self.config.clone(), self.peer, self.answers.clone())
    }

    /// Runs the transcript fed by lines and by bytes; returns the shell of the first run.
    ///
    /// `C: text` is client input, sent with CRLF; `C~ text` is sent without it. `S: text` is
    /// an expected reply line. Both understand `\r`, `\n`, `\0`, `\\` and `\xHH` (a trailing
    /// space is written `\x20`). Each run of
    /// `S:` lines is compared with all output since the previous comparison. Blank lines and
    /// lines starting with `#` are ignored.
    pub(crate) fn run(&self, script: &str) -> Shell {
        let lines = self.run_split(script, Split::Lines);
        let bytes = self.run_split(script, Split::Bytes);
        assert_eq!(
            String::from_utf8_lossy(&lines.output),
            String::from_utf8_lossy(&bytes.output),
            "output differs between line and byte feeding"
        );
        assert_eq!(lines.events, bytes.events, "events differ");
        lines
    }

    fn run_split(&self, script: &str, split: Split) -> Shell {
        let mut shell = self.shell();
        let mut client = Vec::new();
        let mut expected = String::new();
        let mut checked = 0;
        let mut check = |shell: &mut Shell, client: &mut Vec<u8>, expected: &mut String| {
            if !client.is_empty() {
                shell.feed(client, split);
                client.clear();
            }
            let actual = String::from_utf8_lossy(shell.output.get(checked..).unwrap_or_default());
            assert_eq!(
                actual, *expected,
                "({split:?}) after the script line before"
            );
            checked = shell.output.len();
            expected.clear();
        };
        let mut in_server = true;
        for line in script.lines().map(str::trim) {
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            if let Some(text) = line.strip_prefix("S:") {
                in_server = true;
                let text = unescape(text.strip_prefix(' ').unwrap_or(text));
                expected.push_str(&String::from_utf8_lossy(&text));
                expected.push_str("\r\n");
                continue;
            }
            if in_server {
                check(&mut shell, &mut client, &mut expected);
                in_server = false;
            }
            if let Some(text) = line.strip_prefix("C:") {
                client.extend(unescape(text.strip_prefix(' ').unwrap_or(text)));
                client.extend_from_slice(b"\r\n");
            } else if let Some(text) = line.strip_prefix("C~") {
                client.extend(unescape(text.strip_prefix(' ').unwrap_or(text)));
            } else {
                panic!("bad script line {line:?}");
            }
        }
        check(&mut shell, &mut client, &mut expected);
        shell
    }
}

fn unescape(text: &str) -> Vec<u8> {
    let mut out = Vec::new();
    let mut chars = text.chars();
    while let Some(ch) = chars.next() {
        if ch != '\\' {
            let mut buf = [0u8; 4];
            out.extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
            continue;
        }
        match chars.next() {
            Some('r') => out.push(b'\r'),
            Some('n') => out.push(b'\n'),
            Some('0') => out.push(0),
            Some('\\') => out.push(b'\\'),
            Some('x') => {
                let hex: String = chars.by_ref().take(2).collect();
                out.push(u8::from_str_radix(&hex, 16).expect("\\x needs two hex digits"));
            }
            other => panic!("bad escape {other:?}"),
        }
    }
    out
}

/// The EHLO reply of `mx()` on plaintext without STARTTLS, as script lines.
pub(crate) const EHLO_MX: &str = "
    S: 250-mx.example
    S: 250-PIPELINING
    S: 250-SIZE 52428800
    S: 250-8BITMIME
    S: 250-ENHANCEDSTATUSCODES
    S: 250-SMTPUTF8
    S: 250-CHUNKING
    S: 250 BINARYMIME
";

/// The same over TLS: AUTH is offered.
pub(crate) const EHLO_MX_TLS: &str = "
    S: 250-mx.example
    S: 250-PIPELINING
    S: 250-SIZE 52428800
    S: 250-8BITMIME
    S: 250-ENHANCEDSTATUSCODES
    S: 250-SMTPUTF8
    S: 250-CHUNKING
    S: 250-BINARYMIME
    S: 250 AUTH PLAIN LOGIN
";

pub(crate) const GREETING_MX: &str = "S: 220 mx.example ESMTP ready";
