//! Sans-IO POP3 server sessions: RFC 1939 (POP3), RFC 2449 (CAPA, response codes,
//! pipelining), RFC 2595 (STLS), RFC 3206 (`[SYS/TEMP]`, `[AUTH]`), RFC 5034 (SASL AUTH) with
//! the PLAIN mechanism of RFC 4616.
//!
//! A [`Session`] owns no socket, no clock and no store. The shell (`crates/server`) feeds it the
//! bytes it reads, writes the replies it polls, and answers the decisions it asks for. One
//! session is one connection.
//!
//! # States (RFC 1939 3)
//!
//! - **AUTHORIZATION**: after the greeting. The client may `CAPA`, `STLS`, `USER`/`PASS`,
//!   `AUTH PLAIN` or `QUIT`. Without TLS and without [`Config::plaintext_auth`], every way to
//!   log in answers `-ERR [AUTH]` and `CAPA` hides `USER` and `SASL` (RFC 2595 2.3). A failed
//!   login starts the state over: `PASS` needs a fresh `USER`.
//! - **TRANSACTION**: after a successful login, over the [`Maildrop`] the shell opened and locked.
//!   `STAT`, `LIST`, `UIDL`, `RETR`, `TOP`, `DELE`, `RSET`, `NOOP`, `CAPA`, `QUIT`. Message
//!   numbers are 1-based positions in the maildrop and never change during the session; `DELE`
//!   only marks.
//! - **UPDATE**: entered by `QUIT` in TRANSACTION, and only by `QUIT` (RFC 1939 3: a timeout or a
//!   dropped connection never expunges). The marked messages are expunged by the shell, then the
//!   session closes.
//!
//! # The decision protocol
//!
//! ```text
//!  shell                                   session
//!  new(config, tls)                  ──▶   queues "+OK <host> POP3 server ready"
//!  loop:
//!    poll() until None               ◀──   Reply(bytes) | StartTls | Auth | Retrieve | Update | Close
//!    if wants_input(): read, feed()  ──▶   frames lines, runs commands
//!    on Event::StartTls:  flush replies, handshake, tls_started()
//!    on Event::Auth:      check the credentials, lock + open the maildrop, auth_result()
//!    on Event::Retrieve:  read the message by UID, retrieve_result()
//!    on Event::Update:    expunge the UIDs durably, update_result()
//!    on Event::Close:     flush replies, close the connection, release the maildrop lock
//!    on no input for timeout(): timed_out()
//! ```
//!
//! While a decision is outstanding the session runs no further command; pipelined input waits
//! in its buffer (at most [`Config::input_buffer_max`] bytes beyond one partial line), and
//! [`Session::wants_input`] is false so the shell stops reading. An answer that does not match
//! the outstanding decision, or arrives after `Close`, is ignored.
//!
//! # Invariants
//!
//! - Input never panics the session. Until the session closes, every line gets exactly one
//!   reply (`+OK`, `-ERR`, or the `+ ` of a SASL continuation), in order; a line that needs a
//!   decision gets it after the answer. The line that reaches `errors_max` gets its own `-ERR`
//!   and then `-ERR too many errors`.
//! - Memory is bounded: input by `line_max` and `input_buffer_max`; queued replies by
//!   pausing pipelined commands until the shell polls.
//! - Output does not depend on how the input was split into `feed` calls, as long as the shell
//!   answers decisions and respects `wants_input` (STLS is the deliberate exception: bytes that
//!   arrive before the TLS handshake are discarded, RFC 2595 4, CVE-2011-0411).
//! - Text the shell hands in (`Temporary`, `retrieve_result` errors) is cut to one line of printable
//!   characters before it reaches the wire.
//!
//! # Layout
//!
//! `session.rs` holds a session's state and the primitives commands answer with; `command/`
//! the command table and the commands; `shell.rs` what the shell calls, and the input loop
//! that runs each line through the table. The SMTP and IMAP sessions are laid out the same
//! way.

mod command;
mod config;
mod error;
mod event;
mod input;
mod mailbox;
mod reply;
mod session;
mod shell;

pub use config::{AUTOLOGOUT, Config};
pub use event::{AuthResult, Event, Maildrop};
pub use session::Session;
