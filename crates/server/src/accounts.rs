//! Deleting a user while the server runs: the account and its mail go together, and the
//! address starts empty when it is added again.
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

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, Result};

use crate::Ctx;

/// How long a deletion waits for the user's sessions to end. A session ends at its next
/// step; one stuck writing to a client that does not read ends within its write timeout.
const SESSIONS_WAIT_MAX: Duration = Duration::from_secs(330);

/// Deletes `address` and its mail; returns the canonical address and what the store
/// removed.
pub(crate) async fn delete_user(
    ctx: &Arc<Ctx>,
    address: &str,
) -> Result<(String, store::DeletedUser)> {
    let user = ctx.directory.del_user(address).await?;
    let deleted = purge(ctx, &user).await?;
    Ok((user, deleted))
}

/// Steps 2 to 4 for a user already deleted from the directory.
async fn purge(ctx: &Arc<Ctx>, user: &str) -> Result<store::DeletedUser> {
    let sessions = ctx.users.sessions(user);
    let (revocation, gone) = ctx.users.revoke(user, SESSIONS_WAIT_MAX).await;
    if !gone {
        tracing::warn!(
            event = "user_sessions_open",
            user,
            sessions = ctx.users.sessions(user),
            waited_seconds = SESSIONS_WAIT_MAX.as_secs(),
            msg = "removing the mail anyway"
        );
    }
    let store = ctx.store.clone();
    let mailboxes = ctx.mailboxes.clone();
    let who = user.to_string();
    let deleted = tokio::task::spawn_blocking(move || {
        let _exclusive = mailboxes.write().unwrap_or_else(|p| p.into_inner());
        store.delete_user(&who)
    })
    .await
    .context("the store task failed")?
    .with_context(|| format!("removing the mail of {user}"))?;
    ctx.directory.purged(user).await?;
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
pub(crate) async fn finish_deletions(ctx: &Arc<Ctx>) {
    let pending = match ctx.directory.pending_deletions().await {
        Ok(pending) => pending,
        Err(e) => {
            tracing::warn!(event = "directory_error", error = %e, msg = "listing deleted users");
            return;
        }
    };
    for user in pending {
        if let Err(e) = purge(ctx, &user).await {
            tracing::warn!(
                event = "user_delete_failed",
                user,
                error = %format!("{e:#}"),
                msg = "retried at the next start"
            );
        }
    }
}
