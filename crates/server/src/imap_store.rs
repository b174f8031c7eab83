//! The store as IMAP sessions see it: `imap::Mailstore` over `store::Store`. Summaries and
//! folder views come from the store's own caches (`summary_cache_bytes_max`,
//! `view_cache_bytes_max`, set from `imap_header_cache_bytes_max` and
//! `imap_view_cache_bytes_max`).

pub(crate) struct ImapStore<'a>(pub(crate) &'a store::Store);

imap::forward_mailstore!(ImapStore<'_>, 0);
