//! `mailstow serve`: the configuration file's `[server]` section, overridden by listener flags,
//! turned into a `server::ServerConfig`, then served until SIGTERM.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::Args;
use server::{ServerConfig, Service, TlsSource};

use crate::node::Node;

use crate::config::Config;
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
    /// Prometheus metrics at /metrics and a health check at /healthz (`[server] metrics`).
    #[arg(long, value_name = "ADDR")]
    metrics: Option<String>,
    /// The web view (`[server] web`; default 127.0.0.1:8080).
    #[arg(long, value_name = "ADDR")]
    web: Option<String>,
}

pub(crate) fn server_config(
    args: &ServeArgs,
    paths: &Paths,
    config: &Config,
) -> Result<ServerConfig> {
    let section = &config.server;
    let mut server = ServerConfig::defaults(paths.data_dir.clone());
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
    let overrides: [(Service, &Option<String>, &Option<String>); 8] = [
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
    if let Some(v) = section.auth_without_tls {
        server.auth_without_tls = v;
    }
    if let Some(v) = section.connections_max {
        server.connections_max = v;
    }
    if let Some(v) = section.connections_per_ip_max {
        server.connections_per_ip_max = v;
    }
    if let Some(v) = section.message_bytes_max {
        server.message_bytes_max = v;
    }
    if let Some(v) = section.recipients_max {
        server.recipients_max = v;
    }
    if let Some(v) = section.imap_sessions_per_user_max {
        server.imap_sessions_per_user_max = v;
    }
    if let Some(v) = section.imap_header_cache_bytes_max {
        server.imap_header_cache_bytes_max = v;
    }
    if let Some(v) = section.imap_view_cache_bytes_max {
        server.imap_view_cache_bytes_max = v;
    }
    if let Some(v) = section.auth_failures_max {
        server.throttle.address_failures_max = v;
    }
    if let Some(v) = section.auth_user_failures_max {
        server.throttle.user_failures_max = v;
    }
    if let Some(v) = section.auth_network_failures_max {
        server.throttle.network_failures_max = v;
    }
    if let Some(v) = section.auth_failure_window_seconds {
        server.throttle.window = Duration::from_secs(v);
    }
    if let Some(v) = section.hash_concurrency_max {
        server.hash_concurrency_max = v;
    }
    if let Some(v) = section.hash_memory_bytes_max {
        server.hash_memory_bytes_max = v;
    }
    if let Some(v) = section.hash_queue_max {
        server.hash_queue_max = v;
    }
    if let Some(v) = section.inflight_bytes_max {
        server.inflight_bytes_max = v;
    }
    let seconds = |v: Option<u64>, name: &str, to: &mut Duration| -> Result<()> {
        if let Some(v) = v {
            if v == 0 {
                bail!("[server] {name} must be at least 1");
            }
            *to = Duration::from_secs(v);
        }
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
    if let Some(v) = section.transfer_rate_min {
        server.transfer_rate_min = v;
    }
    if let Some(v) = section.recipients_unknown_max {
        server.recipients_unknown_max = v;
    }
    if let Some(v) = section.tarpit_delay_ms {
        server.tarpit_delay = Duration::from_millis(v);
    }
    if let Some(v) = section.delivery_threads {
        server.delivery_threads = v;
    }
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
        server.direct = Some(server::Direct {
            dns_servers: server.dns_servers.clone(),
            mx_port: section.mx_port.unwrap_or(25),
        });
    }
    if let Some(v) = section.sender_checks {
        server.sender_checks = v;
    }
    if let Some(v) = section.dmarc_enforce {
        server.dmarc_enforce = v;
    }
    if let Some(v) = section.local_sender_check {
        server.local_sender_check = v;
    }
    if let Some(value) = args.metrics.as_ref().or(section.metrics.as_ref()) {
        let value = value.trim();
        server.metrics = if value.is_empty() {
            None
        } else {
            Some(value.parse().with_context(|| {
                format!("metrics: '{value}' is not an address like 127.0.0.1:9187")
            })?)
        };
    }
    if let Some(value) = args.web.as_ref().or(section.web.as_ref()) {
        let value = value.trim();
        server.web =
            if value.is_empty() {
                None
            } else {
                Some(value.parse().with_context(|| {
                    format!("web: '{value}' is not an address like 127.0.0.1:8080")
                })?)
            };
    }
    if let Some(v) = section.web_tls {
        server.web_tls = v;
    }
    if let Some(v) = section.web_sessions_max {
        if v == 0 {
            bail!("[server] web_sessions_max must be at least 1");
        }
        server.web_sessions_max = v;
    }
    if let Some(v) = section.web_connections_max {
        if v == 0 {
            bail!("[server] web_connections_max must be at least 1");
        }
        server.web_connections_max = v;
    }
    // 0 is allowed: COMPRESS is then always refused.
    if let Some(v) = section.imap_compress_connections_max {
        server.imap_compress_connections_max = v;
    }
    if let Some(v) = section.web_request_bytes_max {
        if v < 1024 {
            bail!("[server] web_request_bytes_max must be at least 1024");
        }
        server.web_request_bytes_max = v;
    }
    if let Some(address) = &section.postmaster {
        let address = address.trim();
        if !address.contains('@') {
            bail!("[server] postmaster '{address}' is not an address");
        }
        server.postmaster = Some(address.to_ascii_lowercase());
    }
    if let Some(url) = &config.directory.url {
        server.directory =
            Some(directory::Location::parse(url).with_context(|| "[directory] url".to_string())?);
    }
    match (&config.cluster.node, &config.cluster.secret_file) {
        (None, None) => {}
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
        }
        (Some(_), None) => bail!("[cluster] node needs secret_file"),
        (None, Some(_)) => bail!("[cluster] secret_file needs node"),
    }
    server.queue = config.queue_config();
    server.store = config.store_config();
    if server.listeners.is_empty() {
        bail!("every listener is disabled: nothing to serve");
    }
    Ok(server)
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
            (None, _) => String::new(),
        }
    );
    println!("certificate sha256: {}", certificate.sha256);
    for (service, address) in &running.addresses {
        println!("{} listening on {address}", service.name());
    }
    if let Some(address) = running.metrics {
        println!("metrics listening on {address}");
    }
    if let Some(address) = running.web {
        println!("web listening on {address}");
    }
    use std::io::Write as _;
    let _ = std::io::stdout().flush();
    tracing::info!(
        event = "started",
        data_dir = %data_dir.display(),
        certificate = %certificate_path.display(),
        sha256 = %certificate.sha256,
        listeners = running.addresses.len()
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
