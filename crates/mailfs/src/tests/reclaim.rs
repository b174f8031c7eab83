//! Reclaim: the mount removes the blocks its commits superseded (docs/mailfs.md 8).

use super::*;
use crate::fs::reclaim::{Commit, RECLAIM_BLOCKS_MAX, Reclaim};
use crate::meta::BlockRef;

/// Block messages in every account together.
fn blocks(rig: &Rig) -> usize {
    (0..4).map(|i| messages_of(rig, i, " blk ")).sum()
}

/// Writes `data` at `offset` and commits (close without fsync: the page may wait).
fn rewrite(fs: &Fs, ino: u64, offset: u64, data: &[u8]) {
    let fh = fs.open_file(ino).unwrap();
    fs.write(ino, offset, data).unwrap();
    fs.flush(ino).unwrap();
    fs.release(fh).unwrap();
}

#[test]
fn rewrites_past_versions_max_are_reclaimed_and_kept_ones_restore() {
    let rig = Rig::new("versions_max = 2\nreclaim_delay_ms = 0");
    let fs = rig.mkfs();
    // Three 4 KiB blocks (past the inline limit of one block), two copies each.
    let mut model = pattern(12_288, 1);
    let ino = write_file(&fs, ROOT, "f", &model);
    assert_eq!(blocks(&rig), 6);
    for round in 0..10u8 {
        let new = pattern(100, 10 + round);
        rewrite(&fs, ino, 5000, &new);
        model[5000..5100].copy_from_slice(&new);
    }
    // Eleven versions of block 1 are on the accounts until reclaim runs.
    assert_eq!(blocks(&rig), 6 + 2 * 10);
    let (messages, bytes) = fs.reclaim_once().unwrap();
    // Live blocks and the two kept versions stay: 8 superseded versions, two copies each.
    assert_eq!(messages, 16);
    assert_eq!(bytes, 16 * 4096);
    assert_eq!(blocks(&rig), 6 + 2 * 2);
    assert_eq!(fs.stats.reclaimed_messages.load(Ordering::Relaxed), 16);
    assert!(
        fs.stats_text()
            .contains("reclaimed_messages=16\nreclaimed_bytes=65536\n")
    );
    assert_eq!(read_all(&fs, ino), model);
    // Only versions whose content is left are listed: the current one, the two kept, and
    // the empty file it was created as.
    let listed: Vec<u64> = fs
        .versions("/f")
        .unwrap()
        .iter()
        .map(|v| v.version)
        .collect();
    assert_eq!(listed.len(), 4, "{listed:?}");
    let current = listed[0];
    assert!(
        listed[1] == current - 1 && listed[2] == current - 2,
        "{listed:?}"
    );
    // A reclaimed version is refused; a kept one restores byte for byte.
    let err = fs.restore("/f", current - 3).unwrap_err();
    assert!(err.to_string().contains("reclaimed"), "{err}");
    let mut kept = model.clone();
    kept[5000..5100].copy_from_slice(&pattern(100, 10 + 8));
    fs.restore("/f", current - 1).unwrap();
    assert_eq!(read_all(&fs, ino), kept);
    // And a remount reads what is left, fsck finds nothing missing.
    let fs = rig.mount();
    let st = fs.lookup(ROOT, b"f").unwrap();
    assert_eq!(read_all(&fs, st.ino), kept);
    assert!(fs.fsck(&|_, _| {}).unwrap().clean());
}

#[test]
fn reclaim_waits_for_the_page_every_account_and_the_delay() {
    let rig = Rig::new("versions_max = 0\nreclaim_delay_ms = 0\nmetadata_batch_ms = 10000");
    let fs = rig.mkfs();
    let ino = write_file(&fs, ROOT, "f", &pattern(12_288, 1));
    fs.sync_metadata().unwrap();
    rewrite(&fs, ino, 0, &pattern(10, 2));
    // The clean entry that stops naming the old block is still in the batch: a crash now
    // leaves a tree that names it.
    assert_eq!(fs.reclaim_once().unwrap(), (0, 0));
    // Written, but account 3 is down and will be owed the page: it would still name it.
    rig.accounts[3].stopped.store(true, Ordering::SeqCst);
    fs.sync_metadata().unwrap();
    assert!(!fs.replicas.accounts[3].is_up());
    assert_eq!(fs.reclaim_once().unwrap(), (0, 0));
    rig.accounts[3].stopped.store(false, Ordering::SeqCst);
    fs.replicate_once();
    assert_eq!(fs.pending().0, 0);
    let (messages, _) = fs.reclaim_once().unwrap();
    assert_eq!(messages, 2, "one block, two copies");
    assert_eq!(blocks(&rig), 6);

    // With a delay, nothing goes before it.
    let rig = Rig::new("versions_max = 0\nreclaim_delay_ms = 60000");
    let fs = rig.mkfs();
    let ino = write_file(&fs, ROOT, "f", &pattern(12_288, 1));
    rewrite(&fs, ino, 0, &pattern(10, 2));
    assert_eq!(fs.reclaim_once().unwrap(), (0, 0));
    assert_eq!(blocks(&rig), 8);
    // One list of one block: two units.
    assert!(fs.stats_text().contains("reclaim_held=2\n"));
}

#[test]
fn truncated_blocks_are_superseded_too_and_reclaim_false_keeps_everything() {
    let rig = Rig::new("versions_max = 0\nreclaim_delay_ms = 0");
    let fs = rig.mkfs();
    let ino = write_file(&fs, ROOT, "f", &pattern(12_288, 1));
    fs.setattr(
        ino,
        SetAttr {
            size: Some(5000),
            ..Default::default()
        },
    )
    .unwrap();
    // Block 2 is cut, block 1 rewritten shorter: both old copies go.
    assert_eq!(fs.reclaim_once().unwrap().0, 4);
    assert_eq!(read_all(&fs, ino), pattern(12_288, 1)[..5000].to_vec());

    let rig = Rig::new("reclaim = false\nversions_max = 0\nreclaim_delay_ms = 0");
    let fs = rig.mkfs();
    let ino = write_file(&fs, ROOT, "f", &pattern(12_288, 1));
    rewrite(&fs, ino, 0, &pattern(10, 2));
    assert_eq!(fs.reclaim_once().unwrap(), (0, 0));
    assert_eq!(blocks(&rig), 8);
}

#[test]
fn a_snapshot_keeps_the_blocks_it_names() {
    let rig = Rig::new("versions_max = 0\nreclaim_delay_ms = 0");
    let fs = rig.mkfs();
    let old = pattern(12_288, 1);
    let ino = write_file(&fs, ROOT, "f", &old);
    // Reclaim already tracks the file before the snapshot.
    rewrite(&fs, ino, 0, &pattern(10, 2));
    let mut model = old.clone();
    model[..10].copy_from_slice(&pattern(10, 2));
    fs.snapshot("s").unwrap();
    for round in 0..5u8 {
        rewrite(&fs, ino, 0, &pattern(10, 3 + round));
    }
    fs.reclaim_once().unwrap();
    // The snapshot's block 0 (and the one before the snapshot, gone) stay as the snapshot
    // needs them; the four written after it and superseded go.
    assert_eq!(
        fs.stats.reclaimed_messages.load(Ordering::Relaxed),
        2 + 4 * 2
    );
    let snaps = fs.lookup(ROOT, b".snapshots").unwrap();
    let s = fs.lookup(snaps.ino, b"s").unwrap();
    let f = fs.lookup(s.ino, b"f").unwrap();
    assert_eq!(fs.read(f.ino, 0, 20_000).unwrap(), model);
}

fn block(index: u64, version: u64) -> BlockRef {
    BlockRef {
        index,
        version,
        group: 0,
        len: 1,
        hash: [0; 32],
    }
}

#[test]
fn the_lists_held_are_bounded() {
    let r = Reclaim::new(true, 8, 0);
    let n = RECLAIM_BLOCKS_MAX + 1000;
    for file in 0..n as u64 {
        r.push(Commit {
            file,
            old_version: 0,
            version: 2,
            generation: 0,
            ticket: 0,
            blocks: vec![block(0, 1 << 32)],
        });
    }
    // One kept list of one block per file (two units): the files touched longest ago are
    // dropped, a sixteenth of the bound at a time.
    let (held, dropped) = r.counts();
    assert!(
        (RECLAIM_BLOCKS_MAX * 15 / 16..=RECLAIM_BLOCKS_MAX).contains(&held),
        "{held}"
    );
    assert_eq!(held as u64 / 2 + dropped, n as u64);
    // Blocks of the version before the mount's first commit of a file are never held.
    r.push(Commit {
        file: 1 << 40,
        old_version: 5,
        version: 6,
        generation: 0,
        ticket: 0,
        blocks: vec![block(0, 5 << 32), block(1, 6 << 32)],
    });
    assert_eq!(r.counts(), (held + 2, dropped));
}

#[test]
fn log_pages_before_the_previous_checkpoint_are_reclaimed() {
    let rig = Rig::new("versions_max = 0\nreclaim_delay_ms = 0");
    let fs = rig.mkfs();
    let mut model = pattern(12_288, 1);
    let ino = write_file(&fs, ROOT, "f", &model);
    let mut round = 0u8;
    let mut rewrites = |fs: &Fs, model: &mut Vec<u8>, n: usize| {
        for _ in 0..n {
            round += 1;
            let new = pattern(10, round);
            rewrite(fs, ino, 0, &new);
            model[..10].copy_from_slice(&new);
        }
    };
    rewrites(&fs, &mut model, 5);
    // The first checkpoint of this mount: the superblock before it (log_from 0) still
    // counts, so no page goes.
    fs.checkpoint().unwrap();
    let pages = messages_of(&rig, 0, " log ");
    fs.reclaim_once().unwrap();
    assert_eq!(messages_of(&rig, 0, " log "), pages);
    rewrites(&fs, &mut model, 5);
    fs.checkpoint().unwrap();
    // Now the pages up to the first checkpoint go, on every account; those after it stay
    // for the superblock before the newest.
    let before = messages_of(&rig, 0, " log ");
    fs.reclaim_once().unwrap();
    let after = messages_of(&rig, 0, " log ");
    assert_eq!(before - after, pages, "{before} -> {after}");
    assert!(after > 0);
    assert_eq!(
        fs.stats.reclaimed_log_pages.load(Ordering::Relaxed),
        4 * pages as u64
    );
    // A remount replays from the newest checkpoint; fsck finds every page it needs.
    let fs = rig.mount();
    let st = fs.lookup(ROOT, b"f").unwrap();
    assert_eq!(read_all(&fs, st.ino), model);
    assert!(fs.fsck(&|_, _| {}).unwrap().clean());
}

#[test]
fn blocks_uploaded_ahead_and_rewritten_before_the_commit_are_reclaimed() {
    let rig = Rig::new("versions_max = 0\nreclaim_delay_ms = 0");
    let fs = rig.mkfs();
    let ino = write_file(&fs, ROOT, "f", &pattern(4096 * 40, 1));
    let fh = fs.open_file(ino).unwrap();
    // Whole blocks go up at once (write-behind), then are written again before the
    // commit: the first uploads are named by nothing.
    let first = pattern(4096 * 40, 2);
    fs.write(ino, 0, &first).unwrap();
    let started = std::time::Instant::now();
    while blocks(&rig) <= 80 + 64 && started.elapsed().as_secs() < 20 {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let uploaded = blocks(&rig);
    assert!(uploaded > 80 + 64, "write-behind uploaded {uploaded}");
    let second = pattern(4096 * 40, 3);
    fs.write(ino, 0, &second).unwrap();
    fs.flush(ino).unwrap();
    fs.release(fh).unwrap();
    fs.sync_metadata().unwrap();
    fs.reclaim_once().unwrap();
    // Only the live 40 blocks (two copies each) are left.
    assert_eq!(blocks(&rig), 80);
    assert_eq!(read_all(&fs, ino), second);
    // A file cut under the inline limit gives all its blocks back.
    fs.setattr(
        ino,
        SetAttr {
            size: Some(100),
            ..Default::default()
        },
    )
    .unwrap();
    fs.sync_metadata().unwrap();
    fs.reclaim_once().unwrap();
    assert_eq!(blocks(&rig), 0);
    let fs = rig.mount();
    let st = fs.lookup(ROOT, b"f").unwrap();
    assert_eq!(read_all(&fs, st.ino), second[..100].to_vec());
}
