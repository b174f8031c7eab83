//! `mailstow sim` as scripts drive it: the contract lines and clear errors.

use std::process::{Command, Output};

fn sim(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_mailstow"))
        .arg("sim")
        .args(args)
        .output()
        .expect("run mailstow")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn speed_ends_with_events_per_second_and_is_deterministic_in_virtual_time() {
    let run = |seed: &str| {
        let out = sim(&["speed", "--events", "300000", "--seed", seed]);
        assert!(out.status.success(), "{out:?}");
        text(&out.stdout)
    };
    let a = run("5");
    let last = a.lines().last().expect("output");
    let rate: f64 = last
        .strip_prefix("events_per_second=")
        .unwrap_or_else(|| panic!("last line {last:?}"))
        .parse()
        .expect("a number");
    assert!(rate > 0.0);
    assert!(a.contains("events=300000\n"), "{a}");
    // The virtual-time figures repeat for a seed (the wall clock does not).
    let virtual_part = |s: &str| -> Vec<String> {
        s.lines()
            .filter(|l| l.starts_with("virtual_seconds=") || l.starts_with("mean_utilisation="))
            .map(str::to_string)
            .collect()
    };
    assert_eq!(virtual_part(&a), virtual_part(&run("5")));
    assert_ne!(virtual_part(&a), virtual_part(&run("6")));
}

#[test]
fn speed_refuses_empty_runs_with_one_line() {
    for args in [
        &["speed", "--events", "0"][..],
        &["speed", "--stations", "0"],
        &["speed", "--events", "many"],
    ] {
        let out = sim(args);
        assert!(!out.status.success(), "{args:?}: {out:?}");
        let stderr = text(&out.stderr);
        assert!(
            !stderr.is_empty() && !stderr.contains("panicked"),
            "{stderr}"
        );
    }
}

const SCENARIO: &str = r#"
seed = 9
replications = 2
[device]
kind = "hdd"
[[workload]]
name = "rr"
kind = "direct"
op = "read"
pattern = "random"
record_bytes = 4096
bytes = 1048576
queue_depth = 4
"#;

#[test]
fn run_writes_results_and_prints_a_line_per_workload() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = dir.path().join("s.toml");
    std::fs::write(&scenario, SCENARIO).unwrap();
    let out_dir = dir.path().join("out");
    let out = sim(&[
        "run",
        scenario.to_str().unwrap(),
        "--out",
        out_dir.to_str().unwrap(),
        "--log",
    ]);
    assert!(out.status.success(), "{out:?}");
    let stdout = text(&out.stdout);
    assert!(stdout.contains("workload=rr mb_per_s="), "{stdout}");
    let csv = std::fs::read_to_string(out_dir.join("results.csv")).unwrap();
    assert!(
        csv.lines()
            .nth(1)
            .unwrap()
            .starts_with("rr,direct,read,random,4096,4,2,256,")
    );
    assert_eq!(
        std::fs::read_to_string(out_dir.join("requests.csv"))
            .unwrap()
            .lines()
            .count(),
        257
    );
    // The same seed gives the same file; --seed changes it.
    let again = dir.path().join("again");
    assert!(
        sim(&[
            "run",
            scenario.to_str().unwrap(),
            "--out",
            again.to_str().unwrap()
        ])
        .status
        .success()
    );
    let json = |d: &std::path::Path| std::fs::read_to_string(d.join("results.json")).unwrap();
    assert_eq!(json(&out_dir), json(&again));
    let other = dir.path().join("other");
    let seeded = [
        "run",
        scenario.to_str().unwrap(),
        "--out",
        other.to_str().unwrap(),
        "--seed",
        "10",
    ];
    assert!(sim(&seeded).status.success());
    assert_ne!(json(&out_dir), json(&other));
    // A dry run writes nothing.
    let dry = dir.path().join("dry");
    let out = sim(&[
        "run",
        scenario.to_str().unwrap(),
        "--out",
        dry.to_str().unwrap(),
        "--dry-run",
    ]);
    assert!(out.status.success() && text(&out.stdout).contains("rr: Direct Read Random"));
    assert!(!dry.exists());
}

#[test]
fn output_into_a_closed_pipe_stops_quietly_not_with_a_panic() {
    // `mailstow sim run … | head -1`: the reader is gone before the lines are written.
    let dir = tempfile::tempdir().unwrap();
    let scenario = dir.path().join("s.toml");
    std::fs::write(&scenario, SCENARIO).unwrap();
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let out = Command::new(env!("CARGO_BIN_EXE_mailstow"))
        .args(["sim", "run", scenario.to_str().unwrap(), "--out"])
        .arg(dir.path().join("out"))
        .stdout(writer)
        .output()
        .unwrap();
    let stderr = text(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(out.status.code(), Some(141), "{stderr}");
}

#[test]
fn run_refuses_a_bad_scenario_in_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = dir.path().join("s.toml");
    std::fs::write(
        &scenario,
        SCENARIO.replace("queue_depth = 4", "queue_depth = 0"),
    )
    .unwrap();
    let out_dir = dir.path().join("out");
    for args in [
        vec![
            "run",
            scenario.to_str().unwrap(),
            "--out",
            out_dir.to_str().unwrap(),
        ],
        vec![
            "run",
            "/nonexistent.toml",
            "--out",
            out_dir.to_str().unwrap(),
        ],
    ] {
        let out = sim(&args);
        assert!(!out.status.success());
        let stderr = text(&out.stderr);
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(stderr.starts_with("mailstow: error: "), "{stderr}");
    }
    assert!(!out_dir.exists());
}

/// `mailstow sim validate` runs the `mailstow-bench` binary next to `mailstow`. `cargo test
/// --workspace` (the test command) builds every package's binaries into the same directory
/// before any test runs; `cargo test -p mailstow` alone does not, so it is built here then,
/// with the same profile and target directory. (An existing one is used as it is: after a
/// change to the benchmarks, `cargo test -p mailstow` alone runs the old one.)
fn ensure_mailstow_bench() {
    let mailstow = std::path::Path::new(env!("CARGO_BIN_EXE_mailstow"));
    let profile_dir = mailstow.parent().expect("mailstow's directory");
    if profile_dir.join("mailstow-bench").is_file() {
        return;
    }
    let profile = match profile_dir.file_name().and_then(|n| n.to_str()) {
        Some("debug") => "dev",
        Some(name) => name,
        None => panic!("no profile in {}", mailstow.display()),
    };
    let target_dir = profile_dir.parent().expect("the target directory");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let status = Command::new(cargo)
        .args([
            "build",
            "--locked",
            "--profile",
            profile,
            "-p",
            "mailstow-bench",
        ])
        .env("CARGO_TARGET_DIR", target_dir)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .status()
        .expect("run cargo");
    assert!(
        status.success() && profile_dir.join("mailstow-bench").is_file(),
        "building mailstow-bench into {} failed: run `cargo build --profile {profile} -p \
         mailstow-bench`, or the tests with --workspace",
        profile_dir.display()
    );
}

#[test]
fn validate_quick_measures_simulates_and_ends_with_the_median_errors() {
    ensure_mailstow_bench();
    let dir = tempfile::tempdir().unwrap();
    let out = sim(&[
        "validate",
        "--quick",
        "--json",
        "--dir",
        dir.path().to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{out:?}");
    let stdout = text(&out.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    let n = lines.len();
    assert!(n > 3, "{stdout}");
    let fraction = |line: &str, key: &str| -> f64 {
        line.strip_prefix(key)
            .unwrap_or_else(|| panic!("{line:?} is not {key}"))
            .parse()
            .expect("a number")
    };
    let mailstow = fraction(lines[n - 4], "median_error_mailstow=");
    let mailfs: f64 = lines[n - 3]
        .strip_prefix("median_error_mailfs=")
        .unwrap_or_else(|| panic!("{:?}", lines[n - 3]))
        .parse()
        .expect("a number or NaN");
    let seq = fraction(lines[n - 2], "median_error_sequential=");
    let random = fraction(lines[n - 1], "median_error_random=");
    for e in [mailstow, seq, random] {
        assert!(e.is_finite() && e >= 0.0, "{stdout}");
    }
    // The JSON before them: every cell measured and simulated, both positive.
    let json: serde_json::Value = serde_json::from_str(&lines[..n - 4].join("\n")).unwrap();
    let cells = json["cells"].as_array().unwrap();
    assert!(cells.len() >= 10, "{cells:?}");
    for c in cells {
        assert!(c["real_mb_s"].as_f64().unwrap() > 0.0, "{c}");
        assert!(c["sim_mb_s"].as_f64().unwrap() > 0.0, "{c}");
    }
    assert!(json["calibration"]["device"]["read_mb_s"].as_f64().unwrap() > 0.0);
    // The ext4 cells ran on their loop mounts, or say why not.
    let skipped = json["skipped"].as_array().unwrap();
    for mode in ["ordered", "journal"] {
        let name = format!("ext4-{mode}-seq-write-fsync-1m");
        let ran = cells.iter().any(|c| c["name"] == name.as_str());
        let why = skipped
            .iter()
            .any(|s| s.as_str().unwrap().starts_with(&format!("{name}: ")));
        assert!(ran != why, "{name}: ran {ran}, skipped {why}");
    }
    // mailstow's storage: the deletes always run; the queue cells need tmpfs for their CPU.
    let mail = json["mailstow_cells"].as_array().unwrap();
    for name in [
        "delete-mailstow-near-end",
        "delete-mailstow-far-from-end",
        "delete-mbox-near-end",
        "delete-mbox-far-from-end",
        "queue-group-commit-32x8k",
        "queue-file-per-message-32x8k",
    ] {
        let cell = mail.iter().find(|c| c["name"] == name);
        let why = skipped
            .iter()
            .any(|s| s.as_str().unwrap().starts_with("queue cells: "));
        match cell {
            Some(c) => {
                assert!(c["real"].as_f64().unwrap() > 0.0, "{c}");
                assert!(c["sim"].as_f64().unwrap() > 0.0, "{c}");
            }
            None => assert!(
                name.starts_with("queue") && why,
                "{name} neither ran nor says why"
            ),
        }
    }
    // The far mbox delete moves 2,000 times the near one's bytes.
    let ms = |name: &str, key: &str| {
        mail.iter().find(|c| c["name"] == name).unwrap()[key]
            .as_f64()
            .unwrap()
    };
    for key in ["real", "sim"] {
        assert!(
            ms("delete-mbox-far-from-end", key) > 10.0 * ms("delete-mbox-near-end", key),
            "{key}"
        );
    }
    // The mail file system's striping: predicted and measured on a loopback Dovecot
    // through a real mount, or skipped with why (no Dovecot, no /dev/fuse).
    let cells = json["mailfs_cells"].as_array().unwrap();
    let why = skipped
        .iter()
        .any(|s| s.as_str().unwrap().starts_with("mail file system cells: "));
    assert!(
        cells.is_empty() == why,
        "mailfs cells: {} ran, skipped {why}",
        cells.len()
    );
    if !why {
        assert_eq!(cells.len(), 16, "{cells:?}");
        assert!(mailfs.is_finite() && mailfs >= 0.0, "{stdout}");
        let ms = |name: &str, key: &str| {
            cells.iter().find(|c| c["name"] == name).unwrap()[key]
                .as_f64()
                .unwrap()
        };
        for c in cells {
            assert!(c["real_ms"].as_f64().unwrap() > 0.0, "{c}");
            assert!(c["sim_ms"].as_f64().unwrap() > 0.0, "{c}");
        }
        // A 32 MiB file takes longer than a 32 KiB one, measured and predicted; small
        // files cost more over four accounts (their directory messages go to each).
        for key in ["real_ms", "sim_ms"] {
            assert!(
                ms("mailfs-write-32768k-b1024k-w4-c2", key)
                    > 3.0 * ms("mailfs-write-32k-b1024k-w4-c2", key),
                "{key}"
            );
        }
        assert!(
            ms("mailfs-write-32k-b1024k-w4-c2", "sim_ms")
                > ms("mailfs-write-32k-b1024k-w1-c2", "sim_ms")
        );
        let cal = &json["mailfs_calibration"];
        for key in [
            "server_append_ns_per_byte",
            "client_write_ns_per_byte",
            "latency_us",
        ] {
            assert!(cal[key].as_f64().unwrap() > 0.0, "{key}: {cal}");
        }
    }
    // Its files are left in the directory it was given.
    assert!(dir.path().join("validate.dat").exists());
}

#[test]
fn a_trace_is_summarised_on_a_dry_run_and_replayed() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios");
    let scenario = root.join("trace-replay.toml");
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("out");
    let args = |dry: bool| {
        let mut a = vec![
            "run".to_string(),
            scenario.to_str().unwrap().to_string(),
            "--out".to_string(),
            out_dir.to_str().unwrap().to_string(),
        ];
        if dry {
            a.push("--dry-run".to_string());
        }
        a
    };
    let dry = sim(&args(true).iter().map(String::as_str).collect::<Vec<_>>());
    assert!(dry.status.success(), "{dry:?}");
    let stdout = text(&dry.stdout);
    assert!(
        stdout.contains("400 requests (300 reads, 100 writes)") && stdout.contains("span 0.998 s"),
        "{stdout}"
    );
    assert!(!out_dir.exists());
    let ran = sim(&args(false).iter().map(String::as_str).collect::<Vec<_>>());
    assert!(ran.status.success(), "{ran:?}");
    let csv = std::fs::read_to_string(out_dir.join("results.csv")).unwrap();
    assert!(
        csv.contains("\nmixed-as-traced,trace,") && csv.contains("\nmixed-fast-qd8,trace,"),
        "{csv}"
    );
}

/// The mail file system's striping what-if as shipped: over slow accounts, wider stripes
/// go faster until the client's link is full.
#[test]
fn the_mail_file_system_width_sweep_scales_then_levels_off() {
    let out_dir = tempfile::tempdir().unwrap();
    let scenario = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../scenarios/sweeps/mailfs-width.toml"
    );
    let out = sim(&["run", scenario, "--out", out_dir.path().to_str().unwrap()]);
    assert!(out.status.success(), "{out:?}");
    let csv = std::fs::read_to_string(out_dir.path().join("sweep.csv")).unwrap();
    let rate = |workload: &str, accounts: u32| -> f64 {
        csv.lines()
            .find(|l| l.starts_with(&format!("{workload},{accounts},")))
            .unwrap_or_else(|| panic!("{workload} {accounts}: {csv}"))
            .split(',')
            .nth(2)
            .unwrap()
            .parse()
            .unwrap()
    };
    for w in ["write", "read"] {
        assert!(rate(w, 2) > 1.8 * rate(w, 1), "{csv}");
        assert!(rate(w, 4) > 1.8 * rate(w, 2), "{csv}");
        // 12.5 MB/s of base64 carries at most 9.1 MB/s of data.
        assert!(rate(w, 8) < 9.2 && rate(w, 8) < 1.3 * rate(w, 5), "{csv}");
    }
    assert!(out_dir.path().join("sweep.svg").exists());
}

/// The mail cluster's sweeps as shipped (issue 20): calibrated nodes gain less than double
/// from one to two (half the copies pay the handover) and then grow near-linearly; in the
/// what-if the directory's background fills it before the nodes run out.
#[test]
fn the_cluster_sweeps_grow_with_the_nodes_until_the_directory_is_full() {
    let run = |file: &str| -> String {
        let out_dir = tempfile::tempdir().unwrap();
        let scenario = format!(
            "{}/../../scenarios/sweeps/{file}",
            env!("CARGO_MANIFEST_DIR")
        );
        let out = sim(&["run", &scenario, "--out", out_dir.path().to_str().unwrap()]);
        assert!(out.status.success(), "{out:?}");
        assert!(out_dir.path().join("sweep.svg").exists());
        std::fs::read_to_string(out_dir.path().join("results.csv")).unwrap()
    };
    let row = |csv: &str, nodes: u32| -> (f64, String) {
        let line = csv
            .lines()
            .find(|l| l.starts_with(&format!("messages@{nodes},")))
            .unwrap_or_else(|| panic!("{nodes}: {csv}"))
            .to_string();
        let rate = line.split(',').nth(13).unwrap().parse().unwrap();
        (rate, line)
    };
    let csv = run("cluster-nodes.toml");
    let (one, two, sixteen) = (row(&csv, 1).0, row(&csv, 2).0, row(&csv, 16).0);
    assert!(two > one && two < 2.0 * one && sixteen > 4.0 * two, "{csv}");
    assert!(row(&csv, 16).1.contains("CPU"), "{csv}");
    let csv = run("cluster-directory.toml");
    assert!(row(&csv, 46).0 > 10.0 * row(&csv, 2).0, "{csv}");
    let (stored, line) = row(&csv, 48);
    assert!(
        stored == 0.0 && line.contains("leases would expire"),
        "{line}"
    );
}
