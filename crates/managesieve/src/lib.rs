//! Sans-IO ManageSieve server sessions: RFC 5804 (ManageSieve) with SASL PLAIN (RFC 4616)
//! and STARTTLS.
//!
//! A [`Session`] owns no socket, no clock and no storage. The shell feeds it the bytes it
//! reads, writes the replies it polls, and answers the decisions it asks for. One session is
//! one connection.
//!
//! # States (RFC 5804 2)
//!
//! - **Non-authenticated**: after the greeting (the capability response and `OK`, RFC 5804
//!   1.7) and after UNAUTHENTICATE. `CAPABILITY`, `NOOP`, `STARTTLS`, `AUTHENTICATE` and
//!   `LOGOUT`; the script commands answer `NO "Authenticate first"`. Without TLS and without
//!   [`Config::plaintext_auth`], `SASL` is announced empty and AUTHENTICATE answers
//!   `NO (ENCRYPT-NEEDED)`.
//! - **Authenticated**: `HAVESPACE`, `PUTSCRIPT`, `LISTSCRIPTS`, `SETACTIVE`, `GETSCRIPT`,
//!   `DELETESCRIPT`, `RENAMESCRIPT`, `CHECKSCRIPT`, `UNAUTHENTICATE`, and the commands of both
//!   states. `OWNER` is announced.
//!
//! # The decision protocol
//!
//! ```text
//!  shell                                   session
//!  new(config, tls)                  ──▶   queues the capabilities and OK
//!  loop:
//!    poll() until None               ◀──   Reply(bytes) | StartTls | Authenticate | ListScripts
//!                                          | GetScript | PutScript | CheckScript | HaveSpace
//!                                          | SetActive | DeleteScript | RenameScript | Close
//!    if wants_input(): read, feed()  ──▶   frames commands, runs them
//!    on a decision: answer it (below), then poll again
//!    on no input for timeout(): timed_out(); on a deadline from deadlines(): deadline_passed()
//! ```
//!
//! While a decision is outstanding the session runs no further command; pipelined input
//! waits in its buffer and [`Session::wants_input`] is false. An answer that does not match
//! the outstanding decision, or arrives after `Close`, is ignored.
//!
//! # What the shell answers (the crate's README)
//!
//! | Event | The shell | Answer |
//! |---|---|---|
//! | `StartTls` | flushes the replies, runs the TLS handshake (drops the connection if it fails) | `tls_started()` |
//! | `Authenticate { authcid, password, authzid, .. }` | verifies the password; if `authzid` is not empty (only with `Config::authzid_allowed`), decides whether `authcid` may act as it; finds where the user's scripts are | `authenticated(AuthResult)`: `Success { user }` (the authorization identity; later events carry it), `BadCredentials` (counted), `TooWeak`, `TransitionNeeded`, `Referral(sieve_url)`, `Unavailable(text)`; or `hand_over()` to proxy the connection |
//! | `ListScripts { user }` | lists the user's scripts | `scripts_listed(Ok(vec![ScriptInfo { name, active }]))` |
//! | `GetScript { user, name }` | reads the script | `script_got(Ok(bytes))`, `Err(Failure::NonExistent)` |
//! | `PutScript { user, name, script }` | compiles it (`sieve::compile`); if it compiles and fits the quota, stores it, replacing a script of that name (active or not) | `script_put(Ok(None))`, `Ok(Some(warnings))`, `Err(Failure::Invalid(compile_error.to_string()))`, `Err(Failure::Quota(..))` |
//! | `CheckScript { user, script }` | compiles it, stores nothing | `script_checked(..)`, like `script_put` |
//! | `HaveSpace { user, name, size }` | would a script of `size` bytes under `name` fit the quota (counting the script it would replace)? | `space_checked(Ok(()))`, `Err(Failure::Quota(Quota::MaxScripts))`... |
//! | `SetActive { user, name }` | makes `name` the active script (`None`: none active) | `active_set(Ok(()))`, `Err(Failure::NonExistent)` |
//! | `DeleteScript { user, name }` | deletes it unless it is the active one | `script_deleted(Ok(()))`, `Err(Failure::Active)`, `Err(Failure::NonExistent)` |
//! | `RenameScript { user, from, to }` | renames it; an active script stays active | `script_renamed(Ok(()))`, `Err(Failure::NonExistent)`, `Err(Failure::AlreadyExists)` |
//! | `Close` | flushes the replies, closes the connection | — |
//!
//! Every storage answer can be `Err(Failure::Unavailable(text))` when storage is down:
//! `NO (TRYLATER) "text"`. Text the shell hands in is cut to 4 KiB; a compile error with
//! line breaks goes to the client as a literal. The shell also calls `timed_out`,
//! `deadline_passed`, `shutting_down`, `revoked` and `moving`; each sends `BYE` and closes.
//!
//! # Limits and deadlines
//!
//! Every size a client controls has a named bound in [`Config`]: `line_max` (a command
//! without its script), `script_bytes_max` (a script literal, HAVESPACE's size: `NO
//! (QUOTA/MAXSIZE)`), `script_name_bytes_max`, `arguments_max`, `input_buffer_max`,
//! `errors_max`, `auth_failures_max`, `commands_before_login_max`. Every step a client can
//! drag out is named in [`Session::deadlines`] (the shell owns the clock and times each
//! step from when it first sees it, as for the other protocols): the login deadline (phase),
//! the command line (request), the literal (transfer); and [`Session::timeout`] is the idle
//! timeout.
//!
//! RFC 5804 1.3's `SASL` response code carries a mechanism's final server data; PLAIN has
//! none, so it is never sent. `LANGUAGE` (RFC 5804 1.7) is not announced.
//!
//! # Invariants
//!
//! - Input never panics the session. Until the session closes, every command gets exactly
//!   one response (`OK`, `NO`, or `BYE`; AUTHENTICATE without an initial response first gets
//!   the empty challenge `""`), in order.
//! - Memory is bounded: [`Session::buffered_len`] never exceeds [`Config::input_bound`]
//!   (unread input, `line_max` for a command, `script_bytes_max` for its script); a refused
//!   literal is read and dropped, never kept; queued replies by pausing pipelined commands
//!   until the shell polls.
//! - Output does not depend on how the input was split into `feed` calls, as long as the
//!   shell answers decisions and respects `wants_input` (STARTTLS is the deliberate
//!   exception: bytes that arrive before the TLS handshake are discarded, CVE-2011-0411).
//!
//! # Layout
//!
//! `input.rs` frames commands (quoted strings, literals, bounds); `session.rs` holds a
//! session's state and the primitives commands answer with; `command/` the command table and
//! the commands; `shell.rs` what the shell calls, and the input loop. The POP3, SMTP and IMAP
//! sessions are laid out the same way.

mod command;
mod config;
mod error;
mod event;
mod input;
mod reply;
mod session;
mod shell;

pub use config::Config;
pub use event::{AuthResult, Event, Failure, Quota, ScriptInfo};
pub use session::Session;
