//! Every message this server accepts (SMTP, submission, LMTP, the web view's sending) enters
//! the queue here: durable before the caller answers, its `accepted` line logged the moment it
//! is (on the queue's writer thread, before delivery is woken for it, so that line comes
//! before the message's `delivered`, `deferred` or `bounced` lines), and delivery woken.

use std::sync::Arc;

/// Hands a message to the queue for `recipients` (all pending); once it is durable, calls
/// `durable` with its queue id (it logs `accepted`: keep it short, it runs on the queue's
/// writer thread) and then wakes delivery. The receiver gets the queue id, or why not. The request is made before this
/// returns (so an `Incoming` announcement may be dropped right after); only the answer is
/// awaited. SMTP, submission, LMTP and the web view's sending all come through here.
pub(crate) fn enqueue(
    queue: &queue::Queue,
    wakeup: &Arc<delivery::Wakeup>,
    sender: &str,
    recipients: &[String],
    arrival_ms: u64,
    content: Vec<u8>,
    durable: Box<dyn FnOnce(u64) + Send>,
) -> tokio::sync::oneshot::Receiver<Result<u64, queue::QueueError>> {
    let queued = queue::Envelope {
        sender: sender.to_string(),
        recipients: recipients
            .iter()
            .map(|address| queue::Recipient {
                address: address.clone(),
                status: queue::RecipientStatus::Pending,
                last_error: None,
            })
            .collect(),
        arrival_ms,
    };
    let (tx, rx) = tokio::sync::oneshot::channel();
    let wakeup = wakeup.clone();
    queue.enqueue_with(
        queued,
        content,
        Box::new(move |result| {
            if let Ok(queue_id) = result {
                durable(queue_id);
                wakeup.notify();
            }
            let _ = tx.send(result);
        }),
    );
    rx
}
