//! `mailstow auth blocked|unblock`: the running server's failed-login blocks, through its
//! admin socket (they live in the server's memory; with no server running nothing is
//! blocked).

use admin::Request;
use anyhow::{Result, bail};
use clap::Subcommand;

use crate::paths::Paths;

#[derive(Subcommand)]
pub(crate) enum AuthCommand {
    /// Every block in force: `user NAME from ADDRESS`, `address ADDRESS` or `network NET`,
    /// with its failures and when it lifts; then a count.
    Blocked,
    /// Clear the failures of an address (with its network) or of a user (at every address).
    Unblock {
        #[arg(value_name = "ADDRESS|USER")]
        what: String,
    },
}

pub(crate) fn run(command: AuthCommand, paths: &Paths) -> Result<()> {
    let request = match command {
        AuthCommand::Blocked => Request::AuthBlocked,
        AuthCommand::Unblock { what } => Request::AuthUnblock(what),
    };
    match admin::request(&paths.data_dir, &request) {
        Some(Ok(output)) => {
            use std::io::Write as _;
            std::io::stdout().write_all(&output)?;
            Ok(())
        }
        Some(Err(message)) => bail!("{message}"),
        None => match request {
            Request::AuthBlocked => {
                out!(
                    "no server running in {}: 0 blocked",
                    paths.data_dir.display()
                );
                Ok(())
            }
            _ => bail!(
                "no server running in {}: there are no blocks to clear",
                paths.data_dir.display()
            ),
        },
    }
}
