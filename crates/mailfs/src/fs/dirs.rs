//! Directory messages: loading the newest version that authenticates, crash repair, and
//! writing new versions; the tree helpers the CLI commands use.

use super::*;

impl Tree {
    pub(super) fn lock(&self) -> MutexGuard<'_, Loaded> {
        self.loaded.lock_or_panic()
    }

    /// Runs `commit` as the only commit of file `ino` (docs/mailfs.md 5): a second one
    /// waits for it.
    pub(super) fn one_commit<R>(&self, ino: u64, commit: impl FnOnce() -> R) -> R {
        let lock = self
            .commit_locks
            .lock_or_panic()
            .entry(ino)
            .or_default()
            .clone();
        let r = {
            let _one = lock.lock_or_panic();
            commit()
        };
        let mut locks = self.commit_locks.lock_or_panic();
        // The map's reference and ours: nobody else waits for this file.
        if Arc::strong_count(&lock) == 2 {
            locks.remove(&ino);
        }
        r
    }

    /// A new file or directory handle number.
    pub(super) fn new_handle(&self) -> u64 {
        self.next_fh.fetch_add(1, Ordering::Relaxed)
    }
}

impl Fs {
    // ---------------------------------------------------------------- directories

    pub(super) fn lock(&self) -> MutexGuard<'_, Loaded> {
        self.tree.lock()
    }

    /// The directory versions found in the accounts, newest first.
    pub(crate) fn dir_versions(&self, id: u64) -> Vec<u64> {
        let mut v: Vec<u64> = self
            .replicas
            .accounts
            .iter()
            .filter(|a| a.is_up())
            .flat_map(|a| a.ids_matching(|k| k.kind == MsgKind::Directory && k.object == id))
            .map(|(k, _)| k.version)
            .collect();
        v.sort_unstable();
        v.dedup();
        v.reverse();
        v
    }

    pub(crate) fn read_dir_version(&self, id: u64, version: u64) -> Result<DirState, FsError> {
        let name_id = NameId {
            kind: MsgKind::Directory,
            object: id,
            index: 0,
            version,
        };
        let payload = self.get(&self.all_accounts(), name_id, &self.sealing)?;
        let mut d = meta::decode_dir(&payload)?;
        if d.id != id {
            return Err(FsError::Integrity(format!(
                "directory {id:x} names {:x}",
                d.id
            )));
        }
        // A checkpoint cut into pages: the rest of the entries.
        for index in 1..u64::from(d.pages) {
            let name_id = NameId { index, ..name_id };
            let page =
                meta::decode_dir(&self.get(&self.all_accounts(), name_id, &self.sealing)?)?;
            if page.id != id || page.pages != d.pages {
                return Err(FsError::Integrity(format!(
                    "directory {id:x} v{version} page {index} does not belong"
                )));
            }
            d.entries.extend(page.entries);
        }
        if d.entries.len() > meta::DIR_ENTRIES_MAX {
            return Err(FsError::Corrupt(format!(
                "directory {id:x} has too many entries"
            )));
        }
        Ok(DirState::from_meta(version, d))
    }

    /// The newest directory version that authenticates (M3: an older one is used only
    /// when every newer one is rejected).
    pub(super) fn fetch_latest_dir(&self, id: u64) -> Result<DirState, FsError> {
        let mut last = FsError::Corrupt(format!("directory {id:x} not found"));
        for v in self.dir_versions(id) {
            match self.read_dir_version(id, v) {
                Ok(d) => return Ok(d),
                Err(e) => {
                    tracing::warn!("directory {id:x} v{v}: {e}");
                    last = e;
                }
            }
        }
        Err(last)
    }

    /// A directory as the servers hold it: its newest directory message (the checkpoint),
    /// then the changes the log pages after it make (docs/mailfs.md 12a). A directory made
    /// since the checkpoint exists only in the log.
    fn load_dir(&self, id: u64) -> Result<DirState, FsError> {
        let deltas = self.tree.metalog.replay_for(id);
        if id == INODES && deltas.is_empty() && self.dir_versions(id).is_empty() {
            if self.superblock().1.inodes {
                // A checkpoint wrote it: its messages are on accounts that are down (or
                // lost; `fsck --rebuild`). Starting it empty would hide every linked file.
                return Err(FsError::Unavailable(
                    "the inode directory (hard-linked files) is on no account that is up".into(),
                ));
            }
            // No file has had a second name yet: the inode directory is made by the first
            // link (its first record starts from version 0).
            return Ok(DirState {
                version: 0,
                id,
                parent: ROOT,
                attr: Attr::new(0o700, 0, 0, now_ns()),
                entries: BTreeMap::new(),
                inline_bytes: 0,
                subdirs: 0,
            });
        }
        let checkpoint = match self.fetch_latest_dir(id) {
            Ok(d) => Some(d),
            Err(_) if deltas.first().is_some_and(|d| d.base == 0) => None,
            Err(e) => return Err(e),
        };
        if deltas.is_empty() {
            return checkpoint.ok_or_else(|| FsError::Corrupt(format!("directory {id:x}")));
        }
        metalog::replay(id, checkpoint, &deltas)
    }

    pub(super) fn ensure_dir<'t>(
        &self,
        tree: &'t mut Loaded,
        id: u64,
    ) -> Result<&'t mut DirState, FsError> {
        if !tree.dirs.contains_key(&id) {
            let d = self.load_dir(id)?;
            let links = d.entries.values().any(|e| e.link);
            for (name, e) in d.entries.iter().filter(|(_, e)| !e.link) {
                tree.parent_of.insert(e.id, (id, name.clone()));
            }
            tree.dirs.insert(id, d);
            if links {
                // A link's object lives in the inode directory: known before any call
                // by inode number reaches it.
                self.ensure_dir(tree, INODES)?;
            }
            if !self.read_only.load(Ordering::SeqCst) {
                self.repair(tree, id)?;
            }
        }
        Ok(tree.dirs.get_mut(&id).expect("loaded"))
    }

    /// Finishes what a crash interrupted in this directory (docs/mailfs.md 5): a dirty file
    /// becomes its new version if every new block arrived, else its old one; a rename
    /// across directories is completed.
    pub(super) fn repair(&self, tree: &mut Loaded, id: u64) -> Result<(), FsError> {
        let mut d = tree.dirs[&id].clone();
        let mut changed = false;
        for e in d.entries.values_mut() {
            if let Some(fm) = &mut e.file
                && let Some(prev) = fm.dirty.take()
            {
                let complete = fm.blocks.iter().all(|b| self.block_present(e.id, b));
                if !complete {
                    tracing::warn!(
                        "file {:x} v{}: blocks missing after a crash; rolled back to v{}",
                        e.id,
                        fm.version,
                        prev.version
                    );
                    // Keep the version counter past the failed one, so its stray blocks
                    // are never mistaken for a later write's.
                    fm.blocks = prev.blocks;
                    fm.inline = prev.inline;
                    e.size = prev.size;
                }
                changed = true;
            }
        }
        if changed {
            self.stats.repairs.fetch_add(1, Ordering::Relaxed);
            self.write_dir(tree, d)?;
        }
        // Renames across directories, one mark at a time, re-reading this directory from
        // the tree each time: finishing one may rewrite it (the other side's repair).
        for _ in 0..meta::DIR_ENTRIES_MAX {
            let Some((name, e)) = tree.dirs[&id]
                .entries
                .iter()
                .find(|(_, e)| e.moving_from.is_some() || e.moving_to.is_some())
                .map(|(n, e)| (n.clone(), e.clone()))
            else {
                break;
            };
            self.stats.repairs.fetch_add(1, Ordering::Relaxed);
            if let Some(src) = e.moving_from {
                // This is the target: the rename got past its second step, so finish it.
                if src != id {
                    let s = self.ensure_dir(tree, src)?.clone();
                    // Matched by id and mark: links of one file share its id.
                    if let Some(stale) = s
                        .entries
                        .iter()
                        .find(|(_, x)| x.id == e.id && x.moving_to == Some(id))
                        .map(|(n, _)| n.clone())
                    {
                        let mut s2 = s;
                        s2.entries.remove(&stale);
                        self.write_dir(tree, s2)?;
                    }
                }
                let mut d2 = tree.dirs[&id].clone();
                if let Some(x) = d2.entries.get_mut(&name) {
                    x.moving_from = None;
                }
                self.write_dir(tree, d2)?;
            } else if let Some(dst) = e.moving_to {
                // This is the source: finished if the target has the entry, else undone.
                let reached = dst != id
                    && self
                        .ensure_dir(tree, dst)?
                        .entries
                        .values()
                        .any(|x| x.id == e.id && x.moving_from == Some(id));
                let mut d2 = tree.dirs[&id].clone();
                match d2.entries.get(&name) {
                    Some(x) if x.id == e.id && reached => {
                        d2.entries.remove(&name);
                    }
                    Some(x) if x.id == e.id => {
                        if let Some(x) = d2.entries.get_mut(&name) {
                            x.moving_to = None;
                        }
                    }
                    _ => continue,
                }
                self.write_dir(tree, d2)?;
            }
        }
        Ok(())
    }

    pub(super) fn block_present(&self, file: u64, b: &BlockRef) -> bool {
        let id = b.name_id(file);
        self.replicas
            .groups
            .get(b.group as usize)
            .is_some_and(|members| members.iter().any(|&m| self.replicas.accounts[m].has(&id)))
    }

    /// Makes `d` the next version of its directory: the change goes into the metadata log
    /// (a page of its own before this returns when `metadata_batch_ms` is 0, else the
    /// batch), and the tree holds the new version at once.
    pub(super) fn write_dir(&self, tree: &mut Loaded, mut d: DirState) -> Result<(), FsError> {
        self.writable()?;
        let version = d.version + 1;
        let change = metalog::Pending::between(tree.dirs.get(&d.id), &d, version);
        self.tree.metalog.record(self, d.id, change)?;
        if let (Some(undo), Some(old)) = (&mut tree.group_undo, tree.dirs.get(&d.id)) {
            let mut entries: Vec<(Vec<u8>, Option<Entry>)> = old
                .entries
                .iter()
                .map(|(n, e)| (n.clone(), Some(e.clone())))
                .collect();
            entries.extend(
                d.entries
                    .keys()
                    .filter(|n| !old.entries.contains_key(*n))
                    .map(|n| (n.clone(), None)),
            );
            undo.push(Undo {
                dir: d.id,
                entries,
                attr: old.attr,
                parent: old.parent,
                version: old.version,
            });
        }
        d.version = version;
        d.recount();
        for (name, e) in d.entries.iter().filter(|(_, e)| !e.link) {
            tree.parent_of.insert(e.id, (d.id, name.clone()));
        }
        tree.dirs.insert(d.id, d);
        Ok(())
    }

    /// Changes directory `id` in place and records the change in the metadata log, at the
    /// cost of the entries it touches rather than of the whole directory (a create in a
    /// directory of 100,000 entries copies one entry). `edit` may change the directory's
    /// attributes and parent and the entries named in `names` (add, replace, remove), and
    /// nothing else. If `edit` fails or the change cannot be recorded, the directory is
    /// left as it was.
    pub(super) fn edit_dir<R>(
        &self,
        tree: &mut Loaded,
        id: u64,
        names: &[&[u8]],
        edit: impl FnOnce(&mut DirState) -> Result<R, FsError>,
    ) -> Result<R, FsError> {
        self.writable()?;
        self.ensure_dir(tree, id)?;
        let d = tree.dirs.get_mut(&id).expect("loaded");
        let before: Vec<Option<Entry>> = names.iter().map(|n| d.entries.get(*n).cloned()).collect();
        let (attr, parent, version) = (d.attr, d.parent, d.version);
        let undo = |d: &mut DirState, before: Vec<Option<Entry>>| {
            for (n, e) in names.iter().zip(before) {
                match e {
                    Some(e) => d.entries.insert(n.to_vec(), e),
                    None => d.entries.remove(*n),
                };
            }
            d.attr = attr;
            d.parent = parent;
        };
        let r = match edit(d) {
            Ok(r) => r,
            Err(e) => {
                undo(d, before);
                return Err(e);
            }
        };
        debug_assert_eq!(d.version, version, "edit_dir owns the version");
        let change = metalog::Pending::of_names(version, d, names);
        if let Err(e) = self.tree.metalog.record(self, id, change) {
            let d = tree.dirs.get_mut(&id).expect("loaded");
            undo(d, before);
            return Err(e);
        }
        if let Some(undo) = &mut tree.group_undo {
            undo.push(Undo {
                dir: id,
                entries: names
                    .iter()
                    .map(|n| n.to_vec())
                    .zip(before.clone())
                    .collect(),
                attr,
                parent,
                version,
            });
        }
        let d = tree.dirs.get_mut(&id).expect("loaded");
        d.version = version + 1;
        let was: usize = before.iter().flatten().map(inline_len).sum();
        let now: usize = names
            .iter()
            .filter_map(|n| d.entries.get(*n))
            .map(inline_len)
            .sum();
        d.inline_bytes = d.inline_bytes + now - was;
        let dirs_in = |e: &Entry| u32::from(e.kind == Kind::Dir);
        let dirs_was: u32 = before.iter().flatten().map(dirs_in).sum();
        let dirs_now: u32 = names
            .iter()
            .filter_map(|n| d.entries.get(*n))
            .map(dirs_in)
            .sum();
        d.subdirs = d.subdirs + dirs_now - dirs_was;
        debug_assert_eq!(
            (
                d.entries.values().map(inline_len).sum::<usize>(),
                d.entries.values().map(dirs_in).sum::<u32>()
            ),
            (d.inline_bytes, d.subdirs),
            "directory {id:x}: the counts kept match the entries"
        );
        for n in names {
            if let Some(e) = d.entries.get(*n).filter(|e| !e.link) {
                tree.parent_of.insert(e.id, (id, n.to_vec()));
            }
        }
        Ok(r)
    }

    pub(super) fn entry_of(&self, tree: &mut Loaded, ino: u64) -> Result<(u64, Vec<u8>), FsError> {
        tree.parent_of.get(&ino).cloned().ok_or(FsError::NotFound)
    }

    /// The entry that holds object `ino`'s attributes (for a file with several names, its
    /// inode entry), as the tree holds it now.
    pub(super) fn entry_by_ino(&self, tree: &mut Loaded, ino: u64) -> Result<Entry, FsError> {
        let (parent, name) = self.entry_of(tree, ino)?;
        self.ensure_dir(tree, parent)?
            .entries
            .get(&name)
            .cloned()
            .ok_or(FsError::NotFound)
    }

    pub(super) fn stat_entry(&self, tree: &mut Loaded, e: &Entry) -> Result<Stat, FsError> {
        match e.kind {
            Kind::Dir => {
                let d = self.ensure_dir(tree, e.id)?;
                Ok(dir_stat(d))
            }
            _ if e.link => {
                let inode = self.inode_entry(tree, e.id)?;
                self.stat_entry(tree, &inode)
            }
            _ => {
                let mut size = e.size;
                let mut attr = e.attr.unwrap_or(Attr::new(0o644, 0, 0, 0));
                if let Some(w) = tree.writers.get(&e.id) {
                    size = w.size;
                    if w.changed {
                        attr.mtime = w.mtime;
                    }
                }
                Ok(Stat {
                    ino: e.id,
                    kind: e.kind,
                    size,
                    attr,
                    nlink: e.links.max(1),
                    rdev: e.rdev,
                })
            }
        }
    }

    // ---------------------------------------------------------------- paths (CLI)

    /// Resolves a path inside the file system ("/a/b").
    pub fn resolve(&self, path: &str) -> Result<(u64, Vec<u8>, Stat), FsError> {
        let mut dir = ROOT;
        let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
        if parts.is_empty() {
            return Ok((ROOT, Vec::new(), self.getattr(ROOT)?));
        }
        for (i, part) in parts.iter().enumerate() {
            let st = self.lookup(dir, part.as_bytes())?;
            if i + 1 == parts.len() {
                return Ok((dir, part.as_bytes().to_vec(), st));
            }
            if st.kind != Kind::Dir {
                return Err(FsError::NotDir);
            }
            dir = st.ino;
        }
        unreachable!("loop returns on the last part")
    }

    pub(crate) fn superblock(&self) -> (u64, Superblock) {
        self.sb.lock_or_panic().clone()
    }

    pub(crate) fn write_superblock(&self, sb: Superblock) -> Result<(), FsError> {
        let mut guard = self.sb.lock_or_panic();
        let version = guard.0 + 1;
        let name = self.message_name(MsgKind::Superblock, 0, 0, version);
        let sealing = keys::superblock_sealing(&self.kek);
        self.put(&self.all_accounts(), name, &meta::encode(&sb), &sealing)?;
        *guard = (version, sb);
        Ok(())
    }

    /// Every directory reachable from the root: (id, current version).
    pub fn walk_dirs(&self) -> Result<Vec<(u64, u64)>, FsError> {
        let mut out = Vec::new();
        let mut stack = vec![ROOT];
        let mut tree = self.lock();
        while let Some(id) = stack.pop() {
            let d = self.ensure_dir(&mut tree, id)?;
            out.push((id, d.version));
            for e in d.entries.values() {
                if e.kind == Kind::Dir {
                    stack.push(e.id);
                }
            }
        }
        // The inode directory, once a link made it: its files are reachable through links.
        let inodes = self.ensure_dir(&mut tree, INODES)?.version;
        if inodes > 0 {
            out.push((INODES, inodes));
        }
        out.sort_unstable();
        Ok(out)
    }

    /// Writes an empty directory `id` in place of one whose every version is lost (fsck
    /// --rebuild), as a directory message above every version the accounts or the log
    /// still name.
    pub(crate) fn recreate_dir(&self, id: u64, parent: u64) -> Result<(), FsError> {
        let mut tree = self.lock();
        let version = self
            .dir_versions(id)
            .first()
            .copied()
            .unwrap_or(0)
            .max(self.tree.metalog.version_in_log(id))
            + 1;
        let d = DirState {
            version,
            id,
            parent,
            attr: Attr::new(0o755, 0, 0, now_ns()),
            entries: BTreeMap::new(),
            inline_bytes: 0,
            subdirs: 0,
        };
        self.write_checkpoint(&d)?;
        for (name, e) in d.entries.iter().filter(|(_, e)| !e.link) {
            tree.parent_of.insert(e.id, (d.id, name.clone()));
        }
        tree.dirs.insert(id, d);
        Ok(())
    }

    /// The file a link entry `name` in `parent` names, if it is one (without copying the
    /// directory, as `current_dir` would).
    pub(crate) fn linked_file(&self, parent: u64, name: &[u8]) -> Result<Option<u64>, FsError> {
        let mut tree = self.lock();
        Ok(self
            .ensure_dir(&mut tree, parent)?
            .entries
            .get(name)
            .filter(|e| e.link)
            .map(|e| e.id))
    }

    pub(crate) fn current_dir(&self, id: u64) -> Result<DirState, FsError> {
        let mut tree = self.lock();
        Ok(self.ensure_dir(&mut tree, id)?.clone())
    }

    pub(crate) fn replace_entry(&self, parent: u64, entry: Entry) -> Result<(), FsError> {
        self.writable()?;
        let mut tree = self.lock();
        tree.writers.remove(&entry.id);
        let name = entry.name.clone();
        self.edit_dir(&mut tree, parent, &[&name], |d| {
            d.entries.insert(name.clone(), entry);
            Ok(())
        })
    }
}
