//! The data path: binary and base64 transfer, partial reads, reads straight after writes.

use std::collections::BTreeMap;
use std::fs;

use test_peers::Dovecot;

use crate::rig::*;

#[test]
fn files_written_with_binary_transfer_read_with_base64_and_back() {
    if !fuse_available() {
        eprintln!("skipped: no /dev/fuse");
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
    let base64_config = fs::read_to_string(&rig.config).unwrap();
    assert!(!base64_config.contains("transfer"), "base64 is the default");
    let binary_config = base64_config.replace(
        "connections = 2\n",
        "connections = 2\ntransfer = \"binary\"\n",
    );
    let cache = rig.dir.path().join("cache");
    fs::write(&rig.config, &binary_config).unwrap();
    rig.ok(&["mkfs"]);
    rig.mount();
    // Several blocks and a partial one, through literal8 APPEND.
    let first = pattern((1 << 20) + 12_345, 11);
    fs::write(rig.mnt.join("first"), &first).unwrap();
    rig.umount();
    // From the servers alone in the other mode: BODY.PEEK[] and base64 here.
    fs::remove_dir_all(&cache).unwrap();
    fs::write(&rig.config, &base64_config).unwrap();
    rig.mount();
    assert!(fs::read(rig.mnt.join("first")).unwrap() == first);
    let second = pattern(777_777, 12);
    fs::write(rig.mnt.join("second"), &second).unwrap();
    rig.umount();
    // And back: BINARY.PEEK[1] of what was written in base64.
    fs::remove_dir_all(&cache).unwrap();
    fs::write(&rig.config, &binary_config).unwrap();
    rig.mount();
    assert!(fs::read(rig.mnt.join("first")).unwrap() == first);
    assert!(fs::read(rig.mnt.join("second")).unwrap() == second);
    rig.umount();
    let fsck = rig.ok(&["fsck"]);
    assert!(fsck.contains("fsck: clean"), "{fsck}");
}

#[test]
fn random_reads_fetch_only_their_segments_in_both_transfer_modes() {
    use std::os::unix::fs::FileExt;
    if !fuse_available() {
        eprintln!("skipped: no /dev/fuse");
        return;
    }
    let server = Dovecot::start(1).unwrap();
    let rig = Rig::new(
        &[vec![Account {
            server: &server,
            user: 1,
        }]],
        "block_size = 1048576",
    );
    let base64_config = fs::read_to_string(&rig.config).unwrap();
    let binary_config = base64_config.replace(
        "connections = 2\n",
        "connections = 2\ntransfer = \"binary\"\n",
    );
    let cache = rig.dir.path().join("cache");
    rig.ok(&["mkfs"]);
    rig.mount();
    let data = pattern(4 << 20, 21);
    fs::write(rig.mnt.join("big"), &data).unwrap();
    rig.umount();
    // One in each block, far apart, so each is random access; one crosses a 64 KiB
    // segment boundary.
    let offsets = [3_000_000u64, 10, (1 << 20) + 65_536 - 50, 3_900_000];
    for config in [&base64_config, &binary_config] {
        fs::remove_dir_all(&cache).unwrap();
        fs::write(&rig.config, config).unwrap();
        rig.mount();
        let file = fs::File::open(rig.mnt.join("big")).unwrap();
        for &o in &offsets {
            let mut got = vec![0u8; 4096];
            file.read_exact_at(&mut got, o).unwrap();
            assert!(got == data[o as usize..o as usize + 4096], "at {o}");
        }
        drop(file);
        // The kernel may merge or split requests; most reads must have been partial, and
        // far less than a block per read fetched. (The stats file is written every second.)
        let number = |s: &BTreeMap<String, String>, k: &str| -> u64 {
            s.get(k).and_then(|v| v.parse().ok()).unwrap_or(0)
        };
        rig.wait_stats("partial fetches", |s| number(s, "partial_fetches") >= 3);
        let stats = rig.stats();
        assert!(number(&stats, "bytes_fetched") < 1 << 20, "{stats:?}");
        assert_eq!(stats["blocks_fetched"], "0", "{stats:?}");
        assert_eq!(stats["integrity_errors"], "0");
        rig.umount();
    }
}

/// Reads straight after a write go to the servers (a 1 MiB memory cache, no page cache)
/// over whichever pooled session is free, and a session that has not yet seen the
/// messages another one just appended must still find them (a server reports new messages
/// only when a command lets it: RFC 3501 5.2, 6.1.2).
#[test]
fn a_file_reads_back_straight_after_it_is_written_from_any_session() {
    use std::os::unix::fs::FileExt;
    if !fuse_available() {
        eprintln!("skipped: no /dev/fuse");
        return;
    }
    let server = Dovecot::start(2).unwrap();
    let rig = Rig::new(&one_per_group(&server, 2), "block_size = 1048576");
    let config = fs::read_to_string(&rig.config)
        .unwrap()
        .replace("[cache]\n", "[cache]\nmemory_bytes = 1048576\n");
    fs::write(&rig.config, config).unwrap();
    rig.ok(&["mkfs"]);
    rig.mount();
    for round in 0..3u64 {
        let name = rig.mnt.join(format!("fresh{round}"));
        let data = pattern(32 << 20, round);
        // In small writes, as fio lays out a file: many uploads over every session.
        {
            use std::io::Write;
            let mut f = fs::File::create(&name).unwrap();
            for piece in data.chunks(64 << 10) {
                f.write_all(piece).unwrap();
            }
        }
        let file = fs::File::open(&name).unwrap();
        for i in 0..64u64 {
            let o = (i * 7_919_993 + round * 1_234_567) % (data.len() as u64 - 4096);
            let mut got = vec![0u8; 4096];
            file.read_exact_at(&mut got, o)
                .unwrap_or_else(|e| panic!("round {round}, offset {o}: {e}"));
            assert!(
                got == data[o as usize..o as usize + 4096],
                "round {round} at {o}"
            );
        }
    }
    rig.umount();
}
