//! Every message this server accepts (SMTP, submission, LMTP, the web view's sending) enters
//! the queue here: durable before the caller answers, and delivery woken once it is.

use std::sync::Arc;

/// Hands a message to the queue for `recipients` (all pending) and wakes delivery once it
/// is durable; the receiver gets the queue id, or why not. The request is made before this
/// returns (so an `Incoming` announcement may be dropped right after); only the answer is
/// awaited. SMTP, submission, LMTP and the web view's sending all come through here.
pub(crate) fn enqueue(
    queue: &queue::Queue,
    wakeup: &Arc<delivery::Wakeup>,
    sender: &str,
    recipients: &[String],
    arrival_ms: u64,
    content: Vec<u8>,
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
            if result.is_ok() {
                wakeup.notify();
            }
            let _ = tx.send(result);
        }),
    );
    rx
}
