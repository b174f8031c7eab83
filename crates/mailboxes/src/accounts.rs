//! Deleting or renaming a user while the server runs: the account and its mail go together,
//! and a deleted address starts empty when it is added again.
//!
//! The order is what makes it safe:
//! 1. the directory deletes the user and records the address in `deleted_users`, in one
//!    transaction: from then on no login, no RCPT and no delivery batch finds the user, and
//!    the address cannot be added again;
//! 2. every session of the user is told (each says why and closes), and no new one may join;
//!    we wait until they are all gone, so none is in the middle of an APPEND;
//! 3. under the exclusive mailbox lock (so a delivery batch that routed to the user before
//!    step 1 has finished) the store deletes every folder of the user in one durable record;
//! 4. the directory forgets the address in `deleted_users`: it may be added again.
//!
//! A crash anywhere leaves the address in `deleted_users`; the next start (or an offline
//! `mailstow user del`/`user add`) finishes steps 3 and 4 ([`finish_deletions`]).
//!
//! Renaming a user ([`rename_user`]) follows the same pattern: the intent first, then the
//! sessions, then the store under the exclusive lock, resumed at start ([`finish_renames`]).

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, Result};
use store::Mailstore as _;

use crate::gate::Gate;
use crate::sessions::{Ending, Sessions};

/// What removing, renaming and moving users' mail needs: the directory that records the
/// intent, the store that holds the mail, the sessions to end and the gate to take.
#[derive(Clone)]
pub struct Accounts {
    pub directory: directory::Directory,
    pub store: Arc<store::Store>,
    pub sessions: Sessions,
    pub gate: Arc<Gate>,
}

/// How long a deletion waits for the user's sessions to end. A session ends at its next
/// step; one stuck writing to a client that does not read ends within its write timeout.
const SESSIONS_WAIT_MAX: Duration = Duration::from_secs(330);

impl Accounts {
    /// Deletes `address` and its mail; returns the canonical address and what the store
    /// removed here. In a cluster, a user whose mailbox is on another node is deleted from the
    /// directory here, and that node removes the mail and frees the address (it watches the
    /// directory: [`finish_deletions`] from `moves::watch`); the answer then names the node
    /// (`Some`), and the store figures are zero.
    pub async fn delete_user(
        &self,
        address: &str,
    ) -> Result<(String, store::DeletedUser, Option<String>)> {
        let elsewhere = self.gate.node().and_then(|me| {
            let owner = self
                .directory
                .cache()
                .owner(&address.to_ascii_lowercase())?;
            owner.node.filter(|node| node != me)
        });
        let user = self.directory.del_user(address).await?;
        if let Some(node) = elsewhere {
            tracing::info!(
                event = "user_deleted",
                user,
                node,
                msg = "its node removes the mail"
            );
            return Ok((user, store::DeletedUser::default(), Some(node)));
        }
        let deleted = self.purge(&user).await?;
        Ok((user, deleted, None))
    }

    /// Steps 2 to 4 for a user already deleted from the directory.
    async fn purge(&self, user: &str) -> Result<store::DeletedUser> {
        let sessions = self.sessions.sessions(user);
        let (revocation, gone) = self
            .sessions
            .revoke(user, Ending::Removed, SESSIONS_WAIT_MAX)
            .await;
        if !gone {
            tracing::warn!(
                event = "user_sessions_open",
                user,
                sessions = self.sessions.sessions(user),
                waited_seconds = SESSIONS_WAIT_MAX.as_secs(),
                msg = "removing the mail anyway"
            );
        }
        let store = self.store.clone();
        let gate = self.gate.clone();
        let who = user.to_string();
        let deleted = tokio::task::spawn_blocking(move || {
            let _exclusive = gate.exclusive();
            store.delete_user(&who)
        })
        .await
        .context("the store task failed")?
        .with_context(|| format!("removing the mail of {user}"))?;
        self.directory.purged(user).await?;
        drop(revocation);
        tracing::info!(
            event = "user_deleted",
            user,
            sessions_closed = sessions,
            folders = deleted.folders,
            messages = deleted.messages,
            bytes = deleted.bytes
        );
        Ok(deleted)
    }

    /// Finishes every deletion the directory still lists (a user deleted while no server ran,
    /// or a deletion a crash cut short). Failures are logged and retried at the next start.
    pub async fn finish_deletions(&self) {
        // In a cluster, only this node's users: another node's mail is not here, and freeing
        // its address would let a new account inherit it.
        let pending = match self.gate.node() {
            Some(node) => self.directory.pending_deletions_on(node).await,
            None => self.directory.pending_deletions().await,
        };
        let pending = match pending {
            Ok(pending) => pending,
            Err(e) => {
                tracing::warn!(event = "directory_error", error = %e, msg = "listing deleted users");
                return;
            }
        };
        for user in pending {
            if let Err(e) = self.purge(&user).await {
                tracing::warn!(
                    event = "user_delete_failed",
                    user,
                    error = %format!("{e:#}"),
                    msg = "retried at the next start"
                );
            }
        }
    }

    /// Renames the user `old` to `new` while the server runs; returns both canonical addresses
    /// and what the store moved.
    ///
    /// 1. the directory records the intent (`renamed_users`): neither address can be added,
    ///    deleted or renamed meanwhile;
    /// 2. `old`'s sessions are told and closed, and no new one may join (as for a deletion);
    /// 3. under the exclusive mailbox lock, so no delivery batch routes or appends meanwhile,
    ///    the store gives `old`'s folders to `new` (one durable record: UIDs and UIDVALIDITY
    ///    stay) and the directory moves the account (password, quotas, subscriptions, aliases
    ///    naming it); the lock is released once the directory's cache knows `new`, so the next
    ///    batch routes there.
    ///
    /// Mail queued for `old`'s address and delivered afterwards finds no such user (it bounces
    /// unless an alias keeps the old address). A crash after step 1 leaves the intent; the next
    /// start (or an offline `user rename`) finishes it ([`finish_renames`]).
    pub async fn rename_user(
        &self,
        old: &str,
        new: &str,
    ) -> Result<(String, String, store::Usage)> {
        let (old, new) = self.directory.begin_rename(old, new).await?;
        let moved = self.finish_rename(&old, &new).await?;
        Ok((old, new, moved))
    }

    /// Steps 2 and 3 for a rename the directory has begun. When the store refuses (`new` holds
    /// folders already), nothing moved and the directory forgets the intent.
    async fn finish_rename(&self, old: &str, new: &str) -> Result<store::Usage> {
        let sessions = self.sessions.sessions(old);
        let (revocation, gone) = self
            .sessions
            .revoke(old, Ending::Removed, SESSIONS_WAIT_MAX)
            .await;
        if !gone {
            tracing::warn!(
                event = "user_sessions_open",
                user = old,
                sessions = self.sessions.sessions(old),
                waited_seconds = SESSIONS_WAIT_MAX.as_secs(),
                msg = "renaming anyway"
            );
        }
        // The exclusive lock is a std lock held by a blocking thread: it takes the lock, renames
        // in the store, and waits for the directory's part before it lets go.
        let (locked_tx, locked_rx) = tokio::sync::oneshot::channel();
        let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
        let (store, gate) = (self.store.clone(), self.gate.clone());
        let (from, to) = (old.to_string(), new.to_string());
        let holder = tokio::task::spawn_blocking(move || {
            let _exclusive = gate.exclusive();
            let moved = store.rename_user(&from, &to);
            let failed = moved.is_err();
            let _ = locked_tx.send(moved);
            if !failed {
                // Released when the directory is done (or its side was dropped).
                let _ = release_rx.recv();
            }
        });
        let moved = locked_rx
            .await
            .context("the store task failed")?
            .with_context(|| format!("moving the mail of {old} to {new}"));
        let finished = match &moved {
            Ok(_) => self.directory.finish_rename(old, new).await,
            // The store moved nothing (one record, all or none): `old` stays as it was.
            Err(_) => self.directory.abandon_rename(old).await,
        };
        drop(release_tx);
        holder.await.context("the store task failed")?;
        let moved = moved?;
        finished?;
        drop(revocation);
        tracing::info!(
            event = "user_rename",
            user = old,
            new_user = new,
            sessions_closed = sessions,
            folders = moved.folders,
            messages = moved.messages,
            bytes = moved.bytes
        );
        Ok(moved)
    }

    /// Finishes every rename the directory still lists (one a crash cut short, or one begun by
    /// an offline `user rename` that did not finish). Failures are logged and retried at the
    /// next start.
    pub async fn finish_renames(&self) {
        let pending = match self.directory.pending_renames().await {
            Ok(pending) => pending,
            Err(e) => {
                tracing::warn!(event = "directory_error", error = %e, msg = "listing renamed users");
                return;
            }
        };
        for (old, new) in pending {
            if let Err(e) = self.finish_rename(&old, &new).await {
                tracing::warn!(
                    event = "user_rename_failed",
                    user = old,
                    new_user = new,
                    error = %format!("{e:#}"),
                    msg = "retried at the next start"
                );
            }
        }
    }

    /// Ends the user's sessions (telling them the mailbox is moving) and deletes its mail here
    /// under the exclusive gate, without touching the directory: a moved user's copy on the
    /// node it left (or a partial copy on a move's target). Nothing to delete is not an error.
    pub async fn remove_copy(
        &self,
        user: &str,
        sessions_wait: Duration,
    ) -> Result<store::DeletedUser> {
        let (revocation, _) = self
            .sessions
            .revoke(user, Ending::Moving, sessions_wait)
            .await;
        let (store, gate, who) = (self.store.clone(), self.gate.clone(), user.to_string());
        let deleted = tokio::task::spawn_blocking(move || {
            let _exclusive = gate.exclusive();
            if store.list_folders(&who).is_empty() {
                return Ok(store::DeletedUser::default());
            }
            store.delete_user(&who)
        })
        .await
        .context("the store task failed")?
        .with_context(|| format!("removing the mail of {user}"))?;
        drop(revocation);
        Ok(deleted)
    }
}
