//! Users' quotas: the limits from the directory's cache, checked over the store's usage by
//! the one [`store::Quota::admits`] that SMTP and LMTP (at RCPT) and IMAP (APPEND, COPY,
//! MOVE) share.

/// `user`'s limits from the directory's in-memory cache (no I/O): a change made with
/// `mailstow user quota` applies once the cache reloads, to open sessions too.
pub(crate) fn of(directory: &directory::Directory, user: &str) -> store::Quota {
    let cache = directory.cache();
    store::Quota {
        bytes_max: cache.quota(user),
        messages_max: cache.message_quota(user),
    }
}

/// What IMAP sessions ask for their user's limits, and tell of a refusal.
pub(crate) struct DirectoryQuotas<'a> {
    pub(crate) directory: &'a directory::Directory,
    pub(crate) telemetry: &'a telemetry::Telemetry,
    /// The data directory's free-space reserve.
    pub(crate) space: &'a disk::SpaceReserve,
}

impl imap::Quotas for DirectoryQuotas<'_> {
    fn quota(&self, user: &str) -> store::Quota {
        of(self.directory, user)
    }

    fn refused(&self, user: &str, added: store::Usage, why: store::OverQuota) {
        self.telemetry.over_quota("imap", user, added, why);
    }

    fn storage_full(&self, added_bytes: u64) -> bool {
        match self.space.check(added_bytes) {
            Ok(()) => false,
            Err(shortage) => {
                tracing::warn!(event = "rejected", proto = "imap", stage = "append", reason = %shortage);
                true
            }
        }
    }
}
