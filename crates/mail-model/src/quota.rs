//! Per-user quotas: the one check every path that adds mail goes through (SMTP and LMTP at
//! RCPT, IMAP APPEND, COPY and MOVE), so they all refuse at the same point.
//!
//! The store counts what a user holds ([`Usage`], from the in-memory index: no I/O); the
//! limits come from whoever owns accounts (the directory) as a [`Quota`]. The check is
//! advisory, like Dovecot's: two sessions adding at the same moment may both pass and end a
//! few messages past the limit; the next addition is refused.

/// A user's limits; `None` is unlimited.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Quota {
    /// Sum of message sizes (RFC822.SIZE).
    pub bytes_max: Option<u64>,
    pub messages_max: Option<u64>,
}

/// What a user holds in the store, or what an operation adds to it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    pub folders: u64,
    pub messages: u64,
    /// Sum of message sizes (RFC822.SIZE), the figure quotas count.
    pub bytes: u64,
}

/// Why an addition was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OverQuota {
    /// The addition alone is more than the limit: it will never fit (SMTP 552 5.2.2).
    TooLarge,
    /// The user is full: the addition fits once mail is deleted (SMTP 452 4.2.2).
    Full,
}

impl Quota {
    /// Whether `added` fits on top of `used`. A limit is reached when the usage would go past
    /// it; at exactly the limit the user is full, so an addition of unknown size (SMTP
    /// without SIZE=) should be given as at least one byte.
    pub fn admits(&self, used: Usage, added: Usage) -> Result<(), OverQuota> {
        let limits = [
            (self.bytes_max, used.bytes, added.bytes),
            (self.messages_max, used.messages, added.messages),
        ];
        let mut full = false;
        for (max, used, added) in limits {
            let Some(max) = max else { continue };
            if added > max {
                return Err(OverQuota::TooLarge);
            }
            full |= used.saturating_add(added) > max;
        }
        if full { Err(OverQuota::Full) } else { Ok(()) }
    }

    /// Whether any limit is set.
    pub fn is_limited(&self) -> bool {
        self.bytes_max.is_some() || self.messages_max.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usage(messages: u64, bytes: u64) -> Usage {
        Usage {
            folders: 1,
            messages,
            bytes,
        }
    }

    #[test]
    fn unlimited_admits_anything() {
        let quota = Quota::default();
        assert!(!quota.is_limited());
        assert_eq!(quota.admits(usage(u64::MAX, u64::MAX), usage(1, 1)), Ok(()));
    }

    #[test]
    fn bytes_limit() {
        let quota = Quota {
            bytes_max: Some(100),
            messages_max: None,
        };
        assert_eq!(quota.admits(usage(0, 0), usage(1, 100)), Ok(()));
        assert_eq!(quota.admits(usage(3, 60), usage(1, 40)), Ok(()));
        assert_eq!(
            quota.admits(usage(3, 60), usage(1, 41)),
            Err(OverQuota::Full)
        );
        // At the limit, even a message of unknown size (one byte) no longer fits.
        assert_eq!(
            quota.admits(usage(3, 100), usage(1, 1)),
            Err(OverQuota::Full)
        );
        assert_eq!(
            quota.admits(usage(0, 0), usage(1, 101)),
            Err(OverQuota::TooLarge)
        );
        // An over-full user (the limit was lowered) stays full, without overflow.
        assert_eq!(
            quota.admits(usage(3, u64::MAX), usage(1, 1)),
            Err(OverQuota::Full)
        );
    }

    #[test]
    fn messages_limit() {
        let quota = Quota {
            bytes_max: Some(1 << 20),
            messages_max: Some(2),
        };
        assert_eq!(quota.admits(usage(1, 10), usage(1, 10)), Ok(()));
        assert_eq!(
            quota.admits(usage(2, 10), usage(1, 10)),
            Err(OverQuota::Full)
        );
        assert_eq!(
            quota.admits(usage(0, 0), usage(3, 30)),
            Err(OverQuota::TooLarge)
        );
        let none = Quota {
            bytes_max: None,
            messages_max: Some(0),
        };
        assert_eq!(
            none.admits(usage(0, 0), usage(1, 1)),
            Err(OverQuota::TooLarge)
        );
    }
}
