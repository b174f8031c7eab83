//! Importing mail from another server: folders created with their source's UIDVALIDITY,
//! messages appended with their source's UIDs where those ascend, UIDNEXT raised to the
//! source's next UID (docs/storage.md, "Import").
//!
//! An import batch goes through the same commit as a group-committed append batch
//! ([`Store::commit_appends`]): the messages' data is written with as few writes as their
//! extents allow, the volume synced, then one journal record names them all and is synced.
//! So a batch costs one data sync and one journal sync, and is atomic: a crash leaves every
//! batch whole or absent, and an import cut by a crash leaves a prefix of whole batches.
//! Unlike group commit, a batch is the caller's and nobody else's: the writer lock is taken
//! for it, so the record never mixes it with other appends, and a batch is exactly what the
//! caller sent (the caller keeps it within `batch_messages_max` and `batch_bytes_max`).
//!
//! Preparing a batch (summaries and MIME structures, the CPU work) takes no lock, so a
//! caller can prepare the next batch on another thread while this one commits.

use mail_model::Mailstore;

use crate::StoreError;
use crate::commit::{Prepared, Store};
use crate::config::StoreConfig;
use crate::journal::Op;
use crate::names::{normalize_folder, validate_keyword, validate_user};
use crate::{
    AppendRequest, FolderStatus, ImportOutcome, ImportReport, ImportTarget, ImportedMessage,
    NewMessage,
};

/// A source UIDVALIDITY more than this above both the clock and the store's last one is not
/// kept: UIDVALIDITY ascends store-wide (a re-created folder never repeats one), and a value
/// near `u32::MAX` would use that sequence up.
pub(crate) const UIDVALIDITY_AHEAD_MAX: u32 = 1 << 24;

/// Messages validated and laid out for [`Store::commit_import`], outside any lock.
pub struct ImportBatch {
    pub(crate) user: String,
    pub(crate) folder: String,
    pub(crate) items: Vec<Result<PreparedImport, StoreError>>,
}

/// Where a committed message's outcome goes, the UID it asked for, the keywords it lost.
type Pending = (usize, Option<u32>, Vec<(String, String)>);

pub(crate) struct PreparedImport {
    pub(crate) prepared: Prepared,
    pub(crate) requested_uid: Option<u32>,
    pub(crate) dropped: Vec<(String, String)>,
}

impl ImportBatch {
    /// Messages in the batch (including ones already refused while preparing).
    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }
}

fn now_secs() -> u32 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs().min(u32::MAX as u64) as u32)
        .unwrap_or(0)
}

/// Keeps the keywords an IMAP keyword can be, once each, up to the per-folder limit; the
/// others are returned with the reason.
fn screen_keywords(
    keywords: Vec<String>,
    config: &StoreConfig,
) -> (Vec<String>, Vec<(String, String)>) {
    let mut kept: Vec<String> = Vec::new();
    let mut dropped = Vec::new();
    for k in keywords {
        if kept.contains(&k) {
            continue;
        }
        if let Err(e) = validate_keyword(&k, config) {
            dropped.push((k, e.to_string()));
        } else if kept.len() >= config.keywords_per_folder_max {
            dropped.push((
                k,
                format!(
                    "more than {} keywords on one message",
                    config.keywords_per_folder_max
                ),
            ));
        } else {
            kept.push(k);
        }
    }
    (kept, dropped)
}

impl Store {
    /// Imports a whole folder: [`Store::import_folder`] with `uidvalidity`, then the messages
    /// in batches of at most `batch_messages_max` messages and `batch_bytes_max` bytes (each
    /// one [`Store::commit_import`]), then, if the folder's UIDVALIDITY is the source's,
    /// [`Store::raise_uidnext`] to `uidnext`. A crash leaves a prefix of whole batches.
    pub fn import(
        &self,
        user: &str,
        folder: &str,
        uidvalidity: Option<u32>,
        uidnext: Option<u32>,
        messages: Vec<ImportedMessage>,
    ) -> Result<ImportReport, StoreError> {
        let target = self.import_folder(user, folder, uidvalidity)?;
        let mut outcomes = Vec::with_capacity(messages.len());
        let config = &self.config;
        let mut batch: Vec<ImportedMessage> = Vec::new();
        let mut bytes = 0usize;
        let mut messages = messages.into_iter().peekable();
        while let Some(m) = messages.next() {
            bytes += m.content.len();
            batch.push(m);
            let full = messages.peek().is_none_or(|next| {
                batch.len() >= config.batch_messages_max
                    || bytes + next.content.len() > config.batch_bytes_max
            });
            if full {
                let prepared = self.prepare_import(user, folder, std::mem::take(&mut batch))?;
                outcomes.extend(self.commit_import(prepared)?);
                bytes = 0;
            }
        }
        let status = match uidnext {
            Some(next) if target.uidvalidity_kept => self.raise_uidnext(user, folder, next)?,
            _ => self.status(user, folder)?,
        };
        Ok(ImportReport {
            target,
            outcomes,
            status,
        })
    }

    /// Gets the folder an import writes to, creating it (and its missing parents, in one
    /// record) if it does not exist. A new folder gets `uidvalidity` (the source's) unless it
    /// is 0 or far ahead of the clock and of every UIDVALIDITY the store gave
    /// (2^24 seconds), which would use up the store-wide ascending sequence; an existing
    /// folder keeps its own. [`ImportTarget::uidvalidity_kept`] says which happened.
    pub fn import_folder(
        &self,
        user: &str,
        folder: &str,
        uidvalidity: Option<u32>,
    ) -> Result<ImportTarget, StoreError> {
        validate_user(user, &self.config)?;
        let name = normalize_folder(folder, &self.config)?;
        let existing = |status: FolderStatus| ImportTarget {
            uidvalidity_kept: uidvalidity == Some(status.uidvalidity),
            status,
            created: false,
        };
        match self.status(user, &name) {
            Ok(status) => return Ok(existing(status)),
            Err(StoreError::NoSuchFolder { .. } | StoreError::NoSuchUser(_)) => {}
            Err(e) => return Err(e),
        }
        let last = self.catalog().last_uidvalidity;
        let ceiling = now_secs()
            .max(last)
            .saturating_add(UIDVALIDITY_AHEAD_MAX)
            .min(u32::MAX - 1);
        let keep = uidvalidity.filter(|&v| v != 0 && v <= ceiling);
        match self.create_folders(user, &name, true, keep) {
            Ok(status) => Ok(ImportTarget {
                uidvalidity_kept: keep.is_some() && keep == Some(status.uidvalidity),
                status,
                created: true,
            }),
            // Created by someone else since we looked: import into it like any existing one.
            Err(StoreError::FolderExists { .. }) => Ok(existing(self.status(user, &name)?)),
            Err(e) => Err(e),
        }
    }

    /// Validates and lays out messages for [`Store::commit_import`]: summaries and MIME
    /// structures are computed here, without any lock, so a caller can prepare the next batch
    /// while the last one commits. A message too large, and keywords that are not IMAP atoms,
    /// are refused here (the message, or only the keyword, reported in the outcome).
    pub fn prepare_import(
        &self,
        user: &str,
        folder: &str,
        messages: Vec<ImportedMessage>,
    ) -> Result<ImportBatch, StoreError> {
        validate_user(user, &self.config)?;
        let folder = normalize_folder(folder, &self.config)?;
        let items = messages
            .into_iter()
            .map(|m| {
                let (keywords, dropped) = screen_keywords(m.keywords, &self.config);
                let mut prepared = self.prepare(AppendRequest {
                    user: user.to_string(),
                    folder: folder.clone(),
                    message: NewMessage {
                        flags: m.flags,
                        keywords,
                        internal_date: m.internal_date,
                        content: m.content,
                    },
                })?;
                prepared.uid = m.uid;
                Ok(PreparedImport {
                    prepared,
                    requested_uid: m.uid,
                    dropped,
                })
            })
            .collect();
        Ok(ImportBatch {
            user: user.to_string(),
            folder,
            items,
        })
    }

    /// Commits one prepared batch into an existing folder as one transaction: the data of
    /// every message, one volume sync, one journal record, one journal sync (the same commit
    /// as a group-committed append batch, but holding only this batch). In order, each
    /// message keeps the UID it asks for if that is at least the folder's UIDNEXT at that
    /// point (below `u32::MAX - 1`); a UID that would go backwards or collide, or none, is
    /// replaced by UIDNEXT, and [`ImportOutcome::uid_kept`] is false. Keywords beyond the
    /// folder's limit are left off the message and reported. Per-message results are in
    /// order; an `Err` of the whole call (I/O, a missing folder, a stopped store) means nothing
    /// of the batch was committed. Keep a batch within `batch_messages_max` and
    /// `batch_bytes_max` (one record holds it all).
    pub fn commit_import(
        &self,
        batch: ImportBatch,
    ) -> Result<Vec<Result<ImportOutcome, StoreError>>, StoreError> {
        let cell = self.folder(&batch.user, &batch.folder)?;
        let mut w = self.writer()?;
        // Under the writer lock nothing else changes the folder: plan its keyword table so
        // that no message is refused for the folder's keyword limit; extra keywords are
        // dropped from the message and reported instead.
        let mut table = {
            let f = cell.read();
            if f.deleted {
                return Err(StoreError::NoSuchFolder {
                    user: batch.user.clone(),
                    folder: batch.folder.clone(),
                });
            }
            f.keywords.clone()
        };
        let max = self.config.keywords_per_folder_max;
        let mut out: Vec<Option<Result<ImportOutcome, StoreError>>> = Vec::new();
        let mut preps: Vec<Option<Prepared>> = Vec::new();
        let mut meta: Vec<Pending> = Vec::new();
        for item in batch.items {
            match item {
                Err(e) => out.push(Some(Err(e))),
                Ok(mut item) => {
                    let keywords = std::mem::take(&mut item.prepared.keywords);
                    for k in keywords {
                        if table.contains(&k) {
                            item.prepared.keywords.push(k);
                        } else if table.len() < max {
                            table.push(k.clone());
                            item.prepared.keywords.push(k);
                        } else {
                            item.dropped
                                .push((k, format!("the folder already has {max} keywords")));
                        }
                    }
                    meta.push((out.len(), item.requested_uid, item.dropped));
                    out.push(None);
                    preps.push(Some(item.prepared));
                }
            }
        }
        if !preps.is_empty() {
            let results = self.commit_appends(&mut w, preps);
            for (r, (at, requested, dropped)) in results.into_iter().zip(meta) {
                match r {
                    Ok(a) => {
                        out[at] = Some(Ok(ImportOutcome {
                            uid: a.uid,
                            uid_kept: requested == Some(a.uid),
                            modseq: a.modseq,
                            dropped_keywords: dropped,
                        }))
                    }
                    // The batch as a whole failed (nothing of it is committed).
                    Err(
                        e @ (StoreError::Io { .. }
                        | StoreError::Failed(_)
                        | StoreError::Corrupt { .. }
                        | StoreError::NoSuchFolder { .. }
                        | StoreError::NoSuchUser(_)),
                    ) => return Err(e),
                    Err(e) => out[at] = Some(Err(e)),
                }
            }
        }
        Ok(out
            .into_iter()
            .map(|r| r.unwrap_or_else(|| Err(StoreError::Invalid("import lost a result".into()))))
            .collect())
    }

    /// Raises the folder's UIDNEXT to `uidnext` (one journal record, a new MODSEQ); a value
    /// at or below the current UIDNEXT changes nothing. An import calls it last with its
    /// source's next UID, so UIDs the source gave out are never given again here.
    pub fn raise_uidnext(
        &self,
        user: &str,
        folder: &str,
        uidnext: u32,
    ) -> Result<FolderStatus, StoreError> {
        let cell = self.folder(user, folder)?;
        if uidnext >= u32::MAX - 1 {
            return Err(StoreError::Invalid(format!(
                "UIDNEXT {uidnext} leaves no UID to assign"
            )));
        }
        let mut w = self.writer()?;
        let op = {
            let f = cell.read();
            if f.deleted {
                return Err(StoreError::NoSuchFolder {
                    user: user.to_string(),
                    folder: f.name.clone(),
                });
            }
            (uidnext > f.uidnext).then(|| Op::SetUidNext {
                folder: f.id,
                modseq: f.highest_modseq + 1,
                uidnext,
            })
        };
        if let Some(op) = op {
            self.commit(&mut w, &[op])?;
        }
        drop(w);
        self.status(user, folder)
    }
    /// Gives the messages `entries` names (UID, MODSEQ) the MODSEQs they had in another
    /// store, and sets the folder's HIGHESTMODSEQ to `highest` (one journal record). This is
    /// the one change that can lower MODSEQs (S4's exception, docs/storage.md), so it is only
    /// for a folder no client has seen here: a user moved from another node calls it after
    /// copying a folder and again after the delta, before the switch, so every message keeps
    /// its MODSEQ and the folder its HIGHESTMODSEQ. Refused (nothing written) for a UID not
    /// in the folder, a MODSEQ of 0 or above `highest`, or a `highest` below the MODSEQ of a
    /// message not named.
    pub fn restore_modseqs(
        &self,
        user: &str,
        folder: &str,
        entries: Vec<(u32, u64)>,
        highest: u64,
    ) -> Result<FolderStatus, StoreError> {
        let cell = self.folder(user, folder)?;
        if highest > crate::index::MODSEQ_MAX {
            return Err(StoreError::Invalid(format!(
                "MODSEQ {highest} is out of range"
            )));
        }
        let mut w = self.writer()?;
        let op = {
            let f = cell.read();
            if f.deleted {
                return Err(StoreError::NoSuchFolder {
                    user: user.to_string(),
                    folder: f.name.clone(),
                });
            }
            // Checked here as the replay checks it, so a bad request is refused, not
            // journaled (a record the replay refuses would be damage).
            let mut after: std::collections::HashMap<u32, u64> =
                f.messages.iter().map(|(&uid, e)| (uid, e.modseq)).collect();
            for &(uid, modseq) in &entries {
                if modseq == 0 || modseq > highest {
                    return Err(StoreError::Invalid(format!(
                        "MODSEQ {modseq} of UID {uid} is not in 1..={highest}"
                    )));
                }
                match after.get_mut(&uid) {
                    Some(m) => *m = modseq,
                    None => {
                        return Err(StoreError::Invalid(format!(
                            "no UID {uid} in {folder} to give a MODSEQ"
                        )));
                    }
                }
            }
            if after.values().any(|&m| m > highest) {
                return Err(StoreError::Invalid(format!(
                    "HIGHESTMODSEQ {highest} would be below a message's MODSEQ in {folder}"
                )));
            }
            Op::RestoreModseqs {
                folder: f.id,
                highest,
                entries,
            }
        };
        self.commit(&mut w, &[op])?;
        drop(w);
        self.status(user, folder)
    }

    /// Raises the folder's HIGHESTMODSEQ to `modseq` (one journal record); a value at or
    /// below the current one changes nothing. Every later change gets a MODSEQ above it. A
    /// user moved from another node calls it with the source folder's HIGHESTMODSEQ before
    /// importing, so the folder's MODSEQs never go backwards for a CONDSTORE/QRESYNC client.
    pub fn raise_modseq(
        &self,
        user: &str,
        folder: &str,
        modseq: u64,
    ) -> Result<FolderStatus, StoreError> {
        let cell = self.folder(user, folder)?;
        if modseq > crate::index::MODSEQ_MAX {
            return Err(StoreError::Invalid(format!(
                "MODSEQ {modseq} is out of range"
            )));
        }
        let mut w = self.writer()?;
        let op = {
            let f = cell.read();
            if f.deleted {
                return Err(StoreError::NoSuchFolder {
                    user: user.to_string(),
                    folder: f.name.clone(),
                });
            }
            // A flag change of no message: the record that moves only the folder's MODSEQ.
            (modseq > f.highest_modseq).then(|| Op::SetFlags {
                folder: f.id,
                modseq,
                op: crate::flags::op_code(crate::FlagOp::Add),
                flags: 0,
                keywords: crate::flags::KeywordSet::default(),
                uids: Vec::new(),
            })
        };
        if let Some(op) = op {
            self.commit(&mut w, &[op])?;
        }
        drop(w);
        self.status(user, folder)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keywords_are_screened_once_each_within_the_limit() {
        let config = StoreConfig {
            keywords_per_folder_max: 2,
            ..StoreConfig::default()
        };
        let (kept, dropped) = screen_keywords(
            vec![
                "$Junk".into(),
                "$Junk".into(),
                "bad word".into(),
                "a".into(),
                "b".into(),
            ],
            &config,
        );
        assert_eq!(kept, vec!["$Junk".to_string(), "a".to_string()]);
        assert_eq!(dropped.len(), 2);
        assert_eq!(dropped[0].0, "bad word");
        assert_eq!(dropped[1].0, "b");
    }
}
