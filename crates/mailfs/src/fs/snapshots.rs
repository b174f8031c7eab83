//! The engine's side of the read-only `/.snapshots` view (docs/mailfs.md 8): the snapshots
//! the superblock lists, and the directories, entries and attributes under them, read from
//! the directory versions each snapshot pins. `posix.rs` hands every inode of the view here;
//! `snapview.rs` numbers those inodes.

use std::collections::HashMap;

use super::*;
use crate::meta::Snapshot;
use crate::snapview::{SNAPSHOTS_INO, object_of, snap_ino, snap_of};

/// Directories of snapshots read so far, and each object's parent in them.
#[derive(Default)]
pub(crate) struct SnapState {
    dirs: HashMap<(u16, u64), Arc<DirState>>,
    parent_of: HashMap<(u16, u64), (u64, Vec<u8>)>,
}

impl Fs {
    /// The snapshots in the order they were taken; snapshot `n` of the view (1-based) is
    /// `snapshots()[n - 1]`.
    pub fn snapshots(&self) -> Vec<Snapshot> {
        self.superblock().1.snapshots
    }

    fn snap_dir(&self, n: u16, id: u64) -> Result<Arc<DirState>, FsError> {
        if let Some(d) = self.snapview.lock_or_panic().dirs.get(&(n, id)) {
            return Ok(d.clone());
        }
        let snaps = self.snapshots();
        let snap = snaps
            .get(usize::from(n).wrapping_sub(1))
            .ok_or(FsError::NotFound)?;
        let version = snap
            .dirs
            .binary_search_by_key(&id, |(d, _)| *d)
            .map(|i| snap.dirs[i].1)
            .map_err(|_| FsError::NotFound)?;
        let d = Arc::new(self.read_dir_version(id, version)?);
        let mut st = self.snapview.lock_or_panic();
        // A link's object is its entry in the snapshot's inode directory.
        for (name, e) in d.entries.iter().filter(|(_, e)| !e.link) {
            st.parent_of.insert((n, e.id), (id, name.clone()));
        }
        st.dirs.insert((n, id), d.clone());
        Ok(d)
    }

    fn snap_dir_stat(&self, n: u16, id: u64) -> Result<Stat, FsError> {
        let d = self.snap_dir(n, id)?;
        let subdirs = d.entries.values().filter(|e| e.kind == Kind::Dir).count() as u32;
        let mut attr = d.attr;
        attr.mode &= !0o222;
        Ok(Stat {
            ino: snap_ino(n, id),
            kind: Kind::Dir,
            size: 4096,
            attr,
            nlink: 2 + subdirs,
            rdev: 0,
        })
    }

    /// The entry a snapshot inode stands for (a file, symlink or directory entry).
    pub(crate) fn snap_entry(&self, ino: u64) -> Result<Entry, FsError> {
        let (n, id) = (snap_of(ino), object_of(ino));
        let parent = self
            .snapview
            .lock_or_panic()
            .parent_of
            .get(&(n, id))
            .cloned();
        let (dir, name) = parent.ok_or(FsError::NotFound)?;
        let e = self
            .snap_dir(n, dir)?
            .entries
            .get(&name)
            .cloned()
            .ok_or(FsError::NotFound)?;
        self.snap_resolve(n, e)
    }

    /// A link entry's inode entry in snapshot `n` (any other entry as it is).
    fn snap_resolve(&self, n: u16, e: Entry) -> Result<Entry, FsError> {
        if !e.link {
            return Ok(e);
        }
        self.snap_dir(n, INODES)?
            .entries
            .get(&inode_name(e.id))
            .cloned()
            .ok_or_else(|| FsError::Corrupt(format!("link to {:x}: no inode", e.id)))
    }

    fn snap_stat_entry(&self, n: u16, e: &Entry) -> Result<Stat, FsError> {
        if e.kind == Kind::Dir {
            return self.snap_dir_stat(n, e.id);
        }
        if e.link {
            let inode = self.snap_resolve(n, e.clone())?;
            return self.snap_stat_entry(n, &inode);
        }
        let mut attr = e.attr.unwrap_or(crate::meta::Attr::new(0o444, 0, 0, 0));
        attr.mode &= !0o222;
        Ok(Stat {
            ino: snap_ino(n, e.id),
            kind: e.kind,
            size: e.size,
            attr,
            nlink: e.links.max(1),
            rdev: e.rdev,
        })
    }

    pub(crate) fn snap_getattr(&self, ino: u64) -> Result<Stat, FsError> {
        if ino == SNAPSHOTS_INO {
            let root = self.getattr(ROOT)?;
            let mut attr = root.attr;
            attr.mode = 0o555;
            return Ok(Stat {
                ino,
                kind: Kind::Dir,
                size: 4096,
                attr,
                nlink: 2 + self.snapshots().len() as u32,
                rdev: 0,
            });
        }
        let (n, id) = (snap_of(ino), object_of(ino));
        if id == ROOT {
            return self.snap_dir_stat(n, ROOT);
        }
        let e = self.snap_entry(ino)?;
        self.snap_stat_entry(n, &e)
    }

    pub(crate) fn snap_lookup(&self, parent: u64, name: &[u8]) -> Result<Stat, FsError> {
        if parent == ROOT {
            if self.snapshots().is_empty() {
                return Err(FsError::NotFound);
            }
            return self.snap_getattr(SNAPSHOTS_INO);
        }
        if parent == SNAPSHOTS_INO {
            let n = self
                .snapshots()
                .iter()
                .position(|s| s.name.as_bytes() == name)
                .ok_or(FsError::NotFound)?;
            return self.snap_dir_stat((n + 1) as u16, ROOT);
        }
        let n = snap_of(parent);
        let d = self.snap_dir(n, object_of(parent))?;
        let e = d.entries.get(name).cloned().ok_or(FsError::NotFound)?;
        self.snap_stat_entry(n, &e)
    }

    pub(crate) fn snap_readdir(&self, ino: u64) -> Result<Vec<(u64, Kind, Vec<u8>)>, FsError> {
        if ino == SNAPSHOTS_INO {
            return Ok(self
                .snapshots()
                .iter()
                .enumerate()
                .map(|(i, s)| {
                    (
                        snap_ino((i + 1) as u16, ROOT),
                        Kind::Dir,
                        s.name.as_bytes().to_vec(),
                    )
                })
                .collect());
        }
        let n = snap_of(ino);
        let d = self.snap_dir(n, object_of(ino))?;
        Ok(d.entries
            .values()
            .map(|e| (snap_ino(n, e.id), e.kind, e.name.clone()))
            .collect())
    }

    pub(crate) fn snap_parent_of_dir(&self, ino: u64) -> Result<u64, FsError> {
        if ino == SNAPSHOTS_INO {
            return Ok(ROOT);
        }
        let (n, id) = (snap_of(ino), object_of(ino));
        if id == ROOT {
            return Ok(SNAPSHOTS_INO);
        }
        Ok(snap_ino(n, self.snap_dir(n, id)?.parent))
    }
}
