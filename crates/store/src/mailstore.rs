//! The store as mail protocols use it: [`Mailstore`] (declared in `mail-model`, where a
//! protocol crate sees it without depending on the store) implemented by [`Store`] itself.
//! What a session does to a user's folders and messages is written here once: the folder
//! changes and flag, expunge and append commits go through the writer (`commit.rs`), the
//! reads through the checked readers and caches (`read.rs`, `cache.rs`).

use std::sync::Arc;

use mail_model::{
    AppendRequest, Appended, ExpungeReport, FlagOp, Flags, FolderChanges, FolderStatus, Mailstore,
    MessageInfo, StoreError, Summary, Usage,
};

use crate::commit::Store;
use crate::flags::{KeywordSet, op_code};
use crate::format::{MSG_HEADER_BYTES, decode_summary};
use crate::journal::Op;
use crate::names::{normalize_folder, validate_keyword};
use crate::read::{info_of, status_of};
use crate::recent::MARKS_PRUNE_AT;

impl Mailstore for Store {
    fn create_folder(&self, user: &str, folder: &str) -> Result<FolderStatus, StoreError> {
        self.create_folders(user, folder, false, None)
    }

    /// Atomic as one journal record.
    fn create_folder_path(&self, user: &str, folder: &str) -> Result<FolderStatus, StoreError> {
        self.create_folders(user, folder, true, None)
    }

    /// One journal record for the folder and its children.
    fn rename_folder(&self, user: &str, from: &str, to: &str) -> Result<(), StoreError> {
        let cell = self.folder(user, from)?;
        let to = normalize_folder(to, &self.config)?;
        let mut w = self.writer()?;
        let ops = {
            let cat = self.catalog();
            let from = cell.read().name.clone();
            if cell.read().deleted {
                return Err(StoreError::NoSuchFolder {
                    user: user.to_string(),
                    folder: from,
                });
            }
            if from == "INBOX" {
                return Err(StoreError::InvalidName {
                    name: from,
                    reason: "INBOX cannot be renamed".into(),
                });
            }
            if to == from || to.starts_with(&format!("{from}/")) {
                return Err(StoreError::InvalidName {
                    name: to,
                    reason: "cannot rename a folder into itself".into(),
                });
            }
            let names = cat.users.get(user).cloned().unwrap_or_default();
            let mut ops = Vec::new();
            for (name, id) in &names {
                let new = if *name == from {
                    to.clone()
                } else if let Some(rest) = name.strip_prefix(&format!("{from}/")) {
                    format!("{to}/{rest}")
                } else {
                    continue;
                };
                normalize_folder(&new, &self.config)?;
                if names.contains_key(&new) {
                    return Err(StoreError::FolderExists {
                        user: user.to_string(),
                        folder: new,
                    });
                }
                ops.push(Op::RenameFolder {
                    folder: *id,
                    name: new,
                });
            }
            ops
        };
        self.commit(&mut w, &ops)?;
        Ok(())
    }

    /// One journal record; the messages' extents are freed once it is durable (S6).
    fn delete_folder(&self, user: &str, folder: &str) -> Result<(), StoreError> {
        let cell = self.folder(user, folder)?;
        let mut w = self.writer()?;
        let name = cell.read().name.clone();
        if name == "INBOX" {
            return Err(StoreError::InvalidName {
                name,
                reason: "INBOX cannot be deleted".into(),
            });
        }
        if cell.read().deleted {
            return Err(StoreError::NoSuchFolder {
                user: user.to_string(),
                folder: name,
            });
        }
        self.commit(&mut w, &[Op::DeleteFolder { folder: cell.id }])?;
        w.alloc.release_reservation(cell.id);
        Ok(())
    }

    fn list_folders(&self, user: &str) -> Vec<String> {
        self.catalog()
            .users
            .get(user)
            .map(|f| f.keys().cloned().collect())
            .unwrap_or_default()
    }

    /// From the index (S7).
    fn status(&self, user: &str, folder: &str) -> Result<FolderStatus, StoreError> {
        let cell = self.folder(user, folder)?;
        let f = cell.read();
        Ok(status_of(&f))
    }

    /// In memory only (`recent.rs`): mail stored before the store opened is not recent.
    fn recent(&self, user: &str, folder: &str, claim: bool) -> Result<(u32, u32), StoreError> {
        let cell = self.folder(user, folder)?;
        let (first, uidnext) = {
            let f = cell.read();
            (self.recent.take(f.id, f.uidnext, claim), f.uidnext)
        };
        if self.recent.len() > MARKS_PRUNE_AT {
            let catalog = self.catalog();
            self.recent.retain(|id| catalog.folders.contains_key(&id));
        }
        Ok((first.min(uidnext), uidnext))
    }

    /// From the view cache while the folder is unchanged (`view_cache_bytes_max`), else
    /// copied out of the index (S7).
    fn shared_view(
        &self,
        user: &str,
        folder: &str,
    ) -> Result<(FolderStatus, Arc<Vec<MessageInfo>>), StoreError> {
        let status = self.status(user, folder)?;
        self.views
            .open(user, folder, status, || self.open_folder(user, folder))
    }

    /// From one look at the index (S7: no message byte is read).
    fn changes_since(
        &self,
        user: &str,
        folder: &str,
        modseq: u64,
    ) -> Result<FolderChanges, StoreError> {
        let cell = self.folder(user, folder)?;
        let f = cell.read();
        let changed = if f.highest_modseq <= modseq {
            Vec::new()
        } else {
            f.messages
                .iter()
                .filter(|(_, e)| e.modseq > modseq)
                .map(|(&uid, e)| info_of(&f, uid, e))
                .collect()
        };
        Ok(FolderChanges {
            status: status_of(&f),
            changed,
        })
    }

    /// From the index.
    fn uids(&self, user: &str, folder: &str) -> Result<Vec<u32>, StoreError> {
        let cell = self.folder(user, folder)?;
        let f = cell.read();
        Ok(f.messages.keys().copied().collect())
    }

    /// Checked against the message's header and CRC (`read.rs`).
    fn read(&self, user: &str, folder: &str, uid: u32) -> Result<Vec<u8>, StoreError> {
        let cell = self.folder(user, folder)?;
        let (e, mut buf) = self.read_checked(&cell, uid, 0, 0, true)?;
        Ok(buf.split_off(MSG_HEADER_BYTES + e.summary_len as usize))
    }

    /// Reads header and summary only; checks the header and the summary's structure.
    fn summary(&self, user: &str, folder: &str, uid: u32) -> Result<Summary, StoreError> {
        let cell = self.folder(user, folder)?;
        let e = self.entry(&cell, uid)?;
        if MSG_HEADER_BYTES as u64 + e.summary_len as u64 + e.content_len as u64
            <= self.config.read_chunk_bytes_max as u64
        {
            let (e, buf) = self.read_checked(&cell, uid, 0, 0, true)?;
            let s = &buf[MSG_HEADER_BYTES..MSG_HEADER_BYTES + e.summary_len as usize];
            return decode_summary(s, e.content_len as u64)
                .map_err(|d| StoreError::corrupt(format!("summary of UID {uid}: {}", d.0)));
        }
        let (e, part) = self.read_checked(
            &cell,
            uid,
            MSG_HEADER_BYTES as u64,
            e.summary_len as u64,
            false,
        )?;
        decode_summary(&part, e.content_len as u64)
            .map_err(|d| StoreError::corrupt(format!("summary of UID {uid}: {}", d.0)))
    }

    /// From one checked read of the record.
    fn read_with_summary(
        &self,
        user: &str,
        folder: &str,
        uid: u32,
    ) -> Result<(Summary, Vec<u8>), StoreError> {
        let cell = self.folder(user, folder)?;
        let (e, mut buf) = self.read_checked(&cell, uid, 0, 0, true)?;
        let content = buf.split_off(MSG_HEADER_BYTES + e.summary_len as usize);
        let summary = decode_summary(&buf[MSG_HEADER_BYTES..], e.content_len as u64)
            .map_err(|d| StoreError::corrupt(format!("summary of UID {uid}: {}", d.0)))?;
        Ok((summary, content))
    }

    /// From the summary cache after the first read (`summary_cache_bytes_max`).
    fn summaries(
        &self,
        user: &str,
        folder: &str,
        uidvalidity: u32,
        uids: &[u32],
    ) -> Vec<Option<Arc<Summary>>> {
        let mut found = self.summaries.get_many(user, folder, uidvalidity, uids);
        if found.iter().any(Option::is_none)
            && self.status(user, folder).map(|s| s.uidvalidity).ok() != Some(uidvalidity)
        {
            // The folder was deleted, or deleted and created again: its UIDs name other
            // messages now (RFC 9051 2.3.1.1).
            return vec![None; uids.len()];
        }
        for (slot, &uid) in found.iter_mut().zip(uids) {
            if slot.is_none()
                && let Ok(summary) = self.summary(user, folder, uid)
            {
                *slot = Some(self.summaries.put(user, folder, uidvalidity, uid, &summary));
            }
        }
        found
    }

    /// One journal record (with the keywords the folder's table lacks defined in it).
    fn set_flags(
        &self,
        user: &str,
        folder: &str,
        uids: &[u32],
        op: FlagOp,
        flags: Flags,
        keywords: &[String],
    ) -> Result<u64, StoreError> {
        for k in keywords {
            validate_keyword(k, &self.config)?;
        }
        let cell = self.folder(user, folder)?;
        let mut w = self.writer()?;
        let (ops, modseq) = {
            let f = cell.read();
            if f.deleted {
                return Err(StoreError::NoSuchFolder {
                    user: user.to_string(),
                    folder: f.name.clone(),
                });
            }
            let mut present: Vec<u32> = uids
                .iter()
                .copied()
                .filter(|u| f.messages.contains_key(u))
                .collect();
            present.sort_unstable();
            present.dedup();
            if present.is_empty() {
                return Ok(f.highest_modseq);
            }
            let mut table = f.keywords.clone();
            let mut ops = Vec::new();
            let mut set = KeywordSet::default();
            for k in keywords {
                match table.iter().position(|x| x == k) {
                    Some(ix) => set.insert(ix),
                    // Removing a keyword the folder never had changes nothing.
                    None if op == FlagOp::Remove => {}
                    None => {
                        if table.len() >= self.config.keywords_per_folder_max {
                            return Err(StoreError::Limit {
                                what: format!(
                                    "{} keywords per folder",
                                    self.config.keywords_per_folder_max
                                ),
                            });
                        }
                        ops.push(Op::DefineKeyword {
                            folder: f.id,
                            index: table.len() as u8,
                            name: k.clone(),
                        });
                        set.insert(table.len());
                        table.push(k.clone());
                    }
                }
            }
            let modseq = f.highest_modseq + 1;
            ops.push(Op::SetFlags {
                folder: f.id,
                modseq,
                op: op_code(op),
                flags: flags.bits(),
                keywords: set,
                uids: present,
            });
            (ops, modseq)
        };
        self.commit(&mut w, &ops)?;
        Ok(modseq)
    }

    /// One journal record, no data I/O unless the defrag-on-delete rule moves fragments.
    fn expunge(&self, user: &str, folder: &str, uids: &[u32]) -> Result<ExpungeReport, StoreError> {
        self.expunge_with(user, folder, |f| {
            let mut present: Vec<u32> = uids
                .iter()
                .copied()
                .filter(|u| f.messages.contains_key(u))
                .collect();
            present.sort_unstable();
            present.dedup();
            (!present.is_empty()).then(|| Op::Expunge {
                folder: f.id,
                modseq: f.highest_modseq + 1,
                uids: present,
            })
        })
    }

    /// Group-committed with whatever else is waiting (`commit.rs`).
    fn append_batch(&self, requests: Vec<AppendRequest>) -> Vec<Result<Appended, StoreError>> {
        self.group_commit(requests)
    }

    /// From the index (no I/O).
    fn usage(&self, user: &str) -> Usage {
        let mut usage = Usage::default();
        let cat = self.catalog();
        let Some(names) = cat.users.get(user) else {
            return usage;
        };
        for cell in names.values().filter_map(|id| cat.folders.get(id)) {
            let f = cell.read();
            usage.folders += 1;
            usage.messages += f.messages.len() as u64;
            usage.bytes += f.bytes;
        }
        usage
    }
}
