//! `mailstow domain|user|alias ...`: the directory (`<data_dir>/directory.db`). Safe to run
//! while the server runs: the server's cache notices the change within seconds. `user del`
//! goes through the running server (which closes the user's sessions and removes the mail),
//! or removes the mail itself when no server runs.

use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use clap::Subcommand;

use crate::Paths;
use crate::config::Config;
use server::admin::Request;

#[derive(Subcommand)]
pub(crate) enum DomainCommand {
    /// Add a local domain.
    Add { name: String },
    /// List local domains.
    List,
    /// Remove a domain (it must have no users or aliases left).
    Del { name: String },
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
    /// List users (of one domain, or all).
    List { domain: Option<String> },
    /// Remove a user and all of their mail (closing their sessions if the server runs); the
    /// address can be added again afterwards and starts empty.
    Del { address: String },
    /// Set a user's quota in bytes, or `none` for unlimited.
    Quota { address: String, bytes: String },
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

pub(crate) fn with_directory<T>(
    paths: &Paths,
    work: impl AsyncFnOnce(directory::Directory) -> Result<T>,
) -> Result<T> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let (result, changed) = runtime.block_on(async {
        let directory = directory::Directory::open(&paths.directory()).await?;
        let before = directory.cache().generation();
        let result = work(directory.clone()).await;
        anyhow::Ok((result, directory.cache().generation() != before))
    })?;
    if changed {
        // A running server reloads its copy of the directory now rather than at its next
        // poll; without one there is nothing to tell.
        if let Some(Err(message)) =
            server::admin::request(&paths.data_dir, &server::admin::Request::DirectoryChanged)
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
    let pending = d.pending_deletions().await?;
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
            } => {
                let password = password(password_file, literal)?;
                match d.add_user(&address, &password).await {
                    // Deleted while no server ran and its mail is still there: with no
                    // server to finish the removal, finish it here, then add.
                    Err(directory::DirectoryError::UserBeingDeleted(_))
                        if server::admin::request(&paths.data_dir, &Request::AuthBlocked)
                            .is_none() =>
                    {
                        finish_deletions_offline(&d, paths, config).await?;
                        d.add_user(&address, &password).await?;
                    }
                    other => other?,
                }
                out!("user added: {}", address.to_ascii_lowercase());
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
                for user in d.list_users(domain.as_deref()).await? {
                    match user.quota_bytes {
                        Some(q) => out!("{} quota={q}", user.address),
                        None => out!("{} quota=none", user.address),
                    }
                }
            }
            UserCommand::Del { address } => {
                // The running server closes the user's sessions and removes the mail.
                let request = Request::DeleteUser(address.clone());
                match server::admin::request(&paths.data_dir, &request) {
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
                                    server::admin::format_deleted(&user, &deleted).trim_end()
                                );
                            }
                        }
                    }
                }
            }
            UserCommand::Quota { address, bytes } => {
                let quota = if bytes.eq_ignore_ascii_case("none") {
                    None
                } else {
                    Some(bytes.parse::<u64>().with_context(|| {
                        format!("quota '{bytes}' is not a number of bytes or 'none'")
                    })?)
                };
                d.set_quota(&address, quota).await?;
                out!("quota set: {} {}", address.to_ascii_lowercase(), bytes);
            }
        }
        Ok(())
    })
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
