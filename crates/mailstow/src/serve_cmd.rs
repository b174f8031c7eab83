//! `mailstow serve`: the configuration file's `[server]` section, overridden by listener flags,
//! turned into a `server::ServerConfig`, then served until SIGTERM.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::Args;
use server::{ServerConfig, Service, TlsSource};

use crate::node::Node;

use crate::config::{Config, ServerSection};
use crate::paths::Paths;

/// Listener overrides: `ADDR` like `127.0.0.1:2525`; an empty value disables the listener.
#[derive(Args, Debug, Default)]
pub(crate) struct ServeArgs {
    #[arg(long, value_name = "ADDR")]
    smtp: Option<String>,
    #[arg(long, value_name = "ADDR")]
    submission: Option<String>,
    /// Submission over implicit TLS (RFC 8314).
    #[arg(long, value_name = "ADDR")]
    submissions: Option<String>,
    #[arg(long, value_name = "ADDR")]
    lmtp: Option<String>,
    #[arg(long, value_name = "ADDR")]
    pop3: Option<String>,
    #[arg(long, value_name = "ADDR")]
    pop3s: Option<String>,
    /// IMAP with STARTTLS (RFC 9051).
    #[arg(long, value_name = "ADDR")]
    imap: Option<String>,
    /// IMAP over implicit TLS (RFC 8314).
    #[arg(long, value_name = "ADDR")]
    imaps: Option<String>,
    /// ManageSieve with STARTTLS (RFC 5804; `[server] managesieve`; default 0.0.0.0:4190).
    #[arg(long, value_name = "ADDR")]
    managesieve: Option<String>,
    /// ManageSieve over implicit TLS (`[server] managesieves`; default off).
    #[arg(long, value_name = "ADDR")]
    managesieves: Option<String>,
    /// Prometheus metrics at /metrics and a health check at /healthz (`[server] metrics`).
    #[arg(long, value_name = "ADDR")]
    metrics: Option<String>,
    /// The web view (`[server] web`; default 127.0.0.1:8080).
    #[arg(long, value_name = "ADDR")]
    web: Option<String>,
    /// The public HTTPS listener (`[server] https`).
    #[arg(long, value_name = "ADDR")]
    https: Option<String>,
    /// The plain HTTP listener for ACME challenges and redirects (`[server] http`).
    #[arg(long, value_name = "ADDR")]
    http: Option<String>,
}

pub(crate) fn server_config(
    args: &ServeArgs,
    paths: &Paths,
    config: &Config,
) -> Result<ServerConfig> {
    let section = &config.server;
    let mut server = ServerConfig::defaults(paths.data_dir.clone());
    identity(section, &mut server)?;
    acme(config, &mut server)?;
    listeners(args, section, &mut server)?;
    limits(section, &mut server)?;
    deadlines(section, &mut server)?;
    outbound(section, &mut server)?;
    web_and_metrics(args, section, &mut server)?;
    if let Some(url) = &config.directory.url {
        server.directory =
            Some(directory::Location::parse(url).with_context(|| "[directory] url".to_string())?);
    }
    cluster(config, &mut server)?;
    server.spam = config.spam.filter_config()?;
    server.queue = config.queue_config();
    server.store = config.store_config();
    if server.listeners.is_empty() {
        bail!("every listener is disabled: nothing to serve");
    }
    Ok(server)
}

/// `to = v` when the file sets `v`.
fn set<T>(to: &mut T, v: Option<T>) {
    if let Some(v) = v {
        *to = v;
    }
}

/// `to = v` when the file sets `v`, refusing a `v` below `least` (named `[server] name`).
fn set_at_least<T: PartialOrd + std::fmt::Display + Copy>(
    to: &mut T,
    v: Option<T>,
    least: T,
    name: &str,
) -> Result<()> {
    if let Some(v) = v {
        if v < least {
            bail!("[server] {name} must be at least {least}");
        }
        *to = v;
    }
    Ok(())
}

/// The host name, the certificate and the postmaster address.
fn identity(section: &ServerSection, server: &mut ServerConfig) -> Result<()> {
    if let Some(hostname) = &section.hostname {
        server.hostname = hostname.clone();
        if let TlsSource::SelfSigned { hostname: name, .. } = &mut server.tls {
            *name = hostname.clone();
        }
    }
    match (&section.tls_cert, &section.tls_key) {
        (Some(cert), Some(key)) => {
            server.tls = TlsSource::Files {
                cert: cert.clone(),
                key: key.clone(),
            }
        }
        (None, None) => {}
        _ => bail!("config: [server] tls_cert and tls_key go together"),
    }
    if let Some(address) = &section.postmaster {
        let address = address.trim();
        if !address.contains('@') {
            bail!("[server] postmaster '{address}' is not an address");
        }
        server.postmaster = Some(address.to_ascii_lowercase());
    }
    Ok(())
}

/// `[acme]`: the certificate comes from an ACME server, kept in `<data_dir>/acme`; until the
/// first is issued, the self-signed one serves.
fn acme(config: &Config, server: &mut ServerConfig) -> Result<()> {
    let Some(section) = &config.acme else {
        return Ok(());
    };
    if matches!(server.tls, TlsSource::Files { .. }) {
        bail!("[acme] and [server] tls_cert/tls_key exclude each other: pick one");
    }
    let challenge = match section.challenge.as_deref().unwrap_or("http-01") {
        "http-01" => acme::Challenge::Http01,
        "tls-alpn-01" => acme::Challenge::TlsAlpn01,
        other => bail!("[acme] challenge '{other}': use http-01 or tls-alpn-01"),
    };
    let mut acme = acme::Config::new(section.directory_url.trim());
    acme.contact = section.contact.clone();
    acme.extra_roots_pem = section.ca_file.clone();
    acme.challenge = challenge;
    acme.renew_before = match section.renew_before_days {
        Some(0) => bail!("[acme] renew_before_days must be at least 1"),
        Some(days) => Some(Duration::from_secs(days.saturating_mul(86400))),
        None => None,
    };
    acme.rotate_key = section.rotate_key.unwrap_or(false);
    if !acme.directory_url.starts_with("https://") {
        bail!("[acme] directory_url must be an https:// URL (RFC 8555 6.1)");
    }
    if let TlsSource::SelfSigned { dir, hostname } = &server.tls {
        server.tls = TlsSource::Acme {
            dir: server.data_dir.join("acme"),
            fallback: dir.clone(),
            hostname: hostname.clone(),
        };
    }
    // The challenges' listeners, unless the file says otherwise.
    let any = |port: u16| SocketAddr::from(([0, 0, 0, 0], port));
    if config.server.http.is_none() {
        server.http = Some(any(80));
    }
    if config.server.https.is_none() {
        server.https = Some(any(443));
    }
    server.acme = Some(acme);
    Ok(())
}

/// The mail listeners: a flag overrides the file; an empty value disables the listener.
fn listeners(args: &ServeArgs, section: &ServerSection, server: &mut ServerConfig) -> Result<()> {
    let overrides: [(Service, &Option<String>, &Option<String>); 10] = [
        (Service::Smtp, &args.smtp, &section.smtp),
        (Service::Submission, &args.submission, &section.submission),
        (
            Service::Submissions,
            &args.submissions,
            &section.submissions,
        ),
        (Service::Lmtp, &args.lmtp, &section.lmtp),
        (Service::Pop3, &args.pop3, &section.pop3),
        (Service::Pop3s, &args.pop3s, &section.pop3s),
        (Service::Imap, &args.imap, &section.imap),
        (Service::Imaps, &args.imaps, &section.imaps),
        (
            Service::ManageSieve,
            &args.managesieve,
            &section.managesieve,
        ),
        (
            Service::ManageSieves,
            &args.managesieves,
            &section.managesieves,
        ),
    ];
    for (service, flag, file) in overrides {
        let Some(value) = flag.as_ref().or(file.as_ref()) else {
            continue;
        };
        server.listeners.retain(|(s, _)| *s != service);
        let value = value.trim();
        if !value.is_empty() {
            let address: SocketAddr = value.parse().with_context(|| {
                format!(
                    "--{}: '{value}' is not an address like 127.0.0.1:2525",
                    service.name()
                )
            })?;
            server.listeners.push((service, address));
        }
    }
    Ok(())
}

/// The `*_max` limits on connections, messages, sessions, caches, password hashing and login
/// failures.
fn limits(section: &ServerSection, server: &mut ServerConfig) -> Result<()> {
    set(&mut server.auth_without_tls, section.auth_without_tls);
    set(&mut server.connections_max, section.connections_max);
    set(
        &mut server.connections_per_ip_max,
        section.connections_per_ip_max,
    );
    set(&mut server.message_bytes_max, section.message_bytes_max);
    set(&mut server.recipients_max, section.recipients_max);
    set(
        &mut server.recipients_unknown_max,
        section.recipients_unknown_max,
    );
    set(
        &mut server.imap_sessions_per_user_max,
        section.imap_sessions_per_user_max,
    );
    set(
        &mut server.imap_header_cache_bytes_max,
        section.imap_header_cache_bytes_max,
    );
    set(
        &mut server.imap_view_cache_bytes_max,
        section.imap_view_cache_bytes_max,
    );
    // 0 is allowed: COMPRESS is then always refused.
    set(
        &mut server.imap_compress_connections_max,
        section.imap_compress_connections_max,
    );
    let throttle = &mut server.throttle;
    set(
        &mut throttle.address_failures_max,
        section.auth_failures_max,
    );
    set(
        &mut throttle.user_failures_max,
        section.auth_user_failures_max,
    );
    set(
        &mut throttle.network_failures_max,
        section.auth_network_failures_max,
    );
    set(
        &mut throttle.window,
        section.auth_failure_window_seconds.map(Duration::from_secs),
    );
    set(
        &mut server.hash_concurrency_max,
        section.hash_concurrency_max,
    );
    set(
        &mut server.hash_memory_bytes_max,
        section.hash_memory_bytes_max,
    );
    set(&mut server.hash_queue_max, section.hash_queue_max);
    set_at_least(
        &mut server.password_length_min,
        section.password_length_min,
        1,
        "password_length_min",
    )?;
    set_at_least(
        &mut server.sieve_scripts_max,
        section.sieve_scripts_max,
        1,
        "sieve_scripts_max",
    )?;
    set_at_least(
        &mut server.sieve.script_bytes_max,
        section.sieve_script_bytes_max,
        1024,
        "sieve_script_bytes_max",
    )?;
    set_at_least(
        &mut server.sieve.instructions_max,
        section.sieve_instructions_max,
        100,
        "sieve_instructions_max",
    )?;
    set(
        &mut server.sieve.header_edits_max,
        section.sieve_header_edits_max,
    );
    set(&mut server.sieve.redirects_max, section.sieve_redirects_max);
    set(
        &mut server.sieve.include_depth_max,
        section.sieve_include_depth_max,
    );
    set(&mut server.inflight_bytes_max, section.inflight_bytes_max);
    set(&mut server.disk_reserve_bytes, section.disk_reserve_bytes);
    set_at_least(
        &mut server.web_sessions_max,
        section.web_sessions_max,
        1,
        "web_sessions_max",
    )?;
    set_at_least(
        &mut server.web_connections_max,
        section.web_connections_max,
        1,
        "web_connections_max",
    )?;
    set_at_least(
        &mut server.web_request_bytes_max,
        section.web_request_bytes_max,
        1024,
        "web_request_bytes_max",
    )
}

/// Every protocol state's deadline (at least a second each), the slow-transfer floor and the
/// tarpit.
fn deadlines(section: &ServerSection, server: &mut ServerConfig) -> Result<()> {
    let seconds = |v: Option<u64>, name: &str, to: &mut Duration| -> Result<()> {
        if v == Some(0) {
            bail!("[server] {name} must be at least 1");
        }
        set(to, v.map(Duration::from_secs));
        Ok(())
    };
    seconds(
        section.login_deadline_seconds,
        "login_deadline_seconds",
        &mut server.login_deadline,
    )?;
    seconds(
        section.command_deadline_seconds,
        "command_deadline_seconds",
        &mut server.command_deadline,
    )?;
    seconds(
        section.transfer_deadline_seconds,
        "transfer_deadline_seconds",
        &mut server.transfer_deadline,
    )?;
    seconds(
        section.transfer_deadline_max_seconds,
        "transfer_deadline_max_seconds",
        &mut server.transfer_deadline_max,
    )?;
    seconds(
        section.idle_deadline_seconds,
        "idle_deadline_seconds",
        &mut server.idle_deadline,
    )?;
    set(&mut server.transfer_rate_min, section.transfer_rate_min);
    set(
        &mut server.tarpit_delay,
        section.tarpit_delay_ms.map(Duration::from_millis),
    );
    Ok(())
}

/// Mail leaving the server: the delivery threads, a relay host, DNS servers, direct delivery
/// to MX hosts, and the checks on senders.
fn outbound(section: &ServerSection, server: &mut ServerConfig) -> Result<()> {
    set(&mut server.delivery_threads, section.delivery_threads);
    if let Some(relay) = section
        .relay_host
        .as_deref()
        .filter(|r| !r.trim().is_empty())
    {
        let (host, port) = relay
            .trim()
            .rsplit_once(':')
            .and_then(|(h, p)| Some((h.trim_matches(['[', ']']), p.parse::<u16>().ok()?)))
            .with_context(|| format!("[server] relay_host '{relay}' is not host:port"))?;
        let tls = match section.relay_tls.as_deref().unwrap_or("may") {
            "may" => delivery::RelayTls::May,
            "verify" => delivery::RelayTls::Verify,
            "none" => delivery::RelayTls::None,
            other => bail!("[server] relay_tls '{other}': use may, verify or none"),
        };
        server.relay = Some(delivery::Relay {
            host: host.to_string(),
            port,
            tls,
            address: None,
        });
    }
    server.dns_servers = section
        .dns_servers
        .iter()
        .flatten()
        .map(|s| {
            s.parse::<SocketAddr>()
                .with_context(|| format!("[server] dns_servers: '{s}' is not ip:port"))
        })
        .collect::<Result<Vec<_>>>()?;
    if section.direct_delivery.unwrap_or(false) {
        let mx_port = section.mx_port.unwrap_or(25);
        let mut transport = transport_policy::Config {
            smtp_port: mx_port,
            ..transport_policy::Config::default()
        };
        set(&mut transport.mta_sts, section.outbound_mta_sts);
        set(&mut transport.dane, section.outbound_dane);
        set(&mut transport.https_port, section.mta_sts_port);
        if let Some(file) = &section.tls_roots_file {
            let pem = std::fs::read(file)
                .with_context(|| format!("[server] tls_roots_file: reading {}", file.display()))?;
            let added = transport
                .add_pem_roots(&pem)
                .with_context(|| format!("[server] tls_roots_file {}", file.display()))?;
            if added == 0 {
                bail!(
                    "[server] tls_roots_file {} holds no certificate",
                    file.display()
                );
            }
        }
        server.direct = Some(server::Direct {
            dns_servers: server.dns_servers.clone(),
            mx_port,
            transport,
        });
    }
    set(&mut server.sender_checks, section.sender_checks);
    set(&mut server.dmarc_enforce, section.dmarc_enforce);
    set(&mut server.local_sender_check, section.local_sender_check);
    Ok(())
}

/// The metrics and web listeners (a flag overrides the file; empty disables) and the web's TLS.
fn web_and_metrics(
    args: &ServeArgs,
    section: &ServerSection,
    server: &mut ServerConfig,
) -> Result<()> {
    let address = |flag: &Option<String>, file: &Option<String>, name: &str, example: &str| {
        let Some(value) = flag.as_ref().or(file.as_ref()) else {
            return Ok(None);
        };
        let value = value.trim();
        if value.is_empty() {
            return Ok(Some(None));
        }
        value
            .parse::<SocketAddr>()
            .map(|a| Some(Some(a)))
            .with_context(|| format!("{name}: '{value}' is not an address like {example}"))
    };
    set(
        &mut server.metrics,
        address(&args.metrics, &section.metrics, "metrics", "127.0.0.1:9187")?,
    );
    set(
        &mut server.web,
        address(&args.web, &section.web, "web", "127.0.0.1:8080")?,
    );
    set(&mut server.web_tls, section.web_tls);
    set(
        &mut server.https,
        address(&args.https, &section.https, "https", "0.0.0.0:443")?,
    );
    set(
        &mut server.http,
        address(&args.http, &section.http, "http", "0.0.0.0:80")?,
    );
    mta_sts(section, server)
}

/// `[server] mta_sts`: the policy we publish. On by default (enforce) only with a
/// certificate senders can verify: ACME's or the operator's own.
fn mta_sts(section: &ServerSection, server: &mut ServerConfig) -> Result<()> {
    let verifiable = !matches!(server.tls, TlsSource::SelfSigned { .. });
    let max_age = match section.mta_sts_max_age_seconds {
        Some(0) => bail!("[server] mta_sts_max_age_seconds must be at least 1"),
        // RFC 8461 3.2: at most 31557600 (about a year).
        Some(s) if s > 31_557_600 => {
            bail!("[server] mta_sts_max_age_seconds must be at most 31557600 (RFC 8461 3.2)")
        }
        Some(s) => Duration::from_secs(s),
        None => server::MTA_STS_MAX_AGE,
    };
    let mode = match section.mta_sts.as_deref().map(str::trim) {
        None if verifiable => Some(transport_policy::Mode::Enforce),
        None | Some("off") => None,
        Some("enforce") => Some(transport_policy::Mode::Enforce),
        Some("testing") => Some(transport_policy::Mode::Testing),
        Some("none") => Some(transport_policy::Mode::None),
        Some(name) => bail!("[server] mta_sts: '{name}' is not enforce, testing, none or off"),
    };
    server.mta_sts = mode.map(|mode| server::MtaSts { mode, max_age });
    Ok(())
}

/// `[cluster]`: this node's name and the shared secret, which need the shared directory.
fn cluster(config: &Config, server: &mut ServerConfig) -> Result<()> {
    match config.cluster.replicas {
        Some(replicas) if !(1..=crate::config::REPLICAS_MAX).contains(&replicas) => bail!(
            "[cluster] replicas must be 1..={} (copies of each mailbox and queued message), \
             not {replicas}",
            crate::config::REPLICAS_MAX
        ),
        Some(replicas) if replicas > 1 && config.cluster.node.is_none() => {
            bail!("[cluster] replicas needs node: copies live on other nodes of a cluster")
        }
        _ => {}
    }
    match (&config.cluster.node, &config.cluster.secret_file) {
        (None, None) => Ok(()),
        (Some(node), Some(secret_file)) => {
            let secret = std::fs::read(secret_file).with_context(|| {
                format!("[cluster] secret_file: reading {}", secret_file.display())
            })?;
            let secret = secret.trim_ascii().to_vec();
            if secret.len() < 16 {
                bail!(
                    "[cluster] secret_file {} holds {} bytes; use at least 16 random bytes \
                     (for example `head -c 32 /dev/urandom | base64`)",
                    secret_file.display(),
                    secret.len()
                );
            }
            if config.directory.url.is_none() {
                bail!(
                    "[cluster] needs [directory] url: the PostgreSQL directory every node shares"
                );
            }
            server.cluster = Some(cluster::ClusterConfig {
                node: node.clone(),
                secret,
            });
            if let Some(max) = config.cluster.delivered_max {
                if max == 0 {
                    bail!("[cluster] delivered_max must be at least 1");
                }
                server.cluster_delivered_max = max;
            }
            Ok(())
        }
        (Some(_), None) => bail!("[cluster] node needs secret_file"),
        (None, Some(_)) => bail!("[cluster] secret_file needs node"),
    }
}

/// Where `serve` found its settings, so that SIGHUP can read them again.
pub(crate) struct Sources {
    /// `--config`.
    pub(crate) config_file: Option<PathBuf>,
    /// `--data-dir`.
    pub(crate) data_dir_flag: Option<PathBuf>,
}

pub(crate) fn run(args: ServeArgs, sources: Sources, paths: &Paths, config: &Config) -> Result<()> {
    let server = server_config(&args, paths, config)?;
    let logging = crate::logging::init(
        config.log.level.as_deref().unwrap_or("info"),
        config.log.file.as_deref(),
    )?;
    let log_file = config.log.file.clone();
    // SIGHUP: reopen the log (logrotate moved it), read the file again, apply what can be.
    let reread = || -> Result<ServerConfig> {
        logging.reopen();
        let config = Config::load(sources.config_file.as_deref())?;
        let data_dir = sources
            .data_dir_flag
            .clone()
            .or_else(|| config.data_dir.clone())
            .unwrap_or_else(|| PathBuf::from(crate::config::DATA_DIR_DEFAULT));
        let paths = Paths {
            data_dir,
            directory_url: config.directory.url.clone(),
            // Not read by `server_config` (the file's value is, through `[server]`).
            password_length_min: directory::PASSWORD_LENGTH_MIN_DEFAULT,
        };
        let server = server_config(&args, &paths, &config)?;
        logging.set_level(config.log.level.as_deref().unwrap_or("info"))?;
        if config.log.file != log_file {
            tracing::warn!(
                event = "reload",
                restart_needed = "log.file",
                msg = "the log file changes at the next start"
            );
        }
        Ok(server)
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let result = runtime.block_on(serve(server, reread));
    drop(runtime);
    drop(logging);
    result
}

/// Starts the node, prints each listener's address, and serves until SIGTERM or SIGINT. On
/// SIGHUP it calls `reread` for the configuration (the caller re-reads its file and reopens
/// its log) and applies it with [`Running::reload`]; a configuration that fails keeps the
/// old one in force, and the log says why.
async fn serve(
    config: ServerConfig,
    mut reread: impl FnMut() -> Result<ServerConfig>,
) -> Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    // The handlers go in before the listeners are announced: a supervisor (or a test) may
    // send SIGTERM the moment it reads them, and an unhandled SIGTERM kills the process
    // without the orderly stop below.
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    let mut hangup = signal(SignalKind::hangup())?;
    let data_dir = std::path::absolute(&config.data_dir).unwrap_or(config.data_dir.clone());
    let node = Node::start(config).await?;
    let running = &node.running;
    let certificate = running.certificate();
    let certificate_path =
        std::path::absolute(&certificate.path).unwrap_or(certificate.path.clone());
    println!("data directory: {}", data_dir.display());
    println!(
        "certificate: {}{}",
        certificate_path.display(),
        match (&certificate.self_signed_for, certificate.generated) {
            (Some(host), true) => format!(" (self-signed for {host}, generated now)"),
            (Some(host), false) => format!(" (self-signed for {host})"),
            (None, _) if certificate.acme => " (ACME)".to_string(),
            (None, _) => String::new(),
        }
    );
    println!("certificate sha256: {}", certificate.sha256);
    let mut listening = 0;
    for (service, address) in &running.addresses {
        println!("{} listening on {address}", service.name());
        listening += 1;
    }
    if let Some(address) = running.metrics {
        println!("metrics listening on {address}");
        listening += 1;
    }
    for (name, address) in [
        ("web", running.web),
        ("https", running.https),
        ("http", running.http),
    ] {
        if let Some(address) = address {
            println!("{name} listening on {address}");
            listening += 1;
        }
    }
    for unbound in &running.unbound {
        println!(
            "{} not listening on {}: {} (trying again in the background)",
            unbound.service, unbound.address, unbound.error
        );
    }
    use std::io::Write as _;
    let _ = std::io::stdout().flush();
    tracing::info!(
        event = "started",
        data_dir = %data_dir.display(),
        certificate = %certificate_path.display(),
        sha256 = %certificate.sha256,
        listeners = listening,
        listeners_unbound = running.unbound.len()
    );
    loop {
        tokio::select! {
            _ = term.recv() => break,
            _ = int.recv() => break,
            _ = hangup.recv() => {
                match reread().and_then(|new| node.reload(&new)) {
                    Ok(reloaded) => tracing::info!(
                        event = "reload",
                        result = "ok",
                        changed = %names(&reloaded.changed),
                        restart_needed = %names(&reloaded.restart_needed),
                        certificate_sha256 = %reloaded.certificate.sha256
                    ),
                    Err(e) => tracing::warn!(
                        event = "reload",
                        result = "failed",
                        error = %format!("{e:#}"),
                        kept = "the configuration in force"
                    ),
                }
            }
        }
    }
    println!("stopping");
    tracing::info!(event = "stopping");
    node.stop().await?;
    println!("stopped");
    Ok(())
}

/// A list of setting names for the log: comma-separated, `-` when empty.
fn names(list: &[&str]) -> String {
    if list.is_empty() {
        "-".to_string()
    } else {
        list.join(",")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server_config_of(file: &str, args: &ServeArgs) -> Result<ServerConfig> {
        let config: Config = toml::from_str(file).expect("the test's TOML parses");
        let paths = Paths {
            data_dir: PathBuf::from("/nonexistent/mailstow-data"),
            directory_url: None,
            password_length_min: directory::PASSWORD_LENGTH_MIN_DEFAULT,
        };
        server_config(args, &paths, &config)
    }

    fn refusal(file: &str) -> String {
        match server_config_of(file, &ServeArgs::default()) {
            Ok(_) => panic!("accepted: {file}"),
            Err(error) => format!("{error:#}"),
        }
    }

    #[test]
    fn the_file_sets_limits_deadlines_and_addresses() {
        let server = server_config_of(
            "[server]\nhostname = 'mx.example.com'\nconnections_max = 7\nauth_failures_max = 3\n\
             auth_failure_window_seconds = 60\nlogin_deadline_seconds = 9\ntarpit_delay_ms = 250\n\
             web_request_bytes_max = 4096\nmetrics = '127.0.0.1:9187'\nweb = ''\n\
             relay_host = '[192.0.2.1]:587'\nrelay_tls = 'verify'\npostmaster = 'Admin@Example.com'\n",
            &ServeArgs::default(),
        )
        .expect("a valid file");
        assert_eq!(server.hostname, "mx.example.com");
        assert_eq!(server.connections_max, 7);
        assert_eq!(server.throttle.address_failures_max, 3);
        assert_eq!(server.throttle.window, Duration::from_secs(60));
        assert_eq!(server.login_deadline, Duration::from_secs(9));
        assert_eq!(server.tarpit_delay, Duration::from_millis(250));
        assert_eq!(server.web_request_bytes_max, 4096);
        assert_eq!(server.metrics, Some("127.0.0.1:9187".parse().unwrap()));
        assert_eq!(server.web, None);
        let relay = server.relay.expect("a relay");
        assert_eq!((relay.host.as_str(), relay.port), ("192.0.2.1", 587));
        assert!(matches!(relay.tls, delivery::RelayTls::Verify));
        assert_eq!(server.postmaster.as_deref(), Some("admin@example.com"));
    }

    #[test]
    fn a_flag_overrides_the_file_and_an_empty_value_disables_a_listener() {
        let args = ServeArgs {
            smtp: Some("127.0.0.1:2600".into()),
            web: Some("127.0.0.1:8181".into()),
            ..ServeArgs::default()
        };
        let server = server_config_of(
            "[server]\nsmtp = '127.0.0.1:2500'\nimap = ''\nweb = '127.0.0.1:8080'\n",
            &args,
        )
        .expect("a valid file");
        let smtp: Vec<_> = server
            .listeners
            .iter()
            .filter(|(service, _)| *service == Service::Smtp)
            .map(|(_, address)| address.to_string())
            .collect();
        assert_eq!(smtp, ["127.0.0.1:2600"]);
        assert!(server.listeners.iter().all(|(s, _)| *s != Service::Imap));
        assert!(server.listeners.iter().any(|(s, _)| *s == Service::Pop3));
        assert_eq!(server.web, Some("127.0.0.1:8181".parse().unwrap()));
    }

    #[test]
    fn managesieve_listens_on_4190_by_default_and_managesieves_when_asked() {
        let listener = |server: &ServerConfig, service| {
            server
                .listeners
                .iter()
                .find(|(s, _)| *s == service)
                .map(|(_, address)| address.to_string())
        };
        let server = server_config_of("", &ServeArgs::default()).expect("the defaults");
        assert_eq!(
            listener(&server, Service::ManageSieve).as_deref(),
            Some("0.0.0.0:4190")
        );
        assert_eq!(listener(&server, Service::ManageSieves), None);
        let args = ServeArgs {
            managesieve: Some("".into()),
            managesieves: Some("127.0.0.1:5190".into()),
            ..ServeArgs::default()
        };
        let server = server_config_of("[server]\nmanagesieve = '127.0.0.1:4191'\n", &args)
            .expect("a valid file");
        assert_eq!(listener(&server, Service::ManageSieve), None);
        assert_eq!(
            listener(&server, Service::ManageSieves).as_deref(),
            Some("127.0.0.1:5190")
        );
        let server = server_config_of(
            "[server]\nmanagesieve = '127.0.0.1:4191'\nmanagesieves = '127.0.0.1:5190'\n",
            &ServeArgs::default(),
        )
        .expect("a valid file");
        assert_eq!(
            listener(&server, Service::ManageSieve).as_deref(),
            Some("127.0.0.1:4191")
        );
        assert_eq!(
            listener(&server, Service::ManageSieves).as_deref(),
            Some("127.0.0.1:5190")
        );
    }

    #[test]
    fn out_of_range_values_are_refused_naming_their_key() {
        for (file, says) in [
            (
                "login_deadline_seconds = 0",
                "[server] login_deadline_seconds must be at least 1",
            ),
            (
                "idle_deadline_seconds = 0",
                "[server] idle_deadline_seconds must be at least 1",
            ),
            (
                "web_sessions_max = 0",
                "[server] web_sessions_max must be at least 1",
            ),
            (
                "web_connections_max = 0",
                "[server] web_connections_max must be at least 1",
            ),
            (
                "password_length_min = 0",
                "[server] password_length_min must be at least 1",
            ),
            (
                "web_request_bytes_max = 1000",
                "[server] web_request_bytes_max must be at least 1024",
            ),
            ("tls_cert = '/x.pem'", "tls_cert and tls_key go together"),
            (
                "relay_host = 'relay'",
                "relay_host 'relay' is not host:port",
            ),
            (
                "relay_host = 'relay:25'\nrelay_tls = 'maybe'",
                "relay_tls 'maybe': use may, verify or none",
            ),
            ("dns_servers = ['ns1']", "dns_servers: 'ns1' is not ip:port"),
            (
                "postmaster = 'nobody'",
                "postmaster 'nobody' is not an address",
            ),
            ("smtp = 'port 25'", "--smtp: 'port 25' is not an address"),
            ("metrics = '9187'", "metrics: '9187' is not an address"),
        ] {
            let said = refusal(&format!("[server]\n{file}\n"));
            assert!(said.contains(says), "{file}: said {said:?}");
        }
    }

    #[test]
    fn disabling_every_listener_is_refused() {
        let mut file = String::from("[server]\n");
        for name in [
            "smtp",
            "submission",
            "submissions",
            "lmtp",
            "pop3",
            "pop3s",
            "imap",
            "imaps",
            "managesieve",
        ] {
            file.push_str(&format!("{name} = ''\n"));
        }
        assert!(refusal(&file).contains("every listener is disabled"));
    }

    #[test]
    fn a_cluster_node_needs_its_secret_and_the_shared_directory() {
        assert!(refusal("[cluster]\nnode = 'a'\n").contains("node needs secret_file"));
        let secret = std::env::temp_dir().join(format!("serve-cmd-secret-{}", std::process::id()));
        std::fs::write(&secret, "0123456789abcdef0123").unwrap();
        let file = format!(
            "[cluster]\nnode = 'a'\nsecret_file = '{}'\n",
            secret.display()
        );
        assert!(refusal(&file).contains("needs [directory] url"));
        std::fs::write(&secret, "short").unwrap();
        assert!(refusal(&file).contains("holds 5 bytes"));
        std::fs::remove_file(&secret).unwrap();
    }

    #[test]
    fn replicas_are_one_to_three_and_need_a_cluster() {
        for bad in [0, 4] {
            let said = refusal(&format!("[cluster]\nreplicas = {bad}\n"));
            assert!(said.contains("replicas must be 1..=3"), "{said}");
        }
        assert!(refusal("[cluster]\nreplicas = 2\n").contains("replicas needs node"));
        server_config_of("[cluster]\nreplicas = 1\n", &ServeArgs::default())
            .expect("one copy is what a single server has");
    }
}
