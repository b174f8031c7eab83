//! Sans-IO IMAP server sessions: IMAP4rev2 (RFC 9051), compatible with IMAP4rev1 (RFC 3501)
//! clients, over the mailbox store.
//!
//! A [`Session`] owns no socket and no runtime. The shell (`crates/server`) feeds it the bytes
//! it reads, writes what it polls, and answers the one decision that needs the directory
//! (`Event::Auth`). Commands run against the store synchronously inside [`Session::poll`]
//! through a [`Backend`]; the shell calls `poll` on a blocking thread.
//!
//! # Data flow
//!
//! ```text
//!  bytes ─feed─▶ Framer (lines + literals, every limit) ─▶ parse (imap-codec + the
//!  IMAP4rev2 forms it lacks) ─▶ command/<name>.rs ─▶ store::Store ─▶ responses ─poll─▶ Write
//! ```
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

mod command;
mod config;
mod event;
mod framer;
mod hibernate;
mod parse;
mod response;
mod selected;
mod session;

#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;

pub use config::{AUTOLOGOUT, Config, LITERAL_MINUS_BYTES_MAX, LOGIN_TIMEOUT};
pub use event::{AuthResult, Event};
pub use hibernate::Hibernated;
/// The data types of [`Mailstore`], for its implementations.
pub use mail_model;
/// The store's interface, which sessions run against (declared in `mail-model`, implemented
/// by the store itself).
pub use mail_model::Mailstore;
pub use session::{Backend, Quotas, Session, SpecialUses, Subscriptions};

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
