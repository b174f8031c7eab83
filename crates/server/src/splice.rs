//! A client connection handed to its user's node (cluster): the owner's answer to the login
//! goes to the client, what the client sent after its login to the owner, then bytes are
//! copied both ways until either side closes, the server shuts down, or the owner's lease
//! runs out. The owner's session enforces every limit and deadline of the logged-in state.

use std::time::Duration;

use tokio::io::AsyncWriteExt as _;

use crate::stream::{Stream, stopping};

/// How often a splice looks at the owner's lease.
const LEASE_CHECK: Duration = Duration::from_secs(1);
/// A client that does not take the owner's answer within this long is gone.
const WRITE_TIMEOUT: Duration = Duration::from_secs(300);

/// Copies bytes both ways until either side closes, the server shuts down, or the owner's
/// lease runs out.
pub(crate) async fn splice(
    client: &mut Stream,
    directory: &directory::Directory,
    handover: cluster::Handover,
    shutdown: &mut tokio::sync::watch::Receiver<bool>,
) {
    let cluster::Handover {
        mut upstream,
        to_client,
        to_owner,
    } = handover;
    let answered = tokio::time::timeout(WRITE_TIMEOUT, async {
        client.write_all(&to_client).await?;
        client.flush().await
    })
    .await;
    if !matches!(answered, Ok(Ok(()))) {
        return;
    }
    if !to_owner.is_empty() && upstream.stream.write_all(&to_owner).await.is_err() {
        return;
    }
    let node = upstream.node.clone();
    let owner_down = async {
        let mut tick = tokio::time::interval(LEASE_CHECK);
        loop {
            tick.tick().await;
            if directory.cache().node(&node).is_none_or(|n| !n.up) {
                return;
            }
        }
    };
    tokio::select! {
        _ = tokio::io::copy_bidirectional(client, &mut upstream.stream) => {}
        () = owner_down => {
            tracing::info!(event = "cluster_proxy_closed", node = %node, reason = "owner down");
        }
        () = stopping(shutdown) => {}
    }
    let _ = tokio::time::timeout(Duration::from_secs(1), upstream.stream.shutdown()).await;
}
