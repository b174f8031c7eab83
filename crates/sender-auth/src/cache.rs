//! Parsed DNS records kept between messages, by name, until their TTL ends.
//!
//! hickory already caches the DNS answers, but mail-auth parses them again for every message
//! (a DKIM key's base64 and public key, an SPF or DMARC record) unless it is handed caches of
//! parsed records: these. Bounded: at most [`RECORD_CACHE_ENTRIES_MAX`] names per kind, so a
//! stream of messages naming ever new domains cannot grow them without end.

use std::borrow::Borrow;
use std::collections::HashMap;
use std::hash::Hash;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Mutex;
use std::time::Instant;

use mail_auth::{MX, Parameters, RecordSet, ResolverCache, Txt};

/// Names kept per kind of record.
pub const RECORD_CACHE_ENTRIES_MAX: usize = 16_384;

/// One kind of record, by name.
pub(crate) struct RecordCache<K, V> {
    entries: Mutex<HashMap<K, (V, Instant)>>,
}

impl<K, V> Default for RecordCache<K, V> {
    fn default() -> Self {
        RecordCache {
            entries: Mutex::new(HashMap::new()),
        }
    }
}

impl<K: Hash + Eq, V: Clone> ResolverCache<K, V> for RecordCache<K, V> {
    fn get<Q>(&self, name: &Q) -> Option<V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        match entries.get(name) {
            Some((value, until)) if *until > Instant::now() => Some(value.clone()),
            Some(_) => {
                entries.remove(name);
                None
            }
            None => None,
        }
    }

    fn remove<Q>(&self, name: &Q) -> Option<V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        entries.remove(name).map(|(value, _)| value)
    }

    fn insert(&self, name: K, value: V, valid_until: Instant) {
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        if entries.len() >= RECORD_CACHE_ENTRIES_MAX {
            let now = Instant::now();
            entries.retain(|_, (_, until)| *until > now);
            if entries.len() >= RECORD_CACHE_ENTRIES_MAX {
                // Still full of live records: start over rather than pick victims one by
                // one under the lock.
                entries.clear();
            }
        }
        entries.insert(name, (value, valid_until));
    }
}

/// The caches one `Checker` hands to mail-auth.
#[derive(Default)]
pub(crate) struct Caches {
    pub(crate) txt: RecordCache<Box<str>, Txt>,
    pub(crate) mx: RecordCache<Box<str>, RecordSet<MX>>,
    pub(crate) ipv4: RecordCache<Box<str>, RecordSet<Ipv4Addr>>,
    pub(crate) ipv6: RecordCache<Box<str>, RecordSet<Ipv6Addr>>,
    pub(crate) ptr: RecordCache<IpAddr, RecordSet<Box<str>>>,
}

/// mail-auth's parameters with every cache of a `Caches`.
pub(crate) type Cached<'x, P> = Parameters<
    'x,
    P,
    RecordCache<Box<str>, Txt>,
    RecordCache<Box<str>, RecordSet<MX>>,
    RecordCache<Box<str>, RecordSet<Ipv4Addr>>,
    RecordCache<Box<str>, RecordSet<Ipv6Addr>>,
    RecordCache<IpAddr, RecordSet<Box<str>>>,
>;

impl Caches {
    /// `params` with these caches attached.
    pub(crate) fn parameters<P>(&self, params: P) -> Cached<'_, P> {
        Parameters::new(params)
            .with_txt_cache(&self.txt)
            .with_mx_cache(&self.mx)
            .with_ipv4_cache(&self.ipv4)
            .with_ipv6_cache(&self.ipv6)
            .with_ptr_cache(&self.ptr)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn entries_expire_and_the_cache_stays_bounded() {
        let cache: RecordCache<Box<str>, u32> = RecordCache::default();
        let later = Instant::now() + Duration::from_secs(60);
        cache.insert("a".into(), 1, later);
        cache.insert("gone".into(), 2, Instant::now());
        assert_eq!(cache.get("a"), Some(1));
        assert_eq!(cache.get("gone"), None);
        for n in 0..(RECORD_CACHE_ENTRIES_MAX as u32 + 10) {
            cache.insert(n.to_string().into(), n, later);
        }
        assert!(cache.entries.lock().unwrap().len() <= RECORD_CACHE_ENTRIES_MAX);
        assert_eq!(
            cache.remove(&*(RECORD_CACHE_ENTRIES_MAX as u32 + 9).to_string()),
            Some(RECORD_CACHE_ENTRIES_MAX as u32 + 9)
        );
    }
}
