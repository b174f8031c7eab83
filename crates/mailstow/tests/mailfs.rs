//! The mail file system end to end: the real `mailstow` binary, a real FUSE mount, and real
//! Dovecot servers (private instances on loopback) as the accounts.

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt, symlink};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use imap_client::Client;

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
        // `extra` may override a default.
        let defaults: String = [
            "block_size = 131072",
            "retention = \"0\"",
            "orphan_grace = \"0\"",
            "timeout_ms = 3000",
        ]
        .iter()
        .filter(|d| !extra.contains(d.split(' ').next().expect("a key")))
        .map(|d| format!("{d}\n"))
        .collect();
        let mut text = format!(
            "[fs]\n{defaults}{extra}\n[cache]\ndir = {:?}\n[encryption]\npassphrase = \"it is a secret\"\n",
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

    /// `key=value` lines of `mailstow fs stats`.
    fn stats(&self) -> BTreeMap<String, String> {
        self.ok(&["stats"])
            .lines()
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn wait_stats(&self, what: &str, ok: impl Fn(&BTreeMap<String, String>) -> bool) {
        let started = Instant::now();
        loop {
            let s = self.stats();
            if ok(&s) {
                return;
            }
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "{what}: stats stayed {s:?}"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
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

/// Names only the entries that differ, and the mount's log, so a failure says what went wrong.
fn assert_same_tree(got_root: &Path, want_root: &Path, rig: &Rig) {
    let (got, want) = (snapshot(got_root), snapshot(want_root));
    let mut diff = Vec::new();
    for (k, v) in &want {
        match got.get(k) {
            Some(g) if g == v => {}
            g => {
                diff.push(format!("{k}: got {g:?}, want {v}"));
                if let (Ok(a), Ok(b)) = (fs::read(got_root.join(k)), fs::read(want_root.join(k))) {
                    diff.push(describe_content_diff(&a, &b));
                    let again = fs::read(got_root.join(k)).unwrap_or_default();
                    diff.push(format!(
                        "  read again: same as first {}, right {}",
                        again == a,
                        again == b
                    ));
                }
            }
        }
    }
    for k in got.keys().filter(|k| !want.contains_key(*k)) {
        diff.push(format!("{k}: unexpected {}", got[k]));
    }
    assert!(
        diff.is_empty(),
        "trees differ:\n{}\nlog: {}",
        diff.join("\n"),
        rig.log()
    );
}

/// Which 128 KiB blocks of a file differ, and what they hold instead.
fn describe_content_diff(got: &[u8], want: &[u8]) -> String {
    const BS: usize = 131072;
    let blocks = got.len().max(want.len()).div_ceil(BS);
    let part = |d: &[u8], i: usize| {
        d.get(i * BS..((i + 1) * BS).min(d.len()))
            .unwrap_or(&[])
            .to_vec()
    };
    let mut out = String::new();
    for i in (0..blocks).filter(|&i| part(got, i) != part(want, i)) {
        let g = part(got, i);
        let what = if g.iter().all(|&b| b == 0) {
            "zeros".to_string()
        } else if let Some(j) = (0..blocks).find(|&j| part(want, j) == g) {
            format!("block {j}'s content")
        } else {
            let first = g.iter().zip(part(want, i)).position(|(a, b)| *a != b);
            format!("other bytes from {first:?}")
        };
        out.push_str(&format!("  block {i}: {what}\n"));
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
            let mut f = fs::OpenOptions::new()
                .append(true)
                .open(r("a/small5"))
                .unwrap();
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
        // A shared writable mapping (files bypass the page cache, FOPEN_DIRECT_IO, where
        // the kernel still maps them): changed through the map, read back through it.
        fs::write(r("a/mapped"), pattern(200_000, 4)).unwrap();
        let script = "import mmap, sys\n\
            with open(sys.argv[1], 'r+b') as f:\n\
            \x20   m = mmap.mmap(f.fileno(), 0)\n\
            \x20   m[70000:70005] = b'MAPPD'\n\
            \x20   m.flush()\n\
            \x20   assert m[69999:70006] == bytes([m[69999]]) + b'MAPPD' + bytes([m[70005]])\n\
            \x20   m.close()\n";
        let out = std::process::Command::new("python3")
            .args(["-c", script])
            .arg(r("a/mapped"))
            .output()
            .expect("python3");
        assert!(
            out.status.success(),
            "mmap on {}: {}",
            root.display(),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn posix_operations_match_a_local_directory_and_survive_a_remount() {
    if !fuse_available() {
        eprintln!("skipped: no /dev/fuse");
        return;
    }
    let server = Dovecot::start(2).unwrap();
    let rig = Rig::new(&one_per_group(&server, 2), "");
    rig.ok(&["mkfs"]);
    rig.mount();
    let local = rig.dir.path().join("local");
    fs::create_dir(&local).unwrap();
    posix_workload(&[&rig.mnt, &local]);
    assert_same_tree(&rig.mnt, &local, &rig);
    assert_eq!(fs::metadata(rig.mnt.join("a/small13")).unwrap().uid(), 1234);
    // Errors a program relies on.
    assert_eq!(
        fs::remove_dir(rig.mnt.join("a"))
            .unwrap_err()
            .raw_os_error(),
        Some(libc::ENOTEMPTY)
    );
    assert_eq!(
        fs::create_dir(rig.mnt.join("x"))
            .unwrap_err()
            .raw_os_error(),
        Some(libc::EEXIST)
    );
    assert_eq!(
        fs::read(rig.mnt.join("nope")).unwrap_err().raw_os_error(),
        Some(libc::ENOENT)
    );
    let long = "n".repeat(256);
    assert_eq!(
        fs::write(rig.mnt.join(long), b"")
            .unwrap_err()
            .raw_os_error(),
        Some(libc::ENAMETOOLONG)
    );
    let st = rustix::fs::statvfs(&rig.mnt).unwrap();
    assert!(st.f_blocks > 0 && st.f_bfree > 0, "statfs from quota");
    rig.umount();
    // A fresh mount with an empty cache reads it all back from the servers.
    fs::remove_dir_all(rig.dir.path().join("cache")).unwrap();
    rig.mount();
    assert_same_tree(&rig.mnt, &local, &rig);
    rig.umount();
    let fsck = rig.ok(&["fsck"]);
    assert!(fsck.contains("fsck: clean"), "{fsck}");
}

/// The permission rules and limits a program meets, the same on the mount as on a local
/// directory: a write by a user without CAP_FSETID and a change of owner take the
/// set-user-ID bit off (and set-group-ID when the group may execute, or for a write by
/// someone outside the file's group), an open file that was
/// unlinked has no links, a name past 255 bytes is ENAMETOOLONG even when it does not
/// exist, and a size past the largest file is EFBIG. Mounted with --allow-other, since the
/// writer is another user (docs/mailfs.md).
#[test]
fn permission_rules_and_limits_match_a_local_directory() {
    if !fuse_available() {
        eprintln!("skipped: no /dev/fuse");
        return;
    }
    let server = Dovecot::start(1).unwrap();
    let rig = Rig::new(&one_per_group(&server, 1), "");
    rig.ok(&["mkfs"]);
    rig.ok(&["mount", rig.mnt.to_str().unwrap(), "--allow-other"]);
    let local = rig.dir.path().join("local");
    fs::create_dir(&local).unwrap();
    let mut seen = Vec::new();
    for root in [&rig.mnt, &local] {
        let r = |p: &str| root.join(p);
        let mode = |p: &str| fs::metadata(r(p)).unwrap().mode() & 0o7777;
        // A write by another user (through a descriptor opened before the switch).
        let mut written = Vec::new();
        for (i, m) in [0o4777, 0o2777, 0o6777, 0o2767].into_iter().enumerate() {
            let name = format!("w{i}");
            fs::write(r(&name), b"x").unwrap();
            fs::set_permissions(r(&name), fs::Permissions::from_mode(m)).unwrap();
            let script = "import os, sys\n\
                fd = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND)\n\
                os.setgid(65534)\n\
                os.setuid(65534)\n\
                assert os.write(fd, b'y') == 1\n\
                os.close(fd)\n";
            let out = Command::new("python3")
                .args(["-c", script])
                .arg(r(&name))
                .output()
                .expect("python3");
            assert!(
                out.status.success(),
                "write as nobody on {}: {}",
                root.display(),
                String::from_utf8_lossy(&out.stderr)
            );
            written.push(mode(&name));
        }
        // A change of owner, by root.
        let mut chowned = Vec::new();
        for (i, m) in [0o6755, 0o2745, 0o4700].into_iter().enumerate() {
            let name = format!("c{i}");
            fs::write(r(&name), b"x").unwrap();
            fs::set_permissions(r(&name), fs::Permissions::from_mode(m)).unwrap();
            std::os::unix::fs::chown(r(&name), Some(1000), Some(1000)).unwrap();
            chowned.push(mode(&name));
        }
        // An open file unlinked.
        let open = fs::File::create(r("gone")).unwrap();
        fs::remove_file(r("gone")).unwrap();
        let links = open.metadata().unwrap().nlink();
        drop(open);
        // Names and sizes past the limits.
        let long = r(&"n".repeat(256));
        let lookup = fs::metadata(&long).unwrap_err().raw_os_error();
        let chmod = fs::set_permissions(&long, fs::Permissions::from_mode(0o600))
            .unwrap_err()
            .raw_os_error();
        let unlink = fs::remove_file(&long).unwrap_err().raw_os_error();
        let huge = fs::File::create(r("huge"))
            .unwrap()
            .set_len(999_999_999_999_999)
            .unwrap_err()
            .raw_os_error();
        seen.push((written, chowned, links, lookup, chmod, unlink, huge));
    }
    assert_eq!(
        seen[0], seen[1],
        "the mount (left) against a local directory (right)"
    );
    let (written, chowned, links, lookup, _, _, huge) = &seen[0];
    // 0o2767: the group may not execute, but the writer is not of the file's group.
    assert_eq!(written, &[0o777, 0o777, 0o777, 0o767]);
    assert_eq!(chowned, &[0o755, 0o2745, 0o700]);
    assert_eq!(*links, 0);
    assert_eq!(*lookup, Some(libc::ENAMETOOLONG));
    assert_eq!(*huge, Some(libc::EFBIG));
    rig.umount();
}

/// Runs `script` (Python) as uid and gid `uid` with `args`; its standard output, trimmed.
fn python_as(uid: u32, script: &str, args: &[&Path]) -> String {
    let prelude = format!("import os, sys, errno\nos.setgid({uid})\nos.setuid({uid})\n");
    let out = Command::new("python3")
        .args(["-c", &format!("{prelude}{script}")])
        .args(args)
        .output()
        .expect("python3");
    assert!(
        out.status.success(),
        "python as {uid}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// The sticky bit, ENOTEMPTY, EXDEV and the timestamps POSIX updates, as on a local
/// directory: in a sticky directory only a name's owner (or the directory's) removes or
/// renames it; a directory with entries is neither removed nor replaced; creating and
/// removing a name changes its directory's mtime and ctime, a chmod the ctime alone, a write
/// both of the file's, `utimensat` sets the mtime and the ctime to now.
#[test]
fn sticky_directories_enotempty_and_timestamps_match_a_local_directory() {
    if !fuse_available() {
        eprintln!("skipped: no /dev/fuse");
        return;
    }
    let server = Dovecot::start(1).unwrap();
    let rig = Rig::new(&one_per_group(&server, 1), "");
    rig.ok(&["mkfs"]);
    rig.ok(&["mount", rig.mnt.to_str().unwrap(), "--allow-other"]);
    let local = rig.dir.path().join("local");
    fs::create_dir(&local).unwrap();
    // Another user must reach the local directory as it reaches the mount.
    fs::set_permissions(rig.dir.path(), fs::Permissions::from_mode(0o755)).unwrap();
    let mut seen = Vec::new();
    for root in [&rig.mnt, &local] {
        let r = |p: &str| root.join(p);
        // Sticky: 1000's file in a world-writable sticky directory.
        fs::create_dir(r("tmp")).unwrap();
        fs::set_permissions(r("tmp"), fs::Permissions::from_mode(0o1777)).unwrap();
        fs::write(r("tmp/theirs"), b"x").unwrap();
        std::os::unix::fs::chown(r("tmp/theirs"), Some(1000), Some(1000)).unwrap();
        let try_remove = "def code(f):\n\
            \x20   try:\n\
            \x20       f()\n\
            \x20       return 0\n\
            \x20   except OSError as e:\n\
            \x20       return e.errno\n\
            print(code(lambda: os.rename(sys.argv[1], sys.argv[1] + '.moved')),\n\
            \x20     code(lambda: os.unlink(sys.argv[1])))\n";
        let stranger = python_as(65534, try_remove, &[&r("tmp/theirs")]);
        let owner = python_as(1000, try_remove, &[&r("tmp/theirs")]);
        let sticky_mode = fs::metadata(r("tmp")).unwrap().mode() & 0o7777;
        // ENOTEMPTY: rmdir, and a rename over a directory with entries.
        fs::create_dir_all(r("full/inside")).unwrap();
        fs::create_dir(r("empty")).unwrap();
        let rmdir = fs::remove_dir(r("full")).unwrap_err().raw_os_error();
        let over = fs::rename(r("empty"), r("full"))
            .unwrap_err()
            .raw_os_error();
        // EXDEV: a rename to the other tree (the mount and the local directory).
        let other = if root == &rig.mnt { &local } else { &rig.mnt };
        let exdev = fs::rename(r("empty"), other.join("empty-elsewhere"))
            .unwrap_err()
            .raw_os_error();
        // Timestamps: (mtime changed, ctime changed) of the directory or the file.
        let times = |p: &str| {
            let m = fs::metadata(r(p)).unwrap();
            (
                m.mtime_nsec() + m.mtime() * 1_000_000_000,
                m.ctime_nsec() + m.ctime() * 1_000_000_000,
            )
        };
        let changed =
            |before: (i64, i64), after: (i64, i64)| (after.0 != before.0, after.1 != before.1);
        let pause = || std::thread::sleep(Duration::from_millis(20));
        fs::create_dir(r("d")).unwrap();
        let t0 = times("d");
        pause();
        fs::write(r("d/f"), b"one").unwrap();
        let create = changed(t0, times("d"));
        let f0 = times("d/f");
        pause();
        fs::set_permissions(r("d/f"), fs::Permissions::from_mode(0o600)).unwrap();
        let chmod = changed(f0, times("d/f"));
        let f1 = times("d/f");
        pause();
        fs::OpenOptions::new()
            .append(true)
            .open(r("d/f"))
            .and_then(|mut f| std::io::Write::write_all(&mut f, b"two"))
            .unwrap();
        let write = changed(f1, times("d/f"));
        let f2 = times("d/f");
        pause();
        let stamp = std::time::UNIX_EPOCH + Duration::from_secs(1_000_000_000);
        fs::File::options()
            .write(true)
            .open(r("d/f"))
            .unwrap()
            .set_modified(stamp)
            .unwrap();
        let set = (
            fs::metadata(r("d/f")).unwrap().mtime(),
            changed(f2, times("d/f")).1,
        );
        let d1 = times("d");
        pause();
        fs::remove_file(r("d/f")).unwrap();
        let unlink = changed(d1, times("d"));
        seen.push((
            stranger,
            owner,
            sticky_mode,
            rmdir,
            over,
            exdev,
            create,
            chmod,
            write,
            set,
            unlink,
        ));
    }
    assert_eq!(
        seen[0], seen[1],
        "the mount (left) against a local directory (right)"
    );
    let (stranger, owner, sticky_mode, rmdir, over, exdev, create, chmod, write, set, unlink) =
        &seen[0];
    assert_eq!(stranger, &format!("{} {}", libc::EPERM, libc::EPERM));
    assert_eq!(
        owner, "0 2",
        "the owner renames it, and the old name is then gone"
    );
    assert_eq!(*sticky_mode, 0o1777);
    assert_eq!(*rmdir, Some(libc::ENOTEMPTY));
    assert_eq!(*over, Some(libc::ENOTEMPTY));
    assert_eq!(*exdev, Some(libc::EXDEV));
    assert_eq!(*create, (true, true));
    assert_eq!(*chmod, (false, true));
    assert_eq!(*write, (true, true));
    assert_eq!(*set, (1_000_000_000, true));
    assert_eq!(*unlink, (true, true));
    rig.umount();
}

/// Special files as on a local directory: a FIFO, character and block devices with their
/// numbers, and a Unix socket are created, listed with their kind, mode and device number,
/// survive a remount and are removed; a FIFO opened on the mount passes data (the kernel
/// carries it: mailfs only keeps the entry).
#[test]
fn special_files_are_entries_that_survive_a_remount() {
    use std::io::{Read, Write};
    use std::os::unix::fs::FileTypeExt;
    if !fuse_available() {
        eprintln!("skipped: no /dev/fuse");
        return;
    }
    let server = Dovecot::start(1).unwrap();
    let rig = Rig::new(&one_per_group(&server, 1), "");
    rig.ok(&["mkfs"]);
    rig.mount();
    let local = rig.dir.path().join("local");
    fs::create_dir(&local).unwrap();
    let listing = |root: &Path| -> Vec<String> {
        let mut out: Vec<String> = fs::read_dir(root.join("s"))
            .unwrap()
            .map(|e| {
                let e = e.unwrap();
                let m = fs::symlink_metadata(e.path()).unwrap();
                let t = m.file_type();
                let kind = if t.is_fifo() {
                    "fifo"
                } else if t.is_char_device() {
                    "chr"
                } else if t.is_block_device() {
                    "blk"
                } else if t.is_socket() {
                    "sock"
                } else {
                    "other"
                };
                format!(
                    "{} {kind} {:o} {}:{}",
                    e.file_name().to_string_lossy(),
                    m.mode() & 0o7777,
                    libc::major(m.rdev()),
                    libc::minor(m.rdev())
                )
            })
            .collect();
        out.sort();
        out
    };
    for root in [&rig.mnt, &local] {
        fs::create_dir(root.join("s")).unwrap();
        let r = |p: &str| root.join("s").join(p);
        use rustix::fs::{CWD, FileType, Mode, makedev, mknodat};
        mknodat(
            CWD,
            r("fifo"),
            FileType::Fifo,
            Mode::from_raw_mode(0o640),
            0,
        )
        .unwrap();
        let (chr, blk) = (FileType::CharacterDevice, FileType::BlockDevice);
        mknodat(
            CWD,
            r("null"),
            chr,
            Mode::from_raw_mode(0o666),
            makedev(1, 3),
        )
        .unwrap();
        mknodat(
            CWD,
            r("loop"),
            blk,
            Mode::from_raw_mode(0o600),
            makedev(7, 9),
        )
        .unwrap();
        drop(std::os::unix::net::UnixListener::bind(r("sock")).unwrap());
        // O_RDWR on a FIFO opens without a peer (Linux): write, then read it back.
        let mut fifo = fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(r("fifo"))
            .unwrap();
        fifo.write_all(b"through the pipe").unwrap();
        let mut got = [0u8; 16];
        fifo.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"through the pipe", "on {}", root.display());
    }
    let want = listing(&local);
    assert_eq!(listing(&rig.mnt), want);
    // 0o666 under the test's umask 022.
    assert!(want.iter().any(|l| l == "null chr 644 1:3"), "{want:?}");
    assert!(want.iter().any(|l| l == "loop blk 600 7:9"), "{want:?}");
    rig.umount();
    rig.mount();
    assert_eq!(listing(&rig.mnt), want, "after a remount");
    for name in ["fifo", "null", "loop", "sock"] {
        fs::remove_file(rig.mnt.join("s").join(name)).unwrap();
    }
    assert!(listing(&rig.mnt).is_empty());
    fs::remove_dir(rig.mnt.join("s")).unwrap();
    rig.umount();
    let fsck = rig.ok(&["fsck"]);
    assert!(fsck.contains("fsck: clean"), "{fsck}");
}

/// Accounts `1..=n` of `server`, each its own replication group.
fn one_per_group(server: &Dovecot, n: usize) -> Vec<Vec<Account<'_>>> {
    (1..=n).map(|user| vec![Account { server, user }]).collect()
}

fn two_by_two<'a>(a: &'a Dovecot, b: &'a Dovecot) -> Vec<Vec<Account<'a>>> {
    // Group 0 and group 1 each mirror one account on server a and one on server b, so
    // stopping one server leaves every group one live member.
    (1..=2)
        .map(|u| {
            vec![
                Account { server: a, user: u },
                Account { server: b, user: u },
            ]
        })
        .collect()
}

#[test]
fn four_accounts_in_two_groups_survive_a_stopped_server_and_catch_up() {
    if !fuse_available() {
        return;
    }
    let a = Dovecot::start(2).unwrap();
    let mut b = Dovecot::start(2).unwrap();
    let rig = Rig::new(&two_by_two(&a, &b), "");
    rig.ok(&["mkfs"]);
    rig.mount();
    let mut files = BTreeMap::new();
    for i in 0..6u64 {
        let data = pattern(700_000 + i as usize * 1000, i);
        fs::write(rig.mnt.join(format!("before{i}")), &data).unwrap();
        files.insert(format!("before{i}"), data);
    }
    b.stop();
    // Reads and writes go on with one member per group.
    for (name, data) in &files {
        assert_eq!(&fs::read(rig.mnt.join(name)).unwrap(), data, "{name}");
    }
    for i in 0..6u64 {
        let data = pattern(500_000, 100 + i);
        fs::write(rig.mnt.join(format!("during{i}")), &data).unwrap();
        files.insert(format!("during{i}"), data);
    }
    fs::create_dir(rig.mnt.join("dir-during")).unwrap();
    fs::rename(rig.mnt.join("before0"), rig.mnt.join("dir-during/moved")).unwrap();
    let moved = files.remove("before0").unwrap();
    files.insert("dir-during/moved".into(), moved);
    rig.wait_stats("an account down, work owed to it", |s| {
        s["accounts"].contains("down") && s["pending_ops"].parse::<u64>().unwrap() > 0
    });
    // Back: the stopped accounts are caught up and marked up again.
    b.restart().unwrap();
    rig.wait_stats("catch up", |s| {
        s["pending_ops"] == "0" && !s["accounts"].contains("down")
    });
    rig.umount();
    // Now server a goes away: b alone must hold everything, including what was written
    // while it was down.
    drop(a);
    fs::remove_dir_all(rig.dir.path().join("cache")).unwrap();
    rig.mount();
    for (name, data) in &files {
        assert_eq!(&fs::read(rig.mnt.join(name)).unwrap(), data, "{name}");
    }
    rig.umount();
}

#[test]
fn sigkill_during_writes_and_renames_leaves_every_file_old_or_new() {
    if !fuse_available() {
        return;
    }
    let server = Dovecot::start(2).unwrap();
    let rig = Rig::new(&one_per_group(&server, 2), "");
    rig.ok(&["mkfs"]);
    // Sizes of several blocks each, so a torn write would show as mixed generations.
    let sizes: Vec<usize> = (0..6).map(|i| 200_000 + i * 90_000).collect();
    let content = |i: usize, generation: u64| pattern(sizes[i], 1000 * generation + i as u64);
    let pid = rig.mount();
    fs::create_dir(rig.mnt.join("d1")).unwrap();
    fs::create_dir(rig.mnt.join("d2")).unwrap();
    fs::write(rig.mnt.join("d1/roamer"), b"roamer").unwrap();
    for i in 0..sizes.len() {
        fs::write(rig.mnt.join(format!("f{i}")), content(i, 0)).unwrap();
    }
    let mut pid = pid;
    let mut max_generation = 0u64;
    for round in 0..6u64 {
        let mnt = rig.mnt.clone();
        let sizes_n = sizes.len();
        let first = max_generation + 1;
        let writer = std::thread::spawn(move || {
            let mut generation = first;
            'outer: loop {
                for i in 0..sizes_n {
                    // Same size each generation: one open, one write, one close (one commit).
                    let Ok(mut f) = fs::OpenOptions::new()
                        .write(true)
                        .open(mnt.join(format!("f{i}")))
                    else {
                        break 'outer;
                    };
                    let data = pattern(200_000 + i * 90_000, 1000 * generation + i as u64);
                    use std::io::Write;
                    if f.write_all(&data).is_err() || f.sync_all().is_err() {
                        break 'outer;
                    }
                    drop(f);
                    let (from, to) = if generation % 2 == 1 {
                        ("d1/roamer", "d2/roamer")
                    } else {
                        ("d2/roamer", "d1/roamer")
                    };
                    let _ = fs::rename(mnt.join(from), mnt.join(to));
                }
                generation += 1;
                if generation > first + 1000 {
                    break;
                }
            }
            generation
        });
        std::thread::sleep(Duration::from_millis(300 + (round * 397) % 900));
        let _ = Command::new("kill").arg("-9").arg(pid.to_string()).status();
        let reached = writer.join().unwrap();
        max_generation = max_generation.max(reached);
        rig.detach();
        // A fresh cache too: the servers alone must hold a consistent tree.
        let _ = fs::remove_dir_all(rig.dir.path().join("cache"));
        pid = rig.mount();
        for i in 0..sizes.len() {
            let got = fs::read(rig.mnt.join(format!("f{i}"))).unwrap();
            if !(0..=max_generation).any(|g| got == content(i, g)) {
                // Which generation each 128 KiB block came from, to tell a torn write from
                // garbage.
                let per_block: Vec<String> = got
                    .chunks(128 << 10)
                    .enumerate()
                    .map(|(b, chunk)| {
                        (0..=max_generation)
                            .find(|&g| content(i, g).chunks(128 << 10).nth(b) == Some(chunk))
                            .map_or_else(
                                || {
                                    if chunk.iter().all(|&x| x == 0) {
                                        "zeros".to_string()
                                    } else {
                                        let other = (0..sizes.len()).find_map(|j| {
                                            (0..=max_generation)
                                                .find(|&g| {
                                                    content(j, g).chunks(128 << 10).nth(b)
                                                        == Some(chunk)
                                                })
                                                .map(|g| format!("f{j}g{g}"))
                                        });
                                        other.unwrap_or_else(|| "?".into())
                                    }
                                },
                                |g| g.to_string(),
                            )
                    })
                    .collect();
                // Stored state or read path? Read again through a fresh mount.
                rig.umount();
                let _ = fs::remove_dir_all(rig.dir.path().join("cache"));
                rig.mount();
                let again = fs::read(rig.mnt.join(format!("f{i}"))).unwrap();
                rig.umount();
                let versions = rig.fs(&["versions", &format!("/f{i}")]).1;
                panic!(
                    "round {round}: f{i} is torn ({} bytes): block generations {per_block:?}; \
                     a second fresh read is {}; versions:\n{versions}",
                    got.len(),
                    if again == got {
                        "the same"
                    } else {
                        "different"
                    }
                );
            }
        }
        let in_d1 = rig.mnt.join("d1/roamer").exists();
        let in_d2 = rig.mnt.join("d2/roamer").exists();
        assert!(
            in_d1 ^ in_d2,
            "round {round}: roamer in d1 {in_d1}, d2 {in_d2}"
        );
    }
    rig.umount();
    // fsck may rewrite a copy a kill interrupted; nothing may be beyond repair, and a second
    // run finds it clean.
    rig.ok(&["fsck"]);
    let again = rig.ok(&["fsck"]);
    assert!(again.contains("fsck: clean"), "{again}");
}

/// Talks to an account directly, as a third party would.
fn imap(server: &Dovecot, user: usize) -> (tokio::runtime::Runtime, Client) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let (u, p) = server.user(user);
    let mut cfg = imap_client::Config::new("127.0.0.1", server.port(), u, p);
    cfg.tls = imap_client::Tls::None;
    let mut c = rt.block_on(Client::connect(&cfg)).unwrap();
    rt.block_on(c.select("mailfs")).unwrap();
    (rt, c)
}

#[test]
fn a_planted_message_and_a_swapped_block_are_rejected() {
    if !fuse_available() {
        return;
    }
    let server = Dovecot::start(1).unwrap();
    let rig = Rig::new(
        &[vec![Account {
            server: &server,
            user: 1,
        }]],
        "",
    );
    rig.ok(&["mkfs"]);
    rig.mount();
    fs::write(rig.mnt.join("victim"), pattern(200_000, 1)).unwrap();
    fs::write(rig.mnt.join("victim"), pattern(200_000, 2)).unwrap();
    fs::write(rig.mnt.join("bystander"), b"unharmed").unwrap();
    rig.umount();
    let (rt, mut c) = imap(&server, 1);
    let names = rt
        .block_on(c.uid_fetch_header_field("1:*", "X-Mailfs"))
        .unwrap();
    // Block 0 of the victim, version 1 (old) and its current version.
    let blocks: Vec<&(u32, String)> = names
        .iter()
        .filter(|(_, n)| n.contains(" blk ") && n.contains(".0 v"))
        .collect();
    // (Each fs::write truncates first, a commit of its own, so versions are not 1 and 2.)
    let version = |n: &str| -> u64 {
        n.split(' ')
            .find_map(|w| w.strip_prefix('v')?.parse().ok())
            .unwrap()
    };
    let old = blocks.iter().min_by_key(|(_, n)| version(n)).unwrap();
    let new = blocks.iter().max_by_key(|(_, n)| version(n)).unwrap();
    assert!(version(&old.1) < version(&new.1));
    let old_body = rt.block_on(c.uid_fetch_body(old.0, None)).unwrap().unwrap();
    // The swap: the old block's bytes under the new block's name, the real one removed.
    let forged = mailfs::imap_remote::build_message(&new.1, &old_body, true);
    rt.block_on(c.append("mailfs", &[&forged], true)).unwrap();
    rt.block_on(c.uid_expunge(&[new.0])).unwrap();
    // A planted directory claiming to be the newest root, and plain junk mail.
    let root = names
        .iter()
        .find(|(_, n)| n.contains(" dir 000000000001.0 "))
        .unwrap();
    let fsid = root.1.split(' ').next().unwrap();
    let planted = mailfs::imap_remote::build_message(
        &format!("{fsid} dir 000000000001.0 v999 t1"),
        &[7u8; 300],
        true,
    );
    let junk = b"From: spammer@example.com\r\nSubject: hi\r\n\r\nbuy now\r\n".to_vec();
    rt.block_on(c.append("mailfs", &[&planted, &junk], true))
        .unwrap();
    fs::remove_dir_all(rig.dir.path().join("cache")).unwrap();
    rig.mount();
    // The planted root is skipped: the tree is intact.
    assert_eq!(fs::read(rig.mnt.join("bystander")).unwrap(), b"unharmed");
    // The swapped block is refused, not served.
    let err = fs::read(rig.mnt.join("victim")).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::EIO), "{err}");
    // The mount rewrites its stats file every second.
    rig.wait_stats("integrity errors counted", |s| {
        s["integrity_errors"].parse::<u64>().unwrap() >= 2
    });
    rig.umount();
    let (ok, out) = rig.fs(&["fsck"]);
    assert!(!ok && out.contains("unrecoverable=1"), "{out}");
    assert!(out.contains("foreign_messages=1"), "{out}");
}

#[test]
fn versions_restore_snapshots_and_gc_through_the_mount() {
    if !fuse_available() {
        return;
    }
    let server = Dovecot::start(1).unwrap();
    let rig = Rig::new(
        &[vec![Account {
            server: &server,
            user: 1,
        }]],
        "",
    );
    rig.ok(&["mkfs"]);
    rig.mount();
    let v1 = pattern(400_000, 1);
    fs::write(rig.mnt.join("doc"), &v1).unwrap();
    rig.umount();
    rig.ok(&["snapshot", "first"]);
    rig.mount();
    fs::write(rig.mnt.join("doc"), pattern(300_000, 2)).unwrap();
    // The snapshot shows the old tree, read-only.
    assert_eq!(fs::read(rig.mnt.join(".snapshots/first/doc")).unwrap(), v1);
    assert_eq!(
        fs::write(rig.mnt.join(".snapshots/first/doc"), b"x")
            .unwrap_err()
            .raw_os_error(),
        Some(libc::EROFS)
    );
    // A big file to delete, for gc.
    fs::write(rig.mnt.join("big"), pattern(6 << 20, 3)).unwrap();
    rig.umount();
    let versions = rig.ok(&["versions", "/doc"]);
    let listed: Vec<&str> = versions
        .lines()
        .filter(|l| l.starts_with("version="))
        .collect();
    assert!(listed.len() >= 2, "{versions}");
    let v1_number = listed
        .iter()
        .find(|l| l.contains("size=400000"))
        .and_then(|l| l.strip_prefix("version="))
        .and_then(|l| l.split(' ').next())
        .unwrap()
        .to_string();
    rig.ok(&["restore", "/doc", "--version", &v1_number]);
    rig.mount();
    assert_eq!(
        fs::read(rig.mnt.join("doc")).unwrap(),
        v1,
        "restored byte for byte"
    );
    fs::remove_file(rig.mnt.join("big")).unwrap();
    rig.umount();
    let (rt, mut c) = imap(&server, 1);
    let used_before = rt.block_on(c.quota("mailfs")).unwrap().unwrap().0;
    let gc = rig.ok(&["gc"]);
    assert!(gc.contains("gc: removed"), "{gc}");
    let used_after = rt.block_on(c.quota("mailfs")).unwrap().unwrap().0;
    assert!(
        used_before - used_after >= 6 << 20,
        "space returned: {used_before} -> {used_after}"
    );
    // Everything current and pinned still reads.
    rig.mount();
    assert_eq!(fs::read(rig.mnt.join("doc")).unwrap(), v1);
    assert_eq!(fs::read(rig.mnt.join(".snapshots/first/doc")).unwrap(), v1);
    rig.umount();
    let fsck = rig.ok(&["fsck"]);
    assert!(fsck.contains("fsck: clean"), "{fsck}");
}

#[test]
fn bad_input_gets_clear_cli_errors_not_hangs() {
    let dir = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        let out = Command::new(bin()).arg("fs").args(args).output().unwrap();
        (
            out.status.success(),
            format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ),
        )
    };
    let (ok, out) = run(&["mkfs"]);
    assert!(!ok && out.contains("needs --config"), "{out}");
    let missing = dir.path().join("absent.toml");
    let (ok, out) = run(&["--config", missing.to_str().unwrap(), "mkfs"]);
    assert!(!ok && out.contains("absent.toml"), "{out}");
    let (ok, out) = run(&["umount", dir.path().to_str().unwrap()]);
    assert!(!ok && out.contains("not a mailfs mount"), "{out}");
    // An account nobody listens on: refused promptly, with the account named.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let config = dir.path().join("fs.toml");
    fs::write(
        &config,
        format!(
            "[fs]\ntimeout_ms = 2000\n[encryption]\ncipher = \"none\"\n[cache]\ndir = {:?}\n[[group]]\n[[group.account]]\nhost = \"127.0.0.1\"\nport = {port}\ntls = \"none\"\nuser = \"nobody\"\npassword = \"x\"\n",
            dir.path().join("cache")
        ),
    )
    .unwrap();
    let started = Instant::now();
    let (ok, out) = run(&["--config", config.to_str().unwrap(), "mkfs"]);
    assert!(!ok && out.contains("nobody@127.0.0.1"), "{out}");
    assert!(started.elapsed() < Duration::from_secs(20));
    let (ok, out) = run(&[
        "--config",
        config.to_str().unwrap(),
        "mount",
        "/nonexistent-dir",
    ]);
    assert!(!ok && out.contains("not a directory"), "{out}");
    fs::write(&config, "[fs]\nblock_size = 1000\n").unwrap();
    let (ok, out) = run(&["--config", config.to_str().unwrap(), "gc"]);
    assert!(!ok && out.contains("block_size"), "{out}");
}

#[test]
fn dedup_stores_a_copy_as_manifests_and_reads_it_back() {
    if !fuse_available() {
        eprintln!("skipped: no /dev/fuse");
        return;
    }
    let server = Dovecot::start(2).unwrap();
    let rig = Rig::new(
        &one_per_group(&server, 2),
        "dedup = true\norphan_grace = \"1h\"",
    );
    rig.ok(&["mkfs"]);
    rig.mount();
    let data = pattern(6 << 20, 5);
    fs::write(rig.mnt.join("one"), &data).unwrap();
    fs::copy(rig.mnt.join("one"), rig.mnt.join("two")).unwrap();
    let want = data.len() as u64 * 9 / 10;
    rig.wait_stats("the copy deduplicated", |s| {
        s.get("bytes_deduplicated")
            .and_then(|v| v.parse::<u64>().ok())
            .is_some_and(|b| b >= want)
    });
    rig.umount();
    // From the servers alone: manifests, then chunks.
    fs::remove_dir_all(rig.dir.path().join("cache")).unwrap();
    rig.mount();
    assert!(fs::read(rig.mnt.join("one")).unwrap() == data);
    assert!(fs::read(rig.mnt.join("two")).unwrap() == data);
    rig.umount();
    let fsck = rig.ok(&["fsck"]);
    assert!(fsck.contains("fsck: clean"), "{fsck}");
    assert!(!fsck.contains("chunks=0\n"), "{fsck}");
}

#[test]
fn files_written_with_binary_transfer_read_with_base64_and_back() {
    if !fuse_available() {
        eprintln!("skipped: no /dev/fuse");
        return;
    }
    let server = Dovecot::start(1).unwrap();
    let rig = Rig::new(
        &[vec![Account {
            server: &server,
            user: 1,
        }]],
        "",
    );
    let base64_config = fs::read_to_string(&rig.config).unwrap();
    assert!(!base64_config.contains("transfer"), "base64 is the default");
    let binary_config = base64_config.replace(
        "connections = 2\n",
        "connections = 2\ntransfer = \"binary\"\n",
    );
    let cache = rig.dir.path().join("cache");
    fs::write(&rig.config, &binary_config).unwrap();
    rig.ok(&["mkfs"]);
    rig.mount();
    // Several blocks and a partial one, through literal8 APPEND.
    let first = pattern((1 << 20) + 12_345, 11);
    fs::write(rig.mnt.join("first"), &first).unwrap();
    rig.umount();
    // From the servers alone in the other mode: BODY.PEEK[] and base64 here.
    fs::remove_dir_all(&cache).unwrap();
    fs::write(&rig.config, &base64_config).unwrap();
    rig.mount();
    assert!(fs::read(rig.mnt.join("first")).unwrap() == first);
    let second = pattern(777_777, 12);
    fs::write(rig.mnt.join("second"), &second).unwrap();
    rig.umount();
    // And back: BINARY.PEEK[1] of what was written in base64.
    fs::remove_dir_all(&cache).unwrap();
    fs::write(&rig.config, &binary_config).unwrap();
    rig.mount();
    assert!(fs::read(rig.mnt.join("first")).unwrap() == first);
    assert!(fs::read(rig.mnt.join("second")).unwrap() == second);
    rig.umount();
    let fsck = rig.ok(&["fsck"]);
    assert!(fsck.contains("fsck: clean"), "{fsck}");
}

#[test]
fn random_reads_fetch_only_their_segments_in_both_transfer_modes() {
    use std::os::unix::fs::FileExt;
    if !fuse_available() {
        eprintln!("skipped: no /dev/fuse");
        return;
    }
    let server = Dovecot::start(1).unwrap();
    let rig = Rig::new(
        &[vec![Account {
            server: &server,
            user: 1,
        }]],
        "block_size = 1048576",
    );
    let base64_config = fs::read_to_string(&rig.config).unwrap();
    let binary_config = base64_config.replace(
        "connections = 2\n",
        "connections = 2\ntransfer = \"binary\"\n",
    );
    let cache = rig.dir.path().join("cache");
    rig.ok(&["mkfs"]);
    rig.mount();
    let data = pattern(4 << 20, 21);
    fs::write(rig.mnt.join("big"), &data).unwrap();
    rig.umount();
    // One in each block, far apart, so each is random access; one crosses a 64 KiB
    // segment boundary.
    let offsets = [3_000_000u64, 10, (1 << 20) + 65_536 - 50, 3_900_000];
    for config in [&base64_config, &binary_config] {
        fs::remove_dir_all(&cache).unwrap();
        fs::write(&rig.config, config).unwrap();
        rig.mount();
        let file = fs::File::open(rig.mnt.join("big")).unwrap();
        for &o in &offsets {
            let mut got = vec![0u8; 4096];
            file.read_exact_at(&mut got, o).unwrap();
            assert!(got == data[o as usize..o as usize + 4096], "at {o}");
        }
        drop(file);
        // The kernel may merge or split requests; most reads must have been partial, and
        // far less than a block per read fetched. (The stats file is written every second.)
        let number = |s: &BTreeMap<String, String>, k: &str| -> u64 {
            s.get(k).and_then(|v| v.parse().ok()).unwrap_or(0)
        };
        rig.wait_stats("partial fetches", |s| number(s, "partial_fetches") >= 3);
        let stats = rig.stats();
        assert!(number(&stats, "bytes_fetched") < 1 << 20, "{stats:?}");
        assert_eq!(stats["blocks_fetched"], "0", "{stats:?}");
        assert_eq!(stats["integrity_errors"], "0");
        rig.umount();
    }
}

/// Reads straight after a write go to the servers (a 1 MiB memory cache, no page cache)
/// over whichever pooled session is free, and a session that has not yet seen the
/// messages another one just appended must still find them (a server reports new messages
/// only when a command lets it: RFC 3501 5.2, 6.1.2).
#[test]
fn a_file_reads_back_straight_after_it_is_written_from_any_session() {
    use std::os::unix::fs::FileExt;
    if !fuse_available() {
        eprintln!("skipped: no /dev/fuse");
        return;
    }
    let server = Dovecot::start(2).unwrap();
    let rig = Rig::new(&one_per_group(&server, 2), "block_size = 1048576");
    let config = fs::read_to_string(&rig.config)
        .unwrap()
        .replace("[cache]\n", "[cache]\nmemory_bytes = 1048576\n");
    fs::write(&rig.config, config).unwrap();
    rig.ok(&["mkfs"]);
    rig.mount();
    for round in 0..3u64 {
        let name = rig.mnt.join(format!("fresh{round}"));
        let data = pattern(32 << 20, round);
        // In small writes, as fio lays out a file: many uploads over every session.
        {
            use std::io::Write;
            let mut f = fs::File::create(&name).unwrap();
            for piece in data.chunks(64 << 10) {
                f.write_all(piece).unwrap();
            }
        }
        let file = fs::File::open(&name).unwrap();
        for i in 0..64u64 {
            let o = (i * 7_919_993 + round * 1_234_567) % (data.len() as u64 - 4096);
            let mut got = vec![0u8; 4096];
            file.read_exact_at(&mut got, o)
                .unwrap_or_else(|e| panic!("round {round}, offset {o}: {e}"));
            assert!(
                got == data[o as usize..o as usize + 4096],
                "round {round} at {o}"
            );
        }
    }
    rig.umount();
}
