//! A private PostgreSQL instance on loopback, for the directory's tests.
//!
//! Everything lives under one temporary directory owned by the `postgres` OS user (initdb
//! refuses to run as root, so as root every PostgreSQL binary runs through
//! `runuser -u postgres --`):
//!
//! ```text
//! <tmp>/data/        the cluster (initdb: trust authentication, user postgres)
//! <tmp>/run/         unix_socket_directories (nothing in /var/run/postgresql)
//! <tmp>/postgres.log the server's log (pg_ctl -l)
//! ```
//!
//! The server listens on `127.0.0.1:<port>` only (or, started by [`crate::Netns`], on its
//! database host's address inside that namespace, every PostgreSQL binary run through
//! `ip netns exec`), with `fsync=off` (tests do not survive
//! power loss anyway). Not `synchronous_commit=off`: commits must reach the kernel before
//! they return, or [`Postgres::stop_immediate`] would lose the last ones. [`Postgres::stop_immediate`] and [`Postgres::start`] stop it like a
//! crash and bring it back on the same port and data; dropping the handle stops it.

use std::io;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Where Debian's `postgresql` package puts the binaries, newest first.
const BIN_DIRS: &[&str] = &[
    "/usr/lib/postgresql/17/bin",
    "/usr/lib/postgresql/16/bin",
    "/usr/lib/postgresql/15/bin",
];

/// A private PostgreSQL server on `127.0.0.1:<port>`.
pub struct Postgres {
    temp: tempfile::TempDir,
    bin: PathBuf,
    listen: Ipv4Addr,
    port: u16,
    /// The network namespace it runs in ([`crate::Netns`]); None: the machine's.
    netns: Option<String>,
    running: bool,
}

impl Postgres {
    /// The directory holding `initdb` and `pg_ctl`, if PostgreSQL is installed.
    pub fn binaries() -> Option<PathBuf> {
        BIN_DIRS
            .iter()
            .map(PathBuf::from)
            .find(|dir| dir.join("initdb").is_file() && dir.join("pg_ctl").is_file())
    }

    /// Creates a cluster in a new temporary directory and starts it on a free loopback port.
    /// `ErrorKind::NotFound` when PostgreSQL is not installed (tests may skip on it).
    pub fn new() -> io::Result<Postgres> {
        Postgres::create(Ipv4Addr::LOCALHOST, crate::free_port()?, None)
    }

    /// [`Postgres::new`] inside network namespace `netns`, listening on `listen:port` there.
    pub(crate) fn new_in_netns(netns: &str, listen: Ipv4Addr, port: u16) -> io::Result<Postgres> {
        Postgres::create(listen, port, Some(netns.to_owned()))
    }

    fn create(listen: Ipv4Addr, port: u16, netns: Option<String>) -> io::Result<Postgres> {
        let bin = Postgres::binaries().ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                "PostgreSQL binaries not found in /usr/lib/postgresql/*/bin (apt-get install postgresql)",
            )
        })?;
        let temp = tempfile::Builder::new().prefix("mailstow-pg").tempdir()?;
        if rustix::process::geteuid().is_root() {
            let (uid, gid) = postgres_ids()?;
            std::os::unix::fs::chown(temp.path(), Some(uid), Some(gid))?;
        }
        let mut pg = Postgres {
            temp,
            bin,
            listen,
            port,
            netns,
            running: false,
        };
        std::fs::create_dir(pg.run_dir())?;
        if rustix::process::geteuid().is_root() {
            let (uid, gid) = postgres_ids()?;
            std::os::unix::fs::chown(pg.run_dir(), Some(uid), Some(gid))?;
        }
        let data = pg.data_dir();
        pg.run(
            "initdb",
            &[
                "-D".as_ref(),
                data.as_os_str(),
                "-U".as_ref(),
                "postgres".as_ref(),
                "--auth=trust".as_ref(),
                "-E".as_ref(),
                "UTF8".as_ref(),
                "--no-sync".as_ref(),
            ],
        )?;
        if pg.netns.is_some() {
            // initdb trusts loopback only; the hosts of the namespace's /24 are the test's.
            let [a, b, c, _] = listen.octets();
            let mut hba = std::fs::OpenOptions::new()
                .append(true)
                .open(data.join("pg_hba.conf"))?;
            std::io::Write::write_all(
                &mut hba,
                format!("host all all {a}.{b}.{c}.0/24 trust\n").as_bytes(),
            )?;
        }
        pg.start()?;
        Ok(pg)
    }

    /// `postgres://postgres@127.0.0.1:<port>/postgres` (its namespace address in a
    /// [`crate::Netns`]).
    pub fn url(&self) -> String {
        format!("postgres://postgres@{}:{}/postgres", self.listen, self.port)
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn dir(&self) -> &Path {
        self.temp.path()
    }

    /// Starts the server (again) on the same port and data; waits until it accepts
    /// connections.
    pub fn start(&mut self) -> io::Result<()> {
        if self.running {
            return Ok(());
        }
        let data = self.data_dir();
        let log = self.temp.path().join("postgres.log");
        let options = format!(
            "-p {} -c listen_addresses={} -c unix_socket_directories={} -c fsync=off",
            self.port,
            self.listen,
            self.run_dir().display()
        );
        self.run(
            "pg_ctl",
            &[
                "start".as_ref(),
                "-w".as_ref(),
                "-t".as_ref(),
                "60".as_ref(),
                "-D".as_ref(),
                data.as_os_str(),
                "-l".as_ref(),
                log.as_os_str(),
                "-o".as_ref(),
                options.as_ref(),
            ],
        )?;
        self.running = true;
        Ok(())
    }

    /// Stops the server at once, like a crash (`pg_ctl stop -m immediate`): clients see
    /// their connections closed, new ones are refused.
    pub fn stop_immediate(&mut self) {
        if !self.running {
            return;
        }
        let data = self.data_dir();
        let _ = self.run(
            "pg_ctl",
            &[
                "stop".as_ref(),
                "-w".as_ref(),
                "-m".as_ref(),
                "immediate".as_ref(),
                "-D".as_ref(),
                data.as_os_str(),
            ],
        );
        self.running = false;
    }

    /// The end of the server's log, for a failing test's message.
    pub fn log_tail(&self) -> String {
        let log =
            std::fs::read_to_string(self.temp.path().join("postgres.log")).unwrap_or_default();
        let start = log.len().saturating_sub(4000);
        log.get(start..).unwrap_or_default().to_owned()
    }

    fn data_dir(&self) -> PathBuf {
        self.temp.path().join("data")
    }

    fn run_dir(&self) -> PathBuf {
        self.temp.path().join("run")
    }

    /// Runs one PostgreSQL binary, as `postgres` when we are root.
    fn run(&self, program: &str, args: &[&std::ffi::OsStr]) -> io::Result<Output> {
        let path = self.bin.join(program);
        let mut command = match &self.netns {
            Some(netns) => {
                let mut c = Command::new("ip");
                c.args(["netns", "exec", netns]);
                c
            }
            None => Command::new("env"),
        };
        if rustix::process::geteuid().is_root() {
            command.args(["runuser", "-u", "postgres", "--"]);
        }
        command.arg(&path);
        command.args(args).current_dir(self.temp.path());
        let output = command.output()?;
        if !output.status.success() {
            return Err(io::Error::other(format!(
                "{program} failed ({}): {} {}",
                output.status,
                String::from_utf8_lossy(&output.stderr).trim(),
                self.log_tail().lines().last().unwrap_or_default()
            )));
        }
        Ok(output)
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        self.stop_immediate();
    }
}

/// The uid and gid of the `postgres` OS user (made by Debian's package).
fn postgres_ids() -> io::Result<(u32, u32)> {
    let id = |flag: &str| -> io::Result<u32> {
        let out = Command::new("id").arg(flag).arg("postgres").output()?;
        if !out.status.success() {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                "no postgres OS user (apt-get install postgresql)",
            ));
        }
        String::from_utf8_lossy(&out.stdout)
            .trim()
            .parse()
            .map_err(io::Error::other)
    };
    Ok((id("-u")?, id("-g")?))
}
