//! Hard links (docs/mailfs.md 12b): names sharing one inode entry, their counts, the
//! crash cases, fsck, snapshots and history.

use super::*;
use crate::fs::INODES;

fn nlink(fs: &Fs, parent: u64, name: &str) -> u32 {
    fs.lookup(parent, name.as_bytes()).unwrap().nlink
}

#[test]
fn hard_links_share_data_and_attributes_and_the_last_name_takes_the_blocks() {
    let rig = Rig::new("");
    let fs = rig.mkfs();
    let a = fs.mkdir(ROOT, b"a", 0o755, 0, 0).unwrap();
    let b = fs.mkdir(ROOT, b"b", 0o755, 0, 0).unwrap();
    let data = pattern(40_000, 3);
    let ino = write_file(&fs, a.ino, "f", &data);
    assert_eq!(nlink(&fs, a.ino, "f"), 1);
    let st = fs.link(ino, b.ino, b"g").unwrap();
    assert_eq!((st.ino, st.nlink, st.size), (ino, 2, 40_000));
    let third = fs.link(ino, a.ino, b"f2").unwrap();
    assert_eq!(third.nlink, 3);
    // One file: a write through it and a chmod show under every name.
    fs.write(ino, 0, b"CHANGED").unwrap();
    fs.flush(ino).unwrap();
    fs.setattr(
        ino,
        SetAttr {
            mode: Some(0o600),
            ..Default::default()
        },
    )
    .unwrap();
    for (dir, name) in [(a.ino, "f"), (b.ino, "g"), (a.ino, "f2")] {
        let st = fs.lookup(dir, name.as_bytes()).unwrap();
        assert_eq!((st.ino, st.nlink, st.attr.mode), (ino, 3, 0o600), "{name}");
    }
    let mut expect = data.clone();
    expect[..7].copy_from_slice(b"CHANGED");
    drop(fs);
    let fs = rig.mount();
    let g = fs.lookup(b.ino, b"g").unwrap();
    assert_eq!((g.ino, g.nlink), (ino, 3));
    assert_eq!(read_all(&fs, g.ino), expect);
    // Names go one at a time; the data stays while one is left.
    fs.unlink(a.ino, b"f").unwrap();
    fs.unlink(a.ino, b"f2").unwrap();
    assert_eq!(nlink(&fs, b.ino, "g"), 1);
    drop(fs);
    let fs = rig.mount();
    assert_eq!(nlink(&fs, b.ino, "g"), 1);
    assert_eq!(read_all(&fs, ino), expect);
    let blocks = messages_of(&rig, 0, " blk ") + messages_of(&rig, 2, " blk ");
    assert!(blocks > 0);
    // The last name takes the inode entry, and gc the blocks.
    fs.unlink(b.ino, b"g").unwrap();
    assert!(matches!(fs.getattr(ino), Err(FsError::NotFound)));
    fs.gc(&|_, _| {}).unwrap();
    let left = messages_of(&rig, 0, " blk ") + messages_of(&rig, 2, " blk ");
    assert_eq!(left, 0, "blocks of the removed file are collected");
    let report = fs.fsck(&|_, _| {}).unwrap();
    assert!(report.clean(), "{report:?}");
    assert_eq!(report.inodes, 0);
}

#[test]
fn links_to_special_files_and_symlinks_and_the_refusals() {
    let rig = Rig::new("");
    let fs = rig.mkfs();
    let fifo = fs.mknod(ROOT, b"fifo", Kind::Fifo, 0o644, 0, 0, 0).unwrap();
    let sl = fs.symlink(ROOT, b"sl", b"/target", 0, 0).unwrap();
    let dev = fs
        .mknod(ROOT, b"dev", Kind::CharDevice, 0o600, 0x0103, 0, 0)
        .unwrap();
    assert_eq!(fs.link(fifo.ino, ROOT, b"fifo2").unwrap().kind, Kind::Fifo);
    assert_eq!(fs.link(sl.ino, ROOT, b"sl2").unwrap().nlink, 2);
    assert_eq!(fs.readlink(sl.ino).unwrap(), b"/target");
    assert_eq!(fs.link(dev.ino, ROOT, b"dev2").unwrap().rdev, 0x0103);
    let d = fs.mkdir(ROOT, b"d", 0o755, 0, 0).unwrap();
    assert!(matches!(
        fs.link(d.ino, ROOT, b"d2"),
        Err(FsError::NotPermitted(_))
    ));
    assert_eq!(fs.link(fifo.ino, ROOT, b"sl2"), Err(FsError::Exists));
    assert_eq!(
        fs.link(fifo.ino, ROOT, &[b'x'; 256]),
        Err(FsError::NameTooLong)
    );
    drop(fs);
    let fs = rig.mount();
    let st = fs.lookup(ROOT, b"sl2").unwrap();
    assert_eq!((st.kind, st.nlink), (Kind::Symlink, 2));
    assert_eq!(fs.readlink(st.ino).unwrap(), b"/target");
    let names: Vec<Vec<u8>> = fs.readdir(ROOT).unwrap().into_iter().map(|e| e.2).collect();
    assert!(names.contains(&b"dev2".to_vec()) && names.contains(&b"fifo2".to_vec()));
    assert!(
        !names.iter().any(|n| n.len() == 16),
        "the inode directory is not listed"
    );
}

#[test]
fn link_unlink_and_rename_over_a_link_are_one_page_each() {
    let rig = Rig::new("");
    let fs = rig.mkfs();
    let a = fs.mkdir(ROOT, b"a", 0o755, 0, 0).unwrap();
    let ino = write_file(&fs, ROOT, "f", b"small");
    let pages = || fs.stats.log_pages.load(Ordering::Relaxed);
    let before = pages();
    fs.link(ino, a.ino, b"g").unwrap();
    assert_eq!(
        pages(),
        before + 1,
        "the inode, the old name and the new one"
    );
    let other = write_file(&fs, a.ino, "other", b"other");
    let before = pages();
    fs.rename(a.ino, b"other", ROOT, b"f", false).unwrap();
    assert_eq!(pages(), before + 1, "a rename over a link and its count");
    assert_eq!(nlink(&fs, a.ino, "g"), 1);
    assert_eq!(fs.lookup(ROOT, b"f").unwrap().ino, other);
    // A page lost everywhere takes the whole group: never a name without its count.
    drop(fs);
    for acct in &rig.accounts {
        let mut m = acct.messages.lock_or_panic();
        let last = m
            .iter()
            .filter(|(_, (n, _))| n.contains(" log "))
            .map(|(u, _)| *u)
            .max()
            .unwrap();
        m.remove(&last);
    }
    let fs = rig.mount();
    // Before the rename: f is still the linked file, with both names counted.
    assert_eq!(fs.lookup(ROOT, b"f").unwrap().ino, ino);
    assert_eq!(nlink(&fs, ROOT, "f"), 2);
    assert_eq!(nlink(&fs, a.ino, "g"), 2);
    assert!(fs.lookup(a.ino, b"other").is_ok());
    let report = fs.fsck(&|_, _| {}).unwrap();
    assert!(report.clean(), "{report:?}");
    assert_eq!(report.inodes, 1);
}

#[test]
fn renames_between_links_of_one_file_and_across_directories() {
    let rig = Rig::new("metadata_batch_ms = 10000");
    let fs = rig.mkfs();
    let a = fs.mkdir(ROOT, b"a", 0o755, 0, 0).unwrap();
    let b = fs.mkdir(ROOT, b"b", 0o755, 0, 0).unwrap();
    let ino = write_file(&fs, a.ino, "x", b"shared");
    fs.link(ino, a.ino, b"w").unwrap();
    fs.link(ino, b.ino, b"y").unwrap();
    // rename(2) between two names of one file does nothing.
    fs.rename(a.ino, b"x", b.ino, b"y", false).unwrap();
    assert!(fs.lookup(a.ino, b"x").is_ok() && fs.lookup(b.ino, b"y").is_ok());
    // Across directories, with another name of the file in each: only the renamed one
    // moves.
    fs.rename(a.ino, b"x", b.ino, b"z", false).unwrap();
    fs.sync_metadata().unwrap();
    drop(fs);
    let fs = rig.mount();
    assert!(matches!(fs.lookup(a.ino, b"x"), Err(FsError::NotFound)));
    for (dir, name) in [(a.ino, "w"), (b.ino, "y"), (b.ino, "z")] {
        let st = fs.lookup(dir, name.as_bytes()).unwrap();
        assert_eq!((st.ino, st.nlink), (ino, 3), "{name}");
    }
    assert_eq!(read_all(&fs, ino), b"shared");
}

#[test]
fn an_open_file_keeps_its_data_after_its_last_name_until_the_last_close() {
    let rig = Rig::new("");
    let fs = rig.mkfs();
    let data = pattern(30_000, 9);
    let ino = write_file(&fs, ROOT, "f", &data);
    fs.link(ino, ROOT, b"g").unwrap();
    let fh = fs.open_file(ino).unwrap();
    fs.unlink(ROOT, b"f").unwrap();
    fs.unlink(ROOT, b"g").unwrap();
    let st = fs.getattr(ino).unwrap();
    assert_eq!((st.nlink, st.size), (0, 30_000));
    assert_eq!(read_all(&fs, ino), data);
    assert_eq!(fs.link(ino, ROOT, b"again"), Err(FsError::NotFound));
    fs.release(fh).unwrap();
    assert!(matches!(fs.getattr(ino), Err(FsError::NotFound)));
}

#[test]
fn fsck_corrects_counts_and_collects_an_inode_no_name_reaches() {
    let rig = Rig::new("");
    let fs = rig.mkfs();
    let ino = write_file(&fs, ROOT, "f", b"data");
    fs.link(ino, ROOT, b"g").unwrap();
    fs.link(ino, ROOT, b"h").unwrap();
    // Damage as a lost page of an older version could leave it: names replaced by
    // ordinary entries behind the counts' back.
    let plain = |name: &str| {
        let mut e = fs.current_dir(ROOT).unwrap().entries[name.as_bytes()].clone();
        e.link = false;
        e.id = 0x1_0000_0001 + name.len() as u64;
        e.attr = Some(crate::meta::Attr::new(0o644, 0, 0, 0));
        e.file = Some(crate::meta::FileMeta {
            version: 0,
            block_size: 4096,
            blocks: Vec::new(),
            dirty: None,
            inline: None,
        });
        e
    };
    fs.replace_entry(ROOT, plain("h")).unwrap();
    let report = fs.fsck(&|_, _| {}).unwrap();
    assert_eq!(report.repaired.len(), 1, "{report:?}");
    assert_eq!(nlink(&fs, ROOT, "f"), 2);
    let mut g = plain("g");
    g.id += 100;
    fs.replace_entry(ROOT, g).unwrap();
    let mut f = plain("f");
    f.id += 200;
    fs.replace_entry(ROOT, f).unwrap();
    let report = fs.fsck(&|_, _| {}).unwrap();
    assert!(
        report.repaired.iter().any(|r| r.contains("collected")),
        "{report:?}"
    );
    assert!(fs.current_dir(INODES).unwrap().entries.is_empty());
    assert!(fs.fsck(&|_, _| {}).unwrap().clean());
}

#[test]
fn snapshots_and_history_follow_links() {
    let rig = Rig::new("retention = \"1h\"");
    let fs = rig.mkfs();
    let ino = write_file(&fs, ROOT, "f", b"version one");
    fs.link(ino, ROOT, b"g").unwrap();
    fs.snapshot("s").unwrap();
    fs.unlink(ROOT, b"f").unwrap();
    let fh = fs.open_file(ino).unwrap();
    fs.write(ino, 0, b"VERSION TWO").unwrap();
    fs.release(fh).unwrap();
    let snaps = fs.lookup(ROOT, crate::snapview::SNAPSHOTS_NAME).unwrap();
    let s = fs.lookup(snaps.ino, b"s").unwrap();
    let old = fs.lookup(s.ino, b"f").unwrap();
    assert_eq!(old.nlink, 2);
    assert_eq!(read_all(&fs, old.ino), b"version one");
    assert_eq!(read_all(&fs, ino), b"VERSION TWO");
    let versions = fs.versions("/g").unwrap();
    assert!(versions.len() >= 2, "{versions:?}");
}

#[test]
fn a_checkpointed_inode_directory_that_is_missing_is_unavailable_not_empty() {
    let rig = Rig::new("");
    let fs = rig.mkfs();
    let ino = write_file(&fs, ROOT, "f", b"linked");
    fs.link(ino, ROOT, b"g").unwrap();
    fs.flush_all().unwrap(); // unmount: a checkpoint holds the inode directory
    drop(fs);
    let inodes = format!(" dir {:012x}.", INODES);
    assert!(messages_of(&rig, 0, &inodes) > 0, "{inodes}");
    for a in &rig.accounts {
        a.messages
            .lock_or_panic()
            .retain(|_, (n, _)| !n.contains(&inodes) && !n.contains(" log "));
    }
    let fs = rig.mount();
    assert!(matches!(
        fs.lookup(ROOT, b"g"),
        Err(FsError::Unavailable(_))
    ));
    // fsck --rebuild makes it again (empty); a name whose file is gone can be removed, and
    // fsck drops the others.
    fs.rebuild(&|_, _| {}).unwrap();
    fs.unlink(ROOT, b"f").unwrap();
    let report = fs.fsck(&|_, _| {}).unwrap();
    assert_eq!(report.unrecoverable.len(), 1, "{report:?}");
    assert!(matches!(fs.lookup(ROOT, b"g"), Err(FsError::NotFound)));
}
