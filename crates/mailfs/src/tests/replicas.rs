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

/// Makes the members on server0 (0 and 2) the preferred ones (the others look slower of
/// late) and slows each of their commands that `delay` picks (FETCH, APPEND) by `slow`.
fn slow_preferred_server(
    fs: &Fs,
    rig: &Rig,
    delay: impl Fn(&MemRemote) -> &std::sync::atomic::AtomicU64,
    slow: std::time::Duration,
) {
    for fast in [1, 3] {
        fs.replicas.accounts[fast].note_slow(std::time::Duration::from_millis(5));
    }
    for preferred in [0, 2] {
        delay(&rig.accounts[preferred]).store(slow.as_micros() as u64, Ordering::SeqCst);
    }
}

/// A file of several blocks in both groups, read back by a new mount with no cache, while
/// the first member of each group (preferred: the others look slower) takes `slow` per
/// FETCH. Returns how long the read took and the mount.
fn read_with_a_slow_member(
    extra: &str,
    slow: std::time::Duration,
) -> (std::time::Duration, Arc<Fs>) {
    let rig = Rig::new(extra);
    let fs = rig.mkfs();
    let data = noise(40_000, 5);
    write_file(&fs, ROOT, "f", &data);
    drop(fs);
    std::fs::remove_dir_all(rig.config.cache.dir.clone()).unwrap();
    let fs = rig.mount();
    slow_preferred_server(&fs, &rig, |a| &a.fetch_delay_us, slow);
    let started = std::time::Instant::now();
    let st = fs.lookup(ROOT, b"f").unwrap();
    assert_eq!(read_all(&fs, st.ino), data);
    let took = started.elapsed();
    eprintln!("{extra}: read with members taking {slow:?} per FETCH: {took:?}");
    (took, fs)
}

#[test]
fn a_slow_member_costs_a_read_the_hedge_delay_not_its_own() {
    let slow = std::time::Duration::from_millis(3000);
    let (took, fs) = read_with_a_slow_member("hedge_delay_ms = 50", slow);
    let hedged = fs.stats.hedged_reads.load(Ordering::Relaxed);
    let wins = fs.stats.hedge_wins.load(Ordering::Relaxed);
    assert!(took < slow / 2, "the read took {took:?}");
    assert!(hedged >= 1 && wins >= 1, "hedged {hedged}, won {wins}");
    // The slow members' silence counted: the next reads prefer the members that answered.
    assert!(
        fs.replicas.accounts[0].latency_us() > fs.replicas.accounts[1].latency_us(),
        "latency {} against {}",
        fs.replicas.accounts[0].latency_us(),
        fs.replicas.accounts[1].latency_us()
    );
    assert!(fs.stats_text().contains(&format!("hedge_wins={wins}\n")));
    // Without hedging the same read waits for the slow member.
    let (took, fs) = read_with_a_slow_member("hedge_delay_ms = 0", slow);
    assert!(took >= slow, "unhedged, the read took {took:?}");
    assert_eq!(fs.stats.hedged_reads.load(Ordering::Relaxed), 0);
}

#[test]
fn a_hedge_never_wins_with_a_wrong_copy() {
    let rig = Rig::new("hedge_delay_ms = 20");
    let fs = rig.mkfs();
    let data = noise(20_000, 7);
    write_file(&fs, ROOT, "f", &data);
    drop(fs);
    std::fs::remove_dir_all(rig.config.cache.dir.clone()).unwrap();
    let fs = rig.mount();
    // Load the tree first; then the first member of each group is preferred and slow, and
    // the other one's block copies are garbage: the hedges' answers are rejected, the
    // slow copies win.
    let st = fs.lookup(ROOT, b"f").unwrap();
    for other in [1, 3] {
        fs.replicas.accounts[other].note_slow(std::time::Duration::from_millis(5));
        for (n, body) in rig.accounts[other].messages.lock_or_panic().values_mut() {
            if n.contains(" blk ") {
                let last = body.len() - 1;
                body[last] ^= 1;
            }
        }
    }
    let slow = std::time::Duration::from_millis(300);
    for preferred in [0, 2] {
        rig.accounts[preferred]
            .fetch_delay_us
            .store(slow.as_micros() as u64, Ordering::SeqCst);
    }
    let started = std::time::Instant::now();
    assert_eq!(read_all(&fs, st.ino), data);
    assert!(started.elapsed() >= slow);
    assert!(fs.stats.hedged_reads.load(Ordering::Relaxed) >= 1);
    assert_eq!(fs.stats.hedge_wins.load(Ordering::Relaxed), 0);
    assert!(fs.stats.integrity_errors.load(Ordering::Relaxed) >= 1);
}

/// A file of blocks in both groups written and fsynced on a mount whose preferred members
/// (0 and 2, one server) take `slow` per APPEND; returns how long the write took and the
/// mount.
fn write_with_a_slow_server(
    extra: &str,
    slow: std::time::Duration,
) -> (std::time::Duration, Arc<Fs>, Rig) {
    let rig = Rig::new(&format!("strategy = \"fast\"\n{extra}"));
    let fs = rig.mkfs();
    slow_preferred_server(&fs, &rig, |a| &a.append_delay_us, slow);
    let data = noise(40_000, 8);
    let started = std::time::Instant::now();
    let ino = write_file(&fs, ROOT, "f", &data);
    fs.fsync(ino).unwrap();
    let took = started.elapsed();
    eprintln!("{extra}: write and fsync with members taking {slow:?} per APPEND: {took:?}");
    assert_eq!(read_all(&fs, ino), data);
    (took, fs, rig)
}

#[test]
fn a_slow_member_costs_a_write_the_hedge_delay_not_its_own() {
    let slow = std::time::Duration::from_millis(3000);
    let (took, fs, rig) = write_with_a_slow_server("hedge_delay_ms = 50", slow);
    // The file's blocks and its directory's log page each went to the slow member
    // first, and on to the other one after the hedge delay.
    assert!(took < slow / 2, "the write took {took:?}");
    let hedged = fs.stats.hedged_writes.load(Ordering::Relaxed);
    assert!(hedged >= 2, "hedged writes: {hedged}");
    assert!(
        fs.stats_text()
            .contains(&format!("hedged_writes={hedged}\n"))
    );
    // The slow members' silence counted: the next writes prefer the others.
    assert!(fs.replicas.accounts[0].latency_us() > fs.replicas.accounts[1].latency_us());
    // What the slow members had not taken when the write returned is owed to them, and
    // once paid every member holds the file (a late copy is a duplicate, not a loss).
    assert!(fs.pending().0 > 0, "the slow members are owed the write");
    for a in &rig.accounts {
        a.append_delay_us.store(0, Ordering::SeqCst);
    }
    fs.replicate_once();
    assert_eq!(fs.pending().0, 0);
    let blocks: Vec<usize> = (0..4).map(|i| messages_of(&rig, i, " blk ")).collect();
    assert!(
        blocks.iter().all(|&b| b > 0),
        "blocks per account: {blocks:?}"
    );
    drop(fs);
    // A new mount reads the file from the members that were slow alone.
    for other in [1, 3] {
        rig.accounts[other].stopped.store(true, Ordering::SeqCst);
    }
    let fs = rig.mount();
    let st = fs.lookup(ROOT, b"f").unwrap();
    assert_eq!(read_all(&fs, st.ino), noise(40_000, 8));

    // Without hedging the same write waits for the slow member.
    let (took, fs, _rig) = write_with_a_slow_server("hedge_delay_ms = 0", slow);
    assert!(took >= slow, "unhedged, the write took {took:?}");
    assert_eq!(fs.stats.hedged_writes.load(Ordering::Relaxed), 0);
}

#[test]
fn strong_replication_waits_for_a_slow_member_even_with_hedging() {
    // Write-all: every live member must have the write, so a hedge has nobody to ask.
    let slow = std::time::Duration::from_millis(500);
    let rig = Rig::new("strategy = \"strong\"\nhedge_delay_ms = 20");
    let fs = rig.mkfs();
    rig.accounts[0]
        .append_delay_us
        .store(slow.as_micros() as u64, Ordering::SeqCst);
    let started = std::time::Instant::now();
    let ino = write_file(&fs, ROOT, "f", &noise(20_000, 9));
    fs.fsync(ino).unwrap();
    assert!(started.elapsed() >= slow);
    assert_eq!(fs.pending().0, 0, "strong owes nothing to a live member");
    assert_eq!(fs.stats.hedged_writes.load(Ordering::Relaxed), 0);
}
