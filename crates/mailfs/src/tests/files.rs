//! Files and directories: striping, offsets and holes, renames, limits, ciphers.

use super::*;

#[test]
fn files_survive_a_remount_and_are_striped_over_both_groups() {
    let rig = Rig::new("");
    let fs = rig.mkfs();
    let data = pattern(40_000, 1);
    let ino = write_file(&fs, ROOT, "big", &data);
    assert_eq!(read_all(&fs, ino), data);
    let dir = fs.mkdir(ROOT, b"sub", 0o755, 0, 0).unwrap();
    write_file(&fs, dir.ino, "small", b"hello");
    drop(fs);
    let fs = rig.mount();
    let st = fs.lookup(ROOT, b"big").unwrap();
    assert_eq!(read_all(&fs, st.ino), data);
    let sub = fs.lookup(ROOT, b"sub").unwrap();
    let small = fs.lookup(sub.ino, b"small").unwrap();
    assert_eq!(read_all(&fs, small.ino), b"hello");
    // Ten blocks over two groups: both groups (and both members of each) hold blocks.
    for a in &rig.accounts {
        let blocks = a
            .messages
            .lock_or_panic()
            .values()
            .filter(|(n, _)| n.contains(" blk "))
            .count();
        assert!(blocks >= 3, "{} holds {blocks} blocks", a.name);
    }
    // Encrypted: the plain bytes are nowhere in the accounts.
    for a in &rig.accounts {
        for (_, body) in a.messages.lock_or_panic().values() {
            assert!(!body.windows(5).any(|w| w == b"hello"));
        }
    }
}

#[test]
fn writes_at_offsets_truncate_and_holes() {
    let rig = Rig::new("");
    let fs = rig.mkfs();
    let (st, fh) = fs.create(ROOT, b"f", 0o600, 0, 0).unwrap();
    let mut model = vec![0u8; 0];
    let apply = |model: &mut Vec<u8>, off: usize, data: &[u8]| {
        if model.len() < off + data.len() {
            model.resize(off + data.len(), 0);
        }
        model[off..off + data.len()].copy_from_slice(data);
    };
    for (off, len, seed) in [
        (0, 5000, 1),
        (10_000, 3000, 2),
        (4090, 20, 3),
        (30_000, 1, 4),
    ] {
        let d = pattern(len, seed);
        fs.write(st.ino, off as u64, &d).unwrap();
        apply(&mut model, off, &d);
    }
    fs.flush(st.ino).unwrap();
    assert_eq!(read_all(&fs, st.ino), model);
    fs.setattr(
        st.ino,
        SetAttr {
            size: Some(4093),
            ..Default::default()
        },
    )
    .unwrap();
    model.truncate(4093);
    assert_eq!(read_all(&fs, st.ino), model);
    // Growing again reads zeros past the old end, not stale bytes.
    fs.setattr(
        st.ino,
        SetAttr {
            size: Some(9000),
            ..Default::default()
        },
    )
    .unwrap();
    model.resize(9000, 0);
    assert_eq!(read_all(&fs, st.ino), model);
    fs.release(fh).unwrap();
    let fs = rig.mount();
    let st = fs.lookup(ROOT, b"f").unwrap();
    assert_eq!(read_all(&fs, st.ino), model);
    assert_eq!(st.attr.mode, 0o600);
}

#[test]
fn directory_operations_and_renames_across_directories() {
    let rig = Rig::new("");
    let fs = rig.mkfs();
    let a = fs.mkdir(ROOT, b"a", 0o755, 0, 0).unwrap();
    let b = fs.mkdir(ROOT, b"b", 0o755, 0, 0).unwrap();
    let f = write_file(&fs, a.ino, "f", b"content");
    fs.rename(a.ino, b"f", b.ino, b"g", false).unwrap();
    assert_eq!(fs.lookup(a.ino, b"f"), Err(FsError::NotFound));
    assert_eq!(fs.lookup(b.ino, b"g").unwrap().ino, f);
    fs.rename(ROOT, b"a", b.ino, b"a2", false).unwrap();
    assert_eq!(fs.parent_of_dir(a.ino).unwrap(), b.ino);
    assert!(matches!(
        fs.rename(ROOT, b"b", a.ino, b"loop", false),
        Err(FsError::Invalid(_))
    ));
    assert_eq!(fs.rmdir(ROOT, b"b"), Err(FsError::NotEmpty));
    fs.symlink(ROOT, b"l", b"b/g", 0, 0).unwrap();
    let l = fs.lookup(ROOT, b"l").unwrap();
    assert_eq!(l.kind, Kind::Symlink);
    assert_eq!(fs.readlink(l.ino).unwrap(), b"b/g");
    fs.setattr(
        f,
        SetAttr {
            mode: Some(0o640),
            uid: Some(7),
            mtime: Some(1_000_000_000),
            ..Default::default()
        },
    )
    .unwrap();
    let fs = rig.mount();
    let b = fs.lookup(ROOT, b"b").unwrap();
    let g = fs.lookup(b.ino, b"g").unwrap();
    assert_eq!(
        (g.attr.mode, g.attr.uid, g.attr.mtime),
        (0o640, 7, 1_000_000_000)
    );
    assert_eq!(read_all(&fs, g.ino), b"content");
    let names: Vec<Vec<u8>> = fs
        .readdir(b.ino)
        .unwrap()
        .into_iter()
        .map(|e| e.2)
        .collect();
    assert_eq!(names, vec![b"a2".to_vec(), b"g".to_vec()]);
    fs.unlink(b.ino, b"g").unwrap();
    let a2 = fs.lookup(b.ino, b"a2").unwrap();
    fs.rmdir(b.ino, b"a2").unwrap();
    assert_eq!(fs.getattr(a2.ino), Err(FsError::NotFound));
    assert_eq!(fs.mkdir(ROOT, b"l", 0o755, 0, 0), Err(FsError::Exists));
    assert_eq!(
        fs.create(ROOT, &[b'x'; 256], 0o644, 0, 0).map(|_| ()),
        Err(FsError::NameTooLong)
    );
}

#[test]
fn large_writes_spill_early_and_still_commit_atomically() {
    let rig = Rig::new("dirty_bytes_max = 16384");
    let fs = rig.mkfs();
    let data = pattern(100_000, 7);
    let (st, fh) = fs.create(ROOT, b"big", 0o644, 0, 0).unwrap();
    for (i, chunk) in data.chunks(3000).enumerate() {
        fs.write(st.ino, (i * 3000) as u64, chunk).unwrap();
    }
    // Uploads started before the file was closed (they run in the background).
    let started = std::time::Instant::now();
    while fs.stats.blocks_written.load(Ordering::Relaxed) == 0 {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(10),
            "nothing uploaded before close"
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    fs.release(fh).unwrap();
    let fs = rig.mount();
    let st = fs.lookup(ROOT, b"big").unwrap();
    assert_eq!(read_all(&fs, st.ino), data);
}

#[test]
fn limits_on_names_and_symlink_targets() {
    let rig = Rig::new("");
    let fs = rig.mkfs();
    assert_eq!(
        fs.symlink(ROOT, b"l", &[b'a'; 4097], 0, 0),
        Err(FsError::NameTooLong)
    );
    assert!(fs.symlink(ROOT, b"l", &[b'a'; 4096], 0, 0).is_ok());
    for bad in [&b""[..], b".", b"..", b"a/b"] {
        assert!(matches!(
            fs.create(ROOT, bad, 0o644, 0, 0).map(|_| ()),
            Err(FsError::Invalid(_))
        ));
    }
    assert!(fs.create(ROOT, &[b'n'; 255], 0o644, 0, 0).is_ok());
}

#[test]
fn both_ciphers_round_trip_and_the_cipher_is_fixed_at_mkfs() {
    for (made_with, mounted_with) in [
        ("aes-256-gcm", "xchacha20poly1305"),
        ("xchacha20poly1305", "aes-256-gcm"),
    ] {
        let mut rig = Rig::new("");
        rig.config.encryption.cipher = made_with.into();
        let fs = rig.mkfs();
        let data = noise(4096 * 5 + 3, 9);
        write_file(&fs, ROOT, "f", &data);
        drop(fs);
        std::fs::remove_dir_all(rig.config.cache.dir.clone()).unwrap();
        // A mount configured with another cipher still reads it: the superblock says which.
        rig.config.encryption.cipher = mounted_with.into();
        let fs = rig.mount();
        let st = fs.lookup(ROOT, b"f").unwrap();
        assert_eq!(read_all(&fs, st.ino), data, "{made_with}");
        // No block travels in the clear.
        let probe = &data[..64];
        for a in &rig.accounts {
            for (_, body) in a.messages.lock_or_panic().values() {
                assert!(!body.windows(64).any(|w| w == probe), "{made_with}");
            }
        }
    }
}

#[test]
fn listing_resumes_after_a_name_with_the_snapshots_entry_in_its_place() {
    let rig = Rig::new("metadata_batch_ms = 10000");
    let fs = rig.mkfs();
    for n in ["a", "b", ".c", "z"] {
        fs.mkdir(ROOT, n.as_bytes(), 0o755, 0, 0).unwrap();
    }
    let names = |after: Option<&[u8]>, max| -> Vec<String> {
        fs.readdir_after(ROOT, after, max)
            .unwrap()
            .into_iter()
            .map(|e| String::from_utf8(e.2).unwrap())
            .collect()
    };
    assert_eq!(names(None, 10), [".c", "a", "b", "z"]);
    assert_eq!(names(Some(b".c"), 2), ["a", "b"]);
    fs.snapshot("s").unwrap();
    // `.snapshots` sorts between `.c` and `a`, in whatever page holds that place.
    assert_eq!(names(None, 2), [".c", ".snapshots"]);
    assert_eq!(names(Some(b".snapshots"), 10), ["a", "b", "z"]);
    assert_eq!(names(Some(b"b"), 10), ["z"]);
    assert!(names(Some(b"z"), 10).is_empty());
}

/// Linux's rules for set-ID bits (`setattr_should_drop_suidgid`, chown(2)): a caller
/// without CAP_FSETID loses set-user-ID, and set-group-ID when the group may execute or
/// the caller is not of the file's group; a chown by root, even to the same owner, takes
/// set-user-ID off and set-group-ID when the group may execute. Directories keep theirs.
#[test]
fn set_id_bits_come_off_as_linux_takes_them_off() {
    let rig = Rig::new("");
    let fs = rig.mkfs();
    let mode = |ino: u64| fs.getattr(ino).unwrap().attr.mode & 0o7777;
    // (mode, caller of the file's group, mode after, a bit came off)
    let writes = [
        (0o6777, false, 0o777, true),
        (0o6777, true, 0o777, true),
        (0o2767, false, 0o767, true),
        (0o2767, true, 0o2767, false),
        (0o6767, true, 0o2767, true),
        (0o4700, true, 0o700, true),
        (0o777, false, 0o777, false),
    ];
    for (i, (before, in_group, after, came_off)) in writes.into_iter().enumerate() {
        let ino = write_file(&fs, ROOT, &format!("w{i}"), b"x");
        fs.setattr(
            ino,
            SetAttr {
                mode: Some(before),
                ..SetAttr::default()
            },
        )
        .unwrap();
        assert_eq!(
            fs.take_set_id_off(ino, |_| in_group),
            Ok(came_off),
            "{before:o}"
        );
        assert_eq!(mode(ino), after, "{before:o}, in group {in_group}");
    }
    let dir = fs.mkdir(ROOT, b"d", 0o2775, 0, 0).unwrap();
    assert_eq!(fs.take_set_id_off(dir.ino, |_| false), Ok(false));
    assert_eq!(mode(dir.ino), 0o2775);
    // A chown by root to the owner the file has.
    for (i, (before, after)) in [(0o6755, 0o755), (0o2755, 0o755), (0o2745, 0o2745)]
        .into_iter()
        .enumerate()
    {
        let ino = write_file(&fs, ROOT, &format!("c{i}"), b"x");
        fs.setattr(
            ino,
            SetAttr {
                mode: Some(before),
                ..SetAttr::default()
            },
        )
        .unwrap();
        let same_owner = SetAttr {
            uid: Some(0),
            gid: Some(0),
            ..SetAttr::default()
        };
        fs.setattr(ino, same_owner).unwrap();
        assert_eq!(mode(ino), after, "{before:o}");
    }
}

/// The kernel's writeback cache sends a file's writes after it was closed, so a writer can
/// outlive every handle. A file replaced by a rename (git's `index.lock` onto `index`) must
/// take its writer with it: an fsync of the root (`sync -f`) committed the writer of a
/// file nothing named and failed with ENOENT.
#[test]
fn a_file_replaced_by_rename_leaves_no_writer_behind_for_sync_all() {
    let rig = Rig::new("");
    let fs = rig.mkfs();
    let old = write_file(&fs, ROOT, "index", b"old");
    // Written back after its last release: a writer with no handle.
    fs.write(old, 0, &pattern(10_000, 2)).unwrap();
    let new = write_file(&fs, ROOT, "index.lock", b"new");
    fs.rename(ROOT, b"index.lock", ROOT, b"index", false)
        .unwrap();
    fs.sync_all().unwrap();
    assert_eq!(fs.lookup(ROOT, b"index").unwrap().ino, new);
    assert_eq!(read_all(&fs, new), b"new");
    // The same for a hard-linked file's last name, and for unlink.
    let doomed = write_file(&fs, ROOT, "doomed", b"x");
    fs.write(doomed, 0, &pattern(10_000, 3)).unwrap();
    fs.unlink(ROOT, b"doomed").unwrap();
    fs.sync_all().unwrap();
    let fs = rig.mount();
    assert_eq!(
        read_all(&fs, fs.lookup(ROOT, b"index").unwrap().ino),
        b"new"
    );
}
