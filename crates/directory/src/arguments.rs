//! The checks every operation runs on the names a caller gives it (domains, addresses, node
//! names): each returns the canonical form, or the error that names the bad argument.
//!
//! One module for all of them, used by `provisioning.rs`, `nodes.rs` and `dkim.rs`, so a
//! name is checked the same way whichever operation takes it.

use crate::address::{Address, LocalCase, normalize_domain, parse_address};
use crate::error::{DirectoryError, shown};

/// A domain, lowercased.
pub(crate) fn domain_arg(name: &str) -> Result<String, DirectoryError> {
    normalize_domain(name).map_err(|reason| DirectoryError::InvalidDomain {
        name: shown(name),
        reason,
    })
}

/// An address (a subaddress stays one), its local part lowercased or kept as `case` says.
pub(crate) fn address_arg(address: &str, case: LocalCase) -> Result<Address, DirectoryError> {
    parse_address(address, case).map_err(|reason| DirectoryError::InvalidAddress {
        address: shown(address),
        reason,
    })
}

/// Longest node name.
pub const NODE_NAME_BYTES_MAX: usize = 64;

/// A node name: 1 to 64 of `a-z 0-9 - _ .`, starting with a letter or digit (stored as
/// given; names are case-sensitive but the allowed set has no upper case).
pub(crate) fn node_arg(name: &str) -> Result<String, DirectoryError> {
    let bad = |reason| DirectoryError::InvalidNode {
        name: shown(name),
        reason,
    };
    if name.is_empty() || name.len() > NODE_NAME_BYTES_MAX {
        return Err(bad("use 1 to 64 characters"));
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"-_.".contains(&b))
    {
        return Err(bad("use lowercase letters, digits, '-', '_' and '.'"));
    }
    if !name.as_bytes()[0].is_ascii_alphanumeric() {
        return Err(bad("start with a letter or a digit"));
    }
    Ok(name.to_owned())
}
