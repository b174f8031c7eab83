//! ext4 on a loop device for the journal-mode cells: an image file in the directory under
//! test, attached with direct I/O (so the loop adds no second page cache), formatted with
//! a journal of known size, mounted with the wanted `data=` mode. Needs root and
//! util-linux/e2fsprogs; without them the cells are skipped, not failed.

use std::path::{Path, PathBuf};
use std::process::Command;

use sim_models::localfs::JournalMode;

use crate::ValidateError;

/// The journal `mkfs.ext4 -J size=` gets, in MiB.
pub(crate) const JOURNAL_MIB: u64 = 64;

pub(crate) struct LoopMount {
    pub(crate) dir: PathBuf,
    image: PathBuf,
    device: String,
    mounted: bool,
}

fn run(cmd: &str, args: &[&str]) -> Result<String, String> {
    let out = Command::new(cmd)
        .args(args)
        .output()
        .map_err(|e| format!("{cmd}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{cmd} {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

impl LoopMount {
    /// Mounts a fresh ext4 of `bytes` under `parent`; `Ok(Err(reason))` when this machine
    /// cannot (not root, no loop devices, no mkfs).
    pub(crate) fn new(
        parent: &Path,
        mode: JournalMode,
        bytes: u64,
    ) -> Result<Result<LoopMount, String>, ValidateError> {
        let image = parent.join(format!("ext4-{mode:?}.img").to_lowercase());
        let dir = parent.join(format!("ext4-{mode:?}").to_lowercase());
        let io = |e| ValidateError::Io(image.display().to_string(), e);
        std::fs::File::create(&image)
            .and_then(|f| f.set_len(bytes))
            .map_err(io)?;
        std::fs::create_dir_all(&dir)
            .map_err(|e| ValidateError::Io(dir.display().to_string(), e))?;
        let image_arg = image.display().to_string();
        let device = match run(
            "losetup",
            &["--direct-io=on", "--find", "--show", &image_arg],
        ) {
            Ok(d) => d,
            Err(e) => {
                let _ = std::fs::remove_file(&image);
                return Ok(Err(e));
            }
        };
        let mut m = LoopMount {
            dir,
            image,
            device,
            mounted: false,
        };
        let journal = format!("size={JOURNAL_MIB}");
        let mkfs: &[&str] = match mode {
            JournalMode::NoJournal => &["-q", "-F", "-O", "^has_journal"],
            _ => &["-q", "-F", "-J", &journal],
        };
        if let Err(e) = run("mkfs.ext4", &[mkfs, &[m.device.as_str()]].concat()) {
            return Ok(Err(e));
        }
        let data = match mode {
            JournalMode::Ordered => "data=ordered",
            JournalMode::Writeback => "data=writeback",
            JournalMode::Data => "data=journal",
            JournalMode::NoJournal => "defaults",
        };
        let target = m.dir.display().to_string();
        if let Err(e) = run("mount", &["-t", "ext4", "-o", data, &m.device, &target]) {
            return Ok(Err(e));
        }
        m.mounted = true;
        Ok(Ok(m))
    }
}

impl Drop for LoopMount {
    fn drop(&mut self) {
        if self.mounted {
            let _ = run("umount", &[&self.dir.display().to_string()]);
        }
        let _ = run("losetup", &["-d", &self.device]);
        let _ = std::fs::remove_file(&self.image);
        let _ = std::fs::remove_dir(&self.dir);
    }
}
