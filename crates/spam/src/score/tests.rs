use super::*;

const GTUBE: &[u8] = b"XJS*C4JDBQADN1.NSBN3*2IDNEN*GTUBE-STANDARD-ANTI-UBE-TEST-EMAIL*C.34X";
const GTUBE_ADD_HEADER: &[u8] =
    b"XJS*C4JDBQADN1.NSBN3*2IDNEN*GTUBE-STANDARD-ANTI-UBE-TEST-ADD-HEADER*C.34X";

fn names(score: &Score) -> Vec<&str> {
    score.reasons.iter().map(|r| r.name.as_str()).collect()
}

#[test]
fn gtube_strings() {
    let mut message = b"Subject: test\r\n\r\nbody ".to_vec();
    assert_eq!(gtube(&message), None);
    message.extend_from_slice(GTUBE_ADD_HEADER);
    assert_eq!(gtube(&message), Some(Gtube::Junk));
    message.extend_from_slice(b"\r\n");
    message.extend_from_slice(GTUBE);
    assert_eq!(gtube(&message), Some(Gtube::Reject));
    assert_eq!(gtube(&GTUBE[..GTUBE.len() - 1]), None);
    assert_eq!(gtube(GTUBE), Some(Gtube::Reject));
}

#[test]
fn default_weights_are_docs_spam_md_2() {
    let w = Weights::default();
    assert_eq!((w.gtube, w.gtube_junk), (1000.0, 10.0));
    let bayes = [
        w.bayes_00,
        w.bayes_05,
        w.bayes_20,
        w.bayes_50,
        w.bayes_80,
        w.bayes_95,
        w.bayes_99,
        w.bayes_999,
    ];
    assert_eq!(bayes, [-3.0, -1.5, -0.5, 0.0, 2.0, 4.0, 6.0, 8.0]);
    assert_eq!(
        (
            w.reputation_address,
            w.reputation_domain,
            w.reputation_network
        ),
        (4.0, 3.0, 2.0)
    );
    assert_eq!((w.spf_fail, w.spf_softfail, w.dkim_fail), (1.5, 0.5, 1.0));
    assert_eq!((w.dmarc_fail, w.dmarc_pass, w.no_auth), (2.0, -0.5, 0.5));
    assert_eq!(
        Thresholds::default(),
        Thresholds {
            greylist: 3.0,
            junk: 5.0,
            reject: 12.0
        }
    );
}

#[test]
fn bayes_bands() {
    let w = Weights::default();
    let table = [
        (0.0, "BAYES_00", -3.0),
        (0.0099, "BAYES_00", -3.0),
        (0.01, "BAYES_05", -1.5),
        (0.05, "BAYES_20", -0.5),
        (0.5, "BAYES_50", 0.0),
        (0.8, "BAYES_80", 2.0),
        (0.95, "BAYES_95", 4.0),
        (0.99, "BAYES_99", 6.0),
        (0.9989, "BAYES_99", 6.0),
        (0.999, "BAYES_999", 8.0),
        (1.0, "BAYES_999", 8.0),
    ];
    for (probability, name, points) in table {
        assert_eq!(bayes(probability, &w), (name, points), "{probability}");
    }
    let evidence = |bayes| Evidence {
        bayes: Some(bayes),
        auth: Auth {
            spf: SpfResult::Pass,
            ..Auth::default()
        },
        ..Evidence::default()
    };
    assert_eq!(
        score(&evidence(0.5), &w),
        Score::default(),
        "BAYES_50 is 0: no reason"
    );
    assert_eq!(score(&evidence(f64::NAN), &w), Score::default());
}

#[test]
fn reputation_counts_each_key_and_good_addresses_only_when_authenticated() {
    let w = Weights::default();
    let mut evidence = Evidence {
        reputation: Reputation {
            address: Some(Counts { spam: 0, ham: 3 }),
            address_authenticated: false,
            domain: Some(Counts { spam: 1, ham: 2 }),
            network: Some(Counts { spam: 3, ham: 0 }),
        },
        auth: Auth {
            dkim: DkimResult::Pass,
            ..Auth::default()
        },
        ..Evidence::default()
    };
    let s = score(&evidence, &w);
    assert_eq!(names(&s), ["REP_DOMAIN", "REP_NETWORK"]);
    assert_eq!(s.reasons[0].points, -1.0);
    assert_eq!(s.reasons[1].points, 2.0);
    assert_eq!(s.points, 1.0);
    evidence.reputation.address_authenticated = true;
    let s = score(&evidence, &w);
    assert_eq!(
        s.reasons[0],
        Reason {
            name: "REP_ADDRESS".into(),
            points: -4.0
        }
    );
    // A bad address reputation counts, authenticated or not.
    evidence.reputation.address = Some(Counts { spam: 2, ham: 1 });
    evidence.reputation.address_authenticated = false;
    let s = score(&evidence, &w);
    assert_eq!(
        s.reasons[0],
        Reason {
            name: "REP_ADDRESS".into(),
            points: 1.3
        }
    );
}

#[test]
fn first_time_means_no_counts_anywhere() {
    assert!(Reputation::default().first_time());
    let zero = Reputation {
        address: Some(Counts::default()),
        domain: Some(Counts::default()),
        ..Reputation::default()
    };
    assert!(zero.first_time());
    let known = Reputation {
        network: Some(Counts { spam: 0, ham: 1 }),
        ..Reputation::default()
    };
    assert!(!known.first_time());
}

#[test]
fn authentication_results() {
    let w = Weights::default();
    let auth = |spf, dkim, dmarc| Evidence {
        auth: Auth { spf, dkim, dmarc },
        ..Evidence::default()
    };
    let table = [
        (
            auth(SpfResult::None, DkimResult::None, DmarcResult::None),
            vec!["NO_AUTH"],
            0.5,
        ),
        (
            auth(SpfResult::Fail, DkimResult::Fail, DmarcResult::Fail),
            vec!["SPF_FAIL", "DKIM_FAIL", "DMARC_FAIL"],
            4.5,
        ),
        (
            auth(SpfResult::SoftFail, DkimResult::None, DmarcResult::None),
            vec!["SPF_SOFTFAIL"],
            0.5,
        ),
        (
            auth(SpfResult::Pass, DkimResult::Pass, DmarcResult::Pass),
            vec!["DMARC_PASS"],
            -0.5,
        ),
        (
            auth(SpfResult::None, DkimResult::TempError, DmarcResult::None),
            vec![],
            0.0,
        ),
        (
            auth(SpfResult::PermError, DkimResult::None, DmarcResult::None),
            vec![],
            0.0,
        ),
    ];
    for (evidence, expected, points) in table {
        let s = score(&evidence, &w);
        assert_eq!(names(&s), expected, "{:?}", evidence.auth);
        assert_eq!(s.points, points);
    }
}

#[test]
fn everything_adds_up_and_reasons_text_sorts_by_weight() {
    let evidence = Evidence {
        gtube: Some(Gtube::Junk),
        bayes: Some(0.995),
        auth: Auth {
            spf: SpfResult::Fail,
            dkim: DkimResult::Pass,
            dmarc: DmarcResult::None,
        },
        listed: vec![
            Reason {
                name: "DNSBL_zen.example".into(),
                points: 3.25,
            },
            Reason {
                name: "DNSWL_list.example".into(),
                points: -1.5,
            },
            Reason {
                name: "ZERO".into(),
                points: 0.0,
            },
        ],
        extra: vec![Reason {
            name: "MILTER_clam".into(),
            points: 0.1,
        }],
        ..Evidence::default()
    };
    let s = score(&evidence, &Weights::default());
    assert_eq!(
        names(&s),
        [
            "GTUBE_JUNK",
            "BAYES_99",
            "SPF_FAIL",
            "DNSBL_zen.example",
            "DNSWL_list.example",
            "MILTER_clam"
        ]
    );
    assert!((s.points - (10.0 + 6.0 + 1.5 + 3.25 - 1.5 + 0.1)).abs() < 1e-9);
    assert_eq!(
        s.reasons_text(),
        "GTUBE_JUNK=10.0,BAYES_99=6.0,DNSBL_zen.example=3.25,DNSWL_list.example=-1.5,\
         SPF_FAIL=1.5,MILTER_clam=0.1"
    );
    assert_eq!(Score::default().reasons_text(), "");
}

#[test]
fn actions_follow_the_table() {
    let t = Thresholds::default();
    let table = [
        (12.0, true, true, Action::Reject),
        (11.9, true, true, Action::Junk),
        (5.0, false, false, Action::Junk),
        (4.9, true, true, Action::Greylist),
        (3.0, true, true, Action::Greylist),
        (4.9, false, true, Action::Accept),
        (4.9, true, false, Action::Accept),
        (2.9, true, true, Action::Accept),
        (-3.0, true, true, Action::Accept),
        (f64::NAN, true, true, Action::Accept),
    ];
    for (points, first_time, greylisting, expected) in table {
        assert_eq!(
            action(points, &t, first_time, greylisting),
            expected,
            "{points}"
        );
    }
    let names: Vec<&str> = [
        Action::Accept,
        Action::Greylist,
        Action::Junk,
        Action::Reject,
    ]
    .iter()
    .map(Action::name)
    .collect();
    assert_eq!(names, ["accept", "greylist", "junk", "reject"]);
}

#[test]
fn points_text_never_shows_minus_zero() {
    assert_eq!(points_text(-0.001), "0.0");
    assert_eq!(points_text(6.0), "6.0");
    assert_eq!(points_text(-0.25), "-0.25");
    assert_eq!(points_text(1.333), "1.33");
}
