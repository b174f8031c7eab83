//! Versions, restore, snapshots, gc and fsck (docs/mailfs.md 8).

use std::collections::HashSet;

use mailfs_format::{Kind as MsgKind, open};

use crate::FsError;
use crate::fs::{Fs, INODES, MANIFEST_BIT, ROOT, inode_name, seal_with};
use crate::message_name::NameId;
use crate::meta::{BlockRef, Entry, Kind, Snapshot};
use crate::now_secs;

/// Progress of a long operation: (done, total).
pub type Progress<'a> = &'a dyn Fn(u64, u64);

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileVersion {
    pub version: u64,
    pub size: u64,
    pub mtime_ns: i64,
    /// The directory version it was found in (the newest one).
    pub dir_version: u64,
}

impl Fs {
    fn parent_and_name(&self, path: &str) -> Result<(u64, Vec<u8>), FsError> {
        let trimmed = path.trim_end_matches('/');
        let (dir, name) = match trimmed.rfind('/') {
            Some(i) => (&trimmed[..i], &trimmed[i + 1..]),
            None => ("", trimmed),
        };
        if name.is_empty() {
            return Err(FsError::Invalid(format!("{path:?} names no file")));
        }
        let parent = if dir.is_empty() {
            ROOT
        } else {
            let (_, _, st) = self.resolve(dir)?;
            if st.kind != Kind::Dir {
                return Err(FsError::NotDir);
            }
            st.ino
        };
        // A file with several names keeps its history under its inode entry.
        if let Some(id) = self.linked_file(parent, name.as_bytes())? {
            return Ok((INODES, inode_name(id)));
        }
        Ok((parent, name.as_bytes().to_vec()))
    }

    /// Every entry `name` had in directory `parent` that the accounts still hold: in the
    /// retained directory messages, in the log pages, and now. (directory version, entry).
    fn entries_named(&self, parent: u64, name: &[u8]) -> Result<Vec<(u64, Entry)>, FsError> {
        let mut out = Vec::new();
        for v in self.dir_versions(parent) {
            if let Ok(d) = self.read_dir_version(parent, v)
                && let Some(e) = d.entries.get(name)
            {
                out.push((v, e.clone()));
            }
        }
        for page in self.log_pages() {
            for d in page.dirs.iter().filter(|d| d.id == parent) {
                if let Some(e) = d.put.iter().find(|e| e.name == name) {
                    out.push((d.version, e.clone()));
                }
            }
        }
        let current = self.current_dir(parent)?;
        if let Some(e) = current.entries.get(name) {
            out.push((current.version, e.clone()));
        }
        out.sort_by_key(|(v, _)| std::cmp::Reverse(*v));
        Ok(out)
    }

    /// The committed versions of a file still held in its directory's retained versions
    /// and log pages, newest first.
    pub fn versions(&self, path: &str) -> Result<Vec<FileVersion>, FsError> {
        let (parent, name) = self.parent_and_name(path)?;
        let mut seen = HashSet::new();
        let mut out = Vec::new();
        for (v, e) in self.entries_named(parent, &name)? {
            let Some(fm) = &e.file else { continue };
            // A version whose content reclaim removed is history no more.
            if fm.dirty.is_some() || !seen.insert(fm.version) || !self.content_present(e.id, fm) {
                continue;
            }
            out.push(FileVersion {
                version: fm.version,
                size: e.size,
                mtime_ns: e.attr.map(|a| a.mtime).unwrap_or(0),
                dir_version: v,
            });
        }
        if out.is_empty() {
            return Err(FsError::NotFound);
        }
        out.sort_by_key(|v| std::cmp::Reverse(v.version));
        Ok(out)
    }

    /// Makes file version `version` the current content again (as a new version, so the
    /// history stays append-only). Works for a deleted file too, while its versions are
    /// retained.
    pub fn restore(&self, path: &str, version: u64) -> Result<u64, FsError> {
        let (parent, name) = self.parent_and_name(path)?;
        let mut found: Option<Entry> = None;
        let mut newest = 0;
        for (_, e) in self.entries_named(parent, &name)? {
            if let Some(fm) = &e.file {
                newest = newest.max(fm.version);
                if found.is_none() && fm.version == version && fm.dirty.is_none() {
                    found = Some(e.clone());
                }
            }
        }
        let mut e = found.ok_or(FsError::NotFound)?;
        // Reclaim must not remove the blocks this makes current again (after any expunge
        // in progress, so the check below sees what is left).
        self.reclaim.forget_file(e.id);
        if let Some(fm) = &e.file
            && !self.content_present(e.id, fm)
        {
            return Err(FsError::Invalid(format!(
                "version {version} of {path}: its content was reclaimed (versions_max)"
            )));
        }
        let current = self.current_dir(parent)?;
        if let Some(cur) = current.entries.get(&name) {
            if cur.kind == Kind::Dir {
                return Err(FsError::IsDir);
            }
            if let Some(fm) = &cur.file {
                newest = newest.max(fm.version);
            }
            // Keep the current inode so open handles and the mount see the same file.
            if cur.id != e.id && cur.kind == Kind::File {
                return Err(FsError::Invalid(format!(
                    "{path} is now another file; move it away to restore the old one"
                )));
            }
        }
        let new_version = newest + 1;
        if let Some(fm) = &mut e.file {
            fm.version = new_version;
            fm.dirty = None;
        }
        if let Some(a) = &mut e.attr {
            a.ctime = crate::now_ns();
        }
        self.replace_entry(parent, e)?;
        self.sync_metadata()?;
        Ok(new_version)
    }

    pub fn snapshot(&self, name: &str) -> Result<usize, FsError> {
        if name.is_empty() || name.len() > 200 || name.contains('/') || name == "." || name == ".."
        {
            return Err(FsError::Invalid(format!("snapshot name {name:?}")));
        }
        // Blocks current now stay out of reclaim once superseded: the snapshot names them.
        self.reclaim.pin_current();
        // A snapshot pins directory messages by version: the log goes into them first.
        self.sync_metadata()?;
        self.checkpoint()?;
        let dirs = self.walk_dirs()?;
        let (_, mut sb) = self.superblock();
        if sb.snapshots.iter().any(|s| s.name == name) {
            return Err(FsError::Exists);
        }
        let n = dirs.len();
        sb.snapshots.push(Snapshot {
            name: name.to_string(),
            created: now_secs(),
            dirs,
        });
        self.write_superblock(sb)?;
        Ok(n)
    }

    /// Removes what no retained version reaches (M4), with UID EXPUNGE only.
    pub fn gc(&self, progress: Progress) -> Result<GcReport, FsError> {
        // Every current directory version becomes a directory message first: gc keeps
        // current versions by their names.
        self.checkpoint()?;
        let current = self.walk_dirs()?;
        let now = now_secs();
        let retain_after = now - self.retention.as_secs() as i64;
        let grace_after = now - self.orphan_grace.as_secs() as i64;
        let mut keys_by_account = Vec::new();
        for a in &self.replicas.accounts {
            if !a.is_up() {
                return Err(FsError::Unavailable(format!(
                    "{} is down; gc needs every account",
                    a.remote.describe()
                )));
            }
            keys_by_account.push(a.load_index()?);
        }
        // Directory versions to keep.
        let mut keep_dirs: HashSet<(u64, u64)> = current.iter().copied().collect();
        for s in self.snapshots() {
            keep_dirs.extend(s.dirs.iter().copied());
        }
        for keys in &keys_by_account {
            for (_, k) in keys {
                if k.kind == MsgKind::Directory && k.time > retain_after {
                    keep_dirs.insert((k.object, k.version));
                }
            }
        }
        // Log pages to keep: those after the checkpoint (a mount replays them) and those
        // younger than the retention period (versions, restore).
        let log_from = self.log_from();
        let mut keep_pages: HashSet<u64> = HashSet::new();
        for keys in &keys_by_account {
            for (_, k) in keys {
                if k.kind == MsgKind::LogPage && (k.index > log_from || k.time > retain_after) {
                    keep_pages.insert(k.index);
                }
            }
        }
        // Blocks those versions and pages reach (new and previous lists of dirty entries
        // too).
        let mut keep_blocks: HashSet<(u64, u64, u64)> = HashSet::new();
        let mut manifests: Vec<(u64, BlockRef)> = Vec::new();
        let mut mark = |e: &Entry| {
            if let Some(fm) = &e.file {
                let prev = fm.dirty.iter().flat_map(|p| p.blocks.iter());
                for b in fm.blocks.iter().chain(prev) {
                    if keep_blocks.insert((e.id, b.index, b.version))
                        && b.version & MANIFEST_BIT != 0
                    {
                        manifests.push((e.id, b.clone()));
                    }
                }
            }
        };
        let total = (keep_dirs.len() + keep_pages.len()) as u64;
        for (i, (id, v)) in keep_dirs.iter().enumerate() {
            progress(i as u64, total);
            let d = match self.read_dir_version(*id, *v) {
                Ok(d) => d,
                Err(e) => {
                    // Unreadable: keep every block, to be safe.
                    return Err(FsError::Integrity(format!(
                        "directory {id:x} v{v}: {e}; run fsck first"
                    )));
                }
            };
            d.entries.values().for_each(&mut mark);
        }
        for (i, seq) in keep_pages.iter().enumerate() {
            progress((keep_dirs.len() + i) as u64, total);
            let page = self
                .log_page(*seq)
                .map_err(|e| FsError::Integrity(format!("log page {seq}: {e}; run fsck first")))?;
            for d in &page.dirs {
                d.put.iter().for_each(&mut mark);
            }
        }
        // Chunks those blocks' manifests name (a manifest that cannot be read keeps gc
        // from removing any chunk: it could name any of them).
        let mut keep_chunks: HashSet<(u64, u64)> = HashSet::new();
        let mut chunks_unknown = false;
        for (i, (file, b)) in manifests.iter().enumerate() {
            progress(total + i as u64, total + manifests.len() as u64);
            let name_id = b.name_id(*file);
            let members = self.replicas.groups[b.group as usize].clone();
            match self
                .get(&members, name_id, self.sealing())
                .and_then(|p| crate::meta::decode_manifest(&p))
            {
                Ok(m) => keep_chunks.extend(m.chunks.iter().map(|c| c.name())),
                Err(e) => {
                    tracing::warn!("file {file:x} block {} manifest: {e}", b.index);
                    chunks_unknown = true;
                }
            }
        }
        progress(total, total);
        let latest_sb = self.superblock().0;
        let mut report = GcReport::default();
        for (a, keys) in self.replicas.accounts.iter().zip(&keys_by_account) {
            let mut doomed = Vec::new();
            for (uid, k) in keys {
                let remove = match k.kind {
                    MsgKind::Directory => !keep_dirs.contains(&(k.object, k.version)),
                    MsgKind::Block => {
                        !keep_blocks.contains(&(k.object, k.index, k.version))
                            && k.time <= grace_after
                    }
                    MsgKind::Superblock => k.version + 1 < latest_sb,
                    // An unnamed chunk goes only after `orphan_grace`: a commit in progress
                    // names only young chunks (`Fs::chunk_reusable`).
                    MsgKind::Chunk => {
                        !chunks_unknown
                            && !keep_chunks.contains(&(k.object, k.index))
                            && k.time <= grace_after
                    }
                    MsgKind::LogPage => !keep_pages.contains(&k.index),
                    MsgKind::JournalPage => false,
                };
                if remove {
                    match k.kind {
                        MsgKind::Directory => report.directories += 1,
                        MsgKind::Block => report.blocks += 1,
                        MsgKind::Chunk => report.chunks += 1,
                        MsgKind::LogPage => report.log_pages += 1,
                        _ => report.other += 1,
                    }
                    doomed.push((*uid, k.id()));
                }
            }
            let uids: Vec<u32> = doomed.iter().map(|(u, _)| *u).collect();
            if !uids.is_empty() {
                a.expunge(&uids)?;
                for (u, id) in &doomed {
                    a.forget(id, &[*u]);
                }
            }
        }
        Ok(report)
    }

    /// Checks every directory and block on every replica; rewrites missing or damaged
    /// copies from a good one.
    pub fn fsck(&self, progress: Progress) -> Result<FsckReport, FsError> {
        let mut report = FsckReport::default();
        for a in &self.replicas.accounts {
            if a.is_up() {
                a.load_index()?;
                report.foreign_messages += a.foreign.load(std::sync::atomic::Ordering::Relaxed);
            } else {
                report.accounts_down += 1;
            }
        }
        // Loading the tree repairs what a crash left; then the log goes into directory
        // messages, so each current version below is one.
        let dirs = self.walk_dirs()?;
        let links = self.repair_links(&dirs)?;
        report.inodes = links.inodes;
        report.repaired.extend(links.repaired);
        report.unrecoverable.extend(links.unrecoverable);
        self.sync_metadata()?;
        self.checkpoint()?;
        let dirs = self.walk_dirs()?;
        let mut work: Vec<Item> = Vec::new();
        work.extend(self.log_page_seqs(true).into_iter().map(Item::Page));
        for (id, v) in &dirs {
            work.push(Item::Dir(*id, *v));
            let d = self.current_dir(*id)?;
            for e in d.entries.values() {
                if let Some(fm) = &e.file {
                    for b in &fm.blocks {
                        work.push(Item::Block(e.id, b.clone()));
                    }
                }
            }
        }
        let total = work.len() as u64;
        let mut chunks_checked: HashSet<[u8; 16]> = HashSet::new();
        for (i, item) in work.iter().enumerate() {
            progress(i as u64, total);
            match item {
                Item::Dir(id, v) => {
                    report.directories += 1;
                    let name_id = NameId {
                        kind: MsgKind::Directory,
                        object: *id,
                        index: 0,
                        version: *v,
                    };
                    let payload = self.get(&self.all_accounts(), name_id, self.sealing())?;
                    let pages = crate::meta::decode_dir(&payload)?.pages;
                    self.check_replicas(&self.all_accounts(), name_id, &payload, None, &mut report);
                    // The rest of a checkpoint cut into pages.
                    for index in 1..u64::from(pages) {
                        let name_id = NameId { index, ..name_id };
                        let payload = self.get(&self.all_accounts(), name_id, self.sealing())?;
                        self.check_replicas(
                            &self.all_accounts(),
                            name_id,
                            &payload,
                            None,
                            &mut report,
                        );
                    }
                }
                Item::Page(seq) => {
                    report.log_pages += 1;
                    let name_id = crate::fs::page_id(*seq);
                    match self.get(&self.all_accounts(), name_id, self.sealing()) {
                        Ok(payload) => self.check_replicas(
                            &self.all_accounts(),
                            name_id,
                            &payload,
                            None,
                            &mut report,
                        ),
                        // History only (the checkpoint above holds the current tree).
                        Err(e) => report
                            .unrecoverable
                            .push(format!("log page {seq}: {e} (past versions only)")),
                    }
                }
                Item::Block(file, b) => {
                    report.blocks += 1;
                    let name_id = b.name_id(*file);
                    let members = self.replicas.groups[b.group as usize].clone();
                    if b.version & MANIFEST_BIT != 0 {
                        self.fsck_chunked(*file, b, &members, &mut chunks_checked, &mut report);
                        continue;
                    }
                    match self.load_block(*file, b) {
                        Ok(data) => {
                            self.check_replicas(&members, name_id, &data, Some(b), &mut report);
                        }
                        Err(e) => {
                            report.unrecoverable.push(format!(
                                "file {file:x} block {} v{}: {e}",
                                b.index, b.version
                            ));
                        }
                    }
                }
            }
        }
        progress(total, total);
        Ok(report)
    }

    /// A deduplicated block: the whole block must come back from its chunks; then its
    /// manifest and each chunk (once per fsck) on every member of their groups.
    fn fsck_chunked(
        &self,
        file: u64,
        b: &BlockRef,
        members: &[usize],
        checked: &mut HashSet<[u8; 16]>,
        report: &mut FsckReport,
    ) {
        let name_id = b.name_id(file);
        let unrecoverable = |report: &mut FsckReport, e: FsError| {
            report.unrecoverable.push(format!(
                "file {file:x} block {} v{:x}: {e}",
                b.index, b.version
            ))
        };
        if let Err(e) = self.load_block(file, b) {
            return unrecoverable(report, e);
        }
        let manifest = match self
            .get(members, name_id, self.sealing())
            .and_then(|p| crate::meta::decode_manifest(&p).map(|m| (p, m)))
        {
            Ok(pm) => pm,
            Err(e) => return unrecoverable(report, e),
        };
        self.check_replicas(members, name_id, &manifest.0, None, report);
        for c in &manifest.1.chunks {
            if !checked.insert(c.id) {
                continue;
            }
            report.chunks += 1;
            let ckid = c.name_id();
            match self.fetch_chunk(c) {
                Ok(data) => {
                    let cm = self.replicas.groups[self.chunk_group(c) as usize].clone();
                    self.check_replicas(&cm, ckid, &data, None, report);
                }
                Err(e) => return unrecoverable(report, e),
            }
        }
    }

    fn check_replicas(
        &self,
        members: &[usize],
        name_id: NameId,
        plain: &[u8],
        block: Option<&BlockRef>,
        report: &mut FsckReport,
    ) {
        for &m in members {
            let a = &self.replicas.accounts[m];
            if !a.is_up() {
                continue;
            }
            let expected = self
                .message_name(name_id.kind, name_id.object, name_id.index, name_id.version)
                .header(m as u8);
            let mut good = false;
            for uid in a.uids(&name_id) {
                if let Ok(Some(bytes)) = a.fetch(uid)
                    && let Ok(p) = open(self.sealing(), &expected, &bytes)
                    && block.is_none_or(|b| *blake3::hash(&p).as_bytes() == b.hash)
                {
                    good = true;
                    break;
                }
            }
            if !good {
                let name =
                    self.message_name(name_id.kind, name_id.object, name_id.index, name_id.version);
                match seal_with(self.sealing(), &name, m as u8, plain)
                    .and_then(|env| a.append_now(&[(name, env)]).map_err(FsError::from))
                {
                    Ok(()) => report.repaired.push(format!(
                        "{}: rewrote {:?} {:x}.{} v{}",
                        a.remote.describe(),
                        name_id.kind,
                        name_id.object,
                        name_id.index,
                        name_id.version
                    )),
                    Err(e) => report.unrecoverable.push(format!(
                        "{}: could not rewrite {name_id:?}: {e}",
                        a.remote.describe()
                    )),
                }
            }
        }
    }
}

impl Fs {
    /// Rebuilds what lost directory messages hid (M8): a directory with no readable version
    /// is written again, empty; every file whose blocks no readable directory version names
    /// is put back, under `/lost+found/<file id>`, from its blocks alone (each index's newest
    /// block that authenticates; the size from the last block).
    pub fn rebuild(&self, progress: Progress) -> Result<RebuildReport, FsError> {
        let mut report = RebuildReport::default();
        for a in &self.replicas.accounts {
            if a.is_up() {
                a.load_index()?;
            }
        }
        // Walk the tree, recreating directories that cannot be read (the inode directory
        // too, if a link made it: `current_dir` gives an empty one otherwise).
        let mut stack = vec![(ROOT, ROOT), (INODES, ROOT)];
        let mut seen = HashSet::new();
        let mut recreated = HashSet::new();
        while let Some((id, parent)) = stack.pop() {
            if !seen.insert(id) {
                continue;
            }
            let d = match self.current_dir(id) {
                Ok(d) => d,
                Err(e) => {
                    tracing::warn!("directory {id:x} unreadable ({e}); recreated empty");
                    self.recreate_dir(id, parent)?;
                    recreated.insert(id);
                    report.directories_recreated += 1;
                    self.current_dir(id)?
                }
            };
            for e in d.entries.values() {
                if e.kind == Kind::Dir {
                    stack.push((e.id, id));
                }
            }
        }
        // Files any readable directory version names, current or retained.
        let mut named: HashSet<u64> = HashSet::new();
        let mut dir_versions: Vec<(u64, u64)> = Vec::new();
        let mut blocks: std::collections::HashMap<u64, Vec<crate::message_name::NameId>> =
            std::collections::HashMap::new();
        for a in self.replicas.accounts.iter().filter(|a| a.is_up()) {
            for (k, _) in a.ids_matching(|_| true) {
                match k.kind {
                    MsgKind::Directory => dir_versions.push((k.object, k.version)),
                    MsgKind::Block => blocks.entry(k.object).or_default().push(k),
                    _ => {}
                }
            }
        }
        dir_versions.sort_unstable();
        dir_versions.dedup();
        let total = dir_versions.len() as u64;
        for (i, (id, v)) in dir_versions.iter().enumerate() {
            progress(i as u64, total);
            if let Ok(d) = self.read_dir_version(*id, *v) {
                for e in d.entries.values() {
                    named.insert(e.id);
                }
            }
        }
        // And the log's entries, but not those of a directory lost above: the log alone
        // could not bring it back, so what it named is lost unless recovered here.
        for page in self.log_pages() {
            for d in page.dirs.iter().filter(|d| !recreated.contains(&d.id)) {
                named.extend(d.put.iter().map(|e| e.id));
            }
        }
        progress(total, total);
        let lost: Vec<u64> = blocks
            .keys()
            .copied()
            .filter(|f| !named.contains(f))
            .collect();
        if lost.is_empty() {
            self.sync_metadata()?;
            return Ok(report);
        }
        let lf = match self.lookup(ROOT, b"lost+found") {
            Ok(st) => st.ino,
            Err(FsError::NotFound) => self.mkdir(ROOT, b"lost+found", 0o700, 0, 0)?.ino,
            Err(e) => return Err(e),
        };
        for file in lost {
            let mut ids = blocks.remove(&file).unwrap_or_default();
            // Newest first, so the first block of each index that authenticates wins.
            ids.sort_by_key(|k| std::cmp::Reverse((k.index, k.version)));
            ids.sort_by_key(|k| k.index);
            let mut refs: Vec<BlockRef> = Vec::new();
            for k in ids {
                if refs.last().is_some_and(|r| r.index == k.index) {
                    continue;
                }
                let members: Vec<usize> = (0..self.replicas.accounts.len())
                    .filter(|&m| self.replicas.accounts[m].has(&k))
                    .collect();
                let data = self.get(&members, k, self.sealing()).and_then(|p| {
                    if k.version & MANIFEST_BIT == 0 {
                        return Ok(p);
                    }
                    let m = crate::meta::decode_manifest(&p)?;
                    let mut out = Vec::new();
                    for c in &m.chunks {
                        out.extend_from_slice(&self.fetch_chunk(c)?);
                    }
                    Ok(out)
                });
                if let Ok(data) = data {
                    let group = self.replicas.accounts[members[0]].group as u8;
                    refs.push(BlockRef {
                        index: k.index,
                        version: k.version,
                        group,
                        len: data.len() as u32,
                        hash: *blake3::hash(&data).as_bytes(),
                    });
                }
            }
            let Some(last) = refs.last() else { continue };
            let size = last.index * u64::from(self.block_size) + u64::from(last.len);
            let version = refs
                .iter()
                .map(|r| crate::fs::file_version_of(r.version))
                .max()
                .unwrap_or(0)
                + 1;
            let name = format!("{file:012x}").into_bytes();
            let now = crate::now_ns();
            self.replace_entry(
                lf,
                Entry {
                    attr: Some(crate::meta::Attr::new(0o600, 0, 0, now)),
                    size,
                    file: Some(crate::meta::FileMeta {
                        version,
                        block_size: self.block_size,
                        blocks: refs,
                        dirty: None,
                        inline: None,
                    }),
                    ..Entry::bare(&name, Kind::File, file)
                },
            )?;
            report.files_recovered += 1;
        }
        self.sync_metadata()?;
        Ok(report)
    }
}

#[derive(Debug, Default, Clone)]
pub struct RebuildReport {
    pub directories_recreated: u64,
    pub files_recovered: u64,
}

enum Item {
    Page(u64),
    Dir(u64, u64),
    Block(u64, BlockRef),
}

#[derive(Debug, Default, Clone)]
pub struct GcReport {
    pub directories: u64,
    pub blocks: u64,
    pub chunks: u64,
    pub other: u64,
    /// Metadata log pages past the checkpoint and the retention period.
    pub log_pages: u64,
}

#[derive(Debug, Default, Clone)]
pub struct FsckReport {
    /// Metadata log pages checked (current and history).
    pub log_pages: u64,
    /// Files with more than one name (entries of the inode directory) checked.
    pub inodes: u64,
    pub directories: u64,
    pub blocks: u64,
    pub chunks: u64,
    pub repaired: Vec<String>,
    pub unrecoverable: Vec<String>,
    pub foreign_messages: u64,
    pub accounts_down: u64,
}

impl FsckReport {
    pub fn clean(&self) -> bool {
        self.repaired.is_empty() && self.unrecoverable.is_empty() && self.accounts_down == 0
    }
}
