//! A private rspamd 3.4 (Debian's `rspamd`) with its own Redis (Debian's `redis-server`), on
//! loopback, for the milter and training tests of `crates/filter`.
//!
//! ```text
//! <tmp>/rspamd.conf         the top level: our workers only, Debian's /etc/rspamd for the rest
//! <tmp>/local/local.d/      LOCAL_CONFDIR: Redis, Bayes, milter_headers, modules turned off
//! <tmp>/local/override.d/   options (DNS, test patterns, TLDs), the workers' settings
//! <tmp>/tlds.dat            a short public suffix list
//! <tmp>/db/ <tmp>/run/      DBDIR and RUNDIR
//! <tmp>/log/rspamd.log      the log (level info); <tmp>/redis.log Redis's
//! ```
//!
//! What it takes to make rspamd quick and deterministic here:
//! * Only two workers: the proxy in milter mode whose default upstream has `self_scan = yes`
//!   (it scans itself, so no normal worker is needed) and the controller (training, `/ping`).
//! * `url_tld` points at a short list: compiling Debian's 9,628 public suffixes takes about
//!   12 s of the start on this machine; with the short list rspamd answers in about 1 s.
//! * Every module that looks something up on the network is off (RBLs, SPF, DKIM, DMARC,
//!   ASN, fuzzy, phishing, hfilter's host name checks, ...), and rspamd's resolver points at
//!   a loopback port where nothing listens, so no lookup leaves the machine or waits.
//! * `enable_test_patterns = true`: rspamd 3.4 ignores GTUBE without it.
//! * Bayes in our Redis, `min_learns = 1`, `min_tokens = 1`, no autolearn: a test sees its
//!   own training. Redis keeps nothing on disk.
//! * The controller password is known ([`Rspamd::password`]) and `secure_ip` names an address
//!   we never connect from, so the password is really checked.
//! * `milter_headers` adds `X-Spamd-Result` and `X-Rspamd-Server` (for local clients too),
//!   and the greylist action is off, so a clean message gets a decision that is not a
//!   temporary failure.

use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::daemon::{Daemon, ask, connect, milter_answers};

/// How long [`Rspamd::start`] waits for Redis, then for both rspamd ports.
const START_TIMEOUT: Duration = Duration::from_secs(30);
const RSPAMD: &str = "/usr/bin/rspamd";
const REDIS: &str = "/usr/bin/redis-server";
/// The controller's password.
const PASSWORD: &str = "test-peers-rspamd";

/// Modules turned off: those that look things up on the network, keep state in Redis, or
/// could make a verdict depend on time (greylisting, rate limits).
const MODULES_OFF: &[&str] = &[
    "antivirus",
    "arc",
    "asn",
    "bimi",
    "clickhouse",
    "dcc",
    "dkim",
    "dkim_signing",
    "dmarc",
    "elastic",
    "emails",
    "external_services",
    "fuzzy_check",
    "greylist",
    "hfilter",
    "history_redis",
    "maillist",
    "metadata_exporter",
    "metric_exporter",
    "multimap",
    "mx_check",
    "neural",
    "p0f",
    "phishing",
    "ratelimit",
    "rbl",
    "replies",
    "reputation",
    "rspamd_update",
    "spamassassin",
    "spf",
    "surbl",
    "url_redirector",
    "whitelist",
];

/// A private rspamd with its Redis. Dropping it stops both.
pub struct Rspamd {
    // Stopped before the directory goes (fields drop in order).
    rspamd: Daemon,
    redis: Daemon,
    dir: Option<tempfile::TempDir>,
    root: PathBuf,
    milter_port: u16,
    controller_port: u16,
}

impl Rspamd {
    /// Starts Redis and rspamd on free loopback ports; returns once Redis answers `PING`, the
    /// controller `/ping` and the proxy a milter negotiation. An error names the apt-get
    /// line when a package is missing, or carries the logs.
    pub fn start() -> io::Result<Rspamd> {
        for (program, packages) in [(RSPAMD, "rspamd"), (REDIS, "redis-server")] {
            if !Path::new(program).is_file() {
                return Err(crate::daemon::missing(program, packages));
            }
        }
        let dir = tempfile::Builder::new()
            .prefix("test-peers-rspamd-")
            .tempdir()?;
        let root = dir.path().to_path_buf();
        let redis_port = crate::free_port()?;
        let milter_port = crate::free_port()?;
        let controller_port = crate::free_port()?;
        let dead_dns_port = crate::free_port()?;
        write_config(
            &root,
            redis_port,
            milter_port,
            controller_port,
            dead_dns_port,
        )?;

        let redis = spawn_redis(&root, redis_port)?;
        let rspamd = spawn_rspamd(&root, milter_port, controller_port)?;
        Ok(Rspamd {
            rspamd,
            redis,
            dir: Some(dir),
            root,
            milter_port,
            controller_port,
        })
    }

    /// The milter (the proxy worker), `127.0.0.1:<port>`.
    pub fn milter_address(&self) -> String {
        format!("127.0.0.1:{}", self.milter_port)
    }

    /// The controller, `127.0.0.1:<port>`.
    pub fn controller_address(&self) -> String {
        format!("127.0.0.1:{}", self.controller_port)
    }

    /// The controller's password.
    pub fn password(&self) -> &str {
        PASSWORD
    }

    /// The temporary directory: configuration, database, logs.
    pub fn dir(&self) -> &Path {
        &self.root
    }

    /// The end of rspamd's log, for a failing test's message.
    pub fn log_tail(&self) -> String {
        crate::log_tail(&self.root.join("log/rspamd.log"), 40)
    }
}

impl Drop for Rspamd {
    fn drop(&mut self) {
        self.rspamd.stop();
        self.redis.stop();
        if let Some(dir) = self.dir.take() {
            if std::env::var_os("TEST_PEERS_KEEP").is_some() {
                eprintln!("test-peers: kept {}", dir.keep().display());
            } else {
                let _ = dir.close();
            }
        }
    }
}

/// Redis on `127.0.0.1:port`, nothing saved; returns once it answers `PING`.
fn spawn_redis(root: &Path, port: u16) -> io::Result<Daemon> {
    let port_text = port.to_string();
    let root_text = root.display().to_string();
    let log = root.join("redis.log");
    let log_text = log.display().to_string();
    let args = [
        "--port",
        &port_text,
        "--bind",
        "127.0.0.1",
        "--save",
        "",
        "--appendonly",
        "no",
        "--dir",
        &root_text,
        "--logfile",
        &log_text,
        "--daemonize",
        "no",
    ];
    let mut redis = Daemon::spawn("redis-server", REDIS, "redis-server", &args, root)?;
    redis.wait_until(START_TIMEOUT, &log, || redis_answers(port))?;
    Ok(redis)
}

/// rspamd in the foreground as root (`-i`), its directories under `root`; returns once the
/// controller and the milter answer.
fn spawn_rspamd(root: &Path, milter_port: u16, controller_port: u16) -> io::Result<Daemon> {
    let vars: Vec<String> = [
        ("LOCAL_CONFDIR", "local"),
        ("DBDIR", "db"),
        ("RUNDIR", "run"),
        ("LOGDIR", "log"),
    ]
    .iter()
    .flat_map(|(name, sub)| {
        [
            "--var".to_string(),
            format!("{name}={}", root.join(sub).display()),
        ]
    })
    .collect();
    let conf = root.join("rspamd.conf").display().to_string();
    let mut args = vec!["-f", "-i", "-c", conf.as_str()];
    args.extend(vars.iter().map(String::as_str));
    let mut rspamd = Daemon::spawn("rspamd", RSPAMD, "rspamd", &args, root)?;
    let log = root.join("log/rspamd.log");
    rspamd.wait_until(START_TIMEOUT, &log, || {
        controller_answers(controller_port) && milter_answers(milter_port)
    })?;
    Ok(rspamd)
}

fn redis_answers(port: u16) -> bool {
    let Some(mut stream) = connect(port) else {
        return false;
    };
    let mut answer = [0u8; 7];
    stream.write_all(b"PING\r\n").is_ok()
        && stream.read_exact(&mut answer).is_ok()
        && &answer == b"+PONG\r\n"
}

fn controller_answers(port: u16) -> bool {
    connect(port)
        .and_then(|stream| ask(stream, b"GET /ping HTTP/1.0\r\n\r\n"))
        .is_some_and(|answer| answer.starts_with(b"HTTP/1.") && answer.ends_with(b"pong\r\n"))
}

fn write_config(
    root: &Path,
    redis_port: u16,
    milter_port: u16,
    controller_port: u16,
    dead_dns_port: u16,
) -> io::Result<()> {
    for sub in ["local/local.d", "local/override.d", "db", "run", "log"] {
        std::fs::create_dir_all(root.join(sub))?;
    }
    let write = |path: &str, text: String| std::fs::write(root.join(path), text);
    write(
        "tlds.dat",
        "com\norg\nnet\nexample\nexample.com\nexample.org\nexample.net\ntest\n".into(),
    )?;
    write(
        "rspamd.conf",
        format!(
            r#"# Generated by test-peers: Debian's configuration, our two workers only.
.include "$CONFDIR/common.conf"
options {{
    pidfile = "$RUNDIR/rspamd.pid";
    .include "$CONFDIR/options.inc"
    .include(try=true; priority=10) "$LOCAL_CONFDIR/override.d/options.inc"
}}
logging {{
    type = "file";
    filename = "$LOGDIR/rspamd.log";
    level = "info";
}}
worker "controller" {{
    bind_socket = "127.0.0.1:{controller_port}";
    .include "$CONFDIR/worker-controller.inc"
    .include(try=true; priority=10) "$LOCAL_CONFDIR/override.d/worker-controller.inc"
}}
worker "rspamd_proxy" {{
    bind_socket = "127.0.0.1:{milter_port}";
    .include "$CONFDIR/worker-proxy.inc"
    .include(try=true; priority=10) "$LOCAL_CONFDIR/override.d/worker-proxy.inc"
}}
"#
        ),
    )?;
    write(
        "local/override.d/options.inc",
        format!(
            r#"enable_test_patterns = true;
url_tld = "{tlds}";
dns {{
  nameserver = ["127.0.0.1:{dead_dns_port}"];
  timeout = 0.1s;
  retransmits = 1;
}}
"#,
            tlds = root.join("tlds.dat").display()
        ),
    )?;
    write(
        "local/override.d/worker-controller.inc",
        format!("password = \"{PASSWORD}\";\nsecure_ip = \"192.0.2.1\";\n"),
    )?;
    write(
        "local/override.d/worker-proxy.inc",
        "milter = yes;\ntimeout = 30s;\n\
         upstream \"local\" {\n  default = yes;\n  self_scan = yes;\n}\n"
            .into(),
    )?;
    write(
        "local/local.d/redis.conf",
        format!("servers = \"127.0.0.1:{redis_port}\";\n"),
    )?;
    write(
        "local/local.d/classifier-bayes.conf",
        "min_learns = 1;\nmin_tokens = 1;\nautolearn = false;\n".into(),
    )?;
    write(
        "local/local.d/milter_headers.conf",
        "use = [\"x-spamd-result\", \"x-rspamd-server\"];\nskip_local = false;\n\
         skip_authenticated = false;\n"
            .into(),
    )?;
    write("local/local.d/actions.conf", "greylist = null;\n".into())?;
    for module in MODULES_OFF {
        write(
            &format!("local/local.d/{module}.conf"),
            "enabled = false;\n".into(),
        )?;
    }
    Ok(())
}
