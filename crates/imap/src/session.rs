//! A session's state: where it is (RFC 9051 3), what the client enabled, the selected folder,
//! what waits for the shell or the store; and the primitives commands write their responses
//! with. What the shell calls (feed, poll, run, the answers to decisions) is in `shell.rs`;
//! the commands are in `command/`.

use std::collections::VecDeque;
use std::sync::Arc;

use crate::config::Config;
use crate::event::Event;
use crate::fetch_plan::Plan;
use crate::framer::Framer;
use crate::parse::Request;
use crate::selected::Selected;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum State {
    NotAuthenticated,
    Authenticated,
    Selected,
    Logout,
}

/// Extensions a client turned on with ENABLE (RFC 5161) or implicitly.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Enabled {
    /// RFC 7162 3.1: MODSEQ in every FETCH of flags from then on.
    pub(crate) condstore: bool,
    pub(crate) rev2: bool,
    /// RFC 6855 3: mailbox names in UTF-8 both ways, and APPEND's UTF8 data.
    pub(crate) utf8: bool,
    /// RFC 7162 3.2: SELECT (QRESYNC ...), FETCH (VANISHED), and expunges reported as
    /// VANISHED instead of EXPUNGE.
    pub(crate) qresync: bool,
}

impl Enabled {
    /// RFC 7162 3.1: a CONDSTORE-enabling command (FETCH or SEARCH with MODSEQ, STORE with
    /// UNCHANGEDSINCE) in a selected mailbox enables CONDSTORE; the first time, the server
    /// sends `OK [HIGHESTMODSEQ]` before the command's tagged answer (written to `out` here,
    /// ahead of the command's own responses).
    pub(crate) fn condstore_by_command(&mut self, highest_modseq: u64, out: &mut Vec<u8>) {
        if self.condstore {
            return;
        }
        self.condstore = true;
        out.extend_from_slice(
            format!("* OK [HIGHESTMODSEQ {highest_modseq}] Highest\r\n").as_bytes(),
        );
    }
}

/// A command that is waiting for something other than the next command line.
#[derive(Debug)]
pub(crate) enum Waiting {
    /// For the shell's `auth_result`.
    Auth { tag: String },
    /// For the client's SASL response line (RFC 9051 6.2.2).
    SaslResponse { tag: String },
    /// In IDLE until `DONE` (RFC 2177, RFC 9051 6.3.13).
    Idle { tag: String },
    /// For the shell's `compress_result` (RFC 4978).
    Compress { tag: String },
}

/// A FETCH that yields to the shell every `output_chunk_bytes`.
pub(crate) struct FetchWork {
    pub(crate) tag: String,
    pub(crate) plan: Plan,
    pub(crate) indexes: Vec<usize>,
    pub(crate) next: usize,
    pub(crate) uid: bool,
}

/// What the next `Session::run` does with the store: the session asked for it with
/// `Event::Storage`, and keeps no store between steps.
pub(crate) enum StorageStep {
    /// A login the shell accepted: the default folders exist, then the tagged OK.
    Login { tag: String },
    /// A command that reads or changes mail.
    Command { tag: String, request: Request },
    /// The rest of a FETCH, a chunk of output at a time.
    Fetch(FetchWork),
    /// In IDLE, the user's mail may have changed: tell the client (RFC 2177).
    IdleUpdates,
    /// `DONE` ended an IDLE: what changed, then its tagged OK.
    IdleDone { tag: String },
}

/// One IMAP connection's session, without the connection (see the crate docs).
pub struct Session {
    pub(crate) config: Arc<Config>,
    pub(crate) tls: bool,
    /// RFC 4978 COMPRESS=DEFLATE is on.
    pub(crate) compressed: bool,
    pub(crate) state: State,
    pub(crate) user: Option<String>,
    pub(crate) selected: Option<Selected>,
    pub(crate) enabled: Enabled,
    pub(crate) framer: Framer,
    pub(crate) out: Vec<u8>,
    pub(crate) events: VecDeque<Event>,
    pub(crate) waiting: Option<Waiting>,
    pub(crate) storage: Option<StorageStep>,
    pub(crate) errors: u32,
    pub(crate) closed: bool,
    /// IDLE commands entered: numbers the one in progress, for its deadline.
    pub(crate) idles: u64,
}

impl Session {
    /// The store's (UTF-8) name for a mailbox name as this client sends it: UTF-8 from an
    /// IMAP4rev2 client or one that enabled UTF8=ACCEPT (RFC 9051 5.1, RFC 6855 3), modified
    /// UTF-7 from any other (RFC 3501 5.1.3). `Err` is the tagged answer for a name that is
    /// not valid in the client's encoding.
    pub(crate) fn name_from_client(&self, wire: &str) -> Result<String, &'static str> {
        if self.enabled.rev2 || self.enabled.utf8 || wire.eq_ignore_ascii_case("INBOX") {
            return Ok(wire.to_string());
        }
        mail_model::mutf7::decode_strict(wire)
            .ok_or("NO [CANNOT] Mailbox name is not valid modified UTF-7")
    }

    /// A store name as this client reads it (see [`Session::name_from_client`]).
    pub(crate) fn name_to_client<'n>(&self, name: &'n str) -> std::borrow::Cow<'n, str> {
        if self.enabled.rev2 || self.enabled.utf8 {
            std::borrow::Cow::Borrowed(name)
        } else {
            std::borrow::Cow::Owned(mail_model::mutf7::encode(name, &[]))
        }
    }

    pub(crate) fn bye(&mut self, text: &str) {
        if !self.closed {
            self.untagged(text);
            self.close();
        }
    }

    /// Counts a BAD; too many in a row end the session (a client that is not speaking IMAP).
    pub(crate) fn error(&mut self) {
        self.errors += 1;
        if self.errors >= self.config.errors_max {
            self.untagged("BYE Too many invalid commands");
            self.close();
        }
    }

    pub(crate) fn close(&mut self) {
        self.state = State::Logout;
        self.closed = true;
        self.storage = None;
        if !self.out.is_empty() {
            self.events
                .push_back(Event::Reply(std::mem::take(&mut self.out)));
        }
        self.events.push_back(Event::Close);
    }

    pub(crate) fn untagged(&mut self, text: &str) {
        if self.closed {
            return;
        }
        self.out.extend_from_slice(b"* ");
        self.out.extend_from_slice(text.as_bytes());
        self.out.extend_from_slice(b"\r\n");
    }

    pub(crate) fn tagged(&mut self, tag: &str, text: &str) {
        if self.closed {
            return;
        }
        self.out.extend_from_slice(tag.as_bytes());
        self.out.push(b' ');
        self.out.extend_from_slice(text.as_bytes());
        self.out.extend_from_slice(b"\r\n");
    }

    pub(crate) fn capabilities(&self) -> String {
        let mut caps = String::from("IMAP4rev1 IMAP4rev2");
        if self.state == State::NotAuthenticated {
            if !self.tls && self.config.starttls {
                caps.push_str(" STARTTLS");
            }
            if self.tls || self.config.plaintext_auth {
                caps.push_str(" AUTH=PLAIN SASL-IR");
            } else {
                caps.push_str(" LOGINDISABLED");
            }
        }
        // RFC 7888: before login only LITERAL- (non-synchronising literals up to 4096
        // octets); after it, LITERAL+.
        caps.push_str(if self.state == State::NotAuthenticated {
            " LITERAL-"
        } else {
            " LITERAL+"
        });
        caps.push_str(
            " ENABLE IDLE ID NAMESPACE UNSELECT UIDPLUS MOVE CHILDREN SPECIAL-USE \
             LIST-EXTENDED LIST-STATUS ESEARCH MULTIAPPEND CATENATE BINARY CONDSTORE STATUS=SIZE \
             SORT SORT=DISPLAY THREAD=ORDEREDSUBJECT THREAD=REFERENCES QRESYNC UTF8=ACCEPT SEARCHRES ESORT \
             CONTEXT=SEARCH CREATE-SPECIAL-USE",
        );
        caps.push_str(&format!(" APPENDLIMIT={}", self.config.literal_bytes_max));
        if self.state != State::NotAuthenticated {
            // RFC 9208 3.2, 5.1, 5.2: the resources GETQUOTA and GETQUOTAROOT report.
            caps.push_str(" QUOTA QUOTA=RES-STORAGE QUOTA=RES-MESSAGE");
            // RFC 4978: after login only (compression before it would only help guessers).
            caps.push_str(" COMPRESS=DEFLATE");
        }
        caps
    }
}

/// Text handed in by the shell, cut to one printable line.
pub(crate) fn one_line(text: &str) -> String {
    text.chars()
        .take_while(|c| *c != '\r' && *c != '\n')
        .filter(|c| !c.is_control())
        .take(200)
        .collect()
}
