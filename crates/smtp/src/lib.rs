//! Sans-IO SMTP server sessions: mail exchange (RFC 5321), submission (RFC 6409) and local
//! delivery (LMTP, RFC 2033), with PIPELINING (RFC 2920), SIZE (RFC 1870), 8BITMIME
//! (RFC 6152), CHUNKING and BINARYMIME (RFC 3030), ENHANCEDSTATUSCODES (RFC 2034, RFC 3463),
//! SMTPUTF8 (RFC 6531), STARTTLS (RFC 3207) and AUTH PLAIN/LOGIN
//! (RFC 4954, RFC 4616).
//!
//! A `Session` has no socket, clock, thread or runtime. The shell (`crates/server`) feeds it
//! the bytes it reads, writes the replies it gets, keeps the timer, and answers its
//! questions. Command lines are parsed by `smtp_proto`; everything else is here.
//!
//! # The shell's loop
//!
//! ```text
//! loop {
//!     while let Some(event) = session.poll() { handle(event) }   // Reply: write it
//!     if session.wants_input() { read with session.timeout(); session.feed(bytes) }
//!     // on timer expiry: session.timed_out()
//! }
//! ```
//!
//! # The decision protocol
//!
//! The session decides everything about syntax, sequence and limits; the shell decides
//! policy (who is local, relaying, quota, passwords, durability). Where policy is needed the
//! session emits a question and stops processing input until it gets the answer:
//!
//! | event       | answer             | the session then sends                         |
//! |-------------|--------------------|------------------------------------------------|
//! | `Auth`      | `auth_result`      | 235, 535 or 454                                 |
//! | `MailFrom`  | `mail_result`      | 250 or the rejection                            |
//! | `RcptTo`    | `rcpt_result`      | 250 or the rejection                            |
//! | `Message`   | `message_result`   | 250 or the rejection; in LMTP one per recipient |
//! | `StartTls`  | `tls_started`      | nothing: the client speaks first (EHLO)         |
//!
//! **The guarantee:** the `250` after the data is sent only from `message_result`, which the
//! shell calls once the queue made the message durable.
//!
//! # Phases
//!
//! - `Command`: reading command lines (at most `command_line_max` bytes, CRLF-terminated).
//!   MAIL, RCPT and AUTH with complete credentials go to `Pending`; AUTH without them goes to
//!   `Sasl` for the `334` exchange; DATA answers `354` and goes to `Data`; BDAT n goes to
//!   `Bdat` for exactly n bytes.
//! - `Data` ends at CRLF.CRLF and `Bdat` after n bytes. A LAST chunk or the end of the data
//!   either refuses the message (one reply, per recipient in LMTP) and goes back to `Command`,
//!   or emits `Message` and goes to `Pending`. Other chunks are answered (250 or 552) at once.
//! - `Pending`: input is buffered, not processed; the answer sends the reply, back to `Command`.
//! - STARTTLS (`220`): `AwaitingTls`, input discarded; `tls_started` goes back to `Command`
//!   with EHLO, AUTH and the transaction forgotten.
//! - QUIT (`221`), a timeout (`421 4.4.2`), `errors_max` or `commands_without_progress_max`
//!   (`421 4.7.0`): `Closed`.
//!
//! # Defences and their replies
//!
//! | input                                             | reply                           |
//! |---------------------------------------------------|---------------------------------|
//! | command line over `command_line_max`              | `500 5.5.6`, rest of line dropped |
//! | bare CR or LF, NUL, or non-UTF-8 in a command     | `500 5.5.2`                     |
//! | bare CR or LF in message text (after the end)     | `550 5.5.2`, not delivered      |
//! | NUL in message text (after the end)               | `554 5.6.0`, not delivered      |
//! | text line over `text_line_max` (after the end)    | `500 5.5.6`, not delivered      |
//! | SIZE= or content over `message_bytes_max`         | `552 5.3.4` (content read to the end) |
//! | more than `recipients_max` recipients             | `452 4.5.3`                     |
//! | `errors_max` protocol errors                      | that error's reply, `421 4.7.0`, Close |
//! | `commands_without_progress_max` idle commands     | `421 4.7.0` for the next one, Close |
//! | content past the shared `inflight` budget         | `452 4.3.1` (content read to the end; a BDAT chunk at its end) |
//! | a deadline from `deadlines()` passed              | `421 4.4.2`, Close               |
//! | a 421 from the shell (to any decision)            | that reply, Close (RFC 5321 3.8) |
//!
//! BINARYMIME content (BDAT only) is exempt from the text checks.
//!
//! # Deadlines
//!
//! The idle timeout (`timeout()`) restarts with every byte, so on its own a client sending one
//! byte a minute would hold the connection forever. `deadlines()` names what must be complete
//! in total: the login on a submission port (`login_deadline`), the command line being
//! received (`command_deadline` from its first byte), the message transfer (`DATA` to the
//! final dot, a `BDAT` transaction from its first chunk to `LAST`: `transfer_deadline` plus a
//! second per `transfer_rate_min` bytes, at most `transfer_deadline_max`). Each comes with a
//! step number that changes when a new step starts; the shell times each from when it first
//! sees it and calls `deadline_passed()`.

//! # Invariants
//!
//! - No input makes the session panic, and the output does not depend on how the input was
//!   split into `feed` calls.
//! - Unprocessed input is bounded: it only accumulates behind a pending decision, when
//!   `wants_input` is false; a command line longer than `Config::command_line_max` (or
//!   `input_buffer_max`) is an error, not a stall. Message content is bounded by
//!   `message_bytes_max`; beyond it bytes are counted and dropped.
//! - Only CRLF ends a line, and only CRLF.CRLF ends the data (RFC 5321 2.3.8); messages with
//!   bare CR or LF are refused after their end, never delivered.
//! - Input after STARTTLS is never executed (CVE-2011-0411).
//! - After `Event::Close`, `feed` is ignored and `poll` returns `None`.
//!
//! # Layout
//!
//! `session.rs` holds a session's state and the primitives commands answer with; `command/`
//! the commands; `shell.rs` what the shell calls, and the input loop that hands lines, data
//! and chunks to the commands. The IMAP and POP3 sessions are laid out the same way.

mod command;
mod config;
mod content;
mod event;
mod line;
mod received;
mod reply;
mod session;
mod shell;

pub use config::{Config, Mode, Peer};
pub use event::{Envelope, Event};
pub use received::received_header;
pub use reply::{AuthResult, Reply, Verdict};
pub use session::{Refusal, Session, Stage};
