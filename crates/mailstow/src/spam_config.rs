//! `[spam]`: the spam filter, blocklists and milters (docs/spam.md; every bound in
//! docs/limits.md "Spam"). Every key is optional; `config check` prints the effective ones.

use std::time::Duration;

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};

#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct SpamSection {
    /// The built-in filter scores MX mail (default true); milters run either way.
    pub(crate) enabled: Option<bool>,
    pub(crate) junk_threshold: Option<f64>,
    pub(crate) reject_threshold: Option<f64>,
    pub(crate) greylist_threshold: Option<f64>,
    /// RFC 6647 greylisting of first-time senders (default false).
    pub(crate) greylist: Option<bool>,
    pub(crate) greylist_delay_seconds: Option<u64>,
    pub(crate) greylist_entries_max: Option<usize>,
    pub(crate) bayes_messages_min: Option<u32>,
    pub(crate) bayes_tokens_max: Option<usize>,
    pub(crate) trained_records_max: Option<usize>,
    pub(crate) reputation_rows_max: Option<usize>,
    pub(crate) models_cached_max: Option<usize>,
    pub(crate) tokenize_bytes_max: Option<usize>,
    pub(crate) tokens_per_message_max: Option<usize>,
    pub(crate) dnsbl_timeout_ms: Option<u64>,
    pub(crate) dnsbl_cache_max: Option<usize>,
    pub(crate) link_domains_max: Option<usize>,
    pub(crate) training_queue_max: Option<usize>,
    pub(crate) rspamd_controller: Option<String>,
    pub(crate) rspamd_password: Option<String>,
    pub(crate) outbound_reject_threshold: Option<f64>,
    pub(crate) outbound_flagged_max: Option<u32>,
    pub(crate) outbound_limited_per_hour: Option<u32>,
    #[serde(default)]
    pub(crate) dnsbl: Vec<ZoneSection>,
    #[serde(default)]
    pub(crate) milters: Vec<MilterSection>,
}

/// `[[spam.dnsbl]]`: one DNS blocklist or allowlist (RFC 5782).
#[derive(Debug, Default, Deserialize, Serialize, Clone)]
#[serde(deny_unknown_fields)]
pub(crate) struct ZoneSection {
    pub(crate) zone: String,
    /// `ip` (the client's address, default) or `domain` (From and link domains).
    pub(crate) kind: Option<String>,
    /// Answers that mean listed: `127.0.0.2` or `127.0.0.2-127.0.0.11` (default: any 127/8
    /// but 127.0.0.1).
    pub(crate) codes: Option<Vec<String>>,
    /// Points a listing adds (default 10; negative for an allowlist).
    pub(crate) weight: Option<f64>,
    /// Refuse a listed client at connect, naming the zone (default false; `ip` zones only).
    pub(crate) reject: Option<bool>,
}

/// `[[spam.milters]]`: one filter speaking the milter protocol.
#[derive(Debug, Default, Deserialize, Serialize, Clone)]
#[serde(deny_unknown_fields)]
pub(crate) struct MilterSection {
    pub(crate) name: Option<String>,
    /// `host:port`, `inet:host:port` or `unix:/path`.
    pub(crate) address: String,
    pub(crate) connect_timeout_ms: Option<u64>,
    /// The longest wait for each reply.
    pub(crate) timeout_ms: Option<u64>,
    /// `tempfail` (default) or `accept`: what applies when the filter is down or late.
    pub(crate) default_action: Option<String>,
    /// Called for submitted mail too (default false).
    pub(crate) submission: Option<bool>,
    pub(crate) reply_bytes_max: Option<usize>,
}

fn set<T>(target: &mut T, value: Option<T>) {
    if let Some(v) = value {
        *target = v;
    }
}

impl SpamSection {
    pub(crate) fn filter_config(&self) -> Result<filter::Config> {
        let mut c = filter::Config::default();
        set(&mut c.enabled, self.enabled);
        set(&mut c.thresholds.junk, self.junk_threshold);
        set(&mut c.thresholds.reject, self.reject_threshold);
        set(&mut c.thresholds.greylist, self.greylist_threshold);
        set(&mut c.greylist, self.greylist);
        set(
            &mut c.greylist_delay,
            self.greylist_delay_seconds.map(Duration::from_secs),
        );
        set(&mut c.greylist_entries_max, self.greylist_entries_max);
        set(&mut c.bayes_messages_min, self.bayes_messages_min);
        set(&mut c.bayes_tokens_max, self.bayes_tokens_max);
        set(&mut c.trained_records_max, self.trained_records_max);
        set(&mut c.reputation_rows_max, self.reputation_rows_max);
        set(&mut c.models_cached_max, self.models_cached_max);
        set(&mut c.tokenize_bytes_max, self.tokenize_bytes_max);
        set(&mut c.tokens_per_message_max, self.tokens_per_message_max);
        set(
            &mut c.dnsbl_timeout,
            self.dnsbl_timeout_ms.map(Duration::from_millis),
        );
        set(&mut c.dnsbl_cache_max, self.dnsbl_cache_max);
        set(&mut c.link_domains_max, self.link_domains_max);
        set(&mut c.training_queue_max, self.training_queue_max);
        c.rspamd_controller = self.rspamd_controller.clone().filter(|s| !s.is_empty());
        c.rspamd_password = self.rspamd_password.clone();
        set(
            &mut c.outbound.reject_threshold,
            self.outbound_reject_threshold,
        );
        set(&mut c.outbound.flagged_max, self.outbound_flagged_max);
        set(
            &mut c.outbound.limited_per_hour,
            self.outbound_limited_per_hour,
        );
        let t = c.thresholds;
        if !(t.greylist <= t.junk && t.junk <= t.reject) {
            bail!(
                "[spam] thresholds must rise: greylist_threshold ({}) <= junk_threshold ({}) <= reject_threshold ({})",
                t.greylist,
                t.junk,
                t.reject
            );
        }
        for zone in &self.dnsbl {
            let kind = match zone.kind.as_deref().unwrap_or("ip") {
                "ip" => filter::ZoneKind::Ip,
                "domain" => filter::ZoneKind::Domain,
                other => bail!(
                    "[spam.dnsbl] zone {}: kind '{other}': use ip or domain",
                    zone.zone
                ),
            };
            if zone.zone.trim().is_empty() || zone.zone.contains(char::is_whitespace) {
                bail!("[spam.dnsbl] zone '{}' is not a DNS name", zone.zone);
            }
            let codes = zone
                .codes
                .iter()
                .flatten()
                .map(|code| {
                    code.parse::<spam::CodeRange>().map_err(|e| {
                        anyhow::anyhow!("[spam.dnsbl] zone {}: code '{code}': {e}", zone.zone)
                    })
                })
                .collect::<Result<Vec<_>>>()?;
            let reject = zone.reject.unwrap_or(false);
            if reject && kind == filter::ZoneKind::Domain {
                bail!(
                    "[spam.dnsbl] zone {}: reject applies to ip zones only",
                    zone.zone
                );
            }
            c.dnsbl.push(filter::Zone {
                zone: zone.zone.trim_end_matches('.').to_ascii_lowercase(),
                kind,
                codes,
                weight: zone.weight.unwrap_or(10.0),
                reject,
            });
        }
        for (i, m) in self.milters.iter().enumerate() {
            let name = m.name.clone().unwrap_or_else(|| format!("milter{}", i + 1));
            let address = m
                .address
                .parse::<filter::milter::MilterAddress>()
                .map_err(|e| anyhow::anyhow!("{e}"))
                .with_context(|| format!("[[spam.milters]] {name}: address '{}'", m.address))?;
            let default_action = match m.default_action.as_deref().unwrap_or("tempfail") {
                "tempfail" => filter::milter::DefaultAction::TempFail,
                "accept" => filter::milter::DefaultAction::Accept,
                other => bail!(
                    "[[spam.milters]] {name}: default_action '{other}': use tempfail or accept"
                ),
            };
            c.milters
                .push(std::sync::Arc::new(filter::milter::MilterConfig {
                    name,
                    address,
                    connect_timeout: Duration::from_millis(m.connect_timeout_ms.unwrap_or(5_000)),
                    timeout: Duration::from_millis(m.timeout_ms.unwrap_or(10_000)),
                    default_action,
                    reply_bytes_max: m.reply_bytes_max.unwrap_or(1 << 20),
                    submission: m.submission.unwrap_or(false),
                }));
        }
        Ok(c)
    }

    /// The effective section, every key filled in, for `config check`.
    pub(crate) fn effective(config: &filter::Config) -> SpamSection {
        SpamSection {
            enabled: Some(config.enabled),
            junk_threshold: Some(config.thresholds.junk),
            reject_threshold: Some(config.thresholds.reject),
            greylist_threshold: Some(config.thresholds.greylist),
            greylist: Some(config.greylist),
            greylist_delay_seconds: Some(config.greylist_delay.as_secs()),
            greylist_entries_max: Some(config.greylist_entries_max),
            bayes_messages_min: Some(config.bayes_messages_min),
            bayes_tokens_max: Some(config.bayes_tokens_max),
            trained_records_max: Some(config.trained_records_max),
            reputation_rows_max: Some(config.reputation_rows_max),
            models_cached_max: Some(config.models_cached_max),
            tokenize_bytes_max: Some(config.tokenize_bytes_max),
            tokens_per_message_max: Some(config.tokens_per_message_max),
            dnsbl_timeout_ms: Some(config.dnsbl_timeout.as_millis() as u64),
            dnsbl_cache_max: Some(config.dnsbl_cache_max),
            link_domains_max: Some(config.link_domains_max),
            training_queue_max: Some(config.training_queue_max),
            rspamd_controller: config.rspamd_controller.clone(),
            // Never printed.
            rspamd_password: config.rspamd_password.as_ref().map(|_| "(set)".to_string()),
            outbound_reject_threshold: Some(config.outbound.reject_threshold),
            outbound_flagged_max: Some(config.outbound.flagged_max),
            outbound_limited_per_hour: Some(config.outbound.limited_per_hour),
            dnsbl: config
                .dnsbl
                .iter()
                .map(|z| ZoneSection {
                    zone: z.zone.clone(),
                    kind: Some(match z.kind {
                        filter::ZoneKind::Ip => "ip".into(),
                        filter::ZoneKind::Domain => "domain".into(),
                    }),
                    codes: Some(z.codes.iter().map(|c| c.to_string()).collect()),
                    weight: Some(z.weight),
                    reject: Some(z.reject),
                })
                .collect(),
            milters: config
                .milters
                .iter()
                .map(|m| MilterSection {
                    name: Some(m.name.clone()),
                    address: m.address.to_string(),
                    connect_timeout_ms: Some(m.connect_timeout.as_millis() as u64),
                    timeout_ms: Some(m.timeout.as_millis() as u64),
                    default_action: Some(
                        match m.default_action {
                            filter::milter::DefaultAction::TempFail => "tempfail",
                            filter::milter::DefaultAction::Accept => "accept",
                        }
                        .into(),
                    ),
                    submission: Some(m.submission),
                    reply_bytes_max: Some(m.reply_bytes_max),
                })
                .collect(),
        }
    }
}
