//! Failed-login throttling that cannot be raced or reset by a guesser.
//!
//! Failures are counted at three levels, each with its own limit: per (client address, user
//! name) a low one, per client address a higher one, and per network (the /24 of an IPv4
//! address, the /64 of an IPv6 one) a higher one still. So one user's typos behind a NAT lock
//! out that user at that address, not everyone behind it, while a guesser spraying many names
//! from one address, or from a whole network, is stopped too.
//!
//! - **Attempts in flight count.** [`Throttle::gate`] takes one attempt per (address, user)
//!   at a time: a second attempt of the same user from the same address waits until the first
//!   one's verdict is in, so it is judged with that failure counted (a mail client opening
//!   five connections at once waits a moment; the later ones find its login remembered).
//!   Attempts in flight also count toward the address and network limits, so sixty parallel
//!   guesses for sixty names from one address are limited like sixty sequential ones. A
//!   ticket dropped without a verdict (the client hung up while its password was checked)
//!   counts as a failure.
//! - **A success clears only its own user at its own address.** The address and network
//!   counts are never cleared by a success, so logging in to an account of one's own does not
//!   buy more guesses at another.
//! - **Delay before refusal.** Below the limits, each attempt waits `delay_base × 2^(k-1)`
//!   (at most `delay_max`) before it is verified, `k` being the busiest level's failures scaled
//!   to the user level's limit (failures only: clients that log in a lot at once are not
//!   slowed down for it); at a limit the attempt is refused without being verified, until
//!   `window` has passed since that level's last failure.
//!
//! Memory is bounded: at most [`ENTRIES_MAX`] counters; past it the oldest half goes.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Counters kept at most.
pub(crate) const ENTRIES_MAX: usize = 65_536;
/// Turn locks kept before the ones no attempt holds any more are swept out (they go as soon
/// as their attempts do; this only bounds how often the map is swept).
const TURNS_SWEEP_AT: usize = 8192;
/// Longest user name kept as a key (the longest address is 254 bytes).
const USER_KEY_BYTES_MAX: usize = 254;

/// The limits; see the module documentation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ThrottleConfig {
    /// Failures of one user name from one address (default 5).
    pub user_failures_max: u32,
    /// Failures from one address, all user names (default 30).
    pub address_failures_max: u32,
    /// Failures from one /24 (IPv4) or /64 (IPv6) network (default 100).
    pub network_failures_max: u32,
    /// How long a level's failures count after its last one (default 10 minutes).
    pub window: Duration,
    /// The first delay (default 250 ms); it doubles with each failure.
    pub delay_base: Duration,
    /// The longest delay before a verification (default 8 s).
    pub delay_max: Duration,
}

impl Default for ThrottleConfig {
    fn default() -> Self {
        ThrottleConfig {
            user_failures_max: 5,
            address_failures_max: 30,
            network_failures_max: 100,
            window: Duration::from_secs(600),
            delay_base: Duration::from_millis(250),
            delay_max: Duration::from_secs(8),
        }
    }
}

/// What a counter counts.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Key {
    User(IpAddr, String),
    Address(IpAddr),
    Network(IpAddr),
}

impl Key {
    fn keys(ip: IpAddr, user: &str) -> [Key; 3] {
        [
            Key::User(ip, user_key(user)),
            Key::Address(ip),
            Key::Network(network(ip)),
        ]
    }
}

/// The name as a key: case-folded and cut, so variants of one name share a counter.
fn user_key(user: &str) -> String {
    let mut key = user.trim().to_ascii_lowercase();
    if key.len() > USER_KEY_BYTES_MAX {
        let mut cut = USER_KEY_BYTES_MAX;
        while !key.is_char_boundary(cut) {
            cut -= 1;
        }
        key.truncate(cut);
    }
    key
}

/// The /24 of an IPv4 address, the /64 of an IPv6 one (IPv4-mapped IPv6 as IPv4).
pub(crate) fn network(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(v4) => {
            let [a, b, c, _] = v4.octets();
            IpAddr::from([a, b, c, 0])
        }
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => network(IpAddr::V4(v4)),
            None => {
                let s = v6.segments();
                IpAddr::from([s[0], s[1], s[2], s[3], 0, 0, 0, 0])
            }
        },
    }
}

#[derive(Debug, Clone, Copy)]
struct Counter {
    failures: u32,
    in_flight: u32,
    last: Instant,
}

impl Counter {
    fn count(&self) -> u32 {
        self.failures.saturating_add(self.in_flight)
    }
}

struct Inner {
    /// Replaced on reload (SIGHUP); counters carry over.
    config: std::sync::RwLock<ThrottleConfig>,
    counters: Mutex<HashMap<Key, Counter>>,
    /// One lock per (address, user) with an attempt in flight or waiting: exact keys, never
    /// shared, so a guesser's attempts waiting for a busy verifier hold up nobody else.
    turns: Mutex<HashMap<Key, std::sync::Weak<tokio::sync::Mutex<()>>>>,
}

/// Failed-login counters, shared by every listener.
#[derive(Clone)]
pub struct Throttle(Arc<Inner>);

/// The throttle's answer before an attempt is verified.
pub(crate) enum Gate {
    /// Verify after `delay`, then give the verdict to the ticket. `suspect`: the address
    /// or its network has failed recently (its verification waits behind clean ones).
    Check {
        delay: Duration,
        suspect: bool,
        ticket: Ticket,
    },
    /// Refused without verifying: the level named is at its limit.
    Refuse(Level),
}

/// Which level refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Level {
    User,
    Address,
    Network,
}

impl Level {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Level::User => "user",
            Level::Address => "address",
            Level::Network => "network",
        }
    }
}

/// An attempt in flight; its verdict goes back to the counters. Until then no other attempt
/// of the same user from the same address is let through.
pub(crate) struct Ticket {
    throttle: Throttle,
    keys: [Key; 3],
    resolved: bool,
    _turn: tokio::sync::OwnedMutexGuard<()>,
}

/// One blocked counter, for `mailstow auth blocked`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Blocked {
    pub(crate) key: Key,
    pub(crate) failures: u32,
    /// Until the block lifts, if no further failure comes.
    pub(crate) remaining: Duration,
}

impl Throttle {
    pub fn new(config: ThrottleConfig) -> Throttle {
        Throttle(Arc::new(Inner {
            config: std::sync::RwLock::new(config),
            counters: Mutex::new(HashMap::new()),
            turns: Mutex::new(HashMap::new()),
        }))
    }

    fn config(&self) -> ThrottleConfig {
        *self.0.config.read().unwrap_or_else(|p| p.into_inner())
    }

    /// New limits for the next attempts (a reload).
    pub(crate) fn set_config(&self, config: ThrottleConfig) {
        *self.0.config.write().unwrap_or_else(|p| p.into_inner()) = config;
    }

    fn counters(&self) -> std::sync::MutexGuard<'_, HashMap<Key, Counter>> {
        self.0.counters.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn limit(&self, key: &Key) -> u32 {
        let config = self.config();
        match key {
            Key::User(..) => config.user_failures_max,
            Key::Address(_) => config.address_failures_max,
            Key::Network(_) => config.network_failures_max,
        }
    }

    /// Waits for the turn of `user` at `ip` (the verdict of its attempt in flight, if any),
    /// then counts this attempt and says whether (and when) to verify it.
    pub(crate) async fn gate(&self, ip: IpAddr, user: &str) -> Gate {
        let keys = Key::keys(ip, user);
        let turn = self.turn_lock(&keys[0]).lock_owned().await;
        self.counted(keys, turn)
    }

    /// The lock of one (address, user).
    fn turn_lock(&self, key: &Key) -> Arc<tokio::sync::Mutex<()>> {
        let mut turns = self.0.turns.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(lock) = turns.get(key).and_then(std::sync::Weak::upgrade) {
            return lock;
        }
        if turns.len() >= TURNS_SWEEP_AT {
            turns.retain(|_, lock| lock.strong_count() > 0);
        }
        let lock = Arc::new(tokio::sync::Mutex::new(()));
        turns.insert(key.clone(), Arc::downgrade(&lock));
        lock
    }

    fn counted(&self, keys: [Key; 3], turn: tokio::sync::OwnedMutexGuard<()>) -> Gate {
        let config = self.config();
        let now = Instant::now();
        let mut counters = self.counters();
        let mut scaled = 0u64;
        let mut suspect = false;
        for (key, level) in keys
            .iter()
            .zip([Level::User, Level::Address, Level::Network])
        {
            let (count, failures) = match counters.get_mut(key) {
                Some(counter) if now.duration_since(counter.last) > config.window => {
                    counter.failures = 0;
                    (counter.count(), 0)
                }
                Some(counter) => {
                    suspect |= level != Level::User && counter.failures > 0;
                    (counter.count(), counter.failures)
                }
                None => (0, 0),
            };
            let limit = self.limit(key).max(1);
            if count >= limit {
                return Gate::Refuse(level);
            }
            // The level's failures on the user level's scale.
            let k =
                u64::from(failures) * u64::from(config.user_failures_max.max(1)) / u64::from(limit);
            scaled = scaled.max(k);
        }
        if counters.len() + keys.len() > ENTRIES_MAX {
            prune(&mut counters);
        }
        for key in &keys {
            let counter = counters.entry(key.clone()).or_insert(Counter {
                failures: 0,
                in_flight: 0,
                last: now,
            });
            counter.in_flight = counter.in_flight.saturating_add(1);
        }
        let delay = match scaled {
            0 => Duration::ZERO,
            k => {
                let shift = u32::try_from(k - 1).unwrap_or(u32::MAX).min(20);
                config
                    .delay_base
                    .saturating_mul(1 << shift)
                    .min(config.delay_max)
            }
        };
        Gate::Check {
            delay,
            suspect,
            ticket: Ticket {
                throttle: self.clone(),
                keys,
                resolved: false,
                _turn: turn,
            },
        }
    }

    fn resolve(&self, keys: &[Key; 3], success: bool) {
        let now = Instant::now();
        let mut counters = self.counters();
        for key in keys {
            let Some(counter) = counters.get_mut(key) else {
                continue;
            };
            counter.in_flight = counter.in_flight.saturating_sub(1);
            if success {
                // Only the user's own counter at this address is cleared.
                if matches!(key, Key::User(..)) {
                    counter.failures = 0;
                }
            } else {
                counter.failures = counter.failures.saturating_add(1);
                counter.last = now;
            }
            if counter.count() == 0 {
                counters.remove(key);
            }
        }
    }

    /// Whether `ip` itself (its address or its network, not one user at it) is at its limit:
    /// such a client is refused at connect, before anything else is spent on it.
    pub(crate) fn address_blocked(&self, ip: IpAddr) -> Option<Level> {
        let now = Instant::now();
        let window = self.config().window;
        let counters = self.counters();
        [
            (Key::Address(ip), Level::Address),
            (Key::Network(network(ip)), Level::Network),
        ]
        .into_iter()
        .find(|(key, _)| {
            counters.get(key).is_some_and(|c| {
                now.duration_since(c.last) <= window && c.failures >= self.limit(key)
            })
        })
        .map(|(_, level)| level)
    }

    /// Every counter at its limit, sorted.
    pub(crate) fn blocked(&self) -> Vec<Blocked> {
        let now = Instant::now();
        let window = self.config().window;
        let counters = self.counters();
        let mut blocked: Vec<Blocked> = counters
            .iter()
            .filter(|(key, counter)| {
                now.duration_since(counter.last) <= window && counter.count() >= self.limit(key)
            })
            .map(|(key, counter)| Blocked {
                key: key.clone(),
                failures: counter.failures,
                remaining: window.saturating_sub(now.duration_since(counter.last)),
            })
            .collect();
        blocked.sort_by(|a, b| a.key.cmp(&b.key));
        blocked
    }

    /// Clears every counter of an address (with its network) or of a user name (at every
    /// address). Returns how many counters went.
    pub(crate) fn unblock(&self, what: &str) -> usize {
        let mut counters = self.counters();
        let before = counters.len();
        match what.trim().parse::<IpAddr>() {
            Ok(ip) => {
                let net = network(ip);
                counters.retain(|key, _| match key {
                    Key::User(a, _) | Key::Address(a) => *a != ip,
                    Key::Network(n) => *n != net,
                });
            }
            Err(_) => {
                let user = user_key(what);
                counters.retain(|key, _| !matches!(key, Key::User(_, u) if *u == user));
            }
        }
        before - counters.len()
    }
}

/// Drops the older half of the counters (a spray from many addresses must not grow the map
/// without bound). Counters with attempts in flight stay.
fn prune(counters: &mut HashMap<Key, Counter>) {
    let mut by_age: Vec<(Instant, Key)> = counters
        .iter()
        .filter(|(_, c)| c.in_flight == 0)
        .map(|(k, c)| (c.last, k.clone()))
        .collect();
    by_age.sort_by_key(|(last, _)| *last);
    for (_, key) in by_age.into_iter().take(ENTRIES_MAX / 2) {
        counters.remove(&key);
    }
}

impl Ticket {
    /// The password was right.
    pub(crate) fn succeeded(mut self) {
        self.resolved = true;
        self.throttle.resolve(&self.keys, true);
    }

    /// The password was wrong (or the user unknown).
    pub(crate) fn failed(mut self) {
        self.resolved = true;
        self.throttle.resolve(&self.keys, false);
    }

    /// No verdict (the directory could not answer): the attempt is not counted.
    pub(crate) fn abandoned(mut self) {
        self.resolved = true;
        let mut counters = self.throttle.counters();
        for key in &self.keys {
            if let Some(counter) = counters.get_mut(key) {
                counter.in_flight = counter.in_flight.saturating_sub(1);
                if counter.count() == 0 {
                    counters.remove(key);
                }
            }
        }
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        // The client left while its guess was being checked: still a guess.
        if !self.resolved {
            self.throttle.resolve(&self.keys, false);
        }
    }
}

impl std::fmt::Display for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Key::User(ip, user) => write!(f, "user {user} from {ip}"),
            Key::Address(ip) => write!(f, "address {ip}"),
            Key::Network(net) => match net {
                IpAddr::V4(_) => write!(f, "network {net}/24"),
                IpAddr::V6(_) => write!(f, "network {net}/64"),
            },
        }
    }
}

/// `auth blocked` and `auth unblock` of the admin socket and the admin pages.
impl admin::LoginBlocks for Throttle {
    fn blocked(&self) -> Vec<(String, u32, Duration)> {
        Throttle::blocked(self)
            .into_iter()
            .map(|b| (b.key.to_string(), b.failures, b.remaining))
            .collect()
    }

    fn unblock(&self, what: &str) -> usize {
        Throttle::unblock(self, what)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> ThrottleConfig {
        ThrottleConfig {
            user_failures_max: 3,
            address_failures_max: 6,
            network_failures_max: 9,
            window: Duration::from_millis(200),
            delay_base: Duration::from_millis(10),
            delay_max: Duration::from_millis(40),
        }
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn check(gate: Gate) -> (Duration, Ticket) {
        match gate {
            Gate::Check { delay, ticket, .. } => (delay, ticket),
            Gate::Refuse(level) => panic!("refused at the {level:?} level"),
        }
    }

    fn refused(gate: Gate) -> Level {
        match gate {
            Gate::Refuse(level) => level,
            Gate::Check { .. } => panic!("not refused"),
        }
    }

    #[tokio::test]
    async fn one_attempt_per_user_and_address_at_a_time() {
        let t = Throttle::new(config());
        let a = ip("10.0.0.1");
        let (_, first) = check(t.gate(a, "u").await);
        // The same user from the same address waits for the first verdict ...
        let waiting = tokio::time::timeout(Duration::from_millis(50), t.gate(a, "U")).await;
        assert!(
            waiting.is_err(),
            "a second attempt was let through before the verdict"
        );
        // ... which it is then judged with.
        let t2 = t.clone();
        let second = tokio::spawn(async move { check(t2.gate(a, "u").await).0 });
        tokio::time::sleep(Duration::from_millis(20)).await;
        first.failed();
        assert_eq!(second.await.unwrap(), Duration::from_millis(10));
        // Another user, or the same user elsewhere, never waits.
        let _other = check(t.gate(a, "v").await);
        let _elsewhere = check(t.gate(ip("10.9.0.1"), "u").await);
    }

    #[tokio::test]
    async fn attempts_in_flight_count_toward_the_address_limit() {
        let t = Throttle::new(config());
        let a = ip("10.0.0.1");
        let tickets: Vec<Ticket> = futures_join(&t, a, 6).await;
        assert_eq!(refused(t.gate(a, "u6").await), Level::Address);
        drop(tickets); // hung up mid-check: failures
        assert_eq!(refused(t.gate(a, "fresh").await), Level::Address);
        assert_eq!(t.blocked().len(), 1);
        assert_eq!(t.blocked()[0].key, Key::Address(a));
    }

    /// `n` attempts in flight from `ip`, by as many users.
    async fn futures_join(t: &Throttle, ip: IpAddr, n: usize) -> Vec<Ticket> {
        let mut tickets = Vec::new();
        for k in 0..n {
            tickets.push(check(t.gate(ip, &format!("u{k}")).await).1);
        }
        tickets
    }

    #[tokio::test]
    async fn delays_grow_exponentially_with_failures_then_refuse() {
        let t = Throttle::new(config());
        let a = ip("10.0.0.1");
        let mut delays = Vec::new();
        for _ in 0..3 {
            let (delay, ticket) = check(t.gate(a, "u").await);
            delays.push(delay);
            ticket.failed();
        }
        assert_eq!(
            delays,
            [0, 10, 20].map(Duration::from_millis),
            "0, base, 2 × base"
        );
        assert_eq!(refused(t.gate(a, "u").await), Level::User);
        tokio::time::sleep(Duration::from_millis(250)).await;
        assert_eq!(
            check(t.gate(a, "u").await).0,
            Duration::ZERO,
            "the window passed"
        );
        // Many attempts in flight without failures cost no delay.
        let t = Throttle::new(config());
        let tickets = futures_join(&t, a, 5).await;
        assert_eq!(check(t.gate(a, "x").await).0, Duration::ZERO);
        drop(tickets);
    }

    #[tokio::test]
    async fn a_success_clears_only_its_own_user_and_never_the_address() {
        let t = Throttle::new(config());
        let a = ip("10.0.0.1");
        for _ in 0..2 {
            check(t.gate(a, "victim").await).1.failed();
        }
        // The guesser logs in to an account of its own: the victim's count stays.
        check(t.gate(a, "mine").await).1.succeeded();
        check(t.gate(a, "victim").await).1.failed();
        assert_eq!(refused(t.gate(a, "victim").await), Level::User);
        // Another user at the same address still gets in (one user's typos behind a NAT).
        let (delay, ticket) = check(t.gate(a, "colleague").await);
        assert!(delay <= Duration::from_millis(20), "{delay:?}");
        ticket.succeeded();
        // But the address as a whole has a limit: 3 victim + 3 more failures.
        for name in ["x", "y", "z"] {
            check(t.gate(a, name).await).1.failed();
        }
        assert_eq!(refused(t.gate(a, "fresh").await), Level::Address);
    }

    #[tokio::test]
    async fn a_network_is_limited_across_its_addresses() {
        let t = Throttle::new(config());
        for n in 1..=9 {
            let ip = ip(&format!("192.0.2.{n}"));
            check(t.gate(ip, &format!("u{n}")).await).1.failed();
        }
        assert_eq!(
            refused(t.gate(ip("192.0.2.200"), "v").await),
            Level::Network
        );
        assert!(matches!(
            t.gate(ip("192.0.3.1"), "v").await,
            Gate::Check { .. }
        ));
        let v6 = ip("2001:db8:1:2:3:4:5:6");
        assert_eq!(network(v6), ip("2001:db8:1:2::"));
        assert_eq!(network(ip("::ffff:192.0.2.9")), ip("192.0.2.0"));
    }

    #[tokio::test]
    async fn unblock_by_address_or_user() {
        let t = Throttle::new(config());
        let a = ip("10.0.0.1");
        for _ in 0..3 {
            check(t.gate(a, "u").await).1.failed();
        }
        for _ in 0..3 {
            check(t.gate(ip("10.0.0.2"), "w").await).1.failed();
        }
        assert_eq!(t.blocked().len(), 2);
        assert!(t.unblock("U") >= 1);
        assert!(matches!(t.gate(a, "u").await, Gate::Check { .. }));
        assert!(t.unblock("10.0.0.2") >= 2);
        assert!(matches!(
            t.gate(ip("10.0.0.2"), "w").await,
            Gate::Check { .. }
        ));
        assert_eq!(t.unblock("nobody"), 0);
    }

    #[tokio::test]
    async fn an_address_or_network_with_failures_is_suspect() {
        let t = Throttle::new(config());
        let suspect = |gate: Gate| match gate {
            Gate::Check { suspect, .. } => suspect,
            Gate::Refuse(_) => panic!("refused"),
        };
        assert!(!suspect(t.gate(ip("10.0.0.1"), "u").await));
        check(t.gate(ip("10.0.0.1"), "u").await).1.failed();
        assert!(suspect(t.gate(ip("10.0.0.1"), "other").await));
        assert!(suspect(t.gate(ip("10.0.0.2"), "x").await), "same network");
        assert!(!suspect(t.gate(ip("10.0.1.1"), "x").await));
    }

    #[tokio::test]
    async fn a_blocked_address_or_network_is_known_before_any_login() {
        let t = Throttle::new(config());
        let a = ip("10.0.0.1");
        for n in 0..6 {
            check(t.gate(a, &format!("u{n}")).await).1.failed();
        }
        assert_eq!(t.address_blocked(a), Some(Level::Address));
        assert_eq!(t.address_blocked(ip("10.0.0.2")), None);
        for n in 2..5 {
            check(t.gate(ip(&format!("10.0.0.{n}")), "x").await)
                .1
                .failed();
        }
        assert_eq!(t.address_blocked(ip("10.0.0.9")), Some(Level::Network));
    }

    #[tokio::test]
    async fn an_abandoned_attempt_is_not_a_failure() {
        let t = Throttle::new(config());
        let a = ip("10.0.0.1");
        for _ in 0..5 {
            check(t.gate(a, "u").await).1.abandoned();
        }
        assert_eq!(check(t.gate(a, "u").await).0, Duration::ZERO);
    }

    #[tokio::test]
    async fn turn_locks_go_with_their_attempts() {
        let t = Throttle::new(config());
        for n in 0..(TURNS_SWEEP_AT + 100) {
            let ticket = check(t.gate(ip("10.1.0.1"), &format!("user{n}")).await).1;
            ticket.abandoned();
        }
        assert!(t.0.turns.lock().unwrap().len() <= TURNS_SWEEP_AT);
    }

    #[tokio::test]
    async fn the_map_is_bounded() {
        let t = Throttle::new(ThrottleConfig {
            window: Duration::from_secs(600),
            ..ThrottleConfig::default()
        });
        for n in 0..(ENTRIES_MAX as u32 / 3 + 10) {
            // One address per /24, so no network reaches its limit.
            let ip = IpAddr::from((n << 8).to_be_bytes());
            check(t.gate(ip, "u").await).1.failed();
        }
        assert!(t.counters().len() <= ENTRIES_MAX);
    }
}
