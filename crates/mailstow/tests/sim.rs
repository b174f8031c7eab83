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
        assert!(!stderr.is_empty() && !stderr.contains("panicked"), "{stderr}");
    }
}
