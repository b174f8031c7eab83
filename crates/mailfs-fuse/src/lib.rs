//! The FUSE shell over the mail file system engine: each kernel request becomes one engine
//! call; engine errors become errnos here and nowhere else.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use fuser::{
    Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo, InitFlags,
    KernelConfig, LockOwner, MountOption, Notifier, OpenFlags, RenameFlags, ReplyAttr, ReplyCreate,
    ReplyData, ReplyDirectory, ReplyDirectoryPlus, ReplyEmpty, ReplyEntry, ReplyOpen, ReplyStatfs,
    ReplyWrite, Request, Session, TimeOrNow, WriteFlags,
};
use mailfs::fs::{SetAttr, Stat};
use mailfs::locking::MutexExt;
use mailfs::meta::Kind;
use mailfs::{Fs, FsError};

/// Largest FUSE write: bigger writes mean fewer requests for large files.
const WRITE_BYTES_MAX: u32 = 1 << 20;

pub struct MailFuse {
    fs: Arc<Fs>,
    /// Bypass the page cache if the kernel allows it (see `init`).
    direct_io: bool,
    /// Ask for the kernel's writeback cache (only without `direct_io`).
    writeback_cache: bool,
    /// How long the kernel may keep a missing name's negative entry (`[fs]
    /// negative_lookup_ms`); zero: every lookup of it is a request.
    negative_ttl: Duration,
    /// How long the kernel may cache attributes and names (`[fs] attr_cache_ms`). One
    /// writer per file system (this mount), so the engine's view is the truth; a second
    /// reader mount would see changes late by this much.
    ttl: Duration,
    /// What files are opened with: FOPEN_DIRECT_IO when `direct_io` and the kernel agreed.
    open_flags: FopenFlags,
    /// The kernel agreed to FUSE_HANDLE_KILLPRIV_V2 (see `init`): it flags the writes whose
    /// caller lacks CAP_FSETID.
    killpriv_v2: bool,
    /// Tells the kernel to forget what it cached (`forget_attributes`); set once the
    /// session exists, before it serves a request.
    notifier: Arc<OnceLock<Notifier>>,
    /// Where each open directory's listing stopped (`readdir`).
    dir_cursors: Mutex<HashMap<u64, DirCursor>>,
    next_dir_fh: AtomicU64,
}

/// An open directory's place in its listing: the offset of the last entry returned and its
/// name, so the next call resumes by name.
#[derive(Clone, Default)]
struct DirCursor {
    offset: u64,
    last: Option<Vec<u8>>,
}

/// Entries taken from the engine at a time while a `readdir` reply fills.
const READDIR_PAGE: usize = 256;

impl MailFuse {
    pub fn new(
        fs: Arc<Fs>,
        direct_io: bool,
        writeback_cache: bool,
        negative_ttl: Duration,
        ttl: Duration,
        notifier: Arc<OnceLock<Notifier>>,
    ) -> MailFuse {
        MailFuse {
            fs,
            direct_io,
            writeback_cache,
            negative_ttl,
            ttl,
            open_flags: FopenFlags::empty(),
            killpriv_v2: false,
            notifier,
            dir_cursors: Mutex::new(HashMap::new()),
            next_dir_fh: AtomicU64::new(1),
        }
    }
}

/// The one place engine errors become errnos.
fn errno(e: &FsError) -> Errno {
    match e {
        FsError::NotFound => Errno::ENOENT,
        FsError::Exists => Errno::EEXIST,
        FsError::NotDir => Errno::ENOTDIR,
        FsError::IsDir => Errno::EISDIR,
        FsError::NotEmpty => Errno::ENOTEMPTY,
        FsError::NameTooLong => Errno::ENAMETOOLONG,
        FsError::FileTooLarge => Errno::EFBIG,
        FsError::Invalid(_) => Errno::EINVAL,
        FsError::NotPermitted(_) => Errno::EPERM,
        FsError::TooManyLinks => Errno::EMLINK,
        FsError::ReadOnly => Errno::EROFS,
        FsError::NoSpace(_) => Errno::ENOSPC,
        FsError::Unavailable(_)
        | FsError::Integrity(_)
        | FsError::Corrupt(_)
        | FsError::Config(_)
        | FsError::Local(_) => {
            tracing::warn!("I/O error: {e}");
            Errno::EIO
        }
    }
}

fn time(ns: i64) -> SystemTime {
    if ns >= 0 {
        UNIX_EPOCH + Duration::from_nanos(ns as u64)
    } else {
        UNIX_EPOCH
    }
}

fn ns(t: TimeOrNow) -> i64 {
    match t {
        TimeOrNow::Now => mailfs::now_ns(),
        TimeOrNow::SpecificTime(t) => t
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos() as i64)
            .unwrap_or(0),
    }
}

fn file_type(k: Kind) -> FileType {
    match k {
        Kind::Dir => FileType::Directory,
        Kind::File => FileType::RegularFile,
        Kind::Symlink => FileType::Symlink,
        Kind::Fifo => FileType::NamedPipe,
        Kind::CharDevice => FileType::CharDevice,
        Kind::BlockDevice => FileType::BlockDevice,
        Kind::Socket => FileType::Socket,
    }
}

fn attr(st: &Stat, block_size: u32) -> FileAttr {
    FileAttr {
        ino: INodeNo(st.ino),
        size: st.size,
        blocks: st.size.div_ceil(512),
        atime: time(st.attr.atime),
        mtime: time(st.attr.mtime),
        ctime: time(st.attr.ctime),
        crtime: time(st.attr.ctime),
        kind: file_type(st.kind),
        perm: (st.attr.mode & 0o7777) as u16,
        nlink: st.nlink,
        uid: st.attr.uid,
        gid: st.attr.gid,
        // FUSE carries the device number in 32 bits, as the kernel's old_encode_dev does.
        rdev: u32::try_from(st.rdev).unwrap_or(0),
        blksize: block_size,
        flags: 0,
    }
}

/// The attributes of a regular file that is gone (no name, no handle), for the kernel's
/// last write-back of its times.
fn gone_file(ino: INodeNo, mtime: Option<i64>) -> FileAttr {
    empty_file(ino, mtime.map_or_else(SystemTime::now, time))
}

/// The attributes of a negative entry: node id 0 is what marks it; the kernel reads no
/// other field.
fn no_entry() -> FileAttr {
    empty_file(INodeNo(0), UNIX_EPOCH)
}

/// A regular file with no link and no content, all its times `when`.
fn empty_file(ino: INodeNo, when: SystemTime) -> FileAttr {
    FileAttr {
        ino,
        size: 0,
        blocks: 0,
        atime: when,
        mtime: when,
        ctime: when,
        crtime: when,
        kind: FileType::RegularFile,
        perm: 0,
        nlink: 0,
        uid: 0,
        gid: 0,
        rdev: 0,
        blksize: 4096,
        flags: 0,
    }
}

impl MailFuse {
    fn entry(&self, r: Result<Stat, FsError>, reply: ReplyEntry) {
        match r {
            Ok(st) => reply.entry(&self.ttl, &attr(&st, self.fs.block_size), Generation(0)),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn empty(&self, r: Result<(), FsError>, reply: ReplyEmpty) {
        match r {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(errno(&e)),
        }
    }

    /// Makes the kernel ask for `ino`'s attributes again at its next `stat`. A write that
    /// took set-ID bits off calls this before its reply: the kernel marks only size, times
    /// and blocks stale after a write, and a `stat` that asks for the mode alone
    /// (`stat -c %a`) would otherwise see the old bits until `ttl` ran out. Only the
    /// attributes: a negative offset leaves the page cache alone (and takes no lock the
    /// write holds).
    fn forget_attributes(&self, ino: INodeNo) {
        let Some(notifier) = self.notifier.get() else {
            tracing::warn!(
                "no notifier: the kernel keeps inode {ino:?}'s old mode for {:?}",
                self.ttl
            );
            return;
        };
        if let Err(e) = notifier.inval_inode(ino, -1, 0) {
            tracing::warn!(
                "the kernel keeps inode {ino:?}'s old mode for {:?}: {e}",
                self.ttl
            );
        }
    }
}

impl MailFuse {
    /// The listing of directory `ino` from `offset`, entry by entry into `add` (which says
    /// when the reply is full). Offsets: 1 is `.`, 2 is `..`, then one per entry in name
    /// order. A call that goes on from where the handle's last one stopped resumes after
    /// that name (the common case: `getdents` in a loop); any other offset (`seekdir`)
    /// counts entries from the start.
    fn list(
        &self,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        mut add: impl FnMut(u64, u64, Kind, &[u8]) -> bool,
    ) -> Result<(), Errno> {
        let cursor = self
            .dir_cursors
            .lock_or_panic()
            .get(&fh.0)
            .cloned()
            .unwrap_or_default();
        let mut at = offset;
        if at == 0 {
            if add(ino.0, 1, Kind::Dir, b".") {
                return Ok(());
            }
            at = 1;
        }
        if at == 1 {
            let parent = self.fs.parent_of_dir(ino.0).unwrap_or(ino.0);
            if add(parent, 2, Kind::Dir, b"..") {
                return Ok(());
            }
            at = 2;
        }
        // Where the entries resume: after the handle's last name, or counted.
        let mut after: Option<Vec<u8>> = None;
        if at > 2 {
            if cursor.offset == at && cursor.last.is_some() {
                after = cursor.last.clone();
            } else {
                let mut skip = (at - 2) as usize;
                while skip > 0 {
                    let page = self
                        .fs
                        .readdir_after(ino.0, after.as_deref(), skip.min(READDIR_PAGE))
                        .map_err(|e| errno(&e))?;
                    let Some(last) = page.last() else {
                        return Ok(());
                    };
                    skip -= page.len();
                    after = Some(last.2.clone());
                }
            }
        }
        let mut last = after.clone();
        'fill: loop {
            let page = self
                .fs
                .readdir_after(ino.0, after.as_deref(), READDIR_PAGE)
                .map_err(|e| errno(&e))?;
            if page.is_empty() {
                break;
            }
            for (child, kind, name) in &page {
                if add(*child, at + 1, *kind, name) {
                    break 'fill;
                }
                at += 1;
                last = Some(name.clone());
            }
            after = last.clone();
        }
        if let Some(c) = self.dir_cursors.lock_or_panic().get_mut(&fh.0) {
            *c = DirCursor { offset: at, last };
        }
        Ok(())
    }
}

/// Whether the caller of `req` is of group `gid`: its file system group or one of its
/// supplementary groups, which the request does not carry (read from `/proc`, the
/// calling thread's `status`, only when a set-group-ID bit depends on it). Unreadable
/// counts as not of the group, so the bit comes off, as it must for a stranger.
fn caller_in_group(req: &Request) -> impl FnOnce(u32) -> bool + use<> {
    let (fsgid, pid) = (req.gid(), req.pid());
    move |gid| {
        gid == fsgid
            || std::fs::read_to_string(format!("/proc/{pid}/status"))
                .ok()
                .and_then(|status| supplementary_groups(&status))
                .is_some_and(|groups| groups.contains(&gid))
    }
}

/// The `Groups:` line of a `/proc/PID/status`.
fn supplementary_groups(status: &str) -> Option<Vec<u32>> {
    let line = status.lines().find_map(|l| l.strip_prefix("Groups:"))?;
    line.split_whitespace().map(|g| g.parse().ok()).collect()
}

impl Filesystem for MailFuse {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        let _ = config.set_max_write(WRITE_BYTES_MAX);
        let _ = config.set_max_readahead(WRITE_BYTES_MAX);
        // The file system takes set-user-ID and set-group-ID off on write, truncate and chown
        // (`Fs::take_set_id_off`, `Fs::setattr`), with the caller's own ids: without this the
        // kernel does it for the page cache's writes with the old rule (the set-group-ID
        // bit only when the group may execute), and its writeback reaches us as root. With
        // it, a cached write that must take a bit off goes through at once, as the writer,
        // flagged FUSE_WRITE_KILL_SUIDGID when the writer lacks CAP_FSETID.
        match config.add_capabilities(InitFlags::FUSE_HANDLE_KILLPRIV_V2) {
            Ok(()) => self.killpriv_v2 = true,
            Err(e) => tracing::debug!("the kernel does not hand privilege removal over ({e:?})"),
        }
        // Listings carry attributes (`readdirplus`), the kernel choosing when they pay
        // (AUTO: the first listing, and after lookups in the directory); and lookups and
        // listings of one directory may run at once (the engine takes its own lock).
        for flag in [
            InitFlags::FUSE_DO_READDIRPLUS | InitFlags::FUSE_READDIRPLUS_AUTO,
            InitFlags::FUSE_PARALLEL_DIROPS,
        ] {
            if let Err(e) = config.add_capabilities(flag) {
                tracing::debug!("the kernel does not offer {flag:?} ({e:?})");
            }
        }
        // Only where shared mmap of such files still works (Linux 6.6 and later): older
        // kernels refuse it, and programs that map files would break.
        if self.direct_io
            && config
                .add_capabilities(InitFlags::FUSE_DIRECT_IO_ALLOW_MMAP)
                .is_ok()
        {
            self.open_flags = FopenFlags::FOPEN_DIRECT_IO;
        } else if self.writeback_cache
            && let Err(e) = config.add_capabilities(InitFlags::FUSE_WRITEBACK_CACHE)
        {
            tracing::warn!("the kernel refused the writeback cache ({e:?}); writes go through");
        }
        Ok(())
    }

    fn destroy(&mut self) {
        if let Err(e) = self.fs.flush_all() {
            tracing::error!("flushing at unmount: {e}");
        }
        if let Err(e) = self.fs.drain_journal() {
            tracing::warn!("journal kept for the next mount: {e}");
        }
        self.fs.replicate_once();
        self.fs.write_stats_file();
        self.fs.shutdown();
    }

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        match self.fs.lookup(parent.0, name.as_bytes()) {
            // An entry with node id 0 is ENOENT that the kernel may keep for the TTL (a
            // negative dentry; an ENOENT reply is never cached): git looks for the same
            // missing paths many times. The kernel replaces it itself when a name is made
            // through this mount, and nothing else adds names to the engine's tree while
            // it is mounted (docs/mailfs.md 6).
            Err(FsError::NotFound) if !self.negative_ttl.is_zero() => {
                reply.entry(&self.negative_ttl, &no_entry(), Generation(0));
            }
            r => self.entry(r, reply),
        }
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        match self.fs.getattr(ino.0) {
            Ok(st) => reply.attr(&self.ttl, &attr(&st, self.fs.block_size)),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn setattr(
        &self,
        req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        _fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        // FUSE_HANDLE_KILLPRIV_V2 (see `init`): a truncate or chown by a caller without
        // CAP_FSETID takes the set-user-ID and set-group-ID bits off here, as a write does.
        // The kernel says so with FATTR_KILL_SUIDGID, which fuser does not pass on: root is
        // taken to have CAP_FSETID and others not. The reply carries the new mode.
        if (size.is_some() || uid.is_some() || gid.is_some())
            && mode.is_none()
            && req.uid() != 0
            && let Err(e) = self.fs.take_set_id_off(ino.0, caller_in_group(req))
        {
            reply.error(errno(&e));
            return;
        }
        let set = SetAttr {
            mode,
            uid,
            gid,
            size,
            atime: atime.map(ns),
            mtime: mtime.map(ns),
        };
        let times_only =
            set.mode.is_none() && set.uid.is_none() && set.gid.is_none() && set.size.is_none();
        match self.fs.setattr(ino.0, set) {
            Ok(st) => reply.attr(&self.ttl, &attr(&st, self.fs.block_size)),
            // With the write-back cache the kernel keeps a file's times and sends them when
            // it writes the inode back, also when it evicts an inode that was renamed over
            // or unlinked after its last close: nothing names it any more, so the times
            // have nowhere to go. ENOENT there is recorded against the whole file system,
            // and the next `syncfs` (`sync -f`) fails for it. An inode still open is an
            // orphan and is found above, so this is only ever a file that is gone.
            Err(FsError::NotFound) if times_only => {
                reply.attr(&Duration::ZERO, &gone_file(ino, mtime.map(ns)))
            }
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn readlink(&self, _req: &Request, ino: INodeNo, reply: ReplyData) {
        match self.fs.readlink(ino.0) {
            Ok(t) => reply.data(&t),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn mknod(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        rdev: u32,
        reply: ReplyEntry,
    ) {
        // FIFOs, devices and sockets are entries with nothing stored (docs/mailfs.md 3).
        let special = match mode & libc::S_IFMT {
            libc::S_IFIFO => Some(Kind::Fifo),
            libc::S_IFCHR => Some(Kind::CharDevice),
            libc::S_IFBLK => Some(Kind::BlockDevice),
            libc::S_IFSOCK => Some(Kind::Socket),
            libc::S_IFREG => None,
            _ => {
                reply.error(Errno::EINVAL);
                return;
            }
        };
        if let Some(kind) = special {
            let r = self.fs.mknod(
                parent.0,
                name.as_bytes(),
                kind,
                mode & !umask & 0o7777,
                u64::from(rdev),
                req.uid(),
                req.gid(),
            );
            self.entry(r, reply);
            return;
        }
        let r = self
            .fs
            .create(
                parent.0,
                name.as_bytes(),
                mode & !umask,
                req.uid(),
                req.gid(),
            )
            .and_then(|(st, fh)| self.fs.release(fh).map(|()| st));
        self.entry(r, reply);
    }

    fn mkdir(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        reply: ReplyEntry,
    ) {
        self.entry(
            self.fs.mkdir(
                parent.0,
                name.as_bytes(),
                mode & !umask,
                req.uid(),
                req.gid(),
            ),
            reply,
        );
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        self.empty(self.fs.unlink(parent.0, name.as_bytes()), reply);
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        self.empty(self.fs.rmdir(parent.0, name.as_bytes()), reply);
    }

    fn symlink(
        &self,
        req: &Request,
        parent: INodeNo,
        link_name: &OsStr,
        target: &Path,
        reply: ReplyEntry,
    ) {
        self.entry(
            self.fs.symlink(
                parent.0,
                link_name.as_bytes(),
                target.as_os_str().as_bytes(),
                req.uid(),
                req.gid(),
            ),
            reply,
        );
    }

    fn rename(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        if flags.contains(RenameFlags::RENAME_EXCHANGE) {
            reply.error(Errno::EINVAL);
            return;
        }
        let no_replace = flags.contains(RenameFlags::RENAME_NOREPLACE);
        self.empty(
            self.fs.rename(
                parent.0,
                name.as_bytes(),
                newparent.0,
                newname.as_bytes(),
                no_replace,
            ),
            reply,
        );
    }

    /// A hard link (docs/mailfs.md 12b).
    fn link(
        &self,
        _req: &Request,
        ino: INodeNo,
        newparent: INodeNo,
        newname: &OsStr,
        reply: ReplyEntry,
    ) {
        self.entry(self.fs.link(ino.0, newparent.0, newname.as_bytes()), reply);
    }

    fn open(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        match self.fs.open_file(ino.0) {
            Ok(fh) => reply.opened(FileHandle(fh), self.open_flags),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn read(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        // Replied from inside the read, from the block itself; on an error, not at all.
        let mut reply = Some(reply);
        let sent = self.fs.read_with(ino.0, offset, size, |d| {
            if let Some(r) = reply.take() {
                r.data(d);
            }
        });
        if let (Err(e), Some(r)) = (sent, reply.take()) {
            r.error(errno(&e));
        }
    }

    fn write(
        &self,
        req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        data: &[u8],
        write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        // The kernel flags a writer without CAP_FSETID (FUSE_HANDLE_KILLPRIV_V2, see
        // `init`); without that handshake, root is taken to have it and others not. The
        // page cache's own writeback is never flagged: a write that must take a bit off
        // does not wait in it.
        let writer_may_keep_set_id = if self.killpriv_v2 {
            !write_flags.contains(WriteFlags::FUSE_WRITE_KILL_SUIDGID)
        } else {
            req.uid() == 0
        };
        let taken_off = if writer_may_keep_set_id {
            Ok(false)
        } else {
            self.fs.take_set_id_off(ino.0, caller_in_group(req))
        };
        if matches!(taken_off, Ok(true)) {
            self.forget_attributes(ino);
        }
        let written = taken_off.and_then(|_| self.fs.write(ino.0, offset, data));
        match written {
            Ok(n) => reply.written(n as u32),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn flush(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        if !self.fs.close_commits() {
            // Write-back: a close only queues the file's commit (or puts a small file in
            // the metadata batch), and the last handle's RELEASE does the same, so FLUSH
            // would be a round trip `close()` waits for that buys nothing (one in six of
            // a `git clone`'s per file). ENOSYS makes the kernel stop sending it; it still
            // writes the file's dirty pages and times before `close()` returns.
            reply.error(Errno::ENOSYS);
            return;
        }
        self.empty(self.fs.close(ino.0), reply);
    }

    fn release(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        self.empty(self.fs.release(fh.0), reply);
    }

    fn fsync(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        self.empty(self.fs.fsync(ino.0), reply);
    }

    fn opendir(&self, _req: &Request, _ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        let fh = self.next_dir_fh.fetch_add(1, Ordering::Relaxed);
        self.dir_cursors
            .lock_or_panic()
            .insert(fh, DirCursor::default());
        reply.opened(FileHandle(fh), FopenFlags::empty());
    }

    fn releasedir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        reply: ReplyEmpty,
    ) {
        self.dir_cursors.lock_or_panic().remove(&fh.0);
        reply.ok();
    }

    fn readdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        let listed = self.list(ino, fh, offset, |child, at, kind, name| {
            reply.add(INodeNo(child), at, file_type(kind), OsStr::from_bytes(name))
        });
        match listed {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    /// `readdir` with each entry's attributes (asked for at `init`): the kernel fills its
    /// name and attribute caches from the listing, so a program that lists a directory
    /// and then stats or unlinks its entries (`rm -rf`, `git status`, `ls -l`) makes no
    /// LOOKUP per entry.
    fn readdirplus(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectoryPlus,
    ) {
        let listed = self.list(ino, fh, offset, |child, at, _kind, name| {
            let st = match name {
                b"." => self.fs.getattr(ino.0),
                b".." => self.fs.getattr(child),
                _ => self.fs.lookup(ino.0, name),
            };
            match st {
                Ok(st) => reply.add(
                    INodeNo(st.ino),
                    at,
                    OsStr::from_bytes(name),
                    &self.ttl,
                    &attr(&st, self.fs.block_size),
                    Generation(0),
                ),
                // Gone since the page was taken: as if listed a moment later.
                Err(_) => false,
            }
        });
        match listed {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn fsyncdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        // The kernel passes `syncfs` (`sync -f`) on to no FUSE server but virtiofs, so an
        // fsync of the root (`sync MOUNTPOINT`) stands for it: every file, queued commits
        // too. Any other directory: its changes wait in the metadata log's batch, write it.
        if ino == INodeNo::ROOT {
            self.empty(self.fs.sync_all(), reply);
        } else {
            self.empty(self.fs.sync_metadata(), reply);
        }
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        let s = self.fs.statfs();
        let bsize = self.fs.block_size as u64;
        reply.statfs(
            s.total_bytes / bsize,
            s.free_bytes / bsize,
            s.free_bytes / bsize,
            s.files,
            u64::from(u32::MAX),
            self.fs.block_size,
            mailfs::meta::NAME_BYTES_MAX as u32,
            self.fs.block_size,
        );
    }

    fn create(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        _flags: i32,
        reply: ReplyCreate,
    ) {
        match self.fs.create(
            parent.0,
            name.as_bytes(),
            mode & !umask,
            req.uid(),
            req.gid(),
        ) {
            Ok((st, fh)) => reply.created(
                &self.ttl,
                &attr(&st, self.fs.block_size),
                Generation(0),
                FileHandle(fh),
                self.open_flags,
            ),
            Err(e) => reply.error(errno(&e)),
        }
    }
}

/// The kernel's read-ahead through the page cache, in KiB: FUSE starts a mount at 128 KiB
/// and lets the file system only lower it at INIT, so a large sequential read through the
/// page cache became a FUSE request per 128 KiB. A block's worth (1 MiB, the largest
/// request, `WRITE_BYTES_MAX`) lets each request carry a whole block.
const KERNEL_READAHEAD_KB: u32 = WRITE_BYTES_MAX / 1024;

/// Sets this mount's `/sys/class/bdi/MAJ:MIN/read_ahead_kb` once the mount is up (a
/// thread, since the mount appears only when the session runs). The device comes from
/// `/proc/self/mountinfo`, never from a `stat` of the mount point: a `stat` in flight would
/// hold the mount, and an unmount right after mounting would fail as busy. Best effort:
/// only root may write the setting, and a mount without it still works, in 128 KiB
/// requests.
fn raise_kernel_readahead(mountpoint: std::path::PathBuf) {
    let Ok(mountpoint) = mountpoint.canonicalize() else {
        return;
    };
    let escaped = escape_mountinfo(&mountpoint.to_string_lossy());
    std::thread::spawn(move || {
        for _ in 0..400 {
            std::thread::sleep(Duration::from_millis(25));
            let Some(device) = mounted_device(&escaped) else {
                continue;
            };
            let path = format!("/sys/class/bdi/{device}/read_ahead_kb");
            match std::fs::write(&path, KERNEL_READAHEAD_KB.to_string()) {
                Ok(()) => tracing::debug!("{path}: {KERNEL_READAHEAD_KB}"),
                Err(e) => tracing::info!("kernel read-ahead stays at 128 KiB ({path}: {e})"),
            }
            return;
        }
    });
}

/// A path as `/proc/self/mountinfo` writes it (space, tab, newline and backslash octal).
fn escape_mountinfo(path: &str) -> String {
    path.replace('\\', "\\134")
        .replace(' ', "\\040")
        .replace('\t', "\\011")
        .replace('\n', "\\012")
}

/// The `MAJ:MIN` of the mailfs mount at `escaped` (as mountinfo writes it), if mounted.
fn mounted_device(escaped: &str) -> Option<String> {
    let info = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    info.lines().find_map(|line| {
        // id parent MAJ:MIN root mount-point options ... - fstype source super-options
        let fields: Vec<&str> = line.split(' ').collect();
        let fstype = line.split(" - ").nth(1)?.split(' ').next()?;
        (fields.get(4) == Some(&escaped) && fstype.starts_with("fuse"))
            .then(|| fields[2].to_string())
    })
}

pub struct MountOptions {
    pub threads: usize,
    pub allow_other: bool,
    /// `[fs] direct_io`.
    pub direct_io: bool,
    /// `[fs] writeback_cache`.
    pub writeback_cache: bool,
    /// `[fs] negative_lookup_ms`.
    pub negative_lookup: Duration,
    /// `[fs] attr_cache_ms`.
    pub attr_cache: Duration,
}

/// Mounts and serves until the file system is unmounted.
pub fn serve(fs: Arc<Fs>, mountpoint: &Path, opts: &MountOptions) -> std::io::Result<()> {
    let background = fs.spawn_background();
    let mut config = fuser::Config::default();
    config.mount_options = vec![
        MountOption::FSName("mailfs".into()),
        MountOption::Subtype("mailfs".into()),
        MountOption::DefaultPermissions,
        MountOption::NoDev,
        MountOption::NoSuid,
    ];
    if opts.allow_other {
        config.acl = fuser::SessionACL::All;
    }
    config.n_threads = Some(opts.threads.max(1));
    if !opts.direct_io {
        raise_kernel_readahead(mountpoint.to_path_buf());
    }
    let fs2 = fs.clone();
    let notifier = Arc::new(OnceLock::new());
    let mail_fuse = MailFuse::new(
        fs,
        opts.direct_io,
        opts.writeback_cache,
        opts.negative_lookup,
        opts.attr_cache,
        notifier.clone(),
    );
    let r = Session::new(mail_fuse, mountpoint, &config).and_then(|session| {
        let _ = notifier.set(session.notifier());
        session.run()
    });
    fs2.shutdown();
    let _ = background.join();
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mount_points_are_escaped_as_mountinfo_writes_them() {
        assert_eq!(
            escape_mountinfo("/tmp/a b\\c\td"),
            "/tmp/a\\040b\\134c\\011d"
        );
        // The root is mounted (and not FUSE): no device for it.
        assert_eq!(mounted_device("/"), None);
        assert_eq!(mounted_device("/no/such/mount"), None);
    }

    #[test]
    fn supplementary_groups_are_read_from_a_status_file() {
        let status = "Name:\tsh\nGid:\t65534\t65534\t65534\t65534\nGroups:\t0 27 \nNgid:\t0\n";
        assert_eq!(supplementary_groups(status), Some(vec![0, 27]));
        assert_eq!(supplementary_groups("Groups:\t\n"), Some(vec![]));
        assert_eq!(supplementary_groups("Name:\tsh\n"), None);
        // This process's own.
        let own = std::fs::read_to_string("/proc/self/status").unwrap();
        assert!(supplementary_groups(&own).is_some());
    }
}
