//! Engine tests over in-memory accounts (the real IMAP and FUSE paths are tested in
//! crates/mailstow/tests/mailfs/ against Dovecot).

use std::sync::Arc;
use std::sync::atomic::Ordering;

use crate::FsError;
use crate::config::Config;
use crate::fs::{Fs, ROOT, SetAttr};
use crate::meta::Kind;
use crate::remote::Remote;
use crate::remote::mem::MemRemote;

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
        let accounts = (0..4)
            .map(|i| Arc::new(MemRemote::new(&format!("mem{i}"))))
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
    crate::key::Key::parse(name).map_or(0, |k| crate::fs::file_version_of(k.version))
}

fn pattern(n: usize, seed: u8) -> Vec<u8> {
    (0..n)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

#[test]
fn files_survive_a_remount_and_are_striped_over_both_groups() {
    let rig = Rig::new("");
    let fs = rig.mkfs();
    let data = pattern(40_000, 1);
    let ino = write_file(&fs, ROOT, "big", &data);
    assert_eq!(read_all(&fs, ino), data);
    let dir = fs.mkdir(ROOT, b"sub", 0o755, 0, 0).unwrap();
    write_file(&fs, dir.ino, "small", b"hello");
    drop(fs);
    let fs = rig.mount();
    let st = fs.lookup(ROOT, b"big").unwrap();
    assert_eq!(read_all(&fs, st.ino), data);
    let sub = fs.lookup(ROOT, b"sub").unwrap();
    let small = fs.lookup(sub.ino, b"small").unwrap();
    assert_eq!(read_all(&fs, small.ino), b"hello");
    // Ten blocks over two groups: both groups (and both members of each) hold blocks.
    for a in &rig.accounts {
        let blocks = a
            .messages
            .lock()
            .unwrap()
            .values()
            .filter(|(n, _)| n.contains(" blk "))
            .count();
        assert!(blocks >= 3, "{} holds {blocks} blocks", a.name);
    }
    // Encrypted: the plain bytes are nowhere in the accounts.
    for a in &rig.accounts {
        for (_, body) in a.messages.lock().unwrap().values() {
            assert!(!body.windows(5).any(|w| w == b"hello"));
        }
    }
}

#[test]
fn writes_at_offsets_truncate_and_holes() {
    let rig = Rig::new("");
    let fs = rig.mkfs();
    let (st, fh) = fs.create(ROOT, b"f", 0o600, 0, 0).unwrap();
    let mut model = vec![0u8; 0];
    let apply = |model: &mut Vec<u8>, off: usize, data: &[u8]| {
        if model.len() < off + data.len() {
            model.resize(off + data.len(), 0);
        }
        model[off..off + data.len()].copy_from_slice(data);
    };
    for (off, len, seed) in [
        (0, 5000, 1),
        (10_000, 3000, 2),
        (4090, 20, 3),
        (30_000, 1, 4),
    ] {
        let d = pattern(len, seed);
        fs.write(st.ino, off as u64, &d).unwrap();
        apply(&mut model, off, &d);
    }
    fs.flush(st.ino).unwrap();
    assert_eq!(read_all(&fs, st.ino), model);
    fs.setattr(
        st.ino,
        SetAttr {
            size: Some(4093),
            ..Default::default()
        },
    )
    .unwrap();
    model.truncate(4093);
    assert_eq!(read_all(&fs, st.ino), model);
    // Growing again reads zeros past the old end, not stale bytes.
    fs.setattr(
        st.ino,
        SetAttr {
            size: Some(9000),
            ..Default::default()
        },
    )
    .unwrap();
    model.resize(9000, 0);
    assert_eq!(read_all(&fs, st.ino), model);
    fs.release(fh).unwrap();
    let fs = rig.mount();
    let st = fs.lookup(ROOT, b"f").unwrap();
    assert_eq!(read_all(&fs, st.ino), model);
    assert_eq!(st.attr.mode, 0o600);
}

#[test]
fn directory_operations_and_renames_across_directories() {
    let rig = Rig::new("");
    let fs = rig.mkfs();
    let a = fs.mkdir(ROOT, b"a", 0o755, 0, 0).unwrap();
    let b = fs.mkdir(ROOT, b"b", 0o755, 0, 0).unwrap();
    let f = write_file(&fs, a.ino, "f", b"content");
    fs.rename(a.ino, b"f", b.ino, b"g", false).unwrap();
    assert_eq!(fs.lookup(a.ino, b"f"), Err(FsError::NotFound));
    assert_eq!(fs.lookup(b.ino, b"g").unwrap().ino, f);
    fs.rename(ROOT, b"a", b.ino, b"a2", false).unwrap();
    assert_eq!(fs.parent_of_dir(a.ino).unwrap(), b.ino);
    assert!(matches!(
        fs.rename(ROOT, b"b", a.ino, b"loop", false),
        Err(FsError::Invalid(_))
    ));
    assert_eq!(fs.rmdir(ROOT, b"b"), Err(FsError::NotEmpty));
    fs.symlink(ROOT, b"l", b"b/g", 0, 0).unwrap();
    let l = fs.lookup(ROOT, b"l").unwrap();
    assert_eq!(l.kind, Kind::Symlink);
    assert_eq!(fs.readlink(l.ino).unwrap(), b"b/g");
    fs.setattr(
        f,
        SetAttr {
            mode: Some(0o640),
            uid: Some(7),
            mtime: Some(1_000_000_000),
            ..Default::default()
        },
    )
    .unwrap();
    let fs = rig.mount();
    let b = fs.lookup(ROOT, b"b").unwrap();
    let g = fs.lookup(b.ino, b"g").unwrap();
    assert_eq!(
        (g.attr.mode, g.attr.uid, g.attr.mtime),
        (0o640, 7, 1_000_000_000)
    );
    assert_eq!(read_all(&fs, g.ino), b"content");
    let names: Vec<Vec<u8>> = fs
        .readdir(b.ino)
        .unwrap()
        .into_iter()
        .map(|e| e.2)
        .collect();
    assert_eq!(names, vec![b"a2".to_vec(), b"g".to_vec()]);
    fs.unlink(b.ino, b"g").unwrap();
    let a2 = fs.lookup(b.ino, b"a2").unwrap();
    fs.rmdir(b.ino, b"a2").unwrap();
    assert_eq!(fs.getattr(a2.ino), Err(FsError::NotFound));
    assert_eq!(fs.mkdir(ROOT, b"l", 0o755, 0, 0), Err(FsError::Exists));
    assert_eq!(
        fs.create(ROOT, &[b'x'; 256], 0o644, 0, 0).map(|_| ()),
        Err(FsError::NameTooLong)
    );
}

#[test]
fn a_stopped_account_is_failed_over_and_caught_up() {
    let rig = Rig::new("");
    let fs = rig.mkfs();
    rig.accounts[1].stopped.store(true, Ordering::SeqCst);
    let data = pattern(30_000, 9);
    let ino = write_file(&fs, ROOT, "during", &data);
    assert!(!fs.accounts[1].is_up());
    assert!(fs.pending().0 > 0, "account 1 is owed messages");
    assert_eq!(read_all(&fs, ino), data);
    // Back: the replicator pays the backlog and marks it up.
    rig.accounts[1].stopped.store(false, Ordering::SeqCst);
    fs.replicate_once();
    assert!(fs.accounts[1].is_up());
    assert_eq!(fs.pending().0, 0);
    // Now the other member of group 0 goes: everything is still readable from account 1.
    rig.accounts[0].stopped.store(true, Ordering::SeqCst);
    let fs2 = rig.mount();
    let st = fs2.lookup(ROOT, b"during").unwrap();
    assert_eq!(read_all(&fs2, st.ino), data);
    let report = fs2.fsck(&|_, _| {}).unwrap();
    assert!(report.unrecoverable.is_empty(), "{report:?}");
}

#[test]
fn a_crash_between_the_dirty_mark_and_the_blocks_rolls_back() {
    let rig = Rig::new("");
    let fs = rig.mkfs();
    let ino = write_file(&fs, ROOT, "f", b"old content");
    // Simulate the crash: write the new version, then remove its blocks from the servers
    // and the local cache, as if the process died after step 1.
    let (_, fh) = (ino, fs.open_file(ino).unwrap());
    fs.write(ino, 0, &pattern(9000, 3)).unwrap();
    fs.release(fh).unwrap();
    for a in &rig.accounts {
        let mut m = a.messages.lock().unwrap();
        let doomed: Vec<u32> = m
            .iter()
            .filter(|(_, (n, _))| n.contains(" blk ") && block_file_version(n) == 2)
            .map(|(u, _)| *u)
            .collect();
        for u in doomed {
            m.remove(&u);
        }
        // And the clean step never happened: drop the newest log page (it holds the
        // root's clean entry).
        let newest = m
            .iter()
            .filter(|(_, (n, _))| n.contains(" log "))
            .map(|(u, _)| *u)
            .max()
            .unwrap();
        m.remove(&newest);
    }
    drop(fs);
    std::fs::remove_dir_all(rig.config.cache.dir.clone()).unwrap();
    let fs = rig.mount();
    let st = fs.lookup(ROOT, b"f").unwrap();
    assert_eq!(read_all(&fs, st.ino), b"old content");
    assert!(fs.stats.repairs.load(Ordering::Relaxed) > 0);
}

#[test]
fn tampering_is_detected() {
    let rig = Rig::new("");
    let fs = rig.mkfs();
    let ino = write_file(&fs, ROOT, "f", &pattern(5000, 1));
    let (_, fh) = (ino, fs.open_file(ino).unwrap());
    fs.write(ino, 0, &pattern(5000, 2)).unwrap();
    fs.release(fh).unwrap();
    // Replace every copy of block 0 v2 with block 0 v1, relabelled.
    for a in &rig.accounts {
        let mut m = a.messages.lock().unwrap();
        let old = m
            .values()
            .find(|(n, _)| n.contains(" blk ") && n.contains(".0 v") && block_file_version(n) == 1)
            .cloned();
        let targets: Vec<u32> = m
            .iter()
            .filter(|(_, (n, _))| {
                n.contains(" blk ") && n.contains(".0 v") && block_file_version(n) == 2
            })
            .map(|(u, _)| *u)
            .collect();
        if let Some((_, body)) = old {
            for u in targets {
                m.get_mut(&u).unwrap().1 = body.clone();
            }
        }
    }
    // And a third party appends a forged, newer root directory.
    let name = {
        let m = rig.accounts[0].messages.lock().unwrap();
        let (n, _) = m
            .values()
            .find(|(n, _)| n.contains(" dir 000000000001.0 "))
            .unwrap()
            .clone();
        let fsid = n.split(' ').next().unwrap().to_string();
        format!("{fsid} dir 000000000001.0 v999 t1")
    };
    rig.accounts[0].inject(&name, vec![0u8; 200]);
    drop(fs);
    std::fs::remove_dir_all(rig.config.cache.dir.clone()).unwrap();
    let fs = rig.mount();
    let st = fs.lookup(ROOT, b"f").unwrap();
    assert!(matches!(
        fs.read(st.ino, 0, 5000),
        Err(FsError::Integrity(_))
    ));
    assert!(fs.stats.integrity_errors.load(Ordering::Relaxed) >= 2);
    let report = fs.fsck(&|_, _| {}).unwrap();
    assert!(!report.unrecoverable.is_empty());
    assert_eq!(report.foreign_messages, 0, "the forgery parses as ours");
}

#[test]
fn versions_restore_gc_and_snapshots() {
    let rig = Rig::new("");
    let fs = rig.mkfs();
    let v1 = pattern(10_000, 1);
    let ino = write_file(&fs, ROOT, "f", &v1);
    let fh = fs.open_file(ino).unwrap();
    fs.write(ino, 0, &pattern(12_000, 2)).unwrap();
    fs.release(fh).unwrap();
    let versions = fs.versions("/f").unwrap();
    assert_eq!(
        versions.iter().map(|v| v.version).collect::<Vec<_>>(),
        vec![2, 1, 0]
    );
    let restored = fs.restore("/f", 1).unwrap();
    assert_eq!(restored, 3);
    assert_eq!(read_all(&fs, ino), v1);
    assert_eq!(fs.snapshot("s1").unwrap(), 1);
    assert_eq!(fs.snapshot("s1"), Err(FsError::Exists));
    let before: usize = rig
        .accounts
        .iter()
        .map(|a| a.messages.lock().unwrap().len())
        .sum();
    // Delete another file: gc (retention 0) returns its blocks and old directories.
    write_file(&fs, ROOT, "junk", &pattern(20_000, 5));
    fs.unlink(ROOT, b"junk").unwrap();
    let report = fs.gc(&|_, _| {}).unwrap();
    assert!(report.blocks > 0 && report.directories > 0, "{report:?}");
    let after: usize = rig
        .accounts
        .iter()
        .map(|a| a.messages.lock().unwrap().len())
        .sum();
    assert!(after < before, "{after} < {before}");
    // What is current still reads, after a remount too.
    assert_eq!(read_all(&fs, ino), v1);
    let fs = rig.mount();
    let st = fs.lookup(ROOT, b"f").unwrap();
    assert_eq!(read_all(&fs, st.ino), v1);
    assert_eq!(fs.snapshots().len(), 1);
    assert!(fs.fsck(&|_, _| {}).unwrap().clean());
}

#[test]
fn a_wrong_passphrase_is_refused() {
    let rig = Rig::new("");
    rig.mkfs();
    let mut config = rig.config.clone();
    config.encryption.passphrase = Some("wrong".into());
    let err = Fs::open(&config, rig.remotes()).err().unwrap();
    assert!(err.to_string().contains("passphrase"), "{err}");
    // mkfs refuses to overwrite.
    assert!(Fs::mkfs(&rig.config, rig.remotes()).is_err());
}

#[test]
fn large_writes_spill_early_and_still_commit_atomically() {
    let rig = Rig::new("dirty_bytes_max = 16384");
    let fs = rig.mkfs();
    let data = pattern(100_000, 7);
    let (st, fh) = fs.create(ROOT, b"big", 0o644, 0, 0).unwrap();
    for (i, chunk) in data.chunks(3000).enumerate() {
        fs.write(st.ino, (i * 3000) as u64, chunk).unwrap();
    }
    // Uploads started before the file was closed (they run in the background).
    let started = std::time::Instant::now();
    while fs.stats.blocks_written.load(Ordering::Relaxed) == 0 {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(10),
            "nothing uploaded before close"
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    fs.release(fh).unwrap();
    let fs = rig.mount();
    let st = fs.lookup(ROOT, b"big").unwrap();
    assert_eq!(read_all(&fs, st.ino), data);
}

#[test]
fn snapshots_are_read_only_views_of_the_past() {
    let rig = Rig::new("");
    let fs = rig.mkfs();
    let sub = fs.mkdir(ROOT, b"sub", 0o755, 0, 0).unwrap();
    let ino = write_file(&fs, sub.ino, "f", b"before");
    assert_eq!(fs.lookup(ROOT, b".snapshots"), Err(FsError::NotFound));
    fs.snapshot("monday").unwrap();
    let fh = fs.open_file(ino).unwrap();
    fs.write(ino, 0, b"AFTER!").unwrap();
    fs.release(fh).unwrap();
    fs.unlink(sub.ino, b"f").unwrap();
    let snaps = fs.lookup(ROOT, b".snapshots").unwrap();
    let names: Vec<Vec<u8>> = fs.readdir(ROOT).unwrap().into_iter().map(|e| e.2).collect();
    assert!(names.contains(&b".snapshots".to_vec()));
    let monday = fs.lookup(snaps.ino, b"monday").unwrap();
    let old_sub = fs.lookup(monday.ino, b"sub").unwrap();
    let old_f = fs.lookup(old_sub.ino, b"f").unwrap();
    assert_eq!(fs.read(old_f.ino, 0, 100).unwrap(), b"before");
    assert_eq!(fs.parent_of_dir(old_sub.ino).unwrap(), monday.ino);
    assert_eq!(fs.write(old_f.ino, 0, b"x"), Err(FsError::ReadOnly));
    assert_eq!(
        fs.mkdir(old_sub.ino, b"new", 0o755, 0, 0),
        Err(FsError::ReadOnly)
    );
    assert_eq!(fs.unlink(old_sub.ino, b"f"), Err(FsError::ReadOnly));
    assert_eq!(
        fs.create(ROOT, b".snapshots", 0o644, 0, 0).map(|_| ()),
        Err(FsError::Exists)
    );
}

#[test]
fn asynchronous_mode_acknowledges_from_the_journal_and_never_drops_data() {
    let rig = Rig::new("mode = \"async\"");
    let fs = rig.mkfs();
    let data = pattern(20_000, 4);
    let ino = write_file(&fs, ROOT, "f", &data);
    let (ops, bytes) = fs.pending();
    assert!(ops >= 3 && bytes > 20_000, "{ops} {bytes}");
    let on_servers = |rig: &Rig| {
        rig.accounts
            .iter()
            .map(|a| {
                a.messages
                    .lock()
                    .unwrap()
                    .values()
                    .filter(|(n, _)| n.contains(" blk "))
                    .count()
            })
            .sum::<usize>()
    };
    assert_eq!(on_servers(&rig), 0, "nothing sent before the writer runs");
    assert_eq!(read_all(&fs, ino), data);
    // "Crash" with the journal full, and every account down at the next mount: the mount
    // is refused and nothing is lost.
    drop(fs);
    for a in &rig.accounts {
        a.stopped.store(true, Ordering::SeqCst);
    }
    assert!(Fs::open(&rig.config, rig.remotes()).is_err());
    for a in &rig.accounts {
        a.stopped.store(false, Ordering::SeqCst);
    }
    let fs = rig.mount();
    assert_eq!(fs.pending().0, 0);
    assert!(on_servers(&rig) > 0);
    let st = fs.lookup(ROOT, b"f").unwrap();
    assert_eq!(read_all(&fs, st.ino), data);
}

/// Messages of one kind (" log ", " dir ", " blk ") in account `i`.
fn messages_of(rig: &Rig, i: usize, kind: &str) -> usize {
    rig.accounts[i]
        .messages
        .lock()
        .unwrap()
        .values()
        .filter(|(n, _)| n.contains(kind))
        .count()
}

#[test]
fn a_batch_of_directory_changes_is_one_log_page_in_either_mode() {
    for mode in ["sync", "async"] {
        let rig = Rig::new(&format!("mode = \"{mode}\"\nmetadata_batch_ms = 10000"));
        let fs = rig.mkfs();
        let dirs_before = messages_of(&rig, 0, " dir ");
        let sub = fs.mkdir(ROOT, b"sub", 0o755, 0, 0).unwrap();
        for i in 0..20 {
            write_file(&fs, ROOT, &format!("small{i}"), b"tiny");
        }
        for i in 0..5 {
            fs.unlink(ROOT, format!("small{i}").as_bytes()).unwrap();
        }
        for i in 5..8 {
            let name = format!("small{i}");
            fs.rename(ROOT, name.as_bytes(), sub.ino, name.as_bytes(), false)
                .unwrap();
        }
        assert_eq!(
            messages_of(&rig, 0, " log "),
            0,
            "{mode}: nothing before the batch is due"
        );
        fs.sync_metadata().unwrap();
        fs.drain_journal().unwrap();
        // 1 mkdir, 20 × (create, dirty, clean), 5 unlinks, 3 renames: one page.
        assert_eq!(messages_of(&rig, 0, " log "), 1, "{mode}");
        assert_eq!(messages_of(&rig, 0, " dir "), dirs_before, "{mode}");
        drop(fs);
        let fs = rig.mount();
        let mut names: Vec<Vec<u8>> = fs.readdir(ROOT).unwrap().into_iter().map(|e| e.2).collect();
        names.sort();
        let mut want: Vec<Vec<u8>> = (8..20).map(|i| format!("small{i}").into_bytes()).collect();
        want.push(b"sub".to_vec());
        want.sort();
        assert_eq!(names, want, "{mode}");
        assert_eq!(fs.readdir(sub.ino).unwrap().len(), 3, "{mode}");
        for i in 5..20 {
            let parent = if i < 8 { sub.ino } else { ROOT };
            let st = fs.lookup(parent, format!("small{i}").as_bytes()).unwrap();
            assert_eq!(read_all(&fs, st.ino), b"tiny", "{mode}");
        }
    }
}

#[test]
fn a_crash_keeps_a_prefix_of_the_batches_and_fsync_makes_them_durable() {
    let rig = Rig::new("metadata_batch_ms = 10000");
    let fs = rig.mkfs();
    let a = fs.mkdir(ROOT, b"a", 0o755, 0, 0).unwrap();
    let b = fs.mkdir(ROOT, b"b", 0o755, 0, 0).unwrap();
    let kept = write_file(&fs, a.ino, "kept", b"first batch");
    fs.fsync(kept).unwrap();
    // The second batch: a rename across directories, an unlink, a new file, a chmod. The
    // "crash" comes before it is written.
    fs.rename(a.ino, b"kept", b.ino, b"moved", false).unwrap();
    write_file(&fs, ROOT, "lost", b"second batch");
    fs.setattr(
        a.ino,
        SetAttr {
            mode: Some(0o700),
            ..Default::default()
        },
    )
    .unwrap();
    drop(fs);
    let fs = rig.mount();
    // Exactly the first batch: the rename happened not at all (never half: the file is
    // in one directory), the new file does not exist, the mode is the old one.
    let st = fs.lookup(a.ino, b"kept").unwrap();
    assert_eq!(read_all(&fs, st.ino), b"first batch");
    assert!(matches!(fs.lookup(b.ino, b"moved"), Err(FsError::NotFound)));
    assert!(matches!(fs.lookup(ROOT, b"lost"), Err(FsError::NotFound)));
    assert_eq!(fs.getattr(a.ino).unwrap().attr.mode, 0o755);
    // A page lost everywhere ends the replay there: the tree is a prefix, never a mix.
    fs.rename(a.ino, b"kept", b.ino, b"moved", false).unwrap();
    fs.sync_metadata().unwrap();
    write_file(&fs, b.ino, "later", b"third");
    fs.sync_metadata().unwrap();
    drop(fs);
    for acct in &rig.accounts {
        let mut m = acct.messages.lock().unwrap();
        let mut pages: Vec<(u32, String)> = m
            .iter()
            .filter(|(_, (n, _))| n.contains(" log "))
            .map(|(u, (n, _))| (*u, n.clone()))
            .collect();
        pages.sort();
        let (rename_page, _) = pages[pages.len() - 2];
        m.remove(&rename_page);
    }
    let fs = rig.mount();
    assert!(fs.lookup(a.ino, b"kept").is_ok());
    assert!(matches!(fs.lookup(b.ino, b"later"), Err(FsError::NotFound)));
}

#[test]
fn a_full_batch_is_written_before_it_grows_past_its_bound() {
    let rig = Rig::new("metadata_batch_ms = 10000");
    let fs = rig.mkfs();
    // A file of 1,000 blocks: each change of its entry carries the whole block list.
    let ino = write_file(&fs, ROOT, "big", &pattern(1000 * 4096, 1));
    fs.sync_metadata().unwrap();
    let pages = fs.stats.log_pages.load(Ordering::Relaxed);
    let mut chmods = 0;
    while fs.stats.log_pages.load(Ordering::Relaxed) == pages {
        chmods += 1;
        assert!(chmods < 1000, "the batch never went out by itself");
        fs.setattr(
            ino,
            SetAttr {
                mode: Some(0o600 | ((chmods % 2) * 0o40)),
                ..Default::default()
            },
        )
        .unwrap();
    }
    // About LOG_BATCH_BYTES_MAX / (1,000 × 56 bytes) changes fit.
    assert!((50..200).contains(&chmods), "{chmods}");
}

#[test]
fn checkpoints_fold_the_log_and_gc_collects_the_pages() {
    let rig = Rig::new("metadata_batch_ms = 10000");
    let fs = rig.mkfs();
    let sub = fs.mkdir(ROOT, b"sub", 0o755, 0, 0).unwrap();
    let f = write_file(&fs, sub.ino, "f", b"one");
    fs.fsync(f).unwrap();
    let g = write_file(&fs, sub.ino, "g", b"two");
    fs.fsync(g).unwrap();
    assert_eq!(messages_of(&rig, 0, " log "), 2);
    let dirs = messages_of(&rig, 0, " dir ");
    assert_eq!(fs.checkpoint().unwrap(), 2, "the root and sub");
    assert_eq!(messages_of(&rig, 0, " dir "), dirs + 2);
    assert_eq!(fs.checkpoint().unwrap(), 0, "nothing new");
    drop(fs);
    let fs = rig.mount();
    assert_eq!(read_all(&fs, fs.lookup(sub.ino, b"g").unwrap().ino), b"two");
    // Versions of a file still come from the pages while they are kept.
    assert!(!fs.versions("/sub/f").unwrap().is_empty());
    let report = fs.gc(&|_, _| {}).unwrap();
    assert_eq!(report.log_pages, 8, "2 pages in each of 4 accounts");
    assert_eq!(messages_of(&rig, 0, " log "), 0);
    drop(fs);
    let fs = rig.mount();
    assert_eq!(read_all(&fs, fs.lookup(sub.ino, b"f").unwrap().ino), b"one");
    assert!(fs.fsck(&|_, _| {}).unwrap().clean());
}

#[test]
fn a_lost_directory_is_rebuilt_and_its_files_recovered_from_their_blocks() {
    let rig = Rig::new("");
    let fs = rig.mkfs();
    let sub = fs.mkdir(ROOT, b"sub", 0o755, 0, 0).unwrap();
    let data = pattern(10_000, 8);
    let f = write_file(&fs, sub.ino, "precious", &data);
    write_file(&fs, ROOT, "fine", b"untouched");
    // The log folded into directory messages and collected (retention 0), so the
    // subdirectory lives only in its directory messages.
    fs.gc(&|_, _| {}).unwrap();
    drop(fs);
    // Every version of the subdirectory's message is gone from every account.
    let marker = format!(" dir {:012x}.0 ", sub.ino);
    for a in &rig.accounts {
        a.messages
            .lock()
            .unwrap()
            .retain(|_, (n, _)| !n.contains(&marker));
    }
    std::fs::remove_dir_all(rig.config.cache.dir.clone()).unwrap();
    let fs = rig.mount();
    assert!(fs.readdir(sub.ino).is_err());
    let report = fs.rebuild(&|_, _| {}).unwrap();
    assert_eq!(report.directories_recreated, 1);
    assert_eq!(report.files_recovered, 1);
    let fs = rig.mount();
    assert!(fs.readdir(sub.ino).unwrap().is_empty());
    let lf = fs.lookup(ROOT, b"lost+found").unwrap();
    let got = fs.lookup(lf.ino, format!("{f:012x}").as_bytes()).unwrap();
    assert_eq!(read_all(&fs, got.ino), data);
    let fine = fs.lookup(ROOT, b"fine").unwrap();
    assert_eq!(read_all(&fs, fine.ino), b"untouched");
}

#[test]
fn limits_on_names_and_symlink_targets() {
    let rig = Rig::new("");
    let fs = rig.mkfs();
    assert_eq!(
        fs.symlink(ROOT, b"l", &[b'a'; 4097], 0, 0),
        Err(FsError::NameTooLong)
    );
    assert!(fs.symlink(ROOT, b"l", &[b'a'; 4096], 0, 0).is_ok());
    for bad in [&b""[..], b".", b"..", b"a/b"] {
        assert!(matches!(
            fs.create(ROOT, bad, 0o644, 0, 0).map(|_| ()),
            Err(FsError::Invalid(_))
        ));
    }
    assert!(fs.create(ROOT, &[b'n'; 255], 0o644, 0, 0).is_ok());
}

#[test]
fn a_crash_during_write_behind_leaves_the_old_content_and_the_next_write_whole() {
    let rig = Rig::new("");
    let fs = rig.mkfs();
    let size = 4096 * 20 + 100;
    let ino = write_file(&fs, ROOT, "f", &pattern(size, 1));
    // Generation 2 is written whole (its full blocks go up in the background), and the
    // process dies before any flush.
    let fh = fs.open_file(ino).unwrap();
    fs.write(ino, 0, &pattern(size, 2)).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(200));
    let _ = fh;
    drop(fs);
    std::fs::remove_dir_all(rig.config.cache.dir.clone()).unwrap();
    let fs = rig.mount();
    let st = fs.lookup(ROOT, b"f").unwrap();
    assert_eq!(
        read_all(&fs, st.ino),
        pattern(size, 1),
        "old content after the crash"
    );
    // Generation 3 must come back whole, whatever the orphans of generation 2 are called.
    let fh = fs.open_file(st.ino).unwrap();
    fs.write(st.ino, 0, &pattern(size, 3)).unwrap();
    fs.release(fh).unwrap();
    drop(fs);
    std::fs::remove_dir_all(rig.config.cache.dir.clone()).unwrap();
    let fs = rig.mount();
    let st = fs.lookup(ROOT, b"f").unwrap();
    assert_eq!(read_all(&fs, st.ino), pattern(size, 3));
}

#[test]
fn rewrites_in_place_with_write_behind_commit_whole_generations() {
    let rig = Rig::new("");
    let fs = rig.mkfs();
    let size = 4096 * 9 + 500;
    let (st, fh) = fs.create(ROOT, b"f", 0o644, 0, 0).unwrap();
    fs.write(st.ino, 0, &pattern(size, 0)).unwrap();
    fs.flush(st.ino).unwrap();
    fs.release(fh).unwrap();
    for g in 1..20u8 {
        let fh = fs.open_file(st.ino).unwrap();
        fs.write(st.ino, 0, &pattern(size, g)).unwrap();
        fs.fsync(st.ino).unwrap();
        fs.flush(st.ino).unwrap();
        fs.release(fh).unwrap();
        assert_eq!(
            read_all(&fs, st.ino),
            pattern(size, g),
            "generation {g} in memory"
        );
    }
    drop(fs);
    std::fs::remove_dir_all(rig.config.cache.dir.clone()).unwrap();
    let fs = rig.mount();
    let st = fs.lookup(ROOT, b"f").unwrap();
    assert_eq!(read_all(&fs, st.ino), pattern(size, 19));
}

#[test]
fn a_crash_at_every_append_of_a_rewrite_leaves_old_or_new() {
    let size = 4096 * 9 + 500;
    for crash_after in 0..24 {
        let rig = Rig::new("");
        let fs = rig.mkfs();
        let ino = write_file(&fs, ROOT, "f", &pattern(size, 1));
        // Every account dies after `crash_after` more appends in total.
        for a in &rig.accounts {
            a.appends_left.store(crash_after / 4, Ordering::SeqCst);
        }
        let fh = fs.open_file(ino).unwrap();
        let _ = fs.write(ino, 0, &pattern(size, 2));
        let _ = fs.fsync(ino);
        let _ = fs.release(fh);
        drop(fs);
        for a in &rig.accounts {
            a.appends_left.store(-1, Ordering::SeqCst);
            a.stopped.store(false, Ordering::SeqCst);
        }
        std::fs::remove_dir_all(rig.config.cache.dir.clone()).unwrap();
        let fs = rig.mount();
        let st = fs.lookup(ROOT, b"f").unwrap();
        let got = read_all(&fs, st.ino);
        assert!(
            got == pattern(size, 1) || got == pattern(size, 2),
            "crash after {crash_after} appends: torn"
        );
    }
}

#[test]
fn a_late_release_of_the_previous_handle_never_commits_half_a_write() {
    let rig = Rig::new("");
    let fs = rig.mkfs();
    let size = 4096 * 9 + 500;
    let (st, mut prev) = fs.create(ROOT, b"f", 0o644, 0, 0).unwrap();
    fs.write(st.ino, 0, &pattern(size, 0)).unwrap();
    fs.flush(st.ino).unwrap();
    for g in 1..40u8 {
        let fh = fs.open_file(st.ino).unwrap();
        // The kernel's RELEASE of the previous handle races with this handle's writes.
        let fs2 = fs.clone();
        let late = std::thread::spawn(move || fs2.release(prev));
        for (k, chunk) in pattern(size, g).chunks(4096 * 3).enumerate() {
            fs.write(st.ino, (k * 4096 * 3) as u64, chunk).unwrap();
        }
        late.join().unwrap().unwrap();
        fs.fsync(st.ino).unwrap();
        fs.flush(st.ino).unwrap();
        prev = fh;
    }
    fs.release(prev).unwrap();
    drop(fs);
    std::fs::remove_dir_all(rig.config.cache.dir.clone()).unwrap();
    let fs = rig.mount();
    let st = fs.lookup(ROOT, b"f").unwrap();
    assert_eq!(read_all(&fs, st.ino), pattern(size, 39));
    for v in fs.versions("/f").unwrap() {
        assert!(v.size == size as u64 || v.version == 0, "{v:?}");
    }
}

#[test]
fn a_crash_at_every_step_of_a_rename_across_directories_leaves_one_entry() {
    for crash_after in 0..20 {
        let rig = Rig::new("");
        let fs = rig.mkfs();
        let a = fs.mkdir(ROOT, b"a", 0o755, 0, 0).unwrap();
        let b = fs.mkdir(ROOT, b"b", 0o755, 0, 0).unwrap();
        write_file(&fs, a.ino, "roamer", b"x");
        for acct in &rig.accounts {
            acct.appends_left.store(crash_after / 4, Ordering::SeqCst);
        }
        let _ = fs.rename(a.ino, b"roamer", b.ino, b"roamer", false);
        drop(fs);
        for acct in &rig.accounts {
            acct.appends_left.store(-1, Ordering::SeqCst);
            acct.stopped.store(false, Ordering::SeqCst);
        }
        // Each side read first, in turn: the other must agree.
        for first in [a.ino, b.ino] {
            let fs = rig.mount();
            let _ = fs.readdir(first).unwrap();
            let in_a = fs.lookup(a.ino, b"roamer").is_ok();
            let in_b = fs.lookup(b.ino, b"roamer").is_ok();
            assert!(
                in_a ^ in_b,
                "crash after {crash_after}: in a {in_a}, in b {in_b}"
            );
        }
    }
}

#[test]
fn concurrent_writes_flushes_and_reads_never_see_a_block_vanish() {
    const BS: usize = 4096;
    let rig = Rig::new("");
    for a in &rig.accounts {
        a.append_delay_us.store(300, Ordering::SeqCst);
    }
    let fs = rig.mkfs();
    let blocks = 48;
    let size = BS * blocks;
    let gens: Vec<Vec<u8>> = (0..10u8).map(|g| pattern(size, g)).collect();
    let last = gens.len() - 1;
    let ino = write_file(&fs, ROOT, "f", &gens[0]);
    let done = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        // A writer rewriting the file block by block (whole blocks go up in the background),
        // sometimes with fsync.
        s.spawn(|| {
            let fh = fs.open_file(ino).unwrap();
            for (g, data) in gens.iter().enumerate().skip(1) {
                for b in 0..blocks {
                    let at = b * BS;
                    fs.write(ino, at as u64, &data[at..at + BS]).unwrap();
                }
                if g % 3 == 0 {
                    fs.fsync(ino).unwrap();
                }
            }
            fs.release(fh).unwrap();
            done.store(true, Ordering::SeqCst);
        });
        // Another handle flushing meanwhile (FLUSH of a second descriptor, a late RELEASE).
        s.spawn(|| {
            while !done.load(Ordering::SeqCst) {
                fs.flush(ino).unwrap();
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
        });
        // A reader: every block it sees is some generation's, never a hole.
        s.spawn(|| {
            while !done.load(Ordering::SeqCst) {
                let d = fs.read(ino, 0, size as u32).unwrap();
                assert_eq!(d.len(), size);
                for b in 0..blocks {
                    let got = &d[b * BS..(b + 1) * BS];
                    assert!(
                        gens.iter().any(|g| &g[b * BS..(b + 1) * BS] == got),
                        "block {b} read as no generation's content"
                    );
                }
            }
        });
    });
    assert_eq!(read_all(&fs, ino), gens[last]);
    drop(fs);
    std::fs::remove_dir_all(rig.config.cache.dir.clone()).unwrap();
    let fs = rig.mount();
    let st = fs.lookup(ROOT, b"f").unwrap();
    assert_eq!(read_all(&fs, st.ino), gens[last], "after a remount");
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
                .lock()
                .unwrap()
                .values()
                .filter(|(n, _)| {
                    crate::key::Key::parse(n).is_some_and(|k| k.kind == mailfs_format::Kind::Chunk)
                })
                .count()
        })
        .sum()
}

#[test]
fn dedup_stores_shared_chunks_once_and_gc_keeps_what_a_file_names() {
    let rig = Rig::new("dedup = true\norphan_grace = \"1h\"");
    let fs = rig.mkfs();
    let a = noise(4096 * 40 + 777, 1);
    let ino_a = write_file(&fs, ROOT, "a", &a);
    let sent_a = fs.stats.bytes_written.load(Ordering::Relaxed);
    let chunks_a = chunk_messages(&rig);
    assert!(chunks_a > 0, "blocks went as chunks");
    // The same bytes again: only the manifests go out.
    write_file(&fs, ROOT, "b", &a);
    let sent_b = fs.stats.bytes_written.load(Ordering::Relaxed) - sent_a;
    assert!(
        sent_b * 10 < sent_a,
        "a copy sent {sent_b} bytes, the original {sent_a}"
    );
    assert_eq!(chunk_messages(&rig), chunks_a, "no chunk stored twice");
    // 100 bytes inserted near the start shift every block; content-defined cuts find the
    // same chunks again inside each block.
    let mut c = a.clone();
    c.splice(1000..1000, noise(100, 2));
    let reused_before = fs.stats.chunks_reused.load(Ordering::Relaxed);
    let ino_c = write_file(&fs, ROOT, "c", &c);
    let reused = fs.stats.chunks_reused.load(Ordering::Relaxed) - reused_before;
    // Every chunk is on both members of its group.
    let new = (chunk_messages(&rig) - chunks_a) as u64 / 2;
    assert!(
        reused * 2 > new,
        "shifted copy: {reused} chunks reused, {new} new"
    );
    drop(fs);
    std::fs::remove_dir_all(rig.config.cache.dir.clone()).unwrap();
    let fs = rig.mount();
    for (name, want) in [("a", &a), ("b", &a), ("c", &c)] {
        let st = fs.lookup(ROOT, name.as_bytes()).unwrap();
        assert_eq!(&read_all(&fs, st.ino), want, "{name} after a remount");
    }
    let report = fs.fsck(&|_, _| {}).unwrap();
    assert!(report.clean(), "{report:?}");
    assert!(report.chunks > 0);
    // Without a and c, gc (with no grace) removes the chunks only c named; b keeps a's.
    fs.unlink(ROOT, b"a").unwrap();
    fs.unlink(ROOT, b"c").unwrap();
    drop(fs);
    let mut config = rig.config.clone();
    config.fs.orphan_grace = "0".into();
    let gc_fs = Fs::open(&config, rig.remotes()).unwrap();
    let report = gc_fs.gc(&|_, _| {}).unwrap();
    assert!(report.chunks > 0, "{report:?}");
    drop(gc_fs);
    std::fs::remove_dir_all(rig.config.cache.dir.clone()).unwrap();
    let fs = rig.mount();
    let st = fs.lookup(ROOT, b"b").unwrap();
    assert_eq!(read_all(&fs, st.ino), a, "b after gc");
    let _ = (ino_a, ino_c);
    // A chunk replaced by another chunk's sealed copy is rejected (its name is bound).
    let mut bodies: Vec<(u32, Vec<u8>)> = Vec::new();
    for acct in &rig.accounts {
        let m = acct.messages.lock().unwrap();
        for (uid, (n, body)) in m.iter() {
            if crate::key::Key::parse(n).is_some_and(|k| k.kind == mailfs_format::Kind::Chunk) {
                bodies.push((*uid, body.clone()));
            }
        }
    }
    for acct in &rig.accounts {
        let mut m = acct.messages.lock().unwrap();
        let uids: Vec<u32> = m.keys().copied().collect();
        for uid in uids {
            let (n, body) = m.get_mut(&uid).expect("listed");
            if crate::key::Key::parse(n).is_some_and(|k| k.kind == mailfs_format::Kind::Chunk)
                && let Some((_, other)) = bodies.iter().find(|(u, b)| *u != uid && b != body)
            {
                *body = other.clone();
            }
        }
    }
    drop(fs);
    std::fs::remove_dir_all(rig.config.cache.dir.clone()).unwrap();
    let fs = rig.mount();
    let st = fs.lookup(ROOT, b"b").unwrap();
    assert!(matches!(
        fs.read(st.ino, 0, 4096),
        Err(FsError::Integrity(_))
    ));
}

#[test]
fn both_ciphers_round_trip_and_the_cipher_is_fixed_at_mkfs() {
    for (made_with, mounted_with) in [
        ("aes-256-gcm", "xchacha20poly1305"),
        ("xchacha20poly1305", "aes-256-gcm"),
    ] {
        let mut rig = Rig::new("");
        rig.config.encryption.cipher = made_with.into();
        let fs = rig.mkfs();
        let data = noise(4096 * 5 + 3, 9);
        write_file(&fs, ROOT, "f", &data);
        drop(fs);
        std::fs::remove_dir_all(rig.config.cache.dir.clone()).unwrap();
        // A mount configured with another cipher still reads it: the superblock says which.
        rig.config.encryption.cipher = mounted_with.into();
        let fs = rig.mount();
        let st = fs.lookup(ROOT, b"f").unwrap();
        assert_eq!(read_all(&fs, st.ino), data, "{made_with}");
        // No block travels in the clear.
        let probe = &data[..64];
        for a in &rig.accounts {
            for (_, body) in a.messages.lock().unwrap().values() {
                assert!(!body.windows(64).any(|w| w == probe), "{made_with}");
            }
        }
    }
}

#[test]
fn random_small_reads_fetch_only_their_segments_and_tampering_still_shows() {
    let rig = Rig::new("block_size = 1048576");
    let fs = rig.mkfs();
    let data = pattern(3 << 20, 7);
    let ino = write_file(&fs, ROOT, "big", &data);
    drop(fs);
    std::fs::remove_dir_all(rig.config.cache.dir.clone()).unwrap();
    let fs = rig.mount();
    let st = fs.lookup(ROOT, b"big").unwrap();
    assert_eq!(st.ino, ino);
    // Scattered 4 KiB reads, one crossing a segment boundary; none is sequential.
    // Scattered 4 KiB reads, one in each block (the one in block 1 crosses a segment
    // boundary); none is sequential.
    let offsets = [2_500_000u64, 5, (1 << 20) + 65_536 - 100];
    for &o in &offsets {
        let got = fs.read(st.ino, o, 4096).unwrap();
        assert!(got == data[o as usize..o as usize + 4096], "at {o}");
    }
    assert_eq!(fs.stats.partial_fetches.load(Ordering::Relaxed), 3);
    assert_eq!(fs.stats.blocks_fetched.load(Ordering::Relaxed), 0);
    // Each fetched one or two 64 KiB segments, not a 1 MiB block.
    let fetched = fs.stats.bytes_fetched.load(Ordering::Relaxed);
    assert!(fetched <= 4 * 65_536, "{fetched} bytes fetched");
    // A block read in part before is loaded whole the second time, and then cached.
    let o = 2_900_000usize;
    assert!(fs.read(st.ino, o as u64, 4096).unwrap() == data[o..o + 4096]);
    assert_eq!(fs.stats.partial_fetches.load(Ordering::Relaxed), 3);
    assert_eq!(fs.stats.blocks_fetched.load(Ordering::Relaxed), 1);
    assert_eq!(fs.stats.integrity_errors.load(Ordering::Relaxed), 0);
    // A read from the start goes on sequentially, whole blocks as before.
    assert!(read_all(&fs, st.ino) == data);
    drop(fs);

    // Flip one byte in the middle of blocks 1 and 2 in every copy: a partial read of
    // another segment still opens; a read of that segment fails, in part and whole.
    for a in &rig.accounts {
        let mut m = a.messages.lock().unwrap();
        for (n, body) in m.values_mut() {
            if n.contains(" blk ") && (n.contains(".1 v") || n.contains(".2 v")) {
                let at = body.len() / 2;
                body[at] ^= 1;
            }
        }
    }
    std::fs::remove_dir_all(rig.config.cache.dir.clone()).unwrap();
    let fs = rig.mount();
    let st = fs.lookup(ROOT, b"big").unwrap();
    let early = (1 << 20) + 70_000;
    assert!(fs.read(st.ino, early, 4096).unwrap() == data[early as usize..early as usize + 4096]);
    assert_eq!(fs.stats.partial_fetches.load(Ordering::Relaxed), 1);
    assert!(fs.read(st.ino, 5, 4096).unwrap() == data[5..4101]);
    let middle = (1 << 20) + (1 << 19) - 1000;
    let r = fs.read(st.ino, middle, 4096).map(|d| d.len());
    assert!(matches!(r, Err(FsError::Integrity(_))), "{r:?}");
    assert!(fs.stats.integrity_errors.load(Ordering::Relaxed) >= 1);
    // The tampered segment of block 2, read in part first: rejected, then whole: rejected.
    assert!(fs.read(st.ino, 5, 4096).is_ok());
    let r = fs.read(st.ino, 2 * (1 << 20) + (1 << 19) - 1000, 4096);
    assert!(
        matches!(r, Err(FsError::Integrity(_))),
        "{:?}",
        r.map(|d| d.len())
    );
    // Two partial reads opened (block 1 early, block 0); the tampered one did not count.
    assert_eq!(fs.stats.partial_fetches.load(Ordering::Relaxed), 2);
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

#[test]
fn a_long_sequential_read_is_a_scan_whose_blocks_reach_the_disk_cache_when_read_again() {
    // 4 KiB blocks, four read ahead; a stream is a scan past 16 KiB; memory holds 16 blocks.
    const BLOCKS: u64 = 64;
    let rig = Rig::with_cache(
        "readahead_blocks = 4",
        "memory_bytes = 65536\nscan_bytes = 16384",
    );
    let fs = rig.mkfs();
    let data = pattern(BLOCKS as usize * 4096, 3);
    write_file(&fs, ROOT, "stream", &data);
    drop(fs);
    std::fs::remove_dir_all(rig.config.cache.dir.clone()).unwrap();
    // A reader slower than the fetchers: each block it asks for was read ahead, except
    // the first.
    let pass = |fs: &Fs| {
        let ino = fs.lookup(ROOT, b"stream").unwrap().ino;
        for i in 0..BLOCKS {
            let got = fs.read(ino, i * 4096, 4096).unwrap();
            let at = i as usize * 4096;
            assert!(got == data[at..at + 4096], "block {i}");
            fs.settle_read_ahead();
        }
        fs.settle_disk_cache();
    };
    let fs = rig.mount();
    let background = fs.spawn_background();
    pass(&fs);
    // Block 0 was read, blocks 1 to 3 read ahead within the first 16 KiB: on disk. The
    // rest was read ahead as a scan: in memory only.
    assert_eq!(fs.stats.blocks_fetched.load(Ordering::Relaxed), BLOCKS);
    assert_eq!(
        fs.stats.scan_blocks_uncached.load(Ordering::Relaxed),
        BLOCKS - 4
    );
    assert_eq!(disk_cache_files(&rig) as u64, 4);
    // A second pass fetches again what memory no longer holds: the second fetch admits.
    pass(&fs);
    assert_eq!(
        fs.stats.blocks_fetched.load(Ordering::Relaxed),
        2 * BLOCKS - 4
    );
    assert_eq!(disk_cache_files(&rig) as u64, BLOCKS);
    fs.shutdown();
    background.join().unwrap();
    drop(fs);
    // A remount reads it all from the disk cache.
    let fs = rig.mount();
    pass(&fs);
    assert_eq!(fs.stats.blocks_fetched.load(Ordering::Relaxed), 0);
}

#[test]
fn small_files_live_in_their_entries_and_move_to_blocks_and_back() {
    let rig = Rig::new("block_size = 65536");
    let fs = rig.mkfs();
    let blocks = |rig: &Rig| messages_of(rig, 0, " blk ") + messages_of(rig, 2, " blk ");
    let small = pattern(10_000, 5);
    let ino = write_file(&fs, ROOT, "small", &small);
    let empty = write_file(&fs, ROOT, "empty", b"");
    assert_eq!(blocks(&rig), 0, "a small file is one directory change");
    // Grown past the inline limit it gets blocks; the previous inline content is what a
    // crash before the clean entry rolls back to (M5).
    let big = pattern(meta_inline_max() + 1, 6);
    let fh = fs.open_file(ino).unwrap();
    fs.write(ino, 0, &big).unwrap();
    fs.release(fh).unwrap();
    assert!(blocks(&rig) > 0);
    assert!(read_all(&fs, ino) == big);
    // Cut back and rewritten, it is inline again.
    fs.setattr(
        ino,
        SetAttr {
            size: Some(0),
            ..Default::default()
        },
    )
    .unwrap();
    let fh = fs.open_file(ino).unwrap();
    fs.write(ino, 0, b"small again").unwrap();
    fs.release(fh).unwrap();
    let blocks_now = blocks(&rig);
    drop(fs);
    let fs = rig.mount();
    fs.lookup(ROOT, b"small").unwrap();
    fs.lookup(ROOT, b"empty").unwrap();
    assert_eq!(read_all(&fs, ino), b"small again");
    assert_eq!(read_all(&fs, empty), b"");
    assert_eq!(fs.getattr(ino).unwrap().size, 11);
    // A partial overwrite of an inline file starts from its content.
    let fh = fs.open_file(ino).unwrap();
    fs.write(ino, 6, b"AGAIN!").unwrap();
    fs.release(fh).unwrap();
    assert_eq!(read_all(&fs, ino), b"small AGAIN!");
    assert_eq!(blocks(&rig), blocks_now);
    // Its versions are there to restore.
    let versions = fs.versions("/small").unwrap();
    assert!(versions.len() >= 3, "{versions:?}");
    let first = versions.iter().find(|v| v.size == 10_000).unwrap().version;
    fs.restore("/small", first).unwrap();
    assert!(read_all(&fs, ino) == small, "the first content, restored");
    assert!(fs.fsck(&|_, _| {}).unwrap().clean());
}

#[test]
fn a_crash_growing_an_inline_file_rolls_back_to_its_inline_content() {
    let rig = Rig::new("");
    let fs = rig.mkfs();
    let ino = write_file(&fs, ROOT, "f", b"inline before");
    let fh = fs.open_file(ino).unwrap();
    fs.write(ino, 0, &pattern(20_000, 2)).unwrap();
    fs.release(fh).unwrap();
    for a in &rig.accounts {
        let mut m = a.messages.lock().unwrap();
        // The blocks never arrived, and neither did the clean entry.
        m.retain(|_, (n, _)| !n.contains(" blk "));
        let newest = m
            .iter()
            .filter(|(_, (n, _))| n.contains(" log "))
            .map(|(u, _)| *u)
            .max()
            .unwrap();
        m.remove(&newest);
    }
    drop(fs);
    std::fs::remove_dir_all(rig.config.cache.dir.clone()).unwrap();
    let fs = rig.mount();
    let st = fs.lookup(ROOT, b"f").unwrap();
    assert_eq!(st.size, 13);
    assert_eq!(read_all(&fs, st.ino), b"inline before");
}

fn meta_inline_max() -> usize {
    crate::meta::INLINE_BYTES_MAX
}

#[test]
fn close_hands_large_files_to_the_committers_and_fsync_waits_for_them() {
    let rig = Rig::new("block_size = 65536\nmetadata_batch_ms = 10000");
    let fs = rig.mkfs();
    // As WRITEBACK_BYTES_MAX, scaled down: room for 16 files of 20,000 bytes.
    fs.writeback.set_bytes_max(16 * 20_000);
    let background = fs.spawn_background();
    fs.readdir(ROOT).unwrap();
    // Every server down: a close that waited for its blocks would fail.
    for a in &rig.accounts {
        a.stopped.store(true, Ordering::SeqCst);
    }
    let data = pattern(20_000, 9);
    let mut files = Vec::new();
    // 16 files fill the queue.
    for i in 0..16 {
        let (st, fh) = fs
            .create(ROOT, format!("f{i}").as_bytes(), 0o644, 0, 0)
            .unwrap();
        fs.write(st.ino, 0, &data).unwrap();
        fs.close(st.ino).unwrap();
        fs.release(fh).unwrap();
        files.push(st.ino);
    }
    assert_eq!(fs.pending().0, 16, "queued, not lost");
    // The next close finds the queue full and commits itself: the error reaches it.
    let (st, fh) = fs.create(ROOT, b"one more", 0o644, 0, 0).unwrap();
    fs.write(st.ino, 0, &data).unwrap();
    assert!(fs.close(st.ino).is_err());
    let _ = fs.release(fh);
    assert!(
        fs.fsync(files[0]).is_err(),
        "fsync reports what is not durable"
    );
    for f in &files {
        assert!(read_all(&fs, *f) == data, "readable from memory meanwhile");
    }
    for a in &rig.accounts {
        a.stopped.store(false, Ordering::SeqCst);
    }
    // The replicator finds the servers back within a probe or two.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while let Err(e) = fs.fsync(files[0]) {
        assert!(std::time::Instant::now() < deadline, "{e}");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    while fs.pending().0 > 0 {
        assert!(std::time::Instant::now() < deadline, "{:?}", fs.pending());
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    fs.flush_all().unwrap();
    fs.shutdown();
    background.join().unwrap();
    drop(fs);
    let fs = rig.mount();
    for i in 0..16 {
        let st = fs.lookup(ROOT, format!("f{i}").as_bytes()).unwrap();
        assert!(read_all(&fs, st.ino) == data, "f{i}");
    }
}

#[test]
fn a_change_the_log_refuses_leaves_the_directory_as_it_was() {
    let rig = Rig::new("");
    let fs = rig.mkfs();
    write_file(&fs, ROOT, "kept", b"x");
    let before = fs.readdir(ROOT).unwrap();
    for a in &rig.accounts {
        a.stopped.store(true, Ordering::SeqCst);
    }
    assert!(fs.create(ROOT, b"new", 0o644, 0, 0).is_err());
    assert!(fs.unlink(ROOT, b"kept").is_err());
    assert!(fs.rename(ROOT, b"kept", ROOT, b"moved", false).is_err());
    assert_eq!(fs.readdir(ROOT).unwrap(), before);
    for a in &rig.accounts {
        a.stopped.store(false, Ordering::SeqCst);
    }
    for a in &fs.accounts {
        let _ = a.replay(true);
    }
    fs.rename(ROOT, b"kept", ROOT, b"moved", false).unwrap();
    drop(fs);
    let fs = rig.mount();
    let names: Vec<Vec<u8>> = fs.readdir(ROOT).unwrap().into_iter().map(|e| e.2).collect();
    assert_eq!(names, vec![b"moved".to_vec()]);
}

#[test]
fn a_directory_holds_at_most_dir_inline_bytes_max_of_inline_content() {
    let rig = Rig::new("block_size = 65536\nmetadata_batch_ms = 10000");
    let fs = rig.mkfs();
    let blocks = |rig: &Rig| messages_of(rig, 0, " blk ") + messages_of(rig, 2, " blk ");
    let data = pattern(crate::meta::INLINE_BYTES_MAX, 3);
    let fit = crate::meta::DIR_INLINE_BYTES_MAX / data.len();
    for i in 0..fit {
        write_file(&fs, ROOT, &format!("f{i}"), &data);
    }
    assert_eq!(blocks(&rig), 0);
    let over = write_file(&fs, ROOT, "over", &data);
    assert!(
        blocks(&rig) > 0,
        "past the budget a small file gets a block"
    );
    // Room again once an inline file goes.
    fs.unlink(ROOT, b"f0").unwrap();
    let before = blocks(&rig);
    write_file(&fs, ROOT, "again", &data);
    assert_eq!(blocks(&rig), before);
    fs.sync_metadata().unwrap();
    assert!(
        fs.checkpoint().unwrap() > 0,
        "the checkpoint fits one message"
    );
    drop(fs);
    let fs = rig.mount();
    fs.lookup(ROOT, b"over").unwrap();
    assert!(read_all(&fs, over) == data);
}

#[test]
fn a_large_directory_checkpoints_in_pages_and_reads_back_whole() {
    let rig = Rig::new("metadata_batch_ms = 10000");
    let fs = rig.mkfs();
    // Long names and symlink targets: about 4 KiB an entry, so 3,000 entries need three
    // pages of DIR_PAGE_BYTES.
    let target = vec![b't'; 3900];
    for i in 0..3000 {
        fs.symlink(ROOT, format!("link{i:05}").as_bytes(), &target, 0, 0)
            .unwrap();
    }
    fs.sync_metadata().unwrap();
    let before = messages_of(&rig, 0, " dir 000000000001.");
    fs.checkpoint().unwrap();
    let pages = messages_of(&rig, 0, " dir 000000000001.") - before;
    assert!(pages >= 3, "{pages} pages");
    assert!(fs.fsck(&|_, _| {}).unwrap().clean());
    let report = fs.gc(&|_, _| {}).unwrap();
    assert!(report.log_pages > 0);
    drop(fs);
    let fs = rig.mount();
    assert_eq!(fs.readdir(ROOT).unwrap().len(), 3000);
    let st = fs.lookup(ROOT, b"link02999").unwrap();
    assert_eq!(fs.readlink(st.ino).unwrap(), target);
    // A page lost everywhere makes that version unreadable: the previous one is used.
    for a in &rig.accounts {
        let mut m = a.messages.lock().unwrap();
        let newest = m
            .iter()
            .filter(|(_, (n, _))| n.contains(" dir 000000000001.1 "))
            .map(|(u, _)| *u)
            .max()
            .unwrap();
        m.remove(&newest);
    }
    drop(fs);
    let fs = rig.mount();
    assert!(
        fs.readdir(ROOT).is_err(),
        "no complete version left: gc took the older ones"
    );
}

#[test]
fn a_file_renamed_over_another_is_committed_before_the_rename() {
    let rig = Rig::new("block_size = 65536\nmetadata_batch_ms = 10000");
    let fs = rig.mkfs();
    let background = fs.spawn_background();
    let old = pattern(20_000, 1);
    let new = pattern(20_000, 2);
    let target = write_file(&fs, ROOT, "config", &old);
    fs.fsync(target).unwrap();
    // The committers are slow now: the temporary file's commit waits in the queue.
    for a in &rig.accounts {
        a.append_delay_us.store(300_000, Ordering::SeqCst);
    }
    let blocks = |rig: &Rig| (0..4).map(|i| messages_of(rig, i, " blk ")).sum::<usize>();
    let before = blocks(&rig);
    let (st, fh) = fs.create(ROOT, b"config.tmp", 0o644, 0, 0).unwrap();
    fs.write(st.ino, 0, &new).unwrap();
    fs.close(st.ino).unwrap();
    fs.release(fh).unwrap();
    fs.rename(ROOT, b"config.tmp", ROOT, b"config", false)
        .unwrap();
    // The data went before the name: its block is stored when the rename returns (a
    // committer would still be in its 300 ms APPEND).
    assert!(blocks(&rig) > before, "committed by the rename");
    fs.sync_metadata().unwrap();
    for a in &rig.accounts {
        a.append_delay_us.store(0, Ordering::SeqCst);
    }
    fs.shutdown();
    background.join().unwrap();
    drop(fs);
    let fs = rig.mount();
    let st = fs.lookup(ROOT, b"config").unwrap();
    assert!(
        read_all(&fs, st.ino) == new,
        "the new content under the old name"
    );
}
