//! The `mailstow fs` command line on bad input.

use std::fs;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::rig::*;

#[test]
fn bad_input_gets_clear_cli_errors_not_hangs() {
    let dir = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        let out = Command::new(bin()).arg("fs").args(args).output().unwrap();
        (
            out.status.success(),
            format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ),
        )
    };
    let (ok, out) = run(&["mkfs"]);
    assert!(!ok && out.contains("needs --config"), "{out}");
    let missing = dir.path().join("absent.toml");
    let (ok, out) = run(&["--config", missing.to_str().unwrap(), "mkfs"]);
    assert!(!ok && out.contains("absent.toml"), "{out}");
    let (ok, out) = run(&["umount", dir.path().to_str().unwrap()]);
    assert!(!ok && out.contains("not a mailfs mount"), "{out}");
    // An account nobody listens on: refused promptly, with the account named.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let config = dir.path().join("fs.toml");
    fs::write(
        &config,
        format!(
            "[fs]\ntimeout_ms = 2000\n[encryption]\ncipher = \"none\"\n[cache]\ndir = {:?}\n[[group]]\n[[group.account]]\nhost = \"127.0.0.1\"\nport = {port}\ntls = \"none\"\nuser = \"nobody\"\npassword = \"x\"\n",
            dir.path().join("cache")
        ),
    )
    .unwrap();
    let started = Instant::now();
    let (ok, out) = run(&["--config", config.to_str().unwrap(), "mkfs"]);
    assert!(!ok && out.contains("nobody@127.0.0.1"), "{out}");
    assert!(started.elapsed() < Duration::from_secs(20));
    let (ok, out) = run(&[
        "--config",
        config.to_str().unwrap(),
        "mount",
        "/nonexistent-dir",
    ]);
    assert!(!ok && out.contains("not a directory"), "{out}");
    fs::write(&config, "[fs]\nblock_size = 1000\n").unwrap();
    let (ok, out) = run(&["--config", config.to_str().unwrap(), "gc"]);
    assert!(!ok && out.contains("block_size"), "{out}");
}
