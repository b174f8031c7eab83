//! IMAP system flags (a 5-bit set) and how a flag change combines with a message's flags.

use std::fmt;
use std::ops::{BitOr, BitOrAssign};

/// The IMAP system flags a message can carry (`\Recent` is session state, not stored).
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Flags(u8);

impl Flags {
    pub const EMPTY: Flags = Flags(0);
    pub const SEEN: Flags = Flags(1);
    pub const ANSWERED: Flags = Flags(2);
    pub const FLAGGED: Flags = Flags(4);
    pub const DELETED: Flags = Flags(8);
    pub const DRAFT: Flags = Flags(16);
    /// Every defined bit.
    pub const ALL: Flags = Flags(31);

    const NAMES: [(Flags, &'static str); 5] = [
        (Flags::SEEN, "\\Seen"),
        (Flags::ANSWERED, "\\Answered"),
        (Flags::FLAGGED, "\\Flagged"),
        (Flags::DELETED, "\\Deleted"),
        (Flags::DRAFT, "\\Draft"),
    ];

    pub fn bits(self) -> u8 {
        self.0
    }

    /// `None` if `bits` has an undefined bit set (bad on-disk data).
    pub fn from_bits(bits: u8) -> Option<Flags> {
        (bits & !Flags::ALL.0 == 0).then_some(Flags(bits))
    }

    /// Keeps only the defined bits.
    pub fn from_bits_truncate(bits: u8) -> Flags {
        Flags(bits & Flags::ALL.0)
    }

    pub fn contains(self, other: Flags) -> bool {
        self.0 & other.0 == other.0
    }

    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    pub fn union(self, other: Flags) -> Flags {
        Flags(self.0 | other.0)
    }

    pub fn difference(self, other: Flags) -> Flags {
        Flags(self.0 & !other.0)
    }

    /// Parses one IMAP flag name (case-insensitive), e.g. `\Seen`.
    pub fn parse(name: &str) -> Option<Flags> {
        Flags::NAMES
            .iter()
            .find(|(_, n)| n.eq_ignore_ascii_case(name))
            .map(|(f, _)| *f)
    }

    /// The IMAP names of the flags set, in a fixed order.
    pub fn names(self) -> impl Iterator<Item = &'static str> {
        Flags::NAMES
            .into_iter()
            .filter(move |(f, _)| self.contains(*f))
            .map(|(_, n)| n)
    }
}

impl BitOr for Flags {
    type Output = Flags;
    fn bitor(self, rhs: Flags) -> Flags {
        self.union(rhs)
    }
}

impl BitOrAssign for Flags {
    fn bitor_assign(&mut self, rhs: Flags) {
        *self = self.union(rhs);
    }
}

impl fmt::Debug for Flags {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Flags(")?;
        for (i, name) in self.names().enumerate() {
            if i > 0 {
                write!(f, " ")?;
            }
            write!(f, "{name}")?;
        }
        write!(f, ")")
    }
}

/// How `set_flags` combines the given flags with a message's current ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlagOp {
    Add,
    Remove,
    Replace,
}

impl FlagOp {
    /// The flags a message has after this operation with `given`.
    pub fn apply_flags(self, current: Flags, given: Flags) -> Flags {
        match self {
            FlagOp::Add => current.union(given),
            FlagOp::Remove => current.difference(given),
            FlagOp::Replace => given,
        }
    }
}
