//! Maildir and mbox, read and written: what `mailstow mailbox import|export` moves between the
//! store and the files other mail software keeps (docs/migration.md).
//!
//! - [`maildir`]: Maildir++ trees (INBOX at the top, `.Sub.Folder` directories, names in
//!   modified UTF-7), flags from the `:2,` info of file names (`D F P R S T`, and Dovecot's
//!   keyword letters `a`–`z` through `dovecot-keywords`), UIDs and UIDVALIDITY from Dovecot's
//!   `dovecot-uidlist` (versions 1, 2 and 3; Courier's `courierimapuiddb` is version 1), the
//!   internal date from the file's mtime. The writer produces the same, uidlist included.
//! - [`mbox`]: From_-separated files (mboxrd or mboxo unquoting), the internal date from the
//!   From_ line, flags and keywords from `Status`, `X-Status` and `X-Keywords`, UIDs from
//!   Dovecot's `X-UID` and `X-IMAPbase`; a directory of mbox files is a folder tree (Thunderbird's
//!   `.sbd` directories or plain subdirectories). The writer produces mboxrd.
//! - [`lines`]: line endings (files hold LF, the store CRLF) and header fields.
//!
//! Pure file formats: no store, no async. Readers never panic on malformed input (property
//! tests feed them random bytes) and bound what they buffer.

pub mod date;
pub mod lines;
pub mod maildir;
pub mod mbox;
/// Dovecot names Maildir++ folder directories in modified UTF-7.
pub use mail_model::mutf7;
pub mod uidlist;

/// The IMAP system flags a message carries in a file (`\Recent` is not kept anywhere).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Flags {
    pub seen: bool,
    pub answered: bool,
    pub flagged: bool,
    pub deleted: bool,
    pub draft: bool,
}

/// The keyword a maildir `P` ("passed") flag stands for: RFC 5550's `$Forwarded`.
pub const FORWARDED: &str = "$Forwarded";
