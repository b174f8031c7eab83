//! Namespace operations: lookup, getattr, readdir, create, mkdir, symlink, unlink, rmdir,
//! rename, setattr, statfs; opening and releasing files.

use super::*;

impl Fs {
    // ---------------------------------------------------------------- POSIX operations

    pub fn getattr(&self, ino: u64) -> Result<Stat, FsError> {
        if crate::snapview::is_view(ino) {
            return self.snap_getattr(ino);
        }
        let mut tree = self.lock();
        if ino == ROOT {
            return Ok(dir_stat(self.ensure_dir(&mut tree, ROOT)?));
        }
        if let Some(e) = tree.orphans.get(&ino).cloned() {
            // Unlinked while open: no name left (fstat shows st_nlink 0).
            return self
                .stat_entry(&mut tree, &e)
                .map(|st| Stat { nlink: 0, ..st });
        }
        let e = self.entry_by_ino(&mut tree, ino)?;
        self.stat_entry(&mut tree, &e)
    }

    pub fn lookup(&self, parent: u64, name: &[u8]) -> Result<Stat, FsError> {
        // POSIX: a name past NAME_MAX is ENAMETOOLONG whether or not it exists, so every
        // call that looks a path up (chmod, unlink, rmdir, truncate...) says so.
        if name.len() > super::NAME_BYTES_MAX {
            return Err(FsError::NameTooLong);
        }
        if crate::snapview::is_view(parent)
            || (parent == ROOT && name == crate::snapview::SNAPSHOTS_NAME)
        {
            return self.snap_lookup(parent, name);
        }
        let mut tree = self.lock();
        let e = self
            .ensure_dir(&mut tree, parent)?
            .entries
            .get(name)
            .cloned()
            .ok_or(FsError::NotFound)?;
        self.stat_entry(&mut tree, &e)
    }

    /// Children of a directory: (ino, kind, name), without `.` and `..`.
    pub fn readdir(&self, ino: u64) -> Result<Vec<(u64, Kind, Vec<u8>)>, FsError> {
        if crate::snapview::is_view(ino) {
            return self.snap_readdir(ino);
        }
        let mut tree = self.lock();
        let d = self.ensure_dir(&mut tree, ino)?;
        let mut out: Vec<(u64, Kind, Vec<u8>)> = d
            .entries
            .values()
            .map(|e| (e.id, e.kind, e.name.clone()))
            .collect();
        drop(tree);
        if ino == ROOT && !self.snapshots().is_empty() {
            out.push((
                crate::snapview::SNAPSHOTS_INO,
                Kind::Dir,
                crate::snapview::SNAPSHOTS_NAME.to_vec(),
            ));
        }
        Ok(out)
    }

    /// Up to `max` children of a directory whose names come after `after` (all from the
    /// start without it), in name order, `.snapshots` among them in the root: a long
    /// listing costs the entries it returns per call, not the directory, and resumes by
    /// name, so entries added or removed meanwhile never make it skip or repeat another.
    pub fn readdir_after(
        &self,
        ino: u64,
        after: Option<&[u8]>,
        max: usize,
    ) -> Result<Vec<(u64, Kind, Vec<u8>)>, FsError> {
        use std::ops::Bound;
        let after_name = |n: &[u8]| after.is_none_or(|a| n > a);
        if crate::snapview::is_view(ino) {
            let mut all = self.snap_readdir(ino)?;
            all.sort_by(|a, b| a.2.cmp(&b.2));
            all.retain(|e| after_name(&e.2));
            all.truncate(max);
            return Ok(all);
        }
        let mut tree = self.lock();
        let d = self.ensure_dir(&mut tree, ino)?;
        let from = after.map_or(Bound::Unbounded, Bound::Excluded);
        let mut out: Vec<(u64, Kind, Vec<u8>)> = d
            .entries
            .range::<[u8], _>((from, Bound::Unbounded))
            .take(max)
            .map(|(_, e)| (e.id, e.kind, e.name.clone()))
            .collect();
        drop(tree);
        let name = crate::snapview::SNAPSHOTS_NAME;
        if ino == ROOT
            && after_name(name)
            && (out.len() < max || out.last().is_some_and(|e| e.2.as_slice() > name))
            && !self.snapshots().is_empty()
        {
            let at = out.partition_point(|e| e.2.as_slice() < name);
            out.insert(
                at,
                (crate::snapview::SNAPSHOTS_INO, Kind::Dir, name.to_vec()),
            );
            out.truncate(max);
        }
        Ok(out)
    }

    pub fn parent_of_dir(&self, ino: u64) -> Result<u64, FsError> {
        if crate::snapview::is_view(ino) {
            return self.snap_parent_of_dir(ino);
        }
        let mut tree = self.lock();
        Ok(self.ensure_dir(&mut tree, ino)?.parent)
    }

    pub(super) fn insert_new(&self, parent: u64, name: &[u8], entry: Entry) -> Result<(), FsError> {
        crate::snapview::refuse(parent)?;
        check_reserved(parent, name)?;
        check_name(name)?;
        self.writable()?;
        let mut tree = self.lock();
        self.edit_dir(&mut tree, parent, &[name], |d| {
            if d.entries.contains_key(name) {
                return Err(FsError::Exists);
            }
            if d.entries.len() >= meta::DIR_ENTRIES_MAX {
                return Err(FsError::NoSpace("directory is full".into()));
            }
            let now = now_ns();
            d.attr.mtime = now;
            d.attr.ctime = now;
            d.entries.insert(name.to_vec(), entry);
            Ok(())
        })
    }

    pub fn mkdir(
        &self,
        parent: u64,
        name: &[u8],
        mode: u32,
        uid: u32,
        gid: u32,
    ) -> Result<Stat, FsError> {
        crate::snapview::refuse(parent)?;
        check_reserved(parent, name)?;
        check_name(name)?;
        self.writable()?;
        let id = random_id();
        let child = DirState {
            version: 0,
            id,
            parent,
            attr: Attr::new(mode, uid, gid, now_ns()),
            entries: BTreeMap::new(),
            inline_bytes: 0,
            subdirs: 0,
        };
        {
            let mut tree = self.lock();
            if self
                .ensure_dir(&mut tree, parent)?
                .entries
                .contains_key(name)
            {
                return Err(FsError::Exists);
            }
            // The child exists before any directory names it.
            self.write_dir(&mut tree, child)?;
        }
        self.insert_new(parent, name, Entry::bare(name, Kind::Dir, id))?;
        self.getattr(id)
    }

    pub fn create(
        &self,
        parent: u64,
        name: &[u8],
        mode: u32,
        uid: u32,
        gid: u32,
    ) -> Result<(Stat, u64), FsError> {
        let id = random_id();
        self.insert_new(
            parent,
            name,
            Entry {
                attr: Some(Attr::new(mode, uid, gid, now_ns())),
                file: Some(FileMeta {
                    version: 0,
                    block_size: self.block_size,
                    blocks: Vec::new(),
                    dirty: None,
                    inline: None,
                }),
                ..Entry::bare(name, Kind::File, id)
            },
        )?;
        let fh = self.open_file(id)?;
        Ok((self.getattr(id)?, fh))
    }

    pub fn symlink(
        &self,
        parent: u64,
        name: &[u8],
        target: &[u8],
        uid: u32,
        gid: u32,
    ) -> Result<Stat, FsError> {
        if target.is_empty() || target.len() > SYMLINK_BYTES_MAX {
            return Err(FsError::NameTooLong);
        }
        let id = random_id();
        self.insert_new(
            parent,
            name,
            Entry {
                attr: Some(Attr::new(0o777, uid, gid, now_ns())),
                size: target.len() as u64,
                target: Some(target.to_vec()),
                ..Entry::bare(name, Kind::Symlink, id)
            },
        )?;
        self.getattr(id)
    }

    /// A FIFO, device or socket (mknod(2)): one directory update, nothing stored.
    #[allow(clippy::too_many_arguments)] // mknod(2)'s arguments and the caller.
    pub fn mknod(
        &self,
        parent: u64,
        name: &[u8],
        kind: Kind,
        mode: u32,
        rdev: u64,
        uid: u32,
        gid: u32,
    ) -> Result<Stat, FsError> {
        if !kind.is_special() {
            return Err(FsError::Invalid("mknod makes special files only".into()));
        }
        let id = random_id();
        let devices = matches!(kind, Kind::CharDevice | Kind::BlockDevice);
        self.insert_new(
            parent,
            name,
            Entry {
                attr: Some(Attr::new(mode, uid, gid, now_ns())),
                rdev: if devices { rdev } else { 0 },
                ..Entry::bare(name, kind, id)
            },
        )?;
        self.getattr(id)
    }

    pub fn readlink(&self, ino: u64) -> Result<Vec<u8>, FsError> {
        if crate::snapview::is_snap(ino) {
            return self
                .snap_entry(ino)?
                .target
                .ok_or(FsError::Invalid("not a symlink".into()));
        }
        let mut tree = self.lock();
        self.entry_by_ino(&mut tree, ino)?
            .target
            .ok_or(FsError::Invalid("not a symlink".into()))
    }

    pub fn unlink(&self, parent: u64, name: &[u8]) -> Result<(), FsError> {
        crate::snapview::refuse(parent)?;
        self.writable()?;
        let mut tree = self.lock();
        let link = self
            .ensure_dir(&mut tree, parent)?
            .entries
            .get(name)
            .is_some_and(|e| e.link);
        let remove = |d: &mut DirState| {
            let e = d.entries.remove(name).ok_or(FsError::NotFound)?;
            if e.kind == Kind::Dir {
                return Err(FsError::IsDir);
            }
            let now = now_ns();
            d.attr.mtime = now;
            d.attr.ctime = now;
            Ok(e)
        };
        if link {
            // The name and the count go in one page (docs/mailfs.md 12b).
            self.ensure_dir(&mut tree, INODES)?;
            return self.grouped(&mut tree, |fs, tree| {
                let e = fs.edit_dir(tree, parent, &[name], remove)?;
                fs.drop_link(tree, e.id)
            });
        }
        let e = self.edit_dir(&mut tree, parent, &[name], remove)?;
        tree.parent_of.remove(&e.id);
        if tree.open_count.get(&e.id).copied().unwrap_or(0) > 0 {
            tree.orphans.insert(e.id, e);
        } else {
            tree.writers.remove(&e.id);
        }
        Ok(())
    }

    pub fn rmdir(&self, parent: u64, name: &[u8]) -> Result<(), FsError> {
        crate::snapview::refuse(parent)?;
        self.writable()?;
        let mut tree = self.lock();
        let e = self
            .ensure_dir(&mut tree, parent)?
            .entries
            .get(name)
            .cloned()
            .ok_or(FsError::NotFound)?;
        if e.kind != Kind::Dir {
            return Err(FsError::NotDir);
        }
        if !self.ensure_dir(&mut tree, e.id)?.entries.is_empty() {
            return Err(FsError::NotEmpty);
        }
        self.edit_dir(&mut tree, parent, &[name], |d| {
            d.entries.remove(name);
            let now = now_ns();
            d.attr.mtime = now;
            d.attr.ctime = now;
            Ok(())
        })?;
        tree.parent_of.remove(&e.id);
        tree.dirs.remove(&e.id);
        Ok(())
    }

    /// True when `ancestor` is `dir` or one of its ancestors.
    pub(super) fn is_ancestor(
        &self,
        tree: &mut Loaded,
        ancestor: u64,
        mut dir: u64,
    ) -> Result<bool, FsError> {
        for _ in 0..4096 {
            if dir == ancestor {
                return Ok(true);
            }
            if dir == ROOT {
                return Ok(false);
            }
            dir = match tree.parent_of.get(&dir) {
                Some((p, _)) => *p,
                None => self.ensure_dir(tree, dir)?.parent,
            };
        }
        Err(FsError::Corrupt("directory loop".into()))
    }

    pub fn rename(
        &self,
        parent: u64,
        name: &[u8],
        new_parent: u64,
        new_name: &[u8],
        no_replace: bool,
    ) -> Result<(), FsError> {
        crate::snapview::refuse(parent)?;
        crate::snapview::refuse(new_parent)?;
        check_reserved(new_parent, new_name)?;
        check_name(new_name)?;
        self.writable()?;
        // A file renamed while its data waits for a committer, or while a committer is
        // storing it (section 5, write-back), is committed first (`flush` takes the file's
        // commit lock, so it also waits for a commit in progress): no page may carry the
        // new name, perhaps over the file it replaces, before the data that name stands
        // for is stored. So "write a temporary file, rename it over the real one" leaves
        // the old or the new content after a crash, never an empty file (ext4's
        // auto_da_alloc exists for the same pattern).
        let open_file = {
            let mut tree = self.lock();
            self.ensure_dir(&mut tree, parent)?
                .entries
                .get(name)
                .filter(|e| e.kind == Kind::File)
                .map(|e| e.id)
                .filter(|id| tree.writers.contains_key(id))
        };
        if let Some(ino) = open_file {
            self.flush(ino)?;
        }
        let mut tree = self.lock();
        let e = self
            .ensure_dir(&mut tree, parent)?
            .entries
            .get(name)
            .cloned()
            .ok_or(FsError::NotFound)?;
        let dst_existing = self
            .ensure_dir(&mut tree, new_parent)?
            .entries
            .get(new_name)
            .cloned();
        if e.kind == Kind::Dir && self.is_ancestor(&mut tree, e.id, new_parent)? {
            return Err(FsError::Invalid(
                "cannot move a directory into itself".into(),
            ));
        }
        if let Some(old) = &dst_existing {
            if old.id == e.id {
                return Ok(());
            }
            if no_replace {
                return Err(FsError::Exists);
            }
            match (e.kind == Kind::Dir, old.kind == Kind::Dir) {
                (true, false) => return Err(FsError::NotDir),
                (false, true) => return Err(FsError::IsDir),
                (true, true) => {
                    if !self.ensure_dir(&mut tree, old.id)?.entries.is_empty() {
                        return Err(FsError::NotEmpty);
                    }
                }
                (false, false) => {}
            }
        }
        // Everything the group changes is loaded first (a load may repair, which is a
        // change of its own).
        if e.link || dst_existing.as_ref().is_some_and(|o| o.link) {
            self.ensure_dir(&mut tree, INODES)?;
        }
        if e.kind == Kind::Dir {
            self.ensure_dir(&mut tree, e.id)?;
        }
        // One group, one page: a rename across directories is atomic, and a rename over
        // a link drops its count in the same page (docs/mailfs.md 12b).
        self.grouped(&mut tree, |fs, tree| {
            fs.rename_entry(tree, e, parent, name, new_parent, new_name, dst_existing)
        })
    }

    /// The changes of a checked rename (see `rename`), inside its group.
    #[allow(clippy::too_many_arguments)] // rename(2)'s two names, the entries found.
    fn rename_entry(
        &self,
        tree: &mut Loaded,
        mut e: Entry,
        parent: u64,
        name: &[u8],
        new_parent: u64,
        new_name: &[u8],
        dst_existing: Option<Entry>,
    ) -> Result<(), FsError> {
        let now = now_ns();
        e.name = new_name.to_vec();
        if let Some(a) = &mut e.attr {
            a.ctime = now;
        }
        let touch = |d: &mut DirState| {
            d.attr.mtime = now;
            d.attr.ctime = now;
        };
        if parent == new_parent {
            self.edit_dir(tree, parent, &[name, new_name], |d| {
                d.entries.remove(name);
                d.entries.insert(new_name.to_vec(), e.clone());
                touch(d);
                Ok(())
            })?;
        } else {
            // Across directories (docs/mailfs.md 5): mark in the source, add (marked) to
            // the target, remove from the source, clear the target's mark. The four
            // records share one page (the group); the marks still settle a page written
            // by an older version, or by `fsck`'s repair, cut between them.
            self.edit_dir(tree, parent, &[name], |d| {
                if let Some(x) = d.entries.get_mut(name) {
                    x.moving_to = Some(new_parent);
                }
                Ok(())
            })?;
            let mut marked = e.clone();
            marked.moving_from = Some(parent);
            self.edit_dir(tree, new_parent, &[new_name], |d| {
                d.entries.insert(new_name.to_vec(), marked);
                touch(d);
                Ok(())
            })?;
            self.edit_dir(tree, parent, &[name], |d| {
                d.entries.remove(name);
                touch(d);
                Ok(())
            })?;
            self.edit_dir(tree, new_parent, &[new_name], |d| {
                d.entries.insert(new_name.to_vec(), e.clone());
                Ok(())
            })?;
            if e.kind == Kind::Dir {
                self.edit_dir(tree, e.id, &[], |moved| {
                    moved.parent = new_parent;
                    Ok(())
                })?;
            }
        }
        if e.link {
            // A rename changes the file's ctime, which lives in its inode entry.
            let iname = inode_name(e.id);
            self.edit_dir(tree, INODES, &[&iname], |d| {
                if let Some(a) = d.entries.get_mut(&iname).and_then(|x| x.attr.as_mut()) {
                    a.ctime = now;
                }
                Ok(())
            })?;
        } else {
            tree.parent_of.insert(e.id, (new_parent, new_name.to_vec()));
        }
        if let Some(old) = dst_existing {
            if old.link {
                self.drop_link(tree, old.id)?;
            } else {
                if old.kind == Kind::Dir {
                    tree.dirs.remove(&old.id);
                }
                tree.parent_of.remove(&old.id);
                if tree.open_count.get(&old.id).copied().unwrap_or(0) > 0 {
                    tree.orphans.insert(old.id, old);
                } else {
                    // Its writer too (as unlink): written back after its last close, it
                    // would otherwise be committed by the next sync of the mount, for a
                    // file nothing names.
                    tree.writers.remove(&old.id);
                }
            }
        }
        Ok(())
    }

    pub fn setattr(&self, ino: u64, set: SetAttr) -> Result<Stat, FsError> {
        crate::snapview::refuse(ino)?;
        self.writable()?;
        if let Some(size) = set.size {
            self.truncate(ino, size)?;
        }
        if set.mode.is_none()
            && set.uid.is_none()
            && set.gid.is_none()
            && set.atime.is_none()
            && set.mtime.is_none()
        {
            return self.getattr(ino);
        }
        let mut tree = self.lock();
        let apply = |a: &mut Attr, is_dir: bool| {
            if let Some(m) = set.mode {
                a.mode = m & 0o7777;
            }
            // A chown takes the set-user-ID bit off a file, and the set-group-ID bit when
            // the group may execute it (without that it marks mandatory locking), as Linux
            // does for every caller (chown(2)), even when the owner stays the same. A caller
            // without CAP_FSETID loses more (`take_set_id_off`, called first).
            let chown = set.uid.is_some() || set.gid.is_some();
            if chown && !is_dir && set.mode.is_none() {
                a.mode = super::without_privileges(a.mode);
            }
            if let Some(u) = set.uid {
                a.uid = u;
            }
            if let Some(g) = set.gid {
                a.gid = g;
            }
            if let Some(t) = set.atime {
                a.atime = t;
            }
            if let Some(t) = set.mtime {
                a.mtime = t;
            }
            a.ctime = now_ns();
        };
        if tree.orphans.contains_key(&ino) {
            if let Some(a) = tree.orphans.get_mut(&ino).and_then(|e| e.attr.as_mut()) {
                apply(a, false);
            }
            drop(tree);
            return self.getattr(ino);
        }
        let is_dir = ino == ROOT
            || tree.dirs.contains_key(&ino)
            || matches!(tree.parent_of.get(&ino).cloned(), Some((p, n))
                if self.ensure_dir(&mut tree, p)?.entries.get(&n).is_some_and(|e| e.kind == Kind::Dir));
        if is_dir {
            self.edit_dir(&mut tree, ino, &[], |d| {
                apply(&mut d.attr, true);
                Ok(())
            })?;
        } else {
            let (parent, name) = self.entry_of(&mut tree, ino)?;
            let a = self.edit_dir(&mut tree, parent, &[&name], |d| {
                let e = d.entries.get_mut(&name).ok_or(FsError::NotFound)?;
                let mut a = e.attr.unwrap_or(Attr::new(0o644, 0, 0, 0));
                apply(&mut a, false);
                e.attr = Some(a);
                Ok(a)
            })?;
            if let Some(w) = tree.writers.get_mut(&ino)
                && set.mtime.is_some()
            {
                // An explicit mtime wins over the time of the last write.
                w.mtime = a.mtime;
            }
        }
        drop(tree);
        self.getattr(ino)
    }

    /// A write, truncate or chown by a caller without CAP_FSETID takes the set-user-ID bit
    /// off a file, and the set-group-ID bit when the group may execute it or the caller is
    /// not of the file's group (`in_group`, asked only then), as a local file system does
    /// (Linux's `setattr_should_drop_suidgid`). Nothing is written when there is nothing to
    /// take off; the answer says whether a bit came off.
    pub fn take_set_id_off(
        &self,
        ino: u64,
        in_group: impl FnOnce(u32) -> bool,
    ) -> Result<bool, FsError> {
        let st = self.getattr(ino)?;
        if st.kind != Kind::File || st.attr.mode & 0o6000 == 0 {
            return Ok(false);
        }
        let mut mode = super::without_privileges(st.attr.mode);
        if mode & 0o2000 != 0 && !in_group(st.attr.gid) {
            mode &= !0o2000;
        }
        if mode == st.attr.mode {
            return Ok(false);
        }
        self.setattr(
            ino,
            SetAttr {
                mode: Some(mode),
                ..SetAttr::default()
            },
        )?;
        Ok(true)
    }

    pub fn statfs(&self) -> StatFs {
        let mut total = 0u64;
        let mut free = 0u64;
        for (g, _) in self.replicas.groups.iter().enumerate() {
            let f = self.replicas.group_free[g].load(Ordering::Relaxed);
            let cap = self.group_capacity(g);
            total = total.saturating_add(cap);
            free = free.saturating_add(f.min(cap));
        }
        let files = self.lock().parent_of.len() as u64;
        StatFs {
            total_bytes: total,
            free_bytes: free,
            files,
        }
    }

    pub(super) fn group_capacity(&self, g: usize) -> u64 {
        self.replicas.groups[g]
            .iter()
            .map(|&m| self.replicas.capacity[m].unwrap_or(1 << 40))
            .min()
            .unwrap_or(0)
    }

    /// Reads each group's free space from IMAP QUOTA (else the configured capacity).
    pub fn refresh_quota(&self) {
        for (g, members) in self.replicas.groups.iter().enumerate() {
            let mut free = u64::MAX;
            for &m in members {
                let a = &self.replicas.accounts[m];
                if !a.is_up() {
                    continue;
                }
                let f = match a.remote.quota() {
                    Ok(Some((used, limit))) => limit.saturating_sub(used),
                    _ => self.replicas.capacity[m].unwrap_or(1 << 40),
                };
                free = free.min(f);
            }
            if free == u64::MAX {
                free = self.group_capacity(g);
            }
            self.replicas.group_free[g].store(free, Ordering::Relaxed);
        }
    }

    // ---------------------------------------------------------------- file data

    pub fn open_file(&self, ino: u64) -> Result<u64, FsError> {
        if crate::snapview::is_view(ino) {
            let e = self.snap_entry(ino)?;
            if e.kind == Kind::Dir {
                return Err(FsError::IsDir);
            }
        }
        let mut tree = self.lock();
        if !tree.orphans.contains_key(&ino)
            && !crate::snapview::is_view(ino)
            && self.entry_by_ino(&mut tree, ino)?.kind == Kind::Dir
        {
            return Err(FsError::IsDir);
        }
        let fh = self.tree.new_handle();
        tree.handles.insert(fh, ino);
        *tree.open_count.entry(ino).or_default() += 1;
        Ok(fh)
    }

    pub fn release(&self, fh: u64) -> Result<(), FsError> {
        let ino = {
            let tree = self.lock();
            tree.handles.get(&fh).copied()
        };
        let Some(ino) = ino else {
            return Ok(());
        };
        // The kernel sends RELEASE after close() has returned, possibly while the file is
        // open again and being written: only the last handle commits here (where close
        // commits and waits, every close already did through FLUSH), so a late release
        // never commits another handle's half-written data.
        let last = self.lock().open_count.get(&ino).copied().unwrap_or(0) <= 1;
        let flushed = if last { self.close(ino) } else { Ok(()) };
        let mut tree = self.lock();
        tree.handles.remove(&fh);
        let n = tree.open_count.entry(ino).or_default();
        *n = n.saturating_sub(1);
        if *n == 0 {
            tree.open_count.remove(&ino);
            if tree.orphans.remove(&ino).is_some() {
                tree.writers.remove(&ino);
            } else if tree
                .writers
                .get(&ino)
                .is_some_and(|w| !w.changed && w.in_flight == 0 && w.pending.is_empty())
            {
                // Nothing to commit (an inline file's content, unchanged): the entry has
                // it all, and a block-sized buffer per closed file would add up.
                tree.writers.remove(&ino);
            }
        }
        flushed
    }

    /// The file's entry (or its orphan) as currently committed.
    pub(super) fn file_entry(&self, tree: &mut Loaded, ino: u64) -> Result<Entry, FsError> {
        if let Some(e) = tree.orphans.get(&ino) {
            return Ok(e.clone());
        }
        let e = self.entry_by_ino(tree, ino)?;
        match e.kind {
            Kind::File => Ok(e),
            Kind::Dir => Err(FsError::IsDir),
            Kind::Symlink => Err(FsError::Invalid("symlink".into())),
            Kind::Fifo | Kind::CharDevice | Kind::BlockDevice | Kind::Socket => {
                Err(FsError::Invalid("special file".into()))
            }
        }
    }
}
