//! The metadata log: batches, pages, replay of a prefix, checkpoints (docs/mailfs.md 12a).

use super::*;

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
                    .lock_or_panic()
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
        let mut m = acct.messages.lock_or_panic();
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
fn the_mount_puts_back_a_log_page_a_crash_left_on_one_account_only() {
    let rig = Rig::new("metadata_batch_ms = 10000");
    let fs = rig.mkfs();
    let d = fs.mkdir(ROOT, b"d", 0o755, 0, 0).unwrap();
    let data = pattern(30_000, 9);
    let ino = write_file(&fs, d.ino, "f", &data);
    fs.fsync(ino).unwrap();
    drop(fs);
    // The crash in the middle of `Fs::put`: the newest page reached account 0 alone.
    // (uid, sequence number) of each log page on account `i`.
    let pages = |i: usize| -> Vec<(u32, u64)> {
        let m = rig.accounts[i].messages.lock_or_panic();
        m.iter()
            .filter(|(_, (n, _))| n.contains(" log "))
            .map(|(u, (n, _))| {
                (
                    *u,
                    crate::message_name::MessageName::parse(n).unwrap().index,
                )
            })
            .collect()
    };
    let seq = pages(0).iter().map(|&(_, s)| s).max().unwrap();
    for i in 1..4 {
        let (uid, _) = *pages(i).iter().find(|&&(_, s)| s == seq).unwrap();
        rig.accounts[i].messages.lock_or_panic().remove(&uid);
    }
    // The mount alone (no fsck) reads the tree and writes the page back everywhere.
    let fs = rig.mount();
    let st = fs.lookup(d.ino, b"f").unwrap();
    assert_eq!(read_all(&fs, st.ino), data);
    for i in 0..4 {
        let held = pages(i);
        assert!(
            held.iter().any(|&(_, s)| s == seq),
            "account {i} lacks log page {seq}: {held:?}"
        );
    }
    drop(fs);
    // So the account that held it alone can fail now: the tree is whole without it.
    rig.accounts[0].stopped.store(true, Ordering::SeqCst);
    let _ = std::fs::remove_dir_all(&rig.config.cache.dir);
    let fs = rig.mount();
    let st = fs.lookup(d.ino, b"f").unwrap();
    assert_eq!(read_all(&fs, st.ino), data);
    assert!(fs.fsck(&|_, _| {}).unwrap().unrecoverable.is_empty());
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
    for a in &fs.replicas.accounts {
        let _ = a.replay(true);
    }
    fs.rename(ROOT, b"kept", ROOT, b"moved", false).unwrap();
    drop(fs);
    let fs = rig.mount();
    let names: Vec<Vec<u8>> = fs.readdir(ROOT).unwrap().into_iter().map(|e| e.2).collect();
    assert_eq!(names, vec![b"moved".to_vec()]);
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
    // Sent together, page 0 still lands after the version's other pages on every account.
    for a in &rig.accounts {
        let m = a.messages.lock_or_panic();
        let version = m
            .values()
            .filter(|(n, _)| n.contains(" dir 000000000001.1 "))
            .map(|(n, _)| n.split(' ').nth(3).unwrap().to_string())
            .next_back()
            .unwrap();
        let uid_of = |page: usize| {
            m.iter()
                .filter(|(_, (n, _))| n.contains(&format!(" dir 000000000001.{page} {version} ")))
                .map(|(u, _)| *u)
                .max()
                .unwrap()
        };
        assert!((1..pages).all(|p| uid_of(p) < uid_of(0)), "{}", a.name);
    }
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
        let mut m = a.messages.lock_or_panic();
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
fn a_checkpoint_of_many_directories_takes_a_few_appends_per_account() {
    let rig = Rig::new("metadata_batch_ms = 10000");
    let fs = rig.mkfs();
    for i in 0..200 {
        let d = fs
            .mkdir(ROOT, format!("d{i:03}").as_bytes(), 0o755, 0, 0)
            .unwrap();
        write_file(&fs, d.ino, "f", format!("file {i}").as_bytes());
    }
    fs.sync_metadata().unwrap();
    let appends = |rig: &Rig| {
        rig.accounts
            .iter()
            .map(|a| a.append_commands.load(Ordering::SeqCst))
            .collect::<Vec<_>>()
    };
    let before = appends(&rig);
    let dirs = messages_of(&rig, 0, " dir ");
    assert_eq!(fs.checkpoint().unwrap(), 201);
    assert_eq!(messages_of(&rig, 0, " dir "), dirs + 201);
    for (a, b) in appends(&rig).iter().zip(before) {
        // 201 directories in MULTIAPPENDs of 16, and the superblock: one each, they were
        // 202 commands.
        assert!(a - b <= 201_u64.div_ceil(16) + 1, "{} commands", a - b);
    }
    drop(fs);
    let fs = rig.mount();
    let d = fs.lookup(ROOT, b"d199").unwrap();
    assert_eq!(
        read_all(&fs, fs.lookup(d.ino, b"f").unwrap().ino),
        b"file 199"
    );
    assert!(fs.fsck(&|_, _| {}).unwrap().clean());
}

#[test]
fn an_account_that_fails_during_a_checkpoint_is_owed_the_rest() {
    let rig = Rig::new("metadata_batch_ms = 10000");
    let fs = rig.mkfs();
    for i in 0..100 {
        fs.mkdir(ROOT, format!("d{i:03}").as_bytes(), 0o755, 0, 0)
            .unwrap();
    }
    fs.sync_metadata().unwrap();
    // Account 3 takes two more commands (32 directory messages), then dies.
    rig.accounts[3].appends_left.store(2, Ordering::SeqCst);
    let dirs = messages_of(&rig, 0, " dir ");
    fs.checkpoint().unwrap();
    assert_eq!(messages_of(&rig, 0, " dir "), dirs + 101);
    assert_eq!(messages_of(&rig, 3, " dir "), dirs + 32);
    assert_eq!(
        fs.replicas.accounts[3].backlog_len().0,
        101 - 32 + 1,
        "the directories it lacks and the superblock"
    );
    rig.accounts[3].stopped.store(false, Ordering::SeqCst);
    rig.accounts[3].appends_left.store(-1, Ordering::SeqCst);
    fs.replicate_once();
    assert_eq!(fs.replicas.accounts[3].backlog_len().0, 0);
    assert_eq!(messages_of(&rig, 3, " dir "), dirs + 101);
    // Account 3 alone serves the tree.
    drop(fs);
    for a in &rig.accounts[..3] {
        a.stopped.store(true, Ordering::SeqCst);
    }
    let fs = rig.mount();
    assert_eq!(fs.readdir(ROOT).unwrap().len(), 100);
}

#[test]
fn with_fast_a_checkpoint_goes_on_at_the_next_member_and_each_is_owed_what_it_lacks() {
    let rig = Rig::new("metadata_batch_ms = 10000\nstrategy = \"fast\"");
    let fs = rig.mkfs();
    for i in 0..100 {
        fs.mkdir(ROOT, format!("d{i:03}").as_bytes(), 0o755, 0, 0)
            .unwrap();
    }
    fs.sync_metadata().unwrap();
    fs.replicate_once();
    // Whichever member goes first, three of them die after two commands (32 directory
    // messages) each: the checkpoint goes on where each stopped, on the next one.
    for a in &rig.accounts[..3] {
        a.appends_left.store(2, Ordering::SeqCst);
    }
    let dirs: Vec<usize> = (0..4).map(|i| messages_of(&rig, i, " dir ")).collect();
    fs.checkpoint().unwrap();
    for a in &rig.accounts {
        a.stopped.store(false, Ordering::SeqCst);
        a.appends_left.store(-1, Ordering::SeqCst);
    }
    fs.replicate_once();
    for (i, before) in dirs.iter().enumerate() {
        assert_eq!(fs.replicas.accounts[i].backlog_len().0, 0);
        assert_eq!(messages_of(&rig, i, " dir "), before + 101, "account {i}");
    }
}
