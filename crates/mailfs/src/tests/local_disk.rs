//! The mounting machine's own state (write-back journal, backlogs, disk cache) on the
//! simulated disk: power cuts that keep, tear or lose every unsynced write, and injected
//! I/O failures (docs/mailfs.md 6, invariant M6).

use disk::{Disk, SimDisk};

use super::*;

impl Rig {
    fn mkfs_on(&self, disk: &SimDisk) -> Arc<Fs> {
        Fs::mkfs(&self.config, self.remotes()).unwrap();
        self.mount_on(disk)
    }

    fn mount_on(&self, disk: &SimDisk) -> Arc<Fs> {
        Fs::open_on(&self.config, self.remotes(), Arc::new(disk.clone())).unwrap()
    }
}

/// Each power cut keeps every unsynced sector, none, or half of them (torn and reordered).
const KEEP: [f64; 3] = [0.0, 0.5, 1.0];

fn try_write_file(fs: &Fs, parent: u64, name: &str, data: &[u8]) -> Result<(), FsError> {
    let (st, fh) = fs.create(parent, name.as_bytes(), 0o644, 0, 0)?;
    let written = fs.write(st.ino, 0, data);
    let released = fs.release(fh);
    written?;
    released
}

fn content(fs: &Fs, name: &str) -> Option<Vec<u8>> {
    let st = fs.lookup(ROOT, name.as_bytes()).ok()?;
    Some(read_all(fs, st.ino))
}

fn assert_clean(fs: &Fs, what: &str) {
    let report = fs.fsck(&|_, _| {}).unwrap();
    assert!(report.unrecoverable.is_empty(), "{what}: {report:?}");
}

#[test]
fn acknowledged_asynchronous_writes_survive_a_power_cut_of_the_local_disk() {
    for seed in 0..9u64 {
        let rig = Rig::new("mode = \"async\"");
        let disk = SimDisk::new();
        let fs = rig.mkfs_on(&disk);
        let mut files = Vec::new();
        for i in 0..4u64 {
            let name = format!("f{i}");
            let data = noise(3_000 + 9_000 * i as usize, seed * 10 + i);
            write_file(&fs, ROOT, &name, &data);
            files.push((name, data));
        }
        // A rewrite: the newer content is the acknowledged one.
        let newer = noise(21_000, seed + 100);
        let st = fs.lookup(ROOT, b"f1").unwrap();
        fs.setattr(
            st.ino,
            SetAttr {
                size: Some(0),
                ..Default::default()
            },
        )
        .unwrap();
        let fh = fs.open_file(st.ino).unwrap();
        fs.write(st.ino, 0, &newer).unwrap();
        fs.release(fh).unwrap();
        files[1].1 = newer;
        let (records, _) = fs.pending();
        assert!(
            records > 0,
            "the journal holds the writes, nothing was sent"
        );
        // The process dies, then the power goes.
        drop(fs);
        let report = disk.crash(seed, KEEP[seed as usize % 3]);
        let fs = rig.mount_on(&disk);
        assert_eq!(
            fs.pending().0,
            0,
            "seed {seed}: the journal drained at the mount"
        );
        for (name, data) in &files {
            assert_eq!(
                content(&fs, name).as_ref(),
                Some(data),
                "seed {seed}, {name}, {report:?}"
            );
        }
        assert_clean(&fs, &format!("seed {seed}"));
    }
}

#[test]
fn a_write_the_local_disk_failed_is_refused_and_everything_acknowledged_survives() {
    let mut refused = 0;
    for fail_at in 0..16u64 {
        let rig = Rig::new("mode = \"async\"");
        let disk = SimDisk::new();
        let fs = rig.mkfs_on(&disk);
        let kept = noise(19_000, 1);
        write_file(&fs, ROOT, "kept", &kept);
        let maybe = noise(23_000, 2);
        disk.fail_after(fail_at);
        let acknowledged = try_write_file(&fs, ROOT, "maybe", &maybe).is_ok();
        refused += usize::from(!acknowledged);
        drop(fs);
        disk.crash(fail_at, KEEP[fail_at as usize % 3]);
        let fs = rig.mount_on(&disk);
        assert_eq!(
            content(&fs, "kept"),
            Some(kept.clone()),
            "fail_at {fail_at}"
        );
        match content(&fs, "maybe") {
            Some(got) if acknowledged => assert!(got == maybe, "fail_at {fail_at}"),
            // Not acknowledged: absent, created empty, or whole; never a mix.
            Some(got) => assert!(got.is_empty() || got == maybe, "fail_at {fail_at}"),
            None => assert!(
                !acknowledged,
                "fail_at {fail_at}: an acknowledged file is gone"
            ),
        }
        assert_clean(&fs, &format!("fail_at {fail_at}"));
    }
    assert!(refused > 0, "no injected failure reached a write");
}

#[test]
fn a_backlog_survives_a_power_cut_and_is_paid_after_it() {
    for seed in 0..6u64 {
        let rig = Rig::new("");
        let disk = SimDisk::new();
        let fs = rig.mkfs_on(&disk);
        rig.accounts[1].stopped.store(true, Ordering::SeqCst);
        let data = noise(30_000, seed);
        write_file(&fs, ROOT, "during", &data);
        let owed = fs.replicas.accounts[1].backlog_len().0;
        assert!(owed > 0, "account 1 is owed messages");
        drop(fs);
        disk.crash(seed, KEEP[seed as usize % 3]);
        // Still down at the mount, so nothing is paid yet.
        let fs = rig.mount_on(&disk);
        assert_eq!(
            fs.replicas.accounts[1].backlog_len().0,
            owed,
            "seed {seed}: every owed message survived the power cut"
        );
        rig.accounts[1].stopped.store(false, Ordering::SeqCst);
        fs.replicate_once();
        assert_eq!(fs.replicas.accounts[1].backlog_len().0, 0, "seed {seed}");
        assert!(fs.replicas.accounts[1].is_up(), "seed {seed}");
        drop(fs);
        // Account 1 alone holds group 0 now: it has everything.
        rig.accounts[0].stopped.store(true, Ordering::SeqCst);
        let fs = rig.mount_on(&disk);
        assert_eq!(content(&fs, "during"), Some(data), "seed {seed}");
        assert_clean(&fs, &format!("seed {seed}"));
    }
}

#[test]
fn a_torn_or_damaged_disk_cache_is_refetched_never_served() {
    for seed in 0..6u64 {
        let rig = Rig::with_cache("", "keep_written = true");
        let disk = SimDisk::new();
        let fs = rig.mkfs_on(&disk);
        let files: Vec<(String, Vec<u8>)> = (0..4u64)
            .map(|i| {
                let name = format!("c{i}");
                let data = noise(20_000 + 3_000 * i as usize, seed * 10 + i);
                write_file(&fs, ROOT, &name, &data);
                (name, data)
            })
            .collect();
        let cache_dir = fs.state_dir.join("blocks");
        let cached = || disk.list(&cache_dir).unwrap_or_default();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while cached().len() < 8 && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert!(cached().len() >= 8, "written blocks reach the disk cache");
        drop(fs);
        // Cache files are never synced: the cut keeps, tears or loses each sector.
        disk.crash(seed, KEEP[seed as usize % 3]);
        // And a stray flip in whatever survived whole.
        let bytes_of = |name: &str| crate::durable::read_file(&disk, &cache_dir.join(name)).ok();
        let damaged: Vec<(String, Option<Vec<u8>>)> = cached()
            .into_iter()
            .step_by(2)
            .map(|name| {
                disk.corrupt(&cache_dir.join(&name), 40, b"\xff\x00")
                    .unwrap();
                let bytes = bytes_of(&name);
                (name, bytes)
            })
            .collect();
        if KEEP[seed as usize % 3] == 1.0 {
            assert!(!damaged.is_empty(), "seed {seed}: the cut kept the cache");
        }
        // Every account still answers: what the cache cannot prove is fetched again.
        let fs = rig.mount_on(&disk);
        for (name, data) in &files {
            assert_eq!(
                content(&fs, name).as_ref(),
                Some(data),
                "seed {seed}, {name}"
            );
        }
        for (name, bytes) in &damaged {
            // Read, refused, removed, and (maybe) cached again from an account.
            assert_ne!(
                &bytes_of(name),
                bytes,
                "seed {seed}: {name} is still damaged"
            );
        }
        assert_eq!(
            fs.stats
                .integrity_errors
                .load(std::sync::atomic::Ordering::Relaxed),
            0,
            "a cache file is not an account's copy"
        );
    }
}
