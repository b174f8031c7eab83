//! Expunging by the operator (`expunge_below`, `expunge_all`) and the one path every expunge
//! takes: one journal record through [`Store::commit`], then the freed extents handed to
//! defragmentation (docs/storage.md).

use std::sync::{Arc, MutexGuard};

use crate::commit::{Store, Writer};
use crate::format::UNIT;
use crate::index::{Folder, FolderCell};
use crate::journal::Op;
use crate::{ExpungeReport, StoreError};

impl Store {
    /// Expunges every UID below `uid` with one record; `u32::MAX` empties the folder.
    pub fn expunge_below(
        &self,
        user: &str,
        folder: &str,
        uid: u32,
    ) -> Result<ExpungeReport, StoreError> {
        self.expunge_with(user, folder, |f| {
            let any = f
                .messages
                .first_key_value()
                .is_some_and(|(&first, _)| first < uid);
            any.then(|| Op::ExpungeBelow {
                folder: f.id,
                modseq: f.highest_modseq + 1,
                uid,
            })
        })
    }

    /// Expunges every message of the folder.
    pub fn expunge_all(&self, user: &str, folder: &str) -> Result<ExpungeReport, StoreError> {
        self.expunge_below(user, folder, u32::MAX)
    }

    /// Builds the expunge record from the folder as it is under the writer lock; `None` (or a
    /// deleted folder) means nothing to expunge, answered with the current MODSEQ.
    pub(crate) fn expunge_with(
        &self,
        user: &str,
        folder: &str,
        build: impl FnOnce(&Folder) -> Option<Op>,
    ) -> Result<ExpungeReport, StoreError> {
        let cell = self.folder(user, folder)?;
        let w = self.writer()?;
        let op = {
            let f = cell.read();
            match build(&f).filter(|_| !f.deleted) {
                Some(op) => op,
                None => {
                    return Ok(ExpungeReport {
                        modseq: f.highest_modseq,
                        ..ExpungeReport::default()
                    });
                }
            }
        };
        self.expunge_op(w, &cell, op)
    }

    /// Commits an expunge record, then applies the defrag-on-delete rule to what it freed.
    fn expunge_op(
        &self,
        mut w: MutexGuard<'_, Writer>,
        cell: &Arc<FolderCell>,
        op: Op,
    ) -> Result<ExpungeReport, StoreError> {
        let freed = self.commit(&mut w, &[op])?;
        let mut report = ExpungeReport {
            expunged: freed.len() as u64,
            bytes_freed: freed.iter().map(|f| f.units * UNIT).sum(),
            modseq: cell.read().highest_modseq,
            ..ExpungeReport::default()
        };
        if self.config.defrag_on_delete && !freed.is_empty() {
            match self.defrag_after_expunge(&mut w, cell, &freed) {
                Ok((messages, bytes)) => {
                    report.moves = messages;
                    report.bytes_moved = bytes;
                }
                Err(e) => report.defrag_error = Some(e.to_string()),
            }
        }
        Ok(report)
    }
}
