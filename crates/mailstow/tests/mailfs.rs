//! The mail file system end to end: the real `mailstow` binary, a real FUSE mount, and real
//! Dovecot servers (private instances on loopback) as the accounts.

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt, symlink};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use test_peers::Dovecot;

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_mailstow")
}

/// FUSE needs /dev/fuse and root (mount(2) directly) or fusermount3.
fn fuse_available() -> bool {
    Path::new("/dev/fuse").exists()
}

struct Account<'a> {
    server: &'a Dovecot,
    user: usize,
}

struct Rig {
    dir: tempfile::TempDir,
    config: PathBuf,
    mnt: PathBuf,
}

impl Rig {
    /// `groups`: each group's accounts. `extra` goes into `[fs]`.
    fn new(groups: &[Vec<Account>], extra: &str) -> Rig {
        let dir = tempfile::tempdir().unwrap();
        let mnt = dir.path().join("mnt");
        fs::create_dir(&mnt).unwrap();
        let mut text = format!(
            "[fs]\nblock_size = 131072\nretention = \"0\"\norphan_grace = \"0\"\ntimeout_ms = 3000\n{extra}\n[cache]\ndir = {:?}\n[encryption]\npassphrase = \"it is a secret\"\n",
            dir.path().join("cache")
        );
        for g in groups {
            text.push_str("[[group]]\n");
            for a in g {
                let (user, pw) = a.server.user(a.user);
                text.push_str(&format!(
                    "[[group.account]]\nhost = \"127.0.0.1\"\nport = {}\ntls = \"none\"\nuser = \"{user}\"\npassword = \"{pw}\"\nconnections = 2\n",
                    a.server.port()
                ));
            }
        }
        let config = dir.path().join("fs.toml");
        fs::write(&config, text).unwrap();
        Rig { dir, config, mnt }
    }

    fn fs(&self, args: &[&str]) -> (bool, String) {
        let out = Command::new(bin())
            .arg("fs")
            .arg("--config")
            .arg(&self.config)
            .args(args)
            .output()
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (out.status.success(), text)
    }

    fn ok(&self, args: &[&str]) -> String {
        let (ok, text) = self.fs(args);
        assert!(ok, "mailstow fs {args:?}: {text}\nlog: {}", self.log());
        text
    }

    fn log(&self) -> String {
        fs::read_to_string(self.dir.path().join("cache/mount.log")).unwrap_or_default()
    }

    /// Mounts in the background; returns the server's pid.
    fn mount(&self) -> u32 {
        let out = self.ok(&["mount", self.mnt.to_str().unwrap()]);
        out.split("server pid ")
            .nth(1)
            .and_then(|s| s.split(|c: char| !c.is_ascii_digit()).next())
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("no pid in {out}"))
    }

    fn umount(&self) {
        self.ok(&["umount", self.mnt.to_str().unwrap()]);
    }

    /// After a SIGKILL the kernel still has the (dead) mount: detach it.
    fn detach(&self) {
        let _ = Command::new("umount").arg("-l").arg(&self.mnt).status();
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.mnt).status();
    }
}

fn pattern(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// Everything a tree holds that POSIX lets us compare: kind, content, mode, symlink
/// target, and mtime for files whose times were set explicitly.
fn snapshot(root: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            let p = e.path();
            let rel = p.strip_prefix(root).unwrap().to_string_lossy().to_string();
            let m = fs::symlink_metadata(&p).unwrap();
            let mode = m.permissions().mode() & 0o7777;
            let desc = if m.file_type().is_symlink() {
                format!("link {}", fs::read_link(&p).unwrap().display())
            } else if m.is_dir() {
                stack.push(p.clone());
                format!("dir {mode:o}")
            } else {
                let data = fs::read(&p).unwrap();
                format!(
                    "file {mode:o} {} {} mtime {}",
                    data.len(),
                    blake3::hash(&data).to_hex(),
                    if rel.contains("stamped") {
                        m.mtime().to_string()
                    } else {
                        "-".into()
                    }
                )
            };
            out.insert(rel, desc);
        }
    }
    out
}

/// The same operations on both trees.
fn posix_workload(roots: &[&Path]) {
    for root in roots {
        let r = |p: &str| root.join(p);
        fs::create_dir(r("a")).unwrap();
        fs::create_dir_all(r("a/b/c")).unwrap();
        fs::create_dir(r("x")).unwrap();
        // Many small files.
        for i in 0..200 {
            fs::write(r(&format!("a/small{i}")), pattern(i * 37, i as u64)).unwrap();
        }
        // A file written at offsets, with a hole, then truncated and grown.
        {
            use std::io::{Seek, SeekFrom, Write};
            let mut f = fs::File::create(r("a/b/sparse")).unwrap();
            f.write_all(&pattern(300_000, 1)).unwrap();
            f.seek(SeekFrom::Start(1_000_000)).unwrap();
            f.write_all(&pattern(5000, 2)).unwrap();
            f.seek(SeekFrom::Start(131_000)).unwrap();
            f.write_all(&pattern(1000, 3)).unwrap();
            f.set_len(700_000).unwrap();
            f.set_len(900_000).unwrap();
            f.sync_all().unwrap();
        }
        // A bigger file (several blocks per group, read back through read-ahead).
        fs::write(r("x/big"), pattern(24 << 20, 9)).unwrap();
        // Overwrite in place, append.
        {
            use std::io::Write;
            let mut f = fs::OpenOptions::new().append(true).open(r("a/small5")).unwrap();
            f.write_all(b"appended").unwrap();
        }
        fs::write(r("a/small6"), b"replaced").unwrap();
        // Renames: within a directory, across directories, of a directory, over a file.
        fs::rename(r("a/small7"), r("a/renamed7")).unwrap();
        fs::rename(r("a/small8"), r("x/moved8")).unwrap();
        fs::rename(r("a/b"), r("x/b")).unwrap();
        fs::rename(r("a/small9"), r("a/small10")).unwrap();
        // Removals.
        fs::remove_file(r("a/small11")).unwrap();
        fs::remove_dir(r("x/b/c")).unwrap();
        // Attributes.
        fs::set_permissions(r("a/small12"), fs::Permissions::from_mode(0o600)).unwrap();
        fs::set_permissions(r("x"), fs::Permissions::from_mode(0o750)).unwrap();
        fs::write(r("a/stamped"), b"times").unwrap();
        let t = std::time::UNIX_EPOCH + Duration::from_secs(1_600_000_000);
        fs::File::options()
            .write(true)
            .open(r("a/stamped"))
            .unwrap()
            .set_times(fs::FileTimes::new().set_modified(t).set_accessed(t))
            .unwrap();
        symlink("../x/big", r("a/link")).unwrap();
        std::os::unix::fs::chown(r("a/small13"), Some(1234), Some(5678)).unwrap();
    }
}

#[test]
fn posix_operations_match_a_local_directory_and_survive_a_remount() {
    if !fuse_available() {
        eprintln!("skipped: no /dev/fuse");
        return;
    }
    let server = Dovecot::start(2).unwrap();
    let rig = Rig::new(
        &[
            vec![Account {
                server: &server,
                user: 1,
            }],
            vec![Account {
                server: &server,
                user: 2,
            }],
        ],
        "",
    );
    rig.ok(&["mkfs"]);
    rig.mount();
    let local = rig.dir.path().join("local");
    fs::create_dir(&local).unwrap();
    posix_workload(&[&rig.mnt, &local]);
    let want = snapshot(&local);
    assert_eq!(snapshot(&rig.mnt), want);
    assert_eq!(
        fs::metadata(rig.mnt.join("a/small13")).unwrap().uid(),
        1234
    );
    // Errors a program relies on.
    assert_eq!(
        fs::remove_dir(rig.mnt.join("a")).unwrap_err().raw_os_error(),
        Some(libc::ENOTEMPTY)
    );
    assert_eq!(
        fs::create_dir(rig.mnt.join("x")).unwrap_err().raw_os_error(),
        Some(libc::EEXIST)
    );
    assert_eq!(
        fs::read(rig.mnt.join("nope")).unwrap_err().raw_os_error(),
        Some(libc::ENOENT)
    );
    let long = "n".repeat(256);
    assert_eq!(
        fs::write(rig.mnt.join(long), b"").unwrap_err().raw_os_error(),
        Some(libc::ENAMETOOLONG)
    );
    let st = rustix::fs::statvfs(&rig.mnt).unwrap();
    assert!(st.f_blocks > 0 && st.f_bfree > 0, "statfs from quota");
    rig.umount();
    // A fresh mount with an empty cache reads it all back from the servers.
    fs::remove_dir_all(rig.dir.path().join("cache")).unwrap();
    rig.mount();
    assert_eq!(snapshot(&rig.mnt), want);
    rig.umount();
    let fsck = rig.ok(&["fsck"]);
    assert!(fsck.contains("fsck: clean"), "{fsck}");
}
