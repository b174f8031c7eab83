//! The operator's changes to whole users: deleting one and renaming one, each one durable
//! journal record made through [`Store::commit`] (see `commit.rs` for the order every change
//! keeps).

use std::sync::Arc;

use crate::commit::Store;
use crate::index::FolderCell;
use crate::journal::Op;
use crate::names::validate_user;
use crate::{DeletedUser, StoreError};

impl Store {
    /// Deletes every folder of a user, INBOX included, in one durable journal record, and
    /// returns their space: the user is gone from the store when this returns. What was
    /// removed is reported.
    pub fn delete_user(&self, user: &str) -> Result<DeletedUser, StoreError> {
        validate_user(user, &self.config)?;
        let mut w = self.writer()?;
        let cells: Vec<Arc<FolderCell>> = {
            let cat = self.catalog();
            cat.users
                .get(user)
                .map(|names| {
                    names
                        .values()
                        .filter_map(|id| cat.folders.get(id).cloned())
                        .collect()
                })
                .unwrap_or_default()
        };
        let mut deleted = DeletedUser::default();
        let mut ops = Vec::with_capacity(cells.len());
        for cell in &cells {
            let f = cell.read();
            if f.deleted {
                continue;
            }
            deleted.folders += 1;
            deleted.messages += f.messages.len() as u64;
            deleted.bytes += f.bytes;
            ops.push(Op::DeleteFolder { folder: cell.id });
        }
        self.commit(&mut w, &ops)?;
        for cell in &cells {
            w.alloc.release_reservation(cell.id);
        }
        Ok(deleted)
    }

    /// Gives every folder of `from` to `to`, in one durable journal record: UIDs,
    /// UIDVALIDITY, flags and data stay as they are. Refused when `to` has folders; a user
    /// with none (renamed already, or never given mail) renames as a no-op. Returns what
    /// moved.
    ///
    /// One record with a `ChangeUser` per folder: the folders keep their ids, so their
    /// messages, reservations and the extents readers hold stay valid under the new name.
    pub fn rename_user(&self, from: &str, to: &str) -> Result<crate::Usage, StoreError> {
        validate_user(from, &self.config)?;
        validate_user(to, &self.config)?;
        let mut w = self.writer()?;
        let (cells, to_has_folders) = {
            let cat = self.catalog();
            let cells: Vec<Arc<FolderCell>> = cat
                .users
                .get(from)
                .map(|names| {
                    names
                        .values()
                        .filter_map(|id| cat.folders.get(id).cloned())
                        .collect()
                })
                .unwrap_or_default();
            (cells, cat.users.contains_key(to))
        };
        if cells.is_empty() {
            return Ok(crate::Usage::default());
        }
        if from == to || to_has_folders {
            return Err(StoreError::Invalid(format!(
                "cannot rename {from} to {to}: {to} already has folders"
            )));
        }
        let mut moved = crate::Usage::default();
        let mut ops = Vec::with_capacity(cells.len());
        for cell in &cells {
            let f = cell.read();
            if f.deleted {
                continue;
            }
            moved.folders += 1;
            moved.messages += f.messages.len() as u64;
            moved.bytes += f.bytes;
            ops.push(Op::ChangeUser {
                folder: cell.id,
                user: to.to_string(),
            });
        }
        self.commit(&mut w, &ops)?;
        Ok(moved)
    }
}
