//! IMAP system flags (a 5-bit set) and per-folder keyword sets (a 128-bit mask into the
//! folder's keyword table).

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
    pub(crate) fn code(self) -> u8 {
        match self {
            FlagOp::Add => 0,
            FlagOp::Remove => 1,
            FlagOp::Replace => 2,
        }
    }

    pub(crate) fn from_code(code: u8) -> Option<FlagOp> {
        match code {
            0 => Some(FlagOp::Add),
            1 => Some(FlagOp::Remove),
            2 => Some(FlagOp::Replace),
            _ => None,
        }
    }

    pub(crate) fn apply_flags(self, current: Flags, given: Flags) -> Flags {
        match self {
            FlagOp::Add => current.union(given),
            FlagOp::Remove => current.difference(given),
            FlagOp::Replace => given,
        }
    }

    pub(crate) fn apply_keywords(self, current: KeywordSet, given: KeywordSet) -> KeywordSet {
        match self {
            FlagOp::Add => KeywordSet([current.0[0] | given.0[0], current.0[1] | given.0[1]]),
            FlagOp::Remove => KeywordSet([current.0[0] & !given.0[0], current.0[1] & !given.0[1]]),
            FlagOp::Replace => given,
        }
    }
}

/// A set of indexes into a folder's keyword table. Two words rather than a `u128` keep the
/// index entry 8-byte aligned (and so 56 bytes, not 64).
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash, Debug)]
pub(crate) struct KeywordSet(pub(crate) [u64; 2]);

impl KeywordSet {
    pub(crate) fn insert(&mut self, index: usize) {
        debug_assert!(index < 128);
        self.0[index / 64] |= 1 << (index % 64);
    }

    pub(crate) fn contains(&self, index: usize) -> bool {
        index < 128 && self.0[index / 64] & (1 << (index % 64)) != 0
    }

    pub(crate) fn iter(self) -> impl Iterator<Item = usize> {
        (0..128).filter(move |&i| self.contains(i))
    }

    /// True if every bit set is below `len` (bad on-disk data otherwise).
    pub(crate) fn fits(&self, len: usize) -> bool {
        self.iter().all(|i| i < len)
    }
}
