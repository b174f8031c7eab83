//! The records compared with what DNS answers.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::future::Future;
use std::net::IpAddr;

use crate::records::{Kind, Record, Role};
use crate::spf::{self, Judgement};

/// The most answers a finding keeps and shows: a name with more is wrong anyway, and the
/// report stays readable.
pub const FOUND_MAX: usize = 16;

/// What DNS answered for one name and type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Answer {
    /// The records, each in the presentation form [`Lookup::query`] describes.
    Records(Vec<String>),
    /// The name does not exist, or has no records of the type.
    NoRecords,
    /// No answer now (time-out, SERVFAIL, no server reachable), with why.
    Failed(String),
}

/// Asks DNS. [`crate::HickoryLookup`] asks name servers; unit tests answer from a table.
pub trait Lookup {
    /// The records of `kind` at `name` (fully qualified, lower case, with the root dot).
    /// Each in presentation form, names lower case with the root dot: MX `10 host.`; TXT the
    /// record's strings joined (RFC 7208 3.3), unquoted; SRV `0 1 993 host.`; CNAME `host.`;
    /// TLSA `3 1 1 hex`; A and AAAA the address. Records of other types in the answer (the
    /// CNAME before an A record) are left out.
    fn query(&self, name: &str, kind: Kind) -> impl Future<Output = Answer> + Send;
}

/// How one record compares with DNS.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    Ok,
    /// Nothing of the kind is published.
    Missing,
    /// Something is published, but not what it should be: what was found.
    Wrong {
        found: Vec<String>,
    },
    /// DNS did not answer: why.
    Unavailable(String),
}

/// One record and its verdict.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    pub record: Record,
    pub verdict: Verdict,
    /// What the operator should know beyond the verdict: why it is wrong, or what an `ok`
    /// could not judge.
    pub note: Option<String>,
}

/// Compares each expected record with what `lookup` answers, in order, one finding each.
/// The rules are in the crate documentation.
pub async fn check(lookup: &impl Lookup, expected: &[Record]) -> Vec<Finding> {
    let mut findings = Vec::with_capacity(expected.len());
    for record in expected {
        let (verdict, note) = match judge(lookup, record).await {
            Ok(judged) | Err(judged) => judged,
        };
        let verdict = match verdict {
            Verdict::Wrong { mut found } => {
                found.truncate(FOUND_MAX);
                Verdict::Wrong { found }
            }
            other => other,
        };
        findings.push(Finding {
            record: record.clone(),
            verdict,
            note,
        });
    }
    findings
}

type Judged = (Verdict, Option<String>);

/// The answer's records, or the verdict when there are none.
async fn answers(lookup: &impl Lookup, name: &str, kind: Kind) -> Result<Vec<String>, Judged> {
    match lookup.query(name, kind).await {
        Answer::Records(records) if !records.is_empty() => Ok(records),
        Answer::Records(_) | Answer::NoRecords => Err((Verdict::Missing, None)),
        Answer::Failed(why) => Err((Verdict::Unavailable(why), None)),
    }
}

/// The verdict on one record; `Err` is a verdict reached early (nothing there, no answer).
async fn judge(lookup: &impl Lookup, record: &Record) -> Result<Judged, Judged> {
    match &record.role {
        Role::Mx => {
            let found = answers(lookup, &record.name, Kind::Mx).await?;
            let ours = last_name(&record.value);
            let listed = found.iter().any(|mx| last_name(mx) == ours);
            Ok(ok_or_wrong(listed, found, None))
        }
        Role::Spf { host, addresses } => {
            let found = answers(lookup, &record.name, Kind::Txt).await?;
            Ok(judge_spf(&record.name, host, addresses, found))
        }
        Role::Dkim => {
            let found = answers(lookup, &record.name, Kind::Txt).await?;
            if found.len() > 1 {
                let note = "more than one record at the selector: verifiers may take either";
                return Ok(wrong(found, note));
            }
            let ours = dkim_key(&record.value);
            let same = dkim_key(&found[0]) == ours;
            Ok(ok_or_wrong(same, found, Some("another key (p=)")))
        }
        Role::Dmarc => {
            let found = only_one(lookup, record, "v=DMARC1", "RFC 7489 6.6.3").await?;
            Ok(judge_dmarc(&record.value, found))
        }
        Role::MtaSts => {
            let found = only_one(lookup, record, "v=STSv1", "RFC 8461 3.1").await?;
            let same = tag(&found, "id") == tag(&record.value, "id");
            let note = "another policy id: senders take it for a changed policy and fetch it";
            Ok(ok_or_wrong(same, vec![found], Some(note)))
        }
        Role::TlsRpt => {
            let found = only_one(lookup, record, "v=TLSRPTv1", "RFC 8460 3").await?;
            let listed = uris(tag(&found, "rua").unwrap_or_default());
            let ours = uris(tag(&record.value, "rua").unwrap_or_default());
            let note = "reports go elsewhere (rua)";
            Ok(ok_or_wrong(
                ours.is_subset(&listed),
                vec![found],
                Some(note),
            ))
        }
        Role::Srv => {
            let found = answers(lookup, &record.name, Kind::Srv).await?;
            let ours = srv_target(&record.value);
            let listed = ours.is_some() && found.iter().any(|srv| srv_target(srv) == ours);
            Ok(ok_or_wrong(listed, found, None))
        }
        Role::Alias => judge_alias(lookup, record).await,
        Role::Tlsa => {
            let found = answers(lookup, &record.name, Kind::Tlsa).await?;
            let ours = normal_words(&record.value);
            let listed = found.iter().any(|tlsa| normal_words(tlsa) == ours);
            Ok(ok_or_wrong(listed, found, None))
        }
        Role::Address => {
            let found = answers(lookup, &record.name, record.kind).await?;
            let ours = record.value.parse::<IpAddr>().ok();
            let listed = found.iter().any(|a| a.parse::<IpAddr>().ok() == ours);
            Ok(ok_or_wrong(listed, found, None))
        }
    }
}

fn ok_or_wrong(ok: bool, found: Vec<String>, note: Option<&str>) -> Judged {
    if ok {
        (Verdict::Ok, None)
    } else {
        (Verdict::Wrong { found }, note.map(str::to_string))
    }
}

fn wrong(found: Vec<String>, note: &str) -> Judged {
    (Verdict::Wrong { found }, Some(note.to_string()))
}

/// The one TXT record at the name that starts with `version`: several are wrong, since
/// receivers then act as if there were none (`rule` says where).
async fn only_one(
    lookup: &impl Lookup,
    record: &Record,
    version: &str,
    rule: &str,
) -> Result<String, Judged> {
    let found = answers(lookup, &record.name, Kind::Txt).await?;
    let mut versioned: Vec<String> = found
        .into_iter()
        .filter(|txt| starts_with_version(txt, version))
        .collect();
    match versioned.len() {
        0 => Err((Verdict::Missing, None)),
        1 => Ok(versioned.remove(0)),
        _ => Err(wrong(
            versioned,
            &format!("more than one {version} record: receivers use none ({rule})"),
        )),
    }
}

/// Whether a TXT record is of a version: `v=spf1` then a space or nothing (RFC 7208 4.5),
/// `v=DMARC1;` (RFC 7489 6.4), `v=STSv1;` (RFC 8461 3.1), `v=TLSRPTv1;` (RFC 8460 3).
fn starts_with_version(txt: &str, version: &str) -> bool {
    let txt = txt.trim_start();
    let Some(head) = txt.get(..version.len()) else {
        return false;
    };
    let after = &txt[version.len()..];
    head.eq_ignore_ascii_case(version)
        && (after.is_empty() || after.starts_with(' ') || after.trim_start().starts_with(';'))
}

/// RFC 7208 4.5: exactly one `v=spf1` record at the domain, and it authorizes us.
fn judge_spf(domain: &str, host: &str, addresses: &[IpAddr], found: Vec<String>) -> Judged {
    let spf: Vec<String> = found
        .into_iter()
        .filter(|txt| starts_with_version(txt, "v=spf1"))
        .collect();
    match spf.as_slice() {
        [] => (Verdict::Missing, None),
        [one] => match spf::judge(one, domain, host, addresses) {
            Judgement::Authorized(note) => (Verdict::Ok, note),
            Judgement::Undetermined(why) => (Verdict::Ok, Some(format!("not judged: {why}"))),
            Judgement::NotAuthorized(why) => {
                wrong(spf, &format!("it does not authorize us: {why}"))
            }
        },
        _ => wrong(
            spf,
            "more than one SPF record: a permanent error for every receiver (RFC 7208 4.5)",
        ),
    }
}

/// RFC 7489 6.3: the one DMARC record must parse (`v=DMARC1` first, a known `p=`); a policy
/// other than ours is the operator's choice, noted.
fn judge_dmarc(ours: &str, found: String) -> Judged {
    let first_is_version = found
        .split(';')
        .next()
        .is_some_and(|first| first.trim().eq_ignore_ascii_case("v=DMARC1"));
    let policy = tag(&found, "p").map(str::to_ascii_lowercase);
    let known = matches!(policy.as_deref(), Some("none" | "quarantine" | "reject"));
    if !first_is_version || !known {
        return wrong(
            vec![found],
            "it does not parse: v=DMARC1 first, then p=none|quarantine|reject",
        );
    }
    let note = (policy.as_deref() != tag(ours, "p")).then(|| {
        format!(
            "p={} where we print p={}",
            policy.unwrap_or_default(),
            tag(ours, "p").unwrap_or_default()
        )
    });
    (Verdict::Ok, note)
}

/// CNAME to our host, or else the same addresses as our host.
async fn judge_alias(lookup: &impl Lookup, record: &Record) -> Result<Judged, Judged> {
    let host = normal_name(&record.value);
    let cnames = match answers(lookup, &record.name, Kind::Cname).await {
        Ok(found) => found,
        Err((Verdict::Missing, _)) => Vec::new(),
        Err(other) => return Err(other),
    };
    if cnames.iter().any(|target| normal_name(target) == host) {
        return Ok((Verdict::Ok, None));
    }
    let named = addresses_of(lookup, &record.name).await?;
    let hosts = addresses_of(lookup, &host).await?;
    if !named.is_empty() && named == hosts {
        let note = format!("no CNAME, but the same addresses as {host}");
        return Ok((Verdict::Ok, Some(note)));
    }
    if cnames.is_empty() && named.is_empty() {
        return Err((Verdict::Missing, None));
    }
    let mut found = cnames;
    found.extend(named.iter().map(IpAddr::to_string));
    Ok(wrong(found, "it leads elsewhere"))
}

/// A name's A and AAAA records.
async fn addresses_of(lookup: &impl Lookup, name: &str) -> Result<BTreeSet<IpAddr>, Judged> {
    let mut all = BTreeSet::new();
    for kind in [Kind::A, Kind::Aaaa] {
        match answers(lookup, name, kind).await {
            Ok(found) => all.extend(found.iter().filter_map(|a| a.parse::<IpAddr>().ok())),
            Err((Verdict::Missing, _)) => {}
            Err(other) => return Err(other),
        }
    }
    Ok(all)
}

/// A name compared: lower case, with the root dot.
fn normal_name(name: &str) -> String {
    format!(
        "{}.",
        name.trim().trim_end_matches('.').to_ascii_lowercase()
    )
}

/// The last word of an MX or SRV value, the host, as a [`normal_name`].
fn last_name(value: &str) -> String {
    normal_name(value.split_ascii_whitespace().last().unwrap_or_default())
}

/// An SRV value's port and target; `None` when it does not parse.
fn srv_target(value: &str) -> Option<(u16, String)> {
    let words: Vec<&str> = value.split_ascii_whitespace().collect();
    match words.as_slice() {
        [_priority, _weight, port, target] => Some((port.parse().ok()?, normal_name(target))),
        _ => None,
    }
}

/// Words of a value, lower case, single spaces (TLSA data compared regardless of case).
fn normal_words(value: &str) -> String {
    value
        .split_ascii_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_ascii_lowercase()
}

/// A tag's value in a `tag=value; tag=value` list (RFC 6376 3.2, used by DMARC, MTA-STS and
/// TLS-RPT too), whitespace around it trimmed.
fn tag<'a>(list: &'a str, name: &str) -> Option<&'a str> {
    list.split(';').find_map(|spec| {
        let (tag, value) = spec.split_once('=')?;
        tag.trim().eq_ignore_ascii_case(name).then(|| value.trim())
    })
}

/// A DKIM record's key: `p=` without the whitespace RFC 6376 3.6.1 allows in it, or the
/// whole record so compared when it has none.
fn dkim_key(value: &str) -> String {
    let key = tag(value, "p").unwrap_or(value);
    key.chars().filter(|c| !c.is_whitespace()).collect()
}

/// A `rua` list as a set of URIs.
fn uris(list: &str) -> BTreeSet<String> {
    list.split(',')
        .map(|uri| uri.trim().to_string())
        .filter(|uri| !uri.is_empty())
        .collect()
}

/// The findings for the operator and for scripts: the contract is in the crate documentation.
pub fn render_findings(findings: &[Finding]) -> String {
    let mut out = String::new();
    let (mut ok, mut missing, mut wrong, mut unavailable) = (0, 0, 0, 0);
    for finding in findings {
        let record = &finding.record;
        let word = match &finding.verdict {
            Verdict::Ok => {
                ok += 1;
                "ok"
            }
            Verdict::Missing => {
                missing += 1;
                "missing"
            }
            Verdict::Wrong { .. } => {
                wrong += 1;
                "wrong"
            }
            Verdict::Unavailable(_) => {
                unavailable += 1;
                "unavailable"
            }
        };
        let _ = writeln!(out, "{word} {} {}", record.name, record.kind);
        if finding.verdict != Verdict::Ok {
            let _ = writeln!(out, "  expected: {}", printable(&record.value));
        }
        match &finding.verdict {
            Verdict::Wrong { found } => {
                for value in found {
                    let _ = writeln!(out, "  found: {}", printable(value));
                }
            }
            Verdict::Unavailable(why) => {
                let _ = writeln!(out, "  error: {}", printable(why));
            }
            Verdict::Ok | Verdict::Missing => {}
        }
        if let Some(note) = &finding.note {
            let _ = writeln!(out, "  note: {}", printable(note));
        }
    }
    let _ = writeln!(
        out,
        "{} records: {ok} ok, {missing} missing, {wrong} wrong, {unavailable} unavailable",
        findings.len()
    );
    out
}

/// A value from DNS on one line: control characters escaped, so an answer cannot move the
/// terminal's cursor or add lines a script would read as findings.
fn printable(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}
