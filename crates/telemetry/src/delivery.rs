//! What delivery tells the operator: [`crate::Telemetry`] implements it, writing one mail log
//! line per call and moving the metrics of the same event, so the line formats and field
//! names live beside every other event's. A trait so that delivery's unit tests can record
//! the events instead.

use std::time::Duration;

/// One call per event; every call is one line of the mail log.
pub trait DeliveryEvents: Send + Sync {
    /// A recipient's copy was appended to `folder` of its mailbox as `uid` (`event=delivered`).
    fn delivered_local(&self, queue_id: u64, to: &str, folder: &str, uid: u32, delay: Duration);
    /// A copy another node handed over (`origin`: that node, its queue id and the arrival)
    /// was appended here to `folder` as `uid` (`event=delivered`).
    fn delivered_handed_over(
        &self,
        origin: &str,
        to: &str,
        folder: &str,
        uid: u32,
        delay: Duration,
    );
    /// A remote server (`relay`, as `host[address]:port`) took a recipient's copy
    /// (`event=delivered`).
    fn delivered_remote(&self, queue_id: u64, to: &str, relay: &str, delay: Duration);
    /// A recipient failed temporarily and is tried again at `next_attempt_ms`
    /// (`event=deferred`).
    fn deferred(&self, queue_id: u64, to: &str, relay: &str, reply: &str, next_attempt_ms: u64);
    /// A recipient failed for good; its sender will get a notification (`event=bounced`).
    fn bounced(&self, queue_id: u64, to: &str, relay: &str, reply: &str);
    /// The notification about message `queue_id` was put in its sender's INBOX as `uid`
    /// (`event=dsn`).
    fn dsn(&self, queue_id: u64, to: &str, uid: Option<u32>);
    /// The notification for a sender elsewhere was queued as message `dsn_id` (`event=dsn`).
    fn dsn_queued(&self, queue_id: u64, to: &str, dsn_id: u64);
    /// The notification could not be stored now; it is tried again later
    /// (`event=dsn_deferred`, a warning).
    fn dsn_deferred(&self, queue_id: u64, to: &str, error: &store::StoreError);
    /// Recording the outcomes of message `queue_id` failed (`event=queue_error`, a warning).
    fn queue_error(&self, queue_id: u64, error: &queue::QueueError);
    /// A delivery thread stopped on a queue error; the server must restart to recover
    /// (`event=delivery_stopped`, an error).
    fn stopped(&self, error: &queue::QueueError);
    /// Delivery paused because the data directory's file system is below its free-space
    /// reserve (`paused: true`, once when it starts) or resumed (`paused: false`).
    fn paused_for_space(&self, paused: bool, why: &str);
    /// A user's Sieve rules took `action` on a copy (`event=sieve`): `target` is the folder
    /// (keep, fileinto), the address (redirect, vacation) or the reason (reject, ereject,
    /// vacation_skipped).
    fn sieve_action(&self, copy: SieveCopy<'_>, user: &str, action: &'static str, target: &str);
    /// A user's Sieve rules failed on a copy, which was kept in INBOX (`event=sieve_error`,
    /// a warning).
    fn sieve_error(&self, copy: SieveCopy<'_>, user: &str, error: &str);
}

/// The copy a Sieve line is about: a queued message here, or one another node handed over.
#[derive(Debug, Clone, Copy)]
pub enum SieveCopy<'a> {
    Queued(u64),
    HandedOver(&'a str),
    /// A message still arriving (refused before its 250), by its session's id.
    Arriving(&'a str),
}
