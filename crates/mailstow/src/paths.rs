//! Where the engines keep their files, resolved from the command line, the configuration
//! file or the default.

use std::path::PathBuf;

/// Where the engines keep their files, resolved from the flag, the config file or the default.
pub(crate) struct Paths {
    pub(crate) data_dir: PathBuf,
    /// `[directory] url`: the PostgreSQL directory; `None` = `directory.db` in the data dir.
    pub(crate) directory_url: Option<String>,
}

impl Paths {
    pub(crate) fn queue(&self) -> PathBuf {
        self.data_dir.join("queue")
    }
    pub(crate) fn store(&self) -> PathBuf {
        self.data_dir.join("store")
    }
    pub(crate) fn directory(&self) -> PathBuf {
        self.data_dir.join("directory.db")
    }
    /// Where the directory lives: `[directory] url` when set, else the SQLite file.
    pub(crate) fn directory_location(&self) -> anyhow::Result<directory::Location> {
        match &self.directory_url {
            Some(url) => Ok(directory::Location::parse(url)?),
            None => Ok(directory::Location::Sqlite(self.directory())),
        }
    }
}
