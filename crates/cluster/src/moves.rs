//! Moving a user's mailbox to another node while both run (issue 20, `mailstow user move
//! ADDRESS --to NODE`). The directory drives it, so the CLI, the old owner and the new one
//! may be on three machines:
//!
//! 1. `user move` sets the user's move state to `requested:<target>`
//!    ([`directory::Directory::request_move`]) and waits for the directory to show the user
//!    on the target with a higher epoch, or `failed:<target>:<why>`.
//! 2. The **target** ([`watch`] sees the request within a second, [`directory::Directory::moves_to`])
//!    removes any stale copy of the user from its own store, then copies every folder from
//!    the owner over IMAP, logged in with the cluster pre-authentication (`cluster:<target>`):
//!    `LIST`, then per folder `EXAMINE (CONDSTORE)`, the folder created with the source's
//!    UIDVALIDITY ([`store::Store::import_folder`]), its HIGHESTMODSEQ raised to the source's
//!    ([`store::Store::raise_modseq`]), `UID FETCH (UID FLAGS INTERNALDATE MODSEQ BODY.PEEK[])`
//!    in chunks of [`FETCH_CHUNK`] messages committed as import batches that keep each UID
//!    (a UID not kept fails the move), and UIDNEXT raised to the source's. Meanwhile the user
//!    works normally on the owner.
//! 3. **Freeze, as a handshake.** The target sets `frozen:<target>`
//!    ([`directory::Directory::begin_move`]) and logs in on the owner again, as
//!    `cluster-move:<target>` (a token MACed for `imap-move`). The owner accepts that login
//!    only after [`freeze_here`]: it re-reads the move state from the database (it must be
//!    `frozen:<target>` with the user still on the owner), marks the user frozen in memory
//!    ([`Moves`]), ends every session of the user and waits until they are gone, then takes
//!    the exclusive mailbox lock once, so a delivery batch or a handed-over LMTP copy that
//!    routed the user before the mark has finished. From then on nothing changes the
//!    mailbox: delivery batches defer the user's copies ([`Moves::held`], checked under the
//!    shared mailbox lock by the router, which answers `Route::Held`: retried on the short
//!    schedule, 1, 2, 4 ... s), handed-over LMTP copies get 451,
//!    and IMAP/POP3 logins get `NO [UNAVAILABLE]` / `-ERR [SYS/TEMP]` (checked after the
//!    session joined the user, so a login racing the freeze is either ended by it or sees
//!    it). The cache's `frozen` (the database's state) holds the user as well, so an owner
//!    restarted during the move stays frozen.
//! 4. **Delta**, over that frozen session: the folder list again (a folder deleted on the
//!    owner is deleted here, a new one copied), and per folder the HIGHESTMODSEQ raised again,
//!    UIDs gone from the owner expunged, the flags and keywords of every message whose
//!    MODSEQ on the owner passed the copy's HIGHESTMODSEQ (or whose flags differ) set again,
//!    new UIDs copied, UIDNEXT raised; then every message given its MODSEQ on the owner and
//!    the folder the owner's HIGHESTMODSEQ ([`store::Store::restore_modseqs`]). Then every
//!    folder is compared (UIDVALIDITY, UIDs, flags, keywords, MODSEQs, HIGHESTMODSEQ) with
//!    the owner's; any difference fails the move.
//! 5. **Switch**: [`directory::Directory::finish_move`] moves owner and epoch in one
//!    transaction. The old owner's [`watch`] sees the user on another node, removes its copy
//!    (sessions ended, `Store::delete_user` under the exclusive lock) and drops the freeze.
//! 6. **Failure** anywhere before the switch: the target records `failed:<target>:<why>`
//!    (which unfreezes the user: the cache's `frozen` is only `frozen:`), deletes its partial
//!    copy, and the old owner's [`watch`] drops its freeze once the database confirms. A
//!    target that restarts finds `requested:` or `frozen:` naming it and starts over (a
//!    frozen move is set back to `requested:` first, so the user is not frozen during the
//!    second copy).
//!
//! **MODSEQ.** The store gives MODSEQs itself, ascending per folder, so the copy and the delta
//! first give every message a MODSEQ above the owner's (the folder's HIGHESTMODSEQ is raised
//! to the source's before anything is imported or changed). At the end of the delta, frozen,
//! one `restore_modseqs` record gives each message its MODSEQ on the owner and the folder the
//! owner's HIGHESTMODSEQ: the one change that may lower them (docs/storage.md, S4), allowed
//! because no client has seen this copy (every session is on the owner until the switch).
//! So a CONDSTORE/QRESYNC client finds the folder exactly as it left it: same UIDVALIDITY,
//! UIDs, MODSEQs and HIGHESTMODSEQ, nothing to resynchronise.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context as _, Result, anyhow, bail};

use mailboxes::{Accounts, Deposit};
use store::Mailstore as _;

use crate::node::Cluster;

/// Messages per `UID FETCH ... BODY.PEEK[]` and per import batch.
pub const FETCH_CHUNK: usize = 16;
/// How long the old owner waits for the user's sessions to end at the freeze.
const SESSIONS_WAIT_MAX: Duration = Duration::from_secs(60);
/// How often [`watch`] looks at the directory.
const WATCH_EVERY: Duration = Duration::from_secs(1);

/// Moves on this node: the ones it runs as a target, and what the old owner does (the users
/// frozen here are the gate's: `mailboxes::Gate::freeze`).
pub struct Moves {
    cluster: Arc<Cluster>,
    /// The directory, the store, the sessions and the gate.
    accounts: Accounts,
    /// The road imports take into the store.
    deposit: Arc<Deposit>,
    running: Mutex<HashSet<String>>,
}

impl Moves {
    pub fn new(cluster: Arc<Cluster>, accounts: Accounts, deposit: Arc<Deposit>) -> Moves {
        Moves {
            cluster,
            accounts,
            deposit,
            running: Mutex::new(HashSet::new()),
        }
    }

    fn lock_running(&self) -> std::sync::MutexGuard<'_, HashSet<String>> {
        self.running.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The old owner's side of the freeze handshake (step 3), run before a `cluster-move:`
/// login is admitted. Err: the text for the target.
pub async fn freeze_here(ctx: &Moves, user: &str, target: &str) -> Result<(), String> {
    let me = ctx.cluster.node.clone();
    let (node, _, state) = ctx
        .accounts
        .directory
        .move_status(user)
        .await
        .map_err(|e| format!("directory: {e}"))?;
    if node.as_deref() != Some(me.as_str()) || state.as_deref() != Some(&format!("frozen:{target}"))
    {
        return Err(format!(
            "{user} is not being moved from {me} to {target} (state {})",
            state.as_deref().unwrap_or("none")
        ));
    }
    let gate = ctx.accounts.gate.clone();
    gate.freeze(user);
    let (revocation, gone) = ctx
        .accounts
        .sessions
        .revoke(user, mailboxes::Ending::Moving, SESSIONS_WAIT_MAX)
        .await;
    if !gone {
        // The freeze stays until the directory says the move ended (`watch`).
        return Err(format!("sessions of {user} did not end in time"));
    }
    // Every delivery batch and handed-over copy that routed the user before the mark ends
    // before we go on; every later one sees the mark under its shared lock.
    tokio::task::spawn_blocking(move || {
        drop(gate.exclusive());
    })
    .await
    .map_err(|e| e.to_string())?;
    drop(revocation);
    tracing::info!(event = "user_move_frozen", user, to = target);
    Ok(())
}

/// Runs on every cluster node: starts the moves the directory asks of this node, and on
/// the old owner removes a moved user's copy and drops freezes whose move ended.
pub async fn watch(ctx: Arc<Moves>, mut shutdown: tokio::sync::watch::Receiver<bool>) {
    let me = ctx.cluster.node.clone();
    let mut tick = tokio::time::interval(WATCH_EVERY);
    let mut generation = ctx.accounts.directory.cache().generation();
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = shutdown.wait_for(|stop| *stop) => return,
        }
        // A user of this node deleted on another node (its admin pages, its admin socket):
        // the directory changed; remove the mail here and free the address.
        let now = ctx.accounts.directory.cache().generation();
        if now != generation {
            generation = now;
            ctx.accounts.finish_deletions().await;
        }
        match ctx.accounts.directory.moves_to(&me).await {
            Ok(moves) => {
                for (user, state) in moves {
                    if !ctx.lock_running().insert(user.clone()) {
                        continue;
                    }
                    let ctx = ctx.clone();
                    tokio::spawn(async move {
                        run(&ctx, &user, &state).await;
                        ctx.lock_running().remove(&user);
                    });
                }
            }
            Err(e) => tracing::warn!(event = "directory_error", error = %e, msg = "listing moves"),
        }
        let frozen = ctx.accounts.gate.frozen_users();
        for user in frozen {
            if let Err(e) = settle(&ctx, &me, &user).await {
                tracing::warn!(event = "user_move_cleanup_failed", user, error = %format!("{e:#}"));
            }
        }
    }
}

/// The old owner, for a user frozen here: once the directory shows the move ended, remove
/// the copy (moved away) or drop the freeze (move failed or abandoned).
async fn settle(ctx: &Moves, me: &str, user: &str) -> Result<()> {
    if let Some(owner) = ctx.accounts.directory.cache().owner(user)
        && owner.frozen
        && owner.node.as_deref() == Some(me)
    {
        return Ok(());
    }
    let status = match ctx.accounts.directory.move_status(user).await {
        Ok(status) => Some(status),
        Err(directory::DirectoryError::NoSuchUser(_)) => None,
        Err(e) => return Err(e.into()),
    };
    match status {
        Some((_, _, Some(state))) if state.starts_with("frozen:") => return Ok(()),
        Some((Some(node), _, _)) if node != me => {
            let deleted = remove_copy(ctx, user).await?;
            tracing::info!(
                event = "user_moved_away",
                user,
                to = %node,
                folders = deleted.folders,
                messages = deleted.messages,
                bytes = deleted.bytes
            );
        }
        _ => tracing::info!(event = "user_move_unfrozen", user),
    }
    ctx.accounts.gate.thaw(user);
    Ok(())
}

/// Ends the user's sessions and deletes its mail here under the exclusive gate.
async fn remove_copy(ctx: &Moves, user: &str) -> Result<store::DeletedUser> {
    ctx.accounts.remove_copy(user, SESSIONS_WAIT_MAX).await
}

/// The target's side of one move, from the state the directory shows.
async fn run(ctx: &Moves, user: &str, state: &str) {
    let me = ctx.cluster.node.clone();
    tracing::info!(event = "user_move_started", user, to = %me, state);
    match move_here(ctx, user, state).await {
        Ok((from, epoch, counts)) => tracing::info!(
            event = "user_moved",
            user,
            from = %from,
            to = %me,
            epoch,
            folders = counts.0,
            messages = counts.1
        ),
        Err(e) => {
            let why = format!("{e:#}");
            tracing::warn!(event = "user_move_failed", user, to = %me, error = %why);
            let mut short: String = why.chars().filter(|c| !c.is_control()).take(400).collect();
            if short.is_empty() {
                short.push_str("unknown error");
            }
            match ctx
                .accounts
                .directory
                .set_move_state(user, &me, &format!("failed:{me}:{short}"))
                .await
            {
                Ok(_) => {}
                Err(e) => {
                    tracing::warn!(event = "directory_error", error = %e, msg = "recording a failed move")
                }
            }
            let ours = ctx
                .accounts
                .directory
                .cache()
                .owner(user)
                .is_some_and(|o| o.node.as_deref() == Some(me.as_str()));
            if !ours && let Err(e) = remove_copy(ctx, user).await {
                tracing::warn!(event = "user_move_cleanup_failed", user, error = %format!("{e:#}"));
            }
        }
    }
}

/// What the copy knew of a folder: its UIDVALIDITY and the HIGHESTMODSEQ it copied at.
type Copied = HashMap<String, (u32, u64)>;

async fn move_here(ctx: &Moves, user: &str, state: &str) -> Result<(String, i64, (u64, u64))> {
    let cluster = ctx.cluster.clone();
    let me = cluster.node.clone();
    if state == format!("frozen:{me}") {
        // A move cut short (by a crash of this node): copy again, unfrozen.
        ctx.accounts
            .directory
            .set_move_state(user, &me, &format!("requested:{me}"))
            .await?;
    }
    let (node, _, _) = ctx.accounts.directory.move_status(user).await?;
    let from = node.ok_or_else(|| anyhow!("{user} has no node"))?;
    if from == me {
        bail!("{user} is already on {me}");
    }
    let source = ctx
        .accounts
        .directory
        .cache()
        .node(&from)
        .filter(|n| n.up)
        .ok_or_else(|| anyhow!("the owner {from} is down or unknown"))?;
    remove_copy(ctx, user).await?;
    let mut copied = Copied::new();
    // The copy, while the user works on the owner.
    let mut client = cluster
        .connect_for_move(&source, user, false)
        .await
        .map_err(|e| anyhow!("{e}"))?;
    sync_user(ctx, &mut client, user, &mut copied, false).await?;
    let _ = client.logout().await;
    // The freeze, then the delta over the session the owner admitted once frozen.
    ctx.accounts.directory.begin_move(user, &me).await?;
    let mut client = cluster
        .connect_for_move(&source, user, true)
        .await
        .map_err(|e| anyhow!("{e}"))?;
    let counts = sync_user(ctx, &mut client, user, &mut copied, true).await?;
    let _ = client.logout().await;
    let epoch = ctx.accounts.directory.finish_move(user, &me).await?;
    Ok((from, epoch, counts))
}

/// Brings the user's folders here to the owner's state (the copy, or with `delta` the
/// changes since and a final comparison). Returns (folders, messages).
async fn sync_user(
    ctx: &Moves,
    client: &mut imap_client::Client,
    user: &str,
    copied: &mut Copied,
    delta: bool,
) -> Result<(u64, u64)> {
    let mut names = Vec::new();
    for listed in client.list_all().await? {
        if listed.delimiter.is_some_and(|d| d != '/') {
            bail!(
                "the owner's hierarchy delimiter is {:?}, not '/'",
                listed.delimiter
            );
        }
        if listed.selectable {
            names.push(listed.name);
        }
    }
    // Parents before children: a parent keeps its own UIDVALIDITY.
    names.sort();
    let store = ctx.accounts.store.clone();
    if delta {
        let wanted: HashSet<&String> = names.iter().collect();
        let mut gone: Vec<String> = store
            .list_folders(user)
            .into_iter()
            .filter(|f| !wanted.contains(f))
            .collect();
        // Children first.
        gone.sort_by(|a, b| b.cmp(a));
        for folder in gone {
            let (s, u) = (store.clone(), user.to_string());
            tokio::task::spawn_blocking(move || s.delete_folder(&u, &folder)).await??;
        }
    }
    let mut messages = 0;
    for name in &names {
        messages += sync_folder(ctx, client, user, name, copied, delta).await?;
    }
    Ok((names.len() as u64, messages))
}

/// IMAP flags as the store keeps them: system flags and keywords.
fn store_flags(flags: &[String]) -> (store::Flags, Vec<String>) {
    let mut system = store::Flags::EMPTY;
    let mut keywords = Vec::new();
    for f in flags {
        if f.starts_with('\\') {
            if let Some(flag) = store::Flags::parse(f) {
                system = system.union(flag);
            }
        } else {
            keywords.push(f.clone());
        }
    }
    keywords.sort();
    keywords.dedup();
    (system, keywords)
}

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, store::StoreError> + Send + 'static,
) -> Result<T> {
    Ok(tokio::task::spawn_blocking(f)
        .await
        .context("the store task failed")??)
}

/// Copies one folder from the owner (over `client`) into this node's store; `delta` is the
/// last pass, with the owner's folder frozen. Returns the messages imported. The phases, each
/// on the blocking pool through [`FolderCopy`]: the target folder with the owner's UIDVALIDITY
/// and MODSEQs raised above the owner's; messages gone on the owner expunged here; flags of the
/// messages both have; new messages imported keeping their UIDs; UIDNEXT raised; and on the
/// delta, MODSEQs taken from the owner and the whole folder compared.
async fn sync_folder(
    moves: &Moves,
    client: &mut imap_client::Client,
    user: &str,
    folder: &str,
    copied: &mut Copied,
    delta: bool,
) -> Result<u64> {
    let copy = FolderCopy {
        moves,
        user,
        folder,
    };
    let mailbox = client.examine(folder).await?;
    let highest = mailbox
        .highest_modseq
        .ok_or_else(|| anyhow!("the owner gave no HIGHESTMODSEQ for {folder} (no CONDSTORE)"))?;
    copy.prepare(&mailbox, highest).await?;
    let copied_at = copied.get(folder).map(|(_, m)| *m);
    copied.insert(folder.to_string(), (mailbox.uid_validity, highest));
    let source_uids = client.uid_search_all().await?;
    let ours = copy.expunge_gone(&source_uids).await?;
    copy.copy_flags(client, &source_uids, &ours, copied_at)
        .await?;
    let imported = copy.import_new(client, &source_uids, &ours).await?;
    let next = mailbox.uid_next;
    copy.on_store(move |s, u, f| s.raise_uidnext(u, f, next))
        .await?;
    if delta {
        copy.compare_frozen(client, &source_uids, &mailbox, highest)
            .await?;
    }
    Ok(imported)
}

/// This node's copy of each message of a folder: flags and sorted keywords, by UID.
type OurMessages = BTreeMap<u32, (store::Flags, Vec<String>)>;

/// One folder of a moving user being copied into this node's store.
struct FolderCopy<'a> {
    moves: &'a Moves,
    user: &'a str,
    folder: &'a str,
}

impl FolderCopy<'_> {
    /// Runs `work` with the store, the user and the folder on the blocking pool.
    async fn on_store<T: Send + 'static>(
        &self,
        work: impl FnOnce(&store::Store, &str, &str) -> Result<T, store::StoreError> + Send + 'static,
    ) -> Result<T> {
        let (store, user, folder) = (
            self.moves.accounts.store.clone(),
            self.user.to_string(),
            self.folder.to_string(),
        );
        blocking(move || work(&store, &user, &folder)).await
    }

    /// Phase 1. After it, the folder exists here with the owner's UIDVALIDITY (created so if
    /// missing; re-created on the owner fails the move) and every MODSEQ given from here on is
    /// above the owner's `highest`, before any import or flag change.
    async fn prepare(&self, mailbox: &imap_client::Mailbox, highest: u64) -> Result<()> {
        let folder = self.folder;
        let validity = mailbox.uid_validity;
        match self.on_store(|s, u, f| Ok(s.status(u, f).ok())).await? {
            Some(status) if status.uidvalidity != validity => bail!(
                "{folder} was re-created on the owner during the move (UIDVALIDITY {} then {validity})",
                status.uidvalidity
            ),
            Some(_) => {}
            None => {
                let target = self
                    .on_store(move |s, u, f| s.import_folder(u, f, Some(validity)))
                    .await?;
                if !target.uidvalidity_kept {
                    bail!("{folder}: the store did not keep UIDVALIDITY {validity}");
                }
            }
        }
        let status = self
            .on_store(move |s, u, f| s.raise_modseq(u, f, highest))
            .await?;
        anyhow::ensure!(
            status.uidvalidity == validity && status.highest_modseq >= highest,
            "{folder}: after raising, UIDVALIDITY {} HIGHESTMODSEQ {} (the owner's: {validity}, {highest})",
            status.uidvalidity,
            status.highest_modseq
        );
        Ok(())
    }

    /// Phase 2. Expunges here what the owner no longer has; returns what is left here.
    async fn expunge_gone(&self, source_uids: &[u32]) -> Result<OurMessages> {
        let view = self.on_store(|s, u, f| s.open_folder(u, f)).await?;
        let mut ours: OurMessages = view
            .messages
            .into_iter()
            .map(|m| {
                let mut k = m.keywords;
                k.sort();
                (m.uid, (m.flags, k))
            })
            .collect();
        let theirs: HashSet<u32> = source_uids.iter().copied().collect();
        let gone: Vec<u32> = ours
            .keys()
            .copied()
            .filter(|u| !theirs.contains(u))
            .collect();
        if !gone.is_empty() {
            let expunged = gone.clone();
            self.on_store(move |s, u, f| s.expunge(u, f, &expunged))
                .await?;
            for uid in gone {
                ours.remove(&uid);
            }
        }
        Ok(ours)
    }

    /// Phase 3. The owner's flags on the messages both sides have, where they differ or
    /// changed since the last pass (`copied_at`, the owner's HIGHESTMODSEQ then).
    async fn copy_flags(
        &self,
        client: &mut imap_client::Client,
        source_uids: &[u32],
        ours: &OurMessages,
        copied_at: Option<u64>,
    ) -> Result<()> {
        let common: Vec<u32> = source_uids
            .iter()
            .copied()
            .filter(|u| ours.contains_key(u))
            .collect();
        if common.is_empty() {
            return Ok(());
        }
        let mut groups: BTreeMap<(u8, Vec<String>), Vec<u32>> = BTreeMap::new();
        for state in client.uid_fetch_state(&common, false).await? {
            let (flags, keywords) = store_flags(&state.flags);
            let changed_since_copy = match (copied_at, state.modseq) {
                (Some(at), Some(m)) => m > at,
                _ => true,
            };
            if ours.get(&state.uid) != Some(&(flags, keywords.clone())) || changed_since_copy {
                groups
                    .entry((flags.bits(), keywords))
                    .or_default()
                    .push(state.uid);
            }
        }
        for ((bits, keywords), uids) in groups {
            let flags = store::Flags::from_bits_truncate(bits);
            self.on_store(move |s, u, f| {
                s.set_flags(u, f, &uids, store::FlagOp::Replace, flags, &keywords)
            })
            .await?;
        }
        Ok(())
    }

    /// Phase 4. The owner's messages not here yet, fetched in chunks of [`FETCH_CHUNK`] and
    /// each chunk committed as one import batch through the deposit; every message keeps its
    /// UID and keywords, or the move fails. Returns how many were imported.
    async fn import_new(
        &self,
        client: &mut imap_client::Client,
        source_uids: &[u32],
        ours: &OurMessages,
    ) -> Result<u64> {
        let folder = self.folder;
        let last = ours.keys().next_back().copied().unwrap_or(0);
        let new: Vec<u32> = source_uids
            .iter()
            .copied()
            .filter(|u| !ours.contains_key(u))
            .collect();
        if new.first().is_some_and(|&first| first <= last) {
            bail!(
                "{folder}: the owner has UID {} below the last one copied ({last})",
                new[0]
            );
        }
        let mut imported = 0u64;
        for chunk in new.chunks(FETCH_CHUNK) {
            let messages: Vec<store::ImportedMessage> = client
                .uid_fetch_state(chunk, true)
                .await?
                .into_iter()
                .map(|m| {
                    let (flags, keywords) = store_flags(&m.flags);
                    store::ImportedMessage {
                        uid: Some(m.uid),
                        flags,
                        keywords,
                        internal_date: m.internal_date.unwrap_or(0),
                        content: m.content.map(Vec::from).unwrap_or_default(),
                    }
                })
                .collect();
            if messages.is_empty() {
                continue;
            }
            let deposit = self.moves.deposit.clone();
            let outcomes = self
                .on_store(move |s, u, f| {
                    let batch = s.prepare_import(u, f, messages)?;
                    let gate = deposit.gate().clone();
                    let shared = gate.shared();
                    deposit.import(&shared, batch)
                })
                .await?;
            for outcome in outcomes {
                let outcome = outcome.with_context(|| format!("importing into {folder}"))?;
                if !outcome.uid_kept {
                    bail!("{folder}: UID not kept (got {})", outcome.uid);
                }
                if !outcome.dropped_keywords.is_empty() {
                    bail!("{folder}: keywords dropped: {:?}", outcome.dropped_keywords);
                }
                imported += 1;
            }
        }
        Ok(imported)
    }

    /// Phase 5, on the delta only. The owner's folder is frozen and cannot change any more:
    /// every message takes the MODSEQ it has there and the folder its HIGHESTMODSEQ
    /// (`Store::restore_modseqs`: S4's one exception, safe because no client sees this copy
    /// before the switch). After it, the whole folder equals the owner's (UIDs, flags,
    /// keywords, MODSEQs, UIDVALIDITY, HIGHESTMODSEQ), or the move fails.
    async fn compare_frozen(
        &self,
        client: &mut imap_client::Client,
        source_uids: &[u32],
        mailbox: &imap_client::Mailbox,
        highest: u64,
    ) -> Result<()> {
        let folder = self.folder;
        let theirs = client.uid_fetch_state(source_uids, false).await?;
        let mut source_modseqs = HashMap::with_capacity(theirs.len());
        for m in &theirs {
            let modseq = m
                .modseq
                .ok_or_else(|| anyhow!("the owner gave no MODSEQ for UID {} in {folder}", m.uid))?;
            source_modseqs.insert(m.uid, modseq);
        }
        let view = self.on_store(|s, u, f| s.open_folder(u, f)).await?;
        let differing: Vec<(u32, u64)> = view
            .messages
            .iter()
            .filter_map(|m| {
                let want = source_modseqs.get(&m.uid).copied()?;
                (want != m.modseq).then_some((m.uid, want))
            })
            .collect();
        let view = if differing.is_empty() && view.status.highest_modseq == highest {
            view
        } else {
            self.on_store(move |s, u, f| {
                s.restore_modseqs(u, f, differing, highest)?;
                s.open_folder(u, f)
            })
            .await?
        };
        let ours: Vec<(u32, store::Flags, Vec<String>, u64)> = view
            .messages
            .into_iter()
            .map(|m| {
                let mut k = m.keywords;
                k.sort();
                (m.uid, m.flags, k, m.modseq)
            })
            .collect();
        let theirs: Vec<(u32, store::Flags, Vec<String>, u64)> = theirs
            .into_iter()
            .map(|m| {
                let (f, k) = store_flags(&m.flags);
                (m.uid, f, k, m.modseq.unwrap_or(0))
            })
            .collect();
        if ours != theirs || view.status.uidvalidity != mailbox.uid_validity {
            bail!("{folder} differs from the owner's after the delta");
        }
        if view.status.highest_modseq != highest {
            bail!(
                "{folder}: HIGHESTMODSEQ {} where the owner has {highest}",
                view.status.highest_modseq
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn imap_flags_become_store_flags_and_sorted_keywords() {
        let (flags, keywords) = store_flags(&[
            "\\Seen".into(),
            "zz".into(),
            "\\Flagged".into(),
            "$Junk".into(),
            "zz".into(),
            "\\Whatever".into(),
        ]);
        assert_eq!(flags, store::Flags::SEEN | store::Flags::FLAGGED);
        assert_eq!(keywords, vec!["$Junk".to_string(), "zz".to_string()]);
    }
}
