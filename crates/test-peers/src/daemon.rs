//! A foreground daemon from a Debian package, run for a test: spawned as the leader of its own
//! process group, its output in files, stopped (the whole group) on drop.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long `Daemon::stop` waits after SIGTERM before SIGKILL, unless told otherwise.
const STOP_GRACE: Duration = Duration::from_secs(5);

/// A running daemon.
pub(crate) struct Daemon {
    name: &'static str,
    child: Option<Child>,
    /// Where its stdout and stderr go.
    output: PathBuf,
    /// How long `stop` waits after SIGTERM; zero: SIGKILL at once.
    stop_grace: Duration,
}

impl Daemon {
    /// Spawns `program` with `args`, output to `<dir>/<name>.out`. `package` names the Debian
    /// package for the error when the program is missing.
    pub(crate) fn spawn(
        name: &'static str,
        program: &str,
        package: &str,
        args: &[&str],
        dir: &Path,
    ) -> io::Result<Daemon> {
        Daemon::spawn_with_env(name, program, package, args, &[], dir)
    }

    /// [`Daemon::spawn`] with `environment` added to the inherited environment.
    pub(crate) fn spawn_with_env(
        name: &'static str,
        program: &str,
        package: &str,
        args: &[&str],
        environment: &[(&str, String)],
        dir: &Path,
    ) -> io::Result<Daemon> {
        if !Path::new(program).is_file() {
            return Err(missing(program, package));
        }
        let output = dir.join(format!("{name}.out"));
        let file = std::fs::File::create(&output)?;
        let child = Command::new(program)
            .args(args)
            .envs(environment.iter().map(|(name, value)| (name, value)))
            // Own process group, so that stop() ends its workers too.
            .process_group(0)
            .current_dir(dir)
            .stdin(Stdio::null())
            .stdout(file.try_clone()?)
            .stderr(file)
            .spawn()
            .map_err(|e| io::Error::new(e.kind(), format!("spawning {program}: {e}")))?;
        Ok(Daemon {
            name,
            child: Some(child),
            output,
            stop_grace: STOP_GRACE,
        })
    }

    /// Sets how long `stop` waits after SIGTERM before SIGKILL; zero sends SIGKILL at once,
    /// for a daemon that keeps nothing a test needs and is slow to exit.
    pub(crate) fn stop_grace(mut self, grace: Duration) -> Daemon {
        self.stop_grace = grace;
        self
    }

    /// Waits until `ready` holds, checking every 50 ms; an error with the daemon's output and
    /// `log` when it exits first or `timeout` passes.
    pub(crate) fn wait_until(
        &mut self,
        timeout: Duration,
        log: &Path,
        mut ready: impl FnMut() -> bool,
    ) -> io::Result<()> {
        let deadline = Instant::now() + timeout;
        loop {
            if ready() {
                return Ok(());
            }
            if let Some(child) = self.child.as_mut()
                && let Ok(Some(status)) = child.try_wait()
            {
                self.child = None;
                return Err(io::Error::other(format!(
                    "{} exited with {status} before it was ready\n{}",
                    self.name,
                    self.report(log)
                )));
            }
            if Instant::now() >= deadline {
                let report = self.report(log);
                self.stop();
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("{} was not ready within {timeout:?}\n{report}", self.name),
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Its output and the end of its log, for an error message.
    pub(crate) fn report(&self, log: &Path) -> String {
        format!(
            "--- {} output ---\n{}\n--- {} ---\n{}",
            self.name,
            crate::log_tail(&self.output, 30),
            log.display(),
            crate::log_tail(log, 40)
        )
    }

    /// SIGTERM to the process group, SIGKILL after the grace (5 s unless set).
    pub(crate) fn stop(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        let pid = rustix::process::Pid::from_child(&child);
        let signal = if self.stop_grace.is_zero() {
            rustix::process::Signal::KILL
        } else {
            rustix::process::Signal::TERM
        };
        let _ = rustix::process::kill_process_group(pid, signal);
        let deadline = Instant::now() + self.stop_grace;
        loop {
            match child.try_wait() {
                Ok(Some(_)) | Err(_) => break,
                Ok(None) if Instant::now() >= deadline => {
                    let _ = child.kill();
                    let _ = child.wait();
                    break;
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            }
        }
        // Workers that outlived their master.
        let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The error for a program that is not installed: the apt-get line to run.
pub(crate) fn missing(program: &str, packages: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::NotFound,
        format!(
            "{program} is not installed: apt-get install {packages} (scripts/test.sh installs it)"
        ),
    )
}

/// Whether a milter listens on the port: it answers an `SMFIC_OPTNEG` (version 6, every
/// action, every protocol flag Postfix offers; libmilter closes the connection when the
/// actions offered lack one the filter needs) with an `SMFIC_OPTNEG` packet.
pub(crate) fn milter_answers(port: u16) -> bool {
    let optneg = [
        0, 0, 0, 13, b'O', 0, 0, 0, 6, 0, 0, 0x01, 0xff, 0, 0x1f, 0xf7, 0xff,
    ];
    let Some(mut stream) = connect(port) else {
        return false;
    };
    if stream.write_all(&optneg).is_err() {
        return false;
    }
    let mut header = [0u8; 5];
    stream.read_exact(&mut header).is_ok() && header[4] == b'O'
}

/// A connection to `127.0.0.1:port` with one-second timeouts.
pub(crate) fn connect(port: u16) -> Option<TcpStream> {
    let address = SocketAddr::from(([127, 0, 0, 1], port));
    let stream = TcpStream::connect_timeout(&address, Duration::from_secs(1)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(1))).ok()?;
    stream
        .set_write_timeout(Some(Duration::from_secs(1)))
        .ok()?;
    Some(stream)
}

/// One request and its answer (read to the end), for a readiness check.
pub(crate) fn ask(mut stream: impl Read + Write, request: &[u8]) -> Option<Vec<u8>> {
    stream.write_all(request).ok()?;
    let mut answer = Vec::new();
    let mut piece = [0u8; 1024];
    while answer.len() < 64 * 1024 {
        match stream.read(&mut piece) {
            Ok(0) => break,
            Ok(count) => answer.extend_from_slice(&piece[..count]),
            Err(_) if !answer.is_empty() => break,
            Err(_) => return None,
        }
    }
    Some(answer)
}
