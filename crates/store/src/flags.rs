//! Per-folder keyword sets (a 128-bit mask into the folder's keyword table) and the journal
//! code of a flag operation. The flags themselves are `mail_model::Flags`.

use mail_model::FlagOp;

/// A flag operation's code in a journal record.
pub(crate) fn op_code(op: FlagOp) -> u8 {
    match op {
        FlagOp::Add => 0,
        FlagOp::Remove => 1,
        FlagOp::Replace => 2,
    }
}

pub(crate) fn op_from_code(code: u8) -> Option<FlagOp> {
    match code {
        0 => Some(FlagOp::Add),
        1 => Some(FlagOp::Remove),
        2 => Some(FlagOp::Replace),
        _ => None,
    }
}

pub(crate) fn apply_keywords(op: FlagOp, current: KeywordSet, given: KeywordSet) -> KeywordSet {
    match op {
        FlagOp::Add => KeywordSet([current.0[0] | given.0[0], current.0[1] | given.0[1]]),
        FlagOp::Remove => KeywordSet([current.0[0] & !given.0[0], current.0[1] & !given.0[1]]),
        FlagOp::Replace => given,
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
