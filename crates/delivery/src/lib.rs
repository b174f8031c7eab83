//! Delivery: what happens to a message after the queue made it durable.
//!
//! Delivery threads ([`Delivery`]) lease batches of adjacent queued messages, ask a
//! [`Router`] where each recipient's copy goes, deposit the local copies in the store in one
//! batch, send the remote ones over SMTP to a smarthost or the domains' exchangers
//! ([`outbound`]), record every outcome with one queue commit, and turn permanent failures
//! into delivery status notifications ([`bounce`]). Everything it tells the operator goes
//! through `telemetry::DeliveryEvents` (the `telemetry` crate's mail log and metrics).
//!
//! Boundary: this crate knows the queue, the directory's cache (routes are decided here from
//! it, the gate and this node's name: [`DirectoryRouter`]), the one road into the store
//! (`mailboxes::Deposit`), outbound SMTP and the cluster's peers; it calls nothing above it,
//! runs no listener and reads no configuration file.

pub mod bounce;
pub mod outbound;
pub mod peer;
mod route;
mod wakeup;
mod worker;

pub use outbound::{Relay, RelayTls, TlsResults};
pub use route::{DirectoryRouter, PROBE_PERIOD, PROBE_TIMEOUT, Route, Router, wake_on_return};
pub use wakeup::{Paused, Wakeup};
pub use worker::{Delivery, Outbound, Path, RETRY_FOR, backoff, final_delivery_fields, now_ms};
