//! Connection counts, in total and per client address, shared by every listener; what a
//! connection holds for its whole life.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

/// Connection counts, in total and per client address, shared by every listener.
pub(crate) struct ConnectionLimits {
    /// Both may change on reload (SIGHUP); connections already open stay.
    connections_max: std::sync::atomic::AtomicUsize,
    connections_per_ip_max: std::sync::atomic::AtomicUsize,
    open: Mutex<(usize, HashMap<IpAddr, usize>)>,
}

/// Why a connection was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refused {
    Total,
    PerIp,
}

/// What a connection holds for its whole life, wherever it runs (its task, the parking
/// lot): its place among the connections, and the log line of its end.
pub(crate) struct Held {
    _slot: ConnectionSlot,
    _open: telemetry::OpenConnection,
}

impl Held {
    pub(crate) fn new(slot: ConnectionSlot, open: telemetry::OpenConnection) -> Held {
        Held {
            _slot: slot,
            _open: open,
        }
    }
}

/// Holds one connection's place; released on drop.
pub(crate) struct ConnectionSlot {
    limits: Arc<ConnectionLimits>,
    ip: IpAddr,
}

impl ConnectionLimits {
    pub(crate) fn new(connections_max: usize, connections_per_ip_max: usize) -> Arc<Self> {
        Arc::new(ConnectionLimits {
            connections_max: connections_max.into(),
            connections_per_ip_max: connections_per_ip_max.into(),
            open: Mutex::new((0, HashMap::new())),
        })
    }

    #[cfg(test)]
    pub(crate) fn admit(self: &Arc<Self>, ip: IpAddr) -> Result<ConnectionSlot, Refused> {
        self.admit_from(ip, true)
    }

    /// [`ConnectionLimits::admit`]; `per_ip: false` for another node of the cluster, whose
    /// proxied sessions and hand-overs all come from its one address (they still count in
    /// the total).
    pub(crate) fn admit_from(
        self: &Arc<Self>,
        ip: IpAddr,
        per_ip: bool,
    ) -> Result<ConnectionSlot, Refused> {
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        if open.0 >= self.connections_max.load(Ordering::Relaxed) {
            return Err(Refused::Total);
        }
        let from_ip = open.1.entry(ip).or_insert(0);
        if per_ip && *from_ip >= self.connections_per_ip_max.load(Ordering::Relaxed) {
            return Err(Refused::PerIp);
        }
        let per_ip = from_ip;
        *per_ip += 1;
        open.0 += 1;
        Ok(ConnectionSlot {
            limits: self.clone(),
            ip,
        })
    }

    /// New limits for the next connections (a reload).
    pub(crate) fn set_max(&self, connections_max: usize, connections_per_ip_max: usize) {
        self.connections_max
            .store(connections_max, Ordering::Relaxed);
        self.connections_per_ip_max
            .store(connections_per_ip_max, Ordering::Relaxed);
    }

    pub(crate) fn open(&self) -> usize {
        self.open.lock().unwrap_or_else(|p| p.into_inner()).0
    }
}

impl Drop for ConnectionSlot {
    fn drop(&mut self) {
        let mut open = self.limits.open.lock().unwrap_or_else(|p| p.into_inner());
        open.0 = open.0.saturating_sub(1);
        if let Some(n) = open.1.get_mut(&self.ip) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                open.1.remove(&self.ip);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_count_in_total_and_per_ip() {
        let limits = ConnectionLimits::new(3, 2);
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let b: IpAddr = "10.0.0.2".parse().unwrap();
        let a1 = limits.admit(a).unwrap();
        let _a2 = limits.admit(a).unwrap();
        assert_eq!(limits.admit(a).err(), Some(Refused::PerIp));
        let _b1 = limits.admit(b).unwrap();
        assert_eq!(limits.admit(b).err(), Some(Refused::Total));
        drop(a1);
        assert_eq!(limits.open(), 2);
        assert!(limits.admit(b).is_ok());
        // Another cluster node's address is not held to the per-address limit, only the total.
        let limits = ConnectionLimits::new(3, 1);
        let _n1 = limits.admit_from(a, false).unwrap();
        let _n2 = limits.admit_from(a, false).unwrap();
        assert_eq!(limits.admit(a).err(), Some(Refused::PerIp));
        let _n3 = limits.admit_from(a, false).unwrap();
        assert_eq!(limits.admit_from(a, false).err(), Some(Refused::Total));
    }
}
