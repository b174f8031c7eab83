//! Certificates and transport security (issue 39, docs/certificates.md): ACME attempts,
//! outbound TLS sessions under MTA-STS and DANE, and the TLS-RPT and DMARC reports sent and
//! received; one log line each and their metrics.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

use crate::{Telemetry, shown};

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
    acme: Family<ResultLabel, Counter>,
    sessions: Family<SessionLabels, Counter>,
    reports: Family<ReportLabels, Counter>,
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

/// One outbound session's TLS outcome, as TLS-RPT counts it (RFC 8460 4).
pub struct TlsSession<'a> {
    /// The recipient domain (the policy domain).
    pub domain: &'a str,
    pub mx_host: &'a str,
    /// `sts`, `tlsa` or `no-policy-found`.
    pub policy: &'static str,
    /// `success` or an RFC 8460 4.3 result type.
    pub result: &'a str,
    /// What went wrong, for the log.
    pub detail: &'a str,
}

impl Telemetry {
    /// An ACME order ended: `issued` or `failed` (the server logs the line itself, with the
    /// names and the certificate).
    pub fn acme(&self, issued: bool) {
        let result = if issued { "issued" } else { "failed" };
        self.transport
            .acme
            .get_or_create(&ResultLabel { result })
            .inc();
    }

    /// `event=outbound_tls`: a session's TLS under its policy; failures at info level, since
    /// they defer or report mail.
    pub fn outbound_tls(&self, s: &TlsSession<'_>) {
        self.transport
            .sessions
            .get_or_create(&SessionLabels {
                policy: s.policy,
                result: s.result.to_string(),
            })
            .inc();
        if s.result != "success" {
            tracing::info!(
                event = "outbound_tls",
                domain = %shown(s.domain),
                mx = %shown(s.mx_host),
                policy = s.policy,
                result = %shown(s.result),
                detail = %shown(s.detail)
            );
        }
    }

    /// `event=report`: a TLS-RPT or DMARC aggregate report sent or received.
    pub fn report(&self, kind: &'static str, direction: &'static str, domain: &str, id: &str) {
        self.transport
            .reports
            .get_or_create(&ReportLabels { kind, direction })
            .inc();
        tracing::info!(
            event = "report",
            kind,
            direction,
            domain = %shown(domain),
            id = %shown(id)
        );
    }
}
