//! The parking lot: an IMAP connection whose session waits in IDLE with nothing in flight
//! leaves its task and its place in the runtime's poller for a compact entry here, and gets
//! them back when it has something to do. Thousands of clients sit in IDLE for hours (every
//! phone, every desktop client), and a parked connection costs its hibernated session
//! ([`imap::Hibernated`]), its socket and this entry: about a tenth of a connection that keeps
//! its task (docs/benchmarks.md, 10,000 idle IMAP connections). Dovecot's `imap-hibernate`
//! does the same for the same reason.
//!
//! One thread waits on an epoll set of the parked sockets, with a timeout to the earliest
//! parked deadline. A connection is woken (a new task runs it through the driver again) by
//!
//! - input from its client, or its client closing ([`Wake::Input`]);
//! - a change to its user's mail, or its user being revoked ([`Parking::wake_user`], called
//!   by `mailboxes::Sessions` after it told the user's sessions);
//! - its idle timeout or its IDLE deadline ([`Wake::Time`]);
//! - the server shutting down ([`Parking::close`]).
//!
//! Only plaintext connections park: a TLS or compressed stream's state lives in the task.
//!
//! No wakeup is lost between the driver deciding to park and the entry being in the lot:
//! [`Parking::park`] looks at the session's change and revocation signals under the lot's
//! lock, after the entry is findable, and whoever signals a user does so before it takes
//! that lock ([`Parking::wake_user`]).

use std::collections::{BTreeSet, HashMap};
use std::future::Future;
use std::os::fd::OwnedFd;
use std::pin::Pin;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use mailboxes::Membership;
use rustix::event::epoll;
use tokio::sync::watch;
use tokio::time::Instant;

/// The epoll token of the lot's own bell (an eventfd): rung when the lot closes or a new
/// entry's timer is earlier than every other.
const BELL: u64 = u64::MAX;

/// The longest the poller sleeps without looking at its timers (a clock that jumped).
const POLL_MAX: Duration = Duration::from_secs(60);

/// What runs a woken connection again (in a new task): given back its socket, its place
/// among its user's sessions, the shutdown signal, and why it woke.
pub(crate) type Resume = Box<
    dyn FnOnce(
            tokio::net::TcpStream,
            Membership,
            watch::Receiver<bool>,
            Wake,
        ) -> Pin<Box<dyn Future<Output = ()> + Send>>
        + Send,
>;

/// A parked connection: what the lot watches (its socket, its user's signals, the
/// shutdown, its timer) and what runs it again (the hibernated session, its place among the
/// connections and its deadline clocks are inside `resume`).
pub(crate) struct Parked {
    pub(crate) user: String,
    pub(crate) stream: std::net::TcpStream,
    pub(crate) member: Membership,
    pub(crate) shutdown: watch::Receiver<bool>,
    /// When to wake it with no news: the earlier of its first deadline and its idle
    /// timeout.
    pub(crate) wake_at: Instant,
    pub(crate) resume: Resume,
}

/// Why a parked connection was woken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wake {
    /// Its client sent something, or closed.
    Input,
    /// Its user's mail changed, or the user was revoked.
    Change,
    /// Its deadline or idle timeout.
    Time,
    /// The server is shutting down.
    Close,
    /// The lot did not take it (news on its way in, the lot closing, an epoll error): it
    /// waits in its task before it may park again, or it would come straight back.
    Refused,
}

/// The lot, shared; the poller thread starts with the first parked connection.
#[derive(Clone, Default)]
pub struct Parking(Arc<Lot>);

#[derive(Default)]
struct Lot {
    state: Mutex<State>,
    poller: OnceLock<Poller>,
}

struct Poller {
    epoll: OwnedFd,
    bell: OwnedFd,
    runtime: tokio::runtime::Handle,
}

#[derive(Default)]
struct State {
    next_token: u64,
    parked: HashMap<u64, Box<Parked>>,
    /// Tokens by user, for [`Parking::wake_user`].
    by_user: HashMap<String, Vec<u64>>,
    /// (wake_at, token), earliest first.
    timers: BTreeSet<(Instant, u64)>,
    closed: bool,
}

impl State {
    /// Takes `token` out of every index and out of the epoll set (the runtime's poller
    /// takes the socket next; both watching it would wake this thread for nothing).
    fn take(&mut self, epoll: &OwnedFd, token: u64) -> Option<Box<Parked>> {
        let parked = self.parked.remove(&token)?;
        self.timers.remove(&(parked.wake_at, token));
        let user = parked.user.as_str();
        if let Some(tokens) = self.by_user.get_mut(user) {
            tokens.retain(|t| *t != token);
            if tokens.is_empty() {
                self.by_user.remove(user);
            }
        }
        let _ = epoll::delete(epoll, &parked.stream);
        Some(parked)
    }
}

impl Parking {
    /// What `mailboxes::Sessions` calls after it signalled a user's sessions: wakes that
    /// user's parked connections.
    pub fn waker(&self) -> mailboxes::Waker {
        let lot = self.clone();
        Arc::new(move |user: &str| lot.wake_user(user))
    }

    /// Connections parked now.
    pub fn len(&self) -> usize {
        self.state().parked.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.0.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Parks `parked`, or, when it cannot wait here (news came while it was on its way, the
    /// server is closing, the poller could not start), runs it again at once.
    pub(crate) fn park(&self, parked: Parked) {
        let poller = match self.poller() {
            Ok(poller) => poller,
            Err(e) => {
                tracing::warn!(event = "park_error", error = %e);
                return resume_on(&tokio::runtime::Handle::current(), parked, Wake::Refused);
            }
        };
        let mut state = self.state();
        let news = state.closed
            || parked.member.changes.has_changed().unwrap_or(true)
            || parked.member.revoked.borrow().is_some()
            || *parked.shutdown.borrow();
        if news {
            drop(state);
            return resume_on(&poller.runtime, parked, Wake::Refused);
        }
        let token = state.next_token;
        state.next_token += 1;
        if let Err(e) = epoll::add(
            &poller.epoll,
            &parked.stream,
            epoll::EventData::new_u64(token),
            epoll::EventFlags::IN | epoll::EventFlags::RDHUP,
        ) {
            drop(state);
            tracing::warn!(event = "park_error", error = %e);
            return resume_on(&poller.runtime, parked, Wake::Refused);
        }
        let earliest = state
            .timers
            .first()
            .is_none_or(|(at, _)| parked.wake_at < *at);
        state.timers.insert((parked.wake_at, token));
        state
            .by_user
            .entry(parked.user.clone())
            .or_default()
            .push(token);
        state.parked.insert(token, Box::new(parked));
        drop(state);
        if earliest {
            ring(&poller.bell);
        }
    }

    /// Wakes every parked connection of `user`: its mail changed, or it was revoked.
    pub(crate) fn wake_user(&self, user: &str) {
        let Some(poller) = self.0.poller.get() else {
            return;
        };
        let woken: Vec<Box<Parked>> = {
            let mut state = self.state();
            let tokens = state.by_user.remove(user).unwrap_or_default();
            tokens
                .into_iter()
                .filter_map(|token| state.take(&poller.epoll, token))
                .collect()
        };
        for parked in woken {
            resume_on(&poller.runtime, *parked, Wake::Change);
        }
    }

    /// The server is shutting down: every parked connection is woken to say goodbye, and
    /// none parks again.
    pub(crate) fn close(&self) {
        self.state().closed = true;
        if let Some(poller) = self.0.poller.get() {
            ring(&poller.bell);
        }
    }

    fn poller(&self) -> std::io::Result<&Poller> {
        if let Some(poller) = self.0.poller.get() {
            return Ok(poller);
        }
        let epoll = epoll::create(epoll::CreateFlags::CLOEXEC)?;
        let bell = rustix::event::eventfd(
            0,
            rustix::event::EventfdFlags::CLOEXEC | rustix::event::EventfdFlags::NONBLOCK,
        )?;
        epoll::add(
            &epoll,
            &bell,
            epoll::EventData::new_u64(BELL),
            epoll::EventFlags::IN,
        )?;
        let poller = Poller {
            epoll,
            bell,
            runtime: tokio::runtime::Handle::current(),
        };
        if self.0.poller.set(poller).is_ok() {
            let lot = self.clone();
            std::thread::Builder::new()
                .name("imap-parking".into())
                .spawn(move || lot.run())?;
        }
        // Set by this call or by a racing one, whose thread runs.
        Ok(self.0.poller.get().expect("set above"))
    }

    /// The poller thread: wakes what is due until the lot closes.
    fn run(self) {
        let Some(poller) = self.0.poller.get() else {
            return;
        };
        let mut events: Vec<epoll::Event> = Vec::with_capacity(256);
        loop {
            let timeout = {
                let state = self.state();
                let now = Instant::now();
                state
                    .timers
                    .first()
                    .map_or(POLL_MAX, |(at, _)| at.saturating_duration_since(now))
                    .min(POLL_MAX)
            };
            let timeout = rustix::event::Timespec {
                tv_sec: timeout.as_secs() as i64,
                // Rounded up: a timer is never looked at before it is due.
                tv_nsec: i64::from(timeout.subsec_nanos()).max(1),
            };
            events.clear();
            if let Err(e) = epoll::wait(
                &poller.epoll,
                rustix::buffer::spare_capacity(&mut events),
                Some(&timeout),
            ) && e != rustix::io::Errno::INTR
            {
                tracing::error!(event = "park_error", error = %e);
                std::thread::sleep(Duration::from_millis(100));
            }
            let mut woken = Vec::new();
            let closed = {
                let mut state = self.state();
                for event in &events {
                    match event.data.u64() {
                        BELL => {
                            let mut count = [0u8; 8];
                            let _ = rustix::io::read(&poller.bell, &mut count);
                        }
                        token => {
                            if let Some(parked) = state.take(&poller.epoll, token) {
                                woken.push((parked, Wake::Input));
                            }
                        }
                    }
                }
                let now = Instant::now();
                while let Some(&(at, token)) = state.timers.first() {
                    if at > now {
                        break;
                    }
                    match state.take(&poller.epoll, token) {
                        Some(parked) => woken.push((parked, Wake::Time)),
                        None => {
                            state.timers.pop_first();
                        }
                    }
                }
                if state.closed {
                    let tokens: Vec<u64> = state.parked.keys().copied().collect();
                    for token in tokens {
                        if let Some(parked) = state.take(&poller.epoll, token) {
                            woken.push((parked, Wake::Close));
                        }
                    }
                }
                state.closed
            };
            for (parked, why) in woken {
                resume_on(&poller.runtime, *parked, why);
            }
            if closed {
                return;
            }
        }
    }
}

fn ring(bell: &OwnedFd) {
    let _ = rustix::io::write(bell, &1u64.to_ne_bytes());
}

/// Runs a woken connection again: a new task takes its socket back into the runtime and
/// drives its session from where it stopped.
fn resume_on(runtime: &tokio::runtime::Handle, parked: Parked, why: Wake) {
    runtime.spawn(async move {
        let Parked {
            stream,
            mut member,
            shutdown,
            resume,
            ..
        } = parked;
        let Ok(stream) = tokio::net::TcpStream::from_std(stream) else {
            return;
        };
        // The session looks at the store when it runs: the news that woke it is taken.
        member.changes.borrow_and_update();
        resume(stream, member, shutdown, why).await;
    });
}
