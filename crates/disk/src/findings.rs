//! What an engine's offline check (fsck) found and did: the part of the report the queue's
//! `check` and the store's `fsck` share. Each engine's report adds its own counters and its
//! own summary line around it.

use std::fmt;

/// Damage found, conditions recovery handles by design, and repairs made, one line each.
/// `P` is how an engine names a problem (the store: a line of text; the queue: a segment file
/// and what is wrong in it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Findings<P = String> {
    /// Damage that loses or hides data. Empty = clean.
    pub problems: Vec<P>,
    /// Conditions recovery handles by design (a torn last batch, a message in two records):
    /// worth knowing, not damage, so they leave a check clean.
    pub notes: Vec<String>,
    /// What a repair changed.
    pub repaired: Vec<String>,
}

// Not derived: a derive would ask `P: Default`, which a problem type has no reason to be.
impl<P> Default for Findings<P> {
    fn default() -> Self {
        Findings {
            problems: Vec::new(),
            notes: Vec::new(),
            repaired: Vec::new(),
        }
    }
}

impl<P> Findings<P> {
    /// No problem was found (notes and repairs do not count).
    pub fn is_clean(&self) -> bool {
        self.problems.is_empty()
    }
}

/// One line each, in this order: `problem: …`, `note: …`, `repaired: …`; every line ends
/// with a newline, so an engine's summary line can follow directly.
impl<P: fmt::Display> fmt::Display for Findings<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for p in &self.problems {
            writeln!(f, "problem: {p}")?;
        }
        for n in &self.notes {
            writeln!(f, "note: {n}")?;
        }
        for r in &self.repaired {
            writeln!(f, "repaired: {r}")?;
        }
        Ok(())
    }
}
