//! The Sender Rewriting Scheme (SRS, Shevek's 2004 design as Postfix's postsrsd and
//! Pigeonhole's redirect users know it): mail we send on for a user (a Sieve `redirect`) goes
//! out with a reverse path in our domain, so the next hop's SPF check (RFC 7208) sees our
//! domain and passes, and a bounce comes back to us, where [`Srs::reverse`] finds the
//! original sender again.
//!
//! `SRS0=HHHHH=TT=domain=local@ours`: `TT` is the day (mod 1024) in base32, `HHHHH` the first
//! 25 bits of an HMAC-SHA256 over the rest, keyed by a secret of this installation, in
//! base32 (compared case-insensitively, since some MTAs lowercase addresses). Forwarding an
//! address that is already SRS0 elsewhere gives `SRS1=HHHH=thatdomain==HHHH=TT=...@ours`,
//! so the chain does not grow. An address older than [`SRS_VALID_DAYS`] or with a wrong
//! hash is refused: the scheme must not make us an open relay for bounces.

use aws_lc_rs::hmac;

/// How long a rewritten address is taken back (days).
pub const SRS_VALID_DAYS: u32 = 21;

const BASE32: &[u8; 32] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";

/// Why an address is not one of ours to reverse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SrsError {
    #[error("not an SRS address")]
    NotSrs,
    #[error("malformed SRS address")]
    Malformed,
    #[error("SRS hash does not match")]
    BadHash,
    #[error("SRS address expired")]
    Expired,
}

/// A rewriter with this installation's secret.
pub struct Srs {
    key: hmac::Key,
}

impl Srs {
    pub fn new(secret: &[u8]) -> Srs {
        Srs {
            key: hmac::Key::new(hmac::HMAC_SHA256, secret),
        }
    }

    fn hash(&self, parts: &[&str]) -> String {
        let mut context = hmac::Context::with_key(&self.key);
        for part in parts {
            context.update(part.to_ascii_lowercase().as_bytes());
            context.update(b"\0");
        }
        let tag = context.sign();
        // Base32, not SRS's usual base64: no `+` (a subaddress separator) or `/` in the
        // local part, and case does not matter.
        let bits = tag.as_ref()[..4]
            .iter()
            .fold(0u32, |acc, &b| (acc << 8) | u32::from(b));
        (0..5)
            .map(|i| BASE32[((bits >> (27 - 5 * i)) & 31) as usize] as char)
            .collect()
    }

    /// The reverse path for mail from `sender` that we send on, in `our_domain`, on day
    /// `day` (days since the Unix epoch). The null sender stays null (RFC 5321 4.5.5);
    /// an address without a domain is kept as it is.
    pub fn forward(&self, sender: &str, our_domain: &str, day: u64) -> String {
        let Some((local, domain)) = sender.rsplit_once('@') else {
            return sender.to_string();
        };
        if sender.is_empty() || domain.eq_ignore_ascii_case(our_domain) {
            return sender.to_string();
        }
        // SRS0 from elsewhere: an SRS1 that points at its forwarder.
        if let Some(rest) = strip_prefix_ci(local, "SRS0")
            && let Some(rest) = rest.strip_prefix(['=', '-', '+'])
        {
            let hash = self.hash(&[domain, rest]);
            return format!("SRS1={hash}={domain}=={rest}@{our_domain}");
        }
        if let Some(rest) = strip_prefix_ci(local, "SRS1")
            && let Some(rest) = rest.strip_prefix(['=', '-', '+'])
            && let Some((_, rest)) = rest.split_once('=')
            && let Some((first, rest)) = rest.split_once("==")
        {
            let hash = self.hash(&[first, rest]);
            return format!("SRS1={hash}={first}=={rest}@{our_domain}");
        }
        let stamp = timestamp(day);
        let hash = self.hash(&[&stamp, domain, local]);
        format!("SRS0={hash}={stamp}={domain}={local}@{our_domain}")
    }

    /// The address a bounce to `address` (an SRS address in one of our domains) goes to.
    pub fn reverse(&self, address: &str, day: u64) -> Result<String, SrsError> {
        let (local, _) = address.rsplit_once('@').ok_or(SrsError::NotSrs)?;
        if let Some(rest) = strip_prefix_ci(local, "SRS0")
            && let Some(rest) = rest.strip_prefix(['=', '-', '+'])
        {
            let mut fields = rest.splitn(4, '=');
            let (Some(hash), Some(stamp), Some(domain), Some(original)) =
                (fields.next(), fields.next(), fields.next(), fields.next())
            else {
                return Err(SrsError::Malformed);
            };
            if domain.is_empty() || original.is_empty() {
                return Err(SrsError::Malformed);
            }
            if !hash.eq_ignore_ascii_case(&self.hash(&[stamp, domain, original])) {
                return Err(SrsError::BadHash);
            }
            if !fresh(stamp, day)? {
                return Err(SrsError::Expired);
            }
            return Ok(format!("{original}@{domain}"));
        }
        if let Some(rest) = strip_prefix_ci(local, "SRS1")
            && let Some(rest) = rest.strip_prefix(['=', '-', '+'])
        {
            let (hash, rest) = rest.split_once('=').ok_or(SrsError::Malformed)?;
            let (first, srs0) = rest.split_once("==").ok_or(SrsError::Malformed)?;
            if first.is_empty() || srs0.is_empty() {
                return Err(SrsError::Malformed);
            }
            if !hash.eq_ignore_ascii_case(&self.hash(&[first, srs0])) {
                return Err(SrsError::BadHash);
            }
            // The bounce goes on to the forwarder that made the SRS0 address.
            return Ok(format!("SRS0={srs0}@{first}"));
        }
        Err(SrsError::NotSrs)
    }
}

fn strip_prefix_ci<'a>(text: &'a str, prefix: &str) -> Option<&'a str> {
    let head = text.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix)
        .then(|| &text[prefix.len()..])
}

/// The day mod 1024 as two base32 characters.
fn timestamp(day: u64) -> String {
    let t = (day % 1024) as usize;
    let mut s = String::with_capacity(2);
    s.push(BASE32[t >> 5] as char);
    s.push(BASE32[t & 31] as char);
    s
}

/// Whether a stamp is from the last [`SRS_VALID_DAYS`] days (it cannot be from the future).
fn fresh(stamp: &str, day: u64) -> Result<bool, SrsError> {
    let value = |c: u8| {
        BASE32
            .iter()
            .position(|&b| b == c.to_ascii_uppercase())
            .ok_or(SrsError::Malformed)
    };
    let [high, low] = stamp.as_bytes() else {
        return Err(SrsError::Malformed);
    };
    let then = (value(*high)? << 5 | value(*low)?) as u64;
    let age = (day % 1024 + 1024 - then) % 1024;
    Ok(age <= u64::from(SRS_VALID_DAYS))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_forwarded_sender_comes_back_within_its_days() {
        let srs = Srs::new(b"secret");
        let day = 20_500;
        let forwarded = srs.forward("Alice@remote.example", "mail.ours.example", day);
        assert!(forwarded.starts_with("SRS0="), "{forwarded}");
        assert!(forwarded.ends_with("@mail.ours.example"));
        assert_eq!(
            srs.reverse(&forwarded, day + 3).unwrap(),
            "Alice@remote.example"
        );
        // Some MTAs lowercase the whole address.
        assert_eq!(
            srs.reverse(&forwarded.to_ascii_lowercase(), day).unwrap(),
            "alice@remote.example"
        );
        assert_eq!(
            srs.reverse(&forwarded, day + u64::from(SRS_VALID_DAYS) + 1),
            Err(SrsError::Expired)
        );
        // Across the 1024-day wrap.
        let late = srs.forward("a@b.example", "ours.example", 1023);
        assert_eq!(srs.reverse(&late, 1025).unwrap(), "a@b.example");
    }

    #[test]
    fn forged_and_foreign_addresses_are_refused() {
        let srs = Srs::new(b"secret");
        let forwarded = srs.forward("a@remote.example", "ours.example", 100);
        let other = Srs::new(b"another secret");
        assert_eq!(other.reverse(&forwarded, 100), Err(SrsError::BadHash));
        let tampered = forwarded.replace("remote.example", "victim.example");
        assert_eq!(srs.reverse(&tampered, 100), Err(SrsError::BadHash));
        assert_eq!(srs.reverse("bob@ours.example", 100), Err(SrsError::NotSrs));
        assert_eq!(
            srs.reverse("SRS0=x@ours.example", 100),
            Err(SrsError::Malformed)
        );
        assert_eq!(
            srs.reverse("SRS0=a=b=c@ours.example", 100),
            Err(SrsError::Malformed)
        );
    }

    #[test]
    fn null_local_and_srs_senders() {
        let srs = Srs::new(b"k");
        assert_eq!(srs.forward("", "ours.example", 1), "");
        assert_eq!(
            srs.forward("me@ours.example", "ours.example", 1),
            "me@ours.example"
        );
        // Already SRS0 at a forwarder: SRS1, which reverses to that forwarder.
        let srs0 = "SRS0=abcd=AB=orig.example=joe@fwd.example";
        let srs1 = srs.forward(srs0, "ours.example", 1);
        assert!(srs1.starts_with("SRS1="), "{srs1}");
        assert_eq!(
            srs.reverse(&srs1, 1).unwrap(),
            "SRS0=abcd=AB=orig.example=joe@fwd.example"
        );
        // SRS1 forwarded again keeps the first forwarder.
        let again = srs.forward(
            &srs1.replace("ours.example", "mid.example"),
            "ours.example",
            1,
        );
        assert!(again.starts_with("SRS1="), "{again}");
        assert_eq!(srs.reverse(&again, 1).unwrap(), srs0);
    }
}
