//! Small files inline in their entries, and each directory's inline budget.

use super::*;

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
        let mut m = a.messages.lock_or_panic();
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
