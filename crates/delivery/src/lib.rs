//! Delivery: what happens to a message after the queue made it durable.
//!
//! Delivery threads ([`Delivery`]) lease batches of adjacent queued messages, ask a
//! [`Router`] where each recipient's copy goes, append the local copies to the store in one
//! batch, send the remote ones over SMTP to a smarthost or the domains' exchangers
//! ([`outbound`]), record every outcome with one queue commit, and turn permanent failures
//! into delivery status notifications ([`bounce`]). Everything it tells the operator goes
//! through `telemetry::DeliveryEvents` (the `telemetry` crate's mail log and metrics).
//!
//! Boundary: this crate knows the queue, the store and outbound SMTP. It learns routes from a
//! `Router` implemented by whoever runs it (the server, from its directory cache); it runs no
//! listener and reads no configuration file.

pub mod bounce;
pub mod outbound;
pub mod peer;
mod route;
mod worker;

pub use outbound::{Relay, RelayTls};
pub use route::{Route, Router};
pub use worker::{
    Delivery, Outbound, Path, RETRY_FOR, Wakeup, backoff, final_delivery_fields, now_ms,
};
