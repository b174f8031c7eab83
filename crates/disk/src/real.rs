//! The real disk: std files plus `fallocate` and `fdatasync` through rustix.

use std::fs;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::{Disk, File, ZERO_CHUNK_BYTES};

/// The local file system.
#[derive(Debug, Default, Clone, Copy)]
pub struct RealDisk;

impl Disk for RealDisk {
    fn open(&self, path: &Path, create: bool) -> io::Result<Arc<dyn File>> {
        let file = fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(create)
            .truncate(false)
            .open(path)
            .map_err(|e| annotate(e, path))?;
        Ok(Arc::new(RealFile {
            file,
            path: path.to_path_buf(),
        }))
    }

    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        fs::create_dir_all(path).map_err(|e| annotate(e, path))
    }

    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        let mut names = Vec::new();
        for entry in fs::read_dir(dir).map_err(|e| annotate(e, dir))? {
            let entry = entry?;
            if entry.file_type()?.is_file() {
                names.push(entry.file_name().to_string_lossy().into_owned());
            }
        }
        names.sort();
        Ok(names)
    }

    fn exists(&self, path: &Path) -> bool {
        path.exists()
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        fs::rename(from, to).map_err(|e| annotate(e, from))
    }

    fn remove(&self, path: &Path) -> io::Result<()> {
        fs::remove_file(path).map_err(|e| annotate(e, path))
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        fs::File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(|e| annotate(e, dir))
    }

    fn available_bytes(&self, dir: &Path) -> io::Result<u64> {
        let st = rustix::fs::statvfs(dir)?;
        Ok(st.f_bavail.saturating_mul(st.f_frsize))
    }
}

fn annotate(error: io::Error, path: &Path) -> io::Error {
    io::Error::new(error.kind(), format!("{}: {error}", path.display()))
}

struct RealFile {
    file: fs::File,
    /// Where it was opened: [`File::write_zeros`] opens it again with `O_DIRECT`.
    path: PathBuf,
}

/// `O_DIRECT` wants buffers, offsets and lengths aligned to the logical block; a page
/// covers every block size in use.
const DIRECT_ALIGN: u64 = 4096;

impl RealFile {
    /// Zeros written with `O_DIRECT`, then the page cache told to read them back ahead; `Ok(false)`
    /// if this range or file system cannot take direct I/O.
    fn write_zeros_direct(&self, offset: u64, len: u64) -> io::Result<bool> {
        use std::os::unix::fs::OpenOptionsExt;
        if !offset.is_multiple_of(DIRECT_ALIGN) || !len.is_multiple_of(DIRECT_ALIGN) {
            return Ok(false);
        }
        let direct = match fs::OpenOptions::new()
            .write(true)
            .custom_flags(rustix::fs::OFlags::DIRECT.bits() as i32)
            .open(&self.path)
        {
            Ok(f) => f,
            // No O_DIRECT on this file system (EINVAL), or the name is gone.
            Err(_) => return Ok(false),
        };
        // Same file? A rename over the path since it was opened would zero another one.
        let (ours, theirs) = (self.file.metadata()?, direct.metadata()?);
        {
            use std::os::unix::fs::MetadataExt;
            if (ours.dev(), ours.ino()) != (theirs.dev(), theirs.ino()) {
                return Ok(false);
            }
        }
        let chunk = ZERO_CHUNK_BYTES as usize;
        let buffer = vec![0u8; chunk + DIRECT_ALIGN as usize];
        let skew = buffer.as_ptr() as usize % DIRECT_ALIGN as usize;
        let start = (DIRECT_ALIGN as usize - skew) % DIRECT_ALIGN as usize;
        let zeros = &buffer[start..start + chunk];
        // The first chunk probes: a file system that opens O_DIRECT but will not do it says
        // EINVAL before anything is written, and the page cache path writes the whole range.
        let first = ZERO_CHUNK_BYTES.min(len);
        match direct.write_all_at(&zeros[..first as usize], offset) {
            Err(e) if e.raw_os_error() == Some(rustix::io::Errno::INVAL.raw_os_error()) => {
                return Ok(false);
            }
            other => other?,
        }
        crate::zeros_in_chunks(zeros, offset + first, len - first, |zeros, at| {
            direct.write_all_at(zeros, at)
        })?;
        // Later writes of parts of these pages would read each one back first; have the
        // kernel bring them in now, in large requests, off the writer's path. Only advice.
        let _ = rustix::fs::fadvise(
            &self.file,
            offset,
            std::num::NonZeroU64::new(len),
            rustix::fs::Advice::WillNeed,
        );
        Ok(true)
    }
}

impl File for RealFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        loop {
            match self.file.read_at(buf, offset) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                other => return other,
            }
        }
    }

    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.file.write_all_at(buf, offset)
    }

    fn len(&self) -> io::Result<u64> {
        Ok(self.file.metadata()?.len())
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        self.file.set_len(len)
    }

    fn allocate(&self, len: u64) -> io::Result<()> {
        if len == 0 {
            return Ok(());
        }
        match rustix::fs::fallocate(&self.file, rustix::fs::FallocateFlags::empty(), 0, len) {
            Ok(()) => Ok(()),
            // File systems without fallocate (tmpfs on old kernels, some FUSE): extend instead;
            // the blocks are then allocated on first write, which is slower but correct.
            Err(rustix::io::Errno::OPNOTSUPP) => {
                if self.len()? < len {
                    self.file.set_len(len)?;
                }
                Ok(())
            }
            Err(e) => Err(e.into()),
        }
    }

    fn sync_data(&self) -> io::Result<()> {
        self.file.sync_data()
    }

    /// With `O_DIRECT` where the file system takes it: zeros copied into the page cache cost
    /// the CPU a copy and a fresh page each (the queue's spare-segment fill was 46 % of all CPU
    /// samples in its ingest bench here), and writeback writes them again later. Falls back to
    /// the page cache for unaligned ranges and file systems without direct I/O.
    fn write_zeros(&self, offset: u64, len: u64) -> io::Result<()> {
        if self.write_zeros_direct(offset, len)? {
            return Ok(());
        }
        let zeros = vec![0u8; ZERO_CHUNK_BYTES.min(len).max(1) as usize];
        crate::zeros_in_chunks(&zeros, offset, len, |zeros, at| {
            self.file.write_all_at(zeros, at)
        })
    }
}
