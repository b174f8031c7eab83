//! A listener's accept loop: each connection is admitted under the shared limits (a refused
//! one is told why in its protocol's words), a client blocked for failed logins is turned
//! away before any TLS, an implicit-TLS connection is handshaken, and the connection runs
//! its protocol under the one driver in a task of its own.

use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;

use crate::connections::Held;
use crate::driver::{Conn, drive};
use crate::imap_conn::{Imap, ImapParts};
use crate::managesieve_conn::ManageSieve;
use crate::pop3_conn::{Pop3, Pop3Parts};
use crate::service::Service;
use crate::shell::Shell;
use crate::smtp_conn::{Smtp, SmtpParts};
use crate::stream::{Stream, TLS_HANDSHAKE_TIMEOUT};

/// What each protocol's connections are handed, beside the shell.
pub(crate) struct Protocols {
    pub(crate) smtp: Arc<SmtpParts>,
    pub(crate) pop3: Arc<Pop3Parts>,
    pub(crate) imap: Arc<ImapParts>,
}

pub(crate) async fn accept_loop(
    ctx: Arc<Shell>,
    protocols: Arc<Protocols>,
    service: Service,
    listener: TcpListener,
    shutdown: tokio::sync::watch::Receiver<bool>,
) {
    loop {
        let (socket, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(e) => {
                // EMFILE and friends: back off instead of spinning.
                tracing::warn!(event = "accept_error", proto = service.name(), error = %e);
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let _ = socket.set_nodelay(true);
        let ctx = ctx.clone();
        let protocols = protocols.clone();
        let shutdown = shutdown.clone();
        // Each connection is one task; what it holds while it waits for a client is its
        // memory (docs/benchmarks.md: 10,000 idle IMAP connections). So the parts of a
        // connection's life are boxed: the task holds only the part it is in, not the
        // largest of the TLS handshake and every protocol's driver.
        let task = async move {
            let mut stream = Stream::Plain(socket);
            let from_node = ctx
                .cluster
                .as_ref()
                .is_some_and(|c| c.is_node_address(&ctx.directory, peer.ip()));
            let slot = match ctx.connections.admit_from(peer.ip(), !from_node) {
                Ok(slot) => slot,
                Err(refused) => {
                    use tokio::io::AsyncWriteExt as _;
                    let line = service.refusal(refused, &ctx.config.hostname);
                    ctx.telemetry
                        .refused_connection(service.name(), peer, line.trim_end());
                    let _ = tokio::time::timeout(
                        Duration::from_secs(5),
                        stream.write_all(line.as_bytes()),
                    )
                    .await;
                    return;
                }
            };
            // An address (or network) blocked for failed logins gets nothing more from the
            // login services: not a TLS handshake, not a session. The pause makes a guesser
            // that reconnects in a loop wait, holding one of its own connection slots.
            if service.takes_logins()
                && let Some(level) = ctx.throttle.address_blocked(peer.ip())
            {
                use tokio::io::AsyncWriteExt as _;
                let line = service.blocked(&ctx.config.hostname);
                ctx.telemetry.refused_connection(
                    service.name(),
                    peer,
                    &format!("{} ({} level)", line.trim_end(), level.name()),
                );
                tokio::time::sleep(ctx.live().config.tarpit_delay).await;
                let _ =
                    tokio::time::timeout(Duration::from_secs(5), stream.write_all(line.as_bytes()))
                        .await;
                return;
            }
            let open = ctx
                .telemetry
                .connection(service.name(), peer, service.implicit_tls());
            if service.implicit_tls() {
                let tls = ctx.live().tls.clone();
                stream = match Box::pin(stream.upgrade(&tls, TLS_HANDSHAKE_TIMEOUT)).await {
                    Ok(tls) => tls,
                    Err(_) => return,
                };
            }
            let tls = stream.is_tls();
            let mut conn = Conn::new(ctx.clone(), stream);
            conn.held = Some(Held::new(slot, open));
            match service {
                Service::Pop3 | Service::Pop3s => {
                    let pop3 = Pop3::new(&ctx, protocols.pop3.clone(), peer, tls);
                    Box::pin(drive(pop3, conn, shutdown)).await
                }
                Service::Imap | Service::Imaps => {
                    let imap = Imap::new(&ctx, protocols.imap.clone(), peer, tls);
                    Box::pin(drive(imap, conn, shutdown)).await
                }
                Service::ManageSieve | Service::ManageSieves => {
                    let managesieve = ManageSieve::new(&ctx, peer, tls);
                    Box::pin(drive(managesieve, conn, shutdown)).await
                }
                _ => {
                    let smtp = Smtp::new(&ctx, protocols.smtp.clone(), service, peer, tls);
                    Box::pin(drive(smtp, conn, shutdown)).await
                }
            }
        };
        tokio::spawn(task);
    }
}
