//! `mailstow acme status|renew` (docs/certificates.md): the certificate ACME keeps in
//! `<data_dir>/acme`, read from the files (the server need not run), and a renewal now,
//! through the running server's admin socket (it answers the challenges and puts the new
//! certificate in force for every listener).

use std::time::{SystemTime, UNIX_EPOCH};

use admin::Request;
use anyhow::{Context as _, Result, bail};
use clap::Subcommand;

use crate::paths::Paths;

#[derive(Subcommand)]
pub(crate) enum AcmeCommand {
    /// The certificate's names, end and days left, the last attempt and error, and the next
    /// attempt: one `key: value` line each.
    Status,
    /// Order the certificate now and put it in force (needs the running server).
    Renew,
}

fn unix(time: Option<SystemTime>) -> String {
    time.and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map_or_else(|| "-".to_string(), |d| d.as_secs().to_string())
}

pub(crate) fn run(command: AcmeCommand, paths: &Paths) -> Result<()> {
    match command {
        AcmeCommand::Status => {
            let dir = paths.data_dir.join("acme");
            let status = acme::status(&dir, SystemTime::now())
                .with_context(|| format!("reading {}", dir.display()))?;
            let names = if status.names.is_empty() {
                "-".to_string()
            } else {
                status.names.join(",")
            };
            out!("names: {names}");
            out!("not_after: {}", unix(status.not_after));
            out!(
                "days_left: {}",
                status
                    .days_left
                    .map_or_else(|| "-".to_string(), |d| d.to_string())
            );
            out!("last_attempt: {}", unix(status.last_attempt));
            out!(
                "last_error: {}",
                status
                    .last_error
                    .as_deref()
                    .map_or_else(|| "-".to_string(), |e| e.replace(['\n', '\r'], " "))
            );
            out!("failures: {}", status.consecutive_failures);
            out!("next_attempt: {}", unix(status.next_attempt));
            Ok(())
        }
        AcmeCommand::Renew => match admin::request(&paths.data_dir, &Request::AcmeRenew) {
            Some(Ok(output)) => {
                use std::io::Write as _;
                std::io::stdout().write_all(&output)?;
                Ok(())
            }
            Some(Err(message)) => bail!("{message}"),
            None => bail!(
                "no server running in {}: start it; it obtains the certificate itself",
                paths.data_dir.display()
            ),
        },
    }
}
