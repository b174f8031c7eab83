//! Engine tests over in-memory accounts (the real IMAP and FUSE paths are tested in
//! crates/mailstow/tests/mailfs/ against Dovecot).

use std::sync::Arc;
use std::sync::atomic::Ordering;

use crate::FsError;
use crate::config::Config;
use crate::fs::{Fs, ROOT, SetAttr};
use crate::locking::MutexExt;
use crate::meta::Kind;
use crate::remote::Remote;
use crate::remote::mem::MemRemote;

mod crashes;
mod files;
mod history;
mod inline;
mod links;
mod local_disk;
mod metalog;
mod reads;
mod reclaim;
mod replicas;
mod writeback;

struct Rig {
    config: Config,
    accounts: Vec<Arc<MemRemote>>,
    _cache: tempfile::TempDir,
}

/// Lets a test keep a handle on an account the engine owns.
struct Shared(Arc<MemRemote>);

impl Remote for Shared {
    fn describe(&self) -> String {
        self.0.describe()
    }
    fn prepare(&self) -> Result<(), crate::remote::RemoteError> {
        self.0.prepare()
    }
    fn append(
        &self,
        batch: &[(String, &[u8])],
    ) -> Result<Vec<Option<u32>>, crate::remote::RemoteError> {
        self.0.append(batch)
    }
    fn fetch(&self, uid: u32) -> Result<Option<Vec<u8>>, crate::remote::RemoteError> {
        self.0.fetch(uid)
    }
    fn list(&self) -> Result<Vec<(u32, String)>, crate::remote::RemoteError> {
        self.0.list()
    }
    fn find(&self, name: &str) -> Result<Vec<u32>, crate::remote::RemoteError> {
        self.0.find(name)
    }
    fn expunge(&self, uids: &[u32]) -> Result<(), crate::remote::RemoteError> {
        self.0.expunge(uids)
    }
    fn quota(&self) -> Result<Option<(u64, u64)>, crate::remote::RemoteError> {
        self.0.quota()
    }
    fn ping(&self) -> Result<(), crate::remote::RemoteError> {
        self.0.ping()
    }
}

impl Rig {
    /// Four accounts in two groups of two, 4 KiB blocks.
    fn new(extra: &str) -> Rig {
        Rig::with_cache(extra, "")
    }

    /// Like [`Rig::new`], with `cache_extra` in the `[cache]` section.
    fn with_cache(extra: &str, cache_extra: &str) -> Rig {
        let cache = tempfile::tempdir().unwrap();
        // `extra` may override a default.
        let defaults: String = [
            "block_size = 4096",
            "retention = \"0\"",
            "orphan_grace = \"0\"",
            // Every directory change its own page before the operation returns, so the
            // crash tests below can stop the servers between any two of them.
            "metadata_batch_ms = 0",
        ]
        .iter()
        .filter(|d| !extra.contains(d.split(' ').next().expect("a key")))
        .map(|d| format!("{d}\n"))
        .collect();
        let mut text = format!(
            "[fs]\n{defaults}{extra}\n[cache]\ndir = {:?}\n{cache_extra}\n[encryption]\npassphrase = \"test\"\n",
            cache.path()
        );
        for g in 0..2 {
            text.push_str("[[group]]\n");
            for a in 0..2 {
                text.push_str(&format!(
                    "[[group.account]]\nhost = \"mem\"\nuser = \"u{g}{a}\"\npassword = \"p\"\n"
                ));
            }
        }
        let config = Config::parse(&text).unwrap();
        // Accounts 0 and 2 on one server, 1 and 3 on another, as two servers would hold
        // the two groups' members (hedged reads prefer another server).
        let accounts = (0..4)
            .map(|i| Arc::new(MemRemote::new(&format!("mem{i}@server{}", i % 2))))
            .collect();
        Rig {
            config,
            accounts,
            _cache: cache,
        }
    }

    fn remotes(&self) -> Vec<Box<dyn Remote>> {
        self.accounts
            .iter()
            .map(|a| Box::new(Shared(a.clone())) as Box<dyn Remote>)
            .collect()
    }

    fn mkfs(&self) -> Arc<Fs> {
        Fs::mkfs(&self.config, self.remotes()).unwrap();
        self.mount()
    }

    fn mount(&self) -> Arc<Fs> {
        Fs::open(&self.config, self.remotes()).unwrap()
    }
}

fn write_file(fs: &Fs, parent: u64, name: &str, data: &[u8]) -> u64 {
    let (st, fh) = fs.create(parent, name.as_bytes(), 0o644, 0, 0).unwrap();
    fs.write(st.ino, 0, data).unwrap();
    fs.release(fh).unwrap();
    st.ino
}

fn read_all(fs: &Fs, ino: u64) -> Vec<u8> {
    let size = fs.getattr(ino).unwrap().size;
    fs.read(ino, 0, size as u32).unwrap()
}

/// The file version that wrote a block message (its version's high bits).
fn block_file_version(name: &str) -> u64 {
    crate::message_name::MessageName::parse(name)
        .map_or(0, |k| crate::fs::file_version_of(k.version))
}

fn pattern(n: usize, seed: u8) -> Vec<u8> {
    (0..n)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

/// Messages of one kind (" log ", " dir ", " blk ") in account `i`.
fn messages_of(rig: &Rig, i: usize, kind: &str) -> usize {
    rig.accounts[i]
        .messages
        .lock_or_panic()
        .values()
        .filter(|(n, _)| n.contains(kind))
        .count()
}

fn noise(n: usize, seed: u64) -> Vec<u8> {
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

fn chunk_messages(rig: &Rig) -> usize {
    rig.accounts
        .iter()
        .map(|a| {
            a.messages
                .lock_or_panic()
                .values()
                .filter(|(n, _)| {
                    crate::message_name::MessageName::parse(n)
                        .is_some_and(|k| k.kind == mailfs_format::Kind::Chunk)
                })
                .count()
        })
        .sum()
}

/// Files in the disk cache (every mount of a rig shares one state directory).
fn disk_cache_files(rig: &Rig) -> usize {
    walk(&rig.config.cache.dir)
        .iter()
        .filter(|p| p.parent().is_some_and(|d| d.ends_with("blocks")))
        .count()
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

fn meta_inline_max() -> usize {
    crate::meta::INLINE_BYTES_MAX
}
