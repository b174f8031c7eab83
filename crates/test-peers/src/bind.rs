//! A private BIND 9 (Debian's `bind9`) pair on loopback, for the DNS, DANE and MTA-STS tests:
//! an authoritative server for the test's zones, some of them DNSSEC-signed, and a validating
//! recursive resolver in front of it that trusts exactly those signed zones.
//!
//! ```text
//! <tmp>/auth/named.conf       the authoritative server: one `type primary` zone per Zone
//! <tmp>/auth/zones/ORIGIN.zone       the zone as given, SOA and NS added
//! <tmp>/auth/zones/ORIGIN.zone.signed  what dnssec-signzone made of it (signed zones)
//! <tmp>/auth/keys/            the KSK and ZSK of each signed zone (ECDSAP256SHA256)
//! <tmp>/resolver/named.conf   the resolver: forwards everything to the authoritative server,
//!                             `trust-anchors { ORIGIN static-key ...; }` per signed zone
//! <tmp>/rndc.key              the control key of both (rndc reload, rndc flush)
//! <tmp>/auth.out <tmp>/resolver.out   each named's log (`-g`: everything on stderr)
//! ```
//!
//! Choices, and why:
//! * Signing is done once per start and per [`Bind::update`] with `dnssec-keygen` and
//!   `dnssec-signzone` (no `dnssec-policy`): the zone is fully signed before named loads it,
//!   so the first answer is already signed and nothing depends on named's key timing.
//! * The resolver has `dnssec-validation yes` (not `auto`): only the static anchors are
//!   trusted, there is no root anchor, so names outside the signed zones are simply insecure
//!   (no AD bit) and nothing is looked up on the Internet.
//! * The resolver forwards every name (`forward only`) to the authoritative server, which
//!   refuses names it does not serve: an unknown name fails at once instead of waiting for
//!   root servers that cannot be reached.
//! * Both servers run as root in the foreground (`-g`), IPv4 only (`-4`), on 127.0.0.1 at
//!   free ports (never 53), with their own `controls` so that nothing uses
//!   `/etc/bind/rndc.key` or port 953.

use std::fmt::Write as _;
use std::io;
use std::net::{SocketAddr, TcpListener, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::daemon::Daemon;

/// How long [`Bind::start`] waits for each named to answer.
const START_TIMEOUT: Duration = Duration::from_secs(30);
/// How long [`Bind::update`] waits for the new serial to be served.
const RELOAD_TIMEOUT: Duration = Duration::from_secs(10);
const NAMED: &str = "/usr/sbin/named";
const RNDC: &str = "/usr/sbin/rndc";
const KEYGEN: &str = "/usr/bin/dnssec-keygen";
const SIGNZONE: &str = "/usr/bin/dnssec-signzone";
const CHECKZONE: &str = "/usr/bin/named-checkzone";
const PACKAGES: &str = "bind9 bind9-utils bind9-dnsutils";
/// The TTL of every record the zone body does not give one to (`$TTL`), seconds.
const ZONE_TTL: u32 = 300;
/// The rndc key shared by both servers (HMAC-SHA256; the servers listen on loopback only).
const RNDC_SECRET: &str = "dGVzdC1wZWVycy1iaW5kLXJuZGMta2V5LTAxMjM0NTY=";
/// Free ports are searched this many times before giving up.
const PORT_TRIES_MAX: usize = 50;

/// One zone for [`Bind::start`].
#[derive(Clone, Debug)]
pub struct Zone {
    /// The zone's name, absolute: `example.test.`.
    pub origin: String,
    /// Zone file lines after the SOA: names relative to `origin` or absolute, `$TTL` 300 unless
    /// a line says otherwise. The SOA and the apex NS (`ns.ORIGIN`, 127.0.0.1) are added, so
    /// these lines must not have them.
    pub records: String,
    /// Signed with a fresh KSK and ZSK (ECDSAP256SHA256, NSEC), the KSK a static trust anchor
    /// of the resolver.
    pub signed: bool,
}

impl Zone {
    /// An unsigned zone.
    pub fn unsigned(origin: &str, records: &str) -> Zone {
        Zone {
            origin: origin.to_string(),
            records: records.to_string(),
            signed: false,
        }
    }

    /// A DNSSEC-signed zone.
    pub fn signed(origin: &str, records: &str) -> Zone {
        Zone {
            origin: origin.to_string(),
            records: records.to_string(),
            signed: true,
        }
    }
}

/// A zone as served: its files and, when signed at start, the KSK the resolver trusts.
struct Served {
    origin: String,
    /// The file name part: the origin without its final dot.
    file_stem: String,
    /// The KSK's DNSKEY RDATA (`257 3 13 BASE64`), when the zone was signed at start.
    trust_anchor: Option<String>,
    serial: u32,
}

/// A private authoritative BIND and a validating resolver in front of it. Dropping it stops
/// both.
pub struct Bind {
    // Stopped before the directory goes (fields drop in order).
    resolver: Daemon,
    authoritative: Daemon,
    dir: Option<tempfile::TempDir>,
    root: PathBuf,
    zones: Vec<Served>,
    auth_address: SocketAddr,
    auth_control: u16,
    resolver_address: SocketAddr,
    resolver_control: u16,
}

impl Bind {
    /// Signs the signed zones, starts the authoritative server and the resolver on free
    /// loopback ports, and returns once the resolver answers for every zone. An error names
    /// the apt-get line when BIND is missing, or carries the logs.
    pub fn start(zones: &[Zone]) -> io::Result<Bind> {
        for program in [NAMED, RNDC, KEYGEN, SIGNZONE, CHECKZONE] {
            if !Path::new(program).is_file() {
                return Err(crate::daemon::missing(program, PACKAGES));
            }
        }
        if zones.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "Bind::start needs at least one zone",
            ));
        }
        let dir = tempfile::Builder::new()
            .prefix("test-peers-bind-")
            .tempdir()?;
        let root = dir.path().to_path_buf();
        for sub in ["auth/zones", "auth/keys", "resolver"] {
            std::fs::create_dir_all(root.join(sub))?;
        }
        std::fs::write(
            root.join("rndc.key"),
            format!(
                "key \"rndc-key\" {{\n  algorithm hmac-sha256;\n  secret \"{RNDC_SECRET}\";\n}};\n"
            ),
        )?;

        let mut served = Vec::new();
        for zone in zones {
            let origin = absolute_origin(&zone.origin)?;
            if served.iter().any(|s: &Served| s.origin == origin) {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("zone {origin} given twice"),
                ));
            }
            let file_stem = file_stem(&origin)?;
            let mut zone_served = Served {
                origin,
                file_stem,
                trust_anchor: None,
                serial: 1,
            };
            if zone.signed {
                zone_served.trust_anchor = Some(make_keys(&root, &zone_served.origin)?);
            }
            write_zone(&root, &zone_served, &zone.records, zone.signed)?;
            served.push(zone_served);
        }

        let (auth_address, auth_control) = (dns_port()?, crate::free_port()?);
        let (resolver_address, resolver_control) = (dns_port()?, crate::free_port()?);
        std::fs::write(
            root.join("auth/named.conf"),
            auth_config(&root, auth_address, auth_control, &served),
        )?;
        std::fs::write(
            root.join("resolver/named.conf"),
            resolver_config(
                &root,
                resolver_address,
                resolver_control,
                auth_address,
                &served,
            ),
        )?;

        let first = served[0].origin.clone();
        let authoritative = spawn_named(&root, "auth", auth_address, &first)?;
        let resolver = spawn_named(&root, "resolver", resolver_address, &first)?;
        let mut bind = Bind {
            resolver,
            authoritative,
            dir: Some(dir),
            root,
            zones: served,
            auth_address,
            auth_control,
            resolver_address,
            resolver_control,
        };
        // Every zone resolves (and validates) before the test starts.
        for zone in &bind.zones {
            let origin = zone.origin.clone();
            let address = bind.resolver_address;
            let log = bind.root.join("resolver.out");
            bind.resolver.wait_until(START_TIMEOUT, &log, || {
                dns_answers(address, &origin) == Some(RCODE_NOERROR)
            })?;
        }
        Ok(bind)
    }

    /// The authoritative server, `127.0.0.1:<port>` (UDP and TCP).
    pub fn authoritative(&self) -> SocketAddr {
        self.auth_address
    }

    /// The validating resolver, `127.0.0.1:<port>` (UDP and TCP): answers under a signed zone
    /// carry the AD bit (when the query has AD or DO set), a bogus one is SERVFAIL.
    pub fn resolver(&self) -> SocketAddr {
        self.resolver_address
    }

    /// The resolver's trust anchor for a zone signed at start: its KSK as DNSKEY RDATA,
    /// `257 3 13 BASE64`, for a client that validates by itself.
    pub fn trust_anchor(&self, origin: &str) -> Option<&str> {
        let origin = absolute_origin(origin).ok()?;
        self.zones
            .iter()
            .find(|zone| zone.origin == origin)?
            .trust_anchor
            .as_deref()
    }

    /// Replaces a zone's records while running: rewrites (and re-signs with its keys when
    /// `zone.signed`) the zone with a new serial, reloads it on the authoritative server,
    /// flushes the resolver's cache and returns once the new serial is served. `zone.origin`
    /// must be one given to [`Bind::start`]. The resolver's trust anchors stay as they were at
    /// start: a zone started signed and updated with `signed: false` is bogus to the resolver
    /// (SERVFAIL), the way a stripped or tampered answer is; one started unsigned and updated
    /// signed stays insecure (no AD).
    pub fn update(&mut self, zone: &Zone) -> io::Result<()> {
        let origin = absolute_origin(&zone.origin)?;
        let root = self.root.clone();
        let Some(served) = self.zones.iter_mut().find(|s| s.origin == origin) else {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("zone {origin} was not given to Bind::start"),
            ));
        };
        served.serial += 1;
        if zone.signed && !has_keys(&root, &origin)? {
            make_keys(&root, &origin)?;
        }
        write_zone(&root, served, &zone.records, zone.signed)?;
        let serial = served.serial;
        rndc(
            &root,
            self.auth_control,
            &["reload", origin.trim_end_matches('.')],
        )?;
        let address = self.auth_address;
        let log = root.join("auth.out");
        self.authoritative.wait_until(RELOAD_TIMEOUT, &log, || {
            soa_serial(address, &origin) == Some(serial)
        })?;
        rndc(&root, self.resolver_control, &["flush"])?;
        Ok(())
    }

    /// The temporary directory: configurations, zones, keys, logs.
    pub fn dir(&self) -> &Path {
        &self.root
    }

    /// The end of both servers' logs, for a failing test's message.
    pub fn log_tail(&self) -> String {
        format!(
            "--- authoritative ---\n{}\n--- resolver ---\n{}",
            crate::log_tail(&self.root.join("auth.out"), 30),
            crate::log_tail(&self.root.join("resolver.out"), 30)
        )
    }
}

impl Drop for Bind {
    fn drop(&mut self) {
        self.resolver.stop();
        self.authoritative.stop();
        if let Some(dir) = self.dir.take() {
            if std::env::var_os("TEST_PEERS_KEEP").is_some() {
                eprintln!("test-peers: kept {}", dir.keep().display());
            } else {
                let _ = dir.close();
            }
        }
    }
}

/// `origin` with its final dot; an error for an empty name or one with characters that
/// would need quoting in named.conf or a file name.
fn absolute_origin(origin: &str) -> io::Result<String> {
    let trimmed = origin.trim_end_matches('.');
    let ok = !trimmed.is_empty()
        && trimmed.len() <= 253
        && trimmed
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.' || c == '_')
        && !trimmed.split('.').any(str::is_empty);
    if !ok {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("not a zone name for the test BIND: {origin:?}"),
        ));
    }
    Ok(format!("{}.", trimmed.to_ascii_lowercase()))
}

fn file_stem(origin: &str) -> io::Result<String> {
    Ok(absolute_origin(origin)?.trim_end_matches('.').to_string())
}

fn zone_file(root: &Path, zone: &Served) -> PathBuf {
    root.join("auth/zones")
        .join(format!("{}.zone", zone.file_stem))
}

/// Runs a BIND tool in `dir`; its output is returned, or in the error when it fails.
fn run(program: &str, args: &[&str], dir: &Path) -> io::Result<String> {
    let output = Command::new(program)
        .args(args)
        .current_dir(dir)
        .output()
        .map_err(|e| io::Error::new(e.kind(), format!("running {program}: {e}")))?;
    if !output.status.success() {
        return Err(io::Error::other(format!(
            "{program} {} failed with {}:\n{}{}",
            args.join(" "),
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )));
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// Makes a KSK and a ZSK for `origin` in `<root>/auth/keys`; returns the KSK's DNSKEY RDATA.
fn make_keys(root: &Path, origin: &str) -> io::Result<String> {
    let keys = root.join("auth/keys");
    let base = ["-q", "-a", "ECDSAP256SHA256", "-n", "ZONE"];
    let mut ksk_args = base.to_vec();
    ksk_args.extend(["-f", "KSK", origin]);
    let ksk = run(KEYGEN, &ksk_args, &keys)?;
    let mut zsk_args = base.to_vec();
    zsk_args.push(origin);
    run(KEYGEN, &zsk_args, &keys)?;
    let key_file = keys.join(format!("{}.key", ksk.trim()));
    let text = std::fs::read_to_string(&key_file)?;
    dnskey_rdata(&text)
        .ok_or_else(|| io::Error::other(format!("no DNSKEY in {}:\n{text}", key_file.display())))
}

/// Whether `<root>/auth/keys` has keys for `origin`.
fn has_keys(root: &Path, origin: &str) -> io::Result<bool> {
    let prefix = format!("K{origin}+");
    for entry in std::fs::read_dir(root.join("auth/keys"))? {
        if entry?.file_name().to_string_lossy().starts_with(&prefix) {
            return Ok(true);
        }
    }
    Ok(false)
}

/// The RDATA of the DNSKEY record in a `dnssec-keygen` `.key` file: what follows `DNSKEY`.
fn dnskey_rdata(key_file: &str) -> Option<String> {
    key_file
        .lines()
        .filter(|line| !line.trim_start().starts_with(';'))
        .find_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let at = fields
                .iter()
                .position(|f| f.eq_ignore_ascii_case("DNSKEY"))?;
            let rdata = &fields[at + 1..];
            (rdata.len() >= 4).then(|| rdata.join(" "))
        })
}

/// Writes the zone file (SOA and NS first) and, for a signed zone, signs it into
/// `<file>.signed` with the zone's keys.
fn write_zone(root: &Path, zone: &Served, records: &str, signed: bool) -> io::Result<()> {
    let origin = &zone.origin;
    let serial = zone.serial;
    let mut text = format!(
        "$ORIGIN {origin}\n$TTL {ZONE_TTL}\n\
         @ IN SOA ns.{origin} hostmaster.{origin} {serial} 3600 600 86400 60\n\
         @ IN NS ns.{origin}\n"
    );
    // The NS name's address, unless the test gives one (a test may well).
    let has_ns_address = records.lines().any(|line| {
        let mut fields = line.split_whitespace();
        matches!(fields.next(), Some(name) if name == "ns" || name.eq_ignore_ascii_case(&format!("ns.{origin}")))
    });
    if !has_ns_address {
        text.push_str("ns IN A 127.0.0.1\n");
    }
    text.push_str(records);
    if !records.ends_with('\n') {
        text.push('\n');
    }
    let file = zone_file(root, zone);
    std::fs::write(&file, text)?;
    // A mistake in the test's records is reported here, with the line, rather than as a zone
    // named will not load and a resolver that never answers.
    let file_text = file.display().to_string();
    run(CHECKZONE, &[origin, &file_text], root)?;
    let signed_file = file.with_extension("zone.signed");
    if signed {
        let keys = root.join("auth/keys").display().to_string();
        let signed_text = signed_file.display().to_string();
        // -S: the keys in -K and their DNSKEYs; validity from an hour ago (clock skew) for
        // 30 days (the default end).
        run(
            SIGNZONE,
            &[
                "-S",
                "-K",
                &keys,
                "-o",
                origin,
                "-s",
                "now-3600",
                "-f",
                &signed_text,
                &file_text,
            ],
            &root.join("auth"),
        )?;
    } else {
        // The zone statement names the signed file; an unsigned zone is served from a copy.
        std::fs::copy(&file, &signed_file)?;
    }
    Ok(())
}

fn auth_config(root: &Path, address: SocketAddr, control: u16, zones: &[Served]) -> String {
    let dir = root.join("auth").display().to_string();
    let mut text = format!(
        r#"# Generated by test-peers: a private authoritative BIND.
include "{key}";
controls {{ inet 127.0.0.1 port {control} allow {{ 127.0.0.1; }} keys {{ "rndc-key"; }}; }};
options {{
    directory "{dir}";
    pid-file "{dir}/named.pid";
    session-keyfile "{dir}/session.key";
    managed-keys-directory "{dir}";
    listen-on port {port} {{ {ip}; }};
    listen-on-v6 {{ none; }};
    recursion no;
    allow-query {{ any; }};
    notify no;
    dnssec-validation no;
    minimal-responses no;
}};
"#,
        key = root.join("rndc.key").display(),
        port = address.port(),
        ip = address.ip(),
    );
    for zone in zones {
        let _ = writeln!(
            text,
            "zone \"{origin}\" {{ type primary; file \"{file}.signed\"; }};",
            origin = zone.origin,
            file = zone_file(root, zone).display()
        );
    }
    text
}

fn resolver_config(
    root: &Path,
    address: SocketAddr,
    control: u16,
    auth: SocketAddr,
    zones: &[Served],
) -> String {
    let dir = root.join("resolver").display().to_string();
    let mut anchors = String::new();
    for zone in zones {
        if let Some(key) = &zone.trust_anchor {
            let (flags_proto_alg, key_data) = split_dnskey(key);
            let _ = writeln!(
                anchors,
                "    \"{}\" static-key {flags_proto_alg} \"{key_data}\";",
                zone.origin
            );
        }
    }
    format!(
        r#"# Generated by test-peers: a validating resolver in front of the authoritative BIND.
include "{key}";
controls {{ inet 127.0.0.1 port {control} allow {{ 127.0.0.1; }} keys {{ "rndc-key"; }}; }};
options {{
    directory "{dir}";
    pid-file "{dir}/named.pid";
    session-keyfile "{dir}/session.key";
    managed-keys-directory "{dir}";
    listen-on port {port} {{ {ip}; }};
    listen-on-v6 {{ none; }};
    recursion yes;
    allow-query {{ any; }};
    allow-recursion {{ any; }};
    forward only;
    forwarders {{ {auth_ip} port {auth_port}; }};
    dnssec-validation yes;
    notify no;
    # A failed validation is not remembered past the next update.
    servfail-ttl 0;
}};
trust-anchors {{
{anchors}}};
"#,
        key = root.join("rndc.key").display(),
        port = address.port(),
        ip = address.ip(),
        auth_ip = auth.ip(),
        auth_port = auth.port(),
    )
}

/// `257 3 13 BASE64...` into `257 3 13` and the key data joined without spaces.
fn split_dnskey(rdata: &str) -> (String, String) {
    let fields: Vec<&str> = rdata.split_whitespace().collect();
    let head = fields.iter().take(3).copied().collect::<Vec<_>>().join(" ");
    let key = fields.iter().skip(3).copied().collect::<String>();
    (head, key)
}

/// `named -g -4 -c <root>/<which>/named.conf`; returns once it answers a SOA query for
/// `zone` (with any response code: the resolver's answer is checked by the caller).
fn spawn_named(
    root: &Path,
    which: &'static str,
    address: SocketAddr,
    zone: &str,
) -> io::Result<Daemon> {
    let conf = root.join(which).join("named.conf").display().to_string();
    let output_name = if which == "auth" { "auth" } else { "resolver" };
    let mut named = Daemon::spawn(
        output_name,
        NAMED,
        PACKAGES,
        &["-g", "-4", "-c", &conf],
        root,
    )?;
    // Daemon writes <root>/<name>.out; named -g logs everything there.
    let log = root.join(format!("{output_name}.out"));
    named.wait_until(START_TIMEOUT, &log, || dns_answers(address, zone).is_some())?;
    Ok(named)
}

/// `rndc -k <root>/rndc.key -s 127.0.0.1 -p <port> ARGS`.
fn rndc(root: &Path, port: u16, args: &[&str]) -> io::Result<()> {
    let key = root.join("rndc.key").display().to_string();
    let port = port.to_string();
    let mut all = vec!["-k", key.as_str(), "-s", "127.0.0.1", "-p", port.as_str()];
    all.extend_from_slice(args);
    run(RNDC, &all, root).map(|_| ())
}

/// A port free on 127.0.0.1 for both UDP and TCP a moment ago.
fn dns_port() -> io::Result<SocketAddr> {
    for _ in 0..PORT_TRIES_MAX {
        let udp = UdpSocket::bind(("127.0.0.1", 0))?;
        let address = udp.local_addr()?;
        if TcpListener::bind(address).is_ok() {
            return Ok(address);
        }
    }
    Err(io::Error::new(
        io::ErrorKind::AddrInUse,
        "no port free for both UDP and TCP on 127.0.0.1",
    ))
}

const RCODE_NOERROR: u8 = 0;
const TYPE_SOA: u16 = 6;

/// The response code of a SOA query for `name` over UDP (one-second timeout), with the
/// DO bit set so a validating resolver validates; `None` when nothing answers.
fn dns_answers(server: SocketAddr, name: &str) -> Option<u8> {
    query(server, name, TYPE_SOA).map(|answer| answer[3] & 0x0f)
}

/// The serial of the SOA record the server answers for `origin`.
fn soa_serial(server: SocketAddr, origin: &str) -> Option<u32> {
    let answer = query(server, origin, TYPE_SOA)?;
    if answer[3] & 0x0f != RCODE_NOERROR || u16::from_be_bytes([answer[6], answer[7]]) == 0 {
        return None;
    }
    // RFC 1035 4.1: skip the question, then the first answer's owner, type, class, TTL and
    // RDLENGTH; the SOA RDATA is MNAME, RNAME, then SERIAL.
    let mut at = skip_name(&answer, 12)? + 4;
    at = skip_name(&answer, at)? + 10;
    at = skip_name(&answer, at)?;
    at = skip_name(&answer, at)?;
    let serial = answer.get(at..at + 4)?;
    Some(u32::from_be_bytes([
        serial[0], serial[1], serial[2], serial[3],
    ]))
}

/// The offset after the (possibly compressed) name at `at` (RFC 1035 4.1.4).
fn skip_name(message: &[u8], mut at: usize) -> Option<usize> {
    loop {
        let length = *message.get(at)?;
        match length {
            0 => return Some(at + 1),
            l if l & 0xc0 == 0xc0 => return Some(at + 2),
            l => at += 1 + usize::from(l),
        }
    }
}

/// One UDP query (RFC 1035 4.1, with an RFC 6891 OPT record setting DO); the answer when it
/// has our id and is a response.
fn query(server: SocketAddr, name: &str, qtype: u16) -> Option<Vec<u8>> {
    let id: u16 = 0x7e57;
    let mut message = Vec::with_capacity(64);
    message.extend_from_slice(&id.to_be_bytes());
    // RD and AD set; one question, one additional (OPT).
    message.extend_from_slice(&[0x01, 0x20, 0, 1, 0, 0, 0, 0, 0, 1]);
    for label in name.trim_end_matches('.').split('.') {
        let bytes = label.as_bytes();
        message.push(u8::try_from(bytes.len()).ok().filter(|l| *l < 64)?);
        message.extend_from_slice(bytes);
    }
    message.push(0);
    message.extend_from_slice(&qtype.to_be_bytes());
    message.extend_from_slice(&1u16.to_be_bytes());
    // OPT: root owner, type 41, UDP size 1232, extended rcode and version 0, DO, no options.
    message.extend_from_slice(&[0, 0, 41, 0x04, 0xd0, 0, 0, 0x80, 0, 0, 0]);
    let socket = UdpSocket::bind(("127.0.0.1", 0)).ok()?;
    // Connected, so that a port nobody listens on yet fails at once (ICMP port unreachable)
    // instead of after the timeout.
    socket.connect(server).ok()?;
    socket.set_read_timeout(Some(Duration::from_secs(1))).ok()?;
    socket.send(&message).ok()?;
    let mut answer = vec![0u8; 4096];
    let length = socket.recv(&mut answer).ok()?;
    answer.truncate(length);
    let ok = length >= 12 && answer[..2] == id.to_be_bytes() && answer[2] & 0x80 != 0;
    ok.then_some(answer)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_are_made_absolute_and_checked() {
        assert_eq!(absolute_origin("Example.Test").unwrap(), "example.test.");
        assert_eq!(absolute_origin("example.test.").unwrap(), "example.test.");
        assert!(absolute_origin("").is_err());
        assert!(absolute_origin("a..b").is_err());
        assert!(absolute_origin("a\"b.test").is_err());
    }

    #[test]
    fn dnskey_is_read_from_a_key_file() {
        let file = "; This is a key-signing key, keyid 1234, for example.test.\n\
                    ; Created: 20240101000000\n\
                    example.test. IN DNSKEY 257 3 13 AbCd EfGh==\n";
        let rdata = dnskey_rdata(file).unwrap();
        assert_eq!(rdata, "257 3 13 AbCd EfGh==");
        assert_eq!(
            split_dnskey(&rdata),
            ("257 3 13".to_string(), "AbCdEfGh==".to_string())
        );
        assert!(dnskey_rdata("; nothing\n").is_none());
    }

    #[test]
    fn names_are_skipped_with_and_without_compression() {
        let message = [3, b'f', b'o', b'o', 0, 0xc0, 12, 9];
        assert_eq!(skip_name(&message, 0), Some(5));
        assert_eq!(skip_name(&message, 5), Some(7));
        assert_eq!(skip_name(&message, 7), None);
    }
}
