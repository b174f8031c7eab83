use super::*;

fn scenario(device: &str, workloads: &str) -> Scenario {
    Scenario::parse(&format!(
        "seed = 3\nreplications = 3\n[device]\n{device}\n[scheduler]\nkind = \"deadline\"\n{workloads}"
    ))
    .unwrap()
}

fn one(device: &str, workload: &str) -> WorkloadResult {
    let s = scenario(device, workload);
    let (results, _) = run(&s, false, &mut |_, _| {}).unwrap();
    results.into_iter().next().unwrap()
}

const HDD: &str = "kind = \"hdd\"";
const SSD: &str = "kind = \"ssd\"";

#[test]
fn random_reads_on_a_7200_rpm_disk_and_what_queue_depth_buys() {
    let w = |qd: u32| {
        format!(
            "[[workload]]\nname = \"rr\"\nkind = \"direct\"\nop = \"read\"\npattern = \"random\"\nrecord_bytes = 4096\nbytes = 8388608\nqueue_depth = {qd}\n"
        )
    };
    let qd1 = one(HDD, &w(1));
    assert!((70.0..90.0).contains(&qd1.iops.mean), "{qd1:?}");
    assert!(qd1.device_utilisation.mean > 0.99);
    assert!(qd1.iops.ci95 > 0.0 && qd1.iops.ci95 < 5.0, "{:?}", qd1.iops);
    // Deeper queues let the scheduler sort: shorter seeks, more IOPS, longer waits.
    let qd32 = one(HDD, &w(32));
    assert!(
        qd32.iops.mean > 1.5 * qd1.iops.mean,
        "{} vs {}",
        qd32.iops.mean,
        qd1.iops.mean
    );
    assert!(qd32.latency_mean_us.mean > qd1.latency_mean_us.mean);
    assert!(qd32.bottleneck.starts_with("device"), "{}", qd32.bottleneck);
}

#[test]
fn sequential_reads_stream_at_the_media_rate_and_an_ssd_scales_with_depth() {
    let seq = "[[workload]]\nname = \"sr\"\nkind = \"direct\"\nop = \"read\"\npattern = \"sequential\"\nrecord_bytes = 1048576\nbytes = 268435456\n";
    let hdd = one(HDD, seq);
    assert!((190.0..201.0).contains(&hdd.mb_per_s.mean), "{hdd:?}");
    let ssd = one(SSD, seq);
    assert!(
        ssd.mb_per_s.mean > 400.0 && ssd.mb_per_s.mean < 520.0,
        "{ssd:?}"
    );
    let rr = |qd: u32| {
        one(
            SSD,
            &format!(
                "[[workload]]\nname = \"r\"\nkind = \"direct\"\nop = \"read\"\npattern = \"random\"\nrecord_bytes = 4096\nbytes = 16777216\nqueue_depth = {qd}\n"
            ),
        )
    };
    let (d1, d8) = (rr(1), rr(8));
    assert!(
        d8.iops.mean > 5.0 * d1.iops.mean,
        "{} vs {}",
        d8.iops.mean,
        d1.iops.mean
    );
    assert!(
        d1.bottleneck.starts_with("the workload"),
        "{}",
        d1.bottleneck
    );
}

#[test]
fn runs_repeat_for_a_seed_and_write_their_files() {
    let s = scenario(
        HDD,
        "[[workload]]\nname = \"w\"\nkind = \"direct\"\nop = \"write\"\npattern = \"random\"\nrecord_bytes = 8192\nbytes = 1048576\nqueue_depth = 4\nregion_bytes = 1073741824\n",
    );
    let mut seen = Vec::new();
    let (a, logs) = run(&s, true, &mut |d, t| seen.push((d, t))).unwrap();
    assert_eq!(seen, [(1, 3), (2, 3), (3, 3)]);
    let (b, _) = run(&s, false, &mut |_, _| {}).unwrap();
    assert_eq!(a[0].seconds, b[0].seconds);
    assert_eq!(logs.len(), 1);
    assert_eq!(logs[0].requests.len(), 128);
    assert!(
        logs[0]
            .requests
            .iter()
            .all(|r| r.end_ns > r.start_ns && !r.hit)
    );
    assert!(logs[0].requests.iter().all(|r| r.offset_bytes < 1 << 30));
    let dir = std::env::temp_dir().join(format!("sim-run-test-{}", std::process::id()));
    write_outputs(&dir, &a, &logs).unwrap();
    let csv = std::fs::read_to_string(dir.join("results.csv")).unwrap();
    assert_eq!(csv.lines().count(), 2);
    assert!(
        csv.lines()
            .nth(1)
            .unwrap()
            .starts_with("w,direct,write,random,8192,4,3,128,")
    );
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("results.json")).unwrap()).unwrap();
    assert_eq!(json[0]["name"], "w");
    let svg = std::fs::read_to_string(dir.join("results.svg")).unwrap();
    assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
    assert_eq!(svg.matches("<rect").count(), 1);
    assert!(svg.contains(">w</text>"));
    let requests = std::fs::read_to_string(dir.join("requests.csv")).unwrap();
    assert_eq!(requests.lines().count(), 129);
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn bad_scenarios_are_refused_with_a_reason() {
    let ok_workload = "[[workload]]\nname = \"a\"\nkind = \"direct\"\nop = \"read\"\npattern = \"random\"\nrecord_bytes = 4096\nbytes = 4096\n";
    let cases = [
        (
            "replications = 0\n[device]\nkind = \"hdd\"\n".to_string() + ok_workload,
            "replications",
        ),
        (
            "[device]\nkind = \"hdd\"\nrpm = 0\n".to_string() + ok_workload,
            "rpm",
        ),
        (
            "[device]\nkind = \"floppy\"\n".to_string() + ok_workload,
            "floppy",
        ),
        ("[device]\nkind = \"hdd\"\n".to_string(), "workload"),
        (
            "[device]\nkind = \"hdd\"\n".to_string()
                + &ok_workload.replace("record_bytes = 4096", "record_bytes = 1000"),
            "512",
        ),
        (
            "[device]\nkind = \"hdd\"\n".to_string()
                + &ok_workload.replace("\nbytes = 4096\n", "\nbytes = 4096\nqueue_depth = 0\n"),
            "queue_depth",
        ),
        (
            "[device]\nkind = \"hdd\"\n".to_string() + ok_workload + ok_workload,
            "unique",
        ),
        (
            "[device]\nkind = \"hdd\"\n".to_string()
                + &ok_workload.replace("\nbytes = 4096\n", "\nbytes = 4096\ncolour = 1\n"),
            "colour",
        ),
        (
            "[device]\nkind = \"ssd\"\ncapacity_bytes = 1048576\n".to_string()
                + &ok_workload.replace(
                    "\nbytes = 4096\n",
                    "\nbytes = 4096\noffset_bytes = 2097152\n",
                ),
            "within the device",
        ),
        // Times and rates that would overflow the virtual clock.
        (
            "[device]\nkind = \"ssd\"\nread_latency_us = 1e300\n".to_string() + ok_workload,
            "read_latency_us",
        ),
        (
            "[device]\nkind = \"ssd\"\nmap_region_bytes = 4096\nmap_cache_bytes = 8192\nmap_miss_us = 1e300\n".to_string()
                + ok_workload,
            "map_miss_us",
        ),
        (
            "[device]\nkind = \"ssd\"\nwrite_mb_s = 1e-300\n".to_string() + ok_workload,
            "write_mb_s",
        ),
        (
            "[device]\nkind = \"hdd\"\noverhead_us = 1e300\n".to_string() + ok_workload,
            "overhead_us",
        ),
        (
            "[device]\nkind = \"hdd\"\n[cpu]\nsyscall_ns = 1e300\n".to_string() + ok_workload,
            "cpu",
        ),
        (
            "[device]\nkind = \"hdd\"\n[writeback]\ndirty_expire_ms = 18446744073709551615\n"
                .to_string()
                + ok_workload,
            "an hour",
        ),
        (
            "[device]\nkind = \"hdd\"\n[writeback]\ntruncate_us_per_mib = 1e300\n".to_string()
                + ok_workload,
            "truncate_us_per_mib",
        ),
        (
            "[device]\nkind = \"hdd\"\n[scheduler]\nkind = \"deadline\"\nread_expire_ms = 18446744073709551615\n"
                .to_string()
                + ok_workload,
            "read_expire_ms",
        ),
    ];
    for (text, why) in cases {
        let err = Scenario::parse(&text)
            .map_err(|e| e.to_string())
            .and_then(|s| {
                run(&s, false, &mut |_, _| {})
                    .map(|_| ())
                    .map_err(|e| e.to_string())
            });
        let err = err.expect_err(&text);
        assert!(err.contains(why), "{err} lacks {why:?}");
    }
}

fn file_workload(name: &str, pattern: &str, record: u64, bytes: u64, extra: &str) -> String {
    format!(
        "[[workload]]\nname = \"{name}\"\nkind = \"file\"\nop = \"read\"\npattern = \"{pattern}\"\nrecord_bytes = {record}\nbytes = {bytes}\n{extra}"
    )
}

#[test]
fn buffered_reads_show_the_copy_knee_when_cached_and_the_disk_when_cold() {
    // Warm: only system calls and copies. Throughput falls past the copy knee (128 KiB by
    // default), as the dissertation's iozone curves do at L2 / 8.
    let warm = |record: u64| {
        one(
            HDD,
            &file_workload("w", "sequential", record, 64 << 20, "cache = \"warm\"\n"),
        )
        .mb_per_s
        .mean
    };
    let (small, at_knee, past) = (warm(32 << 10), warm(128 << 10), warm(4 << 20));
    // Rising while the system call's cost is spread over more bytes, then the knee.
    assert!(small < at_knee, "{small} {at_knee}");
    assert!(past < 0.6 * at_knee, "{past} vs {at_knee}");
    let r = one(
        HDD,
        &file_workload("w", "sequential", 64 << 10, 64 << 20, "cache = \"warm\"\n"),
    );
    assert!(
        r.hit_ratio.mean > 0.999 && r.bottleneck.starts_with("the CPU"),
        "{r:?}"
    );
    // Cold: read-ahead streams the disk.
    let cold = one(
        HDD,
        &file_workload("c", "sequential", 64 << 10, 64 << 20, ""),
    );
    assert!((150.0..201.0).contains(&cold.mb_per_s.mean), "{cold:?}");
    // Cold random 8 KiB reads over a 4 GiB file: no read-ahead, so the disk's random rate
    // over that span (short seeks: rotation dominates), as direct reads of it measure.
    let random = one(
        HDD,
        &file_workload(
            "r",
            "random",
            8192,
            4 << 20,
            "file_bytes = 4294967296
",
        ),
    );
    let direct = one(
        HDD,
        "[[workload]]\nname = \"d\"\nkind = \"direct\"\nop = \"read\"\npattern = \"random\"\nrecord_bytes = 8192\nbytes = 4194304\nregion_bytes = 4294967296\n",
    );
    assert!(
        (random.iops.mean - direct.iops.mean).abs() / direct.iops.mean < 0.05,
        "{} vs {}",
        random.iops.mean,
        direct.iops.mean
    );
    assert!((150.0..230.0).contains(&random.iops.mean), "{random:?}");
    assert!(random.hit_ratio.mean < 0.01);
}

#[test]
fn file_workloads_refuse_what_is_not_modelled() {
    let base = "[device]\nkind = \"hdd\"\n".to_string();
    let partial = base.clone()
        + &file_workload("w", "random", 512, 4096, "").replace("op = \"read\"", "op = \"write\"");
    assert!(
        Scenario::parse(&partial)
            .unwrap_err()
            .to_string()
            .contains("whole pages")
    );
    let deep = base.clone() + &file_workload("w", "random", 4096, 4096, "queue_depth = 4\n");
    assert!(
        Scenario::parse(&deep)
            .unwrap_err()
            .to_string()
            .contains("one call at a time")
    );
    let tiny = base.clone()
        + "[memory]\npage_cache_bytes = 4096\n"
        + &file_workload("w", "random", 4096, 4096, "");
    assert!(
        Scenario::parse(&tiny)
            .unwrap_err()
            .to_string()
            .contains("page_cache_bytes")
    );
    let ratios =
        base + "[writeback]\ndirty_ratio = 0.05\n" + &file_workload("w", "random", 4096, 4096, "");
    assert!(
        Scenario::parse(&ratios)
            .unwrap_err()
            .to_string()
            .contains("dirty_background_ratio")
    );
}

fn writes(device: &str, extra_scenario: &str, w: &str) -> WorkloadResult {
    let s = Scenario::parse(&format!(
        "seed = 3\nreplications = 2\n[device]\n{device}\n{extra_scenario}\n{w}"
    ))
    .unwrap();
    run(&s, false, &mut |_, _| {}).unwrap().0.remove(0)
}

fn write_workload(pattern: &str, record: u64, bytes: u64, extra: &str) -> String {
    file_workload("w", pattern, record, bytes, extra).replace("op = \"read\"", "op = \"write\"")
}

#[test]
fn writes_under_the_dirty_limit_run_at_memory_speed_and_larger_ones_at_the_disks() {
    // 256 MiB of page cache: throttling starts past 20 % (51 MiB) dirty. Without a final
    // fsync, a 32 MiB file is written to memory only; a 512 MiB one waits for the disk
    // (the dissertation's dirty-ratio effect, 3.2.2 and 5.6).
    let memory = "[memory]\npage_cache_bytes = 268435456\n";
    let small = writes(
        HDD,
        memory,
        &write_workload("sequential", 1 << 20, 32 << 20, "end_fsync = false\n"),
    );
    let large = writes(
        HDD,
        memory,
        &write_workload("sequential", 1 << 20, 512 << 20, "end_fsync = false\n"),
    );
    assert!(small.mb_per_s.mean > 2000.0, "{small:?}");
    assert!(large.mb_per_s.mean < 400.0, "{large:?}");
    // With the final fsync the small file pays for its disk write too.
    let synced = writes(
        HDD,
        memory,
        &write_workload("sequential", 1 << 20, 32 << 20, ""),
    );
    assert!(synced.mb_per_s.mean < 400.0, "{synced:?}");
}

#[test]
fn data_journalling_and_synchronous_writes_cost_what_the_dissertation_saw() {
    // 256 MiB written sequentially through a 32 MiB journal: in data mode every byte goes to
    // the journal and home, and writers wait for checkpoints to free the journal (5.7).
    let sequential = write_workload("sequential", 1 << 20, 256 << 20, "");
    let mode = |m: &str| {
        format!(
            "[memory]\npage_cache_bytes = 268435456\n[writeback]\njournal = \"{m}\"\njournal_bytes = 33554432\n"
        )
    };
    let ordered = writes(HDD, &mode("ordered"), &sequential);
    let data = writes(HDD, &mode("data"), &sequential);
    let writeback = writes(HDD, &mode("writeback"), &sequential);
    assert!(
        data.mb_per_s.mean < 0.7 * ordered.mb_per_s.mean,
        "{} vs {}",
        data.mb_per_s.mean,
        ordered.mb_per_s.mean
    );
    // Ordered and writeback are close (5.7).
    assert!(
        (ordered.mb_per_s.mean - writeback.mb_per_s.mean).abs() / ordered.mb_per_s.mean < 0.1,
        "{} vs {}",
        ordered.mb_per_s.mean,
        writeback.mb_per_s.mean
    );
    // O_SYNC: every 8 KiB write waits for the disk and a journal commit (5.8). Against the
    // same writes left in the page cache (iozone without -e) it is orders of magnitude
    // slower; against one final fsync (the elevator sorts what waits) still slower.
    let random = write_workload("random", 8192, 8 << 20, "file_bytes = 536870912\n");
    let with = |extra: &str| {
        writes(
            HDD,
            "",
            &random.replace("file_bytes", &format!("{extra}\nfile_bytes")),
        )
    };
    let cached = with("end_fsync = false");
    let fsync_once = writes(HDD, "", &random);
    let sync = with("sync = true");
    assert!(sync.mb_per_s.mean < fsync_once.mb_per_s.mean);
    assert!(
        sync.mb_per_s.mean * 100.0 < cached.mb_per_s.mean,
        "{} vs {}",
        sync.mb_per_s.mean,
        cached.mb_per_s.mean
    );
    assert!(sync.latency_p50_us.mean > 3000.0, "{sync:?}");
}

#[test]
fn traces_replay_at_their_times_or_as_fast_as_the_device_goes() {
    let dir = std::env::temp_dir().join(format!("sim-trace-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // 200 random 4 KiB reads, 100 ms apart: the disk keeps up, so the run lasts the trace.
    let mut disksim = String::new();
    let mut x: u64 = 88_172_645_463_325_252;
    for i in 0..200u64 {
        // xorshift: blocks all over the 1 TB disk.
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let block = x % 1_900_000_000;
        disksim.push_str(&format!("{} 0 {block} 8 1\n", i * 100));
    }
    std::fs::write(dir.join("t.disksim"), &disksim).unwrap();
    // The trace by its full path: a path relative to the scenario file is the CLI's to
    // resolve (it reads scenario files; tests/sim.rs in crates/mailstow covers that).
    let scenario = |timing: &str| {
        let trace = dir.join("t.disksim");
        Scenario::parse(&format!(
            "replications = 2\n[device]\nkind = \"hdd\"\n[[workload]]\nname = \"t\"\nkind = \"trace\"\ntrace = {trace:?}\nformat = \"disksim\"\ntiming = \"{timing}\"\nqueue_depth = 1\n"
        ))
        .unwrap()
    };
    let go = |timing: &str| {
        let s = scenario(timing);
        run(&s, false, &mut |_, _| {}).unwrap().0.remove(0)
    };
    let timed = go("trace");
    assert_eq!(timed.requests, 200);
    assert!((19.9..20.1).contains(&timed.seconds.mean), "{timed:?}");
    assert!(
        timed.latency_p99_us.mean < 30_000.0,
        "no queueing: {timed:?}"
    );
    // As fast as it goes: the disk's random rate, about 80 per second.
    let fast = go("fast");
    assert!((70.0..95.0).contains(&fast.iops.mean), "{fast:?}");
    // A trace past the device's end, and a missing file, are refused.
    let far = "0 0 1999999999999 8 1\n";
    std::fs::write(dir.join("t.disksim"), far).unwrap();
    let s = scenario("fast");
    assert!(
        run(&s, false, &mut |_, _| {})
            .unwrap_err()
            .to_string()
            .contains("past the device")
    );
    std::fs::remove_file(dir.join("t.disksim")).unwrap();
    assert!(run(&s, false, &mut |_, _| {}).is_err());
    let no_format =
        "[device]\nkind = \"hdd\"\n[[workload]]\nname = \"t\"\nkind = \"trace\"\ntrace = \"x\"\n";
    assert!(
        Scenario::parse(no_format)
            .unwrap_err()
            .to_string()
            .contains("format")
    );
    std::fs::remove_dir_all(dir).unwrap();
}

fn mail(workload: &str) -> WorkloadResult {
    let s = Scenario::parse(&format!(
        "replications = 2\n[device]\nkind = \"hdd\"\n[[workload]]\nname = \"m\"\n{workload}"
    ))
    .unwrap();
    run(&s, false, &mut |_, _| {}).unwrap().0.remove(0)
}

#[test]
fn group_commit_outruns_a_file_per_message_and_mailstow_deletes_in_constant_time() {
    let queue = |mode: &str, messages: u64| {
        mail(&format!(
            "kind = \"queue\"\nmode = \"{mode}\"\nmessages = {messages}\nmessage_bytes = 4096\nsessions = 32\n"
        ))
    };
    let flashq = queue("group-commit", 20_000);
    let files = queue("file-per-message", 2_000);
    assert_eq!((flashq.requests, files.requests), (20_000, 2_000));
    assert!(
        flashq.iops.mean > 5.0 * files.iops.mean,
        "{} vs {}",
        flashq.iops.mean,
        files.iops.mean
    );
    // One session: no one to share a commit with.
    let alone = mail(
        "kind = \"queue\"\nmode = \"file-per-message\"\nmessages = 200\nmessage_bytes = 4096\n",
    );
    assert!(
        alone.iops.mean < files.iops.mean / 4.0,
        "{} vs {}",
        alone.iops.mean,
        files.iops.mean
    );
    let delete = |mode: &str, distance: u64| {
        mail(&format!(
            "kind = \"delete\"\nmode = \"{mode}\"\nmessages = 2000\nmessage_bytes = 65536\ndistance = {distance}\n"
        ))
        .seconds
        .mean
    };
    let (near, far) = (delete("mailstow", 10), delete("mailstow", 1990));
    assert!(
        (near - far).abs() / near < 0.5 && far < 0.02,
        "{near} {far}"
    );
    let (near, far) = (delete("mbox", 10), delete("mbox", 1990));
    assert!(far > 20.0 * near, "{near} {far}");
    // Modes belong to their kinds; distances to the mailbox.
    for bad in [
        "kind = \"queue\"\nmode = \"mbox\"\nmessages = 1\nmessage_bytes = 1\n",
        "kind = \"delete\"\nmode = \"mbox\"\nmessages = 5\nmessage_bytes = 1\ndistance = 5\n",
        "kind = \"queue\"\nmode = \"group-commit\"\nmessages = 0\nmessage_bytes = 1\n",
    ] {
        let text = format!("[device]\nkind = \"hdd\"\n[[workload]]\nname = \"m\"\n{bad}");
        assert!(Scenario::parse(&text).is_err(), "{bad}");
    }
}

fn mail_on(header: &str, workload: &str) -> WorkloadResult {
    let s = Scenario::parse(&format!(
        "replications = 1\n{header}\n[[workload]]\nname = \"m\"\n{workload}"
    ))
    .unwrap();
    run(&s, false, &mut |_, _| {}).unwrap().0.remove(0)
}

/// An mbox deletion's truncate costs its caller what `[writeback]` says (with online
/// discard and no journal, the discard it waits for), between the move and the `fsync`;
/// mailstow's expunge truncates nothing.
#[test]
fn an_mbox_deletion_pays_its_truncate_and_mailstows_does_not() {
    let ssd = "[device]\nkind = \"ssd\"\n[writeback]\njournal = \"none\"";
    let costly = format!("{ssd}\ntruncate_us = 2000\ntruncate_us_per_mib = 16000");
    let ms = |header: &str, mode: &str, distance: u64| {
        mail_on(
            header,
            &format!(
                "kind = \"delete\"\nmode = \"{mode}\"\nmessages = 200\nmessage_bytes = 65536\ndistance = {distance}\n"
            ),
        )
        .seconds
        .mean
            * 1e3
    };
    // 2 ms, and 1 ms for the 64 KiB message freed.
    for distance in [0, 10, 150] {
        let extra = ms(&costly, "mbox", distance) - ms(ssd, "mbox", distance);
        assert!(
            (extra - 3.0).abs() < 0.01,
            "distance {distance}: {extra} ms"
        );
    }
    assert_eq!(ms(&costly, "mailstow", 10), ms(ssd, "mailstow", 10));
}

#[test]
fn a_queue_pays_its_cpu_per_message_and_without_a_journal_fsyncs_queue_on_shared_blocks() {
    let hdd = "[device]\nkind = \"hdd\"";
    let group = |cpu_ns: u64| {
        mail_on(
            hdd,
            &format!(
                "kind = \"queue\"\nmode = \"group-commit\"\nmessages = 4000\nmessage_bytes = 4096\nsessions = 32\nmessage_cpu_ns = {cpu_ns}\n"
            ),
        )
        .iops
        .mean
    };
    // 100 us a message on the committer: never more than 10,000 a second, and slower than
    // the device alone.
    let (free, costly) = (group(0), group(100_000));
    assert!(costly < 10_000.0 && costly < free, "{free} {costly}");
    // Without a journal each fsync writes the file's inode's block, the directory's block
    // and the directory's inode's block in turn, then flushes. One session: the four
    // (for the first fifteen files, whose inodes share the directory's block, three) one
    // after another. 8 KiB at 480 MB/s: 17,067 ns; a write 50 us, a flush 20 us.
    let ssd = "[device]\nkind = \"ssd\"\nwrite_latency_us = 50.0\nflush_latency_us = 20.0\n[writeback]\njournal = \"none\"";
    let files = |sessions: u32, cpu_ns: u64| {
        mail_on(
            ssd,
            &format!("kind = \"queue\"\nmode = \"file-per-message\"\nmessages = 2000\nmessage_bytes = 8192\nsessions = {sessions}\nmessage_cpu_ns = {cpu_ns}\ncpus = 2\n"),
        )
        .iops
        .mean
    };
    let (data, block) = (50_000.0 + 17_067.0, 50_000.0 + 8_533.0);
    let one = 2000.0 / (2000.0 * (data + 2.0 * block + 20_000.0) + 1985.0 * block) * 1e9;
    let alone = files(1, 0);
    assert!((alone - one).abs() < one * 0.01, "{alone} {one}");
    // 32 sessions creating files all the time (50 us of CPU each, on two cores): data and
    // flushes go eight at a time, but a file is created while the directory's block is
    // being written, so nearly every fsync writes it again, one write at a time under its
    // lock: the rate stays near one file per block write.
    let busy = files(32, 50_000);
    assert!(busy > 1.5 * alone && busy < 1.2e9 / block, "{alone} {busy}");
    // With no CPU, files are created in bursts as a batch of fsyncs ends: a waiter finds
    // its change already written and skips the write, as in a group commit.
    let bursts = files(32, 0);
    assert!(bursts > 1.5e9 / block, "{busy} {bursts}");
    // Sessions share `cpus` cores: twice the cores, up to twice the rate when CPU-bound.
    let cores = |cpus: u32| {
        mail_on(
            hdd,
            &format!(
                "kind = \"queue\"\nmode = \"file-per-message\"\nmessages = 400\nmessage_bytes = 4096\nsessions = 32\nmessage_cpu_ns = 5000000\ncpus = {cpus}\n"
            ),
        )
        .iops
        .mean
    };
    let (one, two) = (cores(1), cores(2));
    assert!(one < 200.0 && two > 1.5 * one, "{one} {two}");
    for bad in ["cpus = 0", "message_cpu_ns = -1.0", "message_cpu_ns = 2e9"] {
        let text = format!(
            "{hdd}\n[[workload]]\nname = \"m\"\nkind = \"queue\"\nmode = \"group-commit\"\nmessages = 1\nmessage_bytes = 1\n{bad}\n"
        );
        assert!(Scenario::parse(&text).is_err(), "{bad}");
    }
}

fn pvfs(op: &str, clients: u32, extra: &str) -> WorkloadResult {
    let s = Scenario::parse(&format!(
        "[device]\nkind = \"hdd\"\n[pvfs]\nservers = 4\nclients = {clients}\n{extra}\n[[workload]]\nname = \"p\"\nkind = \"pvfs\"\nop = \"{op}\"\nrecord_bytes = 1048576\nbytes = 67108864\n"
    ))
    .unwrap();
    run(&s, false, &mut |_, _| {}).unwrap().0.remove(0)
}

#[test]
fn pvfs_scales_with_clients_until_the_servers_saturate() {
    // One client: its own gigabit link bounds it (125 MB/s less headers and waits).
    let one = pvfs("write", 1, "");
    assert!((90.0..125.0).contains(&one.mb_per_s.mean), "{one:?}");
    assert_eq!(one.requests, 64);
    // Four clients over four servers: writes land in the servers' page caches, so the
    // aggregate grows well past one link.
    let four = pvfs("write", 4, "");
    assert!(
        four.mb_per_s.mean > 2.0 * one.mb_per_s.mean,
        "{} vs {}",
        four.mb_per_s.mean,
        one.mb_per_s.mean
    );
    assert_eq!(four.requests, 256);
    // Reads come from the servers' disks, where the clients' streams interleave and seek:
    // more clients add less.
    let (r1, r4) = (pvfs("read", 1, ""), pvfs("read", 4, ""));
    assert!(r4.mb_per_s.mean > r1.mb_per_s.mean && r4.mb_per_s.mean < 4.0 * r1.mb_per_s.mean);
    // A ten times faster network lifts one client's ceiling.
    let fast = pvfs("write", 1, "link_mb_s = 1250.0\n");
    assert!(fast.mb_per_s.mean > 3.0 * one.mb_per_s.mean, "{fast:?}");
    for bad in [
        "servers = 0",
        "stripe_bytes = 1000",
        "mtu_bytes = 40",
        "latency_us = 1e300",
        "link_mb_s = 1e-300",
    ] {
        let text = format!(
            "[device]\nkind = \"hdd\"\n[pvfs]\n{bad}\n[[workload]]\nname = \"p\"\nkind = \"pvfs\"\nop = \"read\"\nrecord_bytes = 4096\nbytes = 4096\n"
        );
        assert!(
            Scenario::parse(&text)
                .unwrap_err()
                .to_string()
                .contains("pvfs"),
            "{bad}"
        );
    }
}

#[test]
fn a_sweep_runs_every_workload_at_every_value_and_draws_a_line_each() {
    let text = "[device]\nkind = \"hdd\"\n[[workload]]\nname = \"mbox\"\nkind = \"delete\"\nmode = \"mbox\"\nmessages = 200\nmessage_bytes = 65536\n[[workload]]\nname = \"mailstow\"\nkind = \"delete\"\nmode = \"mailstow\"\nmessages = 200\nmessage_bytes = 65536\n[sweep]\nparameter = \"distance\"\nvalues = [10, 100, 190]\nmetric = \"ms\"\n";
    let s = Scenario::parse(text).unwrap();
    let sweep = s.sweep.clone().unwrap();
    let points = crate::sweep::run(&s, &sweep, &mut |_, _| {}).unwrap();
    assert_eq!(points.len(), 6);
    let ms = |name: &str, x: f64| {
        let p = points
            .iter()
            .find(|p| p.workload == name && p.x == x)
            .unwrap();
        p.result.seconds.mean
    };
    // The mbox's time grows with the distance; mailstow's does not.
    assert!(ms("mbox", 190.0) > 5.0 * ms("mbox", 10.0));
    assert!((ms("mailstow", 190.0) - ms("mailstow", 10.0)).abs() < 0.5 * ms("mailstow", 10.0));
    let csv = crate::sweep::csv(&sweep, &points);
    assert_eq!(csv.lines().count(), 7);
    assert!(csv.starts_with("workload,distance,ms,ci95\n"));
    let svg = crate::sweep::svg("t", &sweep, &points);
    assert_eq!(svg.matches("<polyline").count(), 2);
    assert_eq!(svg.matches("<circle").count(), 6);
    // Unknown parameters, empty or too many values, and values a workload refuses fail
    // when the scenario is read.
    let base = text.split("[sweep]").next().unwrap();
    let many: Vec<String> = (1..=65).map(|v| v.to_string()).collect();
    for bad in [
        "parameter = \"colour\"\nvalues = [1]".to_string(),
        "parameter = \"distance\"\nvalues = []".to_string(),
        format!("parameter = \"distance\"\nvalues = [{}]", many.join(", ")),
        "parameter = \"distance\"\nvalues = [200]".to_string(),
        "parameter = \"distance\"\nvalues = [1.5]".to_string(),
    ] {
        let text = format!("{base}[sweep]\n{bad}\n");
        assert!(Scenario::parse(&text).is_err(), "{bad}");
    }
}
