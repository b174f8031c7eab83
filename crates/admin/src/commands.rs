//! The operator's commands on a running server: what each admin socket request (and each
//! admin page action) does, with the handles it needs and nothing more.

use std::path::PathBuf;
use std::sync::Arc;

use queue::Queue;

use crate::format::{
    format_deleted, format_list, format_queue_stats, format_renamed, format_show,
    format_store_stats, format_user_list, format_user_show, one_line,
};
use crate::request::Request;

/// The failed-login blocks an operator can list and lift (`auth blocked`, `auth unblock`):
/// the server's throttle.
pub trait LoginBlocks: Send + Sync {
    /// Every block in force: its key (address, network or user), failures, and seconds
    /// until it lifts.
    fn blocked(&self) -> Vec<(String, u32, std::time::Duration)>;
    /// Clears the counters of an address, a network or a user; how many were cleared.
    fn unblock(&self, what: &str) -> usize;
}

/// A renewal's outcome, to await: the text to print, or why it failed.
pub type Pending =
    std::pin::Pin<Box<dyn std::future::Future<Output = Result<String, String>> + Send>>;

/// The running server's certificate manager (`mailstow acme renew`).
pub trait CertificateRenewal: Send + Sync {
    /// Orders the certificate now and puts it in force.
    fn renew(&self) -> Pending;
}

/// The running server's report sender (`mailstow report send`).
pub trait ReportSending: Send + Sync {
    /// Sends the TLS-RPT and DMARC reports due at `now` (Unix seconds); one line per report.
    fn send_due(&self, now: Option<i64>) -> Pending;
}

/// What the operator's commands act on while the server runs.
pub struct Operations {
    pub data_dir: PathBuf,
    /// This node's name in the admin pages (the cluster's, or the host name).
    pub node_name: String,
    pub queue: Arc<Queue>,
    pub store: Arc<store::Store>,
    pub directory: directory::Directory,
    /// Removing and renaming users' mail (and the node, in a cluster).
    pub accounts: mailboxes::Accounts,
    /// The road an import takes into the store.
    pub deposit: Arc<mailboxes::Deposit>,
    /// Delivery's signal: a retried message goes at once.
    pub wakeup: Arc<delivery::Wakeup>,
    pub telemetry: Arc<telemetry::Telemetry>,
    pub logins: Arc<dyn LoginBlocks>,
    /// The spam filter: `spam train`, `spam stats`, `spam release` (docs/spam.md).
    pub filter: Option<Arc<filter::Filter>>,
    /// The ACME certificate manager (`acme renew`); `None` without `[acme]`.
    pub certificates: Option<Arc<dyn CertificateRenewal>>,
    /// The TLS-RPT and DMARC report sender (`report send`); `None` when reports are off.
    pub reports: Option<Arc<dyn ReportSending>>,
}

/// Runs a queue `request` on `queue` and returns the text to print.
pub fn execute(queue: &Queue, request: &Request) -> Result<Vec<u8>, queue::QueueError> {
    Ok(match request {
        Request::List => format_list(&queue.list()?).into_bytes(),
        Request::Show(id) => format_show(&queue.show(*id)?),
        Request::Retry(id) => {
            queue.retry(*id)?;
            format!("retried {id}\n").into_bytes()
        }
        Request::Remove(id) => {
            queue.remove(*id)?;
            format!("removed {id}\n").into_bytes()
        }
        Request::QueueStats => format_queue_stats(&queue.stats()).into_bytes(),
        _ => b"this command needs the running server\n".to_vec(),
    })
}

impl Operations {
    fn spam_parts(&self) -> crate::spam::SpamParts<'_> {
        crate::spam::SpamParts {
            filter: self.filter.as_ref(),
            directory: &self.directory,
            store: &self.store,
        }
    }

    /// Runs one request on the running server.
    pub async fn run(&self, request: Request) -> Result<Vec<u8>, String> {
        let ctx = self;
        match request {
            Request::DeleteUser(address) => ctx
                .accounts
                .delete_user(&address)
                .await
                .map(|(user, deleted, node)| {
                    format_deleted(&user, &deleted, node.as_deref()).into_bytes()
                })
                .map_err(|e| format!("{e:#}")),
            Request::RenameUser(old, new) => ctx
                .accounts
                .rename_user(&old, &new)
                .await
                .map(|(old, new, moved)| format_renamed(&old, &new, &moved).into_bytes())
                .map_err(|e| format!("{e:#}")),
            Request::UserList(domain) => {
                let users = ctx
                    .directory
                    .list_users(domain.as_deref())
                    .await
                    .map_err(|e| e.to_string())?;
                let store = ctx.store.clone();
                tokio::task::spawn_blocking(move || format_user_list(&users, Some(&store)))
                    .await
                    .map(String::into_bytes)
                    .map_err(|e| format!("the command failed: {e}"))
            }
            Request::UserShow(address) => {
                let user = ctx
                    .directory
                    .user(&address)
                    .await
                    .map_err(|e| e.to_string())?
                    .ok_or_else(|| format!("no such user: {}", one_line(&address)))?;
                let store = ctx.store.clone();
                tokio::task::spawn_blocking(move || format_user_show(&user, Some(&store)))
                    .await
                    .map(String::into_bytes)
                    .map_err(|e| format!("the command failed: {e}"))
            }
            Request::AuthBlocked => {
                let blocked = ctx.logins.blocked();
                let mut out = String::new();
                for (key, failures, remaining) in &blocked {
                    out.push_str(&format!(
                        "{key} failures={failures} lifts_in={}s\n",
                        remaining.as_secs()
                    ));
                }
                out.push_str(&format!("{} blocked\n", blocked.len()));
                Ok(out.into_bytes())
            }
            Request::SpamTrain {
                user,
                spam,
                mailbox,
                site,
            } => crate::spam::train(&ctx.spam_parts(), &user, spam, &mailbox, site).await,
            Request::SpamStats(user) => crate::spam::stats(&ctx.spam_parts(), &user).await,
            Request::SpamRelease(user) => crate::spam::release(&ctx.spam_parts(), &user),
            Request::AcmeRenew => match &ctx.certificates {
                Some(certificates) => certificates.renew().await.map(String::into_bytes),
                None => {
                    Err("this server obtains no certificate by ACME ([acme] is not set)".into())
                }
            },
            Request::ReportSend(now) => match &ctx.reports {
                Some(reports) => reports.send_due(now).await.map(String::into_bytes),
                None => Err("this server sends no reports".into()),
            },
            Request::AuthUnblock(what) => {
                let cleared = ctx.logins.unblock(&what);
                tracing::info!(event = "unblocked", what = %one_line(&what), counters = cleared);
                Ok(format!(
                    "unblocked {}: {cleared} counters cleared\n",
                    one_line(&what)
                )
                .into_bytes())
            }
            Request::StoreStats => {
                let store = ctx.store.clone();
                tokio::task::spawn_blocking(move || format_store_stats(&store.stats()).into_bytes())
                    .await
                    .map_err(|e| format!("the command failed: {e}"))
            }
            Request::StoreCheck => {
                let store = ctx.store.clone();
                let report = tokio::task::spawn_blocking(move || store.fsck(false, &mut |_, _| {}))
                    .await
                    .map_err(|e| format!("the command failed: {e}"))?
                    .map_err(|e| e.to_string())?;
                tracing::info!(event = "store_fsck", clean = report.is_clean());
                Ok(format!("{report}\n").into_bytes())
            }
            Request::DirectoryChanged => {
                ctx.directory
                    .cache()
                    .refresh_if_changed()
                    .await
                    .map_err(|e| format!("reloading the directory: {e}"))?;
                Ok(b"directory reloaded\n".to_vec())
            }
            request => {
                let queue = ctx.queue.clone();
                let retry = matches!(request, Request::Retry(_));
                let result = tokio::task::spawn_blocking(move || execute(&queue, &request)).await;
                match result {
                    Ok(Ok(output)) => {
                        if retry {
                            // Delivery threads idle until woken or their poll interval.
                            ctx.wakeup.notify();
                        }
                        Ok(output)
                    }
                    Ok(Err(e)) => Err(e.to_string()),
                    Err(e) => Err(format!("the command failed: {e}")),
                }
            }
        }
    }
}
