//! Address and domain syntax: validation and normalisation.
//!
//! Only what a mailbox directory needs: a local part is a Dot-string (RFC 5321 4.1.2), a
//! domain is a DNS host name (letters, digits, hyphens; RFC 1035 2.3.1).
//! Quoted-string local parts, address literals (`[192.0.2.1]`) and UTF-8 (SMTPUTF8, RFC 6531)
//! are refused with a clear reason; they can be added here without touching the schema.
//!
//! Normalisation: the domain is always lowercased (DNS names are case-insensitive). The local
//! part of an address in one of *our* domains is lowercased too: the receiving host decides
//! (RFC 5321 2.4), and `Alice@` and `alice@` being different mailboxes only
//! causes lost mail. A destination in someone else's domain keeps its local part as written,
//! because that host may care.

/// Longest local part (RFC 5321 4.5.3.1.1).
pub const LOCAL_PART_BYTES_MAX: usize = 64;
/// Longest domain (RFC 5321 4.5.3.1.2).
pub const DOMAIN_BYTES_MAX: usize = 255;
/// Longest address: a path is at most 256 octets including the angle brackets
/// (RFC 5321 4.5.3.1.3), so the address inside is at most 254.
pub const ADDRESS_BYTES_MAX: usize = 254;
/// Longest DNS label (RFC 1035 2.3.4).
pub const LABEL_BYTES_MAX: usize = 63;

/// Separates a local part from its detail in subaddressing (`user+tag@dom`, RFC 5233).
pub const SUBADDRESS_SEPARATOR: char = '+';

/// Checks a domain name and returns it lowercased, or the reason it is refused.
pub(crate) fn normalize_domain(name: &str) -> Result<String, &'static str> {
    if name.is_empty() {
        return Err("empty domain");
    }
    if has_control(name) {
        return Err("contains a control character");
    }
    if name.len() > DOMAIN_BYTES_MAX {
        return Err("domain is longer than 255 octets");
    }
    if name.starts_with('[') {
        return Err("address literals are not supported");
    }
    if !name.is_ascii() {
        return Err("non-ASCII domains are not supported (use the A-label, xn--...)");
    }
    if name.ends_with('.') {
        return Err("domain ends with a dot");
    }
    for label in name.split('.') {
        if label.is_empty() {
            return Err("domain has an empty label");
        }
        if label.len() > LABEL_BYTES_MAX {
            return Err("domain label is longer than 63 octets");
        }
        if !label
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-')
        {
            return Err("domain may hold only letters, digits, hyphens and dots");
        }
        if label.starts_with('-') || label.ends_with('-') {
            return Err("domain label starts or ends with a hyphen");
        }
    }
    Ok(name.to_ascii_lowercase())
}

/// A checked address. `local` is lowercased only when asked (see the module doc).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Address {
    pub(crate) local: String,
    pub(crate) domain: String,
}

impl Address {
    pub(crate) fn joined(&self) -> String {
        format!("{}@{}", self.local, self.domain)
    }
}

/// Whether [`parse_address`] lowercases the local part.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LocalCase {
    /// An address in one of our domains: compared case-insensitively, stored lowercase.
    Fold,
    /// A destination that may be remote: kept as written.
    Keep,
}

/// Checks an address (`local@domain`) and normalises it, or returns the reason it is refused.
pub(crate) fn parse_address(address: &str, case: LocalCase) -> Result<Address, &'static str> {
    if has_control(address) {
        return Err("contains a control character");
    }
    if address.len() > ADDRESS_BYTES_MAX {
        return Err("address is longer than 254 octets");
    }
    let Some((local, domain)) = address.rsplit_once('@') else {
        return Err("missing @domain");
    };
    check_local_part(local)?;
    let domain = normalize_domain(domain)?;
    let local = match case {
        LocalCase::Fold => local.to_ascii_lowercase(),
        LocalCase::Keep => local.to_owned(),
    };
    Ok(Address { local, domain })
}

/// RFC 5321 4.1.2: Dot-string = Atom *("." Atom); Atom = 1*atext (RFC 5322 3.2.3).
fn check_local_part(local: &str) -> Result<(), &'static str> {
    if local.is_empty() {
        return Err("empty local part");
    }
    if local.len() > LOCAL_PART_BYTES_MAX {
        return Err("local part is longer than 64 octets");
    }
    if local.starts_with('"') {
        return Err("quoted local parts are not supported");
    }
    if !local.is_ascii() {
        return Err("non-ASCII local parts are not supported (SMTPUTF8)");
    }
    if local.starts_with('.') || local.ends_with('.') {
        return Err("local part starts or ends with a dot");
    }
    if local.contains("..") {
        return Err("local part has two dots in a row");
    }
    if !local.bytes().all(|b| b == b'.' || is_atext(b)) {
        return Err("local part has a character not allowed in a dot-string (RFC 5321 4.1.2)");
    }
    Ok(())
}

/// RFC 5322 3.2.3: atext.
fn is_atext(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-/=?^_`{|}~".contains(&b)
}

fn has_control(s: &str) -> bool {
    s.chars().any(char::is_control)
}

/// The base of a subaddress: `user` for `user+tag`, `None` without a separator or with an
/// empty base (`+tag` is taken literally).
pub(crate) fn subaddress_base(local: &str) -> Option<&str> {
    match local.split_once(SUBADDRESS_SEPARATOR) {
        Some((base, _detail)) if !base.is_empty() => Some(base),
        _ => None,
    }
}
