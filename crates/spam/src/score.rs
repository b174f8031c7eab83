//! The score of a message from its evidence, and the action it calls for (docs/spam.md 2):
//! GTUBE, the Bayes probability, the sender's reputation, SPF/DKIM/DMARC, blocklists and
//! whatever else the caller weighed (milters), each a named reason with its points.

use crate::model::Counts;

/// SpamAssassin's GTUBE ("Generic Test for Unsolicited Bulk Email"), and rspamd's variant
/// that asks for the junk action instead. They share everything up to the last part.
const GTUBE_PREFIX: &[u8] = b"XJS*C4JDBQADN1.NSBN3*2IDNEN*GTUBE-STANDARD-ANTI-UBE-TEST-";
const GTUBE_REJECT_SUFFIX: &[u8] = b"EMAIL*C.34X";
const GTUBE_JUNK_SUFFIX: &[u8] = b"ADD-HEADER*C.34X";

/// Which test string a message holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Gtube {
    /// SpamAssassin's: always refused.
    Reject,
    /// rspamd's `...-ADD-HEADER*C.34X`: scored as junk.
    Junk,
}

/// The GTUBE string in the raw message (anywhere, encoded parts not decoded: the test string
/// is sent as plain text), `Reject` winning when both are there.
pub fn gtube(message: &[u8]) -> Option<Gtube> {
    let mut found = None;
    for at in memchr::memmem::find_iter(message, GTUBE_PREFIX) {
        let rest = &message[at + GTUBE_PREFIX.len()..];
        if rest.starts_with(GTUBE_REJECT_SUFFIX) {
            return Some(Gtube::Reject);
        }
        if rest.starts_with(GTUBE_JUNK_SUFFIX) {
            found = Some(Gtube::Junk);
        }
    }
    found
}

/// The SPF result for the message (RFC 7208 2.6).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum SpfResult {
    Pass,
    Fail,
    SoftFail,
    Neutral,
    #[default]
    None,
    TempError,
    PermError,
}

/// The DKIM result of the message's signatures (RFC 6376 6.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum DkimResult {
    /// At least one signature verifies.
    Pass,
    /// Signatures present, none verifies.
    Fail,
    /// No signature.
    #[default]
    None,
    TempError,
}

/// The DMARC result (RFC 7489 6.6).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum DmarcResult {
    Pass,
    Fail,
    #[default]
    None,
}

/// The sender authentication results of a message.
#[derive(Clone, Debug, Default)]
pub struct Auth {
    pub spf: SpfResult,
    pub dkim: DkimResult,
    pub dmarc: DmarcResult,
}

/// What the recipient user's history says of the sender (docs/spam.md 2, "Reputation"):
/// the counts of spam and ham under each key, None when the key is unknown or absent.
#[derive(Clone, Debug, Default)]
pub struct Reputation {
    /// The From address's.
    pub address: Option<Counts>,
    /// Whether the From domain is authenticated (DMARC pass, or SPF or DKIM pass for it):
    /// without it a good address reputation does not count, as anyone can write any From.
    pub address_authenticated: bool,
    /// The authenticated domain's (DKIM `d=` passing, SPF pass domain).
    pub domain: Option<Counts>,
    /// The client network's (/24, /48: [`crate::network_key`]).
    pub network: Option<Counts>,
}

impl Reputation {
    /// Whether nothing is known of the sender under any key: a first-time sender, whom
    /// greylisting may delay.
    pub fn first_time(&self) -> bool {
        [self.address, self.domain, self.network]
            .iter()
            .all(|counts| counts.is_none_or(|c| c.total() == 0))
    }
}

/// One part of a score: a name (UPPER_SNAKE, as in docs/spam.md) and its points.
#[derive(Clone, Debug, PartialEq)]
pub struct Reason {
    pub name: String,
    pub points: f64,
}

/// Everything known about a message that the score weighs.
#[derive(Clone, Debug, Default)]
pub struct Evidence {
    pub gtube: Option<Gtube>,
    /// The Bayes probability, None when no mature model could classify.
    pub bayes: Option<f64>,
    pub reputation: Reputation,
    pub auth: Auth,
    /// Blocklist hits: a name like `DNSBL_zen.example` with the zone's weight (negative for
    /// a DNSWL).
    pub listed: Vec<Reason>,
    /// Other reasons, taken as they are (milters).
    pub extra: Vec<Reason>,
}

/// The points of each test (docs/spam.md 2); `Default` gives the documented values.
#[derive(Clone, Debug, PartialEq)]
pub struct Weights {
    pub gtube: f64,
    pub gtube_junk: f64,
    /// Bayes probability below 1%.
    pub bayes_00: f64,
    /// 1% to 5%.
    pub bayes_05: f64,
    /// 5% to 20%.
    pub bayes_20: f64,
    /// 20% to 80%.
    pub bayes_50: f64,
    /// 80% to 95%.
    pub bayes_80: f64,
    /// 95% to 99%.
    pub bayes_95: f64,
    /// 99% to 99.9%.
    pub bayes_99: f64,
    /// 99.9% and above.
    pub bayes_999: f64,
    /// The weight of the From address's reputation, times (spam - ham) / (spam + ham).
    pub reputation_address: f64,
    pub reputation_domain: f64,
    pub reputation_network: f64,
    pub spf_fail: f64,
    pub spf_softfail: f64,
    /// Every DKIM signature failing.
    pub dkim_fail: f64,
    pub dmarc_fail: f64,
    pub dmarc_pass: f64,
    /// No SPF and no DKIM result at all.
    pub no_auth: f64,
}

impl Default for Weights {
    fn default() -> Self {
        Weights {
            gtube: 1000.0,
            gtube_junk: 10.0,
            bayes_00: -3.0,
            bayes_05: -1.5,
            bayes_20: -0.5,
            bayes_50: 0.0,
            bayes_80: 2.0,
            bayes_95: 4.0,
            bayes_99: 6.0,
            bayes_999: 8.0,
            reputation_address: 4.0,
            reputation_domain: 3.0,
            reputation_network: 2.0,
            spf_fail: 1.5,
            spf_softfail: 0.5,
            dkim_fail: 1.0,
            dmarc_fail: 2.0,
            dmarc_pass: -0.5,
            no_auth: 0.5,
        }
    }
}

/// A message's score: the sum of its reasons, each nonzero.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Score {
    pub points: f64,
    pub reasons: Vec<Reason>,
}

impl Score {
    /// The reasons for a log line or a header field: `BAYES_99=6.0,SPF_FAIL=1.5`, the
    /// heaviest first (by absolute points, then by name).
    pub fn reasons_text(&self) -> String {
        let mut reasons: Vec<&Reason> = self.reasons.iter().collect();
        reasons.sort_by(|a, b| {
            b.points
                .abs()
                .total_cmp(&a.points.abs())
                .then_with(|| a.name.cmp(&b.name))
        });
        let parts: Vec<String> = reasons
            .iter()
            .map(|r| format!("{}={}", r.name, points_text(r.points)))
            .collect();
        parts.join(",")
    }
}

/// Points as the fields and logs show them: one decimal, two when the second is needed.
pub(crate) fn points_text(points: f64) -> String {
    let hundredths = (points * 100.0).round();
    if hundredths == 0.0 {
        // Never `-0.0`.
        "0.0".to_string()
    } else if hundredths % 10.0 == 0.0 {
        format!("{:.1}", hundredths / 100.0)
    } else {
        format!("{:.2}", hundredths / 100.0)
    }
}

/// The score of `evidence` under `weights`.
pub fn score(evidence: &Evidence, weights: &Weights) -> Score {
    let mut reasons: Vec<Reason> = Vec::new();
    let mut add = |name: &str, points: f64| {
        if points != 0.0 && points.is_finite() {
            reasons.push(Reason {
                name: name.to_string(),
                points,
            });
        }
    };
    match evidence.gtube {
        Some(Gtube::Reject) => add("GTUBE", weights.gtube),
        Some(Gtube::Junk) => add("GTUBE_JUNK", weights.gtube_junk),
        None => {}
    }
    if let Some(probability) = evidence.bayes.filter(|p| !p.is_nan()) {
        let (name, points) = bayes(probability, weights);
        add(name, points);
    }
    let reputation = &evidence.reputation;
    if let Some(points) = reputation_points(reputation.address, weights.reputation_address)
        // A good reputation is worth something only for an authenticated From.
        && (points > 0.0 || reputation.address_authenticated)
    {
        add("REP_ADDRESS", points);
    }
    if let Some(points) = reputation_points(reputation.domain, weights.reputation_domain) {
        add("REP_DOMAIN", points);
    }
    if let Some(points) = reputation_points(reputation.network, weights.reputation_network) {
        add("REP_NETWORK", points);
    }
    let auth = &evidence.auth;
    match auth.spf {
        SpfResult::Fail => add("SPF_FAIL", weights.spf_fail),
        SpfResult::SoftFail => add("SPF_SOFTFAIL", weights.spf_softfail),
        _ => {}
    }
    if auth.dkim == DkimResult::Fail {
        add("DKIM_FAIL", weights.dkim_fail);
    }
    match auth.dmarc {
        DmarcResult::Fail => add("DMARC_FAIL", weights.dmarc_fail),
        DmarcResult::Pass => add("DMARC_PASS", weights.dmarc_pass),
        DmarcResult::None => {}
    }
    if auth.spf == SpfResult::None && auth.dkim == DkimResult::None {
        add("NO_AUTH", weights.no_auth);
    }
    for reason in evidence.listed.iter().chain(&evidence.extra) {
        add(&reason.name, reason.points);
    }
    Score {
        points: reasons.iter().map(|r| r.points).sum(),
        reasons,
    }
}

/// The Bayes test a probability falls in, SpamAssassin's names and bands.
fn bayes(probability: f64, weights: &Weights) -> (&'static str, f64) {
    let bands = [
        (0.999, "BAYES_999", weights.bayes_999),
        (0.99, "BAYES_99", weights.bayes_99),
        (0.95, "BAYES_95", weights.bayes_95),
        (0.80, "BAYES_80", weights.bayes_80),
        (0.20, "BAYES_50", weights.bayes_50),
        (0.05, "BAYES_20", weights.bayes_20),
        (0.01, "BAYES_05", weights.bayes_05),
    ];
    bands
        .iter()
        .find(|(lowest, _, _)| probability >= *lowest)
        .map_or(("BAYES_00", weights.bayes_00), |&(_, name, points)| {
            (name, points)
        })
}

/// `weight * (spam - ham) / (spam + ham)`, rounded to a tenth as the fields show it; None
/// for no counts.
fn reputation_points(counts: Option<Counts>, weight: f64) -> Option<f64> {
    let counts = counts.filter(|c| c.total() > 0)?;
    let balance = (f64::from(counts.spam) - f64::from(counts.ham)) / counts.total() as f64;
    Some((weight * balance * 10.0).round() / 10.0)
}

/// The scores at which the actions start (docs/spam.md 2; `[spam]` and the directory).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Thresholds {
    pub greylist: f64,
    pub junk: f64,
    pub reject: f64,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            greylist: 3.0,
            junk: 5.0,
            reject: 12.0,
        }
    }
}

/// What is done with a message for one recipient.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    Accept,
    /// `451 4.7.1` until the triplet retries (RFC 6647).
    Greylist,
    /// Delivered to Junk with `X-Spam-Flag: YES`.
    Junk,
    /// `550 5.7.1` after DATA.
    Reject,
}

impl Action {
    /// `accept`, `greylist`, `junk` or `reject`: the logged name and metric label.
    pub fn name(&self) -> &'static str {
        match self {
            Action::Accept => "accept",
            Action::Greylist => "greylist",
            Action::Junk => "junk",
            Action::Reject => "reject",
        }
    }
}

/// The action for a score (docs/spam.md 2, the table): greylisting only for a first-time
/// sender and when it is on.
pub fn action(points: f64, thresholds: &Thresholds, first_time: bool, greylisting: bool) -> Action {
    if points >= thresholds.reject {
        Action::Reject
    } else if points >= thresholds.junk {
        Action::Junk
    } else if points >= thresholds.greylist && first_time && greylisting {
        Action::Greylist
    } else {
        Action::Accept
    }
}

#[cfg(test)]
mod tests;
