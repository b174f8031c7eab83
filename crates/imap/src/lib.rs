//! Sans-IO IMAP server sessions: IMAP4rev2 (RFC 9051), compatible with IMAP4rev1 (RFC 3501)
//! clients, over the mailbox store.
//!
//! A [`Session`] owns no socket, no runtime, no store and no clock. Like the SMTP and POP3
//! sessions, it takes the bytes the shell (`crates/server`) reads ([`Session::feed`]) and
//! answers with events ([`Session::poll`]): `Reply` bytes to write, and decisions the shell
//! answers (`Auth` with `auth_result`, `Compress` with `compress_result`, `StartTls` with
//! `tls_started`). A step that reads or changes mail is a decision too: `Event::Storage`,
//! answered by [`Session::run`] with a [`Backend`] (the [`Mailstore`] and the directory's
//! subscriptions, special uses and quotas) and the time; the shell runs it where blocking is
//! fine. Nothing before login, and no command that touches no mail, asks for it.
//!
//! # Data flow
//!
//! ```text
//!  bytes ─feed─▶ Framer (lines + literals, every limit) ─▶ parse (imap-codec + the
//!  IMAP4rev2 forms it lacks) ─▶ command::run ─(mail? Event::Storage ... run)─▶
//!  command/<name>.rs ─▶ Mailstore ─▶ responses ─poll─▶ Reply
//! ```
//!
//! # Layout
//!
//! `session.rs` holds a session's state and the primitives commands write with; `command/`
//! the commands (one file each); `shell.rs` what the shell calls, which runs the commands;
//! `backend.rs` what a storage step works on; `selected.rs` the selected folder as the client
//! knows it; `fetch_plan.rs` what a FETCH asks for, kept across its steps.
//!
//! # Invariants
//!
//! - Input never panics the session; malformed input gets BAD, an oversized line, literal or
//!   nesting gets BAD (`[TOOBIG]` for literals) without buffering the excess.
//! - A session only sees its own user's folders: every store call names `Session::user`.
//! - Message sequence numbers change only when this session writes EXPUNGE; EXPUNGE is never
//!   written during FETCH, STORE or SEARCH by sequence number (RFC 9051 7.5.1).
//! - FETCH output is produced in chunks of `output_chunk_bytes`, so memory stays bounded
//!   whatever the folder size.
//! - MIME structure (ENVELOPE, BODYSTRUCTURE, part offsets) comes from the store's summary,
//!   computed once at arrival; FETCH never re-parses a message that has one.

mod backend;
mod command;
mod config;
mod event;
mod fetch_plan;
mod framer;
mod hibernate;
mod parse;
mod response;
mod selected;
mod session;
mod shell;

#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;

pub use backend::{Backend, Filing, NoFiling, Quotas, SpecialUses, Subscriptions};
pub use config::{AUTOLOGOUT, Config, LITERAL_MINUS_BYTES_MAX, LOGIN_TIMEOUT};
pub use event::{AuthResult, Event};
pub use hibernate::Hibernated;
/// The data types of [`Mailstore`], for its implementations.
pub use mail_model;
/// The store's interface, which sessions run against (declared in `mail-model`, implemented
/// by the store itself).
pub use mail_model::Mailstore;
pub use session::Session;

#[cfg(test)]
mod tests;

/// The sans-IO boundary: the store is a dev-dependency only (the transcripts' real backend).
#[cfg(test)]
#[test]
fn the_crate_does_not_depend_on_the_store() {
    let manifest = include_str!("../Cargo.toml");
    let dependencies = manifest
        .split("\n[")
        .find(|section| section.starts_with("dependencies]"))
        .expect("a [dependencies] section");
    for line in dependencies.lines() {
        let name = line.split(['=', '.', ' ']).next().unwrap_or("");
        assert!(
            !["store", "disk", "tokio", "queue", "directory"].contains(&name),
            "imap depends on {name}"
        );
    }
}
