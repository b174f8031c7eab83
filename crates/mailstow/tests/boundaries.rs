//! What the shipped `mailstow` binary may link, checked on the dependency graph itself
//! (`cargo tree`), so a test fixture or a benchmark cannot slip back in through some crate's
//! `[dependencies]`.

use std::process::Command;

/// Test fixtures and measuring tools: dev-dependencies and the `mailstow-bench` binary's, never
/// the server's.
const NOT_SHIPPED: &[&str] = &["test-peers", "bench", "sim-validate", "mailstow-bench"];

#[test]
fn the_shipped_binary_links_no_test_or_bench_crate() {
    let manifest = concat!(env!("CARGO_MANIFEST_DIR"), "/../../Cargo.toml");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let out = Command::new(cargo)
        .args(["tree", "--locked", "--manifest-path", manifest])
        .args(["-p", "mailstow", "-e", "normal", "--prefix", "none"])
        .output()
        .expect("run cargo tree");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "cargo tree failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    // One package per line: `name vX.Y.Z (source)`, a repeat marked `(*)`.
    let packages: Vec<&str> = stdout
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .collect();
    assert!(packages.contains(&"mailstow"), "{stdout}");
    assert!(packages.contains(&"server"), "{stdout}");
    for name in NOT_SHIPPED {
        assert!(
            !packages.contains(name),
            "the shipped mailstow links {name}: `cargo tree -p mailstow -e normal -i {name}` shows through what"
        );
    }
}
