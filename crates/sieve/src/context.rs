//! What a run knows of its surroundings: the envelope, the time, the environment.

/// The SMTP envelope of the message being delivered (RFC 5228 5.4).
#[derive(Debug, Clone, Default)]
pub struct Envelope {
    /// MAIL FROM's reverse path, without angle brackets; empty for the null sender.
    pub from: String,
    /// The recipient this delivery is for (RCPT TO), without angle brackets.
    pub to: String,
    /// The original recipient (RFC 3461 ORCPT), when known.
    pub orig_to: Option<String>,
    /// The authenticated submitter (`envelope "auth"`), when known.
    pub auth: Option<String>,
}

/// What a run knows of its surroundings.
#[derive(Debug, Clone, Default)]
pub struct Context {
    pub envelope: Envelope,
    /// Seconds since the Unix epoch, and the local offset from UTC in minutes (the `date`
    /// extension's "now" and zone).
    pub now: i64,
    pub zone_minutes: i32,
    /// `environment` items (RFC 5183 4.1): "domain", "host", "name", "version",
    /// "location" ("MDA"), "phase" ("during"), "remote-host", "remote-ip" and our own.
    pub environment: Vec<(String, String)>,
    /// The spam and virus verdicts (RFC 5235), as the header fields the spam filter adds
    /// carry them: `spamtest` 0..=10 (0 = not tested), `spamtestplus` percent, `virustest`
    /// 0..=5. `None` = not tested.
    pub spam_score: Option<u8>,
    pub spam_percent: Option<u8>,
    pub virus_score: Option<u8>,
}

/// Where a script is kept, for `include` (RFC 6609 3.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Location {
    Personal,
    Global,
}
