//! What the server publishes about itself (the autoconfiguration documents' endpoints, the
//! MTA-STS policy), as the server hands it to the view.

use std::sync::Arc;

/// What this server offers, as the documents describe it.
#[derive(Debug, Clone)]
pub struct Published {
    /// The host clients connect to (`[server] hostname`).
    pub hostname: String,
    /// The client-facing listeners: IMAP, POP3 and submission, with their TLS modes.
    pub endpoints: Vec<autoconfig::Endpoint>,
    /// Our MTA-STS policy file (RFC 8461 3.2), when we publish one.
    pub mta_sts_policy: Option<String>,
}

impl Published {
    pub(crate) fn offer(&self, domain: &str) -> autoconfig::Offer {
        autoconfig::Offer {
            domain: domain.to_string(),
            display_name: domain.to_string(),
            endpoints: self.endpoints.clone(),
        }
    }
}

/// Answers an ACME HTTP-01 token with its key authorization, while the challenge is pending.
pub type Http01Answers = Arc<dyn Fn(&str) -> Option<String> + Send + Sync>;
