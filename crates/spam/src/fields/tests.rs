use super::*;
use crate::score::Reason;

fn reason(name: &str, points: f64) -> Reason {
    Reason {
        name: name.to_string(),
        points,
    }
}

#[test]
fn fields_of_a_junk_verdict() {
    let score = Score {
        points: 7.5,
        reasons: vec![reason("SPF_FAIL", 1.5), reason("BAYES_99", 6.0)],
    };
    let fields = status_fields(&score, &Thresholds::default(), Action::Junk);
    assert_eq!(
        fields,
        "X-Spam-Status: Yes, score=7.5 required=5.0 reject=12.0 tests=BAYES_99=6.0,\r\n\tSPF_FAIL=1.5\r\n\
         X-Spam-Score: 7.5\r\n\
         X-Spam-Flag: YES\r\n"
    );
}

#[test]
fn fields_of_an_accepted_message_have_no_flag() {
    let fields = status_fields(&Score::default(), &Thresholds::default(), Action::Accept);
    assert_eq!(
        fields,
        "X-Spam-Status: No, score=0.0 required=5.0 reject=12.0 tests=none\r\nX-Spam-Score: 0.0\r\n"
    );
    let greylisted = Score {
        points: -0.04,
        reasons: vec![reason("DMARC_PASS", -0.04)],
    };
    let fields = status_fields(&greylisted, &Thresholds::default(), Action::Greylist);
    assert!(
        fields.starts_with("X-Spam-Status: No, score=0.0 "),
        "{fields}"
    );
    assert!(!fields.contains("X-Spam-Flag"));
}

#[test]
fn long_tests_fold_under_78_columns_and_names_cannot_inject_lines() {
    let reasons: Vec<Reason> = (0..12)
        .map(|i| reason(&format!("DNSBL_zone{i}.example"), 1.0 + f64::from(i) / 10.0))
        .chain([reason("EVIL\r\nX-Spam-Flag: NO", 0.5)])
        .collect();
    let points = reasons.iter().map(|r| r.points).sum();
    let score = Score { points, reasons };
    let fields = status_fields(&score, &Thresholds::default(), Action::Reject);
    let lines: Vec<&str> = fields.split("\r\n").collect();
    assert!(lines.len() > 4, "{fields}");
    for line in &lines {
        assert!(line.len() <= 78, "{line:?} is {} long", line.len());
    }
    let continuation = lines.iter().filter(|l| l.starts_with('\t')).count();
    assert!(continuation >= 2, "{fields}");
    assert!(fields.contains("EVIL__X-Spam-Flag:_NO=0.5"), "{fields}");
    let message = format!("{fields}Subject: s\r\n\r\nbody\r\n");
    let status = status_of(message.as_bytes()).expect("our fields");
    assert!(status.flagged);
    assert!((status.score - points).abs() < 0.05);
    assert_eq!(
        strip_status_fields(message.as_bytes()).as_ref(),
        b"Subject: s\r\n\r\nbody\r\n"
    );
}

#[test]
fn strip_removes_ours_in_any_case_with_continuations_and_only_in_the_header() {
    let message = b"Received: by x\r\nx-spam-status: Yes,\r\n\ttests=A\r\nSubject: s\r\n\
        X-SPAM-FLAG: YES\r\nX-Spam-Score: 99\r\nX-Spam-Other: kept\r\n\r\n\
        X-Spam-Flag: YES in the body\r\n";
    let stripped = strip_status_fields(message);
    assert_eq!(
        stripped.as_ref(),
        &b"Received: by x\r\nSubject: s\r\nX-Spam-Other: kept\r\n\r\n\
        X-Spam-Flag: YES in the body\r\n"[..]
    );
    assert_eq!(status_of(&stripped), None);
    let clean = b"Subject: s\r\n\r\nX-Spam-Score: 5\r\n";
    assert!(matches!(strip_status_fields(clean), Cow::Borrowed(_)));
}

#[test]
fn status_of_reads_the_first_fields() {
    let message = b"X-Spam-Score:  -1.5 \r\nX-Spam-Flag: yes\r\nX-Spam-Score: 20\r\n\r\n";
    assert_eq!(
        status_of(message),
        Some(Status {
            score: -1.5,
            flagged: true,
            thresholds: Thresholds::default(),
        })
    );
    assert_eq!(
        status_of(b"X-Spam-Score: 3\r\n\r\n"),
        Some(Status {
            score: 3.0,
            flagged: false,
            thresholds: Thresholds::default(),
        })
    );
    // The thresholds the verdict was made with travel in X-Spam-Status.
    let status = status_of(
        b"X-Spam-Status: Yes, score=7.0 required=4.0 reject=9.5 tests=X=7.0\r\nX-Spam-Score: 7.0\r\n\r\n",
    )
    .unwrap();
    assert_eq!(
        status.thresholds,
        Thresholds {
            junk: 4.0,
            reject: 9.5,
            ..Thresholds::default()
        }
    );
    assert_eq!(status.spamtest(), (10, 74));
    assert_eq!(status_of(b"X-Spam-Score: lots\r\n\r\n"), None);
    assert_eq!(status_of(b"X-Spam-Score: NaN\r\n\r\n"), None);
    assert_eq!(status_of(b"X-Spam-Flag: YES\r\n\r\n"), None);
    assert_eq!(status_of(b"Subject: x\r\n\r\nX-Spam-Score: 3\r\n"), None);
}

#[test]
fn spamtest_scales_on_junk_and_percent_on_reject() {
    let t = Thresholds::default();
    let table = [
        (-5.0, (1, 0)),
        (0.0, (1, 0)),
        (0.1, (2, 1)),
        (2.5, (5, 21)),
        (4.99, (9, 42)),
        (5.0, (10, 42)),
        (6.0, (10, 50)),
        (11.99, (10, 99)),
        (12.0, (10, 100)),
        (1000.0, (10, 100)),
        (f64::NAN, (1, 0)),
    ];
    for (score, expected) in table {
        assert_eq!(spamtest(score, &t), expected, "{score}");
    }
}
