//! The operator's work on a running server, beside the CLI (which runs the same code when no
//! server runs, so both print the same):
//!
//! - [`request`]: the admin socket's request lines (`mailstow queue ...`, `store stats|fsck`,
//!   `user del|rename|list|show`, `auth blocked|unblock`, `mailbox import|export`, `backup`, and the
//!   CLI's "directory changed"), parsed and printed back the same way on both sides;
//! - [`client`]: the CLI's side of `<data_dir>/admin.sock`; [`socket`]: the server's;
//! - [`Operations`]: what each request does, over the handles it needs (the queue, the store,
//!   the directory, the accounts, the road into the store, the login throttle);
//! - [`format`]: what the commands print;
//! - [`migrate`]: maildir and mbox trees imported into the store (UIDs kept) and exported;
//! - [`backup`]: `mailstow backup`, `backup verify` and `restore` (docs/operations.md);
//! - [`pages`]: the web view's admin pages, their data and their actions.
//!
//! Boundary: above the mailboxes, delivery and the engines; below the server (whose web view
//! shows the admin pages) and the CLI. It serves no protocol connection.

pub mod backup;
pub mod client;
mod commands;
pub mod format;
pub mod migrate;
pub mod pages;
pub mod request;
pub mod socket;
mod spam;

pub use client::{request, request_streaming, socket_path};
pub use commands::{CertificateRenewal, LoginBlocks, Operations, Pending, ReportSending, execute};
pub use request::{REQUEST_BYTES_MAX, Request};
