//! `mailstow config check`: reads the configuration file as `serve` would, checks what
//! `serve` would refuse (unknown keys, bad addresses, contradicting limits, a certificate
//! that does not load), and prints the effective configuration: every key, defaults
//! included, in the file's own syntax.

use anyhow::Result;
use clap::Subcommand;

use crate::config::Config;
use crate::paths::Paths;

#[derive(Subcommand)]
pub(crate) enum ConfigCommand {
    /// Validate the file given with --config (or the defaults) and print the effective
    /// configuration.
    Check(crate::serve_cmd::ServeArgs),
}

pub(crate) fn run(
    command: ConfigCommand,
    file: Option<&std::path::Path>,
    paths: &Paths,
    config: &Config,
) -> Result<()> {
    match command {
        ConfigCommand::Check(args) => {
            let server = crate::serve_cmd::server_config(&args, paths, config)?;
            server::validate(&server)?;
            if let Some(level) = &config.log.level {
                crate::logging::filter(level)?;
            }
            let effective = config.effective(&paths.data_dir, &server);
            let text = toml::to_string(&effective)
                .map_err(|e| anyhow::anyhow!("printing the configuration: {e}"))?;
            match file {
                Some(path) => out!("# {}: ok; the effective configuration:", path.display()),
                None => out!("# no --config: the embedded defaults:"),
            }
            out!("{}", text.trim_end());
            Ok(())
        }
    }
}
