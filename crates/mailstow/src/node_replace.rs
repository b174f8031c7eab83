//! `mailstow node replace NAME`: rebuilds a node on a new disk or machine from the machine
//! that serves it since a take-over (docs/replication.md, "Failover"), then serves it.
//!
//! It checks what `serve` would find and says why it cannot go on, then runs `serve`, whose
//! start makes the machine the node's standby: it receives the node's files, the serving
//! machine hands the node back once they are complete, and the node is served from here.

use std::path::PathBuf;

use anyhow::{Context, Result, bail};

use crate::config::Config;
use crate::paths::Paths;
use crate::serve_cmd;

pub(crate) fn run(
    name: &str,
    paths: &Paths,
    config: &Config,
    config_file: Option<PathBuf>,
    data_dir_flag: Option<PathBuf>,
) -> Result<()> {
    if config.cluster.node.as_deref() != Some(name) {
        bail!(
            "this machine's configuration is for node {}, not {name}: [cluster] node must name \
             the node it rebuilds",
            config.cluster.node.as_deref().unwrap_or("(none)")
        );
    }
    if config.cluster.replicas.unwrap_or(1) < 2 || config.cluster.replication.is_none() {
        bail!(
            "[cluster] replicas = 2 and replication = \"host:port\" are needed to receive the node"
        );
    }
    // The engines' files must not be here: they would be older than the copy.
    for file in ["queue", "store", "cluster-delivered"] {
        let path = paths.data_dir.join(file);
        let empty = match std::fs::read_dir(&path) {
            Ok(mut entries) => entries.next().is_none(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => true,
            Err(e) if e.kind() == std::io::ErrorKind::NotADirectory => false,
            Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
        };
        if !empty {
            bail!(
                "{} is not empty: node replace starts from an empty data directory (move the old \
                 files away first)",
                path.display()
            );
        }
    }
    let node = crate::directory_cmd::node_row(paths, name)?;
    match (&node.host, node.up) {
        (Some(host), _) => {
            println!(
                "replacing {name}: {host} serves it since epoch {}; receiving its files",
                node.epoch
            );
        }
        (None, true) => bail!(
            "{name} is up on its own machine: drain it first (`mailstow node drain {name}`), or \
             stop it and wait for its replica to take it over"
        ),
        (None, false) => bail!(
            "{name} is down and not taken over yet: its replica takes it over once its lease \
             has lapsed (a few seconds) if it has every change (node list: replica=...); run \
             this again then. Without a replica in sync its mail is only on its old disk."
        ),
    }
    serve_cmd::run(
        serve_cmd::ServeArgs::default(),
        serve_cmd::Sources {
            config_file,
            data_dir_flag,
        },
        paths,
        config,
    )
}
