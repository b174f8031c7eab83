//! Two read caches over the index and the volume, shared by every reader of a store: the
//! summaries a search or sort reads (without their MIME structure), and folder views shared by
//! every session that opens an unchanged folder.
//!
//! Summaries: the header fields SEARCH and SORT read most (Subject, From, To, Message-ID, Date,
//! References), kept in memory per folder once read, so a second search over a big folder
//! reads no message at all.
//!
//! Entries never go stale: a (folder, UIDVALIDITY, UID) names one message forever (RFC 9051
//! 2.3.1.1). Memory is bounded by `bytes_max`; past it, the least recently used folders are
//! dropped whole.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::{FolderStatus, FolderView, MessageInfo, StoreError, Summary};

/// Summaries without their MIME structure, per (user, folder, UIDVALIDITY, UID).
pub(crate) struct SummaryCache {
    bytes_max: usize,
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    folders: HashMap<(String, String), Folder>,
    bytes: usize,
    clock: u64,
}

struct Folder {
    uidvalidity: u32,
    summaries: HashMap<u32, Arc<Summary>>,
    bytes: usize,
    used: u64,
}

/// What an entry costs, roughly: the strings and the map slot.
fn cost(s: &Summary) -> usize {
    64 + s.from.len()
        + s.to.len()
        + s.subject.len()
        + s.date.len()
        + s.message_id.len()
        + s.preview.len()
        + s.references.as_ref().map_or(0, String::len)
}

impl SummaryCache {
    pub(crate) fn new(bytes_max: usize) -> SummaryCache {
        SummaryCache {
            bytes_max,
            inner: Mutex::new(Inner::default()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// [`SummaryCache::get`] for many UIDs of one folder, under one lock (SORT and THREAD
    /// look at every message of a folder).
    pub(crate) fn get_many(
        &self,
        user: &str,
        folder: &str,
        uidvalidity: u32,
        uids: &[u32],
    ) -> Vec<Option<Arc<Summary>>> {
        let mut inner = self.lock();
        inner.clock += 1;
        let now = inner.clock;
        let Some(f) = inner
            .folders
            .get_mut(&(user.to_string(), folder.to_string()))
            .filter(|f| f.uidvalidity == uidvalidity)
        else {
            return vec![None; uids.len()];
        };
        f.used = now;
        uids.iter()
            .map(|uid| f.summaries.get(uid).cloned())
            .collect()
    }

    #[cfg(test)]
    pub(crate) fn get(
        &self,
        user: &str,
        folder: &str,
        uidvalidity: u32,
        uid: u32,
    ) -> Option<Arc<Summary>> {
        let mut inner = self.lock();
        inner.clock += 1;
        let now = inner.clock;
        let f = inner
            .folders
            .get_mut(&(user.to_string(), folder.to_string()))?;
        if f.uidvalidity != uidvalidity {
            return None;
        }
        f.used = now;
        f.summaries.get(&uid).cloned()
    }

    /// Keeps the searchable fields of a summary (not its MIME structure).
    pub(crate) fn put(
        &self,
        user: &str,
        folder: &str,
        uidvalidity: u32,
        uid: u32,
        summary: &Summary,
    ) -> Arc<Summary> {
        let kept = Arc::new(Summary {
            structure: Vec::new(),
            ..summary.clone()
        });
        let size = cost(&kept);
        if size > self.bytes_max {
            return kept;
        }
        let mut inner = self.lock();
        inner.clock += 1;
        let now = inner.clock;
        while inner.bytes + size > self.bytes_max {
            let Some(oldest) = inner
                .folders
                .iter()
                .min_by_key(|(_, f)| f.used)
                .map(|(k, _)| k.clone())
            else {
                break;
            };
            if let Some(f) = inner.folders.remove(&oldest) {
                inner.bytes -= f.bytes;
            }
        }
        let key = (user.to_string(), folder.to_string());
        let f = inner.folders.entry(key).or_insert_with(|| Folder {
            uidvalidity,
            summaries: HashMap::new(),
            bytes: 0,
            used: now,
        });
        let mut freed = 0;
        if f.uidvalidity != uidvalidity {
            freed = f.bytes;
            *f = Folder {
                uidvalidity,
                summaries: HashMap::new(),
                bytes: 0,
                used: now,
            };
        }
        f.used = now;
        let added = if f.summaries.insert(uid, kept.clone()).is_none() {
            f.bytes += size;
            size
        } else {
            0
        };
        inner.bytes = inner.bytes - freed + added;
        kept
    }

    /// Bytes held now.
    pub(crate) fn bytes(&self) -> usize {
        self.lock().bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(subject: &str) -> Summary {
        Summary {
            subject: subject.to_string(),
            structure: vec![1; 1000],
            ..Summary::default()
        }
    }

    #[test]
    fn hits_after_put_and_keyed_by_uidvalidity() {
        let c = SummaryCache::new(1 << 20);
        assert!(c.get("u", "INBOX", 7, 1).is_none());
        c.put("u", "INBOX", 7, 1, &summary("hello"));
        assert_eq!(c.get("u", "INBOX", 7, 1).unwrap().subject, "hello");
        assert!(c.get("u", "INBOX", 7, 1).unwrap().structure.is_empty());
        assert!(c.get("u", "INBOX", 8, 1).is_none());
        assert!(c.get("v", "INBOX", 7, 1).is_none());
        c.put("u", "INBOX", 8, 1, &summary("other"));
        assert!(c.get("u", "INBOX", 7, 1).is_none());
        assert_eq!(c.bytes(), 64 + 5);
    }

    #[test]
    fn the_budget_evicts_the_least_recently_used_folder() {
        let c = SummaryCache::new(3 * 70);
        c.put("u", "A", 1, 1, &summary("aaaaa"));
        c.put("u", "B", 1, 1, &summary("bbbbb"));
        c.get("u", "A", 1, 1);
        c.put("u", "C", 1, 1, &summary("ccccc"));
        c.put("u", "D", 1, 1, &summary("ddddd"));
        assert!(c.get("u", "B", 1, 1).is_none(), "B was least recently used");
        assert!(c.get("u", "A", 1, 1).is_some());
        assert!(c.bytes() <= 3 * 70);
    }
}

/// Folder views for SELECT: the index entries of a folder as last copied out of the store,
/// shared (copy-on-write) by every session that selects the folder while it is unchanged, so
/// selecting a big folder again costs one status lookup, not a copy of every entry.
pub(crate) struct ViewCache {
    bytes_max: usize,
    inner: Mutex<ViewsInner>,
}

#[derive(Default)]
struct ViewsInner {
    views: HashMap<(String, String), View>,
    bytes: usize,
    clock: u64,
}

struct View {
    status: FolderStatus,
    messages: Arc<Vec<MessageInfo>>,
    bytes: usize,
    used: u64,
}

impl ViewCache {
    pub(crate) fn new(bytes_max: usize) -> ViewCache {
        ViewCache {
            bytes_max,
            inner: Mutex::new(ViewsInner::default()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, ViewsInner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The folder's status and entries, from the cache when the folder has not changed
    /// since `status` (same UIDVALIDITY, UIDNEXT, HIGHESTMODSEQ and count); otherwise from
    /// `load`, kept if it fits.
    pub(crate) fn open(
        &self,
        user: &str,
        folder: &str,
        status: FolderStatus,
        load: impl FnOnce() -> Result<FolderView, StoreError>,
    ) -> Result<(FolderStatus, Arc<Vec<MessageInfo>>), StoreError> {
        let key = (user.to_string(), folder.to_string());
        {
            let mut inner = self.lock();
            inner.clock += 1;
            let now = inner.clock;
            if let Some(v) = inner.views.get_mut(&key)
                && v.status == status
            {
                v.used = now;
                return Ok((v.status, v.messages.clone()));
            }
        }
        let view = load()?;
        let messages = Arc::new(view.messages);
        let bytes = 64 + messages.len() * std::mem::size_of::<MessageInfo>();
        if bytes <= self.bytes_max {
            let mut inner = self.lock();
            if let Some(old) = inner.views.remove(&key) {
                inner.bytes -= old.bytes;
            }
            while inner.bytes + bytes > self.bytes_max {
                let Some(oldest) = inner
                    .views
                    .iter()
                    .min_by_key(|(_, v)| v.used)
                    .map(|(k, _)| k.clone())
                else {
                    break;
                };
                if let Some(v) = inner.views.remove(&oldest) {
                    inner.bytes -= v.bytes;
                }
            }
            inner.clock += 1;
            let used = inner.clock;
            inner.bytes += bytes;
            inner.views.insert(
                key,
                View {
                    status: view.status,
                    messages: messages.clone(),
                    bytes,
                    used,
                },
            );
        }
        Ok((view.status, messages))
    }
}
