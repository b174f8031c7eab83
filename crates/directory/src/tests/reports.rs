//! The reports' storage: TLS-RPT and DMARC counters and their per-day bound, the reports
//! sent, and the received reports and their bound. Each check takes a `Directory`, so
//! `tests/cluster.rs` runs them on PostgreSQL too.

use std::net::IpAddr;

use super::Fixture;
use crate::{
    DAY_S, Directory, DirectoryError, DmarcDisposition, DmarcKey, DmarcPolicyPublished,
    POLICY_STRINGS_BYTES_MAX, REPORT_BYTES_MAX, ReceivedReport, ReportDay, ReportKind, SentReport,
    TlsPolicyType, TlsSessionKey,
};

/// Noon of day 20,000 (2024-10-04).
const NOON: i64 = 20_000 * DAY_S + DAY_S / 2;

async fn count(d: &Directory, sql: &str) -> i64 {
    sqlx::query_scalar(sqlx::AssertSqlSafe(sql.to_owned()))
        .fetch_one(&d.inner.pool)
        .await
        .unwrap()
}

/// Every count `report_days` and `reports_received_count` keep equals the rows it counts.
async fn counts_match_the_rows(d: &Directory) {
    for (kind, table) in [
        ("tlsrpt", "report_tls_results"),
        ("dmarc", "report_dmarc_records"),
    ] {
        let sql = format!(
            "SELECT COUNT(*) FROM report_days r WHERE r.kind = '{kind}' AND r.key_count <> \
             (SELECT COUNT(*) FROM {table} t WHERE t.day = r.day)"
        );
        assert_eq!(count(d, &sql).await, 0, "report_days of {kind}");
    }
    assert_eq!(
        count(d, "SELECT reports FROM reports_received_count").await,
        count(d, "SELECT COUNT(*) FROM reports_received").await
    );
}

fn ip(text: &str) -> IpAddr {
    text.parse().unwrap()
}

fn tls(domain: &str, mx: &str, failure: Option<&str>) -> TlsSessionKey {
    TlsSessionKey {
        policy_domain: domain.into(),
        policy_type: TlsPolicyType::Sts,
        policy_strings: vec![
            "version: STSv1".into(),
            "mode: enforce".into(),
            format!("mx: {mx}"),
            "max_age: 86400".into(),
        ],
        mx_host: mx.into(),
        receiving_ip: Some(ip("192.0.2.25")),
        failure: failure.map(str::to_owned),
    }
}

fn dmarc(domain: &str, source: &str, aligned: bool) -> DmarcKey {
    DmarcKey {
        policy_domain: domain.into(),
        source_ip: ip(source),
        disposition: if aligned {
            DmarcDisposition::None
        } else {
            DmarcDisposition::Reject
        },
        dkim_aligned: aligned,
        spf_aligned: false,
        header_from: domain.into(),
        envelope_from: "bounces.example.net".into(),
        dkim_domain: if aligned {
            domain.into()
        } else {
            String::new()
        },
        dkim_selector: if aligned { "s1".into() } else { String::new() },
        dkim_result: if aligned { "pass" } else { "none" }.into(),
        spf_domain: "bounces.example.net".into(),
        spf_helo: false,
        spf_result: "softfail".into(),
        policy: DmarcPolicyPublished {
            p: DmarcDisposition::Reject,
            sp: DmarcDisposition::Quarantine,
            adkim_strict: true,
            aspf_strict: false,
            testing: true,
        },
    }
}

#[tokio::test]
async fn tls_and_dmarc_counters_round_trip() {
    counters(&Fixture::new().await.dir).await;
}

pub(crate) async fn counters(d: &Directory) {
    let ok = tls("example.com", "mx1.example.com", None);
    let expired = tls(
        "example.com",
        "mx2.example.com",
        Some("certificate-expired"),
    );
    let plain = TlsSessionKey {
        policy_domain: "example.net".into(),
        policy_type: TlsPolicyType::NoPolicyFound,
        policy_strings: Vec::new(),
        mx_host: "mx.example.net".into(),
        receiving_ip: None,
        failure: None,
    };
    for key in [&ok, &ok, &ok, &expired, &plain] {
        d.record_tls_result(NOON, key, 100).await.unwrap();
    }
    // The next UTC day is counted apart.
    d.record_tls_result(NOON + DAY_S, &ok, 100).await.unwrap();
    let mut got = d.tls_results(20_000, "example.com").await.unwrap();
    got.sort_by(|a, b| a.key.cmp(&b.key));
    assert_eq!(got.len(), 2);
    assert_eq!((got[0].key.clone(), got[0].count), (ok.clone(), 3));
    assert_eq!((got[1].key.clone(), got[1].count), (expired, 1));
    let net = d.tls_results(20_000, "example.net").await.unwrap();
    assert_eq!(net.len(), 1);
    assert_eq!((net[0].key.clone(), net[0].count), (plain, 1));
    assert_eq!(
        d.tls_results(20_001, "example.com").await.unwrap()[0].count,
        1
    );
    assert_eq!(
        d.report_domains(ReportKind::TlsRpt, 20_000).await.unwrap(),
        ["example.com", "example.net"]
    );

    let pass = dmarc("example.org", "198.51.100.7", true);
    let fail = dmarc("example.org", "203.0.113.9", false);
    let six = dmarc("example.org", "2001:db8::6", true);
    for key in [&pass, &fail, &pass, &six] {
        d.record_dmarc(NOON, key, 100).await.unwrap();
    }
    let mut got = d.dmarc_records(20_000, "example.org").await.unwrap();
    got.sort_by(|a, b| a.key.cmp(&b.key));
    let got: Vec<(DmarcKey, u64)> = got.into_iter().map(|c| (c.key, c.count)).collect();
    let mut want = vec![(pass, 2), (fail, 1), (six, 1)];
    want.sort();
    assert_eq!(got, want);
    assert_eq!(
        d.report_days(ReportKind::Dmarc).await.unwrap(),
        [ReportDay {
            kind: ReportKind::Dmarc,
            day: 20_000,
            keys: 3,
            overflow: 0
        }]
    );
    assert_eq!(d.report_days(ReportKind::TlsRpt).await.unwrap().len(), 2);
    counts_match_the_rows(d).await;
}

#[tokio::test]
async fn past_the_rows_of_a_day_new_keys_only_count_in_the_overflow() {
    rows_per_day_bound(&Fixture::new().await.dir).await;
}

pub(crate) async fn rows_per_day_bound(d: &Directory) {
    let day = 20_010;
    let now = day * DAY_S;
    for n in 0..10 {
        let key = tls("bound.example", &format!("mx{n}.bound.example"), None);
        d.record_tls_result(now, &key, 3).await.unwrap();
        let key = dmarc("bound.example", &format!("192.0.2.{n}"), n % 2 == 0);
        d.record_dmarc(now, &key, 4).await.unwrap();
    }
    // A key kept before the bound was reached still counts.
    let kept = tls("bound.example", "mx0.bound.example", None);
    d.record_tls_result(now, &kept, 3).await.unwrap();
    let rows = d.tls_results(day, "bound.example").await.unwrap();
    assert_eq!(rows.len(), 3);
    assert_eq!(rows.iter().map(|r| r.count).sum::<u64>(), 4);
    assert_eq!(
        d.dmarc_records(day, "bound.example").await.unwrap().len(),
        4
    );
    let tls_day = d.report_days(ReportKind::TlsRpt).await.unwrap();
    let tls_day = tls_day.iter().find(|r| r.day == day).unwrap();
    assert_eq!((tls_day.keys, tls_day.overflow), (3, 7));
    let dmarc_day = d.report_days(ReportKind::Dmarc).await.unwrap();
    let dmarc_day = dmarc_day.iter().find(|r| r.day == day).unwrap();
    assert_eq!((dmarc_day.keys, dmarc_day.overflow), (4, 6));
    let sql = format!("SELECT COUNT(*) FROM report_tls_results WHERE day = {day}");
    assert_eq!(count(d, &sql).await, 3);
    counts_match_the_rows(d).await;
}

#[tokio::test]
async fn bad_counter_keys_are_refused() {
    bad_keys(&Fixture::new().await.dir).await;
}

pub(crate) async fn bad_keys(d: &Directory) {
    let invalid = |r: Result<(), DirectoryError>| {
        assert!(
            matches!(r, Err(DirectoryError::InvalidReportField { .. })),
            "{r:?}"
        );
    };
    invalid(d.record_tls_result(NOON, &tls("", "mx", None), 10).await);
    invalid(
        d.record_tls_result(NOON, &tls("a.example", "mx\r\n", None), 10)
            .await,
    );
    invalid(
        d.record_tls_result(NOON, &tls("a.example", "mx", Some("success")), 10)
            .await,
    );
    invalid(
        d.record_tls_result(NOON, &tls("a.example", "mx", Some("Bad Type")), 10)
            .await,
    );
    let mut long = tls("a.example", "mx", None);
    long.policy_strings = vec!["x".repeat(POLICY_STRINGS_BYTES_MAX + 1)];
    invalid(d.record_tls_result(NOON, &long, 10).await);
    let mut feed = tls("a.example", "mx", None);
    feed.policy_strings = vec!["mode: enforce\nmx: *".into()];
    invalid(d.record_tls_result(NOON, &feed, 10).await);
    let mut key = dmarc("a.example", "192.0.2.1", true);
    key.dkim_selector = "s".repeat(64);
    invalid(d.record_dmarc(NOON, &key, 10).await);
    let mut key = dmarc("a.example", "192.0.2.1", true);
    key.spf_result = String::new();
    invalid(d.record_dmarc(NOON, &key, 10).await);
    assert_eq!(
        count(
            d,
            "SELECT COUNT(*) FROM report_tls_results WHERE policy_domain = 'a.example'"
        )
        .await,
        0
    );
}

fn sent(kind: ReportKind, domain: &str, day: i64, rua: &[&str]) -> SentReport {
    SentReport {
        kind,
        domain: domain.into(),
        day,
        report_id: format!("{kind}.{day}.{domain}@mx.example.org"),
        sent_at: (day + 1) * DAY_S + 60,
        rua: rua.iter().map(|a| (*a).to_owned()).collect(),
        bytes: 1234,
    }
}

#[tokio::test]
async fn a_report_is_marked_sent_once_and_pruned_with_its_day() {
    sent_reports(&Fixture::new().await.dir).await;
}

pub(crate) async fn sent_reports(d: &Directory) {
    let first = sent(
        ReportKind::TlsRpt,
        "example.com",
        20_100,
        &["a@x.example", "b@y.example"],
    );
    assert!(d.mark_report_sent(&first).await.unwrap());
    let mut again = first.clone();
    again.report_id = "other".into();
    assert!(!d.mark_report_sent(&again).await.unwrap());
    assert_eq!(
        d.report_sent(ReportKind::TlsRpt, "example.com", 20_100)
            .await
            .unwrap(),
        Some(first.clone())
    );
    assert_eq!(
        d.report_sent(ReportKind::Dmarc, "example.com", 20_100)
            .await
            .unwrap(),
        None
    );
    let none = sent(ReportKind::Dmarc, "example.com", 20_101, &[]);
    assert!(d.mark_report_sent(&none).await.unwrap());
    assert_eq!(
        d.reports_sent(None, 10).await.unwrap(),
        [none.clone(), first.clone()]
    );
    assert_eq!(
        d.reports_sent(Some(ReportKind::TlsRpt), 10).await.unwrap(),
        [first]
    );
    assert!(matches!(
        d.mark_report_sent(&sent(ReportKind::Dmarc, "e.example", 1, &["a,b@x"]))
            .await,
        Err(DirectoryError::InvalidReportField { .. })
    ));
    // Counters of both days, then the older day pruned.
    d.record_tls_result(20_100 * DAY_S, &tls("example.com", "mx", None), 10)
        .await
        .unwrap();
    d.record_dmarc(20_101 * DAY_S, &dmarc("example.com", "192.0.2.1", true), 10)
        .await
        .unwrap();
    assert!(d.prune_report_days(20_101).await.unwrap() >= 3);
    assert_eq!(d.reports_sent(None, 10).await.unwrap(), [none]);
    assert!(
        d.tls_results(20_100, "example.com")
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        d.dmarc_records(20_101, "example.com").await.unwrap().len(),
        1
    );
    assert!(
        d.report_days(ReportKind::TlsRpt)
            .await
            .unwrap()
            .iter()
            .all(|r| r.day >= 20_101)
    );
    counts_match_the_rows(d).await;
}

fn received(kind: ReportKind, org: &str, n: i64) -> ReceivedReport {
    ReceivedReport {
        id: 0,
        kind,
        org: org.into(),
        report_id: format!("report-{n}"),
        domain: "example.org".into(),
        begin: n * DAY_S,
        end: (n + 1) * DAY_S - 1,
        received_at: 1_000_000 + n,
        total: 10 + n as u64,
        failed: n as u64,
    }
}

#[tokio::test]
async fn received_reports_are_kept_once_and_bounded() {
    received_reports(&Fixture::new().await.dir).await;
}

pub(crate) async fn received_reports(d: &Directory) {
    let first = received(ReportKind::Dmarc, "Mail Org", 1);
    let id = d
        .add_received_report(&first, "{\"n\":1}", 5)
        .await
        .unwrap()
        .unwrap();
    // The same report again: kept once.
    assert_eq!(
        d.add_received_report(&first, "{\"n\":1}", 5).await.unwrap(),
        None
    );
    let (shown, json) = d.received_report(id).await.unwrap().unwrap();
    assert_eq!(
        shown,
        ReceivedReport {
            id,
            ..first.clone()
        }
    );
    assert_eq!(json, "{\"n\":1}");
    assert_eq!(d.received_report(id + 1000).await.unwrap(), None);
    // Past the bound of 5, the oldest go.
    for n in 2..=8 {
        let kind = if n % 2 == 0 {
            ReportKind::TlsRpt
        } else {
            ReportKind::Dmarc
        };
        d.add_received_report(&received(kind, "Mail Org", n), "{}", 5)
            .await
            .unwrap()
            .unwrap();
    }
    assert_eq!(count(d, "SELECT COUNT(*) FROM reports_received").await, 5);
    let listed = d.received_reports(None, 100).await.unwrap();
    let ids: Vec<&str> = listed.iter().map(|r| r.report_id.as_str()).collect();
    assert_eq!(
        ids,
        ["report-8", "report-7", "report-6", "report-5", "report-4"]
    );
    let tls = d
        .received_reports(Some(ReportKind::TlsRpt), 1)
        .await
        .unwrap();
    assert_eq!(tls.len(), 1);
    assert_eq!((tls[0].report_id.as_str(), tls[0].total), ("report-8", 18));
    assert_eq!(d.received_report(id).await.unwrap(), None);
    // Too large, or a bad field: refused, nothing stored.
    let big = "x".repeat(REPORT_BYTES_MAX + 1);
    let r = d
        .add_received_report(&received(ReportKind::Dmarc, "Big", 9), &big, 5)
        .await;
    assert!(
        matches!(r, Err(DirectoryError::InvalidReportField { .. })),
        "{r:?}"
    );
    let mut bad = received(ReportKind::Dmarc, "Bad\u{0}Org", 10);
    let r = d.add_received_report(&bad, "{}", 5).await;
    assert!(
        matches!(r, Err(DirectoryError::InvalidReportField { .. })),
        "{r:?}"
    );
    bad.org = "Org".into();
    bad.report_id = String::new();
    let r = d.add_received_report(&bad, "{}", 5).await;
    assert!(
        matches!(r, Err(DirectoryError::InvalidReportField { .. })),
        "{r:?}"
    );
    // Pruned by age.
    assert_eq!(d.prune_received_reports(1_000_000 + 6).await.unwrap(), 2);
    assert_eq!(d.received_reports(None, 100).await.unwrap().len(), 3);
    counts_match_the_rows(d).await;
}

#[tokio::test]
async fn report_futures_are_send() {
    fn assert_send<T: Send>(_: &T) {}
    let f = Fixture::new().await;
    let d = &f.dir;
    let key = tls("a.example", "mx", None);
    assert_send(&d.record_tls_result(1, &key, 1));
    let key = dmarc("a.example", "192.0.2.1", true);
    assert_send(&d.record_dmarc(1, &key, 1));
    let report = received(ReportKind::Dmarc, "o", 1);
    assert_send(&d.add_received_report(&report, "{}", 1));
}
