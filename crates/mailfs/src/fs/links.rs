//! Hard links (docs/mailfs.md 12b). A file with one name keeps its attributes and data in
//! its directory entry, as always. When it gets a second name, that entry moves into the
//! inode directory (a directory no path reaches, object `INODES`, where it is named by
//! its id) and every name becomes a link entry: a name, a kind and the id. The inode entry
//! counts the names (`links`). A link, an unlink of a linked name and a rename over one
//! change two or three directories; they are one group of log records, so one page, which
//! is atomic: no crash leaves a name without its count or a count without its name.

use super::*;

/// The inode directory's object id (below `ID_MIN`, next to the root and `.snapshots`).
pub const INODES: u64 = 3;
/// Names one file may have (ext4's limit): `link` past it is EMLINK.
pub const LINKS_MAX: u32 = 65_000;

/// A linked file's name in the inode directory.
pub(crate) fn inode_name(id: u64) -> Vec<u8> {
    format!("{id:016x}").into_bytes()
}

impl Fs {
    /// Runs `op` as one group of directory changes: they reach the servers in one log
    /// page (`MetaLog::begin_group`). `op` must check everything that can refuse it, and
    /// load the directories it changes, before its first change: with batching, a change
    /// made stays made (it is in the batch with others'). Without batching the group's page
    /// is written at its end, and if that fails every change of the group is taken back,
    /// so a refused operation leaves the tree as it was, as a single change does.
    pub(super) fn grouped<R>(
        &self,
        tree: &mut Loaded,
        op: impl FnOnce(&Fs, &mut Loaded) -> Result<R, FsError>,
    ) -> Result<R, FsError> {
        let unbatched = self.tree.metalog.batch_ms == 0;
        if unbatched {
            // Nothing else is in the batch: a failed group takes it all back.
            self.tree.metalog.flush(self)?;
            tree.group_undo = Some(Vec::new());
        }
        self.tree.metalog.begin_group();
        let r = op(self, tree);
        let ended = match &r {
            Ok(_) => self.tree.metalog.end_group(self),
            Err(_) => {
                self.tree.metalog.end_group_discarding();
                Ok(())
            }
        };
        let undo = tree.group_undo.take();
        if let (Some(undo), true) = (undo, r.is_err() || ended.is_err()) {
            self.tree.metalog.discard_batch();
            for u in undo.into_iter().rev() {
                let Some(d) = tree.dirs.get_mut(&u.dir) else {
                    continue;
                };
                for (name, e) in u.entries {
                    match e {
                        Some(e) => {
                            if !e.link {
                                tree.parent_of.insert(e.id, (u.dir, name.clone()));
                            }
                            d.entries.insert(name, e);
                        }
                        None => {
                            d.entries.remove(&name);
                        }
                    }
                }
                d.attr = u.attr;
                d.parent = u.parent;
                d.version = u.version;
                d.recount();
            }
        }
        let r = r?;
        ended?;
        Ok(r)
    }

    /// The inode entry of a linked file.
    pub(super) fn inode_entry(&self, tree: &mut Loaded, id: u64) -> Result<Entry, FsError> {
        self.ensure_dir(tree, INODES)?
            .entries
            .get(&inode_name(id))
            .cloned()
            .ok_or_else(|| FsError::Corrupt(format!("link to {id:x}: no inode")))
    }

    /// link(2): `new_name` in `new_parent` becomes another name of `ino`.
    pub fn link(&self, ino: u64, new_parent: u64, new_name: &[u8]) -> Result<Stat, FsError> {
        crate::snapview::refuse(ino)?;
        crate::snapview::refuse(new_parent)?;
        check_reserved(new_parent, new_name)?;
        check_name(new_name)?;
        self.writable()?;
        let mut tree = self.lock();
        if tree.orphans.contains_key(&ino) {
            // linkat(2) of an unlinked file that was not made with O_TMPFILE.
            return Err(FsError::NotFound);
        }
        let (parent, name) = self.entry_of(&mut tree, ino)?;
        let e = self.entry_by_ino(&mut tree, ino)?;
        if e.kind == Kind::Dir {
            return Err(FsError::NotPermitted(
                "a directory cannot have a hard link".into(),
            ));
        }
        if e.links >= LINKS_MAX {
            return Err(FsError::TooManyLinks);
        }
        let target = self.ensure_dir(&mut tree, new_parent)?;
        if target.entries.contains_key(new_name) {
            return Err(FsError::Exists);
        }
        if target.entries.len() >= meta::DIR_ENTRIES_MAX {
            return Err(FsError::NoSpace("directory is full".into()));
        }
        self.ensure_dir(&mut tree, INODES)?;
        let now = now_ns();
        self.grouped(&mut tree, |fs, tree| {
            if parent == INODES {
                fs.edit_dir(tree, INODES, &[&name], |d| {
                    let x = d.entries.get_mut(&name).ok_or(FsError::NotFound)?;
                    x.links += 1;
                    if let Some(a) = &mut x.attr {
                        a.ctime = now;
                    }
                    Ok(())
                })?;
            } else {
                // The second name: the file's entry moves to the inode directory, and
                // the name it had becomes a link like the new one.
                let iname = inode_name(ino);
                let mut inode = e.clone();
                inode.name = iname.clone();
                inode.links = 2;
                inode.moving_from = None;
                inode.moving_to = None;
                if let Some(a) = &mut inode.attr {
                    a.ctime = now;
                }
                fs.edit_dir(tree, INODES, &[&iname], |d| {
                    d.entries.insert(iname.clone(), inode);
                    Ok(())
                })?;
                let stub = e.link_to(&name);
                fs.edit_dir(tree, parent, &[&name], |d| {
                    d.entries.insert(name.clone(), stub);
                    Ok(())
                })?;
            }
            let stub = e.link_to(new_name);
            fs.edit_dir(tree, new_parent, &[new_name], |d| {
                d.entries.insert(new_name.to_vec(), stub);
                d.attr.mtime = now;
                d.attr.ctime = now;
                Ok(())
            })
        })?;
        drop(tree);
        self.getattr(ino)
    }

    /// A link entry to `id` is gone (unlink, rename over it): one name fewer. The last
    /// name takes the inode entry with it; an open file lives on as an orphan until its
    /// last close. Call inside the group that removed the name.
    pub(super) fn drop_link(&self, tree: &mut Loaded, id: u64) -> Result<(), FsError> {
        let iname = inode_name(id);
        let now = now_ns();
        let gone = self.edit_dir(tree, INODES, &[&iname], |d| {
            let Some(x) = d.entries.get_mut(&iname) else {
                // A link whose inode entry is gone (a damaged or rebuilt inode
                // directory): removing the name is all there is to do.
                tracing::warn!("link to {id:x} had no inode entry; name removed");
                return Ok(None);
            };
            if x.links > 1 {
                x.links -= 1;
                if let Some(a) = &mut x.attr {
                    a.ctime = now;
                }
                Ok(None)
            } else {
                Ok(d.entries.remove(&iname))
            }
        })?;
        if let Some(inode) = gone {
            tree.parent_of.remove(&id);
            if tree.open_count.get(&id).copied().unwrap_or(0) > 0 {
                tree.orphans.insert(id, inode);
            } else {
                tree.writers.remove(&id);
            }
        }
        Ok(())
    }
}

/// What `Fs::repair_links` found and did, for fsck's report.
#[derive(Debug, Default)]
pub(crate) struct LinkRepairs {
    /// Entries of the inode directory (files with more than one name) checked.
    pub(crate) inodes: u64,
    pub(crate) repaired: Vec<String>,
    pub(crate) unrecoverable: Vec<String>,
}

impl Fs {
    /// fsck: every inode entry counts exactly the links the tree holds to it. An inode no
    /// link names (its last name went in a page its count's change missed, which one page
    /// per group rules out, or a damaged directory) is collected: its blocks go with the
    /// next gc. A link whose inode is gone is removed (the file is lost; `fsck --rebuild`
    /// puts its blocks in `lost+found`). `dirs` is every directory of the tree.
    pub(crate) fn repair_links(&self, dirs: &[(u64, u64)]) -> Result<LinkRepairs, FsError> {
        let mut report = LinkRepairs::default();
        let mut tree = self.lock();
        let inodes = self.ensure_dir(&mut tree, INODES)?.clone();
        let mut counted: HashMap<u64, u32> = HashMap::new();
        let mut dangling: Vec<(u64, Vec<u8>)> = Vec::new();
        for &(id, _) in dirs.iter().filter(|(id, _)| *id != INODES) {
            for (name, e) in self.ensure_dir(&mut tree, id)?.entries.iter() {
                if !e.link {
                    continue;
                }
                if inodes.entries.contains_key(&inode_name(e.id)) {
                    *counted.entry(e.id).or_default() += 1;
                } else {
                    dangling.push((id, name.clone()));
                }
            }
        }
        report.inodes = inodes.entries.len() as u64;
        for (iname, x) in &inodes.entries {
            let n = counted.get(&x.id).copied().unwrap_or(0);
            if n == x.links {
                continue;
            }
            if n == 0 && tree.open_count.get(&x.id).copied().unwrap_or(0) == 0 {
                self.edit_dir(&mut tree, INODES, &[iname], |d| {
                    d.entries.remove(iname);
                    Ok(())
                })?;
                tree.parent_of.remove(&x.id);
                report
                    .repaired
                    .push(format!("file {:x}: no name left; collected", x.id));
            } else if n > 0 {
                self.edit_dir(&mut tree, INODES, &[iname], |d| {
                    if let Some(x) = d.entries.get_mut(iname) {
                        x.links = n;
                    }
                    Ok(())
                })?;
                report.repaired.push(format!(
                    "file {:x}: {} names counted as {}; now {n}",
                    x.id, n, x.links
                ));
            }
        }
        for (dir, name) in dangling {
            self.edit_dir(&mut tree, dir, &[&name], |d| {
                d.entries.remove(&name);
                Ok(())
            })?;
            report.unrecoverable.push(format!(
                "directory {dir:x}: {:?} named a file that is gone; removed",
                String::from_utf8_lossy(&name)
            ));
        }
        Ok(report)
    }
}
