//! Reads: partial fetches of random reads, scans and the disk cache.

use super::*;

#[test]
fn random_small_reads_fetch_only_their_segments_and_tampering_still_shows() {
    let rig = Rig::new("block_size = 1048576");
    let fs = rig.mkfs();
    let data = pattern(3 << 20, 7);
    let ino = write_file(&fs, ROOT, "big", &data);
    drop(fs);
    std::fs::remove_dir_all(rig.config.cache.dir.clone()).unwrap();
    let fs = rig.mount();
    let st = fs.lookup(ROOT, b"big").unwrap();
    assert_eq!(st.ino, ino);
    // Scattered 4 KiB reads, one crossing a segment boundary; none is sequential.
    // Scattered 4 KiB reads, one in each block (the one in block 1 crosses a segment
    // boundary); none is sequential.
    let offsets = [2_500_000u64, 5, (1 << 20) + 65_536 - 100];
    for &o in &offsets {
        let got = fs.read(st.ino, o, 4096).unwrap();
        assert!(got == data[o as usize..o as usize + 4096], "at {o}");
    }
    assert_eq!(fs.stats.partial_fetches.load(Ordering::Relaxed), 3);
    assert_eq!(fs.stats.blocks_fetched.load(Ordering::Relaxed), 0);
    // Each fetched one or two 64 KiB segments, not a 1 MiB block.
    let fetched = fs.stats.bytes_fetched.load(Ordering::Relaxed);
    assert!(fetched <= 4 * 65_536, "{fetched} bytes fetched");
    // A block read in part before is loaded whole the second time, and then cached.
    let o = 2_900_000usize;
    assert!(fs.read(st.ino, o as u64, 4096).unwrap() == data[o..o + 4096]);
    assert_eq!(fs.stats.partial_fetches.load(Ordering::Relaxed), 3);
    assert_eq!(fs.stats.blocks_fetched.load(Ordering::Relaxed), 1);
    assert_eq!(fs.stats.integrity_errors.load(Ordering::Relaxed), 0);
    // A read from the start goes on sequentially, whole blocks as before.
    assert!(read_all(&fs, st.ino) == data);
    drop(fs);

    // Flip one byte in the middle of blocks 1 and 2 in every copy: a partial read of
    // another segment still opens; a read of that segment fails, in part and whole.
    for a in &rig.accounts {
        let mut m = a.messages.lock_or_panic();
        for (n, body) in m.values_mut() {
            if n.contains(" blk ") && (n.contains(".1 v") || n.contains(".2 v")) {
                let at = body.len() / 2;
                body[at] ^= 1;
            }
        }
    }
    std::fs::remove_dir_all(rig.config.cache.dir.clone()).unwrap();
    let fs = rig.mount();
    let st = fs.lookup(ROOT, b"big").unwrap();
    let early = (1 << 20) + 70_000;
    assert!(fs.read(st.ino, early, 4096).unwrap() == data[early as usize..early as usize + 4096]);
    assert_eq!(fs.stats.partial_fetches.load(Ordering::Relaxed), 1);
    assert!(fs.read(st.ino, 5, 4096).unwrap() == data[5..4101]);
    let middle = (1 << 20) + (1 << 19) - 1000;
    let r = fs.read(st.ino, middle, 4096).map(|d| d.len());
    assert!(matches!(r, Err(FsError::Integrity(_))), "{r:?}");
    assert!(fs.stats.integrity_errors.load(Ordering::Relaxed) >= 1);
    // The tampered segment of block 2, read in part first: rejected, then whole: rejected.
    assert!(fs.read(st.ino, 5, 4096).is_ok());
    let r = fs.read(st.ino, 2 * (1 << 20) + (1 << 19) - 1000, 4096);
    assert!(
        matches!(r, Err(FsError::Integrity(_))),
        "{:?}",
        r.map(|d| d.len())
    );
    // Two partial reads opened (block 1 early, block 0); the tampered one did not count.
    assert_eq!(fs.stats.partial_fetches.load(Ordering::Relaxed), 2);
}

#[test]
fn a_long_sequential_read_is_a_scan_whose_blocks_reach_the_disk_cache_when_read_again() {
    // 4 KiB blocks, four read ahead; a stream is a scan past 16 KiB; memory holds 16 blocks.
    const BLOCKS: u64 = 64;
    let rig = Rig::with_cache(
        "readahead_blocks = 4",
        "memory_bytes = 65536\nscan_bytes = 16384",
    );
    let fs = rig.mkfs();
    let data = pattern(BLOCKS as usize * 4096, 3);
    write_file(&fs, ROOT, "stream", &data);
    drop(fs);
    std::fs::remove_dir_all(rig.config.cache.dir.clone()).unwrap();
    // A reader slower than the fetchers: each block it asks for was read ahead, except
    // the first.
    let pass = |fs: &Fs| {
        let ino = fs.lookup(ROOT, b"stream").unwrap().ino;
        for i in 0..BLOCKS {
            let got = fs.read(ino, i * 4096, 4096).unwrap();
            let at = i as usize * 4096;
            assert!(got == data[at..at + 4096], "block {i}");
            fs.settle_read_ahead();
        }
        fs.settle_disk_cache();
    };
    let fs = rig.mount();
    let background = fs.spawn_background();
    pass(&fs);
    // Block 0 was read, blocks 1 to 3 read ahead within the first 16 KiB: on disk. The
    // rest was read ahead as a scan: in memory only.
    assert_eq!(fs.stats.blocks_fetched.load(Ordering::Relaxed), BLOCKS);
    assert_eq!(
        fs.stats.scan_blocks_uncached.load(Ordering::Relaxed),
        BLOCKS - 4
    );
    assert_eq!(disk_cache_files(&rig) as u64, 4);
    // A second pass fetches again what memory no longer holds: the second fetch admits.
    pass(&fs);
    assert_eq!(
        fs.stats.blocks_fetched.load(Ordering::Relaxed),
        2 * BLOCKS - 4
    );
    assert_eq!(disk_cache_files(&rig) as u64, BLOCKS);
    fs.shutdown();
    background.join().unwrap();
    drop(fs);
    // A remount reads it all from the disk cache.
    let fs = rig.mount();
    pass(&fs);
    assert_eq!(fs.stats.blocks_fetched.load(Ordering::Relaxed), 0);
}
