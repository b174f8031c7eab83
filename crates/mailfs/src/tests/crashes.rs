//! Crash points of the commit and of renames, and concurrent writers (docs/mailfs.md 5).

use super::*;

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
        let mut m = a.messages.lock_or_panic();
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
