//! Two copies before the acknowledgement (docs/replication.md).
//!
//! The queue and the mailbox store do all their I/O through `disk::Disk`. [`MirrorDisk`] is a
//! `Disk` that does each operation locally and appends it to an ordered stream to the node's
//! replica partner; a sync returns only once the local sync is done and the partner has
//! applied and synced everything up to it (while the partner is in sync: otherwise once the
//! directory no longer names it as holding every acknowledged change, [`Registry`]). The
//! partner's [`Receiver`] applies the stream under `<data_dir>/replicas/<node>/`, so its files
//! are always a crash image of the owner's that the engines' own recovery opens.
//!
//! - `wire.rs`: the frames, sans-IO.
//! - `mirror.rs`: the owner's side: the `Disk`, the backlog, the states, the registry writer.
//! - `sender.rs`: the owner's connection to the partner: handshake, resume or full copy, acks.
//! - `receiver.rs`: the partner's side.
//!
//! Everything here is blocking `std` code on threads of its own: the engines call the disk
//! from their own threads, and none of it may wait on an async runtime.

mod mirror;
mod receiver;
mod sender;
mod stream;
pub mod wire;

pub use mirror::{Mirror, MirrorConfig, MirrorDisk, MirrorStatus, Phase, Registry};
pub use receiver::{Admission, Receiver, ReceiverConfig};
pub use stream::{
    CONNECT_TIMEOUT, COPY_CHUNK_BYTES, HEARTBEAT, RECEIVE_IDLE_MAX, RECONNECT_PAUSE,
    REPLICA_ACK_WAIT_MAX, stream_key,
};

impl Mirror {
    /// A mirror of `inner` (the data directory's disk) and the disk the engines use. Nothing
    /// is streamed until [`Mirror::set_partner`].
    pub fn new(
        config: MirrorConfig,
        inner: std::sync::Arc<dyn disk::Disk>,
        registry: Box<dyn Registry>,
    ) -> std::io::Result<(Mirror, std::sync::Arc<dyn disk::Disk>)> {
        let (mirror, disk, shared) = Mirror::create(config, inner, registry)?;
        let stopper = mirror.clone();
        if let Err(e) = std::thread::Builder::new()
            .name("replica-sender".into())
            .spawn(move || sender::run(shared))
        {
            stopper.stop();
            return Err(e);
        }
        Ok((mirror, disk))
    }
}

#[cfg(test)]
mod tests;
