//! Users' classifiers and reputations in memory: read from the directory on first use,
//! kept for `model_ttl` (another node may train them meanwhile), forgotten at once when
//! this node trains them, at most `models_cached_max` owners at a time.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use directory::SpamOwner;

/// What the verdict needs of one owner.
pub(crate) struct State {
    pub(crate) model: spam::Model,
    /// Reputation counts by key (`a:`, `d:`, `n:`, docs/spam.md 2); empty for the site.
    pub(crate) reputation: HashMap<String, spam::Counts>,
    loaded: Instant,
}

/// The longest wait for an owner's state from the directory.
const LOAD_WAIT_MAX: Duration = Duration::from_secs(2);
/// How long a state the directory could not give stays neutral before it is asked again.
const RETRY_AFTER: Duration = Duration::from_secs(10);

impl State {
    fn neutral() -> State {
        State {
            model: spam::Model::default(),
            reputation: HashMap::new(),
            loaded: Instant::now(),
        }
    }
}

pub(crate) struct States {
    directory: directory::Directory,
    max: usize,
    ttl: Duration,
    cache: Mutex<HashMap<String, Arc<State>>>,
    /// One read per owner at a time: the sessions that miss the cache together (after a
    /// start, after training) wait for the first one's read instead of each reading the
    /// same model.
    loading: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
}

/// The cache's key of an owner: a user's address, or `@site` (no address starts with `@`).
pub(crate) fn key(owner: SpamOwner<'_>) -> String {
    match owner {
        SpamOwner::User(user) => user.to_string(),
        SpamOwner::Site => "@site".to_string(),
    }
}

impl States {
    pub(crate) fn new(directory: directory::Directory, max: usize, ttl: Duration) -> States {
        States {
            directory,
            max: max.max(1),
            ttl,
            cache: Mutex::new(HashMap::new()),
            loading: Mutex::new(HashMap::new()),
        }
    }

    /// The owner's state, read from the directory when not cached or stale. A directory
    /// that does not answer gives an empty state (neutral: no verdict from it), not cached.
    pub(crate) async fn get(&self, owner: SpamOwner<'_>) -> Arc<State> {
        let key = key(owner);
        if let Some(state) = self.fresh(&key) {
            return state;
        }
        let gate = self
            .loading
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(key.clone())
            .or_default()
            .clone();
        let _reading = gate.lock().await;
        // Another session may have read it while this one waited.
        if let Some(state) = self.fresh(&key) {
            self.done_loading(&key);
            return state;
        }
        let state = self.read(owner, &key).await;
        self.done_loading(&key);
        state
    }

    /// The cached state of `key`, unless it is older than the TTL.
    fn fresh(&self, key: &str) -> Option<Arc<State>> {
        let now = Instant::now();
        self.lock()
            .get(key)
            .filter(|state| now.duration_since(state.loaded) < self.ttl)
            .cloned()
    }

    /// Forgets the per-owner read lock once nobody else holds it (the map stays small).
    fn done_loading(&self, key: &str) {
        let mut loading = self.loading.lock().unwrap_or_else(|e| e.into_inner());
        if loading
            .get(key)
            .is_some_and(|gate| Arc::strong_count(gate) <= 2)
        {
            loading.remove(key);
        }
    }

    /// Reads `owner`'s state from the directory into the cache.
    async fn read(&self, owner: SpamOwner<'_>, key: &str) -> Arc<State> {
        let key = key.to_string();
        let now = Instant::now();
        // A directory that does not answer (PostgreSQL down) must not hold mail up: the
        // read is bounded, and its failure gives a neutral state, kept briefly so that
        // the next messages do not wait again.
        let (state, keep_for) = match tokio::time::timeout(LOAD_WAIT_MAX, self.load(owner)).await {
            Ok(Ok(state)) => (state, self.ttl),
            Ok(Err(e)) => {
                tracing::warn!(event = "spam_state_error", owner = %key, error = %e);
                (State::neutral(), RETRY_AFTER.min(self.ttl))
            }
            Err(_) => {
                tracing::warn!(event = "spam_state_error", owner = %key, error = "the directory did not answer in time");
                (State::neutral(), RETRY_AFTER.min(self.ttl))
            }
        };
        let state = Arc::new(State {
            // Read again `keep_for` from now.
            loaded: now.checked_sub(self.ttl - keep_for).unwrap_or(now),
            ..state
        });
        let mut cache = self.lock();
        if cache.len() >= self.max && !cache.contains_key(&key) {
            // Evict the oldest read.
            if let Some(oldest) = cache
                .iter()
                .min_by_key(|(_, s)| s.loaded)
                .map(|(k, _)| k.clone())
            {
                cache.remove(&oldest);
            }
        }
        cache.insert(key, state.clone());
        state
    }

    pub(crate) fn forget(&self, owner: SpamOwner<'_>) {
        self.lock().remove(&key(owner));
    }

    async fn load(&self, owner: SpamOwner<'_>) -> Result<State, directory::DirectoryError> {
        let rows = self.directory.spam_model(owner).await?;
        let model = spam::Model {
            messages: spam::Counts {
                spam: u32::try_from(rows.spam_messages).unwrap_or(u32::MAX),
                ham: u32::try_from(rows.ham_messages).unwrap_or(u32::MAX),
            },
            tokens: rows
                .tokens
                .into_iter()
                .map(|(token, spam, ham)| (token, spam::Counts { spam, ham }))
                .collect(),
        };
        let reputation = match owner {
            SpamOwner::User(user) => self
                .directory
                .spam_reputation_all(user)
                .await?
                .into_iter()
                .map(|(k, spam, ham)| (k, spam::Counts { spam, ham }))
                .collect(),
            SpamOwner::Site => HashMap::new(),
        };
        Ok(State {
            model,
            reputation,
            loaded: Instant::now(),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<State>>> {
        self.cache.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Owners cached and the bytes their models hold, for `spam stats` and the benchmark.
    pub(crate) fn footprint(&self) -> (usize, usize) {
        let cache = self.lock();
        (
            cache.len(),
            cache.values().map(|s| s.model.memory_bytes()).sum(),
        )
    }
}
