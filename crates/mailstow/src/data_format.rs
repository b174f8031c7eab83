//! `<data_dir>/FORMAT`: the format of the data directory as a whole, one line
//! (`mailstow data directory format 1`). Every file in the directory carries its own version
//! too (docs/storage.md, "Format versions"); this one lets a build refuse a newer directory
//! before it opens, removes or recovers anything in it, including files that have no
//! version of their own.
//!
//! The rule: a build that changes any file of the directory in a way an older build cannot
//! read raises [`FORMAT`], and writes the new `FORMAT` before the first file it converts,
//! so an upgrade cut short is refused by the older build too. A directory without the file
//! was written before it existed (format 1); `init` and `serve` write it.

use std::io::Write as _;
use std::path::Path;

use anyhow::{Context as _, bail};

/// The data directory format this build reads and writes.
pub(crate) const FORMAT: u32 = 1;

const NAME: &str = "FORMAT";
const PREFIX: &str = "mailstow data directory format ";

/// Refuses a data directory of a newer format (or a `FORMAT` file this build cannot read).
/// A directory without the file is format 1.
pub(crate) fn check(data_dir: &Path) -> anyhow::Result<()> {
    let path = data_dir.join(NAME);
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    };
    let found = text
        .strip_prefix(PREFIX)
        .and_then(|rest| rest.trim_end().parse::<u32>().ok());
    match found {
        Some(found) if found <= FORMAT => Ok(()),
        Some(found) => bail!(
            "{} was written by a newer mailstow (data directory format {found}); this build \
             reads up to format {FORMAT}: run the newer mailstow, or restore the backup taken \
             before the upgrade (docs/operations.md)",
            data_dir.display()
        ),
        None => bail!(
            "{} does not read as `{PREFIX}N`: a newer mailstow's, or damaged; this build \
             reads up to format {FORMAT}",
            path.display()
        ),
    }
}

/// Writes `FORMAT` if it is missing: a `.tmp` file, synced, renamed into place, the
/// directory synced, so a crash leaves no file or the whole one. Called once the engines
/// have opened the directory (so the file never claims a directory this build could not
/// read).
pub(crate) fn record(data_dir: &Path) -> anyhow::Result<()> {
    let path = data_dir.join(NAME);
    if path.exists() {
        return Ok(());
    }
    let tmp = data_dir.join(format!("{NAME}.tmp"));
    let write = || -> std::io::Result<()> {
        let mut file = std::fs::File::create(&tmp)?;
        file.write_all(format!("{PREFIX}{FORMAT}\n").as_bytes())?;
        file.sync_all()?;
        std::fs::rename(&tmp, &path)?;
        std::fs::File::open(data_dir)?.sync_all()
    };
    write().with_context(|| format!("writing {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn written_once_then_read_and_a_newer_one_refused() {
        let dir = tempfile::tempdir().unwrap();
        check(dir.path()).unwrap();
        record(dir.path()).unwrap();
        let path = dir.path().join(NAME);
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "mailstow data directory format 1\n"
        );
        assert!(!dir.path().join("FORMAT.tmp").exists());
        check(dir.path()).unwrap();

        std::fs::write(&path, "mailstow data directory format 2\n").unwrap();
        record(dir.path()).unwrap();
        let err = check(dir.path()).unwrap_err().to_string();
        assert!(
            err.contains("written by a newer mailstow (data directory format 2); this build reads up to format 1"),
            "{err}"
        );
        // `record` never overwrites what is there.
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "mailstow data directory format 2\n"
        );

        std::fs::write(&path, "something else\n").unwrap();
        let err = check(dir.path()).unwrap_err().to_string();
        assert!(err.contains("does not read as"), "{err}");
    }
}
