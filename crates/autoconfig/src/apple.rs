//! An Apple configuration profile holding one mail account (Apple's Configuration Profile
//! Reference: the top-level `Configuration` payload and the `com.apple.mail.managed` payload).

use crate::xml::Writer;
use crate::{Endpoint, Offer, Protocol, Security};

/// The property list DOCTYPE Apple's own tools write. A plist reader needs no DTD; it is here
/// because macOS's profile installer expects the usual header.
const PLIST_PROLOG: &str = "<!DOCTYPE plist PUBLIC \"-//Apple//DTD PLIST 1.0//EN\" \"http://www.apple.com/DTDs/PropertyList-1.0.dtd\">\n";

/// What the payload identifiers are derived under, so that they differ from any other use of
/// the same inputs. Changing it changes every profile's identity: a reinstalled profile would
/// sit beside the old one instead of replacing it.
const IDENTITY_CONTEXT: &str = "mailstow autoconfig 2026 apple profile identity";

/// Why there is no profile for an offer: Apple's mail payload needs one incoming and one
/// outgoing server.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProfileError {
    #[error("the offer has no IMAP or POP3 endpoint")]
    NoIncoming,
    #[error("the offer has no submission endpoint")]
    NoSubmission,
}

/// A configuration profile (`.mobileconfig`) that adds `email` as a mail account on an iPhone,
/// iPad or Mac, named `full_name`. Serve it with [`crate::APPLE_PROFILE_CONTENT_TYPE`] to the
/// logged-in user it describes.
///
/// The profile is not signed: the device shows it as "Unsigned" (or "Unverified") and the user
/// confirms installing it. It holds no password; the device asks for it once and uses it for
/// both servers (`OutgoingPasswordSameAsIncomingPassword`).
///
/// Apple's payload holds one incoming and one outgoing server, and its `UseSSL` says only
/// whether TLS starts with the first byte; there is no way to demand STARTTLS. So of the
/// offer's IMAP endpoints (POP3 ones if there is no IMAP), and of its submission endpoints, the
/// first with implicit TLS is taken, or else the first (a STARTTLS one, with `UseSSL` false:
/// Apple's mail clients then upgrade with STARTTLS, which our servers require before login).
///
/// `PayloadIdentifier` is the mail domain in reverse-DNS order with a part derived from the
/// address, and the `PayloadUUID`s are derived from the domain and the address (a BLAKE3 hash
/// laid out as an RFC 9562 version 8 UUID): the same user gets the same profile every time,
/// so installing it again replaces the earlier one, and two users' profiles never collide.
pub fn apple_profile(offer: &Offer, email: &str, full_name: &str) -> Result<String, ProfileError> {
    let imap: Vec<&Endpoint> = offer
        .incoming()
        .filter(|e| e.protocol == Protocol::Imap)
        .collect();
    let (account_type, incoming) = if imap.is_empty() {
        let pop3: Vec<&Endpoint> = offer.incoming().collect();
        ("EmailTypePOP", pop3)
    } else {
        ("EmailTypeIMAP", imap)
    };
    let incoming = choose(&incoming).ok_or(ProfileError::NoIncoming)?;
    let submission: Vec<&Endpoint> = offer.submission().collect();
    let outgoing = choose(&submission).ok_or(ProfileError::NoSubmission)?;

    let identifier = format!(
        "{}.mailstow.{}",
        reverse_dns(&offer.domain),
        hex(&identity(&offer.domain, email, "identifier")[..8])
    );

    let mut plist = Plist::new();
    plist.open_dict();
    plist.key("PayloadContent");
    plist.open_array();
    plist.open_dict();
    plist.string("EmailAccountDescription", email);
    plist.string("EmailAccountName", full_name);
    plist.string("EmailAccountType", account_type);
    plist.string("EmailAddress", email);
    plist.string("IncomingMailServerAuthentication", "EmailAuthPassword");
    plist.string("IncomingMailServerHostName", &incoming.host);
    plist.integer("IncomingMailServerPortNumber", incoming.port);
    plist.boolean(
        "IncomingMailServerUseSSL",
        incoming.security == Security::Tls,
    );
    plist.string("IncomingMailServerUsername", email);
    plist.string("OutgoingMailServerAuthentication", "EmailAuthPassword");
    plist.string("OutgoingMailServerHostName", &outgoing.host);
    plist.integer("OutgoingMailServerPortNumber", outgoing.port);
    plist.boolean(
        "OutgoingMailServerUseSSL",
        outgoing.security == Security::Tls,
    );
    plist.string("OutgoingMailServerUsername", email);
    plist.boolean("OutgoingPasswordSameAsIncomingPassword", true);
    plist.string(
        "PayloadDisplayName",
        &format!("{} mail", offer.display_name),
    );
    plist.string("PayloadIdentifier", &format!("{identifier}.account"));
    plist.string("PayloadType", "com.apple.mail.managed");
    plist.string("PayloadUUID", &uuid(&offer.domain, email, "account"));
    plist.integer("PayloadVersion", 1);
    plist.close();
    plist.close();
    plist.string(
        "PayloadDescription",
        &format!("The mail account {email} at {}.", offer.display_name),
    );
    plist.string("PayloadDisplayName", &format!("{email} mail account"));
    plist.string("PayloadIdentifier", &identifier);
    plist.boolean("PayloadRemovalDisallowed", false);
    plist.string("PayloadType", "Configuration");
    plist.string("PayloadUUID", &uuid(&offer.domain, email, "configuration"));
    plist.integer("PayloadVersion", 1);
    Ok(plist.finish())
}

/// The first endpoint with implicit TLS, or else the first.
fn choose<'a>(endpoints: &[&'a Endpoint]) -> Option<&'a Endpoint> {
    endpoints
        .iter()
        .find(|e| e.security == Security::Tls)
        .or(endpoints.first())
        .copied()
}

/// `example.com` as `com.example`.
fn reverse_dns(domain: &str) -> String {
    let mut labels: Vec<&str> = domain
        .trim_end_matches('.')
        .split('.')
        .filter(|label| !label.is_empty())
        .collect();
    labels.reverse();
    labels.join(".").to_ascii_lowercase()
}

/// 32 bytes that name one part of `email`'s profile at `domain`. Each input is
/// length-prefixed, so no two different inputs share a hash input.
fn identity(domain: &str, email: &str, role: &str) -> [u8; 32] {
    let mut hasher = blake3::Hasher::new_derive_key(IDENTITY_CONTEXT);
    for part in [domain.to_ascii_lowercase().as_str(), email, role] {
        hasher.update(&(part.len() as u64).to_le_bytes());
        hasher.update(part.as_bytes());
    }
    *hasher.finalize().as_bytes()
}

/// A UUID for one part of a profile: [`identity`]'s first 16 bytes with RFC 9562's version 8
/// ("custom") and variant bits set (RFC 9562 5.8).
fn uuid(domain: &str, email: &str, role: &str) -> String {
    let hash = identity(domain, email, role);
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&hash[..16]);
    bytes[6] = (bytes[6] & 0x0f) | 0x80;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    let hex = hex(&bytes).to_ascii_uppercase();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    let mut out = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        let _ = write!(out, "{byte:02x}");
    }
    out
}

/// A property list in Apple's XML form, written as it goes.
struct Plist {
    writer: Writer,
}

impl Plist {
    fn new() -> Plist {
        let mut writer = Writer::new(PLIST_PROLOG);
        writer.open("plist", &[("version", "1.0")]);
        Plist { writer }
    }

    fn open_dict(&mut self) {
        self.writer.open("dict", &[]);
    }

    fn open_array(&mut self) {
        self.writer.open("array", &[]);
    }

    fn close(&mut self) {
        self.writer.close();
    }

    fn key(&mut self, key: &str) {
        self.writer.leaf("key", key);
    }

    fn string(&mut self, key: &str, value: &str) {
        self.key(key);
        self.writer.leaf("string", value);
    }

    fn integer(&mut self, key: &str, value: u16) {
        self.key(key);
        self.writer.leaf("integer", &value.to_string());
    }

    fn boolean(&mut self, key: &str, value: bool) {
        self.key(key);
        self.writer.empty(if value { "true" } else { "false" });
    }

    fn finish(self) -> String {
        self.writer.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuids_are_version_8_and_stable() {
        let a = uuid("example.com", "a@example.com", "account");
        assert_eq!(a, uuid("EXAMPLE.com", "a@example.com", "account"));
        assert_ne!(a, uuid("example.com", "b@example.com", "account"));
        assert_ne!(a, uuid("example.com", "a@example.com", "configuration"));
        // Length prefixes keep ("ab", "c") and ("a", "bc") apart.
        assert_ne!(uuid("ab", "c", "r"), uuid("a", "bc", "r"));
        let groups: Vec<&str> = a.split('-').collect();
        assert_eq!(
            groups.iter().map(|g| g.len()).collect::<Vec<_>>(),
            [8, 4, 4, 4, 12]
        );
        assert!(groups[2].starts_with('8'), "{a}");
        assert!("89AB".contains(&groups[3][..1]), "{a}");
    }

    #[test]
    fn reverse_dns_order() {
        assert_eq!(reverse_dns("Mail.Example.com."), "com.example.mail");
        assert_eq!(reverse_dns("localhost"), "localhost");
    }
}
