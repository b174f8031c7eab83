//! DNS blocklists and allowlists (RFC 5782): the client's address and the message's domains
//! looked up in each configured zone, all at once, within one bounded wait; answers cached
//! for their TTL; a zone that did not answer in time is skipped for a while, so a dead list
//! costs one short wait, not one per message.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hickory_resolver::TokioResolver;
use hickory_resolver::proto::rr::RData;

use crate::config::{Zone, ZoneKind};

/// How long a zone that timed out is not asked again.
const DEAD_FOR: Duration = Duration::from_secs(60);
/// Answers are kept at least this long and at most this long, whatever their TTL says.
const TTL_MIN: Duration = Duration::from_secs(60);
const TTL_MAX: Duration = Duration::from_secs(3600);
/// The reason text (TXT) of a listing kept, in bytes.
const REASON_BYTES_MAX: usize = 200;

/// One listing found.
#[derive(Clone, Debug, PartialEq)]
pub struct Listing {
    pub zone: String,
    /// What was listed: the client's address or a domain.
    pub listed: String,
    /// The zone's TXT record for it (RFC 5782 2.1), when it has one.
    pub reason: Option<String>,
    pub weight: f64,
    pub reject: bool,
}

#[derive(Clone, Debug)]
enum Answer {
    NotListed,
    /// The A records of the query name.
    Listed(Vec<Ipv4Addr>, Option<String>),
}

/// The zones and their cache; one per node.
pub struct Blocklists {
    resolver: Option<TokioResolver>,
    zones: Vec<Zone>,
    timeout: Duration,
    cache_max: usize,
    cache: Mutex<HashMap<String, (Instant, Answer)>>,
    dead: Mutex<HashMap<String, Instant>>,
}

impl Blocklists {
    /// `resolver` is `None` when there is no zone (nothing is looked up).
    pub fn new(
        resolver: Option<TokioResolver>,
        zones: Vec<Zone>,
        timeout: Duration,
        cache_max: usize,
    ) -> Blocklists {
        Blocklists {
            resolver,
            zones,
            timeout,
            cache_max: cache_max.max(1),
            cache: Mutex::new(HashMap::new()),
            dead: Mutex::new(HashMap::new()),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.zones.is_empty() || self.resolver.is_none()
    }

    pub fn has(&self, kind: ZoneKind) -> bool {
        !self.is_empty() && self.zones.iter().any(|z| z.kind == kind)
    }

    /// Every listing of `ip` in the address zones and of `domains` in the domain zones,
    /// within one wait of at most the configured timeout: what has not answered by then
    /// counts as not listed (and its zone rests for a minute).
    pub async fn check(self: &Arc<Self>, ip: Option<IpAddr>, domains: &[String]) -> Vec<Listing> {
        self.check_zones(ip, domains, false).await
    }

    /// [`Blocklists::check`] in the zones that refuse a client only.
    pub async fn check_refusing(self: &Arc<Self>, ip: IpAddr) -> Vec<Listing> {
        self.check_zones(Some(ip), &[], true).await
    }

    async fn check_zones(
        self: &Arc<Self>,
        ip: Option<IpAddr>,
        domains: &[String],
        refusing_only: bool,
    ) -> Vec<Listing> {
        let Some(resolver) = &self.resolver else {
            return Vec::new();
        };
        let now = Instant::now();
        let mut lookups = tokio::task::JoinSet::new();
        let mut found = Vec::new();
        // Per zone index: lookups not answered yet.
        let mut pending: HashMap<usize, usize> = HashMap::new();
        for (index, zone) in self.zones.iter().enumerate() {
            if self.resting(&zone.zone, now) || (refusing_only && !zone.reject) {
                continue;
            }
            let names: Vec<(String, String)> = match zone.kind {
                // RFC 5782 2.1, 2.4.
                ZoneKind::Ip => ip
                    .filter(|ip| !ip.is_loopback() || zone_allows_loopback(&zone.zone))
                    .map(|ip| vec![(ip.to_string(), spam::ip_query(ip, &zone.zone))])
                    .unwrap_or_default(),
                // RFC 5782 2.3.
                ZoneKind::Domain => domains
                    .iter()
                    .map(|d| (d.clone(), spam::domain_query(d, &zone.zone)))
                    .collect(),
            };
            for (listed, query) in names {
                if let Some(answer) = self.cached(&query, now) {
                    if let Some(listing) = listing(zone, &listed, &answer) {
                        found.push(listing);
                    }
                    continue;
                }
                let resolver = resolver.clone();
                *pending.entry(index).or_default() += 1;
                lookups.spawn(async move {
                    (
                        index,
                        listed,
                        query.clone(),
                        lookup(&resolver, &query).await,
                    )
                });
            }
        }
        let deadline = tokio::time::Instant::now() + self.timeout;
        loop {
            match tokio::time::timeout_at(deadline, lookups.join_next()).await {
                Ok(Some(Ok((index, listed, query, result)))) => {
                    if let Some(n) = pending.get_mut(&index) {
                        *n -= 1;
                    }
                    let zone = &self.zones[index];
                    match result {
                        Ok((answer, ttl)) => {
                            if let Some(l) = listing(zone, &listed, &answer) {
                                found.push(l);
                            }
                            self.remember(query, answer, ttl);
                        }
                        Err(e) => {
                            tracing::debug!(event = "dnsbl_error", zone = %zone.zone, error = %e);
                        }
                    }
                }
                Ok(Some(Err(_))) => {}
                Ok(None) => break,
                Err(_) => {
                    // The wait is over: whatever zone still owes an answer rests.
                    let late: Vec<&str> = pending
                        .iter()
                        .filter(|(_, n)| **n > 0)
                        .map(|(index, _)| self.zones[*index].zone.as_str())
                        .collect();
                    lookups.abort_all();
                    self.mark_late(&late);
                    break;
                }
            }
        }
        found
    }

    fn resting(&self, zone: &str, now: Instant) -> bool {
        let mut dead = self.dead.lock().unwrap_or_else(|e| e.into_inner());
        match dead.get(zone) {
            Some(until) if *until > now => true,
            Some(_) => {
                dead.remove(zone);
                false
            }
            None => false,
        }
    }

    /// After a timeout: the zones that still owed an answer rest for `DEAD_FOR`.
    fn mark_late(&self, zones: &[&str]) {
        let until = Instant::now() + DEAD_FOR;
        let mut dead = self.dead.lock().unwrap_or_else(|e| e.into_inner());
        for zone in zones {
            tracing::warn!(event = "dnsbl_timeout", zone = %zone, resting_seconds = DEAD_FOR.as_secs());
            dead.insert(zone.to_string(), until);
        }
    }

    fn cached(&self, query: &str, now: Instant) -> Option<Answer> {
        let cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        match cache.get(query) {
            Some((expires, answer)) if *expires > now => Some(answer.clone()),
            _ => None,
        }
    }

    fn remember(&self, query: String, answer: Answer, ttl: Duration) {
        let now = Instant::now();
        let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        if cache.len() >= self.cache_max {
            cache.retain(|_, (expires, _)| *expires > now);
            if cache.len() >= self.cache_max {
                // Still full of live answers: forget them all rather than grow.
                cache.clear();
            }
        }
        cache.insert(query, (now + ttl.clamp(TTL_MIN, TTL_MAX), answer));
    }
}

/// Test zones on loopback list 127.0.0.2 (RFC 5782 5): a loopback client is looked up only
/// in zones whose name says they are for tests.
fn zone_allows_loopback(zone: &str) -> bool {
    zone.ends_with(".test") || zone.ends_with(".example") || zone.ends_with(".invalid")
}

fn listing(zone: &Zone, listed: &str, answer: &Answer) -> Option<Listing> {
    let Answer::Listed(addresses, reason) = answer else {
        return None;
    };
    addresses
        .iter()
        .any(|a| spam::listed(*a, &zone.codes))
        .then(|| Listing {
            zone: zone.zone.clone(),
            listed: listed.to_string(),
            reason: reason.clone(),
            weight: zone.weight,
            reject: zone.reject,
        })
}

/// The A records of `query` and, when there are some, its TXT record; the TTL to keep it.
async fn lookup(resolver: &TokioResolver, query: &str) -> Result<(Answer, Duration), String> {
    let fqdn = format!("{}.", query.trim_end_matches('.'));
    match resolver.ipv4_lookup(fqdn.as_str()).await {
        Ok(lookup) => {
            let mut ttl = TTL_MAX;
            let addresses: Vec<Ipv4Addr> = lookup
                .answers()
                .iter()
                .filter_map(|r| match &r.data {
                    RData::A(a) => {
                        ttl = ttl.min(Duration::from_secs(u64::from(r.ttl)));
                        Some(a.0)
                    }
                    _ => None,
                })
                .collect();
            if addresses.is_empty() {
                return Ok((Answer::NotListed, TTL_MIN));
            }
            let reason = match resolver.txt_lookup(fqdn.as_str()).await {
                Ok(txt) => txt.answers().iter().find_map(|r| match &r.data {
                    RData::TXT(t) => {
                        let text: String = t
                            .txt_data
                            .iter()
                            .map(|part| String::from_utf8_lossy(part).into_owned())
                            .collect();
                        Some(
                            telemetry::shown(&text)
                                .chars()
                                .take(REASON_BYTES_MAX)
                                .collect(),
                        )
                    }
                    _ => None,
                }),
                Err(_) => None,
            };
            Ok((Answer::Listed(addresses, reason), ttl))
        }
        // RFC 5782 2.1: not listed is NXDOMAIN (or no A record).
        Err(e) if e.is_nx_domain() || e.is_no_records_found() => Ok((Answer::NotListed, TTL_MIN)),
        Err(e) => Err(e.to_string()),
    }
}
