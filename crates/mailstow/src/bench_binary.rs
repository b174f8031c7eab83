//! `mailstow bench ...` and `mailstow sim validate ...` run the separate `mailstow-bench`
//! binary (crates/mailstow-bench), the way git and cargo run their external subcommands: the
//! benchmarks and the simulator's validation link test fixtures (a private Dovecot) and
//! load generators that have no place in the shipped server, so `mailstow` does not link
//! them (crates/mailstow/tests/boundaries.rs checks that).
//!
//! The binary is `$MAILSTOW_BENCH` when set, else `mailstow-bench` next to the running
//! `mailstow` (where `cargo build` and `cargo install` put both), else the first on `PATH`.
//! It replaces this process (exec), so its arguments are passed unchanged, standard input,
//! output and error are the same, and its exit status is the command's.

use std::ffi::{OsStr, OsString};
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The binary's file name.
const NAME: &str = "mailstow-bench";
/// Overrides where the binary is.
const ENV_OVERRIDE: &str = "MAILSTOW_BENCH";
/// Tells the binary which `mailstow` ran it (`sim validate` mounts the mail file system with
/// it).
const ENV_MAILSTOW: &str = "MAILSTOW_BIN";

/// Runs `mailstow-bench PREFIX... ARGS...` in place of this process. Returns only if it could
/// not be started, with an error that says how to get it.
pub(crate) fn exec(prefix: &[&str], args: &[OsString]) -> anyhow::Error {
    let command_name = format!("mailstow {}", prefix.join(" "));
    let Some(binary) = locate() else {
        return anyhow::anyhow!(
            "`{command_name}` is run by the separate {NAME} binary, not found next to mailstow \
             nor on PATH: build it with `cargo build --release -p {NAME}` (it lands next to \
             mailstow), install it with `cargo install --locked --path crates/{NAME}`, or \
             set {ENV_OVERRIDE} to its path"
        );
    };
    let mut command = Command::new(&binary);
    command.args(prefix).args(args);
    if let Ok(me) = std::env::current_exe() {
        command.env(ENV_MAILSTOW, me);
    }
    // exec returns only on failure.
    let error = command.exec();
    anyhow::anyhow!("`{command_name}`: cannot run {}: {error}", binary.display())
}

/// Where the binary is: the override, else beside this executable, else on PATH.
fn locate() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os(ENV_OVERRIDE).filter(|p| !p.is_empty()) {
        // Named explicitly: used as given, so a wrong path is reported, not replaced.
        return Some(PathBuf::from(path));
    }
    let beside = std::env::current_exe()
        .ok()
        .and_then(|me| me.parent().map(|dir| dir.join(NAME)));
    beside
        .filter(|p| is_executable(p))
        .or_else(|| on_path(OsStr::new(NAME)))
}

fn on_path(name: &OsStr) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|p| is_executable(p))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}
