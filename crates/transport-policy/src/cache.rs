//! The MTA-STS policy cache (RFC 8461 5.1): per recipient domain the policy, its id and when it
//! was fetched; a policy is used until `max_age` after its fetch. Kept in memory and in one
//! file (written to a temporary file, synced, renamed), loaded at start, so a restart keeps
//! enforcing the policies it had (RFC 8461 10.2: the cache is what protects the next
//! delivery from a downgrade).

use std::collections::HashMap;
use std::io::{Read as _, Write as _};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use crate::sts::{POLICY_BYTES_MAX, Policy};

/// The cache file's name in its directory.
pub const CACHE_FILE_NAME: &str = "mta-sts-policies.json";
/// Bytes a cached entry may take in the file beyond its policy (domain, id, time, quoting).
const ENTRY_OVERHEAD_BYTES_MAX: usize = 1024;

/// One domain's cached policy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CachedPolicy {
    pub policy: Policy,
    /// The `id` of the TXT record it was fetched under (RFC 8461 3.1).
    pub id: String,
    /// Seconds since the Unix epoch when it was fetched.
    pub fetched: u64,
}

impl CachedPolicy {
    /// RFC 8461 5.1: usable until `max_age` seconds after the fetch.
    pub fn expires(&self) -> u64 {
        self.fetched.saturating_add(self.policy.max_age)
    }
}

#[derive(Serialize, Deserialize)]
struct FileEntry {
    domain: String,
    id: String,
    fetched: u64,
    policy: String,
}

#[derive(Serialize, Deserialize)]
struct File {
    version: u32,
    policies: Vec<FileEntry>,
}

/// The cache, bounded to `max` domains.
pub struct StsCache {
    path: Option<PathBuf>,
    max: usize,
    entries: Mutex<HashMap<String, CachedPolicy>>,
    /// One writer of the file at a time; each writes the state current when it starts.
    writing: Mutex<()>,
}

impl StsCache {
    /// Loads `dir/mta-sts-policies.json` when there is one (a damaged file is logged and
    /// ignored: the cache starts empty); `dir: None` keeps the cache in memory only.
    pub fn open(dir: Option<&Path>, max: usize) -> StsCache {
        let path = dir.map(|dir| dir.join(CACHE_FILE_NAME));
        let mut entries = HashMap::new();
        if let Some(path) = &path {
            match load(path, max) {
                Ok(loaded) => entries = loaded,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => {
                    tracing::warn!(path = %path.display(), error = %e, "MTA-STS policy cache not loaded")
                }
            }
        }
        StsCache {
            path,
            max,
            entries: Mutex::new(entries),
            writing: Mutex::new(()),
        }
    }

    fn entries(&self) -> std::sync::MutexGuard<'_, HashMap<String, CachedPolicy>> {
        // A panic while holding the map leaves whole entries: the data stays usable.
        self.entries
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The domain's policy if it has not expired at `now` (an expired one is forgotten).
    pub fn get(&self, domain: &str, now: u64) -> Option<CachedPolicy> {
        let mut entries = self.entries();
        match entries.get(domain) {
            Some(cached) if cached.expires() > now => Some(cached.clone()),
            Some(_) => {
                entries.remove(domain);
                None
            }
            None => None,
        }
    }

    /// Remembers a fetched policy; when the cache is full, the entry expiring first goes.
    pub fn put(&self, domain: &str, cached: CachedPolicy) {
        let mut entries = self.entries();
        if !entries.contains_key(domain) && entries.len() >= self.max {
            let soonest = entries
                .iter()
                .min_by_key(|(_, c)| c.expires())
                .map(|(d, _)| d.clone());
            if let Some(soonest) = soonest {
                entries.remove(&soonest);
            }
        }
        if self.max > 0 {
            entries.insert(domain.to_string(), cached);
        }
    }

    pub fn len(&self) -> usize {
        self.entries().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Writes the cache file (a temporary file synced, renamed over the old one, the directory
    /// synced). Blocking: async callers run it on a blocking thread.
    pub fn save(&self) -> std::io::Result<()> {
        let Some(path) = &self.path else {
            return Ok(());
        };
        let _writer = self.writing.lock().unwrap_or_else(|p| p.into_inner());
        let file = {
            let entries = self.entries();
            let mut policies: Vec<FileEntry> = entries
                .iter()
                .map(|(domain, cached)| FileEntry {
                    domain: domain.clone(),
                    id: cached.id.clone(),
                    fetched: cached.fetched,
                    policy: cached.policy.to_text(),
                })
                .collect();
            policies.sort_by(|a, b| a.domain.cmp(&b.domain));
            File {
                version: 1,
                policies,
            }
        };
        let bytes = serde_json::to_vec(&file).map_err(std::io::Error::other)?;
        let temporary = path.with_extension("json.tmp");
        let mut out = std::fs::File::create(&temporary)?;
        out.write_all(&bytes)?;
        out.sync_all()?;
        drop(out);
        std::fs::rename(&temporary, path)?;
        if let Some(dir) = path.parent() {
            std::fs::File::open(dir)?.sync_all()?;
        }
        Ok(())
    }
}

fn load(path: &Path, max: usize) -> std::io::Result<HashMap<String, CachedPolicy>> {
    let bound = max.saturating_mul(POLICY_BYTES_MAX + ENTRY_OVERHEAD_BYTES_MAX) as u64;
    let mut bytes = Vec::new();
    std::fs::File::open(path)?
        .take(bound + 1)
        .read_to_end(&mut bytes)?;
    if bytes.len() as u64 > bound {
        return Err(std::io::Error::other(
            "cache file larger than the cache may be",
        ));
    }
    let file: File = serde_json::from_slice(&bytes).map_err(std::io::Error::other)?;
    if file.version != 1 {
        return Err(std::io::Error::other(format!(
            "cache file version {}",
            file.version
        )));
    }
    let mut entries = HashMap::new();
    for entry in file.policies.into_iter().take(max) {
        // An entry whose policy no longer parses is dropped, not the whole cache.
        if let Ok(policy) = Policy::parse(entry.policy.as_bytes()) {
            entries.insert(
                entry.domain,
                CachedPolicy {
                    policy,
                    id: entry.id,
                    fetched: entry.fetched,
                },
            );
        }
    }
    Ok(entries)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sts::Mode;

    fn cached(id: &str, fetched: u64, max_age: u64) -> CachedPolicy {
        CachedPolicy {
            policy: Policy {
                mode: Mode::Enforce,
                mx: vec!["mx.example.org".into()],
                max_age,
            },
            id: id.into(),
            fetched,
        }
    }

    #[test]
    fn entries_expire_and_the_soonest_is_evicted() {
        let cache = StsCache::open(None, 2);
        cache.put("a.example", cached("1", 100, 50));
        cache.put("b.example", cached("1", 100, 500));
        assert_eq!(cache.get("a.example", 149).unwrap().id, "1");
        cache.put("c.example", cached("1", 100, 1000));
        assert_eq!(cache.len(), 2);
        assert!(
            cache.get("a.example", 120).is_none(),
            "a expired first: evicted"
        );
        assert!(cache.get("b.example", 599).is_some());
        assert!(
            cache.get("b.example", 600).is_none(),
            "expired at fetched + max_age"
        );
        assert_eq!(cache.len(), 1);
    }

    #[test]
    fn the_file_survives_a_restart_and_damage_is_ignored() {
        let dir = tempfile::tempdir().unwrap();
        let cache = StsCache::open(Some(dir.path()), 10);
        cache.put("a.example", cached("20240101", 1000, 86400));
        cache.save().unwrap();
        let reopened = StsCache::open(Some(dir.path()), 10);
        assert_eq!(
            reopened.get("a.example", 2000),
            Some(cached("20240101", 1000, 86400))
        );
        assert!(!dir.path().join("mta-sts-policies.json.tmp").exists());
        std::fs::write(dir.path().join(CACHE_FILE_NAME), b"{not json").unwrap();
        assert!(StsCache::open(Some(dir.path()), 10).is_empty());
        std::fs::write(
            dir.path().join(CACHE_FILE_NAME),
            br#"{"version":1,"policies":[{"domain":"x","id":"1","fetched":1,"policy":"bad"}]}"#,
        )
        .unwrap();
        assert!(StsCache::open(Some(dir.path()), 10).is_empty());
    }
}
