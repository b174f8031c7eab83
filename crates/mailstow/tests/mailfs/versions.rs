//! Versions, snapshots and gc through the mount, and deduplicated copies.

use std::fs;

use test_peers::Dovecot;

use crate::rig::*;

#[test]
fn versions_restore_snapshots_and_gc_through_the_mount() {
    if !fuse_available() {
        return;
    }
    let server = Dovecot::start(1).unwrap();
    let rig = Rig::new(
        &[vec![Account {
            server: &server,
            user: 1,
        }]],
        "",
    );
    rig.ok(&["mkfs"]);
    rig.mount();
    let v1 = pattern(400_000, 1);
    fs::write(rig.mnt.join("doc"), &v1).unwrap();
    rig.umount();
    rig.ok(&["snapshot", "first"]);
    rig.mount();
    fs::write(rig.mnt.join("doc"), pattern(300_000, 2)).unwrap();
    // The snapshot shows the old tree, read-only.
    assert_eq!(fs::read(rig.mnt.join(".snapshots/first/doc")).unwrap(), v1);
    assert_eq!(
        fs::write(rig.mnt.join(".snapshots/first/doc"), b"x")
            .unwrap_err()
            .raw_os_error(),
        Some(libc::EROFS)
    );
    // A big file to delete, for gc.
    fs::write(rig.mnt.join("big"), pattern(6 << 20, 3)).unwrap();
    rig.umount();
    let versions = rig.ok(&["versions", "/doc"]);
    let listed: Vec<&str> = versions
        .lines()
        .filter(|l| l.starts_with("version="))
        .collect();
    assert!(listed.len() >= 2, "{versions}");
    let v1_number = listed
        .iter()
        .find(|l| l.contains("size=400000"))
        .and_then(|l| l.strip_prefix("version="))
        .and_then(|l| l.split(' ').next())
        .unwrap()
        .to_string();
    rig.ok(&["restore", "/doc", "--version", &v1_number]);
    rig.mount();
    assert_eq!(
        fs::read(rig.mnt.join("doc")).unwrap(),
        v1,
        "restored byte for byte"
    );
    fs::remove_file(rig.mnt.join("big")).unwrap();
    rig.umount();
    let (rt, mut c) = imap(&server, 1);
    let used_before = rt.block_on(c.quota("mailfs")).unwrap().unwrap().0;
    let gc = rig.ok(&["gc"]);
    assert!(gc.contains("gc: removed"), "{gc}");
    let used_after = rt.block_on(c.quota("mailfs")).unwrap().unwrap().0;
    assert!(
        used_before - used_after >= 6 << 20,
        "space returned: {used_before} -> {used_after}"
    );
    // Everything current and pinned still reads.
    rig.mount();
    assert_eq!(fs::read(rig.mnt.join("doc")).unwrap(), v1);
    assert_eq!(fs::read(rig.mnt.join(".snapshots/first/doc")).unwrap(), v1);
    rig.umount();
    let fsck = rig.ok(&["fsck"]);
    assert!(fsck.contains("fsck: clean"), "{fsck}");
}

#[test]
fn dedup_stores_a_copy_as_manifests_and_reads_it_back() {
    if !fuse_available() {
        eprintln!("skipped: no /dev/fuse");
        return;
    }
    let server = Dovecot::start(2).unwrap();
    let rig = Rig::new(
        &one_per_group(&server, 2),
        "dedup = true\norphan_grace = \"1h\"",
    );
    rig.ok(&["mkfs"]);
    rig.mount();
    let data = pattern(6 << 20, 5);
    fs::write(rig.mnt.join("one"), &data).unwrap();
    fs::copy(rig.mnt.join("one"), rig.mnt.join("two")).unwrap();
    let want = data.len() as u64 * 9 / 10;
    rig.wait_stats("the copy deduplicated", |s| {
        s.get("bytes_deduplicated")
            .and_then(|v| v.parse::<u64>().ok())
            .is_some_and(|b| b >= want)
    });
    rig.umount();
    // From the servers alone: manifests, then chunks.
    fs::remove_dir_all(rig.dir.path().join("cache")).unwrap();
    rig.mount();
    assert!(fs::read(rig.mnt.join("one")).unwrap() == data);
    assert!(fs::read(rig.mnt.join("two")).unwrap() == data);
    rig.umount();
    let fsck = rig.ok(&["fsck"]);
    assert!(fsck.contains("fsck: clean"), "{fsck}");
    assert!(!fsck.contains("chunks=0\n"), "{fsck}");
}
