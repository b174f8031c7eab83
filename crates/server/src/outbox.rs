//! Mail users' rules send (a Sieve `redirect`, a vacation reply) enters the queue here, like
//! every message this server accepts: durable before the rule's copy is stored, logged
//! `accepted` (proto `sieve`), delivery woken.
//!
//! A redirect keeps the message as it is (RFC 5228 4.2) with its reverse path rewritten by
//! SRS into the user's domain, so the next hop's SPF check passes and a bounce comes back
//! here ([`Srs::reverse`] at RCPT). A reply has the null reverse path (RFC 3834 3.3) and is
//! DKIM-signed with the user's domain key, as submission signs.

use std::sync::Arc;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use sender_auth::Srs;

use crate::dkim::Signers;

/// How long a rule waits for the queue to make its mail durable.
const QUEUE_WAIT_MAX: Duration = Duration::from_secs(30);

/// The queue as the rules' outbox.
pub struct QueueOutbox {
    queue: Arc<queue::Queue>,
    wakeup: Arc<delivery::Wakeup>,
    directory: directory::Directory,
    telemetry: Arc<telemetry::Telemetry>,
    signers: Signers,
    srs: Arc<Srs>,
}

impl QueueOutbox {
    pub fn new(
        queue: Arc<queue::Queue>,
        wakeup: Arc<delivery::Wakeup>,
        directory: directory::Directory,
        telemetry: Arc<telemetry::Telemetry>,
        srs: Arc<Srs>,
    ) -> QueueOutbox {
        QueueOutbox {
            queue,
            wakeup,
            directory,
            telemetry,
            signers: Signers::default(),
            srs,
        }
    }

    /// Queues and waits until durable (or refused).
    fn submit(
        &self,
        sender: &str,
        user: &str,
        to: &str,
        content: Vec<u8>,
        dkim_signed: Option<String>,
    ) -> Result<u64, String> {
        let started = Instant::now();
        let size = content.len();
        let recipients = vec![to.to_string()];
        let durable = {
            let telemetry = self.telemetry.clone();
            let from = sender.to_string();
            let user = user.to_string();
            let to = recipients.clone();
            move |queue_id| {
                telemetry.accepted(
                    &telemetry::Accepted {
                        proto: "sieve",
                        queue_id,
                        from: &from,
                        to: &to,
                        size,
                        client: std::net::IpAddr::from([127, 0, 0, 1]),
                        user: Some(&user),
                        checks: None,
                        dkim_signed,
                    },
                    started.elapsed(),
                );
            }
        };
        let envelope = queue::Envelope {
            sender: sender.to_string(),
            recipients: recipients
                .iter()
                .map(|address| queue::Recipient {
                    address: address.clone(),
                    status: queue::RecipientStatus::Pending,
                    last_error: None,
                })
                .collect(),
            arrival_ms: delivery::now_ms(),
        };
        let (tx, rx) = mpsc::sync_channel(1);
        let wakeup = self.wakeup.clone();
        self.queue.enqueue_with(
            envelope,
            content,
            Box::new(move |result| {
                if let Ok(queue_id) = result {
                    durable(queue_id);
                    wakeup.notify();
                }
                let _ = tx.send(result);
            }),
        );
        match rx.recv_timeout(QUEUE_WAIT_MAX) {
            Ok(Ok(queue_id)) => Ok(queue_id),
            Ok(Err(e)) => Err(format!("queue: {e}")),
            Err(_) => Err("the queue did not answer in time".to_string()),
        }
    }
}

fn domain_of(address: &str) -> &str {
    address.rsplit_once('@').map_or("", |(_, d)| d)
}

impl mailboxes::rules::Outbox for QueueOutbox {
    fn redirect(
        &self,
        user: &str,
        original_sender: &str,
        to: &str,
        content: Vec<u8>,
    ) -> Result<u64, String> {
        let day = delivery::now_ms() / 86_400_000;
        let sender = self.srs.forward(original_sender, domain_of(user), day);
        self.submit(&sender, user, to, content, None)
    }

    fn reply(&self, user: &str, to: &str, content: Vec<u8>) -> Result<u64, String> {
        let domain = sender_auth::from_domain(&content).unwrap_or_else(|| domain_of(user).into());
        let mut signed = Vec::with_capacity(content.len() + 1024);
        let mut dkim_signed = None;
        if let Some(signer) = self.signers.for_domain(&self.directory, &domain) {
            match signer.sign(&content) {
                Ok(signature) => {
                    signed.extend_from_slice(signature.as_bytes());
                    dkim_signed = Some(format!("{}:{}", signer.domain(), signer.selector()));
                }
                Err(e) => tracing::warn!(
                    event = "dkim_error",
                    domain = %telemetry::shown(&domain),
                    error = %e
                ),
            }
        }
        signed.extend_from_slice(&content);
        // RFC 3834 3.3, RFC 5230 5.1: the null reverse path, so no reply to the reply.
        self.submit("", user, to, signed, dkim_signed)
    }
}
