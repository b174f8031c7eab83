//! A file rewritten in place (issue 41, item 1): the accounts hold a small multiple of the
//! live data, and the rate of operations stays flat as the run goes on.

use std::collections::BTreeMap;
use std::fs::{self, OpenOptions};
use std::os::unix::fs::FileExt;
use std::time::{Duration, Instant};

use test_peers::Dovecot;

use crate::rig::*;

/// fsx's operations on one file, checked against a model in memory.
struct Fsx {
    x: u64,
    model: Vec<u8>,
    size_max: usize,
}

impl Fsx {
    fn new(seed: u64, size_max: usize) -> Fsx {
        Fsx {
            x: seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1,
            model: Vec::new(),
            size_max,
        }
    }

    fn next(&mut self) -> u64 {
        self.x ^= self.x << 13;
        self.x ^= self.x >> 7;
        self.x ^= self.x << 17;
        self.x
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }

    /// One operation: a write (half), a read (a third) or a truncate, as fsx mixes them.
    fn step(&mut self, f: &fs::File, op: usize) {
        let roll = self.below(12);
        if roll < 6 {
            let off = self.below(self.size_max);
            let len = 1 + self.below((self.size_max - off).min(64 << 10));
            let data: Vec<u8> = (0..len).map(|_| self.next() as u8).collect();
            f.write_all_at(&data, off as u64).unwrap();
            if self.model.len() < off + len {
                self.model.resize(off + len, 0);
            }
            self.model[off..off + len].copy_from_slice(&data);
        } else if roll < 10 {
            if self.model.is_empty() {
                return;
            }
            let off = self.below(self.model.len());
            let len = 1 + self.below((self.model.len() - off).min(64 << 10));
            let mut got = vec![0; len];
            f.read_exact_at(&mut got, off as u64).unwrap();
            assert!(
                got == self.model[off..off + len],
                "op {op}: read of {len} bytes at {off} differs from the model"
            );
        } else {
            let size = self.below(self.size_max + 1);
            f.set_len(size as u64).unwrap();
            self.model.resize(size, 0);
        }
    }
}

/// (messages, bytes, messages by kind) in an account's folder, as the server counts them
/// (SELECT, QUOTA, the X-Mailfs header of each).
fn account_usage(server: &Dovecot, user: usize) -> (u64, u64, BTreeMap<String, u64>) {
    let (rt, mut c) = imap(server, user);
    let mailbox = rt.block_on(c.select("mailfs")).unwrap();
    let (used, _) = rt
        .block_on(c.quota("mailfs"))
        .unwrap()
        .expect("the test Dovecot has a quota");
    let mut kinds = BTreeMap::new();
    for (_, v) in rt
        .block_on(c.uid_fetch_header_field("1:*", "X-Mailfs"))
        .unwrap()
    {
        let kind = v.split(' ').nth(1).unwrap_or("?").to_string();
        *kinds.entry(kind).or_insert(0) += 1;
    }
    (u64::from(mailbox.exists), used, kinds)
}

#[test]
fn a_file_rewritten_in_place_keeps_the_accounts_small_and_the_rate_flat() {
    if !fuse_available() {
        return;
    }
    // Two blocks of 128 KiB (the rig's block size).
    rewrite_run(256 << 10, ops_from_env("MAILFS_REWRITE_OPS", 6000));
}

/// The multi-block case: 64 blocks, a commit supersedes a few of them (a truncate many),
/// so the lists reclaim holds per file are long.
#[test]
fn a_multi_block_file_rewritten_in_place_keeps_the_accounts_small_and_the_rate_flat() {
    if !fuse_available() {
        return;
    }
    rewrite_run(8 << 20, ops_from_env("MAILFS_REWRITE_8M_OPS", 1500));
}

fn ops_from_env(var: &str, default: usize) -> usize {
    std::env::var(var)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// `ops` fsx operations on one file of at most `size_max` bytes, fsync every 4, then issue
/// 41's bound: each account at most 4x live + 64 MiB, the last tenths' rate within 1.5x of
/// the first's, and the content right after a remount and clean to fsck.
fn rewrite_run(size_max: usize, ops: usize) {
    const FSYNC_EVERY: usize = 4;
    let server = Dovecot::start(2).unwrap();
    // One group of two accounts. The defaults that matter here are the real ones
    // (retention 7 days, orphan_grace 1 h, versions_max 8, reclaim_delay_ms 2000), not the
    // rig's retention 0; blocks of 128 KiB (the rig's).
    let rig = Rig::new(
        &[vec![
            Account {
                server: &server,
                user: 1,
            },
            Account {
                server: &server,
                user: 2,
            },
        ]],
        "retention = \"7d\"\norphan_grace = \"1h\"",
    );
    rig.ok(&["mkfs"]);
    rig.mount();
    let path = rig.mnt.join("db");
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&path)
        .unwrap();
    let mut fsx = Fsx::new(41, size_max);
    let tenth = ops / 10;
    let mut tenths = Vec::new();
    let mut started = Instant::now();
    for op in 0..ops {
        fsx.step(&f, op);
        if op % FSYNC_EVERY == FSYNC_EVERY - 1 {
            f.sync_all().unwrap();
        }
        if op % tenth == tenth - 1 {
            tenths.push(tenth as f64 / started.elapsed().as_secs_f64());
            started = Instant::now();
        }
    }
    f.sync_all().unwrap();
    drop(f);
    // Reclaim runs `reclaim_delay_ms` behind the commits.
    std::thread::sleep(Duration::from_secs(4));
    let live = fsx.model.len() as u64;
    let stats = rig.stats();
    let reclaimed: u64 = stats["reclaimed_messages"].parse().unwrap();
    let mut report = format!(
        "{ops} ops on a file of at most {size_max} bytes, live {live} bytes, ops/s per tenth {:?}, reclaimed_messages {reclaimed} reclaimed_bytes {}",
        tenths.iter().map(|r| r.round()).collect::<Vec<_>>(),
        stats["reclaimed_bytes"]
    );
    let mut usage = Vec::new();
    for user in 1..=2 {
        let (messages, bytes, kinds) = account_usage(&server, user);
        report.push_str(&format!(
            "; account {user}: {messages} messages {kinds:?}, {bytes} bytes"
        ));
        usage.push((messages, bytes));
    }
    eprintln!("{report}");
    assert!(reclaimed > 0, "{report}\nlog: {}", rig.log());
    for (_, bytes) in &usage {
        assert!(
            *bytes <= 4 * live + (64 << 20),
            "an account holds more than 4x live + 64 MiB: {report}"
        );
    }
    // The middle of the first three tenths against the middle of the last three: one tenth
    // slowed by another process on a shared machine is not a slowdown of the mount, while a
    // folder that grows (the failure this guards against) slows every later tenth.
    let median3 = |t: &[f64]| {
        let mut t = t.to_vec();
        t.sort_by(f64::total_cmp);
        t[1]
    };
    let (first, last) = (median3(&tenths[..3]), median3(&tenths[tenths.len() - 3..]));
    assert!(
        last * 1.5 >= first,
        "the last tenths ran at less than 1/1.5 of the first: {report}"
    );
    // What the mount kept reads back right after a remount.
    rig.umount();
    rig.mount();
    assert!(fs::read(&path).unwrap() == fsx.model, "{report}");
    rig.umount();
    let fsck = rig.ok(&["fsck"]);
    assert!(fsck.contains("fsck: clean"), "{fsck}");
}
