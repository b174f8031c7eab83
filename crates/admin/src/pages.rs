//! The web view's admin pages over this server: what they show ([`data`]) and what they do
//! ([`act`]). Every action runs the same code as its CLI command (the directory's writes,
//! `accounts::delete_user`, the admin socket's queue requests) and leaves one log line,
//! `event=admin`, naming the admin, the client address, the action (never a password) and
//! the outcome.

use std::net::IpAddr;
use std::sync::Arc;

use web::{AdminAction, AdminData, AdminUser, AdminView, BackendError, Queued};

use crate::commands::Operations;
use crate::format::{format_deleted, format_show, human_bytes};
use crate::request::Request;
use store::Mailstore as _;
use telemetry::shown;

fn directory_down(e: directory::DirectoryError) -> BackendError {
    BackendError::Unavailable(format!("the directory: {e}"))
}

fn queue_error(e: queue::QueueError) -> BackendError {
    match e {
        queue::QueueError::UnknownMessage(_) => BackendError::NotFound,
        other => BackendError::Failed(other.to_string()),
    }
}

/// Whether the user's mailbox is in this node's store.
fn stored_here(ctx: &Operations, node: Option<&str>) -> bool {
    match (ctx.accounts.gate.node(), node) {
        (Some(here), Some(node)) => here == node,
        _ => true,
    }
}

/// An admin page's data.
pub async fn data(ctx: &Arc<Operations>, view: AdminView) -> Result<AdminData, BackendError> {
    let d = &ctx.directory;
    Ok(match view {
        AdminView::Overview => {
            let queue = ctx.queue.clone();
            let queued = tokio::task::spawn_blocking(move || queue.list())
                .await
                .map_err(|e| BackendError::Failed(e.to_string()))?
                .map_err(queue_error)?
                .len();
            AdminData::Overview {
                node: ctx.node_name.clone(),
                domains: d.list_domains().await.map_err(directory_down)?.len(),
                users: d.list_users(None).await.map_err(directory_down)?.len(),
                aliases: d.list_aliases().await.map_err(directory_down)?.len(),
                queued,
            }
        }
        AdminView::Domains => AdminData::Domains(d.list_domains().await.map_err(directory_down)?),
        AdminView::Aliases => AdminData::Aliases(d.list_aliases().await.map_err(directory_down)?),
        AdminView::Users(filter) => {
            let mut users = d.list_users(None).await.map_err(directory_down)?;
            users.retain(|u| u.address.contains(&filter));
            let matched = users.len();
            // Usage is read for the users shown only.
            users.truncate(web::ADMIN_USERS_SHOWN_MAX);
            let ctx = ctx.clone();
            let rows = tokio::task::spawn_blocking(move || {
                users
                    .into_iter()
                    .map(|u| {
                        let usage = stored_here(&ctx, u.node.as_deref())
                            .then(|| ctx.store.usage(&u.address));
                        AdminUser {
                            used_bytes: usage.as_ref().map(|u| u.bytes),
                            messages: usage.as_ref().map(|u| u.messages),
                            quota_bytes: u.quota_bytes,
                            last_login_at: u.last_login_at,
                            admin: u.admin,
                            node: u.node,
                            address: u.address,
                        }
                    })
                    .collect()
            })
            .await
            .map_err(|e| BackendError::Failed(e.to_string()))?;
            AdminData::Users(rows, matched)
        }
        AdminView::Queue => {
            let queue = ctx.queue.clone();
            let entries = tokio::task::spawn_blocking(move || queue.list())
                .await
                .map_err(|e| BackendError::Failed(e.to_string()))?
                .map_err(queue_error)?;
            AdminData::Queue(
                entries
                    .into_iter()
                    .map(|e| {
                        let pending = e
                            .envelope
                            .recipients
                            .iter()
                            .filter(|r| r.status == queue::RecipientStatus::Pending);
                        Queued {
                            id: e.id,
                            recipients: pending.clone().map(|r| r.address.clone()).collect(),
                            last_error: e.damage.clone().or_else(|| {
                                pending.filter_map(|r| r.last_error.clone()).next_back()
                            }),
                            sender: e.envelope.sender,
                            size: e.size,
                            queued_at: i64::try_from(e.envelope.arrival_ms / 1000)
                                .unwrap_or(i64::MAX),
                            attempts: e.attempts,
                        }
                    })
                    .collect(),
            )
        }
        AdminView::Queued(id) => {
            let queue = ctx.queue.clone();
            let detail = tokio::task::spawn_blocking(move || queue.show(id))
                .await
                .map_err(|e| BackendError::Failed(e.to_string()))?
                .map_err(queue_error)?;
            AdminData::Queued(String::from_utf8_lossy(&format_show(&detail)).into_owned())
        }
        AdminView::Counters => AdminData::Counters(
            ctx.telemetry
                .encode()
                .lines()
                .filter(|l| !l.starts_with('#') && !l.is_empty())
                .filter_map(|l| l.rsplit_once(' '))
                .map(|(name, value)| (name.to_string(), value.to_string()))
                .collect(),
        ),
    })
}

/// Carries out an admin action and logs it.
pub async fn act(
    ctx: &Arc<Operations>,
    admin: &str,
    client: IpAddr,
    action: AdminAction,
) -> Result<String, String> {
    let described = action.describe();
    let outcome = run(ctx, action).await;
    match &outcome {
        Ok(done) => tracing::info!(
            event = "admin",
            proto = "web",
            admin = %shown(admin),
            client = %client,
            action = %shown(&described),
            result = "ok",
            detail = %shown(done)
        ),
        Err(why) => tracing::warn!(
            event = "admin",
            proto = "web",
            admin = %shown(admin),
            client = %client,
            action = %shown(&described),
            result = "refused",
            error = %shown(why)
        ),
    }
    outcome
}

async fn run(ctx: &Arc<Operations>, action: AdminAction) -> Result<String, String> {
    let d = &ctx.directory;
    let e = |e: directory::DirectoryError| e.to_string();
    match action {
        AdminAction::AddDomain(name) => {
            d.add_domain(&name).await.map_err(e)?;
            Ok(format!("domain added: {}", name.to_ascii_lowercase()))
        }
        AdminAction::DeleteDomain(name) => {
            d.del_domain(&name).await.map_err(e)?;
            Ok(format!("domain removed: {}", name.to_ascii_lowercase()))
        }
        AdminAction::AddUser {
            address,
            password,
            quota_bytes,
            admin,
        } => {
            let node = d
                .add_user_as(&address, &password, None, admin)
                .await
                .map_err(e)?;
            let address = address.to_ascii_lowercase();
            if quota_bytes.is_some() {
                d.set_quota(&address, quota_bytes).await.map_err(e)?;
            }
            Ok(match node {
                Some(node) => format!("user added: {address} (node {node})"),
                None => format!("user added: {address}"),
            })
        }
        AdminAction::DeleteUser(address) => ctx
            .accounts
            .delete_user(&address)
            .await
            .map(|(user, deleted, node)| {
                format_deleted(&user, &deleted, node.as_deref())
                    .trim_end()
                    .to_string()
            })
            .map_err(|e| format!("{e:#}")),
        AdminAction::SetQuota {
            address,
            quota_bytes,
        } => {
            d.set_quota(&address, quota_bytes).await.map_err(e)?;
            Ok(format!(
                "quota of {}: {}",
                address.to_ascii_lowercase(),
                quota_bytes.map_or("no limit".to_string(), human_bytes)
            ))
        }
        AdminAction::ResetPassword { address, password } => {
            d.set_password(&address, &password).await.map_err(e)?;
            Ok(format!(
                "password changed: {}",
                address.to_ascii_lowercase()
            ))
        }
        AdminAction::SetAdmin { address, on } => {
            d.set_admin(&address, on).await.map_err(e)?;
            Ok(format!(
                "admin {}: {}",
                if on { "on" } else { "off" },
                address.to_ascii_lowercase()
            ))
        }
        AdminAction::AddAlias {
            source,
            destination,
        } => {
            d.add_alias(&source, &destination).await.map_err(e)?;
            Ok(format!(
                "alias added: {} -> {}",
                source.to_ascii_lowercase(),
                destination
            ))
        }
        AdminAction::DeleteAlias {
            source,
            destination,
        } => {
            d.del_alias(&source, Some(&destination)).await.map_err(e)?;
            Ok(format!(
                "alias removed: {} -> {}",
                source.to_ascii_lowercase(),
                destination
            ))
        }
        AdminAction::Retry(id) => ctx
            .run(Request::Retry(id))
            .await
            .map(|out| String::from_utf8_lossy(&out).trim_end().to_string()),
        AdminAction::Remove(id) => ctx
            .run(Request::Remove(id))
            .await
            .map(|out| String::from_utf8_lossy(&out).trim_end().to_string()),
    }
}
