//! The one configuration file (TOML). Every key is optional; the defaults run a small server.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

/// The data directory used when neither `--data-dir` nor the config file names one.
pub(crate) const DATA_DIR_DEFAULT: &str = "./mailstow-data";

#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Config {
    pub(crate) data_dir: Option<PathBuf>,
    #[serde(default)]
    pub(crate) queue: QueueSection,
    #[serde(default)]
    pub(crate) store: StoreSection,
    #[serde(default)]
    pub(crate) server: ServerSection,
    #[serde(default)]
    pub(crate) log: LogSection,
    #[serde(default)]
    pub(crate) directory: DirectorySection,
    #[serde(default)]
    pub(crate) cluster: ClusterSection,
    #[serde(default)]
    pub(crate) spam: crate::spam_config::SpamSection,
    /// Certificates by ACME (docs/certificates.md); absent: none.
    pub(crate) acme: Option<AcmeSection>,
}

/// `[acme]`: where and how the server obtains its certificate (RFC 8555).
#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct AcmeSection {
    /// The ACME server's directory URL (https), e.g.
    /// `https://acme-v02.api.letsencrypt.org/directory`.
    pub(crate) directory_url: String,
    /// Contact addresses for the account, `mailto:` URLs.
    #[serde(default)]
    pub(crate) contact: Vec<String>,
    /// A PEM file of CA certificates trusted for the ACME server's HTTPS (a private ACME
    /// server); the Mozilla roots are trusted anyway.
    pub(crate) ca_file: Option<PathBuf>,
    /// `http-01` (port 80, the default) or `tls-alpn-01` (port 443).
    pub(crate) challenge: Option<String>,
    /// Renew when this many days remain (default: when a third of the lifetime remains, at
    /// most 30 days).
    pub(crate) renew_before_days: Option<u64>,
    /// A new key at each renewal (default false: the key is kept, so a TLSA 3 1 1 record
    /// stays valid).
    pub(crate) rotate_key: Option<bool>,
}

/// `[directory]`: where the directory lives.
#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct DirectorySection {
    /// `postgres://user@host:port/db`: the directory every node of a cluster shares. Absent:
    /// the SQLite file `directory.db` in the data directory.
    pub(crate) url: Option<String>,
}

/// `[cluster]`: this node's place in a cluster (needs `[directory] url`).
#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ClusterSection {
    /// This node's name, as `mailstow node add` registered it.
    pub(crate) node: Option<String>,
    /// A file holding the secret the nodes share to authenticate each other.
    pub(crate) secret_file: Option<PathBuf>,
    /// Copies handed over by other nodes that this node remembers having stored, so that a
    /// retry is not stored twice (default 1,000,000; the oldest are forgotten first).
    pub(crate) delivered_max: Option<usize>,
    /// Copies of each mailbox and queued message, on this many nodes (default 1,
    /// [`REPLICAS_MAX`] at most); 2 gives every node a replica partner. Replication itself
    /// lands with issue 40: the key is read and checked, nothing acts on it yet.
    pub(crate) replicas: Option<u8>,
}

/// The most copies `[cluster] replicas` may ask for: each copy is one more node's `fdatasync`
/// before every `250`.
pub(crate) const REPLICAS_MAX: u8 = 3;

/// `[log]`: where the mail log goes and how much of it.
#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct LogSection {
    /// error, warn, info (default), debug or trace; `RUST_LOG` overrides it.
    pub(crate) level: Option<String>,
    /// Append to this file instead of writing to stderr; reopened on SIGHUP (logrotate).
    pub(crate) file: Option<PathBuf>,
}

/// `[server]`: listeners, TLS and limits of `mailstow serve`. Listener addresses are strings so
/// that an empty one disables the listener.
#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ServerSection {
    pub(crate) hostname: Option<String>,
    pub(crate) smtp: Option<String>,
    pub(crate) submission: Option<String>,
    pub(crate) submissions: Option<String>,
    pub(crate) lmtp: Option<String>,
    pub(crate) pop3: Option<String>,
    pub(crate) pop3s: Option<String>,
    pub(crate) imap: Option<String>,
    pub(crate) imaps: Option<String>,
    /// ManageSieve (RFC 5804) with STARTTLS (default 0.0.0.0:4190; empty: off), and over
    /// implicit TLS (default off).
    pub(crate) managesieve: Option<String>,
    pub(crate) managesieves: Option<String>,
    /// PEM certificate chain and private key; without them a self-signed pair is generated in
    /// `<data_dir>/tls` on first start.
    pub(crate) tls_cert: Option<PathBuf>,
    pub(crate) tls_key: Option<PathBuf>,
    pub(crate) auth_without_tls: Option<bool>,
    pub(crate) connections_max: Option<usize>,
    pub(crate) connections_per_ip_max: Option<usize>,
    pub(crate) message_bytes_max: Option<u64>,
    pub(crate) recipients_max: Option<usize>,
    /// IMAP sessions one user may have at once.
    pub(crate) imap_sessions_per_user_max: Option<usize>,
    /// Memory for the header fields IMAP SEARCH caches, all users together.
    pub(crate) imap_header_cache_bytes_max: Option<usize>,
    /// Memory for folder views IMAP SELECT shares between sessions.
    pub(crate) imap_view_cache_bytes_max: Option<usize>,
    /// Failed logins from one address (all user names) in `auth_failure_window_seconds`
    /// before further attempts are refused unchecked.
    pub(crate) auth_failures_max: Option<u32>,
    /// Failed logins of one user name from one address.
    pub(crate) auth_user_failures_max: Option<u32>,
    /// Failed logins from one /24 (IPv4) or /64 (IPv6) network.
    pub(crate) auth_network_failures_max: Option<u32>,
    pub(crate) auth_failure_window_seconds: Option<u64>,
    /// Password verifications at once (threads), the argon2 memory one may use, and how many
    /// may wait.
    pub(crate) hash_concurrency_max: Option<usize>,
    pub(crate) hash_memory_bytes_max: Option<usize>,
    pub(crate) hash_queue_max: Option<usize>,
    /// The shortest password `user add`, `user passwd`, `user import`, the web view and the
    /// admin pages accept, in characters (default 8).
    pub(crate) password_length_min: Option<usize>,
    /// Users' Sieve rules (docs/limits.md "Sieve"): scripts per user (default 16), a
    /// script's bytes (64 KiB), commands and tests one run evaluates (10,000), header
    /// fields one run adds or deletes (32), redirects one run makes (4), nested includes
    /// (5).
    pub(crate) sieve_scripts_max: Option<usize>,
    pub(crate) sieve_script_bytes_max: Option<usize>,
    pub(crate) sieve_instructions_max: Option<u64>,
    pub(crate) sieve_header_edits_max: Option<usize>,
    pub(crate) sieve_redirects_max: Option<usize>,
    pub(crate) sieve_include_depth_max: Option<usize>,
    /// Message bytes in memory, all connections together (SMTP content, IMAP literals).
    pub(crate) inflight_bytes_max: Option<u64>,
    /// Free space kept on the data directory's file system: below it new mail is refused
    /// (SMTP 452 at MAIL, IMAP APPEND `NO`) and delivery pauses, until space comes back.
    pub(crate) disk_reserve_bytes: Option<u64>,
    /// Total time from connect to login (submission, POP3, IMAP, ManageSieve).
    pub(crate) login_deadline_seconds: Option<u64>,
    /// Total time for one command line (with an IMAP command's literals) to arrive.
    pub(crate) command_deadline_seconds: Option<u64>,
    /// Total time for a message transfer: this plus a second per `transfer_rate_min` bytes,
    /// at most `transfer_deadline_max_seconds`.
    pub(crate) transfer_deadline_seconds: Option<u64>,
    pub(crate) transfer_rate_min: Option<u64>,
    pub(crate) transfer_deadline_max_seconds: Option<u64>,
    /// The longest IMAP IDLE.
    pub(crate) idle_deadline_seconds: Option<u64>,
    /// Unknown recipients an SMTP session may name before each RCPT is delayed by
    /// `tarpit_delay_ms`; at twice as many the session is closed.
    pub(crate) recipients_unknown_max: Option<usize>,
    pub(crate) tarpit_delay_ms: Option<u64>,
    pub(crate) delivery_threads: Option<usize>,
    /// Smarthost for mail to other domains, `host:port`.
    pub(crate) relay_host: Option<String>,
    /// `may` (default: STARTTLS when offered), `verify` (required and verified) or `none`.
    pub(crate) relay_tls: Option<String>,
    /// Without a relay: deliver to each domain's MX hosts found in DNS (default false: such
    /// mail waits in the deferred queue).
    pub(crate) direct_delivery: Option<bool>,
    /// Name servers for SPF/DKIM/DMARC checks and direct delivery, `ip:port` (default:
    /// /etc/resolv.conf).
    pub(crate) dns_servers: Option<Vec<String>>,
    /// SPF, DKIM and DMARC checks of mail on the MX port (default true).
    pub(crate) sender_checks: Option<bool>,
    /// Refuse mail failing DMARC under `p=reject` (default true); false: record it only.
    pub(crate) dmarc_enforce: Option<bool>,
    /// Refuse unauthenticated MX mail from our own domains unless SPF or DKIM passes for it
    /// (default true).
    pub(crate) local_sender_check: Option<bool>,
    /// The exchangers' port (default 25; another only on test networks).
    pub(crate) mx_port: Option<u16>,
    /// Apply recipient domains' MTA-STS policies to direct delivery (RFC 8461; default true).
    pub(crate) outbound_mta_sts: Option<bool>,
    /// Authenticate exchangers by DNSSEC-validated TLSA records (RFC 7672; default true). It
    /// needs `dns_servers` to be a validating resolver, which sets the AD bit.
    pub(crate) outbound_dane: Option<bool>,
    /// A PEM file of CA certificates trusted for outbound TLS besides the Mozilla roots
    /// (MTA-STS policy hosts, exchangers under a policy): a private CA.
    pub(crate) tls_roots_file: Option<PathBuf>,
    /// The MTA-STS policy hosts' HTTPS port (default 443; another only on test networks).
    pub(crate) mta_sts_port: Option<u16>,
    /// Serve Prometheus metrics at `/metrics` and a health check at `/healthz` on this
    /// address (default: off). Bind it to loopback or a private network.
    pub(crate) metrics: Option<String>,
    /// The web view on this address (default 127.0.0.1:8080; empty: off).
    pub(crate) web: Option<String>,
    /// Serve the web view over HTTPS with the server's certificate (default false).
    pub(crate) web_tls: Option<bool>,
    /// The public HTTPS listener: the web view, the client autoconfiguration documents, the
    /// MTA-STS policy and ACME's TLS-ALPN-01 (default 0.0.0.0:443 with `[acme]`, else off;
    /// empty: off).
    pub(crate) https: Option<String>,
    /// The plain HTTP listener: ACME's HTTP-01 challenges and Thunderbird's autoconfig,
    /// everything else redirected to HTTPS (default 0.0.0.0:80 with `[acme]`, else off;
    /// empty: off).
    pub(crate) http: Option<String>,
    /// The MTA-STS policy mode we publish for our domains: enforce, testing, none or off
    /// (default enforce with `[acme]` or `tls_cert`, whose certificates senders can verify;
    /// else off).
    pub(crate) mta_sts: Option<String>,
    /// How long senders may cache our MTA-STS policy, in seconds (default 604,800, a week).
    pub(crate) mta_sts_max_age_seconds: Option<u64>,
    /// Logged-in web sessions at once (default 10,000).
    pub(crate) web_sessions_max: Option<usize>,
    /// The largest web request body in bytes (default 65,536).
    pub(crate) web_request_bytes_max: Option<usize>,
    /// Web connections at once (default 1,024; one more is closed at once).
    pub(crate) web_connections_max: Option<usize>,
    /// IMAP connections compressed (COMPRESS=DEFLATE) at once (default 1,000; one more is
    /// answered `NO [LIMIT]` and stays uncompressed).
    pub(crate) imap_compress_connections_max: Option<usize>,
    /// Where mail to `postmaster@` of a local domain goes when the domain has no such user
    /// or alias (RFC 5321 4.5.1; default: the domain's first user).
    pub(crate) postmaster: Option<String>,
}

#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct QueueSection {
    /// Largest and smallest new segment (a new one is as large as the queue's segments
    /// together, between the two).
    pub(crate) segment_bytes: Option<u64>,
    pub(crate) segment_bytes_min: Option<u64>,
}

#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct StoreSection {
    pub(crate) reservation_bytes: Option<u64>,
    pub(crate) defrag_on_delete: Option<bool>,
    /// Largest and smallest step the volume grows by (a step is as large as the volume).
    pub(crate) volume_grow_bytes: Option<u64>,
    pub(crate) volume_grow_bytes_min: Option<u64>,
    /// Largest and smallest journal between checkpoints (it may hold as much as the last
    /// snapshot).
    pub(crate) journal_checkpoint_bytes: Option<u64>,
    pub(crate) journal_bytes_min: Option<u64>,
    pub(crate) defrag_move_bytes_max: Option<u64>,
    /// Folders one user may have (default 1,000).
    pub(crate) folders_per_user_max: Option<usize>,
    /// Longest folder name in bytes (default 255) and deepest hierarchy (default 16).
    pub(crate) folder_name_bytes_max: Option<usize>,
    pub(crate) folder_depth_max: Option<usize>,
}

impl Config {
    /// Reads `path`, or returns the defaults when no file is given.
    pub(crate) fn load(path: Option<&Path>) -> Result<Config> {
        let Some(path) = path else {
            return Ok(Config::default());
        };
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read config file {}", path.display()))?;
        toml::from_str(&text).map_err(|error| {
            // toml's Display draws a multi-line excerpt; an operator's error is one line.
            let line = error
                .span()
                .map(|span| text[..span.start].matches('\n').count() + 1);
            let place = line.map(|n| format!(" line {n}")).unwrap_or_default();
            anyhow::anyhow!(
                "config file {}{place}: {}",
                path.display(),
                error.message().trim()
            )
        })
    }

    /// This file with every key filled in as the server would run it: what `config check`
    /// prints.
    pub(crate) fn effective(&self, data_dir: &Path, server: &server::ServerConfig) -> Config {
        let listener = |service: server::Service| {
            Some(
                server
                    .listeners
                    .iter()
                    .find(|(s, _)| *s == service)
                    .map(|(_, address)| address.to_string())
                    .unwrap_or_default(),
            )
        };
        let (tls_cert, tls_key) = match &server.tls {
            server::TlsSource::Files { cert, key } => (Some(cert.clone()), Some(key.clone())),
            server::TlsSource::SelfSigned { .. } | server::TlsSource::Acme { .. } => (None, None),
        };
        let queue = server.queue.clone();
        let store = &server.store;
        Config {
            data_dir: Some(data_dir.to_path_buf()),
            queue: QueueSection {
                segment_bytes: Some(queue.segment_bytes),
                segment_bytes_min: Some(queue.segment_bytes_min),
            },
            store: StoreSection {
                reservation_bytes: Some(store.reservation_bytes),
                defrag_on_delete: Some(store.defrag_on_delete),
                volume_grow_bytes: Some(store.volume_grow_bytes),
                volume_grow_bytes_min: Some(store.volume_grow_bytes_min),
                journal_checkpoint_bytes: Some(store.journal_checkpoint_bytes),
                journal_bytes_min: Some(store.journal_bytes_min),
                defrag_move_bytes_max: Some(store.defrag_move_bytes_max),
                folders_per_user_max: Some(store.folders_per_user_max),
                folder_name_bytes_max: Some(store.folder_name_bytes_max),
                folder_depth_max: Some(store.folder_depth_max),
            },
            server: ServerSection {
                hostname: Some(server.hostname.clone()),
                smtp: listener(server::Service::Smtp),
                submission: listener(server::Service::Submission),
                submissions: listener(server::Service::Submissions),
                lmtp: listener(server::Service::Lmtp),
                pop3: listener(server::Service::Pop3),
                pop3s: listener(server::Service::Pop3s),
                imap: listener(server::Service::Imap),
                imaps: listener(server::Service::Imaps),
                managesieve: listener(server::Service::ManageSieve),
                managesieves: listener(server::Service::ManageSieves),
                tls_cert,
                tls_key,
                auth_without_tls: Some(server.auth_without_tls),
                connections_max: Some(server.connections_max),
                connections_per_ip_max: Some(server.connections_per_ip_max),
                message_bytes_max: Some(server.message_bytes_max),
                recipients_max: Some(server.recipients_max),
                imap_sessions_per_user_max: Some(server.imap_sessions_per_user_max),
                imap_header_cache_bytes_max: Some(server.imap_header_cache_bytes_max),
                imap_view_cache_bytes_max: Some(server.imap_view_cache_bytes_max),
                auth_failures_max: Some(server.throttle.address_failures_max),
                auth_user_failures_max: Some(server.throttle.user_failures_max),
                auth_network_failures_max: Some(server.throttle.network_failures_max),
                auth_failure_window_seconds: Some(server.throttle.window.as_secs()),
                hash_concurrency_max: Some(server.hash_concurrency_max),
                hash_memory_bytes_max: Some(server.hash_memory_bytes_max),
                hash_queue_max: Some(server.hash_queue_max),
                password_length_min: Some(server.password_length_min),
                sieve_scripts_max: Some(server.sieve_scripts_max),
                sieve_script_bytes_max: Some(server.sieve.script_bytes_max),
                sieve_instructions_max: Some(server.sieve.instructions_max),
                sieve_header_edits_max: Some(server.sieve.header_edits_max),
                sieve_redirects_max: Some(server.sieve.redirects_max),
                sieve_include_depth_max: Some(server.sieve.include_depth_max),
                inflight_bytes_max: Some(server.inflight_bytes_max),
                disk_reserve_bytes: Some(server.disk_reserve_bytes),
                login_deadline_seconds: Some(server.login_deadline.as_secs()),
                command_deadline_seconds: Some(server.command_deadline.as_secs()),
                transfer_deadline_seconds: Some(server.transfer_deadline.as_secs()),
                transfer_rate_min: Some(server.transfer_rate_min),
                transfer_deadline_max_seconds: Some(server.transfer_deadline_max.as_secs()),
                idle_deadline_seconds: Some(server.idle_deadline.as_secs()),
                recipients_unknown_max: Some(server.recipients_unknown_max),
                tarpit_delay_ms: Some(server.tarpit_delay.as_millis() as u64),
                delivery_threads: Some(server.delivery_threads),
                relay_host: server
                    .relay
                    .as_ref()
                    .map(|r| format!("{}:{}", r.host, r.port)),
                relay_tls: server.relay.as_ref().map(|r| r.tls.name().to_string()),
                direct_delivery: Some(server.direct.is_some()),
                dns_servers: Some(server.dns_servers.iter().map(|a| a.to_string()).collect()),
                sender_checks: Some(server.sender_checks),
                dmarc_enforce: Some(server.dmarc_enforce),
                local_sender_check: Some(server.local_sender_check),
                mx_port: server.direct.as_ref().map(|d| d.mx_port),
                outbound_mta_sts: server.direct.as_ref().map(|d| d.transport.mta_sts),
                outbound_dane: server.direct.as_ref().map(|d| d.transport.dane),
                tls_roots_file: self.server.tls_roots_file.clone(),
                mta_sts_port: server.direct.as_ref().map(|d| d.transport.https_port),
                metrics: Some(server.metrics.map(|a| a.to_string()).unwrap_or_default()),
                web: Some(server.web.map(|a| a.to_string()).unwrap_or_default()),
                web_tls: Some(server.web_tls),
                https: Some(server.https.map(|a| a.to_string()).unwrap_or_default()),
                http: Some(server.http.map(|a| a.to_string()).unwrap_or_default()),
                mta_sts: Some(server.mta_sts.map_or("off", |m| m.mode.name()).to_string()),
                mta_sts_max_age_seconds: Some(
                    server
                        .mta_sts
                        .map_or(server::MTA_STS_MAX_AGE, |m| m.max_age)
                        .as_secs(),
                ),
                web_sessions_max: Some(server.web_sessions_max),
                web_request_bytes_max: Some(server.web_request_bytes_max),
                web_connections_max: Some(server.web_connections_max),
                imap_compress_connections_max: Some(server.imap_compress_connections_max),
                postmaster: server.postmaster.clone(),
            },
            log: LogSection {
                level: Some(self.log.level.clone().unwrap_or_else(|| "info".into())),
                file: self.log.file.clone(),
            },
            directory: DirectorySection {
                // Shown without its password.
                url: self.directory.url.as_deref().map(|url| {
                    directory::Location::parse(url)
                        .map_or_else(|_| url.to_owned(), |location| location.to_string())
                }),
            },
            spam: crate::spam_config::SpamSection::effective(&server.spam),
            acme: server.acme.as_ref().map(|acme| AcmeSection {
                directory_url: acme.directory_url.clone(),
                contact: acme.contact.clone(),
                ca_file: acme.extra_roots_pem.clone(),
                challenge: Some(
                    match acme.challenge {
                        acme::Challenge::Http01 => "http-01",
                        acme::Challenge::TlsAlpn01 => "tls-alpn-01",
                    }
                    .to_string(),
                ),
                renew_before_days: acme.renew_before.map(|d| d.as_secs() / 86400),
                rotate_key: Some(acme.rotate_key),
            }),
            cluster: ClusterSection {
                node: self.cluster.node.clone(),
                secret_file: self.cluster.secret_file.clone(),
                delivered_max: self.cluster.node.as_ref().map(|_| {
                    self.cluster.delivered_max.unwrap_or(
                        server::ServerConfig::defaults(PathBuf::new()).cluster_delivered_max,
                    )
                }),
                replicas: self
                    .cluster
                    .node
                    .as_ref()
                    .map(|_| self.cluster.replicas.unwrap_or(1)),
            },
        }
    }

    pub(crate) fn queue_config(&self) -> queue::QueueConfig {
        let mut config = queue::QueueConfig::default();
        if let Some(bytes) = self.queue.segment_bytes {
            config.segment_bytes = bytes;
        }
        if let Some(bytes) = self.queue.segment_bytes_min {
            config.segment_bytes_min = bytes;
        }
        config
    }

    pub(crate) fn store_config(&self) -> store::StoreConfig {
        let mut config = store::StoreConfig::default();
        if let Some(bytes) = self.store.reservation_bytes {
            config.reservation_bytes = bytes;
        }
        if let Some(on) = self.store.defrag_on_delete {
            config.defrag_on_delete = on;
        }
        if let Some(bytes) = self.store.volume_grow_bytes {
            config.volume_grow_bytes = bytes;
        }
        if let Some(bytes) = self.store.volume_grow_bytes_min {
            config.volume_grow_bytes_min = bytes;
        }
        if let Some(bytes) = self.store.journal_checkpoint_bytes {
            config.journal_checkpoint_bytes = bytes;
        }
        if let Some(bytes) = self.store.journal_bytes_min {
            config.journal_bytes_min = bytes;
        }
        if let Some(bytes) = self.store.defrag_move_bytes_max {
            config.defrag_move_bytes_max = bytes;
        }
        if let Some(n) = self.store.folders_per_user_max {
            config.folders_per_user_max = n;
        }
        if let Some(n) = self.store.folder_name_bytes_max {
            config.folder_name_bytes_max = n;
        }
        if let Some(n) = self.store.folder_depth_max {
            config.folder_depth_max = n;
        }
        config
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_keys_are_refused() {
        let error = toml::from_str::<Config>("data_dir = 'x'\nbogus = 1\n").unwrap_err();
        assert!(error.to_string().contains("bogus"));
    }

    #[test]
    fn sections_apply() {
        let config: Config =
            toml::from_str("[queue]\nsegment_bytes = 2097152\n[store]\ndefrag_on_delete = false\n")
                .unwrap();
        assert_eq!(config.queue_config().segment_bytes, 2 << 20);
        assert!(!config.store_config().defrag_on_delete);
    }

    /// `contrib/mailstow.toml` parses and names the systemd unit's data directory, absolute,
    /// so the CLI run with it finds the server's data from any folder.
    #[test]
    fn the_contrib_config_names_the_units_data_directory() {
        let text = include_str!("../../../contrib/mailstow.toml");
        let config: Config = toml::from_str(text).expect("contrib/mailstow.toml parses");
        let data_dir = config
            .data_dir
            .expect("contrib/mailstow.toml sets data_dir");
        assert!(data_dir.is_absolute(), "{}", data_dir.display());
        let unit = include_str!("../../../contrib/mailstow.service");
        let state = unit
            .lines()
            .find_map(|l| l.strip_prefix("StateDirectory="))
            .expect("the unit has a StateDirectory");
        assert_eq!(data_dir, Path::new("/var/lib").join(state.trim()));
        assert!(unit.contains(&format!("--data-dir {}", data_dir.display())));
    }

    #[test]
    fn directory_and_cluster_sections_parse() {
        let config: Config = toml::from_str(
            "[directory]\nurl = 'postgres://mail@db:5432/mail'\n\
             [cluster]\nnode = 'n1'\nsecret_file = '/etc/mailstow/secret'\n",
        )
        .unwrap();
        assert_eq!(
            config.directory.url.as_deref(),
            Some("postgres://mail@db:5432/mail")
        );
        assert_eq!(config.cluster.node.as_deref(), Some("n1"));
        assert_eq!(
            config.cluster.secret_file.as_deref(),
            Some(Path::new("/etc/mailstow/secret"))
        );
        assert!(toml::from_str::<Config>("[cluster]\nbogus = 1\n").is_err());
        let replicated: Config = toml::from_str("[cluster]\nreplicas = 2\n").unwrap();
        assert_eq!(replicated.cluster.replicas, Some(2));
        assert!(toml::from_str::<Config>("[cluster]\nreplicas = 256\n").is_err());
    }
}
