use std::path::Path;

use super::*;

fn write_and_sync(disk: &SimDisk, name: &str, data: &[u8]) {
    let file = disk.open(Path::new(name), true).unwrap();
    file.write_all_at(data, 0).unwrap();
    file.sync_data().unwrap();
    disk.sync_dir(Path::new("/d")).unwrap();
}

#[test]
fn synced_data_survives_any_crash() {
    let disk = SimDisk::new();
    write_and_sync(&disk, "/d/a", &[7u8; 2000]);
    disk.crash(1, 0.0);
    let file = disk.open(Path::new("/d/a"), false).unwrap();
    let mut buf = vec![0u8; 2000];
    file.read_exact_at(&mut buf, 0).unwrap();
    assert_eq!(buf, vec![7u8; 2000]);
}

#[test]
fn unsynced_write_is_lost_with_probability_zero() {
    let disk = SimDisk::new();
    write_and_sync(&disk, "/d/a", &[1u8; 1024]);
    let file = disk.open(Path::new("/d/a"), false).unwrap();
    file.write_all_at(&[2u8; 1024], 0).unwrap();
    disk.crash(1, 0.0);
    let file = disk.open(Path::new("/d/a"), false).unwrap();
    let mut buf = vec![0u8; 1024];
    file.read_exact_at(&mut buf, 0).unwrap();
    assert_eq!(buf, vec![1u8; 1024]);
}

#[test]
fn a_crash_tears_at_sector_granularity_only() {
    // Over many seeds a 4 KiB overwrite must come back as a mix of whole old and whole new
    // sectors, and both mixes and pure states must occur.
    let mut torn = 0;
    for seed in 0..64 {
        let disk = SimDisk::new();
        write_and_sync(&disk, "/d/a", &[1u8; 4096]);
        let file = disk.open(Path::new("/d/a"), false).unwrap();
        file.write_all_at(&[2u8; 4096], 0).unwrap();
        disk.crash(seed, 0.5);
        let file = disk.open(Path::new("/d/a"), false).unwrap();
        let mut buf = vec![0u8; 4096];
        file.read_exact_at(&mut buf, 0).unwrap();
        let mut kinds = std::collections::BTreeSet::new();
        for sector in buf.chunks(SECTOR_BYTES as usize) {
            assert!(sector.iter().all(|&b| b == sector[0]), "a sector was split");
            kinds.insert(sector[0]);
        }
        if kinds.len() == 2 {
            torn += 1;
        }
    }
    assert!(torn > 0, "no seed tore the write");
}

#[test]
fn unsynced_names_can_vanish_and_old_handles_fail() {
    let disk = SimDisk::new();
    let file = disk.open(Path::new("/d/new"), true).unwrap();
    file.write_all_at(b"x", 0).unwrap();
    file.sync_data().unwrap();
    disk.crash(3, 0.0);
    assert!(!disk.exists(Path::new("/d/new")));
    assert!(file.len().is_err());
}

#[test]
fn fail_after_counts_mutations() {
    let disk = SimDisk::new();
    let file = disk.open(Path::new("/d/a"), true).unwrap();
    disk.fail_after(1);
    file.write_all_at(b"ok", 0).unwrap();
    assert!(file.write_all_at(b"no", 0).is_err());
    assert!(file.sync_data().is_err());
    let mut buf = [0u8; 2];
    file.read_exact_at(&mut buf, 0).unwrap();
}

#[test]
fn real_disk_round_trip_and_allocate() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f");
    let file = RealDisk.open(&path, true).unwrap();
    file.allocate(1 << 20).unwrap();
    assert_eq!(file.len().unwrap(), 1 << 20);
    file.write_all_at(b"hello", 4096).unwrap();
    file.sync_data().unwrap();
    let mut buf = [0u8; 5];
    file.read_exact_at(&mut buf, 4096).unwrap();
    assert_eq!(&buf, b"hello");
    assert!(file.read_exact_at(&mut buf, (1 << 20) - 2).is_err());
    assert_eq!(RealDisk.list(dir.path()).unwrap(), vec!["f".to_string()]);
}

/// `write_zeros` on the real disk: direct I/O for aligned ranges, the page cache for the rest
/// and where direct I/O is not taken (tmpfs, when this machine has one), and never another
/// file that was renamed over the path.
#[test]
fn real_disk_write_zeros_aligned_unaligned_and_renamed_over() {
    let tmp = tempfile::tempdir().unwrap();
    let shm = std::path::Path::new("/dev/shm");
    let shm = shm
        .is_dir()
        .then(|| tempfile::tempdir_in(shm).ok())
        .flatten();
    for dir in std::iter::once(tmp.path()).chain(shm.as_ref().map(|d| d.path())) {
        let path = dir.join("z");
        let file = RealDisk.open(&path, true).unwrap();
        let len = (3 << 20) + 4096;
        file.write_all_at(&vec![0xab; len], 0).unwrap();
        // Dirty pages in the range, too: direct I/O must not leave them to win later.
        file.write_zeros(4096, (2 << 20) + 8192).unwrap();
        file.write_zeros(100, 3000).unwrap();
        file.sync_data().unwrap();
        let mut back = vec![0u8; len];
        file.read_exact_at(&mut back, 0).unwrap();
        let zero =
            |at: usize| (100..3100).contains(&at) || (4096..4096 + (2 << 20) + 8192).contains(&at);
        let wrong = (0..len).find(|&at| (back[at] == 0) != zero(at));
        assert_eq!(wrong, None, "{}", dir.display());

        // Another file renamed over the path is not the one zeroed.
        let other = dir.join("other");
        std::fs::write(&other, vec![0xcd; 8192]).unwrap();
        std::fs::rename(&other, &path).unwrap();
        file.write_zeros(0, 4096).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), vec![0xcd; 8192]);
        let mut head = [1u8; 4096];
        file.read_exact_at(&mut head, 0).unwrap();
        assert_eq!(head, [0u8; 4096]);
    }
}

#[test]
fn findings_print_problems_notes_and_repairs_in_order() {
    let mut findings: Findings = Findings::default();
    assert!(findings.is_clean());
    assert_eq!(findings.to_string(), "");
    findings.repaired.push("r".into());
    findings.notes.push("n".into());
    assert!(findings.is_clean(), "notes and repairs leave a check clean");
    findings.problems.push("p".into());
    assert!(!findings.is_clean());
    assert_eq!(findings.to_string(), "problem: p\nnote: n\nrepaired: r\n");
}
