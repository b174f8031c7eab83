//! The settings a reload (SIGHUP) may change without a restart, and what is built from them:
//! the TLS acceptor (certificate and key re-read on every reload) and the protocol sessions'
//! configurations. A connection takes them once when it opens.

use std::sync::Arc;

use anyhow::Result;

use crate::config::ServerConfig;
use crate::tls;

/// The settings SIGHUP can change without a restart, and what is built from them: the TLS
/// acceptor (certificate and key re-read on every reload) and the protocol sessions'
/// configurations. Sessions already open keep what they started with.
pub(crate) struct Live {
    pub(crate) config: ServerConfig,
    pub(crate) tls: tokio_rustls::TlsAcceptor,
    /// The HTTPS listener's: the same certificate, HTTP/1.1 and ACME's TLS-ALPN-01.
    pub(crate) https: tokio_rustls::TlsAcceptor,
    pub(crate) certificate: tls::Certificate,
    pub(crate) smtp: Arc<smtp::Config>,
    pub(crate) submission: Arc<smtp::Config>,
    pub(crate) lmtp: Arc<smtp::Config>,
    pub(crate) pop3: Arc<pop3::Config>,
    pub(crate) imap: Arc<imap::Config>,
    pub(crate) managesieve: Arc<managesieve::Config>,
}

impl Live {
    pub(crate) fn build(
        config: ServerConfig,
        inflight: &Arc<limits::ByteBudget>,
        challenges: &Arc<tls::Challenges>,
    ) -> Result<Live> {
        if config.inflight_bytes_max < config.message_bytes_max {
            anyhow::bail!(
                "inflight_bytes_max ({}) must be at least message_bytes_max ({}): a message \
                 of the largest size could never be received",
                config.inflight_bytes_max,
                config.message_bytes_max
            );
        }
        let (acceptors, certificate) = tls::load(&config.tls, challenges)?;
        let smtp_config = |mode: smtp::Mode| {
            Arc::new(smtp::Config {
                hostname: config.hostname.clone(),
                mode,
                message_bytes_max: config.message_bytes_max,
                recipients_max: config.recipients_max,
                tls_available: true,
                auth_without_tls: config.auth_without_tls,
                require_auth: mode == smtp::Mode::Submission,
                command_deadline: config.command_deadline,
                transfer_deadline: config.transfer_deadline,
                transfer_rate_min: config.transfer_rate_min,
                transfer_deadline_max: config.transfer_deadline_max,
                login_deadline: config.login_deadline,
                inflight: Some(inflight.clone()),
                ..smtp::Config::default()
            })
        };
        Ok(Live {
            tls: acceptors.mail,
            https: acceptors.https,
            certificate,
            smtp: smtp_config(smtp::Mode::Mx),
            submission: smtp_config(smtp::Mode::Submission),
            lmtp: {
                let mut lmtp = (*smtp_config(smtp::Mode::Lmtp)).clone();
                lmtp.cluster_routes = config.cluster.is_some();
                Arc::new(lmtp)
            },
            pop3: Arc::new(pop3::Config {
                hostname: config.hostname.clone(),
                tls_available: true,
                plaintext_auth: config.auth_without_tls,
                login_deadline: config.login_deadline,
                command_deadline: config.command_deadline,
                ..pop3::Config::default()
            }),
            imap: Arc::new(imap::Config {
                hostname: config.hostname.clone(),
                plaintext_auth: config.auth_without_tls,
                starttls: true,
                literal_bytes_max: config.message_bytes_max,
                command_bytes_max: config.message_bytes_max + (16 << 20),
                login_deadline: config.login_deadline,
                command_deadline: config.command_deadline,
                transfer_rate_min: config.transfer_rate_min,
                command_deadline_max: config.transfer_deadline_max,
                idle_deadline: config.idle_deadline,
                inflight: Some(inflight.clone()),
                ..imap::Config::default()
            }),
            managesieve: Arc::new(managesieve_config(&config)),
            config,
        })
    }
}

/// ManageSieve's sessions: the interpreter's extensions and script bound, the same rule for
/// PLAIN without TLS as IMAP's LOGINDISABLED (`auth_without_tls`), and the deadlines of the
/// other protocols (a script literal is timed like an IMAP literal).
fn managesieve_config(config: &ServerConfig) -> managesieve::Config {
    managesieve::Config {
        implementation: format!("mailstow {}", env!("CARGO_PKG_VERSION")),
        sieve_extensions: sieve::EXTENSIONS.iter().map(|e| (*e).to_owned()).collect(),
        max_redirects: u32::try_from(config.sieve.redirects_max).ok(),
        tls_available: true,
        plaintext_auth: config.auth_without_tls,
        // The shell decides (`login::authzid_allowed`, and a node's pre-authentication), as
        // for IMAP and POP3.
        authzid_allowed: true,
        script_bytes_max: config.sieve.script_bytes_max,
        login_deadline: config.login_deadline,
        command_deadline: config.command_deadline,
        literal_deadline: config.transfer_deadline,
        literal_rate_min: config.transfer_rate_min,
        literal_deadline_max: config.transfer_deadline_max,
        ..managesieve::Config::default()
    }
}
