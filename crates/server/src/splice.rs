//! A client connection handed to its user's node (cluster): the owner's answer to the login
//! goes to the client, what the client sent after its login to the owner, then bytes are
//! copied both ways until either side closes, the server shuts down, or the owner's lease
//! runs out. The owner's session enforces every limit and deadline of the logged-in state.

use std::time::Duration;

use tokio::io::AsyncWriteExt as _;

/// How often a splice looks at the owner's lease.
const LEASE_CHECK: Duration = Duration::from_secs(1);

/// Copies bytes both ways until either side closes, the server shuts down, or the owner's
/// lease runs out.
pub(crate) async fn splice(
    conn: &mut crate::driver::Conn,
    handover: cluster::Handover,
    shutdown: &mut tokio::sync::watch::Receiver<bool>,
) {
    let cluster::Handover {
        mut upstream,
        to_client,
        to_owner,
    } = handover;
    conn.out.extend_from_slice(&to_client);
    if conn.flush().await.is_err() {
        return;
    }
    if !to_owner.is_empty() && upstream.stream.write_all(&to_owner).await.is_err() {
        return;
    }
    let directory = conn.ctx.directory.clone();
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
        _ = tokio::io::copy_bidirectional(&mut conn.stream, &mut upstream.stream) => {}
        () = owner_down => {
            tracing::info!(event = "cluster_proxy_closed", node = %node, reason = "owner down");
        }
        () = crate::conn::stopping(shutdown) => {}
    }
    let _ = tokio::time::timeout(Duration::from_secs(1), upstream.stream.shutdown()).await;
}
