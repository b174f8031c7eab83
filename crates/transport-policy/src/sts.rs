//! MTA-STS policies (RFC 8461): the policy file parsed and rendered, MX patterns matched, and
//! the `_mta-sts` TXT record read. Pure: no I/O.

use std::fmt::Write as _;

/// Largest policy file taken (RFC 8461 3.3 asks senders to bound it; 64 KiB is what mox and
/// Postfix's mta-sts resolver allow). Longer is an error, never an allocation.
pub const POLICY_BYTES_MAX: usize = 64 * 1024;
/// Most `mx:` lines kept from one policy; more make the policy invalid (a real policy names a
/// handful of exchangers).
pub const MX_PATTERNS_MAX: usize = 64;
/// RFC 8461 3.2: `max_age` is at most 31557600 seconds (about a year); a larger value is
/// taken as this.
pub const MAX_AGE_MAX: u64 = 31_557_600;
/// RFC 8461 3.1: the policy id is 1 to 32 letters and digits.
pub const POLICY_ID_BYTES_MAX: usize = 32;
/// Longest host name or pattern (RFC 1035 2.3.4: 255 octets on the wire, 253 in text).
const DOMAIN_BYTES_MAX: usize = 253;

/// RFC 8461 5: what a sender does with a policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Exchangers not matching the policy are not used; TLS failures defer.
    Enforce,
    /// Failures are reported (TLS-RPT) but delivery proceeds as without a policy.
    Testing,
    /// The domain has withdrawn its policy.
    None,
}

impl Mode {
    /// The policy file's spelling.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Enforce => "enforce",
            Mode::Testing => "testing",
            Mode::None => "none",
        }
    }
}

/// An MTA-STS policy (RFC 8461 3.2).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Policy {
    pub mode: Mode,
    /// `mx:` patterns, lowercased: a host name, or `*.` and a domain (one leftmost label).
    pub mx: Vec<String>,
    /// Seconds the policy may be cached (at most [`MAX_AGE_MAX`]).
    pub max_age: u64,
}

/// Why a policy file was refused (TLS-RPT `sts-policy-invalid`).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    #[error("policy is longer than {POLICY_BYTES_MAX} bytes")]
    TooLong,
    #[error("policy is not UTF-8")]
    NotUtf8,
    #[error("policy line {0} is not `key: value`")]
    BadLine(usize),
    #[error("policy has no `version: STSv1`")]
    NoVersion,
    #[error("policy has no valid `mode`")]
    NoMode,
    #[error("policy has no valid `max_age`")]
    NoMaxAge,
    #[error("policy names no `mx`")]
    NoMx,
    #[error("policy has more than {MX_PATTERNS_MAX} `mx` lines")]
    TooManyMx,
    #[error("invalid mx pattern {0:?}")]
    BadMx(String),
}

impl Policy {
    /// Parses a policy file (RFC 8461 3.2). Lines end with CRLF or LF; unknown fields are
    /// ignored; for a repeated field other than `mx` the first one counts.
    pub fn parse(text: &[u8]) -> Result<Policy, PolicyError> {
        if text.len() > POLICY_BYTES_MAX {
            return Err(PolicyError::TooLong);
        }
        let text = std::str::from_utf8(text).map_err(|_| PolicyError::NotUtf8)?;
        let mut version = None;
        let mut mode = None;
        let mut max_age = None;
        let mut mx = Vec::new();
        for (number, line) in text.split('\n').enumerate() {
            let line = line.strip_suffix('\r').unwrap_or(line);
            // RFC 8461 3.2: the record may end with a delimiter; an empty line carries nothing.
            if line.trim_matches(is_wsp).is_empty() {
                continue;
            }
            // RFC 8461 3.2: field-delim = ":" *WSP, and *WSP after each field.
            let (key, value) = line
                .split_once(':')
                .ok_or(PolicyError::BadLine(number + 1))?;
            let value = value.trim_matches(is_wsp);
            if key.is_empty() || !key.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
                return Err(PolicyError::BadLine(number + 1));
            }
            match key.to_ascii_lowercase().as_str() {
                "version" => {
                    version.get_or_insert(value.eq_ignore_ascii_case("STSv1"));
                }
                "mode" => {
                    mode.get_or_insert(match value.to_ascii_lowercase().as_str() {
                        "enforce" => Some(Mode::Enforce),
                        "testing" => Some(Mode::Testing),
                        "none" => Some(Mode::None),
                        _ => None,
                    });
                }
                "max_age" => {
                    // RFC 8461 3.2: sts-policy-max-age-value = 1*10DIGIT.
                    let parsed = (!value.is_empty()
                        && value.len() <= 10
                        && value.bytes().all(|b| b.is_ascii_digit()))
                    .then(|| value.parse::<u64>().ok())
                    .flatten()
                    .map(|age| age.min(MAX_AGE_MAX));
                    max_age.get_or_insert(parsed);
                }
                "mx" => {
                    if mx.len() == MX_PATTERNS_MAX {
                        return Err(PolicyError::TooManyMx);
                    }
                    if !valid_pattern(value) {
                        return Err(PolicyError::BadMx(value.chars().take(80).collect()));
                    }
                    mx.push(value.to_ascii_lowercase());
                }
                // RFC 8461 3.2: unknown fields are ignored.
                _ => {}
            }
        }
        if version != Some(true) {
            return Err(PolicyError::NoVersion);
        }
        let mode = mode.flatten().ok_or(PolicyError::NoMode)?;
        let max_age = max_age.flatten().ok_or(PolicyError::NoMaxAge)?;
        // A withdrawn policy (`mode: none`) need not name exchangers.
        if mx.is_empty() && mode != Mode::None {
            return Err(PolicyError::NoMx);
        }
        Ok(Policy { mode, mx, max_age })
    }

    /// The policy file as we serve it (RFC 8461 3.2), lines ending with CRLF.
    pub fn to_text(&self) -> String {
        let mut text = String::from("version: STSv1\r\n");
        let _ = write!(text, "mode: {}\r\n", self.mode.name());
        for pattern in &self.mx {
            let _ = write!(text, "mx: {pattern}\r\n");
        }
        let _ = write!(text, "max_age: {}\r\n", self.max_age.min(MAX_AGE_MAX));
        text
    }

    /// RFC 8461 4.1: does any `mx` pattern match this exchanger?
    pub fn allows(&self, mx_host: &str) -> bool {
        self.mx.iter().any(|pattern| mx_matches(pattern, mx_host))
    }
}

fn is_wsp(c: char) -> bool {
    c == ' ' || c == '\t'
}

/// RFC 5321 Domain: dot-separated labels of letters, digits and inner hyphens.
fn valid_domain(domain: &str) -> bool {
    !domain.is_empty()
        && domain.len() <= DOMAIN_BYTES_MAX
        && domain.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        })
}

/// RFC 8461 3.2: allowed-ptn = ["*."] Domain.
fn valid_pattern(pattern: &str) -> bool {
    valid_domain(pattern.strip_prefix("*.").unwrap_or(pattern))
}

/// RFC 8461 4.1: an exact pattern matches the host name (case-insensitively, a trailing dot
/// ignored); `*.example.com` matches exactly one more label on the left
/// (`mail.example.com`, neither `example.com` nor `a.b.example.com`).
pub fn mx_matches(pattern: &str, mx_host: &str) -> bool {
    let host = mx_host.strip_suffix('.').unwrap_or(mx_host);
    match pattern.strip_prefix("*.") {
        Some(parent) => host
            .split_once('.')
            .is_some_and(|(label, rest)| !label.is_empty() && rest.eq_ignore_ascii_case(parent)),
        None => host.eq_ignore_ascii_case(pattern),
    }
}

/// Why no policy id came from the `_mta-sts` TXT records.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TxtError {
    #[error("no TXT record starts with v=STSv1")]
    None,
    #[error("more than one TXT record starts with v=STSv1")]
    Several,
    #[error("invalid MTA-STS TXT record")]
    Invalid,
}

/// RFC 8461 3.1: the policy id from `_mta-sts.DOMAIN`'s TXT records (each one its strings
/// joined). Records not starting with `v=STSv1` are ignored; more than one that does is no
/// policy. The record itself is parsed by mail-auth; the id's syntax is checked here.
pub fn txt_policy_id<R: AsRef<[u8]>>(records: &[R]) -> Result<String, TxtError> {
    use mail_auth::common::parse::TxtRecordParser as _;
    let mut found = records
        .iter()
        .map(AsRef::as_ref)
        .filter(|record| record.starts_with(b"v=STSv1"));
    let record = found.next().ok_or(TxtError::None)?;
    if found.next().is_some() {
        return Err(TxtError::Several);
    }
    let parsed = mail_auth::mta_sts::MtaSts::parse(record).map_err(|_| TxtError::Invalid)?;
    // RFC 8461 3.1: sts-id-value = 1*32(ALPHA / DIGIT).
    let id = parsed.id;
    if id.is_empty()
        || id.len() > POLICY_ID_BYTES_MAX
        || !id.bytes().all(|b| b.is_ascii_alphanumeric())
    {
        return Err(TxtError::Invalid);
    }
    Ok(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rfc_example_parses() {
        // RFC 8461 3.2's example.
        let text = b"version: STSv1\nmode: enforce\nmx: mail.example.com\nmx: *.example.net\nmx: backupmx.example.com\nmax_age: 604800\n";
        let policy = Policy::parse(text).unwrap();
        assert_eq!(policy.mode, Mode::Enforce);
        assert_eq!(
            policy.mx,
            ["mail.example.com", "*.example.net", "backupmx.example.com"]
        );
        assert_eq!(policy.max_age, 604800);
        // CRLF, spaces and tabs after the colon, no final line ending, unknown fields.
        let crlf = b"version: STSv1\r\nmode:\ttesting\r\nextension_x: 1\r\nmx:  MX.Example.COM \r\nmax_age:86400";
        let policy = Policy::parse(crlf).unwrap();
        assert_eq!(policy.mode, Mode::Testing);
        assert_eq!(policy.mx, ["mx.example.com"]);
        assert_eq!(policy.max_age, 86400);
    }

    #[test]
    fn rendering_parses_back() {
        let policy = Policy {
            mode: Mode::Enforce,
            mx: vec!["mail.example.org".into(), "*.mx.example.org".into()],
            max_age: 86400,
        };
        let text = policy.to_text();
        assert_eq!(
            text,
            "version: STSv1\r\nmode: enforce\r\nmx: mail.example.org\r\nmx: *.mx.example.org\r\nmax_age: 86400\r\n"
        );
        assert_eq!(Policy::parse(text.as_bytes()).unwrap(), policy);
    }

    #[test]
    fn bad_policies_are_errors() {
        let cases: &[(&[u8], PolicyError)] = &[
            (
                b"mode: enforce\nmx: a.b\nmax_age: 1\n",
                PolicyError::NoVersion,
            ),
            (
                b"version: STSv2\nmode: enforce\nmx: a.b\nmax_age: 1\n",
                PolicyError::NoVersion,
            ),
            (
                b"version: STSv1\nmode: strict\nmx: a.b\nmax_age: 1\n",
                PolicyError::NoMode,
            ),
            (
                b"version: STSv1\nmode: enforce\nmx: a.b\n",
                PolicyError::NoMaxAge,
            ),
            (
                b"version: STSv1\nmode: enforce\nmx: a.b\nmax_age: -1\n",
                PolicyError::NoMaxAge,
            ),
            (
                b"version: STSv1\nmode: enforce\nmx: a.b\nmax_age: 12345678901\n",
                PolicyError::NoMaxAge,
            ),
            (
                b"version: STSv1\nmode: enforce\nmax_age: 1\n",
                PolicyError::NoMx,
            ),
            (
                b"version: STSv1\nmode: enforce\nmx: *\nmax_age: 1\n",
                PolicyError::BadMx("*".into()),
            ),
            (
                b"version: STSv1\nmode: enforce\nmx: a.*.b\nmax_age: 1\n",
                PolicyError::BadMx("a.*.b".into()),
            ),
            (
                b"version: STSv1\nmode: enforce\nmx: a..b\nmax_age: 1\n",
                PolicyError::BadMx("a..b".into()),
            ),
            (
                b"version: STSv1\nmode: enforce\nmx: a.b.\nmax_age: 1\n",
                PolicyError::BadMx("a.b.".into()),
            ),
            (b"version: STSv1\ngarbage\n", PolicyError::BadLine(2)),
            (b"version: STSv1\n: x\n", PolicyError::BadLine(2)),
            (b"\xff\xfe", PolicyError::NotUtf8),
        ];
        for (text, expected) in cases {
            assert_eq!(
                Policy::parse(text).as_ref(),
                Err(expected),
                "{}",
                String::from_utf8_lossy(text)
            );
        }
        let long = vec![b'a'; POLICY_BYTES_MAX + 1];
        assert_eq!(Policy::parse(&long), Err(PolicyError::TooLong));
        let mut many = String::from("version: STSv1\nmode: enforce\nmax_age: 1\n");
        for i in 0..=MX_PATTERNS_MAX {
            many.push_str(&format!("mx: mx{i}.example.com\n"));
        }
        assert_eq!(Policy::parse(many.as_bytes()), Err(PolicyError::TooManyMx));
    }

    #[test]
    fn max_age_is_capped_and_none_needs_no_mx() {
        let policy = Policy::parse(b"version: STSv1\nmode: none\nmax_age: 9999999999\n").unwrap();
        assert_eq!(policy.mode, Mode::None);
        assert!(policy.mx.is_empty());
        assert_eq!(policy.max_age, MAX_AGE_MAX);
    }

    #[test]
    fn mx_patterns_match_as_rfc_8461_4_1_says() {
        assert!(mx_matches("mail.example.com", "mail.example.com"));
        assert!(mx_matches("mail.example.com", "MAIL.Example.com."));
        assert!(!mx_matches("mail.example.com", "mail.example.com.evil"));
        assert!(mx_matches("*.example.com", "mx1.example.com"));
        assert!(mx_matches("*.example.com", "MX1.EXAMPLE.COM."));
        assert!(!mx_matches("*.example.com", "example.com"));
        assert!(!mx_matches("*.example.com", "a.b.example.com"));
        assert!(!mx_matches("*.example.com", ".example.com"));
        assert!(!mx_matches("*.example.com", "mx1.example.com.au"));
        assert!(!mx_matches("*.example.com", "mx1example.com"));
        let policy = Policy::parse(
            b"version: STSv1\nmode: enforce\nmx: mail.example.com\nmx: *.example.net\nmax_age: 60\n",
        )
        .unwrap();
        assert!(policy.allows("mail.example.com"));
        assert!(policy.allows("a.example.net"));
        assert!(!policy.allows("mail.example.net.evil.com"));
    }

    #[test]
    fn txt_records_give_the_policy_id() {
        assert_eq!(
            txt_policy_id(&[b"v=STSv1; id=20160831085700Z;".as_slice()]),
            Ok("20160831085700Z".to_string())
        );
        assert_eq!(
            txt_policy_id(&[b"v=spf1 -all".as_slice(), b"v=STSv1;id=abc123"]),
            Ok("abc123".to_string())
        );
        assert_eq!(txt_policy_id::<&[u8]>(&[]), Err(TxtError::None));
        assert_eq!(
            txt_policy_id(&[b"v=STSv1; id=a".as_slice(), b"v=STSv1; id=b"]),
            Err(TxtError::Several)
        );
        assert_eq!(
            txt_policy_id(&[b"v=STSv1; id=has-dash".as_slice()]),
            Err(TxtError::Invalid)
        );
        assert_eq!(
            txt_policy_id(&[b"v=STSv1; id=123456789012345678901234567890123".as_slice()]),
            Err(TxtError::Invalid)
        );
        assert_eq!(
            txt_policy_id(&[b"v=STSv1;".as_slice()]),
            Err(TxtError::Invalid)
        );
        // RFC 8461 3.1: the version comes first.
        assert_eq!(
            txt_policy_id(&[b"id=a; v=STSv1".as_slice()]),
            Err(TxtError::None)
        );
    }

    proptest::proptest! {
        #[test]
        fn the_parser_never_panics(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..600)) {
            let _ = Policy::parse(&bytes);
            let _ = txt_policy_id(&[&bytes]);
        }

        #[test]
        fn policy_shaped_text_never_panics(
            lines in proptest::collection::vec("(version|mode|mx|max_age|x)[:]?[ \t]*[a-zA-Z0-9*.\\-]{0,20}[ \t]*\r?", 0..12)
        ) {
            let text = lines.join("\n");
            if let Ok(policy) = Policy::parse(text.as_bytes()) {
                proptest::prop_assert_eq!(Policy::parse(policy.to_text().as_bytes()), Ok(policy));
            }
        }
    }
}
