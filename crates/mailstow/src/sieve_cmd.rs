//! `mailstow sieve list|get|put|activate|deactivate|delete|check USER ...`: users' Sieve
//! scripts in the directory, as ManageSieve (RFC 5804) keeps them. Safe while the server
//! runs: the server's cache takes the change within seconds, and the next delivery runs the
//! new script. A script is compiled before it is stored: a script that does not compile is
//! refused with its line and column.

use std::io::Read as _;
use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use clap::Subcommand;

use crate::config::Config;
use crate::directory_cmd::with_directory_options;
use crate::paths::Paths;

#[derive(Subcommand)]
pub(crate) enum SieveCommand {
    /// A user's scripts: name, size in bytes, and which one is active.
    List { user: String },
    /// Print a script.
    Get { user: String, name: String },
    /// Store a script from FILE (`-` or none: standard input), replacing one of the same
    /// name; refused if it does not compile.
    Put {
        user: String,
        name: String,
        file: Option<PathBuf>,
        /// Make it the active script too.
        #[arg(long)]
        activate: bool,
    },
    /// Make a script the one that runs on the user's mail.
    Activate { user: String, name: String },
    /// Run no script on the user's mail.
    Deactivate { user: String },
    /// Delete a script (not the active one).
    Delete { user: String, name: String },
    /// Compile FILE (`-`: standard input) as USER's script and report errors with line and
    /// column; with no FILE, compile every script USER has.
    Check { user: String, file: Option<PathBuf> },
}

/// The bounds a script is compiled with: `[server] sieve_*_max`, as the server uses them.
fn limits(config: &Config) -> sieve::Limits {
    let section = &config.server;
    let mut limits = sieve::Limits::default();
    if let Some(v) = section.sieve_script_bytes_max {
        limits.script_bytes_max = v;
    }
    if let Some(v) = section.sieve_instructions_max {
        limits.instructions_max = v;
    }
    if let Some(v) = section.sieve_header_edits_max {
        limits.header_edits_max = v;
    }
    if let Some(v) = section.sieve_redirects_max {
        limits.redirects_max = v;
    }
    if let Some(v) = section.sieve_include_depth_max {
        limits.include_depth_max = v;
    }
    limits
}

fn read_source(file: Option<&PathBuf>, limits: &sieve::Limits) -> Result<String> {
    let mut bytes = Vec::new();
    // One byte more than allowed tells "too large" apart from "exactly the limit".
    let cap = limits.script_bytes_max as u64 + 1;
    match file {
        None => {
            std::io::stdin()
                .take(cap)
                .read_to_end(&mut bytes)
                .context("reading the script from standard input")?;
        }
        Some(path) if path.as_os_str() == "-" => {
            std::io::stdin()
                .take(cap)
                .read_to_end(&mut bytes)
                .context("reading the script from standard input")?;
        }
        Some(path) => {
            std::fs::File::open(path)
                .and_then(|f| f.take(cap).read_to_end(&mut bytes))
                .with_context(|| format!("reading {}", path.display()))?;
        }
    }
    if bytes.len() > limits.script_bytes_max {
        bail!(
            "the script is larger than sieve_script_bytes_max ({} bytes)",
            limits.script_bytes_max
        );
    }
    String::from_utf8(bytes).context("the script is not UTF-8 (RFC 5228 2.2)")
}

pub(crate) fn run(command: SieveCommand, paths: &Paths, config: &Config) -> Result<()> {
    let limits = limits(config);
    let options = directory::Options {
        password_length_min: paths.password_length_min,
        sieve_scripts_max: config
            .server
            .sieve_scripts_max
            .unwrap_or(directory::Options::default().sieve_scripts_max),
        sieve_script_bytes_max: limits.script_bytes_max,
        ..directory::Options::default()
    };
    match command {
        SieveCommand::List { user } => with_directory_options(paths, options, async |d| {
            for script in d.sieve_list(&user).await? {
                println!(
                    "{}\t{}\t{}",
                    script.name,
                    script.bytes,
                    if script.active { "active" } else { "-" }
                );
            }
            Ok(())
        }),
        SieveCommand::Get { user, name } => with_directory_options(paths, options, async |d| {
            let source = d.sieve_get(&user, &name).await?;
            print!("{source}");
            if !source.ends_with('\n') {
                println!();
            }
            Ok(())
        }),
        SieveCommand::Put {
            user,
            name,
            file,
            activate,
        } => {
            let source = read_source(file.as_ref(), &limits)?;
            sieve::compile(&source, &limits).map_err(|e| anyhow::anyhow!("{name}: {e}"))?;
            with_directory_options(paths, options, async |d| {
                d.sieve_put(&user, &name, &source).await?;
                if activate {
                    d.sieve_activate(&user, Some(&name)).await?;
                }
                println!(
                    "stored {name} for {user} ({} bytes){}",
                    source.len(),
                    if activate { ", active" } else { "" }
                );
                Ok(())
            })
        }
        SieveCommand::Activate { user, name } => {
            with_directory_options(paths, options, async |d| {
                // A stored script that no longer compiles (stricter limits since) is not
                // made active: every message would be kept in INBOX with an error.
                let source = d.sieve_get(&user, &name).await?;
                sieve::compile(&source, &limits).map_err(|e| anyhow::anyhow!("{name}: {e}"))?;
                d.sieve_activate(&user, Some(&name)).await?;
                println!("{name} is active for {user}");
                Ok(())
            })
        }
        SieveCommand::Deactivate { user } => with_directory_options(paths, options, async |d| {
            d.sieve_activate(&user, None).await?;
            println!("no script is active for {user}");
            Ok(())
        }),
        SieveCommand::Delete { user, name } => with_directory_options(paths, options, async |d| {
            d.sieve_delete(&user, &name).await?;
            println!("deleted {name} of {user}");
            Ok(())
        }),
        SieveCommand::Check { user, file } => match file {
            Some(file) => {
                let source = read_source(Some(&file), &limits)?;
                sieve::compile(&source, &limits)
                    .map_err(|e| anyhow::anyhow!("{}: {e}", file.display()))?;
                println!("{}: ok", file.display());
                Ok(())
            }
            None => with_directory_options(paths, options, async |d| {
                let mut failed = 0;
                for script in d.sieve_list(&user).await? {
                    let source = d.sieve_get(&user, &script.name).await?;
                    match sieve::compile(&source, &limits) {
                        Ok(_) => println!("{}: ok", script.name),
                        Err(e) => {
                            failed += 1;
                            println!("{}: {e}", script.name);
                        }
                    }
                }
                if failed > 0 {
                    bail!("{failed} of {user}'s scripts do not compile");
                }
                Ok(())
            }),
        },
    }
}
