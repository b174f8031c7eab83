//! A reload (SIGHUP): the settings that may change without a restart are applied to new
//! connections and logins; the others are named as needing a restart.

use anyhow::Result;

use crate::config::ServerConfig;
use crate::live::Live;
use crate::shell::Shell;
use crate::tls::Certificate;

/// What a reload did.
#[derive(Debug)]
pub struct Reloaded {
    /// The certificate now served.
    pub certificate: Certificate,
    /// Settings now in force that differ from before (the certificate is re-read always).
    pub changed: Vec<&'static str>,
    /// Settings that differ in the new configuration but take effect only after a restart.
    pub restart_needed: Vec<&'static str>,
}

/// The names of the fields whose values differ (compared through `Debug`, which every
/// setting has and which shows everything a setting holds).
macro_rules! differing {
    ($a:expr, $b:expr, $($field:ident),* $(,)?) => {{
        let mut names: Vec<&'static str> = Vec::new();
        $(
            if format!("{:?}", $a.$field) != format!("{:?}", $b.$field) {
                names.push(stringify!($field));
            }
        )*
        names
    }};
}

/// The settings a reload applies: `into` takes them from `from`; everything else stays as
/// it was when the server started.
fn take_reloadable(from: &ServerConfig, into: &mut ServerConfig) {
    // The self-signed certificate names the host name in force, which a reload keeps.
    into.tls = from.tls.for_hostname(&into.hostname);
    into.auth_without_tls = from.auth_without_tls;
    into.connections_max = from.connections_max;
    into.connections_per_ip_max = from.connections_per_ip_max;
    into.message_bytes_max = from.message_bytes_max;
    into.recipients_max = from.recipients_max;
    into.throttle = from.throttle;
    into.login_deadline = from.login_deadline;
    into.command_deadline = from.command_deadline;
    into.transfer_deadline = from.transfer_deadline;
    into.transfer_rate_min = from.transfer_rate_min;
    into.transfer_deadline_max = from.transfer_deadline_max;
    into.idle_deadline = from.idle_deadline;
    into.dmarc_enforce = from.dmarc_enforce;
    into.local_sender_check = from.local_sender_check;
    into.recipients_unknown_max = from.recipients_unknown_max;
    into.tarpit_delay = from.tarpit_delay;
    into.disk_reserve_bytes = from.disk_reserve_bytes;
}

/// Applies a new configuration without dropping a session: re-reads the certificate and
/// key, takes the new limits, deadlines and policies for new connections and logins,
/// and names the settings that need a restart. On error (a certificate that does not
/// load, limits that contradict each other) nothing changes.
pub(crate) fn reload(shell: &Shell, new: &ServerConfig) -> Result<Reloaded> {
    let ctx = shell;
    let before = ctx.live();
    let mut effective = ctx.config.clone();
    take_reloadable(new, &mut effective);
    let restart_needed = differing!(
        effective,
        new,
        hostname,
        data_dir,
        listeners,
        imap_sessions_per_user_max,
        imap_header_cache_bytes_max,
        imap_view_cache_bytes_max,
        hash_concurrency_max,
        hash_memory_bytes_max,
        hash_queue_max,
        password_length_min,
        inflight_bytes_max,
        dns_servers,
        sender_checks,
        delivery_threads,
        relay,
        direct,
        queue,
        store,
        metrics,
        postmaster,
        spam,
    );
    let live = Live::build(effective, &ctx.inflight, &ctx.challenges)?;
    let certificate = live.certificate.clone();
    let changed = differing!(
        before.config,
        live.config,
        tls,
        auth_without_tls,
        connections_max,
        connections_per_ip_max,
        message_bytes_max,
        recipients_max,
        throttle,
        login_deadline,
        command_deadline,
        transfer_deadline,
        transfer_rate_min,
        transfer_deadline_max,
        idle_deadline,
        dmarc_enforce,
        local_sender_check,
        recipients_unknown_max,
        tarpit_delay,
        disk_reserve_bytes,
    );
    // The door's check and delivery's pause take it at once; the engines' growth steps keep
    // the reserve they opened with until a restart.
    ctx.space.set_reserve_bytes(live.config.disk_reserve_bytes);
    ctx.space.refresh();
    ctx.connections.set_max(
        live.config.connections_max,
        live.config.connections_per_ip_max,
    );
    ctx.throttle.set_config(live.config.throttle);
    ctx.set_live(live);
    Ok(Reloaded {
        certificate,
        changed,
        restart_needed,
    })
}
