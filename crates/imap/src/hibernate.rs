//! A session in IDLE with nothing in flight, kept in as little memory as it can be: what the
//! shell keeps of a connection it parks while the client waits for news (thousands of
//! clients sit in IDLE for hours; docs/benchmarks.md, 10,000 idle connections).
//!
//! Only what outlives a command is kept: the user, the selected folder as the client knows
//! it, what the client enabled, and the counters that number the session's steps (so a
//! deadline that was running before the session hibernated still runs when it wakes). The
//! framer, the output and the decision queue are empty when a session may hibernate, and are
//! made afresh on waking.

use std::sync::Arc;

use crate::config::Config;
use crate::framer::Framer;
use crate::selected::Selected;
use crate::session::{Enabled, Session, State, Waiting};

/// A session hibernated by [`Session::hibernate`]; [`Hibernated::wake`] gives it back.
pub struct Hibernated {
    config: Arc<Config>,
    user: String,
    /// The IDLE command's tag, for its `OK` after `DONE` (RFC 2177).
    tag: String,
    selected: Option<Selected>,
    enabled: Enabled,
    state: State,
    tls: bool,
    errors: u32,
    idles: u64,
    /// The framer's count of finished commands.
    commands: u64,
}

impl Session {
    /// The session as a [`Hibernated`], if it is in IDLE (RFC 2177) and has nothing in
    /// flight: no output, no decision, no partial command, no FETCH in progress. Otherwise
    /// it is handed back unchanged.
    ///
    /// A compressed session does not hibernate: its compression state belongs to the
    /// connection, which the shell then cannot park either.
    #[expect(
        clippy::result_large_err,
        reason = "the session goes back as it came, moved, not copied into a box"
    )]
    pub fn hibernate(self) -> Result<Hibernated, Session> {
        let quiet = !self.closed
            && !self.compressed
            && self.out.is_empty()
            && self.events.is_empty()
            && self.storage.is_none()
            && self.framer.is_quiescent();
        let (true, Some(user), Some(Waiting::Idle { .. })) = (quiet, &self.user, &self.waiting)
        else {
            return Err(self);
        };
        let user = user.clone();
        let Some(Waiting::Idle { tag }) = self.waiting else {
            unreachable!("matched above");
        };
        Ok(Hibernated {
            commands: self.framer.command_number(),
            config: self.config,
            user,
            tag,
            selected: self.selected,
            enabled: self.enabled,
            state: self.state,
            tls: self.tls,
            errors: self.errors,
            idles: self.idles,
        })
    }
}

impl Hibernated {
    /// The session again, still in IDLE, as it was when it hibernated.
    pub fn wake(self) -> Session {
        let mut framer = Framer::new(&self.config);
        framer.resume(self.commands);
        Session {
            config: self.config,
            tls: self.tls,
            compressed: false,
            state: self.state,
            user: Some(self.user),
            selected: self.selected,
            enabled: self.enabled,
            framer,
            out: Vec::new(),
            events: Default::default(),
            waiting: Some(Waiting::Idle { tag: self.tag }),
            storage: None,
            errors: self.errors,
            closed: false,
            idles: self.idles,
        }
    }

    /// The logged-in user.
    pub fn user(&self) -> &str {
        &self.user
    }
}
