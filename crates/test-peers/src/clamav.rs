//! A private ClamAV (Debian's `clamav-daemon`) behind its milter (Debian's `clamav-milter`),
//! on loopback, for the milter tests of `crates/filter`.
//!
//! ```text
//! <tmp>/db/test.ndb         the only signature: the EICAR test string (nothing downloaded)
//! <tmp>/clamd.conf          clamd: LocalSocket <tmp>/clamd.sock, foreground
//! <tmp>/clamav-milter.conf  the milter: inet:<port>@127.0.0.1, OnInfected Reject,
//!                           AddHeader Replace, foreground
//! <tmp>/clamd.log <tmp>/clamav-milter.log
//! ```
//!
//! The signature is an extended body signature (`.ndb`: name, any file type, any offset, the
//! string in hex), so it matches the test string wherever clamd's mail parser finds it: in
//! the text of a message or in a decoded attachment. [`ClamAv::start`] checks it before it
//! returns, by streaming the string to clamd (`INSTREAM`) and reading `FOUND`.

use std::io::{self, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::daemon::{Daemon, milter_answers};

/// How long [`ClamAv::start`] waits for clamd, then for the milter.
const START_TIMEOUT: Duration = Duration::from_secs(30);
/// Both get SIGKILL when stopped: on SIGTERM clamav-milter 1.4.6 takes about 4.4 s to exit
/// and clamd about 2 s (measured here), and they keep nothing a test needs.
const STOP_GRACE: Duration = Duration::ZERO;
const CLAMD: &str = "/usr/sbin/clamd";
const CLAMAV_MILTER: &str = "/usr/sbin/clamav-milter";
/// The name of our signature for the test string; ClamAV reports it with `.UNOFFICIAL`
/// appended, as it does for every signature outside its own databases.
pub const EICAR_SIGNATURE: &str = "Mailstow.Test.EICAR";
/// The EICAR anti-virus test file (68 bytes): harmless, and flagged by design.
pub const EICAR: &str = r"X5O!P%@AP[4\PZX54(P^)7CC)7}$EICAR-STANDARD-ANTIVIRUS-TEST-FILE!$H+H*";

/// clamd and clamav-milter. Dropping it stops both.
pub struct ClamAv {
    // The milter stops before clamd, and both before the directory goes.
    milter: Daemon,
    clamd: Daemon,
    dir: Option<tempfile::TempDir>,
    root: PathBuf,
    milter_port: u16,
}

impl ClamAv {
    /// Starts clamd with the EICAR signature alone, checks that it flags the test string,
    /// then starts clamav-milter on a free loopback port; returns once the milter answers a
    /// negotiation. An error names the apt-get line when a package is missing, or carries the
    /// logs.
    pub fn start() -> io::Result<ClamAv> {
        for (program, package) in [(CLAMD, "clamav-daemon"), (CLAMAV_MILTER, "clamav-milter")] {
            if !Path::new(program).is_file() {
                return Err(crate::daemon::missing(program, package));
            }
        }
        let dir = tempfile::Builder::new()
            .prefix("test-peers-clamav-")
            .tempdir()?;
        let root = dir.path().to_path_buf();
        let milter_port = crate::free_port()?;
        write_config(&root, milter_port)?;

        let socket = root.join("clamd.sock");
        let clamd_conf = root.join("clamd.conf").display().to_string();
        let mut clamd = Daemon::spawn(
            "clamd",
            CLAMD,
            "clamav-daemon",
            &["--config-file", &clamd_conf],
            &root,
        )?
        .stop_grace(STOP_GRACE);
        let clamd_log = root.join("clamd.log");
        clamd.wait_until(START_TIMEOUT, &clamd_log, || {
            clamd_ask(&socket, b"zPING\0").is_some_and(|answer| answer == b"PONG\0")
        })?;
        let verdict = clamd_instream(&socket, EICAR.as_bytes());
        let expected = format!("stream: {EICAR_SIGNATURE}.UNOFFICIAL FOUND");
        if !verdict.as_deref().is_some_and(|v| v.starts_with(&expected)) {
            return Err(io::Error::other(format!(
                "clamd did not flag the EICAR string with its signature: {verdict:?}\n{}",
                clamd.report(&clamd_log)
            )));
        }

        let milter_conf = root.join("clamav-milter.conf").display().to_string();
        let mut milter = Daemon::spawn(
            "clamav-milter",
            CLAMAV_MILTER,
            "clamav-milter",
            &["--config-file", &milter_conf],
            &root,
        )?
        .stop_grace(STOP_GRACE);
        let milter_log = root.join("clamav-milter.log");
        milter.wait_until(START_TIMEOUT, &milter_log, || milter_answers(milter_port))?;
        Ok(ClamAv {
            milter,
            clamd,
            dir: Some(dir),
            root,
            milter_port,
        })
    }

    /// The milter, `127.0.0.1:<port>`.
    pub fn milter_address(&self) -> String {
        format!("127.0.0.1:{}", self.milter_port)
    }

    /// The temporary directory: configuration, database, logs.
    pub fn dir(&self) -> &Path {
        &self.root
    }

    /// The end of both logs, for a failing test's message.
    pub fn log_tail(&self) -> String {
        format!(
            "--- clamav-milter.log ---\n{}\n--- clamd.log ---\n{}",
            crate::log_tail(&self.root.join("clamav-milter.log"), 30),
            crate::log_tail(&self.root.join("clamd.log"), 30)
        )
    }
}

impl Drop for ClamAv {
    fn drop(&mut self) {
        self.milter.stop();
        self.clamd.stop();
        if let Some(dir) = self.dir.take() {
            if std::env::var_os("TEST_PEERS_KEEP").is_some() {
                eprintln!("test-peers: kept {}", dir.keep().display());
            } else {
                let _ = dir.close();
            }
        }
    }
}

/// One clamd command (`z` form: NUL-terminated) and its NUL-terminated answer.
fn clamd_ask(socket: &Path, command: &[u8]) -> Option<Vec<u8>> {
    let mut stream = UnixStream::connect(socket).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    stream.write_all(command).ok()?;
    read_answer(&mut stream)
}

/// clamd's verdict on `bytes` (`zINSTREAM`: 4-byte big-endian length and data, then a zero
/// length).
fn clamd_instream(socket: &Path, bytes: &[u8]) -> Option<String> {
    let mut stream = UnixStream::connect(socket).ok()?;
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .ok()?;
    let length = u32::try_from(bytes.len()).ok()?;
    stream.write_all(b"zINSTREAM\0").ok()?;
    stream.write_all(&length.to_be_bytes()).ok()?;
    stream.write_all(bytes).ok()?;
    stream.write_all(&0u32.to_be_bytes()).ok()?;
    let answer = read_answer(&mut stream)?;
    Some(
        String::from_utf8_lossy(&answer)
            .trim_end_matches('\0')
            .to_string(),
    )
}

fn read_answer(stream: &mut UnixStream) -> Option<Vec<u8>> {
    let mut answer = Vec::new();
    let mut piece = [0u8; 256];
    while !answer.ends_with(b"\0") && answer.len() < 4096 {
        let count = stream.read(&mut piece).ok()?;
        if count == 0 {
            break;
        }
        answer.extend_from_slice(&piece[..count]);
    }
    Some(answer)
}

fn write_config(root: &Path, milter_port: u16) -> io::Result<()> {
    let db = root.join("db");
    std::fs::create_dir(&db)?;
    let hex: String = EICAR.bytes().map(|b| format!("{b:02x}")).collect();
    std::fs::write(
        db.join("test.ndb"),
        format!("{EICAR_SIGNATURE}:0:*:{hex}\n"),
    )?;
    let root_text = root.display();
    std::fs::write(
        root.join("clamd.conf"),
        format!(
            "# Generated by test-peers: a private clamd.
LocalSocket {root_text}/clamd.sock
Foreground yes
DatabaseDirectory {root_text}/db
TemporaryDirectory {root_text}
PidFile {root_text}/clamd.pid
LogFile {root_text}/clamd.log
LogTime yes
LogVerbose yes
Bytecode no
ScanMail yes
"
        ),
    )?;
    std::fs::write(
        root.join("clamav-milter.conf"),
        format!(
            "# Generated by test-peers: a private clamav-milter.
MilterSocket inet:{milter_port}@127.0.0.1
ClamdSocket unix:{root_text}/clamd.sock
Foreground yes
PidFile {root_text}/clamav-milter.pid
TemporaryDirectory {root_text}
OnClean Accept
OnInfected Reject
OnFail Defer
AddHeader Replace
ReadTimeout 30
LogFile {root_text}/clamav-milter.log
LogTime yes
LogVerbose yes
LogInfected Full
LogClean Basic
"
        ),
    )?;
    Ok(())
}
