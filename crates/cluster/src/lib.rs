//! The cluster seen from one node (docs/cluster.md; the cluster-email-system seed): users
//! sharded over nodes that share one directory in PostgreSQL, any node serving any user.
//!
//! - [`node`]: this node, its secret, and where a user's mailbox is (here, on a node that is
//!   up, or unavailable) from the directory cache and its leases; [`Suspects`], nodes that
//!   did not answer a moment ago (the proxy's and delivery's hand-over keep one each).
//! - [`preauth`]: the token a node logs a user in with on the owner, bound to that TLS
//!   connection, MACed under the cluster secret.
//! - [`proxy`]: IMAP and POP3 connections opened and pre-authenticated towards the owner
//!   (the server's shell splices the client to them).
//! - [`handover`]: the owner's side of mail handed over by another node (ownership at the
//!   routed epoch, the record of copies already stored, one commit for concurrent
//!   hand-overs); the sending side is delivery's (`delivery::peer`).
//! - [`moves`]: a user's mailbox moved between nodes while both run.
//! - [`forward`]: the web view's requests forwarded to the user's node.
//!
//! Boundary: below the server (which drives logins and sessions through it) and delivery
//! (which hands copies over); above the mailboxes' road into the store, the directory and
//! the store. It holds no listener of its own.

pub mod forward;
pub mod handover;
pub mod moves;
pub mod node;
pub mod preauth;
pub mod proxy;
mod record;
mod suspects;

pub use handover::HandOver;
pub use moves::Moves;
pub use node::{Cluster, ClusterConfig, Home, LEASE_RENEW, LEASE_TTL};
pub use preauth::{MOVE_AUTHCID_PREFIX, server_exporter};
pub use proxy::{Handover, Upstream};
pub use record::migrate as migrate_delivered_record;
pub use suspects::{SUSPECT_FOR, Suspects};
