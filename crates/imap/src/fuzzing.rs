//! Entry points for the fuzz targets in `fuzz/` (feature `fuzzing`, off by default): the
//! framer is crate-private, and checking its own invariants (command size, independence of
//! how input is split) needs its frames, which a session turns into responses.

use crate::config::Config;
use crate::framer::{self, Frame};

/// The session's framer, with frames flattened to public types.
pub struct Framer(framer::Framer);

impl Framer {
    pub fn new(config: &Config) -> Framer {
        Framer(framer::Framer::new(config))
    }

    pub fn feed(&mut self, bytes: &[u8]) {
        self.0.feed(bytes);
    }

    /// What the session calls after a successful login: the full limits apply.
    pub fn logged_in(&mut self) {
        self.0.logged_in();
    }

    pub fn buffered(&self) -> usize {
        self.0.buffered()
    }
}

impl Iterator for Framer {
    type Item = Result<Vec<u8>, String>;

    /// The next frame: `Ok` with a whole command's bytes, `Err` with any other frame in its
    /// `Debug` form (continuation request, dropped or closing command). `None` until more
    /// input is fed.
    fn next(&mut self) -> Option<Self::Item> {
        self.0.next().map(|frame| match frame {
            Frame::Command(bytes) => Ok(bytes),
            other => Err(format!("{other:?}")),
        })
    }
}
