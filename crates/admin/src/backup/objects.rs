//! The objects of a backup: immutable files under `DEST/objects/<first two hex digits>/`,
//! each named by the BLAKE3 hash of its bytes (docs/operations.md, Backups).
//!
//! An object is written under a temporary name while its hash is computed, synced, and only
//! then renamed to its hash: a file with an object's name is whole when it gets the name. An
//! object already there with the same name and size is not written again (an unchanged
//! state, the same directory copy): that is what makes later runs incremental.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::io::{BufWriter, Read as _, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result};
use serde::{Deserialize, Serialize};

/// The folder of the objects inside a backup.
pub(crate) const OBJECTS_DIR: &str = "objects";
/// Temporary files start with this; a run removes the ones a crashed run left.
const TMP_PREFIX: &str = "tmp-";
/// Bytes read at a time when hashing or copying a file.
const CHUNK_BYTES: usize = 1 << 20;

/// Objects and their bytes (what a run wrote, or reused).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counts {
    pub objects: u64,
    pub bytes: u64,
}

impl Counts {
    fn add(&mut self, bytes: u64) {
        self.objects += 1;
        self.bytes += bytes;
    }
}

/// Where object `hash` lives in the backup at `dest`.
pub(crate) fn path_of(dest: &Path, hash: &str) -> PathBuf {
    dest.join(OBJECTS_DIR)
        .join(hash.get(..2).unwrap_or("xx"))
        .join(hash)
}

/// Whether `name` can be an object's name (64 lower-case hex digits); anything else in a
/// manifest is refused before it becomes a path.
pub(crate) fn is_object_name(name: &str) -> bool {
    name.len() == 64
        && name
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// The objects one run names, and what it wrote and reused.
pub(crate) struct Objects {
    dest: PathBuf,
    named: BTreeMap<String, u64>,
    /// Folders that got a new entry: synced once, before the manifest names their objects.
    dirs: BTreeSet<PathBuf>,
    pub(crate) written: Counts,
    pub(crate) reused: Counts,
    next_tmp: u64,
}

/// An object being written: its bytes go to a temporary file and into the hash.
pub(crate) struct ObjectWriter {
    file: BufWriter<File>,
    path: PathBuf,
    hasher: blake3::Hasher,
    len: u64,
}

impl Write for ObjectWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.file.write(buf)?;
        self.hasher.update(&buf[..n]);
        self.len += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.file.flush()
    }
}

impl Objects {
    /// The objects of the backup at `dest` (made if missing), with the temporary files of an
    /// interrupted run removed.
    pub(crate) fn open(dest: &Path) -> Result<Objects> {
        let dir = dest.join(OBJECTS_DIR);
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        for entry in std::fs::read_dir(&dir).with_context(|| format!("{}", dir.display()))? {
            let entry = entry?;
            if entry.file_name().to_string_lossy().starts_with(TMP_PREFIX) {
                let _ = std::fs::remove_file(entry.path());
            }
        }
        Ok(Objects {
            dest: dest.to_path_buf(),
            named: BTreeMap::new(),
            dirs: BTreeSet::from([dir]),
            written: Counts::default(),
            reused: Counts::default(),
            next_tmp: 0,
        })
    }

    /// A temporary path in the objects folder (removed by the next run if left behind).
    pub(crate) fn tmp_path(&mut self, what: &str) -> PathBuf {
        self.next_tmp += 1;
        self.dest.join(OBJECTS_DIR).join(format!(
            "{TMP_PREFIX}{}-{}-{what}",
            std::process::id(),
            self.next_tmp
        ))
    }

    pub(crate) fn create(&mut self) -> Result<ObjectWriter> {
        let path = self.tmp_path("object");
        let file = File::create(&path).with_context(|| format!("creating {}", path.display()))?;
        Ok(ObjectWriter {
            file: BufWriter::with_capacity(CHUNK_BYTES, file),
            path,
            hasher: blake3::Hasher::new(),
            len: 0,
        })
    }

    /// Ends an object: synced and renamed to its hash, or dropped if an object of that name
    /// and size is there already. Returns its name.
    pub(crate) fn finish(&mut self, writer: ObjectWriter) -> Result<String> {
        let ObjectWriter {
            file,
            path,
            hasher,
            len,
        } = writer;
        let file = file
            .into_inner()
            .map_err(|e| e.into_error())
            .with_context(|| format!("writing {}", path.display()))?;
        let hash = hasher.finalize().to_hex().to_string();
        self.place(file, &path, hash, len)
    }

    /// Takes a whole file made elsewhere (the directory's `VACUUM INTO` copy) as an object:
    /// hashed, synced and renamed like a written one.
    pub(crate) fn adopt(&mut self, path: &Path) -> Result<String> {
        let file = File::options()
            .read(true)
            .write(true)
            .open(path)
            .with_context(|| format!("opening {}", path.display()))?;
        let (hash, len) =
            hash_reader(&file).with_context(|| format!("reading {}", path.display()))?;
        self.place(file, path, hash, len)
    }

    /// Copies the file at `source` into an object.
    pub(crate) fn copy_file(&mut self, source: &Path) -> Result<String> {
        let mut input =
            File::open(source).with_context(|| format!("reading {}", source.display()))?;
        let mut writer = self.create()?;
        std::io::copy(&mut input, &mut writer)
            .with_context(|| format!("copying {}", source.display()))?;
        self.finish(writer)
    }

    fn place(&mut self, file: File, tmp: &Path, hash: String, len: u64) -> Result<String> {
        let target = path_of(&self.dest, &hash);
        let there = std::fs::metadata(&target).is_ok_and(|m| m.len() == len);
        if there {
            drop(file);
            std::fs::remove_file(tmp).with_context(|| format!("removing {}", tmp.display()))?;
            self.reused.add(len);
        } else {
            file.sync_all()
                .with_context(|| format!("syncing {}", tmp.display()))?;
            drop(file);
            let dir = target.parent().unwrap_or(&self.dest).to_path_buf();
            std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
            std::fs::rename(tmp, &target)
                .with_context(|| format!("renaming {} to {}", tmp.display(), target.display()))?;
            self.dirs.insert(dir);
            self.written.add(len);
        }
        self.named.insert(hash.clone(), len);
        Ok(hash)
    }

    /// Names an object of an earlier run again (a folder's earlier packs): nothing is copied.
    pub(crate) fn keep(&mut self, hash: &str, len: u64) -> Result<()> {
        let path = path_of(&self.dest, hash);
        let found = std::fs::metadata(&path).map(|m| m.len()).ok();
        if found != Some(len) {
            anyhow::bail!(
                "{} is missing or damaged ({} bytes, the manifest says {len}); run \
                 `mailstow backup verify` and back up into a new directory",
                path.display(),
                found.map_or("no".to_string(), |n| n.to_string())
            );
        }
        if self.named.insert(hash.to_string(), len).is_none() {
            self.reused.add(len);
        }
        Ok(())
    }

    /// Syncs every folder that got a new object, so the manifest never names an object a
    /// crash could lose.
    pub(crate) fn sync_dirs(&self) -> Result<()> {
        let mut dirs: Vec<&PathBuf> = self.dirs.iter().collect();
        // Deepest first: a new subfolder's entry is synced after its own content.
        dirs.sort_by_key(|d| std::cmp::Reverse(d.components().count()));
        for dir in dirs {
            sync_dir(dir)?;
        }
        Ok(())
    }

    pub(crate) fn named(&self) -> &BTreeMap<String, u64> {
        &self.named
    }

    /// Removes every object the manifest just written does not name (the previous run's
    /// queue, old states, leftovers of a crashed run). Call only once that manifest is
    /// durable. Returns how many were removed.
    pub(crate) fn collect_garbage(&self) -> Result<u64> {
        let dir = self.dest.join(OBJECTS_DIR);
        let mut removed = 0;
        for sub in std::fs::read_dir(&dir).with_context(|| format!("{}", dir.display()))? {
            let sub = sub?.path();
            if !sub.is_dir() {
                continue;
            }
            for entry in std::fs::read_dir(&sub).with_context(|| format!("{}", sub.display()))? {
                let entry = entry?;
                let name = entry.file_name().to_string_lossy().into_owned();
                if !self.named.contains_key(&name) {
                    std::fs::remove_file(entry.path())
                        .with_context(|| format!("removing {}", entry.path().display()))?;
                    removed += 1;
                }
            }
        }
        Ok(removed)
    }
}

/// The BLAKE3 hash (hex) and length of everything `reader` yields.
pub(crate) fn hash_reader(mut reader: impl std::io::Read) -> std::io::Result<(String, u64)> {
    let mut hasher = blake3::Hasher::new();
    let mut buf = vec![0u8; CHUNK_BYTES];
    let mut len = 0u64;
    loop {
        let n = reader.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
        len += n as u64;
    }
    Ok((hasher.finalize().to_hex().to_string(), len))
}

/// `fsync` of a folder, so the names in it survive a crash.
pub(crate) fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .with_context(|| format!("syncing {}", dir.display()))
}

/// Writes `bytes` to `path` atomically: `path.tmp`, synced, renamed, the folder synced.
pub(crate) fn write_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    let tmp = path.with_extension("json.tmp");
    let mut file = File::create(&tmp).with_context(|| format!("creating {}", tmp.display()))?;
    file.write_all(bytes)
        .and_then(|()| file.sync_all())
        .with_context(|| format!("writing {}", tmp.display()))?;
    drop(file);
    std::fs::rename(&tmp, path)
        .with_context(|| format!("renaming {} to {}", tmp.display(), path.display()))?;
    sync_dir(path.parent().unwrap_or(Path::new(".")))
}

/// Reads a whole small file (a manifest).
pub(crate) fn read_small(path: &Path, max: u64) -> Result<Vec<u8>> {
    let file = File::open(path).with_context(|| format!("reading {}", path.display()))?;
    let mut bytes = Vec::new();
    file.take(max + 1)
        .read_to_end(&mut bytes)
        .with_context(|| format!("reading {}", path.display()))?;
    if bytes.len() as u64 > max {
        anyhow::bail!("{} is larger than {max} bytes", path.display());
    }
    Ok(bytes)
}
