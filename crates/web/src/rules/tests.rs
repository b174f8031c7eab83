//! The generator, its quoting, reading a script back, and the bounds. The Sieve interpreter
//! is not asked: these check the text written (valid Sieve by construction).

use super::*;

const BIG: usize = 1 << 20;

fn invoices() -> Rule {
    Rule {
        name: "Invoices".into(),
        any: false,
        conditions: vec![Condition {
            field: Field::Subject,
            header: String::new(),
            op: Op::Contains,
            value: "invoice".into(),
        }],
        actions: vec![Action::Move {
            folder: "Invoices".into(),
            create: true,
        }],
        stop: false,
    }
}

fn away() -> Vacation {
    Vacation {
        enabled: true,
        start: "2025-07-01".into(),
        end: "2025-07-14".into(),
        subject: "Away".into(),
        text: "I am away.\nBack on the 15th.".into(),
        days: 7,
        addresses: vec!["ann@other.example".into()],
    }
}

/// Every kind of condition and action, and every option.
fn everything() -> Rules {
    let c = |field, header: &str, op, value: &str| Condition {
        field,
        header: header.into(),
        op,
        value: value.into(),
    };
    Rules {
        rules: vec![
            invoices(),
            Rule {
                name: "Lists".into(),
                any: true,
                conditions: vec![
                    c(Field::From, "", Op::Is, "news@list.example"),
                    c(Field::To, "", Op::Matches, "*@lists.example"),
                    c(Field::Header, "List-Id", Op::Regex, "^<[a-z]+\\.example>$"),
                    c(Field::Subject, "", Op::NotContains, "urgent"),
                    c(Field::Size, "", Op::Over, "100"),
                    c(Field::Size, "", Op::Under, "5000"),
                    c(Field::From, "", Op::Contains, "Bob"),
                ],
                actions: vec![
                    Action::Copy {
                        folder: "Lists/All".into(),
                        create: false,
                    },
                    Action::MarkRead,
                    Action::Flag,
                    Action::Keyword {
                        keyword: "$list".into(),
                    },
                    Action::Forward {
                        address: "archive@example.net".into(),
                        keep_copy: true,
                    },
                ],
                stop: true,
            },
            Rule {
                name: String::new(),
                any: false,
                conditions: vec![c(Field::From, "", Op::Is, "spam@example.com")],
                actions: vec![Action::Discard],
                stop: false,
            },
            Rule {
                name: "No".into(),
                any: false,
                conditions: vec![],
                actions: vec![Action::Reject {
                    reason: "Not here".into(),
                }],
                stop: false,
            },
            Rule {
                name: "Plain forward".into(),
                any: false,
                conditions: vec![c(Field::To, "", Op::Contains, "sales")],
                actions: vec![
                    Action::Forward {
                        address: "sales@example.net".into(),
                        keep_copy: false,
                    },
                    Action::Move {
                        folder: "Sales".into(),
                        create: false,
                    },
                ],
                stop: false,
            },
        ],
        vacation: away(),
    }
}

/// The script without its first line (the data).
fn body(script: &str) -> &str {
    script.split_once("\r\n").map_or("", |(_, rest)| rest)
}

#[test]
fn one_rule_and_the_out_of_office_reply_make_this_script() {
    let rules = Rules {
        rules: vec![invoices()],
        vacation: away(),
    };
    let script = rules.script().unwrap();
    assert!(script.starts_with(DATA_PREFIX), "{script}");
    assert_eq!(
        body(&script),
        "# Written by the Rules page of the mailstow web view. Change it there: once this\r\n\
         # script is edited by hand, the page shows it read-only (\"edit as text\").\r\n\
         require [\"date\", \"fileinto\", \"mailbox\", \"relational\", \"vacation\"];\r\n\
         \r\n\
         # Rule 1: Invoices\r\n\
         if header :contains \"subject\" \"invoice\" {\r\n    \
             fileinto :create \"Invoices\";\r\n\
         }\r\n\
         \r\n\
         # Out of office from 2025-07-01 to 2025-07-14\r\n\
         if allof (currentdate :value \"ge\" \"date\" \"2025-07-01\",\r\n          \
                   currentdate :value \"le\" \"date\" \"2025-07-14\") {\r\n\
         vacation :days 7 :subject \"Away\" :addresses [\"ann@other.example\"] text:\r\n\
         I am away.\r\n\
         Back on the 15th.\r\n\
         .\r\n\
         ;\r\n\
         }\r\n"
    );
    assert_eq!(Rules::from_script(&script, BIG), Some(rules));
}

#[test]
fn no_rules_make_a_script_with_no_require_and_an_open_ended_reply_no_dates() {
    let script = Rules::default().script().unwrap();
    assert!(!script.contains("require"), "{script}");
    assert!(!script.contains("if "), "{script}");
    let mut rules = Rules {
        vacation: Vacation {
            start: String::new(),
            end: String::new(),
            ..away()
        },
        ..Rules::default()
    };
    let script = rules.script().unwrap();
    assert!(script.contains("require [\"vacation\"];\r\n"), "{script}");
    assert!(
        script.contains("\r\n# Out of office\r\nvacation :days 7"),
        "{script}"
    );
    rules.vacation.end = "2025-07-14".into();
    let script = rules.script().unwrap();
    assert!(
        script
            .contains("if currentdate :value \"le\" \"date\" \"2025-07-14\" {\r\nvacation :days 7"),
        "{script}"
    );
    // A reply turned off keeps its text for next time, and writes no command.
    rules.vacation.enabled = false;
    let script = rules.script().unwrap();
    assert!(!script.contains("vacation :"), "{script}");
    assert_eq!(Rules::from_script(&script, BIG), Some(rules));
}

#[test]
fn every_condition_and_action_is_written_and_read_back() {
    let rules = everything();
    let script = rules.script().unwrap();
    let body = body(&script);
    for expected in [
        "require [\"copy\", \"date\", \"fileinto\", \"imap4flags\", \"mailbox\", \"regex\", \
         \"reject\", \"relational\", \"vacation\"];",
        "# Rule 2: Lists\r\nif anyof (address :all :is \"from\" \"news@list.example\",\r\n        \
         header :matches [\"to\", \"cc\"] \"*@lists.example\",\r\n        \
         header :regex \"List-Id\" \"^<[a-z]+\\\\.example>$\",\r\n        \
         not header :contains \"subject\" \"urgent\",\r\n        \
         size :over 100K,\r\n        size :under 5000K,\r\n        \
         header :contains \"from\" \"Bob\") {\r\n",
        // Flags first, then the rest in the user's order, then stop.
        "    addflag \"\\\\Seen\";\r\n    addflag \"\\\\Flagged\";\r\n    addflag \"$list\";\r\n    \
         fileinto :copy \"Lists/All\";\r\n    redirect :copy \"archive@example.net\";\r\n    \
         stop;\r\n}",
        "# Rule 3\r\nif address :all :is \"from\" \"spam@example.com\" {\r\n    discard;\r\n    \
         stop;\r\n}",
        "# Rule 4: No\r\nif true {\r\n    reject \"Not here\";\r\n    stop;\r\n}",
        "    redirect \"sales@example.net\";\r\n    fileinto \"Sales\";\r\n}",
    ] {
        assert!(body.contains(expected), "{expected}\nnot in\n{body}");
    }
    assert_eq!(Rules::from_script(&script, BIG), Some(rules.clone()));
    // What a textarea sends back (CRLF, or LF from a file) reads the same.
    assert_eq!(
        Rules::from_script(&script.replace("\r\n", "\n"), BIG),
        Some(rules)
    );
}

/// The value of a Sieve quoted string that starts `s` (RFC 5228 2.4.2), and what follows it.
fn unquote(s: &str) -> Option<(String, &str)> {
    let mut chars = s.strip_prefix('"')?.char_indices();
    let mut out = String::new();
    while let Some((i, c)) = chars.next() {
        match c {
            '\\' => out.push(chars.next()?.1),
            '"' => return Some((out, &s[i + 2..])),
            '\r' | '\n' => return None,
            c => out.push(c),
        }
    }
    None
}

/// The value of a `text:` multi-line string that starts `s`, and what follows it.
fn unmultiline(s: &str) -> Option<(String, &str)> {
    let mut rest = s.strip_prefix("text:\r\n")?;
    let mut lines = Vec::new();
    loop {
        let (line, after) = rest.split_once("\r\n")?;
        rest = after;
        if line == "." {
            return Some((lines.join("\n"), rest));
        }
        lines.push(line.strip_prefix('.').unwrap_or(line).to_string());
    }
}

const HOSTILE: [&str; 8] = [
    "say \"hi\"",
    "back\\slash\\",
    "\\\"",
    "\";\r\ndiscard;#",
    "\" ; stop; \"",
    "${hex:41}",
    "end with backslash \\",
    "unicode ✓ “quotes” \u{2028}",
];

#[test]
fn quoted_strings_read_back_as_written() {
    for s in HOSTILE {
        let q = quoted(s);
        let expected = s.replace(['\r', '\n'], "\u{FFFD}");
        assert_eq!(unquote(&q), Some((expected, "")), "{q}");
        assert!(!q.contains(['\r', '\n']), "{q}");
    }
}

#[test]
fn multiline_text_is_dot_stuffed_and_reads_back() {
    for text in [
        ".",
        "..",
        "a\n.\nb",
        ".hidden\n. \n.\n",
        "line\r\nwith crlf\n\nand blank",
        "text:\n.\n;discard;",
    ] {
        let m = multiline(text);
        let (back, rest) = unmultiline(&m).unwrap_or_else(|| panic!("{m:?}"));
        assert_eq!(back, text.replace("\r\n", "\n"), "{m:?}");
        assert_eq!(rest, "", "{m:?}");
        // The only lone dot is the last line.
        assert_eq!(m.matches("\r\n.\r\n").count(), 1, "{m:?}");
    }
}

#[test]
fn hostile_text_in_every_field_round_trips_and_stays_in_its_string() {
    let mut rules = everything();
    for s in [
        "quote \" and \\ backslash",
        "\\",
        "\"",
        "# not a comment",
        "}",
    ] {
        rules.rules[0].name = s.into();
        rules.rules[0].conditions[0].value = s.into();
        rules.rules[1].conditions[2].value = s.into();
        rules.rules[3].actions[0] = Action::Reject { reason: s.into() };
        rules.rules[0].actions[0] = Action::Move {
            folder: s.trim().into(),
            create: true,
        };
        rules.vacation.subject = s.into();
        rules.vacation.text = format!("{s}\n.\n..\n.{s}\n");
        let script = rules.script().unwrap();
        assert_eq!(Rules::from_script(&script, BIG), Some(rules.clone()));
        let body = body(&script);
        // Each value is one quoted string that decodes to it.
        let at = body.find("if header :contains \"subject\" ").unwrap();
        let after = &body[at + "if header :contains \"subject\" ".len()..];
        let (value, rest) = unquote(after).unwrap();
        assert_eq!(value, s);
        assert!(rest.starts_with(" {\r\n"), "{rest}");
        let at = body.find(" text:\r\n").unwrap();
        let (text, rest) = unmultiline(&body[at + 1..]).unwrap();
        assert_eq!(text, rules.vacation.text);
        assert!(rest.starts_with(";\r\n"), "{rest}");
    }
}

#[test]
fn line_breaks_and_control_characters_are_refused() {
    for bad in [
        "a\r\nb",
        "a\nstop;",
        "a\rb",
        "nul\0",
        "tab\t",
        "del\u{7f}",
        "c1\u{85}",
    ] {
        let mut rules = Rules {
            rules: vec![invoices()],
            vacation: Vacation::default(),
        };
        rules.rules[0].conditions[0].value = bad.into();
        let e = rules.script().unwrap_err();
        assert!(e.0.contains("control character"), "{bad:?}: {e}");
        let mut rules = Rules::default();
        rules.rules.push(invoices());
        rules.rules[0].name = bad.into();
        assert!(rules.script().is_err(), "{bad:?}");
        let mut rules = Rules {
            vacation: away(),
            ..Rules::default()
        };
        rules.vacation.subject = bad.into();
        assert!(rules.script().is_err(), "{bad:?}");
    }
    // The text keeps its lines and tabs, not other controls.
    let mut rules = Rules {
        vacation: away(),
        ..Rules::default()
    };
    rules.vacation.text = "a\n\tb".into();
    assert!(rules.script().is_ok());
    rules.vacation.text = "a\r\nb".into();
    assert!(rules.script().is_err());
    rules.vacation.text = "a\u{1b}[31m".into();
    assert!(rules.script().is_err());
}

#[test]
fn the_bounds_are_enforced_with_a_reason() {
    let refused = |rules: &Rules, words: &str| {
        let e = rules.script().expect_err(words);
        assert!(e.0.contains(words), "{e} lacks {words:?}");
    };
    let mut rules = Rules {
        rules: vec![invoices(); RULES_MAX],
        vacation: Vacation::default(),
    };
    assert!(rules.script().is_ok());
    rules.rules.push(invoices());
    refused(&rules, &format!("at most {RULES_MAX}"));

    let mut rule = invoices();
    rule.conditions = vec![rule.conditions[0].clone(); CONDITIONS_MAX + 1];
    refused(
        &Rules {
            rules: vec![rule],
            ..Rules::default()
        },
        &format!("at most {CONDITIONS_MAX}"),
    );
    let mut rule = invoices();
    rule.actions = vec![Action::Flag; ACTIONS_MAX + 1];
    refused(
        &Rules {
            rules: vec![rule],
            ..Rules::default()
        },
        &format!("at most {ACTIONS_MAX}"),
    );
    let mut rule = invoices();
    rule.actions.clear();
    refused(
        &Rules {
            rules: vec![rule],
            ..Rules::default()
        },
        "no action",
    );
    let mut rule = invoices();
    rule.conditions[0].value = "x".repeat(FIELD_BYTES_MAX + 1);
    refused(
        &Rules {
            rules: vec![rule],
            ..Rules::default()
        },
        &format!("longer than {FIELD_BYTES_MAX}"),
    );
    let mut rule = invoices();
    rule.conditions[0].value = "x".repeat(FIELD_BYTES_MAX);
    assert!(
        Rules {
            rules: vec![rule],
            ..Rules::default()
        }
        .script()
        .is_ok()
    );
    let mut rule = invoices();
    rule.actions.push(Action::Discard);
    refused(
        &Rules {
            rules: vec![rule],
            ..Rules::default()
        },
        "can do nothing else",
    );

    let bad_condition = |c: Condition, words: &str| {
        let mut rule = invoices();
        rule.conditions = vec![c];
        refused(
            &Rules {
                rules: vec![rule],
                ..Rules::default()
            },
            words,
        );
    };
    let size = |op, value: &str| Condition {
        field: Field::Size,
        header: String::new(),
        op,
        value: value.into(),
    };
    bad_condition(size(Op::Over, "0"), "whole number of KB");
    bad_condition(size(Op::Over, "-1"), "whole number of KB");
    bad_condition(size(Op::Over, "010"), "whole number of KB");
    bad_condition(
        size(Op::Over, &(SIZE_KB_MAX + 1).to_string()),
        "whole number of KB",
    );
    bad_condition(size(Op::Contains, "10"), "go with the size");
    bad_condition(
        Condition {
            field: Field::Subject,
            header: String::new(),
            op: Op::Over,
            value: "1".into(),
        },
        "go with the size",
    );
    for name in [
        "",
        "X Spam",
        "X-Spam:",
        "X\u{e9}",
        &"x".repeat(HEADER_NAME_BYTES_MAX + 1),
    ] {
        bad_condition(
            Condition {
                field: Field::Header,
                header: name.into(),
                op: Op::Is,
                value: "y".into(),
            },
            "header field",
        );
    }
    bad_condition(
        Condition {
            field: Field::Subject,
            header: String::new(),
            op: Op::Is,
            value: " ".into(),
        },
        "is empty",
    );

    let bad_action = |a: Action, words: &str| {
        let mut rule = invoices();
        rule.actions = vec![a];
        refused(
            &Rules {
                rules: vec![rule],
                ..Rules::default()
            },
            words,
        );
    };
    bad_action(
        Action::Move {
            folder: String::new(),
            create: true,
        },
        "is empty",
    );
    bad_action(
        Action::Move {
            folder: " Trash".into(),
            create: true,
        },
        "space",
    );
    for keyword in ["", "\\Seen", "two words", "a\"b", &"k".repeat(65)] {
        bad_action(
            Action::Keyword {
                keyword: keyword.into(),
            },
            "keyword",
        );
    }
    for address in [
        "",
        "nobody",
        "a@b",
        "a b@example.org",
        "<a@example.org>",
        "a@example.org,b@example.org",
    ] {
        bad_action(
            Action::Forward {
                address: address.into(),
                keep_copy: false,
            },
            "address",
        );
    }
    bad_action(
        Action::Reject {
            reason: String::new(),
        },
        "is empty",
    );

    let bad_vacation = |change: &dyn Fn(&mut Vacation), words: &str| {
        let mut rules = Rules {
            vacation: away(),
            ..Rules::default()
        };
        change(&mut rules.vacation);
        refused(&rules, words);
    };
    bad_vacation(&|v| v.days = 0, "1 to 30");
    bad_vacation(&|v| v.days = VACATION_DAYS_MAX + 1, "1 to 30");
    bad_vacation(&|v| v.start = "2025-02-29".into(), "not a day");
    bad_vacation(&|v| v.start = "2025-13-01".into(), "not a day");
    bad_vacation(&|v| v.end = "tomorrow".into(), "not a date");
    bad_vacation(&|v| v.end = "2025-06-30".into(), "before the start");
    bad_vacation(&|v| v.text = " \n".into(), "empty");
    bad_vacation(
        &|v| v.text = "x".repeat(VACATION_TEXT_BYTES_MAX + 1),
        "longer than",
    );
    bad_vacation(
        &|v| v.addresses = vec!["a@example.org".into(); VACATION_ADDRESSES_MAX + 1],
        "at most 20",
    );
    bad_vacation(&|v| v.addresses = vec!["not an address".into()], "address");
    // Leap days are days.
    let mut rules = Rules {
        vacation: away(),
        ..Rules::default()
    };
    rules.vacation.start = "2024-02-29".into();
    rules.vacation.end = "2024-03-01".into();
    assert!(rules.script().is_ok());
}

#[test]
fn a_script_not_exactly_as_written_is_not_read_back() {
    let rules = everything();
    let script = rules.script().unwrap();
    assert!(Rules::from_script(&script, BIG).is_some());
    // Edited by hand: a line added, a command changed.
    assert_eq!(Rules::from_script(&format!("{script}keep;\r\n"), BIG), None);
    assert_eq!(
        Rules::from_script(&script.replace("fileinto :create", "fileinto"), BIG),
        None
    );
    // Over the bound, no data line, bad base64, bad JSON.
    assert_eq!(Rules::from_script(&script, script.len() - 1), None);
    assert_eq!(Rules::from_script(body(&script), BIG), None);
    assert_eq!(Rules::from_script("keep;\r\n", BIG), None);
    assert_eq!(Rules::from_script("", BIG), None);
    assert_eq!(
        Rules::from_script(&format!("{DATA_PREFIX}!!!\r\nkeep;\r\n"), BIG),
        None
    );
    let forged = |json: &str| {
        let data = base64::engine::general_purpose::STANDARD.encode(json);
        format!("{DATA_PREFIX}{data}\r\n")
    };
    assert_eq!(Rules::from_script(&forged("{"), BIG), None);
    assert_eq!(Rules::from_script(&forged("[]"), BIG), None);
    // Data that decodes but breaks a rule (an unknown field, a control character, too many
    // rules) is refused even where the rest of the script is what it would write.
    let json = serde_json::to_string(&Rules::default()).unwrap();
    let extra = json.replacen('{', "{\"extra\":1,", 1);
    assert_eq!(Rules::from_script(&forged(&extra), BIG), None);
    let mut bad = Rules::default();
    bad.rules.push(invoices());
    bad.rules[0].conditions[0].value = "a\nb".into();
    let data = base64::engine::general_purpose::STANDARD.encode(serde_json::to_vec(&bad).unwrap());
    let written = format!("{DATA_PREFIX}{data}\r\n{}", body(&bad.write()));
    assert_eq!(Rules::from_script(&written, BIG), None);
    let many = Rules {
        rules: vec![invoices(); RULES_MAX + 1],
        vacation: Vacation::default(),
    };
    assert_eq!(Rules::from_script(&many.write(), BIG), None);
}

fn pairs(fields: &[(&str, &str)]) -> Vec<(String, String)> {
    fields
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn the_rule_form_reads_into_a_rule_and_back() {
    let posted = pairs(&[
        ("csrf", "x"),
        ("index", "new"),
        ("name", " Invoices "),
        ("match", "all"),
        ("cond_field_0", "subject"),
        ("cond_header_0", ""),
        ("cond_op_0", "contains"),
        ("cond_value_0", "invoice"),
        // Empty rows are dropped.
        ("cond_field_1", "from"),
        ("cond_op_1", "contains"),
        ("cond_value_1", ""),
        ("cond_field_2", "size"),
        ("cond_op_2", "over"),
        ("cond_value_2", " 200K "),
        ("act_kind_0", "move"),
        ("act_arg_0", " Invoices "),
        ("act_create_0", "on"),
        ("act_kind_1", ""),
        ("act_arg_1", "ignored"),
    ]);
    let form = RuleForm::parse(&posted).unwrap();
    let rule = form.rule(1).unwrap();
    let mut expected = invoices();
    expected.conditions.push(Condition {
        field: Field::Size,
        header: String::new(),
        op: Op::Over,
        value: "200".into(),
    });
    assert_eq!(rule, expected);
    assert_eq!(RuleForm::of(&rule).rule(1).unwrap(), rule);
    assert_eq!(
        describe(&rule),
        "If Subject contains “invoice” and the size is over 200 KB: move to Invoices \
         (created if missing)."
    );
    for (rule, again) in everything()
        .rules
        .iter()
        .map(|r| (r, RuleForm::of(r).rule(1)))
    {
        assert_eq!(again.as_ref(), Ok(rule));
    }

    // A row past the bound, too many fields, an unknown action, a field too long.
    let e =
        RuleForm::parse(&pairs(&[(&format!("cond_field_{CONDITIONS_MAX}"), "from")])).unwrap_err();
    assert!(e.0.contains("at most"), "{e}");
    let e = RuleForm::parse(&pairs(&[(&format!("act_kind_{ACTIONS_MAX}"), "flag")])).unwrap_err();
    assert!(e.0.contains("at most"), "{e}");
    let many: Vec<(String, String)> = (0..200).map(|i| (format!("x{i}"), String::new())).collect();
    assert!(RuleForm::parse(&many).is_err());
    let long = "x".repeat(FIELD_BYTES_MAX + 1);
    assert!(RuleForm::parse(&pairs(&[("name", &long)])).is_err());
    let form = RuleForm::parse(&pairs(&[("act_kind_0", "explode")])).unwrap();
    assert!(form.rule(1).unwrap_err().0.contains("no such action"));
    let form = RuleForm::parse(&pairs(&[
        ("cond_field_0", "body"),
        ("cond_op_0", "is"),
        ("cond_value_0", "x"),
        ("act_kind_0", "flag"),
    ]))
    .unwrap();
    assert!(form.rule(1).unwrap_err().0.contains("choose a field"));
}

#[test]
fn the_out_of_office_form_reads_into_a_reply_and_back() {
    let posted = pairs(&[
        ("csrf", "x"),
        ("enabled", "on"),
        ("start", "2025-07-01"),
        ("end", "2025-07-14"),
        ("subject", "Away"),
        ("text", "I am away.\r\nBack on the 15th.\r\n\r\n"),
        ("days", "7"),
        ("addresses", "ann@other.example\r\n"),
    ]);
    let v = VacationForm::parse(&posted).unwrap().vacation().unwrap();
    assert_eq!(v, away());
    assert_eq!(VacationForm::of(&v).vacation(), Ok(v));
    // Days default to 7; commas separate addresses too.
    let v = VacationForm::parse(&pairs(&[
        ("text", "x"),
        ("addresses", "a@example.org, b@example.org"),
    ]))
    .unwrap()
    .vacation()
    .unwrap();
    assert_eq!((v.days, v.addresses.len(), v.enabled), (7, 2, false));
    let long = "x".repeat(VACATION_TEXT_BYTES_MAX + 1);
    assert!(VacationForm::parse(&pairs(&[("text", &long)])).is_err());
    let e = VacationForm::parse(&pairs(&[("days", "many")]))
        .unwrap()
        .vacation()
        .unwrap_err();
    assert!(e.0.contains("1 to 30"), "{e}");
}
