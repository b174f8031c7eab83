//! RFC 3501 2.3.2 `\Recent`: which messages of a folder no session has been told of yet.
//!
//! Per folder (folder ids are never reused), the lowest UID that is still recent to every
//! session; every UID from it up to the folder's UIDNEXT is recent. A read-write SELECT, and
//! a selected session learning of new mail, *claims* them: they are recent to that session
//! only, and the mark moves up to UIDNEXT. An EXAMINE or STATUS only looks.
//!
//! Kept in memory, never journaled: mail that arrived before the store was opened is not
//! recent (each folder's mark starts at its UIDNEXT when the store opens; a folder created
//! since starts at 1). IMAP4rev2 dropped `\Recent`; this serves IMAP4rev1 sessions.

use std::collections::HashMap;
use std::sync::Mutex;

/// Marks kept before those of deleted folders are swept (folder ids are never reused, so a
/// client that creates and selects folders without end would otherwise grow the map).
pub(crate) const MARKS_PRUNE_AT: usize = 100_000;

#[derive(Default)]
pub(crate) struct Recent {
    /// folder id -> the lowest UID recent to every session (absent: 1).
    first: Mutex<HashMap<u32, u32>>,
}

impl Recent {
    /// At open: nothing stored so far is recent.
    pub(crate) fn start_at(&self, folder: u32, uidnext: u32) {
        self.lock().insert(folder, uidnext);
    }

    /// The lowest recent UID of `folder`, whose UIDNEXT is `uidnext`; with `claim`, the
    /// caller takes every recent UID (below `uidnext`) and the mark moves to `uidnext`.
    pub(crate) fn take(&self, folder: u32, uidnext: u32, claim: bool) -> u32 {
        let mut first = self.lock();
        let mark = first.entry(folder).or_insert(1);
        let was = *mark;
        if claim {
            *mark = (*mark).max(uidnext);
        }
        was
    }

    /// Marks kept; past [`MARKS_PRUNE_AT`] the caller drops those of deleted folders.
    pub(crate) fn len(&self) -> usize {
        self.lock().len()
    }

    /// Keeps the marks of the folders `live` says exist.
    pub(crate) fn retain(&self, live: impl Fn(u32) -> bool) {
        self.lock().retain(|&id, _| live(id));
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u32, u32>> {
        self.first.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::Recent;

    #[test]
    fn recent_uids_go_to_the_first_session_that_claims_them() {
        let r = Recent::default();
        r.start_at(7, 10);
        // Nothing stored before the open is recent.
        assert_eq!(r.take(7, 10, false), 10);
        // Two new messages (10, 11): a look does not take them, a claim does.
        assert_eq!(r.take(7, 12, false), 10);
        assert_eq!(r.take(7, 12, true), 10);
        assert_eq!(r.take(7, 12, true), 12, "the next session gets none");
        // A folder made after the open: everything is recent until claimed.
        assert_eq!(r.take(8, 3, true), 1);
        // Swept once the folder is gone.
        r.retain(|id| id != 8);
        assert_eq!(r.len(), 1);
    }
}
