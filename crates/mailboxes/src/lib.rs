//! Access to users' mailboxes while the server runs, in one place for every part that
//! touches them (the protocol sessions, delivery, the cluster, the operator's commands):
//!
//! - [`Sessions`]: who is logged in. Every authenticated session holds a [`Membership`];
//!   IDLE wakes through it, the per-user IMAP limit is kept by it, and ending a user's
//!   sessions ([`Sessions::revoke`]) waits for it.
//! - [`Gate`]: who may write. New mail is written under the gate held shared; removing,
//!   renaming or freezing a user takes it exclusively once; a held mailbox gets no new mail.
//! - [`Deposit`]: the one road into the store for new mail (queue delivery, hand-overs,
//!   notifications, the web view's Sent copy, imports), where it is checked against the
//!   gate, group-committed and logged.
//! - [`Accounts`]: deleting and renaming an account's mail in the order that makes it safe
//!   (the directory's intent, the sessions ended, the store under the exclusive gate),
//!   resumed at start after a crash.
//!
//! Boundary: below the server, the cluster and delivery; knows the store, the directory and
//! the telemetry, no protocol and no socket.

mod accounts;
mod deposit;
mod gate;
pub mod rules;
mod sessions;
#[cfg(test)]
mod tests;

pub use accounts::Accounts;
pub use deposit::{Copy, Deposit, Deposited, Origin};
pub use gate::{Exclusive, Gate, Shared};
pub use rules::Rules;
pub use sessions::{Ending, Membership, Protocol, Refused, Revocation, Sessions, Waker};
