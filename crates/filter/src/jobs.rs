//! The trainer's queue (docs/spam.md 3): what a user filed, waiting for the trainer thread.

use std::sync::mpsc::SyncSender;

/// A move or copy a user made between two folders: `uids` are the messages in `to`.
#[derive(Clone, Debug)]
pub struct Filed {
    pub user: String,
    pub from: String,
    pub to: String,
    pub uids: Vec<u32>,
}

/// The sending end of the trainer's bounded queue.
pub(crate) struct Jobs {
    pub(crate) jobs: SyncSender<Filed>,
}
