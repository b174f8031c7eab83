//! Certificates by ACME (RFC 8555; docs/certificates.md): one certificate for the host name
//! and the `mta-sts.` and `autoconfig.` names of our domains, obtained at start when there is
//! none, renewed well before it ends (the `acme` crate's schedule, with backoff after a
//! failure), and put in force for every TLS listener at once (`Shell::reload_certificate`).
//! The challenges are answered by the HTTP listener (HTTP-01) or the HTTPS listener
//! (TLS-ALPN-01) from the shell's [`crate::tls::Challenges`].
//!
//! `mailstow acme renew` asks the running server through [`Renewals`]; `mailstow acme status`
//! reads the ACME directory itself.

use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use crate::shell::Shell;

/// A renewal asked by the operator, and where its outcome goes.
type Asked = tokio::sync::oneshot::Sender<Result<String, String>>;

/// Renewals asked at once at most; more are refused (`acme renew` in a loop).
const RENEWALS_ASKED_MAX: usize = 4;

/// How long the manager waits at most between two looks at the schedule, so a change of the
/// names (a domain added) is seen without a restart.
const LOOK_AGAIN_MAX: Duration = Duration::from_secs(3600);

/// How long a name's address lookup may take before it is left out of the certificate.
const NAME_LOOKUP_TIMEOUT: Duration = Duration::from_secs(5);

/// The operator's way to the running manager: `mailstow acme renew`.
pub struct Renewals {
    asks: tokio::sync::mpsc::Sender<Asked>,
    receiver: Mutex<Option<tokio::sync::mpsc::Receiver<Asked>>>,
}

impl Default for Renewals {
    fn default() -> Renewals {
        let (asks, receiver) = tokio::sync::mpsc::channel(RENEWALS_ASKED_MAX);
        Renewals {
            asks,
            receiver: Mutex::new(Some(receiver)),
        }
    }
}

impl admin::CertificateRenewal for Renewals {
    fn renew(&self) -> admin::Pending {
        let (answer, outcome) = tokio::sync::oneshot::channel();
        let asked = self.asks.try_send(answer);
        Box::pin(async move {
            match asked {
                Err(tokio::sync::mpsc::error::TrySendError::Closed(_)) => {
                    Err("this server obtains no certificate by ACME ([acme] is not set)".into())
                }
                Err(tokio::sync::mpsc::error::TrySendError::Full(_)) => {
                    Err("renewals are already asked for; try again when they are done".into())
                }
                Ok(()) => outcome
                    .await
                    .unwrap_or_else(|_| Err("the server stopped before the renewal ended".into())),
            }
        })
    }
}

/// Runs the ACME manager until the task is aborted.
pub(crate) async fn run(shell: Arc<Shell>, config: acme::Config, dir: PathBuf, renewals: Arc<Renewals>) {
    let Some(mut asks) = renewals
        .receiver
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .take()
    else {
        return;
    };
    let resolver = sender_auth::resolver(&shell.config.dns_servers, NAME_LOOKUP_TIMEOUT, 2).ok();
    loop {
        let names = names(&shell, resolver.as_ref()).await;
        let state = {
            let dir = dir.clone();
            tokio::task::spawn_blocking(move || acme::load_state(&dir))
                .await
                .ok()
                .and_then(Result::ok)
                .unwrap_or_default()
        };
        let due = acme::next_attempt(&config, &names, &state, SystemTime::now());
        let wait = due
            .duration_since(SystemTime::now())
            .unwrap_or_default()
            .min(LOOK_AGAIN_MAX);
        let asked = tokio::select! {
            asked = asks.recv() => match asked {
                Some(asked) => Some(asked),
                None => return,
            },
            () = tokio::time::sleep(wait) => {
                if SystemTime::now() < due {
                    continue;
                }
                None
            }
        };
        let outcome = obtain(&shell, &config, &dir, &names).await;
        if let Some(asked) = asked {
            let _ = asked.send(outcome);
        }
    }
}

/// One attempt: the certificate obtained and put in force, or why not. Logged either way.
async fn obtain(
    shell: &Arc<Shell>,
    config: &acme::Config,
    dir: &std::path::Path,
    names: &[String],
) -> Result<String, String> {
    let started = std::time::Instant::now();
    let obtained = acme::obtain(config, dir, names, &*shell.challenges).await;
    let issued = match obtained {
        Ok(issued) => issued,
        Err(e) => {
            tracing::warn!(
                event = "acme",
                result = "failed",
                names = %names.join(","),
                error = %e,
                msg = "certificate not obtained; tried again later"
            );
            shell.telemetry.acme(false);
            return Err(format!("certificate not obtained: {e}"));
        }
    };
    let days = issued
        .not_after
        .duration_since(SystemTime::now())
        .map_or(0, |d| d.as_secs() / 86400);
    let shell_for_reload = shell.clone();
    let reloaded = tokio::task::spawn_blocking(move || shell_for_reload.reload_certificate())
        .await
        .map_err(|e| format!("the reload failed: {e}"))
        .and_then(|r| r.map_err(|e| format!("{e:#}")));
    match reloaded {
        Ok(certificate) => {
            tracing::info!(
                event = "acme",
                result = "issued",
                names = %issued.names.join(","),
                days_left = days,
                sha256 = %certificate.sha256,
                seconds = started.elapsed().as_secs_f64(),
                msg = "certificate in force for every listener"
            );
            shell.telemetry.acme(true);
            Ok(format!(
                "certificate issued for {} ({days} days left), in force: sha256 {}\n",
                issued.names.join(", "),
                certificate.sha256
            ))
        }
        Err(e) => {
            tracing::error!(event = "acme", result = "failed", error = %e, msg = "issued but not loaded");
            shell.telemetry.acme(false);
            Err(format!("certificate issued but not loaded: {e}"))
        }
    }
}

/// The names the certificate covers: the host name, and `mta-sts.D` and `autoconfig.D` of
/// each domain D of ours whose name points at this host (the same addresses as the host
/// name's), so a name the operator has not published yet does not make the whole order fail.
async fn names(
    shell: &Shell,
    resolver: Option<&hickory_resolver::TokioResolver>,
) -> Vec<String> {
    let hostname = shell.config.hostname.to_ascii_lowercase();
    let mut names = vec![hostname.clone()];
    let Some(resolver) = resolver else {
        return names;
    };
    let domains = match shell.directory.list_domains().await {
        Ok(domains) => domains,
        Err(e) => {
            tracing::warn!(event = "acme", error = %e, msg = "domains not read; host name only");
            return names;
        }
    };
    let ours = addresses(resolver, &hostname).await;
    if ours.is_empty() {
        return names;
    }
    for domain in domains {
        for prefix in ["mta-sts", "autoconfig"] {
            let name = format!("{prefix}.{}", domain.to_ascii_lowercase());
            if names.len() >= acme::NAMES_MAX {
                return names;
            }
            let theirs = addresses(resolver, &name).await;
            if !theirs.is_empty() && theirs.iter().all(|a| ours.contains(a)) && !names.contains(&name) {
                names.push(name);
            }
        }
    }
    names
}

async fn addresses(resolver: &hickory_resolver::TokioResolver, name: &str) -> Vec<IpAddr> {
    let fqdn = format!("{}.", name.trim_end_matches('.'));
    match tokio::time::timeout(NAME_LOOKUP_TIMEOUT, resolver.lookup_ip(fqdn.as_str())).await {
        Ok(Ok(lookup)) => lookup.iter().collect(),
        _ => Vec::new(),
    }
}
