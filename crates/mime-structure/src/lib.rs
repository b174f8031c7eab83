//! A message's MIME structure in the forms an IMAP server answers with: the ENVELOPE, BODY and
//! BODYSTRUCTURE wire strings (RFC 9051 7.5.2, RFC 3501 7.4.2) and the byte ranges of every
//! addressable part (FETCH BODY[section], RFC 9051 6.4.5).
//!
//! Why a crate of its own: parsing MIME is the expensive part of FETCH, and its result never
//! changes for a stored message. So the server calls [`Structure::parse`] once, when mail
//! arrives, keeps [`Structure::to_bytes`] next to the message, and answers every later FETCH
//! from [`Structure::from_bytes`] plus byte ranges of the original content, without parsing
//! the message again.
//!
//! mail-parser does the MIME parsing; this crate only walks its part tree and writes IMAP.
//! Everything is sans-IO and pure.
//!
//! Hostile mail cannot make the stored form large or the walk deep: parts nested deeper than
//! [`DEPTH_MAX`] are opaque leaves, at most [`PARTS_MAX`] parts are described (fewer if
//! BODYSTRUCTURE would outgrow [`STRUCTURE_BYTES_MAX`]), and header values and address lists
//! are capped by [`FIELD_BYTES_MAX`] and [`LIST_BYTES_MAX`].

mod binary;
mod build;
mod envelope;
mod format;
mod limits;
mod preview;
mod structure;
mod wire;

pub use binary::{UnknownCte, decode_binary, filter_header_fields};
pub use format::DecodeError;
pub use limits::{DEPTH_MAX, FIELD_BYTES_MAX, LIST_BYTES_MAX, PARTS_MAX, STRUCTURE_BYTES_MAX};
pub use preview::{PREVIEW_CHARS_MAX, Preview};
pub use structure::{Encoding, Part, Structure};
pub use wire::write_nstring;

#[cfg(test)]
mod tests;
