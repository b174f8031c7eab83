//! The location query: who owns a recipient.

/// Where a recipient's copy goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// A mailbox in this node's store (the canonical user address).
    Local(String),
    /// Another domain: outbound SMTP.
    Remote,
    /// Was local once and is no longer (user deleted since the message was accepted).
    Unknown,
    /// A user of ours whose mailbox another node of the cluster owns: `user` (the canonical
    /// address) lives on `node` as of the directory's ownership `epoch`; the copy is handed
    /// to the node's LMTP listener at `lmtp` (`peer.rs`), or, while the node is not `up`,
    /// waits in the deferred queue on a short schedule.
    Peer {
        node: String,
        user: String,
        epoch: i64,
        lmtp: String,
        up: bool,
    },
    /// A user of ours whose mailbox must not change now (it is being moved between nodes):
    /// the copy waits in the deferred queue on the short schedule. The text says why.
    Held(String),
}

/// The location query: who owns this recipient. The server implements it from its directory
/// cache; a cluster answers [`Route::Peer`] for users another node owns.
pub trait Router: Send + Sync {
    fn route(&self, address: &str) -> Route;
}
