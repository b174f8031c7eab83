//! The one way local state becomes durable (invariant M6): write a temporary file, fsync it,
//! rename it into place, fsync the directory. A crash leaves either no file or the whole
//! one; readers ignore `.tmp` leftovers.

use std::fs::{self, File};
use std::io::Write;
use std::path::Path;

/// Writes `parts` (concatenated) as `dir/name`, durably.
pub(crate) fn write_file(dir: &Path, name: &str, parts: &[&[u8]]) -> std::io::Result<()> {
    let tmp = dir.join(format!("{name}.tmp"));
    let mut f = File::create(&tmp)?;
    for p in parts {
        f.write_all(p)?;
    }
    f.sync_data()?;
    fs::rename(&tmp, dir.join(name))?;
    File::open(dir)?.sync_all()
}
