//! `mailstow domain|user|alias|node ...`: the directory (`<data_dir>/directory.db`, or the
//! PostgreSQL database of `[directory] url`). Safe to run
//! while the server runs: the server's cache notices the change within seconds. `user del`
//! and `user rename` go through the running server (which closes the user's sessions and
//! removes or moves the mail), and `user list` and `user show` ask it for what users hold;
//! with no server running they open the store themselves.

use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use clap::Subcommand;

use crate::config::Config;
use crate::paths::Paths;
use admin::Request;

#[derive(Subcommand)]
pub(crate) enum DomainCommand {
    /// Add a local domain.
    Add { name: String },
    /// List local domains.
    List,
    /// Remove a domain (it must have no users or aliases left).
    Del { name: String },
}

/// A switch's two positions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum OnOff {
    On,
    Off,
}

#[derive(Subcommand)]
pub(crate) enum UserCommand {
    /// Add a user (its domain must exist).
    Add {
        address: String,
        /// A file whose first line is the password; `-` reads it from standard input.
        #[arg(long, value_name = "FILE", conflicts_with = "password")]
        password_file: Option<PathBuf>,
        /// The password itself (visible to other local users in the process list: for tests).
        #[arg(long)]
        password: Option<String>,
        /// The cluster node holding the mailbox (default: the node with the fewest users,
        /// when there are nodes).
        #[arg(long, value_name = "NAME")]
        node: Option<String>,
        /// The user may use the web view's admin pages.
        #[arg(long)]
        admin: bool,
    },
    /// Allow or forbid a user the web view's admin pages (at the next request, on every
    /// node).
    Admin {
        address: String,
        #[arg(value_enum)]
        state: OnOff,
    },
    /// Change a user's password.
    Passwd {
        address: String,
        /// A file whose first line is the password; `-` reads it from standard input.
        #[arg(long, value_name = "FILE", conflicts_with = "password")]
        password_file: Option<PathBuf>,
        #[arg(long)]
        password: Option<String>,
    },
    /// Add many users from FILE: one `address password` per line (blank lines and `#` comments
    /// skipped); existing users are reported and skipped.
    Import { file: PathBuf },
    /// List users (of one domain, or all): messages and size held, quota, message quota,
    /// last login (recorded at most once a minute).
    List { domain: Option<String> },
    /// A user's quota, usage and last login, and every folder with its messages and size.
    Show { address: String },
    /// Rename a user, keeping its mail (same folders, UIDs and UIDVALIDITY), password,
    /// quotas, subscriptions and the aliases that name it. Closes its sessions if the server
    /// runs. NEW must be a new address in a local domain.
    Rename { old: String, new: String },
    /// Move a user's mailbox to another node of the cluster, online (docs/cluster.md,
    /// "Moving a user"): the target node copies it keeping UIDVALIDITY, UIDs, flags,
    /// keywords and internal dates, freezes the user briefly, ships the changes, and
    /// switches the owner. Waits until the directory shows the user on NODE.
    Move {
        address: String,
        /// The node to move the mailbox to.
        #[arg(long, value_name = "NODE")]
        to: String,
        /// Give up waiting after this many seconds (the move goes on).
        #[arg(long, value_name = "SECONDS", default_value_t = 3600)]
        wait: u64,
    },
    /// Remove a user and all of their mail (closing their sessions if the server runs); the
    /// address can be added again afterwards and starts empty.
    Del { address: String },
    /// Set a user's quota: SIZE in bytes or with a binary unit (`500M`, `2G`, `1.5G`; K, M, G
    /// and T are powers of 1024), or `none` for unlimited; `--messages N|none` sets the
    /// message-count quota. IMAP APPEND, COPY and MOVE and SMTP/LMTP RCPT check both.
    Quota {
        address: String,
        size: Option<String>,
        /// The most messages the user may hold, or `none`.
        #[arg(long, value_name = "N")]
        messages: Option<String>,
    },
}

#[derive(Subcommand)]
pub(crate) enum NodeCommand {
    /// Register a cluster node with the addresses the other nodes reach it at.
    Add {
        name: String,
        /// Its LMTP listener (`host:port`): mail handed over by the other nodes.
        #[arg(long, value_name = "ADDR")]
        lmtp: String,
        #[arg(long, value_name = "ADDR")]
        imap: String,
        #[arg(long, value_name = "ADDR")]
        pop3: String,
        #[arg(long, value_name = "ADDR")]
        web: Option<String>,
        /// Its ManageSieve listener (`[server] managesieve`), where the other nodes hand
        /// ManageSieve logins of its users.
        #[arg(long, value_name = "ADDR")]
        managesieve: Option<String>,
    },
    /// One line per node: `NAME up|down users=N` (up: its lease is current), then with
    /// replication ` replica=NAME|none lag=S` and ` host=NAME` while another machine serves it.
    List,
    /// Remove a node (refused while it owns users).
    Del { name: String },
    /// Before maintenance: the node stops acknowledging, hands every change to its replica
    /// partner, and the partner serves it (its process then stops). Started again, the node
    /// gets its files back and is handed back (docs/replication.md).
    Drain {
        name: String,
        /// Give up after this many seconds (the node goes on draining).
        #[arg(long, default_value_t = 120)]
        wait: u64,
    },
    /// On the node's machine, with an empty data directory (a new disk, a new machine):
    /// rebuild the node from the machine that serves it since a take-over, then serve it
    /// (`serve` after it does the same; this checks first and says why not).
    Replace { name: String },
}

#[derive(Subcommand)]
pub(crate) enum AliasCommand {
    /// Add an alias; SOURCE `@domain` is the domain's catch-all.
    Add { source: String, destination: String },
    /// List aliases.
    List,
    /// Remove an alias (one destination, or all of SOURCE's).
    Del {
        source: String,
        destination: Option<String>,
    },
}

fn password(file: Option<PathBuf>, literal: Option<String>) -> Result<String> {
    let password = match (file, literal) {
        // `-`: standard input, so a password need not touch the disk or the process list.
        (Some(path), None) if path.as_os_str() == "-" => {
            let mut line = String::new();
            std::io::stdin()
                .read_line(&mut line)
                .context("cannot read the password from standard input")?;
            line.trim_end_matches(['\r', '\n']).to_string()
        }
        (Some(path), None) => {
            let text = std::fs::read_to_string(&path)
                .with_context(|| format!("cannot read password file {}", path.display()))?;
            text.lines().next().unwrap_or("").to_string()
        }
        (None, Some(p)) => p,
        _ => bail!("give the password with --password-file FILE (or --password)"),
    };
    if password.is_empty() {
        bail!("the password is empty");
    }
    Ok(password)
}

/// A `user quota` size: bytes, or a number (decimals allowed) with a binary unit K, M, G or
/// T (optionally followed by `B` or `iB`, any case), as Dovecot reads them; `none` is
/// unlimited. Zero is refused: it would refuse all mail, and `none` is what is meant.
pub(crate) fn parse_size(text: &str) -> Result<Option<u64>> {
    let help = "expected a size such as 1048576, 500M, 2G or 1.5G (K, M, G, T are powers of \
                1024), or 'none'";
    let trimmed = text.trim();
    if trimmed.eq_ignore_ascii_case("none") {
        return Ok(None);
    }
    let lower = trimmed.to_ascii_lowercase();
    let number = lower
        .strip_suffix("ib")
        .or_else(|| lower.strip_suffix('b'))
        .unwrap_or(&lower);
    let (digits, shift) = match number.chars().last() {
        Some('k') => (&number[..number.len() - 1], 10),
        Some('m') => (&number[..number.len() - 1], 20),
        Some('g') => (&number[..number.len() - 1], 30),
        Some('t') => (&number[..number.len() - 1], 40),
        _ => (number, 0),
    };
    let valid = !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit() || b == b'.')
        && digits.bytes().filter(|&b| b == b'.').count() <= 1
        && digits != ".";
    if !valid {
        bail!("quota '{text}': {help}");
    }
    let bytes = if digits.contains('.') {
        let value: f64 = digits
            .parse()
            .with_context(|| format!("quota '{text}': {help}"))?;
        let bytes = (value * (1u64 << shift) as f64).round();
        if bytes >= u64::MAX as f64 {
            bail!("quota '{text}' is too large");
        }
        bytes as u64
    } else {
        digits
            .parse::<u64>()
            .ok()
            .and_then(|n| n.checked_mul(1u64 << shift))
            .with_context(|| format!("quota '{text}' is too large"))?
    };
    if bytes == 0 {
        bail!("quota '{text}' would refuse all mail; use 'none' for no limit");
    }
    Ok(Some(bytes))
}

/// A `user quota --messages` count, or `none`.
fn parse_messages(text: &str) -> Result<Option<u64>> {
    if text.trim().eq_ignore_ascii_case("none") {
        return Ok(None);
    }
    match text.trim().parse::<u64>() {
        Ok(0) => bail!("a message quota of 0 would refuse all mail; use 'none' for no limit"),
        Ok(n) => Ok(Some(n)),
        Err(_) => bail!("message quota '{text}': expected a number of messages or 'none'"),
    }
}

/// The store, opened here because no server runs (the caller holds the data directory's
/// lock); `None` when there is none yet.
fn open_store(paths: &Paths, config: &Config) -> Result<Option<std::sync::Arc<store::Store>>> {
    let store_dir = paths.store();
    if !store_dir.is_dir() {
        return Ok(None);
    }
    let disk: std::sync::Arc<dyn disk::Disk> = std::sync::Arc::new(disk::RealDisk);
    Ok(Some(
        store::Store::open(disk, &store_dir, config.store_config())?.0,
    ))
}

/// Sends `request` to the running server and prints its answer; false when none runs.
fn through_server(paths: &Paths, request: &Request) -> Result<bool> {
    match admin::request(&paths.data_dir, request) {
        Some(Ok(output)) => {
            use std::io::Write as _;
            std::io::stdout().write_all(&output)?;
            Ok(true)
        }
        Some(Err(message)) => bail!("{message}"),
        None => Ok(false),
    }
}

/// `user rename` with no server running: the data directory is locked first, so none can
/// start meanwhile; the same steps as the server's (intent, store, directory).
async fn rename_offline(
    d: &directory::Directory,
    paths: &Paths,
    config: &Config,
    old: &str,
    new: &str,
) -> Result<()> {
    let _lock = server::DataDirLock::acquire(&paths.data_dir)?;
    let (old, new) = d.begin_rename(old, new).await?;
    let moved = match open_store(paths, config)? {
        Some(store) => {
            let moved = store.rename_user(&old, &new);
            if moved.is_ok() {
                store.checkpoint()?;
            }
            moved
        }
        None => Ok(store::Usage::default()),
    };
    match moved {
        Ok(moved) => {
            d.finish_rename(&old, &new).await?;
            tracing::info!(
                event = "user_rename",
                user = old,
                new_user = new,
                folders = moved.folders,
                messages = moved.messages,
                bytes = moved.bytes
            );
            out!(
                "{}",
                admin::format::format_renamed(&old, &new, &moved).trim_end()
            );
            Ok(())
        }
        Err(e) => {
            d.abandon_rename(&old).await?;
            Err(anyhow::Error::from(e).context(format!("moving the mail of {old} to {new}")))
        }
    }
}

/// `user move`: the request goes into the directory, the target node does the move
/// (`cluster::moves`); we follow the user's row until it shows the user on `to` with a
/// higher epoch, or the target's `failed:` state.
async fn move_user(d: &directory::Directory, address: &str, to: &str, wait: u64) -> Result<()> {
    let (user, from, epoch) = d.request_move(address, to).await?;
    let from = from.unwrap_or_default();
    println!("{user}: move from {from} to {to} requested; waiting for {to}");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(wait);
    let mut shown = String::new();
    loop {
        let (node, now, state) = d.move_status(&user).await?;
        if node.as_deref() == Some(to) && now > epoch && state.is_none() {
            println!("{user}: moved to {to} (epoch {now})");
            return Ok(());
        }
        match state.as_deref() {
            Some(s) if s.starts_with(&format!("failed:{to}:")) => {
                let why = &s[format!("failed:{to}:").len()..];
                // The failure is reported; the user may be moved again.
                d.abort_move(&user).await?;
                bail!("moving {user} to {to} failed: {why}");
            }
            None => bail!(
                "the move of {user} was abandoned (it is on {})",
                node.unwrap_or_default()
            ),
            Some(s) if s != shown => {
                let what = if s.starts_with("frozen:") {
                    "frozen, shipping the last changes"
                } else {
                    "copying"
                };
                println!("{user}: {what}");
                shown = s.to_string();
            }
            Some(_) => {}
        }
        if std::time::Instant::now() >= deadline {
            bail!(
                "{user} is not on {to} after {wait} s (state {shown}); the move goes on: \
                 `mailstow user show {user}` tells when it is done"
            );
        }
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
}

pub(crate) fn with_directory<T>(
    paths: &Paths,
    work: impl AsyncFnOnce(directory::Directory) -> Result<T>,
) -> Result<T> {
    let options = directory::Options {
        password_length_min: paths.password_length_min,
        ..directory::Options::default()
    };
    with_directory_options(paths, options, work)
}

/// [`with_directory`] with the directory opened with `options`.
pub(crate) fn with_directory_options<T>(
    paths: &Paths,
    options: directory::Options,
    work: impl AsyncFnOnce(directory::Directory) -> Result<T>,
) -> Result<T> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let (result, changed) = runtime.block_on(async {
        let location = paths.directory_location()?;
        let directory = directory::Directory::open_at(&location, options).await?;
        let before = directory.cache().generation();
        let result = work(directory.clone()).await;
        anyhow::Ok((result, directory.cache().generation() != before))
    })?;
    if changed {
        // A running server reloads its copy of the directory now rather than at its next
        // poll; without one there is nothing to tell.
        if let Some(Err(message)) =
            admin::request(&paths.data_dir, &admin::Request::DirectoryChanged)
        {
            eprintln!(
                "mailstow: warning: the running server did not reload the directory: {message}"
            );
        }
    }
    result
}

pub(crate) fn domain(command: DomainCommand, paths: &Paths) -> Result<()> {
    with_directory(paths, async |d| {
        match command {
            DomainCommand::Add { name } => {
                d.add_domain(&name).await?;
                out!("domain added: {}", name.to_ascii_lowercase());
            }
            DomainCommand::List => {
                for name in d.list_domains().await? {
                    out!("{name}");
                }
            }
            DomainCommand::Del { name } => {
                d.del_domain(&name).await?;
                out!("domain removed: {}", name.to_ascii_lowercase());
            }
        }
        Ok(())
    })
}

/// Removes the mail of every user the directory lists as deleted, with no server running:
/// the data directory is locked first, so none can start meanwhile. Returns what each
/// removal freed.
async fn finish_deletions_offline(
    d: &directory::Directory,
    paths: &Paths,
    config: &Config,
) -> Result<Vec<(String, store::DeletedUser)>> {
    // A cluster node removes only its own users' mail (another node's is not in this store).
    let pending = match &config.cluster.node {
        Some(node) => d.pending_deletions_on(node).await?,
        None => d.pending_deletions().await?,
    };
    if pending.is_empty() {
        return Ok(Vec::new());
    }
    let _lock = server::DataDirLock::acquire(&paths.data_dir)?;
    let mut done = Vec::new();
    let store_dir = paths.store();
    let store = if store_dir.is_dir() {
        let disk: std::sync::Arc<dyn disk::Disk> = std::sync::Arc::new(disk::RealDisk);
        Some(store::Store::open(disk, &store_dir, config.store_config())?.0)
    } else {
        None
    };
    for user in pending {
        let deleted = match &store {
            Some(store) => store.delete_user(&user)?,
            None => store::DeletedUser::default(),
        };
        d.purged(&user).await?;
        done.push((user, deleted));
    }
    if let Some(store) = store {
        store.checkpoint()?;
    }
    Ok(done)
}

pub(crate) fn user(command: UserCommand, paths: &Paths, config: &Config) -> Result<()> {
    with_directory(paths, async |d| {
        match command {
            UserCommand::Add {
                address,
                password_file,
                password: literal,
                node,
                admin,
            } => {
                let password = password(password_file, literal)?;
                let node = node.as_deref();
                let added = match d.add_user_as(&address, &password, node, admin).await {
                    // Deleted while no server ran and its mail is still there: with no
                    // server to finish the removal, finish it here, then add.
                    Err(directory::DirectoryError::UserBeingDeleted(_))
                        if admin::request(&paths.data_dir, &Request::AuthBlocked).is_none() =>
                    {
                        finish_deletions_offline(&d, paths, config).await?;
                        d.add_user_as(&address, &password, node, admin).await?
                    }
                    other => other?,
                };
                let admin = if admin { " admin" } else { "" };
                match added {
                    Some(node) => out!(
                        "user added: {} node={node}{admin}",
                        address.to_ascii_lowercase()
                    ),
                    None => out!("user added: {}{admin}", address.to_ascii_lowercase()),
                }
            }
            UserCommand::Admin { address, state } => {
                let on = state == OnOff::On;
                let was = d.set_admin(&address, on).await?;
                let address = address.to_ascii_lowercase();
                match (was, on) {
                    (false, true) => out!("admin on: {address}"),
                    (true, false) => out!("admin off: {address}"),
                    (_, true) => out!("admin on: {address} (already)"),
                    (_, false) => out!("admin off: {address} (already)"),
                }
            }
            UserCommand::Passwd {
                address,
                password_file,
                password: literal,
            } => {
                d.set_password(&address, &password(password_file, literal)?)
                    .await?;
                out!("password changed: {}", address.to_ascii_lowercase());
            }
            UserCommand::Import { file } => {
                let text = std::fs::read_to_string(&file)
                    .with_context(|| format!("cannot read {}", file.display()))?;
                let (mut added, mut skipped) = (0usize, 0usize);
                for (n, line) in text.lines().enumerate() {
                    let line = line.trim();
                    if line.is_empty() || line.starts_with('#') {
                        continue;
                    }
                    let Some((address, password)) = line.split_once(char::is_whitespace) else {
                        bail!(
                            "{} line {}: expected 'address password'",
                            file.display(),
                            n + 1
                        );
                    };
                    match d.add_user(address, password.trim()).await {
                        Ok(()) => added += 1,
                        Err(e @ directory::DirectoryError::UserExists(_)) => {
                            eprintln!("skipped: {e}");
                            skipped += 1;
                        }
                        Err(e) => {
                            return Err(anyhow::anyhow!("{} line {}: {e}", file.display(), n + 1));
                        }
                    }
                }
                out!("users imported: {added} added, {skipped} already present");
            }
            UserCommand::List { domain } => {
                // Usage is in the store, which a running server owns.
                if !through_server(paths, &Request::UserList(domain.clone()))? {
                    let users = d.list_users(domain.as_deref()).await?;
                    let _lock = server::DataDirLock::acquire(&paths.data_dir)?;
                    let store = open_store(paths, config)?;
                    let text = admin::format::format_user_list(&users, store.as_deref());
                    out!("{}", text.trim_end());
                }
            }
            UserCommand::Show { address } => {
                if !through_server(paths, &Request::UserShow(address.clone()))? {
                    let Some(user) = d.user(&address).await? else {
                        bail!("no such user: {address}");
                    };
                    let _lock = server::DataDirLock::acquire(&paths.data_dir)?;
                    let store = open_store(paths, config)?;
                    let text = admin::format::format_user_show(&user, store.as_deref());
                    out!("{}", text.trim_end());
                }
            }
            UserCommand::Rename { old, new } => {
                let request = Request::RenameUser(old.clone(), new.clone());
                if !through_server(paths, &request)? {
                    rename_offline(&d, paths, config, &old, &new).await?;
                }
            }
            UserCommand::Move { address, to, wait } => {
                move_user(&d, &address, &to, wait).await?;
            }
            UserCommand::Del { address } => {
                // The running server closes the user's sessions and removes the mail.
                let request = Request::DeleteUser(address.clone());
                match admin::request(&paths.data_dir, &request) {
                    Some(Ok(output)) => {
                        use std::io::Write as _;
                        std::io::stdout().write_all(&output)?;
                    }
                    Some(Err(message)) => bail!("{message}"),
                    None => {
                        // No server: lock the data directory first, so none starts between
                        // the two steps.
                        let _lock = server::DataDirLock::acquire(&paths.data_dir)?;
                        let user = d.del_user(&address).await?;
                        drop(_lock);
                        for (removed, deleted) in
                            finish_deletions_offline(&d, paths, config).await?
                        {
                            if removed == user {
                                out!(
                                    "{}",
                                    admin::format::format_deleted(&user, &deleted, None).trim_end()
                                );
                            }
                        }
                    }
                }
            }
            UserCommand::Quota {
                address,
                size,
                messages,
            } => {
                if size.is_none() && messages.is_none() {
                    bail!("give a SIZE (500M, 2G, none) or --messages N|none, or both");
                }
                // Both parsed before either is set, so garbage changes nothing.
                let bytes = size.as_deref().map(parse_size).transpose()?;
                let count = messages.as_deref().map(parse_messages).transpose()?;
                let address = address.to_ascii_lowercase();
                if let Some(bytes) = bytes {
                    d.set_quota(&address, bytes).await?;
                    let shown = bytes.map_or("none".into(), admin::format::human_bytes);
                    out!("quota set: {address} {shown}");
                }
                if let Some(count) = count {
                    d.set_message_quota(&address, count).await?;
                    let shown = count.map_or("none".into(), |n| n.to_string());
                    out!("message quota set: {address} {shown}");
                }
            }
        }
        Ok(())
    })
}

pub(crate) fn node(command: NodeCommand, paths: &Paths) -> Result<()> {
    with_directory(paths, async |d| {
        match command {
            NodeCommand::Add {
                name,
                lmtp,
                imap,
                pop3,
                web,
                managesieve,
            } => {
                d.add_node(
                    &name,
                    &lmtp,
                    &imap,
                    &pop3,
                    web.as_deref(),
                    managesieve.as_deref(),
                )
                .await?;
                out!("node added: {name}");
            }
            NodeCommand::List => {
                let lags: std::collections::HashMap<String, Option<u64>> =
                    d.replica_lags().await?.into_iter().collect();
                for (node, users) in d.list_nodes().await? {
                    let state = if node.up { "up" } else { "down" };
                    // Replication (docs/replication.md): the node holding every change this
                    // one acknowledged, and how long the oldest change not on it has waited.
                    let replication = match (&node.replication, &node.replica) {
                        (None, _) => String::new(),
                        (Some(_), replica) => {
                            let lag = lags.get(&node.name).copied().flatten();
                            format!(
                                " replica={} lag={}",
                                replica.as_deref().unwrap_or("none"),
                                lag.map(|ms| format!("{:.1}s", ms as f64 / 1000.0))
                                    .unwrap_or_else(|| "-".into())
                            )
                        }
                    };
                    let host = node
                        .host
                        .as_ref()
                        .map(|h| format!(" host={h}"))
                        .unwrap_or_default();
                    out!("{} {state} users={users}{replication}{host}", node.name);
                }
            }
            NodeCommand::Del { name } => {
                d.remove_node(&name).await?;
                out!("node removed: {name}");
            }
            NodeCommand::Drain { name, wait } => drain(&d, &name, wait).await?,
            NodeCommand::Replace { .. } => {
                unreachable!("node replace runs the server: main.rs handles it")
            }
        }
        Ok(())
    })
}

/// One node's row, as `node list` reads it.
pub(crate) fn node_row(paths: &Paths, name: &str) -> Result<directory::NodeInfo> {
    let mut found = None;
    with_directory(paths, async |d| {
        found = d
            .list_nodes()
            .await?
            .into_iter()
            .map(|(n, _)| n)
            .find(|n| n.name == name);
        Ok(())
    })?;
    found.with_context(|| format!("no such node: {name}"))
}

/// `node drain`: asks the node to hand itself to its partner and follows until the partner
/// serves it, printing each stage.
async fn drain(d: &directory::Directory, name: &str, wait: u64) -> Result<()> {
    let row = |nodes: Vec<(directory::NodeInfo, u64)>| {
        nodes.into_iter().map(|(n, _)| n).find(|n| n.name == name)
    };
    let Some(node) = row(d.list_nodes().await?) else {
        anyhow::bail!("no such node: {name}");
    };
    if node.host.is_some() {
        anyhow::bail!(
            "{name} is served by {} already (epoch {})",
            node.host.unwrap_or_default(),
            node.epoch
        );
    }
    let Some(replica) = node.replica.clone() else {
        anyhow::bail!(
            "{name} has no replica in sync (node list: replica=none): draining would lose its \
             service; wait until its replica catches up"
        );
    };
    d.set_draining(name, true).await?;
    out!("draining {name}: its replica {replica} takes it over once it has every change");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(wait);
    loop {
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
        if let Some(now) = row(d.list_nodes().await?)
            && let Some(host) = now.host
        {
            out!("{name} drained: served by {host} (epoch {})", now.epoch);
            return Ok(());
        }
        if std::time::Instant::now() >= deadline {
            anyhow::bail!("{name} is still draining after {wait} s (its process must be running)");
        }
    }
}

pub(crate) fn alias(command: AliasCommand, paths: &Paths) -> Result<()> {
    with_directory(paths, async |d| {
        match command {
            AliasCommand::Add {
                source,
                destination,
            } => {
                d.add_alias(&source, &destination).await?;
                out!("alias added: {source} -> {destination}");
            }
            AliasCommand::List => {
                for (source, destination) in d.list_aliases().await? {
                    out!("{source} -> {destination}");
                }
            }
            AliasCommand::Del {
                source,
                destination,
            } => {
                d.del_alias(&source, destination.as_deref()).await?;
                out!("alias removed: {source}");
            }
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_take_binary_units() {
        let ok = |text: &str| parse_size(text).unwrap();
        assert_eq!(ok("none"), None);
        assert_eq!(ok("NONE"), None);
        assert_eq!(ok("1048576"), Some(1 << 20));
        assert_eq!(ok("512K"), Some(512 << 10));
        assert_eq!(ok("500M"), Some(500 << 20));
        assert_eq!(ok("500m"), Some(500 << 20));
        assert_eq!(ok("2G"), Some(2 << 30));
        assert_eq!(ok("2GB"), Some(2 << 30));
        assert_eq!(ok("2GiB"), Some(2 << 30));
        assert_eq!(ok("1.5G"), Some(3 << 29));
        assert_eq!(ok("1T"), Some(1 << 40));
        assert_eq!(ok(" 7 "), Some(7));
        assert_eq!(ok("100B"), Some(100));
        for garbage in [
            "", "M", "12X", "1.2.3G", ".", "-5M", "5 M", "1e9", "0", "0M", "0.0001K",
        ] {
            assert!(parse_size(garbage).is_err(), "{garbage:?} was taken");
        }
        assert!(parse_size("99999999999T").is_err());
        assert!(parse_size("18446744073709551616").is_err());
    }

    #[test]
    fn message_counts() {
        assert_eq!(parse_messages("none").unwrap(), None);
        assert_eq!(parse_messages("1000").unwrap(), Some(1000));
        assert!(parse_messages("0").is_err());
        assert!(parse_messages("10k").is_err());
    }
}
