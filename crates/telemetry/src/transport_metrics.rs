//! The metric families of certificates and transport security (registered once with the
//! others); `transport.rs` moves them with its events.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct ResultLabel {
    pub(crate) result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct SessionLabels {
    pub(crate) policy: &'static str,
    pub(crate) result: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct ReportLabels {
    pub(crate) kind: &'static str,
    pub(crate) direction: &'static str,
}

pub(crate) struct TransportMetrics {
    pub(crate) acme: Family<ResultLabel, Counter>,
    pub(crate) sessions: Family<SessionLabels, Counter>,
    pub(crate) reports: Family<ReportLabels, Counter>,
}

impl TransportMetrics {
    pub(crate) fn register(registry: &mut Registry) -> TransportMetrics {
        let metrics = TransportMetrics {
            acme: Family::default(),
            sessions: Family::default(),
            reports: Family::default(),
        };
        for result in ["issued", "failed"] {
            let _ = metrics.acme.get_or_create(&ResultLabel { result });
        }
        registry.register(
            "mailstow_acme_attempts",
            "Certificate orders by ACME, by result (issued, failed)",
            metrics.acme.clone(),
        );
        registry.register(
            "mailstow_outbound_tls_sessions",
            "Outbound SMTP sessions by the policy they ran under (sts, tlsa, no-policy-found) \
             and their TLS-RPT result (success or the failure type)",
            metrics.sessions.clone(),
        );
        registry.register(
            "mailstow_reports",
            "TLS-RPT and DMARC aggregate reports (kind) sent and received (direction)",
            metrics.reports.clone(),
        );
        metrics
    }
}
