//! The DNS names a certificate is asked for.

use crate::Error;

/// Names in one certificate: Let's Encrypt's limit on one order.
pub const NAMES_MAX: usize = 100;

/// Length of a name in presentation form without the final dot (RFC 1035 2.3.4).
const NAME_BYTES_MAX: usize = 253;

/// Length of one label (RFC 1035 2.3.4).
const LABEL_BYTES_MAX: usize = 63;

/// The names lowercased, without a final dot, sorted and without duplicates. A name must be an
/// ASCII host name (an internationalized one in its `xn--` form); no wildcards, which neither
/// HTTP-01 nor TLS-ALPN-01 can validate (RFC 8555 7.1.3, RFC 8737 3), no IP addresses.
pub(crate) fn normalize(names: &[String]) -> Result<Vec<String>, Error> {
    if names.is_empty() {
        return Err(Error::Config("no names to put in the certificate".into()));
    }
    let mut normalized = Vec::with_capacity(names.len());
    for name in names {
        normalized.push(normalize_one(name)?);
    }
    normalized.sort();
    normalized.dedup();
    if normalized.len() > NAMES_MAX {
        return Err(Error::Config(format!(
            "{} names, at most {NAMES_MAX} in one certificate",
            normalized.len()
        )));
    }
    Ok(normalized)
}

fn normalize_one(name: &str) -> Result<String, Error> {
    let invalid = |reason| Error::Name {
        name: name.to_owned(),
        reason,
    };
    let bare = name.strip_suffix('.').unwrap_or(name).to_ascii_lowercase();
    if bare.is_empty() {
        return Err(invalid("empty"));
    }
    if bare.len() > NAME_BYTES_MAX {
        return Err(invalid("longer than 253 bytes"));
    }
    if bare.starts_with("*.") {
        return Err(invalid(
            "a wildcard needs the dns-01 challenge, which this client does not answer",
        ));
    }
    let mut labels = 0;
    for label in bare.split('.') {
        labels += 1;
        if label.is_empty() || label.len() > LABEL_BYTES_MAX {
            return Err(invalid("a label is empty or longer than 63 bytes"));
        }
        if !label
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        {
            return Err(invalid(
                "only letters, digits and '-' (an internationalized name in its xn-- form)",
            ));
        }
        if label.starts_with('-') || label.ends_with('-') {
            return Err(invalid("a label starts or ends with '-'"));
        }
    }
    if labels < 2 {
        return Err(invalid("not a fully qualified name"));
    }
    // A top-level label of digits only is an IPv4 address (RFC 3696 2).
    if bare
        .rsplit('.')
        .next()
        .is_some_and(|tld| tld.bytes().all(|b| b.is_ascii_digit()))
    {
        return Err(invalid("an IP address, not a name"));
    }
    Ok(bare)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(names: &[&str]) -> Vec<String> {
        names.iter().map(|name| name.to_string()).collect()
    }

    #[test]
    fn names_are_lowercased_sorted_and_deduplicated() {
        let names = normalize(&strings(&[
            "Mail.Example.ORG.",
            "autoconfig.example.org",
            "mail.example.org",
        ]))
        .unwrap();
        assert_eq!(
            names,
            strings(&["autoconfig.example.org", "mail.example.org"])
        );
    }

    #[test]
    fn bad_names_are_errors() {
        for name in [
            "",
            ".",
            "localhost",
            "*.example.org",
            "a..example.org",
            "-a.example.org",
            "a_b.example.org",
            "mail.exämple.org",
            "127.0.0.1",
            &format!("{}.org", "a".repeat(64)),
            &format!("{}org", "abcdefghi.".repeat(26)),
        ] {
            let error = normalize(&strings(&[name])).unwrap_err();
            assert!(matches!(error, Error::Name { .. }), "{name:?}: {error}");
        }
        assert!(matches!(normalize(&[]), Err(Error::Config(_))));
        let too_many: Vec<String> = (0..=NAMES_MAX)
            .map(|i| format!("n{i}.example.org"))
            .collect();
        assert!(matches!(normalize(&too_many), Err(Error::Config(_))));
        assert!(normalize(&too_many[..NAMES_MAX]).is_ok());
    }
}
