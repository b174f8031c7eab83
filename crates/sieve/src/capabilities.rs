//! The capabilities this interpreter implements.

/// The extensions this interpreter implements, in the order the `SIEVE` capability of
/// ManageSieve (RFC 5804 1.7) lists them.
pub const EXTENSIONS: &[&str] = &[
    "fileinto",
    "reject",
    "ereject",
    "envelope",
    "encoded-character",
    "variables",
    "vacation",
    "vacation-seconds",
    "relational",
    "comparator-i;ascii-numeric",
    "imap4flags",
    "subaddress",
    "body",
    "date",
    "index",
    "copy",
    "mailbox",
    "include",
    "editheader",
    "duplicate",
    "environment",
    "ihave",
    "spamtest",
    "spamtestplus",
    "virustest",
    "regex",
];
