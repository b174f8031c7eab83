//! Versions, restore, snapshots, rebuild from blocks, dedup and gc (docs/mailfs.md 8).

use super::*;

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
        .map(|a| a.messages.lock_or_panic().len())
        .sum();
    // Delete another file: gc (retention 0) returns its blocks and old directories.
    write_file(&fs, ROOT, "junk", &pattern(20_000, 5));
    fs.unlink(ROOT, b"junk").unwrap();
    let report = fs.gc(&|_, _| {}).unwrap();
    assert!(report.blocks > 0 && report.directories > 0, "{report:?}");
    let after: usize = rig
        .accounts
        .iter()
        .map(|a| a.messages.lock_or_panic().len())
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
            .lock_or_panic()
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
        let m = acct.messages.lock_or_panic();
        for (uid, (n, body)) in m.iter() {
            if crate::message_name::MessageName::parse(n)
                .is_some_and(|k| k.kind == mailfs_format::Kind::Chunk)
            {
                bodies.push((*uid, body.clone()));
            }
        }
    }
    for acct in &rig.accounts {
        let mut m = acct.messages.lock_or_panic();
        let uids: Vec<u32> = m.keys().copied().collect();
        for uid in uids {
            let (n, body) = m.get_mut(&uid).expect("listed");
            if crate::message_name::MessageName::parse(n)
                .is_some_and(|k| k.kind == mailfs_format::Kind::Chunk)
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
