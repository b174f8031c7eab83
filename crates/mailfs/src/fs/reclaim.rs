//! Reclaim: the mount removes the blocks its own commits superseded, in the background
//! (docs/mailfs.md 8, "Reclaim"), so a file rewritten in place does not fill the accounts
//! until gc.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use super::*;

/// Block references and lists (one unit each) held for reclaim, kept and due together,
/// per mount: a commit that superseded nothing still holds its place among a file's kept
/// versions.
pub(crate) const RECLAIM_BLOCKS_MAX: usize = 65_536;
/// How often the reclaimer looks for due lists.
const RECLAIM_TICK_MS: u64 = 200;

/// The superseded lists of the mount's commits: per file the last `versions_max` (kept,
/// their versions stay restorable), then due ones waiting for their conditions.
pub(crate) struct Reclaim {
    enabled: bool,
    versions_max: usize,
    delay: Duration,
    state: Mutex<State>,
    /// Held while due lists are being expunged: `forget_file` waits for it, so a `restore`
    /// never makes current a block an expunge in progress removes.
    draining: Mutex<()>,
}

#[derive(Default)]
struct State {
    files: HashMap<u64, FileLists>,
    due: VecDeque<Superseded>,
    /// Block references in `files` and `due`.
    held: usize,
    /// Raised by every snapshot: a commit that started before one must not trust the base
    /// it read.
    generation: u64,
    /// Counts commits, to find the files touched longest ago.
    clock: u64,
    dropped: u64,
    last_error: Option<String>,
    /// Log pages up to here were reclaimed (or looked for).
    pages_done: u64,
}

struct FileLists {
    /// Blocks of this file version or older may be named by a snapshot (or were written
    /// before this mount): never reclaimed here.
    base: u64,
    /// A snapshot came since the last commit: the next one raises `base` to the version it
    /// supersedes.
    rebase: bool,
    kept: VecDeque<Superseded>,
    touched: u64,
}

struct Superseded {
    file: u64,
    /// The metadata log's ticket of the clean entry that stopped naming `blocks`; none for
    /// blocks no record ever named (`push_unnamed`).
    ticket: Option<u64>,
    at: Instant,
    blocks: Vec<BlockRef>,
}

/// What a commit superseded, for [`Reclaim::push`].
pub(crate) struct Commit {
    pub(crate) file: u64,
    /// The file version the entry had before the commit (dirty or clean).
    pub(crate) old_version: u64,
    pub(crate) version: u64,
    /// [`Reclaim::generation`] when the commit started.
    pub(crate) generation: u64,
    pub(crate) ticket: u64,
    pub(crate) blocks: Vec<BlockRef>,
}

impl Reclaim {
    pub(crate) fn new(enabled: bool, versions_max: usize, delay_ms: u64) -> Reclaim {
        Reclaim {
            enabled,
            versions_max,
            delay: Duration::from_millis(delay_ms),
            state: Mutex::new(State::default()),
            draining: Mutex::new(()),
        }
    }

    pub(crate) fn generation(&self) -> u64 {
        self.state.lock_or_panic().generation
    }

    /// Records what a commit superseded, after its clean entry was recorded.
    pub(crate) fn push(&self, c: Commit) {
        if !self.enabled {
            return;
        }
        let mut st = self.state.lock_or_panic();
        st.clock += 1;
        let clock = st.clock;
        let raced = st.generation != c.generation;
        let fl = st.files.entry(c.file).or_insert(FileLists {
            base: c.old_version,
            rebase: false,
            kept: VecDeque::new(),
            touched: 0,
        });
        if fl.rebase {
            fl.base = fl.base.max(c.old_version);
            fl.rebase = false;
        }
        if raced {
            // A snapshot came while this commit ran: it may name this commit's blocks (the
            // dirty entry's new list) as well as the old ones.
            fl.base = fl.base.max(c.version);
        }
        fl.touched = clock;
        let base = fl.base;
        let blocks: Vec<BlockRef> = c
            .blocks
            .into_iter()
            .filter(|b| file_version_of(b.version) > base)
            .collect();
        let n = blocks.len() + 1;
        fl.kept.push_back(Superseded {
            file: c.file,
            ticket: Some(c.ticket),
            at: Instant::now(),
            blocks,
        });
        let mut newly_due = Vec::new();
        while fl.kept.len() > self.versions_max {
            newly_due.extend(fl.kept.pop_front());
        }
        st.held += n;
        for s in newly_due {
            if s.blocks.is_empty() {
                // Only a place among the kept versions: nothing to remove.
                st.held -= 1;
            } else {
                st.due.push_back(s);
            }
        }
        st.bound();
    }

    /// Blocks uploaded ahead of a commit (write-behind) and superseded before any record
    /// named them (rewritten, cut, or landed after a later write): nothing on the servers
    /// names them, so they are due at once, after the delay (docs/mailfs.md 8).
    pub(crate) fn push_unnamed(&self, file: u64, blocks: Vec<BlockRef>) {
        if !self.enabled || blocks.is_empty() {
            return;
        }
        let mut st = self.state.lock_or_panic();
        st.held += blocks.len() + 1;
        st.due.push_back(Superseded {
            file,
            ticket: None,
            at: Instant::now(),
            blocks,
        });
        st.bound();
    }

    /// A snapshot pins the blocks the tree names now, which no list holds (they are
    /// current): from here on, each file's base moves up to the version its next commit
    /// supersedes, so those blocks are never reclaimed when they are superseded later.
    pub(crate) fn pin_current(&self) {
        let mut st = self.state.lock_or_panic();
        st.generation += 1;
        for fl in st.files.values_mut() {
            fl.rebase = true;
        }
    }

    /// `restore` may make a superseded block of `file` current again: its lists go (left
    /// to gc), after any expunge in progress.
    pub(crate) fn forget_file(&self, file: u64) {
        let _d = self.draining.lock_or_panic();
        let mut st = self.state.lock_or_panic();
        let mut lists: Vec<Superseded> = st
            .files
            .remove(&file)
            .map_or(Vec::new(), |fl| fl.kept.into());
        let (keep, gone): (VecDeque<_>, VecDeque<_>) = std::mem::take(&mut st.due)
            .into_iter()
            .partition(|s| s.file != file);
        st.due = keep;
        lists.extend(gone);
        st.drop_lists(lists.iter());
    }

    /// (units held, block references dropped).
    pub(crate) fn counts(&self) -> (usize, u64) {
        let st = self.state.lock_or_panic();
        (st.held, st.dropped)
    }
}

impl State {
    /// Lists let go of (left to gc).
    fn drop_lists<'a>(&mut self, lists: impl Iterator<Item = &'a Superseded>) {
        for s in lists {
            self.held -= s.blocks.len() + 1;
            self.dropped += s.blocks.len() as u64;
        }
    }

    /// Keeps `held` under `RECLAIM_BLOCKS_MAX`: the oldest due lists go first, then the
    /// kept lists of the files touched longest ago, down to 15/16 of the bound at once (a
    /// sort per eviction, not per commit). What goes is left to gc.
    fn bound(&mut self) {
        while self.held > RECLAIM_BLOCKS_MAX {
            let Some(s) = self.due.pop_front() else {
                break;
            };
            self.drop_lists([&s].into_iter());
        }
        if self.held <= RECLAIM_BLOCKS_MAX {
            return;
        }
        let mut by_age: Vec<(u64, u64)> =
            self.files.iter().map(|(f, fl)| (fl.touched, *f)).collect();
        by_age.sort_unstable();
        for (_, file) in by_age {
            if self.held <= RECLAIM_BLOCKS_MAX - RECLAIM_BLOCKS_MAX / 16 {
                break;
            }
            let fl = self.files.remove(&file).expect("listed");
            self.drop_lists(fl.kept.iter());
        }
    }
}

impl Fs {
    /// Whether every page written so far is on every account: all up, nothing owed, and in
    /// asynchronous mode nothing journaled and unsent.
    fn log_everywhere(&self) -> bool {
        self.journal.pending().0 == 0
            && self
                .replicas
                .accounts
                .iter()
                .all(|a| a.is_up() && a.backlog_len().0 == 0)
    }

    /// Expunges the due lists whose conditions hold (docs/mailfs.md 8, "Reclaim"): their
    /// superseding page is written and on every account, and `reclaim_delay_ms` passed.
    /// Returns (messages, bytes) removed.
    pub(crate) fn reclaim_once(&self) -> Result<(u64, u64), FsError> {
        let r = &self.reclaim;
        if !r.enabled {
            return Ok((0, 0));
        }
        let _d = r.draining.lock_or_panic();
        if !self.log_everywhere() {
            return Ok((0, 0));
        }
        let pages = self.reclaim_pages()?;
        let ready: Vec<Superseded> = {
            let mut st = r.state.lock_or_panic();
            if st.due.is_empty() {
                return Ok((pages, 0));
            }
            let now = Instant::now();
            let (ready, waiting): (VecDeque<_>, VecDeque<_>) =
                std::mem::take(&mut st.due).into_iter().partition(|s| {
                    s.at + r.delay <= now
                        && s.ticket
                            .is_none_or(|t| self.tree.metalog.written_through(t))
                });
            st.due = waiting;
            ready.into_iter().collect()
        };
        if ready.is_empty() {
            return Ok((pages, 0));
        }
        // Per account: the UIDs of every copy of every block, and what they held.
        let accounts = &self.replicas.accounts;
        let mut per_account: Vec<Vec<(NameId, Vec<u32>, u64)>> = vec![Vec::new(); accounts.len()];
        for s in &ready {
            for b in &s.blocks {
                let id = b.name_id(s.file);
                for &m in &self.replicas.groups[b.group as usize] {
                    let uids = accounts[m].uids(&id);
                    if !uids.is_empty() {
                        per_account[m].push((id, uids, u64::from(b.len)));
                    }
                }
            }
        }
        let (mut messages, mut bytes) = (0u64, 0u64);
        for (a, items) in accounts.iter().zip(&per_account) {
            let uids: Vec<u32> = items
                .iter()
                .flat_map(|(_, u, _)| u.iter().copied())
                .collect();
            if uids.is_empty() {
                continue;
            }
            if let Err(e) = a.expunge(&uids) {
                // Back in front, for the next pass: an expunge already done on another
                // account finds nothing left there (its index forgot them).
                let mut st = r.state.lock_or_panic();
                for s in ready.into_iter().rev() {
                    st.due.push_front(s);
                }
                return Err(FsError::Unavailable(format!(
                    "{}: {e}",
                    a.remote.describe()
                )));
            }
            for (id, u, len) in items {
                a.forget(id, u);
                messages += u.len() as u64;
                bytes += len * u.len() as u64;
            }
        }
        let mut st = r.state.lock_or_panic();
        st.held -= ready.iter().map(|s| s.blocks.len() + 1).sum::<usize>();
        st.last_error = None;
        drop(st);
        self.stats
            .reclaimed_messages
            .fetch_add(messages, Ordering::Relaxed);
        self.stats
            .reclaimed_bytes
            .fetch_add(bytes, Ordering::Relaxed);
        if messages > 0 {
            tracing::debug!("reclaimed {messages} messages ({bytes} bytes)");
        }
        Ok((pages + messages, bytes))
    }

    /// Expunges the log pages no superblock gc keeps needs replayed: up to the checkpoint
    /// before the last one this mount wrote (docs/mailfs.md 8). Called with every page on
    /// every account. Returns the messages removed.
    fn reclaim_pages(&self) -> Result<u64, FsError> {
        let through = self.tree.metalog.prev_log_from();
        let from = self.reclaim.state.lock_or_panic().pages_done + 1;
        if through < from {
            return Ok(0);
        }
        let mut messages = 0u64;
        for a in &self.replicas.accounts {
            let ids: Vec<(NameId, Vec<u32>)> = a.ids_matching(|k| {
                k.kind == MsgKind::LogPage && (from..=through).contains(&k.index)
            });
            let uids: Vec<u32> = ids.iter().flat_map(|(_, u)| u.iter().copied()).collect();
            if uids.is_empty() {
                continue;
            }
            a.expunge(&uids)
                .map_err(|e| FsError::Unavailable(format!("{}: {e}", a.remote.describe())))?;
            for (id, u) in &ids {
                a.forget(id, u);
            }
            messages += uids.len() as u64;
        }
        self.reclaim.state.lock_or_panic().pages_done = through;
        self.stats
            .reclaimed_messages
            .fetch_add(messages, Ordering::Relaxed);
        self.stats
            .reclaimed_log_pages
            .fetch_add(messages, Ordering::Relaxed);
        Ok(messages)
    }

    /// The reclaimer: every `RECLAIM_TICK_MS`, the due lists that are ready go. None when
    /// reclaim is off.
    pub(super) fn spawn_reclaimer(self: &Arc<Self>) -> Option<std::thread::JoinHandle<()>> {
        if !self.reclaim.enabled {
            return None;
        }
        let fs = self.clone();
        Some(std::thread::spawn(move || {
            while !fs.stop.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(RECLAIM_TICK_MS));
                if let Err(e) = fs.reclaim_once() {
                    let msg = e.to_string();
                    let mut st = fs.reclaim.state.lock_or_panic();
                    if st.last_error.as_deref() != Some(&msg) {
                        tracing::warn!("reclaim waits: {msg}");
                        st.last_error = Some(msg);
                    }
                }
            }
        }))
    }

    /// Whether every block of a file version is still on some member of its group
    /// (`versions`, `restore`): reclaim may have removed an old version's content.
    pub(crate) fn content_present(&self, file: u64, fm: &FileMeta) -> bool {
        fm.blocks.iter().all(|b| {
            self.replicas.groups.get(b.group as usize).is_some_and(|g| {
                g.iter()
                    .any(|&m| self.replicas.accounts[m].has(&b.name_id(file)))
            })
        })
    }

    /// `reclaimed_messages=`, `reclaimed_bytes=`, `reclaim_held=`, `reclaim_dropped=` lines
    /// of the stats file.
    pub(crate) fn reclaim_stats_text(&self) -> String {
        let (held, dropped) = self.reclaim.counts();
        format!(
            "reclaimed_messages={}\nreclaimed_bytes={}\nreclaimed_log_pages={}\nreclaim_held={held}\nreclaim_dropped={dropped}\n",
            self.stats.reclaimed_messages.load(Ordering::Relaxed),
            self.stats.reclaimed_bytes.load(Ordering::Relaxed),
            self.stats.reclaimed_log_pages.load(Ordering::Relaxed),
        )
    }
}
