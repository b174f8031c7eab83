//! Replication groups: failover and catch-up, tampering, the passphrase.

use super::*;

#[test]
fn a_stopped_account_is_failed_over_and_caught_up() {
    let rig = Rig::new("");
    let fs = rig.mkfs();
    rig.accounts[1].stopped.store(true, Ordering::SeqCst);
    let data = pattern(30_000, 9);
    let ino = write_file(&fs, ROOT, "during", &data);
    assert!(!fs.replicas.accounts[1].is_up());
    assert!(fs.pending().0 > 0, "account 1 is owed messages");
    assert_eq!(read_all(&fs, ino), data);
    // Back: the replicator pays the backlog and marks it up.
    rig.accounts[1].stopped.store(false, Ordering::SeqCst);
    fs.replicate_once();
    assert!(fs.replicas.accounts[1].is_up());
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
fn the_write_quorum_decides_who_gets_a_write_now_and_who_is_owed_it() {
    // (quorum, owed): fast alone sends to one member of each group and owes the other;
    // fast with a quorum of 2 and strong send to both and owe nothing.
    for (extra, owed) in [
        ("strategy = \"fast\"", true),
        ("strategy = \"fast\"\nwrite_quorum = 2", false),
        ("strategy = \"strong\"", false),
    ] {
        let rig = Rig::new(extra);
        let fs = rig.mkfs();
        let data = pattern(30_000, 3);
        let ino = write_file(&fs, ROOT, "f", &data);
        fs.fsync(ino).unwrap();
        assert_eq!(
            fs.pending().0 > 0,
            owed,
            "{extra}: pending {:?}",
            fs.pending()
        );
        let blocks: Vec<usize> = (0..4).map(|i| messages_of(&rig, i, " blk ")).collect();
        if owed {
            // Each block is on one member of its group now, the other gets it from the
            // backlog.
            assert_eq!(blocks.iter().sum::<usize>(), 8, "{extra}: {blocks:?}");
            fs.replicate_once();
            assert_eq!(fs.pending().0, 0);
        }
        let blocks: Vec<usize> = (0..4).map(|i| messages_of(&rig, i, " blk ")).collect();
        assert_eq!(blocks[0], blocks[1], "{extra}: {blocks:?}");
        assert_eq!(blocks[2], blocks[3], "{extra}: {blocks:?}");
        assert_eq!(read_all(&fs, ino), data);
    }
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
        let mut m = a.messages.lock_or_panic();
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
        let m = rig.accounts[0].messages.lock_or_panic();
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
