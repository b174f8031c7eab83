//! The test rig: private Dovecot accounts, a file system made on them, its mount, and
//! the comparisons of a mount with a local directory.

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use imap_client::Client;
use test_peers::Dovecot;

pub(crate) fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_mailstow")
}

/// FUSE needs /dev/fuse and root (mount(2) directly) or fusermount3.
pub(crate) fn fuse_available() -> bool {
    Path::new("/dev/fuse").exists()
}

pub(crate) struct Account<'a> {
    pub(crate) server: &'a Dovecot,
    pub(crate) user: usize,
}

pub(crate) struct Rig {
    pub(crate) dir: tempfile::TempDir,
    pub(crate) config: PathBuf,
    pub(crate) mnt: PathBuf,
}

impl Rig {
    /// `groups`: each group's accounts. `extra` goes into `[fs]`.
    pub(crate) fn new(groups: &[Vec<Account>], extra: &str) -> Rig {
        let dir = tempfile::tempdir().unwrap();
        let mnt = dir.path().join("mnt");
        fs::create_dir(&mnt).unwrap();
        // `extra` may override a default.
        let defaults: String = [
            "block_size = 131072",
            "retention = \"0\"",
            "orphan_grace = \"0\"",
            "timeout_ms = 3000",
            // A loaded test machine can keep a live Dovecot silent for 2 s (the default).
            "member_deadline_ms = 3000",
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

    pub(crate) fn fs(&self, args: &[&str]) -> (bool, String) {
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

    pub(crate) fn ok(&self, args: &[&str]) -> String {
        let (ok, text) = self.fs(args);
        assert!(ok, "mailstow fs {args:?}: {text}\nlog: {}", self.log());
        text
    }

    pub(crate) fn log(&self) -> String {
        fs::read_to_string(self.dir.path().join("cache/mount.log")).unwrap_or_default()
    }

    /// Mounts in the background; returns the server's pid.
    pub(crate) fn mount(&self) -> u32 {
        let out = self.ok(&["mount", self.mnt.to_str().unwrap()]);
        out.split("server pid ")
            .nth(1)
            .and_then(|s| s.split(|c: char| !c.is_ascii_digit()).next())
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("no pid in {out}"))
    }

    pub(crate) fn umount(&self) {
        self.ok(&["umount", self.mnt.to_str().unwrap()]);
    }

    /// After a SIGKILL the kernel still has the (dead) mount: detach it.
    pub(crate) fn detach(&self) {
        let _ = Command::new("umount").arg("-l").arg(&self.mnt).status();
    }

    /// `key=value` lines of `mailstow fs stats`.
    pub(crate) fn stats(&self) -> BTreeMap<String, String> {
        self.ok(&["stats"])
            .lines()
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    pub(crate) fn wait_stats(&self, what: &str, ok: impl Fn(&BTreeMap<String, String>) -> bool) {
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

pub(crate) fn pattern(n: usize, seed: u64) -> Vec<u8> {
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
pub(crate) fn snapshot(root: &Path) -> BTreeMap<String, String> {
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
                    "file {mode:o} links {} {} {} mtime {}",
                    m.nlink(),
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
pub(crate) fn assert_same_tree(got_root: &Path, want_root: &Path, rig: &Rig) {
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
pub(crate) fn describe_content_diff(got: &[u8], want: &[u8]) -> String {
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

/// Accounts `1..=n` of `server`, each its own replication group.
pub(crate) fn one_per_group(server: &Dovecot, n: usize) -> Vec<Vec<Account<'_>>> {
    (1..=n).map(|user| vec![Account { server, user }]).collect()
}

pub(crate) fn two_by_two<'a>(a: &'a Dovecot, b: &'a Dovecot) -> Vec<Vec<Account<'a>>> {
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

/// Talks to an account directly, as a third party would.
pub(crate) fn imap(server: &Dovecot, user: usize) -> (tokio::runtime::Runtime, Client) {
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
