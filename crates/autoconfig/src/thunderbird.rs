//! Mozilla's autoconfig file, format version 1.1 (Thunderbird:Autoconfiguration:ConfigFileFormat
//! on the Mozilla wiki).

use crate::xml::Writer;
use crate::{Endpoint, Offer, Protocol, Security};

/// What Thunderbird replaces with the address the user typed. The server need not read the
/// `?emailaddress=` query parameter Thunderbird sends: the document is the same for every user
/// of a domain.
const USERNAME_PLACEHOLDER: &str = "%EMAILADDRESS%";

/// The autoconfig document for `offer`: one `incomingServer` per IMAP or POP3 endpoint, then
/// one `outgoingServer` per submission endpoint, each in the offer's order (the client prefers
/// the first of each kind). Logins are the full address with a password sent inside TLS
/// (`password-cleartext`: AUTH PLAIN, LOGIN or the protocol's own login).
pub fn thunderbird(offer: &Offer) -> String {
    let mut writer = Writer::new("");
    writer.open("clientConfig", &[("version", "1.1")]);
    writer.open("emailProvider", &[("id", &offer.domain)]);
    writer.leaf("domain", &offer.domain);
    writer.leaf("displayName", &offer.display_name);
    writer.leaf("displayShortName", &offer.domain);
    // The format lists every incomingServer before the first outgoingServer.
    for endpoint in offer.incoming() {
        let kind = match endpoint.protocol {
            Protocol::Imap => "imap",
            Protocol::Pop3 => "pop3",
            Protocol::Submission => continue,
        };
        writer.open("incomingServer", &[("type", kind)]);
        server_body(&mut writer, endpoint);
        writer.close();
    }
    for endpoint in offer.submission() {
        writer.open("outgoingServer", &[("type", "smtp")]);
        server_body(&mut writer, endpoint);
        writer.close();
    }
    writer.finish()
}

fn server_body(writer: &mut Writer, endpoint: &Endpoint) {
    writer.leaf("hostname", &endpoint.host);
    writer.leaf("port", &endpoint.port.to_string());
    // "SSL": TLS from the first byte; "STARTTLS": mandatory upgrade on the plain port.
    let socket_type = match endpoint.security {
        Security::Tls => "SSL",
        Security::StartTls => "STARTTLS",
    };
    writer.leaf("socketType", socket_type);
    writer.leaf("username", USERNAME_PLACEHOLDER);
    writer.leaf("authentication", "password-cleartext");
}
