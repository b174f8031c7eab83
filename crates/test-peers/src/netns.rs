//! Network namespaces of a test's own: hosts on a private switch, links cut with iptables.
//!
//! A [`Netns`] makes, for one test, a namespace per host plus a switch namespace holding a
//! bridge, each host joined to the bridge by a veth pair:
//!
//! ```text
//!   ms<pid>x<k>n1  eth0 10.a.b.1 ─┐                     ┌─ eth0 10.a.b.2  ms<pid>x<k>n2
//!                                 └ h1 ─ br0 (ms<pid>x<k>sw) ─ h2 ┘
//!   ms<pid>x<k>db  eth0 10.a.b.250 (PostgreSQL, when started) ─ hdb ┘
//! ```
//!
//! - **Names**: `ms<pid>x<k>` then `n<i>` (hosts, from 1), `sw` (the switch) or `db` (the
//!   database), `k` counting the harnesses this process made, so parallel tests of one binary
//!   and of several binaries never share a name. Interfaces are created inside their
//!   namespaces (`ip -n`), so their short names (`eth0`, `h1`, `br0`) never meet another
//!   test's.
//! - **Addresses**: `10.a.b.0/24`, `a.b` derived from the pid and `k`. Each harness has its own
//!   bridge in its own namespace, so nothing it sends can reach another harness, the machine's
//!   own interfaces or beyond, whatever the addresses; distinct subnets only keep logs and
//!   error messages unambiguous.
//! - **Links**: [`Netns::cut`] adds iptables `DROP` rules in both hosts' namespaces, both
//!   directions (`INPUT -s peer`, `OUTPUT -d peer`); [`Netns::heal`] deletes exactly those.
//!   [`Netns::isolate`] drops everything on a host's `eth0` (loopback still works);
//!   [`Netns::rejoin`] undoes it. Rules live in the namespace, so they go with it.
//! - **PostgreSQL**: [`Netns::start_postgres`] runs a private [`Postgres`] in a `db` namespace
//!   of its own, listening on `10.a.b.250:5432`: a host like the others, so a test may cut a
//!   node from its database.
//! - **Cleanup**: dropping the harness stops its PostgreSQL and deletes every namespace it
//!   made (their veths and iptables rules go with them). The processes a test started inside
//!   (through [`Netns::command`]) are the test's to stop first: a process keeps its namespace
//!   alive after the name is gone. [`Netns::new`] first deletes the namespaces of this prefix
//!   whose pid no longer runs (a test killed before its drop).
//!
//! Needs root, `ip` (iproute2) and `iptables` (Debian's `iptables`, nf_tables backend).

use std::collections::BTreeSet;
use std::io;
use std::net::Ipv4Addr;
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU32, Ordering};

use crate::Postgres;

/// Hosts one harness makes at most: their addresses are `10.a.b.1` up to this.
pub const HOSTS_MAX: usize = 200;

/// The database host's last address byte (above [`HOSTS_MAX`]).
const DB_ADDRESS_BYTE: u8 = 250;

/// Every namespace a harness makes starts with this, then the pid.
const PREFIX: &str = "ms";

/// The port PostgreSQL listens on in its own namespace (nothing else listens there).
const POSTGRES_PORT: u16 = 5432;

/// Harnesses made by this process so far.
static MADE: AtomicU32 = AtomicU32::new(0);

/// Hosts in network namespaces of a test's own (see the module's documentation).
pub struct Netns {
    /// `ms<pid>x<k>`: every namespace's name starts with it.
    tag: String,
    /// The first three bytes of every address: `10.a.b`.
    subnet: [u8; 3],
    /// Namespace names, index = host (the database last, once started).
    hosts: Vec<String>,
    switch: String,
    /// Created namespaces, deleted on drop (also those of a half-built harness).
    made: Vec<String>,
    /// `(a, b)` with `a < b`: links cut now.
    cuts: BTreeSet<(usize, usize)>,
    isolated: BTreeSet<usize>,
    postgres: Option<(usize, Postgres)>,
}

impl Netns {
    /// Makes `hosts` host namespaces (`1..=HOSTS_MAX`) joined by a bridge, each with its
    /// address on `eth0` and loopback up. Deletes stale namespaces of dead test processes
    /// first.
    pub fn new(hosts: usize) -> io::Result<Netns> {
        if !(1..=HOSTS_MAX).contains(&hosts) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("Netns: 1..={HOSTS_MAX} hosts, not {hosts}"),
            ));
        }
        if !rustix::process::geteuid().is_root() {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                "Netns needs root (network namespaces, veths, iptables)",
            ));
        }
        sweep_stale()?;
        let pid = std::process::id();
        let k = MADE.fetch_add(1, Ordering::Relaxed);
        let tag = format!("{PREFIX}{pid}x{k}");
        // Spread over 10.100.0.0 to 10.199.255.0: pid and counter, 24 bits of them.
        let n = (u64::from(pid) << 4) + u64::from(k);
        let subnet = [10, 100 + ((n >> 8) % 100) as u8, (n % 256) as u8];
        let mut net = Netns {
            switch: format!("{tag}sw"),
            tag,
            subnet,
            hosts: Vec::new(),
            made: Vec::new(),
            cuts: BTreeSet::new(),
            isolated: BTreeSet::new(),
            postgres: None,
        };
        let switch = net.switch.clone();
        net.add_namespace(&switch)?;
        ip(&["-n", &switch, "link", "add", "br0", "type", "bridge"])?;
        ip(&["-n", &switch, "link", "set", "br0", "up"])?;
        for i in 0..hosts {
            let name = format!("{}n{}", net.tag, i + 1);
            net.add_host(&name, &format!("h{}", i + 1), (i + 1) as u8)?;
        }
        Ok(net)
    }

    /// Hosts made (the database's included once started).
    pub fn hosts(&self) -> usize {
        self.hosts.len()
    }

    /// Host `host`'s namespace, for `ip netns exec`.
    pub fn name(&self, host: usize) -> &str {
        &self.hosts[host]
    }

    /// Host `host`'s address on the switch.
    pub fn addr(&self, host: usize) -> Ipv4Addr {
        let [a, b, c] = self.subnet;
        let last = match &self.postgres {
            Some((db, _)) if *db == host => DB_ADDRESS_BYTE,
            _ => (host + 1) as u8,
        };
        Ipv4Addr::new(a, b, c, last)
    }

    /// `ip netns exec <host's namespace> <program>`: add arguments and run it.
    pub fn command(&self, host: usize, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut command = Command::new("ip");
        command
            .args(["netns", "exec", &self.hosts[host]])
            .arg(program);
        command
    }

    /// Runs `f` on a thread of its own inside host `host`'s network namespace (setns(2)): a
    /// socket it makes (a listener, a client connection) lives in that namespace and keeps
    /// working from any thread afterwards. The test's own process stays where it was.
    pub fn within<T: Send>(&self, host: usize, f: impl FnOnce() -> T + Send) -> io::Result<T> {
        self.check(host)?;
        let link = std::fs::File::open(format!("/run/netns/{}", self.hosts[host]))?;
        std::thread::scope(|scope| {
            scope
                .spawn(|| {
                    use std::os::fd::AsFd as _;
                    rustix::thread::move_into_link_name_space(
                        link.as_fd(),
                        Some(rustix::thread::LinkNameSpaceType::Network),
                    )?;
                    Ok(f())
                })
                .join()
                .unwrap_or_else(|_| Err(io::Error::other("Netns::within: the closure panicked")))
        })
    }

    /// Starts a private PostgreSQL in a `db` namespace of its own on the switch, listening
    /// on its address, port 5432; returns the new host's index ([`Netns::addr`],
    /// [`Netns::cut`] take it like any host's). Once per harness.
    pub fn start_postgres(&mut self) -> io::Result<usize> {
        if self.postgres.is_some() {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                "Netns: PostgreSQL is already started",
            ));
        }
        let name = format!("{}db", self.tag);
        self.add_host(&name, "hdb", DB_ADDRESS_BYTE)?;
        let host = self.hosts.len() - 1;
        let [a, b, c] = self.subnet;
        let listen = Ipv4Addr::new(a, b, c, DB_ADDRESS_BYTE);
        let pg = Postgres::new_in_netns(&name, listen, POSTGRES_PORT)?;
        self.postgres = Some((host, pg));
        Ok(host)
    }

    /// The PostgreSQL [`Netns::start_postgres`] started (to stop and start it again).
    pub fn postgres(&mut self) -> Option<&mut Postgres> {
        self.postgres.as_mut().map(|(_, pg)| pg)
    }

    /// `postgres://postgres@10.a.b.250:5432/postgres`, once started.
    pub fn postgres_url(&self) -> Option<String> {
        self.postgres.as_ref().map(|(_, pg)| pg.url())
    }

    /// Cuts the link between hosts `a` and `b`, both directions: nothing either sends the
    /// other arrives (dropped, not refused: like a pulled cable, connections hang).
    pub fn cut(&mut self, a: usize, b: usize) -> io::Result<()> {
        let pair = self.pair(a, b)?;
        if self.cuts.insert(pair) {
            self.link_rules("-A", a, b)?;
        }
        Ok(())
    }

    /// Undoes [`Netns::cut`] of `a` and `b` (nothing if they were not cut).
    pub fn heal(&mut self, a: usize, b: usize) -> io::Result<()> {
        let pair = self.pair(a, b)?;
        if self.cuts.remove(&pair) {
            self.link_rules("-D", a, b)?;
        }
        Ok(())
    }

    /// Cuts host `a` from every other host (its own loopback still works).
    pub fn isolate(&mut self, a: usize) -> io::Result<()> {
        self.check(a)?;
        if self.isolated.insert(a) {
            self.isolation_rules("-A", a)?;
        }
        Ok(())
    }

    /// Undoes [`Netns::isolate`] of `a`.
    pub fn rejoin(&mut self, a: usize) -> io::Result<()> {
        self.check(a)?;
        if self.isolated.remove(&a) {
            self.isolation_rules("-D", a)?;
        }
        Ok(())
    }

    /// The iptables rules in host `host`'s namespace (`iptables -S`), for a failing test.
    pub fn rules(&self, host: usize) -> io::Result<String> {
        let out = run(self.command(host, "iptables").arg("-S"))?;
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    fn pair(&self, a: usize, b: usize) -> io::Result<(usize, usize)> {
        self.check(a)?;
        self.check(b)?;
        if a == b {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "Netns: a host has no link to itself",
            ));
        }
        Ok((a.min(b), a.max(b)))
    }

    fn check(&self, host: usize) -> io::Result<()> {
        if host >= self.hosts.len() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("Netns: no host {host} (of {})", self.hosts.len()),
            ));
        }
        Ok(())
    }

    /// Adds (`-A`) or deletes (`-D`) the four rules of a cut between `a` and `b`.
    fn link_rules(&self, op: &str, a: usize, b: usize) -> io::Result<()> {
        for (here, there) in [(a, b), (b, a)] {
            let peer = self.addr(there).to_string();
            for (chain, side) in [("INPUT", "-s"), ("OUTPUT", "-d")] {
                run(self
                    .command(here, "iptables")
                    .args(["-w", op, chain, side, &peer, "-j", "DROP"]))?;
            }
        }
        Ok(())
    }

    fn isolation_rules(&self, op: &str, a: usize) -> io::Result<()> {
        for (chain, side) in [("INPUT", "-i"), ("OUTPUT", "-o")] {
            run(self
                .command(a, "iptables")
                .args(["-w", op, chain, side, "eth0", "-j", "DROP"]))?;
        }
        Ok(())
    }

    fn add_namespace(&mut self, name: &str) -> io::Result<()> {
        ip(&["netns", "add", name])?;
        self.made.push(name.to_owned());
        ip(&["-n", name, "link", "set", "lo", "up"])?;
        Ok(())
    }

    /// A namespace `name` whose `eth0` (address `10.a.b.<last>`) is joined to the bridge
    /// through `port` in the switch's namespace.
    fn add_host(&mut self, name: &str, port: &str, last: u8) -> io::Result<()> {
        self.add_namespace(name)?;
        let switch = self.switch.clone();
        ip(&[
            "-n", &switch, "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns",
            name,
        ])?;
        ip(&["-n", &switch, "link", "set", port, "master", "br0", "up"])?;
        let [a, b, c] = self.subnet;
        let address = format!("{a}.{b}.{c}.{last}/24");
        ip(&["-n", name, "addr", "add", &address, "dev", "eth0"])?;
        ip(&["-n", name, "link", "set", "eth0", "up"])?;
        self.hosts.push(name.to_owned());
        Ok(())
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        // PostgreSQL first: `pg_ctl stop` runs inside its namespace, which must still exist.
        self.postgres = None;
        for name in self.made.iter().rev() {
            let _ = ip(&["netns", "del", name]);
        }
    }
}

/// Deletes namespaces named `ms<pid>x...` whose pid no longer runs: a test killed before
/// its harness was dropped. Never touches a running process's namespaces, nor any other name.
fn sweep_stale() -> io::Result<()> {
    let dir = match std::fs::read_dir("/run/netns") {
        Ok(dir) => dir,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    for entry in dir {
        let name = entry?.file_name().to_string_lossy().into_owned();
        let Some(pid) = stale_pid(&name) else {
            continue;
        };
        if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
            let _ = ip(&["netns", "del", &name]);
        }
    }
    Ok(())
}

/// The pid in a harness's namespace name (`ms<pid>x<k>...`), or None for any other name.
fn stale_pid(name: &str) -> Option<u32> {
    let rest = name.strip_prefix(PREFIX)?;
    let (pid, tail) = rest.split_once('x')?;
    let k_digits = tail.bytes().take_while(u8::is_ascii_digit).count();
    if k_digits == 0 || !pid.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    pid.parse().ok()
}

fn ip(args: &[&str]) -> io::Result<Output> {
    run(Command::new("ip").args(args))
}

/// Runs `command`; its stderr in the error when it fails.
fn run(command: &mut Command) -> io::Result<Output> {
    let output = command.output().map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("{:?}: {e}", command.get_program().to_string_lossy()),
        )
    })?;
    if !output.status.success() {
        let args: Vec<String> = command
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        return Err(io::Error::other(format!(
            "{} {} failed ({}): {}",
            command.get_program().to_string_lossy(),
            args.join(" "),
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        )));
    }
    Ok(output)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_this_harness_names_are_stale_candidates() {
        assert_eq!(stale_pid("ms1234x0n1"), Some(1234));
        assert_eq!(stale_pid("ms1234x12sw"), Some(1234));
        assert_eq!(stale_pid("ms1234x3db"), Some(1234));
        for other in [
            "ms",
            "msx0",
            "ms12ab x0",
            "ms12x",
            "ms12xn1",
            "mysql",
            "ns1234x0",
            "",
        ] {
            assert_eq!(stale_pid(other), None, "{other}");
        }
    }
}
