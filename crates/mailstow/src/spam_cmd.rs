//! `mailstow spam train|stats|release|set`: the spam filter's models and limits
//! (docs/spam.md). Training and the limits go through the running server's admin socket;
//! thresholds are directory rows, set with or without a server.

use admin::Request;
use anyhow::{Result, bail};
use clap::Subcommand;

use crate::paths::Paths;

#[derive(Subcommand)]
pub(crate) enum SpamCommand {
    /// Train USER's classifier on every message of MAILBOX (one of USER's folders) as spam
    /// or as ham; `--site` trains the site-wide model new users start from instead.
    Train {
        user: String,
        #[arg(long, conflicts_with = "ham", required_unless_present = "ham")]
        spam: bool,
        #[arg(long)]
        ham: bool,
        #[arg(long)]
        site: bool,
        mailbox: String,
    },
    /// What USER's classifier and reputation hold (`@site`: the site-wide model), its
    /// thresholds, and whether its outbound mail is limited.
    Stats { user: String },
    /// End USER's outbound limit (an account that sent spam) on the running server.
    Release { user: String },
    /// Thresholds for a domain or a user, over `[spam]`'s (a user's over its domain's);
    /// none given: back to the defaults.
    Set {
        #[arg(value_name = "DOMAIN|USER")]
        target: String,
        #[arg(long)]
        junk: Option<f64>,
        #[arg(long)]
        reject: Option<f64>,
        #[arg(long)]
        greylist: Option<f64>,
    },
}

pub(crate) fn run(command: SpamCommand, paths: &Paths) -> Result<()> {
    let request = match command {
        SpamCommand::Set {
            target,
            junk,
            reject,
            greylist,
        } => return set(paths, &target, junk, reject, greylist),
        SpamCommand::Train {
            user,
            spam,
            ham: _,
            site,
            mailbox,
        } => {
            if mailbox.contains(['\t', '\r', '\n']) || user.contains(['\t', '\r', '\n']) {
                bail!("a folder or user name with a tab or line end cannot be named here");
            }
            Request::SpamTrain {
                user,
                spam,
                mailbox,
                site,
            }
        }
        SpamCommand::Stats { user } => Request::SpamStats(user),
        SpamCommand::Release { user } => Request::SpamRelease(user),
    };
    match admin::request(&paths.data_dir, &request) {
        Some(Ok(output)) => {
            use std::io::Write as _;
            std::io::stdout().write_all(&output)?;
            Ok(())
        }
        Some(Err(message)) => bail!("{message}"),
        None => bail!(
            "no server running in {}: start it (mailstow serve); the spam filter's models are trained and read by the server",
            paths.data_dir.display()
        ),
    }
}

fn set(
    paths: &Paths,
    target: &str,
    junk: Option<f64>,
    reject: Option<f64>,
    greylist: Option<f64>,
) -> Result<()> {
    for (name, value) in [("junk", junk), ("reject", reject), ("greylist", greylist)] {
        if value.is_some_and(|v| !v.is_finite()) {
            bail!("--{name} must be a number");
        }
    }
    let thresholds = directory::SpamThresholds {
        junk,
        reject,
        greylist,
    };
    crate::directory_cmd::with_directory(paths, async |directory| {
        directory.spam_thresholds_set(target, thresholds).await?;
        Ok(())
    })?;
    if junk.is_none() && reject.is_none() && greylist.is_none() {
        out!("{target}: thresholds back to the defaults");
    } else {
        out!(
            "{target}: junk {}, reject {}, greylist {}",
            shown(junk),
            shown(reject),
            shown(greylist)
        );
    }
    Ok(())
}

fn shown(value: Option<f64>) -> String {
    value.map_or_else(|| "default".to_string(), |v| format!("{v:.1}"))
}
