//! The engine: the tree, the crash protocol, placement and replication (docs/mailfs.md 4–8).

mod background;
mod dirs;
mod hedge;
mod links;
mod metalog;
mod posix;
mod quorum;
mod read;
pub(crate) mod reclaim;
mod snapshots;
mod upload;
mod write;
mod writeback;

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use mailfs_format::{Kind as MsgKind, Sealing, open, open_owned, seal};

use crate::account::{Account, HealthSignal};
use crate::cache::{BlockId, Cache};
use crate::config::Config;
use crate::keys;
use crate::locking::{CondvarExt, MutexExt};
use crate::message_name::{MessageName, NameId};
use crate::meta::{
    self, Attr, BlockRef, Dir, Entry, FileMeta, Kind, META_FORMAT, NAME_BYTES_MAX, Previous,
    SYMLINK_BYTES_MAX, Superblock,
};
use crate::remote::Remote;
use crate::{FsError, now_ns, now_secs};
pub(crate) use links::inode_name;
pub use links::{INODES, LINKS_MAX};
pub(crate) use metalog::page_id;
use read::Blocks;

pub const ROOT: u64 = 1;
/// Object ids are random in this range, so they are valid inode numbers with room above
/// them for snapshot inodes, and never collide with the reserved low numbers.
const ID_MIN: u64 = 1 << 16;
const ID_MAX: u64 = 1 << 47;
/// Largest file: the block list of one entry must fit a directory message.
pub const FILE_BYTES_MAX: u64 = 1 << 42;
/// Blocks per MULTIAPPEND and bytes per batch.
const APPEND_BATCH_MAX: usize = 16;
const APPEND_BATCH_BYTES_MAX: usize = 8 << 20;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stat {
    pub ino: u64,
    pub kind: Kind,
    pub size: u64,
    pub attr: Attr,
    pub nlink: u32,
    /// A device's number; 0 for everything else.
    pub rdev: u64,
}

#[derive(Debug, Default, Clone, Copy)]
pub struct SetAttr {
    pub mode: Option<u32>,
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    pub size: Option<u64>,
    pub atime: Option<i64>,
    pub mtime: Option<i64>,
}

#[derive(Debug, Clone, Copy)]
pub struct StatFs {
    pub total_bytes: u64,
    pub free_bytes: u64,
    pub files: u64,
}

#[derive(Default)]
pub struct Stats {
    pub integrity_errors: AtomicU64,
    pub dir_writes: AtomicU64,
    pub blocks_written: AtomicU64,
    pub bytes_written: AtomicU64,
    pub blocks_fetched: AtomicU64,
    pub bytes_fetched: AtomicU64,
    pub repairs: AtomicU64,
    pub journal_sent: AtomicU64,
    pub journal_coalesced: AtomicU64,
    /// Chunk messages appended (dedup).
    pub chunks_written: AtomicU64,
    /// Chunks a deduplicated block named that were already stored: bytes not sent.
    pub chunks_reused: AtomicU64,
    pub bytes_deduplicated: AtomicU64,
    /// Reads served by fetching only the segments they need (partial FETCH).
    pub partial_fetches: AtomicU64,
    /// Blocks a scan fetched for the first time: kept in memory, not written to the disk
    /// cache (config `scan_bytes`).
    pub scan_blocks_uncached: AtomicU64,
    /// Metadata log pages written (docs/mailfs.md 12a).
    pub log_pages: AtomicU64,
    /// Checkpoints written (compactions of the log into directory messages).
    pub checkpoints: AtomicU64,
    /// Superseded block messages the mount removed (reclaim, docs/mailfs.md 8), counting
    /// every copy, and their plain bytes.
    pub reclaimed_messages: AtomicU64,
    pub reclaimed_bytes: AtomicU64,
    /// Of those messages, log pages (no bytes counted for them).
    pub reclaimed_log_pages: AtomicU64,
    /// Reads that asked a second member because the first had not answered within the
    /// hedge delay, and those the second answered first (docs/mailfs.md 7).
    pub hedged_reads: AtomicU64,
    pub hedge_wins: AtomicU64,
    /// Messages of a write sent to another member because the one they went to had taken
    /// nothing for the hedge delay (docs/mailfs.md 7).
    pub hedged_writes: AtomicU64,
}

#[derive(Debug, Clone)]
pub(crate) struct DirState {
    pub(crate) version: u64,
    pub(crate) id: u64,
    pub(crate) parent: u64,
    pub(crate) attr: Attr,
    pub(crate) entries: BTreeMap<Vec<u8>, Entry>,
    /// Bytes of inline file content among the entries (bounded by
    /// `meta::DIR_INLINE_BYTES_MAX`): kept up to date by `edit_dir`, recounted by
    /// `write_dir` and when the directory is loaded.
    pub(crate) inline_bytes: usize,
    /// Entries that are directories (for `st_nlink`), kept as `inline_bytes` is: a stat of
    /// the directory, which the kernel asks for after every change in it, must not count.
    pub(crate) subdirs: u32,
}

/// About what an entry costs encoded (CBOR, short field names).
pub(crate) fn entry_bytes(e: &Entry) -> usize {
    let file = e.file.as_ref().map_or(0, |f| {
        (f.blocks.len() + f.dirty.as_ref().map_or(0, |p| p.blocks.len())) * 56
            + f.inline.as_ref().map_or(0, Vec::len)
            + f.dirty
                .as_ref()
                .and_then(|p| p.inline.as_ref())
                .map_or(0, Vec::len)
    });
    96 + e.name.len() + file + e.target.as_ref().map_or(0, Vec::len)
}

/// Bytes of inline content an entry holds.
pub(crate) fn inline_len(e: &Entry) -> usize {
    e.file
        .as_ref()
        .and_then(|f| f.inline.as_ref())
        .map_or(0, Vec::len)
}

impl DirState {
    /// The directory as checkpoint pages: entries in name order, cut at about
    /// `DIR_PAGE_BYTES` of (estimated) payload each; every page repeats the header fields.
    fn to_pages(&self) -> Vec<Dir> {
        let mut pages: Vec<Vec<Entry>> = Vec::new();
        let mut page: Vec<Entry> = Vec::new();
        let mut bytes = 0usize;
        for e in self.entries.values() {
            let n = entry_bytes(e);
            if bytes + n > meta::DIR_PAGE_BYTES && !page.is_empty() {
                pages.push(std::mem::take(&mut page));
                bytes = 0;
            }
            bytes += n;
            page.push(e.clone());
        }
        pages.push(page);
        let n = pages.len() as u32;
        pages
            .into_iter()
            .map(|entries| Dir {
                format: META_FORMAT,
                id: self.id,
                parent: self.parent,
                attr: self.attr,
                written_at: now_secs(),
                entries,
                pages: n,
            })
            .collect()
    }

    pub(crate) fn from_meta(version: u64, d: Dir) -> DirState {
        let mut s = DirState {
            version,
            id: d.id,
            parent: d.parent,
            attr: d.attr,
            entries: d.entries.into_iter().map(|e| (e.name.clone(), e)).collect(),
            inline_bytes: 0,
            subdirs: 0,
        };
        s.recount();
        s
    }

    pub(crate) fn recount(&mut self) {
        self.inline_bytes = self.entries.values().map(inline_len).sum();
        self.subdirs = self
            .entries
            .values()
            .filter(|e| e.kind == Kind::Dir)
            .count() as u32;
    }
}

/// Unflushed changes to one open file.
///
/// Every block index of the file is in at most one of `dirty` (changed, in memory),
/// `pending` (on its way to the accounts: a background upload or a commit in progress) and
/// `blocks` (stored); an index in none of them is a hole. Readers look in all three, so a
/// block is never invisible while it moves from one to the next.
struct Writer {
    /// Tells this writer's uploads from those of a writer the file had before.
    id: u64,
    /// The version this change will commit as; blocks uploaded early carry it.
    new_version: u64,
    size: u64,
    /// Current stored blocks (the committed list, minus truncated, plus landed uploads).
    blocks: BTreeMap<u64, BlockRef>,
    /// Changed blocks not yet uploaded: full-size buffers.
    dirty: BTreeMap<u64, Vec<u8>>,
    dirty_bytes: u64,
    /// Blocks being uploaded, with their content. An upload that lands moves its block to
    /// `blocks` only if this is still the same version (a later write supersedes it).
    pending: BTreeMap<u64, (BlockRef, Arc<Vec<u8>>)>,
    /// Background uploads not landed yet.
    in_flight: usize,
    /// The first failure of a background upload, for the next settle to report.
    upload_error: Option<FsError>,
    changed: bool,
    mtime: i64,
    /// Bytes written into each dirty block since it became dirty: a block filled whole is
    /// uploaded in the background (write-behind) instead of waiting for the flush.
    filled: HashMap<u64, u64>,
    /// Uploads counter: the low bits of block versions (see `block_version`).
    next_write: u64,
}

/// Bytes of background uploads one open file may have in flight before its writer waits:
/// many small batches in flight keep every connection busy (one big batch at a time left the
/// connections idle while its slowest account finished).
const UPLOAD_BYTES_IN_FLIGHT_MAX: u64 = 128 << 20;
/// Chunk fetches in flight for one deduplicated block.
const CHUNK_FETCHES_MAX: usize = 8;
/// Whole blocks go up while the file is still being written (see `Fs::write`).
const WRITE_BEHIND: bool = true;
/// Block versions are `file version << 32 | upload number`, the upload numbers of a writer
/// starting at a random point: every upload of a block gets its own message name, even when
/// one file version uploads a block twice, or a crash left orphans under the same file
/// version (a writer after the crash reuses it).
pub const BLOCK_VERSION_SHIFT: u32 = 32;
/// Set in the version of a block whose message is a chunk manifest (dedup): the name says
/// how to read it, and the AEAD binds the name.
pub const MANIFEST_BIT: u64 = 1 << 63;

/// The file version that wrote a block, from the block's version.
pub fn file_version_of(block_version: u64) -> u64 {
    (block_version & !MANIFEST_BIT) >> BLOCK_VERSION_SHIFT
}

/// The tree part of `Fs` (docs/mailfs.md 3, 5, 12a): the directories and inodes loaded,
/// the open files and their writers, one commit at a time per file, and the two ways
/// changes leave it: the metadata log (directory changes) and the write-back committers
/// (closed files).
pub(crate) struct Tree {
    loaded: Mutex<Loaded>,
    /// Signalled (with `loaded`) whenever a background upload lands.
    landed: std::sync::Condvar,
    /// One commit at a time per file (docs/mailfs.md 5): a second flush waits, so no commit
    /// can name a block list that misses the blocks of one still in progress.
    commit_locks: Mutex<HashMap<u64, Arc<Mutex<()>>>>,
    next_fh: AtomicU64,
    /// Directory changes on their way to the servers as log pages.
    metalog: metalog::MetaLog,
    /// Closed files waiting for their commit.
    pub(crate) writeback: writeback::WriteBack,
}

/// What is loaded of the tree, under one lock.
#[derive(Default)]
struct Loaded {
    dirs: HashMap<u64, DirState>,
    /// Where each loaded object's entry lives: (parent directory, name).
    parent_of: HashMap<u64, (u64, Vec<u8>)>,
    writers: HashMap<u64, Writer>,
    open_count: HashMap<u64, u32>,
    /// Files unlinked while open: still readable through their handles.
    orphans: HashMap<u64, Entry>,
    handles: HashMap<u64, u64>,
    /// While a group of changes runs without batching (`Fs::grouped`): how to take each
    /// change back if its page cannot be written.
    group_undo: Option<Vec<Undo>>,
}

/// A directory change as it was before (`Fs::grouped`): the named entries, attributes,
/// parent and version.
struct Undo {
    dir: u64,
    entries: Vec<(Vec<u8>, Option<Entry>)>,
    attr: Attr,
    parent: u64,
    version: u64,
}

impl Replicas {
    /// Copies a write to `targets` needs before it is acknowledged: each group's quorum,
    /// at most as many as it has among the targets.
    fn quorum_of(&self, targets: &[usize]) -> usize {
        self.groups
            .iter()
            .zip(&self.quorum)
            .map(|(members, &q)| q.min(targets.iter().filter(|t| members.contains(t)).count()))
            .sum()
    }
}

/// The replicas part of `Fs`: the accounts (virtual disks), the replication groups that
/// stripe over them, and what placement and replication read (docs/mailfs.md 1 and 7).
pub struct Replicas {
    /// Members of each group that must hold a write before it is acknowledged
    /// (`write_quorum`).
    quorum: Vec<usize>,
    /// Rung when an account is marked down or up (the stats file is written then).
    health: Arc<HealthSignal>,
    pub accounts: Vec<Arc<Account>>,
    /// Account positions of each replication group's members.
    pub groups: Vec<Vec<usize>>,
    /// Connections (streams) per account.
    connections: Vec<usize>,
    /// The floor of the hedge delay (`hedge_delay_ms`); None: reads and writes are not
    /// hedged.
    hedge_delay: Option<std::time::Duration>,
    /// `member_deadline_ms`: the hedge delay stays below it.
    member_deadline: std::time::Duration,
    /// Configured capacity per account, where it has no quota.
    capacity: Vec<Option<u64>>,
    /// Free bytes per group (from quotas), for placement.
    group_free: Vec<AtomicU64>,
}

pub struct Fs {
    pub fsid: [u8; 16],
    sealing: Sealing,
    kek: [u8; 32],
    pub block_size: u32,
    dirty_bytes_max: u64,
    /// The accounts and their groups: where messages go (placement, replication).
    pub replicas: Replicas,
    sb: Mutex<(u64, Superblock)>,
    /// Directories, inodes, open files, writers, commit locks, the metadata log.
    pub(crate) tree: Tree,
    /// The read side of the blocks: caches, fetches in flight, read-ahead, streams.
    blocks: Blocks,
    pub stats: Stats,
    pub state_dir: PathBuf,
    read_only: AtomicBool,
    stop: AtomicBool,
    /// Itself, for background work started from `&self` methods.
    me: std::sync::OnceLock<std::sync::Weak<Fs>>,
    pub(crate) snapview: Mutex<snapshots::SnapState>,
    /// Write-back journal: always opened (a previous asynchronous mount may have left
    /// records), used for new writes only in asynchronous mode.
    journal: crate::journal::Journal,
    asynchronous: bool,
    keep_written: bool,
    /// New blocks are stored as chunk manifests (docs/mailfs.md 5, deduplication).
    dedup: bool,
    /// Keys chunk names (derived from the data key): the servers cannot confirm a guess of
    /// a chunk's content from its name.
    chunk_key: [u8; 32],
    pub retention: std::time::Duration,
    pub orphan_grace: std::time::Duration,
    /// The blocks this mount's commits superseded, on their way out (docs/mailfs.md 8).
    pub(crate) reclaim: reclaim::Reclaim,
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn random_id() -> u64 {
    ID_MIN + rand::random::<u64>() % (ID_MAX - ID_MIN)
}

/// A mode without set-user-ID, and without set-group-ID when the group may execute (Linux's
/// `should_remove_suid`).
fn without_privileges(mode: u32) -> u32 {
    let mut mode = mode & !0o4000;
    if mode & 0o2010 == 0o2010 {
        mode &= !0o2000;
    }
    mode
}

fn check_name(name: &[u8]) -> Result<(), FsError> {
    if name.is_empty() || name == b"." || name == b".." || name.contains(&b'/') {
        return Err(FsError::Invalid("bad name".into()));
    }
    if name.len() > NAME_BYTES_MAX {
        return Err(FsError::NameTooLong);
    }
    Ok(())
}

/// `.snapshots` in the root belongs to the snapshot view.
fn check_reserved(parent: u64, name: &[u8]) -> Result<(), FsError> {
    if parent == ROOT && name == crate::snapview::SNAPSHOTS_NAME {
        return Err(FsError::Exists);
    }
    Ok(())
}

/// Superblocks found in a folder: (fsid, version) pairs.
fn superblocks_in(listed: &[(u32, String)]) -> Vec<[u8; 16]> {
    let mut ids: Vec<[u8; 16]> = listed
        .iter()
        .filter_map(|(_, n)| MessageName::parse(n))
        .filter(|k| k.kind == MsgKind::Superblock)
        .map(|k| k.fsid)
        .collect();
    ids.sort();
    ids.dedup();
    ids
}

impl Fs {
    /// Prepares the accounts and writes a new, empty file system (`mailstow fs mkfs`).
    pub fn mkfs(config: &Config, remotes: Vec<Box<dyn Remote>>) -> Result<[u8; 16], FsError> {
        check_layout(config, &remotes)?;
        for r in &remotes {
            r.prepare()
                .map_err(|e| FsError::Unavailable(format!("{}: {e}", r.describe())))?;
            let listed = r
                .list()
                .map_err(|e| FsError::Unavailable(format!("{}: {e}", r.describe())))?;
            if let Some(other) = superblocks_in(&listed).first() {
                return Err(FsError::Config(format!(
                    "{} already holds file system {}; use another folder",
                    r.describe(),
                    hex(other)
                )));
            }
        }
        let fsid: [u8; 16] = rand::random();
        let kek = keys::kek(config.passphrase()?.as_deref(), &fsid)?;
        let data_key: [u8; 32] = rand::random();
        let mut groups = Vec::new();
        let mut raid = 0u8;
        for g in &config.groups {
            let mut members = Vec::new();
            for _ in &g.accounts {
                members.push(raid);
                raid += 1;
            }
            groups.push(members);
        }
        let sb = Superblock {
            format: META_FORMAT,
            block_size: config.fs.block_size,
            groups,
            cipher: keys::resolve_cipher(&config.encryption.cipher).to_string(),
            wrapped_key: keys::wrap(&kek, &fsid, &data_key),
            created: now_secs(),
            snapshots: Vec::new(),
            log_from: 0,
            inodes: false,
        };
        let sb_sealing = keys::superblock_sealing(&kek);
        let data_sealing =
            keys::data_sealing(keys::resolve_cipher(&config.encryption.cipher), data_key);
        let now = now_ns();
        let root = Dir {
            format: META_FORMAT,
            id: ROOT,
            parent: ROOT,
            attr: Attr::new(0o755, 0, 0, now),
            written_at: now_secs(),
            entries: Vec::new(),
            pages: 1,
        };
        let name = |kind, object, version| MessageName {
            fsid,
            kind,
            object,
            index: 0,
            version,
            time: now_secs(),
        };
        // The root first: a superblock only ever names a complete file system.
        for (raid, r) in remotes.iter().enumerate() {
            let raid = raid as u8;
            let dk = name(MsgKind::Directory, ROOT, 1);
            let sk = name(MsgKind::Superblock, 0, 1);
            let d = seal_with(&data_sealing, &dk, raid, &meta::encode(&root))?;
            let s = seal_with(&sb_sealing, &sk, raid, &meta::encode(&sb))?;
            r.append(&[(dk.render(), &d)])
                .map_err(|e| FsError::Unavailable(format!("{}: {e}", r.describe())))?;
            r.append(&[(sk.render(), &s)])
                .map_err(|e| FsError::Unavailable(format!("{}: {e}", r.describe())))?;
        }
        Ok(fsid)
    }

    /// Opens the file system in the accounts (a mount, or a CLI command), with its local
    /// state (journal, backlogs, disk cache) on the real disk.
    pub fn open(config: &Config, remotes: Vec<Box<dyn Remote>>) -> Result<Arc<Fs>, FsError> {
        Fs::open_on(config, remotes, Arc::new(disk::RealDisk))
    }

    /// [`Fs::open`] with the local state on `disk` (the simulated disk, in crash tests).
    pub fn open_on(
        config: &Config,
        remotes: Vec<Box<dyn Remote>>,
        disk: Arc<dyn disk::Disk>,
    ) -> Result<Arc<Fs>, FsError> {
        check_layout(config, &remotes)?;
        let mut fsids = Vec::new();
        let mut reachable = 0;
        // Each account's list is read once: it finds the file system here and becomes the
        // account's index below.
        let mut listings: Vec<Option<Vec<(u32, String)>>> = Vec::with_capacity(remotes.len());
        for r in &remotes {
            let listed = r.list().ok();
            if let Some(listed) = &listed {
                reachable += 1;
                for id in superblocks_in(listed) {
                    if !fsids.contains(&id) {
                        fsids.push(id);
                    }
                }
            }
            listings.push(listed);
        }
        if reachable == 0 {
            return Err(FsError::Unavailable("no account answers".into()));
        }
        let fsid = match fsids.as_slice() {
            [one] => *one,
            [] => {
                return Err(FsError::Config(
                    "no file system in these accounts (run mailstow fs mkfs)".into(),
                ));
            }
            _ => {
                return Err(FsError::Config(
                    "the folder holds more than one file system".into(),
                ));
            }
        };
        let state_dir = config.cache.dir.join(hex(&fsid));
        disk.create_dir_all(&state_dir)
            .map_err(|e| FsError::Local(format!("{}: {e}", state_dir.display())))?;
        let mut accounts = Vec::new();
        let mut groups = Vec::new();
        let mut connections = Vec::new();
        let mut capacity = Vec::new();
        let mut remotes = remotes.into_iter();
        let health = Arc::new(HealthSignal::default());
        for (gi, g) in config.groups.iter().enumerate() {
            let mut members = Vec::new();
            for a in &g.accounts {
                let raid = accounts.len() as u8;
                let remote = remotes.next().expect("checked layout");
                accounts.push(Arc::new(Account::new(
                    raid,
                    gi,
                    remote,
                    fsid,
                    disk.clone(),
                    &state_dir,
                    health.clone(),
                )?));
                members.push(raid as usize);
                connections.push(a.connections);
                capacity.push(a.capacity_bytes);
            }
            groups.push(members);
        }
        for a in &accounts {
            match listings.get_mut(a.raid as usize).and_then(Option::take) {
                Some(listed) => {
                    a.install_index(listed);
                }
                None => {
                    // Unreachable a moment ago: one more try marks it down if it still is.
                    if let Err(e) = a.load_index() {
                        tracing::warn!(account = %a.remote.describe(), "not reachable at open: {e}");
                    }
                }
            }
        }
        let kek = keys::kek(config.passphrase()?.as_deref(), &fsid)?;
        let sb_sealing = keys::superblock_sealing(&kek);
        let group_free = groups.iter().map(|_| AtomicU64::new(u64::MAX)).collect();
        let mut fs = Fs {
            fsid,
            sealing: Sealing::MacOnly([0; 32]),
            kek,
            block_size: config.fs.block_size,
            dirty_bytes_max: config.fs.dirty_bytes_max,
            replicas: Replicas {
                quorum: groups
                    .iter()
                    .map(|g| config.write_quorum(g.len()))
                    .collect(),
                health,
                accounts,
                groups,
                connections,
                hedge_delay: config.hedge_delay(),
                member_deadline: config.member_deadline(),
                capacity,
                group_free,
            },
            sb: Mutex::new((0, placeholder_superblock())),
            tree: Tree {
                loaded: Mutex::new(Loaded::default()),
                landed: std::sync::Condvar::new(),
                commit_locks: Mutex::new(HashMap::new()),
                next_fh: AtomicU64::new(1),
                metalog: metalog::MetaLog::new(
                    config.fs.metadata_batch_ms,
                    config.fs.log_pages_max,
                ),
                writeback: Default::default(),
            },
            blocks: Blocks {
                cache: Cache::new(
                    disk.clone(),
                    state_dir.join("blocks"),
                    config.cache.memory_bytes,
                    config.cache.disk_bytes,
                    fsid,
                    Sealing::MacOnly([0; 32]),
                ),
                readahead: config.fs.readahead_blocks,
                scan_bytes: config.cache.scan_bytes,
                inflight: Mutex::new(HashMap::new()),
                readahead_tx: Mutex::new(None),
                readahead_queued: Mutex::new(Default::default()),
                read_ends: Mutex::new(HashMap::new()),
                read_in_part: Mutex::new(Default::default()),
            },
            stats: Stats::default(),
            state_dir,
            read_only: AtomicBool::new(false),
            stop: AtomicBool::new(false),
            me: std::sync::OnceLock::new(),
            snapview: Mutex::new(Default::default()),
            journal: crate::journal::Journal::open(
                disk.clone(),
                &config.cache.dir.join(hex(&fsid)).join("journal"),
                config.cache.journal_bytes_max,
            )?,
            asynchronous: config.fs.mode == crate::config::Mode::Async,
            keep_written: config.cache.keep_written,
            dedup: config.fs.dedup,
            chunk_key: [0; 32],
            retention: crate::config::parse_duration(&config.fs.retention)?,
            orphan_grace: crate::config::parse_duration(&config.fs.orphan_grace)?,
            reclaim: reclaim::Reclaim::new(
                config.fs.reclaim,
                config.fs.versions_max,
                config.fs.reclaim_delay_ms,
            ),
        };
        let (version, sb) = fs.read_superblock(&sb_sealing)?;
        let layout: Vec<usize> = sb.groups.iter().map(|g| g.len()).collect();
        let configured: Vec<usize> = fs.replicas.groups.iter().map(|g| g.len()).collect();
        if layout != configured {
            return Err(FsError::Config(format!(
                "the file system has groups of {layout:?} accounts; the config has {configured:?}"
            )));
        }
        if sb.block_size != config.fs.block_size {
            tracing::info!(
                "block size is {} (from mkfs), not the config's {}",
                sb.block_size,
                config.fs.block_size
            );
        }
        fs.block_size = sb.block_size;
        let data_key = keys::unwrap(&kek, &fsid, &sb.wrapped_key)?;
        fs.sealing = keys::data_sealing(&sb.cipher, data_key);
        fs.chunk_key = blake3::derive_key("mailfs 1 chunk names", &data_key);
        // The cache was opened before the data key was known (scanning its directory once).
        fs.blocks.cache.set_sealing(fs.sealing.clone());
        *fs.sb.lock_or_panic() = (version, sb);
        let fs = Arc::new(fs);
        let _ = fs.me.set(Arc::downgrade(&fs));
        fs.refresh_quota();
        // Catch up anything a previous run still owed before serving: the journal first
        // (the servers must hold every acknowledged change before the tree is read).
        for attempt in 0..3 {
            match fs.drain_journal() {
                Ok(_) => break,
                Err(e) if attempt == 2 => {
                    let (n, bytes) = fs.journal.pending();
                    return Err(FsError::Unavailable(format!(
                        "{n} journaled operations ({bytes} bytes) could not be sent yet: {e}; they stay in the journal"
                    )));
                }
                Err(_) => std::thread::sleep(std::time::Duration::from_millis(500)),
            }
        }
        // Then what the accounts' backlogs owe, so that the log's repair below finds on
        // each account what it was owed; then the log pages after the checkpoint, which
        // directories replay as they load.
        fs.replicate_once();
        let log_from = fs.superblock().1.log_from;
        fs.tree.metalog.load(&fs, log_from);
        Ok(fs)
    }

    pub fn set_read_only(&self, ro: bool) {
        self.read_only.store(ro, Ordering::SeqCst);
    }

    fn writable(&self) -> Result<(), FsError> {
        if self.read_only.load(Ordering::SeqCst) {
            Err(FsError::ReadOnly)
        } else {
            Ok(())
        }
    }

    fn read_superblock(&self, sealing: &Sealing) -> Result<(u64, Superblock), FsError> {
        let mut versions: Vec<u64> = self
            .replicas
            .accounts
            .iter()
            .flat_map(|a| a.ids_matching(|k| k.kind == MsgKind::Superblock))
            .map(|(k, _)| k.version)
            .collect();
        versions.sort_unstable();
        versions.dedup();
        let all: Vec<usize> = (0..self.replicas.accounts.len()).collect();
        let mut last = FsError::Corrupt("no superblock".into());
        for v in versions.into_iter().rev() {
            let id = NameId {
                kind: MsgKind::Superblock,
                object: 0,
                index: 0,
                version: v,
            };
            match self.get(&all, id, sealing) {
                Ok(p) => return Ok((v, meta::decode_superblock(&p)?)),
                Err(e) => last = e,
            }
        }
        Err(match last {
            FsError::Integrity(_) => {
                FsError::Config("wrong passphrase, or every superblock is damaged".into())
            }
            e => e,
        })
    }

    pub fn message_name(
        &self,
        kind: MsgKind,
        object: u64,
        index: u64,
        version: u64,
    ) -> MessageName {
        MessageName {
            fsid: self.fsid,
            kind,
            object,
            index,
            version,
            time: now_secs(),
        }
    }

    pub fn all_accounts(&self) -> Vec<usize> {
        (0..self.replicas.accounts.len()).collect()
    }

    pub fn sealing(&self) -> &Sealing {
        &self.sealing
    }

    /// Waits until queued disk cache files are written (tests).
    #[cfg(test)]
    pub(crate) fn settle_disk_cache(&self) {
        self.blocks.cache.settle_disk();
    }

    /// Waits until the read-ahead fetchers have loaded everything queued (tests).
    #[cfg(test)]
    pub(crate) fn settle_read_ahead(&self) {
        while !self.blocks.readahead_queued.lock_or_panic().is_empty() {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }

    /// Reads and authenticates one message from the first member that has a good copy.
    pub(crate) fn get(
        &self,
        targets: &[usize],
        id: NameId,
        sealing: &Sealing,
    ) -> Result<Vec<u8>, FsError> {
        self.get_sealed_where(targets, id, sealing, false, |_| true)
            .map(|(p, _, _)| p)
    }
}

/// A block being fetched: later askers wait for the first one's result.
#[derive(Default)]
struct Slot {
    done: Mutex<Option<Result<Arc<Vec<u8>>, FsError>>>,
    ready: std::sync::Condvar,
}

enum Source {
    Stored(BlockRef),
    Memory(Arc<Vec<u8>>),
}

fn dir_stat(d: &DirState) -> Stat {
    Stat {
        ino: d.id,
        kind: Kind::Dir,
        size: 4096,
        attr: d.attr,
        nlink: 2 + d.subdirs,
        rdev: 0,
    }
}

pub(crate) fn seal_with(
    sealing: &Sealing,
    name: &MessageName,
    raid: u8,
    payload: &[u8],
) -> Result<Vec<u8>, FsError> {
    seal(sealing, &name.header(raid), rand::random(), payload)
        .map_err(|e| FsError::Invalid(e.to_string()))
}

fn check_layout(config: &Config, remotes: &[Box<dyn Remote>]) -> Result<(), FsError> {
    let n: usize = config.groups.iter().map(|g| g.accounts.len()).sum();
    if n != remotes.len() {
        return Err(FsError::Config(format!(
            "{} accounts configured, {} connected",
            n,
            remotes.len()
        )));
    }
    Ok(())
}

fn placeholder_superblock() -> Superblock {
    Superblock {
        format: META_FORMAT,
        block_size: 0,
        groups: Vec::new(),
        cipher: String::new(),
        wrapped_key: Vec::new(),
        created: 0,
        snapshots: Vec::new(),
        log_from: 0,
        inodes: false,
    }
}
