//! The connection shell: the tokio side around the sans-IO protocol crates. Listeners accept
//! connections under shared limits and run each under one driver that moves bytes between the
//! socket and a protocol session (`smtp::Session`, `pop3::Session`, `imap::Session`,
//! `managesieve::Session`),
//! answering the session's decisions (authenticate, accept this recipient, make this message
//! durable) from what the node hands the shell ([`Parts`]): the directory cache, the queue, the
//! store, the mailboxes' sessions and gate, the cluster. No protocol logic lives here, and
//! nothing that is not serving a connection: the node that opens the engines and starts
//! delivery, the cluster's tasks and the admin socket is the CLI's (`mailstow serve`).
//!
//! Data flow: SMTP/LMTP `DATA` → `queue::Queue::enqueue_with` → the reply `250` only from the
//! queue's commit callback (guarantee 1) → delivery threads (the `delivery` crate) → the
//! store → POP3 and IMAP. ManageSieve edits users' Sieve scripts in the directory. The queue and the store are synchronous engines; the async side
//! reaches them through callbacks (enqueue) and `spawn_blocking` (reads, expunges).
//!
//! Rooms: [`Service`] and [`ServerConfig`] (what a listener speaks, what the shell is
//! configured with); `live` (what a reload changes) and `reload`; `shell` (what every
//! connection shares); `accept` (a listener's loop); `driver` (the one connection driver) with
//! `stream`, `connections`, `login`, `park` (the parking lot for IMAP IDLE) and `splice` (a
//! session handed to its user's node); one module per protocol shell (`smtp_conn`,
//! `pop3_conn`, `imap_conn`, `managesieve_conn`) and the web view (`web`); `metrics`, `tls`, `throttle`, `dkim`,
//! `quota`, `enqueue`, `lock`; `reporting` (TLS-RPT and DMARC reports counted, sent and taken in); and `start` (the shell started over a node's parts).

mod accept;
mod certificates;
mod config;
mod connections;
mod dkim;
mod driver;
mod enqueue;
mod imap_conn;
mod live;
mod lock;
mod login;
mod managesieve_conn;
mod metrics;
mod outbox;
mod park;
mod pop3_conn;
mod published;
mod quota;
mod reload;
mod reporting;
mod service;
mod shell;
mod smtp_conn;
mod splice;
mod start;
mod stream;
mod throttle;
mod tls;
mod web;

pub use certificates::Renewals;
pub use config::{Direct, MTA_STS_MAX_AGE, MtaSts, ServerConfig, raise_file_limit, validate};
pub use health::{Component, Health};
pub use lock::DataDirLock;
pub use outbox::QueueOutbox;
pub use park::Parking;
pub use reload::Reloaded;
pub use reporting::{LOG_INTERVAL, ROWS_QUEUED_MAX, ReportSender, Reports, SEND_INTERVAL};
pub use service::Service;
pub use start::{
    Counters, Listeners, OPTIONAL_RETRY_MAX, OPTIONAL_RETRY_MIN, Parts, Running, Unbound, bind,
    start,
};
pub use throttle::{Throttle, ThrottleConfig};
pub use tls::{Certificate, TlsSource};
