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
    /// address) lives on `node` as of the directory's ownership `epoch`. No router returns it
    /// yet; delivery treats it as a temporary failure.
    Peer {
        node: String,
        user: String,
        epoch: i64,
    },
}

/// The location query: who owns this recipient. The server implements it from its directory
/// cache; a cluster answers [`Route::Peer`] for users another node owns.
pub trait Router: Send + Sync {
    fn route(&self, address: &str) -> Route;
}
