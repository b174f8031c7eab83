//! An in-memory [`Mailstore`]: the second backend every transcript runs on, so a session is
//! shown to depend only on the trait's contract, not on the real store (crates/store).
//!
//! It models what a session can observe of the real store, with its limits and defaults
//! ([`StoreConfig::default`]) and its exact errors:
//! - users → folders → messages, each message with its content, its summary
//!   ([`store::parse_summary`]) and its index entry; a user exists while they have a folder;
//! - folder names as `names.rs` checks them: `INBOX` case-insensitive, every other part
//!   case-sensitive, length, depth, `.`/`..`, wildcards and control characters refused;
//! - folders: CREATE makes the user if new, with parents all or nothing within
//!   `folders_per_user_max`; the first append to INBOX creates it; INBOX can be neither
//!   renamed nor deleted; a rename takes the children along, a delete leaves them;
//! - UIDVALIDITY ascends store-wide from the clock; UIDs ascend from 1 and are never reused;
//!   a folder starts at MODSEQ 1 and every change (each append, each flag change that names a
//!   present message, each expunge that removes one) takes the next: appended and flagged
//!   messages get it, an expunge raises only the folder's HIGHESTMODSEQ;
//! - a folder's keyword table (at most `keywords_per_folder_max`, in the order defined),
//!   which a message's keywords follow;
//! - `\Recent` (`recent.rs`): every folder is new to this store, so its mark starts at 1;
//! - one shared view per folder, the same `Arc` until the folder changes;
//! - `summaries` answers only under the UIDVALIDITY asked about, as its docs say (the real
//!   store's cache, on a miss, reads the folder as it is now).
//!
//! It leaves out what a session cannot see: durability (journal, checkpoints, recovery), the
//! volume and its allocator, defragmentation, group commit (a batch is applied under one
//! lock, as one commit would be), read checks, the caches' memory bounds, observers, user
//! renames and imports.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

use mail_model::{
    AppendRequest, Appended, ExpungeReport, FlagOp, FolderChanges, FolderStatus, MessageInfo,
    StoreError, Summary, Usage,
};
use store::StoreConfig;

use mail_model::Mailstore;

#[derive(Default)]
pub(crate) struct MemoryStore {
    /// The real store's limits.
    config: StoreConfig,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// user → canonical folder name → folder.
    users: BTreeMap<String, BTreeMap<String, Folder>>,
    /// The last UIDVALIDITY given, so a re-created folder never repeats one.
    last_uidvalidity: u32,
}

struct Folder {
    uidvalidity: u32,
    uidnext: u32,
    highest_modseq: u64,
    /// Every keyword the folder has defined, in order.
    keywords: Vec<String>,
    messages: BTreeMap<u32, Message>,
    /// `\Recent`: the lowest UID no claiming caller has taken.
    recent: u32,
    /// The entries [`Mailstore::shared_view`] handed out, while the folder is unchanged.
    view: Option<Arc<Vec<MessageInfo>>>,
}

struct Message {
    info: MessageInfo,
    content: Vec<u8>,
    summary: Arc<Summary>,
}

impl Folder {
    fn new(uidvalidity: u32) -> Folder {
        Folder {
            uidvalidity,
            uidnext: 1,
            highest_modseq: 1,
            keywords: Vec::new(),
            messages: BTreeMap::new(),
            recent: 1,
            view: None,
        }
    }

    fn status(&self) -> FolderStatus {
        FolderStatus {
            messages: self.messages.len() as u64,
            bytes: self.messages.values().map(|m| m.info.size).sum(),
            uidvalidity: self.uidvalidity,
            uidnext: self.uidnext,
            highest_modseq: self.highest_modseq,
        }
    }

    /// The MODSEQ of a change about to be made; the shared view is stale from here on.
    fn next_modseq(&mut self) -> u64 {
        self.view = None;
        self.highest_modseq += 1;
        self.highest_modseq
    }

    /// The folder's keyword table with `keywords` defined, or `Limit` past `max`.
    fn with_keywords(&self, keywords: &[String], max: usize) -> Result<Vec<String>, StoreError> {
        let mut table = self.keywords.clone();
        for k in keywords {
            if !table.contains(k) {
                table.push(k.clone());
            }
        }
        if table.len() > max {
            return Err(StoreError::Limit {
                what: format!("{max} keywords per folder"),
            });
        }
        Ok(table)
    }

    /// The keywords `has` picks, in the table's order (the real store keeps a bit set).
    fn keywords_where(&self, has: impl Fn(&String) -> bool) -> Vec<String> {
        self.keywords.iter().filter(|k| has(k)).cloned().collect()
    }
}

impl State {
    /// As the real store: the clock's seconds, but always above the last one given.
    fn next_uidvalidity(&mut self) -> u32 {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_secs() as u32);
        self.last_uidvalidity = now.max(self.last_uidvalidity.saturating_add(1)).max(1);
        self.last_uidvalidity
    }
}

fn invalid(name: &str, reason: impl Into<String>) -> StoreError {
    StoreError::InvalidName {
        name: name.to_string(),
        reason: reason.into(),
    }
}

impl MemoryStore {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The store's `validate_user`.
    fn check_user(&self, user: &str) -> Result<(), StoreError> {
        let max = self.config.user_name_bytes_max;
        if user.is_empty() {
            return Err(invalid(user, "empty user name"));
        }
        if user.len() > max {
            return Err(invalid(user, format!("longer than {max} bytes")));
        }
        if user.chars().any(char::is_control) || user.contains('/') {
            return Err(invalid(user, "control characters and '/' are not allowed"));
        }
        Ok(())
    }

    /// The store's `normalize_folder`: the canonical name (`INBOX` upper-cased).
    fn canonical(&self, name: &str) -> Result<String, StoreError> {
        let (bytes_max, depth_max) = (
            self.config.folder_name_bytes_max,
            self.config.folder_depth_max,
        );
        if name.is_empty() {
            return Err(invalid(name, "empty folder name"));
        }
        if name.len() > bytes_max {
            return Err(invalid(name, format!("longer than {bytes_max} bytes")));
        }
        if name.chars().any(char::is_control) {
            return Err(invalid(name, "control characters are not allowed"));
        }
        let parts: Vec<&str> = name.split('/').collect();
        if parts.len() > depth_max {
            return Err(invalid(name, format!("deeper than {depth_max} levels")));
        }
        for part in &parts {
            if part.is_empty() {
                let reason = "empty hierarchy level (leading, trailing or double '/')";
                return Err(invalid(name, reason));
            }
            if *part == "." || *part == ".." {
                return Err(invalid(name, "'.' and '..' are not folder names"));
            }
            if part.contains(['*', '%']) {
                return Err(invalid(name, "'*' and '%' are IMAP wildcards"));
            }
        }
        if parts[0].eq_ignore_ascii_case("INBOX") {
            return Ok(format!("INBOX{}", &name[5..]));
        }
        Ok(name.to_string())
    }

    /// The store's `validate_keyword`: an IMAP atom, not a system flag.
    fn check_keyword(&self, keyword: &str) -> Result<(), StoreError> {
        let max = self.config.keyword_bytes_max;
        if keyword.is_empty() {
            return Err(invalid(keyword, "empty keyword"));
        }
        if keyword.len() > max {
            return Err(invalid(keyword, format!("longer than {max} bytes")));
        }
        let bad = |c: char| {
            !c.is_ascii_graphic() || matches!(c, '(' | ')' | '{' | '%' | '*' | '"' | '\\' | ']')
        };
        if keyword.chars().any(bad) {
            let reason = "keywords are IMAP atoms: printable ASCII, no specials";
            return Err(invalid(keyword, reason));
        }
        Ok(())
    }

    /// A folder by user and name as given, with its canonical name.
    fn folder<'a>(
        &self,
        state: &'a mut State,
        user: &str,
        folder: &str,
    ) -> Result<(String, &'a mut Folder), StoreError> {
        self.check_user(user)?;
        let name = self.canonical(folder)?;
        let Some(folders) = state.users.get_mut(user) else {
            return Err(StoreError::NoSuchUser(user.to_string()));
        };
        match folders.get_mut(&name) {
            Some(f) => Ok((name, f)),
            None => Err(StoreError::NoSuchFolder {
                user: user.to_string(),
                folder: name,
            }),
        }
    }

    fn message<'a>(
        &self,
        state: &'a mut State,
        user: &str,
        folder: &str,
        uid: u32,
    ) -> Result<&'a Message, StoreError> {
        let (name, f) = self.folder(state, user, folder)?;
        f.messages
            .get(&uid)
            .ok_or(StoreError::NoSuchMessage { folder: name, uid })
    }

    /// Creates `folder` (with `parents`, every missing folder above it too), all or nothing.
    fn create(&self, user: &str, folder: &str, parents: bool) -> Result<FolderStatus, StoreError> {
        self.check_user(user)?;
        let name = self.canonical(folder)?;
        let mut names: Vec<String> = Vec::new();
        if parents {
            names.extend(name.match_indices('/').map(|(i, _)| name[..i].to_string()));
        }
        names.push(name.clone());
        let mut state = self.lock();
        let existing = state.users.get(user);
        let exists = |n: &String| existing.is_some_and(|e| e.contains_key(n));
        if exists(&name) {
            return Err(StoreError::FolderExists {
                user: user.to_string(),
                folder: name,
            });
        }
        let missing: Vec<String> = names.into_iter().filter(|n| !exists(n)).collect();
        let max = self.config.folders_per_user_max;
        if existing.map_or(0, BTreeMap::len) + missing.len() > max {
            return Err(StoreError::Limit {
                what: format!("{max} folders per user"),
            });
        }
        for missing in missing {
            let folder = Folder::new(state.next_uidvalidity());
            let folders = state.users.entry(user.to_string()).or_default();
            folders.insert(missing, folder);
        }
        Ok(state.users[user][&name].status())
    }

    /// One append of a batch, checked as the real store prepares and plans it.
    fn append(&self, state: &mut State, req: AppendRequest) -> Result<Appended, StoreError> {
        let config = &self.config;
        self.check_user(&req.user)?;
        let name = self.canonical(&req.folder)?;
        let m = req.message;
        if m.content.len() > config.message_bytes_max {
            return Err(StoreError::TooLarge {
                what: format!(
                    "message of {} bytes (limit {})",
                    m.content.len(),
                    config.message_bytes_max
                ),
            });
        }
        let mut keywords: Vec<String> = Vec::new();
        for k in m.keywords {
            self.check_keyword(&k)?;
            if !keywords.contains(&k) {
                keywords.push(k);
            }
        }
        if keywords.len() > config.keywords_per_folder_max {
            return Err(StoreError::Limit {
                what: format!("more than {} keywords", config.keywords_per_folder_max),
            });
        }
        let user_folders = state.users.get(&req.user).map(BTreeMap::len);
        if !state
            .users
            .get(&req.user)
            .is_some_and(|f| f.contains_key(&name))
        {
            // Delivery creates INBOX; any other folder must exist.
            if name != "INBOX" {
                return Err(match user_folders {
                    Some(_) => StoreError::NoSuchFolder {
                        user: req.user,
                        folder: name,
                    },
                    None => StoreError::NoSuchUser(req.user),
                });
            }
            if user_folders.unwrap_or(0) >= config.folders_per_user_max {
                return Err(StoreError::Limit {
                    what: format!("{} folders per user", config.folders_per_user_max),
                });
            }
            let folder = Folder::new(state.next_uidvalidity());
            let folders = state.users.entry(req.user.clone()).or_default();
            folders.insert(name.clone(), folder);
        }
        let f = (state.users.get_mut(&req.user))
            .and_then(|f| f.get_mut(&name))
            .expect("the folder exists now");
        let table = f.with_keywords(&keywords, config.keywords_per_folder_max)?;
        if f.uidnext >= u32::MAX - 1 {
            return Err(StoreError::Limit {
                what: "UIDs of this folder are used up".into(),
            });
        }
        f.keywords = table;
        let uid = f.uidnext;
        f.uidnext += 1;
        let modseq = f.next_modseq();
        let info = MessageInfo {
            uid,
            size: m.content.len() as u64,
            flags: m.flags,
            keywords: f.keywords_where(|k| keywords.contains(k)),
            modseq,
            internal_date: m.internal_date,
        };
        let summary = store::parse_summary(&m.content, config.summary_field_bytes_max);
        let message = Message {
            info,
            content: m.content,
            summary: Arc::new(summary),
        };
        f.messages.insert(uid, message);
        Ok(Appended {
            uid,
            uidvalidity: f.uidvalidity,
            modseq,
        })
    }
}

impl Mailstore for MemoryStore {
    fn list_folders(&self, user: &str) -> Vec<String> {
        let state = self.lock();
        state
            .users
            .get(user)
            .map(|f| f.keys().cloned().collect())
            .unwrap_or_default()
    }

    fn create_folder(&self, user: &str, folder: &str) -> Result<FolderStatus, StoreError> {
        self.create(user, folder, false)
    }

    fn create_folder_path(&self, user: &str, folder: &str) -> Result<FolderStatus, StoreError> {
        self.create(user, folder, true)
    }

    fn rename_folder(&self, user: &str, from: &str, to: &str) -> Result<(), StoreError> {
        let mut state = self.lock();
        let from = self.folder(&mut state, user, from)?.0;
        let to = self.canonical(to)?;
        if from == "INBOX" {
            return Err(invalid(&from, "INBOX cannot be renamed"));
        }
        let prefix = format!("{from}/");
        if to == from || to.starts_with(&prefix) {
            return Err(invalid(&to, "cannot rename a folder into itself"));
        }
        let folders = state.users.get_mut(user).expect("the user was found");
        let mut renames = Vec::new();
        for name in folders.keys() {
            let new = if *name == from {
                to.clone()
            } else if let Some(rest) = name.strip_prefix(&prefix) {
                format!("{to}/{rest}")
            } else {
                continue;
            };
            self.canonical(&new)?;
            if folders.contains_key(&new) {
                return Err(StoreError::FolderExists {
                    user: user.to_string(),
                    folder: new,
                });
            }
            renames.push((name.clone(), new));
        }
        // Each folder keeps its UIDVALIDITY, messages and \Recent mark under the new name.
        let moved: Vec<(String, Folder)> = renames
            .into_iter()
            .filter_map(|(old, new)| Some((new, folders.remove(&old)?)))
            .collect();
        folders.extend(moved);
        Ok(())
    }

    fn delete_folder(&self, user: &str, folder: &str) -> Result<(), StoreError> {
        let mut state = self.lock();
        let name = self.folder(&mut state, user, folder)?.0;
        if name == "INBOX" {
            return Err(invalid(&name, "INBOX cannot be deleted"));
        }
        // The folders below it are kept; a user left without folders is gone.
        let folders = state.users.get_mut(user).expect("the user was found");
        folders.remove(&name);
        if folders.is_empty() {
            state.users.remove(user);
        }
        Ok(())
    }

    fn status(&self, user: &str, folder: &str) -> Result<FolderStatus, StoreError> {
        let mut state = self.lock();
        Ok(self.folder(&mut state, user, folder)?.1.status())
    }

    fn recent(&self, user: &str, folder: &str, claim: bool) -> Result<(u32, u32), StoreError> {
        let mut state = self.lock();
        let f = self.folder(&mut state, user, folder)?.1;
        let first = f.recent;
        if claim {
            f.recent = f.recent.max(f.uidnext);
        }
        Ok((first.min(f.uidnext), f.uidnext))
    }

    fn shared_view(
        &self,
        user: &str,
        folder: &str,
    ) -> Result<(FolderStatus, Arc<Vec<MessageInfo>>), StoreError> {
        let mut state = self.lock();
        let f = self.folder(&mut state, user, folder)?.1;
        let messages = f.messages.values().map(|m| m.info.clone());
        let view = f.view.get_or_insert_with(|| Arc::new(messages.collect()));
        let view = view.clone();
        Ok((f.status(), view))
    }

    fn changes_since(
        &self,
        user: &str,
        folder: &str,
        modseq: u64,
    ) -> Result<FolderChanges, StoreError> {
        let mut state = self.lock();
        let f = self.folder(&mut state, user, folder)?.1;
        let changed = f
            .messages
            .values()
            .filter(|m| m.info.modseq > modseq)
            .map(|m| m.info.clone())
            .collect();
        Ok(FolderChanges {
            status: f.status(),
            changed,
        })
    }

    fn uids(&self, user: &str, folder: &str) -> Result<Vec<u32>, StoreError> {
        let mut state = self.lock();
        let f = self.folder(&mut state, user, folder)?.1;
        Ok(f.messages.keys().copied().collect())
    }

    fn read(&self, user: &str, folder: &str, uid: u32) -> Result<Vec<u8>, StoreError> {
        let mut state = self.lock();
        Ok(self.message(&mut state, user, folder, uid)?.content.clone())
    }

    fn summary(&self, user: &str, folder: &str, uid: u32) -> Result<Summary, StoreError> {
        let mut state = self.lock();
        Ok((*self.message(&mut state, user, folder, uid)?.summary).clone())
    }

    fn read_with_summary(
        &self,
        user: &str,
        folder: &str,
        uid: u32,
    ) -> Result<(Summary, Vec<u8>), StoreError> {
        let mut state = self.lock();
        let m = self.message(&mut state, user, folder, uid)?;
        Ok(((*m.summary).clone(), m.content.clone()))
    }

    fn summaries(
        &self,
        user: &str,
        folder: &str,
        uidvalidity: u32,
        uids: &[u32],
    ) -> Vec<Option<Arc<Summary>>> {
        let mut state = self.lock();
        let Ok((_, f)) = self.folder(&mut state, user, folder) else {
            return vec![None; uids.len()];
        };
        // Under another UIDVALIDITY, the messages the caller means are gone.
        let same = f.uidvalidity == uidvalidity;
        let summary = |uid: &u32| {
            f.messages
                .get(uid)
                .filter(|_| same)
                .map(|m| m.summary.clone())
        };
        uids.iter().map(summary).collect()
    }

    fn set_flags(
        &self,
        user: &str,
        folder: &str,
        uids: &[u32],
        op: FlagOp,
        flags: mail_model::Flags,
        keywords: &[String],
    ) -> Result<u64, StoreError> {
        for k in keywords {
            self.check_keyword(k)?;
        }
        let mut state = self.lock();
        let f = self.folder(&mut state, user, folder)?.1;
        let present: Vec<u32> = uids
            .iter()
            .copied()
            .filter(|u| f.messages.contains_key(u))
            .collect();
        if present.is_empty() {
            return Ok(f.highest_modseq);
        }
        // Removing a keyword the folder never had defines nothing.
        if op != FlagOp::Remove {
            f.keywords = f.with_keywords(keywords, self.config.keywords_per_folder_max)?;
        }
        let modseq = f.next_modseq();
        for uid in present {
            let current = &f.messages[&uid].info.keywords;
            let given = |k: &String| keywords.contains(k);
            let now = match op {
                FlagOp::Add => f.keywords_where(|k| current.contains(k) || given(k)),
                FlagOp::Remove => f.keywords_where(|k| current.contains(k) && !given(k)),
                FlagOp::Replace => f.keywords_where(given),
            };
            let info = &mut f.messages.get_mut(&uid).expect("present").info;
            info.flags = op.apply_flags(info.flags, flags);
            info.keywords = now;
            info.modseq = modseq;
        }
        Ok(modseq)
    }

    fn expunge(&self, user: &str, folder: &str, uids: &[u32]) -> Result<ExpungeReport, StoreError> {
        let mut state = self.lock();
        let f = self.folder(&mut state, user, folder)?.1;
        if !uids.iter().any(|u| f.messages.contains_key(u)) {
            return Ok(ExpungeReport {
                modseq: f.highest_modseq,
                ..ExpungeReport::default()
            });
        }
        let modseq = f.next_modseq();
        let mut report = ExpungeReport {
            modseq,
            ..ExpungeReport::default()
        };
        for uid in uids {
            if let Some(gone) = f.messages.remove(uid) {
                report.expunged += 1;
                report.bytes_freed += gone.info.size;
            }
        }
        Ok(report)
    }

    fn append_batch(&self, requests: Vec<AppendRequest>) -> Vec<Result<Appended, StoreError>> {
        let mut state = self.lock();
        requests
            .into_iter()
            .map(|req| self.append(&mut state, req))
            .collect()
    }

    fn usage(&self, user: &str) -> Usage {
        let state = self.lock();
        let mut usage = Usage::default();
        for f in state.users.get(user).into_iter().flat_map(BTreeMap::values) {
            usage.folders += 1;
            usage.messages += f.messages.len() as u64;
            usage.bytes += f.status().bytes;
        }
        usage
    }
}
