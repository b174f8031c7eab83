//! The read-only `/.snapshots/NAME/...` view (docs/mailfs.md 8): its inode numbers, and the
//! refusal of every write under it. Each snapshot pins one version of every directory; the
//! engine reads the view's tree from those versions (`fs/snapshots.rs`).
//!
//! Inode numbers: object ids are below 2^47, so a snapshot's copy of object `id` is
//! `SNAP_BIT | n << 47 | id` with `n` the snapshot's 1-based number; `.snapshots` itself is
//! inode 2.

use crate::FsError;

pub const SNAPSHOTS_NAME: &[u8] = b".snapshots";
pub const SNAPSHOTS_INO: u64 = 2;
const SNAP_BIT: u64 = 1 << 63;
const ID_BITS: u64 = 47;
const ID_MASK: u64 = (1 << ID_BITS) - 1;

/// `.snapshots` or anything under it.
pub fn is_view(ino: u64) -> bool {
    ino == SNAPSHOTS_INO || is_snap(ino)
}

pub fn is_snap(ino: u64) -> bool {
    ino & SNAP_BIT != 0
}

/// The object a snapshot inode shows (the inode itself otherwise).
pub fn object_of(ino: u64) -> u64 {
    if is_snap(ino) { ino & ID_MASK } else { ino }
}

/// The 1-based number of the snapshot a snapshot inode belongs to.
pub(crate) fn snap_of(ino: u64) -> u16 {
    ((ino >> ID_BITS) & 0xffff) as u16
}

/// Snapshot `n`'s inode for object `id`.
pub(crate) fn snap_ino(n: u16, id: u64) -> u64 {
    SNAP_BIT | (u64::from(n) << ID_BITS) | (id & ID_MASK)
}

/// Every write under the view is refused.
pub fn refuse(ino: u64) -> Result<(), FsError> {
    if is_view(ino) {
        Err(FsError::ReadOnly)
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::ROOT;

    #[test]
    fn inode_numbers_round_trip() {
        let ino = snap_ino(3, 0x7fff_1234_5678);
        assert!(is_snap(ino) && is_view(ino));
        assert_eq!(snap_of(ino), 3);
        assert_eq!(object_of(ino), 0x7fff_1234_5678);
        assert!(!is_snap(ROOT) && !is_view(ROOT) && is_view(SNAPSHOTS_INO));
    }
}
