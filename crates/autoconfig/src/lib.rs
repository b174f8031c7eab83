//! The documents mail clients fetch to configure themselves for this server: what hosts,
//! ports and TLS modes to use, and how to log in. Each function returns a document's text; the
//! HTTP routes that serve them (and pick the [`Offer`] for a domain) live in the server.
//!
//! - [`thunderbird`]: Mozilla's autoconfig file format, version 1.1 (the "ConfigFileFormat"
//!   page of the Mozilla wiki, Thunderbird:Autoconfiguration), fetched with `GET` from
//!   `/.well-known/autoconfig/mail/config-v1.1.xml` or `autoconfig.DOMAIN/mail/config-v1.1.xml`.
//!   Thunderbird, K-9/Thunderbird for Android, Evolution and KMail read it.
//! - [`autodiscover_request`], [`autodiscover_response`], [`autodiscover_error`]: Microsoft
//!   Autodiscover in its Plain Old XML form (MS-OXDSCLI, "Autodiscover Publishing and Lookup
//!   Protocol", sections 2.2.3 and 2.2.4), `POST`ed to `/autodiscover/autodiscover.xml` by
//!   Outlook and many mobile clients.
//! - [`apple_profile`]: an Apple configuration profile (Apple's "Configuration Profile
//!   Reference": a property list with one `com.apple.mail.managed` payload), served as a
//!   `.mobileconfig` file to a logged-in user. It is unsigned.
//!
//! We never advertise plaintext: an [`Endpoint`] is implicit TLS or STARTTLS, and every
//! document says which. Logins are the full address with a password, sent inside TLS.
//!
//! Every value a document takes from its caller (a display name, an address, a host name) is
//! XML-escaped, and characters XML 1.0 cannot carry are replaced, so a hostile value cannot
//! break a document or add elements to it.
//!
//! No I/O, no clock: text in, text out.

mod apple;
mod autodiscover;
mod thunderbird;
mod xml;

pub use apple::{ProfileError, apple_profile};
pub use autodiscover::{
    ADDRESS_BYTES_MAX, AutodiscoverError, AutodiscoverErrorCode, AutodiscoverRequest, DEPTH_MAX,
    REQUEST_BYTES_MAX, ResponseSchema, autodiscover_error, autodiscover_request,
    autodiscover_response,
};
pub use thunderbird::thunderbird;

/// Content type of the Thunderbird autoconfig document.
pub const THUNDERBIRD_CONTENT_TYPE: &str = "application/xml; charset=utf-8";

/// Content type of an Autodiscover response or error (what Exchange itself sends).
pub const AUTODISCOVER_CONTENT_TYPE: &str = "text/xml; charset=utf-8";

/// Content type of an Apple configuration profile: Safari and iOS offer to install a document
/// of this type instead of showing it.
pub const APPLE_PROFILE_CONTENT_TYPE: &str = "application/x-apple-aspen-config";

/// How a client starts TLS on an endpoint. There is no plaintext variant: we never offer one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Security {
    /// TLS from the first byte (IMAPS 993, POP3S 995, submissions 465; RFC 8314 3.3).
    Tls,
    /// A plaintext greeting, then STARTTLS before anything else (RFC 3207, RFC 9051 6.2.1,
    /// RFC 2595 4).
    StartTls,
}

/// What a client speaks to an endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Protocol {
    /// Reading mail with IMAP.
    Imap,
    /// Reading mail with POP3.
    Pop3,
    /// Sending mail: message submission (RFC 6409) with SMTP AUTH.
    Submission,
}

impl Protocol {
    /// Whether a client reads mail from this endpoint (as opposed to sending it).
    pub fn is_incoming(self) -> bool {
        matches!(self, Protocol::Imap | Protocol::Pop3)
    }
}

/// One place a client can connect to.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Endpoint {
    /// What the client speaks there.
    pub protocol: Protocol,
    /// The host name the client connects to, in ASCII (A-labels): the name the server's
    /// certificate covers. Thunderbird does not accept U-labels here.
    pub host: String,
    /// The TCP port.
    pub port: u16,
    /// How TLS starts.
    pub security: Security,
}

/// What this server offers the users of one mail domain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Offer {
    /// The mail domain (the part of the users' addresses after `@`), in ASCII.
    pub domain: String,
    /// A human name for the provider, shown by clients while they set up the account.
    pub display_name: String,
    /// Where clients connect, most preferred first within each protocol. Documents keep this
    /// order (Apple's profile excepted, which picks one of each kind; see [`apple_profile`]).
    pub endpoints: Vec<Endpoint>,
}

impl Offer {
    /// The incoming endpoints (IMAP, POP3), in order of preference.
    pub fn incoming(&self) -> impl Iterator<Item = &Endpoint> {
        self.endpoints.iter().filter(|e| e.protocol.is_incoming())
    }

    /// The submission endpoints, in order of preference.
    pub fn submission(&self) -> impl Iterator<Item = &Endpoint> {
        self.endpoints
            .iter()
            .filter(|e| e.protocol == Protocol::Submission)
    }
}
