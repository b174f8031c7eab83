//! Local state on the machine that mounts: the write-back journal, the accounts' backlogs
//! and the disk cache. All of it goes through the `disk` crate's [`Disk`] trait, so crash
//! tests run it on the simulated disk (torn, lost and reordered writes) as the store's are.
//!
//! The one way local state becomes durable (invariant M6): write a temporary file, fsync it,
//! rename it into place, fsync the directory. A crash leaves either no file or the whole
//! one; readers ignore `.tmp` leftovers (and remove them: they were never acknowledged).

use std::io;
use std::path::Path;

use disk::Disk;

/// The suffix of a file being written: never read, removed when found.
pub(crate) const TMP_SUFFIX: &str = ".tmp";

/// Writes `parts` (concatenated) as `dir/name`, durably.
pub(crate) fn write_file(
    disk: &dyn Disk,
    dir: &Path,
    name: &str,
    parts: &[&[u8]],
) -> io::Result<()> {
    let tmp = dir.join(format!("{name}{TMP_SUFFIX}"));
    write_unsynced(disk, &tmp, parts)?.sync_data()?;
    disk.rename(&tmp, &dir.join(name))?;
    disk.sync_dir(dir)
}

/// Writes `parts` (concatenated) as the whole of `path`, without a sync: for a cache, where
/// a torn file only costs a refetch (its envelope fails authentication).
pub(crate) fn write_unsynced(
    disk: &dyn Disk,
    path: &Path,
    parts: &[&[u8]],
) -> io::Result<std::sync::Arc<dyn disk::File>> {
    let f = disk.open(path, true)?;
    // A leftover of a crashed write may be longer than this one.
    f.set_len(0)?;
    let mut at = 0u64;
    for p in parts {
        f.write_all_at(p, at)?;
        at += p.len() as u64;
    }
    Ok(f)
}

/// The whole content of `path`.
pub(crate) fn read_file(disk: &dyn Disk, path: &Path) -> io::Result<Vec<u8>> {
    let f = disk.open(path, false)?;
    let len = usize::try_from(f.len()?).map_err(io::Error::other)?;
    let mut buf = vec![0; len];
    f.read_exact_at(&mut buf, 0)?;
    Ok(buf)
}

/// The length of `path` (0 when it cannot be opened: the callers count bytes for limits,
/// and a file that vanished holds none).
pub(crate) fn file_len(disk: &dyn Disk, path: &Path) -> u64 {
    disk.open(path, false).and_then(|f| f.len()).unwrap_or(0)
}

/// The names in `dir` that end in `suffix`, stems parsed as sequence numbers, sorted.
/// `.tmp` files are skipped, not removed: on a live directory one may be a write in
/// progress (a backlog entry or journal record being made), and removing it failed that
/// write. Leftovers of a crash go at open, by `remove_leftovers`.
pub(crate) fn sequence(disk: &dyn Disk, dir: &Path, suffix: &str) -> Vec<u64> {
    let mut seqs: Vec<u64> = disk
        .list(dir)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|name| name.strip_suffix(suffix)?.parse().ok())
        .collect();
    seqs.sort_unstable();
    seqs
}

/// Removes the `.tmp` files in `dir`: writes a crash cut before their fsync and rename,
/// never acknowledged. Only at open, before anything writes to `dir`.
pub(crate) fn remove_leftovers(disk: &dyn Disk, dir: &Path) {
    for name in disk.list(dir).unwrap_or_default() {
        if name.ends_with(TMP_SUFFIX) {
            let _ = disk.remove(&dir.join(&name));
        }
    }
}
