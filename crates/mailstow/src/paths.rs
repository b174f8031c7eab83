//! Where the engines keep their files, resolved from the command line, the configuration
//! file or the default.

use std::path::{Path, PathBuf};

/// Where the engines keep their files, resolved from the flag, the config file or the default.
pub(crate) struct Paths {
    pub(crate) data_dir: PathBuf,
    /// `[directory] url`: the PostgreSQL directory; `None` = `directory.db` in the data dir.
    pub(crate) directory_url: Option<String>,
    /// `[server] password_length_min`: the shortest new password the directory accepts.
    pub(crate) password_length_min: usize,
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

impl Paths {
    /// Refuses, in one line, a data directory (or its SQLite directory) this user cannot
    /// write: SQLite would otherwise answer with a timeout or `attempt to write a readonly
    /// database`, saying nothing about permissions.
    pub(crate) fn check_writable(&self) -> anyhow::Result<()> {
        let mut paths = vec![self.data_dir.clone()];
        if self.directory_url.is_none() && self.directory().exists() {
            paths.push(self.directory());
        }
        for path in paths {
            if !writable(&path) {
                let shown = std::path::absolute(&path).unwrap_or(path);
                anyhow::bail!(
                    "cannot write {}: permission denied (run as the user that owns the data \
                     directory, e.g. sudo -u mailstow ...)",
                    shown.display()
                );
            }
        }
        Ok(())
    }
}

/// Whether this process (its effective user and groups) may write `path`.
#[allow(unsafe_code)]
fn writable(path: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt as _;
    let Ok(c_path) = std::ffi::CString::new(path.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: `c_path` is a valid NUL-terminated string that outlives the call; faccessat
    // only reads it.
    let answer = unsafe {
        libc::faccessat(
            libc::AT_FDCWD,
            c_path.as_ptr(),
            libc::W_OK,
            libc::AT_EACCESS,
        )
    };
    answer == 0
}
