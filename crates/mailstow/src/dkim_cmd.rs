//! `mailstow dkim generate|list|del`: DKIM keys of our domains, kept in the directory (so
//! every server on it signs with them, and a running server picks up a change within
//! seconds). The newest key of a domain signs the mail our users submit from it.

use anyhow::{Context, Result};
use clap::Subcommand;
use sender_auth::Algorithm;

use crate::directory_cmd::with_directory;
use crate::paths::Paths;

#[derive(Subcommand)]
pub(crate) enum DkimCommand {
    /// Make a key for DOMAIN, store it, and print the DNS TXT record to publish. From now on
    /// it signs the mail submitted from DOMAIN.
    Generate {
        domain: String,
        /// The selector: the record lives at SELECTOR._domainkey.DOMAIN (default: `ms` and
        /// the year and month, so each rotation gets a new one).
        #[arg(long)]
        selector: Option<String>,
        /// `ed25519` (RFC 8463; small records) or `rsa` (2048 bits; what every verifier knows).
        #[arg(long, default_value = "ed25519")]
        algorithm: String,
    },
    /// Every key: `DOMAIN SELECTOR ALGORITHM signing|retired RECORD`.
    List,
    /// Delete a key (unpublish its record afterwards, once mail signed with it is delivered).
    Del { domain: String, selector: String },
}

/// The record as a zone-file line: character strings of at most 255 bytes (RFC 1035 3.3.14;
/// an RSA record is longer than one).
fn zone_line(name: &str, record: &str) -> String {
    let strings: Vec<String> = record
        .as_bytes()
        .chunks(255)
        .map(|chunk| format!("\"{}\"", String::from_utf8_lossy(chunk)))
        .collect();
    format!("{name}. 3600 IN TXT {}", strings.join(" "))
}

/// `ms` and the year and month: each rotation gets a new selector.
pub(crate) fn default_selector() -> String {
    chrono::Utc::now().format("ms%Y%m").to_string()
}

/// Makes a key for `domain` under `selector` and stores it in the directory (from now on it
/// signs the mail submitted from `domain`); its public key, base64.
pub(crate) async fn add_key(
    d: &directory::Directory,
    domain: &str,
    selector: &str,
    algorithm: Algorithm,
) -> Result<String> {
    let key = sender_auth::generate(algorithm)?;
    d.add_dkim_key(&directory::DkimKey {
        domain: domain.to_string(),
        selector: selector.to_string(),
        algorithm: algorithm.name().to_string(),
        private_key: key.private_key_pem.clone(),
        public_key: key.public_key_b64.clone(),
        created_at: chrono::Utc::now().timestamp(),
    })
    .await
    .with_context(|| format!("storing the DKIM key of {domain}"))?;
    Ok(key.public_key_b64)
}

pub(crate) fn run(command: DkimCommand, paths: &Paths) -> Result<()> {
    with_directory(paths, async |d| {
        match command {
            DkimCommand::Generate {
                domain,
                selector,
                algorithm,
            } => {
                let algorithm: Algorithm = algorithm.parse()?;
                let selector = selector.unwrap_or_else(default_selector);
                let public_key = add_key(&d, &domain, &selector, algorithm).await?;
                let name = format!(
                    "{}._domainkey.{}",
                    selector.to_ascii_lowercase(),
                    domain.to_ascii_lowercase()
                );
                let record = sender_auth::dns_record(algorithm, &public_key);
                out!("dkim key added: {name} ({algorithm})");
                out!("name: {name}");
                out!("record: {record}");
                out!("zone: {}", zone_line(&name, &record));
            }
            DkimCommand::List => {
                let keys = d.dkim_keys().await?;
                let mut last_domain = String::new();
                for key in keys {
                    // Newest first within a domain: the first one listed signs.
                    let state = if key.domain == last_domain {
                        "retired"
                    } else {
                        "signing"
                    };
                    let record = match key.algorithm.parse::<Algorithm>() {
                        Ok(algorithm) => sender_auth::dns_record(algorithm, &key.public_key),
                        Err(_) => format!("(unknown algorithm {})", key.algorithm),
                    };
                    out!(
                        "{} {} {} {state} {record}",
                        key.domain,
                        key.selector,
                        key.algorithm
                    );
                    last_domain = key.domain;
                }
            }
            DkimCommand::Del { domain, selector } => {
                d.del_dkim_key(&domain, &selector).await?;
                out!(
                    "dkim key removed: {}._domainkey.{}",
                    selector.to_ascii_lowercase(),
                    domain.to_ascii_lowercase()
                );
            }
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_records_are_split_into_255_byte_strings() {
        let record = "x".repeat(600);
        let line = zone_line("s._domainkey.example.org", &record);
        assert_eq!(line.matches('"').count(), 6);
        assert!(line.starts_with("s._domainkey.example.org. 3600 IN TXT \""));
        let selector = default_selector();
        assert!(
            selector.starts_with("ms20") && selector.len() == 8,
            "{selector}"
        );
    }
}
