//! The stream's timing and sizes, and its MACs (docs/replication.md, "Authentication").

use std::time::Duration;

/// A sync waits at most this long for a partner in sync to acknowledge it; after that the
/// owner goes on alone (the partner is *behind*) and later syncs do not wait for it.
pub const REPLICA_ACK_WAIT_MAX: Duration = Duration::from_secs(2);
/// Connecting to the partner, and its greeting and welcome, take at most this long.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
/// Between attempts to reach a partner that did not answer.
pub const RECONNECT_PAUSE: Duration = Duration::from_secs(1);
/// A full copy reads and sends the files in chunks of this size.
pub const COPY_CHUNK_BYTES: usize = 1 << 20;
/// An owner with nothing to send sends a heartbeat (`Ack 0`) this often...
pub const HEARTBEAT: Duration = Duration::from_secs(5);
/// ...and a replica that hears nothing for this long drops the stream (an owner gone without
/// closing it); an owner that hears no ack for this long while it waits for one reconnects.
pub const RECEIVE_IDLE_MAX: Duration = Duration::from_secs(30);

/// The key of the stream's MACs, from the cluster secret.
pub fn stream_key(secret: &[u8]) -> [u8; 32] {
    blake3::derive_key("mailstow replication v1", secret)
}

/// The MAC of an owner's `Hello`: node, epoch, session and the replica's greeting nonce.
pub(crate) fn hello_mac(
    key: &[u8; 32],
    node: &str,
    epoch: u64,
    session: u128,
    nonce: &[u8; 16],
) -> [u8; 32] {
    let mut h = blake3::Hasher::new_keyed(key);
    h.update(b"hello\0");
    h.update(&(node.len() as u64).to_le_bytes());
    h.update(node.as_bytes());
    h.update(&epoch.to_le_bytes());
    h.update(&session.to_le_bytes());
    h.update(nonce);
    *h.finalize().as_bytes()
}

/// The MAC of a replica's `Welcome`: the owner's Hello MAC (so it answers that very Hello),
/// the session and the applied seq.
pub(crate) fn welcome_mac(
    key: &[u8; 32],
    hello: &[u8; 32],
    session: u128,
    applied: u64,
) -> [u8; 32] {
    let mut h = blake3::Hasher::new_keyed(key);
    h.update(b"welcome\0");
    h.update(hello);
    h.update(&session.to_le_bytes());
    h.update(&applied.to_le_bytes());
    *h.finalize().as_bytes()
}

/// Compares MACs without an early exit.
pub(crate) fn same_mac(a: &[u8; 32], b: &[u8; 32]) -> bool {
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}
