//! The one connection driver every protocol runs under: it moves bytes between the socket and
//! a sans-IO session, and owns the clock.
//!
//! Each loop: the protocol runs its session as far as it can ([`Protocol::step`]: writes
//! replies into the connection's output and answers the session's decisions), the driver
//! flushes, then waits for the first of
//!
//! - input from the client (fed to the session);
//! - the session's idle timeout ([`Protocol::timeout`]);
//! - the first of its deadlines ([`Protocol::deadlines`], timed from when each step first
//!   appeared), which trickled input cannot push back;
//! - a change to the logged-in user's mail, while the session wants to hear of it (IMAP IDLE);
//! - the user's deletion (every session of the user ends);
//! - the server shutting down.
//!
//! Every byte written comes from the session: a timeout, a deadline, a deletion or the
//! shutdown only tells the session, which says its goodbye on the next step.
//!
//! A session that waits only for its client or a change, with nothing in flight (IMAP
//! IDLE), may leave its task for the parking lot ([`crate::park`]), which runs it through
//! [`resume`] again when it has something to do.

use std::future::Future;
use std::io;
use std::sync::Arc;
use std::time::Duration;

use limits::Deadlines;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::sync::watch;
use tokio::time::Instant;

use mailboxes::Membership;

use crate::park::{Parked, Wake};
use crate::shell::Shell;
use crate::stream::{Stream, TLS_HANDSHAKE_TIMEOUT, stopping};

/// The first read buffer of a connection; it doubles (up to [`READ_BUFFER_MAX`]) while reads
/// fill it, so idle connections stay small and bulk transfers read in large chunks.
const READ_BUFFER_MIN: usize = 4 << 10;
/// The read buffer of a session that waits for changes (IMAP IDLE): its client sends `DONE`
/// and little else, and thousands of such sessions may wait at once.
const READ_BUFFER_IDLE: usize = 64;
pub(crate) const READ_BUFFER_MAX: usize = 64 << 10;
/// A client that does not take our output within this long is gone.
const WRITE_TIMEOUT: Duration = Duration::from_secs(300);

/// What the driver should do after a step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Step {
    /// The session waits for client input.
    Read,
    /// The session has more to do before it needs input: step again.
    Again,
    /// The session is over: flush and close.
    Close,
    /// The session was handed to the user's node: splice the connection to it
    /// ([`Protocol::take_handover`]).
    Proxy,
}

/// A protocol's session and the shell's answers to its decisions.
pub(crate) trait Protocol: Send + Sized + 'static {
    /// Runs the session until it needs input, is over, or should yield: replies go into
    /// `conn.out`, decisions are answered (they may wait on the directory, the queue or the
    /// store).
    fn step(&mut self, conn: &mut Conn) -> impl Future<Output = Step> + Send;
    fn feed(&mut self, bytes: &[u8]);
    /// How long to wait for input before `timed_out`.
    fn timeout(&self) -> Duration;
    fn deadlines(&self) -> Deadlines;
    fn timed_out(&mut self);
    fn deadline_passed(&mut self);
    fn shutting_down(&mut self);
    /// The logged-in user was deleted, renamed or is being moved (`why`).
    fn revoked(&mut self, why: mailboxes::Ending);
    /// After [`Step::Proxy`]: the connection to the user's node.
    fn take_handover(&mut self) -> Option<cluster::Handover> {
        None
    }
    /// Wake on changes to the user's mail now (IMAP IDLE).
    fn wants_changes(&self) -> bool {
        false
    }
    /// The session in its parked form, if it may park now (it is then gone from `self`):
    /// what makes it again when it wakes. `None` leaves it as it was.
    fn hibernate(&mut self) -> Option<Box<dyn FnOnce() -> Self + Send>> {
        None
    }
}

/// One client connection as the protocols see it.
pub(crate) struct Conn {
    pub(crate) shell: Arc<Shell>,
    pub(crate) stream: Stream,
    /// Replies not yet written.
    pub(crate) out: Vec<u8>,
    /// The logged-in user's place among its sessions, once logged in.
    pub(crate) member: Option<Membership>,
    /// The connection's place and its log; dropped last, when the connection ends.
    pub(crate) held: Option<crate::connections::Held>,
}

impl Conn {
    pub(crate) fn new(shell: Arc<Shell>, stream: Stream) -> Conn {
        Conn {
            shell,
            stream,
            out: Vec::new(),
            member: None,
            held: None,
        }
    }

    /// A parked connection running again.
    pub(crate) fn resumed(
        shell: Arc<Shell>,
        stream: tokio::net::TcpStream,
        member: Membership,
        held: Option<crate::connections::Held>,
    ) -> Conn {
        Conn {
            shell,
            stream: Stream::Plain(stream),
            out: Vec::new(),
            member: Some(member),
            held,
        }
    }

    /// Writes what is pending, within the write timeout: a client that stops reading our
    /// replies must not hold the connection forever.
    pub(crate) async fn flush(&mut self) -> io::Result<()> {
        if self.out.is_empty() {
            return Ok(());
        }
        let out = std::mem::take(&mut self.out);
        let stream = &mut self.stream;
        tokio::time::timeout(WRITE_TIMEOUT, async {
            stream.write_all(&out).await?;
            stream.flush().await
        })
        .await
        .unwrap_or_else(|_| Err(io::ErrorKind::TimedOut.into()))
    }

    /// Flushes (the answer to COMPRESS goes uncompressed), then compresses the connection
    /// both ways (RFC 4978).
    pub(crate) async fn start_compression(&mut self) -> io::Result<()> {
        self.flush().await?;
        let plain = std::mem::replace(&mut self.stream, Stream::Closed);
        self.stream = plain.deflated();
        Ok(())
    }

    /// Flushes (the answer to STARTTLS goes in plaintext), then runs the TLS handshake.
    pub(crate) async fn start_tls(&mut self) -> io::Result<()> {
        self.flush().await?;
        let plain = std::mem::replace(&mut self.stream, Stream::Closed);
        let tls = self.shell.live().tls.clone();
        self.stream = plain.upgrade(&tls, TLS_HANDSHAKE_TIMEOUT).await?;
        Ok(())
    }
}

/// Each deadline kind's step and when the driver first saw it.
#[derive(Default)]
pub(crate) struct Clocks([Option<(u64, Instant)>; 3]);

impl Clocks {
    /// Starts clocks for new steps, stops those gone; returns when the first one is due.
    pub(crate) fn due(&mut self, deadlines: Deadlines, now: Instant) -> Option<Instant> {
        let mut due: Option<Instant> = None;
        for (clock, deadline) in self.0.iter_mut().zip(deadlines.kinds()) {
            let Some(deadline) = deadline else {
                *clock = None;
                continue;
            };
            let started = match clock {
                Some((step, started)) if *step == deadline.step => *started,
                _ => {
                    *clock = Some((deadline.step, now));
                    now
                }
            };
            let at = started + deadline.within;
            due = Some(due.map_or(at, |d| d.min(at)));
        }
        due
    }
}

/// A connection between its steps, in one allocation: what its task keeps while it waits.
struct Link<P> {
    protocol: P,
    conn: Conn,
    shutdown: watch::Receiver<bool>,
    buf: Vec<u8>,
    clocks: Clocks,
    /// Wait here once before parking again: woken by input, which must be read first (the
    /// socket is still readable, so the lot would wake it at once, forever), or refused by
    /// the lot.
    wait_first: bool,
}

/// Runs `protocol` on `conn` until the session ends, the connection fails, or it parks.
pub(crate) fn drive<P: Protocol>(
    protocol: P,
    conn: Conn,
    shutdown: watch::Receiver<bool>,
) -> impl Future<Output = ()> + Send {
    // Not an `async fn`: its arguments would be kept in the future beside the link they
    // were moved into.
    run(Box::new(Link {
        protocol,
        conn,
        shutdown,
        buf: vec![0u8; READ_BUFFER_MIN],
        clocks: Clocks::default(),
        wait_first: false,
    }))
}

/// Runs a parked connection again ([`crate::park`]), its deadline clocks as they were;
/// `wait_first`: it waits in its task once before it may park again (woken by its client,
/// whose input is still to be read, or refused by the lot).
fn resume<P: Protocol>(
    protocol: P,
    conn: Conn,
    shutdown: watch::Receiver<bool>,
    clocks: Clocks,
    wait_first: bool,
) -> impl Future<Output = ()> + Send {
    run(Box::new(Link {
        protocol,
        conn,
        shutdown,
        buf: vec![0u8; READ_BUFFER_IDLE],
        clocks,
        wait_first,
    }))
}

async fn run<P: Protocol>(mut link: Box<Link<P>>) {
    loop {
        let Link {
            protocol,
            conn,
            shutdown,
            clocks,
            wait_first,
            ..
        } = &mut *link;
        // Boxed: a step's state (a command's work) lives only while it runs, so a connection
        // waiting for its client holds none of it.
        let step = Box::pin(protocol.step(conn)).await;
        if Box::pin(conn.flush()).await.is_err() {
            return;
        }
        match step {
            Step::Close => {
                let close = tokio::time::timeout(Duration::from_secs(5), conn.stream.shutdown());
                let _ = Box::pin(close).await;
                return;
            }
            Step::Again => continue,
            Step::Proxy => {
                if let Some(handover) = protocol.take_handover() {
                    let directory = conn.shell.directory.clone();
                    let splice =
                        crate::splice::splice(&mut conn.stream, &directory, handover, shutdown);
                    Box::pin(splice).await;
                }
                return;
            }
            Step::Read => {}
        }
        let now = Instant::now();
        let due = clocks.due(protocol.deadlines(), now);
        let idle = now + protocol.timeout();
        let wake = due.map_or(idle, |due| due.min(idle));
        let wants_changes = protocol.wants_changes();
        // News already waiting (a change, the user's removal, the shutdown) is heard here:
        // the lot would only run the connection again at once.
        let parkable = wants_changes
            && !std::mem::take(wait_first)
            && matches!(conn.stream, Stream::Plain(_))
            && !*shutdown.borrow()
            && conn.member.as_ref().is_some_and(|m| {
                !m.changes.has_changed().unwrap_or(true) && m.revoked.borrow().is_none()
            });
        if parkable {
            link = match park(link, wake) {
                Ok(()) => return,
                Err(link) => link,
            };
        }
        if !wait(&mut link, due, wake, wants_changes).await {
            return;
        }
    }
}

/// Waits for the first thing the session must hear of (see the module's list) and tells
/// it; false when the connection is gone.
async fn wait<P: Protocol>(
    link: &mut Link<P>,
    due: Option<Instant>,
    wake: Instant,
    wants_changes: bool,
) -> bool {
    let Link {
        protocol,
        conn,
        shutdown,
        buf,
        ..
    } = link;
    if wants_changes && buf.len() > READ_BUFFER_IDLE {
        *buf = vec![0u8; READ_BUFFER_IDLE];
    }
    let Conn { stream, member, .. } = conn;
    let (changes, revoked) = match member {
        Some(m) => (
            Some(&mut m.changes).filter(|_| wants_changes),
            Some(&mut m.revoked),
        ),
        None => (None, None),
    };
    tokio::select! {
        read = stream.read(buf) => match read {
            Ok(0) | Err(_) => return false,
            Ok(n) => {
                protocol.feed(&buf[..n]);
                if n == buf.len() && buf.len() < READ_BUFFER_MAX {
                    buf.resize(buf.len() * 2, 0);
                }
            }
        },
        () = tokio::time::sleep_until(wake) => {
            if due.is_some_and(|due| due <= Instant::now()) {
                protocol.deadline_passed();
            } else {
                protocol.timed_out();
            }
        }
        () = changed(changes) => {}
        why = revocation(revoked) => protocol.revoked(why),
        () = stopping(shutdown) => protocol.shutting_down(),
    }
    true
}

/// Hands the connection to the parking lot if its session hibernates; `Err` gives it back
/// when it does not, to wait here. Once parked, this task is done: the lot runs the
/// connection again in a new one.
fn park<P: Protocol>(mut link: Box<Link<P>>, wake_at: Instant) -> Result<(), Box<Link<P>>> {
    let Some(woken) = link.protocol.hibernate() else {
        return Err(link);
    };
    let Link {
        conn,
        shutdown,
        mut clocks,
        ..
    } = *link;
    let Conn {
        shell,
        stream,
        member,
        held,
        ..
    } = conn;
    let (Stream::Plain(stream), Some(member)) = (stream, member) else {
        unreachable!("checked by the caller");
    };
    // Out of the runtime's poller; a failure here leaves a socket nobody can wait on, so
    // the connection ends.
    let Ok(stream) = stream.into_std() else {
        return Ok(());
    };
    let parking = shell.parking.clone();
    parking.park(Parked {
        user: member.user().to_string(),
        stream,
        member,
        shutdown,
        wake_at,
        resume: Box::new(move |stream, member, shutdown, why| {
            Box::pin(async move {
                let mut protocol = woken();
                if why == Wake::Time {
                    let now = Instant::now();
                    // The clocks still hold each running step's start: the same due time as
                    // when it parked.
                    if clocks
                        .due(protocol.deadlines(), now)
                        .is_some_and(|due| due <= now)
                    {
                        protocol.deadline_passed();
                    } else {
                        protocol.timed_out();
                    }
                }
                let conn = Conn::resumed(shell, stream, member, held);
                let wait_first = matches!(why, Wake::Input | Wake::Refused);
                Box::pin(resume(protocol, conn, shutdown, clocks, wait_first)).await;
            })
        }),
    });
    Ok(())
}

/// Resolves on the next change to the user's mail; never without a receiver.
async fn changed(changes: Option<&mut watch::Receiver<u64>>) {
    match changes {
        Some(rx) => {
            if rx.changed().await.is_err() {
                std::future::pending::<()>().await;
            }
        }
        None => std::future::pending::<()>().await,
    }
}

/// Resolves with why once the user is revoked; never without a receiver.
async fn revocation(
    revoked: Option<&mut watch::Receiver<Option<mailboxes::Ending>>>,
) -> mailboxes::Ending {
    if let Some(rx) = revoked
        && let Ok(why) = rx.wait_for(Option::is_some).await
        && let Some(why) = *why
    {
        return why;
    }
    std::future::pending().await
}

#[cfg(test)]
mod tests {
    use super::*;
    use limits::Deadline;

    #[test]
    fn clocks_start_when_a_step_appears_and_ignore_trickling() {
        let mut clocks = Clocks::default();
        let t0 = Instant::now();
        let request = |step| Deadlines {
            request: Some(Deadline {
                step,
                within: Duration::from_secs(10),
            }),
            ..Deadlines::default()
        };
        assert_eq!(
            clocks.due(request(1), t0),
            Some(t0 + Duration::from_secs(10))
        );
        // More bytes of the same step: the deadline does not move.
        let t1 = t0 + Duration::from_secs(4);
        assert_eq!(
            clocks.due(request(1), t1),
            Some(t0 + Duration::from_secs(10))
        );
        // A new step starts its own clock.
        assert_eq!(
            clocks.due(request(2), t1),
            Some(t1 + Duration::from_secs(10))
        );
        // Gone, then back: a fresh clock.
        assert_eq!(clocks.due(Deadlines::default(), t1), None);
        let t2 = t1 + Duration::from_secs(1);
        assert_eq!(
            clocks.due(request(2), t2),
            Some(t2 + Duration::from_secs(10))
        );
        // The earliest of several kinds.
        let both = Deadlines {
            phase: Some(Deadline {
                step: 0,
                within: Duration::from_secs(3),
            }),
            ..request(2)
        };
        assert_eq!(clocks.due(both, t2), Some(t2 + Duration::from_secs(3)));
    }
}
