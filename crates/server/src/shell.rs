//! What every connection shares, whatever its protocol: the settings in force, the connection
//! limits, the login throttle, the shared budget of message bytes in memory, the mail log,
//! who is logged in, the parking lot, and what logins need from the directory and the
//! cluster. Each protocol's own parts (the queue for SMTP, the store for POP3 and IMAP) are
//! in its module, handed only to its connections.

use std::sync::{Arc, RwLock};

use crate::config::ServerConfig;
use crate::connections::ConnectionLimits;
use crate::live::Live;
use crate::park::Parking;
use crate::throttle::Throttle;

pub(crate) struct Shell {
    /// The configuration the server started with (a reload changes [`Shell::live`] only).
    pub(crate) config: ServerConfig,
    /// What a reload (SIGHUP) changes: read it with [`Shell::live`] where a setting is used.
    live: RwLock<Arc<Live>>,
    pub(crate) connections: Arc<ConnectionLimits>,
    pub(crate) throttle: Arc<Throttle>,
    /// Message bytes in memory, all connections together.
    pub(crate) inflight: Arc<limits::ByteBudget>,
    /// The mail log and the metrics.
    pub(crate) telemetry: Arc<telemetry::Telemetry>,
    /// Logged-in users of every protocol.
    pub(crate) sessions: mailboxes::Sessions,
    /// Where IMAP sessions in IDLE wait outside their tasks.
    pub(crate) parking: Parking,
    /// Users, passwords and (in a cluster) who owns each mailbox.
    pub(crate) directory: directory::Directory,
    /// This node of a cluster: logins of other nodes' users are handed over to them.
    pub(crate) cluster: Option<Arc<cluster::Cluster>>,
    /// The data directory's free-space reserve: below it, new mail is refused at the door.
    pub(crate) space: Arc<disk::SpaceReserve>,
    /// The ACME server's pending challenges, answered by the HTTP and HTTPS listeners.
    pub(crate) challenges: Arc<crate::tls::Challenges>,
}

impl Shell {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        config: ServerConfig,
        live: Live,
        throttle: Arc<Throttle>,
        inflight: Arc<limits::ByteBudget>,
        telemetry: Arc<telemetry::Telemetry>,
        sessions: mailboxes::Sessions,
        parking: Parking,
        directory: directory::Directory,
        cluster: Option<Arc<cluster::Cluster>>,
        space: Arc<disk::SpaceReserve>,
        challenges: Arc<crate::tls::Challenges>,
    ) -> Shell {
        Shell {
            connections: ConnectionLimits::new(
                config.connections_max,
                config.connections_per_ip_max,
            ),
            config,
            live: RwLock::new(Arc::new(live)),
            throttle,
            inflight,
            telemetry,
            sessions,
            parking,
            directory,
            cluster,
            space,
            challenges,
        }
    }

    /// RFC 5321 4.2.2 and RFC 3463 X.3.1 ("mail system full"): below the free-space reserve,
    /// or without room for `size` more bytes above it, new mail is refused before it is
    /// sent; `None` when there is room. Asks the file system at most every 10 ms.
    pub(crate) fn storage_full(&self, size: u64) -> Option<disk::Shortage> {
        self.space.check(size).err()
    }

    /// The settings in force now (a connection takes them when it opens and keeps them).
    pub(crate) fn live(&self) -> Arc<Live> {
        // Poisoned: a reload panicked while swapping one `Arc` for another, which leaves
        // either; both are whole.
        self.live.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Reads the certificate again (ACME renewed it) and puts it in force for every
    /// listener's next handshake; on error the one in force stays.
    pub(crate) fn reload_certificate(&self) -> anyhow::Result<crate::tls::Certificate> {
        let live = Live::build(self.live().config.clone(), &self.inflight, &self.challenges)?;
        let certificate = live.certificate.clone();
        self.set_live(live);
        Ok(certificate)
    }

    /// Puts `live` in force for new connections and logins (a reload).
    pub(crate) fn set_live(&self, live: Live) {
        *self.live.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(live);
    }
}
