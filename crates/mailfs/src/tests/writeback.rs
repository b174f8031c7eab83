//! Write-back of closed files: the committers, their bound, rename ordering.

use super::*;

#[test]
fn close_hands_large_files_to_the_committers_and_fsync_waits_for_them() {
    let rig = Rig::new("block_size = 65536\nmetadata_batch_ms = 10000");
    let fs = rig.mkfs();
    // As WRITEBACK_BYTES_MAX, scaled down: room for 16 files of 20,000 bytes.
    fs.tree.writeback.set_bytes_max(16 * 20_000);
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
