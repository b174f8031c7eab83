//! `mailstow spam train|stats|release` on the running server (docs/spam.md 3, 5).

use directory::SpamOwner;
use store::Mailstore as _;

use std::sync::Arc;

use crate::format::one_line;

/// Trains a model on every message of `user`'s `mailbox`: the user's own, or the site-wide
/// one (`site`). The messages are read in batches on the blocking pool.
/// What the spam commands need of the running server.
pub(crate) struct SpamParts<'a> {
    pub(crate) filter: Option<&'a Arc<filter::Filter>>,
    pub(crate) directory: &'a directory::Directory,
    pub(crate) store: &'a Arc<store::Store>,
}

pub(crate) async fn train(
    ctx: &SpamParts<'_>,
    user: &str,
    spam: bool,
    mailbox: &str,
    site: bool,
) -> Result<Vec<u8>, String> {
    let filter = ctx
        .filter
        .as_ref()
        .ok_or("the spam filter is not running")?;
    if !ctx.directory.cache().is_user(user) {
        return Err(format!("no such user: {}", one_line(user)));
    }
    let store = ctx.store.clone();
    let (u, m) = (user.to_string(), mailbox.to_string());
    let uids = tokio::task::spawn_blocking(move || store.uids(&u, &m))
        .await
        .map_err(|e| format!("the command failed: {e}"))?
        .map_err(|e| format!("{}: {e}", one_line(mailbox)))?;
    let class = if spam {
        spam::Class::Spam
    } else {
        spam::Class::Ham
    };
    let owner = if site {
        SpamOwner::Site
    } else {
        SpamOwner::User(user)
    };
    let mut total = filter::Trained::default();
    for chunk in uids.chunks(500) {
        let store = ctx.store.clone();
        let (u, m, chunk) = (user.to_string(), mailbox.to_string(), chunk.to_vec());
        let messages = tokio::task::spawn_blocking(move || {
            chunk
                .iter()
                .map(|uid| store.read(&u, &m, *uid).ok())
                .collect::<Vec<_>>()
        })
        .await
        .map_err(|e| format!("the command failed: {e}"))?;
        let done = filter
            .train(owner, class, messages.into_iter(), "cli")
            .await?;
        total.trained += done.trained;
        total.already += done.already;
        total.missing += done.missing;
    }
    Ok(format!(
        "trained {} as {}: {} messages, {} already trained, {} gone\n",
        if site {
            "the site-wide model".to_string()
        } else {
            one_line(user)
        },
        class.name(),
        total.trained,
        total.already,
        total.missing
    )
    .into_bytes())
}

/// What a user's (or `@site`'s) model and reputation hold.
pub(crate) async fn stats(ctx: &SpamParts<'_>, user: &str) -> Result<Vec<u8>, String> {
    let owner = if user == "@site" {
        SpamOwner::Site
    } else {
        if !ctx.directory.cache().is_user(user) {
            return Err(format!("no such user: {}", one_line(user)));
        }
        SpamOwner::User(user)
    };
    let stats = ctx
        .directory
        .spam_stats(owner)
        .await
        .map_err(|e| e.to_string())?;
    let thresholds = ctx.filter.map(|f| {
        let c = f.config();
        let set = ctx.directory.cache().spam_thresholds(user);
        (
            set.junk.unwrap_or(c.thresholds.junk),
            set.reject.unwrap_or(c.thresholds.reject),
            set.greylist.unwrap_or(c.thresholds.greylist),
        )
    });
    let mut out = format!(
        "{}\ntrained: {} spam, {} ham\ntokens: {}\ntrained messages remembered: {}\nreputation entries: {}\n",
        one_line(user),
        stats.spam_messages,
        stats.ham_messages,
        stats.tokens,
        stats.trained,
        stats.reputation
    );
    if let Some(filter) = ctx.filter {
        out.push_str(&format!(
            "in memory: {} bytes (classifier and reputation)\n",
            filter.memory_bytes(owner).await
        ));
    }
    if let Some((junk, reject, greylist)) = thresholds {
        out.push_str(&format!(
            "thresholds: junk {junk:.1}, reject {reject:.1}, greylist {greylist:.1}\n"
        ));
    }
    if let Some(filter) = ctx.filter
        && filter.limited_accounts().iter().any(|u| u == user)
    {
        out.push_str("outbound: limited (spam suspected)\n");
    }
    Ok(out.into_bytes())
}

pub(crate) fn release(ctx: &SpamParts<'_>, user: &str) -> Result<Vec<u8>, String> {
    let filter = ctx
        .filter
        .as_ref()
        .ok_or("the spam filter is not running")?;
    Ok(if filter.release(user) {
        tracing::info!(event = "outbound_released", user = %one_line(user));
        format!("released {}\n", one_line(user))
    } else {
        format!("{} was not limited\n", one_line(user))
    }
    .into_bytes())
}
