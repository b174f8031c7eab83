//! A private ACME server (RFC 8555) on loopback, for the ACME client's tests: acme2certifier
//! (PyPI) with its local OpenSSL CA handler, served over HTTPS by a small wsgiref launcher.
//!
//! ```text
//! <cache>/acme2certifier-<version>-<rev>/      the Python virtual environment, made once
//! <cache>/acme2certifier-<version>-<rev>.lock  held while it is made (tests start at once)
//! <tmp>/ca/ca-cert.pem ca-key.pem      a fresh CA (ECDSA P-256) issuing every certificate
//! <tmp>/server-cert.pem server-key.pem the listener's certificate (IP 127.0.0.1), same CA
//! <tmp>/acme_srv.cfg                   acme2certifier's configuration (ACME_SRV_CONFIGFILE)
//! <tmp>/launcher.py                    serves its WSGI application over HTTPS
//! <tmp>/acme_srv.db <tmp>/ca/certs/    its SQLite database and the certificates it issued
//! <tmp>/acme2certifier.out             its log (debug level) and the access log
//! ```
//!
//! `<cache>` is `$TEST_PEERS_CACHE`, else `$XDG_CACHE_HOME/mailstow-test-peers`, else
//! `$HOME/.cache/mailstow-test-peers`, else `<temp>/mailstow-test-peers-cache`: it outlives the test run (and `cargo clean`), so only
//! the first start on a machine installs from PyPI (about 15 s), later ones take about 1 s.
//!
//! Choices, and why:
//! * HTTPS, with a certificate from the same CA the ACME server issues from: a client trusts
//!   [`Acme2Certifier::ca_cert_path`] once, for the directory and for the certificates it
//!   gets, as it would trust a public CA.
//! * The Python packages are pinned ([`REQUIREMENTS`]), wheels only: the same code on every
//!   machine and no compiler. Debian's Python refuses `pip install` outside a venv (PEP 668).
//! * acme2certifier's `dns_server_list` takes addresses only and dnspython asks port 53: the
//!   launcher makes every dnspython `Resolver` ask [`AcmeOptions::dns`]'s port, so the test's
//!   resolver ([`crate::Bind::resolver`]) needs no port 53.
//! * HTTP-01 and TLS-ALPN-01 are offered and validated (at port 80 and 443 of the address the
//!   name resolves to, as RFC 8555 8.3 and RFC 8737 3 say); DNS-01 is not offered.
//! * An account needs no contact (`contact_check_disable`), as RFC 8555 7.3 allows and
//!   `certbot --register-unsafely-without-email` does; one given is still checked.
//! * Validation is real: `challenge_validation_disable` is off and private addresses are
//!   allowed (`http01_block_private_ips` off), since every test name resolves to loopback.

use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::daemon::Daemon;

/// How long [`Acme2Certifier::start`] waits for the server's self-check, once the virtual
/// environment exists.
const START_TIMEOUT: Duration = Duration::from_secs(60);
/// Debian's Python, whose `venv` module (package python3-venv) makes the environment.
const PYTHON: &str = "/usr/bin/python3";
const OPENSSL: &str = "/usr/bin/openssl";
/// The name of the cached virtual environment: a change of [`REQUIREMENTS`] or of how it is
/// made must change it, so that no machine keeps using an old one.
const VENV_NAME: &str = "acme2certifier-0.46.3-r1";
/// Written into the virtual environment once it is complete.
const VENV_COMPLETE: &str = "test-peers-complete";
/// acme2certifier and everything it imports, pinned (a `pip freeze` of a working install).
const REQUIREMENTS: &str = "\
acme2certifier==0.46.3
acme==5.9.0
certifi==2026.10.19.post1
cffi==2.1.1
charset-normalizer==3.5.3
cryptography==50.0.2
dnspython==2.9.2
idna==3.20
josepy==2.2.0
jwcrypto==1.6.1
MarkupSafe==3.0.4
pyasn1==0.6.5
pyasn1_modules==0.4.2
pycparser==3.12
pyOpenSSL==26.4.0
pyRFC3339==2.1.1
PySocks==1.7.1
python-dateutil==4.0.0
PyYAML==6.0.4
requests==2.34.2
requests_pkcs12==1.27
typing_extensions==4.16.0
tzdata==2026.6
urllib3==2.8.0
Werkzeug==3.1.9
xmltodict==1.0.4
";
/// What the launcher prints once `/directory` answered it over HTTPS.
const READY_LINE: &str = "test-peers: acme2certifier ready";

/// What [`Acme2Certifier::start`] is told.
#[derive(Clone, Copy, Debug)]
pub struct AcmeOptions {
    /// The DNS server that challenge names are resolved with (address and port), e.g.
    /// [`crate::Bind::resolver`].
    pub dns: SocketAddr,
    /// How long issued certificates are valid, in days (at least 1).
    pub validity_days: u32,
}

/// A private acme2certifier on `https://127.0.0.1:<port>`. Dropping it stops it.
pub struct Acme2Certifier {
    // Stopped before the directory goes (fields drop in order).
    server: Daemon,
    dir: Option<tempfile::TempDir>,
    root: PathBuf,
    address: SocketAddr,
    ca_cert: PathBuf,
}

impl Acme2Certifier {
    /// Makes (or reuses) the virtual environment, a fresh CA and the configuration, starts
    /// the server on a free port of 127.0.0.1 and returns once it served its directory over
    /// HTTPS. An error names the apt-get line when Python's venv or openssl is missing, or
    /// carries the log.
    pub fn start(options: &AcmeOptions) -> io::Result<Acme2Certifier> {
        if options.validity_days == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "AcmeOptions::validity_days must be at least 1",
            ));
        }
        if !Path::new(OPENSSL).is_file() {
            return Err(crate::daemon::missing(OPENSSL, "openssl"));
        }
        let venv = Acme2Certifier::prepare()?;
        let dir = tempfile::Builder::new()
            .prefix("test-peers-acme2certifier-")
            .tempdir()?;
        let root = dir.path().to_path_buf();
        std::fs::create_dir_all(root.join("ca/certs"))?;
        make_ca(&root)?;
        let port = crate::free_port()?;
        let address = SocketAddr::from(([127, 0, 0, 1], port));
        std::fs::write(root.join("acme_srv.cfg"), config(&root, options))?;
        std::fs::write(root.join("launcher.py"), LAUNCHER)?;

        let python = venv.join("bin/python").display().to_string();
        let launcher = root.join("launcher.py").display().to_string();
        let environment = [
            (
                "ACME_SRV_CONFIGFILE",
                root.join("acme_srv.cfg").display().to_string(),
            ),
            ("TEST_PEERS_A2C_HOST", address.ip().to_string()),
            ("TEST_PEERS_A2C_PORT", port.to_string()),
            ("TEST_PEERS_A2C_DNS_PORT", options.dns.port().to_string()),
            (
                "TEST_PEERS_A2C_CERT",
                root.join("server-cert.pem").display().to_string(),
            ),
            (
                "TEST_PEERS_A2C_KEY",
                root.join("server-key.pem").display().to_string(),
            ),
            (
                "TEST_PEERS_A2C_CA",
                root.join("ca/ca-cert.pem").display().to_string(),
            ),
            ("PYTHONUNBUFFERED", "1".to_string()),
        ];
        let mut server = Daemon::spawn_with_env(
            "acme2certifier",
            &python,
            "python3-venv",
            &["-u", &launcher],
            &environment,
            &root,
        )?;
        let output = root.join("acme2certifier.out");
        server.wait_until(START_TIMEOUT, &output, || {
            std::fs::read_to_string(&output).is_ok_and(|text| text.contains(READY_LINE))
        })?;
        Ok(Acme2Certifier {
            server,
            ca_cert: root.join("ca/ca-cert.pem"),
            dir: Some(dir),
            root,
            address,
        })
    }

    /// Makes the cached virtual environment with acme2certifier unless it exists, and returns
    /// its directory. [`Acme2Certifier::start`] calls it; a test run may call it first so that
    /// no test's time includes the install. Safe to call from several processes at once (a
    /// lock file): one installs, the others wait and reuse it.
    pub fn prepare() -> io::Result<PathBuf> {
        let cache = cache_dir();
        std::fs::create_dir_all(&cache)?;
        let venv = cache.join(VENV_NAME);
        let lock = std::fs::File::create(cache.join(format!("{VENV_NAME}.lock")))?;
        lock.lock()?;
        if venv.join(VENV_COMPLETE).is_file() {
            return Ok(venv);
        }
        if venv.exists() {
            // An install that was interrupted.
            std::fs::remove_dir_all(&venv)?;
        }
        make_venv(&venv)?;
        std::fs::write(venv.join(VENV_COMPLETE), REQUIREMENTS)?;
        drop(lock);
        Ok(venv)
    }

    /// The ACME directory, `https://127.0.0.1:<port>/directory`.
    pub fn directory_url(&self) -> String {
        format!("https://{}/directory", self.address)
    }

    /// The server's address, `127.0.0.1:<port>`.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// The CA certificate (PEM) that issued the HTTPS listener's certificate and issues every
    /// certificate ordered here: the one root a client must trust.
    pub fn ca_cert_path(&self) -> &Path {
        &self.ca_cert
    }

    /// The temporary directory: configuration, CA, database, issued certificates, log.
    pub fn dir(&self) -> &Path {
        &self.root
    }

    /// The end of acme2certifier's log (debug level, with the access log), for a failing
    /// test's message.
    pub fn log_tail(&self) -> String {
        crate::log_tail(&self.root.join("acme2certifier.out"), 60)
    }
}

impl Drop for Acme2Certifier {
    fn drop(&mut self) {
        self.server.stop();
        if let Some(dir) = self.dir.take() {
            if std::env::var_os("TEST_PEERS_KEEP").is_some() {
                eprintln!("test-peers: kept {}", dir.keep().display());
            } else {
                let _ = dir.close();
            }
        }
    }
}

/// Where the virtual environment is kept between test runs.
fn cache_dir() -> PathBuf {
    let from_env = |name: &str| {
        std::env::var_os(name)
            .filter(|value| !value.is_empty())
            .map(PathBuf::from)
    };
    if let Some(dir) = from_env("TEST_PEERS_CACHE") {
        return dir;
    }
    if let Some(dir) = from_env("XDG_CACHE_HOME") {
        return dir.join("mailstow-test-peers");
    }
    if let Some(home) = from_env("HOME") {
        return home.join(".cache/mailstow-test-peers");
    }
    std::env::temp_dir().join("mailstow-test-peers-cache")
}

/// Runs a program; its standard output, or an error with all it printed.
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

/// `python3 -m venv`, then the pinned packages from PyPI (wheels only).
fn make_venv(venv: &Path) -> io::Result<()> {
    let parent = venv.parent().unwrap_or(Path::new("/"));
    let has_venv = Path::new(PYTHON).is_file()
        && Command::new(PYTHON)
            .args(["-c", "import ensurepip, venv"])
            .output()
            .is_ok_and(|output| output.status.success());
    if !has_venv {
        return Err(crate::daemon::missing(PYTHON, "python3-venv"));
    }
    let venv_text = venv.display().to_string();
    run(PYTHON, &["-m", "venv", &venv_text], parent)?;
    let requirements = venv.join("requirements.txt");
    std::fs::write(&requirements, REQUIREMENTS)?;
    let pip = venv.join("bin/pip").display().to_string();
    let requirements_text = requirements.display().to_string();
    run(
        &pip,
        &[
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "--no-input",
            "--only-binary",
            ":all:",
            "-r",
            &requirements_text,
        ],
        venv,
    )
    .map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("installing acme2certifier from PyPI: {e}"),
        )
    })?;
    Ok(())
}

/// A fresh CA and the listener's certificate from it, both ECDSA P-256.
fn make_ca(root: &Path) -> io::Result<()> {
    run(
        OPENSSL,
        &[
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-keyout",
            "ca/ca-key.pem",
            "-out",
            "ca/ca-cert.pem",
            "-days",
            "3650",
            "-subj",
            "/CN=test-peers ACME CA",
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-addext",
            "keyUsage=critical,keyCertSign,cRLSign",
        ],
        root,
    )?;
    run(
        OPENSSL,
        &[
            "req",
            "-x509",
            "-CA",
            "ca/ca-cert.pem",
            "-CAkey",
            "ca/ca-key.pem",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-keyout",
            "server-key.pem",
            "-out",
            "server-cert.pem",
            "-days",
            "3650",
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1,DNS:localhost",
            "-addext",
            "basicConstraints=critical,CA:FALSE",
            "-addext",
            "extendedKeyUsage=serverAuth",
        ],
        root,
    )?;
    Ok(())
}

fn config(root: &Path, options: &AcmeOptions) -> String {
    let root = root.display();
    let dns_ip = options.dns.ip();
    let days = options.validity_days;
    format!(
        r#"# Generated by test-peers: a private acme2certifier with a local OpenSSL CA.
[DEFAULT]
debug: True
# Resolved at the port the launcher gives dnspython (TEST_PEERS_A2C_DNS_PORT).
dns_server_list: ["{dns_ip}"]

[Nonce]
nonce_check_disable: False

[Account]
# RFC 8555 7.3: contact is optional; acme2certifier demands one unless told otherwise.
contact_check_disable: True

[CAhandler]
handler_module: acme2certifier.cahandlers.openssl_ca_handler
issuing_ca_key: {root}/ca/ca-key.pem
issuing_ca_cert: {root}/ca/ca-cert.pem
issuing_ca_crl: {root}/ca/crl.pem
cert_validity_days: {days}
cert_save_path: {root}/ca/certs
ca_cert_chain_list: []

[DBhandler]
handler: wsgi
dbfile: {root}/acme_srv.db

[Challenge]
challenge_validation_disable: False
http01_block_private_ips: False
http_01_support: True
tls_alpn_01_support: True
dns_01_support: False

[Order]
tnauthlist_support: False
"#
    )
}

/// Serves acme2certifier's WSGI application over HTTPS with wsgiref (one thread per
/// connection, the TLS handshake in that thread), then checks `/directory` through the CA and
/// prints [`READY_LINE`].
const LAUNCHER: &str = r#"# Generated by test-peers: acme2certifier's WSGI application over HTTPS.
import os
import socketserver
import ssl
import sys
import threading
import urllib.request

HOST = os.environ["TEST_PEERS_A2C_HOST"]
PORT = int(os.environ["TEST_PEERS_A2C_PORT"])
DNS_PORT = int(os.environ["TEST_PEERS_A2C_DNS_PORT"])
CERT = os.environ["TEST_PEERS_A2C_CERT"]
KEY = os.environ["TEST_PEERS_A2C_KEY"]
CA = os.environ["TEST_PEERS_A2C_CA"]

# acme2certifier's dns_server_list takes addresses only, and dnspython asks them on port 53
# unless its Resolver says otherwise: every Resolver made here asks the test's DNS port.
import dns.resolver


class _TestPortResolver(dns.resolver.Resolver):
    def reset(self):
        super().reset()
        self.port = DNS_PORT


dns.resolver.Resolver = _TestPortResolver

from wsgiref.simple_server import WSGIServer, WSGIRequestHandler, make_server

from acme2certifier.share.acme2certifier_wsgi import application

CONTEXT = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
CONTEXT.load_cert_chain(CERT, KEY)


class Server(socketserver.ThreadingMixIn, WSGIServer):
    daemon_threads = True

    def setup_environ(self):
        super().setup_environ()
        self.base_environ["HTTPS"] = "on"

    def finish_request(self, request, client_address):
        try:
            request = CONTEXT.wrap_socket(request, server_side=True)
        except (ssl.SSLError, OSError) as err:
            sys.stderr.write(f"test-peers: TLS handshake with {client_address}: {err}\n")
            return
        super().finish_request(request, client_address)


class Handler(WSGIRequestHandler):
    def address_string(self):
        return self.client_address[0]


SERVER = make_server(HOST, PORT, application, server_class=Server, handler_class=Handler)
threading.Thread(target=SERVER.serve_forever, daemon=True).start()
CHECK = ssl.create_default_context(cafile=CA)
with urllib.request.urlopen(f"https://{HOST}:{PORT}/directory", context=CHECK, timeout=30) as answer:
    if b"newOrder" not in answer.read():
        sys.exit("test-peers: /directory has no newOrder")
print("test-peers: acme2certifier ready", flush=True)
threading.Event().wait()
"#;
