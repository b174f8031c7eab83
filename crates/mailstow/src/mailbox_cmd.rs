//! `mailstow mailbox import|export`: a user's mail in from, or out to, a maildir tree or mbox
//! files (docs/migration.md).
//!
//! While a server runs it owns the store: the CLI sends the request (with the absolute path)
//! to its admin socket, the server does the file work and streams progress back. With no
//! server, the CLI takes the data directory's lock and does the same work itself; both run
//! `server::migrate`. A progress bar shows on a terminal; the summary goes to stdout,
//! problems (skipped messages, dropped keywords) to stderr.

use std::io::IsTerminal as _;
use std::path::{Path, PathBuf};

use admin::Request;
use admin::migrate::{Format, Guards, Note};
use anyhow::{Context as _, Result, bail};
use clap::{Subcommand, ValueEnum};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::config::Config;
use crate::paths::Paths;

#[derive(Subcommand)]
pub(crate) enum MailboxCommand {
    /// Import a maildir tree (Maildir++, with Dovecot's dovecot-uidlist and dovecot-keywords
    /// when present), an mbox file (into INBOX) or a directory of mbox files into a user's
    /// folders, keeping flags, keywords, internal dates, and UIDs where the source has them.
    Import {
        address: String,
        path: PathBuf,
        /// Deliver what goes to INBOX through the user's active Sieve script, as new mail
        /// (filed, flagged, discarded or sent on; its UIDs are not kept). Needs the running
        /// server.
        #[arg(long)]
        rules: bool,
    },
    /// Export every folder of a user as a Maildir++ tree or a directory of mbox files (PATH
    /// must not exist or be empty).
    Export {
        address: String,
        path: PathBuf,
        #[arg(long, value_enum)]
        format: FormatArg,
    },
}

#[derive(Clone, Copy, ValueEnum)]
pub(crate) enum FormatArg {
    Maildir,
    Mbox,
}

impl From<FormatArg> for Format {
    fn from(f: FormatArg) -> Format {
        match f {
            FormatArg::Maildir => Format::Maildir,
            FormatArg::Mbox => Format::Mbox,
        }
    }
}

/// The user's canonical address from the directory (which the CLI may read while the server
/// runs).
fn canonical_user(paths: &Paths, address: &str) -> Result<String> {
    let found = crate::directory_cmd::with_directory(paths, async |d| Ok(d.user(address).await?))?;
    match found {
        Some(info) => Ok(info.address),
        None => bail!("no such user: {address}"),
    }
}

/// A bar on stderr when it is a terminal, in bytes, with the message count beside it.
fn progress_bar() -> ProgressBar {
    let bar = ProgressBar::with_draw_target(Some(0), ProgressDrawTarget::stderr());
    if !std::io::stderr().is_terminal() {
        bar.set_draw_target(ProgressDrawTarget::hidden());
    }
    if let Ok(style) = ProgressStyle::with_template(
        "{msg} [{bar:40}] {bytes}/{total_bytes} {binary_bytes_per_sec} eta {eta}",
    ) {
        bar.set_style(style.progress_chars("=> "));
    }
    bar
}

fn show(bar: &ProgressBar, verb: &str, note: Note) {
    match note {
        Note::Progress {
            done,
            total,
            messages,
        } => {
            bar.set_length(total);
            bar.set_position(done);
            bar.set_message(format!("{verb} {messages} messages"));
        }
        Note::Problem(text) => bar.suspend(|| eprintln!("mailstow: warning: {text}")),
    }
}

/// A `progress`/`problem` line from the server as a [`Note`] (the wire form is
/// `admin::backup::Note`'s; a migration sends no steps).
fn parse_line(line: &str) -> Option<Note> {
    match admin::backup::Note::parse(line)? {
        admin::backup::Note::Progress {
            done,
            total,
            messages,
        } => Some(Note::Progress {
            done,
            total,
            messages,
        }),
        admin::backup::Note::Problem(text) => Some(Note::Problem(text)),
        admin::backup::Note::Step(_) => None,
    }
}

pub(crate) fn run(command: MailboxCommand, paths: &Paths, config: &Config) -> Result<()> {
    let (address, path, format, rules) = match &command {
        MailboxCommand::Import {
            address,
            path,
            rules,
        } => (address, path, None, *rules),
        MailboxCommand::Export {
            address,
            path,
            format,
        } => (address, path, Some(Format::from(*format)), false),
    };
    let path = std::path::absolute(path).with_context(|| format!("{}", path.display()))?;
    if path.to_str().is_none_or(|p| p.contains(['\n', '\r'])) {
        bail!("{}: the path must be UTF-8 on one line", path.display());
    }
    if format.is_none() && !path.exists() {
        bail!("{}: no such file or directory", path.display());
    }
    let user = canonical_user(paths, address)?;
    let verb = if format.is_some() {
        "exported"
    } else {
        "imported"
    };
    let request = match format {
        None => Request::Import {
            user: user.clone(),
            path: path.clone(),
            rules,
        },
        Some(format) => Request::Export {
            user: user.clone(),
            path: path.clone(),
            format,
        },
    };
    let bar = progress_bar();
    let online = admin::request_streaming(&paths.data_dir, &request, &mut |line| {
        if let Some(note) = parse_line(line) {
            show(&bar, verb, note);
        }
    });
    let summary = match online {
        Some(answer) => {
            bar.finish_and_clear();
            answer.map_err(|message| anyhow::anyhow!("{message}"))?
        }
        None if rules => {
            bar.finish_and_clear();
            bail!(
                "--rules needs the running server (the rules send their mail through its queue); \
                 start it, or import without --rules"
            );
        }
        None => {
            let result = offline(paths, config, &user, &path, format, &mut |note| {
                show(&bar, verb, note)
            });
            bar.finish_and_clear();
            result?
        }
    };
    out!("{user}: {verb} {summary}");
    Ok(())
}

/// The work done here, on the store opened with the data directory's lock.
fn offline(
    paths: &Paths,
    config: &Config,
    user: &str,
    path: &Path,
    format: Option<Format>,
    note: &mut dyn FnMut(Note),
) -> Result<String> {
    let _lock = crate::store_cmd::exclusive(paths, "mailbox import/export")?;
    // The event=import/export line goes where the server's log would.
    let _logging = crate::logging::init(
        config.log.level.as_deref().unwrap_or("info"),
        config.log.file.as_deref(),
    )?;
    let store = crate::store_cmd::open(paths, config, false)?;
    let guards = Guards::default();
    let summary = match format {
        None => admin::migrate::import(&store, user, path, &guards, note)?,
        Some(format) => admin::migrate::export(&store, user, path, format, &guards, note)?,
    };
    drop(store);
    Ok(summary.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_lines_parse() {
        assert_eq!(
            parse_line("progress 10 20 3"),
            Some(Note::Progress {
                done: 10,
                total: 20,
                messages: 3
            })
        );
        assert_eq!(parse_line("problem a b"), Some(Note::Problem("a b".into())));
        assert_eq!(parse_line("progress 1 2"), None);
        assert_eq!(parse_line("other"), None);
    }
}
