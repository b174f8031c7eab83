//! A member that hangs (alive but silent, the way providers fail more often than by
//! refusing connections) costs the mount one `member_deadline_ms`, not a timeout per
//! operation (issue 41): SIGSTOP of one private Dovecot that holds a member of each group.

use std::collections::BTreeMap;
use std::fs;
use std::io::Write;
use std::time::{Duration, Instant};

use test_peers::Dovecot;

use crate::rig::*;

/// The default `member_deadline_ms` (the rig's is longer).
const DEADLINE: Duration = Duration::from_secs(2);
/// What a stalled operation may take beyond the deadline and the same work on a healthy
/// group: the retry on the other member, a loaded test machine.
const SLACK: Duration = Duration::from_secs(3);
/// A multi-block write: 128 blocks of the rig's 128 KiB, more than the sessions of a
/// member, so most of its commands queue behind the silent ones.
const BIG: usize = 16 << 20;

#[test]
fn a_hung_member_costs_one_deadline_with_strong_replication() {
    a_hung_member_costs_one_deadline("strong");
}

#[test]
fn a_hung_member_costs_one_deadline_with_fast_replication() {
    a_hung_member_costs_one_deadline("fast");
}

fn write_synced(path: &std::path::Path, data: &[u8]) -> Duration {
    let started = Instant::now();
    let mut f = fs::File::create(path).unwrap();
    f.write_all(data).unwrap();
    f.sync_all().unwrap();
    started.elapsed()
}

fn mkdir_synced(rig: &Rig, name: &str) -> Duration {
    let path = rig.mnt.join(name);
    let started = Instant::now();
    let made = fs::create_dir(&path)
        .and_then(|()| fs::File::open(&path)?.sync_all())
        .and_then(|()| fs::File::open(&rig.mnt)?.sync_all());
    if let Err(e) = made {
        panic!("mkdir and fsync of {name}: {e}\nlog: {}", rig.log());
    }
    started.elapsed()
}

/// Accounts 1 and 3 (server b's) down, 0 and 2 up.
fn b_down(s: &BTreeMap<String, String>) -> bool {
    s["accounts"] == "0=up,1=down,2=up,3=down"
}

fn all_up_and_paid(s: &BTreeMap<String, String>) -> bool {
    s["pending_ops"] == "0" && !s["accounts"].contains("down")
}

fn a_hung_member_costs_one_deadline(strategy: &str) {
    if !fuse_available() {
        return;
    }
    let a = Dovecot::start(2).unwrap();
    let b = Dovecot::start(2).unwrap();
    // The timeout the issue saw (10 s a read): the deadline, not it, must bound a stall.
    let rig = Rig::new(
        &two_by_two(&a, &b),
        &format!("strategy = \"{strategy}\"\ntimeout_ms = 10000\nmember_deadline_ms = 2000"),
    );
    rig.ok(&["mkfs"]);
    rig.mount();
    let mut files = BTreeMap::new();
    for i in 0..2u64 {
        let data = pattern(1_000_000, i);
        fs::write(rig.mnt.join(format!("before{i}")), &data).unwrap();
        files.insert(format!("before{i}"), data);
    }
    // The same work on a healthy group, for the bound below.
    let data = pattern(BIG, 10);
    let healthy = write_synced(&rig.mnt.join("healthy"), &data);
    files.insert("healthy".to_string(), data);

    // 1. A large write is the first to meet the silent member: its commands queued for
    // that member's sessions fail with the first that misses the deadline.
    b.pause();
    let data = pattern(BIG, 11);
    let took = write_synced(&rig.mnt.join("during-big"), &data);
    files.insert("during-big".to_string(), data);
    eprintln!("{strategy}: {BIG} bytes and fsync: {healthy:?} healthy, {took:?} with b hung");
    assert!(
        took < healthy + DEADLINE + SLACK,
        "{strategy}: a {BIG}-byte write and fsync took {took:?} with a member hung ({healthy:?} healthy)\nlog: {}",
        rig.log()
    );
    if strategy == "strong" {
        // It waited for the member, so the member is down, and `fs stats` says so at once.
        let s = rig.stats();
        assert!(b_down(&s), "stats right after the stall: {s:?}");
    } else {
        // Fast waited for one member only (perhaps a); the keepalive finds b (every 5 s).
        let started = Instant::now();
        rig.wait_stats("b marked down", b_down);
        assert!(
            started.elapsed() < Duration::from_secs(5) + DEADLINE + SLACK,
            "b was marked down after {:?}",
            started.elapsed()
        );
    }
    // With b down, work goes on at the speed of a alone.
    let took = mkdir_synced(&rig, "dir-during");
    assert!(
        took < SLACK,
        "{strategy}: mkdir and fsync with b down took {took:?}"
    );
    for (name, data) in &files {
        assert_eq!(&fs::read(rig.mnt.join(name)).unwrap(), data, "{name}");
    }
    // Back: b gets what it is owed and is marked up again.
    b.resume();
    let started = Instant::now();
    rig.wait_stats("catch-up after the first stall", all_up_and_paid);
    eprintln!("{strategy}: caught up in {:?}", started.elapsed());

    // 2. A mkdir and fsync is the first to meet the silent member.
    b.pause();
    let took = mkdir_synced(&rig, "dir-stalled");
    eprintln!("{strategy}: mkdir and fsync with b hung: {took:?}");
    assert!(
        took < DEADLINE + SLACK,
        "{strategy}: mkdir and fsync took {took:?} with a member hung\nlog: {}",
        rig.log()
    );
    let data = pattern(300_000, 12);
    fs::write(rig.mnt.join("dir-stalled/small"), &data).unwrap();
    files.insert("dir-stalled/small".to_string(), data);
    if strategy == "strong" {
        let s = rig.stats();
        assert!(b_down(&s), "stats right after the stall: {s:?}");
    }
    b.resume();
    rig.wait_stats("catch-up after the second stall", all_up_and_paid);
    rig.umount();

    // b alone holds everything, including what was written while it hung.
    drop(a);
    fs::remove_dir_all(rig.dir.path().join("cache")).unwrap();
    rig.mount();
    for (name, data) in &files {
        assert_eq!(&fs::read(rig.mnt.join(name)).unwrap(), data, "{name}");
    }
    assert!(rig.mnt.join("dir-during").is_dir());
    rig.umount();
}

/// A member deadline no read may wait out in the hedging test: a read of a block whose
/// preferred member hangs can finish within `READ_BOUND` only through the hedge.
const LONG_DEADLINE_MS: u64 = 10_000;
/// A cold read of `HEDGED_FILE` bytes (16 blocks) with the preferred members hung.
const READ_BOUND: Duration = Duration::from_secs(3);
const HEDGED_FILE: usize = 2 << 20;

#[test]
fn a_read_from_a_hung_member_is_hedged_to_the_other() {
    if !fuse_available() {
        return;
    }
    let took = read_cold_with_b_hung(50);
    assert!(took < READ_BOUND, "hedged: the cold read took {took:?}");
    // Without hedging the same read waits for the member deadline: the bound above holds
    // only through the hedge.
    let took = read_cold_with_b_hung(0);
    assert!(
        took >= READ_BOUND,
        "not hedged: the cold read took {took:?}"
    );
}

fn number(s: &BTreeMap<String, String>, key: &str) -> u64 {
    s.get(key).and_then(|v| v.parse().ok()).unwrap_or(0)
}

/// Writes files on a healthy pair of servers, remounts with the disk cache emptied, makes
/// the members on server b the preferred ones, hangs b, and reads a multi-block file back.
/// Returns how long that read took; checks that a write with `write_quorum = 1` while b
/// hangs does not wait for b.
fn read_cold_with_b_hung(hedge_delay_ms: u64) -> Duration {
    let a = Dovecot::start(2).unwrap();
    let b = Dovecot::start(2).unwrap();
    let rig = Rig::new(
        &two_by_two(&a, &b),
        &format!(
            "strategy = \"fast\"\nwrite_quorum = 1\ntimeout_ms = {LONG_DEADLINE_MS}\nmember_deadline_ms = {LONG_DEADLINE_MS}\nhedge_delay_ms = {hedge_delay_ms}"
        ),
    );
    rig.ok(&["mkfs"]);
    rig.mount();
    let data = pattern(HEDGED_FILE, 21);
    fs::write(rig.mnt.join("big"), &data).unwrap();
    fs::write(rig.mnt.join("primer"), pattern(HEDGED_FILE, 22)).unwrap();
    rig.wait_stats("both servers hold everything", all_up_and_paid);
    rig.umount();
    fs::remove_dir_all(rig.dir.path().join("cache")).unwrap();
    rig.mount();
    // Which member a read prefers is the one with the lower recent latency: make that b's
    // by a short pause of a while another cold file is read (a member answering 300 ms
    // late, or beaten by a hedge, is slower than b in the mount's eyes).
    std::thread::scope(|s| {
        a.pause();
        s.spawn(|| {
            std::thread::sleep(Duration::from_millis(300));
            a.resume();
        });
        assert_eq!(fs::read(rig.mnt.join("primer")).unwrap().len(), HEDGED_FILE);
    });
    b.pause();
    let started = Instant::now();
    let read = fs::read(rig.mnt.join("big"));
    let took = started.elapsed();
    eprintln!(
        "hedge_delay_ms = {hedge_delay_ms}: {HEDGED_FILE} bytes read cold with b hung in {took:?}"
    );
    assert!(
        read.as_ref().is_ok_and(|r| *r == data),
        "big read back wrong\nlog: {}",
        rig.log()
    );
    if hedge_delay_ms > 0 {
        rig.wait_stats("hedges counted", |s| {
            number(s, "hedged_reads") >= 1 && number(s, "hedge_wins") >= 1
        });
    }
    // A write the quorum of one (a) acknowledges, while b still hangs: hedged, it goes on
    // to a when b takes nothing for the hedge delay (b's accounts are preferred, or not
    // yet marked down); not hedged, it may wait for b, but one deadline at most.
    let written = write_synced(&rig.mnt.join("during"), &pattern(HEDGED_FILE, 23));
    eprintln!(
        "hedge_delay_ms = {hedge_delay_ms}: {HEDGED_FILE} bytes and fsync with b hung: {written:?}"
    );
    let write_bound = if hedge_delay_ms > 0 {
        READ_BOUND
    } else {
        Duration::from_millis(LONG_DEADLINE_MS) + SLACK
    };
    assert!(
        written < write_bound,
        "a write with b hung took {written:?}\nlog: {}",
        rig.log()
    );
    b.resume();
    rig.wait_stats("b caught up", all_up_and_paid);
    rig.umount();
    took
}
